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
from itertools import product

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


def wavelet_forward(x: np.ndarray, wavelet: str, splits: Sequence[int], out: np.ndarray | None = None, *,
                    index: Sequence[np.ndarray] | None = None, multiply: bool = False,
                    lean: bool = False) -> np.ndarray:
    """Flat coefficients (:func:`band_layout` order) of the periodized transform of ``x``.

    Orthonormal when ``x``'s sides are divisible by 2 to their number of
    splits. ``out`` (float64, of size ``x.size``) receives them when given.

    Volumes (3-D) are transformed in slabs (:func:`_forward_3d`): the same
    arithmetic as on the whole, so the same coefficients bit for bit, with
    half a volume of working memory besides ``out`` and ``x`` read in any
    float dtype, slab by slab (``x`` only by indexing: it may be a view that
    computes what is read). ``index`` (3-D only): one index array per
    axis, the array transformed being ``x[ix_(*index)]`` (a padded, shifted
    copy, never made whole). ``multiply`` (3-D only): ``out``'s detail
    coefficients are multiplied by the transform's (its approximation
    coefficients replaced): a gain applied as the coefficients are made;
    ``out`` then holds no free memory, and the working memory is a volume,
    or with ``lean`` half a volume for a second pass over the first axis of
    the finest level (about a sixth more time).
    """
    if x.ndim == 3 or index is not None:
        shape = tuple(len(i) for i in index) if index is not None else x.shape
        flat = np.empty(int(np.prod(shape, dtype=np.int64))) if out is None else out
        _forward_3d(_reader(x, index), shape, wavelet, splits, flat, multiply, lean)
        return flat
    if multiply:
        raise ValueError("multiply is for 3-D transforms")
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
    """Inverse of :func:`wavelet_forward`: the array of ``shape`` with flat coefficients ``c``.

    Volumes: in slabs (:func:`wavelet_inverse_slabs`), the same values as on the whole.
    """
    nd = len(shape)
    if nd == 3:
        out = np.empty(tuple(int(s) for s in shape))

        def put(axis: int, sl: slice, v: np.ndarray) -> None:
            out[(slice(None),) * axis + (sl,)] = v

        wavelet_inverse_slabs(c, wavelet, splits, shape, put)
        return out
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


# ---------------------------------------------------------------------------
# Volumes in slabs: the transform of one level, one axis group at a time
# ---------------------------------------------------------------------------

# Float64 bytes of one slab of the slab-wise 3-D transform: small against a volume's (its working memory is a volume
# and a slab), large enough that PyWavelets' cost per call stays small (4 planes of 512 x 512).
_SLAB_BYTES = 8 << 20


def _slabs(shape: Sequence[int], axis: int) -> list[slice]:
    """Slices along ``axis`` of slabs of about :data:`_SLAB_BYTES` (float64) of an array of ``shape``."""
    n = int(shape[axis])
    per = 8 * int(np.prod(shape, dtype=np.int64)) // max(n, 1)
    step = max(1, _SLAB_BYTES // max(per, 1))
    return [slice(j, min(j + step, n)) for j in range(0, n, step)]


def _along(axis: int, sl: slice | np.ndarray, ndim: int = 3) -> tuple:
    """Index of ``sl`` along ``axis``, everything along the others."""
    return (slice(None),) * axis + (sl,) + (slice(None),) * (ndim - axis - 1)


def _half(key: str, axes: Sequence[int], shape: Sequence[int]) -> tuple:
    """Index of the part of a level's array (Mallat layout over ``axes``) that holds subband ``key`` of ``axes``."""
    idx = [slice(None)] * len(shape)
    for a, ch in zip(axes, key, strict=True):
        h = int(shape[a]) // 2
        idx[a] = slice(0, h) if ch == "a" else slice(h, 2 * h)
    return tuple(idx)


def _reader(x: np.ndarray, index: Sequence[np.ndarray] | None):
    """``read(axis, sl)``: the slab ``sl`` along ``axis`` of ``x[ix_(*index)]`` (or of ``x``), float64.

    ``x`` is read only by indexing (one axis at a time, the slab's first): an array, or a view that computes what
    is read of it.
    """
    def as_slice(ix: np.ndarray) -> slice | np.ndarray:
        if ix.size and ix[0] >= 0 and np.array_equal(ix, np.arange(ix[0], ix[0] + ix.size)):
            return slice(int(ix[0]), int(ix[0]) + ix.size)
        return ix

    if index is None:
        return lambda axis, sl: np.asarray(x[_along(axis, sl, x.ndim)], dtype=np.float64)
    index = [np.asarray(i, dtype=np.int64) for i in index]
    whole = [as_slice(i) for i in index]

    def read(axis: int, sl: slice) -> np.ndarray:
        v = x
        order = [axis] + [a for a in range(x.ndim) if a != axis]  # the slab first: the other takes are then small
        for a in order:
            ix = as_slice(index[a][sl]) if a == axis else whole[a]
            # a source that is no array by indexing: a view that computes what is read (._units.StabilisedVolume)
            by_index = isinstance(ix, slice) or not isinstance(v, np.ndarray)
            v = v[_along(a, ix, x.ndim)] if by_index else np.take(v, ix, axis=a)
        return np.asarray(v, dtype=np.float64)

    return read


def _forward_level(read, shape: tuple[int, ...], wavelet: str, axes: tuple[int, ...], write,
                   scratch: np.ndarray | None = None) -> None:
    """One level of the transform over ``axes`` of an array of ``shape`` (``read(axis, sl)`` its slabs).

    The axes but the last, in slabs along the last (PyWavelets' ``dwt`` along each, whose lines they hold whole), into
    half a volume in Mallat layout: the half of the approximation along the first axis, then that of its details;
    each half then along the last axis, subband by subband, in slabs along another axis. Each line goes through the
    same filter code as in ``dwtn`` of the whole, in the same order of axes: the same coefficients.
    ``write(key, index, values)``: subband ``key`` (one letter per axis of ``axes``) at ``index``. ``scratch``:
    memory free until the details along the first axis are written (half the array's size, float64), which then
    holds the approximation's half while the details' half is made in the same pass; without it, the first axis is
    transformed twice, once for each half (half a volume of working memory, not a volume, either way).
    """
    nd = len(shape)
    last, first = axes[-1], axes[:-1]
    other = next(a for a in range(nd) if a != last)
    if not first:  # one axis: its lines read whole, in slabs along another
        for sl in _slabs(shape, other):
            idx = _along(other, sl, nd)
            ca, cd = pywt.dwt(read(other, sl), wavelet, mode="periodization", axis=last)
            write("a", idx, ca)
            write("d", idx, cd)
        return
    head, rest = first[0], first[1:]
    half = tuple(s // 2 if a == head else s for a, s in enumerate(shape))
    keys = ["".join(k) for k in product("ad", repeat=len(rest))]

    def fill(bufs: dict[str, np.ndarray]) -> None:  # the halves ``bufs`` names ('a', 'd'), the axes but the last
        for sl in _slabs(shape, last):
            lo, hi = pywt.dwt(read(last, sl), wavelet, mode="periodization", axis=head)
            for h, v in (("a", lo), ("d", hi)):
                if h in bufs:
                    for key, w in (pywt.dwtn(v, wavelet, mode="periodization", axes=rest) if rest else {"": v}).items():
                        part = list(_half(key, rest, half))
                        part[last] = sl
                        bufs[h][tuple(part)] = w
            del lo, hi

    def finish(h: str, buf: np.ndarray) -> None:  # the last axis of half ``h``
        for key in keys:
            q = buf[_half(key, rest, half)]
            for sl in _slabs(q.shape, other):
                idx = _along(other, sl, nd)
                ca, cd = pywt.dwt(q[idx], wavelet, mode="periodization", axis=last)
                write(h + key + "a", idx, ca)
                write(h + key + "d", idx, cd)

    if scratch is not None:
        bufs = {"a": scratch.reshape(half), "d": np.empty(half)}
        fill(bufs)
        finish("a", bufs.pop("a"))
        finish("d", bufs.pop("d"))
        return
    for h in "ad":
        buf = np.empty(half)
        fill({h: buf})
        finish(h, buf)
        del buf


def _forward_3d(read, shape: tuple[int, ...], wavelet: str, splits: Sequence[int], flat: np.ndarray,
                multiply: bool, lean: bool = False) -> None:
    """:func:`wavelet_forward` of a volume read in slabs (``read(axis, sl)``), into ``flat``."""
    nd = len(shape)
    if not splits:  # no level: the coefficients are the values
        for sl in _slabs(shape, 0):
            flat.reshape(shape)[sl] = read(0, sl)
        return
    bands = {(b.level, b.orientation): b for b in band_layout(shape, splits)}
    for level, mask in enumerate(splits, start=1):
        axes = _axes(mask, nd)
        approx = np.empty(tuple(s // 2 if (mask >> a) & 1 else s for a, s in enumerate(shape)))

        def write(key: str, idx: tuple, v: np.ndarray, level: int = level, axes: tuple = axes,
                  approx: np.ndarray = approx) -> None:
            if "d" not in key:
                approx[idx] = v
                return
            b = bands[(level, _key_mask(key, axes))]
            view = flat[b.start:b.start + b.size].reshape(b.shape)
            if multiply:
                view[idx] *= v
            else:
                view[idx] = v

        # the level's details along its first axis go to flat[n // 2:n] (n: the level's input), written last:
        # until then free, unless a gain is there to be multiplied; then memory apart, or a second pass (lean)
        n = int(np.prod(shape, dtype=np.int64))
        scratch = None
        if len(axes) > 1 and not multiply and flat.flags.c_contiguous:
            scratch = flat[n // 2:n]
        elif len(axes) > 1 and not (lean and level == 1):  # coarser levels: an eighth of the finest or less
            scratch = np.empty(n // 2)
        _forward_level(read, shape, wavelet, axes, write, scratch)
        del scratch
        read = partial(lambda axis, sl, a: a[_along(axis, sl, nd)], a=approx)
        shape = approx.shape
    flat[: approx.size] = approx.ravel()


def _inverse_level(band, shape: tuple[int, ...], wavelet: str, axes: tuple[int, ...], write,
                   scratch: np.ndarray | None = None) -> None:
    """One level of the inverse over ``axes``, to an array of ``shape``: ``write(axis, sl, values)`` its slabs.

    The reverse of :func:`_forward_level`, half by half: the subbands of the approximation along the first axis,
    along the last axis (subband pair by pair, in slabs along another axis) into half a volume in Mallat layout
    over the others, then those but the first (PyWavelets' ``idwtn``) in slabs along the last, into half a volume;
    the same for the details' half, whose slabs then meet the approximation's along the first axis. The same lines
    through the same code, in ``idwtn``'s order of axes: the same values as ``idwtn`` of the whole.
    ``band(key)``: subband ``key`` of ``axes``. ``scratch``: memory free once the approximation's subbands have
    been read (half the array's size, float64), which then holds its half (else a volume of working memory, not half).
    """
    nd = len(shape)
    last, first = axes[-1], axes[:-1]
    other = next(a for a in range(nd) if a != last)
    if not first:  # one axis: its lines whole, in slabs along another
        lo, hi = band("a"), band("d")
        for sl in _slabs(lo.shape, other):
            idx = _along(other, sl, nd)
            write(other, sl, pywt.idwt(lo[idx], hi[idx], wavelet, mode="periodization", axis=last))
        return
    head, rest = first[0], first[1:]
    half = tuple(s // 2 if a == head else s for a, s in enumerate(shape))
    keys = ["".join(k) for k in product("ad", repeat=len(rest))]

    def unlast(h: str, buf: np.ndarray) -> None:  # the last axis of half ``h``'s subbands, into ``buf``
        for key in keys:
            lo, hi = band(h + key + "a"), band(h + key + "d")
            q = buf[_half(key, rest, half)]
            for sl in _slabs(lo.shape, other):
                idx = _along(other, sl, nd)
                q[idx] = pywt.idwt(lo[idx], hi[idx], wavelet, mode="periodization", axis=last)

    def unrest(buf: np.ndarray, sl: slice) -> np.ndarray:  # the axes but the first and the last, slab ``sl``
        parts = {}
        for key in keys:
            part = list(_half(key, rest, half))
            part[last] = sl
            parts[key] = buf[tuple(part)]
        return pywt.idwtn(parts, wavelet, mode="periodization", axes=rest) if rest else parts[""]

    buf = np.empty(half)
    unlast("a", buf)
    approx = np.empty(half) if scratch is None else scratch.reshape(half)
    for sl in _slabs(shape, last):
        approx[_along(last, sl, nd)] = unrest(buf, sl)
    unlast("d", buf)
    for sl in _slabs(shape, last):
        write(last, sl, pywt.idwt(approx[_along(last, sl, nd)], unrest(buf, sl), wavelet, mode="periodization",
                                  axis=head))


def wavelet_inverse_slabs(c: np.ndarray, wavelet: str, splits: Sequence[int], shape: Sequence[int], emit, *,
                          consume: bool = False) -> None:
    """:func:`wavelet_inverse` of a volume, its finest level handed out in slabs: ``emit(axis, sl, values)``.

    ``consume``: ``c`` is the caller's to lose (overwritten, not read after): each level's coefficients, once
    read, hold half of its working memory (:func:`_inverse_level`'s ``scratch``), half a volume less at the finest.
    """
    nd = len(shape)
    shape = tuple(int(s) for s in shape)
    layout = band_layout(shape, splits)
    bands = {(b.level, b.orientation): b for b in layout}
    a = c[: layout[0].size].reshape(layout[0].shape)
    if not splits:  # no level: the values are the coefficients
        for sl in _slabs(shape, 0):
            emit(0, sl, a[sl])
        return
    for level in range(len(splits), 0, -1):
        axes = _axes(splits[level - 1], nd)
        out_shape = tuple(s >> k for s, k in zip(shape, _split_counts(splits, nd, level - 1), strict=True))

        def band(key: str, level: int = level, axes: tuple = axes, a: np.ndarray = a) -> np.ndarray:
            if "d" not in key:
                return a
            b = bands[(level, _key_mask(key, axes))]
            return c[b.start:b.start + b.size].reshape(b.shape)

        # the level's coarser half of c (its approximation's subbands and the coarser levels): read first
        n = int(np.prod(out_shape, dtype=np.int64))
        scratch = c[:n // 2] if consume and c.flags.c_contiguous and c.flags.writeable and len(axes) > 1 else None
        if level == 1:
            _inverse_level(band, out_shape, wavelet, axes, emit, scratch)
            return
        out = np.empty(out_shape)

        def put(axis: int, sl: slice, v: np.ndarray, out: np.ndarray = out) -> None:
            out[_along(axis, sl, nd)] = v

        _inverse_level(band, out_shape, wavelet, axes, put, scratch)
        a = out
