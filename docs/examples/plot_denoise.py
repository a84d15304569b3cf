"""
Denoise a photograph
====================

:func:`restore.denoise_wavelet_tree` shrinks the orthonormal wavelet
coefficients of an image arranged as a quad-tree: each detail coefficient is
the parent of the four coefficients of the next finer level at the same place
and orientation. With the default penalty, ``tree_l2``, a coefficient can
only survive where its ancestors do, which is how edges and textures look in
a wavelet transform, while isolated noise peaks do not. ``lam`` is chosen by
Stein's unbiased risk estimate (SURE) from the noisy image alone.

We add white Gaussian noise of a known level to a photograph and compare,
by PSNR against the clean image:

* the noisy image;
* scikit-image's :func:`skimage.restoration.denoise_wavelet` (BayesShrink,
  soft thresholding) with the *same* wavelet and the *same* known sigma;
* :func:`restore.denoise_wavelet_tree` with every penalty, ``lam`` by SURE
  (convex penalties) or by the calibrated rule (``l0``, ``tree_l0``);
* both methods averaged over the same four circular shifts (cycle spinning).

See :doc:`/user_guide/methods` for the maths.
"""

# %%
# A noisy photograph
# ------------------
# Intensities in [0, 1]; noise of standard deviation 0.1 (25.5 on the 0-255
# scale), from a seeded generator.
import matplotlib.pyplot as plt
import numpy as np
from skimage import data
from skimage.metrics import peak_signal_noise_ratio
from skimage.restoration import cycle_spin, denoise_wavelet
from skimage.util import img_as_float

import restore

clean = img_as_float(data.camera())
sigma = 0.1
rng = np.random.default_rng(0)
noisy = clean + sigma * rng.standard_normal(clean.shape)


def psnr(image):
    """PSNR (dB) against the clean image, on the [0, 1] scale."""
    return peak_signal_noise_ratio(clean, image, data_range=1.0)


print(f"noisy: {psnr(noisy):.2f} dB")

# %%
# Tree-structured shrinkage against BayesShrink
# ---------------------------------------------
# :func:`restore.choose_lam` tells which ``lam`` the denoiser will use;
# :func:`restore.denoise_wavelet_tree` uses the same choice internally.
choice = restore.choose_lam(noisy, sigma=sigma)
print(f"SURE chose lam = {choice.lam[0]:.4f} for sigma = {choice.sigma[0]:.4f} ({choice.method})")

ours = restore.denoise_wavelet_tree(noisy, sigma=sigma)  # tree_l2, db3, lam by SURE
bayes = denoise_wavelet(noisy, sigma=sigma, wavelet="db3", mode="soft", method="BayesShrink",
                        rescale_sigma=True)
print(f"restore tree_l2 (SURE):        {psnr(ours):.2f} dB")
print(f"scikit-image BayesShrink, db3: {psnr(bayes):.2f} dB")

# %%
# Every penalty
# -------------
# The convex penalties get ``lam`` from SURE, the ``l0`` ones (whose
# estimators jump, so SURE does not apply) from a rule calibrated on the
# bundled sample images.
for penalty in restore.PENALTIES:
    out = restore.denoise_wavelet_tree(noisy, sigma=sigma, penalty=penalty)
    print(f"{penalty:>9}: {psnr(out):.2f} dB")

# %%
# Cycle spinning
# --------------
# Averaging the estimates of circularly shifted copies removes the
# blockiness of a single transform. ``cycle_spins=4`` uses the shifts
# (0, 0), (1, 1), (0, 1) and (1, 0); scikit-image's
# :func:`~skimage.restoration.cycle_spin` with ``max_shifts=1`` averages the
# same four shifts, so both methods get the same help.
ours_cs = restore.denoise_wavelet_tree(noisy, sigma=sigma, cycle_spins=4)
bayes_cs = cycle_spin(noisy, denoise_wavelet, max_shifts=1,
                      func_kw={"sigma": sigma, "wavelet": "db3", "mode": "soft", "method": "BayesShrink",
                               "rescale_sigma": True})
print(f"restore tree_l2, 4 shifts:      {psnr(ours_cs):.2f} dB")
print(f"scikit-image BayesShrink, 4 shifts: {psnr(bayes_cs):.2f} dB")

# %%
# A detail of the results.
crop = (slice(60, 220), slice(180, 340))
panels = [("noisy", noisy), ("BayesShrink (db3)", bayes), ("restore tree_l2", ours),
          ("restore tree_l2, 4 shifts", ours_cs)]
fig, axes = plt.subplots(1, 4, figsize=(12, 3.4))
for ax, (title, image) in zip(axes, panels, strict=True):
    ax.imshow(np.clip(image[crop], 0, 1), cmap="gray", vmin=0, vmax=1)
    ax.set_title(f"{title}\n{psnr(image):.2f} dB", fontsize=9)
    ax.set_axis_off()
fig.tight_layout()

# %%
# Colour, with the noise level unknown
# -------------------------------------
# With ``channel_axis``, three channels are denoised in an orthonormal
# opponent colour space (luminance and two colour differences), where white
# noise stays white with the same sigma. Without ``sigma``, it is estimated
# per channel by :func:`restore.estimate_sigma`; scikit-image estimates its
# own (in YCbCr, its recommended colour space for this method).
clean_rgb = img_as_float(data.astronaut())[:256, 128:384]
noisy_rgb = clean_rgb + 0.08 * rng.standard_normal(clean_rgb.shape)
print("estimated sigma per RGB channel:", np.round(restore.estimate_sigma(noisy_rgb, channel_axis=-1), 4))
ours_rgb = restore.denoise_wavelet_tree(noisy_rgb, channel_axis=-1)
bayes_rgb = denoise_wavelet(noisy_rgb, wavelet="db3", mode="soft", method="BayesShrink", rescale_sigma=True,
                            channel_axis=-1, convert2ycbcr=True)
for name, image in (("noisy", noisy_rgb), ("restore tree_l2", ours_rgb), ("BayesShrink (YCbCr)", bayes_rgb)):
    print(f"{name:>20}: {peak_signal_noise_ratio(clean_rgb, image, data_range=1.0):.2f} dB")

fig, axes = plt.subplots(1, 3, figsize=(9, 3.3))
for ax, (title, image) in zip(axes, (("noisy", noisy_rgb), ("BayesShrink", bayes_rgb),
                                     ("restore tree_l2", ours_rgb)), strict=True):
    ax.imshow(np.clip(image, 0, 1))
    ax.set_title(title, fontsize=9)
    ax.set_axis_off()
fig.tight_layout()
plt.show()
