"""Masks of pixels (True = marked) on an image layer's planes, from a Labels or a Shapes layer.

A mask means what the user sees in the viewer:

- it is taken in world coordinates and mapped onto the image's data grid
  (each image pixel takes the mask's value at its centre), so the layers'
  ``scale``, ``translate``, ``rotate``, ``shear`` and ``affine`` are honoured;
- a mask with the image's own dimensions applies plane by plane; a mask with
  fewer dimensions is broadcast over the image's leading axes, as napari
  shows it (a 2-D mask on a stack applies to every plane); a mask with more
  dimensions than the image counts wherever it marks along its extra axes;
- Shapes are rasterised by napari itself (:meth:`napari.layers.Shapes.to_labels`),
  after their vertices are mapped onto the image's grid: an ellipse is an
  ellipse, and lines and paths are strokes as wide as their edge width.

:func:`plane_masks` reads the layers (in the GUI thread) and returns a
:class:`PlaneMasks`, which computes each plane's mask on demand in any thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

__all__ = ["PlaneMasks", "describe", "plane_masks"]

#: Shapes whose outline, not their inside, is what the user drew.
_STROKES = ("line", "path")


class PlaneMasks:
    """The mask of each plane of an image, computed when asked for.

    Parameters
    ----------
    plane : (int, int)
        Rows and columns of a plane.
    compute : callable
        ``compute(index)`` returns the mask of the plane at ``index`` (the
        image's leading axes): a bool array of shape ``plane``.
    broadcast : bool
        Whether one mask applies to every plane (then it is computed once).
    name : str
        The mask layer's name, for messages.
    """

    def __init__(self, plane: tuple[int, int], compute: Callable[[tuple[int, ...]], np.ndarray], *,
                 broadcast: bool, name: str) -> None:
        self.plane = plane
        self.broadcast = broadcast
        self.name = name
        self._compute = compute
        self._common: np.ndarray | None = None

    def __call__(self, index: tuple[int, ...]) -> np.ndarray:
        """The mask of the plane at ``index``."""
        if self.broadcast:
            if self._common is None:
                self._common = self._compute(())
            return self._common
        return self._compute(index)

    def count(self, indices: Iterable[tuple[int, ...]]) -> int:
        """Marked pixels over these planes."""
        return int(sum(np.count_nonzero(self(i)) for i in indices))


def describe(mask_layer: Any, image_layer: Any) -> str:
    """How the mask applies to the image's planes, in a sentence for the widget (empty for a single plane)."""
    if mask_layer is None or image_layer is None:
        return ""
    n_image = image_layer.ndim
    n_planes = int(np.prod(np.shape(image_layer.data)[: n_image - 2], dtype=int))
    if n_planes <= 1:
        return ""
    if mask_layer.ndim < n_image:
        return (f"The {mask_layer.ndim}-D mask {mask_layer.name!r} applies to every plane of "
                f"{image_layer.name!r} ({n_planes} planes).")
    return f"The mask {mask_layer.name!r} applies plane by plane to {image_layer.name!r} ({n_planes} planes)."


def plane_masks(mask_layer: Any, image_layer: Any) -> PlaneMasks:
    """The mask of a Labels (non-zero pixels) or Shapes layer on each plane of an Image layer.

    Reads what it needs from both layers now; the returned object computes
    the masks later, in any thread.
    """
    if mask_layer is None:
        raise ValueError("choose a mask layer (Labels: non-zero = marked, or Shapes)")
    from napari.layers import Labels, Shapes

    if isinstance(mask_layer, Labels):
        return _labels_masks(mask_layer, image_layer)
    if isinstance(mask_layer, Shapes):
        return _shapes_masks(mask_layer, image_layer)
    raise ValueError(f"layer {mask_layer.name!r} is not a Labels or Shapes layer: it cannot be a mask")


def _affine(src: Any, dst: Any, n_src: int, n_dst: int) -> tuple[np.ndarray, np.ndarray]:
    """``(M, b)`` with ``dst_data = M @ src_data + b``, on the last ``n_src`` / ``n_dst`` data axes.

    Both layers' transforms are affine, so mapping the origin and the unit
    vectors through world coordinates (napari's public ``data_to_world`` and
    ``world_to_data``) gives the whole map.
    """
    def to_dst(point: np.ndarray) -> np.ndarray:
        full = np.zeros(src.ndim)
        full[src.ndim - n_src:] = point
        world = np.asarray(src.data_to_world(full), dtype=float)
        return np.asarray(dst.world_to_data(world), dtype=float)[dst.ndim - n_dst:]

    b = to_dst(np.zeros(n_src))
    M = np.stack([to_dst(e) - b for e in np.eye(n_src)], axis=1)
    return M, b


def _labels_masks(labels: Any, image: Any) -> PlaneMasks:
    from scipy import ndimage

    n_img, n_lab = image.ndim, labels.ndim
    k = min(n_img, n_lab)  # axes the two layers share (the trailing ones)
    shape = tuple(np.shape(image.data)[:n_img])
    plane = shape[-2:]
    M, b = _affine(image, labels, k, k)  # image data -> labels data, on the shared axes
    data = labels.data
    extra = n_lab - k  # leading labels axes the image does not have: marked anywhere along them
    lab_shape = tuple(np.shape(data))
    identity = np.allclose(M, np.eye(k), atol=1e-9) and np.allclose(b, 0.0, atol=1e-9)
    exact = identity and lab_shape[extra:] == shape[n_img - k:]
    flat: list[np.ndarray] = []  # labels != 0 (as uint8) with the extra axes merged, computed once when needed

    def marked() -> np.ndarray:
        if not flat:
            m = np.asarray(data) != 0
            flat.append((m.any(axis=tuple(range(extra))) if extra else m).view(np.uint8))
        return flat[0]

    def compute(index: tuple[int, ...]) -> np.ndarray:
        shared = tuple(index[len(index) - (k - 2):]) if k > 2 else ()
        if exact and not extra:
            return np.asarray(data[shared]) != 0
        if exact:
            return marked()[shared] != 0
        # each image pixel takes the label at its centre (nearest neighbour); outside the labels: unmarked
        start = np.array(shared + (0, 0), dtype=float)
        out = ndimage.affine_transform(marked(), M, offset=M @ start + b,
                                       output_shape=(1,) * (k - 2) + plane, order=0, mode="constant",
                                       cval=0, prefilter=False)
        return out.reshape(plane) != 0

    return PlaneMasks(plane, compute, broadcast=k == 2 and n_img > 2, name=labels.name)


def _shapes_masks(shapes: Any, image: Any) -> PlaneMasks:
    from napari.layers import Shapes

    n_img, n_sh = image.ndim, shapes.ndim
    shape = tuple(np.shape(image.data)[:n_img])
    plane = shape[-2:]
    k = min(n_img, n_sh)
    first = n_img - k  # the image's leading axes from here on are the shapes' too; those before are broadcast
    M, b = _affine(shapes, image, n_sh, n_img)  # shapes data -> image data
    # edge widths are in the shapes' data units: scale them by the in-plane map's mean stretch
    stretch = float(np.sqrt(abs(np.linalg.det(M[-2:, -2:]))))
    groups: dict[Any, list[tuple[np.ndarray, str, float]]] = {}
    for verts, kind, width in zip(shapes.data, shapes.shape_type, shapes.edge_width, strict=True):
        pts = np.asarray(verts, dtype=float) @ M.T + b
        key: Any = ()  # on every plane
        if k > 2:  # on the planes its vertices span
            lo = np.round(pts[:, first:n_img - 2].min(axis=0)).astype(int)
            hi = np.round(pts[:, first:n_img - 2].max(axis=0)).astype(int)
            lo, hi = np.maximum(lo, 0), np.minimum(hi, np.asarray(shape[first:n_img - 2]) - 1)
            if np.any(hi < lo):
                continue  # on no plane of the image
            key = (tuple(lo), tuple(hi))
        groups.setdefault(key, []).append((pts[:, -2:], str(kind), float(width) * stretch))
    rasters: dict[Any, np.ndarray] = {}

    def rasterise(items: list[tuple[np.ndarray, str, float]]) -> np.ndarray:
        layer = Shapes([p for p, _, _ in items], shape_type=[t for _, t, _ in items])
        return layer.to_labels(plane) != 0

    def raster(key: Any) -> np.ndarray:
        if key not in rasters:
            items = groups[key]
            filled = [it for it in items if it[1] not in _STROKES]
            out = rasterise(filled) if filled else np.zeros(plane, bool)
            strokes = [it for it in items if it[1] in _STROKES]
            for width in sorted({w for _, _, w in strokes}):  # napari draws a stroke one pixel wide: widen it
                out |= _thicken(rasterise([it for it in strokes if it[2] == width]), width)
            rasters[key] = out
        return rasters[key]

    def compute(index: tuple[int, ...]) -> np.ndarray:
        out = np.zeros(plane, bool)
        for key in groups:
            if key == () or _inside(index[first:], key):
                out |= raster(key)
        return out

    broadcast = n_img > 2 and set(groups) <= {()}
    return PlaneMasks(plane, compute, broadcast=broadcast, name=shapes.name)


def _inside(index: tuple[int, ...], box: tuple[tuple[int, ...], tuple[int, ...]]) -> bool:
    lo, hi = box
    return all(a <= i <= z for i, a, z in zip(index, lo, hi, strict=True))


def _thicken(thin: np.ndarray, width: float) -> np.ndarray:
    """The pixels within ``width / 2`` of a one-pixel stroke (round ends), computed on the stroke's bounding box."""
    from scipy import ndimage

    rows, cols = np.nonzero(thin)
    if rows.size == 0 or width <= 1:
        return thin
    out = np.zeros_like(thin)
    pad = int(np.ceil(width / 2)) + 1
    r0, r1 = max(0, rows.min() - pad), min(thin.shape[0], rows.max() + pad + 1)
    c0, c1 = max(0, cols.min() - pad), min(thin.shape[1], cols.max() + pad + 1)
    dist = ndimage.distance_transform_edt(~thin[r0:r1, c0:c1])
    out[r0:r1, c0:c1] = dist <= width / 2
    return out
