"""Kernels of non-local inpainting: the steps of coding groups of similar patches jointly with masked data.

:mod:`restore.inpainting.grouping` strings them together per chunk of
reference patches: the matching (:func:`restore._blockmatch.match_pixels_many`,
the block matcher on the patches' pixels), :func:`gather_groups`,
then FISTA steps of the group transform (matrix products, in the caller), the
prox of the tree-l2 norm (:func:`restore._core.prox_tree_l2`, the kernel of
:func:`restore.prox`) and :func:`fista_step`, and :func:`aggregate`.
:func:`conditional_groups` is the step of the prior under heavy random
loss (:mod:`restore.inpainting.prior`), between the same matching,
gathering and aggregation. :func:`scatter_patches` averages the passes of
patch coding (:mod:`restore.inpainting.patches`). Small kernels, not one fused one: each
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
def conditional_groups(X, Kn, k, ridge):
    """Each group's missing pixels to their mean given its known ones, under the group's Gaussian model.

    ``X`` (n, k p^2) holds ``n`` groups of ``k`` patches (known pixels and
    the current estimate of the missing ones, as :func:`gather_groups`
    gathers them), ``Kn`` which are known. The model of a group is the mean
    and the covariance of its ``k`` patches, plus ``ridge`` on the
    diagonal; each patch's missing pixels become their conditional mean
    ``mu_m + C_mk (C_kk)^-1 (x_k - mu_k)`` (in place; known pixels are not
    written), by a Cholesky factorisation of the known pixels' block.
    """
    n = X.shape[0]
    q = X.shape[1] // k
    mu = np.empty(q)
    C = np.empty((q, q))
    D = np.empty((k, q))  # the group's patches minus their mean
    A = np.empty((q, q))
    b = np.empty(q)
    kk = np.empty(q, dtype=np.int64)
    for i in range(n):
        for a in range(q):
            s = 0.0
            for m in range(k):
                s += X[i, m * q + a]
            mu[a] = s / k
        for m in range(k):
            for a in range(q):
                D[m, a] = X[i, m * q + a] - mu[a]
        for a in range(q):
            for c in range(a, q):
                s = 0.0
                for m in range(k):
                    s += D[m, a] * D[m, c]
                C[a, c] = s / k
                C[c, a] = s / k
            C[a, a] += ridge
        for m in range(k):
            nk = 0
            for a in range(q):
                if Kn[i, m * q + a]:
                    kk[nk] = a
                    nk += 1
            if nk == q:
                continue
            for a in range(nk):  # the lower triangle of C_kk, factorised in place (positive definite: ridge > 0)
                for c in range(a + 1):
                    A[a, c] = C[kk[a], kk[c]]
                b[a] = D[m, kk[a]]
            for a in range(nk):
                s = A[a, a]
                for c in range(a):
                    s -= A[a, c] * A[a, c]
                A[a, a] = np.sqrt(max(s, ridge))  # >= ridge in exact arithmetic: rounding cannot make it 0 or NaN
                for r in range(a + 1, nk):
                    s = A[r, a]
                    for c in range(a):
                        s -= A[r, c] * A[a, c]
                    A[r, a] = s / A[a, a]
            for a in range(nk):  # b = C_kk^-1 (x_k - mu_k): forward, then back substitution
                s = b[a]
                for c in range(a):
                    s -= A[a, c] * b[c]
                b[a] = s / A[a, a]
            for a in range(nk - 1, -1, -1):
                s = b[a]
                for c in range(a + 1, nk):
                    s -= A[c, a] * b[c]
                b[a] = s / A[a, a]
            for a in range(q):
                if not Kn[i, m * q + a]:
                    s = mu[a]
                    for c in range(nk):
                        s += C[a, kk[c]] * b[c]
                    X[i, m * q + a] = s


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


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def block_sd(img, known, blocks, size, n, out):
    """The sd of ``img`` (H, W) over the ``known`` pixels of each block's ``n`` x ``n`` window (clipped to the image).

    ``blocks`` (k, 2) holds the blocks' top-left corners; the window is the
    block of side ``size`` widened by ``(n - size) // 2`` on each side. A
    window with fewer than two known pixels has sd inf.
    """
    H, W = img.shape
    off = (n - size) // 2
    for k in range(blocks.shape[0]):
        r0, c0 = blocks[k, 0], blocks[k, 1]
        s = 0.0
        s2 = 0.0
        cnt = 0
        for r in range(max(r0 - off, 0), min(r0 + size + off, H)):
            for c in range(max(c0 - off, 0), min(c0 + size + off, W)):
                if known[r, c]:
                    v = img[r, c]
                    s += v
                    s2 += v * v
                    cnt += 1
        out[k] = np.sqrt(max(s2 / cnt - (s / cnt) ** 2, 0.0)) if cnt > 1 else np.inf


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def block_any(mask, blocks, size, out):
    """Whether each block (top-left corners ``blocks`` (k, 2), side ``size``, clipped to the image) holds a True."""
    H, W = mask.shape
    for k in range(blocks.shape[0]):
        r0, c0 = blocks[k, 0], blocks[k, 1]
        hit = False
        for r in range(r0, min(r0 + size, H)):
            for c in range(c0, min(c0 + size, W)):
                if mask[r, c]:
                    hit = True
                    break
            if hit:
                break
        out[k] = hit


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def fsr_windows(img, weight, blocks, size, n, rho, FW, WW):
    """Each block's ``n`` x ``n`` window of ``weight * rho**d * img`` into FW and of ``weight * rho**d`` into WW.

    ``d`` is a pixel's distance from the block's centre; pixels outside the
    image weigh 0. Windows as in :func:`block_sd`.
    """
    H, W = img.shape
    off = (n - size) // 2
    centre = off + size / 2.0
    for k in range(blocks.shape[0]):
        r0, c0 = blocks[k, 0] - off, blocks[k, 1] - off
        for i in range(n):
            r = r0 + i
            for j in range(n):
                c = c0 + j
                w = 0.0
                if 0 <= r < H and 0 <= c < W and weight[r, c] > 0:
                    w = weight[r, c] * rho ** np.sqrt((i + 0.5 - centre) ** 2 + (j + 0.5 - centre) ** 2)
                    FW[k, i, j] = w * img[r, c]
                else:
                    FW[k, i, j] = 0.0
                WW[k, i, j] = w


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def fsr_extrapolate(R, Wh, iters, fw2, size, gamma, vals):
    """Frequency selective extrapolation of each window: its model at the block's pixels into ``vals`` (k, size, size).

    ``R`` and ``Wh`` (k, n, n // 2 + 1) are the real FFTs (numpy's ``rfft2``)
    of the weighted windows and of the weights (:func:`fsr_windows`). Until
    ``iters[k]`` basis functions are in the model (a conjugate pair counts
    two, as published), each step picks the Fourier basis function (with its
    conjugate: the model is real) whose weighted projection on the residual,
    times ``fw2`` (the squared frequency weighting, 0 on the half-spectrum's
    duplicate entries), is largest, adds ``gamma`` times that projection to
    the model and takes it from the residual's spectrum (Seiler and Kaup's
    complex-valued FSE; ``gamma`` the orthogonality deficiency compensation).
    A window with no weight gives NaN.
    """
    n = R.shape[1]
    h = R.shape[2]
    off = (n - size) // 2
    ct = np.empty(n)  # scalar loops: an array expression here costs most of a second of compiling
    st = np.empty(n)
    for t in range(n):
        ct[t] = np.cos(2.0 * np.pi * t / n)
        st[t] = np.sin(2.0 * np.pi * t / n)
    Rr = np.empty((n, h))
    Ri = np.empty((n, h))
    Wr = np.empty((2 * n, 2 * n))  # the full spectrum of the weights, tiled twice: shifted reads stay in range
    Wi = np.empty((2 * n, 2 * n))
    for k in range(R.shape[0]):
        m_it = iters[k]
        for u in range(n):
            for v in range(n):
                x = Wh[k, u, v] if v < h else np.conj(Wh[k, (n - u) % n, n - v])  # W(-u, -v) = conj W(u, v)
                for a in range(0, 2 * n, n):
                    for b in range(0, 2 * n, n):
                        Wr[u + a, v + b] = x.real
                        Wi[u + a, v + b] = x.imag
        w0 = Wr[0, 0]
        if not w0 > 0.0:
            vals[k] = np.nan
            continue
        for u in range(n):
            for v in range(h):
                Rr[u, v] = R[k, u, v].real
                Ri[u, v] = R[k, u, v].imag
        ku = np.empty(m_it, dtype=np.int64)
        kv = np.empty(m_it, dtype=np.int64)
        cre = np.empty(m_it)
        cim = np.empty(m_it)
        best, bu, bv = -1.0, 0, 0
        for u in range(n):
            for v in range(h):
                m = (Rr[u, v] * Rr[u, v] + Ri[u, v] * Ri[u, v]) * fw2[u, v]
                if m > best:
                    best, bu, bv = m, u, v
        n_terms = 0
        it = 0
        while it < m_it:  # basis functions: a conjugate pair counts two
            pu, pv = bu, bv
            cr = gamma * Rr[pu, pv] / w0
            ci = gamma * Ri[pu, pv] / w0
            alone = (pu == 0 or 2 * pu == n) and (pv == 0 or 2 * pv == n)  # its own conjugate: a real cosine
            ku[n_terms], kv[n_terms] = pu, pv
            best = -1.0
            for u in range(n):
                ua, ub = u - pu + n, u + pu  # rows of W(. - k) and W(. + k)
                va, vb = n - pv, pv
                for v in range(h):
                    if alone:
                        Rr[u, v] -= cr * Wr[ua, va + v]
                        Ri[u, v] -= cr * Wi[ua, va + v]
                    else:
                        ar, ai, br, bi = Wr[ua, va + v], Wi[ua, va + v], Wr[ub, vb + v], Wi[ub, vb + v]
                        Rr[u, v] -= cr * (ar + br) - ci * (ai - bi)
                        Ri[u, v] -= cr * (ai + bi) + ci * (ar - br)
                    m = (Rr[u, v] * Rr[u, v] + Ri[u, v] * Ri[u, v]) * fw2[u, v]
                    if m > best:
                        best, bu, bv = m, u, v
            cre[n_terms] = cr if alone else 2.0 * cr
            cim[n_terms] = 0.0 if alone else 2.0 * ci
            n_terms += 1
            it += 1 if alone else 2
        for i in range(size):
            for j in range(size):
                acc = 0.0
                for q in range(n_terms):
                    t = (ku[q] * (off + i) + kv[q] * (off + j)) % n
                    acc += cre[q] * ct[t] - cim[q] * st[t]
                vals[k, i, j] = acc


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def fsr_put(out, weight, missing, blocks, vals, reused):
    """Write each block's ``vals`` into ``out`` at its missing pixels (not NaN) and give them the weight ``reused``."""
    H, W = out.shape
    size = vals.shape[1]
    for k in range(blocks.shape[0]):
        r0, c0 = blocks[k, 0], blocks[k, 1]
        for i in range(size):
            r = r0 + i
            if r >= H:
                break
            for j in range(size):
                c = c0 + j
                if c < W and missing[r, c] and vals[k, i, j] == vals[k, i, j]:
                    out[r, c] = vals[k, i, j]
                    weight[r, c] = reused
