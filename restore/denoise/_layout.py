"""Where the image's axes are: the transformed axes, the slider axes, the channels (and the opponent colour space).

Shared by every denoising method: :func:`check_layout` reads them from the
image's shape and dtype alone, once, up front (for Dask arrays too).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import check_axes, check_image_layout


@dataclass(frozen=True)
class Layout:
    """The axes of an image, checked.

    Attributes
    ----------
    ndim : int
        The image's number of dimensions.
    c_axis : int or None
        Axis of the channels (non-negative), None for grey.
    sp_axes : tuple of int
        The transformed (spatial) axes of a unit, two or three, increasing.
    n_channels : int
        Number of channels (1 for grey).
    sliced : tuple of int
        Transformed axes a viewer shows one slice at a time (Dask blocks keep to the input's chunks).
    """

    ndim: int
    c_axis: int | None
    sp_axes: tuple[int, ...]
    n_channels: int
    sliced: tuple[int, ...] = ()

    @property
    def order(self) -> list[int]:
        """The axes in the driver's order: the others (stacks of units) first, then ``sp_axes``, then channels."""
        rest = [i for i in range(self.ndim) if i not in self.sp_axes and i != self.c_axis]
        return rest + list(self.sp_axes) + ([] if self.c_axis is None else [self.c_axis])


def check_layout(shape: tuple[int, ...], dtype, *, channel_axis, axes, sliced_axes=(), exact: bool = False) -> Layout:
    """The :class:`Layout` of an image of this shape and dtype; ``exact``: one unit, no stacking axes.

    Raises ValueError naming ``axes``, ``channel_axis``, ``sliced_axes`` or
    the image (its dtype, its number of dimensions) when they do not fit.
    """
    ndim = len(shape)
    n_axes = 2 if axes is None else len(check_axes(axes, ndim, None, channels_checked=False))
    c_axis = check_image_layout(shape, dtype, channel_axis=channel_axis, spatial=n_axes, exact=exact)
    sp_axes = check_axes(axes, ndim, c_axis)
    n_channels = int(shape[c_axis]) if c_axis is not None else 1
    return Layout(ndim, c_axis, sp_axes, n_channels, _check_sliced(sliced_axes, ndim, sp_axes))

# Orthonormal opponent colour transform: white noise of level sigma in RGB
# stays white with the same sigma, and most of the structure moves to the
# first (luminance) channel, so each channel is shrunk on its own terms.
_OPPONENT = np.array([
    [1 / np.sqrt(3), 1 / np.sqrt(3), 1 / np.sqrt(3)],
    [1 / np.sqrt(2), 0.0, -1 / np.sqrt(2)],
    [1 / np.sqrt(6), -2 / np.sqrt(6), 1 / np.sqrt(6)],
])


def _check_sliced(sliced_axes, ndim: int, sp_axes: tuple[int, ...]) -> tuple[int, ...]:
    """``sliced_axes`` as non-negative axes, each one of the transformed axes."""
    try:
        sliced = tuple(int(a) for a in sliced_axes)
    except (TypeError, ValueError):
        raise ValueError(f"sliced_axes must be a sequence of axes, got {sliced_axes!r}") from None
    if any(not -ndim <= a < ndim for a in sliced) or not {a % ndim for a in sliced} <= set(sp_axes):
        raise ValueError(f"sliced_axes must be among the transformed axes {sp_axes}, got {sliced_axes!r}")
    norm = tuple(sorted({a % ndim for a in sliced}))
    if len(norm) != len(sliced):
        raise ValueError(f"sliced_axes names an axis twice, got {sliced_axes!r}")
    return norm


def _to_channels(plane: np.ndarray, channel_axis: int | None, keep_float32: bool = False) -> list[np.ndarray]:
    if channel_axis is None:
        return [plane if keep_float32 and plane.dtype == np.float32 else np.asarray(plane, dtype=np.float64)]
    x = np.moveaxis(plane, channel_axis, -1).astype(np.float64)
    if x.shape[-1] == 3:
        x = x @ _OPPONENT.T
    return [np.ascontiguousarray(x[..., c]) for c in range(x.shape[-1])]


def _from_channels(channels: list[np.ndarray], has_channels: bool) -> np.ndarray:
    if not has_channels:
        return channels[0]
    x = np.stack(channels, axis=-1)
    if x.shape[-1] == 3:
        x = x @ _OPPONENT
    return x
