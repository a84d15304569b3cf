"""Issue 18, item 4: at home in napari (real napari, Xvfb)."""

import numpy as np
import pytest
from napari_helpers import DENOISE, INPAINT, LEARN, PLUGIN, TIMEOUT, dock

pytest.importorskip("napari")
pytest.importorskip("pytestqt")

pytestmark = pytest.mark.gui

WIDGETS = (DENOISE, INPAINT, LEARN)
#: Height a 1080p screen leaves to napari's docks (title bar, menu and status bar taken off).
DOCK_AREA_PX = 900


def _noise(shape, seed=0):
    return np.random.default_rng(seed).random(shape).astype(np.float32)


def _choices(combo):
    return [c for c in combo.choices if c is not None]


def test_image_boxes_start_on_the_selected_layer_and_follow_the_selection(make_napari_viewer, qtbot):
    viewer = make_napari_viewer()
    a = viewer.add_image(_noise((32, 32), 1), name="a")
    b = viewer.add_image(_noise((32, 32), 2), name="b")
    mask = viewer.add_labels(np.zeros((32, 32), np.uint8), name="mask")  # selected: the last layer added
    first = dock(viewer, qtbot, DENOISE)
    assert first.image.value is a  # the selection is no image: the first suitable layer
    viewer.layers.selection.active = b
    widgets = [first] + [dock(viewer, qtbot, name) for name in (INPAINT, LEARN)]
    for widget in widgets:
        assert widget.image.value is b  # the selected layer
    viewer.layers.selection.active = a
    for widget in widgets:
        assert widget.image.value is a  # follows it
    viewer.layers.selection.active = mask  # not an image: the image boxes stay, the mask box follows
    for widget in widgets:
        assert widget.image.value is a
    assert widgets[1].mask.value is mask


def test_the_preview_layer_is_never_offered_as_an_input(make_napari_viewer, qtbot):
    viewer = make_napari_viewer()
    src = viewer.add_image(_noise((64, 64)), name="noisy")
    denoise, inpaint, learn = (dock(viewer, qtbot, name) for name in WIDGETS)
    denoise.image.value = src
    denoise.preview.value = True
    qtbot.waitUntil(lambda: "noisy [preview]" in viewer.layers and not denoise.busy, timeout=TIMEOUT)
    viewer.layers.selection.active = viewer.layers["noisy [preview]"]
    for widget in (denoise, inpaint, learn):
        assert [layer.name for layer in _choices(widget.image)] == ["noisy"]
        assert widget.image.value is src
    denoise.preview.value = False


def _magicgui_widgets(container):
    from magicgui.widgets import Container

    for w in container:
        if isinstance(w, Container):
            yield from _magicgui_widgets(w)
        else:
            yield w


def test_docks_fit_a_1080p_screen_with_the_rest_under_advanced(make_napari_viewer, qtbot):
    viewer = make_napari_viewer(show=True)
    docks = []
    for name in WIDGETS:
        dock_widget, widget = viewer.window.add_plugin_dock_widget(PLUGIN, name)
        docks.append(dock_widget)
        assert widget.advanced.collapsed  # the rarely changed options are folded away
    qtbot.wait(50)
    heights = [d.sizeHint().height() for d in docks]
    assert sum(heights) <= DOCK_AREA_PX, heights


def test_every_control_has_a_tooltip(make_napari_viewer, qtbot):
    from magicgui.widgets import Label, ProgressBar

    viewer = make_napari_viewer()
    for name in WIDGETS:
        widget = dock(viewer, qtbot, name)
        bare = [w.name or w.label for w in _magicgui_widgets(widget)
                if not isinstance(w, (Label, ProgressBar)) and not w.tooltip]
        assert not bare, f"{name}: no tooltip on {bare}"


def test_values_persist_between_sessions(make_napari_viewer, qtbot):
    viewer = make_napari_viewer()
    denoise, inpaint, learn = (dock(viewer, qtbot, name) for name in WIDGETS)
    denoise.cycle_spins.value = 6
    denoise.penalty.value = "l1"
    inpaint.n_passes.value = 7
    learn.branching.value = "4 2"
    viewer.close()
    viewer = make_napari_viewer()
    denoise, inpaint, learn = (dock(viewer, qtbot, name) for name in WIDGETS)
    assert denoise.cycle_spins.value == 6 and denoise.penalty.value == "l1"
    assert inpaint.n_passes.value == 7 and learn.branching.value == "4 2"


def test_batch_runs_every_selected_image_with_one_progress_bar(make_napari_viewer, qtbot, errors):
    viewer = make_napari_viewer()
    widget = dock(viewer, qtbot, DENOISE)
    layers = [viewer.add_image(100 * _noise((64, 64), k), name=f"img{k}") for k in range(3)]
    viewer.layers.selection = {layers[0], layers[2]}
    widget.all_selected.value = True
    seen = []
    widget.progress.changed.connect(seen.append)
    widget.apply_button.clicked.emit()
    qtbot.waitUntil(lambda: not widget.busy, timeout=TIMEOUT)
    assert not errors
    assert {layer.name for layer in viewer.layers} == {"img0", "img1", "img2", "img0 [tree_l2]", "img2 [tree_l2]"}
    assert seen == sorted(seen)  # one bar over both layers, never going back


def test_batch_inpaints_every_selected_image_under_the_same_mask(make_napari_viewer, qtbot, errors):
    viewer = make_napari_viewer()
    widget = dock(viewer, qtbot, INPAINT)
    images = [viewer.add_image(_noise((48, 48), k), name=f"img{k}") for k in range(2)]
    labels = np.zeros((48, 48), np.uint8)
    labels[10:14, 5:40] = 1
    widget.mask.value = viewer.add_labels(labels, name="scratch")
    widget.n_passes.value = 2
    viewer.layers.selection = set(images)
    widget.all_selected.value = True
    widget.run_button.clicked.emit()
    qtbot.waitUntil(lambda: not widget.busy, timeout=TIMEOUT)
    assert not errors
    for image in images:
        out = viewer.layers[f"{image.name} [inpainted]"]
        np.testing.assert_array_equal(out.data != image.data, labels != 0)


def test_batch_cancel_stops_every_remaining_layer(make_napari_viewer, qtbot, errors):
    viewer = make_napari_viewer()
    widget = dock(viewer, qtbot, DENOISE)
    layers = [viewer.add_image(100 * _noise((1024, 1024), k), name=f"img{k}") for k in range(3)]
    viewer.layers.selection = set(layers)
    widget.all_selected.value = True
    widget.cycle_spins.value = 8
    widget.apply_button.clicked.emit()
    qtbot.waitUntil(lambda: widget.progress.value > widget.progress.min, timeout=TIMEOUT)
    widget.cancel_button.clicked.emit()
    qtbot.waitUntil(lambda: not widget.busy, timeout=TIMEOUT)
    assert len(viewer.layers) < 6 and not errors  # not every layer got its result


def test_compare_shows_input_and_result_side_by_side(make_napari_viewer, qtbot, errors):
    viewer = make_napari_viewer()
    widget = dock(viewer, qtbot, DENOISE)
    src = viewer.add_image(100 * _noise((64, 64)), name="photo")
    other = viewer.add_image(_noise((64, 64), 5), name="other")
    widget.image.value = src
    widget.apply_button.clicked.emit()
    qtbot.waitUntil(lambda: not widget.busy and "photo [tree_l2]" in viewer.layers, timeout=TIMEOUT)
    camera = viewer.scene.camera if hasattr(viewer, "scene") else viewer.camera
    camera.zoom *= 4  # the user had zoomed in on a detail
    view = (tuple(camera.center), camera.zoom)
    widget.compare.clicked.emit()
    assert viewer.canvas.grid.enabled
    assert [layer.name for layer in viewer.layers if layer.visible] == ["photo", "photo [tree_l2]"]
    assert camera.zoom < view[1] / 2  # fitted to show both images whole
    widget.compare.clicked.emit()  # and back as it was
    assert not viewer.canvas.grid.enabled and other.visible and src.visible
    assert (tuple(camera.center), camera.zoom) == view
    assert not errors


def test_learned_dictionaries_belong_to_their_viewer(make_napari_viewer, qtbot, errors):
    first, second = make_napari_viewer(), make_napari_viewer()
    for viewer in (first, second):
        viewer.add_image(_noise((48, 48)), name="texture")
    learn = dock(first, qtbot, LEARN)
    learn.image.value = first.layers["texture"]
    learn.branching.value = "3"
    learn.n_patches.value = 300
    learn.learn_button.clicked.emit()
    qtbot.waitUntil(lambda: not learn.busy and "texture atoms" in first.layers, timeout=TIMEOUT)
    here, there = dock(first, qtbot, INPAINT), dock(second, qtbot, INPAINT)
    here.learned.reset_choices()
    there.learned.reset_choices()
    assert len(there.learned.choices) == len(here.learned.choices) - 1  # not offered in the other viewer
    atoms = first.layers["texture atoms"]
    assert atoms in here.learned.choices
    here.learned.value = atoms
    first.layers.remove(atoms)  # the dictionary goes with its layer
    assert len(here.learned.choices) == len(there.learned.choices) and atoms not in here.learned.choices
    assert not errors


def test_every_widget_reports_errors_as_notifications(make_napari_viewer, qtbot, errors):
    viewer = make_napari_viewer()
    for name in WIDGETS:
        widget = dock(viewer, qtbot, name)
        widget.runner.run_button.clicked.emit()  # no image layer at all
        qtbot.waitUntil(lambda widget=widget: not widget.busy, timeout=TIMEOUT)
        assert len(errors) == 1 and "image" in str(errors[0]), name
        assert widget.status.value == errors.pop()  # repeated in the widget
    assert [layer.name for layer in viewer.layers] == []
