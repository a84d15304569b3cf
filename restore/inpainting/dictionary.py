"""Dictionaries of image patches: the one shipped with the package, and learning one from images.

Inpainting reads and adapts dictionaries as :class:`restore._online.Atoms`,
without scikit-learn (about a second to import); the public functions give
and take :class:`restore.TreeDictionaryLearning` estimators.
"""

from __future__ import annotations

import os
import sys
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from numpy.typing import ArrayLike

from .._config import DEFAULT_BRANCHING, DEFAULT_CODE_LAM
from .._online import DEFAULTS, Atoms, Settings, State, check_settings, known_entries, learn, read_saved
from .._progress import ProgressCallback
from .._validation import check_image, check_int, check_mask
from .patches import (
    _CONSTANT_RIDGE,
    _FLAT_NORM,
    _FLAT_SHARE,
    _PLANE_RIDGE,
    _plane_basis,
    gather,
    luminance,
    window_sums,
)

if TYPE_CHECKING:
    from ..learning import TreeDictionaryLearning

__all__ = ["PATCH_SIZE", "default_dictionary", "learn_dictionary", "resolve_dictionary", "should_adapt"]

#: Side of the patches of the shipped dictionary, and the default of every patch size.
PATCH_SIZE = 8
_DEFAULT_DICT = "dict_grey_8x8.npz"
# complete patches an image needs before inpaint adapts the dictionary to it: with fewer (random pixel loss)
# the generic dictionary does as well as learning from the partly known ones, for less time
_MIN_COMPLETE = 2000
# share of its pixels a patch must know to train the dictionary (its known pixels only, see learn_dictionary):
# the plane removed from it takes 3 of them, and the rest must tell the atoms' detail apart
_MIN_KNOWN_SHARE = 0.25
_LEARN_BATCH = 256  # patches per mini-batch of learn_dictionary
_LEARN_CODE_ITER = 50  # FISTA iterations per mini-batch of learn_dictionary
# ... and of inpaint's adaptation of the shipped dictionary, warm started: half as many gave the same results on 27
# text and scratch cases (9 photos) in 4 % less of their time; a third as many, no worse either
_ADAPT_CODE_ITER = 25
_MIN_PATCHES = 10  # fewer usable patches than this cannot train a dictionary
# training positions are drawn at random over the image when at least this share of it is usable and the sample is
# at most this share of those: few draws miss or repeat (else the usable positions are listed and sampled)
_DRAW_SHARE = 0.25


@contextmanager
def _shipped_file() -> Iterator[Path | None]:
    """The shipped dictionary's file, None if it is missing from the installation."""
    ref = resources.files("restore") / "data" / _DEFAULT_DICT
    if not ref.is_file():
        yield None
        return
    with resources.as_file(ref) as path:
        yield path


def default_dictionary() -> TreeDictionaryLearning | None:
    """The generic tree dictionary of 8x8 luminance patches shipped with the package.

    Learned on ``sample_images/`` (``benchmarks/train_default_dictionary.py``),
    centred and unit-norm patches, tree (10, 3, 3) of 131 atoms. None if the
    data file is missing from the installation.
    """
    from ..learning import TreeDictionaryLearning  # scikit-learn: imported by the estimator's users only

    with _shipped_file() as path:
        return None if path is None else TreeDictionaryLearning.load(path)


def _shipped_atoms() -> Atoms | None:
    """:func:`default_dictionary`'s atoms, tree and settings, without the estimator."""
    with _shipped_file() as path:
        return None if path is None else _atoms_of(path)


def _atoms_of(path: Path) -> Atoms:
    saved = read_saved(path)
    settings = saved.settings
    return Atoms(saved.components, settings.tree(), settings)


def learn_dictionary(
    images: ArrayLike | list[ArrayLike],
    *,
    masks: ArrayLike | list[ArrayLike] | None = None,
    patch_size: int = PATCH_SIZE,
    branching: tuple[int, ...] = DEFAULT_BRANCHING,
    penalty: str = "tree_l2",
    n_atoms: int | None = None,
    lam: float = DEFAULT_CODE_LAM,
    n_patches: int = 50000,
    n_epochs: int = 1,
    channel_axis: int | None = None,
    init: TreeDictionaryLearning | None = None,
    rng: int | np.random.Generator | None = None,
    progress: ProgressCallback | None = None,
) -> TreeDictionaryLearning:
    """Learn a dictionary of image patches, as :func:`restore.inpaint` uses them.

    Draws random patches from the luminance of the images (the sum of
    their channels over sqrt(C)), complete ones (no pixel under ``masks``)
    first, then, if they are too few, ones that know a quarter of their
    pixels or more (random pixel loss), centres each one on its
    known pixels (plane fit) and scales it to unit norm (a partly known
    one as its known pixels' share of a unit-norm patch), skipping
    near-flat ones, and fits a
    :class:`TreeDictionaryLearning` with their known pixels as ``mask``:
    a partly known patch counts by its known pixels only (Mairal et al.,
    JMLR 2010), so that random pixel loss, which leaves no complete
    patch, still has patches to learn from.

    Parameters
    ----------
    images : ndarray or list of ndarray
        Images of shape (M, N), or (M, N, C) with ``channel_axis`` (any
        number of channels: the patches are taken from the luminance).
    masks : ndarray or list of ndarray, optional
        True where pixels must not be used (one per image): missing ones,
        whose values are never read.
    patch_size : int
        Side of the square patches.
    branching : tuple of int, default (10, 3, 3)
        Tree of the atoms, as in :class:`TreeDictionaryLearning` (131 atoms,
        as the shipped dictionary; see :func:`restore.inpaint`).
    penalty : str, default 'tree_l2'
        As in :class:`TreeDictionaryLearning`.
    n_atoms : int, optional
        As in :class:`TreeDictionaryLearning` (for a flat dictionary).
    lam : float, default 0.1
        As in :class:`TreeDictionaryLearning`.
    n_patches : int
        Training patches in all, spread evenly over the images.
    n_epochs : int, default 1
        Passes over the patches, as in :class:`TreeDictionaryLearning`.
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
    from ..learning import TreeDictionaryLearning  # scikit-learn: the result is an estimator

    if init is not None:
        if not isinstance(init, TreeDictionaryLearning) or not hasattr(init, "components_"):
            raise ValueError(f"init must be a fitted TreeDictionaryLearning, got {init!r}")
        branching, penalty, n_atoms = init.branching, init.penalty, init.n_atoms
    settings = replace(DEFAULTS, branching=tuple(branching), penalty=penalty, n_atoms=n_atoms, lam=lam,
                       batch_size=_LEARN_BATCH, n_epochs=n_epochs, max_code_iter=_LEARN_CODE_ITER)
    dict_init = None if init is None else init.components_
    training = prepare_learning(images, masks=masks, patch_size=patch_size, settings=settings, dict_init=dict_init,
                                n_patches=n_patches, channel_axis=channel_axis, rng=rng, progress=progress)
    state = training()
    est = TreeDictionaryLearning(**vars(settings), dict_init=dict_init, random_state=state.gen, progress=progress)
    est._keep(state)  # noqa: SLF001 - the estimator fitted by the same algorithm, on the same patches
    est.n_features_in_ = state.components.shape[1]
    return est


def adaptation_settings(init: Atoms | None) -> Settings:
    """The settings of :func:`restore.inpaint`'s adaptation of ``init``: its tree, penalty and lam, or defaults."""
    base = DEFAULTS if init is None else replace(DEFAULTS, branching=init.settings.branching,
                                                 penalty=init.settings.penalty, n_atoms=init.settings.n_atoms,
                                                 lam=init.settings.lam)
    return replace(base, batch_size=_LEARN_BATCH, max_code_iter=_ADAPT_CODE_ITER)


def prepare_learning(
    images: ArrayLike | list[ArrayLike],
    *,
    masks: ArrayLike | list[ArrayLike] | None = None,
    patch_size: int = PATCH_SIZE,
    settings: Settings,
    dict_init: np.ndarray | None = None,
    n_patches: int = 50000,
    channel_axis: int | None = None,
    rng: int | np.random.Generator | None = None,
    progress: ProgressCallback | None = None,
    sums: list[np.ndarray] | None = None,
) -> Callable[[], State]:
    """:func:`learn_dictionary` up to the fit: the checks of the images and the training patches; returns the fit.

    The images are read here; the fit reads only the training patches, and
    may run on another thread (:func:`restore.inpaint` fits while it
    interpolates). ``rng`` is used by the fit too: nothing else may draw
    from it meanwhile. ``sums``: ``window_sums(mask, patch_size)`` of each
    image's mask, when the caller has them (16 MP: half a second each).
    ``dict_init``: the atoms the fit starts from.
    """
    imgs = list(images) if isinstance(images, (list, tuple)) else [images]
    msks = list(masks) if isinstance(masks, (list, tuple)) else [masks] * len(imgs)
    if not imgs:
        raise ValueError("images is empty: give at least one image")
    if len(msks) != len(imgs):
        raise ValueError(f"give one mask per image: {len(imgs)} images, {len(msks)} masks")
    patch_size = check_int("patch_size", patch_size, min=2)
    n_patches = check_int("n_patches", n_patches)
    check_settings(settings, None, progress)  # fail before reading the images
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
    sums = [None] * len(checked) if sums is None else sums
    drawn = [_training_patches(img, known, patch_size, per, gen, n_missing=n)
             for (img, known), n in zip(checked, sums, strict=True)]
    Z = np.concatenate([z for z, _ in drawn])
    if len(Z) < _MIN_PATCHES:
        raise ValueError(f"only {len(Z)} usable patches (a quarter of their pixels known or more, not flat): give "
                         "larger or less masked images")
    M = known_entries(np.concatenate([w for _, w in drawn]), Z.shape)
    return lambda: learn(Z, M, settings, dict_init=dict_init, gen=gen, progress=progress)


def resolve_dictionary(dictionary: TreeDictionaryLearning | str | os.PathLike | None,
                       patch_size: int) -> Atoms | None:
    """A fitted dictionary for patches of this size: the one given (or loaded from a file), else the shipped one.

    None when none is given and none ships for ``patch_size``.
    """
    m = patch_size * patch_size
    if dictionary is None:
        return _shipped_atoms() if patch_size == PATCH_SIZE else None
    if isinstance(dictionary, (str, os.PathLike)):
        path = Path(dictionary)
        if not path.is_file():
            raise ValueError(f"dictionary file {str(dictionary)!r} does not exist")
        if not zipfile.is_zipfile(path):  # np.load would read a .npy or a pickle and fail far from the cause
            raise ValueError(f"dictionary {str(dictionary)!r} is not a dictionary file: give the .npz written by "
                             "`restore learn` or TreeDictionaryLearning.save")
        try:
            atoms = _atoms_of(path)
        except ValueError:
            raise ValueError(f"dictionary {str(dictionary)!r} was not written by `restore learn` or "
                             "TreeDictionaryLearning.save: give such a file") from None
    else:
        # an estimator was made by importing restore.learning (and scikit-learn): nothing else is imported to refuse
        learning = sys.modules.get("restore.learning")
        if (learning is None or not isinstance(dictionary, learning.TreeDictionaryLearning)
                or not hasattr(dictionary, "components_")):
            raise ValueError("dictionary must be a fitted TreeDictionaryLearning or the path of a saved one")
        atoms = dictionary._atoms()  # noqa: SLF001
    if atoms.components.shape[1] != m:
        raise ValueError(f"dictionary atoms have {atoms.components.shape[1]} features, but "
                         f"{patch_size}x{patch_size} luminance patches have {m}")
    return atoms


def should_adapt(missing: np.ndarray, patch_size: int, *, sums: np.ndarray | None = None) -> tuple[bool, int]:
    """Whether :func:`restore.inpaint` adapts the dictionary to an image with these missing pixels; from how many.

    It adapts when the image has ``_MIN_COMPLETE`` complete patches (text,
    scratches); the count returned is of the patches
    :func:`learn_dictionary` may then draw (a quarter of their pixels known
    or more). Under random pixel loss the shipped dictionary is kept:
    learning from the partly known patches (which ``learn_dictionary``
    does) does not pay for its time there, where the non-local prior makes
    the result. ``sums``: ``window_sums(missing, patch_size)`` when the
    caller has them already.
    """
    n_missing = window_sums(missing, patch_size) if sums is None else sums
    n_complete = int(np.count_nonzero(n_missing == 0))
    n_usable = int(np.count_nonzero(n_missing <= patch_size**2 - _min_known(patch_size)))
    return n_complete >= _MIN_COMPLETE, n_usable


def _min_known(size: int) -> int:
    """Known pixels a size x size patch needs to train: ``_MIN_KNOWN_SHARE`` of them, and one more than its plane."""
    return max(int(np.ceil(_MIN_KNOWN_SHARE * size * size)), 4)


def _training_patches(img: np.ndarray, known: np.ndarray, size: int, n: int, rng: np.random.Generator, *,
                      n_missing: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Up to ``n`` random luminance patches of ``img`` (channels last) with enough known pixels, centred on those.

    Returns (patches, their known pixels). Complete patches first (they are
    coded faster and tell more); partly known ones make up the number when
    complete ones are too few. Near-flat patches are skipped; missing pixels
    are 0 in the patches. The luminance of the drawn patches only, not of
    the image (16 MP: half a second). ``n_missing``: ``window_sums(~known,
    size)``, when the caller has it.
    """
    n_missing = window_sums(~known, size) if n_missing is None else n_missing
    usable = [n_missing == 0]
    # the partly known patches only when complete ones are too few: listing their positions costs 16 bytes a pixel
    if np.count_nonzero(usable[0]) < n:
        usable.append((n_missing > 0) & (n_missing <= size * size - _min_known(size)))
    del n_missing  # 4 bytes a pixel, not kept while the positions are drawn
    rows, cols = [], []
    for where in usable:
        r_one, c_one = _draw_positions(where, n - sum(map(len, rows)), rng)
        rows.append(r_one)
        cols.append(c_one)
    r, c = np.concatenate(rows), np.concatenate(cols)
    if len(r) == 0:
        return np.zeros((0, size * size)), np.zeros((0, size * size), bool)
    # the patches of every channel (n, C, size, size), then their luminance
    stack = sliding_window_view(img, (size, size), axis=(0, 1))[r, c]
    P = luminance(np.moveaxis(stack, 1, -1)).reshape(len(r), -1).astype(np.float64)
    W = gather(known, r, c, size)
    Z, scale = _centre_known(P, W)
    keep = scale > _FLAT_SHARE * np.median(scale)
    return Z[keep], W[keep]


def _draw_positions(where: np.ndarray, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``min(n, count)`` distinct positions (rows, cols) of the True entries of ``where`` (2-D), uniformly at random.

    Where they are many, positions drawn at random over the whole array
    until enough fall on distinct True entries (a uniform sample without
    replacement, in the order drawn); listing them all would take 16 bytes
    and a page fault's share of time per entry (16 MP: half a second).
    """
    count = int(np.count_nonzero(where))
    n = min(n, count)
    if n == 0:
        return np.zeros(0, np.intp), np.zeros(0, np.intp)
    if count < _DRAW_SHARE * where.size or n > _DRAW_SHARE * count:
        r_all, c_all = np.nonzero(where)
        pick = rng.choice(count, size=n, replace=False)
        return r_all[pick], c_all[pick]
    flat = np.ascontiguousarray(where).reshape(-1)
    got = np.zeros(0, np.intp)
    while len(got) < n:  # each round draws the expected need, twice over: rarely a second one
        cand = rng.integers(0, flat.size, size=2 * (n - len(got)) * flat.size // count + 16)
        got = np.concatenate([got, cand[flat[cand]]])
        _, first = np.unique(got, return_index=True)
        got = got[np.sort(first)]  # each position once, where first drawn
    return np.divmod(got[:n], where.shape[1])


def _centre_known(P: np.ndarray, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`.patches.centre` on the known pixels ``W`` of each patch only: centred, scaled patches and scales.

    The plane is fitted to the known pixels; the scale is their detail's
    norm times ``sqrt(n_features / n_known)``, the norm the whole patch's
    detail would have at the same energy per pixel (complete patches: the
    norm), so that ``lam`` means what it means for complete ones. Missing
    pixels are 0.
    """
    Bs = _plane_basis(P.shape[1])
    Wf = W.astype(np.float64)
    gram = np.einsum("np,pa,pb->nab", Wf, Bs, Bs) + np.diag([_CONSTANT_RIDGE, _PLANE_RIDGE, _PLANE_RIDGE])
    coef = np.linalg.solve(gram, ((Wf * P) @ Bs)[..., None])[..., 0]
    Z = (P - coef @ Bs.T) * Wf
    n_known = np.maximum(Wf.sum(axis=1), 1.0)
    scale = np.maximum(np.sqrt(np.einsum("np,np->n", Z, Z) * P.shape[1] / n_known), _FLAT_NORM)
    return Z / scale[:, None], scale
