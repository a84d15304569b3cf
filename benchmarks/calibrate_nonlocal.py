"""Calibrate the ``lam`` rule of the non-local core (:mod:`restore._nonlocal`): ``lam = t * sigma``, one t.

For each sigma of ``--sigmas`` (8-bit units, 5 to 100 by default) and each
grey photo of ``--images`` (``../shared/images``, centre crops of ``--crop``
pixels, noise seeded by image and sigma as in ``bench_nonlocal.py``), the
PSNR of ``nonlocal_denoise`` with ``lam = t`` for every ``t`` of ``--grid``
(planes) and, with ``--volumes``, on the volumes of ``bench_nonlocal.py
--volumes`` at their one noise level. The table gives the mean PSNR per t and
sigma, the best t per sigma, and what the default t loses against it: a
single multiple is right when that loss stays small at every sigma.

Run from the repository root (one thread, so that it can run beside other
work)::

    PYTHONPATH=. .venv/bin/python benchmarks/calibrate_nonlocal.py
    PYTHONPATH=. .venv/bin/python benchmarks/calibrate_nonlocal.py --volumes --grid 0.35 0.5 0.7
"""

from __future__ import annotations

import argparse
import sys
import zlib
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_nonlocal import _grey, _psnr  # noqa: E402


def main() -> None:
    from restore._nonlocal import NonlocalSettings, nonlocal_denoise

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", nargs="+", default=["astronaut", "barbara", "kodim23", "monarch"])
    ap.add_argument("--sigmas", nargs="+", type=float, default=[5, 10, 25, 50, 100])
    ap.add_argument("--grid", nargs="+", type=float, default=[0.2, 0.24, 0.28, 0.32, 0.4])
    ap.add_argument("--crop", type=int, default=192)
    ap.add_argument("--volumes", action="store_true")
    args = ap.parse_args()
    if args.volumes:
        import _volumes as V

        cases = {}
        for full in V.volumes().values():
            z0, y0, x0 = ((n - c) // 2 for n, c in zip(full.shape, (32, 64, 64), strict=True))
            x = np.ascontiguousarray(full[max(z0, 0):z0 + 32, y0:y0 + 64, x0:x0 + 64])
            s = V.GAUSSIAN["sigma"]
            y = x + s * np.random.default_rng(V.GAUSSIAN["seed"]).standard_normal(x.shape)
            cases.setdefault(round(s * 255, 3), []).append((x, y, s))
        default = NonlocalSettings().resolved(3).lam
    else:
        cases = {}
        for sig in args.sigmas:
            for name in args.images:
                x = _grey(name, args.crop)
                s = sig / 255
                tag = int(sig) if float(sig).is_integer() else sig  # the seeds of bench_nonlocal.py
                rng = np.random.default_rng(zlib.crc32(f"{name}-{tag}".encode()))
                cases.setdefault(sig, []).append((x, x + s * rng.standard_normal(x.shape), s))
        default = NonlocalSettings().resolved(2).lam
    grid = sorted(set(args.grid) | {default})
    print(f"mean PSNR (dB) per lam multiple t; default t = {default}")
    print(f"{'sigma':>6s} " + " ".join(f"{t:>7.3g}" for t in grid) + f" {'best t':>7s} {'default loses':>13s}")
    for sig, items in cases.items():
        means = []
        for t in grid:
            st = NonlocalSettings(lam=t)
            means.append(np.mean([_psnr(x, nonlocal_denoise(y, None, s, settings=st, n_threads=1))
                                  for x, y, s in items]))
        best = int(np.argmax(means))
        loss = means[best] - means[grid.index(default)]
        print(f"{sig:6g} " + " ".join(f"{m:7.2f}" for m in means) + f" {grid[best]:7.3g} {loss:13.2f}", flush=True)


if __name__ == "__main__":
    main()
