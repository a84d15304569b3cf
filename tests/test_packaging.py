"""The wheel holds restore and the napari plugin under names of their own, built without warnings."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    build = tmp_path_factory.mktemp("build")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(out), str(ROOT)],
        capture_output=True, text=True, timeout=300, env={"PATH": "/usr/bin:/bin", "TMPDIR": str(build)})
    assert proc.returncode == 0, proc.stderr
    [whl] = out.glob("*.whl")
    return whl, proc.stdout + proc.stderr


def test_wheel_holds_only_restore_and_restore_napari(wheel):
    whl, _ = wheel
    names = zipfile.ZipFile(whl).namelist()
    top = {n.split("/")[0] for n in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"restore", "restore_napari"}
    assert "restore/data/dict_grey_8x8.npz" in names
    assert "restore_napari/napari.yaml" in names
    assert "restore_napari/data/chelsea_cat_text.png" in names
    assert "restore_napari/data/nuclei_32x128x128.npz" in names  # the "Noisy nuclei volume" sample
    entry = zipfile.ZipFile(whl).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "restore-tree = restore_napari:napari.yaml" in entry


def test_wheel_builds_without_package_warnings(wheel):
    _, log = wheel
    assert "is absent from" not in log and "absent from the `packages`" not in log
