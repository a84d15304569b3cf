"""The one proximal-operator core: numba kernels on flat arrays.

Nothing here sees a Python object. A tree reaches the kernels as a handful of
flat arrays indexed by *preorder* node number ``k`` (a parent always has a
smaller number than its children, and the subtree of ``k`` is the contiguous
node range ``k .. node_end[k] - 1``):

``perm``      (p,)   layout position -> original variable index; the variables
                     of every subtree are contiguous in layout order.
``own_ptr``   (N+1,) node ``k`` owns layout positions ``own_ptr[k] ..
                     own_ptr[k+1] - 1``; its group (subtree) covers
                     ``own_ptr[k] .. own_ptr[node_end[k]] - 1``.
``node_end``  (N,)   one past the last preorder node of the subtree of ``k``.
``parent``    (N,)   preorder parent, -1 for a root.
``weights``   (N,)   group weights, >= 0.

Signals are the rows of a C-contiguous float64 array ``X`` of shape (n, p);
each kernel works in place on rows ``r0 .. r1 - 1`` so that the caller can
split a batch between threads (kernels release the GIL), with its own
``lam`` per row (``lams``, float64 (n,)). The tree kernels
take scratch space from the caller (``work``: float64 (4, m), ``iwork``:
int64 (2, m), ``m >= max(N, p)``) so that repeated calls touch no fresh
memory. All kernels use the flags of :mod:`restore._config`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._config import JIT, JIT_INLINE

_ROW_BLOCK = 32  # rows processed together by the batched tree kernels
_BLOCK_MAX_NODES = 2048  # larger trees go row by row

# ---------------------------------------------------------------------------
# Tree layout
# ---------------------------------------------------------------------------


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def preorder(parents):
    """Depth-first preorder of a forest given by ``parents``.

    Roots and siblings are visited in increasing node id. Returns ``order``
    (preorder position -> node id; only the first ``n_visited`` entries are
    valid), ``node_end``, ``depth`` (a root has depth 1) and ``parent``
    (preorder position of the parent, -1 for a root), all per preorder
    position, ``pos`` (node id -> preorder position, -1 if not visited) and
    ``n_visited``; a forest with a cycle has ``n_visited < len(parents)``.
    ``parents`` must already be in [-1, N).
    """
    # every array from np.empty with one signature, filled by loops: each other allocator (zeros, ones, full,
    # copy) is one more function for numba to compile on the first call
    n = parents.shape[0]
    ptr = np.empty(n + 2, dtype=np.int64)
    for i in range(n + 2):
        ptr[i] = 0
    for i in range(n):
        ptr[parents[i] + 2] += 1  # roots counted in slot 1
    for i in range(1, n + 2):
        ptr[i] += ptr[i - 1]
    # ptr[0]..ptr[1]: roots; ptr[v+1]..ptr[v+2]: children of v
    fill = np.empty(n + 2, dtype=np.int64)
    for i in range(n + 2):
        fill[i] = ptr[i]
    kids = np.empty(n, dtype=np.int64)
    for i in range(n):
        slot = parents[i] + 1
        kids[fill[slot]] = i
        fill[slot] += 1
    order = np.empty(n, dtype=np.int64)
    stack = np.empty(n, dtype=np.int64)
    top = 0
    for j in range(ptr[1] - 1, ptr[0] - 1, -1):
        stack[top] = kids[j]
        top += 1
    count = 0
    while top > 0:
        top -= 1
        v = stack[top]
        order[count] = v
        count += 1
        for j in range(ptr[v + 2] - 1, ptr[v + 1] - 1, -1):
            stack[top] = kids[j]
            top += 1
    size = np.empty(n, dtype=np.int64)
    pos = np.empty(n, dtype=np.int64)
    node_end = np.empty(n, dtype=np.int64)
    depth = np.empty(n, dtype=np.int64)
    parent = np.empty(n, dtype=np.int64)
    for k in range(n):
        size[k] = 1
        pos[k] = -1
        depth[k] = 1
        parent[k] = -1
    for k in range(count):
        pos[order[k]] = k
    for k in range(count):
        pv = parents[order[k]]
        if pv >= 0:
            parent[k] = pos[pv]
            depth[k] = depth[parent[k]] + 1
    for k in range(count - 1, -1, -1):
        node_end[k] = k + size[k]
        if parent[k] >= 0:
            size[parent[k]] += size[k]
    return order, node_end, depth, parent, pos, count


# ---------------------------------------------------------------------------
# Elementwise penalties
# ---------------------------------------------------------------------------


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def prox_l1(X, r0, r1, lams):
    """Soft thresholding of row ``i`` at ``lams[i]``, in place."""
    p = X.shape[1]
    for i in range(r0, r1):
        lam = lams[i]
        for j in range(p):
            v = X[i, j]
            if v > lam:
                X[i, j] = v - lam
            elif v < -lam:
                X[i, j] = v + lam
            else:
                X[i, j] = 0.0


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def prox_l0(X, r0, r1, lams):
    """Hard thresholding: keep ``v`` when ``|v| > sqrt(2*lams[i])`` (ties go to zero)."""
    p = X.shape[1]
    for i in range(r0, r1):
        thr = np.sqrt(2.0 * lams[i])
        for j in range(p):
            v = X[i, j]
            if not abs(v) > thr:
                X[i, j] = 0.0


# ---------------------------------------------------------------------------
# Tree penalties
# ---------------------------------------------------------------------------


@njit(**JIT_INLINE)  # cache=True, nogil=True, no fastmath, inlined into its caller: restore._config.JIT_INLINE
def _prox_tree_l2_by_row(X, r0, r1, perm, own_ptr, parent, weights, lams, work):
    """:func:`prox_tree_l2` one row at a time (large trees, or few rows)."""
    n_nodes = parent.shape[0]
    acc = work[0]
    scale = work[1]
    for i in range(r0, r1):
        x = X[i]
        lam = lams[i]
        for k in range(n_nodes):
            s = 0.0
            for j in range(own_ptr[k], own_ptr[k + 1]):
                v = x[perm[j]]
                s += v * v
            acc[k] = s
        for k in range(n_nodes - 1, -1, -1):
            r2 = acc[k]
            t = lam * weights[k]
            if t <= 0.0:
                sc = 1.0
            elif r2 <= t * t:  # no square root for groups that vanish
                sc = 0.0
            else:
                sc = 1.0 - t / np.sqrt(r2)
            scale[k] = sc
            pk = parent[k]
            if pk >= 0:
                acc[pk] += sc * sc * r2
        for k in range(n_nodes):
            pk = parent[k]
            sc = scale[k]
            if pk >= 0:
                sc *= scale[pk]
                scale[k] = sc
            for j in range(own_ptr[k], own_ptr[k + 1]):
                x[perm[j]] *= sc


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def prox_tree_l2(X, r0, r1, perm, own_ptr, node_end, parent, weights, lams, work, iwork):
    """Prox of ``lam * sum_n w_n ||x_g(n)||_2``, in place, O(p) per row.

    The composition of the group steps (children before parents) is a product
    of scalings: compute each subtree's norm after its children's scalings
    bottom-up, then multiply every variable by the product of the scalings of
    its node and ancestors top-down. Rows go in blocks of ``_ROW_BLOCK``, the
    innermost loops running over the rows of a block (branch-free, so that
    they vectorise: 3x faster on 4096 codes of 71 atoms than row by row),
    when the tree is small enough for a block's sums to stay in cache.
    """
    n_nodes = parent.shape[0]
    if n_nodes > _BLOCK_MAX_NODES or r1 - r0 < _ROW_BLOCK:
        _prox_tree_l2_by_row(X, r0, r1, perm, own_ptr, parent, weights, lams, work)
        return
    acc = np.empty((n_nodes, _ROW_BLOCK))
    scale = np.empty((n_nodes, _ROW_BLOCK))
    lam = np.empty(_ROW_BLOCK)
    for i0 in range(r0, r1, _ROW_BLOCK):
        nb = min(_ROW_BLOCK, r1 - i0)
        for b in range(nb):
            lam[b] = lams[i0 + b]
        for k in range(n_nodes):
            for b in range(nb):
                acc[k, b] = 0.0
            for j in range(own_ptr[k], own_ptr[k + 1]):
                c = perm[j]
                for b in range(nb):
                    v = X[i0 + b, c]
                    acc[k, b] += v * v
        for k in range(n_nodes - 1, -1, -1):
            wk = weights[k]
            pk = parent[k]
            for b in range(nb):
                r2 = acc[k, b]
                t = lam[b] * wk
                # r2 <= t^2: the group vanishes (no square root needed, but computing it keeps the loop flat)
                sc = 1.0 - t / np.sqrt(r2)
                if r2 <= t * t:
                    sc = 0.0
                if t <= 0.0:
                    sc = 1.0
                scale[k, b] = sc
            if pk >= 0:
                for b in range(nb):
                    acc[pk, b] += scale[k, b] * scale[k, b] * acc[k, b]
        for k in range(n_nodes):
            pk = parent[k]
            if pk >= 0:
                for b in range(nb):
                    scale[k, b] *= scale[pk, b]
            for j in range(own_ptr[k], own_ptr[k + 1]):
                c = perm[j]
                for b in range(nb):
                    X[i0 + b, c] *= scale[k, b]


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def prox_tree_l0(X, r0, r1, perm, own_ptr, node_end, parent, weights, lams, work, iwork):
    """Prox of ``lam * sum_n w_n [x_g(n) != 0]`` by Donoho's dynamic programme.

    Bottom-up ``C(n) = min(0.5*||u_g(n)||^2, lam*w(n) + sum_c C(c))``; top-down
    a node is kept when its parent is kept (or it is a root) and the second
    term is strictly smaller (ties go to zero). O(p) per row.
    """
    n_nodes = parent.shape[0]
    zero_cost = work[0]
    child_cost = work[1]
    keep = iwork[0]
    for i in range(r0, r1):
        x = X[i]
        lam = lams[i]
        for k in range(n_nodes):
            s = 0.0
            for j in range(own_ptr[k], own_ptr[k + 1]):
                v = x[perm[j]]
                s += v * v
            zero_cost[k] = 0.5 * s
            child_cost[k] = 0.0
        for k in range(n_nodes - 1, -1, -1):
            a = zero_cost[k]
            b = lam * weights[k] + child_cost[k]
            kept = b < a
            keep[k] = 1 if kept else 0
            pk = parent[k]
            if pk >= 0:
                zero_cost[pk] += a
                child_cost[pk] += b if kept else a
        for k in range(n_nodes):
            pk = parent[k]
            if pk >= 0 and keep[pk] == 0:
                keep[k] = 0
            if keep[k] == 0:
                for j in range(own_ptr[k], own_ptr[k + 1]):
                    x[perm[j]] = 0.0


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def prox_tree_linf(X, r0, r1, perm, own_ptr, node_end, parent, weights, lams, work, iwork):
    """Prox of ``lam * sum_n w_n ||x_g(n)||_inf``, in place.

    Each group step subtracts the projection onto the l1 ball of radius
    ``lam*w``: it zeroes the group when its l1 norm is at most the radius and
    otherwise clips magnitudes at the level ``tau`` where the excess equals
    the radius; it lowers the group's l1 norm by exactly the radius. So the
    groups that vanish follow from l1 norms alone (one O(p) pass), and a
    clip level only involves the entries above ``max - lam*w``: they are
    gathered by a sweep over the subtree that skips every child subtree whose
    (upper bound of the) maximum is below that level, and ``tau`` follows by
    Michelot's algorithm on them. Worst case O(p * depth) per row.
    """
    n_nodes = parent.shape[0]
    buf = work[0]
    l1 = work[1]
    mx = work[2]
    cand_val = work[3]
    dead = iwork[0]
    cand_idx = iwork[1]
    for i in range(r0, r1):
        x = X[i]
        lam = lams[i]
        for k in range(n_nodes):  # gather into the layout, with own l1 norms and maxima
            s = 0.0
            m = 0.0
            for j in range(own_ptr[k], own_ptr[k + 1]):
                v = x[perm[j]]
                buf[j] = v
                a = abs(v)
                s += a
                if a > m:
                    m = a
            l1[k] = s
            mx[k] = m
        # Which groups vanish: from l1 norms alone.
        for k in range(n_nodes - 1, -1, -1):
            radius = lam * weights[k]
            s = l1[k]
            if radius > 0.0:
                if s <= radius:
                    dead[k] = 1
                    s = 0.0
                else:
                    dead[k] = 0
                    s -= radius
            else:
                dead[k] = 0
            pk = parent[k]
            if pk >= 0:
                l1[pk] += s
        for k in range(n_nodes):
            pk = parent[k]
            if pk >= 0 and dead[pk] != 0:
                dead[k] = 1
        # Clip levels, children before parents.
        for k in range(n_nodes - 1, -1, -1):
            if dead[k] != 0:
                continue
            radius = lam * weights[k]
            if radius > 0.0 and node_end[k] == k + 1 and own_ptr[k + 1] == own_ptr[k] + 1:
                # a leaf with one variable (most nodes of a quad-tree): shrink it
                j = own_ptr[k]
                tau = abs(buf[j]) - radius  # > 0: the node is not dead
                buf[j] = tau if buf[j] > 0.0 else -tau
                mx[k] = tau
            elif radius > 0.0:
                t = mx[k] - radius
                nc = 0
                s = 0.0
                for j in range(own_ptr[k], own_ptr[k + 1]):
                    a = abs(buf[j])
                    if a >= t:
                        cand_idx[nc] = j
                        cand_val[nc] = a
                        nc += 1
                        s += a
                c = k + 1
                end = node_end[k]
                while c < end:
                    if dead[c] != 0 or mx[c] < t:
                        c = node_end[c]
                        continue
                    for j in range(own_ptr[c], own_ptr[c + 1]):
                        a = abs(buf[j])
                        if a >= t:
                            cand_idx[nc] = j
                            cand_val[nc] = a
                            nc += 1
                            s += a
                    c += 1
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
                    buf[j] = tau if buf[j] > 0.0 else -tau
                mx[k] = tau
            pk = parent[k]
            if pk >= 0 and mx[k] > mx[pk]:
                mx[pk] = mx[k]
        for k in range(n_nodes):  # scatter back; vanished groups are zero
            if dead[k] != 0:
                for j in range(own_ptr[k], own_ptr[k + 1]):
                    x[perm[j]] = 0.0
            else:
                for j in range(own_ptr[k], own_ptr[k + 1]):
                    x[perm[j]] = buf[j]


# ---------------------------------------------------------------------------
# Penalty values
# ---------------------------------------------------------------------------


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def sure_terms(W, c, probe):
    """``sum((W[0] - c)**2)`` and ``probe @ (W[1] - W[0])`` in one pass (SURE's risk, no temporary)."""
    err = 0.0
    div = 0.0
    for j in range(c.shape[0]):
        a = W[0, j]
        e = a - c[j]
        err += e * e
        div += probe[j] * (W[1, j] - a)
    return err, div


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def all_finite(X):
    """Whether every entry of the 2-D array ``X`` is finite (no temporary)."""
    for i in range(X.shape[0]):
        for j in range(X.shape[1]):
            v = X[i, j]
            if not (v - v == 0.0):
                return False
    return True


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def copy_finite(src, dst):
    """Copy the 2-D float64 array ``src`` into ``dst`` (same shape); return whether all are finite.

    One pass instead of a copy and a check. The test ``v - v == 0.0``
    (false for inf and NaN only) is an OR of comparisons, which vectorises
    (a float sum would not, without fastmath); indexing in two dimensions,
    not through a flat view of the bits, compiles in a quarter of the time.
    """
    bad = False
    for i in range(src.shape[0]):
        for j in range(src.shape[1]):
            v = src[i, j]
            dst[i, j] = v
            bad |= not (v - v == 0.0)
    return not bad


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def value_l1(X, out):
    """``out[i] = sum_j |X[i, j]|``."""
    for i in range(X.shape[0]):
        s = 0.0
        for j in range(X.shape[1]):
            s += abs(X[i, j])
        out[i] = s


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def value_l0(X, out):
    """``out[i]`` = number of non-zero entries of row ``i``."""
    for i in range(X.shape[0]):
        s = 0.0
        for j in range(X.shape[1]):
            if X[i, j] != 0.0:
                s += 1.0
        out[i] = s


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def value_tree(X, out, kind, perm, own_ptr, node_end, parent, weights):
    """Tree penalty of each row: ``kind`` 0 = tree_l2, 1 = tree_linf, 2 = tree_l0."""
    n_nodes = parent.shape[0]
    acc = np.empty(n_nodes)
    for i in range(X.shape[0]):
        x = X[i]
        for k in range(n_nodes):
            s = 0.0
            for j in range(own_ptr[k], own_ptr[k + 1]):
                v = x[perm[j]]
                if kind == 0:
                    s += v * v
                elif kind == 1:
                    s = max(s, abs(v))
                elif v != 0.0:
                    s = 1.0
            acc[k] = s
        total = 0.0
        for k in range(n_nodes - 1, -1, -1):
            s = acc[k]
            pk = parent[k]
            if pk >= 0:
                if kind == 0:
                    acc[pk] += s
                else:
                    acc[pk] = max(acc[pk], s)
            if kind == 0:
                s = np.sqrt(s)
            total += weights[k] * s
        out[i] = total


# ---------------------------------------------------------------------------
# FISTA row updates (the solver's elementwise work around the prox, fused)
# ---------------------------------------------------------------------------


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def fista_gradient_step(A_new, Y, G, C, inv_L, positive, r0, r1):
    """``A_new = Y - (G - C) * inv_L`` row by row (then ``max(., 0)`` when ``positive``), rows r0..r1-1.

    ``G`` is the product part of the gradient (any float dtype), ``C`` its
    constant part, ``inv_L`` the per-row step (n,).
    """
    for i in range(r0, r1):
        s = inv_L[i]
        for j in range(A_new.shape[1]):
            v = Y[i, j] - (G[i, j] - C[i, j]) * s
            if positive and v < 0.0:
                v = 0.0
            A_new[i, j] = v


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def fista_momentum(A_new, A, Y, Y32, t, r0, r1):
    """FISTA extrapolation with adaptive restart, rows r0..r1-1, in place.

    ``Y = A_new + beta (A_new - A)`` with ``beta = (t - 1) / t'``,
    ``t' = (1 + sqrt(1 + 4 t^2)) / 2``, except where the step points uphill,
    ``(Y - A_new) . (A_new - A) > 0`` (O'Donoghue and Candes), where the
    momentum restarts (``beta = 0``, ``t' = 1``). ``Y32`` receives ``Y``
    in float32 for the next products; ``t`` (n,) is updated.
    """
    k = A_new.shape[1]
    for i in range(r0, r1):
        dot = 0.0
        for j in range(k):
            dot += (Y[i, j] - A_new[i, j]) * (A_new[i, j] - A[i, j])
        ti = t[i]
        if dot > 0.0:
            beta = 0.0
            t[i] = 1.0
        else:
            t_new = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * ti * ti))
            beta = (ti - 1.0) / t_new
            t[i] = t_new
        for j in range(k):
            y = A_new[i, j] + beta * (A_new[i, j] - A[i, j])
            Y[i, j] = y
            Y32[i, j] = y
