"""Progress reports and cancellation of long computations, shared by every job."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["Cancelled", "ProgressCallback", "Steps"]

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
