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
from ._validation import check_wavelet as _check_wavelet
from .proximal import check_penalty_name
from .wavelet import default_level

__all__ = ["EvaluationConfig", "evaluate_denoising", "evaluate_inpainting", "evaluate_patches", "load_grey_images"]

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
    index = {name: i for i, name in enumerate(images)}
    units = [(name, s, d) for name in images for s in config.sigmas for d in range(config.n_draws)]
    tasks = {u: (run_unit, (images[u[0]], u[0], index[u[0]], u[1], u[2], config)) for u in units}
    rows = _run_units(Path(out_dir), image_dir, asdict(config), tasks, _unit_key, COLUMNS,
                      force, progress, n_jobs, scheduler)
    rows.sort(key=lambda r: (r["image"], float(r["sigma"]), r["wavelet"], r["method"], r["lam_mode"],
                             int(r["draw"])))
    out = Path(out_dir)
    atomic_write_text(out / "results.csv", _csv_text(rows, COLUMNS))
    atomic_write_text(out / "table.md", markdown_table(rows))
    _write_plot(rows, out / "psnr.png")
    (out / "results.partial.csv").unlink()
    return rows


def _run_units(out: Path, input_dir: Path, config: dict, tasks: dict, key, columns, force: bool, progress,
               n_jobs: int | None, scheduler: str | None) -> list[dict]:
    """Run independent units (resuming from a partial CSV); return all rows.

    ``tasks`` maps a unit's key to ``(function, args)``; ``key(row)`` gives
    the key of the unit a row belongs to. Finished units are appended to
    ``results.partial.csv`` as they complete.
    """
    partial = _prepare_out_dir(out, config, force, input_dir)
    done = _read_rows(partial, key, columns)
    done_keys = {key(r) for r in done}
    todo = [(f, a) for k, (f, a) in tasks.items() if k not in done_keys]
    report = _progress(progress, len(tasks), len(tasks) - len(todo))
    rows = list(done)
    with open(partial, "a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        if fh.tell() == 0:
            writer.writeheader()
            fh.flush()
        for unit_rows in _execute(todo, n_jobs, scheduler):
            writer.writerows(unit_rows)
            fh.flush()
            os.fsync(fh.fileno())
            rows.extend(unit_rows)
            report()
    report.close()
    return rows


def _execute(tasks: list[tuple], n_jobs: int | None, scheduler: str | None) -> Iterable[list[dict]]:
    """Run ``(function, args)`` tasks on Dask, in local processes or inline; yield results as they finish."""
    if not tasks:
        return
    if scheduler is not None:
        from dask.distributed import Client
        from dask.distributed import as_completed as dask_completed

        with Client(scheduler) as client:
            futures = [client.submit(f, *a, pure=False) for f, a in tasks]
            for fut in dask_completed(futures):
                yield fut.result()
        return
    n_jobs = default_num_threads() if n_jobs is None else int(n_jobs)
    if n_jobs < 1:
        raise ValueError(f"n_jobs must be >= 1, got {n_jobs}")
    if n_jobs == 1:
        for f, a in tasks:
            yield f(*a)
        return
    with ProcessPoolExecutor(n_jobs, initializer=_worker_init) as pool:
        futures = [pool.submit(f, *a) for f, a in tasks]
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


def _prepare_out_dir(out: Path, config: dict, force: bool, input_dir: Path) -> Path:
    """Create or check the output folder; return the path of the partial results."""
    ours = ["results.csv", "table.md", "psnr.png", "config.json", "results.partial.csv"]
    if out.resolve() == input_dir.resolve() or input_dir.resolve() in out.resolve().parents:
        raise ValueError(f"out_dir {str(out)!r} must not be the image folder or inside it")
    if out.exists() and not out.is_dir():
        raise ValueError(f"out_dir {str(out)!r} exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    partial, cfg = out / "results.partial.csv", out / "config.json"
    finished = any((out / f).exists() for f in ours[:3])
    cfg_text = json.dumps(config, indent=2)
    if force:
        for f in ours:
            (out / f).unlink(missing_ok=True)
    elif finished:
        raise FileExistsError(f"{str(out)!r} already holds evaluation results: choose another folder "
                              "or pass force=True (--force) to replace them")
    elif partial.exists():
        old = cfg.read_text() if cfg.exists() else ""
        if old != cfg_text:
            raise FileExistsError(f"{str(out)!r} holds an interrupted run with another configuration: "
                                  "pass force=True (--force) to start again")
    atomic_write_text(cfg, cfg_text)
    return partial


def _read_rows(path: Path, key, columns) -> list[dict]:
    """Rows of a partial results file, keeping only units whose rows were all written."""
    if not path.exists():
        return []
    with open(path, newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r.get(columns[-1]) not in (None, "")]
    for r in rows:
        for k, v in r.items():
            try:
                r[k] = int(v) if k == "draw" else float(v) if k in _NUMERIC else v
            except ValueError:
                r[k] = v
    counts: dict[tuple, int] = {}
    for r in rows:
        counts[key(r)] = counts.get(key(r), 0) + 1
    full = max(counts.values(), default=0)
    return [r for r in rows if counts[key(r)] == full]


_NUMERIC = {"sigma", "lam", "psnr", "seconds"}


def _csv_text(rows: list[dict], columns) -> str:
    import io

    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: (f"{r[k]:.6g}" if isinstance(r[k], float) else r[k]) for k in columns})
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



# ---------------------------------------------------------------------------
# Inpainting benchmark
# ---------------------------------------------------------------------------

INPAINT_COLUMNS = ("image", "mask", "method", "psnr", "seconds")
INPAINT_METHODS = ("tree_dictionary", "biharmonic", "telea")


def _read_colour(path: Path) -> np.ndarray:
    from skimage import io

    im = io.imread(path)
    if im.ndim == 2:
        im = np.stack([im] * 3, axis=-1)
    scale = float(np.iinfo(im.dtype).max) if im.dtype.kind in "ui" else 1.0
    return (im[..., :3] / scale).astype(np.float32)


def _read_mask_file(path: Path) -> np.ndarray:
    from skimage import io

    m = io.imread(path)
    return (m[..., :3].max(axis=-1) if m.ndim == 3 else m) > 0


def run_inpaint_unit(image_path: str, mask_path: str, kind: str, methods: tuple[str, ...], stride: int) -> list[dict]:
    """Masked-pixel PSNR of each inpainting method on one image and mask."""
    img = _read_colour(Path(image_path))
    mask = _read_mask_file(Path(mask_path))
    rows = []
    for method in methods:
        t0 = time.perf_counter()
        if method == "tree_dictionary":
            from .inpainting import inpaint

            out = inpaint(img, mask, channel_axis=-1, stride=stride)
        elif method == "biharmonic":
            from skimage.restoration import inpaint_biharmonic

            out = inpaint_biharmonic(img, mask, channel_axis=-1)
        else:  # telea
            import cv2

            u8 = np.clip(np.rint(img * 255), 0, 255).astype(np.uint8)
            out = cv2.inpaint(u8[..., ::-1].copy(), mask.astype(np.uint8), 3, cv2.INPAINT_TELEA)[..., ::-1] / 255.0
        seconds = time.perf_counter() - t0
        mse = float(np.mean((out[mask] - img[mask]) ** 2))
        rows.append({"image": Path(image_path).stem, "mask": kind, "method": method,
                     "psnr": 10 * np.log10(1.0 / mse) if mse > 0 else float("inf"), "seconds": seconds})
    return rows


def evaluate_inpainting(
    image_dir: str | os.PathLike,
    mask_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    mask_kinds: Sequence[str] = ("text1", "rand70", "rand90"),
    methods: Sequence[str] = INPAINT_METHODS,
    stride: int = 4,
    n_jobs: int | None = 1,
    scheduler: str | None = None,
    force: bool = False,
    progress: bool | Callable[[int, int], None] = True,
) -> list[dict]:
    """Inpainting benchmark: masked-pixel PSNR on a folder of photos and masks.

    Parameters
    ----------
    image_dir : path
        Folder of photographs (PNG, TIFF, JPEG).
    mask_dir : path
        Folder of masks named ``<image stem>_<kind>.png``, non-zero = missing
        (the layout of ``../shared/images/masks``).
    out_dir : path
        Output folder: ``results.csv`` (image, mask, method, psnr, seconds),
        ``table.md``, ``config.json``; resumable as for
        :func:`evaluate_denoising`.
    mask_kinds : sequence of str
        Mask kinds to use (images without such a mask are skipped).
    methods : sequence of str
        ``'tree_dictionary'`` (:func:`restore.inpaint`), and the reference
        columns ``'biharmonic'`` (scikit-image) and ``'telea'`` (OpenCV,
        radius 3; skipped when OpenCV is not installed).
    stride : int
        Step of the patch grids of :func:`restore.inpaint` (default 4, its
        default).
    n_jobs, scheduler, force, progress
        As in :func:`evaluate_denoising` (default one process: inpainting
        already uses every core).

    Returns
    -------
    list of dict
    """
    image_dir, mask_dir = Path(image_dir), Path(mask_dir)
    for d, what in ((image_dir, "image"), (mask_dir, "mask")):
        if not d.is_dir():
            raise ValueError(f"{what} folder {str(d)!r} does not exist or is not a folder")
    methods = tuple(methods)
    for m in methods:
        if m not in INPAINT_METHODS:
            raise ValueError(f"Invalid method: {m!r}; supported methods are {', '.join(INPAINT_METHODS)}")
    if "telea" in methods:
        try:
            import cv2  # noqa: F401
        except ImportError:
            methods = tuple(m for m in methods if m != "telea")
    images = sorted(p for p in image_dir.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    tasks = {}
    for img in images:
        for kind in mask_kinds:
            mask = mask_dir / f"{img.stem}_{kind}.png"
            if mask.is_file():
                tasks[(img.stem, kind)] = (run_inpaint_unit, (str(img), str(mask), kind, methods, int(stride)))
    if not tasks:
        raise ValueError(f"no image of {str(image_dir)!r} has a mask <image>_<kind>.png in {str(mask_dir)!r} "
                         f"for kinds {', '.join(mask_kinds)}")
    config = {"task": "inpaint", "images": sorted({k[0] for k in tasks}), "mask_kinds": list(mask_kinds),
              "methods": list(methods), "stride": int(stride)}
    out = Path(out_dir)
    rows = _run_units(out, image_dir, config, tasks, lambda r: (r["image"], r["mask"]), INPAINT_COLUMNS,
                      force, progress, n_jobs, scheduler)
    rows.sort(key=lambda r: (r["mask"], r["image"], methods.index(r["method"])))
    atomic_write_text(out / "results.csv", _csv_text(rows, INPAINT_COLUMNS))
    atomic_write_text(out / "table.md", inpainting_table(rows, methods))
    (out / "results.partial.csv").unlink()
    return rows


def inpainting_table(rows: list[dict], methods: Sequence[str]) -> str:
    """Markdown: masked-pixel PSNR per image and mask kind, with averages per kind."""
    by = {(r["image"], r["mask"], r["method"]): (float(r["psnr"]), float(r["seconds"])) for r in rows}
    cases = sorted({(r["mask"], r["image"]) for r in rows})
    lines = ["### Inpainting: masked-pixel PSNR (dB), time (s)", "",
             "| image_mask | " + " | ".join(methods) + " |", "|---|" + "---|" * len(methods)]
    for kind, image in cases:
        cells = [f"{by[(image, kind, m)][0]:.2f} ({by[(image, kind, m)][1]:.1f} s)"
                 if (image, kind, m) in by else "" for m in methods]
        lines.append(f"| {image}_{kind} | " + " | ".join(cells) + " |")
    for kind in sorted({k for k, _ in cases}):
        vals = [[by[(i, kind, m)][0] for k, i in cases if k == kind and (i, kind, m) in by] for m in methods]
        lines.append(f"| **mean {kind}** | " + " | ".join(f"**{np.mean(v):.2f}**" if v else "" for v in vals) + " |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------
# Patch reconstruction (JMLR 2011, Table 2)
# ---------------------------------------------------------------------------

PATCH_COLUMNS = ("method", "missing", "error", "learn_lam", "code_lam")


def _grey_patches(paths: Sequence[Path], n: int, rng: np.random.Generator, size: int = 8) -> np.ndarray:
    """Random 8x8 grey patches, centred, unit norm, near-flat ones skipped."""
    from skimage import color, io
    from skimage.util import img_as_float

    out = []
    per = -(-n // len(paths))
    for path in paths:
        im = io.imread(path)
        g = color.rgb2gray(im[..., :3]) if im.ndim == 3 else img_as_float(im)
        r = rng.integers(0, g.shape[0] - size, per * 2)
        c = rng.integers(0, g.shape[1] - size, per * 2)
        P = np.stack([g[i:i + size, j:j + size].ravel() for i, j in zip(r, c, strict=True)])
        P -= P.mean(axis=1, keepdims=True)
        P = P[np.linalg.norm(P, axis=1) > 0.1][:per]
        out.append(P / np.linalg.norm(P, axis=1, keepdims=True))
    return np.concatenate(out)[:n]


def _patch_error(est, X: np.ndarray, M: np.ndarray, lam: float) -> float:
    from .coding import sparse_encode

    A = sparse_encode(X, est.components_, lam=lam, penalty=est.penalty, tree=est.tree_, mask=M, max_iter=200)
    return 100.0 * float(np.mean(np.sum(((A @ est.components_ - X) * ~M) ** 2, axis=1)))


def evaluate_patches(
    train: Sequence[str | os.PathLike],
    test: Sequence[str | os.PathLike],
    out_dir: str | os.PathLike,
    *,
    branching: Sequence[int] = (10, 2, 2),
    missing: Sequence[float] = (0.5, 0.6, 0.7, 0.8, 0.9),
    n_train: int = 50000,
    n_test: int = 5000,
    learn_lams: Sequence[float] = (0.05, 0.1, 0.2),
    code_lams: Sequence[float] = (0.01, 0.02, 0.05, 0.1, 0.2),
    n_epochs: int = 1,
    seed: int = 0,
    force: bool = False,
) -> list[dict]:
    """Patch reconstruction with missing pixels, tree vs flat dictionary (Table 2 of Jenatton et al.).

    8x8 grey patches, centred and unit norm. A tree dictionary
    (``branching``, tree_l2) and a flat one with as many atoms (l1) are
    learned on patches of the ``train`` images; on patches of the ``test``
    images a share of the pixels is removed at random, codes are computed on
    the known pixels, and the error is the squared error on the missing
    pixels of a patch, x 100, averaged over patches. The lam of learning
    and of coding are picked per method and missing rate on a validation
    half of the test patches; the error is reported on the other half.

    Parameters
    ----------
    train, test : sequences of paths
        Image files.
    out_dir : path
        Output folder: ``results.csv`` and ``table.md``.
    branching : sequence of int
        Tree of atoms.
    missing : sequence of float
        Shares of missing pixels.
    n_train, n_test : int
        Training patches; validation and test patches (each).
    learn_lams, code_lams : sequences of float
        Grids of lam for learning and for coding.
    n_epochs : int
        Learning epochs.
    seed : int
        Randomness of patches, masks and learning.
    force : bool
        Replace previous results in ``out_dir``.

    Returns
    -------
    list of dict
        Rows ``method, missing, error, learn_lam, code_lam``.
    """
    from .learning import TreeDictionaryLearning
    from .tree import Tree

    train, test = [Path(p) for p in train], [Path(p) for p in test]
    for p in (*train, *test):
        if not p.is_file():
            raise ValueError(f"image {str(p)!r} does not exist")
    out = Path(out_dir)
    config = {"task": "patches", "train": [str(p) for p in train], "test": [str(p) for p in test],
              "branching": list(branching), "missing": list(missing), "n_train": n_train, "n_test": n_test,
              "seed": seed}
    partial = _prepare_out_dir(out, config, force, train[0].parent)
    rng = np.random.default_rng(seed)
    Xtr = _grey_patches(train, n_train, rng)
    Xte = _grey_patches(test, 2 * n_test, rng)
    Xval, Xte = Xte[:n_test], Xte[n_test:]
    k = Tree.balanced(branching).n_vars
    rows = []
    for method, kw in (("tree", {"penalty": "tree_l2"}), ("flat", {"penalty": "l1", "n_atoms": k})):
        ests = [TreeDictionaryLearning(tuple(branching), lam=lam, n_epochs=n_epochs, random_state=seed, **kw).fit(Xtr)
                for lam in learn_lams]
        for rate in missing:
            mval = np.random.default_rng([seed, int(rate * 1000)]).random(Xval.shape) >= rate
            mte = np.random.default_rng([seed, int(rate * 1000), 1]).random(Xte.shape) >= rate
            best = min(((e, lam) for e in ests for lam in code_lams),
                       key=lambda el, mval=mval: _patch_error(el[0], Xval, mval, el[1]))
            rows.append({"method": method, "missing": float(rate), "error": _patch_error(best[0], Xte, mte, best[1]),
                         "learn_lam": float(best[0].lam), "code_lam": float(best[1])})
    atomic_write_text(out / "results.csv", _csv_text(rows, PATCH_COLUMNS))
    atomic_write_text(out / "table.md", patches_table(rows, k))
    partial.unlink(missing_ok=True)
    return rows


def patches_table(rows: list[dict], n_atoms: int) -> str:
    """Markdown of the Table 2 protocol: error per method and missing rate, and the tree's gain."""
    rates = sorted({r["missing"] for r in rows})
    err = {(r["method"], r["missing"]): r["error"] for r in rows}
    lines = [f"### Patch reconstruction, {n_atoms} atoms: squared error x 100 on missing pixels per patch", "",
             "| missing | " + " | ".join(f"{int(round(100 * m))}%" for m in rates) + " |",
             "|---|" + "---|" * len(rates)]
    for method in ("flat", "tree"):
        lines.append(f"| {method} | " + " | ".join(f"{err[(method, m)]:.2f}" for m in rates) + " |")
    lines.append("| tree gain | " + " | ".join(
        f"{100 * (err[('flat', m)] - err[('tree', m)]) / err[('flat', m)]:.1f}%" for m in rates) + " |")
    return "\n".join(lines) + "\n"
