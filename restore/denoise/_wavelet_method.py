"""The wavelet-tree method: :func:`denoise_wavelet_tree`, :func:`choose_lam`, and :class:`WaveletTree` on one unit.

:class:`WaveletTree` is the method the driver (:mod:`._driver`) runs on each
unit: lam chosen on the unit (SURE or the rule, :mod:`._lam`) or given, the
tree stage, and the empirical Wiener stage (:mod:`._stages`), in the
wavelet transform of :mod:`._transform`. The public functions check their
call (the driver's part with :func:`._driver.check_call`, the method's
settings with :meth:`WaveletTree.checked`) and hand both to the driver.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._cache import call_scope
from .._progress import ProgressCallback, Steps
from .._validation import check_choice, check_int, check_number, check_per_channel
from ..noise import NoiseEstimate
from ..proximal import PENALTIES
from ..wavelet import band_layout
from ._driver import check_call, drive
from ._lam import LamChoice, LamMethod, _choice_for_plane, _lam_steps, _resolve_method, _seed
from ._layout import Layout
from ._noise_model import NoiseModel
from ._stages import (
    _denoise_plane,
    _shrink_steps,
    _tree_shifts,
    _wiener_passes,
    _wiener_plane,
    _wiener_reach,
)
from ._transform import _levels, _overlap, _Plan, _plan, _setup, _shrink_rows
from ._units import prepare, sigma_steps, unit_channels

# Overlap of Dask blocks, in samples along each axis, at most, by number of transformed axes. Volumes: past 32,
# what a border changes in the interior is far below the 0.05 dB the lazy result promises (the deep, wide basis
# functions carry little of a denoised volume), and the exact reach of the defaults (87 voxels: three levels of
# db3, then the Wiener passes) would make blocks of ~7x their core and the work with them. Planes have deeper
# default levels (5 on 512 x 512) whose smooth, wide basis functions do carry the image: 256 covers the exact reach
# of 5 levels of db3 (187), though not the Wiener pass after it (125 more, in db2), whose gains a border changes
# far less than the tree estimate. Tested by the agreement of lazy and in-memory results (test_volume*.py).
_MAX_OVERLAP = {2: 256, 3: 32}


def noise_for_lam(noise: Any, lam: Any) -> Any:
    """The noise model a call means: ``'auto'`` with a number given as ``lam`` is Gaussian noise.

    A number is a lam in image units (the transform, prox and inverse of the
    image itself), which photon noise would read in the Anscombe transform's
    units. The one place of this rule, for the library and the command line.
    """
    if isinstance(noise, str) and noise == "auto" and lam is not None and not isinstance(lam, (str, LamChoice)):
        return "gaussian"
    return noise


@dataclass(frozen=True)
class WaveletTree:
    """The wavelet-tree method on one unit, for the driver (:class:`._units.UnitMethod`).

    Settings of the whole image, checked by :meth:`checked`: every unit and
    Dask block is transformed with the same levels whatever its size.
    """

    penalty: str
    wavelet: str
    levels: tuple[int, ...]  # one per transformed axis, increasing
    penalize_approx: bool
    n_shifts: int
    lam_method: str | None  # 'sure' or 'rule'; None: lam given
    lams: tuple[float, ...] | None  # given, one per channel
    level_weights: tuple | None  # given with lams (a LamChoice), one per channel (None: all 1)
    per_level: bool | None
    wiener: bool
    seed: Any  # of numpy.random.default_rng: SURE's probe starts afresh from it on each unit and channel
    strength: float = 1.0  # multiplies lam, chosen or given
    # a float32 volume is transformed slab by slab from itself (:meth:`._transform._Plan.forward`): no float64 copy
    float32_volumes = True
    # ... and read only through it, by slabs: under photon noise a volume comes stabilised as it is read (no float64
    # volume of the stabilised data while it is denoised, :class:`._units.StabilisedVolume`)
    reads_slabs = True
    # padded to the grid and periodized (mode='periodization'): Dask blocks at the borders overlap periodically
    periodic = True

    @classmethod
    def checked(cls, layout: Layout, shape: tuple[int, ...], *, lam, penalty, wavelet, level, penalize_approx,
                cycle_spins, per_level, wiener, rng, axes, strength=1.0) -> WaveletTree:
        """The method's settings checked, for an image of ``shape`` and ``layout`` (no pixel read)."""
        n_shifts = max(check_int("cycle_spins", cycle_spins, min=0), 1)
        check_choice("wiener", wiener, (True, False), plural="values")
        check_choice("per_level", per_level, (None, True, False), plural="values")
        sp_axes, ndim, n_channels = layout.sp_axes, layout.ndim, layout.n_channels
        if axes is not None and np.ndim(level) == 1 and len(level) == len(sp_axes):
            # one level per axis, in the order of ``axes``: read in the increasing order of the axes
            level = tuple(level[i] for i in np.argsort([int(a) % ndim for a in axes]))
        check_choice("penalty", penalty, PENALTIES, plural="penalties")
        levels = _levels(tuple(int(shape[a]) for a in sp_axes), wavelet, level)
        n_levels = max(levels)
        weights = lams = None
        if lam is None or isinstance(lam, str):
            lam_method = _resolve_method(lam, penalty)
        elif isinstance(lam, LamChoice):
            lam_method, lams = None, tuple(check_per_channel("lam", lam.lam, n_channels))
            weights = lam.level_weights or None
            if weights is not None and (len(weights) != n_channels or any(
                    w is not None and len(w) != n_levels for w in weights)):
                raise ValueError(f"lam is a LamChoice with level weights for {len(weights)} channel(s) of "
                                 f"another transform: expected {n_channels} channel(s) of {n_levels} levels")
        else:
            lam_method, lams = None, tuple(check_per_channel("lam", lam, n_channels))
        strength = check_number("strength", strength, min=0.0)
        return cls(penalty, wavelet, levels, bool(penalize_approx), n_shifts, lam_method, lams, weights, per_level,
                   bool(wiener), _seed(rng), strength)

    @property
    def needs_sigma(self) -> bool:
        """SURE, the rule and the Wiener stage need the noise level; a lam given alone does not."""
        return self.lam_method is not None or self.wiener

    @property
    def grid(self) -> tuple[int, ...]:
        """Blocks start on the dyadic grid of the whole: ``2**levels`` along each axis."""
        return tuple(1 << n for n in self.levels)

    @property
    def reach(self) -> tuple[int, ...]:
        """The deepest basis functions' reach (and the Wiener passes'), at most :data:`_MAX_OVERLAP`."""
        cap = _MAX_OVERLAP[len(self.levels)]
        return tuple(min(_overlap(self.wavelet, n) + (_wiener_reach(n, len(self.levels)) if self.wiener else 0), cap)
                     for n in self.levels)

    def plan(self, shape: tuple[int, ...]) -> _Plan:
        """The transform of units of this shape (cached)."""
        return _plan(tuple(int(s) for s in shape), self.wavelet, self.levels, self.penalize_approx)

    def steps(self, shape: tuple[int, ...], scaled: bool) -> int:
        """Progress steps on a unit: choosing lam, the tree stage's transforms and shrinkage, the Wiener passes."""
        plan = self.plan(shape)
        passes = _wiener_passes(plan, self.n_shifts) if self.wiener else []
        return (_lam_steps(self.lam_method, self.penalty, plan, self.per_level, scaled)
                + _shrink_steps(_tree_shifts(self.n_shifts, self.wiener), len(shape)) + sum(2 * k for _, k in passes))

    def settled(self, regions: Callable[[], list[tuple[np.ndarray, tuple]]], layout: Layout,
                noise: NoiseModel) -> WaveletTree:
        """The method with the lam (and level weights) it chooses on parts of a volume, for all its blocks.

        ``regions()``: cubes of the volume with their overlap, and each cube's place in its region
        (:func:`._driver._sample_regions`), read only when lam is to be chosen. Each region is transformed,
        the trees of its cube kept (about the whole's trees there), and SURE (or the rule) chooses on all of
        them together, as on the whole. A lam given stays.
        """
        if self.lam_method is None:
            return self
        bands, cubes, model = [], [], noise
        for region, core in regions():
            x, model = prepare(region, layout, noise, block=True)
            ((_, data, _, _),) = unit_channels(x, layout, model, Steps(None, 0), need_sigma=False, keep_float32=True)
            bands.append(_core_trees(self.plan(data.shape), data, core))
            cubes.append(np.asarray(data[core], dtype=np.float64))
        mosaic = np.concatenate(cubes, axis=0)  # the cubes side by side, their trees as the coefficients' layout
        del cubes
        coeffs = np.concatenate([np.concatenate(parts, axis=0).ravel() for parts in zip(*bands, strict=True)])
        del bands
        sigma = model.sigmas_of([mosaic])[0]
        var_map = model.var_maps([mosaic], 3)[0]
        lam, weights = _choice_for_plane(mosaic, sigma, self.penalty, self.lam_method, self.plan(mosaic.shape),
                                         self.penalize_approx, np.random.default_rng(self.seed), None, self.per_level,
                                         var_map, coeffs)
        return replace(self, lam_method=None, lams=(float(lam),),
                       level_weights=None if weights is None else (tuple(float(w) for w in weights),))

    def choose(self, unit: np.ndarray, sigma: float, var_map: np.ndarray | None,
               steps: Steps | None, coeffs: np.ndarray | None = None) -> tuple[float, np.ndarray | None]:
        """Lam of one unit and, by SURE per level, its level weights (None: all 1); SURE's probe afresh.

        ``coeffs``: the unit's unshifted transform when the caller has it.
        """
        return _choice_for_plane(unit, sigma, self.penalty, self.lam_method, self.plan(unit.shape),
                                 self.penalize_approx, np.random.default_rng(self.seed), steps, self.per_level,
                                 var_map, coeffs)

    def denoise(self, unit: np.ndarray, sigma: float | None, var_map: np.ndarray | None, steps: Steps,
                channel: int) -> np.ndarray:
        """Lam (given or chosen), the tree stage, then the Wiener stage when on."""
        plan = self.plan(unit.shape)
        coeffs = None
        if self.lam_method is None:
            w = None if self.level_weights is None else self.level_weights[channel]
            lam, weights = self.lams[channel], None if w is None else np.array(w)
        else:
            coeffs = plan.forward(unit)  # for the choice of lam and the tree stage's unshifted transform
            lam, weights = self.choose(unit, sigma, var_map, steps, coeffs)
            coeffs = [coeffs]  # the tree stage takes it out and shrinks it in place: no reference left here
        out = _denoise_plane(unit, lam * self.strength, self.penalty, plan, self.penalize_approx,
                             _tree_shifts(self.n_shifts, self.wiener), steps, weights, var_map, coeffs)
        del coeffs
        # the strength scales the noise level the Wiener stage removes too, so that the dial goes to the image
        s = self.strength
        w_sigma = None if sigma is None else s * sigma  # the variance map's factor is s * s: no second map made
        for wiener_plan, k in _wiener_passes(plan, self.n_shifts) if self.wiener else []:
            if lam * self.strength == 0:  # nothing shrunk: the unit itself, which is no pilot for its own gains
                if steps is not None:
                    steps(2 * k)
                continue
            out = _wiener_plane(unit, out, w_sigma, wiener_plan, k, steps, None if sigma is None else var_map, s * s)
        return out


def _core_trees(plan: _Plan, region: np.ndarray, core: tuple[slice, ...]) -> list[np.ndarray]:
    """The bands of ``region``'s transform restricted to the trees whose roots lie in ``core`` (on the grid)."""
    c = plan.forward(region)
    layout = band_layout(plan.padded, plan.splits)
    roots = layout[0].shape
    out = []
    for b in layout:
        # each axis of a band as (root, descendant within the root's cell): keep the core's roots
        split = [d for r, n in zip(roots, b.shape, strict=True) for d in (r, n // r)]
        keep = tuple(s for r, p, sl in zip(roots, plan.padded, core, strict=True)
                     for s in (slice(sl.start * r // p, sl.stop * r // p), slice(None)))
        part = c[b.start:b.start + b.size].reshape(split)[keep]
        out.append(part.reshape([part.shape[2 * a] * part.shape[2 * a + 1] for a in range(len(roots))]))
    return out


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
    noise: str | NoiseEstimate = "auto",
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
    if method is not None:
        check_choice("method", method, ("sure", "rule"), plural="methods")
    arr, layout, model = check_call(image, channel_axis=channel_axis, axes=axes, noise=noise, sigma=sigma, gain=gain,
                                    progress=progress, exact=True)
    wt = WaveletTree.checked(layout, arr.shape, lam=method, penalty=penalty, wavelet=wavelet, level=level,
                             penalize_approx=penalize_approx, cycle_spins=0, per_level=per_level, wiener=False,
                             rng=rng, axes=axes)
    x, model = prepare(arr, layout, model, exact=True)
    shape = tuple(int(x.shape[i]) for i in range(len(layout.sp_axes)))
    per_channel = _lam_steps(wt.lam_method, penalty, wt.plan(shape), per_level, model.scaled)
    steps = Steps(progress, layout.n_channels * (per_channel + sigma_steps(model, True)), start=True)
    # the start of WaveletTree.denoise, on the same units, with the same SURE probe on each channel
    choices, sigmas = [], []
    for _, data, s, var_map in unit_channels(x, layout, model, steps, need_sigma=True,
                                             keep_float32=len(layout.sp_axes) == 3):
        choices.append(wt.choose(data, s, var_map, steps))
        sigmas.append(s)
    weights = tuple(None if w is None else tuple(float(v) for v in w) for _, w in choices)
    return LamChoice(lam=tuple(float(lm) for lm, _ in choices), sigma=tuple(float(s) for s in sigmas),
                     method=wt.lam_method, level_weights=weights if any(w is not None for w in weights) else None)


def denoise_wavelet_tree(
    image: ArrayLike,
    *,
    sigma: float | Sequence[float] | None = None,
    lam: float | Sequence[float] | LamMethod | LamChoice | None = None,
    strength: float = 1.0,
    penalty: str = "tree_l2",
    wavelet: str = "db3",
    level: int | Sequence[int] | None = None,
    penalize_approx: bool = False,
    cycle_spins: int = 0,
    channel_axis: int | None = None,
    axes: Sequence[int] | None = None,
    noise: str | NoiseEstimate = "auto",
    gain: float | None = None,
    per_level: bool | None = None,
    wiener: bool = True,
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
        2-D), so that it agrees with the in-memory result (exactly when the
        basis functions reach no further; a volume's blocks at its borders
        overlap periodically, as its transform is periodized): blocks have
        the levels of the whole, its photon noise (estimated once, on a
        central part of at most 16 M voxels), and, with ``lam`` chosen
        automatically, a volume's lam chosen once for all its blocks (on 8
        cubes of it), planes their own. Every setting is checked at
        the call; the values (NaN, inf) block by block. Integer images are
        converted to float in [0, 1] (:func:`skimage.util.img_as_float`);
        float images are neither rescaled nor clipped.
    sigma : float or sequence of float, optional
        Standard deviation of the noise, in image units (one value, or one
        per channel); with ``noise='poisson-gaussian'``, of its Gaussian
        (read noise) part. Estimated per plane (or volume) and channel when
        None (:func:`restore.estimate_sigma`; a Dask array's, and a volume's
        denoised in blocks, on each block). Channels are those of the
        opponent colour space for RGB.
    lam : float, sequence of float, {'sure', 'rule'}, optional
        Regularisation, absolute (image units). A number (or one per
        channel) is used as is, on every level; ``'sure'`` and ``'rule'``
        choose it per plane as :func:`choose_lam` does (on planes, SURE also
        weighs each level); a :class:`LamChoice` from :func:`choose_lam`
        applies its lam and level weights; None picks ``'sure'`` for ``l1``,
        ``tree_l2``, ``tree_linf`` and ``'rule'`` for ``l0``, ``tree_l0``.
    strength : float, default 1.0
        Multiplies ``lam`` (chosen or given; SURE's level weights are
        kept) and the noise level that the Wiener stage removes: above 1
        smooths more, below 1 keeps more detail (and noise), towards the
        image itself. A lam of 0 (or a strength of 0) gives the image back
        unchanged: the Wiener stage is skipped too.
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
        (translation-invariant denoising; 0 or 1 means no shift of the tree
        stage). The Wiener stage (``wiener``) shifts its last pass in any case:
        4 shifts on planes, 2 on volumes at least.
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
    noise : {'auto', 'gaussian', 'poisson-gaussian'} or NoiseEstimate, default 'auto'
        ``'auto'``: the image's noise-level function chooses Gaussian or
        Poisson-Gaussian noise (:func:`restore.estimate_noise` with
        ``noise='auto'``, once, on the whole image, or on the central part
        a Dask array's photon noise is estimated on; planes under 8 x 8 are
        Gaussian); the choice and its parameters are logged at INFO level
        on the ``restore.denoise`` logger, then it is as if that model had
        been named, with the estimated gain and read noise under photon
        noise. A :class:`restore.NoiseEstimate` (what
        :func:`restore.estimate_noise` returned) is used in the same way,
        estimated no further: estimate once, show
        :meth:`~restore.NoiseEstimate.describe`, and pass it, to know what
        is used: under Gaussian noise its sigma serves every plane (volume)
        and channel, unless ``sigma`` is given. With
        ``'auto'``, a ``sigma`` given (and no ``gain``) means Gaussian noise
        of that deviation, and nothing is estimated; so does a number given
        as ``lam`` (in image units: under photon noise ``lam`` is in the
        stabilised units of the Anscombe transform, so it must be named).
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
        Image units per photon (``noise='poisson-gaussian'``, or a
        Poisson-Gaussian :class:`restore.NoiseEstimate`, whose gain it
        replaces). ``gain`` and ``sigma`` are estimated from the image's
        noise-level function when None (:func:`restore.estimate_noise`; the
        estimate is logged at INFO level on the ``restore.denoise`` logger).
    per_level : bool, optional
        With SURE, also choose a weight per detail level (the lam of level
        ``l`` is ``lam * weight[l]``), as :func:`choose_lam` does. Default
        (None): off.
    wiener : bool, default True
        Refine the tree estimate by empirical Wiener filtering: the noisy
        coefficients in another orthonormal basis (with the same levels) are
        scaled by ``p**2 / (p**2 + sigma**2)``, ``p`` the pilot's
        coefficient, averaged over shifts. On planes, one pass in Daubechies
        2 with the tree estimate as pilot (``2 * cycle_spins`` shifts, at
        least 4); on volumes (three ``axes``), two: in Haar with the tree
        estimate as pilot (``cycle_spins / 2`` shifts), then in Daubechies 2
        with the first pass as pilot (``2 * cycle_spins`` shifts, at least
        2). The tree estimate then takes ``cycle_spins / 4`` shifts. It
        needs ``sigma`` (estimated when None, even with ``lam`` given).
        ``False`` gives the tree estimate alone: on
        planes in less than half the time, and about 0.9 dB worse on
        photographs (``benchmarks/bench_denoise.py --part default``).
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
    spinning shifts along every transformed axis. With ``lam`` given and
    ``wiener=False``, the result equals transform, :func:`restore.prox`,
    inverse transform.

    The Wiener stage [4]_ uses the tree estimate as the oracle of each
    coefficient's energy in another basis; the bases err in different
    places, so it removes part of the tree estimate's artefacts, and its
    shifts make the result more translation invariant than the tree
    estimate's alone, at about the cost of the tree estimate's shifts it
    replaces.

    A volume of more than 2**25 voxels (per channel) is denoised in the
    overlapping blocks a Dask array of it would be, as many at once as
    0.5 GB holds: whole, it would take about 35 bytes a voxel, 40 under
    photon noise (float32 input, ``benchmarks/bench_volume_bytes.py``); in blocks, the input, the
    output and a bounded working memory. The result is then the Dask array's (with lam chosen
    automatically once, on 8 cubes of 64 voxels a side at the centres of
    the volume's octants, for every block; under photon noise, the gain and read
    noise are estimated, and checked, on a central part of at most 16 M
    voxels). ``progress`` is then called from the blocks' threads, one call
    at a time.

    SURE measures the risk on at most about 2**19 coefficients of a volume
    (2**16 of a plane): on larger volumes and images, on a regular subset of
    whole trees (every second root along the axes with the most roots),
    which estimates the risk of all of them at a fraction of the cost.

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
    noise = noise_for_lam(noise, lam)
    arr, layout, model = check_call(image, channel_axis=channel_axis, axes=axes, noise=noise, sigma=sigma, gain=gain,
                                    progress=progress, sliced_axes=sliced_axes)
    method = WaveletTree.checked(layout, arr.shape, lam=lam, penalty=penalty, wavelet=wavelet, level=level,
                                 penalize_approx=penalize_approx, cycle_spins=cycle_spins, per_level=per_level,
                                 wiener=wiener, rng=rng, axes=axes, strength=strength)
    return drive(arr, layout, model, method, progress)


# ---------------------------------------------------------------------------
# Internal interface: the steps of denoise_wavelet_tree one at a time
# ---------------------------------------------------------------------------


class PlaneDenoiser:
    """Transform a plane once, then shrink its coefficients at any lam: for protocols that try many.

    Internal (used by :mod:`restore.evaluate`), not part of ``restore``'s
    public API. Grey planes of one shape, one wavelet and penalty, the
    approximation band not penalised, no cycle spinning: the tree stage of
    :func:`denoise_wavelet_tree`'s defaults (``wiener=False``), whose lam
    is the one chosen.

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
