"""Frequency selective extrapolation: each block of the mask filled from a sparse Fourier model of its surroundings.

Genser et al.'s rapid frequency selective reconstruction (FSR,
2018; Seiler and Kaup's complex-valued FSE, 2010): a block is fitted,
within a 32 x 32 window around it, by a few Fourier basis functions chosen
greedily on the known pixels, weighted by an isotropic decay from the
block's centre; the model extrapolates into the block's missing pixels.
Blocks of 16 pixels where the window is smooth, 8 or 4 where it is textured
(the model then focuses closer to the block), smooth ones first; pixels
filled at one block size weigh half a known pixel in the next. Large
windows carry texture and long edges across strokes, where patches of 8
pixels see too little: the recipe fits how much of it to keep on the
held-out pixels (see :mod:`.validation`).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np

from .._core_inpaint import block_any, block_sd, fsr_extrapolate, fsr_put, fsr_windows
from .._nonlocal import run_ordered

__all__ = ["Level", "extrapolate", "extrapolation_steps", "frequency_weights", "plan_blocks"]

_WINDOW = 32  # side (px) of the window each block's model is fitted in: a power of two for the FFT
# block sides (px), largest first, with the decay per pixel of the weights around the block and the sd of the
# window's known pixels (units of their range) from which a block is split in four (the last: never): the published
# fast profile's. A window with fewer than two known pixels is split too: its block waits for filled neighbours
_LEVELS = ((16, 0.80, 0.014), (8, 0.70, 0.030), (4, 0.66, None))
_GAMMA = 0.5  # share of each projection added to the model: compensates the basis' loss of orthogonality
_ITER_PER_SD = 1000.0  # basis functions per unit of the window's sd (its range's units), within the next two
_MIN_ITER, _MAX_ITER = 20, 100
_REUSED = 0.5  # weight of a pixel filled at a larger block size in the windows of the next
_CHUNK = 128  # blocks per task: its buffers take about 6 MB (windows of 32 x 32), its time some milliseconds


def _grid(shape: tuple[int, int], size: int) -> np.ndarray:
    """Top-left corners (k, 2) of the blocks of side ``size`` that tile an image of ``shape`` from (0, 0)."""
    r, c = np.meshgrid(np.arange(0, shape[0], size), np.arange(0, shape[1], size), indexing="ij")
    return np.stack([r.ravel(), c.ravel()], axis=1).astype(np.int64)


def _touching(missing: np.ndarray, blocks: np.ndarray, size: int) -> np.ndarray:
    """The blocks (corners (k, 2)) that hold a missing pixel."""
    hit = np.empty(len(blocks), dtype=np.bool_)
    block_any(missing, blocks, np.int64(size), hit)
    return blocks[hit]


def _largest(missing: np.ndarray) -> np.ndarray:
    """Corners (k, 2) of the blocks of the largest side that touch the mask: where every plan starts."""
    size = _LEVELS[0][0]
    return _touching(missing, _grid(missing.shape, size), size)


class Level(NamedTuple):
    """The blocks of one side: their corners (k, 2), the weights' decay per pixel and each one's basis functions."""

    size: int
    rho: float
    blocks: np.ndarray
    iters: np.ndarray

    @property
    def n_tasks(self) -> int:
        """Tasks (and progress steps) of :func:`extrapolate` on these blocks."""
        return -(-len(self.blocks) // _CHUNK)


def plan_blocks(grey: np.ndarray, missing: np.ndarray) -> list[Level]:
    """The blocks of :func:`extrapolate`, largest first, decided from the known pixels of ``grey`` alone.

    ``grey`` (H, W) in units of the known pixels' range; its missing pixels
    are not read.
    """
    known = ~missing
    todo = _largest(missing)
    plan = []
    for size, rho, split_sd in _LEVELS:
        sd = np.empty(len(todo))
        block_sd(grey, known, todo, np.int64(size), np.int64(_WINDOW), sd)  # inf: under two known pixels
        split = np.zeros(len(todo), dtype=bool) if split_sd is None else sd >= split_sd
        now = todo[~split]
        # few known pixels: few basis functions, fitted mostly on the filled ones
        iters = np.clip(np.rint(_ITER_PER_SD * np.nan_to_num(sd[~split], posinf=0.0)), _MIN_ITER, _MAX_ITER)
        iters = iters.astype(np.int64)
        plan.append(Level(size, rho, now, iters))
        half = size // 2
        children = (todo[split][:, None, :] + half * np.array([[0, 0], [0, 1], [1, 0], [1, 1]])).reshape(-1, 2)
        children = children[(children[:, 0] < grey.shape[0]) & (children[:, 1] < grey.shape[1])]
        todo = _touching(missing, children, half) if len(children) else children
    return plan


def frequency_weights(n: int) -> np.ndarray:
    """Squared weights (n, n // 2 + 1) of a window's half spectrum: low frequencies first, 0 on duplicate entries."""
    u = np.arange(n)[:, None]
    v = np.arange(n // 2 + 1)[None, :]
    du, dv = n / 2 - np.abs(u - n / 2), n / 2 - np.abs(v - n / 2)
    fw = 1.0 - np.sqrt(du**2 + dv**2) * np.sqrt(2.0) / n
    duplicate = ((v == 0) | (v == n // 2)) & (u > n // 2)  # conjugates of entries of the same column
    return np.where(duplicate, 0.0, fw**2)


def extrapolation_steps(missing: np.ndarray) -> int:
    """Progress steps of :func:`extrapolate` on ``missing``, at most its tasks: one per task of the largest blocks.

    Each block of the largest side that touches the mask is filled by
    itself or by at least one of its parts, so the tasks are at least as
    many; :func:`extrapolate` spreads its tasks over these steps.
    """
    return -(-len(_largest(missing)) // _CHUNK)


def extrapolate(grey: np.ndarray, missing: np.ndarray, plan: list[Level], *, pool: ThreadPoolExecutor | None,
                n_threads: int, progress: Callable[[int, int], None] | None = None) -> None:
    """Extrapolate the ``missing`` pixels of ``grey`` (H, W) block by block (``plan``), in place.

    ``grey`` is in units of the known pixels' range, as for :func:`plan_blocks`.
    A missing pixel whose window holds no known or filled pixel keeps its
    value in ``grey``. ``progress(done, total)`` after each task of blocks
    (from the calling thread); it may raise to stop.
    """
    total = sum(level.n_tasks for level in plan)
    done = 0
    weight = (~missing).astype(np.float32)  # 1, _REUSED or 0: exact in float32
    fw2 = frequency_weights(_WINDOW)

    def consume(_: object) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    for size, rho, blocks, iters in plan:
        vals = np.empty((len(blocks), size, size))

        def task(lo: int, size: int = size, rho: float = rho, blocks: np.ndarray = blocks,
                 iters: np.ndarray = iters, vals: np.ndarray = vals) -> None:
            b = blocks[lo:lo + _CHUNK]
            fw_, ww = np.empty((len(b), _WINDOW, _WINDOW)), np.empty((len(b), _WINDOW, _WINDOW))
            fsr_windows(grey, weight, b, np.int64(size), np.int64(_WINDOW), rho, fw_, ww)
            fsr_extrapolate(np.fft.rfft2(fw_), np.fft.rfft2(ww), iters[lo:lo + _CHUNK], fw2, np.int64(size), _GAMMA,
                            vals[lo:lo + _CHUNK])

        # every block of a size reads the image as the larger ones left it: written back once all are done
        run_ordered(pool, ((lambda lo=lo: task(lo)) for lo in range(0, len(blocks), _CHUNK)), consume, n_threads)
        fsr_put(grey, weight, missing, blocks, vals, _REUSED)
