"""Denoising: the wavelet-tree method, and the modules every denoising method shares.

Modules, from the bottom up:

- :mod:`._layout`: which axes are transformed, which are channels, the opponent colour transform;
- :mod:`._noise_model`: Gaussian sigma and the photon-noise model (gain, read noise, variance maps);
- :mod:`._transform`: the wavelet transform plan of one plane or volume, shifts, shrinkage by the prox core;
- :mod:`._lam`: lam from the noisy data, by SURE or the calibrated rule;
- :mod:`._options`: the settings, checked once from the image's shape and dtype;
- :mod:`._stages`: the tree stage and the empirical Wiener stage;
- :mod:`._blocks`: Dask arrays and large volumes in overlapping blocks;
- :mod:`._wavelet_method`: :func:`denoise_wavelet_tree` and :func:`choose_lam`.
"""

from .._config import NOISE_MODELS
from ._lam import LamChoice, lam_from_threshold, log_search  # noqa: F401 (the last two: for restore.evaluate)
from ._noise_model import estimate_sigma
from ._wavelet_method import PlaneDenoiser, choose_lam, denoise_wavelet_tree  # noqa: F401 (PlaneDenoiser: evaluate)

__all__ = ["NOISE_MODELS", "LamChoice", "choose_lam", "denoise_wavelet_tree", "estimate_sigma"]
