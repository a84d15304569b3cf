import naive
import numpy as np
import pytest
import pywt
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from strategies import trees

from restore import PENALTIES, TREE_PENALTIES, Tree, penalty_value, prox

finite = st.floats(-100, 100, allow_nan=False, allow_infinity=False)
lams = st.one_of(st.just(0.0), st.floats(1e-3, 50.0))


@st.composite
def tree_and_signal(draw, max_nodes=12, **kw):
    tree = draw(trees(max_nodes=max_nodes, **kw))
    u = draw(arrays(np.float64, tree.n_vars, elements=finite))
    return tree, u


# ---------------------------------------------------------------------------
# Optimality of the convex tree norms
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("penalty", ["tree_l2", "tree_linf"])
@given(data=tree_and_signal(max_nodes=15), lam=lams)
def test_convex_tree_prox_matches_sequential_composition(penalty, data, lam):
    tree, u = data
    v = prox(u, lam, penalty=penalty, tree=tree)
    atol = 1e-10 * max(1, np.abs(u).max(initial=0))
    np.testing.assert_allclose(v, naive.prox_sequential(u, lam, penalty, tree), rtol=0, atol=atol)


@pytest.mark.parametrize("penalty", ["tree_l2", "tree_linf"])
@given(data=tree_and_signal(max_nodes=15), lam=lams, seed=st.integers(0, 2**32 - 1))
def test_convex_tree_prox_is_optimal(penalty, data, lam, seed):
    """F is 1-strongly convex: F(x) >= F(v) + 0.5||x - v||^2 for every x at the optimum v."""
    tree, u = data
    assume(tree.n_vars > 0)
    v = prox(u, lam, penalty=penalty, tree=tree)
    fv = naive.objective(u, v, lam, penalty, tree)
    rng = np.random.default_rng(seed)
    scale = max(1.0, np.abs(u).max())
    candidates = [u, np.zeros_like(u), np.maximum(u, 0)]
    for eps in (1e-6, 1e-3, 1e-1, 1.0):
        candidates += [v + eps * scale * rng.standard_normal(u.shape) for _ in range(5)]
        candidates += [v * (1 + eps), v * (1 - eps)]
    for n in range(tree.n_nodes):  # zero or grow each group in turn
        for f in (0.0, 1.01):
            x = v.copy()
            x[tree.group(n)] *= f
            candidates.append(x)
    for x in candidates:
        gap = naive.objective(u, x, lam, penalty, tree) - fv - 0.5 * np.sum((x - v) ** 2)
        assert gap >= -1e-9 * scale**2


@pytest.mark.parametrize("penalty", ["tree_l2", "tree_linf"])
@given(data=tree_and_signal(max_nodes=12), lam=lams)
def test_residual_is_in_the_subdifferential(penalty, data, lam):
    """u - v = sum of group terms xi_g (those of the sequential composition) with
    ||xi_g||_* <= lam w_g and <xi_g, v> = lam w_g ||v_g||: a dual certificate."""
    tree, u = data
    v = prox(u, lam, penalty=penalty, tree=tree)
    total = np.zeros_like(u)
    cur = u.astype(float).copy()
    scale = max(1.0, np.abs(u).max(initial=0))
    for n in naive.postorder(tree):
        g = tree.group(n)
        t = lam * tree.weights[n]
        if t == 0 or g.size == 0:
            continue
        before = cur[g].copy()
        if penalty == "tree_l2":
            nrm = np.linalg.norm(before)
            cur[g] = 0.0 if nrm <= t else before * (1 - t / nrm)
        else:
            cur[g] = before - naive.project_l1_ball(before, t)
        xi = before - cur[g]
        dual = np.linalg.norm(xi) if penalty == "tree_l2" else np.abs(xi).sum()
        assert dual <= t * (1 + 1e-9) + 1e-12
        vg = v[g]
        norm_vg = np.linalg.norm(vg) if penalty == "tree_l2" else np.abs(vg).max()
        assert abs(xi @ vg - t * norm_vg) <= 1e-8 * scale * (1 + t)
        total[g] += xi
    np.testing.assert_allclose(total, u - v, atol=1e-9 * scale)


# ---------------------------------------------------------------------------
# tree_l0 and the elementwise penalties
# ---------------------------------------------------------------------------


@given(data=tree_and_signal(max_nodes=10, max_own=2), lam=lams)
def test_tree_l0_is_the_brute_force_optimum(data, lam):
    tree, u = data
    v = prox(u, lam, penalty="tree_l0", tree=tree)
    # v copies u on kept variables and is zero elsewhere
    assert np.all((v == u) | (v == 0))
    fv = naive.objective(u, v, lam, "tree_l0", tree)
    assert fv <= naive.tree_l0_brute_force(u, lam, tree) + 1e-9 * max(1, np.sum(u**2))


@given(data=tree_and_signal(max_nodes=10, max_own=2), lam=lams)
def test_tree_l0_integer_ties_go_to_zero(data, lam):
    tree, u = data
    u = np.round(u)
    v = prox(u, lam, penalty="tree_l0", tree=tree)
    # a single node whose cost ties exactly is zeroed
    single = Tree.from_parents([-1])
    assert prox(np.array([2.0]), 2.0, penalty="tree_l0", tree=single)[0] == 0.0
    assert prox(np.array([2.0]), 1.999, penalty="tree_l0", tree=single)[0] == 2.0
    assert naive.objective(u, v, lam, "tree_l0", tree) <= naive.tree_l0_brute_force(u, lam, tree) + 1e-9


@given(u=arrays(np.float64, st.integers(0, 50), elements=finite), lam=st.floats(1e-3, 50.0))
def test_l1_is_pywt_soft_threshold(u, lam):
    with np.errstate(all="ignore"):  # pywt divides by |u|, which may be 0 or subnormal
        expected = np.nan_to_num(pywt.threshold(u, lam, "soft"))
    np.testing.assert_allclose(prox(u, lam, penalty="l1"), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("penalty", PENALTIES)
def test_lam_zero_is_identity(penalty):
    tree = Tree.balanced((2, 2))
    u = np.array([0.0, -1.0, 2.0, 1e-300, 0.0, 3.0, -7.0])
    np.testing.assert_array_equal(prox(u, 0.0, penalty=penalty, tree=tree), u)


@given(u=arrays(np.float64, st.integers(0, 50), elements=finite), lam=st.floats(1e-3, 50.0))
def test_l0_is_pywt_hard_threshold_away_from_ties(u, lam):
    thr = np.sqrt(2 * lam)
    assume(not np.any(np.isclose(np.abs(u), thr, rtol=1e-12, atol=0)))
    np.testing.assert_array_equal(prox(u, lam, penalty="l0"), pywt.threshold(u, thr, "hard"))


def test_l0_ties_go_to_zero():
    np.testing.assert_array_equal(prox(np.array([2.0, -2.0, 2.5]), 2.0, penalty="l0"), [0.0, 0.0, 2.5])


# ---------------------------------------------------------------------------
# Positivity, batches, dtypes, read-only and empty inputs
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("penalty", PENALTIES)
@given(data=tree_and_signal(max_nodes=12), lam=lams)
def test_positive_is_prox_of_positive_part(penalty, data, lam):
    tree, u = data
    v = prox(u, lam, penalty=penalty, tree=tree, positive=True)
    np.testing.assert_array_equal(v, prox(np.maximum(u, 0), lam, penalty=penalty, tree=tree))
    assert np.all(v >= 0)


@pytest.mark.parametrize("penalty", PENALTIES)
def test_batches_equal_columns_and_use_threads(penalty, rng):
    tree = Tree.balanced((10, 3, 3))
    U = rng.standard_normal((tree.n_vars, 3000)) * 3  # large enough to be split among threads
    V = prox(U, 0.7, penalty=penalty, tree=tree)
    for j in (0, 1, 1499, 2999):
        np.testing.assert_array_equal(V[:, j], prox(U[:, j], 0.7, penalty=penalty, tree=tree))


@pytest.mark.parametrize("penalty", PENALTIES)
def test_dtypes(penalty, rng):
    tree = Tree.balanced((3, 2))
    u64 = rng.standard_normal((tree.n_vars, 4))
    v64 = prox(u64, 0.3, penalty=penalty, tree=tree)
    v32 = prox(u64.astype(np.float32), 0.3, penalty=penalty, tree=tree)
    assert v64.dtype == np.float64 and v32.dtype == np.float32
    if penalty not in ("l0", "tree_l0"):  # hard decisions may flip at float32 precision
        np.testing.assert_allclose(v32, v64, rtol=1e-5, atol=1e-5)
    vi = prox(np.arange(tree.n_vars) - 4, 1.0, penalty=penalty, tree=tree)
    assert vi.dtype == np.float64
    assert prox(np.ones(tree.n_vars, dtype=bool), 0.1, penalty=penalty, tree=tree).dtype == np.float64


@pytest.mark.parametrize("penalty", PENALTIES)
def test_input_never_modified_and_read_only_accepted(penalty, rng):
    tree = Tree.balanced((3, 2))
    for u in (rng.standard_normal(tree.n_vars), rng.standard_normal((tree.n_vars, 3)),
              np.asfortranarray(rng.standard_normal((tree.n_vars, 3)))):
        before = u.copy()
        u.setflags(write=False)
        v = prox(u, 0.5, penalty=penalty, tree=tree)
        np.testing.assert_array_equal(u, before)
        assert v.shape == u.shape and not np.shares_memory(u, v)
        v[...] = 0  # the output is writable and owned by the caller
        np.testing.assert_array_equal(u, before)


@pytest.mark.parametrize("penalty", PENALTIES)
def test_empty_inputs(penalty):
    tree = Tree.from_parents([-1, 0], groups=[[], []])
    assert prox(np.zeros(0), 1.0, penalty=penalty, tree=tree).shape == (0,)
    assert prox(np.zeros((0, 3)), 1.0, penalty=penalty, tree=tree).shape == (0, 3)
    t3 = Tree.balanced((2,))
    assert prox(np.zeros((3, 0)), 1.0, penalty=penalty, tree=t3).shape == (3, 0)
    assert penalty_value(np.zeros((3, 0)), penalty=penalty, tree=t3).shape == (0,)


@pytest.mark.parametrize("penalty", TREE_PENALTIES)
def test_weight_zero_root_never_gives_nan(penalty):
    # SPAMS returns NaN for tree-l2 under a weight-0 root when everything vanishes.
    tree = Tree.from_parents([-1, 0, 0, 1], weights=[0.0, 1.0, 1.0, 1.0])
    for u in (np.array([0.0, 1e-3, -1e-3, 2e-3]), np.zeros(4), np.array([5.0, 0.1, 0.2, 0.1])):
        v = prox(u, 10.0, penalty=penalty, tree=tree)
        assert np.all(np.isfinite(v))
        if penalty != "tree_l0":
            assert v[0] == u[0]  # the unpenalised root keeps its own variable


@given(data=tree_and_signal(max_nodes=12), penalty=st.sampled_from(PENALTIES))
def test_penalty_value_matches_definition(data, penalty):
    tree, u = data
    val = penalty_value(u, penalty=penalty, tree=tree)
    if penalty == "l1":
        expected = np.abs(u).sum()
    elif penalty == "l0":
        expected = np.count_nonzero(u)
    else:
        expected = naive.omega(u, penalty, tree)
    assert val == pytest.approx(expected, rel=1e-12, abs=1e-12)
    U = np.stack([u, 2 * u], axis=1)
    assert penalty_value(U, penalty=penalty, tree=tree).shape == (2,)


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


def test_errors():
    tree = Tree.balanced((2,))
    u = np.zeros(3)
    with pytest.raises(ValueError, match=r"Invalid penalty: 'l2'; supported penalties are l1, l0, tree_l2"):
        prox(u, 1.0, penalty="l2", tree=tree)
    with pytest.raises(ValueError, match="needs a tree"):
        prox(u, 1.0, penalty="tree_l2")
    with pytest.raises(ValueError, match="u has 4 variables along its first axis but the tree has 3"):
        prox(np.zeros(4), 1.0, penalty="tree_linf", tree=tree)
    with pytest.raises(ValueError, match="NaN or infinite"):
        prox(np.array([0.0, np.nan, 1.0]), 1.0, penalty="l1")
    with pytest.raises(ValueError, match="NaN or infinite"):
        prox(np.array([0.0, np.inf, 1.0]), 1.0, penalty="tree_l0", tree=tree)
    for bad in (-1.0, np.nan, np.inf):
        with pytest.raises(ValueError, match="lam must be finite and >= 0"):
            prox(u, bad, penalty="l1")
    with pytest.raises(ValueError, match="lam must be finite and >= 0"):
        prox(u, "big", penalty="l1")
    with pytest.raises(ValueError, match=r"shape \(p,\) or \(p, n\), got 3 dimensions"):
        prox(np.zeros((3, 1, 1)), 1.0, penalty="l1")
    with pytest.raises(ValueError, match="real numeric array"):
        prox(np.array(["a"]), 1.0, penalty="l1")
    with pytest.raises(TypeError, match="restore.Tree"):
        prox(u, 1.0, penalty="tree_l2", tree=[-1, 0, 0])
    with pytest.raises(ValueError, match="Invalid penalty"):
        penalty_value(u, penalty="tree-l2", tree=tree)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_or_inf_anywhere_is_rejected_whatever_the_layout(order, dtype, bad):
    tree = Tree.balanced((3, 2))
    U = np.ones((tree.n_vars, 37), dtype=dtype, order=order)
    for where in [(0, 0), (tree.n_vars - 1, 36), (4, 17)]:
        V = U.copy(order=order)
        V[where] = bad
        with pytest.raises(ValueError, match="NaN or infinite"):
            prox(V, 0.5, penalty="tree_l2", tree=tree)
        with pytest.raises(ValueError, match="NaN or infinite"):
            prox(V[:, where[1]], 0.5, penalty="tree_l0", tree=tree)
    np.testing.assert_array_equal(prox(U, 0.0, penalty="tree_l2", tree=tree), U)
