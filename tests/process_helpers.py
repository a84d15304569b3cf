"""Processes seen from /proc: a process's children and whether one is still alive (Linux)."""

from pathlib import Path

#: CPU seconds a first timed call may take beyond three times the second (a fresh process's first unit of work):
#: a busy machine's scheduling once charged 0.08 s to a unit of milliseconds, while loading numba's cache or
#: scikit-image's modules unwarmed costs 0.3-0.9 s
FIRST_CALL_SLACK_S = 0.1


def children(pid: int) -> set[int]:
    """The process ids of ``pid``'s children, over all its threads."""
    out = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out |= {int(c) for c in (task / "children").read_text().split()}
        except OSError:
            pass
    return out


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, ended but not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def cpu_by_method(code: str, key=float) -> dict:
    """Run ``code`` in a fresh interpreter; it prints ``method key seconds`` lines: ``{method: {key: seconds}}``."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    cpu: dict = {}
    for line in done.stdout.split("\n"):
        if line.strip():
            method, k, seconds = line.split()
            cpu.setdefault(method, {})[key(k)] = float(seconds)
    return cpu
