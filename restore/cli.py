"""Command line: ``restore denoise``, ``inpaint``, ``learn`` and ``evaluate``.

Thin: parses arguments, reads and writes files, calls the library. Every
problem with the output is found before any work; outputs are written
atomically and never replace an input file; an expected failure is one line
on stderr (exit 1), Ctrl-C one line (exit 130) with nothing written.
Defaults are read from the library's signatures, never restated here.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

__all__ = ["main"]

# The library and NumPy are imported by main(), inside its handling of Ctrl-C: an interrupt while they load
# (a second or more on a cold start) is then one line too.


from ._signatures import constant
from ._signatures import default as _default

# the modules whose signatures own the defaults the options show (read from their source: see _signatures)
_DENOISE = ("restore.denoise", "denoise_wavelet_tree")
_INPAINT = ("restore.inpainting", "inpaint")
_LEARN = ("restore.inpainting", "learn_dictionary")
_EVAL_DENOISE = ("restore.evaluate.denoising", "evaluate_denoising")
_EVAL_VOLUME = ("restore.evaluate.volume", "evaluate_volumes")
_EVAL_INPAINT = ("restore.evaluate.inpainting", "evaluate_inpainting")
_EVAL_PATCHES = ("restore.evaluate.patches", "evaluate_patches")


# ---------------------------------------------------------------------------
# Argument types (through the library's validation)
# ---------------------------------------------------------------------------


def _arg_type(name: str, check: Callable[[str, Any], Any], parse: Callable[[str], Any], **bounds: Any):
    def convert(text: str) -> Any:
        try:
            return check(name, parse(text), **bounds)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    convert.__name__ = name  # argparse names the type in its messages
    return convert


def _count(name: str, minimum: int = 1):
    from ._validation import check_int

    return _arg_type(name, check_int, int, min=minimum)


def _number(name: str):
    from ._validation import check_number

    return _arg_type(name, check_number, float)


def _show(values: Any) -> str:
    """Numbers for a help text: ``0.1 0.2``."""
    return " ".join(f"{v:g}" for v in values)


def _lam_arg(text: str) -> float | str:
    from ._validation import check_number

    if text in ("sure", "rule"):
        return text
    try:
        return check_number("lam", float(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"lam must be 'sure', 'rule' or a number >= 0, got {text!r}") from None


#: ``restore denoise --method``: the library function of each method.
DENOISE_METHODS = {"wavelet": "denoise_wavelet_tree", "nonlocal": "denoise_nonlocal_tree"}


class _WaveletOption(argparse.Action):
    """An option of the wavelet method: stored (``const`` for a flag), and noted in ``namespace.wavelet_given``.

    So it is refused with another method only when the user gave it
    (comparing with its default would miss ``--penalty tree_l2``); argparse
    passes the full option name, also for an abbreviation.
    """

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)
        namespace.wavelet_given = [*getattr(namespace, "wavelet_given", []), option_string]


class _WaveletSwitch(argparse.BooleanOptionalAction):
    """A ``--x/--no-x`` option of the wavelet method, noted as :class:`_WaveletOption` notes."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        super().__call__(parser, namespace, values, option_string)
        namespace.wavelet_given = [*getattr(namespace, "wavelet_given", []), option_string]


def _check_method(args: argparse.Namespace) -> None:
    """Refuse, before any work, an option of the wavelet method given with another method (the first one typed)."""
    given = getattr(args, "wavelet_given", [])
    if args.method != "wavelet" and given:
        raise ValueError(f"{given[0]} applies to --method wavelet only, not to --method {args.method} (which sets "
                         "its own; --sigma, --noise and --gain apply to both)")


def _denoiser(args: argparse.Namespace, noise: dict) -> tuple[Callable[..., Any], dict]:
    """The library function of ``--method`` and its keyword arguments: the method's options and ``noise``'s.

    lam is the wavelet method's: the non-local method sets its own from the
    noise level.
    """
    import restore

    if args.method == "wavelet":
        return restore.denoise_wavelet_tree, {**_tree_options(args), **noise}
    return getattr(restore, DENOISE_METHODS[args.method]), {k: v for k, v in noise.items() if k != "lam"}


# ---------------------------------------------------------------------------
# Pixels: the file's units and the library's floats
# ---------------------------------------------------------------------------


def _to_float(image: np.ndarray) -> tuple[np.ndarray, float]:
    """Integer images to float in [0, 1]; return the scale of the stored values.

    float32 holds 8- and 16-bit values exactly; wider integers go to float64
    (float32 keeps 24 bits).
    """
    import numpy as np

    if image.dtype.kind in "ui":
        scale = float(np.iinfo(image.dtype).max)
        ftype = np.float32 if image.dtype.itemsize <= 2 else np.float64
        return image.astype(ftype) / ftype(scale), scale
    if image.dtype.kind == "b":
        return image.astype(np.float32), 1.0
    return image, 1.0


def _from_float(image: np.ndarray, like: np.ndarray, scale: float) -> np.ndarray:
    import numpy as np

    if like.dtype.kind in "ui":
        info = np.iinfo(like.dtype)
        # in float64, clipped to the largest float64 the dtype holds: 2**32 - 1 is no float32, 2**63 - 1 no float64
        top = np.float64(info.max)
        top = np.nextafter(top, 0.0) if int(top) > info.max else top
        return np.clip(np.rint(image.astype(np.float64) * scale), info.min, top).astype(like.dtype)
    if like.dtype.kind == "b":
        return image > 0.5
    return image.astype(like.dtype)


def _split_alpha(raw: np.ndarray) -> tuple[np.ndarray, float, np.ndarray | None, int | None]:
    """Float image (float32 for integers), its scale, an alpha channel kept aside, the channel axis."""
    img, scale = _to_float(raw)
    if img.ndim == 3 and img.shape[-1] in (3, 4):
        alpha = raw[..., 3:] if img.shape[-1] == 4 else None
        return img[..., :3], scale, alpha, -1
    if img.ndim == 3 and img.shape[-1] == 2:  # grey + alpha
        return img[..., 0], scale, raw[..., 1:], None
    if img.ndim != 2:
        raise ValueError(f"expected a grey or RGB(A) image, got data of shape {raw.shape}")
    return img, scale, None, None


def _with_alpha(out: np.ndarray, raw: np.ndarray, scale: float, alpha: np.ndarray | None) -> np.ndarray:
    """Back to the file's dtype, with its alpha channel (untouched) if it had one."""
    import numpy as np

    out = _from_float(out, raw, scale)
    if alpha is None:
        return out
    return np.concatenate([out if out.ndim == 3 else out[..., None], alpha], axis=-1)


def _file_dtype(raw: np.ndarray) -> np.dtype:
    import numpy as np

    return np.dtype(np.uint8) if raw.dtype.kind == "b" else raw.dtype


def _channels(raw: np.ndarray) -> int:
    return 1 if raw.ndim == 2 else raw.shape[-1]


@contextlib.contextmanager
def _progress_bar(quiet: bool, desc: str) -> Iterator[Callable[[int, int], None] | None]:
    """A ``progress(done, total)`` drawing a tqdm bar from its first report (None if ``quiet``), closed at exit.

    The library checks everything before it first reports, so a refusal
    prints no empty bar.
    """
    if quiet:
        yield None
        return
    from tqdm.auto import tqdm

    bars: list[Any] = []

    def progress(done: int, total: int) -> None:
        if not bars:
            bars.append(tqdm(desc=desc, unit="step", total=total))
        bars[0].total, bars[0].n = total, done
        bars[0].refresh()

    try:
        yield progress
    finally:
        for bar in bars:
            bar.close()


# ---------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------


def _check_gain(args: argparse.Namespace) -> None:
    if args.gain is not None and args.noise != "poisson-gaussian":
        raise ValueError(f"--gain {args.gain:g} applies to --noise poisson-gaussian only, got --noise {args.noise}")


def _check_settings(args: argparse.Namespace, img: Any, axes: tuple[int, ...], scale: float) -> None:
    """Every setting checked by the library on a lazy ``img`` (nothing computed) before a noise sample is read.

    What is still to estimate (sigma, gain) stands in as 1.
    """
    _check_gain(args)
    photon = args.noise == "poisson-gaussian"
    denoise, kwargs = _denoiser(args, {"noise": args.noise, "lam": args.lam,
                                       "sigma": 1.0 if args.sigma is None else args.sigma / scale,
                                       "gain": (1.0 if args.gain is None else args.gain / scale) if photon else None})
    denoise(img, axes=axes, **kwargs)


def _estimating(args: argparse.Namespace) -> bool:
    """Whether the library would estimate the noise on the whole image: to choose its model, or gain and read noise."""
    return args.sigma is None or (args.noise == "poisson-gaussian" and args.gain is None)


def _noise_options(args: argparse.Namespace, scale: float, sample: Any, where: str = "", one_sigma: bool = True
                   ) -> dict:
    """The noise, gain, sigma and lam in the library's units; what is left to estimate, estimated once and printed.

    ``sample`` is what the library would estimate on
    (:func:`restore.noise_sample`: the image in memory, the central part of
    a store it reads), None when nothing is estimated.
    :func:`restore.estimate_noise` runs once on it with ``--noise``
    (``auto``: the noise-level function chooses the model) and its one line
    is printed in the file's units. A photon model is passed on as
    ``noise``: the library uses its gain and read noise without estimating
    again. ``one_sigma`` (a store, or one grey plane or volume read whole):
    so does the Gaussian estimate, its sigma for every block (the one
    printed). Else the library estimates sigma as its default does, with
    the same estimator, on each plane (or volume) and channel, and the line
    says so.
    """
    from . import estimate_noise
    from .denoise._wavelet_method import noise_for_lam

    _check_gain(args)
    noise: Any = noise_for_lam(args.noise, args.lam)
    if _estimating(args):
        est = estimate_noise(sample, noise=noise)
        each = "; sigma then estimated on each plane (or volume) and channel, as this" \
            if est.noise == "gaussian" and not one_sigma else ""
        print(f"estimated noise{where} (pixel units): {est.describe(scale)}{each}")
        # in memory, Gaussian noise as the library's default takes it; a store's blocks share the sigma printed
        noise = est if est.noise == "poisson-gaussian" or one_sigma else "gaussian"
    # with photon noise a numeric lam is in the stabilised units of the Anscombe transform, not the file's
    photon = getattr(noise, "noise", noise) == "poisson-gaussian"
    lam = args.lam if isinstance(args.lam, str) or args.lam is None or photon else args.lam / scale
    return {"noise": noise, "gain": None if args.gain is None else args.gain / scale,
            "sigma": None if args.sigma is None else args.sigma / scale, "lam": lam}


def _tree_options(args: argparse.Namespace) -> dict:
    return {"penalty": args.penalty, "wavelet": args.wavelet, "level": args.level,
            "penalize_approx": args.penalize_approx, "cycle_spins": args.cycle_spins, "wiener": args.wiener}


def cmd_denoise(args: argparse.Namespace) -> int:
    from ._stores import is_zarr, streams

    _check_method(args)
    if is_zarr(args.input) or is_zarr(args.output) or streams(args.input):
        return _denoise_store(args)
    if args.scheduler is not None:
        raise ValueError(f"--scheduler runs zarr stores (IN and OUT ending in .zarr), not {str(args.input)!r}")
    from ._files import check_output, read_image, tiff_info, write_image
    from .noise import noise_sample

    src = Path(args.input)
    raw = read_image(src)
    info = tiff_info(src) if src.suffix.lower() in (".tif", ".tiff") else None
    # a 3-D TIFF without samples per pixel is a stack of planes; other formats hold planes only
    stack = info is not None and raw.ndim == 3 and not info.colour
    if args.volume and not stack:
        raise ValueError(f"--volume needs a 3-D grey volume (a TIFF stack or a zarr store), got {str(src)!r} of "
                         f"shape {raw.shape}")
    dst = check_output(args.output, [src], args.force, dtype=_file_dtype(raw), channels=1 if stack else _channels(raw),
                       stack=stack)
    if stack:
        (img, scale), alpha, channel_axis = _to_float(raw), None, None
    else:
        img, scale, alpha, channel_axis = _split_alpha(raw)
    axes = (0, 1, 2) if args.volume else None
    sample = noise_sample(img, axes=axes, channel_axis=channel_axis) if _estimating(args) else None
    # one sigma for one grey plane read whole, and for a volume (whose blocks, beyond 2**25 voxels, must share it)
    one = sample is not None and (args.volume or (sample.size == img.size and sample.ndim == 2))
    noise = _noise_options(args, scale, sample, one_sigma=one)
    denoise, kwargs = _denoiser(args, noise)
    out = denoise(img, axes=axes, channel_axis=channel_axis, **kwargs)
    write_image(dst, _with_alpha(out, raw, scale, alpha), tiff=info)
    print(f"wrote {dst}")
    return 0


def _denoise_store(args: argparse.Namespace) -> int:
    """Zarr stores and TIFF stacks read lazily: the library's overlapping blocks, written block by block.

    Zarr and TIFF convert both ways: a store's OME voxel size becomes the
    TIFF's resolution and ImageJ spacing, and back.
    """
    import contextlib

    from ._files import tiff_info
    from ._stores import is_tiff, is_zarr, location, open_tiff, open_zarr

    src_path, dst_path = location(args.input), location(args.output)  # URLs, or absolute paths for Dask's workers
    if is_zarr(src_path):
        src = open_zarr(src_path)
    elif is_tiff(src_path):
        src = open_tiff(src_path, tiff_info(src_path))
    else:
        raise ValueError(f"output {str(dst_path)!r} is a zarr store: the input must be a zarr store or a TIFF, got "
                         f"{str(src_path)!r}")
    with contextlib.closing(src):
        return _denoise_lazy(args, src, dst_path)


def _denoise_lazy(args: argparse.Namespace, src: Any, dst_path: Path) -> int:

    from ._files import IMAGEJ_DTYPES, TiffInfo, check_output, tiff_info, tiff_options
    from ._stores import check_zarr_output, is_tiff, is_zarr, tiff_calibration, write_tiff, write_zarr
    from .noise import noise_sample

    data = src.data
    if not is_zarr(dst_path) and not is_tiff(dst_path):
        raise ValueError(f"{str(src.path)!r} is written to a zarr store (.zarr) or a TIFF (.tif, .tiff), got "
                         f"{str(dst_path)!r}")
    if args.scheduler is not None and not (is_zarr(src.path) and is_zarr(dst_path)):
        raise ValueError("--scheduler runs zarr stores (IN and OUT ending in .zarr), not "
                         f"{str(dst_path if is_zarr(src.path) else src.path)!r}")
    spatial = src.axes_of("space") if src.ome else list(range(data.ndim))
    if is_zarr(dst_path):
        dst = check_zarr_output(dst_path, [src.path], args.force)
    else:
        # a TIFF holds planes, or one stack of them: axes of length 1 besides the planes' go
        plane = spatial[-2:]
        index = tuple(0 if n == 1 and a not in plane else slice(None) for a, n in enumerate(data.shape))
        dims = [a for a, i in enumerate(index) if i != 0]
        if len(dims) > 3:
            raise ValueError(f"{str(dst_path)!r} (TIFF) holds a plane or a stack of planes; {str(src.path)!r} has "
                             f"data of shape {data.shape}: write a zarr store (.zarr)")
        dst = check_output(dst_path, [src.path], args.force)
        if is_tiff(src.path):
            info = tiff_info(src.path)
        else:
            imagej = _file_dtype(data).name in IMAGEJ_DTYPES
            info = TiffInfo(**tiff_calibration(src, dims, imagej))
        stack_axis = {"time": "T", "channel": "C"}.get((src.axes or [{}] * data.ndim)[dims[0]].get("type"), "Z")
    need = 3 if args.volume else 2
    if len(spatial) < need:
        raise ValueError(f"--volume needs three spatial axes, {str(src.path)!r} has {len(spatial)} (shape "
                         f"{data.shape})")
    axes = tuple(spatial[-need:])
    estimating = _estimating(args)
    channels = [a for a in src.axes_of("channel") if data.shape[a] > 1]
    if estimating and channels:
        raise ValueError(f"{str(src.path)!r} has {data.shape[channels[0]]} channels, whose noise differs: give "
                         "--sigma (and --gain), or denoise one channel at a time")
    img, scale = _to_float(data)
    _check_settings(args, img, axes, scale)
    sample = noise_sample(img, axes=axes) if estimating else None
    where = f" (on {sample.size} central voxels)" if estimating else ""
    noise = _noise_options(args, scale, sample, where=where)
    denoise, kwargs = _denoiser(args, noise)
    out = _from_float(denoise(img, axes=axes, **kwargs), data, scale)
    if is_zarr(dst):
        write_zarr(dst, out, src, source=str(src.path), scheduler=args.scheduler, progress=not args.quiet)
    else:
        out = out[index].astype(_file_dtype(data))  # a TIFF holds no booleans: 0 and 1
        write_tiff(dst, out, tiff_options(info, out, stack_axis), progress=not args.quiet)
    print(f"wrote {dst}")
    return 0


def cmd_inpaint(args: argparse.Namespace) -> int:
    import warnings

    import numpy as np

    from . import inpaint
    from ._files import check_output, read_image, read_mask, write_image
    from .inpainting import SuspectMaskWarning

    src, msk = Path(args.image), Path(args.mask)
    raw = read_image(src)
    img, scale, alpha, channel_axis = _split_alpha(raw)
    mask, warning = read_mask(msk, img.shape[:2])
    if warning:
        print(warning, file=sys.stderr)
    if not mask.any():
        raise ValueError(f"mask {str(msk)!r} marks no pixel as missing (it is all zero): nothing to inpaint; "
                         "non-zero (or opaque) pixels are the ones filled")
    dst = check_output(args.output, [src, msk], args.force, dtype=_file_dtype(raw), channels=_channels(raw))
    shown = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], *rest: Any, **kwargs: Any) -> None:
        if isinstance(message, SuspectMaskWarning):  # in the file's words, one line, as the library checks
            print(f"warning: mask {str(msk)!r} {message.coverage.describe()}: those pixels are filled smoothly "
                  "from far away; is it inverted? Non-zero pixels are the ones filled", file=sys.stderr)
        else:
            shown(message, category, *rest, **kwargs)

    lam = None if args.lam is None else args.lam[0] if len(args.lam) == 1 else tuple(args.lam)
    with _progress_bar(args.quiet, "inpaint") as progress, warnings.catch_warnings():
        warnings.simplefilter("always", SuspectMaskWarning)  # shown, whatever filters the process runs with
        warnings.showwarning = show
        out = inpaint(img, mask, dictionary=args.dictionary, patch_size=args.patch_size, stride=args.stride,
                      n_passes=args.passes, lam=lam, channel_axis=channel_axis, progress=progress)
    result = _with_alpha(out, raw, scale, alpha)
    known = ~mask if result.ndim == 2 else ~mask[..., None]
    np.copyto(result, raw.astype(result.dtype, copy=False), where=np.broadcast_to(known, result.shape))
    write_image(dst, result)
    print(f"wrote {dst}")
    return 0


def cmd_learn(args: argparse.Namespace) -> int:
    from . import learn_dictionary
    from ._files import check_output, read_image, read_mask

    out = Path(args.output)
    if out.suffix != ".npz" and not out.is_dir():
        raise ValueError(f"the dictionary file must end in .npz, got {str(out)!r}")
    inputs = [Path(p) for p in args.images + (args.masks or [])]
    check_output(out, inputs, args.force)
    images, masks = [], []
    for p in args.images:
        img, _, _, axis = _split_alpha(read_image(Path(p)))
        images.append(img if axis is not None else img[..., None])  # grey and colour: luminance patches
    if args.masks:
        if len(args.masks) != len(images):
            raise ValueError(f"give one mask per image ({len(images)} images, {len(args.masks)} masks)")
        for m, im in zip(args.masks, images, strict=True):
            mask, warning = read_mask(Path(m), im.shape[:2])
            if warning:
                print(warning, file=sys.stderr)
            masks.append(mask)
    penalty = "l1" if args.flat else args.penalty
    with _progress_bar(args.quiet, "learn") as progress:
        est = learn_dictionary(images, masks=masks or None, patch_size=args.patch_size,
                               branching=tuple(args.branching), penalty=penalty, n_atoms=args.flat,
                               lam=args.lam, n_patches=args.n_patches, n_epochs=args.epochs,
                               channel_axis=-1, rng=args.seed, progress=progress)
    est.save(out)
    print(f"wrote {out}: {est.components_.shape[0]} atoms of {est.components_.shape[1]} features")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from .evaluate import IMAGE_SUFFIXES, evaluate_denoising, evaluate_inpainting, evaluate_patches, evaluate_volumes

    # --sigmas and --draws are shared by two protocols with different defaults (0-255 images, [0, 1] volumes):
    # given, they are passed on; omitted, each protocol's signature decides
    shared = {k: v for k, v in (("sigmas", args.sigmas), ("n_draws", args.draws)) if v is not None}
    if args.out is None:  # each task its own folder, so one task's results never meet another's
        args.out = f"results/{args.task}"
    if args.task == "denoise":
        evaluate_denoising(args.images, args.out, wavelets=args.wavelets, penalties=args.penalties,
                           lam_modes=args.lam, seed=args.seed, bayes=not args.no_bayes,
                           nonlocal_tree=not args.no_nonlocal, bm3d=args.bm3d, n_jobs=args.jobs,
                           scheduler=args.scheduler, force=args.force, progress=not args.quiet, **shared)
    elif args.task == "volume":
        evaluate_volumes(args.images, args.out, noises=args.noise, peaks=args.peaks, read_noises=args.read_noise,
                         methods=args.methods, seed=args.seed, cycle_spins=args.cycle_spins, n_jobs=args.jobs,
                         scheduler=args.scheduler, force=args.force, progress=not args.quiet, **shared)
    elif args.task == "inpaint":
        if args.masks is None:
            raise ValueError("--task inpaint needs --masks DIR (masks named <image>_<kind>.png)")
        evaluate_inpainting(args.images, args.masks, args.out, mask_kinds=args.mask_kinds, stride=args.stride,
                            n_jobs=args.jobs or 1, scheduler=args.scheduler, force=args.force,
                            progress=not args.quiet)
    else:
        folder = Path(args.images)
        if not folder.is_dir():
            raise ValueError(f"image folder {str(folder)!r} does not exist or is not a folder")
        files = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        train = args.train or [str(p) for p in files[0::2]]
        test = args.test or [str(p) for p in files[1::2]]
        if not train or not test:
            raise ValueError("--task patches needs training and test images (--train/--test or a folder of 2+)")
        evaluate_patches(train, test, args.out, branching=args.branching, n_train=args.n_train,
                         n_test=args.n_test, seed=args.seed, force=args.force)
    out = Path(args.out)
    print((out / "table.md").read_text())
    written = [p for p in ("results.csv", "table.md", "psnr.png") if (out / p).exists()]
    print(f"wrote {', '.join(str(out / p) for p in written)}")
    return 0


# ---------------------------------------------------------------------------
# Parser
# ---------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``restore`` command."""
    parser = argparse.ArgumentParser(prog="restore", description="Image restoration with tree-structured sparsity.")
    sub = parser.add_subparsers(dest="command", required=True)
    # choices and defaults from the library's source, not its modules: --help imports no numba, SciPy or sklearn
    STREAM_VOXELS = constant("restore._stores", "STREAM_VOXELS")
    NOISE_MODELS = constant("restore._config", "NOISE_MODELS")
    NOISE_CHOICES = constant("restore._config", "NOISE_CHOICES")
    VOLUME_METHODS = constant("restore.evaluate.volume", "VOLUME_METHODS")
    PENALTIES = constant("restore.proximal", "PENALTIES")
    TREE_PENALTIES = constant("restore.proximal", "TREE_PENALTIES")
    from ._validation import check_number

    d = sub.add_parser("denoise", help="denoise an image, a stack or a volume",
                       description="Denoise an image (grey or RGB; 8- or 16-bit PNG, TIFF, JPEG, float TIFF), a "
                                   "TIFF stack or a zarr store (a plain array or an OME-Zarr image) by wavelet "
                                   "tree shrinkage (--method nonlocal: non-local tree sparsity); writes the same bit "
                                   "depth. Zarr stores, and TIFF stacks of "
                                   f"more than {STREAM_VOXELS >> 20} M voxels, are read and written chunk by chunk, "
                                   "with memory that does not grow with the number of planes. A zarr store may be "
                                   "written as a TIFF and a TIFF as an OME-Zarr store.")
    d.add_argument("input", help="noisy image file, TIFF stack or zarr store (a path, or a URL zarr reads: s3://, "
                                 "gs://, https://...)")
    d.add_argument("output", help="output file (never the input); a zarr store (.zarr) for a zarr store or a TIFF, "
                                  "a TIFF (.tif, .tiff) for a zarr store of a plane or a stack: the voxel size goes "
                                  "across (OME scales and units, TIFF resolution and ImageJ spacing)")
    d.add_argument("--volume", action="store_true",
                   help="the last three spatial axes are one volume, denoised in 3-D (default: plane by plane)")
    d.add_argument("--method", choices=list(DENOISE_METHODS), default=next(iter(DENOISE_METHODS)),
                   help="wavelet: wavelet tree shrinkage, fast; nonlocal: groups of similar patches coded jointly "
                        "under a tree norm, the best quality at a few times the time; the options --lam to "
                        "--wiener are the wavelet method's (default: %(default)s)")
    d.add_argument("--noise", choices=NOISE_CHOICES, default=_default(*_DENOISE, "noise"),
                   help="noise model (default: %(default)s, chosen from how the noise grows with brightness; "
                        "the choice is printed); poisson-gaussian is photon noise plus read noise")
    d.add_argument("--gain", type=_arg_type("gain", check_number, float, min=0.0, strict=True), default=None,
                   help="poisson-gaussian: pixel units per photon; estimated if omitted")
    d.add_argument("--sigma", type=_number("sigma"), default=None,
                   help="noise standard deviation in the file's pixel units (e.g. 0-255 for 8-bit), with "
                        "poisson-gaussian the read noise; estimated if omitted (the estimate is printed)")
    d.add_argument("--lam", type=_lam_arg, default=None, action=_WaveletOption,
                   help="'sure', 'rule' or a number in pixel units (poisson-gaussian: in the units of the "
                        "stabilised image; default: sure for convex penalties)")
    d.add_argument("--penalty", choices=PENALTIES, default=_default(*_DENOISE, "penalty"), action=_WaveletOption,
                   help="penalty on the wavelet tree: tree_l2 and tree_linf are the convex tree norms, tree_l0 "
                        "Donoho's dynamic programme, l1 and l0 soft and hard thresholding (default: %(default)s)")
    d.add_argument("--wavelet", default=_default(*_DENOISE, "wavelet"), action=_WaveletOption,
                   help="orthogonal PyWavelets wavelet: haar, db2, db3, sym4... (default: %(default)s)")
    d.add_argument("--level", type=_count("level"), default=None, action=_WaveletOption,
                   help="decomposition levels (default: down to an approximation of about 16 x 16 pixels on "
                        "planes; with --volume, as many as leave 4 samples on the thinnest axis, at most 3)")
    d.add_argument("--cycle-spins", type=_count("cycle_spins", 0), default=_default(*_DENOISE, "cycle_spins"),
                   action=_WaveletOption,
                   help="average over shifts of the image: the Wiener stage over twice this many (at least 4 "
                        "on planes, 2 with --volume), the tree stage over a quarter (all with --no-wiener); "
                        "better, and slower (default: %(default)s)")
    d.add_argument("--penalize-approx", action=_WaveletOption, nargs=0, const=True, default=False,
                   help="penalise the approximation band too (default: it is kept as it is)")
    d.add_argument("--wiener", action=_WaveletSwitch, default=_default(*_DENOISE, "wiener"),
                   help="refine by empirical Wiener filtering (default: on)")
    d.add_argument("--scheduler", default=None, help="zarr: dask.distributed scheduler address, e.g. "
                                                      "tcp://host:8786 (the stores must be visible to its workers: "
                                                      "URLs such as s3://... need no shared folder)")
    d.add_argument("--force", action="store_true", help="replace OUTPUT if it exists (a store only if restore "
                                                        "wrote it)")
    d.add_argument("--quiet", action="store_true", help="no progress bar")
    d.set_defaults(func=cmd_denoise)

    i = sub.add_parser("inpaint", help="fill the masked pixels of an image",
                       description="Inpaint IMAGE where MASK is non-zero with a tree-structured dictionary of "
                                   "patches; writes the same bit depth. Known pixels are kept exactly.")
    i.add_argument("image", help="image file (grey or RGB; 8- or 16-bit PNG/TIFF/JPEG)")
    i.add_argument("mask", help="mask image of the same size: non-zero = missing; with transparency, opaque = "
                                "missing")
    i.add_argument("output", help="output image file (never an input)")
    i.add_argument("--dictionary", default=None, help="dictionary .npz from `restore learn` (default: learned "
                                                      "from the image, warm started from the shipped one)")
    i.add_argument("--patch-size", type=_count("patch_size", 2), default=_default(*_INPAINT, "patch_size"),
                   help="side of the square patches, in pixels (default: %(default)s, as the shipped dictionary)")
    i.add_argument("--stride", type=_count("stride"), default=_default(*_INPAINT, "stride"),
                   help="step of each pass's patch grid, in pixels (default: the patch size)")
    i.add_argument("--passes", type=_count("n_passes"), default=_default(*_INPAINT, "n_passes"),
                   help="passes of patch coding; time grows as passes / stride^2 (default: %(default)s)")
    i.add_argument("--lam", type=_number("lam"), nargs="+", default=None, metavar="LAM",
                   help="lam of every pass, or of the first and the last (default: "
                        f"{_show(constant(*_INPAINT[:1], '_DEFAULT_LAM'))})")
    i.add_argument("--force", action="store_true", help="replace OUTPUT if it exists")
    i.add_argument("--quiet", action="store_true", help="no progress bar")
    i.set_defaults(func=cmd_inpaint)

    learn = sub.add_parser("learn", help="learn a dictionary of patches from images",
                           description="Learn a tree-structured (or flat) dictionary of image patches; "
                                       "saves an .npz for `restore inpaint --dictionary`.")
    learn.add_argument("images", nargs="+", help="training images (all grey or all colour)")
    learn.add_argument("--out", dest="output", required=True, help="dictionary file to write (.npz)")
    learn.add_argument("--masks", nargs="+", default=None, help="per image, pixels to exclude (non-zero)")
    learn.add_argument("--branching", type=_count("branching"), nargs="+", default=list(_default(*_LEARN, "branching")),
                       help="tree of atoms (default: %(default)s, as the shipped dictionary)")
    learn.add_argument("--penalty", choices=TREE_PENALTIES, default=_default(*_LEARN, "penalty"),
                       help="penalty on the tree of atoms (default: %(default)s)")
    learn.add_argument("--flat", type=_count("n_atoms"), default=None, metavar="N_ATOMS",
                       help="learn a flat (l1) dictionary of N_ATOMS atoms instead of a tree")
    learn.add_argument("--patch-size", type=_count("patch_size", 2), default=_default(*_LEARN, "patch_size"),
                       help="side of the square patches, in pixels (default: %(default)s)")
    learn.add_argument("--lam", type=_number("lam"), default=_default(*_LEARN, "lam"),
                       help="regularisation of the codes of the centred, unit-norm patches (default: %(default)s)")
    learn.add_argument("--n-patches", type=_count("n_patches"), default=_default(*_LEARN, "n_patches"),
                       help="training patches drawn from the images (default: %(default)s)")
    learn.add_argument("--epochs", type=_count("n_epochs"), default=_default(*_LEARN, "n_epochs"),
                       help="passes over the training patches (default: %(default)s)")
    learn.add_argument("--seed", type=_count("seed", 0), default=0, help="seed of the patch sample (default: 0)")
    learn.add_argument("--force", action="store_true", help="replace the output file if it exists")
    learn.add_argument("--quiet", action="store_true", help="no progress bar")
    learn.set_defaults(func=cmd_learn)

    e = sub.add_parser("evaluate", help="batch evaluations: denoising (Table 1), patches (Table 2), inpainting, "
                                        "volumes",
                       description="--task denoise (default): PSNR of every penalty, scikit-image's BayesShrink "
                                   "and the non-local tree (restore.denoise_nonlocal_tree, about a third of the "
                                   "run's CPU time; --no-nonlocal leaves it out) on a folder of images with "
                                   "synthetic noise (results.csv, table.md, psnr.png in OUT); BM3D with --bm3d. "
                                   "--task patches: "
                                   "patch reconstruction with missing pixels, tree vs flat dictionary. --task "
                                   "inpaint: masked-pixel PSNR on photos and masks, with scikit-image's biharmonic "
                                   "and OpenCV's Telea as reference columns. --task volume: a folder of 3-D "
                                   "volumes (TIFF stacks, .npy/.npz, zarr stores), normalised to [0, 1], under "
                                   "Gaussian and Poisson-Gaussian noise: restore plane by plane, restore's octree, "
                                   "the non-local tree, scikit-image's 3-D wavelets and BM4D when installed. "
                                   "OUT may hold other files: only the files evaluate writes are ever replaced.")
    e.add_argument("--task", choices=["denoise", "patches", "inpaint", "volume"], default="denoise",
                   help="what to evaluate (default: %(default)s; see above)")
    e.add_argument("images", nargs="?", default="sample_images",
                   help="folder of images, or of volumes for --task volume (default: sample_images)")
    e.add_argument("--out", default=None, help="output folder (default: results/<task>, e.g. results/denoise)")
    e.add_argument("--sigmas", type=_number("sigma"), nargs="+", default=None,
                   help=f"Gaussian noise levels (default: {_show(_default(*_EVAL_DENOISE, 'sigmas'))} on [0, 255] "
                        f"images; volume: {_show(_default(*_EVAL_VOLUME, 'sigmas'))} on [0, 1] volumes)")
    e.add_argument("--wavelets", nargs="+", default=list(_default(*_EVAL_DENOISE, "wavelets")),
                   help="denoise: orthogonal PyWavelets wavelets (default: %(default)s)")
    e.add_argument("--penalties", nargs="+", choices=PENALTIES, default=list(_default(*_EVAL_DENOISE, "penalties")),
                   help="denoise: penalties compared (default: all)")
    e.add_argument("--lam", nargs="+", choices=["oracle", "auto"],
                   default=list(_default(*_EVAL_DENOISE, "lam_modes")),
                   help="denoise: how lam is chosen, by an oracle (best PSNR) or from the noisy image (SURE or the "
                        "rule) (default: %(default)s)")
    e.add_argument("--draws", type=_count("n_draws"), default=None,
                   help=f"noise draws (default: {_default(*_EVAL_DENOISE, 'n_draws')}; volume: "
                        f"{_default(*_EVAL_VOLUME, 'n_draws')})")
    e.add_argument("--seed", type=_count("seed", 0), default=_default(*_EVAL_DENOISE, "seed"),
                   help="seed of the noise draws and samples (default: %(default)s)")
    e.add_argument("--no-bayes", action="store_true", help="skip scikit-image's BayesShrink reference column")
    e.add_argument("--no-nonlocal", action="store_true",
                   help="denoise: skip the non-local tree's column (included by default)")
    e.add_argument("--bm3d", action="store_true",
                   help="denoise: add BM3D's column (the bm3d package; several times the CPU time of the rest of "
                        "the run; a note instead when the package is not installed)")
    e.add_argument("--jobs", type=_count("n_jobs"), default=None, help="local worker processes (default: all CPUs)")
    e.add_argument("--scheduler", default=None, help="dask.distributed scheduler address, e.g. tcp://host:8786")
    e.add_argument("--force", action="store_true", help="replace the results of a previous run in OUT")
    e.add_argument("--quiet", action="store_true", help="no progress bar")
    e.add_argument("--masks", default=None, help="inpaint: folder of masks <image>_<kind>.png")
    e.add_argument("--mask-kinds", nargs="+", default=list(_default(*_EVAL_INPAINT, "mask_kinds")),
                   help="inpaint: the <kind> of the masks <image>_<kind>.png used (default: %(default)s)")
    e.add_argument("--stride", type=_count("stride"), default=_default(*_EVAL_INPAINT, "stride"),
                   help="inpaint: step of each pass's patch grid (default: the patch size)")
    e.add_argument("--train", nargs="+", default=None, help="patches: training images (default: every other)")
    e.add_argument("--test", nargs="+", default=None, help="patches: test images (default: the others)")
    e.add_argument("--branching", type=_count("branching"), nargs="+",
                   default=list(_default(*_EVAL_PATCHES, "branching")),
                   help="patches: tree of the dictionary's atoms (default: %(default)s)")
    e.add_argument("--n-train", type=_count("n_train"), default=_default(*_EVAL_PATCHES, "n_train"),
                   help="patches: training patches (default: %(default)s)")
    e.add_argument("--n-test", type=_count("n_test"), default=_default(*_EVAL_PATCHES, "n_test"),
                   help="patches: test patches (default: %(default)s)")
    e.add_argument("--noise", nargs="+", choices=NOISE_MODELS, default=list(_default(*_EVAL_VOLUME, "noises")),
                   help=f"volume: noise models (default: {' '.join(_default(*_EVAL_VOLUME, 'noises'))})")
    e.add_argument("--peaks", type=_arg_type("peaks", check_number, float, min=0.0, strict=True), nargs="+",
                   default=list(_default(*_EVAL_VOLUME, "peaks")),
                   help="volume, poisson-gaussian: photons at intensity 1 (default: "
                        f"{_show(_default(*_EVAL_VOLUME, 'peaks'))})")
    e.add_argument("--read-noise", type=_number("read_noise"), nargs="+",
                   default=list(_default(*_EVAL_VOLUME, "read_noises")),
                   help="volume, poisson-gaussian: read noise standard deviations on [0, 1] (default: "
                        f"{_show(_default(*_EVAL_VOLUME, 'read_noises'))})")
    e.add_argument("--methods", nargs="+", choices=VOLUME_METHODS, default=list(_default(*_EVAL_VOLUME, "methods")),
                   help="volume: methods (default: all; bm4d only when the bm4d package is installed)")
    e.add_argument("--cycle-spins", type=_count("cycle_spins", 0), default=_default(*_EVAL_VOLUME, "cycle_spins"),
                   help="volume: shifts of the restore methods (default: %(default)s)")
    e.set_defaults(func=cmd_evaluate)
    return parser


_INTERRUPTED = {
    "evaluate": "interrupted: finished units are kept in {out}; run the same command again to resume",
}

def _expected_errors() -> tuple[type[BaseException], ...]:
    """What a user can cause: each becomes one line on stderr, never a traceback."""
    from .evaluate import FolderInUse

    return (ValueError, TypeError, OSError, FolderInUse, ConnectionError)


class _Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP (a batch scheduler, ``timeout``, a closed terminal): cleaned up as Ctrl-C is."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


#: A stop signal this long (s) after the "still cleaning up" notice ends the process at once, cleanup or not; those
#: sooner (a terminal's and ``timeout``'s, both at once; a key held down) wait for the cleanup as the second does.
_FORCE_AFTER_S = 0.5
#: A first stop signal whose exception a finalizer dropped is sent again this long (s) after: the finalizer is over.
_RESEND_AFTER_S = 0.01


class _Signals:
    """The command's stop signals: the first stops the work; those that follow wait until its cleanup is done.

    The first SIGINT raises ``KeyboardInterrupt`` (SIGTERM or SIGHUP :class:`_Terminated`), which unwinds the work
    through ``finally`` blocks that remove our partial files and re-take locks that threads hold. A second one
    raised in there would leave a temporary file behind, or break a lock into a traceback: it is noted instead,
    with a notice that the cleanup runs, and the command's process ends at once when the cleanup is over
    (:func:`main`). One more, :data:`_FORCE_AFTER_S` after the notice, cuts a long cleanup short (a cluster's
    tasks awaited): the process ends at once (a caller's ``main([...])``: ``KeyboardInterrupt``). A first signal
    whose exception a finalizer dropped (Python ignores those) is sent again (:meth:`_unraisable`).
    """

    caught = ("SIGINT", "SIGTERM", "SIGHUP")

    def __init__(self) -> None:
        self.again = False
        self.noticed: float | None = None
        self.process = False  # the command's own process (see main)
        self.previous: dict[int, Any] = {}
        self.raised: BaseException | None = None  # the first signal's exception, until it reaches the work
        self.hook: Any = None  # sys.unraisablehook before ours

    def install(self) -> None:
        import signal

        for name in self.caught:
            sig = getattr(signal, name)
            if signal.getsignal(sig) is not signal.SIG_IGN:  # ignored (nohup, a background job): honoured
                self.previous[sig] = signal.signal(sig, self._first)
        if self.previous:
            self.hook, sys.unraisablehook = sys.unraisablehook, self._unraisable

    def restore(self, keep_sigint: bool) -> None:
        import signal

        for sig, handler in self.previous.items():
            if not (keep_sigint and sig == signal.SIGINT):
                signal.signal(sig, handler)
        if self.hook is not None:
            sys.unraisablehook = self.hook

    def _first(self, signum: int, frame: Any) -> None:
        import signal

        for sig in self.previous:
            signal.signal(sig, self._again)
        self.raised = KeyboardInterrupt() if signum == signal.SIGINT else _Terminated(signum)
        raise self.raised

    def _unraisable(self, unraisable: Any) -> None:
        """``sys.unraisablehook``: the first signal's exception, dropped by a finalizer, is sent again.

        Python ignores an exception raised in a finalizer (``__del__``, a
        weakref's callback); the signal then stops the work once the
        finalizer is over. Any other goes to the hook before ours.
        """
        import signal
        import threading

        exc = unraisable.exc_value
        if exc is None or exc is not self.raised or threading.current_thread() is not threading.main_thread():
            self.hook(unraisable)
            return
        for sig in self.previous:
            signal.signal(sig, self._first)
        # sent from another thread, a moment later: raised in here, it would be dropped again
        signum = exc.signum if isinstance(exc, _Terminated) else signal.SIGINT
        resend = threading.Timer(_RESEND_AFTER_S, os.kill, (os.getpid(), signum))
        resend.daemon = True
        resend.start()

    def _again(self, signum: int, frame: Any) -> None:
        import signal
        import time

        self.again = True
        now = time.monotonic()
        # nothing here may raise into the cleanup: os.write (a handler may run inside a print to stderr), errors
        # of a closed stderr (a pipe whose reader the same Ctrl-C ended) ignored, and no flush before os._exit
        if self.noticed is None:
            self.noticed = now
            if signum == signal.SIGINT:
                with contextlib.suppress(OSError):
                    os.write(2, b"\nstill cleaning up: press Ctrl-C again to quit at once\n")
        elif now - self.noticed >= _FORCE_AFTER_S:
            if not self.process:
                raise KeyboardInterrupt
            with contextlib.suppress(OSError):
                os.write(2, b"interrupted: cleanup cut short, a partial output may remain\n")
            os._exit(130 if signum == signal.SIGINT else 128 + signum)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``restore`` command."""
    import threading

    signals = _Signals()
    if threading.current_thread() is threading.main_thread():
        signals.install()
    # the process's own command (not a caller's ``main([...])``): a Ctrl-C after an interrupted run's message,
    # while the interpreter's exit joins the library's threads (a chunk of work each), ends the process at once
    signals.process = argv is None and bool(signals.previous)
    interrupted = False
    try:
        return _main(argv)
    except _Terminated as exc:
        interrupted = True
        return _end_interrupted(signals, 128 + exc.signum)
    except KeyboardInterrupt:  # raised by _main once its message is printed
        interrupted = True
        return _end_interrupted(signals, 130)
    finally:
        signals.restore(keep_sigint=signals.process and interrupted)


def _end_interrupted(signals: _Signals, code: int) -> int:
    import signal

    if signals.process:
        if signal.SIGINT in signals.previous:  # (one ignored from the start, as in a background job, stays so)
            signal.signal(signal.SIGINT, _exit_interrupted)
        if signals.again:  # the user asked twice: the cleanup is done, nothing more to wait for
            _exit_now(code)
    return code


def console() -> int:
    """The ``restore`` command's process: :func:`main` on its arguments, then a quick end."""
    import gc

    try:
        return main()
    finally:
        # the process ends next: the interpreter's last collections would walk every object of numba, SciPy and
        # Dask, a second or so after the command's last line (after Ctrl-C too); the system frees them at once
        gc.freeze()


def _exit_now(code: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, RuntimeError, ValueError):  # closed, or a print the signal interrupted
            stream.flush()
    os._exit(code)


def _exit_interrupted(signum: int, frame: Any) -> None:
    _exit_now(130)


def _main(argv: list[str] | None) -> int:
    args = None
    try:
        from ._progress import Cancelled
        from .evaluate import ResultsExist

        args = build_parser().parse_args(argv)
        try:
            return args.func(args)
        except Cancelled:
            raise KeyboardInterrupt from None
        except ResultsExist as exc:  # the library speaks of "the force option"; here it is --force
            raise SystemExit(f"error: {str(exc.folder)!r} {exc.problem}: choose another --out, or add --force to "
                             f"{exc.action}") from None
        except _expected_errors() as exc:
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise SystemExit(f"error: {text}") from None
    except KeyboardInterrupt:
        message = _INTERRUPTED.get(getattr(args, "command", None), "interrupted: nothing written")
        with contextlib.suppress(OSError):  # stderr gone (a pipe whose reader the same Ctrl-C ended)
            print("\n" + message.format(out=getattr(args, "out", "")), file=sys.stderr)
        raise


if __name__ == "__main__":  # pragma: no cover
    sys.exit(console())
