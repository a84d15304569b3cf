"""The noise models: Gaussian sigma (estimated per channel) and photon noise (gain, read noise).

The photon-noise model is estimated and checked here, and the variance its generalized Anscombe
transform leaves per sample (the variance map the methods shrink by) is computed from a pilot.
"""

from __future__ import annotations

import logging

import numpy as np
import pywt
from numpy.typing import ArrayLike, NDArray

from .._validation import check_image
from ..noise import NoiseEstimate, estimate_noise, inverse_anscombe
from ._layout import _OPPONENT, _from_channels

_log = logging.getLogger(__package__)  # "restore.denoise", the logger the docs name


def estimate_sigma(image: ArrayLike, *, channel_axis: int | None = None) -> float | NDArray[np.float64]:
    """Estimate the standard deviation of additive white Gaussian noise.

    Robust median estimator of Donoho and Johnstone on the finest diagonal
    wavelet band (Daubechies 2), made local: the band is cut into 16 x 16
    blocks, each gives a median estimate, and the 10th percentile of those,
    divided by its value on pure noise (0.909), is returned. Blocks without
    texture or edges dominate the low percentiles, so image content leaks
    much less into the estimate than with one global median
    (:func:`skimage.restoration.estimate_sigma`). Images too small for 16
    blocks use the global median.

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
    Measured on the sample images (``benchmarks/bench_denoise.py``), the
    estimate is still biased upwards at low noise, where texture is
    comparable to the noise: about +10% at sigma 5 (8-bit units; the global
    median: +21%), +6% at 10 (+9%), +2% at 25 and under 1% from 50 on.
    """
    img, axis = check_image(image, channel_axis=channel_axis)
    if axis is not None:
        img = np.moveaxis(img, axis, -1)
        return np.array([_noise_sigma(img[..., c]) for c in range(img.shape[-1])])
    return _noise_sigma(img)


_BLOCK = 16
_BLOCK_QUANTILE = 0.1
_BLOCK_BIAS = 0.909  # the 10th percentile of 16 x 16 block estimates on pure unit noise


def _noise_sigma(img: np.ndarray) -> float:
    planes = img.reshape(-1, *img.shape[-2:])
    bands = [pywt.dwt2(p, "db2", mode="symmetric")[1][2] for p in planes]
    b = _BLOCK
    blocks = [d[: d.shape[0] // b * b, : d.shape[1] // b * b].reshape(d.shape[0] // b, b, d.shape[1] // b, b)
              .swapaxes(1, 2).reshape(-1, b * b) for d in bands]
    blocks = np.concatenate(blocks)
    if len(blocks) < 16:
        detail = np.concatenate([d.ravel() for d in bands])
        return float(np.median(np.abs(detail)) / 0.6744897501960817)
    per_block = np.median(np.abs(blocks), axis=1) / 0.6744897501960817
    return float(np.quantile(per_block, _BLOCK_QUANTILE) / _BLOCK_BIAS)


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


def _photon_model(x: np.ndarray, gain: float | None, sigma: float | None, has_channels: bool, check: bool = True,
                  dtype: np.dtype | None = None) -> NoiseEstimate:
    """Gain and read noise as given (checked by :func:`_check_options`), the missing ones estimated (and logged).

    ``check``: refuse an image whose mean is more than
    :data:`_OFFSET_SIGMAS` read-noise deviations below 0 (a camera offset
    left in, or taken off twice): zero-mean read noise cannot put it there.
    ``dtype``: the caller's image's, to refuse a gain given in counts for
    an integer image (:func:`_check_gain_scale`).
    """
    if gain is not None and dtype is not None:
        _check_gain_scale(gain, x, dtype)
    if gain is None or sigma is None:
        est = estimate_noise(np.moveaxis(x, -1, 0) if has_channels else x, noise="poisson-gaussian")
        _log.info("estimated Poisson-Gaussian noise: gain %.4g, sigma %.4g", est.gain, est.sigma)
        if gain is None:
            if not est.gain > 0:
                raise ValueError("could not estimate a gain > 0 from the image (its noise does not grow with "
                                 "its level): give gain, or use noise='gaussian'")
            gain = est.gain
        sigma = est.sigma if sigma is None else sigma
    mean = float(np.mean(x)) if check else 0.0
    if mean < -_OFFSET_SIGMAS * sigma or (sigma == 0 and mean < 0):
        raise ValueError(f"noise='poisson-gaussian' reads the image as photons times gain, from 0 (no light): its "
                         f"mean {mean:.4g} is below 0 by more than {_OFFSET_SIGMAS:g} read-noise deviations "
                         f"(sigma {sigma:.4g}). Subtract the camera offset so that no light reads about 0, or use "
                         f"noise='gaussian'")
    return NoiseEstimate("poisson-gaussian", float(sigma), float(gain))


# How far below 0 (in read-noise deviations) the mean of an image may lie under photon noise: a mean over many
# samples of zero-mean read noise lies far closer to 0, a camera offset (tens to hundreds of counts) far below.
_OFFSET_SIGMAS = 3.0


# Side (samples) of the box averaging the stabilised data into the pilot of its noise variance: its mean of
# 125 voxels (25 pixels in 2-D) has a deviation of 0.09 (0.2) stabilised units, and spots a few voxels wide keep
# most of their counts in it.
_PILOT_WINDOW = 5


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
    pilot = inverse_anscombe(ndimage.uniform_filter(z, size, mode="reflect"), model.gain, model.sigma)
    floor = model.gain / _PILOT_WINDOW**n_axes  # one photon over the box, in image units
    var = _anscombe_variance(np.maximum(pilot, floor), model.gain, model.sigma)
    if not has_channels:
        return [var]
    if var.shape[-1] == 3:
        var = var @ (_OPPONENT**2).T  # each opponent channel sums its colours' variances, weights squared
    return [np.ascontiguousarray(var[..., c]) for c in range(var.shape[-1])]


def _noise_sample(image, sp_axes: tuple[int, ...]) -> np.ndarray:
    """A bounded central part of a Dask array (:func:`restore._stores.noise_sample`), as the blocks read it.

    Float as :func:`check_image` makes it, in the layout of the photon model
    (other axes first, the transformed axes last); one channel.
    """
    from .._stores import noise_sample

    sample = noise_sample(image, sp_axes)  # one index, the middle one, along the other axes and the channels
    x, _ = check_image(sample.astype(image.dtype, copy=False), spatial=min(2, len(sp_axes)))
    return x


def _channel_sigmas(sigma, channels: list[np.ndarray]) -> list[float]:
    """The given sigma of each channel (validated), or an estimate on each."""
    if sigma is None:
        return [_noise_sigma(ch) for ch in channels]
    return list(sigma)
