"""The two stages of the wavelet-tree method on one plane or volume: tree shrinkage, then empirical Wiener."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import replace

import numpy as np

from .._config import default_num_threads
from .._progress import Steps
from ..proximal import _free_scratch
from ._driver import in_block
from ._transform import _overlap, _Plan, _shifts, _shrink_rows


def _scale_bands(row: np.ndarray, bands: list[tuple[int, int, np.ndarray]] | None, up: bool) -> None:
    """Each band of ``row`` divided (``up``: multiplied) by its cells' noise deviation (none without ``bands``).

    A function, so that no level's array of cells (an eighth of a volume) outlives it in a loop variable.
    """
    for lo, hi, v in bands or ():
        if up:
            row[lo:hi] *= np.sqrt(v)
        else:
            row[lo:hi] /= np.sqrt(v)


def _shift_groups(n_shifts: int, ndim: int = 2) -> list[list[tuple[int, ...]]]:
    """The shifts in groups of one per thread: each group is shrunk as one batch (one row per thread)."""
    shifts = _shifts(n_shifts, ndim)
    k = default_num_threads()
    return [shifts[i:i + k] for i in range(0, len(shifts), k)]


def _shrink_steps(n_shifts: int, ndim: int = 2) -> int:
    """Progress steps of :func:`_denoise_plane`: a forward and an inverse transform per shift, a prox per group."""
    return 2 * n_shifts + (n_shifts if ndim == 3 else len(_shift_groups(n_shifts)))


def _denoise_plane(plane: np.ndarray, lam: float, penalty: str, plan: _Plan, penalize_approx: bool,
                   n_shifts: int, steps: Steps | None = None, level_weights: np.ndarray | None = None,
                   var_map: np.ndarray | None = None, coeffs: list[np.ndarray] | None = None) -> np.ndarray:
    """Average over ``n_shifts`` circular shifts of transform, prox, inverse; ``steps()`` after each stage.

    With ``var_map``, each coefficient is shrunk in units of its noise deviation: divided by it
    (:meth:`._transform._Plan.coeff_var`) before the prox, multiplied back after. ``coeffs``: a list
    holding ``plan.forward(plane)`` (the unshifted transform) when the caller has it; it is taken out of
    the list and shrunk in place (the caller keeps no reference to it: a volume's worth of memory).
    """
    if len(plan.shape) == 3:
        return _denoise_volume(plane, lam, penalty, plan, penalize_approx, n_shifts, steps, level_weights, var_map,
                               coeffs)
    step = steps if steps is not None else (lambda: None)
    acc, n_done = None, 0
    unshifted = coeffs.pop() if coeffs else None
    for group in _shift_groups(n_shifts, len(plan.shape)):
        C = np.empty((len(group), plan.n_coeffs))
        scale = None if var_map is None else np.empty_like(C)
        for i, (row, s) in enumerate(zip(C, group, strict=True)):
            row[:] = unshifted if unshifted is not None and not any(s) else plan.forward(plane, s)
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
            n_done += 1
            step()
    return acc / n_done if n_done > 1 else acc


def _denoise_volume(vol: np.ndarray, lam: float, penalty: str, plan: _Plan, penalize_approx: bool, n_shifts: int,
                    steps: Steps | None, level_weights: np.ndarray | None, var_map: np.ndarray | None,
                    coeffs: list[np.ndarray] | None) -> np.ndarray:
    """:func:`_denoise_plane` of a volume: one shift at a time, shrunk in place, its inverse added to the sum.

    The same values as shifts shrunk in groups (the prox of a row does not depend on the others), in one
    volume of coefficients and the sum instead of one per thread, the inverse and the sum: a volume
    is memory-bound, and a group's rows are its threads' only parallel work (``benchmarks/bench_volume_bytes.py``).
    """
    step = steps if steps is not None else (lambda: None)
    acc = np.zeros(plan.shape)
    shifts = _shifts(n_shifts, 3)
    unshifted = coeffs.pop() if coeffs else None
    for s in shifts:
        if unshifted is not None and not any(s):
            row, unshifted = unshifted, None
        else:
            row = plan.forward(vol, s)
        bands = None if var_map is None else plan.band_vars(var_map, s)  # a level's cells, not a volume
        step()
        _scale_bands(row, bands, up=False)
        _shrink_rows(row.reshape(1, -1), lam, penalty, plan, penalize_approx, level_weights)
        _scale_bands(row, bands, up=True)
        del bands
        _free_scratch()  # the prox keeps a volume of scratch per thread for its next call: not while transforming
        step()
        plan.add_inverse(row, s, acc, consume=True)
        del row
        step()
    if len(shifts) > 1:
        acc /= len(shifts)
    return acc


# The empirical Wiener stage: passes in other bases than the tree's db3, each taking the previous estimate as its
# pilot, each with its own number of shifts per cycle spin. Its gain is in translation invariance (more shifts in the
# last pass), and the tree pilot needs few. Volumes: Haar first, for sharp and thin structures, then db2, smooth
# ones (``benchmarks/bench_volume.py --part choices``). Planes: db2 alone; a Haar pass before it costs a sixth more
# and gains nothing on photos, losing on the worst (``benchmarks/bench_denoise.py --part default`` prints both).
_WIENER_PASSES = (("haar", 0.5), ("db2", 2.0))  # volumes: (wavelet, shifts per cycle spin)
_WIENER_PASSES_2D = (("db2", 2.0),)  # planes
_PILOT_SPINS = 0.25  # shifts of the tree pilot per cycle spin when the Wiener stage follows
# Memory the Wiener stage's extra threads on a plane may hold together (bytes): each holds about
# _WIENER_THREAD_BYTES a coefficient (its shift's coefficients, pilot, gain, inverse and the transforms' temporaries,
# float64: tests/test_memory.py measures the whole). A 1024 x 1024 preview region gets two threads; a plane of over
# 1.6 M coefficients (and a Dask block, see in_block) runs its shifts one at a time, in the memory its caller counts
_WIENER_THREADS_BYTES = 1 << 26
_WIENER_THREAD_BYTES = 40


# Shifts of the last Wiener pass on volumes, at least: its second shift, by one sample along every axis, gives even
# and odd planes the same treatment (with one shift, a dyadic transform along z favours one parity, and planes
# alternate in quality: flicker when a stack is viewed plane by plane), for one more transform pair.
_MIN_LAST_SHIFTS_3D = 2
# ... on planes: 4 shifts (by one sample along y, x and both), the fewest that meet both targets of the default call
# (its gain over BayesShrink and its CPU time) that ``benchmarks/bench_denoise.py --part default`` measures.
_MIN_LAST_SHIFTS_2D = 4


def _wiener_shifts(n_shifts: int, spins: float) -> int:
    """Shifts of one Wiener pass: ``spins`` per cycle spin, none when the tree stage has none."""
    return max(1, int(n_shifts * spins)) if n_shifts > 1 else 1


def _pilot_shifts(n_shifts: int) -> int:
    """Shifts of the tree estimate when it is the Wiener stage's pilot."""
    return max(1, int(n_shifts * _PILOT_SPINS))


def _wiener_passes(plan: _Plan, n_shifts: int) -> list[tuple[_Plan, int]]:
    """The Wiener stage's passes on arrays of ``plan``'s shape: the plan in each basis, and its shifts.

    Same padding, levels and layout in the other bases: no tree is needed there.
    """
    volume = len(plan.shape) == 3
    passes = [(replace(plan, wavelet=w), _wiener_shifts(n_shifts, k))
              for w, k in (_WIENER_PASSES if volume else _WIENER_PASSES_2D)]
    least = _MIN_LAST_SHIFTS_3D if volume else _MIN_LAST_SHIFTS_2D
    passes[-1] = (passes[-1][0], max(passes[-1][1], least))
    return passes


def _tree_shifts(n_shifts: int, wiener: bool) -> int:
    """Shifts of the tree stage: all of them, or the pilot's share when the Wiener stage follows."""
    return _pilot_shifts(n_shifts) if wiener else n_shifts


def _wiener_reach(levels: int, n_axes: int) -> int:
    """How far the Wiener passes reach along an axis of ``levels`` levels (:func:`._transform._overlap` each)."""
    return sum(_overlap(w, levels) for w, _ in (_WIENER_PASSES if n_axes == 3 else _WIENER_PASSES_2D))


def _wiener_plane(plane: np.ndarray, pilot: np.ndarray, sigma: float, plan: _Plan, n_shifts: int,
                  steps: Steps | None = None, var_map: np.ndarray | None = None,
                  var_factor: float = 1.0) -> np.ndarray:
    """Empirical Wiener filter of ``plane`` with the gains of ``pilot``, averaged over the same shifts.

    Each detail coefficient ``c`` becomes ``c * p**2 / (p**2 + sigma**2)``, ``p``
    the pilot's coefficient in the same basis (``sigma**2``: the
    coefficient's own noise variance from ``var_factor * var_map`` when given);
    approximation coefficients are kept. ``steps()`` after each transform
    pair and each inverse.
    """
    step = steps if steps is not None else (lambda: None)
    s2 = float(sigma) ** 2
    shifts = _shifts(n_shifts, len(plan.shape))
    if len(plan.shape) == 3:
        return _wiener_volume(plane, pilot, s2, plan, shifts, step, var_map, var_factor)

    def filtered(s: tuple[int, ...], halfway=lambda: None) -> np.ndarray:
        c = plan.forward(plane, s)
        p = plan.forward(pilot, s)
        halfway()
        p *= p
        if var_map is not None:
            v = plan.coeff_var(var_map, s, var_factor)
            gain = np.divide(p, p + v, out=np.ones_like(p), where=p + v > 0)
        elif s2 > 0:
            gain = np.divide(p, p + s2, out=p)  # in place: a plane's transforms are most of the stage's time
        else:
            gain = np.ones_like(p)
        gain[: plan.n_approx] = 1.0
        c *= gain
        return plan.inverse(c, s)

    # the shifts in groups of one per thread (PyWavelets releases the GIL), summed in their order: the same values
    extra = _WIENER_THREADS_BYTES // (_WIENER_THREAD_BYTES * plan.n_coeffs)
    k = 1 if in_block() else min(default_num_threads(), len(shifts), 1 + extra)
    acc = None
    with ThreadPoolExecutor(k, thread_name_prefix="restore-wiener") if k > 1 else nullcontext() as pool:
        for i in range(0, len(shifts), k):
            group = shifts[i:i + k]
            # reports from this thread only: halfway through each shift when it runs here, else after it
            for rec in (pool.map(filtered, group) if pool is not None else (filtered(s, step) for s in group)):
                acc = rec if acc is None else acc + rec
                if pool is not None:
                    step()
                step()
    return acc / len(shifts) if len(shifts) > 1 else acc


# Coefficients of the gain computed at once: its temporary (p**2 + sigma**2) stays this small (8 MB of float64).
_GAIN_CHUNK = 1 << 20


def _gain_in_place(p2: np.ndarray, s2: float | np.ndarray) -> None:
    """``p2 / (p2 + s2)`` into ``p2``, a chunk at a time (no view of it outlives the call: it is freed when done).

    ``s2`` an array (one variance per coefficient): 1 where ``p2 + s2`` is not positive, as :func:`_wiener_plane`.
    """
    for i in range(0, p2.size, _GAIN_CHUNK):
        g = p2[i:i + _GAIN_CHUNK]
        if np.ndim(s2) == 0:
            np.divide(g, g + s2, out=g)
            continue
        d = g + s2[i:i + _GAIN_CHUNK]
        positive = d > 0
        np.divide(g, d, out=g, where=positive)
        g[~positive] = 1.0


def _band_gains(p2: np.ndarray, bands: list[tuple[int, int, np.ndarray]]) -> None:
    """:func:`_gain_in_place` of each band of ``p2`` with its cells' variances (as :func:`_scale_bands`)."""
    for lo, hi, v in bands:
        _gain_in_place(p2[lo:hi], v)


def _wiener_volume(vol: np.ndarray, pilot: np.ndarray, s2: float, plan: _Plan, shifts: list[tuple[int, ...]],
                   step, var_map: np.ndarray | None = None, var_factor: float = 1.0) -> np.ndarray:
    """:func:`_wiener_plane` of a volume: the same values, in less memory.

    The pilot's coefficients become the gains in place (band by band from the cells' variances under
    ``var_map``), the volume's coefficients are multiplied into them as its transform makes them, and their
    inverse is added to the sum slab by slab: one volume of coefficients and half a volume of working memory
    besides the pilot and the sum (a volume while the volume is transformed, unless a variance map is held too:
    then a second pass over the transform's first axis keeps it to half, :func:`restore.wavelet.wavelet_forward`).
    """
    acc = np.zeros(plan.shape)
    for s in shifts:
        gain = plan.forward(pilot, s)
        gain *= gain
        if var_map is not None:
            _band_gains(gain, plan.band_vars(var_map, s, var_factor)[1:])  # the approximation is kept: no gain
        elif s2 > 0:
            _gain_in_place(gain, s2)
        else:
            gain[:] = 1.0
        # details times their gain, the approximation kept; under a variance map, in half a volume of working memory
        plan.forward(vol, s, out=gain, multiply=True, lean=var_map is not None)
        step()
        plan.add_inverse(gain, s, acc, consume=True)
        del gain
        step()
    if len(shifts) > 1:
        acc /= len(shifts)
    return acc
