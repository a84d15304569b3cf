import sys
from pathlib import Path

import numpy as np
import pytest

from restore import Cancelled, Tree, penalty_value, prox, sparse_encode


def objective(X, D, A, lam, penalty, tree, M=None):
    R = A @ D - X
    if M is not None:
        R = R * M
    return 0.5 * np.sum(R * R) + lam * np.sum(penalty_value(A.T, penalty=penalty, tree=tree))


@pytest.fixture
def problem(rng):
    tree = Tree.balanced((4, 3))
    k, m = tree.n_vars, 24
    D = rng.standard_normal((k, m))
    D /= np.linalg.norm(D, axis=1, keepdims=True)
    X = rng.standard_normal((300, m))
    return tree, D, X


@pytest.mark.parametrize("penalty", ["l1", "tree_l2", "tree_linf"])
def test_reaches_the_optimum(problem, penalty, rng):
    tree, D, X = problem
    lam = 0.3
    A = sparse_encode(X, D, lam=lam, penalty=penalty, tree=tree)
    ref = sparse_encode(X, D, lam=lam, penalty=penalty, tree=tree, max_iter=5000, tol=0)
    f, f_ref = objective(X, D, A, lam, penalty, tree), objective(X, D, ref, lam, penalty, tree)
    assert f <= f_ref * (1 + 1e-4)
    # and nothing nearby is better
    for _ in range(5):
        Z = ref + 1e-3 * rng.standard_normal(ref.shape)
        assert objective(X, D, Z, lam, penalty, tree) >= f_ref - 1e-9


@pytest.mark.parametrize("penalty", ["l1", "l0", "tree_l2", "tree_linf", "tree_l0"])
def test_orthonormal_dictionary_is_one_prox(penalty, rng):
    tree = Tree.balanced((3, 2))
    X = rng.standard_normal((50, tree.n_vars)) * 2
    A = sparse_encode(X, np.eye(tree.n_vars), lam=0.5, penalty=penalty, tree=tree)
    np.testing.assert_allclose(A, prox(X.T, 0.5, penalty=penalty, tree=tree).T, atol=1e-12)


def test_masked_entries_are_ignored(problem, rng):
    tree, D, X = problem
    M = rng.random(X.shape) > 0.6
    A1 = sparse_encode(X, D, lam=0.2, tree=tree, mask=M)
    A2 = sparse_encode(np.where(M, X, 1e3), D, lam=0.2, tree=tree, mask=M)
    np.testing.assert_allclose(A1, A2, atol=1e-10)
    ref = sparse_encode(X, D, lam=0.2, tree=tree, mask=M, max_iter=5000, tol=0)
    assert objective(X, D, A1, 0.2, "tree_l2", tree, M) <= objective(X, D, ref, 0.2, "tree_l2", tree, M) * (1 + 1e-4)


def test_weighted_entries_solve_the_rescaled_problem(problem, rng):
    # inpainting weighs residuals: 0.5 * sum(w * r^2) is the plain problem of sqrt(w) * x over D * sqrt(w)
    from restore.coding import _sparse_encode

    tree, D, X = problem
    X = X[:20]
    w = np.where(rng.random(X.shape) > 0.5, 1.0, 0.2)
    A, _ = _sparse_encode(X, D, lam=0.2, penalty="tree_l2", tree=tree, mask=w, max_iter=5000, tol=0.0, batch_size=4096)
    for i in range(len(X)):
        s = np.sqrt(w[i])
        ref = sparse_encode((X[i] * s)[None], D * s, lam=0.2, tree=tree, max_iter=5000, tol=0)[0]
        np.testing.assert_allclose(A[i], ref, atol=1e-6)


def test_too_small_lipschitz_bound_is_caught(problem, rng, monkeypatch):
    # with a mask, L comes from a power iteration that can fall short for a few signals; FISTA must
    # not diverge on them (it did on monarch with 90 % of the pixels missing): here it falls short 3x
    import restore.coding as coding

    tree, D, X = problem
    M = np.where(rng.random(X.shape) > 0.7, 1.0, 0.05)
    true_L = coding._lipschitz

    def short(D, M, n, spectrum, n_iter=10):
        return true_L(D, M, n, spectrum, n_iter) / 3

    monkeypatch.setattr(coding, "_lipschitz", short)
    A, _ = coding._sparse_encode(X, D, lam=0.2, penalty="tree_l2", tree=tree, mask=M,
                                 max_iter=300, tol=0.0, batch_size=4096)
    f = 0.5 * np.sum(M * (A @ D - X) ** 2, axis=1) + 0.2 * penalty_value(A.T, penalty="tree_l2", tree=tree)
    f0 = 0.5 * np.sum(M * X**2, axis=1)
    assert np.all(f <= f0)
    ref_w, _ = coding._sparse_encode(X, D, lam=0.2, penalty="tree_l2", tree=tree, mask=M,
                                     max_iter=5000, tol=0.0, batch_size=4096)
    np.testing.assert_allclose(A, ref_w, atol=1e-5)


def test_fast_products_match(problem):
    # inpainting codes with the unmasked products in float32
    from restore.coding import _sparse_encode

    tree, D, X = problem
    A, _ = _sparse_encode(X, D, lam=0.2, penalty="tree_l2", tree=tree, max_iter=500, tol=0.0, batch_size=4096)
    A32, _ = _sparse_encode(X, D, lam=0.2, penalty="tree_l2", tree=tree,
                            max_iter=500, tol=0.0, batch_size=4096, fast=True)
    np.testing.assert_allclose(A32, A, atol=1e-5)


def test_batches_warm_start_and_progress(problem):
    tree, D, X = problem
    calls = []
    A = sparse_encode(X, D, lam=0.2, tree=tree, batch_size=100, progress=lambda d, t: calls.append((d, t)))
    assert calls == [(1, 3), (2, 3), (3, 3)]
    A_warm = sparse_encode(X, D, lam=0.2, tree=tree, init=A, max_iter=5)
    assert objective(X, D, A_warm, 0.2, "tree_l2", tree) <= objective(X, D, A, 0.2, "tree_l2", tree) * (1 + 1e-6)

    def cancel(done, total):
        raise Cancelled

    with pytest.raises(Cancelled):
        sparse_encode(X, D, lam=0.2, tree=tree, batch_size=100, progress=cancel)


def test_errors(problem):
    tree, D, X = problem
    with pytest.raises(ValueError, match="features per atom"):
        sparse_encode(X[:, :5], D, lam=0.1, tree=tree)
    with pytest.raises(ValueError, match="the tree has"):
        sparse_encode(X, D[:5], lam=0.1, tree=tree)
    with pytest.raises(ValueError, match="NaN"):
        sparse_encode(np.full_like(X, np.nan), D, lam=0.1, tree=tree)
    with pytest.raises(ValueError, match="lam must be"):
        sparse_encode(X, D, lam=-1, tree=tree)
    with pytest.raises(ValueError, match="mask must have the shape"):
        sparse_encode(X, D, lam=0.1, tree=tree, mask=np.ones(3, bool))
    with pytest.raises(ValueError, match="two-dimensional"):
        sparse_encode(X[0], D, lam=0.1, tree=tree)


@pytest.mark.parametrize("loss", ["square", "square-missing"])
def test_matches_spams_fistaTree(loss, rng):
    spams = pytest.importorskip("spams")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from _spams import spams_tree

    tree = Tree.balanced((10, 3, 3))
    k, m = tree.n_vars, 64
    D = rng.standard_normal((k, m))
    D /= np.linalg.norm(D, axis=1, keepdims=True)
    X = rng.standard_normal((200, m))
    M = rng.random(X.shape) > 0.5 if loss == "square-missing" else None
    lam = 0.1
    st, perm = spams_tree(tree)
    Xs = X.T if M is None else np.where(M, X, np.nan).T
    W = spams.fistaTree(np.asfortranarray(Xs), np.asfortranarray(D[perm].T), np.zeros((k, X.shape[0]), order="F"),
                        st, numThreads=1, lambda1=lam, regul="tree-l2", loss=loss, max_it=1000, tol=1e-8, it0=10000)
    A_spams = np.empty((X.shape[0], k))
    A_spams[:, perm] = W.T
    A = sparse_encode(X, D, lam=lam, tree=tree, mask=M)
    f, f_spams = objective(X, D, A, lam, "tree_l2", tree, M), objective(X, D, A_spams, lam, "tree_l2", tree, M)
    assert abs(f - f_spams) <= 1e-4 * f_spams


@pytest.mark.parametrize("masked", [False, True])
def test_one_lam_per_signal_codes_each_signal_with_its_own(problem, rng, masked):
    # the inpainting scales lam by each patch's share of known pixels (internal API)
    from restore.coding import _sparse_encode

    tree, D, X = problem
    X = X[:40]
    M = rng.random(X.shape) > 0.4 if masked else None
    lams = rng.uniform(0.05, 0.6, len(X))
    A = _sparse_encode(X, D, lam=lams, penalty="tree_l2", tree=tree, mask=M, max_iter=3000, tol=0.0, batch_size=16)[0]
    for i in (0, 17, 39):
        Mi = None if M is None else M[i:i + 1]
        ref = _sparse_encode(X[i:i + 1], D, lam=float(lams[i]), penalty="tree_l2", tree=tree, mask=Mi,
                             max_iter=3000, tol=0.0, batch_size=16)[0]
        np.testing.assert_allclose(A[i], ref[0], atol=1e-5)  # masked products run in float32


@pytest.mark.parametrize("masked", [False, True])
def test_codes_do_not_depend_on_the_threads(masked, rng, monkeypatch):
    # a laptop, a cluster node or a busy shared machine: the same signals get the same codes, to the bit,
    # whatever the number of our threads (RESTORE_NUM_THREADS) and of BLAS's
    from threadpoolctl import threadpool_limits

    tree = Tree.balanced((10, 3, 3))  # the shipped dictionary's 131 atoms of 8x8 patches
    D = rng.standard_normal((tree.n_vars, 64))
    D /= np.linalg.norm(D, axis=1, keepdims=True)
    X = rng.standard_normal((1500, 64))
    M = rng.random(X.shape) > 0.3 if masked else None
    codes = []
    for ours, blas in (("1", 1), ("2", 2), ("3", 1), ("2", 1)):
        monkeypatch.setenv("RESTORE_NUM_THREADS", ours)
        with threadpool_limits(blas, user_api="blas"):
            codes.append(sparse_encode(X, D, lam=0.1, tree=tree, mask=M))
    for c in codes[1:]:
        np.testing.assert_array_equal(c, codes[0])


def _blas_threads() -> list[int]:
    """Threads of each pthreads BLAS (an OpenMP build's count is each thread's own: SPAMS's OpenBLAS)."""
    from threadpoolctl import threadpool_info

    return [i["num_threads"] for i in threadpool_info()
            if i["user_api"] == "blas" and i.get("threading_layer") != "openmp"]


def test_blas_is_on_one_thread_in_a_call_from_another_thread_after_one_from_the_main_thread(problem):
    # threadpoolctl (3.8 on) lets one thread at a time set OpenBLAS's threads, and only its context managers give
    # that up: a first call in the main thread kept it, and the limit of every later call from another thread
    # (napari's workers, Dask's) silently did nothing. OpenBLAS's threads then spun beside ours
    import threading

    tree, D, X = problem
    before = _blas_threads()
    sparse_encode(X, D, lam=0.2, tree=tree)  # in the main thread, first
    seen = []

    def progress(done, total):
        seen.append(_blas_threads())

    worker = threading.Thread(target=sparse_encode, args=(X, D), kwargs={"lam": 0.2, "tree": tree,
                                                                           "progress": progress})
    worker.start()
    worker.join()
    assert seen and all(n == [1] * len(before) for n in seen)
    assert _blas_threads() == before
    sparse_encode(X, D, lam=0.2, tree=tree, progress=progress)  # the main thread again, after the worker's call
    assert seen[-1] == [1] * len(before) and _blas_threads() == before


def test_overlapping_calls_keep_blas_at_one_thread_and_restore_it(problem):
    # the coders of two threads overlap (A starts, B starts, A ends, B ends): B must still code with BLAS on one
    # thread after A ended, and the caller's BLAS threads must be back as they were once both ended
    import threading

    tree, D, X = problem
    before = _blas_threads()
    a_inside, b_inside, a_done = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def a_progress(done, total):
        a_inside.set()
        assert b_inside.wait(10)

    def b_progress(done, total):
        b_inside.set()
        assert a_done.wait(10)
        seen["b after a"] = _blas_threads()

    def run_a():
        sparse_encode(X, D, lam=0.2, tree=tree, progress=a_progress)
        a_done.set()

    a = threading.Thread(target=run_a)
    a.start()
    assert a_inside.wait(10)
    sparse_encode(X, D, lam=0.2, tree=tree, progress=b_progress)
    a.join()
    assert seen["b after a"] == [1] * len(before)
    assert _blas_threads() == before
