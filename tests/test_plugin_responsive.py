"""Issue 18, item 3: responsive on one large plane (real napari, Xvfb).

The planes here are at most 2048 x 2048: large enough for one plane with 8
cycle spins to take several seconds, small enough to keep the suite fast.
The 4096 x 4096 figures are measured by ``benchmarks/bench_plugin.py``.
"""

import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from napari_helpers import CANCEL_BOUND_S, DENOISE, PLUGIN, TIMEOUT, cancel, dock, library_threads

pytest.importorskip("napari")
pytest.importorskip("pytestqt")

pytestmark = pytest.mark.gui



def _noisy(n, seed=0):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[:n, :n].astype(np.float32)
    return (100 + 50 * np.sin(x / 17) * np.cos(y / 23) + 10 * rng.standard_normal((n, n))).astype(np.float32)


def test_progress_moves_within_a_single_plane(make_napari_viewer, qtbot, errors):
    viewer = make_napari_viewer()
    widget = dock(viewer, qtbot, DENOISE)
    widget.image.value = viewer.add_image(_noisy(1024), name="one plane")
    widget.cycle_spins.value = 8
    seen = []
    widget.progress.changed.connect(seen.append)
    widget.apply_button.clicked.emit()
    qtbot.waitUntil(lambda: not widget.busy, timeout=TIMEOUT)
    assert "one plane [tree_l2]" in viewer.layers and not errors
    inside = {v for v in seen if widget.progress.min < v < widget.progress.max}
    assert len(inside) >= 3  # SURE's evaluations, then the shifts: the bar moves inside the plane


def test_inpaint_progress_reaches_the_bar(make_napari_viewer, qtbot, errors):
    viewer = make_napari_viewer()
    _, widget = viewer.window.add_plugin_dock_widget(PLUGIN, "Inpaint")
    # long enough (about 0.5 s) for the bar's updates, which come at most every REPORT_INTERVAL_S
    img = np.random.default_rng(0).random((384, 384)).astype(np.float32)
    labels = np.zeros((384, 384), np.uint8)
    labels[40::48, 4:380] = 1
    labels[41::48, 4:380] = 1
    widget.image.value = viewer.add_image(img, name="noise")
    widget.mask.value = viewer.add_labels(labels, name="scratch")
    widget.learned.value = "shipped"  # as is: no adaptation to the image, a fast test
    widget.n_passes.value = 6
    seen = []
    widget.progress.changed.connect(seen.append)
    widget.run_button.clicked.emit()
    qtbot.waitUntil(lambda: not widget.busy, timeout=TIMEOUT)
    assert not errors and "noise [inpainted]" in viewer.layers
    assert any(widget.progress.min < v < widget.progress.max for v in seen)  # the library's stages reach the bar


def test_cancel_acts_within_a_second_on_one_large_plane(make_napari_viewer, qtbot, errors):
    viewer = make_napari_viewer()
    widget = dock(viewer, qtbot, DENOISE)
    widget.image.value = viewer.add_image(_noisy(2048), name="large")
    widget.cycle_spins.value = 8
    widget.apply_button.clicked.emit()
    t0 = time.perf_counter()
    qtbot.waitUntil(lambda: widget.progress.value > widget.progress.min or time.perf_counter() - t0 > 2.0,
                    timeout=TIMEOUT)
    assert widget.busy
    assert cancel(qtbot, widget) < CANCEL_BOUND_S
    assert [layer.name for layer in viewer.layers] == ["large"] and not errors
    qtbot.waitUntil(lambda: not library_threads(), timeout=TIMEOUT)  # the library call stops too


def _visible_box(layer):
    (r0, c0), (r1, c1) = layer.corner_pixels[:, -2:]
    return r0, r1 + 1, c0, c1 + 1


def _preview_box(preview, src):
    r0, c0 = np.round((np.asarray(preview.translate[-2:]) - src.translate[-2:]) / src.scale[-2:]).astype(int)
    h, w = preview.data.shape[-2:]
    return r0, r0 + h, c0, c0 + w


def test_preview_computes_only_the_visible_region(make_napari_viewer, qtbot, errors):
    viewer = make_napari_viewer(show=True)
    widget = dock(viewer, qtbot, DENOISE)
    src = viewer.add_image(_noisy(1024), name="big", scale=(2.0, 2.0), translate=(10.0, 10.0))
    widget.image.value = src
    camera = viewer.scene.camera
    camera.zoom *= 6
    camera.center = (10 + 2 * 300, 10 + 2 * 700)
    qtbot.wait(100)
    widget.preview.value = True
    qtbot.waitUntil(lambda: "big [preview]" in viewer.layers and not widget.busy, timeout=TIMEOUT)
    preview = viewer.layers["big [preview]"]
    vis, box = _visible_box(src), _preview_box(preview, src)
    assert box[0] <= vis[0] and box[1] >= vis[1] and box[2] <= vis[2] and box[3] >= vis[3]  # covers the view
    assert preview.data.size < src.data.size / 8  # and not much more
    # panning elsewhere previews the new view
    camera.center = (10 + 2 * 800, 10 + 2 * 150)
    qtbot.waitUntil(lambda: _preview_box(preview, src) != box and not widget.busy, timeout=TIMEOUT)
    vis, box = _visible_box(src), _preview_box(preview, src)
    assert box[0] <= vis[0] and box[1] >= vis[1] and box[2] <= vis[2] and box[3] >= vis[3]
    assert not errors


def test_preview_of_a_view_too_large_is_capped_around_its_centre(make_napari_viewer, qtbot, monkeypatch, errors):
    from restore_napari import _denoise

    monkeypatch.setattr(_denoise.DenoiseWidget, "PREVIEW_MAX_PIXELS", 256 * 256, raising=False)
    viewer = make_napari_viewer(show=True)
    widget = dock(viewer, qtbot, DENOISE)
    src = viewer.add_image(_noisy(1024), name="big")
    widget.image.value = src
    viewer.scene.camera.center = (400, 600)
    widget.preview.value = True
    qtbot.waitUntil(lambda: "big [preview]" in viewer.layers and not widget.busy, timeout=TIMEOUT)
    r0, r1, c0, c1 = _preview_box(viewer.layers["big [preview]"], src)
    assert (r1 - r0) * (c1 - c0) <= 256 * 256
    assert abs((r0 + r1) / 2 - 400) <= 2 and abs((c0 + c1) / 2 - 600) <= 2
    assert "256" in widget.status.value or "centre" in widget.status.value  # the user is told
    assert not errors


def _previewing(make_napari_viewer, qtbot):
    """A viewer whose Denoise widget is busy previewing a large image (8 shifts)."""
    viewer = make_napari_viewer()
    widget = dock(viewer, qtbot, DENOISE)
    widget.image.value = viewer.add_image(_noisy(1024), name="large")
    widget.cycle_spins.value = 8
    widget.preview.value = True
    qtbot.waitUntil(lambda: widget.busy, timeout=TIMEOUT)
    return viewer, widget


def test_unticking_preview_stops_it(make_napari_viewer, qtbot, errors):
    viewer, widget = _previewing(make_napari_viewer, qtbot)
    qtbot.wait(300)
    t0 = time.perf_counter()
    widget.preview.value = False
    qtbot.waitUntil(lambda: not widget.busy, timeout=TIMEOUT)
    assert time.perf_counter() - t0 < CANCEL_BOUND_S
    qtbot.waitUntil(lambda: not library_threads(), timeout=int(CANCEL_BOUND_S * 1000))
    qtbot.wait(200)
    assert "large [preview]" not in viewer.layers and not errors


def test_closing_the_viewer_with_preview_on_raises_nothing(make_napari_viewer, qtbot, errors):
    viewer, widget = _previewing(make_napari_viewer, qtbot)
    viewer.close()
    qtbot.wait(500)  # anything the preview would still deliver
    assert not errors


SCRIPT = """
    import time
    import numpy as np
    import napari
    from qtpy.QtWidgets import QApplication

    viewer = napari.Viewer(show=False)
    rng = np.random.default_rng(0)
    layer = viewer.add_image(rng.standard_normal((1024, 1024)).astype(np.float32), name="noise")
    _, widget = viewer.window.add_plugin_dock_widget("restore-tree", "Denoise")
    widget.image.value = layer
    widget.cycle_spins.value = 8
    widget.preview.value = True
    t0 = time.time()
    while time.time() - t0 < 0.5:
        QApplication.processEvents()
        time.sleep(0.01)
    assert widget.busy
    viewer.close()
    print("closed")
"""


def test_a_plain_script_closing_the_viewer_with_preview_on_exits_cleanly(tmp_path):
    script = tmp_path / "close_with_preview.py"
    script.write_text(textwrap.dedent(SCRIPT))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "closed" in run.stdout and "Traceback" not in run.stderr, run.stderr[-2000:]


def test_the_preview_of_another_layer_takes_its_transform_and_look(make_napari_viewer, qtbot, errors):
    """Switching the preview from one layer to another must not leave it where, and as, the first one was."""
    viewer = make_napari_viewer()
    widget = dock(viewer, qtbot, DENOISE)
    widget.lam_mode.value = "rule"
    a = viewer.add_image(_noisy(64), name="a")
    b = viewer.add_image(_noisy(64), name="b", rotate=30, colormap="magma", scale=(2, 2))
    viewer.layers.selection.active = a
    widget.preview.value = True
    qtbot.waitUntil(lambda: "a [preview]" in viewer.layers and not widget.busy, timeout=TIMEOUT)
    viewer.layers.selection.active = b
    qtbot.waitUntil(lambda: "b [preview]" in viewer.layers and not widget.busy, timeout=TIMEOUT)
    p = viewer.layers["b [preview]"]
    r0, c0 = np.asarray(p.metadata["restore"]["region"])[[0, 2]]
    np.testing.assert_allclose(p.data_to_world((10, 10)), b.data_to_world((r0 + 10, c0 + 10)), atol=1e-9)
    assert p.colormap.name == "magma" and "a [preview]" not in viewer.layers and not errors


def test_the_preview_of_a_pyramid_covers_the_view_whatever_level_is_drawn(make_napari_viewer, qtbot, errors):
    """napari gives a multiscale layer's corners in the pixels of the level it draws, not of the full resolution."""
    viewer = make_napari_viewer(show=True)
    widget = dock(viewer, qtbot, DENOISE)
    widget.lam_mode.value = "rule"
    a = _noisy(512)
    src = viewer.add_image([a, a[::2, ::2], a[::4, ::4]], multiscale=True, name="ms")
    viewer.reset_view()
    # the whole image in a small part of the canvas: napari draws a coarser level
    (viewer.scene.camera if hasattr(viewer, "scene") else viewer.camera).zoom = 0.2
    qtbot.waitUntil(lambda: src.data_level > 0, timeout=TIMEOUT)
    viewer.layers.selection.active = src
    widget.preview.value = True
    qtbot.waitUntil(lambda: "ms [preview]" in viewer.layers and not widget.busy, timeout=TIMEOUT)
    assert viewer.layers["ms [preview]"].metadata["restore"]["region"] == [0, 512, 0, 512] and not errors


def _preview_of(viewer, qtbot, widget, layer):
    widget.lam_mode.value = "rule"
    viewer.layers.selection.active = layer
    widget.preview.value = True
    qtbot.waitUntil(lambda: f"{layer.name} [preview]" in viewer.layers and not widget.busy, timeout=TIMEOUT)


def test_a_preview_goes_with_its_source_layer(make_napari_viewer, qtbot, errors):
    viewer = make_napari_viewer()
    widget = dock(viewer, qtbot, DENOISE)
    a = viewer.add_image(_noisy(64), name="a")
    _preview_of(viewer, qtbot, widget, a)
    viewer.layers.remove(a)
    qtbot.wait(300)
    qtbot.waitUntil(lambda: not widget.busy, timeout=TIMEOUT)
    assert [layer.name for layer in viewer.layers] == [] and not errors


def test_a_preview_that_cannot_follow_the_settings_or_layer_is_removed(make_napari_viewer, qtbot, errors):
    """A refused preview (a layer with NaN) must not leave the last one on screen."""
    viewer = make_napari_viewer()
    widget = dock(viewer, qtbot, DENOISE)
    a = viewer.add_image(_noisy(64), name="a")
    bad = _noisy(64, 1)
    bad[5, 7] = np.nan
    b = viewer.add_image(bad, name="b", contrast_limits=(0, 200))
    _preview_of(viewer, qtbot, widget, a)
    viewer.layers.selection.active = b
    qtbot.wait(300)
    qtbot.waitUntil(lambda: not widget.busy, timeout=TIMEOUT)
    assert errors and "NaN" in str(errors[-1])
    assert [layer.name for layer in viewer.layers] == ["a", "b"]


def test_turning_the_preview_on_keeps_the_image_chosen_in_the_box(make_napari_viewer, qtbot, errors):
    viewer = make_napari_viewer()
    widget = dock(viewer, qtbot, DENOISE)
    widget.lam_mode.value = "rule"
    a = viewer.add_image(_noisy(64), name="a")
    viewer.add_image(_noisy(64, 1), name="b")  # selected: the last added
    widget.image.value = a  # the user picks another in the box
    widget.preview.value = True
    qtbot.wait(300)
    qtbot.waitUntil(lambda: not widget.busy, timeout=TIMEOUT)
    assert widget.image.value is a and "a [preview]" in viewer.layers and "b [preview]" not in viewer.layers
    assert not errors


def test_a_transposed_view_is_not_said_to_be_previewed_in_view(make_napari_viewer, qtbot, errors):
    viewer = make_napari_viewer()
    widget = dock(viewer, qtbot, DENOISE)
    src = viewer.add_image(np.stack([_noisy(64, s) for s in range(8)]), name="v")
    viewer.dims.order = (1, 0, 2)  # a z-x slice
    _preview_of(viewer, qtbot, widget, src)
    assert "in view" not in widget.status.value and "other axes" in widget.status.value and not errors


def test_removing_the_last_previews_source_while_the_next_one_runs_keeps_the_next(make_napari_viewer, qtbot, errors):
    viewer = make_napari_viewer()
    widget = dock(viewer, qtbot, DENOISE)
    a = viewer.add_image(_noisy(64), name="a")
    b = viewer.add_image(_noisy(768, 1), name="b")
    _preview_of(viewer, qtbot, widget, a)
    widget.cycle_spins.value = 16  # a slow preview for b
    viewer.layers.selection.active = b
    qtbot.waitUntil(lambda: widget.busy, timeout=TIMEOUT)
    viewer.layers.remove(a)  # a's preview goes; b's comes
    qtbot.waitUntil(lambda: "b [preview]" in viewer.layers and not widget.busy, timeout=TIMEOUT)
    assert "a [preview]" not in viewer.layers and not errors
