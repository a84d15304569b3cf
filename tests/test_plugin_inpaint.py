"""Inpaint widget: mask rasterisation without a viewer, and the widget in a real viewer."""

import numpy as np
import pytest
from napari_helpers import PLUGIN

pytest.importorskip("napari")

from restore_napari import _denoise, _inpaint, _masks, _runner  # noqa: E402

import restore  # noqa: E402

TIMEOUT = 60_000


def _source(data, rgb=False):
    from napari.layers import Image

    return _denoise.Source.of(Image(data, rgb=rgb, name="stack"))


def test_task_inpaints_every_marked_plane_and_reports_progress():
    from napari.layers import Image, Labels

    rng = np.random.default_rng(0)
    stack = (100 + 20 * rng.standard_normal((2, 48, 48))).astype(np.float32)
    mask = np.zeros((48, 48), np.uint8)
    mask[20:23, 5:40] = 1
    masks = _masks.plane_masks(Labels(mask), Image(stack))
    params = _inpaint.InpaintParams(n_passes=4)
    seen, _ = _runner.drive(_inpaint.inpaint_task(_runner.Control(), [(_source(stack), masks)],
                                                  restore.default_dictionary(), params))
    [out] = [v.value for v in seen if isinstance(v, _runner.Output)]
    fractions = [v.fraction for v in seen if isinstance(v, _runner.Progress)]
    assert fractions == sorted(fractions) and fractions[-1] == pytest.approx(1.0)
    assert out.pixels == 2 * mask.sum() and out.planes == 2 and out.data.dtype == np.float32
    np.testing.assert_array_equal(out.data[:, mask == 0], stack[:, mask == 0])
    assert np.all(np.isfinite(out.data)) and np.all(out.data[:, mask != 0] != stack[:, mask != 0])


def test_the_planes_float_copy_moves_the_bar_and_a_cancel_during_it_stops_before_the_library(monkeypatch):
    # a 16 MP plane's copy took up to half a second before the library's first report: a bar that did not move
    from napari.layers import Image, Labels

    monkeypatch.setattr(_inpaint, "_COPY_BAND_PX", 64, raising=False)  # a band of two rows
    calls = []
    monkeypatch.setattr(_inpaint, "_inpaint", lambda *args, **kwargs: calls.append(args))
    data = np.full((40, 32, 4), 7, np.uint16)
    mask = np.zeros((40, 32), np.uint8)
    mask[10:12] = 1
    masks = _masks.plane_masks(Labels(mask), Image(data, rgb=True))
    control = _runner.Control()
    task = _inpaint.inpaint_task(control, [(_source(data, rgb=True), masks)], None, _inpaint.InpaintParams())
    moved = []
    with pytest.raises(restore.Cancelled):
        for item in task:
            if isinstance(item, _runner.Progress) and item.fraction > 0:
                moved.append(item.fraction)
                if len(moved) == 3:
                    control.cancel()
    assert moved == sorted(moved) and moved[0] < moved[-1] <= _inpaint._COPY_SHARE  # noqa: SLF001
    assert not calls


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
    widget.learned.value = _inpaint.SHIPPED  # the shipped dictionary as is: no adaptation, a fast test
    widget.n_passes.value = 2
    seen = []
    widget.progress.changed.connect(lambda v: seen.append(v))
    widget.run()
    qtbot.waitUntil(lambda: "chelsea with text [inpainted]" in viewer.layers and not widget.busy, timeout=TIMEOUT)
    out = viewer.layers["chelsea with text [inpainted]"]
    mask = viewer.layers["text mask"].data != 0
    assert out.rgb and out.data.shape == src.data.shape and out.data.dtype == np.uint8
    np.testing.assert_array_equal(src.data, before)
    np.testing.assert_array_equal(out.data[~mask], src.data[~mask])
    assert len(seen) >= 2  # the progress bar moved
    assert out.metadata["restore"]["params"]["dictionary"] == "shipped"
    assert out.metadata["restore"]["params"]["stride"] is None  # the library's default: it follows the patch size
    assert not errors
    # cancel: no new layer, at once
    n_layers = len(viewer.layers)
    job = widget.run()
    widget.cancel()
    assert not widget.busy and job.outcome == "aborted" and len(viewer.layers) == n_layers
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
    assert learn.busy
    qtbot.waitUntil(lambda: "chelsea with text atoms" in viewer.layers and not learn.busy, timeout=TIMEOUT)
    assert learn.dictionary.components_.shape == (13, 64)  # luminance
    path = tmp_path / "d.npz"
    learn.save(path)
    assert path.exists()
    learn.load(path)
    assert "d atoms" in viewer.layers
    _, inp = viewer.window.add_plugin_dock_widget(PLUGIN, "Inpaint")
    inp.learned.reset_choices()
    atoms = viewer.layers["chelsea with text atoms"]
    inp.learned.value = atoms
    inp.image.value = viewer.layers["chelsea with text"]
    inp.mask.value = viewer.layers["text mask"]
    inp.n_passes.value = 2
    inp.run()
    qtbot.waitUntil(lambda: "chelsea with text [inpainted]" in viewer.layers and not inp.busy, timeout=TIMEOUT)
    assert viewer.layers["chelsea with text [inpainted]"].metadata["restore"]["params"]["dictionary"] == (
        "chelsea with text atoms")
