"""Several slate candidates × several slate estimators on one set of slate logs.

:func:`evaluate_slates` runs the slate estimators of :mod:`ope.slates` (slate, independent,
cascade and pseudoinverse IPS, their self-normalized forms, and Cascade-DR) for every
candidate, beside the logger's own mean slate reward, and returns a
:class:`SlateEvaluation`: ``result[policy, estimator]``, paired differences with the logger
slate by slate, the per-slot overlap of each candidate's weights, and the estimators a
candidate's probabilities cannot serve, each with its reason (a candidate without prefix
probabilities has no cascade estimate; the others still run). It is what ``ope slates`` and the
report's section on slates show.

Candidates come as :class:`ope.slates.SlatePolicy` objects (a Plackett-Luce ranking gives the
exact probabilities of the logged slates and of their prefixes at any catalog size), as
:class:`ope.slates.SlateProbabilities`, or from the logs' own columns ``target__<name>``,
``target_prefix__<name>`` and ``target_slate__<name>`` (:data:`ope.slates.CANDIDATE_COLUMNS`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import pandas as pd

from ope._format import plural
from ope._result import ESTIMATE_TABLE_COLUMNS
from ope._thresholds import kish_ess
from ope._validation import (
    check_chosen,
    check_choice,
    check_confidence_level,
    check_flag,
    check_names,
)
from ope.exceptions import EstimationError, ParameterError, PolicyError, ValidationError
from ope.logs import ValidationReport
from ope.results import (
    Estimate,
    Result,
    ResultParts,
    compare,
    estimate_rows,
    estimate_summary,
    grouped_notes,
    logging_comparison_rows,
    render_text,
)
from ope.slates import (
    CANDIDATE_COLUMNS,
    CASCADE_MODELS,
    SLATE_ESTIMATORS,
    CascadeDR,
    PseudoInverse,
    SlatePolicy,
    SlateProbabilities,
    logging_estimate,
    slate_logs,
    slate_probabilities,
)

__all__ = [
    "evaluate_slates",
    "SlateEvaluation",
    "SLATE_ESTIMATOR_NAMES",
    "DEFAULT_SLATE_ESTIMATORS",
    "SLATE_CI_METHODS",
    "SLATE_OVERLAP_COLUMNS",
]

#: Every slate estimator by name: the classes of :data:`ope.slates.SLATE_ESTIMATORS` and, but
#: for Cascade-DR, their self-normalized forms (``sn`` + name).
SLATE_ESTIMATOR_NAMES: Final = tuple(SLATE_ESTIMATORS) + tuple(
    "sn" + name for name in SLATE_ESTIMATORS if name != "cdr"
)

#: The estimators run when none are named, each where the probabilities it needs are there:
#: slate IPS (whole slates), cascade IPS and Cascade-DR (prefixes; Cascade-DR's built-in model
#: needs a :class:`~ope.slates.SlatePolicy` candidate) and independent IPS (per-slot
#: marginals). The pseudoinverse is run only when named: it assumes an additive reward and a
#: logger whose Gamma matrix is known.
DEFAULT_SLATE_ESTIMATORS: Final = ("sips", "rips", "cdr", "iips")

#: Interval methods of the slate estimates (all from the slates' own rows).
SLATE_CI_METHODS: Final = ("normal", "t", "bootstrap")

#: Columns of :attr:`SlateEvaluation.overlap`: per candidate and slot, the Kish effective
#: sample and the largest weight of the marginal (item at its slot) and prefix (top-k)
#: weights, and the effective sample of the whole-slate weights (one per candidate, repeated);
#: NaN where a side lacks those probabilities.
SLATE_OVERLAP_COLUMNS: Final = (
    "policy",
    "position",
    "marginal_ess",
    "marginal_max_weight",
    "prefix_ess",
    "prefix_max_weight",
    "slate_ess",
)

#: How every slate estimate's first note starts (the model it assumes).
ASSUMPTION: Final = "assumption: "

#: What each estimator needs of both the candidate's and the logger's probabilities.
_NEEDS: Final = {"sips": "slate", "iips": "marginal", "rips": "prefix", "cdr": "prefix"}


@dataclass(frozen=True, eq=False)
class SlateEvaluation(Result):
    """Candidate rankings × slate estimators on one set of slate logs (:func:`evaluate_slates`).

    Attributes
    ----------
    estimates : dict of (policy, estimator) to Estimate
        Each an estimate of the candidate's expected slate reward (the reward summed over the
        slots), with the interval :attr:`ci_method` at :attr:`confidence_level`.
    logging : Estimate
        The logger's own mean slate reward (unit weights), paired slate by slate with every
        estimate by :meth:`compare`.
    policies, estimators : list of str
    unavailable : dict of (policy, estimator) to str
        The estimates that could not be made, each with its reason (probabilities the
        candidate or the logger does not give, weights that sum to zero).
    overlap : pandas.DataFrame
        Per candidate and slot, the effective sample and largest weight of each kind of weight
        (:data:`SLATE_OVERLAP_COLUMNS`).
    confidence_level : float
    ci_method : str
    n_slates, slate_size : int
    report : ope.ValidationReport
        What was read: slate logs are read whole or refused, so no row is rejected.
    notes : tuple of str
        Each estimate's notes once per candidate, with the estimators they concern (but the
        assumptions).
    assumptions : dict of str to str
        What each estimator assumes of the clicks (the first note of each of its estimates).
    """

    estimates: dict[tuple[str, str], Estimate]
    logging: Estimate
    policies: list[str]
    estimators: list[str]
    unavailable: dict[tuple[str, str], str]
    overlap: pd.DataFrame
    confidence_level: float
    ci_method: str
    n_slates: int
    slate_size: int
    report: ValidationReport
    notes: tuple[str, ...] = ()
    assumptions: dict[str, str] = field(default_factory=dict)
    fallback_estimators: tuple[str, ...] = field(default=())
    ci_fallback: str | None = None

    @property
    def n(self) -> int:
        """Slates used."""
        return self.n_slates

    def __getitem__(self, key: tuple[str, str]) -> Estimate:
        """``result[policy, estimator]``: one estimate."""
        if key not in self.estimates:
            why = self.unavailable.get(key)
            raise KeyError(
                f"no estimate {key!r}: {why}"
                if why
                else f"no estimate {key!r}; policies {self.policies}, estimators {self.estimators}"
            )
        return self.estimates[key]

    def compare(
        self,
        policy: str,
        baseline: str = "logging",
        *,
        estimator: str | None = None,
        ci: str = "normal",
    ) -> Estimate:
        """Paired difference ``policy − baseline`` over the same slates, with its interval
        (``baseline="logging"``: the logger's own mean slate reward)."""
        policy = check_choice(policy, "policy", self.policies)
        baseline = check_choice(baseline, "baseline", ["logging", *self.policies])
        estimator = (
            next(e for e in self.estimators if (policy, e) in self.estimates)
            if estimator is None and any((policy, e) in self.estimates for e in self.estimators)
            else check_choice(estimator, "estimator", self.estimators)
        )
        b = self.logging if baseline == "logging" else self[(baseline, estimator)]
        return compare(self[(policy, estimator)], b, confidence_level=self.confidence_level, ci=ci)

    def comparisons(self, *, ci: str = "normal") -> pd.DataFrame:
        """Every estimate against the logger's mean slate reward (paired by slate)."""
        method = check_choice(ci, "ci", SLATE_CI_METHODS)
        rows = logging_comparison_rows(
            self, self.estimates, ci=method, confidence_level=self.confidence_level
        )
        return pd.DataFrame(rows)

    def table(self) -> pd.DataFrame:
        """One row per estimate made, with the columns of ``ope.Evaluation.table``."""
        return pd.DataFrame(estimate_rows(self.estimates), columns=list(ESTIMATE_TABLE_COLUMNS))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict with stable keys."""
        lg = self.logging
        return {
            "kind": "slates",
            "confidence_level": self.confidence_level,
            "ci_method": self.ci_method,
            "ci_fallback": {e: self.ci_fallback for e in self.fallback_estimators},
            "slates": self.n_slates,
            "slate_size": self.slate_size,
            "estimand": ESTIMAND,
            "validation": self.report.to_dict(),
            "logging_policy": estimate_summary(lg),
            "estimates": self.table().to_dict(orient="records"),
            "unavailable": [
                {"policy": p, "estimator": e, "reason": why}
                for (p, e), why in self.unavailable.items()
            ],
            "overlap": self.overlap.to_dict(orient="records"),
            "assumptions": dict(self.assumptions),
            "notes": list(self.notes),
        }

    def _parts(self) -> ResultParts:
        lg = self.logging
        return ResultParts(
            title=(
                f"{plural(len(self.policies), 'candidate ranking')} x "
                f"{plural(len(self.estimators), 'slate estimator')} on "
                f"{plural(self.n_slates, 'slate')} of {self.slate_size} slots; "
                f"{self.ci_method} intervals at {self.confidence_level:.0%}"
            ),
            fields=(
                ("estimand", ESTIMAND),
                ("logging policy value (mean slate reward)", lg.value),
                (f"logging policy interval ({lg.ci_method})", (lg.ci_low, lg.ci_high)),
                *((f"{e} assumes", text) for e, text in self.assumptions.items()),
                *((f"not estimated: {p}, {e}", why) for (p, e), why in self.unavailable.items()),
            ),
            table=self.table().drop(columns=["notes", "confidence_level", "target"]),
            notes=self.notes,
        )

    def summary(self) -> str:
        """The evaluation as plain text."""
        return render_text(self._parts())

    def __repr__(self) -> str:
        return (
            f"SlateEvaluation({len(self.policies)} policies x {len(self.estimators)} "
            f"estimators, {self.n_slates} slates)"
        )


#: What every estimate of a :class:`SlateEvaluation` estimates, in words.
ESTIMAND: Final = (
    "expected slate reward (the reward summed over the slots) of each candidate ranking on "
    "the logged contexts"
)


def _estimator(name: str, cascade_model: str, product_logging: bool) -> Any:
    """The slate estimator of a name of :data:`SLATE_ESTIMATOR_NAMES`."""
    sn = name.startswith("sn") and name[2:] in SLATE_ESTIMATORS
    base = name[2:] if sn else name
    if base == "cdr":
        return CascadeDR(model=cascade_model)
    if base == "pi":
        return PseudoInverse(self_normalized=sn, product_logging=product_logging)
    return SLATE_ESTIMATORS[base](self_normalized=sn)


def _weights(
    cand: SlateProbabilities, logger: SlateProbabilities, kind: str, marginals: bool
) -> np.ndarray | None:
    """The candidate's ``kind`` weights (n, L) or (n,), None where a side lacks them (and for
    deferred Monte-Carlo marginals unless ``marginals``: they cost draws)."""
    if kind == "marginal" and not marginals:
        if cand.marginal_deferred or logger.marginal_deferred:
            return None
    if kind == "marginal":
        cand, logger = cand.with_marginals(), logger.with_marginals()
    top, bottom = _probability(cand, kind), _probability(logger, kind)
    if top is None or bottom is None or not bool(np.all(bottom > 0)):
        return None
    return np.asarray(top / bottom, dtype=np.float64)


def _overlap(
    name: str, cand: SlateProbabilities, logger: SlateProbabilities, size: int, marginals: bool
) -> list[dict[str, Any]]:
    """The rows of :attr:`SlateEvaluation.overlap` of one candidate (one per slot)."""
    stats: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for kind in ("marginal", "prefix"):
        w = _weights(cand, logger, kind, marginals)
        if w is None:
            nan = np.full(size, np.nan)
            stats[kind] = (nan, nan)
        else:
            s1, s2 = w.sum(axis=0), (w * w).sum(axis=0)
            ess = np.array([kish_ess(float(a), float(b)) for a, b in zip(s1, s2)])  # slots
            stats[kind] = (ess, w.max(axis=0) if w.shape[0] else np.full(size, np.nan))
    ws = _weights(cand, logger, "slate", marginals)
    slate_ess = math.nan if ws is None else kish_ess(float(ws.sum()), float(ws @ ws))
    return [
        {
            "policy": name,
            "position": k,
            "marginal_ess": float(stats["marginal"][0][k]),
            "marginal_max_weight": float(stats["marginal"][1][k]),
            "prefix_ess": float(stats["prefix"][0][k]),
            "prefix_max_weight": float(stats["prefix"][1][k]),
            "slate_ess": slate_ess,
        }
        for k in range(size)  # slots
    ]


def evaluate_slates(
    logs: Any,
    candidates: Mapping[str, Any] | None = None,
    *,
    policies: Sequence[str] | None = None,
    estimators: Sequence[str] | None = None,
    logging: Any = None,
    cascade_model: str = "table",
    product_logging: bool = False,
    ci: str = "normal",
    confidence_level: float = 0.95,
    rng: int | np.random.Generator | None = 0,
    mapping: Mapping[str, str] | None = None,
    position_base: int = 0,
) -> SlateEvaluation:
    """Estimate the expected slate reward of several candidate rankings with several slate
    estimators, beside the logger's own (see the module).

    Parameters
    ----------
    logs : SlateLogs or what :func:`ope.slates.slate_logs` reads
        With ``mapping`` and ``position_base`` passed to it.
    candidates : mapping of str to SlatePolicy, SlateProbabilities or object, optional
        Candidates by name, beside those the logs carry as columns (``target__<name>``,
        ``target_prefix__<name>``, ``target_slate__<name>``).
    policies : sequence of str, optional
        The candidates to evaluate among all of them (default every one).
    estimators : sequence of str, optional
        Of :data:`SLATE_ESTIMATOR_NAMES`. Default: those of :data:`DEFAULT_SLATE_ESTIMATORS`
        that the probabilities serve for at least one candidate. An estimator a candidate's
        probabilities cannot serve is listed in ``unavailable`` with the reason; the others
        still run.
    logging : SlatePolicy or SlateProbabilities, optional
        The logger, when its probabilities are not (all) in the logs.
    cascade_model : {"table", "zero"}, default "table"
        Cascade-DR's reward model (:class:`ope.slates.CascadeDR`).
    product_logging : bool, default False
        The pseudoinverse's closed form for a logger that fills slots independently
        (:class:`ope.slates.PseudoInverse`).
    ci : {"normal", "t", "bootstrap"}, default "normal"
        The intervals. The bootstrap does not apply to estimates that use Monte-Carlo marginals
        (their error is not in the rows): those get the normal interval, and a note says so.
    confidence_level : float, default 0.95
    rng : int or Generator, default 0
        The bootstrap's draws.

    Returns
    -------
    SlateEvaluation

    Raises
    ------
    ope.EstimationError
        No estimate could be made (the reasons of each are in the message).

    Examples
    --------
    >>> import ope
    >>> from ope.simulate import SlateEnvironment
    >>> env = SlateEnvironment(click_model="cascade", seed=1)
    >>> logs = env.sample(2000, rng=0)
    >>> ev = ope.evaluate_slates(logs, {"greedy": env.policy("greedy")}, estimators=["rips"])
    >>> abs(ev["greedy", "rips"].value - env.true_value("greedy")) < 0.2
    True
    """
    # only the chosen candidates' columns are read (and checked)
    logs = slate_logs(logs, mapping=mapping, position_base=position_base, policies=policies)
    method = check_choice(ci, "ci", SLATE_CI_METHODS)
    model = check_choice(cascade_model, "cascade_model", CASCADE_MODELS)
    check_flag(product_logging, "product_logging")
    confidence_level = check_confidence_level(confidence_level)
    if logs.n < 2:
        raise ValidationError(
            f"the slate logs hold {logs.n} slate; an estimate with an interval needs at least 2 "
            "(its standard error is their spread)."
        )
    if candidates is not None and not isinstance(candidates, Mapping):
        raise ParameterError(
            "`candidates` must map candidate names to SlatePolicy or SlateProbabilities "
            f"objects; got {type(candidates).__name__}."
        )
    given = dict(candidates or {})
    if not all(isinstance(k, str) and k for k in given):
        raise ParameterError("`candidates` must map candidate names (non-empty text) to policies.")
    both = sorted(set(given) & set(logs.candidates))
    if both:
        raise ParameterError(
            f"`candidates`: {both[0]!r} is also a candidate of the logs' columns "
            f"({', '.join(c + both[0] for c in CANDIDATE_COLUMNS.values())}); give it once "
            "under another name."
        )
    pool: dict[str, Any] = {**logs.candidates, **given}
    if policies is not None:  # a name asked for that is nowhere: named with those there are
        check_chosen(
            policies,
            [*pool, *logs.unread_candidates],
            columns="the target__/target_prefix__/target_slate__<name> columns and `candidates`",
            example="['greedy']",
        )
    if not pool:
        raise ParameterError(
            "no candidate: give `candidates` (name -> SlatePolicy or SlateProbabilities), or "
            "columns target__<name>, target_prefix__<name> or target_slate__<name> in the logs."
        )
    chosen = check_chosen(
        policies,
        list(pool),
        columns="the target__/target_prefix__/target_slate__<name> columns and `candidates`",
        example="['greedy']",
    )
    logger = (
        logs.logging_probabilities()
        if logging is None
        else slate_probabilities(logging, logs, argument="logging")
    )
    probs = {name: slate_probabilities(pool[name], logs) for name in chosen}
    if estimators is None:
        names = [
            e
            for e in DEFAULT_SLATE_ESTIMATORS
            if (e != "cdr" or any(isinstance(pool[p], SlatePolicy) for p in chosen))
            and any(_served(probs[p], logger, _NEEDS[e]) for p in chosen)
        ]
        if not names:
            raise EstimationError(
                "no slate estimator is served by these probabilities: the candidates and the "
                "logger must share slate, prefix or per-slot marginal probabilities (the logs' "
                "slate_propensity, prefix_propensity or propensity, and the candidates' "
                "target_slate__, target_prefix__ or target__ columns)."
            )
    else:
        names = [
            check_choice(e, "estimators", SLATE_ESTIMATOR_NAMES)
            for e in check_names(estimators, "estimators", example="estimators=['rips', 'cdr']")
        ]
        if not names:
            raise ParameterError("`estimators` is empty: name at least one, or pass None.")
    names = list(dict.fromkeys(names))
    estimates: dict[tuple[str, str], Estimate] = {}
    unavailable: dict[tuple[str, str], str] = {}
    fallback: list[str] = []
    for policy in chosen:  # candidates x estimators: each one vectorized pass over the slates
        for name in names:
            est = _estimator(name, model, product_logging)
            target = pool[policy] if isinstance(pool[policy], SlatePolicy) else probs[policy]
            try:
                result = est.estimate(logs, target, logging=logging, policy=policy)
            except (PolicyError, EstimationError, ParameterError) as exc:
                # what this candidate's (or the logger's) probabilities cannot serve
                unavailable[(policy, name)] = str(exc)
                continue
            estimates[(policy, name)] = _with_interval(
                result, confidence_level, method, rng, name, fallback
            )
    if not estimates:
        raise EstimationError(
            "no slate estimate could be made: "
            + "; ".join(f"{p}, {e}: {why}" for (p, e), why in unavailable.items())
        )
    lg = _with_interval(logging_estimate(logs), confidence_level, method, rng, "logging", [])
    marginals = any(n.endswith(("iips", "pi")) for n in names)
    overlap = pd.DataFrame(
        [row for p in chosen for row in _overlap(p, probs[p], logger, logs.slate_size, marginals)],
        columns=list(SLATE_OVERLAP_COLUMNS),
    )
    # each estimator's assumption once (its own field), the other notes once per candidate
    assumptions = {
        e: note[len(ASSUMPTION) :]
        for (_, e), est in estimates.items()
        for note in est.notes
        if note.startswith(ASSUMPTION)
    }
    notes = grouped_notes(estimates, exclude=lambda note: note.startswith(ASSUMPTION))
    if fallback:
        notes.append(
            f"the bootstrap does not apply to {', '.join(fallback)} here (Monte-Carlo "
            "marginals: their error is not in the rows): normal intervals instead"
        )
    rows_read = logs.n * logs.slate_size if logs.rows is None else int(np.unique(logs.rows).size)
    return SlateEvaluation(
        estimates=estimates,
        logging=lg,
        policies=chosen,
        estimators=names,
        unavailable=unavailable,
        overlap=overlap,
        confidence_level=float(confidence_level),
        ci_method=method,
        n_slates=logs.n,
        slate_size=logs.slate_size,
        report=ValidationReport("slate logs", rows_read=rows_read, rows_used=rows_read),
        notes=tuple(notes),
        assumptions=assumptions,
        fallback_estimators=tuple(fallback),
        ci_fallback="normal" if fallback else None,
    )


def _served(cand: SlateProbabilities, logger: SlateProbabilities, kind: str) -> bool:
    """Whether both sides give ``kind`` probabilities (deferred marginals count)."""
    if kind == "marginal":
        return (cand.marginal is not None or cand.marginal_deferred) and (
            logger.marginal is not None or logger.marginal_deferred
        )
    return _probability(cand, kind) is not None and _probability(logger, kind) is not None


def _probability(probs: SlateProbabilities, kind: str) -> np.ndarray | None:
    """The ``kind`` probabilities of the logged slates (a slate's: its full prefix's when the
    slate's own are not given)."""
    value = getattr(probs, kind)
    if value is None and kind == "slate" and probs.prefix is not None:
        return np.asarray(probs.prefix)[:, -1]
    return value


def _with_interval(
    est: Estimate,
    level: float,
    method: str,
    rng: int | np.random.Generator | None,
    name: str,
    fallback: list[str],
) -> Estimate:
    """``est`` with its interval of ``method`` (normal, and ``name`` added to ``fallback``,
    where the bootstrap does not apply)."""
    if method == "bootstrap" and "bootstrap" not in _methods(est):
        if name not in fallback:
            fallback.append(name)
        return est.with_ci(level, "normal")
    if method == "bootstrap":
        return est.with_ci(level, method, rng=rng)
    return est.with_ci(level, method)


def _methods(est: Estimate) -> tuple[str, ...]:
    """The interval methods beyond normal and t that the estimate's rows support."""
    return () if est.source is None else tuple(est.source.methods)
