"""The photo crop, stroke mask and masked PSNR shared by the inpainting tests."""

import numpy as np
from skimage import data


def masked_psnr(x, ref, mask):
    return 10 * np.log10(1.0 / np.mean((x[mask] - ref[mask]) ** 2))


def photo_crop() -> np.ndarray:
    return (data.astronaut()[60:188, 170:298] / 255.0).astype(np.float32)  # 128 x 128 colour


def stroke_mask() -> np.ndarray:
    m = np.zeros((128, 128), bool)
    for r in (20, 50, 90):
        m[r:r + 4, 10:118] = True  # text-like strokes 4 px thick
    m[10:115, 64:67] = True
    return m
