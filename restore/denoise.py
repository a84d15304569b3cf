"""Wavelet quad-tree denoising with tree-structured sparsity."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np
import pywt
from numpy.typing import ArrayLike, NDArray

from ._config import default_num_threads
from ._progress import ProgressCallback, Steps
from ._validation import (
    check_callable,
    check_choice,
    check_image,
    check_int,
    check_level,
    check_per_channel,
    check_wavelet,
    max_level,
    restore_dtype,
)
from .proximal import PENALTIES, _prox_rows
from .tree import Tree
from .wavelet import default_level, wavelet_quadtree

__all__ = ["LamChoice", "choose_lam", "denoise_wavelet_tree", "estimate_sigma"]

CONVEX = ("l1", "tree_l2", "tree_linf")

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
    """

    lam: tuple[float, ...]
    sigma: tuple[float, ...]
    method: str


# ---------------------------------------------------------------------------
# Transform plan: padding, transform, tree, cached per shape
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    shape: tuple[int, int]
    padded: tuple[int, int]
    wavelet: str
    level: int
    slices: list
    shapes: list
    n_approx: int
    tree: Tree

    @property
    def n_coeffs(self) -> int:
        """Number of wavelet coefficients of a padded plane."""
        return self.padded[0] * self.padded[1]

    def forward(self, plane: np.ndarray, shift: tuple[int, int] = (0, 0)) -> np.ndarray:
        h, w = self.shape
        x = plane
        if self.padded != self.shape:
            x = np.pad(plane, ((0, self.padded[0] - h), (0, self.padded[1] - w)), mode="symmetric")
        if shift != (0, 0):
            x = np.roll(x, shift, axis=(0, 1))
        coeffs = pywt.wavedec2(x, self.wavelet, mode="periodization", level=self.level)
        return pywt.ravel_coeffs(coeffs)[0]

    def inverse(self, c: np.ndarray, shift: tuple[int, int] = (0, 0)) -> np.ndarray:
        coeffs = pywt.unravel_coeffs(c, self.slices, self.shapes, output_format="wavedec2")
        x = pywt.waverec2(coeffs, self.wavelet, mode="periodization")
        if shift != (0, 0):
            x = np.roll(x, (-shift[0], -shift[1]), axis=(0, 1))
        return x[: self.shape[0], : self.shape[1]]


@lru_cache(maxsize=16)
def _plan(shape: tuple[int, int], wavelet: str, level: int, penalize_approx: bool) -> _Plan:
    step = 1 << level
    padded = tuple(-(-s // step) * step for s in shape)
    band_shapes = pywt.wavedecn_shapes(padded, wavelet, mode="periodization", level=level)
    coeffs = [np.zeros(band_shapes[0])] + [tuple(np.zeros(d[k]) for k in ("da", "ad", "dd"))
                                           for d in band_shapes[1:]]
    _, slices, shapes = pywt.ravel_coeffs(coeffs)
    tree = wavelet_quadtree(padded, wavelet, level, penalize_approx)
    n_approx = int(np.prod(band_shapes[0]))
    return _Plan(tuple(shape), padded, wavelet, level, slices, shapes, n_approx, tree)


def _shrink_rows(C: np.ndarray, lam: float, penalty: str, plan: _Plan, penalize_approx: bool) -> None:
    """Prox of each row of C (n, p), in place.

    The approximation band is left alone by l1/l0 unless penalised (the tree
    penalties carry that choice in their weights).
    """
    if penalty in ("l1", "l0") and not penalize_approx:
        D = np.ascontiguousarray(C[:, plan.n_approx:])
        _prox_rows(D, lam, penalty, None)
        C[:, plan.n_approx:] = D
    else:
        _prox_rows(C, lam, penalty, plan.tree)


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


def _sure_lam(c: np.ndarray, sigma: float, penalty: str, plan: _Plan, penalize_approx: bool,
              rng: np.random.Generator, step: Callable[[], None] | None = None) -> float:
    """Lam minimising Stein's unbiased risk estimate of the shrinkage of c; ``step()`` after each evaluation."""
    if sigma == 0:
        return 0.0
    if penalty == "l1":  # exact SURE (SureShrink): the divergence counts survivors
        d = np.abs(c if penalize_approx else c[plan.n_approx:])
        d2 = np.sort(d) ** 2
        n = d2.size
        cum = np.concatenate([[0.0], np.cumsum(d2)])
        k = np.arange(n + 1)  # k smallest coefficients fall below the threshold
        thr2 = np.concatenate([[0.0], d2])
        risk = cum + (n - k) * thr2 - n * sigma**2 + 2 * sigma**2 * (n - k)
        return float(np.sqrt(thr2[int(np.argmin(risk))]))
    p = c.shape[0]
    probe = rng.standard_normal(p)
    eps = 1e-3 * sigma
    base = np.stack([c, c + eps * probe])
    work = np.empty_like(base)

    def risk(t: float) -> float:
        np.copyto(work, base)
        _shrink_rows(work, t * sigma, penalty, plan, penalize_approx)
        div = probe @ (work[1] - work[0]) / eps
        if step is not None:
            step()
        return float(np.sum((work[0] - c) ** 2) - p * sigma**2 + 2 * sigma**2 * div)

    return log_search(risk, lo=_SURE_T_RANGE[0], hi=_SURE_T_RANGE[1], n_grid=_SURE_GRID,
                      n_golden=_SURE_GOLDEN) * sigma


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
    a = c[: plan.n_approx] / float(1 << plan.level)
    lo, hi = np.percentile(a, [0.5, 99.5])
    return float(hi - lo)


def choose_lam(
    image: ArrayLike,
    *,
    sigma: float | Sequence[float] | None = None,
    penalty: str = "tree_l2",
    method: LamMethod | None = None,
    wavelet: str = "db3",
    level: int | None = None,
    penalize_approx: bool = False,
    channel_axis: int | None = None,
    rng: int | np.random.Generator | None = None,
    progress: ProgressCallback | None = None,
) -> LamChoice:
    """Choose ``lam`` for :func:`denoise_wavelet_tree` from the noisy image alone.

    Parameters
    ----------
    image : ndarray, shape (M, N) or (M, N, C) with ``channel_axis``
        One noisy plane (grey, or colour with ``channel_axis``).
    sigma : float or sequence of float, optional
        Noise standard deviation (one, or one per channel); estimated with
        :func:`estimate_sigma` when None.
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
    rng : int or numpy.random.Generator, optional
        Seed of the SURE probe; default 0, so the choice is reproducible.
    progress : callable, optional
        ``progress(done, total)`` after each evaluation of SURE's risk; it
        may raise :class:`restore.Cancelled` to stop.

    Returns
    -------
    LamChoice
    """
    img, axis = check_image(image, channel_axis=channel_axis, exact=True)
    check_callable("progress", progress)
    x = img if axis is None else np.moveaxis(img, axis, -1)
    plan = _setup(x.shape[:2], penalty, wavelet, level, penalize_approx)
    method = _resolve_method(method, penalty)
    n_channels = x.shape[2] if axis is not None else 1
    sigmas_given = None if sigma is None else check_per_channel("sigma", sigma, n_channels)
    channels = _to_channels(x, -1 if axis is not None else None)
    sigmas = _channel_sigmas(sigmas_given, channels)
    gen = np.random.default_rng(0 if rng is None else rng)
    steps = Steps(progress, len(channels) * _lam_steps(method, penalty), start=True)
    lams = tuple(_lam_for_plane(ch, s, penalty, method, plan, penalize_approx, gen, steps)
                 for ch, s in zip(channels, sigmas, strict=True))
    return LamChoice(lam=lams, sigma=tuple(float(s) for s in sigmas), method=method)


def _lam_for_plane(plane, sigma, penalty, method, plan, penalize_approx, gen, steps: Steps | None = None) -> float:
    """Lam of one channel; ``steps()`` after the transform and after each evaluation (see :func:`_lam_steps`)."""
    step = steps if steps is not None else (lambda: None)
    c = plan.forward(plane)
    step()
    if method == "sure" and penalty != "l1":
        return _sure_lam(c, sigma, penalty, plan, penalize_approx, gen, step)
    lam = (_sure_lam(c, sigma, penalty, plan, penalize_approx, gen) if method == "sure"
           else _rule_lam(sigma, _data_range(c, plan), penalty))
    step()
    return lam


def _lam_steps(method: str | None, penalty: str) -> int:
    """Progress steps of choosing lam for one channel: the transform, then each evaluation (l1 and the rule: one)."""
    if method is None:
        return 0
    return 1 + (_SURE_EVALS if method == "sure" and penalty != "l1" else 1)


# ---------------------------------------------------------------------------
# Denoising
# ---------------------------------------------------------------------------


def denoise_wavelet_tree(
    image: ArrayLike,
    *,
    sigma: float | Sequence[float] | None = None,
    lam: float | Sequence[float] | LamMethod | None = None,
    penalty: str = "tree_l2",
    wavelet: str = "db3",
    level: int | None = None,
    penalize_approx: bool = False,
    cycle_spins: int = 0,
    channel_axis: int | None = None,
    rng: int | np.random.Generator | None = None,
    progress: ProgressCallback | None = None,
) -> NDArray[np.floating]:
    r"""Denoise an image by tree-structured shrinkage of its wavelet coefficients.

    Solves, for each plane (and channel),
    ``min_a 0.5 * ||W y - a||^2 + lam * Omega(a)`` where ``W`` is an
    orthonormal 2-D wavelet transform and ``Omega`` a penalty on the
    quad-tree of the coefficients (each detail coefficient is the parent of
    the four coefficients of the next finer level at the same place and
    orientation), and returns ``W^T a``. As ``W`` is orthonormal this is a
    single proximal operator, computed exactly.

    Parameters
    ----------
    image : ndarray
        Image of shape (M, N), or stacks of such planes along leading axes,
        with channels along ``channel_axis`` if given. Integer images are
        converted to float in [0, 1] (:func:`skimage.util.img_as_float`);
        float images are neither rescaled nor clipped.
    sigma : float or sequence of float, optional
        Standard deviation of the noise, in image units (one value, or one
        per channel). Estimated per plane and channel when None.
    lam : float, sequence of float, {'sure', 'rule'}, optional
        Regularisation, absolute (image units). A number (or one per
        channel) is used as is; ``'sure'`` and ``'rule'`` choose it per plane
        as :func:`choose_lam` does; None picks ``'sure'`` for ``l1``,
        ``tree_l2``, ``tree_linf`` and ``'rule'`` for ``l0``, ``tree_l0``.
    penalty : {'tree_l2', 'tree_linf', 'tree_l0', 'l1', 'l0'}
        ``tree_l2`` (default) is the best on natural images; ``l1`` and
        ``l0`` are soft and hard thresholding; ``tree_l0`` is Donoho's
        CART-like dynamic programme.
    wavelet : str, default 'db3'
        An orthogonal PyWavelets wavelet (``'haar'``, ``'db3'``, ``'sym4'``...).
    level : int, optional
        Decomposition levels; default leaves an approximation band of about
        16 x 16.
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
    rng : int or numpy.random.Generator, optional
        Seed of the SURE probe (default 0: reproducible results).
    progress : callable, optional
        ``progress(done, total)`` after each step: each evaluation of SURE's
        risk, each transform and each shrinkage of a group of shifts (under
        a second each on a 4096 x 4096 plane). It may raise
        :class:`restore.Cancelled` to stop; nothing is returned then.

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
        penalty, wrong number of per-channel values, planes too small.

    Notes
    -----
    Any image size works: each plane is padded symmetrically to a multiple
    of ``2**level``, transformed with ``mode='periodization'`` (orthonormal
    then) and cropped back. With ``lam`` given, the result equals
    transform, :func:`restore.prox`, inverse transform.

    SURE picks ``lam`` within about 0.1 dB of the best possible value on
    natural images (see the README). The opponent colour transform is
    orthonormal, so white noise stays white with the same sigma in each
    of its channels.

    References
    ----------
    .. [1] R. Jenatton, J. Mairal, G. Obozinski, F. Bach, "Proximal Methods
       for Hierarchical Sparse Coding", JMLR 12, 2011 (Table 1).
    .. [2] C. Stein, "Estimation of the mean of a multivariate normal
       distribution", Annals of Statistics 9(6), 1981.

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
    img, axis = check_image(image, channel_axis=channel_axis)
    n_shifts = max(check_int("cycle_spins", cycle_spins, min=0), 1)
    check_callable("progress", progress)
    x = img if axis is None else np.moveaxis(img, axis, -1)
    plane_shape = x.shape[-3:-1] if axis is not None else x.shape[-2:]
    n_channels = x.shape[-1] if axis is not None else 1
    plan = _setup(plane_shape, penalty, wavelet, level, penalize_approx)
    if lam is None or isinstance(lam, str):
        method, lams_given = _resolve_method(lam, penalty), None
    else:
        method, lams_given = None, check_per_channel("lam", lam, n_channels)
    sigmas_given = None if sigma is None else check_per_channel("sigma", sigma, n_channels)
    gen = np.random.default_rng(0 if rng is None else rng)
    out = np.empty(x.shape, dtype=np.float64)
    lead = x.shape[:-3] if axis is not None else x.shape[:-2]
    per_channel = _lam_steps(method, penalty) + _shrink_steps(n_shifts) + (sigma is None and method is not None)
    steps = Steps(progress, int(np.prod(lead, dtype=np.int64)) * n_channels * per_channel, start=True)
    for idx in np.ndindex(*lead):
        plane = x[idx]
        channels = _to_channels(plane, -1 if axis is not None else None)
        if method is None:
            lams = lams_given
        else:
            sigmas = _channel_sigmas(sigmas_given, channels)
            if sigma is None:
                steps(len(channels))
            lams = [_lam_for_plane(ch, s, penalty, method, plan, penalize_approx, gen, steps)
                    for ch, s in zip(channels, sigmas, strict=True)]
        den = [_denoise_plane(ch, lm, penalty, plan, penalize_approx, n_shifts, steps)
               for ch, lm in zip(channels, lams, strict=True)]
        out[idx] = _from_channels(den, axis is not None)
    if axis is not None:
        out = np.moveaxis(out, -1, axis)
    return restore_dtype(out, np.asarray(image).dtype)


def _shift_groups(n_shifts: int) -> list[list[tuple[int, int]]]:
    """The shifts in groups of one per thread: each group is shrunk as one batch (one row per thread)."""
    shifts = _shifts(n_shifts)
    k = default_num_threads()
    return [shifts[i:i + k] for i in range(0, n_shifts, k)]


def _shrink_steps(n_shifts: int) -> int:
    """Progress steps of :func:`_denoise_plane`: a forward and an inverse transform per shift, a prox per group."""
    return 2 * n_shifts + len(_shift_groups(n_shifts))


def _denoise_plane(plane: np.ndarray, lam: float, penalty: str, plan: _Plan, penalize_approx: bool,
                   n_shifts: int, steps: Steps | None = None) -> np.ndarray:
    """Average over ``n_shifts`` circular shifts of transform, prox, inverse; ``steps()`` after each stage."""
    step = steps if steps is not None else (lambda: None)
    acc = None
    for group in _shift_groups(n_shifts):
        C = np.empty((len(group), plan.n_coeffs))
        for row, s in zip(C, group, strict=True):
            row[:] = plan.forward(plane, s)
            step()
        _shrink_rows(C, lam, penalty, plan, penalize_approx)
        step()
        for row, s in zip(C, group, strict=True):
            rec = plan.inverse(row, s)
            acc = rec if acc is None else acc + rec
            step()
    return acc / n_shifts if n_shifts > 1 else acc


def _shifts(k: int) -> list[tuple[int, int]]:
    """K circular shifts, finest first: (0,0), (1,1), (0,1), (1,0), (2,2), ..."""
    out = []
    for s in range(k):
        dy = dx = 0
        for bit in range(0, 16, 2):
            lo, hi = (s >> bit) & 1, (s >> (bit + 1)) & 1
            scale = 1 << (bit // 2)
            dy += scale * (lo ^ hi)
            dx += scale * lo
        out.append((dy, dx))
    return out


# ---------------------------------------------------------------------------
# Validation and channel helpers
# ---------------------------------------------------------------------------


def _setup(plane_shape, penalty, wavelet, level, penalize_approx) -> _Plan:
    """Validate the transform's settings for planes of this shape; the cached plan."""
    check_choice("penalty", penalty, PENALTIES, plural="penalties")
    wav = check_wavelet(wavelet)
    shape = tuple(int(s) for s in plane_shape)
    level = min(default_level(shape), max_level(shape, wav)) if level is None else check_level(level, shape, wav)
    return _plan(shape, wavelet, level, bool(penalize_approx))


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

    def shrink(self, coeffs: np.ndarray, lam: float) -> np.ndarray:
        """The denoised plane: the prox of ``coeffs`` at ``lam``, transformed back."""
        self._work[0] = coeffs
        _shrink_rows(self._work, lam, self.penalty, self._plan, False)
        return self._plan.inverse(self._work[0])

    def automatic_lam(self, plane: np.ndarray, sigma: float, rng: np.random.Generator) -> float:
        """The lam :func:`denoise_wavelet_tree` would choose with a known ``sigma`` (SURE or the rule)."""
        method = _resolve_method(None, self.penalty)
        return _lam_for_plane(np.asarray(plane, dtype=np.float64), sigma, self.penalty, method, self._plan, False,
                              rng)

