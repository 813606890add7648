"""Small typed results shared by the interval methods.

Both are named tuples (``low, high = ci`` keeps working) with typed fields and ``to_dict()``.
They have no HTML rendering of their own: a notebook shows them inside the result that carries
them (an :class:`ope.Estimate`), rendered by :mod:`ope.results`, which imports this module (so
this module cannot import the renderer back).
"""

from __future__ import annotations

import math

from typing import NamedTuple

__all__ = ["ConfidenceInterval", "BottouInterval", "within_range"]


def _width(self: ConfidenceInterval | BottouInterval) -> float:
    """``high - low``."""
    return self.high - self.low


def _to_dict(self: ConfidenceInterval | BottouInterval) -> dict[str, float]:
    """The fields as plain floats (JSON-ready), keys in field order."""
    return {name: float(value) for name, value in zip(self._fields, self)}


class ConfidenceInterval(NamedTuple):
    """A two-sided interval ``[low, high]`` (as in ``scipy.stats``).

    Examples
    --------
    >>> from ope.intervals import ConfidenceInterval
    >>> ci = ConfidenceInterval(0.25, 0.5)
    >>> low, high = ci
    >>> ci.width, ci.to_dict()
    (0.25, {'low': 0.25, 'high': 0.5})
    """

    low: float
    high: float

    @property
    def width(self) -> float:
        """``high - low``."""
        return _width(self)

    def to_dict(self) -> dict[str, float]:
        """The fields as plain floats (JSON-ready), keys in field order."""
        return _to_dict(self)


class BottouInterval(NamedTuple):
    """Bottou et al. (2013) interval for clipped importance sampling.

    ``outer_*`` bounds the clipped estimand (sampling uncertainty: shrinks with more logs of the
    same kind); ``inner_*`` bounds the true value given the clipped estimand (clipped or
    unsupported mass: more of the same logs do not shrink it); ``low``/``high`` combine both.

    Examples
    --------
    >>> from ope.intervals import BottouInterval
    >>> iv = BottouInterval(0.1, 0.6, 0.1, 0.3, 0.2, 0.5)
    >>> sorted(iv.to_dict())
    ['high', 'inner_high', 'inner_low', 'low', 'outer_high', 'outer_low']
    """

    low: float
    high: float
    outer_low: float
    outer_high: float
    inner_low: float
    inner_high: float

    @property
    def width(self) -> float:
        """``high - low``."""
        return _width(self)

    def to_dict(self) -> dict[str, float]:
        """The fields as plain floats (JSON-ready), keys in field order."""
        return _to_dict(self)


def within_range(
    iv: ConfidenceInterval, value_range: tuple[float, float] | None
) -> ConfidenceInterval:
    """``iv`` intersected with the range the estimand lies in (the a priori reward range): an
    interval entirely outside becomes the nearer end point, never an inverted interval; an
    interval with an infinite end, or no range, is returned as it is.

    Examples
    --------
    >>> from ope.intervals._types import ConfidenceInterval, within_range
    >>> within_range(ConfidenceInterval(-0.2, 0.5), (0.0, 1.0))
    ConfidenceInterval(low=0.0, high=0.5)
    >>> within_range(ConfidenceInterval(1.2, 1.5), (0.0, 1.0))
    ConfidenceInterval(low=1.0, high=1.0)
    """
    if value_range is None or not (math.isfinite(iv.low) and math.isfinite(iv.high)):
        return iv
    low, high = max(iv.low, value_range[0]), min(iv.high, value_range[1])
    if low > high:
        low = high = value_range[1] if iv.low > value_range[1] else value_range[0]
    return ConfidenceInterval(float(low), float(high))
