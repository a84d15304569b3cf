"""Speed beside other busy processes: dictionary learning, sparse coding, inpainting, non-local denoising.

A shared machine or a cluster node runs other work beside ours. A fair
share is then a slowdown of about ``(threads + N) / cores`` for a job of
``threads`` threads beside ``N`` single-threaded busy processes (2x for
two threads beside two busy processes on two cores), at the same CPU
time. Thread pools that wait for work by spinning, or that are
oversubscribed (ours and BLAS's), turn that into much more: wall and CPU.

Each workload runs in this process (after one untimed warm-up call: numba
compilation or cache load), ``--repeats`` times quiet and ``--repeats``
times beside ``--busy`` (2) processes ``python -c "while True: pass"``
started before and killed after each timed call, quiet and loaded
alternating. Wall time is :func:`time.perf_counter`, CPU time the
process's user + system time of all its threads (``getrusage``). Printed:
median (min-max) wall and CPU seconds of each mode, the loaded/quiet
ratios of the medians, and the fair wall time (quiet CPU time over the
cores a fair share gives us: ``cores * threads / (threads + N)``).

Workloads (``--part``, default all):

* ``learn``: :func:`restore.learn_dictionary` of ``--learn-images``
  (default tulips and sail, the issue's ``restore learn tulips.png sail.png``)
  with every default: 50,000 8x8 luminance patches, one epoch in
  mini-batches of 256, 131 atoms.
* ``sparse_encode``: :func:`restore.sparse_encode` of ``--n-code`` (20,000)
  centred, unit-norm 8x8 luminance patches of ``--code-images`` over the
  shipped dictionary, lam 0.1, every default.
* ``inpaint``: :func:`restore.inpaint` of ``--inpaint-image`` (chelsea,
  451 x 300) with its ``text1`` mask, every default (dictionary adapted to
  the image, then the passes of patch coding).

The other processes of the machine distort both modes: ``others`` gives
the average number of cores they kept busy while ours ran (from
``/proc/stat``, minus our own CPU time and, loaded, minus that of the
``--busy`` processes); more than ~0.2 means the times are contended. CPU
times are less sensitive to it than wall times.

Run from the repository root::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_load.py
    PYTHONPATH=. .venv/bin/python benchmarks/bench_load.py --part learn --busy 2 --repeats 5
    PYTHONPATH=. .venv/bin/python benchmarks/bench_load.py --data sample_images --learn-images camera coins \
        --code-images astronaut_face --inpaint-image none

The default run takes under a minute on two cores (55 s with ``--repeats 5``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from skimage import io

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _report import CpuWatch, git_state, load_avg, note, table  # noqa: E402

DEFAULT_DATA = HERE.parents[1] / "shared" / "images"
PARTS = ("learn", "sparse_encode", "inpaint", "denoise_nonlocal")
SPIN = "while True: pass"
# Seconds the busy processes run before a timed call: the interpreter's start, so that they spin from its first moment
START_S = 0.3


def cpu_seconds() -> float:
    """User + system CPU seconds of this process, all its threads."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def read(folder: Path, name: str) -> np.ndarray:
    """An image of the folder by name (any of .png, .tif, .jpg), RGB(A) or grey, as stored."""
    for suffix in (".png", ".tif", ".tiff", ".jpg"):
        if (folder / f"{name}{suffix}").is_file():
            return io.imread(folder / f"{name}{suffix}")
    raise SystemExit(f"no image {name!r} in {folder}")


def channels_last(im: np.ndarray) -> np.ndarray:
    """Grey (M, N) as (M, N, 1): as the command line passes images, with ``channel_axis=-1``."""
    return im if im.ndim == 3 else im[..., None]


def grey_patches(images: Sequence[np.ndarray], n: int, rng: np.random.Generator, size: int = 8) -> np.ndarray:
    """``n`` random size x size luminance patches of the images (0-1), centred and unit norm, flat ones skipped."""
    out = []
    per = -(-n // len(images))
    for im in images:
        g = im[..., :3].mean(axis=2) / 255.0 if im.ndim == 3 else im / float(np.iinfo(im.dtype).max)
        r = rng.integers(0, g.shape[0] - size + 1, 4 * per)
        c = rng.integers(0, g.shape[1] - size + 1, 4 * per)
        P = np.lib.stride_tricks.sliding_window_view(g, (size, size))[r, c].reshape(len(r), -1)
        P = P - P.mean(axis=1, keepdims=True)
        nrm = np.linalg.norm(P, axis=1)
        keep = nrm > 0.1
        out.append(P[keep][:per] / nrm[keep][:per, None])
    X = np.concatenate(out)
    return X[rng.permutation(len(X))[:n]]


class Busy:
    """``n`` processes spinning on one core each, for the duration of a ``with`` block."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> Busy:
        try:
            for _ in range(self.n):
                self.procs.append(subprocess.Popen([sys.executable, "-S", "-c", SPIN]))
            if self.n:
                time.sleep(START_S)
        except BaseException:  # Ctrl-C while they start: __exit__ will not run, so stop them here
            self.__exit__()
            raise
        return self

    def cpu(self) -> float:
        """CPU seconds the busy processes used so far (Linux; 0 elsewhere)."""
        total = 0.0
        for p in self.procs:
            try:
                with open(f"/proc/{p.pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
            except (OSError, IndexError, ValueError):
                pass
        return total

    def __exit__(self, *exc: object) -> None:
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()
        self.procs = []


def run(fn: Callable[[], object], busy: int) -> dict:
    """Wall and CPU seconds of one call of ``fn`` beside ``busy`` spinning processes, and the others' cores."""
    with Busy(busy) as spinning:
        watch = CpuWatch()
        b0, w0, c0 = spinning.cpu(), time.perf_counter(), cpu_seconds()
        fn()
        wall, cpu = time.perf_counter() - w0, cpu_seconds() - c0
        others = watch.stop()["other_cpu_s"] - (spinning.cpu() - b0)
    return {"wall": wall, "cpu": cpu, "others": max(0.0, others / wall)}


def workloads(args: argparse.Namespace) -> dict[str, tuple[str, Callable[[], object], Callable[[], object]]]:
    """Per part: a description, the timed call and a small warm-up call."""
    import restore

    out = {}
    if "learn" in args.part:
        imgs = [channels_last(read(args.data, n)) for n in args.learn_images]
        out["learn"] = (f"learn_dictionary({', '.join(args.learn_images)}), every default",
                        lambda: restore.learn_dictionary(imgs, channel_axis=-1, rng=0),
                        lambda: restore.learn_dictionary(imgs, channel_axis=-1, n_patches=1000, rng=0))
    if "sparse_encode" in args.part:
        est = restore.default_dictionary()
        X = grey_patches([read(args.data, n) for n in args.code_images], args.n_code, np.random.default_rng(0))
        D, tree = est.components_, est.tree_
        out["sparse_encode"] = (f"sparse_encode of {len(X)} patches of {', '.join(args.code_images)}, "
                                f"{D.shape[0]} atoms, lam 0.1",
                                lambda: restore.sparse_encode(X, D, lam=0.1, tree=tree),
                                lambda: restore.sparse_encode(X[:500], D, lam=0.1, tree=tree))
    if "inpaint" in args.part and args.inpaint_image != "none":
        img = channels_last(read(args.data, args.inpaint_image))
        mask = read(args.data / "masks", f"{args.inpaint_image}_text1") > 0
        mask = mask if mask.ndim == 2 else mask[..., 0]
        out["inpaint"] = (f"inpaint({args.inpaint_image} {img.shape[1]}x{img.shape[0]}, text1 mask), every default",
                          lambda: restore.inpaint(img, mask, channel_axis=-1),
                          lambda: restore.inpaint(img[:96, :96], mask[:96, :96], channel_axis=-1))
    if "denoise_nonlocal" in args.part and args.inpaint_image != "none":
        grey = read(args.data, args.inpaint_image)
        grey = (grey[..., :3].mean(axis=2) if grey.ndim == 3 else grey)[:512, :512] / 255.0
        noisy = grey + 0.1 * np.random.default_rng(0).standard_normal(grey.shape)
        out["denoise_nonlocal"] = (f"denoise_nonlocal_tree({args.inpaint_image} grey {noisy.shape[1]}x"
                                   f"{noisy.shape[0]}, sigma 0.1), every default",
                                   lambda: restore.denoise_nonlocal_tree(noisy, sigma=0.1),
                                   lambda: restore.denoise_nonlocal_tree(noisy[:64, :64], sigma=0.1))
    return out


def threading_info() -> str:
    """BLAS libraries and their thread counts (threadpoolctl), numba's threading layer, our default threads."""
    import numba
    from threadpoolctl import threadpool_info

    from restore._config import default_num_threads

    blas = ", ".join(f"{i['internal_api']} {i.get('version')} {i['num_threads']} threads "
                     f"({i.get('threading_layer', '?')})" for i in threadpool_info()) or "none found"
    try:
        layer = numba.threading_layer()
    except ValueError:  # no parallel region ran: numba's pool never started
        layer = "not started (no numba parallel region ran)"
    return (f"BLAS between calls: {blas}; numba threading layer: {layer}; restore's threads: "
            f"{default_num_threads()} (RESTORE_NUM_THREADS)")


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", nargs="+", choices=PARTS, default=list(PARTS))
    ap.add_argument("--busy", type=int, default=2, help="busy processes beside ours in the loaded mode")
    ap.add_argument("--repeats", type=int, default=3, help="timed calls per workload and mode")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder of the images (and masks/ for inpaint)")
    ap.add_argument("--learn-images", nargs="+", default=["tulips", "sail"])
    ap.add_argument("--code-images", nargs="+", default=["astronaut", "coffee"])
    ap.add_argument("--n-code", type=int, default=20000, help="patches coded by sparse_encode")
    ap.add_argument("--inpaint-image", default="chelsea", help="image with a masks/<name>_text1 mask, or none")
    ap.add_argument("--json", type=Path, default=None, help="also write every number to this JSON file")
    args = ap.parse_args(argv)
    if not args.data.is_dir():
        raise SystemExit(f"no image folder {args.data} (use --data)")
    if args.busy < 0 or args.repeats < 1:
        raise SystemExit("--busy must be >= 0 and --repeats >= 1")
    t_start = time.perf_counter()
    watch = CpuWatch()
    from restore._config import default_num_threads

    threads, cores = default_num_threads(), len(os.sched_getaffinity(0))
    out: dict = {"git": git_state(), "load_start": load_avg(), "args": {k: str(v) if isinstance(v, Path) else v
                                                                       for k, v in vars(args).items()}}
    print(f"restore at {out['git']}; load average at start: {out['load_start']}  (CPUs: {os.cpu_count()})",
          flush=True)
    jobs = workloads(args)
    for _, _, warm in jobs.values():
        warm()
    out["threading"] = threading_info()  # after the warm-up: what the calls used
    print(out["threading"] + "\n", flush=True)
    fair_cores = cores * min(threads, cores) / (min(threads, cores) + args.busy) if args.busy else cores
    rows = []
    for name, (desc, fn, _) in jobs.items():
        res: dict[str, list[dict]] = {"quiet": [], "loaded": []}
        for r in range(args.repeats):
            for mode, busy in (("quiet", 0), ("loaded", args.busy)):
                note(f"{name} {mode} {r + 1}/{args.repeats}")
                res[mode].append(run(fn, busy))
        med = {m: {k: float(np.median([x[k] for x in v])) for k in ("wall", "cpu", "others")} for m, v in res.items()}
        fair = med["quiet"]["cpu"] / fair_cores
        out[name] = {"description": desc, "runs": res, "median": med, "fair_wall": fair}

        def span(mode: str, key: str, res=res, med=med) -> str:
            v = [x[key] for x in res[mode]]
            return f"{med[mode][key]:.2f} ({min(v):.2f}-{max(v):.2f})"

        rows.append([name, span("quiet", "wall"), span("quiet", "cpu"), span("loaded", "wall"), span("loaded", "cpu"),
                     f"{med['loaded']['wall'] / med['quiet']['wall']:.2f}",
                     f"{med['loaded']['cpu'] / med['quiet']['cpu']:.2f}", f"{fair:.2f}",
                     f"{med['quiet']['others']:.2f} / {med['loaded']['others']:.2f}"])
        print(f"{name}: {desc}", flush=True)
    print()
    print(table(["workload", "quiet wall s", "quiet CPU s", "loaded wall s", "loaded CPU s", "x wall", "x CPU",
                 "fair wall s", "others q / l"], rows,
                f"Quiet and beside {args.busy} busy processes on {cores} cores; median (min-max) of {args.repeats}; "
                f"x = loaded / quiet; fair wall = quiet CPU / {fair_cores:.2f} cores (a fair share for "
                f"{min(threads, cores)} threads)"))
    out["total_seconds"] = time.perf_counter() - t_start
    out["load_end"] = load_avg()
    out["contention"] = watch.stop()
    print(f"\ntotal {out['total_seconds']:.0f} s; load average at end: {out['load_end']}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2, default=float))


if __name__ == "__main__":
    from _report import record_results  # the printed tables also go to benchmarks/results/bench_load.md

    with record_results("bench_load"):
        main()
