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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._config import NOISE_CHOICES
from ._validation import check_axes, check_channel_axis, check_choice

__all__ = ["NOISE_CHOICES", "NoiseEstimate", "anscombe", "estimate_noise", "inverse_anscombe", "noise_sample"]


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

    Made by :func:`estimate_noise`; callers may also make one from known
    values (``NoiseEstimate("poisson-gaussian", sigma, gain)``), which
    leaves the fields after ``gain`` at their defaults.

    Attributes
    ----------
    noise : str
        ``"gaussian"`` or ``"poisson-gaussian"`` (for ``noise="auto"``,
        the model chosen).
    sigma : float
        Standard deviation of the Gaussian part (image units): the whole
        noise for ``"gaussian"``, the read noise for ``"poisson-gaussian"``.
    gain : float or None
        Image units per photon (``"poisson-gaussian"`` only; 0.0 when the
        image shows no growth of its noise with its level).
    uncertain : bool
        True when the image does not determine the estimate well: too few
        smooth samples, too few levels left after leaving out clipped ones,
        clipping that reaches most of the image, or a noise-level function
        whose standard error exceeds half its value at the darkest or
        brightest level of the image (below one photon's variance, errors
        are not counted).
        :func:`estimate_noise` then also warns (``UserWarning``).
    sigma_se, gain_se : float or None
        Standard errors of ``sigma`` and ``gain`` (image units), from the
        fit and the scatter of its points; None when not estimated.
    note : str
        One line on how the model was chosen or why the estimate is
        uncertain (empty when there is nothing to say), for logs and
        messages.
    sigma_max : float or None
        When the image does not determine the read noise (``"poisson-gaussian"``
        whose fitted read-noise variance is less than 2 standard errors above
        0: photon noise outweighs it at every level measured, or the dark
        places that would show it are clipped), the largest read noise the
        image allows (image units); ``sigma`` is then only the fit's best
        value. None when the read noise is determined, or not estimated.
    """

    noise: str
    sigma: float
    gain: float | None = None
    uncertain: bool = False
    sigma_se: float | None = None
    gain_se: float | None = None
    note: str = ""
    sigma_max: float | None = None

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

    def describe(self, scale: float = 1.0) -> str:
        """One line for a log, a command line or a widget: the model, its parameters, how sure.

        Parameters
        ----------
        scale : float, default 1.0
            Units of the numbers shown per image unit (for instance 65535
            for a uint16 image estimated as :func:`skimage.util.img_as_float`
            reads it): ``sigma`` and ``gain`` are multiplied by it.

        Returns
        -------
        str
            For example ``"Poisson-Gaussian noise: gain 20.1 per photon,
            read noise sigma 812"`` (with ``" (not determined by the image:
            at most 1.2e+03)"`` when it is not, see :attr:`sigma_max`)
            followed by ``"; "`` and :attr:`note` when there is one.
        """
        if self.noise == "poisson-gaussian":
            text = (f"Poisson-Gaussian noise: gain {(self.gain or 0.0) * scale:.4g} per photon, "
                    f"read noise sigma {self.sigma * scale:.4g}")
            if self.sigma_max is not None:
                text += f" (not determined by the image: at most {self.sigma_max * scale:.4g})"
        else:
            text = f"Gaussian noise: sigma {self.sigma * scale:.4g}"
        if self.uncertain and "uncertain" not in self.note:
            text += " (uncertain)"
        return f"{text}; {self.note}" if self.note else text


def estimate_noise(image: ArrayLike, *, noise: str = "auto",
                   progress: Callable[[int, int], None] | None = None) -> NoiseEstimate:
    """Estimate the noise of an image from itself: its noise-level function, and which model it follows.

    Parameters
    ----------
    image : array_like
        A 2-D image or a stack of 2-D planes along leading axes (a volume),
        real. Integers are converted as :func:`skimage.util.img_as_float`
        does (the estimate is then in those units: multiply by 255 for
        uint8, 65535 for uint16). Each plane (the last two axes) must be at
        least 8 x 8 pixels.
    noise : {'auto', 'gaussian', 'poisson-gaussian'}, default 'auto'
        The model: variance ``sigma**2`` (``'gaussian'``), or
        ``gain * mean + sigma**2`` (``'poisson-gaussian'``), or whichever
        the image's noise-level function shows (``'auto'``; see Notes).
    progress : callable, optional
        ``progress(done, total)`` after each step of at most about 2**20
        samples of work (a few tens of milliseconds); it may raise (for
        instance :class:`restore.Cancelled`) to stop the estimate there.

    Returns
    -------
    NoiseEstimate
        With ``noise='auto'``, the chosen model and the same parameters as
        asking for that model directly; :attr:`NoiseEstimate.note` says
        why it was chosen.

    Warns
    -----
    UserWarning
        When the estimate is uncertain (:attr:`NoiseEstimate.uncertain`).

    Raises
    ------
    ValueError
        For a non-numeric, empty, 1-D or non-finite image, planes smaller
        than 8 x 8, or an unknown ``noise``.

    Notes
    -----
    Following Foi et al. [1]_: on every plane, the finest diagonal wavelet
    band of an orthonormal Daubechies-2 transform holds mostly noise, and
    the approximation band (over 2, the filter's gain in 2-D), averaged over
    a window, the local mean. Only smooth places are used, where the local
    mean barely changes (its gradient in the lowest quarter of the plane's,
    and of its level's where the plane's smoothest quarter misses a level,
    as the bright spots of fluorescence), so that image detail does not
    pass for noise.

    *Gaussian*: the unclipped places are cut into blocks of 16 x 16 (32 x
    32 pixels); ``sigma`` is the 10th percentile of the blocks' robust
    deviations (median absolute detail over 0.6745), over its value on pure
    noise: the quietest blocks, with neither edges nor texture. Blocks
    under a quarter of the median deviation (flat areas at a level that is
    not clipped) are left out. Under 16 blocks, the robust deviation of the
    smooth places' details.

    *Poisson-Gaussian*: the places are sorted into bins of equal width in
    their local mean (sparse bins merged with the next); in each, a robust
    variance of the detail coefficients (their mean square within 3 robust
    deviations of 0, over 0.973, what that cut leaves of a Gaussian's) is a
    point of the noise-level function. A line fitted to the points by
    weighted least squares (weights: count over twice the variance squared,
    lowered as Huber's for points over 2 standard errors off the line)
    gives ``gain`` (slope, >= 0) and ``sigma**2`` (intercept, floored at
    0). The points are measured again, up to 4 times, each with its cut
    at least 3 times the deviation the line fitted before gives its level:
    below a photon per pixel photon noise comes as rare large values that a
    cut at the read noise's deviation drops. The line's covariance, inflated by the points' scatter about the
    line when that exceeds sampling noise, gives the standard errors. The
    model assumes the image's zero is zero photons (no camera offset).

    *Clipping*: the image's minimum (maximum) is a clipping level when
    values pile up on it (an offset removed below 0, saturation): at least
    one value in 1000, and 10 times as many as on the next value.
    Continuous noise reaches its extreme once; integer data about as often
    as the next value. Clipping shrinks the variance of places near it, so
    both models leave out the places whose window (the local mean's) holds
    a clipped value; when that leaves too few samples, those with up to
    2%, 10%, then 30% of clipped values are kept (the last: uncertain).
    The places left out at the dark end are the ones that show the read
    noise: *Poisson-Gaussian* fits it to them under the model clipped
    there (the share of their values clipped and their mean, given the
    gain), on the darkest half of them, whose windows hold the least
    light. When they do not fit that model (for instance zero photons
    below the clip: a camera offset removed too far) or are too few, the
    read noise comes from the line alone.

    *Read noise not determined*: when its variance is less than 2
    standard errors above 0 (photon noise outweighs it at every level
    measured, or clipping hides the places that would show it),
    :attr:`NoiseEstimate.sigma_max` bounds it (the line's intercept plus
    3 standard errors, at most the least variance a point measures; with
    clipping at the dark end, which bends the line, the points alone) and
    :meth:`NoiseEstimate.describe` shows that bound; when at least 10% of
    the values are clipped at the dark end the estimate is then uncertain.

    *Choice* (``'auto'``): Poisson-Gaussian when the fitted slope is at
    least 4 standard errors above 0 (the variance grows with the level,
    beyond what texture and sampling explain) and the fitted variance at
    the image's brightest level is at least 1.5 times the one at its
    darkest (the noise deviation changes by more than 22% across the
    image, which a single sigma would not serve); also when being wrong
    would cost more: the slope at least 3 standard errors above 0, and its
    low end (2 standard errors below it) still making the variance grow
    5-fold across the image (Gaussian would misjudge the noise deviation
    by over 2x at one end; few bright places, such as sparse spots, leave
    a slope fewer standard errors); else Gaussian. An image
    of one level (no structure) is Gaussian: its variance is the same
    everywhere, whatever its cause. ``benchmarks/calibrate_noise_auto.py``
    measures how often this choice is right.

    References
    ----------
    .. [1] A. Foi, M. Trimeche, V. Katkovnik, K. Egiazarian, "Practical
       Poissonian-Gaussian noise modeling and fitting for single-image
       raw-data", IEEE Trans. Image Processing 17(10), 1737-1754, 2008.
    """
    est = _estimate(image, noise, progress)
    if est.uncertain:
        import warnings

        warnings.warn(f"The noise estimate is uncertain: {est.describe()}", UserWarning, stacklevel=2)
    return est


def _estimate(image: ArrayLike, noise: str, progress: Callable[[int, int], None] | None) -> NoiseEstimate:
    """:func:`estimate_noise` without its warning."""
    from skimage.util import img_as_float

    img = np.asarray(image)
    if img.dtype.kind not in "biuf":
        raise ValueError(f"image must be a real numeric array, got dtype {img.dtype}")
    if img.ndim < 2:
        raise ValueError(f"image must have at least 2 dimensions, got shape {img.shape}")
    check_choice("noise", noise, NOISE_CHOICES, plural="noise models")
    if min(img.shape[-2:]) < _MIN_SIDE or img.size == 0:
        raise ValueError(f"image must have planes (its last two axes) of at least {_MIN_SIDE} x {_MIN_SIDE} "
                         f"pixels to estimate its noise from, got shape {img.shape}")
    img = np.asarray(img if img.dtype.kind == "f" else img_as_float(img), dtype=np.float64)
    planes = img.reshape(-1, *img.shape[-2:])
    strips = _strip_slices(*img.shape[-2:])
    steps = _Steps(progress, len(planes) * (len(strips) + _plane_steps(img.shape[-2:])) + _N_BINS + 1)
    # fitted in units of the largest magnitude, scaled back: int64 images come in units of 2**-63
    scale = 0.0
    ends = []  # per strip of a plane, the two lowest values of p and of -p with their counts (the clipping levels)
    for p in planes:
        for rows in strips:
            part = p[rows]
            top = float(np.max(np.abs(part)))
            if not np.isfinite(top):
                raise ValueError("image must hold finite values to estimate its noise from, got NaN or inf")
            scale = max(scale, top)
            ends.append((_lowest_two(part), _lowest_two(-part)))
            steps()
    scale = scale if scale > 0 else 1.0
    est = _estimate_noise_unit(planes, scale, _clip_levels(ends, planes.size), noise, steps)
    steps.finish()

    def back(v: float | None) -> float | None:
        return None if v is None else v * scale

    est = replace(est, sigma=est.sigma * scale, gain=back(est.gain), sigma_se=back(est.sigma_se),
                  gain_se=back(est.gain_se), sigma_max=back(est.sigma_max))
    return est


# ---------------------------------------------------------------------------
# Gaussian noise: the one estimator of its deviation
# ---------------------------------------------------------------------------


def gaussian_sigma(planes: np.ndarray) -> float:
    """The deviation of white Gaussian noise in 2-D planes stacked along leading axes, all of them together.

    :func:`estimate_noise`'s Gaussian model (the details' robust deviation
    in the quietest blocks of unclipped places); planes under 8 x 8
    pixels, too small for it, the median absolute detail of the finest
    diagonal band of all of it. :func:`restore.estimate_sigma` and the
    denoisers' Gaussian model read the noise with it.

    Parameters
    ----------
    planes : ndarray
        Real, finite, of at least 2 dimensions, in image units (float).

    Returns
    -------
    float
        The estimate, in ``planes``' units.
    """
    if min(planes.shape[-2:]) >= _MIN_SIDE:  # no warning per plane and channel of a denoiser's call
        return float(_estimate(planes, "gaussian", None).sigma)
    import pywt

    flat = np.asarray(planes, dtype=np.float64).reshape(-1, *planes.shape[-2:])
    detail = np.concatenate([pywt.dwt2(p, "db2", mode="symmetric")[1][2].ravel() for p in flat])
    return float(np.median(np.abs(detail)) / _MAD)


#: Voxels (of one channel) of the central part of an image the noise is estimated on, in memory or lazy: 32 MB as
#: float64, held while the image is denoised, and its estimate's working memory (about 3 times that) before; about a
#: million finest diagonal coefficients, far more smooth samples than the estimators need; reading more delays
#: the call's first step (and the napari preview's final answer) for no better estimate.
ESTIMATE_VOXELS = 1 << 22


def noise_sample(image: Any, *, axes: Sequence[int] | None = None, channel_axis: int | None = None) -> np.ndarray:
    """The part of an image the library estimates its noise model on, read into memory.

    ``estimate_noise(noise_sample(image, axes=axes, channel_axis=channel_axis))``
    is the estimate :func:`restore.denoise_wavelet_tree` and
    :func:`restore.denoise_nonlocal_tree` make of ``image`` with those
    ``axes`` and ``channel_axis``: the model ``noise='auto'`` chooses, and
    the gain and read noise of Poisson-Gaussian noise when not given. The
    command line and the napari plugin estimate on the same part.

    Parameters
    ----------
    image : ndarray or dask.array.Array
        An image in memory, or a lazy one (Dask, or any array with
        ``shape`` and NumPy slicing, such as a zarr array).
    axes : sequence of int, optional
        Its spatial axes denoised together: two (planes) or three
        (volumes). Default: the last two axes that are not the channel axis.
        Other axes stack planes (or volumes).
    channel_axis : int, optional
        Axis of the channels; all of them are sampled.

    Returns
    -------
    ndarray
        In the image's dtype, in the layout :func:`estimate_noise` reads:
        the channels first, then the stacking axes, the spatial axes last.
        An image of at most 2**22 voxels a channel in memory is returned
        whole (a view). Of a larger one, and of a lazy array, only a central
        part of at most 2**22 voxels a channel is read: whole planes of the last two spatial axes when they
        fit (else their central 2048 x 2048 pixels), as many of them around
        the middle of a third spatial axis as fit, and the middle index of
        every stacking axis; so a few chunks, never more.

    Raises
    ------
    ValueError
        For an invalid ``axes`` or ``channel_axis``.

    See Also
    --------
    estimate_noise : the estimate made on the sample.
    """
    shape = tuple(int(s) for s in image.shape)
    ndim = len(shape)
    c_axis = check_channel_axis(channel_axis, max(ndim, 1))
    spatial = check_axes(axes, ndim, c_axis)
    in_memory = isinstance(image, np.ndarray)
    index: list[Any] = [slice(None)] * ndim
    per_channel = int(np.prod([n for a, n in enumerate(shape) if a != c_axis], dtype=np.int64))
    if in_memory and per_channel <= ESTIMATE_VOXELS:
        part = image
    else:
        index = [slice(None) if a == c_axis else s // 2 for a, s in enumerate(shape)]  # stacking axes: the middle
        budget = ESTIMATE_VOXELS
        for a in spatial[-2:]:  # the estimators read planes of the last two spatial axes: whole ones when they fit
            side = min(shape[a], int(np.sqrt(ESTIMATE_VOXELS)))
            start = (shape[a] - side) // 2
            index[a] = slice(start, start + side)
            budget //= side
        for a in spatial[:-2]:
            side = max(1, min(shape[a], budget))
            start = (shape[a] - side) // 2
            index[a] = slice(start, start + side)
            budget = max(1, budget // side)
        part = image[tuple(index)]
        part = part.compute() if hasattr(part, "compute") else part
    # the channels first, the spatial axes last (their planes are what the estimate reads)
    kept = [a for a in range(ndim) if not isinstance(index[a], int)]
    first = [a for a in kept if a == c_axis] + [a for a in kept if a != c_axis and a not in spatial]
    return np.transpose(np.asarray(part), [kept.index(a) for a in first + list(spatial)])


# Samples a strip-wise stage of the estimate (extremes, transform) reads between two progress reports: tens of
# milliseconds each, short beside the whole-plane stages, so that Cancel waits on those alone
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


def _strip_slices(n: int, other: int) -> list[slice]:
    """The :func:`_strips` of ``n`` lines of ``other`` samples, as slices of the lines, in order."""
    return [slice(r[0], r[-1] + 1) for r in np.array_split(np.arange(n), _strips(n, other))]


def _plane_steps(shape: tuple[int, ...]) -> int:
    """Progress steps of one plane in :func:`_smooth_samples`: the transform's strips, then three stages."""
    h, w = (int(shape[0]) // 2) * 2, (int(shape[1]) // 2) * 2
    return _strips(h, w) + _strips(w, h // 2) + 3


_WAVELET = "db2"  # two vanishing moments: the finest diagonal band of a smooth place holds noise alone
_MIN_SIDE = 8  # pixels: a smaller plane leaves a detail band of under 4 x 4, less than one window of local mean
_SMOOTH_QUANTILE = 0.25  # keep the smoothest quarter of the places (local-mean gradient below its lower quartile)
# Groups of equal count by level in which a plane's places are ranked again when the plane-wide smoothest quarter
# holds under 5% of a group (levels found only in structure, such as bright spots on a dark background): the
# group's own smoothest quarter joins, so that the noise-level function has points at those levels too
_LEVEL_GROUPS = 32
_SPARSE = 0.05
# Gaussian noise: the details' robust deviation in blocks of this many places a side (32 pixels), read at their
# quantile _BLOCK_QUANTILE (the quietest blocks), over its value on pure noise (_BLOCK_BIAS), from _MIN_BLOCKS blocks
_BLOCK = 16
_BLOCK_QUANTILE = 0.1
_BLOCK_BIAS = 0.909  # the 10th percentile of 16 x 16 blocks' robust deviations of pure unit noise
_MIN_BLOCKS = 16
# Blocks whose deviation is under this share of the blocks' median hold no noise (flat areas at a level that is not
# clipped): white noise's block deviations stay within a few tens of percent of each other
_FLAT_SHARE = 0.25
_MEAN_WINDOW = 9  # side of the window averaging the approximation band into the local mean (18 pixels)
_N_BINS = 24  # bins of the local mean, each one point of the noise-level function (sparse ones merged)
_MIN_SAMPLES = 1024  # fewer smooth samples than this: no line is fitted (the Gaussian estimate, gain 0)
_MIN_BIN = 128  # samples a point of the noise-level function needs: its variance then has a 12.5% standard error
_RANGE_QUANTILE = 0.001  # bins (and the image's levels) span the local means between this quantile and its complement
# Robust deviations beyond which a detail coefficient is an outlier (structure that passed the smoothness test);
# the mean square of the rest is divided by what that cut leaves of a Gaussian's variance (0.973)
_CLIP = 3.0
# Passes of the noise-level function in which each bin's cut is at least _CLIP times the fitted line's deviation
# there (the line from the pass before): at under a photon per pixel, photon noise comes as rare large details that
# a cut at the bin's median deviation (the read noise's) leaves out, bending the line down at the dark levels and
# scattering its points. The cut widens as the line rises, a little less each pass: 4 passes
_FLOOR_ROUNDS = 4


def _kept_share(c: float) -> float:
    """E[x**2 | |x| <= c] for x ~ N(0, 1): what cutting at ``c`` leaves of a Gaussian's variance."""
    from math import erf, exp, pi, sqrt

    return 1.0 - 2.0 * c * exp(-0.5 * c * c) / sqrt(2 * pi) / erf(c / sqrt(2))


_CLIP_KEPT = _kept_share(_CLIP)
_MAD = 0.6744897501960817  # median |N(0, 1)|
_MAD_SE = 1.166  # standard error of a median-absolute-deviation sigma, times sqrt(n) / sigma (Gaussian samples)
# A share of the values on the image's minimum (maximum), and a multiple of the count on the nearest other value,
# from which that level is taken for clipped: one value in 1000, 10 times its neighbour (Poisson zeros of a
# background of 0.1 photons reach 10; clipped read noise far more)
# Shares of clipped values a place's window may hold, tried in turn until enough smooth samples remain: none
# (clipping has not touched the place), then up to 2%, 10% (the variance of a Gaussian clipped 1.3 deviations from
# its mean shrinks by a quarter, its median deviation far less), 30% (uncertain)
_CLIPPED_SHARES = (0.0, 0.02, 0.1, 0.3)
_PILE_SHARE = 1e-3
_PILE_RATIO = 10.0
# The choice of 'auto': the slope's standard errors above 0 needed to call the noise Poisson-Gaussian. Texture
# that passes for noise scatters the points, which the standard error takes in; 4 keeps chance out (3e-5 one-sided)
_Z_PHOTON = 4.0
# ... and the ratio of the fitted variance at the brightest level of the image to the darkest: below 1.5 the noise
# deviation changes by under 22% across the image, and a single sigma serves it about as well
_RATIO_PHOTON = 1.5
# ... or, when being wrong costs more: a slope at least 3 standard errors above 0 (1e-3 one-sided) whose low end
# (2 standard errors below it) still makes the variance grow 5x across the image's levels. Gaussian would then
# misjudge the noise deviation by over 2x at one end (bright places left noisy, or dark ones smoothed away), while
# texture that passes for noise in a photograph grows the variance about 1.5x at that low end where its slope is
# 3-4 standard errors (3.6x at most where it is more; benchmarks/calibrate_noise_auto.py's Gaussian photographs)
_Z_PHOTON_LARGE = 3.0
_LOW_SE = 2.0
_RATIO_LARGE = 5.0
# Standard error of the noise-level function (relative to its value, at the image's darkest and brightest levels)
# above which the estimate is uncertain: a noise variance known to no better than +-50%
_UNCERTAIN = 0.5
_IRLS_ROUNDS = 6  # reweightings of the line fit (weights from the fitted variance and the residuals)
_HUBER = 2.0  # standard errors off the line beyond which a point's weight falls (as 2 / its distance)
_MIN_POINTS = 3  # points of the noise-level function needed to check a line against them (fewer: uncertain)
# Places clipped at the dark end are modelled (:func:`_censored_read_noise`) while at most this share of their
# window is clipped: beyond, the few values left tell little
_CENSORED_MAX = 0.9
# ... and of those, the share most clipped (the darkest) that the read noise is fitted on: windows of less clipping
# hold more light, whose photon noise hides the read noise, and more often straddle an edge, where a window mixes
# levels and the share clipped (not linear in the level) no longer tells its mean level
_CENSORED_DARKEST = 0.5
# Share of the values clipped at the dark end from which a read noise not determined makes the estimate uncertain:
# a tenth of the image is then darker than the clip, and its level and noise there are the read noise's. Fewer
# clipped values (scattered zeros of a dim background) leave the denoising of the image to the levels measured
_DARK_UNCERTAIN = 0.1
# The read noises (photons) the clipped places are fitted over, and the grid's points (geometric, 4% apart)
_READ_PHOTONS = (0.01, 100.0)
_READ_GRID = 240
# The clipped places' fit is rejected (the read noise then not determined by them) when their groups scatter about
# it this many times as much as sampling explains (in variance): the model does not hold, as when zero photons
# are not 0 (a camera offset removed too far: such data scatter 40x, the model's 0.4-3x)
_READ_MISFIT = 10.0
# ... or when even its darkest group has more photon variance (photons) than this many times the read noise's: the
# read noise then barely shapes the clipped values, and windows that mix levels decide the fit (a dim background of
# a photon or two, 500 counts per photon, read noise 100: 320 fitted)
_READ_DOMINANT = 1.0
# Relative standard error the clipped places' read noise has at least, whatever their number: windows that mix
# levels bias it by a few percent (3-13% on the clipped tests' volumes)
_READ_MODEL_SE = 0.05
# The read noise is determined when its variance (the line's intercept) stands this many standard errors above 0;
# below, the image allows any read noise from 0 to a bound (photon noise outweighs it at every level measured)
_READ_Z = 2.0
# ... that bound: the intercept's value plus this many standard errors (3: the intercept comes out low, by about
# one standard error, where low counts skew the points of the darkest levels), and at most what a point measures
_READ_BOUND_Z = 3.0


def _estimate_noise_unit(planes: np.ndarray, scale: float, clip: tuple[float, float], noise: str,
                         steps: _Steps) -> NoiseEstimate:
    """:func:`estimate_noise` of float64 planes, divided by ``scale`` to a magnitude of about 1.

    ``clip``: the levels where the planes' values are clipped (-inf, inf
    where they are not), in the planes' units.
    """
    means, dets, levels, left_out, allowed, cens, quiet = _smooth_samples(planes, scale, clip, steps)
    levels = (max(levels[0], clip[0] / scale), min(levels[1], clip[1] / scale))
    clipped = ""
    if left_out >= 0.005:
        clipped = (f"{100 * left_out:.0f}% of the image's places, near clipped values, left out"
                   + (f" (those with over {100 * allowed:.0f}% of clipped values)" if allowed > 0 else ""))
    if allowed >= _CLIPPED_SHARES[-1]:
        clipped = _join("uncertain: clipping reaches most of the image", clipped)
    gauss = _gaussian(dets, clipped, quiet)
    if noise == "gaussian":
        return gauss
    if means.size < _MIN_SAMPLES:
        why = f"only {means.size} smooth samples (at least {_MIN_SAMPLES} needed to fit a gain)"
        if noise == "poisson-gaussian":
            return NoiseEstimate(noise, gauss.sigma, 0.0, True, gauss.sigma_se, None,
                                 _join(f"uncertain: {why}", clipped))
        return replace(gauss, note=_join(f"Gaussian chosen: {why}", gauss.note))
    points = _nlf_points(means, dets, steps)
    fit = _fit_points(*points, dets)
    for _ in range(_FLOOR_ROUNDS):
        if not (fit.gain > 0 and fit.points >= _MIN_POINTS):
            break
        # again, each bin's outliers cut at the line's deviation there when the bin's own is less (see _robust_var)
        points = _nlf_points(means, dets, floor=fit)
        fit = _fit_points(*points, dets)
    # the read noise also from the places clipped at the dark end, modelled: they are the ones that show it
    read = _censored_read_noise(cens, clip[0] / scale, fit.gain) if len(cens) else None
    dark = float(np.mean(planes == clip[0])) if np.isfinite(clip[0]) else 0.0
    pg = fit.estimate(levels, clipped, dark=dark, read=read)
    if noise == "poisson-gaussian":
        return pg
    # 'auto'
    if fit.points < _MIN_POINTS:
        return replace(gauss, note=_join("Gaussian chosen: the image has too few levels (or too few unclipped "
                                         "ones) to show whether its noise grows with its level", gauss.note))
    z, ratio = fit.z(), fit.ratio(levels)
    # the variance ratio the slope allows at its low end: how much Gaussian would miss, with little doubt
    low = replace(fit, gain=fit.gain - _LOW_SE * np.sqrt(max(fit.cov[0, 0], 0.0))).ratio(levels)
    if (z >= _Z_PHOTON and ratio >= _RATIO_PHOTON) or (z >= _Z_PHOTON_LARGE and low >= _RATIO_LARGE):
        grows = (f"grows {ratio:.3g}x from the darkest level to the brightest" if np.isfinite(ratio)
                 else "grows from about 0 at the darkest level")
        return replace(pg, note=_join(f"Poisson-Gaussian chosen: the noise variance {grows} (slope {z:.1f} standard "
                                      "errors above 0)", pg.note))
    if z < _Z_PHOTON:
        why = f"the noise variance does not grow clearly with the level (slope {z:.1f} standard errors from 0)"
    else:
        why = f"the noise variance grows only {ratio:.3g}x from the darkest level to the brightest"
    return replace(gauss, note=_join(f"Gaussian chosen: {why}", gauss.note))


def _join(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


def _gaussian(dets: np.ndarray, clipped: str, quiet: np.ndarray) -> NoiseEstimate:
    """The Gaussian model: the low quantile of the blocks' robust deviations ``quiet``, else of all the details.

    Texture whose local mean is flat (fur, foliage) passes the smooth
    places' test and adds to their details' deviation at low noise; the
    quietest blocks are those with neither texture nor edges. Blocks under
    :data:`_FLAT_SHARE` of the median hold no noise and are left out. With fewer
    than :data:`_MIN_BLOCKS` blocks, the details' median absolute value
    over 0.6745.
    """
    n = int(dets.size)
    if quiet.size:  # blocks without noise (flat padding, a label, a rendered background) are not the quietest
        quiet = quiet[quiet >= _FLAT_SHARE * np.median(quiet)]
    if quiet.size >= _MIN_BLOCKS:
        s = float(np.quantile(quiet, _BLOCK_QUANTILE) / _BLOCK_BIAS)
    else:
        s = float(np.median(np.abs(dets)) / _MAD) if n else 0.0
    se = _MAD_SE * s / np.sqrt(max(n, 1))
    # the variance's relative error is twice the deviation's
    uncertain = n == 0 or 2 * se > _UNCERTAIN * s
    why = f"uncertain: only {n} smooth samples away from clipped values" if uncertain else ""
    note = _join(why, clipped)
    return NoiseEstimate("gaussian", s, None, note.startswith("uncertain"), se, None, note)


def _lowest_two(p: np.ndarray) -> tuple[float, int, float, int]:
    """The lowest value of ``p`` and how often it occurs, then the next lowest and how often (inf, 0: none)."""
    low = float(np.min(p))
    at = p == low
    rest = p[~at]
    if not rest.size:
        return low, int(p.size), np.inf, 0
    nxt = float(np.min(rest))
    return low, int(np.count_nonzero(at)), nxt, int(np.count_nonzero(rest == nxt))


def _clip_levels(ends: list, size: int) -> tuple[float, float]:
    """The image's minimum and maximum where values pile up (clipped), else -inf and inf.

    ``ends``: per part of the image (a strip of a plane), :func:`_lowest_two`
    of the part and of its negative; ``size``: the number of values. A
    level is clipped when at least :data:`_PILE_SHARE` of the values lie on
    it and :data:`_PILE_RATIO` times as many as on the nearest other value:
    continuous noise reaches its extreme once, integer counts (photon
    counts without read noise included) about as often as the values next
    to it, clipped noise far more often.
    """
    out = []
    for side, sign in ((0, 1.0), (1, -1.0)):  # the minimum, then the maximum as the minimum of -planes
        stats = [e[side] for e in ends]
        level = min(s[0] for s in stats)
        at = sum(s[1] for s in stats if s[0] == level)
        nxt = min(min(v for v in (s[0], s[2]) if v > level) if max(s[0], s[2]) > level else np.inf
                  for s in stats)
        near = sum(s[1] if s[0] == nxt else s[3] if s[2] == nxt else 0 for s in stats)
        if not np.isfinite(nxt):  # one value only: a constant image, nothing clipped (and no noise)
            return -np.inf, np.inf
        piled = at >= _PILE_SHARE * size and at >= _PILE_RATIO * max(near, 1)
        out.append(sign * level if piled else -sign * np.inf)
    return out[0], out[1]


def _smooth_samples(planes: np.ndarray, scale: float, clip: tuple[float, float], steps: _Steps
                    ) -> tuple[np.ndarray, np.ndarray, tuple[float, float], float, float, np.ndarray, np.ndarray]:
    """Local means and finest diagonal details at the smooth, unclipped places of every plane (over ``scale``).

    Also the range of the local means of all places (the image's darkest
    and brightest levels, quantiles :data:`_RANGE_QUANTILE` of each plane),
    the share of places left out because too many values of their window
    lie on a clipping level of ``clip``, and the share of clipped values a
    window was allowed (the first of :data:`_CLIPPED_SHARES` that leaves
    enough samples: clipping shrinks the variance of places near it, the
    more the more of their values it takes). Last, the smooth places left
    out that way, clipped at the dark end, as rows of their window's share
    of values clipped there and its mean value (over ``scale``), for
    :func:`_censored_read_noise`. Then the details' robust deviation in each
    block of :data:`_BLOCK` x :data:`_BLOCK` unclipped places, for
    :func:`_gaussian`.
    """
    from scipy import ndimage

    clipping = bool(np.isfinite(clip[0]) or np.isfinite(clip[1]))
    tiers = _CLIPPED_SHARES if clipping else (0.0,)
    means: list[list[np.ndarray]] = [[] for _ in tiers]
    dets: list[list[np.ndarray]] = [[] for _ in tiers]
    quiet: list[list[np.ndarray]] = [[] for _ in tiers]
    left: list[int] = [0 for _ in tiers]
    censored: list[np.ndarray] = []
    lo, hi = np.inf, -np.inf
    places = 0
    for p in planes:
        h, w = (p.shape[0] // 2) * 2, (p.shape[1] // 2) * 2
        a, d = _db2_bands(p[:h, :w], scale, steps)
        # the local mean must be far less noisy than the spread of means a bin spans, or bins mix levels
        m = ndimage.uniform_filter(a / 2.0, _MEAN_WINDOW, mode="reflect")
        steps()
        grad = np.hypot(ndimage.sobel(m, 0), ndimage.sobel(m, 1))
        q = np.quantile(m, [_RANGE_QUANTILE, 1 - _RANGE_QUANTILE])
        lo, hi = min(lo, float(q[0])), max(hi, float(q[1]))
        share = np.zeros(m.shape, dtype=np.float32)
        if clipping:  # the share of clipped values in each place's window
            at = (p[:h, :w] == clip[0]) | (p[:h, :w] == clip[1])
            share = ndimage.uniform_filter(at.reshape(h // 2, 2, w // 2, 2).mean(axis=(1, 3), dtype=np.float32),
                                           _MEAN_WINDOW + 2, mode="reflect")
        if np.isfinite(clip[0]):
            censored.append(_censored_places(p[:h, :w], scale, clip, m, grad, share))
        places += m.size
        steps()
        devs, worst = _block_deviations(d, share)  # each tier keeps the blocks whose places it all allows
        for t, tier in enumerate(tiers):
            usable = share <= tier + 1e-6  # float32 running sums leave residues of about 1e-7
            left[t] += int(m.size - np.count_nonzero(usable))
            if not usable.any():
                continue
            quiet[t].append(devs[worst <= tier + 1e-6])
            # the gradient of the local mean also carries noise: compare it within each plane
            keep = usable & _smoothest(m, grad, usable)
            means[t].append(m[keep])
            dets[t].append(d[keep])
        steps()
    counts = [sum(x.size for x in tier) for tier in means]
    t = next((t for t, n in enumerate(counts) if n >= min(_MIN_SAMPLES, 0.5 * counts[-1])), len(tiers) - 1)
    cens = np.concatenate(censored) if censored else np.empty((0, 2))
    cens = cens[cens[:, 0] > tiers[t] + 1e-6]  # the places the unclipped samples leave out
    if not means[t]:
        return np.empty(0), np.empty(0), (lo, hi), 1.0, tiers[t], cens, np.empty(0)
    return (np.concatenate(means[t]), np.concatenate(dets[t]), (lo, hi), left[t] / max(places, 1),
            tiers[t], cens, np.concatenate(quiet[t]))


def _block_deviations(d: np.ndarray, share: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each whole block's robust deviation of ``d`` (median absolute value over 0.6745), and its highest ``share``."""
    b = _BLOCK
    rows, cols = d.shape[0] // b, d.shape[1] // b
    blocks = d[:rows * b, :cols * b].reshape(rows, b, cols, b).swapaxes(1, 2).reshape(-1, b * b)
    worst = share[:rows * b, :cols * b].reshape(rows, b, cols, b).max(axis=(1, 3), initial=0.0).ravel()
    if not len(blocks):
        return np.empty(0), worst
    return np.median(np.abs(blocks), axis=1) / _MAD, worst


def _censored_places(p: np.ndarray, scale: float, clip: tuple[float, float], m: np.ndarray, grad: np.ndarray,
                     share: np.ndarray) -> np.ndarray:
    """The smooth places of a plane clipped at its dark end: window statistics of :func:`_smooth_samples`.

    ``p``: the plane (even sides); ``m``, ``grad``: its local mean and that
    mean's gradient per place; ``share``: the share of clipped values of
    each place's window (of :data:`_MEAN_WINDOW` + 2 places). Places with
    values on the bright clipping level too are left out.
    """
    from scipy import ndimage

    h, w = p.shape

    def window(v: np.ndarray) -> np.ndarray:  # per place: the window's mean of v over its pixels
        return ndimage.uniform_filter(v.reshape(h // 2, 2, w // 2, 2).mean(axis=(1, 3)), _MEAN_WINDOW + 2,
                                      mode="reflect")

    low_share = window((p == clip[0]).astype(np.float64))
    # (running sums leave residues of about 1e-7 where a window holds nothing)
    bright = window((p == clip[1]).astype(np.float64)) > 1e-6
    usable = (share > 1e-6) & ~bright & (low_share <= _CENSORED_MAX)
    if not usable.any():
        return np.empty((0, 2))
    # the smoothest alone, not each level's smoothest as :func:`_smoothest` adds: a window across an edge mixes
    # levels, and the share clipped, not linear in the level, then no longer tells the window's mean level
    keep = usable & (grad <= np.quantile(grad[usable], _SMOOTH_QUANTILE))
    return np.stack([low_share[keep], window(p / scale)[keep]], axis=1)


def _censored_read_noise(cens: np.ndarray, clip0: float, gain: float) -> tuple[float, float, float] | None:
    """The read noise, its standard error and an upper bound that places clipped at ``clip0`` show (or None).

    ``cens``: per smooth place clipped at the dark end, its window's share
    of clipped values and mean value (as clipped), over ``scale``, as
    ``clip0`` and ``gain``. The Poisson-Gaussian model clipped at ``c``:
    ``y = max(gain K + N(0, sigma**2), c)``, ``K`` Poisson of mean ``lam``
    photons, gives the share clipped ``P(lam) = sum_k Pois(k; lam) Phi(a_k)``
    and the mean ``M(lam) = sum_k Pois(k; lam) (c Phi(a_k) + gain k
    (1 - Phi(a_k)) + sigma phi(a_k))``, ``a_k = (c - gain k) / sigma``. Both
    are first moments: the smooth variation of the image within a window,
    which a variance of its values would take for noise, averages out.
    The darkest :data:`_CENSORED_DARKEST` of the places are grouped by
    share (groups of at least :data:`_MIN_BIN`); for each ``sigma`` of a
    grid, a group's share gives its ``lam``, and ``M(lam)`` its expected
    mean. The read noise is the ``sigma`` whose
    means fit the groups' best (least squares weighted by their sampling
    variance); its standard error comes from the curvature of that fit,
    inflated by the groups' scatter as the line fit's is (and at least
    :data:`_READ_MODEL_SE`), and the bound lies :data:`_READ_BOUND_Z`
    standard errors above it. None when the groups do not fit the model
    (:data:`_READ_MISFIT`), are too few, or hold too much light for the
    read noise to show (:data:`_READ_DOMINANT`).
    """
    from scipy.special import ndtr
    from scipy.stats import poisson

    if len(cens) < _MIN_BIN or not gain > 0:
        return None
    order = np.argsort(cens[:, 0], kind="stable")
    # the darkest places (most clipped): least light, so the most read noise, and the most uniform windows
    order = order[int(len(order) * (1.0 - _CENSORED_DARKEST)):]
    groups = np.array_split(order, max(1, min(_N_BINS, len(order) // _MIN_BIN)))
    share = np.array([cens[g, 0].mean() for g in groups])
    mean = np.array([cens[g, 1].mean() for g in groups])
    count = np.array([4.0 * len(g) for g in groups])  # pixels of the places' own 2 x 2 blocks
    ok = (share > 0) & (share < 1)
    share, mean, count = share[ok], mean[ok], count[ok]
    if share.size < 2:
        return None
    u = np.geomspace(*_READ_PHOTONS, _READ_GRID)  # read noise in photons
    lam_max = 3.0 * u[-1] + 4.0 * np.sqrt(3.0 * u[-1]) + 20.0  # where even the largest read noise clips ~0
    lam = np.concatenate([[0.0], np.geomspace(1e-3, lam_max, 2 * _READ_GRID)])  # dense: P and M interpolated
    k = np.arange(int(lam_max + 8.0 * np.sqrt(lam_max) + 10.0), dtype=np.float64)
    pmf = poisson.pmf(k[None, :], lam[:, None])
    c = clip0 / gain  # photons
    cost, darkest = np.empty(u.size), np.empty(u.size)
    for i, sd in enumerate(u):
        a = (c - k) / sd
        cdf = ndtr(a)
        p_clip = pmf @ cdf
        m = pmf @ (c * cdf + k * (1.0 - cdf) + sd * np.exp(-0.5 * a * a) / np.sqrt(2.0 * np.pi))
        # P falls with lam: interpolate lam (and so M) at each group's share
        lam_g = np.interp(share, p_clip[::-1], lam[::-1])
        darkest[i] = lam_g.min()
        m_g = np.interp(lam_g, lam, m)
        v_g = lam_g + sd * sd  # a pixel's variance (photons**2), about
        cost[i] = float(np.sum(count * (mean / gain - m_g) ** 2 / v_g))
    best = int(np.argmin(cost))
    # the minimum and its curvature in log(sigma), from a parabola through the grid's three points about it
    j = min(max(best, 1), u.size - 2)
    x = np.log(u[j - 1:j + 2])
    curv, slope, _ = np.polyfit(x - x[1], cost[j - 1:j + 2], 2)
    log_u = x[1] - slope / (2 * curv) if curv > 0 else np.log(u[best])
    log_u = float(np.clip(log_u, np.log(u[0]), np.log(u[-1])))
    misfit = float(cost[best]) / max(share.size - 1, 1)  # 1: the groups scatter about the model as sampling says
    if misfit > _READ_MISFIT or darkest[best] > _READ_DOMINANT * u[best] ** 2:
        return None
    scatter = max(misfit, 1.0)
    se_log = float(np.sqrt(2.0 * scatter / curv)) if curv > 0 else np.inf  # cost rises by 1 per standard error
    se_log = float(np.hypot(se_log, _READ_MODEL_SE))
    high = gain * float(np.exp(log_u + _READ_BOUND_Z * se_log))
    if log_u <= np.log(u[0]) + 1e-9:  # at the grid's floor: a read noise below it, the bound from there
        return 0.0, high, high
    sigma = gain * float(np.exp(log_u))
    return sigma, sigma * se_log, high


def _smoothest(m: np.ndarray, grad: np.ndarray, usable: np.ndarray) -> np.ndarray:
    """The smooth places of a plane: the lowest :data:`_SMOOTH_QUANTILE` of the usable places' gradients.

    A level that the plane-wide selection nearly misses (under
    :data:`_SPARSE` of a group of :data:`_LEVEL_GROUPS`) adds the smoothest
    places of its own: a photograph's smooth places span its levels, a
    fluorescence image's lie in the dark background, and without its bright
    places the noise-level function could not show photon noise.
    """
    smooth = grad <= np.quantile(grad[usable], _SMOOTH_QUANTILE)
    idx = np.flatnonzero(usable.ravel())
    order = idx[np.argsort(m.ravel()[idx], kind="stable")]
    keep = smooth.ravel().copy()
    g = grad.ravel()
    for part in np.array_split(order, min(_LEVEL_GROUPS, max(order.size, 1))):
        if part.size and np.count_nonzero(keep[part]) < _SPARSE * part.size:
            keep[part[g[part] <= np.quantile(g[part], _SMOOTH_QUANTILE)]] = True
    return keep.reshape(m.shape)


def _db2_bands(p: np.ndarray, scale: float, steps: _Steps) -> tuple[np.ndarray, np.ndarray]:
    """Approximation and diagonal detail bands of one level of db2 (periodic) of ``p / scale``.

    As ``pywt.dwt2``, one axis after the other, in strips of about
    :data:`_STEP_SAMPLES` samples with a report after each: one 4096 x 4096
    plane is a few tenths of a second of work, too long between reports.
    """
    import pywt

    h, w = p.shape
    lo, hi = [], []
    for rows in _strip_slices(h, w):
        c = pywt.dwt(p[rows] / scale, _WAVELET, mode="periodization", axis=1)
        lo.append(c[0])
        hi.append(c[1])
        steps()
    lo, hi = np.concatenate(lo, axis=0), np.concatenate(hi, axis=0)
    a, d = [], []
    for cols in _strip_slices(w // 2, h):
        a.append(pywt.dwt(lo[:, cols], _WAVELET, mode="periodization", axis=0)[0])
        d.append(pywt.dwt(hi[:, cols], _WAVELET, mode="periodization", axis=0)[1])
        steps()
    return np.concatenate(a, axis=1), np.concatenate(d, axis=1)


@dataclass(frozen=True)
class _LineFit:
    """The noise-level function's line ``gain * mean + var0`` and what it was fitted on (image units / scale)."""

    gain: float  # the slope as fitted (may be < 0)
    var0: float  # the intercept as fitted (may be < 0)
    cov: np.ndarray  # 2 x 2 covariance of (slope, intercept)
    points: int  # points of the noise-level function fitted
    # the least variance a point allows (its value plus 2 standard errors): the read noise's is at most that
    most_var: float = np.inf

    def variance(self, m: float) -> float:
        return self.gain * m + self.var0

    def variance_se(self, m: float) -> float:
        v = np.array([m, 1.0])
        return float(np.sqrt(max(v @ self.cov @ v, 0.0)))

    def z(self) -> float:
        """The slope in standard errors (0 when it has none)."""
        se = np.sqrt(max(self.cov[0, 0], 0.0))
        return float(self.gain / se) if se > 0 else (np.inf if self.gain > 0 else 0.0)

    def ratio(self, levels: tuple[float, float]) -> float:
        """Fitted variance at the brightest level over the darkest (inf when the darkest's is 0)."""
        lo, hi = max(self.variance(levels[0]), 0.0), max(self.variance(levels[1]), 0.0)
        return float(hi / lo) if lo > 0 else (np.inf if hi > 0 else 1.0)

    def estimate(self, levels: tuple[float, float], clipped: str = "", dark: float = 0.0,
                 read: tuple[float, float, float] | None = None) -> NoiseEstimate:
        """The Poisson-Gaussian :class:`NoiseEstimate` (uncertain when the line is, in the image's range).

        ``dark``: the share of the image's values clipped at its dark end;
        ``read``: the read noise, its standard error and upper bound from
        the places clipped there (:func:`_censored_read_noise`), which
        replace the line's intercept. A read noise not determined
        (:data:`_READ_Z`) gets a bound (:attr:`NoiseEstimate.sigma_max`),
        and when at least :data:`_DARK_UNCERTAIN` of the values are
        clipped at the dark end, the estimate is uncertain: those places'
        level and noise are the read noise's.
        """
        gain_se = float(np.sqrt(max(self.cov[0, 0], 0.0)))
        var0_se = float(np.sqrt(max(self.cov[1, 1], 0.0)))
        if self.gain < 0:  # variance that falls with the mean is no photon noise: gain 0, the mean variance
            gain = 0.0
            var0 = max(self.variance(0.5 * (levels[0] + levels[1])), 0.0)
        else:
            gain, var0 = self.gain, self.var0
        sigma = float(np.sqrt(max(var0, 0.0)))
        # sigma's error from var0's: d sigma = d var0 / (2 sigma), or the square root of var0's error at 0
        sigma_se = var0_se / (2 * sigma) if sigma > np.sqrt(var0_se) else float(np.sqrt(var0_se))
        notes = []
        sigma_max = None
        checks = ((levels[0], "darkest"), (levels[1], "brightest"))
        if read is not None and gain > 0:
            sigma, sigma_se, high = read
            var0 = sigma * sigma
            checks = checks[1:]  # the darkest level's variance is the read noise's, from the clipped places
            # its variance's relative error is twice its own
            if not 2.0 * _READ_Z * sigma_se <= sigma:
                sigma_max = float(min(high, np.sqrt(self.most_var)))
            notes.append("read noise from the places clipped at the dark end (a clipped Poisson-Gaussian model)")
        elif self.gain >= 0 and var0_se > 0 and self.var0 < _READ_Z * var0_se:
            # clipping bends the line's intercept down: the bound from the points measured alone
            bound = self.most_var if dark > 0 else min(self.most_var,
                                                           max(var0, 0.0) + _READ_BOUND_Z * var0_se)
            sigma_max = float(np.sqrt(max(bound, var0, 0.0)))
        if self.points < _MIN_POINTS:
            notes.insert(0, f"uncertain: only {self.points} levels to fit the noise-level function on")
        elif sigma_max is not None and dark >= _DARK_UNCERTAIN:
            notes.insert(0, "uncertain: the read noise is not determined: the dark places that would show it are "
                            "clipped, and photon noise outweighs it at the levels left")
        else:
            # variance of a pixel worth one photon: below it, errors in the read noise do not matter
            floor = max(gain * gain, 1e-300)
            for m, name in checks:
                v = max(gain * max(m, 0.0) + var0, floor)
                rel = self.variance_se(m) / v
                if rel > _UNCERTAIN:
                    notes.insert(0, f"uncertain: the noise variance at the {name} level is known to "
                                    f"+-{100 * rel:.0f}%" + (" (read noise)" if name == "darkest" else ""))
                    break
        notes.append(clipped)
        uncertain = any(n.startswith("uncertain") for n in notes)
        return NoiseEstimate("poisson-gaussian", sigma, float(gain), uncertain, float(sigma_se), gain_se,
                             _join(*notes), sigma_max)


def _nlf_points(means: np.ndarray, dets: np.ndarray, steps: _Steps | None = None,
                floor: _LineFit | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Points of the noise-level function: mean level, robust variance and count of each bin of the local mean.

    Bins of equal width; a bin of fewer than :data:`_MIN_BIN` samples is
    merged with the next ones (a sparse bright tail becomes a point instead
    of being dropped), a short last group with the one before. ``floor``:
    a fitted line whose variance at each bin's level is the least its
    outlier cut is measured in (:func:`_robust_var`).
    """
    lo, hi = np.quantile(means, [_RANGE_QUANTILE, 1 - _RANGE_QUANTILE])
    which = np.clip(((means - lo) / max(hi - lo, 1e-300) * _N_BINS).astype(np.int64), 0, _N_BINS - 1)
    which = which.astype(np.min_scalar_type(_N_BINS))  # numpy's stable sort of keys of 16 bits or less is linear
    order = np.argsort(which, kind="stable")
    bounds = np.searchsorted(which[order], np.arange(_N_BINS + 1))
    groups, start = [], 0
    for k in range(1, _N_BINS + 1):
        if steps is not None:
            steps()
        if bounds[k] - bounds[start] >= _MIN_BIN:
            groups.append((bounds[start], bounds[k]))
            start = k
    if bounds[_N_BINS] > bounds[start] and groups:  # a short last group joins the one before
        groups[-1] = (groups[-1][0], bounds[_N_BINS])
    mu, var, n = [], [], []
    for a, b in groups:
        idx = order[a:b]
        mu.append(means[idx].mean())
        var.append(_robust_var(dets[idx], 0.0 if floor is None else floor.variance(mu[-1])))
        n.append(b - a)
    return np.array(mu), np.array(var), np.array(n, dtype=np.float64)


def _line(mu: np.ndarray, var: np.ndarray, n: np.ndarray) -> tuple[float, float, np.ndarray]:
    """Slope, intercept and their covariance: least squares weighted by the points' sampling variance.

    The weights come from the fitted variance (iteratively reweighted:
    a sample variance of ``n`` values has variance ``2 v**2 / n``). The
    covariance is inflated by the points' scatter about the line when it
    exceeds that (texture, a curve): the fit then knows less than sampling
    alone says.
    """
    tiny = 1e-12 * max(float(var.max()), 1e-300)
    A = np.stack([mu, np.ones_like(mu)], axis=1)
    gain, var0 = 0.0, float(np.median(var))
    huber = np.ones_like(mu)
    for _ in range(_IRLS_ROUNDS):
        fit = np.maximum(gain * mu + var0, tiny)
        w = n / (2 * fit**2) * huber
        gain, var0 = np.linalg.lstsq(A * np.sqrt(w)[:, None], var * np.sqrt(w), rcond=None)[0]
        # a point many standard errors off the line (structure in a bin, a chance low) weighs less: Huber
        r = np.abs(var - np.maximum(gain * mu + var0, tiny)) * np.sqrt(n / 2) / np.maximum(gain * mu + var0, tiny)
        huber = np.minimum(1.0, _HUBER / np.maximum(r, 1e-300))
    fit = np.maximum(gain * mu + var0, tiny)
    w = n / (2 * fit**2) * huber
    cov = np.linalg.pinv(A.T @ (A * w[:, None]))
    if mu.size > 2:
        chi2 = float(np.sum(w * (var - fit) ** 2)) / (mu.size - 2)
        cov = cov * max(chi2, 1.0)
    return float(gain), float(var0), cov


def _fit_points(mu: np.ndarray, var: np.ndarray, n: np.ndarray, dets: np.ndarray) -> _LineFit:
    """The noise-level function's line through its points (mean level, variance, count; ``dets``: no point)."""
    if mu.size == 0:
        return _LineFit(0.0, float(_robust_var(dets)), np.zeros((2, 2)), 0)
    if mu.size == 1:
        return _LineFit(0.0, float(var[0]), np.zeros((2, 2)), 1)
    gain, var0, cov = _line(mu, var, n)
    # a sample variance of n values has a relative standard error of sqrt(2 / n)
    most = float(np.min(var * (1.0 + 2.0 * np.sqrt(2.0 / n))))
    return _LineFit(gain, var0, cov, int(mu.size), most)


def _robust_var(d: np.ndarray, floor: float = 0.0) -> float:
    """Variance of the values within ``_CLIP`` robust deviations of 0, corrected for the cut.

    The median absolute value alone underestimates the spread of the skewed
    detail coefficients of a few photons; the mean square of the values
    within a few of its deviations drops outliers (edges that passed the
    smoothness test), and dividing by :data:`_CLIP_KEPT` undoes what the
    cut takes from Gaussian noise. ``floor``: a variance the deviation the
    cut is measured in is at least (the fitted noise-level function's at
    the bin's level): below a photon per pixel, photon noise is mostly 0
    with rare large values, which a cut at the median's deviation (the read
    noise's) would drop.
    """
    s = max(np.median(np.abs(d)) / _MAD, np.sqrt(max(floor, 0.0)))
    kept = d[np.abs(d) <= _CLIP * s]
    return float(np.mean(kept**2)) / _CLIP_KEPT if kept.size else 0.0
