"""Batch evaluations: denoising (Table 1), patch reconstruction (Table 2), inpainting, volumes.

Each protocol splits its work into independent units run in local processes
or on a Dask cluster (:mod:`restore.evaluate.runner`), resumable after an
interruption, and writes a CSV file and Markdown tables
(:mod:`restore.evaluate.report`).

Importing this package is cheap (NumPy and the standard library): numba,
scikit-learn, scikit-image, SciPy, matplotlib and Dask load inside the
functions that use them, so that a command line can read the names,
constants and signatures' defaults here for its ``--help``.
"""

from __future__ import annotations

from .denoising import EvaluationConfig, evaluate_denoising, load_grey_images
from .inpainting import evaluate_inpainting
from .patches import evaluate_patches
from .report import LAM_MODES, PAPER_ORDER, markdown_table
from .runner import IMAGE_SUFFIXES, FolderInUse, ResultsExist
from .volume import VOLUME_METHODS, evaluate_volumes, load_volumes, poisson_gaussian_noise

__all__ = ["IMAGE_SUFFIXES", "LAM_MODES", "PAPER_ORDER", "VOLUME_METHODS", "EvaluationConfig", "FolderInUse",
           "ResultsExist", "evaluate_denoising", "evaluate_inpainting", "evaluate_patches", "evaluate_volumes",
           "load_grey_images", "load_volumes", "markdown_table", "poisson_gaussian_noise"]
