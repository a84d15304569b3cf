"""README's two commands stay true: CI runs exactly the test command."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _commands():
    lines = (ROOT / "README.md").read_text().splitlines()
    return [ln.strip() for ln in lines[:12] if ln.startswith("    ")]


def test_readme_opens_with_two_commands():
    cmds = _commands()
    assert len(cmds) == 2
    assert cmds[0].startswith("bash .ci/setup && ") and "restore evaluate sample_images" in cmds[0]
    assert cmds[1].startswith("bash .ci/setup && ") and "pytest" in cmds[1]


def test_ci_runs_the_readme_test_command():
    ci = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()
          if ln.strip() and not ln.startswith("#")]
    assert ci[-1] == _commands()[1]
