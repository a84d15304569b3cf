"""Write ``tests/data/spams_ref_regular.npz``: SPAMS's prox on regular wavelet trees.

The tree penalties walk the quad-trees and octrees of wavelet transforms by
index arithmetic (:mod:`restore._core_regular`); these cases pin that layout
to SPAMS (``spams.proximalTree`` of ``spams-bin``, the authors' C++ code) on
2-D and 3-D trees, isotropic and anisotropic levels, with and without a
penalised approximation, with one weight per level. Run once; the tests read
the file (tests/test_regular_tree.py)::

    PYTHONPATH=. .venv/bin/python benchmarks/make_regular_ref.py
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "tests" / "data" / "spams_ref_regular.npz"

# (shape, levels per axis, penalize_approx): small enough for a 1 MB file, covering every kind of band link
CASES = [
    ((32, 32), (3, 3), False),
    ((16, 64), (2, 4), True),
    ((8, 16, 16), (1, 3, 3), False),
    ((16, 16, 16), (2, 2, 2), True),
]
PENALTIES = {"tree_l2": "tree-l2", "tree_l0": "tree-l0", "tree_linf": "tree-linf"}
N_COLUMNS = 3  # signals per case: unit scale, scale 100 with exact zeros, integers (ties of tree-l0)


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    import spams

    sys.path.insert(0, str(HERE))
    from _spams import spams_tree

    from restore.wavelet import band_layout, level_splits, wavelet_tree

    rng = np.random.default_rng(20261125)
    out = {}
    for i, (shape, levels, pa) in enumerate(CASES):
        tree = wavelet_tree(shape, "haar", levels, pa)
        level_weights = rng.uniform(0.5, 2.0, max(levels))
        node_level = np.zeros(tree.n_nodes, dtype=np.int64)
        for b in band_layout(shape, level_splits(levels))[1:]:
            node_level[b.start:b.start + b.size] = b.level
        weights = np.concatenate([[1.0], level_weights])[node_level] * tree.weights
        tree = tree.with_weights(weights)
        p = tree.n_vars
        U = np.empty((p, N_COLUMNS))
        U[:, 0] = rng.standard_normal(p) * rng.exponential(1.0, p)
        U[:, 1] = 100 * rng.standard_normal(p) * (rng.random(p) < 0.7)
        U[:, 2] = rng.integers(-3, 4, p)
        tree_dict, perm = spams_tree(tree)
        for ours, theirs in PENALTIES.items():
            lam = float(rng.choice([0.05, 0.5, 2.0]))
            Vs = np.asarray(spams.proximalTree(np.asfortranarray(U[perm]), tree_dict, numThreads=1,
                                               lambda1=lam, regul=theirs))
            V = np.empty_like(U)
            V[perm] = Vs
            key = f"case{i}_{ours}"
            out |= {f"{key}/shape": np.array(shape), f"{key}/levels": np.array(levels),
                    f"{key}/penalize_approx": np.array(pa), f"{key}/level_weights": level_weights,
                    f"{key}/penalty": np.array(ours), f"{key}/lam": np.array(lam), f"{key}/U": U, f"{key}/V": V}
    np.savez_compressed(OUT, **out)
    print(f"wrote {OUT} ({OUT.stat().st_size / 1e6:.2f} MB, {len(CASES) * len(PENALTIES)} cases)")


if __name__ == "__main__":
    main()
