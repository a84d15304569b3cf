"""Write the README's before/after picture, ``docs/images/before_after.png``.

The bundled ``sample_images/camera.png`` with Gaussian noise of standard
deviation 25 (seed 0), scikit-image's ``denoise_wavelet`` (BayesShrink, db3,
the usual choice), and ``restore.denoise_wavelet_tree`` at its defaults with
8 cycle spins; each panel carries its PSNR. Run from the repository root::

    PYTHONPATH=. .venv/bin/python docs/readme_figure.py
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from skimage import io
from skimage.metrics import peak_signal_noise_ratio
from skimage.restoration import denoise_wavelet

from restore import denoise_wavelet_tree

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "images" / "before_after.png"
SIGMA = 25.0  # grey levels of a [0, 255] image: clearly noisy, still a photograph
CROP = (slice(40, 296), slice(130, 386))  # the cameraman's head and camera, where detail shows


def main() -> None:
    """Denoise the noisy photograph both ways and write the three panels with their PSNR."""
    clean = io.imread(ROOT / "sample_images" / "camera.png").astype(np.float64)
    noisy = clean + np.random.default_rng(0).normal(0.0, SIGMA, clean.shape)
    ours = denoise_wavelet_tree(noisy, sigma=SIGMA, cycle_spins=8)
    bayes = denoise_wavelet(noisy, sigma=SIGMA, wavelet="db3", method="BayesShrink", mode="soft",
                            rescale_sigma=True)
    panels = [("noisy", noisy), ("scikit-image BayesShrink", bayes), ("restore (tree_l2, 8 cycle spins)", ours)]
    fig, axes = plt.subplots(1, 3, figsize=(9.0, 3.6), dpi=100)
    for ax, (name, img) in zip(axes, panels, strict=True):
        psnr = peak_signal_noise_ratio(clean, img, data_range=255)
        ax.imshow(np.clip(img[CROP], 0, 255), cmap="gray", vmin=0, vmax=255, interpolation="nearest")
        ax.set_title(f"{name}\n{psnr:.2f} dB", fontsize=10)
        ax.set_axis_off()
    fig.tight_layout()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    tmp = OUT.with_name(OUT.name + ".tmp.png")
    fig.savefig(tmp, bbox_inches="tight", pad_inches=0.05)
    tmp.replace(OUT)
    print(f"wrote {OUT.relative_to(ROOT)}: " + ", ".join(
        f"{n} {peak_signal_noise_ratio(clean, i, data_range=255):.2f} dB" for n, i in panels))


if __name__ == "__main__":
    main()
