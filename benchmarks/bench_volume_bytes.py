"""Bytes of memory per voxel of ``denoise_wavelet_tree`` on a 3-D volume held in memory (issue 29).

For each size, a fresh process builds a float32 volume (a smooth volume plus
Gaussian noise of 0.1), imports ``restore`` and warms it up on a small volume
(the kernels load from numba's cache), then resets the kernel's high-water
mark of its resident memory (``/proc/self/clear_refs``) and reads its resident
memory: the baseline. It then denoises the volume as issue 29 sets its
target, ``axes=(0, 1, 2)`` with 8 cycle spins (the default is none: more
shifts, more memory), sigma estimated, lam by SURE, the Wiener stage, and
reads the high-water mark
(VmHWM). Bytes per voxel: (VmHWM - baseline) / voxels; the output (float32,
4 bytes a voxel) is part of it, the input is not. The target: at most 40
bytes a voxel, under either noise. ``--noise poisson-gaussian`` draws photon
noise instead (gain 0.01, read noise 0.02, given to the call) and denoises
under that model: the variance map of the stabilised data is part of the
call's memory (the stabilised data themselves only while the map is made:
the transform reads them stabilised slab by slab). CPU and wall time of the
call are reported too (a shared machine: CPU time is the steadier).

Run from the repository root::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_volume_bytes.py --planes 64 128 --noise auto poisson-gaussian
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _report import load_avg, record_results, table  # noqa: E402

PLANE = 512  # voxels along y and x
CYCLE_SPINS = 8  # the command line's default for volumes

_CHILD = r"""
import sys, time, resource
import numpy as np

def status(key):
    return int([line for line in open("/proc/self/status") if line.startswith(key)][0].split()[1]) * 1024

GAIN, READ_NOISE = 0.01, 0.02  # photon noise: image units per photon, and of the read noise
planes, plane, spins, noise = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
kw = {} if noise == "auto" else {"noise": "poisson-gaussian", "gain": GAIN, "sigma": READ_NOISE}
# the volume, plane by plane (no float64 copy of the whole, which would raise the high-water mark)
vol = np.empty((planes, plane, plane), np.float32)
rng = np.random.default_rng(0)
y, x = np.meshgrid(np.arange(plane), np.arange(plane), indexing="ij")
for z in range(planes):
    clean = 0.5 + 0.25 * np.sin(z / 9.0) * np.cos(y / 13.0) + 0.2 * np.sin(x / 7.0 + y / 29.0)
    if noise == "auto":
        vol[z] = clean + 0.1 * rng.standard_normal((plane, plane))
    else:
        vol[z] = GAIN * rng.poisson(clean / GAIN) + READ_NOISE * rng.standard_normal((plane, plane))
del y, x, clean
from restore import denoise_wavelet_tree
denoise_wavelet_tree(vol[:16, :32, :32].copy(), axes=(0, 1, 2), cycle_spins=spins, **kw)  # kernels, tables
open("/proc/self/clear_refs", "w").write("5")  # VmHWM := VmRSS
base = status("VmRSS")
r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
out = denoise_wavelet_tree(vol, axes=(0, 1, 2), cycle_spins=spins, **kw)
wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
peak = status("VmHWM")
cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
print("RESULT", base, peak, cpu, wall, out.dtype)
"""


def run(planes: int, threads: int, noise: str = "auto") -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RESTORE_NUM_THREADS": str(threads)}
    out = subprocess.run([sys.executable, "-c", _CHILD, str(planes), str(PLANE), str(CYCLE_SPINS), noise],
                         capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(out.stderr)
    base, peak, cpu, wall, dtype = out.stdout.split("RESULT")[-1].split()
    voxels = planes * PLANE * PLANE
    return {"base MB": int(base) / 2**20, "peak MB": int(peak) / 2**20,
            "bytes/voxel": (int(peak) - int(base)) / voxels, "CPU s": float(cpu), "wall s": float(wall),
            "dtype": dtype}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--planes", type=int, nargs="+", default=[64, 128], help="volumes of this many planes of 512 x 512")
    ap.add_argument("--threads", type=int, default=2, help="cores of the call (RESTORE_NUM_THREADS)")
    ap.add_argument("--noise", choices=("auto", "poisson-gaussian"), nargs="+", default=["auto"],
                    help="Gaussian noise of 0.1 denoised with noise='auto', and/or photon noise (gain 0.01, read "
                         "noise 0.02) denoised with its model given")
    args = ap.parse_args()
    rows = []
    for noise, planes in ((n, p) for n in args.noise for p in args.planes):
        r = run(planes, args.threads, noise)
        rows.append((noise, f"{planes} x {PLANE} x {PLANE}", f"{planes * PLANE * PLANE / 2**20:.0f}",
                     f"{r['base MB']:.0f}", f"{r['peak MB']:.0f}", f"{r['bytes/voxel']:.1f}", f"{r['CPU s']:.1f}",
                     f"{r['wall s']:.1f}", load_avg()))
        print(rows[-1], file=sys.stderr, flush=True)
    print(table(("noise", "volume (float32)", "M voxels", "baseline MB", "peak MB", "bytes/voxel", "CPU s", "wall s",
                 "load after"), rows,
                title=f"\nPeak memory of denoise_wavelet_tree(volume, axes=(0, 1, 2), cycle_spins={CYCLE_SPINS}) "
                      f"over the process's memory before the call (input loaded, kernels warm), per voxel; "
                      f"{args.threads} threads"))


if __name__ == "__main__":
    with record_results("bench_volume_bytes"):
        main()
