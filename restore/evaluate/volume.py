"""The volume protocol: plane-by-plane 2-D trees, the 3-D octree, the non-local tree, scikit-image, BM4D.

Each 3-D volume of a folder is min-max normalised to [0, 1] (float64), then
noise is added: white Gaussian noise of standard deviation ``sigma``, or
photon noise of ``peak`` photons at intensity 1 plus Gaussian read noise,
``y = Poisson(peak * x) / peak + read_noise * N(0, 1)``. Every method is
given the true noise parameters and denoises the same noisy volume; the
PSNR has data range 1. One unit of work is one volume, noise setting, draw
and method, so that a slow unit (BM4D takes minutes) is resumed on its own.
Results go to a CSV file, a Markdown table (mean PSNR and CPU time per
volume, noise setting and method) and a PNG plot.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from .._config import NOISE_MODELS
from .._files import read_image, tiff_info
from .._stores import is_zarr, open_zarr
from .._validation import check_choice, check_image, check_int, check_number
from ..noise import anscombe, inverse_anscombe
from .report import csv_text, volume_table, write_volume_plot
from .runner import OutputFolder, Unit

__all__ = ["VOLUME_COLUMNS", "VOLUME_METHODS", "VOLUME_SUFFIXES", "VolumeConfig", "evaluate_volumes",
           "load_volumes", "run_volume_unit"]

#: ``noisy`` is the reference row (the noisy volume itself); ``bm4d`` runs only when its package is installed.
VOLUME_METHODS = ("noisy", "planes", "octree", "skimage-3d", "nonlocal", "bm4d")
VOLUME_COLUMNS = ("volume", "noise", "sigma", "peak", "read_noise", "draw", "method", "psnr", "cpu_seconds",
                  "wall_seconds")
#: Files read as volumes (TIFF through tifffile, NumPy arrays); zarr stores are recognised as folders too.
VOLUME_SUFFIXES = (".tif", ".tiff", ".npy", ".npz", ".zarr")

# Issue 20's protocol, that of the reference table of ../shared/volumes, on volumes in [0, 1]:
PROTOCOL_SIGMA = 0.10  # Gaussian noise, standard deviation in image units
PROTOCOL_PEAK = 10.0  # photons at intensity 1 (gain = 1 / peak image units per photon): a dim confocal stack
PROTOCOL_READ_NOISE = 0.02  # camera read noise, standard deviation in image units
PROTOCOL_CYCLE_SPINS = 8  # shifts of the restore methods: the targets are measured with 8
# scikit-image's 3-D anchor of the targets: sym4 with 3 levels (its default depth is 1 level on thin stacks)
SKIMAGE_WAVELET = "sym4"
SKIMAGE_LEVELS = 3
#: Smallest side of a volume (samples): one octree level halves every axis, and an (M, N, 3) or (M, N, 4)
#: array is a colour image, not a volume.
MIN_SIDE = 4
# The warning pywt gives when a level exceeds dwt_max_level of the thinnest axis: 3 levels of sym4 (8 taps)
# on a stack of 16 or 32 planes is the protocol's choice, not a mistake, so it is silenced where it arises.
_LEVEL_WARNING = r"Level value of \d+ is too high"


_BM4D_NOTE = "bm4d: skipped, the `bm4d` package is not installed (`pip install bm4d` to add it)"


@dataclass(frozen=True)
class VolumeConfig:
    """What a volume evaluation computes (stored in the output folder's manifest).

    Parameters
    ----------
    noises, sigmas, peaks, read_noises, methods, n_draws, seed, cycle_spins
        As in :func:`evaluate_volumes`; ``methods`` are those that run
        (``bm4d`` dropped when its package is missing).
    volumes : tuple of str
        The volumes' file names, in the order that seeds their noise.
    notes : tuple of str
        What was skipped and why, one line each (written under the table).
    """

    noises: tuple[str, ...] = NOISE_MODELS
    sigmas: tuple[float, ...] = (PROTOCOL_SIGMA,)
    peaks: tuple[float, ...] = (PROTOCOL_PEAK,)
    read_noises: tuple[float, ...] = (PROTOCOL_READ_NOISE,)
    methods: tuple[str, ...] = VOLUME_METHODS
    n_draws: int = 1
    seed: int = 0
    cycle_spins: int = PROTOCOL_CYCLE_SPINS
    volumes: tuple[str, ...] = field(default_factory=tuple)
    notes: tuple[str, ...] = field(default_factory=tuple)

    def validate(self) -> None:
        """Raise ValueError, naming the parameter and its value, on an invalid setting."""
        if not self.noises:
            raise ValueError(f"noises is empty: give one or more of {', '.join(NOISE_MODELS)}")
        for n in self.noises:
            check_choice("noise", n, NOISE_MODELS, plural="noise models")
        for name, values, strict in (("sigmas", self.sigmas, True), ("peaks", self.peaks, True),
                                     ("read_noises", self.read_noises, False)):
            if not values:
                raise ValueError(f"{name} is empty: give at least one value")
            for v in values:
                check_number(name, v, strict=strict)
        if not self.methods:
            raise ValueError(f"methods is empty: give one or more of {', '.join(VOLUME_METHODS)}")
        for m in self.methods:
            check_choice("method", m, VOLUME_METHODS)
        check_int("n_draws", self.n_draws)
        check_int("seed", self.seed, min=0)
        check_int("cycle_spins", self.cycle_spins, min=0)

    def canonical(self) -> VolumeConfig:
        """The same settings without repeats, the parameters as Python floats of 6 significant digits.

        The CSV holds 6 significant digits, and a resumed run finds its rows
        by their parameters: they must read back equal.
        """
        def floats(values):
            return tuple(dict.fromkeys(float(f"{float(v):.6g}") for v in values))

        return replace(self, noises=tuple(dict.fromkeys(self.noises)), sigmas=floats(self.sigmas),
                       peaks=floats(self.peaks), read_noises=floats(self.read_noises),
                       methods=tuple(dict.fromkeys(self.methods)))

    def settings(self) -> list[tuple[str, float | None, float | None, float | None]]:
        """The noise settings ``(noise, sigma, peak, read_noise)``; the parameters another model has are None."""
        out: list[tuple[str, float | None, float | None, float | None]] = []
        for noise in self.noises:
            if noise == "gaussian":
                out += [(noise, s, None, None) for s in self.sigmas]
            else:
                out += [(noise, None, p, r) for p in self.peaks for r in self.read_noises]
        return out


# ---------------------------------------------------------------------------
# Reading the volumes
# ---------------------------------------------------------------------------


def _is_volume_entry(path: Path) -> bool:
    return path.suffix.lower() in VOLUME_SUFFIXES or (path.is_dir() and is_zarr(path))


def _read_npz(path: Path) -> np.ndarray:
    try:
        with np.load(path, allow_pickle=False) as npz:
            keys = list(npz.files)
            if len(keys) == 1 or "volume" in keys:
                return npz[keys[0] if len(keys) == 1 else "volume"]
    except Exception as exc:  # noqa: BLE001 - any reader failure is one clear line
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"cannot read {str(path)!r} as a NumPy archive: {text}") from None
    raise ValueError(f"{str(path)!r} holds several arrays ({', '.join(keys)}): name the volume's array 'volume' "
                     "or keep one array per file")


def _read_raw(path: Path) -> np.ndarray:
    """A volume file or store as stored (any dtype); one-line ValueErrors."""
    suffix = path.suffix.lower()
    if path.is_dir():
        # a whole OME-Zarr image may carry singleton time and channel axes around its (z, y, x)
        data = open_zarr(path).data
        return np.asarray(data.reshape([s for s in data.shape if s != 1]).compute())
    if suffix in (".tif", ".tiff"):
        raw = read_image(path)
        if raw.ndim == 3 and tiff_info(path).colour:
            raise ValueError(f"volume {path.name!r} in VOLUMES is a 2-D colour image (shape {raw.shape}): "
                             "expected 3-D volumes (z, y, x)")
        return raw
    if suffix == ".npz":
        return _read_npz(path)
    try:
        return np.load(path, allow_pickle=False)
    except Exception as exc:  # noqa: BLE001 - any reader failure is one clear line
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"cannot read {str(path)!r} as a NumPy array: {text}") from None


def normalise(volume: np.ndarray, name: str) -> np.ndarray:
    """Min-max normalised to [0, 1] in float64 (as ``benchmarks/_volumes.py``), so that PSNR has data range 1."""
    x = np.asarray(volume, dtype=np.float64)
    lo, hi = float(x.min()), float(x.max())
    if not hi > lo:
        raise ValueError(f"volume {name!r} in VOLUMES is constant ({lo:g}): it cannot be normalised to [0, 1]")
    return (x - lo) / (hi - lo)


def load_volumes(folder: str | os.PathLike) -> dict[str, np.ndarray]:
    """Read every 3-D volume of a folder, min-max normalised to [0, 1] in float64.

    Parameters
    ----------
    folder : path
        TIFF stacks (``.tif``, ``.tiff``; tifffile), NumPy arrays (``.npy``,
        or ``.npz`` holding one array or one named ``volume``) and zarr
        stores (a plain array, or level 0 of an OME-Zarr image, singleton
        axes dropped), each of shape (z, y, x). Other files are ignored.

    Returns
    -------
    dict
        Volumes by file name, in name order.

    Raises
    ------
    ValueError
        A missing folder, no volumes, or a file that is not a 3-D volume of
        at least :data:`MIN_SIDE` samples a side (a 2-D image, a colour
        image), constant, or holding NaN or infinite values.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"volume folder {str(folder)!r} does not exist or is not a folder")
    out = {}
    for path in sorted(folder.iterdir()):
        if not _is_volume_entry(path):
            continue
        raw = _read_raw(path)
        if raw.ndim != 3:
            raise ValueError(f"volume {path.name!r} in VOLUMES is not 3-D: its data has shape {raw.shape}; "
                             "expected volumes (z, y, x)")
        vol, _ = check_image(raw, name=f"volume {path.name!r}", spatial=3, exact=True, min_side=MIN_SIDE)
        out[path.name] = normalise(vol, path.name)
    if not out:
        raise ValueError(f"no volumes ({', '.join(VOLUME_SUFFIXES)} or zarr stores) in {str(folder)!r}")
    return out


# ---------------------------------------------------------------------------
# One unit: a volume, a noise setting, a draw and a method
# ---------------------------------------------------------------------------


def poisson_gaussian_noise(clean: np.ndarray, *, peak: float, read_noise: float,
                           rng: int | np.random.Generator | None = None) -> np.ndarray:
    """``clean`` under simulated photon noise: ``peak`` photons where it is 1, plus Gaussian read noise.

    The protocols' simulation (the evaluations, the benchmarks, the plugin's
    sample data): ``rng.poisson(peak * clean) / peak + read_noise *
    rng.standard_normal(clean.shape)``, so that the same generator gives the
    same draw everywhere. ``gain`` is ``1 / peak`` in the units of ``clean``.

    Parameters
    ----------
    clean : ndarray
        The expected values, >= 0 (image units; photons per unit: ``peak``).
    peak : float
        Photons expected where ``clean`` is 1.
    read_noise : float
        Standard deviation of the Gaussian read noise, in image units.
    rng : int or numpy.random.Generator, optional
        Seed or generator of the draw.

    Returns
    -------
    ndarray of float64
    """
    rng = np.random.default_rng(rng)
    return rng.poisson(peak * clean) / peak + read_noise * rng.standard_normal(clean.shape)


def _noisy(clean: np.ndarray, volume_index: int, setting: tuple, draw: int, seed: int) -> np.ndarray:
    """The noisy volume of a setting and draw: the same for every method (the seed does not involve it)."""
    noise, sigma, peak, read = setting
    if noise == "gaussian":
        rng = np.random.default_rng([seed, volume_index, 0, int(round(sigma * 1e6)), draw])
        return clean + sigma * rng.standard_normal(clean.shape)
    rng = np.random.default_rng([seed, volume_index, 1, int(round(peak * 1e3)), int(round(read * 1e6)), draw])
    return poisson_gaussian_noise(clean, peak=peak, read_noise=read, rng=rng)


def _restore_noise(setting: tuple) -> dict:
    """The true noise parameters in :func:`restore.denoise_wavelet_tree`'s terms."""
    noise, sigma, peak, read = setting
    if noise == "gaussian":
        return {"sigma": sigma}
    return {"noise": "poisson-gaussian", "gain": 1.0 / peak, "sigma": read}


def _through_anscombe(denoise: Callable[[np.ndarray, float], np.ndarray], y: np.ndarray, setting: tuple):
    """A Gaussian denoiser at the true sigma, or (Poisson-Gaussian) on the stabilised volume at sigma 1.

    As in the shared reference table and ``benchmarks/bench_volume.py``: the
    generalized Anscombe transform with the true gain and read noise, and
    its closed-form unbiased inverse.
    """
    noise, sigma, peak, read = setting
    if noise == "gaussian":
        return denoise(y, sigma)
    d = denoise(anscombe(y, 1.0 / peak, read), 1.0)
    return inverse_anscombe(d, 1.0 / peak, read, method="closed-form")


def _skimage_3d(y: np.ndarray, sigma: float) -> np.ndarray:
    from skimage.restoration import denoise_wavelet

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_LEVEL_WARNING, category=UserWarning, module=r"pywt\.")
        return denoise_wavelet(y, sigma=sigma, wavelet=SKIMAGE_WAVELET, wavelet_levels=SKIMAGE_LEVELS,
                               mode="soft", method="BayesShrink", rescale_sigma=True)


def _bm4d(y: np.ndarray, sigma: float) -> np.ndarray:
    import bm4d

    return np.asarray(bm4d.bm4d(y, sigma), dtype=np.float64)


_WARMED: set = set()  # the (method, noise setting) pairs this process has loaded and tabulated for


def _warm_up(method: str, setting: tuple) -> None:
    """Run ``method`` once on a tiny volume before it is timed, once per process and noise setting.

    The first call loads numba's kernels, the inverse's table, scikit-image's
    modules or BM4D's library; otherwise the first unit of a process pays
    them (up to a second, many times a small volume's work), and its method
    looks slower than the next one.
    """
    if method == "noisy" or (method, setting) in _WARMED:
        return
    tiny = np.random.default_rng(0).random((8, 32, 32))
    _denoise(method, tiny, setting, cycle_spins=2)
    _WARMED.add((method, setting))


def _denoise(method: str, y: np.ndarray, setting: tuple, cycle_spins: int) -> np.ndarray:
    """``method``'s estimate of the clean volume from ``y``, given the true noise parameters."""
    from ..denoise import denoise_nonlocal_tree, denoise_wavelet_tree

    if method == "noisy":
        return y
    if method == "planes":
        return denoise_wavelet_tree(y, cycle_spins=cycle_spins, **_restore_noise(setting))
    if method == "octree":
        return denoise_wavelet_tree(y, axes=(0, 1, 2), cycle_spins=cycle_spins, **_restore_noise(setting))
    if method == "nonlocal":  # its own parameters (no cycle spins): the noise model as the octree's
        return denoise_nonlocal_tree(y, axes=(0, 1, 2), **_restore_noise(setting))
    if method == "skimage-3d":
        return _through_anscombe(_skimage_3d, y, setting)
    return _through_anscombe(_bm4d, y, setting)


def _psnr(x: np.ndarray, ref: np.ndarray) -> float:
    mse = float(np.mean((x - ref) ** 2))
    return float("inf") if mse == 0 else 10.0 * np.log10(1.0 / mse)


def run_volume_unit(clean: np.ndarray, name: str, volume_index: int, setting: tuple, draw: int, method: str,
                    config: VolumeConfig) -> list[dict]:
    """Denoise one noisy volume with one method: its row (PSNR, CPU and wall seconds).

    Parameters
    ----------
    clean : ndarray
        The normalised volume, the reference.
    name : str
        Its file name.
    volume_index : int
        Its index in the folder, part of the noise's seed.
    setting : tuple
        ``(noise, sigma, peak, read_noise)`` (see :meth:`VolumeConfig.settings`).
    draw : int
        The noise draw, part of the seed.
    method : str
        One of :data:`VOLUME_METHODS`.
    config : VolumeConfig
        The run's settings (seed, cycle spins).

    Returns
    -------
    list of dict
        One row. CPU seconds are :func:`time.process_time` of the process
        running the unit (all its threads); the one-off loading of a
        method's kernels and modules (a first call on a tiny volume) is not
        counted.
    """
    y = _noisy(clean, volume_index, setting, draw, config.seed)
    _warm_up(method, setting)
    c0, w0 = time.process_time(), time.perf_counter()
    out = _denoise(method, y, setting, config.cycle_spins)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    noise, sigma, peak, read = setting
    return [{"volume": name, "noise": noise, "sigma": sigma, "peak": peak, "read_noise": read, "draw": draw,
             "method": method, "psnr": _psnr(out, clean), "cpu_seconds": cpu, "wall_seconds": wall}]


def _row_key(row: dict) -> tuple:
    return (row["volume"], row["noise"], row["sigma"], row["peak"], row["read_noise"], int(row["draw"]),
            row["method"])


def _optional_float(text: str) -> float | None:
    """A parameter cell: empty when the noise model has no such parameter."""
    return float(text) if text else None


_TYPES = {"sigma": _optional_float, "peak": _optional_float, "read_noise": _optional_float, "draw": int,
          "psnr": float, "cpu_seconds": float, "wall_seconds": float}


def _bm4d_installed() -> bool:
    try:
        import bm4d  # noqa: F401
    except ImportError:
        return False
    return True


def evaluate_volumes(
    volume_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    noises: Sequence[str] = NOISE_MODELS,
    sigmas: Sequence[float] = (PROTOCOL_SIGMA,),
    peaks: Sequence[float] = (PROTOCOL_PEAK,),
    read_noises: Sequence[float] = (PROTOCOL_READ_NOISE,),
    methods: Sequence[str] = VOLUME_METHODS,
    n_draws: int = 1,
    seed: int = 0,
    cycle_spins: int = PROTOCOL_CYCLE_SPINS,
    n_jobs: int | None = None,
    scheduler: str | None = None,
    force: bool = False,
    progress: bool | Callable[[int, int], None] = True,
) -> list[dict]:
    """Run the volume protocol on a folder of 3-D volumes and write the results.

    Each volume is min-max normalised to [0, 1] (float64) and is the clean
    reference. For each noise setting and draw a noisy volume is drawn
    (seeded by ``seed``, the volume's index, the setting and the draw: the
    same for every method) and each method denoises it, knowing the true
    noise parameters:

    * ``noisy``: the noisy volume itself (the reference row, no work);
    * ``planes``: :func:`restore.denoise_wavelet_tree` plane by plane (its
      default axes), with ``cycle_spins``;
    * ``octree``: the same with ``axes=(0, 1, 2)`` (one 3-D transform);
    * ``nonlocal``: :func:`restore.denoise_nonlocal_tree` with
      ``axes=(0, 1, 2)`` (groups of similar cubes), its own parameters;
    * ``skimage-3d``: :func:`skimage.restoration.denoise_wavelet` on the
      volume, sym4, 3 levels, BayesShrink, soft, ``rescale_sigma=True``;
    * ``bm4d``: ``bm4d.bm4d`` at the true sigma, when the ``bm4d`` package
      is installed (otherwise skipped, with a note in ``table.md``).

    Under Poisson-Gaussian noise restore's three methods take
    ``noise='poisson-gaussian'`` with the true gain (``1 / peak``) and read
    noise; scikit-image and BM4D denoise the generalized Anscombe transform
    at sigma 1 and come back through its closed-form unbiased inverse
    (:mod:`restore.noise`), as in the shared reference table.

    Parameters
    ----------
    volume_dir : path
        Folder of volumes (z, y, x): TIFF stacks, ``.npy``, ``.npz`` (one
        array, or one named ``volume``) and zarr stores (see
        :func:`load_volumes`). The volumes are held in memory.
    out_dir : path
        Output folder: ``results.csv`` (one row per volume, noise setting,
        draw and method: ``volume, noise, sigma, peak, read_noise, draw,
        method, psnr, cpu_seconds, wall_seconds``; a parameter the noise
        model does not have is empty), ``table.md`` (mean PSNR and CPU
        seconds per volume, setting and method), ``psnr.png``; resumable and
        safe for the user's files as for
        :func:`~restore.evaluate.evaluate_denoising`.
    noises : sequence of {'gaussian', 'poisson-gaussian'}
        Noise models.
    sigmas : sequence of float
        Gaussian noise: standard deviations in [0, 1] units, each > 0
        (default 0.10, the protocol of the BM4D comparison).
    peaks : sequence of float
        Poisson-Gaussian noise: photons at intensity 1, each > 0 (default
        10).
    read_noises : sequence of float
        Poisson-Gaussian noise: standard deviations of the Gaussian read
        noise in [0, 1] units, each >= 0 (default 0.02); every peak is
        combined with every read noise.
    methods : sequence of str
        Among ``'noisy'``, ``'planes'``, ``'octree'``, ``'skimage-3d'``,
        ``'nonlocal'``, ``'bm4d'``.
    n_draws : int
        Noise draws per volume and setting (default 1: BM4D takes minutes
        per draw on a 32 x 256 x 256 volume).
    seed : int
        Seed of the noise.
    cycle_spins : int
        Shifts of ``planes`` and ``octree`` (default 8, as the issue's
        targets are measured).
    n_jobs : int, optional
        Local worker processes (default: all CPUs); each runs one unit at a
        time on one core. With 1, units run in this process with every
        thread restore uses.
    scheduler : str, optional
        Address of a ``dask.distributed`` scheduler to run the units on.
        CPU seconds are those of the process running a unit: on a worker
        with several threads they include its other tasks'.
    force : bool
        Discard the results of a previous run in ``out_dir`` (only the files
        it wrote).
    progress : bool or callable
        Show a progress bar (tqdm), or call ``progress(done, total)``.

    Returns
    -------
    list of dict
        One dict per result row (the CSV's columns).

    Raises
    ------
    ValueError
        A bad setting (naming the parameter and its value) or a file in
        ``volume_dir`` that is not a 3-D volume, before any work.
    """
    methods = tuple(methods)
    notes: tuple[str, ...] = ()
    if "bm4d" in methods and not _bm4d_installed():
        methods = tuple(m for m in methods if m != "bm4d")
        notes = (_BM4D_NOTE,)
    config = VolumeConfig(tuple(noises), tuple(sigmas), tuple(peaks), tuple(read_noises), methods, n_draws, seed,
                          cycle_spins, notes=notes)
    config.validate()  # the settings first: a bad one is refused before the volumes are read
    if n_jobs is not None:
        check_int("n_jobs", n_jobs)
    volume_dir = Path(volume_dir)
    volumes = load_volumes(volume_dir)
    config = replace(config.canonical(), volumes=tuple(volumes))
    units = [Unit((name, setting, d, m), run_volume_unit, (clean, name, i, setting, d, m, config),
                  frozenset({(name, *setting, d, m)}))
             for i, (name, clean) in enumerate(volumes.items()) for setting in config.settings()
             for d in range(config.n_draws) for m in config.methods]
    with OutputFolder(out_dir, {"task": "volume", **asdict(config)}, force=force, input_dir=volume_dir) as folder:
        rows = folder.run(units, _row_key, VOLUME_COLUMNS, _TYPES, progress, n_jobs, scheduler)
        order = {u.key: k for k, u in enumerate(units)}
        rows.sort(key=lambda r: order[(r["volume"], (r["noise"], r["sigma"], r["peak"], r["read_noise"]),
                                       int(r["draw"]), r["method"])])
        folder.write_text("results.csv", csv_text(rows, VOLUME_COLUMNS))
        folder.write_text("table.md", volume_table(rows, config.methods, config.notes))
        with folder.atomic_path("psnr.png") as tmp:
            write_volume_plot(rows, config.methods, tmp)
        folder.finish()
    return rows
