"""Off-policy value estimators: DM, IPS, clipped IPS, SNIPS, DR, SNDR, Switch-DR and DRos.

Every estimator is a frozen dataclass holding its settings only (``ClippedIPS(max_weight=10)``;
variants via :func:`dataclasses.replace`), validated when it is built, and runs one template:

1. ``_validate``: shapes, finiteness, propensities in (0, 1], target propensities in [0, 1],
   rewards within ``reward_range`` when given, reward-model arrays present for DM/DR (every
   check through :mod:`ope._validation`);
2. the statistics of the rows, from one of the two kernels of :mod:`ope.moments`:

   - the *weighting* estimators (IPS, clipped IPS, SNIPS and the logging value) read their value
     and variance off the centred moments of :func:`ope.moments.centered_moments`, the same
     statistics that :class:`ope.streaming.MomentStats` merges over batches; each supplies only
     :meth:`WeightingEstimator.moment_statistic` (raw product, clipped product, ratio, reward);
   - the *model-based* estimators (DM, DR, SNDR, Switch-DR, DRos) supply per-row components
     ``A_i`` (e.g. ``q + w (r - q_logged)``), the value ``g(mean A)`` and its gradient, and
     :func:`ope.moments.component_moments` accumulates the means and the variance of the
     influence terms ``psi_i = grad g . (A_i - mean A)`` (the delta method);
3. notes and warnings (Kish ESS, mean weight far from 1, small n) by the rules of
   :mod:`ope._thresholds`, the same from every entry point.

What each result covers (``Estimate.target``): every estimate targets the policy's
value, except clipped IPS whose clip binds, whose value and normal, t, bootstrap, hoeffding and
bernstein intervals target the clipped value ``r_lo + E[min(w, R) (r - r_lo)]`` (``r_lo`` the lower
end of ``reward_range``, 0 without one) while its bottou interval covers the policy's value.
Switch-DR and DRos are biased estimators of the policy value (their target is the policy value).
DM carries no interval: its standard error treats the reward model as exact. Normal, t and
bootstrap intervals are intersected with ``reward_range`` when it is given, as the bounded ones
are; an estimate on fewer than ``MIN_EFFECTIVE_ROWS`` effective rows gets a note and a
:class:`~ope.exceptions.SmallSampleWarning` pointing to betting and empirical likelihood.

Because each value is a smooth function of column means, the same description serves the
vectorized bootstrap (renormalizing self-normalized estimators inside every resample), paired
comparisons and the mergeable statistics of :mod:`ope.streaming`.

**Sampling weights (Horvitz-Thompson).** A logger that keeps row ``i`` with probability
``pi_i`` (DSJSON's ``pdrop``: ``pi_i = 1 - pdrop_i``) gives it the sampling weight
``s_i = 1 / pi_i`` (``sampling_weight=``; the ``weight`` column in ``ope.evaluate``). The
estimand is then the policy's value on the *logged population* (every event, kept or dropped),
and an estimator whose value is ``g(mean A)`` of per-row components ``A_i`` becomes
``g(sum s A / sum s)``: each population mean is a Hajek ratio, since the population size is
itself estimated, by ``N = sum s``. So, with ``w`` the importance weight:

- IPS: ``V = sum s w r / sum s``; SNIPS: ``sum s w r / sum s w``;
- clipped IPS: ``r_lo + sum s min(w, R) (r - r_lo) / sum s``; the logging value
  ``sum s r / sum s``;
- DM: ``sum s q(x, pi) / sum s``; DR (Switch-DR, DRos with their weights):
  ``sum s [q(x, pi) + w (r - q(x, a))] / sum s``; SNDR:
  ``sum s q(x, pi) / sum s + sum s w (r - q(x, a)) / sum s w``.

The standard error linearizes the ratio: ``psi_i = s_i grad g . (A_i - Abar_s) / mean(s)``
(``Abar_s`` the weighted means) and ``se = sd(psi) / sqrt(n)`` over the ``n`` kept rows; the
bootstrap resamples the components ``(s A, s)``, so each resample weights row ``i`` by its
Poisson count times ``s_i``. ``ess`` is Kish's ESS of the products ``s_i w_i`` (of ``s_i`` for
DM), and the low-ESS note compares it with Kish's ESS of ``s`` alone. Integer weights give the
same values as repeating each row ``s_i`` times; the standard errors differ (the repeated rows
would count as ``sum s`` independent rows). Unit weights give the unweighted numbers. The
bounded intervals (hoeffding, bernstein, bottou, empirical likelihood, betting) are for
unweighted means of i.i.d. rows and refuse weighted rows with an error naming the weight
column. IPS, SNIPS, clipped IPS and the logging value read the weighted sums and co-moments
that the moment kernel accumulates in its one pass (:class:`ope.moments.WeightedMoments`), for
eager estimates, :func:`estimate_weighted_many` (several estimators, one pass), segments (one
grouped pass) and merged statistics (:class:`ope.streaming.MomentStats` over batches, lazy scans,
Dask), which all give the same numbers.

Estimator names for strings (``ope.evaluate(..., estimators=("ips", "snips"))``):
``dm, ips, clipped_ips, snips, dr, sndr, switch_dr, dros``; see :func:`get_estimator`.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final, overload

import numpy as np
import numpy.typing as npt

from ope._centered import CenteredMoments
from ope._docstrings import fill_doc
from ope._format import Note
from ope._thresholds import (
    ESS_RATIO_WARN,
    MEAN_WEIGHT_Z,
    MIN_ROWS,
    SKEW_ROWS,
    SMALL_SAMPLE_ROWS,
    WEIGHTED_SMALL_SAMPLE_ADVICE,
    as_sentence,
    ess_note,
    few_effective_rows,
    few_effective_rows_note,
    kish_ess,
    low_ess,
    mean_weight_check,
    mean_weight_note,
    skew_cannot_flag,
    skewed_terms,
    skewed_terms_note,
    small_sample,
    small_sample_note,
)
from ope._validation import (
    MAX_FINITE_WEIGHT,
    as_float_array,
    check_finite,
    check_names,
    check_max_weight,
    check_no_overflow,
    check_real,
    check_reward_range,
    check_rewards_in_range,
    check_weight_bound,
    chunks,
    describe,
    power_of_two_scale,
    require_reward_range,
    user_stacklevel,
    validated_pair,
    value_range,
)
from ope.exceptions import (
    EstimationError,
    OverlapWarning,
    ParameterError,
    SmallSampleWarning,
    ValidationError,
)
from ope.intervals._rows import RowColumn, WeightingRows
from ope.intervals._types import BottouInterval, ConfidenceInterval
from ope.moments import (
    DEFAULT_CHUNK_SIZE,
    Checks,
    ComponentMoments,
    WeightedMoments,
    WeightSummary,
    centered_moments,
    component_moments,
    ratio,
    skewness,
    weighted_moments,
    weighted_terms_skewness,
)
from ope.results import Estimate, IntervalRequest, RowSource, Source, make_estimate
from ope.weights import MIN_SAMPLING_WEIGHT, check_sampling_weight, sampling_weight_note

__all__ = [
    "DM",
    "IPS",
    "ClippedIPS",
    "SNIPS",
    "DR",
    "SNDR",
    "SwitchDR",
    "DRos",
    "MIPS",
    "SNMIPS",
    "MarginalizedDR",
    "OffCEM",
    "ESTIMATORS",
    "LoggingValue",
    "get_estimator",
    "estimator_settings",
    "estimate_many",
    "estimate_weighted_many",
    "weighted_estimates",
    "weighted_estimates_from_moments",
    "logging_value",
    "check_after_pass",
    "pair_arrays",
    "weighted_statistic",
    "weighted_gradient",
    "weighted_refusal",
    "WEIGHTED_CI_ADVICE",
    "weighted_target_note",
    "WEIGHTED_CI_METHODS",
    "ESS_RATIO_WARN",
    "MEAN_WEIGHT_Z",
    "SMALL_SAMPLE_ROWS",
    "SKEW_ROWS",
    "HOLDING_METHODS",
    "SKEWED_WITHOUT_BOUNDS",
    "skewed_notes",
    "kernel_skew_notes",
    "UNDERCOVER_RULES",
    "Estimator",
    "EstimatorRows",
    "WeightingEstimator",
    "estimates_from_moments",
    "interval_target",
    "moment_interval",
    "policy_labels",
    "unknown_estimator",
]

_BOUNDED_BY_MOMENTS: Final = ("hoeffding", "bernstein", "bottou")


# ============================================================================================
# validation (the one `_validate` of every entry point)
# ============================================================================================
@dataclass(frozen=True)
class _Inputs:
    reward: np.ndarray  # (n,)
    logging_propensity: np.ndarray | None  # (n,)
    target_propensity: np.ndarray | None  # (n, P)
    q_logged: np.ndarray | None  # (n,)
    q_target: np.ndarray | None  # (n, P)
    reward_range: tuple[float, float] | None
    names: tuple[str | None, ...]
    #: the rows' sampling (Horvitz-Thompson) weights, and what messages call them
    sampling_weight: np.ndarray | None = None
    weight_name: str = "sampling_weight"
    #: the largest magnitude of the rewards and model predictions when validation read it
    peak: float | None = None

    @property
    def n(self) -> int:
        return int(self.reward.shape[0])


def policy_labels(
    names: Sequence[str] | None,
    n_pol: int,
    columns: str = "target_propensity",
    argument: str = "names",
) -> tuple[str | None, ...]:
    """One distinct, non-blank label per policy column (``None`` for each when no names are
    given); ``columns`` is the argument whose columns are the policies, ``argument`` the one
    that names them (in messages)."""
    if names is None:
        return (None,) * n_pol
    labels = tuple(check_names(names, argument, example=f"{argument}=['greedy']"))
    if len(labels) != n_pol:
        raise ValidationError(
            f"`{argument}` has {len(labels)} entries but `{columns}` has {n_pol} policy "
            "columns; give one name per column."
        )
    blank = [i for i, x in enumerate(labels) if not x.strip()]
    if blank:
        raise ParameterError(
            f"`{argument}[{blank[0]}]` is blank ({labels[blank[0]]!r}): a policy name labels its "
            f"estimates and table rows. Pass e.g. {argument}=['greedy']."
        )
    if len(set(labels)) != len(labels):
        repeated = sorted({x for x in labels if labels.count(x) > 1})
        raise ParameterError(
            f"`{argument}` must be distinct (one per policy column); "
            f"{', '.join(map(repr, repeated))} appears more than once."
        )
    return labels


def _positive_setting(value: Any, name: str, owner: str) -> float:
    """An estimator setting that must be a positive finite number (``tau``, ``shrinkage``)."""
    if value is None:
        raise ParameterError(f"{owner} needs `{name}`, a positive finite number; got None.")
    x = check_real(value, name)
    if not (math.isfinite(x) and x > 0):
        raise ParameterError(f"{owner}: `{name}` must be a positive finite number; got {value!r}.")
    return x


def _validate(
    estimator: Estimator,
    *,
    reward: npt.ArrayLike,
    logging_propensity: npt.ArrayLike | None,
    target_propensity: npt.ArrayLike | None,
    q_logged: npt.ArrayLike | None,
    q_target: npt.ArrayLike | None,
    reward_range: Sequence[float] | None,
    names: Sequence[str] | None,
    rewards_checked: bool = False,
    deferred: bool = False,
    sampling_weight: npt.ArrayLike | None = None,
    weight_name: str = "sampling_weight",
) -> _Inputs:
    """Shapes and types of every input; with ``deferred`` the value checks (finite rewards and
    model predictions, propensity ranges, rewards within ``reward_range``) are left to the
    estimate's pass: :func:`check_after_pass` reads what the moment kernel saw (weighting
    estimators), :class:`_BlockRanges` what the chunked pass of the others saw (rows without
    sampling weights)."""
    rr = check_reward_range(reward_range)
    r = as_float_array(reward, "reward", ndim=(1,))
    peak = None if deferred else _finite_peak(r, "reward")
    n = r.shape[0]
    if n < MIN_ROWS:
        raise ValidationError(
            f"{estimator.name}: need at least {MIN_ROWS} rows for a value with a standard "
            f"error; `reward` has {n}. Pass every logged row (reward, propensities and model "
            "predictions of the same rows)."
        )
    s = None
    if sampling_weight is not None:  # deferred: the values are checked after the kernel's pass
        s = check_sampling_weight(sampling_weight, n, name=weight_name, values=not deferred)
    p = t = None
    n_pol: int | None = None
    if estimator.uses_weights:
        missing = [
            f"{k}="
            for k, v in (
                ("logging_propensity", logging_propensity),
                ("target_propensity", target_propensity),
            )
            if v is None
        ]
        if missing:
            raise ValidationError(
                f"{estimator.name} weights rows by target/logging propensity: pass "
                f"{' and '.join(missing)}."
            )
        if deferred:
            p, t = pair_arrays(logging_propensity, target_propensity)
        else:
            p, t = validated_pair(logging_propensity, target_propensity)  # type: ignore[arg-type]
        if p.shape[0] != n:
            raise ValidationError(
                f"`logging_propensity` has {p.shape[0]} rows but `reward` has {n}; all arrays "
                "must describe the same logged rows."
            )
        if t.ndim == 1:
            t = t[:, None]
        n_pol = t.shape[1]
    ql = qt = None
    if estimator.needs:
        given = {"q_logged": q_logged, "q_target": q_target}
        missing = [f"{k}=" for k in estimator.needs if given[k] is None]
        if missing:
            raise ValidationError(
                f"{estimator.name} needs a reward model's predictions: pass "
                f"{' and '.join(missing)} (q_logged: q(x_i, a_i) of the logged action, shape "
                "(n,); q_target: q(x_i, pi) = sum_a pi(a|x_i) q(x_i, a), shape (n,) or (n, P)), "
                "or use ope.evaluate(..., reward_model=...) to fit one with cross-fitting."
            )
        if "q_logged" in estimator.needs:
            ql = as_float_array(q_logged, "q_logged", ndim=(1,))  # type: ignore[arg-type]
            if ql.shape[0] != n:
                raise ValidationError(f"`q_logged` has {ql.shape[0]} rows but `reward` has {n}.")
            if not deferred:
                peak = max(peak or 0.0, _finite_peak(ql, "q_logged"))
        qt = as_float_array(q_target, "q_target", ndim=(1, 2))  # type: ignore[arg-type]
        if qt.shape[0] != n:
            raise ValidationError(f"`q_target` has {qt.shape[0]} rows but `reward` has {n}.")
        if not deferred:
            peak = max(peak or 0.0, _finite_peak(qt, "q_target"))
        if qt.ndim == 1:
            qt = qt[:, None]
        if n_pol is not None and qt.shape[1] != n_pol:
            raise ValidationError(
                f"`q_target` has {qt.shape[1]} policy columns but `target_propensity` has "
                f"{n_pol}; give one column per candidate policy in both."
            )
        n_pol = qt.shape[1]
    if n_pol is None:  # neither weights nor a model: the logging value, a single "policy"
        n_pol = 1
    if not (rewards_checked or deferred):  # ope.evaluate checks them once for every estimator
        check_rewards_in_range(r, rr)
    labels = policy_labels(names, n_pol, "target_propensity" if t is not None else "q_target")
    return _Inputs(r, p, t, ql, qt, rr, labels, s, weight_name, peak)


def _finite_peak(arr: np.ndarray, name: str) -> float:
    """:func:`check_finite` of ``arr``, returning its largest magnitude (from the same pass)."""
    if arr.size == 0:
        return 0.0
    low, high = value_range(arr)
    if not (math.isfinite(low) and math.isfinite(high)):
        check_finite(arr, name)  # raises with the count and the first row
    return max(abs(low), abs(high))


def pair_arrays(logging_propensity: Any, target_propensity: Any) -> tuple[np.ndarray, np.ndarray]:
    """The two propensity arrays as floating arrays of matching lengths (values unchecked)."""
    p = as_float_array(logging_propensity, "logging_propensity", ndim=(1,))
    t = as_float_array(target_propensity, "target_propensity", ndim=(1, 2))
    if t.shape[0] != p.shape[0]:
        validated_pair(p, t)  # raises the shared message for mismatched lengths
    return p, t


def check_after_pass(
    checks: Checks,
    reward: np.ndarray,
    logging_propensity: np.ndarray | None,
    target_propensity: Any,
    reward_range: tuple[float, float] | None,
    *,
    rewards_checked: bool = False,
) -> None:
    """The input checks of a weighting estimate, from what the kernel saw in its pass.

    When every range is as required (finite rewards, propensities in (0, 1], target
    propensities in [0, 1], no weight above :data:`ope._validation.MAX_FINITE_WEIGHT`, rewards
    within ``reward_range``) nothing more is read. Otherwise the shared validators run, in the
    order of the eager checks, and raise with the column, the count and the first row.
    ``target_propensity`` is an (n, P) array or a sequence of columns.
    """
    if reward.shape[0] == 0:
        return
    ok = math.isfinite(checks.r_min) and math.isfinite(checks.r_max)
    if logging_propensity is not None:
        ok = ok and checks.p_min > 0.0 and checks.p_max <= 1.0
        ok = ok and checks.p_min * MAX_FINITE_WEIGHT >= 1.0
        ok = ok and bool(np.all(checks.t_min >= 0.0)) and bool(np.all(checks.t_max <= 1.0))
    if reward_range is not None and not rewards_checked:
        ok = ok and checks.r_min >= reward_range[0] and checks.r_max <= reward_range[1]
    if ok and checks.finite:
        return
    check_finite(reward, "reward")
    if logging_propensity is not None:
        t = target_propensity
        if not isinstance(t, np.ndarray):
            t = np.column_stack(list(t))
        validated_pair(logging_propensity, t)
    if not rewards_checked:
        check_rewards_in_range(reward, reward_range)
    if not checks.finite:
        raise ValidationError(
            "the weighted sums of these rows are not finite in float64 although every input "
            "is: rewards of magnitude up to "
            f"{max(abs(checks.r_min), abs(checks.r_max)):.3g} with propensities down to "
            f"{checks.p_min:.3g}. Rescale the `reward` column (e.g. divide it by its largest "
            "magnitude) and estimate again."
        )


# ============================================================================================
# moment-based bounded intervals (shared by the eager and the streaming paths)
# ============================================================================================
def moment_interval(
    estimator: WeightingEstimator,
    method: str,
    mom: CenteredMoments,
    j: int,
    *,
    reward_range: tuple[float, float] | None,
    weight_bound: float | None,
    outer: str | None,
    confidence_level: float,
) -> ConfidenceInterval | BottouInterval:
    """Hoeffding / Bernstein / Bottou intervals of policy ``j`` from centred moments.

    ``estimator`` is IPS, clipped IPS or the logging value. Means and variances come from
    shifted, centred statistics (``MomentStats.centered``), so the intervals are
    equivariant to shifting the rewards and ``reward_range`` together, to rounding, even for
    rewards far from zero.
    """
    low_r, high_r = require_reward_range(reward_range, method)
    kind, clip_level = estimator.name, estimator.clip_level
    n = int(mom.n)
    if method == "bottou":
        if clip_level is None:
            raise EstimationError("bottou applies to clipped IPS only.")
        from ope.intervals.bounded import bottou_interval

        w_mean, w_var = mom.weight_mean_var(j, clipped=True)
        # z = wbar * (r - r_min): shifted so that z >= 0 (Bottou et al. assume 0 <= loss <= M)
        z_mean, z_var = mom.product_mean_var(j, clipped=True, about=low_r)
        return bottou_interval(
            n=n,
            weight_mean=w_mean,
            weight_variance=w_var,
            product_mean=z_mean,
            product_variance=z_var,
            max_weight=clip_level,
            reward_range=(low_r, high_r),
            confidence_level=confidence_level,
            outer="bernstein" if outer is None else outer,  # type: ignore[arg-type]  # checked there
        )
    if outer is not None:
        raise ParameterError(f"`outer` applies only to method='bottou'; got {method!r}.")
    if kind == "logging":
        if weight_bound is not None:
            raise ParameterError("the logging value has no weights; do not pass `weight_bound`.")
        mean, var = mom.reward_mean_var()
        low, high = low_r, high_r
    elif clip_level is None:  # IPS
        bound = check_weight_bound(weight_bound, method=method, observed_max=float(mom.max_w[j]))
        assert bound is not None
        mean, var = mom.product_mean_var(j, clipped=False, about=0.0)
        low, high = min(0.0, bound * low_r), max(0.0, bound * high_r)
    else:
        if weight_bound is not None:
            raise ParameterError(
                "ClippedIPS uses its own max_weight (the clip level) as the weight bound; do not "
                "pass `weight_bound` to ci()."
            )
        # the clipped terms on the shifted scale, min(w, R) (r - r_lo) in [0, R (r_hi - r_lo)];
        # the interval of their mean is moved back by r_lo below
        mean, var = mom.product_mean_var(j, clipped=True, about=low_r)
        low, high = 0.0, clip_level * (high_r - low_r)
    from ope.intervals import bounded

    if method == "hoeffding":
        iv = bounded.hoeffding_interval(
            mean, n, low=low, high=high, confidence_level=confidence_level
        )
    else:
        iv = bounded.bernstein_interval(
            mean, var, n, low=low, high=high, confidence_level=confidence_level
        )
    if clip_level is not None:
        iv = ConfidenceInterval(iv.low + low_r, iv.high + low_r)
    # The terms w*r range over [0, M*r_max], but the estimand itself cannot leave a narrower
    # range: V lies in [r_min, r_max] for IPS, and the clipped value
    # r_min + E[min(w, R) (r - r_min)] (with E[min(w, R)] <= 1) in [r_min, r_max] for clipped
    # IPS. Intersecting with it keeps coverage.
    # An empty intersection (probability <= 1 - confidence_level under the assumptions, since
    # the interval then misses the value) is reported, and reduced to the nearer end point
    # rather than returned inverted; coverage is unaffected, as that event is a miss anyway.
    if kind == "logging":
        return iv
    lo_e, hi_e = low_r, high_r
    low, high = max(iv.low, lo_e), min(iv.high, hi_e)
    if low > high:
        side, point = ("above", hi_e) if iv.low > hi_e else ("below", lo_e)
        mean_w = mom.weight_mean_var(j, clipped=False)[0]
        warnings.warn(
            f"the {method} interval for the mean of the weighted rewards, [{iv.low:.4g}, "
            f"{iv.high:.4g}], lies entirely {side} the range [{lo_e:g}, {hi_e:g}] that the value "
            f"can take; it is reduced to the end point {point:g}. The logs are inconsistent with "
            f"importance weights of mean 1 (the mean importance weight is {mean_w:.4g}): check "
            "the logged propensities and that each candidate's probabilities sum to 1 over the "
            "actions.",
            OverlapWarning,
            stacklevel=user_stacklevel(),
        )
        low = high = point
    return ConfidenceInterval(low, high)


# ============================================================================================
# sampling weights (Horvitz-Thompson / Hajek)
# ============================================================================================
#: Interval methods that take sampling weights: the normal and t intervals (from the linearized
#: standard error of the ratio) and the bootstrap (resample weights times sampling weights).
WEIGHTED_CI_METHODS: Final = ("normal", "t", "bootstrap")


def weighted_statistic(estimator: Estimator, means: np.ndarray) -> np.ndarray:
    """The estimator's statistic at the sampling-weighted means of its components.

    ``means`` (..., k + 1) are the means of ``(s A_1, ..., s A_k, s)``: the statistic is
    ``g(mean(s A) / mean(s))``, i.e. ``g`` of the Hajek means ``sum s A / sum s``.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.estimators import SNIPS, weighted_gradient, weighted_statistic
    >>> m = np.array([3.0, 7.0, 8.0]) / 4   # means of (s w r, s w, s) over 4 rows
    >>> float(weighted_statistic(SNIPS(), m))   # sum s w r / sum s w
    0.42857142857142855
    >>> weighted_gradient(SNIPS(), m).round(8) + 0.0  # d/dm_s = 0: SNIPS does not use sum s
    array([ 0.57142857, -0.24489796,  0.        ])
    """
    return estimator._statistic(means[..., :-1] / means[..., -1:])


def weighted_gradient(estimator: Estimator, means: np.ndarray) -> np.ndarray:
    """Gradient of :func:`weighted_statistic` at ``means`` (k + 1,), by the chain rule:
    ``dg/dm_i = g_i / m_s`` and ``dg/dm_s = -sum_i g_i m_i / m_s^2`` with ``g_i`` the
    estimator's gradient at ``u = m[:k] / m_s``."""
    m_s = means[-1]
    u = means[:-1] / m_s
    g = np.asarray(estimator._gradient(u), dtype=np.float64)
    return np.concatenate([g / m_s, [-float(g @ u) / m_s]])


#: What :func:`weighted_refusal` advises by default: the intervals that take sampling weights.
WEIGHTED_CI_ADVICE: Final = (
    "Use ci='normal', 't' or 'bootstrap' (the bootstrap resamples with the sampling weights); "
    "ignoring the weights would estimate the value on the kept rows, not on the logged "
    "population."
)


def weighted_refusal(method: str, weight_name: str, *, advice: str = WEIGHTED_CI_ADVICE) -> str:
    """Why ``method`` refuses rows with sampling weights, and what to use instead (``advice``:
    the intervals the caller offers, e.g. merged statistics keep no rows to bootstrap)."""
    why = {
        "hoeffding": "it bounds the mean of i.i.d. terms in a known range",
        "bernstein": "it bounds the mean of i.i.d. terms in a known range",
        "bottou": "its inner and outer bounds are for an unweighted mean of clipped terms",
        "empirical_likelihood": "its likelihood is over equally weighted rows",
        "betting": "its wealth process bets on each unweighted row in turn",
    }.get(method, "it is defined for unweighted rows")
    return (
        f"interval method {method!r} does not take sampling weights ({why}), and these rows "
        f"carry sampling weights (column `{weight_name}`), which make the estimate a ratio of "
        f"weighted sums. {advice}"
    )


@dataclass(frozen=True)
class _WeightedRows:
    """What the notes read of sampling-weighted rows: sum and Kish ESS of the sampling weights
    ``s``, and per policy the :class:`~ope.moments.WeightSummary` and clipped-row count."""

    total: float
    ess: float
    summaries: tuple[WeightSummary, ...]
    n_clipped: tuple[int, ...]


def _weighted_rows(estimator: Estimator, data: _Inputs, chunk_size: int) -> _WeightedRows:
    """Sums of the sampling weights and of their products with each policy's weights.

    Per policy: the Hajek mean of the raw weights ``m = sum s w / sum s`` (1 in expectation
    under overlap), ``n`` times the linearized variance of that ratio,
    ``n / (n - 1) * sum s^2 (w - m)^2 / (sum s)^2``, and the Kish ESS of the products
    ``s w'`` of the weights used.
    """
    s = data.sampling_weight
    assert s is not None
    n = data.n
    total, total2 = float(np.sum(s)), float(np.dot(s, s))
    ess_s = kish_ess(total, total2)
    if not estimator.uses_weights:
        return _WeightedRows(total, ess_s, (), ())
    assert data.logging_propensity is not None and data.target_propensity is not None
    n_pol = data.target_propensity.shape[1]
    acc = np.zeros((4, n_pol))  # sum s w, sum (s w')^2, sum s w', sum (s w)^2
    clip = estimator.clip_level if isinstance(estimator, WeightingEstimator) else None
    clipped = np.zeros(n_pol, dtype=np.int64)
    for sl in chunks(n, chunk_size):  # loop over blocks, not rows
        raw = ratio(data.logging_propensity[sl], data.target_propensity[sl])
        sw = s[sl, None] * raw
        su = s[sl, None] * estimator._transform(raw)
        acc += np.stack(
            [
                sw.sum(axis=0),
                np.einsum("ip,ip->p", su, su),
                su.sum(axis=0),
                np.einsum("ip,ip->p", sw, sw),
            ]
        )
        if clip is not None:
            clipped += np.count_nonzero(raw > clip, axis=0)
    mean = acc[0] / total
    dev2 = np.zeros(n_pol)
    for sl in chunks(n, chunk_size):  # the exact centred sum, a second pass over blocks
        raw = ratio(data.logging_propensity[sl], data.target_propensity[sl])
        d = s[sl, None] * (raw - mean)
        dev2 += np.einsum("ip,ip->p", d, d)
    lin_var = dev2 / (total * total) * (n / (n - 1.0))
    summaries = tuple(
        WeightSummary(
            n=n,
            mean=float(mean[j]),
            variance=float(n * lin_var[j]),
            ess=kish_ess(float(acc[2, j]), float(acc[1, j])),
            raw_zero=acc[3, j] == 0.0,
            used_zero=acc[1, j] == 0.0,
            changed=bool(acc[1, j] != acc[3, j] or acc[2, j] != acc[0, j]),
            reference=ess_s,
        )
        for j in range(n_pol)  # loop over policies
    )
    return _WeightedRows(total, ess_s, summaries, tuple(int(c) for c in clipped))


# ============================================================================================
# the template
# ============================================================================================
class EstimatorRows(RowSource):
    """Row references of one policy's estimate (no copies).

    ``moments`` are the centred moments of the rows (policy column ``j`` only) when the
    estimator is a weighting one: the bounded intervals read them instead of another pass.

    With ``sampling_weight`` ``s`` (rows kept with probability ``1 / s_i``) the components are
    ``(s_i A_i, s_i)`` for the estimator's own components ``A_i``, and the statistic is the
    estimator's statistic at the weighted means ``sum s A / sum s`` (:func:`weighted_statistic`):
    the bootstrap's resample weights multiply ``s_i``, and the influence terms are those of the
    ratio. ``clipped_rows`` is then the number of rows whose weight exceeds a clip level.
    """

    def __init__(
        self,
        estimator: Estimator,
        reward: np.ndarray,
        logging_propensity: np.ndarray | None,
        target_propensity: np.ndarray | None,
        q_logged: np.ndarray | None,
        q_target: np.ndarray | None,
        reward_range: tuple[float, float] | None,
        *,
        moments: CenteredMoments | None = None,
        sampling_weight: np.ndarray | None = None,
        weight_name: str = "sampling_weight",
        clipped_rows: int = 0,
    ) -> None:
        self.estimator = estimator
        self.sampling_weight = sampling_weight
        self.weight_name = weight_name
        self.clipped_rows = clipped_rows
        self.reward = reward
        self.logging_propensity = logging_propensity
        self.target_propensity = target_propensity
        self.q_logged = q_logged
        self.q_target = q_target
        self.reward_range = reward_range
        self.moments = moments
        self.n = int(reward.shape[0])
        self.methods = ("bootstrap",) + estimator.interval_methods
        self.value_range = reward_range
        self.model_conditional = estimator.name == "dm"

    def interval_alternatives(self) -> tuple[str, ...]:
        """:attr:`methods`, without those that refuse sampling-weighted rows when the rows
        carry sampling weights (:data:`WEIGHTED_CI_METHODS` take them)."""
        if self.sampling_weight is None:
            return tuple(self.methods)
        return tuple(m for m in self.methods if m in WEIGHTED_CI_METHODS)

    def target_of(self, method: str) -> str:
        est = self.estimator
        if self.sampling_weight is not None:
            clipped = isinstance(est, WeightingEstimator) and est.clip_level is not None
            return (
                "clipped value"
                if clipped and self.clipped_rows > 0 and method != "bottou"
                else "policy value"
            )
        return interval_target(est, self.moments, 0, method)

    def raw_weights(self) -> np.ndarray:
        """The importance weights ``target / logging`` of the rows (recomputed, not kept)."""
        assert self.logging_propensity is not None and self.target_propensity is not None
        return ratio(self.logging_propensity, self.target_propensity)

    def components(self) -> np.ndarray:
        a = self._unweighted_components()
        s = self.sampling_weight
        if s is None:
            return a
        return np.hstack([a * s[:, None], s[:, None]])

    def _unweighted_components(self) -> np.ndarray:
        # recomputed on request rather than cached: an Estimate must not pin (n, k) arrays
        est = self.estimator
        w = est._transform(self.raw_weights()[:, None]) if est.uses_weights else None
        ql = None if self.q_logged is None else self.q_logged.astype(np.float64, copy=False)
        qt = None if self.q_target is None else self.q_target.astype(np.float64)[:, None]
        r = self.reward.astype(np.float64, copy=False)
        origin = (
            est.reward_origin(self.reward_range) if isinstance(est, WeightingEstimator) else 0.0
        )
        if origin == 0.0:
            return est._components(r, w, ql, qt)[:, :, 0]
        # clipped IPS about r_lo: the component r_lo + min(w, R) (r - r_lo), whose mean is the value
        return est._components(r - origin, w, ql, qt)[:, :, 0] + origin

    def n_components(self) -> int:
        return int(self.estimator.n_components) + (self.sampling_weight is not None)

    def statistic(self, means: np.ndarray) -> np.ndarray:
        if self.sampling_weight is not None:
            return weighted_statistic(self.estimator, means)
        return self.estimator._statistic(means)

    def gradient(self, means: np.ndarray) -> np.ndarray:
        if self.sampling_weight is not None:
            return weighted_gradient(self.estimator, means)
        return self.estimator._gradient(means)

    def special_interval(self, request: IntervalRequest) -> ConfidenceInterval | BottouInterval:
        method, confidence_level, weight_bound, outer = request.fields()
        est = self.estimator
        if self.sampling_weight is not None:
            raise EstimationError(weighted_refusal(method, self.weight_name))
        if method in _BOUNDED_BY_MOMENTS:
            assert isinstance(est, WeightingEstimator) and self.moments is not None
            return moment_interval(
                est,
                method,
                self.moments,
                0,
                reward_range=self.reward_range,
                weight_bound=weight_bound,
                outer=outer,
                confidence_level=confidence_level,
            )
        rr = require_reward_range(self.reward_range, method)
        if outer is not None:
            raise ParameterError(f"`outer` applies only to method='bottou'; got {method!r}.")
        w = self.raw_weights() if est.uses_weights else np.ones(self.n)
        r = self.reward.astype(np.float64, copy=False)
        if method == "empirical_likelihood":
            bound = check_weight_bound(weight_bound, method=method, observed_max=float(w.max()))
            from ope.intervals.likelihood import empirical_likelihood_interval

            return empirical_likelihood_interval(
                w, r, reward_range=rr, weight_bound=bound, confidence_level=confidence_level
            )
        if weight_bound is not None:
            raise ParameterError(
                f"method {method!r} needs no weight bound; do not pass `weight_bound`."
            )
        if method == "log_smoothing":
            from ope.intervals.smoothing import log_smoothing_interval

            return log_smoothing_interval(w, r, reward_range=rr, confidence_level=confidence_level)
        from ope.intervals.betting import betting_interval

        return betting_interval(w, r, reward_range=rr, confidence_level=confidence_level)


#: Rewards and model predictions from this magnitude on are computed in units of a power of two
#: (:func:`_reward_scale`): the sums of components and of squared influence terms of rewards near
#: 1e308 would overflow float64 (influence terms from about 1e154 on). Below it, in the inputs'
#: own units; the scaling by a power of two is exact either way.
_SCALED_FROM: Final = 2.0**64


def _reward_scale(data: _Inputs) -> float:
    """A power of two to divide rewards and model predictions by, so that the largest is in
    [1, 2) when some reach :data:`_SCALED_FROM` (1.0 otherwise)."""
    top = data.peak
    if top is None:
        top = 0.0
        for arr in (data.reward, data.q_logged, data.q_target):
            if arr is not None and arr.size:
                low, high = value_range(arr)
                top = max(top, abs(low), abs(high))
    return power_of_two_scale(top) if top >= _SCALED_FROM else 1.0


def _in_units(values: np.ndarray, scale: float) -> np.ndarray:
    """float64 values divided by ``scale`` (no copy at scale 1)."""
    out = values.astype(np.float64, copy=False)
    return out if scale == 1.0 else out / scale


def _from_units(
    est: Estimator, data: _Inputs, value: float, se: float, scale: float
) -> tuple[float, float]:
    """A value and standard error computed in units of ``scale``, back in reward units; one
    beyond float64 is refused with the input that makes it so (never returned as inf)."""
    if scale != 1.0:
        with np.errstate(over="ignore"):
            value, se = float(np.float64(value) * scale), float(np.float64(se) * scale)
    if not (math.isfinite(value) and math.isfinite(se)):
        inputs = {
            k: v
            for k, v in (
                ("reward", data.reward),
                ("q_logged", data.q_logged),
                ("q_target", data.q_target),
            )
            if v is not None
        }
        check_no_overflow(
            np.array([value, se]), f"{est.name}'s value and standard error", inputs, row=None
        )
    return value, se


class _BlockRanges:
    """The ranges of the inputs of a chunked estimate, gathered block by block during its pass
    (each block read once, while in cache), and the input checks they settle afterwards."""

    def __init__(self) -> None:
        self.low: dict[str, float] = {}
        self.high: dict[str, float] = {}

    def add(self, data: _Inputs, sl: slice) -> None:
        for name in ("reward", "logging_propensity", "target_propensity", "q_logged", "q_target"):
            arr = getattr(data, name)
            if arr is None or not arr[sl].size:
                continue
            low, high = value_range(arr[sl])
            self.low[name] = min(self.low.get(name, math.inf), low)
            self.high[name] = max(self.high.get(name, -math.inf), high)
            if math.isnan(low) or math.isnan(high):  # min/max of a block with a NaN are NaN
                self.low[name] = self.high[name] = math.nan

    def checked(self, data: _Inputs, *, rewards_checked: bool) -> float:
        """The largest magnitude of the rewards and model predictions, once every input is as
        required; otherwise the eager validators run, in their order, and raise with the
        column, the count and the first row."""
        lo, hi = self.low, self.high
        finite = all(
            math.isfinite(lo[k]) and math.isfinite(hi[k])
            for k in ("reward", "q_logged", "q_target")
            if k in lo
        )
        ok = finite
        if data.logging_propensity is not None and data.target_propensity is not None:
            p_lo, p_hi = lo["logging_propensity"], hi["logging_propensity"]
            ok = ok and p_lo > 0.0 and p_hi <= 1.0 and p_lo * MAX_FINITE_WEIGHT >= 1.0
            ok = ok and lo["target_propensity"] >= 0.0 and hi["target_propensity"] <= 1.0
        rr = data.reward_range
        if rr is not None and not rewards_checked:
            ok = ok and lo["reward"] >= rr[0] and hi["reward"] <= rr[1]
        if not ok:
            _finite_peak(data.reward, "reward")
            if data.logging_propensity is not None and data.target_propensity is not None:
                validated_pair(data.logging_propensity, data.target_propensity)
            if data.q_logged is not None:
                _finite_peak(data.q_logged, "q_logged")
            if data.q_target is not None:
                _finite_peak(data.q_target, "q_target")
            if not rewards_checked:
                check_rewards_in_range(data.reward, rr)
        return max(
            (max(abs(lo[k]), abs(hi[k])) for k in ("reward", "q_logged", "q_target") if k in lo),
            default=0.0,
        )


#: Entries (rows x components x policies) up to which the per-row components of a chunked
#: estimate are kept between its two passes rather than computed twice (32 MB of float64).
KEPT_COMPONENTS: Final = 1 << 22


class Estimator(ABC):
    """The shared template; subclasses supply the step that differs.

    Class attributes a subclass sets: ``name`` (registry name), ``uses_weights``, ``needs``
    (reward-model arrays required), ``n_components`` (per-row components k),
    ``interval_methods`` (interval methods besides normal/t/bootstrap) and
    ``zero_weights_fatal`` (all-zero weights make the value undefined).
    """

    name: ClassVar[str] = ""
    uses_weights: ClassVar[bool] = True
    needs: ClassVar[tuple[str, ...]] = ()
    n_components: ClassVar[int] = 1
    interval_methods: ClassVar[tuple[str, ...]] = ()
    zero_weights_fatal: ClassVar[bool] = True
    #: Whether the propensities are marginal over an action embedding (MIPS and kin): the
    #: evaluation then passes each row's embedding probabilities, not its item's.
    marginal: ClassVar[bool] = False

    # ---- the steps a subclass may override -------------------------------------------------
    def _transform(self, w: np.ndarray) -> np.ndarray:
        """Raw weights (c, P) -> the weights the estimator uses."""
        return w

    @abstractmethod
    def _components(
        self,
        r: np.ndarray,
        w: np.ndarray | None,
        q_logged: np.ndarray | None,
        q_target: np.ndarray | None,
    ) -> np.ndarray:
        """Per-row components of shape (c, k, P); r is (c,), w and q_target (c, P)."""

    def _statistic(self, m: np.ndarray) -> np.ndarray:
        """Value from the column means (..., k) -> (...); default: the single mean."""
        return m[..., 0]

    def _gradient(self, m: np.ndarray) -> np.ndarray:
        """Gradient of :meth:`_statistic` at m (k,)."""
        return np.ones(1)

    # ---- the template ----------------------------------------------------------------------
    def _run_weighted(
        self,
        data: _Inputs,
        *,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        rewards_checked: bool = False,
    ) -> list[Estimate]:
        """The estimates of rows with sampling weights ``s`` (Horvitz-Thompson / Hajek).

        Each estimator's components ``A_i`` become ``(s_i A_i, s_i)`` and its value
        ``g(sum s A / sum s)``; the standard error is the delta method's (linearization of the
        ratio), ``sd(psi) / sqrt(n)`` with ``psi_i = s_i grad g . (A_i - Abar_s) / mean(s)``.
        Two chunked passes (means, then the exact centred sum of squared influence terms).
        """
        s = data.sampling_weight
        assert s is not None
        n = data.n
        # the value checks the moment kernel does during its pass on unweighted rows
        check_finite(data.reward, "reward")
        if self.uses_weights:
            assert data.logging_propensity is not None and data.target_propensity is not None
            validated_pair(data.logging_propensity, data.target_propensity)
        if not rewards_checked:
            check_rewards_in_range(data.reward, data.reward_range)
        scale = _reward_scale(data)
        origin = (
            self.reward_origin(data.reward_range) if isinstance(self, WeightingEstimator) else 0.0
        ) / scale
        n_pol = len(data.names)

        def block(sl: slice) -> tuple[np.ndarray, None, None]:
            r = _in_units(data.reward[sl], scale)
            w = None
            if self.uses_weights:
                assert data.logging_propensity is not None and data.target_propensity is not None
                w = self._transform(ratio(data.logging_propensity[sl], data.target_propensity[sl]))
            ql = None if data.q_logged is None else _in_units(data.q_logged[sl], scale)
            qt = None if data.q_target is None else _in_units(data.q_target[sl], scale)
            a = self._components(r - origin if origin else r, w, ql, qt)
            if origin:  # clipped IPS about r_lo: r_lo + min(w, R) (r - r_lo)
                a = a + origin
            sb = s[sl, None, None]
            a = np.broadcast_to(a, (a.shape[0], a.shape[1], n_pol))
            ones = np.broadcast_to(sb, (a.shape[0], 1, n_pol))
            return np.concatenate([a * sb, ones], axis=1), None, None

        cm = component_moments(
            block, n, lambda m: weighted_gradient(self, m), chunk_size=chunk_size
        )
        info = _weighted_rows(self, data, chunk_size)
        weighted_note = sampling_weight_note(data.weight_name, info.total, n)
        out = []
        for j, label in enumerate(data.names):  # loop over policies, not rows
            summary = info.summaries[j] if self.uses_weights else None
            value = float(weighted_statistic(self, cm.means[:, j]))
            se = math.sqrt(cm.psi_var[j] / n)
            notes = weight_notes(
                self,
                n,
                summary,
                label,  # raises on zero weights
                std_error=se * scale,
                weighted=True,
            )
            value, se = _from_units(self, data, value, se, scale)
            if self.name == "dm":
                notes.append(DM_NOTE)
            n_clipped = info.n_clipped[j] if info.n_clipped else 0
            if isinstance(self, WeightingEstimator) and self.clip_level is not None and n_clipped:
                notes.append(weighted_target_note(self, n_clipped, n, data.reward_range))
            rows = self._rows(data, j, None, sampling_weight=s, clipped_rows=n_clipped)
            rows.model_conditional |= summary is not None and summary.used_zero
            if self.name != "dm":  # DM has no interval to be short
                notes += skewed_notes(
                    self.name, n, _skew_of(cm, j), rows, label, weighted=True, prior=notes
                )
            notes.append(weighted_note)
            out.append(
                make_estimate(
                    estimator=self.name,
                    value=value,
                    std_error=se,
                    n=n,
                    ess=info.ess if summary is None else summary.ess,
                    notes=tuple(notes),
                    policy=label,
                    source=rows,
                )
            )
        return out

    def _rows(
        self,
        data: _Inputs,
        j: int,
        moments: CenteredMoments | None,
        *,
        sampling_weight: np.ndarray | None = None,
        clipped_rows: int = 0,
    ) -> EstimatorRows:
        """The row source of policy ``j``'s estimate (references, no copies); with
        ``sampling_weight``, of the weighted estimate (``clipped_rows`` above the clip level)."""
        weighted: dict[str, Any] = (
            {}
            if sampling_weight is None
            else {
                "sampling_weight": sampling_weight,
                "weight_name": data.weight_name,
                "clipped_rows": clipped_rows,
            }
        )
        return EstimatorRows(
            self,
            data.reward,
            data.logging_propensity,
            None if data.target_propensity is None else data.target_propensity[:, j],
            data.q_logged,
            None if data.q_target is None else data.q_target[:, j],
            data.reward_range,
            moments=moments,
            **weighted,
        )

    def _blocks(
        self, data: _Inputs, scale: float = 1.0, ranges: _BlockRanges | None = None
    ) -> Callable[[slice], tuple[Any, Any, Any]]:
        """Per block of rows: the components (c, k, P), the raw and the used weights (c, P);
        rewards and model predictions in units of ``scale`` (see :func:`_reward_scale`).

        When every block's components fit in :data:`KEPT_COMPONENTS` entries, each is kept
        after it is first computed and handed out (then dropped) when the same block is asked
        for again: the second pass of :func:`ope.moments.component_moments` reads them instead
        of computing the weights and components again (the same numbers, bit for bit). With
        ``ranges``, the ranges of the inputs of each block are gathered the first time it is
        read (while it is in cache), for the deferred input checks.
        """
        keep = data.n * self.n_components * len(data.names) <= KEPT_COMPONENTS
        kept: dict[int, np.ndarray] = {}

        def block(sl: slice) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
            if sl.start in kept:  # the second pass over a kept block
                return kept.pop(sl.start), None, None
            if ranges is not None:
                ranges.add(data, sl)
            r = _in_units(data.reward[sl], scale)
            raw = w = None
            if self.uses_weights:
                assert data.logging_propensity is not None and data.target_propensity is not None
                raw = ratio(data.logging_propensity[sl], data.target_propensity[sl])
                w = self._transform(raw)
            ql = None if data.q_logged is None else _in_units(data.q_logged[sl], scale)
            qt = None if data.q_target is None else _in_units(data.q_target[sl], scale)
            components = self._components(r, w, ql, qt)
            if keep:
                kept[sl.start] = components
            return components, raw, w

        return block

    def _run(
        self, data: _Inputs, *, chunk_size: int = DEFAULT_CHUNK_SIZE, rewards_checked: bool = False
    ) -> list[Estimate]:
        if data.sampling_weight is not None:
            return self._run_weighted(data, chunk_size=chunk_size)
        n = data.n
        if data.peak is None:  # deferred checks: read off the pass, which runs at scale 1
            ranges = _BlockRanges()
            with np.errstate(all="ignore"):  # the inputs are judged after the pass
                cm = component_moments(
                    self._blocks(data, 1.0, ranges), n, self._gradient, chunk_size=chunk_size
                )
            peak = ranges.checked(data, rewards_checked=rewards_checked)
            scale = power_of_two_scale(peak) if peak >= _SCALED_FROM else 1.0
            if scale != 1.0:  # large rewards: the pass again, in units of the scale
                data = dataclasses.replace(data, peak=peak)
                cm = component_moments(
                    self._blocks(data, scale), n, self._gradient, chunk_size=chunk_size
                )
        else:
            scale = _reward_scale(data)
            cm = component_moments(
                self._blocks(data, scale), n, self._gradient, chunk_size=chunk_size
            )
        out = []
        for j, label in enumerate(data.names):  # loop over policies, not rows
            summary = cm.weight_summary(j) if self.uses_weights else None
            se = math.sqrt(cm.psi_var[j] / n)
            # the notes first: all-zero weights are an EstimationError there, before a 0 / 0
            notes = weight_notes(self, n, summary, label, std_error=se * scale)
            value = float(self._statistic(cm.means[:, j]))
            value, se = _from_units(self, data, value, se, scale)
            rows = self._rows(data, j, None)
            # every weight zero: the estimate is the reward model's (DM), and carries no
            # interval either (its standard error treats the model as exact)
            rows.model_conditional |= summary is not None and summary.used_zero
            if self.name == "dm":
                notes.append(DM_NOTE)
            else:  # DM has no interval to be short
                notes += skewed_notes(self.name, n, _skew_of(cm, j), rows, label, prior=notes)
            out.append(
                make_estimate(
                    estimator=self.name,
                    value=value,
                    std_error=se,
                    n=n,
                    ess=float(n) if summary is None else summary.ess,
                    notes=tuple(notes),
                    policy=label,
                    source=rows,
                )
            )
        return out

    def _estimate_one(self, **arrays: Any) -> Estimate:
        deferred = isinstance(self, WeightingEstimator) or arrays.get("sampling_weight") is None
        data = _validate(self, names=None, deferred=deferred, **arrays)
        if data.target_propensity is not None and data.target_propensity.shape[1] != 1:
            raise ValidationError(
                f"{self.name}.estimate takes one candidate policy (target_propensity of shape "
                f"(n,)); got {data.target_propensity.shape[1]} columns. Use "
                "ope.estimators.estimate_many for several policies at once."
            )
        if data.q_target is not None and data.q_target.shape[1] != 1:
            raise ValidationError(
                f"{self.name}.estimate takes one candidate policy (q_target of shape (n,)); got "
                f"{data.q_target.shape[1]} columns. Use ope.estimators.estimate_many."
            )
        return self._run(data)[0]


def _moment_arguments(mom: Any, j: Any, origin: Any) -> tuple[int, float]:
    """The arguments of :meth:`WeightingEstimator.moment_statistic`, checked: centred moments,
    a policy column of theirs and a finite reward origin."""
    if not isinstance(mom, CenteredMoments):
        raise ParameterError(
            f"`mom` must be the centred moments of the rows (the `centered` field of an "
            f"ope.streaming.MomentStats, e.g. MomentStats.from_arrays(...).centered); got "
            f"{describe(mom)}."
        )
    n_pol = int(mom.max_w.shape[0])
    if (
        isinstance(j, (bool, np.bool_))
        or not isinstance(j, numbers.Integral)
        or not (0 <= int(j) < n_pol)
    ):
        raise ParameterError(
            f"`j` must be the index of a policy column of `mom`, a whole number in [0, {n_pol}); "
            f"got {describe(j)}."
        )
    return int(j), check_real(origin, "origin", finite=True, example="origin=0.0")


@dataclass(frozen=True)
class _AboutOrigin:
    """A statistic of column means taken about a reward origin: ``origin + statistic(m)``."""

    origin: float
    statistic: Callable[[np.ndarray], np.ndarray]

    def __call__(self, means: np.ndarray) -> np.ndarray:
        return self.origin + self.statistic(means)


class WeightingEstimator(Estimator):
    """An estimator whose value and variance are read off the centred moments of the rows.

    IPS, clipped IPS, SNIPS and the logging value: :meth:`moment_statistic` is the one step
    that differs, and the eager estimate, :func:`estimate_many` and
    :meth:`ope.streaming.MomentStats.estimates` all go through :func:`estimates_from_moments`.
    """

    #: The statistic of the weighted moments this estimator is: ``ips``, ``clipped_ips`` or
    #: ``snips`` (the logging value: ``logging``).
    moment_kind: ClassVar[str] = "logging"

    @property
    def clip_level(self) -> float | None:
        """The clip level of the weights used (None: the raw weights)."""
        return None

    def reward_origin(self, reward_range: tuple[float, float] | None) -> float:
        """The reward level the weights act about (0; clipped IPS: the range's lower end)."""
        check_reward_range(reward_range)
        return 0.0

    def row_source(self, reward_range: Sequence[float] | None = None) -> WeightingRows:
        """The per-row columns of this estimate and the statistic of their means, for a
        bootstrap that resamples every candidate with one set of counts
        (:func:`ope.intervals.bootstrap.shared_bootstrap`).

        The column is ``w r`` with the weights this estimator uses, about
        :meth:`reward_origin` of ``reward_range`` (clipped IPS:
        ``min(w, R) (r - r_lo)``, whose mean plus ``r_lo`` is the value); the logging value's
        column is ``r``.

        Examples
        --------
        >>> import numpy as np
        >>> from ope.estimators import ClippedIPS
        >>> rows = ClippedIPS(max_weight=2.0).row_source((1.0, 3.0))
        >>> r, w = np.array([1.0, 3.0]), np.array([0.5, 4.0])
        >>> col = np.empty(2)
        >>> rows.columns[0].fill(r, w, col)
        >>> col.tolist()                        # min(w, 2) (r - 1)
        [0.0, 4.0]
        >>> float(rows.statistic(col.mean(keepdims=True)))   # 1 + mean
        3.0
        """
        origin = self.reward_origin(check_reward_range(reward_range))
        methods = ("bootstrap", *self.interval_methods)
        if not self.uses_weights:
            return WeightingRows(
                self.name, (RowColumn("reward"),), self._statistic, methods=methods
            )
        column = RowColumn("weighted_reward", clip=self.clip_level, origin=origin)
        if self.clip_level is None and origin == 0.0:
            return WeightingRows(self.name, (column,), self._statistic, methods=methods)
        return WeightingRows(
            self.name, (column,), _AboutOrigin(origin, self._statistic), methods=methods
        )

    def moment_statistic(
        self, mom: CenteredMoments, j: int, origin: float = 0.0
    ) -> tuple[float, float]:
        """Value and standard deviation of the influence terms of policy ``j``.

        ``origin`` is :meth:`reward_origin`: the value is ``origin + mean(w (r - origin))``.
        The deviation is computed in the statistics' units: finite whenever it is
        representable, even where its square is not.
        """
        j, origin = _moment_arguments(mom, j, origin)
        mean, sd = mom.product_mean_sd(j, clipped=self.clip_level is not None, about=origin)
        return origin + mean, sd

    def paired_logging_sd(self, mom: CenteredMoments, j: int, origin: float = 0.0) -> float:
        """Standard deviation of policy ``j``'s influence terms minus the reward's (the paired
        difference of this estimate and the logging value), from the cross-moments of ``mom``.

        ``origin`` is :meth:`reward_origin`: the terms are ``w (r - origin)`` with the weights
        this estimator uses (SNIPS: the delta-method terms of its ratio).
        """
        j, origin = _moment_arguments(mom, j, origin)
        return mom.paired_sd(j, kind="product", clipped=self.clip_level is not None, about=origin)

    def _run(
        self,
        data: _Inputs,
        *,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        rewards_checked: bool = False,
    ) -> list[Estimate]:
        if data.sampling_weight is not None:  # the kernel's sampling-weighted statistics
            p = data.logging_propensity
            t: np.ndarray | Sequence[np.ndarray] | None = data.target_propensity
            if not self.uses_weights:  # the logging value: a pass with no policy at all
                p, t = data.sampling_weight, []
            assert p is not None and t is not None
            (out,) = _weighted_pass(
                [self],
                data.reward,
                p,
                t,
                data.sampling_weight,
                labels=data.names,
                reward_range=data.reward_range,
                weight_name=data.weight_name,
                rewards_checked=rewards_checked,
                chunk_size=chunk_size,
                logging=not self.uses_weights,
            )
            return out
        (out,) = _moment_pass([self], data, chunk_size=chunk_size, rewards_checked=rewards_checked)
        return out


def _moment_pass(
    estimators: Sequence[WeightingEstimator],
    data: _Inputs,
    *,
    chunk_size: int,
    rewards_checked: bool,
) -> list[list[Estimate]]:
    """The estimates of ``estimators`` on unweighted rows from one pass of the moment kernel.

    ``estimators`` have one clip level at most (the raw-weight statistics are accumulated in
    every pass, so IPS and SNIPS ride on a clipped pass); the logging value comes alone (every
    weight is one). ``data`` is shaped but not value-checked: the pass's checks are
    (:func:`check_after_pass`). Per estimator, one Estimate per policy, backed by the rows.
    """
    levels = {e.clip_level for e in estimators if e.clip_level is not None}
    assert len(levels) <= 1
    weights = any(e.uses_weights for e in estimators)
    if weights:
        assert data.logging_propensity is not None and data.target_propensity is not None
        p, t = data.logging_propensity, data.target_propensity
    else:  # the logging value: every weight is one
        p, t = np.ones(data.n), np.ones((data.n, 1))
    mom = centered_moments(
        data.reward, p, t, max_weight=levels.pop() if levels else None, chunk_size=chunk_size
    )
    assert mom.checks is not None
    check_after_pass(
        mom.checks,
        data.reward,
        data.logging_propensity if weights else None,
        t,
        data.reward_range,
        rewards_checked=rewards_checked,
    )
    return [
        estimates_from_moments(
            est,
            mom,
            names=data.names,
            source=lambda j, est=est: est._rows(data, j, mom.column(j)),  # type: ignore[misc]
            reward_range=data.reward_range,
        )
        for est in estimators  # loop over estimators
    ]


#: The note every DM estimate carries (its ci_low/ci_high are NaN).
DM_NOTE: Final = (
    "DM's value is a reward model's prediction: its standard error treats the model as exact, "
    "so it omits the model's error and bias, and no confidence interval is given (ci_low and "
    "ci_high are NaN). For an interval, use DR (or SNDR), which stays valid under a wrong model "
    "when the logged propensities are right."
)


def clip_binds(moments: CenteredMoments | None, j: int) -> bool:
    """True when some row's weight of policy ``j`` exceeds the clip level."""
    return moments is not None and bool(moments.n_clipped[j] > 0)


def interval_target(
    estimator: Estimator, moments: CenteredMoments | None, j: int, method: str
) -> str:
    """What ``method``'s interval of policy ``j``'s estimate covers (see ``Estimate.target``).

    Clipped IPS whose clip binds: bottou covers the policy value, every other method the clipped
    value. Every other estimate: the policy value.
    """
    if isinstance(estimator, WeightingEstimator) and estimator.clip_level is not None:
        if clip_binds(moments, j) and method != "bottou":
            return "clipped value"
    return "policy value"


def clipped_target_note(
    estimator: WeightingEstimator,
    moments: CenteredMoments,
    j: int,
    reward_range: tuple[float, float] | None,
) -> str:
    """The note of a clipped IPS estimate whose clip binds: its origin, what its intervals cover."""
    origin = estimator.reward_origin(reward_range)
    where = (
        f"r_lo = {origin:g}, the lower end of reward_range"
        if reward_range is not None
        else "r_lo = 0 since no reward_range was given (pass reward_range to clip about its "
        "lower end)"
    )
    head = (
        f"clipped IPS estimates r_lo + mean(min(w, {estimator.clip_level:g}) (r - r_lo)) with "
        f"{where}. "
    )
    return head + _binds_text(int(moments.n_clipped[j]), int(moments.n))


def weighted_target_note(
    estimator: WeightingEstimator,
    n_clipped: int,
    n: int,
    reward_range: tuple[float, float] | None,
) -> str:
    """:func:`clipped_target_note` for sampling-weighted rows (the weighted mean)."""
    origin = estimator.reward_origin(reward_range)
    return (
        f"clipped IPS estimates r_lo + sum s min(w, {estimator.clip_level:g}) (r - r_lo) / sum s "
        f"(s the sampling weights) with r_lo = {origin:g}. "
        + _binds_text(n_clipped, n, weighted=True)
    )


def _binds_text(n_clipped: int, n: int, *, weighted: bool = False) -> str:
    if weighted:
        return (
            f"The clip binds on {n_clipped} of {n} rows, so the value and its normal, t and "
            "bootstrap intervals cover the clipped value, which is below the policy's value when "
            "rewards exceed r_lo."
        )
    return (
        f"The clip binds on {n_clipped} of {n} rows, so the value "
        "and its normal, t, bootstrap, hoeffding and bernstein intervals cover the clipped value, "
        "which is below the policy's value when rewards exceed r_lo; ci(method='bottou') covers "
        "the policy's value."
    )


def weight_notes(
    est: Estimator,
    n: int,
    weights: WeightSummary | None,
    label: str | None,
    *,
    std_error: float = math.nan,
    weighted: bool = False,
) -> list[str]:
    """Notes (and warnings) about one policy's weights and ``n``; raises when the value is
    undefined (every weight zero for an estimator that cannot fall back on a model).
    ``weighted``: the rows carry sampling weights (the small-sample notes then do not point to
    the finite-sample intervals, which refuse such rows).

    Warnings about a policy's raw weights (mean weight; ESS when the estimator uses the raw
    weights) and about n do not depend on the estimator, so their text does not name it:
    callers that run several estimators (``ope.evaluate``) emit each distinct message once.
    """
    by_estimator = f"{est.name}" + (f" (policy {label!r})" if label else "") + ": "
    by_policy = f"policy {label!r}: " if label else ""
    notes: list[str] = []
    # what each weight note is about: one policy's raw weights (the same for every estimator
    # that uses them, so stated once), or the weights this estimator changed (clipped,
    # switched); without a subject, two policies' notes of one rule were taken for one
    raw = (label, "raw weights")
    used = raw if weights is None or not weights.changed else (label, est.name)

    def note(text: str, category: type[Warning], prefix: str) -> None:
        notes.append(text)
        warnings.warn(f"{prefix}{text}", category, stacklevel=user_stacklevel())

    if weights is not None:
        if weights.used_zero:
            if weights.raw_zero:
                text = (
                    f"all {n} importance weights are zero: the candidate never chooses a logged "
                    "action (`target_propensity` is 0 on every row), so the logs carry no "
                    "information about it by weighting."
                )
            else:  # e.g. SwitchDR with every weight above tau
                text = (
                    f"every importance weight is switched off or shrunk to 0 by {est!r} (every "
                    "weight exceeds the switching threshold; raise tau to use rows by "
                    "weighting)."
                )
            if est.zero_weights_fatal:
                raise EstimationError(
                    f"{by_estimator}{text} Use DM or DR with a reward model, or collect logs "
                    "with more exploration."
                )
            note(
                text + " The estimate reduces to the reward model (DM) and, as DM's, carries "
                "no normal, t or bootstrap interval.",
                OverlapWarning,
                by_estimator,
            )
        elif weights.reference is None and low_ess(weights.ess, n):
            note(
                ess_note(weights.ess, n, subject=used),
                OverlapWarning,
                by_estimator if weights.changed else by_policy,
            )
        elif weights.reference is not None and weights.ess < ESS_RATIO_WARN * weights.reference:
            note(
                _weighted_ess_note(weights.ess, weights.reference, n, subject=used),
                OverlapWarning,
                by_estimator if weights.changed else by_policy,
            )
        if not weights.used_zero and not small_sample(n) and few_effective_rows(weights.ess):
            # below SMALL_SAMPLE_ROWS rows the small-sample note already says that normal
            # intervals may undercover; the low-ESS note says it of the policy's weights, this
            # one of the estimate's own standard error, which can collapse to 0 (one row with
            # all the weight: SNIPS' interval [1, 1] while IPS reads 5e8 +- 5e8)
            note(
                few_effective_rows_note(
                    weights.ess, std_error, weighted=weighted, subject=(label, est.name)
                ),
                SmallSampleWarning,
                by_estimator,
            )
        status, z = mean_weight_check(n, weights.mean, weights.variance)
        if status != "ok":
            note(mean_weight_note(weights.mean, z, subject=raw), OverlapWarning, by_policy)
    if small_sample(n):
        note(small_sample_note(n, weighted=weighted), SmallSampleWarning, "")
    return notes


#: The intervals a skewed estimate's note recommends, in order, as the note names them: those
#: that hold at any n and need nothing beyond the reward range (the a priori weight bound of
#: IPS's Bernstein and Hoeffding intervals is rarely known; empirical likelihood is asymptotic).
#: Betting for IPS, SNIPS and the logging value; Bottou for clipped IPS, whose clip level is
#: its weight bound.
HOLDING_METHODS: Final = {
    "betting": "ci(method='betting')",
    "bottou": "ci(method='bottou') (it covers the policy's value; ci(method='bernstein') the "
    "clipped value)",
}


def skewed_notes(
    estimator: str,
    n: int,
    skewness: float,
    source: Source | None,
    label: str | None,
    *,
    unit: str = "rows",
    terms: str = "influence terms",
    weighted: bool = False,
    prior: Sequence[str] = (),
    fallback: str | None = None,
    needs: str = "an a priori reward_range",
) -> list[str]:
    """The skewed-terms note (and its warning) of one estimate, or nothing.

    ``skewness`` is the sample skewness of the estimate's ``n`` influence terms (rows, episodes
    or pairs: ``unit``); the note is given when :func:`ope._thresholds.skewed_terms` says the
    normal approximation of their mean needs more of them (``needs``: what the recommended
    interval needs besides the rows), unless a note of ``prior`` (the
    estimate's other notes) already says that its normal interval may undercover (rules
    ``UNDERCOVER_RULES``: few rows, a low or tiny effective sample); ``terms`` says which terms
    ``skewness`` is of. Its advice names the interval
    methods of ``source`` that hold at any n (``FINITE_SAMPLE_METHODS``) or, when there is none
    (DR and the other model-based estimators, rows with sampling weights), says so and gives
    ``fallback`` (default :data:`SKEWED_WITHOUT_BOUNDS`). Every
    estimate of ope reads this one function, so every entry point gives the same note.
    """
    if small_sample(n) or not skewed_terms(n, skewness):
        return []
    if any(getattr(x, "rule", None) in UNDERCOVER_RULES for x in prior):
        return []
    method = next((m for m in HOLDING_METHODS if source is not None and m in source.methods), "")
    if weighted:
        advice = as_sentence(WEIGHTED_SMALL_SAMPLE_ADVICE)
    elif method:
        advice = f"Use {HOLDING_METHODS[method]} with {needs}, which holds at any n."
    else:
        advice = SKEWED_WITHOUT_BOUNDS if fallback is None else fallback
    # one note per estimate: two estimates' notes are the same only on the same terms (a paired
    # difference states each member's once)
    subject = (label, estimator, n, round(skewness, 9))
    text = skewed_terms_note(n, skewness, advice, unit=unit, terms=terms, subject=subject)
    who = estimator + (f" (policy {label!r})" if label else "") + ": "
    warnings.warn(who + text, SmallSampleWarning, stacklevel=user_stacklevel())
    return [text]


#: The rules whose notes already say that an estimate's normal interval may undercover: a
#: skewed-terms note would repeat them (their advice is the same).
UNDERCOVER_RULES: Final = ("small_sample", "low_ess", "few_effective_rows")


#: The advice of a skewed estimate that has no interval holding at any n (DR and the other
#: model-based estimators, sequential WIS and DR): measured in ``benchmarks/short_intervals.py``.
SKEWED_WITHOUT_BOUNDS: Final = (
    "No interval of this estimator holds at any n: read it as approximate, and check the "
    "decision against the bounded intervals of IPS or SNIPS (ci(method='betting'))."
)


def _skew_of(cm: ComponentMoments, j: int) -> float:
    """The skewness of policy ``j``'s influence terms in ``cm`` (NaN when not computed)."""
    return math.nan if cm.psi_skew is None else float(cm.psi_skew[j])


def _weighted_ess_note(ess: float, reference: float, n: int, *, subject: Hashable = None) -> str:
    """The low-ESS note of sampling-weighted rows: the Kish ESS of ``s w`` against that of
    ``s`` alone (what the rows would give an on-policy candidate); ``subject`` as in
    :func:`ope._thresholds.ess_note`."""
    return Note(
        f"effective sample size {ess:.1f} (Kish, of the sampling weights times the importance "
        f"weights) is {ess / reference:.2%} of {reference:.1f}, the effective sample size of the "
        f"sampling weights alone (n={n}): the estimate rests on a few heavily weighted rows and "
        "normal intervals may undercover. Consider clipping or a doubly robust estimator.",
        rule="low_ess",
        subject=subject,
    )


def estimates_from_moments(
    estimator: WeightingEstimator,
    moments: CenteredMoments,
    *,
    names: Sequence[str | None],
    source: Callable[[int], Source],
    reward_range: tuple[float, float] | None = None,
) -> list[Estimate]:
    """One Estimate per policy column of ``moments``: value, standard error, ESS and notes.

    ``reward_range`` sets clipped IPS's origin (:meth:`WeightingEstimator.reward_origin`).

    The one place a weighting estimate is formed from the moment kernel, for the eager
    estimators, :func:`estimate_many` and the merged statistics of
    :class:`ope.streaming.MomentStats`; ``source(j)`` gives what the estimate of policy ``j``
    keeps for its intervals (rows, or the moments alone).
    """
    n = int(moments.n)
    clipped = estimator.clip_level is not None
    origin = estimator.reward_origin(reward_range)
    out = []
    for j, label in enumerate(names):  # loop over policies, not rows
        summary = moments.weight_summary(j, clipped=clipped) if estimator.uses_weights else None
        value, sd = estimator.moment_statistic(moments, j, origin)
        se = sd / math.sqrt(n)
        if not (math.isfinite(value) and math.isfinite(se)) and not (
            summary is not None and summary.used_zero and estimator.zero_weights_fatal
        ):
            raise ValidationError(
                _unrepresentable(
                    estimator, label, value, se, source(j), origin, _reward_peak(moments)
                )
            )
        notes = weight_notes(estimator, n, summary, label, std_error=se)
        if clip_binds(moments, j) if clipped else False:
            notes.append(clipped_target_note(estimator, moments, j, reward_range))
        src = source(j)
        if isinstance(src, RowSource):  # streamed statistics keep no rows to measure skew on
            notes += kernel_skew_notes(estimator, moments, j, src, label, reward_range, notes)
        out.append(
            make_estimate(
                estimator=estimator.name,
                value=value,
                std_error=se,
                n=n,
                ess=float(n) if summary is None else summary.ess,
                notes=tuple(notes),
                policy=label,
                source=src,
            )
        )
    return out


def kernel_skew_notes(
    estimator: WeightingEstimator,
    moments: CenteredMoments,
    j: int,
    rows: RowSource,
    label: str | None,
    reward_range: tuple[float, float] | None,
    prior: Sequence[str],
) -> list[str]:
    """The skewed-terms note (:func:`skewed_notes`) of policy ``j``'s moment-kernel estimate
    backed by ``rows``: the skewness is measured on the rows only when the bound from the
    statistics (largest weight, reward range) cannot clear it. For :func:`estimates_from_moments`
    and for statistics given their rows afterwards
    (:meth:`ope.streaming.MomentStats.with_rows`, the path of ``ope.evaluate``)."""
    origin = estimator.reward_origin(reward_range)
    value, sd = estimator.moment_statistic(moments, j, origin)
    skew, terms = _kernel_skewness(estimator, moments, j, origin, value, sd, rows)
    return skewed_notes(estimator.name, moments.n, skew, rows, label, terms=terms, prior=prior)


def _kernel_skewness(
    estimator: WeightingEstimator,
    moments: CenteredMoments,
    j: int,
    origin: float,
    value: float,
    sd: float,
    src: RowSource,
) -> tuple[float, str]:
    """The skewness the skewed-terms rule reads for policy ``j`` of a moment-kernel estimate,
    and which terms it is of; NaN when the bound of :func:`ope._thresholds.skew_cannot_flag`
    (from the largest weight and the reward's range) clears them without a pass.

    SNIPS reads the larger (in size) of its own influence terms' skewness and that of the IPS
    terms ``w r``: its own terms centre the rewards at the estimate and can look symmetric
    while the weights are heavy (in the calibration study this raised the share of SNIPS
    results flagged in undercovering designs from 0.73 to 0.94, and in well-covering ones from
    0.03 to 0.05).

    The terms are formed from the rows directly (``w (r - c)``, ``w (r - V)``, ``r``: the
    influence terms up to a positive factor and a shift, which leave the skewness unchanged),
    one vector per estimate, not the estimator's components.
    """
    n = moments.n
    found: list[tuple[float, str]] = []
    if not skew_cannot_flag(n, _influence_width(estimator, moments, j, origin), sd):
        found.append((_own_terms_skewness(estimator, src, origin, value), "influence terms"))
    if estimator.uses_weights and estimator.moment_kind == "snips":
        chk = moments.checks
        lo, hi = (math.inf, math.inf) if chk is None else (float(chk.r_min), float(chk.r_max))
        width = float(moments.max_w[j]) * (max(hi, 0.0) - min(lo, 0.0))
        _, sd_ips = moments.product_mean_sd(j, clipped=False, about=0.0)
        if not skew_cannot_flag(n, width, sd_ips):
            assert isinstance(src, EstimatorRows)
            assert src.logging_propensity is not None and src.target_propensity is not None
            found.append(
                (
                    weighted_terms_skewness(
                        src.logging_propensity, src.target_propensity, src.reward
                    ),
                    "IPS terms w r, which can be skewed while its own centred terms look symmetric",
                )
            )
    if not found:
        return math.nan, "influence terms"
    return max(found, key=lambda x: abs(x[0]))


def _own_terms_skewness(
    estimator: WeightingEstimator, src: RowSource, origin: float, value: float
) -> float:
    """The skewness of a moment-kernel estimate's influence terms, from its rows without
    forming its components (:func:`ope.moments.weighted_terms_skewness`): the terms up to a
    positive factor and a shift are IPS ``w r``, clipped IPS ``min(w, R) (r - r_lo)``, SNIPS
    ``w (r - V)``, the logging value ``r``."""
    if not isinstance(src, EstimatorRows) or src.sampling_weight is not None:
        return float(skewness(src.influence()))
    if not estimator.uses_weights:
        return float(skewness(src.reward))
    assert src.logging_propensity is not None and src.target_propensity is not None
    return weighted_terms_skewness(
        src.logging_propensity,
        src.target_propensity,
        src.reward,
        max_weight=estimator.clip_level,
        shift=value if estimator.moment_kind == "snips" else origin,
    )


def _influence_width(
    estimator: WeightingEstimator, moments: CenteredMoments, j: int, origin: float
) -> float:
    """An upper bound on ``max |psi_i|`` of policy ``j``'s influence terms (which average to 0)
    from the largest weight and the reward's range the pass saw (inf when it did not record
    them): what :func:`ope._thresholds.skew_cannot_flag` reads to skip the skewness pass.

    IPS ``psi = w r - V`` and clipped IPS ``psi = min(w, R) (r - r_lo) - (V - r_lo)`` lie in an
    interval of width ``U (max(hi - c, 0) - min(lo - c, 0))`` (``U`` the largest weight used,
    ``c`` the origin); SNIPS ``psi = w (r - V) / mean w`` in one of width ``U (hi - lo) /
    mean w``; the logging value ``r - mean r`` in ``hi - lo``.
    """
    chk = moments.checks
    if chk is None:
        return math.inf
    lo, hi = float(chk.r_min), float(chk.r_max)
    if not estimator.uses_weights:
        return hi - lo
    clipped = estimator.clip_level is not None
    top = float(moments.max_w[j])
    if clipped:
        top = min(top, float(estimator.clip_level))  # type: ignore[arg-type]  # clipped
    if estimator.moment_kind == "snips":
        sum_w, _ = moments.weight_sums(j, clipped=clipped)
        return top * (hi - lo) * moments.n / sum_w if sum_w > 0 else math.inf
    return top * (max(hi - origin, 0.0) - min(lo - origin, 0.0))


def weighted_estimates_from_moments(
    estimator: WeightingEstimator,
    moments: WeightedMoments,
    *,
    names: Sequence[str | None],
    source: Callable[[int], Source],
    reward_range: tuple[float, float] | None = None,
    weight_name: str = "sampling_weight",
) -> list[Estimate]:
    """:func:`estimates_from_moments` of sampling-weighted rows: one Estimate per policy of the
    Horvitz-Thompson (Hajek) estimate and its linearized standard error (see the module notes),
    from the kernel's weighted statistics (:class:`ope.moments.WeightedMoments`).

    The one place a weighted weighting estimate is formed, for the eager estimators,
    :func:`estimate_many`, :func:`estimate_weighted_many` and the merged statistics of
    :class:`ope.streaming.MomentStats`; ``source(j)`` gives what policy ``j``'s estimate keeps
    for its intervals.
    """
    n = moments.n
    kind = estimator.moment_kind if estimator.uses_weights else "logging"
    clipped = estimator.clip_level is not None
    origin = estimator.reward_origin(reward_range)
    note = sampling_weight_note(weight_name, moments.sum_weights(), n)
    ess_s = moments.weight_summary(0, clipped=False).reference
    assert ess_s is not None  # a weighted summary always has the Kish ESS of the weights
    out = []
    for j, label in enumerate(names):  # loop over policies, not rows
        value, sd = moments.estimate(kind, j, origin=origin)
        se = sd / math.sqrt(n)
        summary = moments.weight_summary(j, clipped=clipped) if estimator.uses_weights else None
        notes = weight_notes(
            estimator,
            n,
            summary,
            label,
            std_error=se,  # raises on zero weights
            weighted=True,
        )
        if not (math.isfinite(value) and math.isfinite(se)):
            raise ValidationError(
                _unrepresentable(
                    estimator, label, value, se, source(j), origin, _reward_peak(moments)
                )
            )
        n_clipped = int(moments.n_clipped[j]) if clipped else 0
        if n_clipped:
            notes.append(weighted_target_note(estimator, n_clipped, n, reward_range))
        src = source(j)
        if isinstance(src, RowSource):  # streamed statistics keep no rows to measure skew on
            skew = float(skewness(src.influence()))
            notes += skewed_notes(estimator.name, n, skew, src, label, weighted=True, prior=notes)
        notes.append(note)
        out.append(
            make_estimate(
                estimator=estimator.name,
                value=value,
                std_error=se,
                n=n,
                ess=float(ess_s if summary is None else summary.ess),
                notes=tuple(notes),
                policy=label,
                source=src,
            )
        )
    return out


def _weighted_pass(
    estimators: Sequence[WeightingEstimator],
    reward: np.ndarray,
    logging_propensity: np.ndarray,
    target: np.ndarray | Sequence[np.ndarray],
    sampling_weight: np.ndarray,
    *,
    labels: Sequence[str | None],
    reward_range: tuple[float, float] | None,
    weight_name: str,
    rewards_checked: bool,
    chunk_size: int,
    logging: bool = False,
) -> list[list[Estimate]]:
    """The weighted estimates of ``estimators`` (one clip level at most) from one kernel pass.

    ``reward``, ``logging_propensity`` and ``target`` ((n, P) or P columns) are shaped but not
    yet value-checked (the pass's checks are, as for unweighted rows); ``sampling_weight`` is
    checked after the pass, from the range it saw. Each estimate is backed by the rows
    (bootstrap, paired comparisons)."""
    levels = {e.clip_level for e in estimators if e.clip_level is not None}
    assert len(levels) <= 1
    mw = levels.pop() if levels else None
    s = sampling_weight
    # only the weighted statistics are read (and the pass's checks): plain=False
    cm, wm = weighted_moments(
        reward, logging_propensity, target, s, max_weight=mw, chunk_size=chunk_size, plain=False
    )
    assert cm.checks is not None
    if not (
        wm.s_min > 0.0 and MIN_SAMPLING_WEIGHT <= wm.s_max <= MAX_FINITE_WEIGHT and cm.checks.finite
    ):
        check_sampling_weight(s, s.shape[0], name=weight_name)  # raises on a bad weight
    check_after_pass(
        cm.checks,
        reward,
        None if logging else logging_propensity,
        target,
        reward_range,
        rewards_checked=rewards_checked,
    )
    return weighted_estimates(
        estimators,
        wm,
        reward=reward,
        logging_propensity=logging_propensity,
        target=target,
        sampling_weight=s,
        labels=labels,
        reward_range=reward_range,
        weight_name=weight_name,
    )


def weighted_estimates(
    estimators: Sequence[WeightingEstimator],
    moments: WeightedMoments,
    *,
    reward: np.ndarray,
    logging_propensity: np.ndarray,
    target: np.ndarray | Sequence[np.ndarray],
    sampling_weight: np.ndarray,
    labels: Sequence[str | None],
    reward_range: tuple[float, float] | None,
    weight_name: str = "sampling_weight",
) -> list[list[Estimate]]:
    """Per estimator, the weighted estimates of every policy from the kernel's statistics
    ``moments`` of these (already checked) rows, each backed by the rows for its bootstrap:
    the step after the pass of :func:`estimate_weighted_many` and of a grouped pass (one call
    per group, with the group's rows)."""
    wm, s = moments, sampling_weight
    cols = target if isinstance(target, (list, tuple)) else None
    out = []
    for est in estimators:  # loop over estimators
        clip = est.clip_level is not None
        rows_of_logging = not est.uses_weights  # the logging value: the rewards alone

        def source(
            j: int, est: WeightingEstimator = est, clip: bool = clip, alone: bool = rows_of_logging
        ) -> Source:
            column = None
            if not alone:
                column = cols[j] if cols is not None else target[:, j]  # type: ignore[call-overload]
            return EstimatorRows(
                est,
                reward,
                None if alone else logging_propensity,
                column,
                None,
                None,
                reward_range,
                sampling_weight=s,
                weight_name=weight_name,
                clipped_rows=int(wm.n_clipped[j]) if clip else 0,
            )

        out.append(
            weighted_estimates_from_moments(
                est,
                wm,
                names=(None,) if rows_of_logging else labels,
                source=source,
                reward_range=reward_range,
                weight_name=weight_name,
            )
        )
    return out


#: How far beyond the rewards' largest magnitude the origin ``r_lo`` must lie for an
#: overflow of ``w (r - r_lo)`` to be put down to the range rather than to the rewards.
_FAR_ORIGIN: Final = 1e3


def _reward_peak(moments: Any) -> float:
    """The rewards' largest magnitude as the moment kernel's pass saw it (NaN when unknown)."""
    checks = getattr(moments, "checks", None)
    if checks is None:
        return math.nan
    return max(abs(float(checks.r_min)), abs(float(checks.r_max)))


def _unrepresentable(
    estimator: WeightingEstimator,
    label: str | None,
    value: float,
    se: float,
    source: Source,
    origin: float = 0.0,
    peak: float = math.nan,
) -> str:
    """The message of an estimate whose value or standard error float64 cannot hold; with an
    ``origin`` (clipped IPS's ``r_lo``, the lower end of ``reward_range``) far from the rewards,
    it is that range that overflows ``w (r - r_lo)``."""
    name = estimator.name + (f" (policy {label!r})" if label else "")
    if not math.isfinite(peak) and isinstance(source, EstimatorRows) and source.reward.size:
        peak = float(np.max(np.abs(source.reward)))  # statistics without the pass's checks
    if origin != 0.0 and math.isfinite(peak) and abs(origin) > _FAR_ORIGIN * peak:
        return (
            f"{name}: the estimate is not representable in float64 (value {value:.3g}, standard "
            f"error {se:.3g}): it weighs r - r_lo with r_lo = {origin:.3g}, the lower end of "
            f"reward_range, far beyond the rewards (|value| up to {peak:.3g}). Give a "
            "reward_range around the rewards, or rescale the rewards and the range (divide both "
            "by a power of ten) and multiply the estimate back."
        )
    where = ""
    if isinstance(source, EstimatorRows):
        r = source.reward.astype(np.float64, copy=False)
        with np.errstate(over="ignore", invalid="ignore"):
            w = source.raw_weights() if source.target_propensity is not None else np.ones(r.size)
            size = np.abs(w * r)
        i = int(np.argmax(np.where(np.isnan(size), np.inf, size)))
        where = (
            f" The largest |weight x reward| is at row {i} (weight {float(w[i]):.3g}, "
            f"reward {float(r[i]):.3g})."
        )
    return (
        f"{name}: the estimate is not representable in float64 (value {value:.3g}, standard "
        f"error {se:.3g}): importance-weighted rewards exceed 1.8e308.{where} Rescale the "
        "`reward` column (divide it by a power of ten) and multiply the estimate back."
    )


# ============================================================================================
# shared docstring pieces
# ============================================================================================
_DOC_IPS_ARGS: Final = """reward : array_like, shape (n,)
            Observed rewards.
        logging_propensity : array_like, shape (n,)
            Logging policy's probability of each logged action, in (0, 1].
        target_propensity : array_like, shape (n,)
            Candidate's probability of the logged action, in [0, 1].
        reward_range : (float, float), optional
            A priori range of every reward (e.g. (0, 1) for clicks), needed by the bounded
            interval methods; rewards outside it are an error.
        sampling_weight : array_like, shape (n,), optional
            Sampling (Horvitz-Thompson) weight ``s_i > 0`` of each row, 1 / the probability
            that the row was kept (DSJSON: 1 / (1 - pdrop)). The estimate is then the Hajek
            ratio of the population value (see the module notes); normal, t and bootstrap
            intervals take the weights, the bounded methods refuse."""

_DOC_DR_ARGS: Final = (
    _DOC_IPS_ARGS
    + """
        q_logged : array_like, shape (n,)
            Reward model's prediction for the logged action, q(x_i, a_i).
        q_target : array_like, shape (n,)
            Reward model's value of the candidate, q(x_i, pi) = sum_a pi(a|x_i) q(x_i, a)."""
)

_DOC_RETURNS: Final = """
        Returns
        -------
        Estimate
            Value, standard error, n, Kish ESS, notes; ``ci(...)`` for intervals.

        Raises
        ------
        ope.ValidationError
            Shapes differ; a value is NaN/inf; a propensity or reward is out of range; a
            required reward-model array is missing.
        ope.EstimationError
            The value is undefined (e.g. all importance weights are zero).
"""


# ============================================================================================
# the estimators
# ============================================================================================
class _ImportanceWeighting(WeightingEstimator):
    """IPS, clipped IPS and SNIPS: estimates from rewards and the two propensities alone.

    The per-row component (for the bootstrap and paired comparisons) is ``w r`` unless a
    subclass says otherwise.
    """

    def _components(self, r, w, q_logged, q_target):
        return (w * r[:, None])[:, None, :]

    @fill_doc({"args": _DOC_IPS_ARGS, "returns": _DOC_RETURNS})
    def estimate(
        self,
        reward: npt.ArrayLike,
        logging_propensity: npt.ArrayLike,
        target_propensity: npt.ArrayLike,
        *,
        reward_range: Sequence[float] | None = None,
        sampling_weight: npt.ArrayLike | None = None,
    ) -> Estimate:
        """Estimate the candidate's value from logged rows.

        Parameters
        ----------
        <args>
        <returns>"""
        return self._estimate_one(
            reward=reward,
            logging_propensity=logging_propensity,
            target_propensity=target_propensity,
            q_logged=None,
            q_target=None,
            reward_range=reward_range,
            sampling_weight=sampling_weight,
        )


@dataclass(frozen=True)
class IPS(_ImportanceWeighting):
    """Inverse propensity scoring (importance sampling), unbiased under overlap.

    Notes
    -----
    .. math:: \\hat V_{IPS}=\\frac1n\\sum_i w_i r_i,\\qquad w_i=\\pi(a_i|x_i)/\\pi_0(a_i|x_i),

    with :math:`\\widehat{\\mathrm{se}}=\\mathrm{sd}(w_ir_i)/\\sqrt n`. It is unbiased when
    :math:`\\pi_0>0` wherever :math:`\\pi>0`; its variance grows with :math:`\\mathbb E w^2`.
    It is equivariant to scaling the rewards, not to shifting them (a shift :math:`c` adds
    :math:`c\\,\\bar w`). Bounded intervals (hoeffding, bernstein, empirical_likelihood) need an
    a priori weight bound: ``res.ci(method="bernstein", weight_bound=M)``.

    References
    ----------
    .. [1] D. G. Horvitz and D. J. Thompson, "A generalization of sampling without replacement
       from a finite universe", JASA 47(260), 1952.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.estimators import IPS
    >>> res = IPS().estimate(reward=np.array([1.0, 0.0, 1.0, 1.0]),
    ...                      logging_propensity=np.array([0.5, 0.5, 0.25, 0.5]),
    ...                      target_propensity=np.array([1.0, 1.0, 0.25, 0.0]))
    >>> res.value   # (2*1 + 2*0 + 1*1 + 0*1) / 4
    0.75
    """

    name: ClassVar[str] = "ips"
    #: The statistic of the weighted moments (:meth:`ope.moments.WeightedMoments.estimate`)
    #: this estimator is (kept by subclasses that only rename it).
    moment_kind: ClassVar[str] = "ips"
    interval_methods: ClassVar[tuple[str, ...]] = (
        "hoeffding",
        "bernstein",
        "empirical_likelihood",
        "betting",
        "log_smoothing",
    )


@dataclass(frozen=True)
class ClippedIPS(_ImportanceWeighting):
    """IPS with weights capped at an a priori level ``max_weight`` (Bottou et al.'s clipping).

    Parameters
    ----------
    max_weight : float
        Clip level :math:`R > 0`; weights above it are replaced by :math:`R` (capped, not
        zeroed).

    Notes
    -----
    .. math:: \\hat V_R=r_{lo}+\\frac1n\\sum_i \\min(w_i,R)\\,(r_i-r_{lo}),

    with :math:`r_{lo}` the lower end of ``reward_range`` when it is given and :math:`0`
    otherwise (the result's note says which). The one definition of clipping in ope: the
    value, its standard error :math:`\\mathrm{sd}(\\min(w_i,R)(r_i-r_{lo}))/\\sqrt n`, every
    interval, the streamed statistics (:class:`ope.streaming.MomentStats`), Bottou's interval
    and the safety gate all clip on this shifted scale, so the clipped value
    :math:`r_{lo}+\\mathbb E[\\min(w,R)(r-r_{lo})]` lies in ``reward_range`` (it is a mixture
    of the policy value and :math:`r_{lo}`, as :math:`\\mathbb E\\min(w,R)\\le1`). The
    clipped value does; its estimate need not (a sample mean of weights may exceed 1 at small
    n).

    Capping rather than zeroing (Bottou et al. may zero weights above :math:`R`) keeps the
    reward information of the clipped rows and so has the smaller bias of the two; both
    under-estimate by :math:`\\mathbb E[(w-\\min(w,R))(r-r_{lo})]\\ge 0`, which is what Bottou's
    inner interval (``ci(method="bottou")``) bounds.

    What the intervals cover: when the clip binds (some weight exceeds :math:`R`),
    ``Estimate.target`` is ``"clipped value"``: ``normal``, ``t``, ``bootstrap``, ``hoeffding``
    and ``bernstein`` cover the clipped value, not the policy's value, and only ``bottou``
    covers the policy's value. Because the weight bound is :math:`R` by construction,
    ``hoeffding`` and ``bernstein`` need only ``reward_range``.

    References
    ----------
    .. [1] L. Bottou et al., "Counterfactual reasoning and learning systems: the example of
       computational advertising", JMLR 14:3207-3260, 2013.
    .. [2] E. L. Ionides, "Truncated importance sampling", J. Comput. Graph. Statist. 17(2),
       2008.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.estimators import ClippedIPS
    >>> res = ClippedIPS(max_weight=2.0).estimate(
    ...     reward=np.array([1.0, 1.0, 0.0]), logging_propensity=np.array([0.25, 0.5, 0.1]),
    ...     target_propensity=np.array([1.0, 0.5, 1.0]))
    >>> res.value   # (min(4, 2)*1 + 1*1 + min(10, 2)*0) / 3
    1.0
    >>> res.target  # the clip binds on two rows
    'clipped value'
    >>> r = np.array([11.0, 11.0, 10.0])  # the same on rewards in [10, 11]: shifted by 10
    >>> ClippedIPS(max_weight=2.0).estimate(
    ...     reward=r, logging_propensity=np.array([0.25, 0.5, 0.1]),
    ...     target_propensity=np.array([1.0, 0.5, 1.0]), reward_range=(10, 11)).value
    11.0
    """

    max_weight: float

    name: ClassVar[str] = "clipped_ips"
    #: The statistic of the weighted moments (:meth:`ope.moments.WeightedMoments.estimate`)
    #: this estimator is (kept by subclasses that only rename it).
    moment_kind: ClassVar[str] = "clipped_ips"
    interval_methods: ClassVar[tuple[str, ...]] = ("hoeffding", "bernstein", "bottou")

    def __post_init__(self) -> None:
        if self.max_weight is None:
            raise ParameterError(
                "ClippedIPS needs `max_weight`, the clip level (a positive finite number), e.g. "
                "ClippedIPS(max_weight=10.0)."
            )
        try:
            check_max_weight(self.max_weight)
        except ParameterError as exc:
            raise ParameterError(f"ClippedIPS: {exc}") from None

    @property
    def clip_level(self) -> float:
        """The clip level ``max_weight``."""
        return float(self.max_weight)

    def reward_origin(self, reward_range: tuple[float, float] | None) -> float:
        """The lower end of ``reward_range`` (0 when none is given)."""
        rr = check_reward_range(reward_range)
        return 0.0 if rr is None else rr[0]

    def _transform(self, w: np.ndarray) -> np.ndarray:
        return np.minimum(w, self.max_weight)


@dataclass(frozen=True)
class SNIPS(_ImportanceWeighting):
    """Self-normalized IPS (the Hajek estimator).

    Notes
    -----
    .. math:: \\hat V_{SN}=\\frac{\\sum_i w_i r_i}{\\sum_i w_i}.

    It lies in :math:`[\\min r,\\max r]`, is invariant to shifting and equivariant to scaling
    the rewards, and is biased at :math:`O(1/n)`. The standard error is the delta-method one:
    the influence term of row :math:`i` is
    :math:`\\psi_i = w_i(r_i-\\hat V_{SN})/\\bar w` with :math:`\\bar w=\\frac1n\\sum w_i`, so

    .. math:: \\widehat{\\mathrm{se}} = \\frac{\\mathrm{sd}(\\psi)}{\\sqrt n}
              = \\sqrt{\\frac{n}{n-1}}\\;\\frac{\\sqrt{\\sum_i w_i^2 (r_i-\\hat V_{SN})^2}}
                                             {\\sum_i w_i}.

    The bootstrap renormalizes inside each resample (numerator and denominator resampled
    together).

    References
    ----------
    .. [1] J. Hajek, "Comment on 'An essay on the logical foundations of survey sampling' by
       D. Basu", in *Foundations of Statistical Inference*, 1971.
    .. [2] A. Swaminathan and T. Joachims, "The self-normalized estimator for counterfactual
       learning", NeurIPS 2015.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.estimators import SNIPS
    >>> res = SNIPS().estimate(reward=np.array([1.0, 0.0, 1.0, 1.0]),
    ...                        logging_propensity=np.array([0.5, 0.5, 0.25, 0.5]),
    ...                        target_propensity=np.array([1.0, 1.0, 0.25, 0.0]))
    >>> res.value   # (2 + 0 + 1 + 0) / (2 + 2 + 1 + 0)
    0.6
    """

    name: ClassVar[str] = "snips"
    #: The statistic of the weighted moments (:meth:`ope.moments.WeightedMoments.estimate`)
    #: this estimator is (kept by subclasses that only rename it).
    moment_kind: ClassVar[str] = "snips"
    n_components: ClassVar[int] = 2
    interval_methods: ClassVar[tuple[str, ...]] = ("empirical_likelihood", "betting")

    def _components(self, r, w, q_logged, q_target):
        return np.stack([w * r[:, None], w], axis=1)

    def _statistic(self, m: np.ndarray) -> np.ndarray:
        return m[..., 0] / m[..., 1]

    def _gradient(self, m: np.ndarray) -> np.ndarray:
        return np.array([1.0 / m[1], -m[0] / m[1] ** 2])

    def row_source(self, reward_range: Sequence[float] | None = None) -> WeightingRows:
        """The columns ``w r`` and ``w`` and their ratio of means, renormalized inside each
        resample (undefined when a resample's weights are all zero); ``reward_range`` is
        checked and unused (the ratio is shift-equivariant)."""
        check_reward_range(reward_range)
        columns = (RowColumn("weighted_reward"), RowColumn("weight"))
        return WeightingRows(
            self.name,
            columns,
            self._statistic,
            undefined_without_weight=True,
            methods=("bootstrap", *self.interval_methods),
        )

    def paired_logging_sd(self, mom: CenteredMoments, j: int, origin: float = 0.0) -> float:
        """The paired deviation of the delta-method influence terms of the ratio minus the
        reward's (``origin`` is checked and unused: the ratio is shift-equivariant)."""
        j, _ = _moment_arguments(mom, j, origin)
        return mom.paired_sd(j, kind="ratio", clipped=False)

    def moment_statistic(
        self, mom: CenteredMoments, j: int, origin: float = 0.0
    ) -> tuple[float, float]:
        """The ratio ``sum w r / sum w`` and the deviation of its delta-method influence terms."""
        j, _ = _moment_arguments(mom, j, origin)
        return mom.ratio_mean_sd(j, clipped=False)


@dataclass(frozen=True)
class DM(Estimator):
    """Direct method: the mean of a reward model's value of the candidate.

    Notes
    -----
    .. math:: \\hat V_{DM}=\\frac1n\\sum_i \\hat q(x_i,\\pi),\\qquad
              \\hat q(x,\\pi)=\\sum_a\\pi(a|x)\\,\\hat q(x,a).

    Its standard error :math:`\\mathrm{sd}(\\hat q(x_i,\\pi))/\\sqrt n` treats the model as fixed:
    it does not include the model's own error or bias, which DM cannot see. So DM gives no
    confidence interval: ``ci_low``/``ci_high`` are NaN, ``ci(method=...)`` gives
    ``(nan, nan)`` for normal, t and bootstrap, and the note says why (a model-conditional
    interval covered the value in 0 of 300 replications on a nonlinear truth with a ridge
    model). Use DR or SNDR for an interval. ``ess`` is ``n`` (every row counts equally).
    ``reward`` is used to define (and validate) the rows, so a DM estimate can be compared with
    others on the same rows (the paired difference then has no interval either).

    References
    ----------
    .. [1] A. Beygelzimer and J. Langford, "The offset tree for learning with partial labels",
       KDD 2009 (the direct method as a baseline).

    Examples
    --------
    >>> import numpy as np
    >>> from ope.estimators import DM
    >>> res = DM().estimate(reward=np.array([1.0, 0.0, 1.0]), q_target=np.array([0.5, 0.2, 0.8]))
    >>> res.value, res.ci_low
    (0.5, nan)
    """

    name: ClassVar[str] = "dm"
    uses_weights: ClassVar[bool] = False
    needs: ClassVar[tuple[str, ...]] = ("q_target",)
    zero_weights_fatal: ClassVar[bool] = False

    def _components(self, r, w, q_logged, q_target):
        return q_target[:, None, :]

    def estimate(
        self,
        reward: npt.ArrayLike,
        *,
        q_target: npt.ArrayLike | None = None,
        reward_range: Sequence[float] | None = None,
        sampling_weight: npt.ArrayLike | None = None,
    ) -> Estimate:
        """Estimate the candidate's value from a reward model.

        Parameters
        ----------
        reward : array_like, shape (n,)
            Observed rewards (they define the rows; DM does not average them).
        q_target : array_like, shape (n,)
            Reward model's value of the candidate, q(x_i, pi) = sum_a pi(a|x_i) q(x_i, a).
        reward_range : (float, float), optional
            A priori reward range (validated against ``reward``).
        sampling_weight : array_like, shape (n,), optional
            Sampling (Horvitz-Thompson) weight of each row: the value is then
            ``sum s q(x, pi) / sum s``.

        Returns
        -------
        Estimate
        """
        return self._estimate_one(
            reward=reward,
            logging_propensity=None,
            target_propensity=None,
            q_logged=None,
            q_target=q_target,
            reward_range=reward_range,
            sampling_weight=sampling_weight,
        )


class _DRFamily(Estimator):
    """DR-type estimators: q(x, pi) + w' (r - q(x, a)) with a transformed weight w'."""

    needs: ClassVar[tuple[str, ...]] = ("q_logged", "q_target")
    zero_weights_fatal: ClassVar[bool] = False

    def _components(self, r, w, q_logged, q_target):
        return (q_target + w * (r - q_logged)[:, None])[:, None, :]

    @fill_doc({"args": _DOC_DR_ARGS, "returns": _DOC_RETURNS})
    def estimate(
        self,
        reward: npt.ArrayLike,
        logging_propensity: npt.ArrayLike,
        target_propensity: npt.ArrayLike,
        *,
        q_logged: npt.ArrayLike | None = None,
        q_target: npt.ArrayLike | None = None,
        reward_range: Sequence[float] | None = None,
        sampling_weight: npt.ArrayLike | None = None,
    ) -> Estimate:
        """Estimate the candidate's value from logged rows.

        Parameters
        ----------
        <args>
        <returns>"""
        return self._estimate_one(
            reward=reward,
            logging_propensity=logging_propensity,
            target_propensity=target_propensity,
            q_logged=q_logged,
            q_target=q_target,
            reward_range=reward_range,
            sampling_weight=sampling_weight,
        )


@dataclass(frozen=True)
class DR(_DRFamily):
    """Doubly robust estimator: reward model plus importance-weighted residual.

    Notes
    -----
    .. math:: \\hat V_{DR}=\\frac1n\\sum_i\\Big[\\hat q(x_i,\\pi)
              + w_i\\big(r_i-\\hat q(x_i,a_i)\\big)\\Big],

    unbiased when the propensities are correct (whatever the model), with
    :math:`\\widehat{\\mathrm{se}}=\\mathrm{sd}(\\text{bracket})/\\sqrt n`. Fit the model on other
    rows (cross-fitting) so the residuals are honest. Equivariant to affine maps of the reward
    when the model predictions are mapped the same way.

    References
    ----------
    .. [1] M. Dudik, J. Langford and L. Li, "Doubly robust policy evaluation and learning",
       ICML 2011.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.estimators import DR
    >>> res = DR().estimate(reward=np.array([1.0, 0.0]), logging_propensity=np.array([0.5, 0.5]),
    ...                     target_propensity=np.array([1.0, 0.0]),
    ...                     q_logged=np.array([0.5, 0.5]), q_target=np.array([0.6, 0.4]))
    >>> round(res.value, 12)   # ((0.6 + 2*(1-0.5)) + (0.4 + 0)) / 2
    1.0
    """

    name: ClassVar[str] = "dr"


@dataclass(frozen=True)
class SwitchDR(_DRFamily):
    """Switch doubly robust: DR where the weight is small, the reward model where it is large.

    Parameters
    ----------
    tau : float
        Switching threshold :math:`\\tau > 0` on the importance weight. There is no default: the
        paper picks :math:`\\tau` by minimizing an estimated MSE bound, which needs the
        candidate's full action distribution; choose it with that procedure or by validation.

    Notes
    -----
    .. math:: \\hat V_{SW}=\\frac1n\\sum_i\\Big[\\hat q(x_i,\\pi)
              + w_i\\,\\mathbb 1\\{w_i\\le\\tau\\}\\big(r_i-\\hat q(x_i,a_i)\\big)\\Big],

    which equals applying DR to the actions with :math:`\\pi/\\pi_0\\le\\tau` and DM to the others.
    ``ess`` is computed from the switched weights :math:`w_i\\mathbb 1\\{w_i\\le\\tau\\}`.

    References
    ----------
    .. [1] Y.-X. Wang, A. Agarwal and M. Dudik, "Optimal and adaptive off-policy evaluation in
       contextual bandits", ICML 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.estimators import SwitchDR
    >>> res = SwitchDR(tau=3.0).estimate(
    ...     reward=np.array([1.0, 1.0]), logging_propensity=np.array([0.5, 0.1]),
    ...     target_propensity=np.array([1.0, 1.0]), q_logged=np.array([0.5, 0.5]),
    ...     q_target=np.array([0.5, 0.5]))
    >>> round(res.value, 12)   # ((0.5 + 2*0.5) + (0.5 + 0)) / 2: w=10 > tau is switched off
    1.0
    """

    tau: float

    name: ClassVar[str] = "switch_dr"

    def __post_init__(self) -> None:
        _positive_setting(self.tau, "tau", "SwitchDR")

    def _transform(self, w: np.ndarray) -> np.ndarray:
        return np.where(w <= self.tau, w, 0.0)


@dataclass(frozen=True)
class DRos(_DRFamily):
    """Doubly robust with optimistic shrinkage of the weights.

    Parameters
    ----------
    shrinkage : float
        :math:`\\lambda > 0`; small values shrink towards DM, large ones recover DR. There is no
        default: the paper tunes :math:`\\lambda` by minimizing an MSE bound.

    Notes
    -----
    .. math:: \\hat w_i=\\frac{\\lambda w_i}{w_i^2+\\lambda},\\qquad
              \\hat V_{DRos}=\\frac1n\\sum_i\\Big[\\hat q(x_i,\\pi)+\\hat w_i\\big(r_i-
              \\hat q(x_i,a_i)\\big)\\Big].

    :math:`\\hat w\\le\\min(w,\\sqrt\\lambda/2)`; :math:`\\lambda\\to0` gives DM and
    :math:`\\lambda\\to\\infty` gives DR. ``ess`` uses the shrunk weights.

    References
    ----------
    .. [1] Y. Su, M. Dimakopoulou, A. Krishnamurthy and M. Dudik, "Doubly robust off-policy
       evaluation with shrinkage", ICML 2020.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.estimators import DRos
    >>> res = DRos(shrinkage=4.0).estimate(
    ...     reward=np.array([1.0, 0.0]), logging_propensity=np.array([0.5, 0.5]),
    ...     target_propensity=np.array([1.0, 0.0]), q_logged=np.array([0.0, 0.0]),
    ...     q_target=np.array([0.0, 0.0]))
    >>> round(res.value, 12)   # w=2 -> 4*2/(4+4) = 1; (1*1 + 0) / 2
    0.5
    """

    shrinkage: float

    name: ClassVar[str] = "dros"

    def __post_init__(self) -> None:
        _positive_setting(self.shrinkage, "shrinkage", "DRos")

    def _transform(self, w: np.ndarray) -> np.ndarray:
        return self.shrinkage * w / (w * w + self.shrinkage)


@dataclass(frozen=True)
class SNDR(_DRFamily):
    """Self-normalized doubly robust estimator.

    Notes
    -----
    .. math:: \\hat V_{SNDR}=\\frac1n\\sum_i\\hat q(x_i,\\pi)
              +\\frac{\\sum_i w_i\\big(r_i-\\hat q(x_i,a_i)\\big)}{\\sum_i w_i}.

    Delta-method influence term with :math:`\\bar w=\\frac1n\\sum w_i`,
    :math:`\\hat\\theta=\\sum w_i(r_i-\\hat q_i)/\\sum w_i`:
    :math:`\\psi_i=(\\hat q(x_i,\\pi)-\\overline{\\hat q(\\cdot,\\pi)})
    +w_i(r_i-\\hat q(x_i,a_i)-\\hat\\theta)/\\bar w`, and
    :math:`\\widehat{\\mathrm{se}}=\\mathrm{sd}(\\psi)/\\sqrt n`. The bootstrap renormalizes
    inside each resample.

    References
    ----------
    .. [1] N. Kallus and M. Uehara, "Intrinsically efficient, stable, and bounded off-policy
       evaluation for reinforcement learning", NeurIPS 2019.
    .. [2] M. Dudik, J. Langford and L. Li, "Doubly robust policy evaluation and learning",
       ICML 2011.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.estimators import SNDR
    >>> res = SNDR().estimate(reward=np.array([1.0, 0.0]), logging_propensity=np.array([0.5, 0.5]),
    ...                       target_propensity=np.array([1.0, 0.0]),
    ...                       q_logged=np.array([0.5, 0.5]), q_target=np.array([0.6, 0.4]))
    >>> round(res.value, 12)   # 0.5 + (2*0.5 + 0) / (2 + 0)
    1.0
    """

    name: ClassVar[str] = "sndr"
    n_components: ClassVar[int] = 3
    zero_weights_fatal: ClassVar[bool] = True

    def _components(self, r, w, q_logged, q_target):
        return np.stack([q_target, w * (r - q_logged)[:, None], w], axis=1)

    def _statistic(self, m: np.ndarray) -> np.ndarray:
        return m[..., 0] + m[..., 1] / m[..., 2]

    def _gradient(self, m: np.ndarray) -> np.ndarray:
        return np.array([1.0, 1.0 / m[2], -m[1] / m[2] ** 2])


_MARGINAL_NOTE: Final = """The weights are marginal over an action embedding: ``logging_propensity`` is
    :math:`\\pi_0(e_i \\mid x_i)` and ``target_propensity`` :math:`\\pi(e_i \\mid x_i)`, the
    probabilities of the row's logged embedding :math:`e_i` (a cluster, a tuple of categorical item
    features, or an embedding drawn from a known :math:`p(e \\mid a)`), summed over each row's
    candidates by :func:`ope.marginal.marginal_propensities`; ``ope.evaluate(...,
    embedding=ope.ActionEmbedding(...))`` computes them from the logs. Unbiased when (i) the
    reward depends on the action only through its embedding (*no direct effect*:
    :math:`r \\perp a \\mid x, e`) and (ii) the logger gives positive probability to every
    embedding the candidate does (overlap of embeddings, weaker than overlap of items). With
    many items per embedding the weights, hence the variance, are far smaller than per-item
    weights; when (i) fails the estimate is biased by the direct effect the embedding drops
    (``ope.marginal.embedding_sufficiency`` tests for it). Its intervals are those of the
    per-item estimator on these weights, valid as they are when :math:`p(e \\mid a)` is known."""


@fill_doc({"marginal": _MARGINAL_NOTE})
@dataclass(frozen=True)
class MIPS(IPS):
    """Marginalized inverse propensity scoring (Saito & Joachims 2022): IPS on embedding weights.

    Notes
    -----
    .. math:: \\hat V_{MIPS}=\\frac1n\\sum_i \\frac{\\pi(e_i|x_i)}{\\pi_0(e_i|x_i)}\\,r_i.

    <marginal>

    References
    ----------
    .. [1] Y. Saito and T. Joachims, "Off-policy evaluation for large action spaces via
       embeddings", ICML 2022, arXiv:2202.06317.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.estimators import MIPS
    >>> res = MIPS().estimate(reward=np.array([1.0, 0.0, 1.0, 1.0]),
    ...                       logging_propensity=np.array([0.5, 0.5, 0.5, 1.0]),
    ...                       target_propensity=np.array([1.0, 0.5, 0.25, 1.0]))
    >>> res.value   # (2*1 + 1*0 + 0.5*1 + 1*1) / 4
    0.875
    """

    name: ClassVar[str] = "mips"
    marginal: ClassVar[bool] = True


@fill_doc({"marginal": _MARGINAL_NOTE})
@dataclass(frozen=True)
class SNMIPS(SNIPS):
    """Self-normalized MIPS: SNIPS on embedding weights.

    Notes
    -----
    .. math:: \\hat V_{SNMIPS}=\\frac{\\sum_i w^e_i r_i}{\\sum_i w^e_i},\\qquad
              w^e_i=\\frac{\\pi(e_i|x_i)}{\\pi_0(e_i|x_i)}.

    <marginal>

    References
    ----------
    .. [1] Y. Saito and T. Joachims, "Off-policy evaluation for large action spaces via
       embeddings", ICML 2022, arXiv:2202.06317.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.estimators import SNMIPS
    >>> res = SNMIPS().estimate(reward=np.array([1.0, 0.0, 1.0, 1.0]),
    ...                         logging_propensity=np.array([0.5, 0.5, 0.5, 1.0]),
    ...                         target_propensity=np.array([1.0, 0.5, 0.25, 1.0]))
    >>> res.value   # (2 + 0 + 0.5 + 1) / (2 + 1 + 0.5 + 1)
    0.7777777777777778
    """

    name: ClassVar[str] = "snmips"
    marginal: ClassVar[bool] = True


@fill_doc({"marginal": _MARGINAL_NOTE})
@dataclass(frozen=True)
class MarginalizedDR(DR):
    """Marginalized doubly robust estimator: DR with embedding weights.

    Notes
    -----
    .. math:: \\hat V_{MDR}=\\frac1n\\sum_i\\Big[\\hat q(x_i,\\pi)
              + \\frac{\\pi(e_i|x_i)}{\\pi_0(e_i|x_i)}\\big(r_i-\\hat q(x_i,a_i)\\big)\\Big].

    Unbiased when the marginal weights are correct and the *residual* :math:`r - \\hat q(x, a)`
    has no direct effect of the action beyond its embedding, a weaker condition than MIPS's: a
    reward model that captures the item-level effects within each embedding (OffCEM's "local
    correctness") removes the bias MIPS would have.

    <marginal>

    References
    ----------
    .. [1] T. Shimizu and L. Forastiere, "Doubly robust estimator for off-policy evaluation with
       large action spaces", IEEE SSCI 2023, arXiv:2308.03443.
    .. [2] Y. Saito, Q. Ren and T. Joachims, "Off-policy evaluation for large action spaces via
       conjunct effect modeling", ICML 2023, arXiv:2305.08062.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.estimators import MarginalizedDR
    >>> res = MarginalizedDR().estimate(reward=np.array([1.0, 0.0]),
    ...     logging_propensity=np.array([0.5, 1.0]), target_propensity=np.array([1.0, 0.5]),
    ...     q_logged=np.array([0.5, 0.5]), q_target=np.array([0.6, 0.4]))
    >>> round(res.value, 12)   # ((0.6 + 2*(1-0.5)) + (0.4 + 0.5*(0-0.5))) / 2
    0.875
    """

    name: ClassVar[str] = "mdr"
    marginal: ClassVar[bool] = True


@dataclass(frozen=True)
class OffCEM(MarginalizedDR):
    """OffCEM: cluster weights plus an item-level model's correction within clusters.

    Notes
    -----
    .. math:: \\hat V_{OffCEM}=\\frac1n\\sum_i\\Big[\\hat f(x_i,\\pi)
              + \\frac{\\pi(c_i|x_i)}{\\pi_0(c_i|x_i)}\\big(r_i-\\hat f(x_i,a_i)\\big)\\Big],

    with :math:`c_i` the logged item's cluster (or embedding) and :math:`\\hat f(x, a)` a model
    of the *item*. The arithmetic is the marginalized DR's; what differs is the model. OffCEM is
    unbiased when the weights are right and :math:`\\hat f` is *locally correct*: right about
    the reward differences between the items of one cluster, whatever its error on each
    cluster's level. The item effects MIPS ignores (a direct effect) are then corrected by the
    model term, while the weights stay those of clusters. In :func:`ope.evaluate` the model is
    :class:`ope.reward_models.TwoStepRewardModel` (OffCEM's two-step regression) when the
    embedding gives each item one cluster and ``reward_model`` is not set; any
    ``reward_model`` (an ope ``RewardModel``) is used as given.

    <marginal>

    References
    ----------
    .. [1] Y. Saito, Q. Ren and T. Joachims, "Off-policy evaluation for large action spaces via
       conjunct effect modeling", ICML 2023, arXiv:2305.08062.

    Examples
    --------
    On arrays (cluster propensities and a model's predictions) it is the marginalized DR's
    arithmetic; in :func:`ope.evaluate` the two differ by their models:

    >>> import numpy as np
    >>> from ope.estimators import MarginalizedDR, OffCEM
    >>> rows = dict(reward=np.array([1.0, 0.0, 1.0]), logging_propensity=np.full(3, 0.5),
    ...             target_propensity=np.array([1.0, 0.5, 0.25]),
    ...             q_logged=np.full(3, 0.5), q_target=np.array([0.6, 0.4, 0.7]))
    >>> OffCEM().estimate(**rows).value == MarginalizedDR().estimate(**rows).value
    True
    """

    name: ClassVar[str] = "offcem"


@dataclass(frozen=True)
class LoggingValue(WeightingEstimator):
    """The logging policy's on-policy value: the mean observed reward."""

    name: ClassVar[str] = "logging"
    uses_weights: ClassVar[bool] = False
    interval_methods: ClassVar[tuple[str, ...]] = (
        "hoeffding",
        "bernstein",
        "betting",
        "log_smoothing",
    )

    def _components(self, r, w, q_logged, q_target):
        return r[:, None, None]

    def moment_statistic(
        self, mom: CenteredMoments, j: int, origin: float = 0.0
    ) -> tuple[float, float]:
        """The mean reward and its standard deviation."""
        return mom.reward_mean_sd()


def logging_value(
    reward: npt.ArrayLike,
    *,
    reward_range: Sequence[float] | None = None,
    rewards_checked: bool = False,
    sampling_weight: npt.ArrayLike | None = None,
    weight_name: str = "sampling_weight",
) -> Estimate:
    """The logging policy's value: the mean logged reward, as an Estimate.

    Parameters
    ----------
    reward : array_like, shape (n,)
        Logged rewards.
    reward_range : (float, float), optional
        A priori reward range (for hoeffding, bernstein and betting intervals).
    rewards_checked : bool, default False
        The caller has already checked every reward against ``reward_range`` (``ope.evaluate``
        checks once for all its estimators); skip that scan.
    sampling_weight : array_like, shape (n,), optional
        Sampling weights of the rows: the value is then ``sum s r / sum s``.
    weight_name : str, default "sampling_weight"
        What messages and notes call the sampling weights (e.g. the log's column name).

    Returns
    -------
    Estimate
        ``estimator="logging"``; pass it to :func:`ope.results.compare` with a candidate's
        estimate on the same rows for a paired comparison.

    Notes
    -----
    :math:`\\hat V_0=\\bar r`, :math:`\\widehat{\\mathrm{se}}=\\mathrm{sd}(r)/\\sqrt n`.

    References
    ----------
    .. [1] L. Bottou et al., "Counterfactual reasoning and learning systems", JMLR 14, 2013.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.estimators import logging_value
    >>> logging_value(np.array([1.0, 0.0, 1.0, 0.0])).value
    0.5
    """
    est = LoggingValue()
    data = _validate(
        est,
        reward=reward,
        logging_propensity=None,
        target_propensity=None,
        q_logged=None,
        q_target=None,
        reward_range=reward_range,
        names=None,
        rewards_checked=rewards_checked,
        deferred=True,
        sampling_weight=sampling_weight,
        weight_name=weight_name,
    )
    return est._run(data, rewards_checked=rewards_checked)[0]


# ============================================================================================
# registry and the many-policy entry point
# ============================================================================================
ESTIMATORS: Final[dict[str, type[Estimator]]] = {
    "dm": DM,
    "ips": IPS,
    "clipped_ips": ClippedIPS,
    "snips": SNIPS,
    "dr": DR,
    "sndr": SNDR,
    "switch_dr": SwitchDR,
    "dros": DRos,
    "mips": MIPS,
    "snmips": SNMIPS,
    "mdr": MarginalizedDR,
    "offcem": OffCEM,
}


def estimator_settings(name: str) -> tuple[str, ...]:
    """The settings (dataclass fields) of the registered estimator ``name``, e.g.
    ``("max_weight",)`` for ``"clipped_ips"``: the one description of what a name needs.

    Examples
    --------
    >>> from ope.estimators import estimator_settings
    >>> estimator_settings("clipped_ips"), estimator_settings("ips")
    (('max_weight',), ())
    """
    cls: Any = ESTIMATORS[name]  # every registered estimator is a dataclass
    return tuple(f.name for f in dataclasses.fields(cls) if f.init)


def unknown_estimator(value: Any, argument: str) -> ParameterError:
    """The error for an estimator name that is not registered, naming the argument."""
    return ParameterError(
        f"`{argument}`: unknown estimator {value!r}; choose one of {', '.join(ESTIMATORS)}."
    )


def get_estimator(
    name: str,
    *,
    max_weight: float | None = None,
    tau: float | None = None,
    shrinkage: float | None = None,
) -> Estimator:
    """The estimator object for a registry name.

    Parameters
    ----------
    name : str
        One of ``dm, ips, clipped_ips, snips, dr, sndr, switch_dr, dros``.
    max_weight : float, optional
        Clip level, required by ``clipped_ips`` and accepted by no other.
    tau : float, optional
        Switching threshold, required by ``switch_dr`` and accepted by no other.
    shrinkage : float, optional
        Shrinkage :math:`\\lambda`, required by ``dros`` and accepted by no other.

    Returns
    -------
    estimator object

    Raises
    ------
    ope.ParameterError
        Unknown name (the message lists the registered ones), a missing required setting, a
        setting the estimator does not take, or an invalid setting.

    Notes
    -----
    A setting an estimator would ignore is an error rather than silently dropped (so a
    misspelled or misplaced ``max_weight`` is never lost).

    References
    ----------
    .. [1] Y. Saito et al., "Open Bandit Dataset and Pipeline", NeurIPS Datasets and Benchmarks,
       2021 (estimator names follow common usage there).

    Examples
    --------
    >>> from ope.estimators import get_estimator
    >>> get_estimator("clipped_ips", max_weight=10.0)
    ClippedIPS(max_weight=10.0)
    >>> get_estimator("snips")
    SNIPS()
    """
    key = str(name).lower()
    if key not in ESTIMATORS:
        raise unknown_estimator(name, "name")
    given = {
        k: v
        for k, v in (("max_weight", max_weight), ("tau", tau), ("shrinkage", shrinkage))
        if v is not None
    }
    takes = estimator_settings(key)
    extra = sorted(set(given) - set(takes))
    if extra:
        allowed = ", ".join(takes) if takes else "none"
        raise ParameterError(
            f"estimator {key!r} does not take {', '.join(extra)}; its settings: {allowed}."
        )
    missing = [k for k in takes if k not in given]
    if missing:
        raise ParameterError(
            f"estimator {key!r} needs {', '.join(missing)}=..., e.g. "
            f"get_estimator({key!r}, {missing[0]}=10.0)."
        )
    return ESTIMATORS[key](**given)


def _clip_level_groups(estimators: Sequence[WeightingEstimator]) -> list[list[int]]:
    """The positions of ``estimators`` grouped by the pass of the moment kernel that computes
    them: one group per distinct clip level, the unclipped ones riding on the first clipped
    pass (every pass accumulates the raw-weight statistics too).

    Examples
    --------
    >>> from ope.estimators import IPS, SNIPS, ClippedIPS, _clip_level_groups
    >>> _clip_level_groups([IPS(), ClippedIPS(max_weight=5.0), SNIPS()])
    [[1, 0, 2]]
    >>> _clip_level_groups([ClippedIPS(max_weight=5.0), ClippedIPS(max_weight=9.0)])
    [[0], [1]]
    """
    by_level: dict[float | None, list[int]] = {}
    for i, est in enumerate(estimators):  # loop over estimators
        by_level.setdefault(est.clip_level, []).append(i)
    clipped = [level for level in by_level if level is not None]
    if clipped and None in by_level:  # the unclipped ones ride on a clipped pass
        by_level[clipped[0]] += by_level.pop(None)
    return list(by_level.values())


def estimate_weighted_many(
    estimators: Sequence[Estimator | str],
    *,
    reward: npt.ArrayLike,
    logging_propensity: npt.ArrayLike,
    target_propensity: npt.ArrayLike | Sequence[np.ndarray],
    sampling_weight: npt.ArrayLike,
    weight_name: str = "sampling_weight",
    reward_range: Sequence[float] | None = None,
    names: Sequence[str] | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    rewards_checked: bool = False,
) -> list[list[Estimate]]:
    """Several weighting estimators of sampling-weighted rows from one pass of the kernel.

    The estimates equal ``estimate_many(est, ..., sampling_weight=...)`` of each estimator (the
    Horvitz-Thompson forms of the module notes), but IPS, SNIPS and clipped IPS share one read
    of the rows (one per distinct clip level).

    Parameters
    ----------
    estimators : sequence of estimator objects or str
        Weighting estimators: ``IPS``, ``SNIPS``, ``ClippedIPS`` (or their names; clipped IPS
        needs an object) and ``LoggingValue`` (whose one estimate, of the logging policy, is
        read off the same pass).
    reward, logging_propensity : array_like, shape (n,)
    target_propensity : array_like of shape (n, P), or a sequence of P arrays of shape (n,)
        The candidates' propensities; columns (e.g. zero-copy views of a log's columns) are
        read as they are, without forming an (n, P) matrix.
    sampling_weight : array_like, shape (n,)
        The rows' sampling weights (finite, > 0).
    weight_name : str, default "sampling_weight"
        What messages and notes call the sampling weights.
    reward_range, names, chunk_size, rewards_checked
        As for :func:`estimate_many`.

    Returns
    -------
    list of list of Estimate
        Per estimator, one Estimate per policy (one for the logging value), each backed by the
        rows (bootstrap).

    Raises
    ------
    ope.ParameterError
        An estimator that is not a weighting one.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.estimators import estimate_weighted_many
    >>> ips, snips = estimate_weighted_many(
    ...     ["ips", "snips"], reward=[1.0, 0.0, 1.0, 1.0], logging_propensity=[0.5, 0.5, 0.25, 0.5],
    ...     target_propensity=[[1.0], [1.0], [0.25], [0.0]], sampling_weight=[1.0, 2.0, 1.0, 4.0])
    >>> round(ips[0].value, 12), round(snips[0].value, 12)   # 3 / 8 and 3 / 7
    (0.375, 0.428571428571)
    """
    ests = [get_estimator(e) if isinstance(e, str) else e for e in estimators]
    bad = [e for e in ests if not isinstance(e, WeightingEstimator)]
    if bad:
        raise ParameterError(
            f"estimate_weighted_many takes weighting estimators (IPS, SNIPS, ClippedIPS, "
            f"LoggingValue); got {bad[0]!r}. Use estimate_many(..., sampling_weight=...) for the "
            "others."
        )
    weighting = [e for e in ests if isinstance(e, WeightingEstimator)]
    given = list(target_propensity) if isinstance(target_propensity, (list, tuple)) else []
    columns = len(given) > 0 and all(isinstance(c, np.ndarray) and c.ndim == 1 for c in given)
    data = _validate(
        next((e for e in weighting if e.uses_weights), IPS()),
        reward=reward,
        logging_propensity=logging_propensity,
        target_propensity=given[0] if columns else target_propensity,
        q_logged=None,
        q_target=None,
        reward_range=reward_range,
        names=None,
        rewards_checked=rewards_checked,
        deferred=True,
        sampling_weight=sampling_weight,
        weight_name=weight_name,
    )
    assert data.logging_propensity is not None and data.sampling_weight is not None
    target: np.ndarray | list[np.ndarray]
    if columns:
        target = [as_float_array(c, "target_propensity", ndim=(1,)) for c in given]
        if any(c.shape[0] != data.n for c in target):
            raise ValidationError(
                f"every target_propensity column must have as many rows as `reward` ({data.n})."
            )
    else:
        assert data.target_propensity is not None
        target = data.target_propensity
    n_pol = len(target) if isinstance(target, list) else target.shape[1]
    labels = policy_labels(names, n_pol)
    out: dict[int, list[Estimate]] = {}
    for idx in _clip_level_groups(weighting):  # one pass per clip level
        group = [weighting[i] for i in idx]
        for i, res in zip(
            idx,
            _weighted_pass(
                group,
                data.reward,
                data.logging_propensity,
                target,
                data.sampling_weight,
                labels=labels,
                reward_range=data.reward_range,
                weight_name=weight_name,
                rewards_checked=rewards_checked,
                chunk_size=chunk_size,
            ),
        ):
            out[i] = res
    return [out[i] for i in range(len(weighting))]


@overload
def estimate_many(
    estimator: Estimator | str,
    *,
    reward: npt.ArrayLike,
    logging_propensity: npt.ArrayLike | None = None,
    target_propensity: npt.ArrayLike | None = None,
    q_logged: npt.ArrayLike | None = None,
    q_target: npt.ArrayLike | None = None,
    reward_range: Sequence[float] | None = None,
    names: Sequence[str] | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    rewards_checked: bool = False,
    sampling_weight: npt.ArrayLike | None = None,
    weight_name: str = "sampling_weight",
) -> list[Estimate]: ...


@overload
def estimate_many(
    estimator: list[Estimator | str] | tuple[Estimator | str, ...],
    *,
    reward: npt.ArrayLike,
    logging_propensity: npt.ArrayLike | None = None,
    target_propensity: npt.ArrayLike | None = None,
    q_logged: npt.ArrayLike | None = None,
    q_target: npt.ArrayLike | None = None,
    reward_range: Sequence[float] | None = None,
    names: Sequence[str] | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    rewards_checked: bool = False,
    sampling_weight: npt.ArrayLike | None = None,
    weight_name: str = "sampling_weight",
) -> list[list[Estimate]]: ...


def estimate_many(
    estimator: Estimator | str | list[Estimator | str] | tuple[Estimator | str, ...],
    *,
    reward: npt.ArrayLike,
    logging_propensity: npt.ArrayLike | None = None,
    target_propensity: npt.ArrayLike | None = None,
    q_logged: npt.ArrayLike | None = None,
    q_target: npt.ArrayLike | None = None,
    reward_range: Sequence[float] | None = None,
    names: Sequence[str] | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    rewards_checked: bool = False,
    sampling_weight: npt.ArrayLike | None = None,
    weight_name: str = "sampling_weight",
) -> list[Estimate] | list[list[Estimate]]:
    """Estimate P candidate policies with one estimator, or with several sharing one pass.

    Parameters
    ----------
    estimator : estimator object, str, or a list or tuple of them
        E.g. ``IPS()`` or ``"snips"`` (names with settings need objects or
        :func:`get_estimator`). A list or tuple, e.g. ``["ips", "snips",
        ClippedIPS(max_weight=20.0)]``, estimates every one of them on the same rows: the
        weighting estimators (IPS, clipped IPS, SNIPS) from one pass of the moment kernel
        (see Notes), and the result is one list per estimator.
    reward : array_like, shape (n,)
        Observed rewards.
    logging_propensity : array_like, shape (n,)
        Logging propensities (weighting estimators).
    target_propensity : array_like, shape (n, P)
        Each candidate's probability of the logged action (weighting estimators).
    q_logged : array_like, shape (n,), optional
        Reward model at the logged action (DR family).
    q_target : array_like, shape (n, P), optional
        Reward model's value of each candidate (DM and DR family).
    reward_range : (float, float), optional
        A priori reward range.
    names : sequence of str, optional
        Policy names, stored as ``Estimate.policy``.
    chunk_size : int, default DEFAULT_CHUNK_SIZE
        Rows per chunk (memory is O(chunk_size * P)).
    rewards_checked : bool, default False
        The caller has already checked every reward against ``reward_range``; skip that scan.
    sampling_weight : array_like, shape (n,), optional
        Sampling (Horvitz-Thompson) weights of the rows (see the module notes).
    weight_name : str, default "sampling_weight"
        What messages and notes call the sampling weights (e.g. the log's column name).

    Returns
    -------
    list of Estimate, or list of list of Estimate
        For one estimator, one Estimate per policy, in column order. For a list or tuple of
        estimators, one such list per estimator, in the order given (``ips, snips =
        estimate_many(["ips", "snips"], ...)``); each Estimate equals the one-estimator call's.
        Arrays an estimator does not use are ignored.

    Raises
    ------
    ope.ParameterError
        An unknown estimator name, an object that is not an ope estimator, or an empty list.

    Notes
    -----
    The weighting estimators (IPS, clipped IPS, SNIPS) come from one pass of the moment
    kernel (:func:`ope.moments.centered_moments`), which accumulates the centred moments of
    the raw and the clipped weights at once: a list of them costs one read of the rows (one
    per distinct clip level of its clipped estimators), with sampling weights too
    (:func:`estimate_weighted_many`). The others (DM and the DR family, whose per-row terms
    need the reward model) make two chunked passes each: per chunk the components form one
    (chunk, k, P) block reduced column-wise, so no Python code runs per row or per
    policy-row; the first pass gives the column means of the components (hence the values),
    the second the sum of squared influence terms
    :math:`\\psi_i=\\nabla g\\cdot(A_i-\\bar A)`; this two-pass variance stays exact
    (e.g. exactly 0) where a one-pass sum-of-squares formula would cancel catastrophically.
    The second pass reads the components kept from the first when they fit in
    :data:`KEPT_COMPONENTS` entries (then each such estimator reads the rows once), and the
    input checks read the ranges the first pass saw (without sampling weights): in a list,
    each of DM and the DR family still reads the rows on its own.

    References
    ----------
    .. [1] T. F. Chan, G. H. Golub and R. J. LeVeque, "Algorithms for computing the sample
       variance: analysis and recommendations", The American Statistician 37(3), 1983.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.estimators import estimate_many
    >>> res = estimate_many("ips", reward=np.array([1.0, 0.0, 1.0]),
    ...                     logging_propensity=np.array([0.5, 0.5, 0.5]),
    ...                     target_propensity=np.array([[1.0, 0.5], [0.0, 0.5], [0.5, 0.5]]),
    ...                     names=["greedy", "logger"])
    >>> [(e.policy, e.value) for e in res]
    [('greedy', 1.0), ('logger', 0.6666666666666666)]

    Several estimators on the same rows, from one pass of the kernel:

    >>> ips, snips = estimate_many(["ips", "snips"], reward=np.array([1.0, 0.0, 1.0]),
    ...                            logging_propensity=np.array([0.5, 0.5, 0.5]),
    ...                            target_propensity=np.array([[1.0], [0.0], [0.5]]))
    >>> ips[0].value, snips[0].value
    (1.0, 1.0)
    """
    if isinstance(estimator, (list, tuple)):
        return _estimate_several(
            estimator,
            reward=reward,
            logging_propensity=logging_propensity,
            target_propensity=target_propensity,
            q_logged=q_logged,
            q_target=q_target,
            reward_range=reward_range,
            names=names,
            chunk_size=chunk_size,
            rewards_checked=rewards_checked,
            sampling_weight=sampling_weight,
            weight_name=weight_name,
        )
    est = _resolved_estimator(estimator, "estimator")
    data = _validate(
        est,
        reward=reward,
        logging_propensity=logging_propensity if est.uses_weights else None,
        target_propensity=target_propensity if est.uses_weights else None,
        q_logged=q_logged if "q_logged" in est.needs else None,
        q_target=q_target if "q_target" in est.needs else None,
        reward_range=reward_range,
        names=names,
        rewards_checked=rewards_checked,
        deferred=isinstance(est, WeightingEstimator) or sampling_weight is None,
        sampling_weight=sampling_weight,
        weight_name=weight_name,
    )
    return est._run(data, chunk_size=chunk_size, rewards_checked=rewards_checked)


def _resolved_estimator(estimator: Any, argument: str) -> Estimator:
    """The estimator object of one entry of :func:`estimate_many`'s ``estimator``."""
    if isinstance(estimator, str) and estimator.lower() not in ESTIMATORS:
        raise unknown_estimator(estimator, argument)
    est = get_estimator(estimator) if isinstance(estimator, str) else estimator
    if not isinstance(est, Estimator) or isinstance(est, LoggingValue):
        raise ParameterError(
            f"`{argument}` must be an ope estimator or one of {', '.join(ESTIMATORS)}; got "
            f"{describe(estimator)}."
        )
    return est


def _estimate_several(
    estimators: Sequence[Any],
    *,
    reward: npt.ArrayLike,
    logging_propensity: npt.ArrayLike | None,
    target_propensity: npt.ArrayLike | None,
    q_logged: npt.ArrayLike | None,
    q_target: npt.ArrayLike | None,
    reward_range: Sequence[float] | None,
    names: Sequence[str] | None,
    chunk_size: int,
    rewards_checked: bool,
    sampling_weight: npt.ArrayLike | None,
    weight_name: str,
) -> list[list[Estimate]]:
    """:func:`estimate_many` of a list of estimators: the weighting ones from one pass of the
    kernel per clip level (the unclipped ones ride on a clipped pass), the others from their
    own passes over inputs checked once per kind of input."""
    if not estimators:
        raise ParameterError(
            "`estimator` is an empty list; give one estimator or a list of them, e.g. "
            "estimator=['ips', 'snips']."
        )
    ests = [_resolved_estimator(e, f"estimator[{i}]") for i, e in enumerate(estimators)]
    out: dict[int, list[Estimate]] = {}
    arrays: dict[str, Any] = {
        "reward": reward,
        "logging_propensity": logging_propensity,
        "target_propensity": target_propensity,
        "reward_range": reward_range,
        "names": names,
        "rewards_checked": rewards_checked,
        "sampling_weight": sampling_weight,
        "weight_name": weight_name,
    }
    moment = [i for i, e in enumerate(ests) if isinstance(e, WeightingEstimator)]
    if moment and sampling_weight is not None:  # one weighted pass per clip level
        data = _validate(ests[moment[0]], q_logged=None, q_target=None, deferred=True, **arrays)
        assert data.logging_propensity is not None and data.target_propensity is not None
        assert data.sampling_weight is not None
        found = estimate_weighted_many(
            [ests[i] for i in moment],
            reward=data.reward,
            logging_propensity=data.logging_propensity,
            target_propensity=data.target_propensity,
            sampling_weight=data.sampling_weight,
            weight_name=weight_name,
            reward_range=data.reward_range,
            names=names,
            chunk_size=chunk_size,
            rewards_checked=rewards_checked,
        )
        out.update(zip(moment, found))
    elif moment:  # one pass of the kernel per clip level
        data = _validate(ests[moment[0]], q_logged=None, q_target=None, deferred=True, **arrays)
        weighting = [ests[i] for i in moment]
        for idx in _clip_level_groups(weighting):  # type: ignore[arg-type]
            found = _moment_pass(
                [weighting[i] for i in idx],  # type: ignore[misc]
                data,
                chunk_size=chunk_size,
                rewards_checked=rewards_checked,
            )
            out.update(zip([moment[i] for i in idx], found))
    checked: dict[tuple[bool, tuple[str, ...]], _Inputs] = {}
    for i, est in enumerate(ests):  # loop over estimators: DM and the DR family
        if i in out:
            continue
        key = (est.uses_weights, est.needs)
        if key not in checked:  # the value checks once per kind of input
            checked[key] = _validate(
                est,
                **{
                    **arrays,
                    "logging_propensity": logging_propensity if est.uses_weights else None,
                    "target_propensity": target_propensity if est.uses_weights else None,
                },
                q_logged=q_logged if "q_logged" in est.needs else None,
                q_target=q_target if "q_target" in est.needs else None,
                deferred=sampling_weight is None,  # then checked from what each pass saw
            )
        out[i] = est._run(checked[key], chunk_size=chunk_size, rewards_checked=rewards_checked)
    return [out[i] for i in range(len(ests))]
