"""Memory of a volume denoised whole (issue 29), and the slab-wise 3-D transform it rests on."""

from __future__ import annotations

import tracemalloc
from itertools import product

import numpy as np
import pytest
import pywt

from restore import denoise_wavelet_tree
from restore.wavelet import band_layout, level_splits, wavelet_forward, wavelet_inverse, wavelet_inverse_slabs

# Issue 29's target: a volume transformed whole costs at most this many bytes a voxel at the defaults.
MAX_BYTES_PER_VOXEL = 40


def _peak_bytes(shape: tuple[int, ...], **kw) -> int:
    """Peak of the memory NumPy allocates (tracemalloc) while a float32 volume of ``shape`` is denoised."""
    vol = (0.5 + 0.1 * np.random.default_rng(0).standard_normal(shape)).astype(np.float32)
    tracemalloc.start()
    try:
        denoise_wavelet_tree(vol, axes=(0, 1, 2), cycle_spins=8, **kw)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# photon noise: the data stabilised and their variance map (a float64 volume), the shrinkage in their units
PHOTON = {"noise": "poisson-gaussian", "gain": 0.01, "sigma": 0.02}
# Photon noise's bound: issue 29's, as Gaussian noise's (its Wiener stage holds the variance map besides the pilot,
# the sum and the gains; the data are stabilised as the transform reads them)
MAX_PHOTON_BYTES_PER_VOXEL = MAX_BYTES_PER_VOXEL


@pytest.mark.parametrize(("kw", "bound"), [
    ({}, MAX_BYTES_PER_VOXEL), ({"lam": 0.05, "sigma": 0.1}, MAX_BYTES_PER_VOXEL),
    (PHOTON, MAX_PHOTON_BYTES_PER_VOXEL)],
    ids=["defaults", "lam given", "photon noise"])
def test_volume_costs_at_most_40_bytes_a_voxel(kw, bound):
    # the growth of the peak between two sizes: bytes per voxel, without what does not grow with the volume (the
    # SURE sample, the transform's slabs, the interpreter); tracemalloc counts allocations, not touched pages
    warm = np.full((16, 32, 32), 0.5, np.float32)
    denoise_wavelet_tree(warm, axes=(0, 1, 2), cycle_spins=8, **kw)  # plans, kernels, imports and tables of kw's path
    small, large = (32, 256, 256), (64, 256, 256)
    per_voxel = (_peak_bytes(large, **kw) - _peak_bytes(small, **kw)) / (np.prod(large) - np.prod(small))
    assert per_voxel <= bound


@pytest.mark.parametrize("wavelet", ["haar", "db2", "db3"])
def test_slab_transform_equals_pywavelets_on_the_whole(wavelet):
    # the same coefficients bit for bit as PyWavelets' transform of the whole volume, and the same inverse
    x = np.random.default_rng(1).standard_normal((48, 64, 80))
    splits = level_splits((3, 3, 3))
    ref, slices, shapes = pywt.ravel_coeffs(pywt.wavedecn(x, wavelet, mode="periodization", level=3))
    flat = wavelet_forward(x, wavelet, splits)
    assert np.array_equal(flat, ref)
    rec = pywt.waverecn(pywt.unravel_coeffs(flat, slices, shapes, "wavedecn"), wavelet, mode="periodization")
    assert np.array_equal(wavelet_inverse(flat, wavelet, splits, x.shape), rec)


def _whole_forward(x: np.ndarray, wavelet: str, splits: tuple[int, ...]) -> np.ndarray:
    """The transform by PyWavelets' ``dwtn`` of the whole array at each level, laid out as ``band_layout``."""
    bands = {(b.level, b.orientation): b for b in band_layout(x.shape, splits)}
    flat, a = np.empty(x.size), x
    for level, mask in enumerate(splits, start=1):
        axes = tuple(i for i in range(x.ndim) if (mask >> i) & 1)
        d = pywt.dwtn(a, wavelet, mode="periodization", axes=axes)
        a = d.pop("a" * len(axes))
        for key, v in d.items():
            b = bands[(level, sum(1 << i for i, ch in zip(axes, key, strict=True) if ch == "d"))]
            flat[b.start:b.start + b.size] = v.ravel()
    flat[:a.size] = a.ravel()
    return flat


def _whole_inverse(c: np.ndarray, wavelet: str, splits: tuple[int, ...], shape: tuple[int, ...]) -> np.ndarray:
    """The inverse of :func:`_whole_forward` by PyWavelets' ``idwtn`` of the whole at each level."""
    layout = band_layout(shape, splits)
    bands = {(b.level, b.orientation): b for b in layout}
    a = c[:layout[0].size].reshape(layout[0].shape)
    for level in range(len(splits), 0, -1):
        axes = tuple(i for i in range(len(shape)) if (splits[level - 1] >> i) & 1)
        d = {"a" * len(axes): a}
        for key in ("".join(k) for k in product("ad", repeat=len(axes))):
            if "d" in key:
                b = bands[(level, sum(1 << i for i, ch in zip(axes, key, strict=True) if ch == "d"))]
                d[key] = c[b.start:b.start + b.size].reshape(b.shape)
        a = pywt.idwtn(d, wavelet, mode="periodization", axes=axes)
    return a


@pytest.mark.parametrize(("levels", "wavelet"), [((1, 2, 2), "db2"), ((0, 2, 3), "haar"), ((2, 0, 1), "db3"),
                                                 ((0, 0, 2), "sym4"), ((3, 2, 3), "db2")])
def test_slab_transform_equals_pywavelets_at_anisotropic_levels(levels, wavelet):
    # levels halving one, two or three axes: the same values bit for bit as dwtn and idwtn of the whole, level by
    # level; the coefficients handed to the inverse to lose (its working memory) give the same inverse
    x = np.random.default_rng(3).standard_normal((24, 16, 40))
    splits = level_splits(levels)
    flat = wavelet_forward(x, wavelet, splits)
    assert np.array_equal(flat, _whole_forward(x, wavelet, splits))
    ref = _whole_inverse(flat, wavelet, splits, x.shape)
    assert np.array_equal(wavelet_inverse(flat, wavelet, splits, x.shape), ref)
    out = np.zeros(x.shape)

    def emit(axis, sl, v):
        out[(slice(None),) * axis + (sl,)] = v

    wavelet_inverse_slabs(flat.copy(), wavelet, splits, x.shape, emit, consume=True)
    assert np.array_equal(out, ref)
    gains = np.random.default_rng(4).uniform(0.5, 2.0, x.size)  # multiplied by the details as they are made
    expected = gains * flat
    n_approx = band_layout(x.shape, splits)[0].size
    expected[:n_approx] = flat[:n_approx]  # the approximation replaced
    for lean in (False, True):
        assert np.array_equal(wavelet_forward(x, wavelet, splits, gains.copy(), multiply=True, lean=lean), expected)


def test_slab_transform_reads_float32_as_float64_and_index_maps_as_copies():
    rng = np.random.default_rng(2)
    x32 = rng.standard_normal((20, 33, 18)).astype(np.float32)
    splits = level_splits((1, 2, 2))
    part = x32[:, :32, :16]
    assert np.array_equal(wavelet_forward(part, "db3", splits), wavelet_forward(part.astype(np.float64), "db3", splits))
    # a padded, shifted volume read through index maps: the same as the copy made whole
    index = [np.roll(np.pad(np.arange(n), (0, p - n), mode="symmetric"), s)
             for n, p, s in zip(x32.shape, (20, 36, 20), (1, 3, 2), strict=True)]
    copy = np.roll(np.pad(x32.astype(np.float64), [(0, 0), (0, 3), (0, 2)], mode="symmetric"), (1, 3, 2),
                   axis=(0, 1, 2))
    assert np.array_equal(wavelet_forward(x32, "db3", splits, index=index), wavelet_forward(copy, "db3", splits))
