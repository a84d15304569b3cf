"""Peak memory of ``restore denoise IN.zarr OUT.zarr --volume --sigma 0.1`` against the store's size (issue 29).

For each size, a float32 store of P x 512 x 512 voxels (a smooth volume plus
Gaussian noise of 0.1, chunks of 32 x 128 x 128) is denoised by the command
line with its defaults on ``--threads`` cores (``RESTORE_NUM_THREADS``), in a
fresh process. Its peak resident memory is sampled with psutil every 20 ms
over the whole process tree (the command and any child it starts), and the
kernel's own high-water mark of the command (VmHWM) is read at its end; the
wall and CPU times are reported too, and the CPU seconds a MB, which stay
put if the time is linear in the size. The target: below 0.75 GB whatever
the size. With ``--check-planes P`` the result of a P-plane store is compared
with the library on the same volume in memory (PSNR against the clean
volume; target: within 0.05 dB). The tables go to
``benchmarks/results/bench_store_memory.md``, with the machine's load
average after each size (the timings are those of a shared machine).

Run from the repository root::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_store_memory.py --mb 256 512 1024 --check-planes 128
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

PLANE = 512  # voxels along y and x
CHUNKS = (32, 128, 128)  # the store's chunks (a common OME-Zarr chunking)
SAMPLE_S = 0.02  # seconds between two samples of the process tree's resident memory
#: Largest ratio between the CPU seconds a MB of two sizes for the time to count as linear in the size: blocks at
#: the volume's borders overlap less, so small stores cost a little less a MB.
LINEAR_SPREAD = 1.25

_CHILD = r"""
import sys, resource
import restore.cli
code = restore.cli.main(sys.argv[1:])
hwm = [line for line in open("/proc/self/status") if line.startswith("VmHWM")][0].split()[1]
print("VMHWM", int(hwm) * 1024, code)
"""


def _clean(planes: int):
    import dask.array as da

    z, y, x = da.meshgrid(*[da.arange(k, chunks=c) for k, c in zip((planes, PLANE, PLANE), CHUNKS, strict=True)],
                          indexing="ij")
    return 0.5 + 0.25 * da.sin(z / 9.0) * da.cos(y / 13.0) + 0.2 * da.sin(x / 7.0 + y / 29.0)


def make_store(path: Path, planes: int) -> None:
    import dask.array as da
    import numpy as np

    clean = _clean(planes)
    noise = da.random.default_rng(0).standard_normal(clean.shape, chunks=CHUNKS)
    (clean + 0.1 * noise).astype(np.float32).to_zarr(str(path), overwrite=True)


def run(src: Path, dst: Path, threads: int) -> dict:
    """Run the command in a fresh process; its tree's peak RSS (sampled), its VmHWM, wall and CPU time."""
    import psutil

    env = {**os.environ, "PYTHONPATH": str(ROOT), "RESTORE_NUM_THREADS": str(threads)}
    args = [sys.executable, "-c", _CHILD, "denoise", str(src), str(dst), "--volume", "--sigma", "0.1", "--quiet",
            "--force"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    ps, peak, cpu = psutil.Process(proc.pid), 0, {}
    while proc.poll() is None:
        try:
            tree = [ps, *ps.children(recursive=True)]
            rss = 0
            for p in tree:
                with p.oneshot():
                    rss += p.memory_info().rss
                    t = p.cpu_times()
                    cpu[p.pid] = t.user + t.system
            peak = max(peak, rss)
        except psutil.Error:
            pass
        time.sleep(SAMPLE_S)
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(err)
    hwm, _ = out.split("VMHWM")[-1].split()
    return {"tree peak MB": peak / 2**20, "VmHWM MB": int(hwm) / 2**20, "wall s": wall,
            "CPU s": sum(cpu.values())}


def check(planes: int, threads: int, tmp: Path) -> tuple[float, float]:
    """PSNR of the command's result and of the library in memory, on a store of ``planes`` planes."""
    import numpy as np
    import zarr

    from restore import denoise_wavelet_tree

    src, dst = tmp / "check.zarr", tmp / "check_out.zarr"
    make_store(src, planes)
    run(src, dst, threads)
    clean = _clean(planes).compute()
    noisy = zarr.open_array(str(src), mode="r")[...]
    ref = denoise_wavelet_tree(noisy, axes=(0, 1, 2), sigma=0.1)

    def psnr(x):
        return float(10 * np.log10(1.0 / np.mean((np.asarray(x, np.float64) - clean) ** 2)))

    return psnr(zarr.open_array(str(dst), mode="r")[...]), psnr(ref)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=int, nargs="+", default=[256, 1024], help="store sizes in MB of float32")
    ap.add_argument("--threads", type=int, default=2, help="cores of the command (RESTORE_NUM_THREADS)")
    ap.add_argument("--check-planes", type=int, default=0, help="also compare with the library in memory")
    ap.add_argument("--dir", default=None, help="folder of the temporary stores (default: the system's)")
    args = ap.parse_args()
    print(f"{'store MB':>9} {'shape':>16} {'tree peak MB':>13} {'VmHWM MB':>9} {'wall s':>8} {'CPU s':>8} "
          f"{'CPU s/MB':>9} {'load after':>16}")
    per_mb = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        tmp = Path(tmp)
        for mb in args.mb:
            planes = max(1, mb * 2**20 // (4 * PLANE * PLANE))
            src = tmp / f"in{planes}.zarr"
            make_store(src, planes)
            r = run(src, tmp / "out.zarr", args.threads)
            per_mb.append(r["CPU s"] / mb)
            print(f"{mb:>9} {f'{planes}x{PLANE}x{PLANE}':>16} {r['tree peak MB']:>13.0f} {r['VmHWM MB']:>9.0f} "
                  f"{r['wall s']:>8.1f} {r['CPU s']:>8.1f} {per_mb[-1]:>9.3f} {load_avg():>16}", flush=True)
            import shutil

            shutil.rmtree(src)
        if len(per_mb) > 1:  # linear: the CPU a MB stays put (wall times follow it on a machine of one's own)
            spread = max(per_mb) / min(per_mb)
            print(f"\nCPU seconds a MB: {min(per_mb):.3f} to {max(per_mb):.3f}, a spread of {spread:.2f}x over "
                  f"{max(args.mb) / min(args.mb):.0f}x the size (linear: within {LINEAR_SPREAD}x): "
                  f"{'met' if spread <= LINEAR_SPREAD else 'NOT met'}")
        if args.check_planes:
            cli, mem = check(args.check_planes, args.threads, tmp)
            print(f"{args.check_planes} planes: PSNR command {cli:.3f} dB, in memory {mem:.3f} dB, "
                  f"difference {cli - mem:+.3f} dB")


if __name__ == "__main__":
    with record_results("bench_store_memory"):
        main()
