"""Plumbing shared by the widgets, free of Qt: planes, types, derived layers, the preview's region.

Conventions shared by every widget:

- a layer is processed plane by plane; a plane is the last two axes of the
  data, plus the colour axis when ``layer.rgb`` (then ``channel_axis=-1``);
  an alpha channel (RGBA) is set aside and put back unchanged;
- planes are converted to float keeping the layer's units (:func:`as_float`),
  so that ``sigma`` and ``lam`` are in the units the user sees, and results
  go back to the input's dtype (:func:`like_input`): integers are rounded and
  clipped to their type's range, floats keep their precision;
- results are new layers that keep the source's transform, look, ``rgb`` and
  metadata, plus a record of what was done under ``metadata["restore"]``
  (:func:`layer_kwargs`); the source layer is never modified.
"""

from __future__ import annotations

import inspect
import math
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

__all__ = [
    "RECORD_KEY",
    "SYNC_ENV",
    "LruCache",
    "as_float",
    "check_image_layer",
    "current_plane_index",
    "error_message",
    "float_dtype",
    "full_resolution",
    "is_dictionary_layer",
    "is_input_image",
    "is_lazy",
    "is_preview_layer",
    "layer_kwargs",
    "library_default",
    "like_input",
    "offset_translate",
    "plane_indices",
    "plane_shape",
    "preview_region",
    "run_sync",
    "split_alpha",
    "unit_indices",
    "with_alpha",
]

#: Set to 1 to run every job in the calling (GUI) thread: for debugging.
SYNC_ENV = "RESTORE_PLUGIN_SYNC"
#: Key of ``layer.metadata`` under which a result records how it was made.
RECORD_KEY = "restore"


def run_sync() -> bool:
    """Whether jobs run synchronously (``RESTORE_PLUGIN_SYNC`` set and not 0)."""
    return os.environ.get(SYNC_ENV, "").strip().lower() not in ("", "0", "false", "no")


# ---------------------------------------------------------------------------
# Layers the widgets offer
# ---------------------------------------------------------------------------


def _record(layer: Any) -> dict[str, Any]:
    meta = getattr(layer, "metadata", None) or {}
    rec = meta.get(RECORD_KEY)
    return rec if isinstance(rec, dict) else {}


def is_preview_layer(layer: Any) -> bool:
    """Whether ``layer`` is a widget's live preview (never an input)."""
    return bool(_record(layer).get("preview"))


def is_dictionary_layer(layer: Any) -> bool:
    """Whether ``layer`` shows a learned dictionary (its atoms) and holds it in its metadata."""
    return _record(layer).get("dictionary") is not None


def is_input_image(layer: Any) -> bool:
    """Whether ``layer`` is an Image the widgets can take as input (not a preview, not a dictionary's atoms)."""
    from napari.layers import Image

    return isinstance(layer, Image) and not is_preview_layer(layer) and not is_dictionary_layer(layer)


# ---------------------------------------------------------------------------
# Planes
# ---------------------------------------------------------------------------


def check_image_layer(layer: Any, multiscale_ok: bool = False) -> None:
    """Raise a ValueError if the widgets cannot process ``layer`` (multiscale layers only with ``multiscale_ok``)."""
    if layer is None:
        raise ValueError("choose an image layer first")
    if getattr(layer, "multiscale", False) and not multiscale_ok:
        raise ValueError(f"layer {layer.name!r} is multiscale: only the Denoise widget processes multiscale images")
    shape = np.shape(full_resolution(layer))
    if len(shape) - (1 if layer.rgb else 0) < 2:
        raise ValueError(f"layer {layer.name!r} has shape {shape}: planes need 2 spatial axes")
    if np.dtype(layer.dtype).kind not in "biuf":
        raise ValueError(f"layer {layer.name!r} has data of type {layer.dtype}: numbers are needed")


def full_resolution(layer: Any) -> Any:
    """The layer's data at full resolution: its first level when multiscale, else its data (never loaded)."""
    return layer.data[0] if getattr(layer, "multiscale", False) else layer.data


def is_lazy(data: Any) -> bool:
    """Whether ``data`` is a Dask array (computed on demand: never to be loaded whole)."""
    dask = sys.modules.get("dask")  # nothing is a Dask collection unless Dask was imported
    return dask is not None and dask.is_dask_collection(data)


def library_default(function: Callable, name: str) -> Any:
    """The default of parameter ``name`` of a library function: the widgets restate no number."""
    return inspect.signature(function).parameters[name].default


def unit_indices(shape: tuple[int, ...], rgb: bool, n_spatial: int) -> list[tuple[int, ...]]:
    """Indices (leading axes) of the units of data of this shape: planes (``n_spatial`` 2) or volumes (3)."""
    n_lead = len(shape) - n_spatial - (1 if rgb else 0)
    if n_lead < 0:
        raise ValueError(f"data of shape {shape} has no {'colour ' if rgb else ''}"
                         f"{'plane' if n_spatial == 2 else 'volume'}")
    return list(np.ndindex(*shape[:n_lead]))


def holds_volumes(shape: tuple[int, ...], rgb: bool) -> bool:
    """Whether data of this shape has volumes to transform in 3-D: three spatial axes, each of 2 samples or more."""
    spatial = tuple(shape[:-1] if rgb else shape)
    return len(spatial) >= 3 and min(spatial[-3:]) >= 2


def plane_indices(shape: tuple[int, ...], rgb: bool) -> list[tuple[int, ...]]:
    """Indices of the planes of data of this shape (leading axes), in C order.

    A plane is the last two axes, plus the colour axis when ``rgb``.
    """
    return unit_indices(shape, rgb, 2)


def plane_shape(layer: Any) -> tuple[int, int]:
    """Rows and columns of the layer's planes (at full resolution)."""
    shape = np.shape(full_resolution(layer))
    return tuple(shape[-3:-1] if layer.rgb else shape[-2:])  # type: ignore[return-value]


def current_plane_index(layer: Any, world_point: tuple[float, ...]) -> tuple[int, ...]:
    """Index (leading axes) of the layer's plane at a world point (``viewer.dims.point``)."""
    shape = np.shape(full_resolution(layer))
    n_lead = len(shape) - (3 if layer.rgb else 2)
    if n_lead <= 0:
        return ()
    data_pos = np.asarray(layer.world_to_data(tuple(world_point)), dtype=float)[:n_lead]
    return tuple(int(np.clip(np.round(p), 0, s - 1)) for p, s in zip(data_pos, shape[:n_lead], strict=True))


def as_float(plane: Any) -> np.ndarray:
    """Plane as a float array in the same units (of :func:`float_dtype`).

    Floats stay as they are (float16 becomes float32); integers are copied,
    every value exact. A Dask array stays a (lazy) Dask array.
    """
    arr = plane if is_lazy(plane) else np.asarray(plane)  # a Dask array stays lazy
    dtype = float_dtype(arr.dtype)
    return arr if arr.dtype == dtype else arr.astype(dtype)


def float_dtype(dtype: Any) -> np.dtype:
    """The float dtype a plane of ``dtype`` is processed in, in the same units.

    Floats keep theirs (float16: float32); integers up to 16 bits get
    float32 and wider ones float64, so that every integer value is exact
    and comes back unchanged through :func:`like_input`.
    """
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return dtype if dtype != np.float16 else np.dtype(np.float32)
    if dtype.kind not in "biu":
        raise ValueError(f"image data must be numeric, got dtype {dtype}")
    return np.dtype(np.float32 if dtype.itemsize <= 2 else np.float64)


def like_input(out: np.ndarray, dtype: Any) -> np.ndarray:
    """A float result in the input's dtype: integers rounded and clipped to their range, floats cast.

    A Dask array stays lazy.
    """
    dtype = np.dtype(dtype)
    if dtype.kind in "ui":
        info = np.iinfo(dtype)
        return np.clip(np.rint(out), info.min, info.max).astype(dtype)
    if dtype.kind == "f":
        return out.astype(dtype) if is_lazy(out) else out.astype(dtype, copy=False)
    return out  # booleans: the float result is more useful than a thresholded one


def split_alpha(plane: np.ndarray, rgb: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """Colour channels and alpha (RGBA planes), or the plane and None."""
    if rgb and plane.shape[-1] == 4:
        return plane[..., :3], plane[..., 3:]
    return plane, None


def with_alpha(colour: np.ndarray, alpha: np.ndarray | None) -> np.ndarray:
    """Put the alpha set aside by :func:`split_alpha` back, unchanged."""
    if alpha is None:
        return colour
    return np.concatenate([colour, alpha.astype(colour.dtype)], axis=-1)


# ---------------------------------------------------------------------------
# Derived layers
# ---------------------------------------------------------------------------


def layer_kwargs(layer: Any, name: str, record: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments of a new Image layer with the transform, look and metadata of ``layer``.

    ``record`` (what was done, with which parameters) is stored under
    ``metadata["restore"]``; the source's own metadata is kept beside it.
    """
    metadata = {k: v for k, v in dict(layer.metadata).items() if k != RECORD_KEY}
    metadata[RECORD_KEY] = dict(record)
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
        "gamma": float(layer.gamma),
        "metadata": metadata,
    }
    if not layer.rgb:
        kwargs["colormap"] = layer.colormap.name
    return kwargs


def offset_translate(layer: Any, offset: tuple[int, ...]) -> tuple[float, ...]:
    """Translate that puts data starting at ``offset`` (data pixels of ``layer``) where it sits in ``layer``.

    A crop keeps the source's scale, rotation and shear; only its translation
    moves, by the source's linear transform of the offset.
    """
    from napari.utils.transforms import Affine

    full = np.zeros(layer.ndim)
    full[len(full) - len(offset):] = offset
    data2physical = Affine(scale=layer.scale, translate=layer.translate, rotate=layer.rotate, shear=layer.shear)
    return tuple(float(v) for v in data2physical(full))


# ---------------------------------------------------------------------------
# The preview's region
# ---------------------------------------------------------------------------


def preview_region(plane: tuple[int, int], visible: tuple[int, int, int, int] | None,
                   centre: tuple[float, float] | None, *, max_pixels: int, margin: int,
                   quantum: int) -> tuple[tuple[int, int, int, int], bool]:
    """The part of a plane a preview computes: ``((r0, r1, c0, c1), capped)``.

    The visible box (half-open data pixels; None: the whole plane) grown by
    ``margin`` on each side, so that its edges look as they will in the whole
    plane, and its sides rounded up to multiples of ``quantum``. When that
    holds more than ``max_pixels``, the region is instead the largest one of
    the box's shape within ``max_pixels`` (sides rounded down to multiples of
    ``quantum``), centred on ``centre`` (default: the box's centre), and
    ``capped`` is True. The region always lies inside the plane.
    """
    H, W = (int(s) for s in plane)
    r0, r1, c0, c1 = (0, H, 0, W) if visible is None else visible
    r0, r1 = max(0, min(r0, H - 1)), max(1, min(r1, H))
    c0, c1 = max(0, min(c0, W - 1)), max(1, min(c1, W))
    if r1 <= r0 or c1 <= c0:
        r0, r1, c0, c1 = 0, H, 0, W
    if centre is None:
        centre = ((r0 + r1) / 2, (c0 + c1) / 2)
    r0, r1, c0, c1 = max(0, r0 - margin), min(H, r1 + margin), max(0, c0 - margin), min(W, c1 + margin)
    h = min(H, -(-(r1 - r0) // quantum) * quantum)
    w = min(W, -(-(c1 - c0) // quantum) * quantum)
    capped = h * w > max_pixels
    if capped:
        f = math.sqrt(max_pixels / (h * w))
        h = min(H, max(quantum, int(h * f) // quantum * quantum))
        w = min(W, max(quantum, int(w * f) // quantum * quantum))
        cr, cc = centre
    else:
        cr, cc = (r0 + r1) / 2, (c0 + c1) / 2

    def place(mid: float, size: int, limit: int) -> int:
        return int(min(max(0, round(mid - size / 2)), limit - size))

    top, left = place(cr, h, H), place(cc, w, W)
    return (top, top + h, left, left + w), capped


# ---------------------------------------------------------------------------
# Messages and caching
# ---------------------------------------------------------------------------


def error_message(exc: BaseException) -> str:
    """The library's message of an exception (with its type when not a ValueError)."""
    if isinstance(exc, ValueError) and str(exc):
        return str(exc)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


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
