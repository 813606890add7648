"""What the report and the plots read from result objects: plain rows, computed once.

The HTML report and :mod:`ope.plots` render result objects and do no statistics of their own
(the edges stay thin: every number they show is computed here or in the results). This module
turns an :class:`ope.Evaluation`, an :class:`ope.Diagnostics` and the known truth into the
rows they show: the logging policy's value as a reference, the paired differences ranked by
their lower bound, one verdict per candidate for the headline, and the per-segment estimates when the evaluation has them. The result objects are read through
their public methods only (duck-typed, so this module imports neither ``ope.evaluation`` nor
``ope.diagnostics.result``, which call into the report).
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import pandas as pd

from ope._format import format_number, format_share
from ope._thresholds import MAX_FIGURE_CANDIDATES, MAX_REPORT_SEGMENTS
from ope._thresholds import ESS_RATIO_WARN, GAMMA_FRAGILE, K_RELIABLE, SKEW_MIN_ROWS, SKEW_ROWS
from ope._thresholds import SKEW_AFFECTED_METHODS
from ope._thresholds import heavy_tail
from ope.diagnostics.overlap import VERDICT_EXPLORE
from ope.exceptions import OPEError, ParameterError

__all__ = [
    "BETTER",
    "WORSE",
    "UNCLEAR",
    "ANSWERABLE",
    "HEADLINE_ESTIMATORS",
    "COMPARISON_COLUMNS",
    "MAX_PAIRWISE_POLICIES",
    "Truth",
    "Reference",
    "CandidateVerdict",
    "logging_reference",
    "comparison_method",
    "headline_estimator",
    "comparison_table",
    "candidate_verdicts",
    "overlap_verdicts",
    "segment_estimates",
    "MAX_REPORT_SEGMENTS",
    "MAX_FIGURE_CANDIDATES",
    "MAX_LISTED_NAMES",
    "top_segments",
    "figure_candidates",
    "ranked_candidates",
    "summarized_line",
    "check_cap",
]

#: The three answers of the headline for a candidate.
BETTER: Final = "better than logging"
WORSE: Final = "worse than logging"
UNCLEAR: Final = "the logs cannot tell"
#: The answer of a report of diagnostics alone for a candidate the logs can answer for.
ANSWERABLE: Final = "the logs can answer"

#: The estimator the report uses where it shows one (between-candidate differences, segments):
#: the first of these that was evaluated. Doubly robust first (unbiased with known propensities
#: and the lowest variance), then the self-normalized and plain weighting estimators; DM last,
#: as it carries no interval.
HEADLINE_ESTIMATORS: Final = (
    "dr",
    "sndr",
    "snips",
    "ips",
    "switch_dr",
    "dros",
    "clipped_ips",
    "dm",
)

#: Columns of :func:`comparison_table`.
COMPARISON_COLUMNS: Final = (
    "policy",
    "baseline",
    "estimator",
    "difference",
    "std_error",
    "ci_low",
    "ci_high",
    "answer",
)

#: Between-candidate differences are shown for every pair when there are at most this many
#: candidates (66 pairs); with more, each candidate is compared with the best one only, so the
#: table stays readable and the cost linear in the number of candidates.
MAX_PAIRWISE_POLICIES: Final = 12

#: The report's size bounds. Each drawn segment or candidate costs matplotlib text layout
#: (tens of milliseconds per label, more per figure), so without bounds a report of 500
#: segments took over 20 s and one of 40 candidates 39 s with 84 figures, and nobody reads a
#: 500-row chart. With them the render time is linear in candidates x segments up to the caps
#: and constant beyond; nothing is dropped from the JSON output or the result objects.
#:

#: A summary line names at most this many of the segments or candidates it stands for.
MAX_LISTED_NAMES: Final = 10


# --------------------------------------------------------------------------------------------
# truth and the logging policy's value
# --------------------------------------------------------------------------------------------
def _real(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ParameterError(f"truth: {what} must be a number; got {value!r}.")
    return float(value)


@dataclass(frozen=True)
class Truth:
    """Exact values, when they are known (simulations, the bundled sample).

    Attributes
    ----------
    policies : dict of str to float
        The exact value of each candidate.
    logging : float or None
        The exact value of the logging policy.
    by_segment : dict of str to dict of str to float
        ``{policy or "logging": {segment label: value}}`` for the segment column ``column``.
    column : str or None
        The segment column ``by_segment`` refers to.
    """

    policies: dict[str, float] = field(default_factory=dict)
    logging: float | None = None
    by_segment: dict[str, dict[str, float]] = field(default_factory=dict)
    column: str | None = None

    @classmethod
    def of(cls, truth: Any) -> Truth:
        """The truth from ``None``, a :class:`Truth`, the bundled sample's truth document
        (``ope.load_sample().truth``: keys ``policies``, ``logging``, ``by_segment``) or a flat
        mapping ``{policy: value}`` in which the key ``"logging"`` is the logging policy.

        >>> t = Truth.of({"greedy": 0.25, "logging": 0.12})
        >>> t.policies, t.logging
        ({'greedy': 0.25}, 0.12)
        """
        if truth is None:
            return cls()
        if isinstance(truth, Truth):
            return truth
        if not isinstance(truth, Mapping):
            raise ParameterError(
                "`truth` must be a mapping {policy: exact value} (the key 'logging' for the "
                "logging policy) or the bundled sample's truth (ope.load_sample().truth); got "
                f"{type(truth).__name__}."
            )
        if isinstance(truth.get("policies"), Mapping):
            policies = {str(k): _real(v, f"policies[{k!r}]") for k, v in truth["policies"].items()}
            logging = truth.get("logging")
            by_segment = {
                str(p): {str(s): _real(v, f"by_segment[{p!r}][{s!r}]") for s, v in seg.items()}
                for p, seg in (truth.get("by_segment") or {}).items()
                if isinstance(seg, Mapping)
            }
            column = truth.get("segment_column", "segment" if by_segment else None)
            return cls(
                policies,
                None if logging is None else _real(logging, "logging"),
                by_segment,
                None if column is None else str(column),
            )
        policies = {str(k): _real(v, repr(k)) for k, v in truth.items() if k != "logging"}
        logging = truth.get("logging")
        return cls(policies, None if logging is None else _real(logging, "'logging'"))

    def __bool__(self) -> bool:
        return bool(self.policies) or self.logging is not None

    def difference(self, policy: str, baseline: str = "logging") -> float | None:
        """The exact ``policy - baseline`` when both values are known."""
        a = self.policies.get(policy)
        b = self.logging if baseline == "logging" else self.policies.get(baseline)
        return None if a is None or b is None else a - b


@dataclass(frozen=True)
class Reference:
    """The logging policy's value on the same rows, with its interval."""

    value: float
    ci_low: float
    ci_high: float
    ci_method: str
    n: int


def logging_reference(evaluation: Any) -> Reference:
    """The logging policy's value and interval of an :class:`ope.Evaluation` (its
    ``to_dict()["logging_policy"]``: the interval the evaluation computed, never redrawn)."""
    entry = evaluation.to_dict()["logging_policy"]
    return Reference(
        value=float(entry["value"]),
        ci_low=float(entry["ci_low"]),
        ci_high=float(entry["ci_high"]),
        ci_method=str(entry["ci_method"]),
        n=int(entry["n"]),
    )


# --------------------------------------------------------------------------------------------
# paired differences
# --------------------------------------------------------------------------------------------
def comparison_method(evaluation: Any) -> str:
    """The interval method of the paired differences: ``t`` when the evaluation uses t
    intervals, else ``normal`` (a bootstrap would be redrawn on every rendering, and the
    bounded methods do not apply to differences)."""
    return "t" if evaluation.ci_method == "t" else "normal"


def headline_estimator(evaluation: Any) -> str:
    """The first of :data:`HEADLINE_ESTIMATORS` that ``evaluation`` has for every candidate
    (else its first such estimator; a slate evaluation may lack an estimator for a candidate
    whose probabilities cannot serve it)."""
    every = [
        e
        for e in evaluation.estimators
        if all((p, e) in evaluation.estimates for p in evaluation.policies)
    ]
    have = every or list(evaluation.estimators)
    return next((e for e in HEADLINE_ESTIMATORS if e in have), have[0])


def _answer(low: float, high: float) -> str:
    if not (math.isfinite(low) and math.isfinite(high)):
        return "no interval"
    if low > 0:
        return "better"
    if high < 0:
        return "worse"
    return "no clear difference"


def comparison_table(evaluation: Any, *, between: bool = True) -> pd.DataFrame:
    """Paired differences on the same rows, ranked by their lower bound (largest first).

    Every candidate x estimator against the logging policy (``baseline = "logging"``), then,
    with ``between``, the candidates against each other under :func:`headline_estimator`
    (each pair oriented so the difference is the higher-valued minus the lower-valued
    candidate; with more than :data:`MAX_PAIRWISE_POLICIES` candidates, each against the best).
    ``answer`` is ``better`` / ``worse`` when the interval excludes 0. Empty for a streamed
    evaluation (its statistics have no rows to pair).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`COMPARISON_COLUMNS`.
    """
    if getattr(evaluation, "streaming", False):
        return pd.DataFrame(columns=list(COMPARISON_COLUMNS))
    method = comparison_method(evaluation)
    level = evaluation.confidence_level
    rows = []
    vs = evaluation.comparisons(ci=method)
    for r in vs.itertuples(index=False):
        rows.append(
            {
                "policy": r.policy,
                "baseline": "logging",
                "estimator": r.estimator,
                "difference": float(r.difference),
                "std_error": float(r.std_error),
                "ci_low": float(r.ci_low),
                "ci_high": float(r.ci_high),
                "answer": _answer(float(r.ci_low), float(r.ci_high)),
            }
        )
    policies = list(evaluation.policies)
    if between and len(policies) > 1:
        est = headline_estimator(evaluation)
        policies = [p for p in policies if (p, est) in evaluation.estimates]
        order = sorted(policies, key=lambda p: -evaluation[(p, est)].value)
        if len(order) <= MAX_PAIRWISE_POLICIES:
            pairs = [(a, b) for i, a in enumerate(order) for b in order[i + 1 :]]
        else:
            pairs = [(order[0], b) for b in order[1:]]
        for a, b in pairs:  # loop over candidate pairs (a few dozen at most)
            d = evaluation.compare(a, b, estimator=est, ci=method)
            ci = d.ci(level, method)
            rows.append(
                {
                    "policy": a,
                    "baseline": b,
                    "estimator": est,
                    "difference": float(d.value),
                    "std_error": float(d.std_error),
                    "ci_low": float(ci.low),
                    "ci_high": float(ci.high),
                    "answer": _answer(float(ci.low), float(ci.high)),
                }
            )
    table = pd.DataFrame(rows, columns=list(COMPARISON_COLUMNS))
    key = table["ci_low"].fillna(-math.inf)
    return (
        table.assign(_key=key)
        .sort_values(["_key", "difference"], ascending=False, kind="stable")
        .drop(columns="_key")
        .reset_index(drop=True)
    )


# --------------------------------------------------------------------------------------------
# the headline: one answer per candidate
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CandidateVerdict:
    """The headline's answer for one candidate.

    ``lower_bound`` is the smallest lower end of the candidate's intervals of its difference
    with the logging policy over the estimators (the most cautious "how sure"), attained by
    ``bound_estimator``; ``low``/``high`` span the point estimates. ``summary`` says in a few
    words why the logs cannot tell (empty otherwise); ``reasons`` list every reason and what
    to watch.
    """

    policy: str
    answer: str
    lower_bound: float
    upper_bound: float
    bound_estimator: str
    low: float
    high: float
    summary: str = ""
    reasons: tuple[str, ...] = ()
    true_difference: float | None = None


def _diagnostic_reasons(
    row: Mapping[str, Any], segments: pd.DataFrame | None
) -> tuple[str, list[str]]:
    """(why the logs cannot answer, in a few words, or "" when they can; the reasons, short)
    from one row of ``Diagnostics.table()`` and its segments. The diagnostics' own wording
    (``verdict_reason``, each gap's ``reason``) is shown in full beside the candidate."""
    blocking: list[str] = []
    reasons: list[str] = []
    if segments is not None and len(segments):
        mine = segments[(segments["policy"] == row["policy"]) & segments["gap"]]
        for gap in mine.itertuples(index=False):
            kind = f"{gap.gap_kind} gap" if gap.gap_kind else "gap"
            blocking.append(f"the logs barely cover it in {gap.column}={gap.segment}")
            reasons.append(f"{kind} in {gap.column}={gap.segment}")
    if row.get("propensity_check", "ok") != "ok":
        blocking.append("its mean importance weight is off (a support gap or wrong propensities)")
        reasons.append(
            f"mean importance weight {format_number(row['mean_weight'], trim=True)} (expected "
            f"{format_number(row['mean_weight_expected'], trim=True)})"
        )
    if row.get("verdict") == VERDICT_EXPLORE:
        blocking.append("more of the same logs would not settle it")
        share = row.get("verdict_coverage_share", math.nan)
        if isinstance(share, float) and math.isfinite(share):
            reasons.append(
                f"{format_share(share)} of its narrowest interval is coverage, which "
                "more of the same logs do not shrink"
            )
        ratio = row.get("ess_ratio", math.nan)
        if isinstance(ratio, float) and ratio < ESS_RATIO_WARN:
            reasons.append(f"its effective sample is {format_share(ratio)} of the rows")
    k_hat = row.get("pareto_k", math.nan)
    tail = heavy_tail(k_hat, row.get("pareto_k_threshold", K_RELIABLE))
    if tail:
        reasons.append(
            f"Pareto k-hat of its weights {k_hat:.2f}: "
            + (
                "the unclipped weighting estimates are unreliable"
                if tail == "unreliable"
                else "their variance is likely infinite; normal intervals of the unclipped "
                "weighting estimates are not to be trusted"
            )
        )
    star = row.get("gamma_star", math.nan)
    if isinstance(star, float) and star < GAMMA_FRAGILE:  # False when NaN (no decision)
        reasons.append(
            f"its decision against logging flips if the propensities' odds are off by a factor "
            f"Γ* = {star:.3g} (below {GAMMA_FRAGILE:g}; marginal sensitivity model)"
        )
    unsupported = row.get("unsupported_mass", math.nan)
    if isinstance(unsupported, float) and math.isfinite(unsupported) and unsupported > 0:
        reasons.append(
            f"{format_share(unsupported)} of its mass is on actions the logger never plays"
        )
    return (blocking[0] if blocking else ""), reasons


def _skewed_estimators(
    evaluation: Any, policy: str, shown: Mapping[tuple[str, str], str]
) -> list[str]:
    """The estimators of ``policy`` whose shown interval (``shown``: the evaluation's method
    per (policy, estimator), its table's ``ci_method``) is asymptotic (normal, t, bootstrap)
    and whose estimate carries the skewed-terms note (:func:`ope._thresholds.skewed_terms`)."""
    estimates = getattr(evaluation, "estimates", None) or {}
    return [
        str(est.estimator)
        for (name, key), est in estimates.items()
        if name == policy
        and shown.get((name, key), est.ci_method) in SKEW_AFFECTED_METHODS
        and any(getattr(x, "rule", None) == "skewed_terms" for x in est.notes)
    ]


def candidate_verdicts(
    evaluation: Any,
    comparisons: pd.DataFrame,
    diagnostics: Any = None,
    truth: Truth | None = None,
) -> list[CandidateVerdict]:
    """One :class:`CandidateVerdict` per candidate of ``evaluation``, in its order.

    A candidate is :data:`BETTER` (:data:`WORSE`) when the interval of its paired difference
    with the logging policy lies above (below) zero under every estimator that has an
    interval (under the chosen one, when the evaluation chose an estimator per candidate:
    ``estimators="auto"``; the reasons then say why it was chosen and which others differ),
    and the logs can answer for it. They cannot (:data:`UNCLEAR`) when the intervals
    straddle zero or the estimators disagree, and, whatever the intervals say, when the
    diagnostics find a segment gap, a mean weight far from 1, or that more of the same logs
    would not settle it (the verdict "change the logging policy's exploration"); without
    diagnostics, when every estimate rests on fewer than ``ESS_RATIO_WARN`` of the rows.
    """
    truth = truth or Truth()
    vs = comparisons[comparisons["baseline"] == "logging"] if len(comparisons) else comparisons
    diag_rows: dict[str, Any] = {}
    segments = None
    if diagnostics is not None:
        diag_rows = {r["policy"]: r for r in diagnostics.table().to_dict("records")}
        segments = diagnostics.segments()
    table = evaluation.table()
    # each row's interval method, read once: the notes shown beside it
    shown = dict(zip(zip(table["policy"], table["estimator"]), table["ci_method"]))
    selection = getattr(evaluation, "selection", None)
    out = []
    for policy in evaluation.policies:
        mine = vs[vs["policy"] == policy] if len(vs) else vs
        finite = mine[mine["ci_low"].notna() & mine["ci_high"].notna()] if len(mine) else mine
        reasons: list[str] = []
        summary = ""
        if selection is not None and policy in selection.chosen and len(finite):
            # estimators="auto": the answer is the chosen estimator's; the others are context
            chosen = selection.estimator_for(policy)
            others = finite[finite["estimator"] != chosen]
            finite = finite[finite["estimator"] == chosen]
            reasons.append(f"answer from {selection.reason(policy)}")
            disagree = [
                f"{e} says {a}"
                for e, a in zip(others["estimator"], others["answer"])
                if len(finite) and a != finite["answer"].iloc[0]
            ]
            if disagree:
                reasons.append("the other estimators differ: " + "; ".join(disagree))
        if len(finite):
            answers = list(dict.fromkeys(finite["answer"]))
            worst = finite.loc[finite["ci_low"].idxmin()]
            lower, estimator = float(worst["ci_low"]), str(worst["estimator"])
            upper = float(finite["ci_high"].max())
            low, high = float(finite["difference"].min()), float(finite["difference"].max())
            if answers == ["better"]:
                answer = BETTER
            elif answers == ["worse"]:
                answer = WORSE
            else:
                answer = UNCLEAR
                if len(answers) > 1:
                    summary = "the estimators disagree"
                    reasons.append(
                        "the estimators disagree: "
                        + "; ".join(
                            f"{a}: {', '.join(finite.loc[finite['answer'] == a, 'estimator'])}"
                            for a in answers
                        )
                    )
                else:
                    summary = "no clear difference"
                    reasons.append("every interval of the difference includes 0")
        else:
            answer, lower, upper, estimator = UNCLEAR, math.nan, math.nan, ""
            low = high = math.nan
            summary = "no interval of its difference with the logging policy"
            reasons.append(
                summary
                + (
                    " (a streamed evaluation has no rows to pair)"
                    if getattr(evaluation, "streaming", False)
                    else ""
                )
            )
        if policy in diag_rows:
            blocking, why = _diagnostic_reasons(diag_rows[policy], segments)
        else:
            ratios = table.loc[table["policy"] == policy, "ess_ratio"]
            low_ess = bool(len(ratios)) and bool((ratios < ESS_RATIO_WARN).all())
            blocking = (
                f"its effective sample is {format_share(ratios.max())} of the rows"
                if low_ess
                else ""
            )
            why = [blocking] if low_ess else []
        if blocking and answer != UNCLEAR:
            summary = f"the estimates say {answer.split()[0]}, but {blocking}"
            answer = UNCLEAR
        elif blocking and not summary:
            summary = blocking
        reasons.extend(why)
        skewed = _skewed_estimators(evaluation, policy, shown)
        if skewed:
            reasons.append(
                f"its {', '.join(skewed)} intervals are likely too short: the terms they average "
                f"are skewed and fewer than {SKEW_MIN_ROWS:g} + {SKEW_ROWS:g} x skewness^2 (see "
                "the estimates' notes for an interval that holds)"
            )
        out.append(
            CandidateVerdict(
                policy=policy,
                answer=answer,
                lower_bound=lower,
                upper_bound=upper,
                bound_estimator=estimator,
                low=low,
                high=high,
                summary=summary,
                reasons=tuple(reasons),
                true_difference=truth.difference(policy),
            )
        )
    return out


def overlap_verdicts(diagnostics: Any) -> list[CandidateVerdict]:
    """The headline without estimates (a report of diagnostics alone): per candidate, whether
    the logs can answer for it (:data:`UNCLEAR` when they cannot), with the reasons."""
    segments = diagnostics.segments()
    out = []
    for row in diagnostics.table().to_dict("records"):
        blocking, why = _diagnostic_reasons(row, segments)
        if not blocking:
            why = [f"{row['verdict']}: {row['verdict_reason']}", *why]
        out.append(
            CandidateVerdict(
                policy=row["policy"],
                answer=UNCLEAR if blocking else ANSWERABLE,
                lower_bound=math.nan,
                upper_bound=math.nan,
                bound_estimator="",
                low=math.nan,
                high=math.nan,
                summary=blocking,
                reasons=tuple(why),
            )
        )
    return out


# --------------------------------------------------------------------------------------------
# per-segment estimates
# --------------------------------------------------------------------------------------------
def segment_estimates(evaluation: Any) -> pd.DataFrame | None:
    """The evaluation's per-segment estimates, or None when it has none.

    Reads ``evaluation.table(by="segment")`` (one row per policy x estimator x segment, with
    the ``column`` and ``segment`` of :meth:`ope.Diagnostics.segments` and the estimate
    columns of ``table()``) when the evaluation's ``table`` takes ``by``; an evaluation computed
    without segments answers None, as does one whose ``table`` has no ``by``.
    """
    table = getattr(evaluation, "table", None)
    if not callable(table):
        return None
    try:
        takes_by = "by" in inspect.signature(table).parameters
    except (TypeError, ValueError):
        return None
    if not takes_by:
        return None
    try:
        rows = table(by="segment")
    except (OPEError, KeyError, LookupError):
        return None
    if rows is None or not len(rows) or "segment" not in rows.columns:
        return None
    if "column" not in rows.columns:
        rows = rows.assign(column="segment")
    needed = {"policy", "estimator", "value", "ci_low", "ci_high"}
    return rows if needed <= set(rows.columns) else None


def _listed(names: Sequence[Any], limit: int = MAX_LISTED_NAMES) -> str:
    shown = ", ".join(str(n) for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def top_segments(
    segments: Sequence[Any], rows: Sequence[float], *, limit: int | None = MAX_REPORT_SEGMENTS
) -> tuple[list[Any], str]:
    """The ``limit`` segments with the most rows (in their order of appearance) and the line
    that summarizes the others ("" when none is left out; ``limit=None`` keeps all).

    ``segments[i]`` has ``rows[i]`` rows (a segment may appear more than once, one entry per
    candidate: its largest count is used).

    >>> top_segments(["a", "b", "c", "a"], [10, 80, 10, 10], limit=2)
    (['a', 'b'], '1 more segment, 10% of rows: c')
    >>> top_segments(["a"], [5])
    (['a'], '')
    """
    counts = pd.Series(np.asarray(rows, dtype=np.float64), index=pd.Index(list(segments)))
    counts = counts.groupby(level=0, sort=False).max()
    if limit is None or len(counts) <= limit:
        return list(counts.index), ""
    # stable sort: ties keep the order of appearance
    order = np.argsort(-counts.to_numpy(), kind="stable")
    kept = set(order[:limit].tolist())
    shown = [s for i, s in enumerate(counts.index) if i in kept]
    rest = counts.iloc[order[limit:]]
    total = float(counts.sum())
    share = float(rest.sum()) / total if total > 0 else math.nan
    k = len(rest)
    return shown, (
        f"{k} more segment{'s' if k != 1 else ''}, {format_share(share)} of rows: "
        f"{_listed(list(rest.index))}"
    )


def check_cap(value: Any, name: str) -> int | None:
    """A size bound of the report: a positive integer, or None for no bound.

    >>> check_cap(5, "max_candidates"), check_cap(None, "max_candidates")
    (5, None)
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ParameterError(
            f"`{name}` must be a positive integer (how many to draw in full) or None (all); "
            f"got {value!r}."
        )
    return int(value)


def ranked_candidates(verdicts: Sequence[CandidateVerdict]) -> list[str]:
    """The candidates in the order the report draws them in full, most telling first.

    With estimates, by the lower end of the interval of the difference with the logging
    policy (:attr:`CandidateVerdict.lower_bound`: the estimate less its uncertainty), largest
    first, ties by the upper end; candidates without an interval come last. Without estimates
    (diagnostics alone), those the logs cannot answer for come first. Ties keep the given
    order.

    >>> v = [CandidateVerdict("a", UNCLEAR, -0.1, 0.2, "ips", 0, 0),
    ...      CandidateVerdict("b", BETTER, 0.05, 0.3, "ips", 0, 0),
    ...      CandidateVerdict("c", UNCLEAR, math.nan, math.nan, "", 0, 0)]
    >>> ranked_candidates(v)
    ['b', 'a', 'c']
    """

    def key(v: CandidateVerdict) -> tuple[int, float, float]:
        if math.isfinite(v.lower_bound):
            high = v.upper_bound if math.isfinite(v.upper_bound) else -math.inf
            return (0, -v.lower_bound, -high)
        return (1 if v.answer == UNCLEAR else 2, 0.0, 0.0)

    return [v.policy for v in sorted(verdicts, key=key)]


def figure_candidates(
    policies: Sequence[str],
    *,
    limit: int | None = MAX_FIGURE_CANDIDATES,
    ranked: Sequence[str] | None = None,
) -> tuple[list[str], list[str]]:
    """The candidates drawn in full and those summarized, each in the order of ``policies``.

    The first ``limit`` of ``ranked`` (:func:`ranked_candidates`; default ``policies``) that
    are among ``policies`` are drawn; ``limit=None`` draws all.

    >>> figure_candidates(["a", "b", "c"], limit=2)
    (['a', 'b'], ['c'])
    >>> figure_candidates(["a", "b", "c"], limit=1, ranked=["c", "a", "b"])
    (['c'], ['a', 'b'])
    """
    policies = list(policies)
    if limit is None or len(policies) <= limit:
        return policies, []
    present = set(policies)
    chosen = set([p for p in (ranked if ranked is not None else policies) if p in present][:limit])
    return [p for p in policies if p in chosen], [p for p in policies if p not in chosen]


def summarized_line(rest: Sequence[str]) -> str:
    """The line naming the candidates summarized instead of drawn ("" when none is).

    >>> summarized_line(["c"])
    '1 more candidate summarized (in the tables, not drawn): c'
    """
    if not rest:
        return ""
    k = len(rest)
    return (
        f"{k} more candidate{'s' if k != 1 else ''} summarized (in the tables, not drawn): "
        f"{_listed(list(rest))}"
    )
