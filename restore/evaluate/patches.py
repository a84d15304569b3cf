"""Patch reconstruction with missing pixels, tree vs flat dictionary (Jenatton et al.'s Table 2)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .report import csv_text, patches_table
from .runner import OutputFolder

__all__ = ["PATCH_COLUMNS", "evaluate_patches"]

#: The tree of the paper's Table 2 protocol (71 atoms), so that its numbers compare with the paper's.
TABLE2_BRANCHING = (10, 2, 2)
PATCH_COLUMNS = ("method", "missing", "error", "learn_lam", "code_lam")


def _grey_patches(paths: Sequence[Path], n: int, rng: np.random.Generator, size: int = 8) -> np.ndarray:
    """Random 8x8 grey patches, centred, unit norm, near-flat ones skipped."""
    from skimage import color, io
    from skimage.util import img_as_float

    out = []
    per = -(-n // len(paths))
    for path in paths:
        im = io.imread(path)
        g = color.rgb2gray(im[..., :3]) if im.ndim == 3 else img_as_float(im)
        r = rng.integers(0, g.shape[0] - size, per * 2)
        c = rng.integers(0, g.shape[1] - size, per * 2)
        P = np.stack([g[i:i + size, j:j + size].ravel() for i, j in zip(r, c, strict=True)])
        P -= P.mean(axis=1, keepdims=True)
        P = P[np.linalg.norm(P, axis=1) > 0.1][:per]
        out.append(P / np.linalg.norm(P, axis=1, keepdims=True))
    return np.concatenate(out)[:n]


def _patch_error(est, X: np.ndarray, M: np.ndarray, lam: float) -> float:
    from ..coding import sparse_encode

    A = sparse_encode(X, est.components_, lam=lam, penalty=est.penalty, tree=est.tree_, mask=M, max_iter=200)
    return 100.0 * float(np.mean(np.sum(((A @ est.components_ - X) * ~M) ** 2, axis=1)))


def evaluate_patches(
    train: Sequence[str | os.PathLike],
    test: Sequence[str | os.PathLike],
    out_dir: str | os.PathLike,
    *,
    branching: Sequence[int] = TABLE2_BRANCHING,
    missing: Sequence[float] = (0.5, 0.6, 0.7, 0.8, 0.9),
    n_train: int = 50000,
    n_test: int = 5000,
    learn_lams: Sequence[float] = (0.05, 0.1, 0.2),
    code_lams: Sequence[float] = (0.01, 0.02, 0.05, 0.1, 0.2),
    n_epochs: int = 1,
    seed: int = 0,
    force: bool = False,
) -> list[dict]:
    """Patch reconstruction with missing pixels, tree vs flat dictionary (Table 2 of Jenatton et al.).

    8x8 grey patches, centred and unit norm. A tree dictionary
    (``branching``, tree_l2) and a flat one with as many atoms (l1) are
    learned on patches of the ``train`` images; on patches of the ``test``
    images a share of the pixels is removed at random, codes are computed on
    the known pixels, and the error is the squared error on the missing
    pixels of a patch, x 100, averaged over patches. The lam of learning
    and of coding are picked per method and missing rate on a validation
    half of the test patches; the error is reported on the other half.

    Parameters
    ----------
    train, test : sequences of paths
        Image files.
    out_dir : path
        Output folder: ``results.csv`` and ``table.md``.
    branching : sequence of int
        Tree of atoms.
    missing : sequence of float
        Shares of missing pixels.
    n_train, n_test : int
        Training patches; validation and test patches (each).
    learn_lams, code_lams : sequences of float
        Grids of lam for learning and for coding.
    n_epochs : int
        Learning epochs.
    seed : int
        Randomness of patches, masks and learning.
    force : bool
        Replace previous results in ``out_dir``.

    Returns
    -------
    list of dict
        Rows ``method, missing, error, learn_lam, code_lam``.
    """
    from ..learning import TreeDictionaryLearning
    from ..tree import Tree

    train, test = [Path(p) for p in train], [Path(p) for p in test]
    for p in (*train, *test):
        if not p.is_file():
            raise ValueError(f"image {str(p)!r} does not exist")
    out = Path(out_dir)
    config = {"task": "patches", "train": [str(p) for p in train], "test": [str(p) for p in test],
              "branching": list(branching), "missing": list(missing), "n_train": n_train, "n_test": n_test,
              "seed": seed}
    with OutputFolder(out, config, force=force, input_dir=train[0].parent) as folder:
        rng = np.random.default_rng(seed)
        Xtr = _grey_patches(train, n_train, rng)
        Xte = _grey_patches(test, 2 * n_test, rng)
        Xval, Xte = Xte[:n_test], Xte[n_test:]
        k = Tree.balanced(branching).n_vars
        rows = []
        for method, kw in (("tree", {"penalty": "tree_l2"}), ("flat", {"penalty": "l1", "n_atoms": k})):
            ests = [TreeDictionaryLearning(tuple(branching), lam=lam, n_epochs=n_epochs, random_state=seed, **kw)
                    .fit(Xtr) for lam in learn_lams]
            for rate in missing:
                mval = np.random.default_rng([seed, int(rate * 1000)]).random(Xval.shape) >= rate
                mte = np.random.default_rng([seed, int(rate * 1000), 1]).random(Xte.shape) >= rate
                best = min(((e, lam) for e in ests for lam in code_lams),
                           key=lambda el, mval=mval: _patch_error(el[0], Xval, mval, el[1]))
                rows.append({"method": method, "missing": float(rate),
                             "error": _patch_error(best[0], Xte, mte, best[1]),
                             "learn_lam": float(best[0].lam), "code_lam": float(best[1])})
        folder.write_text("results.csv", csv_text(rows, PATCH_COLUMNS))
        folder.write_text("table.md", patches_table(rows, k))
        folder.finish()
    return rows
