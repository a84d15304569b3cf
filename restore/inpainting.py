"""Inpainting with a learned tree-structured dictionary of patches."""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from numpy.typing import ArrayLike, NDArray
from threadpoolctl import threadpool_limits

from . import _core_diffusion
from ._config import DEFAULT_BRANCHING, default_num_threads
from ._progress import ProgressCallback, Steps
from ._validation import (
    check_callable,
    check_image,
    check_int,
    check_mask,
    check_number,
    restore_dtype,
)
from .coding import _sparse_encode
from .learning import TreeDictionaryLearning

__all__ = ["default_dictionary", "inpaint", "learn_dictionary"]

log = logging.getLogger("restore.inpainting")

_DEFAULT_DICT = "dict_grey_8x8.npz"
_MIN_COMPLETE = 2000
_LEARN_BATCH = 256  # patches per mini-batch of learn_dictionary
_LEARN_CODE_ITER = 50  # FISTA iterations per mini-batch of learn_dictionary
_MIN_PATCHES = 10  # fewer usable patches than this cannot train a dictionary
# lam of the passes, geometric from the first to the last: detail builds up as lam falls; below 0.005 the
# passes start to copy their own errors on some photos (coffee, barbara, chelsea with 70 % missing)
_DEFAULT_LAM = (0.02, 0.005)
_FIT_FLOOR = 1e-3  # floor of the fit errors in _fit_weights, relative to the variance of the known luminance
_PLANE_RIDGE = 1.0  # ridge on the slopes of the background plane fitted to each patch
_CG_TOL = 1e-3  # relative residual of the interpolation: 1e-4 or 1e-6 change its PSNR by < 0.1 dB, both ways
_CORE_MARGIN = 1  # patches touching the mask only on this outer rim are not coded (see _pass_grids)
_BAND_PX = 4_000_000  # pixels per band of the interpolation and of _passes_weight, which bounds their memory
_BAND_MARGIN = 32  # rows of context above and below each band
# the start of the passes: edge-enhancing diffusion of the biharmonic interpolant, blended with it (see _sharpen)
_EED_CONTRAST = 0.05  # contrast of the diffusivity, relative to the range of the known values
_EED_SIGMA = 1.0  # sd of the Gaussian smoothing before the structure tensor, in pixels
_EED_TRUNCATE = 2.0  # support of the Gaussian, in sd
_EED_TIME = 50.0  # diffusion time: it reaches about sqrt(2 * 50) = 10 pixels
_EED_CYCLE = 7  # explicit steps of a fast explicit diffusion cycle; the tensor is updated once per cycle
_EED_SHARE = 0.65  # weight of the diffused image in the start; the biharmonic interpolant has the rest
# on straight edges the result leans on the diffusion alone (see _passes_weight)
_EDGE_SIGMA = 1.0  # sd of the Gaussian smoothing of the start's luminance before its structure tensor
_EDGE_RHO = 2.0  # sd of the Gaussian window of the structure tensor
_EDGE_COHERENCE = (0.8, 1.1)  # the passes' result has weight 1 up to coherence 0.8, falling to 1/3 at 1


def default_dictionary() -> TreeDictionaryLearning | None:
    """The generic tree dictionary of 8x8 luminance patches shipped with the package.

    Learned on ``sample_images/`` (``benchmarks/train_default_dictionary.py``),
    centred and unit-norm patches, tree (10, 3, 3) of 131 atoms. None if the
    data file is missing from the installation.
    """
    ref = resources.files("restore") / "data" / _DEFAULT_DICT
    if not ref.is_file():
        return None
    with resources.as_file(ref) as path:
        return TreeDictionaryLearning.load(path)


def _patch_positions(shape: tuple[int, int], size: int, stride: int,
                     offset: tuple[int, int] = (0, 0)) -> tuple[np.ndarray, np.ndarray]:
    """Top-left corners of a patch grid that covers the image: every ``stride`` from ``offset``, plus the edges."""
    def axis(n: int, off: int) -> np.ndarray:
        pos = np.arange(off, n - size + 1, stride)
        return np.unique(np.concatenate(([0], pos, [n - size])))

    return axis(shape[0], offset[0]), axis(shape[1], offset[1])


def _window_sums(a: np.ndarray, size: int) -> np.ndarray:
    """Sum of ``a`` over every size x size window (integral image)."""
    c = np.zeros((a.shape[0] + 1, a.shape[1] + 1), dtype=np.int64)
    np.cumsum(np.cumsum(a, axis=0), axis=1, out=c[1:, 1:])
    return c[size:, size:] - c[:-size, size:] - c[size:, :-size] + c[:-size, :-size]


def _gather(img: np.ndarray, r: np.ndarray, c: np.ndarray, size: int) -> np.ndarray:
    """Patches (n, size*size) of a 2-D array at top-left corners (r, c), raveled row by row."""
    return sliding_window_view(img, (size, size))[r, c].reshape(len(r), -1)


def _plane_basis(n_px: int) -> np.ndarray:
    s = int(round(np.sqrt(n_px)))
    y, x = np.mgrid[0:s, 0:s]
    x = (x - (s - 1) / 2) / s
    y = (y - (s - 1) / 2) / s
    return np.stack([np.ones(n_px), x.ravel(), y.ravel()], axis=1)  # (n_px, 3)


def _centre(P: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Remove from each patch a plane fitted by least squares; scale to unit norm.

    The plane (constant plus slopes, the slopes lightly ridge-regularised)
    carries gradients across a hole better than the mean does (+0.4 dB on
    text masks); the atoms then only model the detail.

    Returns the centred, scaled patches, the plane removed (n, p) and the
    scales (n,).
    """
    Bs = _plane_basis(P.shape[1])
    ridge = np.diag([1e-9, _PLANE_RIDGE, _PLANE_RIDGE])
    plane = P @ (Bs @ np.linalg.solve(Bs.T @ Bs + ridge, Bs.T)).T
    Z = P - plane
    scale = np.maximum(np.sqrt(np.einsum("np,np->n", Z, Z)), 1e-8)
    return Z / scale[:, None], plane, scale


def _luminance(img: np.ndarray) -> np.ndarray:
    """Sum of the channels of a channels-last image over sqrt(C): the unit-norm grey axis of colour space."""
    return img.sum(axis=2) / np.sqrt(img.shape[2])


def _complete_patches(lum: np.ndarray, known: np.ndarray, size: int, n: int, rng: np.random.Generator
                      ) -> np.ndarray:
    """Up to ``n`` random complete patches (no missing pixel), centred and unit norm, near-flat ones skipped."""
    r_all, c_all = np.nonzero(_window_sums(~known, size) == 0)
    if len(r_all) == 0:
        return np.zeros((0, size * size))
    pick = rng.choice(len(r_all), size=min(n, len(r_all)), replace=False)
    P = _gather(lum, r_all[pick], c_all[pick], size).astype(np.float64)
    Z, _, scale = _centre(P)
    return Z[scale > 0.05 * np.median(scale)]


def learn_dictionary(
    images: ArrayLike | list[ArrayLike],
    *,
    masks: ArrayLike | list[ArrayLike] | None = None,
    patch_size: int = 8,
    branching: tuple[int, ...] = DEFAULT_BRANCHING,
    penalty: str = "tree_l2",
    n_atoms: int | None = None,
    lam: float = 0.1,
    n_patches: int = 50000,
    n_epochs: int = 1,
    channel_axis: int | None = None,
    init: TreeDictionaryLearning | None = None,
    rng: int | np.random.Generator | None = None,
    progress: ProgressCallback | None = None,
) -> TreeDictionaryLearning:
    """Learn a dictionary of image patches, as :func:`inpaint` uses them.

    Draws random complete patches (no pixel under ``masks``) from the
    luminance of the images (the sum of their channels over sqrt(C)),
    centres them (plane fit) and scales them to unit norm, skipping
    near-flat ones, and fits a :class:`TreeDictionaryLearning`.

    Parameters
    ----------
    images : ndarray or list of ndarray
        Images of shape (M, N), or (M, N, C) with ``channel_axis`` (any
        number of channels: the patches are taken from the luminance).
    masks : ndarray or list of ndarray, optional
        True where pixels must not be used (one per image).
    patch_size : int
        Side of the square patches.
    branching : tuple of int, default (10, 3, 3)
        Tree of the atoms, as in :class:`TreeDictionaryLearning` (131 atoms,
        as the shipped dictionary; see :func:`inpaint`).
    penalty, n_atoms, lam, n_epochs
        As in :class:`TreeDictionaryLearning`.
    n_patches : int
        Training patches in all, spread evenly over the images.
    channel_axis : int, optional
        Axis of the colour channels.
    init : TreeDictionaryLearning, optional
        Warm start (its atoms initialise the new dictionary; its tree and
        penalty are kept).
    rng : int or Generator, optional
        Randomness of the patch sample and of the learning.
    progress : callable, optional
        ``progress(done, total)`` after each mini-batch; may raise
        :class:`restore.Cancelled`.

    Returns
    -------
    TreeDictionaryLearning
        The fitted dictionary.
    """
    imgs = list(images) if isinstance(images, (list, tuple)) else [images]
    msks = list(masks) if isinstance(masks, (list, tuple)) else [masks] * len(imgs)
    if not imgs:
        raise ValueError("images is empty: give at least one image")
    if len(msks) != len(imgs):
        raise ValueError(f"give one mask per image: {len(imgs)} images, {len(msks)} masks")
    patch_size = check_int("patch_size", patch_size, min=2)
    n_patches = check_int("n_patches", n_patches)
    if init is not None:
        if not isinstance(init, TreeDictionaryLearning) or not hasattr(init, "components_"):
            raise ValueError(f"init must be a fitted TreeDictionaryLearning, got {init!r}")
        branching, penalty, n_atoms = init.branching, init.penalty, init.n_atoms
    est = TreeDictionaryLearning(tuple(branching), penalty=penalty, n_atoms=n_atoms, lam=lam, batch_size=_LEARN_BATCH,
                                 n_epochs=n_epochs, max_code_iter=_LEARN_CODE_ITER,
                                 dict_init=None if init is None else init.components_, progress=progress)
    est._check_params()  # noqa: SLF001 - fail before reading the images
    checked = []
    for i, (im, mk) in enumerate(zip(imgs, msks, strict=True)):
        name = "image" if len(imgs) == 1 else f"images[{i}]"
        img, axis = check_image(im, name=name, channel_axis=channel_axis, exact=True)
        img = img[..., None] if axis is None else np.moveaxis(img, axis, -1)
        if patch_size > min(img.shape[:2]):
            raise ValueError(f"patch_size {patch_size} is larger than {name} ({img.shape[0]}x{img.shape[1]})")
        known = np.ones(img.shape[:2], bool) if mk is None else ~check_mask(mk, img.shape[:2], name="mask")
        checked.append((img, known))
    gen = np.random.default_rng(0 if rng is None else rng)
    per = -(-n_patches // len(imgs))
    Z = np.concatenate([_complete_patches(_luminance(img), known, patch_size, per, gen) for img, known in checked])
    if len(Z) < _MIN_PATCHES:
        raise ValueError(f"only {len(Z)} usable patches (complete, not flat): give larger or less masked images")
    return est.set_params(random_state=gen).fit(Z)


def inpaint(
    image: ArrayLike,
    mask: ArrayLike,
    *,
    dictionary: TreeDictionaryLearning | str | os.PathLike | None = None,
    patch_size: int = 8,
    stride: int = 4,
    n_passes: int = 18,
    lam: float | tuple[float, float] | None = None,
    channel_axis: int | None = None,
    n_train: int = 20000,
    batch_size: int = 8192,
    max_iter: int = 25,
    rng: int | np.random.Generator | None = None,
    progress: ProgressCallback | None = None,
) -> NDArray[np.floating]:
    """Fill the masked pixels of an image from a dictionary of patches.

    The missing pixels start from the biharmonic interpolant of the known
    ones (as :func:`skimage.restoration.inpaint_biharmonic`), sharpened
    at edges by edge-enhancing diffusion (Weickert's; blended with the
    interpolant, which keeps textures better). Then
    ``n_passes`` passes refine the luminance: each takes the patches of a
    randomly shifted grid of step ``stride`` that touch the mask,
    sparse-codes them over a tree-structured dictionary and puts the
    average of their reconstructions (Gaussian weights, larger at the patch
    centre, times the inverse of each reconstruction's error on its known
    pixels) into the missing pixels. lam decreases from pass to pass, so
    that detail builds up on the start. Colour differences, smooth, keep
    the start's. On straight edges, where the diffusion is better, the
    result is a blend of the passes' result (down to a third, by the
    coherence of the start's structure tensor) and the diffusion alone.
    Known pixels are returned bit for bit; holes wider than a patch are
    filled by the interpolant and refined by the patches inside them.

    Parameters
    ----------
    image : ndarray, shape (M, N) or (M, N, C) with ``channel_axis``
        The image; float32 stays float32, integers are converted to float
        in [0, 1] (float64).
    mask : array_like of bool, shape (M, N)
        True where pixels are missing (as in
        :func:`skimage.restoration.inpaint_biharmonic`).
    dictionary : TreeDictionaryLearning or path, optional
        A fitted dictionary of centred, unit-norm luminance patches of
        ``patch_size**2`` features (see :func:`learn_dictionary`), or a
        file saved by its ``save``.
        Default: the dictionary shipped with the package, adapted to the
        image (learned from its complete patches, warm started from the
        shipped one) when it has enough of them (text, scratches; not with
        random pixel loss).
    patch_size : int, default 8
        Side of the square patches.
    stride : int, default 4
        Step of each pass's patch grid, in [1, patch_size]. A pass codes
        about 1/stride**2 of the patches touching the mask.
    n_passes : int, default 18
        Passes of patch coding. The time of the coding grows as
        ``n_passes / stride**2``: the defaults cost 1.1 times one pass at
        stride 1. 20 or 30 passes change the PSNR by less than 0.01 dB
        with 90 % of the pixels missing.
    lam : float or (float, float), optional
        Regularisation of the codes of the centred patches, each scaled to
        unit norm: one value for every pass, or the first and the last of
        a geometric sequence (default (0.02, 0.005)).
    channel_axis : int, optional
        Axis of colour channels (any number of them).
    n_train : int
        Patches used to learn a dictionary from the image.
    batch_size : int, default 8192
        Patches coded together.
    max_iter : int, default 25
        FISTA iterations per batch (30 give the same PSNR within 0.02 dB
        on the benchmark photos, for a sixth more coding time).
    rng : int or Generator, optional
        Randomness of the training-patch sample and of the grid shifts
        (default 0).
    progress : callable, optional
        ``progress(done, total)`` after each step of every stage: the
        mini-batches of the dictionary's adaptation, the bands and
        conjugate-gradient iterations of the interpolation, the cycles of
        the diffusion and the batches of patches. It may raise
        :class:`restore.Cancelled` to stop (nothing is returned then).

    Returns
    -------
    ndarray
        The inpainted image, same shape and float dtype as ``image``.

    Raises
    ------
    ValueError
        Mask of the wrong shape, mask with every pixel missing, NaN or inf
        in the image, patch larger than the image, dictionary of the wrong
        patch size, invalid ``stride``, ``n_passes`` or ``lam``.
    """
    image = np.asarray(image)
    img, axis = check_image(image, channel_axis=channel_axis, exact=True, finite=False)
    img = img[..., None] if axis is None else np.moveaxis(img, axis, -1)
    H, W, n_ch = img.shape
    M = check_mask(mask, (H, W))
    patch_size = check_int("patch_size", patch_size, min=2)
    if patch_size > min(H, W):
        raise ValueError(f"patch_size {patch_size} is larger than the image ({H}x{W})")
    stride = check_int("stride", stride, min=1, max=patch_size)
    lams = _lam_schedule(lam, check_int("n_passes", n_passes))
    n_train = check_int("n_train", n_train, min=0)
    batch_size = check_int("batch_size", batch_size)
    max_iter = check_int("max_iter", max_iter)
    check_callable("progress", progress)
    est = _resolve_dictionary(dictionary, patch_size)
    if M.all():
        raise ValueError("mask marks every pixel as missing: nothing to inpaint from")
    if not np.isfinite(img[~M]).all():
        raise ValueError("image contains NaN or infinite values at known pixels")
    out = np.array(img[..., 0] if axis is None else np.moveaxis(img, -1, axis), dtype=img.dtype, copy=True)
    if not M.any():
        return restore_dtype(out, image.dtype)
    # work in units where the known pixels reach magnitude 1 to 2: a power of two, so that the result does
    # not depend on the image's units and no intermediate overflows or underflows
    peak = float(np.max(np.abs(img[~M])))
    unit = 2.0 ** np.ceil(np.log2(peak)) if peak > 0 else 1.0
    work = np.where(M[..., None], 0, img) / img.dtype.type(unit)
    filled = _fill(work, M, est, dictionary is None, patch_size, stride, lams, n_train, batch_size, max_iter,
                   np.random.default_rng(0 if rng is None else rng), progress)
    values = filled[M] * img.dtype.type(unit)
    if axis is None:
        out[M] = values[:, 0]
    else:
        np.moveaxis(out, axis, -1)[M] = values
    out = restore_dtype(out, image.dtype)
    if image.dtype.kind == "f":  # known pixels bit for bit: from the input itself
        known = ~M if axis is None else np.expand_dims(~M, axis)
        np.copyto(out, image, where=np.broadcast_to(known, image.shape))
    return out


def _fill(img: np.ndarray, M: np.ndarray, est: TreeDictionaryLearning | None, adaptable: bool, patch_size: int,
          stride: int, lams: np.ndarray, n_train: int, batch_size: int, max_iter: int, gen: np.random.Generator,
          progress: ProgressCallback | None) -> np.ndarray:
    """The recipe of :func:`inpaint` on a validated image (channels last, known values about 1): the filled image."""
    H, W, n_ch = img.shape
    n_complete = int(np.count_nonzero(_window_sums(M, patch_size) == 0)) if adaptable else 0
    # enough complete patches: adapt to the image, warm started from the shipped dictionary. (With random
    # pixel loss there are few; the generic dictionary then does better than masked learning from scratch.)
    adapt = n_complete >= _MIN_COMPLETE
    if est is None and not adapt:
        raise ValueError(f"no dictionary for {patch_size}x{patch_size} patches ships with the package and the "
                         "image has too few complete patches to learn one: pass dictionary=")
    grids = _pass_grids(M, patch_size, stride, len(lams), gen)
    # one progress count over the stages, each step of each under about a second on 16 MP
    n_learn = -(-min(n_train, n_complete) // _LEARN_BATCH) if adapt else 0
    bands = _bands(H, W)
    n_cycles = len(_fed_cycle()[1])
    n_batches = sum(-(-len(r) // batch_size) for r, _ in grids)
    steps = Steps(progress, n_learn + len(bands) * (n_ch + 1) + n_cycles + n_batches, start=True)
    t0 = time.perf_counter()
    if adapt:
        est = learn_dictionary(img, masks=M, patch_size=patch_size, n_patches=n_train, init=est, rng=gen,
                               channel_axis=-1, progress=steps.callback(n_learn),
                               **({} if est is None else {"lam": est.lam}))
        steps.done = n_learn
    log.info("dictionary ready in %.2f s", time.perf_counter() - t0)
    t0 = time.perf_counter()
    prior = _biharmonic_fill(img, M, steps)
    prior, diffused = _sharpen(prior, M, default_num_threads(), steps.callback(n_cycles))
    t_prior = time.perf_counter() - t0
    # the dictionary codes the luminance; colour differences keep the start's (smooth: 2 to 8 % of the error)
    lum = _luminance(prior)
    start = lum[M]
    weight = _passes_weight(lum, M, steps)
    D = est.components_
    coder = (D, est.penalty, est.tree_, max_iter, np.linalg.eigh(D @ D.T))
    t0 = time.perf_counter()
    _refine_luminance(lum, M, patch_size, grids, lams, batch_size, coder, steps.callback(n_batches))
    log.info("interpolated in %.2f s, coded and averaged patches in %.2f s", t_prior, time.perf_counter() - t0)
    # weight * (start + the passes' change) + (1 - weight) * the diffusion: on straight edges the result leans
    # on the diffusion alone, not on its blend with the interpolant
    values = prior[M]
    change = (weight * (lum[M] - start) / np.sqrt(n_ch))[:, None] + (1.0 - weight)[:, None] * (diffused - values)
    prior[M] = values + change.astype(img.dtype)
    return prior


def _lam_schedule(lam: float | tuple[float, float] | None, n_passes: int) -> np.ndarray:
    """The lam of each pass: geometric from ``lam[0]`` to ``lam[1]``, or constant."""
    pair = _DEFAULT_LAM if lam is None else (lam, lam) if np.ndim(lam) == 0 else tuple(np.ravel(lam))
    if len(pair) != 2:
        raise ValueError(f"lam must be a number > 0 or a pair (first, last) of them, got {lam!r}")
    first, last = (check_number("lam", v, strict=True) for v in pair)
    return np.geomspace(first, last, n_passes)


def _aggregation_window(size: int) -> np.ndarray:
    """Weights of a patch's pixels when overlapping estimates are averaged: a Gaussian of sd size/4.

    A patch's estimate is better at its centre, where the known pixels
    surround it, than at its corners (+0.25 dB over uniform averaging on
    kodim23 with 70 % of the pixels missing, +0.13 dB on monarch text1).
    """
    g = np.exp(-0.5 * ((np.arange(size) - (size - 1) / 2) / (size / 4)) ** 2)
    return np.outer(g, g).astype(np.float32)


def _fit_weights(rec: np.ndarray, P: np.ndarray, known: np.ndarray, floor: float) -> np.ndarray:
    """Weight of each patch's reconstruction in the average: 1 / (its mean squared error on its known pixels + floor).

    Reconstructions that miss their own known pixels are trusted less
    (+0.05 dB on average over the twelve benchmark cases, every mask kind).
    A patch with no known pixel gets the mean error of the others.
    """
    n_known = known.sum(axis=1)
    err = np.einsum("np,np->n", known * (rec - P), rec - P) / np.maximum(n_known, 1)
    if np.any(n_known == 0):
        err[n_known == 0] = err[n_known > 0].mean() if np.any(n_known > 0) else 0.0
    return (1.0 / (err + floor)).astype(np.float32)


def _pass_grids(missing: np.ndarray, patch_size: int, stride: int, n_passes: int,
                gen: np.random.Generator) -> list[tuple[np.ndarray, np.ndarray]]:
    """Top-left corners of the patches of each pass: a randomly shifted grid of step ``stride``, touching the mask.

    A patch whose missing pixels all lie in its outer ``_CORE_MARGIN`` rows
    and columns is left out (unless it is at the image's edge): those
    pixels get small weights from it and larger ones from patches that
    have them nearer their centre (12 % fewer patches on the 15.9 MP
    benchmark with text, -0.002 dB on text1; random loss is unchanged).
    The margin is at most ``(patch_size - stride) // 2``, so that every
    missing pixel is still in the core of a patch of every pass.
    """
    H, W = missing.shape
    touching = _window_sums(missing, patch_size) > 0
    m = min(_CORE_MARGIN, max(0, (patch_size - stride) // 2))
    if m > 0:
        core = _window_sums(missing, patch_size - 2 * m)[m:m + H - patch_size + 1, m:m + W - patch_size + 1] > 0
        core[[0, -1], :] = True  # patches at the image's edge cover its outer rows and columns
        core[:, [0, -1]] = True
        touching &= core
    grids = []
    for _ in range(n_passes):
        rows, cols = _patch_positions(missing.shape, patch_size, stride, tuple(gen.integers(0, stride, 2)))
        rr, cc = np.nonzero(touching[np.ix_(rows, cols)])
        grids.append((rows[rr], cols[cc]))
    return grids


def _refine_luminance(lum: np.ndarray, missing: np.ndarray, patch_size: int,
                      grids: list[tuple[np.ndarray, np.ndarray]], lams: np.ndarray, batch_size: int, coder: tuple,
                      progress: ProgressCallback | None) -> np.ndarray:
    """Refine ``lum`` at the ``missing`` pixels in passes of patch coding, in place; returns it.

    Pass k takes the patches at the corners ``grids[k]`` (see
    :func:`_pass_grids`); it sparse-codes each one, centred and scaled,
    over the dictionary with lam ``lams[k]``, and replaces the
    missing pixels by the average of the reconstructions (Gaussian weights,
    larger at the patch centre, and by how well each reconstruction fits
    its patch's known pixels, see :func:`_fit_weights`). Known pixels are
    left alone.
    """
    D, penalty, tree, max_iter, spectrum = coder
    H, W = lum.shape
    floor = max(_FIT_FLOOR * float(np.var(lum[~missing])), 1e-12)
    win = _aggregation_window(patch_size).ravel()
    sums = np.empty((H, W), dtype=np.float32)
    weights = np.empty((H, W), dtype=np.float32)
    idx = np.flatnonzero(missing)  # faster than the boolean mask, once per pass on 16 MP
    lum_flat = lum.reshape(-1)
    if not np.shares_memory(lum_flat, lum):
        raise ValueError("lum must be C-contiguous (refined in place)")
    sums_flat, weights_flat = sums.reshape(-1), weights.reshape(-1)
    n_total = sum(-(-len(r) // batch_size) for r, _ in grids)
    log.info("coding %d patches in %d passes", sum(len(r) for r, _ in grids), len(lams))
    done = 0
    n_workers = default_num_threads()
    # one batch per core, each coded by one thread, BLAS included (no synchronisation per FISTA
    # iteration: 1.65x faster than threads sharing each batch); the estimates are added in batch
    # order, so the result does not depend on the timing
    with threadpool_limits(1, user_api="blas"), \
            ThreadPoolExecutor(n_workers, thread_name_prefix="restore-inpaint") as pool:
        for lam, (r_pos, c_pos) in zip(lams, grids, strict=True):
            def code(b, r_pos=r_pos, c_pos=c_pos, lam=lam):
                sl = slice(b * batch_size, (b + 1) * batch_size)
                r, c = r_pos[sl], c_pos[sl]
                P = _gather(lum, r, c, patch_size).astype(np.float64)
                Z, plane, scale = _centre(P)
                codes, _ = _sparse_encode(Z, D, lam=lam, penalty=penalty, tree=tree, max_iter=max_iter, tol=1e-4,
                                          batch_size=batch_size, spectrum=spectrum, n_threads=1, fast=True)
                rec = (codes @ D) * scale[:, None] + plane
                w_fit = _fit_weights(rec, P, ~_gather(missing, r, c, patch_size), floor)
                return r, c, rec * win * w_fit[:, None], w_fit

            sums.fill(0)
            weights.fill(0)
            n_batches = -(-len(r_pos) // batch_size)
            pending = deque(pool.submit(code, b) for b in range(min(n_workers, n_batches)))
            try:
                for b in range(n_batches):
                    r, c, rec, w_fit = pending.popleft().result()
                    if b + n_workers < n_batches:
                        pending.append(pool.submit(code, b + n_workers))
                    for k in range(patch_size * patch_size):
                        di, dj = divmod(k, patch_size)
                        sums[r + di, c + dj] += rec[:, k]
                        weights[r + di, c + dj] += win[k] * w_fit
                    done += 1
                    if progress is not None:
                        progress(done, n_total)
            finally:
                for f in pending:
                    f.cancel()
            # every missing pixel lies in a coded patch: a grid of step <= patch size covers the image
            lum_flat[idx] = sums_flat[idx] / weights_flat[idx]
    return lum


def _biharmonic_fill(img: np.ndarray, missing: np.ndarray, steps: Steps | None = None) -> np.ndarray:
    """The image (channels last) with its missing pixels set to the biharmonic interpolant of the known ones.

    The interpolant of :func:`skimage.restoration.inpaint_biharmonic`
    (within 0.1 dB of it on the benchmark photos), computed by conjugate
    gradients on the normal equations of the discrete Laplacian restricted
    to the missing pixels, in bands of rows with a margin of context, which
    bound the memory (about 200 bytes per missing pixel of a band).
    ``steps()`` after each channel of each band; the conjugate gradients
    report their iterations through ``steps.tick`` (for Cancel).
    """
    H, W, n_ch = img.shape
    out = img.copy()
    for r0, r1, a, b in _bands(H, W):
        m = missing[r0:r1]
        if m.any():
            out[r0:r1][m] = _biharmonic_band(img[a:b], missing[a:b], steps)[r0 - a:r1 - a][m]
        elif steps is not None:
            steps(n_ch)
    return out


def _bands(H: int, W: int) -> list[tuple[int, int, int, int]]:
    """Bands of rows ``r0:r1`` of about ``_BAND_PX`` pixels, with their context ``a:b`` (``_BAND_MARGIN`` rows more)."""
    band = max(1, _BAND_PX // W)
    return [(r0, min(H, r0 + band), max(0, r0 - _BAND_MARGIN), min(H, r0 + band + _BAND_MARGIN))
            for r0 in range(0, H, band)]


def _fed_cycle() -> tuple[np.ndarray, range]:
    """Step sizes of one cycle of fast explicit diffusion, and the range of the cycles.

    Grewenig, Weickert and Bruhn (2010): steps of varying size, stable over
    a cycle, which reach the diffusion time ``_EED_TIME`` in 77 steps where
    steps of 0.2 would take 250.
    """
    n = _EED_CYCLE
    taus = 0.25 / (2 * np.cos(np.pi * (2 * np.arange(n) + 1) / (4 * n + 2)) ** 2)
    return taus, range(max(1, int(round(_EED_TIME / taus.sum()))))


def _sharpen(img: np.ndarray, missing: np.ndarray, n_threads: int,
             progress: ProgressCallback | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Sharpen the interpolant ``img`` (channels last) at the missing pixels, in place.

    Returns ``img`` and the diffused values before the blend at the
    missing pixels (n_missing, C), in ``img``'s dtype.

    Edge-enhancing diffusion to time ``_EED_TIME`` (see
    :mod:`restore._core_diffusion`; known pixels fixed, one structure
    tensor for all channels, updated once per cycle of ``_EED_CYCLE``
    steps), then the blend ``_EED_SHARE * diffused + (1 - _EED_SHARE) *
    interpolant``. The biharmonic interpolant blurs edges, which is where
    most of its error lies with random pixel loss (on monarch with 90 % of
    the pixels missing, the 10 % of them with the largest gradient hold
    65 % of it); the diffusion restores them and the blend keeps the
    textures that the diffusion flattens. Masked-pixel PSNR of this start
    over the interpolant, kodim23 / monarch / tulips / seeding_crop with
    90 % missing: +0.21 / +0.40 / +0.69 / +0.26 dB; with text1 and 70 %
    missing see the README. ``progress(cycle, n_cycles)`` after each cycle;
    it may raise to stop.
    """
    rows, cols = np.nonzero(missing)
    if len(rows) == 0:
        return img, img[rows, cols]
    from scipy.ndimage import binary_dilation

    # the tensor is read at the missing pixels and at their four neighbours
    t_rows, t_cols = np.nonzero(binary_dilation(missing))
    # Gaussian taps and the central differences of the smoothed image, on a common support
    r = int(np.ceil(_EED_TRUNCATE * _EED_SIGMA))
    t = np.arange(-r - 1, r + 2, dtype=np.float64)
    g = np.where(np.abs(t) <= r, np.exp(-0.5 * (t / _EED_SIGMA) ** 2), 0.0)
    g /= g.sum()
    dg = 0.5 * (np.roll(g, 1) - np.roll(g, -1))  # weight of u(x + t) in (u_s(x + 1) - u_s(x - 1)) / 2
    known = ~missing[..., None]  # the range of the known values (the interpolant overshoots it)
    contrast = _EED_CONTRAST * max(float(np.max(img, where=known, initial=-np.inf)
                                         - np.min(img, where=known, initial=np.inf)), 1e-12)
    H, W, n_ch = img.shape
    a, b, c = (np.zeros((H, W), dtype=np.float32) for _ in range(3))
    start = img[rows, cols].astype(np.float64)
    taus, cycles = _fed_cycle()
    step = np.empty((len(rows), n_ch))

    def chunks(n):
        edges = np.linspace(0, n, n_threads + 1).astype(np.int64)
        return list(zip(edges[:-1], edges[1:], strict=True))

    t_chunks, s_chunks = chunks(len(t_rows)), chunks(len(rows))
    with ThreadPoolExecutor(n_threads, thread_name_prefix="restore-eed") as pool:
        def run(fn, parts):
            for f in [pool.submit(fn, lo, hi) for lo, hi in parts]:
                f.result()

        for k in cycles:
            run(lambda lo, hi: _core_diffusion.eed_tensor(img, t_rows[lo:hi], t_cols[lo:hi], g, dg,
                                                          contrast * contrast, a, b, c), t_chunks)
            for tau in taus:
                run(lambda lo, hi, tau=tau: _core_diffusion.eed_step(img, rows, cols, a, b, c, tau, lo, hi, step),
                    s_chunks)
                run(lambda lo, hi: _core_diffusion.scatter_rows(img, rows, cols, step, lo, hi), s_chunks)
            if progress is not None:
                progress(k + 1, len(cycles))
    diffused = step.astype(img.dtype)
    step *= _EED_SHARE
    step += (1.0 - _EED_SHARE) * start
    img[rows, cols] = step.astype(img.dtype)
    return img, diffused


def _passes_weight(lum: np.ndarray, missing: np.ndarray, steps: Steps | None = None) -> np.ndarray:
    """Weight of the passes' result against the diffusion alone, per missing pixel: 1, down to 1/3 on straight edges.

    On straight edges the diffusion is better than the average of patch
    reconstructions: there, in the 10 % of the missing pixels with the
    most coherent structure, the passes lose 0.5 to 1.5 dB against their
    start on most photos with 70 % of the pixels missing, and the
    diffusion alone is sharper than that start (its blend with the
    interpolant). The weight is ``(hi - coh) / (hi - lo)`` clipped to
    [0, 1], with ``(lo, hi) = _EDGE_COHERENCE``, where ``coh = (l1 - l2)
    / (l1 + l2)`` is the coherence of the structure tensor (eigenvalues
    ``l1 >= l2``, window of sd ``_EDGE_RHO``) of the start's luminance
    smoothed with sd ``_EDGE_SIGMA``. Masked-pixel PSNR over the passes'
    result alone, average of kodim23 / monarch / tulips / seeding_crop and
    of five other photos: +0.14 / +0.09 dB with 70 % missing, +0.05 /
    +0.02 with 90 %, +0.04 / +0.03 on text. Computed in bands of rows
    (bounded memory).
    """
    from scipy.ndimage import gaussian_filter
    from skimage.feature import structure_tensor

    H, W = lum.shape
    lo, hi = _EDGE_COHERENCE
    weight = np.empty(int(np.count_nonzero(missing)), dtype=lum.dtype)
    done = 0
    for r0, r1, a, b in _bands(H, W):
        if steps is not None:
            steps()
        m = missing[r0:r1]
        n = int(np.count_nonzero(m))
        if n == 0:
            continue
        j11, j12, j22 = (t[r0 - a:r1 - a][m] for t in structure_tensor(
            gaussian_filter(lum[a:b], _EDGE_SIGMA, mode="nearest"), sigma=_EDGE_RHO, mode="nearest", order="rc"))
        coh = np.sqrt((j11 - j22) ** 2 + 4 * j12 ** 2) / np.maximum(j11 + j22, np.finfo(lum.dtype).tiny)
        weight[done:done + n] = np.clip((hi - coh) / (hi - lo), 0.0, 1.0)
        done += n
    return weight


def _normalized_convolution(img: np.ndarray, missing: np.ndarray) -> np.ndarray:
    """Gaussian-weighted average of the known pixels around each missing one (the start of the CG iterations).

    The narrowest of the widths 2, 8 and 32 pixels whose window holds known
    pixels, so that the centres of wide holes get a local average too.
    """
    from scipy.ndimage import gaussian_filter

    known = (~missing).astype(np.float64)
    out = np.empty(img.shape)
    todo = missing.copy()
    for sigma in (2.0, 8.0, 32.0):
        den = gaussian_filter(known, sigma, mode="nearest", truncate=3.0)
        ok = todo & (den > 0.05)
        for ch in range(img.shape[2]):
            num = gaussian_filter(np.where(missing, 0.0, img[..., ch]), sigma, mode="nearest", truncate=3.0)
            out[ok, ch] = num[ok] / den[ok]
        todo &= ~ok
        if not todo.any():
            return out
    out[todo] = img[~missing].mean(axis=0) if known.any() else 0.0
    return out


def _biharmonic_band(img: np.ndarray, missing: np.ndarray, steps: Steps | None = None) -> np.ndarray:
    """Biharmonic interpolation of one band (see :func:`_biharmonic_fill`); float64 result."""
    from scipy import sparse
    from scipy.sparse.linalg import cg

    h, w, n_ch = img.shape
    flat = img.reshape(h * w, n_ch).astype(np.float64)
    unknown = np.flatnonzero(missing)
    col = np.full(h * w, -1, dtype=np.int64)
    col[unknown] = np.arange(len(unknown))
    # rows of the Laplacian: the pixels whose 5-point stencil touches a missing pixel (free boundary)
    mp = np.pad(missing, 1)
    near = mp[1:-1, 1:-1] | mp[:-2, 1:-1] | mp[2:, 1:-1] | mp[1:-1, :-2] | mp[1:-1, 2:]
    r, c = np.nonzero(near)
    k = np.arange(len(r))
    deg = np.zeros(len(r))
    known_part = np.zeros((len(r), n_ch))  # the Laplacian of the known pixels at each row
    ri, ci, vals = [], [], []
    for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
        rr, cc = r + dr, c + dc
        ok = (rr >= 0) & (rr < h) & (cc >= 0) & (cc < w)
        deg += ok
        j = rr[ok] * w + cc[ok]
        u, kk = col[j], k[ok]
        ri.append(kk[u >= 0])
        ci.append(u[u >= 0])
        vals.append(np.full(np.count_nonzero(u >= 0), -1.0))
        known_part[kk[u < 0]] -= flat[j[u < 0]]
    j = r * w + c
    u = col[j]
    ri.append(k[u >= 0])
    ci.append(u[u >= 0])
    vals.append(deg[u >= 0])
    known_part[u < 0] += deg[u < 0, None] * flat[j[u < 0]]
    L = sparse.csr_matrix((np.concatenate(vals), (np.concatenate(ri), np.concatenate(ci))),
                          shape=(len(r), len(unknown)))
    A = (L.T @ L).tocsr()
    rhs = -(L.T @ known_part)
    jacobi = sparse.diags(1.0 / A.diagonal())
    start = _normalized_convolution(img, missing).reshape(h * w, n_ch)[unknown]
    for ch in range(n_ch):
        x, _ = cg(A, rhs[:, ch], x0=start[:, ch], rtol=_CG_TOL, maxiter=10 * int(np.sqrt(len(unknown))) + 100,
                  M=jacobi, callback=None if steps is None else (lambda _x: steps.tick()))
        flat[unknown, ch] = x
        if steps is not None:
            steps()
    return flat.reshape(h, w, n_ch)


def _resolve_dictionary(dictionary, patch_size: int) -> TreeDictionaryLearning | None:
    m = patch_size * patch_size
    if dictionary is None:
        return default_dictionary() if patch_size == 8 else None
    if isinstance(dictionary, (str, os.PathLike)):
        if not Path(dictionary).is_file():
            raise ValueError(f"dictionary file {str(dictionary)!r} does not exist")
        dictionary = TreeDictionaryLearning.load(dictionary)
    if not isinstance(dictionary, TreeDictionaryLearning) or not hasattr(dictionary, "components_"):
        raise ValueError("dictionary must be a fitted TreeDictionaryLearning or the path of a saved one")
    if dictionary.components_.shape[1] != m:
        raise ValueError(f"dictionary atoms have {dictionary.components_.shape[1]} features, but "
                         f"{patch_size}x{patch_size} luminance patches have {m}")
    return dictionary
