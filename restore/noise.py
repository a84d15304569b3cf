"""Photon noise: the generalized Anscombe transform, its exact unbiased inverse, and noise estimation.

Fluorescence images are photon counts seen through a camera: a pixel of
expected value ``x`` (image units) reads ``z = gain * p + n`` with ``p``
Poisson of mean ``x / gain`` photons and ``n`` Gaussian read noise of
standard deviation ``sigma``. Its variance grows with its mean,
``var(z) = gain * x + sigma**2`` (the noise-level function). The
generalized Anscombe transform makes that variance about 1 everywhere, so a
Gaussian denoiser applies; its exact unbiased inverse brings the estimate
back without the bias a plain algebraic inverse leaves at low counts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._config import NOISE_MODELS
from ._validation import check_choice

__all__ = ["NoiseEstimate", "anscombe", "estimate_noise", "inverse_anscombe"]


# ---------------------------------------------------------------------------
# The generalized Anscombe transform and its inverses
# ---------------------------------------------------------------------------


def anscombe(z: ArrayLike, gain: float, sigma: float) -> NDArray[np.float64]:
    r"""Generalized Anscombe transform: Poisson-Gaussian data to about unit-variance Gaussian data.

    Parameters
    ----------
    z : array_like
        Data, ``z = gain * Poisson(x / gain) + N(0, sigma**2)``.
    gain : float
        Image units per photon, > 0.
    sigma : float
        Standard deviation of the Gaussian read noise (image units), >= 0.

    Returns
    -------
    ndarray of float64
        ``f(z) = (2 / gain) * sqrt(max(gain * z + 3/8 gain**2 + sigma**2, 0))``,
        of the shape of ``z``.

    Notes
    -----
    The variance of ``f(z)`` is close to 1 from about 2 expected photons on;
    below that it is smaller (it tends to 0 with the counts), which is why
    the inverse must be the exact unbiased one [1]_.

    References
    ----------
    .. [1] M. Makitalo and A. Foi, "Optimal inversion of the generalized
       Anscombe transformation for Poisson-Gaussian noise", IEEE Trans.
       Image Processing 22(1), 91-103, 2013.
    """
    z = np.asarray(z, dtype=np.float64)
    return (2.0 / gain) * np.sqrt(np.maximum(gain * z + 0.375 * gain**2 + sigma**2, 0.0))


def inverse_anscombe(d: ArrayLike, gain: float, sigma: float, *, method: str = "exact") -> NDArray[np.float64]:
    r"""Exact unbiased inverse of :func:`anscombe`.

    Parameters
    ----------
    d : array_like
        A denoised estimate of ``E[anscombe(z)]``.
    gain, sigma : float
        As in :func:`anscombe`.
    method : {'exact', 'closed-form'}
        ``'exact'`` inverts ``lambda -> E[f(z) | lambda]`` computed
        numerically (a table per ``sigma / gain``, interpolated); below the
        smallest value that expectation takes (at zero photons) the result
        is 0. ``'closed-form'`` is the asymptotic approximation of [1]_,
        floored at 0.

    Returns
    -------
    ndarray of float64
        The estimate of the expected value ``x`` (image units).

    Notes
    -----
    In photon units (``u = sigma / gain``), ``E[f | lambda] = sum_k
    Poisson(k; lambda) E_t[2 sqrt(max(k + t + 3/8 + u**2, 0))]``, ``t`` Gaussian
    of variance ``u**2``. The closed form [1]_ is
    ``1/4 D**2 + 1/4 sqrt(3/2) / D - 11/8 / D**2 + 5/8 sqrt(3/2) / D**3 - 1/8 - u**2``;
    it is accurate from about ``D = 2`` (a few photons) up, but at lower
    ``D`` its ``1/D**3`` term turns it up again, so low counts need either
    the floor or the exact table. Dark backgrounds are such low counts.

    References
    ----------
    .. [1] M. Makitalo and A. Foi, "Optimal inversion of the generalized
       Anscombe transformation for Poisson-Gaussian noise", IEEE Trans.
       Image Processing 22(1), 91-103, 2013.
    """
    d = np.asarray(d, dtype=np.float64)
    u = sigma / gain
    if method == "closed-form":
        return gain * _closed_form(d, u)
    if method != "exact":
        raise ValueError(f"Invalid method: {method!r}; supported methods are exact, closed-form")
    lam_grid, e_grid = _exact_table(round(float(u), 6))
    out = _closed_form(d, u)
    low = d < e_grid[-1]
    out[low] = np.interp(d[low], e_grid, lam_grid)  # below e_grid[0] (zero photons): 0
    return gain * out


def _closed_form(d: np.ndarray, u: float) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        s = np.sqrt(1.5)
        inv = (0.25 * d**2 + 0.25 * s / d - 1.375 / d**2 + 0.625 * s / d**3 - 0.125 - u**2)
    return np.where(d > 0, np.maximum(inv, 0.0), 0.0)


# The exact table covers expected counts up to this many photons; above it the closed form is
# within 1e-4 photons of the exact inverse (tests/test_noise.py), so the two join smoothly.
_EXACT_MAX_PHOTONS = 100.0
_EXACT_POINTS = 600  # table points, denser at low counts where E[f] bends most


@lru_cache(maxsize=16)
def _exact_table(u: float) -> tuple[np.ndarray, np.ndarray]:
    """``(lambda, E[f | lambda])`` for read noise ``u`` (photon units), lambda from 0 to the table's end."""
    lam, e, _ = _moments_table(u)
    return lam, e


@lru_cache(maxsize=16)
def _moments_table(u: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(lambda, E[f | lambda], Var[f | lambda])`` for read noise ``u`` (photon units)."""
    from scipy.stats import poisson

    lam = np.concatenate([[0.0], np.geomspace(1e-3, _EXACT_MAX_PHOTONS, _EXACT_POINTS - 1)])
    k_max = int(_EXACT_MAX_PHOTONS + 12 * np.sqrt(_EXACT_MAX_PHOTONS) + 20)
    k = np.arange(k_max + 1, dtype=np.float64)
    if u > 0:
        # E over the Gaussian read noise of 2 sqrt(max(k + t + 3/8 + u^2, 0)), t ~ N(0, u^2): a fine grid in t
        t = np.linspace(-8.0, 8.0, 1601)
        w = np.exp(-0.5 * t**2)
        w /= w.sum()
        inside = np.maximum(k[:, None] + u * t[None, :] + 0.375 + u * u, 0.0)
        g = (2.0 * np.sqrt(inside)) @ w
        g2 = (4.0 * inside) @ w
    else:
        g = 2.0 * np.sqrt(k + 0.375)
        g2 = 4.0 * (k + 0.375)
    pmf = poisson.pmf(k[None, :], lam[:, None])
    e, e2 = pmf @ g, pmf @ g2
    var = np.maximum(e2 - e * e, 0.0)
    return lam, np.maximum.accumulate(e), var  # E is monotone in lambda (it is, up to rounding)


def _anscombe_variance(x: ArrayLike, gain: float, sigma: float) -> NDArray[np.float64]:
    """Variance of ``anscombe(z)`` for data of expected value ``x`` (image units).

    About 1 from about 2 expected photons on, it falls with the counts
    (at zero photons it is 0 without read noise, 0.13 with read noise of
    0.2 photons): the stabilised noise of dark places is far below 1.
    Above the exact table's end it is 1 (the transform's asymptote).
    """
    lam_grid, _, var = _moments_table(round(float(sigma / gain), 6))
    return np.interp(np.maximum(np.asarray(x, dtype=np.float64), 0.0) / gain, lam_grid, var, right=1.0)


# ---------------------------------------------------------------------------
# Noise estimation from the image: its noise-level function
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class NoiseEstimate:
    """Parameters of the noise of an image, as estimated or given.

    Attributes
    ----------
    noise : str
        ``"gaussian"`` or ``"poisson-gaussian"``.
    sigma : float
        Standard deviation of the Gaussian part (image units).
    gain : float or None
        Image units per photon (``"poisson-gaussian"`` only).
    """

    noise: str
    sigma: float
    gain: float | None = None

    def variance(self, mean: ArrayLike) -> NDArray[np.float64]:
        """The noise-level function: variance of a pixel of expected value ``mean``.

        Parameters
        ----------
        mean : array_like
            Expected pixel values, in image units (negative ones count as 0).

        Returns
        -------
        ndarray
            ``gain * mean + sigma**2``, of ``mean``'s shape.
        """
        m = np.asarray(mean, dtype=np.float64)
        return (self.gain or 0.0) * np.maximum(m, 0.0) + self.sigma**2


def estimate_noise(image: ArrayLike, *, noise: str = "poisson-gaussian",
                   progress: Callable[[int, int], None] | None = None) -> NoiseEstimate:
    """Estimate the noise of an image from itself: its noise-level function.

    Parameters
    ----------
    image : array_like
        A 2-D image or a stack of 2-D planes along leading axes (a volume),
        float. Integers are converted as :func:`skimage.util.img_as_float`
        does.
    noise : {'poisson-gaussian', 'gaussian'}
        The model: variance ``gain * mean + sigma**2``, or ``sigma**2``.
    progress : callable, optional
        ``progress(done, total)`` after each step of at most about 2**20
        samples of work (a few tens of milliseconds); it may raise (for
        instance :class:`restore.Cancelled`) to stop the estimate there.

    Returns
    -------
    NoiseEstimate

    Notes
    -----
    Following Foi et al. [1]_: on every plane, the finest diagonal wavelet
    band of an orthonormal Daubechies-2 transform holds mostly noise, and
    the approximation band (over 2, the filter's gain in 2-D), averaged over
    a window, the local mean. Only smooth places are used, where the local
    mean barely changes (its gradient below its median in the plane), so
    that image detail does not pass for noise. Those places are sorted into
    bins of equal width in their local mean; in each bin a robust variance
    of the detail coefficients (their mean square within 6 robust
    deviations of 0) is a point of the noise-level function; a line fitted
    to the points by weighted least squares (weights: count over variance
    squared) gives ``gain`` (slope, >= 0) and ``sigma**2`` (intercept,
    floored at 0). The model assumes the
    image's zero is zero photons (no camera offset).

    References
    ----------
    .. [1] A. Foi, M. Trimeche, V. Katkovnik, K. Egiazarian, "Practical
       Poissonian-Gaussian noise modeling and fitting for single-image
       raw-data", IEEE Trans. Image Processing 17(10), 1737-1754, 2008.
    """
    from skimage.util import img_as_float

    img = np.asarray(image)
    if img.dtype.kind not in "biuf":
        raise ValueError(f"image must be a real numeric array, got dtype {img.dtype}")
    if img.ndim < 2:
        raise ValueError(f"image must have at least 2 dimensions, got shape {img.shape}")
    check_choice("noise", noise, NOISE_MODELS, plural="noise models")
    img = np.asarray(img if img.dtype.kind == "f" else img_as_float(img), dtype=np.float64)
    planes = img.reshape(-1, *img.shape[-2:])
    steps = _Steps(progress, len(planes) * (1 + _plane_steps(img.shape[-2:])) + _N_BINS + 1)
    # fitted in units of the largest magnitude, scaled back: int64 images come in units of 2**-63
    scale = 0.0
    for p in planes:
        scale = max(scale, float(np.max(np.abs(p))) if p.size else 0.0)
        steps()
    scale = scale if np.isfinite(scale) and scale > 0 else 1.0
    est = _estimate_noise_unit(planes, scale, noise, steps)
    steps.finish()
    return replace(est, sigma=est.sigma * scale, gain=None if est.gain is None else est.gain * scale)


# Samples of work between two progress reports of the estimate, at most about (tens of milliseconds): Cancel
# acts within a tenth of a second
_STEP_SAMPLES = 1 << 20


class _Steps:
    """Counts the estimate's steps and reports each one to ``progress(done, total)`` (None: nothing)."""

    def __init__(self, progress: Callable[[int, int], None] | None, total: int) -> None:
        self.progress, self.total, self.done = progress, max(int(total), 1), 0

    def __call__(self) -> None:
        self.done = min(self.done + 1, self.total)
        if self.progress is not None:
            self.progress(self.done, self.total)

    def finish(self) -> None:
        """Report the end (steps skipped, such as a plane too small, are counted done)."""
        if self.done < self.total:
            self.done = self.total - 1
            self()


def _strips(n: int, other: int) -> int:
    """Pieces of about :data:`_STEP_SAMPLES` samples that ``n`` lines of ``other`` samples are cut into."""
    return max(1, min(n, -(-n * other // _STEP_SAMPLES)))


def _plane_steps(shape: tuple[int, ...]) -> int:
    """Progress steps of one plane in :func:`_smooth_samples`: the transform's strips, then three stages."""
    h, w = (int(shape[0]) // 2) * 2, (int(shape[1]) // 2) * 2
    return _strips(h, w) + _strips(w, h // 2) + 3


def _estimate_noise_unit(planes: np.ndarray, scale: float, noise: str, steps: _Steps) -> NoiseEstimate:
    """:func:`estimate_noise` of float64 planes, divided by ``scale`` to a magnitude of about 1."""
    means, dets = _smooth_samples(planes, scale, steps)
    if noise == "gaussian" or means.size < _MIN_SAMPLES:
        s = float(np.median(np.abs(dets)) / 0.6744897501960817) if dets.size else 0.0
        return NoiseEstimate("gaussian", s) if noise == "gaussian" else NoiseEstimate(noise, s, 0.0)
    gain, var0 = _fit_nlf(means, dets, steps)
    return NoiseEstimate(noise, float(np.sqrt(max(var0, 0.0))), float(gain))


_SMOOTH_QUANTILE = 0.5  # keep the smoother half of the places (local-mean gradient below its median)
_MEAN_WINDOW = 9  # side of the window averaging the approximation band into the local mean (18 pixels)
_N_BINS = 24  # bins of the local mean, each one point of the noise-level function
_MIN_SAMPLES = 2048  # fewer smooth samples than this: a plain median estimate of a constant variance
_MIN_BIN = 256  # fewer samples than this in a bin of the local mean: no point there
_RANGE_QUANTILE = 0.001  # bins span the local means between this quantile and its complement
_CLIP = 6.0  # robust deviations beyond which a detail coefficient is an outlier (a Gaussian keeps all but 2e-9)
_MAD = 0.6744897501960817  # median |N(0, 1)|


def _smooth_samples(planes: np.ndarray, scale: float, steps: _Steps) -> tuple[np.ndarray, np.ndarray]:
    """Local means and finest diagonal details at the smooth places of every plane (divided by ``scale``)."""
    from scipy import ndimage

    means, dets = [], []
    for p in planes:
        h, w = (p.shape[0] // 2) * 2, (p.shape[1] // 2) * 2
        if h < 4 or w < 4:
            continue
        a, d = _db2_bands(p[:h, :w], scale, steps)
        # the local mean must be far less noisy than the spread of means a bin spans, or bins mix levels
        m = ndimage.uniform_filter(a / 2.0, _MEAN_WINDOW, mode="reflect")
        steps()
        grad = np.hypot(ndimage.sobel(m, 0), ndimage.sobel(m, 1))
        steps()
        # the gradient of the local mean also carries noise: compare it within each plane
        keep = grad <= np.quantile(grad, _SMOOTH_QUANTILE)
        means.append(m[keep])
        dets.append(d[keep])
        steps()
    if not means:
        return np.empty(0), np.empty(0)
    return np.concatenate(means), np.concatenate(dets)


def _db2_bands(p: np.ndarray, scale: float, steps: _Steps) -> tuple[np.ndarray, np.ndarray]:
    """Approximation and diagonal detail bands of one level of db2 (periodic) of ``p / scale``.

    As ``pywt.dwt2``, one axis after the other, in strips of about
    :data:`_STEP_SAMPLES` samples with a report after each: one 4096 x 4096
    plane is a few tenths of a second of work, too long between reports.
    """
    import pywt

    h, w = p.shape
    rows = np.array_split(np.arange(h), _strips(h, w))
    lo, hi = [], []
    for r in rows:
        c = pywt.dwt(p[r[0]:r[-1] + 1] / scale, "db2", mode="periodization", axis=1)
        lo.append(c[0])
        hi.append(c[1])
        steps()
    lo, hi = np.concatenate(lo, axis=0), np.concatenate(hi, axis=0)
    cols = np.array_split(np.arange(w // 2), _strips(w // 2, h))
    a, d = [], []
    for c in cols:
        a.append(pywt.dwt(lo[:, c[0]:c[-1] + 1], "db2", mode="periodization", axis=0)[0])
        d.append(pywt.dwt(hi[:, c[0]:c[-1] + 1], "db2", mode="periodization", axis=0)[1])
        steps()
    return np.concatenate(a, axis=1), np.concatenate(d, axis=1)


def _fit_nlf(means: np.ndarray, dets: np.ndarray, steps: _Steps | None = None) -> tuple[float, float]:
    """Slope and intercept of the variance of ``dets`` against ``means``: a robust variance per bin, then a line."""
    lo, hi = np.quantile(means, [_RANGE_QUANTILE, 1 - _RANGE_QUANTILE])
    which = np.clip(((means - lo) / max(hi - lo, 1e-300) * _N_BINS).astype(np.int64), 0, _N_BINS - 1)
    mu, var, n = [], [], []
    for k in range(_N_BINS):
        if steps is not None:
            steps()
        d = dets[which == k]
        if d.size < _MIN_BIN:
            continue
        mu.append(means[which == k].mean())
        var.append(_robust_var(d))
        n.append(d.size)
    mu, var, n = np.array(mu), np.array(var), np.array(n, dtype=np.float64)
    if mu.size < 2:
        return 0.0, float(_robust_var(dets))
    gain, var0 = 0.0, float(np.median(var))
    for _ in range(3):  # weights from the fitted variance: iteratively reweighted least squares
        fit = np.maximum(gain * mu + var0, 1e-12 * max(var.max(), 1e-300))
        wts = n / fit**2
        A = np.stack([mu, np.ones_like(mu)], axis=1) * np.sqrt(wts)[:, None]
        gain, var0 = np.linalg.lstsq(A, var * np.sqrt(wts), rcond=None)[0]
        if gain < 0:  # variance that falls with the mean is no photon noise: constant model
            gain, var0 = 0.0, float(np.sum(wts * var) / np.sum(wts))
    return float(gain), float(var0)


def _robust_var(d: np.ndarray) -> float:
    """Variance of the values within ``_CLIP`` robust deviations of 0: unbiased for skewed low-count noise too.

    The median absolute value alone underestimates the spread of the skewed
    detail coefficients of a few photons; clipping at a few of its
    deviations only drops outliers (edges that passed the smoothness test).
    """
    s = np.median(np.abs(d)) / _MAD
    kept = d[np.abs(d) <= _CLIP * s]
    return float(np.mean(kept**2)) if kept.size else 0.0
