"""Proximal operators and values of the sparsity penalties.

Public, validated entry points :func:`prox` and :func:`penalty_value`; the
solvers call the unvalidated :func:`_prox_rows` on canonical arrays.
"""

from __future__ import annotations

import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from . import _core, _core_regular
from ._cache import on_scope_close
from ._config import default_num_threads
from ._validation import check_choice, check_number
from .tree import Tree

__all__ = ["PENALTIES", "TREE_PENALTIES", "prox", "penalty_value"]

Penalty = Literal["l1", "l0", "tree_l2", "tree_linf", "tree_l0"]

PENALTIES: tuple[str, ...] = ("l1", "l0", "tree_l2", "tree_linf", "tree_l0")
"""Names of the supported penalties."""

TREE_PENALTIES: tuple[str, ...] = ("tree_l2", "tree_linf", "tree_l0")
"""The penalties defined on a :class:`~restore.Tree`."""

# Each tree kernel with the rows of float and int scratch space it uses (its ``work`` and ``iwork``): allocating
# only those keeps tree_l2's scratch at 16 bytes a node instead of 48 (a 7 M-coefficient volume block: 110 MB).
_TREE_KERNELS = {
    "tree_l2": (_core.prox_tree_l2, (2, 0)),
    "tree_linf": (_core.prox_tree_linf, (4, 2)),
    "tree_l0": (_core.prox_tree_l0, (2, 1)),
}
# The kernels walking the regular trees of wavelet transforms by index arithmetic, with their rows of float and
# int scratch space.
_REGULAR_KERNELS = {
    "tree_l2": (_core_regular.prox_regular_tree_l2, (1, 0)),
    "tree_linf": (_core_regular.prox_regular_tree_linf, (1, 1)),  # and its heap's rows, sized in _prox_range
    "tree_l0": (_core_regular.prox_regular_tree_l0, (2, 0)),
}
_VALUE_KIND = {"tree_l2": 0, "tree_linf": 1, "tree_l0": 2}

# Below this many entries a batch is not worth handing to threads.
_MIN_PARALLEL_WORK = 1 << 15

# Scratch space of the tree kernels is kept per thread and reused from one kernel call to the next (fresh pages cost
# more than the O(p) kernels themselves on large trees), up to this many bytes a thread, until the thread ends or the
# last open library call returns (restore._cache.call_scope): nothing sized by one image outlives its call.
_WORKSPACE_CACHE_BYTES = 256 << 20


class _Scratch:
    """One thread's scratch arrays (``ws``: float and int, or None), in its thread-local storage."""

    __slots__ = ("ws", "__weakref__")

    def __init__(self) -> None:
        self.ws: tuple[np.ndarray, np.ndarray] | None = None


_local = threading.local()
_holders: weakref.WeakSet = weakref.WeakSet()  # every live thread's _Scratch: freed with its thread
_scratch_lock = threading.Lock()

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _workspace(m: int, rows: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Float (rows[0], m) and int (rows[1], m) scratch arrays for the calling thread."""
    holder = getattr(_local, "scratch", None)
    if holder is None:
        holder = _local.scratch = _Scratch()
        with _scratch_lock:
            _holders.add(holder)
    ws = holder.ws
    if ws is not None and ws[0].shape[1] >= m and ws[0].shape[0] >= rows[0] and ws[1].shape[0] >= rows[1]:
        return ws
    ws = (np.empty((rows[0], m)), np.empty((rows[1], m), dtype=np.int64))
    holder.ws = ws if 8 * sum(rows) * m <= _WORKSPACE_CACHE_BYTES else None
    return ws


@on_scope_close
def _free_scratch() -> None:
    """Free every thread's scratch space (the last open library call returned)."""
    with _scratch_lock:
        for holder in list(_holders):
            holder.ws = None


def _run_tree_kernel(kernel, X, r0, r1, flat, lams, rows: tuple[int, int]) -> None:
    work, iwork = _workspace(max(flat.parent.shape[0], flat.perm.shape[0]), rows)
    kernel(X, r0, r1, *flat, lams, work, iwork)


def _run_regular_kernel(kernel, X, r0, r1, regular, lams, rows: tuple[int, int]) -> None:
    work, iwork = _workspace(X.shape[1], rows)
    kernel(X, r0, r1, *regular, lams, work, iwork)


def _get_pool(n_threads: int) -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None or _pool._max_workers != n_threads:  # noqa: SLF001
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool = ThreadPoolExecutor(n_threads, thread_name_prefix="restore-prox")
        return _pool


def check_penalty_name(penalty: str) -> None:
    """Raise a ValueError listing the valid penalties if ``penalty`` is not one."""
    check_choice("penalty", penalty, PENALTIES, plural="penalties")


def check_penalty(penalty: str, tree: Tree | None, n_vars: int | None = None) -> None:
    """Validate a penalty name against a tree and a number of variables."""
    check_penalty_name(penalty)
    if tree is not None and not isinstance(tree, Tree):
        raise TypeError(f"tree must be a restore.Tree, got {type(tree).__name__}")
    if penalty in TREE_PENALTIES:
        if tree is None:
            raise ValueError(f"penalty {penalty!r} needs a tree: pass tree=restore.Tree...")
        if n_vars is not None and n_vars != tree.n_vars:
            raise ValueError(
                f"u has {n_vars} variables along its first axis but the tree has {tree.n_vars}")


def _as_signals(u: ArrayLike, name: str = "u") -> tuple[np.ndarray, tuple[int, ...], np.dtype]:
    """Validate ``u`` and return a fresh C-contiguous float64 (n, p) copy.

    Also returns the original shape and the output dtype (the input's float
    dtype; integers and booleans give float64).
    """
    arr = np.asarray(u)
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
    if arr.ndim not in (1, 2):
        raise ValueError(f"{name} must have shape (p,) or (p, n), got {arr.ndim} dimensions {arr.shape}")
    out_dtype = arr.dtype if arr.dtype.kind == "f" else np.dtype(np.float64)
    rows = arr.T if arr.ndim == 2 else arr[None, :]
    if rows.dtype == np.float64 and rows.flags.c_contiguous:  # one pass: copy and check
        X = np.empty(rows.shape)
        finite = _core.copy_finite(rows, X)
    else:
        X = np.array(rows, dtype=np.float64, order="C", copy=True)
        finite = _core.all_finite(X)
    if not finite:
        raise ValueError(f"{name} contains NaN or infinite values")
    return X, arr.shape, out_dtype


def _prox_rows(X: np.ndarray, lam: float | np.ndarray, penalty: str, tree: Tree | None,
               n_threads: int | None = None) -> None:
    """Apply the prox in place to the rows of a C-contiguous float64 (n, p) array.

    ``lam`` is one value for all rows or a float64 array with one per row.
    No validation: the caller guarantees shapes, dtype and finite lams >= 0.
    Rows are split among ``n_threads`` threads (default: all CPUs) when the
    batch is large enough.
    """
    n, p = X.shape
    if n == 0 or p == 0 or (np.ndim(lam) == 0 and lam == 0.0):  # lam = 0: the identity, exactly
        return
    kernel = _prox_range(penalty, tree, lam, n)
    _map_rows(lambda r0, r1: kernel(X, r0, r1), n, p, n_threads)


def _prox_range(penalty: str, tree: Tree | None, lam: float | np.ndarray, n: int):
    """``kernel(X, r0, r1)``: the prox in place on rows r0..r1-1 of X, with one lam or one per row."""
    lams = np.full(n, float(lam)) if np.ndim(lam) == 0 else np.ascontiguousarray(lam, dtype=np.float64)
    if penalty == "l1":
        return lambda X, r0, r1: _core.prox_l1(X, r0, r1, lams)
    if penalty == "l0":
        return lambda X, r0, r1: _core.prox_l0(X, r0, r1, lams)
    regular = tree._regular  # noqa: SLF001
    if regular is not None and penalty in _REGULAR_KERNELS:
        reg_kernel, reg_rows = _REGULAR_KERNELS[penalty]
        if penalty == "tree_linf":  # heap records: 4 floats for each magnitude and each inner node's clip
            n_vars = regular.n_coeffs
            n_inner = int(np.prod(regular.shape, axis=1) @ (regular.inner != 0))
            reg_rows = (reg_rows[0] + -(-4 * (n_vars + n_inner) // n_vars), reg_rows[1])
        return lambda X, r0, r1: _run_regular_kernel(reg_kernel, X, r0, r1, regular, lams, reg_rows)
    (tree_kernel, rows), flat = _TREE_KERNELS[penalty], tree._flat  # noqa: SLF001
    return lambda X, r0, r1: _run_tree_kernel(tree_kernel, X, r0, r1, flat, lams, rows)


def _map_rows(task, n: int, p: int, n_threads: int | None = None) -> None:
    """Run ``task(r0, r1)`` over row ranges covering 0..n-1, on the thread pool when the work is large.

    ``p`` is the cost per row (entries) used to decide how many ranges are
    worth a thread; tasks must release the GIL (numba ``nogil`` kernels).
    """
    n_threads = default_num_threads() if n_threads is None else n_threads
    n_chunks = min(n_threads, n, max(1, (n * p) // _MIN_PARALLEL_WORK))
    if n_chunks <= 1:
        task(0, n)
        return
    bounds = np.linspace(0, n, n_chunks + 1).astype(np.int64)
    pool = _get_pool(n_threads)
    futures = [pool.submit(task, int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    for f in futures:
        f.result()


def prox(
    u: ArrayLike,
    lam: float,
    *,
    penalty: Penalty,
    tree: Tree | None = None,
    positive: bool = False,
) -> NDArray[np.floating]:
    r"""Proximal operator of a sparsity penalty.

    Computes ``argmin_v 0.5 * ||u - v||^2 + lam * Omega(v)`` for each signal.

    Parameters
    ----------
    u : array_like, shape (p,) or (p, n)
        One signal, or ``n`` signals as columns. Integer input is converted to
        float64; float input keeps its dtype in the output.
    lam : float
        Regularisation strength, finite and >= 0.
    penalty : {'l1', 'l0', 'tree_l2', 'tree_linf', 'tree_l0'}
        ``Omega``: the l1 norm, the number of non-zeros, or, over the groups
        ``g`` of ``tree`` with weights ``w_g``, ``sum w_g ||v_g||_2``,
        ``sum w_g ||v_g||_inf`` or ``sum w_g [v_g != 0]``.
    tree : Tree, optional
        Required by the tree penalties; ``tree.n_vars`` must equal ``p``.
    positive : bool, default False
        Add the constraint ``v >= 0``.

    Returns
    -------
    ndarray, shape of ``u``
        A new array; ``u`` is never modified.

    Raises
    ------
    ValueError
        Unknown penalty, missing tree, ``p`` different from the tree's number
        of variables, NaN or inf in ``u``, ``lam`` negative or not finite,
        ``u`` with more than two dimensions.

    Notes
    -----
    ``l1`` is soft thresholding at ``lam``; ``l0`` keeps ``u_j`` when
    ``|u_j| > sqrt(2 lam)`` (exact ties go to zero).

    ``tree_l2`` and ``tree_linf`` (Jenatton et al., 2011) compose the proxes
    of the single group terms, every child before its parent; one such pass
    is exact. ``tree_l2`` costs O(p); ``tree_linf`` O(p log p) on the
    trees of wavelet transforms (the clip levels from heaps of the subtrees'
    magnitudes) and O(p * depth) at worst on other trees.
    ``tree_l0`` is solved exactly by Donoho's dynamic programme in O(p),
    exact ties going to zero. With ``positive=True`` the result is the prox
    of ``max(u, 0)`` (Lemma 7 of Jenatton et al.).

    Batches are processed in parallel over columns by threads running
    GIL-free numba kernels.

    References
    ----------
    .. [1] R. Jenatton, J. Mairal, G. Obozinski, F. Bach, "Proximal Methods
       for Hierarchical Sparse Coding", JMLR 12, 2011.
    .. [2] D. L. Donoho, "CART and best-ortho-basis: a connection", Annals of
       Statistics 25(5), 1997.

    Examples
    --------
    >>> import numpy as np
    >>> from restore import Tree, prox
    >>> tree = Tree.from_parents([-1, 0, 0])
    >>> prox(np.array([3.0, 4.0, 0.0]), 1.0, penalty="tree_l2", tree=tree)
    array([2.29289322, 2.29289322, 0.        ])
    """
    X, shape, out_dtype = _as_signals(u)
    check_penalty(penalty, tree, X.shape[1])
    lam_f = check_number("lam", lam)
    if positive:
        np.maximum(X, 0.0, out=X)
    _prox_rows(X, lam_f, penalty, tree)
    out = X[0] if len(shape) == 1 else X.T
    return out.astype(out_dtype, copy=False) if out_dtype != np.float64 else out


def penalty_value(
    u: ArrayLike,
    *,
    penalty: Penalty,
    tree: Tree | None = None,
) -> NDArray[np.float64] | float:
    """Value of a penalty ``Omega(u)`` (without ``lam``).

    Parameters
    ----------
    u : array_like, shape (p,) or (p, n)
        One signal or ``n`` signals as columns.
    penalty : {'l1', 'l0', 'tree_l2', 'tree_linf', 'tree_l0'}
        See :func:`prox`.
    tree : Tree, optional
        Required by the tree penalties.

    Returns
    -------
    float or ndarray of shape (n,)
        ``Omega`` of the signal, or of each column.

    Examples
    --------
    >>> from restore import Tree, penalty_value
    >>> penalty_value([3.0, 4.0, 0.0], penalty="tree_l2", tree=Tree.from_parents([-1, 0, 0]))
    9.0
    """
    X, shape, _ = _as_signals(u)
    check_penalty(penalty, tree, X.shape[1])
    out = _penalty_rows(X, penalty, tree)
    return float(out[0]) if len(shape) == 1 else out


def _penalty_rows(X: np.ndarray, penalty: str, tree: Tree | None) -> np.ndarray:
    """Omega of each row of a C-contiguous float64 (n, p) array (unvalidated)."""
    out = np.zeros(X.shape[0])
    if X.shape[1]:
        if penalty == "l1":
            _core.value_l1(X, out)
        elif penalty == "l0":
            _core.value_l0(X, out)
        else:
            _core.value_tree(X, out, _VALUE_KIND[penalty], *tree._flat)  # noqa: SLF001
    return out
