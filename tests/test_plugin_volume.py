"""Issue 20, section 4: volumes, photon noise and lazy layers in the Denoise widget (real napari, Xvfb)."""

import threading
import time

import numpy as np
import pytest
from dask_helpers import computed_blocks
from napari_helpers import CANCEL_BOUND_S, DENOISE, PLUGIN, cancel, dock, library_threads, press

pytest.importorskip("napari")
pytest.importorskip("pytestqt")
da = pytest.importorskip("dask.array")

import restore  # noqa: E402

pytestmark = pytest.mark.gui

TIMEOUT = 60_000  # ms


@pytest.fixture
def infos(monkeypatch):
    import napari.utils.notifications as notifications

    shown = []
    monkeypatch.setattr(notifications, "show_info", shown.append)
    return shown


def _blobs(shape, seed=0, sigma=0.1):
    """A smooth volume (or stack) with Gaussian noise, float32."""
    rng = np.random.default_rng(seed)
    grids = np.meshgrid(*[np.arange(n, dtype=np.float32) for n in shape], indexing="ij")
    clean = 0.5 + 0.3 * np.sin(grids[-1] / 7.0) * np.cos(grids[-2] / 9.0) * np.cos(grids[0] / 5.0)
    return clean.astype(np.float32), (clean + sigma * rng.standard_normal(shape)).astype(np.float32)


class Counting:
    """An array that counts what is read from it (a stand-in for a file on disk behind a Dask array)."""

    def __init__(self, a):
        self.a, self.shape, self.dtype, self.ndim = a, a.shape, a.dtype, a.ndim
        self.reads = []
        self.in_gui: list[int] = []  # what the main (GUI) thread read: napari draws in it
        self.planes: set[int] = set()  # the first axis' indices read
        self._lock = threading.Lock()

    def __getitem__(self, key):
        out = self.a[key]

        with self._lock:
            self.reads.append(int(np.size(out)))
            if np.size(out):  # (Dask reads an empty slice for its meta)
                first = key[0] if isinstance(key, tuple) else key
                self.planes.update(range(self.shape[0])[first] if isinstance(first, slice) else [int(first)])
                if threading.current_thread() is threading.main_thread():
                    self.in_gui.append(int(np.size(out)))
        return out


def _psnr(x, ref):
    return 10 * np.log10(1.0 / np.mean((np.asarray(x, float) - ref) ** 2))


# ---------------------------------------------------------------------------
# Volume (3-D) or plane by plane
# ---------------------------------------------------------------------------


def test_volume_is_offered_for_3d_layers_and_denoises_the_volume_as_a_whole(make_napari_viewer, qtbot, errors):
    viewer = make_napari_viewer()
    widget = dock(viewer, qtbot, DENOISE, timeout=TIMEOUT)
    flat = viewer.add_image(_blobs((48, 48))[1], name="photo")
    widget.image.value = flat
    assert [c for c in widget.process.choices] == [False]  # a photograph: plane by plane only
    clean, noisy = _blobs((16, 48, 48))
    stack = viewer.add_image(noisy, name="stack")
    widget.image.value = stack
    assert list(widget.process.choices) == [False, True]
    assert widget.process.value is False  # the library's default: plane by plane
    [planes] = press(qtbot, viewer, widget, widget.apply_button, timeout=TIMEOUT)
    widget.process.value = True
    widget.keep_each_run.value = True
    [volume] = press(qtbot, viewer, widget, widget.apply_button, timeout=TIMEOUT)
    assert not errors
    expected = restore.denoise_wavelet_tree(noisy, axes=(0, 1, 2), lam="sure").astype(np.float32)
    np.testing.assert_allclose(volume.data, expected, rtol=1e-5, atol=1e-6)  # one call over the volume
    assert volume.metadata["restore"]["params"]["volume"] is True
    assert _psnr(volume.data, clean) > _psnr(planes.data, clean)  # the third dimension helps
    assert np.array_equal(stack.data, noisy)  # the input is untouched


def test_a_single_plane_stack_is_not_a_volume_and_a_batch_is_refused_before_any_work(make_napari_viewer, qtbot,
                                                                                       errors):
    """A reader's (1, Y, X) or (T, 1, Y, X) layer has three axes but no depth to transform."""
    viewer = make_napari_viewer()
    widget = dock(viewer, qtbot, DENOISE, timeout=TIMEOUT)
    good = viewer.add_image(_blobs((16, 48, 48))[1], name="good")
    for shape in [(1, 48, 48), (3, 1, 48, 48)]:
        thin = viewer.add_image(_blobs(shape)[1], name=f"thin{len(shape)}")
        widget.image.value = thin
        assert list(widget.process.choices) == [False]
    widget.image.value = good
    widget.process.value = True
    widget.all_selected.value = True
    widget.lam_mode.value = "rule"
    viewer.layers.selection.update({good, viewer.layers["thin3"]})
    n = len(viewer.layers)
    press(qtbot, viewer, widget, widget.apply_button, timeout=TIMEOUT)
    assert len(viewer.layers) == n  # nothing added: the batch is refused whole
    assert errors and "thin3" in str(errors[-1]) and "plane by plane" in str(errors[-1])


def test_progress_moves_and_cancel_acts_within_a_second_inside_one_volume(make_napari_viewer, qtbot, errors):
    viewer = make_napari_viewer()
    widget = dock(viewer, qtbot, DENOISE, timeout=TIMEOUT)
    widget.image.value = viewer.add_image(_blobs((32, 256, 256))[1], name="volume")
    widget.process.value = True
    widget.cycle_spins.value = 8
    seen = []
    widget.progress.changed.connect(seen.append)
    widget.apply_button.clicked.emit()
    qtbot.waitUntil(lambda: widget.progress.min < widget.progress.value, timeout=TIMEOUT)  # moves inside it
    assert widget.busy
    t0 = time.perf_counter()
    assert cancel(qtbot, widget, timeout=TIMEOUT) < CANCEL_BOUND_S
    assert [layer.name for layer in viewer.layers] == ["volume"] and not errors
    qtbot.waitUntil(lambda: not library_threads(), timeout=TIMEOUT)
    assert time.perf_counter() - t0 < 5.0  # the library call itself stopped (at its next report)


def test_volume_preview_shows_the_current_slice_of_a_bounded_sub_volume(make_napari_viewer, qtbot, errors):
    viewer = make_napari_viewer()
    widget = dock(viewer, qtbot, DENOISE, timeout=TIMEOUT)
    _, noisy = _blobs((40, 160, 160))
    src = viewer.add_image(noisy, name="volume")
    widget.image.value = src
    widget.process.value = True
    viewer.dims.set_current_step(0, 3)
    widget.preview.value = True
    qtbot.waitUntil(lambda: "volume [preview]" in viewer.layers and not widget.busy, timeout=TIMEOUT)
    preview = viewer.layers["volume [preview]"]
    record = preview.metadata["restore"]
    z0, z1 = record["volume_planes"]
    r0, r1, c0, c1 = record["region"]
    assert (z0, z1) == (0, widget.PREVIEW_DEPTH_PLANES)  # around plane 3, inside the volume
    assert (z1 - z0) * (r1 - r0) * (c1 - c0) <= widget.PREVIEW_MAX_VOXELS  # bounded, not the whole volume
    assert preview.data.shape == (1, r1 - r0, c1 - c0)  # only the current slice is shown
    np.testing.assert_allclose(preview.translate, (3, r0, c0))
    expected = restore.denoise_wavelet_tree(noisy[z0:z1, r0:r1, c0:c1], axes=(0, 1, 2), lam="sure")[3 - z0]
    np.testing.assert_allclose(preview.data[0], expected, rtol=1e-5, atol=1e-6)
    widget.preview.value = False
    assert "volume [preview]" not in viewer.layers and not errors


# ---------------------------------------------------------------------------
# Poisson-Gaussian noise
# ---------------------------------------------------------------------------


def test_photon_noise_estimates_the_gain_reports_it_and_records_it(make_napari_viewer, qtbot, errors, infos):
    """The sample volume (peak 10 photons: gain 0.1) denoised as a volume under Poisson-Gaussian noise."""
    from restore_napari._sample_data import clean_nuclei

    viewer = make_napari_viewer()
    viewer.open_sample(PLUGIN, "noisy_nuclei_volume")
    src = viewer.layers["nuclei (noisy)"]
    assert src.data.shape == (32, 128, 128) and src.metadata["gain"] == 0.1
    widget = dock(viewer, qtbot, DENOISE, timeout=TIMEOUT)
    widget.image.value = src
    widget.process.value = True
    widget.noise.value = "poisson-gaussian"
    assert widget.gain.enabled and widget.multiplier.enabled
    [out] = press(qtbot, viewer, widget, widget.apply_button, timeout=TIMEOUT)
    assert not errors
    noise = out.metadata["restore"]["noise"]
    assert noise["gain_estimated"] and 0.07 < noise["gain"] < 0.13
    assert any("gain" in message and f"{noise['gain']:.4g}" in message for message in infos)  # reported
    assert "gain" in widget.info.value
    clean = clean_nuclei()
    assert _psnr(out.data, clean) > _psnr(src.data, clean) + 8  # about 19 dB noisy, about 30 denoised


def test_estimate_fills_gain_and_read_noise_for_photon_noise(make_napari_viewer, qtbot, errors):
    viewer = make_napari_viewer()
    viewer.open_sample(PLUGIN, "noisy_nuclei_volume")
    widget = dock(viewer, qtbot, DENOISE, timeout=TIMEOUT)
    widget.image.value = viewer.layers["nuclei (noisy)"]
    widget.noise.value = "poisson-gaussian"
    press(qtbot, viewer, widget, widget.estimate, timeout=TIMEOUT)
    assert not errors and 0.07 < widget.gain.value < 0.13
    assert widget.sigma_auto.value is False
    assert widget.params().gain == pytest.approx(widget.gain.value)


def test_a_gain_given_is_used_as_is(make_napari_viewer, qtbot, errors, infos):
    viewer = make_napari_viewer()
    viewer.open_sample(PLUGIN, "noisy_nuclei_volume")
    widget = dock(viewer, qtbot, DENOISE, timeout=TIMEOUT)
    src = viewer.layers["nuclei (noisy)"]
    widget.image.value = src
    widget.process.value = False  # the sample's axes say z, y, x (a volume): here plane by plane
    widget.noise.value = "poisson-gaussian"
    widget.gain.value = 0.1
    widget.sigma_auto.value = False
    widget.sigma.value = 0.02
    [out] = press(qtbot, viewer, widget, widget.apply_button, timeout=TIMEOUT)
    assert not errors and not infos  # nothing estimated, nothing to report
    expected = restore.denoise_wavelet_tree(src.data[5], noise="poisson-gaussian", gain=0.1, sigma=0.02, lam="sure")
    np.testing.assert_allclose(out.data[5], expected, rtol=1e-5, atol=1e-6)  # plane by plane, as given
    assert out.metadata["restore"]["noise"]["gain"] == 0.1


# ---------------------------------------------------------------------------
# Dask and multiscale layers: lazy results, never loaded whole
# ---------------------------------------------------------------------------


def test_a_dask_stack_gives_a_lazy_result_and_is_never_loaded_whole(make_napari_viewer, qtbot, errors):
    _, noisy = _blobs((12, 128, 128))
    store = Counting(noisy)
    viewer = make_napari_viewer()
    src = viewer.add_image(da.from_array(store, chunks=(1, 128, 128)), name="lazy", contrast_limits=(0, 1))
    widget = dock(viewer, qtbot, DENOISE, timeout=TIMEOUT)
    widget.image.value = src
    [out] = press(qtbot, viewer, widget, widget.apply_button, timeout=TIMEOUT)
    qtbot.wait(200)  # napari shows the result's current plane
    assert not errors
    assert isinstance(out.data, da.Array) and out.data.shape == noisy.shape and out.data.dtype == np.float32
    assert out.metadata["restore"]["lazy"] is True
    plane = noisy[0].size
    assert max(store.reads) <= plane and sum(store.reads) <= 4 * plane  # what is shown, never the stack
    k = int(viewer.dims.current_step[0])
    expected = restore.denoise_wavelet_tree(noisy[k], lam="sure")
    np.testing.assert_allclose(np.asarray(out.data[k]), expected, rtol=1e-5, atol=1e-6)


def test_a_dask_volume_with_photon_noise_reads_only_a_sample_to_estimate(make_napari_viewer, qtbot, errors,
                                                                          monkeypatch, infos):
    import restore.noise

    monkeypatch.setattr(restore.noise, "ESTIMATE_VOXELS", 16 * 64 * 64)
    from restore_napari._sample_data import noisy_nuclei_volume

    [(noisy, _, _)] = noisy_nuclei_volume()
    store = Counting(noisy)
    viewer = make_napari_viewer()
    widget = dock(viewer, qtbot, DENOISE, timeout=TIMEOUT)
    src = viewer.add_image(da.from_array(store, chunks=(32, 64, 64)), name="lazy volume", contrast_limits=(0, 1),
                           visible=False)  # not shown: the reads are the widget's
    widget.image.value = src
    widget.process.value = True
    widget.noise.value = "poisson-gaussian"
    before_shown = []  # what was read when the result is added (napari then computes the slice it shows)
    add_image = type(viewer).add_image
    monkeypatch.setattr(type(viewer), "add_image", lambda self, *a, **k: (before_shown.append(sum(store.reads)),
                                                                           add_image(self, *a, **k))[1])
    [out] = press(qtbot, viewer, widget, widget.apply_button, timeout=TIMEOUT)
    assert not errors and isinstance(out.data, da.Array) and out.data.shape == noisy.shape
    first = [r for r in store.reads if r][0]  # (Dask reads an empty slice for its meta)
    assert 0 < first <= 16 * 64 * 64 and before_shown[0] > first  # the noise sample, then the shown slice's blocks
    assert max(store.reads) <= 32 * 64 * 64  # block by block, never the whole at once
    assert 0.07 < out.metadata["restore"]["noise"]["gain"] < 0.13 and infos


def _pyramid_in_denoise(make_napari_viewer, qtbot):
    """A multiscale Dask layer of two levels over counting stores, chosen in a docked Denoise widget."""
    _, noisy = _blobs((6, 128, 128))
    stores = [Counting(noisy), Counting(noisy[:, ::2, ::2].copy())]
    levels = [da.from_array(stores[0], chunks=(1, 128, 128)), da.from_array(stores[1], chunks=(1, 64, 64))]
    viewer = make_napari_viewer()
    src = viewer.add_image(levels, multiscale=True, name="pyramid", contrast_limits=(0, 1))
    widget = dock(viewer, qtbot, DENOISE, timeout=TIMEOUT)
    widget.image.value = src
    return viewer, widget, stores, levels


def test_a_multiscale_layer_gives_a_lazy_multiscale_result(make_napari_viewer, qtbot, errors):
    viewer, widget, stores, levels = _pyramid_in_denoise(make_napari_viewer, qtbot)
    [out] = press(qtbot, viewer, widget, widget.apply_button, timeout=TIMEOUT)
    qtbot.wait(200)
    assert not errors and out.multiscale
    assert [lv.shape for lv in out.data] == [lv.shape for lv in levels]
    assert all(isinstance(lv, da.Array) for lv in out.data)
    # the full resolution: the plane shown and the noise sample's, no other (never loaded whole)
    plane = stores[0].a[0].size
    assert len(stores[0].planes) <= 2 and sum(stores[0].reads) <= 3 * plane


def test_a_multiscale_result_is_drawn_without_computing_in_the_gui_thread(make_napari_viewer, qtbot, errors):
    """napari draws a multiscale layer's level in view and its thumbnail (the coarsest level) in the GUI thread:
    the widget computes both before adding the layer, so that drawing reads nothing."""
    import dask

    viewer, widget, stores, _ = _pyramid_in_denoise(make_napari_viewer, qtbot)
    qtbot.wait(200)
    for store in stores:  # napari has drawn the source: from here on, any read in the GUI thread is the result's
        store.in_gui.clear()
    with dask.config.set(scheduler="synchronous"):  # every Dask task in the thread that asks for it
        [out] = press(qtbot, viewer, widget, widget.apply_button, timeout=TIMEOUT)
        qtbot.wait(300)
    assert not errors and out.multiscale and out.thumbnail.any()
    assert [store.in_gui for store in stores] == [[], []]


def test_one_plane_of_an_in_memory_pyramids_result_denoises_that_plane(make_napari_viewer, qtbot, errors):
    _, noisy = _blobs((16, 128, 128))
    viewer = make_napari_viewer()
    src = viewer.add_image([noisy, noisy[:, ::2, ::2].copy()], multiscale=True, name="pyramid",
                           contrast_limits=(0, 1), visible=False)
    widget = dock(viewer, qtbot, DENOISE, timeout=TIMEOUT)
    widget.image.value = src
    widget.lam_mode.value = "rule"
    [out] = press(qtbot, viewer, widget, widget.apply_button, timeout=TIMEOUT)
    with computed_blocks(out.data[0]) as seen:
        out.data[0][3].compute(optimize_graph=False)
    assert seen == [(1, 128, 128)] and not errors


def test_a_multiscale_results_lower_levels_are_block_means_of_its_denoised_full_resolution(make_napari_viewer,
                                                                                           qtbot, errors):
    """As the CLI writes a pyramid (issue 28): not each level denoised on its own, which would differ from it."""
    _, noisy = _blobs((4, 64, 50))
    counts = np.rint(noisy * 4000).astype(np.uint16)  # integers: each level's means rounded, as stored
    levels = [da.from_array(counts, chunks=(1, 64, 50)), da.from_array(counts[:, ::2, ::2].copy()),
              da.from_array(counts[::2, ::4, ::4].copy())]  # (4, 64, 50), (4, 32, 25), (2, 16, 13)
    viewer = make_napari_viewer()
    src = viewer.add_image(levels, multiscale=True, name="pyramid", scale=(2.0, 0.5, 0.5), translate=(1, 2, 3),
                           metadata={"origin": "microscope"}, visible=False)
    widget = dock(viewer, qtbot, DENOISE, timeout=TIMEOUT)
    widget.image.value = src
    widget.lam_mode.value = "rule"
    [out] = press(qtbot, viewer, widget, widget.apply_button, timeout=TIMEOUT)
    assert not errors and out.multiscale and all(isinstance(lv, da.Array) for lv in out.data)
    assert out.scale.tolist() == [2.0, 0.5, 0.5] and out.translate.tolist() == [1, 2, 3]
    assert out.metadata["origin"] == "microscope"
    full, half, quarter = (np.asarray(lv) for lv in out.data)
    assert full.dtype == half.dtype == quarter.dtype == np.uint16
    # means of whole blocks: an odd size loses its last voxel, as in the CLI
    assert half.shape == (4, 32, 25) and quarter.shape == (2, 16, 12)
    np.testing.assert_array_equal(half, np.rint(full.reshape(4, 32, 2, 25, 2).mean(axis=(2, 4))))
    blocks = half[:, :, :24].reshape(2, 2, 16, 2, 12, 2).mean(axis=(1, 3, 5))
    np.testing.assert_array_equal(quarter, np.rint(blocks))


def test_inpaint_refuses_a_multiscale_layer_with_a_message(make_napari_viewer, qtbot, errors):
    _, noisy = _blobs((64, 64))
    viewer = make_napari_viewer()
    src = viewer.add_image([noisy, noisy[::2, ::2]], multiscale=True, name="pyramid", contrast_limits=(0, 1))
    labels = np.zeros((64, 64), np.uint8)
    labels[10:20, 10:20] = 1
    viewer.add_labels(labels, name="hole")
    _, widget = viewer.window.add_plugin_dock_widget(PLUGIN, "Inpaint")
    widget.image.value = src
    widget.mask.value = viewer.layers["hole"]
    assert press(qtbot, viewer, widget, widget.run_button, timeout=TIMEOUT) == []
    assert errors and "multiscale" in errors[-1]


def test_strength_scales_the_librarys_choice_for_a_volume_under_photon_noise(make_napari_viewer, qtbot, errors):
    """The strength multiplies the lam the library chooses for the volume, under either noise model."""
    clean, noisy = _blobs((16, 48, 48), sigma=0.0)
    noisy = (np.random.default_rng(4).poisson(40 * clean) / 40).astype(np.float32)
    viewer = make_napari_viewer()
    src = viewer.add_image(noisy, name="photons")
    widget = dock(viewer, qtbot, DENOISE, timeout=TIMEOUT)
    widget.image.value = src
    widget.process.value = True
    widget.noise.value = "poisson-gaussian"
    widget.gain.value = 1 / 40
    widget.multiplier.value = 2.0
    [out] = press(qtbot, viewer, widget, widget.apply_button, timeout=TIMEOUT)
    assert not errors
    sigma = out.metadata["restore"]["noise"]["read_noise_sigma"]
    kw = {"axes": (0, 1, 2), "noise": "poisson-gaussian", "gain": 1 / 40, "sigma": sigma}
    expected = restore.denoise_wavelet_tree(noisy, strength=2.0, cycle_spins=widget.cycle_spins.value, **kw)
    np.testing.assert_allclose(out.data, expected.astype(np.float32), rtol=1e-5, atol=1e-6)
    assert out.metadata["restore"]["params"]["multiplier"] == 2.0


def test_a_lazy_layer_takes_the_strength_as_the_library_does(make_napari_viewer, qtbot, errors):
    """Dask blocks choose their own lam: the library's strength scales each, as in memory."""
    _, noisy = _blobs((4, 64, 64))
    viewer = make_napari_viewer()
    src = viewer.add_image(da.from_array(noisy, chunks=(1, 64, 64)), name="lazy", contrast_limits=(0, 1))
    widget = dock(viewer, qtbot, DENOISE, timeout=TIMEOUT)
    widget.image.value = src
    widget.multiplier.value = 1.5
    [out] = press(qtbot, viewer, widget, widget.apply_button, timeout=TIMEOUT)
    assert not errors and isinstance(out.data, da.Array)
    expected = restore.denoise_wavelet_tree(noisy, strength=1.5, cycle_spins=widget.cycle_spins.value)
    np.testing.assert_allclose(np.asarray(out.data), expected, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------
# The sample and the library's defaults
# ---------------------------------------------------------------------------


def test_nuclei_sample_is_the_poisson_gaussian_protocol_and_ships_with_the_package():
    import fnmatch
    from pathlib import Path

    import tomllib
    from restore_napari import _sample_data

    [(noisy, meta, kind)] = _sample_data.noisy_nuclei_volume()
    clean = _sample_data.clean_nuclei()
    assert kind == "image" and noisy.dtype == np.float32 and noisy.shape == clean.shape == (32, 128, 128)
    rng = np.random.default_rng(3)
    expected = rng.poisson(10 * clean) / 10 + 0.02 * rng.standard_normal(clean.shape)
    np.testing.assert_array_equal(noisy, expected.astype(np.float32))  # peak 10 photons, read noise 0.02, seed 3
    assert meta["metadata"]["gain"] == 0.1 and meta["metadata"]["read_noise"] == 0.02
    root = Path(__file__).resolve().parents[1]
    data = root / "plugin" / "data" / "nuclei_32x128x128.npz"
    assert data.stat().st_size < 1_000_000
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert any(fnmatch.fnmatch(data.name, p) for p in patterns["restore_napari.data"])  # in the wheel


def test_widget_defaults_are_the_librarys(make_napari_viewer, qtbot):
    import inspect

    def defaults(fn):
        return {k: p.default for k, p in inspect.signature(fn).parameters.items()}

    viewer = make_napari_viewer()
    denoise = dock(viewer, qtbot, DENOISE, timeout=TIMEOUT)
    _, inpaint = viewer.window.add_plugin_dock_widget(PLUGIN, "Inpaint")
    _, learn = viewer.window.add_plugin_dock_widget(PLUGIN, "Learn dictionary")
    d = defaults(restore.denoise_wavelet_tree)
    assert (denoise.wavelet.value, denoise.penalty.value, denoise.cycle_spins.value, denoise.penalize_approx.value,
            denoise.noise.value) == (d["wavelet"], d["penalty"], d["cycle_spins"], d["penalize_approx"], d["noise"])
    d = defaults(restore.inpaint)
    assert (inpaint.patch_size.value, inpaint.stride.value or None, inpaint.n_passes.value) == (
        d["patch_size"], d["stride"], d["n_passes"])  # 0 shows the library's None: "the patch size"
    d = defaults(restore.learn_dictionary)
    assert (tuple(int(b) for b in learn.branching.value.split()), learn.patch_size.value, learn.lam.value,
            learn.n_patches.value, learn.epochs.value) == (
        tuple(d["branching"]), d["patch_size"], d["lam"], d["n_patches"], d["n_epochs"])
    assert learn.n_atoms.value == restore.Tree.balanced(d["branching"]).n_vars


def test_changing_the_noise_model_sets_sigma_back_to_automatic(make_napari_viewer, qtbot, errors):
    """A σ estimated under Gaussian noise is not the read noise of the Poisson-Gaussian model."""
    viewer = make_napari_viewer()
    widget = dock(viewer, qtbot, DENOISE, timeout=TIMEOUT)
    widget.image.value = viewer.add_image(_blobs((64, 64))[1], name="photo")
    press(qtbot, viewer, widget, widget.estimate, timeout=TIMEOUT)
    assert widget.sigma_auto.value is False and widget.sigma.value > 0
    widget.noise.value = "poisson-gaussian"
    assert widget.sigma_auto.value is True and widget.params().sigma is None and not errors


def test_volume_mode_and_noise_model_are_remembered(make_napari_viewer, qtbot, errors):
    viewer = make_napari_viewer()
    viewer.add_image(_blobs((32, 32))[1], name="photo")  # first in the list, but 2-D
    stack = viewer.add_image(_blobs((8, 32, 32))[1], name="stack")
    viewer.layers.selection.active = stack
    widget = dock(viewer, qtbot, DENOISE, timeout=TIMEOUT)
    widget.process.value = True
    widget.noise.value = "poisson-gaussian"
    widget.gain.value = 0.25
    again = dock(viewer, qtbot, DENOISE, timeout=TIMEOUT)  # a new session's widget, on the selected 3-D layer
    assert (again.process.value, again.noise.value, again.gain.value) == (True, "poisson-gaussian", 0.25)
    assert not errors


def test_a_lazy_volume_result_is_shown_without_computing_in_the_gui_thread(make_napari_viewer, qtbot, errors):
    """Issue 27, item 12: napari computes the slice it shows in the GUI thread. The widget computes that slice's
    blocks in its worker before adding the layer, and the result's blocks keep to the input's chunks along z."""
    import dask

    _, noisy = _blobs((160, 64, 64))
    store = Counting(noisy)
    viewer = make_napari_viewer()
    widget = dock(viewer, qtbot, DENOISE, timeout=TIMEOUT)
    src = viewer.add_image(da.from_array(store, chunks=(16, 32, 32)), name="lazy volume", contrast_limits=(0, 1),
                           axis_labels=("z", "y", "x"), visible=False)  # not shown: every read is the result's
    widget.image.value = src
    assert widget.process.value is True  # its axes say z, y, x
    widget.lam_mode.value = "rule"
    viewer.dims.set_current_step(0, 100)
    with dask.config.set(scheduler="synchronous"):  # every Dask task in the thread that asks for it
        [out] = press(qtbot, viewer, widget, widget.apply_button, timeout=TIMEOUT)
        qtbot.wait(300)  # napari draws the result's current slice
        assert store.reads and not store.in_gui  # computed in the worker, not in the GUI thread
        assert not errors and isinstance(out.data, da.Array) and max(out.data.chunks[0]) <= 16
        expected = restore.denoise_wavelet_tree(da.from_array(noisy, chunks=(16, 32, 32)), axes=(0, 1, 2),
                                                lam="rule", sliced_axes=(0,))[100].compute()
        np.testing.assert_allclose(np.asarray(out.data[100]), expected, rtol=1e-5, atol=1e-6)
        # the noise estimate reads the library's sample (this small volume whole: under its budget), the shown
        # slice its blocks: a chunk and its overlaps, not the whole
        sample = restore.noise_sample(da.from_array(noisy, chunks=(16, 32, 32)), axes=(0, 1, 2)).size
        assert sum(store.reads) - sample < noisy.size
