"""Asymptotic (normal and Student-t) confidence intervals from a value and its standard error.

Both are Wald intervals ``value +/- c * std_error``. They are valid as ``n`` grows when the
estimator is asymptotically normal; with heavy-tailed importance weights they can undercover
badly at moderate ``n`` (see the notes in :mod:`ope.estimators`), which is why the finite-sample
methods of :mod:`ope.intervals.bounded` exist.
"""

from __future__ import annotations

import math

from scipy import stats

from ope._validation import check_confidence_level, check_positive_int, check_real
from ope.exceptions import ParameterError
from ope.intervals._shared import fill_docstrings
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
        ``std_error`` (for the t interval also ``n`` that is not a whole number >= 2)."""


def _wald(value: float, std_error: float, quantile: float) -> ConfidenceInterval:
    """``value +/- quantile * std_error`` after checking that both are finite, ``se >= 0``."""
    v, se = check_real(value, "value"), check_real(std_error, "std_error")
    if not math.isfinite(v):
        raise ParameterError(f"`value` must be finite; got {value!r}.")
    if not (math.isfinite(se) and se >= 0):
        raise ParameterError(f"`std_error` must be finite and >= 0; got {std_error!r}.")
    half = quantile * se
    return ConfidenceInterval(v - half, v + half)


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
    level = check_confidence_level(confidence_level)
    return _wald(value, std_error, float(stats.norm.ppf(0.5 + level / 2.0)))


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
    return _wald(value, std_error, float(stats.t.ppf(0.5 + level / 2.0, df=count - 1)))


fill_docstrings(
    (normal_interval, t_interval),
    {"Wald parameters": _WALD_PARAMETERS, "Wald level and returns": _WALD_LEVEL_RETURNS},
)
