"""Non-local tree sparsity: a plane or a volume (or its channels) with white Gaussian noise of known sigma.

The two stages of BM3D's scheme, with the first one coded on the project's
tree core:

1. **Joint tree shrinkage.** Patches (2-D) or cubes (3-D) are matched on
   the noisy image, or on a mix with a *pilot* estimate given by the caller
   (``pilot_weight``); the noisy patches of each group of ``k1`` are
   transformed (an orthonormal separable transform per patch, then an
   orthonormal Haar transform along the group) and shrunk by the prox of
   a tree norm (``penalty``: tree-l2 on planes, Donoho's tree-l0, a hard
   threshold that keeps whole subtrees, on volumes) on the tree of
   :func:`group_tree`: the quad-tree
   (octree) of the patch coefficients, every node owning the coefficients
   of its position across the patches of a band of the group (the group's
   mean patch; its deviations), so that a node's group is the node and its
   descendants over all those patches (simultaneous tree sparsity). The
   prox is :func:`restore._core.prox_tree_l2` or
   :func:`restore._core.prox_tree_l0`, the kernels of :func:`restore.prox`.
2. **Empirical Wiener.** Patches are matched again on the first estimate,
   groups of ``k2`` of the estimate and of the noisy image are transformed
   alike, and the noisy coefficients are scaled by ``|P|^2 / (|P|^2 +
   sigma^2)`` (``P``: the estimate's).

Each stage aggregates its groups' patches weighted by the inverse of the noise
variance left in the group (BM3D's weights; for the soft tree shrinkage, the
sum of the squared scalings of the coefficients it keeps) times a Kaiser
window. The work is cut into chunks of reference patches that do not depend
on the number of threads; each chunk runs in a numba kernel (``nogil``) on a
thread pool and adds into its own buffer, and buffers are summed in chunk
order, so the result is the same for any number of threads.

Internally a plane (M, N) is the volume (M, 1, N) with patches (p, 1, p): one
set of kernels serves both. Channels (a colour image's, in the opponent
colour space) share their groups, matched on the first one only (CBM3D's
scheme); one channel is the grey case of the same kernels.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace

import numpy as np

from ._config import default_num_threads
from ._core_nonlocal import patch_coefs, shrink_groups, stage1_chunk, stage2_chunk
from ._progress import ProgressCallback
from .proximal import _get_pool
from .tree import Tree

__all__ = [
    "NonlocalSettings", "group_tree", "nonlocal_denoise", "nonlocal_grid", "nonlocal_reach", "nonlocal_steps",
    "shrink_groups",
]

# Reference patches per chunk: one chunk is one numba call and one progress step; at most this many keeps a
# chunk well under 0.2 s (so cancelling acts at once) while the Python overhead per chunk stays negligible.
_CHUNK_REFS = 256

# Patch positions transformed per chunk of the transform pass (same reasons as _CHUNK_REFS; a transform is
# about a microsecond per position).
_CHUNK_POSITIONS = 32768

# Bytes of one strip's array of patch coefficients (float32): the image is processed in strips along its first
# axis so that memory stays bounded on large inputs and a strip's arrays stay in the caches (larger strips were
# slower); strips do not change the result.
_STRIP_BYTES = 16 * 2**20
# ... unless that leaves a strip's references fewer than this many search windows of the first axis: the margins
# transformed twice then stay under a third of the work (large volumes then take more memory: 256 bytes per voxel
# per array for 4 x 4 x 4 cubes).
_STRIP_MIN_WINDOWS = 2

# Default side of the 3-D search windows along the first axis, voxels (NonlocalSettings.window0)
_WINDOW0_3D = 7

# 2-D stage 2 where stage 1's estimate is smooth at the noise's scale: larger Wiener patches average the noise over
# more of a surface that is flat at their scale (BM3D, too, grows its blocks with the noise) and blur detail
# elsewhere, so stage 2 runs with both patch sides, each only where some pixel wants it, and the two are blended per
# pixel (NonlocalSettings.smooth_patch2). The weight of the larger patches is a smooth step of the local RMS
# gradient G of stage 1's estimate (per pixel, in sigmas): 1 for G <= _SMOOTH_FULL, 0 for G >= _SMOOTH_NONE.
# pixels: stage 2's larger patch side (``patch2``, 8, elsewhere): on benchmarks/bench_nonlocal.py 12 averaged smooth
# photos a little better for a sixth more time per pass (transforms grow as the cube of the side), 10 lost more
_SMOOTH_PATCH2 = 11
# pixels: its references' step, about half the patch (as 3 for 8): fewer references for the same cover; a multiple of
# 3 keeps the grid that blocks start on (nonlocal_grid) at lcm(3, 4, 6) = 12, as without the larger patches
_SMOOTH_STRIDE = 6
# RMS gradient / sigma: at or below _SMOOTH_FULL only the larger patches (flat at their scale), at or above
# _SMOOTH_NONE only the default ones (edges and texture); chosen on benchmarks/bench_nonlocal.py: a wider band runs
# both passes on more pixels for no gain; bands placed between 0.1 and 0.55 gave means within 0.01 dB of each other
_SMOOTH_FULL = 0.25
_SMOOTH_NONE = 0.35
_SMOOTH_RADIUS = 8

# Chunks in flight on the pool per thread: enough to keep threads busy, few enough that finished chunks' buffers
# wait little before being added.
_IN_FLIGHT_PER_THREAD = 3


@dataclass(frozen=True)
class NonlocalSettings:
    """Settings of :func:`nonlocal_denoise`; None picks the default of the dimension (2-D, 3-D).

    The defaults were chosen with ``benchmarks/bench_nonlocal.py`` (grey
    photos at sigma 10, 25 and 50 against BM3D; volumes against BM4D) and
    ``benchmarks/calibrate_nonlocal.py`` (the ``lam`` multiple, sigma 5 to
    100); their outputs give the figures.

    Attributes
    ----------
    patch : int, optional
        Patch side, pixels: 8 (2-D), 4 (3-D), BM3D's and BM4D's sizes. Sides
        that are powers of 2 give a full quad-tree (octree) of coefficients.
    patch2 : int, optional
        Patch side of stage 2, pixels: ``patch`` (2-D), 5 (3-D, BM4D's
        Wiener size: stage 2's DCT needs no power of 2; 4 lost 0.2-0.4 dB
        on the synthetic volumes); see ``smooth_patch2``.
    smooth_patch2 : int, optional
        2-D: a second patch side of stage 2 (its references 6 pixels
        apart), blended per pixel with ``patch2``'s result where stage 1's
        estimate is smooth at the noise's scale (a local RMS gradient under
        0.35 sigma, over 17 x 17 pixels; alone under 0.25 sigma), whose
        flat surfaces larger patches average better while they blur edges;
        each side runs only on the references near a pixel that wants it,
        and not at all when none does. 0: never. Default 11 in 2-D when
        none of ``patch2``, ``stride`` and ``features2`` is given (stage 2
        as given then), else 0.
    stride, stride1 : int, optional
        Step of the grid of reference patches of stage 2 and of stage 1,
        pixels: 3 and 4 (2-D: stage 1 only guides stage 2, whose stride
        matters more), 3 and 3 (3-D, BM4D's steps; 2 in stage 2 costs
        twice the time for no gain); the last position of each axis is
        always a reference. Work falls as the square (cube) of the stride.
    window, window2 : int, optional
        Side of the search window of stage 1 and of stage 2, pixels (odd):
        25 and 25 (2-D: BM3D's 39 costs twice the matching for no gain), 21
        and 21 (3-D, within the planes: thin filaments find their matches
        further away; 15 lost 0.3 dB on them).
    window0 : int, optional
        3-D: the windows' side along the first axis (across the planes),
        voxels (odd; ``window`` or ``window2`` when larger): 7. Matching is
        most of the work and falls with the window's volume: on the volumes
        of ``benchmarks/_volumes.py`` 7 instead of 21 takes about half the
        time for the same PSNR on average (5 lost 0.2 dB on the filaments).
    k1, k2 : int, optional
        Patches per group in stage 1 and stage 2: 16 and 16 (2-D: 32
        costs more for no gain; 3-D: BM4D's 32 in stage 2 was 0.1 dB lower
        on the filaments of ``benchmarks/_volumes.py``), powers of 2 (the Haar
        transform along the group). A window near a corner holding fewer
        candidates repeats the matches it has.
    lam : float, optional
        Stage 1's ``lam`` in units of sigma, one multiple for every sigma.
        For 'l2' (default 0.28, 2-D): each node's weight is the square root
        of its group's size, so a group of pure noise would vanish from
        ``lam`` about 1; stage 1 only guides stage 2, which is best when
        stage 1 keeps more. For 'l0' (default 2.4, 3-D): the threshold of
        one coefficient (see ``penalty``); on the synthetic volumes of
        ``benchmarks/_volumes.py`` at sigma 0.05, 0.1 and 0.2 it is the best
        of 2.0, 2.4 and 2.8 or within 0.05 dB of it. The result is sensitive to it (a
        tenth off costs a few tenths of a dB).
    transform, transform2 : {'haar', 'dct'}
        Orthonormal separable transform of each patch in stage 1 ('haar':
        its coefficients form the quad-tree the penalty assumes) and stage 2
        ('dct', better for the Wiener filter); 'haar' needs sides that are
        powers of 2.
    bands : int, optional
        Bands of the group's Haar coefficients that get their own subtree
        (see :func:`group_tree`): for 'l2', 2, the group's mean patch and
        its deviations (1, a node for all the patches alike, does not
        average the group's noise away; more bands gain nothing); for 'l0',
        every scale of the group's Haar transform its own band
        (``log2(k1) + 1``), so that a node's hard decision spans few
        coefficients.
    debias : bool
        Give the coefficients stage 1 keeps back their values before
        shrinkage: False (True needs a larger ``lam`` and guides stage 2
        less well).
    penalty : {'l2', 'l0'}, optional
        Stage 1's tree penalty: 'l2' (2-D; the tree-l2 norm, soft shrinkage
        of subtrees) or 'l0' (3-D; the tree-l0 penalty, Donoho's dynamic
        programme on the same core: hard thresholding of subtrees, as
        BM3D/BM4D's stage 1 thresholds coefficients; on the synthetic
        volumes its stage 1 is 1.5 dB above the tree-l2 one). With 'l0',
        ``lam`` is the threshold of one coefficient in units of sigma (a
        node costs ``(lam * sigma)**2 / 2`` per coefficient it owns; BM4D
        thresholds at 2.7).
    features, features2 : int, optional
        Leading transform coefficients per axis compared by block matching
        in stage 1 (on the noisy image) and stage 2 (on stage 1's
        estimate): the whole patch by default (fewer lose textures).
    pilot_weight : float
        Stage 1 matches on ``pilot_weight * pilot + (1 - pilot_weight) *
        y``: 0 (matching on the wavelet-tree pilot loses textures that the
        noisy image keeps, and a mix does not pay for the pilot's time).
    wiener : bool
        Run stage 2 (True).
    kaiser_beta : float
        Shape of the Kaiser window of the aggregation (0: flat): 2.0, as BM3D.
    """

    patch: int | None = None
    patch2: int | None = None
    smooth_patch2: int | None = None
    stride: int | None = None
    stride1: int | None = None
    window: int | None = None
    window2: int | None = None
    window0: int | None = None
    k1: int = 16
    k2: int | None = None
    lam: float | None = None
    transform: str = "haar"
    transform2: str = "dct"
    bands: int | None = None
    debias: bool = False
    penalty: str | None = None
    features: int | None = None
    features2: int | None = None
    pilot_weight: float = 0.0
    wiener: bool = True
    kaiser_beta: float = 2.0

    def resolved(self, ndim: int) -> NonlocalSettings:
        """These settings with the defaults of ``ndim`` (2 or 3) filled in, checked."""
        d2 = ndim == 2
        s = replace(
            self,
            patch=self.patch if self.patch is not None else (8 if d2 else 4),
            stride=self.stride if self.stride is not None else 3,
            window=self.window if self.window is not None else (25 if d2 else 21),
        )
        s = replace(s, patch2=s.patch2 if s.patch2 is not None else (s.patch if d2 else 5),
                    window2=s.window2 if s.window2 is not None else s.window,
                    window0=s.window0 if s.window0 is not None else (1 if d2 else _WINDOW0_3D))
        s = replace(s, penalty=s.penalty if s.penalty is not None else ("l2" if d2 else "l0"),
                    k2=s.k2 if s.k2 is not None else 16)
        s = replace(s, features=s.features if s.features is not None else s.patch)
        free = d2 and self.wiener and self.patch2 is None and self.stride is None and self.features2 is None
        s = replace(s, smooth_patch2=s.smooth_patch2 if s.smooth_patch2 is not None else
                    (_SMOOTH_PATCH2 if free else 0))
        s = replace(s, features2=s.features2 if s.features2 is not None else s.patch2)
        s = replace(s, stride1=s.stride1 if s.stride1 is not None else (4 if d2 else 3))
        if s.penalty not in ("l2", "l0"):
            raise ValueError(f"penalty must be 'l2' or 'l0', got {s.penalty!r}")
        s = replace(s, lam=s.lam if s.lam is not None else (0.28 if s.penalty == "l2" else 2.4))
        levels = int(s.k1).bit_length() - 1 if isinstance(s.k1, (int, np.integer)) and s.k1 >= 1 else 0
        s = replace(s, bands=s.bands if s.bands is not None else (2 if s.penalty == "l2" else levels + 1))
        for name in ("patch", "patch2", "stride", "stride1", "window", "window2", "window0", "k1", "k2", "features",
                     "features2"):
            v = getattr(s, name)
            if not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        if not isinstance(s.smooth_patch2, (int, np.integer)) or s.smooth_patch2 < 0 or (s.smooth_patch2 and not d2):
            raise ValueError(f"smooth_patch2 must be an integer >= 0 (0 for volumes), got {s.smooth_patch2!r}")
        if s.smooth_patch2 and not (s.smooth_patch2 >= _SMOOTH_STRIDE and s.patch2 >= s.stride):
            # each pass's references must cover the plane with their patches (see _wanted_refs)
            raise ValueError(f"smooth_patch2 must be 0 or at least its references' step {_SMOOTH_STRIDE} with patch2 "
                             f"({s.patch2}) >= stride ({s.stride}), got {s.smooth_patch2!r}")
        for name in ("k1", "k2"):
            v = getattr(s, name)
            if v & (v - 1):
                raise ValueError(f"{name} must be a power of 2, got {v}")
        for name in ("window", "window2", "window0"):
            if getattr(s, name) % 2 == 0:
                raise ValueError(f"{name} must be odd, got {getattr(s, name)}")
        for name, side in (("features", "patch"), ("features2", "patch2")):
            if getattr(s, name) > getattr(s, side):
                raise ValueError(f"{name} must be <= {side} ({getattr(s, side)}), got {getattr(s, name)}")
        for name in ("transform", "transform2"):
            v = getattr(s, name)
            if v not in ("dct", "haar"):
                raise ValueError(f"{name} must be 'dct' or 'haar', got {v!r}")
            side = s.patch if name == "transform" else s.patch2
            if v == "haar" and side & (side - 1):
                raise ValueError(f"{name}='haar' needs a patch side that is a power of 2, got {side}")
        if not (np.isfinite(s.lam) and s.lam >= 0):
            raise ValueError(f"lam must be finite and >= 0, got {s.lam!r}")
        if not (np.isfinite(s.pilot_weight) and 0 <= s.pilot_weight <= 1):
            raise ValueError(f"pilot_weight must be in [0, 1], got {s.pilot_weight!r}")
        if not (isinstance(s.bands, (int, np.integer)) and s.bands >= 1):
            raise ValueError(f"bands must be an integer >= 1, got {s.bands!r}")
        if not (np.isfinite(s.kaiser_beta) and s.kaiser_beta >= 0):
            raise ValueError(f"kaiser_beta must be finite and >= 0, got {s.kaiser_beta!r}")
        for name, w in (("k1", s.window), ("k2", s.window2)):
            n_cand = w * w if d2 else min(s.window0, w) * w * w
            if (name == "k1" or s.wiener) and getattr(s, name) > n_cand:
                raise ValueError(f"{name} must not exceed its window's {n_cand} candidates, got {getattr(s, name)}")
        return s


# ---------------------------------------------------------------------------
# Transforms and trees
# ---------------------------------------------------------------------------


def transform_matrix(kind: str, n: int) -> np.ndarray:
    """Orthonormal (n, n) analysis matrix whose row i is a basis function of frequency (or scale) rank i.

    Rank i has parent i // 2 in the coefficient tree: for the DCT the
    frequencies double per level, for Haar row 0 is the scaling function,
    row 1 the coarsest wavelet, rows 2-3 the next scale, and so on.
    """
    if n == 1:
        return np.ones((1, 1))
    if kind == "dct":
        i = np.arange(n)[:, None]
        t = np.arange(n)[None, :]
        m = np.cos(np.pi * (2 * t + 1) * i / (2 * n)) * np.sqrt(2.0 / n)
        m[0] /= np.sqrt(2.0)
        return m
    rows = [np.full(n, 1.0 / np.sqrt(n))]
    width = n
    while width > 1:  # coarsest wavelets first
        half = width // 2
        for start in range(0, n, width):
            r = np.zeros(n)
            r[start:start + half] = 1.0
            r[start + half:start + width] = -1.0
            rows.append(r / np.sqrt(width))
        width = half
    # order within a scale: the rows of scale width w come as blocks, coarsest first: rank 1 | 2,3 | 4..7
    return np.array(rows)


def _coef_parents(patch3: tuple[int, int, int]) -> np.ndarray:
    """Parent of each patch coefficient (a, b, c) -> (a//2, b//2, c//2); the DC coefficient is the root."""
    p0, p1, p2 = patch3
    a, b, c = np.meshgrid(np.arange(p0), np.arange(p1), np.arange(p2), indexing="ij")
    par = ((a // 2) * p1 + b // 2) * p2 + c // 2
    par = par.ravel().astype(np.int64)
    par[0] = -1
    return par


def group_tree(patch3: tuple[int, int, int], k: int, bands: int = 1) -> Tree:
    """The tree of a group's coefficients (a quad-tree/octree of patch coefficients per band along the group).

    A group is stored as ``k`` rows of ``P = prod(patch3)`` coefficients
    (variable ``m * P + c`` is coefficient ``c`` of row ``m``), rows being
    the Haar coefficients along the group. The rows form ``bands`` bands:
    band 0 is row 0 (the group's mean patch), band ``b`` the rows
    ``2**(b-1) .. 2**b - 1`` (the Haar details of scale ``b``), the last
    band taking all the remaining rows; ``bands=1`` puts all ``k`` rows in
    one band. Node ``(b, c)`` owns coefficient ``c`` of the rows of band
    ``b``; its parent is ``(b, parent(c))``, or, for ``c = 0``, ``(b - 1,
    0)``: so a node's group spans its coefficient and its descendants over
    the patches of its band (simultaneous tree sparsity; with one band,
    over all ``k`` patches), and a band's root, ``c = 0``, also holds the
    finer bands.

    Each node's weight is the square root of its group's number of
    variables, so that ``lam`` is in units of the noise's standard
    deviation, except the root's (the whole group), 0.
    """
    par = _coef_parents(patch3)
    n_coef = par.shape[0]
    n_levels = int(round(math.log2(k)))
    bands = max(1, min(int(bands), n_levels + 1))
    starts = [0] + [2 ** (b - 1) for b in range(1, bands)] + [k]
    parents, groups = [], []
    for b in range(bands):
        rows = range(starts[b], starts[b + 1])
        for c in range(n_coef):
            if c > 0:
                parents.append(b * n_coef + par[c])
            else:
                parents.append(-1 if b == 0 else (b - 1) * n_coef)
            groups.append([m * n_coef + c for m in rows])
    parents = np.array(parents, dtype=np.int64)
    size = np.array([len(g) for g in groups], dtype=np.float64)
    for node in range(len(parents) - 1, 0, -1):  # parents precede children in this numbering
        size[parents[node]] += size[node]
    weights = np.sqrt(size)
    weights[0] = 0.0  # the whole group: its patches' means are signal, never shrunk (as wavelet approximations)
    return Tree.from_parents(parents, groups=groups, weights=weights)


# ---------------------------------------------------------------------------
# The plan: strips, transform chunks and reference chunks
# ---------------------------------------------------------------------------


def _geometry(shape3: tuple[int, int, int], s: NonlocalSettings, ndim: int):
    """Patch, half window and stride per axis of the three-axis form, and the reference grid of each axis."""
    if ndim == 2:
        patch3, half3, stride3 = (s.patch, 1, s.patch), (s.window // 2, 0, s.window // 2), (s.stride, 1, s.stride)
    else:
        half3 = (min(s.window0, s.window) // 2,) + (s.window // 2,) * 2
        patch3, stride3 = (s.patch,) * 3, (s.stride,) * 3
    n_orig = tuple(n - p + 1 for n, p in zip(shape3, patch3, strict=True))
    grids = []
    for n, st in zip(n_orig, stride3, strict=True):
        g = list(range(0, n, st))
        if g[-1] != n - 1:
            g.append(n - 1)  # the last position, so that every pixel is covered
        grids.append(np.array(g, dtype=np.int64))
    return patch3, half3, n_orig, grids


@dataclass
class _Strip:
    s0: int  # first origin index (axis 0) whose coefficients the strip holds
    s1: int  # one past the last
    row_chunks: list[tuple[int, int]]  # origin ranges of the transform pass
    ref_chunks: list[np.ndarray]  # (n, 3) global reference origins


def _plan(shape3, s: NonlocalSettings, ndim: int) -> list[_Strip]:
    patch3, half3, n_orig, grids = _geometry(shape3, s, ndim)
    p = int(np.prod(patch3))
    row_bytes = n_orig[1] * n_orig[2] * p * 4
    rows_per_chunk = max(1, _CHUNK_POSITIONS // max(1, n_orig[1] * n_orig[2]))
    g0, g1, g2 = grids
    h0 = half3[0]
    strips = []
    i = 0
    while i < len(g0):
        # add reference rows while the strip's coefficients stay within _STRIP_BYTES, or while its references
        # span fewer than _STRIP_MIN_WINDOWS windows (each strip transforms again the margins it shares)
        j = i + 1
        while j < len(g0):
            rows = min(n_orig[0], g0[j] + h0 + 1) - max(0, g0[i] - h0)
            if rows * row_bytes > _STRIP_BYTES and g0[j] - g0[i] >= _STRIP_MIN_WINDOWS * (2 * h0 + 1):
                break
            j += 1
        s0, s1 = max(0, int(g0[i]) - h0), min(n_orig[0], int(g0[j - 1]) + h0 + 1)
        rows = [(a, min(s1, a + rows_per_chunk)) for a in range(s0, s1, rows_per_chunk)]
        step2 = min(len(g2), _CHUNK_REFS)
        step1 = max(1, _CHUNK_REFS // step2)
        chunks = []
        for r0 in g0[i:j]:
            for a1 in range(0, len(g1), step1):
                for a2 in range(0, len(g2), step2):
                    r1s, r2s = g1[a1:a1 + step1], g2[a2:a2 + step2]
                    refs = np.empty((len(r1s) * len(r2s), 3), dtype=np.int64)
                    refs[:, 0] = r0
                    refs[:, 1] = np.repeat(r1s, len(r2s))
                    refs[:, 2] = np.tile(r2s, len(r1s))
                    chunks.append(refs)
        strips.append(_Strip(s0, s1, rows, chunks))
        i = j
    return strips


def _stage2_passes(s: NonlocalSettings, shape3: tuple[int, int, int]) -> list[NonlocalSettings]:
    """Stage 2's passes on a plane or volume (resolved ``s``): ``patch2``'s, then ``smooth_patch2``'s when on.

    The smooth pass needs a plane of at least ``smooth_patch2`` pixels a side.
    """
    if not s.wiener:
        return []
    passes = [s]
    if s.smooth_patch2 and min(shape3[0], shape3[2]) >= s.smooth_patch2:
        passes.append(replace(s, patch2=s.smooth_patch2, features2=s.smooth_patch2, stride=_SMOOTH_STRIDE))
    return passes


def _stage_settings(stage: int, s: NonlocalSettings) -> NonlocalSettings:
    """The settings of one stage's plan (``patch``, ``window`` and ``stride`` its own)."""
    return replace(s, stride=s.stride1) if stage == 1 else replace(s, patch=s.patch2, window=s.window2)


def _stage_steps(stage: int, shape3: tuple[int, int, int], s: NonlocalSettings, ndim: int, n_channels: int) -> int:
    """Progress steps of one pass of a stage."""
    # stage 1 transforms the channels and its guide, stage 2 the channels and their estimates; then references
    transforms = n_channels + 1 if stage == 1 else 2 * n_channels
    strips = _plan(shape3, _stage_settings(stage, s), ndim)
    return sum(transforms * len(st.row_chunks) + len(st.ref_chunks) for st in strips)


def nonlocal_steps(shape: tuple[int, ...], settings: NonlocalSettings | None = None, n_channels: int = 1) -> int:
    """Number of progress steps :func:`nonlocal_denoise` reports for an image of this shape (and channels)."""
    ndim = len(shape)
    s = (settings or NonlocalSettings()).resolved(ndim)
    shape3 = (shape[0], 1, shape[1]) if ndim == 2 else tuple(shape)
    total = _stage_steps(1, shape3, s, ndim, n_channels)
    for one in _stage2_passes(s, shape3):
        total += _stage_steps(2, shape3, one, ndim, n_channels)
    return total


def nonlocal_reach(ndim: int, settings: NonlocalSettings | None = None) -> tuple[int, ...]:
    """How far (pixels, per axis) a result pixel depends on input pixels, the pilot's own reach not included.

    A result pixel of a stage comes from the patches covering it (origins
    down to ``patch - 1`` before it); each was shrunk in the group of a
    reference up to ``window // 2`` away, whose group and matching take
    patches up to ``window // 2`` further: so ``2 * (window // 2) + patch -
    1`` on either side, on the noisy image and the guide. Stage 2's guide is
    stage 1's result, so the two reaches add. With ``smooth_patch2``, stage
    2 takes the larger of its passes' reaches and of the blend's: a pass's
    reference runs when its patch holds a pixel whose weight wants it
    (:func:`_wanted_refs`), a weight reading stage 1's result within
    ``_SMOOTH_RADIUS + 1``. The pilot
    enters stage 1's guide (with ``pilot_weight > 0``): its pixels within
    the total reach matter, and the caller adds the pilot's own reach to
    that.
    """
    s = (settings or NonlocalSettings()).resolved(ndim)
    reach = []
    for axis in range(ndim):
        w1, w2 = (min(s.window0, s.window), min(s.window0, s.window2)) if ndim == 3 and axis == 0 else \
            (s.window, s.window2)
        one = 2 * (w1 // 2) + s.patch - 1
        two = 2 * (w2 // 2) + s.patch2 - 1
        if s.smooth_patch2:
            for p in (s.patch2, s.smooth_patch2):
                two = max(two, 2 * (w2 // 2) + p - 1, w2 // 2 + p - 1 + _SMOOTH_RADIUS + 1)
        reach.append(one + (two if s.wiener else 0))
    return tuple(reach)


def nonlocal_grid(ndim: int, settings: NonlocalSettings | None = None) -> int:
    """The step (pixels, every axis) on which the grids of reference patches of every pass all start again.

    A block of the image starting at a multiple of it has the references
    of the whole there, so that blocks give the whole's result.
    """
    s = (settings or NonlocalSettings()).resolved(ndim)
    return math.lcm(s.stride, s.stride1, _SMOOTH_STRIDE if s.smooth_patch2 else 1)


def _smooth_weight(est: np.ndarray, sigma: float) -> np.ndarray:
    """Per pixel of a plane's stage-1 estimate ``est`` (M, N): the weight of stage 2's larger patches, in [0, 1].

    A smooth step of the RMS gradient over the square of half side
    ``_SMOOTH_RADIUS`` around the pixel, in units of ``sigma``. Each pixel's
    sums are taken in the same order wherever the plane starts (a block of a
    larger plane gives the whole's weights away from its edges).
    """
    from scipy import ndimage as ndi

    g2 = np.zeros_like(est)
    d0, d1 = np.diff(est, axis=0) ** 2, np.diff(est, axis=1) ** 2
    g2[:-1] += 0.5 * d0  # each difference shared by its two pixels
    g2[1:] += 0.5 * d0
    g2[:, :-1] += 0.5 * d1
    g2[:, 1:] += 0.5 * d1
    box = np.ones(2 * _SMOOTH_RADIUS + 1)
    # correlate1d sums each output's window in one order (not a running sum, whose rounding depends on the start)
    mean = ndi.correlate1d(ndi.correlate1d(g2, box, axis=0, mode="reflect"), box, axis=1, mode="reflect")
    mean /= box.size ** 2
    t = np.clip((_SMOOTH_NONE - np.sqrt(mean) / sigma) / (_SMOOTH_NONE - _SMOOTH_FULL), 0.0, 1.0)
    return t * t * (3.0 - 2.0 * t)


# ---------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------


def run_ordered(pool: ThreadPoolExecutor | None, tasks: Iterator[Callable[[], object]],
                 consume: Callable[[object], None], n_threads: int) -> None:
    """Run the tasks (on the pool if any), consuming their results in task order; on failure wait for all."""
    if pool is None:
        for t in tasks:
            consume(t())
        return
    pending: list[Future] = []
    limit = _IN_FLIGHT_PER_THREAD * n_threads
    try:
        for t in tasks:
            pending.append(pool.submit(t))
            while len(pending) >= limit:
                consume(pending.pop(0).result())
        while pending:
            consume(pending.pop(0).result())
    finally:
        for f in pending:  # after a failure (or a cancelling callback): no chunk left running
            f.cancel()
        for f in pending:
            if not f.cancelled():
                f.exception()


def _kaiser3(patch3: tuple[int, int, int], beta: float) -> np.ndarray:
    w = np.ones(patch3)
    for ax, n in enumerate(patch3):
        if n > 1:
            shape = [1, 1, 1]
            shape[ax] = n
            w = w * np.kaiser(n, beta).reshape(shape)
    return np.ascontiguousarray(w)


def _wanted_refs(need: np.ndarray, g0: np.ndarray, g2: np.ndarray, p0: int, p2: int, stride: int) -> np.ndarray:
    """Which references of the grid ``g0`` x ``g2`` (patch origins) a plane's ``need`` (M, N) asks for.

    The plane is cut into cells, one per reference, the middle ``stride``
    pixels of its patch (the first and last cells out to the plane's
    edges): a reference runs when its cell holds a pixel in need. Every such
    pixel is then inside a patch that is put back (its cell's), and a
    region in need adds about half a stride around it, not a patch.
    """
    cells = []
    for g, p in ((g0, p0), (g2, p2)):
        start = g + max(0, (p - stride) // 2)  # the middle of each patch: stride <= p keeps each cell in its patch
        start[0] = 0
        cells.append(start)
    rows = np.maximum.reduceat(need.astype(np.uint8), cells[0], axis=0)
    return np.maximum.reduceat(rows, cells[1], axis=1).astype(bool)


def _stage(stage: int, Y: np.ndarray, guide3: np.ndarray | None, E: np.ndarray | None, sigmas: np.ndarray,
           s: NonlocalSettings, ndim: int, pool: ThreadPoolExecutor | None, n_threads: int,
           report: Callable[[], None], need: np.ndarray | None = None) -> np.ndarray:
    """One stage on the channels ``Y`` (C, n0, n1, n2), their groups matched once on the first channel's side.

    Stage 1 matches on ``guide3`` (None: on ``Y[0]`` itself, reusing its
    coefficients; or a mix with the pilot); stage 2 on ``E[0]``, ``E`` (C, ...) being stage 1's estimates,
    which also give each channel's Wiener filter.

    ``need`` (a plane's (M, N) booleans, or None for every pixel): only the
    references of :func:`_wanted_refs` run (the others, and the transforms
    of strips without any, count their progress steps at once); the result
    is then 0 where no patch was put back.
    """
    s = _stage_settings(stage, s)
    n_ch = Y.shape[0]
    shape3 = Y.shape[1:]
    patch3, half3, n_orig, grids = _geometry(shape3, s, ndim)
    Ms = [np.ascontiguousarray(transform_matrix(s.transform if stage == 1 else s.transform2, n)) for n in patch3]
    Is = [np.ascontiguousarray(m.T) for m in Ms]
    p = int(np.prod(patch3))
    every = np.arange(p, dtype=np.int64)
    fa = np.array([min(s.features if stage == 1 else s.features2, n) for n in patch3])
    a, b, c = np.meshgrid(*[np.arange(f) for f in fa], indexing="ij")
    feat_sel = ((a * patch3[1] + b) * patch3[2] + c).ravel().astype(np.int64)
    win = _kaiser3(patch3, s.kaiser_beta)
    # where each transform puts its features: a patch's coefficient c is feature fpos_all[c] (-1: none); with only
    # the features selected, the s-th is feature s
    fpos_all = np.full(p, -1, dtype=np.int64)
    fpos_all[feat_sel] = np.arange(len(feat_sel))
    fpos_sel, no_fpos = np.arange(len(feat_sel), dtype=np.int64), np.full(p, -1, dtype=np.int64)
    no_feat = np.empty((0, 0, 0, 0), dtype=np.float32)
    k = s.k1 if stage == 1 else s.k2
    if stage == 1:
        tree = group_tree(patch3, k, s.bands)
        f = tree._flat
        l0 = s.penalty == "l0"
        if l0:  # a node costs lam per coefficient it owns (the root, the group's mean patch, nothing: always kept)
            weights = np.diff(f.own_ptr).astype(np.float64)
            weights[f.parent < 0] = 0.0
            weights.setflags(write=False)  # read-only as a tree's own: the kernels' signature of prox and inpaint
            lams = 0.5 * (s.lam * sigmas) ** 2
        else:
            weights, lams = f.weights, s.lam * sigmas
    num = np.zeros(Y.shape)
    den = np.zeros(Y.shape)
    h0, h1, h2 = half3
    same = stage == 1 and guide3 is None  # stage 1 matching on y itself: its coefficients are TN[0]'s
    if need is not None:
        wanted = _wanted_refs(need, grids[0], grids[2], patch3[0], patch3[2], s.stride)
    for strip in _plan(shape3, s, ndim):
        chunks = strip.ref_chunks
        if need is not None:
            chunks = [refs[wanted[np.searchsorted(grids[0], refs[:, 0]), np.searchsorted(grids[2], refs[:, 2])]]
                      for refs in chunks]
            for _ in range(sum(len(r) == 0 for r in chunks)):
                report()
            chunks = [refs for refs in chunks if len(refs)]
            if not chunks:  # no reference in need: nor its transforms
                for _ in range((2 * n_ch if stage == 2 else n_ch + 1) * len(strip.row_chunks)):
                    report()
                continue
        n_rows = strip.s1 - strip.s0
        TN = np.empty((n_ch, n_rows, n_orig[1], n_orig[2], p), dtype=np.float32)
        TE = np.empty((n_ch, n_rows, n_orig[1], n_orig[2], p), dtype=np.float32) if stage == 2 else None
        # features with the origins of the last axis side by side (restore._blockmatch.match_one), written by the
        # transform of the image matched on (stage 1's guide: that alone)
        F = np.empty((n_rows, n_orig[1], len(feat_sel), n_orig[2]), dtype=np.float32)

        def coef_task(img, out, sel, r0, r1, matched, strip=strip, F=F):
            fp = (fpos_all if len(sel) == p else fpos_sel) if matched else no_fpos[:len(sel)]
            fo = F[r0 - strip.s0:r1 - strip.s0] if matched else no_feat
            return lambda: patch_coefs(img, r0, r1, Ms[0], Ms[1], Ms[2], sel, out[r0 - strip.s0:r1 - strip.s0], fp,
                                       fo)

        tasks = [coef_task(Y[ch], TN[ch], every, r0, r1, ch == 0 and same) for ch in range(n_ch)
                 for r0, r1 in strip.row_chunks]
        if stage == 2:
            tasks += [coef_task(E[ch], TE[ch], every, r0, r1, ch == 0) for ch in range(n_ch)
                      for r0, r1 in strip.row_chunks]
        elif not same:
            guide_out = np.empty((n_rows, n_orig[1], n_orig[2], 0), dtype=np.float32)  # features only
            tasks += [coef_task(guide3, guide_out, feat_sel, r0, r1, True) for r0, r1 in strip.row_chunks]
        run_ordered(pool, iter(tasks), lambda _: report(), n_threads)
        for _ in range(len(strip.row_chunks) if same else 0):
            report()  # the steps of the guide's transform, done with y's

        def ref_task(refs, strip=strip, TN=TN, TE=TE, F=F):
            lo = [max(0, int(refs[:, ax].min()) - half3[ax]) for ax in range(3)]
            hi = [min(n_orig[ax] - 1, int(refs[:, ax].max()) + half3[ax]) + patch3[ax] for ax in range(3)]
            box = (slice(None),) + tuple(slice(a, b) for a, b in zip(lo, hi, strict=True))
            shape = (n_ch,) + tuple(b - a for a, b in zip(lo, hi, strict=True))
            borg = np.array(lo, dtype=np.int64)

            def run():
                bnum, bden = np.zeros(shape), np.zeros(shape)
                if stage == 1:
                    stage1_chunk(F, TN, strip.s0, refs, h0, h1, h2, k, f.perm, f.own_ptr, f.node_end, f.parent,
                                  weights, lams, Is[0], Is[1], Is[2], win, bnum, bden, borg,
                                  s.debias, l0)
                else:
                    stage2_chunk(F, TE, TN, strip.s0, refs, h0, h1, h2, k, sigmas * sigmas, Is[0], Is[1], Is[2],
                                  win, bnum, bden, borg)
                return box, bnum, bden
            return run

        def add(result):
            box, bnum, bden = result
            num[box] += bnum
            den[box] += bden
            report()

        run_ordered(pool, (ref_task(r) for r in chunks), add, n_threads)
    return num / den if need is None else num / np.where(den > 0, den, 1.0)


def nonlocal_denoise(y: np.ndarray, pilot: np.ndarray | None, sigma: float | np.ndarray, *,
                     settings: NonlocalSettings | None = None, progress: ProgressCallback | None = None,
                     n_threads: int | None = None, channels: bool = False) -> np.ndarray:
    """Denoise a plane or volume with white Gaussian noise of known sigma (the two stages above).

    Parameters
    ----------
    y : ndarray, shape (M, N) or (P, M, N); with ``channels``, (C, M, N) or (C, P, M, N)
        The noisy image (float; not modified). With ``channels``, the
        channels along the first axis share their groups: patches are
        matched on the first channel only (the luminance of a colour image,
        as CBM3D) and every channel is shrunk (filtered) in the same groups.
    pilot : ndarray of the shape of y (of one channel), or None
        A first estimate (e.g. the wavelet-tree estimate): stage 1 matches
        patches on ``pilot_weight * pilot + (1 - pilot_weight) * y`` (see
        :class:`NonlocalSettings`; ``y``'s first channel with
        ``channels``); unused with the default weight 0, and None stands
        for ``y``.
    sigma : float, or array of C floats with ``channels``
        Standard deviation of the noise, in image units, > 0 (per channel).
    settings : NonlocalSettings, optional
        Patch, window, group sizes, ``lam``...; defaults per dimension.
    progress : callable, optional
        ``progress(done, total)`` after each chunk, from the calling thread;
        ``total`` is :func:`nonlocal_steps`. Raising in it (e.g.
        :class:`restore.Cancelled`) stops the computation within a chunk.
    n_threads : int, optional
        Worker threads (default :func:`restore._config.default_num_threads`);
        the result does not depend on it.
    channels : bool
        Whether ``y``'s first axis holds channels (False).

    Returns
    -------
    ndarray of float64, shape of ``y``
    """
    y = np.asarray(y)
    Y = y if channels else y[None]
    pilot = Y[0] if pilot is None else np.asarray(pilot)
    if Y.ndim not in (3, 4) or Y.shape[0] < 1:
        what = "channels of planes (3-D) or of volumes (4-D)" if channels else "a plane (2-D) or a volume (3-D)"
        raise ValueError(f"y must be {what}, got shape {y.shape}")
    if pilot.shape != Y.shape[1:]:
        raise ValueError(f"pilot must have the shape of y's {'channels' if channels else 'image'} {Y.shape[1:]}, "
                         f"got {pilot.shape}")
    sigmas = np.asarray(sigma, dtype=np.float64)
    if sigmas.ndim == 0:
        sigmas = np.full(Y.shape[0], float(sigmas))
    if sigmas.shape != (Y.shape[0],) or not np.all(np.isfinite(sigmas) & (sigmas > 0)):
        raise ValueError(f"sigma must be finite and > 0{' (one per channel)' if channels else ''}, got {sigma!r}")
    sigmas = np.ascontiguousarray(sigmas)
    ndim = Y.ndim - 1
    s = (settings or NonlocalSettings()).resolved(ndim)
    side = max(s.patch, s.patch2)
    if min(Y.shape[1:]) < side:
        raise ValueError(f"y must be at least {side} pixels (the patch side) along every axis, got shape {y.shape}")
    Y3 = np.ascontiguousarray(Y, dtype=np.float64)
    g3 = np.ascontiguousarray(pilot, dtype=np.float64)
    if ndim == 2:
        Y3, g3 = Y3[:, :, None, :], g3[:, None, :]
    n_threads = default_num_threads() if n_threads is None else max(1, int(n_threads))
    total = nonlocal_steps(Y.shape[1:], s, Y.shape[0])
    done = 0

    def report() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(min(done, total), total)

    # the library's one pool (restore.proximal's): calls at once share its threads, not cores x cores
    pool = _get_pool(n_threads) if n_threads > 1 else None
    if s.pilot_weight == 0.0:
        g3 = None  # stage 1 matches on y's first channel: it reuses its coefficients
    elif s.pilot_weight != 1.0:
        g3 = s.pilot_weight * g3 + (1.0 - s.pilot_weight) * Y3[0]
    est = _stage(1, Y3, g3, None, sigmas, s, ndim, pool, n_threads, report)
    passes = _stage2_passes(s, Y3.shape[1:])
    if len(passes) == 1:
        est = _stage(2, Y3, est[0], est, sigmas, s, ndim, pool, n_threads, report)
    elif passes:  # a plane: both patch sides, each where some pixel wants it, blended per pixel
        w = _smooth_weight(est[0, :, 0, :], float(sigmas[0]))  # the groups' channel decides for all (shared groups)
        outs = []
        for one, need in zip(passes, (w < 1.0, w > 0.0), strict=True):
            if need.all():
                outs.append(_stage(2, Y3, est[0], est, sigmas, one, ndim, pool, n_threads, report))
            elif need.any():
                outs.append(_stage(2, Y3, est[0], est, sigmas, one, ndim, pool, n_threads, report, need))
            else:
                outs.append(None)
                for _ in range(_stage_steps(2, Y3.shape[1:], one, ndim, Y3.shape[0])):
                    report()
        small, large = outs
        w = w[None, :, None, :]
        if small is None:
            est = large
        elif large is None:
            est = small
        else:  # where w is 0 (1) the other pass put nothing back there: the product is exactly 0, not a blend
            est = np.where(w > 0.0, w * large, 0.0) + np.where(w < 1.0, (1.0 - w) * small, 0.0)
    est = est[:, :, 0, :] if ndim == 2 else est
    return est if channels else est[0]
