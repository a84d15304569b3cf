"""restore.pyramid: the lower levels of a multiscale result, as the CLI writes them and the plugin shows them."""

import numpy as np
import pytest

from restore.pyramid import block_mean, level_factors, lower_levels

da = pytest.importorskip("dask.array")
zarr = pytest.importorskip("zarr")


def _smooth(shape, seed=0):
    rng = np.random.default_rng(seed)
    grids = np.meshgrid(*[np.arange(n, dtype=np.float64) for n in shape], indexing="ij")
    clean = 0.5 + 0.3 * np.sin(grids[-1] / 7.0) * np.cos(grids[-2] / 9.0) * np.cos(grids[0] / 5.0)
    return clean + 0.1 * rng.standard_normal(shape)


def _ome_pyramid(path, levels, chunks):
    """An OME-Zarr 0.5 image of the given levels (paths s0, s1, ...), each a scale of the one above."""
    axes = [{"name": n, "type": "space", "unit": "micrometer"} for n in "zyx"]
    datasets = [{"path": f"s{k}", "coordinateTransformations": [
        {"type": "scale", "scale": [float(a / b) for a, b in zip(levels[0].shape, lv.shape, strict=True)]}]}
        for k, lv in enumerate(levels)]
    group = zarr.open_group(str(path), mode="w", attributes={"ome": {"version": "0.5", "multiscales": [
        {"axes": axes, "datasets": datasets}]}})
    for k, level in enumerate(levels):
        group.create_array(f"s{k}", shape=level.shape, chunks=chunks, dtype=level.dtype)[:] = level
    return path


@pytest.mark.parametrize("dtype", [np.uint16, np.float32])
def test_the_lower_levels_are_those_the_cli_writes_below_its_denoised_full_resolution(dtype, tmp_path):
    """The plugin's multiscale results and the CLI's OME-Zarr pyramids are the same function of level 0."""
    from restore.cli import main

    noisy = _smooth((6, 40, 50))
    data = np.rint(noisy * 4000).astype(dtype) if dtype == np.uint16 else noisy.astype(dtype)
    # halved in y and x, then in all three axes, odd sizes on the way: (6, 40, 50), (6, 20, 25), (3, 10, 13)
    levels = [data, data[:, ::2, ::2], data[::2, ::4, ::4]]
    src = _ome_pyramid(tmp_path / "in.zarr", levels, chunks=(2, 16, 16))
    dst = tmp_path / "out.zarr"
    sigma = "400" if dtype == np.uint16 else "0.1"
    assert main(["denoise", str(src), str(dst), "--sigma", sigma, "--quiet"]) == 0
    out = zarr.open_group(str(dst), mode="r")
    written = [out[f"s{k}"][:] for k in range(3)]
    assert [w.shape for w in written] == [(6, 40, 50), (6, 20, 25), (3, 10, 12)]
    shapes = [lv.shape for lv in levels]
    for mine in (lower_levels(written[0], shapes), lower_levels(da.from_zarr(out["s0"]), shapes)):
        assert len(mine) == 2
        for got, want in zip(mine, written[1:], strict=True):
            got = np.asarray(got)
            assert got.dtype == want.dtype and got.shape == want.shape
            if dtype == np.uint16:
                np.testing.assert_array_equal(got, want)
            else:  # float32 sums in another order may differ in the last bit
                np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)


def test_block_means_match_a_plain_reshape_and_keep_the_dtype():
    x = _smooth((5, 12, 9)).astype(np.float32)
    want = x[:4, :12, :9].reshape(2, 2, 4, 3, 3, 3).astype(np.float64).mean(axis=(1, 3, 5))
    for image in (x, da.from_array(x, chunks=(3, 5, 4))):
        got = block_mean(image, (2, 3, 3))
        assert got.dtype == np.float32 and got.shape == (2, 4, 3)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
    counts = np.array([[0, 1, 2, 3], [1, 2, 2, 3]], dtype=np.uint8)  # means 1, 2.5 -> 1, 2 (ties to even)
    np.testing.assert_array_equal(block_mean(counts, (2, 2)), np.array([[1, 2]], dtype=np.uint8))
    mask = np.array([[True, False, False, False]])
    np.testing.assert_array_equal(block_mean(mask, (1, 2)), np.array([[True, False]]))


def test_a_lazy_level_computes_only_the_blocks_beneath_it():
    from dask_helpers import computed_blocks

    x = da.from_array(_smooth((64, 64)), chunks=(16, 16))
    level0 = x.map_blocks(np.negative)  # stands in for the denoised full resolution
    [half, quarter] = lower_levels(level0, [(64, 64), (32, 32), (16, 16)])
    assert isinstance(half, da.Array) and isinstance(quarter, da.Array)
    with computed_blocks(level0) as seen:
        quarter.blocks[0, 0].compute(optimize_graph=False)
    assert seen == [(16, 16)]
    np.testing.assert_allclose(quarter.compute(), -_smooth((64, 64)).reshape(16, 4, 16, 4).mean(axis=(1, 3)))


def test_level_factors_follow_the_inputs_ratios_and_stop_before_an_empty_level():
    assert level_factors([(16, 64, 50), (16, 32, 25), (8, 16, 13)]) == [((16, 32, 25), (1, 2, 2)),
                                                                      ((8, 16, 12), (2, 2, 2))]
    # a result smaller than the input: the same factors, until a level would have no voxels
    assert level_factors([(8, 8), (4, 4), (2, 2), (1, 1)], (6, 6)) == [((3, 3), (2, 2)), ((1, 1), (2, 2))]
    assert level_factors([(8, 8)]) == []
    with pytest.raises(ValueError, match="axes"):
        level_factors([(8, 8), (4, 4, 4)])
    with pytest.raises(ValueError, match="factors"):
        block_mean(np.zeros((4, 4)), (2,))


@pytest.mark.parametrize("factors", [(1.9, 2.7), (2, 0), (2,), (2, 2, 2)])
def test_factors_that_are_not_whole_numbers_one_per_axis_are_refused(factors):
    with pytest.raises(ValueError, match="factors must be whole numbers"):
        block_mean(np.zeros((8, 8)), factors)
