"""Speed of tree sparse coding and of online dictionary learning against SPAMS and scikit-learn.

All data are 8x8 grey patches of the benchmark photos (``--data``, default
``../shared/images``; colour converted with :func:`skimage.color.rgb2gray`),
centred (mean removed) and scaled to unit norm; nearly flat patches (norm
below 0.1 before scaling, on [0, 1] grey levels) are skipped, as their noise
would be blown up. Training patches come from barbara, kodim23, monarch,
sail and seeding_crop, test patches from astronaut, coffee, chelsea and
tulips (``--train``, ``--test``). One run measures, on the same data:

1. **Tree coding throughput** (``--part coding``). ``--n-code`` (10,000) test
   patches coded over a 131-atom dictionary on the tree
   ``Tree.balanced((10, 3, 3))``, learned beforehand (one epoch of
   :class:`restore.TreeDictionaryLearning`, lam ``--lam``) on ``--n-dict``
   (20,000) training patches, with ``lam = --lam`` (0.1):

   * ours: :func:`restore.sparse_encode` with its defaults (``max_iter=200,
     tol=1e-5``, batches of 4096, default threads: all CPUs), and with
     ``max_iter=100, tol=1e-4`` (the tolerance the learning uses);
   * SPAMS ``fistaTree(..., regul="tree-l2", loss="square", it0=10**6)``
     with ``numThreads`` 1 and 2, at ``max_it=100, tol=1e-3`` (the setting
     whose 2.15 s CPU the issue quotes) and at ``max_it=200, tol=1e-5`` (the
     same nominal stopping rule as ours).

   SPAMS gets its inputs in its own layout (Fortran order, atoms permuted
   into its tree's order) and its tree built beforehand; only its call is
   timed. Wall (:func:`time.perf_counter`) and CPU (:func:`time.process_time`, all
   threads) times are medians over ``--repeats`` calls after one untimed
   warm-up call on 500 patches (numba compilation / cache load). Each row
   prints the objective ``sum_i 0.5 ||x_i - a_i D||^2 + lam Omega(a_i)``
   (computed here, identically for every solver) and its relative excess
   over the best objective of the table, and the mean number of non-zero
   coefficients. Requirement: the faster of our two settings whose objective
   is no worse than that of SPAMS single-threaded at ``max_it=100, tol=1e-3``
   has at least 2x its throughput (patches per wall second). The x wall and
   x CPU columns give every row's time over ours at its defaults (two threads
   against SPAMS's two; the tighter tolerance against ours), for information.

2. **One epoch of online dictionary learning** (``--part learning``) on
   ``--n-learn`` (50,000) training patches, mini-batches of 256, lam
   ``--lam``, every learner started from the same initial atoms (random
   training patches):

   * ours tree: ``TreeDictionaryLearning((10, 3, 3), lam=lam, n_epochs=1,
     batch_size=256, dict_init=...)`` (131 atoms);
   * SPAMS ``structTrainDL(X, D=..., tree=..., lambda1=lam,
     regul="tree-l2", iter=ceil(n / 256), batchsize=256, numThreads=1)`` (same
     tree, same lam; also ``numThreads=2``);
   * scikit-learn ``MiniBatchDictionaryLearning(n_components=256, alpha=lam,
     batch_size=256, max_iter=1, tol=0, max_no_improvement=None,
     dict_init=...)`` (flat, 256 atoms, LARS coding; one full epoch, early
     stopping off; its objective ``0.5 ||x - a D||^2 + alpha ||a||_1`` has the
     scale of ours);
   * ours flat: ``TreeDictionaryLearning(penalty="l1", n_atoms=256, ...)``.

   Wall and CPU times (one run each; ``--repeats-learning``), ratios, and,
   as a check that every learner learned something, the mean objective of
   ``--n-eval`` (5,000) test patches coded over each learned dictionary with
   its own penalty (``sparse_encode(max_iter=500, tol=1e-7)``), next to that
   of the initial atoms. Requirements: ours tree no slower than
   structTrainDL (wall, one thread), and at least 10x faster than
   scikit-learn (wall; printed for ours tree and ours flat, the check on the
   flat one of the same 256 atoms, with the tree one also reported).

Run from the repository root (``--json PATH`` writes every number)::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_coding.py
    PYTHONPATH=. .venv/bin/python benchmarks/bench_coding.py --part coding --repeats 5

The default run takes about three minutes on two cores, most of it in
scikit-learn's epoch. Other jobs on the machine distort the times: the
``others`` columns give the average number of cores that other processes
kept busy during each measurement (from ``/proc/stat``, minus our own CPU
time); times measured with more than ~0.2 there are contended.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from skimage import color, io
from skimage.util import img_as_float

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _report import CpuWatch, git_state, load_avg, note, table  # noqa: E402
from _spams import spams_tree  # noqa: E402

from restore import Tree, TreeDictionaryLearning, penalty_value, sparse_encode  # noqa: E402

DEFAULT_DATA = HERE.parents[1] / "shared" / "images"
TRAIN = ["barbara", "kodim23", "monarch", "sail", "seeding_crop"]
TEST = ["astronaut", "coffee", "chelsea", "tulips"]
BRANCHING = (10, 3, 3)
FLAT_ATOMS = 256
BATCH = 256

# Requirements: coding throughput >= 2x SPAMS (1 thread, max_it=100, tol=1e-3);
# learning epoch: ours <= structTrainDL, sklearn / ours >= 10.
REQ_CODING_RATIO = 2.0
REQ_SKLEARN_RATIO = 10.0
# Anchors quoted in the issue (CPU seconds).
ISSUE_FISTA_CPU = 2.15
ISSUE_STRUCT_CPU = 8.5
ISSUE_SKLEARN_CPU = 77.0


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------


def patches(folder: Path, names: Sequence[str], n: int, rng: np.random.Generator, size: int = 8) -> np.ndarray:
    """``n`` random size x size grey patches of the images, centred and unit norm.

    An even share per image; an image with too few textured patches (the
    sky of seeding_crop) gives what it has and the others make up the rest.
    """
    per = -(-n // len(names))
    first, rest = [], []
    for name in names:
        im = io.imread(folder / f"{name}.png")
        g = color.rgb2gray(im[..., :3]) if im.ndim == 3 else img_as_float(im)
        r = rng.integers(0, g.shape[0] - size + 1, 10 * per)
        c = rng.integers(0, g.shape[1] - size + 1, 10 * per)
        P = np.stack([g[i:i + size, j:j + size].ravel() for i, j in zip(r, c, strict=True)])
        P -= P.mean(axis=1, keepdims=True)
        nrm = np.linalg.norm(P, axis=1)
        keep = nrm > 0.1
        P = P[keep][:3 * per] / nrm[keep][:3 * per, None]
        first.append(P[:per])
        rest.append(P[per:])
    X = np.concatenate(first)
    if len(X) < n:
        extra = np.concatenate(rest)
        if len(X) + len(extra) < n:
            raise SystemExit(f"only {len(X) + len(extra)} textured patches in {', '.join(names)}, {n} needed")
        X = np.concatenate([X, extra[rng.choice(len(extra), n - len(X), replace=False)]])
    return X[rng.permutation(len(X))[:n]]


def objective(X: np.ndarray, D: np.ndarray, A: np.ndarray, lam: float, penalty: str, tree: Tree | None) -> float:
    """``sum_i 0.5 ||x_i - a_i D||^2 + lam Omega(a_i)`` (rows are signals, atoms are rows of D)."""
    R = A @ D - X
    omega = penalty_value(A.T, penalty=penalty, tree=tree)
    return 0.5 * float(np.sum(R * R)) + lam * float(np.sum(omega))


def timed(fn: Callable[[], object], repeats: int) -> tuple[object, float, float, float]:
    """Result of the last call, median wall and CPU seconds over ``repeats`` calls, cores used by others meanwhile."""
    walls, cpus = [], []
    out = None
    watch = CpuWatch()
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return out, float(np.median(walls)), float(np.median(cpus)), watch.stop()["other_cores"]


def verdict(ok: bool) -> str:
    return "OK" if ok else "NOT MET"


# ---------------------------------------------------------------------------
# Part 1: coding throughput
# ---------------------------------------------------------------------------


def spams_coder(X: np.ndarray, D: np.ndarray, tree: Tree, lam: float, n_threads: int, max_it: int,
                tol: float) -> tuple[Callable[[], object], Callable[[object], np.ndarray]]:
    """SPAMS fistaTree on ``X``: the call alone, on inputs already in its layout, and the mapping back.

    The tree conversion, the permutation of the atoms and the Fortran-order
    copies are made here, before any timing: ``run()`` is the call a SPAMS
    user times, ``codes(run())`` gives the codes (n, k) in our atom order.
    """
    import spams

    st, perm = spams_tree(tree)
    k = D.shape[0]
    Xf, Df = np.asfortranarray(X.T), np.asfortranarray(D[perm].T)
    W0 = np.zeros((k, X.shape[0]), order="F")

    def run() -> object:
        return spams.fistaTree(Xf, Df, W0, st, numThreads=n_threads, lambda1=lam, regul="tree-l2", loss="square",
                               max_it=max_it, tol=tol, it0=10**6)

    def codes(W: object) -> np.ndarray:
        A = np.empty((X.shape[0], k))
        A[:, perm] = np.asarray(W).T
        return A

    return run, codes


def bench_coding(args: argparse.Namespace, rng: np.random.Generator) -> dict:
    tree = Tree.balanced(BRANCHING)
    Xd = patches(args.data, args.train, args.n_dict, rng)
    X = patches(args.data, args.test, args.n_code, rng)
    note(f"coding: learning the {tree.n_vars}-atom dictionary on {len(Xd)} patches")
    t0 = time.perf_counter()
    D = TreeDictionaryLearning(BRANCHING, lam=args.lam, n_epochs=1, batch_size=BATCH,
                               random_state=0).fit(Xd).components_
    t_dict = time.perf_counter() - t0
    lam = args.lam

    # each case: name, settings, and a maker giving (run, codes) for an input; run() is what is timed
    cases: list[tuple[str, dict, Callable[[np.ndarray], tuple[Callable[[], object], Callable]]]] = []
    for max_it, tol in ((200, 1e-5), (100, 1e-4)):
        cases.append((f"ours sparse_encode (max_iter={max_it}, tol={tol:g}){' default' * (max_it == 200)}",
                      {"solver": "ours", "threads": "default", "max_it": max_it, "tol": tol},
                      lambda Y, max_it=max_it, tol=tol: (
                          lambda: sparse_encode(Y, D, lam=lam, penalty="tree_l2", tree=tree, max_iter=max_it,
                                                tol=tol), np.asarray)))
    for max_it, tol in ((100, 1e-3), (200, 1e-5)):
        for nt in (1, 2):
            cases.append((f"SPAMS fistaTree (max_it={max_it}, tol={tol:g}), {nt} thread{'s' * (nt > 1)}",
                          {"solver": "spams", "threads": nt, "max_it": max_it, "tol": tol},
                          lambda Y, nt=nt, max_it=max_it, tol=tol: spams_coder(Y, D, tree, lam, nt, max_it, tol)))
    rows = []
    for name, meta, make in cases:
        note(f"coding: {name}")
        warm, _ = make(X[:500])
        warm()  # warm-up
        run, codes = make(X)
        W, wall, cpu, others = timed(run, args.repeats)
        A = codes(W)
        rows.append({"case": name, **meta, "wall_s": wall, "cpu_s": cpu, "others_cores": others,
                     "patches_per_s": len(X) / wall,
                     "objective": objective(X, D, A, lam, "tree_l2", tree),
                     "nnz": float(np.mean(np.count_nonzero(A, axis=1)))})
    best = min(r["objective"] for r in rows)
    for r in rows:
        r["rel_excess"] = (r["objective"] - best) / best
    ours = rows[0]
    for r in rows:
        r["ours_speedup_wall"] = r["wall_s"] / ours["wall_s"]
        r["ours_speedup_cpu"] = r["cpu_s"] / ours["cpu_s"]
    anchor = next(r for r in rows if r["solver"] == "spams" and r["threads"] == 1 and r["max_it"] == 100)
    # the fastest of our settings that reaches an objective no worse than the anchor's
    fair = [r for r in rows if r["solver"] == "ours" and r["objective"] <= anchor["objective"]]
    pick = min(fair, key=lambda r: r["wall_s"]) if fair else ours
    ratio = anchor["wall_s"] / pick["wall_s"]
    ok = bool(fair) and ratio >= REQ_CODING_RATIO
    return {"n_patches": len(X), "n_atoms": tree.n_vars, "lam": lam, "dict_patches": len(Xd),
            "dict_seconds": t_dict, "rows": rows, "best_objective": best, "requirement_ratio": ratio,
            "requirement_case": pick["case"], "requirement_ok": ok}


def print_coding(res: dict, repeats: int) -> None:
    body = []
    for r in res["rows"]:
        body.append((r["case"], f"{r['wall_s']:.3f}", f"{r['cpu_s']:.3f}", f"{r['patches_per_s']:,.0f}",
                     f"{r['objective']:.4f}", f"{r['rel_excess']:.1e}", f"{r['nnz']:.1f}",
                     f"{r['ours_speedup_wall']:.2f}", f"{r['ours_speedup_cpu']:.2f}", f"{r['others_cores']:.2f}"))
    print(table(("solver", "wall s", "CPU s", "patches/s", "objective", "rel. excess", "nnz/patch",
                 "x wall", "x CPU", "others"), body,
                f"1. Tree coding: {res['n_patches']} 8x8 grey patches, {res['n_atoms']} atoms (tree "
                f"{BRANCHING}), lam {res['lam']}; median of {repeats}; x wall / x CPU = that row's time "
                "over ours"))
    ours = next(r for r in res["rows"] if r["case"] == res["requirement_case"])
    print(f"(dictionary learned on {res['dict_patches']} other patches in {res['dict_seconds']:.1f} s; "
          f"the issue quotes SPAMS fistaTree at {ISSUE_FISTA_CPU} s CPU for 10,000 patches)")
    anchor = next(r for r in res["rows"] if r["solver"] == "spams" and r["threads"] == 1 and r["max_it"] == 100)
    print(f"requirement: ours throughput >= {REQ_CODING_RATIO:g}x SPAMS (1 thread, max_it=100, tol=1e-3) at an "
          f"objective no worse: {res['requirement_ratio']:.2f}x ({ours['case']}: {ours['wall_s']:.3f} s vs "
          f"{anchor['wall_s']:.3f} s wall; objective {ours['objective']:.4f} vs {anchor['objective']:.4f})"
          f" -> {verdict(res['requirement_ok'])}\n")


# ---------------------------------------------------------------------------
# Part 2: one learning epoch
# ---------------------------------------------------------------------------


def bench_learning(args: argparse.Namespace, rng: np.random.Generator) -> dict:
    import spams
    from sklearn.decomposition import MiniBatchDictionaryLearning

    tree = Tree.balanced(BRANCHING)
    k = tree.n_vars
    X = patches(args.data, args.train, args.n_learn, rng)
    Xe = patches(args.data, args.test, args.n_eval, rng)
    init = X[rng.choice(len(X), size=max(k, FLAT_ATOMS), replace=False)]
    init /= np.linalg.norm(init, axis=1, keepdims=True)
    D0_tree, D0_flat = init[:k].copy(), init[:FLAT_ATOMS].copy()
    lam = args.lam
    n_iter = -(-len(X) // BATCH)  # as many mini-batches as ours and sklearn make
    st, perm = spams_tree(tree)

    def ours_tree() -> np.ndarray:
        return TreeDictionaryLearning(BRANCHING, lam=lam, n_epochs=1, batch_size=BATCH, dict_init=D0_tree,
                                      random_state=0).fit(X).components_

    def ours_flat() -> np.ndarray:
        return TreeDictionaryLearning(BRANCHING, penalty="l1", n_atoms=FLAT_ATOMS, lam=lam, n_epochs=1,
                                      batch_size=BATCH, dict_init=D0_flat, random_state=0).fit(X).components_

    def struct_dl(nt: int) -> np.ndarray:
        Ds = spams.structTrainDL(np.asfortranarray(X.T), D=np.asfortranarray(D0_tree[perm].T), tree=st,
                                 lambda1=lam, regul="tree-l2", iter=n_iter, batchsize=BATCH, numThreads=nt,
                                 verbose=False)
        D = np.empty((k, X.shape[1]))
        D[perm] = np.asarray(Ds).T
        return D

    def sk() -> np.ndarray:
        est = MiniBatchDictionaryLearning(n_components=FLAT_ATOMS, alpha=lam, batch_size=BATCH, max_iter=1, tol=0.0,
                                          max_no_improvement=None, dict_init=D0_flat, random_state=0)
        est.fit(X)
        sk.n_steps = est.n_steps_
        return est.components_

    sk.n_steps = 0
    cases: list[tuple[str, str, Callable[[], np.ndarray]]] = [
        (f"ours TreeDictionaryLearning tree {BRANCHING} ({k} atoms)", "tree_l2", ours_tree),
        (f"SPAMS structTrainDL tree-l2 ({k} atoms), 1 thread", "tree_l2", lambda: struct_dl(1)),
        (f"SPAMS structTrainDL tree-l2 ({k} atoms), 2 threads", "tree_l2", lambda: struct_dl(2)),
        (f"sklearn MiniBatchDictionaryLearning ({FLAT_ATOMS} atoms)", "l1", sk),
        (f"ours TreeDictionaryLearning l1 ({FLAT_ATOMS} atoms)", "l1", ours_flat),
    ]
    sparse_encode(X[:300], D0_tree, lam=lam, tree=tree)  # warm-up (numba)
    rows = []
    for name, pen, fn in cases:
        note(f"learning: {name}")
        D, wall, cpu, others = timed(fn, args.repeats_learning)
        pen_tree = tree if pen == "tree_l2" else None
        A = sparse_encode(Xe, D, lam=lam, penalty=pen, tree=pen_tree, max_iter=500, tol=1e-7)
        rows.append({"case": name, "penalty": pen, "wall_s": wall, "cpu_s": cpu, "others_cores": others,
                     "eval_objective": objective(Xe, D, A, lam, pen, pen_tree) / len(Xe)})
    init_obj = {}
    for pen, D0 in (("tree_l2", D0_tree), ("l1", D0_flat)):
        pen_tree = tree if pen == "tree_l2" else None
        A = sparse_encode(Xe, D0, lam=lam, penalty=pen, tree=pen_tree, max_iter=500, tol=1e-7)
        init_obj[pen] = objective(Xe, D0, A, lam, pen, pen_tree) / len(Xe)
    by = {i: r for i, r in enumerate(rows)}
    ours_t, spams1, skl, ours_f = by[0], by[1], by[3], by[4]
    return {"n_patches": len(X), "n_eval": len(Xe), "lam": lam, "spams_iter": n_iter,
            "sklearn_steps": int(sk.n_steps), "rows": rows, "init_objective": init_obj,
            "ratio_struct_over_ours_wall": spams1["wall_s"] / ours_t["wall_s"],
            "ratio_struct_over_ours_cpu": spams1["cpu_s"] / ours_t["cpu_s"],
            "ratio_sklearn_over_ours_tree_wall": skl["wall_s"] / ours_t["wall_s"],
            "ratio_sklearn_over_ours_flat_wall": skl["wall_s"] / ours_f["wall_s"],
            "ratio_sklearn_over_ours_tree_cpu": skl["cpu_s"] / ours_t["cpu_s"],
            "ratio_sklearn_over_ours_flat_cpu": skl["cpu_s"] / ours_f["cpu_s"]}


def print_learning(res: dict) -> None:
    rows = res["rows"]
    ours_t = rows[0]
    body = [(r["case"], f"{r['wall_s']:.2f}", f"{r['cpu_s']:.2f}", f"{r['wall_s'] / ours_t['wall_s']:.2f}",
             f"{r['cpu_s'] / ours_t['cpu_s']:.2f}", f"{r['eval_objective']:.5f}", f"{r['others_cores']:.2f}")
            for r in rows]
    print(table(("learner (one epoch, batches of 256)", "wall s", "CPU s", "x wall", "x CPU",
                 "test objective", "others"), body,
                f"2. Online learning: one epoch on {res['n_patches']} 8x8 grey patches, lam {res['lam']}; "
                f"x wall / x CPU = time over ours tree; test objective = mean over {res['n_eval']} test patches"))
    print(f"(initial atoms: test objective {res['init_objective']['tree_l2']:.5f} tree, "
          f"{res['init_objective']['l1']:.5f} flat; SPAMS iter={res['spams_iter']}; sklearn ran "
          f"{res['sklearn_steps']} mini-batch steps; the issue quotes structTrainDL {ISSUE_STRUCT_CPU} s CPU and "
          f"sklearn {ISSUE_SKLEARN_CPU:g} s CPU per epoch)")
    r1 = res["ratio_struct_over_ours_wall"]
    print(f"requirement: ours tree no slower than structTrainDL (1 thread): structTrainDL/ours = {r1:.2f}x wall, "
          f"{res['ratio_struct_over_ours_cpu']:.2f}x CPU -> {verdict(r1 >= 1.0)}")
    rf, rt = res["ratio_sklearn_over_ours_flat_wall"], res["ratio_sklearn_over_ours_tree_wall"]
    print(f"requirement: ours >= {REQ_SKLEARN_RATIO:g}x faster than sklearn 256 atoms: sklearn/ours flat 256 = "
          f"{rf:.1f}x wall ({res['ratio_sklearn_over_ours_flat_cpu']:.1f}x CPU) -> {verdict(rf >= REQ_SKLEARN_RATIO)}; "
          f"sklearn/ours tree 131 = {rt:.1f}x wall ({res['ratio_sklearn_over_ours_tree_cpu']:.1f}x CPU) -> "
          f"{verdict(rt >= REQ_SKLEARN_RATIO)}\n")


# ---------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=("coding", "learning", "all"), default="all")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder of the benchmark photos")
    ap.add_argument("--train", nargs="+", default=TRAIN, help="images of the training patches")
    ap.add_argument("--test", nargs="+", default=TEST, help="images of the coded / evaluation patches")
    ap.add_argument("--lam", type=float, default=0.1)
    ap.add_argument("--n-code", type=int, default=10000, help="patches coded in part 1")
    ap.add_argument("--n-dict", type=int, default=20000, help="patches the part-1 dictionary is learned on")
    ap.add_argument("--n-learn", type=int, default=50000, help="patches of the learning epoch (part 2)")
    ap.add_argument("--n-eval", type=int, default=5000, help="test patches to evaluate learned dictionaries")
    ap.add_argument("--repeats", type=int, default=3, help="timed calls per coding case (median)")
    ap.add_argument("--repeats-learning", type=int, default=1, help="timed epochs per learner (median)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None, help="also write every number to this JSON file")
    args = ap.parse_args(argv)
    if not args.data.is_dir():
        raise SystemExit(f"no image folder {args.data} (use --data)")
    t_start = time.perf_counter()
    watch = CpuWatch()
    out: dict = {"git": git_state(), "load_start": load_avg()}
    out["args"] = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    print(f"restore at {out['git']}; load average at start: {out['load_start']}  (CPUs: {os.cpu_count()})\n",
          flush=True)
    if args.part in ("coding", "all"):
        out["coding"] = bench_coding(args, np.random.default_rng([args.seed, 1]))
        print_coding(out["coding"], args.repeats)
    if args.part in ("learning", "all"):
        out["learning"] = bench_learning(args, np.random.default_rng([args.seed, 2]))
        print_learning(out["learning"])
    out["total_seconds"] = time.perf_counter() - t_start
    out["load_end"] = load_avg()
    out["contention"] = watch.stop()
    print(f"total {out['total_seconds']:.0f} s; load average at end: {out['load_end']}; other processes used "
          f"{out['contention']['other_cpu_s']:.0f} CPU s meanwhile ({out['contention']['other_cores']:.2f} cores on "
          "average; 'others' columns: the same during each row)")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    from _report import record_results  # the printed tables also go to benchmarks/results/bench_coding.md

    with record_results("bench_coding"):
        main()
