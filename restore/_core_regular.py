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


# Children a coefficient can have: 7 bands of 8 below a 3-D approximation coefficient, 8 below a detail one.
_STACK_PER_LEVEL = 64


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def _child_bands(parent):
    """CSR lists of the bands hanging below each band: ``bands[ptr[b]:ptr[b + 1]]``."""
    n_bands = parent.shape[0]
    ptr = np.zeros(n_bands + 1, dtype=np.int64)
    for b in range(n_bands):
        if parent[b] >= 0:
            ptr[parent[b] + 1] += 1
    for b in range(n_bands):
        ptr[b + 1] += ptr[b]
    bands = np.empty(max(ptr[n_bands], 1), dtype=np.int64)
    fill = ptr[:-1].copy()
    for b in range(n_bands):
        pb = parent[b]
        if pb >= 0:
            bands[fill[pb]] = b
            fill[pb] += 1
    return ptr, bands


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def prox_regular_tree_linf(X, r0, r1, start, shape, parent, shift, weight, inner, lams, work, iwork):
    """Prox of ``lam * sum_n w_n ||x_g(n)||_inf``, in place, as :func:`restore._core.prox_tree_linf`.

    The groups that vanish follow from l1 norms (bottom-up, then top-down);
    each surviving group's clip level from Michelot's algorithm on the
    entries above ``max - lam*w``, gathered by a depth-first sweep of its
    subtree that skips every child subtree whose maximum is below that
    level. ``work`` (float64, (3, >= p)): l1 norms, maxima, candidates;
    ``iwork`` (int64, (2, >= p)): vanished flags, candidates.
    """
    n_bands = start.shape[0]
    l1 = work[0]
    mx = work[1]
    cand_val = work[2]
    dead = iwork[0]
    cand_idx = iwork[1]
    child_ptr, child_band = _child_bands(parent)
    # the sweep's stack of (band, position, flat index): at most the children of one node per level below it
    stack = np.empty((_STACK_PER_LEVEL * (n_bands + 1), 5), dtype=np.int64)
    p = start[n_bands - 1] + shape[n_bands - 1, 0] * shape[n_bands - 1, 1] * shape[n_bands - 1, 2]
    for row in range(r0, r1):
        x = X[row]
        lam = lams[row]
        for c in range(p):
            a = abs(x[c])
            l1[c] = a
            mx[c] = a
        # Which groups vanish: from l1 norms alone, children (finer bands) before parents.
        for b in range(n_bands - 1, -1, -1):
            s0_ = start[b]
            h0, h1, h2 = shape[b, 0], shape[b, 1], shape[b, 2]
            radius = lam * weight[b]
            pb = parent[b]
            ps = start[pb] if pb >= 0 else 0
            p1, p2 = shape[pb, 1], shape[pb, 2]
            s0, s1, s2 = shift[b, 0], shift[b, 1], shift[b, 2]
            for i0 in range(h0):
                for i1 in range(h1):
                    base = s0_ + (i0 * h1 + i1) * h2
                    pbase = ps + ((i0 >> s0) * p1 + (i1 >> s1)) * p2
                    for i2 in range(h2):
                        c = base + i2
                        s = l1[c]
                        dead[c] = 0
                        if radius > 0.0:
                            if s <= radius:
                                dead[c] = 1
                                s = 0.0
                            else:
                                s -= radius
                        if pb >= 0:
                            l1[pbase + (i2 >> s2)] += s
        for b in range(n_bands):
            pb = parent[b]
            if pb < 0:
                continue
            s0_ = start[b]
            h0, h1, h2 = shape[b, 0], shape[b, 1], shape[b, 2]
            ps = start[pb]
            p1, p2 = shape[pb, 1], shape[pb, 2]
            s0, s1, s2 = shift[b, 0], shift[b, 1], shift[b, 2]
            for i0 in range(h0):
                for i1 in range(h1):
                    base = s0_ + (i0 * h1 + i1) * h2
                    pbase = ps + ((i0 >> s0) * p1 + (i1 >> s1)) * p2
                    for i2 in range(h2):
                        if dead[pbase + (i2 >> s2)] != 0:
                            dead[base + i2] = 1
        # Clip levels, children before parents.
        for b in range(n_bands - 1, -1, -1):
            s0_ = start[b]
            h0, h1, h2 = shape[b, 0], shape[b, 1], shape[b, 2]
            radius = lam * weight[b]
            pb = parent[b]
            ps = start[pb] if pb >= 0 else 0
            p1, p2 = shape[pb, 1], shape[pb, 2]
            s0, s1, s2 = shift[b, 0], shift[b, 1], shift[b, 2]
            leaf = inner[b] == 0
            for i0 in range(h0):
                for i1 in range(h1):
                    base = s0_ + (i0 * h1 + i1) * h2
                    pbase = ps + ((i0 >> s0) * p1 + (i1 >> s1)) * p2
                    for i2 in range(h2):
                        c = base + i2
                        if dead[c] != 0:
                            continue
                        if radius > 0.0 and leaf:  # one coefficient: shrink it (> 0: it is not dead)
                            tau = abs(x[c]) - radius
                            x[c] = tau if x[c] > 0.0 else -tau
                            mx[c] = tau
                        elif radius > 0.0:
                            t = mx[c] - radius
                            nc = 0
                            s = 0.0
                            a = abs(x[c])
                            if a >= t:
                                cand_idx[0] = c
                                cand_val[0] = a
                                nc = 1
                                s = a
                            top = 0
                            for q in range(child_ptr[b], child_ptr[b + 1]):  # the children of c
                                top, nc, s = _push_live(i0, i1, i2, child_band[q], t, start, shape, shift, inner,
                                                        dead, mx, x, stack, top, cand_idx, cand_val, nc, s)
                            while top > 0:
                                top -= 1
                                db = stack[top, 0]
                                j0, j1, j2 = stack[top, 1], stack[top, 2], stack[top, 3]
                                d = stack[top, 4]
                                a = abs(x[d])
                                if a >= t:
                                    cand_idx[nc] = d
                                    cand_val[nc] = a
                                    nc += 1
                                    s += a
                                for q in range(child_ptr[db], child_ptr[db + 1]):
                                    top, nc, s = _push_live(j0, j1, j2, child_band[q], t, start, shape, shift,
                                                            inner, dead, mx, x, stack, top, cand_idx, cand_val,
                                                            nc, s)
                            # Michelot's projection on the candidates.
                            tau = (s - radius) / nc
                            while True:
                                kept = 0
                                s = 0.0
                                for q in range(nc):
                                    a = cand_val[q]
                                    if a > tau:
                                        cand_val[kept] = a
                                        cand_idx[kept] = cand_idx[q]
                                        kept += 1
                                        s += a
                                if kept == nc:
                                    break
                                nc = kept
                                tau = (s - radius) / nc
                            if tau < 0.0:
                                tau = 0.0
                            for q in range(nc):
                                j = cand_idx[q]
                                x[j] = tau if x[j] > 0.0 else -tau
                            mx[c] = tau
                        if pb >= 0:
                            q = pbase + (i2 >> s2)
                            if mx[c] > mx[q]:
                                mx[q] = mx[c]
        for c in range(p):  # vanished groups are zero
            if dead[c] != 0:
                x[c] = 0.0


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def _push_live(i0, i1, i2, cb, t, start, shape, shift, inner, dead, mx, x, stack, top, cand_idx, cand_val, nc, s):
    """Visit the children in band ``cb`` of position ``(i0, i1, i2)`` whose subtree survives and reaches ``t``.

    A leaf's coefficient is a candidate at once (it is its subtree), an inner
    one goes on the stack (band, position, flat index). Returns the stack's
    top, the candidates' count and their sum.
    """
    t0, t1, t2 = shift[cb, 0], shift[cb, 1], shift[cb, 2]
    c1, c2 = shape[cb, 1], shape[cb, 2]
    cs = start[cb]
    leaf = inner[cb] == 0
    for d0 in range(i0 << t0, (i0 + 1) << t0):
        for d1 in range(i1 << t1, (i1 + 1) << t1):
            row = cs + (d0 * c1 + d1) * c2
            for d2 in range(i2 << t2, (i2 + 1) << t2):
                d = row + d2
                if dead[d] == 0 and mx[d] >= t:
                    if leaf:
                        a = abs(x[d])
                        cand_idx[nc] = d
                        cand_val[nc] = a
                        nc += 1
                        s += a
                    else:
                        stack[top, 0] = cb
                        stack[top, 1] = d0
                        stack[top, 2] = d1
                        stack[top, 3] = d2
                        stack[top, 4] = d
                        top += 1
    return top, nc, s
