"""Kernels of non-local inpainting: groups of similar patches coded jointly with masked data under the tree norm.

A chunk of reference patches is matched on features of the current
estimate (:func:`restore._blockmatch.match_one`, the project's one block
matcher), each group of ``k`` patches is coded by iterative shrinkage with
masked data (LSSC's simultaneous sparse coding): the patches' known pixels
are the data, the coefficients (a separable orthonormal transform of each
patch, then an orthonormal Haar transform along the group) are shrunk by the
prox of the tree-l2 norm of :func:`restore._nonlocal.group_tree`, whose nodes
own a coefficient across the group's patches (:func:`restore._core.prox_tree_l2`,
the kernel of :func:`restore.prox`). The reconstructions are added, with
weights, into the chunk's own buffers (the caller sums them in chunk order,
so the result does not depend on the number of threads).

Kernels use the flags of :mod:`restore._config` (``cache=True``,
``nogil=True``: callers run them on their own threads).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import _core
from ._blockmatch import match_one
from ._config import JIT


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def patch_features(L, o0a, o0b, p, step, out):
    """Features of the patches of ``L`` (H, W) with first origin index in [o0a, o0b): out (n, 1, d, W - p + 1).

    The features are the means of the ``step`` x ``step`` blocks of the
    patch (``step`` = 1: its pixels), ``d = (p // step)**2``.
    """
    n2 = L.shape[1] - p + 1
    q = p // step
    inv = 1.0 / (step * step)
    for o0 in range(o0a, o0b):
        for bi in range(q):
            for bj in range(q):
                f = bi * q + bj
                for o2 in range(n2):
                    s = 0.0
                    for i in range(step):
                        for j in range(step):
                            s += L[o0 + bi * step + i, o2 + bj * step + j]
                    out[o0 - o0a, 0, f, o2] = s * inv


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def _transform_rows(X, K, KT, tmp, n, k, p):
    """X[i, m] <- K X[i, m] K^T for each patch (p x p) m of each row i < n (``KT`` is K's transpose).

    Both products run with their innermost loop along contiguous rows (so
    that it vectorises).
    """
    q = p * p
    for i in range(n):
        x = X[i]
        for m in range(k):
            base = m * q
            for j in range(q):
                tmp[j] = 0.0
            for a in range(p):  # tmp = K P
                for t in range(p):
                    kat = K[a, t]
                    for c in range(p):
                        tmp[a * p + c] += kat * x[base + t * p + c]
            for j in range(q):
                x[base + j] = 0.0
            for a in range(p):  # P' = tmp K^T: row a of P' is sum_t tmp[a, t] * row t of K^T
                for t in range(p):
                    v = tmp[a * p + t]
                    for b in range(p):
                        x[base + a * p + b] += v * KT[t, b]


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def _haar_rows(X, n, k, q, tmp, inverse):
    """Orthonormal Haar transform along the ``k`` patches (of ``q`` values) of each row i < n of X, in place."""
    r = 1.0 / np.sqrt(2.0)
    for i in range(n):
        x = X[i]
        if not inverse:
            h2 = k
            while h2 > 1:
                h = h2 // 2
                for j in range(h):
                    for c in range(q):
                        a = x[2 * j * q + c]
                        b = x[(2 * j + 1) * q + c]
                        tmp[j * q + c] = (a + b) * r
                        tmp[(h + j) * q + c] = (a - b) * r
                for j in range(h2 * q):
                    x[j] = tmp[j]
                h2 = h
        else:
            h2 = 2
            while h2 <= k:
                h = h2 // 2
                for j in range(h):
                    for c in range(q):
                        a = x[j * q + c]
                        b = x[(h + j) * q + c]
                        tmp[2 * j * q + c] = (a + b) * r
                        tmp[(2 * j + 1) * q + c] = (a - b) * r
                for j in range(h2 * q):
                    x[j] = tmp[j]
                h2 *= 2


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def code_groups(U, known, F, soff, refs, h, k, A, AT, perm, own_ptr, node_end, parent, weights, lam, n_inner,
                debias, win, bnum, bden, b0, b1):
    """Match, code and aggregate the groups of the reference origins ``refs`` (n, 2) (global (row, col)).

    ``U`` (C, H, W) is the current estimate (known pixels exact), ``known``
    (H, W) uint8 the data's support, ``F`` the features of the origins whose
    first index starts at ``soff`` (:func:`patch_features`), ``h`` the half
    search window. Each channel of a group is coded by ``n_inner`` steps of
    FISTA (step 1: the transforms are orthonormal and the mask a
    projection) from the estimate: transform, prox of ``lam`` times
    the tree-l2 norm, inverse, known pixels put back. The last
    reconstruction is added, times ``win`` and the group's weight
    (``1 / (1 + nonzeros of channel 0)``, as BM3D), into ``bnum`` (C, bh, bw)
    and ``win`` times the weight into ``bden`` (bh, bw), whose pixel (0, 0)
    is the global ``(b0, b1)``.
    """
    n = refs.shape[0]
    C = U.shape[0]
    p = A.shape[0]
    q = p * p
    kq = k * q
    idx = np.empty((n, k, 3), dtype=np.int64)
    dist = np.empty(k)
    X = np.empty((n, kq))
    X0 = np.empty((n, kq)) if debias else np.empty((0, kq))
    Y = np.empty((n, kq))
    R = np.empty((n, kq))  # the previous reconstruction (FISTA)
    Kn = np.empty((n, kq), dtype=np.uint8)
    tmp = np.empty(max(kq, q))
    lams = np.full(n, lam)
    m_work = max(parent.shape[0], kq)
    work = np.empty((4, m_work))
    iwork = np.empty((2, m_work), dtype=np.int64)
    w = np.empty(n)
    for i in range(n):
        match_one(F, refs[i, 0] - soff, 0, refs[i, 1], h, 0, h, k, idx[i], dist)
        for m in range(k):
            r0, c0 = idx[i, m, 0] + soff, idx[i, m, 2]
            for a in range(p):
                for b in range(p):
                    Kn[i, m * q + a * p + b] = known[r0 + a, c0 + b]
    for ch in range(C):
        for i in range(n):
            for m in range(k):
                r0, c0 = idx[i, m, 0] + soff, idx[i, m, 2]
                for a in range(p):
                    for b in range(p):
                        v = U[ch, r0 + a, c0 + b]
                        X[i, m * q + a * p + b] = v
                        Y[i, m * q + a * p + b] = v
        t = 1.0
        for i in range(n):
            for j in range(kq):
                R[i, j] = X[i, j]
        for it in range(n_inner):
            _transform_rows(X, A, AT, tmp, n, k, p)
            _haar_rows(X, n, k, q, tmp, False)
            if debias:
                X0[:, :] = X
            _core.prox_tree_l2(X, 0, n, perm, own_ptr, node_end, parent, weights, lams, work, iwork)
            if debias:
                for i in range(n):
                    for j in range(kq):
                        if X[i, j] != 0.0:
                            X[i, j] = X0[i, j]
            if ch == 0 and it == n_inner - 1:
                for i in range(n):
                    nnz = 0
                    for j in range(kq):
                        if X[i, j] != 0.0:
                            nnz += 1
                    w[i] = 1.0 / (1.0 + nnz)
            _haar_rows(X, n, k, q, tmp, True)
            _transform_rows(X, AT, A, tmp, n, k, p)
            if it < n_inner - 1:  # FISTA's extrapolation, then the known pixels put back
                t_next = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
                beta = (t - 1.0) / t_next
                t = t_next
                for i in range(n):
                    for j in range(kq):
                        r = X[i, j]
                        if Kn[i, j]:
                            X[i, j] = Y[i, j]
                        else:
                            X[i, j] = r + beta * (r - R[i, j])
                        R[i, j] = r
        for i in range(n):
            for m in range(k):
                r0, c0 = idx[i, m, 0] + soff - b0, idx[i, m, 2] - b1
                for a in range(p):
                    for b in range(p):
                        ww = w[i] * win[a, b]
                        bnum[ch, r0 + a, c0 + b] += ww * X[i, m * q + a * p + b]
                        if ch == 0:
                            bden[r0 + a, c0 + b] += ww
