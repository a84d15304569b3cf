"""The wavelet transform of one plane or volume: its plan (padding, levels, tree), shifts, shrinkage.

A :class:`_Plan` is cached per shape (:func:`_plan`); :func:`_setup` validates the settings and returns it.
:func:`_shrink_rows` applies the prox of the tree core to rows of coefficients.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pywt

from .._cache import lru_bytes
from .._validation import check_choice, check_int, check_level, check_wavelet, max_level
from ..proximal import PENALTIES, _prox_rows
from ..tree import Tree
from ..wavelet import (
    band_layout,
    default_level,
    level_splits,
    wavelet_forward,
    wavelet_inverse,
    wavelet_inverse_slabs,
    wavelet_tree,
)

# ---------------------------------------------------------------------------
# Transform plan: padding, transform, tree, cached per shape
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    """How to transform arrays of one shape: padding, the levels of each axis, the tree (cached per shape)."""

    shape: tuple[int, ...]
    padded: tuple[int, ...]
    wavelet: str
    levels: tuple[int, ...]
    splits: tuple[int, ...]
    n_approx: int
    tree: Tree

    @cached_property
    def node_level(self) -> np.ndarray:
        """Level of each coefficient (0: approximation, 1: finest details), made when first asked for.

        Only level weights ask for it: 8 bytes a coefficient that a volume at the defaults does not hold.
        """
        node_level = np.zeros(self.n_coeffs, dtype=np.int64)
        for b in band_layout(self.padded, self.splits)[1:]:
            node_level[b.start:b.start + b.size] = b.level
        node_level.setflags(write=False)
        return node_level

    @property
    def level(self) -> int:
        """Number of levels (of the most split axis)."""
        return len(self.splits)

    @property
    def n_coeffs(self) -> int:
        """Number of wavelet coefficients of a padded array."""
        return int(np.prod(self.padded, dtype=np.int64))

    def forward(self, x: np.ndarray, shift: tuple[int, ...] | None = None, out: np.ndarray | None = None,
                multiply: bool = False, lean: bool = False) -> np.ndarray:
        """Flat coefficients of ``x`` padded, then shifted circularly by ``shift``.

        Volumes: in slabs (:func:`restore.wavelet.wavelet_forward`), read from ``x`` in any float dtype
        through the padding's and shift's index maps, never padded or shifted whole; ``out`` receives the
        coefficients, or with ``multiply`` has its detail coefficients multiplied by them (a gain), in
        half a volume of working memory instead of one with ``lean`` (and more time).
        """
        if len(self.shape) == 3:
            return wavelet_forward(x, self.wavelet, self.splits, out, index=self._index(shift), multiply=multiply,
                                   lean=lean)
        if self.padded != self.shape:
            x = np.pad(x, [(0, p - s) for s, p in zip(self.shape, self.padded, strict=True)], mode="symmetric")
        if shift is not None and any(shift):
            x = np.roll(x, shift, axis=tuple(range(x.ndim)))
        return wavelet_forward(x, self.wavelet, self.splits, out)

    def _index(self, shift: tuple[int, ...] | None) -> list[np.ndarray] | None:
        """Per axis, the samples of the padded and shifted array in the unpadded one (None: itself)."""
        if self.padded == self.shape and not (shift is not None and any(shift)):
            return None
        shift = shift or (0,) * len(self.shape)
        return [np.roll(np.pad(np.arange(n), (0, p - n), mode="symmetric"), k)
                for n, p, k in zip(self.shape, self.padded, shift, strict=True)]

    def inverse(self, c: np.ndarray, shift: tuple[int, ...] | None = None) -> np.ndarray:
        if len(self.shape) == 3:
            out = np.empty(self.shape)
            self._inverse_3d(c, shift, out, add=False)
            return out
        x = wavelet_inverse(c, self.wavelet, self.splits, self.padded)
        if shift is not None and any(shift):
            x = np.roll(x, tuple(-s for s in shift), axis=tuple(range(x.ndim)))
        return x[tuple(slice(0, s) for s in self.shape)]

    def add_inverse(self, c: np.ndarray, shift: tuple[int, ...] | None, acc: np.ndarray, *,
                    consume: bool = False) -> None:
        """``acc += self.inverse(c, shift)``, the same values; volumes without a volume of the inverse.

        ``consume``: ``c`` is not read after (a volume's: overwritten by the inverse's working memory).
        """
        if len(self.shape) == 3:
            self._inverse_3d(c, shift, acc, add=True, consume=consume)
        else:
            acc += self.inverse(c, shift)

    def _inverse_3d(self, c: np.ndarray, shift: tuple[int, ...] | None, out: np.ndarray, add: bool,
                    consume: bool = False) -> None:
        """The inverse of a volume, unshifted and cropped slab by slab into ``out`` (added with ``add``)."""
        shift = shift or (0,) * len(self.shape)
        # sample i of the result is sample (i + shift) mod padded of the inverse, for i below the shape
        src = [(np.arange(n) + k) % p for n, p, k in zip(self.shape, self.padded, shift, strict=True)]

        def emit(axis: int, sl: slice, v: np.ndarray) -> None:
            dest = (np.arange(sl.start, sl.stop) - shift[axis]) % self.padded[axis]
            keep = np.flatnonzero(dest < self.shape[axis])
            for a in range(3):
                ix = keep if a == axis else src[a]
                v = np.take(v, ix, axis=a) if ix.size != v.shape[a] or np.any(ix != np.arange(ix.size)) else v
            d = dest[keep]
            target = (slice(None),) * axis + (slice(int(d[0]), int(d[0]) + d.size)
                                              if d.size and np.array_equal(d, np.arange(d[0], d[0] + d.size))
                                              else d,)
            if add:
                out[target] += v
            else:
                out[target] = v

        wavelet_inverse_slabs(c, self.wavelet, self.splits, self.padded, emit, consume=consume)

    def coeff_var(self, var_map: np.ndarray, shift: tuple[int, ...] | None = None, factor: float = 1.0) -> np.ndarray:
        """Noise variance of each coefficient (flat) for independent noise of variance ``factor * var_map`` per sample.

        A coefficient's variance is ``var_map`` weighted by its basis
        function squared; this takes the mean of ``var_map`` over the cell of
        its band's grid (exact for a constant map, and for Haar), padded and
        shifted as :meth:`forward` does. :meth:`band_vars` gives the same values band by band.
        """
        out = np.empty(self.n_coeffs)
        for lo, hi, v in self.band_vars(var_map, shift, factor):
            out[lo:hi] = v
        return out

    def band_vars(self, var_map: np.ndarray, shift: tuple[int, ...] | None = None,
                  factor: float = 1.0) -> list[tuple[int, int, np.ndarray]]:
        """:meth:`coeff_var` as ``(start, stop, variances)`` of each band, the approximation first.

        The bands of a level share one array of cell means: about an eighth of a volume of float64 in all,
        where :meth:`coeff_var` fills a volume, and the padded, shifted map is never made whole.
        """
        levels = self._cell_means(var_map, shift, factor)
        bands = band_layout(self.padded, self.splits)
        return [(0, self.n_approx, levels[-1].ravel())] + [
            (b.start, b.start + b.size, levels[b.level - 1].ravel()) for b in bands[1:]]

    def _cell_means(self, var_map: np.ndarray, shift: tuple[int, ...] | None, factor: float) -> list[np.ndarray]:
        """The means of ``factor * var_map`` (padded, shifted) over each level's cells, level 1 first.

        Level 1 is made a chunk of its first axis at a time, read through :meth:`_index`'s maps: the same
        values as the map padded and shifted whole, then halved axis by axis (the same sums in the same order).
        """
        ndim = len(self.shape)
        index = self._index(shift) or [np.arange(n) for n in self.shape]
        mask = self.splits[0]
        halved = [(mask >> a) & 1 for a in range(ndim)]
        cell = tuple(p >> h for p, h in zip(self.padded, halved, strict=True))
        first = np.empty(cell)
        per_row = int(np.prod(cell[1:], dtype=np.int64)) << (halved[0] + sum(halved))
        rows = max(1, _CELL_CHUNK // max(per_row, 1))
        for r0 in range(0, cell[0], rows):
            r1 = min(cell[0], r0 + rows)
            v = np.take(var_map, index[0][r0 << halved[0]:r1 << halved[0]], axis=0)
            for a in range(1, ndim):
                if index[a].size != v.shape[a] or np.any(index[a] != np.arange(index[a].size)):
                    v = np.take(v, index[a], axis=a)
            if factor != 1.0:
                v = factor * v
            first[r0:r1] = self._halve(v, mask)
        out = [first]
        for mask in self.splits[1:]:
            out.append(self._halve(out[-1], mask))
        return out

    @staticmethod
    def _halve(v: np.ndarray, mask: int) -> np.ndarray:
        """Cell means of ``v`` over the axes ``mask`` splits: pairs averaged, one axis after the other."""
        for a in range(v.ndim):
            if (mask >> a) & 1:
                even = tuple(slice(0, None, 2) if b == a else slice(None) for b in range(v.ndim))
                odd = tuple(slice(1, None, 2) if b == a else slice(None) for b in range(v.ndim))
                v = 0.5 * (v[even] + v[odd])
        return v

    def level_tree(self, level_weights: np.ndarray | None) -> Tree:
        """The tree with the detail groups of level l weighted ``level_weights[l - 1]`` (None: all 1)."""
        if level_weights is None:
            return self.tree
        w = np.concatenate([[1.0], level_weights])[self.node_level] * self.tree.weights
        return self.tree.with_weights(w)


# Samples of the padded, shifted variance map read at once by :meth:`_Plan.band_vars`: 8 MB of float64.
_CELL_CHUNK = 1 << 20


@lru_bytes
def _plan(shape: tuple[int, ...], wavelet: str, level: int | tuple[int, ...], penalize_approx: bool) -> _Plan:
    levels = (int(level),) * len(shape) if np.ndim(level) == 0 else tuple(int(n) for n in level)
    padded = tuple(-(-s // (1 << n)) * (1 << n) for s, n in zip(shape, levels, strict=True))
    splits = level_splits(levels)
    tree = wavelet_tree(padded, wavelet, levels, penalize_approx)
    bands = band_layout(padded, splits)
    return _Plan(tuple(shape), padded, wavelet, levels, splits, bands[0].size, tree)


def _shrink_rows(C: np.ndarray, lam: float, penalty: str, plan: _Plan, penalize_approx: bool,
                 level_weights: np.ndarray | None = None) -> None:
    """Prox of each row of C (n, p), in place; detail level l is shrunk at ``lam * level_weights[l - 1]``.

    The approximation band is left alone by l1/l0 unless penalised (the tree
    penalties carry that choice in their weights).
    """
    if penalty in ("l1", "l0"):
        start = 0 if penalize_approx else plan.n_approx
        if level_weights is None:
            D = np.ascontiguousarray(C[:, start:])
            _prox_rows(D, lam, penalty, None)
            C[:, start:] = D
            return
        for lo, hi, w in _level_ranges(plan, level_weights, start):
            D = np.ascontiguousarray(C[:, lo:hi])
            _prox_rows(D, lam * w, penalty, None)
            C[:, lo:hi] = D
    else:
        _prox_rows(C, lam, penalty, plan.level_tree(level_weights))


def _level_ranges(plan: _Plan, level_weights: np.ndarray, start: int) -> list[tuple[int, int, float]]:
    """Contiguous ranges of the flat vector from ``start``, each with its level's weight (approximation: 1)."""
    lv = plan.node_level
    edges = np.flatnonzero(np.diff(lv)) + 1
    bounds = np.concatenate([[0], edges, [lv.size]])
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        lo = max(int(lo), start)
        if lo < hi:
            out.append((lo, int(hi), 1.0 if lv[lo] == 0 else float(level_weights[lv[lo] - 1])))
    return out


def _shifts(k: int, ndim: int = 2) -> list[tuple[int, ...]]:
    """K circular shifts over ``ndim`` axes, finest first: in 2-D (0,0), (1,1), (1,0), (0,1), (2,2), ...

    Shift ``s`` is read in base ``2**ndim``: its digit ``j`` sets bit ``j`` of
    every axis' shift, the digits taken in an order where each shift comes
    before its complement's neighbours (the all-ones shift second).
    """
    if ndim == 2:
        order = (0, 3, 2, 1)  # (dy, dx) bits: 0 -> (0, 0), 3 -> (1, 1), 2 -> (1, 0), 1 -> (0, 1)
    else:
        order = (0, 7, 4, 3, 2, 5, 1, 6)  # complementary pairs: (0,0,0) (1,1,1), (1,0,0) (0,1,1), ...
    base = 1 << ndim
    out = []
    for s in range(k):
        shift = [0] * ndim
        j = 0
        while s:
            digit = order[s % base]
            for a in range(ndim):
                shift[a] += ((digit >> (ndim - 1 - a)) & 1) << j
            s //= base
            j += 1
        out.append(tuple(shift))
    return out


def _setup(plane_shape, penalty, wavelet, level, penalize_approx) -> _Plan:
    """Validate the transform's settings for arrays of this shape (2 or 3 sides); the cached plan."""
    check_choice("penalty", penalty, PENALTIES, plural="penalties")
    shape = tuple(int(s) for s in plane_shape)
    return _plan(shape, wavelet, _levels(shape, wavelet, level), bool(penalize_approx))


def _levels(shape: tuple[int, ...], wavelet: str, level) -> tuple[int, ...]:
    """Validated levels of each axis: 2-D as always (at most :func:`max_level`), 3-D an int or one per axis."""
    wav = check_wavelet(wavelet)
    if len(shape) == 2:
        lv = min(default_level(shape), max_level(shape, wav)) if level is None else check_level(level, shape, wav)
        return (lv, lv)
    if level is None:
        return _default_levels(shape)
    if np.ndim(level) == 0:
        levels = (check_int("level", level, min=1),) * len(shape)
    else:
        levels = tuple(check_int("level", n, min=0) for n in level)
        if len(levels) != len(shape) or max(levels) < 1:
            raise ValueError(f"level must be an integer >= 1 or one integer >= 0 per axis ({len(shape)} axes, "
                             f"at least one >= 1), got {level!r}")
    for n, lv in zip(shape, levels, strict=True):
        # deeper, padding would more than double the axis (2**level samples) for a coarsest band of one sample
        deepest = max(1, int(np.ceil(np.log2(n))))
        if lv > deepest:
            raise ValueError(f"level {lv} is too deep for an axis of {n} samples (volume {'x'.join(map(str, shape))}): "
                             f"at most {deepest} there, or None for the default")
    return levels


# 3-D: levels leave at least this many samples on the thinnest axis (2-D keeps about 16, default_level)
_MIN_SAMPLES_3D = 4
# ... and are at most this many: deeper levels gain nothing on the benchmark's volumes (bench_volume.py --part
# choices), and the default must not grow with the volume, or a Dask volume's overlaps (2**level wide) would too
_MAX_LEVELS_3D = 3


def _default_levels(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Default levels per axis of a 3-D transform: down to a few samples on the thinnest axis, at most 3, equal."""
    n = min(shape)
    return (min(_MAX_LEVELS_3D, max(1, int(np.floor(np.log2(max(n, 2) / _MIN_SAMPLES_3D))))),) * len(shape)


def _overlap(wavelet: str, levels: int) -> int:
    """Exact reach of a Dask block's border along an axis with ``levels`` levels: its deepest basis functions.

    A coarsest coefficient spans ``(L - 1) * (2**levels - 1) + 1`` samples for a
    filter of length ``L``, and its tree group no more than one further
    coarsest cell (``2**levels``): beyond that a block's border cannot reach
    its interior.
    """
    return (pywt.Wavelet(wavelet).dec_len - 1) * ((1 << levels) - 1) + (1 << levels)
