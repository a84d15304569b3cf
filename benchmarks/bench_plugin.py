"""How the napari plugin feels on one large plane: progress, Cancel latency, preview time, dock heights.

    .venv/bin/python benchmarks/bench_plugin.py [--size 4096] [--spins N] [--method wavelet nonlocal]

Opens a real napari window (its own Xvfb display when none is set, Qt's
``xcb`` platform), docks the three widgets through the manifest and presses
them as a user would, on one noisy float32 plane of ``size x size`` with
``spins`` cycle spins (default: the widget's) and lam by SURE, for each
``method`` of the Denoise widget:

- Denoise: the time between progress updates of the bar, the time from
  Cancel to the widget being idle and to the library call having stopped
  (pressed early, then with the bar past three quarters), and a whole run;
- Preview: time to the first (rule) and final (SURE) preview of the view
  zoomed out (a region capped around the centre) and zoomed in, and how long
  it keeps working once unticked;
- Inpaint (``--inpaint``, needs ``../shared/images``): on seeding_crop
  (1024x768 colour) with its text mask and on seeding (15.9 MP) with its
  thin text, after a first call on a crop that compiles numba's kernels:
  a whole run (the first at that size: the time to the bar's first move,
  the whole time, the bar's longest gap), then a run with
  Cancel pressed halfway through that time (``INPAINT_CANCEL_MIN_S`` at
  least; idle, library call stopped; "ended first" when the run was over
  before it);
- the docks' ``sizeHint`` heights.

The printed tables go to ``benchmarks/results/bench_plugin.md``.

Numbers depend on the machine and its load; the first call at a new plane
shape also builds the wavelet tree (not interruptible), which is timed
separately.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
from _report import git_state, load_avg, table

PLUGIN = "restore-tree"
EARLY_CANCEL_S = 0.3  # Cancel this long after Apply: while lam is chosen or just after
INPAINT_CANCEL_MIN_S = 0.3  # s: Inpaint's Cancel comes halfway through a whole run's time, at least this late
SHARED = Path(__file__).resolve().parents[2] / "shared" / "images"
WARM_SIDE = 256  # px: the crop of the first inpaint call, large enough for every stage (the adapted dictionary)
INPAINT_CASES = (("seeding_crop", "seeding_crop_text1"), ("seeding", "seeding_text04"))


def _display() -> subprocess.Popen | None:
    if os.environ.get("DISPLAY"):
        return None
    if shutil.which("Xvfb") is None:
        sys.exit("no display and no Xvfb: run `bash .ci/setup` first")
    proc = subprocess.Popen(["Xvfb", ":96", "-screen", "0", "1920x1080x24", "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    os.environ["DISPLAY"] = ":96"
    return proc


def _calls() -> int:
    return sum(t.name == "restore-call" for t in threading.enumerate())


def main() -> None:
    """Run the measurements and print them."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--spins", type=int, default=None, help="cycle spins (default: the widget's)")
    ap.add_argument("--method", nargs="+", default=["wavelet", "nonlocal"], choices=["wavelet", "nonlocal"])
    ap.add_argument("--inpaint", action="store_true", help="also time the Inpaint widget (../shared/images)")
    args = ap.parse_args()
    from _report import record_results  # the printed tables also go to benchmarks/results/bench_plugin.md

    with record_results("bench_plugin"):
        _run(args)


def _run(args: argparse.Namespace) -> None:
    """Open napari, dock the widgets, and time them for each method."""
    xvfb = _display()
    os.environ.setdefault("QT_QPA_PLATFORM", "xcb")
    os.environ.setdefault("RESTORE_PLUGIN_SETTINGS", os.path.join("/tmp", f"bench_plugin_{os.getpid()}.ini"))
    try:
        import napari
        from _qt import show_view, wait_until
        from qtpy.QtWidgets import QApplication

        import restore

        app = QApplication.instance() or QApplication([])

        def wait(pred, timeout=600.0) -> float:
            return wait_until(app, pred, timeout)

        n = args.size
        rng = np.random.default_rng(0)
        y, x = np.mgrid[:n, :n].astype(np.float32)
        img = (100 + 50 * np.sin(x / 40) * np.cos(y / 60)).astype(np.float32)
        img += (10 * rng.standard_normal((n, n))).astype(np.float32)
        t0 = time.perf_counter()
        restore.denoise_wavelet_tree(img, lam=5.0)
        print(f"restore at {git_state()}; load average at start: {load_avg()}")
        print(f"plane {n}x{n} float32, lam by SURE; first library call at this shape (builds the wavelet tree): "
              f"{time.perf_counter() - t0:.1f} s")

        viewer = napari.Viewer(show=True)
        viewer.window._qt_window.resize(1600, 1000)  # noqa: SLF001 - a fixed window for comparable numbers
        layer = viewer.add_image(img, name="big")
        docks = {}
        for name in ("Denoise", "Inpaint", "Learn dictionary"):
            docks[name] = viewer.window.add_plugin_dock_widget(PLUGIN, name)
        for _ in range(50):
            app.processEvents()
        heights = {name: dock.sizeHint().height() for name, (dock, _) in docks.items()}
        print("dock sizeHint heights: " + ", ".join(f"{k} {v} px" for k, v in heights.items())
              + f" (sum {sum(heights.values())} px)")
        w = docks["Denoise"][1]
        wait(lambda: not w.busy)
        w.image.value = layer
        if args.spins is not None:
            w.cycle_spins.value = args.spins
        camera = viewer.scene.camera if hasattr(viewer, "scene") else viewer.camera
        rows = []
        for method in args.method:
            if hasattr(w, "method"):  # an older widget has the wavelet method only
                w.method.value = method
            w.penalty.value = "tree_l2"
            row = [method, w.cycle_spins.value]
            # progress and Cancel, early in the run and once the bar is past three quarters
            for delay in (EARLY_CANCEL_S, None):
                stamps: list[float] = []
                w.progress.changed.connect(lambda v, stamps=stamps: stamps.append(time.perf_counter()))
                w.apply_button.clicked.emit()
                t_start = time.perf_counter()
                if delay is None:
                    wait(lambda: w.progress.value > 0.75 * w.progress.max)
                else:
                    wait(lambda d=delay, t=t_start: time.perf_counter() - t > d)
                w.cancel_button.clicked.emit()
                idle = wait(lambda: not w.busy)
                stopped = wait(lambda: _calls() == 0)
                row += [f"{idle * 1000:.0f}", f"{idle + stopped:.2f}"]
            before = set(viewer.layers)
            stamps = []
            w.progress.changed.connect(lambda v, s=stamps: s.append(time.perf_counter()))
            w.apply_button.clicked.emit()
            t_start = time.perf_counter()
            total = wait(lambda b=before: not w.busy and len(viewer.layers) > len(b))
            gaps = np.diff([t_start, *[t for t in stamps if t <= t_start + total]])
            row += [f"{total:.1f}", len(gaps), f"{gaps.max():.2f}"]
            for new in [lay for lay in viewer.layers if lay not in before]:
                viewer.layers.remove(new)
            # preview, zoomed out (a region capped around the centre) and zoomed in
            for zoom in (None, 2.0):
                show_view(app, viewer, camera, zoom, (n / 3, n / 3))
                w.multiplier.value = 1.0 + (0.01 if zoom else 0.0)  # SURE itself is cached per region
                w.preview.value = True
                first = wait(lambda: "big [preview]" in viewer.layers)
                final = first + wait(lambda: not w.busy)
                prev = viewer.layers["big [preview]"]
                row += [f"{prev.data.shape[-2]}x{prev.data.shape[-1]}", f"{first:.2f}", f"{final:.2f}"]
                w.preview.value = False
                app.processEvents()
            # untick while it works
            viewer.reset_view()
            w.multiplier.value = 1.3
            w.penalty.value = "tree_linf"  # not cached: SURE runs again
            w.preview.value = True
            wait(lambda: w.busy)
            time.sleep(0.5)
            w.preview.value = False
            idle = wait(lambda: not w.busy)
            stopped = wait(lambda: _calls() == 0)
            row += [f"{idle * 1000:.0f}", f"{idle + stopped:.2f}"]
            rows.append(row)
        print()
        print(table(["method", "spins", "Cancel early: idle ms", "call stopped s", "Cancel late: idle ms",
                     "call stopped s", "Apply s", "bar updates", "longest gap s", "preview out: region",
                     "first s", "final s", "preview in: region", "first s", "final s", "untick: idle ms",
                     "call stopped s"], rows,
                    title=f"Denoise widget on a {n}x{n} plane (Cancel early: {EARLY_CANCEL_S} s after Apply; "
                          "late: bar past 75 %)"))
        if args.inpaint:
            _inpaint(viewer, docks["Inpaint"][1], wait)
        print(f"load average at end: {load_avg()}")
        viewer.close()
    finally:
        if xvfb is not None:
            xvfb.terminate()


def _inpaint(viewer, w, wait) -> None:
    """Time the Inpaint widget on a photo and on 15.9 MP, each with its text mask, as a user runs it."""
    from skimage import io

    import restore

    rows = []
    for image, mask in INPAINT_CASES:
        photo = io.imread(SHARED / f"{image}.png")[..., :3]
        holes = (io.imread(SHARED / "masks" / f"{mask}.png") > 127).astype(np.uint8)
        if not rows:  # numba's compilation out of the timings (bench_first_call times it): a call on a crop
            t0 = time.perf_counter()
            crop = photo[:WARM_SIDE, :WARM_SIDE].astype(np.float32)  # the widget's dtype for uint8: float32
            restore.inpaint(crop, holes[:WARM_SIDE, :WARM_SIDE] > 0, channel_axis=-1)
            print(f"first inpaint call, on a {WARM_SIDE}x{WARM_SIDE} crop (numba's compilation): "
                  f"{time.perf_counter() - t0:.1f} s")
        layer = viewer.add_image(photo, name=image, rgb=True)
        labels = viewer.add_labels(holes, name=mask)
        w.image.value, w.mask.value = layer, labels
        row = [f"{image} ({photo.shape[1]}x{photo.shape[0]})"]
        # a whole run first, then one cancelled halfway through its time: a Cancel at a fixed time could come after
        # the run's end on a small photo (its result is then a layer already there, and nothing is cancelled)
        for cancel_at in (None, "half"):
            stamps: list[float] = []
            moved: list[float] = []  # the bar past 0 (a run's start resets it to 0: that is no progress)
            w.progress.changed.connect(lambda v, s=stamps, m=moved: (s.append(time.perf_counter()),
                                                                      v > 0 and m.append(time.perf_counter())))
            before = set(viewer.layers)
            t_start = time.perf_counter()
            w.run()
            if cancel_at is None:
                total = wait(lambda b=before: not w.busy and len(viewer.layers) > len(b), timeout=1800.0)
                gaps = np.diff([t_start, *[t for t in stamps if t <= t_start + total]])
                first = moved[0] - t_start if moved else float("nan")
                row += [f"{first:.2f}", f"{total:.1f}", f"{gaps.max():.2f}"]
            else:
                at = max(INPAINT_CANCEL_MIN_S, total / 2)
                wait(lambda t=t_start, a=at: time.perf_counter() - t > a)
                w.cancel()
                idle = wait(lambda: not w.busy)
                stopped = wait(lambda: _calls() == 0)
                finished = any(lay not in before for lay in viewer.layers)  # the run ended before the Cancel
                row += [f"{at:.1f}" + (" (ended first)" if finished else ""), f"{idle * 1000:.0f}",
                        f"{idle + stopped:.2f}"]
            for new in [lay for lay in viewer.layers if lay not in before]:
                viewer.layers.remove(new)
        viewer.layers.remove(labels)
        viewer.layers.remove(layer)
        rows.append(row)
    print()
    print(table(["image", "bar first moves s", "whole run s", "longest gap s", "Cancel at s", "Cancel: idle ms",
                 "call stopped s"], rows,
                title="Inpaint widget, text masks (a whole run, then one cancelled halfway through its time)"))


if __name__ == "__main__":
    main()
