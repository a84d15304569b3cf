"""Patch reconstruction with missing pixels: tree vs flat dictionary (JMLR 2011, Table 2).

Runs :func:`restore.evaluate.evaluate_patches` (the protocol is documented
there) on photographs of ``../shared/images``: train on some, test on the
others, and prints the table. Same as
``restore evaluate --task patches --train ... --test ...``.

    python benchmarks/bench_table2.py [--branching 10 2 2] [--n-train 50000]

Reference (../shared/images/README.md, SPAMS-family solver, same protocol):
flat 71 atoms 13.97 19.83 28.09 41.84 67.90; tree (10,2,2) 12.51 17.96 25.78
38.00 57.29 at 50..90% missing.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from restore.evaluate import evaluate_patches

SHARED = Path(__file__).resolve().parents[2] / "shared" / "images"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--branching", type=int, nargs="+", default=[10, 2, 2])
    ap.add_argument("--n-train", type=int, default=50000)
    ap.add_argument("--n-test", type=int, default=5000)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--learn-lams", type=float, nargs="+", default=[0.05, 0.1, 0.2])
    ap.add_argument("--code-lams", type=float, nargs="+", default=[0.005, 0.01, 0.02, 0.05, 0.1, 0.2])
    ap.add_argument("--train", nargs="+", default=["barbara", "kodim23", "monarch", "sail", "seeding_crop"])
    ap.add_argument("--test", nargs="+", default=["astronaut", "coffee", "chelsea", "tulips"])
    args = ap.parse_args()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        evaluate_patches([SHARED / f"{n}.png" for n in args.train], [SHARED / f"{n}.png" for n in args.test], out,
                         branching=args.branching, n_train=args.n_train, n_test=args.n_test, n_epochs=args.epochs,
                         learn_lams=args.learn_lams, code_lams=args.code_lams)
        print((Path(out) / "table.md").read_text())
    print(f"total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    from _report import record_results  # the printed tables also go to benchmarks/results/bench_table2.md

    with record_results("bench_table2"):
        main()
