"""
Evaluate the penalties on a folder of images
============================================

:func:`restore.evaluate.evaluate_denoising` runs the protocol of Table 1 of
Jenatton et al. (JMLR 2011) on a folder of images: grey images in
[0, 255], white Gaussian noise of several levels, several wavelets and
penalties, a few noise draws, and ``lam`` either picked by an oracle (the
best PSNR, by a golden-section search over ``lam / sigma``) or chosen from
the noisy image alone (SURE or the calibrated rule, with the known sigma).
scikit-image's BayesShrink is a reference column. The command
``restore evaluate`` does the same from a shell, in parallel processes or
on a Dask cluster, and resumes an interrupted run.

Here the grid is tiny (two 256 x 256 crops, two noise levels, one draw,
one wavelet) so that the example runs in seconds; the numbers are this
build's. See :doc:`/benchmarks` for the measured tables.
"""

# %%
# A folder of images
# ------------------
# Any folder of PNG, TIFF, JPEG or BMP files works; colour images are
# converted to grey. We write two crops of :mod:`skimage.data` photographs.
import shutil
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
from skimage import data, io

from restore.evaluate import evaluate_denoising

work = Path(tempfile.mkdtemp(prefix="restore-evaluate-"))
images = work / "images"
images.mkdir()
io.imsave(images / "camera.png", data.camera()[:256, 128:384])
io.imsave(images / "coffee.png", data.coffee()[:256, 200:456])

# %%
# The evaluation
# --------------
# ``n_jobs=1`` runs in this process (the default uses one process per CPU).
rows = evaluate_denoising(images, work / "out", sigmas=(10, 25), wavelets=("db3",), n_draws=1, n_jobs=1,
                          progress=False)
print(f"{len(rows)} result rows; files written:", sorted(p.name for p in (work / "out").iterdir()))

# %%
# ``table.md`` holds the tables in the paper's layout (mean PSNR over the
# images and draws, ± the spread of the per-draw means: zero with one draw).
print((work / "out" / "table.md").read_text())

# %%
# Each row of ``results.csv`` (and of the returned list) is one image, noise
# level, wavelet, method, lam mode and draw.
for r in rows[:6]:
    print(f"{r['image']:>10}  sigma {r['sigma']:>4g}  {r['method']:>12}  {r['lam_mode']:>6}  "
          f"lam {r['lam']:8.4g}  PSNR {r['psnr']:.2f} dB")

# %%
# The same rows as a plot: PSNR against sigma for each penalty, the oracle's
# lam against the automatic one.
methods = sorted({r["method"] for r in rows})
fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
for ax, mode in zip(axes, ("oracle", "auto"), strict=True):
    for m in methods:
        pts = {}
        for r in rows:
            if r["method"] == m and (r["lam_mode"] == mode or m == "bayes_shrink"):
                pts.setdefault(r["sigma"], []).append(r["psnr"])
        sig = sorted(pts)
        ax.plot(sig, [sum(pts[s]) / len(pts[s]) for s in sig], marker="o", label=m)
    ax.set_title(f"lam: {mode}")
    ax.set_xlabel("noise sigma (0-255)")
    ax.grid(alpha=0.3)
axes[0].set_ylabel("PSNR (dB), mean over the images")
axes[1].legend(fontsize=8)
fig.tight_layout()
plt.show()

shutil.rmtree(work)
