"""Numba kernels of block matching (the non-local methods' patch matching); :mod:`restore._blockmatch` wraps them.

The conventions (the three-axis form, origins, the feature array ``F`` of
shape (n0, n1, d, n2)) are those of :mod:`restore._blockmatch`. The kernels
use the flags of :mod:`restore._config` (``cache=True``, ``nogil=True``:
callers run them on their own threads).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._config import JIT, JIT_INLINE

# Candidates of a row whose distances are summed side by side: a multiple of the vector width (8 float32 in AVX2)
_LANES = 8


@njit(**JIT_INLINE)  # cache=True, nogil=True, no fastmath, inlined into its callers: restore._config.JIT_INLINE
def _start(r0, r1, r2, k, idx, dist):
    """The reference itself, first of its matches (distance 0); the distance under which a candidate may enter."""
    idx[0, 0] = r0
    idx[0, 1] = r1
    idx[0, 2] = r2
    dist[0] = 0.0
    return 0.0 if k <= 1 else np.inf


@njit(**JIT_INLINE)  # cache=True, nogil=True, no fastmath, inlined into its callers: restore._config.JIT_INLINE
def _widened(a2, b2, n2):
    """A row of candidates ``a2 .. b2 - 1`` widened to a whole number of ``_LANES`` inside ``0 .. n2 - 1``.

    Returns its first origin, its width and the offset of ``a2`` in it: a row's distances are summed side by side
    (a plain loop over, say, 21 left a third of it to a scalar remainder); the extra candidates are ignored.
    """
    nq = b2 - a2
    width = -(-nq // _LANES) * _LANES
    s2 = min(a2, n2 - width)  # widened leftwards at the end of the axis
    if s2 < 0:  # an axis shorter than the widened row
        s2, width = a2, nq
    return s2, width, a2 - s2


@njit(**JIT_INLINE)  # cache=True, nogil=True, no fastmath, inlined into its callers: restore._config.JIT_INLINE
def _admit(row, off, nq, q0, q1, a2, r0, r1, r2, k, idx, dist, count, worst):
    """Admit the row of candidates ``(q0, q1, a2 + q)``, distances ``row[off + q]``, among the best ``k`` so far.

    Returns the new ``count`` and ``worst`` (see :func:`match_one`).
    """
    for q in range(nq):
        s = np.float64(row[off + q])
        q2 = a2 + q
        if s >= worst or (q0 == r0 and q1 == r1 and q2 == r2):
            continue
        # insert after every entry <= s (ties keep scan order, the reference stays first)
        j = count if count < k else k - 1
        while j > 1 and dist[j - 1] > s:
            dist[j] = dist[j - 1]
            idx[j, 0] = idx[j - 1, 0]
            idx[j, 1] = idx[j - 1, 1]
            idx[j, 2] = idx[j - 1, 2]
            j -= 1
        dist[j] = s
        idx[j, 0] = q0
        idx[j, 1] = q1
        idx[j, 2] = q2
        if count < k:
            count += 1
        if count == k:
            worst = dist[k - 1]
    return count, worst


@njit(**JIT_INLINE)  # cache=True, nogil=True, no fastmath, inlined into its callers: restore._config.JIT_INLINE
def _repeat(count, k, idx, dist):
    """A window near a corner may hold fewer than ``k`` candidates: the entries left repeat those found, in order."""
    for j in range(count, k):
        dist[j] = dist[j - count]
        idx[j, 0] = idx[j - count, 0]
        idx[j, 1] = idx[j - count, 1]
        idx[j, 2] = idx[j - count, 2]


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def match_one(F, r0, r1, r2, h0, h1, h2, k, idx, dist):
    """The ``k`` best matches of the reference at origin ``(r0, r1, r2)`` of ``F``, in place.

    ``F`` (n0, n1, d, n2) holds the ``d`` features of each origin, the last
    axis running along the third one (so that the distances of a row of
    candidates are computed side by side, vectorised, in a fixed order).
    Candidates are the origins ``q`` with ``|q_a - r_a| <= h_a`` inside
    ``F``'s origins. ``idx`` (k, 3) int64 receives their origins and
    ``dist`` (k,) float64 their squared feature distances, in increasing
    distance; the reference itself comes first (distance 0), then ties in
    increasing linear index (C order). Returns the number of matches found
    (``k`` unless the window holds fewer candidates; then the remaining
    entries repeat those found, in order, so that a group always has ``k``
    patches).
    """
    n0, n1, d, n2 = F.shape
    worst = _start(r0, r1, r2, k, idx, dist)  # the k-th match's distance once there are k: no candidate above
    count = np.int64(1)  # not a literal: the helpers compile once
    a0, b0 = max(0, r0 - h0), min(n0, r0 + h0 + 1)
    a1, b1 = max(0, r1 - h1), min(n1, r1 + h1 + 1)
    a2, b2 = max(0, r2 - h2), min(n2, r2 + h2 + 1)
    ref = np.empty(d, dtype=F.dtype)
    for c in range(d):
        ref[c] = F[r0, r1, c, r2]
    s2, width, off = _widened(a2, b2, n2)
    row = np.empty(width, dtype=F.dtype)
    for q0 in range(a0, b0):
        for q1 in range(a1, b1):
            cand = F[q0, q1]
            for q in range(width):
                row[q] = 0.0
            for c in range(d):
                rc = ref[c]
                fc = cand[c, s2:s2 + width]
                for q in range(width):
                    t = fc[q] - rc
                    row[q] += t * t
            count, worst = _admit(row, off, b2 - a2, q0, q1, a2, r0, r1, r2, k, idx, dist, count, worst)
    _repeat(count, k, idx, dist)
    return count


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def match_many(F, refs, h0, h1, h2, k, idx, dist, counts):
    """:func:`match_one` for each row of ``refs`` (n, 3): ``idx`` (n, k, 3), ``dist`` (n, k), ``counts`` (n,)."""
    for i in range(refs.shape[0]):
        counts[i] = match_one(F, refs[i, 0], refs[i, 1], refs[i, 2], h0, h1, h2, k, idx[i], dist[i])


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def match_pixels(L, r0, r2, p, h0, h2, k, idx, dist):
    """:func:`match_one` of a plane's ``p`` x ``p`` patches compared pixel by pixel, without their feature array.

    The features of the origin ``(o0, o2)`` are the patch's pixels
    ``L[o0 + i, o2 + j]`` in the order ``i * p + j`` (the array ``F`` of
    :func:`match_one` would hold ``p * p`` shifted copies of ``L``); the
    matches and distances are those of :func:`match_one` on that array, in
    ``L``'s dtype. Origins are ``(o0, 0, o2)``, as planes are in the
    three-axis form.
    """
    n0, n2 = L.shape[0] - p + 1, L.shape[1] - p + 1
    zero = np.int64(0)  # the plane's middle axis; not a literal, as the origins: the helpers compile once
    worst = _start(r0, zero, r2, k, idx, dist)
    count = np.int64(1)
    a0, b0 = max(0, r0 - h0), min(n0, r0 + h0 + 1)
    a2, b2 = max(0, r2 - h2), min(n2, r2 + h2 + 1)
    ref = np.empty(p * p, dtype=L.dtype)
    for i in range(p):
        for j in range(p):
            ref[i * p + j] = L[r0 + i, r2 + j]
    s2, width, off = _widened(a2, b2, n2)
    row = np.empty(width, dtype=L.dtype)
    for q0 in range(a0, b0):
        for q in range(width):
            row[q] = 0.0
        for i in range(p):
            for j in range(p):
                rc = ref[i * p + j]
                fc = L[q0 + i, s2 + j:s2 + j + width]
                for q in range(width):
                    t = fc[q] - rc
                    row[q] += t * t
        count, worst = _admit(row, off, b2 - a2, q0, zero, a2, r0, zero, r2, k, idx, dist, count, worst)
    _repeat(count, k, idx, dist)
    return count


@njit(**JIT)  # cache=True, nogil=True, no fastmath: restore._config.JIT
def match_pixels_many(L, refs, p, h0, h2, k, idx, dist, counts):
    """:func:`match_pixels` for each row ``(o0, o2)`` of ``refs`` (n, 2): ``idx`` (n, k, 3), ``dist``, ``counts``."""
    for i in range(refs.shape[0]):
        counts[i] = match_pixels(L, refs[i, 0], refs[i, 1], p, h0, h2, k, idx[i], dist[i])
