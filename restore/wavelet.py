"""The wavelet quad-tree: one node per coefficient of a 2-D wavelet transform."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ._validation import check_level, check_wavelet, max_level
from .tree import Tree

__all__ = ["quadtree_parents", "wavelet_quadtree"]


def quadtree_parents(band_shapes: tuple[tuple[int, int], ...]) -> np.ndarray:
    """Parents of the coefficients of a 2-D multilevel wavelet transform.

    Parameters
    ----------
    band_shapes : tuple of (int, int)
        Shape of the approximation band followed by the shape of the detail
        bands of each level, coarse to fine (PyWavelets' order; every level
        has three bands of that shape: horizontal, vertical, diagonal).

    Returns
    -------
    ndarray of int64
        Parent of every coefficient, numbered as in :func:`pywt.ravel_coeffs`
        (approximation, then for each level, coarse to fine, the horizontal,
        vertical and diagonal bands, each raveled in C order). Approximation
        coefficients are roots; a coarsest detail coefficient hangs below the
        approximation coefficient at the same position; a detail coefficient
        at ``(r, c)`` of a finer level hangs below ``(r // 2, c // 2)`` of the
        next coarser level, same orientation.
    """
    approx = band_shapes[0]
    parents = [np.full(approx[0] * approx[1], -1, dtype=np.int64)]
    offset_prev = None  # start of the previous level's first band
    prev_shape = approx
    offset = approx[0] * approx[1]
    for li, shape in enumerate(band_shapes[1:]):
        h, w = shape
        r = np.minimum(np.arange(h) // 2 if li else np.arange(h), prev_shape[0] - 1)
        c = np.minimum(np.arange(w) // 2 if li else np.arange(w), prev_shape[1] - 1)
        local = (r[:, None] * prev_shape[1] + c[None, :]).ravel()
        band_size = prev_shape[0] * prev_shape[1]
        for o in range(3):
            if li == 0:
                parents.append(local.astype(np.int64))
            else:
                parents.append((offset_prev + o * band_size + local).astype(np.int64))
        offset_prev = offset
        offset += 3 * h * w
        prev_shape = shape
    return np.concatenate(parents)


@lru_cache(maxsize=32)
def wavelet_quadtree(shape: tuple[int, int], wavelet: str = "db3", level: int | None = None,
                     penalize_approx: bool = False) -> Tree:
    """The quad-tree of the coefficients of ``pywt.wavedec2`` with periodization.

    Parameters
    ----------
    shape : (int, int)
        Image shape; each side must be divisible by ``2**level`` (pad first).
    wavelet : str
        An orthogonal wavelet name known to PyWavelets.
    level : int, optional
        Number of levels; default: as many as leave an approximation band
        of about 16 x 16.
    penalize_approx : bool, default False
        Weight of the approximation coefficients' groups: 1 when True, 0
        (unpenalised roots) when False. Detail groups have weight 1.

    Returns
    -------
    Tree
        One node per coefficient, owning that coefficient, numbered as in
        :func:`pywt.ravel_coeffs`. Built once per argument set and cached.
    """
    try:
        h, w = (int(s) for s in shape)
    except (TypeError, ValueError):
        raise ValueError(f"shape must be two positive integers (M, N), got {shape!r}") from None
    if min(h, w) < 2:
        raise ValueError(f"shape must have sides of at least 2, got {shape!r}")
    wav = check_wavelet(wavelet)
    level = min(default_level((h, w)), max_level((h, w), wav)) if level is None else check_level(level, (h, w), wav)
    if h % (1 << level) or w % (1 << level):
        raise ValueError(f"shape {shape} is not divisible by 2**level = {1 << level}: pad the image first")
    bands = [(h >> level, w >> level)] + [(h >> lv, w >> lv) for lv in range(level, 0, -1)]
    parents = quadtree_parents(tuple(bands))
    weights = np.ones(parents.shape[0])
    if not penalize_approx:
        weights[: bands[0][0] * bands[0][1]] = 0.0
    return Tree.from_parents(parents, weights=weights)


def default_level(shape: tuple[int, int]) -> int:
    """Levels that leave an approximation band of about 16 pixels a side."""
    n = min(int(s) for s in shape)
    return max(1, int(np.floor(np.log2(max(n, 2)))) - 4)
