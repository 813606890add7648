"""What the interval methods share: the check of logged rows and the reward units.

Arguments and arrays go through :mod:`ope._validation` (one checker per glossary term); what is
specific to the methods that read the rows (betting, empirical likelihood), per-row importance
weights paired with rewards, is checked here once. The numpydoc text that several interval
functions share is filled in by :func:`ope._docstrings.fill_doc`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ope._validation import (
    MAX_FINITE_WEIGHT,
    as_float_array,
    check_finite,
    check_rewards_in_range,
    first_rows,
    require_reward_range,
)
from ope.exceptions import EstimationError, ValidationError

__all__ = ["in_reward_units", "weight_reward_rows"]


def weight_reward_rows(
    weight: ArrayLike, reward: ArrayLike, reward_range: object, method: str
) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Validated per-row ``weight`` and ``reward`` (float64 vectors) and the reward range.

    Parameters
    ----------
    weight, reward : array_like, shape (n,)
        Importance weights (finite, non-negative, at most :data:`ope._validation.MAX_FINITE_WEIGHT`,
        1e150, whose square is still a float64 number) and rewards (finite, inside
        ``reward_range``).
    reward_range : (float, float)
        The a priori reward range; required.
    method : str
        The interval method, named in the error when ``reward_range`` is missing.

    Returns
    -------
    w, r : numpy.ndarray
        float64 vectors of the same length ``n >= 1``.
    r_min, r_max : float
        The checked reward range.

    Raises
    ------
    ope.MissingBoundsError
        ``reward_range`` is None.
    ope.ParameterError
        ``reward_range`` is malformed.
    ope.ValidationError
        Arrays of the wrong shape or lengths, non-finite, negative or overflowing (above 1e150)
        weights, non-finite rewards or rewards outside the range.
    ope.EstimationError
        No rows.

    Examples
    --------
    >>> from ope.intervals._shared import weight_reward_rows
    >>> w, r, lo, hi = weight_reward_rows([0.5, 2.0], [1, 0], (0, 1), "betting")
    >>> w.dtype, r.tolist(), (lo, hi)
    (dtype('float64'), [1.0, 0.0], (0.0, 1.0))
    """
    r_min, r_max = require_reward_range(reward_range, method)
    w, r = (
        np.asarray(as_float_array(values, name, ndim=(1,)), dtype=np.float64)
        for name, values in (("weight", weight), ("reward", reward))
    )
    check_finite(w, "weight")
    check_finite(r, "reward")
    if w.shape != r.shape:
        raise ValidationError(
            f"`weight` and `reward` must have the same length, got {w.size} and {r.size}."
        )
    if w.size == 0:
        raise EstimationError("no rows: `weight` and `reward` are empty.")
    negative = w < 0
    if negative.any():
        count, first = first_rows(negative)
        raise ValidationError(
            f"`weight` must be non-negative; {count} rows are < 0 (first at row {first}). "
            "Weights are target/logging propensity ratios."
        )
    if float(w.max()) > MAX_FINITE_WEIGHT:
        count, first = first_rows(w > MAX_FINITE_WEIGHT)
        raise ValidationError(
            f"`weight` has {count} rows above {MAX_FINITE_WEIGHT:g} (first at row {first}: "
            f"{float(w[first])!r}); the squares of such weights are not float64 numbers. No "
            "logging propensity the logger acted on is that small: check the propensities."
        )
    check_rewards_in_range(r, (r_min, r_max))
    return w, r, r_min, r_max


def in_reward_units(x01: Any, r_min: float, r_max: float) -> Any:
    """``r_min + (r_max - r_min) * x01`` for ``x01`` clipped to [0, 1], kept inside the reward
    range (rounding cannot carry an end past ``r_max``, not even to inf at the float64 limit).

    Examples
    --------
    >>> from ope.intervals._shared import in_reward_units
    >>> in_reward_units(0.25, 10.0, 14.0), in_reward_units(1.0, 0.0, 1.7976931348623157e308)
    (11.0, 1.7976931348623157e+308)
    """
    unit = np.clip(np.asarray(x01, dtype=np.float64), 0.0, 1.0)
    value = np.clip(r_min + (r_max - r_min) * unit, r_min, r_max)
    return float(value) if value.ndim == 0 else value
