"""Tree kernels for the regular trees of wavelet transforms, walked by index arithmetic.

The wavelet quad-tree and octree are regular: a detail coefficient's parent
is the coefficient of the next coarser band of the same orientation at its
position halved along the axes that band's level splits (the coarsest
details hang below the approximation coefficient at their own position).
These kernels take the coefficients in :func:`restore.wavelet.band_layout`
order and a description of the bands (a few numbers each) instead of the
per-coefficient arrays of :mod:`restore._core`: the same penalties, the same
group steps in the same order, with no index array and a scratch of one
(tree-l2) or two (tree-l0) floats per coefficient, or (tree-linf) a heap of
at most one 32-byte entry per coefficient and per inner node.

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
def prox_regular_tree_l2(X, r0, r1, start, shape, parent, shift, weight, inner, lams, work, iwork):
    """Prox of ``lam * sum_n w_n ||x_g(n)||_2`` on rows ``r0 .. r1 - 1`` of ``X``, in place.

    As :func:`restore._core.prox_tree_l2`: bottom-up (finest band first)
    each coefficient's subtree norm after its children's scalings gives its
    scaling, top-down every coefficient is multiplied by the product of its
    own and its ancestors' scalings. A leaf's own step is applied in place
    bottom-up (the order in which the composition of the steps applies
    them), so leaves store nothing. ``work`` (float64, (1, >= p)): per inner
    node the subtree sums, then the scalings; ``iwork`` is not used.
    """
    n_bands = start.shape[0]
    wk = work[0]
    n_row = 1
    for b in range(n_bands):
        n_row = max(n_row, shape[b, 2])
    sq = np.empty(n_row)  # a row's squared norms
    scl = np.empty(n_row)  # a row of leaves' scalings
    for row in range(r0, r1):
        x = X[row]
        lam = lams[row]
        for b in range(n_bands):
            if inner[b]:
                s = start[b]
                for c in range(s, s + shape[b, 0] * shape[b, 1] * shape[b, 2]):
                    wk[c] = 0.0
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
                    # the scalings of a row in a loop of its own, which vectorises (no scatter to parents), by
                    # selects (which groups vanish is data): inf at r2 = 0, replaced
                    if leaf:
                        for i2 in range(h2):
                            v = x[base + i2]
                            sq[i2] = v * v
                    else:
                        for i2 in range(h2):
                            v = x[base + i2]
                            sq[i2] = wk[base + i2] + v * v
                    # a leaf's own group step is applied here, in place (as the composition of the group
                    # steps does it): nothing to store for it, and its parents' scalings follow top-down
                    sc_row = scl if leaf else wk[base:base + h2]
                    for i2 in range(h2):
                        r2 = sq[i2]
                        sc = 1.0 - t / np.sqrt(r2)
                        sc = 0.0 if r2 <= t * t else sc
                        sc = 1.0 if t <= 0.0 else sc
                        sc_row[i2] = sc
                    if leaf:
                        for i2 in range(h2):
                            x[base + i2] *= scl[i2]
                    if pb >= 0:
                        for i2 in range(h2):
                            sc = sc_row[i2]
                            wk[pbase + (i2 >> s2)] += sc * sc * sq[i2]
        for b in range(n_bands):
            s = start[b]
            h0, h1, h2 = shape[b, 0], shape[b, 1], shape[b, 2]
            pb = parent[b]
            leaf = inner[b] == 0
            if pb < 0:
                if not leaf:  # (a leaf root is done)
                    for c in range(s, s + h0 * h1 * h2):
                        x[c] *= wk[c]
                continue
            ps = start[pb]
            p1, p2 = shape[pb, 1], shape[pb, 2]
            s0, s1, s2 = shift[b, 0], shift[b, 1], shift[b, 2]
            for i0 in range(h0):
                for i1 in range(h1):
                    base = s + (i0 * h1 + i1) * h2
                    pbase = ps + ((i0 >> s0) * p1 + (i1 >> s1)) * p2
                    if leaf:  # scaled by its own step already; nothing below needs its scalings
                        for i2 in range(h2):
                            x[base + i2] *= wk[pbase + (i2 >> s2)]
                        continue
                    for i2 in range(h2):
                        c = base + i2
                        sc = wk[c] * wk[pbase + (i2 >> s2)]
                        wk[c] = sc
                        x[c] *= sc


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def prox_regular_tree_l0(X, r0, r1, start, shape, parent, shift, weight, inner, lams, work, iwork):
    """Prox of ``lam * sum_n w_n [x_g(n) != 0]`` by Donoho's dynamic programme, in place.

    As :func:`restore._core.prox_tree_l0`. A leaf's choice depends on its
    own coefficient only (kept when ``t < x**2 / 2``), so leaves store
    nothing: they add their costs to their parents' bottom-up and are
    decided again top-down. ``work`` (float64, (2, >= p)): per inner node,
    row 0 the cost of zeroing its subtree, then 1.0 where it is kept; row 1
    the cost of the best pruning below it. ``iwork`` is not used.
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
            if pb < 0 and not inner[b]:
                continue  # a lone leaf: decided top-down
            ps = start[pb] if pb >= 0 else 0
            p1, p2 = shape[pb, 1], shape[pb, 2]
            s0, s1, s2 = shift[b, 0], shift[b, 1], shift[b, 2]
            for i0 in range(h0):
                for i1 in range(h1):
                    base = s + (i0 * h1 + i1) * h2
                    pbase = ps + ((i0 >> s0) * p1 + (i1 >> s1)) * p2
                    if not inner[b]:
                        for i2 in range(h2):
                            v = x[base + i2]
                            a = 0.5 * v * v
                            q = pbase + (i2 >> s2)
                            zero[q] += a
                            below[q] += min(t, a)  # t when kept (t < a), else a
                        continue
                    for i2 in range(h2):
                        c = base + i2
                        v = x[c]
                        a = zero[c] + 0.5 * v * v
                        k = t + below[c]
                        kept = k < a
                        zero[c] = 1.0 if kept else 0.0
                        if pb >= 0:
                            q = pbase + (i2 >> s2)
                            zero[q] += a
                            below[q] += k if kept else a
        for b in range(n_bands):
            s = start[b]
            h0, h1, h2 = shape[b, 0], shape[b, 1], shape[b, 2]
            t = lam * weight[b]
            pb = parent[b]
            ps = start[pb] if pb >= 0 else 0
            p1, p2 = shape[pb, 1], shape[pb, 2]
            s0, s1, s2 = shift[b, 0], shift[b, 1], shift[b, 2]
            for i0 in range(h0):
                for i1 in range(h1):
                    base = s + (i0 * h1 + i1) * h2
                    pbase = ps + ((i0 >> s0) * p1 + (i1 >> s1)) * p2
                    if not inner[b]:
                        for i2 in range(h2):
                            c = base + i2
                            v = x[c]
                            keep = t < 0.5 * v * v
                            if pb >= 0:
                                keep = keep & (zero[pbase + (i2 >> s2)] != 0.0)
                            x[c] = v if keep else 0.0
                        continue
                    for i2 in range(h2):
                        c = base + i2
                        keep = zero[c]
                        if pb >= 0:
                            keep *= zero[pbase + (i2 >> s2)]
                            zero[c] = keep
                        if keep == 0.0:
                            x[c] = 0.0


# Columns of the heap's slot records (one record a slot, so that a heap step touches one cache line a slot).
_VAL, _CNT, _CHILD, _SIB = 0, 1, 2, 3


_NONE = np.int64(-1)  # no heap slot; an int64, not a literal, so that numba compiles each helper once


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def _meld(a, b, heap):
    """Pairing-heap meld of the max-heaps rooted at slots ``a`` and ``b`` (-1: empty); returns the root."""
    if a < 0:
        return b
    if b < 0:
        return a
    swap = heap[a, _VAL] < heap[b, _VAL]
    w = b if swap else a  # selects, not branches: which root wins is a coin toss for the branch predictor
    lo = a if swap else b
    heap[lo, _SIB] = heap[w, _CHILD]
    heap[w, _CHILD] = lo
    return w


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def _pop(r, heap):
    """The heap rooted at ``r`` without its root: the root's children melded in two passes."""
    c = int(heap[r, _CHILD])
    pairs = _NONE  # the melded pairs, last pair first, linked through their sibling field
    while c >= 0:
        b = int(heap[c, _SIB])
        if b < 0:
            nxt = _NONE
            m = c
        else:
            nxt = int(heap[b, _SIB])
            m = _meld(c, b, heap)
        heap[m, _SIB] = pairs
        pairs = m
        c = nxt
    out = _NONE
    while pairs >= 0:
        nxt = int(heap[pairs, _SIB])
        heap[pairs, _SIB] = -1
        out = _meld(out, pairs, heap)
        pairs = nxt
    return out


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def _sort5(raw, out):
    """``out[:5]`` = ``raw[:5]`` in decreasing order, by a sorting network of 9 min/max pairs (no branches)."""
    a0, a1, a2, a3, a4 = raw[0], raw[1], raw[2], raw[3], raw[4]
    a0, a1 = max(a0, a1), min(a0, a1)
    a3, a4 = max(a3, a4), min(a3, a4)
    a2, a4 = max(a2, a4), min(a2, a4)
    a2, a3 = max(a2, a3), min(a2, a3)
    a0, a3 = max(a0, a3), min(a0, a3)
    a0, a2 = max(a0, a2), min(a0, a2)
    a1, a4 = max(a1, a4), min(a1, a4)
    a1, a3 = max(a1, a3), min(a1, a3)
    a1, a2 = max(a1, a2), min(a1, a2)
    out[0], out[1], out[2], out[3], out[4] = a0, a1, a2, a3, a4


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def _sort_small(raw, n, out):
    """``out[:n]`` = ``raw[:n]`` in decreasing order (insertion sort: n is a node's few children)."""
    for i in range(n):
        v = raw[i]
        j = i
        while j > 0 and out[j - 1] < v:
            out[j] = out[j - 1]
            j -= 1
        out[j] = v


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def _linf_rows(x, lam, b, row_lo, row_hi, start, shape, parent, shift, weight, pushed, leaf_ptr, leaf_kids, raw, buf,
               level, heap, root, n_slots):
    """The group steps of :func:`prox_regular_tree_linf` on rows ``row_lo .. row_hi - 1`` of inner band ``b``.

    A row is the band's coefficients at one (i0, i1), in flat order. Returns
    the number of heap slots taken so far.
    """
    s = start[b]
    h1, h2 = shape[b, 1], shape[b, 2]
    t = lam * weight[b]
    pb = parent[b]
    ps = start[pb] if pb >= 0 else 0
    p1, p2 = shape[pb, 1], shape[pb, 2]
    s0, s1, s2 = shift[b, 0], shift[b, 1], shift[b, 2]
    quad = False  # one leaf band below, 2 x 2 leaves a node: the quad-tree's parents of leaves
    qstart, qg1, qg2, qt = 0, 0, 0, 0.0
    if leaf_ptr[b + 1] - leaf_ptr[b] == 1:
        cb = leaf_kids[leaf_ptr[b]]
        quad = shift[cb, 0] == 0 and shift[cb, 1] == 1 and shift[cb, 2] == 1
        qstart, qg1, qg2, qt = start[cb], shape[cb, 1], shape[cb, 2], lam * weight[cb]
    for rr in range(row_lo, row_hi):
        i0, i1 = rr // h1, rr % h1
        base = s + (i0 * h1 + i1) * h2
        pbase = ps + ((i0 >> s0) * p1 + (i1 >> s1)) * p2
        for i2 in range(h2):
            c = base + i2
            # own and leaf children's magnitudes (0 for a vanished leaf) into raw, then into buf
            # sorted in decreasing order by their ranks: no branch on the data
            a = abs(x[c])
            raw[0] = a
            n_raw = 1
            total = a
            if pushed[b]:
                total += level[c]
                r = root[c]
            else:
                r = _NONE
            if quad:  # the generic loop below, unrolled
                q0 = qstart + (i0 * qg1 + 2 * i1) * qg2 + 2 * i2
                v1 = abs(x[q0])
                v2 = abs(x[q0 + 1])
                v3 = abs(x[q0 + qg2])
                v4 = abs(x[q0 + qg2 + 1])
                if qt > 0.0:
                    v1 = max(v1 - qt, 0.0)
                    v2 = max(v2 - qt, 0.0)
                    v3 = max(v3 - qt, 0.0)
                    v4 = max(v4 - qt, 0.0)
                raw[1] = v1
                raw[2] = v2
                raw[3] = v3
                raw[4] = v4
                total += v1
                total += v2
                total += v3
                total += v4
                n_raw = 5
            for e in range(leaf_ptr[b], leaf_ptr[b + 1] if not quad else leaf_ptr[b]):
                cb = leaf_kids[e]
                tc = lam * weight[cb]
                c0, c1, c2 = shift[cb, 0], shift[cb, 1], shift[cb, 2]
                g1, g2 = shape[cb, 1], shape[cb, 2]
                for d0 in range(i0 << c0, (i0 + 1) << c0):
                    for d1 in range(i1 << c1, (i1 + 1) << c1):
                        cbase = start[cb] + (d0 * g1 + d1) * g2
                        for d2 in range(i2 << c2, (i2 + 1) << c2):
                            v = abs(x[cbase + d2])
                            if tc > 0.0:
                                v = max(v - tc, 0.0)
                            raw[n_raw] = v
                            n_raw += 1
                            total += v
            if n_raw == 5:  # a quad-tree's node and its four leaves: a sorting network
                _sort5(raw, buf)
            else:
                _sort_small(raw, n_raw, buf)
            nb = n_raw
            while nb > 0 and buf[nb - 1] <= 0.0:
                nb -= 1
            if t > 0.0 and total <= t:
                level[c] = 0.0
                continue  # the group vanishes: nothing goes up
            # pop from buf and the heap while above the clip level of those popped so far
            acc = 0.0
            k = 0.0
            bi = 0
            reuse = _NONE
            if t > 0.0:
                while True:
                    vb = buf[bi] if bi < nb else -1.0
                    vh = heap[r, _VAL] if r >= 0 else -1.0
                    if vb >= vh:
                        if vb < 0.0:
                            break
                        if k > 0.0 and not vb * k > acc - t:
                            break
                        acc += vb
                        k += 1.0
                        bi += 1
                    else:
                        if k > 0.0 and not vh * k > acc - t:
                            break
                        m = heap[r, _CNT]
                        acc += vh * m
                        k += m
                        if reuse < 0:
                            reuse = r
                        r = _pop(r, heap)
                if k == 0.0:
                    level[c] = 0.0
                    continue
                tau = (acc - t) / k
                if tau < 0.0:
                    tau = 0.0
                total -= t
            else:
                tau = np.inf
            level[c] = tau
            if pb < 0:
                continue
            # what is left: buf's rest as a chain (each entry the only child of the one above)
            chain = _NONE
            for j in range(nb - 1, bi - 1, -1):
                heap[n_slots, _VAL] = buf[j]
                heap[n_slots, _CNT] = 1.0
                heap[n_slots, _CHILD] = chain
                heap[n_slots, _SIB] = -1.0
                chain = n_slots
                n_slots += 1
            if k > 0.0:
                # the clipped entries, above everything left: children the chain and the heap
                if reuse < 0:
                    reuse = n_slots
                    n_slots += 1
                heap[reuse, _VAL] = tau
                heap[reuse, _CNT] = k
                heap[reuse, _SIB] = -1.0
                if chain >= 0:
                    heap[reuse, _CHILD] = chain
                    heap[chain, _SIB] = r
                else:
                    heap[reuse, _CHILD] = r
                r = reuse
            else:
                r = _meld(r, chain, heap)
            q = pbase + (i2 >> s2)
            level[q] += total
            root[q] = _meld(root[q], r, heap)
    return n_slots


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def _wavefront(shape, parent, shift, inner, pushed):
    """The order of the inner bands' rows for :func:`prox_regular_tree_linf`: (band, first row, end row) each.

    A row of a band goes as soon as the rows of its child band below it are
    done, so that a step finds its children's heap entries still in cache.
    Chains of bands with one inner child band each (a wavelet tree's
    orientations) go first, then the rest (the approximation), coarsest last.
    A row is the coefficients at one (i0, i1), in flat order.
    """
    n_bands = shape.shape[0]
    n_inner_kids = np.zeros(n_bands, dtype=np.int64)
    n_rows = 0
    for b in range(n_bands):
        if inner[b]:
            n_rows += shape[b, 0] * shape[b, 1]
            if parent[b] >= 0:
                n_inner_kids[parent[b]] += 1
    order = np.empty((n_rows, 3), dtype=np.int64)
    n = 0
    done = np.full(n_bands, -1, dtype=np.int64)  # per band, the last row placed
    for b0 in range(n_bands - 1, -1, -1):
        if not inner[b0] or pushed[b0]:
            continue  # chains start at the inner bands with no inner band below
        for rr in range(shape[b0, 0] * shape[b0, 1]):
            order[n, 0], order[n, 1], order[n, 2] = b0, rr, rr + 1
            n += 1
            done[b0] = rr
            cb = b0
            b = parent[b0]
            while b >= 0 and n_inner_kids[b] == 1:
                h1 = shape[b, 1]
                c1 = shape[cb, 1]
                while done[b] + 1 < shape[b, 0] * h1:
                    j0, j1 = (done[b] + 1) // h1, (done[b] + 1) % h1
                    last = (((j0 + 1) << shift[cb, 0]) - 1) * c1 + ((j1 + 1) << shift[cb, 1]) - 1
                    if done[cb] < last:
                        break
                    done[b] += 1
                    order[n, 0], order[n, 1], order[n, 2] = b, done[b], done[b] + 1
                    n += 1
                cb = b
                b = parent[b]
    for b in range(n_bands - 1, -1, -1):
        if inner[b] and done[b] + 1 < shape[b, 0] * shape[b, 1]:
            order[n, 0], order[n, 1], order[n, 2] = b, done[b] + 1, shape[b, 0] * shape[b, 1]
            n += 1
    return order[:n]


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def prox_regular_tree_linf(X, r0, r1, start, shape, parent, shift, weight, inner, lams, work, iwork):
    """Prox of ``lam * sum_n w_n ||x_g(n)||_inf``, in place, O(p log p) per row at worst.

    As :func:`restore._core.prox_tree_linf`, children before parents, each
    group step either zeroes its group (l1 norm at most ``t = lam * w``) or
    clips the group's magnitudes at the level ``tau`` where their excess over
    ``tau`` sums to ``t``. Clipping only lowers magnitudes to a common level,
    so a coefficient ends at ``min(|x|, tau of its node and of every
    ancestor)``, and a group's step only needs the largest magnitudes of its
    subtree, in decreasing order, down to ``tau``.

    Each subtree's magnitudes after its steps are kept in a max-heap (a
    pairing heap, melded into the parent's in O(1)) whose entries are a value
    and a count; a step pops the entries above ``tau`` and pushes back one
    entry ``(tau, their count)``. An entry is popped once, so a row costs
    O(p) heap steps of O(log p) amortised. A node takes the magnitudes of
    its leaf children (a leaf's step is a shrinkage) and its own directly,
    sorted in a small buffer, and leaves the ones below ``tau`` as a sorted
    chain (a heap that pops in O(1)): most nodes of a wavelet tree are
    leaves or their parents. Band rows go in a wavefront
    (:func:`_wavefront`) and heap slots are taken in the order the nodes are
    processed, so that a step finds its children's entries still in cache.
    A top-down pass then applies the clip levels.

    ``work`` (float64, (1 + s, >= p) with ``s * p >= 4 * (p + inner nodes)``):
    row 0 per inner node the l1 norm of its inner children's subtrees after
    their steps, then its clip level (0 when its group vanished); the other
    rows hold the heap's slot records. ``iwork`` (int64, (1, >= p)): the
    heap's root per inner node (the heaps of its inner children).
    """
    n_bands = start.shape[0]
    level = work[0]
    heap = work[1:].reshape(((work.shape[0] - 1) * work.shape[1] // 4, 4))
    root = iwork[0]
    # per band: whether an inner band hangs below it, and the most magnitudes a node takes directly
    pushed = np.zeros(n_bands, dtype=np.bool_)
    n_direct = np.ones(n_bands, dtype=np.int64)
    leaf_ptr = np.zeros(n_bands + 1, dtype=np.int64)  # leaf child bands of band b: leaf_kids[leaf_ptr[b]:leaf_ptr[b+1]]
    for b in range(n_bands):
        pb = parent[b]
        if pb >= 0:
            if inner[b]:
                pushed[pb] = True
            else:
                n_direct[pb] += 1 << (shift[b, 0] + shift[b, 1] + shift[b, 2])
                leaf_ptr[pb + 1] += 1
    for b in range(n_bands):
        leaf_ptr[b + 1] += leaf_ptr[b]
    leaf_kids = np.empty(leaf_ptr[n_bands], dtype=np.int64)
    fill = leaf_ptr[:-1].copy()
    for b in range(n_bands):
        pb = parent[b]
        if pb >= 0 and not inner[b]:
            leaf_kids[fill[pb]] = b
            fill[pb] += 1
    n_buf = 0
    for b in range(n_bands):
        n_buf = max(n_buf, n_direct[b])
    buf = np.empty(n_buf)
    raw = np.empty(n_buf)
    order = _wavefront(shape, parent, shift, inner, pushed)
    for row in range(r0, r1):
        x = X[row]
        lam = lams[row]
        for b in range(n_bands):
            if pushed[b]:
                s = start[b]
                for c in range(s, s + shape[b, 0] * shape[b, 1] * shape[b, 2]):
                    level[c] = 0.0
                    root[c] = -1
        n_slots = _NONE + 1
        for e in range(order.shape[0]):
            n_slots = _linf_rows(x, lam, order[e, 0], order[e, 1], order[e, 2], start, shape, parent, shift, weight,
                                 pushed, leaf_ptr, leaf_kids, raw, buf, level, heap, root, n_slots)
        for b in range(n_bands):
            s = start[b]
            h0, h1, h2 = shape[b, 0], shape[b, 1], shape[b, 2]
            pb = parent[b]
            ps = start[pb] if pb >= 0 else 0
            p1, p2 = shape[pb, 1], shape[pb, 2]
            s0, s1, s2 = shift[b, 0], shift[b, 1], shift[b, 2]
            t = lam * weight[b]
            leaf = inner[b] == 0
            for i0 in range(h0):
                for i1 in range(h1):
                    base = s + (i0 * h1 + i1) * h2
                    pbase = ps + ((i0 >> s0) * p1 + (i1 >> s1)) * p2
                    for i2 in range(h2):
                        c = base + i2
                        v = x[c]
                        if not leaf:
                            cap = level[c]
                        elif t > 0.0:  # a leaf's step: shrink by t (or vanish)
                            cap = max(abs(v) - t, 0.0)
                        else:
                            cap = np.inf
                        if pb >= 0:
                            cap = min(cap, level[pbase + (i2 >> s2)])
                            if not leaf:
                                level[c] = cap
                        # v clipped at cap by selects (which coefficients get clipped is data, not a pattern);
                        # + 0.0 turns the -0.0 of a vanished negative coefficient into 0.0
                        m = min(abs(v), cap)
                        x[c] = (m if v >= 0.0 else -m) + 0.0
