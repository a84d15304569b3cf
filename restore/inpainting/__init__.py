"""Inpainting with a learned tree-structured dictionary of patches.

The recipe (:func:`inpaint`), one module per stage: the smooth interpolant
(:mod:`.interpolation`), the edge-enhancing diffusion (:mod:`.diffusion`),
the passes of patch coding (:mod:`.patches`), the dictionary
(:mod:`.dictionary`), the frequency selective extrapolation
(:mod:`.extrapolation`), the non-local passes (:mod:`.grouping`) and the
groups' Gaussian model iterated as a prior (:mod:`.prior`).
"""

from __future__ import annotations

import logging
import os
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._config import default_num_threads, single_threaded_blas
from .._online import Atoms
from .._progress import ProgressCallback, Steps
from .._validation import check_callable, check_image, check_int, check_mask, check_number, restore_dtype
from .dictionary import (
    _LEARN_BATCH,
    PATCH_SIZE,
    adaptation_settings,
    default_dictionary,
    learn_dictionary,
    prepare_learning,
    resolve_dictionary,
    should_adapt,
)
from .diffusion import diffusion_time, edge_weights, fed_cycle, sharpen
from .extrapolation import extrapolate, extrapolation_steps, plan_blocks
from .grouping import GroupSettings, group_passes, n_group_steps, plan_references
from .interpolation import _SharedSteps, bands, biharmonic_fill, known_range, refill
from .masks import MaskCoverage, SuspectMaskWarning, mask_coverage
from .patches import Coder, luminance, pass_batch, pass_grids, refine_luminance, window_sums
from .prior import iterate_prior, prior_side, prior_steps, wants_prior
from .validation import _CLUSTERED, Blend, best_blend, choose_blend, clustering, holdout

if TYPE_CHECKING:
    from ..learning import TreeDictionaryLearning

__all__ = ["MaskCoverage", "SuspectMaskWarning", "default_dictionary", "inpaint", "learn_dictionary",
           "mask_coverage"]

log = logging.getLogger("restore.inpainting")

# lam of the passes, geometric from the first to the last: detail builds up as lam falls; lower, the passes
# start to copy their own errors under heavy pixel loss
_DEFAULT_LAM = (0.02, 0.005)
_N_TRAIN = 4000  # patches the dictionary's adaptation learns from: twice as many gained 0.01 dB on text at 1.2x the CPU
# non-local passes in a row that fit the held-out pixels no better: the passes left are skipped. On strokes and holes
# one (a second chance changed no text result, at a pass's time on photos where they do not help); under random
# loss two (on repeating texture the second pass can gain most)
_PATIENCE = 1
_PATIENCE_SCATTERED = 2
_FINAL_CG_TOL = 1e-5  # the result's interpolant (warm started: cheap): as scikit-image's where nothing is kept
_COPY_BAND_PX = 1 << 18  # pixels per band of the work copy: a progress step each, some milliseconds
_PASS_BATCH = 8192  # patches per batch of a pass, one batch per thread: progress and Cancel every fraction of a second


def inpaint(
    image: ArrayLike,
    mask: ArrayLike,
    *,
    dictionary: TreeDictionaryLearning | str | os.PathLike | None = None,
    patch_size: int = PATCH_SIZE,
    stride: int | None = None,
    n_passes: int = 18,
    lam: float | tuple[float, float] | None = None,
    channel_axis: int | None = None,
    n_train: int = _N_TRAIN,
    batch_size: int = _PASS_BATCH,
    max_iter: int = 15,
    n_group_passes: int = 5,
    prior: bool | None = None,
    rng: int | np.random.Generator | None = None,
    progress: ProgressCallback | None = None,
) -> NDArray[np.floating]:
    """Fill the masked pixels of an image from a dictionary of patches.

    The missing pixels start from the biharmonic interpolant of the known
    ones (as :func:`skimage.restoration.inpaint_biharmonic`), sharpened
    at edges by edge-enhancing diffusion (Weickert's; blended with the
    interpolant, which keeps textures better). Then
    ``n_passes`` passes refine the luminance: each takes the patches of a
    randomly shifted grid of step ``stride`` that touch the mask,
    sparse-codes them over a tree-structured dictionary and puts the
    average of their reconstructions (Gaussian weights, larger at the patch
    centre, times the inverse of each reconstruction's error on its known
    pixels) into the missing pixels. lam decreases from pass to pass, so
    that detail builds up on the start. Colour differences, smooth, keep
    the start's. On straight edges, where the diffusion is better, the
    result is a blend of the passes' result (down to a third, by the
    coherence of the start's structure tensor) and the diffusion alone.
    How much of the passes' and of the non-local passes' changes the
    result keeps (from none to all of each) is fitted on a random share of
    the known pixels next to the mask, held out of every stage and filled
    like the missing ones (see :mod:`.validation`): where the patches find
    no structure (smooth photos, stochastic texture) the result falls back
    towards the biharmonic interpolant of all known pixels, to which the
    kept changes are added. The passes' change is kept whole unless the
    held-out pieces (strokes, or pixels) agree that less of it fits them
    better: one stroke across an edge does not decide for all the others.
    The luminance is then also extrapolated block by block from sparse
    Fourier models of the known pixels around each block (frequency
    selective reconstruction, Genser et al. 2018: it carries texture and
    long edges across strokes, where 8-pixel patches see too little, and
    between scattered known pixels), and the result moves towards it as
    far as fits the held-out pixels best. Under heavy random loss the recipe ends with a
    Gaussian model of each group of similar patches iterated as a prior (see ``prior``), its
    change weighed on the held-out pixels too. Known pixels are returned bit for bit; holes wider than a patch are
    filled by the interpolant and refined by the patches inside them.
    On strokes and holes (a clustered mask) the work follows the holes:
    the diffusion runs for the square of the strokes' half-width, a patch
    whose missing pixels have settled is not coded again, the non-local
    passes are made only when the first, tried on the references next to
    the held-out pixels, fits those better, and the result's interpolant
    is solved again only where the held-out pixels touch the mask (and
    where a region too large to factor was solved to a looser tolerance).

    Parameters
    ----------
    image : ndarray, shape (M, N) or (M, N, C) with ``channel_axis``
        The image; float32 stays float32, float16 is computed in float32
        and returned as float16, integers are converted to float in [0, 1]
        (float64; [-1, 1] for signed integers) and the result stays in that
        range. Floats are not clipped. Missing pixels may hold anything, NaN included. The
        result does not depend on the image's units: ``inpaint(c * x)`` is
        ``c * inpaint(x)``.
    mask : array_like of bool, shape (M, N)
        True where pixels are missing (as in
        :func:`skimage.restoration.inpaint_biharmonic`). A mask that marks
        most of the image and leaves much of it far from any known pixel
        (an inverted mask) is warned of (:func:`mask_coverage`).
    dictionary : TreeDictionaryLearning or path, optional
        A fitted dictionary of centred, unit-norm luminance patches of
        ``patch_size**2`` features (see :func:`learn_dictionary`), or a
        file saved by its ``save``.
        Default: the dictionary shipped with the package, adapted to the
        image (learned from its complete patches, warm started from the
        shipped one) when it has enough of them (text, scratches; not with
        random pixel loss).
    patch_size : int, default 8
        Side of the square patches.
    stride : int, optional
        Step of each pass's patch grid, in [1, patch_size]. A pass codes
        about 1/stride**2 of the patches touching the mask. Default:
        ``patch_size`` (each pass's grid tiles the image; a denser grid
        costs stride**-2 times as much for next to no gain, as each pass is
        a step of the lam schedule, not a covering to make dense).
    n_passes : int, default 18
        Passes of patch coding. The time of the coding grows as
        ``n_passes / stride**2``: the defaults cost 0.28 times one pass at
        stride 1 (8x8 patches).
    lam : float or (float, float), optional
        Regularisation of the codes of the centred patches, each scaled to
        unit norm: one value for every pass, or the first and the last of
        a geometric sequence (default (0.02, 0.005)).
    channel_axis : int, optional
        Axis of colour channels (any number of them).
    n_train : int, default 4000
        Patches used to learn a dictionary from the image.
    batch_size : int, default 8192
        Patches coded together by one thread, at most (a pass is cut in
        at least 8 batches when it has 2048 patches or more).
    max_iter : int, default 15
        FISTA iterations per batch. The passes refine one estimate, each
        from the last one's, so a pass's codes need not converge: 25 gave
        the same masked PSNR within 0.05 dB (text and random loss), at 1.15
        times the time on text.
    n_group_passes : int, default 5
        Non-local passes that end the recipe (0: none; they stop early
        once one fits the held-out pixels no better than the best before): the luminance's
        patches are matched on the current estimate, and each group of
        similar patches is coded jointly, its known pixels as data, under
        a tree-l2 norm whose nodes own a DCT coefficient across the group
        (simultaneous sparse coding, as LSSC), and the missing pixels take
        the weighted average of the groups' reconstructions; ``lam`` falls
        from pass to pass.
    prior : bool, optional
        Whether the recipe ends with the groups' Gaussian model iterated as
        the image's prior (non-local Bayes: 6 steps over the whole image,
        each matching groups of 48 similar patches on the estimate and
        moving each patch's missing pixels towards their mean given its
        known ones under the group's mean and covariance; the known pixels
        kept, and as much of its change kept as fits the held-out pixels
        best). Default: decided from the mask, on for heavy
        random loss (half the pixels or more missing, no more clustered
        than chance), where it pays for its time; off for text, scratches
        and holes.
    rng : int or Generator, optional
        Randomness of the training-patch sample and of the grid shifts
        (default 0).
    progress : callable, optional
        ``progress(done, total)`` after each step of every stage: the
        mini-batches of the dictionary's adaptation, the bands and
        conjugate-gradient iterations of the interpolation, the cycles of
        the diffusion, the batches of patches and of extrapolated blocks. It may raise
        :class:`restore.Cancelled` to stop (nothing is returned then). It
        may be called from worker threads (the dictionary's adaptation, the
        bands of the interpolation solved at once, the extrapolation beside
        the patches), never two calls at a time.

    Returns
    -------
    ndarray
        The inpainted image, same shape and float dtype as ``image``.

    Raises
    ------
    ValueError
        Mask of the wrong shape, mask with every pixel missing, NaN or inf
        in the image, patch larger than the image, dictionary of the wrong
        patch size, a file that is no saved dictionary, invalid ``stride``,
        ``n_passes``, ``lam`` or ``prior`` (True on an image narrower than
        the prior's 8-pixel patches).

    Warns
    -----
    SuspectMaskWarning
        A mask that cannot be meant: most of the image missing and much of
        it out of the patches' reach (see :class:`MaskCoverage`).
    """
    job = _Job.check(image, mask, dictionary=dictionary, patch_size=patch_size, stride=stride, n_passes=n_passes,
                     lam=lam, channel_axis=channel_axis, n_train=n_train, batch_size=batch_size, max_iter=max_iter,
                     n_group_passes=n_group_passes, prior=prior, progress=progress)
    with single_threaded_blas():  # its threads spin: the coding runs its own, the rest are small products
        return _inpaint(job, adapt_default=dictionary is None, rng=rng, progress=progress)


def _inpaint(job: _Job, *, adapt_default: bool, rng: int | np.random.Generator | None,
             progress: ProgressCallback | None) -> np.ndarray:
    """The stages of :func:`inpaint` on its checked arguments."""
    M = job.missing
    n_ch = job.image.shape[2]
    if not M.any():
        return job.result(None)
    if job.blank:  # every known pixel 0 (a black frame): so is every fill, and no stage has a scale to work in
        return job.result(np.zeros((int(np.count_nonzero(M)), n_ch), dtype=job.image.dtype))
    gen = np.random.default_rng(0 if rng is None else rng)
    # strokes and holes: their patches settle in a few passes, and are not coded again (under random loss every
    # patch keeps moving with the estimate around it)
    clustered = clustering(M) >= _CLUSTERED
    # known pixels held out of every stage: their error decides how far the refinements may move the interpolant
    held, piece = holdout(M, gen, clustered=clustered) or (None, None)
    run = M.copy()  # the run's mask: the missing pixels and the held-out ones
    if held is not None:
        run.reshape(-1)[held] = True
    # the non-local passes' lam and the extrapolation's thresholds are in units of the known pixels' range (the
    # work units' power of two is not continuous in the scale), the held-out ones included: they may hold the only
    # non-zero values. The range, not the peak: the same on an image and on it offset (a camera's baseline, a sky)
    peak = job.peak / float(job.unit)
    span = job.span / float(job.unit)
    n_missing = window_sums(run, job.patch_size)
    touching = n_missing > 0  # which patches touch the run's mask: the passes' and the groups'
    grids = pass_grids(run, job.patch_size, job.stride, len(job.lams), gen, touching=touching)
    adapt, n_usable = should_adapt(run, job.patch_size, sums=n_missing) if adapt_default else (False, 0)
    if not adapt:
        del n_missing  # else the training patches are drawn from it (4 bytes a pixel)
    if job.dictionary is None and not adapt:
        raise ValueError(f"no dictionary for {job.patch_size}x{job.patch_size} patches ships with the package "
                         "and the image has too few complete patches to learn one: pass dictionary=")
    # one progress count over the stages, each step of each under about a second on 16 MP
    n_learn = -(-min(job.n_train, n_usable) // _LEARN_BATCH) if adapt else 0
    n_bands = len(bands(*M.shape))
    eed_time = diffusion_time(run, clustered)
    n_cycles = len(fed_cycle(eed_time)[1])
    n_batches = sum(-(-len(r) // pass_batch(len(r), job.batch_size)) for r, _ in grids)
    plan = plan_references(run, job.groups, gen, touching if job.groups.patch == job.patch_size else None)
    del touching
    n_groups = n_group_steps(plan)
    n_resolve = 0 if held is None else n_bands * n_ch  # the interpolant again, with the held-out pixels known
    dense = job.prior  # heavy random loss: the groups' Gaussian model iterated as a prior ends the recipe
    n_prior = prior_steps(M.shape) if dense else 0
    # the frequency selective extrapolation of the luminance, kept as far as the held-out pixels support it: on
    # strokes and holes, and under random loss too, where the non-local passes and the prior start from it
    extrap = held is not None
    n_extrap = extrapolation_steps(run) if extrap else 0
    copy_bands = bands(*M.shape, band_px=_COPY_BAND_PX)
    steps = Steps(progress, len(copy_bands) + n_learn + n_bands * (n_ch + 1) + n_cycles + n_batches + n_groups
                  + n_prior + n_resolve + n_extrap, start=True)
    # the work copy of the image, band by band after the first report: at 16 MP its pages alone take half a second
    work = np.zeros(job.image.shape, job.image.dtype)  # its pages untouched until each band is written
    for r0, r1, _, _ in copy_bands:  # known values of magnitude 1 to 2; missing ones 0, unread (NaN, nodata, say)
        np.divide(job.image[r0:r1], job.unit, out=work[r0:r1], where=~run[r0:r1, :, None])
        steps()

    # 1. the dictionary, adapted to the image when it has enough complete patches (text, scratches): fitted on a
    # thread of its own while 2. the start, the biharmonic interpolant (one thread on a small image), 3. is sharpened
    # at edges by the diffusion and 4. the weights of the diffusion alone (straight edges) are computed
    shared = _SharedSteps(steps)  # one report at a time from both threads, each adding its own steps
    est = job.dictionary
    with ThreadPoolExecutor(1, thread_name_prefix="restore-inpaint-learn") as side:
        learner = None
        if adapt:
            learned = shared.counter(n_learn)
            settings = adaptation_settings(est)
            fit = prepare_learning(work, masks=run, patch_size=job.patch_size, n_patches=job.n_train,
                                   settings=settings, dict_init=None if est is None else est.components, rng=gen,
                                   channel_axis=-1, progress=learned, sums=[n_missing])
            del n_missing
            learner = side.submit(_timed, fit, "dictionary ready in %.2f s")
        else:
            log.info("dictionary ready in %.2f s", 0.0)
        with shared.stopping_others():  # the fit stops at its next step on Cancel, or on an error here
            t0 = time.perf_counter()
            exact = np.zeros(run.shape, dtype=bool)  # the pixels solved by the factorisation, not to a tolerance
            start = biharmonic_fill(work, run, shared, direct=not dense, clip=not dense,
                                    n_threads=default_num_threads(), exact=exact)
            del work  # from here on, the estimate's arrays only (the peak memory of 16 MP photos)
            interpolant = start[run]
            start, diffused = sharpen(start, run, default_num_threads(), shared.counter(n_cycles), time=eed_time)
            t_start = time.perf_counter() - t0
            lum = luminance(start)  # the dictionary codes the luminance; colour differences, smooth, keep the start's
            weight = edge_weights(lum, run, shared)
            if learner is not None:
                est = learner.result().atoms(settings)
                learned.finish()
    # 5. the passes of patch coding refine the luminance of the missing pixels, while the luminance is extrapolated
    # from the known pixels alone on a thread of its own (the passes leave a core idle between their batches)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(1, thread_name_prefix="restore-inpaint-extrapolate") as side:
        extrapolated = side.submit(_extrapolated_grey, start, run, span, shared.counter(n_extrap)) if extrap else None
        with shared.stopping_others():  # the extrapolation stops at its next step
            lum_run = lum[run]  # the luminance is refined in place: at 16 MP no copy of it is held
            refined = refine_luminance(lum, run, patch_size=job.patch_size, grids=grids, lams=job.lams,
                                       batch_size=job.batch_size, coder=Coder.of(est, job.max_iter),
                                       progress=shared.counter(n_batches), settle=clustered)
            log.info("interpolated in %.2f s, coded and averaged patches in %.2f s", t_start,
                     time.perf_counter() - t0)
            extrapolated = None if extrapolated is None else extrapolated.result()
    # 6. weight * (start + the passes' change) + (1 - weight) * the diffusion
    values = start[run]
    change = (weight * (refined[run] - lum_run) / np.sqrt(n_ch))[:, None] \
        + (1.0 - weight)[:, None] * (diffused - values)
    values = values + change.astype(values.dtype)
    del lum, lum_run, refined, weight, diffused, change
    # the held-out pixels' rows among the run's missing pixels (row-major), and their known values
    run_idx = np.flatnonzero(run)
    rows = None if held is None else np.searchsorted(run_idx, held)
    target = None if held is None else job.image.reshape(-1, n_ch)[held].astype(np.float64) / float(job.unit)
    if extrapolated is not None:
        values = values + _extrapolated_change(extrapolated, values, span, rows, target)
    blend = None if held is None else best_blend(target, interpolant[rows], values[rows], values[rows])
    first_fit = blend
    second = None
    if job.groups.n_passes:
        # 7. non-local passes on the luminance (the unit-norm grey axis); the colour differences keep the result's
        # (coding them on the same groups too measured no better, at twice the time)
        t0 = time.perf_counter()
        start[run] = values
        L = luminance(start).astype(np.float64, copy=False)[None]  # not start in float64: 16 MP x 3 channels
        before = L[0][run]
        L0 = L[0].reshape(-1)
        n_threads = default_num_threads()
        settings = replace(job.groups, lams=tuple(lam * span for lam in job.groups.lams))
        worse = 0

        def held_fit() -> Blend:
            """The best blend on the held-out pixels with the non-local passes' change as it stands."""
            cand = values[rows] + ((L0[held] - before[rows]) / np.sqrt(n_ch))[:, None]
            return best_blend(target, interpolant[rows], values[rows], cand)

        def gains(fit: Blend) -> bool:
            # a pass must beat the dictionary's result by more than the held-out error's noise, of relative sd
            # about 1 / sqrt(pixels): picking the best of several passes on a few hundred pixels is no evidence
            return fit.mse < blend.mse and fit.mse < first_fit.mse * (1.0 - 1.0 / np.sqrt(len(held)))

        def after_pass(k: int) -> bool:
            """Keep the pass if its blend fits the held-out pixels best so far; stop when none has lately."""
            nonlocal blend, second, worse
            if held is None:
                return True
            fit = held_fit()
            log.debug("non-local pass %d: %s on %d held-out pixels (best before: %s)", k, fit, len(held), blend)
            if gains(fit):
                blend, second, worse = fit, L0[run_idx] - before, 0
            else:
                worse += 1
            if worse >= (_PATIENCE if clustered else _PATIENCE_SCATTERED) and k + 1 < len(plan):
                steps(n_group_steps(plan[k + 1:]))
                return False
            return True

        def promising() -> bool:
            """Whether the first pass, on the references next to the held-out pixels, fits them better."""
            fit = held_fit()
            log.debug("non-local pilot: %s (best before: %s)", fit, blend)
            return gains(fit)

        # on strokes and holes, the first pass codes the references next to the held-out pixels first: when they do
        # not fit those better, no pass is made (photos whose texture does not repeat; 15.9 MP: most of a pass)
        pilot = None
        if held is not None and clustered:
            pilot = np.zeros(M.shape, dtype=bool)
            pilot.reshape(-1)[held] = True
        with ThreadPoolExecutor(n_threads, thread_name_prefix="restore-inpaint") as pool:
            group_passes(L, run, settings, plan, pool=pool, n_threads=n_threads, progress=steps, after_pass=after_pass,
                         pilot=pilot, promising=None if pilot is None else promising, settle=clustered)
        if held is None:
            second = L0[run_idx] - before
        log.info("non-local passes in %.2f s", time.perf_counter() - t0)
        del L, L0, before, start
    nonlocal_change = 0.0 if second is None else (second / np.sqrt(n_ch))[:, None]
    if blend is None:
        values = values + nonlocal_change
        if dense:
            values = values + _prior_change(job, run, values, peak, steps)
        return job.result(values[M.reshape(-1)[run_idx]].astype(job.image.dtype, copy=False))
    # the refinements' changes, weighted as the held-out pixels support, added to the interpolant of every known
    # pixel (its solve starts from the run's: a few iterations)
    chosen = values[rows] if second is None else values[rows] + nonlocal_change[rows]
    blend = choose_blend(target, interpolant[rows], values[rows], chosen, piece)
    log.info("refinements kept: %.2f of the dictionary's, %.2f of the non-local passes'", blend.a, blend.b)
    change = blend.a * (values - interpolant) + blend.b * nonlocal_change
    del values, second, nonlocal_change  # before the prior: the memory of 16 MP photos
    if dense:
        # 8. the iterated prior from the run's result, as much of its change as fits the held-out pixels best
        delta = _prior_change(job, run, interpolant + change, peak, steps)
        before = interpolant[rows] + change[rows]
        fit = best_blend(target, before, before + delta[rows], before + delta[rows])
        log.info("the prior's change kept: %.2f", fit.a)
        change = change + fit.a * delta
    in_m = M.reshape(-1)[run_idx]
    full = job.image / job.unit
    full[M] = interpolant[in_m]
    interpolant = None  # noqa: F841 - the memory of 16 MP photos
    redo = M
    if not dense:
        # the exact interpolant of the mask's regions that no held-out pixel touches is the run's where it was
        # factorised: only the others, and those solved by conjugate gradients to the first pass's looser tolerance,
        # are solved again (the others' values then stand as known, out of reach of the regions solved)
        lo, hi = known_range(full, M)
        if np.array_equal((lo, hi), known_range(full, run)):
            redo = refill(run, M) | (M & ~exact)
    del exact
    values = biharmonic_fill(full, redo, steps, warm=True, rtol=_FINAL_CG_TOL, direct=not dense,
                             clip=not dense, n_threads=default_num_threads())[M]
    values += change[in_m]
    return job.result(values.astype(job.image.dtype, copy=False))


def _extrapolated_grey(start: np.ndarray, run: np.ndarray, span: float,
                       progress: ProgressCallback | None) -> np.ndarray:
    """The mean of the channels at the run's pixels (n_run,) extrapolated from the known ones (:mod:`.extrapolation`).

    ``start`` (H, W, C) holds the known pixels (work units; its run's pixels
    are not read). In units of the known pixels' range ``span``, as the block sizes
    want them; NaN at a pixel out of every window's reach.
    """
    t0 = time.perf_counter()
    grey = start.sum(axis=-1, dtype=start.dtype)  # float32 at 16 MP
    grey /= start.dtype.type(span * start.shape[2])
    grey[run] = np.nan  # never read (weight 0); left where no block reaches
    n_threads = default_num_threads()
    with ThreadPoolExecutor(n_threads, thread_name_prefix="restore-inpaint") as pool:
        extrapolate(grey, run, plan_blocks(grey, run), pool=pool, n_threads=n_threads, progress=progress)
    log.info("extrapolated in %.2f s", time.perf_counter() - t0)
    return grey[run]


def _extrapolated_change(extrapolated: np.ndarray, values: np.ndarray, span: float, rows: np.ndarray,
                         target: np.ndarray) -> np.ndarray:
    """The change (n_run, 1) of ``values`` towards the extrapolation that fits the held-out pixels best.

    ``extrapolated`` is :func:`_extrapolated_grey`'s; the change is the
    share in [0, 1] of its difference from the channels' mean of ``values``
    that fits best, the same in every channel (the colour differences stay),
    and 0 where nothing was extrapolated.
    """
    n_ch = values.shape[1]
    before = values.sum(axis=-1, dtype=values.dtype)
    before /= values.dtype.type(span * n_ch)
    change = (extrapolated - before) * span
    change[np.isnan(change)] = 0.0
    change = change[:, None]
    moved = values[rows] + change[rows]
    share = best_blend(target, values[rows], moved, moved).a
    log.info("%.2f of the extrapolation's change kept", share)
    return (share * change).astype(values.dtype)


def _timed(f, message: str):
    """``f()``, its time logged with ``message``."""
    t0 = time.perf_counter()
    out = f()
    log.info(message, time.perf_counter() - t0)
    return out


def _prior_change(job: _Job, run: np.ndarray, values: np.ndarray, peak: float, steps: Steps) -> np.ndarray:
    """The iterated prior's change (n_run, 1) to the run's missing pixels, whose estimate is ``values`` (work units).

    The same in every channel: the prior refines the luminance (the grey axis).
    """
    n_ch = job.image.shape[2]
    L = luminance(job.image).astype(np.float64, copy=False)  # not the image in float64: 16 MP x 3 channels
    L /= float(job.unit)
    L[run] = values.sum(axis=1) / np.sqrt(n_ch)  # row-major, as values
    return (iterate_prior(L, run, peak, steps) / np.sqrt(n_ch))[:, None]


@dataclass(frozen=True)
class _Job:
    """The validated arguments of :func:`inpaint`, and how its result goes back to the input's layout and units."""

    input: np.ndarray
    image: np.ndarray  # channels last, float
    axis: int | None
    missing: np.ndarray
    unit: np.floating  # a power of two: the known pixels' magnitude
    dictionary: Atoms | None
    patch_size: int
    stride: int
    lams: np.ndarray
    n_train: int
    batch_size: int
    max_iter: int
    groups: GroupSettings
    prior: bool  # the iterated group prior ends the recipe
    blank: bool  # every known pixel is 0
    peak: float  # the largest magnitude of a known pixel
    span: float  # the range of the known pixels (largest value minus smallest, over the channels); a flat image: peak

    @classmethod
    def check(cls, image: ArrayLike, mask: ArrayLike, *, dictionary, patch_size, stride, n_passes, lam, channel_axis,
              n_train, batch_size, max_iter, n_group_passes, prior, progress) -> _Job:
        """Validate everything, before any work."""
        image = np.asarray(image)
        img, axis = check_image(image, channel_axis=channel_axis, exact=True, finite=False)
        img = img[..., None] if axis is None else np.moveaxis(img, axis, -1)
        H, W, _ = img.shape
        M = check_mask(mask, (H, W))
        patch_size = check_int("patch_size", patch_size, min=2)
        if patch_size > min(H, W):
            raise ValueError(f"patch_size {patch_size} is larger than the image ({H}x{W})")
        stride = patch_size if stride is None else check_int("stride", stride, min=1, max=patch_size)
        lams = _lam_schedule(lam, check_int("n_passes", n_passes))
        check_callable("progress", progress)
        est = resolve_dictionary(dictionary, patch_size)
        if prior is not None and not isinstance(prior, bool | np.bool_):
            raise ValueError(f"prior must be True, False or None (decided from the mask), got {prior!r}")
        if prior and min(H, W) < prior_side():
            raise ValueError(f"prior=True needs an image of at least {prior_side()} pixels a side (the prior's "
                             f"patches), got {H}x{W}")
        if M.all():
            raise ValueError("mask marks every pixel as missing: nothing to inpaint from")
        coverage = mask_coverage(M, patch_size)
        if coverage.suspect:
            warnings.warn(SuspectMaskWarning(f"the mask {coverage.describe()}: those pixels are filled smoothly from "
                                             "far away. Is it inverted? True (non-zero in a file) marks the pixels "
                                             "to fill.", coverage), stacklevel=3)
        lo, hi = known_range(img, M)  # NaN or inf at a known pixel: not finite
        if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
            raise ValueError("image contains NaN or infinite values at known pixels")
        # work in units where the known pixels reach magnitude 1 to 2: a power of two, so that the result does
        # not depend on the image's units and no intermediate overflows or underflows
        peak = max(float(np.max(hi)), -float(np.min(lo)), 0.0)
        unit = img.dtype.type(2.0 ** np.ceil(np.log2(peak)) if peak > 0 else 1.0)
        return cls(image, img, axis, M, unit, est, patch_size, stride, lams, check_int("n_train", n_train, min=0),
                   check_int("batch_size", batch_size), check_int("max_iter", max_iter),
                   GroupSettings(n_passes=check_int("n_group_passes", n_group_passes, min=0)),
                   wants_prior(M) if prior is None else bool(prior), peak == 0.0, peak,
                   float(np.max(hi)) - float(np.min(lo)) or peak)

    def result(self, values: np.ndarray | None) -> np.ndarray:
        """The image in the input's layout and result dtype, the missing pixels set to ``values`` (work units)."""
        img, M, axis = self.image, self.missing, self.axis
        out = np.array(img[..., 0] if axis is None else np.moveaxis(img, -1, axis), dtype=img.dtype, copy=True)
        if values is not None:
            if axis is None:
                out[M] = values[:, 0] * self.unit
            else:
                np.moveaxis(out, axis, -1)[M] = values * self.unit
        out = restore_dtype(out, self.input.dtype)
        if self.input.dtype.kind in "ui":  # floats in the range img_as_float gives: a fill may ring past it
            np.clip(out, -1.0 if self.input.dtype.kind == "i" else 0.0, 1.0, out=out)
        if self.input.dtype.kind == "f":  # known pixels bit for bit: from the input itself
            known = ~M if axis is None else np.expand_dims(~M, axis)
            np.copyto(out, self.input, where=np.broadcast_to(known, self.input.shape))
        return out


def _lam_schedule(lam: float | tuple[float, float] | None, n_passes: int) -> np.ndarray:
    """The lam of each pass: geometric from ``lam[0]`` to ``lam[1]``, or constant."""
    pair = _DEFAULT_LAM if lam is None else (lam, lam) if np.ndim(lam) == 0 else tuple(np.ravel(lam))
    if len(pair) != 2:
        raise ValueError(f"lam must be a number > 0 or a pair (first, last) of them, got {lam!r}")
    first, last = (check_number("lam", v, strict=True) for v in pair)
    return np.geomspace(first, last, n_passes)
