"""The runner of every evaluation: independent units in local processes or on Dask, resumable.

Each finished unit is appended to a partial file, so an interrupted run
resumes where it stopped.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from .._config import default_num_threads
from .._io import atomic_write_text

__all__ = ["IMAGE_SUFFIXES", "prepare_out_dir", "run_units"]

IMAGE_SUFFIXES = (".png", ".tif", ".tiff", ".jpg", ".jpeg", ".bmp")


def _worker_init() -> None:
    # Each process runs one unit at a time on one core.
    os.environ["RESTORE_NUM_THREADS"] = "1"


def run_units(out: Path, input_dir: Path, config: dict, tasks: dict, key, columns, force: bool, progress,
               n_jobs: int | None, scheduler: str | None) -> list[dict]:
    """Run independent units (resuming from a partial CSV); return all rows.

    ``tasks`` maps a unit's key to ``(function, args)``; ``key(row)`` gives
    the key of the unit a row belongs to. Finished units are appended to
    ``results.partial.csv`` as they complete.
    """
    partial = prepare_out_dir(out, config, force, input_dir)
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


def prepare_out_dir(out: Path, config: dict, force: bool, input_dir: Path) -> Path:
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
