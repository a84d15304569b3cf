"""Learn-dictionary widget: :func:`restore.learn_dictionary` on image layers, atoms shown as their tree.

The learned dictionary lives in the metadata of the layer that shows its
atoms (``metadata["restore"]["dictionary"]``): the Inpaint widgets of the
same viewer offer it, and it goes away with its layer.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from magicgui.widgets import CheckBox, ComboBox, Container, FileEdit, FloatSpinBox, LineEdit, PushButton, SpinBox

from ._common import as_float, current_plane_index, library_default, plane_indices, split_alpha
from ._denoise import Source
from ._masks import PlaneMasks, plane_masks
from ._runner import Control, Task
from ._widgets import RestoreWidget

if TYPE_CHECKING:  # pragma: no cover
    import napari

__all__ = ["LearnWidget", "atom_positions", "atoms_picture", "learn_task", "parse_branching"]


def _library_default(name: str) -> Any:
    """The default of a parameter of :func:`restore.learn_dictionary`."""
    from restore import learn_dictionary

    return library_default(learn_dictionary, name)


def parse_branching(text: str) -> tuple[int, ...]:
    """``"10 2 2"`` -> ``(10, 2, 2)``, with a clear error."""
    try:
        b = tuple(int(t) for t in text.replace(",", " ").split())
    except ValueError:
        raise ValueError(f"tree shape must be integers such as '10 2 2', got {text!r}") from None
    if not b or any(x < 1 for x in b):
        raise ValueError(f"tree shape must be integers >= 1 such as '10 2 2', got {text!r}")
    return b


def atom_positions(tree: Any, aspect: float = 2.0) -> list[tuple[float, float]]:
    """Where each atom of a tree goes in the picture: (row, column) in tiles, root on top.

    A node sits one row below its parent, centred above the span of its
    descendants' leaves. A single root whose subtrees make a strip more than
    twice ``aspect`` times as wide as tall (the (10, 3, 3) tree has 90 leaves
    on 4 levels) has its subtrees wrapped into rows of equal blocks below
    it, as many blocks a row as bring the picture nearest that aspect ratio;
    blocks are a third of a tile apart.
    """
    k = tree.n_nodes
    depth = np.zeros(k, int)
    block = np.zeros(k, int)  # which subtree of the (first) root each node belongs to
    span: dict[int, tuple[int, int]] = {}  # first and last leaf of each node's subtree, in leaf order
    n_leaves = 0

    def visit(n: int, d: int, b: int) -> None:
        nonlocal n_leaves
        depth[n], block[n] = d, b
        kids = [int(c) for c in tree.children(n)]
        if not kids:
            span[n] = (n_leaves, n_leaves)
            n_leaves += 1
        for i, c in enumerate(kids):
            visit(c, d + 1, i if d == 0 else b)
        if kids:
            span[n] = (span[kids[0]][0], span[kids[-1]][1])

    for r in tree.roots:
        visit(int(r), 0, 0)
    centre = [0.5 * (span[n][0] + span[n][1]) for n in range(k)]
    subs = [int(c) for c in tree.children(int(tree.roots[0]))] if len(tree.roots) == 1 else []
    if len(subs) < 2 or n_leaves <= 2 * aspect * (depth.max() + 1):
        return [(float(depth[n]), centre[n]) for n in range(k)]
    sub_w = max(span[c][1] - span[c][0] + 1 for c in subs)  # a block: the widest subtree, every level below the root
    sub_h = int(depth.max())
    pitch_w, pitch_h = sub_w + 1 / 3, sub_h + 1 / 3
    n_sub = len(subs)
    per_row = min(range(1, n_sub + 1),
                  key=lambda c: abs(c * pitch_w / (1 + -(-n_sub // c) * pitch_h) - aspect))
    pos = []
    for n in range(k):
        if depth[n] == 0:  # the root, centred above the first row of blocks
            pos.append((0.0, 0.5 * (per_row * pitch_w - 1 / 3 - 1)))
            continue
        i, s = block[n], subs[block[n]]
        left = (i % per_row) * pitch_w + 0.5 * (sub_w - (span[s][1] - span[s][0] + 1)) - span[s][0]
        pos.append((1 + (i // per_row) * pitch_h + depth[n] - 1, centre[n] + left))
    return pos


def atoms_picture(est: Any, patch_size: int, zoom: int = 3, gap: int = 2) -> np.ndarray:
    """The atoms as one image, laid out as their tree (see :func:`atom_positions`).

    Each atom is normalised to its own range. A flat dictionary is a plain
    grid.
    """
    D = est.components_
    k = D.shape[0]
    tiles = D.reshape(k, patch_size, patch_size)
    lo = tiles.min(axis=(1, 2), keepdims=True)
    hi = tiles.max(axis=(1, 2), keepdims=True)
    tiles = (tiles - lo) / np.maximum(hi - lo, 1e-12)
    tiles = np.kron(tiles, np.ones((1, zoom, zoom)))
    t = patch_size * zoom + gap
    if est.tree_ is None:
        cols = int(np.ceil(np.sqrt(k)))
        pos = [(float(i // cols), float(i % cols)) for i in range(k)]
    else:
        pos = atom_positions(est.tree_)
    corners = [(int(round(r * t)), int(round(c * t))) for r, c in pos]
    pic = np.full((max(y for y, _ in corners) + t, max(x for _, x in corners) + t), 0.15, dtype=np.float32)
    for n, (y, x) in enumerate(corners):
        pic[y:y + t - gap, x:x + t - gap] = tiles[n]
    return pic


def learn_task(control: Control, items: Sequence[tuple[Source, list[tuple[int, ...]], PlaneMasks | None]],
               kwargs: dict[str, Any]) -> Generator[Any, None, Any]:
    """Learn one dictionary from the chosen planes of the sources (pixels under their masks left out)."""
    images, masks = [], []
    for source, planes, exclude in items:
        for idx in planes:
            control.check()
            colour, _ = split_alpha(as_float(np.asarray(source.data[idx])), source.rgb)
            images.append(colour)
            masks.append(None if exclude is None else exclude(idx))
    from restore import learn_dictionary

    channel_axis = -1 if items[0][0].rgb else None
    if any(s.rgb != items[0][0].rgb for s, _, _ in items):
        images = [im if im.ndim == 3 else im[..., None] for im in images]  # grey with colour: one channel each
        channel_axis = -1
    return (yield from control.call(learn_dictionary, images, masks=masks, channel_axis=channel_axis, **kwargs,
                                    text="Learning…"))


class LearnWidget(RestoreWidget):
    """Learn a tree-structured dictionary of patches from image layers; its atoms show as a layer."""

    KIND = "learn"
    RUN_TEXT = "Learn"
    RUN_TOOLTIP = "Learn a dictionary from the image (the plane shown) in the background"

    def __init__(self, napari_viewer: napari.viewer.Viewer) -> None:
        super().__init__(napari_viewer)
        self.exclude = ComboBox(label="leave out", choices=self._mask_choices, nullable=True, value=None,
                                name="exclude",
                                tooltip="Optional: pixels not to learn from (text, scratches): a Labels layer "
                                        "(non-zero) or a Shapes layer")
        from restore import Tree

        branching = tuple(_library_default("branching"))
        tree_atoms = Tree.balanced(branching).n_vars
        shape = " ".join(str(b) for b in branching)
        self.branching = LineEdit(label="tree shape", value=shape, name="branching",
                                  tooltip=f"Children per node at each level below the root: '{shape}' gives "
                                          f"{tree_atoms} atoms")
        self.flat = CheckBox(text="flat dictionary (no tree)", value=False, name="flat",
                             tooltip="Learn an ordinary dictionary (l1 penalty) of 'atoms (flat)' atoms instead")
        self.n_atoms = SpinBox(label="atoms (flat)", value=tree_atoms, min=2, max=4096, name="n_atoms",
                               tooltip="Number of atoms of a flat dictionary (default: as many as the tree's)")
        self.patch_size = SpinBox(label="patch size", value=_library_default("patch_size"), min=4, max=16,
                                  name="patch_size", tooltip="Side of the square patches, in pixels")
        self.epochs = SpinBox(label="epochs", value=_library_default("n_epochs"), min=1, max=50, name="epochs",
                              tooltip="Passes over the training patches")
        self.lam = FloatSpinBox(label="\u03bb", value=_library_default("lam"), min=0.0, max=10.0, step=0.01,
                                name="lam",
                                tooltip="Sparsity of the codes while learning (patches are scaled to unit norm)")
        self.n_patches = SpinBox(label="patches", value=_library_default("n_patches"), min=100, max=1_000_000,
                                 step=1000, name="n_patches",
                                 tooltip="Training patches drawn from the image(s)")
        self.every_plane = CheckBox(text="every plane of a stack", value=False, name="every_plane",
                                    tooltip="Learn from every plane, not only the plane shown")
        self.all_selected = CheckBox(text="every selected image", value=False, name="all_selected",
                                     tooltip="Learn one dictionary from every image layer selected in the layer list")
        self.file = FileEdit(label="file", mode="w", filter="*.npz", value="", name="file",
                             tooltip="Dictionary file (.npz), as 'restore learn' writes them")
        self.save_button = PushButton(text="Save", tooltip="Save the last learned or loaded dictionary to the file")
        self.load_button = PushButton(text="Load", tooltip="Load the file's dictionary and show its atoms")
        files = Container(widgets=[self.file, self.save_button, self.load_button], layout="horizontal",
                          labels=False, label="file")
        files.margins = (0, 0, 0, 0)
        self.compare.visible = False  # a dictionary's atoms are not an image to compare with its input
        self.learn_button = self.runner.run_button
        self._mask_boxes = []  # "leave out" is chosen on purpose, never from the selection
        self._finish_layout(
            main=[self.image, self.exclude, self.branching],
            advanced=[self.flat, self.n_atoms, self.patch_size, self.epochs, self.lam, self.n_patches,
                      self.every_plane, self.all_selected, self.keep_each_run],
            after=[Container(widgets=[files], labels=True)],
            persisted=[self.branching, self.flat, self.n_atoms, self.patch_size, self.epochs, self.lam,
                       self.n_patches, self.every_plane, self.all_selected, self.keep_each_run])
        self.save_button.changed.connect(lambda *_: self.save(self.file.value))
        self.load_button.changed.connect(lambda *_: self.load(self.file.value))
        self.dictionary: Any = None

    def _task(self) -> Task:
        layers = self._inputs(bool(self.all_selected.value))
        if not layers:
            raise ValueError("choose an image layer first")
        items = []
        for layer in layers:
            source = Source.of(layer)
            planes = (plane_indices(np.shape(layer.data), bool(layer.rgb)) if self.every_plane.value
                      else [current_plane_index(layer, tuple(self._viewer.dims.point))])
            exclude = None if self.exclude.value is None else plane_masks(self.exclude.value, layer)
            items.append((source, planes, exclude))
        kwargs: dict[str, Any] = {"patch_size": int(self.patch_size.value), "lam": float(self.lam.value),
                                  "n_patches": int(self.n_patches.value), "n_epochs": int(self.epochs.value)}
        if self.flat.value:
            kwargs.update(penalty="l1", n_atoms=int(self.n_atoms.value))
        else:
            kwargs.update(branching=parse_branching(self.branching.value))
        source = layers[0]
        record = {"source": ", ".join(layer.name for layer in layers), "params": dict(kwargs),
                  "planes": sum(len(p) for _, p, _ in items),
                  "left_out": None if self.exclude.value is None else self.exclude.value.name}
        return Task(learn_task, (items, kwargs), text="Learning\u2026", inputs=tuple(layers),
                    layers=self._viewer.layers,
                    on_return=lambda est: self._show(est, f"{source.name} atoms", source, record))

    def _show(self, est: Any, name: str, source: Any, record: dict[str, Any]) -> None:
        self.dictionary = est
        size = int(round(np.sqrt(est.components_.shape[1])))  # luminance patches
        kwargs = {"contrast_limits": (0.0, 1.0), "colormap": "gray", "metadata": {}}
        layer = self.add_result(source, atoms_picture(est, size), name, {**record, "dictionary": est}, kwargs)
        kind = "flat" if est.tree_ is None else f"tree {tuple(est.branching)}"
        self.status.value = (f"{est.components_.shape[0]} atoms ({kind}) shown as {layer.name!r}; "
                             "the Inpaint widget offers this dictionary.")

    def save(self, path: Any) -> None:
        """Save the last learned or loaded dictionary (``.npz``)."""
        try:
            if self.dictionary is None:
                raise ValueError("learn or load a dictionary first")
            if str(path) in ("", "."):
                raise ValueError("choose a dictionary file (.npz) to save to")
            self.dictionary.save(path)
            self.status.value = f"Saved {str(path)!r}."
        except Exception as exc:  # noqa: BLE001
            self.show_error(exc)

    def load(self, path: Any) -> None:
        """Load a dictionary saved by ``restore learn`` or :meth:`save` and show its atoms."""
        from restore import TreeDictionaryLearning

        try:
            if str(path) in ("", "."):
                raise ValueError("choose a dictionary file (.npz) to load")
            est = TreeDictionaryLearning.load(path)
        except Exception as exc:  # noqa: BLE001
            self.show_error(exc)
            return
        self._show(est, f"{Path(path).stem} atoms", None, {"source": str(path)})
