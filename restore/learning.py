"""Online learning of tree-structured dictionaries (Mairal, Bach, Ponce, Sapiro, JMLR 2010)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from ._config import CODING_BATCH, DEFAULT_BRANCHING, DEFAULT_CODE_LAM, single_threaded_blas
from ._io import atomic_path
from ._progress import ProgressCallback
from ._validation import check_callable, check_choice, check_int, check_matrix, check_number
from .coding import _as_mask, _sparse_encode
from .proximal import PENALTIES, TREE_PENALTIES
from .tree import Tree

__all__ = ["TreeDictionaryLearning"]

# An atom whose accumulated squared code A_jj is below this was never used: the codes of unit-norm signals
# are O(1), so this is zero up to rounding.
_UNUSED = 1e-10
# Signals of a mini-batch coded by one thread (mini-batches follow one another, so threads share each one): the
# default mini-batch of 256 in halves keeps two cores busy; smaller pieces lose more to Python's per-iteration
# overhead than they gain (see benchmarks/bench_load.py).
_CODE_CHUNK = 128
# Newton's iterations for the weighted projection on the unit ball (_weighted_ball): they converge quadratically,
# from below, so the cap is only a guard; the tolerance is on the squared norm, far below the atoms' precision.
_BALL_ITER = 50
_BALL_TOL = 1e-12


def _check_random_state(random_state: Any) -> None:
    """scikit-learn's ``random_state``: None, an int >= 0, a RandomState or a Generator."""
    ok = random_state is None or isinstance(random_state, (np.random.RandomState, np.random.Generator)) or (
        isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool) and random_state >= 0)
    if not ok:
        raise ValueError(f"random_state must be None, an integer >= 0, a numpy RandomState or Generator, "
                         f"got {random_state!r}")


def _generator(random_state: Any) -> np.random.Generator:
    """A NumPy Generator from scikit-learn's ``random_state`` (a RandomState seeds a new Generator)."""
    _check_random_state(random_state)
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(np.iinfo(np.int32).max))
    return np.random.default_rng(random_state)


def _known_mask(mask: ArrayLike, shape: tuple[int, int]) -> np.ndarray:
    """``mask`` as booleans of the shape of X, refusing anything but True/False (or 1/0)."""
    M = np.asarray(mask)
    if M.dtype != bool:
        values = np.unique(M) if M.dtype.kind in "biuf" else None
        if values is None or not np.all(np.isin(values, (0, 1))):
            more = " ..." if values is not None and len(values) > 5 else ""
            shown = "a non-numeric array" if values is None else f"values {values[:5]}{more}"
            raise ValueError(f"mask must be boolean (True where an entry is known) or 0/1, got {shown}")
    return _as_mask(M, shape)


class TreeDictionaryLearning(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Dictionary whose atoms are the nodes of a tree, learned online.

    A scikit-learn transformer: ``fit``, ``partial_fit``, ``transform``
    (the sparse codes), ``fit_transform``, ``inverse_transform``,
    ``get_params``/``set_params``, ``set_output`` and
    ``get_feature_names_out``; it passes
    :func:`sklearn.utils.estimator_checks.check_estimator`. Signals are
    rows, ``(n_samples, n_features)``; atoms are rows of ``components_``.

    Parameters
    ----------
    branching : sequence of int, default (10, 3, 3)
        Shape of the balanced tree of atoms for the tree penalties:
        ``(10, 3, 3)`` gives 1 + 10 + 30 + 90 = 131 atoms, the root first
        (the shipped dictionary's tree).
    penalty : {'tree_l2', 'tree_linf', 'tree_l0', 'l1', 'l0'}, default 'tree_l2'
        Penalty of the codes; ``'l1'`` (or ``'l0'``) learns an ordinary flat
        dictionary of ``n_atoms`` atoms.
    n_atoms : int, optional
        Number of atoms of a flat dictionary (default: the size of
        ``branching``'s tree). Ignored by the tree penalties.
    lam : float, default 0.1
        Regularisation of the codes (signals are usually centred and scaled
        to unit norm, as in both papers).
    batch_size : int, default 256
        Signals per mini-batch.
    n_epochs : int, default 1
        Passes over the data made by :meth:`fit`.
    rho : float, optional
        Forgetting exponent: the statistics are scaled by
        ``(1 - 1/t)**rho`` before mini-batch ``t`` is added. None keeps all.
    max_code_iter : int, default 30
        FISTA iterations per mini-batch (the online algorithm does not need
        exact codes).
    tol : float, default 1e-4
        Tolerance of the coding (relative decrease of each signal's objective).
    positive_code : bool, default False
        Constrain codes to be >= 0.
    dict_init : array_like, shape (n_atoms, n_features), optional
        Initial atoms (warm start, e.g. the shipped generic dictionary);
        default: random training signals.
    random_state : int, RandomState or Generator, optional
        Randomness of the initial atoms, the order of the samples and the
        replacement of unused atoms; an int gives reproducible results.
    progress : callable, optional
        ``progress(done, total)`` after each mini-batch of :meth:`fit`; it
        may raise :class:`restore.Cancelled` to stop between mini-batches
        (``fit`` then leaves the estimator as it was before).

    Attributes
    ----------
    components_ : ndarray, shape (n_atoms, n_features)
        The atoms, unit norm (or less), root first for tree penalties.
    tree_ : Tree or None
        The tree of the atoms (None for a flat dictionary).
    n_iter_ : int
        Mini-batches processed so far.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of str
        Names of the features seen during fit, when ``X`` had string column
        names (a pandas DataFrame).

    Notes
    -----
    Each mini-batch is coded with :func:`restore.sparse_encode` (FISTA, the
    one prox core), the sufficient statistics ``A = sum a a^T`` and
    ``B = sum x a^T`` are updated, then each atom by block-coordinate
    descent, warm started: ``u_j = (b_j - D a_j) / A_jj + d_j``,
    ``d_j = u_j / max(||u_j||, 1)``. Atoms that are never used are replaced
    by random training signals. With a ``mask`` of known entries (random
    pixel loss leaves few complete patches), codes fit the known entries
    only, and each entry of an atom is fitted to the signals that know it
    ([1]_, the missing-values extension): per entry ``i`` the statistics
    are ``A_i = sum m_i a a^T`` and ``b_i = sum m_i x_i a``, the step is
    taken entry by entry with curvature ``A_i[j, j]``, and the atom is
    projected on the unit ball in that metric. The values at missing
    entries are never read (they must be finite). Each mini-batch is coded in pieces of
    128 signals, one thread each (so ``batch_size // 128`` threads at most:
    2 at the default of 256, whatever ``RESTORE_NUM_THREADS``), with BLAS on one
    thread during ``fit`` and ``partial_fit``: the same data and
    ``random_state`` give the same dictionary whatever the number of
    threads.

    References
    ----------
    .. [1] J. Mairal, F. Bach, J. Ponce, G. Sapiro, "Online Learning for
       Matrix Factorization and Sparse Coding", JMLR 11, 2010.
    .. [2] R. Jenatton, J. Mairal, G. Obozinski, F. Bach, "Proximal Methods
       for Hierarchical Sparse Coding", JMLR 12, 2011.

    Examples
    --------
    >>> import numpy as np
    >>> from restore import TreeDictionaryLearning
    >>> X = np.random.default_rng(0).standard_normal((500, 16))
    >>> est = TreeDictionaryLearning((3, 2), lam=0.1, random_state=0).fit(X)
    >>> est.components_.shape, est.transform(X[:2]).shape
    ((10, 16), (2, 10))
    """

    def __init__(
        self,
        branching: Sequence[int] = DEFAULT_BRANCHING,
        *,
        penalty: str = "tree_l2",
        n_atoms: int | None = None,
        lam: float = DEFAULT_CODE_LAM,
        batch_size: int = 256,
        n_epochs: int = 1,
        rho: float | None = None,
        max_code_iter: int = 30,
        tol: float = 1e-4,
        positive_code: bool = False,
        dict_init: ArrayLike | None = None,
        random_state: int | np.random.RandomState | np.random.Generator | None = None,
        progress: ProgressCallback | None = None,
    ) -> None:
        self.branching = branching
        self.penalty = penalty
        self.n_atoms = n_atoms
        self.lam = lam
        self.batch_size = batch_size
        self.n_epochs = n_epochs
        self.rho = rho
        self.max_code_iter = max_code_iter
        self.tol = tol
        self.positive_code = positive_code
        self.dict_init = dict_init
        self.random_state = random_state
        self.progress = progress

    # -- parameters -----------------------------------------------------------

    def _check_params(self) -> None:
        """Validate every parameter (at the start of fit and partial_fit)."""
        check_choice("penalty", self.penalty, PENALTIES, plural="penalties")
        if self.penalty in TREE_PENALTIES or self.n_atoms is None:
            Tree.balanced(self.branching)  # validates the branching
        if self.penalty not in TREE_PENALTIES and self.n_atoms is not None:
            check_int("n_atoms", self.n_atoms)
        check_number("lam", self.lam)
        for name in ("batch_size", "n_epochs", "max_code_iter"):
            check_int(name, getattr(self, name))
        if self.rho is not None:
            check_number("rho", self.rho)
        check_number("tol", self.tol)
        check_callable("progress", self.progress)
        _check_random_state(self.random_state)

    def _n_atoms(self) -> int:
        if self.penalty in TREE_PENALTIES:
            return Tree.balanced(self.branching).n_vars
        return int(self.n_atoms) if self.n_atoms is not None else Tree.balanced(self.branching).n_vars

    def _make_tree(self) -> Tree | None:
        return Tree.balanced(self.branching) if self.penalty in TREE_PENALTIES else None

    @property
    def _n_features_out(self) -> int:
        """Number of output features of :meth:`transform` (the atoms), for ``get_feature_names_out``."""
        return self.components_.shape[0]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64"]  # codes are computed and returned in float64
        return tags

    # -- fitting ------------------------------------------------------------

    def _init(self, X: np.ndarray, M: np.ndarray | None, gen: np.random.Generator) -> None:
        k, m = self._n_atoms(), X.shape[1]
        if self.dict_init is not None:
            D = check_matrix(self.dict_init, "dict_init").copy()
            if D.shape != (k, m):
                raise ValueError(f"dict_init has shape {D.shape}, expected (n_atoms, n_features) = {(k, m)}")
        else:
            idx = gen.choice(X.shape[0], size=k, replace=X.shape[0] < k)
            D = X[idx] * (M[idx] if M is not None else 1.0) + 1e-3 * gen.standard_normal((k, m))
        norms = np.linalg.norm(D, axis=1, keepdims=True)
        D /= np.where(norms > 0, norms, 1.0)
        self.components_ = D
        self.tree_ = self._make_tree()
        self.n_iter_ = 0
        self._A = np.zeros((k, k))
        self._B = np.zeros((m, k))
        self._A_missing = None  # (n_features, n_atoms, n_atoms) once a signal missed an entry, see _step
        self._gen = gen

    def _check_X(self, X: ArrayLike, mask: ArrayLike | None, reset: bool) -> tuple[np.ndarray, np.ndarray | None]:
        X = validate_data(self, X, dtype=np.float64, reset=reset)
        M = None
        if mask is not None:
            M = _known_mask(mask, X.shape)
            if not M.any():
                raise ValueError("mask marks every entry as missing: nothing to learn from")
            if M.all():
                M = None
        return X, M

    def partial_fit(self, X: ArrayLike, y: None = None, *, mask: ArrayLike | None = None) -> TreeDictionaryLearning:
        """Update the dictionary with one mini-batch (initialises on the first call).

        Parameters
        ----------
        X : array_like, shape (n_samples, n_features)
            Training signals.
        y : None
            Ignored (scikit-learn convention).
        mask : array_like of bool, shape of X, optional
            True (or 1) where an entry is known, False (or 0) where it is
            missing: the signal counts by its known entries only.

        Returns
        -------
        self
        """
        self._check_params()
        first = not hasattr(self, "components_")
        X, M = self._check_X(X, mask, reset=first)
        if first:
            self._init(X, M, _generator(self.random_state))
        with single_threaded_blas():
            self._step(X, M)
        return self

    def fit(self, X: ArrayLike, y: None = None, *, mask: ArrayLike | None = None) -> TreeDictionaryLearning:
        """Learn the dictionary with ``n_epochs`` passes of mini-batches over ``X``.

        Parameters
        ----------
        X : array_like, shape (n_samples, n_features)
            Training signals.
        y : None
            Ignored.
        mask : array_like of bool, shape of X, optional
            True (or 1) where an entry is known, False (or 0) where it is
            missing: the signal counts by its known entries only.

        Returns
        -------
        self
        """
        self._check_params()
        saved = dict(self.__dict__)
        try:
            X, M = self._check_X(X, mask, reset=True)
            gen = _generator(self.random_state)
            self._init(X, M, gen)
            n = X.shape[0]
            bs = int(self.batch_size)
            n_batches = -(-n // bs) * int(self.n_epochs)
            done = 0
            # the mini-batches' products are small: BLAS's own threads would only wait for them, spinning
            with single_threaded_blas():
                for _ in range(int(self.n_epochs)):
                    order = gen.permutation(n)
                    for s in range(0, n, bs):
                        idx = np.sort(order[s:s + bs])
                        self._step(X[idx], None if M is None else M[idx])
                        done += 1
                        if self.progress is not None:
                            self.progress(done, n_batches)
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(saved)
            raise
        return self

    def _step(self, X: np.ndarray, M: np.ndarray | None) -> None:
        D = self.components_
        if not hasattr(self, "_A_missing"):  # unpickled from a version without the missing entries' statistics
            self._A_missing = None
        # single-precision products (the statistics are stochastic anyway)
        codes, _ = _sparse_encode(X, D, lam=float(self.lam), penalty=self.penalty, tree=self.tree_, mask=M,
                                  max_iter=int(self.max_code_iter), tol=float(self.tol),
                                  positive=bool(self.positive_code), batch_size=CODING_BATCH, fast=True,
                                  chunk_rows=_CODE_CHUNK)
        self.n_iter_ += 1
        t = self.n_iter_
        if self.rho is not None and t > 1:
            beta = (1.0 - 1.0 / t) ** float(self.rho)
            self._A *= beta
            self._B *= beta
            if self._A_missing is not None:
                self._A_missing *= beta
        self._A += codes.T @ codes
        if M is None:
            self._B += X.T @ codes
        else:
            # each pixel's statistics count the signals where it is known: B row by row, and per pixel the
            # Gram of the codes of the signals that miss it, to subtract from A (Mairal et al. 2010, sec. 5)
            self._B += (X * M).T @ codes
            if self._A_missing is None:
                self._A_missing = np.zeros((X.shape[1],) + self._A.shape)
            for i in np.flatnonzero(~M.all(axis=0)):
                C = codes[~M[:, i]]
                self._A_missing[i] += C.T @ C
            X = np.where(M, X, codes @ D)  # complete signals for the replacement of unused atoms
        self.components_ = _update_dict(D, self._A, self._B, X, self._gen, self._A_missing)

    # -- using the dictionary -------------------------------------------

    def transform(self, X: ArrayLike, *, mask: ArrayLike | None = None) -> NDArray[np.float64]:
        """Sparse codes of ``X`` over the learned dictionary.

        Parameters
        ----------
        X : array_like, shape (n_samples, n_features)
            Signals.
        mask : array_like of bool, shape of X, optional
            True (or 1) where an entry is known; codes fit the known
            entries only.

        Returns
        -------
        ndarray, shape (n_samples, n_atoms)
            Each signal's code; it does not depend on the other signals.
        """
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        M = None if mask is None else _known_mask(mask, X.shape)
        return _sparse_encode(X, self.components_, lam=check_number("lam", self.lam), penalty=self.penalty,
                              tree=self.tree_, mask=M, max_iter=check_int("max_code_iter", self.max_code_iter),
                              tol=check_number("tol", self.tol), positive=bool(self.positive_code),
                              batch_size=CODING_BATCH)[0]

    def inverse_transform(self, X: ArrayLike) -> NDArray[np.float64]:
        """Rebuild signals from their codes: ``X @ components_``.

        Parameters
        ----------
        X : array_like, shape (n_samples, n_atoms)
            Codes, as :meth:`transform` returns them.

        Returns
        -------
        ndarray, shape (n_samples, n_features)
            The signals the codes represent.
        """
        check_is_fitted(self)
        A = check_matrix(X, "X")
        if A.shape[1] != self.components_.shape[0]:
            raise ValueError(f"X must have {self.components_.shape[0]} columns (one per atom), got {A.shape[1]}")
        return A @ self.components_

    # -- persistence ------------------------------------------------------

    def save(self, path: str | os.PathLike) -> None:
        """Save the dictionary, its tree, parameters and statistics to exactly ``path``, atomically.

        The file is a NumPy ``.npz`` archive written at ``path`` as given (no
        suffix is added: ``save("dict")`` writes ``dict``, which
        :meth:`load` reads). It is written beside ``path`` first and renamed
        over it only once complete, so an existing file is replaced only by
        a complete model and never left half-written.

        Parameters
        ----------
        path : str or os.PathLike
            The file to write (not a folder).
        """
        check_is_fitted(self)
        path = Path(path)
        if path.is_dir():
            raise ValueError(f"path {str(path)!r} is a folder: give the dictionary file's name")
        params = {k: v for k, v in self.get_params().items() if k not in ("random_state", "progress", "dict_init")}
        params["branching"] = list(params["branching"])
        with atomic_path(path) as tmp, open(tmp, "wb") as fh:
            missing = {} if getattr(self, "_A_missing", None) is None else {"A_missing": self._A_missing}
            np.savez_compressed(fh, components=self.components_, A=self._A, B=self._B, n_iter=self.n_iter_, **missing,
                                params=json.dumps(params), parents=self.tree_.parents if self.tree_ is not None
                                else np.zeros(0, np.int64))
            fh.flush()
            os.fsync(fh.fileno())

    @classmethod
    def load(cls, path: str | os.PathLike) -> TreeDictionaryLearning:
        """Load a dictionary saved by :meth:`save` (from exactly ``path``).

        Parameters
        ----------
        path : str or os.PathLike
            The file :meth:`save` wrote.

        Returns
        -------
        TreeDictionaryLearning
            The fitted estimator, ready to ``transform``, to continue with
            ``partial_fit``, or to pass to :func:`restore.inpaint`.

        Raises
        ------
        ValueError
            The file is missing, unreadable or not written by :meth:`save`.
        """
        try:
            with np.load(path, allow_pickle=False) as z:
                params = json.loads(str(z["params"]))
                params["branching"] = tuple(params["branching"])
                est = cls(**params)
                est.components_ = np.array(z["components"])
                est._A, est._B = np.array(z["A"]), np.array(z["B"])
                est._A_missing = np.array(z["A_missing"]) if "A_missing" in z.files else None
                est.n_iter_ = int(z["n_iter"])
        except (OSError, KeyError, ValueError, TypeError) as exc:
            raise ValueError(f"{str(path)!r} is not a dictionary saved by TreeDictionaryLearning.save: {exc}") from None
        est.tree_ = est._make_tree()
        est.n_features_in_ = est.components_.shape[1]
        est._gen = _generator(None)
        return est


def _update_dict(D: np.ndarray, A: np.ndarray, B: np.ndarray, X: np.ndarray, gen: np.random.Generator,
                 A_missing: np.ndarray | None = None) -> np.ndarray:
    """Block-coordinate descent on the atoms, warm started from D (rows are atoms).

    With ``A_missing`` (per entry i, the Gram of the codes of the signals
    that miss it), entry i of atom j sees only the signals that know it:
    ``A_i = A - A_missing[i]``, the step is taken entry by entry,
    ``u_ij = d_ij + (b_ij - sum_l d_li A_i[l, j]) / A_i[j, j]``, and the
    atom is the minimiser of ``sum_i A_i[j, j] (d_ij - u_ij)**2`` over the
    unit ball (:func:`_weighted_ball`). Without, every ``A_i`` is ``A`` and
    this is the usual step and projection.
    """
    D = D.copy()
    k = D.shape[0]
    diag = np.diag(A)
    for j in range(k):
        if diag[j] < _UNUSED:  # never used: replace by a random training signal
            x = X[gen.integers(X.shape[0])]
            nrm = np.linalg.norm(x)
            D[j] = x / nrm if nrm > 0 else gen.standard_normal(D.shape[1]) / np.sqrt(D.shape[1])
            continue
        if A_missing is None:
            u = (B[:, j] - D.T @ A[:, j]) / diag[j] + D[j]
            D[j] = u / max(np.linalg.norm(u), 1.0)
            continue
        Aj = A[j][None, :] - A_missing[:, j, :]  # (n_features, n_atoms): row (= column) j of each entry's A_i
        # an entry never known where atom j is used has no curvature: its step is none
        c = np.maximum(Aj[:, j], _UNUSED)
        u = D[j] + (B[:, j] - np.einsum("li,il->i", D, Aj)) / c
        D[j] = _weighted_ball(u, c)
    return D


def _weighted_ball(u: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``argmin_{||d|| <= 1} sum_i c_i (d_i - u_i)**2`` for weights ``c > 0``.

    ``d_i = c_i u_i / (c_i + mu)`` with ``mu >= 0`` the root of
    ``||d(mu)|| = 1`` (0 when ``||u|| <= 1``), found by Newton's method on
    ``1 / ||d(mu)|| - 1``, as for the trust-region subproblem: that function
    is concave and increasing, so the iterates rise to the root from 0
    without overshooting it, and it is linear when the weights are equal
    (one step).
    """
    if np.dot(u, u) <= 1.0:
        return u
    cu2 = (c * u) ** 2
    mu = 0.0
    for _ in range(_BALL_ITER):
        s = c + mu
        q = cu2 / (s * s)
        norm2 = q.sum()
        if norm2 <= 1.0 + _BALL_TOL:
            break
        mu += (np.sqrt(norm2) - 1.0) * norm2 / np.dot(q, 1.0 / s)
    d = c * u / (c + mu)
    return d / max(np.sqrt(np.dot(d, d)), 1.0)
