"""Block matching for the non-local method: the K most similar patches (2-D) or cubes (3-D) of a reference.

Everything works on the internal three-axis form of :mod:`restore._nonlocal`:
a plane (M, N) is the volume (M, 1, N) with patches (p, 1, p), so one set of
kernels serves planes and volumes. A patch is named by its *origin* (its
first pixel); the origins of an axis of length ``n`` with patches of ``p``
are ``0 .. n - p``.

Similarity is the squared Euclidean distance between *features* of the
patches, an array ``F`` of shape (n0, n1, d, n2) over the origins (the
features of each origin along ``d``, origins of the last axis side by side
so that a row of candidates is compared at once, vectorised): the patch's
pixels, or (as the non-local method uses them) the coefficients of an
orthonormal patch transform, whose distances are the pixel distances (or,
keeping the leading ones only, approach them with fewer terms).

The numba kernels live in :mod:`restore._core_blockmatch` (flags of
:mod:`restore._config`: ``cache=True``, ``nogil=True``: callers run them on
their own threads); this module wraps them.
"""

from __future__ import annotations

import numpy as np

from ._core_blockmatch import match_many, match_one, match_pixels_many

# re-exported: the non-local passes of inpainting call match_pixels_many from here
__all__ = ["block_match", "match_many", "match_one", "match_pixels_many"]


def block_match(features: np.ndarray, refs: np.ndarray, half_window: tuple[int, int, int],
                k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``k`` best matches of each reference origin (a thin wrapper of :func:`match_many`).

    Parameters
    ----------
    features : ndarray, shape (n0, n1, d, n2)
        Features of the patch at each origin (float32 or float64).
    refs : ndarray of int, shape (n, 3)
        Reference origins.
    half_window : (int, int, int)
        Candidates lie within this many origins of the reference on each axis.
    k : int
        Number of matches per reference (the reference included).

    Returns
    -------
    idx : ndarray of int64, shape (n, k, 3)
    dist : ndarray of float64, shape (n, k)
    counts : ndarray of int64, shape (n,)
        Matches found (fewer than ``k`` only in windows smaller than ``k``).
    """
    refs = np.ascontiguousarray(refs, dtype=np.int64)
    n = refs.shape[0]
    idx = np.zeros((n, k, 3), dtype=np.int64)
    dist = np.full((n, k), np.inf)
    counts = np.zeros(n, dtype=np.int64)
    h0, h1, h2 = (int(h) for h in half_window)
    match_many(np.ascontiguousarray(features), refs, h0, h1, h2, int(k), idx, dist, counts)
    return idx, dist, counts
