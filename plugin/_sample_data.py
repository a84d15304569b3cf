"""Sample data of the plugin (File > Open Sample > Tree-sparse restoration).

Images come from the repository's ``sample_images`` folder, found next to the
package (a source or editable install).

- ``noisy_camera``: the camera photograph with Gaussian noise of standard
  deviation 25 on the 0-255 scale (seed 0), float32 in the 0-255 units (not
  clipped), so the denoise widget's sigma reads 25 or so.
- ``cat_with_text``: the cat photograph (uint8 RGB) with white text burnt in,
  and the text mask (``masks/chelsea_cat_text.png``, True where the text is) as a Labels
  layer, for inpainting.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["NOISE_SIGMA", "SAMPLE_DIR", "cat_with_text", "noisy_camera", "render_text_mask"]

SAMPLE_DIR = Path(__file__).resolve().parents[1] / "sample_images"
NOISE_SIGMA = 25.0
NOISE_SEED = 0
TEXT_LINES = ("Tree-sparse", "restoration", "fills in the", "missing text")


def _read(name: str) -> np.ndarray:
    from PIL import Image

    path = SAMPLE_DIR / name
    if not path.is_file():
        raise FileNotFoundError(f"sample image {path} not found: the sample data needs a source "
                                "or editable install of restore-tree")
    with Image.open(path) as im:
        return np.asarray(im)


def noisy_camera() -> list[tuple[Any, dict[str, Any], str]]:
    """Camera photograph plus Gaussian noise (sigma 25, seed 0), float32 in 0-255 units."""
    clean = _read("camera.png").astype(np.float32)
    rng = np.random.default_rng(NOISE_SEED)
    noisy = clean + np.float32(NOISE_SIGMA) * rng.standard_normal(clean.shape, dtype=np.float32)
    meta = {"noise_sigma": NOISE_SIGMA, "noise_seed": NOISE_SEED, "source": "sample_images/camera.png"}
    return [(noisy, {"name": "camera", "contrast_limits": (0.0, 255.0), "metadata": meta}, "image")]


def text_mask() -> np.ndarray:
    """The bundled text mask (256 x 256 bool, True on the text)."""
    return _read("masks/chelsea_cat_text.png").astype(bool)


def cat_with_text() -> list[tuple[Any, dict[str, Any], str]]:
    """Cat photograph with white text burnt in (uint8 RGB), and the text as Labels (1 = text)."""
    image = _read("chelsea_cat.png")[..., :3].copy()
    mask = text_mask()
    image[mask] = 255
    return [
        (image, {"name": "chelsea with text", "rgb": True,
                 "metadata": {"source": "sample_images/chelsea_cat.png + masks/chelsea_cat_text.png"}}, "image"),
        (mask.astype(np.uint8),
         {"name": "text mask", "metadata": {"source": "sample_images/masks/chelsea_cat_text.png"}},
         "labels"),
    ]


def render_text_mask(shape: tuple[int, int] = (256, 256)) -> np.ndarray:
    """Render the text mask shipped as ``sample_images/masks/chelsea_cat_text.png``.

    Pillow's default font (Aileron, bundled with Pillow >= 10.1) at size 30,
    four lines. Kept to document how the PNG was made; the PNG is what the
    sample data reads, so other Pillow versions cannot change it. Regenerate
    with ``PIL.Image.fromarray(render_text_mask()).save("sample_images/masks/chelsea_cat_text.png", optimize=True)``.
    """
    from PIL import Image, ImageDraw, ImageFont

    h, w = shape
    canvas = Image.new("L", (w, h), 0)
    draw = ImageDraw.Draw(canvas)
    font = ImageFont.load_default(size=30)
    for i, line in enumerate(TEXT_LINES):
        draw.text((12, 14 + 60 * i), line, fill=255, font=font)
    return np.asarray(canvas) > 127
