""":class:`Evaluation`: the estimates of P candidates x the estimators on one set of logs, their
intervals, the logging policy's value, paired comparisons, segments, text, JSON and the report.
"""

from __future__ import annotations

import copy

import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Final

import pandas as pd

from ope._validation import (
    check_choice,
    check_name,
)
from ope._format import format_estimate, format_setting, number_notes
from ope._thresholds import MAX_FIGURE_CANDIDATES, MAX_REPORT_SEGMENTS, shown_notes
from ope.exceptions import (
    EstimationError,
    MissingBoundsError,
    ParameterError,
)
from ope.intervals.asymptotic import normal_interval, t_interval
from ope.logs import ValidationReport
from ope._result import ESTIMATE_TABLE_COLUMNS
from ope.results import (
    CI_METHODS,
    Estimate,
    Provenance,
    Result,
    ResultParts,
    compare,
    comparison_row,
    render_text,
)
from ope.weights import (
    sampling_weight_note,
)
from ope.evaluation._settings import (
    LOGGING_CI_FALLBACK,
    logging_bound_message,
    WEIGHT_BOUND_ESTIMATORS,
    WEIGHT_BOUND_METHODS,
    CI_FALLBACKS,
    STREAMING_ESTIMATORS,
    EvaluationSettings,
)

__all__ = [
    "TABLE_COLUMNS",
    "SEGMENT_TABLE_COLUMNS",
    "Evaluation",
]


#: Columns of :meth:`Evaluation.table`, in order (docs/design.md).
TABLE_COLUMNS: Final = ESTIMATE_TABLE_COLUMNS


#: Columns of :meth:`Evaluation.table` with ``by=``: the segment column and its label (spelled
#: as in :meth:`ope.Diagnostics.segments`) after the policy and estimator.
SEGMENT_TABLE_COLUMNS: Final = (*TABLE_COLUMNS[:2], "column", "segment", *TABLE_COLUMNS[2:])
#: Columns of the segment table that :meth:`Evaluation.segment_summary` does not show.
_SEGMENT_SUMMARY_LEFT_OUT: Final = ("confidence_level", "ci_method", "target", "ess", "notes")


@dataclass(frozen=True, eq=False)
class Evaluation(Result):
    """The result of :func:`evaluate`: one Estimate per candidate policy × estimator.

    Attributes
    ----------
    estimates : dict of (policy, estimator) to Estimate
    logging : Estimate
        The logging policy's value (its mean logged reward) on the same rows.
    policies, estimators : list of str
        Row and column labels, in the order asked for.
    report : ValidationReport
        How the logs were read: rows read, used and rejected by reason.
    confidence_level : float
    ci_method : str
    notes : tuple of str
        Warnings about the evaluation as a whole (weak overlap, dropped rows, ...).
    streaming : bool
        True when computed batch by batch from mergeable statistics.
    ci_options : dict
        Options of the interval method (bootstrap: ``n_resamples``, ``rng``).
    weight_bound : float or None
        A priori bound on the importance weights used by the bounded intervals of IPS/SNIPS.
    propensity_source : str
        ``"logged"``, or ``"estimated"`` when ``ope.estimate_propensities`` made them.
    model_columns : dict or None
        The features of the reward model of DM/DR: ``{"context": [...], "action_features":
        [...]}`` (the log columns, and the columns of the action-feature table joined on the
        action); ``None`` when no estimator used a reward model.
    statistics : ope.streaming.MomentStats or None
        The statistics of the one pass that gave IPS, clipped IPS, SNIPS and the logging value
        (weights, weighted rewards and their cross-moments with the reward, per policy): the
        paired comparisons with the logging policy read their standard errors from them, and
        ``ope.diagnose(logs, statistics=ev.statistics)`` reuses them instead of a second pass.
    by : tuple of str
        The segment columns of ``evaluate(..., by=[...])`` (empty without segments).
    segment_estimates : dict of (column, segment, policy, estimator) to Estimate
        Every estimate on each segment's rows alone (read them with ``table(by="segment")``).
    ci_fallback : str or None
        ``"normal"`` or ``"t"``: the interval of an estimate that ``ci_method`` does not apply
        to (its table row's ``ci_method`` says so, and a note names the estimator); None makes
        such an estimate an error.
    interval_values : dict, optional
        Intervals computed beforehand (``(policy, estimator)`` and ``"logging"`` to
        ``(low, high)``): ``evaluate(..., ci="bootstrap")`` computes every one from one shared
        set of resamples (:func:`ope.intervals.bootstrap.shared_bootstrap`); the others are
        computed at construction by each estimate's ``ci``.
    selection : ope.evaluation.auto.EstimatorChoice or None
        With ``estimators="auto"``: the estimator chosen per candidate by off-policy
        cross-validation, its scores and the reason (None otherwise).
    settings : dict of str to dict
        The settings given per candidate (``max_weight``, ``tau`` or ``shrinkage`` -> policy ->
        value): given as a mapping or a :class:`ope.evaluation.SettingChoice`, or tuned from
        a rule's name (``max_weight="slope"``); empty when each is one number. With the
        embedding per candidate, ``"embedding"`` -> policy -> its dimensions (a tuple of
        names: given as a mapping or an :class:`ope.evaluation.EmbeddingChoice`, or chosen
        by ``ActionEmbedding(select=...)``).
    tuning : tuple of SettingChoice and EmbeddingChoice
        The choices behind ``settings`` (rule, grid or subsets visited, each one's estimate),
        when they came from :func:`ope.tune_setting`, :func:`ope.tune_embedding` or a rule.
    embedding_checks : tuple of ope.marginal.SufficiencyTest
        With marginalized estimators (``mips``, ``snmips``, ``mdr``): per candidate, the
        difference IPS minus MIPS on the same rows with its standard error and p-value (a
        direct effect of the item beyond its embedding biases MIPS) and the Kish ESS of the
        per-item and of the marginal weights (:func:`ope.marginal.embedding_sufficiency`).
    """

    estimates: dict[tuple[str, str], Estimate]
    logging: Estimate
    policies: list[str]
    estimators: list[str]
    report: ValidationReport
    confidence_level: float
    ci_method: str
    notes: tuple[str, ...] = ()
    streaming: bool = False
    ci_options: dict[str, Any] = field(default_factory=dict)
    weight_bound: float | None = None
    #: "logged", or "estimated" when ope.estimate_propensities made the propensities
    propensity_source: str = "logged"
    model_columns: dict[str, list[str]] | None = None
    #: the moment statistics of the pass (``ope.streaming.MomentStats``) that gave IPS, clipped
    #: IPS, SNIPS and the logging value: paired comparisons with the logging policy and
    #: ``ope.diagnose(..., statistics=...)`` read them instead of another pass (None when no
    #: such estimator was asked for)
    statistics: Any = field(default=None, repr=False, compare=False)
    by: tuple[str, ...] = ()
    segment_estimates: dict[tuple[str, str, str, str], Estimate] = field(
        default_factory=dict, repr=False, compare=False
    )
    interval_values: dict[Any, tuple[float, float]] | None = field(
        default=None, repr=False, compare=False
    )
    #: interval method of the estimates ``ci_method`` does not apply to (None: such an
    #: estimate is an error); their rows say so in ``ci_method``
    ci_fallback: str | None = None
    #: the column of the sampling (Horvitz-Thompson) weights every estimate is weighted by
    #: (None: unweighted rows, or every weight 1)
    weight_column: str | None = None
    #: per candidate, the test of the embedding of the marginalized estimators (empty without)
    embedding_checks: tuple[Any, ...] = ()
    #: the cross-validated choice of estimator per candidate (``estimators="auto"``): an
    #: :class:`ope.evaluation.auto.EstimatorChoice`, or None
    selection: Any = field(default=None, compare=False)
    #: settings given per candidate policy (``max_weight``, ``tau``, ``shrinkage`` -> policy ->
    #: value: :func:`ope.evaluation.tuning.evaluate_with_settings`, or tuned by
    #: ``estimators="auto"``); empty when each setting is one number for every candidate
    settings: dict[str, dict[str, Any]] = field(default_factory=dict, compare=False)
    #: the SettingChoice behind each setting per candidate (tuned from a rule's name, or given)
    tuning: tuple[Any, ...] = field(default=(), compare=False)
    #: what produced the evaluation (a field, so that dataclasses.replace keeps it)
    _provenance: Provenance | None = field(default=None, repr=False, compare=False)
    # filled by __post_init__: (policy, estimator) -> (ci_low, ci_high), and the logging value's
    _intervals: dict[tuple[str, str], tuple[float, float]] = field(
        init=False, repr=False, compare=False
    )
    _logging_ci: tuple[float, float] = field(init=False, repr=False, compare=False)
    _segment_intervals: dict[tuple[str, str, str, str], tuple[float, float]] = field(
        init=False, repr=False, compare=False
    )

    @classmethod
    def from_statistics(
        cls,
        stats: Any,
        resolved: Sequence[tuple[str, Any]],
        settings: EvaluationSettings,
        *,
        report: ValidationReport,
        notes: Iterable[str] = (),
        propensity_source: str = "logged",
    ) -> Evaluation:
        """The evaluation of merged statistics (``ope.streaming.MomentStats``) of many batches.

        Parameters
        ----------
        stats : ope.streaming.MomentStats or ope.evaluation.EmbeddingStatistics
            Merged over every batch (scan) or partition (Dask), with the policy names; with
            the embeddings' statistics too when ``resolved`` has MIPS or SNMIPS.
        resolved : sequence of (str, estimator)
            :func:`resolve_estimators` of IPS, clipped IPS and SNIPS (and MIPS, SNMIPS with
            embedding statistics) only.
        settings : EvaluationSettings
        report : ValidationReport
            The merged report of the pass.
        notes : iterable of str
            Evaluation-level notes besides the rejected-rows note.
        propensity_source : {"logged", "estimated"}, default "logged"
            Where the propensities come from (:func:`ope.propensity.propensity_source` of the
            scan); estimated ones also need :func:`ope.propensity.estimated_propensity_note`
            among ``notes``.
        """
        from ope.estimators import IPS, SNIPS

        rr, level = settings.reward_range, settings.confidence_level
        marginal = getattr(stats, "marginal", None)  # EmbeddingStatistics: MIPS, SNMIPS too
        if marginal is not None:
            stats = stats.items
        unweighted = stats.weighted is None or stats.weighted.unit
        weighted = (
            []
            if unweighted
            else [sampling_weight_note(stats.weight_name, stats.weighted.sum_weights(), stats.n)]
        )
        estimates: dict[tuple[str, str], Estimate] = {}
        for key, est in resolved:  # loop over estimators
            if getattr(est, "marginal", False):
                if marginal is None:
                    raise EstimationError(
                        f"{key} needs the statistics of the embedding propensities: build the "
                        "plan with embedding=ope.ActionEmbedding(...)."
                    )
                # IPS or SNIPS on the embedding propensities, named as the marginalized one
                base = IPS() if est.moment_kind == "ips" else SNIPS()
                found = marginal.estimates(base, reward_range=rr, confidence_level=level)
                found = [dataclasses.replace(res, estimator=key) for res in found]
            else:
                found = stats.estimates(est, reward_range=rr, confidence_level=level)
            for name, res in zip(stats.names, found):
                estimates[(name, key)] = res
        return cls(
            estimates=estimates,
            logging=stats.logging_estimate(reward_range=rr, confidence_level=level),
            policies=list(stats.names),
            estimators=[k for k, _ in resolved],
            report=report,
            confidence_level=level,
            ci_method=settings.ci,
            notes=(*report.dropped_notes(), *weighted, *notes),
            streaming=True,
            ci_options=settings.ci_options,
            weight_bound=settings.weight_bound,
            statistics=stats,
            ci_fallback=settings.ci_fallback,
            weight_column=None if unweighted else stats.weight_name,
            propensity_source=propensity_source,
        )

    def __getitem__(self, key: tuple[str, str]) -> Estimate:
        try:
            return self.estimates[key]
        except KeyError:
            raise KeyError(
                f"no estimate for {key!r}; policies: {self.policies}, estimators: {self.estimators}"
            ) from None

    def with_note(self, note: str) -> Evaluation:
        """A copy with ``note`` (text, not blank) added to :attr:`notes`: a shallow copy, the
        estimates and their intervals shared, not computed again.

        Examples
        --------
        >>> import ope, warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     ev = ope.evaluate(ope.load_sample().path, estimators=("ips",))
        >>> ev.with_note("rows of 2026-11-30 only").notes[-1]
        'rows of 2026-11-30 only'
        """
        note = check_name(note, "note", what="a note (text)", example='"rows of one day only"')
        out = copy.copy(self)
        object.__setattr__(out, "notes", (*self.notes, note))
        return out

    def __post_init__(self) -> None:
        object.__setattr__(self, "by", tuple(self.by))
        fell_back = self.fallback_estimators
        fallback_notes = (
            []
            if not fell_back
            else [
                f"ci={self.ci_method!r} does not apply to {', '.join(fell_back)}: "
                + (
                    f"its interval is {self.ci_fallback}"
                    if len(fell_back) == 1
                    else f"their intervals are {self.ci_fallback}"
                )
            ]
        )
        notes = tuple(self.notes)
        object.__setattr__(self, "notes", (*notes, *(n for n in fallback_notes if n not in notes)))
        # every interval once, at construction: a method that does not apply fails here, and
        # table(), summary(), to_dict() reuse them (a bootstrap is not redrawn on each call)
        given = self.interval_values or {}
        intervals = {
            key: given[key] if key in given else self._compute_interval(est)
            for key, est in self.estimates.items()
        }
        object.__setattr__(self, "_intervals", intervals)
        logging_ci = given["logging"] if "logging" in given else self._compute_logging_interval()
        object.__setattr__(self, "_logging_ci", logging_ci)
        segment_intervals = {
            key: self._compute_interval(est) for key, est in self.segment_estimates.items()
        }
        object.__setattr__(self, "_segment_intervals", segment_intervals)

    @property
    def fallback_estimators(self) -> list[str]:
        """The estimators whose intervals are ``ci_fallback`` (``ci_method`` does not apply
        to them), in the order of :attr:`estimators`; empty without a fallback."""
        if self.ci_fallback is None:
            return []
        return [
            e
            for e in self.estimators
            if any(
                self._method_of(est) != self.ci_method
                for (_, key), est in self.estimates.items()
                if key == e
            )
        ]

    @property
    def n(self) -> int:
        """Rows used (those of the logging policy's value; every estimate uses the same)."""
        return int(self.logging.n)

    def _logging_interval(self) -> tuple[float, float]:
        return self._logging_ci

    def _method_of(self, est: Estimate) -> str:
        """The interval method of ``est``: ``ci_method``, or ``ci_fallback`` when the method
        does not apply to it (``Estimate.ci``'s own test: normal, t or its source's methods)."""
        if self.ci_fallback is None or self.ci_method in CI_FALLBACKS:
            return self.ci_method
        source = est.source
        return (
            self.ci_method
            if source is not None and self.ci_method in source.methods
            else (self.ci_fallback)
        )

    def _compute_interval(self, est: Estimate) -> tuple[float, float]:
        method = self._method_of(est)
        if method != self.ci_method:
            ci = est.ci(self.confidence_level, method)
            return float(ci.low), float(ci.high)
        options = dict(self.ci_options)
        if (
            self.weight_bound is not None
            and est.estimator in WEIGHT_BOUND_ESTIMATORS
            and self.ci_method in WEIGHT_BOUND_METHODS
        ):
            options["weight_bound"] = self.weight_bound
        ci = est.ci(self.confidence_level, self.ci_method, **options)
        return float(ci.low), float(ci.high)

    @property
    def logging_ci_method(self) -> str:
        """The interval method used for the logging policy's value.

        The logging value is a plain mean: it takes the evaluation's method when that applies
        and otherwise its closest counterpart (:data:`LOGGING_CI_FALLBACK`).
        """
        return LOGGING_CI_FALLBACK.get(self.ci_method, self.ci_method)

    def _compute_logging_interval(self) -> tuple[float, float]:
        method = self.logging_ci_method
        options = self.ci_options if method == self.ci_method else {}
        try:
            ci = self.logging.ci(self.confidence_level, method, **options)
        except MissingBoundsError:
            if method == self.ci_method:
                raise
            # the counterpart stands in for the method asked for, which the message names
            raise MissingBoundsError(logging_bound_message(self.ci_method)) from None
        return float(ci.low), float(ci.high)

    def table(self, by: str | None = None) -> pd.DataFrame:
        """One row per policy × estimator with the columns :data:`TABLE_COLUMNS`.

        ``by="segment"`` gives instead one row per policy × estimator × segment of every column
        of ``evaluate(..., by=[...])`` (``by=<column>``: that column's segments only), with the
        columns :data:`SEGMENT_TABLE_COLUMNS`: each estimate and interval on the segment's rows
        alone. Without segments the frame is empty.

        Raises
        ------
        ope.ParameterError
            ``by`` names a column the evaluation was not segmented by.
        """
        if by is None:
            rows = [
                self._row(p, e, self.estimates[(p, e)], self._intervals[(p, e)])
                for p in self.policies
                for e in self.estimators
            ]
            return pd.DataFrame(rows, columns=list(TABLE_COLUMNS))
        if not isinstance(by, str) or (by != "segment" and by not in self.by):
            raise ParameterError(
                f"table(by={by!r}): the evaluation was segmented by "
                f"{', '.join(self.by) if self.by else 'no column'}; pass by='segment' (every "
                "segment column) or one of them (evaluate(..., by=[...]) computes segments)."
            )
        rows = [
            {"column": col, "segment": seg, **self._row(p, e, est, self._segment_intervals[key])}
            for key, est in self.segment_estimates.items()
            for col, seg, p, e in (key,)
            if by == "segment" or col == by
        ]
        return pd.DataFrame(rows, columns=list(SEGMENT_TABLE_COLUMNS))

    def _row(
        self, policy: str, estimator: str, est: Estimate, interval: tuple[float, float]
    ) -> dict[str, Any]:
        low, high = interval
        return {
            "policy": policy,
            "estimator": estimator,
            "value": est.value,
            "std_error": est.std_error,
            "ci_low": low,
            "ci_high": high,
            "confidence_level": self.confidence_level,
            "ci_method": self._method_of(est),
            # what [ci_low, ci_high] covers: the policy's value or a clipped value
            "target": est.target_of(self._method_of(est)),
            "n": est.n,
            "ess": est.ess,
            "ess_ratio": est.ess / est.n if est.n else float("nan"),
            "notes": "; ".join(self._notes_of(est)),
        }

    def _notes_of(self, est: Estimate) -> tuple[str, ...]:
        """The notes shown beside ``est``'s interval (:func:`ope._thresholds.shown_notes`: the
        skewed-terms note only beside a normal, t or bootstrap interval)."""
        return shown_notes(est.notes, self._method_of(est))

    def all_notes(self) -> tuple[str, ...]:
        """The evaluation's notes, then each estimate note once with the estimators it concerns
        (the same weight diagnostics recur under every weighting estimator)."""
        grouped: dict[tuple[str, str], list[str]] = {}
        for (p, e), est in self.estimates.items():
            for note in self._notes_of(est):
                grouped.setdefault((p, note), []).append(e)
        return (
            *self.notes,
            *(f"{p} ({', '.join(es)}): {note}" for (p, note), es in grouped.items()),
        )

    def compare(
        self,
        policy: str,
        baseline: str = "logging",
        *,
        estimator: str | None = None,
        ci: str = "normal",
    ) -> Estimate:
        """Paired difference ``policy − baseline`` on the same rows, with its interval.

        ``baseline="logging"`` compares with the logging policy's on-policy mean reward;
        ``ci`` is the interval method, as in :func:`ope.results.compare`.
        """
        if self.streaming:
            raise EstimationError(
                "paired comparisons need the rows; evaluate eagerly (read_logs) to compare."
            )
        policy = check_choice(policy, "policy", self.policies)
        baseline = check_choice(baseline, "baseline", ["logging", *self.policies])
        estimator = (
            self.estimators[0]
            if estimator is None
            else check_choice(estimator, "estimator", self.estimators)
        )
        a = self[(policy, estimator)]
        b = self.logging if baseline == "logging" else self[(baseline, estimator)]
        return compare(a, b, confidence_level=self.confidence_level, ci=ci)

    def comparisons(self, *, ci: str = "normal") -> pd.DataFrame:
        """Every candidate against the logging policy, per estimator (paired on the same rows).

        For IPS, clipped IPS and SNIPS with ``normal`` or ``t`` intervals the paired standard
        errors come from the cross-moments of the evaluation's one pass
        (:meth:`ope.streaming.MomentStats.paired_with_logging`: no per-row terms are formed);
        the other estimators and the bootstrap pair the rows (:func:`ope.results.compare`).
        """
        if self.streaming:
            raise EstimationError(
                "paired comparisons need the rows; evaluate eagerly (read_logs) to compare."
            )
        method = check_choice(ci, "ci", CI_METHODS)
        from_moments = self._paired_from_moments(method)
        rows = []
        for p in self.policies:
            for e in self.estimators:
                if (p, e) in from_moments:
                    value, se = from_moments[(p, e)]
                    n = self.logging.n
                    asymptotic = (
                        normal_interval(value, se, confidence_level=self.confidence_level)
                        if method == "normal"
                        else t_interval(value, se, n, confidence_level=self.confidence_level)
                    )
                    low, high = float(asymptotic.low), float(asymptotic.high)
                else:
                    d = self.compare(p, "logging", estimator=e, ci=method)
                    paired = d.ci(self.confidence_level, method)
                    value, se = d.value, d.std_error
                    low, high = float(paired.low), float(paired.high)
                rows.append(comparison_row(p, e, value, se, low, high))
        return pd.DataFrame(rows)

    def plot(self, ax: Any = None, *, truth: Any = None) -> Any:
        """Forest plot: every candidate x estimator with its interval beside the logging
        policy's value (and the exact values when ``truth`` is given). See
        :func:`ope.plots.plot_evaluation`; needs matplotlib (``pip install
        'ope-toolkit[plot]'``). Returns the matplotlib Axes."""
        from ope.plots import plot_evaluation

        return plot_evaluation(self, ax, truth=truth)

    def write_report(
        self,
        path: Any,
        *,
        diagnostics: Any = None,
        certificate: Any = None,
        truth: Any = None,
        provenance: Mapping[str, Any] | None = None,
        title: str | None = None,
        overwrite: bool = False,
        max_candidates: int | None = MAX_FIGURE_CANDIDATES,
        max_segments: int | None = MAX_REPORT_SEGMENTS,
    ) -> Any:
        """Write the self-contained HTML report of this evaluation (with ``diagnostics`` from
        ope.diagnose for the weights, gaps and plan) to ``path``; returns the path. See
        :func:`ope.report.write_report`. (Named ``write_report``, not ``report``: the
        ``report`` attribute is the logs' :class:`~ope.logs.ValidationReport`.)"""
        from ope.report import write_report

        if provenance is None and self.provenance is not None:
            provenance = self.provenance.to_dict()
        return write_report(
            path,
            evaluation=self,
            diagnostics=diagnostics,
            certificate=certificate,
            truth=truth,
            provenance=provenance,
            title=title,
            overwrite=overwrite,
            max_candidates=max_candidates,
            max_segments=max_segments,
        )

    def _estimator_of(self, key: str) -> Any:
        """The estimator object behind the estimates of ``key`` (the name when none keeps it)."""
        from ope.estimators import EstimatorRows

        return next(
            (
                est.source.estimator
                for (_, k), est in self.estimates.items()
                if k == key and isinstance(est.source, EstimatorRows)
            ),
            key,
        )

    def _paired_from_moments(self, method: str) -> dict[tuple[str, str], tuple[float, float]]:
        """(policy, estimator) -> (difference, paired standard error) from the statistics."""
        stats = self.statistics
        if stats is None or method not in ("normal", "t") or stats.names is None:
            return {}
        if stats.n != self.logging.n:
            return {}
        out: dict[tuple[str, str], tuple[float, float]] = {}
        reward_range = getattr(self.logging.source, "reward_range", None)
        for key in self.estimators:  # loop over estimators
            if key not in STREAMING_ESTIMATORS:
                continue
            estimator = self._estimator_of(key)
            if getattr(estimator, "max_weight", None) is not None and (
                "max_weight" in self.settings
                or getattr(estimator, "max_weight", None) != stats.max_weight
            ):
                continue  # a clip level per candidate (Evaluation.settings): the rows pair it
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the estimates already carry these notes
                # the estimator object of the estimates (with its setting inside)
                pairs = stats.paired_with_logging(estimator, reward_range=reward_range)
            for name, pair in zip(stats.names, pairs):
                if (name, key) in self.estimates:
                    out[(name, key)] = pair
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict with stable keys."""
        low, high = self._logging_interval()
        out: dict[str, Any] = {
            "confidence_level": self.confidence_level,
            "ci_method": self.ci_method,
            "streaming": self.streaming,
            "propensity_source": self.propensity_source,
            "weight_column": self.weight_column,
            "validation": self.report.to_dict(),
            "logging_policy": {
                "value": self.logging.value,
                "std_error": self.logging.std_error,
                "ci_low": low,
                "ci_high": high,
                "ci_method": self.logging_ci_method,
                "n": self.logging.n,
            },
            "estimates": self.table().to_dict(orient="records"),
            "notes": list(self.notes),
            "model_columns": (
                None
                if self.model_columns is None
                else {k: list(v) for k, v in self.model_columns.items()}
            ),
        }
        if not self.streaming:
            out["comparisons_with_logging"] = self.comparisons().to_dict(orient="records")
        out["by"] = list(self.by)
        out["segments"] = self.table(by="segment").to_dict(orient="records")
        if self.embedding_checks:
            out["embedding_checks"] = [c.to_dict() for c in self.embedding_checks]
        if self.selection is not None:
            out["estimator_selection"] = self.selection.to_dict()
        if self.settings:
            out["settings_per_policy"] = {k: dict(v) for k, v in self.settings.items()}
        if self.tuning:
            out["tuning"] = [c.to_dict() for c in self.tuning]
        return out

    def _title(self) -> str:
        return (
            f"{len(self.policies)} candidate policies x {len(self.estimators)} estimators on "
            f"{self.logging.n:,} rows; {self.ci_method} intervals at {self.confidence_level:.0%}"
        )

    def _parts(self, truth: Mapping[str, float] | None = None) -> ResultParts:
        t = self.table()
        shown = t[["policy", "estimator", "value", "std_error", "ci_low", "ci_high"]].copy()
        # what each interval covers: the policy's value, or a clipped value (clipped IPS whose
        # clip binds: only its bottou interval covers the policy's value)
        shown["covers"] = [str(x).split()[0] for x in t["target"]]
        shown["ess_ratio"] = t["ess_ratio"]
        if truth is not None:
            from ope.report.views import Truth  # the one reader of `truth` (report, plots)

            exact = Truth.of(truth).policies
            shown["truth"] = [exact.get(p, math.nan) for p in t["policy"]]
            shown["in_ci"] = [
                "" if p not in exact else ("yes" if lo <= exact[p] <= hi else "NO")
                for p, lo, hi in zip(t["policy"], t["ci_low"], t["ci_high"])
            ]
        low, high = self._logging_interval()
        logging = format_estimate(self.logging.value, self.logging.std_error, low, high)
        if self.logging_ci_method != self.ci_method:
            logging += f" ({self.logging_ci_method})"
        rejected = self.report.rows_rejected
        fields: list[tuple[str, Any]] = [
            (
                "logging policy (mean logged reward)"
                if self.weight_column is None
                else "logging policy (weighted mean reward)",
                logging,
            ),
            (
                "rows",
                f"{self.logging.n:,} used"
                + (
                    f", {rejected:,} of {self.report.rows_read:,} rejected and dropped"
                    if rejected
                    else ""
                ),
            ),
            ("propensities", self.propensity_source),
        ]
        if self.weight_column is not None:
            fields.append(
                (
                    "sampling weights",
                    f"column `{self.weight_column}` (Horvitz-Thompson weighted estimates)",
                )
            )
        if self.model_columns is not None:
            fields += [
                ("reward model context columns", _column_list(self.model_columns["context"])),
                (
                    "reward model action features",
                    _column_list(self.model_columns["action_features"]),
                ),
            ]
        for key, values in self.settings.items():  # settings given per candidate
            fields.append(
                (
                    f"{key} per candidate",
                    ", ".join(f"{p}: {format_setting(v)}" for p, v in values.items()),
                )
            )
        if self.by:
            fields.append(
                (
                    "segments",
                    f"{len(self.segment_estimates):,} estimates by "
                    f"{', '.join(self.by)} (table(by='segment'))",
                )
            )
        return ResultParts(
            title=self._title(),
            fields=tuple(fields),
            table=shown,
            notes=self.notes,  # evaluation-level notes (dropped rows, model choice, ...)
            # each estimate's notes on its row: stated once, referenced as [i] from the rows
            row_notes=self._row_notes(t),
        )

    def _row_notes(self, t: pd.DataFrame) -> list[tuple[str, ...]]:
        return [self._notes_of(self.estimates[(p, e)]) for p, e in zip(t["policy"], t["estimator"])]

    def numbered_notes(self) -> tuple[tuple[str, ...], list[str]]:
        """The notes as :meth:`summary` numbers them: each note once (the evaluation's, then
        the estimates' row by row), and per row of :meth:`table` its references ``"[i]"``
        (see :func:`ope._format.number_notes`)."""
        return number_notes(self.notes, self._row_notes(self.table()))

    def summary(self, *, truth: Mapping[str, float] | None = None) -> str:
        """Plain-text table of the estimates (and the true values when given), then notes."""
        return render_text(self._parts(truth))

    def segment_summary(self) -> str:
        """Plain-text table of the per-segment estimates (``evaluate(..., by=[...])``): each
        candidate x estimator on each segment's rows alone; ``""`` without segments."""
        t = self.table(by="segment")
        if t.empty:
            return ""
        # the segment, the candidate and the estimate (the level and method are in the title)
        kept = [c for c in TABLE_COLUMNS if c not in _SEGMENT_SUMMARY_LEFT_OUT]
        shown = t[["column", "segment", *kept]]
        return render_text(
            ResultParts(
                title=(
                    f"per-segment estimates by {', '.join(self.by)}: {self.ci_method} intervals "
                    f"at {self.confidence_level:.0%}, each on the segment's rows alone"
                ),
                table=shown,
            )
        )

    def __repr__(self) -> str:
        return (
            f"Evaluation(policies={self.policies}, estimators={self.estimators}, "
            f"n={self.logging.n:,}, ci_method={self.ci_method!r})"
        )


def _column_list(columns: Sequence[str]) -> str:
    """``"3: a, b, c"`` (or ``"none"``), for the fields of a rendered Evaluation."""
    return f"{len(columns)}: {', '.join(columns)}" if columns else "none"
