"""The one job runner of the three widgets: a napari thread worker with progress, Cancel and notifications.

A *task* is a generator function ``task(control, *args)``. It yields
:class:`Progress` reports (or None, a heartbeat that lets the worker notice
Cancel) and :class:`Output` values, which the widget turns into layers as
they come, and returns a final value. It calls the library through
:meth:`Control.call`, which runs the call in a helper thread, turns the
library's ``progress(done, total)`` reports into :class:`Progress` and makes
the next report raise :class:`restore.Cancelled` once the job is cancelled.

Cancel therefore acts at once for the user: the job ends within one
heartbeat, nothing partial is added, and the library call stops at its next
report (under a second apart on a 4096 x 4096 plane).

:class:`Job` runs one task (in napari's thread worker, or synchronously when
``RESTORE_PLUGIN_SYNC`` is set); :class:`Runner` is the Run / Cancel /
progress / status block each widget shows, starting one :class:`Task` at a
time.
"""

from __future__ import annotations

import atexit
import queue
import threading
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

from magicgui.widgets import Container, Label, ProgressBar, PushButton

from ._common import error_message, run_sync

__all__ = [
    "Ahead",
    "Control",
    "Job",
    "Joined",
    "Output",
    "Progress",
    "Runner",
    "Task",
    "drive",
    "ensure_warm",
    "is_warm",
    "notify_error",
]

#: A task waiting on the library yields this often (s), so that the worker sees Cancel at once.
HEARTBEAT_S = 0.1
#: Progress reaches the GUI at most this often (s): some library stages report thousands of times a second.
REPORT_INTERVAL_S = 0.05
#: How long closing the viewer (or the interpreter) waits for a cancelled worker thread to end (s).
CLOSE_WAIT_S = 2.0
#: Resolution of the progress bars (steps from empty to full).
PROGRESS_STEPS = 1000


@dataclass(frozen=True)
class Progress:
    """How far the whole job is (``fraction`` in [0, 1]) and what it is doing."""

    fraction: float
    text: str = ""


@dataclass(frozen=True)
class Output:
    """A result ready before the job ends (one input layer of a batch): the widget adds it at once."""

    value: Any


class Control:
    """What a running task sees of its job: whether it is cancelled, and a bridge to the library's progress."""

    def __init__(self) -> None:
        self._cancelled = threading.Event()

    @property
    def cancelled(self) -> bool:
        """Whether the job was cancelled."""
        return self._cancelled.is_set()

    def cancel(self) -> None:
        """Cancel: the task stops at its next heartbeat, the library call at its next report."""
        self._cancelled.set()

    def check(self) -> None:
        """Raise :class:`restore.Cancelled` if the job was cancelled."""
        if self._cancelled.is_set():
            from restore import Cancelled

            raise Cancelled

    def call(self, fn: Callable[..., Any], /, *args: Any, span: tuple[float, float] = (0.0, 1.0), text: str = "",
             **kwargs: Any) -> Generator[Progress | None, None, Any]:
        """Run ``fn(*args, progress=..., **kwargs)``; yield its progress mapped onto ``span``; return its value.

        The call runs in a helper thread (named ``restore-call``) and this
        generator waits for it, yielding a heartbeat every ``HEARTBEAT_S``.
        When the job is cancelled the generator raises
        :class:`restore.Cancelled` at once and leaves the helper thread,
        whose next progress report raises :class:`restore.Cancelled` too.
        """
        return (yield from self.start(fn, *args, **kwargs).wait(span=span, text=text))

    def start(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Pending:
        """Start ``fn(*args, progress=..., **kwargs)`` in a helper thread; :meth:`Pending.wait` for it later.

        The task goes on meanwhile (for instance with a quick answer); the
        call stops at its next progress report once the job is cancelled.
        """
        self.check()
        return Pending(self, fn, args, kwargs)


class Pending:
    """A library call running beside its task (:meth:`Control.start`)."""

    def __init__(self, control: Control, fn: Callable[..., Any], args: tuple, kwargs: dict) -> None:
        self._control = control
        self._stopped = threading.Event()
        self._reports: queue.SimpleQueue = queue.SimpleQueue()
        self._box: dict[str, Any] = {}
        self._finished = object()
        if run_sync():  # debugging: everything in the calling thread, now
            def report(done: int, total: int) -> None:
                control.check()

            self._box["value"] = fn(*args, progress=report, **kwargs)
            self._reports.put(self._finished)
            return

        def progress(done: int, total: int) -> None:
            control.check()
            if self._stopped.is_set():
                from restore import Cancelled

                raise Cancelled
            self._reports.put((done, total))

        def work() -> None:
            try:
                self._box["value"] = fn(*args, progress=progress, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - handed to the generator
                self._box["error"] = exc
            finally:
                self._reports.put(self._finished)

        threading.Thread(target=work, name="restore-call", daemon=True).start()

    def stop(self) -> None:
        """Stop the call at its next progress report, without cancelling the job (its task failed, or ended)."""
        self._stopped.set()

    def wait(self, *, span: tuple[float, float] = (0.0, 1.0), text: str = "") -> Generator[Progress | None, None, Any]:
        """Wait for the call; yield its progress mapped onto ``span`` and a heartbeat every ``HEARTBEAT_S``."""
        control = self._control
        latest: tuple[int, int] | None = None
        shown = 0.0
        try:
            while True:
                try:
                    item = self._reports.get(timeout=HEARTBEAT_S)
                except queue.Empty:
                    item = None
                if item is self._finished:
                    break
                if item is not None:
                    latest = item
                control.check()
                now = time.monotonic()
                if now - shown >= REPORT_INTERVAL_S or item is None:
                    shown = now
                    yield _report(latest, span, text)
        except GeneratorExit:  # the worker dropped the task: stop the call as well
            control.cancel()
            raise
        return (yield from _outcome(self._box, span, text))


def _copied(exc: BaseException) -> BaseException:
    """A copy of ``exc`` without its traceback (``exc`` itself, if it cannot be copied)."""
    import copy

    try:
        return copy.copy(exc).with_traceback(None)
    except Exception:  # noqa: BLE001 - an exception type whose constructor wants other arguments
        return exc


def _report(latest: tuple[int, int] | None, span: tuple[float, float], text: str) -> Progress | None:
    """A call's latest ``(done, total)`` as its task's progress on ``span``; None (a heartbeat) before any."""
    if latest is None:
        return None
    f0, f1 = span
    return Progress(f0 + (f1 - f0) * min(1.0, latest[0] / max(latest[1], 1)), text)


def _outcome(box: dict[str, Any], span: tuple[float, float], text: str) -> Generator[Progress, None, Any]:
    """An ended call's value (its progress at the end of ``span``), or its error raised."""
    if "error" in box:
        raise box["error"]
    yield Progress(span[1], text)
    return box["value"]


class Ahead:
    """A library call started before any task needs it, in no job (no bar, no Cancel); tasks :meth:`join` it.

    The Denoise widget starts a layer's noise estimate once the layer is
    chosen, so that the first preview finds it done, or joins it where it
    is, instead of starting it again. A task that adopts it (Apply) owns it
    as a :class:`Pending`: cancelling the task ends the call at its next
    progress report. One that only waits for it (a preview, replaced at each
    pan or zoom) leaves it running for the next. :meth:`stop` ends it.
    """

    def __init__(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> None:
        self._stopped = threading.Event()
        self._done = threading.Event()
        self._latest: tuple[int, int] | None = None
        self._box: dict[str, Any] = {}
        self._owner: Control | None = None

        def progress(done: int, total: int) -> None:
            if self._owner is not None and self._owner.cancelled:  # the task that adopted it was cancelled
                self._stopped.set()
            if self._stopped.is_set():
                from restore import Cancelled

                raise Cancelled
            self._latest = (done, total)

        def work() -> None:
            try:
                self._box["value"] = fn(*args, progress=progress, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - handed to the tasks that join
                # without its traceback: kept in the widget's cache, its frames would keep the layer's data alive
                self._box["error"] = exc.with_traceback(None)
            finally:
                self._done.set()

        threading.Thread(target=work, name="restore-ahead", daemon=True).start()

    def stop(self) -> None:
        """End the call at its next progress report."""
        self._stopped.set()

    @property
    def joinable(self) -> bool:
        """Whether a task waiting for it gets its value or its own error (not stopped, not failed)."""
        return not self._stopped.is_set() and "error" not in self._box

    def value(self) -> Any:
        """Its value once it has ended well; None before, or if it failed or was stopped."""
        return self._box.get("value") if self._done.is_set() else None

    @property
    def adopted(self) -> bool:
        """Whether a task owns it (:meth:`join` with ``own``)."""
        return self._owner is not None

    def join(self, control: Control, *, own: bool = True, again: Callable[[], Pending] | None = None) -> Joined:
        """Wait for it in ``control``'s task as for a :class:`Pending`; with ``own``, the task adopts it.

        ``again``: a task that does not own it starts the call anew this way when its owner stopped it.
        """
        if own:
            self._owner = control
        return Joined(self, control, own, again)


class Joined:
    """A task's wait for an :class:`Ahead` (:meth:`Ahead.join`), with a :class:`Pending`'s ``wait`` and ``stop``."""

    def __init__(self, ahead: Ahead, control: Control, own: bool, again: Callable[[], Pending] | None) -> None:
        self._ahead, self._control, self._own, self._again = ahead, control, own, again

    def stop(self) -> None:
        """End the call if the task owns it."""
        if self._own:
            self._ahead.stop()

    def wait(self, *, span: tuple[float, float] = (0.0, 1.0), text: str = "") -> Generator[Progress | None, None, Any]:
        """Wait for the call; yield its progress mapped onto ``span`` and a heartbeat every ``HEARTBEAT_S``."""
        ahead = self._ahead
        try:
            while not ahead._done.wait(HEARTBEAT_S):  # noqa: SLF001 - the two classes are one mechanism
                self._control.check()
                yield _report(ahead._latest, span, text)  # noqa: SLF001
            self._control.check()
        except BaseException:  # cancelled, or dropped by the worker: an owned call ends with its task
            self.stop()
            raise
        from restore import Cancelled

        error = ahead._box.get("error")  # noqa: SLF001
        if not self._own and self._again is not None and isinstance(error, Cancelled):
            # stopped by the task that owned it (its Cancel), or by the widget, not by this one: its own call
            return (yield from self._again().wait(span=span, text=text))
        if error is not None:
            # a copy: raised, the kept one would take this task's frames (and their data) into the cache
            raise _copied(error)
        return (yield from _outcome(ahead._box, span, text))  # noqa: SLF001


def drive(gen: Iterator[Any]) -> tuple[list[Any], Any]:
    """Run a task's generator to its end in this thread: ``(everything it yielded, its return value)``."""
    seen = []
    while True:
        try:
            seen.append(next(gen))
        except StopIteration as stop:
            return seen, stop.value


# ---------------------------------------------------------------------------
# Jobs
# ---------------------------------------------------------------------------

#: Jobs whose worker thread may still be running: cancelled at interpreter exit.
_LIVE: set[Job] = set()
#: Whether a worker thread was ever started (then the exit waits for Qt's thread pool).
_STARTED: list[bool] = []


class Job:
    """One task run in napari's thread worker (or synchronously), with callbacks in the GUI thread.

    Parameters
    ----------
    task : callable
        A generator function ``task(control, *args)`` (see the module's docstring).
    *args
        Passed to ``task`` after its :class:`Control`.
    on_yield, on_return, on_error, on_abort, on_finish : callable, optional
        Called in the GUI thread with each yielded value, the returned value,
        the exception, nothing, nothing. ``on_finish`` comes last in every
        case. Errors default to :func:`notify_error`; a task that raises
        :class:`restore.Cancelled` counts as aborted.

    Notes
    -----
    Create the job, store it, then call :meth:`start`: with
    ``RESTORE_PLUGIN_SYNC`` the callbacks run before ``start`` returns.
    """

    def __init__(self, task: Callable[..., Iterator[Any]], *args: Any,
                 on_yield: Callable[[Any], None] | None = None,
                 on_return: Callable[[Any], None] | None = None,
                 on_error: Callable[[BaseException], None] | None = None,
                 on_abort: Callable[[], None] | None = None,
                 on_finish: Callable[[], None] | None = None) -> None:
        self._task = task
        self._args = args
        self._on_yield = on_yield
        self._on_return = on_return
        self._on_error = on_error or notify_error
        self._on_abort = on_abort
        self._on_finish = on_finish
        self.control = Control()
        self._worker: Any = None
        self._thread_done = threading.Event()
        self.started = False
        self.done = False
        self.outcome: str | None = None  # "returned", "errored" or "aborted"

    @property
    def running(self) -> bool:
        """Started and not finished (as far as the GUI knows)."""
        return self.started and not self.done

    def start(self) -> Job:
        """Start the job (in a thread unless ``RESTORE_PLUGIN_SYNC``); return self."""
        if self.started:
            raise RuntimeError("a job can be started only once")
        self.started = True
        if run_sync():
            self._run_sync()
        else:
            self._start_worker()
        return self

    def cancel(self) -> None:
        """Stop the job now: its callbacks report it aborted and its result is discarded."""
        if self.done:
            return
        self.control.cancel()
        if self._worker is not None:  # the worker ends within a heartbeat; the GUI need not wait for it
            self._worker.quit()
            self._aborted()
            self._finished()

    def wait(self, timeout: float) -> bool:
        """Wait (blocking) until the worker thread has ended; True if it has."""
        return self._thread_done.wait(timeout) if self.started and not run_sync() else True

    # -- synchronous -------------------------------------------------------

    def _run_sync(self) -> None:
        from restore import Cancelled

        gen = self._task(self.control, *self._args)
        try:
            while True:
                if self.control.cancelled:
                    gen.close()
                    self._aborted()
                    break
                self._yielded(next(gen))
        except StopIteration as stop:
            self._returned(stop.value)
        except Cancelled:
            self._aborted()
        except Exception as exc:  # noqa: BLE001 - every error becomes a notification
            self._errored(exc)
        self._thread_done.set()
        self._finished()

    # -- threaded ----------------------------------------------------------

    def _start_worker(self) -> None:
        from napari.qt.threading import create_worker
        from qtpy.QtCore import Qt

        task, control, args = self._task, self.control, self._args

        def body() -> Generator[Any, None, Any]:
            return (yield from task(control, *args))

        worker = create_worker(body, _start_thread=False, _ignore_errors=True)
        worker.yielded.connect(self._yielded)
        worker.returned.connect(self._returned)
        worker.errored.connect(self._errored)
        worker.aborted.connect(self._aborted)
        worker.finished.connect(self._finished)
        # run in the worker thread itself as it ends: closing the viewer can wait for it
        worker.finished.connect(self._thread_ended, Qt.ConnectionType.DirectConnection)
        self._worker = worker
        _LIVE.add(self)
        _STARTED[:] = [True]
        worker.start()  # after connecting (NAPARI.md, pitfall 2)

    def _thread_ended(self) -> None:  # in the worker thread
        self._thread_done.set()
        _LIVE.discard(self)

    # -- callbacks (GUI thread) --------------------------------------------

    def _yielded(self, value: Any) -> None:
        if self._on_yield is not None and not self.done and not self.control.cancelled:
            self._on_yield(value)

    def _returned(self, value: Any) -> None:
        if self.done or self.control.cancelled:  # cancelled after the last yield: discard all the same
            return
        self.outcome = "returned"
        if self._on_return is not None:
            self._on_return(value)

    def _errored(self, exc: BaseException) -> None:
        from restore import Cancelled

        if self.done:
            return
        if isinstance(exc, Cancelled) or self.control.cancelled:
            self._aborted()
            return
        self.outcome = "errored"
        self._on_error(exc)

    def _aborted(self) -> None:
        if self.done or self.outcome is not None:
            return
        self.outcome = "aborted"
        if self._on_abort is not None:
            self._on_abort()

    def _finished(self) -> None:
        if self.done:
            return
        self.done = True
        if self._on_finish is not None:
            self._on_finish()


@atexit.register
def _wait_for_workers() -> None:
    """At interpreter exit, stop the jobs still running and wait for their worker threads to end.

    A worker thread that emits a signal after Python has begun tearing Qt
    down aborts the process (PyQt): so a script that closes the viewer while
    a preview runs would crash on exit. The wait ends with Qt's thread pool
    being done, which covers a worker's last signals after our task ended.
    """
    if not _STARTED:
        return
    for job in list(_LIVE):
        job.control.cancel()
        if job._worker is not None:  # noqa: SLF001 - our own job
            job._worker.quit()  # noqa: SLF001
    from qtpy.QtCore import QThreadPool

    QThreadPool.globalInstance().waitForDone(int(CLOSE_WAIT_S * 1000))


def notify_error(exc: BaseException | str, prefix: str = "restore-tree") -> str:
    """Show an error as a napari notification (no traceback); return the message."""
    from napari.utils.notifications import show_error

    msg = exc if isinstance(exc, str) else error_message(exc)
    text = f"{prefix}: {msg}" if prefix else msg
    show_error(text)
    return text


# ---------------------------------------------------------------------------
# The Run / Cancel / progress / status block
# ---------------------------------------------------------------------------


@dataclass
class Task:
    """A job for the :class:`Runner`: the generator function, its arguments and what to do with the results.

    ``on_output`` receives each :class:`Output`'s value, ``on_return`` the
    task's return value (both in the GUI thread); ``text`` is the status
    shown while it runs.

    ``inputs`` are the layers the job reads and ``layers`` the viewer's
    layer list: removing an input from it cancels the job at once, saying
    so (its result could no longer go beside its input).
    """

    func: Callable[..., Iterator[Any]]
    args: tuple[Any, ...] = ()
    text: str = "Working\u2026"
    on_output: Callable[[Any], None] | None = None
    on_return: Callable[[Any], None] | None = None
    done_text: Callable[[], str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    inputs: tuple[Any, ...] = ()
    layers: Any = None


def status_label() -> Label:
    """A Label for status messages: full width, wrapping long text."""
    from qtpy.QtWidgets import QSizePolicy

    label = Label(value="")
    label.native.setWordWrap(True)
    label.native.setMinimumWidth(240)
    label.native.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
    return label


class Runner(Container):
    """Run and Cancel buttons, a progress bar and a status line; runs one :class:`Task` at a time.

    Parameters
    ----------
    run_text, run_tooltip : str
        The Run button's text and tooltip.
    on_run : callable
        Called (no argument) when Run is pressed; the widget builds a
        :class:`Task` and calls :meth:`start`.
    extra : list of Widget, optional
        More buttons for the same row (Compare).
    """

    def __init__(self, run_text: str, run_tooltip: str, on_run: Callable[[], Any],
                 extra: list[Any] | None = None) -> None:
        super().__init__(labels=False)
        self.margins = (0, 0, 0, 0)
        self.run_button = PushButton(text=run_text, tooltip=run_tooltip)
        self.cancel_button = PushButton(text="Cancel", enabled=False,
                                        tooltip="Stop now: nothing partial is added (results already shown stay)")
        row = Container(widgets=[self.run_button, self.cancel_button, *(extra or [])], layout="horizontal",
                        labels=False)
        row.margins = (0, 0, 0, 0)
        self.progress = ProgressBar(value=0, min=0, max=PROGRESS_STEPS, visible=False,
                                    tooltip="Progress of the whole job")
        self.status = status_label()
        self.extend([row, self.progress, self.status])
        self.job: Job | None = None
        self.closed = False
        self._abort_text = ""
        self._unwatch: Callable[[], None] | None = None
        self.run_button.changed.connect(lambda *_: on_run())
        self.cancel_button.changed.connect(lambda *_: self.cancel())

    @property
    def busy(self) -> bool:
        """Whether a job is running."""
        return self.job is not None and self.job.running

    def start(self, task: Task) -> Job | None:
        """Run ``task`` in the background, unless a job is already running."""
        if self.busy or self.closed:
            return None
        self.progress.value = 0
        self.progress.visible = True
        self.run_button.enabled = False
        self.cancel_button.enabled = True
        self.status.value = task.text
        self._abort_text = ""
        job = Job(task.func, *task.args, on_yield=lambda v: self._on_yield(task, v),
                  on_return=lambda v: self._on_return(task, v), on_error=self.show_error,
                  on_abort=self._on_abort, on_finish=self._on_finish)
        self.job = job
        self._watch_inputs(task, job)
        job.start()
        return job

    def cancel(self, reason: str = "") -> None:
        """Stop the running job now; ``reason`` (if any) replaces the status's "nothing partial was added"."""
        if self.busy:
            self._abort_text = reason
            self.job.cancel()

    def _watch_inputs(self, task: Task, job: Job) -> None:
        """Cancel ``job`` when one of the task's inputs leaves the viewer's layer list (until the job ends).

        The job is cancelled as the removal begins, before napari's own work
        on it (a few tenths of a second, more beside a busy worker); the
        message is set again once the removal is done, after the widgets
        have updated their layer boxes and status.
        """
        if task.layers is None or not task.inputs:
            return
        layers = task.layers
        ids = {layer.unique_id for layer in task.inputs}  # not ``is``: widgets may hold napari's layer proxies

        def removing(event: Any) -> None:
            layer = layers[event.index]
            if not (self.job is job and job.running and getattr(layer, "unique_id", None) in ids):
                return
            text = f"Cancelled: the input layer {layer.name!r} was removed."

            def removed(_event: Any) -> None:
                layers.events.removed.disconnect(removed)
                if not self.closed and self.job is job:
                    self.status.value = text

            layers.events.removed.connect(removed, position="last")
            self.cancel(text)
            self._notify_later(f"restore-tree: {text}")

        layers.events.removing.connect(removing, position="first")
        self._unwatch = lambda: layers.events.removing.disconnect(removing)

    def _notify_later(self, text: str) -> None:
        """Notify ``text`` once the event loop runs again, unless the viewer is closing by then.

        napari's ``Viewer.close`` removes every layer before its window gets
        the Close event: a removal is only the user's doing if the window is
        still open after the call that removed the layer has returned.
        """
        from qtpy.QtCore import QTimer

        window = self.native.window()
        was_visible = window.isVisible()

        def decide() -> None:
            try:
                closing = was_visible and not window.isVisible()
            except RuntimeError:  # the window is already deleted
                closing = True
            if self.closed or closing:
                return
            from napari.utils.notifications import show_info

            show_info(text)

        QTimer.singleShot(0, decide)

    def shutdown(self) -> None:
        """The viewer closes: stop the job and wait (briefly) for its thread; touch no widget afterwards."""
        self.closed = True
        if self.job is not None and self.job.running:
            self.job.cancel()
        if self.job is not None:
            self.job.wait(CLOSE_WAIT_S)

    def show_error(self, exc: BaseException | str) -> None:
        """Notify the error and repeat it in the status line."""
        text = notify_error(exc)
        if not self.closed:
            self.status.value = text

    # -- job callbacks -----------------------------------------------------

    def _on_yield(self, task: Task, value: Any) -> None:
        if self.closed or value is None:
            return
        if isinstance(value, Output):
            if task.on_output is not None:
                self._guarded(task.on_output, value.value)
            return
        if isinstance(value, Progress):
            self.progress.value = int(round(PROGRESS_STEPS * min(max(value.fraction, 0.0), 1.0)))
            if value.text:
                self.status.value = value.text

    def _on_return(self, task: Task, value: Any) -> None:
        if self.closed:
            return
        if task.on_return is not None:
            self._guarded(task.on_return, value)
        if task.done_text is not None:
            self.status.value = task.done_text()

    def _guarded(self, fn: Callable[[Any], None], value: Any) -> None:
        try:
            fn(value)
        except Exception as exc:  # noqa: BLE001 - adding a layer may fail (e.g. the viewer changed): notify
            self.show_error(exc)

    def _on_abort(self) -> None:
        if not self.closed:
            self.status.value = self._abort_text or "Cancelled: nothing partial was added."

    def _on_finish(self) -> None:
        if self._unwatch is not None:
            unwatch, self._unwatch = self._unwatch, None
            unwatch()
        if not self.closed:
            self.reset()

    def reset(self) -> None:
        """Back to idle: Run enabled, Cancel disabled, no progress bar."""
        self.progress.visible = False
        self.run_button.enabled = True
        self.cancel_button.enabled = False


# ---------------------------------------------------------------------------
# First use: numba compilation in the background, once per process
# ---------------------------------------------------------------------------

_WARM: dict[str, bool] = {}
_WARMING: dict[str, tuple[Job, list[Callable[[], None]]]] = {}


def is_warm(key: str) -> bool:
    """Whether the warm-up ``key`` has finished in this process."""
    return _WARM.get(key, False)


def ensure_warm(key: str, task: Callable[..., Iterator[Any]], on_done: Callable[[], None] | None = None
                ) -> Job | None:
    """Run the warm-up task ``task(control)`` once per process, in the background.

    Returns the running job (``on_done`` is called when it finishes, even
    after an error, which is then notified), or None if it already ran (and
    ``on_done`` is not called).
    """
    if _WARM.get(key):
        return None
    if key in _WARMING:
        job, callbacks = _WARMING[key]
        if on_done is not None:
            callbacks.append(on_done)
        return job
    callbacks: list[Callable[[], None]] = [on_done] if on_done is not None else []

    def finish() -> None:
        _WARM[key] = True
        _, cbs = _WARMING.pop(key, (None, []))
        for cb in cbs:
            cb()

    job = Job(task, on_finish=finish)
    _WARMING[key] = (job, callbacks)
    job.start()
    return job
