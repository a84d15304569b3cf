"""Progress reports and cancellation of long computations, shared by every job."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["BlockSteps", "Cancelled", "ProgressCallback", "Steps", "stop_check", "stopped_by"]

ProgressCallback = Callable[[int, int], None]
"""``progress(done, total)``: called after each step; it may raise :class:`Cancelled` to stop."""


class Cancelled(Exception):  # noqa: N818 - reads as what happened
    """Raised by a progress callback to stop a long computation between steps."""


class Steps:
    """Counts the steps of a computation whose total is known up front and reports each one.

    Parameters
    ----------
    progress : callable or None
        ``progress(done, total)``, called after every step (and once with
        ``done = 0`` when ``start`` is true); None reports nothing.
    total : int
        Number of steps.
    """

    def __init__(self, progress: ProgressCallback | None, total: int, *, start: bool = False) -> None:
        self.progress = progress
        self.total = max(int(total), 1)
        self.done = 0
        if start and progress is not None:
            progress(0, self.total)

    def __call__(self, n: int = 1) -> None:
        """Count ``n`` more steps as done and report."""
        self.done = min(self.done + n, self.total)
        if self.progress is not None:
            self.progress(self.done, self.total)

    def tick(self) -> None:
        """Report again without counting a step: a chance to cancel inside a long step."""
        if self.progress is not None:
            self.progress(self.done, self.total)

    def callback(self, n_steps: int) -> ProgressCallback | None:
        """A callback for a sub-computation of ``n_steps`` of our steps, reporting ``(done, total)`` of its own."""
        if self.progress is None:
            return None
        offset = self.done

        def report(done: int, total: int) -> None:
            self.done = min(offset + int(round(n_steps * done / max(total, 1))), self.total)
            self.progress(self.done, self.total)

        return report


_this_thread = threading.local()


def stopped_by(event: threading.Event) -> None:
    """A pool's initializer: computations on this thread stop at their next step once ``event`` is set.

    For work that runs on our own threads with no progress callback of its
    own (the blocks of a lazy array computed by Dask's threads): see
    :func:`stop_check`.
    """
    _this_thread.stop = event


def stop_check() -> ProgressCallback | None:
    """A progress callback that raises :class:`Cancelled` once this thread's event is set (:func:`stopped_by`).

    None on a thread without one: other callers' threads never stop.
    """
    event = getattr(_this_thread, "stop", None)
    if event is None:
        return None

    def check(done: int, total: int) -> None:
        if event.is_set():
            raise Cancelled

    return check


# Progress steps of each block of a BlockSteps: its own steps, whatever their number, count as this many
_STEPS_PER_BLOCK = 100


class BlockSteps:
    """Progress of blocks computed at once on several threads: each block's own steps as its share of the whole.

    ``progress(done, total)`` is called under a lock, from the blocks'
    threads, never backwards. Once a block failed or ``progress`` raised
    (:class:`Cancelled`), every block raises :class:`Cancelled` at its next
    step without calling it again.
    """

    def __init__(self, progress: ProgressCallback | None) -> None:
        self.progress, self.total, self.finished, self.shown = progress, 1, 0, 0
        self.parts: dict[int, int] = {}  # steps done by each block running
        self.ids = itertools.count()
        self.lock = threading.Condition()
        self.stopped = False
        self.first: BaseException | None = None  # the first failure, until stop_and_wait takes it

    def start(self, n_blocks: int) -> None:
        self.total = _STEPS_PER_BLOCK * n_blocks
        self.report()

    def report(self) -> None:
        """Report the blocks finished and the steps of those running."""
        self._report(None, 0)

    def _fail(self, exc: BaseException) -> None:  # under the lock
        self.stopped = True
        if self.first is None:
            self.first = exc

    def _report(self, key: int | None, steps: int) -> None:
        with self.lock:
            if self.stopped:
                raise Cancelled
            if key is not None:
                self.parts[key] = steps
            self.shown = max(self.shown, min(_STEPS_PER_BLOCK * self.finished + sum(self.parts.values()), self.total))
            if self.progress is not None:
                try:
                    self.progress(self.shown, self.total)
                except BaseException as exc:
                    self._fail(exc)
                    raise

    @contextmanager
    def block(self) -> Iterator[ProgressCallback]:
        """``with steps.block() as report``: the progress callback of one block, counted finished at the end."""
        with self.lock:
            if self.stopped:
                raise Cancelled
            key = next(self.ids)
            self.parts[key] = 0
        try:
            yield lambda done, total: self._report(key, _STEPS_PER_BLOCK * min(done, total) // max(total, 1))
        except BaseException as exc:
            with self.lock:
                self._fail(exc)
            raise
        finally:
            with self.lock:
                del self.parts[key]
                self.finished += 1
                self.lock.notify_all()

    def stop_and_wait(self) -> BaseException | None:
        """Stop every block at its next step, wait until none runs; the first failure (forgotten here)."""
        with self.lock:
            self.stopped = True
            self.lock.wait_for(lambda: not self.parts)
            first, self.first = self.first, None  # it holds this object through its traceback: let both go
            return first
