"""Heavy random pixel loss: the non-local denoiser iterated as the image's prior (plug-and-play).

Where most pixels are lost at random, every patch still holds a few known
pixels, and the image's repeats are best found by denoising the whole
estimate: each step runs :func:`restore._nonlocal.nonlocal_denoise` (the
library's non-local tree denoiser, both stages) on the current estimate at
a noise level that falls geometrically from step to step, and moves the
missing pixels towards its result; the known pixels are never changed (as
in Danielyan, Katkovnik and Egiazarian's BM3D-frames inpainting, 2012).
Colour images are denoised in an orthonormal colour basis whose first axis
is the grey axis (the luminance of :func:`.patches.luminance`), the
channels in groups matched on the luminance. How much of the steps'
change the result keeps is fitted by the caller on the held-out pixels
(see :mod:`.validation`): their error, measured after each step, is too
noisy to stop the steps on (on 90 % loss it rose for the first half of
them and fell below the start only in the second).
"""

from __future__ import annotations

import logging
import time

import numpy as np

from .._nonlocal import NonlocalSettings, nonlocal_denoise, nonlocal_steps
from .._progress import Steps
from .validation import clustering

__all__ = ["iterate_prior", "prior_steps", "wants_prior"]

log = logging.getLogger("restore.inpainting")

# share of missing pixels from which a mask no more clustered than chance (random loss) gets the iterated prior:
# with fewer, the patch passes see enough of each patch; the prior costs a few denoisings of the whole image
_MIN_MISSING = 0.5
_CLUSTERED = 0.5  # masks clustered beyond this (see clustering: text, scratches, blobs) never get it
_N_STEPS = 16  # denoisings: the held-out pixels' error still falls at 20 on 70 % loss, little after 12 on 90 %
# noise sd of the first and the last step, in units of the known pixels' peak: the first about the error of the
# passes' result over the whole image at 90 % loss; above, the first steps smooth texture away
_SIGMAS = (0.06, 0.01)
# each step moves the missing pixels this many times the denoiser's change: faster, and inside (0, 2), where relaxed
# steps of an averaged map converge. 1.8 against 1.5: +0.05 dB on 8 crops of random loss (4 photos, 70 and 90 %),
# +0.04 on the benchmark's default photos, in the same time; 2.0 +0.08 on the crops but at the edge (2.3: -0.04)
_RELAX = 1.8
# the denoiser's reference grids sparser than its defaults (stage 2 every 6 px, stage 1 every 8, were 3 and 4): a
# quarter of the work, and the steps' result is the same, as the next step's grid falls elsewhere on the estimate
_SETTINGS = NonlocalSettings(stride=6, stride1=8)


def prior_side() -> int:
    """The smallest side (pixels) of an image the prior can run on: its non-local patches'."""
    s = _SETTINGS.resolved(2)
    return max(s.patch, s.patch2)


def wants_prior(missing: np.ndarray) -> bool:
    """Whether the mask is heavy random loss (decided from the mask alone): the iterated prior pays there."""
    return (min(missing.shape) >= prior_side() and float(np.mean(missing)) >= _MIN_MISSING
            and clustering(missing) < _CLUSTERED)


def prior_steps(shape: tuple[int, int], n_channels: int) -> int:
    """Progress steps of :func:`iterate_prior` on an image of ``shape`` (H, W) and channels."""
    return _N_STEPS * nonlocal_steps(shape, _SETTINGS, n_channels)


def _colour_basis(n: int) -> np.ndarray:
    """An orthonormal basis (columns) of colour space whose first vector is the grey axis, ``1 / sqrt(n)``."""
    a = np.eye(n)
    a[:, 0] = 1.0
    q, _ = np.linalg.qr(a)
    return q * np.sign(q[0, 0])  # the first column positive: the luminance, not its negative


def iterate_prior(x: np.ndarray, missing: np.ndarray, peak: float, steps: Steps) -> np.ndarray:
    """The change the iterated denoiser makes to the missing pixels of ``x``: (n_missing, C), row-major order.

    ``x`` (H, W, C) float64 holds the known pixels and the current estimate
    of the missing ones (it is overwritten); ``peak`` > 0 is the known
    pixels' largest magnitude, the unit of the noise levels. ``steps`` counts
    :func:`prior_steps` in all; the callback may raise to stop.
    """
    H, W, C = x.shape
    per_step = nonlocal_steps((H, W), _SETTINGS, C)
    idx = np.flatnonzero(missing)
    q = _colour_basis(C)
    flat = x.reshape(-1, C)
    start = flat[idx].copy()
    t0 = time.perf_counter()
    for sigma in np.geomspace(*_SIGMAS, _N_STEPS) * peak:
        z = nonlocal_denoise(np.moveaxis(x @ q, -1, 0), None, np.full(C, sigma), settings=_SETTINGS, channels=True,
                             progress=steps.callback(per_step))
        den = np.moveaxis(z, 0, -1).reshape(-1, C)[idx] @ q.T
        del z
        cur = flat[idx]
        cur += _RELAX * (den - cur)
        flat[idx] = cur  # the known pixels are never written
    log.info("non-local prior: %d steps in %.2f s", _N_STEPS, time.perf_counter() - t0)
    return cur - start
