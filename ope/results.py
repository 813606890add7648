"""Estimates and their intervals: :class:`Estimate` (a value, its standard error, the rows or
moments behind it and every interval method, :meth:`Estimate.ci`), :func:`compare` (paired
differences) and :func:`make_estimate`; with the result contract every result object shares
(:class:`Result`, :class:`Provenance`, :class:`ResultParts` and the one text and HTML renderer,
in :mod:`ope._result`, re-exported here).
"""

from __future__ import annotations

import copy
import dataclasses
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from ope._format import (
    Note,
    format_column,
    format_interval,
    format_value,
    note_key,
    se_decimals,
    unique_notes,
)
from ope._validation import (
    check_choice,
    check_confidence_level,
    deprecated_weight_bound,
    resolve_seed,
)
from ope.exceptions import EstimationError, ParameterError
from ope.intervals._types import BottouInterval, ConfidenceInterval, within_range
from ope.intervals.asymptotic import normal_interval, t_interval
from ope.intervals.bootstrap import bootstrap_interval, default_n_resamples
from ope._result import (
    VALUE_COLUMNS,
    Provenance,
    Result,
    ResultParts,
    render_html,
    render_text,
)

__all__ = [
    "Result",
    "IntervalRequest",
    "Note",
    "Provenance",
    "ResultParts",
    "VALUE_COLUMNS",
    "format_value",
    "note_key",
    "render_html",
    "render_text",
    "unique_notes",
    "Estimate",
    "compare",
    "comparison_row",
    "grouped_notes",
    "estimate_rows",
    "estimate_summary",
    "logging_comparison_rows",
    "make_estimate",
    "Source",
    "RowSource",
    "CI_METHODS",
    "TARGETS",
    "DEFAULT_CI_METHOD",
    "DEFAULT_CONFIDENCE_LEVEL",
]


#: Every interval method name known to :meth:`Estimate.ci`.
CI_METHODS: Final = (
    "normal",
    "t",
    "bootstrap",
    "hoeffding",
    "bernstein",
    "bottou",
    "empirical_likelihood",
    "betting",
    "log_smoothing",
)

#: The interval an estimate carries in ``ci_low``/``ci_high`` unless another is asked for.
DEFAULT_CI_METHOD: Final = "normal"
DEFAULT_CONFIDENCE_LEVEL: Final = 0.95

#: What an estimate's interval covers (``Estimate.target``): the candidate policy's value, or the
#: clipped value ``r_lo + E[min(w, R) (r - r_lo)]`` of a clipped IPS estimate whose clip binds.
TARGETS: Final = ("policy value", "clipped value")

_METHODS_WITHOUT_BOUNDS: Final = ("normal", "t", "bootstrap")


@dataclass(frozen=True)
class IntervalRequest:
    """What a :class:`Source` is asked for by ``Estimate.ci``: the interval ``method``, its
    ``confidence_level``, an a priori ``weight_bound`` on the importance weights (bounded
    methods of IPS/SNIPS and sequential IS/PDIS), and Bottou's ``outer`` method."""

    method: str
    confidence_level: float
    weight_bound: float | None = None
    outer: str | None = None

    def fields(self) -> tuple[str, float, float | None, str | None]:
        """``(method, confidence_level, weight_bound, outer)``."""
        return self.method, self.confidence_level, self.weight_bound, self.outer


class Source:
    """What an Estimate remembers about how it was computed (base: nothing row-level)."""

    #: interval methods beyond "normal" and "t" that this source can compute
    methods: tuple[str, ...] = ()
    #: True when the per-row data are available (bootstrap, influence, paired comparisons)
    has_rows: bool = False
    #: why rows are unavailable, for error messages
    rows_hint: str = "it was built without row-level data"
    #: the range the estimand lies in when known (the a priori ``reward_range``): normal, t and
    #: bootstrap intervals are intersected with it, as the bounded ones are
    value_range: tuple[float, float] | None = None
    #: True when the standard error treats a fitted reward model as fixed (DM): normal, t and
    #: bootstrap intervals would then ignore the model's error, so none is given (NaN)
    model_conditional: bool = False

    def interval_alternatives(self) -> tuple[str, ...]:
        """The interval methods of :attr:`methods` that these rows allow: what a bootstrap with
        too many undefined resamples advises instead (all of them, unless a subclass knows
        better)."""
        return tuple(self.methods)

    def target_of(self, method: str) -> str | None:
        """What ``method``'s interval covers (one of :data:`TARGETS`); None: not known here,
        the estimate's own ``target`` stands."""
        return None

    def special_interval(self, request: IntervalRequest) -> ConfidenceInterval | BottouInterval:
        """The interval ``request.method`` (beyond normal, t and bootstrap)."""
        raise EstimationError(f"interval method {request.method!r} is not available here.")


class RowSource(Source, ABC):
    """A source backed by rows: the statistic is ``statistic(column means of components)``."""

    has_rows = True
    reward: np.ndarray
    n: int

    @abstractmethod
    def components(self) -> np.ndarray:
        """Per-row components, float64 of shape (n, k)."""

    @abstractmethod
    def statistic(self, means: np.ndarray) -> np.ndarray:
        """The estimate as a function of column means (..., k) -> (...), vectorized."""

    @abstractmethod
    def gradient(self, means: np.ndarray) -> np.ndarray:
        """Gradient of :meth:`statistic` at the column means (k,) -> (k,)."""

    def n_components(self) -> int:
        """Number of per-row components k (without forming them, where the source knows)."""
        return int(self.components().shape[1])

    def influence(self) -> np.ndarray:
        """Per-row linearized (influence) terms; their mean is zero."""
        a = self.components()
        m = a.mean(axis=0)
        return (a - m) @ self.gradient(m)


class _PairedSource(RowSource):
    """The difference of two row-backed estimates computed on the same rows."""

    methods: tuple[str, ...] = ("bootstrap",)

    def __init__(self, a: RowSource, b: RowSource) -> None:
        self.a, self.b = a, b
        self.reward = a.reward
        self.n = a.n
        self._k = a.n_components()
        self.model_conditional = a.model_conditional or b.model_conditional

    def target_of(self, method: str) -> str | None:
        ta = self.a.target_of(method) or TARGETS[0]
        tb = self.b.target_of(method) or TARGETS[0]
        return ta if ta == tb else f"{ta} - {tb}"

    def n_components(self) -> int:
        return self._k + self.b.n_components()

    def components(self) -> np.ndarray:
        return np.hstack([self.a.components(), self.b.components()])

    def statistic(self, means: np.ndarray) -> np.ndarray:
        k = self._k
        return self.a.statistic(means[..., :k]) - self.b.statistic(means[..., k:])

    def gradient(self, means: np.ndarray) -> np.ndarray:
        k = self._k
        return np.concatenate([self.a.gradient(means[:k]), -self.b.gradient(means[k:])])


@dataclass(frozen=True, eq=False, repr=False)
class Estimate(Result):
    """The estimated value of one policy by one estimator, with its uncertainty.

    Attributes
    ----------
    estimator : str
        Registry name of the estimator (``"ips"``, ``"snips"``, ...; ``"logging"`` for the
        on-policy mean; ``"<a> - <b>"`` for a paired difference).
    value : float
        The point estimate.
    std_error : float
        Standard error: sample standard deviation of the per-row influence terms over
        :math:`\\sqrt n`.
    ci_low, ci_high : float
        The interval given by ``ci_method`` at ``confidence_level`` (normal at 0.95 unless
        another was asked for with :meth:`with_ci`).
    confidence_level : float
        Nominal coverage of ``[ci_low, ci_high]``.
    ci_method : str
        Method of ``[ci_low, ci_high]``.
    n : int
        Rows used.
    ess : float
        Kish effective sample size of the weights used, :math:`(\\sum w)^2/\\sum w^2`
        (``n`` for estimators that weight every row equally, such as DM).
    notes : tuple of str
        Warnings as text (low ESS, mean weight far from 1, ...), also emitted as warnings.
    policy : str or None
        Name of the candidate policy, when known.
    target : {"policy value", "clipped value"}
        What ``[ci_low, ci_high]`` covers (and ``value`` estimates). ``"policy value"`` for
        every estimator except clipped IPS whose clip binds (some weight exceeds
        ``max_weight``): its value and its normal, t, bootstrap, hoeffding and bernstein
        intervals cover the clipped value ``r_lo + E[min(w, R) (r - r_lo)]`` (below the policy's
        value for rewards above ``r_lo``), and only ``ci(method="bottou")`` covers the policy's
        value (``with_ci(ci="bottou")`` sets ``target="policy value"``). Switch-DR and DRos
        are biased estimators of the policy value, not estimators of another named quantity, so
        their target is the policy value. DM carries no interval (NaN): see :class:`ope.DM`.
    provenance : Provenance or None
        What produced it, when recorded (:class:`Result`): :meth:`with_ci` with
        ``method="bootstrap"`` records the seed of its resamples (the one given, or the one drawn
        when ``rng=None``) and the interval's options, so ``est.with_ci(level, "bootstrap",
        rng=res.provenance.seed, n_resamples=...)`` gives the same interval again.

    Examples
    --------
    >>> import numpy as np
    >>> import ope.estimators as oe
    >>> res = oe.IPS().estimate(reward=np.array([1.0, 0.0, 1.0, 1.0]),
    ...                         logging_propensity=np.full(4, 0.5),
    ...                         target_propensity=np.array([1.0, 0.0, 0.5, 1.0]))
    >>> res.value, res.n
    (1.25, 4)
    >>> sorted(res.to_dict())[:4]
    ['ci_high', 'ci_low', 'ci_method', 'confidence_level']
    """

    estimator: str
    value: float
    std_error: float
    ci_low: float
    ci_high: float
    n: int
    ess: float
    confidence_level: float = DEFAULT_CONFIDENCE_LEVEL
    ci_method: str = DEFAULT_CI_METHOD
    notes: tuple[str, ...] = ()
    policy: str | None = None
    target: str = TARGETS[0]
    _source: Source | None = field(default=None, compare=False)
    _provenance: Provenance | None = field(default=None, compare=False)

    # ---------------------------------------------------------------- intervals
    def ci(
        self,
        confidence_level: float = DEFAULT_CONFIDENCE_LEVEL,
        method: str = DEFAULT_CI_METHOD,
        *,
        n_resamples: int | None = None,
        bootstrap_method: str | None = None,
        rng: int | np.random.Generator | None = None,
        weight_bound: float | None = None,
        outer: str | None = None,
        max_weight: float | None = None,
    ) -> ConfidenceInterval | BottouInterval:
        """Confidence interval for the value.

        Parameters
        ----------
        confidence_level : float, default 0.95
            Nominal two-sided coverage, in (0, 1).
        method : str, default "normal"
            One of :data:`CI_METHODS`. ``normal`` and ``t`` apply to every estimate;
            ``bootstrap`` to every estimate computed from rows; ``hoeffding`` and
            ``bernstein`` to IPS (with an a priori ``weight_bound``), clipped IPS (its own
            clip level ``max_weight``) and the logging value; ``bottou`` to clipped IPS;
            ``empirical_likelihood`` to IPS and SNIPS (with ``weight_bound``); ``betting`` to
            IPS, SNIPS and the logging value; ``log_smoothing`` (one-sided: ``[lower bound,
            reward_range high]``, no weight bound; :mod:`ope.intervals.smoothing`) to IPS and
            the logging value. All bounded methods need ``reward_range``.
        n_resamples : int, optional
            Bootstrap only: number of resamples (default 2000).
        bootstrap_method : {"percentile", "bca"}, optional
            Bootstrap only (default "percentile").
        rng : int, numpy.random.Generator or None
            Bootstrap only: seed or generator.
        weight_bound : float, optional
            A priori bound on the importance weights of an IPS or SNIPS estimate, for
            ``hoeffding``, ``bernstein`` and ``empirical_likelihood``. It must hold for every
            context and action; the largest observed weight is not a bound.
        outer : {"bernstein", "normal"}, optional
            ``bottou`` only: how the sampling (outer) margin is computed (default "bernstein").
        max_weight : float, optional
            Deprecated spelling of ``weight_bound`` (emits a DeprecationWarning).

        Returns
        -------
        ConfidenceInterval or BottouInterval
            ``BottouInterval`` (with outer and inner parts) for ``method="bottou"``. Normal, t
            and bootstrap intervals are intersected with ``reward_range`` when the estimate was
            given one (the value the interval covers lies in it; the estimate itself may not,
            at small n, and the interval may then leave it out), as the bounded intervals
            are. For DM (a reward model's prediction whose error the standard error ignores)
            normal, t and bootstrap give ``(nan, nan)``. Which quantity the interval covers: :attr:`target` and
            :meth:`target_of`.

        Raises
        ------
        ope.ParameterError
            Unknown method, or an option that the method does not use.
        ope.EstimationError
            The method does not apply to this estimator (the message lists those that do).
        ope.MissingBoundsError
            The method needs ``reward_range`` or ``weight_bound`` and it was not given.

        Warns
        -----
        ope.OverlapWarning
            A bounded interval (hoeffding, bernstein, bottou, betting) came out empty or
            entirely outside the range the value can take: the data are inconsistent with
            importance weights of mean one. The interval is then reduced to a point (the nearer
            end of the range, or the midpoint of crossed betting bounds), never inverted.

        Notes
        -----
        What each method covers: every method covers the policy's value, except for clipped
        IPS whose clip binds, where normal, t, bootstrap, hoeffding and bernstein cover the
        clipped value and bottou the policy's value.

        normal: :math:`\\hat V\\pm z_{(1+\\gamma)/2}\\,\\mathrm{se}`; t: the same with
        :math:`t_{n-1}` quantiles; bootstrap: see :func:`ope.intervals.bootstrap.bootstrap_interval`
        (self-normalized estimators are renormalized inside each resample).

        References
        ----------
        .. [1] B. Efron and R. J. Tibshirani, *An Introduction to the Bootstrap*, 1993.

        Examples
        --------
        >>> import numpy as np
        >>> import ope.estimators as oe
        >>> rng = np.random.default_rng(0)
        >>> r = rng.binomial(1, 0.3, size=500).astype(float)
        >>> res = oe.SNIPS().estimate(reward=r, logging_propensity=np.full(500, 0.5),
        ...                           target_propensity=rng.uniform(size=500))
        >>> lo, hi = res.ci(0.9, method="bootstrap", rng=0)
        >>> bool(lo < res.value < hi)
        True
        """
        bound_name = "weight_bound" if max_weight is None else "max_weight"  # as given
        weight_bound = deprecated_weight_bound(
            weight_bound, max_weight, where="Estimate.ci/with_ci"
        )
        level = check_confidence_level(confidence_level)
        if method not in CI_METHODS:
            raise ParameterError(
                f"unknown interval method {method!r}; choose one of {', '.join(CI_METHODS)}."
            )
        if method != "bootstrap":
            for opt, val in (
                ("n_resamples", n_resamples),
                ("bootstrap_method", bootstrap_method),
                ("rng", rng),
            ):
                if val is not None:
                    raise ParameterError(
                        f"`{opt}` applies only to method='bootstrap'; got {method!r}."
                    )
        if outer is not None and method != "bottou":
            raise ParameterError(f"`outer` applies only to method='bottou'; got {method!r}.")
        if weight_bound is not None and method in ("normal", "t", "bootstrap"):
            raise ParameterError(
                f"`{bound_name}` is an a priori weight bound for the bounded methods (hoeffding, "
                f"bernstein, empirical_likelihood); method {method!r} does not use it."
            )
        src = self._source
        if method in _METHODS_WITHOUT_BOUNDS and src is not None and src.model_conditional:
            return ConfidenceInterval(math.nan, math.nan)
        if method == "normal":
            return _in_range(
                normal_interval(self.value, self.std_error, confidence_level=level), src
            )
        if method == "t":
            return _in_range(
                t_interval(self.value, self.std_error, self.n, confidence_level=level), src
            )
        available = ("normal", "t") + (src.methods if src is not None else ())
        if src is None or method not in src.methods:
            why = ""
            if src is not None and method == "bootstrap" and not src.has_rows:
                why = f" (this estimate has no rows: {src.rows_hint})"
            raise EstimationError(
                f"interval method {method!r} does not apply to the {self.estimator!r} "
                f"estimate{why}; available methods: {', '.join(available)}."
            )
        if method == "bootstrap":
            assert isinstance(src, RowSource)
            return _in_range(
                bootstrap_interval(
                    src.components(),
                    src.statistic,
                    confidence_level=level,
                    n_resamples=n_resamples,  # None: default_n_resamples(level)
                    bootstrap_method=(
                        "percentile" if bootstrap_method is None else bootstrap_method  # type: ignore[arg-type]  # checked by the callee
                    ),
                    rng=rng,
                    alternatives=src.interval_alternatives(),
                ),
                src,
            )
        return src.special_interval(IntervalRequest(method, level, weight_bound, outer))

    def with_ci(
        self,
        confidence_level: float = DEFAULT_CONFIDENCE_LEVEL,
        ci: str = DEFAULT_CI_METHOD,
        *,
        n_resamples: int | None = None,
        bootstrap_method: str | None = None,
        rng: int | np.random.Generator | None = None,
        weight_bound: float | None = None,
        outer: str | None = None,
        max_weight: float | None = None,
    ) -> Estimate:
        """A copy whose ``ci_low``/``ci_high`` come from :meth:`ci` with these arguments.

        ``ci`` is the interval method (``method`` of :meth:`ci`, one of :data:`CI_METHODS`).
        ``max_weight`` is the deprecated spelling of ``weight_bound``, as in :meth:`ci`.

        A bootstrap interval is reproducible: the copy's :attr:`provenance` records the seed of
        the resamples (``rng`` when an int; drawn and recorded when ``rng=None``; None when a
        Generator is given) as ``seed``, and the interval's settings as options
        (``ci_method``, ``confidence_level``, ``n_resamples``, ``bootstrap_method``), keeping
        any other option recorded before.

        Examples
        --------
        >>> import numpy as np
        >>> import ope.estimators as oe
        >>> res = oe.IPS().estimate(reward=np.array([1.0, 0.0, 1.0, 1.0]),
        ...                         logging_propensity=np.full(4, 0.5),
        ...                         target_propensity=np.array([1.0, 0.0, 0.5, 1.0]))
        >>> res.with_ci(0.9, "t").ci_method
        't'
        >>> boot = res.with_ci(0.9, "bootstrap", n_resamples=500)   # rng=None: a seed is drawn
        >>> again = res.with_ci(0.9, "bootstrap", n_resamples=500, rng=boot.provenance.seed)
        >>> (again.ci_low, again.ci_high) == (boot.ci_low, boot.ci_high)
        True
        """
        method = check_choice(ci, "ci", CI_METHODS)
        provenance = self._provenance
        if method == "bootstrap":
            seed, rng = resolve_seed(rng)
            provenance = (provenance or Provenance()).with_options(
                ci_method=method,
                confidence_level=float(confidence_level),
                n_resamples=(
                    default_n_resamples(float(confidence_level))
                    if n_resamples is None
                    else n_resamples
                ),
                bootstrap_method="percentile" if bootstrap_method is None else bootstrap_method,
            )
            provenance = dataclasses.replace(provenance, seed=seed)
        interval = self.ci(
            confidence_level,
            method,
            n_resamples=n_resamples,
            bootstrap_method=bootstrap_method,
            rng=rng,
            weight_bound=weight_bound,
            max_weight=max_weight,  # ci warns of the deprecated spelling and names it
            outer=outer,
        )
        return dataclasses.replace(
            self,
            ci_low=float(interval.low),
            ci_high=float(interval.high),
            confidence_level=float(confidence_level),
            ci_method=method,
            target=self.target_of(method),
            _provenance=provenance,
        )

    def target_of(self, ci: str) -> str:
        """What ``ci(method=ci)`` covers: ``"policy value"`` or ``"clipped value"``.

        Examples
        --------
        >>> import numpy as np
        >>> import ope.estimators as oe
        >>> res = oe.ClippedIPS(max_weight=2.0).estimate(
        ...     reward=np.array([1.0, 1.0, 0.0]), logging_propensity=np.array([0.25, 0.5, 0.1]),
        ...     target_propensity=np.array([1.0, 0.5, 1.0]))
        >>> res.target, res.target_of("bernstein"), res.target_of("bottou")
        ('clipped value', 'clipped value', 'policy value')
        """
        method = check_choice(ci, "ci", CI_METHODS)
        src = self._source
        known = None if src is None else src.target_of(method)
        return self.target if known is None else known

    @property
    def source(self) -> Source | None:
        """What the estimate's intervals are computed from: its rows (a :class:`RowSource`) or
        merged statistics (a :class:`Source` without rows); None when built without data."""
        return self._source

    def with_source(self, source: Source) -> Estimate:
        """The same estimate backed by another description of the same data (e.g. streamed
        statistics given their rows back, ``ope.MomentStats.with_rows``)."""
        if not isinstance(source, Source):
            raise ParameterError(
                "`source` must describe the estimate's data (an ope.results.Source, such as "
                f"another estimate's .source); got {type(source).__name__}."
            )
        # a copy with one field changed (dataclasses.replace re-runs __init__ on every field:
        # the streamed statistics give every estimate of an evaluation its rows back)
        estimate = copy.copy(self)
        object.__setattr__(estimate, "_source", source)
        return estimate

    def influence(self) -> np.ndarray:
        """Per-row influence (linearized) terms ``psi_i``; ``std_error = sd(psi) / sqrt(n)``.

        Raises
        ------
        ope.EstimationError
            The estimate was computed from summary statistics, not rows.
        """
        src = self._source
        if not isinstance(src, RowSource):
            hint = src.rows_hint if src is not None else "it was built without data"
            raise EstimationError(f"per-row influence terms need the rows; {hint}.")
        return src.influence()

    # ---------------------------------------------------------------- rendering
    def to_dict(self) -> dict[str, Any]:
        """Plain dict with the stable field names (JSON-serializable).

        Examples
        --------
        >>> from ope.results import Estimate
        >>> Estimate("ips", 0.5, 0.1, 0.3, 0.7, n=10, ess=8.0).to_dict()["value"]
        0.5
        """
        return {
            "estimator": self.estimator,
            "policy": self.policy,
            "value": float(self.value),
            "std_error": float(self.std_error),
            "ci_low": float(self.ci_low),
            "ci_high": float(self.ci_high),
            "confidence_level": float(self.confidence_level),
            "ci_method": self.ci_method,
            "n": int(self.n),
            "ess": float(self.ess),
            "target": self.target,
            "notes": list(self.notes),
        }

    def __repr__(self) -> str:
        who = f"{self.estimator!r}" + (f", policy={self.policy!r}" if self.policy else "")
        notes = f", notes={len(self.notes)}" if self.notes else ""
        return (
            f"Estimate({who}, value={format_value(self.value)}, "
            f"std_error={format_value(self.std_error)}, "
            f"ci=[{format_value(self.ci_low)}, {format_value(self.ci_high)}] "
            f"({self.ci_method}, {self.confidence_level:.0%}), n={self.n}, "
            f"ess={format_value(self.ess)}{notes})"
        )

    def _parts(self) -> ResultParts:
        # the value, its error and its interval at one precision: 2 digits of the error
        numbers_ = [self.value, self.std_error, self.ci_low, self.ci_high]
        finite = [abs(v) for v in numbers_ if math.isfinite(v)]
        decimals = se_decimals([self.std_error], scale=max(finite) if finite else None)
        value, std_error, _, _ = format_column(numbers_, decimals=decimals)
        ci = format_interval(self.ci_low, self.ci_high, decimals=decimals)
        return ResultParts(
            title=f"Estimate ({self.estimator})",
            fields=(
                ("estimator", self.estimator),
                ("policy", self.policy or ""),
                ("value", value),
                ("std_error", std_error),
                (f"{self.confidence_level:.0%} CI ({self.ci_method})", ci),
                ("covers", self.target),
                ("n", self.n),
                ("ess", self.ess),
            ),
            notes=self.notes,
        )


def make_estimate(
    *,
    estimator: str,
    value: float,
    std_error: float,
    n: int,
    ess: float,
    notes: tuple[str, ...] = (),
    policy: str | None = None,
    source: Source | None = None,
    target: str | None = None,
    provenance: Provenance | None = None,
) -> Estimate:
    """Build an Estimate carrying the default (normal, 0.95) interval (and ``provenance``, what
    produced it, when the caller records one).

    The interval is intersected with ``source.value_range`` and is NaN when the source is
    model-conditional (DM). ``target`` (one of :data:`TARGETS`) defaults to the source's target
    for the normal interval (the policy value without a source).

    Examples
    --------
    >>> from ope.results import make_estimate
    >>> make_estimate(estimator="is", value=0.4, std_error=0.1, n=100, ess=50.0,
    ...               target="clipped value").target
    'clipped value'
    """
    if target is not None and target not in TARGETS:
        raise ParameterError(f"`target` must be one of {', '.join(TARGETS)}; got {target!r}.")
    if (
        math.isfinite(value)
        and math.isfinite(std_error)
        and not (source is not None and source.model_conditional)
    ):
        low, high = _in_range(
            normal_interval(value, std_error, confidence_level=DEFAULT_CONFIDENCE_LEVEL), source
        )
    else:
        low = high = float("nan")
    return Estimate(
        estimator=estimator,
        value=float(value),
        std_error=float(std_error),
        ci_low=float(low),
        ci_high=float(high),
        n=int(n),
        ess=float(ess),
        notes=tuple(notes),
        policy=policy,
        target=(
            target
            if target is not None
            else (None if source is None else source.target_of(DEFAULT_CI_METHOD)) or TARGETS[0]
        ),
        _source=source,
        _provenance=provenance,
    )


def _in_range(iv: ConfidenceInterval, source: Source | None) -> ConfidenceInterval:
    """``iv`` intersected with the range the estimand lies in (``source.value_range``): an
    interval entirely outside it (an event of probability at most 1 - level when the interval
    is valid) becomes the nearer end point (:func:`ope.intervals._types.within_range`)."""
    return within_range(iv, None if source is None else source.value_range)


def comparison_row(
    policy: str, estimator: str, difference: float, std_error: float, low: float, high: float
) -> dict[str, Any]:
    """One row of a table of paired differences with the logging policy (``comparisons()`` of
    :class:`ope.Evaluation` and of trajectory evaluations): the difference, its standard error
    and interval, and whether the interval lies above or below 0."""
    return {
        "policy": policy,
        "estimator": estimator,
        "difference": difference,
        "std_error": std_error,
        "ci_low": low,
        "ci_high": high,
        "better_than_logging": bool(low > 0),
        "worse_than_logging": bool(high < 0),
    }


def estimate_rows(estimates: Mapping[tuple[str, str], Estimate]) -> list[dict[str, Any]]:
    """The rows of a grid of ``{(policy, estimator): Estimate}`` with the columns of
    ``ope.Evaluation.table`` (the ``table()`` of trajectory and slate evaluations)."""
    return [
        {
            "policy": p,
            "estimator": e,
            "value": est.value,
            "std_error": est.std_error,
            "ci_low": est.ci_low,
            "ci_high": est.ci_high,
            "confidence_level": est.confidence_level,
            "ci_method": est.ci_method,
            "target": est.target,
            "n": est.n,
            "ess": est.ess,
            "ess_ratio": est.ess / est.n if est.n else math.nan,
            "notes": "; ".join(est.notes),
        }
        for (p, e), est in estimates.items()
    ]


def estimate_summary(est: Estimate) -> dict[str, Any]:
    """An estimate's value, standard error, interval, its method and ``n``, JSON-ready (the
    logging policy's entry of an evaluation's ``to_dict``)."""
    return {
        "value": est.value,
        "std_error": est.std_error,
        "ci_low": est.ci_low,
        "ci_high": est.ci_high,
        "ci_method": est.ci_method,
        "n": est.n,
    }


def logging_comparison_rows(
    evaluation: Any, cells: Any, *, ci: str, confidence_level: float
) -> list[dict[str, Any]]:
    """:func:`comparison_row` of each ``(policy, estimator)`` of ``cells`` against the logging
    policy, from ``evaluation.compare(policy, "logging", estimator=..., ci=...)`` (the
    ``comparisons()`` of trajectory and slate evaluations)."""
    rows = []
    for p, e in cells:  # a loop over candidates and estimators
        d = evaluation.compare(p, "logging", estimator=e, ci=ci)
        iv = d.ci(confidence_level, ci)
        rows.append(comparison_row(p, e, d.value, d.std_error, float(iv.low), float(iv.high)))
    return rows


def grouped_notes(
    estimates: Mapping[tuple[str, str], Estimate], *, exclude: Callable[[str], bool] | None = None
) -> list[str]:
    """Each note of a grid of ``{(policy, estimator): Estimate}`` once per candidate, with the
    estimators that gave it: ``"<policy> (<estimator>, ...): <note>"`` (but the notes for which
    ``exclude`` is true).

    Examples
    --------
    >>> from ope.results import grouped_notes, make_estimate
    >>> e = make_estimate(estimator="ips", value=1.0, std_error=0.1, n=10, ess=10.0,
    ...                   notes=("few rows",))
    >>> grouped_notes({("a", "ips"): e, ("a", "snips"): e})
    ['a (ips, snips): few rows']
    """
    grouped: dict[tuple[str, str], list[str]] = {}
    for (policy, estimator), est in estimates.items():
        for note in est.notes:
            if exclude is None or not exclude(note):
                grouped.setdefault((policy, note), []).append(estimator)
    return [f"{p} ({', '.join(es)}): {note}" for (p, note), es in grouped.items()]


def compare(
    a: Estimate,
    b: Estimate,
    *,
    confidence_level: float = DEFAULT_CONFIDENCE_LEVEL,
    ci: str = DEFAULT_CI_METHOD,
    n_resamples: int | None = None,
    bootstrap_method: str | None = None,
    rng: int | np.random.Generator | None = None,
) -> Estimate:
    """Paired comparison: an Estimate of ``a.value - b.value`` on the same logged rows.

    Parameters
    ----------
    a, b : Estimate
        Two estimates computed on the same rows (same reward array, same ``n``): e.g. two
        candidates, or a candidate and :func:`ope.estimators.logging_value`.
    confidence_level : float, default 0.95
        Nominal coverage of the interval stored on the result.
    ci : {"normal", "t", "bootstrap"}, default "normal"
        Interval method for the difference.
    n_resamples, bootstrap_method, rng
        Bootstrap options (see :meth:`Estimate.ci`).

    Returns
    -------
    Estimate
        ``estimator = "<a.estimator> - <b.estimator>"``; its ``ci(...)`` accepts normal, t and
        bootstrap (resampling rows jointly for both estimates).

    Raises
    ------
    ope.EstimationError
        Either estimate has no rows (e.g. built from streamed statistics), or the two were not
        computed on the same rows.

    Notes
    -----
    With per-row influence terms :math:`\\psi^a_i,\\psi^b_i`,

    .. math:: \\widehat{\\mathrm{se}}(\\hat V_a-\\hat V_b)
              = \\mathrm{sd}(\\psi^a-\\psi^b)/\\sqrt n
              = \\sqrt{(s_a^2+s_b^2-2 s_{ab})/n},

    smaller than the unpaired :math:`\\sqrt{(s_a^2+s_b^2)/n}` whenever the two estimates are
    positively correlated (they share the rows). The bootstrap draws one set of resample
    indices for both estimates.

    References
    ----------
    .. [1] M. Dudik, D. Erhan, J. Langford and L. Li, "Doubly robust policy evaluation and
       optimization", Statistical Science 29(4), 2014 (evaluation by influence terms).

    Examples
    --------
    >>> import numpy as np
    >>> import ope.estimators as oe
    >>> from ope.results import compare
    >>> rng = np.random.default_rng(0)
    >>> n = 2000
    >>> p = np.full(n, 0.5); r = rng.binomial(1, 0.5, size=n).astype(float)
    >>> a = oe.SNIPS().estimate(reward=r, logging_propensity=p, target_propensity=p)
    >>> b = oe.logging_value(r)
    >>> d = compare(a, b)        # on-policy SNIPS equals the logging value row by row
    >>> abs(d.value) < 1e-12, d.std_error < 1e-12
    (True, True)
    """
    ci = check_choice(ci, "ci", CI_METHODS)
    for name, est in (("a", a), ("b", b)):
        if not isinstance(est, Estimate):
            raise ParameterError(f"`{name}` must be an ope Estimate; got {type(est).__name__}.")
        if not isinstance(est._source, RowSource):
            hint = est._source.rows_hint if est._source is not None else "it has no data"
            raise EstimationError(
                f"paired comparison needs per-row data, but estimate `{name}` "
                f"({est.estimator!r}) has none: {hint}. Compute both estimates from arrays."
            )
    sa, sb = a._source, b._source
    assert isinstance(sa, RowSource) and isinstance(sb, RowSource)
    if sa.n != sb.n:
        raise EstimationError(
            f"paired comparison needs both estimates on the same rows; `a` has n={sa.n} and "
            f"`b` has n={sb.n}."
        )
    if sa.reward is not sb.reward and not np.array_equal(sa.reward, sb.reward):
        raise EstimationError(
            "paired comparison needs both estimates on the same rows, but their reward arrays "
            "differ. Estimate both candidates from the same logs (same row order)."
        )
    source = _PairedSource(sa, sb)
    psi = source.influence()
    n = source.n
    se = float(np.std(psi, ddof=1) / math.sqrt(n))
    value = float(a.value - b.value)
    notes = _paired_notes(a, b)
    beyond = _error_beyond_rows(a, sa) + _error_beyond_rows(b, sb)
    if beyond > 0.0:  # an error the rows do not carry (a bias bound): added in full
        se = math.hypot(se, beyond)
        source.methods = ()  # a resample of the rows misses it
    # a side without a policy (the logging value) is named by its estimator
    policy = (
        f"{a.policy or a.estimator} - {b.policy or b.estimator}" if a.policy or b.policy else None
    )
    diff = make_estimate(
        estimator=f"{a.estimator} - {b.estimator}",
        value=value,
        std_error=se,
        n=n,
        ess=float(min(a.ess, b.ess)),
        notes=notes,
        policy=policy,
        source=source,
    )
    if ci == DEFAULT_CI_METHOD and confidence_level == DEFAULT_CONFIDENCE_LEVEL:
        return diff
    return diff.with_ci(
        confidence_level,
        ci,
        n_resamples=n_resamples,
        bootstrap_method=bootstrap_method,
        rng=rng,
    )


def _error_beyond_rows(est: Estimate, src: RowSource) -> float:
    """The part of an estimate's standard error its rows' spread does not give (MAGIC's bias
    bound, a Monte Carlo error of approximate probabilities), 0 for a plain estimate."""
    rows = float(np.std(src.influence(), ddof=1) / math.sqrt(src.n)) if src.n > 1 else 0.0
    gap = est.std_error**2 - rows**2
    return math.sqrt(gap) if gap > 1e-6 * max(est.std_error**2, 1e-300) else 0.0


def _label(est: Estimate) -> str:
    return f"{est.estimator} ({est.policy})" if est.policy else est.estimator


def _paired_notes(a: Estimate, b: Estimate) -> tuple[str, ...]:
    """The notes of a paired difference: each note of ``a`` and ``b`` once, saying which of
    the two it concerns (``"ips (greedy) and logging: ..."`` when both carry it)."""
    la, lb = _label(a), _label(b)
    if la == lb:
        la, lb = "a", "b"
    keys_b = {note_key(x) for x in b.notes}
    keys_a = {note_key(x) for x in a.notes}
    out: list[str] = []
    for who, notes, other in ((la, a.notes, keys_b), (lb, b.notes, keys_a)):
        for x in unique_notes(notes):
            if who == lb and note_key(x) in keys_a:
                continue  # stated with a's
            prefix = f"{la} and {lb}" if note_key(x) in other else who
            out.append(
                Note(
                    f"{prefix}: {x}",
                    rule=getattr(x, "rule", None),
                    subject=getattr(x, "subject", None),
                )
                if getattr(x, "rule", None) is not None
                else f"{prefix}: {x}"
            )
    return tuple(out)
