"""Benchmark :func:`restore.prox` against SPAMS's ``proximalTree`` on the same inputs.

The script measures three things and prints one aligned table for each:

1. **Single thread** (``--part single``). For every size in ``--sizes`` the
   input is the full-depth Haar transform (periodization, ``log2(size)``
   levels, flattened with :func:`pywt.ravel_coeffs`) of
   ``skimage.data.camera()`` resized to ``size x size`` plus Gaussian noise of
   standard deviation ``--sigma``; the tree is
   :func:`restore.wavelet.wavelet_quadtree` (one node per coefficient, root
   unpenalised). For each of ``tree_l2``, ``tree_linf`` and ``tree_l0`` it
   reports the median CPU time (:func:`time.process_time`) of
   ``restore.prox`` with ``RESTORE_NUM_THREADS=1`` and of
   ``spams.proximalTree(..., numThreads=1)``, their ratio SPAMS/ours (above 1:
   ours is faster), the largest absolute difference of the two outputs and,
   for scale, the time of a plain ``u.copy()``.
2. **Many columns, several threads** (``--part threads``, run in a fresh
   subprocess with ``RESTORE_NUM_THREADS`` unset so that ``restore.prox``
   uses its default of one thread per CPU). ``U`` of shape ``(131, 20000)``
   on the balanced tree ``Tree.balanced((10, 3, 3))`` (standard normal
   entries, ``lam = --lam-batch``) and 8 noisy images as columns on the
   512 x 512 quad-tree (``lam = --lam``). Reports the median wall time
   (:func:`time.perf_counter`), columns per second and the ratio against
   SPAMS with ``numThreads`` equal to the same number of threads.
3. **First-call compile time** (``--part compile``). In a fresh subprocess
   with ``NUMBA_CACHE_DIR`` pointing to a new empty directory it times
   ``import restore``, building a small tree and the first ``prox`` call of
   each tree penalty, on that tree and on a 64 x 64 Haar quad-tree (the
   kernels walking regular trees by index arithmetic) (cold: numba compiles
   and writes its cache); then again
   in a second fresh subprocess sharing that directory (cached: numba loads
   the compiled kernels). numpy is imported before the clock starts; the
   times are CPU times (:func:`time.process_time`).

Fairness. SPAMS gets its input in its own layout (Fortran-order float64,
variables permuted into its depth-first order) and its tree dict built
beforehand; only the ``proximalTree`` call is timed. The two functions are
timed in turn (A, B, A, B, ...), so both see the same load. Both allocate
their output, and SPAMS also allocates work arrays on every call. With glibc's
default dynamic mmap and trim thresholds those blocks are often fresh pages
from the kernel, and their page faults can cost SPAMS as much as its
computation (ours allocates one output and barely notices). Whether a user's process reuses freed memory depends on what
else it has allocated, so the default ``--malloc steady`` raises glibc's mmap
and trim thresholds with ``mallopt`` and measures the computation: this is
the figure we quote. ``--malloc default`` keeps glibc's behaviour, as a fresh
interpreter gets it (SPAMS then looks slower than it computes).

In all parts the construction of the trees, the SPAMS tree conversion and the
permutation of the input into SPAMS's order are set-up and not timed; one
untimed warm-up call of every function precedes the timed repeats. The
``restore.prox`` timings include its input validation and the copy of the
input it works on (and returns), as a user sees them.

Run from the repository root::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_prox.py
    PYTHONPATH=. .venv/bin/python benchmarks/bench_prox.py --part single --sizes 512 --repeats 11
    PYTHONPATH=. .venv/bin/python benchmarks/bench_prox.py --part single --malloc default

The default run (all three parts) takes under a minute on two cores. Needs the
``bench`` extra (``spams-bin``) and scikit-image.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from restore import Tree

# ``restore`` (and ``_spams``, which imports it) is imported inside the
# functions, after ``main`` has set ``RESTORE_NUM_THREADS`` for the part being
# run and so that the compile probe times the import itself.

PENALTIES: tuple[str, ...] = ("tree_l2", "tree_linf", "tree_l0")
SPAMS_REGUL: dict[str, str] = {"tree_l2": "tree-l2", "tree_linf": "tree-linf", "tree_l0": "tree-l0"}
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MISMATCH_TOL = 1e-12  # outputs equal to SPAMS's to this, absolute (the 2048 x 2048 coefficients reach 2.6e5)

Row = dict[str, Any]


# ----------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------


def _median_time(fn: Callable[[], object], repeats: int, clock: Callable[[], float]) -> float:
    """Return the median over ``repeats`` timed calls of ``fn``, after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return float(np.median(times))


def _median_times_ab(fa: Callable[[], object], fb: Callable[[], object], repeats: int,
                     clock: Callable[[], float]) -> tuple[float, float]:
    """Median times of ``fa`` and ``fb`` called in turn (A, B, A, B, ...), after one warm-up call each.

    Alternating keeps both under the same machine load and allocator state;
    timing one function's repeats in a block lets it reuse its own freed pages.
    """
    fa()
    fb()
    ta, tb = [], []
    for _ in range(repeats):
        for fn, times in ((fa, ta), (fb, tb)):
            t0 = clock()
            fn()
            times.append(clock() - t0)
    return float(np.median(ta)), float(np.median(tb))


def _spams_setup(tree: Tree, U: np.ndarray) -> tuple[dict, np.ndarray, np.ndarray]:
    """Return SPAMS's tree dict, the permutation and ``U`` permuted as SPAMS wants it."""
    sys.path.insert(0, str(HERE))
    from _spams import spams_tree

    tree_dict, perm = spams_tree(tree)
    U2 = U if U.ndim == 2 else U[:, None]
    return tree_dict, perm, np.asfortranarray(U2[perm], dtype=np.float64)


def _unpermute(V_spams: np.ndarray, perm: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Map SPAMS's output back to the original variable order and shape."""
    V = np.empty((perm.shape[0], V_spams.shape[1]))
    V[perm] = V_spams
    return V.reshape(shape)


def _noisy_camera_coeffs(size: int, sigma: float, rng: np.random.Generator, n_images: int = 1) -> np.ndarray:
    """Haar coefficients of noisy ``camera()`` images, shape ``(size**2,)`` or ``(size**2, n_images)``."""
    import pywt
    from skimage import data, transform

    img = data.camera().astype(np.float64)
    if img.shape != (size, size):
        img = transform.resize(img, (size, size), order=1, preserve_range=True, anti_aliasing=True)
    level = size.bit_length() - 1
    cols = []
    for _ in range(n_images):
        noisy = img + rng.normal(0.0, sigma, img.shape)
        coeffs = pywt.wavedec2(noisy, "haar", mode="periodization", level=level)
        cols.append(pywt.ravel_coeffs(coeffs)[0])
    return cols[0] if n_images == 1 else np.stack(cols, axis=1)


def _fmt_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Format a table: first column left-aligned, the others right-aligned."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True)))

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), sep, *(line(r) for r in rows)])


def _ms(t: float) -> str:
    return f"{1e3 * t:.2f}"


def _n_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _steady_malloc() -> bool:
    """Stop glibc from returning large freed blocks to the kernel; return whether it worked."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        m_trim_threshold, m_mmap_threshold = -1, -3
        return bool(libc.mallopt(m_mmap_threshold, 1 << 30) and libc.mallopt(m_trim_threshold, 1 << 30))
    except (OSError, AttributeError):
        return False


def _run_self(args: Sequence[str], env: dict[str, str]) -> None:
    """Run this script in a fresh interpreter; raise if it fails."""
    sys.stdout.flush()
    subprocess.run([sys.executable, str(Path(__file__).resolve()), *args], env=env, check=True)


def _child_env(**updates: str | None) -> dict[str, str]:
    """Return a copy of the environment with ``restore`` importable and ``updates`` applied."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    for key, value in updates.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


# ----------------------------------------------------------------------
# Part 1: single thread, one large vector
# ----------------------------------------------------------------------


def bench_single(sizes: Sequence[int], lam: float, sigma: float, repeats: int, seed: int) -> list[Row]:
    import spams

    from restore import prox
    from restore.wavelet import wavelet_quadtree

    rows: list[Row] = []
    for size in sizes:
        u = _noisy_camera_coeffs(size, sigma, np.random.default_rng(seed))
        tree = wavelet_quadtree((size, size), "haar", size.bit_length() - 1)
        tree_dict, perm, Us = _spams_setup(tree, u)
        t_copy = _median_time(u.copy, repeats, time.process_time)
        for penalty in PENALTIES:
            ours = partial(prox, u, lam, penalty=penalty, tree=tree)
            theirs = partial(spams.proximalTree, Us, tree_dict, numThreads=1, lambda1=lam,
                             regul=SPAMS_REGUL[penalty])
            t_ours, t_spams = _median_times_ab(ours, theirs, repeats, time.process_time)
            v = ours()
            diff = float(np.max(np.abs(v - _unpermute(np.asarray(theirs()), perm, u.shape))))
            rows.append({"size": size, "p": int(u.shape[0]), "penalty": penalty, "lam": lam,
                         "ours_s": t_ours, "spams_s": t_spams, "ratio": t_spams / t_ours,
                         "max_abs_diff": diff, "copy_s": t_copy,
                         "nonzero_frac": float(np.count_nonzero(v)) / v.size})
    return rows


def print_single(rows: Sequence[Row], repeats: int) -> None:
    print(f"\n[1] one vector, single thread: median CPU time (process_time) over {repeats} repeats")
    headers = ["size", "penalty", "ours ms", "spams ms", "spams/ours", "max|diff|", "copy ms",
               "ours/copy", "nnz"]
    table = [[f"{r['size']}x{r['size']}", r["penalty"], _ms(r["ours_s"]), _ms(r["spams_s"]),
              f"{r['ratio']:.2f}", f"{r['max_abs_diff']:.1e}", _ms(r["copy_s"]),
              f"{r['ours_s'] / r['copy_s']:.1f}", f"{r['nonzero_frac']:.1%}"] for r in rows]
    print(_fmt_table(headers, table))


# ----------------------------------------------------------------------
# Part 2: many columns, default threads
# ----------------------------------------------------------------------


def bench_threads(lam: float, lam_batch: float, sigma: float, n_columns: int, n_images: int,
                  repeats: int, seed: int) -> list[Row]:
    import spams

    from restore import Tree, prox
    from restore._config import default_num_threads
    from restore.wavelet import wavelet_quadtree

    n_threads = default_num_threads()
    rng = np.random.default_rng(seed)
    balanced = Tree.balanced((10, 3, 3))
    cases = [
        ("balanced(10,3,3)", balanced, rng.standard_normal((balanced.n_vars, n_columns)), lam_batch),
        ("haar quad-tree 512", wavelet_quadtree((512, 512), "haar", 9),
         _noisy_camera_coeffs(512, sigma, rng, n_images), lam),
    ]
    rows: list[Row] = []
    for name, tree, U, case_lam in cases:
        tree_dict, perm, Us = _spams_setup(tree, U)
        for penalty in PENALTIES:
            ours = partial(prox, U, case_lam, penalty=penalty, tree=tree)
            theirs = partial(spams.proximalTree, Us, tree_dict, numThreads=n_threads, lambda1=case_lam,
                             regul=SPAMS_REGUL[penalty])
            t_ours, t_spams = _median_times_ab(ours, theirs, repeats, time.perf_counter)
            diff = float(np.max(np.abs(ours() - _unpermute(np.asarray(theirs()), perm, U.shape))))
            n = U.shape[1]
            rows.append({"case": name, "p": int(U.shape[0]), "n": int(n), "penalty": penalty,
                         "lam": case_lam, "threads": n_threads, "ours_s": t_ours, "spams_s": t_spams,
                         "ours_cols_per_s": n / t_ours, "spams_cols_per_s": n / t_spams,
                         "ratio": t_spams / t_ours, "max_abs_diff": diff})
    return rows


def print_threads(rows: Sequence[Row], repeats: int) -> None:
    threads = rows[0]["threads"] if rows else "?"
    print(f"\n[2] many columns, {threads} threads (ours: default threads, SPAMS: numThreads={threads}): "
          f"median wall time over {repeats} repeats")
    headers = ["case", "p x n", "penalty", "ours ms", "ours col/s", "spams ms", "spams col/s",
               "spams/ours", "max|diff|"]
    table = [[r["case"], f"{r['p']}x{r['n']}", r["penalty"], _ms(r["ours_s"]),
              f"{r['ours_cols_per_s']:,.0f}", _ms(r["spams_s"]), f"{r['spams_cols_per_s']:,.0f}",
              f"{r['ratio']:.2f}", f"{r['max_abs_diff']:.1e}"] for r in rows]
    print(_fmt_table(headers, table))


# ----------------------------------------------------------------------
# Part 3: first-call compile time
# ----------------------------------------------------------------------


def compile_probe() -> Row:
    """Time ``import restore``, a tree build and the first prox call of each penalty."""
    t0 = time.process_time()
    from restore import Tree, prox

    t1 = time.process_time()
    tree = Tree.balanced((3, 3))
    t2 = time.process_time()
    u = np.linspace(-2.0, 2.0, tree.n_vars)
    stages: Row = {"import restore": t1 - t0, "Tree.balanced": t2 - t1}
    for penalty in PENALTIES:
        t = time.process_time()
        prox(u, 0.1, penalty=penalty, tree=tree)
        stages[f"first prox {penalty}"] = time.process_time() - t
    from restore.wavelet import wavelet_quadtree

    quad = wavelet_quadtree((64, 64), "haar", 6)  # a regular tree: the index-arithmetic kernels
    v = np.linspace(-2.0, 2.0, quad.n_vars)
    for penalty in PENALTIES:
        t = time.process_time()
        prox(v, 0.1, penalty=penalty, tree=quad)
        stages[f"first prox {penalty}, quad-tree"] = time.process_time() - t
    stages["total"] = time.process_time() - t0
    return stages


def bench_compile() -> dict[str, Row]:
    results: dict[str, Row] = {}
    with tempfile.TemporaryDirectory(prefix="restore-numba-cache-") as cache_dir:
        env = _child_env(NUMBA_CACHE_DIR=cache_dir)
        for label in ("cold", "cached"):
            out = Path(cache_dir) / f"probe-{label}.json"
            _run_self(["--part", "compile-probe", "--json", str(out)], env)
            results[label] = json.loads(out.read_text())
    return results


def print_compile(results: dict[str, Row]) -> None:
    print("\n[3] first call in a fresh interpreter, CPU seconds (process_time; compiling is single-threaded, "
          "and CPU time is what a shared machine does not inflate) (cold: empty NUMBA_CACHE_DIR; cached: same dir, "
          "second run)")
    stages = list(results["cold"])
    table = [[s, f"{results['cold'][s]:.3f}", f"{results['cached'][s]:.3f}"] for s in stages]
    print(_fmt_table(["stage", "cold s", "cached s"], table))


# ----------------------------------------------------------------------
# Driver
# ----------------------------------------------------------------------


def _versions() -> Row:
    out: Row = {"python": sys.version.split()[0], "cpus": _n_cpus()}
    for pkg in ("numpy", "numba", "spams-bin", "restore-tree"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


def _power_of_two(text: str) -> int:
    n = int(text)
    if n < 2 or n & (n - 1):
        raise argparse.ArgumentTypeError(f"size must be a power of two >= 2, got {text}")
    return n


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--part", default="all",
                        choices=["all", "single", "threads", "compile", "compile-probe"],
                        help="what to run; 'compile-probe' is the internal child of 'compile'")
    parser.add_argument("--sizes", type=_power_of_two, nargs="+", default=[512, 2048],
                        help="image sides of part 1 (powers of two)")
    parser.add_argument("--lam", type=float, default=20.0, help="lambda for the image coefficients")
    parser.add_argument("--lam-batch", type=float, default=1.0,
                        help="lambda for the standard normal columns of part 2")
    parser.add_argument("--sigma", type=float, default=20.0, help="noise standard deviation")
    parser.add_argument("--repeats", type=int, default=7, help="timed repeats per measurement")
    parser.add_argument("--columns", type=int, default=20000, help="columns on the balanced tree (part 2)")
    parser.add_argument("--images", type=int, default=8, help="columns on the 512x512 quad-tree (part 2)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the noise")
    parser.add_argument("--malloc", choices=["default", "steady"], default="steady",
                        help="'steady': raise glibc's mmap/trim thresholds so freed memory is reused "
                             "(times the computation); 'default': glibc's own, page faults included")
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers to this file")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if args.malloc == "steady" and not _steady_malloc():
        print("warning: --malloc steady needs glibc's mallopt; using the default allocator", file=sys.stderr)
        args.malloc = "default"
    if args.part == "compile-probe":
        result: Row = compile_probe()
        if args.json is not None:
            args.json.write_text(json.dumps(result))
        else:
            print(json.dumps(result, indent=2))
        return
    if args.part == "threads":
        os.environ.pop("RESTORE_NUM_THREADS", None)
    else:
        # Part 1 measures one thread; set before ``restore`` is imported.
        os.environ["RESTORE_NUM_THREADS"] = "1"

    results: Row = {"versions": _versions(), "args": {k: (str(v) if isinstance(v, Path) else v)
                                                       for k, v in vars(args).items()}}
    if not args.child:
        print("restore.prox vs spams.proximalTree  "
              + "  ".join(f"{k}={v}" for k, v in results["versions"].items()) + f"  malloc={args.malloc}")

    if args.part in ("all", "single"):
        results["single"] = bench_single(args.sizes, args.lam, args.sigma, args.repeats, args.seed)
        print_single(results["single"], args.repeats)
        bad = [r for r in results["single"] if not r["max_abs_diff"] <= MISMATCH_TOL]
    else:
        bad = []

    if args.part == "threads":
        results["threads"] = bench_threads(args.lam, args.lam_batch, args.sigma, args.columns,
                                           args.images, args.repeats, args.seed)
        print_threads(results["threads"], args.repeats)
    elif args.part == "all":
        with tempfile.TemporaryDirectory(prefix="bench-prox-") as tmp:
            out = Path(tmp) / "threads.json"
            child_args = ["--part", "threads", "--child", "--json", str(out), "--lam", str(args.lam),
                          "--lam-batch", str(args.lam_batch), "--sigma", str(args.sigma),
                          "--repeats", str(args.repeats), "--columns", str(args.columns),
                          "--images", str(args.images), "--seed", str(args.seed), "--malloc", args.malloc]
            _run_self(child_args, _child_env(RESTORE_NUM_THREADS=None))
            results["threads"] = json.loads(out.read_text())["threads"]
    bad += [r for r in results.get("threads", []) if not r["max_abs_diff"] <= MISMATCH_TOL]

    if args.part in ("all", "compile"):
        results["compile"] = bench_compile()
        print_compile(results["compile"])

    if bad:
        print(f"\nWARNING: {len(bad)} case(s) differ from SPAMS by more than {MISMATCH_TOL:g}: "
              + ", ".join(f"{r.get('case', r.get('size'))}/{r['penalty']} ({r['max_abs_diff']:.1e})"
                          for r in bad))
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))
        if not args.child:
            print(f"\nwrote {args.json}")


if __name__ == "__main__":
    from _report import record_results  # the printed tables also go to benchmarks/results/bench_prox.md

    with record_results("bench_prox"):
        main()
