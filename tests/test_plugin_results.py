"""Issue 18, item 2: results keep what the input had (real napari, Xvfb)."""

import numpy as np
import pytest
from napari_helpers import dock, press

pytest.importorskip("napari")
pytest.importorskip("pytestqt")

pytestmark = pytest.mark.gui

SIZE = 48


def _photo(dtype, shape=(64, 64), seed=0):
    """A smooth picture with noise, in the full range of an integer dtype (or 0-1 for floats)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[: shape[0], : shape[1]]
    clean = 0.5 + 0.4 * np.sin(x / 6.0) * np.cos(y / 9.0)
    noisy = clean + 0.08 * rng.standard_normal(shape)
    if np.dtype(dtype).kind in "ui":
        top = np.iinfo(dtype).max
        return np.clip(np.rint(noisy * top), 0, top).astype(dtype)
    return noisy.astype(dtype)


def test_denoise_keeps_each_images_type_and_range(make_napari_viewer, qtbot, errors):
    """Integers come back in their dtype and range (rounded, clipped), floats keep their precision."""
    viewer = make_napari_viewer()
    widget = dock(viewer, qtbot, "Denoise")
    dtypes = (np.uint8, np.uint16, np.float32, np.float64)
    sources = [viewer.add_image(_photo(dtype), name=np.dtype(dtype).name) for dtype in dtypes]
    viewer.layers.selection = set(sources)
    widget.all_selected.value = True  # one run over the four (the batch of item 4)
    outputs = press(qtbot, viewer, widget, widget.apply_button)
    assert not errors and len(outputs) == 4
    for dtype, src in zip(dtypes, sources, strict=True):
        out = viewer.layers[f"{src.name} [tree_l2]"]
        assert out.data.dtype == dtype
        top = np.iinfo(dtype).max if np.dtype(dtype).kind == "u" else 1.0
        assert 0.4 * top < out.data.mean() < 0.6 * top  # the same range, not 0-1
        assert np.abs(out.data.astype(float) - src.data).mean() < 0.1 * top  # and close to the input
        assert tuple(out.contrast_limits) == tuple(src.contrast_limits)


def test_results_keep_transform_rgb_contrast_and_record_parameters(make_napari_viewer, qtbot, errors):
    viewer = make_napari_viewer()
    rgb = np.stack([_photo(np.uint8, (SIZE, SIZE), seed=k) for k in range(3)], axis=-1)
    src = viewer.add_image(rgb, name="colour", rgb=True, scale=(0.5, 2.0), translate=(3.0, -4.0),
                           contrast_limits=(10, 240), metadata={"microscope": "A"})
    labels = np.zeros((SIZE, SIZE), np.uint8)
    labels[22:26, 8:40] = 1
    viewer.add_labels(labels, name="scratch", scale=(0.5, 2.0), translate=(3.0, -4.0))
    denoise = dock(viewer, qtbot, "Denoise")
    inpaint = dock(viewer, qtbot, "Inpaint")
    denoise.image.value = src
    inpaint.image.value = src
    inpaint.mask.value = viewer.layers["scratch"]
    inpaint.n_passes.value = 2
    [den] = press(qtbot, viewer, denoise, denoise.apply_button)
    [inp] = press(qtbot, viewer, inpaint, inpaint.run_button)
    assert not errors
    for out in (den, inp):
        assert out.rgb and out.data.dtype == np.uint8 and out.data.shape == rgb.shape
        np.testing.assert_allclose(out.scale, (0.5, 2.0))
        np.testing.assert_allclose(out.translate, (3.0, -4.0))
        assert tuple(out.contrast_limits) == (10, 240)
        assert out.metadata["microscope"] == "A"  # the input's metadata is kept
    record = den.metadata["restore"]
    assert record["source"] == "colour" and record["params"]["penalty"] == "tree_l2" and len(record["lam"]) == 1
    record = inp.metadata["restore"]
    assert record["source"] == "colour" and record["mask"] == "scratch"
    assert record["params"]["n_passes"] == 2 and record["params"]["patch_size"] == 8


def test_running_again_replaces_the_previous_result_unless_each_run_is_kept(make_napari_viewer, qtbot, errors):
    viewer = make_napari_viewer()
    widget = dock(viewer, qtbot, "Denoise")
    src = viewer.add_image(_photo(np.float32), name="photo")
    widget.image.value = src
    [first] = press(qtbot, viewer, widget, widget.apply_button)
    widget.multiplier.value = 2.0
    assert press(qtbot, viewer, widget, widget.apply_button) == []  # replaced, not piled up
    assert len(viewer.layers) == 2 and first in viewer.layers
    assert first.metadata["restore"]["params"]["multiplier"] == 2.0
    widget.keep_each_run.value = True
    [second] = press(qtbot, viewer, widget, widget.apply_button)
    assert len(viewer.layers) == 3 and first in viewer.layers and second is not first
    assert not errors


@pytest.mark.parametrize("kind", ["denoise", "inpaint"])
def test_running_again_on_an_rgb_layer_replaces_its_previous_result(make_napari_viewer, qtbot, errors, kind):
    """Issue 27, item 14: a colour re-run replaced nothing and added '... [1]' (grey re-runs replaced)."""
    viewer = make_napari_viewer()
    rgb = np.stack([_photo(np.uint8, (SIZE, SIZE), seed=k) for k in range(3)], axis=-1)
    src = viewer.add_image(rgb, name="colour", rgb=True)
    if kind == "denoise":
        widget = dock(viewer, qtbot, "Denoise")
        button, name, setting = widget.apply_button, "colour [tree_l2]", widget.multiplier
    else:
        labels = np.zeros((SIZE, SIZE), np.uint8)
        labels[22:26, 8:40] = 1
        viewer.add_labels(labels, name="scratch")
        widget = dock(viewer, qtbot, "Inpaint")
        widget.mask.value = viewer.layers["scratch"]
        widget.n_passes.value = 2
        button, name, setting = widget.run_button, "colour [inpainted]", widget.n_passes
    widget.image.value = src
    [first] = press(qtbot, viewer, widget, button)
    assert first.name == name and first.rgb
    setting.value = 3  # a different setting: the second result differs from the first
    assert press(qtbot, viewer, widget, button) == []  # replaced, not piled up as "colour [...] [1]"
    assert [layer.name for layer in viewer.layers if layer is not src and layer.name != "scratch"] == [name]
    assert first in viewer.layers and first.rgb and first.data.shape == rgb.shape
    key = "multiplier" if kind == "denoise" else "n_passes"
    assert first.metadata["restore"]["params"][key] == 3
    assert not errors


def test_a_read_noise_the_image_does_not_determine_is_shown_with_its_bound(make_napari_viewer, qtbot, errors):
    """The nuclei sample (read noise 0.02, photon noise dominant everywhere): not "read noise sigma 0" as if sure.

    Issue 28: the widget's line and the result's record give the bound the
    image allows, which holds, beside the fit's value.
    """
    from restore_napari._sample_data import noisy_nuclei_volume

    [(noisy, kwargs, _)] = noisy_nuclei_volume()
    viewer = make_napari_viewer()
    src = viewer.add_image(noisy[:8], **kwargs)
    widget = dock(viewer, qtbot, "Denoise")
    widget.image.value = src  # its metadata names its noise model, photon noise: gain and read noise estimated
    [out] = press(qtbot, viewer, widget, widget.apply_button)
    assert not errors
    noise = out.metadata["restore"]["noise"]
    assert noise["noise"] == "poisson-gaussian"
    if abs(noise["read_noise_sigma"] - 0.02) > 0.3 * 0.02:
        assert noise["read_noise_sigma_max"] >= 0.02
        assert f"at most {noise['read_noise_sigma_max']:.4g}" in widget.info.value
