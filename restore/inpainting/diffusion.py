"""Edge-enhancing diffusion: it sharpens the interpolant at edges, and tells where the result should lean on it.

Weickert's anisotropic diffusion (diffusion along edges, not across them),
run with fast explicit cycles (Grewenig, Weickert and Bruhn 2010) on the
missing pixels only, known pixels fixed; the kernels are in
:mod:`restore._core_diffusion`.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import _core_diffusion
from .._progress import ProgressCallback, Steps
from .interpolation import _BAND_PX, bands

__all__ = ["diffusion_time", "edge_weights", "fed_cycle", "sharpen"]

_EED_CONTRAST = 0.05  # contrast of the diffusivity, relative to the range of the known values
_EED_SIGMA = 1.0  # sd of the Gaussian smoothing before the structure tensor, in pixels
_EED_TRUNCATE = 2.0  # support of the Gaussian, in sd
_EED_TIME = 50.0  # diffusion time: it reaches about sqrt(2 * 50) = 10 pixels, the width of thick strokes
# on strokes, the time is the square of their half-width (px) within these bounds: a thinner stroke is crossed sooner
# (text1 masks: time 12 to 50 changed the masked PSNR by under 0.01 dB on average, at a quarter of the cycles)
_EED_TIME_MIN = 12.0
_EED_CYCLE = 7  # explicit steps of a fast explicit diffusion cycle; the tensor is updated once per cycle
# weight of the diffused image in the start; the interpolant has the rest: the diffusion restores edges
# and flattens textures, the interpolant keeps some texture
_EED_SHARE = 0.65
# on straight edges the result leans on the diffusion alone (see edge_weights)
_EDGE_SIGMA = 1.0  # sd of the Gaussian smoothing of the start's luminance before its structure tensor, px
_EDGE_RHO = 2.0  # sd of the Gaussian window of the structure tensor, px
_EDGE_COHERENCE = (0.8, 1.1)  # the passes' result has weight 1 up to coherence 0.8, falling to 1/3 at 1


def fed_cycle(time: float = _EED_TIME) -> tuple[np.ndarray, range]:
    """Step sizes of one cycle of fast explicit diffusion, and the range of the cycles reaching ``time``.

    Grewenig, Weickert and Bruhn (2010): steps of varying size, stable over
    a cycle, which reach the diffusion time ``_EED_TIME`` in 77 steps where
    steps of 0.2 would take 250.
    """
    n = _EED_CYCLE
    taus = 0.25 / (2 * np.cos(np.pi * (2 * np.arange(n) + 1) / (4 * n + 2)) ** 2)
    return taus, range(max(1, int(round(time / taus.sum()))))


def diffusion_time(missing: np.ndarray, strokes: bool) -> float:
    """The diffusion time for this mask: on ``strokes`` (a clustered mask) the square of their half-width.

    The half-width is the missing pixels over those with a known
    4-neighbour (``w / 2`` for strokes of width ``w``), the time within
    ``[_EED_TIME_MIN, _EED_TIME]``. Under random loss ``_EED_TIME``: the
    diffusion restores edges across many small holes, not across one.
    """
    if not strokes:
        return _EED_TIME
    m = np.pad(missing, 1)
    rim = missing & ~(m[:-2, 1:-1] & m[2:, 1:-1] & m[1:-1, :-2] & m[1:-1, 2:])
    half = float(np.count_nonzero(missing)) / max(int(np.count_nonzero(rim)), 1)
    return float(np.clip(half * half, _EED_TIME_MIN, _EED_TIME))


def sharpen(img: np.ndarray, missing: np.ndarray, n_threads: int, progress: ProgressCallback | None = None, *,
            share: float = _EED_SHARE, time: float = _EED_TIME) -> tuple[np.ndarray, np.ndarray]:
    """Sharpen the interpolant ``img`` (channels last) at the missing pixels, in place.

    Returns ``img`` and the diffused values before the blend at the
    missing pixels (n_missing, C), in ``img``'s dtype.

    Edge-enhancing diffusion to ``time`` (see
    :mod:`restore._core_diffusion`; known pixels fixed, one structure
    tensor for all channels, updated once per cycle of ``_EED_CYCLE``
    steps), then the blend ``share * diffused + (1 - share) * interpolant``.
    The biharmonic interpolant blurs edges, which is where most of its
    error lies with random pixel loss; the diffusion restores them and the
    blend keeps the textures that the diffusion flattens.
    ``progress(cycle, n_cycles)`` after each cycle and, with the count unchanged, after its structure tensor;
    it may raise to stop.
    """
    rows, cols = np.nonzero(missing)
    if len(rows) == 0:
        return img, img[rows, cols]
    from scipy.ndimage import binary_dilation

    # the tensor is read at the missing pixels and at their four neighbours
    t_rows, t_cols = np.nonzero(binary_dilation(missing))
    # Gaussian taps and the central differences of the smoothed image, on a common support
    r = int(np.ceil(_EED_TRUNCATE * _EED_SIGMA))
    t = np.arange(-r - 1, r + 2, dtype=np.float64)
    g = np.where(np.abs(t) <= r, np.exp(-0.5 * (t / _EED_SIGMA) ** 2), 0.0)
    g /= g.sum()
    dg = 0.5 * (np.roll(g, 1) - np.roll(g, -1))  # weight of u(x + t) in (u_s(x + 1) - u_s(x - 1)) / 2
    known = ~missing[..., None]  # the range of the known values (the interpolant overshoots it)
    contrast = _EED_CONTRAST * max(float(np.max(img, where=known, initial=-np.inf)
                                         - np.min(img, where=known, initial=np.inf)), np.finfo(img.dtype).tiny)
    H, W, n_ch = img.shape
    a, b, c = (np.zeros((H, W), dtype=np.float32) for _ in range(3))
    start = img[rows, cols].astype(np.float64)
    taus, cycles = fed_cycle(time)
    step = np.empty((len(rows), n_ch))

    def chunks(n):
        edges = np.linspace(0, n, n_threads + 1).astype(np.int64)
        return list(zip(edges[:-1], edges[1:], strict=True))

    t_chunks, s_chunks = chunks(len(t_rows)), chunks(len(rows))
    with ThreadPoolExecutor(n_threads, thread_name_prefix="restore-eed") as pool:
        def run(fn, parts):
            for f in [pool.submit(fn, lo, hi) for lo, hi in parts]:
                f.result()

        for k in cycles:
            run(lambda lo, hi: _core_diffusion.eed_tensor(img, t_rows[lo:hi], t_cols[lo:hi], g, dg,
                                                          contrast * contrast, a, b, c), t_chunks)
            if progress is not None:  # the same count again, mid-cycle: a chance to cancel (16 MP: a cycle ~1 s)
                progress(k, len(cycles))
            for tau in taus:
                run(lambda lo, hi, tau=tau: _core_diffusion.eed_step(img, rows, cols, a, b, c, tau, lo, hi, step),
                    s_chunks)
                run(lambda lo, hi: _core_diffusion.scatter_rows(img, rows, cols, step, lo, hi), s_chunks)
            if progress is not None:
                progress(k + 1, len(cycles))
    diffused = step.astype(img.dtype)
    step *= share
    step += (1.0 - share) * start
    img[rows, cols] = step.astype(img.dtype)
    return img, diffused


def edge_weights(lum: np.ndarray, missing: np.ndarray, steps: Steps | None = None, *,
                 band_px: int = _BAND_PX) -> np.ndarray:
    """Weight of the passes' result against the diffusion alone, per missing pixel: 1, down to 1/3 on straight edges.

    On straight edges the diffusion alone is better than the average of
    patch reconstructions, and sharper than the start (its blend with the
    interpolant). The weight is ``(hi - coh) / (hi - lo)`` clipped to
    [0, 1], with ``(lo, hi) = _EDGE_COHERENCE``, where ``coh = (l1 - l2)
    / (l1 + l2)`` is the coherence of the structure tensor (eigenvalues
    ``l1 >= l2``, window of sd ``_EDGE_RHO``) of the start's luminance
    smoothed with sd ``_EDGE_SIGMA``. Computed in bands of about
    ``band_px`` pixels (bounded memory); ``steps()`` after each band.
    """
    from scipy.ndimage import gaussian_filter

    H, W = lum.shape
    lo, hi = _EDGE_COHERENCE
    weight = np.empty(int(np.count_nonzero(missing)), dtype=lum.dtype)
    done = 0
    for r0, r1, a, b in bands(H, W, band_px):
        if steps is not None:
            steps()
        m = missing[r0:r1]
        n = int(np.count_nonzero(m))
        if n == 0:
            continue
        j11, j12, j22 = (t[r0 - a:r1 - a][m] for t in _structure_tensor(
            gaussian_filter(lum[a:b], _EDGE_SIGMA, mode="nearest"), _EDGE_RHO))
        coh = np.sqrt((j11 - j22) ** 2 + 4 * j12 ** 2) / np.maximum(j11 + j22, np.finfo(lum.dtype).tiny)
        weight[done:done + n] = np.clip((hi - coh) / (hi - lo), 0.0, 1.0)
        done += n
    return weight


def _structure_tensor(img: np.ndarray, rho: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``skimage.feature.structure_tensor(img, sigma=rho, mode="nearest", order="rc")`` of a float image.

    Sobel derivatives, their products smoothed with sd ``rho``, as scikit-image
    computes them, from scipy.ndimage itself: importing ``skimage.feature``
    loads scipy.stats and scipy.spatial, most of a second of every first call.
    """
    from scipy.ndimage import gaussian_filter, sobel

    dr, dc = sobel(img, axis=0, mode="nearest"), sobel(img, axis=1, mode="nearest")
    return tuple(gaussian_filter(u * v, rho, mode="nearest") for u, v in ((dr, dr), (dr, dc), (dc, dc)))
