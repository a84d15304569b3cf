"""What the benchmarks that drive napari share: waiting on Qt's event loop."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

#: Seconds between two turns of Qt's event loop while waiting: short beside the answers timed (tenths of a second).
POLL_S = 0.002


def show_view(app: Any, viewer: Any, camera: Any, zoom: float | None, centre: tuple[float, float]) -> None:
    """The viewer's whole view (``zoom`` None), or ``zoom`` around ``centre``; its redraw let settle (0.2 s)."""
    viewer.reset_view()
    if zoom is not None:
        camera.zoom = zoom
        camera.center = centre
    for _ in range(20):
        app.processEvents()
        time.sleep(0.01)


def wait_until(app: Any, pred: Callable[[], bool], timeout: float = 600.0) -> float:
    """Process ``app``'s Qt events until ``pred()`` holds; return the seconds it took.

    Raises
    ------
    TimeoutError
        When ``pred()`` does not hold within ``timeout`` seconds.
    """
    t0 = time.perf_counter()
    while not pred():
        app.processEvents()
        time.sleep(POLL_S)
        if time.perf_counter() - t0 > timeout:
            raise TimeoutError
    return time.perf_counter() - t0
