"""napari plugin, widgets in a real viewer (Qt; Xvfb through pytest-xvfb)."""

import time

import numpy as np
import pytest
from napari_helpers import PLUGIN

pytest.importorskip("napari")
pytest.importorskip("pytestqt")

from restore_napari import _common, _denoise, _runner  # noqa: E402

pytestmark = pytest.mark.gui

WIDGET = "Denoise"
TIMEOUT = 20_000  # ms


@pytest.fixture
def viewer_widget(make_napari_viewer, qtbot):
    """A viewer and the denoise widget docked through the manifest (the viewer is then a proxy)."""
    viewer = make_napari_viewer()
    _, widget = viewer.window.add_plugin_dock_widget(PLUGIN, WIDGET)
    assert isinstance(widget, _denoise.DenoiseWidget)
    yield viewer, widget
    widget.preview.value = False
    qtbot.waitUntil(lambda: not widget.busy, timeout=TIMEOUT)


def _stack(n=3, size=128, seed=0):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[:size, :size]
    planes = [100 + 50 * k * np.sin(x / (5.0 + k)) * np.cos(y / 9.0) for k in range(1, n + 1)]
    return (np.stack(planes) + 10 * rng.standard_normal((n, size, size))).astype(np.float32)


def _pick(widget, layer):
    widget.image.reset_choices()
    match = [v for v in widget.image.choices if v is not None and v.unique_id == layer.unique_id]
    widget.image.value = match[0]


def _denoised(plane, params, rgb=False):
    _, (out, info) = _runner.drive(_denoise.denoise_plane(_runner.Control(), plane, params, rgb))
    return out, info


def test_estimate_then_apply_on_sample_camera_adds_a_layer_keeping_scale_and_translate(viewer_widget, qtbot):
    viewer, widget = viewer_widget
    viewer.open_sample(PLUGIN, "noisy_camera")
    src = viewer.layers["camera"]
    src.scale = (0.5, 2.0)
    src.translate = (3.0, -4.0)
    before = np.array(src.data, copy=True)
    _pick(widget, src)
    widget.estimate.clicked.emit()  # fills sigma on the current plane, switches auto off
    qtbot.waitUntil(lambda: not widget.busy and not widget.sigma_auto.value, timeout=TIMEOUT)
    assert widget.sigma.enabled
    assert widget.sigma.value == pytest.approx(25.0, abs=2.5)
    assert widget.params().sigma == pytest.approx(widget.sigma.value)
    widget.apply_button.clicked.emit()
    qtbot.waitUntil(lambda: "camera [tree_l2]" in viewer.layers and not widget.busy, timeout=TIMEOUT)
    out = viewer.layers["camera [tree_l2]"]
    assert out.data.dtype == np.float32 and out.data.shape == src.data.shape and not out.rgb
    np.testing.assert_allclose(out.scale, (0.5, 2.0))
    np.testing.assert_allclose(out.translate, (3.0, -4.0))
    np.testing.assert_array_equal(src.data, before)  # the input is never modified
    clean = _common.as_float(__import__("restore_napari._sample_data", fromlist=["clean_camera"]).clean_camera())
    assert np.mean((out.data - clean) ** 2) < 0.25 * np.mean((src.data - clean) ** 2)
    assert "\u03bb" in widget.info.value and "SURE" in widget.info.value and "(given)" in widget.info.value
    assert "Done: 'camera [tree_l2]'" in widget.status.value
    assert widget.image.value.name == "camera"  # the choice survives new layers
    assert "camera [tree_l2]" in [name for name, _ in widget._image_choices()]


def test_apply_on_rgb_sample_returns_rgb(viewer_widget, qtbot):
    viewer, widget = viewer_widget
    viewer.open_sample(PLUGIN, "cat_with_text")
    assert isinstance(viewer.layers["text mask"], __import__("napari").layers.Labels)
    src = viewer.layers["chelsea with text"]
    _pick(widget, src)
    widget.penalty.value = "tree_l0"
    assert widget.lam_mode.value == "rule"  # SURE is for convex penalties only
    assert "sure" not in [c for c in widget.lam_mode.choices]
    widget.apply_button.clicked.emit()
    qtbot.waitUntil(lambda: "chelsea with text [tree_l0]" in viewer.layers and not widget.busy, timeout=TIMEOUT)
    out = viewer.layers["chelsea with text [tree_l0]"]
    assert out.rgb and out.data.shape == (256, 256, 3)
    assert tuple(out.contrast_limits) == tuple(src.contrast_limits)
    assert widget.info.value.count(",") >= 2  # one lam per colour channel


def test_preview_on_a_stack_processes_the_current_plane(viewer_widget, qtbot):
    viewer, widget = viewer_widget
    stack = _stack()
    src = viewer.add_image(stack, name="stack", scale=(2.0, 1.0, 1.0), translate=(5.0, 0.0, 0.0))
    _pick(widget, src)
    viewer.dims.set_current_step(0, 2)
    widget.lam_mode.value = "manual"
    widget.lam.value = 15.0
    widget.preview.value = True
    qtbot.waitUntil(lambda: "stack [preview]" in viewer.layers and not widget.busy, timeout=TIMEOUT)
    prev = viewer.layers["stack [preview]"]
    expected, _ = _denoised(stack[2], _denoise.DenoiseParams(lam_mode="manual", lam=15.0))
    np.testing.assert_allclose(prev.data[0], expected, atol=1e-5)
    np.testing.assert_allclose(prev.translate, (5.0 + 2 * 2.0, 0.0, 0.0))
    assert "stack [preview]" not in [name for name, _ in widget._image_choices()]
    # moving to another plane updates the preview (debounced)
    viewer.dims.set_current_step(0, 0)
    expected0, _ = _denoised(stack[0], _denoise.DenoiseParams(lam_mode="manual", lam=15.0))
    qtbot.waitUntil(lambda: np.allclose(prev.data[0], expected0, atol=1e-5) and not widget.busy, timeout=TIMEOUT)
    np.testing.assert_allclose(prev.translate, (5.0, 0.0, 0.0))
    assert len(viewer.layers) == 2
    widget.preview.value = False
    assert "stack [preview]" not in viewer.layers


def test_cancel_adds_no_layer(viewer_widget, qtbot, errors):
    viewer, widget = viewer_widget
    src = viewer.add_image(_stack(8, 256), name="long")
    _pick(widget, src)
    qtbot.waitUntil(lambda: not widget.busy, timeout=TIMEOUT)
    widget.apply_button.clicked.emit()
    assert widget.cancel_button.enabled and not widget.apply_button.enabled
    qtbot.waitUntil(lambda: widget.progress.value >= 1, timeout=TIMEOUT)  # a plane is done
    widget.cancel_button.clicked.emit()
    qtbot.waitUntil(lambda: not widget.busy, timeout=TIMEOUT)
    assert [layer.name for layer in viewer.layers] == ["long"]
    assert widget.status.value == "Cancelled: nothing partial was added."
    assert widget.apply_button.enabled and not widget.cancel_button.enabled
    assert not errors


def test_errors_become_notifications(viewer_widget, qtbot, errors):
    viewer, widget = viewer_widget
    widget.apply_button.clicked.emit()  # no layer chosen
    assert errors == ["restore-tree: choose an image layer first"]
    errors.clear()
    bad = np.zeros((64, 64), np.float32)
    bad[3, 3] = np.nan
    src = viewer.add_image(bad, name="nan")
    _pick(widget, src)
    widget.apply_button.clicked.emit()
    qtbot.waitUntil(lambda: bool(errors) and not widget.busy, timeout=TIMEOUT)
    assert len(errors) == 1 and errors[0].startswith("restore-tree: image") and "NaN" in errors[0]
    assert [layer.name for layer in viewer.layers] == ["nan"]
    assert widget.status.value == errors[0]


def test_sure_preview_refines_then_multiplier_and_manual_update_within_a_second(viewer_widget, qtbot):
    """Trigger to preview-layer update on 512 x 512 (debounce included): cached SURE, manual lam."""
    viewer, widget = viewer_widget
    viewer.open_sample(PLUGIN, "noisy_camera")
    _pick(widget, viewer.layers["camera"])
    labels = []  # the info line when the preview layer appears

    def on_inserted(event):
        labels.append(widget.info.value)

    viewer.layers.events.inserted.connect(on_inserted)
    widget.preview.value = True
    qtbot.waitUntil(lambda: not widget.busy and "SURE \u00d7 1" in widget.info.value, timeout=TIMEOUT)
    viewer.layers.events.inserted.disconnect(on_inserted)
    assert "SURE running" in labels[0]  # the rule's preview comes first, SURE's replaces it
    layer = viewer.layers["camera [preview]"]
    lam1 = widget._last_info.lam[0]
    updates = []

    def on_data(event):
        updates.append(time.perf_counter())

    layer.events.data.connect(on_data)
    for change in (lambda: setattr(widget.multiplier, "value", 1.5),
                   lambda: setattr(widget.lam_mode, "value", "manual")):
        updates.clear()
        t0 = time.perf_counter()
        change()
        qtbot.waitUntil(lambda: bool(updates) and not widget.busy, timeout=TIMEOUT)
        assert updates[0] - t0 < 1.0
    layer.events.data.disconnect(on_data)
    assert widget._last_info.lam[0] == pytest.approx(1.5 * lam1, rel=1e-3)  # the manual lam starts there
    assert "manual" in widget.info.value


def test_sync_switch_runs_jobs_in_the_gui_thread(viewer_widget, monkeypatch):
    """RESTORE_PLUGIN_SYNC runs the job in the calling thread; an integer layer comes back in its type."""
    viewer, widget = viewer_widget
    monkeypatch.setenv(_common.SYNC_ENV, "1")
    src = viewer.add_image(_stack(2, 64).astype(np.uint16), name="ints", scale=(1.0, 0.5, 0.5))
    _pick(widget, src)
    widget.penalty.value = "l1"
    job = widget.apply()
    assert job.done and job.outcome == "returned"  # no waiting: it ran in this thread
    out = viewer.layers["ints [l1]"]
    assert out.data.dtype == np.uint16 and out.data.shape == (2, 64, 64)
    np.testing.assert_allclose(out.scale, (1.0, 0.5, 0.5))
    assert out.data.mean() == pytest.approx(src.data.mean(), rel=0.05)  # the layer's units, not [0, 1]
    assert widget.info.value.startswith("Used: 2 planes")
