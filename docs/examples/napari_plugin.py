"""
The napari plugin
=================

The plugin (installed with the package as ``restore_napari``; ``pip install
"restore-tree[napari]"`` brings napari itself) adds three widgets under
**Plugins › Tree-sparse restoration**, and two samples under **File › Open
Sample**: "Noisy camera" and "Cat with text (and text mask)". The widgets
are thin: they read layers, call the library (:func:`restore.denoise_wavelet_tree`,
:func:`restore.inpaint`, :func:`restore.learn_dictionary`) in a background
thread with napari's progress bar and a Cancel button, and add the result as
a new layer named after the input and the method, with the input's scale,
translate and RGB flag. Errors become notifications.

This page is not run when the documentation is built (it needs a display);
the screenshots are real windows, made by ``docs/screenshots.py`` under Xvfb.

Denoise
-------
Choose an image layer, the wavelet and the penalty, the noise sigma (given,
estimated with **Estimate**, or automatic per plane) and the strength:
``lam`` by SURE, by the calibrated rule or by hand, times a multiplier.
**Preview** denoises the current plane live as the settings change;
**Apply** denoises the whole layer (stacks plane by plane, RGB as colour).
The line *used* shows the sigma and ``lam`` that were used, as
:func:`restore.choose_lam` returns them.

.. image:: /screenshots/denoise.png
   :alt: The Denoise widget next to the camera photograph denoised with tree_l2.

Inpaint
-------
Choose the image and a mask: a Labels layer (non-zero = missing) or a Shapes
layer drawn over the damage, rasterised in the image's data coordinates.
The dictionary is learned from the image (starting from the shipped one),
the shipped one as is, one learned in the session, or a file saved by
``restore learn`` or by the Learn widget. Patch size, stride and the number
of passes trade time for quality. The result keeps the input's dtype and
its known pixels exactly.

.. image:: /screenshots/inpaint.png
   :alt: The Inpaint widget with the cat sample, the text removed.

Learn dictionary
----------------
Learn a tree-structured (or flat) dictionary from the current plane of an
image layer, optionally excluding the pixels of a Labels layer. The atoms
are shown as one picture laid out as their tree (root on top, each node
above its descendants; a wide tree wraps its subtrees into rows of blocks).
**Save** and **Load** read and write the same ``.npz`` files as
``restore learn``; the Inpaint widget offers the dictionaries learned in the
session.

.. image:: /screenshots/learn.png
   :alt: The Learn dictionary widget and the atoms of a (10, 3, 3) tree.
"""

# sphinx_gallery_thumbnail_path = "screenshots/inpaint.png"

# %%
# Scripting the viewer
# --------------------
# The same from Python: open a sample and dock a widget, as the Plugins
# menu does.
import napari

viewer = napari.Viewer()
viewer.open_sample("restore-tree", "cat_with_text")
viewer.window.add_plugin_dock_widget("restore-tree", "Inpaint")
napari.run()
