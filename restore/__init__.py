"""Image restoration with tree-structured sparsity.

The public API: :class:`Tree` and its builders, the proximal operators
:func:`prox` and :func:`penalty_value` (one numba core behind every job).
"""

from __future__ import annotations

from .coding import Cancelled, sparse_encode
from .denoise import LamChoice, choose_lam, denoise_wavelet_tree, estimate_sigma
from .inpainting import default_dictionary, inpaint, learn_dictionary
from .learning import TreeDictionaryLearning
from .proximal import PENALTIES, TREE_PENALTIES, penalty_value, prox
from .tree import Tree
from .wavelet import wavelet_quadtree

__all__ = [
    "PENALTIES",
    "Cancelled",
    "TREE_PENALTIES",
    "LamChoice",
    "Tree",
    "TreeDictionaryLearning",
    "choose_lam",
    "default_dictionary",
    "denoise_wavelet_tree",
    "estimate_sigma",
    "inpaint",
    "learn_dictionary",
    "penalty_value",
    "prox",
    "sparse_encode",
    "wavelet_quadtree",
]
__version__ = "0.1.0"
