"""3-D tree denoising: the octree path, Poisson-Gaussian noise, Dask arrays."""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from restore import denoise_wavelet_tree, prox, wavelet_tree
from restore.wavelet import level_splits, wavelet_forward, wavelet_inverse

DATA = Path(__file__).resolve().parent / "data"


def psnr(x, ref):
    return 10 * np.log10(1.0 / np.mean((x - ref) ** 2))


@pytest.fixture(scope="module")
def nuclei():
    v = np.load(DATA / "nuclei_16x64x64.npz")["volume"].astype(np.float64)
    return (v - v.min()) / (v.max() - v.min())


def direct(vol, lam, penalty, wavelet, levels):
    """Pad symmetrically, transform, restore.prox, inverse, crop: by hand."""
    padded = tuple(-(-s // 2**n) * 2**n for s, n in zip(vol.shape, levels, strict=True))
    x = np.pad(vol, [(0, p - s) for s, p in zip(vol.shape, padded, strict=True)], mode="symmetric")
    splits = level_splits(levels)
    c = wavelet_forward(x, wavelet, splits)
    tree = wavelet_tree(padded, wavelet, levels)
    if penalty in ("l1", "l0"):
        na = c.size - int(np.count_nonzero(tree.weights))
        v = c.copy()
        v[na:] = prox(c[na:], lam, penalty=penalty)
    else:
        v = prox(c, lam, penalty=penalty, tree=tree)
    return wavelet_inverse(v, wavelet, splits, padded)[tuple(slice(0, s) for s in vol.shape)]


@pytest.mark.parametrize("penalty", ["tree_l2", "tree_linf", "tree_l0", "l1"])
@pytest.mark.parametrize(("shape", "levels", "wavelet"), [((16, 32, 32), (2, 2, 2), "db3"),
                                                          ((9, 20, 27), (1, 2, 2), "haar"),
                                                          ((8, 32, 24), (2, 3, 3), "sym4")])
def test_3d_equals_transform_prox_inverse(penalty, shape, levels, wavelet, rng):
    vol = rng.standard_normal(shape) + np.linspace(0, 2, shape[2])
    out = denoise_wavelet_tree(vol, axes=(0, 1, 2), lam=0.6, penalty=penalty, wavelet=wavelet, wiener=False,
                               level=levels if len(set(levels)) > 1 else levels[0])
    np.testing.assert_allclose(out, direct(vol, 0.6, penalty, wavelet, levels), atol=1e-12)


def test_axes_pick_the_transformed_axes(rng):
    vol = rng.standard_normal((10, 16, 12, 2))  # (x, z, y, t): any order, the rest are stacked
    out = denoise_wavelet_tree(vol, axes=(1, 2, 0), lam=0.5, sigma=1.0, level=1)
    for t in range(2):
        ref = denoise_wavelet_tree(np.transpose(vol[..., t], (1, 2, 0)), axes=(0, 1, 2), lam=0.5, sigma=1.0, level=1)
        np.testing.assert_allclose(out[..., t], np.transpose(ref, (2, 0, 1)), atol=1e-12)
    # the default stays plane by plane over the last two axes
    np.testing.assert_allclose(denoise_wavelet_tree(vol[..., 0], lam=0.5),
                               np.stack([denoise_wavelet_tree(p, lam=0.5) for p in vol[..., 0]]), atol=1e-12)


def test_3d_beats_plane_by_plane_and_noisy(nuclei, rng):
    noisy = nuclei + 0.1 * rng.standard_normal(nuclei.shape)
    n32 = noisy.astype(np.float32)
    before = n32.copy()
    vol = denoise_wavelet_tree(n32, axes=(0, 1, 2), sigma=0.1, cycle_spins=2)
    assert vol.dtype == np.float32 and vol.shape == n32.shape
    np.testing.assert_array_equal(n32, before)
    planes = denoise_wavelet_tree(noisy, sigma=0.1, cycle_spins=2)
    assert psnr(vol, nuclei) > psnr(noisy, nuclei) + 8
    assert psnr(vol, nuclei) > psnr(planes, nuclei) + 0.5
    spun = denoise_wavelet_tree(noisy, axes=(0, 1, 2), sigma=0.1, cycle_spins=8)
    assert psnr(spun, nuclei) > psnr(vol, nuclei)
    tree_only = denoise_wavelet_tree(noisy, axes=(0, 1, 2), sigma=0.1, cycle_spins=8, wiener=False)
    assert psnr(spun, nuclei) > psnr(tree_only, nuclei) + 0.2  # the Wiener stage, on by default in 3-D
    assert psnr(denoise_wavelet_tree(noisy, sigma=0.1, wiener=True), nuclei) > psnr(planes, nuclei) - 0.5


def test_fewer_levels_along_z(nuclei, rng):
    noisy = nuclei + 0.1 * rng.standard_normal(nuclei.shape)
    out = denoise_wavelet_tree(noisy, axes=(0, 1, 2), sigma=0.1, level=(1, 3, 3))
    flat = denoise_wavelet_tree(noisy, axes=(0, 1, 2), sigma=0.1, level=(0, 3, 3))  # z never split
    assert psnr(out, nuclei) > psnr(flat, nuclei) + 0.2 > psnr(noisy, nuclei) + 5


def test_poisson_gaussian_beats_gaussian_on_photon_noise(nuclei):
    rng = np.random.default_rng(3)
    noisy = rng.poisson(10 * nuclei) / 10 + 0.02 * rng.standard_normal(nuclei.shape)
    pg = denoise_wavelet_tree(noisy, axes=(0, 1, 2), noise="poisson-gaussian", gain=0.1, sigma=0.02)
    est = denoise_wavelet_tree(noisy, axes=(0, 1, 2), noise="poisson-gaussian")
    gauss = denoise_wavelet_tree(noisy, axes=(0, 1, 2))
    assert psnr(pg, nuclei) > psnr(gauss, nuclei) + 0.3
    assert psnr(est, nuclei) > psnr(gauss, nuclei) + 0.3
    assert psnr(pg, nuclei) > psnr(noisy, nuclei) + 8
    # in 2-D too
    pg2 = denoise_wavelet_tree(noisy[8], noise="poisson-gaussian", gain=0.1, sigma=0.02)
    assert psnr(pg2, nuclei[8]) > psnr(denoise_wavelet_tree(noisy[8]), nuclei[8])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"axes": (0,)}, "two or three axes"),
        ({"axes": (0, 0, 1)}, "distinct"),
        ({"axes": (0, 5)}, "two or three axes"),
        ({"noise": "poisson"}, "Invalid noise: .poisson.; supported noise models are gaussian, poisson-gaussian"),
        ({"gain": 0.1}, "applies to noise='poisson-gaussian' only"),
        ({"noise": "poisson-gaussian", "gain": 0.0}, r"gain \(image units per photon\) must be finite and > 0, got 0"),
        ({"level": (1, 2)}, "one integer >= 0 per axis"),
        ({"wiener": "yes"}, "Invalid wiener: 'yes'"),
    ],
)
def test_volume_errors(kwargs, match, rng):
    with pytest.raises(ValueError, match=match):
        denoise_wavelet_tree(rng.random((8, 16, 16)) + 1, **{"axes": (0, 1, 2), **kwargs})


def test_dask_agrees_with_memory_on_the_interior(nuclei, rng):
    da = pytest.importorskip("dask.array")
    big = np.concatenate([nuclei, nuclei[:, ::-1]], axis=2)  # 16 x 64 x 128: two chunks along x
    noisy = big + 0.1 * rng.standard_normal(big.shape)
    lazy_in = da.from_array(noisy, chunks=(16, 64, 64))
    kw = {"axes": (0, 1, 2), "sigma": 0.1, "level": 2, "wavelet": "db2"}
    ref = denoise_wavelet_tree(noisy, lam=0.12, **kw)
    lazy = denoise_wavelet_tree(lazy_in, lam=0.12, **kw)
    assert isinstance(lazy, da.Array)
    inner = (slice(None), slice(None), slice(24, 104))  # away from the volume's own (periodic) borders
    np.testing.assert_allclose(lazy.compute()[inner], ref[inner], atol=1e-8)
    auto = denoise_wavelet_tree(lazy_in, **kw).compute()
    auto_ref = denoise_wavelet_tree(noisy, **kw)
    assert abs(psnr(auto[inner], big[inner]) - psnr(auto_ref[inner], big[inner])) < 0.05
    with pytest.raises(ValueError, match="progress is not available"):
        denoise_wavelet_tree(lazy_in, progress=lambda d, t: None, **kw)


def test_per_level_sure_in_3d_and_its_progress(nuclei, rng):
    noisy = nuclei + 0.1 * rng.standard_normal(nuclei.shape)
    reports = []
    out = denoise_wavelet_tree(noisy, axes=(0, 1, 2), sigma=0.1, per_level=True,
                               progress=lambda d, t: reports.append((d, t)))
    assert reports[-1][0] == reports[-1][1] and [d for d, _ in reports] == sorted(d for d, _ in reports)
    one = denoise_wavelet_tree(noisy, axes=(0, 1, 2), sigma=0.1)
    assert psnr(out, nuclei) > psnr(one, nuclei) - 0.05


@settings(max_examples=25)
@given(data=st.data())
def test_any_axes_equal_the_volume_moved_to_the_front(data):
    """Transforming axes (a, b, c) of a 4-D array equals moving them first and denoising each volume."""
    shape = tuple(data.draw(st.integers(2, 9)) for _ in range(4))
    axes = tuple(data.draw(st.permutations(range(4)))[:3])
    level = data.draw(st.sampled_from([1, 2, (0, 1, 2), (1, 2, 1)]))
    vol = np.random.default_rng(0).standard_normal(shape)
    out = denoise_wavelet_tree(vol, axes=axes, lam=0.4, sigma=1.0, level=level, wavelet="haar")
    assert out.shape == vol.shape
    sp = sorted(axes)
    rest = [i for i in range(4) if i not in sp][0]
    moved = np.moveaxis(vol, [rest, *sp], [0, 1, 2, 3])
    ref = np.stack([denoise_wavelet_tree(v, axes=(0, 1, 2), lam=0.4, sigma=1.0, level=level, wavelet="haar")
                    for v in moved])
    np.testing.assert_allclose(np.moveaxis(ref, [0, 1, 2, 3], [rest, *sp]), out, atol=1e-12)
