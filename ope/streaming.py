"""Mergeable sufficient statistics: the same IPS / clipped IPS / SNIPS numbers eager, streamed
or distributed.

:class:`MomentStats` holds, for ``P`` candidate policies, the means and centred second moments
of the importance weights and of their products with the (shifted) reward, raw and clipped,
over a set of rows. Statistics of disjoint batches merge exactly by the pairwise update of Chan,
Golub & LeVeque (``max_w`` by maximum), so one kernel runs per Arrow record batch
(``ope.scan_logs``), per Dask partition, or over a whole array, and ``merge`` gives the
statistics of the union. No variance is formed from raw sums of squares, so the streamed
standard errors match the eager ones to about 1e-12 relative even for rewards of mean 1e6 and
standard deviation 1. :meth:`MomentStats.estimates` turns them into
:class:`ope.results.Estimate` objects whose value and standard error equal the eager
estimators' (to rounding) and whose ``ci`` supports ``normal``, ``t``, ``hoeffding``,
``bernstein`` and ``bottou`` (methods that need rows, such as bootstrap, refuse clearly).

Examples
--------
>>> import numpy as np
>>> from ope.streaming import MomentStats
>>> rng = np.random.default_rng(0)
>>> r = rng.binomial(1, 0.3, 1000).astype(float)
>>> p = np.full(1000, 0.5); t = rng.uniform(size=(1000, 2))
>>> parts = [MomentStats.from_arrays(r[i:i + 250], p[i:i + 250], t[i:i + 250])
...          for i in range(0, 1000, 250)]
>>> whole = MomentStats.merge_all(parts)
>>> whole.n
1000
>>> [round(e.value, 6) for e in whole.estimates("ips")] == [
...     round(float(np.mean(t[:, j] / p * r)), 6) for j in range(2)]
True
"""

from __future__ import annotations

import dataclasses

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from ope._centered import CenteredMoments
from ope._kernel import MOMENT_FIELDS, N_COMOMENTS, Moments
from ope._thresholds import MIN_ROWS
from ope._validation import (
    as_float_array,
    check_confidence_level,
    check_max_weight,
    check_reward_range,
    describe,
)
from ope.estimators import (
    ESTIMATORS,
    WEIGHTED_CI_METHODS,
    Estimator,
    EstimatorRows,
    LoggingValue,
    WeightingEstimator,
    check_after_pass,
    estimator_settings,
    estimates_from_moments,
    pair_arrays,
    interval_target,
    get_estimator,
    kernel_skew_notes,
    moment_interval,
    policy_labels,
    unknown_estimator,
    weighted_estimates_from_moments,
    weighted_refusal,
)
from ope.exceptions import EstimationError, ParameterError, ValidationError
from ope.intervals._types import BottouInterval, ConfidenceInterval
from ope.moments import (
    DEFAULT_CHUNK_SIZE,
    WeightedMoments,
    centered_moments,
    centered_outcome_moments,
    weighted_moments,
)
from ope.results import DEFAULT_CONFIDENCE_LEVEL, Estimate, IntervalRequest, Source
from ope.weights import check_sampling_weight

__all__ = ["MomentStats"]

_ROWS_HINT: Final = (
    "it was computed from merged summary statistics (ope.streaming.MomentStats), which keep "
    "no rows; use ope.estimators on arrays for bootstrap, empirical_likelihood, betting and "
    "paired comparisons"
)


class _MomentSource(Source):
    """Bounded intervals of one policy from the merged moments."""

    has_rows = False
    rows_hint = _ROWS_HINT

    def __init__(
        self,
        estimator: WeightingEstimator,
        moments: CenteredMoments,
        column: int,
        reward_range: tuple[float, float] | None,
    ) -> None:
        self.estimator = estimator
        self.moments = moments
        self.column = column
        self.reward_range = reward_range
        self.methods = tuple(
            m for m in estimator.interval_methods if m in ("hoeffding", "bernstein", "bottou")
        )
        self.value_range = reward_range

    def target_of(self, method: str) -> str:
        return interval_target(self.estimator, self.moments, self.column, method)

    def special_interval(self, request: IntervalRequest) -> ConfidenceInterval | BottouInterval:
        method, confidence_level, weight_bound, outer = request.fields()
        return moment_interval(
            self.estimator,
            method,
            self.moments,
            self.column,
            reward_range=self.reward_range,
            weight_bound=weight_bound,
            outer=outer,
            confidence_level=confidence_level,
        )


class _WeightedMomentSource(Source):
    """What an estimate of merged sampling-weighted statistics can give: normal and t
    intervals; the bounded methods refuse weighted rows (naming the weight column)."""

    has_rows = False
    rows_hint = _ROWS_HINT

    def __init__(
        self,
        estimator: WeightingEstimator,
        weight_name: str,
        clipped: bool,
        reward_range: tuple[float, float] | None,
    ) -> None:
        self.weight_name = weight_name
        self.clipped = clipped
        self.methods = tuple(m for m in estimator.interval_methods if m not in WEIGHTED_CI_METHODS)
        self.value_range = reward_range

    def target_of(self, method: str) -> str:
        return "clipped value" if self.clipped else "policy value"

    def special_interval(self, request: IntervalRequest) -> ConfidenceInterval | BottouInterval:
        raise EstimationError(_merged_weighted_refusal(request.method, self.weight_name))


def _merged_weighted_refusal(method: str, weight_name: str) -> str:
    """Why ``method`` refuses sampling-weighted rows (:func:`ope.estimators.weighted_refusal`),
    with the alternatives merged statistics have: the bootstrap it also names needs the rows."""
    return weighted_refusal(
        method,
        weight_name,
        advice="Statistics merged from batches (a scan, or evaluate_distributed) keep no rows: "
        "use ci='normal' or 't'. The bootstrap, which resamples with the sampling weights, "
        "needs the rows in memory: ope.evaluate(ope.read_logs(...), ci='bootstrap').",
    )


def _clip_of(estimators: Sequence[Any], max_weight: Any) -> float | None:
    """The clip level of the statistics of ``estimators``: that of their clipped estimator
    (None without one)."""
    if max_weight is not None:
        raise ParameterError(
            "pass the clip level either as max_weight=... or inside a clipped estimator of "
            "`estimators`, not both."
        )
    if isinstance(estimators, (str, bytes)) or not isinstance(estimators, Sequence):
        raise ParameterError(
            f"`estimators` must be a list of ope weighting estimators; got {describe(estimators)}."
        )
    levels: set[float] = set()
    for est in estimators:  # loop over estimators
        if not isinstance(est, WeightingEstimator):
            raise ParameterError(
                f"`estimators` must hold ope weighting estimators (IPS, ClippedIPS, SNIPS); got "
                f"{describe(est)}."
            )
        if est.clip_level is not None:
            levels.add(float(est.clip_level))
    if len(levels) > 1:
        raise ParameterError(
            f"`estimators` holds clipped estimators at {len(levels)} clip levels "
            f"({', '.join(f'{v:g}' for v in sorted(levels))}); one pass of statistics has one."
        )
    return levels.pop() if levels else None


def _pass_inputs(
    r: np.ndarray, logging_propensity: Any, target_propensity: Any, names: Any
) -> tuple[np.ndarray, Any, tuple[str, ...] | None]:
    """``(p, targets, labels)`` of a pass: the checked propensities, the targets as P columns
    (read where they are) or an (n, P) matrix, and the policy labels (None without names)."""
    given = list(target_propensity) if isinstance(target_propensity, (list, tuple)) else []
    columns = len(given) > 0 and all(isinstance(c, np.ndarray) and c.ndim == 1 for c in given)
    if columns:  # P columns (e.g. zero-copy views of Arrow columns), each (n,)
        cols = [as_float_array(c, "target_propensity", ndim=(1,)) for c in given]
        p = as_float_array(logging_propensity, "logging_propensity", ndim=(1,))
        if any(c.shape[0] != p.shape[0] for c in cols):
            raise ValidationError(
                "every target_propensity column must have as many rows as "
                f"`logging_propensity` ({p.shape[0]})."
            )
        t_arg: Any = cols
        n_pol = len(cols)
    else:
        p, t = pair_arrays(logging_propensity, target_propensity)
        t_arg = t if t.ndim == 2 else t[:, None]
        n_pol = t_arg.shape[1]
    if r.shape[0] != p.shape[0]:
        raise ValidationError(
            f"`reward` has {r.shape[0]} rows but `logging_propensity` has {p.shape[0]}."
        )
    return p, t_arg, _labels(names, n_pol)


#: What :meth:`MomentStats.from_columns` says when its arrays disagree.
_COLUMNS_FIX: Final = "Give the arrays of one MomentStats.to_columns(), unchanged."


def _check_head(n: int, clip: float, weighted: float, raw: Moments) -> None:
    """The head of :meth:`MomentStats.to_columns` agrees with the moments it came with: its
    row count with theirs, its clip level (NaN: none) with the rows they count as clipped
    (a row is clipped when its weight exceeds the level, so some are iff the largest weight
    does) and with the clipped weights' mean (at most the level), its flag of sampling weights
    0 or 1. Else a ParameterError."""
    counted = float(raw.n.sum())
    if n != counted:
        raise ParameterError(
            f"`columns['head']` gives n={n:,} rows but the moments summarize {counted:,.0f}. "
            f"{_COLUMNS_FIX}"
        )
    if weighted not in (0.0, 1.0):
        raise ParameterError(
            f"`columns['head']` flags sampling weights with {weighted!r}; 0 (none) or 1 "
            f"expected. {_COLUMNS_FIX}"
        )
    clipped = raw.n_clipped.sum(axis=0)
    if math.isnan(clip):
        if (clipped > 0).any():
            raise ParameterError(
                "`columns['head']` gives no clip level (NaN) but the moments count "
                f"{int(clipped.max()):,} clipped rows; they were accumulated with max_weight. "
                f"{_COLUMNS_FIX}"
            )
        return
    if not (math.isfinite(clip) and clip > 0):
        raise ParameterError(
            f"`columns['head']` gives the clip level max_weight={clip!r}; a positive finite "
            f"number (or NaN: none) expected. {_COLUMNS_FIX}"
        )
    above = raw.max_w.max(axis=0, initial=-math.inf) > clip
    clipped_mean = raw.mean[:, 1, 1, :] * np.exp2(raw.w_exp[:, 1, :])
    if ((clipped > 0) != above).any() or (clipped_mean > clip * (1.0 + 1e-12)).any():
        raise ParameterError(
            f"`columns['head']` gives the clip level max_weight={clip:g}, which the moments "
            f"disagree with: they count {int(clipped.sum()):,} clipped rows, and their largest "
            f"weight is {float(raw.max_w.max(initial=0.0)):g}. {_COLUMNS_FIX}"
        )


def _labels(names: Any, n_pol: int) -> tuple[str, ...] | None:
    """The policy names of ``n_pol`` columns (None without names): distinct, non-blank str,
    one per column (:func:`ope.estimators.policy_labels`)."""
    return None if names is None else tuple(map(str, policy_labels(names, n_pol)))


@dataclass(frozen=True, eq=False)
class MomentStats:
    r"""Per-policy weight statistics over a set of logged rows; merge by :meth:`merge`.

    Attributes
    ----------
    n : int
        Rows summarized.
    min_r, max_r : float
        Smallest and largest reward (to check an a priori ``reward_range``; never used as one).
    max_weight : float or None
        Clip level of the clipped-weight statistics (None: no clipping was accumulated).
    names : tuple of str or None
        Policy names, one per column.
    sum_r, sum_r2 : float
        Sum of rewards and of squared rewards (derived; see Notes).
    moments : dict of str to numpy.ndarray
        The raw sums of :data:`ope.weights.MOMENT_KEYS`, float64 arrays of shape (P,)
        (derived from the centred statistics, for inspection).

    Notes
    -----
    For the weights :math:`w` and the clipped weights :math:`\bar w=\min(w,R)` of each policy
    the statistics are, about a reward shift :math:`c` (the first batch's mean reward), the
    means of :math:`a=w(r-c)` and :math:`b=w` and their centred second moments
    :math:`\sum(a-\bar a)^2`, :math:`\sum(a-\bar a)(b-\bar b)`, :math:`\sum(b-\bar b)^2`,
    plus :math:`\max w`, the number of clipped rows and the mean and centred sum of squares of
    :math:`r-c`. Two sets merge exactly: the second is first re-expressed about the first's
    shift (:math:`a\to a+(c_2-c_1)b`, a linear map of the means and co-moments), then the
    pairwise update of Chan, Golub & LeVeque adds the co-moments plus
    :math:`\delta\delta^\top n_1n_2/n` for the difference of means :math:`\delta`.
    From them, with :math:`A_i=(w_ir_i)` for IPS and :math:`(w_ir_i,w_i)` for SNIPS, the value
    is :math:`g(\bar A)` and :math:`\widehat{\mathrm{se}}^2=\nabla g^\top S\,\nabla g/n`
    with :math:`S` the sample covariance: exactly the eager estimators' influence-based
    standard error. No variance is formed as a difference of raw sums of squares, which would
    lose :math:`\log_{10}(\mathbb E[x^2]/\mathrm{Var}\,x)` digits (12 for rewards of mean
    :math:`10^6` and standard deviation 1).

    References
    ----------
    .. [1] T. F. Chan, G. H. Golub and R. J. LeVeque, "Updating formulae and a pairwise
       algorithm for computing sample variances", COMPSTAT 1982 (merging partial moments).
    """

    n: int
    min_r: float
    max_r: float
    centered: CenteredMoments
    max_weight: float | None = None
    names: tuple[str, ...] | None = None
    #: the statistics of the sampling-weighted rows (None for unweighted rows), and what the
    #: notes call the sampling weights; the estimates then come from them, while ``centered``
    #: (and ``moments``, ``sum_r``) stay those of the rows as logged
    weighted: WeightedMoments | None = None
    weight_name: str = "sampling_weight"

    @classmethod
    def from_arrays(
        cls,
        reward: npt.ArrayLike,
        logging_propensity: npt.ArrayLike,
        target_propensity: npt.ArrayLike,
        *,
        max_weight: float | None = None,
        names: Sequence[str] | None = None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        sampling_weight: npt.ArrayLike | None = None,
        weight_name: str = "sampling_weight",
        estimators: Sequence[Any] | None = None,
    ) -> MomentStats:
        """Statistics of one batch of rows.

        Parameters
        ----------
        reward : array_like, shape (n,)
            Rewards.
        logging_propensity : array_like, shape (n,)
            Logging propensities, in (0, 1].
        target_propensity : array_like of shape (n,) or (n, P), or a list of P arrays (n,)
            Candidate propensities of the logged actions; a list of columns (e.g. zero-copy
            views of Arrow columns) is read as it is, without forming an (n, P) block.
        max_weight : float, optional
            A priori clip level for clipped IPS (must be the same in every batch merged).
        names : sequence of str, optional
            Policy names (one per column).
        chunk_size : int, default DEFAULT_CHUNK_SIZE
            Largest number of rows per block of the kernel, which also keeps a block within
            2**18 entries (rows x P) so that it stays in cache; the results do not depend on it
            beyond rounding.
        sampling_weight : array_like, shape (n,), optional
            Sampling (Horvitz-Thompson) weights of the rows: the estimates are then the
            weighted ones of :mod:`ope.estimators` (from :class:`ope.moments.WeightedMoments`),
            and only statistics of weighted rows merge with these.
        weight_name : str, default "sampling_weight"
            What notes and messages call the sampling weights (e.g. the log's column).
        estimators : sequence of weighting estimators, optional
            The estimators the statistics are for, instead of ``max_weight``: the clip level
            is that of the clipped estimator among them (read from the object that keeps and
            validated it; the drivers pass their estimators, never a copy of the number).

        Returns
        -------
        MomentStats

        Examples
        --------
        >>> import numpy as np
        >>> from ope.streaming import MomentStats
        >>> s = MomentStats.from_arrays([1.0, 0.0], [0.5, 0.5], [1.0, 0.5])
        >>> s.n, s.moments["sum_wr"]
        (2, array([2.]))
        """
        r = as_float_array(reward, "reward", ndim=(1,))
        mw = (
            check_max_weight(max_weight) if estimators is None else _clip_of(estimators, max_weight)
        )
        p, t_arg, labels = _pass_inputs(r, logging_propensity, target_propensity, names)
        n = int(r.shape[0])
        weighted = None
        if sampling_weight is None:
            centered = centered_moments(r, p, t_arg, max_weight=mw, chunk_size=chunk_size)
        else:  # one pass: the unweighted and the sampling-weighted statistics
            sw = check_sampling_weight(sampling_weight, n, name=weight_name)
            centered, weighted = weighted_moments(
                r, p, t_arg, sw, max_weight=mw, chunk_size=chunk_size
            )
        checks = centered.checks
        assert checks is not None
        # one pass both computes the statistics and sees the ranges: the validators run only
        # when something is out of range (and then report the column and row)
        check_after_pass(checks, r, p, t_arg, None)
        low, high = (checks.r_min, checks.r_max) if n else (math.inf, -math.inf)
        return cls(
            n=n,
            min_r=low,
            max_r=high,
            centered=centered,
            max_weight=mw,
            names=labels,
            weighted=weighted,
            weight_name=weight_name,
        )

    @classmethod
    def from_outcomes(
        cls,
        rewards: Sequence[npt.ArrayLike],
        logging_propensity: npt.ArrayLike,
        target_propensity: npt.ArrayLike,
        *,
        names: Sequence[str] | None = None,
        estimators: Sequence[Any] | None = None,
        max_weight: float | None = None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
    ) -> list[MomentStats]:
        """The :meth:`from_arrays` statistics of several outcomes on the same rows and weights,
        from one pass (each candidate's weights are formed, and its column read, once).

        Parameters
        ----------
        rewards : list of array_like of shape (n,) each, or array of shape (L, n)
            The outcomes (e.g. the reward, a cost and a latency of the same rows).
        logging_propensity, target_propensity, names, estimators, max_weight, chunk_size
            As in :meth:`from_arrays` (no sampling weights: their statistics are formed per
            outcome by :meth:`from_arrays`).

        Returns
        -------
        list of MomentStats
            One per outcome, equal to ``from_arrays(outcome, ...)``.

        Examples
        --------
        >>> from ope.streaming import MomentStats
        >>> a, b = MomentStats.from_outcomes([[1.0, 0.0], [3.0, 5.0]], [0.5, 0.5], [1.0, 0.5])
        >>> a.moments["sum_wr"], b.moments["sum_wr"]
        (array([2.]), array([11.]))
        """
        if not isinstance(rewards, (list, tuple)) and not (
            isinstance(rewards, np.ndarray) and rewards.ndim == 2
        ):
            raise ParameterError(
                "`rewards` must be a list of outcome arrays of shape (n,) each (or an (L, n) "
                f"array), e.g. [reward, cost]; got {type(rewards).__name__}."
            )
        rs = [as_float_array(r, f"rewards[{k}]", ndim=(1,)) for k, r in enumerate(rewards)]
        if not rs:
            raise ParameterError("`rewards` must hold at least one outcome, e.g. [reward, cost].")
        mw = (
            check_max_weight(max_weight) if estimators is None else _clip_of(estimators, max_weight)
        )
        p, t_arg, labels = _pass_inputs(rs[0], logging_propensity, target_propensity, names)
        for k, r in enumerate(rs[1:], start=1):  # a loop over outcomes
            if r.shape[0] != p.shape[0]:
                raise ValidationError(
                    f"`rewards[{k}]` has {r.shape[0]} rows but `logging_propensity` has "
                    f"{p.shape[0]}."
                )
        out = []
        for r, centered in zip(  # a loop over outcomes (the pass is shared)
            rs, centered_outcome_moments(rs, p, t_arg, max_weight=mw, chunk_size=chunk_size)
        ):
            checks = centered.checks
            assert checks is not None
            check_after_pass(checks, r, p, t_arg, None)
            n = int(r.shape[0])
            low, high = (checks.r_min, checks.r_max) if n else (math.inf, -math.inf)
            out.append(
                cls(n=n, min_r=low, max_r=high, centered=centered, max_weight=mw, names=labels)
            )
        return out

    def paired_with_logging(
        self, estimator: Estimator | str, *, reward_range: Sequence[float] | None = None
    ) -> list[tuple[float, float]]:
        """``(difference, standard error)`` of each policy's estimate minus the logging value.

        The paired standard error ``sd(psi_est - psi_logging) / sqrt(n)`` comes from the
        cross-moments of the weighted rewards with the reward that the kernel accumulates,
        so no pass over the rows is needed (equal to :func:`ope.results.compare` on the rows,
        to rounding). IPS, clipped IPS and SNIPS.
        """
        ests = self.estimates(estimator, reward_range=reward_range)
        base = self.logging_estimate(reward_range=reward_range)
        est = ests[0].source.estimator if ests else None  # type: ignore[union-attr]
        if self.weighted is not None and not self.weighted.unit:
            raise EstimationError(
                "paired comparisons of sampling-weighted statistics need the rows; use "
                "ope.results.compare on estimates from ope.estimators.estimate_many(..., "
                "sampling_weight=...)."
            )
        rr = check_reward_range(reward_range)
        out = []
        mom = self.centered
        for j, e in enumerate(ests):  # loop over policies, not rows
            assert isinstance(est, WeightingEstimator)  # estimates() takes no other
            sd = est.paired_logging_sd(mom, j, est.reward_origin(rr))
            out.append((float(e.value - base.value), sd / math.sqrt(self.n)))
        return out

    @property
    def moments(self) -> dict[str, np.ndarray]:
        """Raw per-policy sums keyed by :data:`ope.weights.MOMENT_KEYS`, shape (P,) each."""
        return self.centered.policy_sums()

    @property
    def sum_r(self) -> float:
        """Sum of the rewards."""
        return self.centered.reward_sums()[0]

    @property
    def sum_r2(self) -> float:
        """Sum of the squared rewards."""
        return self.centered.reward_sums()[1]

    @property
    def n_policies(self) -> int:
        """Number of candidate policies P."""
        return int(self.centered.max_w.shape[0])

    def merge(self, other: MomentStats) -> MomentStats:
        """Statistics of the union of two disjoint sets of rows (associative, commutative).

        Raises
        ------
        ope.ValidationError
            Different numbers of policies, policy names (or names on one side only), clip
            levels, or sampling weights (rows with and without, or another ``weight_name``).

        Examples
        --------
        >>> from ope.streaming import MomentStats
        >>> a = MomentStats.from_arrays([1.0], [0.5], [1.0])
        >>> b = MomentStats.from_arrays([0.0], [0.5], [0.5])
        >>> a.merge(b).moments["sum_w"]
        array([3.])
        """
        if not isinstance(other, MomentStats):
            raise ParameterError(f"can only merge MomentStats; got {type(other).__name__}.")
        if other.n_policies != self.n_policies:
            raise ValidationError(
                f"cannot merge statistics of {self.n_policies} and {other.n_policies} policies; "
                "every batch must carry the same candidate columns."
            )
        if self.names is not None and other.names is not None and self.names != other.names:
            raise ValidationError(
                f"cannot merge statistics of different policies: {self.names} vs {other.names}."
            )
        if (self.names is None) != (other.names is None):
            named = self.names if self.names is not None else other.names
            raise ValidationError(
                f"cannot merge statistics of the policies {named} with statistics whose columns "
                "have no names: they would be combined by position, whatever they hold. Give "
                "both batches the same names (names=... in from_arrays or from_columns)."
            )
        if self.max_weight != other.max_weight:
            raise ValidationError(
                f"cannot merge statistics clipped at different levels: max_weight="
                f"{self.max_weight} vs {other.max_weight}."
            )
        if (self.weighted is None) != (other.weighted is None):
            raise ValidationError(
                "cannot merge statistics of rows with sampling weights and of rows without; "
                "give every batch its sampling weights (1 for rows kept for sure)."
            )
        weighted = None
        if self.weighted is not None and other.weighted is not None:
            if self.weight_name != other.weight_name:
                raise ValidationError(
                    "cannot merge statistics of rows weighted by different sampling weights: "
                    f"weight_name={self.weight_name!r} vs {other.weight_name!r}. Weight every "
                    "batch by the same column (or give its statistics the same weight_name)."
                )
            weighted = self.weighted.merge(other.weighted)
        return MomentStats(
            n=self.n + other.n,
            min_r=min(self.min_r, other.min_r),
            max_r=max(self.max_r, other.max_r),
            centered=self.centered.merge(other.centered),
            max_weight=self.max_weight,
            names=self.names if self.names is not None else other.names,
            weighted=weighted,
            weight_name=self.weight_name,
        )

    def __add__(self, other: MomentStats) -> MomentStats:
        return self.merge(other)

    def __radd__(self, other: object) -> MomentStats:
        if isinstance(other, int) and other == 0:  # builtin sum() starts from 0
            return self
        return NotImplemented

    @staticmethod
    def merge_all(parts: Iterable[MomentStats]) -> MomentStats:
        """Merge statistics of many disjoint batches (e.g. Dask partitions).

        Raises
        ------
        ope.ParameterError
            ``parts`` is empty.
        """
        items = list(parts)
        if not items:
            raise ParameterError("`parts` is empty: nothing to merge.")
        total = items[0]
        for part in items[1:]:  # loop over batches, not rows
            total = total.merge(part)
        return total

    def with_rows(
        self,
        estimates: Sequence[Estimate],
        *,
        reward: np.ndarray,
        logging_propensity: np.ndarray | None,
        target_propensity: Any,
        reward_range: Sequence[float] | None = None,
    ) -> list[Estimate]:
        """The same estimates, backed by the rows these statistics were computed from.

        Values, standard errors and notes stay those of the statistics (equal to
        :func:`ope.estimators.estimate_many`'s to about 1e-12); the rows, referenced and not
        copied, make bootstrap, empirical likelihood and betting intervals and paired
        comparisons available as for ``estimate_many``, and the bounded intervals reuse the
        statistics instead of another pass. This is how ``ope.evaluate`` computes IPS, clipped
        IPS and SNIPS for many policies in one pass over the rows.

        Parameters
        ----------
        estimates : sequence of Estimate
            ``self.estimates(...)``, one per policy column, in column order.
        reward, logging_propensity : numpy.ndarray, shape (n,)
            The validated float64 arrays the statistics were computed from.
        target_propensity : numpy.ndarray of shape (n, P), a list of P columns, or None
            (None only for the logging value's estimate)
        reward_range : (float, float), optional

        Returns
        -------
        list of Estimate
        """
        if self.weighted is not None and not self.weighted.unit:
            raise EstimationError(
                "with_rows does not take sampling-weighted statistics; for row-backed weighted "
                "estimates use ope.estimators.estimate_many(..., sampling_weight=...)."
            )
        rr = check_reward_range(reward_range)
        if (
            isinstance(estimates, (str, bytes))
            or not isinstance(estimates, Sequence)
            or not all(
                isinstance(e, Estimate) and isinstance(e.source, _MomentSource) for e in estimates
            )
        ):
            raise ParameterError(
                "`estimates` must be the list of Estimates of these statistics "
                f"(self.estimates(...)), one per policy column; got {describe(estimates)}."
            )
        reward = self._rows_array(reward, "reward", ndim=(1,))
        weighted = [e.source.estimator.uses_weights for e in estimates]  # type: ignore[union-attr]
        cols: list[np.ndarray] | None = None
        matrix: np.ndarray | None = None
        if any(weighted):
            logging_propensity = self._rows_array(
                logging_propensity, "logging_propensity", ndim=(1,)
            )
            if isinstance(target_propensity, (list, tuple)):
                cols = [
                    self._rows_array(c, "target_propensity", ndim=(1,)) for c in target_propensity
                ]
                n_pol = len(cols)
            else:
                matrix = self._rows_array(target_propensity, "target_propensity", ndim=(1, 2))
                matrix = matrix if matrix.ndim == 2 else matrix[:, None]
                n_pol = matrix.shape[1]
            if n_pol != len(estimates):
                raise ValidationError(
                    f"`target_propensity` has {n_pol} policy columns but `estimates` has "
                    f"{len(estimates)} estimates; give the columns the statistics were computed "
                    "from, one per estimate."
                )
        out = []
        for j, est in enumerate(estimates):  # loop over policies, not rows
            src = est.source
            assert isinstance(src, _MomentSource)
            column = None
            if weighted[j]:
                column = cols[j] if cols is not None else matrix[:, j]  # type: ignore[index]
            rows = EstimatorRows(
                src.estimator,
                reward,
                logging_propensity if weighted[j] else None,
                column,
                None,
                None,
                rr,
                moments=src.moments.column(src.column),
            )
            # with rows, the skewed-terms rule can be read (the statistics alone cannot)
            extra = kernel_skew_notes(
                src.estimator, src.moments, src.column, rows, est.policy, rr, est.notes
            )
            backed = est.with_source(rows)
            out.append(dataclasses.replace(backed, notes=backed.notes + tuple(extra)))
        return out

    def _rows_array(self, value: Any, name: str, *, ndim: tuple[int, ...]) -> np.ndarray:
        """One of the arrays these statistics were computed from (shape checked, not copied)."""
        arr = as_float_array(value, name, ndim=ndim)
        if arr.shape[0] != self.n:
            raise ValidationError(
                f"`{name}` has {arr.shape[0]} rows but these statistics summarize {self.n}; "
                "with_rows takes the arrays the statistics were computed from."
            )
        return arr

    def estimates(
        self,
        estimator: Estimator | str,
        *,
        reward_range: Sequence[float] | None = None,
        confidence_level: float = DEFAULT_CONFIDENCE_LEVEL,
    ) -> list[Estimate]:
        """IPS, clipped IPS or SNIPS Estimates (one per policy) from the merged statistics.

        Parameters
        ----------
        estimator : {"ips", "clipped_ips", "snips"} or the matching object
            ``"clipped_ips"`` uses the statistics' ``max_weight``; a ``ClippedIPS`` object
            must have the same ``max_weight``.
        reward_range : (float, float), optional
            A priori reward range (for hoeffding, bernstein and bottou intervals).
        confidence_level : float, default 0.95
            Level of the normal interval stored in ``ci_low``/``ci_high``.

        Returns
        -------
        list of Estimate
            ``ci`` supports normal, t and, where they apply, hoeffding, bernstein, bottou.

        Raises
        ------
        ope.EstimationError
            Unsupported estimator, or all weights zero.
        ope.ValidationError
            Fewer than 2 rows; rewards outside ``reward_range``; clip level mismatch.

        Examples
        --------
        >>> import numpy as np
        >>> from ope.streaming import MomentStats
        >>> s = MomentStats.from_arrays(np.ones(40), np.full(40, 0.5), np.full(40, 0.5))
        >>> s.estimates("snips")[0].value
        1.0
        """
        if isinstance(estimator, str):
            if estimator.lower() not in ESTIMATORS:
                raise unknown_estimator(estimator, "estimator")
            key = estimator.lower()
            # an estimator that takes a clip level gets the statistics' own
            takes_clip = "max_weight" in estimator_settings(key) and self.max_weight is not None
            est = (
                get_estimator(key, max_weight=self.max_weight) if takes_clip else get_estimator(key)
            )
        else:
            est = estimator
        if not isinstance(est, WeightingEstimator) or not est.uses_weights:
            raise EstimationError(
                f"merged statistics support the ips, clipped_ips and snips estimators; got "
                f"{getattr(est, 'name', est)!r}. Estimators with a reward model (dm, dr, ...) "
                "need the rows: use ope.estimators.estimate_many."
            )
        if getattr(est, "marginal", False):
            raise EstimationError(
                f"{est.name} weighs each row by its embedding's probabilities, which merged "
                "statistics of the items' propensities do not hold; run ope.evaluate(..., "
                "embedding=ope.ActionEmbedding(...)) on eager logs."
            )
        if est.clip_level is not None and est.clip_level != self.max_weight:
            # the estimator's setting does not fit the statistics: an argument problem
            raise ParameterError(
                f"ClippedIPS(max_weight={est.clip_level}) needs statistics accumulated with the "
                f"same clip level; these have max_weight={self.max_weight}. Pass max_weight= "
                "to MomentStats.from_arrays."
            )
        return self._estimates(est, reward_range, confidence_level)

    to_estimates = estimates

    def logging_estimate(
        self,
        *,
        reward_range: Sequence[float] | None = None,
        confidence_level: float = 0.95,
    ) -> Estimate:
        """The logging policy's value (mean reward) from the merged statistics.

        Equal to :func:`ope.estimators.logging_value` on the same rows; ``ci`` supports normal,
        t, hoeffding and bernstein.

        Parameters
        ----------
        reward_range : (float, float), optional
            A priori reward range (for hoeffding and bernstein).
        confidence_level : float, default 0.95
            Level of the normal interval stored on the result.

        Returns
        -------
        Estimate
            ``estimator="logging"``.

        Examples
        --------
        >>> import numpy as np
        >>> from ope.streaming import MomentStats
        >>> s = MomentStats.from_arrays(np.r_[np.ones(20), np.zeros(20)], np.full(40, 0.5),
        ...                             np.full(40, 0.5))
        >>> s.logging_estimate().value
        0.5
        """
        return self._estimates(LoggingValue(), reward_range, confidence_level)[0]

    def _estimates(
        self,
        est: WeightingEstimator,
        reward_range: Sequence[float] | None,
        confidence_level: float,
    ) -> list[Estimate]:
        """The estimates of ``est`` from the moments (the kernel the eager estimators use)."""
        level = check_confidence_level(confidence_level)
        rr = self._checked(reward_range)
        if self.weighted is not None and not self.weighted.unit:
            out = self._weighted_estimates(est, rr)
            if level != DEFAULT_CONFIDENCE_LEVEL:
                out = [res.with_ci(level, "normal") for res in out]
            return out
        mom = self.centered
        labels = self.names if self.names is not None else (None,) * self.n_policies
        if not est.uses_weights:  # the logging value: one "policy", the rewards
            labels = (None,)
        out = estimates_from_moments(
            est,
            mom,
            names=labels,
            source=lambda j: _MomentSource(est, mom, j, rr),
            reward_range=rr,
        )
        if level != DEFAULT_CONFIDENCE_LEVEL:
            out = [res.with_ci(level, "normal") for res in out]
        return out

    def _weighted_estimates(
        self, est: WeightingEstimator, rr: tuple[float, float] | None
    ) -> list[Estimate]:
        """The Horvitz-Thompson weighted estimates (see :mod:`ope.estimators`) from
        :class:`ope.moments.WeightedMoments`: the eager weighted numbers to rounding."""
        wm = self.weighted
        assert wm is not None
        clipped = est.clip_level is not None
        labels = self.names if self.names is not None else (None,) * self.n_policies
        if not est.uses_weights:
            labels = (None,)
        return weighted_estimates_from_moments(
            est,
            wm,
            names=labels,
            reward_range=rr,
            weight_name=self.weight_name,
            source=lambda j: _WeightedMomentSource(
                est, self.weight_name, clipped and bool(wm.n_clipped[j] > 0), rr
            ),
        )

    def _checked(self, reward_range: Sequence[float] | None) -> tuple[float, float] | None:
        """Refuse fewer than 2 rows; validate ``reward_range`` against the rewards seen."""
        if self.n < MIN_ROWS:
            raise ValidationError(
                f"the logs hold {self.n} usable row(s); a value with a standard error "
                f"needs at least {MIN_ROWS}. Pass every logged row (all the files or batches of "
                "the log)."
            )
        rr = check_reward_range(reward_range)
        if rr is None:
            return None
        low, high = rr
        if self.min_r < low or self.max_r > high:
            raise ValidationError(
                f"rewards span [{self.min_r:g}, {self.max_r:g}], outside reward_range="
                f"({low:g}, {high:g}); reward_range must be an a priori bound that every "
                "reward satisfies."
            )
        return rr

    # ---- a flat form, for engines that move plain numeric columns (Spark) ----------------
    def to_columns(self) -> dict[str, np.ndarray]:
        """The statistics as named one-dimensional float64 arrays (no pickling).

        What an engine that moves plain numeric columns (Spark's Arrow batches) sends from a
        task to the driver; :meth:`from_columns` rebuilds statistics that merge and estimate
        exactly as these do. Counts are stored as floats (exact below 2**53 rows); the policy
        names and the sampling weights' name are not numbers and stay with the caller.

        Returns
        -------
        dict of str to numpy.ndarray
            ``"head"`` (n, min_r, max_r, max_weight or NaN, P, 1.0 when weighted), the kernel's
            moments (``"moments.<field>"``, raveled) and, for sampling-weighted rows, the
            weighted ones (``"weighted.<field>"``).

        Examples
        --------
        >>> import numpy as np
        >>> from ope.streaming import MomentStats
        >>> s = MomentStats.from_arrays([1.0, 0.0, 1.0], [0.5] * 3, [[1.0, 0.2]] * 3)
        >>> columns = s.to_columns()
        >>> columns["head"].tolist()
        [3.0, 0.0, 1.0, nan, 2.0, 0.0]
        >>> back = MomentStats.from_columns(columns)
        >>> [e.value for e in back.estimates("ips")] == [e.value for e in s.estimates("ips")]
        True
        """
        m = self.centered.raw
        head = [
            float(self.n),
            float(self.min_r),
            float(self.max_r),
            math.nan if self.max_weight is None else float(self.max_weight),
            float(self.n_policies),
            0.0 if self.weighted is None else 1.0,
        ]
        out = {"head": np.asarray(head, dtype=np.float64)}
        for name in MOMENT_FIELDS:  # loop over the kernel's ten fields
            out[f"moments.{name}"] = np.asarray(getattr(m, name), dtype=np.float64).ravel()
        wm = self.weighted
        if wm is not None:
            out["weighted.head"] = np.asarray(
                [float(wm.n), wm.shift, wm.s_min, wm.s_max, float(wm.n_policies), wm.mean.shape[0]]
            )
            for name in ("mean", "com", "max_w", "n_clipped"):  # loop over the fields
                out[f"weighted.{name}"] = np.asarray(getattr(wm, name), dtype=np.float64).ravel()
        return out

    @classmethod
    def from_columns(
        cls,
        columns: Mapping[str, npt.ArrayLike],
        *,
        names: Sequence[str] | None = None,
        weight_name: str = "sampling_weight",
    ) -> MomentStats:
        """The statistics written by :meth:`to_columns`.

        Parameters
        ----------
        columns : mapping of str to array_like
            The arrays of :meth:`to_columns` (e.g. read back from Arrow list columns).
        names : sequence of str, optional
            Policy names, one per column of the statistics.
        weight_name : str, default "sampling_weight"
            What notes and messages call the sampling weights.

        Returns
        -------
        MomentStats

        Raises
        ------
        ope.ParameterError
            ``columns`` is not a mapping, misses an array, or an array has the wrong length;
            the head's row count, clip level or policy count disagrees with the moments.
        """
        if not isinstance(columns, Mapping):
            raise ParameterError(
                f"`columns` must be the mapping MomentStats.to_columns() returns; got "
                f"{describe(columns)}."
            )

        def array(key: str, size: int | None) -> np.ndarray:
            if key not in columns:
                raise ParameterError(
                    f"`columns` has no {key!r} array; give the mapping MomentStats.to_columns() "
                    "returned, every key included."
                )
            arr = np.asarray(columns[key], dtype=np.float64).ravel()
            if size is not None and arr.size != size:
                raise ParameterError(
                    f"`columns[{key!r}]` holds {arr.size} numbers; statistics of these "
                    f"policies have {size}. Give the arrays of one MomentStats.to_columns()."
                )
            return arr

        def count(value: float, key: str, what: str) -> int:
            if not (math.isfinite(value) and value >= 0 and value == math.floor(value)):
                raise ParameterError(
                    f"`columns[{key!r}]` gives {value!r} {what}; not a count. {_COLUMNS_FIX}"
                )
            return int(value)

        head = array("head", 6)
        n_pol = count(float(head[4]), "head", "policies")
        held = array("moments.max_w", None).size
        if held != n_pol:
            raise ParameterError(
                f"`columns['head']` gives {n_pol} policies but `columns['moments.max_w']` holds "
                f"{held} (one per policy). {_COLUMNS_FIX}"
            )
        shapes = {
            "n": (1,),
            "shift": (1,),
            "r_exp": (1,),
            "r_mean": (1,),
            "r_m2": (1,),
            "w_exp": (1, 2, n_pol),
            "mean": (1, 2, 2, n_pol),
            "com": (1, 2, N_COMOMENTS, n_pol),
            "max_w": (1, n_pol),
            "n_clipped": (1, n_pol),
        }

        def field(name: str) -> np.ndarray:
            return array(f"moments.{name}", math.prod(shapes[name])).reshape(shapes[name])

        raw = Moments(
            field("n"),
            field("shift"),
            field("r_exp"),
            field("r_mean"),
            field("r_m2"),
            field("w_exp"),
            field("mean"),
            field("com"),
            field("max_w"),
            field("n_clipped"),
        )
        rows = count(float(head[0]), "head", "rows")
        _check_head(rows, float(head[3]), float(head[5]), raw)
        weighted = None
        if head[5]:
            whead = array("weighted.head", 6)
            wp = count(float(whead[4]), "weighted.head", "policies")
            k = count(float(whead[5]), "weighted.head", "components")
            if wp != n_pol or float(whead[0]) != rows:
                raise ParameterError(
                    f"`columns['weighted.head']` gives {whead[0]:g} rows of {wp} policies; "
                    f"`columns['head']` gives {rows} of {n_pol}. {_COLUMNS_FIX}"
                )
            weighted = WeightedMoments(
                int(whead[0]),
                float(whead[1]),
                array("weighted.mean", k * wp).reshape(k, wp),
                array("weighted.com", k * k * wp).reshape(k, k, wp),
                array("weighted.max_w", wp),
                array("weighted.n_clipped", wp),
                float(whead[2]),
                float(whead[3]),
            )
        labels = _labels(names, n_pol)
        return cls(
            n=rows,
            min_r=float(head[1]),
            max_r=float(head[2]),
            centered=CenteredMoments(raw),
            max_weight=None if math.isnan(head[3]) else float(head[3]),
            names=labels,
            weighted=weighted,
            weight_name=weight_name,
        )
