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


def _store(path, shape=(64, 256, 256), chunks=(16, 64, 64)):
    data = np.random.default_rng(0).integers(0, 65535, shape, dtype=np.uint16)
    arr = zarr.create_array(str(path), shape=shape, chunks=chunks, dtype=data.dtype)
    arr[:] = data
    return path


def _cli(src, dst, address, *extra):
    return subprocess.Popen([sys.executable, "-m", "restore.cli", "denoise", str(src), str(dst), "--volume",
                             "--sigma", "5000", "--scheduler", address, *extra], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, env=ENV)


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


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_cluster_run_leaves_nothing_even_later(sig, code, tmp_path):
    """Tasks already running on the workers when the signal comes must not write a store back afterwards."""
    src = _store(tmp_path / "in.zarr")
    with _cluster(n_workers=1, threads_per_worker=2) as cluster:
        proc = _cli(src, tmp_path / "out.zarr", cluster.scheduler_address, "--cycle-spins", "8", "--quiet")
        _wait_for_chunks(proc, tmp_path)
        os.killpg(proc.pid, sig)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == code and "Traceback" not in err, err
        assert len(err.strip().splitlines()) == 1 and "interrupted" in err
        time.sleep(4)  # the tasks that were running have long finished
        assert sorted(p.name for p in tmp_path.iterdir()) == ["in.zarr"]


def test_losing_every_worker_is_one_line_and_stops(tmp_path):
    src = _store(tmp_path / "in.zarr")
    with _cluster(n_workers=0) as cluster:
        worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", cluster.scheduler_address,
                                   "--no-nanny", "--nthreads", "2", "--no-dashboard"], env=ENV,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            proc = _cli(src, tmp_path / "out.zarr", cluster.scheduler_address, "--cycle-spins", "8", "--quiet")
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
        proc = _cli(src, tmp_path / "out.zarr", cluster.scheduler_address, "--cycle-spins", "8", "--quiet")
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
