"""The noise models every denoising method shares: Gaussian, and photon noise through the Anscombe transform.

:func:`check_noise` reads the user's ``noise``, ``sigma`` and ``gain`` once
and returns a :class:`GaussianNoise`, a :class:`PhotonNoise`, or an
:class:`AutoNoise` that becomes one of them on the whole image (the noise-level
function of :func:`restore.estimate_noise` chooses): the only place where the
name of the model is compared. Each model brings the data to
white Gaussian noise (:meth:`~PhotonNoise.stabilise`), gives the methods the
noise of each unit (:meth:`~PhotonNoise.sigmas`, :meth:`~PhotonNoise.var_maps`)
and brings the result back (:meth:`~PhotonNoise.unstabilise`). The photon
model's missing parameters are estimated (and checked) by
:meth:`PhotonNoise.resolved`. :func:`estimate_sigma` is the Gaussian estimate
(:func:`restore.noise.gaussian_sigma`, the one estimator).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._config import NOISE_CHOICES, NOISE_MODELS
from .._validation import check_choice, check_image, check_number, check_per_channel
from ..noise import NoiseEstimate, anscombe, estimate_noise, gaussian_sigma, inverse_anscombe
from ._layout import _OPPONENT, _from_channels

_log = logging.getLogger(__package__)  # "restore.denoise", the logger the docs name


def estimate_sigma(image: ArrayLike, *, channel_axis: int | None = None) -> float | NDArray[np.float64]:
    """Estimate the standard deviation of additive white Gaussian noise.

    Robust median estimator of Donoho and Johnstone on the finest diagonal
    wavelet band (Daubechies 2), read in its quietest blocks (a low quantile
    of 32 x 32 pixel blocks' estimates, flat ones left out), so that texture
    and edges do not pass for noise, and away from clipped values: the Gaussian model of
    :func:`restore.estimate_noise`, the one estimator the denoisers use on
    each plane (or volume) and channel. Planes under 8 x 8 pixels use the
    band's global median (:func:`skimage.restoration.estimate_sigma`'s).

    Parameters
    ----------
    image : ndarray
        2-D image, or 2-D images stacked along leading axes (the estimate
        pools all of them), optionally with channels.
    channel_axis : int, optional
        Axis of the channels; one estimate per channel.

    Returns
    -------
    float or ndarray
        The estimate, or one per channel.

    Notes
    -----
    ``benchmarks/bench_denoise.py`` measures its relative error on the
    sample images against scikit-image's.
    """
    img, axis = check_image(image, channel_axis=channel_axis)
    if axis is not None:
        img = np.moveaxis(img, axis, -1)
        return np.array([gaussian_sigma(img[..., c]) for c in range(img.shape[-1])])
    return gaussian_sigma(img)


def _check_gain_scale(gain: float, x: np.ndarray, dtype: np.dtype) -> None:
    """Refuse a gain above an integer image's largest value: it was given in counts, not in [0, 1] units."""
    if np.dtype(dtype).kind not in "ui":
        return
    top = float(x.max())
    if 0 < top < gain:
        scale = float(np.iinfo(dtype).max)
        raise ValueError(f"gain={gain!r} (image units per photon) is larger than the image's largest value {top:.4g}: "
                         f"every sample would hold less than one photon. Integer images are read in [0, 1] "
                         f"(divided by {scale:.0f} for {np.dtype(dtype)}, as skimage.util.img_as_float does): "
                         f"give gain in those units (a gain of {gain!r} counts per photon is {gain / scale:.4g})")


# The largest noise parameter whose square float64 holds (the risk and the Anscombe transform square them)
_SQUARE_MAX = float(np.sqrt(np.finfo(np.float64).max))


@dataclass(frozen=True)
class GaussianNoise:
    """White Gaussian noise of one standard deviation per channel, in image units.

    Attributes
    ----------
    sigmas : tuple of float or None
        One per channel; None: estimated on each unit and channel (:func:`estimate_sigma`'s estimator).
    """

    sigmas: tuple[float, ...] | None = None

    scaled = False  # the noise variance is the same on every sample: no variance maps

    @property
    def estimates_sigma(self) -> bool:
        """Whether each unit's sigma is estimated on it (one progress step per channel)."""
        return self.sigmas is None

    @property
    def complete(self) -> bool:
        """Whether nothing is left to estimate on the whole image."""
        return True

    def resolved(self, x: np.ndarray, *, has_channels: bool, check: bool = True,
                 dtype: np.dtype | None = None) -> GaussianNoise:
        """The model for the whole image ``x`` (float, channels last): nothing to estimate on the whole."""
        return self

    def stabilise(self, x: np.ndarray) -> np.ndarray:
        """The data with white Gaussian noise: as it is."""
        return x

    def unstabilise(self, y: np.ndarray) -> np.ndarray:
        """A denoised result back in image units: as it is."""
        return y

    def sigmas_of(self, channels: list[np.ndarray]) -> list[float]:
        """The noise deviation of each channel of a unit: given, or estimated on it."""
        if self.sigmas is None:
            return [gaussian_sigma(ch) for ch in channels]
        return list(self.sigmas)

    def var_maps(self, channels: list[np.ndarray], n_axes: int) -> list[np.ndarray | None]:
        """The noise variance of each sample of each channel: None, the same everywhere."""
        return [None] * len(channels)


@dataclass(frozen=True)
class PhotonNoise:
    """Poisson-Gaussian noise: ``gain`` image units per photon plus Gaussian read noise ``read_noise``.

    The data go through the generalized Anscombe transform (noise of
    deviation 1 where a sample expects a few photons, less on dark
    backgrounds: :meth:`var_maps`), and the result comes back through its
    exact unbiased inverse (:mod:`restore.noise`).

    Attributes
    ----------
    gain, read_noise : float or None
        None: estimated on the whole image by :meth:`resolved`.
    """

    gain: float | None = None
    read_noise: float | None = None

    scaled = True  # the stabilised noise's variance varies: methods shrink by variance maps
    estimates_sigma = False  # the stabilised noise has deviation 1

    @property
    def complete(self) -> bool:
        """Whether gain and read noise are both known."""
        return self.gain is not None and self.read_noise is not None

    def resolved(self, x: np.ndarray, *, has_channels: bool, check: bool = True,
                 dtype: np.dtype | None = None) -> PhotonNoise:
        """Gain and read noise as given, the missing ones estimated on ``x`` (and logged); checked.

        ``x``: the image, float, channels last when ``has_channels``.
        ``check``: refuse an image whose mean is more than
        :data:`_OFFSET_SIGMAS` read-noise deviations below 0 (a camera offset
        left in, or taken off twice): zero-mean read noise cannot put it there.
        ``dtype``: the caller's image's, to refuse a gain given in counts for
        an integer image (:func:`_check_gain_scale`).
        """
        gain, sigma = self.gain, self.read_noise
        if gain is not None and dtype is not None:
            _check_gain_scale(gain, x, dtype)
        if gain is None or sigma is None:
            est = estimate_noise(np.moveaxis(x, -1, 0) if has_channels else x, noise="poisson-gaussian")
            _log.info("noise='poisson-gaussian', estimated: %s", est.describe())
            if gain is None:
                if not est.gain > 0:
                    raise ValueError("could not estimate a gain > 0 from the image (its noise does not grow with "
                                     "its level): give gain, or use noise='gaussian'")
                gain = est.gain
            sigma = est.sigma if sigma is None else sigma
        mean = float(np.mean(x)) if check else 0.0
        if mean < -_OFFSET_SIGMAS * sigma or (sigma == 0 and mean < 0):
            raise ValueError(f"noise='poisson-gaussian' reads the image as photons times gain, from 0 (no light): "
                             f"its mean {mean:.4g} is below 0 by more than {_OFFSET_SIGMAS:g} read-noise deviations "
                             f"(sigma {sigma:.4g}). Subtract the camera offset so that no light reads about 0, or "
                             f"use noise='gaussian'")
        return PhotonNoise(float(gain), float(sigma))

    @property
    def estimate(self) -> NoiseEstimate:
        """The resolved model as :func:`restore.estimate_noise` reports one."""
        return NoiseEstimate("poisson-gaussian", float(self.read_noise), float(self.gain))

    def stabilise(self, x: np.ndarray) -> np.ndarray:
        """The generalized Anscombe transform of the data (resolved model)."""
        return anscombe(x, self.gain, self.read_noise)

    def unstabilise(self, y: np.ndarray) -> np.ndarray:
        """Its exact unbiased inverse, of a denoised result."""
        return inverse_anscombe(y, self.gain, self.read_noise)

    def sigmas_of(self, channels: list[np.ndarray]) -> list[float]:
        """The stabilised noise's deviation, 1 in each channel (the variance maps tell where it is less)."""
        return [1.0] * len(channels)

    def var_maps(self, channels: list[np.ndarray], n_axes: int) -> list[np.ndarray]:
        """The stabilised noise's variance on each sample of each channel (:func:`_stabilised_variance`)."""
        return _stabilised_variance(channels, self.estimate, n_axes)


@dataclass(frozen=True)
class AutoNoise:
    """Noise of a model still to choose (``noise='auto'``): the image's noise-level function decides.

    :meth:`resolved` estimates it once on the whole image (or the sample the
    driver takes of a Dask array) with :func:`restore.estimate_noise` and
    returns :attr:`gaussian` or :attr:`photon`, the latter's gain and read
    noise filled in from the same estimate (:func:`from_estimate`).

    Attributes
    ----------
    gaussian : GaussianNoise
        The model if the noise is Gaussian (``sigma`` as given, else per unit).
    photon : PhotonNoise or None
        The model if it is Poisson-Gaussian (``sigma`` and ``gain`` as given,
        read noise and gain); None when the ``sigma`` given cannot be a read
        noise (one per channel).
    sigma : object
        The ``sigma`` given, for the message when :attr:`photon` is None.

    ``noise='auto'`` itself comes here without ``sigma`` (a ``sigma`` given
    alone names Gaussian noise); a :class:`restore.NoiseEstimate` passed as
    ``noise`` comes with what was given besides it.
    """

    gaussian: GaussianNoise
    photon: PhotonNoise | None
    sigma: object = None

    complete = False  # the model is not known before the image is seen

    def resolved(self, x: np.ndarray, *, has_channels: bool, check: bool = True,
                 dtype: np.dtype | None = None) -> GaussianNoise | PhotonNoise:
        """The model the noise-level function of ``x`` chooses, resolved as :meth:`PhotonNoise.resolved` does."""
        planes = np.moveaxis(x, -1, 0) if has_channels else x
        if min(planes.shape[-2:]) < _MIN_SIDE:
            _log.info("noise='auto': Gaussian noise (planes under %d x %d pixels are too small to tell the noise "
                      "model from)", _MIN_SIDE, _MIN_SIDE)
            return self.gaussian
        est = estimate_noise(planes, noise="auto")
        model = from_estimate(est, self)
        _log.info("noise='auto': %s%s", est.describe(), _sigma_note(model))
        return model.resolved(x, has_channels=has_channels, check=check, dtype=dtype)


NoiseModel = GaussianNoise | PhotonNoise | AutoNoise

# The smallest planes (pixels a side) restore.estimate_noise reads; noise='auto' calls smaller ones Gaussian.
_MIN_SIDE = 8


def _sigma_note(model: GaussianNoise | PhotonNoise) -> str:
    """What the log line adds for a Gaussian model whose sigma is still to estimate on each unit."""
    if isinstance(model, GaussianNoise) and model.sigmas is None:
        return " (sigma then estimated on each plane or volume and channel)"
    return ""


def _describe(noise: object) -> str:
    """``noise`` as an error message names it: a NoiseEstimate by its one line."""
    if isinstance(noise, NoiseEstimate):
        return f"NoiseEstimate({noise.describe()!r})"
    return repr(noise)


def from_estimate(est: NoiseEstimate, given: AutoNoise) -> GaussianNoise | PhotonNoise:
    """The model ``est`` names, with what ``given`` holds (the user's sigma, gain) taking precedence.

    Photon noise takes the estimate's gain and read noise where none was
    given; Gaussian noise keeps the sigma given, else estimates it on each
    unit, as ``noise='gaussian'`` does (planes of a stack and colour channels
    may differ). A :class:`restore.NoiseEstimate` passed as ``noise`` comes
    with its sigma as the one given (:func:`check_noise`).
    """
    if est.noise == "gaussian":
        return given.gaussian
    photon = given.photon
    if photon is None:
        raise ValueError(f"sigma must be one number with Poisson-Gaussian noise (the camera's read noise, shared by "
                         f"all channels), got {given.sigma!r} with noise={_describe(est)}")
    gain = photon.gain if photon.gain is not None else est.gain
    if not (gain is not None and gain > 0):
        raise ValueError(f"noise={_describe(est)} has gain 0: the image's noise does not grow with its level. "
                         "Give gain, or use noise='gaussian'")
    model = _check_named("poisson-gaussian", est.sigma if photon.read_noise is None else photon.read_noise, gain, 1)
    assert isinstance(model, PhotonNoise)
    return model


def check_noise(noise: str | NoiseEstimate, sigma, gain, n_channels: int) -> NoiseModel:
    """The noise model the user named, its parameters checked (none estimated yet).

    ``noise`` is one of :data:`restore._config.NOISE_CHOICES` or a
    :class:`restore.NoiseEstimate`, whose model is used with its parameters
    (:func:`from_estimate`), nothing estimated again: under Gaussian noise its
    one sigma for every unit and channel, unless ``sigma`` is given.
    """
    if isinstance(noise, NoiseEstimate):
        if noise.noise not in NOISE_MODELS:
            raise ValueError(f"noise={noise!r} names the model {noise.noise!r}; supported noise models are "
                             f"{', '.join(NOISE_MODELS)}")
        if gain is not None and noise.noise != "poisson-gaussian":
            raise ValueError(f"gain={gain!r} applies to noise='poisson-gaussian' only, got noise={_describe(noise)}")
        # its sigma too: what the estimate says (and its caller may have shown) is what is used
        model = from_estimate(noise, _check_auto(noise.sigma if sigma is None and noise.noise == "gaussian" else sigma,
                                                 gain, n_channels))
        _log.info("noise given: %s%s", noise.describe(), _sigma_note(model))
        return model
    if not isinstance(noise, str):
        raise ValueError(f"noise={noise!r} is not a noise model: use one of {', '.join(NOISE_CHOICES)}, or a "
                         "restore.NoiseEstimate (what restore.estimate_noise returns)")
    check_choice("noise", noise, NOISE_CHOICES, plural="noise models")
    if noise == "auto":
        if gain is not None:
            raise ValueError(f"gain={gain!r} applies to noise='poisson-gaussian' only, got noise={noise!r}")
        if sigma is not None:  # a noise level given alone is Gaussian noise's: nothing to choose
            return _check_named("gaussian", sigma, None, n_channels)
        return _check_auto(sigma, gain, n_channels)
    return _check_named(noise, sigma, gain, n_channels)


def _check_auto(sigma, gain, n_channels: int) -> AutoNoise:
    """Both models checked with the parameters given: the image chooses later."""
    gaussian = _check_named("gaussian", sigma, None, n_channels)
    photon = None
    if sigma is None or np.ndim(sigma) == 0:
        photon = _check_named("poisson-gaussian", sigma, gain, n_channels)
    return AutoNoise(gaussian, photon, sigma)


def _check_named(noise: str, sigma, gain, n_channels: int) -> GaussianNoise | PhotonNoise:
    """The model named ``noise`` (one of :data:`NOISE_MODELS`), its parameters checked."""
    photon = noise == "poisson-gaussian"  # the one place the model's name is read
    if gain is not None and not photon:
        raise ValueError(f"gain={gain!r} applies to noise='poisson-gaussian' only, got noise={noise!r}")
    if not photon:
        sigmas = None if sigma is None else check_per_channel("sigma", sigma, n_channels)
        for s in sigmas or []:
            _check_square(s)
        return GaussianNoise(None if sigmas is None else tuple(sigmas))
    if gain is not None:
        gain = check_number("gain (image units per photon)", gain, min=0.0, strict=True)
        if not 1 / _SQUARE_MAX <= gain <= _SQUARE_MAX:
            raise ValueError(f"gain (image units per photon) {gain:g} is out of range: its square or its inverse "
                             f"overflows float64 (between {1 / _SQUARE_MAX:.3g} and {_SQUARE_MAX:.3g})")
    read_noise = None
    if sigma is not None:
        if np.ndim(sigma) != 0:
            raise ValueError(f"sigma must be one number with noise='poisson-gaussian' (the camera's read "
                             f"noise, shared by all channels), got {sigma!r}")
        read_noise = _check_square(check_number("sigma", sigma, min=0.0))
    return PhotonNoise(gain, read_noise)


def _check_square(s: float) -> float:
    if s > _SQUARE_MAX:
        raise ValueError(f"sigma {s:g} is too large: its square overflows float64 (at most {_SQUARE_MAX:.3g})")
    return s


# How far below 0 (in read-noise deviations) the mean of an image may lie under photon noise: a mean over many
# samples of zero-mean read noise lies far closer to 0, a camera offset (tens to hundreds of counts) far below.
_OFFSET_SIGMAS = 3.0


# Side (samples) of the box averaging the stabilised data into the pilot of its noise variance: its mean of
# 125 voxels (25 pixels in 2-D) has a deviation of 0.09 (0.2) stabilised units, and spots a few voxels wide keep
# most of their counts in it.
_PILOT_WINDOW = 5


# Samples of the variance map made at once from the box means: the temporaries of the inverse transform and its
# variance stay this small (8 MB of float64 each) instead of a volume each.
_VARIANCE_CHUNK = 1 << 20


def _stabilised_variance(channels: list[np.ndarray], model: NoiseEstimate, n_axes: int) -> list[np.ndarray]:
    """Noise variance of every sample of the Anscombe-stabilised channels, from a local-mean pilot.

    The generalized Anscombe transform leaves a variance well below 1 where
    a sample expects under about 2 photons (dark backgrounds): the pilot's
    expected counts, a box mean of the stabilised data through the exact
    inverse, give it (:func:`restore.noise._anscombe_variance`). A pilot
    under one photon in its whole box is read as that one photon: below it
    the data cannot tell the counts apart, and the variance must not vanish.
    Three channels are in the opponent colour space: their variances mix.
    """
    from scipy import ndimage

    from ..noise import _anscombe_variance

    has_channels = len(channels) > 1
    z = _from_channels(channels, has_channels)
    size = (_PILOT_WINDOW,) * n_axes + ((1,) if has_channels else ())
    var = ndimage.uniform_filter(z, size, mode="reflect")  # the box means, then their variances in place
    floor = model.gain / _PILOT_WINDOW**n_axes  # one photon over the box, in image units
    flat = var.reshape(-1)  # the filter's own output: contiguous, a view
    for i in range(0, flat.size, _VARIANCE_CHUNK):  # sample by sample: chunks give the same values as the whole
        pilot = inverse_anscombe(flat[i:i + _VARIANCE_CHUNK], model.gain, model.sigma)
        flat[i:i + _VARIANCE_CHUNK] = _anscombe_variance(np.maximum(pilot, floor), model.gain, model.sigma)
    del flat
    if not has_channels:
        return [var]
    if var.shape[-1] == 3:
        var = var @ (_OPPONENT**2).T  # each opponent channel sums its colours' variances, weights squared
    return [np.ascontiguousarray(var[..., c]) for c in range(var.shape[-1])]
