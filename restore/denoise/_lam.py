"""Choosing lam from the noisy data: Stein's unbiased risk estimate (SURE) and the calibrated rule."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from .. import _core
from .._progress import Steps
from .._validation import check_choice
from ..proximal import PENALTIES
from ..wavelet import band_layout
from ._transform import _level_ranges, _Plan, _plan, _shrink_rows

# The penalties whose prox is continuous in its input: SURE can choose their lam (l0 and tree_l0 jump)
CONVEX_PENALTIES = ("l1", "tree_l2", "tree_linf")


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


# SURE measures the risk on at most about this many coefficients of a volume: beyond, on a regular subset of whole
# trees (the risk is a sum over trees, so a subset estimates it), to bound its cost.
_SURE_MAX_COEFFS = 1 << 19
# ... of a plane: a 512 x 512 plane's quarter (and none of a 256 x 256 plane's is left out). SURE on every tree of a
# 512 x 512 plane makes the default call a third slower, for the same PSNR (``benchmarks/bench_denoise.py --part
# default`` compares the two).
_SURE_MAX_COEFFS_2D = 1 << 16


def _sure_sample(c: np.ndarray, plan: _Plan, penalize_approx: bool,
                 noise_var: np.ndarray | None = None) -> tuple[np.ndarray, _Plan, np.ndarray | None]:
    """Coefficients of every k-th tree along some axes, laid out as the transform of a smaller array, and its plan.

    The trees of the unpenalised approximation band's coefficients are
    independent, so the shrinkage of the subset is the subset of the
    shrinkage. Strides double on the axis with the most roots until at most
    ``_SURE_MAX_COEFFS`` (planes: ``_SURE_MAX_COEFFS_2D``) remain (or every axis is down to 2 roots); with
    ``penalize_approx`` (one group across the approximation band) or few
    coefficients, everything is kept.
    """
    cap = _SURE_MAX_COEFFS if len(plan.shape) == 3 else _SURE_MAX_COEFFS_2D
    if penalize_approx or plan.n_coeffs <= cap:
        return c, plan, noise_var
    bands = band_layout(plan.padded, plan.splits)
    roots = list(bands[0].shape)
    stride = [1] * len(roots)
    kept = plan.n_coeffs
    while kept > cap:
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
    coefficients divided by their noise deviation (as :func:`._stages._denoise_plane`
    shrinks them), ``lam`` is in those units, and the risk (in the coefficients' own units)
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
        err, div = _core.sure_terms(work, c, probe)
        if step is not None:
            step()
        return float(err - p * sigma**2 + 2 * sigma**2 * (div / eps))  # divided first: sigma**2 * div overflows

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
        err, div = _core.sure_terms(work, c, probe)
        if step is not None:
            step()
        return float(err - total_var + 2 * (div / eps))

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



def _choice_for_plane(plane, sigma, penalty, method, plan, penalize_approx, gen, steps: Steps | None = None,
                      per_level: bool | None = None, var_map: np.ndarray | None = None,
                      coeffs: np.ndarray | None = None) -> tuple[float, np.ndarray | None]:
    """Lam of one channel and, by SURE, its level weights (None: all 1); ``steps()`` as :func:`_lam_steps` counts.

    With ``var_map`` (the noise variance of each sample), lam applies to the
    coefficients divided by their noise deviation (as :func:`._stages._denoise_plane` shrinks them).
    ``coeffs``: ``plan.forward(plane)`` when the caller has it (read only).
    """
    step = steps if steps is not None else (lambda: None)
    per_level = _per_level(method, penalty, plan, per_level)
    c = plan.forward(plane) if coeffs is None else coeffs
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


def _resolve_method(method: str | None, penalty: str) -> str:
    if method is not None:
        check_choice("lam method", method, ("sure", "rule"), plural="methods (or a number)")
    if method is None:
        return "sure" if penalty in CONVEX_PENALTIES else "rule"
    if method == "sure" and penalty not in CONVEX_PENALTIES:
        raise ValueError(f"lam='sure' needs a continuous (convex) penalty, not {penalty!r}: "
                         "use lam='rule' or a number")
    return method


assert set(_RULE_T) == set(PENALTIES)


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
