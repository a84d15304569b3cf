"""Online learning of tree-structured dictionaries (Mairal, Bach, Ponce, Sapiro, JMLR 2010)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from ._config import CODING_BATCH, single_threaded_blas
from ._io import atomic_path
from ._online import (
    DEFAULTS,
    Atoms,
    Settings,
    State,
    check_settings,
    generator,
    known_entries,
    known_mask,
    learn,
    read_saved,
)
from ._progress import ProgressCallback
from ._validation import check_int, check_matrix, check_number
from .coding import _sparse_encode

__all__ = ["TreeDictionaryLearning"]

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
        branching: Sequence[int] = DEFAULTS.branching,
        *,
        penalty: str = DEFAULTS.penalty,
        n_atoms: int | None = DEFAULTS.n_atoms,
        lam: float = DEFAULTS.lam,
        batch_size: int = DEFAULTS.batch_size,
        n_epochs: int = DEFAULTS.n_epochs,
        rho: float | None = DEFAULTS.rho,
        max_code_iter: int = DEFAULTS.max_code_iter,
        tol: float = DEFAULTS.tol,
        positive_code: bool = DEFAULTS.positive_code,
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

    def _settings(self) -> Settings:
        return Settings(self.branching, penalty=self.penalty, n_atoms=self.n_atoms, lam=self.lam,
                        batch_size=self.batch_size, n_epochs=self.n_epochs, rho=self.rho,
                        max_code_iter=self.max_code_iter, tol=self.tol, positive_code=self.positive_code)

    def _check_params(self) -> None:
        """Validate every parameter (at the start of fit and partial_fit)."""
        check_settings(self._settings(), self.random_state, self.progress)

    @property
    def _n_features_out(self) -> int:
        """Number of output features of :meth:`transform` (the atoms), for ``get_feature_names_out``."""
        return self.components_.shape[0]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64"]  # codes are computed and returned in float64
        return tags

    # -- fitting ------------------------------------------------------------

    def _atoms(self) -> Atoms:
        """The fitted dictionary as inpainting uses it."""
        return Atoms(self.components_, self.tree_, self._settings())

    def _state(self) -> State:
        """The state of the learning: copies of this estimator's statistics, which a step updates in place."""
        # unpickled from a version without the missing entries' statistics: none
        missing = getattr(self, "_A_missing", None)
        return State(self.components_, self.tree_, self._A.copy(), self._B.copy(),
                     None if missing is None else missing.copy(), self.n_iter_, self._gen)

    def _keep(self, state: State) -> None:
        self.components_, self.tree_, self.n_iter_, self._gen = state.components, state.tree, state.n_iter, state.gen
        self._A, self._B, self._A_missing = state.A, state.B, state.A_missing

    def _check_X(self, X: ArrayLike, mask: ArrayLike | None, reset: bool) -> tuple[np.ndarray, np.ndarray | None]:
        X = validate_data(self, X, dtype=np.float64, reset=reset)
        return X, known_entries(mask, X.shape)

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
        settings = self._settings()
        # on copies of the statistics: an error or an interrupt in the step leaves the estimator as it was
        state = State.start(X, M, settings, self.dict_init, generator(self.random_state)) if first else self._state()
        with single_threaded_blas():
            state.step(X, M, settings)
        self._keep(state)
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
            state = learn(X, M, self._settings(), dict_init=self.dict_init, gen=generator(self.random_state),
                          progress=self.progress)
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(saved)
            raise
        self._keep(state)
        return self

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
        M = None if mask is None else known_mask(mask, X.shape)
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
        saved = read_saved(path)
        est = cls(**saved.params)  # read_saved checked them: the parameters of Settings are the estimator's
        est.components_, est._A, est._B, est._A_missing = saved.components, saved.A, saved.B, saved.A_missing
        est.n_iter_ = saved.n_iter
        est.tree_ = saved.settings.tree()
        est.n_features_in_ = est.components_.shape[1]
        est._gen = generator(None)
        return est
