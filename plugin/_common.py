"""Helpers shared by the widgets: planes of a layer, derived layers, jobs, messages.

Nothing here imports Qt at module level: :class:`Job` imports napari's
``create_worker`` only when it starts a thread, so the plane and layer
helpers can be tested without a display.

Conventions shared by every widget:

- a layer is processed plane by plane; a plane is the last two axes of the
  data, plus the colour axis when ``layer.rgb`` (then ``channel_axis=-1``);
- planes are converted to float (``float32`` for integers and ``float16``),
  keeping the layer's units, so that ``sigma`` and ``lam`` are in the units
  the user sees;
- results are new layers that keep the source's transform, units and
  ``rgb``; the source layer is never modified.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Any

import numpy as np

__all__ = [
    "SYNC_ENV",
    "Job",
    "LruCache",
    "as_float",
    "check_image_layer",
    "current_plane_index",
    "derived_layer_kwargs",
    "ensure_warm",
    "error_message",
    "is_warm",
    "notify_error",
    "plane_indices",
    "plane_layer_kwargs",
    "layer_choices",
    "progress_in_thread",
    "status_label",
    "run_sync",
]

#: Set to 1 to run every job in the calling (GUI) thread: for debugging.
SYNC_ENV = "RESTORE_PLUGIN_SYNC"


def run_sync() -> bool:
    """Whether jobs run synchronously (``RESTORE_PLUGIN_SYNC`` set and not 0)."""
    return os.environ.get(SYNC_ENV, "").strip().lower() not in ("", "0", "false", "no")


# ---------------------------------------------------------------------------
# Planes
# ---------------------------------------------------------------------------


def check_image_layer(layer: Any) -> None:
    """Raise a ValueError if the widgets cannot process ``layer``."""
    if layer is None:
        raise ValueError("choose an image layer first")
    if getattr(layer, "multiscale", False):
        raise ValueError(f"layer {layer.name!r} is multiscale: multiscale images are not supported")
    shape = np.shape(layer.data)
    if len(shape) - (1 if layer.rgb else 0) < 2:
        raise ValueError(f"layer {layer.name!r} has shape {shape}: planes need 2 spatial axes")


def plane_indices(shape: tuple[int, ...], rgb: bool) -> list[tuple[int, ...]]:
    """Indices of the planes of data of this shape (leading axes), in C order.

    A plane is the last two axes, plus the colour axis when ``rgb``.
    """
    n_lead = len(shape) - (3 if rgb else 2)
    if n_lead < 0:
        raise ValueError(f"data of shape {shape} has no {'colour ' if rgb else ''}plane")
    return list(np.ndindex(*shape[:n_lead]))


def current_plane_index(layer: Any, world_point: tuple[float, ...]) -> tuple[int, ...]:
    """Index (leading axes) of the layer's plane at a world point (``viewer.dims.point``)."""
    shape = np.shape(layer.data)
    n_lead = len(shape) - (3 if layer.rgb else 2)
    if n_lead <= 0:
        return ()
    data_pos = np.asarray(layer.world_to_data(tuple(world_point)), dtype=float)[:n_lead]
    return tuple(int(np.clip(np.round(p), 0, s - 1)) for p, s in zip(data_pos, shape[:n_lead], strict=True))


def as_float(plane: Any) -> np.ndarray:
    """Plane as a float array in the same units (integers and float16 become float32)."""
    arr = np.asarray(plane)
    if arr.dtype.kind == "f" and arr.dtype != np.float16:
        return arr
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"image data must be numeric, got dtype {arr.dtype}")
    return arr.astype(np.float32)


# ---------------------------------------------------------------------------
# Derived layers
# ---------------------------------------------------------------------------


def derived_layer_kwargs(layer: Any, name: str) -> dict[str, Any]:
    """Keyword arguments of a new Image layer with the transform and look of ``layer``."""
    kwargs: dict[str, Any] = {
        "name": name,
        "rgb": bool(layer.rgb),
        "scale": tuple(layer.scale),
        "translate": tuple(layer.translate),
        "rotate": np.asarray(layer.rotate),
        "shear": np.asarray(layer.shear),
        "affine": np.asarray(layer.affine.affine_matrix),
        "units": tuple(layer.units),
        "axis_labels": tuple(layer.axis_labels),
        "contrast_limits": tuple(layer.contrast_limits),
        "metadata": {"source": layer.name},
    }
    if not layer.rgb:
        kwargs["colormap"] = layer.colormap.name
    return kwargs


def plane_layer_kwargs(layer: Any, index: tuple[int, ...], name: str) -> dict[str, Any]:
    """Like :func:`derived_layer_kwargs`, for one plane kept as a stack of one.

    The plane keeps all the source's axes (size 1 on the leading ones) and is
    translated to where the plane sits, so it shows only on that plane. The
    offset assumes no rotation or shear mixing the leading axes with the plane.
    """
    kwargs = derived_layer_kwargs(layer, name)
    if index:
        scale = np.asarray(layer.scale, dtype=float)
        translate = np.asarray(layer.translate, dtype=float).copy()
        translate[: len(index)] += np.asarray(index) * scale[: len(index)]
        kwargs["translate"] = tuple(translate)
    kwargs["metadata"] = {"source": layer.name, "plane": index}
    return kwargs


# ---------------------------------------------------------------------------
# Messages
# ---------------------------------------------------------------------------


def error_message(exc: BaseException) -> str:
    """The library's message of an exception (with its type when not a ValueError)."""
    if isinstance(exc, ValueError) and str(exc):
        return str(exc)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def notify_error(exc: BaseException | str, prefix: str = "restore-tree") -> str:
    """Show an error as a napari notification (no traceback); return the message."""
    from napari.utils.notifications import show_error

    msg = exc if isinstance(exc, str) else error_message(exc)
    text = f"{prefix}: {msg}" if prefix else msg
    show_error(text)
    return text


# ---------------------------------------------------------------------------
# Jobs
# ---------------------------------------------------------------------------


class Job:
    """A generator run in napari's thread worker (or synchronously), with callbacks.

    Parameters
    ----------
    func : callable
        A generator function; ``func(*args)`` yields progress and returns the
        result. Cancelling stops it at its next ``yield``.
    *args
        Passed to ``func``.
    on_yield, on_return, on_error, on_abort, on_finish : callable, optional
        Called in the GUI thread with the yielded value, the returned value,
        the exception, nothing, nothing. ``on_finish`` is called last in every
        case. Errors default to :func:`notify_error`.
    progress : dict, optional
        napari progress bar: ``{"total": n, "desc": text}`` (one step per yield;
        no total: indeterminate).

    Notes
    -----
    Create the job, store it, then call :meth:`start`: the callbacks may run
    before ``start`` returns when jobs are synchronous (``RESTORE_PLUGIN_SYNC``).
    """

    def __init__(self, func: Callable[..., Iterator[Any]], *args: Any,
                 on_yield: Callable[[Any], None] | None = None,
                 on_return: Callable[[Any], None] | None = None,
                 on_error: Callable[[BaseException], None] | None = None,
                 on_abort: Callable[[], None] | None = None,
                 on_finish: Callable[[], None] | None = None,
                 progress: dict[str, Any] | None = None) -> None:
        self._func = func
        self._args = args
        self._on_yield = on_yield
        self._on_return = on_return
        self._on_error = on_error or notify_error
        self._on_abort = on_abort
        self._on_finish = on_finish
        self._progress = progress
        self._abort = False
        self._worker: Any = None
        self.started = False
        self.done = False
        self.outcome: str | None = None  # "returned", "errored" or "aborted"

    @property
    def running(self) -> bool:
        """Started and not finished."""
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
        """Ask the job to stop at its next yield; its result is then discarded."""
        self._abort = True
        if self._worker is not None and not self.done:
            self._worker.quit()

    # -- synchronous -------------------------------------------------------

    def _run_sync(self) -> None:
        gen = self._func(*self._args)
        try:
            while True:
                if self._abort:
                    gen.close()
                    self._aborted()
                    break
                value = next(gen)
                self._yielded(value)
        except StopIteration as stop:
            self._returned(stop.value)
        except Exception as exc:  # noqa: BLE001 - every error becomes a notification
            self._errored(exc)
        self._finished()

    # -- threaded ----------------------------------------------------------

    def _start_worker(self) -> None:
        from napari.qt.threading import create_worker

        progress = None
        if self._progress is not None:
            progress = {k: v for k, v in self._progress.items() if v is not None} or True
        worker = create_worker(self._func, *self._args, _start_thread=False, _ignore_errors=True,
                               _progress=progress)
        worker.yielded.connect(self._yielded)
        worker.returned.connect(self._returned)
        worker.errored.connect(self._errored)
        worker.aborted.connect(self._aborted)
        worker.finished.connect(self._finished)
        self._worker = worker
        worker.start()  # after connecting (NAPARI.md, pitfall 2)

    # -- callbacks ---------------------------------------------------------

    def _yielded(self, value: Any) -> None:
        if self._on_yield is not None and not self._abort:
            self._on_yield(value)

    def _returned(self, value: Any) -> None:
        if self._abort:  # cancelled after the last yield: discard all the same
            self._aborted()
            return
        self.outcome = "returned"
        if self._on_return is not None:
            self._on_return(value)

    def _errored(self, exc: BaseException) -> None:
        self.outcome = "errored"
        self._on_error(exc)

    def _aborted(self) -> None:
        if self.outcome == "aborted":
            return
        self.outcome = "aborted"
        if self._on_abort is not None:
            self._on_abort()

    def _finished(self) -> None:
        if self.done:
            return
        self.done = True
        self._worker = None
        if self._on_finish is not None:
            self._on_finish()


def status_label() -> Any:
    """A magicgui Label for status messages: full width, wrapping long text."""
    from magicgui.widgets import Label
    from qtpy.QtWidgets import QSizePolicy

    label = Label(value="")
    label.native.setWordWrap(True)
    label.native.setMinimumWidth(260)
    label.native.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
    return label


def layer_choices(viewer: Any, *kinds: str) -> Callable[..., list[tuple[str, Any]]]:
    """Choices callback of a ComboBox listing the viewer's layers of these classes (``"Image"``...)."""
    def choices(_widget: Any = None) -> list[tuple[str, Any]]:
        return [(layer.name, layer) for layer in viewer.layers if layer.__class__.__name__ in kinds]
    return choices


def progress_in_thread(call: Callable[[Callable[[int, int], None]], Any]) -> Iterator[tuple[int, int]]:
    """Run ``call(progress)`` in a helper thread; yield its ``(done, total)`` reports; return its result.

    For library functions that report progress through a callback: the
    generator (run by a :class:`Job`) turns the reports into yields. Closing
    the generator (Cancel) makes the next report raise
    :class:`restore.Cancelled`, which stops the call between steps.
    """
    import queue

    from restore import Cancelled

    stop = threading.Event()
    events: queue.Queue = queue.Queue()
    result: dict[str, Any] = {}

    def progress(done: int, total: int) -> None:
        if stop.is_set():
            raise Cancelled
        events.put((done, total))

    def work() -> None:
        try:
            result["value"] = call(progress)
        except BaseException as exc:  # noqa: BLE001 - handed to the generator
            result["error"] = exc

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    try:
        while thread.is_alive() or not events.empty():
            try:
                yield events.get(timeout=0.1)
            except queue.Empty:
                continue
    finally:
        stop.set()
        thread.join()
    if "error" in result:
        raise result["error"]
    return result["value"]


# ---------------------------------------------------------------------------
# First use: numba compilation in the background, once per process
# ---------------------------------------------------------------------------

_WARM: dict[str, bool] = {}
_WARMING: dict[str, tuple[Job, list[Callable[[], None]]]] = {}


def is_warm(key: str) -> bool:
    """Whether the warm-up ``key`` has finished in this process."""
    return _WARM.get(key, False)


def ensure_warm(key: str, func: Callable[[], Iterator[Any]], *, desc: str,
                on_done: Callable[[], None] | None = None) -> Job | None:
    """Run the warm-up generator ``func`` once per process, in the background.

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

    job = Job(func, on_finish=finish, progress={"desc": desc})
    _WARMING[key] = (job, callbacks)
    job.start()
    return job


class LruCache:
    """A small least-recently-used mapping, shared by the preview and Apply threads."""

    def __init__(self, maxsize: int = 256) -> None:
        self.maxsize = maxsize
        self._data: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any:
        """The value of ``key``, or None."""
        with self._lock:
            if key not in self._data:
                return None
            self._data.move_to_end(key)
            return self._data[key]

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    def set(self, key: Hashable, value: Any) -> None:
        """Store a value, dropping the oldest beyond ``maxsize``."""
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._data.clear()
