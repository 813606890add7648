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
:class:`ope.estimate.Estimate` objects whose value and standard error equal the eager
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

import math
from collections.abc import Iterable, Sequence
import dataclasses
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from ope.estimate import Estimate, _make_estimate, _Source
from ope.estimators import (
    SNIPS,
    ClippedIPS,
    IPS,
    _diagnose,
    _Estimator,
    _LoggingValue,
    _moment_interval,
    get_estimator,
)
from ope.exceptions import EstimationError, ValidationError
from ope.intervals._types import BottouInterval, ConfidenceInterval
from ope.weights import (
    DEFAULT_CHUNK_SIZE,
    MOMENT_KEYS,
    _as_float_array,
    _CenteredMoments,
    _centered_moments,
    _check_finite,
    _check_max_weight,
    _validated_pair,
    _value_range,
)

__all__ = ["MomentStats"]

_ROWS_HINT: Final = (
    "it was computed from merged summary statistics (ope.streaming.MomentStats), which keep "
    "no rows; use ope.estimators on arrays for bootstrap, empirical_likelihood, betting and "
    "paired comparisons"
)


class _MomentSource(_Source):
    """Bounded intervals of one policy from the merged sums."""

    has_rows = False
    rows_hint = _ROWS_HINT

    def __init__(
        self,
        estimator: _Estimator,
        moments: _CenteredMoments,
        column: int,
        reward_range: tuple[float, float] | None,
    ) -> None:
        self.estimator = estimator
        self.moments = moments
        self.column = column
        self.reward_range = reward_range
        self.methods = tuple(m for m in estimator._methods if m in ("hoeffding", "bernstein", "bottou"))

    def special_interval(
        self,
        method: str,
        *,
        confidence_level: float,
        max_weight: float | None,
        outer: str | None,
    ) -> ConfidenceInterval | BottouInterval:
        return _moment_interval(
            self.estimator._kind,
            method,
            self.moments,
            self.column,
            reward_range=self.reward_range,
            clip_level=getattr(self.estimator, "max_weight", None),
            max_weight=max_weight,
            outer=outer,
            confidence_level=confidence_level,
        )


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
    centered: _CenteredMoments
    max_weight: float | None = None
    names: tuple[str, ...] | None = None

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
    ) -> MomentStats:
        """Statistics of one batch of rows.

        Parameters
        ----------
        reward : array_like, shape (n,)
            Rewards.
        logging_propensity : array_like, shape (n,)
            Logging propensities, in (0, 1].
        target_propensity : array_like, shape (n,) or (n, P)
            Candidate propensities of the logged actions.
        max_weight : float, optional
            A priori clip level for clipped IPS (must be the same in every batch merged).
        names : sequence of str, optional
            Policy names (one per column).
        chunk_size : int, default DEFAULT_CHUNK_SIZE
            Largest number of rows per block of the kernel, which also keeps a block within
            2**18 entries (rows x P) so that it stays in cache; the results do not depend on it
            beyond rounding.

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
        r = _as_float_array(reward, "reward", ndim=(1,))
        p, t = _validated_pair(logging_propensity, target_propensity)
        if r.shape[0] != p.shape[0]:
            raise ValidationError(
                f"`reward` has {r.shape[0]} rows but `logging_propensity` has {p.shape[0]}."
            )
        n = int(r.shape[0])
        # one blockwise min/max pass both checks the rewards and records their range
        low, high = _value_range(r) if n else (math.inf, -math.inf)
        if n and not (math.isfinite(low) and math.isfinite(high)):
            _check_finite(r, "reward")  # raises with the count and first row
        mw = _check_max_weight(max_weight)
        t2 = t if t.ndim == 2 else t[:, None]
        n_pol = t2.shape[1]
        labels = None
        if names is not None:
            labels = tuple(str(x) for x in names)
            if len(labels) != n_pol:
                raise ValidationError(
                    f"`names` has {len(labels)} entries but there are {n_pol} policy columns."
                )
        return cls(
            n=n,
            min_r=low,
            max_r=high,
            centered=_centered_moments(r, p, t2, max_weight=mw, chunk_size=chunk_size),
            max_weight=mw,
            names=labels,
        )

    @property
    def moments(self) -> dict[str, np.ndarray]:
        """Raw per-policy sums keyed by :data:`ope.weights.MOMENT_KEYS`, shape (P,) each."""
        per = [self.centered.raw_sums(j) for j in range(self.n_policies)]
        return {k: np.array([d[k] for d in per], dtype=np.float64) for k in MOMENT_KEYS}

    @property
    def sum_r(self) -> float:
        """Sum of the rewards."""
        c = self.centered
        return float(c.n * (c.shift + c.r_mean))

    @property
    def sum_r2(self) -> float:
        """Sum of the squared rewards."""
        c = self.centered
        mean = c.shift + c.r_mean
        return float(c.r_m2 + c.n * mean * mean)

    @property
    def n_policies(self) -> int:
        """Number of candidate policies P."""
        return int(self.centered.max_w.shape[0])

    def merge(self, other: MomentStats) -> MomentStats:
        """Statistics of the union of two disjoint sets of rows (associative, commutative).

        Raises
        ------
        ope.ValidationError
            Different numbers of policies, policy names or clip levels.

        Examples
        --------
        >>> from ope.streaming import MomentStats
        >>> a = MomentStats.from_arrays([1.0], [0.5], [1.0])
        >>> b = MomentStats.from_arrays([0.0], [0.5], [0.5])
        >>> a.merge(b).moments["sum_w"]
        array([3.])
        """
        if not isinstance(other, MomentStats):
            raise TypeError(f"can only merge MomentStats; got {type(other).__name__}.")
        if other.n_policies != self.n_policies:
            raise ValidationError(
                f"cannot merge statistics of {self.n_policies} and {other.n_policies} policies; "
                "every batch must carry the same candidate columns."
            )
        if self.names is not None and other.names is not None and self.names != other.names:
            raise ValidationError(
                f"cannot merge statistics of different policies: {self.names} vs {other.names}."
            )
        if self.max_weight != other.max_weight:
            raise ValidationError(
                f"cannot merge statistics clipped at different levels: max_weight="
                f"{self.max_weight} vs {other.max_weight}."
            )
        return MomentStats(
            n=self.n + other.n,
            min_r=min(self.min_r, other.min_r),
            max_r=max(self.max_r, other.max_r),
            centered=self.centered.merge(other.centered),
            max_weight=self.max_weight,
            names=self.names if self.names is not None else other.names,
        )

    def __add__(self, other: MomentStats) -> MomentStats:
        return self.merge(other)

    def __radd__(self, other: object) -> MomentStats:
        if isinstance(other, int) and other == 0:  # builtin sum() starts from 0
            return self
        return NotImplemented  # type: ignore[return-value]

    @staticmethod
    def merge_all(parts: Iterable[MomentStats]) -> MomentStats:
        """Merge statistics of many disjoint batches (e.g. Dask partitions).

        Raises
        ------
        ValueError
            ``parts`` is empty.
        """
        items = list(parts)
        if not items:
            raise ValueError("`parts` is empty: nothing to merge.")
        total = items[0]
        for part in items[1:]:  # loop over batches, not rows
            total = total.merge(part)
        return total

    def with_rows(
        self,
        estimates: Sequence[Estimate],
        *,
        reward: np.ndarray,
        logging_propensity: np.ndarray,
        target_propensity: np.ndarray,
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
        target_propensity : numpy.ndarray, shape (n, P)
        reward_range : (float, float), optional

        Returns
        -------
        list of Estimate
        """
        from ope.estimators import _EstimatorRows

        rr = None if reward_range is None else (float(reward_range[0]), float(reward_range[1]))
        out = []
        for j, est in enumerate(estimates):  # loop over policies, not rows
            src = est._source
            if not isinstance(src, _MomentSource) or int(target_propensity.shape[0]) != self.n:
                raise ValidationError(
                    "with_rows takes the estimates of these statistics and the arrays they were "
                    "computed from."
                )
            rows = _EstimatorRows(
                src.estimator, reward, logging_propensity, target_propensity[:, j], None, None, rr
            )
            rows._moments = self.centered.column(j)
            out.append(dataclasses.replace(est, _source=rows))
        return out

    def estimates(
        self,
        estimator: _Estimator | str,
        *,
        reward_range: Sequence[float] | None = None,
        confidence_level: float = 0.95,
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
            Unsupported estimator, fewer than 2 rows, or all weights zero.
        ope.ValidationError
            Rewards outside ``reward_range``; clip level mismatch.

        Examples
        --------
        >>> import numpy as np
        >>> from ope.streaming import MomentStats
        >>> s = MomentStats.from_arrays(np.ones(40), np.full(40, 0.5), np.full(40, 0.5))
        >>> s.estimates("snips")[0].value
        1.0
        """
        if isinstance(estimator, str):
            est = (
                ClippedIPS(max_weight=self.max_weight)  # type: ignore[arg-type]
                if estimator == "clipped_ips" and self.max_weight is not None
                else get_estimator(estimator)
            )
        else:
            est = estimator
        if not isinstance(est, (IPS, ClippedIPS, SNIPS)):
            raise EstimationError(
                f"merged statistics support the ips, clipped_ips and snips estimators; got "
                f"{getattr(est, 'name', est)!r}. Estimators with a reward model (dm, dr, ...) "
                "need the rows: use ope.estimators.estimate_many."
            )
        if isinstance(est, ClippedIPS) and est.max_weight != self.max_weight:
            raise ValidationError(
                f"ClippedIPS(max_weight={est.max_weight}) needs statistics accumulated with the "
                f"same clip level; these have max_weight={self.max_weight}. Pass max_weight= "
                "to MomentStats.from_arrays."
            )
        rr = self._checked(reward_range)
        n = self.n
        clipped = isinstance(est, ClippedIPS)
        mom = self.centered
        out = []
        labels = self.names if self.names is not None else (None,) * self.n_policies
        for j, label in enumerate(labels):  # loop over policies
            s_w, s_w2 = mom.weight_sums(j, clipped=clipped)
            wsum = np.array([*mom.weight_sums(j, clipped=False), s_w, s_w2])
            notes = _diagnose(est, n, wsum, label)
            if isinstance(est, SNIPS):
                value, var = mom.ratio_mean_var(j, clipped=False)
            else:
                value, var = mom.product_mean_var(j, clipped=clipped, about=0.0)
            se = math.sqrt(var / n)
            ess = s_w**2 / s_w2 if s_w2 > 0 else 0.0
            res = _make_estimate(
                estimator=est.name,
                value=value,
                std_error=se,
                n=n,
                ess=ess,
                notes=tuple(notes),
                policy=label,
                source=_MomentSource(est, mom, j, rr),
            )
            if confidence_level != 0.95:
                res = res.with_ci(confidence_level, "normal")
            out.append(res)
        return out

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
        rr = self._checked(reward_range)
        est = _LoggingValue()
        n = float(self.n)
        value, var = self.centered.reward_mean_var()
        res = _make_estimate(
            estimator=est.name,
            value=value,
            std_error=math.sqrt(var / n),
            n=self.n,
            ess=n,
            notes=tuple(_diagnose(est, self.n, np.zeros(4), None)),
            source=_MomentSource(est, self.centered, 0, rr),
        )
        if confidence_level != 0.95:
            res = res.with_ci(confidence_level, "normal")
        return res

    def _checked(self, reward_range: Sequence[float] | None) -> tuple[float, float] | None:
        """Refuse fewer than 2 rows; validate ``reward_range`` against the rewards seen."""
        if self.n < 2:
            raise EstimationError(f"need at least 2 rows for a standard error; got {self.n}.")
        if reward_range is None:
            return None
        low, high = (float(x) for x in reward_range)
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise ValidationError(
                f"`reward_range` must be finite with low < high; got {reward_range!r}."
            )
        if self.min_r < low or self.max_r > high:
            raise ValidationError(
                f"rewards span [{self.min_r:g}, {self.max_r:g}], outside reward_range="
                f"({low:g}, {high:g}); reward_range must be an a priori bound that every "
                "reward satisfies."
            )
        return (low, high)
