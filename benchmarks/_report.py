"""Shared helpers of the benchmark scripts: aligned tables, progress notes, load measurement."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], title: str = "") -> str:
    """Format rows as an aligned text table (first column left, others right)."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(r: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))

    out = [title] if title else []
    out += [line(cells[0]), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in cells[1:]]
    return "\n".join(out)


def note(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def git_state() -> str:
    """Commit of the repository and whether ``restore/`` has uncommitted changes (timings depend on it)."""
    import subprocess

    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "restore"], cwd=HERE.parent,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (" + uncommitted changes in restore/" if dirty else "")


def _proc_stat() -> tuple[float, float]:
    """Busy and steal CPU seconds of the whole machine since boot (Linux; zeros elsewhere)."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return 0.0, 0.0
    hz = os.sysconf("SC_CLK_TCK")
    busy = v[0] + v[1] + v[2] + v[5] + v[6]  # user nice system irq softirq
    return busy / hz, (v[7] if len(v) > 7 else 0) / hz


def _own_cpu() -> float:
    import resource

    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


class CpuWatch:
    """CPU seconds the rest of the machine used while we ran: a measure of how contended a timing was."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.busy0, self.steal0 = _proc_stat()
        self.own0 = _own_cpu()

    def stop(self) -> dict:
        """Wall seconds, CPU seconds of other processes (and hypervisor steal) since construction."""
        busy, steal = _proc_stat()
        wall = time.perf_counter() - self.t0
        other = max(0.0, (busy - self.busy0) - (_own_cpu() - self.own0))
        return {"wall": wall, "other_cpu_s": other, "other_cores": other / wall if wall > 0 else 0.0,
                "steal_s": steal - self.steal0}


def load_avg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:  # pragma: no cover
        return "n/a"

