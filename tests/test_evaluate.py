import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from process_helpers import alive, children
from skimage import data, io

from restore.evaluate import evaluate_denoising, markdown_table

SMALL = {"sigmas": (20,), "wavelets": ("haar",), "penalties": ("l1", "tree_l2"), "n_draws": 2,
         "n_jobs": 1, "progress": False}


@pytest.fixture
def image_dir(tmp_path):
    d = tmp_path / "images"
    d.mkdir()
    io.imsave(d / "cam.png", data.camera()[::8, ::8], check_contrast=False)  # 64 x 64 grey
    io.imsave(d / "astro.png", data.astronaut()[::8, ::8], check_contrast=False)  # colour -> grey
    (d / "notes.txt").write_text("not an image")
    return d


def read_csv(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_outputs_and_protocol(image_dir, tmp_path):
    out = tmp_path / "out"
    rows = evaluate_denoising(image_dir, out, **SMALL)
    # 2 images x 1 sigma x 2 draws x (2 penalties x 2 modes + BayesShrink + the non-local method)
    assert len(rows) == 2 * 2 * (2 * 2 + 1 + 1)
    assert {p.name for p in out.iterdir()} == OURS  # nothing else, hidden files included
    assert set(json.loads((out / "restore-evaluate.json").read_text())["files"]) == OURS
    table = read_csv(out / "results.csv")
    assert len(table) == len(rows)
    assert set(table[0]) == {"image", "sigma", "wavelet", "method", "lam_mode", "draw", "lam", "psnr", "seconds",
                             "cpu_seconds"}
    by = {(r["image"], r["method"], r["lam_mode"], r["draw"]): float(r["psnr"]) for r in table}
    for img in ("cam.png", "astro.png"):
        for d in ("0", "1"):
            assert by[(img, "tree_l2", "oracle", d)] >= by[(img, "tree_l2", "auto", d)] - 0.05
            assert by[(img, "tree_l2", "oracle", d)] > 20 * np.log10(255 / 20) + 1  # beats the noisy image
    md = (out / "table.md").read_text()
    assert "| wavelet | sigma | l1 | tree_l2 | bayes_shrink | nonlocal |" in md and "| haar | 20 |" in md
    assert (out / "psnr.png").read_bytes()[:4] == b"\x89PNG"
    # the same seed gives the same numbers
    rows2 = evaluate_denoising(image_dir, tmp_path / "out2", **SMALL)
    assert [r["psnr"] for r in rows2] == [r["psnr"] for r in rows]


def test_existing_results_are_not_clobbered(image_dir, tmp_path):
    out = tmp_path / "out"
    evaluate_denoising(image_dir, out, **SMALL)
    before = (out / "results.csv").read_text()
    with pytest.raises(FileExistsError, match="already holds evaluation results"):
        evaluate_denoising(image_dir, out, **SMALL)
    assert (out / "results.csv").read_text() == before
    evaluate_denoising(image_dir, out, **{**SMALL, "force": True})
    with pytest.raises(ValueError, match="must not be the image folder"):
        evaluate_denoising(image_dir, image_dir / "results", **SMALL)


def test_interrupted_run_resumes(image_dir, tmp_path):
    out = tmp_path / "out"

    class Stop(Exception):
        pass

    def stop_after_two(done, total):
        if done == 2:
            raise Stop

    with pytest.raises(Stop):
        evaluate_denoising(image_dir, out, **{**SMALL, "progress": stop_after_two})
    assert (out / "results.partial.csv").exists() and not (out / "results.csv").exists()
    # a torn last line (killed while writing) is ignored
    with open(out / "results.partial.csv", "a") as fh:
        fh.write("cam.png,20.0,haar,l1,ora")
    seen = []
    rows = evaluate_denoising(image_dir, out, **{**SMALL, "progress": lambda d, t: seen.append((d, t))})
    assert seen[0] == (2, 4) and seen[-1] == (4, 4)  # two units were reused, two computed
    clean = evaluate_denoising(image_dir, tmp_path / "clean", **SMALL)
    assert sorted((r["image"], r["method"], r["lam_mode"], r["draw"], r["psnr"]) for r in rows) == sorted(
        (r["image"], r["method"], r["lam_mode"], r["draw"], r["psnr"]) for r in clean)
    # another configuration may not reuse the interrupted folder
    with pytest.raises(Stop):
        evaluate_denoising(image_dir, tmp_path / "o3", **{**SMALL, "progress": stop_after_two})
    with pytest.raises(FileExistsError, match="another configuration"):
        evaluate_denoising(image_dir, tmp_path / "o3", **{**SMALL, "sigmas": (30,)})


def test_local_processes_match_serial(image_dir, tmp_path):
    serial = evaluate_denoising(image_dir, tmp_path / "a", **SMALL)
    parallel = evaluate_denoising(image_dir, tmp_path / "b", **{**SMALL, "n_jobs": 2})
    key = lambda r: (r["image"], r["method"], r["lam_mode"], r["draw"])  # noqa: E731
    assert {key(r): r["psnr"] for r in serial} == {key(r): r["psnr"] for r in parallel}


def test_dask_local_cluster_on_loopback(image_dir, tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, host="127.0.0.1",
                                  protocol="tcp", dashboard_address=":0") as cluster:
        rows = evaluate_denoising(image_dir, tmp_path / "d", scheduler=cluster.scheduler_address, **SMALL)
    serial = evaluate_denoising(image_dir, tmp_path / "s", **SMALL)
    key = lambda r: (r["image"], r["method"], r["lam_mode"], r["draw"])  # noqa: E731
    assert {key(r): r["psnr"] for r in rows} == {key(r): r["psnr"] for r in serial}


def test_bad_settings(image_dir, tmp_path):
    for kwargs, match in [({"sigmas": (-5,)}, "sigmas"), ({"wavelets": ("bior2.2",)}, "not orthogonal"),
                          ({"penalties": ("l2",)}, "Invalid penalty"), ({"lam_modes": ("best",)}, "lam mode"),
                          ({"n_draws": 0}, "n_draws")]:
        with pytest.raises(ValueError, match=match):
            evaluate_denoising(image_dir, tmp_path / "x", **{**SMALL, **kwargs})
    with pytest.raises(ValueError, match="does not exist"):
        evaluate_denoising(tmp_path / "missing", tmp_path / "x", **SMALL)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="no images"):
        evaluate_denoising(empty, tmp_path / "x", **SMALL)


def test_markdown_layout():
    rows = [{"image": "a", "sigma": 5.0, "wavelet": w, "method": m, "lam_mode": "oracle", "draw": d,
             "lam": 1.0, "psnr": 30.0 + d, "seconds": 0.1}
            for w in ("db3", "haar") for m in ("tree_l2", "l0") for d in (0, 1)]
    md = markdown_table(rows)
    assert "| wavelet | sigma | l0 | tree_l2 |" in md
    assert md.index("| haar |") < md.index("| db3 |")  # paper order: Haar first
    assert "30.50 ± 0.50" in md


def test_inpainting_benchmark(tmp_path):
    from restore.evaluate import evaluate_inpainting

    imgs, masks = tmp_path / "photos", tmp_path / "masks"
    imgs.mkdir()
    masks.mkdir()
    io.imsave(imgs / "astro.png", data.astronaut()[::6, ::6], check_contrast=False)  # 86 x 86 colour
    m = np.zeros((86, 86), np.uint8)
    m[30:33, 5:80] = 255
    io.imsave(masks / "astro_text1.png", m, check_contrast=False)
    rng = np.random.default_rng(0)
    io.imsave(masks / "astro_rand70.png", (rng.random((86, 86)) < 0.7).astype(np.uint8) * 255,
              check_contrast=False)
    out = tmp_path / "out"
    rows = evaluate_inpainting(imgs, masks, out, mask_kinds=("text1", "rand70", "scratch"), progress=False)
    assert {(r["mask"], r["method"]) for r in rows} == {(k, m) for k in ("text1", "rand70")
                                                       for m in ("tree_dictionary", "biharmonic", "telea")}
    assert all(15 < r["psnr"] < 60 for r in rows)
    md = (out / "table.md").read_text()
    assert "| astro_rand70 |" in md and "**mean text1**" in md
    with pytest.raises(FileExistsError):
        evaluate_inpainting(imgs, masks, out, mask_kinds=("text1",), progress=False)
    with pytest.raises(ValueError, match="no image"):
        evaluate_inpainting(imgs, masks, tmp_path / "o2", mask_kinds=("blobs",), progress=False)


def test_patch_protocol(tmp_path):
    from restore.evaluate import evaluate_patches

    d = tmp_path / "imgs"
    d.mkdir()
    io.imsave(d / "a.png", data.camera()[::2, ::2], check_contrast=False)
    io.imsave(d / "b.png", data.astronaut()[::2, ::2], check_contrast=False)
    rows = evaluate_patches([d / "a.png"], [d / "b.png"], tmp_path / "out", branching=(3, 2), missing=(0.5, 0.9),
                            n_train=800, n_test=200, learn_lams=(0.1,), code_lams=(0.05,))
    assert {(r["method"], r["missing"]) for r in rows} == {(m, x) for m in ("tree", "flat") for x in (0.5, 0.9)}
    err = {(r["method"], r["missing"]): r["error"] for r in rows}
    assert err[("tree", 0.9)] > err[("tree", 0.5)] > 0  # more missing pixels, larger error
    assert "tree gain" in (tmp_path / "out" / "table.md").read_text()


# ---------------------------------------------------------------------------
# The output folder: the user's files are never touched, one run at a time
# ---------------------------------------------------------------------------


OURS = {"results.csv", "table.md", "psnr.png", "restore-evaluate.json"}


def test_a_users_files_in_the_output_folder_are_never_touched(image_dir, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "config.json").write_text('{"mine": true}')
    (out / "notes.txt").write_text("my notes")
    evaluate_denoising(image_dir, out, **SMALL)
    assert (out / "config.json").read_text() == '{"mine": true}' and (out / "notes.txt").read_text() == "my notes"
    evaluate_denoising(image_dir, out, **{**SMALL, "force": True})
    assert (out / "config.json").read_text() == '{"mine": true}' and (out / "notes.txt").read_text() == "my notes"
    assert {p.name for p in out.iterdir()} == OURS | {"config.json", "notes.txt"}


@pytest.mark.parametrize("name", ["results.csv", "table.md", "psnr.png", "results.partial.csv"])
@pytest.mark.parametrize("force", [False, True])
def test_foreign_files_with_our_names_are_refused_even_with_force(name, force, image_dir, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / name).write_text("the user's own file")
    with pytest.raises(FileExistsError, match=rf"{name}' was not written by restore evaluate") as err:
        evaluate_denoising(image_dir, out, **{**SMALL, "force": force})
    assert "\n" not in str(err.value) and "another folder" in str(err.value)
    assert (out / name).read_text() == "the user's own file"
    assert {p.name for p in out.iterdir()} == {name}  # nothing of ours, not even a lock file


def test_force_removes_only_what_evaluate_wrote(image_dir, tmp_path):
    out = tmp_path / "out"
    evaluate_denoising(image_dir, out, **{**SMALL, "wavelets": ("haar", "db2")})
    (out / "mine.csv").write_text("keep")
    evaluate_denoising(image_dir, out, **{**SMALL, "lam_modes": ("auto",), "force": True})
    assert (out / "mine.csv").read_text() == "keep"
    assert "oracle" not in (out / "results.csv").read_text()


def test_a_second_run_into_the_same_folder_refuses_at_once(image_dir, tmp_path):
    import threading

    from restore.evaluate import FolderInUse

    out = tmp_path / "out"
    started, finish = threading.Event(), threading.Event()

    def hold(done, total):  # the first run waits, its folder locked, until the second has been refused
        started.set()
        finish.wait(60)

    first = threading.Thread(target=evaluate_denoising, args=(image_dir, out), kwargs={**SMALL, "progress": hold})
    first.start()
    try:
        assert started.wait(60)
        before = _snapshot(out)
        t0 = time.perf_counter()
        with pytest.raises(FolderInUse, match="another restore evaluate is writing into"):
            evaluate_denoising(image_dir, out, **SMALL)
        assert time.perf_counter() - t0 < 2
        assert _snapshot(out) == before  # the refusal touched nothing of the other run's
    finally:
        finish.set()
        first.join(120)
    assert {p.name for p in out.iterdir()} == OURS  # the first run finished, and left only its files
    evaluate_denoising(image_dir, out, **{**SMALL, "force": True})  # nothing left behind blocks the next


def _snapshot(folder):
    """Every entry of a folder (hidden ones too) with its bytes; None for a missing folder."""
    if not folder.exists():
        return None
    return {p.name: (p.read_bytes() if p.is_file() else "dir") for p in sorted(folder.iterdir())}


def _without_our_lock(folder):
    """Remove a lock file an earlier run left (test_outputs_and_protocol checks that none is left)."""
    (folder / ".restore-evaluate.lock").unlink(missing_ok=True)


def test_a_refusal_leaves_the_folder_exactly_as_it_was(image_dir, tmp_path):
    out = tmp_path / "out"
    evaluate_denoising(image_dir, out, **SMALL)
    (out / "mine.txt").write_text("keep")
    _without_our_lock(out)
    before = _snapshot(out)
    with pytest.raises(FileExistsError, match="already holds evaluation results"):
        evaluate_denoising(image_dir, out, **SMALL)  # finished results
    assert _snapshot(out) == before

    class Stop(Exception):
        pass

    def stop(done, total):
        if done == 1:
            raise Stop

    other = tmp_path / "other"
    with pytest.raises(Stop):
        evaluate_denoising(image_dir, other, **{**SMALL, "progress": stop})
    _without_our_lock(other)
    before = _snapshot(other)
    with pytest.raises(FileExistsError, match="another configuration"):
        evaluate_denoising(image_dir, other, **{**SMALL, "sigmas": (30,)})  # an interrupted run of another grid
    assert _snapshot(other) == before


def test_messages_speak_to_both_the_command_line_and_python(image_dir, tmp_path):
    from restore.evaluate import ResultsExist

    out = tmp_path / "out"
    evaluate_denoising(image_dir, out, **SMALL)
    with pytest.raises(FileExistsError) as err:
        evaluate_denoising(image_dir, out, **SMALL)
    message = str(err.value)
    assert "force" in message and "force=True" not in message and "--force" not in message, message
    # and a front end can phrase its own: what is wrong, and what force would do
    assert isinstance(err.value, ResultsExist) and err.value.folder == out
    assert f"{str(out)!r} {err.value.problem}" in message and err.value.action in message


# ---------------------------------------------------------------------------
# An output folder that cannot be written: one clear line, nothing created
# ---------------------------------------------------------------------------


def _run_cli_where_writes_fail(how, image_dir, parent, out):
    """``restore evaluate`` into ``out``, with ``parent`` made unwritable by ``how``; the finished process."""
    cmd = [sys.executable, "-m", "restore.cli", "evaluate", str(image_dir), "--out", str(out), "--jobs", "1",
           "--sigmas", "20", "--draws", "1", "--penalties", "l1", "--wavelets", "haar", "--quiet"]
    if how == "read-only":  # a read-only bind mount in a mount namespace of its own
        if not shutil.which("unshare") or subprocess.run(
                ["unshare", "--mount", "sh", "-c", f"mount --bind {parent} {parent} && "
                 f"mount -o remount,bind,ro {parent}"], capture_output=True).returncode:
            pytest.skip("cannot make a read-only mount here (unshare --mount)")
        script = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"'
        cmd = ["unshare", "--mount", "sh", "-c", script, "sh", str(parent), *cmd]
    else:  # permission denied: a folder without write permission, for a user without root's capabilities
        parent.chmod(0o555)
        if os.geteuid() == 0:
            if not shutil.which("setpriv"):
                pytest.skip("root ignores permissions, and setpriv is missing to drop its capabilities")
            cmd = ["setpriv", "--inh-caps=-all", "--bounding-set=-all", "--", *cmd]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    finally:
        parent.chmod(0o755)


@pytest.mark.skipif(sys.platform != "linux", reason="a read-only mount or dropped capabilities (Linux)")
@pytest.mark.parametrize("how", ["read-only", "permission denied"])
@pytest.mark.parametrize("exists", [True, False])
def test_an_unwritable_output_folder_is_one_clear_line(how, exists, image_dir, tmp_path):
    parent = tmp_path / "locked"
    parent.mkdir()
    out = parent / "results" if not exists else parent
    (parent / "mine.txt").write_text("keep")
    before = _snapshot(parent)
    done = _run_cli_where_writes_fail(how, image_dir, parent, out)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Errno" not in lines[0], done.stderr
    assert str(out) in lines[0] and ("read-only" in lines[0] if how == "read-only" else "permission" in lines[0])
    assert "choose" in lines[0]  # what to do
    assert _snapshot(parent) == before


def test_resume_drops_a_torn_line_and_counts_a_duplicated_row_once(image_dir, tmp_path):
    out = tmp_path / "out"

    class Stop(Exception):
        pass

    def stop_after_three(done, total):
        if done == 3:
            raise Stop

    with pytest.raises(Stop):
        evaluate_denoising(image_dir, out, **{**SMALL, "progress": stop_after_three})
    partial = out / "results.partial.csv"
    lines = partial.read_text().splitlines(keepends=True)
    header, rows = lines[0], lines[1:]
    assert len(rows) == 3 * 6  # three units of six rows
    # the first unit twice (a duplicated write), the third torn in its last row
    partial.write_text(header + "".join(rows[:6]) + "".join(rows[:6]) + "".join(rows[6:17]) + rows[17][:17])
    seen = []
    got = evaluate_denoising(image_dir, out, **{**SMALL, "progress": lambda d, t: seen.append((d, t))})
    assert seen[0] == (2, 4) and seen[-1] == (4, 4)  # two complete units reused, the torn one recomputed
    clean = evaluate_denoising(image_dir, tmp_path / "clean", **SMALL)
    key = lambda r: (r["image"], r["method"], r["lam_mode"], r["draw"])  # noqa: E731
    assert sorted(key(r) for r in got) == sorted(key(r) for r in clean)  # every configuration once
    assert {key(r): r["psnr"] for r in got} == {key(r): r["psnr"] for r in clean}
    assert len(read_csv(out / "results.csv")) == len(clean)


# ---------------------------------------------------------------------------
# Killing the main process leaves no worker alive
# ---------------------------------------------------------------------------


@pytest.fixture
def slow_grid(tmp_path):
    d = tmp_path / "imgs"
    d.mkdir()
    for i in range(4):
        io.imsave(d / f"cam{i}.png", np.roll(data.camera(), 37 * i, axis=1)[::2, ::2], check_contrast=False)
    return d


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_killing_the_main_process_leaves_no_worker(sig, slow_grid, tmp_path):
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "restore.cli", "evaluate", str(slow_grid), "--out", str(out), "--jobs", "2",
           "--sigmas", "5", "10", "25", "50", "--draws", "3", "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.time() + 60
        workers = set()
        while time.time() < deadline and len(workers) < 2:
            workers = children(proc.pid)
            time.sleep(0.2)
        assert len(workers) >= 2, "the workers did not start"
        time.sleep(1.0)  # they are busy with units now
        if sig == signal.SIGINT:
            os.killpg(proc.pid, sig)  # Ctrl-C in a terminal reaches the whole process group
        else:
            os.kill(proc.pid, sig)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    deadline = time.time() + 5
    while time.time() < deadline and any(alive(w) for w in workers):
        time.sleep(0.1)
    assert not any(alive(w) for w in workers), "a worker outlived the main process"
    if sig == signal.SIGINT:
        assert proc.returncode == 130
        assert len(err.strip().splitlines()) == 1 and "interrupted" in err and "Traceback" not in err, err
    # whatever killed it, the same command resumes
    assert subprocess.run([*cmd[:-1], "--sigmas", "5", "--draws", "1"], capture_output=True, text=True,
                          timeout=300).returncode != 0  # another configuration: refused, not mixed


def test_markdown_with_one_draw_claims_no_spread():
    rows = [{"image": "a", "sigma": 5.0, "wavelet": "db3", "method": "tree_l2", "lam_mode": "oracle", "draw": 0,
             "lam": 1.0, "psnr": 30.0, "seconds": 0.1}]
    md = markdown_table(rows)
    assert "| db3 | 5 | 30.00 |" in md and "±" not in md
    assert "1 noise draw." in md


def test_importing_the_evaluations_loads_no_heavy_library():
    """What the command line's parser reads (names, constants, signatures' defaults) costs no numba, sklearn."""
    code = """if True:
        import inspect, sys
        import restore.evaluate as ev
        for name in ev.__all__:
            obj = getattr(ev, name)
            if callable(obj) and not isinstance(obj, type):
                inspect.signature(obj)
        heavy = sorted(m for m in ("sklearn", "numba", "matplotlib", "dask", "scipy", "skimage", "pywt", "tqdm")
                       if m in sys.modules)
        assert not heavy, heavy
    """
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


# ---------------------------------------------------------------------------
# The PSNR plot: a figure a paper could use
# ---------------------------------------------------------------------------


def _plotted(monkeypatch, rows, tmp_path):
    """The figure write_plot saves (caught at savefig), drawn."""
    import matplotlib.figure

    from restore.evaluate.report import write_plot

    saved = []
    real = matplotlib.figure.Figure.savefig
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig",
                        lambda fig, *a, **k: (saved.append(fig), real(fig, *a, **k))[1])
    monkeypatch.setattr("matplotlib.pyplot.close", lambda *a: None)  # keep it to look at
    write_plot(rows, tmp_path / "psnr.png")
    assert (tmp_path / "psnr.png").read_bytes()[:4] == b"\x89PNG"
    [fig] = saved
    fig.canvas.draw()
    return fig


def test_the_psnr_plot_tells_methods_and_lam_modes_apart(monkeypatch, tmp_path):
    from matplotlib.colors import to_hex

    from restore.evaluate.report import PAPER_ORDER

    methods = (*PAPER_ORDER, "bayes_shrink")
    # each curve has PSNRs of its own, so that a line tells which method and mode it draws
    level = {(m, mode): 20.0 + 2 * i + (0.5 if mode == "auto" else 0) for i, m in enumerate(methods)
             for mode in ("oracle", "auto")}
    rows = [{"image": "a", "sigma": s, "wavelet": w, "method": m, "lam_mode": mode, "draw": 0, "lam": 1.0,
             "psnr": level[(m, mode)] - s / 10, "seconds": 0.1}
            for w in ("haar", "db3") for s in (10.0, 25.0, 50.0) for m in methods for mode in ("oracle", "auto")
            if not (m == "bayes_shrink" and mode == "oracle")]
    fig = _plotted(monkeypatch, rows, tmp_path)
    colours, styles = {}, {}
    for ax in fig.axes:
        for line in ax.get_lines():
            x, y = line.get_xdata(), line.get_ydata()
            if len(x) != 3:
                continue
            [key] = [k for k, v in level.items() if np.allclose(np.asarray(y) + np.asarray(x) / 10, v)]
            colours.setdefault(key[0], set()).add(to_hex(line.get_color()))
            styles.setdefault(key[1], set()).add(line.get_linestyle())
    assert set(colours) == set(methods)
    assert all(len(c) == 1 for c in colours.values()), colours  # a method keeps its colour in both modes
    assert len({c for cs in colours.values() for c in cs}) == len(methods), colours  # one colour per method
    assert all(len(s) == 1 for s in styles.values()) and styles["oracle"] != styles["auto"], styles
    # the legends name every method, and show which line style is which lam mode
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes)]
    entries = {t.get_text(): h for lg in legends if lg is not None
               for t, h in zip(lg.get_texts(), lg.legend_handles, strict=True)}
    assert all(any(m in text for text in entries) for m in methods), list(entries)
    [oracle] = [h for t, h in entries.items() if "oracle" in t and not any(m in t for m in methods)]
    [auto] = [h for t, h in entries.items() if "auto" in t and not any(m in t for m in methods)]
    assert (oracle.get_linestyle(), auto.get_linestyle()) == (styles["oracle"].pop(), styles["auto"].pop())
    # plain sigma ticks
    for ax in fig.axes:
        labels = {t.get_text() for t in ax.get_xticklabels() if t.get_visible() and t.get_text()}
        labels |= {t.get_text() for t in ax.xaxis.get_minorticklabels() if t.get_visible() and t.get_text()}
        assert labels == {"10", "25", "50"}, labels


# ---------------------------------------------------------------------------
# What a worker cannot send back still reaches the user as the unit's own failure
# ---------------------------------------------------------------------------


def _run_in_workers(tmp_path, func, n_units=2):
    from restore.evaluate.runner import OutputFolder, Unit

    units = [Unit((i,), func, (i,), frozenset({(i,)})) for i in range(n_units)]
    with OutputFolder(tmp_path / "out", {"task": "test"}, force=False, input_dir=tmp_path / "in") as folder:
        folder.run(units, lambda r: (r["i"],), ("i",), {}, False, 2, None)


def test_a_result_that_cannot_be_sent_is_named_as_such_not_as_a_dead_worker(tmp_path, capfd):
    import evaluate_units

    with pytest.raises(RuntimeError, match="a unit's result could not be sent to the main process: .*lock") as info:
        _run_in_workers(tmp_path, evaluate_units.rows_that_do_not_pickle)
    assert "died" not in str(info.value)
    assert "Traceback" not in capfd.readouterr().err  # the worker did not crash on its way out


@pytest.mark.parametrize("unit", ["raise_two_arg_error", "raise_locked_error"])
def test_an_error_that_cannot_be_rebuilt_arrives_with_its_own_type_message_and_traceback(unit, tmp_path, capfd):
    import evaluate_units

    with pytest.raises(Exception, match="the unit's own failure") as info:
        _run_in_workers(tmp_path, getattr(evaluate_units, unit))
    error = info.value
    name = "TwoArgError" if unit == "raise_two_arg_error" else "LockedError"
    assert isinstance(error, RuntimeError) and str(error).startswith(f"{name}: "), repr(error)
    if sys.version_info >= (3, 11):  # the worker's traceback, as a note
        assert f"in {unit}" in "".join(getattr(error, "__notes__", [])), getattr(error, "__notes__", None)
    assert "Traceback" not in capfd.readouterr().err


def test_a_worker_dying_as_it_starts_is_not_said_to_die_running_a_unit(tmp_path, monkeypatch):
    import evaluate_units
    import threadpoolctl  # noqa: F401 - ours stays loaded; a spawned worker, finding the broken one first, dies

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "threadpoolctl.py").write_text("raise SystemExit(3)\n")
    monkeypatch.syspath_prepend(str(broken))  # spawned workers inherit sys.path
    with pytest.raises(RuntimeError, match=r"died \(exit code 3\)") as info:
        _run_in_workers(tmp_path, evaluate_units.raise_two_arg_error)
    assert "running a unit" not in str(info.value) and "start" in str(info.value), str(info.value)
