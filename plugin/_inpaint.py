"""Inpaint widget: fill the pixels marked by a Labels or Shapes layer with :func:`restore.inpaint`.

The logic (:func:`inpaint_task`) needs no Qt; the masks come from
:mod:`restore_napari._masks`, the widget is a
:class:`~restore_napari._widgets.RestoreWidget`.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from magicgui.widgets import CheckBox, ComboBox, FileEdit, SpinBox

from ._common import RECORD_KEY, float_dtype, is_dictionary_layer, library_default, like_input, split_alpha
from ._denoise import Source
from ._masks import PlaneMasks, describe, plane_masks
from ._runner import Control, Output, Progress, Task
from ._widgets import RestoreWidget

if TYPE_CHECKING:  # pragma: no cover
    import napari

__all__ = ["SHIPPED", "InpaintParams", "InpaintWidget", "Inpainted", "inpaint_task"]

#: Choice of the dictionary box: the shipped dictionary as it is (no adaptation to the image).
SHIPPED = "shipped"

# share of each plane's part of the bar that its float copy takes: a few % of the call's time at 16 MP (its pages),
# less on smaller planes
_COPY_SHARE = 0.01
_COPY_BAND_PX = 1 << 20  # pixels per band of that copy: a report and a chance to cancel every few milliseconds


def _library_default(name: str) -> Any:
    """The default of a parameter of :func:`restore.inpaint`."""
    from restore import inpaint

    return library_default(inpaint, name)


@dataclass(frozen=True)
class InpaintParams:
    """Settings of :func:`restore.inpaint` chosen in the widget (defaults: the library's)."""

    patch_size: int = field(default_factory=lambda: _library_default("patch_size"))
    stride: int | None = field(default_factory=lambda: _library_default("stride"))  # None: the patch size
    n_passes: int = field(default_factory=lambda: _library_default("n_passes"))


@dataclass(frozen=True)
class Inpainted:
    """The result of one input layer: its data in the input's dtype, and how many pixels were filled."""

    source: Source
    data: np.ndarray
    pixels: int
    planes: int


def inpaint_task(control: Control, items: Sequence[tuple[Source, PlaneMasks]], dictionary: Any,
                 params: InpaintParams) -> Generator[Progress | Output | None, None, None]:
    """Inpaint every plane of every source under its mask; yield progress and an :class:`Output` per source.

    Known pixels are copied from the input, so they come back bit for bit;
    alpha (RGBA) is never inpainted. A mask that marks no pixel of a source
    raises a ValueError saying so.
    """
    plans = []
    for source, masks in items:
        planes = source.planes
        marked = []
        for idx in planes:
            control.check()
            m = masks(idx)
            if m.any():
                marked.append((idx, m))
        if not marked:
            raise ValueError(f"the mask {masks.name!r} marks no pixel of {source.layer.name!r} "
                             "(is it empty, or outside the image?)")
        plans.append((source, marked, len(planes)))
        yield Progress(0.0, "Reading the mask\u2026")
    sizes = [len(marked) * marked[0][1].size for _, marked, _ in plans]
    total, done = max(1, sum(sizes)), 0
    for (source, marked, n_planes), size in zip(plans, sizes, strict=True):
        out = np.array(source.data, dtype=source.dtype)  # known pixels: copied, exactly
        for k, (idx, m) in enumerate(marked):
            f0, f1 = (done + size * k / len(marked)) / total, (done + size * (k + 1) / len(marked)) / total
            f_copy = f0 + _COPY_SHARE * (f1 - f0)
            where = f" plane {idx}" if n_planes > 1 else ""
            text = f"Inpainting {source.layer.name!r}{where}\u2026"
            colour = yield from _float_colour(control, source.data[idx], source.rgb, (f0, f_copy), text)
            filled = yield from control.call(
                _inpaint, colour, m, dictionary=dictionary, patch_size=params.patch_size, stride=params.stride,
                n_passes=params.n_passes, channel_axis=-1 if source.rgb else None, span=(f_copy, f1), text=text)
            del colour
            plane = out[idx]  # a view: filled in place
            values = like_input(filled[m], source.dtype)
            if source.rgb:
                plane[m, : values.shape[-1]] = values
            else:
                plane[m] = values
        done += size
        yield Output(Inpainted(source, out, int(sum(np.count_nonzero(m) for _, m in marked)), len(marked)))


def _float_colour(control: Control, plane: Any, rgb: bool, span: tuple[float, float],
                  text: str) -> Generator[Progress, None, np.ndarray]:
    """The colour channels of ``plane`` as float in the same units (as :func:`as_float`), copied band by band.

    Progress on ``span`` after each band of rows, and Cancel between them:
    the copy of a 16 MP plane takes a fraction of a second.
    """
    colour, _ = split_alpha(np.asarray(plane), rgb)  # alpha is never inpainted: not copied
    dtype = float_dtype(colour.dtype)
    if colour.dtype == dtype:
        return colour
    out = np.empty(colour.shape, dtype)
    rows = max(1, _COPY_BAND_PX // max(1, colour.shape[1]))
    for r0 in range(0, len(colour), rows):
        control.check()
        out[r0:r0 + rows] = colour[r0:r0 + rows]
        yield Progress(span[0] + (span[1] - span[0]) * min(1.0, (r0 + rows) / len(colour)), text)
    return out


def _inpaint(image: np.ndarray, mask: np.ndarray, **kwargs: Any) -> np.ndarray:
    from restore import inpaint

    return inpaint(image, mask, **kwargs)


class InpaintWidget(RestoreWidget):
    """Fill the pixels a mask marks in an image layer; the result is a new layer ``<name> [inpainted]``."""

    KIND = "inpaint"
    RUN_TEXT = "Inpaint"
    RUN_TOOLTIP = "Fill the masked pixels of the whole image (every plane) in the background"

    def __init__(self, napari_viewer: napari.viewer.Viewer) -> None:
        super().__init__(napari_viewer)
        self.mask = ComboBox(label="mask", choices=self._mask_choices, name="mask",
                             tooltip="Pixels to fill: the non-zero pixels of a Labels layer, or the shapes of a "
                                     "Shapes layer (lines and paths as wide as their edge)")
        self._mask_boxes = [self.mask]
        self.learned = ComboBox(label="dictionary", choices=self._dictionary_choices, name="learned",
                                tooltip="Dictionary of patches: the shipped one adapted to this image (best for "
                                        "text and scratches), the shipped one as is (best for scattered lost "
                                        "pixels), or one learned in this viewer")
        self.dictionary = FileEdit(label="dictionary file", mode="r", filter="*.npz", value="", name="dictionary",
                                   tooltip="A dictionary saved by 'restore learn' or the Learn widget "
                                           "(overrides the box above)")
        defaults = InpaintParams()
        self.patch_size = SpinBox(label="patch size", value=defaults.patch_size, min=4, max=16, name="patch_size",
                                  tooltip="Side of the square patches, in pixels (the dictionary's)")
        # 0 stands for the library's None: the stride follows the patch size
        self.stride = SpinBox(label="stride", value=defaults.stride or 0, min=0, max=16, name="stride",
                              tooltip="Step of each pass's patch grid: a pass codes 1/stride\u00b2 of the patches "
                                      "(default: the patch size)")
        self.stride.native.setSpecialValueText("patch size")
        self.n_passes = SpinBox(label="passes", value=defaults.n_passes, min=1, max=200, name="n_passes",
                                tooltip="Passes of patch coding; time grows as passes / stride\u00b2")
        self.all_selected = CheckBox(text="every selected image", value=False, name="all_selected",
                                     tooltip="Inpaint every image layer selected in the layer list with the same "
                                             "mask, in one go")
        self.run_button = self.runner.run_button
        self._finish_layout(
            main=[self.image, self.mask, self.learned],
            advanced=[self.dictionary, self.patch_size, self.stride, self.n_passes, self.all_selected,
                      self.keep_each_run],
            persisted=[self.patch_size, self.stride, self.n_passes, self.all_selected, self.keep_each_run])
        self.image.changed.connect(self._describe_mask)
        self.mask.changed.connect(self._describe_mask)
        self._describe_mask()

    def _dictionary_choices(self, _widget: Any = None) -> list[tuple[str, Any]]:
        learned = [(layer.name, layer) for layer in self._viewer.layers if is_dictionary_layer(layer)]
        return [("shipped, adapted to the image", None), ("shipped, as is", SHIPPED), *learned]

    def _describe_mask(self, *_: Any) -> None:
        if not self._inactive and not self.busy:
            self.status.value = describe(self.mask.value, self.image.value)

    def _resolve_dictionary(self) -> tuple[Any, str]:
        path = str(self.dictionary.value)
        if path not in ("", "."):
            if not Path(path).is_file():
                raise ValueError(f"dictionary file {path!r} does not exist")
            return path, path
        choice = self.learned.value
        if choice is None:
            return None, "shipped, adapted to the image"
        if isinstance(choice, str) and choice == SHIPPED:
            from restore import default_dictionary

            return default_dictionary(), "shipped"
        return choice.metadata[RECORD_KEY]["dictionary"], choice.name

    def _task(self) -> Task:
        layers = self._inputs(bool(self.all_selected.value))
        if not layers:
            raise ValueError("choose an image layer first")
        mask = self.mask.value
        items = [(Source.of(layer), plane_masks(mask, layer)) for layer in layers]
        dictionary, label = self._resolve_dictionary()
        params = InpaintParams(int(self.patch_size.value), int(self.stride.value) or None, int(self.n_passes.value))
        record = {"mask": mask.name, "params": {**asdict(params), "dictionary": label}}
        self._added: list[str] = []
        text = f"Inpainting {len(items)} images\u2026" if len(items) > 1 else f"Inpainting {layers[0].name!r}\u2026"
        return Task(inpaint_task, (items, dictionary, params), text=text, inputs=tuple(layers),
                    layers=self._viewer.layers, on_output=lambda result: self._on_result(result, record),
                    done_text=lambda: f"Done: {', '.join(repr(n) for n in self._added)}.")

    def _on_result(self, result: Inpainted, record: dict[str, Any]) -> None:
        layer = result.source.layer
        if not self._present(layer):
            return
        full = {"source": layer.name, **record, "pixels": result.pixels, "planes": result.planes}
        out = self.add_result(layer, result.data, f"{layer.name} [inpainted]", full)
        self._added.append(out.name)
