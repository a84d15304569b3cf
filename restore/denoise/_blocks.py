"""Dask arrays, and volumes too large to transform whole, in overlapping blocks (``map_overlap``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pywt

from .._cache import call_scope
from .._config import default_num_threads
from .._progress import BlockSteps, ProgressCallback
from .._validation import check_finite, output_dtype
from ._noise_model import _noise_sample, _photon_model
from ._options import _Options
from ._stages import _WIENER_PASSES, _use_wiener


def _is_dask(a) -> bool:
    return type(a).__module__.startswith("dask.") and hasattr(a, "map_overlap")


def _overlap(wavelet: str, levels: int) -> int:
    """Exact reach of a Dask block's border along an axis with ``levels`` levels: its deepest basis functions.

    A coarsest coefficient spans ``(L - 1) * (2**levels - 1) + 1`` samples for a
    filter of length ``L``, and its tree group no more than one further
    coarsest cell (``2**levels``): beyond that a block's border cannot reach
    its interior.
    """
    return (pywt.Wavelet(wavelet).dec_len - 1) * ((1 << levels) - 1) + (1 << levels)


# Overlap of Dask blocks, in samples along each axis, at most, by number of transformed axes. Volumes: past 32,
# what a border changes in the interior is far below the 0.05 dB the lazy result promises (the deep, wide basis
# functions carry little of a denoised volume), and the exact reach of the defaults (87 voxels: three levels of
# db3, then the Wiener passes) would make blocks of ~7x their core and the work with them. Planes have deeper
# default levels (5 on 512 x 512) whose smooth, wide basis functions do carry the image: 256 covers the exact reach
# of 5 levels of db3 (187). Tested by the agreement of lazy and in-memory results (test_volume*.py).
_MAX_OVERLAP = {2: 256, 3: 32}
# Cores of the Dask blocks span at least this many overlaps along each axis: the redundant work of a block,
# (1 + 2 / 4)**3 = 3.4 times its core in 3-D, stays bounded whatever the input's chunks.
_CORE_PER_OVERLAP = 4
# ... and at most this many samples along each axis: a block's memory (about 150 bytes a voxel at the volume
# defaults, so 1.1 GB for a core of 128**3 with overlaps of 32; planes of 1536 x 1536 with their overlaps hold
# 2.4 M pixels) stays bounded whatever the input's chunks (planes of 2048 x 2048 are common in microscopy stores).
_MAX_CORE = {2: 1024, 3: 128}


def _block_plan(chunk: int, n: int, levels: int, reach: int, n_axes: int = 3) -> tuple[int, int]:
    """Core size and overlap of Dask blocks along an axis of length ``n`` whose chunks are ``chunk`` long.

    Blocks start on the dyadic grid of the whole (a multiple of ``2**levels``
    from its origin), or each would be decomposed like a shifted copy: both
    are multiples of ``2**levels``. The core is the input's chunk when it
    spans :data:`_CORE_PER_OVERLAP` overlaps to :data:`_MAX_CORE` samples (of ``n_axes``),
    else the fewest of its chunks merged, or the fewest parts it splits
    into, that do, so that blocks keep to the chunks of the store they came
    from; with none, the largest multiple of ``2**levels`` within
    :data:`_MAX_CORE`.
    """
    step = 1 << levels
    depth = min(-(-min(reach, _MAX_OVERLAP[n_axes]) // step) * step, n)
    low, high = max(step, _CORE_PER_OVERLAP * depth), max(step, _MAX_CORE[n_axes] // step * step)
    merged = [chunk * m for m in range(1, high // chunk + 1)]
    split = [chunk // k for k in range(2, chunk + 1) if chunk % k == 0]
    fits = [c for c in merged + split if c % step == 0 and low <= c <= high]
    return min(fits[0] if fits else high, n), depth


def _denoise_dask(image, opts: _Options, *, noise: str, wiener: bool | None, progress: ProgressCallback | None,
                  block_steps: BlockSteps | None = None, **work: Any):
    """Lazy :func:`denoise_wavelet_tree` of a Dask array: overlapping blocks (``dask.array.map_overlap``).

    ``opts`` are the call's validated settings; ``block_steps``, when given, takes the
    progress of each block (:func:`_denoise_blocks`). Every block has the levels of
    the whole and its photon noise (estimated here once, on a sample, when
    not given), so that blocks differ from the whole only near their borders
    and by their own choice of lam.
    """
    if progress is not None:
        raise ValueError("progress is not available for Dask arrays: use Dask's own diagnostics "
                         "(dask.diagnostics.ProgressBar or the distributed dashboard)")
    ndim, c_axis, sp_axes, lv = image.ndim, opts.c_axis, opts.sp_axes, opts.levels
    wavelet = work["wavelet"]
    depth = {a: 0 for a in range(ndim)}
    chunks = {a: -1 for a in range(ndim) if a == c_axis}  # every block holds whole channels
    # ... and one plane (volume) of a stack: computing one computes no other
    chunks.update({a: 1 for a in range(ndim) if a != c_axis and a not in sp_axes and max(image.chunks[a]) > 1})
    sliced: dict[int, int] = {}  # sliced axis -> core of its blocks
    for a, n in zip(sp_axes, lv, strict=True):
        reach = _overlap(wavelet, n) + (sum(_overlap(w, n) for w, _ in _WIENER_PASSES)
                                        if _use_wiener(wiener, len(sp_axes)) else 0)
        sizes = image.chunks[a]
        core, depth[a] = _block_plan(sizes[0], int(image.shape[a]), n, reach, len(sp_axes))
        if a in opts.sliced:  # one slice computes the blocks of one chunk (on the dyadic grid) and their overlap
            step, length = 1 << n, int(image.shape[a])
            core = min(max(step, sizes[0] // step * step), _MAX_CORE[len(sp_axes)])
            # ... or of the whole axis when a chunk's overlaps reach it anyway: the same work for the first slice,
            # none for the others
            sliced[a] = length if core + 2 * depth[a] >= length else core
            continue
        if any(c != core for c in sizes[:-1]) or sizes[-1] > core:
            chunks[a] = core
    arr = image.rechunk(chunks) if chunks else image
    if noise == "poisson-gaussian" and (opts.gain is None or opts.read_noise is None):
        model = _photon_model(_noise_sample(image, sp_axes), opts.gain, opts.read_noise, False)
        opts = replace(opts, gain=model.gain, read_noise=model.sigma)
    dtype = output_dtype(arr.dtype)
    from ._wavelet_method import _denoise_array  # the method calls this module: imported when blocks run

    def block(b):  # the settings of the whole, its levels included, whatever the block's size
        if block_steps is None:
            return _denoise_array(b, opts, noise=noise, wiener=wiener, progress=None, block=True, **work)
        with block_steps.block() as report:
            return _denoise_array(b, opts, noise=noise, wiener=wiener, progress=report, block=True, **work)

    def overlapping(x):
        return x.map_overlap(block, depth=depth, boundary="none", dtype=dtype, meta=np.empty((0,) * ndim, dtype))

    if not sliced:
        return overlapping(arr)
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

    import dask.array as da

    return along(sorted(sliced), {})


# Volumes of more voxels than this (per channel) are denoised in memory as Dask arrays are, in overlapping blocks:
# transformed whole, a volume takes about 140 to 200 bytes a voxel (tree, transforms, Wiener stage), 5 to 7 GB here,
# and a block of the defaults about 1.3 GB whatever the volume.
_WHOLE_MAX_VOXELS = 1 << 25  # 33.5 M voxels, 128 x 512 x 512
# Blocks computed at once (each on a thread of its own, its shrinkage on all of them): with one per CPU, a many-core
# machine's peak would pass the whole volume's
_BLOCKS_AT_ONCE = 2


@call_scope()
def _denoise_blocks(arr: np.ndarray, opts: _Options, *, noise: str, wiener: bool | None,
                    progress: ProgressCallback | None, **work: Any) -> np.ndarray:
    """:func:`denoise_wavelet_tree` of a volume in memory beyond :data:`_WHOLE_MAX_VOXELS`, in blocks.

    The blocks of :func:`_denoise_dask`, computed into the output, with progress and cancellation inside
    each block (:class:`restore._progress.BlockSteps`). The values are checked up front, and the photon
    model on the central part the Dask path reads. When a block fails or the call is cancelled, the other
    blocks stop at their next step, and the call returns once they have.
    """
    import dask.array as da

    check_finite(arr)  # as the whole path checks it, before any block runs
    image = da.from_array(arr, chunks=arr.shape, name=False)  # name=False: no hash of the whole volume
    if noise == "poisson-gaussian":
        model = _photon_model(_noise_sample(image, opts.sp_axes), opts.gain, opts.read_noise, False, dtype=arr.dtype)
        opts = replace(opts, gain=model.gain, read_noise=model.sigma)
    out = np.empty(arr.shape, dtype=output_dtype(arr.dtype))
    steps = BlockSteps(progress)
    lazy = _denoise_dask(image, opts, noise=noise, wiener=wiener, progress=None, block_steps=steps, **work)
    try:
        steps.start(int(np.prod(lazy.numblocks)))
        da.store(lazy, out, lock=False, scheduler="threads", num_workers=min(default_num_threads(), _BLOCKS_AT_ONCE))
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
