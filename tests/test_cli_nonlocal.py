"""``restore denoise --method nonlocal``: the non-local tree method from the command line.

Photos (grey and colour), stacks, ``--volume`` and zarr stores; options of
the wavelet method refused with it, before any work.
"""

import numpy as np
import pytest
import tifffile
from skimage import data, io

from restore.cli import build_parser, main


def _psnr(out, clean, peak):
    return 10 * np.log10(peak ** 2 / np.mean((out.astype(float) - clean.astype(float)) ** 2))


def _grey(seed=0, sigma=25.0):
    clean = data.camera()[128:256, 160:288].astype(float)  # 128 x 128, edges and texture
    noisy = np.clip(clean + np.random.default_rng(seed).normal(0, sigma, clean.shape), 0, 255)
    return clean, np.rint(noisy).astype(np.uint8)


def _volume(seed=0, sigma=0.08):
    """The nuclei crop of the repository in [0, 1] (16 x 64 x 64), Gaussian noise, as uint16."""
    vol = np.load(__file__.rsplit("/", 1)[0] + "/data/nuclei_16x64x64.npz")["volume"].astype(float)
    clean = (vol - vol.min()) / (vol.max() - vol.min())
    noisy = np.clip(clean + np.random.default_rng(seed).normal(0, sigma, clean.shape), 0, 1)
    return clean * 65535, np.rint(noisy * 65535).astype(np.uint16)


def _run(src, out, *options):
    assert main(["denoise", str(src), str(out), "--quiet", *options]) == 0
    return io.imread(out) if str(out).endswith(".png") else tifffile.imread(out)


def test_nonlocal_beats_wavelet_on_a_grey_png(tmp_path):
    clean, noisy = _grey()
    src = tmp_path / "noisy.png"
    io.imsave(src, noisy, check_contrast=False)
    wav = _run(src, tmp_path / "wavelet.png", "--method", "wavelet")
    nl = _run(src, tmp_path / "nonlocal.png", "--method", "nonlocal")
    assert nl.dtype == np.uint8 and nl.shape == noisy.shape
    assert _psnr(nl, clean, 255) > _psnr(wav, clean, 255) + 0.5
    # the default is the wavelet method
    assert np.array_equal(_run(src, tmp_path / "default.png"), wav)


def test_nonlocal_beats_wavelet_on_a_colour_png(tmp_path):
    clean = data.astronaut()[:96, 160:256].astype(float)
    noisy = np.rint(np.clip(clean + np.random.default_rng(1).normal(0, 25, clean.shape), 0, 255)).astype(np.uint8)
    src = tmp_path / "noisy.png"
    io.imsave(src, noisy, check_contrast=False)
    wav = _run(src, tmp_path / "wavelet.png", "--method", "wavelet")
    nl = _run(src, tmp_path / "nonlocal.png", "--method", "nonlocal")
    assert nl.shape == noisy.shape == wav.shape
    assert _psnr(nl, clean, 255) > _psnr(wav, clean, 255) + 0.3


def test_nonlocal_beats_wavelet_on_a_volume_tiff(tmp_path):
    clean, noisy = _volume()
    src = tmp_path / "vol.tif"
    tifffile.imwrite(src, noisy)
    wav = _run(src, tmp_path / "wavelet.tif", "--volume", "--method", "wavelet")
    nl = _run(src, tmp_path / "nonlocal.tif", "--volume", "--method", "nonlocal")
    assert nl.dtype == np.uint16 and nl.shape == noisy.shape
    assert _psnr(nl, clean, 65535) > _psnr(wav, clean, 65535) + 0.3


def test_nonlocal_on_a_stack_denoises_each_plane_as_the_library_does(tmp_path):
    import restore

    _, a = _grey(0)
    _, b = _grey(1)
    stack = np.stack([a, b])
    src = tmp_path / "stack.tif"
    tifffile.imwrite(src, stack)
    out = _run(src, tmp_path / "out.tif", "--method", "nonlocal", "--sigma", "25")
    want = restore.denoise_nonlocal_tree(stack.astype(np.float32) / 255, sigma=25 / 255)
    assert out.shape == stack.shape
    assert np.abs(out.astype(float) - np.rint(np.clip(want, 0, 1) * 255)).max() <= 1


def test_nonlocal_on_a_zarr_store_is_the_in_memory_result(tmp_path):
    zarr = pytest.importorskip("zarr")
    import restore

    clean, noisy = _volume()
    src = tmp_path / "in.zarr"
    z = zarr.open(str(src), mode="w", shape=noisy.shape, chunks=(8, 64, 64), dtype="uint16")
    z[:] = noisy
    assert main(["denoise", str(src), str(tmp_path / "out.zarr"), "--quiet", "--volume", "--method", "nonlocal",
                 "--sigma", str(0.08 * 65535)]) == 0
    out = np.asarray(zarr.open(str(tmp_path / "out.zarr"), mode="r"))
    want = restore.denoise_nonlocal_tree(noisy.astype(np.float32) / 65535, sigma=0.08, axes=(0, 1, 2))
    assert out.shape == noisy.shape and out.dtype == np.uint16
    assert np.abs(out.astype(float) - np.rint(np.clip(want, 0, 1) * 65535)).max() <= 2


@pytest.mark.parametrize("options", [["--penalty", "l1"], ["--lam", "0.1"], ["--lam", "sure"], ["--cycle-spins", "2"],
                                     ["--wavelet", "haar"], ["--level", "2"], ["--penalize-approx"], ["--wiener"],
                                     ["--no-wiener"], ["--penalty", "tree_l2"], ["--cycle-spin", "0"]])
def test_wavelet_options_are_refused_with_nonlocal_before_any_work(tmp_path, options, capsys):
    _, noisy = _grey()
    src = tmp_path / "noisy.png"
    io.imsave(src, noisy, check_contrast=False)
    out = tmp_path / "out.png"
    with pytest.raises(SystemExit) as exc:
        main(["denoise", str(src), str(out), "--method", "nonlocal", *options])
    message = str(exc.value)
    named = {"--cycle-spin": "--cycle-spins"}.get(options[0], options[0])
    assert message.startswith("error: ") and "\n" not in message
    assert named in message and "--method wavelet" in message, message
    assert not out.exists()
    assert "estimated noise" not in capsys.readouterr().out  # refused before the noise is estimated


def test_method_help_says_what_each_method_is_for():
    sub = build_parser()._subparsers._group_actions[0].choices["denoise"]  # noqa: SLF001
    action = {o: a for a in sub._actions for o in a.option_strings}["--method"]  # noqa: SLF001
    assert list(action.choices) == ["wavelet", "nonlocal"] and action.default == "wavelet"
    assert "default" in action.help and "best" in action.help
