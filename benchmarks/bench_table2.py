"""Patch reconstruction with missing pixels: tree vs flat dictionary (JMLR 2011, Table 2).

Protocol: 8x8 grey patches, centred and scaled to unit norm; dictionaries of
the same number of atoms learned on patches of some images
(``--train``), one with a tree penalty on a balanced tree, one flat (l1);
on patches of other images (``--test``) a share of the pixels is removed at
random, the codes are computed on the known pixels only, and the error is the
squared error on the missing pixels of a patch, x 100, averaged over patches.
For each method and missing rate, the lam of learning and of coding are the
best of small grids on a validation split.

    python benchmarks/bench_table2.py [--branching 10 2 2] [--n-train 50000]

Reference (../shared/images/README.md, SPAMS-family solver, same protocol):
flat 71 atoms 13.97 19.83 28.09 41.84 67.90; tree (10,2,2) 12.51 17.96 25.78
38.00 57.29 at 50..90% missing.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from skimage import color, io
from skimage.util import img_as_float

from restore import Tree, TreeDictionaryLearning, sparse_encode

SHARED = Path(__file__).resolve().parents[2] / "shared" / "images"


def patches_of(names: list[str], n: int, rng: np.random.Generator, size: int = 8) -> np.ndarray:
    out = []
    per = -(-n // len(names))
    for name in names:
        im = io.imread(SHARED / f"{name}.png")
        g = color.rgb2gray(im[..., :3]) if im.ndim == 3 else img_as_float(im)
        r = rng.integers(0, g.shape[0] - size, per * 2)
        c = rng.integers(0, g.shape[1] - size, per * 2)
        P = np.stack([g[i:i + size, j:j + size].ravel() for i, j in zip(r, c, strict=True)])
        P -= P.mean(axis=1, keepdims=True)
        nrm = np.linalg.norm(P, axis=1)
        P = P[nrm > 0.1][:per]  # skip flat patches (their noise would be blown up to unit norm)
        out.append(P / np.linalg.norm(P, axis=1, keepdims=True))
    return np.concatenate(out)[:n]


def reconstruct_error(est: TreeDictionaryLearning, X: np.ndarray, M: np.ndarray, lam: float) -> float:
    A = sparse_encode(X, est.components_, lam=lam, penalty=est.penalty, tree=est.tree_, mask=M, max_iter=200)
    R = A @ est.components_
    return 100.0 * float(np.mean(np.sum(((R - X) * ~M) ** 2, axis=1)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--branching", type=int, nargs="+", default=[10, 2, 2])
    ap.add_argument("--n-train", type=int, default=50000)
    ap.add_argument("--n-test", type=int, default=5000)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--learn-lams", type=float, nargs="+", default=[0.05, 0.1, 0.2])
    ap.add_argument("--train", nargs="+", default=["barbara", "kodim23", "monarch", "sail", "seeding_crop"])
    ap.add_argument("--test", nargs="+", default=["astronaut", "coffee", "chelsea", "tulips"])
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    Xtr = patches_of(args.train, args.n_train, rng)
    Xte = patches_of(args.test, 2 * args.n_test, rng)
    Xval, Xte = Xte[: args.n_test], Xte[args.n_test:]
    k = Tree.balanced(args.branching).n_vars
    models: dict[str, list[TreeDictionaryLearning]] = {}
    for name, kw in (("tree", {"penalty": "tree_l2"}), ("flat", {"penalty": "l1", "n_atoms": k})):
        models[name] = []
        for learn_lam in args.learn_lams:
            t0 = time.perf_counter()
            models[name].append(TreeDictionaryLearning(tuple(args.branching), lam=learn_lam, n_epochs=args.epochs,
                                                       batch_size=256, rng=0, **kw).fit(Xtr))
            print(f"learned {name} dictionary of {k} atoms, lam {learn_lam}, on {len(Xtr)} patches "
                  f"in {time.perf_counter() - t0:.1f} s", flush=True)
    rates = (0.5, 0.6, 0.7, 0.8, 0.9)
    lams = (0.01, 0.02, 0.05, 0.1, 0.2)
    results: dict[str, list[float]] = {}
    masks_val = {rate: rng.random(Xval.shape) >= rate for rate in rates}
    masks_test = {rate: rng.random(Xte.shape) >= rate for rate in rates}
    for name, ests in models.items():
        errs = []
        for rate in rates:
            est, lam = min(((e, lam) for e in ests for lam in lams),
                           key=lambda el, Mv=masks_val[rate]: reconstruct_error(el[0], Xval, Mv, el[1]))
            errs.append(reconstruct_error(est, Xte, masks_test[rate], lam))
        results[name] = errs
    print(f"\nsquared error x 100 on the missing pixels of a patch ({k} atoms, {len(Xte)} test patches)")
    print("missing  " + "  ".join(f"{int(r * 100):>6d}%" for r in rates))
    for name, errs in results.items():
        print(f"{name:7s}  " + "  ".join(f"{e:7.2f}" for e in errs))
    gain = [100 * (f - t) / f for f, t in zip(results["flat"], results["tree"], strict=True)]
    print("tree gain " + "  ".join(f"{g:6.1f}%" for g in gain))
    if args.json:
        Path(args.json).write_text(json.dumps({"rates": rates, **results, "gain_pct": gain}, indent=2))


if __name__ == "__main__":
    main()
