"""The smooth interpolant that starts inpainting: biharmonic, as scikit-image's, in bands of bounded memory."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from contextlib import contextmanager, nullcontext

import numpy as np

from .. import _core_inpaint
from .._progress import Cancelled, Steps

__all__ = ["bands", "biharmonic_fill", "known_range", "refill"]

# relative residual of the conjugate gradients: the patches refine what is left, but where they change little (smooth
# photos) the interpolant is the result
_CG_TOL = 1e-4  # looser (1e-3) costs 0.5 dB against scikit-image's exact solve on smooth photos
_CG_ITER_PER_SIDE = 10  # iteration cap of the conjugate gradients, per sqrt(unknowns) (plus _CG_ITER_MIN)
_CG_ITER_MIN = 100
_BAND_PX = 2_000_000  # pixels per band of rows: bounds the memory of the interpolation and of the edge weights
_BAND_MARGIN = 32  # rows of context above and below each band (px): the interpolant hardly sees farther
_EXTREMES_BAND_PX = 1 << 18  # pixels per band copied from a view by known_range: 6 MB of three float64 channels
# The start of the conjugate gradients: a Gaussian-weighted average of the known pixels, of the narrowest of these
# widths (sd, px) whose window holds at least _START_DENSITY of known weight, so that wide holes get a local value.
_START_WIDTHS = (2.0, 8.0, 32.0)
_START_DENSITY = 0.05
_START_TRUNCATE = 3.0  # support of those Gaussians, in sd
# Largest coupled region of a band's mask (missing px) solved by a sparse factorisation instead of the conjugate
# gradients: regions of text, scratches and holes factor with little fill-in; one region of random loss spans the
# band and would not.
_DIRECT_MAX_REGION = 50_000
# missing px per factorisation (whole regions): bounds its memory and time (a few ms); larger ones fill in more
_DIRECT_CHUNK = 4_000


def biharmonic_fill(img: np.ndarray, missing: np.ndarray, steps: Steps | None = None, *,
                    warm: bool = False, rtol: float = _CG_TOL, direct: bool = False, clip: bool = False,
                    n_threads: int = 1, exact: np.ndarray | None = None) -> np.ndarray:
    """The image (channels last) with its missing pixels set to the biharmonic interpolant of the known ones.

    The interpolant of :func:`skimage.restoration.inpaint_biharmonic` (up
    to the tolerance of the solve, ``_CG_TOL``), computed by conjugate
    gradients on the normal equations of the discrete Laplacian restricted
    to the missing pixels, in bands of rows with a margin of context, which
    bound the memory (about 200 bytes per missing pixel of a band).
    ``steps()`` after each channel of each band; the conjugate gradients
    report their iterations through ``steps.tick`` (for Cancel). ``warm``:
    the solve starts from ``img``'s values at the missing pixels (an
    interpolant of nearly the same known pixels) instead of a local average;
    ``rtol``: the relative residual that ends the solve. ``direct``: a band
    whose mask has no connected region over ``_DIRECT_MAX_REGION`` pixels is
    solved exactly by a sparse factorisation (many times faster than the
    conjugate gradients on thin masks); the others as above. ``clip``: the
    fill is clipped to each channel's range of known values, as
    scikit-image's (the exact interpolant of a large hole can carry the
    slope at its rim far past every known value). ``n_threads``: bands solved
    at once, with ``direct`` only (thin masks: little memory per band).
    ``exact``: a boolean array of the mask's shape, set True at the missing
    pixels solved by the factorisation and False at those solved by
    conjugate gradients (to ``rtol`` only).
    """
    H, W, n_ch = img.shape
    out = img.copy()
    lo, hi = known_range(img, missing) if clip else (None, None)
    todo = []
    for r0, r1, a, b in bands(H, W):
        if missing[r0:r1].any():
            todo.append((r0, r1, a, b))
        elif steps is not None:
            steps(n_ch)
    shared = None if steps is None else _SharedSteps(steps)

    def solve(r0: int, r1: int, a: int, b: int) -> None:
        m, sub = missing[r0:r1], missing[a:b]
        core = np.zeros(sub.shape, dtype=bool)
        core[r0 - a:r1 - a] = True
        # the band's missing pixels in row-major order, of which those of the core rows are m's
        regions = _regions(sub) if direct else None
        if exact is not None:
            exact[r0:r1] = m if regions is not None else False
        vals = _biharmonic_band(img[a:b], sub, shared, warm, rtol, regions)[core[sub]]
        out[r0:r1][m] = np.clip(vals, lo, hi) if clip and np.all(lo <= hi) else vals

    # bands on their own threads (the factorisations release the GIL) where their memory is small: thin masks
    n_threads = min(n_threads, len(todo)) if direct else 1
    if n_threads <= 1:
        for band in todo:
            solve(*band)
        return out
    with ThreadPoolExecutor(n_threads, thread_name_prefix="restore-biharmonic") as pool:
        futures = [pool.submit(solve, *band) for band in todo]
        try:
            # Ctrl-C here too: the running bands stop at their next step, not at their end
            with nullcontext() if shared is None else shared.stopping_others():
                wait(futures, return_when=FIRST_EXCEPTION)
        finally:
            for f in futures:
                f.cancel()  # the queued bands
        wait(futures)  # the running ones stop at their next step once one failed (Cancel)
        for f in futures:
            f.result()
    return out


class _SharedSteps:
    """:class:`Steps` reported from several threads: one at a time, and none once one raised (Cancel).

    ``error``: what the first report that failed raised (Cancel, or the caller's callback's own error),
    which the other threads see as :class:`Cancelled`; the caller raises it (:meth:`stopping_others`).
    """

    def __init__(self, steps: Steps) -> None:
        self.steps, self.lock, self.failed = steps, threading.Lock(), False
        self.error: BaseException | None = None

    @contextmanager
    def stopping_others(self) -> Iterator[None]:
        """Work beside the other threads: if it raises (Cancel, or an error), they stop at their next report.

        A :class:`Cancelled` that another thread's failed report caused is
        replaced by that thread's own error.
        """
        try:
            yield
        except BaseException as exc:
            self.failed = True
            if isinstance(exc, Cancelled) and self.error is not None and self.error is not exc:
                raise self.error from None  # the Cancelled was only its echo
            raise

    def __call__(self, n: int = 1) -> None:
        self._report(lambda: self.steps(n))

    def tick(self) -> None:
        self._report(self.steps.tick)

    def _report(self, report) -> None:
        with self.lock:
            if self.failed:
                raise Cancelled
            try:
                report()
            except BaseException as exc:
                self.failed = True
                self.error = exc
                raise

    def counter(self, n_steps: int) -> _Counter:
        """A ``progress(done, total)`` for a stage of ``n_steps`` steps, that adds to the count as it goes.

        Unlike :meth:`Steps.callback`, which sets the count, it lets other
        stages count at the same time.
        """
        return _Counter(self, n_steps)


class _Counter:
    """See :meth:`_SharedSteps.counter`."""

    def __init__(self, shared: _SharedSteps, n_steps: int) -> None:
        self.shared, self.n_steps, self.counted = shared, n_steps, 0

    def __call__(self, done: int, total: int) -> None:
        now = min(self.n_steps, int(round(self.n_steps * done / max(total, 1))))
        if now > self.counted:
            n, self.counted = now - self.counted, now
            self.shared(n)
        else:
            self.shared.tick()

    def finish(self) -> None:
        """Count the steps the stage left uncounted (it may end early)."""
        if self.counted < self.n_steps:
            n, self.counted = self.n_steps - self.counted, self.n_steps
            self.shared(n)


def known_range(img: np.ndarray, missing: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The least and the largest known value of each channel of a channels-last image (inf, -inf: none known).

    NaN for a channel with a NaN known value.
    """
    lo, hi = np.full(img.shape[2], np.inf), np.full(img.shape[2], -np.inf)
    if img.flags.c_contiguous:
        _core_inpaint.known_extremes(img, missing, lo, hi)
        return lo, hi
    # a view (a crop as given): contiguous bands, so that the kernel compiles for one layout, and no whole copy
    for r0, r1, _, _ in bands(*missing.shape, band_px=_EXTREMES_BAND_PX):
        _core_inpaint.known_extremes(np.ascontiguousarray(img[r0:r1]), np.ascontiguousarray(missing[r0:r1]), lo, hi)
    return lo, hi


def refill(run: np.ndarray, missing: np.ndarray) -> np.ndarray:
    """The pixels of ``missing`` whose interpolant changes when those of ``run & ~missing`` become known.

    ``missing`` is a subset of ``run``. The regions of the biharmonic system
    (see :func:`_regions`) of ``run`` that hold none of the newly known
    pixels are regions of ``missing`` with the same known neighbours: their
    exact interpolant is the same. Only an exact one, though: where the
    run's was solved by conjugate gradients (see ``exact`` of
    :func:`biharmonic_fill`), its values are only as close as that solve's
    tolerance, and callers solve those pixels again too. (The clipping to
    the known range may differ: callers check :func:`known_range` too.)
    """
    from scipy import ndimage

    cross = ndimage.generate_binary_structure(2, 1)
    labels, n = ndimage.label(ndimage.binary_dilation(run, cross), structure=cross)
    touched = np.zeros(n + 1, dtype=bool)
    touched[labels[run & ~missing]] = True
    touched[0] = False
    return missing & touched[labels]


def bands(H: int, W: int, band_px: int = _BAND_PX) -> list[tuple[int, int, int, int]]:
    """Bands of rows ``r0:r1`` of about ``band_px`` pixels, with their context ``a:b`` (``_BAND_MARGIN`` rows more)."""
    band = max(1, band_px // W)
    return [(r0, min(H, r0 + band), max(0, r0 - _BAND_MARGIN), min(H, r0 + band + _BAND_MARGIN))
            for r0 in range(0, H, band)]


def _regions(missing: np.ndarray) -> np.ndarray | None:
    """The coupled region of each missing pixel (row-major), or None when one has over ``_DIRECT_MAX_REGION`` pixels.

    Two missing pixels are coupled by the biharmonic system when the
    5-point stencils of some pixel hold both (at most 2 apart): the regions
    of the mask dilated by one pixel.
    """
    from scipy import ndimage

    cross = ndimage.generate_binary_structure(2, 1)
    labels, n = ndimage.label(ndimage.binary_dilation(missing, cross), structure=cross)
    region = labels[missing]
    if n and int(np.bincount(region).max()) > _DIRECT_MAX_REGION:
        return None
    return region


def _chunks(labels: np.ndarray, size: int) -> list[tuple[int, int]]:
    """Consecutive slices of the sorted ``labels``, each of whole labels and at most ``size`` long (or one label)."""
    n = len(labels)
    starts = np.concatenate(([0], np.flatnonzero(np.diff(labels)) + 1, [n]))
    cuts = [0]
    while cuts[-1] < n:
        j = int(np.searchsorted(starts, cuts[-1] + size, side="right")) - 1
        cuts.append(int(starts[j]) if starts[j] > cuts[-1] else
                    int(starts[np.searchsorted(starts, cuts[-1], side="right")]))
    return list(zip(cuts[:-1], cuts[1:], strict=True))


def _normalized_convolution(img: np.ndarray, missing: np.ndarray) -> np.ndarray:
    """Gaussian-weighted average of the known pixels around each missing one (the start of the CG iterations).

    The narrowest of the widths ``_START_WIDTHS`` whose window holds known
    pixels, so that the centres of wide holes get a local average too.
    Returns the values of the missing pixels, (n_missing, channels), in
    row-major order.
    """
    from scipy.ndimage import gaussian_filter

    known = (~missing).astype(np.float32)  # float32 filters: only a start, and half the memory of a band
    out = np.empty((int(np.count_nonzero(missing)), img.shape[2]))
    todo = np.ones(len(out), dtype=bool)
    for sigma in _START_WIDTHS:
        den = gaussian_filter(known, sigma, mode="nearest", truncate=_START_TRUNCATE)[missing]
        ok = todo & (den > _START_DENSITY)
        for ch in range(img.shape[2]):
            num = gaussian_filter(np.where(missing, np.float32(0), img[..., ch]).astype(np.float32), sigma,
                                  mode="nearest", truncate=_START_TRUNCATE)[missing]
            out[ok, ch] = num[ok] / den[ok]
        todo &= ~ok
        if not todo.any():
            return out
    out[todo] = img[~missing].mean(axis=0) if (~missing).any() else 0.0
    return out


def _biharmonic_band(img: np.ndarray, missing: np.ndarray, steps: Steps | None = None,
                     warm: bool = False, rtol: float = _CG_TOL, regions: np.ndarray | None = None) -> np.ndarray:
    """Biharmonic interpolation of one band (see :func:`biharmonic_fill`): its missing pixels (n, channels), float64.

    In row-major order; only the values next to missing pixels are read in float64 (the memory of 16 MP photos).
    ``regions`` (see :func:`_regions`): solved exactly, whole regions at a time, instead of by conjugate gradients.
    """
    from scipy import sparse
    from scipy.sparse.linalg import cg, splu

    h, w, n_ch = img.shape
    flat = img.reshape(h * w, n_ch)  # a view: read at the known neighbours of missing pixels only
    unknown = np.flatnonzero(missing)
    col = np.full(h * w, -1, dtype=np.int64)
    col[unknown] = np.arange(len(unknown))
    # rows of the Laplacian: the pixels whose 5-point stencil touches a missing pixel (free boundary)
    mp = np.pad(missing, 1)
    near = mp[1:-1, 1:-1] | mp[:-2, 1:-1] | mp[2:, 1:-1] | mp[1:-1, :-2] | mp[1:-1, 2:]
    r, c = np.nonzero(near)
    k = np.arange(len(r))
    deg = np.zeros(len(r))
    known_part = np.zeros((len(r), n_ch))  # the Laplacian of the known pixels at each row
    ri, ci, vals = [], [], []
    for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
        rr, cc = r + dr, c + dc
        ok = (rr >= 0) & (rr < h) & (cc >= 0) & (cc < w)
        deg += ok
        j = rr[ok] * w + cc[ok]
        u, kk = col[j], k[ok]
        ri.append(kk[u >= 0])
        ci.append(u[u >= 0])
        vals.append(np.full(np.count_nonzero(u >= 0), -1.0))
        known_part[kk[u < 0]] -= flat[j[u < 0]].astype(np.float64)
    j = r * w + c
    u = col[j]
    ri.append(k[u >= 0])
    ci.append(u[u >= 0])
    vals.append(deg[u >= 0])
    known_part[u < 0] += deg[u < 0, None] * flat[j[u < 0]].astype(np.float64)
    L = sparse.csr_matrix((np.concatenate(vals), (np.concatenate(ri), np.concatenate(ci))),
                          shape=(len(r), len(unknown)))
    A = (L.T @ L).tocsr()
    rhs = -(L.T @ known_part)
    if regions is not None:
        # the regions are independent blocks of A: factor them in chunks of whole regions (memory, Cancel)
        del L, known_part
        order = np.argsort(regions, kind="stable")
        # block diagonal once its rows and columns are in region order: each chunk's block is a slice of it
        A = A[order]  # a step at a time: the matrices a permutation holds at once are its memory
        A = A[:, order].tocsc()
        values = np.empty((len(unknown), n_ch))
        for i0, i1 in _chunks(regions[order], _DIRECT_CHUNK):
            sel = order[i0:i1]
            # A is symmetric positive definite: diagonal pivots (no search), an ordering of A's own graph
            lu = splu(A[i0:i1, i0:i1], permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
                      options={"SymmetricMode": True})
            values[sel] = lu.solve(np.ascontiguousarray(rhs[sel]))
            if steps is not None:
                steps.tick()
        for _ in range(n_ch if steps is not None else 0):  # the same count as the iterative solve's
            steps()
        return values
    jacobi = sparse.diags(1.0 / A.diagonal())
    start = img[missing].astype(np.float64) if warm else _normalized_convolution(img, missing)
    values = np.empty((len(unknown), n_ch))
    for ch in range(n_ch):
        x, _ = cg(A, rhs[:, ch], x0=start[:, ch], rtol=rtol, M=jacobi,
                  maxiter=_CG_ITER_PER_SIDE * int(np.sqrt(len(unknown))) + _CG_ITER_MIN,
                  callback=None if steps is None else (lambda _x: steps.tick()))
        values[:, ch] = x
        if steps is not None:
            steps()
    return values
