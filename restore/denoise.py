"""Wavelet quad-tree denoising with tree-structured sparsity."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import pywt
from numpy.typing import ArrayLike, NDArray

from ._cache import call_scope, lru_bytes
from ._config import NOISE_MODELS, default_num_threads
from ._progress import BlockSteps, ProgressCallback, Steps
from ._validation import (
    check_callable,
    check_choice,
    check_finite,
    check_image,
    check_image_layout,
    check_int,
    check_level,
    check_number,
    check_per_channel,
    check_wavelet,
    max_level,
    output_dtype,
    restore_dtype,
)
from .noise import NoiseEstimate, anscombe, estimate_noise, inverse_anscombe
from .proximal import PENALTIES, _prox_rows
from .tree import Tree
from .wavelet import band_layout, default_level, level_splits, wavelet_forward, wavelet_inverse, wavelet_tree

__all__ = ["NOISE_MODELS", "LamChoice", "choose_lam", "denoise_wavelet_tree", "estimate_sigma"]

CONVEX = ("l1", "tree_l2", "tree_linf")

_log = logging.getLogger(__name__)

# Orthonormal opponent colour transform: white noise of level sigma in RGB
# stays white with the same sigma, and most of the structure moves to the
# first (luminance) channel, so each channel is shrunk on its own terms.
_OPPONENT = np.array([
    [1 / np.sqrt(3), 1 / np.sqrt(3), 1 / np.sqrt(3)],
    [1 / np.sqrt(2), 0.0, -1 / np.sqrt(2)],
    [1 / np.sqrt(6), -2 / np.sqrt(6), 1 / np.sqrt(6)],
])

# lam = t * sigma (convex penalties) or lam = (t * sigma)**2 / 2 (l0 and
# tree_l0, whose threshold on a single coefficient is then t * sigma), with t
# interpolated in log(sigma) from the best t found by an oracle grid search on
# the bundled sample images (benchmarks/calibrate_rule.py), sigma expressed in
# units of an 8-bit image (255 for the image's dynamic range).
_RULE_SIGMAS = np.array([5.0, 10.0, 25.0, 50.0, 100.0])
_RULE_T = {
    "l1": np.array([0.747, 1.003, 1.458, 1.823, 2.307]),
    "l0": np.array([2.086, 2.534, 3.126, 3.531, 3.907]),
    "tree_l2": np.array([0.518, 0.650, 0.832, 0.947, 1.070]),
    "tree_linf": np.array([0.667, 0.851, 1.126, 1.303, 1.463]),
    "tree_l0": np.array([1.947, 2.109, 2.399, 2.574, 2.753]),
}

LamMethod = Literal["sure", "rule"]


@dataclass(frozen=True)
class LamChoice:
    """Regularisation chosen for one image plane, per channel.

    Attributes
    ----------
    lam : tuple of float
        Absolute ``lam`` (image units) for each channel; for colour images
        the channels of the orthonormal opponent colour space.
    sigma : tuple of float
        Noise standard deviation used for each channel.
    method : str
        ``"sure"`` or ``"rule"``.
    level_weights : tuple, optional
        With SURE on planes: for each channel, the weight of each detail
        level, finest first (its lam is ``lam * weight``); None when every
        level has weight 1.
    """

    lam: tuple[float, ...]
    sigma: tuple[float, ...]
    method: str
    level_weights: tuple[tuple[float, ...] | None, ...] | None = None


# ---------------------------------------------------------------------------
# Transform plan: padding, transform, tree, cached per shape
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    """How to transform arrays of one shape: padding, the levels of each axis, the tree (cached per shape)."""

    shape: tuple[int, ...]
    padded: tuple[int, ...]
    wavelet: str
    levels: tuple[int, ...]
    splits: tuple[int, ...]
    n_approx: int
    tree: Tree
    node_level: np.ndarray  # level of each coefficient (0: approximation, 1: finest details)

    @property
    def level(self) -> int:
        """Number of levels (of the most split axis)."""
        return len(self.splits)

    @property
    def n_coeffs(self) -> int:
        """Number of wavelet coefficients of a padded array."""
        return int(np.prod(self.padded, dtype=np.int64))

    def forward(self, x: np.ndarray, shift: tuple[int, ...] | None = None) -> np.ndarray:
        if self.padded != self.shape:
            x = np.pad(x, [(0, p - s) for s, p in zip(self.shape, self.padded, strict=True)], mode="symmetric")
        if shift is not None and any(shift):
            x = np.roll(x, shift, axis=tuple(range(x.ndim)))
        return wavelet_forward(x, self.wavelet, self.splits)

    def inverse(self, c: np.ndarray, shift: tuple[int, ...] | None = None) -> np.ndarray:
        x = wavelet_inverse(c, self.wavelet, self.splits, self.padded)
        if shift is not None and any(shift):
            x = np.roll(x, tuple(-s for s in shift), axis=tuple(range(x.ndim)))
        return x[tuple(slice(0, s) for s in self.shape)]

    def coeff_var(self, var_map: np.ndarray, shift: tuple[int, ...] | None = None) -> np.ndarray:
        """Noise variance of each coefficient (flat) for independent noise of variance ``var_map`` per sample.

        A coefficient's variance is ``var_map`` weighted by its basis
        function squared; this takes the mean of ``var_map`` over the cell of
        its band's grid (exact for a constant map, and for Haar), padded and
        shifted as :meth:`forward` does.
        """
        v = var_map
        if self.padded != self.shape:
            v = np.pad(v, [(0, p - s) for s, p in zip(self.shape, self.padded, strict=True)], mode="symmetric")
        if shift is not None and any(shift):
            v = np.roll(v, shift, axis=tuple(range(v.ndim)))
        out = np.empty(self.n_coeffs)
        bands = band_layout(self.padded, self.splits)
        for level, mask in enumerate(self.splits, start=1):
            # halve the axes this level splits: cell means of the previous level's cell means
            for a in range(v.ndim):
                if (mask >> a) & 1:
                    even = tuple(slice(0, None, 2) if b == a else slice(None) for b in range(v.ndim))
                    odd = tuple(slice(1, None, 2) if b == a else slice(None) for b in range(v.ndim))
                    v = 0.5 * (v[even] + v[odd])
            for b in bands[1:]:
                if b.level == level:
                    out[b.start:b.start + b.size] = v.ravel()
        out[: self.n_approx] = v.ravel()
        return out

    def level_tree(self, level_weights: np.ndarray | None) -> Tree:
        """The tree with the detail groups of level l weighted ``level_weights[l - 1]`` (None: all 1)."""
        if level_weights is None:
            return self.tree
        w = np.concatenate([[1.0], level_weights])[self.node_level] * self.tree.weights
        return self.tree.with_weights(w)


@lru_bytes
def _plan(shape: tuple[int, ...], wavelet: str, level: int | tuple[int, ...], penalize_approx: bool) -> _Plan:
    levels = (int(level),) * len(shape) if np.ndim(level) == 0 else tuple(int(n) for n in level)
    padded = tuple(-(-s // (1 << n)) * (1 << n) for s, n in zip(shape, levels, strict=True))
    splits = level_splits(levels)
    tree = wavelet_tree(padded, wavelet, levels, penalize_approx)
    bands = band_layout(padded, splits)
    node_level = np.zeros(tree.n_nodes, dtype=np.int64)
    for b in bands[1:]:
        node_level[b.start:b.start + b.size] = b.level
    node_level.setflags(write=False)
    return _Plan(tuple(shape), padded, wavelet, levels, splits, bands[0].size, tree, node_level)


def _shrink_rows(C: np.ndarray, lam: float, penalty: str, plan: _Plan, penalize_approx: bool,
                 level_weights: np.ndarray | None = None) -> None:
    """Prox of each row of C (n, p), in place; detail level l is shrunk at ``lam * level_weights[l - 1]``.

    The approximation band is left alone by l1/l0 unless penalised (the tree
    penalties carry that choice in their weights).
    """
    if penalty in ("l1", "l0"):
        start = 0 if penalize_approx else plan.n_approx
        if level_weights is None:
            D = np.ascontiguousarray(C[:, start:])
            _prox_rows(D, lam, penalty, None)
            C[:, start:] = D
            return
        for lo, hi, w in _level_ranges(plan, level_weights, start):
            D = np.ascontiguousarray(C[:, lo:hi])
            _prox_rows(D, lam * w, penalty, None)
            C[:, lo:hi] = D
    else:
        _prox_rows(C, lam, penalty, plan.level_tree(level_weights))


def _level_ranges(plan: _Plan, level_weights: np.ndarray, start: int) -> list[tuple[int, int, float]]:
    """Contiguous ranges of the flat vector from ``start``, each with its level's weight (approximation: 1)."""
    lv = plan.node_level
    edges = np.flatnonzero(np.diff(lv)) + 1
    bounds = np.concatenate([[0], edges, [lv.size]])
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        lo = max(int(lo), start)
        if lo < hi:
            out.append((lo, int(hi), 1.0 if lv[lo] == 0 else float(level_weights[lv[lo] - 1])))
    return out


# ---------------------------------------------------------------------------
# Noise level and lam
# ---------------------------------------------------------------------------


def estimate_sigma(image: ArrayLike, *, channel_axis: int | None = None) -> float | NDArray[np.float64]:
    """Estimate the standard deviation of additive white Gaussian noise.

    Robust median estimator of Donoho and Johnstone on the finest diagonal
    wavelet band (Daubechies 2), made local: the band is cut into 16 x 16
    blocks, each gives a median estimate, and the 10th percentile of those,
    divided by its value on pure noise (0.909), is returned. Blocks without
    texture or edges dominate the low percentiles, so image content leaks
    much less into the estimate than with one global median
    (:func:`skimage.restoration.estimate_sigma`). Images too small for 16
    blocks use the global median.

    Parameters
    ----------
    image : ndarray
        2-D image, or 2-D images stacked along leading axes (the estimate
        pools all of them), optionally with channels.
    channel_axis : int, optional
        Axis of the channels; one estimate per channel.

    Returns
    -------
    float or ndarray
        The estimate, or one per channel.

    Notes
    -----
    Measured on the sample images (``benchmarks/bench_denoise.py``), the
    estimate is still biased upwards at low noise, where texture is
    comparable to the noise: about +10% at sigma 5 (8-bit units; the global
    median: +21%), +6% at 10 (+9%), +2% at 25 and under 1% from 50 on.
    """
    img, axis = check_image(image, channel_axis=channel_axis)
    if axis is not None:
        img = np.moveaxis(img, axis, -1)
        return np.array([_noise_sigma(img[..., c]) for c in range(img.shape[-1])])
    return _noise_sigma(img)


_BLOCK = 16
_BLOCK_QUANTILE = 0.1
_BLOCK_BIAS = 0.909  # the 10th percentile of 16 x 16 block estimates on pure unit noise


def _noise_sigma(img: np.ndarray) -> float:
    planes = img.reshape(-1, *img.shape[-2:])
    bands = [pywt.dwt2(p, "db2", mode="symmetric")[1][2] for p in planes]
    b = _BLOCK
    blocks = [d[: d.shape[0] // b * b, : d.shape[1] // b * b].reshape(d.shape[0] // b, b, d.shape[1] // b, b)
              .swapaxes(1, 2).reshape(-1, b * b) for d in bands]
    blocks = np.concatenate(blocks)
    if len(blocks) < 16:
        detail = np.concatenate([d.ravel() for d in bands])
        return float(np.median(np.abs(detail)) / 0.6744897501960817)
    per_block = np.median(np.abs(blocks), axis=1) / 0.6744897501960817
    return float(np.quantile(per_block, _BLOCK_QUANTILE) / _BLOCK_BIAS)


def log_search(risk: Callable[[float], float], lo: float, hi: float, n_grid: int, n_golden: int) -> float:
    """Minimise ``risk(t)`` over t in [lo, hi]: a log-spaced grid, then golden section around its best point.

    ``n_grid + 2 + n_golden`` evaluations. Internal: shared with :mod:`restore.evaluate`.
    """
    grid = np.geomspace(lo, hi, n_grid)
    values = [risk(t) for t in grid]
    i = int(np.argmin(values))
    a = np.log(grid[max(i - 1, 0)])
    b = np.log(grid[min(i + 1, n_grid - 1)])
    best_t, best_v = grid[i], values[i]
    g = (np.sqrt(5) - 1) / 2
    x1, x2 = b - g * (b - a), a + g * (b - a)
    f1, f2 = risk(np.exp(x1)), risk(np.exp(x2))
    for _ in range(n_golden):
        if f1 < f2:
            b, x2, f2 = x2, x1, f1
            x1 = b - g * (b - a)
            f1 = risk(np.exp(x1))
        else:
            a, x1, f1 = x1, x2, f2
            x2 = a + g * (b - a)
            f2 = risk(np.exp(x2))
    for t, v in ((np.exp(x1), f1), (np.exp(x2), f2)):
        if v < best_v:
            best_t, best_v = t, v
    return float(best_t)


# SURE's search over t = lam / sigma: a log grid over this range, then golden-section steps around its best
# point. The best t of tree_l2 on natural images lies in 0.5 to 1.3 (benchmarks/calibrate_rule.py).
_SURE_T_RANGE = (0.05, 4.0)
_SURE_GRID = 9  # points of the grid
_SURE_GOLDEN = 8  # golden-section steps: the bracket shrinks to 0.618**8 = 2 % of its log-width
_SURE_EVALS = _SURE_GRID + 2 + _SURE_GOLDEN  # risk evaluations (one progress step each)


# SURE measures the risk on at most about this many coefficients (a 512 x 512 plane's): beyond, on a regular subset
# of whole trees (the risk is a sum over trees, so a subset estimates it), to bound its cost on volumes and photos.
_SURE_MAX_COEFFS = 1 << 19


def _sure_sample(c: np.ndarray, plan: _Plan, penalize_approx: bool,
                 noise_var: np.ndarray | None = None) -> tuple[np.ndarray, _Plan, np.ndarray | None]:
    """Coefficients of every k-th tree along some axes, laid out as the transform of a smaller array, and its plan.

    The trees of the unpenalised approximation band's coefficients are
    independent, so the shrinkage of the subset is the subset of the
    shrinkage. Strides double on the axis with the most roots until at most
    ``_SURE_MAX_COEFFS`` remain (or every axis is down to 2 roots); with
    ``penalize_approx`` (one group across the approximation band) or few
    coefficients, everything is kept.
    """
    if penalize_approx or plan.n_coeffs <= _SURE_MAX_COEFFS:
        return c, plan, noise_var
    bands = band_layout(plan.padded, plan.splits)
    roots = list(bands[0].shape)
    stride = [1] * len(roots)
    kept = plan.n_coeffs
    while kept > _SURE_MAX_COEFFS:
        a = int(np.argmax([-(-r // k) for r, k in zip(roots, stride, strict=True)]))
        if -(-roots[a] // stride[a]) <= 2:
            break
        stride[a] *= 2
        kept = plan.n_coeffs // plan.n_approx * int(np.prod([-(-r // k) for r, k in zip(roots, stride, strict=True)]))
    if kept == plan.n_coeffs:
        return c, plan, noise_var
    small = tuple(-(-r // k) * (p // r) for r, k, p in zip(roots, stride, plan.padded, strict=True))
    sub = _plan(small, plan.wavelet, plan.levels, penalize_approx)

    def take(v: np.ndarray) -> np.ndarray:
        parts = []
        for b in bands:
            # each axis of a band as (root, descendant within the root's block): keep every stride-th root
            split = [d for r, n in zip(roots, b.shape, strict=True) for d in (r, n // r)]
            block = v[b.start:b.start + b.size].reshape(split)
            block = block[tuple(sl for k in stride for sl in (slice(None, None, k), slice(None)))]
            parts.append(block.ravel())
        return np.concatenate(parts)

    return take(c), sub, None if noise_var is None else take(noise_var)


def _sure_lam(c: np.ndarray, sigma: float, penalty: str, plan: _Plan, penalize_approx: bool,
              rng: np.random.Generator, step: Callable[[], None] | None = None) -> float:
    """Lam minimising Stein's unbiased risk estimate of the shrinkage of c; ``step()`` after each evaluation."""
    return _sure(c, sigma, penalty, plan, penalize_approx, rng, step, per_level=False)[0]


def _sure(c: np.ndarray, sigma: float, penalty: str, plan: _Plan, penalize_approx: bool,
          rng: np.random.Generator, step: Callable[[], None] | None = None,
          per_level: bool = False, noise_var: np.ndarray | None = None) -> tuple[float, np.ndarray | None]:
    """Lam, and with ``per_level`` a weight per detail level, minimising SURE; ``step()`` after each evaluation.

    Per level: after the common lam, each level's weight (its lam over the
    common one) is searched in turn, finest first, by golden section over
    ``_LEVEL_RANGE`` on the same probe, keeping the others fixed (one sweep of
    coordinate descent; l1 gets SureShrink's exact threshold per level).

    ``noise_var``: the noise variance of each coefficient (:meth:`_Plan.coeff_var`)
    when it is not ``sigma**2`` everywhere. The shrinkage then works on the
    coefficients divided by their noise deviation (:func:`_shrink_scaled`),
    ``lam`` is in those units, and the risk (in the coefficients' own units)
    takes a probe of that variance (Stein's lemma for independent,
    unequal variances: ``sum(var_i * d c_hat_i / d c_i)``).
    """
    if sigma == 0:
        return 0.0, None
    if noise_var is not None:
        return _sure_scaled(c, penalty, plan, penalize_approx, rng, step, per_level, noise_var)
    if penalty == "l1":  # exact SURE (SureShrink): the divergence counts survivors
        start = 0 if penalize_approx else plan.n_approx
        lam = _sure_soft(c[start:], sigma)
        if not per_level or lam == 0:
            return lam, None
        ranges = _level_ranges(plan, np.ones(plan.level), start)
        w = np.ones(plan.level)
        for lo, hi, _ in ranges:
            if plan.node_level[lo] > 0:
                w[plan.node_level[lo] - 1] = _sure_soft(c[lo:hi], sigma) / lam
        return lam, w
    p = c.shape[0]
    probe = rng.standard_normal(p)
    eps = 1e-3 * sigma
    base = np.stack([c, c + eps * probe])
    work = np.empty_like(base)

    def risk(t: float, weights: np.ndarray | None = None) -> float:
        np.copyto(work, base)
        _shrink_rows(work, t * sigma, penalty, plan, penalize_approx, weights)
        div = probe @ (work[1] - work[0]) / eps
        if step is not None:
            step()
        return float(np.sum((work[0] - c) ** 2) - p * sigma**2 + 2 * sigma**2 * div)

    t, w = _minimize_risk(risk, plan.level, per_level)
    return t * sigma, w


def _minimize_risk(risk: Callable[..., float], n_levels: int, per_level: bool) -> tuple[float, np.ndarray | None]:
    """The threshold ``t`` of least risk and, with ``per_level``, one sweep of per-level weights after it."""
    t = log_search(risk, lo=_SURE_T_RANGE[0], hi=_SURE_T_RANGE[1], n_grid=_SURE_GRID, n_golden=_SURE_GOLDEN)
    if not per_level:
        return t, None
    w = np.ones(n_levels)
    for level in range(n_levels):

        def level_risk(m: float, level: int = level) -> float:
            trial = w.copy()
            trial[level] = m
            return risk(t, trial)

        w[level] = log_search(level_risk, lo=_LEVEL_RANGE[0], hi=_LEVEL_RANGE[1], n_grid=_LEVEL_GRID,
                              n_golden=_LEVEL_GOLDEN)
    return t, w


def _sure_scaled(c: np.ndarray, penalty: str, plan: _Plan, penalize_approx: bool, rng: np.random.Generator,
                 step: Callable[[], None] | None, per_level: bool,
                 noise_var: np.ndarray) -> tuple[float, np.ndarray | None]:
    """:func:`_sure` under noise of variance ``noise_var`` per coefficient, shrinking ``c / sqrt(noise_var)``.

    Monte-Carlo divergence for every penalty (l1 included): one probe of the
    noise's variance.
    """
    risk = _scaled_risk(c, penalty, plan, penalize_approx, rng, step, noise_var)
    return _minimize_risk(risk, plan.level, per_level)


def _scaled_risk(c: np.ndarray, penalty: str, plan: _Plan, penalize_approx: bool, rng: np.random.Generator,
                 step: Callable[[], None] | None, noise_var: np.ndarray) -> Callable[..., float]:
    """``risk(t, weights=None)``: SURE of shrinking ``c / sqrt(noise_var)`` at ``t`` (level weights), scaled back."""
    scale = np.sqrt(noise_var)
    probe = scale * rng.standard_normal(c.shape[0])
    eps = 1e-3
    base = np.stack([c, c + eps * probe]) / scale
    work = np.empty_like(base)
    total_var = float(np.sum(noise_var))

    def risk(t: float, weights: np.ndarray | None = None) -> float:
        np.copyto(work, base)
        _shrink_rows(work, t, penalty, plan, penalize_approx, weights)
        np.multiply(work, scale, out=work)
        div = probe @ (work[1] - work[0]) / eps
        if step is not None:
            step()
        return float(np.sum((work[0] - c) ** 2) - total_var + 2 * div)

    return risk


def _sure_soft(d: np.ndarray, sigma: float) -> float:
    """SureShrink's threshold of soft thresholding of ``d``: exact SURE over every candidate."""
    d2 = np.sort(np.abs(d)) ** 2
    n = d2.size
    cum = np.concatenate([[0.0], np.cumsum(d2)])
    k = np.arange(n + 1)  # k smallest coefficients fall below the threshold
    thr2 = np.concatenate([[0.0], d2])
    risk = cum + (n - k) * thr2 - n * sigma**2 + 2 * sigma**2 * (n - k)
    return float(np.sqrt(thr2[int(np.argmin(risk))]))


# Per-level SURE: each level's weight (its lam over the common lam) is searched over this range, a log grid of
# _LEVEL_GRID points then _LEVEL_GOLDEN golden-section steps (bracket 0.618**5 = 9 % of a grid step's log-width).
_LEVEL_RANGE = (0.25, 4.0)
_LEVEL_GRID = 5
_LEVEL_GOLDEN = 5
_LEVEL_EVALS = _LEVEL_GRID + 2 + _LEVEL_GOLDEN


def _rule_lam(sigma: float, data_range: float, penalty: str) -> float:
    s8 = 255.0 * sigma / data_range if data_range > 0 else 0.0
    t = float(np.interp(np.log(max(s8, 1e-12)), np.log(_RULE_SIGMAS), _RULE_T[penalty]))
    return lam_from_threshold(t, sigma, penalty)


def lam_from_threshold(t: float, sigma: float, penalty: str) -> float:
    """The lam whose threshold on a single coefficient is ``t * sigma``.

    ``lam = t * sigma`` for the convex penalties, ``(t * sigma)**2 / 2`` for
    ``l0`` and ``tree_l0``. Internal: shared with :mod:`restore.evaluate`.
    """
    return 0.5 * (t * sigma) ** 2 if penalty in ("l0", "tree_l0") else t * sigma


def _data_range(c: np.ndarray, plan: _Plan) -> float:
    """Range of the image seen through its approximation band (noise-free enough)."""
    a = c[: plan.n_approx] / np.sqrt(float(1 << sum(plan.levels)))  # the approximation's gain: 2 per halving
    lo, hi = np.percentile(a, [0.5, 99.5])
    return float(hi - lo)


@call_scope()
def choose_lam(
    image: ArrayLike,
    *,
    sigma: float | Sequence[float] | None = None,
    penalty: str = "tree_l2",
    method: LamMethod | None = None,
    wavelet: str = "db3",
    level: int | Sequence[int] | None = None,
    penalize_approx: bool = False,
    channel_axis: int | None = None,
    axes: Sequence[int] | None = None,
    noise: str = "gaussian",
    gain: float | None = None,
    per_level: bool | None = None,
    rng: int | np.random.Generator | None = None,
    progress: ProgressCallback | None = None,
) -> LamChoice:
    """Choose ``lam`` for :func:`denoise_wavelet_tree` from the noisy image alone.

    ``denoise_wavelet_tree(image, lam=choose_lam(image, **kw), **kw)`` gives
    the same result as ``denoise_wavelet_tree(image, **kw)`` with ``lam``
    chosen there; choosing first lets a caller scale the choice.

    Parameters
    ----------
    image : ndarray, shape (M, N), or (P, M, N) with three ``axes``
        One noisy plane or volume (grey, or colour with ``channel_axis``).
    sigma : float or sequence of float, optional
        Noise standard deviation (one, or one per channel); with
        ``noise='poisson-gaussian'``, of the read noise. Estimated when None.
    penalty : str
        One of ``restore.PENALTIES``.
    method : {'sure', 'rule'}, optional
        ``'sure'`` minimises Stein's unbiased risk estimate over lam (exact
        for ``l1``, Monte-Carlo with one Gaussian probe for ``tree_l2`` and
        ``tree_linf``; about 25 evaluations); ``'rule'`` uses ``lam`` as a
        function of ``sigma`` calibrated on the bundled images. Default:
        ``'sure'`` for the convex penalties, ``'rule'`` for ``l0`` and
        ``tree_l0`` (SURE needs a continuous estimator).
    wavelet, level, penalize_approx
        As in :func:`denoise_wavelet_tree`.
    channel_axis : int, optional
        Axis of the colour channels.
    axes, noise, gain
        As in :func:`denoise_wavelet_tree`; ``axes`` must name every
        spatial axis of ``image``. Under ``noise='poisson-gaussian'`` the
        choice is in units of each coefficient's noise deviation after the
        generalized Anscombe transform, as ``denoise_wavelet_tree`` reads a
        number then, and its ``sigma`` is the stabilised noise's, 1.
    per_level : bool, optional
        With SURE, also choose a weight per detail level (the lam of level
        ``l`` is ``lam * weight[l]``): after the common lam, one sweep of
        coordinate descent over the levels, finest first, each weight in
        [0.25, 4] by a log grid and golden section on the same probe (12
        more evaluations per level; l1 gets SureShrink's exact threshold per
        level). The weights never raise SURE's estimate above the single
        lam's. Default (None): off.
    rng : int or numpy.random.Generator, optional
        Seed of the SURE probe; default 0, so the choice is reproducible.
    progress : callable, optional
        ``progress(done, total)`` after each evaluation of SURE's risk; it
        may raise :class:`restore.Cancelled` to stop.

    Returns
    -------
    LamChoice
    """
    arr = np.asarray(image)
    n_axes = 2 if axes is None else len(_check_axes(axes, arr.ndim, None, channels_checked=False))
    check_image_layout(arr.shape, arr.dtype, channel_axis=channel_axis, spatial=n_axes, exact=True)
    if method is not None:
        check_choice("method", method, ("sure", "rule"), plural="methods")
    opts = _check_options(arr.shape, arr.dtype, sigma=sigma, lam=method, penalty=penalty, wavelet=wavelet,
                          level=level, penalize_approx=penalize_approx, cycle_spins=0, channel_axis=channel_axis,
                          axes=axes, noise=noise, gain=gain, per_level=per_level, wiener=None, rng=rng,
                          progress=progress)
    img, axis = check_image(arr, channel_axis=opts.c_axis, spatial=n_axes, exact=True)
    x = np.transpose(img, list(opts.sp_axes) + ([] if axis is None else [axis]))
    plan = _plan(x.shape[:n_axes], wavelet, opts.levels, opts.penalize_approx)
    method, n_channels, sigmas_given = opts.method, opts.n_channels, opts.sigmas
    if noise == "poisson-gaussian":
        model = _photon_model(x, opts.gain, opts.read_noise, axis is not None, dtype=arr.dtype)
        x, sigmas_given = anscombe(x, model.gain, model.sigma), [1.0] * n_channels
    channels = _to_channels(x, -1 if axis is not None else None)
    var_maps = (_stabilised_variance(channels, model, n_axes) if noise == "poisson-gaussian"
                else [None] * len(channels))
    sigmas = _channel_sigmas(sigmas_given, channels)
    steps = Steps(progress, len(channels) * _lam_steps(method, penalty, plan, per_level, noise == "poisson-gaussian"),
                  start=True)
    # as denoise_wavelet_tree does: SURE's probe afresh on each channel
    choices = [_choice_for_plane(ch, s, penalty, method, plan, penalize_approx, np.random.default_rng(opts.seed),
                                 steps, per_level, vm)
               for ch, s, vm in zip(channels, sigmas, var_maps, strict=True)]
    weights = tuple(None if w is None else tuple(float(v) for v in w) for _, w in choices)
    return LamChoice(lam=tuple(float(lm) for lm, _ in choices), sigma=tuple(float(s) for s in sigmas),
                     method=method, level_weights=weights if any(w is not None for w in weights) else None)


def _lam_for_plane(plane, sigma, penalty, method, plan, penalize_approx, gen, steps: Steps | None = None) -> float:
    """Lam of one channel, one for every level; ``steps()`` after the transform and after each evaluation."""
    return _choice_for_plane(plane, sigma, penalty, method, plan, penalize_approx, gen, steps, per_level=False)[0]


def _choice_for_plane(plane, sigma, penalty, method, plan, penalize_approx, gen, steps: Steps | None = None,
                      per_level: bool | None = None,
                      var_map: np.ndarray | None = None) -> tuple[float, np.ndarray | None]:
    """Lam of one channel and, by SURE, its level weights (None: all 1); ``steps()`` as :func:`_lam_steps` counts.

    With ``var_map`` (the noise variance of each sample), lam applies to the
    coefficients divided by their noise deviation (:func:`_shrink_scaled`).
    """
    step = steps if steps is not None else (lambda: None)
    per_level = _per_level(method, penalty, plan, per_level)
    c = plan.forward(plane)
    step()
    if method == "sure" and sigma == 0:  # no noise, nothing to shrink: the evaluations SURE would make are done
        if steps is not None:
            steps(_lam_steps(method, penalty, plan, per_level, var_map is not None) - 1)
        return 0.0, None
    if method == "sure":
        var = None if var_map is None else plan.coeff_var(var_map)
        c, plan, noise_var = _sure_sample(c, plan, penalize_approx, var)
    if method == "sure" and var_map is not None:
        return _sure(c, sigma, penalty, plan, penalize_approx, gen, step, per_level=per_level, noise_var=noise_var)
    if method == "sure" and penalty != "l1":
        return _sure(c, sigma, penalty, plan, penalize_approx, gen, step, per_level=per_level)
    if method == "sure":
        choice = _sure(c, sigma, penalty, plan, penalize_approx, gen, per_level=per_level)
    else:
        choice = (_rule_lam(sigma, _data_range(c, plan), penalty), None)
    step()
    return choice


def _per_level(method: str | None, penalty: str, plan: _Plan, per_level: bool | None = None) -> bool:
    """Whether SURE also sets a weight per level (``per_level``; None: the default, ``_PER_LEVEL_DEFAULT``)."""
    return method == "sure" and (_PER_LEVEL_DEFAULT if per_level is None else bool(per_level))


# Per-level SURE is opt-in for now: its gain over one lam is small on photographs and volumes (measured in the
# issue's report), and the Denoise widget passes lam as numbers (no level weights): it must follow first.
_PER_LEVEL_DEFAULT = False


def _lam_steps(method: str | None, penalty: str, plan: _Plan | None = None, per_level: bool | None = None,
               scaled: bool = False) -> int:
    """Progress steps of choosing lam for one channel: the transform, then each evaluation (l1 and the rule: one).

    ``scaled``: the noise variance varies (Poisson-Gaussian), and SURE is Monte-Carlo for l1 too.
    """
    if method is None:
        return 0
    if method != "sure" or (penalty == "l1" and not scaled):
        return 2
    levels = _LEVEL_EVALS * plan.level if plan is not None and _per_level(method, penalty, plan, per_level) else 0
    return 1 + _SURE_EVALS + levels


# ---------------------------------------------------------------------------
# Denoising
# ---------------------------------------------------------------------------


def denoise_wavelet_tree(
    image: ArrayLike,
    *,
    sigma: float | Sequence[float] | None = None,
    lam: float | Sequence[float] | LamMethod | LamChoice | None = None,
    penalty: str = "tree_l2",
    wavelet: str = "db3",
    level: int | Sequence[int] | None = None,
    penalize_approx: bool = False,
    cycle_spins: int = 0,
    channel_axis: int | None = None,
    axes: Sequence[int] | None = None,
    noise: str = "gaussian",
    gain: float | None = None,
    per_level: bool | None = None,
    wiener: bool | None = None,
    rng: int | np.random.Generator | None = None,
    progress: ProgressCallback | None = None,
    sliced_axes: Sequence[int] = (),
) -> NDArray[np.floating]:
    r"""Denoise an image or a volume by tree-structured shrinkage of its wavelet coefficients.

    Solves, for each plane (or volume, with three ``axes``) and channel,
    ``min_a 0.5 * ||W y - a||^2 + lam * Omega(a)`` where ``W`` is an
    orthonormal 2-D wavelet transform and ``Omega`` a penalty on the
    quad-tree of the coefficients (each detail coefficient is the parent of
    the four coefficients of the next finer level at the same place and
    orientation), and returns ``W^T a``. As ``W`` is orthonormal this is a
    single proximal operator, computed exactly.

    Parameters
    ----------
    image : ndarray or dask.array.Array
        Image of shape (M, N), or stacks of such planes along leading axes,
        with channels along ``channel_axis`` if given; with
        ``axes=(0, 1, 2)``, a volume (P, M, N). A Dask array gives a lazy Dask
        array, computed block by block with overlaps
        (:func:`dask.array.map_overlap`) of up to 32 voxels (256 pixels in
        2-D), so that it agrees with the in-memory result away from the
        volume's borders (exactly when the basis functions reach no further):
        blocks have the levels of the whole, its photon noise (estimated
        once, on a central part of at most 16 M voxels), and, with ``lam``
        chosen automatically, choose their own. Every setting is checked at
        the call; the values (NaN, inf) block by block. Integer images are
        converted to float in [0, 1] (:func:`skimage.util.img_as_float`);
        float images are neither rescaled nor clipped.
    sigma : float or sequence of float, optional
        Standard deviation of the noise, in image units (one value, or one
        per channel); with ``noise='poisson-gaussian'``, of its Gaussian
        (read noise) part. Estimated per plane and channel when None.
    lam : float, sequence of float, {'sure', 'rule'}, optional
        Regularisation, absolute (image units). A number (or one per
        channel) is used as is, on every level; ``'sure'`` and ``'rule'``
        choose it per plane as :func:`choose_lam` does (on planes, SURE also
        weighs each level); a :class:`LamChoice` from :func:`choose_lam`
        applies its lam and level weights; None picks ``'sure'`` for ``l1``,
        ``tree_l2``, ``tree_linf`` and ``'rule'`` for ``l0``, ``tree_l0``.
    penalty : {'tree_l2', 'tree_linf', 'tree_l0', 'l1', 'l0'}
        ``tree_l2`` (default) is the best on natural images; ``l1`` and
        ``l0`` are soft and hard thresholding; ``tree_l0`` is Donoho's
        CART-like dynamic programme.
    wavelet : str, default 'db3'
        An orthogonal PyWavelets wavelet (``'haar'``, ``'db3'``, ``'sym4'``...).
    level : int or sequence of int, optional
        Decomposition levels, or in 3-D one per axis of ``axes``, in its
        order (an anisotropic volume may have fewer along z: those levels
        then split y and x only, 4 children per node). Default: in 2-D an
        approximation band of about 16 x 16; in 3-D as many levels as leave at least 4 samples on the
        thinnest axis, at most 3, the same along every axis (so that a Dask
        volume's blocks and their overlaps do not grow with it).
    penalize_approx : bool, default False
        Whether the approximation band is penalised (its coefficients are
        otherwise unpenalised roots of the quad-tree).
    cycle_spins : int, default 0
        Average the estimates of this many circular shifts of the image
        (translation-invariant denoising; 0 or 1 means no shift).
    channel_axis : int, optional
        Axis of the colour channels. Three channels are denoised in an
        orthonormal opponent colour space (luminance and two colour
        differences), other counts channel by channel.
    axes : sequence of int, optional
        The spatial axes transformed together, two or three (none of them
        the channel axis). Default: the last two non-channel axes, plane by
        plane. With three, the transform is 3-D and each detail coefficient
        has 8 children at the next finer level (one octree per orientation,
        7 of them); the other axes are stacked.
    noise : {'gaussian', 'poisson-gaussian'}
        ``'poisson-gaussian'``: photon noise of ``gain`` image units per
        photon plus Gaussian read noise ``sigma``; the image goes through
        the generalized Anscombe transform, is denoised at its stabilised
        noise and comes back through its exact unbiased inverse
        (:mod:`restore.noise`). That noise has variance 1 where a sample
        expects a few photons or more, and far less on dark backgrounds:
        its variance per sample is read from a pilot (the data's local
        mean over 5 samples a side), each coefficient is divided by its own
        noise deviation before shrinkage (and multiplied back after), SURE
        measures the risk under that variance, and the Wiener stage uses
        it. ``lam``, when a number, is then in units of each coefficient's
        noise deviation.
    gain : float, optional
        Image units per photon (``noise='poisson-gaussian'``). ``gain`` and
        ``sigma`` are estimated from the image's noise-level function when
        None (:func:`restore.estimate_noise`; the estimate is logged at INFO
        level on the ``restore.denoise`` logger).
    per_level : bool, optional
        As in :func:`choose_lam`: with SURE, also choose a weight per detail level (the lam of level
        ``l`` is ``lam * weight[l]``): after the common lam, one sweep of
        coordinate descent over the levels, finest first, each weight in
        [0.25, 4] by a log grid and golden section on the same probe (12
        more evaluations per level; l1 gets SureShrink's exact threshold per
        level). The weights never raise SURE's estimate above the single
        lam's. Default (None): off.
    wiener : bool, optional
        Refine the tree estimate by empirical Wiener filtering: the noisy
        coefficients in another orthonormal basis (with the same levels) are
        scaled by ``p**2 / (p**2 + sigma**2)``, ``p`` the pilot's
        coefficient. Two passes, each averaged over shifts: in Haar with the
        tree estimate as pilot (``cycle_spins / 2`` shifts), then in
        Daubechies 2 with the first pass as pilot (``2 * cycle_spins``
        shifts); the tree estimate then takes ``cycle_spins / 4`` shifts.
        Default (None): on for volumes (three ``axes``), off for planes.
    rng : int, sequence of int, numpy.random.SeedSequence or numpy.random.Generator, optional
        Seed of the SURE probe, which starts afresh from it on each plane
        and channel (default 0: reproducible results; a Generator gives one
        seed drawn from it).
    progress : callable, optional
        ``progress(done, total)`` after each step: each evaluation of SURE's
        risk, each transform and each shrinkage of a group of shifts (under
        a second each on a 4096 x 4096 plane). It may raise
        :class:`restore.Cancelled` to stop; nothing is returned then.
    sliced_axes : sequence of int, default ()
        Dask arrays only: transformed axes that a viewer shows one slice at
        a time (napari's sliders, such as z). The result's blocks keep to the
        input's chunks along them (at least ``2**level`` samples), so that
        computing one slice computes the blocks of one chunk's depth and their
        overlap, not up to 128 samples (when a chunk and its overlaps span
        the axis, one block spans it); computing the whole then does more
        redundant work along these axes (a block's overlap is up to 32
        samples each side, whatever its core). Default: blocks sized for
        computing the whole.

    Returns
    -------
    ndarray
        Denoised image of the input's shape and float dtype (float64 for
        integer input). The input is never modified.

    Raises
    ------
    ValueError
        Unknown penalty or wavelet, non-orthogonal wavelet, NaN or inf in
        the image, negative sigma or lam, SURE requested for a non-convex
        penalty, wrong number of per-channel values, planes too small,
        levels too deep for an axis; under photon noise, an image whose
        mean is more than 3 read-noise deviations below 0 (a camera offset)
        or a gain above an integer image's largest value (a gain in
        counts). All before any work, for Dask arrays too (their values,
        block by block).

    Notes
    -----
    Any image size works: each plane (volume) is padded symmetrically to a
    multiple of ``2**level`` along each axis, transformed with
    ``mode='periodization'`` (orthonormal then) and cropped back. Cycle
    spinning shifts along every transformed axis. With ``lam`` given, the result equals
    transform, :func:`restore.prox`, inverse transform (and ``wiener=False``
    for volumes).

    The Wiener stage [4]_ uses the tree estimate as the oracle of each
    coefficient's energy in another basis; the bases err in different
    places, so it removes part of the tree estimate's artefacts, and its
    shifts make the result more translation invariant than the tree
    estimate's alone, at about the cost of the tree estimate's shifts it
    replaces.

    A volume of more than 2**25 voxels (per channel) is denoised in the
    overlapping blocks a Dask array of it would be, two at a time: whole,
    it would take about 160 bytes a voxel; in blocks, the input, the output
    and a bounded working memory per block (``benchmarks/bench_volume.py
    --part memory``). The result is then the Dask array's (with lam chosen
    automatically, one per block; under photon noise, the gain and read
    noise are estimated, and checked, on a central part of at most 16 M
    voxels). ``progress`` is then called from the blocks' threads, one call
    at a time.

    SURE measures the risk on at most about 2**19 coefficients: on larger
    volumes and images, on a regular subset of whole trees (every second
    root along the axes with the most roots), which estimates the risk of
    all of them at a fraction of the cost.

    SURE picks ``lam`` within about 0.1 dB of the best possible value on
    natural images (``benchmarks/bench_denoise.py`` measures it). The opponent colour transform is
    orthonormal, so white noise stays white with the same sigma in each
    of its channels.

    References
    ----------
    .. [1] R. Jenatton, J. Mairal, G. Obozinski, F. Bach, "Proximal Methods
       for Hierarchical Sparse Coding", JMLR 12, 2011 (Table 1).
    .. [2] C. Stein, "Estimation of the mean of a multivariate normal
       distribution", Annals of Statistics 9(6), 1981.
    .. [3] M. Makitalo and A. Foi, "Optimal inversion of the generalized
       Anscombe transformation for Poisson-Gaussian noise", IEEE Trans.
       Image Processing 22(1), 2013.
    .. [4] H. Ghael, A. Sayeed, R. Baraniuk, "Improved wavelet denoising via
       empirical Wiener filtering", Proc. SPIE 3169, 1997.

    Examples
    --------
    >>> import numpy as np
    >>> from skimage import data
    >>> from restore import denoise_wavelet_tree
    >>> clean = data.camera()[:256, :256] / 255.0
    >>> rng = np.random.default_rng(0)
    >>> noisy = clean + 0.1 * rng.standard_normal(clean.shape)
    >>> out = denoise_wavelet_tree(noisy, sigma=0.1)
    >>> bool(np.mean((out - clean) ** 2) < 0.25 * np.mean((noisy - clean) ** 2))
    True
    """
    lazy = _is_dask(image)
    arr = image if lazy else np.asarray(image)
    opts = _check_options(arr.shape, arr.dtype, sigma=sigma, lam=lam, penalty=penalty, wavelet=wavelet, level=level,
                          penalize_approx=penalize_approx, cycle_spins=cycle_spins, channel_axis=channel_axis,
                          axes=axes, noise=noise, gain=gain, per_level=per_level, wiener=wiener, rng=rng,
                          progress=progress, sliced_axes=sliced_axes)
    work = {"penalty": penalty, "wavelet": wavelet, "noise": noise, "per_level": per_level, "wiener": wiener}
    if lazy:
        return _denoise_dask(arr, opts, progress=progress, **work)
    if len(opts.sp_axes) == 3 and np.prod([arr.shape[a] for a in opts.sp_axes]) > _WHOLE_MAX_VOXELS:
        return _denoise_blocks(arr, opts, progress=progress, **work)
    return _denoise_array(arr, opts, progress=progress, **work)


@call_scope()
def _denoise_array(arr: np.ndarray, opts: _Options, *, penalty: str, wavelet: str, noise: str,
                   per_level: bool | None, wiener: bool | None, progress: ProgressCallback | None,
                   block: bool = False) -> np.ndarray:
    """:func:`denoise_wavelet_tree` of an array in memory, on settings checked by :func:`_check_options`.

    ``block``: one block of a Dask array, whose photon model was checked and
    estimated on the whole (its own sample may be dark: no check there).
    """
    img, c_axis = check_image(arr, channel_axis=opts.c_axis, spatial=len(opts.sp_axes))
    n_shifts, method, lams_given, weights_given = opts.n_shifts, opts.method, opts.lams, opts.level_weights
    sp_axes, penalize_approx = opts.sp_axes, opts.penalize_approx
    plan = _plan(tuple(int(img.shape[a]) for a in sp_axes), wavelet, opts.levels, penalize_approx)
    # channels last, the transformed axes just before them, the rest (stacks of planes or volumes) first
    order = [i for i in range(img.ndim) if i not in sp_axes and i != c_axis] + list(sp_axes)
    order += [] if c_axis is None else [c_axis]
    x = np.transpose(img, order)
    n_sp, n_channels, sigmas_given = len(sp_axes), opts.n_channels, opts.sigmas
    if noise == "poisson-gaussian":
        model = _photon_model(x, opts.gain, opts.read_noise, c_axis is not None, check=not block,
                              dtype=None if block else arr.dtype)
        x = anscombe(x, model.gain, model.sigma)
        sigmas_given = [1.0] * n_channels  # the transform's stabilised noise
    out = np.empty(x.shape, dtype=np.float64)
    lead = x.shape[:-n_sp - 1] if c_axis is not None else x.shape[:-n_sp]
    use_wiener = _use_wiener(wiener, n_sp)
    # same padding, levels and layout in other bases: no tree needed there
    passes = [(replace(plan, wavelet=w), _wiener_shifts(n_shifts, k)) for w, k in _WIENER_PASSES] if use_wiener else []
    tree_shifts = _pilot_shifts(n_shifts) if passes else n_shifts
    per_channel = (_lam_steps(method, penalty, plan, per_level, noise == "poisson-gaussian")
                   + _shrink_steps(tree_shifts) + (sigmas_given is None and (method is not None or use_wiener))
                   + sum(2 * k for _, k in passes))
    steps = Steps(progress, int(np.prod(lead, dtype=np.int64)) * n_channels * per_channel, start=True)
    for idx in np.ndindex(*lead):
        plane = x[idx]
        channels = _to_channels(plane, -1 if c_axis is not None else None)
        var_maps = (_stabilised_variance(channels, model, n_sp) if noise == "poisson-gaussian"
                    else [None] * len(channels))
        if method is not None or passes:
            sigmas = _channel_sigmas(sigmas_given, channels)
            if sigmas_given is None:
                steps(len(channels))
        if method is None:
            choices = [(lm, None if weights_given is None or weights_given[c] is None else np.array(weights_given[c]))
                       for c, lm in enumerate(lams_given)]
        else:
            # SURE's probe starts afresh on each plane and channel: a plane denoises as on its own, in any block
            choices = [_choice_for_plane(ch, s, penalty, method, plan, penalize_approx,
                                         np.random.default_rng(opts.seed), steps, per_level, vm)
                       for ch, s, vm in zip(channels, sigmas, var_maps, strict=True)]
        den = [_denoise_plane(ch, lm, penalty, plan, penalize_approx, tree_shifts, steps, w, vm)
               for ch, (lm, w), vm in zip(channels, choices, var_maps, strict=True)]
        for wiener_plan, k in passes:
            den = [_wiener_plane(ch, pilot, s, wiener_plan, k, steps, vm)
                   for ch, pilot, s, vm in zip(channels, den, sigmas, var_maps, strict=True)]
        out[idx] = _from_channels(den, c_axis is not None)
    if noise == "poisson-gaussian":
        out = inverse_anscombe(out, model.gain, model.sigma)
    out = np.transpose(out, np.argsort(order))
    return restore_dtype(out, arr.dtype)


@dataclass(frozen=True)
class _Options:
    """The validated settings of :func:`denoise_wavelet_tree`, read from the image's shape and dtype alone."""

    c_axis: int | None
    sp_axes: tuple[int, ...]  # increasing
    levels: tuple[int, ...]  # one per axis of sp_axes
    penalize_approx: bool
    n_shifts: int
    n_channels: int
    method: str | None  # 'sure' or 'rule'; None: lam given
    lams: list[float] | None
    level_weights: list | None
    sigmas: list[float] | None  # Gaussian noise, one per channel; None: estimated
    gain: float | None  # Poisson-Gaussian
    read_noise: float | None  # Poisson-Gaussian
    seed: Any  # of numpy.random.default_rng
    sliced: tuple[int, ...] = ()  # transformed axes shown one slice at a time (Dask blocks keep to the chunks)


def _check_options(shape, dtype, *, sigma, lam, penalty, wavelet, level, penalize_approx, cycle_spins, channel_axis,
                   axes, noise, gain, per_level, wiener, rng, progress, sliced_axes=()) -> _Options:
    """Every check of :func:`denoise_wavelet_tree` that needs no pixel: in memory and, at the call, for Dask."""
    ndim = len(shape)
    n_axes = 2 if axes is None else len(_check_axes(axes, ndim, None, channels_checked=False))
    c_axis = check_image_layout(shape, dtype, channel_axis=channel_axis, spatial=n_axes)
    n_shifts = max(check_int("cycle_spins", cycle_spins, min=0), 1)
    check_callable("progress", progress)
    check_choice("noise", noise, NOISE_MODELS, plural="noise models")
    check_choice("wiener", wiener, (None, True, False), plural="values")
    check_choice("per_level", per_level, (None, True, False), plural="values")
    if gain is not None and noise != "poisson-gaussian":
        raise ValueError(f"gain={gain!r} applies to noise='poisson-gaussian' only, got noise={noise!r}")
    sp_axes = _check_axes(axes, ndim, c_axis)
    if axes is not None and np.ndim(level) == 1 and len(level) == len(sp_axes):
        # one level per axis, in the order of ``axes``: read in the increasing order of the axes
        level = tuple(level[i] for i in np.argsort([int(a) % ndim for a in axes]))
    n_channels = shape[c_axis] if c_axis is not None else 1
    check_choice("penalty", penalty, PENALTIES, plural="penalties")
    levels = _levels(tuple(int(shape[a]) for a in sp_axes), wavelet, level)
    n_levels = max(levels)
    weights, lams = None, None
    if lam is None or isinstance(lam, str):
        method = _resolve_method(lam, penalty)
    elif isinstance(lam, LamChoice):
        method, lams = None, check_per_channel("lam", lam.lam, n_channels)
        weights = lam.level_weights or None
        if weights is not None and (len(weights) != n_channels or any(
                w is not None and len(w) != n_levels for w in weights)):
            raise ValueError(f"lam is a LamChoice with level weights for {len(weights)} channel(s) of "
                             f"another transform: expected {n_channels} channel(s) of {n_levels} levels")
    else:
        method, lams = None, check_per_channel("lam", lam, n_channels)
    sigmas = read_noise = None
    if noise == "poisson-gaussian":
        if gain is not None:
            gain = check_number("gain (image units per photon)", gain, min=0.0, strict=True)
            if not 1 / _SQUARE_MAX <= gain <= _SQUARE_MAX:
                raise ValueError(f"gain (image units per photon) {gain:g} is out of range: its square or its inverse "
                                 f"overflows float64 (between {1 / _SQUARE_MAX:.3g} and {_SQUARE_MAX:.3g})")
        if sigma is not None:
            if np.ndim(sigma) != 0:
                raise ValueError(f"sigma must be one number with noise='poisson-gaussian' (the camera's read "
                                 f"noise, shared by all channels), got {sigma!r}")
            read_noise = check_number("sigma", sigma, min=0.0)
    elif sigma is not None:
        sigmas = check_per_channel("sigma", sigma, n_channels)
    for s in ([] if sigmas is None else sigmas) + ([] if read_noise is None else [read_noise]):
        if s > _SQUARE_MAX:
            raise ValueError(f"sigma {s:g} is too large: its square overflows float64 (at most {_SQUARE_MAX:.3g})")
    return _Options(c_axis, sp_axes, levels, bool(penalize_approx), n_shifts, n_channels, method, lams, weights,
                    sigmas, gain, read_noise, _seed(rng), _check_sliced(sliced_axes, ndim, sp_axes))


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


# The largest noise parameter whose square float64 holds (the risk and the Anscombe transform square them)
_SQUARE_MAX = float(np.sqrt(np.finfo(np.float64).max))


def _seed(rng) -> Any:
    """The seed from which SURE's probe starts afresh on each plane and channel.

    ``rng`` as :func:`numpy.random.default_rng` takes it (default 0), or one
    drawn from a Generator or bit generator (they have a state, not a seed).
    """
    if rng is None:
        return 0
    if isinstance(rng, (np.random.Generator, np.random.BitGenerator)):
        return int(np.random.default_rng(rng).integers(2**63))
    try:
        if isinstance(rng, bool):
            raise TypeError
        np.random.default_rng(rng)
    except (TypeError, ValueError):
        raise ValueError(f"rng must be None, a seed of numpy.random.default_rng (an integer >= 0, a sequence of "
                         f"them, a SeedSequence) or a Generator, got {rng!r}") from None
    return rng


def _check_gain_scale(gain: float, x: np.ndarray, dtype: np.dtype) -> None:
    """Refuse a gain above an integer image's largest value: it was given in counts, not in [0, 1] units."""
    if np.dtype(dtype).kind not in "ui":
        return
    top = float(x.max())
    if 0 < top < gain:
        scale = float(np.iinfo(dtype).max)
        raise ValueError(f"gain={gain!r} (image units per photon) is larger than the image's largest value {top:.4g}: "
                         f"every sample would hold less than one photon. Integer images are read in [0, 1] "
                         f"(divided by {scale:.0f} for {np.dtype(dtype)}, as skimage.util.img_as_float does): "
                         f"give gain in those units (a gain of {gain!r} counts per photon is {gain / scale:.4g})")


def _check_axes(axes, ndim: int, channel_axis: int | None, channels_checked: bool = True) -> tuple[int, ...]:
    """The transformed axes, non-negative and increasing: two or three, none of them the channel axis."""
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


def _photon_model(x: np.ndarray, gain: float | None, sigma: float | None, has_channels: bool, check: bool = True,
                  dtype: np.dtype | None = None) -> NoiseEstimate:
    """Gain and read noise as given (checked by :func:`_check_options`), the missing ones estimated (and logged).

    ``check``: refuse an image whose mean is more than
    :data:`_OFFSET_SIGMAS` read-noise deviations below 0 (a camera offset
    left in, or taken off twice): zero-mean read noise cannot put it there.
    ``dtype``: the caller's image's, to refuse a gain given in counts for
    an integer image (:func:`_check_gain_scale`).
    """
    if gain is not None and dtype is not None:
        _check_gain_scale(gain, x, dtype)
    if gain is None or sigma is None:
        est = estimate_noise(np.moveaxis(x, -1, 0) if has_channels else x)
        _log.info("estimated Poisson-Gaussian noise: gain %.4g, sigma %.4g", est.gain, est.sigma)
        if gain is None:
            if not est.gain > 0:
                raise ValueError("could not estimate a gain > 0 from the image (its noise does not grow with "
                                 "its level): give gain, or use noise='gaussian'")
            gain = est.gain
        sigma = est.sigma if sigma is None else sigma
    mean = float(np.mean(x)) if check else 0.0
    if mean < -_OFFSET_SIGMAS * sigma or (sigma == 0 and mean < 0):
        raise ValueError(f"noise='poisson-gaussian' reads the image as photons times gain, from 0 (no light): its "
                         f"mean {mean:.4g} is below 0 by more than {_OFFSET_SIGMAS:g} read-noise deviations "
                         f"(sigma {sigma:.4g}). Subtract the camera offset so that no light reads about 0, or use "
                         f"noise='gaussian'")
    return NoiseEstimate("poisson-gaussian", float(sigma), float(gain))


# How far below 0 (in read-noise deviations) the mean of an image may lie under photon noise: a mean over many
# samples of zero-mean read noise lies far closer to 0, a camera offset (tens to hundreds of counts) far below.
_OFFSET_SIGMAS = 3.0


# Side (samples) of the box averaging the stabilised data into the pilot of its noise variance: its mean of
# 125 voxels (25 pixels in 2-D) has a deviation of 0.09 (0.2) stabilised units, and spots a few voxels wide keep
# most of their counts in it.
_PILOT_WINDOW = 5


def _stabilised_variance(channels: list[np.ndarray], model: NoiseEstimate, n_axes: int) -> list[np.ndarray]:
    """Noise variance of every sample of the Anscombe-stabilised channels, from a local-mean pilot.

    The generalized Anscombe transform leaves a variance well below 1 where
    a sample expects under about 2 photons (dark backgrounds): the pilot's
    expected counts, a box mean of the stabilised data through the exact
    inverse, give it (:func:`restore.noise._anscombe_variance`). A pilot
    under one photon in its whole box is read as that one photon: below it
    the data cannot tell the counts apart, and the variance must not vanish.
    Three channels are in the opponent colour space: their variances mix.
    """
    from scipy import ndimage

    from .noise import _anscombe_variance

    has_channels = len(channels) > 1
    z = _from_channels(channels, has_channels)
    size = (_PILOT_WINDOW,) * n_axes + ((1,) if has_channels else ())
    pilot = inverse_anscombe(ndimage.uniform_filter(z, size, mode="reflect"), model.gain, model.sigma)
    floor = model.gain / _PILOT_WINDOW**n_axes  # one photon over the box, in image units
    var = _anscombe_variance(np.maximum(pilot, floor), model.gain, model.sigma)
    if not has_channels:
        return [var]
    if var.shape[-1] == 3:
        var = var @ (_OPPONENT**2).T  # each opponent channel sums its colours' variances, weights squared
    return [np.ascontiguousarray(var[..., c]) for c in range(var.shape[-1])]


def _is_dask(a) -> bool:
    return type(a).__module__.startswith("dask.") and hasattr(a, "map_overlap")


def _overlap(wavelet: str, levels: int) -> int:
    """Exact reach of a Dask block's border along an axis with ``levels`` levels: its deepest basis functions.

    A coarsest coefficient spans ``(L - 1) * (2**levels - 1) + 1`` samples for a
    filter of length ``L``, and its tree group no more than one further
    coarsest cell (``2**levels``): beyond that a block's border cannot reach
    its interior.
    """
    return (pywt.Wavelet(wavelet).dec_len - 1) * ((1 << levels) - 1) + (1 << levels)


# Overlap of Dask blocks, in samples along each axis, at most, by number of transformed axes. Volumes: past 32,
# what a border changes in the interior is far below the 0.05 dB the lazy result promises (the deep, wide basis
# functions carry little of a denoised volume), and the exact reach of the defaults (87 voxels: three levels of
# db3, then the Wiener passes) would make blocks of ~7x their core and the work with them. Planes have deeper
# default levels (5 on 512 x 512) whose smooth, wide basis functions do carry the image: 256 covers the exact reach
# of 5 levels of db3 (187). Tested by the agreement of lazy and in-memory results (test_volume*.py).
_MAX_OVERLAP = {2: 256, 3: 32}
# Cores of the Dask blocks span at least this many overlaps along each axis: the redundant work of a block,
# (1 + 2 / 4)**3 = 3.4 times its core in 3-D, stays bounded whatever the input's chunks.
_CORE_PER_OVERLAP = 4
# ... and at most this many samples along each axis: a block's memory (about 150 bytes a voxel at the volume
# defaults, so 1.1 GB for a core of 128**3 with overlaps of 32; planes of 1536 x 1536 with their overlaps hold
# 2.4 M pixels) stays bounded whatever the input's chunks (planes of 2048 x 2048 are common in microscopy stores).
_MAX_CORE = {2: 1024, 3: 128}


def _block_plan(chunk: int, n: int, levels: int, reach: int, n_axes: int = 3) -> tuple[int, int]:
    """Core size and overlap of Dask blocks along an axis of length ``n`` whose chunks are ``chunk`` long.

    Blocks start on the dyadic grid of the whole (a multiple of ``2**levels``
    from its origin), or each would be decomposed like a shifted copy: both
    are multiples of ``2**levels``. The core is the input's chunk when it
    spans :data:`_CORE_PER_OVERLAP` overlaps to :data:`_MAX_CORE` samples (of ``n_axes``),
    else the fewest of its chunks merged, or the fewest parts it splits
    into, that do, so that blocks keep to the chunks of the store they came
    from; with none, the largest multiple of ``2**levels`` within
    :data:`_MAX_CORE`.
    """
    step = 1 << levels
    depth = min(-(-min(reach, _MAX_OVERLAP[n_axes]) // step) * step, n)
    low, high = max(step, _CORE_PER_OVERLAP * depth), max(step, _MAX_CORE[n_axes] // step * step)
    merged = [chunk * m for m in range(1, high // chunk + 1)]
    split = [chunk // k for k in range(2, chunk + 1) if chunk % k == 0]
    fits = [c for c in merged + split if c % step == 0 and low <= c <= high]
    return min(fits[0] if fits else high, n), depth


def _denoise_dask(image, opts: _Options, *, noise: str, wiener: bool | None, progress: ProgressCallback | None,
                  block_steps: BlockSteps | None = None, **work: Any):
    """Lazy :func:`denoise_wavelet_tree` of a Dask array: overlapping blocks (``dask.array.map_overlap``).

    ``opts`` are the call's validated settings; ``block_steps``, when given, takes the
    progress of each block (:func:`_denoise_blocks`). Every block has the levels of
    the whole and its photon noise (estimated here once, on a sample, when
    not given), so that blocks differ from the whole only near their borders
    and by their own choice of lam.
    """
    if progress is not None:
        raise ValueError("progress is not available for Dask arrays: use Dask's own diagnostics "
                         "(dask.diagnostics.ProgressBar or the distributed dashboard)")
    ndim, c_axis, sp_axes, lv = image.ndim, opts.c_axis, opts.sp_axes, opts.levels
    wavelet = work["wavelet"]
    depth = {a: 0 for a in range(ndim)}
    chunks = {a: -1 for a in range(ndim) if a == c_axis}  # every block holds whole channels
    # ... and one plane (volume) of a stack: computing one computes no other
    chunks.update({a: 1 for a in range(ndim) if a != c_axis and a not in sp_axes and max(image.chunks[a]) > 1})
    sliced: dict[int, int] = {}  # sliced axis -> core of its blocks
    for a, n in zip(sp_axes, lv, strict=True):
        reach = _overlap(wavelet, n) + (sum(_overlap(w, n) for w, _ in _WIENER_PASSES)
                                        if _use_wiener(wiener, len(sp_axes)) else 0)
        sizes = image.chunks[a]
        core, depth[a] = _block_plan(sizes[0], int(image.shape[a]), n, reach, len(sp_axes))
        if a in opts.sliced:  # one slice computes the blocks of one chunk (on the dyadic grid) and their overlap
            step, length = 1 << n, int(image.shape[a])
            core = min(max(step, sizes[0] // step * step), _MAX_CORE[len(sp_axes)])
            # ... or of the whole axis when a chunk's overlaps reach it anyway: the same work for the first slice,
            # none for the others
            sliced[a] = length if core + 2 * depth[a] >= length else core
            continue
        if any(c != core for c in sizes[:-1]) or sizes[-1] > core:
            chunks[a] = core
    arr = image.rechunk(chunks) if chunks else image
    if noise == "poisson-gaussian" and (opts.gain is None or opts.read_noise is None):
        model = _photon_model(_noise_sample(image, sp_axes), opts.gain, opts.read_noise, False)
        opts = replace(opts, gain=model.gain, read_noise=model.sigma)
    dtype = output_dtype(arr.dtype)

    def block(b):  # the settings of the whole, its levels included, whatever the block's size
        if block_steps is None:
            return _denoise_array(b, opts, noise=noise, wiener=wiener, progress=None, block=True, **work)
        with block_steps.block() as report:
            return _denoise_array(b, opts, noise=noise, wiener=wiener, progress=report, block=True, **work)

    def overlapping(x):
        return x.map_overlap(block, depth=depth, boundary="none", dtype=dtype, meta=np.empty((0,) * ndim, dtype))

    if not sliced:
        return overlapping(arr)
    # Dask's overlap cannot be deeper than a block's core: along the sliced axes, each core is cut out with its
    # overlap, as one chunk, and its blocks overlap along the other axes only
    deep = {a: depth[a] for a in sliced}
    depth.update({a: 0 for a in sliced})

    def piece(region: dict[int, tuple[int, int]]):
        box = tuple(slice(max(0, region[a][0] - deep[a]), min(arr.shape[a], region[a][1] + deep[a]))
                    if a in region else slice(None) for a in range(ndim))
        out = overlapping(arr[box].rechunk({a: -1 for a in region}))
        return out[tuple(slice(region[a][0] - box[a].start, region[a][1] - box[a].start) if a in region
                         else slice(None) for a in range(ndim))]

    def along(axes: list[int], region: dict[int, tuple[int, int]]):
        if not axes:
            return piece(region)
        a, rest = axes[0], axes[1:]
        starts = range(0, int(arr.shape[a]), sliced[a])
        parts = [along(rest, {**region, a: (s0, min(s0 + sliced[a], int(arr.shape[a])))}) for s0 in starts]
        return parts[0] if len(parts) == 1 else da.concatenate(parts, axis=a)

    import dask.array as da

    return along(sorted(sliced), {})


# Volumes of more voxels than this (per channel) are denoised in memory as Dask arrays are, in overlapping blocks:
# transformed whole, a volume takes about 140 to 200 bytes a voxel (tree, transforms, Wiener stage), 5 to 7 GB here,
# and a block of the defaults about 1.3 GB whatever the volume.
_WHOLE_MAX_VOXELS = 1 << 25  # 33.5 M voxels, 128 x 512 x 512
# Blocks computed at once (each on a thread of its own, its shrinkage on all of them): with one per CPU, a many-core
# machine's peak would pass the whole volume's
_BLOCKS_AT_ONCE = 2


@call_scope()
def _denoise_blocks(arr: np.ndarray, opts: _Options, *, noise: str, wiener: bool | None,
                    progress: ProgressCallback | None, **work: Any) -> np.ndarray:
    """:func:`denoise_wavelet_tree` of a volume in memory beyond :data:`_WHOLE_MAX_VOXELS`, in blocks.

    The blocks of :func:`_denoise_dask`, computed into the output, with progress and cancellation inside
    each block (:class:`restore._progress.BlockSteps`). The values are checked up front, and the photon
    model on the central part the Dask path reads. When a block fails or the call is cancelled, the other
    blocks stop at their next step, and the call returns once they have.
    """
    import dask.array as da

    check_finite(arr)  # as the whole path checks it, before any block runs
    image = da.from_array(arr, chunks=arr.shape, name=False)  # name=False: no hash of the whole volume
    if noise == "poisson-gaussian":
        model = _photon_model(_noise_sample(image, opts.sp_axes), opts.gain, opts.read_noise, False, dtype=arr.dtype)
        opts = replace(opts, gain=model.gain, read_noise=model.sigma)
    out = np.empty(arr.shape, dtype=output_dtype(arr.dtype))
    steps = BlockSteps(progress)
    lazy = _denoise_dask(image, opts, noise=noise, wiener=wiener, progress=None, block_steps=steps, **work)
    try:
        steps.start(int(np.prod(lazy.numblocks)))
        da.store(lazy, out, lock=False, scheduler="threads", num_workers=min(default_num_threads(), _BLOCKS_AT_ONCE))
    except BaseException:
        first = steps.stop_and_wait()
        if first is None:
            raise
        try:
            raise first from None  # what failed first, not what it stopped in the other blocks
        finally:
            del first  # this frame is in its traceback: no reference cycle to keep the blocks' arrays
    steps.report()  # the end, whatever the blocks' last steps said
    return out


def _noise_sample(image, sp_axes: tuple[int, ...]) -> np.ndarray:
    """A bounded central part of a Dask array (:func:`restore._stores.noise_sample`), as the blocks read it.

    Float as :func:`check_image` makes it, in the layout of the photon model
    (other axes first, the transformed axes last); one channel.
    """
    from ._stores import noise_sample

    sample = noise_sample(image, sp_axes)  # one index, the middle one, along the other axes and the channels
    x, _ = check_image(sample.astype(image.dtype, copy=False), spatial=min(2, len(sp_axes)))
    return x


def _shift_groups(n_shifts: int, ndim: int = 2) -> list[list[tuple[int, ...]]]:
    """The shifts in groups of one per thread: each group is shrunk as one batch (one row per thread)."""
    shifts = _shifts(n_shifts, ndim)
    k = default_num_threads()
    return [shifts[i:i + k] for i in range(0, n_shifts, k)]


def _shrink_steps(n_shifts: int) -> int:
    """Progress steps of :func:`_denoise_plane`: a forward and an inverse transform per shift, a prox per group."""
    return 2 * n_shifts + len(_shift_groups(n_shifts))


def _denoise_plane(plane: np.ndarray, lam: float, penalty: str, plan: _Plan, penalize_approx: bool,
                   n_shifts: int, steps: Steps | None = None, level_weights: np.ndarray | None = None,
                   var_map: np.ndarray | None = None) -> np.ndarray:
    """Average over ``n_shifts`` circular shifts of transform, prox, inverse; ``steps()`` after each stage.

    With ``var_map``, each coefficient is shrunk in units of its noise deviation (:func:`_shrink_scaled`).
    """
    step = steps if steps is not None else (lambda: None)
    acc = None
    for group in _shift_groups(n_shifts, len(plan.shape)):
        C = np.empty((len(group), plan.n_coeffs))
        scale = None if var_map is None else np.empty_like(C)
        for i, (row, s) in enumerate(zip(C, group, strict=True)):
            row[:] = plan.forward(plane, s)
            if scale is not None:
                scale[i] = np.sqrt(plan.coeff_var(var_map, s))
            step()
        if scale is not None:
            C /= scale
        _shrink_rows(C, lam, penalty, plan, penalize_approx, level_weights)
        if scale is not None:
            C *= scale
        step()
        for row, s in zip(C, group, strict=True):
            rec = plan.inverse(row, s)
            acc = rec if acc is None else acc + rec
            step()
    return acc / n_shifts if n_shifts > 1 else acc


# The empirical Wiener stage: passes in other bases than the tree's db3, each taking the previous estimate as its
# pilot (Haar first, for sharp and thin structures, then db2, smooth ones), each with its own number of shifts per
# cycle spin. Its gain is in translation invariance (more shifts in the last pass), and the tree pilot needs few:
# the choices and their gains are measured by ``benchmarks/bench_volume.py --part choices``.
_WIENER_PASSES = (("haar", 0.5), ("db2", 2.0))  # (wavelet, shifts per cycle spin)
_PILOT_SPINS = 0.25  # shifts of the tree pilot per cycle spin when the Wiener stage follows


def _wiener_shifts(n_shifts: int, spins: float) -> int:
    """Shifts of one Wiener pass: ``spins`` per cycle spin, none when the tree stage has none."""
    return max(1, int(n_shifts * spins)) if n_shifts > 1 else 1


def _pilot_shifts(n_shifts: int) -> int:
    """Shifts of the tree estimate when it is the Wiener stage's pilot."""
    return max(1, int(n_shifts * _PILOT_SPINS))


def _use_wiener(wiener: bool | None, n_axes: int) -> bool:
    """The Wiener stage runs when asked, and by default on volumes (three transformed axes)."""
    return n_axes == 3 if wiener is None else bool(wiener)


def _wiener_plane(plane: np.ndarray, pilot: np.ndarray, sigma: float, plan: _Plan, n_shifts: int,
                  steps: Steps | None = None, var_map: np.ndarray | None = None) -> np.ndarray:
    """Empirical Wiener filter of ``plane`` with the gains of ``pilot``, averaged over the same shifts.

    Each detail coefficient ``c`` becomes ``c * p**2 / (p**2 + sigma**2)``, ``p``
    the pilot's coefficient in the same basis (``sigma**2``: the
    coefficient's own noise variance from ``var_map`` when given);
    approximation coefficients are kept. ``steps()`` after each transform
    pair and each inverse.
    """
    step = steps if steps is not None else (lambda: None)
    acc = None
    s2 = float(sigma) ** 2
    for s in _shifts(n_shifts, len(plan.shape)):
        c = plan.forward(plane, s)
        p = plan.forward(pilot, s)
        step()
        p *= p
        if var_map is not None:
            v = plan.coeff_var(var_map, s)
            gain = np.divide(p, p + v, out=np.ones_like(p), where=p + v > 0)
        else:
            gain = p / (p + s2) if s2 > 0 else np.ones_like(p)
        gain[: plan.n_approx] = 1.0
        rec = plan.inverse(c * gain, s)
        acc = rec if acc is None else acc + rec
        step()
    return acc / n_shifts if n_shifts > 1 else acc


def _shifts(k: int, ndim: int = 2) -> list[tuple[int, ...]]:
    """K circular shifts over ``ndim`` axes, finest first: in 2-D (0,0), (1,1), (1,0), (0,1), (2,2), ...

    Shift ``s`` is read in base ``2**ndim``: its digit ``j`` sets bit ``j`` of
    every axis' shift, the digits taken in an order where each shift comes
    before its complement's neighbours (the all-ones shift second).
    """
    if ndim == 2:
        order = (0, 3, 2, 1)  # (dy, dx) bits: 0 -> (0, 0), 3 -> (1, 1), 2 -> (1, 0), 1 -> (0, 1)
    else:
        order = (0, 7, 4, 3, 2, 5, 1, 6)  # complementary pairs: (0,0,0) (1,1,1), (1,0,0) (0,1,1), ...
    base = 1 << ndim
    out = []
    for s in range(k):
        shift = [0] * ndim
        j = 0
        while s:
            digit = order[s % base]
            for a in range(ndim):
                shift[a] += ((digit >> (ndim - 1 - a)) & 1) << j
            s //= base
            j += 1
        out.append(tuple(shift))
    return out


# ---------------------------------------------------------------------------
# Validation and channel helpers
# ---------------------------------------------------------------------------


def _setup(plane_shape, penalty, wavelet, level, penalize_approx) -> _Plan:
    """Validate the transform's settings for arrays of this shape (2 or 3 sides); the cached plan."""
    check_choice("penalty", penalty, PENALTIES, plural="penalties")
    shape = tuple(int(s) for s in plane_shape)
    return _plan(shape, wavelet, _levels(shape, wavelet, level), bool(penalize_approx))


def _levels(shape: tuple[int, ...], wavelet: str, level) -> tuple[int, ...]:
    """Validated levels of each axis: 2-D as always (at most :func:`max_level`), 3-D an int or one per axis."""
    wav = check_wavelet(wavelet)
    if len(shape) == 2:
        lv = min(default_level(shape), max_level(shape, wav)) if level is None else check_level(level, shape, wav)
        return (lv, lv)
    if level is None:
        return _default_levels(shape)
    if np.ndim(level) == 0:
        levels = (check_int("level", level, min=1),) * len(shape)
    else:
        levels = tuple(check_int("level", n, min=0) for n in level)
        if len(levels) != len(shape) or max(levels) < 1:
            raise ValueError(f"level must be an integer >= 1 or one integer >= 0 per axis ({len(shape)} axes, "
                             f"at least one >= 1), got {level!r}")
    for n, lv in zip(shape, levels, strict=True):
        # deeper, padding would more than double the axis (2**level samples) for a coarsest band of one sample
        deepest = max(1, int(np.ceil(np.log2(n))))
        if lv > deepest:
            raise ValueError(f"level {lv} is too deep for an axis of {n} samples (volume {'x'.join(map(str, shape))}): "
                             f"at most {deepest} there, or None for the default")
    return levels


# 3-D: levels leave at least this many samples on the thinnest axis (2-D keeps about 16, default_level)
_MIN_SAMPLES_3D = 4
# ... and are at most this many: deeper levels gain nothing on the benchmark's volumes (bench_volume.py --part
# choices), and the default must not grow with the volume, or a Dask volume's overlaps (2**level wide) would too
_MAX_LEVELS_3D = 3


def _default_levels(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Default levels per axis of a 3-D transform: down to a few samples on the thinnest axis, at most 3, equal."""
    n = min(shape)
    return (min(_MAX_LEVELS_3D, max(1, int(np.floor(np.log2(max(n, 2) / _MIN_SAMPLES_3D))))),) * len(shape)


def _resolve_method(method: str | None, penalty: str) -> str:
    if method is not None:
        check_choice("lam method", method, ("sure", "rule"), plural="methods (or a number)")
    if method is None:
        return "sure" if penalty in CONVEX else "rule"
    if method == "sure" and penalty not in CONVEX:
        raise ValueError(f"lam='sure' needs a continuous (convex) penalty, not {penalty!r}: "
                         "use lam='rule' or a number")
    return method


def _to_channels(plane: np.ndarray, channel_axis: int | None) -> list[np.ndarray]:
    if channel_axis is None:
        return [np.asarray(plane, dtype=np.float64)]
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


def _channel_sigmas(sigma, channels: list[np.ndarray]) -> list[float]:
    """The given sigma of each channel (validated), or an estimate on each."""
    if sigma is None:
        return [_noise_sigma(ch) for ch in channels]
    return list(sigma)


assert set(_RULE_T) == set(PENALTIES)


# ---------------------------------------------------------------------------
# Internal interface: the steps of denoise_wavelet_tree one at a time
# ---------------------------------------------------------------------------


class PlaneDenoiser:
    """Transform a plane once, then shrink its coefficients at any lam: for protocols that try many.

    Internal (used by :mod:`restore.evaluate`), not part of ``restore``'s
    public API. Grey planes of one shape, one wavelet and penalty, the
    approximation band not penalised, no cycle spinning: the settings of
    :func:`denoise_wavelet_tree`'s defaults.

    Parameters
    ----------
    shape : (int, int)
        Plane shape.
    wavelet, penalty : str
        As in :func:`denoise_wavelet_tree`.
    """

    def __init__(self, shape: tuple[int, int], wavelet: str, penalty: str) -> None:
        self.penalty = penalty
        self._plan = _setup(shape, penalty, wavelet, None, False)
        self._work = np.empty((1, self._plan.n_coeffs))

    def transform(self, plane: np.ndarray) -> np.ndarray:
        """The wavelet coefficients of a plane (float64 vector)."""
        return self._plan.forward(np.asarray(plane, dtype=np.float64))

    def shrink(self, coeffs: np.ndarray, lam: float, level_weights: np.ndarray | None = None) -> np.ndarray:
        """The denoised plane: the prox of ``coeffs`` at ``lam`` (times each level's weight), transformed back."""
        self._work[0] = coeffs
        _shrink_rows(self._work, lam, self.penalty, self._plan, False, level_weights)
        return self._plan.inverse(self._work[0])

    def automatic_lam(self, plane: np.ndarray, sigma: float, rng: np.random.Generator) -> float:
        """The lam :func:`denoise_wavelet_tree` would choose with a known ``sigma`` (SURE or the rule)."""
        return self.automatic_choice(plane, sigma, rng)[0]

    def automatic_choice(self, plane: np.ndarray, sigma: float,
                         rng: np.random.Generator) -> tuple[float, np.ndarray | None]:
        """The lam and level weights :func:`denoise_wavelet_tree` would choose (pass both to :meth:`shrink`)."""
        method = _resolve_method(None, self.penalty)
        return _choice_for_plane(np.asarray(plane, dtype=np.float64), sigma, self.penalty, method, self._plan,
                                 False, rng)

