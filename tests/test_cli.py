import functools
import os
import signal
import subprocess
import sys
import textwrap
import time

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
    out = tmp_path / "clean.png"
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
    with pytest.raises(SystemExit, match="choose another --out, or add --force to replace them") as info:
        main(args)
    assert "force=True" not in str(info.value)
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


# ---------------------------------------------------------------------------
# Files in and out
# ---------------------------------------------------------------------------


def _run(*args, timeout=300, **kwargs):
    """The command as a user runs it: a process, its exit code, stdout and stderr."""
    return subprocess.run([sys.executable, "-m", "restore.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, **kwargs)


def _png16(path, img):
    """Write a 16-bit PNG (grey or colour) with pypng, which keeps every bit."""
    import png

    img = np.asarray(img, dtype=np.uint16)
    planes = 1 if img.ndim == 2 else img.shape[2]
    writer = png.Writer(img.shape[1], img.shape[0], bitdepth=16, greyscale=planes in (1, 2), alpha=planes in (2, 4))
    with open(path, "wb") as fh:
        writer.write(fh, img.reshape(img.shape[0], -1).tolist())


@pytest.fixture
def no_work(monkeypatch):
    """Fail if a command reaches the algorithm: problems with the output must be found first."""
    import restore

    def boom(*args, **kwargs):
        raise AssertionError("the computation started")

    for name in ("denoise_wavelet_tree", "inpaint", "learn_dictionary"):
        monkeypatch.setattr(restore, name, boom)


@pytest.mark.parametrize(("out", "match"), [
    ("missing/o.png", "folder .* does not exist"),
    (".", "is a folder"),
    ("o.jpg", "JPEG .* 16-bit"),
    ("o.bmp", "BMP .* 16-bit"),
    ("o.xyz", "unknown image format '.xyz'"),
    ("/proc/o.png", "cannot write into"),
])
def test_output_problems_are_found_before_any_work(out, match, tmp_path, no_work):
    src = tmp_path / "in.png"
    _png16(src, np.full((32, 32, 3), 1000))
    mask = tmp_path / "m.png"
    io.imsave(mask, np.eye(32, dtype=np.uint8) * 255, check_contrast=False)
    target = out if out.startswith("/") else str(tmp_path / out)
    for argv in (["denoise", src, target], ["inpaint", src, mask, target]):
        with pytest.raises(SystemExit, match=match):
            main([str(a) for a in argv])
    with pytest.raises(SystemExit, match="must end in .npz|is a folder|does not exist|cannot write"):
        main(["learn", str(src), "--out", target])


def test_float_tiff_cannot_go_to_png(tmp_path, no_work):
    src = tmp_path / "in.tif"
    tifffile = pytest.importorskip("tifffile")
    tifffile.imwrite(src, np.random.default_rng(0).random((32, 32)).astype(np.float32))
    with pytest.raises(SystemExit, match="PNG .* float"):
        main(["denoise", str(src), str(tmp_path / "o.png")])


def test_16bit_colour_png_in_16bit_out_and_known_pixels_bit_identical(tmp_path):
    import png

    rng = np.random.default_rng(3)
    img = (data.astronaut()[::4, ::4].astype(np.int64) * 257 + rng.integers(-300, 300, (128, 128, 3)))
    img = img.clip(0, 65535).astype(np.uint16)
    src = tmp_path / "in16.png"
    _png16(src, img)
    out = tmp_path / "den16.png"
    assert main(["denoise", str(src), str(out)]) == 0
    w, h, rows, info = png.Reader(bytes=out.read_bytes()).read()
    assert info["bitdepth"] == 16 and info["planes"] == 3 and (w, h) == (128, 128)
    res = np.array(list(rows), dtype=np.uint16).reshape(128, 128, 3)
    assert np.abs(res.astype(float) - img).mean() < 2000 and len(np.unique(res[..., 0] % 256)) > 100
    mask = np.zeros((128, 128), np.uint8)
    mask[60:64, 5:120] = 255
    msk = tmp_path / "m.png"
    io.imsave(msk, mask, check_contrast=False)
    filled = tmp_path / "filled16.png"
    assert main(["inpaint", str(src), str(msk), str(filled), "--passes", "2", "--quiet"]) == 0
    _, _, rows, info = png.Reader(bytes=filled.read_bytes()).read()
    res = np.array(list(rows), dtype=np.uint16).reshape(128, 128, 3)
    assert info["bitdepth"] == 16
    np.testing.assert_array_equal(res[mask == 0], img[mask == 0])


def test_a_mask_with_alpha_uses_the_alpha(tmp_path):
    img = data.astronaut()[::4, ::4]
    src = tmp_path / "p.png"
    io.imsave(src, img, check_contrast=False)
    # painted black on a transparent layer: the strokes are where alpha is opaque, whatever their colour
    rgba = np.zeros((128, 128, 4), np.uint8)
    rgba[50:53, 10:100, 3] = 255
    msk = tmp_path / "alpha.png"
    io.imsave(msk, rgba, check_contrast=False)
    out = tmp_path / "o.png"
    assert main(["inpaint", str(src), str(msk), str(out), "--passes", "2", "--quiet"]) == 0
    res = io.imread(out)
    changed = np.any(res != img, axis=-1)
    assert changed[50:53, 10:100].mean() > 0.5 and not changed[:50].any() and not changed[53:].any()


def test_a_jpeg_mask_is_thresholded_with_a_warning(tmp_path, capsys):
    img = data.astronaut()[::4, ::4]
    src = tmp_path / "p.png"
    io.imsave(src, img, check_contrast=False)
    m = np.zeros((128, 128), np.uint8)
    m[50:56, 10:100] = 255
    msk = tmp_path / "m.jpg"
    import imageio.v3 as iio

    iio.imwrite(msk, m, quality=60)
    out = tmp_path / "o.png"
    assert main(["inpaint", str(src), str(msk), str(out), "--passes", "2", "--quiet"]) == 0
    assert "lossy" in capsys.readouterr().err
    changed = np.any(io.imread(out) != img, axis=-1)
    assert not changed[:45].any() and not changed[62:].any()  # JPEG ringing is not taken for missing pixels


def test_corrupt_or_truncated_image_gives_one_line(tmp_path):
    good = tmp_path / "g.png"
    io.imsave(good, data.camera()[::4, ::4], check_contrast=False)
    cut = tmp_path / "cut.png"
    cut.write_bytes(good.read_bytes()[:300])
    res = _run("denoise", cut, tmp_path / "o.png")
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "cannot read" in res.stderr
    assert not (tmp_path / "o.png").exists()


def test_an_unreachable_dask_scheduler_gives_one_line(tmp_path):
    d = tmp_path / "imgs"
    d.mkdir()
    io.imsave(d / "a.png", data.camera()[::8, ::8], check_contrast=False)
    res = _run("evaluate", d, "--out", tmp_path / "o", "--sigmas", "25", "--draws", "1", "--quiet",
               "--scheduler", "tcp://127.0.0.1:9", timeout=120)
    assert res.returncode != 0 and "Traceback" not in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Dask scheduler" in res.stderr


@pytest.mark.parametrize("command", ["denoise", "inpaint", "learn"])
def test_ctrl_c_prints_one_line_exits_130_and_writes_nothing(command, tmp_path):
    big = np.tile(data.astronaut(), (2, 2, 1))  # 1024 x 1024 colour: several seconds of work
    src = tmp_path / "big.png"
    io.imsave(src, big, check_contrast=False)
    mask = np.zeros(big.shape[:2], np.uint8)
    mask[::7] = 255
    msk = tmp_path / "m.png"
    io.imsave(msk, mask, check_contrast=False)
    out = tmp_path / ("o.npz" if command == "learn" else "o.png")
    argv = {"denoise": ["denoise", src, out, "--cycle-spins", "16"],
            "inpaint": ["inpaint", src, msk, out, "--quiet"],
            "learn": ["learn", src, "--out", out, "--epochs", "20", "--quiet"]}[command]
    proc = subprocess.Popen([sys.executable, "-m", "restore.cli", *map(str, argv)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    time.sleep(4.0)
    assert proc.poll() is None, proc.communicate()
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1 and "interrupted" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["big.png", "m.png"])  # no output, no temp file


@pytest.mark.parametrize("task", ["denoise", "volume", "inpaint", "patches"])
def test_evaluate_writes_each_task_into_its_own_default_folder(task, tmp_path, monkeypatch):
    import restore.evaluate as ev

    seen = {}

    def fake(*args, **kwargs):
        seen["out"] = out = next(a for a in args if str(a).startswith("results/"))
        os.makedirs(out)
        open(os.path.join(out, "table.md"), "w").close()

    for name in ("evaluate_denoising", "evaluate_volumes", "evaluate_inpainting", "evaluate_patches"):
        # a wrapper per function keeps its signature, whose defaults the parser reads
        monkeypatch.setattr(ev, name, functools.wraps(getattr(ev, name))(functools.partial(fake)))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "imgs").mkdir()
    for name in ("a.png", "b.png"):
        io.imsave(tmp_path / "imgs" / name, data.camera()[:64, :64], check_contrast=False)
    argv = ["evaluate", "--task", task, "imgs"]
    if task == "inpaint":
        argv += ["--masks", "imgs"]
    main(argv)
    assert seen["out"] == f"results/{task}"


def test_a_second_ctrl_c_while_the_library_threads_end_exits_at_once_without_a_traceback(tmp_path):
    # a terminal, or `timeout -s INT` (to the command, then to its group), can send SIGINT twice: the second
    # came while the interpreter joined the coder's threads at exit and printed a KeyboardInterrupt traceback
    src = tmp_path / "big.png"
    io.imsave(src, np.tile(data.astronaut(), (2, 2, 1)), check_contrast=False)
    failures = []
    for _ in range(4):  # (the second signal's moment varies: a few runs meet several of them)
        out = tmp_path / "d.npz"
        proc = subprocess.Popen([sys.executable, "-m", "restore.cli", "learn", str(src), "--out", str(out),
                                 "--epochs", "20", "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        time.sleep(4.0)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        for delay in (0.0, 0.02, 0.05, 0.1, 0.2):  # until the first one is handled: the second meets the exit
            time.sleep(delay)
            if proc.poll() is not None:
                break
            proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        # 130, or ended by the signal itself as the interpreter finished (a shell reports both as 130)
        if proc.returncode not in (130, -signal.SIGINT) or "Traceback" in err or "interrupted" not in err:
            failures.append((proc.returncode, err[-800:]))
        assert not out.exists()
    assert not failures, failures


def test_a_second_ctrl_c_during_the_cleanup_lets_it_finish_then_exits_at_once(tmp_path):
    # the first Ctrl-C unwinds the work, whose `finally` blocks remove our partial files (and re-take locks that
    # threads hold): a second one raised in there left a temporary file behind, or a "release unlocked lock"
    # traceback; it now waits for the cleanup, then ends the process
    proc, wait_for = _slow_command(tmp_path, cleanup_s=1.0)
    wait_for("started")
    proc.send_signal(signal.SIGINT)
    wait_for("cleaning")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert (tmp_path / "cleaned").exists()
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert [line for line in err.splitlines() if line] == ["still cleaning up: press Ctrl-C again to quit at once",
                                                           "interrupted: nothing written"], err


def test_a_command_started_under_nohup_keeps_running_when_the_terminal_closes(tmp_path):
    # nohup (and a shell's background job, for SIGINT) starts the command with the signal ignored: the command
    # turned SIGHUP back into "interrupted: nothing written" (exit 129) and lost the night's run
    script = tmp_path / "hup.py"
    script.write_text(textwrap.dedent("""
        import os, signal, sys, time
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as nohup starts it
        import restore.cli as cli

        def work(args):
            os.kill(os.getpid(), signal.SIGHUP)  # the terminal closes
            time.sleep(0.5)
            print("finished")
            return 0

        cli.cmd_learn = work
        sys.argv = ["restore", "learn", "in.png", "--out", "d.npz"]
        sys.exit(cli.console())
    """))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "finished", proc.stderr


def _run_script(tmp_path, body):
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(body))
    return subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _slow_command(tmp_path, cleanup_s):
    """The command, its work a long wait whose cleanup takes ``cleanup_s``; and a wait for its marks in
    ``tmp_path``: "started", "cleaning", "cleaned"."""
    proc = _run_script(tmp_path, f"""
        import pathlib, sys, time
        import restore.cli as cli
        marks = pathlib.Path({str(tmp_path)!r})

        def slow(args):
            (marks / "started").touch()
            try:
                time.sleep(60)
            finally:
                (marks / "cleaning").touch()
                time.sleep({cleanup_s})
                (marks / "cleaned").touch()

        cli.cmd_learn = slow
        sys.argv = ["restore", "learn", "in.png", "--out", "d.npz"]
        sys.exit(cli.console())
    """)

    def wait_for(name):
        deadline = time.monotonic() + 60
        while not (tmp_path / name).exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.01)

    return proc, wait_for


def test_ctrl_c_again_after_the_cleanup_notice_cuts_a_long_cleanup_short(tmp_path):
    # a cluster's running tasks are awaited up to two minutes in the cleanup: a second Ctrl-C only waited for it,
    # and so did every later one
    proc, wait_for = _slow_command(tmp_path, cleanup_s=30)
    wait_for("started")
    proc.send_signal(signal.SIGINT)
    wait_for("cleaning")
    proc.send_signal(signal.SIGINT)  # the notice
    time.sleep(0.05)
    proc.send_signal(signal.SIGINT)  # at once after it (a key held, two senders): still waits
    time.sleep(1.0)
    assert proc.poll() is None
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)  # a second after it: at once
    _, err = proc.communicate(timeout=30)
    assert time.monotonic() - t0 < 5 and proc.returncode == 130 and "Traceback" not in err, err
    assert "press Ctrl-C again to quit at once" in err and "cleanup cut short" in err


@pytest.mark.parametrize(("name", "code"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_stop_signal_that_lands_in_a_finalizer_still_stops_the_command(tmp_path, name, code):
    # Python ignores an exception raised in a __del__ (numba's compiler drops llvmlite objects all the time): the
    # first signal's exception was lost there, and the command ran to its end (`restore inpaint` SIGINTed at 1 s,
    # 1 run in 40). The signal must stop the work once the finalizer is over.
    proc = _run_script(tmp_path, f"""
        import os, signal, sys, time
        import restore.cli as cli

        class Finalized:
            def __del__(self):
                os.kill(os.getpid(), signal.{name})  # handled here, inside the finalizer
                sum(range(1000))

        def work(args):
            Finalized()
            time.sleep(30)
            print("ran to its end", file=sys.stderr)
            return 0

        cli.cmd_learn = work
        sys.argv = ["restore", "learn", "in.png", "--out", "d.npz"]
        sys.exit(cli.console())
    """)
    t0 = time.monotonic()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code and time.monotonic() - t0 < 10, err
    assert "ran to its end" not in err and "Exception ignored" not in err and "Traceback" not in err, err


def test_sigterm_while_evaluate_spawns_leaves_the_cleanup_safe_from_a_ctrl_c(tmp_path):
    # evaluate holds Ctrl-C back while it spawns its processes and put the command's first-signal handler back
    # afterwards, though SIGTERM had meanwhile begun the cleanup: a Ctrl-C then broke the cleanup
    marks = tmp_path
    proc = _run_script(tmp_path, f"""
        import os, pathlib, signal, sys, time
        import restore.cli as cli
        from restore.evaluate.runner import _sigint_deferred
        marks = pathlib.Path({str(marks)!r})

        def work(args):
            try:
                with _sigint_deferred():  # as evaluate spawns its worker processes
                    os.kill(os.getpid(), signal.SIGTERM)
                    time.sleep(0.2)
            finally:
                os.kill(os.getpid(), signal.SIGINT)  # during the cleanup
                time.sleep(0.3)
                (marks / "cleaned").touch()

        cli.cmd_learn = work
        sys.argv = ["restore", "learn", "in.png", "--out", "d.npz"]
        sys.exit(cli.console())
    """)
    _, err = proc.communicate(timeout=60)
    assert (marks / "cleaned").exists() and proc.returncode == 143 and "Traceback" not in err, err


def test_a_background_commands_ignored_ctrl_c_stays_ignored_after_a_sigterm(tmp_path):
    proc = _run_script(tmp_path, """
        import os, signal, sys
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a shell starts a background job
        import restore.cli as cli

        def work(args):
            os.kill(os.getpid(), signal.SIGTERM)

        cli.cmd_learn = work
        sys.argv = ["restore", "learn", "in.png", "--out", "d.npz"]
        rc = cli.main()
        print(rc, signal.getsignal(signal.SIGINT) is signal.SIG_IGN)
    """)
    out, err = proc.communicate(timeout=60)
    assert out.split() == ["143", "True"], err


def test_a_second_ctrl_c_with_stderr_gone_lets_the_cleanup_finish(tmp_path):
    # `restore ... 2>&1 | tee log`: the Ctrl-C ends tee too, and the notice's write raised into the cleanup
    proc, wait_for = _slow_command(tmp_path, cleanup_s=1.0)
    wait_for("started")
    proc.send_signal(signal.SIGINT)
    wait_for("cleaning")
    proc.stderr.close()  # the reader is gone
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    proc.stdout.close()
    assert (tmp_path / "cleaned").exists() and proc.returncode == 130
