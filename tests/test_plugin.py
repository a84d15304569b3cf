"""napari plugin, logic without Qt: manifest, sample data, planes, types, regions, masks, denoise tasks, jobs."""

import importlib
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("napari")
pytest.importorskip("npe2")

from restore_napari import _common, _denoise, _masks, _runner, _sample_data  # noqa: E402

import restore  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "plugin" / "napari.yaml"


@pytest.fixture(autouse=True)
def _sync(monkeypatch):
    monkeypatch.setenv(_common.SYNC_ENV, "1")


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
    assert [s.key for s in pm.contributions.sample_data] == ["noisy_camera", "cat_with_text", "noisy_nuclei_volume"]
    for python_name in commands.values():
        module, attr = python_name.split(":")
        assert callable(getattr(importlib.import_module(module), attr)), python_name


def test_importing_the_plugin_imports_no_qt():
    code = ("import sys, restore_napari, restore_napari._common, restore_napari._denoise, restore_napari._inpaint, "
            "restore_napari._learn, restore_napari._masks, restore_napari._sample_data\n"
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
# Planes, types and derived layers
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


def test_derived_layers_keep_transform_look_metadata_and_record():
    from napari.components import ViewerModel

    viewer = ViewerModel()
    src = viewer.add_image(np.zeros((3, 16, 16, 3), np.uint8), rgb=True, scale=(3.0, 0.5, 0.25),
                           translate=(1.0, 2.0, 3.0), name="src", metadata={"stage": 7})
    new = viewer.add_image(np.zeros((3, 16, 16, 3), np.uint8),
                           **_common.layer_kwargs(src, "out", {"widget": "denoise", "lam": [1.0]}))
    assert new.rgb and new.name == "out"
    np.testing.assert_allclose(new.scale, src.scale)
    np.testing.assert_allclose(new.translate, src.translate)
    np.testing.assert_allclose(new.affine.affine_matrix, src.affine.affine_matrix)
    assert tuple(new.contrast_limits) == (0, 255)
    assert new.metadata == {"stage": 7, "restore": {"widget": "denoise", "lam": [1.0]}}
    assert src.metadata == {"stage": 7}


def test_offset_translate_places_a_crop_through_scale_and_rotation():
    from napari.components import ViewerModel

    viewer = ViewerModel()
    src = viewer.add_image(np.zeros((3, 40, 50), np.float32), scale=(3.0, 0.5, 2.0), translate=(1.0, 2.0, 3.0),
                           rotate=30)
    crop = viewer.add_image(np.zeros((1, 10, 20), np.float32), scale=src.scale, rotate=30,
                            translate=_common.offset_translate(src, (2, 5, 7)))
    for point in [(0, 0, 0), (0, 9, 19), (0, 3, 4)]:
        np.testing.assert_allclose(crop.data_to_world(point), src.data_to_world(np.add(point, (2, 5, 7))),
                                   atol=1e-9)


def test_as_float_keeps_units_and_like_input_restores_the_type():
    out = _common.as_float(np.array([[0, 255]], np.uint8))
    assert out.dtype == np.float32 and out.max() == 255
    f64 = np.ones((2, 2))
    assert _common.as_float(f64) is f64
    assert _common.as_float(np.ones((2, 2), np.float16)).dtype == np.float32
    big = np.array([2**31 - 1, -(2**31)], np.int32)
    assert _common.as_float(big).dtype == np.float64  # exact: float32 would round these
    np.testing.assert_array_equal(_common.like_input(_common.as_float(big), np.int32), big)
    np.testing.assert_array_equal(_common.like_input(np.array([-3.2, 12.5, 254.6, 300.0]), np.uint8),
                                  np.array([0, 12, 255, 255], np.uint8))
    assert _common.like_input(np.ones(2, np.float64), np.float32).dtype == np.float32


def test_check_image_layer_messages():
    from napari.layers import Image

    with pytest.raises(ValueError, match="choose an image layer"):
        _common.check_image_layer(None)
    with pytest.raises(ValueError, match="multiscale"):
        _common.check_image_layer(Image([np.zeros((64, 64)), np.zeros((32, 32))], multiscale=True))


@pytest.mark.parametrize("visible, centre, expected, capped", [
    (None, None, (0, 1000, 0, 600), False),  # unknown view: the whole plane fits
    ((100, 200, 300, 340), None, (54, 246, 256, 384), False),  # the view and a margin, sides of 64
    ((0, 1000, 0, 600), (500.0, 100.0), (372, 628, 36, 164), True),  # too large: capped, around the centre
])
def test_preview_region(visible, centre, expected, capped):
    kw = {"max_pixels": 1000 * 600 if expected[1] == 1000 else 256 * 200, "margin": 16, "quantum": 64}
    region, was_capped = _common.preview_region((1000, 600), visible, centre, **kw)
    assert region == expected and was_capped == capped
    r0, r1, c0, c1 = region
    assert (r1 - r0) * (c1 - c0) <= kw["max_pixels"] and 0 <= r0 < r1 <= 1000 and 0 <= c0 < c1 <= 600


# ---------------------------------------------------------------------------
# Masks (napari layer models, no viewer)
# ---------------------------------------------------------------------------


def test_shapes_mask_respects_scale_and_translate():
    from napari.layers import Image, Shapes

    image = Image(np.zeros((40, 60), np.float32), scale=(2.0, 0.5), translate=(10.0, -5.0))
    # a rectangle in world coordinates with corners at pixels (5, 20) and (15, 40) of the image
    world = np.array([[10 + 2 * 5, -5 + 0.5 * 20], [10 + 2 * 5, -5 + 0.5 * 40],
                      [10 + 2 * 15, -5 + 0.5 * 40], [10 + 2 * 15, -5 + 0.5 * 20]])
    shapes = Shapes([(world - (1.0, 3.0)) / (0.5, 2.0)], shape_type="polygon", scale=(0.5, 2.0), translate=(1.0, 3.0))
    m = _masks.plane_masks(shapes, image)(())
    rows, cols = np.nonzero(m)
    assert (rows.min(), rows.max(), cols.min(), cols.max()) == (5, 15, 20, 40)


def test_shapes_on_a_stack_apply_to_their_own_plane():
    from napari.layers import Image, Shapes

    image = Image(np.zeros((4, 30, 30), np.float32))
    shapes = Shapes([np.array([[2, 5, 5], [2, 5, 15], [2, 15, 15], [2, 15, 5]], float)], shape_type="rectangle")
    masks = _masks.plane_masks(shapes, image)
    assert not masks.broadcast
    assert masks((2,)).sum() == 11 * 11 and not masks((1,)).any() and not masks((3,)).any()
    flat = Shapes([np.array([[5, 5], [5, 15], [15, 15], [15, 5]], float)], shape_type="rectangle")
    masks = _masks.plane_masks(flat, image)
    assert masks.broadcast and masks((0,)).sum() == masks((3,)).sum() == 11 * 11


def test_labels_masks_broadcast_resample_and_merge_extra_axes():
    from napari.layers import Image, Labels

    image = Image(np.zeros((3, 20, 30), np.float32))
    lab = np.zeros((20, 30), np.uint8)
    lab[4:6, 3:9] = 2
    masks = _masks.plane_masks(Labels(lab), image)
    assert masks.broadcast and masks((1,)).sum() == 12 and masks.count([(0,), (1,), (2,)]) == 36
    coarse = Labels(lab[::2, ::2], scale=(2, 2))  # half resolution: each label pixel covers 2 x 2
    assert _masks.plane_masks(coarse, image)((0,)).sum() == 3 * 2 * 2
    extra = np.zeros((2, 3, 20, 30), np.uint8)  # a time axis the image does not have: marked at any time
    extra[1, 2, 0, 0] = extra[0, 2, 5, 5] = 1
    m = _masks.plane_masks(Labels(extra), image)
    assert not m.broadcast and m((2,)).sum() == 2 and not m((1,)).any()
    with pytest.raises(ValueError, match="choose a mask layer"):
        _masks.plane_masks(None, image)


def test_describe_says_how_a_mask_applies():
    from napari.layers import Image, Labels

    stack = Image(np.zeros((5, 8, 8), np.float32), name="stack")
    assert "every plane" in _masks.describe(Labels(np.zeros((8, 8), np.uint8), name="m"), stack)
    assert "plane by plane" in _masks.describe(Labels(np.zeros((5, 8, 8), np.uint8), name="m"), stack)
    assert _masks.describe(Labels(np.zeros((8, 8), np.uint8)), Image(np.zeros((8, 8)))) == ""


# ---------------------------------------------------------------------------
# Denoise logic
# ---------------------------------------------------------------------------


def _plane(plane, params, rgb=False, cache=None, key=None):
    """Denoise one plane through the task generator, in this thread."""
    _, value = _runner.drive(_denoise.denoise_plane(_runner.Control(), plane, params, rgb, cache, key))
    return value


def test_params_validation_names_the_bad_value():
    with pytest.raises(ValueError, match="SURE needs a convex penalty"):
        _denoise.DenoiseParams(penalty="tree_l0", lam_mode="sure")
    with pytest.raises(ValueError, match="Invalid lam mode: 'auto'"):
        _denoise.DenoiseParams(lam_mode="auto")
    with pytest.raises(ValueError, match="multiplier"):
        _denoise.DenoiseParams(multiplier=-1.0)


def test_sure_with_multiplier_one_is_the_librarys_sure():
    noisy, _ = _noisy((64, 80))
    out, info = _plane(noisy, _denoise.DenoiseParams())
    ref = restore.denoise_wavelet_tree(noisy, lam="sure")
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-5)
    choice = restore.choose_lam(noisy, penalty="tree_l2", method="sure")
    assert info.lam == pytest.approx(choice.lam) and info.sigma == pytest.approx(choice.sigma)
    assert info.mode == "sure" and not info.sigma_given


def test_a_sigma_given_is_the_one_every_stage_uses():
    """The user's sigma (here 3x the noise's) reaches the Wiener stage too: the library's default call with it."""
    noisy, _ = _noisy((64, 80))
    out, info = _plane(noisy, _denoise.DenoiseParams(sigma=0.3))
    assert info.sigma == (0.3,) and info.sigma_given
    np.testing.assert_allclose(out, restore.denoise_wavelet_tree(noisy, sigma=0.3), rtol=0, atol=1e-5)


@pytest.mark.parametrize("penalty", restore.PENALTIES)
def test_rule_multiplier_scales_the_automatic_lam(penalty):
    noisy, _ = _noisy((64, 64))
    params = _denoise.DenoiseParams(penalty=penalty, lam_mode="rule", multiplier=2.0, sigma=0.1)
    out, info = _plane(noisy, params)
    choice = restore.choose_lam(noisy, sigma=0.1, penalty=penalty, method="rule")
    assert info.lam == pytest.approx(tuple(2 * v for v in choice.lam))
    assert info.sigma == (0.1,) and info.sigma_given
    expected = restore.denoise_wavelet_tree(noisy, lam=choice, strength=2.0, sigma=0.1, penalty=penalty)
    np.testing.assert_allclose(out, expected, atol=1e-5)


def test_manual_lam_is_used_as_is():
    noisy, _ = _noisy((64, 64))
    params = _denoise.DenoiseParams(lam_mode="manual", lam=0.05, cycle_spins=2, wavelet="haar")
    out, info = _plane(noisy, params)
    assert info.lam == (0.05,)
    ref = restore.denoise_wavelet_tree(noisy, lam=0.05, wavelet="haar", cycle_spins=2)
    np.testing.assert_allclose(out, ref, atol=1e-6)


def test_rgb_is_denoised_as_colour_and_alpha_kept():
    noisy, _ = _noisy((48, 48, 3))
    rgba = np.concatenate([noisy, np.full((48, 48, 1), 0.7, np.float32)], axis=-1)
    out, info = _plane(rgba, _denoise.DenoiseParams(lam_mode="rule"), rgb=True)
    assert out.shape == rgba.shape and len(info.lam) == 3
    np.testing.assert_array_equal(out[..., 3], rgba[..., 3])
    ref = restore.denoise_wavelet_tree(noisy, lam=list(info.lam), channel_axis=-1)
    np.testing.assert_allclose(out[..., :3], ref, atol=1e-5)


def test_integer_planes_are_denoised_in_their_units():
    rng = np.random.default_rng(1)
    img = np.clip(128 + 20 * rng.standard_normal((64, 64)), 0, 255).astype(np.uint8)
    out, info = _plane(img, _denoise.DenoiseParams(lam_mode="rule"))
    assert out.dtype == np.float32 and 100 < out.mean() < 156
    assert 15 < info.sigma[0] < 25  # in the layer's units, not img_as_float's


def _source(data, rgb=False, name="s"):
    from napari.layers import Image

    return _denoise.Source.of(Image(data, rgb=rgb, name=name))


def test_denoise_task_reports_progress_inside_planes_and_returns_each_layer_in_its_type():
    stack, _ = _noisy((3, 40, 48))
    stack = stack * np.array([1.0, 2.0, 3.0], np.float32)[:, None, None]
    ints = np.clip(100 * stack[:2], 0, 255).astype(np.uint8)
    params = _denoise.DenoiseParams()
    seen, _ = _runner.drive(_denoise.denoise_task(_runner.Control(), [_source(stack), _source(ints)], params))
    fractions = [v.fraction for v in seen if isinstance(v, _runner.Progress)]
    assert fractions == sorted(fractions) and fractions[-1] == pytest.approx(1.0)
    assert len(set(fractions)) >= 2 * 5  # reports inside each plane
    first, second = (v.value for v in seen if isinstance(v, _runner.Output))
    assert first.data.shape == stack.shape and first.data.dtype == np.float32
    for i in range(3):
        np.testing.assert_allclose(first.data[i], _plane(stack[i], params)[0], atol=1e-6)
    assert first.infos[2].sigma[0] > first.infos[0].sigma[0]  # sigma estimated per plane
    assert second.data.dtype == np.uint8
    np.testing.assert_array_equal(second.data[1], _common.like_input(_plane(ints[1], params)[0], np.uint8))


def test_preview_is_provisional_until_sure_is_cached():
    noisy, _ = _noisy((64, 64))
    cache = _common.LruCache()
    params = _denoise.DenoiseParams()
    src = _source(noisy)

    def preview(p):
        seen, _ = _runner.drive(_denoise.preview_task(_runner.Control(), src, (), (0, 64, 0, 64), p, cache))
        return [v.value for v in seen if isinstance(v, _runner.Output)]

    first = preview(params)
    assert [info.provisional for _, info in first] == [True, False]
    assert first[0][1].lam != first[1][1].lam
    again = preview(replace(params, multiplier=0.5))
    assert len(again) == 1 and again[0][1].lam == pytest.approx(tuple(0.5 * v for v in first[1][1].lam))
    assert len(preview(replace(params, lam_mode="manual", lam=0.1))) == 1


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


def _count(control, n):
    yield from range(n)
    return "done"


def test_job_runs_and_returns():
    seen, result, finished = [], [], []
    job = _runner.Job(_count, 3, on_yield=seen.append, on_return=result.append,
                      on_finish=lambda: finished.append(True))
    job.start()
    assert seen == [0, 1, 2] and result == ["done"] and finished == [True]
    assert job.done and job.outcome == "returned" and not job.running


def test_job_cancel_stops_at_the_next_yield_and_discards_the_result():
    seen, result, aborted = [], [], []
    job = _runner.Job(_count, 5, on_yield=lambda v: (seen.append(v), v == 1 and job.cancel()),
                      on_return=result.append, on_abort=lambda: aborted.append(True))
    job.start()
    assert seen == [0, 1] and result == [] and aborted == [True] and job.outcome == "aborted"


def test_control_call_stops_the_library_at_its_next_report():
    control = _runner.Control()
    calls = []

    def slow(progress):
        for i in range(100):
            progress(i, 100)
            calls.append(i)
            if i == 3:
                control.cancel()
        return "finished"

    with pytest.raises(restore.Cancelled):
        _runner.drive(control.call(slow))
    assert calls == [0, 1, 2, 3]


def test_job_errors_become_notifications_with_the_librarys_message(errors):
    params = _denoise.DenoiseParams(wavelet="bior1.3")
    job = _runner.Job(_denoise.denoise_task, [_source(np.zeros((32, 32), np.float32))], params)
    job.start()
    assert job.outcome == "errored"
    assert errors == ["restore-tree: Invalid wavelet: 'bior1.3' is not orthogonal: tree denoising needs an "
                      "orthonormal transform: haar, dbN (N = 1..38), symN (N = 2..20), coifN (N = 1..17)"]


def test_error_message_shows_type_for_unexpected_errors():
    assert _common.error_message(ValueError("bad lam")) == "bad lam"
    assert _common.error_message(KeyError("x")) == "KeyError: 'x'"


def test_warm_up_runs_once_per_process(monkeypatch):
    monkeypatch.setattr(_runner, "_WARM", {})
    calls, done = [], []

    def gen(control):
        calls.append(1)
        yield 1

    assert _runner.ensure_warm("k", gen, on_done=lambda: done.append(1)) is not None
    assert _runner.is_warm("k") and calls == [1] and done == [1]
    assert _runner.ensure_warm("k", gen, on_done=lambda: done.append(2)) is None
    assert calls == [1] and done == [1]


def test_warm_up_compiles_every_penalty():
    assert list(_denoise.warm_up(_runner.Control())) == list(restore.PENALTIES)


def test_lru_cache_drops_the_oldest():
    cache = _common.LruCache(2)
    cache.set("a", 1)
    cache.set("b", 2)
    assert cache.get("a") == 1
    cache.set("c", 3)
    assert "b" not in cache and cache.get("a") == 1 and len(cache) == 2


@pytest.mark.parametrize("lam_mode", ["sure", "rule"])
def test_denoise_progress_moves_with_the_work_not_ahead_of_it(lam_mode, monkeypatch):
    # the bar's share for choosing lam was once 15 / 16 of the run at the default shifts, while the choice takes
    # under a quarter of the time: the bar jumped to 94 % and then sat still
    monkeypatch.delenv(_common.SYNC_ENV)  # the library's progress as the widget gets it, from its thread
    params = _denoise.DenoiseParams(lam_mode=lam_mode)
    small, _ = _noisy((64, 64))
    _runner.drive(_denoise.denoise_task(_runner.Control(), [_source(small)], params))  # compiled first
    plane, _ = _noisy((1024, 1024))  # a run of a second or more: the bar reports many times
    gen = _denoise.denoise_task(_runner.Control(), [_source(plane)], params)
    t0, seen = time.perf_counter(), []
    for item in gen:
        if isinstance(item, _runner.Progress):
            seen.append((time.perf_counter() - t0, item.fraction))
    total = time.perf_counter() - t0
    at_half = next(f for t, f in seen if t >= total / 2)
    assert at_half <= 0.85, seen


def test_the_first_preview_answers_before_the_layers_noise_model_is_estimated(monkeypatch):
    """With noise='auto' the layer's model is estimated once on the library's sample, seconds on a large layer: the
    first preview answered only after it (3x the former wait at 4096 x 4096, benchmarks/bench_preview_ab.py); now
    the quick answer comes while it runs."""
    monkeypatch.delenv(_common.SYNC_ENV)  # the estimate in its thread, as in the widget
    noisy, _ = _noisy((64, 64))
    src = _source(noisy)
    events = []
    real = restore.estimate_noise

    def counted(*args, **kwargs):
        time.sleep(1.0)  # a large layer's
        est = real(*args, **kwargs)
        events.append("estimate")
        return est

    cache = _common.LruCache()
    _runner.drive(_denoise.preview_task(_runner.Control(), _source(noisy.T.copy()), (), (0, 64, 0, 64),
                                        _denoise.DenoiseParams(), cache))  # kernels loaded: the answers' own times
    monkeypatch.setattr(restore, "estimate_noise", counted)
    seen = []
    for v in _denoise.preview_task(_runner.Control(), src, (), (0, 64, 0, 64), _denoise.DenoiseParams(), cache):
        seen.append(v)
        if isinstance(v, _runner.Output):
            events.append("provisional" if v.value[1].provisional else "final")
    assert events == ["provisional", "estimate", "final"], events
    ((data, _),) = [v.value for v in seen if isinstance(v, _runner.Output) and not v.value[1].provisional]
    again, _ = _runner.drive(_denoise.preview_task(_runner.Control(), src, (), (0, 64, 0, 64),
                                                   _denoise.DenoiseParams(), cache))
    np.testing.assert_array_equal([v.value[0] for v in again if isinstance(v, _runner.Output)][-1], data)


def test_the_quick_answer_of_a_non_local_preview_says_it_is_the_fast_method():
    """Before the layer's noise model was known, the non-local preview's quick answer said 'SURE running' (a lam of
    the wavelet method's), and its lam was kept as the one to start a manual lam from."""
    noisy, _ = _noisy((64, 64))
    seen, _ = _runner.drive(_denoise.preview_task(_runner.Control(), _source(noisy), (), (0, 64, 0, 64),
                                                  _denoise.DenoiseParams(method="nonlocal"), _common.LruCache()))
    infos = [v.value[1] for v in seen if isinstance(v, _runner.Output)]
    assert isinstance(infos[0], _denoise.MethodInfo) and infos[0].provisional
    assert "fast wavelet tree for now" in _denoise.format_info(infos[0])
    assert not isinstance(infos[-1], _denoise.MethodInfo) or not infos[-1].provisional


def test_a_preview_replaced_while_it_waits_for_the_layers_estimate_leaves_it_running_for_the_next(monkeypatch):
    """A pan or zoom replaces the preview: the layer's noise estimate, started when the layer was chosen, went
    down with it and the next preview estimated again. It goes on, and the next preview takes its value."""
    monkeypatch.delenv(_common.SYNC_ENV)  # the estimate in its thread, as in the widget
    noisy, _ = _noisy((64, 64))
    src, params, cache = _source(noisy), _denoise.DenoiseParams(), _common.LruCache()
    proceed, calls, ended, real = threading.Event(), [], [], restore.estimate_noise

    def held(*args, **kwargs):
        calls.append(1)
        proceed.wait(20)
        est = real(*args, **kwargs)
        ended.append(1)
        return est

    monkeypatch.setattr(restore, "estimate_noise", held)
    _denoise.estimate_ahead(src, params, cache)  # the layer chosen
    first = _runner.Control()
    gen = _denoise.preview_task(first, src, (), (0, 64, 0, 64), params, cache)
    seen = []
    while not any(isinstance(v, _runner.Output) for v in seen):  # the quick answer, then the wait for the estimate
        seen.append(next(gen))
    first.cancel()  # the view moved
    with pytest.raises(restore.Cancelled):
        for _ in range(100):
            next(gen)
    proceed.set()
    out, _ = _runner.drive(_denoise.preview_task(_runner.Control(), src, (), (0, 64, 0, 64), params, cache))
    assert calls == [1] and ended == [1]
    assert not [v for v in out if isinstance(v, _runner.Output)][-1].value[1].provisional


def test_a_previews_final_answer_reads_the_planes_noise_once_and_matches_a_fresh_call(monkeypatch):
    """The quick answer (the rule's lam) and SURE's final one each estimated the region's sigma: the second,
    0.06 s of a 1024 x 1024 preview's serial time, read the same value again."""
    import restore.denoise._noise_model as noise_model

    noisy, _ = _noisy((128, 128))
    src, params = _source(noisy), _denoise.DenoiseParams(noise="gaussian")
    calls, real = [], noise_model.gaussian_sigma
    monkeypatch.setattr(noise_model, "gaussian_sigma", lambda x: (calls.append(1), real(x))[1])
    seen, _ = _runner.drive(_denoise.preview_task(_runner.Control(), src, (), (0, 128, 0, 128), params,
                                                  _common.LruCache()))
    answers = [v.value for v in seen if isinstance(v, _runner.Output)]
    assert [info.provisional for _, info in answers] == [True, False] and len(calls) == 1
    fresh, info = _runner.drive(_denoise.denoise_plane(_runner.Control(), noisy, params, False))[1]
    np.testing.assert_array_equal(answers[-1][0], _common.like_input(fresh, src.dtype))
    assert answers[-1][1] == info


def test_a_preview_waiting_for_an_estimate_that_a_cancelled_apply_stopped_estimates_on_its_own(monkeypatch):
    """Apply adopts the layer's estimate started ahead, and its Cancel stops it: a preview waiting for the same
    estimate ended as cancelled too (silently, stuck on its provisional answer). It now estimates on its own."""
    monkeypatch.delenv(_common.SYNC_ENV)  # the estimate in its thread, as in the widget
    noisy, _ = _noisy((64, 64))
    src, params, cache = _source(noisy), _denoise.DenoiseParams(), _common.LruCache()
    proceed, calls, real = threading.Event(), [], restore.estimate_noise

    def held(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            proceed.wait(20)
        return real(*args, **kwargs)

    monkeypatch.setattr(restore, "estimate_noise", held)
    _denoise.estimate_ahead(src, params, cache)  # the layer chosen
    preview = _denoise.preview_task(_runner.Control(), src, (), (0, 64, 0, 64), params, cache)
    seen = []
    while not any(isinstance(v, _runner.Output) for v in seen):  # the quick answer: now it waits
        seen.append(next(preview))
    apply = _runner.Control()
    _denoise._start_estimate(apply, src, params, cache)  # Apply adopts it...
    apply.cancel()  # ... and is cancelled
    proceed.set()
    seen += list(preview)
    answers = [v.value for v in seen if isinstance(v, _runner.Output)]
    assert not answers[-1][1].provisional and len(calls) == 2


def test_a_stopped_estimate_kept_in_the_cache_does_not_keep_the_layers_data():
    import gc
    import tracemalloc

    cache = _common.LruCache()
    tracemalloc.start()
    try:
        noisy = np.random.default_rng(0).random((2048, 2048), dtype=np.float32)  # 16 MB
        src = _source(noisy)
        _denoise.estimate_ahead(src, _denoise.DenoiseParams(), cache)
        ahead = cache.get((src.key, "noise", "auto"))
        ahead.stop()
        deadline = time.monotonic() + 30
        while any(t.name == "restore-ahead" for t in threading.enumerate()) and time.monotonic() < deadline:
            time.sleep(0.01)  # its thread ends at its next progress report
        before = tracemalloc.get_traced_memory()[0]
        del noisy, src, ahead
        gc.collect()
        freed = before - tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert freed >= 15 * 2**20, f"{freed / 2**20:.0f} MB freed"


def test_an_estimate_that_failed_stays_free_of_the_frames_of_the_tasks_it_failed(monkeypatch):
    # raised to a task that waits for it, the kept error took that task's frames, and their data, into the cache
    import gc
    import tracemalloc

    monkeypatch.delenv(_common.SYNC_ENV)
    noisy, _ = _noisy((64, 64))
    src, params, cache = _source(noisy), _denoise.DenoiseParams(), _common.LruCache()

    def broken(*args, **kwargs):
        raise ValueError("a read error")

    monkeypatch.setattr(restore, "estimate_noise", broken)
    _denoise.estimate_ahead(src, params, cache)
    ahead = cache.get((src.key, "noise", "auto"))
    deadline = time.monotonic() + 30
    while any(t.name == "restore-ahead" for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.01)
    tracemalloc.start()
    try:
        def task():
            big = np.ones(4 * 2**20)  # 32 MB in the waiting task's frame
            yield from ahead.join(_runner.Control(), own=False).wait()
            return big

        with pytest.raises(ValueError, match="a read error"):
            _runner.drive(task())
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert held < 8 * 2**20, f"{held / 2**20:.0f} MB still held"
