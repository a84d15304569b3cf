"""Dictionary learning with missing entries: TreeDictionaryLearning's ``mask`` and learn_dictionary on masked images."""

import numpy as np
import pytest
from scipy.optimize import minimize

from restore import Tree, TreeDictionaryLearning, default_dictionary, learn_dictionary, sparse_encode


def planted(rng, n=2000, m=36, branching=(4, 2), noise=0.01):
    """Signals of a planted tree dictionary (rows unit norm), one random root-to-leaf path active in each."""
    tree = Tree.balanced(branching)
    D = rng.standard_normal((tree.n_vars, m))
    D /= np.linalg.norm(D, axis=1, keepdims=True)
    codes = np.zeros((n, tree.n_vars))
    for i in range(n):
        node = 0
        while True:
            codes[i, node] = rng.normal() + np.sign(rng.normal())
            kids = tree.children(node)
            if len(kids) == 0:
                break
            node = int(rng.choice(kids))
    return codes @ D + noise * rng.standard_normal((n, m)), D


def perturbed(D, rng, size=0.6):
    """Atoms at a cosine of about 0.8 from D's (a warm start, as the shipped dictionary is for a photo)."""
    D0 = D + size * rng.standard_normal(D.shape) / np.sqrt(D.shape[1])
    return D0 / np.linalg.norm(D0, axis=1, keepdims=True)


@pytest.mark.parametrize("seed", [0, 1])
def test_half_the_entries_missing_recovers_the_planted_atoms_nearly_as_well(seed):
    rng = np.random.default_rng(seed)
    X, D = planted(rng)
    D0 = perturbed(D, rng)
    M = rng.random(X.shape) < 0.5

    def worst_cosine(mask):
        est = TreeDictionaryLearning((4, 2), lam=0.1, n_epochs=3, batch_size=128, dict_init=D0, random_state=0)
        return float(np.min(np.sum(est.fit(X, mask=mask).components_ * D, axis=1)))

    start = float(np.min(np.sum(D0 * D, axis=1)))
    complete, half = worst_cosine(None), worst_cosine(M)
    assert start < 0.85 and complete > 0.96
    assert half > complete - 0.02, (start, complete, half)


def test_coding_a_masked_signal_is_coding_its_known_entries_over_the_known_rows():
    rng = np.random.default_rng(3)
    X, D = planted(rng, n=40)
    est = TreeDictionaryLearning((4, 2), lam=0.05, max_code_iter=5000, tol=1e-12, dict_init=D, random_state=0).fit(X)
    np.testing.assert_array_equal(est.components_.shape, D.shape)
    M = rng.random(X.shape) < 0.6
    codes = est.transform(X, mask=M)
    for i in range(len(X)):  # each signal alone, over the atoms cut to its known entries
        ref = sparse_encode(X[i:i + 1, M[i]], est.components_[:, M[i]], lam=0.05, tree=est.tree_, max_iter=5000,
                            tol=1e-12)
        np.testing.assert_allclose(codes[i], ref[0], atol=1e-5)


def test_each_entry_of_an_atom_is_fitted_to_the_signals_that_know_it():
    # one mini-batch from a given dictionary: each atom in turn (the ones before it updated) minimises the
    # squared error on the known entries only, over the unit ball, codes fixed. Filling the missing entries with
    # the current reconstruction instead pulls the atoms back towards the dictionary they started from.
    rng = np.random.default_rng(4)
    X, D = planted(rng, n=120, m=12, branching=(2, 2))
    D0 = perturbed(D, rng, size=1.0)
    M = rng.random(X.shape) < 0.5
    est = TreeDictionaryLearning((2, 2), lam=0.05, max_code_iter=5000, tol=1e-12, dict_init=D0, random_state=0)
    learned = est.partial_fit(X, mask=M).components_
    codes = sparse_encode(X, D0, lam=0.05, tree=Tree.balanced((2, 2)), mask=M, max_iter=5000, tol=1e-12)
    ref = D0.copy()
    for j in range(len(ref)):
        rest = codes @ ref - np.outer(codes[:, j], ref[j])

        def loss(d, j=j, rest=rest):
            r = M * (X - rest - np.outer(codes[:, j], d))
            return 0.5 * np.sum(r * r), -(codes[:, j] @ r)

        res = minimize(loss, ref[j], jac=True, method="SLSQP", options={"ftol": 1e-14, "maxiter": 500},
                       constraints=[{"type": "ineq", "fun": lambda d: 1.0 - d @ d, "jac": lambda d: -2.0 * d}])
        ref[j] = res.x
    np.testing.assert_allclose(learned, ref, atol=2e-3)


def test_the_values_at_missing_entries_are_never_read():
    rng = np.random.default_rng(5)
    X, _ = planted(rng, n=600)
    M = rng.random(X.shape) < 0.5
    garbage = np.where(M, X, 1e3 * rng.standard_normal(X.shape))
    a = TreeDictionaryLearning((4, 2), lam=0.1, random_state=0).fit(np.where(M, X, 0.0), mask=M)
    b = TreeDictionaryLearning((4, 2), lam=0.1, random_state=0).fit(garbage, mask=M)
    np.testing.assert_allclose(a.components_, b.components_, atol=1e-6)


def test_partial_fit_after_save_and_load_continues_the_same_statistics(tmp_path):
    rng = np.random.default_rng(6)
    X, _ = planted(rng, n=512)
    M = rng.random(X.shape) < 0.6
    est = TreeDictionaryLearning((4, 2), lam=0.1, random_state=0).partial_fit(X[:256], mask=M[:256])
    est.save(tmp_path / "d.npz")
    loaded = TreeDictionaryLearning.load(tmp_path / "d.npz")
    est.partial_fit(X[256:], mask=M[256:])
    loaded.partial_fit(X[256:], mask=M[256:])
    np.testing.assert_allclose(loaded.components_, est.components_, atol=1e-10)


def stripes(shape=(96, 96), period=5.3, angle=0.7):
    """A texture unlike the shipped dictionary's generic atoms: oblique stripes, grey in [0.2, 0.8]."""
    y, x = np.mgrid[0:shape[0], 0:shape[1]]
    return 0.5 + 0.3 * np.sin(2 * np.pi * (x * np.cos(angle) + y * np.sin(angle)) / period)


def test_random_loss_leaves_no_complete_patch_and_still_adapts_the_dictionary():
    rng = np.random.default_rng(7)
    img = stripes()
    missing = rng.random(img.shape) < 0.7  # no 8x8 patch is complete
    est = learn_dictionary(np.where(missing, 0.0, img), masks=missing, n_patches=3000, init=default_dictionary(),
                           lam=default_dictionary().lam, rng=0)
    # the true patches, complete, centred and unit norm, coded over each dictionary
    from numpy.lib.stride_tricks import sliding_window_view
    P = sliding_window_view(img, (8, 8))[::3, ::3].reshape(-1, 64)
    Z = P - P.mean(axis=1, keepdims=True)
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)

    def error(dico):
        codes = dico.set_params(lam=0.02).transform(Z)
        return np.linalg.norm(codes @ dico.components_ - Z) / np.linalg.norm(Z)

    assert error(est) < 0.7 * error(default_dictionary())


def test_inpaint_adapts_to_text_not_to_random_loss_and_counts_the_patches_it_would_draw():
    from restore.inpainting.dictionary import should_adapt

    rng = np.random.default_rng(8)
    random_loss = rng.random((200, 200)) < 0.7
    adapt, n = should_adapt(random_loss, 8)
    assert not adapt and n > 10000  # learn_dictionary could draw from 193**2 - a few patches
    strokes = np.zeros((200, 200), bool)
    strokes[::20, :] = True
    strokes |= rng.random(strokes.shape) < 0.002  # inpaint's held-out pixels
    adapt, n = should_adapt(strokes, 8)
    assert adapt and n == 193 * 193


@pytest.mark.parametrize("method", ["fit", "partial_fit", "transform"])
def test_a_mask_that_is_not_true_and_false_is_refused_naming_it(method):
    rng = np.random.default_rng(9)
    X, _ = planted(rng, n=300)
    est = TreeDictionaryLearning((4, 2), lam=0.1, random_state=0).fit(X)
    weights = rng.random(X.shape)  # weights are no mask: astype(bool) would take all but exact zeros as known
    for bad in (weights, np.where(weights < 0.5, np.nan, 1.0), 2 * (weights < 0.5)):
        with pytest.raises(ValueError, match=r"mask must be boolean \(True where an entry is known\).*got"):
            getattr(est, method)(X, mask=bad)
    getattr(est, method)(X, mask=(weights < 0.5).astype(np.uint8))  # 0 and 1 are fine
