"""Wavelet trees: one node per coefficient of a 2-D or 3-D orthonormal wavelet transform.

A transform over ``d`` axes (2 or 3) is described by its *splits*: for each
level, finest first, the set of axes that level halves, as a bit mask (bit
``a`` for axis ``a``). A level that halves ``k`` axes gives ``2**k - 1``
detail bands; its *orientations* are the non-empty subsets of those axes
along which the band is a detail (high-pass). Every axis is halved at its
own number of levels (:func:`level_splits`), so an anisotropic volume can
have fewer levels along z than along y and x.

The tree: approximation coefficients are roots. A detail coefficient hangs
below the coefficient of the next coarser level with the same orientation
at its position halved along the axes that coarser level splits (2**k
children per parent: 8 in 3-D, 4 where z is not split, as in 2-D). The
coarsest details hang below the approximation coefficient at their
position. An axis with fewer levels is halved at the coarsest ones, so the
orientations of a level are always among those of the next coarser one:
every detail coefficient has a parent, and the z-detail orientations of
the finest level that halves z are leaves. (A band whose orientation were
missing at the next coarser level would hang below the approximation.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
import pywt

from ._cache import lru_bytes
from ._core_regular import Bands
from ._validation import check_level, check_wavelet, max_level
from .tree import Tree

__all__ = ["level_splits", "quadtree_parents", "wavelet_quadtree", "wavelet_tree", "wavelet_tree_parents"]


def level_splits(levels: Sequence[int]) -> tuple[int, ...]:
    """The axes halved at each level, finest first, as bit masks.

    Parameters
    ----------
    levels : sequence of int
        Number of levels along each axis (each >= 0, the largest >= 1).

    Returns
    -------
    tuple of int
        ``max(levels)`` masks; bit ``a`` of mask ``j`` is set when axis ``a``
        is halved at level ``j + 1``. An axis with ``n`` levels is halved at
        the ``n`` coarsest levels: the finest levels of an anisotropic volume
        split y and x only, as its z sampling is already coarser than its
        finest y, x scale, and every orientation keeps a parent.

    Examples
    --------
    >>> level_splits((2, 4, 4))  # z halved at levels 3 and 4 only
    (6, 6, 7, 7)
    """
    levels = tuple(int(n) for n in levels)
    top = max(levels)
    return tuple(sum(1 << a for a, n in enumerate(levels) if j >= top - n) for j in range(top))


def _split_counts(splits: Sequence[int], ndim: int, upto: int) -> tuple[int, ...]:
    """How many times each axis is halved by the ``upto`` finest levels."""
    return tuple(sum((m >> a) & 1 for m in splits[:upto]) for a in range(ndim))


def _orientations(mask: int) -> list[int]:
    """Detail orientations of a level splitting the axes of ``mask``: its non-empty subsets.

    In the order of PyWavelets' keys ('aad' < 'ada' < ... < 'ddd', the first
    letter for axis 0), as :func:`pywt.ravel_coeffs` lays them out.
    """
    subsets = [o for o in range(1, mask + 1) if o & ~mask == 0]
    return sorted(subsets, key=lambda o: [(o >> a) & 1 for a in range(mask.bit_length())])


@dataclass(frozen=True)
class Band:
    """One band of a multilevel transform in the flat coefficient vector.

    Attributes
    ----------
    level : int
        1 for the finest details, ``len(splits)`` for the coarsest; the
        approximation band has ``level = len(splits)`` and ``orientation = 0``.
    orientation : int
        Bit mask of the axes along which the band is a detail (0 for the
        approximation).
    shape : tuple of int
        Shape of the band.
    start : int
        Offset of its first coefficient in the flat vector (C order inside).
    """

    level: int
    orientation: int
    shape: tuple[int, ...]
    start: int

    @property
    def size(self) -> int:
        """Number of coefficients."""
        return int(np.prod(self.shape, dtype=np.int64))


def band_layout(shape: Sequence[int], splits: Sequence[int]) -> list[Band]:
    """The bands of the transform of an array of ``shape``, in flat order.

    Flat order: the approximation band, then each level from the coarsest to
    the finest, its orientations in the order of PyWavelets' keys, each band
    raveled in C order (with every level splitting every axis this is
    :func:`pywt.ravel_coeffs` of :func:`pywt.wavedecn`).

    Parameters
    ----------
    shape : sequence of int
        Shape of the transformed array; each side divisible by 2 to the
        number of levels that halve it.
    splits : sequence of int
        Masks of the halved axes, finest level first (:func:`level_splits`).
    """
    shape = tuple(int(s) for s in shape)
    nd, n_levels = len(shape), len(splits)

    def shape_at(upto: int) -> tuple[int, ...]:
        return tuple(s >> k for s, k in zip(shape, _split_counts(splits, nd, upto), strict=True))

    approx = shape_at(n_levels)
    bands = [Band(n_levels, 0, approx, 0)]
    start = bands[0].size
    for level in range(n_levels, 0, -1):
        bshape = shape_at(level)
        for o in _orientations(splits[level - 1]):
            bands.append(Band(level, o, bshape, start))
            start += bands[-1].size
    return bands


def wavelet_tree_parents(shape: Sequence[int], splits: Sequence[int]) -> np.ndarray:
    """Parents of the coefficients of a multilevel wavelet transform in 2-D or 3-D.

    Parameters
    ----------
    shape : sequence of int
        Shape of the transformed array (see :func:`band_layout`).
    splits : sequence of int
        Masks of the axes halved at each level, finest first.

    Returns
    -------
    ndarray of int64
        Parent of every coefficient, numbered as in :func:`band_layout`:
        -1 for the approximation band; for a detail coefficient at position
        ``p`` of level ``l``, orientation ``o``: the coefficient of level
        ``l + 1``, orientation ``o``, at ``p`` halved along the axes level
        ``l + 1`` splits, when level ``l + 1`` has orientation ``o``;
        otherwise the approximation coefficient at ``p`` halved along every
        split of the levels above ``l``.
    """
    bands = band_layout(shape, splits)
    nd = len(bands[0].shape)
    approx = bands[0]
    where = {(b.level, b.orientation): b for b in bands}
    parents = [np.full(approx.size, -1, dtype=np.int64)]
    for b in bands[1:]:
        up = where.get((b.level + 1, b.orientation))
        target = up if up is not None else approx
        idx = np.indices(b.shape, dtype=np.int64)
        for a in range(nd):
            shift = b.shape[a].bit_length() - target.shape[a].bit_length()
            idx[a] = np.minimum(idx[a] >> shift, target.shape[a] - 1)
        parents.append(target.start + np.ravel_multi_index(tuple(idx), target.shape).ravel())
    return np.concatenate(parents)


def quadtree_parents(band_shapes: tuple[tuple[int, int], ...]) -> np.ndarray:
    """Parents of the coefficients of a 2-D multilevel wavelet transform.

    Parameters
    ----------
    band_shapes : tuple of (int, int)
        Shape of the approximation band followed by the shape of the detail
        bands of each level, coarse to fine (PyWavelets' order; every level
        has three bands of that shape: horizontal, vertical, diagonal).

    Returns
    -------
    ndarray of int64
        Parent of every coefficient, numbered as in :func:`pywt.ravel_coeffs`
        (approximation, then for each level, coarse to fine, the horizontal,
        vertical and diagonal bands, each raveled in C order). Approximation
        coefficients are roots; a coarsest detail coefficient hangs below the
        approximation coefficient at the same position; a detail coefficient
        at ``(r, c)`` of a finer level hangs below ``(r // 2, c // 2)`` of the
        next coarser level, same orientation (clipped to that band, so sizes
        need not be powers of two).
    """
    approx = band_shapes[0]
    parents = [np.full(approx[0] * approx[1], -1, dtype=np.int64)]
    offset_prev = None  # start of the previous level's first band
    prev_shape = approx
    offset = approx[0] * approx[1]
    for li, shape in enumerate(band_shapes[1:]):
        h, w = shape
        r = np.minimum(np.arange(h) // 2 if li else np.arange(h), prev_shape[0] - 1)
        c = np.minimum(np.arange(w) // 2 if li else np.arange(w), prev_shape[1] - 1)
        local = (r[:, None] * prev_shape[1] + c[None, :]).ravel()
        band_size = prev_shape[0] * prev_shape[1]
        for o in range(3):
            if li == 0:
                parents.append(local.astype(np.int64))
            else:
                parents.append((offset_prev + o * band_size + local).astype(np.int64))
        offset_prev = offset
        offset += 3 * h * w
        prev_shape = shape
    return np.concatenate(parents)


def regular_bands(shape: Sequence[int], splits: Sequence[int], level_weights: Sequence[float],
                  approx_weight: float) -> Bands:
    """Describe the bands of the transform of an array of ``shape`` (sides divisible by their splits).

    ``level_weights[l - 1]`` weighs the detail groups of level ``l`` (1 the
    finest); ``approx_weight`` the approximation's.
    """
    layout = band_layout(shape, splits)
    nd = len(layout[0].shape)
    where = {(b.level, b.orientation): i for i, b in enumerate(layout)}
    n = len(layout)
    start = np.array([b.start for b in layout], dtype=np.int64)
    bshape = np.ones((n, 3), dtype=np.int64)
    parent = np.full(n, -1, dtype=np.int64)
    shift = np.zeros((n, 3), dtype=np.int64)
    weight = np.empty(n)
    for i, b in enumerate(layout):
        bshape[i, 3 - nd:] = b.shape
        if i == 0:
            weight[i] = approx_weight
            continue
        weight[i] = level_weights[b.level - 1]
        up = where.get((b.level + 1, b.orientation), 0)
        parent[i] = up
        for a in range(nd):
            shift[i, 3 - nd + a] = b.shape[a].bit_length() - layout[up].shape[a].bit_length()
    inner = np.zeros(n, dtype=np.int64)
    inner[parent[parent >= 0]] = 1
    if np.any(weight < 0) or not np.all(np.isfinite(weight)):
        raise ValueError(f"group weights must be finite and >= 0, got {weight!r}")
    return Bands(start, bshape, parent, shift, weight, inner)



@lru_bytes
def _tree(shape: tuple[int, ...], splits: tuple[int, ...], penalize_approx: bool) -> Tree:
    # regular: the prox walks it by index arithmetic, and its general layout is built only if something asks for it
    bands = regular_bands(shape, splits, [1.0] * len(splits), 1.0 if penalize_approx else 0.0)
    return Tree._from_regular(bands, partial(wavelet_tree_parents, shape, splits))  # noqa: SLF001


def wavelet_tree(shape: Sequence[int], wavelet: str = "db3", level: int | Sequence[int] | None = None,
                 penalize_approx: bool = False) -> Tree:
    """The tree of the coefficients of a 2-D (quad-tree) or 3-D (octree) wavelet transform.

    Parameters
    ----------
    shape : sequence of int
        Shape of the transformed array, 2 or 3 sides; each divisible by 2 to
        its number of levels (pad first).
    wavelet : str
        An orthogonal wavelet name known to PyWavelets.
    level : int or sequence of int, optional
        Number of levels, the same along every axis, or one per axis (a
        thin or coarsely sampled axis may have fewer; see
        :func:`level_splits`). Default: :func:`default_level`.
    penalize_approx : bool, default False
        Weight of the approximation coefficients' groups: 1 when True, 0
        (unpenalised roots) when False. Detail groups have weight 1.

    Returns
    -------
    Tree
        One node per coefficient, owning that coefficient, numbered as in
        :func:`band_layout` (for 2-D and equal levels, as
        :func:`pywt.ravel_coeffs` of :func:`pywt.wavedec2`). Built once per
        argument set and cached.
    """
    try:
        shape = tuple(int(s) for s in shape)
    except (TypeError, ValueError):
        raise ValueError(f"shape must be 2 or 3 positive integers, got {shape!r}") from None
    if len(shape) not in (2, 3) or min(shape) < 2:
        raise ValueError(f"shape must have 2 or 3 sides of at least 2, got {shape!r}")
    check_wavelet(wavelet)
    levels = default_level(shape) if level is None else level
    levels = (int(levels),) * len(shape) if np.ndim(levels) == 0 else tuple(int(n) for n in levels)
    if len(levels) != len(shape) or min(levels) < 0 or max(levels) < 1:
        raise ValueError(f"level must be an integer >= 1 or one integer >= 0 per axis ({len(shape)}), "
                         f"got {level!r}")
    bad = [a for a, (s, n) in enumerate(zip(shape, levels, strict=True)) if s % (1 << n)]
    if bad:
        raise ValueError(f"shape {shape} is not divisible by 2**level along axis {bad[0]} "
                         f"(level {levels[bad[0]]}): pad the array first")
    return _tree(shape, level_splits(levels), bool(penalize_approx))


def wavelet_quadtree(shape: tuple[int, int], wavelet: str = "db3", level: int | None = None,
                     penalize_approx: bool = False) -> Tree:
    """The quad-tree of the coefficients of ``pywt.wavedec2`` with periodization.

    Parameters
    ----------
    shape : (int, int)
        Image shape; each side must be divisible by ``2**level`` (pad first).
    wavelet : str
        An orthogonal wavelet name known to PyWavelets.
    level : int, optional
        Number of levels; default: as many as leave an approximation band
        of about 16 x 16.
    penalize_approx : bool, default False
        Weight of the approximation coefficients' groups: 1 when True, 0
        (unpenalised roots) when False. Detail groups have weight 1.

    Returns
    -------
    Tree
        One node per coefficient, owning that coefficient, numbered as in
        :func:`pywt.ravel_coeffs`. Built once per argument set and cached:
        the 2-D case of :func:`wavelet_tree`.
    """
    try:
        h, w = (int(s) for s in shape)
    except (TypeError, ValueError):
        raise ValueError(f"shape must be two positive integers (M, N), got {shape!r}") from None
    if min(h, w) < 2:
        raise ValueError(f"shape must have sides of at least 2, got {shape!r}")
    wav = check_wavelet(wavelet)
    level = min(default_level((h, w)), max_level((h, w), wav)) if level is None else check_level(level, (h, w), wav)
    return wavelet_tree((h, w), wavelet, level, penalize_approx)


def default_level(shape: Sequence[int]) -> int:
    """Levels that leave an approximation band of about 16 pixels a side."""
    n = min(int(s) for s in shape)
    return max(1, int(np.floor(np.log2(max(n, 2)))) - 4)


# ---------------------------------------------------------------------------
# The transform itself, on the layout of band_layout
# ---------------------------------------------------------------------------


def _axes(mask: int, ndim: int) -> tuple[int, ...]:
    return tuple(a for a in range(ndim) if (mask >> a) & 1)


def _key_mask(key: str, axes: tuple[int, ...]) -> int:
    """Orientation mask of a PyWavelets key ('ad', 'dda'...) over ``axes``."""
    return sum(1 << a for a, ch in zip(axes, key, strict=True) if ch == "d")


def wavelet_forward(x: np.ndarray, wavelet: str, splits: Sequence[int], out: np.ndarray | None = None) -> np.ndarray:
    """Flat coefficients (:func:`band_layout` order) of the periodized transform of ``x``.

    Orthonormal when ``x``'s sides are divisible by 2 to their number of
    splits. ``out`` (float64, of size ``x.size``) receives them when given.
    """
    nd = x.ndim
    bands = {(b.level, b.orientation): b for b in band_layout(x.shape, splits)}
    flat = np.empty(x.size) if out is None else out
    a = x
    for level, mask in enumerate(splits, start=1):
        axes = _axes(mask, nd)
        d = pywt.dwtn(a, wavelet, mode="periodization", axes=axes)
        a = d.pop("a" * len(axes))
        for key, band in d.items():
            b = bands[(level, _key_mask(key, axes))]
            flat[b.start:b.start + b.size] = band.ravel()
    flat[: a.size] = a.ravel()
    return flat


def wavelet_inverse(c: np.ndarray, wavelet: str, splits: Sequence[int], shape: Sequence[int]) -> np.ndarray:
    """Inverse of :func:`wavelet_forward`: the array of ``shape`` with flat coefficients ``c``."""
    nd = len(shape)
    layout = band_layout(shape, splits)
    bands = {(b.level, b.orientation): b for b in layout}
    a = c[: layout[0].size].reshape(layout[0].shape)
    for level in range(len(splits), 0, -1):
        axes = _axes(splits[level - 1], nd)
        d = {}
        for o in _orientations(splits[level - 1]):
            b = bands[(level, o)]
            key = "".join("d" if (o >> ax) & 1 else "a" for ax in axes)
            d[key] = c[b.start:b.start + b.size].reshape(b.shape)
        d["a" * len(axes)] = a
        a = pywt.idwtn(d, wavelet, mode="periodization", axes=axes)
    return a
