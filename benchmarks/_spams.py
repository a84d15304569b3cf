"""Adapter from :class:`restore.Tree` to SPAMS's tree format (benchmarks and tests only).

SPAMS wants the variables permuted into a depth-first order with group 0 as
the single root; a forest gets a virtual weight-0 root here.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as ssp

from restore import Tree


def spams_tree(tree: Tree) -> tuple[dict, np.ndarray]:
    """Return SPAMS's tree dict and the variable permutation it expects.

    ``U_spams = U[perm]`` feeds SPAMS; ``V[perm] = V_spams`` maps back.
    """
    lay = tree.dfs_layout()
    counts = lay.own_counts.astype(np.int32)
    parents = lay.parents.copy()
    eta = np.asarray(tree.weights)[lay.nodes].astype(np.float64)
    if len(tree.roots) != 1:
        parents = np.concatenate([[-1], np.where(parents >= 0, parents + 1, 0)])
        counts = np.concatenate([[0], counts]).astype(np.int32)
        eta = np.concatenate([[0.0], eta])
    n = parents.shape[0]
    own = np.zeros(n, dtype=np.int32)
    own[1:] = np.cumsum(counts)[:-1]
    child = np.flatnonzero(parents >= 0)
    groups = ssp.csc_matrix((np.ones(child.size, dtype=bool), (child, parents[child])), shape=(n, n))
    return ({"eta_g": eta, "groups": groups, "own_variables": own,
             "N_own_variables": counts}, np.asarray(lay.variables))
