"""The denoising protocol of Jenatton et al.'s Table 1: PSNR of every penalty on a folder of images.

Grey images in [0, 255], white Gaussian noise of several levels, several
wavelets and penalties, a few noise draws; ``lam`` either picked by an oracle
(the best PSNR, found by a golden-section search over ``lam / sigma``) or
chosen automatically from the noisy image (:func:`restore.choose_lam`).
Beside the penalties, methods that choose no lam and use no wavelet are
given the known sigma: :func:`restore.denoise_nonlocal_tree` (by default)
and BM3D (the ``bm3d`` package, on request, when installed).
Results go to a CSV file (one row per image, sigma, wavelet, penalty, lam
mode and draw; the wavelet-free methods with an empty wavelet), a Markdown
table in the paper's layout and a PNG plot.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .._validation import check_choice, check_int, check_number, check_wavelet
from .report import LAM_MODES, PAPER_ORDER, csv_text, markdown_table, write_plot
from .runner import IMAGE_SUFFIXES, OutputFolder, Unit

__all__ = ["COLUMNS", "EvaluationConfig", "evaluate_denoising", "load_grey_images",
           "run_unit"]

COLUMNS = ("image", "sigma", "wavelet", "method", "lam_mode", "draw", "lam", "psnr", "seconds", "cpu_seconds")

#: The methods given the known sigma that use no wavelet (their rows' wavelet is empty).
NONLOCAL, BM3D = "nonlocal", "bm3d"
_BM3D_NOTE = "bm3d: not run, the `bm3d` package is not installed (`pip install bm3d` to add it)"


@dataclass(frozen=True)
class EvaluationConfig:
    """What an evaluation run computes (stored next to its results).

    Parameters
    ----------
    sigmas : tuple of float
        Standard deviations of the Gaussian noise, on the [0, 255] scale.
    wavelets : tuple of str
        PyWavelets names of the wavelets.
    penalties : tuple of str
        Penalties of :func:`restore.prox` to compare.
    lam_modes : tuple of str
        How ``lam`` is chosen: ``"oracle"`` (best PSNR against the clean
        image) and ``"auto"`` (SURE, no clean image).
    n_draws : int
        Noise draws per image and sigma.
    seed : int
        Seed of the noise draws (each draw is seeded from it, the image and
        the sigma).
    bayes : bool
        Add scikit-image's BayesShrink as a reference.
    images : tuple of str
        Names of the images evaluated (filled in by the runner).
    nonlocal_tree : bool
        Add :func:`restore.denoise_nonlocal_tree` (known sigma, its own
        parameters).
    bm3d : bool
        Add BM3D (``bm3d.bm3d``, known sigma); False when its package is
        missing, with a note.
    notes : tuple of str
        What was skipped and why, one line each (written under the tables).
    """

    sigmas: tuple[float, ...] = (5.0, 10.0, 25.0, 50.0, 100.0)
    wavelets: tuple[str, ...] = ("haar", "db3")
    penalties: tuple[str, ...] = PAPER_ORDER
    lam_modes: tuple[str, ...] = LAM_MODES
    n_draws: int = 5
    seed: int = 0
    bayes: bool = True
    images: tuple[str, ...] = field(default_factory=tuple)
    nonlocal_tree: bool = True
    bm3d: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)

    def validate(self) -> None:
        """Raise ValueError on an invalid setting."""
        from ..proximal import PENALTIES  # here: it loads numba, which naming the settings does not need

        if not self.sigmas:
            raise ValueError("sigmas is empty: give at least one noise level")
        for s in self.sigmas:
            check_number("sigmas", s, strict=True)
        for w in self.wavelets:
            check_wavelet(w)
        for p in self.penalties:
            check_choice("penalty", p, PENALTIES, plural="penalties")
        for m in self.lam_modes:
            check_choice("lam mode", m, LAM_MODES, plural="modes")
        check_int("n_draws", self.n_draws)
        check_int("seed", self.seed, min=0)
        if not self.images:
            raise ValueError("no images to evaluate")


def load_grey_images(folder: str | os.PathLike) -> dict[str, np.ndarray]:
    """Read every image of a folder as grey float64 in [0, 255].

    Colour images are converted with :func:`skimage.color.rgb2gray`.

    Parameters
    ----------
    folder : str or os.PathLike
        Folder of image files (PNG, JPEG, TIFF, ...); other files are ignored.

    Returns
    -------
    dict of str to ndarray
        The images by file name, in sorted order.
    """
    from skimage import color, io
    from skimage.util import img_as_float

    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"image folder {str(folder)!r} does not exist or is not a folder")
    out = {}
    for path in sorted(folder.iterdir()):
        if path.suffix.lower() not in IMAGE_SUFFIXES:
            continue
        im = io.imread(path)
        if im.ndim == 3:
            im = color.rgb2gray(im[..., :3])
        out[path.name] = 255.0 * img_as_float(im)
    if not out:
        raise ValueError(f"no images ({', '.join(IMAGE_SUFFIXES)}) in {str(folder)!r}")
    return out


# The oracle's search over t = lam / sigma (threshold units): wider than SURE's, and finer.
_ORACLE_SEARCH = {"lo": 0.05, "hi": 6.0, "n_grid": 12, "n_golden": 10}


def _psnr(x: np.ndarray, ref: np.ndarray) -> float:
    mse = float(np.mean((x - ref) ** 2))
    return float("inf") if mse == 0 else 10.0 * np.log10(255.0**2 / mse)


class _Clock:
    """Wall and CPU seconds (of this process, all its threads) since it was made."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def seconds(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


_WARMED: set = set()  # what this process has loaded and compiled: the first timed call must not pay for it


def _warm_up(method: str, wavelet: str = "") -> None:
    """Run ``method`` once on a tiny image before it is timed, once per process (and wavelet).

    The first call loads numba's cached kernels, scikit-image's modules or
    BM3D's library: a tenth of a second to a second, ten to a hundred times
    a small image's work, which the first unit of each process would
    otherwise count.
    """
    if (method, wavelet) in _WARMED:
        return
    tiny = 255.0 * np.random.default_rng(0).random((32, 32))
    if method == NONLOCAL:
        from ..denoise import denoise_nonlocal_tree

        denoise_nonlocal_tree(tiny / 255.0, sigma=0.1)
    elif method == BM3D:
        import bm3d

        bm3d.bm3d(tiny / 255.0, sigma_psd=0.1)
    elif method == "bayes_shrink":
        from skimage.restoration import denoise_wavelet

        denoise_wavelet(tiny / 255.0, sigma=0.1, wavelet=wavelet, mode="soft", method="BayesShrink",
                        rescale_sigma=True)
    else:  # a penalty: its transform, lam choice and shrinkage
        from ..denoise import PlaneDenoiser

        den = PlaneDenoiser(tiny.shape, wavelet, method)
        den.shrink(den.transform(tiny), den.automatic_lam(tiny, 25.0, np.random.default_rng(0)))
    _WARMED.add((method, wavelet))


def _wavelet_free(method: str, noisy: np.ndarray, sigma: float) -> np.ndarray:
    """``method`` on the noisy grey image in [0, 1] at the known sigma on that scale, back on [0, 255].

    Both methods get what the penalties get (the noisy image and its true
    sigma) through their own public call, in their own layout (a 2-D float
    array in [0, 1]), and choose everything else themselves.
    """
    if method == NONLOCAL:
        from ..denoise import denoise_nonlocal_tree

        out = denoise_nonlocal_tree(noisy / 255.0, sigma=sigma / 255.0)
    else:
        import bm3d

        out = bm3d.bm3d(noisy / 255.0, sigma_psd=sigma / 255.0)
    return 255.0 * np.asarray(out, dtype=np.float64)


def _methods_without_wavelet(config: EvaluationConfig) -> tuple[str, ...]:
    return tuple(m for m, on in ((NONLOCAL, config.nonlocal_tree), (BM3D, config.bm3d)) if on)


def run_unit(clean: np.ndarray, name: str, image_index: int, sigma: float, draw: int,
             config: EvaluationConfig) -> list[dict]:
    """Evaluate every wavelet, penalty and lam mode, then the wavelet-free methods, on one noisy image.

    Each row's ``seconds`` (wall) and ``cpu_seconds`` (this process's CPU
    time) cover the method's whole work on the image: for a penalty, its
    transform (shared by both lam modes, counted in each), the choice of
    lam and the shrinkage with the inverse transform. The one-off loading
    of a wavelet-free method's kernels is done before and not counted.
    """
    from ..denoise import PlaneDenoiser, lam_from_threshold, log_search

    rng = np.random.default_rng([config.seed, image_index, int(round(sigma * 1000)), draw])
    noisy = clean + sigma * rng.standard_normal(clean.shape)
    rows = []

    def row(wavelet, method, mode, lam, psnr, clock, setup=(0.0, 0.0)):
        seconds, cpu = clock.seconds()
        rows.append({"image": name, "sigma": sigma, "wavelet": wavelet, "method": method,
                     "lam_mode": mode, "draw": draw, "lam": lam, "psnr": psnr, "seconds": seconds + setup[0],
                     "cpu_seconds": cpu + setup[1]})

    for wavelet in config.wavelets:
        for penalty in config.penalties:
            _warm_up(penalty, wavelet)
            clock = _Clock()
            den = PlaneDenoiser(clean.shape, wavelet, penalty)
            c = den.transform(noisy)
            setup = clock.seconds()
            if "oracle" in config.lam_modes:
                clock = _Clock()
                t = log_search(lambda t, p=penalty, c=c, den=den: -_psnr(
                    den.shrink(c, lam_from_threshold(t, sigma, p)), clean), **_ORACLE_SEARCH)
                lam = lam_from_threshold(t, sigma, penalty)
                psnr = _psnr(den.shrink(c, lam), clean)
                row(wavelet, penalty, "oracle", lam, psnr, clock, setup)
            if "auto" in config.lam_modes:
                clock = _Clock()
                lam = den.automatic_lam(noisy, sigma, np.random.default_rng(draw))
                psnr = _psnr(den.shrink(c, lam), clean)
                row(wavelet, penalty, "auto", lam, psnr, clock, setup)
        if config.bayes:
            from skimage.restoration import denoise_wavelet

            _warm_up("bayes_shrink", wavelet)
            clock = _Clock()
            out = 255.0 * denoise_wavelet(noisy / 255.0, sigma=sigma / 255.0, wavelet=wavelet,
                                          mode="soft", method="BayesShrink", rescale_sigma=True)
            row(wavelet, "bayes_shrink", "auto", float("nan"), _psnr(out, clean), clock)
    for method in _methods_without_wavelet(config):
        _warm_up(method)
        clock = _Clock()
        out = _wavelet_free(method, noisy, sigma)
        row("", method, "auto", float("nan"), _psnr(out, clean), clock)
    return rows


def _row_key(row: dict) -> tuple:
    return (row["image"], float(row["sigma"]), row["wavelet"], row["method"], row["lam_mode"], int(row["draw"]))


def _unit_rows(name: str, sigma: float, draw: int, config: EvaluationConfig) -> frozenset:
    """The keys of the rows :func:`run_unit` writes for one noisy image."""
    keys = {(name, sigma, w, p, m, draw) for w in config.wavelets for p in config.penalties for m in config.lam_modes}
    if config.bayes:
        keys |= {(name, sigma, w, "bayes_shrink", "auto", draw) for w in config.wavelets}
    keys |= {(name, sigma, "", m, "auto", draw) for m in _methods_without_wavelet(config)}
    return frozenset(keys)


_TYPES = {"sigma": float, "draw": int, "lam": float, "psnr": float, "seconds": float, "cpu_seconds": float}


def _bm3d_installed() -> bool:
    try:
        import bm3d  # noqa: F401
    except ImportError:
        return False
    return True


def evaluate_denoising(
    image_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    sigmas: Sequence[float] = (5, 10, 25, 50, 100),
    wavelets: Sequence[str] = ("haar", "db3"),
    penalties: Sequence[str] = PAPER_ORDER,
    lam_modes: Sequence[str] = LAM_MODES,
    n_draws: int = 5,
    seed: int = 0,
    bayes: bool = True,
    nonlocal_tree: bool = True,
    bm3d: bool = False,
    n_jobs: int | None = None,
    scheduler: str | None = None,
    force: bool = False,
    progress: bool | Callable[[int, int], None] = True,
) -> list[dict]:
    """Run the Table 1 protocol on a folder of images and write the results.

    Parameters
    ----------
    image_dir : path
        Folder of images (PNG, TIFF, JPEG, BMP); colour images are converted
        to grey, all are scaled to [0, 255].
    out_dir : path
        Output folder; created if missing. Holds ``results.csv``,
        ``table.md``, ``psnr.png`` and ``config.json``. A folder with the
        results of a finished run is not overwritten unless ``force``; one
        with an interrupted run of the same configuration is resumed.
    sigmas, wavelets, penalties : sequences
        The grid: noise levels (in [0, 255] units), orthogonal wavelets,
        penalties.
    lam_modes : sequence of {'oracle', 'auto'}
        ``'oracle'``: the lam with the best PSNR (golden-section search
        over ``lam / sigma``); ``'auto'``: :func:`restore.choose_lam` with the
        known sigma (SURE or the calibrated rule).
    n_draws : int
        Noise draws per image and sigma.
    seed : int
        Seed of the noise; the same seed gives the same noisy images.
    bayes : bool
        Also run scikit-image's ``denoise_wavelet`` (BayesShrink, soft,
        ``rescale_sigma=True``) as a reference column.
    nonlocal_tree : bool
        Also run :func:`restore.denoise_nonlocal_tree` (column
        ``nonlocal``) with the known sigma; it chooses its own parameters
        and uses no wavelet (one row per image, sigma and draw, with an
        empty wavelet, shown in every wavelet's row of both tables). About
        half the CPU time of the rest of the default grid.
    bm3d : bool
        Also run BM3D (``bm3d.bm3d``, column ``bm3d``) with the known sigma,
        as the non-local method: the reference of state of the art, at
        several times the CPU time of everything else. Skipped, with a note
        in ``table.md``, when the ``bm3d`` package is not installed.
    n_jobs : int, optional
        Local worker processes (default: all CPUs).
    scheduler : str, optional
        Address of a ``dask.distributed`` scheduler to run the units on
        instead of local processes.
    force : bool
        Discard the results of a previous run in ``out_dir``.
    progress : bool or callable
        Show a progress bar (tqdm), or call ``progress(done, total)``.

    Returns
    -------
    list of dict
        One dict per result row (the CSV's columns).
    """
    image_dir = Path(image_dir)
    images = load_grey_images(image_dir)
    notes: tuple[str, ...] = ()
    if bm3d and not _bm3d_installed():
        bm3d, notes = False, (_BM3D_NOTE,)
    config = EvaluationConfig(tuple(float(s) for s in sigmas), tuple(wavelets), tuple(penalties),
                              tuple(lam_modes), int(n_draws), int(seed), bool(bayes), tuple(images),
                              bool(nonlocal_tree), bool(bm3d), notes)
    config.validate()
    check_int("n_jobs", n_jobs) if n_jobs is not None else None
    index = {name: i for i, name in enumerate(images)}
    units = [Unit((name, s, d), run_unit, (images[name], name, index[name], s, d, config),
                  _unit_rows(name, s, d, config))
             for name in images for s in config.sigmas for d in range(config.n_draws)]
    with OutputFolder(out_dir, {"task": "denoise", **asdict(config)}, force=force, input_dir=image_dir) as folder:
        rows = folder.run(units, _row_key, COLUMNS, _TYPES, progress, n_jobs, scheduler)
        rows.sort(key=_row_key)
        folder.write_text("results.csv", csv_text(rows, COLUMNS))
        folder.write_text("table.md", markdown_table(rows, config.notes))
        with folder.atomic_path("psnr.png") as tmp:
            write_plot(rows, tmp)
        folder.finish()
    return rows
