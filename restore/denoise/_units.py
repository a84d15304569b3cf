"""The driver's work in memory: an image as units (planes or volumes of one channel) in white Gaussian noise.

:func:`denoise_units` checks the values, puts the axes in the driver's order
(:attr:`._layout.Layout.order`), brings the data to white Gaussian noise
(the noise model's :meth:`~._noise_model.PhotonNoise.stabilise`), cuts it into
units along the leading axes and the channels (the opponent colour space for
three), has the method denoise each unit, and undoes all of that. The
method sees nothing but units: :class:`UnitMethod` is what it implements.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import numpy as np

from .._cache import call_scope
from .._progress import ProgressCallback, Steps
from .._validation import check_image, restore_dtype
from ..noise import noise_sample
from ._layout import _OPPONENT, Layout, _from_channels, _to_channels
from ._noise_model import NoiseModel


class UnitMethod(Protocol):
    """What a denoising method implements for the driver: itself, on one unit.

    Built by the method's public function with the settings of the whole
    image (its shape, the levels of a transform...), so that every unit and
    every Dask block is denoised alike whatever its own size.

    Attributes
    ----------
    needs_sigma : bool
        Whether :meth:`denoise` needs ``sigma`` (when False it gets None and
        no sigma is estimated).
    grid : tuple of int
        Per transformed axis (increasing): Dask blocks start on multiples of
        it from the image's origin (``2**levels`` for a wavelet transform,
        so that a block is decomposed as the same part of the whole).
    reach : tuple of int
        Per transformed axis: how far (samples) a result sample depends on
        input samples, i.e. the overlap Dask blocks need (the driver rounds
        it up to the grid).

    A method may set ``periodic = True``: it pads a unit to its grid
    (symmetrically) and treats it as periodic, so Dask blocks at the image's
    borders overlap periodically, as the whole would be treated.

    A method may set ``float32_volumes = True``: a 3-D grey unit of a float32
    image then comes as float32, not a float64 copy (a volume's 8 bytes a
    voxel), and the method reads it as float64 where it computes (its values
    are the same).

    A method may set ``reads_slabs = True``: it reads a 3-D grey unit only
    by indexing slabs of it (``unit[index]``, slices or one integer array
    along an axis, as :func:`restore.wavelet.wavelet_forward` reads), so
    that under a model that transforms the data (photon noise) the unit may
    come as a :class:`StabilisedVolume`, the input stabilised as it is read,
    instead of a float64 volume of the stabilised data (8 bytes a voxel).

    A method may also define ``denoise_channels(units, sigmas, var_maps,
    steps)``, the three channels of an opponent colour space (luminance
    first) denoised together, which the driver then calls instead of
    :meth:`denoise` on each (same steps, same arguments as lists).
    """

    needs_sigma: bool
    grid: tuple[int, ...]
    reach: tuple[int, ...]

    def steps(self, shape: tuple[int, ...], scaled: bool) -> int:
        """Progress steps :meth:`denoise` takes on a unit of this shape (``scaled``: var maps will be given)."""

    def denoise(self, unit: np.ndarray, sigma: float | None, var_map: np.ndarray | None, steps: Steps,
                channel: int) -> np.ndarray:
        """The denoised unit (float64, ``unit``'s shape); calls ``steps()`` exactly :meth:`steps` times in all.

        Parameters
        ----------
        unit : ndarray
            One channel of a 2-D plane or 3-D volume (the transformed axes,
            in increasing order), float64, C-contiguous, white Gaussian
            noise. Photon noise comes stabilised (deviation 1 where samples
            expect a few photons or more); to a method that ``reads_slabs``,
            a 3-D grey unit then comes as a :class:`StabilisedVolume`.
        sigma : float or None
            The noise's standard deviation (given, estimated on this unit,
            or 1 after stabilisation); None when :attr:`needs_sigma` is False.
        var_map : ndarray or None
            Under photon noise, the noise variance of each sample of ``unit``
            (below 1 on dark backgrounds); None when it is ``sigma**2`` everywhere.
        steps : restore._progress.Steps
            ``steps()`` after each step; it may raise :class:`restore.Cancelled`.
            ``steps.callback(n)`` gives a ``progress(done, total)`` for a
            sub-computation worth ``n`` steps.
        channel : int
            Which channel (of the opponent colour space for three): for settings given per channel.
        """


def prepare(arr: np.ndarray, layout: Layout, noise: NoiseModel, *, block: bool = False,
            exact: bool = False) -> tuple[np.ndarray, NoiseModel]:
    """The image in the driver's order and in white Gaussian noise, and its noise model resolved.

    Values checked (NaN, inf); integers read as :func:`skimage.util.img_as_float` reads them.
    ``block``: one block of a Dask array, whose noise model was estimated and
    checked on the whole (its own part may be dark: no check here).
    """
    x, noise = _resolved(arr, layout, noise, block=block, exact=exact)
    return _stabilised(x, noise), noise


def _resolved(arr: np.ndarray, layout: Layout, noise: NoiseModel, *, block: bool = False,
              exact: bool = False) -> tuple[np.ndarray, NoiseModel]:
    """:func:`prepare` but for the stabilisation: the image checked, in the driver's order, and the model resolved."""
    img, c_axis = check_image(arr, channel_axis=layout.c_axis, spatial=len(layout.sp_axes), exact=exact)
    x = np.transpose(img, layout.order)
    has_c = c_axis is not None
    seen = x
    if not noise.complete:  # estimated on the part the command line and the plugin estimate on too
        n_sp = len(layout.sp_axes)
        sample = noise_sample(x, axes=tuple(range(x.ndim - has_c - n_sp, x.ndim - has_c)),
                              channel_axis=-1 if has_c else None)
        seen = np.moveaxis(sample, 0, -1) if has_c else sample
    noise = noise.resolved(seen, has_channels=has_c, check=not block, dtype=None if block else arr.dtype)
    return x, noise


# Float64 bytes of the data stabilised (or brought back) at once: the transform's temporaries (a few arrays of the
# chunk's size) stay this small instead of a few volumes each.
_STABILISE_CHUNK_BYTES = 8 << 20
# ... of a slab read through the stabilisation (:class:`StabilisedVolume`, a slab of the transform's 8 MB): its
# temporaries stay small against the slab itself, which the transform holds with the volumes it works on.
_SLAB_CHUNK_BYTES = 1 << 20


def _row_chunks(shape: tuple[int, ...], chunk_bytes: int = _STABILISE_CHUNK_BYTES) -> list[slice]:
    """Slices along the first axis of an array of ``shape``, about ``chunk_bytes`` of float64 each."""
    n = int(shape[0]) if shape else 1
    per_row = 8 * int(np.prod(shape[1:], dtype=np.int64))
    step = max(1, chunk_bytes // max(per_row, 1))
    return [slice(i, min(i + step, n)) for i in range(0, n, step)]


def _stabilised(x: np.ndarray, noise: NoiseModel, chunk_bytes: int = _STABILISE_CHUNK_BYTES) -> np.ndarray:
    """``noise.stabilise(x)``, a chunk at a time: ``x`` itself when the model keeps the data as they are.

    The stabilisation is elementwise (the Anscombe transform), so chunks give the same values as the whole.
    """
    if x.ndim == 0:
        return noise.stabilise(x)
    out = None
    for sl in _row_chunks(x.shape, chunk_bytes):
        chunk = x[sl]
        part = noise.stabilise(chunk)
        if part is chunk:
            return x  # kept as it is (Gaussian noise)
        if out is None:
            out = np.empty(x.shape, dtype=part.dtype)
        out[sl] = part
    return noise.stabilise(x) if out is None else out


def _unstabilise_in_place(y: np.ndarray, noise: NoiseModel) -> np.ndarray:
    """``noise.unstabilise(y)`` written into ``y`` (float64, not the caller's), a chunk at a time (elementwise)."""
    for sl in _row_chunks(y.shape):
        chunk = y[sl]
        part = noise.unstabilise(chunk)
        if part is chunk:
            return y  # kept as it is (Gaussian noise)
        chunk[...] = part
    return y


class StabilisedVolume:
    """A volume in white Gaussian noise, stabilised as it is read: ``vol[index]`` is ``noise.stabilise(source[index])``.

    What a :class:`UnitMethod` with ``reads_slabs`` gets under photon noise:
    the method reads its slabs, each stabilised when read (the same values as
    the volume stabilised whole, the transform being elementwise), and no
    float64 volume of the stabilised data is held. ``np.asarray`` of it is the
    whole volume stabilised (a volume's memory: for the methods that do not read it by slabs).
    """

    def __init__(self, source: np.ndarray, noise: NoiseModel) -> None:
        self.source = source
        self.noise = noise
        self.shape = source.shape
        self.ndim = source.ndim
        self.dtype = np.dtype(np.float64)

    def __getitem__(self, index) -> np.ndarray:
        return np.asarray(_stabilised(self.source[index], self.noise, _SLAB_CHUNK_BYTES), dtype=np.float64)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        return np.asarray(_stabilised(self.source, self.noise), dtype=dtype or np.float64)


def unit_channels(unit: np.ndarray, layout: Layout, noise: NoiseModel, steps: Steps, *, need_sigma: bool,
                  keep_float32: bool = False) -> Iterator[tuple[int, np.ndarray, float | None, np.ndarray | None]]:
    """``(channel, data, sigma, var_map)`` of each channel of one unit (channels last in ``unit``).

    ``sigma`` (None unless ``need_sigma``) is given or estimated on the channel
    (one step each when estimated); ``var_map`` is the noise variance of each
    sample when it varies (photon noise), else None. ``keep_float32``: a
    float32 grey unit is given as it is (:attr:`UnitMethod.float32_volumes`).
    """
    channels = _to_channels(unit, -1 if layout.c_axis is not None else None, keep_float32)
    var_maps = noise.var_maps(channels, len(layout.sp_axes))
    sigmas: list[float | None] = [None] * len(channels)
    if need_sigma:
        sigmas = noise.sigmas_of(channels)
        if noise.estimates_sigma:
            steps(len(channels))
    yield from zip(range(len(channels)), channels, sigmas, var_maps, strict=True)


def sigma_steps(noise: NoiseModel, need_sigma: bool) -> int:
    """Progress steps of :func:`unit_channels` per channel: one when the channel's sigma is estimated."""
    return int(noise.estimates_sigma and need_sigma)


@call_scope()
def denoise_units(arr: np.ndarray, layout: Layout, noise: NoiseModel, method: UnitMethod,
                  progress: ProgressCallback | None, *, block: bool = False) -> np.ndarray:
    """The image denoised unit by unit by ``method``: the input's shape, float dtype; ``block`` as :func:`prepare`."""
    x, noise = _resolved(arr, layout, noise, block=block)
    n_sp, has_c = len(layout.sp_axes), layout.c_axis is not None
    # a 3-D grey unit read by slabs: each unit is stabilised whole only for its sigma and variance map, then read
    # through the stabilisation (no float64 volume of it while it is denoised, and none of the whole stack)
    by_slabs = bool(getattr(method, "reads_slabs", False)) and n_sp == 3 and not has_c
    source = x
    if not by_slabs:
        x = _stabilised(x, noise)
    lead = x.shape[:x.ndim - n_sp - has_c]
    shape = tuple(int(s) for s in x.shape[len(lead):len(lead) + n_sp])
    need_sigma = method.needs_sigma
    per_channel = method.steps(shape, noise.scaled) + sigma_steps(noise, need_sigma)
    steps = Steps(progress, int(np.prod(lead, dtype=np.int64)) * layout.n_channels * per_channel, start=True)
    # one unit: its result is the output (no second volume of float64 for it), unless it is the input's memory
    out = None if not lead else np.empty(x.shape, dtype=np.float64)
    opponent = layout.c_axis is not None and layout.n_channels == len(_OPPONENT)
    joint = getattr(method, "denoise_channels", None) if opponent else None
    keep_float32 = bool(getattr(method, "float32_volumes", False)) and n_sp == 3
    for idx in np.ndindex(*lead):
        raw = x[idx]
        unit = _stabilised(raw, noise) if by_slabs else raw
        chans = list(unit_channels(unit, layout, noise, steps, need_sigma=need_sigma, keep_float32=keep_float32))
        if unit is not raw:  # read through the stabilisation from now on: the stabilised unit is freed
            chans = [(c, StabilisedVolume(raw, noise), s, v) for c, _, s, v in chans]
        del unit, raw
        if joint is not None:
            _, units, sigmas, var_maps = zip(*chans, strict=True)
            den = joint(list(units), list(sigmas), list(var_maps), steps)
            del units, var_maps
        else:
            den = [method.denoise(data, sigma, var_map, steps, c) for c, data, sigma, var_map in chans]
        del chans  # the unit's data and variance maps: not while the result is brought back
        den = _from_channels(den, has_c)
        if out is not None:
            out[idx] = den
        else:
            out = (np.array if np.may_share_memory(den, source) else np.asarray)(den, dtype=np.float64)
        del den
    out = np.transpose(_unstabilise_in_place(out, noise), np.argsort(layout.order))
    return restore_dtype(out, arr.dtype)
