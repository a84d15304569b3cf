"""Ctrl-C ends ``restore evaluate`` at once, whenever it comes, even on a busy machine (issue 27, item 1).

One SIGINT goes to the main process alone (as ``timeout -s INT`` or ``kill -INT`` sends it) at moments that
matter: while the worker processes are being started, while they import, and while they run units; two
busy processes load the machine beside it. Every run must exit with 130 within a few seconds, leave no
worker behind, and keep what it finished, so that the same command resumes and completes.
"""

import csv
import os
import random
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from process_helpers import alive, children
from skimage import data, io

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc to time the signal")

EXIT_SECONDS = 10  # from the SIGINT to the exit: the interrupt path takes well under 1 s; the rest is load
START_SECONDS = 60  # for the command to start its workers on a loaded machine
# (moment, runs): just after the first child process appears (the pool being started), or 0-1.5 s after the
# workers appear (importing, then running units); runs of each moment, spread over two folders
MOMENTS = (("start-up", 5), ("workers", 3))


@pytest.fixture
def images(tmp_path):
    d = tmp_path / "images"
    d.mkdir()
    for i in range(4):
        io.imsave(d / f"cam{i}.png", np.roll(data.camera(), 61 * i, axis=1)[::4, ::4], check_contrast=False)
    return d


def _command(images, out):
    return [sys.executable, "-m", "restore.cli", "evaluate", str(images), "--out", str(out), "--jobs", "2",
            "--sigmas", "10", "25", "50", "--draws", "1", "--penalties", "l1", "tree_l2", "--wavelets", "haar"]


def _interrupt_once(images, out, moment, rng):
    """Start the command, send one SIGINT to its main process at ``moment``; what happened."""
    proc = subprocess.Popen(_command(images, out), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, cwd=out.parent)
    try:
        need = 1 if moment == "start-up" else 2
        deadline = time.monotonic() + START_SECONDS
        while len(children(proc.pid)) < need and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.001)  # the pool's start-up lasts tens of milliseconds: look often
        time.sleep(rng.uniform(0, 0.02) if moment == "start-up" else rng.uniform(0, 1.5))
        workers = children(proc.pid)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=EXIT_SECONDS)
        except subprocess.TimeoutExpired:
            return f"{moment}: no exit {EXIT_SECONDS} s after SIGINT", workers
        took = time.monotonic() - sent
        if proc.returncode != 130:
            return f"{moment}: exit {proc.returncode} after {took:.1f} s (the SIGINT was lost), stderr {err!r}", workers
        if "interrupted" not in err or "Traceback" in err:
            return f"{moment}: stderr {err!r}", workers
        return None, workers
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()


def test_one_sigint_to_the_main_process_always_ends_the_run_under_load(images, tmp_path):
    rng = random.Random(27)
    runs = [m for m, n in MOMENTS for _ in range(n)]
    rng.shuffle(runs)
    folders = [tmp_path / "out0", tmp_path / "out1"]
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        def sequence(k):  # one folder: each run resumes what the ones before it finished
            seen = []
            for moment in runs[k::2]:
                seen.append(_interrupt_once(images, folders[k], moment, random.Random(rng.random())))
            return seen

        with ThreadPoolExecutor(2) as pool:
            results = [r for seen in pool.map(sequence, (0, 1)) for r in seen]
    finally:
        for b in busy:
            b.kill()
            b.wait()
    failures = [f for f, _ in results if f]
    assert not failures, f"{len(failures)} of {len(results)} runs: " + "; ".join(failures)
    workers = {w for _, ws in results for w in ws}
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(alive(w) for w in workers):
        time.sleep(0.1)
    assert not any(alive(w) for w in workers), "a worker outlived its interrupted run"
    # what the interrupted runs finished is kept: the same command resumes, and the result is complete
    for out in folders[:1]:  # (one folder: the other went through the same steps)
        done = subprocess.run([*_command(images, out), "--quiet"], capture_output=True, text=True, timeout=300,
                              cwd=out.parent)
        assert done.returncode == 0, done.stderr
        with open(out / "results.csv", newline="") as fh:
            rows = list(csv.DictReader(fh))
        assert len(rows) == 4 * 3 * (2 * 2 + 1)  # images x sigmas x (penalties x lam modes + BayesShrink)
        assert len({(r["image"], r["sigma"], r["method"], r["lam_mode"]) for r in rows}) == len(rows)


def test_a_unit_failing_in_a_worker_raises_its_error_and_leaves_no_worker(tmp_path):
    import math

    from restore.evaluate.runner import OutputFolder, Unit

    units = [Unit((i,), math.sqrt, (-1.0,), frozenset({(i,)})) for i in range(3)]
    before = children(os.getpid())
    with OutputFolder(tmp_path / "out", {"task": "test"}, force=False, input_dir=tmp_path / "in") as folder:
        with pytest.raises(ValueError, match="math domain error"):
            folder.run(units, lambda r: (r["i"],), ("i",), {}, False, 2, None)
    from multiprocessing import resource_tracker

    tracker = {resource_tracker._resource_tracker._pid}  # multiprocessing's, alive as long as this process
    assert not [c for c in children(os.getpid()) - before - tracker if alive(c)]
