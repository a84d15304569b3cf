"""What a new user meets in the first hour of the command line: refusals, warnings, help and start-up."""

import subprocess
import sys

import numpy as np
import pytest
from skimage import data, io

from restore.cli import build_parser, main


@pytest.fixture
def photo(tmp_path):
    src = tmp_path / "photo.png"
    io.imsave(src, data.astronaut()[::8, ::8], check_contrast=False)  # 64 x 64 colour
    return src


def _mask(tmp_path, m, name="mask.png"):
    path = tmp_path / name
    io.imsave(path, m.astype(np.uint8) * 255, check_contrast=False)
    return path


def test_an_all_zero_mask_is_refused_before_any_work(photo, tmp_path, capsys):
    msk = _mask(tmp_path, np.zeros((64, 64), bool))
    out = tmp_path / "out.png"
    with pytest.raises(SystemExit, match=r"mask .*mask\.png.* marks no pixel as missing"):
        main(["inpaint", str(photo), str(msk), str(out)])
    assert not out.exists()
    assert "step" not in capsys.readouterr().err  # no progress bar was started


def test_an_inverted_mask_is_warned_of_in_one_line(photo, tmp_path, capsys):
    text = np.zeros((64, 64), bool)
    text[10:13, 5:60] = True
    text[40:43, 5:60] = True
    msk = _mask(tmp_path, ~text)
    out = tmp_path / "out.png"
    assert main(["inpaint", str(photo), str(msk), str(out), "--quiet", "--passes", "1"]) == 0
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if "warning" in ln]
    assert len(lines) == 1 and lines[0].startswith("warning: ") and "mask.png" in lines[0]
    assert "% of the image as missing" in lines[0] and "inverted" in lines[0]
    assert out.exists()


@pytest.mark.parametrize("kind", ["npy", "text"])
def test_a_bad_dictionary_is_one_line_and_no_progress_bar(photo, tmp_path, capfd, kind):
    m = np.zeros((64, 64), bool)
    m[30:33, 5:60] = True
    msk = _mask(tmp_path, m)
    bad = tmp_path / ("d.npy" if kind == "npy" else "d.npz")
    if kind == "npy":
        np.save(bad, np.zeros((3, 64)))
    else:
        bad.write_text("nope")
    proc = subprocess.run([sys.executable, "-m", "restore.cli", "inpaint", str(photo), str(msk),
                           str(tmp_path / "o.png"), "--dictionary", str(bad)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 1
    assert proc.stderr.strip().count("\n") == 0, proc.stderr  # one line: no "inpaint: 0step" before it
    assert "dictionary" in proc.stderr and "context manager" not in proc.stderr


def test_a_4d_tiff_says_what_is_supported(tmp_path):
    import tifffile

    src = tmp_path / "czyx.tif"
    tifffile.imwrite(src, np.zeros((8, 3, 32, 32), np.uint16), imagej=True, metadata={"axes": "ZCYX"})
    for extra in ([], ["--volume"]):
        with pytest.raises(SystemExit) as info:
            main(["denoise", str(src), str(tmp_path / "o.tif"), *extra])
        text = str(info.value)
        assert "(8, 3, 32, 32)" in text and "2-D image" not in text
        assert "stack of grey planes" in text and "one volume" in text


def test_top_help_names_every_evaluation_task():
    parser = build_parser()
    summaries = {a.dest: a.help for a in parser._subparsers._group_actions[0]._choices_actions}  # noqa: SLF001
    for task in ("denoising", "patches", "inpainting", "volume"):
        assert task in summaries["evaluate"]


@pytest.mark.parametrize(("command", "options"), [
    ("denoise", ["--penalty", "--wavelet", "--level", "--cycle-spins"]),
    ("inpaint", ["--patch-size"]),
    ("learn", ["--lam", "--n-patches", "--epochs", "--patch-size", "--penalty", "--quiet"]),
])
def test_every_option_has_help_and_states_its_default(command, options):
    parser = build_parser()
    sub = parser._subparsers._group_actions[0].choices[command]  # noqa: SLF001
    actions = {o: a for a in sub._actions for o in a.option_strings}  # noqa: SLF001
    for option in options:
        action = actions[option]
        assert action.help, option
        if option != "--quiet":
            assert "default" in action.help, option


@pytest.mark.parametrize("argv", [["--help"], ["denoise", "--help"], ["inpaint", "--help"], ["learn", "--help"],
                                  ["evaluate", "--help"]])
def test_help_imports_neither_numba_nor_scikit_learn(argv):
    code = ("import sys\n"
            "from restore.cli import main\n"
            "try:\n"
            f"    main({argv!r})\n"
            "except SystemExit:\n"
            "    pass\n"
            "heavy = [m for m in ('numba', 'sklearn', 'scipy', 'dask', 'matplotlib', 'pywt', 'skimage')\n"
            "         if m in sys.modules]\n"
            "print('HEAVY', heavy, file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "HEAVY []" in proc.stderr, proc.stderr[-2000:]
    assert "usage:" in proc.stdout


def test_the_cli_reads_its_defaults_from_the_library_signatures():
    """Defaults shown without importing the library must be the ones the library uses."""
    import inspect

    from restore import cli
    from restore._signatures import NotStatic
    from restore.denoise import denoise_wavelet_tree
    from restore.evaluate import evaluate_denoising, evaluate_inpainting, evaluate_patches, evaluate_volumes
    from restore.inpainting import inpaint, learn_dictionary

    for func in (denoise_wavelet_tree, inpaint, learn_dictionary, evaluate_denoising, evaluate_volumes,
                 evaluate_inpainting, evaluate_patches):
        for name, p in inspect.signature(func).parameters.items():
            if p.default is inspect.Parameter.empty:
                continue
            try:
                static = cli._default(func.__module__, func.__name__, name)  # noqa: SLF001
            except NotStatic:
                continue  # not a literal: the CLI never shows it
            assert static == p.default, (func.__name__, name)


def test_learn_shows_progress_unless_quiet(photo, tmp_path, capsys):
    argv = ["learn", str(photo), "--branching", "4", "2", "--n-patches", "1500"]
    assert main([*argv, "--out", str(tmp_path / "a.npz")]) == 0
    assert "learn:" in capsys.readouterr().err
    assert main([*argv, "--out", str(tmp_path / "b.npz"), "--quiet"]) == 0
    assert "learn:" not in capsys.readouterr().err


def test_the_zarr_progress_bar_counts_whole_chunks_and_its_percentage_agrees(tmp_path, capsys):
    import re

    zarr = pytest.importorskip("zarr")
    rng = np.random.default_rng(0)
    src = tmp_path / "in.zarr"
    z = zarr.open(str(src), mode="w", shape=(8, 96, 96), chunks=(1, 96, 96), dtype="float32")
    z[:] = rng.random((8, 96, 96), dtype=np.float32)
    assert main(["denoise", str(src), str(tmp_path / "out.zarr"), "--sigma", "0.1", "--cycle-spins", "2"]) == 0
    shown = re.findall(r"(\d+)%\|[^|]*\|\s*([\d.]+)/(\d+) chunks", capsys.readouterr().err)
    assert shown and shown[-1][1:] == ("8", "8")
    for pct, done, total in shown:
        assert done.isdigit() and int(pct) == 100 * int(done) // int(total), (pct, done, total)


def test_every_option_of_every_command_has_help_and_states_a_default_it_has():
    parser = build_parser()
    for name, sub in parser._subparsers._group_actions[0].choices.items():  # noqa: SLF001
        for action in sub._actions:  # noqa: SLF001
            if not action.option_strings or action.dest == "help":
                continue
            assert action.help, (name, action.option_strings)
            if action.default not in (None, False):
                assert "default" in action.help, (name, action.option_strings)


def test_no_option_shows_none_as_its_default():
    """A default that the library resolves (None) is said in words, not printed as 'None'."""
    parser = build_parser()
    for name, sub in parser._subparsers._group_actions[0].choices.items():  # noqa: SLF001
        assert "default: None" not in " ".join(sub.format_help().split()), name
