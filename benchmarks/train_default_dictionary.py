"""Train the generic tree dictionaries shipped in ``restore/data/``.

8x8 patches (grey: 64 features; colour: 8x8x3 = 192) of the bundled
``sample_images/``, centred per channel (the same centring as
:func:`restore.inpaint`) and scaled to unit norm, near-flat patches skipped;
tree (10, 2, 2), tree_l2, lam 0.1, two epochs. Deterministic.

    python benchmarks/train_default_dictionary.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from skimage import io

from restore import TreeDictionaryLearning
from restore.inpainting import _centre, _gather

ROOT = Path(__file__).resolve().parents[1]


def training_patches(n_ch: int, per_image: int, rng: np.random.Generator) -> np.ndarray:
    out = []
    for path in sorted((ROOT / "sample_images").glob("*.png")):
        im = io.imread(path)
        if im.ndim == 2:
            im = np.stack([im] * 3, axis=-1)
        im = im[..., :3] / 255.0
        if n_ch == 1:
            im = im @ np.array([0.2125, 0.7154, 0.0721])[:, None]
        known = np.ones(im.shape[:2], bool)
        r = rng.integers(0, im.shape[0] - 8, per_image)
        c = rng.integers(0, im.shape[1] - 8, per_image)
        P, K = _gather(im, known, r, c, 8)
        Z, _, scale = _centre(P, K, n_ch)
        out.append(Z[scale > 0.05])
    return np.concatenate(out)


def main() -> None:
    for n_ch, name in ((1, "dict_grey_8x8.npz"), (3, "dict_colour_8x8.npz")):
        Z = training_patches(n_ch, 12000, np.random.default_rng(0))
        est = TreeDictionaryLearning((10, 2, 2), penalty="tree_l2", lam=0.1, n_epochs=2, rng=0).fit(Z)
        est.save(ROOT / "restore" / "data" / name)
        print(f"{name}: {est.components_.shape[0]} atoms of {est.components_.shape[1]} features, "
              f"{len(Z)} training patches")


if __name__ == "__main__":
    main()
