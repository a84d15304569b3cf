import numpy as np
import pytest
from hypothesis import given
from strategies import trees

from restore import Tree


def test_from_parents_default_groups():
    t = Tree.from_parents([-1, 0, 0, 1])
    assert (t.n_nodes, t.n_vars, t.depth) == (4, 4, 3)
    np.testing.assert_array_equal(t.roots, [0])
    np.testing.assert_array_equal(t.children(0), [1, 2])
    np.testing.assert_array_equal(t.group(1), [1, 3])
    np.testing.assert_array_equal(t.group(0), [0, 1, 2, 3])
    np.testing.assert_array_equal(t.weights, np.ones(4))


def test_children_may_have_smaller_ids_and_nodes_may_own_nothing():
    t = Tree.from_parents([2, 2, -1, -1], groups=[[3], [], [0, 2], [1]], weights=[1, 2, 0, 1])
    assert t.n_vars == 4 and t.depth == 2
    np.testing.assert_array_equal(t.roots, [2, 3])
    np.testing.assert_array_equal(t.group(2), [0, 2, 3])
    np.testing.assert_array_equal(t.node_vars(1), [])


def test_balanced():
    t = Tree.balanced((10, 2, 2))
    assert t.n_nodes == 71 and t.n_vars == 71 and t.depth == 4
    assert len(t.children(0)) == 10 and all(len(t.children(c)) == 2 for c in t.children(0))
    assert Tree.balanced(()).n_nodes == 1
    with pytest.raises(ValueError, match="branching"):
        Tree.balanced((3, 0))


def test_immutable():
    t = Tree.from_parents([-1, 0])
    with pytest.raises(AttributeError):
        t.n_nodes = 3
    with pytest.raises(ValueError):
        t.parents[0] = 1
    with pytest.raises(ValueError):
        t.weights[0] = 2.0
    with pytest.raises(TypeError):
        Tree()


def test_input_arrays_are_copied():
    par = np.array([-1, 0])
    w = np.array([1.0, 2.0])
    t = Tree.from_parents(par, weights=w)
    par[1] = -1
    w[1] = 5
    np.testing.assert_array_equal(t.parents, [-1, 0])
    np.testing.assert_array_equal(t.weights, [1, 2])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"parents": [-1, 5]}, r"parents\[1\] = 5 is out of range"),
        ({"parents": [-1, -2]}, r"parents\[1\] = -2 is out of range"),
        ({"parents": [1, 0]}, "cycle"),
        ({"parents": [-1, 2, 1]}, "cycle"),
        ({"parents": [0]}, "cycle"),
        ({"parents": [[-1, 0]]}, "one-dimensional"),
        ({"parents": [-1, 0.5]}, "integers"),
        ({"parents": [-1, 0], "groups": [[0], [0]]}, "variable 0 is owned by 2 nodes"),
        ({"parents": [-1, 0], "groups": [[0], [2]]}, "out of range"),
        ({"parents": [-1, 0], "groups": [[0]]}, "one entry per node"),
        ({"parents": [-1, 0], "weights": [1.0]}, "weights must have shape"),
        ({"parents": [-1, 0], "weights": [1.0, -1.0]}, "finite and >= 0"),
        ({"parents": [-1, 0], "weights": [1.0, np.nan]}, "finite and >= 0"),
    ],
)
def test_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Tree.from_parents(**kwargs)


def test_missing_variable_is_reported():
    # three entries, so variables must be 0..2; 1 appears twice and 2 never
    with pytest.raises(ValueError, match="owned by"):
        Tree.from_parents([-1, 0], groups=[[0, 1], [1]])


def test_node_queries_validate():
    t = Tree.from_parents([-1, 0])
    with pytest.raises(ValueError, match="node must be"):
        t.children(2)


def test_pickle_roundtrip():
    import pickle

    t = Tree.from_parents([2, 2, -1], groups=[[1], [2], [0]], weights=[1, 2, 0])
    t2 = pickle.loads(pickle.dumps(t))
    np.testing.assert_array_equal(t2.parents, t.parents)
    np.testing.assert_array_equal(t2.weights, t.weights)
    np.testing.assert_array_equal(t2.group(2), t.group(2))


@given(trees(max_nodes=20))
def test_layout_is_depth_first(tree):
    lay = tree.dfs_layout()
    assert sorted(lay.nodes.tolist()) == list(range(tree.n_nodes))
    assert sorted(lay.variables.tolist()) == list(range(tree.n_vars))
    pos = {int(v): k for k, v in enumerate(lay.nodes)}
    starts = np.concatenate([[0], np.cumsum(lay.own_counts)])
    for n in range(tree.n_nodes):
        k = pos[n]
        p = tree.parents[n]
        assert lay.parents[k] == (-1 if p < 0 else pos[int(p)])
        # each group is a contiguous run of the layout, starting at the node's own variables
        g = tree.group(n)
        run = lay.variables[starts[k]:starts[k] + g.size]
        assert sorted(run.tolist()) == g.tolist()
        np.testing.assert_array_equal(np.sort(lay.variables[starts[k]:starts[k + 1]]), tree.node_vars(n))


def test_with_weights_keeps_the_structure_and_changes_the_penalty():
    import numpy as np

    from restore import prox

    tree = Tree.from_parents([-1, 0, 0, 1], groups=[[3], [0], [1, 2], []])
    heavier = tree.with_weights([1.0, 2.0, 2.0, 2.0])
    assert heavier.parents.tolist() == tree.parents.tolist() and heavier.weights.tolist() == [1, 2, 2, 2]
    assert [heavier.group(n).tolist() for n in range(4)] == [tree.group(n).tolist() for n in range(4)]
    u = np.array([3.0, -1.0, 2.0, 0.5])
    assert np.linalg.norm(prox(u, 0.3, penalty="tree_l2", tree=heavier)) < np.linalg.norm(
        prox(u, 0.3, penalty="tree_l2", tree=tree))
