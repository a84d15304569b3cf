"""The non-local tree method: groups of similar patches coded jointly under a tree norm, then Wiener."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._nonlocal import NonlocalSettings, nonlocal_denoise, nonlocal_grid, nonlocal_reach, nonlocal_steps
from .._progress import ProgressCallback, Steps
from .._validation import check_number
from ..noise import NoiseEstimate
from ._driver import check_call, drive
from ._layout import Layout


@dataclass(frozen=True)
class NonlocalTree:
    """The non-local tree method on one unit, for the driver (:class:`._units.UnitMethod`)."""

    settings: NonlocalSettings  # resolved for the units' dimension
    strength: float
    n_axes: int  # 2 (planes) or 3 (volumes)

    needs_sigma = True

    @classmethod
    def checked(cls, layout: Layout, shape: tuple[int, ...], *, strength) -> NonlocalTree:
        """The method's settings checked for an image of ``shape`` and ``layout`` (no pixel read)."""
        strength = check_number("strength", strength, min=0.0, strict=True)
        n_axes = len(layout.sp_axes)
        settings = NonlocalSettings().resolved(n_axes)
        sides = tuple(int(shape[a]) for a in layout.sp_axes)
        patch = max(settings.patch, settings.patch2)
        if min(sides) < patch:
            raise ValueError(f"image must be at least {patch} samples along each of its {n_axes} "
                             f"transformed axes (the patch side), got {sides} (image shape {tuple(shape)})")
        return cls(settings, strength, n_axes)

    @property
    def grid(self) -> tuple[int, ...]:
        """Blocks start on the grids of reference patches of every pass: a block has the references of the whole."""
        return (nonlocal_grid(self.n_axes, self.settings),) * self.n_axes

    @property
    def reach(self) -> tuple[int, ...]:
        """Both stages' matching windows and patches (:func:`restore._nonlocal.nonlocal_reach`)."""
        return nonlocal_reach(self.n_axes, self.settings)

    def steps(self, shape: tuple[int, ...], scaled: bool) -> int:
        """Progress steps on a unit of this shape: the chunks of both stages."""
        return nonlocal_steps(tuple(int(s) for s in shape), self.settings)

    def denoise(self, unit: np.ndarray, sigma: float | None, var_map: np.ndarray | None, steps: Steps,
                channel: int) -> np.ndarray:
        """One channel of one plane or volume in white Gaussian noise of deviation ``sigma``.

        Under photon noise the stabilised data has unit variance (less on
        dark backgrounds, where ``var_map`` says so): the method takes it as
        uniform, as BM3D and BM4D do after the Anscombe transform.
        """
        n = self.steps(unit.shape, var_map is not None)
        if not sigma or sigma <= 0:  # no noise (a constant image): nothing to remove
            steps(n)
            return np.array(unit, dtype=np.float64)
        return nonlocal_denoise(unit, None, self.strength * float(sigma), settings=self.settings,
                                progress=steps.callback(n))

    def denoise_channels(self, units: list[np.ndarray], sigmas: list[float | None],
                         var_maps: list[np.ndarray | None], steps: Steps) -> list[np.ndarray]:
        """The three channels of one unit in the opponent colour space, denoised in shared groups.

        As CBM3D: patches are matched on the first channel (the luminance)
        only, and every channel is shrunk and filtered in the same groups,
        each with its own sigma: the colour differences, low in signal, are
        poor guides to their own matches. The driver calls it instead of
        :meth:`denoise` on each channel when there are three (other
        channels are not a luminance and its colour differences). Takes the
        steps of :meth:`denoise` on each channel. A channel without noise
        comes back as it is; when the first one has none, the others are
        denoised each on its own.
        """
        n = self.steps(units[0].shape, var_maps[0] is not None)
        noisy = [c for c, s in enumerate(sigmas) if s and s > 0]
        if not noisy or noisy[0] != 0:
            return [self.denoise(u, s, v, steps, c)
                    for c, (u, s, v) in enumerate(zip(units, sigmas, var_maps, strict=True))]
        sig = np.array([self.strength * float(sigmas[c]) for c in noisy])
        den = nonlocal_denoise(np.stack([units[c] for c in noisy]), None, sig, settings=self.settings,
                               progress=steps.callback(n * len(noisy)), channels=True)
        steps(n * (len(units) - len(noisy)))
        out = [np.array(u, dtype=np.float64) for u in units]
        for i, c in enumerate(noisy):
            out[c] = den[i]
        return out


def denoise_nonlocal_tree(
    image: ArrayLike,
    *,
    sigma: float | Sequence[float] | None = None,
    noise: str | NoiseEstimate = "auto",
    gain: float | None = None,
    channel_axis: int | None = None,
    axes: Sequence[int] | None = None,
    strength: float = 1.0,
    progress: ProgressCallback | None = None,
    sliced_axes: Sequence[int] = (),
) -> NDArray[np.floating]:
    r"""Denoise an image or a volume by coding groups of similar patches jointly under a tree norm.

    Non-local tree sparsity (after Mairal, Bach, Ponce, Sapiro and
    Zisserman's simultaneous sparse coding, ICCV 2009, in BM3D's two-stage
    scheme): around every fourth pixel (third voxel), the 16 patches of
    8 x 8 (cubes of 4 x 4 x 4 in 3-D) most similar to it within a window
    are grouped, each transformed by an orthonormal Haar transform whose
    coefficients form a quad-tree (octree) and the group by a Haar
    transform across its patches; the group is shrunk by the prox of a tree
    norm (tree-l2 on planes, Donoho's tree-l0 on volumes) in which a tree
    node owns its coefficient in the patches of a band of the group
    (:func:`restore.prox` on :func:`restore._nonlocal.group_tree`), and the
    patches are put back with weights. A second stage matches on that
    estimate and applies the empirical Wiener filter its groups give (in a
    DCT; groups of 16 cubes of 5 x 5 x 5 in 3-D; in 2-D, patches of 8 x 8
    and, where that estimate is smooth at the noise's scale, of 11 x 11,
    which average flat surfaces better, blended pixel by pixel). The best
    picture of the library, at a few times the cost of
    :func:`denoise_wavelet_tree`.

    Parameters
    ----------
    image : ndarray or dask.array.Array
        As for :func:`denoise_wavelet_tree`: planes (M, N), stacks of them
        along leading axes, channels along ``channel_axis``, volumes with
        three ``axes``; integer images are read in [0, 1]
        (:func:`skimage.util.img_as_float`), floats neither rescaled nor
        clipped; the result has the input's float dtype (float64 for
        integers). A Dask array gives a lazy Dask array computed in
        overlapping blocks. Each transformed axis needs at least a patch
        (8 samples in 2-D, 5 in 3-D).
    sigma : float or sequence of float, optional
        Standard deviation of the noise, in image units (one value, or one
        per channel); with ``noise='poisson-gaussian'``, the read noise.
        Estimated as :func:`denoise_wavelet_tree` estimates it when None.
    noise : {'auto', 'gaussian', 'poisson-gaussian'} or NoiseEstimate, default 'auto'
        The noise model, as for :func:`denoise_wavelet_tree`: ``'auto'``
        lets the image's noise-level function choose (once, on the whole
        image; logged on the ``restore.denoise`` logger), a
        :class:`restore.NoiseEstimate` from :func:`restore.estimate_noise`
        is used as is (photon noise is denoised after the generalized
        Anscombe transform).
    gain : float, optional
        Poisson-Gaussian noise: image units per photon; estimated when
        None.
    channel_axis : int, optional
        Axis of the colour channels; three are denoised in an orthonormal
        opponent colour space (luminance and two colour differences), in
        groups matched on the luminance and shared by the colour differences
        (as CBM3D). Other numbers of channels are denoised one by one.
    axes : sequence of int, optional
        The spatial axes, two (default: the last two) or three (a volume).
    strength : float, default 1.0
        Multiplies the noise level the method removes: above 1 smooths
        more, below 1 keeps more detail (and noise).
    progress : callable, optional
        ``progress(done, total)`` after each chunk of work; raising in it
        (e.g. :class:`restore.Cancelled`) stops the call within a chunk.
        Not available for Dask arrays.
    sliced_axes : sequence of int, optional
        Transformed axes a viewer shows one slice at a time (Dask arrays):
        blocks keep to the input's chunks along them.

    Returns
    -------
    ndarray or dask.array.Array
        The denoised image, the shape of ``image``.

    See Also
    --------
    denoise_wavelet_tree : the fast method (a fraction of the time, about
        1.5 dB lower on photographs).

    Examples
    --------
    >>> import numpy as np
    >>> from restore import denoise_nonlocal_tree
    >>> rng = np.random.default_rng(0)
    >>> clean = np.kron(rng.random((8, 8)), np.ones((8, 8)))
    >>> noisy = clean + 0.1 * rng.standard_normal(clean.shape)
    >>> out = denoise_nonlocal_tree(noisy, sigma=0.1)
    >>> bool(np.mean((out - clean) ** 2) < 0.5 * np.mean((noisy - clean) ** 2))  # most of the noise removed
    True
    """
    arr, layout, model = check_call(image, channel_axis=channel_axis, axes=axes, noise=noise, sigma=sigma, gain=gain,
                                    progress=progress, sliced_axes=sliced_axes)
    method = NonlocalTree.checked(layout, arr.shape, strength=strength)
    return drive(arr, layout, model, method, progress)
