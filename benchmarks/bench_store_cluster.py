"""What fresh Dask workers pay to compile: `restore denoise --volume --scheduler` on fresh and warm workers.

A float32 store of P x 512 x 512 voxels (``bench_store_memory.py``'s
volume: smooth plus Gaussian noise of 0.1, chunks of 32 x 128 x 128) is
denoised by the command line with ``--scheduler`` on a
``distributed.LocalCluster`` of two single-threaded worker processes, three
times:

1. on fresh workers whose ``NUMBA_CACHE_DIR`` is a new empty folder: they
   compile every kernel they run, as on a cluster's first run;
2. again on the same workers: the kernels are in their memory;
3. on fresh workers sharing the folder the first ones wrote: they load the
   kernels from it, as workers do when ``NUMBA_CACHE_DIR`` is on a shared
   file system (or the package's own ``__pycache__`` is writable).

The command itself keeps its usual (warm) cache. Per run: the wall time,
and the kernels the workers compiled with the CPU time of compiling them
(numba's ``numba:compile`` events, as ``bench_first_call.py`` counts them,
summed over the workers): what fresh workers pay, measured directly rather
than as a difference of wall times a shared machine blurs. The table goes
to ``benchmarks/results/bench_store_cluster.md``.

Run from the repository root::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_store_cluster.py --planes 128
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _report import load_avg, record_results  # noqa: E402
from bench_store_memory import PLANE, make_store  # noqa: E402


def _listen(dask_worker: object) -> None:
    """In a worker: count numba's compiles from now on."""
    from bench_first_call import CompileTimes

    dask_worker.restore_compiles = CompileTimes()
    dask_worker.restore_compiles.install()


def _compiled(dask_worker: object) -> dict[str, float]:
    """In a worker: CPU seconds of compiling per kernel since :func:`_listen`, then start counting again."""
    times = dict(dask_worker.restore_compiles.seconds)
    dask_worker.restore_compiles.seconds.clear()
    return times


RUNS = (("fresh workers, empty numba cache", True), ("the same workers again", False),
        ("fresh workers, the cache they wrote", True))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--planes", type=int, default=128, help="planes of 512 x 512 of the store")
    ap.add_argument("--dir", default=None, help="folder of the temporary stores (default: the system's)")
    args = ap.parse_args()
    import distributed

    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    print(f"--scheduler on a LocalCluster of 2 single-threaded worker processes, {args.planes}x{PLANE}x{PLANE} "
          f"float32\n")
    print(f"{'run':<36} {'wall s':>8} {'kernels compiled':>17} {'compile CPU s':>14} {'load after':>16}")
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        tmp = Path(tmp)
        src, cache = tmp / "in.zarr", tmp / "numba_cache"
        make_store(src, args.planes)
        cache.mkdir()
        cluster = client = None
        for label, fresh in RUNS:
            if fresh:
                if cluster is not None:
                    client.close()
                    cluster.close()
                # the workers' environment (spawned now), not the command's: an empty cache, and this script's
                # helpers and bench_first_call's to import
                saved = dict(os.environ)
                os.environ["NUMBA_CACHE_DIR"] = str(cache)
                os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "benchmarks")])
                try:
                    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                                       dashboard_address=":0")
                finally:
                    os.environ.clear()
                    os.environ.update(saved)
                client = distributed.Client(cluster)
                client.run(_listen)
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "restore.cli", "denoise", str(src), str(tmp / "out.zarr"),
                            "--volume", "--sigma", "0.1", "--quiet", "--force", "--scheduler",
                            cluster.scheduler_address], env=env, check=True, capture_output=True)
            wall = time.perf_counter() - t0
            compiled: dict[str, float] = {}
            for times in client.run(_compiled).values():
                for k, v in times.items():
                    compiled[k] = compiled.get(k, 0.0) + v
            names = ", ".join(sorted(compiled)) or "none"
            print(f"{label:<36} {wall:>8.1f} {len(compiled):>17} {sum(compiled.values()):>14.2f} {load_avg():>16}",
                  flush=True)
            print(f"  compiled: {names}", flush=True)
        client.close()
        cluster.close()


if __name__ == "__main__":
    with record_results("bench_store_cluster"):
        main()
