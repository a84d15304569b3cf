"""The driver every denoising method shares: all that is not the method.

A public denoising function checks its call with :func:`check_call` (the
image's layout, ``progress``, the noise model), builds its method (an object
with the :class:`~._units.UnitMethod` interface, its own settings checked) and returns
:func:`drive`. The driver then takes care of:

- the values (NaN, inf) and integer images (read in [0, 1]), and the output dtype;
- the noise model: chosen once on the whole image by its noise-level function
  (``noise='auto'``), named, or given as a :class:`restore.NoiseEstimate`;
  Gaussian sigma per channel (given, or estimated on each unit), or photon
  noise through the generalized Anscombe transform and back (gain and read
  noise estimated once on the whole, or the sample of a Dask array);
- the channels (the orthonormal opponent colour space for three);
- the leading axes (stacks of planes or volumes: one unit each);
- Dask arrays, in overlapping blocks (:func:`dask.array.map_overlap`) that
  keep to the method's :attr:`~._units.UnitMethod.grid` and overlap by its
  :attr:`~._units.UnitMethod.reach`, and volumes too large to transform whole, in the
  same blocks; blocks sized by memory, and as many denoised at once as
  :data:`BLOCK_MEMORY` holds, whatever the number of cores;
- progress (:class:`restore._progress.Steps`) and cancellation.

The method sees one unit at a time: a 2-D plane or 3-D volume of one
channel, float64, in white Gaussian noise (:meth:`~._units.UnitMethod.denoise`).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import sys
import threading
from typing import Any

import numpy as np

from .._cache import call_scope
from .._config import default_num_threads
from .._progress import BlockSteps, ProgressCallback, stop_check
from .._validation import check_callable, check_finite, check_image, output_dtype
from ..noise import NoiseEstimate, noise_sample
from ._layout import Layout, check_layout
from ._noise_model import NoiseModel, PhotonNoise, check_noise
from ._units import UnitMethod, denoise_units

# Volumes of more voxels than this (per channel) are denoised in memory as Dask arrays are, in overlapping blocks,
# and their noise estimated on the central part restore.noise_sample reads: transformed whole, a float32 volume takes
# about 35 bytes a voxel (40 under photon noise: benchmarks/bench_volume_bytes.py), 1.2 GB here, and the blocks of
# the defaults about 0.5 GB whatever the volume.
_WHOLE_MAX_VOXELS = 1 << 25  # 33.5 M voxels, 128 x 512 x 512


def is_dask(a: Any) -> bool:
    """Whether ``a`` is a Dask collection (:func:`dask.is_dask_collection`), without importing Dask for others."""
    dask = sys.modules.get("dask")  # nothing is a Dask collection unless Dask was imported
    return dask is not None and dask.is_dask_collection(a)


def check_call(image: Any, *, channel_axis, axes, noise: str | NoiseEstimate, sigma, gain, progress, sliced_axes=(),
               exact: bool = False) -> tuple[Any, Layout, NoiseModel]:
    """The checks of a denoising call that the driver owns, up front: the image (array or Dask), its layout, the noise.

    Returns the image (an ndarray, or the Dask array as given), its
    :class:`~._layout.Layout` and its noise model (parameters checked, none
    estimated). ``exact``: the image is one unit (no stacking axes).
    """
    arr = image if is_dask(image) else np.asarray(image)
    if is_dask(arr) and not hasattr(arr, "map_overlap"):
        raise ValueError(f"image must be an array or a dask.array.Array, got {type(image).__name__}")
    layout = check_layout(arr.shape, arr.dtype, channel_axis=channel_axis, axes=axes, sliced_axes=sliced_axes,
                          exact=exact)
    check_callable("progress", progress)
    return arr, layout, check_noise(noise, sigma, gain, layout.n_channels)


def drive(image: Any, layout: Layout, noise: NoiseModel, method: UnitMethod,
          progress: ProgressCallback | None) -> Any:
    """Denoise ``image`` (from :func:`check_call`) unit by unit with ``method``: in memory, in blocks, or lazily."""
    if is_dask(image):
        return _denoise_dask(image, layout, noise, method, progress)
    if len(layout.sp_axes) == 3 and np.prod([image.shape[a] for a in layout.sp_axes]) > _WHOLE_MAX_VOXELS:
        return _denoise_blocks(image, layout, noise, method, progress)
    return denoise_units(image, layout, noise, method, progress)


# Cores of the Dask blocks span at least this many overlaps along each axis: the redundant work of a block,
# (1 + 2 / 4)**3 = 3.4 times its core in 3-D, stays bounded whatever the input's chunks (unless memory bounds the
# block first: :func:`_fit_memory`).
_CORE_PER_OVERLAP = 4
# ... and at most this many samples along each axis: planes of 2048 x 2048 are common in microscopy stores.
_MAX_CORE = {2: 1024, 3: 128}
# Bytes a process holds per voxel of the block it denoises (per sample of a plane), by number of transformed axes:
# the wavelet method at its defaults. Volumes: the method itself takes about 35-40 bytes a voxel at its peak (float32
# input, 8 cycle spins, the Wiener stage: benchmarks/bench_volume_bytes.py); the command line's process about 95 a
# voxel of its block over its 0.2 GB at rest, as it also assembles the block with its overlap, reads ahead and writes
# (VmHWM of `restore denoise IN.zarr OUT.zarr --volume` with blocks of 160 x 128 x 192 voxels,
# benchmarks/bench_store_memory.py); 120 leaves a margin for other chunkings. Planes: 151 bytes at the method's peak
# (1536 x 1536), 200 in the process. Cheaper settings cost less: an upper bound for them.
_BYTES_PER_VOXEL = {2: 200, 3: 120}
# ... under photon noise: the variance maps' path of SURE and the Wiener stage, not done in slabs, takes more:
# volumes' blocks sized at 120 took the command to 0.91-0.96 GB on a Poisson-Gaussian store (tests/test_volume_cli.py),
# 250 keeps it under the 0.75 GB; planes as under Gaussian noise (not measured apart)
_PHOTON_BYTES_PER_VOXEL = {2: 200, 3: 250}
# Bytes of blocks being denoised at once in a process (one block always runs): the 0.75 GB a volume of any size may
# take from the command line on 2 cores (issue 29), less the 0.2 GB the process holds at rest (the interpreter,
# NumPy, Dask, zarr and the compiled kernels). It sizes the blocks (:func:`_fit_memory`: at the defaults, about 4.5 M
# voxels, cores of about 100 voxels a side with overlaps of 32) and bounds how many run at once, whatever the number
# of cores: blocks of the defaults run one at a time (the prox kernels and transforms use every core inside a
# block), cheap ones several at once.
BLOCK_MEMORY = 520 << 20


def _per_voxel(n_axes: int, photon: bool) -> int:
    """Bytes a block takes a voxel (:data:`_BYTES_PER_VOXEL`, :data:`_PHOTON_BYTES_PER_VOXEL`)."""
    table = _PHOTON_BYTES_PER_VOXEL if photon else _BYTES_PER_VOXEL
    return table.get(n_axes, table[3])


def _fit_memory(cores: list[int], depths: list[int], chunks: list[int], lengths: list[int], steps: list[int],
                n_axes: int, fixed: int = 1, photon: bool = False) -> list[int]:
    """Cores (of :func:`_block_plan`, one per axis) made smaller until a block fits :data:`BLOCK_MEMORY`.

    A block holds :func:`_per_voxel` bytes a voxel of its core and
    overlaps (times ``fixed`` voxels of axes not planned here). While it
    does not fit, the axis of the longest block takes its next smaller core
    that keeps to the input's chunks (a whole number of them, or of their
    parts), a multiple of its ``step``; else the half of its core.
    """
    cores = list(cores)
    budget = BLOCK_MEMORY // _per_voxel(n_axes, photon)

    def extent(i: int) -> int:
        return min(cores[i] + 2 * depths[i], lengths[i])

    while cores and fixed * int(np.prod([extent(i) for i in range(len(cores))])) > budget:
        i = max(range(len(cores)), key=lambda k: (extent(k) if cores[k] > steps[k] else -1, -k))
        c, chunk, step = cores[i], chunks[i], steps[i]
        if c <= step:
            break  # every axis at its smallest core: the block runs alone (its budget is the whole)
        aligned = [chunk * m for m in range(1, c // chunk + 1)] + [chunk // k for k in range(2, chunk + 1)
                                                                    if chunk % k == 0]
        smaller = [x for x in aligned if x < c and x % step == 0]
        cores[i] = max(smaller) if smaller else max(step, c // 2 // step * step)
    return cores


class _Budget:
    """Bytes of blocks in flight in this process, at most :data:`BLOCK_MEMORY`: a block waits for its share.

    Dask schedules the blocks (its local threads, or a cluster's workers),
    but bounds them by number (threads), not by memory: a ``distributed``
    worker pauses at a share of its memory limit, after the blocks that
    pass it have started. A block takes its bytes here before it is
    denoised and gives them back after; one larger than the whole takes
    the whole, so it runs alone.
    """

    def __init__(self, total: int) -> None:
        self.total, self.free = total, total
        self.cond = threading.Condition()

    @contextlib.contextmanager
    def hold(self, nbytes: int):
        nbytes = min(int(nbytes), self.total)
        with self.cond:
            self.cond.wait_for(lambda: self.free >= nbytes)
            self.free -= nbytes
        try:
            yield
        finally:
            with self.cond:
                self.free += nbytes
                self.cond.notify_all()


_BUDGET = _Budget(BLOCK_MEMORY)
_BLOCK = threading.local()  # ``on`` while this thread denoises a Dask block (see in_block)


@contextlib.contextmanager
def _in_a_block():
    """Mark this thread as denoising a Dask block (:func:`in_block`).

    Module-level (as :func:`_in_budget`): a block sent to a cluster's worker refers to it by name and sets the
    worker's own flag, where a closure would carry a copy of the flag, which cannot be pickled.
    """
    before = getattr(_BLOCK, "on", False)
    _BLOCK.on = True
    try:
        yield
    finally:
        _BLOCK.on = before


def in_block() -> bool:
    """Whether this thread is denoising a Dask block, beside others, within the budget of :data:`BLOCK_MEMORY`.

    A method then starts no threads of its own: their memory is not in the block's count (``_BYTES_PER_VOXEL``).
    """
    return getattr(_BLOCK, "on", False)


@functools.cache
def _malloc_trim() -> Any:
    """The C library's ``malloc_trim`` (glibc), or None (another C library)."""
    import ctypes
    import ctypes.util

    # glibc's name first: find_library runs ldconfig in a child process, a fork of this one (its resident
    # memory counted twice by whoever sums a process tree's)
    for name in ("libc.so.6", None):
        with contextlib.suppress(OSError, AttributeError, TypeError):
            return ctypes.CDLL(name if name else ctypes.util.find_library("c")).malloc_trim
    return None


def _give_back() -> None:
    """Return the memory a finished block freed to the system.

    glibc keeps freed memory in the arena of the thread that freed it, for
    that thread to reuse: the next block, on another thread, would take as
    much again, and a run's resident memory would grow to a block per thread.
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def _in_budget(voxels: int, n_axes: int, photon: bool = False):
    """Hold the bytes of a block of ``voxels`` voxels (of one unit) in this process's :class:`_Budget`.

    Module-level, so that a block sent to a cluster's worker holds that
    worker's budget (a closure would carry a copy of ours).
    """
    return _BUDGET.hold(voxels * _per_voxel(n_axes, photon))


def _block_plan(chunk: int, n: int, grid: int, reach: int, n_axes: int = 3) -> tuple[int, int]:
    """Core size and overlap of Dask blocks along an axis of length ``n`` whose chunks are ``chunk`` long.

    Blocks start on the method's grid (a multiple of ``grid`` from the
    image's origin: for a wavelet transform of L levels, ``2**L``, or each
    block would be decomposed like a shifted copy): both core and overlap
    are multiples of ``grid``. The core is the input's chunk when it spans
    :data:`_CORE_PER_OVERLAP` overlaps to :data:`_MAX_CORE` samples (of
    ``n_axes``), else the fewest of its chunks merged, or the fewest parts
    it splits into, that do, so that blocks keep to the chunks of the store
    they came from; with none, the largest multiple of ``grid`` within
    :data:`_MAX_CORE`. Memory then bounds the cores of all axes together
    (:func:`_fit_memory`).
    """
    step = grid
    depth = min(-(-reach // step) * step, n)
    low, high = max(step, _CORE_PER_OVERLAP * depth), max(step, _MAX_CORE[n_axes] // step * step)
    merged = [chunk * m for m in range(1, high // chunk + 1)]
    split = [chunk // k for k in range(2, chunk + 1) if chunk % k == 0]
    fits = [c for c in merged + split if c % step == 0 and low <= c <= high]
    return min(fits[0] if fits else high, n), depth


def _grid_chunks(n: int, core: int, depth: int, borrow: bool = False) -> tuple[int, ...]:
    """Chunks of ``core`` samples along an axis of ``n``; a remainder shorter than ``depth`` is joined to the last.

    Dask's overlap rechunks any chunk shorter than its depth, which would
    start the blocks after it off the method's grid. With ``borrow`` (a
    periodic method's padded axis: ``n``, ``core`` and ``depth`` multiples
    of its grid), the remainder takes what it lacks from the chunk before
    it instead, so that no block grows past its core, unless that one
    would then be too short.
    """
    sizes = [core] * (n // core)
    rest = n - core * len(sizes)
    if rest and sizes and rest < depth:
        if borrow and sizes[-1] - (depth - rest) >= depth:
            sizes[-1] -= depth - rest
            sizes.append(depth)
        else:
            sizes[-1] += rest
    elif rest:
        sizes.append(rest)
    return tuple(sizes)


def _denoise_dask(image, layout: Layout, noise: NoiseModel, method: UnitMethod, progress: ProgressCallback | None,
                  block_steps: BlockSteps | None = None):
    """Lazy denoising of a Dask array: overlapping blocks (``dask.array.map_overlap``).

    ``block_steps``, when given, takes the progress of each block
    (:func:`_denoise_blocks`). Every block has the method's settings of the
    whole (a transform's levels) and its noise model (the photon model
    estimated here once, on a sample, when not given), so that blocks differ
    from the whole only near their borders and by what the method chooses
    on each unit (lam).
    """
    import dask.array as da

    if progress is not None:
        raise ValueError("progress is not available for Dask arrays: use Dask's own diagnostics "
                         "(dask.diagnostics.ProgressBar or the distributed dashboard)")
    ndim, c_axis, sp_axes, n_axes = image.ndim, layout.c_axis, layout.sp_axes, len(layout.sp_axes)
    shape = image.shape
    # A periodic method transforms the whole padded to the grid (symmetric) and periodized: its first samples see
    # its last ones. So do the blocks at its borders (the axes padded, and a periodic overlap), or they would be
    # periodized on their own and differ from the whole there (sliced axes: the blocks of a chunk, as before).
    periodic = bool(getattr(method, "periodic", False))
    pad = {a: -int(shape[a]) % step for a, step in zip(sp_axes, method.grid, strict=True)
           if periodic and a not in layout.sliced}
    given = image
    if any(pad.values()):
        image = da.pad(image, [(0, pad.get(a, 0)) for a in range(ndim)], mode="symmetric")
    depth = {a: 0 for a in range(ndim)}
    chunks = {a: -1 for a in range(ndim) if a == c_axis}  # every block holds whole channels
    # ... and one plane (volume) of a stack: computing one computes no other
    chunks.update({a: 1 for a in range(ndim) if a != c_axis and a not in sp_axes and max(image.chunks[a]) > 1})
    sliced: dict[int, int] = {}  # sliced axis -> core of its blocks
    planned: dict[int, tuple[int, int, int]] = {}  # other spatial axes -> core, step, first chunk
    for a, step, reach in zip(sp_axes, method.grid, method.reach, strict=True):
        sizes = image.chunks[a]
        core, depth[a] = _block_plan(sizes[0], int(image.shape[a]), step, reach, n_axes)
        if a in layout.sliced:  # one slice computes the blocks of one chunk (on the grid) and their overlap
            length = int(image.shape[a])
            core = min(max(step, sizes[0] // step * step), max(step, _MAX_CORE[n_axes] // step * step))
            # ... or of the whole axis when a chunk's overlaps reach it anyway: the same work for the first slice,
            # none for the others
            sliced[a] = length if core + 2 * depth[a] >= length else core
            continue
        planned[a] = (core, step, sizes[0])
    fixed = int(np.prod([min(sliced[a] + 2 * depth[a], int(image.shape[a])) for a in sliced]))
    axes = list(planned)
    if not noise.complete:  # the model first: photon noise's blocks are sized for its dearer path
        noise = noise.resolved(_noise_sample(given, layout), has_channels=False)
    photon = isinstance(noise, PhotonNoise)
    cores = _fit_memory([planned[a][0] for a in axes], [depth[a] for a in axes], [planned[a][2] for a in axes],
                        [int(image.shape[a]) for a in axes], [planned[a][1] for a in axes], n_axes, fixed, photon)
    for a, core in zip(axes, cores, strict=True):
        grid_chunks = _grid_chunks(int(image.shape[a]), core, depth[a], borrow=a in pad)
        if tuple(image.chunks[a]) != grid_chunks:
            chunks[a] = grid_chunks
        if len(grid_chunks) == 1:
            depth[a] = 0  # one block spans the axis: it is the whole's, no overlap
    boundary = {a: "periodic" if a in pad and depth[a] else "none" for a in range(ndim)}
    arr = image.rechunk(chunks) if chunks else image
    settle = getattr(method, "settled", None)
    if settle is not None and ndim == n_axes == 3 and not sliced and any(len(arr.chunks[a]) > 1 for a in sp_axes):
        # one volume in several blocks: what the method chooses from the data (lam), chosen once, as on the whole
        # (read here, when the method needs it; not for a viewer's slices, whose blocks choose their own lazily)
        method = settle(functools.partial(_sample_regions, image, method.grid, tuple(depth[a] for a in sp_axes)),
                        layout, noise)
    dtype = output_dtype(arr.dtype)

    def block(b):  # the settings of the whole, whatever the block's size
        with _in_budget(int(np.prod([b.shape[a] for a in sp_axes])), n_axes, photon), _in_a_block():
            try:
                if block_steps is None:  # on our own threads (a store written by the CLI), a stop at the next step
                    return denoise_units(b, layout, noise, method, stop_check(), block=True)
                with block_steps.block() as report:
                    return denoise_units(b, layout, noise, method, report, block=True)
            finally:
                _give_back()

    def overlapping(x):
        return x.map_overlap(block, depth=depth, boundary=boundary, dtype=dtype, meta=np.empty((0,) * ndim, dtype))

    def unpadded(x):
        return x[tuple(slice(0, int(n)) for n in shape)] if any(pad.values()) else x

    if not sliced:
        return unpadded(overlapping(arr))
    # Dask's overlap cannot be deeper than a block's core: along the sliced axes, each core is cut out with its
    # overlap, as one chunk, and its blocks overlap along the other axes only
    deep = {a: depth[a] for a in sliced}
    depth.update({a: 0 for a in sliced})

    def piece(region: dict[int, tuple[int, int]]):
        box = tuple(slice(max(0, region[a][0] - deep[a]), min(arr.shape[a], region[a][1] + deep[a]))
                    if a in region else slice(None) for a in range(ndim))
        out = overlapping(arr[box].rechunk({a: -1 for a in region}))
        return out[tuple(slice(region[a][0] - box[a].start, region[a][1] - box[a].start) if a in region
                         else slice(None) for a in range(ndim))]

    def along(axes: list[int], region: dict[int, tuple[int, int]]):
        if not axes:
            return piece(region)
        a, rest = axes[0], axes[1:]
        starts = range(0, int(arr.shape[a]), sliced[a])
        parts = [along(rest, {**region, a: (s0, min(s0 + sliced[a], int(arr.shape[a])))}) for s0 in starts]
        return parts[0] if len(parts) == 1 else da.concatenate(parts, axis=a)

    return unpadded(along(sorted(sliced), {}))


# Side of the cubes (voxels) a volume in blocks chooses its lam on (:func:`_sample_regions`): 8 of them hold 2**21
# voxels, four times what SURE measures its risk on (``restore.denoise._lam._SURE_MAX_COEFFS``).
_SAMPLE_SIDE = 64


def _sample_regions(image, grid: tuple[int, ...], depth: tuple[int, ...]) -> list[tuple[np.ndarray, tuple]]:
    """Cubes at the centres of a Dask volume's octants with their overlap (periodic), and each cube's place in it.

    ``image``: padded to the ``grid`` (as the whole is transformed); an axis of no ``depth`` is taken whole. The
    trees of a cube, transformed with its overlap, are about the whole's trees there: what a method chooses from
    the data of a volume in blocks (lam by SURE) is chosen on them once, for every block, as on the whole in memory
    (SURE's regular subset of its trees), not on each block, whose choice would vary with its size.
    """
    import dask.array as da

    axes_idx, cores = [], []
    for n, g, d in zip(image.shape, grid, depth, strict=True):
        n = int(n)
        side = max(g, min(_SAMPLE_SIDE, n // g * g))
        if not d or side + 2 * d >= n:
            axes_idx.append([np.arange(n)])
            cores.append(slice(0, n))
            continue
        at = sorted({((2 * j + 1) * n // 4 - side // 2) // g * g for j in (0, 1)})
        axes_idx.append([np.arange(s0 - d, s0 + side + d) % n for s0 in at])
        cores.append(slice(d, d + side))
    regions = []
    for idx in itertools.product(*axes_idx):
        r = image
        for a, ix in enumerate(idx):
            r = r[(slice(None),) * a + (ix,)]
        regions.append(r)
    return [(np.asarray(r), tuple(cores)) for r in da.compute(*regions)]


def _noise_sample(image: Any, layout: Layout) -> np.ndarray:
    """The part of a Dask array its photon model is estimated on (:func:`restore.noise_sample`), float.

    Float as :func:`check_image` makes it, the channels as leading planes:
    one model serves every channel, estimated on all of them as in memory.
    """
    sample = noise_sample(image, axes=layout.sp_axes, channel_axis=layout.c_axis)
    x, _ = check_image(sample, spatial=min(2, len(layout.sp_axes)))
    return x


@call_scope()
def _denoise_blocks(arr: np.ndarray, layout: Layout, noise: NoiseModel, method: UnitMethod,
                    progress: ProgressCallback | None) -> np.ndarray:
    """A volume in memory beyond :data:`_WHOLE_MAX_VOXELS`, denoised in blocks.

    The blocks of :func:`_denoise_dask`, computed into the output, with progress and cancellation inside
    each block (:class:`restore._progress.BlockSteps`). The values are checked up front, and the photon
    model on the central part the Dask path reads. When a block fails or the call is cancelled, the other
    blocks stop at their next step, and the call returns once they have.
    """
    import dask.array as da

    check_finite(arr)  # as the whole path checks it, before any block runs
    image = da.from_array(arr, chunks=arr.shape, name=False)  # name=False: no hash of the whole volume
    noise = noise.resolved(_noise_sample(image, layout), has_channels=False, dtype=arr.dtype)
    out = np.empty(arr.shape, dtype=output_dtype(arr.dtype))
    steps = BlockSteps(progress)
    lazy = _denoise_dask(image, layout, noise, method, None, block_steps=steps)
    try:
        steps.start(int(np.prod(lazy.numblocks)))
        # a thread per core: the blocks in flight are bounded by memory (_Budget), each block's shrinkage on every core
        da.store(lazy, out, lock=False, scheduler="threads", num_workers=default_num_threads())
    except BaseException:
        first = steps.stop_and_wait()
        if first is None:
            raise
        try:
            raise first from None  # what failed first, not what it stopped in the other blocks
        finally:
            del first  # this frame is in its traceback: no reference cycle to keep the blocks' arrays
    steps.report()  # the end, whatever the blocks' last steps said
    return out
