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
substitute an empirical maximum.
"""

from __future__ import annotations

import math
import warnings
from typing import Final, Literal

import numpy as np
from scipy import stats

from ope.exceptions import EstimationError, MissingBoundsError, OverlapWarning, ValidationError
from ope.intervals._types import BottouInterval, ConfidenceInterval

__all__ = ["hoeffding_interval", "bernstein_interval", "bottou_interval"]

#: relative tolerance when checking that a mean lies in its a priori range: sums of float32
#: inputs accumulated in float64 can overshoot an exact bound by a few ulps of the bound
RANGE_RTOL: Final = 1e-9

#: Maurer & Pontil (2009), Theorem 4: the constant of the range term, 7 / 3
_MP_RANGE_CONSTANT: Final = 7.0 / 3.0


# ---------------------------------------------------------------------------------------------
# shared argument checks (also used by ope.intervals.likelihood and ope.intervals.betting)
# ---------------------------------------------------------------------------------------------


def _check_confidence_level(confidence_level: float) -> float:
    try:
        level = float(confidence_level)
    except (TypeError, ValueError):
        raise ValidationError(
            f"`confidence_level` must be a number in (0, 1), got {confidence_level!r}. "
            "Pass e.g. confidence_level=0.95."
        ) from None
    if not (0.0 < level < 1.0):
        raise ValidationError(
            f"`confidence_level` must be in (0, 1), got {confidence_level!r}. "
            "Pass e.g. confidence_level=0.95 for a 95% interval (not 95, and not alpha=0.05)."
        )
    return level


def _check_range(
    low: float | None, high: float | None, *, low_name: str, high_name: str, hint: str
) -> tuple[float, float]:
    missing = [name for name, value in ((low_name, low), (high_name, high)) if value is None]
    if missing:
        raise MissingBoundsError(
            f"{' and '.join(f'`{m}`' for m in missing)} {'is' if len(missing) == 1 else 'are'} "
            f"required: this method needs the a priori range of the values. {hint} "
            "Empirical maxima are not used in place of a priori bounds."
        )
    try:
        lo, hi = float(low), float(high)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        lo = hi = math.nan
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValidationError(
            f"`{low_name}` and `{high_name}` must be finite numbers, got {low!r}, {high!r}."
        )
    if not lo < hi:
        raise ValidationError(
            f"`{low_name}` must be smaller than `{high_name}`, got {low_name}={lo!r}, "
            f"{high_name}={hi!r}."
        )
    return lo, hi


def _check_reward_range(reward_range: tuple[float, float] | None) -> tuple[float, float]:
    if reward_range is None:
        raise MissingBoundsError(
            "`reward_range` is required: this method needs the a priori range of the rewards, "
            "e.g. reward_range=(0.0, 1.0) for clicks. Empirical minima and maxima are not used "
            "in place of a priori bounds."
        )
    try:
        r_min, r_max = (float(x) for x in reward_range)
    except (TypeError, ValueError):
        raise ValidationError(
            f"`reward_range` must be a pair (r_min, r_max), got {reward_range!r}."
        ) from None
    return _check_range(r_min, r_max, low_name="reward_range[0]", high_name="reward_range[1]",
                        hint="")


def _check_max_weight(max_weight: float | None, *, hint: str) -> float:
    if max_weight is None:
        raise MissingBoundsError(
            f"`max_weight` is required: this method needs an a priori bound on the importance "
            f"weights. {hint} The largest weight in the data is not used in its place."
        )
    try:
        value = float(max_weight)
    except (TypeError, ValueError):
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValidationError(f"`max_weight` must be a finite positive number, got {max_weight!r}.")
    return value


def _as_float(value: object, name: str) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValidationError(f"`{name}` must be a number, got {value!r}.") from None


def _check_n(n: int, *, minimum: int) -> int:
    if isinstance(n, (bool, np.bool_)) or not _as_float(n, "n").is_integer():
        raise ValidationError(f"`n` must be a whole number of rows, got {n!r}.")
    count = int(n)
    if count < minimum:
        raise EstimationError(
            f"this interval needs at least {minimum} rows, got n={count}. Collect more logs or use "
            "a method that does not need a sample variance (hoeffding)."
        )
    return count


def _check_stat(value: float, name: str, *, low: float | None = None,
                high: float | None = None) -> float:
    x = _as_float(value, name)
    if not math.isfinite(x):
        raise ValidationError(f"`{name}` must be finite, got {value!r}.")
    if low is not None and high is not None:
        slack = RANGE_RTOL * max(1.0, abs(low), abs(high))
        if x < low - slack or x > high + slack:
            raise ValidationError(
                f"`{name}`={x!r} lies outside its a priori range [{low!r}, {high!r}]: the values "
                "were not within the bounds given. Check the bounds, or the values passed."
            )
        x = min(max(x, low), high)
    return x


def _check_variance(value: float, name: str) -> float:
    x = _as_float(value, name)
    if not math.isfinite(x) or x < 0:
        raise ValidationError(
            f"`{name}` must be a finite non-negative (unbiased sample) variance, got {value!r}."
        )
    return x


def _check_weight_reward(
    weight: object, reward: object, r_min: float, r_max: float
) -> tuple[np.ndarray, np.ndarray]:
    """Validate per-row ``weight`` and ``reward`` and return them as float64 vectors."""
    arrays = []
    for name, values in (("weight", weight), ("reward", reward)):
        try:
            arr = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValidationError(f"`{name}` must be a 1-D array of numbers.") from None
        if arr.ndim != 1:
            raise ValidationError(
                f"`{name}` must be 1-D (one value per logged row), got shape {arr.shape}."
            )
        bad = ~np.isfinite(arr)
        if bad.any():
            raise ValidationError(
                f"`{name}` must be finite; {int(bad.sum())} rows are NaN or infinite "
                f"(first at row {int(np.flatnonzero(bad)[0])}). Drop or repair those rows first."
            )
        arrays.append(arr)
    w, r = arrays
    if w.shape != r.shape:
        raise ValidationError(
            f"`weight` and `reward` must have the same length, got {w.size} and {r.size}."
        )
    if w.size == 0:
        raise EstimationError("no rows: `weight` and `reward` are empty.")
    negative = w < 0
    if negative.any():
        raise ValidationError(
            f"`weight` must be non-negative; {int(negative.sum())} rows are < 0 (first at row "
            f"{int(np.flatnonzero(negative)[0])}). Weights are target/logging propensity ratios."
        )
    outside = (r < r_min) | (r > r_max)
    if outside.any():
        raise ValidationError(
            f"`reward` must lie in reward_range [{r_min!r}, {r_max!r}]; {int(outside.sum())} rows "
            f"are outside (first at row {int(np.flatnonzero(outside)[0])}, value "
            f"{float(r[outside][0])!r}). Widen reward_range to the true a priori range, or fix the "
            "rewards."
        )
    return w, r


def _mp_margin(variance: float, n: int, value_range: float, delta: float) -> float:
    """One-sided Maurer-Pontil margin at failure probability ``delta``."""
    log_term = math.log(2.0 / delta)
    variance_term = math.sqrt(2.0 * variance * log_term / n)
    return variance_term + _MP_RANGE_CONSTANT * value_range * log_term / (n - 1)


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
        ``[0, r_max]`` with weights at most ``max_weight``: ``low=0, high=max_weight * r_max``).
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
    ValidationError
        If ``confidence_level`` is outside (0, 1), ``low >= high`` or ``mean`` is outside the range.

    Notes
    -----
    Assumes i.i.d. values :math:`X_i \in [a, b]` with :math:`a, b` fixed a priori. Hoeffding's
    inequality gives :math:`P(\bar X - \mathbb E X \ge t) \le \exp(-2nt^2/(b-a)^2)`; putting
    :math:`\delta = (1 - \text{confidence\_level})/2` on each side, the interval is

    .. math:: \bar X \pm (b - a)\sqrt{\frac{\ln(2/\alpha)}{2n}},\qquad \alpha = 1 - \text{level},

    intersected with :math:`[a, b]`. Valid for every ``n`` (not asymptotic), but not anytime-valid:
    it holds at a sample size fixed in advance. Its width grows with the range, so for importance
    weighting it is very conservative when ``max_weight`` is large.

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
    level = _check_confidence_level(confidence_level)
    lo, hi = _check_range(low, high, low_name="low", high_name="high",
                          hint="Pass low= and high=, the range the values are known to lie in.")
    count = _check_n(n, minimum=1)
    m = _check_stat(mean, "mean", low=lo, high=hi)
    alpha = 1.0 - level
    half = (hi - lo) * math.sqrt(math.log(2.0 / alpha) / (2.0 * count))
    return ConfidenceInterval(max(lo, m - half), min(hi, m + half))


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
    ValidationError
        For a bad ``confidence_level``, ``low >= high``, a negative variance or a mean outside
        the range.

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
    level = _check_confidence_level(confidence_level)
    lo, hi = _check_range(low, high, low_name="low", high_name="high",
                          hint="Pass low= and high=, the range the values are known to lie in.")
    count = _check_n(n, minimum=2)
    m = _check_stat(mean, "mean", low=lo, high=hi)
    var = _check_variance(variance, "variance")
    half = _mp_margin(var, count, hi - lo, (1.0 - level) / 2.0)
    return ConfidenceInterval(max(lo, m - half), min(hi, m + half))


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
    max_weight : float
        The clip level ``R``, fixed before looking at the data: :math:`0 \le \bar w \le R`.
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
        If ``max_weight`` or ``reward_range`` is None.
    EstimationError
        If ``n < 2``.
    ValidationError
        For a bad ``confidence_level`` or ``outer``, or statistics outside their a priori ranges.

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
    level = _check_confidence_level(confidence_level)
    r_min, r_max = _check_reward_range(reward_range)
    clip = _check_max_weight(
        max_weight, hint="Pass max_weight=, the clip level used for the clipped weights."
    )
    if outer not in ("bernstein", "normal"):
        raise ValidationError(f"`outer` must be 'bernstein' or 'normal', got {outer!r}.")
    count = _check_n(n, minimum=2)
    span = r_max - r_min
    w_hat = _check_stat(weight_mean, "weight_mean", low=0.0, high=clip)
    y_hat = _check_stat(product_mean, "product_mean", low=0.0, high=clip * span)
    w_var = _check_variance(weight_variance, "weight_variance")
    y_var = _check_variance(product_variance, "product_variance")

    alpha = 1.0 - level
    if outer == "bernstein":
        eps = _mp_margin(y_var, count, clip * span, alpha / 4.0)
        xi = _mp_margin(w_var, count, clip, alpha / 2.0)
    else:
        eps = float(stats.norm.isf(alpha / 4.0)) * math.sqrt(y_var / count)
        xi = float(stats.norm.isf(alpha / 2.0)) * math.sqrt(w_var / count)

    def clip_reward(x: float) -> float:
        return min(max(x, r_min), r_max)

    centre = r_min + y_hat
    w_lcl = min(1.0, max(0.0, w_hat - xi))
    missing_mass = 1.0 - w_lcl
    inner_high = centre + span * missing_mass
    if centre - eps > r_max:
        # E[wbar * l] <= E[w] * M <= M, so the outer interval cannot lie above the range unless
        # it missed (probability <= alpha / 4) or the weights do not average to 1
        from ope.estimators import _user_stacklevel

        warnings.warn(
            f"the outer interval for the clipped estimand, [{centre - eps:.4g}, "
            f"{centre + eps:.4g}], lies entirely above the reward range [{r_min:g}, {r_max:g}]; "
            "the interval is reduced to its upper end. Clipped weights average at most 1 under "
            f"correct propensities; here the mean clipped weight is {w_hat:.4g}"
            + (", which exceeds 1" if w_hat > 1.0 else "")
            + ". Check the logged propensities and that the candidate's probabilities sum to 1 "
            "over the actions.",
            OverlapWarning,
            stacklevel=_user_stacklevel(),
        )
    return BottouInterval(
        low=clip_reward(centre - eps),
        high=clip_reward(inner_high + eps),
        outer_low=clip_reward(centre - eps),
        outer_high=clip_reward(centre + eps),
        inner_low=clip_reward(centre),
        inner_high=clip_reward(inner_high),
    )

