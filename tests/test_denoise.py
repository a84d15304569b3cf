import dataclasses
from pathlib import Path

import numpy as np
import pytest
import pywt
from skimage import data, io
from skimage.restoration import denoise_wavelet

from restore import choose_lam, denoise_wavelet_tree, estimate_sigma, prox, wavelet_quadtree
from restore.denoise._transform import _shifts

PENS = ("l1", "l0", "tree_l2", "tree_linf", "tree_l0")


def psnr(x, ref, peak=1.0):
    return 10 * np.log10(peak**2 / np.mean((x - ref) ** 2))


@pytest.fixture(scope="module")
def camera():
    return data.camera()[96:352, 128:384] / 255.0  # 256 x 256 in [0, 1]


def direct(image, lam, penalty, wavelet, level, penalize_approx=False):
    """Pad symmetrically, transform, prox, inverse transform, crop: by hand."""
    h, w = image.shape
    step = 2**level
    ph, pw = -(-h // step) * step, -(-w // step) * step
    x = np.pad(image, ((0, ph - h), (0, pw - w)), mode="symmetric")
    c, slices, shapes = pywt.ravel_coeffs(pywt.wavedec2(x, wavelet, mode="periodization", level=level))
    na = c.size - sum(3 * s["da"][0] * s["da"][1] for s in shapes[1:])
    if penalty in ("l1", "l0") and not penalize_approx:
        v = c.copy()
        v[na:] = prox(c[na:], lam, penalty=penalty)
    else:
        v = prox(c, lam, penalty=penalty, tree=wavelet_quadtree((ph, pw), wavelet, level, penalize_approx))
    rec = pywt.waverec2(pywt.unravel_coeffs(v, slices, shapes, output_format="wavedec2"), wavelet,
                        mode="periodization")
    return rec[:h, :w]


@pytest.mark.parametrize("penalty", PENS)
@pytest.mark.parametrize(("shape", "wavelet", "level"), [((64, 64), "haar", 6), ((64, 48), "db3", 2),
                                                         ((63, 65), "db3", 3), ((37, 100), "sym4", 2)])
def test_equals_transform_prox_inverse(penalty, shape, wavelet, level, rng):
    img = rng.standard_normal(shape) + np.linspace(0, 3, shape[1])
    lam = 0.8 if penalty not in ("l0", "tree_l0") else 0.5
    for pa in (False, True):
        out = denoise_wavelet_tree(img, lam=lam, penalty=penalty, wavelet=wavelet, level=level, penalize_approx=pa,
                                   wiener=False)
        np.testing.assert_allclose(out, direct(img, lam, penalty, wavelet, level, pa), rtol=0, atol=1e-12)


def test_lam_zero_is_identity_and_shapes_are_exact(rng):
    img = rng.standard_normal((63, 65))
    np.testing.assert_allclose(denoise_wavelet_tree(img, lam=0.0), img, atol=1e-12)  # the Wiener stage is skipped
    np.testing.assert_allclose(denoise_wavelet_tree(img, strength=0.0), img, atol=1e-12)
    vol = rng.standard_normal((8, 16, 20))
    np.testing.assert_allclose(denoise_wavelet_tree(vol, lam=0.0, axes=(0, 1, 2)), vol, atol=1e-12)


def test_dtypes_and_input_untouched(camera, rng):
    noisy = camera + 0.1 * rng.standard_normal(camera.shape)
    n32 = noisy.astype(np.float32)
    before = n32.copy()
    out32 = denoise_wavelet_tree(n32, sigma=0.1)
    assert out32.dtype == np.float32 and out32.shape == n32.shape
    np.testing.assert_array_equal(n32, before)
    out8 = denoise_wavelet_tree((camera * 255).astype(np.uint8), sigma=0.05)
    assert out8.dtype == np.float64 and 0.0 <= out8.mean() <= 1.0  # img_as_float scaling


def test_denoised_beats_noisy_for_every_penalty(camera, rng):
    noisy = camera + 0.1 * rng.standard_normal(camera.shape)
    for penalty in PENS:
        out = denoise_wavelet_tree(noisy, sigma=0.1, penalty=penalty)
        assert psnr(out, camera) > psnr(noisy, camera) + 5, penalty


def test_ordering_of_penalties_with_oracle_lam(camera, rng):
    sigma = 25 / 255
    noisy = camera + sigma * rng.standard_normal(camera.shape)
    best = {}
    for penalty in PENS:
        ts = np.geomspace(0.3, 4, 30)
        lams = ts * sigma if penalty in ("l1", "tree_l2", "tree_linf") else 0.5 * (ts * sigma) ** 2
        best[penalty] = max(psnr(denoise_wavelet_tree(noisy, lam=lam, penalty=penalty, wiener=False), camera)
                            for lam in lams)
    assert best["tree_l2"] > best["tree_linf"] > best["tree_l0"] > best["l0"]
    assert best["tree_linf"] > best["l1"]
    assert best["tree_l2"] > best["l1"] + 0.8


@pytest.mark.parametrize("penalty", ["tree_l2", "tree_linf", "l1"])
def test_sure_is_close_to_the_oracle(camera, rng, penalty):
    sigma = 20 / 255
    noisy = camera + sigma * rng.standard_normal(camera.shape)
    choice = choose_lam(noisy, sigma=sigma, penalty=penalty)
    assert choice.method == "sure" and choice.sigma == (sigma,)
    tree = {"penalty": penalty, "wiener": False}  # the stage whose lam SURE chooses
    auto = psnr(denoise_wavelet_tree(noisy, sigma=sigma, **tree), camera)
    assert auto == pytest.approx(psnr(denoise_wavelet_tree(noisy, lam=choice.lam[0], **tree), camera))
    levels = choose_lam(noisy, sigma=sigma, penalty=penalty, per_level=True)
    assert levels.lam == choice.lam and len(levels.level_weights[0]) == 4
    per_level = psnr(denoise_wavelet_tree(noisy, sigma=sigma, per_level=True, **tree), camera)
    assert per_level == pytest.approx(psnr(denoise_wavelet_tree(noisy, lam=levels, **tree), camera))
    assert per_level > auto - 0.02  # the level weights do not lose to the single lam
    oracle = max(psnr(denoise_wavelet_tree(noisy, lam=t * sigma, **tree), camera)
                 for t in np.geomspace(0.2, 3, 40))
    assert auto > oracle - 0.1


def test_rule_and_choice_api(camera, rng):
    noisy = camera + 0.05 * rng.standard_normal(camera.shape)
    rule = choose_lam(noisy, sigma=0.05, penalty="tree_l0")
    assert rule.method == "rule" and rule.lam[0] > 0
    with pytest.raises(ValueError, match="needs a continuous"):
        choose_lam(noisy, sigma=0.05, penalty="l0", method="sure")
    with pytest.raises(ValueError, match="Invalid lam method"):
        denoise_wavelet_tree(noisy, lam="oracle")
    # the rule is scale-invariant: an image in [0, 255] gets lam 255 times larger
    rule255 = choose_lam(noisy * 255, sigma=0.05 * 255, penalty="tree_l0")
    assert rule255.lam[0] == pytest.approx(rule.lam[0] * 255**2, rel=1e-6)


def test_cycle_spinning_helps(camera, rng):
    noisy = camera + 0.1 * rng.standard_normal(camera.shape)
    p0 = psnr(denoise_wavelet_tree(noisy, sigma=0.1, wiener=False), camera)
    p4 = psnr(denoise_wavelet_tree(noisy, sigma=0.1, wiener=False, cycle_spins=4), camera)
    assert p4 > p0 + 0.2  # the tree stage alone
    assert psnr(denoise_wavelet_tree(noisy, sigma=0.1, cycle_spins=4), camera) > psnr(
        denoise_wavelet_tree(noisy, sigma=0.1), camera) > p4  # the Wiener stage's shifts: its default has some
    assert _shifts(4) == [(0, 0), (1, 1), (1, 0), (0, 1)]
    assert len(set(_shifts(16))) == 16


def test_estimate_sigma(camera, rng):
    for sigma in (10 / 255, 25 / 255, 50 / 255):
        noisy = camera + sigma * rng.standard_normal(camera.shape)
        assert estimate_sigma(noisy) == pytest.approx(sigma, rel=0.12)
    rgb = np.stack([camera, camera, camera], axis=-1) + 0.1 * rng.standard_normal((*camera.shape, 3))
    est = estimate_sigma(rgb, channel_axis=-1)
    assert est.shape == (3,) and np.allclose(est, 0.1, rtol=0.1)


def test_estimate_sigma_of_a_photo_clipped_at_black_and_white(rng):
    # an 8-bit photo whose saturated regions lost their noise: the blocks of least noise were those, and the estimate
    # came out a quarter low (14.5 for 20.4), which the default denoising then used; now within 10 %
    clean = data.astronaut()[..., 0] / 255.0
    raw = np.clip(np.rint((clean + 0.08 * rng.standard_normal(clean.shape)) * 255), 0, 255) / 255.0
    inside = (raw > 0) & (raw < 1)
    truth = np.std((raw - clean)[inside])  # the noise where it was not cut
    assert estimate_sigma(raw) == pytest.approx(truth, rel=0.1)
    restore_default = denoise_wavelet_tree(raw)
    assert np.array_equal(restore_default, denoise_wavelet_tree(raw, noise="gaussian", sigma=estimate_sigma(raw)))


@pytest.mark.parametrize("channel_axis", [-1, 0])
def test_colour(channel_axis, rng):
    clean = data.astronaut()[100:228, 180:308] / 255.0
    noisy = clean + 0.08 * rng.standard_normal(clean.shape)
    x = np.moveaxis(noisy, -1, channel_axis)
    out = denoise_wavelet_tree(x, sigma=0.08, channel_axis=channel_axis)
    assert out.shape == x.shape
    out = np.moveaxis(out, channel_axis, -1)
    joint = psnr(out, clean)
    per_channel = psnr(np.stack([denoise_wavelet_tree(noisy[..., c], sigma=0.08) for c in range(3)], -1), clean)
    assert joint > psnr(noisy, clean) + 5
    assert joint > per_channel  # the opponent colour space pays off


def test_stacks_are_processed_plane_by_plane(rng):
    stack = rng.standard_normal((3, 40, 50))
    out = denoise_wavelet_tree(stack, lam=0.5, penalty="tree_linf", sigma=0.9)
    for i in range(3):
        np.testing.assert_allclose(out[i], denoise_wavelet_tree(stack[i], lam=0.5, penalty="tree_linf", sigma=0.9))
    rgb_stack = rng.standard_normal((2, 32, 32, 3))
    out = denoise_wavelet_tree(rgb_stack, lam=[0.3, 0.2, 0.1], channel_axis=-1, sigma=0.9)
    np.testing.assert_allclose(out[1], denoise_wavelet_tree(rgb_stack[1], lam=[0.3, 0.2, 0.1], channel_axis=-1,
                                                            sigma=0.9))


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"penalty": "tree-l2"}, ValueError, "Invalid penalty"),
        ({"wavelet": "nope"}, ValueError, "Invalid wavelet"),
        ({"wavelet": "bior2.2"}, ValueError, "not orthogonal"),
        ({"wavelet": "morl"}, ValueError, "Invalid wavelet"),
        ({"sigma": -1.0}, ValueError, "sigma must be finite and >= 0"),
        ({"lam": -1.0}, ValueError, "lam must be finite and >= 0"),
        ({"lam": [1.0, 2.0]}, ValueError, "one number or one per channel"),
        ({"lam": "sure", "penalty": "tree_l0"}, ValueError, "needs a continuous"),
        ({"cycle_spins": -2}, ValueError, "cycle_spins"),
        ({"level": 0}, ValueError, "level must be"),
        ({"channel_axis": 3}, ValueError, "channel_axis 3 is out of range"),
    ],
)
def test_errors(kwargs, exc, match, rng):
    with pytest.raises(exc, match=match):
        denoise_wavelet_tree(rng.standard_normal((32, 32)), **kwargs)


def test_bad_images():
    with pytest.raises(ValueError, match="NaN or infinite"):
        denoise_wavelet_tree(np.full((16, 16), np.nan))
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        denoise_wavelet_tree(np.zeros(16))
    with pytest.raises(ValueError, match="at least 2 pixels on each spatial side"):
        denoise_wavelet_tree(np.zeros((1, 16)), lam=1.0)
    with pytest.raises(ValueError, match="real numeric"):
        denoise_wavelet_tree(np.zeros((4, 4), dtype=complex))


def test_progress_moves_within_one_plane_and_cancel_stops_it(camera, rng):
    from restore import Cancelled

    noisy = camera + 0.1 * rng.standard_normal(camera.shape)
    reports = []
    out = denoise_wavelet_tree(noisy, sigma=0.1, cycle_spins=4, progress=lambda d, t: reports.append((d, t)))
    np.testing.assert_array_equal(out, denoise_wavelet_tree(noisy, sigma=0.1, cycle_spins=4))
    totals = {t for _, t in reports}
    assert len(totals) == 1 and len(reports) > 20  # SURE's evaluations and every shift's stages
    done = [d for d, _ in reports]
    assert done == sorted(done) and done[0] == 0 and done[-1] == totals.pop()

    def stop_at_third(done, total):
        if done >= 3:
            raise Cancelled
    with pytest.raises(Cancelled):
        denoise_wavelet_tree(noisy, sigma=0.1, cycle_spins=4, progress=stop_at_third)


def test_choose_lam_reports_each_sure_evaluation(camera, rng):
    noisy = camera + 0.1 * rng.standard_normal(camera.shape)
    reports = []
    choice = choose_lam(noisy, sigma=0.1, progress=lambda d, t: reports.append(d))
    assert choice == choose_lam(noisy, sigma=0.1)
    assert len(reports) > 10 and reports == sorted(reports)


def test_strength_multiplies_the_chosen_lam_and_keeps_level_weights(camera, rng):
    noisy = camera + 0.1 * rng.standard_normal(camera.shape)
    choice = choose_lam(noisy, sigma=0.1, per_level=True)
    for strength in (0.5, 2.0):  # the tree stage (the Wiener stage's noise level is scaled too: see below)
        scaled = dataclasses.replace(choice, lam=tuple(v * strength for v in choice.lam))
        np.testing.assert_allclose(
            denoise_wavelet_tree(noisy, sigma=0.1, per_level=True, strength=strength, wiener=False),
            denoise_wavelet_tree(noisy, sigma=0.1, lam=scaled, wiener=False), atol=1e-12)
        np.testing.assert_allclose(denoise_wavelet_tree(noisy, sigma=0.1, per_level=True, strength=strength),
                                   denoise_wavelet_tree(noisy, sigma=0.1 * strength, lam=scaled), atol=1e-12)
    np.testing.assert_array_equal(denoise_wavelet_tree(noisy, sigma=0.1, strength=1.0),
                                  denoise_wavelet_tree(noisy, sigma=0.1))
    with pytest.raises(ValueError, match="strength"):
        denoise_wavelet_tree(noisy, strength=-1.0)


@pytest.mark.parametrize("axes", [(0, 1), (0, 1, 2)])
def test_strength_goes_smoothly_to_the_image_itself(axes, rng):
    """Both stages follow the dial: a strength near 0 gives the image back, 1 the full result, in between more."""
    clean = np.kron(rng.random((4, 8, 8)), np.ones((4, 8, 8)))
    noisy = clean + 0.1 * rng.standard_normal(clean.shape)
    dist = [float(np.abs(denoise_wavelet_tree(noisy, sigma=0.1, axes=axes, strength=s) - noisy).max())
            for s in (1e-6, 0.25, 1.0)]
    assert dist[0] < 1e-3 < dist[1] < dist[2]


def test_a_lam_given_as_a_number_is_applied_to_the_image_itself_under_auto_noise():
    # photon noise: 'auto' would choose Poisson-Gaussian and read lam in the Anscombe transform's units
    rng = np.random.default_rng(4)
    clean = np.kron(rng.random((16, 16)), np.ones((8, 8))) * 40
    counts = rng.poisson(clean).astype(float)
    np.testing.assert_array_equal(denoise_wavelet_tree(counts, lam=2.0),
                                  denoise_wavelet_tree(counts, lam=2.0, noise="gaussian"))
    np.testing.assert_allclose(denoise_wavelet_tree(counts, lam=2.0, level=3, wiener=False),
                               direct(counts, 2.0, "tree_l2", "db3", 3), atol=1e-9)


@pytest.mark.parametrize("name", ["camera", "coins"])
def test_the_default_beats_bayes_shrink_by_a_margin_on_a_bundled_photo(name):
    """The default call, told the noise level as scikit-image's BayesShrink is, gives more than a dB over it."""
    clean = io.imread(Path(__file__).resolve().parents[1] / "sample_images" / f"{name}.png") / 255.0
    sigma = 25 / 255
    noisy = clean + sigma * np.random.default_rng(7).standard_normal(clean.shape)
    bayes = denoise_wavelet(noisy, sigma=sigma, wavelet="db3", mode="soft", method="BayesShrink", rescale_sigma=True)
    assert psnr(denoise_wavelet_tree(noisy, sigma=sigma), clean) > psnr(bayes, clean) + 1.2
