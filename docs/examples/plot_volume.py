"""
Denoise a fluorescence volume under photon noise
================================================

A confocal volume of cell nuclei (16 x 64 x 64 voxels, a crop of the nuclei
channel of :func:`skimage.data.cells3d` that ships with the repository in
``tests/data/``) gets photon noise and read noise:
``z = gain * Poisson(x / gain) + N(0, sigma**2)``, with ``gain = 0.1``
(ten photons at the brightest voxel) and ``sigma = 0.02``.

We compare, by PSNR against the clean volume:

* plane by plane (the default: a quad-tree per plane) against the 3-D
  transform with ``axes=(0, 1, 2)`` (an octree: each coefficient has eight
  children, so structures that continue across planes are kept together);
* the Poisson-Gaussian noise model (generalized Anscombe transform and its
  exact unbiased inverse) against pretending the noise is Gaussian;
* gain and read noise given against estimated by
  :func:`restore.estimate_noise`.

See :doc:`/user_guide/volumes` and :doc:`/user_guide/methods`.
"""

# %%
# The volume and its noise
# ------------------------
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from skimage.metrics import peak_signal_noise_ratio

import restore

repository = Path(restore.__file__).resolve().parents[1]  # a source checkout: restore/ and tests/ side by side
volume = np.load(repository / "tests" / "data" / "nuclei_16x64x64.npz")["volume"]
clean = (volume - volume.min()) / float(volume.max() - volume.min())  # [0, 1]

gain, sigma = 0.1, 0.02
rng = np.random.default_rng(0)
noisy = gain * rng.poisson(clean / gain) + sigma * rng.standard_normal(clean.shape)


def psnr(image):
    """PSNR (dB) against the clean volume, on the [0, 1] scale."""
    return peak_signal_noise_ratio(clean, image, data_range=1.0)


print(f"{clean.shape} voxels; noisy: {psnr(noisy):.2f} dB")
estimate = restore.estimate_noise(noisy)
print(f"estimated gain {estimate.gain:.3f} (true {gain}), read noise {estimate.sigma:.3f} (true {sigma})")

# %%
# Planes against the volume, Gaussian against Poisson-Gaussian
# ------------------------------------------------------------
# Every result uses ``tree_l2`` with ``lam`` by SURE and 8 cycle spins.
# Under the Gaussian model, sigma is estimated, as a user without a noise
# model would have it.
results = {
    "planes, Gaussian model": restore.denoise_wavelet_tree(noisy, cycle_spins=8),
    "planes, Poisson-Gaussian": restore.denoise_wavelet_tree(
        noisy, noise="poisson-gaussian", gain=gain, sigma=sigma, cycle_spins=8),
    "3-D, Gaussian model": restore.denoise_wavelet_tree(noisy, axes=(0, 1, 2), cycle_spins=8),
    "3-D, Poisson-Gaussian": restore.denoise_wavelet_tree(
        noisy, axes=(0, 1, 2), noise="poisson-gaussian", gain=gain, sigma=sigma, cycle_spins=8),
    "3-D, Poisson-Gaussian, estimated": restore.denoise_wavelet_tree(
        noisy, axes=(0, 1, 2), noise="poisson-gaussian", cycle_spins=8),
}
for name, out in results.items():
    print(f"{name:>34}: {psnr(out):.2f} dB")

# %%
# A plane of each result
# ----------------------
# The middle plane, and a side view (z against x) through the middle row,
# where the plane-by-plane result can only be as coherent as its planes
# (voxels drawn square).
shown = ["planes, Poisson-Gaussian", "3-D, Poisson-Gaussian"]
panels = [("clean", clean), ("noisy", noisy)] + [(name, results[name]) for name in shown]
fig, axes = plt.subplots(2, 4, figsize=(11, 4.2), height_ratios=(64, 16))
z, y = clean.shape[0] // 2, clean.shape[1] // 2
for col, (title, vol) in enumerate(panels):
    label = title if col < 2 else f"{title}\n{psnr(vol):.2f} dB"
    axes[0, col].imshow(vol[z], cmap="magma", vmin=0, vmax=1)
    axes[0, col].set_title(label, fontsize=9)
    axes[1, col].imshow(vol[:, y], cmap="magma", vmin=0, vmax=1)
    for ax in axes[:, col]:
        ax.set_axis_off()
fig.tight_layout()
plt.show()
