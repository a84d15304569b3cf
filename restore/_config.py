"""Numba compilation flags and threading defaults, in one place.

Every kernel of :mod:`restore._core` is decorated with ``njit(**JIT)``; a test
checks it. ``cache=True`` keeps the first call cheap after the first run,
``nogil=True`` lets GUI worker threads and the column thread pool run kernels
concurrently, and ``fastmath`` stays off so that the prox kernels reproduce
SPAMS to 1e-9.
"""

from __future__ import annotations

import os

JIT: dict = {"cache": True, "nogil": True, "fastmath": False, "error_model": "numpy"}

#: The tree of a dictionary's atoms unless told otherwise: 1 + 10 + 30 + 90 = 131 atoms, the shipped
#: dictionary's (more leaves than the paper's (10, 2, 2) keep textures under random pixel loss).
DEFAULT_BRANCHING: tuple[int, ...] = (10, 3, 3)

#: lam of the codes of centred, unit-norm signals, unless told otherwise (estimator and learn_dictionary).
DEFAULT_CODE_LAM = 0.1

#: Signals coded together by sparse_encode and transform: memory O(batch * (atoms + features)), about 40 MB
#: for 131 atoms of 64 features, and batches large enough that matrix products dominate Python's overhead.
CODING_BATCH = 4096


def default_num_threads() -> int:
    """Return the number of worker threads used for batched kernels.

    Reads ``RESTORE_NUM_THREADS`` when set, else the number of CPUs available
    to this process.
    """
    env = os.environ.get("RESTORE_NUM_THREADS")
    if env:
        n = int(env)
        if n < 1:
            raise ValueError(f"RESTORE_NUM_THREADS must be >= 1, got {env!r}")
        return n
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)
