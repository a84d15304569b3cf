"""One noise model everywhere (issue 28): ``noise="auto"`` by default, decided once by the noise-level function.

The library decides between Gaussian and Poisson-Gaussian noise with
:func:`restore.estimate_noise` and accepts its result as ``noise=``; the CLI
estimates once, prints the one line and passes the estimate on.
"""

import logging
from pathlib import Path

import numpy as np
import pytest

import restore
from restore import NoiseEstimate, denoise_nonlocal_tree, denoise_wavelet_tree, estimate_noise
from restore.cli import main
from restore.evaluate import poisson_gaussian_noise

tifffile = pytest.importorskip("tifffile")

DATA = Path(__file__).resolve().parent / "data"
PEAK, READ = 20.0, 0.01  # photons where the nuclei are brightest, read noise (image units)


def psnr(x, ref):
    return 10 * np.log10(1.0 / np.mean((np.asarray(x, float) - ref) ** 2))


@pytest.fixture(scope="module")
def clean():
    v = np.load(DATA / "nuclei_16x64x64.npz")["volume"].astype(np.float64)
    return v / v.max()


@pytest.fixture(scope="module")
def photons(clean):
    """The nuclei under photon noise: a fluorescence volume as a camera gives it (no offset)."""
    return poisson_gaussian_noise(clean, peak=PEAK, read_noise=READ, rng=0)


@pytest.fixture(scope="module")
def photo():
    from skimage import data

    clean = data.camera()[:128, :128] / 255.0
    return clean, clean + 0.1 * np.random.default_rng(1).standard_normal(clean.shape)


# ---------------------------------------------------------------------------
# The library
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("denoise", [denoise_wavelet_tree, denoise_nonlocal_tree])
def test_auto_is_the_default_and_finds_photon_noise_in_a_fluorescence_volume(denoise, photons, clean, caplog):
    est = estimate_noise(photons)
    assert est.noise == "poisson-gaussian"
    with caplog.at_level(logging.INFO, logger="restore.denoise"):
        auto = denoise(photons, axes=(0, 1, 2))
    said = [r.getMessage() for r in caplog.records if r.name == "restore.denoise"]
    assert len(said) == 1 and est.describe() in said[0]  # the choice and its parameters, one line
    explicit = denoise(photons, axes=(0, 1, 2), noise="poisson-gaussian", gain=est.gain, sigma=est.sigma)
    np.testing.assert_allclose(auto, explicit, rtol=0, atol=1e-12)
    gaussian = denoise(photons, axes=(0, 1, 2), noise="gaussian")
    assert psnr(auto, clean) > psnr(gaussian, clean) + 0.3


@pytest.mark.parametrize("denoise", [denoise_wavelet_tree, denoise_nonlocal_tree])
def test_an_estimate_passed_as_noise_is_used_as_is_without_a_second_estimate(denoise, photons, photo, monkeypatch,
                                                                              caplog):
    est = estimate_noise(photons)
    y = photo[1]
    gauss = estimate_noise(y)
    want = denoise(photons, axes=(0, 1, 2), noise="poisson-gaussian", gain=est.gain, sigma=est.sigma)
    want_photo = denoise(y, noise="gaussian", sigma=gauss.sigma)

    def no_second(*args, **kwargs):
        raise AssertionError("estimated again")

    monkeypatch.setattr(restore.noise, "estimate_noise", no_second)
    monkeypatch.setattr("restore.denoise._noise_model.estimate_noise", no_second)
    with caplog.at_level(logging.INFO, logger="restore.denoise"):
        got = denoise(photons, axes=(0, 1, 2), noise=est)
    assert any(est.describe() in r.getMessage() for r in caplog.records)
    np.testing.assert_array_equal(got, want)
    # a Gaussian estimate: the model and its sigma (what its one line showed is what is used)
    np.testing.assert_array_equal(denoise(y, noise=gauss), want_photo)
    # parameters given with it take precedence, as with the named model
    np.testing.assert_array_equal(denoise(y, noise=gauss, sigma=0.1), denoise(y, noise="gaussian", sigma=0.1))


@pytest.mark.parametrize("denoise", [denoise_wavelet_tree, denoise_nonlocal_tree])
def test_gaussian_noise_on_a_photo_stays_gaussian_and_unchanged(denoise, photo, caplog):
    clean, y = photo
    assert estimate_noise(y).noise == "gaussian"
    with caplog.at_level(logging.INFO, logger="restore.denoise"):
        auto = denoise(y)
    assert any("Gaussian noise" in r.getMessage() for r in caplog.records if r.name == "restore.denoise")
    np.testing.assert_array_equal(auto, denoise(y, noise="gaussian"))
    rgb = np.stack([y, y[::-1], y[:, ::-1]], axis=-1)
    np.testing.assert_array_equal(denoise(rgb, channel_axis=-1), denoise(rgb, channel_axis=-1, noise="gaussian"))


@pytest.mark.parametrize("noise", ["auto", "gaussian"])
def test_each_plane_and_channel_gets_the_sigma_estimate_noise_gives_it(noise, photo):
    """One Gaussian estimator: a stack's planes each get restore.estimate_noise's sigma, and restore.estimate_sigma
    gives it (they had another estimator's, and the command, which prints estimate_noise's, disagreed)."""
    clean, _ = photo
    rng = np.random.default_rng(3)
    stack = np.stack([clean, clean[::-1], clean.T]) + np.array([0.05, 0.1, 0.2])[:, None, None] * rng.standard_normal(
        (3, *clean.shape))
    rgb = np.stack([clean, clean[::-1], clean.T], axis=-1) + 0.1 * rng.standard_normal((*clean.shape, 3))
    for denoise in (denoise_wavelet_tree, denoise_nonlocal_tree):
        got = denoise(stack, noise=noise)
        for i in range(3):
            np.testing.assert_array_equal(got[i], denoise(stack[i], sigma=estimate_noise(stack[i]).sigma))
    sigmas = [estimate_noise(rgb[..., c], noise="gaussian").sigma for c in range(3)]
    assert restore.estimate_sigma(rgb, channel_axis=-1) == pytest.approx(sigmas, rel=1e-12)


def test_the_command_denoises_a_stack_as_the_library_default_does(photo, tmp_path, capsys):
    clean, _ = photo
    stack = np.stack([clean, clean[::-1]]) + 0.1 * np.random.default_rng(4).standard_normal((2, *clean.shape))
    stack = stack.astype(np.float32)
    src, dst = tmp_path / "stack.tif", tmp_path / "out.tif"
    tifffile.imwrite(src, stack)
    assert main(["denoise", str(src), str(dst), "--quiet"]) == 0
    np.testing.assert_allclose(tifffile.imread(dst), denoise_wavelet_tree(stack), atol=1e-6)


def test_choose_lam_follows_the_same_default():
    rng = np.random.default_rng(2)
    img = np.clip(rng.random((64, 64)), 0, 1)
    y = img + 0.05 * rng.standard_normal(img.shape)
    choice = restore.choose_lam(y)
    np.testing.assert_array_equal(denoise_wavelet_tree(y, lam=choice), denoise_wavelet_tree(y))


def test_small_planes_default_to_gaussian_without_an_estimate():
    """Planes under 8 x 8 hold too little to estimate the model from: auto is Gaussian, as before."""
    y = np.random.default_rng(0).random((6, 6))
    np.testing.assert_array_equal(denoise_wavelet_tree(y, level=1), denoise_wavelet_tree(y, level=1, noise="gaussian"))


def test_dask_arrays_estimate_the_model_once_on_the_sample(photons):
    da = pytest.importorskip("dask.array")
    lazy = denoise_wavelet_tree(da.from_array(photons, chunks=(16, 32, 32)), axes=(0, 1, 2))
    est = estimate_noise(photons)  # the sample of this small volume is the whole volume
    ref = denoise_wavelet_tree(da.from_array(photons, chunks=(16, 32, 32)), axes=(0, 1, 2),
                               noise="poisson-gaussian", gain=est.gain, sigma=est.sigma)
    np.testing.assert_array_equal(lazy.compute(), ref.compute())


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"noise": "poison"}, r"noise.*'poison'.*auto.*gaussian.*poisson-gaussian"),
    ({"noise": 3}, r"noise.*3.*auto"),
    ({"gain": 0.1}, r"gain=0\.1 applies to noise='poisson-gaussian' only, got noise='auto'"),
    ({"noise": NoiseEstimate("gaussian", 0.1), "gain": 0.1}, r"gain=0\.1 applies to noise='poisson-gaussian' only"),
    ({"noise": NoiseEstimate("poisson-gaussian", 0.01, 0.0)}, r"(?i)noise=.*gain 0.*give gain"),
    ({"noise": NoiseEstimate("cauchy", 0.1)}, r"noise=.*'cauchy'.*gaussian.*poisson-gaussian"),
])
def test_noise_errors_name_the_parameter_its_value_and_what_is_allowed(kwargs, message):
    y = np.random.default_rng(0).random((32, 32))
    for denoise in (denoise_wavelet_tree, denoise_nonlocal_tree):
        with pytest.raises(ValueError, match=message):
            denoise(y, **kwargs)


# ---------------------------------------------------------------------------
# The command line: the case
# ---------------------------------------------------------------------------


def _counts(x):
    """A camera's 16-bit counts (10000 per image unit), clipped at 0 as a camera clips its read noise."""
    return np.clip(np.rint(x * 10000), 0, 65535).astype(np.uint16)


def test_cli_finds_photon_noise_in_a_volume_without_being_told(photons, clean, tmp_path, capsys):
    src = tmp_path / "vol.tif"
    tifffile.imwrite(src, _counts(photons))
    runs = {}
    for name, extra in (("auto", []), ("poisson-gaussian", ["--noise", "poisson-gaussian"]),
                        ("gaussian", ["--noise", "gaussian"])):
        out = tmp_path / f"{name}.tif"
        assert main(["denoise", str(src), str(out), "--volume", "--quiet", *extra]) == 0
        runs[name] = (psnr(tifffile.imread(out) / 10000, clean), capsys.readouterr().out)
    (auto, said), (explicit, _), (gaussian, _) = runs["auto"], runs["poisson-gaussian"], runs["gaussian"]
    # the command's --noise gaussian is the library's: one sigma, estimated once by the same estimator on the same
    # voxels
    library = psnr(denoise_wavelet_tree(_counts(photons) / 10000, axes=(0, 1, 2), noise="gaussian"), clean)
    assert abs(auto - explicit) < 0.1 and gaussian == pytest.approx(library, abs=1e-4)
    line = [ln for ln in said.splitlines() if "noise" in ln and "gain" in ln]
    assert len(line) == 1 and "Poisson-Gaussian" in line[0] and "chosen" in line[0]
    # in the file's units: about 10000 / PEAK counts per photon
    gain = float(line[0].split("gain ")[1].split()[0])
    assert 0.5 * 10000 / PEAK < gain < 2 * 10000 / PEAK


def test_cli_keeps_a_gaussian_photo_gaussian_and_unchanged(photo, tmp_path, capsys):
    from skimage import io

    src = tmp_path / "photo.png"
    io.imsave(src, np.clip(np.rint(photo[1] * 255), 0, 255).astype(np.uint8), check_contrast=False)
    auto, gauss = tmp_path / "auto.png", tmp_path / "gauss.png"
    assert main(["denoise", str(src), str(auto), "--quiet"]) == 0
    said = capsys.readouterr().out
    assert main(["denoise", str(src), str(gauss), "--quiet", "--noise", "gaussian"]) == 0
    np.testing.assert_array_equal(io.imread(auto), io.imread(gauss))
    line = [ln for ln in said.splitlines() if "Gaussian noise" in ln]
    assert len(line) == 1 and "chosen" in line[0]
    sigma = float(line[0].split("sigma ")[1].split()[0].rstrip(";"))
    assert 20 < sigma < 32  # 0.1 in 8-bit units, in the file's units


@pytest.mark.parametrize("method", ["wavelet", "nonlocal"])
def test_cli_denoises_with_the_gaussian_sigma_it_prints(method, photo, tmp_path, capsys):
    """An 8-bit photo clipped at black and white: the sigma printed is the one used (it was estimated again on the
    plane, by another estimator, and the clipping made the two differ)."""
    from skimage import io

    src = tmp_path / "photo.png"
    raw = np.clip(np.rint(photo[1] * 255), 0, 255).astype(np.uint8)
    io.imsave(src, raw, check_contrast=False)
    dst = tmp_path / "out.png"
    assert main(["denoise", str(src), str(dst), "--method", method, "--quiet"]) == 0
    [line] = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("estimated noise")]
    printed = float(line.split("sigma ")[1].split()[0].rstrip(";"))
    img = raw.astype(np.float32) / np.float32(255)  # as the command reads 8-bit files
    est = estimate_noise(img)
    assert printed == pytest.approx(est.sigma * 255, abs=0.006)
    denoise = denoise_wavelet_tree if method == "wavelet" else denoise_nonlocal_tree
    expected = np.clip(np.rint(denoise(img, sigma=est.sigma).astype(np.float64) * 255), 0, 255)
    np.testing.assert_array_equal(io.imread(dst), expected)


def test_cli_lam_given_as_a_number_means_the_same_as_in_the_library(photons, tmp_path, capsys):
    # a number given as --lam is in the file's units, as the library reads one under noise='auto'
    src = tmp_path / "vol.tif"
    tifffile.imwrite(src, _counts(photons))  # auto alone finds photon noise in it (the test above)
    out_auto, out_gauss = tmp_path / "auto.tif", tmp_path / "gauss.tif"
    assert main(["denoise", str(src), str(out_auto), "--volume", "--quiet", "--lam", "300"]) == 0
    assert main(["denoise", str(src), str(out_gauss), "--volume", "--quiet", "--lam", "300",
                 "--noise", "gaussian"]) == 0
    np.testing.assert_array_equal(tifffile.imread(out_auto), tifffile.imread(out_gauss))


# ---------------------------------------------------------------------------
# The plugin: one library estimate per layer, its line shown
# ---------------------------------------------------------------------------


def _plugin():
    pytest.importorskip("napari")
    from restore_napari import _common, _denoise, _runner

    return _common, _denoise, _runner


def _layer(data, name="s"):
    from napari.layers import Image

    _, _denoise, _ = _plugin()
    return _denoise.Source.of(Image(data, name=name))


def _run(sources, params, cache=None):
    _common, _denoise, _runner = _plugin()
    seen, _ = _runner.drive(_denoise.denoise_task(_runner.Control(), sources, params, cache))
    return [v.value for v in seen if isinstance(v, _runner.Output)]


def test_plugin_finds_photon_noise_with_one_library_estimate_per_layer_and_shows_its_line(photons, clean,
                                                                                          monkeypatch):
    _common, _denoise, _runner = _plugin()
    monkeypatch.setenv(_common.SYNC_ENV, "1")
    params = _denoise.DenoiseParams(volume=True)
    assert params.noise == "auto"
    vol = photons.astype(np.float32)
    calls = []
    real = restore.estimate_noise

    def counted(*args, **kwargs):
        calls.append(kwargs.get("noise"))
        return real(*args, **kwargs)

    monkeypatch.setattr(restore, "estimate_noise", counted)
    monkeypatch.setattr(restore.noise, "estimate_noise", counted)
    monkeypatch.setattr("restore.denoise._noise_model.estimate_noise", counted)
    cache = _common.LruCache()
    (out,) = _run([_layer(vol)], params, cache)
    assert calls == ["auto"]  # once, by the library's public function
    est = real(vol)
    assert est.describe() in _denoise.format_info(out.infos, params, out.noise)
    want = denoise_wavelet_tree(vol, axes=(0, 1, 2), noise=est)
    np.testing.assert_allclose(out.data, want, atol=1e-5)
    source = _layer(vol)
    _run([source], params, cache)
    _run([source], params, cache)  # the same layer again (a second run): its estimate is kept
    assert calls == ["auto", "auto"]


def test_plugin_keeps_a_gaussian_photo_gaussian_and_unchanged(photo, monkeypatch):
    _common, _denoise, _runner = _plugin()
    monkeypatch.setenv(_common.SYNC_ENV, "1")
    y = photo[1].astype(np.float32)
    (auto,) = _run([_layer(y)], _denoise.DenoiseParams())
    (gauss,) = _run([_layer(y)], _denoise.DenoiseParams(noise="gaussian"))
    np.testing.assert_array_equal(auto.data, gauss.data)
    assert auto.noise is None or "Gaussian" in _denoise.format_info(auto.infos, _denoise.DenoiseParams(), auto.noise)
