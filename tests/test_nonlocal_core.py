"""The non-local tree core: block matching, the joint tree shrinkage, and the two-stage denoiser on one channel."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from restore import Cancelled, denoise_wavelet_tree, prox
from restore._blockmatch import block_match
from restore._nonlocal import (
    NonlocalSettings,
    group_tree,
    nonlocal_denoise,
    nonlocal_reach,
    nonlocal_steps,
    shrink_groups,
)


def psnr(x, ref):
    return 10 * np.log10(1.0 / np.mean((x - ref) ** 2))


def naive_match(F, r, h, k):
    """The k best matches by brute force over the window: the reference first, then (distance, C order)."""
    n0, n1, d, n2 = F.shape
    ref = F[r[0], r[1], :, r[2]].astype(np.float64)
    cands = []
    for q0 in range(max(0, r[0] - h[0]), min(n0, r[0] + h[0] + 1)):
        for q1 in range(max(0, r[1] - h[1]), min(n1, r[1] + h[1] + 1)):
            for q2 in range(max(0, r[2] - h[2]), min(n2, r[2] + h[2] + 1)):
                if (q0, q1, q2) != tuple(r):
                    dist = float(np.sum((F[q0, q1, :, q2].astype(np.float64) - ref) ** 2))
                    cands.append((dist, (q0, q1, q2)))
    cands.sort(key=lambda c: c[0])  # stable: ties stay in C order
    best = [(0.0, tuple(r))] + cands[:k - 1]
    return np.array([b[1] for b in best]), np.array([b[0] for b in best])


def _synthesis(coefs, Ms):
    """Each patch of the coefficients (..., p0, p1, p2) from the analysis matrices Ms, in numpy."""
    return np.einsum("ai,bj,ck,...abc->...ijk", *Ms, coefs)


@pytest.mark.parametrize("patch3, kind, sel", [((8, 1, 8), "haar", None), ((11, 1, 11), "dct", None),
                                               ((11, 1, 11), "dct", [0, 1, 12, 120, 35]),
                                               ((4, 4, 4), "haar", None), ((5, 5, 5), "dct", [0, 7, 31, 124])])
def test_the_transform_of_every_patch_is_its_own_transform(patch3, kind, sel):
    """The shared-pass transform of all patches gives each patch's coefficients (those selected).

    The coefficients also taken as matching features are the same numbers, in the features' layout.
    """
    from restore._core_nonlocal import patch_coefs
    from restore._nonlocal import transform_matrix

    rng = np.random.default_rng(0)
    img = rng.standard_normal((19, 9 if patch3[1] > 1 else 1, 23))
    Ms = [np.ascontiguousarray(transform_matrix(kind, n)) for n in patch3]
    p = int(np.prod(patch3))
    sel = np.arange(p) if sel is None else np.array(sel)
    n_orig = [n - q + 1 for n, q in zip(img.shape, patch3, strict=True)]
    out = np.full((n_orig[0] - 3, n_orig[1], n_orig[2], len(sel)), np.nan, dtype=np.float32)
    feat = np.full((n_orig[0] - 3, n_orig[1], len(sel), n_orig[2]), np.nan, dtype=np.float32)
    fpos = np.arange(len(sel))[::-1].copy()  # each coefficient also a feature, in the reverse order
    fpos[1] = -1  # ... but one
    # origins 2 .. n0 - 2 of the first axis
    patch_coefs(img, 2, n_orig[0] - 1, *Ms, sel.astype(np.int64), out, fpos, feat)
    np.testing.assert_array_equal(feat[:, :, fpos[fpos >= 0]], out[..., fpos >= 0].transpose(0, 1, 3, 2))
    assert np.isnan(feat[:, :, len(sel) - 2]).all()
    only = np.empty(out.shape[:3] + (0,), dtype=np.float32)  # features only
    feat2 = np.full_like(feat, np.nan)
    patch_coefs(img, 2, n_orig[0] - 1, *Ms, sel.astype(np.int64), only, fpos, feat2)
    np.testing.assert_array_equal(feat2, feat)
    windows = np.lib.stride_tricks.sliding_window_view(img, patch3)[2:n_orig[0] - 1]
    # analysis = synthesis with the transposed matrices
    want = _synthesis(windows, [m.T for m in Ms]).reshape(windows.shape[:3] + (p,))[..., sel]
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("patch3, kind", [((8, 1, 8), "haar"), ((11, 1, 11), "dct"), ((4, 4, 4), "haar"),
                                          ((5, 5, 5), "dct")])
def test_a_group_adds_its_weighted_patches_where_they_were_matched(patch3, kind):
    """Aggregation: each of the group's patches, synthesised, times the window and weight, at its place."""
    from restore._core_nonlocal import add_group
    from restore._nonlocal import transform_matrix

    rng = np.random.default_rng(1)
    k = 4
    p = int(np.prod(patch3))
    x = rng.standard_normal(k * p)
    Ms = [np.ascontiguousarray(transform_matrix(kind, n)) for n in patch3]
    Is = [np.ascontiguousarray(m.T) for m in Ms]
    win = rng.random(patch3) + 0.5
    idx = np.array([[0, 0, 0], [2, 0, 3], [2, 0, 3], [5, patch3[1] - 1, 1]], dtype=np.int64)
    shape = tuple(2 * n + 6 for n in patch3)
    bnum, bden = np.zeros(shape), np.zeros(shape)
    scratch = [np.empty((p, k)) for _ in range(3)]
    add_group(x, k, *Is, win, 0.7, bnum, bden, idx, 1, 0, 2, *scratch)
    want_num, want_den = np.zeros(shape), np.zeros(shape)
    patches = _synthesis(x.reshape((k,) + patch3), Ms)
    for m in range(k):
        box = tuple(slice(q + o, q + o + n) for q, o, n in zip(idx[m], (1, 0, 2), patch3, strict=True))
        want_num[box] += 0.7 * win * patches[m]
        want_den[box] += 0.7 * win
    np.testing.assert_allclose(bnum, want_num, atol=1e-12)
    np.testing.assert_allclose(bden, want_den, atol=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_block_matching_equals_a_brute_force_search(seed):
    rng = np.random.default_rng(seed)
    volume = seed % 2 == 1
    shape = (7, 6, 9) if volume else (13, 1, 15)  # the plane form is (M, 1, N)
    d = int(rng.integers(1, 12))
    F = rng.standard_normal(shape[:2] + (d,) + shape[2:]).astype(np.float32)
    h = (2, 2, 3) if volume else (4, 0, 5)
    k = int(rng.choice([1, 2, 4, 8, 16]))
    refs = np.stack([rng.integers(0, n, 5) for n in shape], axis=1)
    idx, dist, counts = block_match(F, refs, h, k)
    for i, r in enumerate(refs):
        want_idx, want_dist = naive_match(F, r, h, k)
        assert counts[i] == len(want_idx)
        np.testing.assert_array_equal(idx[i, :counts[i]], want_idx)
        np.testing.assert_allclose(dist[i, :counts[i]], want_dist, rtol=1e-5, atol=1e-6)
        assert tuple(idx[i, 0]) == tuple(r) and dist[i, 0] == 0.0


@given(st.integers(4, 30), st.integers(4, 40), st.sampled_from([2, 3, 4, 8]), st.integers(0, 6), st.integers(0, 11),
       st.sampled_from([1, 2, 8, 16]), st.booleans(), st.integers(0, 2**32 - 1))
@settings(max_examples=60, deadline=None)
def test_pixel_matching_is_the_matching_of_the_patches_pixel_array(h, w, p, h0, h2, k, ties, seed):
    # the non-local inpainting passes compare patches pixel by pixel, without the array of p*p shifted copies of the
    # plane: the same matches, in the same order, and the same distances, to the bit
    from numpy.lib.stride_tricks import sliding_window_view

    from restore._core_blockmatch import match_pixels_many

    assume(p <= min(h, w))
    rng = np.random.default_rng(seed)
    L = (rng.integers(0, 3, (h, w)) if ties else rng.standard_normal((h, w))).astype(np.float32)
    F = np.ascontiguousarray(sliding_window_view(L, (p, p)).reshape(h - p + 1, w - p + 1, p * p)
                             .transpose(0, 2, 1)[:, None])  # (n0, 1, p*p, n2)
    refs = np.stack([rng.integers(0, h - p + 1, 6), rng.integers(0, w - p + 1, 6)], axis=1)
    want = block_match(F, np.insert(refs, 1, 0, axis=1), (h0, 0, h2), k)
    idx, dist, counts = np.zeros((6, k, 3), np.int64), np.zeros((6, k)), np.zeros(6, np.int64)
    match_pixels_many(L, refs, p, h0, h2, k, idx, dist, counts)
    for got, exp in zip((idx, dist, counts), want, strict=True):
        np.testing.assert_array_equal(got, exp)


def test_the_reference_leads_its_group_even_among_equal_patches():
    F = np.zeros((9, 1, 4, 9), dtype=np.float32)  # every patch alike: all distances 0
    idx, dist, _ = block_match(F, np.array([[4, 0, 4], [0, 0, 8]]), (2, 0, 2), 8)
    assert tuple(idx[0, 0]) == (4, 0, 4) and tuple(idx[1, 0]) == (0, 0, 8)
    assert np.all(dist == 0)
    assert len({tuple(q) for q in idx[0]}) == 8  # no patch twice


@pytest.mark.parametrize(("patch3", "k", "bands"), [((8, 1, 8), 16, 2), ((4, 4, 4), 8, 1), ((4, 1, 4), 8, 4)])
@pytest.mark.parametrize("debias", [False, True])
def test_the_joint_shrinkage_is_the_tree_l2_prox_of_the_group(patch3, k, bands, debias):
    rng = np.random.default_rng(1)
    tree = group_tree(patch3, k, bands)
    p = int(np.prod(patch3))
    assert tree.n_vars == k * p
    X = rng.standard_normal((5, k * p)) * rng.uniform(0.1, 3.0, (5, 1))
    lam = 0.7
    got = X.copy()
    f = tree._flat
    shrink_groups(got, lam, f.perm, f.own_ptr, f.node_end, f.parent, f.weights, debias, False)
    want = prox(X.T, lam, penalty="tree_l2", tree=tree).T
    if debias:
        want = np.where(want != 0, X, 0.0)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert np.any(got == 0) and np.any(got != 0)  # the case shrinks some groups and keeps others


@pytest.mark.parametrize(("patch3", "k", "bands"), [((4, 4, 4), 16, 5), ((8, 1, 8), 8, 2)])
def test_the_hard_group_decision_is_the_tree_l0_prox_of_the_group(patch3, k, bands):
    from restore import Tree

    rng = np.random.default_rng(2)
    g = group_tree(patch3, k, bands)
    own = np.array([len(g.node_vars(n)) for n in range(g.n_nodes)], dtype=float)
    own[g.parents < 0] = 0.0  # each coefficient costs lam; the group's mean patch is free
    tree = Tree.from_parents(g.parents, groups=[g.node_vars(n) for n in range(g.n_nodes)], weights=own)
    X = rng.standard_normal((6, k * patch3[0] * patch3[1] * patch3[2])) * rng.uniform(0.5, 4.0, (6, 1))
    lam = 0.5 * 2.7 ** 2
    got = X.copy()
    f = tree._flat
    shrink_groups(got, lam, f.perm, f.own_ptr, f.node_end, f.parent, f.weights, False, True)
    want = prox(X.T, lam, penalty="tree_l0", tree=tree).T
    np.testing.assert_array_equal(got, want)
    kept = got != 0
    assert kept.any() and (~kept).any()
    np.testing.assert_array_equal(got[kept], X[kept])  # hard: what is kept keeps its value


def test_a_node_owns_its_coefficient_across_the_patches_of_its_band():
    tree = group_tree((2, 1, 2), 4, bands=1)  # 4 coefficients of 4 patches, one band: 4 nodes
    assert tree.n_nodes == 4
    np.testing.assert_array_equal(tree.node_vars(3), [3, 7, 11, 15])  # coefficient 3 of every patch
    np.testing.assert_array_equal(tree.group(0), np.arange(16))


def _noisy_plane(shape=(48, 56), sigma=0.1, seed=0):
    yy, xx = np.mgrid[:shape[0], :shape[1]]
    x = 0.5 + 0.3 * np.sin(xx / 3.0) * (yy > shape[0] // 3) + 0.2 * ((xx - 20) ** 2 + (yy - 30) ** 2 < 90)
    y = x + sigma * np.random.default_rng(seed).standard_normal(shape)
    return x, y


SMALL = NonlocalSettings(window=15)  # small windows keep the tests fast


def test_denoising_beats_the_pilot_on_a_plane():
    x, y = _noisy_plane()
    pilot = denoise_wavelet_tree(y, sigma=0.1)
    out = nonlocal_denoise(y, pilot, 0.1, settings=SMALL)
    assert out.shape == y.shape and out.dtype == np.float64
    assert psnr(out, x) > psnr(pilot, x) + 1.0
    assert psnr(out, x) > psnr(y, x) + 6.0


def test_denoising_beats_the_pilot_on_a_volume():
    zz, yy, xx = np.mgrid[:12, :20, :22]
    x = 0.3 + 0.5 * (((zz - 6) / 4.0) ** 2 + ((yy - 10) / 6.0) ** 2 + ((xx - 11) / 7.0) ** 2 < 1)
    y = x + 0.1 * np.random.default_rng(3).standard_normal(x.shape)
    pilot = denoise_wavelet_tree(y, sigma=0.1, axes=(0, 1, 2))
    out = nonlocal_denoise(y, pilot, 0.1, settings=NonlocalSettings(window=5))
    assert out.shape == y.shape
    assert psnr(out, x) > psnr(pilot, x) + 0.5


@pytest.mark.parametrize("shape", [(40, 44), (9, 14, 16)])
def test_results_do_not_depend_on_the_number_of_threads(shape):
    y = np.random.default_rng(5).random(shape)
    settings = NonlocalSettings(window=7 if len(shape) == 3 else 15)
    one = nonlocal_denoise(y, y, 0.2, settings=settings, n_threads=1)
    two = nonlocal_denoise(y, y, 0.2, settings=settings, n_threads=2)
    np.testing.assert_array_equal(one, two)


@pytest.mark.parametrize("shape", [(30, 33), (10, 11, 12)])
def test_a_constant_image_stays_constant(shape):
    y = np.full(shape, 0.37)
    out = nonlocal_denoise(y, y, 0.1, settings=NonlocalSettings(window=7))
    np.testing.assert_allclose(out, 0.37, atol=1e-6)


def test_inputs_are_not_modified():
    x, y = _noisy_plane((32, 32))
    pilot = denoise_wavelet_tree(y, sigma=0.1)
    y0, p0 = y.copy(), pilot.copy()
    nonlocal_denoise(y, pilot, 0.1, settings=SMALL)
    np.testing.assert_array_equal(y, y0)
    np.testing.assert_array_equal(pilot, p0)


def test_progress_counts_the_announced_steps_and_cancels():
    _, y = _noisy_plane((40, 40))
    seen = []
    nonlocal_denoise(y, y, 0.1, settings=SMALL, progress=lambda d, t: seen.append((d, t)))
    total = nonlocal_steps(y.shape, SMALL)
    assert seen[-1] == (total, total) and all(t == total for _, t in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen) and len(seen) == total

    def cancel(done, total):
        if done >= 3:
            raise Cancelled

    with pytest.raises(Cancelled):
        nonlocal_denoise(y, y, 0.1, settings=SMALL, progress=cancel, n_threads=2)


def test_a_result_pixel_depends_on_input_within_the_reach_only():
    rng = np.random.default_rng(7)
    y = rng.random((70, 24))
    settings = NonlocalSettings(window=9, patch=4, stride=2)
    reach = nonlocal_reach(2, settings)[0]
    base = nonlocal_denoise(y, y, 0.2, settings=settings)
    z = y.copy()
    z[69, :] += 1.0  # changes in the last row, with its pilot pixels
    out = nonlocal_denoise(z, z, 0.2, settings=settings)
    changed = np.flatnonzero(np.any(out != base, axis=1))
    assert changed.size and changed.min() >= 69 - reach


def test_a_volume_depends_across_its_planes_within_the_shallower_window_only():
    rng = np.random.default_rng(8)
    y = rng.random((40, 12, 12))
    settings = NonlocalSettings(window=7, window0=3, k1=8, k2=8)
    reach = nonlocal_reach(3, settings)
    assert reach[0] < reach[1] == reach[2]
    base = nonlocal_denoise(y, None, 0.2, settings=settings)
    z = y.copy()
    z[39] += 1.0  # changes in the last plane
    out = nonlocal_denoise(z, None, 0.2, settings=settings)
    changed = np.flatnonzero(np.any(out != base, axis=(1, 2)))
    assert changed.size and changed.min() >= 39 - reach[0]


def test_bad_settings_are_refused_with_their_name():
    y = np.zeros((20, 20))
    with pytest.raises(ValueError, match="k1 must be a power of 2"):
        nonlocal_denoise(y, y, 0.1, settings=NonlocalSettings(k1=12))
    with pytest.raises(ValueError, match="pilot must have the shape"):
        nonlocal_denoise(y, y[:10], 0.1)
    with pytest.raises(ValueError, match="sigma"):
        nonlocal_denoise(y, y, 0.0)
    with pytest.raises(ValueError, match="window0 must be odd"):
        nonlocal_denoise(np.zeros((9, 9, 9)), None, 0.1, settings=NonlocalSettings(window0=4))
    with pytest.raises(ValueError, match="k2 must not exceed its window's 75 candidates"):
        nonlocal_denoise(np.zeros((9, 9, 9)), None, 0.1, settings=NonlocalSettings(window=5, window0=3, k1=64, k2=128))


def test_one_channel_of_channels_is_the_image_alone():
    _, y = _noisy_plane((40, 44))
    one = nonlocal_denoise(y, None, 0.1, settings=SMALL)
    np.testing.assert_array_equal(nonlocal_denoise(y[None], None, [0.1], settings=SMALL, channels=True)[0], one)


def test_channels_share_the_first_channels_groups():
    # a colour difference with little signal matched on its own finds noise; on the luminance, the structure
    x, _ = _noisy_plane((48, 48))
    rng = np.random.default_rng(11)
    lum, chroma = x, 0.3 + 0.15 * (x - x.mean())
    y = np.stack([lum, chroma]) + 0.1 * rng.standard_normal((2,) + x.shape)
    same = replace(SMALL, smooth_patch2=0)  # the same stage 2 alone and joint (alone, the smooth chroma grows it)
    alone = nonlocal_denoise(y[1], None, 0.1, settings=same)
    joint = nonlocal_denoise(y, None, 0.1, settings=same, channels=True)
    assert joint.shape == y.shape
    assert psnr(joint[1], chroma) > psnr(alone, chroma) + 1.0
    np.testing.assert_array_equal(joint[0], nonlocal_denoise(y[0], None, 0.1, settings=same))
    # with both patch sides, the first channel's smoothness decides for all: the first channel is the same alone
    joint = nonlocal_denoise(y, None, 0.1, settings=SMALL, channels=True)
    np.testing.assert_array_equal(joint[0], nonlocal_denoise(y[0], None, 0.1, settings=SMALL))


@pytest.mark.parametrize("shape", [(3, 40, 44), (2, 9, 14, 16)])
def test_channels_do_not_depend_on_the_number_of_threads_and_count_their_steps(shape):
    y = np.random.default_rng(5).random(shape)
    settings = NonlocalSettings(window=7 if len(shape) == 4 else 15)
    seen = []
    one = nonlocal_denoise(y, None, [0.2] * shape[0], settings=settings, n_threads=1, channels=True,
                           progress=lambda d, t: seen.append((d, t)))
    two = nonlocal_denoise(y, None, 0.2, settings=settings, n_threads=2, channels=True)
    np.testing.assert_array_equal(one, two)
    total = nonlocal_steps(shape[1:], settings, shape[0])
    assert seen[-1] == (total, total) and len(seen) == total


def test_channels_need_one_sigma_each():
    y = np.zeros((3, 20, 20))
    with pytest.raises(ValueError, match="one per channel"):
        nonlocal_denoise(y, None, [0.1, 0.1], channels=True)


def test_dask_blocks_of_a_partly_smooth_plane_agree_with_memory():
    # every block must make the whole's choices: a block deciding for itself (a smooth block taking larger patches
    # than the whole) left seams where its choice changed
    import dask.array as da
    from scipy import ndimage as ndi

    import restore

    rng = np.random.default_rng(4)
    x = 0.5 + 0.05 * ndi.gaussian_filter(rng.standard_normal((96, 1344)), 8)
    x[:, -200:] += 0.3 * (np.indices((96, 200)).sum(0) // 4 % 2)  # detail at one end only
    y = x + 0.1 * rng.standard_normal(x.shape)
    whole = restore.denoise_nonlocal_tree(y, sigma=0.1)
    blocks = restore.denoise_nonlocal_tree(da.from_array(y, chunks=(96, 336)), sigma=0.1).compute()
    np.testing.assert_allclose(blocks, whole, rtol=0, atol=1e-12)


def test_dask_blocks_of_a_partly_smooth_colour_image_agree_with_memory():
    # colour: the luminance's smoothness weighs the patch sides of every channel, in each block as in the whole
    import dask.array as da

    import restore

    x, _ = _partly_smooth_plane(6, shape=(64, 720), detail_from=560)
    x = np.clip(x[..., None] * np.array([1.0, 0.8, 0.6]) + np.array([0.0, 0.1, 0.2]), 0, 1)
    y = x + 0.1 * np.random.default_rng(7).standard_normal(x.shape)
    whole = restore.denoise_nonlocal_tree(y, sigma=0.1, channel_axis=-1)
    blocks = restore.denoise_nonlocal_tree(da.from_array(y, chunks=(64, 180, 3)), sigma=0.1, channel_axis=-1)
    np.testing.assert_allclose(blocks.compute(), whole, rtol=0, atol=1e-12)


def _partly_smooth_plane(seed: int, shape=(96, 192), detail_from=120):
    """A surface smooth at the noise's scale (sigma 0.2) with stripes (edges everywhere) from column detail_from."""
    from scipy import ndimage as ndi

    rng = np.random.default_rng(seed)
    field = ndi.gaussian_filter(rng.standard_normal(shape), 6)
    x = 0.5 + 0.1 * field / field.std()
    x[:, detail_from:] = 0.2 + 0.6 * (np.indices((shape[0], shape[1] - detail_from)).sum(0) // 5 % 2)
    return x, x + 0.2 * rng.standard_normal(shape)


def test_smooth_regions_get_larger_wiener_patches_and_detailed_ones_keep_theirs():
    # 8-pixel Wiener patches left noise on a surface flat at their scale that 11-pixel ones average away (BM3D's lead
    # on smooth photographs at high noise), while 11-pixel ones blur edges: each where it is better, in one plane
    import restore

    eight = NonlocalSettings(patch2=8, stride=3)  # stage 2 as it was for every pixel
    for seed in (1, 3):
        x, y = _partly_smooth_plane(seed)
        before = nonlocal_denoise(y, None, 0.2, settings=eight)
        seen = []
        after = restore.denoise_nonlocal_tree(y, sigma=0.2, progress=lambda d, t, s=seen: s.append((d, t)))
        gain = psnr(after[:, :90], x[:, :90]) - psnr(before[:, :90], x[:, :90])
        assert gain > 0.2, (seed, gain)
        np.testing.assert_allclose(after[:, 150:], before[:, 150:], rtol=0, atol=1e-12)  # the stripes as before
        assert seen == sorted(seen) and seen[-1][0] == seen[-1][1]  # the bar ends full, never going back
    seen = []
    nonlocal_denoise(y, None, 0.2, progress=lambda d, t: seen.append((d, t)))  # skipped references count too
    total = nonlocal_steps(y.shape)
    assert [d for d, _ in seen] == list(range(1, total + 1)) and {t for _, t in seen} == {total}


def test_with_both_patch_sides_a_result_pixel_depends_on_input_within_the_reach_only():
    _, y = _partly_smooth_plane(5, shape=(48, 160), detail_from=110)
    y = np.ascontiguousarray(y.T)  # stripes in the last rows: a change there moves the smooth region's edge
    reach = nonlocal_reach(2)[0]
    base = nonlocal_denoise(y, None, 0.2)
    assert not np.array_equal(base, nonlocal_denoise(y, None, 0.2, settings=replace(SMALL, window=25,
                                                                                        smooth_patch2=0)))
    for row in (150, 120):
        z = y.copy()
        z[row:, :] = 0.5  # the stripes flattened: their pixels now want the larger patches
        out = nonlocal_denoise(z, None, 0.2)
        changed = np.flatnonzero(np.any(out != base, axis=1))
        assert changed.size and changed.min() >= row - reach


@pytest.mark.parametrize(("ndim", "kw"), [(2, {"smooth_patch2": -1}), (2, {"smooth_patch2": 4}),
                                          (2, {"smooth_patch2": 12, "patch2": 4, "stride": 5}),
                                          (3, {"smooth_patch2": 12})])
def test_smooth_patch2_is_checked(ndim, kw):
    with pytest.raises(ValueError, match="smooth_patch2"):
        NonlocalSettings(**kw).resolved(ndim)
