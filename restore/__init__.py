"""Image restoration with tree-structured sparsity.

Wavelet tree denoising (:func:`denoise_wavelet_tree`), non-local tree
denoising (:func:`denoise_nonlocal_tree`), tree-structured
dictionaries (:class:`TreeDictionaryLearning`, :func:`learn_dictionary`),
inpainting (:func:`inpaint`) and the proximal operators they share
(:func:`prox` on a :class:`Tree`): one numba core behind every job.

Names are imported on first use (PEP 562), so that ``import restore`` is
cheap: numba, scikit-learn and SciPy load when a function needs them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# public name -> the module that defines it
_EXPORTS = {
    "Cancelled": "._progress",
    "sparse_encode": ".coding",
    "LamChoice": ".denoise",
    "choose_lam": ".denoise",
    "denoise_nonlocal_tree": ".denoise",
    "denoise_wavelet_tree": ".denoise",
    "estimate_sigma": ".denoise",
    "default_dictionary": ".inpainting",
    "inpaint": ".inpainting",
    "learn_dictionary": ".inpainting",
    "NoiseEstimate": ".noise",
    "estimate_noise": ".noise",
    "noise_sample": ".noise",
    "TreeDictionaryLearning": ".learning",
    "PENALTIES": ".proximal",
    "TREE_PENALTIES": ".proximal",
    "penalty_value": ".proximal",
    "prox": ".proximal",
    "Tree": ".tree",
    "wavelet_quadtree": ".wavelet",
    "wavelet_tree": ".wavelet",
}

__all__ = [
    "PENALTIES",
    "TREE_PENALTIES",
    "Cancelled",
    "LamChoice",
    "NoiseEstimate",
    "Tree",
    "TreeDictionaryLearning",
    "choose_lam",
    "default_dictionary",
    "denoise_nonlocal_tree",
    "denoise_wavelet_tree",
    "estimate_noise",
    "estimate_sigma",
    "inpaint",
    "learn_dictionary",
    "noise_sample",
    "penalty_value",
    "prox",
    "sparse_encode",
    "wavelet_quadtree",
    "wavelet_tree",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'restore' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # the names, for type checkers and IDEs
    from ._progress import Cancelled
    from .coding import sparse_encode
    from .denoise import LamChoice, choose_lam, denoise_nonlocal_tree, denoise_wavelet_tree, estimate_sigma
    from .inpainting import default_dictionary, inpaint, learn_dictionary
    from .learning import TreeDictionaryLearning
    from .noise import NoiseEstimate, estimate_noise, noise_sample
    from .proximal import PENALTIES, TREE_PENALTIES, penalty_value, prox
    from .tree import Tree
    from .wavelet import wavelet_quadtree, wavelet_tree
