"""Finite-sample intervals for means of values with a priori bounds.

Three methods, each computed from summary statistics only (counts, means, unbiased variances), so
the streaming path, which merges sums over record batches, and the eager path get the same
numbers from the same inputs:

``hoeffding_interval(mean, n, *, low, high, confidence_level=0.95)``
    Hoeffding (1963). Needs only the a priori range of the values.
``bernstein_interval(mean, variance, n, *, low, high, confidence_level=0.95)``
    Maurer & Pontil (2009) empirical Bernstein. Adapts to the sample variance.
``bottou_interval(weight_mean, weight_variance, product_mean, product_variance, n, *,
max_weight, reward_range, confidence_level=0.95, outer="bernstein")``
    Bottou et al. (2013) outer + inner interval for clipped importance sampling. The inputs are
    the mean and unbiased variance of the clipped weight ``wc_i = min(w_i, max_weight)`` (or the
    zeroed variant ``w_i * 1[w_i < max_weight]``; both are covered) and of the product
    ``wc_i * (r_i - reward_range[0])``, over the ``n`` logged rows.

All three assume i.i.d. rows and bounds known *before* seeing the data (a reward range from the
product, a weight bound from the clip level). A bound read off the data is not a bound: when a
bound is missing these functions raise :class:`ope.exceptions.MissingBoundsError` rather than
substitute an empirical maximum. Malformed arguments (a confidence level of 95, ``low >= high``)
raise :class:`ope.ParameterError`; statistics outside their a priori ranges raise
:class:`ope.ValidationError`.
"""

from __future__ import annotations

import math
import warnings
from typing import Final, Literal

import numpy as np

from ope._validation import (
    check_choice,
    check_confidence_level,
    check_max_weight,
    check_real,
    check_value_bounds,
    power_of_two_scale,
    require_reward_range,
    user_stacklevel,
)
from ope.exceptions import (
    MissingBoundsError,
    OverlapWarning,
    ValidationError,
)
from ope.intervals._shared import (
    bottou_pieces,
    check_interval_rows,
    mp_margin,
)
from ope.intervals._types import BottouInterval, ConfidenceInterval

__all__ = [
    "hoeffding_interval",
    "bernstein_interval",
    "bottou_interval",
    "RANGE_RTOL",
]

#: relative tolerance (of the larger end's magnitude) when checking that a mean lies in its a
#: priori range: sums of float32 inputs accumulated in float64 can overshoot an exact bound by
#: a few ulps of the bound. Relative, not absolute, so that a range of 1e-300 is held to the
#: same standard as a range of 1.
RANGE_RTOL: Final = 1e-9

#: the ``outer`` margins of :func:`bottou_interval`
OUTER_METHODS: Final = ("bernstein", "normal")


# ---------------------------------------------------------------------------------------------
# checks of the summary statistics (the arguments go through ope._validation)
# ---------------------------------------------------------------------------------------------


def _check_stat(
    value: object,
    name: str,
    *,
    low: float | None = None,
    high: float | None = None,
    bounds: str = "[`low`, `high`]",
) -> float:
    """A finite mean, inside ``[low, high]`` up to :data:`RANGE_RTOL` (then clipped to it);
    ``bounds`` says which arguments set the range, for the message."""
    x = check_real(value, name)
    if not math.isfinite(x):
        raise ValidationError(f"`{name}` must be finite, got {value!r}.")
    if low is not None and high is not None:
        slack = RANGE_RTOL * max(abs(low), abs(high))
        if x < low - slack or x > high + slack:
            raise ValidationError(
                f"`{name}`={x!r} lies outside its a priori range {bounds} = [{low!r}, "
                f"{high!r}]: either the values were not within the bounds given or a bound is "
                f"wrong. Check {bounds.strip('[]')}, or the values passed."
            )
        x = min(max(x, low), high)
    return x


def _check_variance(value: object, name: str) -> float:
    """A finite, non-negative unbiased sample variance."""
    x = check_real(value, name)
    if x == math.inf:
        raise ValidationError(
            f"`{name}` is inf: the squares of values this large (about 1.3e154 or more) are not "
            "float64 numbers, so their variance cannot be passed. Divide the values and their "
            "bounds by a power of ten, compute the interval, and multiply it back: the interval "
            "is scale-equivariant."
        )
    if not math.isfinite(x) or x < 0:
        raise ValidationError(
            f"`{name}` must be a finite non-negative (unbiased sample) variance, got {value!r}."
        )
    return x


def _mean_interval(
    mean: object, n: object, low: object, high: object, confidence_level: object, *, minimum: int
) -> tuple[float, float, float, int, float]:
    """Checked ``(level, low, high, n, mean)`` of the Hoeffding and Bernstein intervals."""
    level = check_confidence_level(confidence_level)
    lo, hi = check_value_bounds(low, high)
    count = check_interval_rows(n, minimum=minimum)
    return level, lo, hi, count, _check_stat(mean, "mean", low=lo, high=hi)


# ---------------------------------------------------------------------------------------------
# public functions
# ---------------------------------------------------------------------------------------------


def hoeffding_interval(
    mean: float,
    n: int,
    *,
    low: float | None,
    high: float | None,
    confidence_level: float = 0.95,
) -> ConfidenceInterval:
    r"""Two-sided Hoeffding interval for the mean of bounded i.i.d. values.

    Parameters
    ----------
    mean : float
        Sample mean of the ``n`` values.
    n : int
        Number of values, at least 1.
    low, high : float
        A priori bounds of the values (known before seeing the data; for IPS of rewards in
        ``[0, r_max]`` with weights at most ``weight_bound``: ``low=0, high=weight_bound * r_max``).
    confidence_level : float, default 0.95
        Probability that the interval covers the true mean.

    Returns
    -------
    ConfidenceInterval
        ``(low, high)``, clipped to ``[low, high]`` of the a priori range.

    Raises
    ------
    MissingBoundsError
        If ``low`` or ``high`` is None.
    ParameterError
        If ``confidence_level`` is outside (0, 1), ``low >= high`` or ``n`` is not a whole number.
    ValidationError
        If ``mean`` is not finite or lies outside the range.

    Notes
    -----
    Assumes i.i.d. values :math:`X_i \in [a, b]` with :math:`a, b` fixed a priori. Hoeffding's
    inequality gives :math:`P(\bar X - \mathbb E X \ge t) \le \exp(-2nt^2/(b-a)^2)`; putting
    :math:`\delta = (1 - \text{confidence\_level})/2` on each side, the interval is

    .. math:: \bar X \pm (b - a)\sqrt{\frac{\ln(2/\alpha)}{2n}},\qquad \alpha = 1 - \text{level},

    intersected with :math:`[a, b]`. Valid for every ``n`` (not asymptotic), but not anytime-valid:
    it holds at a sample size fixed in advance. Its width grows with the range, so for importance
    weighting it is very conservative when the weight bound is large.

    References
    ----------
    .. [1] W. Hoeffding, "Probability inequalities for sums of bounded random variables",
       Journal of the American Statistical Association 58(301):13-30, 1963.

    Examples
    --------
    >>> from ope.intervals.bounded import hoeffding_interval
    >>> ci = hoeffding_interval(0.3, 1000, low=0.0, high=1.0)
    >>> round(ci.low, 4), round(ci.high, 4)
    (0.2571, 0.3429)
    """
    level, lo, hi, count, m = _mean_interval(mean, n, low, high, confidence_level, minimum=1)
    alpha = 1.0 - level
    scale = power_of_two_scale(lo, hi)  # exact units: hi - lo cannot overflow, nor underflow
    lo_s, hi_s, m_s = lo / scale, hi / scale, m / scale
    half = (hi_s - lo_s) * math.sqrt(math.log(2.0 / alpha) / (2.0 * count))
    return ConfidenceInterval(scale * max(lo_s, m_s - half), scale * min(hi_s, m_s + half))


def bernstein_interval(
    mean: float,
    variance: float,
    n: int,
    *,
    low: float | None,
    high: float | None,
    confidence_level: float = 0.95,
) -> ConfidenceInterval:
    r"""Two-sided empirical Bernstein interval (Maurer & Pontil 2009) for a bounded mean.

    Parameters
    ----------
    mean : float
        Sample mean of the ``n`` values.
    variance : float
        Unbiased sample variance of the values (denominator ``n - 1``).
    n : int
        Number of values, at least 2.
    low, high : float
        A priori bounds of the values.
    confidence_level : float, default 0.95
        Probability that the interval covers the true mean.

    Returns
    -------
    ConfidenceInterval
        ``(low, high)``, clipped to the a priori range.

    Raises
    ------
    MissingBoundsError
        If ``low`` or ``high`` is None.
    EstimationError
        If ``n < 2``.
    ParameterError
        For a bad ``confidence_level``, ``low >= high`` or an ``n`` that is not a whole number.
    ValidationError
        For a negative variance or a mean outside the range.

    Notes
    -----
    Assumes i.i.d. values :math:`X_i \in [a, b]`, with the range fixed a priori. Theorem 4 of
    Maurer & Pontil (2009) states, for :math:`Z_i \in [0, 1]` and :math:`n \ge 2`, that with
    probability at least :math:`1 - \delta`

    .. math:: \mathbb E Z \le \bar Z + \sqrt{\frac{2 V_n \ln(2/\delta)}{n}}
              + \frac{7 \ln(2/\delta)}{3(n - 1)},

    where :math:`V_n` is the unbiased sample variance. Rescaling to :math:`[a, b]` and applying
    it to both tails with :math:`\delta = \alpha/2` each (:math:`\alpha = 1 - \text{level}`) gives
    the interval

    .. math:: \bar X \pm \left(\sqrt{\frac{2 s^2 \ln(4/\alpha)}{n}}
              + \frac{7 (b - a) \ln(4/\alpha)}{3(n - 1)}\right)

    with :math:`s^2` the unbiased sample variance of the :math:`X_i`, intersected with
    :math:`[a, b]`. Valid for every ``n`` at a sample size fixed in advance (not anytime-valid).

    References
    ----------
    .. [1] A. Maurer and M. Pontil, "Empirical Bernstein bounds and sample variance
       penalization", COLT 2009, arXiv:0907.3740.

    Examples
    --------
    >>> from ope.intervals.bounded import bernstein_interval
    >>> ci = bernstein_interval(0.3, 0.21, 1000, low=0.0, high=1.0)
    >>> round(ci.low, 4), round(ci.high, 4)
    (0.2469, 0.3531)
    """
    level, lo, hi, count, m = _mean_interval(mean, n, low, high, confidence_level, minimum=2)
    var = _check_variance(variance, "variance")
    scale = power_of_two_scale(lo, hi)  # exact units: hi - lo cannot overflow, nor underflow
    lo_s, hi_s, m_s = lo / scale, hi / scale, m / scale
    half = mp_margin(math.sqrt(var) / scale, count, hi_s - lo_s, (1.0 - level) / 2.0)
    return ConfidenceInterval(scale * max(lo_s, m_s - half), scale * min(hi_s, m_s + half))


def bottou_interval(
    weight_mean: float,
    weight_variance: float,
    product_mean: float,
    product_variance: float,
    n: int,
    *,
    max_weight: float | None,
    reward_range: tuple[float, float] | None,
    confidence_level: float = 0.95,
    outer: Literal["bernstein", "normal"] = "bernstein",
) -> BottouInterval:
    r"""Bottou et al. (2013) outer and inner interval for clipped importance sampling.

    Parameters
    ----------
    weight_mean, weight_variance : float
        Mean and unbiased variance of the clipped weights :math:`\bar w_i` over the ``n`` rows,
        with :math:`\bar w_i = \min(w_i, R)` or :math:`w_i 1[w_i < R]` for ``R = max_weight``.
    product_mean, product_variance : float
        Mean and unbiased variance of :math:`\bar w_i (r_i - r_{\min})`.
    n : int
        Number of logged rows, at least 2.
    max_weight : float or None
        The clip level ``R``, fixed before looking at the data: :math:`0 \le \bar w \le R`.
        None (no clipping: :math:`\bar w = w`, unbounded) only with ``outer="normal"``, whose
        margins need no weight bound.
    reward_range : (float, float)
        A priori range :math:`[r_{\min}, r_{\max}]` of the rewards.
    confidence_level : float, default 0.95
        Probability that ``[low, high]`` covers the true value of the target policy.
    outer : {"bernstein", "normal"}, default "bernstein"
        How the sampling margins are computed: Maurer-Pontil empirical Bernstein (valid for every
        ``n``) or the normal approximation (asymptotic).

    Returns
    -------
    BottouInterval
        ``low, high`` (the combined interval for the true value), ``outer_low, outer_high``
        (sampling interval for the clipped estimand :math:`\bar Y`), ``inner_low, inner_high``
        (where the true value can be given the clipped estimand, at the estimated clipped mass).
        All in reward units.

    Raises
    ------
    MissingBoundsError
        If ``reward_range`` is None, or ``max_weight`` is None with ``outer="bernstein"``.
    EstimationError
        If ``n < 2``.
    ParameterError
        For a bad ``confidence_level``, ``outer``, ``max_weight`` or ``reward_range``.
    ValidationError
        For statistics outside their a priori ranges.

    Notes
    -----
    Write :math:`M = r_{\max} - r_{\min}` and :math:`\ell = r - r_{\min} \in [0, M]`. The target
    value is :math:`Y = r_{\min} + \mathbb E_{\pi}[\ell]`. With :math:`\bar w \le w` (capped or
    zeroed weights), define the clipped estimand and the clipped weight mass

    .. math:: \bar Y = \mathbb E_{\pi_0}[\bar w \ell], \qquad \bar W = \mathbb E_{\pi_0}[\bar w].

    *Inner interval* (bias from clipping; more logs of the same kind do not shrink it). Split
    the target's probability mass into the part the clipped weights carry and the rest
    (:math:`w - \bar w \ge 0` on the logger's support, plus any mass the target puts where the
    logger has no support). Since :math:`0 \le \ell \le M` on the rest, whose total mass is
    :math:`1 - \bar W`,

    .. math:: r_{\min} + \bar Y \;\le\; Y \;\le\; r_{\min} + \bar Y + M (1 - \bar W).

    This holds for deficient support too: then :math:`\mathbb E_{\pi_0}[w] < 1` and the missing
    mass is counted in :math:`1 - \bar W`. In reward units, this is Bottou's
    :math:`\bar Y^* \le Y^* \le \bar Y^* + M(1 - \bar W^*)` applied to :math:`\ell`.

    *Outer interval* (sampling). :math:`\bar w\ell \in [0, RM]` and :math:`\bar w \in [0, R]`.
    With :math:`\alpha = 1 - \text{level}`, the margin :math:`\epsilon` gives a two-sided
    :math:`1 - \alpha/2` interval :math:`\hat Y \pm \epsilon` for :math:`\bar Y`, and :math:`\xi`
    gives a one-sided :math:`1 - \alpha/2` lower limit :math:`\hat W - \xi` for :math:`\bar W`
    (only the lower limit of :math:`\bar W` enters the interval). By the union bound both hold
    together with probability at least :math:`1 - \alpha`. For ``outer="bernstein"``,
    :math:`\epsilon` is the Maurer-Pontil margin at :math:`\delta = \alpha/4` per side on range
    :math:`RM` and :math:`\xi` the margin at :math:`\delta = \alpha/2` on range :math:`R`; for
    ``outer="normal"``, :math:`\epsilon = z_{1-\alpha/4} s_Y/\sqrt n` and
    :math:`\xi = z_{1-\alpha/2} s_W/\sqrt n`.

    *Combined*:

    .. math:: Y \in \big[r_{\min} + \hat Y - \epsilon,\;
              r_{\min} + \hat Y + \epsilon + M\,(1 - \max(0, \hat W - \xi))^+\big]
              \cap [r_{\min}, r_{\max}].

    Since :math:`\bar Y \le M\,\mathbb E[w] \le M`, an outer interval entirely above the
    reward range means it missed or the weights do not average to 1; an ``OverlapWarning``
    then says so, and every piece is the upper end of the range.

    Returned pieces: ``outer = r_min + Ŷ ± ε``; ``inner = [r_min + Ŷ, r_min + Ŷ +
    M (1 - W_lcl)^+]`` with ``W_lcl`` the lower confidence limit of :math:`\bar W`;
    ``low = outer_low``, ``high = inner_high + ε`` (all clipped to the reward range). Assumes
    i.i.d. rows, known logging propensities and a clip level and reward range fixed a priori.

    References
    ----------
    .. [1] L. Bottou, J. Peters, J. Quiñonero-Candela, D. X. Charles, D. M. Chickering,
       E. Portugaly, D. Ray, P. Simard and E. Snelson, "Counterfactual reasoning and learning
       systems: the example of computational advertising", JMLR 14:3207-3260, 2013, §4.
    .. [2] A. Maurer and M. Pontil, "Empirical Bernstein bounds and sample variance
       penalization", COLT 2009.

    Examples
    --------
    >>> from ope.intervals.bounded import bottou_interval
    >>> iv = bottou_interval(0.9, 0.5, 0.4, 0.3, 10_000, max_weight=10.0,
    ...                      reward_range=(0.0, 1.0), outer="normal")
    >>> round(iv.outer_low, 4), round(iv.outer_high, 4)
    (0.3877, 0.4123)
    >>> round(iv.inner_low, 4), round(iv.inner_high, 4)
    (0.4, 0.5139)
    >>> round(iv.low, 4), round(iv.high, 4)
    (0.3877, 0.5261)
    """
    level = check_confidence_level(confidence_level)
    r_min, r_max = require_reward_range(reward_range, "bottou")
    outer = check_choice(outer, "outer", OUTER_METHODS)  # type: ignore[assignment]
    clip = check_max_weight(max_weight)
    if clip is None and outer == "bernstein":
        raise MissingBoundsError(
            "`max_weight` is required: the bernstein outer margins need the clip level, which "
            "bounds the clipped weights a priori. Pass max_weight=, the clip level used for the "
            "clipped weights (or outer='normal'); the largest weight in the data is not used in "
            "its place."
        )
    count = check_interval_rows(n, minimum=2)
    span = r_max - r_min  # finite: check_reward_range refuses wider ranges
    w_hat = _check_stat(weight_mean, "weight_mean", low=0.0, high=clip, bounds="[0, `max_weight`]")
    # the product wbar * (r - r_min) in units of the reward span, y01 in [0, R]: the margins
    # and pieces below are computed on this scale, so R * span never has to be a float64
    y01 = _check_stat(
        _in_span_units(product_mean, "product_mean", span),
        "product_mean / (reward_range[1] - reward_range[0])",
        low=None if clip is None else 0.0,
        high=clip,
        bounds="[0, `max_weight`]",
    )
    w_var = _check_variance(weight_variance, "weight_variance")
    y_sd01 = math.sqrt(_check_variance(product_variance, "product_variance")) / span

    alpha = 1.0 - level
    eps01, *ends = bottou_pieces(
        w_hat, w_var, y01, y_sd01, count, clip=clip, alpha=alpha, outer=outer, r_min=r_min,
        r_max=r_max,
    )  # fmt: skip
    eps01 = float(eps01)
    if y01 - eps01 > 1.0:
        # E[wbar * l] <= E[w] * M <= M, so the outer interval cannot lie above the range unless
        # it missed (probability <= alpha / 4) or the weights do not average to 1
        with np.errstate(over="ignore"):
            shown = (r_min + span * (y01 - eps01), r_min + span * (y01 + eps01))
        warnings.warn(
            f"the outer interval for the clipped estimand, [{shown[0]:.4g}, "
            f"{shown[1]:.4g}], lies entirely above the reward range [{r_min:g}, {r_max:g}]; "
            "the interval is reduced to its upper end. Clipped weights average at most 1 under "
            f"correct propensities; here the mean clipped weight is {w_hat:.4g}"
            + (", which exceeds 1" if w_hat > 1.0 else "")
            + ". Check the logged propensities and that the candidate's probabilities sum to 1 "
            "over the actions.",
            OverlapWarning,
            stacklevel=user_stacklevel(),
        )
    return BottouInterval(*(float(x) for x in ends))


def _in_span_units(value: object, name: str, span: float) -> float:
    """A finite statistic in reward units, divided by the reward span (a ratio above the float64
    range is reported as such, with the value as given)."""
    x = check_real(value, name)
    if not math.isfinite(x):
        raise ValidationError(f"`{name}` must be finite, got {value!r}.")
    with np.errstate(over="ignore"):
        ratio = float(np.float64(x) / span)
    if not math.isfinite(ratio):
        raise ValidationError(
            f"`{name}`={x!r} lies outside its a priori range: it is more than 1.8e308 times the "
            f"reward span {span!r}. Check the statistics passed."
        )
    return ratio
