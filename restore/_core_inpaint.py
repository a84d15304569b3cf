"""Kernels of non-local inpainting: the steps of coding groups of similar patches jointly with masked data.

:mod:`restore.inpainting.grouping` strings them together per chunk of
reference patches: the matching (:func:`restore._blockmatch.match_many`, the
project's one block matcher, on :func:`patch_features`), :func:`gather_groups`,
then FISTA steps of :func:`analyse` (a separable orthonormal transform of
each patch, then an orthonormal Haar transform along the group), the prox of
the tree-l2 norm (:func:`restore._core.prox_tree_l2`, the kernel of
:func:`restore.prox`), :func:`synthesise` and :func:`fista_step`, and
:func:`aggregate`. Small kernels, not one fused one: each compiles in well
under a second, and the matching and the prox reuse the kernels the denoiser
and the coder compile; :func:`analyse` and :func:`synthesise` are one kernel
(:func:`transform_groups`), compiled once.

Kernels use the flags of :mod:`restore._config` (``cache=True``,
``nogil=True``: callers run them on their own threads).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._config import JIT
from ._core_nonlocal import haar_group


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
def gather_groups(U, known, idx, soff, X, Kn):
    """The patches of the groups ``idx`` (n, k, 3) (first index relative to ``soff``) of ``U`` (H, W) into X (n, k p^2).

    ``Kn`` receives the patches of ``known`` (uint8, 1 where known).
    """
    n, k = idx.shape[0], idx.shape[1]
    p = int(np.sqrt(X.shape[1] // k) + 0.5)
    q = p * p
    for i in range(n):
        for m in range(k):
            r0, c0 = idx[i, m, 0] + soff, idx[i, m, 2]
            for a in range(p):
                for b in range(p):
                    X[i, m * q + a * p + b] = U[r0 + a, c0 + b]
                    Kn[i, m * q + a * p + b] = known[r0 + a, c0 + b]


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def transform_groups(X, A, AT, k, p, inverse):
    """Group coefficients in place: ``A P A^T`` for each patch P (p x p) of each row of X, then Haar along the group.

    With ``inverse``, the inverse: Haar's inverse, then ``A^T P A``. One
    kernel for both directions, and one :func:`haar_group` under it: the
    direction is a run-time flag (two kernels, or a constant flag, would
    each be compiled on their own on the first call). Both products run with
    their innermost loop along contiguous rows (so that it vectorises).
    """
    n = X.shape[0]
    q = p * p
    tmp = np.empty(max(k * q, q))
    if inverse:
        for i in range(n):
            haar_group(X[i], k, q, tmp, inverse)
        K, KT = AT, A
    else:
        K, KT = A, AT
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
    if not inverse:
        for i in range(n):
            haar_group(X[i], k, q, tmp, inverse)


def analyse(X, A, AT, k, p):
    """Group coefficients in place: ``A P A^T`` for each patch P of each row of X, then Haar along the group."""
    transform_groups(X, A, AT, k, p, False)


def synthesise(X, A, AT, k, p):
    """The inverse of :func:`analyse`, in place."""
    transform_groups(X, A, AT, k, p, True)


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def fista_step(X, Y, Kn, R, beta):
    """FISTA's extrapolation of the reconstruction X from the previous one R, the known pixels (Y where Kn) put back.

    R receives X's reconstruction (before extrapolation).
    """
    n, m = X.shape
    for i in range(n):
        for j in range(m):
            r = X[i, j]
            if Kn[i, j]:
                X[i, j] = Y[i, j]
            else:
                X[i, j] = r + beta * (r - R[i, j])
            R[i, j] = r


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def aggregate(X, idx, soff, win, w, bnum, bden, b0, b1):
    """Add ``w[i] * win *`` each patch of the groups X at its place in ``bnum``, and ``w[i] * win`` in ``bden``.

    The buffers' pixel (0, 0) is the global ``(b0, b1)``; ``idx`` as in
    :func:`gather_groups`.
    """
    n, k = idx.shape[0], idx.shape[1]
    p = win.shape[0]
    q = p * p
    for i in range(n):
        for m in range(k):
            r0, c0 = idx[i, m, 0] + soff - b0, idx[i, m, 2] - b1
            for a in range(p):
                for b in range(p):
                    ww = w[i] * win[a, b]
                    bnum[r0 + a, c0 + b] += ww * X[i, m * q + a * p + b]
                    bden[r0 + a, c0 + b] += ww
