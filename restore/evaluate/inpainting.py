"""The inpainting benchmark: masked-pixel PSNR of restore.inpaint, scikit-image's biharmonic and OpenCV's Telea."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from .._validation import check_int
from .report import csv_text, inpainting_table
from .runner import IMAGE_SUFFIXES, OutputFolder, Unit

__all__ = ["INPAINT_COLUMNS", "INPAINT_METHODS", "evaluate_inpainting", "run_inpaint_unit"]

INPAINT_COLUMNS = ("image", "mask", "method", "psnr", "seconds")
INPAINT_METHODS = ("tree_dictionary", "biharmonic", "telea")


def _read_colour(path: Path) -> np.ndarray:
    from skimage import io

    im = io.imread(path)
    if im.ndim == 2:
        im = np.stack([im] * 3, axis=-1)
    scale = float(np.iinfo(im.dtype).max) if im.dtype.kind in "ui" else 1.0
    return (im[..., :3] / scale).astype(np.float32)


def _read_mask_file(path: Path) -> np.ndarray:
    from skimage import io

    m = io.imread(path)
    return (m[..., :3].max(axis=-1) if m.ndim == 3 else m) > 0


def run_inpaint_unit(image_path: str, mask_path: str, kind: str, methods: tuple[str, ...],
                     stride: int | None) -> list[dict]:
    """Masked-pixel PSNR of each inpainting method on one image and mask."""
    img = _read_colour(Path(image_path))
    mask = _read_mask_file(Path(mask_path))
    rows = []
    for method in methods:
        t0 = time.perf_counter()
        if method == "tree_dictionary":
            from ..inpainting import inpaint

            out = inpaint(img, mask, channel_axis=-1, stride=stride)
        elif method == "biharmonic":
            from skimage.restoration import inpaint_biharmonic

            out = inpaint_biharmonic(img, mask, channel_axis=-1)
        else:  # telea
            import cv2

            u8 = np.clip(np.rint(img * 255), 0, 255).astype(np.uint8)
            out = cv2.inpaint(u8[..., ::-1].copy(), mask.astype(np.uint8), 3, cv2.INPAINT_TELEA)[..., ::-1] / 255.0
        seconds = time.perf_counter() - t0
        mse = float(np.mean((out[mask] - img[mask]) ** 2))
        rows.append({"image": Path(image_path).stem, "mask": kind, "method": method,
                     "psnr": 10 * np.log10(1.0 / mse) if mse > 0 else float("inf"), "seconds": seconds})
    return rows


def evaluate_inpainting(
    image_dir: str | os.PathLike,
    mask_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    mask_kinds: Sequence[str] = ("text1", "rand70", "rand90"),
    methods: Sequence[str] = INPAINT_METHODS,
    stride: int | None = None,
    n_jobs: int | None = 1,
    scheduler: str | None = None,
    force: bool = False,
    progress: bool | Callable[[int, int], None] = True,
) -> list[dict]:
    """Inpainting benchmark: masked-pixel PSNR on a folder of photos and masks.

    Parameters
    ----------
    image_dir : path
        Folder of photographs (PNG, TIFF, JPEG).
    mask_dir : path
        Folder of masks named ``<image stem>_<kind>.png``, non-zero = missing
        (the layout of ``../shared/images/masks``).
    out_dir : path
        Output folder: ``results.csv`` (image, mask, method, psnr, seconds),
        ``table.md``, ``config.json``; resumable as for
        :func:`evaluate_denoising`.
    mask_kinds : sequence of str
        Mask kinds to use (images without such a mask are skipped).
    methods : sequence of str
        ``'tree_dictionary'`` (:func:`restore.inpaint`), and the reference
        columns ``'biharmonic'`` (scikit-image) and ``'telea'`` (OpenCV,
        radius 3; skipped when OpenCV is not installed).
    stride : int, optional
        Step of the patch grids of :func:`restore.inpaint` (default: its
        default, the patch size).
    n_jobs, scheduler, force, progress
        As in :func:`evaluate_denoising` (default one process: inpainting
        already uses every core).

    Returns
    -------
    list of dict
    """
    image_dir, mask_dir = Path(image_dir), Path(mask_dir)
    for d, what in ((image_dir, "image"), (mask_dir, "mask")):
        if not d.is_dir():
            raise ValueError(f"{what} folder {str(d)!r} does not exist or is not a folder")
    methods = tuple(methods)
    for m in methods:
        if m not in INPAINT_METHODS:
            raise ValueError(f"Invalid method: {m!r}; supported methods are {', '.join(INPAINT_METHODS)}")
    if "telea" in methods:
        try:
            import cv2  # noqa: F401
        except ImportError:
            methods = tuple(m for m in methods if m != "telea")
    stride = None if stride is None else check_int("stride", stride)
    if n_jobs is not None:
        check_int("n_jobs", n_jobs)
    images = sorted(p for p in image_dir.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    units = []
    for img in images:
        for kind in mask_kinds:
            mask = mask_dir / f"{img.stem}_{kind}.png"
            if mask.is_file():
                units.append(Unit((img.stem, kind), run_inpaint_unit, (str(img), str(mask), kind, methods, stride),
                                  frozenset((img.stem, kind, m) for m in methods)))
    if not units:
        raise ValueError(f"no image of {str(image_dir)!r} has a mask <image>_<kind>.png in {str(mask_dir)!r} "
                         f"for kinds {', '.join(mask_kinds)}")
    config = {"task": "inpaint", "images": sorted({u.key[0] for u in units}), "mask_kinds": list(mask_kinds),
              "methods": list(methods), "stride": stride}
    with OutputFolder(out_dir, config, force=force, input_dir=image_dir) as folder:
        rows = folder.run(units, lambda r: (r["image"], r["mask"], r["method"]), INPAINT_COLUMNS,
                          {"psnr": float, "seconds": float}, progress, n_jobs, scheduler)
        rows.sort(key=lambda r: (r["mask"], r["image"], methods.index(r["method"])))
        folder.write_text("results.csv", csv_text(rows, INPAINT_COLUMNS))
        folder.write_text("table.md", inpainting_table(rows, methods))
        folder.finish()
    return rows
