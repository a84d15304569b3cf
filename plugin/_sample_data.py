"""Sample data of the plugin (File > Open Sample > Tree-sparse restoration).

The photographs come from :mod:`skimage.data` (shipped with scikit-image, the
same pixels as ``sample_images/camera.png`` and ``chelsea_cat.png``); the text
mask ships with this package (``data/chelsea_cat_text.png``).

- ``noisy_camera``: the camera photograph with Gaussian noise of standard
  deviation 25 on the 0-255 scale (seed 0), float32 in the 0-255 units (not
  clipped), so the denoise widget's sigma reads 25 or so.
- ``cat_with_text``: the cat photograph (uint8 RGB, ``skimage.data.chelsea()``
  cropped to 256 x 256) with white text burnt in, and the text mask (True
  where the text is) as a Labels layer, for inpainting.
- ``noisy_nuclei_volume``: a real confocal volume (``data/nuclei_32x128x128.npz``)
  with photon noise at a peak of 10 photons and Gaussian read noise 0.02
  (seed 3), float32 in [0, 1] units: the Poisson-Gaussian protocol of the
  volume benchmarks.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import numpy as np

__all__ = ["NOISE_SIGMA", "cat_with_text", "clean_camera", "clean_cat", "clean_nuclei", "noisy_camera",
           "noisy_nuclei_volume", "render_text_mask", "text_mask"]

NOISE_SIGMA = 25.0
NOISE_SEED = 0
TEXT_LINES = ("Tree-sparse", "restoration", "fills in the", "missing text")
#: The 256 x 256 crop of ``skimage.data.chelsea()`` (as ``sample_images/chelsea_cat.png``).
CAT_CROP = (slice(22, 278), slice(100, 356))
#: Photons at the brightest voxel of the nuclei sample: dim fluorescence, where photon noise dominates.
NUCLEI_PEAK_PHOTONS = 10.0
#: Gaussian read noise of the nuclei sample, in its [0, 1] units (a camera's read noise at that peak).
NUCLEI_READ_NOISE = 0.02
NUCLEI_SEED = 3
#: Voxel size of the nuclei volume (z, y, x), micrometres: scikit-image's cells3d.
NUCLEI_SCALE_UM = (0.29, 0.26, 0.26)


def clean_camera() -> np.ndarray:
    """The camera photograph (512 x 512 uint8), ``skimage.data.camera()``."""
    from skimage import data

    return data.camera()


def clean_cat() -> np.ndarray:
    """The cat photograph (256 x 256 x 3 uint8), a crop of ``skimage.data.chelsea()``."""
    from skimage import data

    return data.chelsea()[CAT_CROP]


def noisy_camera() -> list[tuple[Any, dict[str, Any], str]]:
    """Camera photograph plus Gaussian noise (sigma 25, seed 0), float32 in 0-255 units."""
    clean = clean_camera().astype(np.float32)
    rng = np.random.default_rng(NOISE_SEED)
    noisy = clean + np.float32(NOISE_SIGMA) * rng.standard_normal(clean.shape, dtype=np.float32)
    meta = {"noise_sigma": NOISE_SIGMA, "noise_seed": NOISE_SEED, "source": "skimage.data.camera()"}
    return [(noisy, {"name": "camera", "contrast_limits": (0.0, 255.0), "metadata": meta}, "image")]


def text_mask() -> np.ndarray:
    """The bundled text mask (256 x 256 bool, True on the text)."""
    from PIL import Image

    with resources.as_file(resources.files(__package__) / "data" / "chelsea_cat_text.png") as path, \
            Image.open(path) as im:
        return np.asarray(im).astype(bool)


def cat_with_text() -> list[tuple[Any, dict[str, Any], str]]:
    """Cat photograph with white text burnt in (uint8 RGB), and the text as Labels (1 = text)."""
    image = clean_cat().copy()
    mask = text_mask()
    image[mask] = 255
    return [
        (image, {"name": "chelsea with text", "rgb": True,
                 "metadata": {"source": "skimage.data.chelsea() with the text of data/chelsea_cat_text.png"}}, "image"),
        (mask.astype(np.uint8),
         {"name": "text mask", "metadata": {"source": "restore_napari data/chelsea_cat_text.png"}},
         "labels"),
    ]


def render_text_mask(shape: tuple[int, int] = (256, 256)) -> np.ndarray:
    """Render the text mask shipped as ``plugin/data/chelsea_cat_text.png``.

    Pillow's default font (Aileron, bundled with Pillow >= 10.1) at size 30,
    four lines. Kept to document how the PNG was made; the PNG is what the
    sample data reads, so other Pillow versions cannot change it. Regenerate
    with ``PIL.Image.fromarray(render_text_mask()).save("plugin/data/chelsea_cat_text.png", optimize=True)``.
    """
    from PIL import Image, ImageDraw, ImageFont

    h, w = shape
    canvas = Image.new("L", (w, h), 0)
    draw = ImageDraw.Draw(canvas)
    font = ImageFont.load_default(size=30)
    for i, line in enumerate(TEXT_LINES):
        draw.text((12, 14 + 60 * i), line, fill=255, font=font)
    return np.asarray(canvas) > 127


def clean_nuclei() -> np.ndarray:
    """The nuclei volume of the sample (32 x 128 x 128 float64, min-max normalised to [0, 1]).

    Planes 22..53, rows 128..255 and columns 64..191 of the nuclei channel
    of ``skimage.data.cells3d`` (Allen Institute for Cell Science, CC0),
    shipped as ``data/nuclei_32x128x128.npz`` (uint16, as stored), so the
    sample needs no download.
    """
    with resources.as_file(resources.files(__package__) / "data" / "nuclei_32x128x128.npz") as path, \
            np.load(path) as npz:
        vol = npz["volume"].astype(np.float64)
    return (vol - vol.min()) / (vol.max() - vol.min())


def noisy_nuclei_volume() -> list[tuple[Any, dict[str, Any], str]]:
    """The nuclei volume under Poisson-Gaussian noise: peak 10 photons, read noise 0.02, seed 3 (float32)."""
    from restore.evaluate import poisson_gaussian_noise

    clean = clean_nuclei()
    noisy = poisson_gaussian_noise(clean, peak=NUCLEI_PEAK_PHOTONS, read_noise=NUCLEI_READ_NOISE,
                                   rng=NUCLEI_SEED).astype(np.float32)
    meta = {"noise": "poisson-gaussian", "gain": 1.0 / NUCLEI_PEAK_PHOTONS, "read_noise": NUCLEI_READ_NOISE,
            "noise_seed": NUCLEI_SEED,
            "source": "skimage.data.cells3d nuclei, planes 22-53, rows 128-255, columns 64-191 (CC0)"}
    return [(noisy, {"name": "nuclei (noisy)", "scale": NUCLEI_SCALE_UM, "units": ("um", "um", "um"),
                     "axis_labels": ("z", "y", "x"), "contrast_limits": (0.0, 1.0), "metadata": meta}, "image")]
