"""Tree kernels for the regular trees of wavelet transforms, walked by index arithmetic.

The wavelet quad-tree and octree are regular: a detail coefficient's parent
is the coefficient of the next coarser band of the same orientation at its
position halved along the axes that band's level splits (the coarsest
details hang below the approximation coefficient at their own position).
These kernels take the coefficients in :func:`restore.wavelet.band_layout`
order and a description of the bands (a few numbers each) instead of the
per-coefficient arrays of :mod:`restore._core`: the same penalties, the same
group steps in the same order, with no index array and a scratch of one
(tree-l2) or two (tree-l0) floats per coefficient.

The bands reach the kernels as flat arrays, one entry per band in flat order
(approximation first, then coarse to fine, as :func:`band_layout` lists
them):

``start``   (B,)    offset of the band's first coefficient.
``shape``   (B, 3)  its shape, padded with leading 1s to three axes.
``parent``  (B,)    the band holding its coefficients' parents, -1 for roots.
``shift``   (B, 3)  per axis, 1 when the position halves on the way to the parent.
``weight``  (B,)    group weight of its coefficients (>= 0).
``inner``   (B,)    1 when some band hangs below it (its scratch starts at 0).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from ._config import JIT


class Bands(NamedTuple):
    """The band description the kernels take (see the module docstring)."""

    start: np.ndarray
    shape: np.ndarray
    parent: np.ndarray
    shift: np.ndarray
    weight: np.ndarray
    inner: np.ndarray

    @property
    def n_coeffs(self) -> int:
        """Number of coefficients the bands cover."""
        return int(self.start[-1] + np.prod(self.shape[-1]))


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def prox_regular_tree_l2(X, r0, r1, start, shape, parent, shift, weight, inner, lams, work):
    """Prox of ``lam * sum_n w_n ||x_g(n)||_2`` on rows ``r0 .. r1 - 1`` of ``X``, in place.

    As :func:`restore._core.prox_tree_l2`: bottom-up (finest band first)
    each coefficient's subtree norm after its children's scalings gives its
    scaling, top-down every coefficient is multiplied by the product of its
    own and its ancestors' scalings. ``work`` (float64, >= p): the subtree
    sums, then the scalings.
    """
    n_bands = start.shape[0]
    for row in range(r0, r1):
        x = X[row]
        lam = lams[row]
        for b in range(n_bands):
            if inner[b]:
                s = start[b]
                for c in range(s, s + shape[b, 0] * shape[b, 1] * shape[b, 2]):
                    work[c] = 0.0
        for b in range(n_bands - 1, -1, -1):
            s = start[b]
            h0, h1, h2 = shape[b, 0], shape[b, 1], shape[b, 2]
            t = lam * weight[b]
            pb = parent[b]
            leaf = inner[b] == 0
            ps = start[pb] if pb >= 0 else 0
            p1, p2 = shape[pb, 1], shape[pb, 2]
            s0, s1, s2 = shift[b, 0], shift[b, 1], shift[b, 2]
            for i0 in range(h0):
                for i1 in range(h1):
                    base = s + (i0 * h1 + i1) * h2
                    pbase = ps + ((i0 >> s0) * p1 + (i1 >> s1)) * p2
                    for i2 in range(h2):
                        c = base + i2
                        v = x[c]
                        r2 = v * v if leaf else work[c] + v * v
                        if t <= 0.0:
                            sc = 1.0
                        elif r2 <= t * t:  # no square root for groups that vanish
                            sc = 0.0
                        else:
                            sc = 1.0 - t / np.sqrt(r2)
                        work[c] = sc
                        if pb >= 0:
                            work[pbase + (i2 >> s2)] += sc * sc * r2
        for b in range(n_bands):
            s = start[b]
            h0, h1, h2 = shape[b, 0], shape[b, 1], shape[b, 2]
            pb = parent[b]
            if pb < 0:
                for c in range(s, s + h0 * h1 * h2):
                    x[c] *= work[c]
                continue
            ps = start[pb]
            p1, p2 = shape[pb, 1], shape[pb, 2]
            s0, s1, s2 = shift[b, 0], shift[b, 1], shift[b, 2]
            for i0 in range(h0):
                for i1 in range(h1):
                    base = s + (i0 * h1 + i1) * h2
                    pbase = ps + ((i0 >> s0) * p1 + (i1 >> s1)) * p2
                    for i2 in range(h2):
                        c = base + i2
                        sc = work[c] * work[pbase + (i2 >> s2)]
                        work[c] = sc
                        x[c] *= sc


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def prox_regular_tree_l0(X, r0, r1, start, shape, parent, shift, weight, inner, lams, work):
    """Prox of ``lam * sum_n w_n [x_g(n) != 0]`` by Donoho's dynamic programme, in place.

    As :func:`restore._core.prox_tree_l0`. ``work`` (float64, (2, >= p)):
    row 0 the cost of zeroing each subtree, then 1.0 where a node is kept;
    row 1 the cost of the best pruning below it.
    """
    n_bands = start.shape[0]
    zero = work[0]
    below = work[1]
    for row in range(r0, r1):
        x = X[row]
        lam = lams[row]
        for b in range(n_bands):
            if inner[b]:
                s = start[b]
                for c in range(s, s + shape[b, 0] * shape[b, 1] * shape[b, 2]):
                    zero[c] = 0.0
                    below[c] = 0.0
        for b in range(n_bands - 1, -1, -1):
            s = start[b]
            h0, h1, h2 = shape[b, 0], shape[b, 1], shape[b, 2]
            t = lam * weight[b]
            pb = parent[b]
            leaf = inner[b] == 0
            ps = start[pb] if pb >= 0 else 0
            p1, p2 = shape[pb, 1], shape[pb, 2]
            s0, s1, s2 = shift[b, 0], shift[b, 1], shift[b, 2]
            for i0 in range(h0):
                for i1 in range(h1):
                    base = s + (i0 * h1 + i1) * h2
                    pbase = ps + ((i0 >> s0) * p1 + (i1 >> s1)) * p2
                    for i2 in range(h2):
                        c = base + i2
                        v = x[c]
                        a = 0.5 * v * v if leaf else zero[c] + 0.5 * v * v
                        k = t if leaf else t + below[c]
                        kept = k < a
                        zero[c] = 1.0 if kept else 0.0
                        if pb >= 0:
                            q = pbase + (i2 >> s2)
                            zero[q] += a
                            below[q] += k if kept else a
        for b in range(n_bands):
            s = start[b]
            h0, h1, h2 = shape[b, 0], shape[b, 1], shape[b, 2]
            pb = parent[b]
            ps = start[pb] if pb >= 0 else 0
            p1, p2 = shape[pb, 1], shape[pb, 2]
            s0, s1, s2 = shift[b, 0], shift[b, 1], shift[b, 2]
            for i0 in range(h0):
                for i1 in range(h1):
                    base = s + (i0 * h1 + i1) * h2
                    pbase = ps + ((i0 >> s0) * p1 + (i1 >> s1)) * p2
                    for i2 in range(h2):
                        c = base + i2
                        keep = zero[c]
                        if pb >= 0:
                            keep *= zero[pbase + (i2 >> s2)]
                            zero[c] = keep
                        if keep == 0.0:
                            x[c] = 0.0
