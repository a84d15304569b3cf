"""Benchmark :func:`restore.inpaint`: quality against scikit-image and OpenCV, and scale on a 15.9 MP photo.

Images and masks come from ``--data`` (default ``../shared/images``, see its
README): colour PNGs, masks ``masks/<image>_<kind>.png`` with 255 = missing.
Images are converted to float in [0, 1]; the quality measure is the
masked-pixel PSNR ``10 log10(1 / MSE)``, the MSE taken over every channel of
the missing pixels only (known pixels are returned unchanged by every
method). Prints aligned tables; ``--json PATH`` also writes every number.

1. **Quality** (``--part quality``). For every image of ``--images`` and mask
   kind of ``--masks``:

   * ours: ``restore.inpaint(img, mask, channel_axis=-1)`` (float64 image,
     every default: dictionary fine-tuned on the image when it has enough
     complete patches, 18 passes on grids of step 8, 5 non-local passes;
     on random loss, the groups' Gaussian model iterated as a prior;
     ``--stride`` sets the stride);
   * ``skimage.restoration.inpaint_biharmonic(img, mask, channel_axis=-1)``
     (``--skip-biharmonic`` drops it: it takes ~20 s per 0.4 MP image on
     rand90);
   * OpenCV Telea: ``cv2.inpaint`` of the 8-bit image with radius 3
     (``cv2.INPAINT_TELEA``), converted back to float / 255;
   * OpenCV's frequency selective reconstruction (Genser et al.'s FSR,
     2018; ``opencv-contrib``): ``cv2.xphoto.inpaint`` of the 8-bit
     image in BGR order with ``cv2.xphoto.INPAINT_FSR_FAST``, converted back
     to float / 255 (one run, single-threaded: the time is for reference).

   One row per case (PSNR of each method, ours minus biharmonic, wall times
   from :func:`time.perf_counter`: on cases where ours takes under
   ``TIME_AGAIN_S``, the medians of ``TIME_RUNS`` more runs of ours and of
   biharmonic, alternately), then the averages per mask kind.
   Requirements (issue 30), on the averages over the images: text1: ours >=
   biharmonic + 1.0 dB; the average of rand70 and rand90: ours >= biharmonic +
   1.5 dB; on text masks, ours in at most 5x biharmonic's wall time (same
   run, warm; CPU times are printed too: the machine may be shared).
   ``--others`` runs photographs unlike the default ones (barbara, coffee,
   astronaut, seeding_crop).

2. **Scale** (``--part scale``). ``seeding.png`` (5312 x 2988, 15.9 MP) with
   ``masks/seeding_text04.png`` (7.6 % missing), loaded as float32 in
   [0, 1], inpainted by ``inpaint_biharmonic`` and by ours with every
   default (other strides with ``--scale-strides``), each in a fresh Python
   process so that its peak memory is that of the job (loading included):
   the child's ``VmHWM`` from ``/proc/self/status`` (its own address space's
   high-water mark; the ``ru_maxrss`` that :func:`os.wait4` reports is only
   a fallback, as Linux carries the parent's RSS at fork into it, which is
   wrong after part 1 has grown the parent). Reported: wall time of the
   call and of the whole process, CPU time, peak RSS, masked PSNR, the time
   split from the ``restore.inpainting`` log messages ("dictionary ready in
   X s" = fine-tuning the dictionary, on a thread of its own while the
   start is interpolated: the two overlap; "interpolated in Z s" = the
   biharmonic start and its diffusion; "coded and averaged patches in Y s"; "non-local passes in W s";
   "non-local prior: N steps in V s", the ``prior s`` column of part 1)
   and the number of patches coded. Requirement (issue 30): ours within 3x
   biharmonic's wall time (same run), at most 1.5 GB peak, masked PSNR
   above biharmonic's.

Run from the repository root::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_inpaint.py
    PYTHONPATH=. .venv/bin/python benchmarks/bench_inpaint.py --part all --full
    PYTHONPATH=. .venv/bin/python benchmarks/bench_inpaint.py --others --part all
    PYTHONPATH=. .venv/bin/python benchmarks/bench_inpaint.py --images kodim23 --masks text1 text3 --json q.json

The default run (``--part quality`` on kodim23 and monarch with text1, rand70
and rand90) takes about five minutes on two cores; ``--full`` runs the four
images kodim23, monarch, tulips and seeding_crop (about three times as
long), ``--part scale`` takes about five minutes more. Other jobs on the
machine distort the times: the ``others`` columns give the average number of
cores that other processes kept busy while ours ran (from ``/proc/stat``,
minus our own CPU time); times measured with more than ~0.2 there are
contended.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _report import CpuWatch, git_state, load_avg, note, table  # noqa: E402

ROOT = HERE.parent
DEFAULT_DATA = HERE.parents[1] / "shared" / "images"
QUICK_IMAGES = ["kodim23", "monarch"]
FULL_IMAGES = ["kodim23", "monarch", "tulips", "seeding_crop"]
# photographs unlike the default ones (issue 30): a textured one, a smooth one, a portrait, a 768x1024 photo
OTHER_IMAGES = ["barbara", "coffee", "astronaut", "seeding_crop"]
MASKS = ["text1", "rand70", "rand90"]
# Requirements on the average over images, per mask kind: ours - biharmonic >= margin (dB) (issue 30: +1.0 on
# text, +1.5 on the average of rand70 and rand90, checked on that average too)
MARGINS = {"text1": 1.0, "rand70": 1.5, "rand90": 1.5}
RANDOM_KINDS = ("rand70", "rand90")
REQ_TEXT_RATIO = 5.0  # a text mask: at most this many times biharmonic's wall time, same run, warm (issue 30)
# a case whose first run of ours took under TIME_AGAIN_S (s) is timed again: ours and biharmonic alternately,
# TIME_RUNS times each, the medians being the figures (one run of a second or less varies by a fifth)
TIME_AGAIN_S = 3.0
TIME_RUNS = 5
SCALE_IMAGE, SCALE_MASK = "seeding", "text04"
REQ_SCALE_RATIO = 3.0  # the large photo: at most this many times biharmonic's wall time (issue 30)
REQ_SCALE_BYTES = 1.5 * 1024**3  # ... at no more than this peak (issue 30)


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------


def masked_psnr(out: np.ndarray, ref: np.ndarray, mask: np.ndarray) -> float:
    """``10 log10(1 / MSE)`` over every channel of the masked pixels (images in [0, 1])."""
    err = out[mask].astype(np.float64) - ref[mask].astype(np.float64)
    mse = float(np.mean(err * err))
    return float("inf") if mse == 0 else 10.0 * np.log10(1.0 / mse)


def load_case(folder: Path, image: str, kind: str, dtype: type = np.float64) -> tuple[np.ndarray, np.ndarray]:
    """The image as float in [0, 1] (H, W, 3) and its mask (True = missing)."""
    from skimage import io

    im = io.imread(folder / f"{image}.png")
    if im.ndim == 2:
        im = np.repeat(im[..., None], 3, axis=2)
    im = im[..., :3]
    scale = float(np.iinfo(im.dtype).max) if im.dtype.kind in "ui" else 1.0
    img = im.astype(dtype)
    img /= dtype(scale)
    m = io.imread(folder / "masks" / f"{image}_{kind}.png")
    if m.ndim == 3:
        m = m[..., 0]
    return img, m > 127


class LogCapture(logging.Handler):
    """Collects the messages of the ``restore.inpainting`` logger."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        """Keep the formatted message."""
        self.messages.append(record.getMessage())

    def __enter__(self) -> LogCapture:
        lg = logging.getLogger("restore.inpainting")
        self._level = lg.level
        lg.setLevel(logging.INFO)
        lg.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        lg = logging.getLogger("restore.inpainting")
        lg.removeHandler(self)
        lg.setLevel(self._level)


def parse_log(messages: Sequence[str]) -> dict:
    """Time split and patch count from the inpainting log (None where a message is missing)."""
    out: dict = {"dict_s": None, "interp_s": None, "code_s": None, "group_s": None, "prior_s": None,
                 "n_patches": None}
    for msg in messages:
        if m := re.search(r"dictionary ready in ([0-9.]+) s", msg):
            out["dict_s"] = (out["dict_s"] or 0.0) + float(m.group(1))
        if m := re.search(r"cod(?:ing|ed) (\d+) patches", msg):
            out["n_patches"] = (out["n_patches"] or 0) + int(m.group(1))
        if m := re.search(r"interpolated in ([0-9.]+) s", msg):
            out["interp_s"] = (out["interp_s"] or 0.0) + float(m.group(1))
        if m := re.search(r"coded and averaged patches in ([0-9.]+) s", msg):
            out["code_s"] = (out["code_s"] or 0.0) + float(m.group(1))
        if m := re.search(r"non-local passes in ([0-9.]+) s", msg):
            out["group_s"] = (out["group_s"] or 0.0) + float(m.group(1))
        if m := re.search(r"non-local prior: \d+ steps in ([0-9.]+) s", msg):
            out["prior_s"] = (out["prior_s"] or 0.0) + float(m.group(1))
    return out


def fmt(x: float | None, spec: str) -> str:
    return "-" if x is None or (isinstance(x, float) and np.isnan(x)) else format(x, spec)


# ---------------------------------------------------------------------------
# Part 1: quality
# ---------------------------------------------------------------------------


def cpu_seconds() -> float:
    """CPU seconds of this process so far (every thread)."""
    return time.process_time()


def stride_text(stride: int | None) -> str:
    return "default stride" if stride is None else f"stride {stride}"


def run_ours(img: np.ndarray, mask: np.ndarray, stride: int | None) -> tuple[np.ndarray, float, dict]:
    import restore

    with LogCapture() as cap:
        watch = CpuWatch()
        c0 = cpu_seconds()
        out = restore.inpaint(img, mask, channel_axis=-1, stride=stride)
        cpu = cpu_seconds() - c0
        w = watch.stop()
    return out, w["wall"], {**parse_log(cap.messages), "others_cores": w["other_cores"], "cpu_s": cpu}


def run_biharmonic(img: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, float, float]:
    from skimage.restoration import inpaint_biharmonic

    t0, c0 = time.perf_counter(), cpu_seconds()
    out = inpaint_biharmonic(img, mask, channel_axis=-1)
    return out, time.perf_counter() - t0, cpu_seconds() - c0


def run_telea(img: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, float]:
    import cv2

    u8 = np.clip(np.rint(img * 255.0), 0, 255).astype(np.uint8)
    t0 = time.perf_counter()
    out = cv2.inpaint(u8, mask.astype(np.uint8) * 255, 3, cv2.INPAINT_TELEA)
    wall = time.perf_counter() - t0
    return out.astype(np.float64) / 255.0, wall


def run_fsr(img: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, float]:
    """OpenCV's ``INPAINT_FSR_FAST`` on the 8-bit image: the result (float in [0, 1], RGB) and its wall time."""
    import cv2

    if not hasattr(cv2, "xphoto"):
        raise SystemExit("bench_inpaint needs OpenCV's contrib modules: pip install opencv-contrib-python-headless "
                         "(the 'bench' extra), not opencv-python-headless")
    u8 = np.clip(np.rint(img * 255.0), 0, 255).astype(np.uint8)[..., ::-1].copy()  # BGR: FSR works in YCrCb
    out = np.zeros_like(u8)
    t0 = time.perf_counter()
    cv2.xphoto.inpaint(u8, (~mask).astype(np.uint8) * 255, out, cv2.xphoto.INPAINT_FSR_FAST)  # non-zero: known
    wall = time.perf_counter() - t0
    return out[..., ::-1].astype(np.float64) / 255.0, wall


def bench_quality(args: argparse.Namespace) -> dict:
    import restore

    strokes = np.zeros((128, 128), dtype=bool)
    strokes[30:33, 10:120], strokes[80:83, 5:90], strokes[10:110, 60:63] = True, True, True
    # warm-up: every stage's numba kernels (strokes: the extrapolation too), the shipped dictionary
    restore.inpaint(np.random.default_rng(0).random((128, 128, 3)), strokes, channel_axis=-1)
    rows = []
    for kind in args.masks:
        for name in args.images:
            img, mask = load_case(args.data, name, kind)
            note(f"quality: {name}_{kind} ({img.shape[1]}x{img.shape[0]}, {100 * mask.mean():.1f}% missing)")
            row: dict = {"image": name, "mask": kind, "missing": float(mask.mean()), "pixels": mask.size}
            out, row["ours_s"], row["ours_log"] = run_ours(img, mask, args.stride)
            row["ours_db"] = masked_psnr(out, img, mask)
            if not np.array_equal(out[~mask], img[~mask]):
                row["known_changed"] = True
            out, row["telea_s"] = run_telea(img, mask)
            row["telea_db"] = masked_psnr(out, img, mask)
            out, row["fsr_s"] = run_fsr(img, mask)
            row["fsr_db"] = masked_psnr(out, img, mask)
            if args.skip_biharmonic:
                row["bih_db"] = row["bih_s"] = row["bih_cpu_s"] = float("nan")
            else:
                out, row["bih_s"], row["bih_cpu_s"] = run_biharmonic(img, mask)
                row["bih_db"] = masked_psnr(out, img, mask)
            row["diff_db"] = row["ours_db"] - row["bih_db"]
            row["ours_cpu_s"] = row["ours_log"]["cpu_s"]
            if row["ours_s"] < TIME_AGAIN_S and not args.skip_biharmonic:
                runs = [(run_ours(img, mask, args.stride), run_biharmonic(img, mask)) for _ in range(TIME_RUNS)]
                row["ours_s"] = float(np.median([o[1] for o, _ in runs]))
                row["ours_cpu_s"] = float(np.median([o[2]["cpu_s"] for o, _ in runs]))
                row["bih_s"] = float(np.median([b[1] for _, b in runs]))
                row["bih_cpu_s"] = float(np.median([b[2] for _, b in runs]))
            row["time_ratio"] = row["ours_s"] / row["bih_s"]
            rows.append(row)
    summary = []
    for kind in args.masks:
        rs = [r for r in rows if r["mask"] == kind]
        s = {"mask": kind, "n": len(rs)}
        for key in ("ours_db", "bih_db", "telea_db", "fsr_db", "diff_db", "ours_s", "bih_s", "telea_s", "fsr_s",
                    "ours_cpu_s", "bih_cpu_s", "time_ratio"):
            s[key] = float(np.mean([r[key] for r in rs]))
        s["ours_minus_telea"] = s["ours_db"] - s["telea_db"]
        s["ours_minus_fsr"] = s["ours_db"] - s["fsr_db"]
        margin = MARGINS.get(kind)
        s["margin"] = margin
        s["ok"] = None if margin is None or np.isnan(s["diff_db"]) else bool(s["diff_db"] >= margin)
        summary.append(s)
    rand = [s for s in summary if s["mask"] in RANDOM_KINDS]
    random_avg = float(np.mean([s["diff_db"] for s in rand])) if rand else None
    return {"stride": args.stride, "rows": rows, "summary": summary, "random_avg_diff_db": random_avg,
            "random_ok": None if random_avg is None or np.isnan(random_avg) else bool(random_avg >= MARGINS["rand70"])}


def print_quality(res: dict) -> None:
    body = []
    for r in res["rows"]:
        lg = r["ours_log"]
        body.append((f"{r['image']}_{r['mask']}", f"{100 * r['missing']:.1f}", f"{r['ours_db']:.2f}",
                     fmt(r["bih_db"], ".2f"), f"{r['telea_db']:.2f}", f"{r['fsr_db']:.2f}", fmt(r["diff_db"], "+.2f"),
                     f"{r['ours_s']:.1f}", f"{r['ours_cpu_s']:.1f}", fmt(lg["dict_s"], ".1f"),
                     fmt(lg["code_s"], ".1f"), fmt(lg["group_s"], ".1f"), fmt(lg.get("prior_s"), ".1f"),
                     fmt(lg["n_patches"], ","), f"{lg['others_cores']:.2f}", fmt(r["bih_s"], ".2f"),
                     fmt(r["bih_cpu_s"], ".2f"),
                     fmt(r["time_ratio"], ".1f"), f"{r['telea_s']:.2f}", f"{r['fsr_s']:.1f}"))
    print(table(("case", "% miss", "ours dB", "biharm dB", "Telea dB", "FSR dB", "ours-bih", "ours s", "ours CPU s",
                 "dict s", "code s", "groups s", "prior s", "patches", "others", "biharm s", "biharm CPU s",
                 "ours/bih time",
                 "Telea s", "FSR s"),
                body,
                f"1. Quality: masked-pixel PSNR (dB), restore.inpaint {stride_text(res['stride'])} vs "
                "skimage inpaint_biharmonic, OpenCV Telea r3 and OpenCV FSR fast"))
    changed = [f"{r['image']}_{r['mask']}" for r in res["rows"] if r.get("known_changed")]
    if changed:
        print(f"WARNING: ours changed known pixels in {', '.join(changed)}")
    print()
    body = []
    for s in res["summary"]:
        req = "-" if s["margin"] is None else f">= {s['margin']:+.1f}"
        ok = "n/a" if s["ok"] is None else ("OK" if s["ok"] else "NOT MET")
        body.append((s["mask"], s["n"], f"{s['ours_db']:.2f}", fmt(s["bih_db"], ".2f"), f"{s['telea_db']:.2f}",
                     f"{s['fsr_db']:.2f}", fmt(s["diff_db"], "+.2f"), f"{s['ours_minus_telea']:+.2f}",
                     f"{s['ours_minus_fsr']:+.2f}", req, ok, f"{s['ours_s']:.1f}", fmt(s["bih_s"], ".1f"),
                     f"{s['telea_s']:.2f}", f"{s['fsr_s']:.1f}"))
    print(table(("mask", "images", "ours dB", "biharm dB", "Telea dB", "FSR dB", "ours-bih", "ours-Telea", "ours-FSR",
                 "required", "verdict", "ours s", "biharm s", "Telea s", "FSR s"), body,
                "Averages per mask kind (requirement on ours - biharmonic, averaged over the images)"))
    if res.get("random_avg_diff_db") is not None:
        ok = "n/a" if res["random_ok"] is None else ("OK" if res["random_ok"] else "NOT MET")
        print(f"random loss (average of {', '.join(RANDOM_KINDS)} present): ours - biharmonic "
              f"{res['random_avg_diff_db']:+.2f} dB (required >= +{MARGINS['rand70']:.1f}): {ok}")
    for r in res["rows"]:
        if r["mask"].startswith("text") and not np.isnan(r["time_ratio"]):
            ok = "OK" if r["time_ratio"] <= REQ_TEXT_RATIO else "NOT MET"
            print(f"{r['image']}_{r['mask']}: {r['time_ratio']:.1f}x biharmonic's wall time (CPU "
                  f"{r['ours_cpu_s']:.1f} s vs {r['bih_cpu_s']:.2f} s; required <= {REQ_TEXT_RATIO:.0f}x): {ok}")
    print()


# ---------------------------------------------------------------------------
# Part 2: scale (one fresh process per stride)
# ---------------------------------------------------------------------------


def peak_rss_self() -> int | None:
    """High-water mark of this process's resident set (bytes, ``VmHWM``; None off Linux)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def child(spec: str) -> None:
    """Inpaint the scale case in this process (ours or biharmonic) and print one JSON line (run by ``run_child``)."""
    import resource

    cfg = json.loads(spec)
    import restore

    t_load = time.perf_counter()
    img, mask = load_case(Path(cfg["data"]), cfg["image"], cfg["mask"], dtype=np.float32)
    t_load = time.perf_counter() - t_load
    rss_before = peak_rss_self() or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    with LogCapture() as cap:
        t0 = time.perf_counter()
        if cfg["method"] == "biharmonic":
            from skimage.restoration import inpaint_biharmonic

            out = inpaint_biharmonic(img, mask, channel_axis=-1)
        else:
            out = restore.inpaint(img, mask, channel_axis=-1, stride=cfg["stride"])
        wall = time.perf_counter() - t0
    res = {"method": cfg["method"], "stride": cfg["stride"], "inpaint_s": wall, "vm_hwm": peak_rss_self(),
           "load_s": t_load, "dtype": str(out.dtype),
           "psnr": masked_psnr(out, img, mask), "missing": float(mask.mean()), "shape": list(img.shape),
           "rss_before_inpaint": rss_before, "log": cap.messages, **parse_log(cap.messages)}
    print("RESULT " + json.dumps(res), flush=True)


def run_child(args: argparse.Namespace, stride: int | None, method: str = "ours") -> dict:
    spec = json.dumps({"data": str(args.data), "image": SCALE_IMAGE, "mask": SCALE_MASK, "stride": stride,
                       "method": method})
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    with tempfile.TemporaryFile(mode="w+") as out_f:
        watch = CpuWatch()
        proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--child", spec],
                                stdout=out_f, env=env)
        _, status, ru = os.wait4(proc.pid, 0)
        w = watch.stop()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out_f.seek(0)
        text = out_f.read()
    lines = [ln for ln in text.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"scale child (stride {stride}) failed with exit code {proc.returncode}:\n{text}")
    res = json.loads(lines[-1][len("RESULT "):])
    res.update({"process_s": w["wall"], "cpu_s": ru.ru_utime + ru.ru_stime, "ru_maxrss": ru.ru_maxrss * 1024,
                "others_cores": w["other_cores"]})
    res["peak_rss"] = res["vm_hwm"] or res["ru_maxrss"]
    return res


def bench_scale(args: argparse.Namespace) -> dict:
    note(f"scale: {SCALE_IMAGE}_{SCALE_MASK}, biharmonic (fresh process)")
    bih = run_child(args, None, "biharmonic")
    rows = []
    for stride in args.scale_strides:
        note(f"scale: {SCALE_IMAGE}_{SCALE_MASK}, ours, {stride_text(stride)} (fresh process)")
        rows.append(run_child(args, stride))
    for r in rows:
        r["time_ratio"] = r["inpaint_s"] / bih["inpaint_s"]
        r["fast_enough"] = bool(r["time_ratio"] <= REQ_SCALE_RATIO)
        r["small_enough"] = bool(r["peak_rss"] <= REQ_SCALE_BYTES)
        r["better"] = bool(r["psnr"] > bih["psnr"])
        r["ok"] = bool(r["fast_enough"] and r["small_enough"] and r["better"])
    return {"rows": rows, "biharmonic": bih, "ok": any(r["ok"] for r in rows)}


def print_scale(res: dict) -> None:
    body = []
    for r in [res["biharmonic"], *res["rows"]]:
        name = "biharmonic" if r["method"] == "biharmonic" else f"ours, {stride_text(r['stride'])}"
        body.append((name, f"{r['inpaint_s']:.1f}", f"{r['process_s']:.1f}", f"{r['cpu_s']:.1f}",
                     f"{r['peak_rss'] / 1024**3:.2f}", f"{r['rss_before_inpaint'] / 1024**3:.2f}",
                     f"{r['psnr']:.2f}", fmt(r["dict_s"], ".1f"), fmt(r["interp_s"], ".1f"), fmt(r["code_s"], ".1f"),
                     fmt(r["group_s"], ".1f"), fmt(r["n_patches"], ","), f"{r['others_cores']:.2f}"))
    h, w = res["rows"][0]["shape"][:2]
    print(table(("method", "inpaint s", "process s", "CPU s", "peak GB", "GB loaded", "PSNR dB", "dict s", "interp s",
                 "code s", "groups s", "patches", "others"), body,
                f"2. Scale: {SCALE_IMAGE}_{SCALE_MASK} ({w}x{h}, {h * w / 1e6:.1f} MP, "
                f"{100 * res['rows'][0]['missing']:.1f}% missing), float32, a fresh process each"))
    print("(peak GB = the child's VmHWM, loading included; GB loaded = its peak before inpaint was called; "
          "dict s / interp s / code s / groups s from the log)")
    bih = res["biharmonic"]
    for r in res["rows"]:
        print(f"ours, {stride_text(r['stride'])}: {r['time_ratio']:.1f}x biharmonic's wall time (<= "
              f"{REQ_SCALE_RATIO:.0f}x: {'yes' if r['fast_enough'] else 'no'}), peak {r['peak_rss'] / 1024**3:.2f} GB "
              f"(<= {REQ_SCALE_BYTES / 1024**3:.1f}: {'yes' if r['small_enough'] else 'no'}), PSNR {r['psnr']:.2f} dB "
              f"above biharmonic's {bih['psnr']:.2f}: {'yes' if r['better'] else 'no'} -> "
              f"{'OK' if r['ok'] else 'NOT MET'}")
    print()


# ---------------------------------------------------------------------------


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line's arguments."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=("quality", "scale", "all"), default="quality")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder of the images and masks/")
    ap.add_argument("--images", nargs="+", default=None,
                    help=f"images of part 1 (default {' '.join(QUICK_IMAGES)}; --full: {' '.join(FULL_IMAGES)})")
    ap.add_argument("--full", action="store_true", help=f"part 1 on {', '.join(FULL_IMAGES)}")
    ap.add_argument("--others", action="store_true",
                    help=f"part 1 on photographs unlike the default ones: {', '.join(OTHER_IMAGES)}")
    ap.add_argument("--masks", nargs="+", default=MASKS, help="mask kinds of part 1")
    ap.add_argument("--stride", type=int, default=None, help="stride of ours in part 1 (default: the library's)")
    ap.add_argument("--skip-biharmonic", action="store_true", help="leave out inpaint_biharmonic (slow on rand90)")
    ap.add_argument("--scale-strides", type=int, nargs="+", default=[None],
                    help="strides of part 2 (default: the library's)")
    ap.add_argument("--json", type=Path, default=None, help="also write every number to this JSON file")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.images is None:
        args.images = OTHER_IMAGES if args.others else FULL_IMAGES if args.full else QUICK_IMAGES
    return args


def main(args: argparse.Namespace) -> None:
    if args.child is not None:
        child(args.child)
        return
    if not args.data.is_dir():
        raise SystemExit(f"no image folder {args.data} (use --data)")
    t_start = time.perf_counter()
    watch = CpuWatch()
    out: dict = {"git": git_state(), "load_start": load_avg()}
    out["args"] = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "child"}
    print(f"restore at {out['git']}; load average at start: {out['load_start']}  (CPUs: {os.cpu_count()})\n",
          flush=True)
    if args.part in ("quality", "all"):
        out["quality"] = bench_quality(args)
        print_quality(out["quality"])
    if args.part in ("scale", "all"):
        out["scale"] = bench_scale(args)
        print_scale(out["scale"])
    out["total_seconds"] = time.perf_counter() - t_start
    out["load_end"] = load_avg()
    out["contention"] = watch.stop()
    print(f"total {out['total_seconds']:.0f} s; load average at end: {out['load_end']}; other processes used "
          f"{out['contention']['other_cpu_s']:.0f} CPU s meanwhile ({out['contention']['other_cores']:.2f} cores on "
          "average; 'others' columns: the same while ours ran)")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2, default=float))


if __name__ == "__main__":
    from _report import record_results  # the printed tables also go to benchmarks/results/

    arguments = parse()
    # the photographs unlike the default ones: a results file of their own, beside the default images' one
    with record_results("bench_inpaint_others" if arguments.others else "bench_inpaint"):
        main(arguments)
