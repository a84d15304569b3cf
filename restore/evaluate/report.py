"""Reports of the evaluations: CSV text, Markdown tables in the papers' layouts, the PSNR plot."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = ["LAM_MODES", "METHOD_COLOURS", "MODE_STYLES", "PAPER_ORDER", "csv_text", "inpainting_table",
           "markdown_table", "patches_table", "summarize", "volume_table", "write_plot", "write_volume_plot"]

#: The penalties in the column order of the paper's Table 1.
PAPER_ORDER = ("l0", "tree_l0", "l1", "tree_l2", "tree_linf")
#: How lam is chosen: an oracle's best PSNR, or from the noisy image alone (SURE / rule).
LAM_MODES = ("oracle", "auto")
#: The reference columns after the penalties, in order: they choose no lam (known sigma), so both tables show
#: their one result; the last two use no wavelet (their rows' wavelet is empty) and fill every wavelet's row.
REFERENCES = ("bayes_shrink", "nonlocal", "bm3d")
WAVELET_FREE = ("nonlocal", "bm3d")


def csv_text(rows: list[dict], columns: Sequence[str]) -> str:
    """Rows as CSV text with a header, floats to 6 significant digits."""
    import io

    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: (f"{r[k]:.6g}" if isinstance(r[k], float) else r[k]) for k in columns})  # None: empty
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


def _table_rows(stats: dict, mode: str) -> list[tuple[str, float]]:
    """The (wavelet, sigma) rows of a lam mode's table: every wavelet evaluated, else one row per sigma."""
    keys = {(k[1], k[2]) for k in stats if k[0] == mode and k[1]}
    if not keys and mode == "auto":  # only wavelet-free methods: a row per sigma, its wavelet cell empty
        keys = {(k[1], k[2]) for k in stats if k[0] == mode}
    return sorted(keys, key=lambda wk: (wk[0] != "haar", wk[0], wk[1]))


def _cell_stats(stats: dict, mode: str, wavelet: str, sigma: float, method: str):
    """A table cell's statistics: a reference column's one (automatic) result in both tables."""
    if method not in REFERENCES:
        return stats.get((mode, wavelet, sigma, method))
    return stats.get(("auto", "" if method in WAVELET_FREE else wavelet, sigma, method))


def _ordered_methods(stats: dict) -> list[str]:
    known = (*PAPER_ORDER, *REFERENCES)
    methods = [m for m in known if any(k[3] == m for k in stats)]
    return methods + sorted({k[3] for k in stats} - set(known))


def markdown_table(rows: list[dict], notes: Sequence[str] = ()) -> str:
    """PSNR tables in the layout of the paper's Table 1, one per lam mode, and a CPU time table.

    Parameters
    ----------
    rows : list of dict
        Result rows of :func:`restore.evaluate.evaluate_denoising`, one per
        image, draw, sigma, wavelet, penalty and lam mode; the wavelet-free
        methods (``nonlocal``, ``bm3d``) have an empty wavelet and are shown
        in every wavelet's row.
    notes : sequence of str
        What was skipped and why: one line each under the tables.

    Returns
    -------
    str
        Markdown: the mean PSNR and its spread over draws per wavelet, sigma
        and method; then, when the rows have CPU times, the mean CPU seconds
        per image of each method with lam chosen automatically.
    """
    stats = summarize(rows)
    methods = _ordered_methods(stats)
    lines = []
    n_images = len({r["image"] for r in rows})
    n_draws = len({r["draw"] for r in rows})
    references = [m for m in methods if m in REFERENCES]
    for mode in LAM_MODES:
        keys = _table_rows(stats, mode)
        if not keys:
            continue
        title = {"oracle": "lam chosen by an oracle (best PSNR)",
                 "auto": "lam chosen from the noisy image (SURE / rule), known sigma"}[mode]
        # with one draw there is no spread to show: a "± 0.00" would claim a precision nobody measured
        spread = " (± std of the per-draw means)" if n_draws > 1 else ""
        lines += [f"### PSNR (dB), {title}", "",
                  f"Mean over {n_images} images and {n_draws} noise draw{'s' if n_draws > 1 else ''}{spread}.", "",
                  "| wavelet | sigma | " + " | ".join(methods) + " |",
                  "|---|---|" + "---|" * len(methods)]
        for wavelet, sigma in keys:
            cells = []
            for m in methods:
                s = _cell_stats(stats, mode, wavelet, sigma, m)
                cells.append("" if s is None else f"{s[0]:.2f} ± {s[1]:.2f}" if n_draws > 1 else f"{s[0]:.2f}")
            lines.append(f"| {wavelet} | {sigma:g} | " + " | ".join(cells) + " |")
        lines.append("")
    if references:
        free = [m for m in references if m in WAVELET_FREE]
        lines += [f"{', '.join(references)}: no lam to choose (known sigma), the same results in both tables"
                  + (f"; {', '.join(free)} use{'s' if len(free) == 1 else ''} no wavelet (the same in every "
                     "wavelet's row)." if free else "."), ""]
    lines += _time_table(rows, methods)
    lines += [f"Note: {n}" for n in notes]
    return "\n".join(lines).rstrip("\n") + "\n"


def _time_table(rows: list[dict], methods: Sequence[str]) -> list[str]:
    """Markdown lines: mean CPU seconds per image by sigma and method, lam chosen automatically (none: no CPU)."""
    groups: dict[tuple[float, str], list[float]] = {}
    for r in rows:
        cpu = r.get("cpu_seconds")
        if r["lam_mode"] == "auto" and cpu is not None and cpu == cpu:
            groups.setdefault((float(r["sigma"]), r["method"]), []).append(float(cpu))
    shown = [m for m in methods if any(k[1] == m for k in groups)]
    if not shown:
        return []
    lines = ["### CPU time per image (s), lam chosen from the noisy image", "",
             "Mean over images, draws and wavelets: CPU seconds of the process denoising the image, for the "
             "whole call (a penalty's transform, lam choice, shrinkage and inverse transform).", "",
             "| sigma | " + " | ".join(shown) + " |", "|---|" + "---|" * len(shown)]
    for sigma in sorted({k[0] for k in groups}):
        cells = [f"{np.mean(groups[(sigma, m)]):.3f}" if (sigma, m) in groups else "" for m in shown]
        lines.append(f"| {sigma:g} | " + " | ".join(cells) + " |")
    return [*lines, ""]


#: One colour per method, the same in every panel and run (Okabe and Ito's palette, safe for colour-blind
#: readers); BayesShrink, the reference, in black, BM3D, the state of the art, in grey.
METHOD_COLOURS = {"l0": "#0072B2", "tree_l0": "#D55E00", "l1": "#009E73", "tree_l2": "#CC79A7",
                  "tree_linf": "#E69F00", "bayes_shrink": "#000000", "nonlocal": "#56B4E9", "bm3d": "#7F7F7F"}
#: The volume methods' colours, from the same palette: the non-local tree as in the 2-D plot, BM4D (the state of
#: the art) in grey as BM3D there.
VOLUME_COLOURS = {"planes": "#0072B2", "octree": "#D55E00", "skimage-3d": "#009E73", "nonlocal": "#56B4E9",
                  "bm4d": "#7F7F7F"}
#: One line style per lam mode, shown in a legend of its own.
MODE_STYLES = {"oracle": "-", "auto": "--"}
_MODE_LABELS = {"oracle": "oracle (best PSNR)", "auto": "automatic (noisy image)"}
_SPARE_COLOURS = ("#F0E442", "#8C564B", "#17BECF", "#BCBD22")  # methods not in METHOD_COLOURS, in order


def write_plot(rows: list[dict], path: Path) -> None:
    """PSNR against sigma, one panel per wavelet, a colour per method and a line style per lam mode (PNG).

    The sigma axis is logarithmic with ticks at the sigmas evaluated, in plain
    numbers; two legends beside the panels name the methods (colours) and
    the lam modes (line styles).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    stats = summarize(rows)
    # a panel per wavelet; the wavelet-free methods (empty wavelet) are drawn in each
    wavelets = sorted({k[1] for k in stats if k[1]}, key=lambda w: (w != "haar", w)) or [""]
    methods = _ordered_methods(stats)
    spare = iter(_SPARE_COLOURS * len(methods))
    colour = {m: METHOD_COLOURS.get(m) or next(spare) for m in methods}
    modes = [m for m in LAM_MODES if any(k[0] == m for k in stats)]
    sigmas = sorted({k[2] for k in stats})
    fig, axes = plt.subplots(1, len(wavelets), figsize=(4.2 * len(wavelets) + 1.9, 3.6), squeeze=False,
                             sharey=True)
    for ax, wavelet in zip(axes[0], wavelets, strict=True):
        for m in methods:
            for mode in modes:
                pts = sorted((k[2], v[0]) for k, v in stats.items()
                             if k[0] == mode and k[1] in (wavelet, "") and k[3] == m)
                if pts:
                    s, p = zip(*pts, strict=True)
                    ax.plot(s, p, MODE_STYLES.get(mode, ":"), color=colour[m], marker="o", ms=3.5, lw=1.4)
        ax.set_xscale("log")
        # ticks at the sigmas evaluated, as plain numbers (a log axis would label 2×10¹ and such)
        ax.xaxis.set_major_locator(FixedLocator(sigmas))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("noise sigma (0-255 scale)")
        ax.set_title(f"wavelet {wavelet}" if wavelet else "methods without a wavelet", fontsize=10)
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("PSNR (dB)")
    method_handles = [Line2D([], [], color=colour[m], marker="o", ms=3.5, lw=1.4) for m in methods]
    mode_handles = [Line2D([], [], color="0.25", ls=MODE_STYLES.get(mode, ":"), lw=1.4) for mode in modes]
    fig.tight_layout(rect=(0, 0, 1 - 1.9 / fig.get_figwidth(), 1))
    fig.legend(method_handles, methods, title="method", loc="upper left", bbox_to_anchor=(
        1 - 1.85 / fig.get_figwidth(), 0.95), fontsize=8, title_fontsize=8, frameon=False)
    fig.legend(mode_handles, [_MODE_LABELS.get(m, m) for m in modes], title="lam", loc="lower left",
               bbox_to_anchor=(1 - 1.85 / fig.get_figwidth(), 0.08), fontsize=7, title_fontsize=8, frameon=False,
               handlelength=2.6)
    try:
        fig.savefig(path, dpi=150, format="png", bbox_inches="tight", pad_inches=0.05)  # the legends whole
    finally:
        plt.close(fig)


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


def _setting_label(noise: str, sigma: float | None, peak: float | None, read_noise: float | None) -> str:
    if noise == "gaussian":
        return f"gaussian, sigma {sigma:g}"
    return f"poisson-gaussian, peak {peak:g}, read noise {read_noise:g}"


def _volume_means(rows: list[dict]) -> tuple[list[tuple], dict[tuple, tuple[float, float]]]:
    """The (volume, setting label) cases in row order, and the mean PSNR and CPU seconds per case and method."""
    groups: dict[tuple, list[tuple[float, float]]] = {}
    cases: dict[tuple, None] = {}
    for r in rows:
        case = (r["volume"], _setting_label(r["noise"], r["sigma"], r["peak"], r["read_noise"]))
        cases[case] = None
        groups.setdefault((*case, r["method"]), []).append((float(r["psnr"]), float(r["cpu_seconds"])))
    means = {k: (float(np.mean([p for p, _ in v])), float(np.mean([c for _, c in v]))) for k, v in groups.items()}
    return list(cases), means


def volume_table(rows: list[dict], methods: Sequence[str], notes: Sequence[str] = ()) -> str:
    """Markdown of the volume protocol: mean PSNR (dB) and CPU seconds per volume, noise setting and method.

    Parameters
    ----------
    rows : list of dict
        Rows of :func:`restore.evaluate.evaluate_volumes`.
    methods : sequence of str
        The columns, in order (``noisy`` shows its PSNR only).
    notes : sequence of str
        What was skipped and why: one line each under the table.

    Returns
    -------
    str
    """
    cases, means = _volume_means(rows)
    n_draws = len({r["draw"] for r in rows})
    lines = ["### Volumes: PSNR (dB) and CPU time (s)", "",
             f"Mean over {n_draws} noise draw{'s' if n_draws != 1 else ''}; PSNR with data range 1 on volumes "
             "normalised to [0, 1]; CPU time of the process running each unit.", "",
             "| volume | noise | " + " | ".join(methods) + " |", "|---|---|" + "---|" * len(methods)]
    for volume, label in cases:
        cells = []
        for m in methods:
            v = means.get((volume, label, m))
            cells.append("" if v is None else f"{v[0]:.2f}" if m == "noisy" else f"{v[0]:.2f} ({v[1]:.2f} s)")
        lines.append(f"| {volume} | {label} | " + " | ".join(cells) + " |")
    lines.append("")
    lines += [f"Note: {n}" for n in notes]
    return "\n".join(lines).rstrip("\n") + "\n"


def write_volume_plot(rows: list[dict], methods: Sequence[str], path: Path) -> None:
    """Mean PSNR against mean CPU seconds, one panel per volume and noise setting, one point per method (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    cases, means = _volume_means(rows)
    spare = iter(_SPARE_COLOURS * len(methods))
    colour = {m: VOLUME_COLOURS.get(m) or next(spare) for m in methods}
    fig, axes = plt.subplots(1, len(cases), figsize=(4.6 * len(cases), 4.0), squeeze=False)
    for ax, (volume, label) in zip(axes[0], cases, strict=True):
        for m in methods:
            v = means.get((volume, label, m))
            if v is None:
                continue
            if m == "noisy":  # no work: a level to beat, not a point
                ax.axhline(v[0], color="grey", ls=":", lw=1, label="noisy")
            else:
                ax.plot([max(v[1], 1e-3)], [v[0]], "o", ms=7, label=m, color=colour[m])
        ax.set_xscale("log")
        # CPU times often span less than a decade: plain labels on the decades only, none on the minor ticks
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("CPU time (s)")
        ax.set_ylabel("PSNR (dB)")
        ax.set_title(f"{volume}\n{label}", fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110, format="png")
    finally:
        plt.close(fig)
