"""Inpaint widget: mask rasterisation without a viewer, and the widget in a real viewer."""

import numpy as np
import pytest

pytest.importorskip("napari")

from restore_napari import _inpaint  # noqa: E402

PLUGIN = "restore-tree"
TIMEOUT = 60_000


def test_shapes_mask_respects_scale_and_translate():
    from napari.layers import Image, Shapes

    image = Image(np.zeros((40, 60), np.float32), scale=(2.0, 0.5), translate=(10.0, -5.0))
    # a rectangle in world coordinates with corners at pixels (5, 20) and (15, 40) of the image
    world = np.array([[10 + 2 * 5, -5 + 0.5 * 20], [10 + 2 * 5, -5 + 0.5 * 40],
                      [10 + 2 * 15, -5 + 0.5 * 40], [10 + 2 * 15, -5 + 0.5 * 20]])
    shapes = Shapes([(world - (1.0, 3.0)) / (0.5, 2.0)], shape_type="polygon", scale=(0.5, 2.0), translate=(1.0, 3.0))
    m = _inpaint.mask_for_image(shapes, image)
    rows, cols = np.nonzero(m)
    assert (rows.min(), rows.max(), cols.min(), cols.max()) == (5, 15, 20, 40)


def test_labels_mask_and_errors():
    from napari.layers import Image, Labels

    image = Image(np.zeros((3, 20, 30), np.float32))
    lab = np.zeros((20, 30), np.uint8)
    lab[4:6, 3:9] = 2
    m = _inpaint.mask_for_image(Labels(lab), image)
    assert m.sum() == 12
    with pytest.raises(ValueError, match="planes of"):
        _inpaint.mask_for_image(Labels(np.zeros((5, 5), np.uint8)), image)
    with pytest.raises(ValueError, match="choose a mask layer"):
        _inpaint.mask_for_image(None, image)


def test_generator_inpaints_every_plane_and_reports_batches():
    rng = np.random.default_rng(0)
    stack = (100 + 20 * rng.standard_normal((2, 48, 48))).astype(np.float32)
    mask = np.zeros((48, 48), bool)
    mask[20:23, 5:40] = True
    gen = _inpaint.inpaint_planes(stack, mask, False, 8, 4, 4, None)
    steps = []
    try:
        while True:
            steps.append(next(gen))
    except StopIteration as stop:
        out = stop.value
    assert {s[0] for s in steps} == {0, 1} and all(s[1] == 2 for s in steps)
    np.testing.assert_array_equal(out[:, ~mask], stack[:, ~mask])
    assert np.all(np.isfinite(out))


@pytest.mark.gui
def test_widget_inpaints_the_sample_and_cancel_adds_nothing(make_napari_viewer, qtbot, monkeypatch):
    import napari.utils.notifications as notifications

    errors = []
    monkeypatch.setattr(notifications, "show_error", errors.append)
    viewer = make_napari_viewer()
    viewer.open_sample(PLUGIN, "cat_with_text")
    _, widget = viewer.window.add_plugin_dock_widget(PLUGIN, "Inpaint")
    src = viewer.layers["chelsea with text"]
    before = np.array(src.data, copy=True)
    widget.image.value = src
    widget.mask.value = viewer.layers["text mask"]
    widget.n_passes.value = 6
    seen = []
    widget.progress.changed.connect(lambda v: seen.append(v))
    widget.run()
    qtbot.waitUntil(lambda: "chelsea with text [inpainted]" in viewer.layers and not widget.busy, timeout=TIMEOUT)
    out = viewer.layers["chelsea with text [inpainted]"]
    mask = viewer.layers["text mask"].data != 0
    assert out.rgb and out.data.shape == src.data.shape
    np.testing.assert_array_equal(src.data, before)
    np.testing.assert_allclose(out.data[~mask], src.data[~mask])
    assert len(seen) >= 2  # the progress bar moved
    assert not errors
    # cancel: no new layer
    n_layers = len(viewer.layers)
    job = widget.run()
    widget.cancel()
    qtbot.waitUntil(lambda: not widget.busy, timeout=TIMEOUT)
    assert job.outcome == "aborted" and len(viewer.layers) == n_layers
    # an all-missing mask is an error notification, not a traceback
    full = viewer.add_labels(np.ones((256, 256), np.uint8), name="everything")
    widget.mask.value = full
    widget.run()
    qtbot.waitUntil(lambda: not widget.busy, timeout=TIMEOUT)
    assert errors and "every pixel as missing" in str(errors[-1])


def test_atoms_picture_and_branching():
    from restore_napari import _learn

    from restore import default_dictionary

    est = default_dictionary()
    pic = _learn.atoms_picture(est, 8)
    assert pic.ndim == 2 and 1 <= pic.shape[1] / pic.shape[0] <= 2.5  # 131 atoms, 90 leaves: wrapped, not a strip
    assert _learn.parse_branching("10, 2 2") == (10, 2, 2)
    with pytest.raises(ValueError, match="tree shape"):
        _learn.parse_branching("ten")


@pytest.mark.parametrize("branching", [(10, 3, 3), (10, 2, 2), (4, 2), (3,), (2, 2, 2, 2), (5, 1, 3)])
def test_atom_positions_keep_the_tree_and_never_overlap(branching):
    from restore_napari import _learn

    from restore import Tree

    tree = Tree.balanced(branching)
    pos = np.array(_learn.atom_positions(tree))
    assert pos[tree.roots[0], 0] == 0 and np.all(pos[:, 0] >= 0) and np.all(pos[:, 1] >= 0)
    for n in range(tree.n_nodes):
        for c in tree.children(n):
            # children one row below their parent (the root's, when wrapped, in rows of blocks below it)
            assert pos[c, 0] == pos[n, 0] + 1 or (n == tree.roots[0] and pos[c, 0] > 1)
    d = np.abs(pos[:, None, :] - pos[None, :, :])
    apart = (d[..., 0] >= 1 - 1e-9) | (d[..., 1] >= 1 - 1e-9)
    assert apart[~np.eye(tree.n_nodes, dtype=bool)].all()  # every atom in a cell of its own
    if tree.n_nodes < 20:  # small trees stay one strip: one row per level
        assert pos[:, 0].max() == len(branching)


@pytest.mark.gui
def test_learn_widget_learns_saves_loads_and_feeds_inpaint(make_napari_viewer, qtbot, tmp_path):
    viewer = make_napari_viewer()
    viewer.open_sample(PLUGIN, "cat_with_text")
    _, learn = viewer.window.add_plugin_dock_widget(PLUGIN, "Learn dictionary")
    learn.image.value = viewer.layers["chelsea with text"]
    learn.exclude.value = viewer.layers["text mask"]
    learn.branching.value = "4 2"
    learn.n_patches.value = 2000
    learn.run()
    qtbot.waitUntil(lambda: "chelsea with text atoms" in viewer.layers and not learn.busy, timeout=TIMEOUT)
    assert learn.dictionary.components_.shape == (13, 64)  # luminance
    path = tmp_path / "d.npz"
    learn.save(path)
    assert path.exists()
    learn.load(path)
    assert "d atoms" in viewer.layers
    _, inp = viewer.window.add_plugin_dock_widget(PLUGIN, "Inpaint")
    inp.learned.reset_choices()
    inp.learned.value = learn.dictionary
    inp.image.value = viewer.layers["chelsea with text"]
    inp.mask.value = viewer.layers["text mask"]
    inp.n_passes.value = 6
    inp.run()
    qtbot.waitUntil(lambda: "chelsea with text [inpainted]" in viewer.layers and not inp.busy, timeout=TIMEOUT)
