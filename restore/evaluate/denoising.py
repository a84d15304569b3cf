"""The denoising protocol of Jenatton et al.'s Table 1: PSNR of every penalty on a folder of images.

Grey images in [0, 255], white Gaussian noise of several levels, several
wavelets and penalties, a few noise draws; ``lam`` either picked by an oracle
(the best PSNR, found by a golden-section search over ``lam / sigma``) or
chosen automatically from the noisy image (:func:`restore.choose_lam`).
Results go to a CSV file (one row per image, sigma, wavelet, penalty, lam
mode and draw), a Markdown table in the paper's layout and a PNG plot.
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

COLUMNS = ("image", "sigma", "wavelet", "method", "lam_mode", "draw", "lam", "psnr", "seconds")


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
    """

    sigmas: tuple[float, ...] = (5.0, 10.0, 25.0, 50.0, 100.0)
    wavelets: tuple[str, ...] = ("haar", "db3")
    penalties: tuple[str, ...] = PAPER_ORDER
    lam_modes: tuple[str, ...] = LAM_MODES
    n_draws: int = 5
    seed: int = 0
    bayes: bool = True
    images: tuple[str, ...] = field(default_factory=tuple)

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


def run_unit(clean: np.ndarray, name: str, image_index: int, sigma: float, draw: int,
             config: EvaluationConfig) -> list[dict]:
    """Evaluate every wavelet, penalty and lam mode on one noisy image."""
    from ..denoise import PlaneDenoiser, lam_from_threshold, log_search

    rng = np.random.default_rng([config.seed, image_index, int(round(sigma * 1000)), draw])
    noisy = clean + sigma * rng.standard_normal(clean.shape)
    rows = []

    def row(wavelet, method, mode, lam, psnr, seconds):
        rows.append({"image": name, "sigma": sigma, "wavelet": wavelet, "method": method,
                     "lam_mode": mode, "draw": draw, "lam": lam, "psnr": psnr, "seconds": seconds})

    for wavelet in config.wavelets:
        for penalty in config.penalties:
            den = PlaneDenoiser(clean.shape, wavelet, penalty)
            c = den.transform(noisy)
            if "oracle" in config.lam_modes:
                t0 = time.perf_counter()
                t = log_search(lambda t, p=penalty, c=c, den=den: -_psnr(
                    den.shrink(c, lam_from_threshold(t, sigma, p)), clean), **_ORACLE_SEARCH)
                lam = lam_from_threshold(t, sigma, penalty)
                psnr = _psnr(den.shrink(c, lam), clean)
                row(wavelet, penalty, "oracle", lam, psnr, time.perf_counter() - t0)
            if "auto" in config.lam_modes:
                t0 = time.perf_counter()
                lam = den.automatic_lam(noisy, sigma, np.random.default_rng(draw))
                psnr = _psnr(den.shrink(c, lam), clean)
                row(wavelet, penalty, "auto", lam, psnr, time.perf_counter() - t0)
        if config.bayes:
            from skimage.restoration import denoise_wavelet

            t0 = time.perf_counter()
            out = 255.0 * denoise_wavelet(noisy / 255.0, sigma=sigma / 255.0, wavelet=wavelet,
                                          mode="soft", method="BayesShrink", rescale_sigma=True)
            row(wavelet, "bayes_shrink", "auto", float("nan"), _psnr(out, clean), time.perf_counter() - t0)
    return rows


def _row_key(row: dict) -> tuple:
    return (row["image"], float(row["sigma"]), row["wavelet"], row["method"], row["lam_mode"], int(row["draw"]))


def _unit_rows(name: str, sigma: float, draw: int, config: EvaluationConfig) -> frozenset:
    """The keys of the rows :func:`run_unit` writes for one noisy image."""
    keys = {(name, sigma, w, p, m, draw) for w in config.wavelets for p in config.penalties for m in config.lam_modes}
    if config.bayes:
        keys |= {(name, sigma, w, "bayes_shrink", "auto", draw) for w in config.wavelets}
    return frozenset(keys)


_TYPES = {"sigma": float, "draw": int, "lam": float, "psnr": float, "seconds": float}


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
    config = EvaluationConfig(tuple(float(s) for s in sigmas), tuple(wavelets), tuple(penalties),
                              tuple(lam_modes), int(n_draws), int(seed), bool(bayes), tuple(images))
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
        folder.write_text("table.md", markdown_table(rows))
        with folder.atomic_path("psnr.png") as tmp:
            write_plot(rows, tmp)
        folder.finish()
    return rows
