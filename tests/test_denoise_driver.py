"""The denoising driver with a method of its own: what a second method (non-local) gets without copying anything.

The driver (restore/denoise/_driver.py) owns the layout, the noise model, the
channels, stacks, Dask blocks, progress and dtypes; a method sees units. These
tests run methods that know nothing of any of that through it.
"""

import dask.array as da
import numpy as np
import pytest

from restore.denoise._driver import check_call, drive
from restore.denoise._wavelet_method import WaveletTree


class Identity:
    """A method that returns its unit and records what it was given."""

    needs_sigma = True

    def __init__(self, n_axes: int = 2, steps_per_unit: int = 3):
        self.grid, self.reach = (1,) * n_axes, (2,) * n_axes
        self.k = steps_per_unit
        self.seen: list[tuple] = []

    def steps(self, shape, scaled):
        return self.k

    def denoise(self, unit, sigma, var_map, steps, channel):
        self.seen.append((unit.shape, unit.dtype, unit.flags.c_contiguous, sigma, var_map is not None, channel))
        for _ in range(self.k):
            steps()
        return unit.copy()


def _run(image, method, **kw):
    progress = kw.pop("progress", None)
    arr, layout, noise = check_call(image, channel_axis=kw.pop("channel_axis", None), axes=kw.pop("axes", None),
                                    noise=kw.pop("noise", "gaussian"), sigma=kw.pop("sigma", None),
                                    gain=kw.pop("gain", None), progress=progress)
    return drive(arr, layout, noise, method, progress)


@pytest.mark.parametrize("shape, kw, units", [
    ((40, 48), {}, 1),
    ((3, 40, 48), {}, 3),  # a stack: one unit a plane
    ((40, 48, 3), {"channel_axis": -1}, 3),  # colour: three opponent channels, back to RGB
    ((40, 48, 4), {"channel_axis": -1}, 4),
    ((2, 12, 16, 20), {"axes": (1, 2, 3)}, 2),  # volumes
])
def test_a_method_that_changes_nothing_gives_the_image_back(shape, kw, units):
    image = np.random.default_rng(0).random(shape)
    method = Identity(n_axes=len(kw.get("axes", (0, 1))))
    reports = []
    out = _run(image, method, sigma=None if "channel_axis" in kw else 0.1, progress=lambda d, t: reports.append((d, t)),
               **kw)
    np.testing.assert_allclose(out, image, atol=1e-12)
    n_sp = len(kw.get("axes", (0, 1)))
    assert len(method.seen) == units
    assert all(len(s[0]) == n_sp and s[1] == np.float64 and s[2] for s in method.seen)
    assert reports[-1][0] == reports[-1][1] and [d for d, _ in reports] == sorted(d for d, _ in reports)


def test_integers_come_back_as_floats_in_their_range_and_the_input_is_untouched():
    image = np.random.default_rng(1).integers(0, 256, (32, 32), dtype=np.uint8)
    before = image.copy()
    out = _run(image, Identity(), sigma=0.1)
    assert out.dtype == np.float64 and np.allclose(out, image / 255.0)
    np.testing.assert_array_equal(image, before)


def test_each_channel_gets_its_own_sigma_given_or_estimated():
    rng = np.random.default_rng(2)
    rgb = rng.random((64, 64, 3))
    method = Identity()
    _run(rgb, method, channel_axis=-1, sigma=[0.1, 0.2, 0.3])
    assert [s[3] for s in method.seen] == [0.1, 0.2, 0.3] and [s[5] for s in method.seen] == [0, 1, 2]
    grey = 0.5 + 0.05 * rng.standard_normal((128, 128))
    method = Identity()
    _run(grey, method)
    assert abs(method.seen[0][3] - 0.05) < 0.01  # estimated on the unit


def test_photon_noise_reaches_the_method_stabilised_with_its_variance_map():
    rng = np.random.default_rng(3)
    clean = np.full((64, 64), 0.5)
    clean[16:48, 16:48] = 0.05
    noisy = rng.poisson(100 * clean) / 100
    method = Identity()
    out = _run(noisy, method, noise="poisson-gaussian", gain=0.01, sigma=0.0)
    (shape, _, _, sigma, has_var_map, _), = method.seen
    assert sigma == 1.0 and has_var_map  # unit deviation after the Anscombe transform, less where dark
    assert abs(out.mean() - noisy.mean()) < 0.01  # and back to image units


def test_dask_arrays_run_in_blocks_of_the_method_and_agree_with_memory():
    image = np.random.default_rng(4).random((64, 96))
    lazy = _run(da.from_array(image, chunks=(32, 32)), Identity(), sigma=0.1)
    assert isinstance(lazy, da.Array)
    np.testing.assert_allclose(lazy.compute(), image, atol=1e-12)


def test_the_wavelet_tree_method_is_one_such_method():
    """denoise_wavelet_tree is the driver with WaveletTree: building them by hand gives its result."""
    from restore import denoise_wavelet_tree

    rng = np.random.default_rng(5)
    image = rng.random((3, 48, 40))
    arr, layout, noise = check_call(image, channel_axis=None, axes=None, noise="gaussian", sigma=0.1, gain=None,
                                    progress=None)
    method = WaveletTree.checked(layout, arr.shape, lam=None, penalty="tree_l2", wavelet="db3", level=None,
                                 penalize_approx=False, cycle_spins=2, per_level=None, wiener=True, rng=None, axes=None)
    np.testing.assert_array_equal(drive(arr, layout, noise, method, None),
                                  denoise_wavelet_tree(image, sigma=0.1, cycle_spins=2))


class Concurrent(Identity):
    """An identity method that records how many units it denoises at once."""

    def __init__(self):
        import threading

        super().__init__(n_axes=3, steps_per_unit=1)
        self.lock, self.running, self.most = threading.Lock(), 0, 0

    def denoise(self, unit, sigma, var_map, steps, channel):
        import time

        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        time.sleep(0.2)
        with self.lock:
            self.running -= 1
        return super().denoise(unit, sigma, var_map, steps, channel)


@pytest.mark.parametrize("side, at_once", [(112, 1), (24, 2)])
def test_blocks_run_at_once_as_memory_allows_not_as_many_as_threads(side, at_once, monkeypatch):
    """Blocks of 1.4 M voxels (0.4 GB each at 300 bytes a voxel) run one at a time, on any number of threads; small
    ones run together."""
    from restore.denoise import _driver

    monkeypatch.setitem(_driver._BYTES_PER_VOXEL, 3, 300)  # a method of 300 bytes a voxel: half the budget a block
    image = da.zeros((2 * side, side, side), chunks=(side, side, side))
    method = Concurrent()
    _run(image, method, sigma=0.1, axes=(0, 1, 2)).compute(scheduler="threads", num_workers=4)
    assert len(method.seen) >= 2
    assert (method.most == 1) if at_once == 1 else (method.most >= 2)
