"""What the interval methods share: the check of logged rows, the reward units, the normal
quantile, the Maurer-Pontil margin and the arithmetic of Bottou's interval.

Arguments and arrays go through :mod:`ope._validation` (one checker per glossary term); what is
specific to the methods that read the rows (betting, empirical likelihood), per-row importance
weights paired with rewards, is checked here once. The numpydoc text that several interval
functions share is filled in by :func:`ope._docstrings.fill_doc`.
"""

from __future__ import annotations

import functools
import math
import statistics
from decimal import Decimal, getcontext, localcontext
from typing import Any, Final

import numpy as np
from numpy.typing import ArrayLike

from ope._validation import (
    MAX_FINITE_WEIGHT,
    as_float_array,
    check_finite,
    check_positive_int,
    check_rewards_in_range,
    first_rows,
    require_reward_range,
)
from ope.exceptions import EstimationError, ValidationError

__all__ = [
    "bottou_pieces",
    "check_interval_rows",
    "in_reward_units",
    "mp_margin",
    "normal_quantile",
    "weight_reward_rows",
]

#: Maurer & Pontil (2009), Theorem 4: the constant of the range term, 7 / 3
_MP_RANGE_CONSTANT: Final = 7.0 / 3.0


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


def check_interval_rows(n: object, *, minimum: int) -> int:
    """The number of rows behind an interval's statistics: a whole number, at least ``minimum``."""
    count = check_positive_int(n, "n", minimum=0)
    if count < minimum:
        raise EstimationError(
            f"this interval needs at least {minimum} rows, got n={count}. Collect more logs or use "
            "a method that does not need a sample variance (hoeffding)."
        )
    return count


def mp_margin(std: Any, n: int, value_range: Any, delta: float) -> Any:
    """One-sided Maurer-Pontil margin at failure probability ``delta``, from the sample standard
    deviation ``std`` (not the variance, whose square units would overflow first); floats or
    arrays (elementwise)."""
    log_term = math.log(2.0 / delta)
    variance_term = std * math.sqrt(2.0 * log_term / n)
    return variance_term + _MP_RANGE_CONSTANT * value_range * log_term / (n - 1)


def bottou_pieces(
    w_hat: Any,
    w_var: Any,
    y01: Any,
    y_sd01: Any,
    n: int,
    *,
    clip: Any,
    alpha: float,
    outer: str,
    r_min: float,
    r_max: float,
) -> tuple[Any, ...]:
    """The arithmetic of :func:`ope.intervals.bounded.bottou_interval` on checked statistics,
    floats or arrays (elementwise: every clip level of a profile at once).

    ``w_hat`` and ``w_var`` are the mean and variance of the clipped weights, ``y01`` and
    ``y_sd01`` the mean and standard deviation of the clipped product in units of the reward
    span, ``clip`` the clip level (None only with ``outer="normal"``). Returns ``(eps01, low,
    high, outer_low, outer_high, inner_low, inner_high)``: the outer margin in span units, then
    the six ends in reward units.
    """
    if outer == "bernstein":
        eps01 = mp_margin(y_sd01, n, clip, alpha / 4.0)
        xi = mp_margin(np.sqrt(w_var), n, clip, alpha / 2.0)
    else:
        eps01 = -normal_quantile(alpha / 4.0) * y_sd01 / math.sqrt(n)
        xi = -normal_quantile(alpha / 2.0) * np.sqrt(np.divide(w_var, n))
    w_lcl = np.minimum(1.0, np.maximum(0.0, np.subtract(w_hat, xi)))
    inner_high01 = y01 + (1.0 - w_lcl)

    def reward(x01: Any) -> Any:
        return in_reward_units(np.minimum(np.maximum(x01, 0.0), 1.0), r_min, r_max)

    outer_low = reward(y01 - eps01)
    return (
        eps01,
        outer_low,
        reward(inner_high01 + eps01),
        outer_low,
        reward(y01 + eps01),
        reward(y01),
        reward(inner_high01),
    )


#: Significant digits beyond those a tail probability loses in ``1 - erf``: the quantile's
#: Newton steps then carry many more correct digits than a float64 keeps.
_GUARD_DIGITS: Final = 40


def _pi(digits: int) -> Decimal:
    """pi to about ``digits`` significant digits (Machin: 16 atan(1/5) - 4 atan(1/239))."""

    def atan_inverse(k: int) -> Decimal:  # atan(1/k) by its alternating series
        x = Decimal(1) / k
        square, total, power, n = x * x, x, x, 1
        tiny = Decimal(10) ** -(digits + 5)
        while power > tiny:  # a loop over the series' terms (about digits / log10(k) of them)
            power *= square
            n += 2
            total += (-power if n % 4 == 3 else power) / n
        return total

    return 16 * atan_inverse(5) - 4 * atan_inverse(239)


def _upper_tail(z: Decimal, pi: Decimal) -> Decimal:
    """The standard normal upper tail ``1 - Phi(z)`` for ``z >= 0``, in the current precision.

    ``erf(x) = 2 exp(-x^2) / sqrt(pi) * sum_n (2 x^2)^n x / (1 * 3 * ... * (2n + 1))`` with
    ``x = z / sqrt(2)``: every term positive, so the sum loses nothing, and ``1 - erf`` loses
    the digits the precision was raised by.
    """
    x = z / Decimal(2).sqrt()
    two_x2 = 2 * x * x
    term, total, n = x, x, 0
    tiny = Decimal(10) ** -(getcontext().prec + 2)
    while term > tiny * total:  # a loop over the series' terms (about 2 x^2 + digits of them)
        n += 1
        term = term * two_x2 / (2 * n + 1)
        total += term
    erf = 2 * (-x * x).exp() / pi.sqrt() * total
    return (1 - erf) / 2


@functools.lru_cache(maxsize=256)
def normal_quantile(probability: float) -> float:
    """The standard normal quantile ``Phi^-1(probability)``, correctly rounded to float64.

    Newton steps on the upper tail in decimal arithmetic with many more digits than a float64
    holds, from :meth:`statistics.NormalDist.inv_cdf`, then one rounding to float64. It imports
    no scipy (the command line's start-up) and agrees with ``scipy.stats.norm.ppf`` to 1e-15
    relative (scipy's is sometimes a unit or two off in the last place: at 0.975 it gives
    1.959963984540054, one float64 above the rounded quantile). Each probability is computed
    once per process (cached): every estimate at one confidence level shares its quantile.

    Parameters
    ----------
    probability : float
        In [0, 1]: 0 gives -inf, 1 gives inf, NaN gives NaN.

    Returns
    -------
    float

    Examples
    --------
    >>> from ope.intervals._shared import normal_quantile
    >>> normal_quantile(0.975)
    1.9599639845400538
    >>> normal_quantile(0.5), normal_quantile(1 - 0.975) == -normal_quantile(0.975)
    (0.0, True)
    """
    p = float(probability)
    if not 0.0 < p < 1.0:
        return -math.inf if p == 0.0 else math.inf if p == 1.0 else math.nan
    if p == 0.5:
        return 0.0
    start = abs(statistics.NormalDist().inv_cdf(p))
    with localcontext() as ctx:
        # 1 - erf(x) cancels about x^2 / ln(10) digits: raise the precision by as many
        ctx.prec = _GUARD_DIGITS + 20 + int(start * start / (2 * math.log(10)))
        # the tail beyond |z|, exact (a float is a short decimal; 1 - p too, at this precision)
        tail = Decimal(p) if p < 0.5 else 1 - Decimal(p)
        pi = _pi(ctx.prec)
        z = Decimal(start)
        norm = (2 * pi).sqrt()
        for _ in range(4):  # Newton steps: each about doubles the correct digits (from ~15)
            density = (-z * z / 2).exp() / norm
            z += (_upper_tail(z, pi) - tail) / density
        magnitude = float(z)
    return -magnitude if p < 0.5 else magnitude
