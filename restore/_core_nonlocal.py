"""Numba kernels of the non-local tree method (:mod:`restore._nonlocal` plans and drives them).

Patch transforms, the Haar transform along a group, the aggregation of a
group's patches, stage 1's joint tree-l2 shrinkage of groups (the prox kernel of
:mod:`restore._core`, no second implementation) and the two stages' work on
a chunk of reference patches. Arrays use the three-axis form of
:mod:`restore._nonlocal`. Flags: :mod:`restore._config` (``cache=True``,
``nogil=True``: the caller runs chunks on its own threads).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import _core
from ._config import JIT
from ._core_blockmatch import match_one


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def patch_coefs(img, o0a, o0b, M0, M1, M2, sel, out, fpos, feat):
    """Coefficients ``sel`` of the patch at every origin with first index in [o0a, o0b): out[o0 - o0a, o1, o2, :].

    Coefficient ``sel[s]`` with ``fpos[s] >= 0`` is also the matching
    feature ``feat[o0 - o0a, o1, fpos[s], o2]`` (the layout of
    :func:`restore._core_blockmatch.match_one`, written as it is computed);
    an ``out`` whose last axis is empty is not written (features only).

    Axis by axis (last, middle, first), each coefficient a sum in
    increasing input index, the first two passes shared between the
    patches that overlap:
    along the last axis once per image row, along the middle axis once per
    row of origins. Each pass runs over a whole row of origins of the last
    axis at once (one coefficient of every patch of the row side by side,
    vectorised; per patch, the 8 to 11 terms of a sum would not fill the
    vector units), and only the coefficients of ``sel`` take the last pass.
    """
    p0, p1, p2 = M0.shape[0], M1.shape[0], M2.shape[0]
    n1 = img.shape[1] - p1 + 1
    n2 = img.shape[2] - p2 + 1
    rows = o0b - o0a + p0 - 1  # image rows (first axis) the origins' patches cover
    A = np.empty((rows, p1, p2, n2))  # along the last axis: A[i, j, c, o2] of image row (o0a + i, o1 + j)
    B = np.empty((rows, p1, p2, n2)) if p1 > 1 else A  # ... then along the middle axis (a plane: the identity)
    v = np.empty(n2)
    ns = sel.shape[0]
    keep = out.shape[3] > 0
    for o1 in range(n1):
        for i in range(rows):
            for j in range(p1):
                line = img[o0a + i, o1 + j]
                for c in range(p2):
                    a_row = A[i, j, c]
                    for o2 in range(n2):
                        a_row[o2] = 0.0
                    for k in range(p2):
                        m = M2[c, k]
                        for o2 in range(n2):
                            a_row[o2] += m * line[o2 + k]
        if p1 > 1:
            for i in range(rows):
                for b in range(p1):
                    for c in range(p2):
                        b_row = B[i, b, c]
                        for o2 in range(n2):
                            b_row[o2] = 0.0
                        for j in range(p1):
                            m = M1[b, j]
                            a_row = A[i, j, c]
                            for o2 in range(n2):
                                b_row[o2] += m * a_row[o2]
        for o0 in range(o0a, o0b):
            r = o0 - o0a
            for s in range(ns):
                n = sel[s]
                a = n // (p1 * p2)
                b = (n // p2) % p1
                c = n % p2
                for o2 in range(n2):
                    v[o2] = 0.0
                for i in range(p0):
                    m = M0[a, i]
                    b_row = B[r + i, b, c]
                    for o2 in range(n2):
                        v[o2] += m * b_row[o2]
                if keep:
                    for o2 in range(n2):
                        out[r, o1, o2, s] = v[o2]
                f = fpos[s]
                if f >= 0:
                    f_row = feat[r, o1, f]
                    for o2 in range(n2):
                        f_row[o2] = v[o2]


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def haar_group(x, k, p, tmp, inverse):
    """Orthonormal Haar transform along the k rows of the group x (k * p, row-major), in place.

    Callers pass ``inverse`` as a run-time value (``np.bool_``, not a
    literal ``True``/``False``, which numba would compile as a signature of
    its own each): one compiled function serves both directions, the
    non-local denoiser and inpainting.
    """
    r = 1.0 / np.sqrt(2.0)
    if not inverse:
        n = k
        while n > 1:
            h = n // 2
            for i in range(h):
                for c in range(p):
                    a = x[2 * i * p + c]
                    b = x[(2 * i + 1) * p + c]
                    tmp[i * p + c] = (a + b) * r
                    tmp[(h + i) * p + c] = (a - b) * r
            for j in range(n * p):
                x[j] = tmp[j]
            n = h
    else:
        n = 2
        while n <= k:
            h = n // 2
            for i in range(h):
                for c in range(p):
                    a = x[i * p + c]
                    b = x[(h + i) * p + c]
                    tmp[2 * i * p + c] = (a + b) * r
                    tmp[(2 * i + 1) * p + c] = (a - b) * r
            for j in range(n * p):
                x[j] = tmp[j]
            n *= 2


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def add_group(x, k, I0, I1, I2, win, w, bnum, bden, idx, o0, o1, o2, xt, t1, t2):
    """Synthesise the ``k`` patches of the group ``x`` (k * P coefficients) and add them, weighted, to the buffers.

    Patch ``m`` (``I0``, ``I1``, ``I2``: the synthesis matrices of the
    axes) goes to buffer position ``idx[m] + (o0, o1, o2)``: ``bnum`` gets
    ``w * win`` times it, ``bden`` ``w * win``, patch after patch. The
    separable synthesis runs on all the group's patches side by side (one
    coefficient of every patch at once, vectorised; one patch's sums of 8
    terms are chains of dependent additions), each sum in increasing input
    index. Scratch ``xt``, ``t1``, ``t2``: (P, k) float64.
    """
    p0, p1, p2 = win.shape
    p = p0 * p1 * p2
    for m in range(k):
        for c in range(p):
            xt[c, m] = x[m * p + c]
    for i in range(p0):  # along the last axis: t1[(i, j, c), m] = sum_l I2[c, l] xt[(i, j, l), m]
        for j in range(p1):
            base = (i * p1 + j) * p2
            for c in range(p2):
                row = t1[base + c]
                for m in range(k):
                    row[m] = 0.0
                for ll in range(p2):
                    coef = I2[c, ll]
                    src = xt[base + ll]
                    for m in range(k):
                        row[m] += coef * src[m]
    mid = t1
    if p1 > 1:  # along the middle axis (a plane's (p0, 1, p2) patches skip it: the identity)
        mid = t2
        for i in range(p0):
            for b in range(p1):
                for c in range(p2):
                    row = t2[(i * p1 + b) * p2 + c]
                    for m in range(k):
                        row[m] = 0.0
                    for j in range(p1):
                        coef = I1[b, j]
                        src = t1[(i * p1 + j) * p2 + c]
                        for m in range(k):
                            row[m] += coef * src[m]
    out = xt  # along the first axis, into xt (read no more)
    for a in range(p0):
        for bc in range(p1 * p2):
            row = out[a * p1 * p2 + bc]
            for m in range(k):
                row[m] = 0.0
            for i in range(p0):
                coef = I0[a, i]
                src = mid[i * p1 * p2 + bc]
                for m in range(k):
                    row[m] += coef * src[m]
    for m in range(k):
        q0, q1, q2 = idx[m, 0] + o0, idx[m, 1] + o1, idx[m, 2] + o2
        n = 0
        for i in range(p0):
            for j in range(p1):
                for c in range(p2):
                    ww = w * win[i, j, c]
                    bnum[q0 + i, q1 + j, q2 + c] += ww * out[n, m]
                    bden[q0 + i, q1 + j, q2 + c] += ww
                    n += 1


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def shrink_groups(X, lam, perm, own_ptr, node_end, parent, weights, debias, l0):
    """Stage 1's shrinkage of the groups X (n, k * P) in place: the prox of ``lam`` times a tree norm.

    The tree is given by its flat arrays (``Tree._flat`` of
    :func:`restore._nonlocal.group_tree`); the prox is
    :func:`restore._core.prox_tree_l2`, or with ``l0``
    :func:`restore._core.prox_tree_l0` (the tree-l0 penalty: hard
    thresholding of whole subtrees). With ``debias``, every coefficient the
    tree-l2 prox keeps takes back its value before shrinkage (the tree-l2
    norm chooses the support, as hard thresholding would, without its
    shrinkage bias).
    """
    n, p = X.shape
    zero = np.int64(0)  # not a literal 0: one compiled prox for every caller (see haar_group)
    m_work = max(parent.shape[0], p)
    work = np.empty((4, m_work))
    iwork = np.empty((2, m_work), dtype=np.int64)
    X0 = X.copy() if debias else X
    if l0:
        _core.prox_tree_l0(X, zero, n, perm, own_ptr, node_end, parent, weights, np.full(n, lam), work, iwork)
        return
    _core.prox_tree_l2(X, zero, n, perm, own_ptr, node_end, parent, weights, np.full(n, lam), work, iwork)
    if debias:
        for i in range(n):
            for j in range(p):
                if X[i, j] != 0.0:
                    X[i, j] = X0[i, j]


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def stage1_chunk(F, T, soff, refs, h0, h1, h2, k, perm, own_ptr, node_end, parent, weights, lam,
                 I0, I1, I2, win, bnum, bden, borg, debias, l0):
    """Stage 1 for the references ``refs`` (n, 3) (global origins): match on F, shrink T's groups, aggregate.

    ``F`` holds the matching features and ``T`` (C, ...) the coefficients
    of each of C channels at the origins of a strip starting at global
    first index ``soff``: every channel's groups are made of the same
    patches (matched once, on F) and shrunk with its own ``lam[c]``.
    ``bnum``, ``bden`` (C, ...) are the chunk's buffers, whose pixel (0, 0,
    0) is the global pixel ``borg``.
    """
    n = refs.shape[0]
    n_ch = T.shape[0]
    forward, inverse_ = np.bool_(False), np.bool_(True)  # not literals: one compiled haar_group (see there)
    p0, p1, p2 = win.shape
    p = p0 * p1 * p2
    kp = k * p
    X = np.empty((n, kp))
    idx = np.empty((n, k, 3), dtype=np.int64)
    dist = np.empty(k)
    tmp = np.empty(kp)
    xt, t1, t2 = np.empty((p, k)), np.empty((p, k)), np.empty((p, k))  # add_group's scratch
    for i in range(n):
        match_one(F, refs[i, 0] - soff, refs[i, 1], refs[i, 2], h0, h1, h2, k, idx[i], dist)
    for ch in range(n_ch):
        for i in range(n):
            for m in range(k):
                q0, q1, q2 = idx[i, m, 0], idx[i, m, 1], idx[i, m, 2]
                for c in range(p):
                    X[i, m * p + c] = T[ch, q0, q1, q2, c]
            haar_group(X[i], k, p, tmp, forward)
        Xin = X.copy()
        shrink_groups(X, lam[ch], perm, own_ptr, node_end, parent, weights, debias, l0)
        for i in range(n):
            x = X[i]
            # the inverse of the noise variance left in the group (in units of sigma^2): each coefficient kept
            # keeps the square of its scaling; as BM3D's 1 / (number kept) for hard thresholding, and its Wiener
            # weight
            g2 = 0.0
            for j in range(kp):
                if x[j] != 0.0:
                    r = x[j] / Xin[i, j]
                    g2 += r * r
            w = 1.0 / max(g2, 1.0)
            haar_group(x, k, p, tmp, inverse_)
            add_group(x, k, I0, I1, I2, win, w, bnum[ch], bden[ch], idx[i], soff - borg[0], -borg[1], -borg[2],
                      xt, t1, t2)


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def stage2_chunk(F, TE, TN, soff, refs, h0, h1, h2, k, sigma2, I0, I1, I2, win, bnum, bden, borg):
    """Stage 2 (empirical Wiener) for the references ``refs``: match on F, filter TN's groups by TE's, aggregate.

    ``TE``, ``TN`` (C, ...): the estimate's and the noisy coefficients of
    each channel, filtered in the same groups (matched once, on F), each
    with its noise variance ``sigma2[c]``; ``bnum``, ``bden`` (C, ...).
    """
    n = refs.shape[0]
    n_ch = TN.shape[0]
    forward, inverse_ = np.bool_(False), np.bool_(True)  # not literals: one compiled haar_group (see there)
    p0, p1, p2 = win.shape
    p = p0 * p1 * p2
    kp = k * p
    idx = np.empty((k, 3), dtype=np.int64)
    dist = np.empty(k)
    e = np.empty(kp)
    x = np.empty(kp)
    tmp = np.empty(kp)
    xt, t1, t2 = np.empty((p, k)), np.empty((p, k)), np.empty((p, k))  # add_group's scratch
    for i in range(n):
        match_one(F, refs[i, 0] - soff, refs[i, 1], refs[i, 2], h0, h1, h2, k, idx, dist)
        for ch in range(n_ch):
            s2 = sigma2[ch]
            for m in range(k):
                q0, q1, q2 = idx[m, 0], idx[m, 1], idx[m, 2]
                for c in range(p):
                    e[m * p + c] = TE[ch, q0, q1, q2, c]
                    x[m * p + c] = TN[ch, q0, q1, q2, c]
            haar_group(e, k, p, tmp, forward)
            haar_group(x, k, p, tmp, forward)
            g2 = 1.0  # the group's mean (coefficient 0) passes unchanged: adding a constant to y adds it to the result
            for j in range(1, kp):
                e2 = e[j] * e[j]
                g = e2 / (e2 + s2)
                x[j] *= g
                g2 += g * g
            w = 1.0 / (s2 * max(g2, 1e-12))  # BM3D's weight: the inverse of the group's residual noise variance
            haar_group(x, k, p, tmp, inverse_)
            add_group(x, k, I0, I1, I2, win, w, bnum[ch], bden[ch], idx, soff - borg[0], -borg[1], -borg[2], xt, t1,
                      t2)
