"""The benchmark scripts stay runnable: each imports what it uses and answers --help without doing any work."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p.name for p in (ROOT / "benchmarks").glob("*.py") if not p.name.startswith("_"))


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_answers_help_and_touches_nothing(script):
    pytest.importorskip("spams")  # the bench extra
    before = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--help"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert res.returncode == 0, res.stderr[-2000:]
    assert "usage:" in res.stdout
    after = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout
    assert after == before, "--help changed files of the repository"
