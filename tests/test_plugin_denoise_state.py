"""Issue 27, items 11, 13, 15-17: what the Denoise widget shows and remembers while it works (real napari, Xvfb)."""

import threading

import numpy as np
import pytest
from napari_helpers import DENOISE, PLUGIN, TIMEOUT, cancel, dock, press

pytest.importorskip("napari")
pytest.importorskip("pytestqt")

import restore  # noqa: E402

pytestmark = pytest.mark.gui


def _noisy(shape, seed=0, sigma=0.1):
    rng = np.random.default_rng(seed)
    grids = np.meshgrid(*[np.arange(n, dtype=np.float32) for n in shape], indexing="ij")
    clean = 0.5 + 0.3 * np.sin(grids[-1] / 7.0) * np.cos(grids[-2] / 9.0) * np.cos(grids[0] / 5.0)
    return (clean + sigma * rng.standard_normal(shape)).astype(np.float32)


def _photons(shape, seed=1, photons=20.0):
    clean = 0.5 + 0.4 * np.sin(np.indices(shape).sum(axis=0) / 6.0)
    return (np.random.default_rng(seed).poisson(photons * clean) / photons).astype(np.float32)


# ---------------------------------------------------------------------------
# Item 11: the bar moves from the start
# ---------------------------------------------------------------------------


def test_the_bar_is_busy_until_the_librarys_first_report_then_shows_real_fractions(make_napari_viewer, qtbot,
                                                                                   errors, monkeypatch):
    """On a 4096 x 4096 plane the library builds its wavelet tree for seconds before its first report: the bar
    must not sit at 0 meanwhile. A library call that reports late stands in for it."""
    viewer = make_napari_viewer()
    widget = dock(viewer, qtbot, DENOISE)
    widget.image.value = viewer.add_image(_noisy((256, 256)), name="plane")
    widget.noise.value = "gaussian"  # no noise estimate first: choose_lam is the first library call
    release, real = threading.Event(), restore.choose_lam

    def late(*args, progress=None, **kwargs):
        release.wait(20)
        return real(*args, progress=progress, **kwargs)

    monkeypatch.setattr(restore, "choose_lam", late)
    bar = widget.progress.native
    seen = []
    widget.progress.changed.connect(lambda v: seen.append((v, bar.maximum())))
    widget.apply_button.clicked.emit()
    qtbot.waitUntil(lambda: bar.maximum() == 0 or widget.progress.value > 0, timeout=1000)  # busy: it moves
    assert widget.busy and bar.minimum() == bar.maximum() == 0
    release.set()
    qtbot.waitUntil(lambda: not widget.busy, timeout=TIMEOUT)
    assert "plane [tree_l2]" in viewer.layers and not errors
    assert any(v > 0 and m == widget.progress.max > 0 for v, m in seen)  # then real fractions


# ---------------------------------------------------------------------------
# Item 15: Cancel stops the photon-noise estimate itself
# ---------------------------------------------------------------------------


def _held_estimate(running, proceed, outcome):
    """``restore.estimate_noise`` that sets ``running``, waits for ``proceed``, says in ``outcome`` how it ended."""
    real = restore.estimate_noise

    def held(*args, progress=None, **kwargs):
        running.set()
        proceed.wait(20)
        try:
            out = real(*args, progress=progress, **kwargs)
        except restore.Cancelled:
            outcome.append("stopped")
            raise
        outcome.append("ran to its end")
        return out

    return held


@pytest.mark.parametrize("started", ["by the run", "when the layer was chosen"])
def test_cancel_stops_the_photon_noise_estimate_itself(started, make_napari_viewer, qtbot, errors, monkeypatch):
    viewer = make_napari_viewer()
    widget = dock(viewer, qtbot, DENOISE)
    widget.noise.value = "poisson-gaussian"  # (kept for the next layer, as a user's choice)
    running, proceed, outcome = threading.Event(), threading.Event(), []
    watched = _held_estimate(running, proceed, outcome)  # Cancel comes while the estimate runs

    if started == "by the run":  # the estimate started ahead fails (a read error, say): the run starts its own
        failed, held = [], watched

        def watched(*args, **kwargs):
            if not failed:
                failed.append(1)
                raise OSError("a transient read error")
            return held(*args, **kwargs)

    monkeypatch.setattr(restore, "estimate_noise", watched)
    layer = viewer.add_image(_photons((16, 128, 128)), name="photons")
    widget.image.value = layer
    if started == "by the run":
        qtbot.waitUntil(lambda: bool(failed), timeout=TIMEOUT)
    else:
        qtbot.waitUntil(running.is_set, timeout=TIMEOUT)
    widget.apply_button.clicked.emit()
    ahead = widget._lam_cache.get(((layer.unique_id, id(layer.data)), "noise", "poisson-gaussian"))
    qtbot.waitUntil(lambda: running.is_set() and (started == "by the run" or ahead.adopted), timeout=TIMEOUT)
    cancel(qtbot, widget)
    proceed.set()
    qtbot.waitUntil(lambda: bool(outcome), timeout=TIMEOUT)
    assert outcome == ["stopped"] and [layer.name for layer in viewer.layers] == ["photons"] and not errors


def test_the_layers_noise_model_is_estimated_once_chosen_and_its_first_preview_does_not_wait(
        make_napari_viewer, qtbot, errors, monkeypatch):
    """Under noise 'auto' the first preview of a layer waited for the layer's noise estimate (1.4-1.7x the former
    final answer zoomed out, benchmarks/bench_preview_ab.py): it starts when the layer is chosen, once."""
    viewer = make_napari_viewer()
    widget = dock(viewer, qtbot, DENOISE)
    calls, real = [], restore.estimate_noise

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(restore, "estimate_noise", counted)
    assert widget.noise.value == "auto"
    layer = viewer.add_image(_noisy((256, 256)), name="plane")
    widget.image.value = layer
    qtbot.waitUntil(lambda: calls == [1], timeout=TIMEOUT)  # no preview asked for yet
    widget.preview.value = True
    qtbot.waitUntil(lambda: "plane [preview]" in viewer.layers and not widget.busy, timeout=TIMEOUT)
    assert calls == [1] and not errors
    assert "provisional" not in widget.info.value and "σ" in widget.info.value
    shown = np.asarray(viewer.layers["plane [preview]"].data).copy()
    widget.preview.value = False
    widget.apply_button.clicked.emit()
    qtbot.waitUntil(lambda: "plane [tree_l2]" in viewer.layers and not widget.busy, timeout=TIMEOUT)
    assert calls == [1] and not errors  # Apply used it too
    np.testing.assert_allclose(np.asarray(viewer.layers["plane [tree_l2]"].data), shown, atol=1e-6)


def test_an_estimate_started_for_a_layer_is_stopped_when_another_is_chosen(make_napari_viewer, qtbot, errors,
                                                                          monkeypatch):
    viewer = make_napari_viewer()
    widget = dock(viewer, qtbot, DENOISE)
    second = viewer.add_image(_noisy((256, 256), 1), name="b")
    running, proceed, outcome = threading.Event(), threading.Event(), []
    watched = _held_estimate(running, proceed, outcome)

    widget.image.value = second
    qtbot.waitUntil(lambda: widget._lam_cache.get(((second.unique_id, id(second.data)), "noise", "auto"))
                    is not None, timeout=TIMEOUT)
    monkeypatch.setattr(restore, "estimate_noise", watched)
    widget.image.value = viewer.add_image(_noisy((256, 256)), name="a")
    qtbot.waitUntil(running.is_set, timeout=TIMEOUT)
    widget.image.value = second  # its estimate is kept: nothing more to run
    proceed.set()
    qtbot.waitUntil(lambda: bool(outcome), timeout=TIMEOUT)
    assert outcome == ["stopped"] and not errors


def test_the_photon_noise_estimate_names_its_layer_only_when_there_is_one():
    from restore_napari import _denoise, _runner

    data = _photons((8, 64, 64))
    source = _denoise.Source(None, data, False, data.dtype, ("no layer", id(data)))
    params = _denoise.DenoiseParams(noise="poisson-gaussian", volume=True)
    seen, noise = _runner.drive(_denoise.photon_model(_runner.Control(), source, params))
    texts = {v.text for v in seen if isinstance(v, _runner.Progress) and v.text}
    assert texts == {"Estimating the photon noise\u2026"} and noise.gain > 0
    from napari.layers import Image

    seen, _ = _runner.drive(_denoise.photon_model(_runner.Control(), _denoise.Source.of(Image(data, name="cells")),
                                                  params))
    assert {v.text for v in seen if isinstance(v, _runner.Progress) and v.text} == {
        "Estimating the photon noise of 'cells'\u2026"}


# ---------------------------------------------------------------------------
# Item 16: the bar never goes back, the info line is this layer's, the record holds the numbers used
# ---------------------------------------------------------------------------


def test_a_photon_noise_volume_run_never_moves_the_bar_back_and_records_the_lam_used(make_napari_viewer, qtbot,
                                                                                      errors):
    viewer = make_napari_viewer()
    viewer.open_sample(PLUGIN, "noisy_nuclei_volume")
    src = viewer.layers["nuclei (noisy)"]
    widget = dock(viewer, qtbot, DENOISE)
    widget.image.value = src
    widget.process.value = True
    widget.noise.value = "poisson-gaussian"
    seen = []
    widget.progress.changed.connect(seen.append)
    [out] = press(qtbot, viewer, widget, widget.apply_button)
    assert not errors
    values = [v for v in seen if v > 0]
    assert values and values == sorted(values)  # the estimate's part, then the volume's: never 100 % then 0
    record = out.metadata["restore"]
    noise = record["noise"]
    kw = {"axes": (0, 1, 2), "noise": "poisson-gaussian", "gain": noise["gain"], "sigma": noise["read_noise_sigma"]}
    choice = restore.choose_lam(src.data, **kw)
    assert record["lam"] == [pytest.approx(list(choice.lam))] and record["sigma"] == [list(choice.sigma)]
    assert "stabilised" in record["lam_units"]
    assert f"{choice.lam[0]:.4g}" in widget.info.value and "gain" in widget.info.value

    # a Gaussian volume records its numbers too
    widget.noise.value = "gaussian"
    widget.lam_mode.value = "rule"
    press(qtbot, viewer, widget, widget.apply_button)  # replaces the result
    record = out.metadata["restore"]
    assert record["params"]["noise"] == "gaussian" and not errors
    choice = restore.choose_lam(src.data, axes=(0, 1, 2), method="rule", noise="gaussian")
    assert record["lam"] == [pytest.approx(list(choice.lam))] and record["sigma"] == [pytest.approx(list(choice.sigma))]


def test_the_info_line_never_shows_another_layers_numbers(make_napari_viewer, qtbot, errors):
    viewer = make_napari_viewer()
    first = viewer.add_image(_photons((8, 64, 64), seed=1, photons=20.0), name="first")
    second = viewer.add_image(_photons((8, 64, 64), seed=2, photons=5.0), name="second")
    widget = dock(viewer, qtbot, DENOISE)
    widget.image.value = first
    widget.noise.value = "poisson-gaussian"
    widget.lam_mode.value = "rule"
    press(qtbot, viewer, widget, widget.apply_button)
    shown = widget.info.value
    assert "gain" in shown and not errors
    widget.image.value = second
    widget.apply_button.clicked.emit()
    assert widget.info.value != shown and "gain" not in widget.info.value  # while the second layer runs
    qtbot.waitUntil(lambda: not widget.busy, timeout=TIMEOUT)
    assert "gain" in widget.info.value and widget.info.value != shown and not errors


# ---------------------------------------------------------------------------
# Item 13: volume mode and noise model per layer, from the layer's axes and metadata, between sessions
# ---------------------------------------------------------------------------


def test_volume_mode_is_kept_per_layer_when_another_layer_is_chosen(make_napari_viewer, qtbot, errors):
    viewer = make_napari_viewer()
    photo = viewer.add_image(_noisy((64, 64)), name="photo")
    stack = viewer.add_image(_noisy((8, 64, 64)), name="stack")
    widget = dock(viewer, qtbot, DENOISE)
    widget.image.value = stack
    widget.process.value = True
    widget.image.value = photo  # a plane: plane by plane is all it offers
    assert widget.process.value is False
    widget.image.value = stack
    assert widget.process.value is True
    again = dock(viewer, qtbot, DENOISE)  # a new session's widget, on another unlabelled stack: the last choice
    again.image.value = viewer.add_image(_noisy((8, 64, 64), seed=3), name="other stack")
    assert again.process.value is True and not errors


def test_layers_start_as_their_axes_and_metadata_say(make_napari_viewer, qtbot, errors):
    viewer = make_napari_viewer()
    widget = dock(viewer, qtbot, DENOISE)
    viewer.open_sample(PLUGIN, "noisy_nuclei_volume")  # axes z, y, x; metadata: Poisson-Gaussian
    widget.image.value = viewer.layers["nuclei (noisy)"]
    assert widget.process.value is True and widget.noise.value == "poisson-gaussian"
    movie = viewer.add_image(_noisy((8, 64, 64)), name="movie", axis_labels=("t", "y", "x"))
    widget.image.value = movie
    assert widget.process.value is False and widget.noise.value == "auto"  # a time series: plane by plane
    widget.process.value = True  # allowed, but said why it is unusual
    assert not widget.info.native.isHidden() and "time" in widget.info.value
    widget.image.value = viewer.layers["nuclei (noisy)"]
    assert widget.process.value is True and widget.noise.value == "poisson-gaussian" and "time" not in widget.info.value
    widget.noise.value = "gaussian"  # the user's choice for this layer wins over its metadata
    widget.image.value = movie
    widget.image.value = viewer.layers["nuclei (noisy)"]
    assert widget.noise.value == "gaussian" and not errors


@pytest.mark.parametrize("label", ["c", "ch", "channel", "T", "time", "angle"])
def test_a_labelled_axis_other_than_depth_starts_plane_by_plane_whatever_the_last_choice(make_napari_viewer, qtbot,
                                                                                         errors, label):
    """A c, y, x stack smoothed as a volume mixes its channels: only depth (or napari's unnamed axes) may start so."""
    viewer = make_napari_viewer()
    widget = dock(viewer, qtbot, DENOISE)
    widget.image.value = viewer.add_image(_noisy((8, 64, 64)), name="stack")
    widget.process.value = True  # the user's last choice: volume
    widget.image.value = viewer.add_image(_noisy((3, 64, 64), seed=4), name="labelled",
                                          axis_labels=(label, "y", "x"))
    assert widget.process.value is False
    widget.process.value = True  # allowed, but said why it is unusual
    assert not widget.info.native.isHidden() and repr(label.lower()) in widget.info.value
    widget.image.value = viewer.add_image(_noisy((8, 64, 64), seed=5), name="unnamed")  # napari's '-3', '-2', '-1'
    assert widget.process.value is True and "Note" not in widget.info.value and not errors


def test_the_choice_for_a_file_is_remembered_between_sessions(make_napari_viewer, qtbot, errors, tmp_path,
                                                                monkeypatch):
    from restore_napari import _denoise

    path = tmp_path / "stack.npy"
    np.save(path, _noisy((8, 64, 64)))
    viewer = make_napari_viewer()
    widget = dock(viewer, qtbot, DENOISE)
    [layer] = viewer.open(str(path))
    widget.image.value = layer
    widget.process.value = True  # for this file
    widget.image.value = viewer.add_image(_noisy((8, 64, 64), seed=5), name="other")
    widget.process.value = False  # the last choice, on another layer
    monkeypatch.setattr(_denoise, "_LAYER_CHOICES", {}, raising=False)  # a new session: nothing in memory
    again = dock(viewer, qtbot, DENOISE)
    [reopened] = viewer.open(str(path))
    again.image.value = reopened
    assert again.process.value is True and not errors


# ---------------------------------------------------------------------------
# Item 17: the volume preview reuses its sub-volume
# ---------------------------------------------------------------------------


def test_the_volume_preview_reuses_its_sub_volume_while_the_plane_stays_well_inside_it(make_napari_viewer, qtbot,
                                                                                        errors, monkeypatch):
    """Reused while the plane lies a margin inside the sub-volume (there the preview is Apply's result); near the
    sub-volume's edge, where its boundary shows, a sub-volume around the plane is computed; at the volume's own
    ends the edge is the volume's, as in Apply, and the sub-volume is kept."""
    viewer = make_napari_viewer()
    widget = dock(viewer, qtbot, DENOISE)
    noisy = _noisy((48, 96, 96))
    widget.image.value = viewer.add_image(noisy, name="volume")
    widget.process.value = True
    widget.lam_mode.value = "rule"
    viewer.dims.set_current_step(0, 20)
    calls, real = [], restore.denoise_wavelet_tree
    monkeypatch.setattr(restore, "denoise_wavelet_tree", lambda *a, **k: (calls.append(1), real(*a, **k))[1])
    widget.preview.value = True
    qtbot.waitUntil(lambda: "volume [preview]" in viewer.layers and not widget.busy, timeout=TIMEOUT)
    preview = viewer.layers["volume [preview]"]

    def step(z):
        """Show plane ``z``; return whether its preview was computed afresh, and the preview's planes."""
        n = len(calls)
        viewer.dims.set_current_step(0, z)
        qtbot.waitUntil(lambda: preview.translate[0] == z and not widget.busy, timeout=TIMEOUT)
        z0, z1 = preview.metadata["restore"]["volume_planes"]
        expected = real(noisy[z0:z1, r0:r1, c0:c1], axes=(0, 1, 2), lam="rule")[z - z0]
        np.testing.assert_allclose(preview.data[0], expected, rtol=1e-5, atol=1e-6)  # that sub-volume's plane
        return len(calls) > n, (z0, z1)

    z0, z1 = preview.metadata["restore"]["volume_planes"]
    r0, r1, c0, c1 = preview.metadata["restore"]["region"]
    margin = int(np.ceil(widget.PREVIEW_EDGE_SHARE * (z1 - z0)))
    assert calls and 0 < z0 < 20 < z1 < noisy.shape[0] and 0 < margin < 20 - z0
    assert step(21) == (False, (z0, z1))  # well inside: the same sub-volume, not computed again
    assert step(z0 + margin) == (False, (z0, z1))  # still a margin inside
    z = z0 + margin - 1  # nearer its edge than the margin: a sub-volume around the plane
    fresh, (n0, n1) = step(z)
    assert fresh and (n0 == 0 or n0 <= z - margin) and n1 >= z + margin
    fresh, (f0, f1) = step(40)  # outside it: a new sub-volume, here up to the volume's end
    assert fresh and f1 == noisy.shape[0] and f0 > 0
    assert step(f1 - 1) == (False, (f0, f1))  # the volume's own end: kept
    fresh, _ = step(f0 + 1)  # near its other edge (not the volume's): computed afresh
    assert fresh and not errors
