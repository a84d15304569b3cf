"""Image files for the command line: read them as stored, check an output before any work, write atomically.

Formats by suffix. 16-bit PNG goes through pypng (Pillow reads 16-bit colour
PNG as 8-bit and cannot write it), TIFF through tifffile, the rest through
imageio. Every failure is a ValueError with a one-line message.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ._io import atomic_path

__all__ = ["IMAGEJ_DTYPES", "TiffInfo", "check_output", "read_image", "read_mask", "tiff_info", "tiff_options",
           "write_image"]

# What each format can hold: dtypes and numbers of channels (1 = grey).
_TIFF_DTYPES = ("uint8", "uint16", "uint32", "int8", "int16", "int32", "float32", "float64")
_FORMATS = {
    ".png": ("PNG", ("uint8", "uint16"), (1, 2, 3, 4)),
    ".jpg": ("JPEG", ("uint8",), (1, 3)),
    ".jpeg": ("JPEG", ("uint8",), (1, 3)),
    ".bmp": ("BMP", ("uint8",), (1, 3, 4)),
    ".tif": ("TIFF", _TIFF_DTYPES, (1, 2, 3, 4)),
    ".tiff": ("TIFF", _TIFF_DTYPES, (1, 2, 3, 4)),
}
_BITS = {"uint8": "8-bit", "uint16": "16-bit", "uint32": "32-bit", "float32": "float", "float64": "float"}
_LOSSY = (".jpg", ".jpeg")


def _format(path: Path) -> tuple[str, tuple[str, ...], tuple[int, ...]]:
    suffix = path.suffix.lower()
    if suffix not in _FORMATS:
        raise ValueError(f"unknown image format {suffix or '(no suffix)'!r} of {str(path)!r}: use one of "
                         f"{', '.join(sorted(set(_FORMATS)))}")
    return _FORMATS[suffix]


def is_lossy(path: Path) -> bool:
    """Whether the file's format compresses with loss (JPEG)."""
    return path.suffix.lower() in _LOSSY


def _png_bit_depth(data: bytes) -> int:
    """The bit depth in a PNG's header (IHDR), 0 if it is not a PNG."""
    return data[24] if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 25 else 0


def read_image(path: str | os.PathLike) -> np.ndarray:
    """An image file as stored (dtype and channels), (M, N) or (M, N, C)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"input image {str(path)!r} does not exist")
    data = path.read_bytes()  # readers get bytes: no file handle left open on failure
    axes = ""
    try:
        if _png_bit_depth(data) == 16:
            import png

            w, h, rows, info = png.Reader(bytes=data).read_flat()
            img = np.asarray(rows, dtype=np.uint16).reshape(h, w, info["planes"])
        elif path.suffix.lower() in (".tif", ".tiff"):
            import io

            import tifffile

            with tifffile.TiffFile(io.BytesIO(data)) as tif:
                series = tif.series[0]
                axes = f" (axes {series.axes})"
                img = series.asarray()
                samples = series.axes.find("S")
                if 0 <= samples < len(series.axes) - 1:  # planar RGB (SYX): the colours go last, as elsewhere
                    img = np.moveaxis(img, samples, -1)
        else:
            import imageio.v3 as iio

            img = iio.imread(data, extension=path.suffix.lower() or None)
    except Exception as exc:  # noqa: BLE001 - any reader failure is one clear line
        raise ValueError(f"cannot read {str(path)!r} as an image: {str(exc).splitlines()[0] if str(exc) else exc!r}"
                         ) from None
    img = np.asarray(img)
    if img.ndim == 3 and img.shape[-1] == 1:
        img = img[..., 0]
    if img.size == 0:
        raise ValueError(f"{str(path)!r} holds no pixels: its data has shape {img.shape}")
    if img.ndim not in (2, 3):
        raise ValueError(f"{str(path)!r} holds data of shape {img.shape}{axes}: restore reads a plane (grey or "
                         "colour) or a stack of grey planes (a volume with --volume); save one volume (one channel "
                         "or time point) as a TIFF of its own, or convert the file to a zarr store, whose leading "
                         "axes are denoised volume by volume")
    return img


@dataclass(frozen=True)
class TiffInfo:
    """What a TIFF file says besides its pixels, to write the result with it.

    Attributes
    ----------
    colour : bool
        Samples per pixel along the last axis (RGB(A)), not a stack of planes.
    resolution : (float, float) or None
        Pixels per unit along x and y (the XResolution and YResolution tags).
    resolution_unit : int or None
        The ResolutionUnit tag (1 none, 2 inch, 3 centimetre).
    imagej : dict or None
        ImageJ's spacing (z step) and unit when the file is an ImageJ hyperstack.
    axes : str or None
        tifffile's letters of the first series' axes (``'TYX'``, ``'ZYXS'``...).
    ome : dict or None
        The OME-XML voxel size of an OME-TIFF (``PhysicalSizeX``,
        ``PhysicalSizeXUnit``... of its Pixels), written as OME-TIFF again
        where ImageJ cannot hold the dtype.
    """

    colour: bool = False
    resolution: tuple[float, float] | None = None
    resolution_unit: int | None = None
    imagej: dict | None = None
    ome: dict | None = None
    axes: str | None = None


# ImageJ's metadata we carry over: the z step and the unit of the spacings (the x and y ones are the resolution)
_IMAGEJ_KEYS = ("spacing", "unit")
# ImageJ hyperstacks hold only these dtypes; others are written as plain TIFF with the resolution tags
IMAGEJ_DTYPES = ("uint8", "uint16", "float32")


def tiff_info(path: str | os.PathLike) -> TiffInfo:
    """The layout and spatial metadata of a TIFF file's first series (read without its pixels)."""
    import tifffile

    try:
        with tifffile.TiffFile(path) as tif:
            series, page = tif.series[0], tif.pages[0]
            ij = tif.imagej_metadata
            res = tuple(float(r) for r in page.resolution) if "XResolution" in page.tags else None
            unit = int(page.resolutionunit) if res is not None else None
            return TiffInfo(colour="S" in series.axes, resolution=res, resolution_unit=unit,
                            imagej={k: ij[k] for k in _IMAGEJ_KEYS if k in ij} if ij else None,
                            ome=_ome_sizes(tif.ome_metadata) if tif.is_ome else None, axes=series.axes)
    except Exception as exc:  # noqa: BLE001 - any reader failure is one clear line
        raise ValueError(f"cannot read {str(path)!r} as an image: {str(exc).splitlines()[0] if str(exc) else exc!r}"
                         ) from None


def _ome_sizes(xml: str | None) -> dict | None:
    """The voxel size (``PhysicalSize*`` attributes) of an OME-TIFF's first image, None without one."""
    import tifffile

    try:
        image = tifffile.xml2dict(xml or "")["OME"]["Image"]
        pixels = (image[0] if isinstance(image, list) else image)["Pixels"]
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    sizes = {k: v for k, v in pixels.items() if k.startswith("PhysicalSize")}
    return sizes or None


def read_mask(path: str | os.PathLike, shape: tuple[int, int]) -> tuple[np.ndarray, str | None]:
    """The missing pixels of a mask file (True = missing), and a warning to show, if any.

    Non-zero pixels are missing. A mask with transparency uses its alpha
    instead: opaque (alpha at least half) is missing, transparent is kept,
    whatever the colour (strokes painted on a transparent layer). A lossy
    (JPEG) mask is thresholded at half its range, with a warning.
    """
    path = Path(path)
    m = read_image(path)
    if m.shape[:2] != tuple(shape):
        raise ValueError(f"mask {str(path)!r} is {m.shape[1]}x{m.shape[0]}, the image is {shape[1]}x{shape[0]}")
    full = float(np.iinfo(m.dtype).max) if m.dtype.kind in "ui" else 1.0
    warning = None
    if m.ndim == 3 and m.shape[-1] in (2, 4) and np.any(m[..., -1] < full):
        return m[..., -1] >= full / 2, None
    value = m if m.ndim == 2 else m[..., : (1 if m.shape[-1] == 2 else 3)].max(axis=-1)
    if is_lossy(path):
        warning = (f"warning: mask {str(path)!r} is lossy (JPEG): pixels above half its range count as missing; "
                   "save masks as PNG")
        return value >= full / 2, warning
    return value != 0, warning


def check_output(path: str | os.PathLike, inputs: list[Path], force: bool, *,
                 dtype: np.dtype | None = None, channels: int | None = None, stack: bool = False) -> Path:
    """Refuse, before any work, an output that cannot be written or cannot hold the result.

    The output may not be an input file, a folder, in a missing or
    unwritable folder, or exist without ``force``; its format (by suffix)
    must hold ``dtype`` and ``channels`` when given, and stacks of planes
    when ``stack``.
    """
    path = Path(path)
    for src in inputs:
        if _same_file(src, path):
            raise ValueError(f"output {str(path)!r} is the input file; choose another name")
        if Path(src).is_dir() and path.absolute().resolve().is_relative_to(Path(src).absolute().resolve()):
            raise ValueError(f"output {str(path)!r} is inside the input {str(src)!r}; write it elsewhere")
    if path.is_dir():
        raise ValueError(f"output {str(path)!r} is a folder: give a file name")
    folder = path.parent
    if not folder.is_dir():
        raise ValueError(f"output folder {str(folder)!r} does not exist")
    if dtype is not None:
        name, dtypes, counts = _format(path)
        dt = np.dtype(dtype).name
        if dt not in dtypes:
            raise ValueError(f"{name} cannot hold {_BITS.get(dt, dt)} images ({str(path)!r}): use "
                             f"{'TIFF' if name != 'TIFF' else 'another type'}, or PNG for 8- and 16-bit")
        if channels is not None and channels not in counts:
            raise ValueError(f"{name} cannot hold images with {channels} channels ({str(path)!r})")
        if stack and name != "TIFF":
            raise ValueError(f"{name} cannot hold a stack of planes ({str(path)!r}): use TIFF (.tif) or zarr (.zarr)")
    if path.exists() and not force:
        raise ValueError(f"{str(path)!r} exists; pass --force to replace it")
    try:  # the folder takes a file: a probe, removed at once
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".restore-probe.")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ValueError(f"cannot write into {str(folder)!r}: {exc.strerror or exc}") from None
    return path


def write_image(path: Path, image: np.ndarray, tiff: TiffInfo | None = None) -> None:
    """Write an image atomically (a file beside the target, renamed over it when complete).

    A TIFF output takes the resolution and ImageJ spacing of ``tiff`` (the
    input's) when given; a 3-D grey image is written as a stack of planes.
    """
    image = np.asarray(image)
    suffix = path.suffix.lower()
    with atomic_path(path) as tmp:
        if suffix == ".png" and image.dtype == np.uint16:
            import png

            planes = 1 if image.ndim == 2 else image.shape[2]
            writer = png.Writer(image.shape[1], image.shape[0], bitdepth=16, greyscale=planes in (1, 2),
                                alpha=planes in (2, 4))
            with open(tmp, "wb") as fh:
                writer.write_array(fh, image.ravel())
        elif suffix in (".tif", ".tiff"):
            import tifffile

            tifffile.imwrite(tmp, image, **tiff_options(tiff, image))
        else:
            import imageio.v3 as iio

            iio.imwrite(tmp, image, extension=suffix)


def tiff_options(tiff: TiffInfo | None, image, stack_axis: str | None = None) -> dict:
    """Keywords of ``tifffile.imwrite`` for ``image`` (an array, maybe lazy) with ``tiff``'s metadata.

    The resolution, with its unit unless the file is an ImageJ hyperstack
    (ImageJ names the unit in its own metadata), and ImageJ's spacing and
    unit for the dtypes ImageJ holds; ``stack_axis`` is ImageJ's letter for
    the planes of a 3-D grey image (Z, C or T; default: the input TIFF's,
    else Z).
    """
    colour = image.ndim == 3 and image.shape[2] in (3, 4) if tiff is None else tiff.colour
    kw: dict = {"photometric": "rgb" if colour else "minisblack"}
    if tiff is None:
        return kw
    imagej = tiff.imagej is not None and np.dtype(image.dtype).name in IMAGEJ_DTYPES
    if tiff.resolution is not None:
        kw["resolution"] = tiff.resolution
        if not imagej and tiff.resolution_unit is not None:
            kw["resolutionunit"] = tiff.resolution_unit
    if stack_axis is None:
        first = (tiff.axes or "Z")[0]
        stack_axis = first if first in "TZC" else "Z"
    axes = ("YXS" if colour else "YX") if image.ndim == (3 if colour else 2) else f"{stack_axis}YX"
    if imagej:
        kw.update(imagej=True, metadata={**tiff.imagej, "axes": axes})
    elif tiff.ome:  # a voxel size ImageJ cannot hold for this dtype: OME-TIFF
        sizes = {k: v for k, v in tiff.ome.items() if "Z" not in k or axes.startswith("Z")}
        kw.update(ome=True, metadata={**sizes, "axes": axes})
    return kw


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (b.exists() and os.path.samefile(a, b))
    except OSError:
        return False
