"""Validation of user input, in one place: every public function, estimator and CLI command uses it.

Each check raises a ValueError (or TypeError for a wrong kind of object)
that names the parameter, the value given and what is allowed, and is cheap:
callers run them all before any heavy work. The checks return the value in
the canonical form the algorithms take (a float array, an int, a bool mask).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "check_callable",
    "check_channel_axis",
    "check_choice",
    "check_image",
    "check_finite",
    "check_int",
    "check_level",
    "check_mask",
    "check_matrix",
    "check_number",
    "check_per_channel",
    "check_wavelet",
    "max_level",
    "output_dtype",
    "restore_dtype",
]

# The orthogonal wavelet families of PyWavelets, as an error message lists them.
_ORTHOGONAL_FAMILIES = "haar, dbN (N = 1..38), symN (N = 2..20), coifN (N = 1..17)"


def _show(value: Any) -> str:
    """A short repr of a user value for an error message."""
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape} and dtype {value.dtype}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# ---------------------------------------------------------------------------
# Numbers and names
# ---------------------------------------------------------------------------


def check_int(name: str, value: Any, *, min: int | None = 1, max: int | None = None) -> int:  # noqa: A002
    """An integer in ``[min, max]`` (bounds optional); bools are refused."""
    ok = isinstance(value, (numbers.Integral, np.integer)) and not isinstance(value, (bool, np.bool_))
    if ok and (min is None or value >= min) and (max is None or value <= max):
        return int(value)
    if min is not None and max is not None:
        allowed = f"an integer in [{min}, {max}]"
    elif min is not None:
        allowed = f"an integer >= {min}"
    elif max is not None:
        allowed = f"an integer <= {max}"
    else:
        allowed = "an integer"
    raise ValueError(f"{name} must be {allowed}, got {_show(value)}")


def check_number(name: str, value: Any, *, min: float | None = 0.0, strict: bool = False,  # noqa: A002
                 max: float | None = None) -> float:
    """A finite real number ``>= min`` (``> min`` when ``strict``) and ``<= max``."""
    try:
        v = float(value)
        real = not isinstance(value, (bool, np.bool_, str, bytes)) and np.ndim(value) == 0
    except (TypeError, ValueError):
        real = False
    if real and math.isfinite(v) and (min is None or (v > min if strict else v >= min)) \
            and (max is None or v <= max):
        return v
    parts = ["finite"]
    if min is not None:
        parts.append(f"{'>' if strict else '>='} {min:g}")
    if max is not None:
        parts.append(f"<= {max:g}")
    raise ValueError(f"{name} must be {' and '.join(parts)}, got {_show(value)}")


def check_choice(name: str, value: Any, choices: Sequence[Any], *, plural: str | None = None) -> Any:
    """One of ``choices``: 'Invalid <name>: <value>; supported <plural> are a, b, c'."""
    try:
        if value in choices:
            return value
    except TypeError:  # unhashable or incomparable
        pass
    plural = plural or f"{name}s"
    raise ValueError(f"Invalid {name}: {_show(value)}; supported {plural} are {', '.join(map(str, choices))}")


def check_callable(name: str, value: Any) -> Callable | None:
    """None or a callable."""
    if value is None or callable(value):
        return value
    raise TypeError(f"{name} must be a callable or None, got {_show(value)}")


def check_per_channel(name: str, value: Any, n: int) -> list[float]:
    """One number (for every channel) or one per channel, each finite and >= 0."""
    try:
        vals = np.atleast_1d(np.asarray(value, dtype=np.float64))
    except (TypeError, ValueError):
        vals = None
    if vals is None or vals.ndim != 1 or vals.size not in (1, n):
        raise ValueError(f"{name} must be one number or one per channel ({n}), got {_show(value)}")
    if not np.all(np.isfinite(vals)) or np.any(vals < 0):
        raise ValueError(f"{name} must be finite and >= 0, got {_show(value)}")
    return [float(v) for v in np.broadcast_to(vals, (n,))]


# ---------------------------------------------------------------------------
# Wavelets and levels
# ---------------------------------------------------------------------------


def check_wavelet(wavelet: Any):
    """An orthogonal discrete PyWavelets wavelet, given by name; returns the ``pywt.Wavelet``."""
    import pywt

    if not isinstance(wavelet, str):
        raise ValueError(f"Invalid wavelet: {_show(wavelet)}; use the name of an orthogonal wavelet: "
                         f"{_ORTHOGONAL_FAMILIES}")
    try:
        wav = pywt.Wavelet(wavelet)
    except ValueError:
        raise ValueError(f"Invalid wavelet: {wavelet!r}; supported wavelets are the orthogonal ones of "
                         f"PyWavelets: {_ORTHOGONAL_FAMILIES}") from None
    if not wav.orthogonal:
        raise ValueError(f"Invalid wavelet: {wavelet!r} is not orthogonal: tree denoising needs an orthonormal "
                         f"transform: {_ORTHOGONAL_FAMILIES}")
    return wav


def max_level(shape: Sequence[int], wavelet: Any) -> int:
    """The deepest level for these sides: :func:`pywt.dwt_max_level` of the shortest, at least 1."""
    import pywt

    wav = check_wavelet(wavelet) if isinstance(wavelet, str) else wavelet
    return max(1, int(pywt.dwt_max_level(int(min(shape)), wav.dec_len)))


def check_level(level: Any, shape: Sequence[int], wavelet: Any) -> int:
    """A decomposition level in ``[1, max_level(shape, wavelet)]``."""
    deepest = max_level(shape, wavelet)
    lv = check_int("level", level, min=1)
    if lv > deepest:
        name = wavelet if isinstance(wavelet, str) else wavelet.name
        sides = "x".join(str(int(s)) for s in shape)
        raise ValueError(f"level {lv} is too deep for planes of {sides} with wavelet {name!r}: "
                         f"at most {deepest} (pywt.dwt_max_level), or None for the default")
    return lv


# ---------------------------------------------------------------------------
# Images and masks
# ---------------------------------------------------------------------------


def output_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype of a result for an input of this dtype: floats keep theirs, the rest give float64."""
    dtype = np.dtype(dtype)
    return dtype if dtype.kind == "f" else np.dtype(np.float64)


def restore_dtype(out: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``out`` in the result dtype of an input of ``dtype`` (see :func:`output_dtype`)."""
    return out.astype(output_dtype(dtype), copy=False)


def check_channel_axis(channel_axis: Any, ndim: int) -> int | None:
    """None, or an axis in ``[-ndim, ndim)``, returned non-negative."""
    if channel_axis is None:
        return None
    if isinstance(channel_axis, (numbers.Integral, np.integer)) and not isinstance(channel_axis, bool) \
            and -ndim <= channel_axis < ndim:
        return int(channel_axis) % ndim
    raise ValueError(f"channel_axis {_show(channel_axis)} is out of range for an image with {ndim} dimensions: "
                     f"use None or an integer in [{-ndim}, {ndim})")


def check_axes(axes: Any, ndim: int, channel_axis: int | None, channels_checked: bool = True) -> tuple[int, ...]:
    """The spatial axes denoised together, non-negative and increasing: two or three, none of them the channel axis.

    None: the last two axes that are not ``channel_axis``. ``channels_checked``
    False: ``channel_axis`` is not checked yet (the axes alone are).
    """
    spatial = [i for i in range(ndim) if i != channel_axis]
    if axes is None:
        if len(spatial) < 2:
            raise ValueError(f"image must have at least 2 dimensions besides channels, got {ndim} dimensions")
        return tuple(spatial[-2:])
    try:
        ax = [int(a) for a in axes]
        ok = all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in axes)
    except TypeError:
        ok = False
    if not ok or len(ax) not in (2, 3) or any(not -ndim <= a < ndim for a in ax):
        raise ValueError(f"axes must be two or three axes of the image (ndim {ndim}), got {axes!r}")
    ax = [a % ndim for a in ax]
    if len(set(ax)) != len(ax) or (channels_checked and channel_axis in ax):
        raise ValueError(f"axes must be distinct spatial axes, not the channel axis {channel_axis}, got {axes!r}")
    return tuple(sorted(ax))


def check_image_layout(shape: Sequence[int], dtype: Any, *, name: str = "image", channel_axis: Any = None,
                       spatial: int = 2, exact: bool = False, min_side: int = 2) -> int | None:
    """Check an image's dtype and shape (before reading any of it); its channel axis, non-negative or None.

    The parameters are those of :func:`check_image`: lazy arrays (Dask) are
    checked with this at the call, their values only block by block.
    """
    shape, dtype = tuple(int(s) for s in shape), np.dtype(dtype)
    ndim = len(shape)
    if dtype.kind not in "biuf":
        raise ValueError(f"{name} must be a real numeric array (bool, integer or float), got dtype {dtype}")
    if dtype.kind == "f" and dtype.itemsize > 8:
        raise ValueError(f"{name} has dtype {dtype}, wider than the kernels compute in: use float64, float32 or "
                         "float16")
    axis = check_channel_axis(channel_axis, max(ndim, 1))
    need = spatial + (axis is not None)
    if ndim < need or (exact and ndim != need):
        what = f"{'exactly' if exact else 'at least'} {need} dimensions"
        layout = ("(M, N" if spatial == 2 else "(P, M, N") + (", C)" if axis is not None else ")")
        hint = "; for colour, pass channel_axis" if axis is None and ndim == need + 1 else ""
        raise ValueError(f"{name} must have {what} {layout}, got shape {shape}{hint}")
    sides = [s for i, s in enumerate(shape) if i != axis][-spatial:]
    if 0 in shape:
        raise ValueError(f"{name} is empty (shape {shape}): it needs at least {min_side} pixels a side")
    if min(sides) < min_side:
        raise ValueError(f"{name} must have at least {min_side} pixels on each spatial side, got shape {shape}")
    return axis


def check_image(image: ArrayLike, *, name: str = "image", channel_axis: Any = None, spatial: int = 2,
                exact: bool = False, min_side: int = 2, finite: bool = True,
                copy: bool = False) -> tuple[np.ndarray, int | None]:
    """A real image as a float array, and its channel axis (non-negative or None).

    Floats stay float (float16 becomes float32, the precision the kernels
    compute in; :func:`restore_dtype` gives it back); integers and booleans
    become float64 in [0, 1] as :func:`skimage.util.img_as_float` does.

    Parameters
    ----------
    image : array_like
        The image.
    name : str
        Its parameter name in error messages.
    channel_axis : int, optional
        Axis of the channels.
    spatial : int
        Number of spatial axes: the last ``spatial`` axes that are not the
        channel axis. With ``exact``, exactly that many (plus the channel
        axis); otherwise more leading axes are allowed (stacks of planes).
    min_side : int
        Smallest allowed spatial side.
    finite : bool
        Refuse NaN and infinite values.
    copy : bool
        Return a copy even when no conversion was needed.
    """
    arr = np.asarray(image)
    axis = check_image_layout(arr.shape, arr.dtype, name=name, channel_axis=channel_axis, spatial=spatial,
                              exact=exact, min_side=min_side)
    if arr.dtype.kind == "f":
        native = arr.dtype.newbyteorder("=")  # the kernels read floats in this machine's byte order (FITS: big-endian)
        out = arr.astype(np.float32) if native == np.float16 else arr.astype(native) if arr.dtype != native \
            else (arr.copy() if copy else arr)
    else:
        from skimage.util import img_as_float

        out = img_as_float(arr)
    if finite:
        check_finite(out, name)
    return out, axis


def check_finite(arr: np.ndarray, name: str = "image") -> None:
    """Refuse an array holding NaN or infinite values (integers and booleans always pass)."""
    if arr.dtype.kind in "fc" and not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or infinite values")


def check_mask(mask: ArrayLike, shape: Sequence[int], *, name: str = "mask") -> np.ndarray:
    """A boolean mask of exactly ``shape`` (the image's spatial shape)."""
    m = np.asarray(mask)
    if m.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be a boolean or numeric array, got dtype {m.dtype}")
    if m.shape != tuple(shape):
        raise ValueError(f"{name} must have the image's spatial shape {tuple(shape)}, got {m.shape}")
    check_finite(m, name)
    return m.astype(bool)


def check_matrix(a: ArrayLike, name: str, *, min_rows: int = 0, min_cols: int = 1) -> np.ndarray:
    """A finite real 2-D array (n_samples, n_features) as float64 (a new array only when converted)."""
    arr = np.asarray(a)
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(f"{name} must be two-dimensional (n_samples, n_features), got shape {arr.shape}")
    if arr.shape[0] < min_rows or arr.shape[1] < min_cols:
        raise ValueError(f"{name} must have at least {min_rows} row(s) and {min_cols} column(s), got shape "
                         f"{arr.shape}")
    arr = np.asarray(arr, dtype=np.float64)
    check_finite(arr, name)
    return arr
