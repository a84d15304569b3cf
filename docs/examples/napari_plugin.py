"""
The napari plugin from a script
===============================

The plugin (``restore_napari``, installed with the package; ``pip install
-e ".[napari]"`` brings napari) adds three widgets under **Plugins ›
Tree-sparse restoration** and two samples under **File › Open Sample**; the
:doc:`/user_guide/napari` page shows each widget. The same from Python: open
the cat sample (a photograph with text burnt in, and the text's mask as a
Labels layer) and dock the Inpaint widget, as the Plugins menu does.

This example is shown, not run, when the documentation is built: it opens a
window.
"""

# sphinx_gallery_thumbnail_path = "screenshots/inpaint.png"
import napari

viewer = napari.Viewer()
viewer.open_sample("restore-tree", "cat_with_text")
viewer.window.add_plugin_dock_widget("restore-tree", "Inpaint")
napari.run()
