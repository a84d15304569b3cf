"""Kernels of non-local inpainting: the steps of coding groups of similar patches jointly with masked data.

:mod:`restore.inpainting.grouping` strings them together per chunk of
reference patches: the matching (:func:`restore._blockmatch.match_pixels_many`,
the block matcher on the patches' pixels), :func:`gather_groups`,
then FISTA steps of the group transform (matrix products, in the caller), the
prox of the tree-l2 norm (:func:`restore._core.prox_tree_l2`, the kernel of
:func:`restore.prox`) and :func:`fista_step`, and :func:`aggregate`.
:func:`scatter_patches` averages the passes of patch coding
(:mod:`restore.inpainting.patches`). Small kernels, not one fused one: each
compiles in well under a second, and the prox reuses the kernel the
denoiser and the coder compile.

Kernels use the flags of :mod:`restore._config` (``cache=True``,
``nogil=True``: callers run them on their own threads).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._config import JIT


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def gather_groups(U, known, idx, X, Kn):
    """The patches of the groups ``idx`` (n, k, 3) of ``U`` (H, W) into X (n, k p^2).

    ``Kn`` receives the patches of ``known`` (uint8, 1 where known).
    """
    n, k = idx.shape[0], idx.shape[1]
    p = int(np.sqrt(X.shape[1] // k) + 0.5)
    q = p * p
    for i in range(n):
        for m in range(k):
            r0, c0 = idx[i, m, 0], idx[i, m, 2]
            for a in range(p):
                for b in range(p):
                    X[i, m * q + a * p + b] = U[r0 + a, c0 + b]
                    Kn[i, m * q + a * p + b] = known[r0 + a, c0 + b]


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
def aggregate(X, idx, win, w, bnum, bden, b0, b1):
    """Add ``w[i] * win *`` each patch of the groups X at its place in ``bnum``, and ``w[i] * win`` in ``bden``.

    The buffers' pixel (0, 0) is the global ``(b0, b1)``; ``idx`` as in
    :func:`gather_groups`.
    """
    n, k = idx.shape[0], idx.shape[1]
    p = win.shape[0]
    q = p * p
    for i in range(n):
        for m in range(k):
            r0, c0 = idx[i, m, 0] - b0, idx[i, m, 2] - b1
            for a in range(p):
                for b in range(p):
                    ww = w[i] * win[a, b]
                    bnum[r0 + a, c0 + b] += ww * X[i, m * q + a * p + b]
                    bden[r0 + a, c0 + b] += ww


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def scatter_patches(rec, w, win, r, c, sums, weights):
    """Add patch ``rec[i]`` (p*p, raveled) at corner ``(r[i], c[i])`` of ``sums``, ``w[i] * win`` to ``weights``.

    The corners are distinct (one grid); pixel by pixel of the patch, then
    patch by patch, the order of numpy's ``sums[r + di, c + dj] += rec[:, k]``.
    """
    n = rec.shape[0]
    p = win.shape[0]
    for a in range(p):
        for b in range(p):
            k = a * p + b
            wk = win[a, b]
            for i in range(n):
                sums[r[i] + a, c[i] + b] += rec[i, k]
                weights[r[i] + a, c[i] + b] += wk * w[i]


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def known_extremes(img, missing, lo, hi):
    """The least and largest value of each channel of ``img`` (H, W, C) where ``missing`` (H, W) is False.

    Into ``lo`` and ``hi`` (C,), which hold inf and -inf on entry. A NaN stays: the channel's ``lo`` and ``hi``
    become NaN (as numpy's ``min`` and ``max``). One pass, no temporaries (16 MP photos: the masked copies numpy
    needs cost a tenth of a second a call).
    """
    H, W, C = img.shape
    for r in range(H):
        for c in range(W):
            if missing[r, c]:
                continue
            for ch in range(C):
                v = img[r, c, ch]
                if v != v:
                    lo[ch] = v
                    hi[ch] = v
                else:
                    if v < lo[ch]:
                        lo[ch] = v
                    if v > hi[ch]:
                        hi[ch] = v


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def window_counts(a, size, out):
    """Count the True entries of ``a`` (H, W, bool) in every ``size`` x ``size`` window: out (H-size+1, W-size+1).

    Running sums down each column, then along each row of them: one pass and no temporaries of the image's size
    (16 MP photos: their pages are touched once, in ``out``).
    """
    H, W = a.shape
    cols = np.zeros(W, dtype=np.int32)  # each column's count over the window's rows
    for r in range(H):
        for c in range(W):
            cols[c] += a[r, c]
            if r >= size:
                cols[c] -= a[r - size, c]
        if r >= size - 1:
            o = r - size + 1
            s = np.int32(0)
            for c in range(size):
                s += cols[c]
            out[o, 0] = s
            for c in range(size, W):
                s += cols[c] - cols[c - size]
                out[o, c - size + 1] = s
