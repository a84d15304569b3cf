"""Numba kernels of the edge-enhancing diffusion that sharpens the start of inpainting.

Edge-enhancing diffusion (Weickert, *Anisotropic Diffusion in Image
Processing*, 1998) smooths along edges and hardly across them: the diffusion
tensor has the eigenvector of the (colour) structure tensor of the
Gaussian-smoothed image across the edge, with diffusivity
``1 - exp(-3.31488 / (|grad|^2 / contrast^2)^4)``, and 1 along it. The kernels
work on lists of pixels (the missing ones and their neighbours), so the cost
follows the mask, not the image. Same flags as :mod:`restore._core`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._config import JIT


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def eed_tensor(u, rows, cols, g, dg, contrast2, a, b, c):  # pragma: no cover - compiled
    """Diffusion tensor [[a, b], [b, c]] at the pixels (rows, cols) of u (H, W, C).

    g and dg are the taps of a Gaussian and of its derivative (the image is
    continued by its edge values); the structure tensor sums the channels.
    """
    H, W, C = u.shape
    r = (g.shape[0] - 1) // 2
    for k in range(rows.shape[0]):
        i = rows[k]
        j = cols[k]
        j11 = 0.0
        j12 = 0.0
        j22 = 0.0
        for ch in range(C):
            gx = 0.0
            gy = 0.0
            for di in range(-r, r + 1):
                ii = min(max(i + di, 0), H - 1)
                s = 0.0
                d = 0.0
                for dj in range(-r, r + 1):
                    v = u[ii, min(max(j + dj, 0), W - 1), ch]
                    s += g[dj + r] * v
                    d += dg[dj + r] * v
                gx += g[di + r] * d
                gy += dg[di + r] * s
            j11 += gx * gx
            j12 += gx * gy
            j22 += gy * gy
        half = 0.5 * (j11 - j22)
        mu = 0.5 * (j11 + j22) + np.sqrt(half * half + j12 * j12)
        vx = j12
        vy = mu - j11
        norm = np.sqrt(vx * vx + vy * vy)
        if norm > 1e-300:
            vx /= norm
            vy /= norm
        else:
            vx = 1.0
            vy = 0.0
        q = mu / contrast2
        diff = 1.0 - np.exp(-3.31488 / (q * q * q * q)) if q > 0.0 else 1.0
        a[i, j] = diff * vx * vx + vy * vy
        b[i, j] = (diff - 1.0) * vx * vy
        c[i, j] = diff * vy * vy + vx * vx


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def eed_step(u, rows, cols, a, b, c, tau, start, stop, out):  # pragma: no cover - compiled
    """One explicit step of du/dt = div(D grad u) at pixels start..stop of (rows, cols), written to out.

    Central differences for the mixed terms, averaged tensor entries at the
    half points for the others; u itself is not changed (Jacobi step: the
    caller writes ``out`` back once every pixel's step is computed).
    """
    H, W, C = u.shape
    for k in range(start, stop):
        i = rows[k]
        j = cols[k]
        im = max(i - 1, 0)
        ip = min(i + 1, H - 1)
        jm = max(j - 1, 0)
        jp = min(j + 1, W - 1)
        ae = 0.5 * (a[i, j] + a[i, jp])
        aw = 0.5 * (a[i, j] + a[i, jm])
        cs = 0.5 * (c[i, j] + c[ip, j])
        cn = 0.5 * (c[i, j] + c[im, j])
        for ch in range(C):
            x = u[i, j, ch]
            main = (ae * (u[i, jp, ch] - x) - aw * (x - u[i, jm, ch])
                    + cs * (u[ip, j, ch] - x) - cn * (x - u[im, j, ch]))
            cross = 0.25 * (b[i, jp] * (u[ip, jp, ch] - u[im, jp, ch]) - b[i, jm] * (u[ip, jm, ch] - u[im, jm, ch])
                            + b[ip, j] * (u[ip, jp, ch] - u[ip, jm, ch]) - b[im, j] * (u[im, jp, ch] - u[im, jm, ch]))
            out[k, ch] = x + tau * (main + cross)


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def scatter_rows(u, rows, cols, vals, start, stop):  # pragma: no cover - compiled
    """u[rows[k], cols[k], :] = vals[k] for k in start..stop."""
    for k in range(start, stop):
        for ch in range(u.shape[2]):
            u[rows[k], cols[k], ch] = vals[k, ch]
