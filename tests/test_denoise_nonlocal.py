"""denoise_nonlocal_tree: what a user gets (quality, conventions, refusals, progress, cancel, Dask)."""

import numpy as np
import pytest
from skimage import data

from restore import Cancelled, denoise_nonlocal_tree, denoise_wavelet_tree


def psnr(x, ref, peak=1.0):
    return 10 * np.log10(peak**2 / np.mean((x - ref) ** 2))


@pytest.fixture(scope="module")
def camera():
    return data.camera()[96:224, 128:256] / 255.0  # 128 x 128 in [0, 1]: textures, edges and flat sky


@pytest.fixture(scope="module")
def noisy(camera):
    return camera + 0.1 * np.random.default_rng(0).standard_normal(camera.shape)


def test_beats_the_wavelet_tree_method(camera, noisy):
    out = denoise_nonlocal_tree(noisy, sigma=0.1)
    fast = denoise_wavelet_tree(noisy, sigma=0.1)
    assert psnr(out, camera) > psnr(fast, camera) + 0.5
    assert psnr(out, camera) > psnr(noisy, camera) + 8


def test_estimates_sigma_when_not_given(camera, noisy):
    given = denoise_nonlocal_tree(noisy, sigma=0.1)
    estimated = denoise_nonlocal_tree(noisy)
    assert abs(psnr(estimated, camera) - psnr(given, camera)) < 0.3


def test_dtypes_and_input_untouched(noisy):
    n32 = noisy.astype(np.float32)
    before = n32.copy()
    out = denoise_nonlocal_tree(n32, sigma=0.1)
    assert out.dtype == np.float32 and out.shape == n32.shape
    np.testing.assert_array_equal(n32, before)
    u8 = np.clip(noisy * 255, 0, 255).astype(np.uint8)
    out8 = denoise_nonlocal_tree(u8, sigma=0.1)
    # read in [0, 1] as img_as_float reads it; the estimate is not clipped (as for float input)
    assert out8.dtype == np.float64 and -0.05 <= out8.min() and out8.max() <= 1.05


def test_constant_image_stays_constant():
    flat = np.full((40, 50), 0.3)
    np.testing.assert_allclose(denoise_nonlocal_tree(flat, sigma=0.05), flat, atol=1e-12)
    np.testing.assert_allclose(denoise_nonlocal_tree(flat), flat, atol=1e-12)  # sigma estimated: 0


def test_strength_trades_smoothness_for_detail(noisy):
    soft, default, strong = (denoise_nonlocal_tree(noisy, sigma=0.1, strength=s) for s in (0.5, 1.0, 2.0))
    assert np.std(noisy - soft) < np.std(noisy - default) < np.std(noisy - strong)


def test_colour_stack_and_volume(camera, noisy):
    rng = np.random.default_rng(1)
    rgb = np.stack([camera, camera[::-1], camera.T], axis=-1)
    noisy_rgb = rgb + 0.1 * rng.standard_normal(rgb.shape)
    out = denoise_nonlocal_tree(noisy_rgb, sigma=0.1, channel_axis=-1)
    assert out.shape == rgb.shape and psnr(out, rgb) > psnr(noisy_rgb, rgb) + 7
    stack = np.stack([noisy, noisy[::-1]])
    planes = denoise_nonlocal_tree(stack, sigma=0.1)
    np.testing.assert_allclose(planes[1], denoise_nonlocal_tree(noisy[::-1], sigma=0.1), atol=1e-12)
    vol_clean = np.repeat(camera[None, :32, :32], 16, axis=0)
    vol = vol_clean + 0.1 * rng.standard_normal(vol_clean.shape)
    out_vol = denoise_nonlocal_tree(vol, sigma=0.1, axes=(0, 1, 2))
    assert psnr(out_vol, vol_clean) > psnr(vol, vol_clean) + 8


def test_photon_noise(camera):
    rng = np.random.default_rng(2)
    photons = 30.0 * camera
    counts = rng.poisson(photons) + 0.5 * rng.standard_normal(camera.shape)
    out = denoise_nonlocal_tree(counts, noise="poisson-gaussian", gain=1.0, sigma=0.5)
    assert psnr(out / 30.0, camera) > psnr(counts / 30.0, camera) + 7


def test_dask_blocks_agree_with_memory(noisy):
    da = pytest.importorskip("dask.array")
    big = np.concatenate([noisy, noisy[::-1], noisy.T, noisy[:, ::-1], noisy[::-1, ::-1].T, noisy], axis=1)
    whole = denoise_nonlocal_tree(big, sigma=0.1)
    lazy = denoise_nonlocal_tree(da.from_array(big, chunks=(128, 128)), sigma=0.1)
    assert isinstance(lazy, da.Array) and lazy.numblocks[1] >= 2  # 128 x 768: blocks along x
    np.testing.assert_allclose(lazy.compute(), whole, atol=1e-10)


def test_progress_moves_and_cancel_stops(noisy):
    seen = []
    denoise_nonlocal_tree(noisy, sigma=0.1, progress=lambda d, t: seen.append((d, t)))
    assert len(seen) >= 4 and seen[-1][0] == seen[-1][1]
    assert all(b[0] >= a[0] for a, b in zip(seen, seen[1:], strict=False))

    def cancel(done, total):
        if done >= 2:
            raise Cancelled

    with pytest.raises(Cancelled):
        denoise_nonlocal_tree(noisy, sigma=0.1, progress=cancel)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"strength": 0.0}, "strength"),
    ({"strength": float("nan")}, "strength"),
    ({"sigma": -1.0}, "sigma"),
    ({"noise": "speckle"}, "noise"),
    ({"gain": 2.0}, "gain"),
    ({"axes": (0, 1, 2)}, "axes"),
])
def test_bad_settings_are_refused_up_front(noisy, kwargs, match):
    with pytest.raises(ValueError, match=match):
        denoise_nonlocal_tree(noisy, **kwargs)


def test_images_too_small_or_not_finite_are_refused(noisy):
    with pytest.raises(ValueError, match="at least 8"):
        denoise_nonlocal_tree(np.zeros((6, 40)), sigma=0.1)
    with pytest.raises(ValueError, match="image must be at least 5"):  # the cubes of the 3-D Wiener stage
        denoise_nonlocal_tree(np.zeros((4, 40, 40)), sigma=0.1, axes=(0, 1, 2))
    bad = noisy.copy()
    bad[3, 4] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        denoise_nonlocal_tree(bad, sigma=0.1)


def test_dask_volume_blocks_agree_with_memory():
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(3)
    clean = np.repeat(np.sin(np.linspace(0, 12, 256))[None, None, :], 16, axis=1).repeat(8, axis=0)
    vol = clean + 0.2 * rng.standard_normal(clean.shape)
    whole = denoise_nonlocal_tree(vol, sigma=0.2, axes=(0, 1, 2))
    lazy = denoise_nonlocal_tree(da.from_array(vol, chunks=(8, 16, 32)), sigma=0.2, axes=(0, 1, 2))
    assert lazy.numblocks[2] >= 2
    np.testing.assert_allclose(lazy.compute(), whole, atol=1e-10)


def test_dask_volume_shown_slice_by_slice_agrees_with_memory():
    # sliced_axes (the plugin's volumes): chunks deeper than the largest core must still start blocks on the grid
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(5)
    clean = np.repeat(np.sin(np.linspace(0, 30, 260))[:, None, None], 12, axis=1).repeat(12, axis=2)
    vol = clean + 0.2 * rng.standard_normal(clean.shape)
    whole = denoise_nonlocal_tree(vol, sigma=0.2, axes=(0, 1, 2))
    lazy = denoise_nonlocal_tree(da.from_array(vol, chunks=(260, 12, 12)), sigma=0.2, axes=(0, 1, 2),
                                 sliced_axes=(0,))
    np.testing.assert_allclose(lazy.compute(), whole, atol=1e-10)


def test_calls_at_once_share_one_pool_of_threads(noisy):
    # Dask blocks in flight, or a preview beside an Apply: no pool of threads per call (cores x cores threads)
    import threading

    from restore._config import default_num_threads

    seen = [0]

    def watch(done, total):
        alive = sum(t.name.startswith(("restore-nonlocal", "restore-prox")) for t in threading.enumerate())
        seen[0] = max(seen[0], alive)

    runs = [threading.Thread(target=denoise_nonlocal_tree, args=(noisy,), kwargs={"sigma": 0.1, "progress": watch})
            for _ in range(3)]
    for t in runs:
        t.start()
    for t in runs:
        t.join()
    assert seen[0] <= default_num_threads()


def test_the_methods_three_channel_path_shares_groups_and_takes_three_channels_steps(camera):
    # the driver's seam for colour (NonlocalTree.denoise_channels): the core's shared groups, the steps of 3 channels
    from restore._nonlocal import nonlocal_denoise
    from restore._progress import Steps
    from restore.denoise._layout import check_layout
    from restore.denoise._nonlocal_method import NonlocalTree

    rng = np.random.default_rng(3)
    x = camera[:64, :64]
    units = [x + 0.1 * rng.standard_normal(x.shape), 0.1 * rng.standard_normal(x.shape), x * 0]
    layout = check_layout((64, 64, 3), np.float64, channel_axis=-1, axes=None)
    method = NonlocalTree.checked(layout, (64, 64, 3), strength=1.0)
    n = method.steps((64, 64), False)
    seen = []
    steps = Steps(lambda d, t: seen.append(d), 3 * n)
    out = method.denoise_channels(units, [0.1, 0.1, 0.0], [None] * 3, steps)
    want = nonlocal_denoise(np.stack(units[:2]), None, 0.1, settings=method.settings, channels=True)
    np.testing.assert_array_equal(out[0], want[0])
    np.testing.assert_array_equal(out[1], want[1])
    np.testing.assert_array_equal(out[2], units[2])  # no noise: as it was
    assert seen[-1] == 3 * n


def test_colour_is_denoised_in_groups_matched_on_the_luminance():
    """As CBM3D: faint colour differences denoised in the luminance's groups beat each channel on its own.

    The naive reference denoises the three channels of the same orthonormal
    opponent colour space (luminance, two colour differences) as grey images.
    """
    from pathlib import Path

    from skimage import io

    root = Path(__file__).resolve().parents[1]
    x = io.imread(root / "sample_images" / "coffee_cup.png")[:128, :128, :3] / 255.0
    y = x + 25 / 255 * np.random.default_rng(0).standard_normal(x.shape)
    opp = np.array([[1, 1, 1] / np.sqrt(3), [1, 0, -1] / np.sqrt(2), [1, -2, 1] / np.sqrt(6)])
    apart = np.stack([denoise_nonlocal_tree(c, sigma=25 / 255) for c in np.moveaxis(y @ opp.T, -1, 0)], -1) @ opp
    joint = denoise_nonlocal_tree(y, sigma=25 / 255, channel_axis=-1)
    assert psnr(joint, x) > psnr(apart, x) + 0.3
