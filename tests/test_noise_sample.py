"""Issue 28: one noise sampler, the library's, used by the library, the command line and the plugin alike."""

import numpy as np
import pytest

import restore

da = pytest.importorskip("dask.array")

SHAPE = (1500, 3000)  # a plane over the 4 M pixels a lazy image's noise is estimated on, wider than 2048


def _photons(shape, seed=3, photons=30.0):
    yy, xx = np.indices(shape[-2:])
    clean = 0.5 + 0.4 * np.sin(xx / 37.0) * np.cos(yy / 53.0)
    clean = np.broadcast_to(clean, shape)
    return (np.random.default_rng(seed).poisson(photons * clean) / photons).astype(np.float32)


def _plugin_estimate(data, rgb=False):
    """The plugin's photon-noise estimate of a layer holding ``data``."""
    pytest.importorskip("napari")
    from restore_napari import _denoise, _runner

    source = _denoise.Source(None, data, rgb, np.dtype(data.dtype), ("layer", id(data)))
    params = _denoise.DenoiseParams(noise="poisson-gaussian")
    _, noise = _runner.drive(_denoise.photon_model(_runner.Control(), source, params))
    return noise.estimate


@pytest.mark.parametrize("lazy", [False, True], ids=["numpy", "dask"])
def test_the_plugin_estimates_a_large_plane_on_the_librarys_sample(lazy):
    plane = _photons(SHAPE)
    data = da.from_array(plane, chunks=512) if lazy else plane
    sample = restore.noise_sample(data)
    expected = restore.estimate_noise(sample, noise="poisson-gaussian")
    assert _plugin_estimate(data) == expected
    # what the library's denoiser reads: its central 2048 columns (4.5 M pixels, over 2**22), lazy or not
    assert sample.shape == (1500, 2048)


def test_the_library_sample_of_a_lazy_stack_is_central_and_keeps_every_channel():
    data = np.arange(5 * 3000 * 8 * 3, dtype=np.uint16).reshape(5, 3000, 8, 3)
    lazy = da.from_array(data, chunks=(1, 500, 8, 3))
    sample = restore.noise_sample(lazy, channel_axis=-1)
    np.testing.assert_array_equal(sample, np.moveaxis(data[2, 476:2524], -1, 0))  # the middle plane, in its dtype
    np.testing.assert_array_equal(restore.noise_sample(data, channel_axis=-1), np.moveaxis(data, -1, 0))
    volume = restore.noise_sample(lazy, axes=(0, 1, 2), channel_axis=3)
    assert volume.shape == (3, 5, 2048, 8)  # as many central planes as fit 4 M voxels a channel: all five


def test_the_plugin_reads_the_librarys_sample_of_an_rgba_dask_layer_without_alpha():
    rgba = np.stack([_photons((3000, 64), seed=s) for s in range(4)], axis=-1)
    lazy = da.from_array(rgba, chunks=(700, 64, 4))
    expected = restore.estimate_noise(restore.noise_sample(lazy[..., :3], channel_axis=-1), noise="poisson-gaussian")
    assert _plugin_estimate(lazy, rgb=True) == expected


@pytest.mark.parametrize("axes", [(0,), (0, 1, 2, 3), (1, 1), (0, 9)])
def test_bad_axes_are_refused_naming_them(axes):
    with pytest.raises(ValueError, match="axes"):
        restore.noise_sample(np.zeros((4, 16, 16)), axes=axes)


def test_a_dask_colour_image_gets_the_photon_model_of_the_librarys_sample_of_every_channel():
    rgb = np.stack([_photons((96, 80), seed=s, photons=p) for s, p in ((0, 10.0), (1, 40.0), (2, 160.0))], axis=-1)
    lazy = da.from_array(rgb, chunks=(48, 40, 3))
    est = restore.estimate_noise(restore.noise_sample(lazy, channel_axis=-1), noise="poisson-gaussian")
    got = restore.denoise_wavelet_tree(lazy, channel_axis=-1, noise="poisson-gaussian").compute()
    np.testing.assert_array_equal(got, restore.denoise_wavelet_tree(lazy, channel_axis=-1, noise=est).compute())
    # ... as in memory, where the model is estimated on every channel too
    np.testing.assert_array_equal(restore.denoise_wavelet_tree(rgb, channel_axis=-1, noise="poisson-gaussian"),
                                  restore.denoise_wavelet_tree(rgb, channel_axis=-1, noise=est))


def test_the_sample_puts_the_spatial_axes_last_where_the_estimate_reads_planes():
    stack = _photons((5, 64, 80))  # five planes
    moved = np.moveaxis(stack, 0, -1)  # (64, 80, 5): planes along the last axis
    np.testing.assert_array_equal(restore.noise_sample(moved, axes=(0, 1)), stack)
    np.testing.assert_array_equal(restore.noise_sample(da.from_array(moved), axes=(0, 1)), stack[2])
    colour = np.stack([moved, 2 * moved], axis=0)  # channels first, then y, x, planes
    np.testing.assert_array_equal(restore.noise_sample(colour, axes=(1, 2), channel_axis=0),
                                  np.stack([stack, 2 * stack]))


def test_the_plugin_estimates_an_integer_layer_in_its_own_units():
    counts = (_photons((2, 300, 200)) * 30).astype(np.uint16)  # photon counts: gain 1
    expected = restore.estimate_noise(restore.noise_sample(counts).astype(np.float64), noise="poisson-gaussian")
    got = _plugin_estimate(counts)
    assert got == expected and 0.8 < got.gain < 1.2


def test_a_large_stack_in_memory_is_sampled_as_a_lazy_one_and_the_library_estimates_on_the_sample(monkeypatch):
    # a 40 x 1024 x 1024 stack in memory was read whole, as float64 (335 MB for a 40 MB uint8 layer, in the plugin
    # too): beyond 2**22 voxels a channel it is sampled as a Dask array is, and the library estimates on that sample
    stack = np.zeros((40, 1024, 1024), np.uint8)
    sample = restore.noise_sample(stack)
    assert sample.size <= restore.noise.ESTIMATE_VOXELS and np.shares_memory(sample, stack)
    import dask.array as da

    assert np.array_equal(sample, restore.noise_sample(da.from_array(stack, chunks=(8, 256, 256))))
    # the library's own estimate reads the sample too: a smaller stack over the (lowered) limit
    monkeypatch.setattr(restore.noise, "ESTIMATE_VOXELS", 1 << 12)
    rng = np.random.default_rng(0)
    y = 0.5 + 0.1 * rng.standard_normal((6, 48, 64))
    seen = []
    real = restore.noise.estimate_noise
    monkeypatch.setattr("restore.denoise._noise_model.estimate_noise",
                        lambda x, **k: seen.append(x.shape) or real(x, **k))
    restore.denoise_wavelet_tree(y, lam="rule")
    assert seen == [restore.noise_sample(y).shape] and seen[0] != y.shape


def test_a_16_mp_photograph_is_estimated_on_its_central_4_mp():
    """Read whole, its estimate took 2 s of CPU before the call's (and the plugin preview's) first answer."""
    photo = np.zeros((4096, 4096, 3), np.uint8)
    sample = restore.noise_sample(photo, channel_axis=-1)
    assert sample.shape == (3, 2048, 2048) and np.shares_memory(sample, photo)
    assert restore.noise_sample(photo[:2048, :2048], channel_axis=-1).shape == (3, 2048, 2048)  # whole
