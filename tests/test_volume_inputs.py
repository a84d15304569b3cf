"""What users give the volume path: integer counts, axes in any order, stacks, Dask arrays; refused up front or
denoised consistently."""

import numpy as np
import pytest
from dask_helpers import computed_blocks

from restore import denoise_wavelet_tree

da = pytest.importorskip("dask.array")


def counts(shape=(16, 64, 64), seed=0):
    """Photon counts: a dim background of 5 and a bright cube of 50."""
    rng = np.random.default_rng(seed)
    clean = np.full(shape, 5.0)
    clean[4:12, 16:48, 16:48] = 50.0
    return rng.poisson(clean)


def test_integer_counts_of_any_width_denoise_alike():
    """int64 counts are scaled by 2**63 - 1 as scikit-image does: the estimate of their noise must not break there."""
    z = counts()
    kw = {"axes": (0, 1, 2), "noise": "poisson-gaussian", "cycle_spins": 2}
    ref = denoise_wavelet_tree(z.astype(np.uint16), **kw) * np.iinfo(np.uint16).max
    for dtype in (np.int32, np.int64):
        out = denoise_wavelet_tree(z.astype(dtype), **kw) * np.iinfo(dtype).max
        np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6 * ref.max())
    assert abs(ref[0].mean() - 5.0) < 0.5  # the background keeps its level


def test_a_gain_in_counts_for_an_integer_image_is_refused():
    """Integer images are read in [0, 1]: a gain of 1 count per photon would leave every voxel under one photon."""
    z = counts().astype(np.uint16)
    with pytest.raises(ValueError, match=r"gain=1\.0 .*larger than the image's largest value.*65535"):
        denoise_wavelet_tree(z, axes=(0, 1, 2), noise="poisson-gaussian", gain=1.0, sigma=0.0)
    out = denoise_wavelet_tree(z, axes=(0, 1, 2), noise="poisson-gaussian", gain=1 / 65535, sigma=0.0)
    assert abs(out[0].mean() * 65535 - 5.0) < 0.5


def test_per_axis_levels_follow_the_order_of_axes():
    rng = np.random.default_rng(1)
    x = rng.random((64, 64, 16))
    kw = {"lam": 0.2, "sigma": 0.2, "wiener": False}
    out = denoise_wavelet_tree(x, axes=(2, 0, 1), level=(1, 2, 2), **kw)
    np.testing.assert_allclose(out, denoise_wavelet_tree(x, axes=(0, 1, 2), level=(2, 2, 1), **kw), atol=1e-12)


@pytest.mark.parametrize(("shape", "level"), [((2, 8, 8), 7), ((8, 16, 16), (1, 2, 5)), ((4, 64, 64), (3, 3, 3))])
def test_levels_deeper_than_an_axis_are_refused(shape, level):
    with pytest.raises(ValueError, match=r"level .* too deep for an axis of \d+ samples"):
        denoise_wavelet_tree(np.zeros(shape), axes=(0, 1, 2), level=level, lam=0.1)


def test_a_plane_or_channel_denoises_as_on_its_own():
    """SURE's probe starts afresh on every plane and channel: a stack is its planes, a colour volume its channels."""
    rng = np.random.default_rng(2)
    stack = rng.random((4, 64, 64)) * 0.3 + 0.2 * rng.standard_normal((4, 64, 64))
    np.testing.assert_allclose(denoise_wavelet_tree(stack, sigma=0.2)[2], denoise_wavelet_tree(stack[2], sigma=0.2),
                               atol=1e-12)
    vol = rng.random((8, 32, 32, 2))
    both = denoise_wavelet_tree(vol, axes=(0, 1, 2), channel_axis=-1, sigma=0.2)
    np.testing.assert_allclose(both[..., 1], denoise_wavelet_tree(vol[..., 1], axes=(0, 1, 2), sigma=0.2),
                               atol=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"penalty": "l3"}, "penalty"),
        ({"sigma": -1.0}, "sigma"),
        ({"lam": -0.1}, "lam"),
        ({"noise": "poisson"}, "noise"),
        ({"noise": "poisson-gaussian", "gain": 0.0}, "gain"),
        ({"gain": 0.1}, "gain"),
        ({"cycle_spins": -1}, "cycle_spins"),
        ({"wiener": "x"}, "wiener"),
        ({"lam": "sure", "penalty": "l0"}, "sure"),
        ({"lam": [0.1, 0.2]}, "lam"),
        ({"level": 9}, "level"),
        ({"wavelet": "bior1.3"}, "wavelet"),
    ],
)
def test_a_dask_array_is_refused_bad_options_at_the_call(kwargs, match):
    lazy = da.zeros((16, 64, 64), chunks=(16, 32, 32))
    with pytest.raises(ValueError, match=match):
        denoise_wavelet_tree(lazy, axes=(0, 1, 2), **kwargs)


@pytest.mark.parametrize("dtype", [np.complex128, np.str_])
def test_a_dask_array_of_the_wrong_kind_is_refused_at_the_call(dtype):
    with pytest.raises(ValueError, match="real numeric"):
        denoise_wavelet_tree(da.zeros((16, 64, 64), chunks=16, dtype=dtype), axes=(0, 1, 2))


def test_an_empty_dask_array_is_refused_at_the_call():
    with pytest.raises(ValueError, match="empty"):
        denoise_wavelet_tree(da.zeros((0, 64, 64), chunks=(1, 32, 32)), axes=(0, 1, 2))


def test_a_lazy_result_says_its_dtype():
    v = np.random.default_rng(3).random((16, 64, 64)).astype(np.float16)
    lazy = denoise_wavelet_tree(da.from_array(v, chunks=(16, 32, 32)), axes=(0, 1, 2), lam=0.1, sigma=0.1)
    assert lazy.compute().dtype == lazy.dtype == np.float16


def test_lazy_planes_use_the_levels_of_the_whole_plane():
    rng = np.random.default_rng(4)
    yy, xx = np.mgrid[:2048, :1024] / 512  # default levels 6: blocks along y only
    clean = 0.5 + 0.4 * np.sin(6 * xx) * np.cos(4 * yy)
    noisy = clean + 0.1 * rng.standard_normal(clean.shape)
    lazy = denoise_wavelet_tree(da.from_array(noisy, chunks=256), lam=0.15, sigma=0.1)
    assert lazy.numblocks[0] > 1
    lazy = lazy.compute()
    ref = denoise_wavelet_tree(noisy, lam=0.15, sigma=0.1)
    inner = (slice(256, -256), slice(None))
    ref_err, lazy_err = np.mean((ref - clean)[inner] ** 2), np.mean((lazy - clean)[inner] ** 2)
    assert abs(10 * np.log10(ref_err / lazy_err)) < 0.05


# small pure-Poisson data: the read noise is not determined, and estimate_noise says so
@pytest.mark.filterwarnings("ignore:The noise estimate is uncertain:UserWarning")
def test_a_lazy_volume_estimates_its_photon_noise_once():
    """Not once a block: a block of dark background alone cannot tell photon noise from read noise."""
    rng = np.random.default_rng(5)
    clean = np.full((16, 256, 256), 2.0)
    clean[:, 64:192, 64:192] = 40.0
    noisy = rng.poisson(clean).astype(np.float64)
    kw = {"axes": (0, 1, 2), "noise": "poisson-gaussian", "lam": 1.0}
    lazy = denoise_wavelet_tree(da.from_array(noisy, chunks=(16, 128, 128)), **kw).compute()
    ref = denoise_wavelet_tree(noisy, **kw)
    inner = (slice(None), slice(64, -64), slice(64, -64))
    assert np.abs(lazy - ref)[inner].max() < 0.05 * clean.max()


def test_progress_completes_without_noise():
    reports = []
    denoise_wavelet_tree(np.random.default_rng(6).random((8, 32, 32)), axes=(0, 1, 2), sigma=0.0,
                         progress=lambda d, t: reports.append((d, t)))
    assert reports[-1][0] == reports[-1][1]


def test_one_read_noise_for_photon_noise_in_colour():
    vol = np.random.default_rng(7).random((8, 32, 32, 3))
    with pytest.raises(ValueError, match=r"sigma .*one number.*poisson-gaussian"):
        denoise_wavelet_tree(vol, axes=(0, 1, 2), channel_axis=-1, noise="poisson-gaussian", gain=0.01,
                             sigma=[0.1, 0.1, 0.1])


@pytest.mark.parametrize(("shape", "axes"), [((8, 64, 64), None), ((3, 16, 32, 32), (1, 2, 3))])
def test_one_plane_or_volume_of_a_lazy_stack_is_denoised_alone(shape, axes):
    """Chunks spanning several planes (a store's) must not make one plane's result denoise its neighbours too."""
    x = np.random.default_rng(8).random(shape)
    lazy = denoise_wavelet_tree(da.from_array(x, chunks=(4,) + shape[1:]), axes=axes, lam=0.1, sigma=0.1)
    with computed_blocks(lazy) as seen:
        one = lazy[2].compute(optimize_graph=False)  # the blocks keep their names
    assert seen == [(1,) + shape[1:]]
    np.testing.assert_allclose(one, denoise_wavelet_tree(x, axes=axes, lam=0.1, sigma=0.1)[2], atol=1e-12)




def test_choosing_lam_first_reads_levels_in_the_order_of_axes_too():
    from restore import choose_lam

    rng = np.random.default_rng(9)
    vol = 0.5 + 0.1 * rng.standard_normal((8, 16, 32))
    kw = {"axes": (2, 0, 1), "level": (2, 1, 2), "sigma": 0.1, "wiener": False}
    choice = choose_lam(vol, **{k: v for k, v in kw.items() if k != "wiener"})
    np.testing.assert_allclose(denoise_wavelet_tree(vol, lam=choice, **kw), denoise_wavelet_tree(vol, **kw),
                               atol=1e-12)


def test_photon_noise_needs_an_image_whose_zero_is_no_light():
    """A camera offset left in (or taken off twice) is no photon count: refused, not denoised to zeros."""
    z = counts().astype(np.float64) - 100.0
    with pytest.raises(ValueError, match=r"mean -\d+.* below 0.*camera offset"):
        denoise_wavelet_tree(z, axes=(0, 1, 2), noise="poisson-gaussian", gain=1.0, sigma=0.0)


def test_every_block_of_a_lazy_plane_takes_the_levels_of_the_whole():
    """A block at the edge may be small (Dask merges a short last chunk): deep levels are the whole's, not its own."""
    x = np.random.default_rng(10).random((1030, 1030)).astype(np.float32)
    corner = denoise_wavelet_tree(da.from_array(x, chunks=-1), sigma=0.1, lam=0.1, wavelet="db8")[-2:, -2:]
    assert corner.compute().shape == (2, 2)


def test_a_dark_plane_of_a_lazy_stack_is_denoised_as_in_memory():
    """The photon model is checked on the whole, once: a block of one dark plane is no image of its own."""
    rng = np.random.default_rng(11)
    bright = 3 * rng.poisson(np.full((64, 64), 40.0))  # 3 counts a photon
    dark = rng.integers(0, 3, (64, 64))  # under one photon everywhere: read noise only
    stack = np.stack([bright, dark]).astype(np.uint16)
    kw = {"noise": "poisson-gaussian", "gain": 3 / 65535, "sigma": 1 / 65535, "lam": 1.0}
    lazy = denoise_wavelet_tree(da.from_array(stack, chunks=(1, 64, 64)), **kw).compute()
    np.testing.assert_allclose(lazy, denoise_wavelet_tree(stack, **kw), atol=1e-12)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"method": 0.5}, "method"),
    ({"noise": "poisson-gaussian", "gain": 3.0}, "gain=3.0 .*larger than the image's largest value")])
def test_choose_lam_refuses_what_denoise_refuses(kwargs, match):
    from restore import choose_lam

    with pytest.raises(ValueError, match=match):
        choose_lam(counts((16, 64, 64)).astype(np.uint16)[0], **kwargs)


@pytest.mark.parametrize("rng", [np.random.SeedSequence(1), [1, 2], np.int64(3)])
def test_any_seed_numpy_takes_is_a_seed_here(rng):
    x = np.random.default_rng(12).random((32, 32))
    np.testing.assert_allclose(denoise_wavelet_tree(x, sigma=0.1, rng=rng), denoise_wavelet_tree(x, sigma=0.1, rng=rng))


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"sigma": 1e300}, "sigma .*too large"),
    ({"noise": "poisson-gaussian", "gain": 1e-300, "sigma": 0.0}, "gain .*out of range"),
    ({"noise": "poisson-gaussian", "gain": 0.1, "sigma": 1e300}, "sigma .*too large")])
def test_noise_parameters_whose_squares_overflow_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        denoise_wavelet_tree(np.random.default_rng(13).random((8, 16, 16)), axes=(0, 1, 2), **kwargs)


def test_a_dark_image_of_read_noise_alone_is_no_camera_offset():
    """No light and zero-mean read noise: a mean a little below 0 is the noise, not an offset left in."""
    rng = np.random.default_rng(14)
    dark = 0.02 * rng.standard_normal((8, 32, 32))
    dark -= dark.mean() + 1e-4  # the mean just below 0, as it is half of the time
    out = denoise_wavelet_tree(dark, axes=(0, 1, 2), noise="poisson-gaussian", gain=0.1, sigma=0.02)
    assert np.isfinite(out).all() and abs(out.mean()) < 0.01
