"""`restore denoise --scheduler` on a real `distributed.LocalCluster` (worker processes): interrupts, lost and
killed workers, the progress bar in a log, what is left on disk."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")
distributed = pytest.importorskip("distributed")

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


# 32 x 256 x 256: four blocks of the denoiser (2 x 2 in y and x, each 1-3 s on a worker with --cycle-spins 1),
# so that a block is still running when the first one's chunks appear: the moment these tests interrupt or kill
def _store(path, shape=(32, 256, 256), chunks=(16, 64, 64)):
    data = np.random.default_rng(0).integers(0, 65535, shape, dtype=np.uint16)
    arr = zarr.create_array(str(path), shape=shape, chunks=chunks, dtype=data.dtype)
    arr[:] = data
    return path


def _cli(src, dst, address, *extra, lost_s=None):
    """The command on the cluster; ``lost_s``: its patience without workers (``restore._stores._LOST_S``) if given."""
    command = ["-m", "restore.cli"] if lost_s is None else [
        "-c", f"import runpy, restore._stores as s; s._LOST_S = {lost_s!r}; "
              "runpy.run_module('restore.cli', run_name='__main__', alter_sys=True)"]
    return subprocess.Popen([sys.executable, *command, "denoise", str(src), str(dst), "--volume",
                             "--sigma", "5000", "--scheduler", address, *extra], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, env=ENV)


# a run that is cheap but whose blocks take long enough to be caught running: one cycle spin, lam given (no SURE on
# the samples before the run starts)
CHEAP = ("--cycle-spins", "1", "--lam", "2000", "--quiet")


def _wait_for_chunks(proc, folder, deadline=120):
    """Until the temporary store holds written chunks: the workers are denoising."""
    end = time.monotonic() + deadline
    while True:
        tmp = [p for p in folder.iterdir() if p.name.endswith(".tmp")]
        if tmp and any(q.is_file() and q.name != "zarr.json" for q in tmp[0].rglob("*")):
            return
        assert proc.poll() is None and time.monotonic() < end, proc.communicate()
        time.sleep(0.05)


def _cluster(**kw):
    return distributed.LocalCluster(processes=True, dashboard_address=":0", **kw)


def _wait_until_idle(client, deadline=120):
    """Until no worker thread runs a task (a cancelled task still running included): whatever it writes is written."""
    end = time.monotonic() + deadline
    while any(client.run(lambda dask_worker: len(dask_worker.active_threads)).values()):
        assert time.monotonic() < end, "a task still runs"
        time.sleep(0.05)


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_cluster_run_leaves_nothing_even_later(sig, code, tmp_path):
    """Tasks already running on the workers when the signal comes must not write a store back afterwards."""
    src = _store(tmp_path / "in.zarr")
    with _cluster(n_workers=1, threads_per_worker=2) as cluster, distributed.Client(cluster) as client:
        proc = _cli(src, tmp_path / "out.zarr", cluster.scheduler_address, *CHEAP)
        _wait_for_chunks(proc, tmp_path)
        os.killpg(proc.pid, sig)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == code and "Traceback" not in err, err
        assert len(err.strip().splitlines()) == 1 and "interrupted" in err
        _wait_until_idle(client)  # the tasks that were running have finished
        assert sorted(p.name for p in tmp_path.iterdir()) == ["in.zarr"]


# Seconds the run waits without workers before it stops: the library's 10 s (a nanny's restart) would only be waited
# out here, where the only worker is gone for good
LOST_S = 2.0


def test_losing_every_worker_is_one_line_and_stops(tmp_path):
    src = _store(tmp_path / "in.zarr")
    with _cluster(n_workers=0) as cluster:
        worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", cluster.scheduler_address,
                                   "--no-nanny", "--nthreads", "2", "--no-dashboard"], env=ENV,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            cluster.wait_for_workers(1, timeout=60)  # or a worker late to start would stop the run
            proc = _cli(src, tmp_path / "out.zarr", cluster.scheduler_address, *CHEAP, lost_s=LOST_S)
            _wait_for_chunks(proc, tmp_path)
            worker.kill()
            _, err = proc.communicate(timeout=120)
        finally:
            worker.kill()
            worker.wait()
    assert proc.returncode != 0 and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1 and "worker" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.zarr"]


def test_a_task_that_kills_its_workers_is_one_line(tmp_path):
    """KilledWorker: the scheduler gives up on a task whose workers die (here on the first death)."""
    import dask

    src = _store(tmp_path / "in.zarr")
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), \
            _cluster(n_workers=1, threads_per_worker=2) as cluster, distributed.Client(cluster) as client:
        proc = _cli(src, tmp_path / "out.zarr", cluster.scheduler_address, *CHEAP)
        _wait_for_chunks(proc, tmp_path)
        for pid in client.run(os.getpid).values():
            os.kill(pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0 and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1 and "killed" in err.lower(), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.zarr"]


def test_the_progress_bar_in_a_log_writes_about_once_a_second(tmp_path):
    """stderr to a file (not a terminal): a few updates a second would fill a log over hours."""
    src = _store(tmp_path / "in.zarr", shape=(32, 256, 256))
    with _cluster(n_workers=1, threads_per_worker=2) as cluster:
        start = time.monotonic()
        proc = _cli(src, tmp_path / "out.zarr", cluster.scheduler_address)
        _, err = proc.communicate(timeout=300)
        elapsed = time.monotonic() - start
    assert proc.returncode == 0, err
    updates = err.count("\r") + err.count("\n")
    assert "100%" in err and updates <= elapsed + 3, f"{updates} updates in {elapsed:.1f} s"
    out = zarr.open_array(str(tmp_path / "out.zarr"), mode="r")
    assert out.shape == (32, 256, 256) and out[:].std() > 0
