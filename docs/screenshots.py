"""Open napari under Xvfb, run each widget on the sample data as a user would, save real-window screenshots.

Denoise (a photograph, and a volume under photon noise) and Inpaint are
shown after pressing Compare (the input and the result side by side,
napari's grid mode); Learn shows the atoms laid out as their tree. Widget
settings start from their defaults (a temporary settings file), not from
the user's.

    bash .ci/setup && .venv/bin/python docs/screenshots.py [--out docs/screenshots]

Starts its own Xvfb display (``xvfb-run`` is not needed) and uses Qt's
``xcb`` platform, so the whole window, canvas included, is rendered. Each
widget is docked through the plugin's manifest, exactly as a user would
open it from the Plugins menu.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = "restore-tree"


def _start_xvfb(display: str = ":97") -> subprocess.Popen:
    if shutil.which("Xvfb") is None:
        sys.exit("Xvfb is not installed: run `bash .ci/setup` first")
    proc = subprocess.Popen(["Xvfb", display, "-screen", "0", "1600x1000x24", "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    os.environ["DISPLAY"] = display
    os.environ["QT_QPA_PLATFORM"] = "xcb"
    return proc


def _wait(app, predicate, timeout: float = 120.0, widget=None) -> None:
    t0 = time.time()
    while not predicate():
        app.processEvents()
        time.sleep(0.02)
        if time.time() - t0 > timeout:
            status = getattr(getattr(widget, "status", None), "value", "")
            raise TimeoutError(f"the widget did not finish in time (status: {status!r})")


def _pick(combo, layer) -> None:
    """Choose ``layer`` in a layer combo box."""
    combo.reset_choices()
    combo.value = next(v for v in combo.choices if v is not None and v.unique_id == layer.unique_id)


def main() -> None:
    """Take the screenshots."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "docs" / "screenshots"))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    xvfb = _start_xvfb()
    settings = tempfile.TemporaryDirectory()
    os.environ["RESTORE_PLUGIN_SETTINGS"] = str(Path(settings.name) / "settings.ini")  # defaults, not the user's
    try:
        import napari
        from qtpy.QtWidgets import QApplication

        viewer = napari.Viewer(show=True)
        viewer.window._qt_window.resize(1500, 900)  # noqa: SLF001
        app = QApplication.instance()

        # Denoise: estimate sigma, denoise, then Compare shows the input and the result side by side.
        viewer.open_sample(PLUGIN, "noisy_camera")
        _, denoise = viewer.window.add_plugin_dock_widget(PLUGIN, "Denoise")
        _wait(app, lambda: not denoise.busy)
        _pick(denoise.image, viewer.layers["camera"])
        denoise.estimate.clicked.emit()
        _wait(app, lambda: not denoise.busy, widget=denoise)
        denoise.apply_button.clicked.emit()
        _wait(app, lambda: "camera [tree_l2]" in viewer.layers and not denoise.busy, widget=denoise)
        denoise.compare.clicked.emit()
        _settle(app)
        viewer.screenshot(str(out / "denoise.png"), canvas_only=False)
        print(f"wrote {out / 'denoise.png'}")
        denoise.compare.clicked.emit()

        # Denoise a volume under photon noise: volume (3-D), Poisson-Gaussian, gain estimated; Compare.
        viewer.layers.clear()
        viewer.open_sample(PLUGIN, "noisy_nuclei_volume")
        _pick(denoise.image, viewer.layers["nuclei (noisy)"])
        denoise.process.value = True
        denoise.noise.value = "poisson-gaussian"
        denoise.apply_button.clicked.emit()
        _wait(app, lambda: "nuclei (noisy) [tree_l2]" in viewer.layers and not denoise.busy, widget=denoise)
        viewer.dims.set_current_step(0, 16)
        denoise.compare.clicked.emit()
        _settle(app)
        viewer.screenshot(str(out / "volume.png"), canvas_only=False)
        print(f"wrote {out / 'volume.png'}")
        denoise.compare.clicked.emit()
        denoise.noise.value = "gaussian"  # the photographs below

        # Inpaint and learn, when those widgets are present.
        names = {w for _, w in _widget_names()}
        if "Inpaint" in names:
            viewer.layers.clear()
            viewer.open_sample(PLUGIN, "cat_with_text")
            _, inpaint = viewer.window.add_plugin_dock_widget(PLUGIN, "Inpaint")
            _pick(inpaint.image, viewer.layers["chelsea with text"])
            inpaint.run()
            _wait(app, lambda: any(layer.name.endswith("[inpainted]") for layer in viewer.layers)
                  and not inpaint.busy, widget=inpaint)
            inpaint.compare.clicked.emit()
            _settle(app)
            viewer.screenshot(str(out / "inpaint.png"), canvas_only=False)
            print(f"wrote {out / 'inpaint.png'}")
            inpaint.compare.clicked.emit()
        if "Learn dictionary" in names:
            viewer.layers.clear()
            viewer.open_sample(PLUGIN, "cat_with_text")
            _, learn = viewer.window.add_plugin_dock_widget(PLUGIN, "Learn dictionary")
            _pick(learn.image, viewer.layers["chelsea with text"])
            _pick(learn.exclude, viewer.layers["text mask"])
            learn.run()
            _wait(app, lambda: any("atoms" in layer.name for layer in viewer.layers) and not learn.busy,
                  widget=learn)
            for layer in viewer.layers:
                layer.visible = "atoms" in layer.name
            viewer.reset_view()
            _settle(app)
            viewer.screenshot(str(out / "learn.png"), canvas_only=False)
            print(f"wrote {out / 'learn.png'}")
        viewer.close()
    finally:
        settings.cleanup()
        xvfb.terminate()


def _settle(app, seconds: float = 0.5) -> None:
    """Let the window redraw (grid mode, new layers) before a screenshot."""
    t0 = time.time()
    while time.time() - t0 < seconds:
        app.processEvents()
        time.sleep(0.02)


def _widget_names() -> list[tuple[str, str]]:
    import npe2

    pm = npe2.PluginManager.instance()
    return [(PLUGIN, w.display_name) for w in pm.get_manifest(PLUGIN).contributions.widgets or []]


if __name__ == "__main__":
    main()
