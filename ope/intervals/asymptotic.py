"""Asymptotic (normal and Student-t) confidence intervals from a value and its standard error.

Both are Wald intervals ``value +/- c * std_error``. They are valid as ``n`` grows when the
estimator is asymptotically normal; with heavy-tailed importance weights they can undercover
badly at moderate ``n`` (see the notes in :mod:`ope.estimators`), which is why the finite-sample
methods of :mod:`ope.intervals.bounded` exist.
"""

from __future__ import annotations

import math

from scipy import stats

from ope.intervals._types import ConfidenceInterval

__all__ = ["normal_interval", "t_interval"]


def _check_confidence_level(confidence_level: float) -> float:
    level = float(confidence_level)
    if not (0.0 < level < 1.0):
        raise ValueError(
            f"`confidence_level` must be strictly between 0 and 1 (e.g. 0.95); got "
            f"{confidence_level!r}."
        )
    return level


def _check_value_se(value: float, std_error: float) -> tuple[float, float]:
    v, se = float(value), float(std_error)
    if not math.isfinite(v):
        raise ValueError(f"`value` must be finite; got {value!r}.")
    if not (math.isfinite(se) and se >= 0):
        raise ValueError(f"`std_error` must be finite and >= 0; got {std_error!r}.")
    return v, se


def normal_interval(
    value: float, std_error: float, *, confidence_level: float = 0.95
) -> ConfidenceInterval:
    """Two-sided normal (Wald) interval.

    Parameters
    ----------
    value : float
        The point estimate.
    std_error : float
        Its standard error (>= 0).
    confidence_level : float, default 0.95
        Nominal coverage, in (0, 1).

    Returns
    -------
    ConfidenceInterval

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
    level = _check_confidence_level(confidence_level)
    v, se = _check_value_se(value, std_error)
    half = float(stats.norm.ppf(0.5 + level / 2.0)) * se
    return ConfidenceInterval(v - half, v + half)


def t_interval(
    value: float, std_error: float, n: int, *, confidence_level: float = 0.95
) -> ConfidenceInterval:
    """Two-sided Student-t interval with ``n - 1`` degrees of freedom.

    Parameters
    ----------
    value : float
        The point estimate.
    std_error : float
        Its standard error (>= 0).
    n : int
        Number of rows the standard error was computed from (>= 2).
    confidence_level : float, default 0.95
        Nominal coverage, in (0, 1).

    Returns
    -------
    ConfidenceInterval

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
    level = _check_confidence_level(confidence_level)
    v, se = _check_value_se(value, std_error)
    if int(n) != n or n < 2:
        raise ValueError(f"`n` must be an integer >= 2 for a t interval; got {n!r}.")
    half = float(stats.t.ppf(0.5 + level / 2.0, df=int(n) - 1)) * se
    return ConfidenceInterval(v - half, v + half)
