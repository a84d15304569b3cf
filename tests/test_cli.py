import numpy as np
import pytest
from skimage import data, io

from restore.cli import main


@pytest.fixture
def noisy_png(tmp_path):
    rng = np.random.default_rng(0)
    img = np.clip(data.camera()[::4, ::4] + rng.normal(0, 20, (128, 128)), 0, 255).astype(np.uint8)
    path = tmp_path / "noisy.png"
    io.imsave(path, img, check_contrast=False)
    return path


def test_denoise_8bit(noisy_png, tmp_path):
    out = tmp_path / "out" / "clean.png"
    assert main(["denoise", str(noisy_png), str(out), "--sigma", "20"]) == 0
    res = io.imread(out)
    src = io.imread(noisy_png)
    assert res.dtype == np.uint8 and res.shape == src.shape
    clean = data.camera()[::4, ::4].astype(float)
    assert np.mean((res - clean) ** 2) < 0.5 * np.mean((src - clean) ** 2)
    assert not list(out.parent.glob(".*"))  # no temporary file left behind


def test_denoise_16bit_colour_tiff(tmp_path):
    rng = np.random.default_rng(1)
    img = (data.astronaut()[::4, ::4].astype(np.uint16) * 257 + rng.normal(0, 3000, (128, 128, 3))).clip(0, 65535)
    src = tmp_path / "in.tif"
    io.imsave(src, img.astype(np.uint16), check_contrast=False)
    out = tmp_path / "out.tif"
    assert main(["denoise", str(src), str(out), "--penalty", "tree_linf", "--cycle-spins", "2"]) == 0
    res = io.imread(out)
    assert res.dtype == np.uint16 and res.shape == (128, 128, 3)


def test_denoise_never_overwrites(noisy_png, tmp_path):
    before = noisy_png.read_bytes()
    with pytest.raises(SystemExit, match="is the input file"):
        main(["denoise", str(noisy_png), str(noisy_png), "--force"])
    with pytest.raises(SystemExit, match="is the input file"):
        main(["denoise", str(noisy_png), str(tmp_path / "." / "noisy.png")])
    assert noisy_png.read_bytes() == before
    out = tmp_path / "o.png"
    out.write_bytes(b"keep")
    with pytest.raises(SystemExit, match="exists; pass --force"):
        main(["denoise", str(noisy_png), str(out)])
    assert out.read_bytes() == b"keep"
    assert main(["denoise", str(noisy_png), str(out), "--force"]) == 0


def test_denoise_errors(noisy_png, tmp_path):
    with pytest.raises(SystemExit, match="does not exist"):
        main(["denoise", str(tmp_path / "missing.png"), str(tmp_path / "o.png")])
    bad = tmp_path / "bad.png"
    bad.write_text("not a png")
    with pytest.raises(SystemExit, match="cannot read"):
        main(["denoise", str(bad), str(tmp_path / "o.png")])
    with pytest.raises(SystemExit, match="Invalid wavelet"):
        main(["denoise", str(noisy_png), str(tmp_path / "o.png"), "--wavelet", "nope"])
    with pytest.raises(SystemExit):  # argparse: negative sigma
        main(["denoise", str(noisy_png), str(tmp_path / "o.png"), "--sigma", "-3"])


def test_evaluate_command(tmp_path, capsys):
    d = tmp_path / "imgs"
    d.mkdir()
    io.imsave(d / "a.png", data.camera()[::8, ::8], check_contrast=False)
    out = tmp_path / "res"
    args = ["evaluate", str(d), "--out", str(out), "--sigmas", "25", "--wavelets", "haar", "--draws", "1",
            "--penalties", "tree_l2", "l0", "--jobs", "1", "--quiet"]
    assert main(args) == 0
    assert "| haar | 25 |" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="--force"):
        main(args)
    assert main([*args, "--force"]) == 0


def test_inpaint_and_learn_commands(tmp_path):
    rng = np.random.default_rng(2)
    img = data.astronaut()[::4, ::4]  # 128 x 128 x 3 uint8
    src = tmp_path / "photo.png"
    io.imsave(src, img, check_contrast=False)
    mask = np.zeros((128, 128), np.uint8)
    mask[40:44, 10:120] = 255
    mask[rng.random((128, 128)) < 0.05] = 255
    msk = tmp_path / "mask.png"
    io.imsave(msk, mask, check_contrast=False)
    d = tmp_path / "dict.npz"
    assert main(["learn", str(src), "--out", str(d), "--branching", "4", "2", "--n-patches", "2000",
                 "--masks", str(msk)]) == 0
    with pytest.raises(SystemExit, match="exists; pass --force"):
        main(["learn", str(src), "--out", str(d)])
    out = tmp_path / "filled.png"
    assert main(["inpaint", str(src), str(msk), str(out), "--dictionary", str(d), "--passes", "6",
                 "--lam", "0.05", "0.002", "--quiet"]) == 0
    res = io.imread(out)
    assert res.dtype == np.uint8 and res.shape == img.shape
    np.testing.assert_array_equal(res[mask == 0], img[mask == 0])  # known pixels kept exactly
    err_in = np.abs(res[mask > 0].astype(int) - img[mask > 0]).mean()
    assert err_in < 20
    for bad_out in (src, msk):
        with pytest.raises(SystemExit, match="is the input file"):
            main(["inpaint", str(src), str(msk), str(bad_out), "--force", "--quiet"])
    small = tmp_path / "small.png"
    io.imsave(small, mask[:10, :10], check_contrast=False)
    with pytest.raises(SystemExit, match="the image is"):
        main(["inpaint", str(src), str(small), str(tmp_path / "x.png"), "--quiet"])
    grey = tmp_path / "grey.png"
    io.imsave(grey, img[..., 0], check_contrast=False)
    # a dictionary codes luminance patches: learned on colour, it serves grey images too
    assert main(["inpaint", str(grey), str(msk), str(tmp_path / "y.png"), "--dictionary", str(d), "--quiet"]) == 0
    with pytest.raises(SystemExit, match="features"):
        main(["inpaint", str(grey), str(msk), str(tmp_path / "z.png"), "--dictionary", str(d), "--patch-size", "6",
              "--quiet"])
