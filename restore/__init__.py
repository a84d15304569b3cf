"""Image restoration with tree-structured sparsity.

The public API: :class:`Tree` and its builders, the proximal operators
:func:`prox` and :func:`penalty_value` (one numba core behind every job).
"""

from __future__ import annotations

from .prox import PENALTIES, TREE_PENALTIES, penalty_value, prox
from .tree import Tree

__all__ = ["PENALTIES", "TREE_PENALTIES", "Tree", "penalty_value", "prox"]
__version__ = "0.1.0"
