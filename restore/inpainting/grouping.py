"""Non-local passes: groups of similar patches, matched on the current estimate, coded jointly with masked data.

Each pass matches patches on the current estimate (known pixels plus the
filled ones) with the project's block matcher, codes every group of ``k``
patches jointly under the tree-l2 norm of :func:`restore._nonlocal.group_tree`
with its known pixels as data (LSSC's simultaneous sparse coding, by a few
FISTA steps from the estimate), and replaces the missing pixels by the
weighted average of the groups' reconstructions (BM3D's weights times a
Gaussian window), blended with the estimate before the pass. ``lam`` falls
from pass to pass. The work is cut into chunks of reference patches that do
not depend on the number of threads; each chunk adds into its own buffers,
summed in chunk order, so the result is the same for any number of threads.
The kernels are in :mod:`restore._core_inpaint`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial

import numpy as np

from .. import _blockmatch, _core, _core_inpaint
from .._nonlocal import group_tree, run_ordered, transform_matrix
from .patches import gather, known_sd, patch_positions, window_sums

__all__ = ["GroupSettings", "group_passes", "n_group_steps", "plan_references"]

log = logging.getLogger("restore.inpainting")

_CHUNK_REFS = 64  # reference patches per chunk: one progress step, a few numba calls; a strip of thin text has 2+
_STRIP_ROWS = 48  # rows of reference origins per strip, at least: a strip's features (plus the window) are in memory
# ... and more while a strip's features stay under this (bytes): a photo of a few MP is one or a few strips, so
# its passes compute no window rows twice and keep every core busy without a wait per strip; 16 MP: 48 rows
_STRIP_BYTES = 64 << 20
# passes that code every reference patch; from then on, a reference is coded only while one of its missing pixels
# moved by at least _SETTLED (times the sd of the known luminance) in the last pass that coded it
_SETTLE_PASSES = 1
_SETTLED = 0.02
_WINDOW_SD = 0.5  # sd of the Gaussian weights of a patch's pixels in the average, in patch sides


@dataclass(frozen=True)
class GroupSettings:
    """Settings of :func:`group_passes`.

    Attributes
    ----------
    patch : int
        Patch side, pixels (a power of 2: the quad-tree of coefficients).
    k : int
        Patches per group (a power of 2: the Haar transform along the group).
    window : int
        Side of the search window, pixels (odd).
    stride : int
        Step of the grid of reference patches, pixels.
    step : int
        Side of the blocks whose means are the matching features (1: every pixel).
    n_inner : int
        FISTA steps per group and pass (more pull the missing pixels further towards the group's consensus:
        better on repeated structure, worse where there is none).
    bands : int
        Bands of the group's Haar coefficients with their own subtree (see :func:`group_tree`).
    lams : tuple of float
        ``lam`` of the first and the last pass (geometric in between), in units of the known pixels' peak
        (:func:`restore.inpaint` scales them by it).
    n_passes : int
        Passes.
    debias : bool
        Give the coefficients the prox keeps back their values before shrinkage.
    keep : float
        Weight of the estimate before a pass against the pass's average (weight 1): damps passes where the
        groups' consensus drags in structure that is not there (faces, no repeats).
    """

    patch: int = 8
    k: int = 8
    window: int = 21
    stride: int = 8
    step: int = 1
    n_inner: int = 8
    bands: int = 2
    lams: tuple[float, float] = (0.003, 0.001)
    n_passes: int = 5
    debias: bool = False
    keep: float = 0.5


def _references(missing: np.ndarray, s: GroupSettings, gen: np.random.Generator,
                touching: np.ndarray | None = None) -> np.ndarray:
    """Origins (n, 2) of the reference patches of a pass: a randomly shifted grid of step ``stride``, touching.

    ``touching``: which patches touch the mask, when the caller has it.
    """
    if touching is None:
        touching = window_sums(missing, s.patch) > 0
    rows, cols = patch_positions(missing.shape, s.patch, s.stride, tuple(gen.integers(0, s.stride, 2)))
    rr, cc = np.nonzero(touching[np.ix_(rows, cols)])
    return np.stack([rows[rr], cols[cc]], axis=1).astype(np.int64)


def plan_references(missing: np.ndarray, s: GroupSettings, gen: np.random.Generator,
                    touching: np.ndarray | None = None) -> list[np.ndarray]:
    """The reference origins of every pass (see :func:`_references`), drawn up front so that steps are counted.

    ``touching``: ``window_sums(missing, s.patch) > 0``, when the caller has it.
    """
    if touching is None and s.n_passes:  # once for every pass: 16 MP
        touching = window_sums(missing, s.patch) > 0
    return [_references(missing, s, gen, touching) for _ in range(s.n_passes)]


def _strip_rows(width: int, s: GroupSettings) -> int:
    """Rows of reference origins per strip on an image ``width`` pixels wide (see ``_STRIP_BYTES``)."""
    per_row = max(1, width - s.patch + 1) * (s.patch // s.step) ** 2 * np.dtype(np.float32).itemsize
    return max(_STRIP_ROWS, _STRIP_BYTES // per_row - 2 * (s.window // 2))


def _strips(refs: np.ndarray, n0: int, rows: int) -> Iterator[tuple[int, int, np.ndarray]]:
    """Strips of ``rows`` rows of reference origins that hold references: (first, end, their references)."""
    for r_lo in range(0, n0, rows):
        r_hi = min(n0, r_lo + rows)
        sel = refs[(refs[:, 0] >= r_lo) & (refs[:, 0] < r_hi)]
        if len(sel):
            yield r_lo, r_hi, sel


def n_group_steps(plan: list[np.ndarray], shape: tuple[int, int], s: GroupSettings) -> int:
    """Progress steps of :func:`group_passes` on ``plan`` in an image of ``shape``: per strip, features and chunks."""
    n0, rows = shape[0] - s.patch + 1, _strip_rows(shape[1], s)
    return sum(1 + -(-len(sel) // _CHUNK_REFS) for refs in plan for _, _, sel in _strips(refs, n0, rows))


def group_passes(U: np.ndarray, missing: np.ndarray, s: GroupSettings, plan: list[np.ndarray], *,
                 pool: ThreadPoolExecutor, n_threads: int, progress: Callable[[], None] | None = None,
                 after_pass: Callable[[int], bool] | None = None, pilot: np.ndarray | None = None,
                 promising: Callable[[], bool] | None = None, settle: bool = True) -> np.ndarray:
    """Refine the missing pixels of ``U`` (C, H, W, float64, C-contiguous) in place; returns it.

    Patches are matched on channel 0 (the luminance); every channel is
    coded on the same groups. See the module's docstring. ``progress()``
    after each chunk (it may raise to stop), ``n_group_steps(plan)`` times
    in all; ``after_pass(k)`` after pass ``k`` (from 0): False skips the
    passes left. ``pilot`` (a mask of some missing pixels) and
    ``promising()``: the first pass codes the references that touch the
    pilot pixels first, and ``promising()`` then reads ``U`` as that part
    of the pass leaves it; False skips every pass (``U`` unchanged), True
    codes the other references and ends the pass as without a pilot.
    ``settle``: from pass ``_SETTLE_PASSES`` on, a reference whose missing
    pixels all moved less than ``_SETTLED`` in the last pass is not coded
    again (strokes and holes; under random loss the estimate keeps moving
    around every patch).
    """
    lams = np.geomspace(s.lams[0], s.lams[1], len(plan)) if len(plan) > 1 else np.array([s.lams[1]])
    budget = _Budget(progress)
    pass_ = _Pass(U, missing, s, pool, n_threads, budget)
    idx = np.flatnonzero(missing)
    # how far each missing pixel moved in the last pass that coded it (known pixels: 0); kept only when settling
    moved = None
    if settle:
        moved = np.zeros(missing.shape, dtype=np.float32)
        moved.reshape(-1)[idx] = np.inf
    settled = _SETTLED * known_sd(U[0], missing) if settle else 0.0

    def update(num: np.ndarray, den: np.ndarray, track: bool) -> None:
        dflat = den.reshape(-1)[idx].astype(np.float64)
        ok = dflat > 0
        for ch in range(U.shape[0]):
            u = U[ch].reshape(-1)
            new = (num[ch].reshape(-1)[idx[ok]] / dflat[ok] + s.keep * u[idx[ok]]) / (1.0 + s.keep)
            if ch == 0 and track and moved is not None:
                moved.reshape(-1)[idx[ok]] = np.abs(new - u[idx[ok]])
            u[idx[ok]] = new

    for k, (lam, refs) in enumerate(zip(lams, plan, strict=True)):
        budget.start(n_group_steps([refs], missing.shape, s))
        if settle and k >= _SETTLE_PASSES:
            # references whose missing pixels all moved less than the threshold last time have settled
            refs = refs[(gather(moved, refs[:, 0], refs[:, 1], s.patch) >= settled).any(axis=1)]
        if k == 0 and pilot is not None and promising is not None:
            first = gather(pilot, refs[:, 0], refs[:, 1], s.patch).any(axis=1)
            num, den = pass_.run(refs[first], float(lam), keep=True)
            kept = U[:, missing]
            update(num, den, False)
            if not promising():
                U[:, missing] = kept
                budget.finish()
                budget.start(n_group_steps(plan[1:], missing.shape, s))
                budget.finish()
                break
            U[:, missing] = kept  # as the pilot found it: its last strip's features hold
            num_b, den_b = pass_.run(refs[~first], float(lam), reuse=True)
            num += num_b
            den += den_b
            del num_b, den_b, kept
        else:
            num, den = pass_.run(refs, float(lam))
        update(num, den, True)
        budget.finish()
        if after_pass is not None and not after_pass(k):
            break
    return U


class _Budget:
    """``progress()`` at most ``n`` times per pass (:meth:`start`), and the count left at its end (:meth:`finish`)."""

    def __init__(self, progress: Callable[[], None] | None) -> None:
        self.progress, self.left = progress, 0

    def __call__(self) -> None:
        if self.progress is None:
            return
        if self.left > 0:
            self.left -= 1
            self.progress()
        elif hasattr(self.progress, "tick"):  # a step beyond the count (a pilot's strip): a chance to cancel
            self.progress.tick()

    def start(self, n: int) -> None:
        self.left = n

    def finish(self) -> None:
        while self.left > 0:
            self()


def _haar_matrix(k: int) -> np.ndarray:
    """The orthonormal Haar transform of length ``k`` (a power of 2) as a matrix: the non-local denoiser's.

    As :func:`restore._core_nonlocal.haar_group`: the scaled sums and
    differences of neighbours, then the same on the sums, down to one.
    """
    H = np.eye(k)
    n = k
    while n > 1:
        a, b = H[0:n:2].copy(), H[1:n:2].copy()
        H[:n // 2], H[n // 2:n] = (a + b) / np.sqrt(2.0), (a - b) / np.sqrt(2.0)
        n //= 2
    return H


class _Pass:
    """One pass of :func:`group_passes`: strips of reference rows, their features, chunks of references."""

    def __init__(self, U, missing, s, pool, n_threads, tick) -> None:
        self.U, self.s, self.pool, self.n_threads, self.tick = U, s, pool, n_threads, tick
        p = s.patch
        A = transform_matrix("dct", p)
        # the group's coefficients are A P A^T of each patch P, then Haar along the group: as two matrix products
        # (the row-major raveled A P A^T is kron(A, A) times the raveled P), a few times faster than loops over them
        self.K2T = np.ascontiguousarray(np.kron(A, A).T)
        self.K2 = np.ascontiguousarray(self.K2T.T)
        self.H = _haar_matrix(s.k)
        self.HT = np.ascontiguousarray(self.H.T)
        self.tree = group_tree((p, 1, p), s.k, s.bands)._flat
        g = np.exp(-0.5 * ((np.arange(p) - (p - 1) / 2) / (_WINDOW_SD * p)) ** 2)
        self.win = np.ascontiguousarray(np.outer(g, g))
        self.known = np.ascontiguousarray(~missing).view(np.uint8)
        self.rows = _strip_rows(missing.shape[1], s)
        self.kept: tuple[int, int] | None = None  # the rows of the last strip's features, for the next run
        self.buf: np.ndarray | None = None  # the features of the strip at hand (see features)

    def run(self, refs: np.ndarray, lam: float, *, keep: bool = False,
            reuse: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """The sums of the weighted reconstructions (C, H, W) and of their weights (H, W).

        ``keep``: the last strip's features are kept for the next run;
        ``reuse``: that run reads them where its strip is the same (the
        caller guarantees the estimate has not changed in between).
        """
        C, H, W = self.U.shape
        p, h = self.s.patch, self.s.window // 2
        n0 = H - p + 1
        kept, self.kept = (self.kept if reuse else None), None
        num = np.zeros((C, H, W), dtype=np.float32)  # chunks add in float64 buffers; memory of 16 MP photos
        den = np.zeros((H, W), dtype=np.float32)

        def add(res):
            b0, b1, bnum, bden = res
            num[:, b0:b0 + bden.shape[0], b1:b1 + bden.shape[1]] += bnum
            den[b0:b0 + bden.shape[0], b1:b1 + bden.shape[1]] += bden
            self.tick()

        rows = None
        for r_lo, r_hi, sel in _strips(refs, n0, self.rows):
            rows = max(0, r_lo - h), min(n0, r_hi + h)
            if rows == kept:  # the features in the buffer are this strip's
                F = self.buf[:rows[1] - rows[0]]
                self.tick()
            else:
                F = self.features(*rows)
            kept = None
            run_ordered(self.pool, (self.task(sel[i:i + _CHUNK_REFS], F, rows[0], lam)
                                 for i in range(0, len(sel), _CHUNK_REFS)), add, self.n_threads)
        if keep:
            self.kept = rows
        return num, den

    def features(self, f0: int, f1: int) -> np.ndarray:
        """Matching features of the origins of rows [f0, f1) (see :func:`restore._core_inpaint.patch_features`).

        They are written into the pass's buffer: valid until the next call.
        """
        p, step, L = self.s.patch, self.s.step, self.U[0]
        if self.buf is None:  # one buffer for every strip and pass: a fresh one is page-faulted in at each use
            n_rows = min(L.shape[0] - p + 1, self.rows + 2 * (self.s.window // 2))
            self.buf = np.empty((n_rows, 1, (p // step) ** 2, L.shape[1] - p + 1), dtype=np.float32)
        F = self.buf[:f1 - f0]
        cuts = np.linspace(f0, f1, self.n_threads + 1).astype(np.int64)
        run_ordered(self.pool, (partial(_core_inpaint.patch_features, L, a, b, p, step, F[a - f0:b - f0])
                             for a, b in zip(cuts[:-1], cuts[1:], strict=True) if b > a),
                 lambda _: None, self.n_threads)
        self.tick()
        return F

    def task(self, rs: np.ndarray, F: np.ndarray, f0: int, lam: float) -> Callable[[], tuple]:
        """The chunk of references ``rs``: match, code, aggregate into its own buffers."""
        C, H, W = self.U.shape
        s, t = self.s, self.tree
        p, h = s.patch, s.window // 2
        b0 = max(0, int(rs[:, 0].min()) - h)
        b1 = max(0, int(rs[:, 1].min()) - h)
        e0 = min(H - p, int(rs[:, 0].max()) + h) + p
        e1 = min(W - p, int(rs[:, 1].max()) + h) + p

        def run():
            n = len(rs)
            refs3 = np.zeros((n, 3), dtype=np.int64)
            refs3[:, 0] = rs[:, 0] - f0
            refs3[:, 2] = rs[:, 1]
            idx = np.empty((n, s.k, 3), dtype=np.int64)
            _blockmatch.match_many(F, refs3, h, 0, h, s.k, idx, np.empty((n, s.k)), np.empty(n, dtype=np.int64))
            bnum = np.zeros((C, e0 - b0, e1 - b1))
            bden = np.zeros((e0 - b0, e1 - b1))
            kq = s.k * p * p
            X = np.empty((n, kq))
            X3, X2 = X.reshape(n, s.k, p * p), X.reshape(n * s.k, p * p)  # views: the group's patches
            T3 = np.empty_like(X3)
            T2 = T3.reshape(n * s.k, p * p)
            Kn = np.empty((n, kq), dtype=np.uint8)
            lams = np.full(n, lam)
            work = np.empty((4, max(len(t.parent), kq)))
            iwork = np.empty((2, max(len(t.parent), kq)), dtype=np.int64)
            for ch in range(C):
                _core_inpaint.gather_groups(self.U[ch], self.known, idx, f0, X, Kn)
                Y, R = X.copy(), X.copy()
                step = 1.0
                for it in range(s.n_inner):
                    np.matmul(X2, self.K2T, out=T2)  # analysis: each patch's DCT, then Haar along the group
                    np.matmul(self.H, T3, out=X3)
                    _core.prox_tree_l2(X, 0, n, t.perm, t.own_ptr, t.node_end, t.parent, t.weights, lams, work,
                                       iwork)
                    if ch == 0 and it == s.n_inner - 1:  # BM3D's weight: groups kept sparse are trusted more
                        w = 1.0 / (1.0 + np.count_nonzero(X, axis=1))
                    np.matmul(self.HT, X3, out=T3)  # synthesis: the inverse (both orthonormal)
                    np.matmul(T2, self.K2, out=X2)
                    if it < s.n_inner - 1:
                        nxt = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * step * step))
                        _core_inpaint.fista_step(X, Y, Kn, R, (step - 1.0) / nxt)
                        step = nxt
                _core_inpaint.aggregate(X, idx, f0, self.win, w, bnum[ch], bden if ch == 0 else
                                        np.zeros_like(bden), b0, b1)
            return b0, b1, bnum, bden
        return run
