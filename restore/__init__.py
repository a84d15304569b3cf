"""Image restoration with tree-structured sparsity.

The public API: :class:`Tree` and its builders, the proximal operators
:func:`prox` and :func:`penalty_value` (one numba core behind every job).
"""

from __future__ import annotations

from .coding import Cancelled, sparse_encode
from .denoise import LamChoice, choose_lam, denoise_wavelet_tree, estimate_sigma
from .inpainting import default_dictionary, inpaint, learn_dictionary
from .learning import TreeDictionaryLearning
from .noise import NoiseEstimate, estimate_noise
from .proximal import PENALTIES, TREE_PENALTIES, penalty_value, prox
from .tree import Tree
from .wavelet import wavelet_quadtree, wavelet_tree

__all__ = [
    "PENALTIES",
    "Cancelled",
    "TREE_PENALTIES",
    "LamChoice",
    "NoiseEstimate",
    "Tree",
    "TreeDictionaryLearning",
    "choose_lam",
    "default_dictionary",
    "denoise_wavelet_tree",
    "estimate_noise",
    "estimate_sigma",
    "inpaint",
    "learn_dictionary",
    "penalty_value",
    "prox",
    "sparse_encode",
    "wavelet_quadtree",
    "wavelet_tree",
]
__version__ = "0.1.0"
