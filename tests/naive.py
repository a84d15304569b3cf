"""Naive reference implementations, written for clarity, not speed."""

from __future__ import annotations

import itertools

import numpy as np

from restore import Tree


def postorder(tree: Tree) -> list[int]:
    """Nodes, every child before its parent."""
    out: list[int] = []

    def visit(n: int) -> None:
        for c in tree.children(n):
            visit(int(c))
        out.append(n)

    for r in tree.roots:
        visit(int(r))
    return out


def project_l1_ball(v: np.ndarray, radius: float) -> np.ndarray:
    """Euclidean projection onto the l1 ball, by sorting."""
    a = np.abs(v)
    if a.sum() <= radius:
        return v.copy()
    s = np.sort(a)[::-1]
    cs = np.cumsum(s)
    k = np.arange(1, s.size + 1)
    rho = np.nonzero(s * k > cs - radius)[0][-1]
    theta = (cs[rho] - radius) / (rho + 1)
    return np.sign(v) * np.maximum(a - theta, 0)


def prox_sequential(u: np.ndarray, lam: float, penalty: str, tree: Tree) -> np.ndarray:
    """Compose the group proxes, children before parents (Jenatton et al.)."""
    v = np.array(u, dtype=float)
    for n in postorder(tree):
        g = tree.group(n)
        t = lam * tree.weights[n]
        if t == 0 or g.size == 0:
            continue
        if penalty == "tree_l2":
            nrm = np.linalg.norm(v[g])
            v[g] = 0.0 if nrm <= t else v[g] * (1 - t / nrm)
        else:
            v[g] = v[g] - project_l1_ball(v[g], t)
    return v


def omega(v: np.ndarray, penalty: str, tree: Tree) -> float:
    """Penalty value straight from the definition."""
    total = 0.0
    for n in range(tree.n_nodes):
        g = v[tree.group(n)]
        if g.size == 0:
            continue
        if penalty == "tree_l2":
            total += tree.weights[n] * np.linalg.norm(g)
        elif penalty == "tree_linf":
            total += tree.weights[n] * np.max(np.abs(g))
        elif penalty == "tree_l0":
            total += tree.weights[n] * float(np.any(g != 0))
    return total


def objective(u: np.ndarray, v: np.ndarray, lam: float, penalty: str, tree: Tree) -> float:
    return 0.5 * float(np.sum((u - v) ** 2)) + lam * omega(v, penalty, tree)


def tree_l0_brute_force(u: np.ndarray, lam: float, tree: Tree) -> float:
    """Minimum objective of tree_l0 over every ancestor-closed set of active nodes."""
    best = np.inf
    nodes = range(tree.n_nodes)
    for bits in itertools.product((False, True), repeat=tree.n_nodes):
        if any(bits[n] and tree.parents[n] >= 0 and not bits[tree.parents[n]] for n in nodes):
            continue
        v = np.zeros_like(u)
        for n in nodes:
            if bits[n]:
                own = tree.node_vars(n)
                v[own] = u[own]
        best = min(best, objective(u, v, lam, "tree_l0", tree))
    return best
