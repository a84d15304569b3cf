"""Trees of variables: the structure every tree penalty is defined on."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from . import _core
from ._core_regular import Bands

__all__ = ["Tree"]


class _Flat(NamedTuple):
    """The flat arrays the kernels of :mod:`restore._core` take."""

    perm: NDArray[np.int64]
    own_ptr: NDArray[np.int64]
    node_end: NDArray[np.int64]
    parent: NDArray[np.int64]
    weights: NDArray[np.float64]


class DFSLayout(NamedTuple):
    """Depth-first layout of a :class:`Tree` (see :meth:`Tree.dfs_layout`)."""

    nodes: NDArray[np.int64]
    variables: NDArray[np.int64]
    own_counts: NDArray[np.int64]
    parents: NDArray[np.int64]


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


class Tree:
    """An immutable tree (or forest) of groups of variables.

    Nodes are numbered ``0 .. n_nodes - 1`` and each owns zero or more of the
    variables ``0 .. n_vars - 1``; every variable belongs to exactly one node.
    The *group* of node ``n`` is the set of variables owned by ``n`` and all
    its descendants, and carries the weight ``weights[n]``. The tree
    penalties of :func:`restore.prox` are sums over these groups.

    Build a tree with :meth:`from_parents` or :meth:`balanced` (or
    :func:`restore.wavelet_quadtree` for images); do not call the
    constructor. The tree computes its own depth-first layout, in which every
    group is a contiguous range of variables; callers never permute their
    data.

    Attributes
    ----------
    parents : ndarray of int64, shape (n_nodes,)
        Parent of each node, -1 for a root (read-only).
    weights : ndarray of float64, shape (n_nodes,)
        Weight of each node's group (read-only).
    n_nodes, n_vars, depth : int
        Number of nodes, of variables, and of nodes on the longest path from
        a root to a leaf.
    roots : ndarray of int64
        The roots, in increasing order.
    """

    __slots__ = ("parents", "weights", "n_nodes", "n_vars", "depth", "roots",
                 "_owner", "_order", "_pos", "_flat", "_regular", "_parents_of",
                 "__weakref__")  # weak: the plan cache, restore._cache

    # Built on first use for a regular tree (the kernels of restore._core_regular need none of them).
    _LAZY = frozenset({"parents", "weights", "depth", "roots", "_owner", "_order", "_pos", "_flat"})

    def __init__(self, *, _token: object = None, **state: object) -> None:
        if _token is not _TOKEN:
            raise TypeError("build a Tree with Tree.from_parents or Tree.balanced")
        for name, value in state.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Tree is immutable")

    def __getattr__(self, name: str) -> object:
        # only reached for a slot not set yet: the general layout of a regular tree, built once when first asked
        if name not in Tree._LAZY or object.__getattribute__(self, "_regular") is None:
            raise AttributeError(name)
        regular = self._regular
        if name == "weights":  # one value per band: no traversal needed
            w = np.repeat(regular.weight, np.prod(regular.shape, axis=1))
            object.__setattr__(self, "weights", _readonly(w))
            return self.weights
        full = Tree._build(self._parents_of(), None, self.weights)
        for slot in Tree._LAZY:
            object.__setattr__(self, slot, object.__getattribute__(full, slot))
        return object.__getattribute__(self, name)

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Tree is immutable")

    def __repr__(self) -> str:
        return (f"Tree(n_nodes={self.n_nodes}, n_vars={self.n_vars}, "
                f"depth={self.depth}, n_roots={len(self.roots)})")

    def __reduce__(self):
        if self._regular is not None:
            return (Tree._from_regular, (self._regular, self._parents_of))
        return (_rebuild, (self.parents, self._owner, self.weights))

    # ------------------------------------------------------------------
    # Builders
    # ------------------------------------------------------------------

    @classmethod
    def from_parents(
        cls,
        parents: ArrayLike,
        groups: Sequence[Sequence[int]] | None = None,
        weights: ArrayLike | None = None,
    ) -> Tree:
        """Build a tree or forest from the parent of each node.

        Parameters
        ----------
        parents : array_like of int, shape (n_nodes,)
            ``parents[n]`` is the parent of node ``n``, -1 for a root. Any
            numbering is allowed (a child may have a smaller id than its
            parent) and several roots make a forest.
        groups : sequence of sequences of int, optional
            ``groups[n]`` lists the variables node ``n`` owns (possibly none).
            Together they must cover ``0 .. n_vars - 1`` exactly once. By
            default node ``n`` owns variable ``n``.
        weights : array_like of float, shape (n_nodes,), optional
            Weight of each node's group (the node and all its descendants),
            finite and >= 0; 0 leaves the group unpenalised. Default: ones.

        Returns
        -------
        Tree

        Raises
        ------
        ValueError
            On parents out of range or forming a cycle, a variable owned twice
            or by no node, invalid weights or mismatched lengths.

        Examples
        --------
        >>> from restore import Tree
        >>> t = Tree.from_parents([-1, 0, 0], groups=[[0], [1, 2], []])
        >>> t.n_nodes, t.n_vars, t.depth
        (3, 3, 2)
        """
        par = _as_int_vector(parents, "parents")
        n_nodes = par.shape[0]
        owner = None if groups is None else _owner_from_groups(groups, n_nodes)
        return cls._build(par, owner, weights)

    @classmethod
    def balanced(cls, branching: Sequence[int]) -> Tree:
        """A balanced tree with one variable per node.

        Parameters
        ----------
        branching : sequence of int
            Number of children of the root, of each of its children, and so
            on: ``(10, 2, 2)`` gives 1 + 10 + 20 + 40 = 71 nodes. An empty
            sequence gives a single node.

        Returns
        -------
        Tree
            Nodes are numbered breadth-first (root 0, then its children...);
            node ``n`` owns variable ``n``; all weights are 1.

        Examples
        --------
        >>> Tree.balanced((10, 2, 2)).n_nodes
        71
        """
        branching = tuple(branching)
        if not all(isinstance(b, (int, np.integer)) and b >= 1 for b in branching):
            raise ValueError(f"branching must be a sequence of integers >= 1, got {branching!r}")
        parents = [np.array([-1], dtype=np.int64)]
        start, width = 0, 1
        for b in branching:
            parents.append(np.repeat(np.arange(start, start + width, dtype=np.int64), b))
            start, width = start + width, width * b
        par = np.concatenate(parents)
        return cls._build(par, None, None)

    @classmethod
    def _build(cls, par: np.ndarray, owner: np.ndarray | None, weights: ArrayLike | None) -> Tree:
        """Validate and lay out; ``owner[j]`` is the node owning variable ``j`` (None: node j owns j)."""
        n_nodes = par.shape[0]
        if n_nodes and (par.min() < -1 or par.max() >= n_nodes):
            bad = int(np.flatnonzero((par < -1) | (par >= n_nodes))[0])
            raise ValueError(
                f"parents[{bad}] = {par[bad]} is out of range: expected -1 (root) "
                f"or a node id in [0, {n_nodes})")
        if weights is None:
            w = np.ones(n_nodes)
        else:
            w = np.array(weights, dtype=np.float64, copy=True)
            if w.shape != (n_nodes,):
                raise ValueError(f"weights must have shape ({n_nodes},) like parents, got {w.shape}")
            if not np.all(np.isfinite(w)) or np.any(w < 0):
                bad = int(np.flatnonzero(~np.isfinite(w) | (w < 0))[0])
                raise ValueError(f"weights must be finite and >= 0, got weights[{bad}] = {w[bad]}")
        order, node_end, depth_pre, parent_pre, pos, count = _core.preorder(par)
        if count < n_nodes:
            bad = int(np.flatnonzero(pos < 0)[0])
            raise ValueError(f"parents contains a cycle: node {bad} is not below any root")
        if owner is None:  # node n owns variable n: the layout is the preorder itself
            owner = np.arange(n_nodes, dtype=np.int64)
            perm = order.copy()
            own_ptr = np.arange(n_nodes + 1, dtype=np.int64)
        else:
            node_of_var = pos[owner]
            perm = np.argsort(node_of_var, kind="stable").astype(np.int64)
            own_ptr = np.zeros(n_nodes + 1, dtype=np.int64)
            np.cumsum(np.bincount(node_of_var, minlength=n_nodes), out=own_ptr[1:])
        flat = _Flat(
            perm=_readonly(perm),
            own_ptr=_readonly(own_ptr),
            node_end=_readonly(node_end),
            parent=_readonly(parent_pre),
            weights=_readonly(np.ascontiguousarray(w[order])),
        )
        return cls(
            _token=_TOKEN,
            parents=_readonly(par.copy()),
            weights=_readonly(w),
            n_nodes=int(n_nodes),
            n_vars=int(owner.shape[0]),
            depth=int(depth_pre.max()) if n_nodes else 0,
            roots=_readonly(np.flatnonzero(par == -1).astype(np.int64)),
            _owner=_readonly(owner),
            _order=_readonly(order),
            _pos=_readonly(pos),
            _flat=flat,
            _regular=None,
            _parents_of=None,
        )

    @classmethod
    def _from_regular(cls, regular: Bands, parents_of: Callable[[], np.ndarray]) -> Tree:
        """A wavelet tree walked by index arithmetic (:mod:`restore._core_regular`).

        ``parents_of()`` gives the parent of every node (node ``n`` owning
        variable ``n``), for the queries and kernels that need the general
        layout: it is built on first use only.
        """
        n = regular.n_coeffs
        return cls(_token=_TOKEN, n_nodes=n, n_vars=n, _regular=regular, _parents_of=parents_of)

    # ------------------------------------------------------------------
    # Queries
    # ------------------------------------------------------------------

    def children(self, node: int) -> NDArray[np.int64]:
        """The children of ``node``, in increasing id.

        Parameters
        ----------
        node : int
            A node id, in ``[0, n_nodes)``.

        Returns
        -------
        ndarray of int64
            The ids of its children (empty for a leaf).
        """
        self._check_node(node)
        return np.flatnonzero(self.parents == node).astype(np.int64)

    def node_vars(self, node: int) -> NDArray[np.int64]:
        """The variables ``node`` owns itself, in increasing order.

        Parameters
        ----------
        node : int
            A node id, in ``[0, n_nodes)``.

        Returns
        -------
        ndarray of int64
            The indices of its own variables (not its descendants').
        """
        self._check_node(node)
        f = self._flat
        k = self._pos[node]
        return np.sort(f.perm[f.own_ptr[k]:f.own_ptr[k + 1]])

    def group(self, node: int) -> NDArray[np.int64]:
        """The variables of the group of ``node`` (it and its descendants).

        Parameters
        ----------
        node : int
            A node id, in ``[0, n_nodes)``.

        Returns
        -------
        ndarray of int64
            The indices of the group's variables, in increasing order.
        """
        self._check_node(node)
        f = self._flat
        k = self._pos[node]
        return np.sort(f.perm[f.own_ptr[k]:f.own_ptr[f.node_end[k]]])

    def dfs_layout(self) -> DFSLayout:
        """The depth-first layout the tree computed for itself.

        Returns
        -------
        DFSLayout
            ``nodes``: node ids in preorder; ``variables``: variable ids in
            layout order (each subtree's variables are contiguous, a node's
            own variables first); ``own_counts``: number of variables each
            preorder node owns; ``parents``: preorder position of each
            preorder node's parent (-1 for roots). This is the order tools
            such as SPAMS require of their callers.
        """
        f = self._flat
        return DFSLayout(self._order, f.perm, np.diff(f.own_ptr), f.parent)

    def with_weights(self, weights: ArrayLike) -> Tree:
        """The same tree with other group weights, sharing the layout (O(n_nodes), no new traversal).

        Parameters
        ----------
        weights : array_like of float, shape (n_nodes,)
            The weight of each node's group, finite and >= 0 (0: unpenalised).

        Returns
        -------
        Tree
            A new tree; this one is unchanged.
        """
        w = np.array(weights, dtype=np.float64, copy=True)
        if w.shape != (self.n_nodes,):
            raise ValueError(f"weights must have shape ({self.n_nodes},) like parents, got {w.shape}")
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            bad = int(np.flatnonzero(~np.isfinite(w) | (w < 0))[0])
            raise ValueError(f"weights must be finite and >= 0, got weights[{bad}] = {w[bad]}")
        if self._regular is not None:
            reg = self._regular
            ends = reg.start + np.prod(reg.shape, axis=1)
            per_band = w[reg.start]
            if all(np.all(w[a:b] == v) for a, b, v in zip(reg.start, ends, per_band, strict=True)):
                return Tree._from_regular(reg._replace(weight=_readonly(per_band)), self._parents_of)
        state = {name: getattr(self, name) for name in self.__slots__ if name != "__weakref__"}
        state["_regular"] = state["_parents_of"] = None
        state["weights"] = _readonly(w)
        state["_flat"] = self._flat._replace(weights=_readonly(np.ascontiguousarray(w[self._order])))
        return Tree(_token=_TOKEN, **state)

    def _check_node(self, node: int) -> None:
        if not (isinstance(node, (int, np.integer)) and 0 <= node < self.n_nodes):
            raise ValueError(f"node must be an integer in [0, {self.n_nodes}), got {node!r}")


_TOKEN = object()


def _rebuild(parents: np.ndarray, owner: np.ndarray, weights: np.ndarray) -> Tree:
    return Tree._build(np.array(parents), np.array(owner), weights)


def _as_int_vector(a: ArrayLike, name: str) -> np.ndarray:
    arr = np.asarray(a)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if np.issubdtype(arr.dtype, np.floating) and np.all(arr == np.round(arr)):
            pass
        else:
            raise ValueError(f"{name} must hold integers, got dtype {arr.dtype}")
    return arr.astype(np.int64, copy=True)


def _owner_from_groups(groups: Sequence[Sequence[int]], n_nodes: int) -> np.ndarray:
    if len(groups) != n_nodes:
        raise ValueError(f"groups must have one entry per node ({n_nodes}), got {len(groups)}")
    sizes = np.fromiter((len(g) for g in groups), dtype=np.int64, count=n_nodes)
    p = int(sizes.sum())
    flat = (np.concatenate([np.asarray(g, dtype=np.int64).ravel() for g in groups])
            if p else np.zeros(0, dtype=np.int64))
    if flat.size != p:
        raise ValueError("groups must be a sequence of one-dimensional sequences of variable ids")
    if p and (flat.min() < 0 or flat.max() >= p):
        bad = int(flat[(flat < 0) | (flat >= p)][0])
        raise ValueError(
            f"groups owns variable {bad}, out of range: the {p} variables must be numbered 0..{p - 1}")
    counts = np.bincount(flat, minlength=p)
    if np.any(counts != 1):
        bad = int(np.flatnonzero(counts != 1)[0])
        what = "no node" if counts[bad] == 0 else f"{counts[bad]} nodes"
        raise ValueError(f"variable {bad} is owned by {what}: each variable must belong to exactly one node")
    owner = np.empty(p, dtype=np.int64)
    owner[flat] = np.repeat(np.arange(n_nodes, dtype=np.int64), sizes)
    return owner
