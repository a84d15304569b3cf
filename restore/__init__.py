"""Image restoration with tree-structured sparsity.

The public API: :class:`Tree` and its builders, the proximal operators
:func:`prox` and :func:`penalty_value` (one numba core behind every job).
"""

from __future__ import annotations

from .denoise import LamChoice, choose_lam, denoise_wavelet_tree, estimate_sigma
from .prox import PENALTIES, TREE_PENALTIES, penalty_value, prox
from .tree import Tree
from .wavelet import wavelet_quadtree

__all__ = [
    "PENALTIES",
    "TREE_PENALTIES",
    "LamChoice",
    "Tree",
    "choose_lam",
    "denoise_wavelet_tree",
    "estimate_sigma",
    "penalty_value",
    "prox",
    "wavelet_quadtree",
]
__version__ = "0.1.0"
