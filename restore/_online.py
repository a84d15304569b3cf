"""Online learning of tree-structured dictionaries (Mairal, Bach, Ponce, Sapiro, JMLR 2010), without scikit-learn.

The algorithm of :class:`restore.TreeDictionaryLearning`, on plain arrays:
the estimator wraps it in scikit-learn's contract, and :func:`restore.inpaint`
runs it directly to adapt the shipped dictionary to a photo, so that
inpainting does not import scikit-learn (about a second of every first call).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ._config import CODING_BATCH, DEFAULT_BRANCHING, DEFAULT_CODE_LAM, single_threaded_blas
from ._progress import ProgressCallback
from ._validation import check_callable, check_choice, check_int, check_matrix, check_number
from .coding import _as_mask, _sparse_encode
from .proximal import PENALTIES, TREE_PENALTIES
from .tree import Tree

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


def check_random_state(random_state: Any) -> None:
    """scikit-learn's ``random_state``: None, an int >= 0, a RandomState or a Generator."""
    ok = random_state is None or isinstance(random_state, (np.random.RandomState, np.random.Generator)) or (
        isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool) and random_state >= 0)
    if not ok:
        raise ValueError(f"random_state must be None, an integer >= 0, a numpy RandomState or Generator, "
                         f"got {random_state!r}")


def generator(random_state: Any) -> np.random.Generator:
    """A NumPy Generator from scikit-learn's ``random_state`` (a RandomState seeds a new Generator)."""
    check_random_state(random_state)
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(np.iinfo(np.int32).max))
    return np.random.default_rng(random_state)


def known_mask(mask: ArrayLike, shape: tuple[int, int]) -> np.ndarray:
    """``mask`` as booleans of the shape of X, refusing anything but True/False (or 1/0)."""
    M = np.asarray(mask)
    if M.dtype != bool:
        values = np.unique(M) if M.dtype.kind in "biuf" else None
        if values is None or not np.all(np.isin(values, (0, 1))):
            more = " ..." if values is not None and len(values) > 5 else ""
            shown = "a non-numeric array" if values is None else f"values {values[:5]}{more}"
            raise ValueError(f"mask must be boolean (True where an entry is known) or 0/1, got {shown}")
    return _as_mask(M, shape)


def known_entries(mask: ArrayLike | None, shape: tuple[int, int]) -> np.ndarray | None:
    """The known entries of X as :func:`known_mask` reads them, None when every entry is known."""
    if mask is None:
        return None
    M = known_mask(mask, shape)
    if not M.any():
        raise ValueError("mask marks every entry as missing: nothing to learn from")
    return None if M.all() else M


@dataclass(frozen=True)
class Settings:
    """What online learning is asked: the tree of atoms and the coding of each mini-batch.

    The parameters of :class:`restore.TreeDictionaryLearning`, less the
    initial atoms, the randomness and the progress; :data:`DEFAULTS` holds
    the estimator's defaults.
    """

    branching: Sequence[int]
    penalty: str
    n_atoms: int | None
    lam: float
    batch_size: int
    n_epochs: int
    rho: float | None
    max_code_iter: int
    tol: float
    positive_code: bool

    def check(self) -> None:
        """Refuse any parameter out of its range, naming it."""
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

    def atoms(self) -> int:
        """The number of atoms: the tree's nodes, or ``n_atoms`` for a flat dictionary."""
        if self.penalty in TREE_PENALTIES or self.n_atoms is None:
            return Tree.balanced(self.branching).n_vars
        return int(self.n_atoms)

    def tree(self) -> Tree | None:
        """The tree of the atoms (None for a flat dictionary)."""
        return Tree.balanced(self.branching) if self.penalty in TREE_PENALTIES else None


#: TreeDictionaryLearning's defaults (its signature reads them from here); inpaint's adaptation starts from them.
DEFAULTS = Settings(DEFAULT_BRANCHING, penalty="tree_l2", n_atoms=None, lam=DEFAULT_CODE_LAM, batch_size=256,
                    n_epochs=1, rho=None, max_code_iter=30, tol=1e-4, positive_code=False)


@dataclass(frozen=True)
class Atoms:
    """A fitted dictionary as inpainting codes over it and adapts it: the atoms (rows), their tree, its settings."""

    components: np.ndarray
    tree: Tree | None
    settings: Settings


def check_settings(settings: Settings, random_state: Any, progress: ProgressCallback | None) -> None:
    """Every parameter of online learning, checked before any work."""
    settings.check()
    check_callable("progress", progress)
    check_random_state(random_state)


@dataclass
class State:
    """Where online learning stands: the atoms (rows), their tree and the sufficient statistics.

    ``A = sum a a^T`` and ``B = sum x a^T`` over the codes ``a`` of the
    signals ``x`` seen so far; ``A_missing`` (n_features, n_atoms, n_atoms),
    once a signal missed an entry, per entry the Gram of the codes of the
    signals that miss it (see :func:`update_atoms`).
    """

    components: np.ndarray
    tree: Tree | None
    A: np.ndarray
    B: np.ndarray
    A_missing: np.ndarray | None
    n_iter: int
    gen: np.random.Generator

    @classmethod
    def start(cls, X: np.ndarray, M: np.ndarray | None, settings: Settings, dict_init: ArrayLike | None,
              gen: np.random.Generator) -> State:
        """The state before the first mini-batch: ``dict_init``'s atoms, or random signals of X, scaled to unit norm."""
        k, m = settings.atoms(), X.shape[1]
        if dict_init is not None:
            D = check_matrix(dict_init, "dict_init").copy()
            if D.shape != (k, m):
                raise ValueError(f"dict_init has shape {D.shape}, expected (n_atoms, n_features) = {(k, m)}")
        else:
            idx = gen.choice(X.shape[0], size=k, replace=X.shape[0] < k)
            D = X[idx] * (M[idx] if M is not None else 1.0) + 1e-3 * gen.standard_normal((k, m))
        norms = np.linalg.norm(D, axis=1, keepdims=True)
        D /= np.where(norms > 0, norms, 1.0)
        return cls(D, settings.tree(), np.zeros((k, k)), np.zeros((m, k)), None, 0, gen)

    def atoms(self, settings: Settings) -> Atoms:
        """The dictionary learned so far, as inpainting uses it."""
        return Atoms(self.components, self.tree, settings)

    def step(self, X: np.ndarray, M: np.ndarray | None, settings: Settings) -> None:
        """Code one mini-batch (known entries ``M``, or None), add it to the statistics and update the atoms."""
        D = self.components
        # single-precision products (the statistics are stochastic anyway)
        codes, _ = _sparse_encode(X, D, lam=float(settings.lam), penalty=settings.penalty, tree=self.tree, mask=M,
                                  max_iter=int(settings.max_code_iter), tol=float(settings.tol),
                                  positive=bool(settings.positive_code), batch_size=CODING_BATCH, fast=True,
                                  chunk_rows=_CODE_CHUNK)
        self.n_iter += 1
        t = self.n_iter
        if settings.rho is not None and t > 1:
            beta = (1.0 - 1.0 / t) ** float(settings.rho)
            self.A *= beta
            self.B *= beta
            if self.A_missing is not None:
                self.A_missing *= beta
        self.A += codes.T @ codes
        if M is None:
            self.B += X.T @ codes
        else:
            # each pixel's statistics count the signals where it is known: B row by row, and per pixel the
            # Gram of the codes of the signals that miss it, to subtract from A (Mairal et al. 2010, sec. 5)
            self.B += (X * M).T @ codes
            if self.A_missing is None:
                self.A_missing = np.zeros((X.shape[1],) + self.A.shape)
            for i in np.flatnonzero(~M.all(axis=0)):
                C = codes[~M[:, i]]
                self.A_missing[i] += C.T @ C
            X = np.where(M, X, codes @ D)  # complete signals for the replacement of unused atoms
        self.components = update_atoms(D, self.A, self.B, X, self.gen, self.A_missing)

    def fit(self, X: np.ndarray, M: np.ndarray | None, settings: Settings,
            progress: ProgressCallback | None = None) -> None:
        """``n_epochs`` passes of mini-batches over X, each in a random order; ``progress(done, total)`` after each."""
        n = X.shape[0]
        done, total = 0, -(-n // int(settings.batch_size)) * int(settings.n_epochs)
        for idx in _batches(n, int(settings.batch_size), int(settings.n_epochs), self.gen):
            self.step(X[idx], None if M is None else M[idx], settings)
            done += 1
            if progress is not None:
                progress(done, total)


def _batches(n: int, batch_size: int, n_epochs: int, gen: np.random.Generator) -> Iterator[np.ndarray]:
    """The rows of each mini-batch, in order: each epoch draws its permutation when it starts."""
    for _ in range(n_epochs):
        order = gen.permutation(n)
        for s in range(0, n, batch_size):
            yield np.sort(order[s:s + batch_size])


def learn(X: np.ndarray, M: np.ndarray | None, settings: Settings, *, dict_init: ArrayLike | None,
          gen: np.random.Generator, progress: ProgressCallback | None = None) -> State:
    """Learn atoms from the rows of X (float64; known entries ``M`` from :func:`known_entries`): the estimator's fit.

    BLAS runs on one thread meanwhile: the mini-batches' products are
    small, and its threads would only wait for them, spinning (the coding
    runs threads of its own); so the result does not depend on the number
    of threads either.
    """
    with single_threaded_blas():
        state = State.start(X, M, settings, dict_init, gen)
        state.fit(X, M, settings, progress)
    return state


@dataclass(frozen=True)
class Saved:
    """A dictionary as :meth:`restore.TreeDictionaryLearning.save` wrote it: its parameters and its state."""

    params: dict
    components: np.ndarray
    A: np.ndarray
    B: np.ndarray
    A_missing: np.ndarray | None
    n_iter: int

    @property
    def settings(self) -> Settings:
        """Its tree and coding."""
        return Settings(**self.params)


def read_saved(path: str | os.PathLike) -> Saved:
    """Read a dictionary saved by :meth:`restore.TreeDictionaryLearning.save`.

    Raises
    ------
    ValueError
        The file is missing, unreadable or not written by ``save``.
    """
    try:
        with np.load(path, allow_pickle=False) as z:
            params = json.loads(str(z["params"]))
            expected = [f.name for f in fields(Settings)]
            if sorted(params) != sorted(expected):
                others = sorted(set(params) ^ set(expected))
                raise ValueError(f"its parameters differ from the estimator's in {', '.join(map(repr, others))}")
            params["branching"] = tuple(params["branching"])
            saved = Saved(params, np.array(z["components"]), np.array(z["A"]), np.array(z["B"]),
                          np.array(z["A_missing"]) if "A_missing" in z.files else None, int(z["n_iter"]))
    except (OSError, KeyError, ValueError, TypeError) as exc:
        raise ValueError(f"{str(path)!r} is not a dictionary saved by TreeDictionaryLearning.save: {exc}") from None
    return saved


def update_atoms(D: np.ndarray, A: np.ndarray, B: np.ndarray, X: np.ndarray, gen: np.random.Generator,
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

