"""napari plugin of ``restore``: thin widgets over the library's public API.

Nothing heavy is imported here; napari loads the widgets lazily through the
manifest ``napari.yaml``.
"""

__all__: list[str] = []
