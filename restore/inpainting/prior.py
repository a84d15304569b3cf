"""Heavy random pixel loss: a Gaussian model of each group of similar patches, iterated (non-local Bayes).

Where most pixels are lost at random, every patch still holds a few known
pixels, and the patches that look alike in the current estimate share
their known pixels. Each step matches, for every reference patch of a grid
over the whole image, its ``k`` most similar patches in the estimate's
luminance (the project's block matcher, as the non-local passes use it),
models the group as a Gaussian (its mean and covariance, with a small ridge)
and replaces each patch's missing pixels by their conditional mean given
its known ones; the estimates of a pixel are averaged (a Gaussian window),
and the missing pixels move towards that average. The known pixels are never
changed; the next step matches on the new estimate. This is the Gaussian
conditional estimate of non-local Bayes and piecewise-linear estimation
(Lebrun, Buades and Morel 2013; Yu, Sapiro and Mallat 2012) with the
group's own statistics. Only the luminance (the grey axis of
:func:`.patches.luminance`) is refined: most of the error is there, and the
colour differences stay the estimate's. How much of the steps' change the
result keeps is fitted by the caller on the held-out pixels (see
:mod:`.validation`). The kernel is
:func:`restore._core_inpaint.conditional_groups`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import _core_inpaint
from .._config import default_num_threads
from .._nonlocal import run_ordered
from .._progress import Steps
from .grouping import chunk_reach, match_chunk
from .patches import known_sd
from .validation import clustering

__all__ = ["iterate_prior", "prior_side", "prior_steps", "wants_prior"]

log = logging.getLogger("restore.inpainting")

# share of missing pixels from which a mask no more clustered than chance (random loss) gets the iterated prior:
# with fewer, the patch passes see enough of each patch; the prior costs a few passes over the whole image
_MIN_MISSING = 0.5
_CLUSTERED = 0.5  # masks clustered beyond this (see clustering: text, scratches, blobs) never get it
_PATCH = 8  # patch side, px
_K = 48  # patches per group: 32 lost 0.25 dB on the benchmark's default photos, 16 lost 0.5 (the covariance's noise)
_HALF_WINDOW = 20  # the search window is 41 x 41 px: 21 x 21 lost 0.3 dB on the monarch (its repeats are far apart)
_STRIDE = 4  # step of the grid of reference patches, px
_N_STEPS = 6  # steps: the held-out pixels' error still falls after 5 on 70 % and 90 % loss
# each step moves the missing pixels this many times towards the groups' estimate: 1.5 against 1: +0.05 dB on the
# benchmark's default photos at 6 steps (faster to the same place)
_RELAX = 1.5
# ridge on the groups' covariance, in units of the known luminance's variance: the known pixels are exact, the
# model is not (48 patches for 64 pixels); 5 times more or 10 times less both lost 0.05 dB on the default photos
_RIDGE = 2e-3
_RIDGE_FLOOR = 1e-12  # ... at least this, in units of the known pixels' peak squared
_WINDOW_SD = 0.5  # sd of the Gaussian weights of a patch's pixels in the average, in patch sides
_CHUNK_REFS = 64  # reference patches per chunk: one progress step, some tens of milliseconds


def prior_side() -> int:
    """The smallest side (pixels) of an image the prior can run on: its patches'."""
    return _PATCH


def wants_prior(missing: np.ndarray) -> bool:
    """Whether the mask is heavy random loss (decided from the mask alone): the iterated prior pays there."""
    return (min(missing.shape) >= prior_side() and float(np.mean(missing)) >= _MIN_MISSING
            and clustering(missing) < _CLUSTERED)


def _axis_origins(n: int) -> np.ndarray:
    """Patch origins along an axis of ``n`` pixels: every ``_STRIDE``, and the last one, so every pixel is covered."""
    o = np.arange(0, n - _PATCH + 1, _STRIDE)
    return o if o[-1] == n - _PATCH else np.append(o, n - _PATCH)


def _references(shape: tuple[int, int]) -> np.ndarray:
    """Origins (n, 2) of the reference patches, row-major."""
    rr, cc = np.meshgrid(_axis_origins(shape[0]), _axis_origins(shape[1]), indexing="ij")
    return np.stack([rr.ravel(), cc.ravel()], axis=1).astype(np.int64)


def _n_chunks(shape: tuple[int, int]) -> int:
    return -(-len(_axis_origins(shape[0])) * len(_axis_origins(shape[1])) // _CHUNK_REFS)


def prior_steps(shape: tuple[int, int]) -> int:
    """Progress steps of :func:`iterate_prior` on an image of ``shape`` (H, W): a chunk of references each."""
    return _N_STEPS * _n_chunks(shape)


def iterate_prior(L: np.ndarray, missing: np.ndarray, peak: float, steps: Steps) -> np.ndarray:
    """Refine the missing pixels of the luminance ``L`` in place; returns their change (n_missing,), row-major.

    ``L`` (H, W) float64 holds the known pixels' luminance and the current
    estimate of the missing ones; ``peak`` > 0 is the known pixels' largest
    magnitude (the floor of the ridge's scale). ``steps`` counts
    :func:`prior_steps` in all; the callback may raise to stop.
    """
    idx = np.flatnonzero(missing)
    flat = L.reshape(-1)
    start = flat[idx]
    refs = _references(missing.shape)
    # the ridge in units of the known luminance's variance: the prior does the same on an image and on its
    # contrast scaled or offset (a bright, flat sky); the floor keeps the factorisation defined on a flat image
    ridge = max(_RIDGE * known_sd(L, missing) ** 2, _RIDGE_FLOOR * peak * peak)
    step = _Step(L, missing, ridge, steps)
    n_threads = default_num_threads()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(n_threads, thread_name_prefix="restore-inpaint") as pool:
        for _ in range(_N_STEPS):
            num, den = step.run(refs, pool, n_threads)
            np.divide(num, den, out=num)  # every pixel is in some patch: den > 0
            cur = flat[idx]
            cur += _RELAX * (num.reshape(-1)[idx] - cur)
            flat[idx] = cur  # the known pixels are never written
            del num, den, cur
            steps.tick()  # a chance to cancel between the steps' chunks
    log.info("non-local prior: %d steps in %.2f s (the groups' Gaussian model)", _N_STEPS, time.perf_counter() - t0)
    return flat[idx] - start


class _Step:
    """One step of :func:`iterate_prior` on the luminance ``L`` (refined in place by the caller)."""

    def __init__(self, L: np.ndarray, missing: np.ndarray, ridge: float, tick: Callable[[], None]) -> None:
        self.L, self.ridge, self.tick = L, ridge, tick
        self.known = np.ascontiguousarray(~missing).view(np.uint8)
        g = np.exp(-0.5 * ((np.arange(_PATCH) - (_PATCH - 1) / 2) / (_WINDOW_SD * _PATCH)) ** 2)
        self.win = np.ascontiguousarray(np.outer(g, g))
        # the luminance the patches are matched on, in float32 (the matcher's arithmetic: twice as many candidates
        # a vector instruction), copied at each step; 4 bytes a pixel
        self.L32 = np.empty(L.shape, dtype=np.float32)

    def run(self, refs: np.ndarray, pool: ThreadPoolExecutor, n_threads: int) -> tuple[np.ndarray, np.ndarray]:
        """The sums (H, W) of the groups' weighted estimates and of their weights, chunk by chunk in order."""
        np.copyto(self.L32, self.L)
        num = np.zeros(self.L.shape, dtype=np.float32)  # chunks add in float64 buffers; float32 sums: 16 MP
        den = np.zeros(self.L.shape, dtype=np.float32)

        def add(res):
            b0, b1, bnum, bden = res
            num[b0:b0 + bden.shape[0], b1:b1 + bden.shape[1]] += bnum
            den[b0:b0 + bden.shape[0], b1:b1 + bden.shape[1]] += bden
            self.tick()

        run_ordered(pool, (self.task(refs[i:i + _CHUNK_REFS]) for i in range(0, len(refs), _CHUNK_REFS)), add,
                    n_threads)
        return num, den

    def task(self, rs: np.ndarray) -> Callable[[], tuple]:
        """The chunk of references ``rs``: match, estimate, aggregate into its own buffers."""
        p = _PATCH
        b0, b1, e0, e1 = chunk_reach(rs, self.L.shape, p, _HALF_WINDOW)

        def run():
            n = len(rs)
            idx = match_chunk(self.L32, rs, p, _HALF_WINDOW, _K)
            X = np.empty((n, _K * p * p))
            Kn = np.empty(X.shape, dtype=np.uint8)
            _core_inpaint.gather_groups(self.L, self.known, idx, X, Kn)
            _core_inpaint.conditional_groups(X, Kn, _K, self.ridge)
            bnum = np.zeros((e0 - b0, e1 - b1))
            bden = np.zeros_like(bnum)
            _core_inpaint.aggregate(X, idx, self.win, np.ones(n), bnum, bden, b0, b1)
            return b0, b1, bnum, bden
        return run
