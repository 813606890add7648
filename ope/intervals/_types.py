"""Small typed results shared by the interval methods."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["ConfidenceInterval", "BottouInterval"]


class ConfidenceInterval(NamedTuple):
    """A two-sided interval ``[low, high]`` (as in ``scipy.stats``)."""

    low: float
    high: float

    @property
    def width(self) -> float:
        return self.high - self.low


class BottouInterval(NamedTuple):
    """Bottou et al. (2013) interval for clipped importance sampling.

    ``outer_*`` bounds the clipped estimand (sampling uncertainty: shrinks with more logs of the
    same kind); ``inner_*`` bounds the true value given the clipped estimand (clipped or
    unsupported mass: more of the same logs do not shrink it); ``low``/``high`` combine both.
    """

    low: float
    high: float
    outer_low: float
    outer_high: float
    inner_low: float
    inner_high: float

    @property
    def width(self) -> float:
        return self.high - self.low
