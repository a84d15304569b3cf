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
    gauss = denoise_wavelet_tree(noisy, axes=(0, 1, 2), noise="gaussian")
    assert psnr(pg, nuclei) > psnr(gauss, nuclei) + 0.3
    assert psnr(est, nuclei) > psnr(gauss, nuclei) + 0.3
    assert psnr(pg, nuclei) > psnr(noisy, nuclei) + 8
    # in 2-D too
    pg2 = denoise_wavelet_tree(noisy[8], noise="poisson-gaussian", gain=0.1, sigma=0.02)
    assert psnr(pg2, nuclei[8]) > psnr(denoise_wavelet_tree(noisy[8], noise="gaussian"), nuclei[8])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"axes": (0,)}, "two or three axes"),
        ({"axes": (0, 0, 1)}, "distinct"),
        ({"axes": (0, 5)}, "two or three axes"),
        ({"noise": "poisson"}, "Invalid noise: .poisson.; supported noise models are auto, gaussian, poisson-gaussian"),
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
    tiles = [nuclei, nuclei[:, ::-1], nuclei[:, :, ::-1], nuclei[:, ::-1, ::-1]]
    big = np.concatenate([tiles[i % 4] for i in range(6)], axis=2)  # 16 x 64 x 384: six chunks along x
    noisy = big + 0.1 * rng.standard_normal(big.shape)
    lazy_in = da.from_array(noisy, chunks=(16, 64, 64))
    inner = (slice(None), slice(None), slice(64, 320))  # away from the volume's own (periodic) borders
    # overlaps of the exact reach (one pass of two levels of db2: 16 voxels) give the in-memory result
    exact = {"axes": (0, 1, 2), "sigma": 0.1, "level": 2, "wavelet": "db2", "wiener": False}
    lazy = denoise_wavelet_tree(lazy_in, lam=0.12, **exact)
    assert isinstance(lazy, da.Array) and lazy.numblocks[2] > 1
    np.testing.assert_allclose(lazy.compute()[inner], denoise_wavelet_tree(noisy, lam=0.12, **exact)[inner], atol=1e-8)
    # three levels and the Wiener passes reach past the bounded overlap: the interior still agrees
    deep = {"axes": (0, 1, 2), "sigma": 0.1, "level": 3}
    lazy = denoise_wavelet_tree(lazy_in, lam=0.12, **deep)
    assert lazy.numblocks[2] > 1
    out, ref = lazy.compute(), denoise_wavelet_tree(noisy, lam=0.12, **deep)
    assert np.abs(out - ref)[inner].max() < 1e-3
    assert abs(psnr(out[inner], big[inner]) - psnr(ref[inner], big[inner])) < 0.01
    # lam chosen by SURE on each block, as against on the whole
    auto = denoise_wavelet_tree(lazy_in, **exact).compute()
    auto_ref = denoise_wavelet_tree(noisy, **exact)
    assert abs(psnr(auto[inner], big[inner]) - psnr(auto_ref[inner], big[inner])) < 0.05
    with pytest.raises(ValueError, match="progress is not available"):
        denoise_wavelet_tree(lazy_in, progress=lambda d, t: None, **exact)


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
    """Transforming axes (a, b, c) of a 4-D array equals moving them first and denoising each volume; one level
    per axis follows the order of ``axes``."""
    level = data.draw(st.sampled_from([1, 2, (0, 1, 2), (1, 2, 1)]))
    shape = tuple(data.draw(st.integers(2 if level == 1 else 4, 9)) for _ in range(4))
    axes = tuple(data.draw(st.permutations(range(4)))[:3])
    vol = np.random.default_rng(0).standard_normal(shape)
    out = denoise_wavelet_tree(vol, axes=axes, lam=0.4, sigma=1.0, level=level, wavelet="haar")
    assert out.shape == vol.shape
    sp = sorted(axes)
    rest = [i for i in range(4) if i not in sp][0]
    moved = np.moveaxis(vol, [rest, *sp], [0, 1, 2, 3])
    in_order = level if np.ndim(level) == 0 else tuple(level[i] for i in np.argsort(axes))
    ref = np.stack([denoise_wavelet_tree(v, axes=(0, 1, 2), lam=0.4, sigma=1.0, level=in_order, wavelet="haar")
                    for v in moved])
    np.testing.assert_allclose(np.moveaxis(ref, [0, 1, 2, 3], [rest, *sp]), out, atol=1e-12)


def test_coefficient_variance_of_a_variance_map(rng):
    """The plan's per-coefficient noise variance: exact for Haar, padded and shifted like the data."""
    from restore.denoise import _transform

    plan = _transform._setup((6, 16, 12), "tree_l2", "haar", 2, False)  # padded to 8 x 16 x 12
    var_map = rng.uniform(0.1, 2.0, plan.shape)
    n = 3000
    noise = np.sqrt(var_map) * rng.standard_normal((n, *plan.shape))
    seen = np.mean([plan.forward(e, (1, 2, 3)) ** 2 for e in noise], axis=0)
    # symmetric padding repeats samples, so padded coefficients are not independent sums: compare the rest
    expected = plan.coeff_var(var_map, (1, 2, 3))
    assert expected.shape == (plan.n_coeffs,)
    assert np.median(np.abs(seen / expected - 1)) < 0.05
    np.testing.assert_allclose(plan.coeff_var(np.full(plan.shape, 0.3)), 0.3)


def test_sure_under_unequal_noise_tracks_the_true_risk(rng):
    """Stein's estimate with a probe of the noise's own variance is unbiased when variances differ."""
    from restore.denoise import _lam, _transform

    plan = _transform._setup((16, 32, 32), "tree_l2", "db3", None, False)
    theta = plan.forward(np.pad(np.full((4, 8, 8), 6.0), ((6, 6), (12, 12), (12, 12))))
    var = rng.permutation(np.linspace(0.05, 1.0, theta.size))
    for t in (0.5, 1.5):
        est, true = [], []
        for seed in range(30):
            c = theta + np.sqrt(var) * np.random.default_rng(seed).standard_normal(theta.size)
            w = c[None] / np.sqrt(var)
            _transform._shrink_rows(w, t, "tree_l2", plan, False)
            true.append(np.sum((w[0] * np.sqrt(var) - theta) ** 2))
            est.append(_lam._scaled_risk(c, "tree_l2", plan, False, np.random.default_rng(seed + 100), None, var)(t))
        # one probe per draw leaves a few % (as with equal variances); a unit-variance probe would be off by
        # sum(1 - var), several times the risk
        assert abs(np.mean(est) - np.mean(true)) < 0.1 * np.mean(true) < 0.05 * np.sum(1 - var)


def test_dark_background_noise_is_shrunk_at_its_own_level():
    """Poisson-Gaussian: the stabilised noise is far below 1 on a dark background; taking its variance from
    the data (the default) beats treating it as 1 everywhere, on sparse spots in 3-D and in 2-D.

    The tree stage is compared: on spots this small the Wiener passes after it do about as well with either
    variance (``benchmarks/bench_volume.py`` measures the whole default both ways on larger volumes)."""
    from restore.denoise import _noise_model as rd

    rng = np.random.default_rng(5)
    z, y, x = np.meshgrid(np.arange(32.0), np.arange(64.0), np.arange(64.0), indexing="ij")
    clean = np.zeros(z.shape)
    for _ in range(30):
        c = rng.uniform([2, 4, 4], [30, 60, 60])
        clean += rng.uniform(0.3, 1.0) * np.exp(-0.5 * (((z - c[0]) / 1.5) ** 2 + ((y - c[1]) / 2) ** 2
                                                       + ((x - c[2]) / 2) ** 2))
    clean /= clean.max()
    noisy = rng.poisson(10 * clean) / 10 + 0.02 * rng.standard_normal(clean.shape)
    kw = {"noise": "poisson-gaussian", "gain": 0.1, "sigma": 0.02, "cycle_spins": 2, "wiener": False}
    vol = denoise_wavelet_tree(noisy, axes=(0, 1, 2), **kw)
    planes = denoise_wavelet_tree(noisy, **kw)
    original = rd._stabilised_variance
    rd._stabilised_variance = lambda channels, model, n_axes: [None] * len(channels)  # variance 1 everywhere
    try:
        vol_unit = denoise_wavelet_tree(noisy, axes=(0, 1, 2), **kw)
        planes_unit = denoise_wavelet_tree(noisy, **kw)
    finally:
        rd._stabilised_variance = original
    assert psnr(vol, clean) > psnr(vol_unit, clean) + 0.5
    # in 2-D the gain is smaller and moves with SURE's probe (0.3 to 0.6 dB over the seeds 0 to 3)
    assert psnr(planes, clean) > psnr(planes_unit, clean) + 0.25


@pytest.mark.parametrize("shape, axes, noise", [((16, 64, 128), (0, 1, 2), "gaussian"),
                                                ((16, 64, 128), (0, 1, 2), "poisson-gaussian"),
                                                ((256, 384), None, "gaussian")])
def test_sure_on_a_subset_of_trees_denoises_as_on_all_of_them(shape, axes, noise, monkeypatch):
    """Above a size SURE measures its risk on a regular subset of whole trees: the result stays within
    0.05 dB of SURE on every tree (the threshold is lowered here so that small arrays are subsampled)."""
    from restore.denoise import _lam as rd

    rng = np.random.default_rng(3)
    grids = np.meshgrid(*[np.linspace(0, 6, n) for n in shape], indexing="ij")
    clean = 0.5 + 0.4 * np.sin(grids[-1] + np.cos(grids[-2])) * (grids[0] > 2)
    if noise == "gaussian":
        noisy, kw = clean + 0.1 * rng.standard_normal(shape), {"sigma": 0.1}
    else:
        noisy, kw = rng.poisson(20 * clean) / 20, {"noise": noise, "gain": 0.05, "sigma": 0.0}
    kw |= {"axes": axes, "cycle_spins": 2, "wiener": False}
    cap = "_SURE_MAX_COEFFS" if axes else "_SURE_MAX_COEFFS_2D"
    monkeypatch.setattr(rd, cap, noisy.size)
    full = denoise_wavelet_tree(noisy, **kw)
    monkeypatch.setattr(rd, cap, noisy.size // 4)
    sampled = denoise_wavelet_tree(noisy, **kw)
    assert not np.array_equal(sampled, full)  # the subset was used
    assert abs(psnr(sampled, clean) - psnr(full, clean)) < 0.05


# small pure-Poisson data: the read noise is not determined, and estimate_noise says so
@pytest.mark.filterwarnings("ignore:The noise estimate is uncertain:UserWarning")
@pytest.mark.parametrize("axes, noise", [((0, 1, 2), "gaussian"), ((0, 1, 2), "poisson-gaussian"),
                                         (None, "poisson-gaussian")])
def test_choose_lam_first_gives_the_same_volume_as_choosing_inside(axes, noise):
    """choose_lam takes the same axes and noise model as denoise_wavelet_tree, so a caller can scale its choice."""
    from restore import choose_lam

    rng = np.random.default_rng(8)
    shape = (16, 32, 32) if axes else (48, 64)
    clean = 0.5 + 0.4 * np.sin(np.indices(shape).sum(axis=0) / 5)
    noisy = clean + 0.1 * rng.standard_normal(shape) if noise == "gaussian" else rng.poisson(30 * clean) / 30
    kw = {"axes": axes, "noise": noise, "cycle_spins": 2}
    kw |= {"sigma": 0.1} if noise == "gaussian" else {"gain": 1 / 30}
    choice = choose_lam(noisy, **{k: v for k, v in kw.items() if k != "cycle_spins"})
    np.testing.assert_array_equal(denoise_wavelet_tree(noisy, lam=choice, **kw), denoise_wavelet_tree(noisy, **kw))
    half = denoise_wavelet_tree(noisy, lam=[0.5 * v for v in choice.lam], **kw)
    assert not np.array_equal(half, denoise_wavelet_tree(noisy, **kw))  # a scaled choice is another result


@pytest.mark.parametrize("kwargs, match", [
    ({"axes": (1, 2)}, r"image must have exactly 2 dimensions"),
    ({"axes": (0, 1, 2), "gain": 0.1}, r"gain=0.1 applies to noise='poisson-gaussian' only"),
    ({"axes": (0, 1, 2), "noise": "poisson"}, r"noise"),
])
def test_choose_lam_refuses_what_it_cannot_choose_for(kwargs, match):
    from restore import choose_lam

    with pytest.raises(ValueError, match=match):
        choose_lam(np.zeros((8, 16, 16)), sigma=0.1, **kwargs)


def test_one_block_of_a_lazy_volume_reads_a_neighbourhood_that_does_not_grow_with_the_volume():
    """With the default levels, a Dask volume is denoised block by block: a block of the result needs the
    input chunks around it, as many for an 8 GB volume as for a 1.5 GB one (the default depth is bounded)."""
    da = pytest.importorskip("dask.array")
    from dask.core import flatten
    from dask.optimization import cull

    reads = []
    # lazy zeros: nothing is allocated. Thinnest axes of 384 and 512: default levels grown with the volume would be 6
    # and 7 there, overlaps of 64 and 128 (2**level), so the reads would differ (the graph of a 64 GB volume took 30 s
    # to build); 384 planes give the middle block neighbours on both sides in z, as 512 do
    for shape in [(384, 1024, 1024), (512, 2048, 2048)]:
        x = da.zeros(shape, chunks=(32, 256, 256), dtype=np.float32)
        out = denoise_wavelet_tree(x, axes=(0, 1, 2), sigma=0.1)
        block = out.blocks[tuple(n // 2 for n in out.numblocks)]
        keys = list(flatten(block.__dask_keys__()))
        # culled layer by layer first: the whole graph is never built as a dict
        needed, _ = cull(dict(block.__dask_graph__().cull(set(keys))), keys)
        reads.append(sum(1 for k in needed if isinstance(k, tuple) and k[0] == x.name))
    assert reads[0] == reads[1] < 200


@pytest.mark.parametrize("chunks", [(1, 1024, 1024), (32, 128, 128), (256, 256, 256), (7, 100, 300)])
def test_a_lazy_volume_is_denoised_in_bounded_blocks_whatever_its_chunks(chunks):
    """Planes of a microscope's store (1 x 1024 x 1024) or small chunks: blocks of at most 128 voxels a side (so
    bounded memory), made of whole input chunks or whole fractions of them where the chunks allow it."""
    da = pytest.importorskip("dask.array")
    x = da.zeros((256, 2048, 2048), chunks=chunks, dtype=np.float32)  # lazy: nothing is allocated
    out = denoise_wavelet_tree(x, axes=(0, 1, 2), sigma=0.1)
    assert out.shape == x.shape and out.dtype == np.float32
    assert max(max(c) for c in out.chunks) <= 128
    for mine, theirs, size in zip(out.chunks, x.chunks, chunks, strict=True):
        if size & (size - 1) == 0:  # a power of two: the blocks nest in the chunks or the chunks in the blocks
            a, b = set(np.cumsum(mine)), set(np.cumsum(theirs))
            assert a <= b or b <= a


def test_a_sliced_axis_keeps_blocks_to_the_input_chunks_so_showing_a_slice_computes_a_chunks_depth():
    """napari shows a lazy volume one z slice at a time, and computes every block the slice crosses (issue 27,
    item 12). By default a block's core merges chunks as far as its memory allows: on 64 planes chunked by 16, a
    block holds all 64, so one slice computes the whole volume. With ``sliced_axes`` the cores along those axes
    keep to the input's chunks (at least 2**level): one slice computes a chunk's depth and its overlap."""
    da = pytest.importorskip("dask.array")
    x = da.zeros((256, 512, 512), chunks=(16, 128, 128), dtype=np.float32)  # lazy: nothing is allocated
    assert max(denoise_wavelet_tree(x, axes=(0, 1, 2), sigma=0.1).chunks[0]) > 16  # the default: chunks merged
    out = denoise_wavelet_tree(x, axes=(0, 1, 2), sigma=0.1, sliced_axes=(0,))
    assert out.shape == x.shape and max(out.chunks[0]) <= 16
    assert all(128 % c == 0 for c in out.chunks[1] + out.chunks[2])  # the other axes keep to the chunks too
    for chunks in [(1, 512, 512), (7, 128, 128), (256, 64, 64)]:  # planes of a microscope's store, odd, deep
        y = da.zeros((256, 512, 512), chunks=chunks, dtype=np.float32)
        z = denoise_wavelet_tree(y, axes=(0, 1, 2), sigma=0.1, sliced_axes=(0,))
        assert max(z.chunks[0]) <= max(chunks[0], 8) and max(z.chunks[0]) <= 128  # 2**3 levels, the largest core
    # 64 planes: a chunk of 16 and its overlaps (32 each side) span them, so one block does (the first slice costs
    # the same, the others nothing)
    thin = denoise_wavelet_tree(x[:64], axes=(0, 1, 2), sigma=0.1, sliced_axes=(0,))
    assert thin.chunks[0] == (64,)

    # one slice reads (and denoises) one chunk's depth and its overlap, and agrees with the default layout
    rng = np.random.default_rng(2)
    grid = np.indices((128, 64, 64)).sum(axis=0)
    noisy = (0.5 + 0.3 * np.sin(grid / 6.0) + 0.1 * rng.standard_normal(grid.shape)).astype(np.float32)

    class Planes:  # a store that records the planes read
        shape, dtype, ndim = noisy.shape, noisy.dtype, noisy.ndim

        def __init__(self):
            self.read = set()

        def __getitem__(self, key):
            self.read.update(range(*key[0].indices(noisy.shape[0])))
            return noisy[key]

    kw = {"axes": (0, 1, 2), "sigma": 0.1, "lam": 0.12}
    planes = {}
    for sliced_axes in [(), (0,)]:
        store = Planes()
        lazy = denoise_wavelet_tree(da.from_array(store, chunks=(8, 64, 64)), sliced_axes=sliced_axes, **kw)
        planes[sliced_axes] = lazy[64].compute()
        assert len(store.read) == (128 if not sliced_axes else 8 + 2 * 32)  # the whole, or a chunk and its overlap
    whole = denoise_wavelet_tree(noisy, **kw)[64]
    for plane in planes.values():
        assert np.abs(plane - whole).max() < 2e-3 * np.abs(whole).max()


def test_sliced_axes_must_be_transformed_axes():
    with pytest.raises(ValueError, match="sliced_axes"):
        denoise_wavelet_tree(np.zeros((8, 16, 16)), axes=(1, 2), sliced_axes=(0,), sigma=0.1)
    with pytest.raises(ValueError, match="names an axis twice"):
        denoise_wavelet_tree(np.zeros((8, 16, 16)), axes=(0, 1, 2), sliced_axes=(0, -3), sigma=0.1)


def test_planes_of_a_volume_do_not_alternate_in_quality():
    # a dyadic transform along z with one shift favours one parity of planes: seen plane by plane, a volume flickers
    from skimage import data

    rng = np.random.default_rng(0)
    cam = data.camera()[::4, ::4] / 255.0
    clean = np.stack([np.roll(cam, 3 * k, axis=1) for k in range(10)])
    noisy = clean + 0.1 * rng.standard_normal(clean.shape)
    out = denoise_wavelet_tree(noisy, axes=(0, 1, 2), sigma=0.1, noise="gaussian")
    psnr = np.array([10 * np.log10(1 / np.mean((out[k] - clean[k]) ** 2)) for k in range(10)])
    assert np.mean(np.abs(np.diff(psnr))) < 0.3, psnr
