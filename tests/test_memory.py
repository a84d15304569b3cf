"""What a call costs in memory: nothing it built for one image is held once it returns, beyond the cache's budget."""

import gc
import time
import tracemalloc

import numpy as np
import pytest

from restore import choose_lam, denoise_wavelet_tree
from restore._cache import CACHE_BYTES


def _held_after(call, settle: float = 0.0) -> int:
    """Bytes of Python-allocated memory (NumPy's included) still held once ``call()`` and its result are gone.

    ``settle``: seconds to wait first (the threads of a cancelled call's blocks let go of their arrays as they stop).
    """
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = call()
        del result
        time.sleep(settle)
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(("shape", "kwargs"), [
    ((2048, 2048), {"lam": 0.1}),  # a photo: its tree (350 MB) and the kernels' scratch space
    ((2048, 2048), {"sigma": 0.1}),  # lam by SURE
    ((32, 256, 256), {"axes": (0, 1, 2), "sigma": 0.1}),  # a volume
])
def test_a_large_image_leaves_no_more_than_the_cache_budget_behind(shape, kwargs):
    img = np.random.default_rng(0).random(shape)
    held = _held_after(lambda: denoise_wavelet_tree(img, cycle_spins=2, **kwargs))
    # the newest plan and tree were kept whatever their size (1.5 GB after a 16 MP photo), and each thread's scratch
    assert held <= CACHE_BYTES, f"{held / 1e6:.0f} MB held after the call (budget {CACHE_BYTES / 1e6:.0f} MB)"


def test_choosing_lam_leaves_no_more_than_the_cache_budget_behind():
    img = np.random.default_rng(0).random((2048, 2048))
    held = _held_after(lambda: choose_lam(img, sigma=0.1, penalty="tree_linf"))
    assert held <= CACHE_BYTES, f"{held / 1e6:.0f} MB held after the call (budget {CACHE_BYTES / 1e6:.0f} MB)"


# A volume of 130 x 512 x 512 voxels (34 M): transformed whole, it took 4.7 GB (137 bytes a voxel) even with the
# cheapest settings; the library denoises it in overlapping blocks, as it does a Dask array
_BIG = (130, 512, 512)
_CHEAP = {"axes": (0, 1, 2), "lam": 0.1, "wavelet": "haar", "level": 1, "wiener": False}


@pytest.fixture(scope="module")
def big_volume():
    return np.random.default_rng(0).random(_BIG, dtype=np.float32)


def test_a_volume_too_large_to_transform_whole_is_denoised_in_bounded_memory(big_volume, monkeypatch):
    import dask.array as da

    monkeypatch.setenv("RESTORE_NUM_THREADS", "8")  # one block per thread took 1.0 GB here, 20 GB at the defaults
    reports = []
    gc.collect()
    tracemalloc.start()
    try:
        out = denoise_wavelet_tree(big_volume, progress=lambda d, t: reports.append((d, t)), **_CHEAP)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out.shape == _BIG and out.dtype == np.float32
    assert peak < 0.75e9, f"peak {peak / 1e9:.2f} GB"
    # what the lazy path gives (the same blocks), and progress that moves from 0 to the end
    lazy = denoise_wavelet_tree(da.from_array(big_volume, chunks=_BIG), **_CHEAP)
    np.testing.assert_array_equal(out[60:70, 200:330, 380:], lazy[60:70, 200:330, 380:].compute())
    done, totals = [d for d, _ in reports], {t for _, t in reports}
    assert len(totals) == 1 and done[0] == 0 and done[-1] == totals.pop() and done == sorted(done)
    assert len(set(done)) > 50


def test_scratch_space_of_threads_that_ended_is_not_held():
    import threading

    from restore import prox, wavelet_quadtree

    tree = wavelet_quadtree((1024, 1024))  # the kernels' scratch: 16 MB a thread
    x = np.random.default_rng(0).standard_normal(tree.n_vars)
    together = threading.Barrier(6)

    def work():
        prox(x, lam=0.1, penalty="tree_l2", tree=tree)
        together.wait()  # six threads alive at once, each with its scratch

    def in_threads():
        threads = [threading.Thread(target=work) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    held = _held_after(in_threads)
    assert held < 40e6, f"{held / 1e6:.0f} MB held by six threads that ended"


def test_a_volume_in_blocks_leaves_dask_settings_alone(big_volume):
    import threading

    import dask

    seen = set()
    call = threading.Thread(target=denoise_wavelet_tree, args=(big_volume,), kwargs=_CHEAP)
    call.start()
    while call.is_alive():  # another thread's Dask work (a distributed client...) keeps its scheduler
        seen.add(dask.config.get("scheduler", None))
        time.sleep(0.01)
    call.join()
    assert seen | {dask.config.get("scheduler", None)} == {None}


def test_nan_in_a_volume_in_blocks_is_refused_before_any_work(big_volume):
    bad = big_volume.copy()
    bad[0, 0, 0] = np.nan
    reports = []
    start = time.perf_counter()
    with pytest.raises(ValueError, match="NaN or infinite"):
        denoise_wavelet_tree(bad, progress=lambda d, t: reports.append(d), **_CHEAP)
    assert reports == [] and time.perf_counter() - start < 1.0


def test_a_cancelled_volume_in_blocks_holds_nothing_and_stops_every_block(big_volume):
    from restore import Cancelled

    calls = []

    def cancel(done, total):
        calls.append(done)
        if done > total // 20:
            raise Cancelled

    def cancelled():
        with pytest.raises(Cancelled):
            denoise_wavelet_tree(big_volume, progress=cancel, **_CHEAP)

    n = None

    def cancelled_then_count():
        nonlocal n
        cancelled()
        n = len(calls)

    held = _held_after(cancelled_then_count, settle=1.0)  # Ctrl-C acts within a second, memory too
    assert len(calls) == n  # no block in flight reports after the call returned
    assert held <= CACHE_BYTES, f"{held / 1e6:.0f} MB held after the cancelled call (plans: at most the budget)"


def test_a_wavelet_tree_holds_no_array_per_coefficient():
    """A quad-tree or octree is walked by index arithmetic: the library keeps no per-coefficient arrays for it."""
    from restore import wavelet_tree

    held = _held_after(lambda: wavelet_tree((64, 128, 128), "haar", 3) and None)
    assert held < 1e6, f"{held / 1e6:.0f} MB held for a tree of 1 M coefficients"


def test_the_wiener_stages_threads_add_a_bounded_memory_whatever_the_number_of_cores(monkeypatch):
    # its shifts ran one per thread with three plane-sized arrays each: 8 cores held 3.6x one core's peak
    rng = np.random.default_rng(0)
    img = 0.5 + 0.1 * rng.standard_normal((1024, 1024))
    denoise_wavelet_tree(img, sigma=0.1)  # plans and kernels loaded

    def peak(threads):
        monkeypatch.setenv("RESTORE_NUM_THREADS", str(threads))
        gc.collect()
        tracemalloc.start()
        try:
            denoise_wavelet_tree(img, sigma=0.1, cycle_spins=8)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    one, many = peak(1), peak(8)
    assert many - one <= (64 + 8) * 2**20, f"{(many - one) / 2**20:.0f} MB more on 8 threads"
