"""Denoise widget: wavelet tree shrinkage (fast) or non-local tree sparsity (best quality) of Image layers.

The logic (:class:`DenoiseParams`, :func:`denoise_plane`, the tasks
:func:`denoise_task`, :func:`preview_task` and :func:`estimate_task`) is plain
NumPy over the public ``restore`` API and runs without Qt;
:class:`DenoiseWidget` is the thin magicgui adapter that napari docks
(manifest command ``restore-tree.denoise``).
"""

from __future__ import annotations

import itertools
from collections.abc import Generator, Hashable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from magicgui.widgets import CheckBox, ComboBox, Container, FloatSpinBox, Label, PushButton, SpinBox

import restore
from restore.noise import ESTIMATE_VOXELS

from ._common import (
    LruCache,
    as_float,
    check_image_layer,
    current_plane_index,
    full_resolution,
    holds_volumes,
    is_lazy,
    layer_kwargs,
    library_default,
    like_input,
    offset_translate,
    plane_indices,
    plane_shape,
    preview_region,
    run_sync,
    split_alpha,
    unit_indices,
    with_alpha,
)
from ._runner import (
    PROGRESS_STEPS,
    Ahead,
    Control,
    Job,
    Joined,
    Output,
    Pending,
    Progress,
    Task,
    ensure_warm,
    is_warm,
)
from ._widgets import RestoreWidget, _camera

if TYPE_CHECKING:
    import napari

    from restore.noise import NoiseEstimate

__all__ = [
    "LAM_MODES",
    "METHODS",
    "WAVELETS",
    "Busy",
    "DenoiseParams",
    "DenoiseWidget",
    "Denoised",
    "LamInfo",
    "MethodInfo",
    "NoiseInfo",
    "Source",
    "busy_until_progress",
    "compute_blocks",
    "denoise_plane",
    "denoise_task",
    "estimate_task",
    "first_view",
    "format_info",
    "lazy_result",
    "photon_model",
    "preview_task",
    "shown_blocks",
]

#: Orthogonal wavelets offered (the library accepts any orthogonal PyWavelets name).
WAVELETS = ("haar", "db2", "db3", "db4", "db5", "db6", "db7", "db8",
            "sym4", "sym5", "sym6", "sym7", "sym8", "coif1", "coif2", "coif3")
#: Ways of setting lam: Stein's unbiased risk estimate, the calibrated rule, a number.
LAM_MODES = ("sure", "rule", "manual")
_MODE_LABELS = {"sure": "SURE", "rule": "rule", "manual": "manual"}
#: The user's words for the library's noise models.
NOISE_LABELS = {"auto": "auto (from the image)", "gaussian": "Gaussian", "poisson-gaussian": "Poisson-Gaussian"}
WARM_KEY = "denoise"
#: The denoising methods offered, in the user's words: the library's wavelet tree (the default) and non-local tree.
METHODS = {"wavelet": "wavelet tree: fast", "nonlocal": "non-local tree: best quality"}
#: What a result layer's name says of each method (the wavelet method's names its penalty).
METHOD_TAGS = {"nonlocal": "non-local"}
#: The costs that split a unit's progress bar between choosing lam and denoising, in units of one cycle spin of
#: the tree stage: a choice (SURE or the rule: each transforms once) costs about half a spin, and the denoising
#: about this base (its Wiener stage and tree pilot) plus one per spin, with tree_l2.
LAM_CHOICE_COST_IN_SPINS = 0.5
DENOISE_BASE_COST_IN_SPINS = 2.5


# ---------------------------------------------------------------------------
# Logic (no Qt)
# ---------------------------------------------------------------------------


def _library_default(name: str) -> Any:
    """The default of a parameter of :func:`restore.denoise_wavelet_tree`."""
    return library_default(restore.denoise_wavelet_tree, name)


def _default(name: str) -> Any:
    return field(default_factory=lambda: _library_default(name))


@dataclass(frozen=True)
class DenoiseParams:
    """Settings of the denoise widget.

    ``sigma`` is None for an estimate (per plane, or per volume); with
    ``noise="poisson-gaussian"`` it is the Gaussian read noise and ``gain``
    the image units per photon (None: both estimated once per layer). With
    ``lam_mode`` "sure" or "rule" the lam used is ``multiplier`` times the
    automatic choice (per channel); with "manual" it is ``lam`` (absolute,
    the layer's units; with Poisson-Gaussian noise, the stabilised units).
    ``volume`` denoises the last three spatial axes
    together (``axes`` of the library). ``method`` "nonlocal" calls
    :func:`restore.denoise_nonlocal_tree` instead, which sets lam itself
    from sigma: ``multiplier`` is then its ``strength``, and the wavelet,
    penalty, lam and shifts do not apply. Defaults are the library's.
    """

    wavelet: str = _default("wavelet")
    penalty: str = _default("penalty")
    sigma: float | None = None
    lam_mode: str = "sure"
    multiplier: float = 1.0
    lam: float = 0.0
    cycle_spins: int = _default("cycle_spins")
    penalize_approx: bool = _default("penalize_approx")
    volume: bool = False
    noise: str = _default("noise")
    gain: float | None = None
    method: str = "wavelet"

    def __post_init__(self) -> None:
        from restore.denoise import CONVEX_PENALTIES
        from restore.noise import NOISE_CHOICES

        if self.method not in METHODS:
            raise ValueError(f"unknown method {self.method!r}; supported: {', '.join(METHODS)}")
        if self.lam_mode not in LAM_MODES:
            raise ValueError(f"Invalid lam mode: {self.lam_mode!r}; supported modes are {', '.join(LAM_MODES)}")
        if self.lam_mode == "sure" and self.penalty not in CONVEX_PENALTIES:
            raise ValueError(f"SURE needs a convex penalty ({', '.join(CONVEX_PENALTIES)}), not {self.penalty!r}: "
                             "use the rule or a manual lam")
        if not np.isfinite(self.multiplier) or self.multiplier < 0:
            raise ValueError(f"the strength multiplier must be >= 0, got {self.multiplier!r}")
        if self.noise not in NOISE_CHOICES:
            raise ValueError(f"unknown noise model {self.noise!r}; supported: {', '.join(NOISE_CHOICES)}")
        if self.gain is not None and not (np.isfinite(self.gain) and self.gain > 0):
            raise ValueError(f"the gain must be > 0 (image units per photon), or blank to estimate it; "
                             f"got {self.gain!r}")

    @property
    def whole_units(self) -> bool:
        """Whether each plane or volume goes to the library in one call (volumes, Poisson-Gaussian noise).

        The plane-by-plane Gaussian path instead chooses lam per plane
        first (:func:`restore.choose_lam`), so that the info line can show
        it, it is cached per plane, and the preview answers with the rule
        while SURE runs. The non-local method has no lam to show: one call.
        """
        return self.volume or self.noise != "gaussian" or self.method != "wavelet"

    @property
    def estimates_noise(self) -> bool:
        """Whether the layer's noise is estimated on the whole layer: its model ('auto'), or gain and read noise."""
        if self.noise == "auto":
            return self.sigma is None  # a sigma given alone is Gaussian noise's, as in the library
        return self.noise == "poisson-gaussian" and (self.gain is None or self.sigma is None)

    def for_noise(self, noise: NoiseInfo | None) -> DenoiseParams:
        """The settings with 'auto' as the layer's estimate chose (:func:`photon_model`: None is Gaussian noise)."""
        if self.noise != "auto":
            return self
        return replace(self, noise="gaussian" if noise is None else "poisson-gaussian")

    @property
    def n_spatial(self) -> int:
        """Spatial axes of a unit: 3 for a volume, 2 for a plane."""
        return 3 if self.volume else 2

    def lam_key(self) -> tuple[Hashable, ...]:
        """The settings that the automatic lam depends on (not multiplier nor cycle spins)."""
        return (self.lam_mode, self.sigma, self.penalty, self.wavelet, self.penalize_approx)

    @property
    def function(self) -> Any:
        """The library's function of the method: :func:`restore.denoise_wavelet_tree` or ``denoise_nonlocal_tree``."""
        return restore.denoise_nonlocal_tree if self.method == "nonlocal" else restore.denoise_wavelet_tree

    @property
    def tag(self) -> str:
        """What the result's name says of the settings: the penalty (wavelet method), else the method."""
        return METHOD_TAGS.get(self.method, self.penalty)

    def fast(self) -> DenoiseParams:
        """The wavelet method at its defaults with the rule's lam: the preview's stand-in while another method runs."""
        return DenoiseParams(sigma=self.sigma, lam_mode="rule", multiplier=self.multiplier, volume=self.volume,
                             noise=self.noise, gain=self.gain)

    def library_kwargs(self, noise: NoiseInfo | None) -> dict[str, Any]:
        """Keyword arguments of :attr:`function` for one unit (no image, no channel axis)."""
        if self.method != "wavelet":
            kwargs: dict[str, Any] = {"strength": float(self.multiplier), "noise": self.noise, "sigma": self.sigma}
            if noise is not None:
                kwargs.update(gain=noise.gain, sigma=noise.sigma)
            return kwargs
        manual = self.lam_mode == "manual"
        kwargs = {
            "lam": float(self.lam) if manual else self.lam_mode, "strength": 1.0 if manual else float(self.multiplier),
            "penalty": self.penalty, "wavelet": self.wavelet, "penalize_approx": self.penalize_approx,
            "cycle_spins": int(self.cycle_spins), "noise": self.noise, "sigma": self.sigma}
        if noise is not None:  # the layer's photon model, estimated once, so that every unit shares it
            kwargs.update(gain=noise.gain, sigma=noise.sigma)
        return kwargs


@dataclass(frozen=True)
class LamInfo:
    """What was used on one plane: lam and sigma per channel, and how lam was set.

    For colour planes the channels are those of the library's opponent colour
    space. ``provisional`` marks a preview made with the rule while SURE runs.
    """

    lam: tuple[float, ...]
    sigma: tuple[float, ...]
    mode: str
    multiplier: float = 1.0
    sigma_given: bool = False
    provisional: bool = False


@dataclass(frozen=True)
class NoiseInfo:
    """The Poisson-Gaussian model of a layer.

    ``gain`` is in image units per photon, ``sigma`` is the read noise; the
    flags say whether each was estimated from the image.
    """

    gain: float
    sigma: float
    gain_estimated: bool
    sigma_estimated: bool
    estimate: NoiseEstimate | None = None  # the library's, when one was made

    def record(self) -> dict[str, Any]:
        """What the result's metadata keeps."""
        record = {"noise": "poisson-gaussian", "gain": self.gain, "read_noise_sigma": self.sigma,
                  "gain_estimated": self.gain_estimated, "sigma_estimated": self.sigma_estimated}
        if self.estimate is not None:
            record["noise_estimate"] = self.estimate.describe()
            if self.sigma_estimated and self.estimate.sigma_max is not None:  # not determined by the image
                record["read_noise_sigma_max"] = self.estimate.sigma_max
        return record

    def text(self) -> str:
        """One line for the user: the library's (:meth:`restore.NoiseEstimate.describe`) when all was estimated."""
        if self.estimate is not None and self.gain_estimated and self.sigma_estimated:
            return self.estimate.describe()

        def tag(estimated: bool) -> str:
            return "estimated" if estimated else "given"

        return (f"gain {self.gain:.4g} per photon ({tag(self.gain_estimated)}), read noise \u03c3 {self.sigma:.4g} "
                f"({tag(self.sigma_estimated)})")


@dataclass(frozen=True)
class MethodInfo:
    """What a unit of the non-local method used (it sets lam itself from sigma, scaled by ``strength``).

    ``provisional`` marks a preview made by the fast wavelet method while
    ``method`` runs.
    """

    method: str
    strength: float = 1.0
    sigma: float | None = None  # given; None: estimated by the library per plane (volume) and channel
    provisional: bool = False

    def text(self, noise: NoiseInfo | None = None, unit: str = "plane") -> str:
        """One line for the user."""
        name = METHODS[self.method].split(":")[0]
        if self.provisional:
            return f"the fast wavelet tree for now; the {name} is running\u2026"
        sigma = noise.text() if noise is not None else (
            f"\u03c3 = {self.sigma:.4g} (given)" if self.sigma is not None else f"\u03c3 estimated per {unit}")
        return f"{name} \u00b7 {sigma} \u00b7 strength \u00d7 {self.strength:.3g}"


def denoise_plane(control: Control, plane: Any, params: DenoiseParams, rgb: bool, cache: LruCache | None = None,
                  key: Hashable | None = None, span: tuple[float, float] = (0.0, 1.0), text: str = "",
                  wiener: bool = True) -> Generator[Progress | None, None, tuple[np.ndarray, LamInfo]]:
    """Denoise one plane (2-D, or 2-D + colour when ``rgb``) under Gaussian noise, reporting progress on ``span``.

    A generator for a task: it yields the library's progress and returns
    ``(denoised float plane, LamInfo)``. Alpha is kept as is. The automatic
    lam is taken from ``cache`` under ``key`` when there. ``wiener`` False:
    the tree stage alone (a provisional preview's quick answer).
    """
    colour, alpha = split_alpha(as_float(plane), rgb)
    channel_axis = -1 if rgb else None
    method = "rule" if params.lam_mode == "manual" else params.lam_mode
    full_key = None if key is None else (key, replace(params, lam_mode=method).lam_key())
    choice = cache.get(full_key) if cache is not None and full_key is not None else None
    f0, f1 = span
    mid = f0 + (f1 - f0) * (_choice_share(replace(params, lam_mode=method)) if choice is None else 0.0)
    if choice is None:
        # the plane's sigma, estimated once: a quick answer's (the rule's) serves SURE's after it, the same values
        sigma_key = None if key is None or params.sigma is not None else (key, "sigma")
        sigma = params.sigma if sigma_key is None or cache is None else cache.get(sigma_key)
        choice = yield from control.call(
            restore.choose_lam, colour, noise="gaussian", sigma=sigma, penalty=params.penalty, method=method,
            wavelet=params.wavelet, penalize_approx=params.penalize_approx, channel_axis=channel_axis,
            span=(f0, mid), text=text)
        if cache is not None and full_key is not None:
            cache.set(full_key, choice)
            if sigma_key is not None:
                cache.set(sigma_key, list(choice.sigma))
    if params.lam_mode == "manual":
        base, mult = (float(params.lam),) * len(choice.lam), 1.0
    else:
        base, mult = tuple(choice.lam), params.multiplier
    lam = tuple(mult * v for v in base)  # what the tree stage uses, shown and recorded
    info = LamInfo(lam=lam, sigma=tuple(choice.sigma), mode=params.lam_mode, multiplier=mult,
                   sigma_given=params.sigma is not None)
    out = yield from control.call(  # the chosen sigma (given or estimated once) for the Wiener stage too
        restore.denoise_wavelet_tree, colour, noise="gaussian", lam=list(base), strength=mult, sigma=list(choice.sigma),
        penalty=params.penalty, wavelet=params.wavelet, penalize_approx=params.penalize_approx,
        cycle_spins=int(params.cycle_spins), channel_axis=channel_axis, wiener=wiener,
        span=(mid, f1), text=text)
    return with_alpha(out, alpha), info


def denoise_unit(control: Control, unit: Any, params: DenoiseParams, rgb: bool, noise: NoiseInfo | None,
                 span: tuple[float, float] = (0.0, 1.0), text: str = ""
                 ) -> Generator[Progress | None, None, tuple[np.ndarray, LamInfo | MethodInfo | None]]:
    """Denoise one plane or volume in one library call (:meth:`DenoiseParams.whole_units`); alpha kept as is.

    The non-local method: one call, and a :class:`MethodInfo`.

    Returns ``(denoised, LamInfo)``: an automatic lam is chosen first
    (:func:`restore.choose_lam`, the choice ``denoise_wavelet_tree`` would
    make inside), so that the numbers used can be shown and recorded, and
    scaled by the strength. With a manual lam the info holds it (sigma:
    the one given, or none when estimated inside the library).
    """
    colour, alpha = split_alpha(as_float(unit), rgb)
    axes = tuple(range(params.n_spatial))  # a unit holds its spatial axes first, then colour
    kwargs = params.library_kwargs(noise)
    if params.method != "wavelet":
        out = yield from control.call(params.function, colour, axes=axes, channel_axis=-1 if rgb else None, **kwargs,
                                      span=span, text=text)
        return with_alpha(out, alpha), MethodInfo(params.method, params.multiplier, params.sigma)
    n_channels = colour.shape[-1] if rgb else 1
    if params.lam_mode != "manual":
        f0, f1 = span
        mid = f0 + (f1 - f0) * _choice_share(params)
        choice = yield from control.call(
            restore.choose_lam, colour, axes=axes, channel_axis=-1 if rgb else None, method=params.lam_mode,
            **{k: v for k, v in kwargs.items() if k not in ("lam", "cycle_spins", "strength")}, span=(f0, mid),
            text=text)
        kwargs["lam"], span = choice, (mid, f1)  # the library's strength scales it (and the Wiener stage)
        info = LamInfo(lam=tuple(params.multiplier * v for v in choice.lam), sigma=tuple(choice.sigma),
                       mode=params.lam_mode,
                       multiplier=params.multiplier, sigma_given=params.sigma is not None or noise is not None)
    else:
        sigma = (1.0,) * n_channels if params.noise != "gaussian" else (
            (float(params.sigma),) * n_channels if params.sigma is not None else ())
        info = LamInfo(lam=(float(params.lam),) * n_channels, sigma=sigma, mode="manual",
                       sigma_given=params.sigma is not None or noise is not None)
    out = yield from control.call(restore.denoise_wavelet_tree, colour, axes=axes,
                                  channel_axis=-1 if rgb else None, **kwargs, span=span, text=text)
    return with_alpha(out, alpha), info


def _choice_share(params: DenoiseParams) -> float:
    """The part of a unit's progress spent choosing lam: about its share of the time."""
    return LAM_CHOICE_COST_IN_SPINS / (LAM_CHOICE_COST_IN_SPINS + DENOISE_BASE_COST_IN_SPINS + params.cycle_spins)


@dataclass(frozen=True)
class Source:
    """An input layer as the worker sees it: its data and how to read it (the layer itself stays for the GUI).

    ``data`` is the full-resolution array; ``levels`` every level of a
    multiscale layer (else just ``data``). Dask arrays are never loaded whole.
    """

    layer: Any
    data: Any
    rgb: bool
    dtype: np.dtype
    key: Hashable
    levels: tuple[Any, ...] = ()
    multiscale: bool = False

    @classmethod
    def of(cls, layer: Any, multiscale_ok: bool = False) -> Source:
        """Read what the worker needs from ``layer`` (GUI thread); multiscale layers only with ``multiscale_ok``."""
        check_image_layer(layer, multiscale_ok=multiscale_ok)
        multiscale = bool(getattr(layer, "multiscale", False))
        levels = tuple(layer.data) if multiscale else (layer.data,)
        return cls(layer, levels[0], bool(layer.rgb), np.dtype(layer.dtype), (layer.unique_id, id(layer.data)),
                   levels, multiscale)

    @property
    def lazy(self) -> bool:
        """Whether the result is lazy (Dask or multiscale input): computed by napari as it shows it."""
        return self.multiscale or is_lazy(self.data)

    @property
    def planes(self) -> list[tuple[int, ...]]:
        """Indices of its planes."""
        return plane_indices(np.shape(self.data), self.rgb)

    def units(self, n_spatial: int) -> list[tuple[int, ...]]:
        """Indices of its planes (``n_spatial`` 2) or volumes (3)."""
        return unit_indices(np.shape(self.data), self.rgb, n_spatial)

    def check(self, params: DenoiseParams) -> None:
        """Refuse what these settings cannot do on this layer, before any work.

        Volume mode needs three spatial axes.
        """
        if params.volume and not holds_volumes(np.shape(self.data), self.rgb):
            raise ValueError(f"layer {self.layer.name!r} has shape {np.shape(self.data)}: a volume needs 3 "
                             "spatial axes of 2 samples or more; choose 'plane by plane'")


@dataclass(frozen=True)
class Denoised:
    """The result of one input layer and what was used.

    ``data`` is in the input's dtype (a list of levels when multiscale, lazy
    for Dask input); ``infos`` holds a :class:`LamInfo` per plane on the
    Gaussian plane path, ``noise`` the photon model.
    """

    source: Source
    data: Any
    infos: list[LamInfo]
    noise: NoiseInfo | None = None


def _noise_sample(source: Source, n_spatial: int) -> np.ndarray:
    """What the library estimates the layer's noise on (:func:`restore.noise_sample`), in the layer's float units.

    Colour channels (alpha left out) as leading planes, as
    :func:`restore.estimate_noise` reads a stack. Of a layer over 4 M voxels
    a channel (and of a lazy one) a central part of at most that: a few
    chunks are read, never more.
    """
    data = source.data
    n_sp = len(np.shape(data)) - source.rgb
    if source.rgb and np.shape(data)[-1] == 4:
        data = data[..., :3]  # alpha is no image (:func:`split_alpha`); lazy stays lazy
    sample = restore.noise_sample(data, axes=tuple(range(n_sp - n_spatial, n_sp)),
                                  channel_axis=-1 if source.rgb else None)
    # integers in their own units as float64, the estimate's dtype: one copy of an in-memory layer, not two
    return as_float(sample) if sample.dtype.kind == "f" else sample.astype(np.float64)


#: Photon-noise estimate's time per sampled voxel over denoising's per voxel with no cycle spins (ratio): sets its
#: share of the bar.
ESTIMATE_COST_RATIO = 0.04


def _estimate_share(source: Source, params: DenoiseParams, voxels: int | None = None) -> float:
    """The part of a layer's progress span its noise estimate takes (0 when nothing is estimated)."""
    if not params.estimates_noise:
        return 0.0
    shape = np.shape(source.data)
    n = int(np.prod(shape[:len(shape) - source.rgb], dtype=np.int64)) if voxels is None else voxels
    est = ESTIMATE_COST_RATIO * min(n, ESTIMATE_VOXELS)  # the library's sample (:func:`restore.noise_sample`)
    work = n * (DENOISE_BASE_COST_IN_SPINS + params.cycle_spins) / DENOISE_BASE_COST_IN_SPINS  # over no spins'
    return float(np.clip(est / (est + work), 0.01, 0.5))


def photon_model(control: Control, source: Source, params: DenoiseParams, cache: LruCache | None = None,
                 span: tuple[float, float] = (0.0, 1.0), own: bool = True
                 ) -> Generator[Progress | None, None, NoiseInfo | None]:
    """The layer's Poisson-Gaussian model, or None for Gaussian noise (sigma then per plane or volume).

    What the library would estimate on the whole layer (:attr:`DenoiseParams.estimates_noise`:
    the model with 'auto', gain and read noise not given), estimated once by
    :func:`restore.estimate_noise` on the library's sample (:func:`_noise_sample`)
    and kept in ``cache`` for the layer. The estimate's progress goes on ``span`` of the bar.
    ``own``: as in :func:`_start_estimate`.
    """
    if not params.estimates_noise:
        if params.noise == "poisson-gaussian":  # gain and read noise given
            return NoiseInfo(float(params.gain), float(params.sigma), False, False)
        return None
    name = getattr(source.layer, "name", None)
    est = _layer_estimate(cache, source, params.noise)
    if est is None:
        est = yield from _start_estimate(control, source, params, cache, own).wait(span=span,
                                                                                   text=_estimate_text(source, params))
        if cache is not None:
            cache.set((source.key, "noise", params.noise), est)
    if est.noise != "poisson-gaussian":
        return None
    if params.gain is None and not est.gain > 0:
        raise ValueError(f"could not estimate a gain > 0 from {repr(name) if name else 'the image'} (its noise does "
                         "not grow with its level): give the gain, or choose Gaussian noise")
    return NoiseInfo(float(est.gain if params.gain is None else params.gain),
                     float(est.sigma if params.sigma is None else params.sigma),
                     params.gain is None, params.sigma is None, est)


def _estimate_layer(control: Control, source: Source, params: DenoiseParams, cache: LruCache | None,
                    idx: tuple[int, ...]) -> Generator[Progress | None, None, NoiseInfo | float]:
    """The Estimate button beyond Gaussian noise: the layer's photon model, or, when 'auto' chose Gaussian, sigma."""
    noise = yield from photon_model(control, source, params, cache)
    if noise is not None:
        return noise
    return (yield from estimate_task(control, source, idx))


def _start_estimate(control: Control, source: Source, params: DenoiseParams, cache: LruCache | None = None,
                    own: bool = True) -> Pending | Joined:
    """The layer's :func:`restore.estimate_noise` (``params.noise``) in a helper thread, its sample read there too.

    A :class:`Pending`, or the wait for the one the widget started ahead
    (:func:`estimate_ahead`, kept in ``cache``), joined where it is: adopted
    with ``own`` (cancelling the task stops it), else left running when the
    task is cancelled (a preview, which the next one replaces).
    """
    ahead = cache.get((source.key, "noise", params.noise)) if cache is not None else None
    if isinstance(ahead, Ahead) and ahead.joinable:
        return ahead.join(control, own=own, again=lambda: control.start(_estimate_noise, source, params))
    return control.start(_estimate_noise, source, params)


def _estimate_noise(source: Source, params: DenoiseParams, progress: Any = None) -> NoiseEstimate:
    return restore.estimate_noise(_noise_sample(source, params.n_spatial), noise=params.noise, progress=progress)


def estimate_ahead(source: Source, params: DenoiseParams, cache: LruCache) -> None:
    """Start the layer's noise estimate that the first preview or Apply will need, unless kept or running.

    Chosen in the widget, a layer's first preview would otherwise wait for
    it (a few tenths of a second on a large layer). It runs in a thread of
    its own, in no job, its :class:`Ahead` kept in ``cache`` under the key
    of the estimate, which replaces it once a task has taken its value.
    """
    key = (source.key, "noise", params.noise)
    kept = cache.get(key)
    if not params.estimates_noise or _layer_estimate(cache, source, params.noise) is not None or (
            isinstance(kept, Ahead) and kept.joinable):
        return
    cache.set(key, Ahead(_estimate_noise, source, params))


def _estimate_text(source: Source, params: DenoiseParams) -> str:
    """What the bar says while the layer's noise is estimated."""
    name = getattr(source.layer, "name", None)
    what = "photon " if params.noise == "poisson-gaussian" else ""
    return f"Estimating the {what}noise{f' of {name!r}' if name else ''}\u2026"


def _layer_estimate(cache: LruCache | None, source: Source, noise: str) -> NoiseEstimate | None:
    """The layer's kept estimate for ``noise``.

    'auto''s serves Poisson-Gaussian noise when it chose it (the same
    parameters: :func:`restore.estimate_noise`).
    """
    if cache is None:
        return None

    def kept(noise: str) -> NoiseEstimate | None:
        est = cache.get((source.key, "noise", noise))
        return est.value() if isinstance(est, Ahead) else est  # (None while an estimate started ahead runs)

    est = kept(noise)
    if est is None and noise == "poisson-gaussian":
        auto = kept("auto")
        est = auto if auto is not None and auto.noise == noise else None
    return est


def lazy_result(source: Source, params: DenoiseParams, noise: NoiseInfo | None) -> Any:
    """The lazy result of a Dask or multiscale layer: denoised by Dask blocks, nothing computed.

    A multiscale layer's full resolution is denoised; its lower levels are
    means of blocks of that result (:func:`restore.pyramid.lower_levels`,
    as the command line writes an OME-Zarr pyramid), so that every level
    shows the same denoised image. In volume mode the volume's first axis
    is the one napari slices: its blocks keep to the input's chunks
    (``sliced_axes``), so that showing a slice computes a chunk's depth and
    its overlap, not the whole volume.
    """
    import dask.array as da

    from restore.pyramid import lower_levels

    level = source.data if is_lazy(source.data) else da.from_array(source.data)
    colour, alpha = split_alpha(as_float(level), source.rgb)
    n = colour.ndim - source.rgb
    axes = tuple(range(n - params.n_spatial, n))
    out = params.function(colour, axes=axes, channel_axis=-1 if source.rgb else None,
                          sliced_axes=axes[:1] if params.volume else (), **params.library_kwargs(noise))
    full = like_input(with_alpha(out, alpha), source.dtype)
    if not source.multiscale:
        return full
    return [full, *lower_levels(full, [np.shape(lv) for lv in source.levels])]


#: A part of a layer napari draws: per axis of its data (colour excluded), an index (a slider's) or a range of a
#: displayed axis, at a level of a multiscale layer: ``(level, ((start, stop) or index, ...))``.
View = tuple[int, tuple[Any, ...]]


def shown_blocks(lazy: Any, where: tuple[Any, ...]) -> list[tuple[int, ...]]:
    """Indices of the blocks of the Dask array ``lazy`` that hold the part ``where`` (see :data:`View`)."""
    ranges = []
    for a, chunks in enumerate(lazy.chunks):
        ends = np.cumsum(chunks)
        spot = where[a] if a < len(where) else None
        if spot is None:
            ranges.append(range(len(chunks)))
        elif isinstance(spot, tuple):
            lo, hi = spot
            first = int(np.searchsorted(ends, lo, side="right"))
            last = int(np.searchsorted(ends, max(hi - 1, lo), side="right"))
            ranges.append(range(min(first, len(chunks) - 1), min(last, len(chunks) - 1) + 1))
        else:
            ranges.append([min(int(np.searchsorted(ends, spot, side="right")), len(chunks) - 1)])
    return [tuple(int(i) for i in b) for b in itertools.product(*ranges)]


def compute_blocks(arrays: Sequence[Any], blocks: Sequence[Sequence[tuple[int, ...]]], progress: Any = None
                   ) -> list[Any]:
    """Each of ``arrays`` with its ``blocks`` computed (here, now, in one Dask call), the others still lazy.

    The computed blocks are held by the returned arrays' graphs, so that
    slicing them (napari drawing them in the GUI thread) computes nothing.
    One call: the work the arrays share (a pyramid's levels share the full
    resolution's) is done once. ``progress(done, total)`` after each Dask
    task; it may raise to stop.
    """
    import dask
    import dask.array as da
    from dask.base import tokenize
    from dask.callbacks import Callback
    from dask.highlevelgraph import HighLevelGraph

    class Report(Callback):  # passed to this compute alone: other threads' Dask work is not seen
        def _start(self, dsk: Any) -> None:
            self.total, self.done = max(len(dsk), 1), 0
            if progress is not None:
                progress(0, self.total)

        def _posttask(self, key: Any, result: Any, dsk: Any, state: Any, worker_id: Any) -> None:
            self.done += 1
            if progress is not None:
                progress(min(self.done, self.total), self.total)

    parts = [lazy.blocks[b] for lazy, bs in zip(arrays, blocks, strict=True) for b in bs]
    values = iter(dask.compute(*parts, callbacks=[Report()._callback]) if parts else ())
    out = []
    for lazy, bs in zip(arrays, blocks, strict=True):
        if not bs:
            out.append(lazy)
            continue
        name = "restore-shown-" + tokenize(lazy.name, list(bs))
        layer: dict[Any, Any] = {(name, *b): (lazy.name, *b) for b in np.ndindex(*lazy.numblocks)}
        layer.update({(name, *b): np.asarray(next(values)) for b in bs})
        graph = HighLevelGraph.from_collections(name, layer, dependencies=[lazy])
        out.append(da.Array(graph, name, chunks=lazy.chunks, meta=lazy._meta))
    return out


def first_view(control: Control, data: Any, views: Sequence[View], span: tuple[float, float], text: str
               ) -> Generator[Progress | None, None, Any]:
    """The lazy result ``data`` (an array, or the levels of a multiscale one) with what napari draws computed.

    ``views``: the parts napari draws (see :data:`View`), e.g. a multiscale
    layer's level in view and its thumbnail's.
    """
    levels = list(data) if isinstance(data, list) else [data]
    wanted: dict[int, set[tuple[int, ...]]] = {}
    for level, where in views:
        level = min(max(level, 0), len(levels) - 1)
        wanted.setdefault(level, set()).update(shown_blocks(levels[level], where))
    if not wanted:
        return data
    order = sorted(wanted)
    done = yield from control.call(compute_blocks, [levels[k] for k in order], [sorted(wanted[k]) for k in order],
                                   span=span, text=text)
    for k, level in zip(order, done, strict=True):
        levels[k] = level
    return levels if isinstance(data, list) else levels[0]


def _unit_voxels(source: Source, n_spatial: int) -> int:
    shape = np.shape(source.data)
    n = len(shape) - source.rgb
    return int(np.prod(shape[n - n_spatial:n], dtype=np.int64))


def denoise_task(control: Control, sources: Sequence[Source], params: DenoiseParams, cache: LruCache | None = None,
                 views: Sequence[Sequence[View]] | None = None) -> Generator[Progress | Output | None, None, None]:
    """Denoise every plane (or volume) of every source; yield progress and an :class:`Output` per source.

    Each output is a :class:`Denoised` in the source's dtype (integers
    rounded and clipped). Dask and multiscale sources give lazy results (only
    a noise sample is read), with the parts napari will draw (``views``,
    one list per source, see :data:`View`) computed here, so that adding the layer
    computes nothing in the GUI thread. The bar never goes back: each source
    has its span, and its photon-noise estimate the first part of it.
    """
    for s in sources:
        s.check(params)
    views = list(views) if views is not None else [()] * len(sources)
    n_sp = params.n_spatial
    # a lazy layer's work is its first view, about one plane or volume
    sizes = [_unit_voxels(s, n_sp) * (1 if s.lazy else len(s.units(n_sp))) for s in sources]
    total, done = max(1, sum(sizes)), 0
    what = "volume" if params.volume else "plane"
    for s, size, shown in zip(sources, sizes, views, strict=True):
        f0, f1 = done / total, (done + size) / total
        done += size
        mid = f0 + (f1 - f0) * _estimate_share(s, params, None if not s.lazy else size)
        noise = yield from photon_model(control, s, params, cache, span=(f0, mid))
        chosen = params.for_noise(noise)  # 'auto' as the layer's estimate chose
        name = s.layer.name if s.layer is not None else ""
        if s.lazy:
            data = lazy_result(s, chosen, noise)
            data = yield from first_view(control, data, shown, (mid, f1), f"Denoising what is shown of {name!r}\u2026")
            yield Output(Denoised(s, data, [], noise))
            continue
        units = s.units(n_sp)
        out = np.empty(np.shape(s.data), dtype=s.dtype if s.dtype.kind != "b" else np.float32)
        infos = []
        for k, idx in enumerate(units):
            span = (mid + (f1 - mid) * k / len(units), mid + (f1 - mid) * (k + 1) / len(units))
            where = f" {what} {k + 1} of {len(units)}" if len(units) > 1 else ""
            text = f"Denoising {name!r}{where}\u2026" if s.layer is not None else ""
            if chosen.whole_units:
                den, info = yield from denoise_unit(control, s.data[idx], chosen, s.rgb, noise, span, text)
            else:
                den, info = yield from denoise_plane(control, s.data[idx], chosen, s.rgb, cache, (s.key, idx), span,
                                                     text)
            infos.append(info)
            out[idx] = like_input(den, out.dtype)
        yield Output(Denoised(s, out, infos, noise))


#: Sub-volumes a volume preview keeps, denoised, to show another of their planes without computing again.
PREVIEW_VOLUMES_KEPT = 2


def preview_task(control: Control, source: Source, idx: tuple[int, ...], region: tuple[int, int, int, int],
                 params: DenoiseParams, cache: LruCache | None = None, depth: tuple[int, int] | None = None,
                 volumes: LruCache | None = None) -> Generator[Progress | Output | None, None, None]:
    """Denoise ``region`` (rows r0:r1, columns c0:c1) of one plane; yield it as :class:`Output` ``(data, info)``.

    With ``depth`` (volume mode) ``idx`` ends with the current plane's index
    along the volume's first axis, and the sub-volume of planes
    ``depth[0]:depth[1]`` is denoised; its current plane is what is shown,
    and the whole sub-volume is kept in ``volumes`` so that another of its
    planes is shown without computing again.
    With SURE not yet cached (plane path), the rule's result comes first
    (marked ``provisional``), so the preview answers at once; SURE's follows.
    So does the fast method's under Gaussian noise while the layer's noise
    model (``noise='auto'``) is estimated the first time.
    ``info`` is a :class:`LamInfo` on the plane path, else the pair
    ``(LamInfo, NoiseInfo or None)``. The non-local method (seconds where
    the wavelet method takes a fraction of one) answers first with the fast
    wavelet method, its info a provisional :class:`MethodInfo`, unless the
    sub-volume is kept; its own result follows.
    """
    answered = False
    if params.noise == "auto" and params.estimates_noise and _layer_estimate(cache, source, "auto") is None:
        # the layer's model is estimated once, on the library's sample (seconds on a large layer), beside a quick
        # answer as under Gaussian noise, a photograph's, with the fast method, marked provisional
        cache = cache if cache is not None else LruCache()
        pending = _start_estimate(control, source, params, cache, own=False)  # the next preview may need it
        # the rule's lam: a manual one would be read in image units, and may be meant for photon noise's
        quick = replace(params, method="wavelet", noise="gaussian", lam_mode="rule")
        stand_in = MethodInfo(params.method, params.multiplier, params.sigma, provisional=True) \
            if params.method != "wavelet" else None
        try:
            if quick.whole_units:  # a sub-volume
                for item in preview_task(control, source, idx, region, quick, None, depth, None):
                    if isinstance(item, Output):
                        item = Output((item.value[0], stand_in or _provisional(item.value[1])))
                    yield item
            else:  # the tree stage alone, as SURE's provisional answer
                r0, r1, c0, c1 = region
                crop = np.asarray(source.data[idx + (slice(r0, r1), slice(c0, c1))])
                rough, info = yield from denoise_plane(control, crop, quick, source.rgb, None, None, (0.0, 0.3),
                                                       wiener=False)
                info = replace(info, mode="sure" if params.lam_mode == "sure" else "rule", provisional=True)
                yield Output((like_input(rough, source.dtype), stand_in or info))
        except BaseException:  # the estimate's thread stops too, whatever ended the quick answer
            pending.stop()
            raise
        answered = True
        est = yield from pending.wait(span=(0.3, 0.4), text=_estimate_text(source, params))
        cache.set((source.key, "noise", params.noise), est)
    noise = yield from photon_model(control, source, params, cache, span=(0.0, 0.1), own=False)
    params = params.for_noise(noise)  # 'auto' as the layer's estimate chose
    if params.method != "wavelet" and not answered and not (
            depth is not None and volumes is not None and (source.key, idx[:-1], depth, region, params) in volumes):
        stand_in = MethodInfo(params.method, params.multiplier, params.sigma, provisional=True)
        for item in preview_task(control, source, idx, region, params.fast(), cache, depth, volumes):
            yield Output((item.value[0], stand_in)) if isinstance(item, Output) else item
    r0, r1, c0, c1 = region
    if params.whole_units:
        if depth is not None:
            z = idx[-1]
            key = (source.key, idx[:-1], depth, region, params)
            kept = volumes.get(key) if volumes is not None else None
            if kept is None:
                crop = np.asarray(source.data[idx[:-1] + (slice(*depth), slice(r0, r1), slice(c0, c1))])
                vol, info = yield from denoise_unit(control, crop, params, source.rgb, noise, (0.1, 1.0))
                kept = (like_input(vol, source.dtype), (info, noise))
                if volumes is not None:
                    volumes.set(key, kept)
            vol, infos = kept
            yield Output((vol[z - depth[0]], infos))
            return
        crop = np.asarray(source.data[idx + (slice(r0, r1), slice(c0, c1))])
        out, info = yield from denoise_unit(control, crop, params, source.rgb, noise, (0.1, 1.0))
        yield Output((like_input(out, source.dtype), (info, noise)))
        return
    crop = np.asarray(source.data[idx + (slice(r0, r1), slice(c0, c1))])
    key = (source.key, idx, region)
    if params.lam_mode == "sure" and not answered and (cache is None or (key, params.lam_key()) not in cache):
        # the quick answer: the rule's lam and the tree stage alone, about a fifth of the default call's time
        rough, info = yield from denoise_plane(control, crop, replace(params, lam_mode="rule"), source.rgb, cache,
                                               key, (0.0, 0.3), wiener=False)
        yield Output((like_input(rough, source.dtype), replace(info, mode="sure", provisional=True)))
    out, info = yield from denoise_plane(control, crop, params, source.rgb, cache, key, (0.3, 1.0))
    yield Output((like_input(out, source.dtype), info))


def _provisional(info: Any) -> Any:
    """A preview's info marked provisional: a :class:`LamInfo` or :class:`MethodInfo`, alone or with its noise."""
    if isinstance(info, tuple):
        return (_provisional(info[0]), *info[1:])
    return replace(info, provisional=True)


def estimate_task(control: Control, source: Source, idx: tuple[int, ...]) -> Generator[None, None, float]:
    """Estimate sigma on one plane (the median over colour channels)."""
    plane, _ = split_alpha(as_float(np.asarray(source.data[idx])), source.rgb)

    def estimate(progress: Any = None) -> float:
        sig = restore.estimate_sigma(plane, channel_axis=-1 if source.rgb else None)
        return float(np.median(sig))

    return (yield from control.call(estimate))


def _fmt(values: Sequence[float]) -> str:
    return ", ".join(f"{v:.4g}" for v in values)


def format_info(info: LamInfo | NoiseInfo | Sequence[LamInfo] | None, params: DenoiseParams | None = None,
                noise: NoiseInfo | None = None) -> str:
    """One line for the widget: sigma and lam used (a range over several planes or volumes), or the photon model.

    With ``noise`` (Poisson-Gaussian), the photon model replaces sigma and
    lam is in the stabilised units.
    """
    if isinstance(info, NoiseInfo):
        info, noise = None, info
    if isinstance(info, list) and info and isinstance(info[0], MethodInfo):
        info = info[0]
    if not isinstance(info, MethodInfo) and not info and params is not None and params.method != "wavelet":
        info = MethodInfo(params.method, params.multiplier, params.sigma)  # a lazy result: nothing computed yet
    if isinstance(info, MethodInfo):
        return info.text(noise, "volume" if params is not None and params.volume else "plane")
    if info is None or (not isinstance(info, LamInfo) and not list(info)):
        if params is None or not params.whole_units:
            return ""
        unit = "volume" if params.volume else "plane"
        lam = (f"\u03bb = {params.lam:.4g} (manual)" if params.lam_mode == "manual"
               else f"\u03bb by {_MODE_LABELS[params.lam_mode]} per {unit}")
        text = noise.text() if noise is not None else (
            f"\u03c3 = {params.sigma:.4g} (given)" if params.sigma is not None else f"\u03c3 estimated per {unit}")
        return f"{text} \u00b7 {lam}"
    infos = [info] if isinstance(info, LamInfo) else list(info)
    first = infos[0]
    mode = _MODE_LABELS[first.mode]
    if first.mode != "manual":
        mode += f" \u00d7 {first.multiplier:.3g}"
        if first.provisional:  # the quick answer; SURE's (or the layer's noise model's) follows
            then = "SURE running" if first.mode == "sure" else "for now"
            mode = f"rule \u00d7 {first.multiplier:.3g}, {then}\u2026"
    if noise is not None:
        mode += ", stabilised units"
    source = "given" if first.sigma_given else "estimated"
    units = "volumes" if params is not None and params.volume else "planes"
    if len(infos) == 1:
        sigma = noise.text() if noise is not None else (
            f"\u03c3 = {_fmt(first.sigma)} ({source})" if first.sigma else "\u03c3 estimated")
        return f"{sigma} \u00b7 \u03bb = {_fmt(first.lam)} ({mode})"
    lam0 = [i.lam[0] for i in infos]
    if noise is not None:
        sigma = noise.text()
    elif all(i.sigma for i in infos):
        sig0 = [i.sigma[0] for i in infos]
        sigma = f"\u03c3 = {min(sig0):.4g}\u2013{max(sig0):.4g} ({source})"
    else:
        sigma = "\u03c3 estimated"
    return f"{len(infos)} {units}: {sigma} \u00b7 \u03bb = {min(lam0):.4g}\u2013{max(lam0):.4g} ({mode})"


@dataclass(frozen=True)
class Busy:
    """A task's :class:`Output` for the widget: show the bar busy (``on``) until the first real progress."""

    on: bool


def busy_until_progress(task: Any) -> Any:
    """The task ``task``, telling the widget to show a busy bar until its first :class:`Progress`.

    The library's first report can come seconds after the start (a 4096 x
    4096 plane's wavelet tree is built first): a bar that moves from the
    first moment says the job runs; real fractions follow.
    """
    def run(control: Control, *args: Any) -> Generator[Any, None, Any]:
        gen = task(control, *args)
        busy = True
        yield Output(Busy(True))
        try:
            while True:
                try:
                    item = next(gen)
                except StopIteration as stop:
                    return stop.value
                if busy and isinstance(item, Progress):
                    busy = False
                    yield Output(Busy(False))
                yield item
        finally:
            gen.close()  # a cancelled job closes us: the library call is told at once

    return run


def warm_up(control: Control) -> Generator[str, None, None]:
    """Compile (or load from numba's cache) the kernels of every penalty and of the non-local method."""
    img = np.random.default_rng(0).standard_normal((32, 32))
    restore.estimate_sigma(img)
    for penalty in restore.PENALTIES:
        control.check()
        for approx in (False, True):
            restore.denoise_wavelet_tree(img, sigma=1.0, lam=0.5, penalty=penalty, wavelet="haar",
                                         penalize_approx=approx)
        yield penalty
    control.check()
    restore.denoise_nonlocal_tree(img, sigma=1.0)  # the non-local method's kernels too


#: Axis labels that name depth (a z-stack: start as a volume) and time (a time series: plane by plane, said why).
#: Any other label the user gave (c, channel, angle...) starts plane by plane too: its planes are not neighbours.
DEPTH_LABELS = ("z", "depth")
TIME_LABELS = ("t", "time")
#: Layers whose choices (process as, noise model) are remembered between sessions, by file: the most recent.
FILES_REMEMBERED = 64
#: What the user chose for each layer this session (by ``unique_id``), shared by every Denoise widget.
_LAYER_CHOICES: dict[Any, dict[str, Any]] = {}


def volume_axis_label(layer: Any) -> str:
    """The label of the axis a volume would add to the planes (the third spatial axis from the end), lower case."""
    labels = list(getattr(layer, "axis_labels", ()) or ())
    n = len(labels)
    return str(labels[n - 3]).strip().lower() if n >= 3 else ""


def is_unnamed_axis(label: str) -> bool:
    """Whether ``label`` is napari's default for an axis nobody named (``'-3'``, ``'0'``), or empty."""
    try:
        int(label)
    except ValueError:
        return not label
    return True


def layer_noise_model(layer: Any) -> str | None:
    """The noise model the layer's metadata states (``metadata["noise"]``), if it is one the library knows."""
    from restore.denoise import NOISE_MODELS

    value = (getattr(layer, "metadata", None) or {}).get("noise")
    if isinstance(value, str) and value.strip().lower() in NOISE_MODELS:
        return value.strip().lower()
    return None


def _layer_file(layer: Any) -> str | None:
    path = getattr(getattr(layer, "source", None), "path", None)
    return str(path) if path else None


# ---------------------------------------------------------------------------
# Widget
# ---------------------------------------------------------------------------


class DenoiseWidget(RestoreWidget):
    """Denoise Image layers with tree-structured wavelet shrinkage, or the non-local tree method.

    Preview shows the part of the current plane in view; Denoise processes
    whole layers (every plane, or every selected layer) in the background and
    shows each result as a layer named ``"<input> [<penalty>]"``.
    """

    KIND = "denoise"
    RUN_TEXT = "Denoise"
    RUN_TOOLTIP = "Denoise the whole image (every plane) in the background"
    #: Delay between the last change (setting, plane, pan or zoom) and the preview (ms).
    PREVIEW_DELAY_MS = 150
    #: Largest region a preview computes (pixels): with SURE and 8 shifts about 2 s on 2 busy cores.
    PREVIEW_MAX_PIXELS = 1024 * 1024
    #: Largest region a non-local preview computes (pixels), after the fast method's stand-in: the non-local
    #: method costs several times the wavelet's per pixel (about 1.5 s of CPU on sample_images/camera.png).
    PREVIEW_MAX_PIXELS_NONLOCAL = 512 * 512
    #: Pixels computed beyond each side of the view, so that its edges look as in the whole plane.
    PREVIEW_MARGIN_PX = 32
    #: Preview regions have sides in multiples of this: panning reuses the library's wavelet plans.
    PREVIEW_QUANTUM_PX = 64
    #: Planes of a volume preview's sub-volume: enough for the 3-D transform's levels of a thicker stack.
    PREVIEW_DEPTH_PLANES = 32
    #: Largest sub-volume a volume preview computes (voxels): about 2 s with SURE and no shifts on 2 busy cores.
    PREVIEW_MAX_VOXELS = 32 * 128 * 128
    #: Largest sub-volume a non-local volume preview computes (voxels): a quarter of the wavelet's, as in 3-D
    #: the non-local method costs tens of times the wavelet's per voxel (about 1.5 s of CPU on this many).
    PREVIEW_MAX_VOXELS_NONLOCAL = 32 * 64 * 64
    #: Share of a volume preview's depth a plane must lie inside its sub-volume for the sub-volume to be reused
    #: (fraction): nearer an end that is not the volume's own, the sub-volume's boundary shows in the plane.
    PREVIEW_EDGE_SHARE = 0.25

    def __init__(self, napari_viewer: napari.viewer.Viewer) -> None:
        super().__init__(napari_viewer)
        from qtpy.QtCore import QTimer  # Qt only when the widget is built

        self._lam_cache = LruCache(512)
        self._aheads: list[Ahead] = []  # noise estimates started ahead (:meth:`_estimate_ahead`), stopped at close
        self._preview_layer: Any = None
        self._preview_source: Any = None  # the layer the preview layer shows a part of
        self._adding_preview = False
        self._preview_job: Job | None = None
        self._preview_shown: tuple[Any, ...] | None = None  # what the preview layer shows (layer, plane, ...)
        self._apply_infos: list[LamInfo] = []
        self._last_info: LamInfo | None = None
        self._volumes = LruCache(PREVIEW_VOLUMES_KEPT)  # denoised sub-volumes of the volume preview
        self._layer_defaults = False  # True while the widget sets a layer's starting choices (not the user's)

        self.method = ComboBox(label="method", choices=[(label, m) for m, label in METHODS.items()],
                               value="wavelet", name="method",
                               tooltip="Wavelet tree: fast, for previews and large data. Non-local tree: groups "
                                       "of similar patches coded together, the best quality at a few times the "
                                       "time (its preview shows the fast method first)")
        self.process = ComboBox(label="process as", choices=self._process_choices, value=False, name="process",
                                tooltip="Plane by plane (photographs, time series, stacks of unrelated planes), "
                                        "or each 3-D volume as a whole (z-stacks: uses the third dimension; "
                                        "offered for layers with 3 spatial axes)")
        from restore.noise import NOISE_CHOICES

        self.noise = ComboBox(choices=[(NOISE_LABELS.get(m, m), m) for m in NOISE_CHOICES],
                              value=_library_default("noise"), name="noise",
                              tooltip="auto: the image's noise decides, estimated once per layer (the choice is "
                                      "shown below). Gaussian: the same noise everywhere (photographs). "
                                      "Poisson-Gaussian: "
                                      "photon noise that grows with brightness, plus camera read noise "
                                      "(fluorescence microscopy)")
        self.gain = FloatSpinBox(value=0.0, min=0.0, max=1e12, step=1e-4, name="gain",
                                 tooltip="Poisson-Gaussian: image units per photon; 0 = estimate it from the "
                                         "image (the estimate is reported)")
        self.gain.adaptive_step = True
        self._gain_label = Label(value="gain", tooltip="Poisson-Gaussian: image units per photon (0: estimated)")
        noise_row = Container(widgets=[self.noise, self._gain_label, self.gain], layout="horizontal",
                              labels=False, label="noise")
        noise_row.margins = (0, 0, 0, 0)
        self.sigma_auto = CheckBox(text="auto", value=True, name="sigma_auto",
                                   tooltip="Estimate the noise level on each plane (each volume; with "
                                           "Poisson-Gaussian noise, the read noise once for the layer)")
        self.sigma = FloatSpinBox(value=0.0, min=0.0, max=1e12, step=1e-5, enabled=False, name="sigma",
                                  tooltip="Standard deviation of the noise, in the image's units (with "
                                          "Poisson-Gaussian noise: of the camera's read noise)")
        self.sigma.adaptive_step = True
        self.estimate = PushButton(text="Estimate", tooltip="Estimate the noise level on the plane shown (with "
                                                            "Poisson-Gaussian noise: the layer's gain and read "
                                                            "noise)")
        sigma_row = Container(widgets=[self.sigma_auto, self.sigma, self.estimate], layout="horizontal",
                              labels=False, label="noise level \u03c3")
        sigma_row.margins = (0, 0, 0, 0)
        self.multiplier = FloatSpinBox(label="strength \u00d7", value=1.0, min=0.0, max=100.0, step=0.05,
                                       name="multiplier",
                                       tooltip="Multiplies the automatic \u03bb (non-local tree: the noise level "
                                               "removed): above 1 smooths more, below 1 keeps more detail")
        self.cycle_spins = SpinBox(label="shifts averaged", value=_library_default("cycle_spins"), min=0, max=64,
                                   name="cycle_spins",
                                   tooltip="Average the result over this many shifted copies (cycle spinning): "
                                           "fewer blocky artefacts, proportionally slower. At 0 the final "
                                           "Wiener stage still averages a few shifts")
        self.preview = CheckBox(text="Preview (the part in view)", value=False, name="preview",
                                tooltip="Show the result on the part of the current plane in view, updated "
                                        "as you change settings, pan or zoom (volumes: a sub-volume around it)")
        self.info = Label(value="", visible=False, tooltip="Noise level and \u03bb used by the last run or preview")
        self.info.native.setWordWrap(True)
        # Advanced
        self.lam_mode = ComboBox(label="\u03bb from", choices=self._mode_choices, value="sure", name="lam_mode",
                                 tooltip="SURE: Stein's unbiased risk estimate, best (convex penalties); "
                                         "rule: calibrated on natural images, instant; manual: the value below")
        self.lam = FloatSpinBox(label="\u03bb (manual)", value=0.0, min=0.0, max=1e15, step=1e-6, enabled=False,
                                name="lam", tooltip="Absolute \u03bb in the image's units (Poisson-Gaussian: in "
                                                    "the stabilised units, noise 1), used when '\u03bb from' is "
                                                    "manual")
        self.lam.adaptive_step = True
        self.penalty = ComboBox(label="penalty", choices=restore.PENALTIES, value=_library_default("penalty"),
                                name="penalty",
                                tooltip="tree_l2 (best on natural images), tree_linf, tree_l0 (Donoho's tree "
                                        "pruning), l1 (soft threshold), l0 (hard threshold)")
        self.wavelet = ComboBox(label="wavelet", choices=WAVELETS, value=_library_default("wavelet"), name="wavelet",
                                tooltip="Orthogonal wavelet of the transform")
        self.penalize_approx = CheckBox(text="shrink the coarsest band too", value=_library_default("penalize_approx"),
                                        name="penalize_approx",
                                        tooltip="Penalise the approximation band as well (off: it is kept)")
        self.all_selected = CheckBox(text="every selected image", value=False, name="all_selected",
                                     tooltip="Denoise every image layer selected in the layer list, in one go")
        self.apply_button = self.runner.run_button
        self._finish_layout(
            main=[self.image, self.method, self.process, noise_row, sigma_row, self.multiplier, self.cycle_spins,
                  self.preview],
            advanced=[self.lam_mode, self.lam, self.penalty, self.wavelet, self.penalize_approx,
                      self.all_selected, self.keep_each_run],
            after=[self.info],
            persisted=[self.method, self.gain, self.sigma_auto, self.sigma, self.multiplier,
                       self.cycle_spins, self.penalty, self.lam_mode, self.lam, self.wavelet, self.penalize_approx,
                       self.all_selected,
                       self.keep_each_run])
        self._on_penalty_changed()
        self._on_sigma_auto_changed(self.sigma_auto.value)
        self._on_mode_changed(self.lam_mode.value)
        self._on_noise_changed()
        self._on_method_changed()

        self._timer = QTimer(self.native)
        self._timer.setSingleShot(True)
        self._timer.setInterval(self.PREVIEW_DELAY_MS)
        self._timer.timeout.connect(self.update_preview)
        for w in (self.image, self.wavelet, self.sigma, self.multiplier, self.lam, self.cycle_spins,
                  self.penalize_approx, self.gain):
            w.changed.connect(self._schedule_preview)
        self.process.changed.connect(self._on_process_changed)
        self.noise.changed.connect(self._on_noise_model_changed)
        self.image.changed.connect(self._on_image_changed)
        self.penalty.changed.connect(self._on_penalty_changed)
        self.method.changed.connect(self._on_method_changed)
        self.sigma_auto.changed.connect(self._on_sigma_auto_changed)
        self.lam_mode.changed.connect(self._on_mode_changed)
        self.preview.changed.connect(self._on_preview_toggled)
        self.estimate.changed.connect(self.estimate_sigma)
        self._viewer.dims.events.current_step.connect(self._on_dims_changed)
        camera = _camera(self._viewer)
        camera.events.center.connect(self._schedule_preview)
        camera.events.zoom.connect(self._schedule_preview)
        self._watched_layer: Any = None
        self._on_image_changed()

        self._warm_job = None
        if not is_warm(WARM_KEY):
            self.status.value = "Compiling the numba kernels (first use)\u2026"
            self._warm_job = ensure_warm(WARM_KEY, warm_up, on_done=self._on_warm)

    # -- state -------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """Whether a preview, a run or the first-use compilation is running."""
        jobs = (self._preview_job, self._warm_job)
        return self.runner.busy or any(j is not None and j.running for j in jobs)

    def params(self) -> DenoiseParams:
        """The current settings (raises ValueError on an invalid combination)."""
        pg = self.noise.value == "poisson-gaussian"
        return DenoiseParams(
            wavelet=self.wavelet.value, penalty=self.penalty.value,
            sigma=None if self.sigma_auto.value else float(self.sigma.value),
            lam_mode=self.lam_mode.value, multiplier=float(self.multiplier.value),
            lam=float(self.lam.value), cycle_spins=int(self.cycle_spins.value),
            penalize_approx=bool(self.penalize_approx.value), volume=bool(self.process.value),
            method=self.method.value,
            noise=self.noise.value, gain=float(self.gain.value) if pg and self.gain.value > 0 else None)

    def _process_choices(self, _widget: Any = None) -> list[tuple[str, bool]]:
        layer = self.image.value if getattr(self, "image", None) is not None else None
        choices = [("plane by plane", False)]
        if layer is not None and holds_volumes(np.shape(full_resolution(layer)), bool(layer.rgb)):
            choices.append(("volume (3-D)", True))
        return choices

    def _on_noise_model_changed(self, *_: Any) -> None:
        # a σ typed or estimated for one model means another thing in the other (all the noise, or read noise)
        self.sigma_auto.value = True
        self._remember("noise", self.noise.value)
        self._on_noise_changed()

    def _on_process_changed(self, *_: Any) -> None:
        if len(self.process.choices) > 1:  # a choice (a layer that cannot be a volume leaves none)
            self._remember("process", bool(self.process.value))
        self._volume_note()
        self._on_noise_changed()

    # -- per-layer choices ---------------------------------------------------

    def _remember(self, what: str, value: Any) -> None:
        """The user chose ``value`` for ``what`` on the current layer: keep it for the layer and as the default."""
        if self._layer_defaults or self._inactive:
            return
        layer = self.image.value
        if layer is not None:
            _LAYER_CHOICES.setdefault(layer.unique_id, {})[what] = value
            path = _layer_file(layer)
            if path is not None:
                files = {k: v for k, v in dict(self.settings.value("files", {}) or {}).items() if k != path}
                files[path] = {**_LAYER_CHOICES[layer.unique_id]}
                self.settings.store("files", dict(list(files.items())[-FILES_REMEMBERED:]))
        self.settings.store(what, value)

    def _starting_choices(self, layer: Any) -> dict[str, Any]:
        """What the widget starts with on ``layer``.

        The user's choices for it (this session, or for its file), else what
        its axes and metadata say, else the user's last choices.
        """
        from restore.noise import NOISE_CHOICES

        chosen = dict(_LAYER_CHOICES.get(layer.unique_id, {}))
        path = _layer_file(layer)
        if path is not None:
            chosen = {**dict((self.settings.value("files", {}) or {}).get(path, {})), **chosen}
        label = volume_axis_label(layer)
        process = chosen.get("process")
        if process is None:
            process = (True if label in DEPTH_LABELS else bool(self.settings.value("process", False))
                       if is_unnamed_axis(label) else False)
        noise = chosen.get("noise") or layer_noise_model(layer) or self.settings.value("noise", None)
        return {"process": bool(process), "noise": noise if noise in NOISE_CHOICES else _library_default("noise")}

    def _apply_layer_choices(self, layer: Any) -> None:
        self._layer_defaults = True
        try:
            self.process.reset_choices()
            if layer is None:
                return
            start = self._starting_choices(layer)
            if start["process"] in list(self.process.choices):
                self.process.value = start["process"]
            if self.noise.value != start["noise"]:
                self.noise.value = start["noise"]
        finally:
            self._layer_defaults = False
        self._volume_note()

    def _volume_note(self) -> None:
        """Say why volume mode is unusual on an axis named as something else than depth (the info line)."""
        layer = self.image.value
        label = volume_axis_label(layer) if layer is not None else ""
        if self.process.value and label in TIME_LABELS:
            self.info.value = (f"Note: {layer.name!r} has a time axis ({label!r}) where a volume has depth: as a "
                               f"volume, its frames are smoothed together (moving things blur). Plane by plane "
                               f"keeps each frame on its own.")
            self.info.visible = True
        elif self.process.value and label not in DEPTH_LABELS and not is_unnamed_axis(label):
            self.info.value = (f"Note: {layer.name!r} has a {label!r} axis where a volume has depth: as a volume, "
                               f"its planes along it (channels, say) are smoothed together. Plane by plane keeps "
                               f"each on its own.")
            self.info.visible = True
        elif self.info.value.startswith("Note:"):
            self._show_info("")

    def _on_noise_changed(self, *_: Any) -> None:
        pg = self.noise.value == "poisson-gaussian"
        self.gain.enabled = self._gain_label.enabled = pg
        self._estimate_ahead()
        self._schedule_preview()

    def _mode_choices(self, _widget: Any = None) -> list[tuple[str, str]]:
        from restore.denoise import CONVEX_PENALTIES

        convex = getattr(self, "penalty", None) is None or self.penalty.value in CONVEX_PENALTIES
        return [(_MODE_LABELS[m], m) for m in LAM_MODES if convex or m != "sure"]

    # -- events ------------------------------------------------------------

    def _on_warm(self) -> None:
        if self._inactive:
            return
        self._warm_job = None
        if self.status.value.startswith("Compiling"):
            self.status.value = "Ready."

    def _on_active(self, *args: Any) -> None:
        if not getattr(self, "_adding_preview", False):  # (called while the base class is set up, too)
            super()._on_active(*args)

    def _on_layers_changed(self, *_: Any) -> None:
        if self._preview_layer is not None and not self._present(self._preview_layer):
            self._preview_layer = None
            self._preview_shown = None
        gone = self._preview_layer is not None and not self._present(self._preview_source)
        if gone:  # a preview of nothing in the viewer: removed, and the image now chosen previewed afresh
            self._stop_preview()
            self._remove_preview_layer()
        super()._on_layers_changed()
        if gone and self.image.value is not None:
            self._schedule_preview()

    def _on_image_changed(self, *_: Any) -> None:
        if self._inactive:
            return
        layer = self.image.value
        if self._watched_layer is not None:
            try:
                self._watched_layer.events.data.disconnect(self._on_data_changed)
            except (RuntimeError, TypeError, ValueError):  # already gone
                pass
        changed = getattr(self._watched_layer, "unique_id", None) != getattr(layer, "unique_id", None)
        self._watched_layer = layer
        if layer is not None:
            layer.events.data.connect(self._on_data_changed)
        if changed:
            self._show_info("")  # the numbers shown were another layer's
        self._apply_layer_choices(layer)
        self._estimate_ahead()

    def _estimate_ahead(self) -> None:
        """Start the chosen layer's noise estimate, which its first preview would wait for (:func:`estimate_ahead`)."""
        ahead = None
        if not self._inactive and not run_sync():  # (synchronous: debugging and tests, work starts when asked)
            try:
                source, params = Source.of(self.image.value, multiscale_ok=True), self.params()
            except Exception:  # noqa: BLE001 - no layer, or settings the preview will refuse with their message
                source = None
            if source is not None:
                estimate_ahead(source, params, self._lam_cache)
                ahead = self._lam_cache.get((source.key, "noise", params.noise))
        for other in self._aheads:  # another layer's or noise model's, no task waiting for it: not needed now
            if other is not ahead and not other.adopted:
                other.stop()
        self._aheads = [a for a in self._aheads if a.value() is None and a.joinable]  # those still running
        if isinstance(ahead, Ahead) and ahead not in self._aheads:
            self._aheads.append(ahead)

    def _on_data_changed(self, *_: Any) -> None:
        self._lam_cache.clear()
        self._estimate_ahead()  # the new data's (the old data's estimate, if it runs, is stopped)
        self._volumes.clear()
        self._preview_shown = None
        self._schedule_preview()

    def _on_penalty_changed(self, *_: Any) -> None:
        from restore.denoise import CONVEX_PENALTIES

        mode = self.lam_mode.value
        self.lam_mode.reset_choices()
        if mode == "sure" and self.penalty.value not in CONVEX_PENALTIES:
            self.lam_mode.value = "rule"
        self._schedule_preview()

    def _on_method_changed(self, *_: Any) -> None:
        """Show the wavelet method's own settings only with it; the strength applies to both."""
        wavelet = self.method.value == "wavelet"
        for w in (self.cycle_spins, self.lam_mode, self.lam, self.penalty, self.wavelet, self.penalize_approx):
            w.visible = wavelet
        self.multiplier.enabled = not wavelet or self.lam_mode.value != "manual"
        self._schedule_preview()

    def _on_sigma_auto_changed(self, auto: bool) -> None:
        self.sigma.enabled = not auto
        self._estimate_ahead()
        self._schedule_preview()

    def _on_mode_changed(self, mode: str) -> None:
        manual = mode == "manual"
        self.lam.enabled = manual
        self.multiplier.enabled = not manual or self.method.value != "wavelet"
        if manual and self.lam.value == 0 and self._last_info is not None:
            self.lam.value = self._last_info.lam[0]
        self._schedule_preview()

    def _on_dims_changed(self, *_: Any) -> None:
        layer = self.image.value
        if layer is not None and np.ndim(layer.data) > (3 if layer.rgb else 2):
            self._schedule_preview()

    def _on_preview_toggled(self, on: bool) -> None:
        if on:
            self.update_preview()
            return
        self._timer.stop()
        self._stop_preview()
        self._remove_preview_layer()

    # -- preview -----------------------------------------------------------

    def _schedule_preview(self, *_: Any) -> None:
        if self.preview.value and not self._inactive:
            if self.image.value is None:  # the last image left: nothing to preview, and nobody asked to be told so
                self._timer.stop()
            else:
                self._timer.start()

    def _plane_in_view(self) -> bool:
        """Whether the viewer shows a y-x plane in 2-D (not a 3-D or transposed view)."""
        dims = self._viewer.dims
        return dims.ndisplay == 2 and list(dims.displayed) == [dims.ndim - 2, dims.ndim - 1]

    def _view(self, layer: Any) -> tuple[tuple[int, int, int, int] | None, tuple[float, float] | None]:
        """The visible box of the layer's current plane (data pixels) and the view's centre there."""
        if not self._plane_in_view():
            return None, None  # a 3-D or transposed view: no box of this plane is "in view"
        dims = self._viewer.dims
        (r0, c0), (r1, c1) = np.asarray(layer.corner_pixels)[:, -2:]
        if layer.multiscale:  # corners in pixels of the level drawn: to full resolution
            fy, fx = np.asarray(layer.downsample_factors[layer.data_level], dtype=float)[-2:]
            (h, w) = plane_shape(layer)
            r0, c0 = int(np.floor(r0 * fy)), int(np.floor(c0 * fx))
            r1, c1 = min(int(np.ceil((r1 + 1) * fy)), h) - 1, min(int(np.ceil((c1 + 1) * fx)), w) - 1
        visible = (int(r0), int(r1) + 1, int(c0), int(c1) + 1) if r1 > r0 and c1 > c0 else None
        point = np.asarray(dims.point, dtype=float)
        point[-2:] = np.asarray(_camera(self._viewer).center, dtype=float)[-2:]
        centre = tuple(float(v) for v in np.asarray(layer.world_to_data(point))[-2:])
        return visible, centre  # type: ignore[return-value]

    def update_preview(self) -> None:
        """Denoise the part of the current plane in view into the preview layer (at once, no delay)."""
        self._timer.stop()
        if not self.preview.value or self._inactive:
            return
        try:
            layer = self.image.value
            source = Source.of(layer, multiscale_ok=True)
            params = self.params()
            source.check(params)
            idx = current_plane_index(layer, self._viewer.dims.point)
            visible, centre = self._view(layer)
            wavelet = params.method == "wavelet"
            depth, max_pixels = None, self.PREVIEW_MAX_PIXELS if wavelet else self.PREVIEW_MAX_PIXELS_NONLOCAL
            if params.volume:  # a sub-volume of planes around the current one; as many pixels in all
                n_z = np.shape(source.data)[len(idx) - 1]
                size = min(n_z, self.PREVIEW_DEPTH_PLANES)
                z0 = int(min(max(0, idx[-1] - size // 2), n_z - size))
                voxels = self.PREVIEW_MAX_VOXELS if wavelet else self.PREVIEW_MAX_VOXELS_NONLOCAL
                depth, max_pixels = (z0, z0 + size), voxels // size
            region, capped = preview_region(plane_shape(layer), visible, centre, max_pixels=max_pixels,
                                            margin=self.PREVIEW_MARGIN_PX, quantum=self.PREVIEW_QUANTUM_PX)
            if depth is not None:
                depth = self._kept_depth(layer, source, idx, params, region, depth)
        except Exception as exc:  # noqa: BLE001
            self._stop_preview()  # the last preview no longer shows these settings or this layer
            self._remove_preview_layer()
            self.show_error(exc)
            return
        shown = (layer.unique_id, source.key, idx, params)
        prev = self._preview_shown
        if (prev is not None and prev[:4] == shown and self._preview_layer is not None
                and (prev[4] == region or (not capped and not prev[5] and visible is not None
                                           and _covers(prev[4], visible)))):
            return  # the preview already shows this view
        self._stop_preview()
        self._install_close_hook()
        r0, r1, c0, c1 = region
        size = f"{r1 - r0}\u00d7{c1 - c0}"
        if not self._plane_in_view():
            note = (f"Preview of the current plane ({size} pixels): the view is 3-D or shows other axes, "
                    "switch to 2-D to see it in place")
        elif capped:
            note = f"Preview: a {size} region around the view's centre (zoom in to preview elsewhere)"
        else:
            note = f"Preview of the part in view ({size} pixels)"
        if depth is not None:
            note += f", denoised as a volume of {depth[1] - depth[0]} planes"
        self.status.value = note + "\u2026"
        shown = shown + (region, capped, depth)
        job = Job(preview_task, source, idx, region, params, self._lam_cache, depth, self._volumes,
                  on_yield=lambda v: self._on_preview_result(v, source, idx, region, shown, note, params, depth),
                  on_error=self._on_preview_error, on_finish=self._on_preview_finished)
        self._preview_job = job
        job.start()

    def _on_preview_error(self, exc: BaseException) -> None:
        """The library refused these settings or this layer: the last preview shows neither any more."""
        self._remove_preview_layer()
        self.show_error(exc)

    def _kept_depth(self, layer: Any, source: Source, idx: tuple[int, ...], params: DenoiseParams,
                    region: tuple[int, int, int, int], depth: tuple[int, int]) -> tuple[int, int]:
        """The volume preview's planes: the last ones while the current plane lies well inside them, else ``depth``.

        Same layer, settings and region: that sub-volume is kept, denoised,
        and shows the plane at once, as long as the plane is at least
        ``PREVIEW_EDGE_SHARE`` of its depth away from each end that is not the
        volume's own.
        """
        prev = self._preview_shown
        if prev is None or prev[0] != layer.unique_id or prev[1] != source.key or prev[3] != params:
            return depth
        p_idx, p_region, p_depth = prev[2], prev[4], prev[6] if len(prev) > 6 else None
        if p_depth is None or p_region != region or p_idx[:-1] != idx[:-1]:
            return depth
        (z0, z1), z = p_depth, idx[-1]
        n_z = np.shape(source.data)[len(idx) - 1]
        margin = int(np.ceil(self.PREVIEW_EDGE_SHARE * (z1 - z0)))
        low = 0 if z0 == 0 else z0 + margin
        high = n_z - 1 if z1 == n_z else z1 - 1 - margin
        return p_depth if low <= z <= high else depth

    def _on_preview_result(self, value: Any, source: Source, idx: tuple[int, ...],
                           region: tuple[int, int, int, int], shown: tuple[Any, ...], note: str,
                           params: DenoiseParams, depth: tuple[int, int] | None = None) -> None:
        if not isinstance(value, Output) or self._inactive or not self.preview.value:
            return
        out, info = value.value
        layer = source.layer
        if not self._present(layer):
            return
        data = out.reshape((1,) * len(idx) + out.shape)
        noise = None
        if isinstance(info, tuple):  # a whole plane or volume: its lam, and the photon model
            info, noise = info
        if isinstance(info, LamInfo) and not info.provisional:  # a quick answer's lam is not the one to keep
            self._last_info = info
        self._show_info(format_info(info, params, noise))
        provisional = bool(getattr(info, "provisional", False))  # a quick answer while the final one runs
        record = {"widget": self.KIND, "preview": True, "source": layer.name, "plane": list(idx),
                  "region": list(region), "volume_planes": None if depth is None else list(depth),
                  "method": "wavelet" if provisional else params.method, "provisional": provisional}
        kwargs = layer_kwargs(layer, f"{layer.name} [preview]", record)
        kwargs["translate"] = offset_translate(layer, idx + (region[0], region[2]))
        prev = self._preview_layer
        # another layer's preview has its transform (rotate, shear, affine) and look: made afresh
        if prev is not None and (not self._present(prev) or bool(prev.rgb) != bool(layer.rgb)
                                 or prev.data.ndim != data.ndim or self._preview_source is not layer):
            self._remove_preview_layer()
            prev = None
        if prev is not None:
            prev.data = data
            for attr in ("name", "scale", "translate", "contrast_limits", "metadata"):
                setattr(prev, attr, kwargs[attr])
        else:
            selection = self._viewer.layers.selection
            previous = set(selection)
            self._adding_preview = True  # the selection moves and comes back: the image box must not follow
            try:
                self._preview_layer = self._viewer.add_image(data, **kwargs)
                selection.clear()  # a preview is transient: the user's selection stays as it was
                selection.update(previous)
            finally:
                self._adding_preview = False
        self._preview_source = layer
        self._preview_shown = shown
        if not getattr(info, "provisional", False):
            self.status.value = note + "."

    def _show_info(self, text: str) -> None:
        self.info.value = f"Used: {text}" if text else ""
        self.info.visible = bool(text)

    def _on_preview_finished(self) -> None:
        if self._preview_job is not None and self._preview_job.done:
            self._preview_job = None

    def _stop_preview(self) -> None:
        job, self._preview_job = self._preview_job, None
        if job is not None and job.running:
            job.cancel()

    def _remove_preview_layer(self) -> None:
        layer, self._preview_layer = self._preview_layer, None
        self._preview_shown = None
        if layer is not None and self._present(layer):
            self._viewer.layers.remove(layer)

    def _resumed(self) -> None:
        self._preview_shown = None  # a preview that came while closing was dropped
        self._schedule_preview()

    def _stop_jobs(self) -> None:
        self._timer.stop()
        for ahead in self._aheads:
            ahead.stop()
        job = self._preview_job
        self._stop_preview()
        if job is not None:
            job.wait(2.0)
        camera = _camera(self._viewer)
        for event, cb in ((camera.events.center, self._schedule_preview), (camera.events.zoom, self._schedule_preview),
                          (self._viewer.dims.events.current_step, self._on_dims_changed)):
            try:
                event.disconnect(cb)
            except (RuntimeError, TypeError, ValueError):
                pass

    # -- sigma -------------------------------------------------------------

    def estimate_sigma(self, *_: Any) -> Job | None:
        """Estimate sigma on the current plane (in the background), fill the box and switch auto off.

        With Poisson-Gaussian noise, estimate the layer's gain and read noise
        instead (on a bounded part of it) and fill both boxes. With 'auto',
        estimate the layer's noise model first (the library's choice, kept
        for the layer): Poisson-Gaussian fills gain and read noise, Gaussian
        is estimated on the plane as for Gaussian noise (a sigma given with
        'auto' is Gaussian noise's, as in the library).
        """
        if self.runner.busy:
            return None
        try:
            layer = self.image.value
            source = Source.of(layer, multiscale_ok=True)
            idx = current_plane_index(layer, self._viewer.dims.point)
            params = replace(self.params(), gain=None, sigma=None)
        except Exception as exc:  # noqa: BLE001
            self.show_error(exc)
            return None
        self._install_close_hook()
        if params.noise != "gaussian":
            def found(noise: NoiseInfo | float) -> None:
                if not isinstance(noise, NoiseInfo):  # 'auto' chose Gaussian noise: the plane's sigma
                    est = _layer_estimate(self._lam_cache, source, params.noise)
                    self.sigma.value = noise
                    self.sigma_auto.value = False
                    self.status.value = (f"Estimated \u03c3 = {noise:.4g} on the plane shown"
                                         + (f" ({est.describe()})." if est is not None else "."))
                    return
                self.noise.value = "poisson-gaussian"
                self.gain.value, self.sigma.value = noise.gain, noise.sigma
                self.sigma_auto.value = False
                self.status.value = f"Estimated on {layer.name!r}: {noise.text()}."

            return self._start(Task(_estimate_layer, (source, params, self._lam_cache, idx),
                                    text="Estimating the photon noise\u2026", on_return=found,
                                    inputs=(layer,), layers=self._viewer.layers))

        def done(value: float) -> None:
            self.sigma.value = value
            self.sigma_auto.value = False
            self.status.value = f"Estimated \u03c3 = {value:.4g} on the plane shown."

        return self._start(Task(estimate_task, (source, idx), text="Estimating the noise level\u2026",
                                on_return=done, inputs=(layer,), layers=self._viewer.layers))

    # -- run ---------------------------------------------------------------

    def _start(self, task: Task) -> Job | None:
        """Run ``task`` with a busy bar until its first progress (the Estimate button's jobs)."""
        on_output = task.on_output
        task = replace(task, func=busy_until_progress(task.func),
                       on_output=lambda value: self._on_output(value, on_output))
        self._set_busy(False)
        return self.runner.start(task)

    def _set_busy(self, on: bool) -> None:
        """A busy bar (Qt's range 0-0: it moves by itself), or the bar of real fractions."""
        self.progress.native.setRange(0, 0 if on else PROGRESS_STEPS)

    def _on_output(self, value: Any, then: Any) -> None:
        if isinstance(value, Busy):
            if not self._inactive:
                self._set_busy(value.on)
        elif then is not None:
            then(value)

    def _shown_views(self, layer: Any) -> list[View]:
        """What napari draws of a layer of this shape (its result's too), as :data:`View` s.

        The slider's index on each axis not displayed, the displayed axes
        whole; a multiscale layer: the part in view at the level drawn, and
        its thumbnail (the coarsest level, whole), which napari also draws.
        """
        dims = self._viewer.dims
        n = int(layer.ndim)
        offset = int(dims.ndim) - n
        displayed = {int(a) - offset for a in dims.displayed if int(a) >= offset}
        multiscale = bool(getattr(layer, "multiscale", False))
        pos = np.asarray(layer.world_to_data(tuple(dims.point)), float)[-n:]

        def view(level: int, in_view: bool) -> View:
            shape = np.shape(layer.data[level] if multiscale else layer.data)[:n]
            factors = np.asarray(layer.downsample_factors[level], float)[:n] if multiscale else np.ones(n)
            corners = np.asarray(layer.corner_pixels) if in_view and multiscale and dims.ndisplay == 2 else None
            where: list[Any] = []
            for a in range(n):
                if a in displayed:
                    lo, hi = (0, shape[a]) if corners is None else (int(corners[0, a]), int(corners[1, a]) + 1)
                    where.append((max(0, lo), min(int(shape[a]), max(hi, lo + 1))))
                else:
                    where.append(int(np.clip(np.round(pos[a] / factors[a]), 0, shape[a] - 1)))
            return level, tuple(where)

        if not multiscale:
            return [view(0, True)]
        return [view(int(layer.data_level), True), view(len(layer.data) - 1, False)]

    def _task(self) -> Task:
        params = self.params()
        layers = self._inputs(bool(self.all_selected.value))
        if not layers:
            raise ValueError("choose an image layer first")
        sources = [Source.of(layer, multiscale_ok=True) for layer in layers]
        for source in sources:
            source.check(params)
        views = [self._shown_views(s.layer) if s.lazy else [] for s in sources]
        self._apply_infos = []
        self._show_info("")  # until this run's numbers come, none of another layer's
        n = len(sources)
        text = f"Denoising {n} images\u2026" if n > 1 else f"Denoising {layers[0].name!r}\u2026"
        return Task(busy_until_progress(denoise_task), (sources, params, self._lam_cache, views), text=text,
                    inputs=tuple(layers), layers=self._viewer.layers,
                    on_output=lambda value: self._on_output(value, lambda result: self._on_result(result, params)),
                    done_text=lambda: f"Done: {', '.join(repr(n) for n in self._added)}.")

    def _on_result(self, result: Denoised, params: DenoiseParams) -> None:
        layer = result.source.layer
        if not self._present(layer):
            return
        lams = [i for i in result.infos if isinstance(i, LamInfo)]
        record: dict[str, Any] = {"source": layer.name, "method": params.method, "params": asdict(params),
                                  "lam": [list(i.lam) for i in lams],
                                  "sigma": [list(i.sigma) for i in lams],
                                  "lazy": result.source.lazy}
        if params.method != "wavelet":  # lam set by the method from sigma
            record["lam"] = record["sigma"] = None
            record["strength"] = params.multiplier
        elif result.source.lazy:  # no one lam: each Dask block chooses its own
            record["lam"] = record["sigma"] = None
            if params.lam_mode != "manual":
                record["lam_chosen"] = f"by {_MODE_LABELS[params.lam_mode]} in each block"
            else:
                record["lam"] = [float(params.lam)]
        if result.noise is not None:
            record["noise"] = result.noise.record()
            record["lam_units"] = "stabilised (generalized Anscombe: noise 1)"  # so are the sigma recorded
        kwargs = layer_kwargs(layer, "", {})
        if result.source.multiscale:
            kwargs["multiscale"] = True
        out = self.add_result(layer, result.data, f"{layer.name} [{params.tag}]", record, kwargs)
        self._apply_infos = list(result.infos)
        if lams:
            self._last_info = lams[-1]
        self._show_info(format_info(result.infos, params, result.noise))
        if result.noise is not None and (result.noise.gain_estimated or result.noise.sigma_estimated):
            from napari.utils.notifications import show_info

            show_info(f"restore-tree: photon noise of {layer.name!r}: {result.noise.text()}")
        self._added.append(out.name)

    def run(self) -> Any:
        """Denoise the chosen image (or every selected one) in the background; add the results as layers."""
        self._added: list[str] = []
        if not self.runner.busy:
            self._set_busy(False)
        return super().run()

    apply = run


def _covers(region: tuple[int, int, int, int], box: tuple[int, int, int, int]) -> bool:
    return region[0] <= box[0] and region[1] >= box[1] and region[2] <= box[2] and region[3] >= box[3]

