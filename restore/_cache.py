"""What the library keeps from one call to the next: plans and trees per shape, bounded in bytes, and per call.

``functools.lru_cache`` bounds the number of entries, but a tree of a 1M-voxel
block holds about 90 MB, and the blocks of a chunked volume come in up to 27
shapes (interior, first and last along each axis): sixteen cached plans then
hold over a gigabyte. Every function decorated with :func:`lru_bytes` shares
one budget, :data:`CACHE_BYTES`: the most recent results are kept up to that
total. A result larger than the budget is kept while a caller holds it (the
threads of one call, or Dask blocks of one shape running at once, share it),
and the newest one for as long as a library call is open (:func:`call_scope`:
the blocks of a volume, one after the other), never after the last returns.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

__all__ = ["CACHE_BYTES", "call_scope", "lru_bytes", "nbytes", "on_scope_close"]

#: Bytes of plans and trees kept for reuse by the whole library, between calls: a few planes of 512 x 512 or blocks
#: of 0.2 M voxels (about 20 MB each). Rebuilding one costs about 0.13 s per M voxels.
CACHE_BYTES = 64 << 20

_lock = threading.Lock()
_kept: OrderedDict = OrderedDict()  # (function, args) -> result, least recently used first, CACHE_BYTES at most
_in_use: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # every result some caller still holds
_newest: dict = {}  # the newest result over the budget, while a call is open: {key: result}, one at most
_open_calls = 0
_on_close: list[Callable[[], None]] = []  # what else frees when the last open call returns


@contextmanager
def call_scope() -> Iterator[None]:
    """A library call: while one is open (in any thread), the newest result over the budget is kept for reuse.

    When the last open call returns, it is dropped, and every function
    registered with :func:`on_scope_close` runs (per-thread scratch space).
    Usable as a decorator.
    """
    global _open_calls
    with _lock:
        _open_calls += 1
    try:
        yield
    finally:
        with _lock:
            _open_calls -= 1
            last = _open_calls == 0
            if last:
                _newest.clear()
        if last:
            for free in _on_close:
                free()


def on_scope_close(free: Callable[[], None]) -> Callable[[], None]:
    """Register ``free()`` to run when the last open :func:`call_scope` returns; returns it (a decorator)."""
    _on_close.append(free)
    return free


def nbytes(obj: Any, _seen: set | None = None) -> int:
    """Bytes of the NumPy arrays an object holds (in its attributes, slots, tuples and lists), each counted once."""
    seen = set() if _seen is None else _seen
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        return int(obj.nbytes)
    if isinstance(obj, (tuple, list)):
        return sum(nbytes(v, seen) for v in obj)
    values = list(getattr(obj, "__dict__", {}).values())
    for cls in type(obj).__mro__:
        for s in getattr(cls, "__slots__", ()):
            try:  # the slot as it is: an unset one is not built by the class's __getattr__ (a lazy layout)
                values.append(cls.__dict__[s].__get__(obj, cls))
            except (AttributeError, KeyError):
                pass
    return sum(nbytes(v, seen) for v in values)


def _keep(key: Any, value: Any) -> None:
    """Keep ``value`` as the most recent result, then drop the oldest until the arrays of all fit the budget."""
    _kept[key] = value
    while nbytes(list(_kept.values())) > CACHE_BYTES:  # arrays shared by results (a plan's tree) count once
        _kept.popitem(last=False)


def lru_bytes(func: Callable) -> Callable:
    """Decorator: memoise a function of hashable arguments within the shared budget :data:`CACHE_BYTES`.

    Least recently used results are dropped first; a result larger than the
    whole budget is found again only while some caller holds it or, the
    newest, while a library call is open (:func:`call_scope`). Thread-safe;
    a result computed by two threads at once is kept once. The wrapper has
    ``cache_clear()`` and ``cache_values()`` (its own results held for reuse).
    """
    @functools.wraps(func)
    def wrapper(*args: Any) -> Any:
        key = (wrapper, args)
        with _lock:
            if key in _kept:
                _kept.move_to_end(key)
                return _kept[key]
            value = _newest.get(key, _in_use.get(key))
        if value is None:
            value = func(*args)  # outside the lock: other shapes build meanwhile
        with _lock:
            if key in _kept:  # built by another thread meanwhile
                _kept.move_to_end(key)
                return _kept[key]
            try:
                value = _in_use.setdefault(key, value)
            except TypeError:  # not weakly referenceable: found again only while kept
                pass
            if nbytes(value) <= CACHE_BYTES:
                _keep(key, value)
            elif _open_calls:
                _newest.clear()
                _newest[key] = value
            return value

    def cache_clear() -> None:
        with _lock:
            for key in [k for k in _kept if k[0] is wrapper]:
                del _kept[key]
            for key in [k for k in _in_use if k[0] is wrapper]:
                _in_use.pop(key, None)
            for key in [k for k in _newest if k[0] is wrapper]:
                del _newest[key]

    def cache_values() -> list:
        with _lock:
            return [v for k, v in _kept.items() if k[0] is wrapper]

    wrapper.cache_clear = cache_clear  # type: ignore[attr-defined]
    wrapper.cache_values = cache_values  # type: ignore[attr-defined]
    return wrapper
