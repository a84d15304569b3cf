"""What the benchmarks that drive napari share: waiting on Qt's event loop."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

#: Seconds between two turns of Qt's event loop while waiting: short beside the answers timed (tenths of a second).
POLL_S = 0.002


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
