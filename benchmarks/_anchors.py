"""The slow anchors of the volume benchmark, BM4D and BM3D plane by plane, with their results cached.

BM4D takes about three minutes of CPU on the 32 x 256 x 256 nuclei crop and
BM3D two: their PSNR and CPU time are stored in ``results/anchors.json``,
keyed by method, volume, protocol and a hash of the exact noisy input, and
recomputed only when that key is missing (or with ``--rerun-anchors``).
Under Poisson-Gaussian noise both run as in the reference table: the
generalized Anscombe transform with the true gain and read noise, the
denoiser at sigma 1, the closed-form unbiased inverse (Makitalo and Foi).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
from _volumes import digest, noise_params, psnr

from restore.noise import anscombe, inverse_anscombe

CACHE = Path(__file__).resolve().parent / "results" / "anchors.json"


def _load() -> dict:
    return json.loads(CACHE.read_text()) if CACHE.exists() else {}


def _save(cache: dict) -> None:
    CACHE.parent.mkdir(exist_ok=True)
    CACHE.write_text(json.dumps(cache, indent=1, sort_keys=True) + "\n")


def available(method: str) -> bool:
    """Whether the anchor's package is installed."""
    try:
        __import__(method)
    except ImportError:
        return False
    return True


def _denoise(method: str, y: np.ndarray, sigma: float) -> np.ndarray:
    if method == "bm4d":
        import bm4d

        return np.asarray(bm4d.bm4d(y, sigma))
    import bm3d

    return np.stack([np.asarray(bm3d.bm3d(p, sigma)) for p in y])


def run(method: str, name: str, protocol: str, clean: np.ndarray, noisy: np.ndarray, rerun: bool = False,
        cached_only: bool = False) -> dict:
    """PSNR, CPU and wall seconds of an anchor (``'bm4d'`` or ``'bm3d'``), from the cache when there.

    Raises KeyError when ``cached_only`` and the result is not cached.
    """
    key = f"{method}/{name}/{protocol}/{digest(noisy)}"
    cache = _load()
    if key in cache and not rerun:
        return cache[key]
    if cached_only:
        raise KeyError(key)
    p = noise_params(protocol)
    c0, w0 = time.process_time(), time.perf_counter()
    if p["noise"] == "gaussian":
        out = _denoise(method, noisy, p["sigma"])
    else:
        d = _denoise(method, anscombe(noisy, p["gain"], p["sigma"]), 1.0)
        out = inverse_anscombe(d, p["gain"], p["sigma"], method="closed-form")
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    res = {"psnr": psnr(out, clean), "cpu": cpu, "wall": wall, "date": time.strftime("%Y-%m-%d"),
           "machine": f"{os.cpu_count()} CPUs"}
    cache = _load()
    cache[key] = res
    _save(cache)
    return res
