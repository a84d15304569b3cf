"""A least-recently-used cache bounded in bytes, for the transform plans and trees built per shape.

``functools.lru_cache`` bounds the number of entries, but a tree of a 1M-voxel
block holds about 80 MB, and the blocks of a chunked volume come in up to 27
shapes (interior, first and last along each axis): sixteen cached plans then
hold over a gigabyte. This cache keeps the most recent entries up to a total
size, and always the newest one.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["CACHE_BYTES", "lru_bytes", "nbytes"]

#: Bytes of plans and trees kept for reuse per cache: a few planes of 512 x 512 or blocks of 0.2 M voxels (about 16 MB
#: each); a larger one (a 1024 x 1024 plane: 80 MB) is kept alone. Rebuilding one costs about 0.13 s per M voxels.
CACHE_BYTES = 64 << 20


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
    values += [getattr(obj, s) for cls in type(obj).__mro__ for s in getattr(cls, "__slots__", ()) if hasattr(obj, s)]
    return sum(nbytes(v, seen) for v in values)


def lru_bytes(max_bytes: int, size: Callable[[Any], int] = nbytes) -> Callable:
    """Decorator: memoise a function of hashable arguments, keeping at most ``max_bytes`` of results.

    Least recently used results are dropped first; the newest is always
    kept. Thread-safe; a result computed by two threads at once is kept once.
    The wrapper has ``cache_clear()`` and ``cache_values()``.
    """
    def decorate(func: Callable) -> Callable:
        entries: OrderedDict = OrderedDict()
        sizes: dict = {}
        lock = threading.Lock()

        @functools.wraps(func)
        def wrapper(*args: Any) -> Any:
            with lock:
                if args in entries:
                    entries.move_to_end(args)
                    return entries[args]
            value = func(*args)  # outside the lock: other shapes build meanwhile
            with lock:
                if args not in entries:
                    entries[args], sizes[args] = value, size(value)
                    total = sum(sizes.values())
                    while total > max_bytes and len(entries) > 1:
                        old, _ = entries.popitem(last=False)
                        total -= sizes.pop(old)
                return entries[args]

        def cache_clear() -> None:
            with lock:
                entries.clear()
                sizes.clear()

        def cache_values() -> list:
            with lock:
                return list(entries.values())

        wrapper.cache_clear = cache_clear  # type: ignore[attr-defined]
        wrapper.cache_values = cache_values  # type: ignore[attr-defined]
        return wrapper

    return decorate
