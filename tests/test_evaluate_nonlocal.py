"""restore evaluate --task denoise: the non-local column, and BM3D's beside it when its package is installed."""

import csv
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import numpy as np
import pytest
from process_helpers import FIRST_CALL_SLACK_S, cpu_by_method
from skimage import data, io

from restore.evaluate import evaluate_denoising, markdown_table

SAMPLES = Path(__file__).resolve().parents[1] / "sample_images"
TINY = {"sigmas": (25,), "wavelets": ("haar",), "penalties": ("tree_l2",), "lam_modes": ("auto",), "n_draws": 1,
        "bayes": False, "n_jobs": 1, "progress": False}


def read_csv(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def header(md):
    return [line for line in md.splitlines() if line.startswith("| wavelet | sigma |")]


@pytest.fixture
def image_dir(tmp_path):
    d = tmp_path / "images"
    d.mkdir()
    io.imsave(d / "cam.png", data.camera()[::8, ::8], check_contrast=False)  # 64 x 64 grey
    return d


@pytest.fixture(scope="module")
def samples_at_25(tmp_path_factory):
    """The bundled sample images at sigma 25 with the default column set: (rows, output folder)."""
    out = tmp_path_factory.mktemp("samples") / "out"
    rows = evaluate_denoising(SAMPLES, out, sigmas=(25,), wavelets=("haar", "db3"), penalties=("tree_l2",),
                              n_draws=1, n_jobs=2, progress=False)
    return rows, out


def test_the_nonlocal_column_beats_every_wavelet_column_on_each_sample_image_at_sigma_25(samples_at_25):
    rows, out = samples_at_25
    table = read_csv(out / "results.csv")
    images = {r["image"] for r in table}
    assert len(images) == len(list(SAMPLES.glob("*.png")))
    nonlocal_psnr = {r["image"]: float(r["psnr"]) for r in table if r["method"] == "nonlocal"}
    assert set(nonlocal_psnr) == images  # one row per image: the method uses no wavelet and chooses its own lam
    for image in images:
        wavelet_best = max(float(r["psnr"]) for r in table if r["image"] == image and r["method"] != "nonlocal")
        # the wavelet default (tree_l2, db3, automatic lam), even its oracle, and BayesShrink
        assert nonlocal_psnr[image] > wavelet_best + 0.5, (image, nonlocal_psnr[image], wavelet_best)
    md = (out / "table.md").read_text()
    assert header(md) == ["| wavelet | sigma | tree_l2 | bayes_shrink | nonlocal |"] * 2
    mean = np.mean(list(nonlocal_psnr.values()))
    assert sum(f"| {mean:.2f} |" in line for line in md.splitlines()) == 4  # every wavelet's row, both tables
    for r in table:
        assert float(r["seconds"]) > 0 and float(r["cpu_seconds"]) > 0


def test_the_nonlocal_method_is_given_the_known_sigma_as_the_others(image_dir, tmp_path, monkeypatch):
    import restore.denoise

    calls = []
    real = restore.denoise.denoise_nonlocal_tree

    def spy(image, **kwargs):
        calls.append((image.shape, float(image.max()), kwargs))
        return real(image, **kwargs)

    monkeypatch.setattr(restore.denoise, "denoise_nonlocal_tree", spy)
    evaluate_denoising(image_dir, tmp_path / "out", **TINY)
    [(shape, top, kwargs)] = [c for c in calls if c[0] == (64, 64)]  # not a warm-up on a tiny image
    assert shape == (64, 64) and top < 2  # the [0, 1] scale
    assert kwargs["sigma"] == pytest.approx(25 / 255)


def test_nonlocal_can_be_left_out(image_dir, tmp_path):
    rows = evaluate_denoising(image_dir, tmp_path / "out", nonlocal_tree=False, **TINY)
    assert {r["method"] for r in rows} == {"tree_l2"}
    assert "nonlocal" not in (tmp_path / "out" / "table.md").read_text()


def _fake_bm3d(calls):
    from scipy import ndimage

    def bm3d(z, sigma_psd, **kwargs):
        calls.append((z.shape, z.dtype, float(z.max()), sigma_psd, kwargs))
        return ndimage.gaussian_filter(z, 1.0)

    return types.SimpleNamespace(bm3d=bm3d, bm3d_rgb=None)


def test_bm3d_is_a_column_when_its_package_is_importable(image_dir, tmp_path, monkeypatch):
    calls = []
    monkeypatch.setitem(sys.modules, "bm3d", _fake_bm3d(calls))
    out = tmp_path / "out"
    rows = evaluate_denoising(image_dir, out, bm3d=True, **{**TINY, "sigmas": (10, 25)})
    # its own call, on the grey image in [0, 1] with the known sigma on that scale, once per noisy image
    calls = [c for c in calls if c[0] == (64, 64)]  # not a warm-up on a tiny image, before the clock starts
    assert [(c[0], c[1], c[3], c[4]) for c in calls] == [((64, 64), np.float64, 10 / 255, {}),
                                                       ((64, 64), np.float64, 25 / 255, {})]
    assert all(c[2] < 2 for c in calls)
    by = {(r["method"], r["sigma"]): r for r in rows}
    noisy_psnr = {s: 20 * np.log10(255 / s) for s in (10, 25)}
    assert by[("bm3d", 25.0)]["psnr"] > noisy_psnr[25]  # its output, scaled back to [0, 255]
    assert by[("bm3d", 25.0)]["cpu_seconds"] > 0
    md = (out / "table.md").read_text()
    assert header(md) == ["| wavelet | sigma | tree_l2 | nonlocal | bm3d |"]
    assert "not installed" not in md


def test_bm3d_is_absent_with_one_line_saying_so_when_its_package_is_not_installed(image_dir, tmp_path,
                                                                                  monkeypatch):
    monkeypatch.setitem(sys.modules, "bm3d", None)  # `import bm3d` raises ImportError, installed or not
    out = tmp_path / "out"
    rows = evaluate_denoising(image_dir, out, bm3d=True, **TINY)
    assert "bm3d" not in {r["method"] for r in rows}
    md = (out / "table.md").read_text()
    assert header(md) == ["| wavelet | sigma | tree_l2 | nonlocal |"]
    notes = [line for line in md.splitlines() if "bm3d" in line.lower()]
    assert len(notes) == 1 and "not installed" in notes[0], notes


def test_without_bm3d_installed_a_fresh_interpreter_runs_the_evaluation_and_says_so(image_dir, tmp_path):
    """As on a machine without the package: an import hook refuses bm3d in the main process and its workers."""
    out = tmp_path / "out"
    code = textwrap.dedent(f"""
        import sys
        class NoBM3D:
            def find_spec(self, name, path=None, target=None):
                if name == "bm3d" or name.startswith("bm3d."):
                    raise ModuleNotFoundError("No module named 'bm3d'", name="bm3d")
        sys.meta_path.insert(0, NoBM3D())
        sys.modules.pop("bm3d", None)
        from restore.evaluate import evaluate_denoising
        rows = evaluate_denoising({str(image_dir)!r}, {str(out)!r}, sigmas=(25,), wavelets=("haar",),
                                  penalties=("l1",), lam_modes=("auto",), n_draws=1, bayes=False, bm3d=True,
                                  n_jobs=1, progress=False)
        assert "bm3d" not in sys.modules
        print(sorted({{r["method"] for r in rows}}))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['l1', 'nonlocal']"
    assert "bm3d: not run, the `bm3d` package is not installed" in (out / "table.md").read_text()


def test_the_real_bm3d_package_denoises_when_installed(image_dir, tmp_path):
    pytest.importorskip("bm3d")
    rows = evaluate_denoising(image_dir, tmp_path / "out", bm3d=True, **{**TINY, "nonlocal_tree": False})
    [row] = [r for r in rows if r["method"] == "bm3d"]
    assert row["psnr"] > 20 * np.log10(255 / 25) + 3


def test_markdown_shows_wavelet_free_methods_in_every_row_and_says_why():
    rows = [{"image": "a", "sigma": 5.0, "wavelet": w, "method": "tree_l2", "lam_mode": mode, "draw": 0,
             "lam": 1.0, "psnr": 30.0, "seconds": 0.1, "cpu_seconds": 0.1}
            for w in ("haar", "db3") for mode in ("oracle", "auto")]
    rows += [{"image": "a", "sigma": 5.0, "wavelet": "", "method": m, "lam_mode": "auto", "draw": 0,
              "lam": float("nan"), "psnr": p, "seconds": 1.0, "cpu_seconds": 1.0}
             for m, p in (("nonlocal", 33.0), ("bm3d", 34.0))]
    md = markdown_table(rows)
    assert header(md) == ["| wavelet | sigma | tree_l2 | nonlocal | bm3d |"] * 2
    for w in ("haar", "db3"):
        assert md.count(f"| {w} | 5 | 30.00 | 33.00 | 34.00 |") == 2
    assert "| | 5 |" not in md and "|  | 5 |" not in md  # no row of their own


def test_the_plot_gives_nonlocal_and_bm3d_colours_of_their_own_in_every_wavelet_panel(monkeypatch, tmp_path):
    import matplotlib.figure
    from matplotlib.colors import to_hex

    from restore.evaluate.report import PAPER_ORDER, write_plot

    level = {m: 20.0 + 2 * i for i, m in enumerate((*PAPER_ORDER, "bayes_shrink", "nonlocal", "bm3d"))}
    rows = [{"image": "a", "sigma": s, "wavelet": w, "method": m, "lam_mode": "auto", "draw": 0, "lam": 1.0,
             "psnr": level[m] - s / 10, "seconds": 0.1, "cpu_seconds": 0.1}
            for s in (10.0, 25.0, 50.0) for m in level
            for w in (("",) if m in ("nonlocal", "bm3d") else ("haar", "db3"))]
    saved = []
    real = matplotlib.figure.Figure.savefig
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig",
                        lambda fig, *a, **k: (saved.append(fig), real(fig, *a, **k))[1])
    monkeypatch.setattr("matplotlib.pyplot.close", lambda *a: None)
    write_plot(rows, tmp_path / "psnr.png")
    [fig] = saved
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert sorted(ax.get_title() for ax in panels) == ["wavelet db3", "wavelet haar"]  # no panel for ""
    colours = {}
    for ax in panels:
        drawn = set()
        for line in ax.get_lines():
            x, y = np.asarray(line.get_xdata()), np.asarray(line.get_ydata())
            [m] = [m for m, v in level.items() if np.allclose(y + x / 10, v)]
            drawn.add(m)
            colours.setdefault(m, set()).add(to_hex(line.get_color()))
        assert drawn == set(level)  # the wavelet-free methods in every panel
    assert all(len(c) == 1 for c in colours.values())
    assert len({c for cs in colours.values() for c in cs}) == len(level), colours
    entries = [t.get_text() for lg in fig.legends for t in lg.get_texts()]
    assert "nonlocal" in entries and "bm3d" in entries


def test_the_command_adds_bm3d_on_request_and_leaves_the_nonlocal_column_out_on_request(image_dir, tmp_path,
                                                                                         monkeypatch, capsys):
    from restore.cli import main

    monkeypatch.setitem(sys.modules, "bm3d", None)
    out = tmp_path / "out"
    assert main(["evaluate", str(image_dir), "--out", str(out), "--sigmas", "25", "--draws", "1", "--wavelets",
                 "haar", "--penalties", "l1", "--lam", "auto", "--no-bayes", "--jobs", "1", "--quiet",
                 "--no-nonlocal", "--bm3d"]) == 0
    printed = capsys.readouterr().out
    assert "| wavelet | sigma | l1 |" in printed and "nonlocal" not in printed
    assert "bm3d: not run, the `bm3d` package is not installed" in printed


def test_the_commands_help_says_what_the_default_evaluation_includes(capsys):
    from restore.cli import main

    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "non-local tree" in text and "--no-nonlocal" in text and "--bm3d" in text


def test_the_first_timed_call_of_a_process_does_not_pay_for_loading_kernels(image_dir, tmp_path):
    """A fresh interpreter: each method's CPU time on its first image is that of its second (same work)."""
    out = tmp_path / "out"
    code = textwrap.dedent(f"""
        from restore.evaluate import evaluate_denoising
        rows = evaluate_denoising({str(image_dir)!r}, {str(out)!r}, sigmas=(25, 25.001), wavelets=("db3",),
                                  penalties=("l0", "tree_l2"), lam_modes=("auto",), n_draws=1, n_jobs=1,
                                  progress=False)
        for r in rows:
            print(r["method"], r["sigma"], r["cpu_seconds"])
    """)
    cpu = cpu_by_method(code)
    assert set(cpu) == {"l0", "tree_l2", "bayes_shrink", "nonlocal"}
    for method, by_sigma in cpu.items():
        first, second = by_sigma[25.0], by_sigma[25.001]
        # loading numba's cache, scikit-image's modules... costs 0.1-1 s: 10-100 times this image's work
        assert first < 3 * second + FIRST_CALL_SLACK_S, (method, first, second)
