"""The settings of :func:`denoise_wavelet_tree`, checked once from the image's shape and dtype alone."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._config import NOISE_MODELS
from .._validation import check_callable, check_choice, check_image_layout, check_int, check_number, check_per_channel
from ..proximal import PENALTIES
from ._lam import LamChoice, _resolve_method
from ._layout import _check_axes, _check_sliced
from ._transform import _levels


@dataclass(frozen=True)
class _Options:
    """The validated settings of :func:`denoise_wavelet_tree`, read from the image's shape and dtype alone."""

    c_axis: int | None
    sp_axes: tuple[int, ...]  # increasing
    levels: tuple[int, ...]  # one per axis of sp_axes
    penalize_approx: bool
    n_shifts: int
    n_channels: int
    method: str | None  # 'sure' or 'rule'; None: lam given
    lams: list[float] | None
    level_weights: list | None
    sigmas: list[float] | None  # Gaussian noise, one per channel; None: estimated
    gain: float | None  # Poisson-Gaussian
    read_noise: float | None  # Poisson-Gaussian
    seed: Any  # of numpy.random.default_rng
    sliced: tuple[int, ...] = ()  # transformed axes shown one slice at a time (Dask blocks keep to the chunks)


def _check_options(shape, dtype, *, sigma, lam, penalty, wavelet, level, penalize_approx, cycle_spins, channel_axis,
                   axes, noise, gain, per_level, wiener, rng, progress, sliced_axes=()) -> _Options:
    """Every check of :func:`denoise_wavelet_tree` that needs no pixel: in memory and, at the call, for Dask."""
    ndim = len(shape)
    n_axes = 2 if axes is None else len(_check_axes(axes, ndim, None, channels_checked=False))
    c_axis = check_image_layout(shape, dtype, channel_axis=channel_axis, spatial=n_axes)
    n_shifts = max(check_int("cycle_spins", cycle_spins, min=0), 1)
    check_callable("progress", progress)
    check_choice("noise", noise, NOISE_MODELS, plural="noise models")
    check_choice("wiener", wiener, (None, True, False), plural="values")
    check_choice("per_level", per_level, (None, True, False), plural="values")
    if gain is not None and noise != "poisson-gaussian":
        raise ValueError(f"gain={gain!r} applies to noise='poisson-gaussian' only, got noise={noise!r}")
    sp_axes = _check_axes(axes, ndim, c_axis)
    if axes is not None and np.ndim(level) == 1 and len(level) == len(sp_axes):
        # one level per axis, in the order of ``axes``: read in the increasing order of the axes
        level = tuple(level[i] for i in np.argsort([int(a) % ndim for a in axes]))
    n_channels = shape[c_axis] if c_axis is not None else 1
    check_choice("penalty", penalty, PENALTIES, plural="penalties")
    levels = _levels(tuple(int(shape[a]) for a in sp_axes), wavelet, level)
    n_levels = max(levels)
    weights, lams = None, None
    if lam is None or isinstance(lam, str):
        method = _resolve_method(lam, penalty)
    elif isinstance(lam, LamChoice):
        method, lams = None, check_per_channel("lam", lam.lam, n_channels)
        weights = lam.level_weights or None
        if weights is not None and (len(weights) != n_channels or any(
                w is not None and len(w) != n_levels for w in weights)):
            raise ValueError(f"lam is a LamChoice with level weights for {len(weights)} channel(s) of "
                             f"another transform: expected {n_channels} channel(s) of {n_levels} levels")
    else:
        method, lams = None, check_per_channel("lam", lam, n_channels)
    sigmas = read_noise = None
    if noise == "poisson-gaussian":
        if gain is not None:
            gain = check_number("gain (image units per photon)", gain, min=0.0, strict=True)
            if not 1 / _SQUARE_MAX <= gain <= _SQUARE_MAX:
                raise ValueError(f"gain (image units per photon) {gain:g} is out of range: its square or its inverse "
                                 f"overflows float64 (between {1 / _SQUARE_MAX:.3g} and {_SQUARE_MAX:.3g})")
        if sigma is not None:
            if np.ndim(sigma) != 0:
                raise ValueError(f"sigma must be one number with noise='poisson-gaussian' (the camera's read "
                                 f"noise, shared by all channels), got {sigma!r}")
            read_noise = check_number("sigma", sigma, min=0.0)
    elif sigma is not None:
        sigmas = check_per_channel("sigma", sigma, n_channels)
    for s in ([] if sigmas is None else sigmas) + ([] if read_noise is None else [read_noise]):
        if s > _SQUARE_MAX:
            raise ValueError(f"sigma {s:g} is too large: its square overflows float64 (at most {_SQUARE_MAX:.3g})")
    return _Options(c_axis, sp_axes, levels, bool(penalize_approx), n_shifts, n_channels, method, lams, weights,
                    sigmas, gain, read_noise, _seed(rng), _check_sliced(sliced_axes, ndim, sp_axes))


# The largest noise parameter whose square float64 holds (the risk and the Anscombe transform square them)
_SQUARE_MAX = float(np.sqrt(np.finfo(np.float64).max))


def _seed(rng) -> Any:
    """The seed from which SURE's probe starts afresh on each plane and channel.

    ``rng`` as :func:`numpy.random.default_rng` takes it (default 0), or one
    drawn from a Generator or bit generator (they have a state, not a seed).
    """
    if rng is None:
        return 0
    if isinstance(rng, (np.random.Generator, np.random.BitGenerator)):
        return int(np.random.default_rng(rng).integers(2**63))
    try:
        if isinstance(rng, bool):
            raise TypeError
        np.random.default_rng(rng)
    except (TypeError, ValueError):
        raise ValueError(f"rng must be None, a seed of numpy.random.default_rng (an integer >= 0, a sequence of "
                         f"them, a SeedSequence) or a Generator, got {rng!r}") from None
    return rng
