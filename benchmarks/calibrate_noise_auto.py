"""Measure how often ``estimate_noise(noise="auto")`` chooses the right model, and its clipped read noise.

A grid of (image, noise) cases, each drawn once with a fixed seed:

* **Gaussian**: grey photographs (``sample_images/`` and, when present,
  ``../shared/images``) in [0, 1] plus sigma 2, 5, 10, 25, 50 (of 255), as
  float and as clipped, rounded uint8. The right answer is ``"gaussian"``.
* **Poisson-Gaussian**: the same photographs and the volumes of
  ``benchmarks/_volumes.py`` (the nuclei crop when ``../shared/volumes``
  holds it, spots, filaments, cells) as expected photons ``peak * x`` for
  peak 10, 30, 100, 300, 1000, plus read noise 0.005, 0.02, 0.05 (image
  units). Cases are grouped by how much the photon noise matters: the true
  noise variance's ratio between the image's brightest and darkest levels
  (its 99.9th and 0.1th percentiles). Above 3, the right answer is
  ``"poisson-gaussian"``; between 1.5 and 3 it is too (the noise deviation
  changes by 22-73%); below 1.5 either answer serves, and the share is
  shown for information.
* **Crops**: the volumes' 32 x 64 x 64 centre crops (those of
  ``bench_nonlocal.py --volumes``) under photon noise as
  ``rng.poisson(peak * x) / peak + read * N(0, 1)``, (peak, read) of (10,
  0.02) (the volume benchmark's protocol), (30, 0.02) and (100, 0.01), seeds
  3 to 7: few bright places (sparse spots, thin filaments), where the
  noise-level function has the least to go on. The right answer is
  ``"poisson-gaussian"`` (every case's variance ratio is above 3); the gain
  is shown as the median of estimated over true.
* **Clipped**: fluorescence volumes as uint16 counts, 20 counts per
  photon, read noise 800 counts, offset removed so that the dark places
  clip at 0: the estimated read noise and gain.

The nuclei crop carries its own acquisition noise (photon noise included),
so its "clean" image is not clean: its cases count toward the accuracy all
the same, as a user's data would.

    python benchmarks/calibrate_noise_auto.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _volumes  # noqa: E402

from restore.noise import estimate_noise  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED_IMAGES = ROOT.parent / "shared" / "images"
SIGMAS_255 = (2, 5, 10, 25, 50)
PEAKS = (10, 30, 100, 300, 1000)
READS = (0.005, 0.02, 0.05)


CROP_NOISE = ((10, 0.02), (30, 0.02), (100, 0.01))  # (peak photons, read noise) of the crops
CROP_SEEDS = range(3, 8)


def centre_crop(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The centre crop of ``x`` of at most ``shape`` (as bench_nonlocal.py --volumes takes it)."""
    starts = [max((n - c) // 2, 0) for n, c in zip(x.shape, shape, strict=True)]
    return np.ascontiguousarray(x[tuple(slice(a, a + c) for a, c in zip(starts, shape, strict=True))])


def photos() -> dict[str, np.ndarray]:
    """Grey photographs in [0, 1]: the repository's, then the shared folder's when it exists."""
    from skimage import color, io, util

    out = {}
    for folder in (ROOT / "sample_images", SHARED_IMAGES):
        if not folder.is_dir():
            continue
        for f in sorted(folder.glob("*.png")):
            x = io.imread(f)
            if x.ndim == 3:
                x = color.rgb2gray(x[..., :3])
            out[f"{folder.name}/{f.stem}"] = util.img_as_float(x)
    return out


def estimate(y: np.ndarray):
    """The 'auto' estimate, its warnings silenced (counted in the estimate's uncertain field)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return estimate_noise(y)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="the repository's photographs and the synthetic "
                    "volumes only (default: also ../shared)")
    args = ap.parse_args()
    t0, c0 = time.perf_counter(), time.process_time()
    imgs = photos()
    if args.quick:
        imgs = {k: v for k, v in imgs.items() if k.startswith("sample_images")}
    vols = _volumes.volumes() if not args.quick else {k: v for k, v in _volumes.volumes("/nonexistent").items()}
    rng = np.random.default_rng(0)

    # Gaussian
    gauss_rows = []
    for name, x in imgs.items():
        for s in SIGMAS_255:
            y = x + s / 255 * rng.standard_normal(x.shape)
            for dtype in ("float", "uint8"):
                z = y if dtype == "float" else np.clip(np.round(y * 255), 0, 255).astype(np.uint8)
                e = estimate(z)
                gauss_rows.append((name, s, dtype, e.noise, e.sigma * 255, e.uncertain))
    print("## Gaussian noise (right answer: gaussian)\n")
    print("| sigma (of 255) | float: gaussian | uint8: gaussian | median abs sigma error | uncertain |")
    print("|---|---|---|---|---|")
    for s in SIGMAS_255:
        rows = [r for r in gauss_rows if r[1] == s]
        f = [r for r in rows if r[2] == "float"]
        u = [r for r in rows if r[2] == "uint8"]
        ok = lambda rs: f"{sum(r[3] == 'gaussian' for r in rs)}/{len(rs)}"  # noqa: E731
        err = np.median([abs(r[4] / s - 1) for r in rows])
        print(f"| {s} | {ok(f)} | {ok(u)} | {100 * err:.1f}% | {sum(r[5] for r in rows)} |")
    wrong = [r for r in gauss_rows if r[3] != "gaussian"]
    for r in wrong:
        print(f"  wrong: {r[0]} sigma {r[1]} {r[2]} -> {r[3]}")

    # Poisson-Gaussian
    pg_rows = []
    cases = [(k, v) for k, v in imgs.items()] + [(f"volume/{k}", v) for k, v in vols.items()]
    for name, x in cases:
        lo, hi = np.quantile(x, [0.001, 0.999])
        for peak in PEAKS:
            for read in READS:
                gain = 1.0 / peak
                y = gain * rng.poisson(x / gain) + read * rng.standard_normal(x.shape)
                e = estimate(y)
                ratio = (gain * hi + read**2) / (gain * lo + read**2)
                gerr = abs(e.gain / gain - 1) if e.noise == "poisson-gaussian" else np.nan
                pg_rows.append((name, peak, read, ratio, e.noise, gerr, e.uncertain))
    print("\n## Poisson-Gaussian noise, by the true variance ratio across the image's levels\n")
    print("| true variance ratio | cases | chosen poisson-gaussian | median gain error (when chosen) | uncertain |")
    print("|---|---|---|---|---|")
    for a, b in ((3.0, np.inf), (1.5, 3.0), (0.0, 1.5)):
        rows = [r for r in pg_rows if a <= r[3] < b]
        if not rows:
            continue
        n_pg = sum(r[4] == "poisson-gaussian" for r in rows)
        gerr = np.nanmedian([r[5] for r in rows]) if n_pg else np.nan
        print(f"| {a:g} to {b:g} | {len(rows)} | {n_pg}/{len(rows)} ({100 * n_pg / len(rows):.0f}%) | "
              f"{100 * gerr:.1f}% | {sum(r[6] for r in rows)} |")
    for r in pg_rows:
        if r[3] >= 3.0 and r[4] != "poisson-gaussian":
            print(f"  missed: {r[0]} peak {r[1]} read {r[2]} (ratio {r[3]:.2f}) -> {r[4]}")

    # Crops of the volumes: few bright places
    print("\n## The volumes' 32 x 64 x 64 centre crops under photon noise (right answer: poisson-gaussian)\n")
    print("| volume | cases | chosen poisson-gaussian | median estimated / true gain (when chosen) |")
    print("|---|---|---|---|")
    for name, full in vols.items():
        x = centre_crop(full, (32, 64, 64))
        got = []
        for peak, read in CROP_NOISE:
            for seed in CROP_SEEDS:
                r = np.random.default_rng(seed)
                e = estimate(r.poisson(peak * x) / peak + read * r.standard_normal(x.shape))
                got.append((e.noise, (e.gain or 0.0) * peak))
                if e.noise != "poisson-gaussian":
                    print(f"  missed: {name} peak {peak} read {read} seed {seed} -> {e.noise}")
        g = [v for n, v in got if n == "poisson-gaussian"]
        print(f"| {name} | {len(got)} | {len(g)}/{len(got)} | {np.median(g) if g else np.nan:.2f} |")

    # Clipped uint16 counts
    print("\n## uint16 counts clipped at 0: 20 counts per photon, read noise 800 counts\n")
    print("| volume | peak photons | clipped at 0 | chosen | read noise | gain | uncertain |")
    print("|---|---|---|---|---|---|---|")
    for name, x in vols.items():
        for peak in (300, 3000):
            z = 20.0 * rng.poisson(x * peak) + 800.0 * rng.standard_normal(x.shape)
            y = np.clip(np.round(z), 0, 65535).astype(np.uint16)
            e = estimate(y)
            print(f"| {name} | {peak} | {100 * np.mean(y == 0):.0f}% | {e.noise} | {e.sigma * 65535:.0f} | "
                  f"{(e.gain or 0) * 65535:.1f} | {e.uncertain} |")
    print(f"\n{time.perf_counter() - t0:.0f} s wall, {time.process_time() - c0:.0f} s CPU")


if __name__ == "__main__":
    main()
