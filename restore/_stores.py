"""Zarr stores and TIFF stacks for the command line: read lazily, check an output before any work, write atomically.

An input is a plain array at the root of a store (zarr format 2 or 3), an
array inside one (``store.zarr/path``), an OME-Zarr image, whose level 0
(full resolution) is read, or a TIFF plane or grey stack, read through
tifffile's zarr store. Everything stays lazy (:func:`dask.array.from_zarr`):
the work is done chunk by chunk when the result is written, a batch of
chunks at a time, so that memory does not grow with the volume.

An output store is written into a temporary folder beside its target and
renamed into place when complete, so a failure or Ctrl-C leaves nothing.
It carries the attribute ``restore`` naming the command that wrote it; an
existing store is replaced (with ``force``) only when it carries that mark:
a store we did not write is the user's. An OME-Zarr input gives an OME-Zarr
output with the same axes, scales and rendering settings (``omero``) and
the same levels: the denoised full resolution, and below it each lower
resolution as the means of blocks of the one above; a plain array gives a
plain array with the input's chunks and dtype; a TIFF gives an OME-Zarr
image with its voxel size. A TIFF output is written page by page into a file beside its
target, renamed into place, with the voxel size of the store or TIFF it
comes from.

A store may also be a URL that zarr reads through fsspec (``s3://``,
``gs://``, ``memory://``; ``https://`` for reading): a cluster's workers
then need no folder shared with the caller. An object store has no rename:
the output is written beside its target under a hidden name and moved into
place (copied object by object) when complete, or removed.

On a cluster (``--scheduler``) each block is written by a task of its own,
followed from here: the bar counts blocks, a cluster left without workers
or a task that kills them stops the run in one line, and an interrupt
waits for the tasks already running on workers before the temporary store
is removed (a cancelled task finishes and would write it back).

The OME-NGFF metadata is read and written with zarr itself, by hand:
``ome-zarr``'s ``write_multiscales_metadata`` builds the multiscales entry
from its arguments only (datasets, axes, name, ``metadata``), so an input's
other keys (a multiscale-level ``coordinateTransformations``, ``type``)
would be lost or could not be set, and its version from the format it is
given, not the input's (0.4 in zarr format 2 stays 0.4 here). What we
write is the input's entry with our levels and how they were made; the
tests read every kind of output back with ``ome-zarr-models``' validating
models.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ._config import default_num_threads
from ._progress import stopped_by

__all__ = ["ClusterError", "ZarrInput", "check_zarr_output", "connect", "is_tiff", "is_zarr",
           "open_tiff", "open_zarr", "streams", "tiff_calibration", "write_tiff", "write_zarr"]

MARK = "restore"  # attribute of the stores we write: --force replaces only those
_METADATA = (".zarray", ".zgroup", "zarr.json")  # a folder with one of these is a zarr store (format 2 or 3)
_DASK_TIMEOUT = "10s"  # waiting for a Dask scheduler before reporting it unreachable (the CLI, restore.evaluate)
#: Seconds between two looks at a cluster's run: its blocks written, its workers (one small message each).
_POLL_S = 0.5
#: Seconds a cluster may have no worker before the run stops: a nanny restarts a dead worker in 1-2 s.
_LOST_S = 10.0
#: Seconds to wait, after an interrupt, for the tasks already running on workers (a block each) to finish.
_SETTLE_S = 120.0
#: Seconds between redraws of the progress bar on a terminal, and into a file (a log of a long run).
_BAR_S = 0.1
_LOG_BAR_S = 1.0
#: OME-NGFF's downsampling description of our lower levels: means of whole blocks, what ome-zarr's Scaler calls
#: 'local_mean' (scikit-image's downscale_local_mean).
_PYRAMID_TYPE = {"type": "local_mean", "metadata": {
    "description": "each level is the mean of blocks of voxels of the level above (restore denoise)",
    "method": "dask.array.coarsen(numpy.mean)"}}
_WRITE = "restore-write"  # name of the tasks writing blocks into an output store
#: Voxels of the result computed at a time on local threads (4 MB as float32), at least a chunk a thread: its inputs,
#: with their overlaps and a halo of neighbouring chunks, are all that is read ahead of the work (about 70 MB as
#: float32 with the blocks of the defaults, 64**3 voxels overlapping by 32, while one of them is denoised); re-reading
#: the halo costs little next to the denoising.
BATCH_VOXELS = 1 << 20
#: TIFF stacks of more voxels than this are read and written in blocks, as zarr stores are: in memory the library
#: holds about 100 bytes per voxel of a volume (its trees), 1.6 GB at this size.
STREAM_VOXELS = 1 << 24
#: Blocks a TIFF is read in, by its number of axes: 0.5 M voxels for a stack, as the chunks of the memory tests
#: (under 700 MB at the peak on two threads), of 32 planes (a TIFF output holds one row of blocks in memory);
#: 1 M pixels for a plane.
TIFF_CHUNKS = {2: (1024, 1024), 3: (32, 128, 128)}
TIFF_SUFFIXES = (".tif", ".tiff")
_BIGTIFF_BYTES = 2**32 - 2**25  # pixels past 4 GB less room for the tags need BigTIFF (tifffile.imwrite's rule)
# OME-NGFF's units (UDUNITS-2 names) as ImageJ names them, the other way with its other spellings, the units of
# the TIFF ResolutionUnit tag, and lengths in centimetres (a plain TIFF's resolution is per centimetre)
_IMAGEJ_NAMES = {"nanometer": "nm", "micrometer": "um", "millimeter": "mm", "centimeter": "cm", "meter": "m",
                 "inch": "inch"}
_IMAGEJ_UNITS = {**{v: k for k, v in _IMAGEJ_NAMES.items()}, "micron": "micrometer", "\u00b5m": "micrometer",
                 "\u03bcm": "micrometer", "\\u00B5m": "micrometer"}
_TIFF_UNITS = {2: "inch", 3: "centimeter"}
# OME-Zarr's unit names in OME-XML (OME-TIFF), and back
_OME_XML_UNITS = {"nanometer": "nm", "micrometer": "\u00b5m", "millimeter": "mm", "centimeter": "cm", "meter": "m",
                  "inch": "in"}
_OME_ZARR_UNITS = {v: k for k, v in _OME_XML_UNITS.items()}
_CENTIMETRES = {"nanometer": 1e-7, "micrometer": 1e-4, "millimeter": 0.1, "centimeter": 1.0, "meter": 100.0,
                "inch": 2.54}


def is_url(path: Any) -> bool:
    """Whether ``path`` is a URL (``s3://``, ``gs://``, ``https://``, ``memory://``...), read through fsspec."""
    return isinstance(path, str) and "://" in path and not path.startswith("file://")


def location(path: str | os.PathLike) -> str | Path:
    """Where a store is: a URL as given (without a trailing slash), else an absolute local path.

    Absolute: Dask's workers (``--scheduler``) open the stores from folders
    of their own; a URL means the same on every machine.
    """
    if is_url(path):
        return str(path).rstrip("/")
    return Path(str(path).removeprefix("file://")).absolute()


def _fs(url: str) -> tuple[Any, str]:
    """The fsspec file system of a URL and the path on it."""
    from fsspec.core import url_to_fs

    return url_to_fs(url)


def is_zarr(path: str | os.PathLike) -> bool:
    """Whether a path names a zarr store: a ``.zarr`` suffix (of the URL or one of its parts), or zarr metadata."""
    if is_url(path):
        return any(part.lower().endswith(".zarr") for part in str(path).split("/"))
    path = Path(path)
    if path.suffix.lower() == ".zarr":
        return True
    return path.is_dir() and any((path / m).is_file() for m in _METADATA)


def is_tiff(path: str | os.PathLike) -> bool:
    """Whether a path names a TIFF file (by its suffix)."""
    return Path(path).suffix.lower() in TIFF_SUFFIXES


def streams(path: str | os.PathLike) -> bool:
    """Whether a TIFF is a grey stack of more than :data:`STREAM_VOXELS` voxels (False if unreadable)."""
    if not is_tiff(path) or not Path(path).is_file():
        return False
    import tifffile

    try:
        with tifffile.TiffFile(path) as tif:
            series = tif.series[0]
            return len(series.shape) == 3 and "S" not in series.axes and int(np.prod(series.shape)) > STREAM_VOXELS
    except Exception:  # noqa: BLE001 - unreadable: the reader of whole images says why
        return False


@dataclass(frozen=True)
class ZarrInput:
    """A zarr input: its array (lazy) and what the output keeps of it.

    Attributes
    ----------
    path : Path
        The store (or array) as given.
    data : dask.array.Array
        Level 0, chunked as stored.
    zarr_format : int
        2 or 3.
    axes : list of dict or None
        The OME-Zarr axes (name, type, unit), None for a plain array.
    attributes : dict
        The OME-Zarr group attributes to write again (level 0 only), empty for
        a plain array.
    array_path : str
        The array's path inside the output store ('' for a root array).
    dimension_names : tuple or None
        Zarr format 3 dimension names.
    file : object or None
        What reads the data (an open TIFF file), closed by :meth:`close`.
    pyramid : tuple of (str, tuple, tuple)
        The OME-Zarr image's lower resolutions: path, shape and chunks of
        each level after level 0, in order.
    array_attributes : dict
        The array's own attributes (xarray's dimension names...), but our mark.
    chunks : tuple or None
        The array's declared chunks (they may exceed its shape).
    shards : tuple or None
        Its shards (zarr format 3).
    fill_value : object
        Its fill value.
    """

    path: Path
    data: Any
    zarr_format: int
    axes: list | None = None
    attributes: dict = field(default_factory=dict)
    array_path: str = ""
    dimension_names: tuple | None = None
    file: Any = None
    pyramid: tuple = ()
    array_attributes: dict = field(default_factory=dict)
    chunks: tuple | None = None
    shards: tuple | None = None
    fill_value: Any = None

    def close(self) -> None:
        """Close the file the data is read from, if any."""
        if self.file is not None:
            self.file.close()

    @property
    def ome(self) -> bool:
        """Whether the input is an OME-Zarr image."""
        return self.axes is not None

    def axes_of(self, kind: str) -> list[int]:
        """Indices of the OME-Zarr axes of a type ('space', 'channel', 'time'); [] for a plain array."""
        return [i for i, a in enumerate(self.axes or []) if a.get("type") == kind]


def _ome_multiscales(attrs: dict) -> list | None:
    """The multiscales entry of OME-Zarr group attributes (0.5: under 'ome'; 0.4 and before: at the top)."""
    if isinstance(attrs.get("ome"), dict) and "multiscales" in attrs["ome"]:
        return attrs["ome"]["multiscales"]
    return attrs.get("multiscales")


def _axes(ms: dict, ndim: int) -> list[dict]:
    """OME axes as dicts; 0.3's names only are typed by their letter."""
    axes = ms.get("axes") or [{"name": n} for n in "tczyx"[-ndim:]]
    out = []
    for a in axes:
        a = {"name": a} if isinstance(a, str) else dict(a)
        if "type" not in a:
            a["type"] = {"t": "time", "c": "channel"}.get(a["name"], "space")
        out.append(a)
    return out


def open_zarr(path: str | os.PathLike) -> ZarrInput:
    """Open a zarr input lazily: a plain array, or level 0 of an OME-Zarr image."""
    import dask.array as da
    import zarr

    path = location(path)
    if not is_url(path) and not path.is_dir():
        raise ValueError(f"input store {str(path)!r} does not exist")
    try:
        node = zarr.open(str(path), mode="r")
    except Exception as exc:  # noqa: BLE001 - any reader failure is one clear line
        raise ValueError(f"cannot read {str(path)!r} as a zarr store: {_first_line(exc)}") from None
    attributes, axes, array_path, pyramid = {}, None, "", []
    if isinstance(node, zarr.Group):
        attrs = dict(node.attrs)
        multiscales = _ome_multiscales(attrs)
        if not multiscales:
            arrays = sorted(name for name, _ in node.arrays())
            hint = f": give the array's path, e.g. {f'{path}/{arrays[0]}'!r}" if arrays else ""
            raise ValueError(f"{str(path)!r} is a zarr group, not an array or an OME-Zarr image{hint}")
        ms = dict(multiscales[0])
        level0 = dict(ms["datasets"][0])
        array_path = str(level0["path"])
        arr = node[array_path]
        axes = _axes(ms, arr.ndim)
        for level in ms["datasets"][1:]:
            low = node.get(str(level["path"]))
            if not isinstance(low, zarr.Array) or low.ndim != arr.ndim:  # a broken pyramid ends there
                break
            pyramid.append((str(level["path"]), tuple(low.shape), tuple(low.chunks)))
        ms["datasets"] = [level0]  # the levels below are written again from it (write_zarr)
        ms["axes"] = ms.get("axes", axes)
        if "ome" in attrs:
            attributes = {"ome": {**attrs["ome"], "multiscales": [ms]}}
        else:
            attributes = {"multiscales": [ms], **({"omero": attrs["omero"]} if "omero" in attrs else {})}
    else:
        arr = node
    fmt = int(arr.metadata.zarr_format)
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{str(path)!r} holds {arr.dtype} data: expected real numbers (bool, integer or float)")
    if arr.ndim < 2 or arr.size == 0:
        raise ValueError(f"{str(path)!r} holds data of shape {arr.shape}: expected an image or a volume")
    names = getattr(arr.metadata, "dimension_names", None) if fmt == 3 else None
    shards = getattr(arr, "shards", None) if fmt == 3 else None
    return ZarrInput(path, da.from_zarr(arr), fmt, axes, attributes, array_path, tuple(names) if names else None,
                     pyramid=tuple(pyramid), array_attributes={k: v for k, v in arr.attrs.items() if k != MARK},
                     chunks=tuple(arr.chunks), shards=tuple(shards) if shards else None, fill_value=arr.fill_value)


def open_tiff(path: str | os.PathLike, info: Any = None) -> ZarrInput:
    """Open a TIFF plane or stack of grey planes lazily (its first series), in blocks of :data:`TIFF_CHUNKS`.

    Its OME-Zarr description (written when the output is a store) has the
    axes z (or t or c, by the TIFF's letter), y and x, with the voxel size of
    ``info`` (a :class:`restore._files.TiffInfo`): the resolution and
    ImageJ's spacing and unit. The file stays open until the input is closed.
    """
    import dask.array as da
    import tifffile
    import zarr

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"input image {str(path)!r} does not exist")
    try:
        tif = tifffile.TiffFile(path)
    except Exception as exc:  # noqa: BLE001 - any reader failure is one clear line
        raise ValueError(f"cannot read {str(path)!r} as an image: {_first_line(exc)}") from None
    try:
        series = tif.series[0]
        if "S" in series.axes or len(series.shape) not in TIFF_CHUNKS:
            raise ValueError(f"{str(path)!r} holds data of shape {series.shape} (axes {series.axes}): expected a grey "
                             "plane or a stack of grey planes")
        if np.dtype(series.dtype).kind not in "biuf":
            raise ValueError(f"{str(path)!r} holds {series.dtype} data: expected real numbers (integer or float)")
        shape = tuple(series.shape)
        chunks = tuple(min(c, n) for c, n in zip(TIFF_CHUNKS[len(shape)], shape, strict=True))
        # read whole rows of blocks (each page once), then split them into blocks: views, not copies
        rows = da.from_zarr(zarr.open_array(series.aszarr(level=0), mode="r"), chunks=(chunks[0], *shape[1:]))
        axes, scale = _tiff_axes(series.axes, info)
        ms = {"name": path.stem, "axes": axes,
              "datasets": [{"path": "0", "coordinateTransformations": [{"type": "scale", "scale": scale}]}]}
        return ZarrInput(path, rows.rechunk(chunks), 3, axes, {"ome": {"version": "0.5", "multiscales": [ms]}}, "0",
                         tuple(a["name"] for a in axes), file=tif)
    except BaseException:
        tif.close()
        raise


def _tiff_axes(letters: str, info: Any) -> tuple[list[dict], list[float]]:
    """OME axes and scales of a TIFF plane or stack (its axes' letters), from its resolution and ImageJ spacing.

    y and x take the resolution's unit: ImageJ's, else the ResolutionUnit
    tag's (inch, centimetre), else none; the planes' axis its ImageJ spacing.
    An OME-TIFF without ImageJ metadata gives its own voxel size and units.
    """
    imagej, ome = getattr(info, "imagej", None), getattr(info, "ome", None)
    sizes: dict[str, tuple[float, str | None]]  # by axis name: size and OME-Zarr unit
    if not imagej and ome and "PhysicalSizeX" in ome and "PhysicalSizeY" in ome:  # an OME-TIFF's own voxel size
        sizes = {n.lower(): (float(ome[f"PhysicalSize{n}"]), _OME_ZARR_UNITS.get(ome.get(f"PhysicalSize{n}Unit")))
                 for n in "ZYX" if f"PhysicalSize{n}" in ome}
    else:
        resolution = getattr(info, "resolution", None)
        if imagej:
            unit = _IMAGEJ_UNITS.get(str(imagej.get("unit", "")).strip())
        else:
            unit = _TIFF_UNITS.get(getattr(info, "resolution_unit", None)) if resolution is not None else None
        if resolution is None or not all(r > 0 for r in resolution):
            resolution = (1.0, 1.0)
        sizes = {"y": (1 / float(resolution[1]), unit), "x": (1 / float(resolution[0]), unit)}
        if imagej and "spacing" in imagej:
            sizes["z"] = (float(imagej["spacing"]), unit)
    kinds = [("y", "space"), ("x", "space")]
    if len(letters) == 3:
        kinds.insert(0, {"T": ("t", "time"), "C": ("c", "channel")}.get(letters[0], ("z", "space")))
    axes, scale = [], []
    for name, kind in kinds:
        size, unit = sizes.get(name, (1.0, None))
        axes.append({"name": name, "type": kind, **({"unit": unit} if unit else {})})
        scale.append(size)
    return axes, scale


def _scale(src: ZarrInput) -> list[float] | None:
    """The voxel size of an OME-Zarr input's level 0 (its scales and its image's), None for a plain array."""
    multiscales = _ome_multiscales(src.attributes)
    if not multiscales:
        return None
    ms = multiscales[0]
    scale = np.ones(src.data.ndim)
    for t in [*ms["datasets"][0].get("coordinateTransformations", []), *ms.get("coordinateTransformations", [])]:
        if t.get("type") == "scale" and "scale" in t:
            scale = scale * np.asarray(t["scale"], dtype=float)
    return [float(s) for s in scale]


def tiff_calibration(src: ZarrInput, dims: list[int], imagej: bool) -> dict:
    """The resolution, its unit and ImageJ's metadata of a TIFF of an input's axes ``dims`` (2 or 3).

    From the OME scales and units: for an ImageJ file (``imagej``), pixels
    per unit along x and y with ImageJ's name of the unit, and the spacing of
    the planes when they are along space; for another, pixels per centimetre
    when the unit is a length, else per unit. Empty for a plain array (it
    has no voxel size). The keys are those of
    :class:`restore._files.TiffInfo`.
    """
    scale = _scale(src)
    if scale is None:
        return {}
    y, x = dims[-2:]
    unit = src.axes[x].get("unit")
    if imagej:
        meta = {"unit": _IMAGEJ_NAMES.get(unit, unit)} if unit else {}
        if len(dims) == 3 and src.axes[dims[0]].get("type") == "space":
            spacing, z_unit = scale[dims[0]], src.axes[dims[0]].get("unit")
            if unit in _CENTIMETRES and z_unit in _CENTIMETRES:  # ImageJ has one unit
                spacing *= _CENTIMETRES[z_unit] / _CENTIMETRES[unit]
            meta["spacing"] = spacing
        return {"resolution": (1 / scale[x], 1 / scale[y]), "imagej": meta}
    ome = {f"PhysicalSize{k}": float(scale[a]) for k, a in (("X", x), ("Y", y))}
    ome.update({f"PhysicalSize{k}Unit": _OME_XML_UNITS[src.axes[a].get("unit")] for k, a in (("X", x), ("Y", y))
                if src.axes[a].get("unit") in _OME_XML_UNITS})
    if len(dims) == 3 and src.axes[dims[0]].get("type") == "space":
        ome["PhysicalSizeZ"] = float(scale[dims[0]])
        if src.axes[dims[0]].get("unit") in _OME_XML_UNITS:
            ome["PhysicalSizeZUnit"] = _OME_XML_UNITS[src.axes[dims[0]]["unit"]]
    per = _CENTIMETRES.get(unit)
    if per is None:
        return {"resolution": (1 / scale[x], 1 / scale[y]), "resolution_unit": 1, "ome": ome}
    return {"resolution": (1 / (scale[x] * per), 1 / (scale[y] * per)), "resolution_unit": 3, "ome": ome}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _mark(path: Path) -> dict | None:
    """Our mark on an existing store (its root attributes), None if it has none."""
    try:
        import zarr

        mark = dict(zarr.open(str(path), mode="r").attrs).get(MARK)
    except Exception:  # noqa: BLE001 - unreadable: not a store we wrote
        return None
    return mark if isinstance(mark, dict) and mark.get("written_by") else None


def _inside(a: Path, b: Path) -> bool:
    """Whether ``a`` is ``b`` or lies inside it (resolved)."""
    a, b = a.resolve(), b.resolve()
    return a == b or b in a.parents


def check_zarr_output(path: str | os.PathLike, inputs: list[Path], force: bool) -> Path:
    """Refuse, before any work, an output store that cannot be written or would replace the user's data.

    The output must end in ``.zarr``, may not be, hold or lie inside an
    input, must be in an existing writable folder, and may exist only with
    ``force`` and only as a store that ``restore`` wrote.
    """
    if is_url(path):
        return _check_url_output(location(path), inputs, force)
    path = Path(path)
    if path.suffix.lower() != ".zarr":
        raise ValueError(f"output {str(path)!r}: a zarr input is written to a zarr store: give a name ending in "
                         ".zarr")
    inputs = [src for src in inputs if not is_url(src)]
    for src in inputs:
        if _inside(path, src) or _inside(src, path):
            raise ValueError(f"output {str(path)!r} is the input {str(src)!r} or overlaps it; choose another name")
    folder = path.parent
    if not folder.is_dir():
        raise ValueError(f"output folder {str(folder)!r} does not exist")
    if path.exists() or path.is_symlink():
        if not path.is_dir():
            raise ValueError(f"output {str(path)!r} exists and is not a zarr store; choose another name")
        if not force:
            raise ValueError(f"{str(path)!r} exists; pass --force to replace it")
        if _mark(path) is None:
            raise ValueError(f"{str(path)!r} was not written by restore: it is never replaced; move it away or "
                             "choose another name")
    try:  # the folder takes a folder: a probe, removed at once
        os.rmdir(tempfile.mkdtemp(dir=folder, prefix=".restore-probe."))
    except OSError as exc:
        raise ValueError(f"cannot write into {str(folder)!r}: {exc.strerror or exc}") from None
    return path


def _check_url_output(url: str, inputs: list, force: bool) -> str:
    """:func:`check_zarr_output` of a URL: the same rules, on the object store (a probe object written, removed)."""
    import uuid

    if not url.lower().endswith(".zarr"):
        raise ValueError(f"output {url!r}: a zarr input is written to a zarr store: give a name ending in .zarr")
    for src in map(str, inputs):
        if url == src or url.startswith(src + "/") or src.startswith(url + "/"):
            raise ValueError(f"output {url!r} is the input {src!r} or overlaps it; choose another name")
    try:
        fs, where = _fs(url)
        exists = fs.exists(where)
    except Exception as exc:  # noqa: BLE001 - an unknown protocol, a missing package, no access: one line
        raise ValueError(f"cannot reach the output {url!r}: {_first_line(exc)}") from None
    if exists:
        if not force:
            raise ValueError(f"{url!r} exists; pass --force to replace it")
        if _mark(url) is None:
            raise ValueError(f"{url!r} was not written by restore: it is never replaced; move it away or choose "
                             "another name")
    probe = f"{where.rsplit('/', 1)[0]}/.restore-probe.{uuid.uuid4().hex}"
    try:
        fs.pipe_file(probe, b"")
        fs.rm_file(probe)
    except Exception as exc:  # noqa: BLE001 - read-only (https), no permission: one line
        raise ValueError(f"cannot write beside {url!r}: {_first_line(exc)}") from None
    return url


def connect(scheduler: str):
    """A ``dask.distributed`` client of the scheduler at this address; ConnectionError if unreachable."""
    try:
        from dask.distributed import Client
    except ImportError:
        raise ValueError("a Dask scheduler (--scheduler) needs dask.distributed: "
                         "pip install 'restore-tree[dask]'") from None
    try:
        return Client(scheduler, timeout=_DASK_TIMEOUT)
    except (OSError, TimeoutError, ValueError) as exc:
        raise ConnectionError(f"cannot reach the Dask scheduler at {scheduler!r}: {_first_line(exc)}") from None


def write_zarr(path: Path, data: Any, like: ZarrInput, *, source: str, scheduler: str | None = None,
               progress: bool = True) -> None:
    """Compute ``data`` (lazy) chunk by chunk into a new store at ``path``, atomically.

    The store has ``like``'s chunks, zarr format and OME-Zarr metadata,
    ``data``'s dtype, and our mark (``source`` names the input). An OME-Zarr
    input's pyramid is written again below the result, level by level (see
    :func:`_pyramid`). The store is built in a temporary folder beside
    ``path`` and renamed into place when complete; on any failure or
    interrupt the temporary folder is removed once no task writes into it
    any more. An existing ``path`` (checked by :func:`check_zarr_output`) is
    replaced only after the new store is complete.
    """
    import copy

    import dask.array as da
    import zarr

    chunks = like.chunks or tuple(c[0] for c in like.data.chunks)
    # a task writes whole shards (several tasks writing one shard would lose some of their chunks)
    written = da.core.normalize_chunks(like.shards, data.shape) if like.shards else like.data.chunks
    levels = _pyramid(like, data.shape)
    if is_url(path):
        import uuid

        head, name = str(path).rsplit("/", 1)
        tmp: Any = f"{head}/.{name}.{uuid.uuid4().hex[:8]}.tmp"
    else:
        tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    try:
        mark = {MARK: {"written_by": "restore denoise", "input": source}}
        kw: dict = {"dtype": data.dtype}
        names = like.dimension_names
        if names is None and like.ome and like.zarr_format == 3 and like.axes:
            names = tuple(a["name"] for a in like.axes)  # OME-NGFF 0.5: arrays name their dimensions as its axes
        if names is not None:
            kw["dimension_names"] = names
        own = {"fill_value": like.fill_value} if like.fill_value is not None and data.dtype == like.data.dtype else {}
        own.update({"shards": like.shards} if like.shards else {})
        if like.ome:
            attributes = copy.deepcopy(like.attributes)
            ms = _ome_multiscales(attributes)[0]
            ms["datasets"] = _datasets(ms["datasets"][0], levels, data.ndim)
            # how the input's levels were made is no longer true of ours
            ms.pop("type", None)
            ms.pop("metadata", None)
            if levels:
                ms.update(_PYRAMID_TYPE)
            group = zarr.open_group(str(tmp), mode="w", zarr_format=like.zarr_format,
                                    attributes={**attributes, **mark})
            target = group.create_array(like.array_path, shape=data.shape, chunks=chunks,
                                        attributes=like.array_attributes, **own, **kw)
        else:
            target = zarr.create_array(str(tmp), attributes={**like.array_attributes, **mark},
                                       zarr_format=like.zarr_format, shape=data.shape, chunks=chunks, **own, **kw)
        jobs = [(_on_chunks(data, written), target)]
        for level_path, shape, level_chunks, factors in levels:
            low = group.create_array(level_path, shape=shape, chunks=level_chunks, **kw)
            jobs.append((_downsample(jobs[-1][1], factors, level_chunks), low))
        _store(jobs, scheduler, progress)
        if is_url(path):
            _replace_url(tmp, str(path))
        else:
            os.chmod(tmp, 0o777 & ~_umask())
            _replace(tmp, path)
    except BaseException:
        with contextlib.suppress(Exception):  # a failing clean-up must not hide why the run stopped
            _remove(tmp)
        raise


def _on_chunks(data: Any, chunks: tuple[tuple[int, ...], ...]) -> Any:
    """``data`` in blocks of whole chunks of a store, so that each chunk is written whole by one task.

    Along each axis the coarser of the two chunkings is kept where one nests
    in the other: the denoiser's blocks merge a store's small chunks and
    split its large ones, and split again, the blocks of a batch would be
    computed again for the chunks of the next.
    """
    out = []
    for mine, theirs in zip(data.chunks, chunks, strict=True):
        a, b = set(np.cumsum(mine)), set(np.cumsum(theirs))
        out.append(mine if a <= b else theirs)  # theirs: coarser, or (neither nesting) what each task must write
    return data if tuple(out) == data.chunks else data.rechunk(tuple(out))


def _pyramid(like: ZarrInput, shape: tuple[int, ...]) -> list[tuple[str, tuple, tuple, tuple]]:
    """The levels below the full resolution to write, as the input has them: path, shape, chunks and factors.

    Shapes and factors are :func:`restore.pyramid.level_factors`'s (each level
    divides the one above it as the input's did, whole blocks only); the
    chunks are the input level's.
    """
    from .pyramid import level_factors

    levels = level_factors([tuple(like.data.shape), *(s for _, s, _ in like.pyramid)], shape)
    # strict=False: the levels stop before an empty one
    return [(path, new, tuple(min(c, n) for c, n in zip(chunks, new, strict=True)), factors)
            for (path, _, chunks), (new, factors) in zip(like.pyramid, levels, strict=False)]


def _datasets(level0: dict, levels: list, ndim: int) -> list[dict]:
    """OME-Zarr datasets of level 0 and the levels of :func:`_pyramid`, each the means of blocks of the first.

    A level's voxel is the mean of ``F`` voxels of level 0 along each axis:
    its size is ``F`` times theirs, and its centre lies ``(F - 1) / 2`` of
    theirs further than the first one's.
    """
    scale, shift = np.ones(ndim), np.zeros(ndim)
    for t in level0.get("coordinateTransformations", []):
        if t.get("type") == "scale" and "scale" in t:
            scale = scale * np.asarray(t["scale"], dtype=float)
        elif t.get("type") == "translation" and "translation" in t:
            shift = shift + np.asarray(t["translation"], dtype=float)
    out, total = [level0], np.ones(ndim)
    for path, _, _, factors in levels:
        total = total * np.asarray(factors)
        transforms = [{"type": "scale", "scale": [float(v) for v in scale * total]}]
        centre = shift + scale * (total - 1) / 2
        if np.any(centre != 0):
            transforms.append({"type": "translation", "translation": [float(v) for v in centre]})
        out.append({"path": path, "coordinateTransformations": transforms})
    return out


def _downsample(above: Any, factors: tuple[int, ...], chunks: tuple[int, ...]) -> Any:
    """The means of blocks of ``factors`` voxels of a stored level (lazy, :func:`restore.pyramid.block_mean`)."""
    import dask.array as da

    from .pyramid import block_mean

    return block_mean(da.from_zarr(above), factors).rechunk(chunks)


def write_tiff(path: Path, data: Any, options: dict, *, progress: bool = True) -> None:
    """Compute ``data`` (lazy, 2-D or 3-D) into a TIFF at ``path``, a row of blocks at a time, atomically.

    The planes are computed a row of ``data``'s blocks at a time (all the
    blocks of its first planes), in batches, and handed to tifffile page by
    page; ``options`` are ``tifffile``'s keywords (resolution, ImageJ
    metadata, see :func:`restore._files.tiff_options`). The file is written
    beside ``path`` and renamed over it when complete.
    """
    import tifffile

    from ._io import atomic_path

    options = dict(options)
    imagej, ome = options.pop("imagej", False), options.pop("ome", None)
    bigtiff = not imagej and data.nbytes > _BIGTIFF_BYTES
    with atomic_path(path) as tmp, _local_threads(data.npartitions, progress) as fill, \
            tifffile.TiffWriter(tmp, bigtiff=bigtiff, imagej=imagej, ome=ome) as tif:
        if data.ndim == 2:
            tif.write(fill(data), **options)
        else:
            tif.write(_planes(data, fill), shape=data.shape, dtype=data.dtype, **options)


def _planes(data: Any, fill: Any) -> Any:
    """The planes of a lazy 3-D array, computed a row of blocks at a time by ``fill``.

    Each plane is a copy: tifffile keeps the first one, and a view would keep
    its whole row of planes alive.
    """
    edges = np.cumsum((0, *data.chunks[0]))
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        row = fill(data[a:b])
        for i in range(len(row)):
            yield row[i].copy()
        del row  # before the next row is computed


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _remove(store: Path | str) -> None:
    """Remove a store of ours, a local folder or the objects under a URL, if it exists."""
    if not is_url(store):
        shutil.rmtree(store, ignore_errors=True)
        return
    with contextlib.suppress(FileNotFoundError):
        fs, where = _fs(str(store))
        fs.rm(where, recursive=True)


def _replace_url(tmp: str, url: str) -> None:
    """Move the finished store to its URL, after removing an old one (ours, checked).

    An object store has no rename of a folder: the move copies each object
    (on the server, for S3 and GCS) and deletes the original, and the old
    store is gone before the new one is complete there: not atomic, unlike
    a local store. Readers see the new store whole once this returns:
    chunks are copied first and the root's metadata last, so an interrupted
    copy leaves no store that opens, and it is removed.
    """
    fs, where = _fs(url)
    _remove(url)
    src = _fs(tmp)[1]
    fs.invalidate_cache()  # listings cached before the store was written would miss its objects
    files = fs.find(src)  # objects only: fs.mv also copies S3's folder placeholders, which are not objects

    def stage(f: str) -> int:  # chunks, then the arrays' metadata, then the root's: it opens only once complete
        rel = f[len(src):]
        if rel.rsplit("/", 1)[-1] not in _ZARR_METADATA:
            return 0
        return 2 if rel.count("/") == 1 else 1

    try:
        for k in range(3):
            part = [f for f in files if stage(f) == k]
            if part:
                fs.copy(part, [where + f[len(src):] for f in part])
    except BaseException:
        with contextlib.suppress(Exception):  # a partial store would read its missing chunks as zeros
            _remove(url)
        raise
    fs.rm(src, recursive=True)


# The metadata objects of zarr formats 2 and 3.
_ZARR_METADATA = frozenset({".zarray", ".zgroup", ".zattrs", "zarr.json"})


def _replace(tmp: Path, path: Path) -> None:
    """Rename the finished store into place; an old one (ours, checked) is set aside first, then removed."""
    if not path.exists():
        os.rename(tmp, path)
        return
    old = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".old"))
    os.rename(path, old / path.name)
    try:
        os.rename(tmp, path)
    except BaseException:
        os.rename(old / path.name, path)  # put the old store back
        raise
    finally:
        shutil.rmtree(old, ignore_errors=True)


def _batches(chunks: tuple[tuple[int, ...], ...], size: int) -> list[tuple[slice, ...]]:
    """Boxes of whole chunks, about ``size`` chunks each, that tile the array in C order.

    A box takes whole runs along the last axes first (all of the last
    axis, then all of the one before, ...) and as many of the next as fit,
    so that its halo of neighbouring chunks is small for its size.
    """
    edges = [np.cumsum((0, *c)) for c in chunks]
    counts = [len(c) for c in chunks]
    box, room = [1] * len(counts), max(1, size)
    for a in reversed(range(len(counts))):
        box[a] = max(1, min(counts[a], room))
        room //= box[a]
        if room <= 1:
            break
    starts = np.stack(np.meshgrid(*[range(0, n, b) for n, b in zip(counts, box, strict=True)], indexing="ij"), -1)
    return [tuple(slice(int(e[s]), int(e[min(s + b, n)])) for e, s, b, n in zip(edges, start, box, counts, strict=True))
            for start in starts.reshape(-1, len(counts))]


def _store(jobs: list[tuple[Any, Any]], scheduler: str | None, progress: bool) -> None:
    """Compute each lazy array into its target (on its chunks), in order, on a cluster or on local threads."""
    if scheduler is not None:
        _compute_distributed(jobs, scheduler, progress)
        return
    # no library call held open around the run: it would keep the newest plan (0.18 GB for a block of the defaults)
    # while a block of another shape runs with its own; rebuilding a plan costs about 6 % more CPU
    with _local_threads(sum(data.npartitions for data, _ in jobs), progress) as fill:
        for data, target in jobs:
            fill(data, target)


@contextlib.contextmanager
def _local_threads(chunks: int, progress: bool):
    """Yield ``fill(data, target=None)``: compute ``data`` into ``target`` (or a new array) in batches.

    Dask's threads schedule the tasks of a batch, a thread per core; how
    many blocks are denoised at once is bounded by memory, not by threads,
    in the denoiser (``restore.denoise._driver.BLOCK_MEMORY``: a block
    waits for its bytes), wherever its graph runs. The batches stay written
    by hand because Dask's local scheduler has no bound on what it reads
    ahead: it runs its ready tasks last in, first out, and on a whole graph
    the cheap reads of the input outrun the denoising, so held input grows
    with the volume (about +250 MB from 0.25 to 1 GB of float32).
    Computing :data:`BATCH_VOXELS` of the result at a time bounds it; the
    overlap of a batch's border chunks is read twice, never computed twice,
    so the result is the same. (A ``dask.distributed`` scheduler bounds its
    workers' memory itself: it queues the reads.) One progress bar on
    stderr counts the ``chunks`` written by all fills.
    """
    from concurrent.futures import ThreadPoolExecutor

    import dask
    import dask.array as da

    threads = default_num_threads()
    stop = threading.Event()
    pool = ThreadPoolExecutor(threads, thread_name_prefix="restore-dask", initializer=stopped_by, initargs=(stop,))
    bar = _ChunkBar(chunks) if progress else None

    def fill(data: Any, target: Any = None) -> Any:
        out = np.empty(data.shape, data.dtype) if target is None else target
        size = max(threads, BATCH_VOXELS // int(np.prod([c[0] for c in data.chunks])))
        for box in _batches(data.chunks, size):
            job = da.store(data[box], out, regions=box, lock=False, compute=False)
            with bar.batch(data[box].npartitions) if bar else contextlib.nullcontext():
                dask.compute(job)
        return out

    try:
        with dask.config.set(scheduler="threads", pool=pool):
            yield fill
    finally:
        if bar is not None:
            bar.close()
        # on Ctrl-C or a failure, the blocks being denoised stop at their next step (after a run, none is running);
        # they end before the caller removes the files they write into
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)


class ClusterError(ConnectionError):
    """The Dask cluster stopped serving the run: every worker lost, or a task that kills its workers."""


def _write_block(block: np.ndarray, target: Any, block_info: dict | None = None) -> np.ndarray:
    """Write one block into its place in ``target`` (a zarr array); a one-voxel marker for the task's result."""
    where = tuple(slice(a, b) for a, b in block_info[0]["array-location"])
    target[where] = block
    return np.zeros((1,) * block.ndim, np.uint8)


def _writes(data: Any, target: Any) -> Any:
    """One task per block of ``data`` writing it into ``target``; its tiny results count the blocks written."""
    import uuid

    import dask.array as da

    # named, not tokenised: hashing a zarr array's store would read it
    return da.map_blocks(_write_block, data, target=target, dtype=np.uint8, name=f"{_WRITE}-{uuid.uuid4().hex}",
                         chunks=tuple((1,) * len(c) for c in data.chunks), meta=np.empty((0,) * data.ndim, np.uint8))


def _compute_distributed(jobs: list[tuple[Any, Any]], scheduler: str, progress: bool) -> None:
    """Write each lazy array into its target on the cluster, in order, following each block's task.

    Polled every :data:`_POLL_S`: the bar advances as blocks are written
    (tqdm, at most once a second into a file), a cluster without workers
    for :data:`_LOST_S` stops the run (Dask would wait for workers forever),
    and a task that killed its workers (``KilledWorker``) stops it. On any
    failure or interrupt the tasks are cancelled and, since a cancelled task
    already running on a worker finishes (and writes), we wait until no
    worker runs one of ours, so that the caller's cleanup is the last word.
    """
    from dask.distributed import KilledWorker, futures_of, wait

    client = connect(scheduler)
    with client:
        bar = _bar(sum(data.npartitions for data, _ in jobs)) if progress else None
        futures: list = []
        try:
            for data, target in jobs:
                futures = futures_of(client.persist(_writes(data, target)))
                pending, lost_since = set(futures), None
                while pending:
                    with contextlib.suppress(TimeoutError):
                        wait(list(pending), timeout=_POLL_S, return_when="FIRST_COMPLETED")
                    done = {f for f in pending if f.done()}
                    for f in done:
                        if f.status != "finished":
                            f.result()  # raises the task's error
                    pending -= done
                    if bar is not None and done:
                        bar.update(len(done))
                    if client.nthreads():
                        lost_since = None
                    elif lost_since is None:
                        lost_since = time.monotonic()
                    elif time.monotonic() - lost_since > _LOST_S:
                        raise ClusterError(f"the Dask scheduler at {scheduler!r} has had no worker for "
                                           f"{_LOST_S:.0f} s (every worker lost): stopped")
                client.cancel(futures)  # their results are markers: free them
        except KilledWorker as exc:
            _settle(client, futures)
            raise ClusterError(f"a task of the run killed the Dask workers that ran it ({_first_line(exc)}): "
                               "stopped; workers often die of memory, give them more") from None
        except BaseException:
            _settle(client, futures)
            raise
        finally:
            if bar is not None:
                bar.close()


def _settle(client: Any, futures: list) -> None:
    """Cancel ``futures`` and wait (at most :data:`_SETTLE_S`) until no worker still runs a task of ours."""

    def ours_running(dask_worker: Any) -> int:
        return sum(1 for ts in list(dask_worker.state.tasks.values())
                   if ts.state in ("executing", "long-running", "cancelled", "resumed")
                   and str(ts.key).find(_WRITE) >= 0)

    with contextlib.suppress(Exception):  # a lost cluster: nothing left to wait for
        client.cancel(futures, force=True)
        end = time.monotonic() + _SETTLE_S
        while time.monotonic() < end and sum(client.run(ours_running, on_error="ignore").values()):
            time.sleep(_POLL_S)


def _bar(total: int) -> Any:
    """A tqdm line on stderr counting ``total`` chunks written: redrawn at most once a second into a file."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="denoise", unit="chunk", file=sys.stderr,
                mininterval=_BAR_S if sys.stderr.isatty() else _LOG_BAR_S,
                bar_format="{l_bar}{bar}| {n}/{total} chunks [{elapsed}<{remaining}]")


class _ChunkBar:
    """One tqdm line on stderr for all batches: the chunks written, counted as their store tasks finish.

    Whole chunks only, so that the count and the percentage agree (shares of
    a batch's tasks showed "73% 3/4").
    """

    def __init__(self, total: int) -> None:
        self.bar = _bar(total)

    def batch(self, chunks: int):
        """A Dask callback for a batch of ``chunks`` chunks: each chunk stored advances the bar by one."""
        from dask.callbacks import Callback

        bar, start = self.bar, self.bar.n

        class Batch(Callback):
            def _posttask(self, key, result, dsk, state, worker_id) -> None:
                # a chunk is written by its task of da.store's graph, keyed ('store-map-<token>', i, j, ...)
                if isinstance(key, tuple) and str(key[0]).startswith("store-map") and bar.n < start + chunks:
                    bar.update(1)

            def _finish(self, dsk, state, errored) -> None:
                if not errored:  # every chunk of the batch, whatever the graph's keys
                    bar.update(start + chunks - bar.n)

        return Batch()

    def close(self) -> None:
        self.bar.close()
