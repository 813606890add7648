"""Anytime-valid off-policy confidence sequences (Karampatziakis, Mineiro & Ramdas 2021).

``betting_confidence_sequence(weight, reward, *, reward_range, confidence_level=0.95)`` returns
the lower and upper bound after each row, taking rows in the order given as time order;
``betting_interval(...)`` returns the bound after the last row. The guarantee is time-uniform:
with probability at least ``confidence_level`` *every* interval of the sequence covers the
target value, so the logs may be monitored continuously and the evaluation stopped at any
data-dependent time.

Only two things are assumed: rewards lie in an a priori range, and importance weights are
non-negative with conditional mean one given the past (true for a logging policy whose
propensities are known, even if it adapts over time). No bound on the weights is needed.

``betting_lower_bound(values, *, low, high, confidence_level=0.95)`` is the one-sided
fixed-sample betting bound of Waudby-Smith & Ramdas (2023) for the mean of bounded i.i.d. values
(e.g. the safety gate's per-row terms); it shares the predictable mean and variance of the rows
with the sequence above.
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import Any, Final

import numpy as np
from numpy.typing import ArrayLike

from ope._validation import (
    as_float_array,
    check_confidence_level,
    check_finite,
    check_value_bounds,
    first_rows,
    power_of_two_scale,
    user_stacklevel,
)
from ope.exceptions import EstimationError, MissingBoundsError, OverlapWarning, ValidationError
from ope._docstrings import fill_doc
from ope.intervals._shared import in_reward_units, weight_reward_rows
from ope.intervals._types import ConfidenceInterval

__all__ = [
    "betting_interval",
    "betting_confidence_sequence",
    "betting_lower_bound",
    "log_wealth",
    "lower_from_sums",
    "running_stats",
]

#: shape (and rate) of the truncated gamma mixing distribution over bets; 1 is the value of the
#: authors' reference implementation, and it makes the bound tightest after a few tens of rows
MIXTURE_RHO: Final = 1.0

#: bisection steps of the vectorized search over all times at once; each halves an interval of
#: length at most 1 on the normalized scale, so 50 steps reach 1e-15
BISECTION_STEPS: Final = 50

#: truncation c of the bets of :func:`betting_lower_bound`: lambda_t(m) <= c / m keeps every
#: capital factor >= 1 - c > 0 (wealth never hits 0 on one bad row); 1/2 is the value
#: Waudby-Smith & Ramdas (2023) use for their hedged capital process
BET_TRUNCATION: Final = 0.5

#: relative slack (of high - low) for values a float rounding outside [low, high]; they are clipped
VALUE_RANGE_SLACK: Final = 1e-12

#: absolute tolerance of the scalar root-finder on the normalized [0, 1] scale
ROOT_XTOL: Final = 1e-13

#: The Raises and Warns sections both functions share (numpydoc, written once).
_RAISES_AND_WARNS = """Raises
    ------
    MissingBoundsError
        If ``reward_range`` is None.
    ParameterError
        For a malformed ``reward_range`` or a bad ``confidence_level``.
    ValidationError
        For negative or non-finite weights, or rewards outside the range.

    Warns
    -----
    ope.OverlapWarning
        The interval is empty (lower bound above upper bound: the weights are inconsistent with
        mean one); it is then reduced to the midpoint of the two bounds."""


@functools.cache
def _log_normalizer() -> float:
    """Log of the normalizing constant gamma_lower(rho, rho) / rho**rho of the mixing
    distribution (computed on first use: scipy is imported only when a betting bound is)."""
    from scipy import special

    return float(
        math.log(special.gammainc(MIXTURE_RHO, MIXTURE_RHO))
        + special.gammaln(MIXTURE_RHO)
        - MIXTURE_RHO * math.log(MIXTURE_RHO)
    )


#: from this mixing shape a = V + rho on, ln Gamma(a) - a ln a + a is taken from Stirling's series
#: (its first omitted term, 1 / (1680 a^7), is below 1e-31 there) instead of from gammaln and
#: a ln a, whose difference loses about a * 1e-16 in absolute terms
STIRLING_FROM: Final = 1e4

#: from this mixing shape on, the regularized incomplete gamma P(a, a + s) is taken from the
#: Wilson-Hilferty normal approximation written in s / a (error below 1e-14 in ln P at this
#: shape, smaller beyond), because a + s no longer resolves s to the precision sqrt(a) needs
WILSON_HILFERTY_FROM: Final = 1e12

#: below this |s / a| the series of u - ln(1 + u) is summed instead of the difference, which
#: would cancel to nothing; 12 terms leave a relative error below 1e-20
SERIES_BELOW: Final = 1e-2
_SERIES_TERMS: Final = 12


def _u_minus_log1p(u: np.ndarray) -> np.ndarray:
    """``u - ln(1 + u)`` without cancellation for small ``|u|`` (``u > -1``)."""
    small = np.abs(u) < SERIES_BELOW
    us = np.where(small, u, 0.0)
    series = np.zeros_like(us)
    power = us * us
    for k in range(2, _SERIES_TERMS + 2):  # the terms of the series, not rows
        series += (1.0 if k % 2 == 0 else -1.0) * power / k
        power = power * us
    with np.errstate(invalid="ignore", divide="ignore"):
        direct = u - np.log1p(u)
    return np.where(small, series, direct)


def log_wealth(s: np.ndarray | float, v: np.ndarray | float) -> np.ndarray:
    """Log of the gamma-exponential mixture martingale at sum ``s >= 0`` and variance ``v``.

    The closed form ``s + v - a ln(s + a) + ln P(a, s + a) + ln Gamma(a) - ln C`` with
    ``a = v + rho`` is evaluated as ``a h(s / a) + (v - a ln a + ln Gamma(a)) + ln P(a, s + a) -
    ln C``, ``h(u) = u - ln(1 + u)``: each part is O(1) to O(s) instead of O(a ln a), so the
    value stays accurate when large importance weights make ``v`` huge (1e20 and beyond, where
    the direct form is off by more than 1e5; see :data:`STIRLING_FROM`,
    :data:`WILSON_HILFERTY_FROM`).
    """
    from scipy import special

    s = np.asarray(s, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    a = v + MIXTURE_RHO
    u = s / a
    drift = a * _u_minus_log1p(u)
    big = a >= STIRLING_FROM
    a_small = np.where(big, 1.0, a)
    a_big = np.where(big, a, STIRLING_FROM)
    direct = v - a_small * np.log(a_small) + special.gammaln(a_small)
    inv = 1.0 / a_big
    stirling = (
        -MIXTURE_RHO
        + 0.5 * np.log(2.0 * np.pi * inv)
        + inv * (1.0 / 12.0 - inv * inv * (1.0 / 360.0 - inv * inv / 1260.0))
    )
    shape = np.where(big, stirling, direct)
    huge = a >= WILSON_HILFERTY_FROM
    a_mid = np.where(huge, 1.0, a)
    with np.errstate(divide="ignore"):
        log_p_exact = np.log(special.gammainc(a_mid, np.where(huge, 1.0, s + a)))
    cube_root_step = np.expm1(np.log1p(u) / 3.0)  # (1 + u)^(1/3) - 1
    z = 3.0 * np.sqrt(a) * (cube_root_step + 1.0 / (9.0 * a))
    log_p = np.where(huge, special.log_ndtr(z), log_p_exact)
    return drift + shape + log_p - _log_normalizer()


def running_stats(
    x: np.ndarray, start: tuple[Any, Any, int] = (0.0, 0.0, 0)
) -> tuple[np.ndarray, np.ndarray]:
    """Cumulative sums of ``x`` and of squared deviations from the predictable prediction
    ``min(1, (1/2 + sum_{s<t} x_s) / t)``, along the last axis (rows).

    ``start = (total, squares, rows)`` continues the sums of earlier rows (a monitor's batches:
    :mod:`ope.monitor`); ``total`` and ``squares`` broadcast against ``x``'s leading axes."""
    total0, squares0, rows0 = start
    total = np.asarray(total0)[..., None] + np.cumsum(x, axis=-1)
    before = total - x
    steps = rows0 + np.arange(1, x.shape[-1] + 1, dtype=np.float64)
    prediction = np.minimum(1.0, (before + 0.5) / steps)
    return total, np.asarray(squares0)[..., None] + np.cumsum((x - prediction) ** 2, axis=-1)


def _weighted_stats(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`running_stats` of the weighted rewards, refusing a sum of squares that overflows
    (only weights near 1e150 on some 1e8 rows can make it; it is then not a usable sample)."""
    total, var = running_stats(x)
    if not math.isfinite(float(var[-1])):
        raise ValidationError(
            "the sum of squared importance weights overflows float64: the weights are too "
            f"large for {x.size} rows (largest {float(x.max()):.4g}). Check the propensities."
        )
    return total, var


def _lower_last(x: np.ndarray, threshold: float) -> float:
    total, var = _weighted_stats(x)
    return lower_from_sums(float(total[-1]), float(var[-1]), float(x.size), threshold)


def lower_from_sums(s_all: float, v: float, t: float, threshold: float) -> float:
    """The lower end, on the [0, 1] scale, of the betting confidence set after ``t`` rows whose
    values (``>= 0``) sum to ``s_all`` with squared deviations ``v`` from their predictable
    predictions (:func:`running_stats`): the root of ``log_wealth(s_all - t m, v) =
    threshold`` on ``[0, min(1, s_all / t)]``, 0 when there is none. Only the three sums are
    needed, so a monitor keeps them and never the rows (:mod:`ope.monitor`)."""
    from scipy import optimize

    if log_wealth(s_all, v) < threshold:
        return 0.0
    top = min(1.0, s_all / t)
    if log_wealth(s_all - t * top, v) >= threshold:
        return top
    return float(
        optimize.brentq(
            lambda m: float(log_wealth(s_all - t * m, v)) - threshold, 0.0, top, xtol=ROOT_XTOL
        )
    )


def _lower_sequence(x: np.ndarray, threshold: float) -> np.ndarray:
    total, var = _weighted_stats(x)
    t = np.arange(1, x.size + 1, dtype=np.float64)
    top = np.minimum(1.0, total / t)
    lo = np.zeros_like(top)
    hi = top.copy()
    # log wealth decreases in m; keep log_wealth(lo) >= threshold > log_wealth(hi) when possible
    at_zero = log_wealth(total, var) < threshold
    at_top = log_wealth(total - t * top, var) >= threshold
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        above = log_wealth(total - t * mid, var) >= threshold
        lo = np.where(above, mid, lo)
        hi = np.where(above, hi, mid)
    bound = 0.5 * (lo + hi)
    bound[at_top] = top[at_top]
    bound[at_zero] = 0.0
    return bound


def _warn_empty(weight: ArrayLike, low: float, high: float, row: int | None) -> None:
    """Warn that the lower bound passed the upper one (an empty confidence set)."""
    mean_w = float(np.mean(np.asarray(weight, dtype=np.float64)))
    what = "interval" if row is None else f"sequence, first at row {row},"
    warnings.warn(
        f"the betting confidence {what} is empty (lower bound {low:.4g} > upper bound "
        f"{high:.4g}); it is reduced to the midpoint. Under the assumptions this happens only "
        "when the "
        f"sequence misses the value (probability <= 1 - confidence_level); more likely the "
        f"weights do not average to 1 (the mean importance weight is {mean_w:.4g}): check the "
        "logged propensities and that the candidate's probabilities sum to 1 over the actions.",
        OverlapWarning,
        stacklevel=user_stacklevel(),
    )


def _prepare(
    weight: ArrayLike,
    reward: ArrayLike,
    reward_range: tuple[float, float] | None,
    confidence_level: float,
) -> tuple[np.ndarray, np.ndarray, float, float, float]:
    level = check_confidence_level(confidence_level)
    w, r, r_min, r_max = weight_reward_rows(weight, reward, reward_range, "betting")
    scaled = np.clip((r - r_min) / (r_max - r_min), 0.0, 1.0)
    threshold = math.log(2.0 / (1.0 - level))
    return w * scaled, w * (1.0 - scaled), r_min, r_max, threshold


def betting_interval(
    weight: ArrayLike,
    reward: ArrayLike,
    *,
    reward_range: tuple[float, float] | None,
    confidence_level: float = 0.95,
) -> ConfidenceInterval:
    r"""Off-policy betting interval: the confidence sequence evaluated after the last row.

    Parameters
    ----------
    weight : array_like, shape (n,)
        Importance weights :math:`w_t = \pi(a_t|x_t) / \pi_0(a_t|x_t) \ge 0`, in time order.
    reward : array_like, shape (n,)
        Rewards, within ``reward_range``.
    reward_range : (float, float)
        A priori range :math:`[r_{\min}, r_{\max}]` of the rewards. No weight bound is needed.
    confidence_level : float, default 0.95
        Probability that the whole sequence (and so this interval) covers the target value.

    Returns
    -------
    ConfidenceInterval
        The interval after the last row; equal to the last entries of
        :func:`betting_confidence_sequence`.

    <raises and warns>

    Notes
    -----
    See :func:`betting_confidence_sequence` for the construction. Because the sequence is
    time-uniform, this interval stays valid when the sample size was chosen by looking at the
    data, at the price of being somewhat wider than a fixed-``n`` interval. Cost: one pass of
    cumulative sums and a scalar root-find whose steps are O(1).

    References
    ----------
    .. [1] N. Karampatziakis, P. Mineiro and A. Ramdas, "Off-policy confidence sequences",
       ICML 2021, PMLR 139:5301-5310.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.intervals.betting import betting_interval
    >>> rng = np.random.default_rng(0)
    >>> n = 5000
    >>> propensity = np.full(n, 0.5)
    >>> target = rng.integers(0, 2, n).astype(float)   # target prob. of the logged action
    >>> reward = rng.binomial(1, 0.3, n).astype(float)
    >>> ci = betting_interval(target / propensity, reward, reward_range=(0.0, 1.0))
    >>> bool(ci.low < 0.3 < ci.high), bool(ci.high - ci.low < 0.15)
    (True, True)
    """
    x_low, x_high, r_min, r_max, threshold = _prepare(
        weight, reward, reward_range, confidence_level
    )
    low = _lower_last(x_low, threshold)
    high = 1.0 - _lower_last(x_high, threshold)
    if low > high:
        _warn_empty(
            weight, in_reward_units(low, r_min, r_max), in_reward_units(high, r_min, r_max), None
        )
        low = high = 0.5 * (low + high)
    return ConfidenceInterval(
        in_reward_units(low, r_min, r_max), in_reward_units(high, r_min, r_max)
    )


def betting_confidence_sequence(
    weight: ArrayLike,
    reward: ArrayLike,
    *,
    reward_range: tuple[float, float] | None,
    confidence_level: float = 0.95,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Anytime-valid off-policy confidence sequence of Karampatziakis, Mineiro & Ramdas (2021).

    Parameters
    ----------
    weight : array_like, shape (n,)
        Importance weights :math:`w_t \ge 0`, in time order (the order of the rows).
    reward : array_like, shape (n,)
        Rewards, within ``reward_range``.
    reward_range : (float, float)
        A priori range :math:`[r_{\min}, r_{\max}]` of the rewards. No weight bound is needed.
    confidence_level : float, default 0.95
        Probability that every interval of the sequence covers the target value.

    Returns
    -------
    lower, upper : numpy.ndarray, shape (n,)
        The bounds after rows ``0..t``, for each ``t``.

    <raises and warns>

    Notes
    -----
    Assumptions: :math:`r_t \in [r_{\min}, r_{\max}]` a priori; :math:`w_t \ge 0` with
    :math:`\mathbb E[w_t \mid \text{past}] \le 1` and
    :math:`\mathbb E[w_t \tilde r_t \mid \text{past}] \le \theta`, the target value (equality under
    full support) (the logger may
    adapt over time; rows need not be independent). Anytime-valid: the coverage holds uniformly
    over all times, including data-dependent stopping times.

    *Lower bound.* With :math:`\tilde r = (r - r_{\min})/(r_{\max} - r_{\min}) \in [0, 1]`, let
    :math:`X_t = w_t \tilde r_t \ge 0`, the predictable prediction
    :math:`\hat X_{t-1} = \min\{1, (\tfrac12 + \sum_{s<t} X_s)/t\}` and, for a candidate mean
    :math:`m \in [0, 1]`,

    .. math:: S_t(m) = \sum_{s \le t} (X_s - m), \qquad
              V_t = \sum_{s \le t} (X_s - \hat X_{s-1})^2 .

    Since :math:`X_s - \hat X_{s-1} \ge -1`, Fan et al.'s inequality
    :math:`\exp(\lambda \xi - \psi(\lambda)\xi^2) \le 1 + \lambda \xi` for
    :math:`\xi \ge -1`, :math:`\lambda \in [0, 1)`, :math:`\psi(\lambda) = -\ln(1 - \lambda) -
    \lambda`, makes :math:`\exp(\lambda S_t(\theta) - \psi(\lambda) V_t)` a non-negative
    supermartingale at any :math:`\theta \ge \mathbb E[X_t \mid \text{past}]`, in particular at
    the target value :math:`\theta` on the normalized scale (Howard et al. 2021). Mixing over
    :math:`\lambda` with the density :math:`\propto (1 - \lambda)^{\rho - 1}
    e^{-\rho(1 - \lambda)}` on :math:`[0, 1)` (:math:`\rho = 1`) gives, in closed form,

    .. math:: \ln M_t(m) = S + V_t + \rho \ln \rho - (V_t + \rho) \ln(S + V_t + \rho)
              + \ln \gamma(V_t + \rho, S + V_t + \rho) - \ln \gamma(\rho, \rho),

    with :math:`S = S_t(m)` and :math:`\gamma` the lower incomplete gamma function. By Ville's
    inequality the set :math:`\{m : \ln M_t(m) < \ln(2/\alpha)\}` covers :math:`\theta` at all times
    with probability at least :math:`1 - \alpha/2`; its left end is the root :math:`L_t` of
    :math:`\ln M_t(m) = \ln(2/\alpha)` on :math:`[0, \min(1, \bar X_t)]` (0 when there is none).

    *Upper bound.* The same construction on :math:`X'_t = w_t(1 - \tilde r_t)`, whose mean is at
    most :math:`1 - \theta` (also under deficient support), gives :math:`U_t = 1 - L'_t`. Both sides
    at :math:`\alpha/2` give a two-sided :math:`1 - \alpha` sequence, mapped back to reward
    units. If the lower bound passes the upper one (an empty set: under the assumptions only
    when the sequence misses, so coverage is unaffected; in practice a sign that the weights do
    not average to 1), both are set to their midpoint and an ``OverlapWarning`` says so.
    The sequence is not forced to be nested; ``numpy.maximum.accumulate(lower)`` and
    ``numpy.minimum.accumulate(upper)`` give a nested one that is still valid.

    Computation: cumulative sums give :math:`S_t(m) = \sum_{s\le t} X_s - tm` and :math:`V_t`
    for all :math:`t` at once; the roots for all times are found by one vectorized bisection.

    References
    ----------
    .. [1] N. Karampatziakis, P. Mineiro and A. Ramdas, "Off-policy confidence sequences",
       ICML 2021, PMLR 139:5301-5310.
    .. [2] S. R. Howard, A. Ramdas, J. McAuliffe and J. Sekhon, "Time-uniform, nonparametric,
       nonasymptotic confidence sequences", Annals of Statistics 49(2):1055-1080, 2021.
    .. [3] X. Fan, I. Grama and Q. Liu, "Exponential inequalities for martingales with
       applications", Electronic Journal of Probability 20:1-22, 2015.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.intervals.betting import betting_confidence_sequence
    >>> rng = np.random.default_rng(1)
    >>> w = rng.choice([0.0, 2.0], size=2000)
    >>> r = rng.binomial(1, 0.6, size=2000).astype(float)
    >>> lower, upper = betting_confidence_sequence(w, r, reward_range=(0.0, 1.0))
    >>> width = upper - lower
    >>> lower.shape, bool(np.all(lower <= upper)), bool(width[-1] < width[99])
    ((2000,), True, True)
    """
    x_low, x_high, r_min, r_max, threshold = _prepare(
        weight, reward, reward_range, confidence_level
    )
    lower = _lower_sequence(x_low, threshold)
    upper = 1.0 - _lower_sequence(x_high, threshold)
    crossed = lower > upper
    if crossed.any():
        first = int(np.flatnonzero(crossed)[0])
        _warn_empty(
            weight,
            in_reward_units(lower[first], r_min, r_max),
            in_reward_units(upper[first], r_min, r_max),
            first,
        )
        middle = 0.5 * (lower + upper)
        lower = np.where(crossed, middle, lower)
        upper = np.where(crossed, middle, upper)
    return in_reward_units(lower, r_min, r_max), in_reward_units(upper, r_min, r_max)


def _hedged_lower(x: np.ndarray, log_threshold: float) -> np.ndarray:
    """Lower betting bound on the [0, 1] scale for each row of ``x`` (shape (..., n))."""
    n = x.shape[-1]
    _, squares = running_stats(x)
    before = np.concatenate([np.zeros(x.shape[:-1] + (1,)), squares[..., :-1]], axis=-1)
    variance = (0.25 + before) / np.arange(1, n + 1, dtype=np.float64)  # predictable sigma^2
    bet = np.sqrt(2.0 * log_threshold / (n * variance))
    lo = np.zeros(x.shape[:-1])
    hi = np.ones(x.shape[:-1])  # m = 1 is never rejected: every factor is <= 1 there
    for _ in range(BISECTION_STEPS):  # bisection steps, each vectorized over rows and series
        mid = 0.5 * (lo + hi)
        m = mid[..., None]
        log_capital = np.cumsum(np.log1p(np.minimum(bet, BET_TRUNCATION / m) * (x - m)), axis=-1)
        rejected = log_capital.max(axis=-1) >= log_threshold
        lo = np.where(rejected, mid, lo)
        hi = np.where(rejected, hi, mid)
    return lo  # a rejected value (or 0): the conservative side of the root


def betting_lower_bound(
    values: ArrayLike,
    *,
    low: float | None,
    high: float | None,
    confidence_level: float = 0.95,
) -> float | np.ndarray:
    r"""One-sided betting lower confidence bound for the mean of bounded i.i.d. values.

    Parameters
    ----------
    values : array_like, shape (n,) or (k, n)
        The values, in the order they are bet on; a 2-D array holds ``k`` independent samples
        (one per row), each bounded separately.
    low, high : float
        A priori bounds of the values (not their observed extremes).
    confidence_level : float, default 0.95
        Probability that the bound is at most the true mean.

    Returns
    -------
    float or numpy.ndarray of shape (k,)
        The lower bound, in the units of ``values``, within ``[low, high]``.

    Raises
    ------
    MissingBoundsError
        If ``low`` or ``high`` is None.
    ParameterError
        For ``low >= high``, non-finite bounds or a bad ``confidence_level``.
    ValidationError
        For non-finite values, values outside ``[low, high]`` or a wrong shape.
    EstimationError
        If there are no values.

    Notes
    -----
    Assumes :math:`X_i \in [a, b]` a priori with :math:`\mathbb E[X_i \mid \text{past}] \le \mu`
    (i.i.d. values qualify); valid at every :math:`n`, no asymptotics. With
    :math:`Y_i = (X_i - a)/(b - a) \in [0, 1]`, the capital of a gambler betting
    :math:`\lambda_i(m) \ge 0` against the mean being :math:`m`,

    .. math:: K_t(m) = \prod_{i \le t} \bigl(1 + \lambda_i(m)(Y_i - m)\bigr),

    is a non-negative supermartingale at :math:`m = \mu` when each :math:`\lambda_i(m)` is
    predictable, so by Ville's inequality :math:`P(\max_{t\le n} K_t(\mu) \ge 1/\alpha) \le
    \alpha` (:math:`\alpha = 1 - \text{level}`). The bound is
    :math:`L = \inf\{m : \max_{t \le n} K_t(m) < 1/\alpha\}`, mapped back to :math:`[a, b]`.
    Bets are the predictable plug-in of Waudby-Smith & Ramdas (2023) for a fixed :math:`n`,
    one-sided and truncated (the upper half of their hedged capital process):

    .. math:: \lambda_i(m) = \min\Bigl(\sqrt{\frac{2\ln(1/\alpha)}{n\,\hat\sigma^2_{i-1}}},
              \frac{c}{m}\Bigr),\quad
              \hat\sigma^2_{i-1} = \frac{1/4 + \sum_{s<i}(Y_s - \hat\mu_{s-1})^2}{i},\quad
              \hat\mu_{s-1} = \frac{1/2 + \sum_{j<s} Y_j}{s},

    with :math:`c = 1/2` (``BET_TRUNCATION``), so every factor is at least :math:`1 - c`. Each
    factor decreases in :math:`m`, so the set of rejected means is an interval
    :math:`[0, L)` and :math:`L` is found by a bisection vectorized over the rows and over the
    samples (``BISECTION_STEPS`` steps; the returned end is a rejected mean, the conservative
    side). The bound adapts to the variance like empirical Bernstein (its width is
    :math:`\approx\sigma\sqrt{2\ln(1/\alpha)/n}`) without Bernstein's range term
    :math:`7(b-a)\ln(1/\alpha)/(3(n-1))`, which dominates for rare large values. The result
    depends on the order of the values: any order fixed without looking at them (the logged
    order, a random permutation) gives a valid bound, an order sorted by value does not.

    References
    ----------
    .. [1] I. Waudby-Smith and A. Ramdas, "Estimating means of bounded random variables by
       betting", Journal of the Royal Statistical Society B 86(1):1-27, 2024 (arXiv 2010.09686).

    Examples
    --------
    >>> import numpy as np
    >>> from ope.intervals.betting import betting_lower_bound
    >>> from ope.intervals.bounded import bernstein_interval
    >>> rng = np.random.default_rng(0)
    >>> x = rng.binomial(1, 0.1, size=2000).astype(float)      # true mean 0.1
    >>> lower = betting_lower_bound(x, low=0.0, high=1.0)
    >>> eb = bernstein_interval(x.mean(), x.var(ddof=1), x.size, low=0.0, high=1.0,
    ...                         confidence_level=0.9).low       # its one-sided 95% end
    >>> bool(eb < lower < 0.1)
    True
    """
    level = check_confidence_level(confidence_level)
    if low is None or high is None:
        raise MissingBoundsError(
            "betting_lower_bound needs the a priori bounds low= and high= of the values; the "
            "observed minimum and maximum are not bounds."
        )
    a, b = check_value_bounds(low, high)
    x = as_float_array(values, "values", ndim=(1, 2)).astype(np.float64, copy=False)
    if x.shape[-1] == 0:
        raise EstimationError("no values: `values` is empty.")
    check_finite(x, "values")
    # in units of a power of two of the bounds (exact), so that b - a and x - a cannot overflow
    scale = power_of_two_scale(a, b)
    a_s, b_s = a / scale, b / scale
    span = b_s - a_s
    y = (x / scale - a_s) / span
    outside = (y < -VALUE_RANGE_SLACK) | (y > 1.0 + VALUE_RANGE_SLACK)
    if outside.any():
        count, first = first_rows(outside.reshape(-1))
        raise ValidationError(
            f"`values` has {count} entries outside [low, high] = [{a:g}, {b:g}] (first at flat "
            f"index {first}); low and high must be a priori bounds every value satisfies."
        )
    unit = _hedged_lower(np.clip(y, 0.0, 1.0), math.log(1.0 / (1.0 - level)))
    bound = np.clip(scale * (a_s + span * unit), a, b)
    return float(bound) if x.ndim == 1 else bound


for _function in (betting_interval, betting_confidence_sequence):
    fill_doc({"raises and warns": _RAISES_AND_WARNS})(_function)
