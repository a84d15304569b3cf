"""What a call costs in memory: nothing it built for one image is held once it returns, beyond the cache's budget."""

import gc
import tracemalloc

import numpy as np
import pytest

from restore import choose_lam, denoise_wavelet_tree
from restore._cache import CACHE_BYTES


def _held_after(call) -> int:
    """Bytes of Python-allocated memory (NumPy's included) still held once ``call()`` and its result are gone."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = call()
        del result
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
