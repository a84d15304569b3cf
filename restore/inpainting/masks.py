"""What an inpainting mask covers, to tell a mask a user cannot mean (an inverted one) from heavy pixel loss."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from .dictionary import PATCH_SIZE

__all__ = ["MaskCoverage", "SuspectMaskWarning", "mask_coverage"]

# A mask is suspect when it marks most of the image AND leaves a large part of it out of reach of the patches:
# random loss of 90 % leaves every missing pixel within a few pixels of a known one, an inverted text mask leaves
# most of the image tens of pixels away, where only the smooth interpolant reaches.
_SUSPECT_MISSING = 0.5  # fraction of the image's pixels missing
_SUSPECT_FAR = 0.25  # fraction of the image's pixels further than a patch side from any known pixel


class SuspectMaskWarning(UserWarning):
    """A mask that cannot be meant (see :attr:`MaskCoverage.suspect`); ``coverage`` says what it covers."""

    def __init__(self, message: str, coverage: MaskCoverage) -> None:
        super().__init__(message)
        self.coverage = coverage


@dataclass(frozen=True)
class MaskCoverage:
    """What a mask covers.

    Attributes
    ----------
    missing : float
        Fraction of the pixels that are missing.
    far : float
        Fraction of the pixels further than ``reach`` pixels from any known
        pixel: there the patches see nothing and the fill is the smooth
        interpolant. NaN when at most half the pixels are missing (it is
        then not measured: such a mask is never suspect).
    reach : int
        The distance, in pixels (the patch side).
    """

    missing: float
    far: float
    reach: int

    @property
    def suspect(self) -> bool:
        """Whether the mask marks most of the image and leaves much of it out of the patches' reach."""
        return self.missing > _SUSPECT_MISSING and self.far > _SUSPECT_FAR

    def describe(self) -> str:
        """One line: what the mask covers."""
        text = f"marks {self.missing:.0%} of the image as missing"
        if self.far == self.far:  # measured
            text += f", {self.far:.0%} of it further than {self.reach} pixels from any known pixel"
        return text


def mask_coverage(mask: ArrayLike, patch_size: int = PATCH_SIZE) -> MaskCoverage:
    """What a mask (True = missing) covers; see :class:`MaskCoverage`.

    Parameters
    ----------
    mask : array_like of bool, shape (M, N)
        True where pixels are missing.
    patch_size : int, default 8
        Side of the patches: the reach of the known pixels.

    Returns
    -------
    MaskCoverage
    """
    from scipy.ndimage import distance_transform_edt

    m = np.asarray(mask, dtype=bool)
    missing = float(np.count_nonzero(m)) / m.size if m.size else 0.0
    if missing in (0.0, 1.0):
        return MaskCoverage(missing, missing, patch_size)
    if missing <= _SUSPECT_MISSING:  # not suspect whatever its reach: the distance transform is not needed
        return MaskCoverage(missing, float("nan"), patch_size)
    far = float(np.count_nonzero(distance_transform_edt(m) > patch_size)) / m.size
    return MaskCoverage(missing, far, patch_size)
