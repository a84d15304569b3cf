"""Issue 27, item 15: removing the input layer mid-run cancels the run (real napari, Xvfb).

The job ran to its end and then said "Done: ." with nothing added. Removing
the input must stop the run within about a second, say why, add no layer,
and stop the library call too.
"""

import time

import numpy as np
import pytest
from napari_helpers import CANCEL_BOUND_S, DENOISE, INPAINT, LEARN, TIMEOUT, dock, library_threads

pytest.importorskip("napari")
pytest.importorskip("pytestqt")

pytestmark = pytest.mark.gui


@pytest.fixture
def notices():
    """The text of every notification napari records from here on (its own list, kept as shown)."""
    from napari.utils.notifications import notification_manager

    start = len(notification_manager.records)
    return lambda: [str(n.message) for n in notification_manager.records[start:]]

#: Side of the inputs (pixels): each job below takes several seconds, long enough to remove its input mid-run.
SIDE = 512


def _noisy(n, seed=0):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[:n, :n].astype(np.float32)
    return (100 + 50 * np.sin(x / 17) * np.cos(y / 23) + 10 * rng.standard_normal((n, n))).astype(np.float32)


def _denoise(viewer, qtbot):
    widget = dock(viewer, qtbot, DENOISE)
    widget.image.value = viewer.add_image(_noisy(4 * SIDE), name="input")
    widget.cycle_spins.value = 8
    return widget


def _inpaint(viewer, qtbot):
    viewer.add_image(_noisy(SIDE), name="input")
    mask = np.zeros((SIDE, SIDE), np.uint8)
    mask[::7, :] = 1  # scattered lines over the whole plane: every patch has work
    viewer.add_labels(mask, name="lines")
    widget = dock(viewer, qtbot, INPAINT)
    widget.image.value = viewer.layers["input"]
    widget.mask.value = viewer.layers["lines"]
    widget.n_passes.value = 10
    return widget


def _learn(viewer, qtbot):
    widget = dock(viewer, qtbot, LEARN)
    widget.image.value = viewer.add_image(_noisy(SIDE), name="input")
    widget.n_patches.value = 10_000
    widget.epochs.value = 2
    return widget


@pytest.mark.parametrize("make", [_denoise, _inpaint, _learn], ids=["denoise", "inpaint", "learn"])
def test_removing_the_input_mid_run_cancels_at_once_and_says_so(make_napari_viewer, qtbot, errors, notices, make):
    viewer = make_napari_viewer()
    widget = make(viewer, qtbot)
    before = [layer.name for layer in viewer.layers]
    widget.runner.run_button.clicked.emit()
    t0 = time.perf_counter()
    qtbot.waitUntil(lambda: widget.progress.value > widget.progress.min or time.perf_counter() - t0 > 2.0,
                    timeout=TIMEOUT)
    assert widget.busy  # still running: the removal below comes mid-run
    t0 = time.perf_counter()
    viewer.layers.remove("input")
    assert not widget.busy  # stopped as the layer went, not at the job's next step
    assert time.perf_counter() - t0 < CANCEL_BOUND_S  # napari's own work removing the layer included
    status = widget.status.value
    assert status.startswith("Cancelled") and "'input'" in status and "removed" in status
    qtbot.waitUntil(lambda: not library_threads(), timeout=TIMEOUT)
    assert time.perf_counter() - t0 < CANCEL_BOUND_S  # the library call stops too
    qtbot.wait(200)  # anything the ended job still had to say has arrived
    assert [layer.name for layer in viewer.layers] == [n for n in before if n != "input"]  # nothing added
    assert widget.status.value == status and "Done" not in widget.status.value
    assert widget.runner.run_button.enabled and not widget.cancel_button.enabled
    assert [n for n in notices() if "removed" in n] == [f"restore-tree: {status}"]  # said once, as a notification
    assert not errors


def test_removing_another_layer_mid_run_changes_nothing(make_napari_viewer, qtbot, errors):
    viewer = make_napari_viewer()
    widget = dock(viewer, qtbot, DENOISE)
    src = viewer.add_image(_noisy(256), name="input")
    other = viewer.add_image(_noisy(64, seed=1), name="other")
    widget.image.value = src
    widget.cycle_spins.value = 8
    widget.runner.run_button.clicked.emit()
    assert widget.busy
    viewer.layers.remove(other)
    qtbot.waitUntil(lambda: not widget.busy, timeout=TIMEOUT)
    assert [layer.name for layer in viewer.layers] == ["input", "input [tree_l2]"]
    assert widget.status.value.startswith("Done") and not errors


@pytest.mark.parametrize("show", [False, True], ids=["hidden", "shown"])
def test_closing_the_viewer_mid_run_raises_nothing(make_napari_viewer, qtbot, errors, notices, show):
    """napari's close removes the layers one by one before the window goes: the job is cancelled quietly.

    The user closed the viewer and removed nothing: no notification says an input was removed.
    """
    viewer = make_napari_viewer(show=show)
    widget = _inpaint(viewer, qtbot)
    widget.runner.run_button.clicked.emit()
    assert widget.busy
    viewer.close()
    qtbot.waitUntil(lambda: not library_threads(), timeout=TIMEOUT)
    qtbot.wait(300)  # anything deferred to the event loop has run
    assert not widget.busy and not errors
    assert not [n for n in notices() if "removed" in n or "Cancelled" in n]


def _photon_layer(viewer, qtbot):
    """The Denoise widget on a layer of photon counts, its noise estimate (started as the model is chosen) running."""
    widget = dock(viewer, qtbot, DENOISE)
    rng = np.random.default_rng(0)
    counts = rng.poisson(np.full((4 * SIDE, 4 * SIDE, 3), 40.0)).astype(np.float32)  # a large colour plane: seconds
    widget.image.value = viewer.add_image(counts, name="input", rgb=True)
    widget.noise.value = "poisson-gaussian"
    assert library_threads()
    return widget


def test_removing_the_input_during_a_photon_noise_estimate_cancels_it(make_napari_viewer, qtbot, errors):
    viewer = make_napari_viewer()
    widget = _photon_layer(viewer, qtbot)
    gain, sigma = widget.gain.value, widget.sigma.value
    job = widget.estimate_sigma()
    assert job is not None and widget.busy
    t0 = time.perf_counter()
    viewer.layers.remove("input")
    assert not widget.busy and time.perf_counter() - t0 < CANCEL_BOUND_S
    qtbot.waitUntil(lambda: not library_threads(), timeout=TIMEOUT)
    assert time.perf_counter() - t0 < CANCEL_BOUND_S  # the estimate stopped too, started ahead or by the button
    qtbot.wait(300)
    assert (widget.gain.value, widget.sigma.value) == (gain, sigma)  # no estimate of a layer that is gone
    assert "Estimated" not in widget.status.value and "removed" in widget.status.value
    assert not errors


def test_removing_a_layer_stops_the_noise_estimate_started_for_it(make_napari_viewer, qtbot, errors):
    """Choosing the photon model starts the layer's estimate ahead of any run; the layer gone, it stops too."""
    viewer = make_napari_viewer()
    widget = _photon_layer(viewer, qtbot)
    t0 = time.perf_counter()
    viewer.layers.remove("input")
    assert widget.image.value is None and not widget.busy
    qtbot.waitUntil(lambda: not library_threads(), timeout=TIMEOUT)
    assert time.perf_counter() - t0 < CANCEL_BOUND_S  # not run to its end on data nobody can use
    assert not errors
