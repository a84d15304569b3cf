"""Train the generic tree dictionary shipped in ``restore/data/``.

8x8 luminance patches (64 features) of the bundled ``sample_images/``
through :func:`restore.learn_dictionary` (the luminance, centring and
scaling :func:`restore.inpaint` uses); tree (10, 3, 3) of 131 atoms, tree_l2, lam 0.1,
two epochs. Deterministic for a given version of the learning code.

The shipped file is what the inpainting defaults are measured with, so the
output path is asked for, never assumed::

    python benchmarks/train_default_dictionary.py --out restore/data/dict_grey_8x8.npz
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from skimage import io

from restore import learn_dictionary

ROOT = Path(__file__).resolve().parents[1]


def load_images() -> list[np.ndarray]:
    out = []
    for path in sorted((ROOT / "sample_images").glob("*.png")):
        im = io.imread(path)
        if im.ndim == 2:
            im = np.stack([im] * 3, axis=-1)
        out.append(im[..., :3] / 255.0)
    return out


def main() -> None:
    """Learn the dictionary and save it where ``--out`` says."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="the .npz file to write (replaced if it exists)")
    args = ap.parse_args()
    est = learn_dictionary(load_images(), branching=(10, 3, 3), penalty="tree_l2", lam=0.1, n_patches=60000,
                           n_epochs=2, channel_axis=-1, rng=0)
    est.save(args.out)
    print(f"{args.out}: {est.components_.shape[0]} atoms of {est.components_.shape[1]} features")


if __name__ == "__main__":
    main()
