"""``ope.evaluate``: many candidate policies × many estimators on one set of logs.

The entry point ties the parts together, in a few steps:

1. :meth:`EvaluationSettings.checked` and :func:`resolve_estimators` validate every argument
   once (``ope.ParameterError`` for a bad one);
2. the target propensities of P candidates (``ope.policies``), and for DM/DR a cross-fitted
   reward model (``ope.reward_models``) on the context matrix (``ope.context``);
3. IPS, clipped IPS, SNIPS and the logging value come from one pass of the compiled moment
   kernel (``ope._kernel`` through ``ope.streaming.MomentStats``) whatever else is asked for; it
   reads the logs' ``target__`` columns as zero-copy views (no (n, P) copy) and also
   accumulates the cross-moments with the reward, so the paired comparisons with the logging
   policy need no second pass (``Evaluation.statistics`` keeps them, and
   ``ope.diagnose(..., statistics=...)`` reuses them); the other estimators make one chunked
   pass each over an (n, P) block (``ope.estimators.estimate_many``);
4. an :class:`Evaluation` holding one :class:`~ope.results.Estimate` per policy × estimator,
   the logging policy's own value, paired comparisons, and the validation report of the logs.

The same driver runs over batches: eager logs are one batch; a lazy :func:`ope.scan_logs` source
is its record batches and ``ope.distributed.evaluate_distributed`` its Dask partitions, whose
statistics merge exactly (:meth:`ope.streaming.MomentStats.merge`) and become an Evaluation by
:meth:`Evaluation.from_statistics`: the same numbers as the eager path in bounded memory.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import pandas as pd

from ope._validation import (
    check_choice,
    check_confidence_level,
    check_positive_int,
    check_reward_range,
    check_rewards_in_range,
    check_rng,
    check_weight_bound,
)
from ope.context import context_matrix
from ope.estimators import (
    ESTIMATORS,
    Estimator,
    estimate_many,
    estimator_settings,
    get_estimator,
    logging_value,
)
from ope.exceptions import EstimationError, ParameterError, PolicyError, SchemaError
from ope.intervals.asymptotic import normal_interval, t_interval
from ope.logs import BanditLogs, ValidationReport
from ope.propensity import estimated_propensity_note, propensity_info
from ope.results import CI_METHODS, Estimate, Result, ResultParts, compare

__all__ = ["evaluate", "Evaluation", "TABLE_COLUMNS"]

#: Columns of :meth:`Evaluation.table`, in order (DESIGN.md §3).
TABLE_COLUMNS: Final = (
    "policy",
    "estimator",
    "value",
    "std_error",
    "ci_low",
    "ci_high",
    "confidence_level",
    "ci_method",
    "target",
    "n",
    "ess",
    "ess_ratio",
    "notes",
)

#: Estimators that need a reward model q̂ (DM and the doubly robust family).
MODEL_ESTIMATORS: Final = frozenset({"dm", "dr", "sndr", "switch_dr", "dros"})
#: Interval method for the logging policy's value (a plain mean) when the evaluation's method
#: is specific to importance weights: Bottou's clipped-mass interval becomes its finite-sample
#: counterpart for a mean, empirical likelihood (of weighted data) the normal interval.
LOGGING_CI_FALLBACK: Final = {"bottou": "bernstein", "empirical_likelihood": "normal"}
#: Unclipped weighting estimators whose bounded intervals need an a priori weight bound, and
#: those interval methods (clipped IPS is bounded by its own max_weight).
WEIGHT_BOUND_ESTIMATORS: Final = frozenset({"ips", "snips"})
WEIGHT_BOUND_METHODS: Final = frozenset({"hoeffding", "bernstein", "empirical_likelihood"})
#: Estimators computable from mergeable sums over batches (the moment kernel).
STREAMING_ESTIMATORS: Final = frozenset({"ips", "clipped_ips", "snips"})


def resolve_estimators(
    estimators: Sequence[Any] | str,
    *,
    max_weight: float | None = None,
    tau: float | None = None,
    shrinkage: float | None = None,
) -> list[tuple[str, Any]]:
    """The (registry name, estimator object) pairs of ``evaluate``'s ``estimators`` argument.

    A name gets its settings (``max_weight`` for ``clipped_ips``, ``tau`` for ``switch_dr``,
    ``shrinkage`` for ``dros``: the fields of the estimator class) from the keyword arguments;
    an estimator object is used as it is.

    Raises
    ------
    ope.ParameterError
        No estimator, an unknown name or object, a setting missing or given but unused, or an
        estimator listed twice.

    Examples
    --------
    >>> from ope.evaluation import resolve_estimators
    >>> resolve_estimators(("ips", "clipped_ips"), max_weight=10.0)
    [('ips', IPS()), ('clipped_ips', ClippedIPS(max_weight=10.0))]
    """
    if isinstance(estimators, str):
        estimators = (estimators,)
    if not estimators:
        raise ParameterError(
            f"`estimators` is empty; pass e.g. ('ips', 'snips'). Known: {', '.join(ESTIMATORS)}."
        )
    settings = {"max_weight": max_weight, "tau": tau, "shrinkage": shrinkage}
    used: set[str] = set()
    resolved: list[tuple[str, Any]] = []
    for item in estimators:  # loop over estimators
        if isinstance(item, str):
            key = item.lower()
            if key not in ESTIMATORS:
                raise ParameterError(
                    f"unknown estimator {item!r} in `estimators`; choose from "
                    f"{', '.join(ESTIMATORS)}."
                )
            takes = estimator_settings(key)
            for name in takes:
                if settings.get(name) is None:
                    raise ParameterError(
                        f"estimator {key!r} needs {name}=... (`{name}`); pass it to evaluate (e.g. "
                        f"evaluate(..., {name}=10.0)) or pass an estimator object instead of "
                        "the name."
                    )
            used.update(takes)
            obj = get_estimator(key, **{name: settings[name] for name in takes})
        else:
            # an ope estimator object (a subclass too) is used as it is, under its registry name
            key = item.name if isinstance(item, Estimator) and item.name in ESTIMATORS else ""
            if not key:
                raise ParameterError(
                    f"estimators must be names ({', '.join(ESTIMATORS)}) or ope estimator "
                    f"objects; got {item!r}."
                )
            obj = item
        resolved.append((key, obj))
    unused = [k for k, v in settings.items() if v is not None and k not in used]
    if unused:
        raise ParameterError(
            f"{', '.join(unused)} was given but no estimator named in `estimators` uses it "
            f"(max_weight → 'clipped_ips', tau → 'switch_dr', shrinkage → 'dros')."
        )
    names = [k for k, _ in resolved]
    dup = sorted({k for k in names if names.count(k) > 1})
    if dup:
        raise ParameterError(f"estimator {', '.join(dup)} is listed twice in `estimators`.")
    return resolved


def clip_level(resolved: Sequence[tuple[str, Any]]) -> float | None:
    """The clip level of the clipped IPS among ``resolved`` (None without one)."""
    return next((est.max_weight for key, est in resolved if key == "clipped_ips"), None)


def check_streamable(resolved: Sequence[tuple[str, Any]], policies: Any, where: str) -> None:
    """Refuse what merged statistics cannot compute: estimators with a reward model, and a
    long-format policy table (it needs the whole log). ``where`` names the entry point."""
    unsupported = [k for k, _ in resolved if k not in STREAMING_ESTIMATORS]
    if unsupported:
        raise EstimationError(
            f"estimator(s) {', '.join(unsupported)} cannot run {where}; merged statistics "
            f"support {', '.join(sorted(STREAMING_ESTIMATORS))}. Read the logs eagerly "
            "(ope.evaluate(ope.read_logs(...))) for the others."
        )
    if policies is not None and not isinstance(policies, (list, tuple, Mapping)):
        raise PolicyError(
            f"{where}, policies must be target__<name> column names or a dict of policy "
            "objects; a long-format policy table needs the whole log (use "
            "ope.evaluate(ope.read_logs(...)))."
        )


@dataclass(frozen=True)
class EvaluationSettings:
    """The validated interval settings of one evaluation (see :meth:`checked`)."""

    ci: str
    confidence_level: float
    reward_range: tuple[float, float] | None
    weight_bound: float | None
    ci_options: dict[str, Any]

    @classmethod
    def checked(
        cls, *, ci: Any, confidence_level: Any, reward_range: Any, weight_bound: Any = None,
        n_resamples: Any = None, rng: Any = None,
    ) -> EvaluationSettings:
        """Validate the arguments of ``evaluate`` that every entry point shares, once.

        Raises
        ------
        ope.ParameterError
            An unknown ``ci``, a ``confidence_level`` outside (0, 1), a malformed
            ``reward_range``, ``weight_bound``, ``n_resamples`` or ``rng``, or ``n_resamples``
            without ``ci="bootstrap"``.

        Examples
        --------
        >>> from ope.evaluation import EvaluationSettings
        >>> EvaluationSettings.checked(ci="t", confidence_level=0.9, reward_range=(0, 1)).reward_range
        (0.0, 1.0)
        """
        method = check_choice(ci, "ci", CI_METHODS)
        check_rng(rng)  # validates; the seed itself is passed on (and recorded)
        options: dict[str, Any] = {}
        if method == "bootstrap":
            if n_resamples is not None:
                check_positive_int(n_resamples, "n_resamples")
            options = {"n_resamples": n_resamples, "rng": rng}
        elif n_resamples is not None:
            raise ParameterError("`n_resamples` applies only to ci='bootstrap'.")
        return cls(
            ci=method,
            confidence_level=check_confidence_level(confidence_level),
            reward_range=check_reward_range(reward_range),
            weight_bound=check_weight_bound(weight_bound),
            ci_options=options,
        )


def _factored_candidates(logs: BanditLogs) -> dict[str, dict[str, str]]:
    """Candidates given by factor: ``target__<policy>__<factor>`` beside ``propensity__<factor>``.

    Returns policy -> {factor: target column}. Columns whose suffix names no logged factor are
    ordinary candidates (a policy name may itself contain ``__``).
    """
    factors = {c[len("propensity__"):] for c in logs.columns if c.startswith("propensity__")}
    out: dict[str, dict[str, str]] = {}
    if not factors:
        return out
    for name in logs.target_policies:
        base, sep, factor = name.rpartition("__")
        if sep and base and factor in factors:
            out.setdefault(base, {})[factor] = f"target__{name}"
    return out


def _factored_arrays(logs: BanditLogs, changed: Mapping[str, str]) -> tuple[np.ndarray, np.ndarray]:
    """Logging and target probabilities of the changed factors only (the others cancel).

    The weight is prod_{k in C} q*_k / q_k (Markov factor replacement, Bottou et al. 2013);
    returning both products keeps every estimator and interval unchanged.
    """
    from ope.weights import factor_weights

    logged = {f: logs.column(f"propensity__{f}") for f in changed}
    target = {f: logs.column(col) for f, col in changed.items()}
    factor_weights(logged, target)  # validates ranges and lengths with helpful errors
    p = np.ones(logs.n, dtype=np.float64)
    t = np.ones(logs.n, dtype=np.float64)
    for f in changed:
        p *= logged[f]
        t *= target[f]
    return p, t


def _action_feature_matrix(table: Any, catalog: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Rows of the side table ``table`` (an ``action`` column + features) in ``catalog`` order.

    The numeric (and boolean) columns besides ``action`` are the features; other columns
    (hashed strings, ...) are left out and must be encoded first to be used.
    """
    import pyarrow as pa

    if type(table).__module__.partition(".")[0] == "pandas":
        table = pa.Table.from_pandas(table, preserve_index=False)
    if not isinstance(table, pa.Table):
        raise ParameterError(
            "action_features must be a pyarrow.Table or pandas.DataFrame with an `action` column "
            f"and numeric feature columns; got {type(table).__name__}."
        )
    if "action" not in table.column_names:
        raise SchemaError(
            "action_features has no `action` column to join on; it has: "
            f"{', '.join(table.column_names)}."
        )
    names = [
        f.name
        for f in table.schema
        if f.name != "action"
        and (pa.types.is_integer(f.type) or pa.types.is_floating(f.type) or pa.types.is_boolean(f.type))
    ]
    if not names:
        raise SchemaError(
            "action_features has no numeric feature column besides `action`; encode its "
            f"columns ({', '.join(c for c in table.column_names if c != 'action')}) as numbers."
        )
    keys = np.asarray(table.column("action").combine_chunks().to_numpy(zero_copy_only=False))
    uniq, counts = np.unique(keys, return_counts=True)
    if (counts > 1).any():
        raise SchemaError(
            f"action_features must have one row per action; {int((counts > 1).sum())} actions "
            f"repeat (e.g. {uniq[counts > 1][0]!r})."
        )
    try:
        order = np.argsort(keys, kind="stable")
        pos = np.searchsorted(keys[order], catalog)
        pos = np.minimum(pos, keys.size - 1)
        found = keys[order][pos] == catalog
    except TypeError as exc:  # labels of different kinds (int vs str)
        raise SchemaError(
            f"action_features' `action` labels ({keys.dtype}) cannot be matched with the logged "
            f"actions ({catalog.dtype}): {exc}"
        ) from None
    if not found.all():
        miss = catalog[~found]
        raise SchemaError(
            f"action_features has no row for {miss.size} action(s) logged or in a candidate's "
            f"support (e.g. {', '.join(repr(v) for v in miss[:5].tolist())}); give every action "
            "a row."
        )
    feats = context_matrix(_TableHolder(table.take(order[pos])), names, role="action feature")
    return feats, names


@dataclass(frozen=True)
class _TableHolder:
    """A bare pyarrow table where :func:`ope.context.context_matrix` expects logs."""

    table: Any


def _model_predictions(
    logs: BanditLogs,
    distributions: Mapping[str, Any],
    names: Sequence[str],
    *,
    reward_model: Any,
    context_columns: Sequence[str] | None,
    action_features: Any = None,
    rng: int | np.random.Generator | None,
) -> tuple[np.ndarray, np.ndarray, dict[str, list[str]], list[str]]:
    """Cross-fitted q̂(x_i, a_i) and q̂(x_i, π_p) for every policy p, over one action catalog.

    Returns ``(q_logged, q_target, model_columns, notes)``: ``model_columns`` has the context
    columns (``"context"``) and action-feature columns (``"action_features"``) the model used.
    """
    import scipy.sparse as sp

    from ope.context import context_column_choice
    from ope.reward_models import RewardModel

    notes: list[str] = []
    if action_features is None:
        action_features = getattr(logs, "action_features", None)
    if context_columns is not None:
        columns = list(context_columns)
    else:
        choice = context_column_choice(logs)
        columns = choice.columns
        notes += choice.notes
    if not columns and action_features is None:
        raise SchemaError(
            "DM/DR estimators need context features for the reward model, and these logs have "
            "no numeric feature columns (outcome-, id- and time-like names are left out by "
            "default: ope.context.OUTCOME_LIKE_NAMES); pass context_columns=[...], "
            "action_features=..., or use ips/snips."
        )
    x = context_matrix(logs, columns) if columns else np.empty((logs.n, 0), dtype=np.float64)
    # one catalog: the logged actions and every policy's support
    logged = logs.table.column("action").combine_chunks()
    pieces = [np.asarray(logged.to_numpy(zero_copy_only=False))]
    pieces += [np.asarray(distributions[p].actions) for p in names]
    catalog = np.unique(np.concatenate(pieces))
    codes = np.searchsorted(catalog, pieces[0])
    mats = []
    for p in names:
        dist = distributions[p]
        m = dist.matrix
        new_code = np.searchsorted(catalog, np.asarray(dist.actions)).astype(np.int64)
        mats.append(sp.csr_array((m.data, new_code[m.indices], m.indptr), shape=(m.shape[0], len(catalog))))
    feats, feat_names = None, []
    if action_features is not None:
        feats, feat_names = _action_feature_matrix(action_features, catalog)
    if reward_model is None:
        # with action features: shared feature effects, context x feature interactions, and an
        # intercept per action (RewardModel.action_intercepts)
        model = RewardModel(rng=rng, action_intercepts=feats is not None)
    elif isinstance(reward_model, RewardModel):
        model = reward_model
    else:
        model = RewardModel(estimator=reward_model, rng=rng)
    fitted = model.fit(
        x, codes, logs.column("reward"), n_actions=len(catalog), action_features=feats
    )
    q_logged = fitted.predict_logged()
    q_target = fitted.predict_policy(mats)
    q_target = np.asarray(q_target, dtype=np.float64).reshape(len(q_logged), len(names))
    return q_logged, q_target, {"context": columns, "action_features": feat_names}, notes


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
    # filled by __post_init__: (policy, estimator) -> (ci_low, ci_high), and the logging value's
    _intervals: dict[tuple[str, str], tuple[float, float]] = field(
        init=False, repr=False, compare=False
    )
    _logging_ci: tuple[float, float] = field(init=False, repr=False, compare=False)

    @classmethod
    def from_statistics(
        cls,
        stats: Any,
        resolved: Sequence[tuple[str, Any]],
        settings: EvaluationSettings,
        *,
        report: ValidationReport,
        notes: Iterable[str] = (),
    ) -> Evaluation:
        """The evaluation of merged statistics (``ope.streaming.MomentStats``) of many batches.

        Parameters
        ----------
        stats : ope.streaming.MomentStats
            Merged over every batch (scan) or partition (Dask), with the policy names.
        resolved : sequence of (str, estimator)
            :func:`resolve_estimators` of IPS, clipped IPS and SNIPS only.
        settings : EvaluationSettings
        report : ValidationReport
            The merged report of the pass.
        notes : iterable of str
            Evaluation-level notes besides the rejected-rows note.
        """
        rr, level = settings.reward_range, settings.confidence_level
        estimates: dict[tuple[str, str], Estimate] = {}
        for key, est in resolved:  # loop over estimators
            for name, res in zip(stats.names, stats.estimates(est, reward_range=rr, confidence_level=level)):
                estimates[(name, key)] = res
        return cls(
            estimates=estimates,
            logging=stats.logging_estimate(reward_range=rr, confidence_level=level),
            policies=list(stats.names),
            estimators=[k for k, _ in resolved],
            report=report,
            confidence_level=level,
            ci_method=settings.ci,
            notes=(*report.dropped_notes(), *notes),
            streaming=True,
            ci_options=settings.ci_options,
            weight_bound=settings.weight_bound,
            statistics=stats,
        )

    def __getitem__(self, key: tuple[str, str]) -> Estimate:
        try:
            return self.estimates[key]
        except KeyError:
            raise KeyError(
                f"no estimate for {key!r}; policies: {self.policies}, estimators: {self.estimators}"
            ) from None

    def __post_init__(self) -> None:
        object.__setattr__(self, "notes", tuple(self.notes))
        # every interval once, at construction: a method that does not apply fails here, and
        # table(), summary(), to_dict() reuse them (a bootstrap is not redrawn on each call)
        intervals = {key: self._compute_interval(est) for key, est in self.estimates.items()}
        object.__setattr__(self, "_intervals", intervals)
        object.__setattr__(self, "_logging_ci", self._compute_logging_interval())

    @property
    def n(self) -> int:
        """Rows used (those of the logging policy's value; every estimate uses the same)."""
        return int(self.logging.n)

    def _logging_interval(self) -> tuple[float, float]:
        return self._logging_ci

    def _compute_interval(self, est: Estimate) -> tuple[float, float]:
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
        ci = self.logging.ci(self.confidence_level, method, **options)
        return float(ci.low), float(ci.high)

    def table(self) -> pd.DataFrame:
        """One row per policy × estimator with the columns :data:`TABLE_COLUMNS`."""
        rows = []
        for p in self.policies:
            for e in self.estimators:
                est = self.estimates[(p, e)]
                low, high = self._intervals[(p, e)]
                rows.append(
                    {
                        "policy": p,
                        "estimator": e,
                        "value": est.value,
                        "std_error": est.std_error,
                        "ci_low": low,
                        "ci_high": high,
                        "confidence_level": self.confidence_level,
                        "ci_method": self.ci_method,
                        # what [ci_low, ci_high] covers: the policy's value or a clipped value
                        "target": est.target_of(self.ci_method),
                        "n": est.n,
                        "ess": est.ess,
                        "ess_ratio": est.ess / est.n if est.n else float("nan"),
                        "notes": "; ".join(est.notes),
                    }
                )
        return pd.DataFrame(rows, columns=list(TABLE_COLUMNS))

    def all_notes(self) -> tuple[str, ...]:
        """The evaluation's notes, then each estimate note once with the estimators it concerns
        (the same weight diagnostics recur under every weighting estimator)."""
        grouped: dict[tuple[str, str], list[str]] = {}
        for (p, e), est in self.estimates.items():
            for note in est.notes:
                grouped.setdefault((p, note), []).append(e)
        return (*self.notes, *(f"{p} ({', '.join(es)}): {note}" for (p, note), es in grouped.items()))


    def compare(
        self,
        policy: str,
        baseline: str = "logging",
        *,
        estimator: str | None = None,
        method: str = "normal",
    ) -> Estimate:
        """Paired difference ``policy − baseline`` on the same rows, with its interval.

        ``baseline="logging"`` compares with the logging policy's on-policy mean reward.
        """
        if self.streaming:
            raise EstimationError(
                "paired comparisons need the rows; evaluate eagerly (read_logs) to compare."
            )
        estimator = estimator or self.estimators[0]
        a = self[(policy, estimator)]
        b = self.logging if baseline == "logging" else self[(baseline, estimator)]
        return compare(a, b, confidence_level=self.confidence_level, method=method)

    def comparisons(self, *, method: str = "normal") -> pd.DataFrame:
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
        from_moments = self._paired_from_moments(method)
        rows = []
        for p in self.policies:
            for e in self.estimators:
                if (p, e) in from_moments:
                    value, se = from_moments[(p, e)]
                    n = self.logging.n
                    iv = (normal_interval(value, se, confidence_level=self.confidence_level)
                          if method == "normal" else
                          t_interval(value, se, n, confidence_level=self.confidence_level))
                    low, high = float(iv.low), float(iv.high)
                else:
                    d = self.compare(p, "logging", estimator=e, method=method)
                    ci = d.ci(self.confidence_level, method)
                    value, se, low, high = d.value, d.std_error, float(ci.low), float(ci.high)
                rows.append(
                    {
                        "policy": p,
                        "estimator": e,
                        "difference": value,
                        "std_error": se,
                        "ci_low": low,
                        "ci_high": high,
                        "better_than_logging": bool(low > 0),
                        "worse_than_logging": bool(high < 0),
                    }
                )
        return pd.DataFrame(rows)

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
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the estimates already carry these notes
                pairs = stats.paired_with_logging(
                    self._estimator_object(key, stats), reward_range=reward_range
                )
            for name, pair in zip(stats.names, pairs):
                if (name, key) in self.estimates:
                    out[(name, key)] = pair
        return out

    @staticmethod
    def _estimator_object(key: str, stats: Any) -> Any:
        if key == "clipped_ips":
            return get_estimator(key, max_weight=stats.max_weight)
        return get_estimator(key)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict with stable keys."""
        low, high = self._logging_interval()
        out: dict[str, Any] = {
            "confidence_level": self.confidence_level,
            "ci_method": self.ci_method,
            "streaming": self.streaming,
            "propensity_source": self.propensity_source,
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
        return out

    def _title(self) -> str:
        return (
            f"{len(self.policies)} candidate policies x {len(self.estimators)} estimators on "
            f"{self.logging.n:,} rows; {self.ci_method} intervals at {self.confidence_level:.0%}"
        )

    def _parts(self) -> ResultParts:
        low, high = self._logging_interval()
        return ResultParts(
            title=self._title(),
            fields=(
                ("logging policy value", self.logging.value),
                (f"logging policy interval ({self.logging_ci_method})", (low, high)),
                ("rows rejected", self.report.rows_rejected),
                ("propensities", self.propensity_source),
                *(() if self.model_columns is None else (
                    ("reward model context columns", _column_list(self.model_columns["context"])),
                    ("reward model action features",
                     _column_list(self.model_columns["action_features"])),
                )),
            ),
            table=self.table().drop(columns=["notes"]),
            notes=self.all_notes(),
        )

    def summary(self, *, truth: Mapping[str, float] | None = None) -> str:
        """Plain-text table of the estimates (and the true values when given), then notes."""
        t = self.table()
        lines = [self._title()]
        if self.report.rows_rejected:
            lines.append(
                f"  ({self.report.rows_rejected:,} of {self.report.rows_read:,} rows were rejected "
                f"and dropped: {dict(self.report.rejected)})"
            )
        low, high = self._logging_interval()
        lines.append(
            f"logging policy (mean logged reward): {self.logging.value:.4f}  "
            f"[{low:.4f}, {high:.4f}]"
            + ("" if self.logging_ci_method == self.ci_method else f" ({self.logging_ci_method})")
        )
        header = (
            f"{'policy':<18}{'estimator':<13}{'value':>9}{'std_err':>9}{'ci_low':>9}{'ci_high':>9}"
            f"{'covers':>9}{'ESS/n':>8}"
        )
        if truth is not None:
            header += f"{'truth':>9}{'in CI':>7}"
        lines += ["", header, "-" * len(header)]
        # "covers": what each interval covers, the policy's value or a clipped value (clipped
        # IPS whose clip binds: only its bottou interval covers the policy's value)
        for row in t.itertuples(index=False):
            line = (
                f"{row.policy:<18}{row.estimator:<13}{row.value:>9.4f}{row.std_error:>9.4f}"
                f"{row.ci_low:>9.4f}{row.ci_high:>9.4f}{str(row.target).split()[0]:>9}"
                f"{row.ess_ratio:>8.3f}"
            )
            if truth is not None and row.policy in truth:
                tv = truth[row.policy]
                line += f"{tv:>9.4f}{('yes' if row.ci_low <= tv <= row.ci_high else 'NO'):>7}"
            lines.append(line)
        notes = self.all_notes()
        if notes:
            lines.append("")
            lines += [f"[{i}] {n}" for i, n in enumerate(notes, 1)]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"Evaluation(policies={self.policies}, estimators={self.estimators}, "
            f"n={self.logging.n:,}, ci_method={self.ci_method!r})"
        )


def _column_list(columns: Sequence[str]) -> str:
    """``"3: a, b, c"`` (or ``"none"``), for the fields of a rendered Evaluation."""
    return f"{len(columns)}: {', '.join(columns)}" if columns else "none"


def _candidates(logs: BanditLogs, policies: Any, needs_model: bool) -> tuple[Any, dict[str, dict[str, str]]]:
    """The target propensities of the candidates, and the candidates given by factor.

    Returns ``(TargetPropensities, {policy: {factor: target column}})``.
    """
    from ope.policies import TargetPropensities, target_propensities

    factored = _factored_candidates(logs) if policies is None or isinstance(policies, (list, tuple)) else {}
    if factored:
        factor_cols = {col[len("target__"):] for cols in factored.values() for col in cols.values()}
        if policies is None:
            plain = [p for p in logs.target_policies if p not in factor_cols]
            factored_names = list(factored)
        else:
            plain = [p for p in policies if p not in factored]
            factored_names = [p for p in policies if p in factored]
        factored = {p: factored[p] for p in factored_names}
        if factored and needs_model:
            raise EstimationError(
                f"candidates {', '.join(factored)} are given by factor (target__<policy>__<factor>); "
                "DM/DR need each candidate's whole distribution. Use ips, clipped_ips or snips."
            )
        policies = plain
    if factored and not policies:
        return TargetPropensities([], np.empty((logs.n, 0))), factored
    try:
        tp = target_propensities(logs, policies, with_distributions=needs_model)
    except PolicyError as exc:
        if needs_model and "distribution" in str(exc).lower():
            raise PolicyError(
                f"{exc}\nDM/DR need each candidate's whole distribution; evaluate with "
                "estimators=('ips', 'snips', 'clipped_ips') or provide the distributions."
            ) from None
        raise
    if not tp.names and not factored:
        raise PolicyError(
            "no candidate policies to evaluate: the logs have no target__<name> columns and "
            "`policies` is None. Pass policies=... (names, a long-format table, or objects)."
        )
    return tp, factored


def _row_estimates(
    resolved: Sequence[tuple[str, Any]],
    settings: EvaluationSettings,
    reward: np.ndarray,
    propensity: np.ndarray,
    target: np.ndarray | Sequence[np.ndarray],
    names: Sequence[str],
    q_logged: np.ndarray | None = None,
    q_target: np.ndarray | None = None,
) -> tuple[dict[tuple[str, str], Estimate], Any]:
    """Every estimate of the candidates ``names`` on these rows, and the pass's statistics.

    IPS, clipped IPS and SNIPS always come from one pass of the moment kernel (so their numbers
    do not depend on which other estimators are asked for), backed by the rows for row-level
    intervals and paired comparisons; the others from one ``estimate_many`` pass each.
    ``target`` is the (n, P) matrix or the P columns (zero-copy views of the log's columns).
    Returns ``(estimates, MomentStats or None)``.
    """
    from ope.streaming import MomentStats

    if not len(names):
        return {}, None
    rr = settings.reward_range
    stats = None
    if any(key in STREAMING_ESTIMATORS for key, _ in resolved):
        stats = MomentStats.from_arrays(
            reward, propensity, target, max_weight=clip_level(resolved), names=names
        )
    out: dict[tuple[str, str], Estimate] = {}
    for key, est in resolved:  # loop over estimators
        if stats is not None and key in STREAMING_ESTIMATORS:
            results = stats.with_rows(
                stats.estimates(est, reward_range=rr, confidence_level=settings.confidence_level),
                reward=reward,
                logging_propensity=propensity,
                target_propensity=target,
                reward_range=rr,
            )
        else:
            matrix = target if isinstance(target, np.ndarray) else np.column_stack(list(target))
            results = estimate_many(
                est,
                reward=reward,
                logging_propensity=propensity,
                target_propensity=matrix,
                q_logged=q_logged,
                q_target=q_target,
                reward_range=rr,
                names=names,
                rewards_checked=True,  # checked once, in evaluate
            )
        out.update({(name, key): res for name, res in zip(names, results)})
    return out, stats


def _target_columns(logs: BanditLogs, policies: Any) -> tuple[list[str], list[np.ndarray]] | None:
    """The ``target__<name>`` columns of validated logs as zero-copy float64 views, or None
    when the candidates need the general path (a policy table, policy objects, factored
    candidates, targets the reader did not validate, or names to be checked there)."""
    if not logs.targets_validated():
        return None
    available = logs.target_policies
    if policies is None:
        names = list(available)
    elif isinstance(policies, (list, tuple)) and all(isinstance(x, str) for x in policies):
        names = [x[len("target__"):] if x not in available and x.startswith("target__") else x
                 for x in policies]
    else:
        return None
    if not names or len(set(names)) != len(names) or any(x not in available for x in names):
        return None  # target_propensities raises the precise error
    if _factored_candidates(logs):
        return None
    return names, [logs.column(f"target__{x}") for x in names]


def _logging_estimate(stats: Any, reward: np.ndarray, settings: EvaluationSettings) -> Estimate:
    """The logging value from the pass's statistics (backed by the rows), or on its own."""
    if stats is None:
        return logging_value(reward, reward_range=settings.reward_range, rewards_checked=True)
    (base,) = stats.with_rows(
        [stats.logging_estimate(reward_range=settings.reward_range)],
        reward=reward, logging_propensity=None, target_propensity=None,
        reward_range=settings.reward_range,
    )
    return base


def evaluate(
    logs: Any,
    policies: Any = None,
    *,
    estimators: Sequence[Any] | str = ("ips", "snips", "dr"),
    ci: str = "normal",
    confidence_level: float = 0.95,
    reward_range: tuple[float, float] | None = None,
    max_weight: float | None = None,
    weight_bound: float | None = None,
    tau: float | None = None,
    shrinkage: float | None = None,
    reward_model: Any = None,
    context_columns: Sequence[str] | None = None,
    n_resamples: int | None = None,
    rng: int | np.random.Generator | None = None,
    action_features: Any = None,
) -> Evaluation:
    """Estimate the value of P candidate policies with several estimators and intervals.

    Parameters
    ----------
    logs : BanditLogs, LogScan, path, pandas.DataFrame or pyarrow.Table
        Validated logs (``ope.read_logs``), a lazy scan (``ope.scan_logs``: IPS, clipped IPS
        and SNIPS only, computed from merged sums in bounded memory), or anything
        ``ope.read_logs`` accepts.
    policies : None, list of str, long-format policy table, or dict of name to policy object
        ``None`` evaluates every ``target__<name>`` column (see ``ope.policies``).
    estimators : sequence of str or estimator objects
        Names among ``dm, ips, clipped_ips, snips, dr, sndr, switch_dr, dros``.
    ci : str, default "normal"
        Interval method for ``ci_low``/``ci_high`` (``normal, t, bootstrap, hoeffding,
        bernstein, bottou, empirical_likelihood, betting``). Bounded methods need
        ``reward_range``; a method that does not apply to one of the estimators is an error.
    confidence_level : float, default 0.95
    reward_range : (float, float), optional
        A priori range of the rewards (clicks: (0, 1)). Never taken from the data.
    max_weight, tau, shrinkage : float, optional
        Settings of ``clipped_ips``, ``switch_dr`` and ``dros`` when those are named.
    weight_bound : float, optional
        A priori bound on the importance weights π_e/π_b of every context and action (e.g.
        1 / the smallest probability the logger can give), used by the ``hoeffding``,
        ``bernstein`` and ``empirical_likelihood`` intervals of IPS and SNIPS. The largest
        observed weight is not a bound.
    reward_model : scikit-learn estimator or ope.reward_models.RewardModel, optional
        Reward model for DM and the DR family, cross-fitted (default: ``RewardModel()``).
    context_columns : sequence of str, optional
        Context features of the reward model. Default: every numeric column outside the log
        schema whose name is not outcome-, id- or time-like (``cost``, ``latency_ms``,
        ``tokens``, ``click``, ``conversion``, ``revenue``, ``weight``, ``reward*``,
        ``outcome*``, ``timestamp*``, ``*_id``, ``*_time``, ``*_at``, and the Open Bandit
        Dataset's ``user-item_affinity_*``; see ``ope.context``); past 20 columns a note lists
        them. Named columns are always used. The columns used are in
        :attr:`Evaluation.model_columns`.
    action_features : pyarrow.Table or pandas.DataFrame, optional
        Features of the actions (items) for the reward model: an ``action`` column with one row
        per action (every logged action and every action in a candidate's support) and numeric
        feature columns (other columns are left out). Default: ``logs.action_features`` when an
        importer attached them (``ope.read_obd``, ``ope.from_bandit_feedback``), else none.
        They are joined on the action, for the logged action (``q_logged``) and for each action
        in a row's support (``q_target``); the default model then fits Ridge on
        ``[x, e(a), x ⊗ e(a), one-hot(a)]``: the context, the action's features, their
        products (the effect of a feature may depend on the context) and one intercept per
        action (``RewardModel(action_intercepts=True)``). A ``RewardModel`` passed as
        ``reward_model`` keeps its own settings.
    n_resamples : int, optional
        Bootstrap resamples when ``ci="bootstrap"``.
    rng : int, numpy.random.Generator or None
        Randomness of cross-fitting folds and the bootstrap.

    Returns
    -------
    Evaluation

    Raises
    ------
    ope.ParameterError
        A bad argument (unknown ``ci`` or estimator, ``confidence_level`` outside (0, 1), ...),
        found before any row is read.

    Notes
    -----
    IPS, clipped IPS and SNIPS share one pass of the moment kernel over an (n, P) block of
    target propensities, and every other estimator runs one chunked pass, so P candidates cost
    about one pass, not P; the IPS numbers are the same whatever else is asked for. DM/DR need each candidate's full distribution over
    every row's support (``target_dist__<name>`` columns, a long-format policy table, or policy
    objects); the reward model is evaluated only on those (row, action) pairs.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> import ope
    >>> df = pd.DataFrame({"action": [0, 1, 1, 0], "propensity": [0.5] * 4,
    ...                    "reward": [1.0, 0.0, 1.0, 0.0], "target__always_1": [0.0, 1.0, 1.0, 0.0]})
    >>> ev = ope.evaluate(df, estimators=("ips", "snips"))
    >>> ev.table()[["policy", "estimator", "value"]].to_dict(orient="records")
    [{'policy': 'always_1', 'estimator': 'ips', 'value': 0.5}, {'policy': 'always_1', 'estimator': 'snips', 'value': 0.5}]
    """
    from ope.io import LogScan, read_logs

    settings = EvaluationSettings.checked(
        ci=ci,
        confidence_level=confidence_level,
        reward_range=reward_range,
        weight_bound=weight_bound,
        n_resamples=n_resamples,
        rng=rng,
    )
    resolved = resolve_estimators(estimators, max_weight=max_weight, tau=tau, shrinkage=shrinkage)
    if isinstance(logs, LogScan):
        return _evaluate_streaming(logs, policies, resolved, settings)
    if not isinstance(logs, BanditLogs):
        logs = read_logs(logs)
    needs_model = any(k in MODEL_ESTIMATORS for k, _ in resolved)
    direct = None if needs_model else _target_columns(logs, policies)
    if direct is not None:  # the log's own columns: no (n, P) copy
        names, target = direct
        factored: dict[str, dict[str, str]] = {}
        rows_ignored = 0
    else:
        tp, factored = _candidates(logs, policies, needs_model)
        names, target, rows_ignored = tp.names, tp.values, tp.table_rows_ignored
    reward = logs.column("reward")
    # the one check of the rewards against reward_range for every estimator of this call
    check_rewards_in_range(reward, settings.reward_range)
    propensity = logs.column("propensity")
    q_logged = q_target = None
    model_columns = None
    model_notes: list[str] = []
    if needs_model:
        q_logged, q_target, model_columns, model_notes = _model_predictions(
            logs,
            tp.distributions,
            tp.names,
            reward_model=reward_model,
            context_columns=context_columns,
            action_features=action_features,
            rng=rng,
        )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        estimates, stats = _row_estimates(
            resolved, settings, reward, propensity, target, names, q_logged, q_target
        )
        for name, changed in factored.items():  # loop over factored candidates
            p_c, t_c = _factored_arrays(logs, changed)
            estimates.update(
                _row_estimates(resolved, settings, reward, p_c, t_c[:, None], [name])[0]
            )
        base = _logging_estimate(stats, reward, settings)
    # the estimates carry these as notes; re-emit each distinct warning once
    for category, message in dict.fromkeys((w.category, str(w.message)) for w in caught):
        warnings.warn(message, category, stacklevel=2)
    notes = logs.report.dropped_notes()
    notes += model_notes
    source = propensity_info(logs)
    estimated = estimated_propensity_note(logs)
    if estimated is not None:
        notes.append(estimated)
    if rows_ignored:
        notes.append(
            f"{rows_ignored:,} policy-table rows for events dropped from the logs were "
            "ignored"
        )
    return Evaluation(
        estimates=estimates,
        logging=base,
        policies=[*names, *factored],
        estimators=[k for k, _ in resolved],
        report=logs.report,
        confidence_level=settings.confidence_level,
        ci_method=settings.ci,
        notes=tuple(notes),
        ci_options=settings.ci_options,
        weight_bound=settings.weight_bound,
        propensity_source=source["propensity_source"],
        model_columns=model_columns,
        statistics=stats,
    )



def batch_statistics(logs: BanditLogs, policies: Any, max_weight: float | None) -> Any:
    """The moment statistics (:class:`ope.streaming.MomentStats`) of one validated batch: the
    per-batch step shared by the scan and the Dask partitions, merged by the same kernel. The
    batch's ``target__`` columns are read as they are (no (n, P) copy) when the reader
    validated them."""
    from ope.policies import target_propensities
    from ope.streaming import MomentStats

    direct = _target_columns(logs, policies)
    if direct is not None:
        names, target = direct
    else:
        tp = target_propensities(logs, policies)
        names, target = tp.names, tp.values
    return MomentStats.from_arrays(
        logs.column("reward"),
        logs.column("propensity"),
        target,
        max_weight=max_weight,
        names=names,
    )


def _evaluate_streaming(
    scan: Any,
    policies: Any,
    resolved: list[tuple[str, Any]],
    settings: EvaluationSettings,
) -> Evaluation:
    """The evaluation of a lazy scan: the moment kernel per batch, merged."""
    check_streamable(resolved, policies, "over a lazy scan")
    stats = None
    for batch in scan.to_batches():  # loop over batches
        part = batch_statistics(batch, policies, clip_level(resolved))
        stats = part if stats is None else stats.merge(part)
    if stats is None:
        raise EstimationError(f"the scan of {scan.source} yielded no rows.")
    return Evaluation.from_statistics(stats, resolved, settings, report=scan.report)
