"""Regular wavelet trees, walked by index arithmetic: the prox of the general layout, and SPAMS's."""

import pickle
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from restore import Tree, prox
from restore.wavelet import band_layout, level_splits, wavelet_tree, wavelet_tree_parents

REF = Path(__file__).resolve().parent / "data" / "spams_ref_regular.npz"


def _level_weighted(tree: Tree, shape, levels, level_weights) -> Tree:
    node_level = np.zeros(tree.n_nodes, dtype=np.int64)
    for b in band_layout(shape, level_splits(levels))[1:]:
        node_level[b.start:b.start + b.size] = b.level
    return tree.with_weights(np.concatenate([[1.0], level_weights])[node_level] * tree.weights)


def _general(shape, levels, weights) -> Tree:
    return Tree.from_parents(wavelet_tree_parents(shape, level_splits(levels)), weights=weights)


def _cases() -> list[str]:
    with np.load(REF) as z:
        return sorted({k.split("/")[0] for k in z.files})


@pytest.mark.parametrize("case", _cases())
def test_matches_spams_on_wavelet_trees(case):
    with np.load(REF) as z:
        r = {k.split("/")[1]: z[k] for k in z.files if k.startswith(case + "/")}
    shape, levels = tuple(int(s) for s in r["shape"]), tuple(int(n) for n in r["levels"])
    tree = _level_weighted(wavelet_tree(shape, "haar", levels, bool(r["penalize_approx"])), shape, levels,
                           r["level_weights"])
    assert tree._regular is not None  # the case exercises the index-arithmetic layout  # noqa: SLF001
    U = r["U"]
    V = prox(U, float(r["lam"]), penalty=str(r["penalty"]), tree=tree)
    scale = max(1.0, float(np.max(np.abs(U))))
    assert np.max(np.abs(V - r["V"])) <= 1e-9 * scale


@st.composite
def _wavelet_cases(draw):
    nd = draw(st.sampled_from([2, 3]))
    levels = tuple(draw(st.integers(0, 3)) for _ in range(nd))
    if max(levels) == 0:
        levels = (1,) * nd
    shape = tuple(draw(st.integers(1, 3)) << n for n in levels)
    if min(shape) < 2:
        shape = tuple(max(s, 2 << n) for s, n in zip(shape, levels, strict=True))
    level_weights = draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 1.7]), min_size=max(levels),
                                  max_size=max(levels)))
    return shape, levels, draw(st.booleans()), np.array(level_weights)


@settings(max_examples=60, deadline=None)
@given(case=_wavelet_cases(), seed=st.integers(0, 2**31 - 1),
       penalty=st.sampled_from(["tree_l2", "tree_l0", "tree_linf"]), lam=st.sampled_from([0.0, 0.1, 0.6, 3.0]),
       positive=st.booleans())
def test_regular_prox_equals_general_layout(case, seed, penalty, lam, positive):
    shape, levels, penalize_approx, level_weights = case
    regular = _level_weighted(wavelet_tree(shape, "haar", levels, penalize_approx), shape, levels, level_weights)
    general = _general(shape, levels, regular.weights)
    rng = np.random.default_rng(seed)
    U = rng.standard_normal((regular.n_vars, 3)) * rng.exponential(1.0, (regular.n_vars, 3))
    U[rng.random(U.shape) < 0.2] = 0.0
    got = prox(U, lam, penalty=penalty, tree=regular, positive=positive)
    want = prox(U, lam, penalty=penalty, tree=general, positive=positive)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * max(1.0, np.abs(U).max()))
    if penalty == "tree_l0":
        np.testing.assert_array_equal(got, want)  # a choice per node, no arithmetic to round


def test_queries_of_a_regular_tree_are_those_of_the_general_layout():
    shape, levels = (8, 16, 16), (1, 3, 3)
    regular = wavelet_tree(shape, "haar", levels, True)
    general = _general(shape, levels, regular.weights)
    np.testing.assert_array_equal(regular.parents, general.parents)
    assert (regular.depth, regular.n_nodes, regular.n_vars) == (general.depth, general.n_nodes, general.n_vars)
    np.testing.assert_array_equal(regular.roots, general.roots)
    for node in (0, 5, 100, regular.n_nodes - 1):
        np.testing.assert_array_equal(regular.children(node), general.children(node))
        np.testing.assert_array_equal(regular.group(node), general.group(node))
    for name in ("nodes", "variables", "own_counts", "parents"):
        np.testing.assert_array_equal(getattr(regular.dfs_layout(), name), getattr(general.dfs_layout(), name))


def test_a_regular_tree_pickles_and_keeps_its_weights():
    tree = wavelet_tree((32, 32), "haar", 3)
    weighted = _level_weighted(tree, (32, 32), (3, 3), np.array([0.5, 1.0, 2.0]))
    back = pickle.loads(pickle.dumps(weighted))
    np.testing.assert_array_equal(back.weights, weighted.weights)
    u = np.random.default_rng(0).standard_normal(tree.n_vars)
    np.testing.assert_array_equal(prox(u, 0.4, penalty="tree_l2", tree=back),
                                  prox(u, 0.4, penalty="tree_l2", tree=weighted))


def test_weights_that_differ_within_a_band_still_give_the_exact_prox():
    shape, levels = (16, 16), (2, 2)
    tree = wavelet_tree(shape, "haar", levels)
    w = np.array(tree.weights)
    w[-7:] = 3.0  # inside the finest diagonal band: not one weight per band
    u = np.random.default_rng(1).standard_normal(tree.n_vars) * 2
    np.testing.assert_allclose(prox(u, 0.5, penalty="tree_l2", tree=tree.with_weights(w)),
                               prox(u, 0.5, penalty="tree_l2", tree=_general(shape, levels, w)), atol=1e-13, rtol=0)


@pytest.mark.parametrize("shape, levels", [((64, 64), (6, 6)), ((16, 16, 16), (4, 4, 4)), ((8, 32), (1, 4))])
@pytest.mark.parametrize("lam", [0.05, 0.5, 4.0, 40.0])
def test_regular_linf_equals_general_layout_on_ties_and_deep_clips(shape, levels, lam):
    # integer magnitudes tie everywhere; large lam makes the clip levels of the top groups reach deep
    regular = wavelet_tree(shape, "haar", levels, True)
    general = _general(shape, levels, regular.weights)
    rng = np.random.default_rng(3)
    U = np.concatenate([rng.integers(-3, 4, (regular.n_vars, 2)).astype(float),
                        rng.standard_normal((regular.n_vars, 2)) * rng.exponential(2.0, (regular.n_vars, 2))], axis=1)
    got = prox(U, lam, penalty="tree_linf", tree=regular)
    want = prox(U, lam, penalty="tree_linf", tree=general)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * max(1.0, np.abs(U).max()))
    assert np.count_nonzero(got) > 0 or lam == 40.0
