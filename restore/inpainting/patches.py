"""The passes of patch coding: patches over the image, centred, coded over the dictionary, averaged back."""

from __future__ import annotations

import logging
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .._config import default_num_threads, single_threaded_blas
from .._core_inpaint import scatter_patches, window_counts
from .._online import Atoms
from .._progress import ProgressCallback
from ..coding import _sparse_encode
from ..tree import Tree

__all__ = ["Coder", "centre", "gather", "known_sd", "luminance", "pass_batch", "pass_grids",
           "patch_positions", "refine_luminance", "window_sums"]

log = logging.getLogger("restore.inpainting")

_FIT_FLOOR = 1e-3  # floor of the fit errors in _fit_weights, relative to the variance of the known luminance
# ... and at least this, in work units squared (known values of magnitude 1 to 2): a fit error below it is exact,
# and the weights' sums stay far inside float32's range on a flat image
_FIT_FLOOR_MIN = 1e-12
_PLANE_RIDGE = 1.0  # ridge on the slopes of the background plane fitted to each patch: tilts, not ramps
_CONSTANT_RIDGE = 1e-9  # ridge on the plane's constant: none to speak of, only a well-posed solve
_FLAT_NORM = 1e-8  # detail norms under this (inpaint's units: known values of magnitude 1 to 2) are not scaled up
_FLAT_SHARE = 0.05  # training patches whose detail norm is under this share of the median are flat: skipped
_WINDOW_SD = 0.25  # sd of the Gaussian weights of a patch's pixels in the average, in patch sides
_SD_BAND_PX = 1 << 20  # pixels per band of rows of the known pixels' sd: its temporaries stay a few MB
_CORE_MARGIN = 1  # patches touching the mask only on this outer rim are not coded (see pass_grids)
_CODE_TOL = 1e-4  # relative decrease of a patch's objective that ends its coding (FISTA)
# passes that code every patch; from then on, a patch is coded only while one of its missing pixels moved by at
# least _SETTLED (times the sd of the known luminance) when last coded
_SETTLE_PASSES = 2
_SETTLED = 0.08  # lower codes many more patches of a textured photo's text for hardly a better fit (bench_inpaint)
_PASS_PIECES = 8  # a pass is cut into at least this many batches (small passes too: thin text), so every core codes
_MIN_BATCH = 256  # ... of at least this many patches (below, the per-batch overhead shows)


@dataclass(frozen=True)
class Coder:
    """How the passes code patches: the atoms (rows), their penalty and tree, FISTA's cap and ``eigh(D D^T)``."""

    atoms: np.ndarray
    penalty: str
    tree: Tree | None
    max_iter: int
    spectrum: tuple[np.ndarray, np.ndarray]

    @classmethod
    def of(cls, atoms: Atoms, max_iter: int) -> Coder:
        """The coder of a fitted dictionary."""
        D = atoms.components
        return cls(D, atoms.settings.penalty, atoms.tree, max_iter, np.linalg.eigh(D @ D.T))


def patch_positions(shape: tuple[int, int], size: int, stride: int,
                    offset: tuple[int, int] = (0, 0)) -> tuple[np.ndarray, np.ndarray]:
    """Top-left corners of a patch grid that covers the image: every ``stride`` from ``offset``, plus the edges."""
    def axis(n: int, off: int) -> np.ndarray:
        pos = np.arange(off, n - size + 1, stride)
        return np.unique(np.concatenate(([0], pos, [n - size])))

    return axis(shape[0], offset[0]), axis(shape[1], offset[1])


def window_sums(a: np.ndarray, size: int) -> np.ndarray:
    """Count of the mask ``a`` over every size x size window (int32: any mask under 2**31 pixels)."""
    if size < 1:  # the kernel reads a[r - size]: out of bounds below 1
        raise ValueError(f"window size must be at least 1, got {size}")
    a = np.ascontiguousarray(a, dtype=bool)
    out = np.empty((max(a.shape[0] - size + 1, 0), max(a.shape[1] - size + 1, 0)), dtype=np.int32)
    if out.size:
        window_counts(a, size, out)
    return out


def known_sd(L: np.ndarray, missing: np.ndarray) -> float:
    """The sd of the known pixels of ``L`` (0 when none), a band of rows at a time: no copy of them (16 MP photos)."""
    step = max(1, _SD_BAND_PX // max(1, L.shape[1]))
    rows = range(0, L.shape[0], step)
    n = sum(int(np.count_nonzero(~missing[r:r + step])) for r in rows)
    if n == 0:
        return 0.0
    mean = sum(float(np.sum(L[r:r + step], where=~missing[r:r + step], dtype=np.float64)) for r in rows) / n
    return float(np.sqrt(sum(float(np.sum(np.square(L[r:r + step] - mean), where=~missing[r:r + step],
                                          dtype=np.float64)) for r in rows) / n))


def gather(img: np.ndarray, r: np.ndarray, c: np.ndarray, size: int) -> np.ndarray:
    """Patches (n, size*size) of a 2-D array at top-left corners (r, c), raveled row by row."""
    return sliding_window_view(img, (size, size))[r, c].reshape(len(r), -1)


def _plane_basis(n_px: int) -> np.ndarray:
    """The constant and the two slopes over a square patch of ``n_px`` pixels, raveled: (n_px, 3)."""
    s = int(round(np.sqrt(n_px)))
    y, x = np.mgrid[0:s, 0:s]
    x = (x - (s - 1) / 2) / s
    y = (y - (s - 1) / 2) / s
    return np.stack([np.ones(n_px), x.ravel(), y.ravel()], axis=1)  # (n_px, 3)


def centre(P: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Remove from each patch a plane fitted by least squares; scale to unit norm.

    The plane (constant plus slopes, the slopes lightly ridge-regularised)
    carries gradients across a hole better than the mean does; the atoms
    then only model the detail.

    Returns the centred, scaled patches, the plane removed (n, p) and the
    scales (n,).
    """
    Bs = _plane_basis(P.shape[1])
    ridge = np.diag([_CONSTANT_RIDGE, _PLANE_RIDGE, _PLANE_RIDGE])
    plane = P @ (Bs @ np.linalg.solve(Bs.T @ Bs + ridge, Bs.T)).T
    Z = P - plane
    scale = np.maximum(np.sqrt(np.einsum("np,np->n", Z, Z)), _FLAT_NORM)
    return Z / scale[:, None], plane, scale


def luminance(img: np.ndarray) -> np.ndarray:
    """Sum of the channels (the last axis) over sqrt(C): the unit-norm grey axis of colour space."""
    return img.sum(axis=-1) / np.sqrt(img.shape[-1])


def _aggregation_window(size: int) -> np.ndarray:
    """Weights of a patch's pixels when overlapping estimates are averaged: a Gaussian of sd ``_WINDOW_SD`` sides.

    A patch's estimate is better at its centre, where the known pixels
    surround it, than at its corners.
    """
    g = np.exp(-0.5 * ((np.arange(size) - (size - 1) / 2) / (size * _WINDOW_SD)) ** 2)
    return np.outer(g, g).astype(np.float32)


def _fit_weights(rec: np.ndarray, P: np.ndarray, known: np.ndarray, floor: float) -> np.ndarray:
    """Weight of each patch's reconstruction in the average: 1 / (its mean squared error on its known pixels + floor).

    Reconstructions that miss their own known pixels are trusted less. A
    patch with no known pixel gets the mean error of the others.
    """
    n_known = known.sum(axis=1)
    err = np.einsum("np,np->n", known * (rec - P), rec - P) / np.maximum(n_known, 1)
    if np.any(n_known == 0):
        err[n_known == 0] = err[n_known > 0].mean() if np.any(n_known > 0) else 0.0
    return (1.0 / (err + floor)).astype(np.float32)


def pass_grids(missing: np.ndarray, patch_size: int, stride: int, n_passes: int, gen: np.random.Generator, *,
               margin: int = _CORE_MARGIN, touching: np.ndarray | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """Top-left corners of the patches of each pass: a randomly shifted grid of step ``stride``, touching the mask.

    A patch whose missing pixels all lie in its outer ``margin`` rows and
    columns is left out (unless it is at the image's edge): those pixels
    get small weights from it and larger ones from patches that have them
    nearer their centre, so it costs time for next to nothing.
    The margin is at most ``(patch_size - stride) // 2``, so that every
    missing pixel is still in the core of a patch of every pass.
    ``touching``: ``window_sums(missing, patch_size) > 0``, when the caller
    has it (16 MP: a second of window sums).
    """
    H, W = missing.shape
    touching = window_sums(missing, patch_size) > 0 if touching is None else touching.copy()
    m = min(margin, max(0, (patch_size - stride) // 2))
    if m > 0:
        core = window_sums(missing, patch_size - 2 * m)[m:m + H - patch_size + 1, m:m + W - patch_size + 1] > 0
        core[[0, -1], :] = True  # patches at the image's edge cover its outer rows and columns
        core[:, [0, -1]] = True
        touching &= core
    grids = []
    for _ in range(n_passes):
        rows, cols = patch_positions(missing.shape, patch_size, stride, tuple(gen.integers(0, stride, 2)))
        rr, cc = np.nonzero(touching[np.ix_(rows, cols)])
        grids.append((rows[rr], cols[cc]))
    return grids


def pass_batch(n: int, batch_size: int) -> int:
    """Patches per batch of a pass of ``n`` patches: at most ``batch_size``, in several pieces when it can.

    Independent of the number of threads, so that the result is too.
    """
    return max(1, min(batch_size, max(_MIN_BATCH, -(-n // _PASS_PIECES))))


def refine_luminance(lum: np.ndarray, missing: np.ndarray, *, patch_size: int,
                     grids: list[tuple[np.ndarray, np.ndarray]], lams: np.ndarray, batch_size: int, coder: Coder,
                     progress: ProgressCallback | None = None, settle: bool = True) -> np.ndarray:
    """Refine ``lum`` at the ``missing`` pixels in passes of patch coding, in place; returns it.

    Pass k takes the patches at the corners ``grids[k]`` (see
    :func:`pass_grids`); it sparse-codes each one, centred and scaled,
    over the dictionary with lam ``lams[k]``, and replaces the
    missing pixels by the average of the reconstructions (Gaussian weights,
    larger at the patch centre, and by how well each reconstruction fits
    its patch's known pixels, see :func:`_fit_weights`). Known pixels are
    left alone. With ``settle``, from pass ``_SETTLE_PASSES`` on a patch is
    coded only while one of its missing pixels moved by ``_SETTLED`` times
    the sd of the known luminance or more when last coded (thin strokes
    settle in a few passes; the others keep their value).
    """
    D = coder.atoms
    H, W = lum.shape
    var = known_sd(lum, missing) ** 2  # no copy of the known pixels (16 MP photos)
    floor = max(_FIT_FLOOR * var, _FIT_FLOOR_MIN)
    win2 = _aggregation_window(patch_size)
    win = win2.ravel()
    sums = np.zeros((H, W), dtype=np.float32)  # zero between passes: each pass clears the pixels it touched
    weights = np.zeros((H, W), dtype=np.float32)
    missing_flat = missing.reshape(-1)
    offsets = (np.arange(patch_size)[:, None] * W + np.arange(patch_size)).ravel()  # a patch's pixels, flat
    lum_flat = lum.reshape(-1)
    if not np.shares_memory(lum_flat, lum):
        raise ValueError("lum must be C-contiguous (refined in place)")
    sums_flat, weights_flat = sums.reshape(-1), weights.reshape(-1)
    ends = np.cumsum([-(-len(r) // pass_batch(len(r), batch_size)) for r, _ in grids])  # progress at each pass' end
    n_total = int(ends[-1]) if len(ends) else 0
    # how far each missing pixel moved when last coded (known pixels: 0, never live); read only when settling
    moved = np.where(missing, np.float32(np.inf), np.float32(0.0)) if settle else None
    settled = _SETTLED * np.sqrt(var)
    done = n_coded = 0
    n_workers = default_num_threads()
    # one batch per core, each coded by one thread, BLAS included (no synchronisation per FISTA
    # iteration); the estimates are added in batch order, so the result does not depend on the timing
    with single_threaded_blas(), \
            ThreadPoolExecutor(n_workers, thread_name_prefix="restore-inpaint") as pool:
        for p_k, (lam, (r_pos, c_pos)) in enumerate(zip(lams, grids, strict=True)):
            end = int(ends[p_k])
            if settle and p_k >= _SETTLE_PASSES:
                # a patch whose missing pixels all moved less than the threshold when last coded has settled: the
                # passes left would only shuffle it by the grid's shift
                live = (gather(moved, r_pos, c_pos, patch_size) >= settled).any(axis=1)
                r_pos, c_pos = r_pos[live], c_pos[live]
            size = pass_batch(len(r_pos), batch_size)
            n_coded += len(r_pos)

            def code(b, r_pos=r_pos, c_pos=c_pos, lam=lam, size=size):
                sl = slice(b * size, (b + 1) * size)
                r, c = r_pos[sl], c_pos[sl]
                P = gather(lum, r, c, patch_size).astype(np.float64)
                Z, plane, scale = centre(P)
                codes, _ = _sparse_encode(Z, D, lam=lam, penalty=coder.penalty, tree=coder.tree,
                                          max_iter=coder.max_iter, tol=_CODE_TOL, batch_size=size,
                                          spectrum=coder.spectrum, n_threads=1, fast=True)
                rec = (codes @ D) * scale[:, None] + plane
                w_fit = _fit_weights(rec, P, ~gather(missing, r, c, patch_size), floor)
                return r, c, rec * win * w_fit[:, None], w_fit

            n_batches = -(-len(r_pos) // size)
            pending = deque(pool.submit(code, b) for b in range(min(n_workers, n_batches)))
            try:
                for b in range(n_batches):
                    r, c, rec, w_fit = pending.popleft().result()
                    if b + n_workers < n_batches:
                        pending.append(pool.submit(code, b + n_workers))
                    scatter_patches(rec, w_fit, win2, r, c, sums, weights)
                    done = min(done + 1, end)
                    if progress is not None:
                        progress(done, n_total)
            finally:
                for f in pending:
                    f.cancel()
            # the missing pixels of the coded patches (those of settled patches only keep their value): only they
            # are read and cleared, not the image (16 MP: most patches settle)
            pix = ((r_pos * W + c_pos)[:, None] + offsets).ravel()
            fill = pix[missing_flat[pix]]
            new = sums_flat[fill] / weights_flat[fill]
            if moved is not None:
                moved.reshape(-1)[fill] = np.abs(new - lum_flat[fill])
            lum_flat[fill] = new
            sums_flat[pix] = 0
            weights_flat[pix] = 0
            if done < end and progress is not None:  # the batches of the settled patches count as done
                done = end
                progress(done, n_total)
    log.info("coded %d patches in %d passes (%d settled ones skipped)", n_coded, len(lams),
             sum(len(r) for r, _ in grids) - n_coded)
    return lum
