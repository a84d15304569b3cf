"""Learn-dictionary widget: :func:`restore.learn_dictionary` on an image layer, atoms shown as their tree."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from magicgui.widgets import (
    CheckBox,
    ComboBox,
    Container,
    FileEdit,
    FloatSpinBox,
    LineEdit,
    ProgressBar,
    PushButton,
    SpinBox,
)

from ._common import (
    Job,
    as_float,
    check_image_layer,
    current_plane_index,
    layer_choices,
    notify_error,
    progress_in_thread,
    status_label,
)

if TYPE_CHECKING:  # pragma: no cover
    import napari

__all__ = ["LEARNED", "LearnWidget", "atom_positions", "atoms_picture", "parse_branching"]

#: Dictionaries learned in this session, by name: the Inpaint widget can use them.
LEARNED: dict[str, Any] = {}


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


class LearnWidget(Container):
    """Learn a tree-structured dictionary of patches from an image layer."""

    def __init__(self, napari_viewer: napari.viewer.Viewer) -> None:
        super().__init__()
        self._viewer = napari_viewer
        self.image = ComboBox(label="image", choices=layer_choices(napari_viewer, "Image"))
        self.exclude = ComboBox(label="exclude (Labels, optional)", choices=layer_choices(napari_viewer, "Labels"),
                                nullable=True)
        self.branching = LineEdit(label="tree shape", value="10 3 3")
        self.flat = CheckBox(text="flat dictionary (l1) of", value=False)
        self.n_atoms = SpinBox(label="atoms (flat)", value=256, min=2, max=4096)
        self.patch_size = SpinBox(label="patch size", value=8, min=4, max=16)
        self.epochs = SpinBox(label="epochs", value=1, min=1, max=50)
        self.lam = FloatSpinBox(label="lam", value=0.1, min=0.0, max=10.0, step=0.01)
        self.n_patches = SpinBox(label="patches", value=20000, min=100, max=1_000_000, step=1000)
        self.learn_button = PushButton(text="Learn")
        self.cancel_button = PushButton(text="Cancel", enabled=False)
        self.file = FileEdit(label="dictionary file", mode="w", filter="*.npz", value="")
        self.save_button = PushButton(text="Save")
        self.load_button = PushButton(text="Load")
        self.progress = ProgressBar(value=0, min=0, max=1, visible=False)
        self.status = status_label()
        row = Container(widgets=[self.learn_button, self.cancel_button], layout="horizontal", labels=False)
        files = Container(widgets=[self.save_button, self.load_button], layout="horizontal", labels=False)
        self.extend([self.image, self.exclude, self.branching, self.flat, self.n_atoms, self.patch_size,
                     self.epochs, self.lam, self.n_patches, row, self.file, files, self.progress, self.status])
        self.learn_button.changed.connect(self.run)
        self.cancel_button.changed.connect(self.cancel)
        self.save_button.changed.connect(lambda *_: self.save(self.file.value))
        self.load_button.changed.connect(lambda *_: self.load(self.file.value))
        self._viewer.layers.events.inserted.connect(self._refresh)
        self._viewer.layers.events.removed.connect(self._refresh)
        self._job: Job | None = None
        self.dictionary: Any = None

    def _refresh(self, *_: Any) -> None:
        self.image.reset_choices()
        self.exclude.reset_choices()

    @property
    def busy(self) -> bool:
        """Whether learning is running."""
        return self._job is not None and self._job.running

    def run(self, *_: Any) -> Job | None:
        """Learn on the current plane of the image layer, in the background."""
        from restore import learn_dictionary

        if self.busy:
            return None
        try:
            layer = self.image.value
            check_image_layer(layer)
            idx = current_plane_index(layer, tuple(self._viewer.dims.point))
            plane = as_float(np.asarray(layer.data[idx]))
            mask = None if self.exclude.value is None else np.asarray(self.exclude.value.data) != 0
            if mask is not None:
                mask = mask.reshape(-1, *mask.shape[-2:]).any(axis=0)
            kwargs = {"masks": mask, "patch_size": int(self.patch_size.value), "lam": float(self.lam.value),
                      "n_patches": int(self.n_patches.value), "n_epochs": int(self.epochs.value),
                      "channel_axis": -1 if layer.rgb else None}
            if self.flat.value:
                kwargs.update(penalty="l1", n_atoms=int(self.n_atoms.value))
            else:
                kwargs.update(branching=parse_branching(self.branching.value))
        except Exception as exc:  # noqa: BLE001
            self.status.value = f"Error: {notify_error(exc)}"
            return None
        name = layer.name
        self.progress.value, self.progress.visible = 0, True
        self.learn_button.enabled, self.cancel_button.enabled = False, True
        self.status.value = "Learning\u2026"

        def gen():
            return (yield from progress_in_thread(lambda progress: learn_dictionary(plane, progress=progress,
                                                                                    **kwargs)))

        self._job = Job(gen, on_yield=self._on_progress, on_return=lambda est: self._on_done(est, name, plane),
                        on_error=lambda exc: setattr(self.status, "value", f"Error: {notify_error(exc)}"),
                        on_abort=lambda: setattr(self.status, "value", "Cancelled: the dictionary is unchanged."),
                        on_finish=self._on_finish, progress={"desc": f"restore: learning on {name}"})
        self._job.start()
        return self._job

    def cancel(self, *_: Any) -> None:
        """Stop between mini-batches; the previous dictionary is kept."""
        if self.busy:
            self._job.cancel()

    def _on_progress(self, value: tuple[int, int]) -> None:
        done, total = value
        self.progress.max = max(1, total)
        self.progress.value = done

    def _on_done(self, est: Any, name: str, plane: np.ndarray) -> None:
        self._set_dictionary(est, f"{name} atoms")

    def _set_dictionary(self, est: Any, layer_name: str) -> None:
        self.dictionary = est
        size = int(round(np.sqrt(est.components_.shape[1])))  # luminance patches
        LEARNED[layer_name] = est
        if layer_name in self._viewer.layers:
            self._viewer.layers.remove(layer_name)
        self._viewer.add_image(atoms_picture(est, size), name=layer_name)
        kind = "flat" if est.tree_ is None else f"tree {tuple(est.branching)}"
        self.status.value = f"{est.components_.shape[0]} atoms ({kind}) shown as {layer_name!r}."

    def _on_finish(self) -> None:
        self.progress.visible = False
        self.learn_button.enabled, self.cancel_button.enabled = True, False

    def save(self, path: Any) -> None:
        """Save the learned dictionary (``.npz``)."""
        try:
            if self.dictionary is None:
                raise ValueError("learn or load a dictionary first")
            if str(path) in ("", "."):
                raise ValueError("choose a dictionary file (.npz) to save to")
            self.dictionary.save(path)
            self.status.value = f"Saved {str(path)!r}."
        except Exception as exc:  # noqa: BLE001
            self.status.value = f"Error: {notify_error(exc)}"

    def load(self, path: Any) -> None:
        """Load a dictionary saved by ``restore learn`` or :meth:`save` and show its atoms."""
        from restore import TreeDictionaryLearning

        try:
            est = TreeDictionaryLearning.load(path)
        except Exception as exc:  # noqa: BLE001
            self.status.value = f"Error: {notify_error(exc)}"
            return
        from pathlib import Path

        self._set_dictionary(est, f"{Path(path).stem} atoms")
