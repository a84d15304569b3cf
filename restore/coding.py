"""Sparse coding over a dictionary with (masked) tree-regularised least squares.

For each signal ``x`` (a row of ``X``) with known entries ``M``::

    min_a  0.5 * ||M * (x - a @ D)||^2 + lam * Omega(a)

solved by FISTA (Beck and Teboulle) with the proximal operators of the one
core, for many signals at once: the gradient steps are matrix products over
a chunk of signals and the prox runs in the numba kernels. Each chunk is
solved from its first iteration to its last by one thread, BLAS included:
threads meet once a chunk, not at every iteration.
"""

from __future__ import annotations

from concurrent.futures import wait
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from . import _core
from ._config import CODING_BATCH, default_num_threads, single_threaded_blas
from ._progress import Cancelled, ProgressCallback
from ._validation import check_callable, check_int, check_matrix, check_number
from .proximal import _get_pool, _penalty_rows, _prox_range, check_penalty
from .tree import Tree

__all__ = ["Cancelled", "sparse_encode"]

_CHECK_EVERY = 10  # FISTA iterations between checks of the objective (a check costs about one iteration)

# Signals that one thread codes alone, first iteration to last, unless the caller says otherwise (a batch is cut
# into chunks of this many rows whatever the number of threads, so a code does not depend on it): large enough
# that Python's overhead per iteration (and its lock) stays small beside the products, small enough that a
# chunk's arrays stay in cache and a batch of 4096 keeps every core busy.
_CHUNK_ROWS = 512


def _lipschitz(D: np.ndarray, M: np.ndarray | None, n: int, spectrum: tuple[np.ndarray, np.ndarray] | None,
               n_iter: int = 10) -> np.ndarray:
    """Per-signal bound of the largest eigenvalue of D_M D_M^T.

    Exact (one eigen-decomposition) without a mask; with one, a few power
    iterations started from the unmasked top eigenvector, with a margin (the
    power iteration approaches the eigenvalue from below). ``spectrum`` is
    ``eigh(D @ D.T)``, computed once by the caller for all its batches (None
    only when D has no atom).
    """
    k = D.shape[0]
    if k == 0:
        return np.full(n, 1e-12)
    w_all, v_all = spectrum
    if M is None:
        return np.full(n, max(float(w_all[-1]), 1e-12))
    Df = D.astype(np.float32)
    v = np.broadcast_to(v_all[:, -1].astype(np.float32), (n, k)).copy()
    lam = np.zeros(n, dtype=np.float32)
    for _ in range(n_iter):
        w = ((v @ Df) * M) @ Df.T
        lam = np.linalg.norm(w, axis=1)
        v = w / np.maximum(lam, 1e-30)[:, None]
    return np.clip(lam.astype(np.float64) * 1.1, 1e-12, float(w_all[-1]))


@dataclass
class _Rows:
    """The working arrays of the signals FISTA still iterates on (one row each)."""

    idx: np.ndarray  # their rows in the batch
    X: np.ndarray
    M: np.ndarray | None
    Mf: np.ndarray | None
    DXt: np.ndarray
    lam: float | np.ndarray
    L: np.ndarray
    A: np.ndarray
    A_new: np.ndarray
    Y: np.ndarray
    Y32: np.ndarray
    t: np.ndarray
    A_safe: np.ndarray
    f_safe: np.ndarray

    def keep(self, rows: np.ndarray) -> None:
        """Drop every row but ``rows`` (indices into the current rows)."""
        for name, value in vars(self).items():
            if isinstance(value, np.ndarray):
                setattr(self, name, np.ascontiguousarray(value[rows]))


def _fista(X: np.ndarray, D: np.ndarray, M: np.ndarray | None, lam: float | np.ndarray, penalty: str,
           tree: Tree | None, A0: np.ndarray | None, max_iter: int, tol: float, positive: bool,
           spectrum: tuple[np.ndarray, np.ndarray] | None, fast: bool = False) -> tuple[np.ndarray, int]:
    """FISTA on one chunk, in the calling thread; X (n, m), D (k, m), M (n, m) bool, float weights or None.

    Returns codes and iterations.

    Each signal stops on its own: every ``_CHECK_EVERY`` iterations, a
    signal whose objective fell by at most ``tol`` (relative) since the
    last check is done and leaves the chunk, so which other signals are
    coded with it changes a signal's code only by rounding (of the products).

    Without a mask the gradient uses the Gram matrix (k x k, float64, or
    float32 when ``fast``: 1.3x faster, for callers that need no more than
    single precision); with one, the products with D run in float32 (they
    dominate the cost). Codes, steps and prox stay in float64.
    """
    n, k = X.shape[0], D.shape[0]
    out = np.zeros((n, k)) if A0 is None else np.array(A0, dtype=np.float64, order="C")
    if n == 0:
        return out, 0
    A = out.copy()
    if M is None:
        gram = D @ D.T
        if fast:
            gram = gram.astype(np.float32)
        DXt = X @ D.T  # (n, k), constant part of the gradient
        Mf = Df = None
    else:
        Df = D.astype(np.float32)
        Mf = M.astype(np.float32)
        DXt = ((X * M).astype(np.float32) @ Df.T).astype(np.float64)
    # Safeguard, checked at each check: a signal whose objective went up is reset to its last
    # checkpoint and its momentum restarted. With a mask its L also doubles: L then comes from a power
    # iteration, which can fall short of the true constant for a few signals, and FISTA diverges on them.
    # (Without a mask L is exact: no objective at the start or at the last iteration.)
    if M is None:
        f_safe = np.full(n, np.inf)
    elif A0 is None:
        f_safe = 0.5 * np.einsum("ij,ij->i", X, X * M)
    else:
        f_safe = _row_objective(X, D, M, A, lam, penalty, tree)
    w = _Rows(idx=np.arange(n), X=X, M=M, Mf=Mf, DXt=DXt, lam=lam, L=_lipschitz(D, M, n, spectrum), A=A,
              A_new=np.empty_like(A), Y=A.copy(), Y32=A.astype(np.float32), t=np.ones(n), A_safe=A.copy(),
              f_safe=f_safe)
    prox_range = _prox_range(penalty, tree, w.lam / w.L, n)
    it = 0
    for it in range(1, max_iter + 1):
        if M is None:
            G = (w.Y32 if fast else w.Y) @ gram
        else:
            G = ((w.Y32 @ Df) * w.Mf) @ Df.T
        n_rows = len(w.idx)
        _core.fista_gradient_step(w.A_new, w.Y, G, w.DXt, 1.0 / w.L, positive, 0, n_rows)
        prox_range(w.A_new, 0, n_rows)
        _core.fista_momentum(w.A_new, w.A, w.Y, w.Y32, w.t, 0, n_rows)
        w.A, w.A_new = w.A_new, w.A
        if not ((it % _CHECK_EVERY == 0 and it < max_iter) or (it == max_iter and M is not None)):
            continue
        f_rows = _row_objective(w.X, D, w.M, w.A, w.lam, penalty, tree)
        up = f_rows > w.f_safe
        if up.any():
            w.A[up] = w.Y[up] = w.A_safe[up]
            w.Y32[up] = w.A_safe[up]
            w.t[up] = 1.0
            f_rows[up] = w.f_safe[up]
            if M is not None:
                w.L[up] *= 2.0
        done = ~up & (w.f_safe - f_rows <= tol * np.maximum(np.abs(f_rows), 1e-300))
        w.A_safe[:] = w.A
        w.f_safe = f_rows
        if done.any():
            out[w.idx[done]] = w.A[done]
            w.keep(np.flatnonzero(~done))
            if len(w.idx) == 0:
                return out, it
        if up.any() or done.any():
            prox_range = _prox_range(penalty, tree, w.lam / w.L, len(w.idx))
    out[w.idx] = w.A
    return out, it


def _row_objective(X, D, M, A, lam, penalty, tree) -> np.ndarray:
    """The objective of each signal (row)."""
    R = A @ D - X
    R *= R
    if M is not None:
        R *= M
    omega = _penalty_rows(np.ascontiguousarray(A), penalty, tree)
    return 0.5 * np.sum(R, axis=1) + lam * omega


def sparse_encode(
    X: ArrayLike,
    dictionary: ArrayLike,
    *,
    lam: float,
    penalty: str = "tree_l2",
    tree: Tree | None = None,
    mask: ArrayLike | None = None,
    init: ArrayLike | None = None,
    max_iter: int = 200,
    tol: float = 1e-5,
    positive: bool = False,
    batch_size: int = CODING_BATCH,
    progress: ProgressCallback | None = None,
) -> NDArray[np.float64]:
    r"""Sparse codes of signals over a dictionary, with a tree penalty.

    Solves, for each row ``x`` of ``X`` with known entries ``m``,
    ``min_a 0.5 * ||m * (x - a @ dictionary)||^2 + lam * Omega(a)``.

    Parameters
    ----------
    X : array_like, shape (n_samples, n_features)
        Signals, one per row.
    dictionary : array_like, shape (n_atoms, n_features)
        Atoms, one per row (scikit-learn's ``components_``).
    lam : float
        Regularisation, finite and >= 0.
    penalty : {'tree_l2', 'tree_linf', 'tree_l0', 'l1', 'l0'}
        ``Omega`` (see :func:`restore.prox`); ``l1`` gives an ordinary flat
        dictionary (the lasso).
    tree : Tree, optional
        Tree over the atoms (``tree.n_vars == n_atoms``), for tree penalties.
    mask : array_like of bool, shape (n_samples, n_features), optional
        True where an entry of ``X`` is known; missing entries are ignored.
    init : array_like, shape (n_samples, n_atoms), optional
        Warm start.
    max_iter : int
        Iteration cap per batch.
    tol : float
        Stop a batch when the relative decrease of its objective over 5
        iterations falls below ``tol``.
    positive : bool
        Constrain codes to be >= 0.
    batch_size : int
        Signals coded together (memory is O(batch_size * (n_atoms + n_features))).
    progress : callable, optional
        ``progress(done, total)`` after each batch; it may raise
        :class:`Cancelled` to stop.

    Returns
    -------
    ndarray of float64, shape (n_samples, n_atoms)

    Notes
    -----
    FISTA with step ``1/L_i`` per signal, where ``L_i`` bounds the largest
    eigenvalue of ``D_M D_M^T`` restricted to the signal's known entries
    (a Gram matrix shared by the batch when nothing is missing; power
    iteration otherwise), and adaptive restart. Every penalty goes through
    the same prox kernels as :func:`restore.prox`. ``l0`` and ``tree_l0``
    are not convex: FISTA then finds a good stationary point, not
    necessarily the global minimum.

    The signals are coded in chunks of 512 on ``RESTORE_NUM_THREADS``
    threads (default: one per CPU), each chunk by one thread with NumPy's
    BLAS on one thread for the duration of the call (thread pools that
    wait for each other at every iteration spin on a busy machine): the
    codes do not depend on the number of threads.

    Examples
    --------
    >>> import numpy as np
    >>> from restore import Tree, sparse_encode
    >>> tree = Tree.balanced((3,))
    >>> D = np.eye(4)
    >>> sparse_encode(np.array([[3.0, 0.0, 0.0, 4.0]]), D, lam=1.0, tree=tree).round(3)
    array([[2.293, 0.   , 0.   , 2.293]])
    """
    X = check_matrix(X, "X")
    D = check_matrix(dictionary, "dictionary")
    n, m = X.shape
    if D.shape[1] != m:
        raise ValueError(f"dictionary has {D.shape[1]} features per atom but X has {m}")
    check_penalty(penalty, tree, D.shape[0])
    lam = check_number("lam", lam)
    max_iter = check_int("max_iter", max_iter)
    tol = check_number("tol", tol)
    batch_size = check_int("batch_size", batch_size)
    check_callable("progress", progress)
    M = None if mask is None else _as_mask(mask, X.shape)
    A0 = None
    if init is not None:
        A0 = check_matrix(init, "init")
        if A0.shape != (n, D.shape[0]):
            raise ValueError(f"init must have shape {(n, D.shape[0])}, got {A0.shape}")
    return _sparse_encode(X, D, lam=lam, penalty=penalty, tree=tree, mask=M, init=A0, max_iter=max_iter, tol=tol,
                          positive=bool(positive), batch_size=batch_size, progress=progress)[0]


def _sparse_encode(X: np.ndarray, D: np.ndarray, *, lam: float | np.ndarray, penalty: str, tree: Tree | None,
                   mask: np.ndarray | None = None, init: np.ndarray | None = None, max_iter: int, tol: float,
                   positive: bool = False, batch_size: int, progress: ProgressCallback | None = None,
                   spectrum: tuple[np.ndarray, np.ndarray] | None = None, n_threads: int | None = None,
                   fast: bool = False, chunk_rows: int = _CHUNK_ROWS) -> tuple[np.ndarray, int]:
    """Unvalidated sparse coding over batches; returns codes and the largest iteration count.

    ``mask`` is None, boolean, or float weights in [0, 1] of the squared
    residuals (``0.5 * sum(mask * (x - a @ D)**2)``); ``init`` a warm start.

    ``lam`` is one value or one per signal (float64 (n,)); ``spectrum`` is
    ``eigh(D @ D.T)`` when the caller codes many batches over the same D;
    ``fast`` takes the unmasked products in float32 (see :func:`_fista`).

    Each batch is cut into chunks of ``chunk_rows`` signals, coded on up
    to ``n_threads`` threads (default: all CPUs; 1 codes in the calling
    thread, for callers that run their own threads), every chunk on one,
    with BLAS on one thread: the codes do not depend on ``n_threads``.
    """
    M, A0 = mask, init
    n = X.shape[0]
    n_threads = default_num_threads() if n_threads is None else n_threads
    out = np.empty((n, D.shape[0]))
    n_iter = 0
    starts = range(0, n, max(1, int(batch_size)))
    with single_threaded_blas():
        if spectrum is None and D.shape[0] > 0:
            spectrum = np.linalg.eigh(D @ D.T)
        for b, s in enumerate(starts):
            e = min(n, s + batch_size)
            chunks = []
            for c0 in range(s, e, chunk_rows):
                c1 = min(e, c0 + chunk_rows)
                Mc = None if M is None else M[c0:c1]
                if Mc is not None and np.all(Mc == 1):
                    Mc = None
                chunks.append((c0, c1, (X[c0:c1], D, Mc, lam if np.ndim(lam) == 0 else lam[c0:c1], penalty, tree,
                                        None if A0 is None else A0[c0:c1], max_iter, tol, positive, spectrum, fast)))
            if n_threads <= 1 or len(chunks) <= 1:
                results = [_fista(*args) for _, _, args in chunks]
            else:
                pool = _get_pool(n_threads)
                futures = [pool.submit(_fista, *args) for _, _, args in chunks]
                wait(futures)  # none left running when one failed
                results = [f.result() for f in futures]
            for (c0, c1, _), (codes, it) in zip(chunks, results, strict=True):
                out[c0:c1] = codes
                n_iter = max(n_iter, it)
            if progress is not None:
                progress(b + 1, len(starts))
    return out, n_iter


def _as_mask(mask: ArrayLike, shape: tuple[int, int]) -> np.ndarray:
    """A boolean mask of known entries with the shape of X."""
    M = np.asarray(mask)
    if M.shape != shape:
        raise ValueError(f"mask must have the shape of X {shape}, got {M.shape}")
    return M.astype(bool)
