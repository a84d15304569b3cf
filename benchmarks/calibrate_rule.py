"""Calibrate the ``lam='rule'`` table of :mod:`restore.denoise`.

Runs the oracle half of the Table 1 protocol on a folder of images (default
``sample_images/``) and prints, per penalty and sigma, the median over images,
wavelets and draws of the best ``t``: ``lam = t * sigma`` for the convex
penalties, ``lam = (t * sigma)**2 / 2`` for ``l0`` and ``tree_l0``. Paste the
rows into ``_RULE_T``.

    python benchmarks/calibrate_rule.py [IMAGES] [--draws 2]
"""

from __future__ import annotations

import argparse
import tempfile

import numpy as np

from restore.evaluate import PAPER_ORDER, evaluate_denoising


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("images", nargs="?", default="sample_images")
    ap.add_argument("--draws", type=int, default=2)
    args = ap.parse_args()
    sigmas = (5.0, 10.0, 25.0, 50.0, 100.0)
    with tempfile.TemporaryDirectory() as out:
        rows = evaluate_denoising(args.images, out, sigmas=sigmas, wavelets=("haar", "db3"), lam_modes=("oracle",),
                                  n_draws=args.draws, bayes=False, nonlocal_tree=False, progress=True)
    print("sigma:", " ".join(f"{s:6g}" for s in sigmas))
    for pen in PAPER_ORDER:
        ts = []
        for s in sigmas:
            lams = np.array([r["lam"] for r in rows if r["method"] == pen and r["sigma"] == s])
            t = np.sqrt(2 * lams) / s if pen in ("l0", "tree_l0") else lams / s
            ts.append(float(np.median(t)))
        print(f'    "{pen}": np.array([{", ".join(f"{t:.3f}" for t in ts)}]),')


if __name__ == "__main__":
    from _report import record_results  # the printed tables also go to benchmarks/results/calibrate_rule.md

    with record_results("calibrate_rule"):
        main()
