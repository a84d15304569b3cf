import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from inpaint_cases import masked_psnr, photo_crop, stroke_mask
from skimage.util import img_as_float

from restore import Cancelled, TreeDictionaryLearning, default_dictionary, inpaint, learn_dictionary


@pytest.fixture(scope="module")
def photo():
    return photo_crop()


@pytest.fixture(scope="module")
def strokes():
    return stroke_mask()


def smooth_fill(img, mask, sigma=2.0):
    from scipy.ndimage import gaussian_filter

    k = (~mask).astype(float)
    num = np.stack([gaussian_filter(img[..., c] * k, sigma) for c in range(img.shape[2])], -1)
    return num / np.maximum(gaussian_filter(k, sigma), 1e-6)[..., None]


def test_known_pixels_unchanged_and_dtype_kept(photo, strokes):
    out = inpaint(photo, strokes, channel_axis=-1, n_train=3000)
    assert out.dtype == np.float32 and out.shape == photo.shape
    np.testing.assert_array_equal(out[~strokes], photo[~strokes])
    assert np.all(np.isfinite(out))


def test_beats_a_smooth_fill_and_biharmonic(photo, strokes):
    from skimage.restoration import inpaint_biharmonic

    out = inpaint(photo, strokes, channel_axis=-1, n_train=3000)
    ours = masked_psnr(out, photo, strokes)
    assert ours > masked_psnr(smooth_fill(photo, strokes), photo, strokes) + 0.5
    assert ours > masked_psnr(inpaint_biharmonic(photo, strokes, channel_axis=-1), photo, strokes) + 0.1


def test_random_loss_beats_biharmonic_and_passes_help(photo, rng):
    from skimage import data
    from skimage.restoration import inpaint_biharmonic

    mask = rng.random((128, 128)) < 0.7
    bih = masked_psnr(inpaint_biharmonic(photo, mask, channel_axis=-1), photo, mask)
    out = inpaint(photo, mask, channel_axis=-1)
    # 0.3: the known pixels held out to weigh the refinements are missed by them (+0.55 without, on this crop)
    assert masked_psnr(out, photo, mask) > bih + 0.3
    np.testing.assert_array_equal(inpaint(photo, mask, channel_axis=-1, rng=0), inpaint(photo, mask, channel_axis=-1))
    # on a texture that repeats, the refinement (dictionary and non-local passes) adds over one dictionary pass (the
    # iterated prior off: it lifts both): 0.49 dB on this mask (0.5-0.9 on others), none if the passes did nothing
    brick = (data.brick()[:128, :128] / 255.0).astype(np.float32)
    one = masked_psnr(inpaint(brick, mask, n_passes=1, n_group_passes=0, prior=False), brick, mask)
    assert masked_psnr(inpaint(brick, mask, prior=False), brick, mask) > one + 0.4


def test_flat_image_stays_flat(rng):
    img = np.full((64, 64), 0.25)
    for mask in (rng.random((64, 64)) < 0.9, np.pad(np.ones((30, 30), bool), 17)):
        out = inpaint(img, mask)
        np.testing.assert_allclose(out, 0.25, atol=1e-6)


def test_shifted_grids_cover_the_image():
    from restore.inpainting.patches import patch_positions

    for offset in ((0, 0), (3, 1), (7, 7)):
        rows, cols = patch_positions((50, 37), 8, 8, offset)
        covered = np.zeros((50, 37), bool)
        for r in rows:
            for c in cols:
                covered[r:r + 8, c:c + 8] = True
        assert covered.all() and rows.max() == 42 and cols.max() == 29 and np.all(np.diff(rows) > 0)


@settings(max_examples=60, deadline=None)
@given(h=st.integers(8, 40), w=st.integers(8, 40), size=st.integers(2, 8), data=st.data())
def test_pass_grids_put_every_missing_pixel_in_a_patch_core(h, w, size, data):
    # patches whose missing pixels are all on their outer ring are left out; every missing pixel must
    # still be in the core of a chosen patch (or in a patch at the image's edge) at every pass
    from restore.inpainting.patches import pass_grids

    stride = data.draw(st.integers(1, size), label="stride")
    density = data.draw(st.sampled_from([0.002, 0.02, 0.3]), label="density")
    missing = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed")).random((h, w)) < density
    grids = pass_grids(missing, size, stride, 3, np.random.default_rng(0), margin=1)
    m = min(1, (size - stride) // 2)
    for rows, cols in grids:
        in_core = np.zeros((h, w), bool)
        for r, c in zip(rows, cols, strict=True):
            assert missing[r:r + size, c:c + size].any()
            r0, r1 = (r, r + size) if r in (0, h - size) else (r + m, r + size - m)
            c0, c1 = (c, c + size) if c in (0, w - size) else (c + m, c + size - m)
            in_core[r0:r1, c0:c1] = True
        assert in_core[missing].all()


def test_an_interrupt_while_the_bands_are_solved_stops_them_at_once(rng):
    # Ctrl-C (KeyboardInterrupt) reaches the main thread, which waits for the bands' threads: the queued bands were all
    # solved, and the running ones to their end, before it came out (seconds at 16 MP)
    import os
    import signal

    from restore._progress import Steps
    from restore.inpainting.interpolation import bands, biharmonic_fill

    class Interrupt(Exception):
        pass

    H, W = 10_000, 1000
    assert len(bands(H, W)) >= 5  # more bands than threads: some wait in the queue
    img = rng.random((H, W, 1))
    mask = np.zeros((H, W), bool)
    mask[5::20, 10:990] = True  # thin strokes in every band
    after = []

    def report(done, total):
        if interrupted:
            after.append(done)
        elif done >= 1 and not sent:
            sent.append(True)
            os.kill(os.getpid(), signal.SIGUSR1)

    def handler(signum, frame):
        interrupted.append(True)
        raise Interrupt

    interrupted, sent = [], []
    previous = signal.signal(signal.SIGUSR1, handler)
    try:
        with pytest.raises(Interrupt):
            biharmonic_fill(img, mask, Steps(report, 100), direct=True, n_threads=2)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert interrupted and len(after) <= 1, after


def test_pass_grids_skip_patches_touching_the_mask_on_their_rim_only():
    from restore.inpainting.patches import pass_grids

    missing = np.zeros((64, 64), bool)
    missing[30:33, 10:50] = True  # a stroke 3 px thick
    # 8 x 8 patches touch it from corners (23..32, 3..49); with a margin of 1 their core does from (24..31, 4..48)
    for rows, cols in pass_grids(missing, 8, 4, 8, np.random.default_rng(0), margin=1):
        assert rows.min() >= 24 and rows.max() <= 31 and cols.min() >= 4 and cols.max() <= 48


@pytest.mark.parametrize("direct", [False, True])
def test_interpolant_is_skimage_biharmonic(photo, strokes, rng, direct, monkeypatch):
    from skimage.restoration import inpaint_biharmonic

    from restore.inpainting import interpolation
    from restore.inpainting.interpolation import biharmonic_fill

    monkeypatch.setattr(interpolation, "_DIRECT_CHUNK", 100)  # the factorisations of many chunks of regions
    for mask in (strokes, rng.random((128, 128)) < 0.7):
        ref = inpaint_biharmonic(photo, mask, channel_axis=-1)
        ours = biharmonic_fill(photo.astype(np.float64), mask, direct=direct)
        np.testing.assert_array_equal(ours[~mask], photo[~mask])
        assert abs(masked_psnr(ours, photo, mask) - masked_psnr(ref, photo, mask)) < 0.3
        assert masked_psnr(ours, ref, mask) > 35  # the same interpolant, up to the CG tolerance


def test_interpolant_in_bands_is_skimage_biharmonic(rng):
    # an image of more than one band of rows (2 MP each): holes across the bands' seams too
    from skimage.restoration import inpaint_biharmonic

    from restore._progress import Steps
    from restore.inpainting.interpolation import bands, biharmonic_fill

    H, W = 1200, 2000
    assert len(bands(H, W)) > 1
    y, x = np.mgrid[0:H, 0:W] / 200.0
    img = np.stack([np.sin(x + c) * np.cos(0.7 * y - c) for c in (0.0, 1.0, 2.0)], axis=-1)
    mask = np.zeros((H, W), bool)
    for r0, _, _, _ in bands(H, W):
        for c0 in range(50, W - 50, 400):
            mask[max(0, r0 - 6):r0 + 6, c0:c0 + 30] = True  # at each band's first row (and the image's)
    mask[600:606, 100:1900] = True
    ref = inpaint_biharmonic(img, mask, channel_axis=-1)
    ours = biharmonic_fill(img, mask)
    np.testing.assert_array_equal(ours[~mask], img[~mask])
    assert masked_psnr(ours, ref, mask) > 35
    # the bands on two threads: the same values, and Cancel stops them all
    np.testing.assert_allclose(biharmonic_fill(img, mask, direct=True, n_threads=2)[mask],
                               biharmonic_fill(img, mask, direct=True)[mask], atol=1e-12)
    seen = []

    def cancel(done, total):
        seen.append(done)
        if len(seen) > 2:
            raise Cancelled

    with pytest.raises(Cancelled):
        biharmonic_fill(img, mask, Steps(cancel, 100), direct=True, n_threads=2)
    assert len(seen) == 3  # no report after the one that cancelled
    # inpaint's progress may come from the bands' threads, but one report at a time
    import threading
    import time

    active, most, names = [0], [0], set()

    def one_at_a_time(done, total):
        active[0] += 1
        most[0] = max(most[0], active[0])
        names.add(threading.current_thread().name)
        time.sleep(1e-3)
        active[0] -= 1

    biharmonic_fill(img, mask, Steps(one_at_a_time, 100), direct=True, n_threads=2)
    assert most[0] == 1 and all(n.startswith("restore-biharmonic") for n in names)


def test_refilling_only_the_regions_next_to_newly_known_pixels_is_the_whole_solve(photo):
    # inpaint's last interpolant re-solves only the mask's regions that the held-out pixels touched
    from restore.inpainting.interpolation import biharmonic_fill, refill

    img = photo.astype(np.float64)
    mask = np.zeros(img.shape[:2], bool)
    for r in range(8, 120, 16):  # separate strokes
        mask[r:r + 3, 10 + r // 2:60 + r // 2] = True
    run = mask.copy()
    run[27:29, 40:50] = True  # newly known pixels next to the stroke at rows 24-26 only
    run[50:52, 30:34] = True  # ... and these next to none
    redo = refill(run, mask)
    assert set(np.unique(np.nonzero(redo)[0])) == {24, 25, 26}
    first = biharmonic_fill(img, run, direct=True)  # the run's interpolant
    full = img.copy()
    full[mask] = first[mask]
    again = biharmonic_fill(full, redo, direct=True)
    np.testing.assert_allclose(again[mask], biharmonic_fill(img, mask, direct=True)[mask], atol=1e-10)


def test_a_hole_too_large_to_factor_is_solved_again_to_the_final_tolerance(monkeypatch):
    # a hole over the factorisation's limit is solved by conjugate gradients to the first pass's tolerance: the last
    # interpolant solves it again even where no held-out pixel touches it (the result of the whole re-solve)
    from skimage import data

    import restore.inpainting as ri

    img = data.camera() / 255.0
    mask = np.zeros(img.shape, bool)
    mask[100:360, 100:360] = True  # 67,600 px in one region
    for r in range(400, 500, 13):
        mask[r:r + 3, 5:500] = True  # strokes: where the held-out pixels are
    hole = np.zeros_like(mask)
    hole[100:360, 100:360] = True
    out = inpaint(img, mask, rng=0)
    monkeypatch.setattr(ri, "refill", lambda run, missing: missing)  # the whole mask solved again
    whole = inpaint(img, mask, rng=0)
    np.testing.assert_allclose(out[hole], whole[hole], atol=1e-6)


def _edges(n=64):
    """A grey image of two flat regions with a slanted edge, as 3 channels."""
    y, x = np.mgrid[0:n, 0:n]
    img = np.where(x + 0.4 * y < 0.7 * n, 0.2, 0.8)
    return np.repeat(img[..., None], 3, axis=-1)


def test_diffusion_sharpens_the_interpolant_at_edges(rng):
    from restore.inpainting.diffusion import sharpen
    from restore.inpainting.interpolation import biharmonic_fill

    img = _edges()
    mask = rng.random(img.shape[:2]) < 0.85
    bih = biharmonic_fill(img, mask)
    share = 0.65
    sharp, diffused = sharpen(bih.copy(), mask, n_threads=2, share=share)
    np.testing.assert_array_equal(sharp[~mask], img[~mask])
    assert masked_psnr(sharp, img, mask) > masked_psnr(bih, img, mask) + 0.7
    assert sharp.min() > bih.min() and sharp.max() < bih.max()  # stable: less overshoot than the interpolant
    # the start is the blend of the diffusion with the interpolant; the diffusion alone is sharper
    np.testing.assert_allclose(sharp[mask], share * diffused + (1 - share) * bih[mask], atol=1e-12)
    assert np.mean((diffused - img[mask]) ** 2) < np.mean((sharp[mask] - img[mask]) ** 2)
    # float32 in, float32 out, same numbers; one thread or two, same numbers
    s32, d32 = sharpen(bih.astype(np.float32), mask, n_threads=1, share=share)
    assert s32.dtype == d32.dtype == np.float32
    np.testing.assert_allclose(s32, sharp, atol=1e-5)
    np.testing.assert_allclose(d32, diffused, atol=1e-5)


def test_diffusion_tensor_smooths_along_edges_only():
    from restore._core_diffusion import eed_tensor

    u = np.zeros((32, 32, 1))
    u[:, 16:] = 1.0  # vertical edge between columns 15 and 16
    rows, cols = np.nonzero(np.ones((32, 32), bool))
    a, b, c = (np.zeros((32, 32)) for _ in range(3))
    t = np.arange(-3, 4, dtype=float)
    g = np.exp(-0.5 * t ** 2) * (np.abs(t) <= 2)
    g /= g.sum()
    dg = 0.5 * (np.roll(g, 1) - np.roll(g, -1))
    eed_tensor(u, rows, cols, g, dg, 0.05 ** 2, a, b, c)
    # at the edge: no diffusion across it (x), full diffusion along it (y)
    assert np.all(a[:, 15:17] < 1e-4) and np.allclose(c[:, 15:17], 1.0) and np.allclose(b[:, 15:17], 0.0)
    # far from it: isotropic
    assert np.allclose(a[:, :8], 1.0) and np.allclose(c[:, :8], 1.0) and np.allclose(b[:, :8], 0.0)


def test_edge_weights_fall_to_a_third_on_straight_edges(rng):
    from restore.inpainting.diffusion import edge_weights

    lum = np.zeros((96, 80))
    lum[:, 40:] = 1.0  # a straight vertical edge
    lum[:, :20] = rng.random((96, 20))  # isotropic noise, no orientation
    missing = np.zeros((96, 80), bool)
    missing[::3, ::2] = True
    keep = np.zeros((96, 80))
    keep[missing] = edge_weights(lum, missing)
    assert np.allclose(keep[missing & (np.abs(np.arange(80) - 39.5) < 3)], 1 / 3, atol=0.01)
    assert np.median(keep[:, 4:16][missing[:, 4:16]]) > 0.9
    assert np.all((keep[missing] >= 1 / 3 - 1e-9) & (keep[missing] <= 1.0))
    # in bands of rows (the memory bound of large images) as on the whole image
    np.testing.assert_allclose(edge_weights(lum, missing, band_px=17 * 80), keep[missing], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_edge_weights_are_those_of_scikit_images_structure_tensor(dtype, rng):
    from scipy.ndimage import gaussian_filter
    from skimage.feature import structure_tensor

    from restore.inpainting import diffusion

    lum = gaussian_filter(rng.random((40, 56)), 1.5).astype(dtype)
    missing = rng.random(lum.shape) < 0.3
    j11, j12, j22 = (t[missing] for t in structure_tensor(gaussian_filter(lum, diffusion._EDGE_SIGMA, mode="nearest"),
                                                         sigma=diffusion._EDGE_RHO, mode="nearest", order="rc"))
    coh = np.sqrt((j11 - j22) ** 2 + 4 * j12 ** 2) / np.maximum(j11 + j22, np.finfo(dtype).tiny)
    lo, hi = diffusion._EDGE_COHERENCE
    got = diffusion.edge_weights(lum, missing)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, np.clip((hi - coh) / (hi - lo), 0.0, 1.0))


def test_any_number_of_channels(photo, strokes):
    four = np.concatenate([photo, photo[..., :1]], axis=-1)
    out = inpaint(four, strokes, channel_axis=-1)
    assert out.shape == four.shape and masked_psnr(out, four, strokes) > 24


def test_grey_random_loss_and_channel_axis_first(photo, rng):
    grey = photo.mean(axis=-1).astype(np.float64)
    mask = rng.random(grey.shape) < 0.5
    out = inpaint(grey, mask)
    assert out.dtype == np.float64 and masked_psnr(out, grey, mask) > 26
    chw = np.moveaxis(photo, -1, 0)
    out_chw = inpaint(chw, np.zeros((128, 128), bool) | (rng.random((128, 128)) < 0.2), channel_axis=0)
    assert out_chw.shape == chw.shape


def test_holes_wider_than_a_patch_are_filled(photo):
    mask = np.zeros((128, 128), bool)
    mask[40:70, 50:85] = True  # 30 x 35 hole, patches are 8 x 8
    out = inpaint(photo, mask, channel_axis=-1)
    hole = out[mask]
    assert np.all(np.isfinite(hole))
    assert hole.min() > -0.2 and hole.max() < 1.2


@pytest.mark.parametrize("stride", [2, 3, 8])
def test_every_stride_fills_every_pixel(photo, stride):
    # with stride = patch size a pixel is seen by one patch only, often at its low-weight corner
    mask = np.zeros((128, 128), bool)
    mask[40:70, 50:85] = True
    mask[5:9, :] = True
    out = inpaint(photo, mask, channel_axis=-1, stride=stride)
    assert np.all(np.isfinite(out)) and out[mask].min() > -0.2 and out[mask].max() < 1.2
    np.testing.assert_array_equal(out[~mask], photo[~mask])


def test_integer_input_and_nothing_missing(photo):
    img8 = (photo * 255).astype(np.uint8)
    out = inpaint(img8, np.zeros((128, 128), bool), channel_axis=-1)
    assert out.dtype == np.float64 and not np.shares_memory(out, img8)
    np.testing.assert_allclose(out, img8 / 255.0, rtol=1e-15)
    m = np.zeros((128, 128), bool)
    m[10:14, 10:60] = True
    out = inpaint(img8, m, channel_axis=-1)
    assert out.dtype == np.float64 and out.max() <= 1.5


def test_given_dictionary_progress_and_cancel(photo, strokes, tmp_path):
    est = learn_dictionary(photo, masks=strokes, channel_axis=-1, branching=(4, 2), n_patches=2000, rng=0)
    assert est.components_.shape == (13, 64)  # luminance patches
    path = tmp_path / "d.npz"
    est.save(path)
    calls = []
    out = inpaint(photo, strokes, dictionary=path, channel_axis=-1, batch_size=500,
                  progress=lambda d, t: calls.append((d, t)))
    done, total = np.array(calls).T
    # one count over every stage: interpolation, diffusion, edge weights, batches of patches
    assert np.all(total == total[0]) and done[0] == 0 and done[-1] == total[0]
    # step by step, but for one jump: the non-local passes left when one stops gaining, counted at once
    steps = np.diff(done)
    assert np.all(steps >= 0) and np.count_nonzero(steps > 1) <= 1
    np.testing.assert_array_equal(out[~strokes], photo[~strokes])

    def cancel(done, total):
        raise Cancelled

    with pytest.raises(Cancelled):
        inpaint(photo, strokes, dictionary=est, channel_axis=-1, progress=cancel)


def test_progress_covers_the_dictionarys_adaptation_and_cancels_in_it(photo, strokes):
    calls = []
    inpaint(photo, strokes, channel_axis=-1, n_train=3000, progress=lambda d, t: calls.append((d, t)))
    done, total = np.array(calls).T
    assert np.all(total == total[0]) and done[-1] == total[0] and np.all(np.diff(done) >= 0)
    # the default dictionary is adapted to the image first: its mini-batches are steps too
    n_learn = -(-3000 // 256)
    assert len(np.unique(done[done <= n_learn])) >= n_learn // 2

    seen = []

    def cancel_in_learning(d, t):
        seen.append(d)
        if d >= 2:
            raise Cancelled

    with pytest.raises(Cancelled):
        inpaint(photo, strokes, channel_axis=-1, n_train=3000, progress=cancel_in_learning)
    assert max(seen) <= n_learn


@pytest.mark.parametrize("where", ["restore-inpaint-learn", "restore-inpaint-extrapolate", "MainThread"])
def test_an_error_of_the_progress_callback_reaches_the_caller_from_any_thread(photo, strokes, where):
    # raised in the dictionary's thread, it came out as Cancelled: the caller's own error was lost
    import threading
    import time

    def broken(d, t):
        if threading.current_thread().name.startswith(where) and d >= 2:
            raise ZeroDivisionError("the caller's bug")
        time.sleep(0.05)  # a slow callback: the other thread is still at work when this one fails

    with pytest.raises(ZeroDivisionError, match="the caller's bug"):
        inpaint(photo, strokes, channel_axis=-1, n_train=3000, progress=broken)
    assert not [t for t in threading.enumerate() if t.name.startswith("restore-inpaint")]


def test_the_stages_beside_each_other_report_one_at_a_time_and_cancel(photo, strokes):
    # the dictionary is fitted on a thread of its own while the start is interpolated, and the extrapolation runs
    # on another while the patches are coded: the same result, every step counted once, one report at a time, and
    # Cancel from any thread stops them all
    import threading
    import time

    active, most, names, calls = [0], [0], set(), []

    def one_at_a_time(done, total):
        active[0] += 1
        most[0] = max(most[0], active[0])
        names.add(threading.current_thread().name)
        calls.append((done, total))
        time.sleep(1e-3)
        active[0] -= 1

    out = inpaint(photo, strokes, channel_axis=-1, n_train=3000, progress=one_at_a_time)
    np.testing.assert_array_equal(out, inpaint(photo, strokes, channel_axis=-1, n_train=3000))
    assert most[0] == 1
    assert {"restore-inpaint-learn", "restore-inpaint-extrapolate"} <= {n.rsplit("_", 1)[0] for n in names}
    done, total = np.array(calls).T
    assert np.all(total == total[0]) and np.all(np.diff(done) >= 0) and done[-1] == total[0]
    for where in ("restore-inpaint-learn", "restore-inpaint-extrapolate", "MainThread"):
        def cancel(d, t, where=where):
            if threading.current_thread().name.startswith(where) and d >= 2:
                raise Cancelled

        with pytest.raises(Cancelled):
            inpaint(photo, strokes, channel_axis=-1, n_train=3000, progress=cancel)
        assert not [t for t in threading.enumerate() if t.name.startswith("restore-inpaint")]


def test_default_dictionary_ships():
    est = default_dictionary()
    assert isinstance(est, TreeDictionaryLearning) and est.components_.shape == (131, 64)
    assert est.branching == (10, 3, 3)


def test_errors(photo, strokes):
    with pytest.raises(ValueError, match="spatial shape"):
        inpaint(photo, strokes[:-1], channel_axis=-1)
    with pytest.raises(ValueError, match="every pixel as missing"):
        inpaint(photo, np.ones((128, 128), bool), channel_axis=-1)
    bad = photo.copy()
    bad[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        inpaint(bad, strokes, channel_axis=-1)
    bad_masked = photo.copy()
    bad_masked[strokes] = np.nan  # NaN under the mask is fine: those pixels are replaced
    assert np.all(np.isfinite(inpaint(bad_masked, strokes, channel_axis=-1)))
    with pytest.raises(ValueError, match="larger than the image"):
        inpaint(photo[:6, :6], strokes[:6, :6], channel_axis=-1)
    with pytest.raises(ValueError, match="stride"):
        inpaint(photo, strokes, channel_axis=-1, stride=0)
    with pytest.raises(ValueError, match="features"):
        inpaint(photo, strokes, channel_axis=-1, dictionary=default_dictionary(), patch_size=6)
    with pytest.raises(ValueError, match="does not exist"):
        inpaint(photo, strokes, channel_axis=-1, dictionary="missing.npz")
    with pytest.raises(ValueError, match="exactly 2 dimensions .* pass channel_axis"):
        inpaint(photo, strokes)
    for lam in (-1.0, (0.05,), (0.05, np.nan), (0.05, 0.0)):
        with pytest.raises(ValueError, match="lam"):
            inpaint(photo, strokes, channel_axis=-1, lam=lam)
    with pytest.raises(ValueError, match="n_passes"):
        inpaint(photo, strokes, channel_axis=-1, n_passes=0)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.int16])
def test_integer_input_gives_floats_in_its_range_even_where_the_fill_overshoots(dtype):
    # bars at full contrast next to the holes: the patches' reconstructions ring past black and white
    info = np.iinfo(dtype)
    img = np.full((96, 96), info.min, dtype)
    img[:, 48:] = info.max
    img[::8, :] = info.max
    img[:, ::8] = info.min
    mask = np.zeros(img.shape, bool)
    mask[20:30, 10:90] = True
    mask[60:62, :] = True
    out = inpaint(img, mask)
    low = -1.0 if info.min < 0 else 0.0
    assert out.dtype == np.float64 and low <= out.min() and out.max() <= 1.0
    np.testing.assert_array_equal(out[~mask], img_as_float(img)[~mask])


def test_mask_coverage_tells_an_inverted_mask_from_random_loss():
    from restore.inpainting import mask_coverage

    text = np.zeros((256, 256), bool)
    for r in range(20, 240, 40):
        text[r:r + 6, 16:240] = True
    rng = np.random.default_rng(0)
    assert not mask_coverage(text).suspect
    assert not mask_coverage(rng.random((256, 256)) < 0.9).suspect  # random loss: every pixel near a known one
    inverted = mask_coverage(~text)
    assert inverted.suspect and inverted.missing > 0.8 and inverted.far > 0.25
    assert "86%" in inverted.describe() or f"{inverted.missing:.0%}" in inverted.describe()
    assert mask_coverage(np.zeros((64, 64), bool)).missing == 0.0


def test_a_mask_that_cannot_be_meant_is_warned_of(photo):
    keep = np.zeros((128, 128), bool)
    keep[::32, :] = True
    with pytest.warns(UserWarning, match=r"marks \d+% of the image as missing.*inverted"):
        inpaint(photo, ~keep, channel_axis=-1, n_passes=1)


@pytest.mark.parametrize("kind", ["npy", "text", "other npz"])
def test_a_file_that_is_no_dictionary_is_refused_with_one_clear_line(photo, strokes, tmp_path, kind):
    if kind == "npy":
        path = tmp_path / "d.npy"
        np.save(path, np.zeros((4, 64)))
    elif kind == "text":
        path = tmp_path / "d.npz"
        path.write_text("not a dictionary")
    else:
        path = tmp_path / "d.npz"
        np.savez(path, weights=np.zeros(3))
    with pytest.raises(ValueError, match=r"dictionary .*d\.np[yz].* (is not|was not written)") as info:
        inpaint(photo, strokes, channel_axis=-1, dictionary=path)
    assert "context manager" not in str(info.value) and "\n" not in str(info.value)


def test_hole_fill_stays_in_the_known_range():
    # a cone rising to a hole: the biharmonic interpolant carries the slope on, far past every known value (as
    # scikit-image's does before it clips); the fill must not (a hole of astronaut.png went -4.5 dB under biharmonic)
    yy, xx = np.mgrid[:96, :96]
    r = np.hypot(yy - 48, xx - 48)
    cone = np.clip((32 - r) / 12, 0, 1)
    img = np.stack([cone, 0.5 * cone, 1 - cone], axis=-1)
    hole = r < 20
    out = inpaint(img, hole, channel_axis=-1)
    lo, hi = img[~hole].min(axis=0), img[~hole].max(axis=0)
    assert np.all(out[hole] >= lo - 0.05) and np.all(out[hole] <= hi + 0.05)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.integers(1, 12), st.integers(0, 2**32 - 1))
def test_window_sums_count_the_mask_in_every_window(h, w, size, seed):
    from numpy.lib.stride_tricks import sliding_window_view

    from restore.inpainting.patches import window_sums

    a = np.random.default_rng(seed).random((h, w)) < 0.3
    got = window_sums(a, size)
    if size > min(h, w):  # no window fits
        assert got.size == 0
    else:
        np.testing.assert_array_equal(got, sliding_window_view(a, (size, size)).sum(axis=(2, 3)))
    np.testing.assert_array_equal(window_sums(np.asfortranarray(a), min(size, h, w)),
                                  sliding_window_view(a, (min(size, h, w),) * 2).sum(axis=(2, 3)))


@pytest.mark.parametrize("size", [0, -3])
def test_window_sums_refuse_an_empty_or_negative_window(size):
    from restore.inpainting.patches import window_sums

    with pytest.raises(ValueError, match="window size"):
        window_sums(np.ones((5, 5), dtype=bool), size)


@given(st.integers(1, 30), st.integers(1, 30), st.integers(1, 4), st.sampled_from([np.float32, np.float64]),
       st.sampled_from([0.0, 0.5, 1.0]), st.booleans(), st.integers(0, 2**32 - 1), st.sampled_from([1, 50, None]))
def test_known_range_is_numpys_min_and_max_over_the_known_pixels(h, w, c, dtype, loss, strided, seed, band):
    """On a view too, read in bands of copies (``band`` pixels each, None: the default): the extremes of them all."""
    from unittest import mock

    from restore.inpainting import interpolation

    rng = np.random.default_rng(seed)
    img = rng.normal(size=(c, h, w)).astype(dtype)
    img.reshape(-1)[rng.integers(0, img.size, 2)] = rng.choice([np.nan, np.inf, -np.inf, 0.0], 2)
    missing = rng.random((h, w)) < loss
    view = np.moveaxis(img, 0, -1) if strided else np.ascontiguousarray(np.moveaxis(img, 0, -1))
    with mock.patch.object(interpolation, "_EXTREMES_BAND_PX", band or interpolation._EXTREMES_BAND_PX):
        lo, hi = interpolation.known_range(view, missing)
    for ch in range(c):
        known = view[..., ch][~missing]
        np.testing.assert_array_equal([lo[ch], hi[ch]], [known.min(), known.max()] if known.size else [np.inf, -np.inf])


@pytest.mark.parametrize("share", [0.9, 0.1])  # drawn at random over the image; listed, then sampled
def test_training_positions_are_a_uniform_sample_of_the_usable_ones_without_repeats(share):
    from scipy import stats

    from restore.inpainting.dictionary import _draw_positions

    where = np.random.default_rng(1).random((48, 40)) < share
    count = int(where.sum())
    hits = np.zeros(where.shape)
    rng = np.random.default_rng(2)
    for _ in range(300):
        r, c = _draw_positions(where, count // 10, rng)
        assert len(r) == count // 10 and where[r, c].all()
        assert len(set(zip(r.tolist(), c.tolist(), strict=True))) == len(r)  # no position twice
        np.add.at(hits, (r, c), 1)
    assert stats.chisquare(hits[where]).pvalue > 1e-3  # each usable position as often as any other
    r, c = _draw_positions(where, 10 * count, rng)  # more wanted than there are: each one once
    assert len(r) == count and where[r, c].all() and len(set(zip(r.tolist(), c.tolist(), strict=True))) == count


def test_big_endian_floats_are_inpainted_as_native_ones_and_keep_their_dtype():
    # FITS data (astropy) is big-endian: numba's kernels refused it with a TypingError
    rng = np.random.default_rng(0)
    img = rng.random((48, 48)).astype(np.float32)
    mask = np.zeros((48, 48), bool)
    mask[20:23, 5:40] = True
    for dtype in (">f4", ">f2"):
        native = np.dtype(dtype).newbyteorder("=")
        want = inpaint(img.astype(native), mask, n_passes=2, n_group_passes=1)
        got = inpaint(img.astype(dtype), mask, n_passes=2, n_group_passes=1)
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, want)


def test_floats_wider_than_64_bits_are_refused_naming_the_dtype():
    img = np.zeros((16, 16), np.longdouble)
    if img.dtype.itemsize <= 8:  # pragma: no cover - a platform whose long double is a double
        pytest.skip("long double is float64 here")
    with pytest.raises(ValueError, match=r"image has dtype float(96|128).*use float64, float32 or float16"):
        inpaint(img, np.eye(16, dtype=bool))


def test_a_huge_nodata_value_in_the_holes_is_never_read():
    # GDAL's float32 nodata in the holes, known pixels under 0.5: dividing it by the work unit overflowed
    rng = np.random.default_rng(0)
    img = (rng.random((64, 64, 3)) * 0.4).astype(np.float32)
    mask = np.zeros((64, 64), bool)
    mask[20:24, 10:50] = True
    img[mask] = np.finfo(np.float32).min
    out = inpaint(img, mask, channel_axis=-1, n_passes=2, n_group_passes=1)  # warnings are errors in the suite
    assert np.isfinite(out).all() and np.array_equal(out[~mask], img[~mask])


@pytest.mark.parametrize("kind", ["strokes", "random"])
def test_a_faint_texture_on_a_bright_background_is_filled_as_well(kind):
    """Scaling and offsetting an image (a camera's baseline, a sky) does not change how well it is filled."""
    from skimage.restoration import inpaint_biharmonic

    yy, xx = np.mgrid[:128, :128]
    texture = 0.5 + 0.2 * np.sin(2 * np.pi * (xx * np.cos(0.5) + yy * np.sin(0.5)) / 7.0) \
        + 0.1 * np.cos(2 * np.pi * yy / 11.0)
    mask = stroke_mask() if kind == "strokes" else np.random.default_rng(3).random(texture.shape) < 0.8
    gains = []
    for img in (texture, 0.1 * texture + 0.85):
        bih = masked_psnr(inpaint_biharmonic(img, mask), img, mask)
        gains.append(masked_psnr(inpaint(img, mask, prior=False), img, mask) - bih)  # the prior has its own test
    # the extrapolation and the non-local passes took the known pixels' peak for their scale, not their range:
    # under random loss the faint texture gained 6.5 dB less than the same at full contrast (strokes: 0.2 dB less)
    assert abs(gains[1] - gains[0]) < 0.3, gains


def test_inpainting_imports_neither_scikit_learn_nor_what_skimage_feature_loads():
    """Importing scikit-learn, or skimage.feature (it loads scipy.stats and scipy.spatial), takes about a second each:
    inpaint does without them, the shipped dictionary's adaptation and the refusal of a wrong dictionary too."""
    from restore.inpainting.dictionary import should_adapt

    assert should_adapt(stroke_mask(), 8)[0]  # the photo is one whose dictionary is adapted to it
    code = ("import sys\n"
            f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
            "import numpy as np\n"
            "from inpaint_cases import photo_crop, stroke_mask\n"
            "import restore\n"
            "before = set(sys.modules)\n"
            "restore.inpaint(photo_crop(), stroke_mask(), channel_axis=-1, rng=0)\n"
            "try:\n"
            "    restore.inpaint(photo_crop(), stroke_mask(), channel_axis=-1, dictionary=np.zeros((131, 64)))\n"
            "except ValueError as exc:\n"
            "    assert 'TreeDictionaryLearning' in str(exc)\n"
            "heavy = ('sklearn', 'skimage.feature', 'scipy.stats', 'scipy.spatial')\n"
            "print('HEAVY', sorted(m for m in set(sys.modules) - before if m in heavy or m.startswith('sklearn.')))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "HEAVY []" in proc.stdout, proc.stdout[-2000:]
