"""Issue 18, item 1: the Inpaint widget changes exactly the pixels the user marked (real napari, Xvfb).

Each test presses the widget as a user would and checks which pixels of the
result differ from the input. The images are 48 x 48 noise, too small for the
dictionary's adaptation, so each run takes a fraction of a second; every
masked pixel of noise changes when it is inpainted, and known pixels never do.
"""

import numpy as np
import pytest
from napari_helpers import PLUGIN

pytest.importorskip("napari")
pytest.importorskip("pytestqt")

pytestmark = pytest.mark.gui

TIMEOUT = 30_000  # ms
SIZE = 48


@pytest.fixture
def inpaint(make_napari_viewer, qtbot):
    viewer = make_napari_viewer()
    _, widget = viewer.window.add_plugin_dock_widget(PLUGIN, "Inpaint")
    widget.n_passes.value = 2
    yield viewer, widget
    qtbot.waitUntil(lambda: not widget.busy, timeout=TIMEOUT)


def _noise(shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).random(shape).astype(dtype)


def _run(qtbot, viewer, widget, image, mask):
    """Choose the image and the mask, press Inpaint, wait; return the result layer (None if none came)."""
    from napari.layers import Image

    images = [layer for layer in viewer.layers if isinstance(layer, Image)]
    before = {layer.name: id(layer.data) for layer in images}
    widget.image.value = image
    widget.mask.value = mask
    widget.run_button.clicked.emit()
    qtbot.waitUntil(lambda: not widget.busy, timeout=TIMEOUT)
    images = [layer for layer in viewer.layers if isinstance(layer, Image)]
    new = [layer for layer in images if before.get(layer.name) != id(layer.data)]  # added, or replaced
    return new[0] if new else None


def test_stack_labels_mask_changes_only_the_planes_it_marks(inpaint, qtbot, errors):
    viewer, widget = inpaint
    stack = _noise((3, SIZE, SIZE))
    image = viewer.add_image(stack, name="stack")
    labels = np.zeros(stack.shape, np.uint8)
    labels[1, 10:20, 12:30] = 1
    mask = viewer.add_labels(labels, name="marks")
    out = _run(qtbot, viewer, widget, image, mask)
    assert not errors
    changed = out.data != stack
    np.testing.assert_array_equal(changed, labels != 0)  # planes 0 and 2 untouched


def test_2d_mask_on_a_stack_applies_to_every_plane_and_says_so(inpaint, qtbot, errors):
    viewer, widget = inpaint
    stack = _noise((3, SIZE, SIZE))
    image = viewer.add_image(stack, name="stack")
    labels = np.zeros((SIZE, SIZE), np.uint8)
    labels[5:9, 5:40] = 3
    mask = viewer.add_labels(labels, name="scratch")
    widget.image.value = image
    widget.mask.value = mask
    assert "every plane" in widget.status.value  # said before running
    out = _run(qtbot, viewer, widget, image, mask)
    assert not errors
    for k in range(3):
        np.testing.assert_array_equal(out.data[k] != stack[k], labels != 0)


def test_shapes_are_rasterised_as_napari_draws_them(inpaint, qtbot, errors):
    viewer, widget = inpaint
    img = _noise((SIZE, SIZE))
    image = viewer.add_image(img, name="noise")
    shapes = viewer.add_shapes(name="drawn")
    ellipse = np.array([[4.0, 4.0], [4.0, 24.0], [16.0, 24.0], [16.0, 4.0]])  # bounding box corners
    shapes.add_ellipses([ellipse])
    shapes.add_paths([np.array([[25.0, 5.0], [40.0, 15.0], [25.0, 25.0]])], edge_width=1)
    shapes.add_lines([np.array([[30.0, 32.0], [30.0, 45.0]])], edge_width=3)
    out = _run(qtbot, viewer, widget, image, shapes)
    assert not errors
    changed = out.data != img
    ellipse_mask = shapes.to_masks((SIZE, SIZE))[0]
    np.testing.assert_array_equal(changed[:20, :28], ellipse_mask[:20, :28])  # an ellipse, not its bounding box
    assert not changed[4, 4] and changed[10, 14]
    # the path is a stroke one pixel wide, not the filled triangle between its vertices
    assert changed[25, 5] and changed[40, 15] and changed[28, 7]
    assert not changed[27:31, 12:18].any()
    # the line is 3 pixels wide: rows 29-31 along it, nothing beyond
    np.testing.assert_array_equal(changed[29:32, 33:45], True)
    assert not changed[27, 32:46].any() and not changed[33, 32:46].any()


def test_labels_mask_honours_scale_and_translate(inpaint, qtbot, errors):
    viewer, widget = inpaint
    img = _noise((SIZE, SIZE))
    image = viewer.add_image(img, name="noise", scale=(0.5, 0.5), translate=(10.0, 20.0))
    coarse = np.zeros((SIZE // 2, SIZE // 2), np.uint8)  # one label pixel covers 2 x 2 image pixels
    coarse[5:8, 10:12] = 1
    # label pixel (i, j) is centred at world (10.25 + i, 20.25 + j): image pixels 2i and 2i + 1
    mask = viewer.add_labels(coarse, name="coarse", translate=(10.25, 20.25))
    out = _run(qtbot, viewer, widget, image, mask)
    assert not errors
    expected = np.zeros((SIZE, SIZE), bool)
    expected[10:16, 20:24] = True
    np.testing.assert_array_equal(out.data != img, expected)
    # a mask of the image's shape but moved by 3 world units (6 pixels) down
    labels = np.zeros((SIZE, SIZE), np.uint8)
    labels[4:8, 4:8] = 1
    shifted = viewer.add_labels(labels, name="shifted", scale=(0.5, 0.5), translate=(13.0, 20.0))
    out = _run(qtbot, viewer, widget, image, shifted)
    expected = np.zeros((SIZE, SIZE), bool)
    expected[10:14, 4:8] = True
    np.testing.assert_array_equal(out.data != img, expected)


def test_empty_mask_stops_with_a_notification_and_no_layer(inpaint, qtbot, errors):
    viewer, widget = inpaint
    image = viewer.add_image(_noise((SIZE, SIZE)), name="noise")
    empty = viewer.add_labels(np.zeros((SIZE, SIZE), np.uint8), name="nothing")
    assert _run(qtbot, viewer, widget, image, empty) is None
    assert len(errors) == 1 and "marks no pixel" in str(errors[0])
    # a mask entirely outside the image is empty too
    outside = viewer.add_labels(np.ones((4, 4), np.uint8), name="outside", translate=(500.0, 500.0))
    assert _run(qtbot, viewer, widget, image, outside) is None
    assert len(errors) == 2 and "marks no pixel" in str(errors[1])


def test_rgba_keeps_its_alpha(inpaint, qtbot, errors):
    viewer, widget = inpaint
    rgba = (255 * _noise((SIZE, SIZE, 4))).astype(np.uint8)
    image = viewer.add_image(rgba, name="rgba", rgb=True)
    labels = np.zeros((SIZE, SIZE), np.uint8)
    labels[20:30, 10:35] = 1
    mask = viewer.add_labels(labels, name="hole")
    out = _run(qtbot, viewer, widget, image, mask)
    assert not errors
    assert out.rgb and out.data.dtype == np.uint8
    np.testing.assert_array_equal(out.data[..., 3], rgba[..., 3])  # alpha untouched, even under the mask
    assert (out.data[..., :3] != rgba[..., :3]).any(axis=-1)[labels != 0].mean() > 0.9
    np.testing.assert_array_equal(out.data[labels == 0], rgba[labels == 0])
