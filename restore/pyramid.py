"""Multiscale pyramids of a result: its lower levels as means of blocks of its full resolution.

A denoised multiscale image (an OME-Zarr pyramid, a napari multiscale
layer) is denoised at full resolution only; its lower levels are made
again from that result, so that every level shows the same denoised
image. Each level is the mean of whole blocks of voxels of the level above
it (what ome-zarr's ``Scaler`` calls ``'local_mean'``, scikit-image's
:func:`skimage.transform.downscale_local_mean` without padding), with the
input's factors. The command line's OME-Zarr output and the napari plugin's
multiscale results are made by these functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["block_mean", "level_factors", "lower_levels"]


def level_factors(shapes: Sequence[Sequence[int]], shape: Sequence[int] | None = None
                  ) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Shapes and factors of the lower levels of a result, as an input pyramid's levels divide theirs.

    Parameters
    ----------
    shapes : sequence of tuple of int
        The shapes of the input's levels, full resolution first, all of one
        number of axes.
    shape : tuple of int, optional
        The shape of the result's full resolution (default: the input's,
        ``shapes[0]``).

    Returns
    -------
    list of (tuple of int, tuple of int)
        Per lower level (one fewer than ``shapes`` at most), its shape and
        the factors, per axis, by which it divides the level above it: the
        ratio of the input's two levels, rounded to a whole number >= 1.
        Only whole blocks make a level (an odd size loses its last voxel),
        and the list stops before a level with no voxels.

    Raises
    ------
    ValueError
        When ``shapes`` is empty or its shapes (or ``shape``) differ in
        their number of axes.

    Examples
    --------
    >>> level_factors([(16, 64, 50), (16, 32, 25), (8, 16, 13)])
    [((16, 32, 25), (1, 2, 2)), ((8, 16, 12), (2, 2, 2))]
    """
    shapes = [tuple(int(n) for n in s) for s in shapes]
    if not shapes:
        raise ValueError("shapes must hold the shape of the full resolution at least, got none")
    full = shapes[0] if shape is None else tuple(int(n) for n in shape)
    if any(len(s) != len(full) for s in shapes):
        raise ValueError(f"shapes must all have {len(full)} axes as the full resolution's {full}, got {shapes}")
    out: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
    above_input, above = shapes[0], full
    for level_shape in shapes[1:]:
        factors = tuple(max(1, round(a / max(b, 1))) for a, b in zip(above_input, level_shape, strict=True))
        new = tuple(n // f for n, f in zip(above, factors, strict=True))
        if min(new) < 1:
            break
        out.append((new, factors))
        above_input, above = level_shape, new
    return out


def block_mean(image: Any, factors: Sequence[int]) -> Any:
    """The means of whole blocks of ``factors`` voxels of ``image``, in its dtype.

    Parameters
    ----------
    image : ndarray or dask.array.Array
        One level of a pyramid.
    factors : sequence of int
        The block's size along each axis of ``image`` (>= 1).

    Returns
    -------
    ndarray or dask.array.Array
        Of shape ``image.shape // factors`` (the excess voxels of each axis
        left out) and ``image``'s dtype: integers rounded to the nearest
        (ties to even), booleans true where at least half the block is.
        Lazy when ``image`` is a Dask array (its chunks made whole numbers
        of blocks first, so that each block of the result is one chunk's).

    Raises
    ------
    ValueError
        When ``factors`` do not match ``image``'s axes or are not >= 1.
    """
    given = tuple(factors)
    factors = tuple(int(f) for f in given)
    if len(factors) != np.ndim(image) or min(factors, default=1) < 1 or factors != given:
        raise ValueError(f"factors must be whole numbers >= 1, one per axis of the image of shape "
                         f"{np.shape(image)}, got {given}")
    import dask

    if dask.is_dask_collection(image):
        import dask.array as da

        # whole blocks in every chunk: what coarsen reduces chunk by chunk
        src = image.rechunk(tuple(max(f, c // f * f) for c, f in zip(image.chunksize, factors, strict=True)))
        mean = da.coarsen(np.mean, src, dict(enumerate(factors)), trim_excess=True)
        rint = da.rint
    else:
        src = np.asarray(image)
        src = src[tuple(slice(0, n // f * f) for n, f in zip(src.shape, factors, strict=True))]
        split = [d for n, f in zip(src.shape, factors, strict=True) for d in (n // f, f)]
        mean = np.mean(src.reshape(split), axis=tuple(range(1, 2 * src.ndim, 2)))
        rint = np.rint
    dtype = np.dtype(image.dtype)
    if dtype.kind in "iu":
        mean = rint(mean)
    elif dtype.kind == "b":
        mean = mean >= 0.5
    return mean.astype(dtype)


def lower_levels(level0: Any, shapes: Sequence[Sequence[int]]) -> list[Any]:
    """The lower levels of a result: each the means of blocks of the level above, from its full resolution.

    Parameters
    ----------
    level0 : ndarray or dask.array.Array
        The result at full resolution (for instance denoised), of the
        input's number of axes.
    shapes : sequence of tuple of int
        The shapes of the input's levels, its full resolution first.

    Returns
    -------
    list of ndarray or dask.array.Array
        The levels below ``level0`` (see :func:`level_factors` for their
        shapes), each :func:`block_mean` of the one above, so of
        ``level0`` (integers rounded at each level, as a stored pyramid
        holds them). Lazy when ``level0`` is a Dask array: computing a part
        of a level computes only the blocks of ``level0`` beneath it.

    Examples
    --------
    >>> import numpy as np
    >>> full = np.arange(16.0).reshape(4, 4)
    >>> lower_levels(full, [(4, 4), (2, 2)])[0]
    array([[ 2.5,  4.5],
           [10.5, 12.5]])
    """
    out: list[Any] = []
    above = level0
    for _, factors in level_factors(shapes, np.shape(level0)):
        above = block_mean(above, factors)
        out.append(above)
    return out
