"""Shared helpers of the benchmark scripts: aligned tables, progress notes, load measurement, results files."""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
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



# ---------------------------------------------------------------------------
# Results files: what the documentation shows (benchmarks/results/<name>.md)
# ---------------------------------------------------------------------------

RESULTS = HERE / "results"
_RECORDING = "RESTORE_BENCH_RECORDING"  # set while a run records: its child processes write no results file


def machine() -> dict[str, str]:
    """What ran a benchmark: CPU model, cores, memory, system, Python and library versions, commit."""
    import platform

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:  # pragma: no cover - not Linux
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        usable = os.cpu_count() or 1
    try:
        ram = f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.1f} GiB RAM"
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        ram = "RAM unknown"
    versions = [f"Python {platform.python_version()}"]
    for module in ("numpy", "scipy", "numba", "pywt", "skimage", "sklearn", "restore"):
        try:
            versions.append(f"{module} {__import__(module).__version__}")
        except (ImportError, AttributeError):
            pass
    return {"cpu": f"{cpu}, {os.cpu_count()} cores ({usable} usable), {ram}",
            "system": platform.platform(),
            "software": ", ".join(versions),
            "commit": git_state()}


def default_command() -> str:
    """The command line of this process as a user would type it from the repository's root."""
    import shlex

    def from_root(path: str) -> str:
        try:
            return str(Path(path).absolute().relative_to(HERE.parent))
        except ValueError:
            return path

    exe = from_root(sys.executable)
    words = [exe if exe != sys.executable else "python", from_root(sys.argv[0]), *sys.argv[1:]]
    env = [f"PYTHONPATH={os.environ['PYTHONPATH']}"] if os.environ.get("PYTHONPATH") else []
    return " ".join(env + [shlex.join(words)])


def _escape(text: str) -> str:
    """Text as literal Markdown inline content (no emphasis, links, HTML or cell breaks)."""
    return "".join("\\" + ch if ch in "\\`*_[]<>|" else ch for ch in text)


def _aligned_table(lines: list[str], i: int) -> tuple[list[list[str]], int] | None:
    """The aligned table (see :func:`table`) whose header is ``lines[i]``: its cells and the line after it."""
    if i + 1 >= len(lines) or not lines[i].strip():
        return None
    sep = lines[i + 1]
    groups = [(m.start(), m.end()) for m in re.finditer(r"-+", sep)]
    if len(groups) < 2 or not re.fullmatch(r"-+( {2}-+)+", sep):
        return None

    def cells(line: str) -> list[str] | None:
        if not line.strip() or len(line) > len(sep):
            return None
        padded = line.ljust(len(sep))
        if any(padded[a:b].strip() for (_, a), (b, _) in zip(groups[:-1], groups[1:], strict=True)):
            return None  # text in the gap between two columns: not a row of this table
        return [padded[a:b].strip() for a, b in groups]

    rows = [cells(lines[i])]
    j = i + 2
    while j < len(lines) and (row := cells(lines[j])) is not None:
        rows.append(row)
        j += 1
    return (rows, j) if rows[0] is not None else None


def to_markdown(text: str) -> str:
    """A benchmark's printed output as Markdown.

    The aligned tables of :func:`table` become Markdown tables (a line
    right above one, such as its title, becomes its bold caption), Markdown
    tables printed as such are kept, Markdown headings become bold lines,
    and everything else stays as printed, in fenced text blocks.
    """
    lines = text.replace("\t", "    ").splitlines()
    out: list[str] = []
    plain: list[str] = []

    def flush(caption: bool = False) -> None:
        title = plain.pop() if caption and plain and plain[-1].strip() else None
        while plain and not plain[-1].strip():
            plain.pop()
        while plain and not plain[0].strip():
            plain.pop(0)
        if plain:
            fence = "~" * max(3, 1 + max(len(m) for m in re.findall(r"~*", "\n".join(plain))))
            out.extend([fence + "text", *plain, fence, ""])
        plain.clear()
        if title is not None:
            out.extend([f"**{_escape(title.strip())}**", ""])

    i = 0
    while i < len(lines):
        line = lines[i]
        found = _aligned_table(lines, i)
        if found is not None:
            rows, i = found
            flush(caption=True)
            out.append("| " + " | ".join(_escape(c) for c in rows[0]) + " |")
            out.append("|" + "---|" * len(rows[0]))
            out.extend("| " + " | ".join(_escape(c) for c in r) + " |" for r in rows[1:])
            out.append("")
            continue
        if line.startswith("|") and i + 1 < len(lines) and re.fullmatch(r"\|( *:?-+:? *\|)+", lines[i + 1].strip()):
            flush(caption=True)
            while i < len(lines) and lines[i].startswith("|"):
                out.append(lines[i].rstrip())
                i += 1
            out.append("")
            continue
        heading = re.fullmatch(r"#{1,6}\s+(.*)", line.strip())
        if heading:
            flush()
            out.extend([f"**{_escape(heading.group(1))}**", ""])
        else:
            plain.append(line.rstrip())
        i += 1
    flush()
    return "\n".join(out).rstrip() + "\n"


def write_results(name: str, markdown: str, command: str | None = None, *, seconds: float | None = None,
                  contention: dict | None = None) -> Path:
    """Write a benchmark's tables to ``benchmarks/results/<name>.md``, the file the documentation includes.

    Parameters
    ----------
    name : str
        The script's name without ``.py`` (one file per script: its latest
        complete run).
    markdown : str
        The tables (Markdown; see :func:`to_markdown` for printed output).
    command : str, optional
        The exact command that produced them, from the repository's root;
        default: this process's command line.
    seconds : float, optional
        Wall time of the run.
    contention : dict, optional
        :meth:`CpuWatch.stop` of the run: how busy the rest of the machine was.

    Returns
    -------
    Path
        The file written. It starts with the date, the machine (CPU model,
        cores, RAM, system, Python and library versions, commit) and the
        command, then the tables.
    """
    import datetime

    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise ValueError(f"name must be a file name without folders, got {name!r}")
    m = machine()
    run = []
    if seconds is not None:
        run.append(f"{seconds:.0f} s wall")
    if contention is not None:
        run.append(f"other processes used {contention['other_cores']:.2f} cores on average meanwhile")
    header = [
        f"<!-- written by benchmarks/_report.py for {name}: do not edit, run the command again -->",
        f"- **Date:** {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- **Machine:** {_escape(m['cpu'])}; {_escape(m['system'])}",
        f"- **Software:** {_escape(m['software'])}; commit {_escape(m['commit'])}",
        f"- **Command:** `{command or default_command()}`",
    ]
    if run:
        header.append(f"- **Run:** {_escape('; '.join(run))}")
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.md"
    tmp = path.with_name(f".{name}.md.tmp")
    tmp.write_text("\n".join(header) + "\n\n" + markdown.strip() + "\n")
    tmp.replace(path)
    return path


class _Tee:
    """Copies everything written to file descriptor 1 (this process and its children) into a buffer."""

    #: After the run, how long the pipe may stay quiet before the copy ends (s): a helper process that
    #: outlives the run (multiprocessing's resource tracker) keeps a write end open, so no end of file comes.
    QUIET_S = 0.2

    def __enter__(self) -> _Tee:
        import threading

        sys.stdout.flush()
        self._saved = os.dup(1)
        r, w = os.pipe()
        os.dup2(w, 1)
        os.close(w)
        self._chunks: list[bytes] = []
        self._done = threading.Event()

        def pump() -> None:
            import select

            while True:
                ready, _, _ = select.select([r], [], [], self.QUIET_S)
                if not ready:
                    if self._done.is_set():
                        break
                    continue
                chunk = os.read(r, 65536)
                if not chunk:
                    break
                self._chunks.append(chunk)
                os.write(self._saved, chunk)
            os.close(r)

        self._thread = threading.Thread(target=pump, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        sys.stdout.flush()
        os.dup2(self._saved, 1)  # our write end closed; the pump drains what is left and stops when quiet
        self._done.set()
        self._thread.join()
        os.close(self._saved)

    @property
    def text(self) -> str:
        return b"".join(self._chunks).decode(errors="replace")


@contextmanager
def record_results(name: str) -> Iterator[None]:
    """Record what the enclosed run prints to stdout into ``benchmarks/results/<name>.md``.

    Wrap a script's ``main()``: the file is written only when the run ends
    normally (not on an error, ``--help`` or Ctrl-C), from the tables the
    run printed (its own and its child processes'), converted by
    :func:`to_markdown`. Child processes of a recording run record nothing.
    """
    if os.environ.get(_RECORDING):
        yield
        return
    os.environ[_RECORDING] = "1"
    t0 = time.perf_counter()
    watch = CpuWatch()
    try:
        with _Tee() as tee:
            yield
    finally:
        os.environ.pop(_RECORDING, None)
    path = write_results(name, to_markdown(tee.text), seconds=time.perf_counter() - t0, contention=watch.stop())
    note(f"wrote {path.relative_to(HERE.parent)}")
