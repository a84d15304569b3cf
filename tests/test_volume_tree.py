"""The n-D wavelet tree (quad-tree in 2-D, octree in 3-D) and its transform."""

import itertools
import warnings

import numpy as np
import pytest
import pywt
from hypothesis import given
from hypothesis import strategies as st

from restore import Tree, prox, wavelet_quadtree, wavelet_tree
from restore.wavelet import (
    band_layout,
    level_splits,
    quadtree_parents,
    wavelet_forward,
    wavelet_inverse,
    wavelet_tree_parents,
)


def naive_parents(shape, splits):
    """Brute force: every coefficient's parent from the positions of all coefficients (no index arithmetic)."""
    bands = band_layout(shape, splits)
    coeffs = []  # (level, orientation, position) per flat index
    for b in bands:
        coeffs += [(b.level, b.orientation, p) for p in itertools.product(*[range(s) for s in b.shape])]
    approx = bands[0]
    out = []
    for level, o, p in coeffs:
        if o == 0:
            out.append(-1)
            continue
        found = -1
        mask = splits[level] if level < len(splits) else 0
        for j, (lv, oo, q) in enumerate(coeffs):
            if lv == level + 1 and oo == o:
                # q's children: 2q, 2q + 1 along the axes level + 1 splits, q itself along the others
                kids = [(2 * qa, 2 * qa + 1) if (mask >> a) & 1 else (qa,) for a, qa in enumerate(q)]
                if all(pa in ka for pa, ka in zip(p, kids, strict=True)):
                    found = j
                    break
        if found < 0:  # no parent band: the approximation coefficient over the same place
            mine = next(b for b in bands if b.level == level and b.orientation == o)
            ratio = [s // t for s, t in zip(mine.shape, approx.shape, strict=True)]
            for j, (_, _, q) in enumerate(coeffs[:approx.size]):
                if all(qa * r <= pa < (qa + 1) * r for pa, qa, r in zip(p, q, ratio, strict=True)):
                    found = j
                    break
        out.append(found)
    return np.array(out)


@given(nd=st.sampled_from([2, 3]), data=st.data())
def test_parents_match_brute_force(nd, data):
    levels = tuple(data.draw(st.integers(0, 3)) for _ in range(nd))
    if max(levels) == 0:
        levels = (1,) + levels[1:]
    # 3-D: 3 levels times 3 would make 24**3 coefficients, too many for the quadratic brute force; 3 below 3 levels
    shape = tuple(data.draw(st.integers(1, 3 if nd == 2 or n < 3 else 2)) << n for n in levels)
    splits = level_splits(levels)
    np.testing.assert_array_equal(wavelet_tree_parents(shape, splits), naive_parents(shape, splits))


def test_octree_children_and_roots():
    shape, levels = (8, 16, 16), (1, 3, 3)
    splits = level_splits(levels)
    assert splits == (6, 6, 7)  # z is halved at the coarsest level only
    parents = wavelet_tree_parents(shape, splits)
    counts = np.bincount(parents[parents >= 0], minlength=parents.size)
    bands = band_layout(shape, splits)
    approx = bands[0]
    assert np.all(parents[: approx.size] == -1) and np.all(parents[approx.size:] >= 0)
    assert np.all(counts[: approx.size] == 7)  # seven orientation trees below each approximation coefficient
    for b in bands[1:]:
        c = counts[b.start:b.start + b.size]
        if b.level == 3 and b.orientation & 1:
            assert np.all(c == 0)  # z-detail orientations: z is not split below, they are leaves
        elif b.level == 3:
            assert np.all(c == 8)  # level 3 halves z, y, x: 8 children at level 2
        elif b.level == 2:
            assert np.all(c == 4)  # level 2 halves y and x only: 4 children, same z
        else:
            assert np.all(c == 0)
    assert len([b for b in bands if b.level == 3]) == 8  # approximation and 7 orientations
    assert len([b for b in bands if b.level == 1]) == 3


def test_quadtree_is_the_2d_case():
    for shape, level in [((64, 32), 3), ((16, 16), 4), ((24, 40), 3)]:
        bands = [(shape[0] >> level, shape[1] >> level)] + [(shape[0] >> lv, shape[1] >> lv)
                                                           for lv in range(level, 0, -1)]
        np.testing.assert_array_equal(wavelet_tree_parents(shape, level_splits((level, level))),
                                      quadtree_parents(tuple(bands)))
        np.testing.assert_array_equal(wavelet_quadtree(shape, "haar", level).parents,
                                      wavelet_tree(shape, "haar", level).parents)


@pytest.mark.parametrize(("shape", "levels", "wavelet"), [
    ((16, 32, 32), (3, 3, 3), "db3"), ((8, 16, 32), (2, 3, 4), "sym4"), ((12, 20), (2, 2), "haar"),
    ((4, 16, 16), (0, 2, 3), "db2"), ((6, 8, 10), (0, 0, 0), "haar"), ((6, 10), (0, 0), "haar")])
def test_transform_is_orthonormal_and_matches_pywt(shape, levels, wavelet, rng):
    x = rng.standard_normal(shape)
    splits = level_splits(levels)
    c = wavelet_forward(x, wavelet, splits)
    assert c.size == x.size
    assert np.sum(c**2) == pytest.approx(np.sum(x**2), rel=1e-10)
    np.testing.assert_allclose(wavelet_inverse(c, wavelet, splits, shape), x, atol=1e-10)
    if len(set(levels)) == 1:  # equal levels: PyWavelets' own layout
        with warnings.catch_warnings():  # deep levels on small sides: PyWavelets warns of boundary effects
            warnings.simplefilter("ignore", UserWarning)
            ref = pywt.ravel_coeffs(pywt.wavedecn(x, wavelet, mode="periodization", level=levels[0]))[0]
        np.testing.assert_allclose(c, ref, atol=1e-12)


def test_isotropic_octree_has_seven_trees_per_root():
    shape, levels = (8, 8, 8), (2, 2, 2)
    tree = wavelet_tree(shape, "haar", levels)
    assert isinstance(tree, Tree) and tree.n_vars == 512 and tree.depth == 3
    counts = np.bincount(tree.parents[tree.parents >= 0], minlength=512)
    bands = band_layout(shape, level_splits(levels))
    assert np.all(counts[: bands[0].size] == 7)  # one tree per orientation below each approximation coefficient
    coarse = [b for b in bands if b.level == 2 and b.orientation]
    assert all(np.all(counts[b.start:b.start + b.size] == 8) for b in coarse)
    assert np.all(tree.weights[: bands[0].size] == 0) and np.all(tree.weights[bands[0].size:] == 1)


def test_wavelet_tree_errors():
    with pytest.raises(ValueError, match="2 or 3 sides"):
        wavelet_tree((8,), "haar", 1)
    with pytest.raises(ValueError, match="not divisible"):
        wavelet_tree((12, 16, 16), "haar", 3)
    with pytest.raises(ValueError, match="one integer >= 0 per axis"):
        wavelet_tree((16, 16, 16), "haar", (1, 2))


def test_with_weights_shares_the_layout(rng):
    tree = wavelet_tree((8, 16, 16), "haar", (2, 3, 3))
    w = rng.uniform(0.5, 2.0, tree.n_nodes)
    a, b = tree.with_weights(w), Tree.from_parents(tree.parents, weights=w)
    u = rng.standard_normal(tree.n_vars) * 3
    for penalty in ("tree_l2", "tree_linf", "tree_l0"):
        np.testing.assert_array_equal(prox(u, 0.7, penalty=penalty, tree=a), prox(u, 0.7, penalty=penalty, tree=b))
    with pytest.raises(ValueError, match="weights must be finite"):
        tree.with_weights(-w)
