"""hypothesis strategies shared by the tests."""

import numpy as np
from hypothesis import strategies as st

from restore import Tree


@st.composite
def trees(draw, max_nodes: int = 12, max_own: int = 3, forest: bool = True, zero_weights: bool = True):
    """Random trees and forests, any node numbering, 0..max_own variables per node."""
    n = draw(st.integers(1, max_nodes))
    parents = [-1]
    for i in range(1, n):
        if forest and draw(st.booleans()) and draw(st.booleans()):
            parents.append(-1)
        else:
            parents.append(draw(st.integers(0, i - 1)))
    relabel = draw(st.permutations(range(n)))
    par = np.full(n, -1)
    for i, p in enumerate(parents):
        par[relabel[i]] = -1 if p < 0 else relabel[p]
    sizes = draw(st.lists(st.integers(0, max_own), min_size=n, max_size=n))
    p = sum(sizes)
    var_ids = draw(st.permutations(range(p))) if p else []
    groups, start = [], 0
    for s in sizes:
        groups.append(list(var_ids[start:start + s]))
        start += s
    lo = 0.0 if zero_weights else 0.5
    weights = draw(st.lists(st.one_of(st.just(lo), st.floats(0.5, 2.0)), min_size=n, max_size=n))
    return Tree.from_parents(par, groups, weights)
