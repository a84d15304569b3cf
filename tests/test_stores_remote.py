"""`restore denoise` on stores given as URLs (fsspec): memory://, an S3 object store (moto's server) on a
`distributed.LocalCluster` with no shared folder, and https:// for reading."""

import functools
import http.server
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from restore.cli import main

zarr = pytest.importorskip("zarr")
fsspec = pytest.importorskip("fsspec")

ROOT = Path(__file__).resolve().parents[1]
ARGS = ["--volume", "--sigma", "5000", "--lam", "3000", "--quiet"]


@pytest.fixture(scope="module")
def noisy():
    return np.random.default_rng(3).integers(20000, 45000, (16, 64, 64), dtype=np.uint16)


def _write(url, data, chunks=(8, 32, 32)):
    arr = zarr.create_array(url, shape=data.shape, chunks=chunks, dtype=data.dtype, overwrite=True)
    arr[:] = data


def _local(noisy, tmp_path):
    """The same work on local folders: what every URL run must give."""
    _write(str(tmp_path / "ref_in.zarr"), noisy)
    assert main(["denoise", str(tmp_path / "ref_in.zarr"), str(tmp_path / "ref.zarr"), *ARGS]) == 0
    return zarr.open_array(str(tmp_path / "ref.zarr"), mode="r")[:]


def _port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_memory_urls_in_and_out(noisy, tmp_path):
    ref = _local(noisy, tmp_path)
    _write("memory://bucket/in.zarr", noisy)
    assert main(["denoise", "memory://bucket/in.zarr", "memory://bucket/out.zarr", *ARGS]) == 0
    np.testing.assert_array_equal(zarr.open_array("memory://bucket/out.zarr", mode="r")[:], ref)
    fs = fsspec.filesystem("memory")
    assert sorted(p.rsplit("/", 1)[-1] for p in fs.ls("/bucket", detail=False)) == ["in.zarr", "out.zarr"]
    with pytest.raises(SystemExit, match="exists; pass --force"):
        main(["denoise", "memory://bucket/in.zarr", "memory://bucket/out.zarr", *ARGS])
    assert main(["denoise", "memory://bucket/in.zarr", "memory://bucket/out.zarr", *ARGS, "--force"]) == 0
    with pytest.raises(SystemExit, match="was not written by restore"):
        main(["denoise", "memory://bucket/out.zarr", "memory://bucket/in.zarr", *ARGS, "--force"])
    with pytest.raises(SystemExit, match="cannot read"):
        main(["denoise", "memory://bucket/nothing.zarr", "memory://bucket/o.zarr", *ARGS])


def test_an_https_store_is_read(noisy, tmp_path):
    ref = _local(noisy, tmp_path)
    served = tmp_path / "site"
    served.mkdir()
    _write(str(served / "in.zarr"), noisy)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", _port()), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/in.zarr"
        assert main(["denoise", url, str(tmp_path / "out.zarr"), *ARGS]) == 0
    finally:
        server.shutdown()
        server.server_close()
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "out.zarr"), mode="r")[:], ref)


def test_an_s3_store_on_a_cluster_without_a_shared_folder(noisy, tmp_path, monkeypatch):
    """Workers in processes of their own, started in another folder, reach the stores by their URLs only."""
    moto_server = pytest.importorskip("moto.server")
    pytest.importorskip("s3fs")
    distributed = pytest.importorskip("distributed")
    ref = _local(noisy, tmp_path)
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=_port())
    server.start()
    try:
        endpoint = f"http://127.0.0.1:{server._server.server_port}"
        env = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1",
               "AWS_ENDPOINT_URL": endpoint}
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        fs = fsspec.filesystem("s3", skip_instance_cache=True)
        fs.mkdir("data")
        _write("s3://data/in.zarr", noisy)
        (tmp_path / "elsewhere").mkdir()
        monkeypatch.chdir(tmp_path / "elsewhere")
        with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=True, dashboard_address=":0") as c:
            res = subprocess.run([sys.executable, "-m", "restore.cli", "denoise", "s3://data/in.zarr",
                                  "s3://data/out.zarr", *ARGS, "--scheduler", c.scheduler_address],
                                 capture_output=True, text=True, timeout=300,
                                 env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert res.returncode == 0, res.stderr
        assert res.stdout.strip() == "wrote s3://data/out.zarr"
        fs.invalidate_cache()
        assert sorted(p.rsplit("/", 1)[-1] for p in fs.ls("data", detail=False)) == ["in.zarr", "out.zarr"]
        np.testing.assert_array_equal(zarr.open_array("s3://data/out.zarr", mode="r")[:], ref)
        assert list((tmp_path / "elsewhere").iterdir()) == []
    finally:
        server.stop()


def test_an_interrupted_copy_to_a_url_leaves_no_store_that_opens(noisy, monkeypatch):
    # an object store has no rename: the finished store is copied object by object into place; the connection
    # fails after a few objects
    _write("memory://cut/in.zarr", noisy)
    fs = fsspec.filesystem("memory")
    real = type(fs).cp_file
    copied = []

    def cp_file(self, path1, path2, **kwargs):
        if "out.zarr" in path2 and len(copied) == 5:
            raise ConnectionError("the connection to the object store was lost")
        copied.append(path2)
        return real(self, path1, path2, **kwargs)

    monkeypatch.setattr(type(fs), "cp_file", cp_file)
    try:
        code = main(["denoise", "memory://cut/in.zarr", "memory://cut/out.zarr", *ARGS])
    except SystemExit as e:
        code = e.code
    assert code not in (0, None) and len(copied) == 5
    assert sorted(p.rsplit("/", 1)[-1] for p in fs.ls("/cut", detail=False)) == ["in.zarr"]
