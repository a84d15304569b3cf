"""napari plugin: the Denoise widget's method choice, "non-local tree: best quality" (Qt; headless)."""

import time

import numpy as np
import pytest
from napari_helpers import CANCEL_BOUND_S, DENOISE, PLUGIN, library_threads

pytest.importorskip("napari")
pytest.importorskip("pytestqt")

from restore_napari import _denoise, _runner, _widgets  # noqa: E402

import restore  # noqa: E402

pytestmark = pytest.mark.gui

TIMEOUT = 30_000  # ms
SIGMA = 25.0


@pytest.fixture
def viewer_widget(make_napari_viewer, qtbot):
    viewer = make_napari_viewer()
    _, widget = viewer.window.add_plugin_dock_widget(PLUGIN, DENOISE)
    qtbot.waitUntil(lambda: not widget.busy, timeout=TIMEOUT)
    yield viewer, widget
    widget.preview.value = False
    qtbot.waitUntil(lambda: not widget.busy, timeout=TIMEOUT)


def _camera(size=128, seed=0):
    from skimage import data

    clean = data.camera()[128:128 + size, 160:160 + size].astype(np.float32)
    noisy = clean + np.float32(SIGMA) * np.random.default_rng(seed).standard_normal(clean.shape, dtype=np.float32)
    return clean, noisy


def _psnr(out, clean):
    return 10 * np.log10(255.0 ** 2 / np.mean((np.asarray(out, float) - clean) ** 2))


def _pick(widget, layer):
    widget.image.reset_choices()
    widget.image.value = next(v for v in widget.image.choices if v is not None and v.unique_id == layer.unique_id)


def _apply(qtbot, viewer, widget):
    before = {layer.name for layer in viewer.layers}
    widget.apply_button.clicked.emit()
    qtbot.waitUntil(lambda: not widget.busy and len(viewer.layers) > len(before), timeout=TIMEOUT)
    return next(layer for layer in viewer.layers if layer.name not in before)


def test_params_choose_the_library_function():
    clean, noisy = _camera()
    source = _denoise.Source.of(__import__("napari").layers.Image(noisy, name="cam"))
    outs = {}
    for method in _denoise.METHODS:
        params = _denoise.DenoiseParams(method=method, sigma=SIGMA, noise="gaussian")
        (result,) = _outputs(source, params)
        outs[method] = result.data
    want = restore.denoise_nonlocal_tree(noisy, sigma=SIGMA)
    np.testing.assert_allclose(outs["nonlocal"], want, atol=1e-4)
    assert _psnr(outs["nonlocal"], clean) > _psnr(outs["wavelet"], clean) + 0.5
    with pytest.raises(ValueError, match="method"):
        _denoise.DenoiseParams(method="bm3d")


def _outputs(source, params):
    gen = _denoise.denoise_task(_runner.Control(), [source], params)
    return [item.value for item in gen if isinstance(item, _runner.Output)]


def test_nonlocal_apply_records_the_method_and_beats_wavelet(viewer_widget, qtbot):
    viewer, widget = viewer_widget
    clean, noisy = _camera()
    src = viewer.add_image(noisy, name="camera")
    _pick(widget, src)
    assert widget.method.value == "wavelet"  # the fast method is the default
    wav = _apply(qtbot, viewer, widget)
    assert wav.metadata["restore"]["method"] == "wavelet"
    widget.method.value = "nonlocal"
    widget.keep_each_run.value = True
    nl = _apply(qtbot, viewer, widget)
    record = nl.metadata["restore"]
    assert record["method"] == "nonlocal" and record["params"]["method"] == "nonlocal"
    assert "non-local" in nl.name
    assert _psnr(nl.data, clean) > _psnr(wav.data, clean) + 0.5
    assert "non-local" in widget.info.value
    np.testing.assert_array_equal(src.data, noisy)  # the input is never modified


def test_wavelet_only_settings_hide_for_nonlocal_and_the_choice_is_remembered(viewer_widget, make_napari_viewer,
                                                                              qtbot):
    viewer, widget = viewer_widget
    wavelet_only = [widget.cycle_spins, widget.lam_mode, widget.lam, widget.penalty, widget.wavelet,
                    widget.penalize_approx]
    def shown(w):  # not hidden by the widget (the window itself is not shown in these tests)
        return not w.native.isHidden()

    widget.method.value = "nonlocal"
    assert not any(shown(w) for w in wavelet_only)
    assert widget.multiplier.enabled  # the strength applies to both methods
    widget.method.value = "wavelet"
    assert all(shown(w) for w in wavelet_only)
    widget.lam_mode.value = "manual"
    assert not widget.multiplier.enabled  # a manual lam has no strength...
    widget.method.value = "nonlocal"
    assert widget.multiplier.enabled  # ...but the non-local method has
    widget.method.value = "nonlocal"
    other = make_napari_viewer()
    _, again = other.window.add_plugin_dock_widget(PLUGIN, DENOISE)
    qtbot.waitUntil(lambda: not again.busy, timeout=TIMEOUT)
    assert again.method.value == "nonlocal" and not shown(again.cycle_spins)
    assert isinstance(_widgets.Settings("denoise").value("method"), str)


def test_cancel_stops_a_nonlocal_run_within_a_second(viewer_widget, qtbot, errors):
    viewer, widget = viewer_widget
    stack = np.stack([_camera(256, seed)[1] for seed in range(6)])
    src = viewer.add_image(stack, name="long")
    _pick(widget, src)
    widget.method.value = "nonlocal"
    widget.apply_button.clicked.emit()
    qtbot.waitUntil(lambda: widget.progress.value >= 1, timeout=TIMEOUT)  # the library is at work
    t0 = time.perf_counter()
    widget.cancel_button.clicked.emit()
    qtbot.waitUntil(lambda: not widget.busy, timeout=TIMEOUT)
    assert time.perf_counter() - t0 < CANCEL_BOUND_S
    qtbot.waitUntil(lambda: not library_threads(), timeout=int(CANCEL_BOUND_S * 1000))  # the library call stopped
    assert [layer.name for layer in viewer.layers] == ["long"]
    assert not errors


def test_nonlocal_preview_answers_at_once_then_shows_the_nonlocal_result(viewer_widget, qtbot):
    viewer, widget = viewer_widget
    _, noisy = _camera()
    src = viewer.add_image(noisy, name="camera")
    _pick(widget, src)
    widget.method.value = "nonlocal"
    widget.sigma_auto.value = False
    widget.sigma.value = SIGMA
    seen = []
    viewer.layers.events.inserted.connect(lambda e: seen.append(dict(e.value.metadata.get("restore", {}))))
    widget.preview.value = True
    qtbot.waitUntil(lambda: "camera [preview]" in viewer.layers
                    and viewer.layers["camera [preview]"].metadata["restore"].get("method") == "nonlocal"
                    and not widget.busy, timeout=TIMEOUT)
    assert seen[0]["method"] == "wavelet" and seen[0]["provisional"]  # the fast method first, marked as such
    prev = viewer.layers["camera [preview]"]
    np.testing.assert_allclose(prev.data, restore.denoise_nonlocal_tree(noisy, sigma=SIGMA), atol=1e-3)
    assert "non-local" in widget.info.value
    # a change of setting previews again with it
    widget.multiplier.value = 2.0
    qtbot.waitUntil(lambda: not widget.busy and np.allclose(
        prev.data, restore.denoise_nonlocal_tree(noisy, sigma=SIGMA, strength=2.0), atol=1e-3), timeout=TIMEOUT)


def test_a_dask_layer_gets_the_lazy_nonlocal_result_with_its_strength():
    da = pytest.importorskip("dask.array")
    from napari.layers import Image

    stack = np.stack([_camera(96, seed)[1] for seed in range(2)])
    source = _denoise.Source.of(Image(da.from_array(stack, chunks=(1, 96, 96)), name="lazy"))
    params = _denoise.DenoiseParams(method="nonlocal", sigma=SIGMA, noise="gaussian", multiplier=1.5)
    source.check(params)  # a strength is no lam multiplier: the blocks apply it as the whole does
    (result,) = _outputs(source, params)
    assert source.lazy and hasattr(result.data, "dask")
    want = restore.denoise_nonlocal_tree(stack, sigma=SIGMA, strength=1.5)
    np.testing.assert_allclose(np.asarray(result.data), want, atol=1e-3)
    assert "non-local" in _denoise.format_info(result.infos, params)


def test_a_nonlocal_run_moves_the_bar_within_a_plane_and_keeps_the_gui_live(viewer_widget, qtbot, errors):
    from qtpy.QtCore import QTimer

    viewer, widget = viewer_widget
    src = viewer.add_image(_camera(384)[1], name="one plane")
    _pick(widget, src)
    widget.method.value = "nonlocal"
    seen, ticks = [], []
    widget.progress.changed.connect(seen.append)
    timer = QTimer()
    timer.timeout.connect(lambda: ticks.append(time.perf_counter()))
    timer.start(20)
    widget.apply_button.clicked.emit()
    qtbot.waitUntil(lambda: not widget.busy, timeout=TIMEOUT)
    timer.stop()
    assert "one plane [non-local]" in viewer.layers and not errors
    assert len({v for v in seen if widget.progress.min < v < widget.progress.max}) >= 3
    assert max(np.diff(ticks)) < CANCEL_BOUND_S  # the event loop ran all along (the library releases the GIL)


def test_a_volume_preview_shows_the_fast_method_first_unless_its_subvolume_is_kept():
    from napari.layers import Image
    from restore_napari._common import LruCache

    vol = np.load(__file__.rsplit("/", 1)[0] + "/data/nuclei_16x64x64.npz")["volume"].astype(np.float32)
    source = _denoise.Source.of(Image(vol, name="nuclei"))
    params = _denoise.DenoiseParams(method="nonlocal", volume=True, noise="gaussian", sigma=500.0)
    volumes, region, depth = LruCache(2), (0, 64, 0, 64), (0, 16)

    def preview(z):
        gen = _denoise.preview_task(_runner.Control(), source, (z,), region, params, None, depth, volumes)
        return [item.value for item in gen if isinstance(item, _runner.Output)]

    first = preview(5)
    assert [info.provisional for _, info in first[:1]] == [True] and len(first) == 2
    data, (info, _) = first[1]
    assert info.method == "nonlocal" and not info.provisional
    want = restore.denoise_nonlocal_tree(vol, sigma=500.0, axes=(0, 1, 2))
    np.testing.assert_allclose(data, want[5], rtol=1e-4, atol=0.5)
    again = preview(8)  # another plane of the kept sub-volume: its own result at once, no stand-in
    assert len(again) == 1
    np.testing.assert_allclose(again[0][0], want[8], rtol=1e-4, atol=0.5)
