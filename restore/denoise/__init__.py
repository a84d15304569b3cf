"""Denoising: the wavelet-tree method, and the modules every denoising method shares.

Modules, from the bottom up:

Shared by every method (the driver: all that is not the method):

- :mod:`._layout`: which axes are transformed, which are channels, the opponent colour transform;
- :mod:`._noise_model`: the noise models (Gaussian; photon noise through the Anscombe transform), the
  one place the model is chosen, :func:`estimate_sigma`;
- :mod:`._units`: what a method implements (:class:`._units.UnitMethod`: itself on one unit, a channel
  of a plane or volume in white Gaussian noise), and an image in memory denoised unit by unit;
- :mod:`._driver`: the checks of a call (:func:`._driver.check_call`), then :func:`._driver.drive`:
  in memory, or Dask arrays and large volumes in overlapping blocks.

The wavelet-tree method:

- :mod:`._transform`: the wavelet transform of a unit (plan, shifts, shrinkage by the prox core);
- :mod:`._lam`: lam from the noisy unit, by SURE or the calibrated rule;
- :mod:`._stages`: the tree stage and the empirical Wiener stage;
- :mod:`._wavelet_method`: :class:`._wavelet_method.WaveletTree` (the method on a unit),
  :func:`denoise_wavelet_tree` and :func:`choose_lam`.

The non-local tree method:

- :mod:`._nonlocal_method`: :class:`._nonlocal_method.NonlocalTree` (groups of similar patches coded
  jointly by :mod:`restore._nonlocal`) and :func:`denoise_nonlocal_tree`.

A module may import only those above it in these lists (``tests/test_architecture.py``).
"""

from .._config import NOISE_MODELS
from ._lam import CONVEX_PENALTIES, LamChoice, lam_from_threshold, log_search  # noqa: F401 (the last two: evaluate)
from ._noise_model import estimate_sigma
from ._nonlocal_method import denoise_nonlocal_tree
from ._wavelet_method import PlaneDenoiser, choose_lam, denoise_wavelet_tree  # noqa: F401 (PlaneDenoiser: evaluate)

__all__ = ["CONVEX_PENALTIES", "NOISE_MODELS", "LamChoice", "choose_lam", "denoise_nonlocal_tree",
           "denoise_wavelet_tree", "estimate_sigma"]
