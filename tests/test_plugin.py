"""napari plugin, logic without Qt: manifest, sample data, planes, denoise steps, jobs."""

import importlib
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("napari")
pytest.importorskip("npe2")

from restore_napari import _common, _denoise, _sample_data  # noqa: E402

import restore  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "plugin" / "napari.yaml"


@pytest.fixture(autouse=True)
def _sync(monkeypatch):
    monkeypatch.setenv(_common.SYNC_ENV, "1")


@pytest.fixture
def errors(monkeypatch):
    """Messages passed to napari's show_error."""
    import napari.utils.notifications as notifications

    shown = []
    monkeypatch.setattr(notifications, "show_error", shown.append)
    return shown


def _noisy(shape, sigma=0.1, seed=0):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[: shape[-2], : shape[-1]]
    clean = 0.5 + 0.3 * np.sin(x / 7.0) * np.cos(y / 11.0)
    clean = np.broadcast_to(clean, shape)
    return (clean + sigma * rng.standard_normal(shape)).astype(np.float32), clean


# ---------------------------------------------------------------------------
# Manifest and package
# ---------------------------------------------------------------------------


def test_manifest_validates_and_commands_resolve():
    import npe2

    pm = npe2.PluginManifest.from_file(MANIFEST)
    assert pm.name == "restore-tree"
    assert pm.display_name == "Tree-sparse restoration"
    commands = {c.id: c.python_name for c in pm.contributions.commands}
    assert {w.command for w in pm.contributions.widgets} <= set(commands)
    assert {s.command for s in pm.contributions.sample_data} <= set(commands)
    assert [s.key for s in pm.contributions.sample_data] == ["noisy_camera", "cat_with_text"]
    for python_name in commands.values():
        module, attr = python_name.split(":")
        assert callable(getattr(importlib.import_module(module), attr)), python_name


def test_importing_the_plugin_imports_no_qt():
    code = ("import sys, restore_napari, restore_napari._common, restore_napari._denoise, restore_napari._sample_data\n"
            "qt = [m for m in sys.modules if m.split('.')[0] in ('qtpy', 'PyQt5', 'PyQt6', 'PySide2', 'PySide6')]\n"
            "assert not qt, qt\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=60)


# ---------------------------------------------------------------------------
# Sample data
# ---------------------------------------------------------------------------


def test_noisy_camera_is_float32_in_8bit_units_with_sigma_25_and_fixed_seed():
    [(data, meta, kind)] = _sample_data.noisy_camera()
    assert kind == "image" and meta["name"] == "camera"
    assert data.dtype == np.float32 and data.shape == (512, 512)
    clean = _sample_data.clean_camera().astype(np.float32)
    assert abs(float(np.std(data - clean)) - 25.0) < 0.5
    np.testing.assert_array_equal(data, _sample_data.noisy_camera()[0][0])
    assert abs(restore.estimate_sigma(data) - 25.0) < 2.5  # the widget's sigma reads about 25


def test_cat_with_text_burns_the_mask_in_and_returns_it_as_labels():
    (image, imeta, ikind), (labels, lmeta, lkind) = _sample_data.cat_with_text()
    assert (ikind, lkind) == ("image", "labels")
    assert imeta["rgb"] and image.dtype == np.uint8 and image.shape == (256, 256, 3)
    assert labels.dtype == np.uint8 and labels.shape == (256, 256)
    mask = labels.astype(bool)
    assert 0.03 < mask.mean() < 0.1
    assert np.all(image[mask] == 255)
    cat = _sample_data.clean_cat()
    np.testing.assert_array_equal(image[~mask], cat[~mask])


def test_shipped_text_mask_matches_its_generator():
    shipped = _sample_data.text_mask()
    rendered = _sample_data.render_text_mask(shipped.shape)
    assert np.mean(shipped != rendered) < 0.01  # font rasterisers may differ by a few pixels


# ---------------------------------------------------------------------------
# Planes and derived layers
# ---------------------------------------------------------------------------


def test_plane_indices():
    assert _common.plane_indices((5, 6), rgb=False) == [()]
    assert _common.plane_indices((5, 6, 3), rgb=True) == [()]
    assert _common.plane_indices((2, 3, 5, 6), rgb=False) == [(i, j) for i in range(2) for j in range(3)]
    assert _common.plane_indices((2, 5, 6, 4), rgb=True) == [(0,), (1,)]
    with pytest.raises(ValueError, match="no colour plane"):
        _common.plane_indices((5, 6), rgb=True)


def test_current_plane_index_follows_dims_through_scale_and_translate():
    from napari.components import ViewerModel

    viewer = ViewerModel()
    layer = viewer.add_image(np.zeros((4, 8, 8), np.float32), scale=(2.0, 1.0, 1.0), translate=(10.0, 0, 0))
    viewer.dims.set_point(0, 14.0)
    assert _common.current_plane_index(layer, viewer.dims.point) == (2,)
    viewer.dims.set_point(0, 100.0)
    assert _common.current_plane_index(layer, viewer.dims.point) == (3,)
    flat = viewer.add_image(np.zeros((8, 8, 3), np.uint8), rgb=True)
    assert _common.current_plane_index(flat, viewer.dims.point) == ()


def test_derived_layers_keep_transform_units_and_rgb():
    from napari.components import ViewerModel

    viewer = ViewerModel()
    src = viewer.add_image(np.zeros((3, 16, 16, 3), np.uint8), rgb=True, scale=(3.0, 0.5, 0.25),
                           translate=(1.0, 2.0, 3.0), name="src")
    new = viewer.add_image(np.zeros((3, 16, 16, 3), np.float32), **_common.derived_layer_kwargs(src, "out"))
    assert new.rgb and new.name == "out"
    np.testing.assert_allclose(new.scale, src.scale)
    np.testing.assert_allclose(new.translate, src.translate)
    np.testing.assert_allclose(new.affine.affine_matrix, src.affine.affine_matrix)
    assert tuple(new.contrast_limits) == (0, 255)
    plane = viewer.add_image(np.zeros((1, 16, 16, 3), np.float32),
                             **_common.plane_layer_kwargs(src, (2,), "p"))
    np.testing.assert_allclose(plane.translate, (1.0 + 2 * 3.0, 2.0, 3.0))
    np.testing.assert_allclose(plane.scale, src.scale)


def test_as_float_keeps_units():
    out = _common.as_float(np.array([[0, 255]], np.uint8))
    assert out.dtype == np.float32 and out.max() == 255
    f64 = np.ones((2, 2))
    assert _common.as_float(f64) is f64
    assert _common.as_float(np.ones((2, 2), np.float16)).dtype == np.float32


def test_check_image_layer_messages():
    from napari.layers import Image

    with pytest.raises(ValueError, match="choose an image layer"):
        _common.check_image_layer(None)
    with pytest.raises(ValueError, match="multiscale"):
        _common.check_image_layer(Image([np.zeros((64, 64)), np.zeros((32, 32))], multiscale=True))


# ---------------------------------------------------------------------------
# Denoise logic
# ---------------------------------------------------------------------------


def test_params_validation_names_the_bad_value():
    with pytest.raises(ValueError, match="SURE needs a convex penalty"):
        _denoise.DenoiseParams(penalty="tree_l0", lam_mode="sure")
    with pytest.raises(ValueError, match="Invalid lam mode: 'auto'"):
        _denoise.DenoiseParams(lam_mode="auto")
    with pytest.raises(ValueError, match="multiplier"):
        _denoise.DenoiseParams(multiplier=-1.0)


def test_sure_with_multiplier_one_is_the_librarys_sure():
    noisy, _ = _noisy((64, 80))
    out, info = _denoise.denoise_plane(noisy, _denoise.DenoiseParams(), rgb=False)
    ref = restore.denoise_wavelet_tree(noisy, lam="sure")
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-5)
    choice = restore.choose_lam(noisy, penalty="tree_l2", method="sure")
    assert info.lam == pytest.approx(choice.lam) and info.sigma == pytest.approx(choice.sigma)
    assert info.mode == "sure" and not info.sigma_given


@pytest.mark.parametrize("penalty", restore.PENALTIES)
def test_rule_multiplier_scales_the_automatic_lam(penalty):
    noisy, _ = _noisy((64, 64))
    params = _denoise.DenoiseParams(penalty=penalty, lam_mode="rule", multiplier=2.0, sigma=0.1)
    out, info = _denoise.denoise_plane(noisy, params, rgb=False)
    choice = restore.choose_lam(noisy, sigma=0.1, penalty=penalty, method="rule")
    assert info.lam == pytest.approx(tuple(2 * v for v in choice.lam))
    assert info.sigma == (0.1,) and info.sigma_given
    np.testing.assert_allclose(out, restore.denoise_wavelet_tree(noisy, lam=info.lam[0], penalty=penalty),
                               atol=1e-5)


def test_manual_lam_is_used_as_is():
    noisy, _ = _noisy((64, 64))
    params = _denoise.DenoiseParams(lam_mode="manual", lam=0.05, cycle_spins=2, wavelet="haar")
    out, info = _denoise.denoise_plane(noisy, params, rgb=False)
    assert info.lam == (0.05,)
    ref = restore.denoise_wavelet_tree(noisy, lam=0.05, wavelet="haar", cycle_spins=2)
    np.testing.assert_allclose(out, ref, atol=1e-6)


def test_rgb_is_denoised_as_colour_and_alpha_kept():
    noisy, _ = _noisy((48, 48, 3))
    rgba = np.concatenate([noisy, np.full((48, 48, 1), 0.7, np.float32)], axis=-1)
    params = _denoise.DenoiseParams(lam_mode="rule")
    out, info = _denoise.denoise_plane(rgba, params, rgb=True)
    assert out.shape == rgba.shape and len(info.lam) == 3
    np.testing.assert_array_equal(out[..., 3], rgba[..., 3])
    ref = restore.denoise_wavelet_tree(noisy, lam=list(info.lam), channel_axis=-1)
    np.testing.assert_allclose(out[..., :3], ref, atol=1e-5)


def test_integer_planes_keep_their_units():
    rng = np.random.default_rng(1)
    img = np.clip(128 + 20 * rng.standard_normal((64, 64)), 0, 255).astype(np.uint8)
    out, info = _denoise.denoise_plane(img, _denoise.DenoiseParams(lam_mode="rule"), rgb=False)
    assert out.dtype == np.float32 and 100 < out.mean() < 156
    assert 15 < info.sigma[0] < 25  # in the layer's units, not img_as_float's


def test_denoise_planes_yields_per_plane_and_returns_the_stack():
    stack, _ = _noisy((3, 40, 48))
    stack = stack * np.array([1.0, 2.0, 3.0], np.float32)[:, None, None]
    params = _denoise.DenoiseParams()
    gen = _denoise.denoise_planes(stack, params, rgb=False)
    progress = []
    with pytest.raises(StopIteration) as stop:
        while True:
            progress.append(next(gen))
    assert [(d, t) for d, t, _ in progress] == [(1, 3), (2, 3), (3, 3)]
    out = stop.value.value
    assert out.shape == stack.shape and out.dtype == np.float32
    for i in range(3):
        np.testing.assert_allclose(out[i], _denoise.denoise_plane(stack[i], params, rgb=False)[0], atol=1e-6)
    assert progress[2][2].sigma[0] > progress[0][2].sigma[0]  # sigma estimated per plane


def test_preview_is_provisional_until_sure_is_cached():
    noisy, _ = _noisy((64, 64))
    cache = _common.LruCache()
    params = _denoise.DenoiseParams()
    first = list(_denoise.preview_steps(noisy, params, False, cache, key="k"))
    assert [info.provisional for _, info in first] == [True, False]
    assert first[0][1].lam != first[1][1].lam
    again = list(_denoise.preview_steps(noisy, replace(params, multiplier=0.5), False, cache, key="k"))
    assert len(again) == 1 and again[0][1].lam == pytest.approx(tuple(0.5 * v for v in first[1][1].lam))
    manual = list(_denoise.preview_steps(noisy, replace(params, lam_mode="manual", lam=0.1), False, cache, "k"))
    assert len(manual) == 1


def test_format_info():
    info = _denoise.LamInfo(lam=(22.08,), sigma=(25.7,), mode="sure", multiplier=1.0)
    assert _denoise.format_info(info) == "\u03c3 = 25.7 (estimated) \u00b7 \u03bb = 22.08 (SURE \u00d7 1)"
    colour = _denoise.LamInfo(lam=(1.0, 2.0, 3.0), sigma=(0.1, 0.1, 0.1), mode="manual", sigma_given=True)
    assert "(given)" in _denoise.format_info(colour) and "\u03bb = 1, 2, 3 (manual)" in _denoise.format_info(colour)
    assert "SURE running" in _denoise.format_info(replace(info, provisional=True))
    two = _denoise.format_info([info, replace(info, lam=(30.0,), sigma=(26.0,))])
    assert two.startswith("2 planes") and "22.08\u201330" in two


# ---------------------------------------------------------------------------
# Jobs (synchronous mode)
# ---------------------------------------------------------------------------


def _count(n):
    yield from range(n)
    return "done"


def test_job_runs_and_returns():
    seen, result, finished = [], [], []
    job = _common.Job(_count, 3, on_yield=seen.append, on_return=result.append,
                      on_finish=lambda: finished.append(True))
    job.start()
    assert seen == [0, 1, 2] and result == ["done"] and finished == [True]
    assert job.done and job.outcome == "returned" and not job.running


def test_job_cancel_stops_at_the_next_yield_and_discards_the_result():
    seen, result, aborted = [], [], []
    job = _common.Job(_count, 5, on_yield=lambda v: (seen.append(v), v == 1 and job.cancel()),
                      on_return=result.append, on_abort=lambda: aborted.append(True))
    job.start()
    assert seen == [0, 1] and result == [] and aborted == [True] and job.outcome == "aborted"


def test_job_errors_become_notifications_with_the_librarys_message(errors):
    params = _denoise.DenoiseParams(wavelet="bior1.3")
    job = _common.Job(_denoise.denoise_planes, np.zeros((32, 32), np.float32), params, False)
    job.start()
    assert job.outcome == "errored"
    assert errors == ["restore-tree: Invalid wavelet: 'bior1.3' is not orthogonal: tree denoising needs an "
                      "orthonormal transform: haar, dbN (N = 1..38), symN (N = 2..20), coifN (N = 1..17)"]


def test_error_message_shows_type_for_unexpected_errors():
    assert _common.error_message(ValueError("bad lam")) == "bad lam"
    assert _common.error_message(KeyError("x")) == "KeyError: 'x'"


def test_warm_up_runs_once_per_process(monkeypatch):
    monkeypatch.setattr(_common, "_WARM", {})
    calls, done = [], []

    def gen():
        calls.append(1)
        yield 1

    assert _common.ensure_warm("k", gen, desc="x", on_done=lambda: done.append(1)) is not None
    assert _common.is_warm("k") and calls == [1] and done == [1]
    assert _common.ensure_warm("k", gen, desc="x", on_done=lambda: done.append(2)) is None
    assert calls == [1] and done == [1]


def test_warm_up_compiles_every_penalty():
    assert list(_denoise.warm_up()) == list(restore.PENALTIES)


def test_lru_cache_drops_the_oldest():
    cache = _common.LruCache(2)
    cache.set("a", 1)
    cache.set("b", 2)
    assert cache.get("a") == 1
    cache.set("c", 3)
    assert "b" not in cache and cache.get("a") == 1 and len(cache) == 2
