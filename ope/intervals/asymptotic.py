"""Asymptotic (normal and Student-t) confidence intervals from a value and its standard error.

Both are Wald intervals ``value +/- c * std_error``. They are valid as ``n`` grows when the
estimator is asymptotically normal; with heavy-tailed importance weights they can undercover
badly at moderate ``n`` (see the notes in :mod:`ope.estimators`), which is why the finite-sample
methods of :mod:`ope.intervals.bounded` exist.
"""

from __future__ import annotations

import math

from ope._validation import (
    FLOAT64_MAX,
    check_confidence_level,
    check_positive_int,
    check_real,
    parameter_error,
)
from ope.exceptions import EstimationError
from ope._docstrings import fill_doc
from ope.intervals._shared import normal_quantile
from ope.intervals._types import ConfidenceInterval

__all__ = ["normal_interval", "t_interval"]

#: The parameter text both Wald intervals share (numpydoc, written once).
_WALD_PARAMETERS = """value : float
        The point estimate.
    std_error : float
        Its standard error (>= 0)."""

#: The confidence level and the result, also shared.
_WALD_LEVEL_RETURNS = """confidence_level : float, default 0.95
        Nominal coverage, in (0, 1).

    Returns
    -------
    ConfidenceInterval
        ``value -/+ c * std_error`` with ``c`` the two-sided quantile of the level.

    Raises
    ------
    ope.ParameterError
        A confidence level outside (0, 1), a non-finite ``value``, a negative or non-finite
        ``std_error`` (for the t interval also ``n`` that is not a whole number >= 2).
    ope.EstimationError
        An end of the interval beyond the float64 range (about 1.8e308)."""


def _level(confidence_level: object) -> float:
    """:func:`ope._validation.check_confidence_level`, without its general checks for a float
    in (0, 1): the level of every estimate of an evaluation, checked once where it entered."""
    if isinstance(confidence_level, float) and 0.0 < confidence_level < 1.0:
        return float(confidence_level)
    return check_confidence_level(confidence_level)


def _wald(value: float, std_error: float, quantile: float, method: str) -> ConfidenceInterval:
    """``value +/- quantile * std_error`` after checking that both are finite, ``se >= 0``.

    An end beyond the float64 range (a value near 1e308, or a standard error that large) is
    refused by name rather than returned as inf.
    """
    # a float (numpy's float64 too) is a real number as it is: the checks below suffice
    v = (
        float(value)
        if isinstance(value, float)
        else check_real(value, "value", example="value=0.5")
    )
    se = (
        float(std_error)
        if isinstance(std_error, float)
        else check_real(std_error, "std_error", example="std_error=0.1")
    )
    if not math.isfinite(v):
        raise parameter_error("value", "finite", value, "value=0.5")
    if not (math.isfinite(se) and se >= 0):
        raise parameter_error("std_error", "finite and >= 0", std_error, "std_error=0.1")
    half = quantile * se
    low, high = v - half, v + half
    if not (math.isfinite(low) and math.isfinite(high)):
        raise EstimationError(
            f"the {method} interval value -/+ {quantile:.4g} * std_error (value={v!r}, "
            f"std_error={se!r}) has an end beyond the float64 range (+-{FLOAT64_MAX:.4g}). "
            "Divide the rewards (and reward_range) by a power of ten, estimate, and multiply "
            "the interval back: it is scale-equivariant."
        )
    return ConfidenceInterval(low, high)


def normal_interval(
    value: float, std_error: float, *, confidence_level: float = 0.95
) -> ConfidenceInterval:
    """Two-sided normal (Wald) interval.

    Parameters
    ----------
    <Wald parameters>
    <Wald level and returns>

    Notes
    -----
    :math:`\\hat V \\pm z_{(1+\\gamma)/2}\\,\\widehat{\\mathrm{se}}` with :math:`\\gamma` the
    confidence level and :math:`z_q` the standard normal quantile.

    References
    ----------
    .. [1] L. Wasserman, *All of Statistics*, Springer, 2004, Theorem 6.16 (normal-based
       intervals).

    Examples
    --------
    >>> from ope.intervals.asymptotic import normal_interval
    >>> ci = normal_interval(0.5, 0.1, confidence_level=0.95)
    >>> round(ci.low, 4), round(ci.high, 4)
    (0.304, 0.696)
    """
    level = _level(confidence_level)
    return _wald(value, std_error, normal_quantile(0.5 + level / 2.0), "normal")


def t_interval(
    value: float, std_error: float, n: int, *, confidence_level: float = 0.95
) -> ConfidenceInterval:
    """Two-sided Student-t interval with ``n - 1`` degrees of freedom.

    Parameters
    ----------
    <Wald parameters>
    n : int
        Number of rows the standard error was computed from (>= 2).
    <Wald level and returns>

    Notes
    -----
    :math:`\\hat V \\pm t_{n-1,(1+\\gamma)/2}\\,\\widehat{\\mathrm{se}}`: the two-sided quantile
    :math:`(1+\\gamma)/2`, not the one-sided :math:`\\gamma`.

    References
    ----------
    .. [1] "Student" (W. S. Gosset), "The probable error of a mean", Biometrika 6(1), 1908.

    Examples
    --------
    >>> from ope.intervals.asymptotic import t_interval
    >>> ci = t_interval(0.5, 0.1, 5, confidence_level=0.95)
    >>> round(ci.low, 4), round(ci.high, 4)
    (0.2224, 0.7776)
    """
    level = check_confidence_level(confidence_level)
    count = check_positive_int(n, "n", minimum=2)
    try:
        df = float(count - 1)
    except OverflowError:  # more rows than float64 counts: the t quantile is the normal one
        df = math.inf
    if math.isinf(df):
        return _wald(value, std_error, normal_quantile(0.5 + level / 2.0), "t")
    from scipy import stats  # about 1 s to import: only when a t interval is asked for

    return _wald(value, std_error, float(stats.t.ppf(0.5 + level / 2.0, df=df)), "t")


for _function in (normal_interval, t_interval):
    fill_doc({"Wald parameters": _WALD_PARAMETERS, "Wald level and returns": _WALD_LEVEL_RETURNS})(
        _function
    )
