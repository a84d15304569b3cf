"""Bad input is refused up front with an error naming the parameter, its value and what is allowed."""

import time
import tracemalloc

import numpy as np
import pytest

from restore import (
    TreeDictionaryLearning,
    choose_lam,
    denoise_wavelet_tree,
    estimate_sigma,
    inpaint,
    learn_dictionary,
    sparse_encode,
    wavelet_quadtree,
)


@pytest.fixture(scope="module")
def photo():
    from skimage import data

    return data.astronaut()[100:164, 180:244] / 255.0  # 64 x 64 x 3


@pytest.fixture(scope="module")
def strokes():
    m = np.zeros((64, 64), bool)
    m[20:23, 5:60] = True
    m[40:55, 30:33] = True
    return m


# ---------------------------------------------------------------------------
# Levels beyond what the image allows
# ---------------------------------------------------------------------------


def test_level_beyond_the_image_is_refused_before_any_allocation():
    img = np.zeros((512, 512))
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=r"level 12 .* at most 6"):
            denoise_wavelet_tree(img, level=12, lam=0.1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50e6  # today level 12 pads 512² to 4096² and allocates gigabytes
    with pytest.raises(ValueError, match=r"level 12 .* at most 6"):
        choose_lam(img, sigma=0.1, level=12)
    with pytest.raises(ValueError, match=r"level 9 .* at most"):
        wavelet_quadtree((512, 512), "db3", 9)


def test_deepest_allowed_level_works():
    img = np.random.default_rng(0).standard_normal((512, 512))
    assert denoise_wavelet_tree(img, level=6, lam=0.1).shape == img.shape


# ---------------------------------------------------------------------------
# Counts and sizes
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["batch_size", "max_iter"])
@pytest.mark.parametrize("value", [0, -3])
def test_sparse_encode_counts(name, value, rng):
    X, D = rng.standard_normal((10, 8)), rng.standard_normal((5, 8))
    with pytest.raises(ValueError, match=rf"{name} must be an integer >= 1, got {value}"):
        sparse_encode(X, D, lam=0.1, penalty="l1", **{name: value})


@pytest.mark.parametrize(("name", "value"), [("batch_size", 0), ("max_iter", 0), ("n_passes", 0), ("n_train", -1),
                                             ("patch_size", 1), ("stride", 0)])
def test_inpaint_counts(name, value, photo, strokes):
    with pytest.raises(ValueError, match=rf"{name} must be an integer"):
        inpaint(photo, strokes, channel_axis=-1, **{name: value})


@pytest.mark.parametrize(("name", "value"), [("n_epochs", 0), ("n_patches", 0), ("patch_size", 0)])
def test_learn_dictionary_counts_before_any_work(name, value, photo):
    with pytest.raises(ValueError, match=rf"{name} must be an integer"):
        learn_dictionary(photo, channel_axis=-1, **{name: value})


@pytest.mark.parametrize(("name", "value"), [("batch_size", 0), ("n_epochs", 0), ("max_code_iter", -1)])
def test_estimator_counts(name, value, rng):
    with pytest.raises(ValueError, match=rf"{name}"):
        TreeDictionaryLearning((2,), **{name: value}).fit(rng.standard_normal((20, 4)))


# ---------------------------------------------------------------------------
# Negative or non-finite numbers
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", [-0.1, np.nan, np.inf])
def test_negative_or_nonfinite_lam_and_sigma(value, photo, strokes, rng):
    grey = photo[..., 0]
    for call in (lambda: denoise_wavelet_tree(grey, lam=value),
                 lambda: denoise_wavelet_tree(grey, sigma=value),
                 lambda: choose_lam(grey, sigma=value),
                 lambda: inpaint(photo, strokes, channel_axis=-1, lam=value),
                 lambda: learn_dictionary(photo, channel_axis=-1, lam=value),
                 lambda: sparse_encode(rng.standard_normal((3, 4)), np.eye(4), lam=value, penalty="l1")):
        with pytest.raises(ValueError, match=r"(lam|sigma) must be"):
            call()


# ---------------------------------------------------------------------------
# Images: NaN, empty, tiny; masks
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nan_or_inf_in_images(bad, photo, strokes):
    grey = photo[..., 0].copy()
    grey[3, 4] = bad
    with pytest.raises(ValueError, match="image contains NaN or infinite values"):
        denoise_wavelet_tree(grey, sigma=0.1)
    with pytest.raises(ValueError, match="image contains NaN or infinite values"):
        estimate_sigma(grey)
    with pytest.raises(ValueError, match="contains NaN or infinite values"):
        learn_dictionary(grey)
    known = photo.copy()
    known[0, 0, 0] = bad  # a known pixel
    with pytest.raises(ValueError, match="NaN or infinite"):
        inpaint(known, strokes, channel_axis=-1)
    hole = photo.copy()
    hole[21, 10] = bad  # under the mask: it is missing anyway, so accepted
    out = inpaint(hole, strokes, channel_axis=-1, n_passes=2)
    assert np.all(np.isfinite(out))


@pytest.mark.parametrize("shape", [(0, 0), (0, 5), (1, 1), (1, 64)])
def test_empty_or_one_pixel_images(shape):
    img = np.zeros(shape)
    for call in (lambda: denoise_wavelet_tree(img, sigma=0.1), lambda: estimate_sigma(img),
                 lambda: choose_lam(img, sigma=0.1), lambda: inpaint(img, np.zeros(shape, bool)),
                 lambda: learn_dictionary(img)):
        with pytest.raises(ValueError, match=r"image .*(at least|empty)"):
            call()


def test_mask_shape_mismatch(photo, strokes):
    with pytest.raises(ValueError, match=r"mask .*\(64, 64\).*\(63, 64\)|mask .*\(63, 64\).*\(64, 64\)"):
        inpaint(photo, strokes[:-1], channel_axis=-1)
    with pytest.raises(ValueError, match=r"mask"):
        learn_dictionary(photo, masks=strokes[:, :-1], channel_axis=-1)


# ---------------------------------------------------------------------------
# Names: the list of valid ones
# ---------------------------------------------------------------------------


def test_unknown_names_list_the_valid_ones(photo, rng):
    grey = photo[..., 0]
    with pytest.raises(ValueError, match=r"Invalid penalty: 'tree-l2'.*l1, l0, tree_l2, tree_linf, tree_l0"):
        denoise_wavelet_tree(grey, penalty="tree-l2")
    with pytest.raises(ValueError, match=r"Invalid wavelet: 'db99'.*haar.*dbN.*symN.*coifN"):
        denoise_wavelet_tree(grey, wavelet="db99")
    with pytest.raises(ValueError, match=r"Invalid penalty"):
        learn_dictionary(photo, channel_axis=-1, penalty="tree")
    with pytest.raises(ValueError, match=r"Invalid penalty"):
        sparse_encode(rng.standard_normal((3, 4)), np.eye(4), lam=0.1, penalty="lasso")


# ---------------------------------------------------------------------------
# dtypes: float16 in, float16 out (computed in float32)
# ---------------------------------------------------------------------------


def test_float16_is_computed_in_float32_and_returned_as_float16(photo, strokes):
    img16 = photo.astype(np.float16)
    out = inpaint(img16, strokes, channel_axis=-1, n_passes=2)
    assert out.dtype == np.float16 and np.all(np.isfinite(out))
    np.testing.assert_array_equal(out[~strokes], img16[~strokes])
    den = denoise_wavelet_tree(img16[..., 0], sigma=0.05)
    assert den.dtype == np.float16
    ref = denoise_wavelet_tree(img16[..., 0].astype(np.float32), sigma=0.05)
    np.testing.assert_allclose(den, ref.astype(np.float16), atol=1e-3)


# ---------------------------------------------------------------------------
# Scale: results do not depend on the image's units
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("scale", [1e-10, 1e6, 1e150])
def test_inpaint_is_scale_invariant(scale, photo, strokes):
    base = inpaint(photo, strokes, channel_axis=-1, n_passes=4)
    scaled = inpaint(photo * scale, strokes, channel_axis=-1, n_passes=4)
    assert np.all(np.isfinite(scaled))
    np.testing.assert_allclose(scaled / scale, base, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("scale", [1e-10, 1e150])
def test_denoise_is_scale_invariant(scale, photo, rng):
    noisy = photo[..., 0] + 0.1 * rng.standard_normal(photo.shape[:2])
    base = denoise_wavelet_tree(noisy)
    scaled = denoise_wavelet_tree(noisy * scale)
    assert np.all(np.isfinite(scaled))
    np.testing.assert_allclose(scaled / scale, base, rtol=1e-6, atol=1e-9)


def test_validation_comes_before_heavy_work(photo, strokes):
    t0 = time.perf_counter()
    with pytest.raises(ValueError):
        inpaint(photo, strokes, channel_axis=-1, max_iter=0)
    assert time.perf_counter() - t0 < 0.5
