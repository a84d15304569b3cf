"""Command line: ``restore denoise``, ``inpaint``, ``learn`` and ``evaluate``.

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


def check_output(path: Path, inputs: list[Path], force: bool) -> None:
    """Refuse an output that is an input file, or that exists without ``force``."""
    for src in inputs:
        if _same_file(src, path):
            raise SystemExit(f"error: output {str(path)!r} is the input file; choose another name")
    if path.exists() and not force:
        raise SystemExit(f"error: {str(path)!r} exists; pass --force to replace it")


def write_image_atomic(path: Path, image: np.ndarray, inputs: list[Path], force: bool) -> None:
    """Write ``image`` to ``path`` through a temporary file in the same folder."""
    from skimage import io

    check_output(path, inputs, force)
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
    check_output(dst, [src], args.force)
    img, scale, alpha, channel_axis = _split_alpha(raw)
    sigma = None if args.sigma is None else args.sigma / scale
    lam = args.lam if isinstance(args.lam, str) or args.lam is None else args.lam / scale
    try:
        out = denoise_wavelet_tree(img, sigma=sigma, lam=lam, penalty=args.penalty, wavelet=args.wavelet,
                                   level=args.level, penalize_approx=args.penalize_approx,
                                   cycle_spins=args.cycle_spins, channel_axis=channel_axis)
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    write_image_atomic(dst, _with_alpha(out, raw, scale, alpha), [src], args.force)
    print(f"wrote {dst}")
    return 0


def _split_alpha(raw: np.ndarray) -> tuple[np.ndarray, float, np.ndarray | None, int | None]:
    """Float image (float32 for integers), its scale, an alpha channel kept aside, the channel axis."""
    img, scale = _to_float(raw)
    if img.ndim == 3 and img.shape[-1] in (3, 4):
        alpha = raw[..., 3:] if img.shape[-1] == 4 else None
        return img[..., :3], scale, alpha, -1
    if img.ndim == 3 and img.shape[-1] in (1, 2):  # grey (+ alpha)
        alpha = raw[..., 1:] if img.shape[-1] == 2 else None
        return img[..., 0], scale, alpha, None
    if img.ndim != 2:
        raise SystemExit(f"error: expected a grey or RGB(A) image, got shape {raw.shape}")
    return img, scale, None, None


def _with_alpha(out: np.ndarray, raw: np.ndarray, scale: float, alpha: np.ndarray | None) -> np.ndarray:
    """Back to the file's dtype, with its alpha channel (untouched) if it had one."""
    out = _from_float(out, raw, scale)
    if alpha is None:
        return out
    return np.concatenate([out if out.ndim == 3 else out[..., None], alpha], axis=-1)


def _read_mask(path: Path, shape: tuple[int, int]) -> np.ndarray:
    m = read_image(path)
    if m.ndim == 3:
        m = m[..., :3].max(axis=-1) if m.shape[-1] in (3, 4) else m[..., 0]
    if m.shape != shape:
        raise SystemExit(f"error: mask {str(path)!r} is {m.shape[1]}x{m.shape[0]}, the image is {shape[1]}x{shape[0]}")
    return m != 0


def cmd_inpaint(args: argparse.Namespace) -> int:
    from . import Cancelled, inpaint

    src, msk, dst = Path(args.image), Path(args.mask), Path(args.output)
    raw = read_image(src)
    img, scale, alpha, channel_axis = _split_alpha(raw)
    mask = _read_mask(msk, img.shape[:2])
    check_output(dst, [src, msk], args.force)  # fail before the long computation
    bar = None
    if not args.quiet:
        from tqdm.auto import tqdm

        bar = tqdm(desc="inpaint", unit="batch")

    def progress(done: int, total: int) -> None:
        if bar is not None:
            bar.total = total
            bar.n = done
            bar.refresh()

    lam = None if args.lam is None else args.lam[0] if len(args.lam) == 1 else tuple(args.lam)
    try:
        out = inpaint(img, mask, dictionary=args.dictionary, patch_size=args.patch_size, stride=args.stride,
                      n_passes=args.passes, lam=lam, channel_axis=channel_axis, progress=progress)
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    except (KeyboardInterrupt, Cancelled):
        print("\ninterrupted: nothing written", file=sys.stderr)
        return 130
    finally:
        if bar is not None:
            bar.close()
    write_image_atomic(dst, _with_alpha(out, raw, scale, alpha), [src, msk], args.force)
    print(f"wrote {dst}")
    return 0


def cmd_learn(args: argparse.Namespace) -> int:
    from . import learn_dictionary

    out = Path(args.output)
    if out.suffix != ".npz":
        raise SystemExit(f"error: the dictionary file must end in .npz, got {str(out)!r}")
    images, masks = [], []
    for p in args.images:
        img, _, _, axis = _split_alpha(read_image(Path(p)))
        images.append(img if axis is not None else img[..., None])  # grey and colour: luminance patches
    if args.masks:
        if len(args.masks) != len(images):
            raise SystemExit(f"error: give one mask per image ({len(images)} images, {len(args.masks)} masks)")
        masks = [_read_mask(Path(m), im.shape[:2]) for m, im in zip(args.masks, images, strict=True)]
    check_output(out, [Path(p) for p in args.images + (args.masks or [])], args.force)
    penalty = "l1" if args.flat else args.penalty
    try:
        est = learn_dictionary(images, masks=masks or None, patch_size=args.patch_size,
                               branching=tuple(args.branching), penalty=penalty, n_atoms=args.flat,
                               lam=args.lam, n_patches=args.n_patches, n_epochs=args.epochs,
                               channel_axis=-1, rng=args.seed)
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    est.save(out)
    print(f"wrote {out}: {est.components_.shape[0]} atoms of {est.components_.shape[1]} features")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from . import evaluate as ev

    try:
        if args.task == "denoise":
            ev.evaluate_denoising(args.images, args.out, sigmas=args.sigmas, wavelets=args.wavelets,
                                  penalties=args.penalties, lam_modes=args.lam, n_draws=args.draws, seed=args.seed,
                                  bayes=not args.no_bayes, n_jobs=args.jobs, scheduler=args.scheduler,
                                  force=args.force, progress=not args.quiet)
        elif args.task == "inpaint":
            if args.masks is None:
                raise ValueError("--task inpaint needs --masks DIR (masks named <image>_<kind>.png)")
            ev.evaluate_inpainting(args.images, args.masks, args.out, mask_kinds=args.mask_kinds,
                                   stride=args.stride, n_jobs=args.jobs or 1, scheduler=args.scheduler,
                                   force=args.force, progress=not args.quiet)
        else:
            folder = Path(args.images)
            if not folder.is_dir():
                raise ValueError(f"image folder {str(folder)!r} does not exist or is not a folder")
            files = sorted(p for p in folder.iterdir() if p.suffix.lower() in ev.IMAGE_SUFFIXES)
            train = args.train or [str(p) for p in files[0::2]]
            test = args.test or [str(p) for p in files[1::2]]
            if not train or not test:
                raise ValueError("--task patches needs training and test images (--train/--test or a folder of 2+)")
            ev.evaluate_patches(train, test, args.out, branching=args.branching, n_train=args.n_train,
                                n_test=args.n_test, seed=args.seed, force=args.force)
    except (ValueError, FileExistsError) as exc:
        raise SystemExit(f"error: {exc}") from None
    except KeyboardInterrupt:
        print(f"\ninterrupted: finished units are kept in {args.out}; run the same command again to resume",
              file=sys.stderr)
        return 130
    out = Path(args.out)
    print((out / "table.md").read_text())
    written = [p for p in ("results.csv", "table.md", "psnr.png") if (out / p).exists()]
    print(f"wrote {', '.join(str(out / p) for p in written)}")
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

    i = sub.add_parser("inpaint", help="fill the masked pixels of an image",
                       description="Inpaint IMAGE where MASK is non-zero with a tree-structured dictionary of "
                                   "patches; writes the same bit depth. Known pixels are kept exactly.")
    i.add_argument("image", help="image file (grey or RGB; 8- or 16-bit PNG/TIFF/JPEG)")
    i.add_argument("mask", help="mask image of the same size: non-zero = missing")
    i.add_argument("output", help="output image file (never an input)")
    i.add_argument("--dictionary", default=None, help="dictionary .npz from `restore learn` (default: learned "
                                                      "from the image, warm started from the shipped one)")
    i.add_argument("--patch-size", type=int, default=8)
    i.add_argument("--stride", type=int, default=4, help="step of each pass's patch grid (default 4)")
    i.add_argument("--passes", type=int, default=18,
                   help="passes of patch coding (default 18); time grows as passes / stride^2")
    i.add_argument("--lam", type=_positive_float, nargs="+", default=None, metavar="LAM",
                   help="lam of every pass, or of the first and the last (default 0.02 0.005)")
    i.add_argument("--force", action="store_true", help="replace OUTPUT if it exists")
    i.add_argument("--quiet", action="store_true", help="no progress bar")
    i.set_defaults(func=cmd_inpaint)

    learn = sub.add_parser("learn", help="learn a dictionary of patches from images",
                           description="Learn a tree-structured (or flat) dictionary of image patches; "
                                       "saves an .npz for `restore inpaint --dictionary`.")
    learn.add_argument("images", nargs="+", help="training images (all grey or all colour)")
    learn.add_argument("--out", dest="output", required=True, help="dictionary file to write (.npz)")
    learn.add_argument("--masks", nargs="+", default=None, help="per image, pixels to exclude (non-zero)")
    learn.add_argument("--branching", type=int, nargs="+", default=[10, 3, 3],
                       help="tree of atoms (default 10 3 3: 131 atoms, as the shipped dictionary)")
    learn.add_argument("--penalty", choices=["tree_l2", "tree_linf", "tree_l0"], default="tree_l2")
    learn.add_argument("--flat", type=int, default=None, metavar="N_ATOMS",
                       help="learn a flat (l1) dictionary of N_ATOMS atoms instead of a tree")
    learn.add_argument("--patch-size", type=int, default=8)
    learn.add_argument("--lam", type=_positive_float, default=0.1)
    learn.add_argument("--n-patches", type=int, default=50000)
    learn.add_argument("--epochs", type=int, default=1)
    learn.add_argument("--seed", type=int, default=0)
    learn.add_argument("--force", action="store_true", help="replace the output file if it exists")
    learn.set_defaults(func=cmd_learn)

    e = sub.add_parser("evaluate", help="batch evaluations: denoising (Table 1), patches (Table 2), inpainting",
                       description="--task denoise (default): PSNR of every penalty on a folder of images with "
                                   "synthetic noise (results.csv, table.md, psnr.png in OUT). --task patches: "
                                   "patch reconstruction with missing pixels, tree vs flat dictionary. --task "
                                   "inpaint: masked-pixel PSNR on photos and masks, with scikit-image's biharmonic "
                                   "and OpenCV's Telea as reference columns.")
    e.add_argument("--task", choices=["denoise", "patches", "inpaint"], default="denoise")
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
    e.add_argument("--masks", default=None, help="inpaint: folder of masks <image>_<kind>.png")
    e.add_argument("--mask-kinds", nargs="+", default=["text1", "rand70", "rand90"])
    e.add_argument("--stride", type=int, default=4, help="inpaint: step of each pass's patch grid")
    e.add_argument("--train", nargs="+", default=None, help="patches: training images (default: every other)")
    e.add_argument("--test", nargs="+", default=None, help="patches: test images (default: the others)")
    e.add_argument("--branching", type=int, nargs="+", default=[10, 2, 2])
    e.add_argument("--n-train", type=int, default=50000)
    e.add_argument("--n-test", type=int, default=5000)
    e.set_defaults(func=cmd_evaluate)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``restore`` command."""
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
