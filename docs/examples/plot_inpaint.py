"""
Remove text from a photograph
=============================

:func:`restore.inpaint` fills the masked pixels of an image from a
tree-structured dictionary of patches. The recipe (see :doc:`/user_guide/methods`):
start from the biharmonic interpolant of the known pixels, sharpen it at
edges by edge-enhancing diffusion, then refine the luminance in passes that
sparse-code the patches touching the mask over the dictionary, with ``lam``
decreasing from pass to pass. When the image has enough complete patches
(text, scratches) the shipped dictionary is first adapted to it.

The photograph is the plugin's sample: a 256 x 256 crop of
:func:`skimage.data.chelsea` with the text mask that ships with the napari
plugin (``restore_napari``). We compare the masked-pixel PSNR with
scikit-image's :func:`~skimage.restoration.inpaint_biharmonic`, which is
also our starting point.
"""

# %%
# The image and the mask
# ----------------------
# The mask is True where pixels are missing. We burn the text into the
# photograph, as a real caption would be, and keep the clean image to
# measure the result.
import time
from importlib.resources import as_file, files

import matplotlib.pyplot as plt
import numpy as np
from skimage import data, io
from skimage.restoration import inpaint_biharmonic
from skimage.util import img_as_float

import restore

clean = img_as_float(data.chelsea()[22:278, 100:356])
with as_file(files("restore_napari") / "data" / "chelsea_cat_text.png") as path:
    mask = io.imread(path) != 0  # the text mask that ships with the plugin, non-zero on the text
damaged = clean.copy()
damaged[mask] = 1.0
print(f"{clean.shape[0]} x {clean.shape[1]} pixels, {mask.mean():.1%} missing")


def masked_psnr(image):
    """PSNR (dB) on the missing pixels only (the known ones are returned unchanged)."""
    mse = np.mean((image[mask] - clean[mask]) ** 2)
    return 10 * np.log10(1.0 / mse)


# %%
# Inpainting
# ----------
# The defaults (the shipped dictionary adapted to the image, 18 passes on
# patch grids of stride 4), except that the dictionary adapts on 5,000 of the
# image's complete patches instead of 20,000, which keeps this example quick.
# ``progress`` could report each step and raise :class:`restore.Cancelled`
# to stop.
t0 = time.perf_counter()
ours = restore.inpaint(damaged, mask, channel_axis=-1, n_train=5000)
t_ours = time.perf_counter() - t0
t0 = time.perf_counter()
biharmonic = inpaint_biharmonic(damaged, mask, channel_axis=-1)
t_bih = time.perf_counter() - t0
assert np.array_equal(ours[~mask], damaged[~mask])  # known pixels are kept bit for bit
print(f"restore.inpaint:    {masked_psnr(ours):.2f} dB on the missing pixels ({t_ours:.1f} s)")
print(f"inpaint_biharmonic: {masked_psnr(biharmonic):.2f} dB on the missing pixels ({t_bih:.1f} s)")

# %%
# The whole image, then a detail.
fig, axes = plt.subplots(2, 3, figsize=(10, 6.8))
detail = (slice(0, 96), slice(0, 128))
for col, (title, image) in enumerate((("with text", damaged), ("biharmonic", biharmonic),
                                      ("restore.inpaint", ours))):
    label = title if col == 0 else f"{title}: {masked_psnr(image):.2f} dB"
    axes[0, col].imshow(np.clip(image, 0, 1))
    axes[0, col].set_title(label, fontsize=9)
    axes[1, col].imshow(np.clip(image[detail], 0, 1), interpolation="nearest")
    for ax in axes[:, col]:
        ax.set_axis_off()
fig.tight_layout()
plt.show()

# %%
# From the command line the same is::
#
#     restore inpaint photo.png mask.png filled.png
#
# where the mask file is non-zero on the missing pixels, and the result keeps
# the file's bit depth.
