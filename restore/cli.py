"""Command line: ``restore denoise`` and ``restore evaluate``.

Thin: parses arguments, reads and writes files, calls the library. Outputs
are written atomically and never replace an input file.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

from . import PENALTIES
from ._io import atomic_path

__all__ = ["main"]


def _positive_float(text: str) -> float:
    v = float(text)
    if not np.isfinite(v) or v < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return v


def _lam_arg(text: str) -> float | str:
    if text in ("sure", "rule"):
        return text
    try:
        return _positive_float(text)
    except (ValueError, argparse.ArgumentTypeError):
        raise argparse.ArgumentTypeError(f"expected 'sure', 'rule' or a number >= 0, got {text!r}") from None


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (b.exists() and os.path.samefile(a, b))
    except OSError:
        return False


def read_image(path: Path) -> np.ndarray:
    """Read an image file (PNG, TIFF, JPEG...) as stored, with a clear error."""
    import imageio.v3 as iio

    if not path.is_file():
        raise SystemExit(f"error: input image {str(path)!r} does not exist")
    data = path.read_bytes()  # readers get bytes: no file handle left open on failure
    try:
        return np.asarray(iio.imread(data, extension=path.suffix.lower() or None))
    except Exception as exc:  # noqa: BLE001 - report any reader failure plainly
        raise SystemExit(f"error: cannot read {str(path)!r} as an image: {exc}") from None


def write_image_atomic(path: Path, image: np.ndarray, inputs: list[Path], force: bool) -> None:
    """Write ``image`` to ``path`` through a temporary file in the same folder."""
    from skimage import io

    for src in inputs:
        if _same_file(src, path):
            raise SystemExit(f"error: output {str(path)!r} is the input file; choose another name")
    if path.exists() and not force:
        raise SystemExit(f"error: {str(path)!r} exists; pass --force to replace it")
    with atomic_path(path) as tmp:
        io.imsave(tmp, image, check_contrast=False)


def _to_float(image: np.ndarray) -> tuple[np.ndarray, float]:
    """Integer images to float in [0, 1]; return the scale of the stored values."""
    if image.dtype.kind in "ui":
        scale = float(np.iinfo(image.dtype).max)
        return image.astype(np.float32) / scale, scale
    if image.dtype.kind == "b":
        return image.astype(np.float32), 1.0
    return image, 1.0


def _from_float(image: np.ndarray, like: np.ndarray, scale: float) -> np.ndarray:
    if like.dtype.kind in "ui":
        info = np.iinfo(like.dtype)
        return np.clip(np.rint(image * scale), info.min, info.max).astype(like.dtype)
    if like.dtype.kind == "b":
        return image > 0.5
    return image.astype(like.dtype)


def cmd_denoise(args: argparse.Namespace) -> int:
    from . import denoise_wavelet_tree

    src, dst = Path(args.input), Path(args.output)
    raw = read_image(src)
    img, scale = _to_float(raw)
    alpha = None
    channel_axis = None
    if img.ndim == 3 and img.shape[-1] in (3, 4):
        if img.shape[-1] == 4:
            img, alpha = img[..., :3], raw[..., 3:]
        channel_axis = -1
    elif img.ndim != 2:
        raise SystemExit(f"error: expected a grey or RGB(A) image, got shape {raw.shape}")
    sigma = None if args.sigma is None else args.sigma / scale
    lam = args.lam if isinstance(args.lam, str) or args.lam is None else args.lam / scale
    try:
        out = denoise_wavelet_tree(img, sigma=sigma, lam=lam, penalty=args.penalty, wavelet=args.wavelet,
                                   level=args.level, penalize_approx=args.penalize_approx,
                                   cycle_spins=args.cycle_spins, channel_axis=channel_axis)
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    out = _from_float(out, raw, scale)
    if alpha is not None:
        out = np.concatenate([out, alpha], axis=-1)
    write_image_atomic(dst, out, [src], args.force)
    print(f"wrote {dst}")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from .evaluate import evaluate_denoising

    try:
        evaluate_denoising(args.images, args.out, sigmas=args.sigmas, wavelets=args.wavelets,
                           penalties=args.penalties, lam_modes=args.lam, n_draws=args.draws, seed=args.seed,
                           bayes=not args.no_bayes, n_jobs=args.jobs, scheduler=args.scheduler,
                           force=args.force, progress=not args.quiet)
    except (ValueError, FileExistsError) as exc:
        raise SystemExit(f"error: {exc}") from None
    except KeyboardInterrupt:
        print(f"\ninterrupted: finished units are kept in {args.out}; run the same command again to resume",
              file=sys.stderr)
        return 130
    out = Path(args.out)
    print((out / "table.md").read_text())
    print(f"wrote {out / 'results.csv'}, {out / 'table.md'}, {out / 'psnr.png'}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``restore`` command."""
    parser = argparse.ArgumentParser(prog="restore", description="Image restoration with tree-structured sparsity.")
    sub = parser.add_subparsers(dest="command", required=True)

    d = sub.add_parser("denoise", help="denoise one image file",
                       description="Denoise an image (grey or RGB; 8- or 16-bit PNG/TIFF/JPEG) by wavelet "
                                   "quad-tree shrinkage; writes the same bit depth.")
    d.add_argument("input", help="noisy image file")
    d.add_argument("output", help="output image file (never the input)")
    d.add_argument("--sigma", type=_positive_float, default=None,
                   help="noise standard deviation in the file's pixel units (e.g. 0-255 for 8-bit); "
                        "estimated if omitted")
    d.add_argument("--lam", type=_lam_arg, default=None,
                   help="'sure', 'rule' or a number in pixel units (default: sure for convex penalties)")
    d.add_argument("--penalty", choices=PENALTIES, default="tree_l2")
    d.add_argument("--wavelet", default="db3")
    d.add_argument("--level", type=int, default=None)
    d.add_argument("--cycle-spins", type=int, default=0)
    d.add_argument("--penalize-approx", action="store_true")
    d.add_argument("--force", action="store_true", help="replace OUTPUT if it exists")
    d.set_defaults(func=cmd_denoise)

    e = sub.add_parser("evaluate", help="batch PSNR evaluation (Table 1 protocol)",
                       description="PSNR of every penalty on a folder of images with synthetic noise; writes "
                                   "results.csv, table.md and psnr.png to OUT.")
    e.add_argument("images", nargs="?", default="sample_images", help="folder of images (default: sample_images)")
    e.add_argument("--out", default="results/denoise", help="output folder (default: results/denoise)")
    e.add_argument("--sigmas", type=float, nargs="+", default=[5, 10, 25, 50, 100])
    e.add_argument("--wavelets", nargs="+", default=["haar", "db3"])
    e.add_argument("--penalties", nargs="+", choices=PENALTIES, default=["l0", "tree_l0", "l1", "tree_l2", "tree_linf"])
    e.add_argument("--lam", nargs="+", choices=["oracle", "auto"], default=["oracle", "auto"])
    e.add_argument("--draws", type=int, default=5)
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--no-bayes", action="store_true", help="skip scikit-image's BayesShrink reference column")
    e.add_argument("--jobs", type=int, default=None, help="local worker processes (default: all CPUs)")
    e.add_argument("--scheduler", default=None, help="dask.distributed scheduler address, e.g. tcp://host:8786")
    e.add_argument("--force", action="store_true", help="replace the results of a previous run in OUT")
    e.add_argument("--quiet", action="store_true", help="no progress bar")
    e.set_defaults(func=cmd_evaluate)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``restore`` command."""
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
