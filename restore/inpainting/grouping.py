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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from .. import _blockmatch, _core, _core_inpaint
from .._nonlocal import group_tree, run_ordered, transform_matrix
from .patches import gather, known_sd, patch_positions, window_sums

__all__ = ["GroupSettings", "chunk_reach", "group_passes", "match_chunk", "n_group_steps", "plan_references"]

log = logging.getLogger("restore.inpainting")

_CHUNK_REFS = 64  # reference patches per chunk: one progress step, a few numba calls
# passes that code every reference patch; from then on, a reference is coded only while one of its missing pixels
# moved by at least _SETTLED (times the sd of the known luminance) in the last pass that coded it: 0.03 against 0.02
# lost 0.003 dB on 27 text and scratch cases (9 photos) for 6 % of their time (kodim23's text: 14 %); 0.05 lost 0.02
_SETTLE_PASSES = 1
_SETTLED = 0.03
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
    n_inner : int
        FISTA steps per group and pass (more pull the missing pixels further towards the group's consensus:
        better on repeated structure, worse where there is none).
    bands : int
        Bands of the group's Haar coefficients with their own subtree (see :func:`group_tree`).
    lams : tuple of float
        ``lam`` of the first and the last pass (geometric in between), in units of the known pixels' range
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


def n_group_steps(plan: list[np.ndarray]) -> int:
    """Progress steps of :func:`group_passes` on ``plan``: its chunks of references."""
    return sum(-(-len(refs) // _CHUNK_REFS) for refs in plan)


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
        budget.start(n_group_steps([refs]))
        if settle and k >= _SETTLE_PASSES:
            # references whose missing pixels all moved less than the threshold last time have settled
            refs = refs[(gather(moved, refs[:, 0], refs[:, 1], s.patch) >= settled).any(axis=1)]
        if k == 0 and pilot is not None and promising is not None:
            first = gather(pilot, refs[:, 0], refs[:, 1], s.patch).any(axis=1)
            num, den = pass_.run(refs[first], float(lam))
            kept = U[:, missing]
            update(num, den, False)
            if not promising():
                U[:, missing] = kept
                budget.finish()
                budget.start(n_group_steps(plan[1:]))
                budget.finish()
                break
            U[:, missing] = kept  # the rest of the pass matches on the estimate the pilot found
            pass_.run(refs[~first], float(lam), into=(num, den))  # into the pilot's sums: 8 bytes a pixel less
            del kept
        else:
            num, den = pass_.run(refs, float(lam))
        update(num, den, True)
        del num, den  # not alive through the next pass: 8 bytes a pixel
        budget.finish()
        if after_pass is not None and not after_pass(k):
            break
    return U


def chunk_reach(rs: np.ndarray, shape: tuple[int, int], patch: int, half_window: int) -> tuple[int, int, int, int]:
    """The box ``(b0, b1, e0, e1)`` of the pixels the groups of the references ``rs`` (n, 2) may hold.

    The search windows of half-side ``half_window`` around them, clipped to
    the image of ``shape``, with the patches' ``patch`` pixels beyond.
    """
    H, W = shape
    b0 = max(0, int(rs[:, 0].min()) - half_window)
    b1 = max(0, int(rs[:, 1].min()) - half_window)
    e0 = min(H - patch, int(rs[:, 0].max()) + half_window) + patch
    e1 = min(W - patch, int(rs[:, 1].max()) + half_window) + patch
    return b0, b1, e0, e1


def match_chunk(L: np.ndarray, rs: np.ndarray, patch: int, half_window: int, k: int) -> np.ndarray:
    """The origins (n, k, 3) of the ``k`` patches of ``L`` most like each reference of ``rs`` (n, 2), pixel by pixel."""
    n = len(rs)
    idx = np.empty((n, k, 3), dtype=np.int64)
    _blockmatch.match_pixels_many(L, rs, patch, half_window, half_window, k, idx, np.empty((n, k)),
                                  np.empty(n, dtype=np.int64))
    return idx


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
        elif hasattr(self.progress, "tick"):  # a step beyond the count (a pass run in two): a chance to cancel
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
    """One pass of :func:`group_passes`: chunks of references, matched on the estimate as the pass found it."""

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
        # the luminance the patches are matched on, in float32 (the matching's arithmetic: twice as many
        # candidates a vector instruction), copied at each run; 4 bytes a pixel
        self.L = np.empty(U.shape[1:], dtype=np.float32)

    def run(self, refs: np.ndarray, lam: float,
            into: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The sums of the weighted reconstructions (C, H, W) and of their weights (H, W) of ``refs``' groups.

        ``into``: sums to add to (and return), else new ones.
        """
        C, H, W = self.U.shape
        np.copyto(self.L, self.U[0])
        if into is None:  # chunks add in float64 buffers; float32 sums: memory of 16 MP photos
            into = np.zeros((C, H, W), dtype=np.float32), np.zeros((H, W), dtype=np.float32)
        num, den = into

        def add(res):
            b0, b1, bnum, bden = res
            num[:, b0:b0 + bden.shape[0], b1:b1 + bden.shape[1]] += bnum
            den[b0:b0 + bden.shape[0], b1:b1 + bden.shape[1]] += bden
            self.tick()

        run_ordered(self.pool, (self.task(refs[i:i + _CHUNK_REFS], lam) for i in range(0, len(refs), _CHUNK_REFS)),
                    add, self.n_threads)
        return num, den

    def task(self, rs: np.ndarray, lam: float) -> Callable[[], tuple]:
        """The chunk of references ``rs``: match, code, aggregate into its own buffers."""
        C, H, W = self.U.shape
        s, t = self.s, self.tree
        p, h = s.patch, s.window // 2
        b0, b1, e0, e1 = chunk_reach(rs, (H, W), p, h)

        def run():
            n = len(rs)
            idx = match_chunk(self.L, rs, p, h, s.k)
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
                _core_inpaint.gather_groups(self.U[ch], self.known, idx, X, Kn)
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
                _core_inpaint.aggregate(X, idx, self.win, w, bnum[ch], bden if ch == 0 else
                                        np.zeros_like(bden), b0, b1)
            return b0, b1, bnum, bden
        return run
