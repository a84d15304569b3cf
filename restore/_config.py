"""Numba compilation flags and threading defaults, in one place.

Every kernel of :mod:`restore._core` is decorated with ``njit(**JIT)``, and
the small private helpers of kernels with ``njit(**JIT_INLINE)``; a test
checks it. ``cache=True`` keeps the first call cheap after the first run,
``nogil=True`` lets GUI worker threads and the column thread pool run kernels
concurrently, and ``fastmath`` stays off so that the prox kernels reproduce
SPAMS to 1e-9. ``no_cfunc_wrapper`` skips the C-callable wrapper numba
otherwise lowers for every compiled signature: it serves only kernels used
as first-class function values (none here; kernels call each other
directly), and lowering it adds to every first call's compile time
(``benchmarks/bench_first_call.py`` measures it).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

JIT: dict = {"cache": True, "nogil": True, "fastmath": False, "error_model": "numpy", "no_cfunc_wrapper": True}

#: The flags of a kernel's small helpers: inlined into each caller by numba (``inline="always"``), not compiled,
#: optimised and linked as kernels of their own, which every first call pays for (benchmarks/bench_first_call.py).
#: Private, beside their callers: the on-disk cache of a caller sees a change to its own file only.
JIT_INLINE: dict = {**JIT, "inline": "always"}

#: The tree of a dictionary's atoms unless told otherwise: 1 + 10 + 30 + 90 = 131 atoms, the shipped
#: dictionary's (more leaves than the paper's (10, 2, 2) keep textures under random pixel loss).
DEFAULT_BRANCHING: tuple[int, ...] = (10, 3, 3)

#: lam of the codes of centred, unit-norm signals, unless told otherwise (estimator and learn_dictionary).
DEFAULT_CODE_LAM = 0.1

#: The noise models of denoise_wavelet_tree and of the evaluations: white Gaussian, and photon (Poisson) noise
#: plus Gaussian read noise.
NOISE_MODELS: tuple[str, ...] = ("gaussian", "poisson-gaussian")

#: What the denoisers and :func:`restore.estimate_noise` accept as ``noise``: a model, or ``"auto"`` (the image's
#: noise-level function chooses between them).
NOISE_CHOICES: tuple[str, ...] = ("auto",) + NOISE_MODELS

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


_T = TypeVar("_T")

_blas_lock = threading.Lock()
_blas_users = 0  # callers inside single_threaded_blas, over all threads
_blas_limiter = None  # threadpoolctl's limiter while there are some: it restores the count the last one found


@contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Run NumPy's BLAS on one thread inside the block (for code that runs its own threads, or small products).

    OpenBLAS's thread count is one setting for the whole process: the
    first caller (of any thread) sets it to 1, the last one out restores
    what the first found, so overlapping calls from several threads do not
    leave it at 1 or restore it under another's feet. OpenBLAS's threads
    wait for work by spinning, which beside other busy processes costs many
    times the work of a small product (a FISTA iteration's); see
    ``benchmarks/bench_load.py``. The limit holds for the whole process
    (other threads' NumPy too) while a block is open, and reaches only the
    BLAS libraries loaded when the first block opened.
    """
    global _blas_users, _blas_limiter
    with _blas_lock:
        if _blas_users == 0:
            from threadpoolctl import threadpool_limits

            _blas_limiter = _from_any_thread(lambda: threadpool_limits(1, user_api="blas"))
        _blas_users += 1
    try:
        yield
    finally:
        with _blas_lock:
            _blas_users -= 1
            if _blas_users == 0:
                _from_any_thread(_blas_limiter.restore_original_limits)
                _blas_limiter = None


def _from_any_thread(change: Callable[[], _T]) -> _T:
    """``change()`` of OpenBLAS's thread count, the right to make it given up at once for the next caller.

    threadpoolctl (3.8 on) lets one thread at a time set a pthreads
    OpenBLAS's count, and only its context managers give that right up:
    our blocks, counted over every thread, set it in one thread and may
    restore it in another, and the thread of a first call (the main one,
    say) kept the right, so that every later call from another thread
    (napari's workers, Dask's) silently left OpenBLAS's threads on. A
    right held before the change (a caller's own ``threadpool_limits``)
    stays with its holder; while a live thread keeps one outside any
    ``with`` block, this change does nothing, as threadpoolctl decides.
    """
    import threadpoolctl

    controller = getattr(threadpoolctl, "OpenBLASController", None)
    state = getattr(controller, "_SHARED_STATE", None)  # threadpoolctl 3.8 on
    before = getattr(state, "controlling_thread", None)
    try:
        return change()
    finally:
        # the right is given up if this change took it (free, or its holder gone): a right held before stays
        if state is not None and (before is None or not before.is_alive()):
            controller.clear_controlling_thread()
