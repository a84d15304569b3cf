"""Batch PSNR evaluation of wavelet tree denoising (Table 1 protocol of Jenatton et al.).

Grey images in [0, 255], white Gaussian noise of several levels, several
wavelets and penalties, a few noise draws; ``lam`` either picked by an oracle
(the best PSNR, found by a golden-section search over ``lam / sigma``) or
chosen automatically from the noisy image (:func:`restore.choose_lam`).
Results go to a CSV file (one row per image, sigma, wavelet, penalty, lam
mode and draw), a Markdown table in the paper's layout and a PNG plot.

Work is split into independent units (one noisy image each), run in local
processes or on a Dask cluster; each finished unit is appended to a partial
file, so an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import csv
import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ._config import default_num_threads
from ._io import atomic_path, atomic_write_text
from .denoise import _lam_for_plane, _plan, _resolve_method, _shrink_rows, _sure_search
from .proximal import check_penalty_name
from .wavelet import _check_wavelet, default_level

__all__ = ["EvaluationConfig", "evaluate_denoising", "load_grey_images"]

PAPER_ORDER = ("l0", "tree_l0", "l1", "tree_l2", "tree_linf")
LAM_MODES = ("oracle", "auto")
COLUMNS = ("image", "sigma", "wavelet", "method", "lam_mode", "draw", "lam", "psnr", "seconds")
IMAGE_SUFFIXES = (".png", ".tif", ".tiff", ".jpg", ".jpeg", ".bmp")


@dataclass(frozen=True)
class EvaluationConfig:
    """What an evaluation run computes (stored next to its results)."""

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
        if not self.sigmas or any(not np.isfinite(s) or s <= 0 for s in self.sigmas):
            raise ValueError(f"sigmas must be positive numbers, got {self.sigmas!r}")
        for w in self.wavelets:
            _check_wavelet(w)
        for p in self.penalties:
            check_penalty_name(p)
        for m in self.lam_modes:
            if m not in LAM_MODES:
                raise ValueError(f"Invalid lam mode: {m!r}; supported modes are {', '.join(LAM_MODES)}")
        if self.n_draws < 1:
            raise ValueError(f"n_draws must be >= 1, got {self.n_draws}")
        if not self.images:
            raise ValueError("no images to evaluate")


def load_grey_images(folder: str | os.PathLike) -> dict[str, np.ndarray]:
    """Read every image of a folder as grey float64 in [0, 255].

    Colour images are converted with :func:`skimage.color.rgb2gray`.
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


def _psnr(x: np.ndarray, ref: np.ndarray) -> float:
    mse = float(np.mean((x - ref) ** 2))
    return float("inf") if mse == 0 else 10.0 * np.log10(255.0**2 / mse)


def _lam_of_t(t: float, sigma: float, penalty: str) -> float:
    return 0.5 * (t * sigma) ** 2 if penalty in ("l0", "tree_l0") else t * sigma


def _denoise_coeffs(c: np.ndarray, lam: float, penalty: str, plan, work: np.ndarray) -> np.ndarray:
    work[0] = c
    _shrink_rows(work, lam, penalty, plan, False)
    return plan.inverse(work[0])


def run_unit(clean: np.ndarray, name: str, image_index: int, sigma: float, draw: int,
             config: EvaluationConfig) -> list[dict]:
    """Evaluate every wavelet, penalty and lam mode on one noisy image."""
    rng = np.random.default_rng([config.seed, image_index, int(round(sigma * 1000)), draw])
    noisy = clean + sigma * rng.standard_normal(clean.shape)
    rows = []

    def row(wavelet, method, mode, lam, psnr, seconds):
        rows.append({"image": name, "sigma": sigma, "wavelet": wavelet, "method": method,
                     "lam_mode": mode, "draw": draw, "lam": lam, "psnr": psnr, "seconds": seconds})

    for wavelet in config.wavelets:
        plan = _plan(clean.shape, wavelet, default_level(clean.shape), False)
        c = plan.forward(noisy)
        work = np.empty((1, c.shape[0]))
        for penalty in config.penalties:
            if "oracle" in config.lam_modes:
                t0 = time.perf_counter()
                t = _sure_search(lambda t, p=penalty, c=c, plan=plan, work=work: -_psnr(
                    _denoise_coeffs(c, _lam_of_t(t, sigma, p), p, plan, work), clean),
                    lo=0.05, hi=6.0, n_grid=12, n_golden=10)
                lam = _lam_of_t(t, sigma, penalty)
                psnr = _psnr(_denoise_coeffs(c, lam, penalty, plan, work), clean)
                row(wavelet, penalty, "oracle", lam, psnr, time.perf_counter() - t0)
            if "auto" in config.lam_modes:
                t0 = time.perf_counter()
                method = _resolve_method(None, penalty)
                lam = _lam_for_plane(noisy, sigma, penalty, method, plan, False,
                                     np.random.default_rng(draw))
                psnr = _psnr(_denoise_coeffs(c, lam, penalty, plan, work), clean)
                row(wavelet, penalty, "auto", lam, psnr, time.perf_counter() - t0)
        if config.bayes:
            from skimage.restoration import denoise_wavelet

            t0 = time.perf_counter()
            out = 255.0 * denoise_wavelet(noisy / 255.0, sigma=sigma / 255.0, wavelet=wavelet,
                                          mode="soft", method="BayesShrink", rescale_sigma=True)
            row(wavelet, "bayes_shrink", "auto", float("nan"), _psnr(out, clean), time.perf_counter() - t0)
    return rows


def _unit_key(row: dict) -> tuple:
    return (row["image"], float(row["sigma"]), int(row["draw"]))


def _worker_init() -> None:
    # Each process runs one unit at a time on one core.
    os.environ["RESTORE_NUM_THREADS"] = "1"


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
    out = Path(out_dir)
    paths = _prepare_out_dir(out, config, force, image_dir)
    done = _read_rows(paths["partial"])
    done_keys = {_unit_key(r) for r in done}
    index = {name: i for i, name in enumerate(images)}
    units = [(name, s, d) for name in images for s in config.sigmas for d in range(config.n_draws)
             if (name, s, d) not in done_keys]
    total = len(units) + len({_unit_key(r) for r in done})
    report = _progress(progress, total, total - len(units))
    rows = list(done)
    with open(paths["partial"], "a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        if fh.tell() == 0:
            writer.writeheader()
            fh.flush()
        for unit_rows in _execute(units, images, index, config, n_jobs, scheduler):
            writer.writerows(unit_rows)
            fh.flush()
            os.fsync(fh.fileno())
            rows.extend(unit_rows)
            report()
    report.close()
    rows.sort(key=lambda r: (r["image"], float(r["sigma"]), r["wavelet"], r["method"], r["lam_mode"],
                             int(r["draw"])))
    atomic_write_text(paths["csv"], _csv_text(rows))
    atomic_write_text(paths["table"], markdown_table(rows))
    _write_plot(rows, paths["plot"])
    paths["partial"].unlink()
    return rows


def _execute(units, images, index, config, n_jobs, scheduler) -> Iterable[list[dict]]:
    if not units:
        return
    if scheduler is not None:
        from dask.distributed import Client
        from dask.distributed import as_completed as dask_completed

        with Client(scheduler) as client:
            futures = [client.submit(run_unit, images[name], name, index[name], s, d, config, pure=False)
                       for name, s, d in units]
            for fut in dask_completed(futures):
                yield fut.result()
        return
    n_jobs = default_num_threads() if n_jobs is None else int(n_jobs)
    if n_jobs < 1:
        raise ValueError(f"n_jobs must be >= 1, got {n_jobs}")
    if n_jobs == 1:
        for name, s, d in units:
            yield run_unit(images[name], name, index[name], s, d, config)
        return
    with ProcessPoolExecutor(n_jobs, initializer=_worker_init) as pool:
        futures = [pool.submit(run_unit, images[name], name, index[name], s, d, config)
                   for name, s, d in units]
        try:
            for fut in as_completed(futures):
                yield fut.result()
        except BaseException:
            for fut in futures:
                fut.cancel()
            raise


class _progress:
    def __init__(self, progress, total: int, initial: int) -> None:
        self.callback = progress if callable(progress) else None
        self.bar = None
        self.done = initial
        self.total = total
        if progress is True:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, initial=initial, unit="image", desc="evaluate")
        elif self.callback:
            self.callback(self.done, self.total)

    def __call__(self) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.update(1)
        if self.callback:
            self.callback(self.done, self.total)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _prepare_out_dir(out: Path, config: EvaluationConfig, force: bool, image_dir: Path) -> dict[str, Path]:
    paths = {"csv": out / "results.csv", "table": out / "table.md", "plot": out / "psnr.png",
             "config": out / "config.json", "partial": out / "results.partial.csv"}
    if out.resolve() == image_dir.resolve() or image_dir.resolve() in out.resolve().parents:
        raise ValueError(f"out_dir {str(out)!r} must not be the image folder or inside it")
    if out.exists() and not out.is_dir():
        raise ValueError(f"out_dir {str(out)!r} exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    finished = any(paths[k].exists() for k in ("csv", "table", "plot"))
    cfg_text = json.dumps(asdict(config), indent=2)
    if force:
        for p in paths.values():
            p.unlink(missing_ok=True)
    elif finished:
        raise FileExistsError(f"{str(out)!r} already holds evaluation results: choose another folder "
                              "or pass force=True (--force) to replace them")
    elif paths["partial"].exists():
        old = paths["config"].read_text() if paths["config"].exists() else ""
        if old != cfg_text:
            raise FileExistsError(f"{str(out)!r} holds an interrupted run with another configuration: "
                                  "pass force=True (--force) to start again")
    atomic_write_text(paths["config"], cfg_text)
    return paths


def _read_rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with open(path, newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r.get("seconds") not in (None, "")]
    for r in rows:
        for k in ("sigma", "lam", "psnr", "seconds"):
            r[k] = float(r[k])
        r["draw"] = int(r["draw"])
    # A unit counts only if all of its rows were written.
    counts: dict[tuple, int] = {}
    for r in rows:
        counts[_unit_key(r)] = counts.get(_unit_key(r), 0) + 1
    full = max(counts.values(), default=0)
    return [r for r in rows if counts[_unit_key(r)] == full]


def _csv_text(rows: list[dict]) -> str:
    import io

    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: (f"{r[k]:.6g}" if isinstance(r[k], float) else r[k]) for k in COLUMNS})
    return buf.getvalue()


def summarize(rows: list[dict]) -> dict[tuple, tuple[float, float, int]]:
    """Mean PSNR over images and draws, and the spread (std) of the per-draw means.

    Keys are ``(lam_mode, wavelet, sigma, method)``.
    """
    groups: dict[tuple, dict[int, list[float]]] = {}
    for r in rows:
        key = (r["lam_mode"], r["wavelet"], float(r["sigma"]), r["method"])
        groups.setdefault(key, {}).setdefault(int(r["draw"]), []).append(float(r["psnr"]))
    out = {}
    for key, by_draw in groups.items():
        means = [float(np.mean(v)) for v in by_draw.values()]
        out[key] = (float(np.mean(means)), float(np.std(means)), sum(len(v) for v in by_draw.values()))
    return out


def markdown_table(rows: list[dict]) -> str:
    """PSNR tables in the layout of the paper's Table 1, one per lam mode."""
    stats = summarize(rows)
    methods = [m for m in (*PAPER_ORDER, "bayes_shrink") if any(k[3] == m for k in stats)]
    lines = []
    n_images = len({r["image"] for r in rows})
    n_draws = len({r["draw"] for r in rows})
    for mode in LAM_MODES:
        keys = sorted({(k[1], k[2]) for k in stats if k[0] == mode},
                      key=lambda wk: (wk[0] != "haar", wk[0], wk[1]))
        if not keys:
            continue
        title = {"oracle": "lam chosen by an oracle (best PSNR)",
                 "auto": "lam chosen from the noisy image (SURE / rule), known sigma"}[mode]
        lines += [f"### PSNR (dB), {title}", "",
                  f"Mean over {n_images} images and {n_draws} noise draws (± std of the per-draw means).", "",
                  "| wavelet | sigma | " + " | ".join(methods) + " |",
                  "|---|---|" + "---|" * len(methods)]
        for wavelet, sigma in keys:
            cells = []
            for m in methods:
                s = stats.get((mode, wavelet, sigma, m)) or (stats.get(("auto", wavelet, sigma, m))
                                                             if m == "bayes_shrink" else None)
                cells.append("" if s is None else f"{s[0]:.2f} ± {s[1]:.2f}")
            lines.append(f"| {wavelet} | {sigma:g} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def _write_plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stats = summarize(rows)
    wavelets = sorted({k[1] for k in stats}, key=lambda w: (w != "haar", w))
    fig, axes = plt.subplots(1, len(wavelets), figsize=(5.5 * len(wavelets), 4.2), squeeze=False)
    for ax, wavelet in zip(axes[0], wavelets, strict=True):
        for m in (*PAPER_ORDER, "bayes_shrink"):
            for mode, style in (("oracle", "-"), ("auto", "--")):
                pts = sorted((k[2], v[0]) for k, v in stats.items() if k[:2] == (mode, wavelet) and k[3] == m)
                if pts:
                    s, p = zip(*pts, strict=True)
                    label = m if m == "bayes_shrink" else f"{m} ({mode})"
                    ax.plot(s, p, style, marker="o", ms=3, label=label)
        ax.set_xscale("log")
        ax.set_xlabel("noise sigma (0-255)")
        ax.set_ylabel("PSNR (dB)")
        ax.set_title(f"wavelet {wavelet}")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=110)
    finally:
        plt.close(fig)

