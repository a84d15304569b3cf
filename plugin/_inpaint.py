"""Inpaint widget: fill the pixels under a Labels or Shapes mask with :func:`restore.inpaint`.

The logic (mask rasterisation, the plane-by-plane generator) needs no Qt;
the widget is a magicgui Container built on :mod:`restore_napari._common`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
from magicgui.widgets import ComboBox, Container, FileEdit, ProgressBar, PushButton, SpinBox

from ._common import (
    Job,
    as_float,
    check_image_layer,
    derived_layer_kwargs,
    layer_choices,
    plane_indices,
    progress_in_thread,
    status_label,
)

if TYPE_CHECKING:  # pragma: no cover
    import napari

__all__ = ["InpaintWidget", "inpaint_planes", "mask_for_image"]


def mask_for_image(mask_layer: Any, image_layer: Any) -> np.ndarray:
    """The missing-pixel mask (True = missing) on the image layer's plane grid.

    A Labels layer counts its non-zero pixels (its last two axes must match the
    image plane). A Shapes layer is rasterised in the image's data
    coordinates: vertices go from the shapes' data to world coordinates and
    from there to the image's data coordinates, so scale and translate of
    both layers are respected.
    """
    shape = tuple(np.shape(image_layer.data))
    plane = shape[-3:-1] if image_layer.rgb else shape[-2:]
    if mask_layer is None:
        raise ValueError("choose a mask layer (Labels: non-zero = missing, or Shapes)")
    if mask_layer.__class__.__name__ == "Shapes":
        from skimage.draw import polygon

        out = np.zeros(plane, bool)
        for verts in mask_layer.data:
            world = np.array([mask_layer.data_to_world(v) for v in verts])
            data = np.array([image_layer.world_to_data(w) for w in world])
            rr, cc = polygon(data[:, -2] - 0.0, data[:, -1] - 0.0, shape=plane)
            out[rr, cc] = True
        return out
    m = np.asarray(mask_layer.data)
    if m.shape[-2:] != plane:
        raise ValueError(f"mask layer {mask_layer.name!r} has planes of {m.shape[-2:]}, "
                         f"the image {image_layer.name!r} of {plane}")
    return (m.reshape(-1, *plane) != 0).any(axis=0)


def inpaint_planes(data: Any, mask: np.ndarray, rgb: bool, patch_size: int, stride: int, n_passes: int,
                   dictionary: Any) -> Iterator[tuple[int, int, int, int]]:
    """Inpaint every plane; yield ``(plane, n_planes, batches done, batches)``; return the result.

    The result is float32, or the input's integer type.

    :func:`restore.inpaint` runs in a helper thread so that its per-batch
    progress reaches this generator; closing the generator (Cancel) stops it
    at its next batch through :class:`restore.Cancelled`.
    """
    from restore import inpaint

    idx = plane_indices(np.shape(data), rgb)
    out = np.empty(np.shape(data), dtype=np.float32)
    for p, i in enumerate(idx):
        plane = as_float(np.asarray(data[i])).astype(np.float32)

        def call(progress, plane=plane):
            return inpaint(plane, mask, dictionary=dictionary, patch_size=patch_size, stride=stride,
                           n_passes=n_passes, channel_axis=-1 if rgb else None, batch_size=2048, progress=progress)

        out[i] = yield from _tagged(progress_in_thread(call), p, len(idx))
    dtype = np.asarray(data[idx[0]]).dtype
    if dtype.kind in "ui":  # integer images come back in their own type (known pixels exactly)
        info = np.iinfo(dtype)
        return np.clip(np.rint(out), info.min, info.max).astype(dtype)
    return out


def _tagged(gen: Iterator[tuple[int, int]], plane: int, n_planes: int) -> Iterator[tuple[int, int, int, int]]:
    """Yield ``(plane, n_planes, done, total)`` for each report of ``gen``; return its result."""
    try:
        while True:
            try:
                done, total = next(gen)
            except StopIteration as stop:
                return stop.value
            yield plane, n_planes, done, total
    finally:
        gen.close()  # on Cancel: stops the library call at its next step


class InpaintWidget(Container):
    """Fill masked pixels of an image layer; the result is a new layer ``<name> [inpainted]``."""

    def __init__(self, napari_viewer: napari.viewer.Viewer) -> None:
        super().__init__()
        self._viewer = napari_viewer
        self.image = ComboBox(label="image", choices=layer_choices(napari_viewer, "Image"))
        self.mask = ComboBox(label="mask (Labels or Shapes)", choices=layer_choices(napari_viewer, "Labels", "Shapes"))
        self.learned = ComboBox(label="dictionary", choices=self._learned_choices)
        self.dictionary = FileEdit(label="or a file (.npz)", mode="r", filter="*.npz", value="")
        self.patch_size = SpinBox(label="patch size", value=8, min=4, max=16)
        self.stride = SpinBox(label="stride", value=4, min=1, max=16,
                              tooltip="step of each pass's patch grid: a pass codes 1/stride^2 of the patches")
        self.n_passes = SpinBox(label="passes", value=18, min=1, max=200,
                                tooltip="passes of patch coding; time grows as passes / stride^2")
        self.run_button = PushButton(text="Inpaint")
        self.cancel_button = PushButton(text="Cancel", enabled=False)
        self.progress = ProgressBar(value=0, min=0, max=1, visible=False)
        self.status = status_label()
        self.extend([self.image, self.mask, self.learned, self.dictionary, self.patch_size, self.stride,
                     self.n_passes,
                     Container(widgets=[self.run_button, self.cancel_button], layout="horizontal", labels=False),
                     self.progress, self.status])
        self.run_button.changed.connect(self.run)
        self.cancel_button.changed.connect(self.cancel)
        self._viewer.layers.events.inserted.connect(self._refresh)
        self._viewer.layers.events.removed.connect(self._refresh)
        self._job: Job | None = None

    def _refresh(self, *_: Any) -> None:
        self.image.reset_choices()
        self.mask.reset_choices()
        self.learned.reset_choices()

    @staticmethod
    def _learned_choices(_widget: Any = None) -> list[tuple[str, Any]]:
        from ._learn import LEARNED

        return [("learned from the image (shipped start)", None)] + [(k, v) for k, v in LEARNED.items()]

    @property
    def busy(self) -> bool:
        """Whether an inpainting job is running."""
        return self._job is not None and self._job.running

    def run(self, *_: Any) -> Job | None:
        """Inpaint the whole layer in the background."""
        from ._common import notify_error

        if self.busy:
            return None
        try:
            layer = self.image.value
            check_image_layer(layer)
            mask = mask_for_image(self.mask.value, layer)
            path = str(self.dictionary.value) if str(self.dictionary.value) not in ("", ".") else None
            dictionary = path if path is not None else self.learned.value
        except Exception as exc:  # noqa: BLE001
            notify_error(exc)
            self.status.value = f"Error: {exc}"
            return None
        kwargs = derived_layer_kwargs(layer, f"{layer.name} [inpainted]")
        self.progress.value, self.progress.visible = 0, True
        self.run_button.enabled, self.cancel_button.enabled = False, True
        self.status.value = f"Inpainting {int(mask.sum())} pixels\u2026"
        self._job = Job(inpaint_planes, layer.data, mask, bool(layer.rgb), int(self.patch_size.value),
                        int(self.stride.value), int(self.n_passes.value), dictionary, on_yield=self._on_progress,
                        on_return=lambda out: self._on_done(out, kwargs), on_error=self._on_error,
                        on_abort=lambda: setattr(self.status, "value", "Cancelled: nothing added."),
                        on_finish=self._on_finish, progress={"desc": f"restore: inpainting {layer.name}"})
        self._job.start()
        return self._job

    def cancel(self, *_: Any) -> None:
        """Stop at the next batch of patches; nothing is added."""
        if self.busy:
            self._job.cancel()
            self.status.value = "Cancelling\u2026"

    def _on_progress(self, value: tuple[int, int, int, int]) -> None:
        p, n, done, total = value
        self.progress.max = max(1, n * total)
        self.progress.value = p * total + done

    def _on_done(self, out: np.ndarray, kwargs: dict[str, Any]) -> None:
        self._viewer.add_image(out, **kwargs)
        self.status.value = f"Added {kwargs['name']!r}."

    def _on_error(self, exc: BaseException) -> None:
        from ._common import notify_error

        self.status.value = f"Error: {notify_error(exc)}"

    def _on_finish(self) -> None:
        self.progress.visible = False
        self.run_button.enabled, self.cancel_button.enabled = True, False
