"""The napari Denoise preview before issue 28's work and now, timed in one run (A/B).

    .venv/bin/python benchmarks/bench_preview_ab.py [--old 'df341e7^'] [--size 2048 4096] [--rounds 5]

Issue 28 asks that "the preview in napari stays as fast as today's". This
script checks out ``--old`` (by default the commit before ``restore/denoise.py``
became a package, where the issue's rework of the denoiser began) in a
temporary git worktree, and times the Denoise widget's preview of that
version ("old") and of this checkout ("new") in fresh processes, each in a
real napari window (on its own Xvfb display when none is set, Qt's ``xcb``
platform), on the noisy float32 plane of ``bench_plugin.py`` at 2048 x 2048
(the size of its published run) and 4096 x 4096 (the largest layer whose
noise the new default estimates on the whole of it). Each side imports its
own ``restore`` and plugin (as ``restore_napari``, through a folder of its
own first on ``PYTHONPATH``) and keeps its own numba cache (in its
checkout), filled by one untimed process per side before the timed ones.

Each timed process docks the widget and, untimed, previews another layer of
the same shape (so numba, the wavelet plans and the first-use compilation are
warm), then, on a new layer, ticks Preview zoomed out (a region capped
around the centre) and zoomed in: the time to its first answer (the
provisional one) and to its final one (SURE's lam), with the CPU time of the
process meanwhile. This is done with the widget's defaults (method wavelet,
its default shifts and noise model: each side's own) and again with the
noise model set to Gaussian on both sides (the old widget's default), which
separates the cost of the new default noise model's estimate from the rest,
and with the defaults once more, ticking Preview :data:`PAUSE_S` after
choosing the layer, as a user does (the new widget estimates the layer's
noise model from the moment it is chosen: that estimate's CPU time then
falls before the timed window).
The sides alternate, the order switching each round, so that the load of a
shared machine falls on both; the tables give the medians, the ratio
new/old, every run, and the CPU seconds other processes used during each.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OLD_DEFAULT = "df341e7^"  # parent of "restore/denoise.py becomes the package restore/denoise/" (issue 28)
WINDOW_PX = (1600, 1000)  # a fixed window, as bench_plugin's, for comparable regions
DOCK_WIDTH_PX = 480  # the Denoise dock's width on both sides, so that both canvases show the same part zoomed in
ZOOM_IN = 2.0  # the zoomed-in view (napari camera zoom), centred at a third of the plane as bench_plugin's
CHILD_TIMEOUT_S = 1800.0  # one side's process (napari start, warm previews, timed previews)
SETTINGS = ("defaults", "gaussian", "defaults, paused")  # the widget's defaults; noise model Gaussian on both
# sides; the defaults again with a user's pause between choosing the layer and ticking Preview
PAUSE_S = 2.0  # the pause (s): a user picks the layer, then reaches for Preview


# ---------------------------------------------------------------------------
# One side's process: a napari window, the Denoise widget, previews timed
# ---------------------------------------------------------------------------


def _plane(n: int, seed: int) -> np.ndarray:
    """bench_plugin's plane: a smooth float32 pattern with Gaussian noise of sigma 10."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[:n, :n].astype(np.float32)
    img = (100 + 50 * np.sin(x / 40) * np.cos(y / 60)).astype(np.float32)
    return img + (10 * rng.standard_normal((n, n))).astype(np.float32)


def _child(spec: dict) -> dict:
    """Time the preview in this process's napari (``spec``: size, warm_only, checkout); return the figures."""
    import napari
    import restore_napari
    from _qt import show_view, wait_until
    from qtpy.QtWidgets import QApplication
    from restore_napari._denoise import DenoiseWidget

    import restore

    checkout = Path(spec["checkout"]).resolve()
    for module in (restore, restore_napari):  # each side runs its own code, not the installed one
        where = Path(module.__file__).resolve()
        if checkout not in where.parents:
            raise RuntimeError(f"{module.__name__} imported from {where}, not from {checkout}")
    app = QApplication.instance() or QApplication([])

    def wait(pred, timeout: float = 600.0) -> float:
        return wait_until(app, pred, timeout)

    n = spec["size"]
    viewer = napari.Viewer(show=True)
    viewer.window._qt_window.resize(*WINDOW_PX)  # noqa: SLF001 - a fixed window for comparable regions
    w = DenoiseWidget(viewer)
    dock = viewer.window.add_dock_widget(w, name="Denoise")
    dock.setFixedWidth(DOCK_WIDTH_PX)  # the two widgets' own widths differ: the canvas, and so the view, would too
    wait(lambda: not w.busy)  # the widget's first-use compilation (from the numba cache once warm)
    camera = viewer.scene.camera if hasattr(viewer, "scene") else viewer.camera
    defaults = {"method": getattr(getattr(w, "method", None), "value", "wavelet (the only one)"),
                "noise": w.noise.value, "cycle_spins": w.cycle_spins.value, "lam_mode": w.lam_mode.value,
                "penalty": w.penalty.value, "wavelet": w.wavelet.value}

    def preview(name: str) -> list[dict]:
        """Tick Preview zoomed out, then zoomed in, on layer ``name``; the times of each."""
        found = []
        for zoom in (None, ZOOM_IN):
            show_view(app, viewer, camera, zoom, (n / 3, n / 3))
            print(f"{name}: preview zoomed {zoom or 'out'}", file=sys.stderr, flush=True)  # where a failure was
            cpu0, t0 = time.process_time(), time.perf_counter()
            w.preview.value = True
            wait(lambda: f"{name} [preview]" in viewer.layers)
            first, first_cpu = time.perf_counter() - t0, time.process_time() - cpu0
            print(f"{name}: first answer", file=sys.stderr, flush=True)
            wait(lambda: not w.busy)
            final, final_cpu = time.perf_counter() - t0, time.process_time() - cpu0
            shape = viewer.layers[f"{name} [preview]"].data.shape[-2:]
            found.append({"view": "out" if zoom is None else "in", "region": f"{shape[0]}x{shape[1]}",
                          "first": first, "final": final, "first_cpu": first_cpu, "final_cpu": final_cpu})
            w.preview.value = False
            wait(lambda: not w.busy)
        return found

    for _ in range(20):
        app.processEvents()
    canvas = viewer.window._qt_viewer.canvas.native  # noqa: SLF001 - its size decides the region in view
    results = {"defaults": defaults, "canvas": f"{canvas.width()}x{canvas.height()}", "runs": {}}
    for seed, name in ((1, "warm"), (0, "big")):  # untimed on another layer first: all warm, nothing cached
        if name == "big" and spec["warm_only"]:
            break
        for setting in SETTINGS:
            w.noise.value = "gaussian" if setting == "gaussian" else defaults["noise"]
            for shown in viewer.layers:
                shown.visible = False  # kept (removing a layer has crashed vispy's drawing under Xvfb), not drawn
            layer = viewer.add_image(_plane(n, seed), name=f"{name} {setting}")  # new: no lam or noise kept
            w.image.value = layer
            if setting == "defaults, paused":
                t_chosen = time.perf_counter()
                wait(lambda t0=t_chosen: time.perf_counter() - t0 >= PAUSE_S)
            runs = preview(layer.name)
            if name == "big":
                results["runs"][setting] = runs
    viewer.close()
    return results


# ---------------------------------------------------------------------------
# The run: a worktree of the old commit, the sides alternated, the tables
# ---------------------------------------------------------------------------


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def _display() -> subprocess.Popen | None:
    """An Xvfb display of our own (a free number, Xvfb's choice) when none is set; None when one is."""
    if os.environ.get("DISPLAY"):
        return None
    if shutil.which("Xvfb") is None:
        sys.exit("no display and no Xvfb: run `bash .ci/setup` first")
    r, w = os.pipe()
    proc = subprocess.Popen(["Xvfb", "-displayfd", str(w), "-screen", "0", "1920x1080x24", "-nolisten", "tcp"],
                            pass_fds=(w,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(w)
    with os.fdopen(r) as f:
        number = f.readline().strip()
    if not number:
        proc.terminate()
        sys.exit("Xvfb did not start")
    os.environ["DISPLAY"] = f":{number}"
    return proc


def _run_side(side: str, checkout: Path, shim: Path, tmp: Path, size: int, warm_only: bool, count: int) -> dict:
    """One fresh process of ``side`` (its checkout and plugin first on the path); its figures."""
    from _report import CpuWatch

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(shim), str(checkout)])
    env.setdefault("QT_QPA_PLATFORM", "xcb")  # napari's canvas needs OpenGL: Qt's offscreen platform has none
    env["RESTORE_PLUGIN_SETTINGS"] = str(tmp / f"settings_{side}_{count}.ini")  # no remembered choices
    spec = json.dumps({"size": size, "warm_only": warm_only, "checkout": str(checkout)})
    watch = CpuWatch()
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", spec], cwd=tmp, env=env,
                          capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    contention = watch.stop()
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"the {side} side's process failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    out = json.loads(lines[-1][len("RESULT "):])
    out["other_cores"] = contention["other_cores"]
    return out


def main() -> None:
    """Parse the options, then run and print the comparison (recorded in benchmarks/results/)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", default=OLD_DEFAULT, help=f"the commit to compare with (default: {OLD_DEFAULT})")
    ap.add_argument("--size", type=int, nargs="+", default=[2048, 4096],
                    help="sides of the square planes (pixels), each timed in its own processes")
    ap.add_argument("--rounds", type=int, default=5, help="timed processes per side and size, alternated")
    ap.add_argument("--child", help=argparse.SUPPRESS)  # internal: one side's timing process
    args = ap.parse_args()
    if args.child is not None:
        print("RESULT " + json.dumps(_child(json.loads(args.child))), flush=True)
        return
    if args.rounds < 1 or min(args.size) < 256:
        ap.error(f"--rounds must be >= 1 and each --size >= 256, got {args.rounds} and {args.size}")
    from _report import record_results

    with record_results("bench_preview_ab"):
        _compare(args)


Run = tuple[int, int, str, dict]  # size, round, side, the process's figures


def _compare(args: argparse.Namespace) -> None:
    from _report import git_state, load_avg, note, table

    old = _git("rev-parse", "--verify", f"{args.old}^{{commit}}")
    tmp = Path(tempfile.mkdtemp(prefix="bench_preview_ab_"))
    tree = tmp / "old"
    xvfb = None
    runs: list[Run] = []
    try:
        xvfb = _display()
        _git("worktree", "add", "--detach", str(tree), old)
        sides = {"old": tree, "new": ROOT}
        shims = {}
        for side, checkout in sides.items():
            shims[side] = tmp / f"shim_{side}"
            shims[side].mkdir()
            (shims[side] / "restore_napari").symlink_to(checkout / "plugin", target_is_directory=True)
        print(f"old: {_git('log', '-1', '--format=%h %s', old)[:100]}")
        print(f"new: {git_state()}")
        print(f"planes {', '.join(f'{n}x{n}' for n in args.size)} float32 (bench_plugin's, Gaussian noise "
              f"sigma 10); window {WINDOW_PX[0]}x{WINDOW_PX[1]}, zoomed in x{ZOOM_IN:g}; "
              f"load average at start: {load_avg()}")
        count = 0
        for side in sides:  # each side's numba cache filled, and the plugin's first use compiled, untimed
            note(f"warming the {side} side (numba cache)...")
            count += 1
            defaults = _run_side(side, sides[side], shims[side], tmp, 512, True, count)["defaults"]
            print(f"{side} widget's defaults: " + ", ".join(f"{k} {v}" for k, v in defaults.items()))
        for n in args.size:
            for r in range(args.rounds):
                for side in ("old", "new") if r % 2 == 0 else ("new", "old"):
                    note(f"{n}x{n}, round {r + 1}/{args.rounds}: {side}...")
                    count += 1
                    runs.append((n, r + 1, side, _run_side(side, sides[side], shims[side], tmp, n, False, count)))
        print(f"load average at end: {load_avg()}")
    finally:
        if xvfb is not None:
            xvfb.terminate()
            xvfb.wait()
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, capture_output=True)
        subprocess.run(["git", "worktree", "prune"], cwd=ROOT, capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    _print_tables(runs, args, table)


def _print_tables(runs: list[Run], args: argparse.Namespace, table) -> None:
    def timings(n: int, side: str, setting: str, view: str) -> list[dict]:
        return [t for size, _, s, out in runs if size == n and s == side
                for t in out["runs"][setting] if t["view"] == view]

    rows = []
    for n in args.size:
        for setting in SETTINGS:
            for view in ("out", "in"):
                old, new = timings(n, "old", setting, view), timings(n, "new", setting, view)
                regions = sorted({t["region"] for t in old + new})  # the same on both sides, as the canvases
                row = [f"{n}x{n} {setting}, zoomed {view}", " / ".join(regions)]
                for key in ("first", "final", "first_cpu", "final_cpu"):
                    a, b = statistics.median(t[key] for t in old), statistics.median(t[key] for t in new)
                    row += [f"{a:.2f}", f"{b:.2f}", f"{b / a:.2f}" if a > 0 else "n/a"]
                rows.append(row)
    headers = ["plane, settings, view", "region"]
    for what in ("first s", "final s", "first CPU s", "final CPU s"):
        headers += [f"old {what}", f"new {what}", f"{what.removesuffix(' s')} new/old"]
    print()
    print(table(headers, rows, title=f"Preview, median of {args.rounds} processes per side (wall s from ticking "
                                      "Preview to its first and its final answer; CPU s of the napari process)"))
    rows = []
    for n, r, side, out in runs:
        for setting in SETTINGS:
            for t in out["runs"][setting]:
                rows.append([f"{n}x{n} round {r} {side}", setting, t["view"], out["canvas"], t["region"],
                             f"{t['first']:.2f}", f"{t['final']:.2f}", f"{t['first_cpu']:.2f}",
                             f"{t['final_cpu']:.2f}", f"{out['other_cores']:.2f}"])
    print()
    print(table(["plane, round, side", "settings", "view", "canvas", "region", "first s", "final s", "first CPU s",
                 "final CPU s", "others' cores"], rows, title="Every timed process, in the order run"))


if __name__ == "__main__":
    main()
