"""How far the refinements may move the interpolant: decided on known pixels held out of the run.

Pieces of known pixels shaped as the mask's are hidden from every stage
(:func:`holdout`); the stages fill them as missing pixels, and their
error there measures each candidate: the biharmonic interpolant, the result
of the dictionary's passes, and that of each non-local pass. The result is
the interpolant plus the blend of the two refinements' changes that fits
the held-out pixels best (weights in [0, 1], :class:`Blend`), at the
non-local pass where that fit is best. Where the refinements add structure
that is not there (stochastic texture, smooth photos), the weights fall and
the result falls back towards the interpolant; on repeating texture and
thin text they stay near 1. The held-out pixels themselves are returned as
given.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Blend", "best_blend", "choose_blend", "holdout"]

# held-out pixels, as a share of the known ones: enough to measure tenths of a dB on a 128 x 128 crop of random loss,
# few enough that the stages hardly miss them (twice as many lost more on textures than the decision gained)
_HOLDOUT_SHARE = 1 / 48
_HOLDOUT_PIECES = 1 / 4  # at most this share of the shifted mask's pieces (text: most strokes stay known)
_HOLDOUT_SHIFT = (6, 9)  # px: the mask copy the held-out pieces come from lies this far off (down, right)
_HOLDOUT_FEW = 320  # held-out pixels, at least (small images: a larger share), for a decision steadier than noise
_HOLDOUT_MOST = 1 / 20  # ... but at most this share of the known pixels (90 % loss on small images: 1/5 lost 0.3 dB)
# held out in pieces (text), at most this share of the known pixels: pieces next to the strokes are what the strokes'
# patches miss most (1/20 lost 0.2 dB on text masks, 1/100 less than 0.1)
_HOLDOUT_MOST_PIECES = 1 / 100
_CLUSTERED = 0.5  # masks clustered beyond this (see clustering) are held out in pieces; less, pixel by pixel
_HOLDOUT_MIN = 64  # held-out pixels under which the decision is noise: the full recipe then, undamped
_HOLDOUT_MAX = 65_536  # held-out pixels beyond which the decision's error hardly changes (16 MP photos)
# standard errors (over the held-out pieces) by which a damped blend must fit them better than the dictionary's full
# change: a text mask holds out a few dozen strokes, and one that crosses an edge can outweigh all the others. The
# damping is fitted on those same pixels, so its in-sample gain is about half its own z-score: 2 here asks for about
# 4 standard errors of the damping, as strict as that because a wrong damping costs every missing pixel
_BLEND_EVIDENCE = 2.0


def clustering(missing: np.ndarray) -> float:
    """How much more often a missing pixel's 4-neighbour is missing than any pixel: 0 random loss, near 1 strokes.

    ``(P(neighbour missing | missing) - p) / (1 - p)``, ``p`` the share of missing pixels.
    """
    p = float(np.mean(missing))
    if p >= 1.0 or p == 0.0:
        return 0.0
    pairs = np.count_nonzero(missing[1:] & missing[:-1]) + np.count_nonzero(missing[:, 1:] & missing[:, :-1])
    ends = np.count_nonzero(missing[1:]) + np.count_nonzero(missing[:, 1:])
    return (pairs / max(ends, 1) - p) / (1.0 - p)


def holdout(missing: np.ndarray, gen: np.random.Generator, *,
            clustered: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """Flat indices of the held-out pixels, sorted, and the piece of each (numbered from 0); or None (too few).

    Pieces of the mask's own shape: the known pixels under a shifted copy
    of the mask, in 8-connected pieces (pixel by pixel where the mask is
    not ``clustered``, ``clustering(missing) >= _CLUSTERED``: random loss), each kept at random with the
    probability that holds out ``_HOLDOUT_SHARE`` of the known pixels
    (``_HOLDOUT_FEW`` at least). Held-out strokes of text are strokes,
    and held-out pixels of random loss are scattered as its missing ones:
    their errors are those of the missing pixels.
    """
    from scipy import ndimage

    shifted = np.roll(missing, _HOLDOUT_SHIFT, axis=(0, 1))
    shifted &= ~missing
    n_shifted, n_known = int(np.count_nonzero(shifted)), missing.size - int(np.count_nonzero(missing))
    if n_shifted == 0:
        return None
    # unclustered: pixels on their own, as pieces would be larger holes than the mask's
    most = _HOLDOUT_MOST_PIECES if clustered else _HOLDOUT_MOST
    want = min(max(_HOLDOUT_SHARE * n_known, _HOLDOUT_FEW), most * n_known, _HOLDOUT_MAX)
    share = min(_HOLDOUT_PIECES, want / n_shifted)
    if not clustered:
        idx = np.flatnonzero(shifted)
        idx = idx[gen.random(len(idx)) < share]
        piece = np.arange(len(idx))  # pixels on their own
    else:
        labels, n = ndimage.label(shifted, structure=np.ones((3, 3), dtype=bool))
        keep = np.concatenate([[False], gen.random(n) < share])
        idx = np.flatnonzero(keep[labels])
        piece = np.unique(labels.reshape(-1)[idx], return_inverse=True)[1].reshape(-1)
    return (idx, piece) if len(idx) >= _HOLDOUT_MIN else None


@dataclass(frozen=True)
class Blend:
    """``start + a * (first - start) + b * (second - first)``, and its mean squared error on the held-out pixels."""

    a: float
    b: float
    mse: float

    def apply(self, start: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        """The blend of the three candidates' values (same shapes)."""
        return start + self.a * (first - start) + self.b * (second - first)


def best_blend(target: np.ndarray, start: np.ndarray, first: np.ndarray, second: np.ndarray) -> Blend:
    """The weights ``a, b`` in [0, 1] of :class:`Blend` that fit ``target`` best (least squares, box-constrained).

    All arrays hold the held-out pixels' values (any shape, the same). The
    weights are ratios of the errors' products: they do not depend on the
    image's units.
    """
    r = (target - start).ravel().astype(np.float64)
    d1 = (first - start).ravel().astype(np.float64)
    d2 = (second - first).ravel().astype(np.float64)
    g11, g12, g22 = d1 @ d1, d1 @ d2, d2 @ d2
    h1, h2, rr = d1 @ r, d2 @ r, r @ r

    def err(a: float, b: float) -> float:
        return rr - 2 * (a * h1 + b * h2) + a * a * g11 + 2 * a * b * g12 + b * b * g22

    def line(h: float, g: float, cross: float, other: float) -> float:  # the best weight, the other one fixed
        return float(np.clip((h - cross * other) / g, 0.0, 1.0)) if g > 0 else 0.0

    pairs = [(line(h1, g11, g12, b), b) for b in (0.0, 1.0)] + [(a, line(h2, g22, g12, a)) for a in (0.0, 1.0)]
    det = g11 * g22 - g12 * g12
    if det > 0:
        a, b = (h1 * g22 - h2 * g12) / det, (h2 * g11 - h1 * g12) / det
        if 0.0 <= a <= 1.0 and 0.0 <= b <= 1.0:
            pairs.append((float(a), float(b)))
    a, b = min(pairs, key=lambda ab: err(*ab))
    return Blend(a, b, max(err(a, b), 0.0) / max(r.size, 1))


def choose_blend(target: np.ndarray, start: np.ndarray, first: np.ndarray, second: np.ndarray,
                 piece: np.ndarray) -> Blend:
    """The blend of the refinements' changes that the held-out pixels support: damped only on evidence.

    The default is the first change in full (``a = 1``), with the weight
    ``b`` of the second that fits best. The blend of :func:`best_blend`
    replaces it only when it fits the held-out pixels better by more than
    ``_BLEND_EVIDENCE`` standard errors of the (in-sample) difference, the pieces
    (``piece``: each pixel's, as :func:`holdout` gives them) taken as the
    independent samples: errors on strokes come in pieces, and one piece
    across an edge can weigh more than all the others.
    Arrays as in :func:`best_blend`, their first axis the pixels.
    """
    best = best_blend(target, start, first, second)
    if best.a >= 1.0:
        return best
    with_b = best_blend(target, first, second, second)  # a = 1: only the second change's weight is free
    full = Blend(1.0, with_b.a, with_b.mse)
    n = int(piece.max()) + 1 if piece.size else 0
    if n < 2:
        return full

    def sse(blend: Blend) -> np.ndarray:
        err = np.asarray(target, dtype=np.float64) - blend.apply(start, first, second)
        return np.bincount(piece, (err * err).reshape(len(piece), -1).sum(axis=1), n)

    gain = sse(full) - sse(best)
    return best if gain.sum() > _BLEND_EVIDENCE * np.sqrt(n) * gain.std(ddof=1) else full
