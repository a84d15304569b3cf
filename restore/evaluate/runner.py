"""The runner of every evaluation: independent units in local processes or on Dask, resumable, one run at a time.

An evaluation writes into an output folder that may hold the user's own
files, so it touches only its own: it records what it writes in a manifest
(``restore-evaluate.json``, which also holds the configuration), refuses a
folder holding files of its names that it did not write, and ``force``
removes only what the manifest lists. A lock file (``.restore-evaluate.lock``,
an OS-level lock released when the process dies, however it dies) keeps a
second run out while one is writing; it is removed when the run ends, so a
finished run leaves only the files its manifest lists, and a refusal leaves
the folder as it was (a folder it had to create is removed again).

Each finished unit is appended to ``results.partial.csv`` (fsynced), so an
interrupted run resumes where it stopped: a torn last line is dropped, rows
are keyed by their configuration and a duplicated row counts once, and a
unit is done when every row it writes is there.

Local workers are spawned processes that die with the main process: they
ignore Ctrl-C (the main process stops them), and each watches its parent
and exits within ``_WATCH_SECONDS`` of its end, however it ended.

The first Ctrl-C always ends a run at once. The main thread feeds each
worker through a pipe of its own and waits on those pipes itself: no lock,
queue or helper thread is shared with a worker, so stopping them is a
SIGKILL and a reap, which nothing a worker holds can delay (a
``multiprocessing.Pool``'s ``terminate`` takes the task queue's
cross-process read lock and joins its feeder thread, both of which a worker
or a full pipe can hold up). While workers are spawned, SIGINT is blocked
and deferred rather than ignored: they must start with Ctrl-C ignored, and
an ignored signal is discarded by the kernel, so a ``SIG_IGN`` around the
start-up lost a Ctrl-C arriving then and the run went on to its end.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import json
import multiprocessing
import multiprocessing.connection as mp_connection
import multiprocessing.resource_tracker as resource_tracker
import os
import pickle
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._config import default_num_threads
from .._io import atomic_path, atomic_write_text

__all__ = ["IMAGE_SUFFIXES", "FolderInUse", "OutputFolder", "ResultsExist", "Unit"]

IMAGE_SUFFIXES = (".png", ".tif", ".tiff", ".jpg", ".jpeg", ".bmp")

MANIFEST = "restore-evaluate.json"
PARTIAL = "results.partial.csv"
LOCK = ".restore-evaluate.lock"
#: Names an evaluation may write; a file of one of these names that the manifest does not list is the user's.
OUTPUT_NAMES = ("results.csv", "table.md", "psnr.png", PARTIAL, MANIFEST)
_WRITTEN_BY = "restore evaluate"
_WATCH_SECONDS = 0.5  # how often a worker checks that its parent is alive (it exits within this time)
_JOIN_SECONDS = 5.0  # seconds to reap a worker after its SIGKILL (a bound, should the kernel be slow)
_UNWRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)  # the file system refuses to write: one clear line


class FolderInUse(RuntimeError):
    """Another evaluation is writing into the output folder."""


class ResultsExist(FileExistsError):
    """The output folder holds another run's results, which only ``force`` replaces.

    The message speaks to Python and the command line alike ("the force
    option"); ``folder``, ``problem`` and ``action`` let a front end phrase
    its own, e.g. ``f"{folder!r} {problem}: add --force to {action}"``.
    """

    def __init__(self, folder: Path, problem: str, action: str) -> None:
        super().__init__(f"{str(folder)!r} {problem}: choose another folder, or use the force option to {action}")
        self.folder, self.problem, self.action = folder, problem, action


@dataclass(frozen=True)
class Unit:
    """An independent piece of work: ``func(*args)`` returns rows (dicts); ``rows`` are their keys."""

    key: tuple
    func: Callable[..., list[dict]]
    args: tuple
    rows: frozenset


# ---------------------------------------------------------------------------
# The output folder
# ---------------------------------------------------------------------------


class OutputFolder:
    """The output folder of one evaluation, as a context manager holding its lock.

    Parameters
    ----------
    out : path
        The folder; created if missing.
    config : dict
        What the run computes (JSON-serialisable); an interrupted run is
        resumed only with the same configuration.
    force : bool
        Replace the results of a previous run (only the files it wrote).
    input_dir : path
        The input folder, which the output folder may not be or lie in.
    """

    def __init__(self, out: str | os.PathLike, config: Mapping[str, Any], *, force: bool,
                 input_dir: str | os.PathLike) -> None:
        self.out = Path(out)
        self.config = json.loads(json.dumps(dict(config)))  # as it reads back from the manifest
        self.force = bool(force)
        self.input_dir = Path(input_dir)
        self._lock: Any = None
        self._files: list[str] = []

    # -- set up --------------------------------------------------------------

    def __enter__(self) -> OutputFolder:
        out = self.out
        if out.exists() and not out.is_dir():
            raise ValueError(f"out_dir {str(out)!r} exists and is not a folder")
        resolved, inputs = out.resolve(), self.input_dir.resolve()
        if resolved == inputs or inputs in resolved.parents:
            raise ValueError(f"out_dir {str(out)!r} must not be the image folder or inside it")
        created = [p for p in (out, *out.parents) if not p.exists()][::-1]  # what mkdir makes, outermost first
        try:
            out.mkdir(parents=True, exist_ok=True)
            self._lock = _FolderLock(out / LOCK)
            if not self._lock.acquire():
                self._lock = None
                raise FolderInUse(f"another restore evaluate is writing into {str(out)!r}: wait for it to finish "
                                  "or choose another output folder")
            self._claim()
        except BaseException as exc:
            # a refusal leaves the folder as it was: no lock file, and no folder where there was none
            self._release()
            for folder in reversed(created):
                try:
                    folder.rmdir()
                except OSError:
                    break
            if isinstance(exc, OSError) and exc.errno in _UNWRITABLE:
                raise _unwritable(out, exc, created=bool(created)) from None
            raise
        return self

    def _claim(self) -> None:
        manifest = self._read_manifest()
        owned = set(manifest.get("files", [])) if manifest else set()
        for name in OUTPUT_NAMES:
            if (self.out / name).exists() and name not in owned:
                raise FileExistsError(f"{str(self.out / name)!r} was not written by restore evaluate: move it "
                                      "away or choose another folder")
        if manifest and self.force:
            for name in owned:
                if name in OUTPUT_NAMES and name != MANIFEST:
                    (self.out / name).unlink(missing_ok=True)
        elif manifest and manifest.get("finished"):
            raise ResultsExist(self.out, "already holds evaluation results", "replace them")
        elif manifest and manifest.get("config") != self.config:
            raise ResultsExist(self.out, "holds an interrupted run with another configuration (run it again with "
                               "its own settings to resume it)", "start again")
        keep = owned if manifest and not self.force else set()
        self._files = sorted(keep | {MANIFEST})
        self._write_manifest(finished=False)

    def _read_manifest(self) -> dict | None:
        path = self.out / MANIFEST
        if not path.exists():
            return None
        try:
            manifest = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            manifest = None
        if not isinstance(manifest, dict) or manifest.get("written_by") != _WRITTEN_BY:
            raise FileExistsError(f"{str(path)!r} was not written by restore evaluate: move it away or choose "
                                  "another folder")
        return manifest

    def _write_manifest(self, finished: bool) -> None:
        atomic_write_text(self.out / MANIFEST, json.dumps(
            {"written_by": _WRITTEN_BY, "finished": finished, "files": self._files, "config": self.config},
            indent=2) + "\n")

    def _own(self, name: str) -> Path:
        """Record ``name`` as ours before it is written (a crash then leaves it ours)."""
        if name not in self._files:
            self._files = sorted({*self._files, name})
            self._write_manifest(finished=False)
        return self.out / name

    def __exit__(self, *exc: object) -> None:
        self._release()

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None


    # -- writing -------------------------------------------------------------

    def write_text(self, name: str, text: str) -> None:
        """Write one of our files atomically."""
        atomic_write_text(self._own(name), text)

    def atomic_path(self, name: str):
        """A temporary path that replaces our file ``name`` when the ``with`` block succeeds."""
        return atomic_path(self._own(name))

    def finish(self) -> None:
        """Mark the run complete and remove the partial results."""
        (self.out / PARTIAL).unlink(missing_ok=True)
        self._files = [f for f in self._files if f != PARTIAL]
        self._write_manifest(finished=True)

    # -- running -------------------------------------------------------------

    def run(self, units: Sequence[Unit], row_key: Callable[[dict], tuple], columns: Sequence[str],
            types: Mapping[str, type], progress: bool | Callable[[int, int], None], n_jobs: int | None,
            scheduler: str | None) -> list[dict]:
        """Run the units not finished before; return the rows of every unit, each once.

        ``row_key(row)`` is the configuration of a row; ``types`` converts
        the CSV's text of the typed columns back.
        """
        path = self._own(PARTIAL)
        found = _read_partial(path, columns, types, row_key)
        done = [u for u in units if u.rows <= found.keys()]
        todo = [u for u in units if not u.rows <= found.keys()]
        rows = [found[k] for u in done for k in sorted(u.rows)]
        report = _Progress(progress, len(units), len(done))
        try:
            with open(path, "a", newline="") as fh:
                writer = csv.DictWriter(fh, fieldnames=list(columns), lineterminator="\n")
                if fh.tell() == 0:
                    writer.writeheader()
                results = _execute([(u.func, u.args) for u in todo], n_jobs, scheduler)
                with contextlib.closing(results):  # an exception here stops the workers now, not when collected
                    for unit_rows in results:
                        writer.writerows(unit_rows)
                        fh.flush()
                        os.fsync(fh.fileno())
                        rows.extend(unit_rows)
                        report()
        finally:
            report.close()
        return rows


def _unwritable(out: Path, exc: OSError, created: bool) -> PermissionError:
    """One line naming the folder and what to do, for a folder the file system will not let us write."""
    why = "its file system is read-only" if exc.errno == errno.EROFS else "permission denied"
    err = PermissionError(f"cannot {'create' if created else 'write into'} the output folder {str(out)!r} "
                          f"({why}): choose a folder you can write to")
    err.errno = exc.errno
    return err


class _FolderLock:
    """One run at a time per folder: an OS lock on a lock file, which is removed when the lock is released.

    The lock (``flock``) dies with its process, however it dies. The file is
    removed while it is still locked, and a run that locks a file checks that
    its name still leads to it (else another run removed it meanwhile, and it
    tries again), so two runs never both hold it. Where ``fcntl`` is missing
    (Windows), :mod:`filelock` locks the file and removes it on release.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._other: Any = None

    def acquire(self) -> bool:
        """Lock without waiting; False when another run holds the lock (nothing created then)."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            from filelock import FileLock, Timeout

            self._other = FileLock(self.path, timeout=0)
            try:
                self._other.acquire()
            except Timeout:
                self._other = None
                return False
            return True
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                ours = os.fstat(fd)
                try:
                    named = os.stat(self.path)
                except FileNotFoundError:
                    named = None
            except BlockingIOError:
                os.close(fd)
                return False
            except BaseException:
                os.close(fd)
                raise
            if named is not None and (named.st_dev, named.st_ino) == (ours.st_dev, ours.st_ino):
                self._fd = fd
                return True
            os.close(fd)  # the run that held it removed it as we opened it: lock the new one

    def release(self) -> None:
        """Remove the lock file, then unlock."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            os.close(self._fd)
            self._fd = None
        if self._other is not None:  # pragma: no cover - Windows
            self._other.release()
            with contextlib.suppress(OSError):
                self.path.unlink()
            self._other = None


def _read_partial(path: Path, columns: Sequence[str], types: Mapping[str, type],
                  row_key: Callable[[dict], tuple]) -> dict[tuple, dict]:
    """Rows of the partial results by configuration (the last of duplicates); a torn last line is cut off."""
    if not path.exists():
        return {}
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    if end < len(data):  # killed while writing: drop the incomplete line, so appends start on a fresh line
        os.truncate(path, end)
    found: dict[tuple, dict] = {}
    reader = csv.DictReader(io.StringIO(data[:end].decode("utf-8", errors="replace")))
    if reader.fieldnames is None or list(reader.fieldnames) != list(columns):
        os.truncate(path, 0)  # no usable header: start the file again
        return {}
    for raw in reader:
        if None in raw or any(v is None for v in raw.values()):
            continue
        try:
            row = {k: types[k](v) if k in types else v for k, v in raw.items()}
        except ValueError:
            continue
        found[row_key(row)] = row
    return found


# ---------------------------------------------------------------------------
# Execution: inline, local processes or Dask
# ---------------------------------------------------------------------------


def _worker_main(conn: Any) -> None:
    """A worker process: runs one unit at a time on one core, ignores Ctrl-C and dies with its parent.

    It says ``ready``, then answers each task ``(function, args)`` with
    ``("done", rows)`` or ``("error", exception, traceback text)``, until
    its pipe closes or brings ``None``.
    """
    # Ctrl-C was blocked by the parent for the spawn (and so is here): ignoring it discards one pending
    # since, so that a terminal's Ctrl-C reaching the whole group prints no traceback from a worker
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _sigmask(signal.SIG_UNBLOCK)
    from threadpoolctl import threadpool_limits

    os.environ["RESTORE_NUM_THREADS"] = "1"
    threadpool_limits(1)
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(_WATCH_SECONDS)
            if os.getppid() != parent:  # the parent is gone (re-parented to init or a subreaper)
                os._exit(1)

    threading.Thread(target=watch, daemon=True, name="restore-watch-parent").start()
    try:
        conn.send(("ready",))
        while (task := conn.recv()) is not None:
            func, args = task
            try:
                rows = func(*args)
            except Exception as exc:  # noqa: BLE001 - sent to the main process, which raises it
                conn.send_bytes(_pickled(("error", _sendable(exc), traceback.format_exc())))
                continue
            try:  # pickled here, so that a failure to pickle is told apart from a closed pipe
                message = _pickled(("done", rows))
            except Exception as exc:  # noqa: BLE001 - whatever pickling raises, the rows cannot be sent
                error = RuntimeError(f"a unit's result could not be sent to the main process: "
                                     f"{type(exc).__name__}: {exc}")
                message = _pickled(("error", error, traceback.format_exc()))
            conn.send_bytes(message)
    except (EOFError, OSError):  # the main process closed the pipe or died: nothing left to do
        pass


def _pickled(message: tuple) -> bytes:
    """``message`` as ``Connection.send`` pickles it (``recv`` reads it back)."""
    from multiprocessing.reduction import ForkingPickler

    return bytes(ForkingPickler.dumps(message))


def _sendable(exc: Exception) -> Exception:
    """``exc`` if it comes back whole from pickling, else a RuntimeError naming its type and message.

    An exception can pickle and still not unpickle (one whose ``__init__``
    takes other arguments than its message): the main process would then
    raise the unpickling's TypeError instead of the unit's error.
    """
    try:
        pickle.loads(_pickled((exc,)))
    except Exception:  # noqa: BLE001 - any failure of the round trip: send what can be sent
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


@contextlib.contextmanager
def _sigint_deferred() -> Iterator[None]:
    """Hold Ctrl-C back while processes are spawned, and raise it afterwards: never lose it.

    SIGINT is blocked in this thread, so the spawned interpreters start with
    it blocked (the mask is inherited across fork and exec) until they
    ignore it; in the main thread a SIGINT handled meanwhile (it may reach
    another thread) is recorded and raised as KeyboardInterrupt at the end.
    Ignoring SIGINT instead (``SIG_IGN``) would make the kernel discard one
    that arrives during the spawn: the run would go on as if never
    interrupted.
    """
    caught: list[int] = []
    previous = signal.getsignal(signal.SIGINT) if _main_thread() else None

    def record(signum: int, frame: Any) -> None:
        caught.append(signum)

    if previous is not None:  # None: a handler not set from Python, which Python could not put back
        signal.signal(signal.SIGINT, record)
    blocked = _sigmask(signal.SIG_BLOCK)
    try:
        yield
    finally:
        if not blocked:
            _sigmask(signal.SIG_UNBLOCK)  # a SIGINT pending on this thread is recorded now
        # put back unless replaced meanwhile (the command's SIGTERM handler sets the one of its cleanup)
        if previous is not None and signal.getsignal(signal.SIGINT) is record:
            signal.signal(signal.SIGINT, previous)
            if caught and callable(previous):
                previous(signal.SIGINT, None)  # Python's default handler raises KeyboardInterrupt
            elif caught and previous == signal.SIG_DFL:
                raise KeyboardInterrupt


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _sigmask(how: int) -> bool:
    """Block or unblock SIGINT in this thread; whether it was blocked before (no signal masks on Windows)."""
    if not hasattr(signal, "pthread_sigmask"):  # pragma: no cover - Windows: spawned processes inherit no mask
        return False
    return signal.SIGINT in signal.pthread_sigmask(how, {signal.SIGINT})


def _execute(tasks: list[tuple], n_jobs: int | None, scheduler: str | None) -> Iterator[list[dict]]:
    """Run ``(function, args)`` tasks on Dask, in local processes or inline; yield results as they finish."""
    if not tasks:
        return
    if scheduler is not None:
        yield from _execute_dask(tasks, scheduler)
        return
    n_jobs = default_num_threads() if n_jobs is None else n_jobs
    if n_jobs == 1:
        for f, a in tasks:
            yield f(*a)
        return
    yield from _execute_local(tasks, min(n_jobs, len(tasks)))


def _execute_local(tasks: list[tuple], n_workers: int) -> Iterator[list[dict]]:
    """Run tasks in ``n_workers`` spawned processes, each fed through its own pipe by this thread.

    No lock, queue or helper thread is shared with the workers, so stopping
    them cannot wait on one a worker holds: on any exception (Ctrl-C, an
    error, the consumer closing this generator) they are killed at once.
    """
    ctx = multiprocessing.get_context("spawn")
    procs: list[Any] = []
    conns: dict[Any, Any] = {}  # our end of each worker's pipe -> its process
    try:
        # started first: its launch unblocks SIGINT in this thread (multiprocessing.resource_tracker)
        if hasattr(resource_tracker, "ensure_running") and os.name == "posix":
            resource_tracker.ensure_running()
        with _sigint_deferred():
            for _ in range(n_workers):
                ours, theirs = ctx.Pipe(duplex=True)
                proc = ctx.Process(target=_worker_main, args=(theirs,), daemon=True, name="restore-evaluate")
                procs.append(proc)
                conns[ours] = proc
                _sigmask(signal.SIG_BLOCK)  # again, should the resource tracker have restarted
                proc.start()
                theirs.close()  # the worker holds the other end: its death reads as EOF here
        todo = iter(tasks)
        waiting = list(conns)  # the pipes of workers that have work or may get some
        started: set[Any] = set()  # the pipes of workers that said they are ready
        remaining = len(tasks)
        while remaining:
            for conn in mp_connection.wait(waiting):
                try:
                    message = conn.recv()
                except (EOFError, OSError):
                    proc = conns[conn]
                    proc.join(_JOIN_SECONDS)
                    doing = "running a unit" if conn in started else "starting"
                    raise RuntimeError(f"an evaluation worker process died (exit code {proc.exitcode}) while "
                                       f"{doing}: finished units are kept; run again to resume") from None
                started.add(conn)
                if message[0] == "error":
                    exc = message[1]
                    if hasattr(exc, "add_note"):  # Python 3.11+: the worker's traceback, under the main one
                        exc.add_note(f"in an evaluation worker process:\n{message[2]}")
                    raise exc
                if message[0] == "done":
                    remaining -= 1
                    yield message[1]
                task = next(todo, None)
                if task is not None:
                    conn.send(task)
                else:  # nothing left to hand out: this worker may go
                    waiting.remove(conn)
                    with contextlib.suppress(OSError):
                        conn.send(None)
        for conn in waiting:  # a worker still starting when the last unit finished: it has nothing to do
            with contextlib.suppress(OSError):
                conn.send(None)
    finally:
        _stop(procs, conns)


def _stop(procs: list[Any], conns: dict[Any, Any]) -> None:
    """Kill the workers still alive and reap them; close our pipes. Never waits on a worker's own steps.

    After the last unit too: a worker's results are in, and its interpreter's
    exit (seconds on a loaded machine) is nothing to wait for.
    """
    for proc in procs:
        if proc.pid is not None and proc.exitcode is None:
            with contextlib.suppress(OSError):
                proc.kill()  # SIGKILL: a unit's own handlers cannot delay it, and no lock is shared
    for proc in procs:
        if proc.pid is not None:
            proc.join(_JOIN_SECONDS)
    for conn in conns:
        conn.close()


def _execute_dask(tasks: list[tuple], scheduler: str) -> Iterable[list[dict]]:
    from dask.distributed import as_completed as dask_completed

    from .._stores import connect

    with connect(scheduler) as client:
        futures = [client.submit(f, *a, pure=False) for f, a in tasks]
        for fut in dask_completed(futures):
            yield fut.result()


class _Progress:
    """A tqdm bar or a ``progress(done, total)`` callback over the units."""

    def __init__(self, progress: bool | Callable[[int, int], None], total: int, initial: int) -> None:
        self.callback = progress if callable(progress) else None
        self.bar = None
        self.done = initial
        self.total = total
        if progress is True:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, initial=initial, unit="unit", desc="evaluate")
        elif self.callback:
            self.callback(self.done, self.total)

    def __call__(self) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.update(1)
        if self.callback:
            self.callback(self.done, self.total)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
