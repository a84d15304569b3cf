"""Benchmark :func:`restore.denoise_wavelet_tree`: speed, quality of the automatic lam, noise estimation.

The script measures three things in one run and prints aligned tables
(``--json PATH`` also writes every number to a JSON file):

1. **Speed** (``--part speed``). Input: ``skimage.data.camera() / 255`` plus
   Gaussian noise of standard deviation 0.1 (seed ``--seed``), 512 x 512,
   float64. Median wall time (:func:`time.perf_counter`) over ``--repeats``
   calls, after one untimed warm-up call each (numba compilation, plan cache),
   of

   * ``denoise_wavelet_tree(img, lam=0.1, penalty="tree_l2", wavelet="db3")``;
   * the same with ``sigma=0.1, lam="sure"`` (automatic lam);
   * the same as the first with ``cycle_spins=8``;
   * ``skimage.restoration.denoise_wavelet(img, sigma=0.1, wavelet="db3",
     mode="soft", method="BayesShrink", rescale_sigma=True)`` for reference;

   and the ratio of each to a bare PyWavelets round trip
   ``waverec2(wavedec2(img, "db3", mode="periodization", level=5), ...)``.
   Requirement: the plain denoise (first line) costs at most 1.3 round trips.

2. **Quality of the automatic lam** (``--part quality``). Every image of
   ``--images`` (default ``sample_images/``; colour images converted with
   :func:`skimage.color.rgb2gray`), as float in [0, 255]. For each sigma of
   ``--sigmas`` and ``--draws`` noise draws (seeded by image, sigma and draw),
   ``y = x + sigma * N(0, 1)``, all with wavelet db3 and penalty tree_l2:

   * ``auto``: ``denoise_wavelet_tree(y, sigma=sigma)`` (lam by SURE);
   * ``oracle``: best PSNR over ``lam = t * sigma``, ``t`` in
     ``np.geomspace(0.3, 2.0, --oracle-points)``, with ``lam=`` given;
   * ``auto_cs8``: as ``auto`` with ``cycle_spins=8``;
   * ``bayes``: ``255 * skimage.restoration.denoise_wavelet(y / 255,
     sigma=sigma / 255, wavelet="db3", mode="soft", method="BayesShrink",
     rescale_sigma=True)``;
   * ``auto_est``: as ``auto`` with ``sigma=None`` (noise estimated), and the
     relative error of ``restore.estimate_sigma(y)``.

   PSNR is ``10 log10(255^2 / MSE)`` on the unclipped output. One table gives,
   per sigma, the averages over images and draws; a second one the same per
   image (averages over draws). Requirements, checked per sigma and overall:
   ``auto`` within 0.1 dB of ``oracle`` on average, ``auto >= bayes + 0.3 dB``
   and ``auto_cs8 >= bayes + 0.8 dB``.

3. **Noise estimation** (``--part sigma``). For sigma in 5, 10, 25, 50, 100
   (``--est-sigmas``), the mean relative error ``(estimate - sigma) / sigma``
   (and its range) of :func:`restore.estimate_sigma` and of
   :func:`skimage.restoration.estimate_sigma` on the same grey images and
   draws.

Run from the repository root::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_denoise.py
    PYTHONPATH=. .venv/bin/python benchmarks/bench_denoise.py --part speed --repeats 21
    PYTHONPATH=. .venv/bin/python benchmarks/bench_denoise.py --sigmas 10 25 50 --draws 1 --json denoise.json

The default run takes about three minutes on two cores (most of it in part 2).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pywt
from skimage import color, data, io
from skimage.restoration import denoise_wavelet
from skimage.restoration import estimate_sigma as sk_estimate_sigma
from skimage.util import img_as_float

import restore

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import table  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp")
PARTS = ("speed", "quality", "sigma")

# Requirements (dB): auto >= oracle - 0.1, auto >= bayes + 0.3, auto_cs8 >= bayes + 0.8.
REQ_ORACLE_GAP = 0.1
REQ_BAYES_MARGIN = 0.3
REQ_CS8_MARGIN = 0.8
REQ_SPEED_RATIO = 1.3


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------


def psnr(x: np.ndarray, ref: np.ndarray) -> float:
    mse = float(np.mean((x - ref) ** 2))
    return float("inf") if mse == 0 else 10.0 * np.log10(255.0**2 / mse)


def load_grey_images(folder: Path) -> dict[str, np.ndarray]:
    """Every image of ``folder`` as grey float64 in [0, 255]."""
    out = {}
    for path in sorted(folder.iterdir()):
        if path.suffix.lower() not in IMAGE_SUFFIXES:
            continue
        im = io.imread(path)
        g = color.rgb2gray(im[..., :3]) if im.ndim == 3 else img_as_float(im)
        out[path.stem] = 255.0 * np.asarray(g, dtype=np.float64)
    if not out:
        raise SystemExit(f"no images in {folder}")
    return out


def noisy_copy(clean: np.ndarray, sigma: float, seed: int, image_index: int, draw: int) -> np.ndarray:
    rng = np.random.default_rng([seed, image_index, int(round(sigma * 1000)), draw])
    return clean + sigma * rng.standard_normal(clean.shape)


def median_time(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up: numba compilation / cache load, transform plans
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# Part 1: speed
# ---------------------------------------------------------------------------


def bench_speed(repeats: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    img = data.camera() / 255.0 + 0.1 * rng.standard_normal((512, 512))

    def round_trip() -> np.ndarray:
        return pywt.waverec2(pywt.wavedec2(img, "db3", mode="periodization", level=5), "db3", mode="periodization")

    cases: list[tuple[str, Callable[[], object]]] = [
        ("pywt round trip (db3, 5 levels)", round_trip),
        ("denoise lam=0.1", lambda: restore.denoise_wavelet_tree(img, lam=0.1, penalty="tree_l2", wavelet="db3")),
        ('denoise lam="sure" (sigma=0.1)', lambda: restore.denoise_wavelet_tree(
            img, sigma=0.1, lam="sure", penalty="tree_l2", wavelet="db3")),
        ("denoise lam=0.1 cycle_spins=8", lambda: restore.denoise_wavelet_tree(
            img, lam=0.1, penalty="tree_l2", wavelet="db3", cycle_spins=8)),
        ("skimage denoise_wavelet BayesShrink", lambda: denoise_wavelet(
            img, sigma=0.1, wavelet="db3", mode="soft", method="BayesShrink", rescale_sigma=True)),
    ]
    rows = []
    for name, fn in cases:
        progress(f"speed: {name}")
        rows.append({"case": name, "seconds": median_time(fn, repeats)})
    base = rows[0]["seconds"]
    for r in rows:
        r["ratio"] = r["seconds"] / base
    return rows


def print_speed(rows: list[dict], repeats: int) -> None:
    body = [(r["case"], f"{1e3 * r['seconds']:.2f}", f"{r['ratio']:.2f}") for r in rows]
    print(table(("case (512x512 grey, float64)", "median ms", "x round trip"), body,
                f"1. Speed: median wall time over {repeats} repeats"))
    ratio = rows[1]["ratio"]
    verdict = "OK" if ratio <= REQ_SPEED_RATIO else "NOT MET"
    print(f"requirement denoise lam=0.1 <= {REQ_SPEED_RATIO} x round trip: {ratio:.2f} -> {verdict}\n")


# ---------------------------------------------------------------------------
# Part 2: quality of the automatic lam
# ---------------------------------------------------------------------------


def quality_unit(clean: np.ndarray, noisy: np.ndarray, sigma: float, grid: np.ndarray) -> dict:
    out: dict = {}
    den = restore.denoise_wavelet_tree
    out["auto"] = psnr(den(noisy, sigma=sigma, penalty="tree_l2", wavelet="db3"), clean)
    scores = [psnr(den(noisy, lam=float(t * sigma), penalty="tree_l2", wavelet="db3"), clean) for t in grid]
    i = int(np.argmax(scores))
    out["oracle"], out["oracle_t"] = scores[i], float(grid[i])
    out["oracle_at_edge"] = i in (0, len(grid) - 1)
    out["auto_cs8"] = psnr(den(noisy, sigma=sigma, penalty="tree_l2", wavelet="db3", cycle_spins=8), clean)
    bayes = 255.0 * denoise_wavelet(noisy / 255.0, sigma=sigma / 255.0, wavelet="db3", mode="soft",
                                    method="BayesShrink", rescale_sigma=True)
    out["bayes"] = psnr(bayes, clean)
    out["auto_est"] = psnr(den(noisy, sigma=None, penalty="tree_l2", wavelet="db3"), clean)
    out["sigma_est"] = float(restore.estimate_sigma(noisy))
    return out


def bench_quality(images: dict[str, np.ndarray], sigmas: Sequence[float], draws: int, seed: int,
                  grid: np.ndarray) -> list[dict]:
    rows = []
    for sigma in sigmas:
        t0 = time.perf_counter()
        for k, (name, clean) in enumerate(images.items()):
            for d in range(draws):
                noisy = noisy_copy(clean, sigma, seed, k, d)
                rows.append({"image": name, "sigma": sigma, "draw": d, **quality_unit(clean, noisy, sigma, grid)})
        progress(f"quality: sigma {sigma:g} done in {time.perf_counter() - t0:.1f} s")
    return rows


def _mean(rows: list[dict], key: str) -> float:
    return float(np.mean([r[key] for r in rows]))


def summarize_quality(rows: list[dict]) -> list[dict]:
    """Averages over images and draws, per sigma, then over everything (sigma 'all')."""
    groups: list[tuple[object, list[dict]]] = [(s, [r for r in rows if r["sigma"] == s])
                                               for s in dict.fromkeys(r["sigma"] for r in rows)]
    groups.append(("all", rows))
    out = []
    for sigma, rs in groups:
        rel = np.array([(r["sigma_est"] - r["sigma"]) / r["sigma"] for r in rs])
        s = {"sigma": sigma, "n": len(rs)}
        for key in ("auto", "oracle", "auto_cs8", "bayes", "auto_est"):
            s[key] = _mean(rs, key)
        s["auto-oracle"] = s["auto"] - s["oracle"]
        s["auto-bayes"] = s["auto"] - s["bayes"]
        s["cs8-bayes"] = s["auto_cs8"] - s["bayes"]
        s["est-auto"] = s["auto_est"] - s["auto"]
        s["sigma_rel_err"] = float(rel.mean())
        s["sigma_rel_min"] = float(rel.min())
        s["sigma_rel_max"] = float(rel.max())
        s["oracle_at_edge"] = int(sum(r["oracle_at_edge"] for r in rs))
        out.append(s)
    return out


def per_image(rows: list[dict]) -> list[dict]:
    out = []
    for name in dict.fromkeys(r["image"] for r in rows):
        for sigma in dict.fromkeys(r["sigma"] for r in rows):
            rs = [r for r in rows if r["image"] == name and r["sigma"] == sigma]
            out.append({"image": name, "sigma": sigma,
                        **{k: _mean(rs, k) for k in ("auto", "oracle", "auto_cs8", "bayes", "oracle_t")}})
    return out


def check_requirements(summary: list[dict]) -> list[dict]:
    checks = []
    for s in summary:
        checks.append({
            "sigma": s["sigma"],
            "auto_vs_oracle": s["auto-oracle"] >= -REQ_ORACLE_GAP,
            "auto_vs_bayes": s["auto-bayes"] >= REQ_BAYES_MARGIN,
            "cs8_vs_bayes": s["cs8-bayes"] >= REQ_CS8_MARGIN,
        })
    return checks


def print_quality(rows: list[dict], summary: list[dict], checks: list[dict], draws: int, grid: np.ndarray) -> None:
    n_images = len(dict.fromkeys(r["image"] for r in rows))

    def f(x: float) -> str:
        return f"{x:.2f}"

    def g(x: float) -> str:
        return f"{x:+.2f}"

    body = [(f"{s['sigma']:g}" if s["sigma"] != "all" else "all", f(s["auto"]), f(s["oracle"]), g(s["auto-oracle"]),
             f(s["auto_cs8"]), f(s["bayes"]), g(s["auto-bayes"]), g(s["cs8-bayes"]), f(s["auto_est"]),
             g(s["est-auto"]), f"{100 * s['sigma_rel_err']:+.1f}%",
             f"[{100 * s['sigma_rel_min']:+.1f}, {100 * s['sigma_rel_max']:+.1f}]%")
            for s in summary]
    print(table(("sigma", "auto", "oracle", "auto-orc", "auto_cs8", "bayes", "auto-bay", "cs8-bay",
                 "auto_est", "est-auto", "sig err", "sig err range"), body,
                f"2. Quality (PSNR dB, db3, tree_l2): mean over {n_images} images x {draws} draws; "
                f"oracle t in geomspace({grid[0]:g}, {grid[-1]:g}, {len(grid)})"))
    edge = sum(s["oracle_at_edge"] for s in summary if s["sigma"] != "all")
    if edge:
        print(f"warning: the oracle t fell on the edge of its grid in {edge} cases (oracle underestimated there)")
    print()

    body = [(r["image"], f"{r['sigma']:g}", f(r["auto"]), f(r["oracle"]), g(r["auto"] - r["oracle"]),
             f"{r['oracle_t']:.2f}", f(r["auto_cs8"]), f(r["bayes"]), g(r["auto"] - r["bayes"]),
             g(r["auto_cs8"] - r["bayes"]))
            for r in per_image(rows)]
    print(table(("image", "sigma", "auto", "oracle", "auto-orc", "orc t", "auto_cs8", "bayes", "auto-bay",
                 "cs8-bay"), body, f"2b. Quality per image (PSNR dB, mean over {draws} draws)"))
    print()

    body = []
    for c, s in zip(checks, summary, strict=True):
        body.append((f"{c['sigma']:g}" if c["sigma"] != "all" else "all",
                     f"{s['auto-oracle']:+.2f} {'ok' if c['auto_vs_oracle'] else 'NOT MET'}",
                     f"{s['auto-bayes']:+.2f} {'ok' if c['auto_vs_bayes'] else 'NOT MET'}",
                     f"{s['cs8-bayes']:+.2f} {'ok' if c['cs8_vs_bayes'] else 'NOT MET'}"))
    print(table(("sigma", f"auto-oracle >= -{REQ_ORACLE_GAP}", f"auto-bayes >= {REQ_BAYES_MARGIN}",
                 f"cs8-bayes >= {REQ_CS8_MARGIN}"), body, "2c. Requirements (dB, averages)"))
    print()


# ---------------------------------------------------------------------------
# Part 3: noise estimation
# ---------------------------------------------------------------------------


def bench_sigma(images: dict[str, np.ndarray], sigmas: Sequence[float], draws: int, seed: int) -> list[dict]:
    rows = []
    for sigma in sigmas:
        ours, theirs = [], []
        for k, clean in enumerate(images.values()):
            for d in range(draws):
                noisy = noisy_copy(clean, sigma, seed, k, d)
                ours.append((float(restore.estimate_sigma(noisy)) - sigma) / sigma)
                theirs.append((float(sk_estimate_sigma(noisy)) - sigma) / sigma)
        row: dict = {"sigma": sigma, "n": len(ours)}
        for tag, rel in (("restore", np.array(ours)), ("skimage", np.array(theirs))):
            row[f"{tag}_mean"] = float(rel.mean())
            row[f"{tag}_abs"] = float(np.abs(rel).mean())
            row[f"{tag}_min"] = float(rel.min())
            row[f"{tag}_max"] = float(rel.max())
        rows.append(row)
    return rows


def print_sigma(rows: list[dict], n_images: int, draws: int) -> None:
    def pct(x: float) -> str:
        return f"{100 * x:+.1f}%"

    body = [(f"{r['sigma']:g}", pct(r["restore_mean"]), f"{100 * r['restore_abs']:.1f}%",
             f"[{pct(r['restore_min'])}, {pct(r['restore_max'])}]", pct(r["skimage_mean"]),
             f"{100 * r['skimage_abs']:.1f}%", f"[{pct(r['skimage_min'])}, {pct(r['skimage_max'])}]")
            for r in rows]
    print(table(("sigma", "restore mean", "restore |err|", "restore range", "skimage mean", "skimage |err|",
                 "skimage range"), body,
                f"3. Noise estimation: relative error (estimate - sigma) / sigma over {n_images} grey images "
                f"x {draws} draws"))
    print()


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", nargs="+", choices=PARTS, default=list(PARTS), help="parts to run (default: all)")
    ap.add_argument("--repeats", type=int, default=11, help="timed repeats per speed case (default 11)")
    ap.add_argument("--images", type=Path, default=ROOT / "sample_images", help="folder of test images")
    ap.add_argument("--sigmas", type=float, nargs="+", default=[5.0, 10.0, 25.0, 50.0, 100.0],
                    help="noise levels of part 2, 8-bit units (default 5 10 25 50 100)")
    ap.add_argument("--est-sigmas", type=float, nargs="+", default=[5.0, 10.0, 25.0, 50.0, 100.0],
                    help="noise levels of part 3 (default 5 10 25 50 100)")
    ap.add_argument("--draws", type=int, default=3, help="noise draws per image and sigma (default 3)")
    ap.add_argument("--oracle-points", type=int, default=40, help="size of the oracle grid of t (default 40)")
    ap.add_argument("--seed", type=int, default=0, help="base seed of the noise (default 0)")
    ap.add_argument("--json", type=Path, default=None, metavar="PATH", help="also write all results as JSON")
    args = ap.parse_args()

    t_start = time.perf_counter()
    result: dict = {"config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}}
    if "speed" in args.part:
        speed = bench_speed(args.repeats, args.seed)
        print_speed(speed, args.repeats)
        result["speed"] = speed
    if "quality" in args.part or "sigma" in args.part:
        images = load_grey_images(args.images)
    if "quality" in args.part:
        grid = np.geomspace(0.3, 2.0, args.oracle_points)
        rows = bench_quality(images, args.sigmas, args.draws, args.seed, grid)
        summary = summarize_quality(rows)
        checks = check_requirements(summary)
        print_quality(rows, summary, checks, args.draws, grid)
        result["quality"] = {"rows": rows, "summary": summary, "per_image": per_image(rows), "checks": checks}
    if "sigma" in args.part:
        est = bench_sigma(images, args.est_sigmas, args.draws, args.seed)
        print_sigma(est, len(images), args.draws)
        result["sigma_estimation"] = est
    total = time.perf_counter() - t_start
    result["total_seconds"] = total
    print(f"total runtime: {total:.1f} s")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    from _report import record_results  # the printed tables also go to benchmarks/results/bench_denoise.md

    with record_results("bench_denoise"):
        main()
