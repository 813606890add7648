"""The passes an evaluation plan runs: eager logs (:func:`evaluate_eager`: one pass of the moment
kernel for IPS, clipped IPS and SNIPS, one chunked pass per other estimator, segments, the
shared bootstrap) and a lazy scan (:func:`evaluate_scan`: :func:`batch_statistics` per batch,
merged). :mod:`ope.evaluation.plan` calls them; they read the plan, never import it.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ope._validation import (
    RowOrigin,
    check_rewards_in_range,
)
from ope._thresholds import MIN_ROWS
from ope.context import action_feature_matrix, context_matrix, feature_labels
from ope.estimators import (
    LoggingValue,
    estimate_many,
    estimate_weighted_many,
    logging_value,
)
from ope.exceptions import (
    EstimationError,
    OPEError,
    ParameterError,
    PolicyError,
    SchemaError,
    ValidationError,
)
from ope.logs import BanditLogs
from ope._provenance import propensity_notes
from ope.propensity import propensity_info
from ope.results import (
    Estimate,
    Provenance,
)
from ope.schema import check_segment_columns
from ope.weights import (
    check_sampling_weight,
    sampling_weight_column,
    sampling_weight_note,
)
from ope.marginal import one_per_item, reads_aligned_columns
from ope.evaluation._settings import (
    MODEL_ESTIMATORS,
    STREAMING_ESTIMATORS,
    EvaluationSettings,
    check_embedding,
)
from ope.evaluation.result import (
    Evaluation,
)

__all__ = [
    "model_estimators_apply",
    "model_obstacle",
    "evaluate_eager",
    "SharedPass",
    "shares_pass",
    "shared_passes",
    "model_predictions",
    "evaluate_scan",
    "batch_statistics",
    "merged_marginal_notes",
    "EmbeddingStatistics",
]


def _factored_candidates(logs: BanditLogs) -> dict[str, dict[str, str]]:
    """Candidates given by factor: ``target__<policy>__<factor>`` beside ``propensity__<factor>``.

    Returns policy -> {factor: target column}. Columns whose suffix names no logged factor are
    ordinary candidates (a policy name may itself contain ``__``).
    """
    factors = {c[len("propensity__") :] for c in logs.columns if c.startswith("propensity__")}
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


def model_predictions(
    logs: BanditLogs,
    distributions: Mapping[str, Any],
    names: Sequence[str],
    *,
    reward_model: Any,
    context_columns: Sequence[str] | None,
    action_features: Any = None,
    rng: int | np.random.Generator | None,
    embedding: Any = None,
    outcomes: np.ndarray | None = None,
    weight_column: str | None = None,
) -> tuple[np.ndarray, np.ndarray, dict[str, list[str]], list[str]]:
    """Cross-fitted q̂(x_i, a_i) and q̂(x_i, π_p) for every policy p, over one action catalog.

    Returns ``(q_logged, q_target, model_columns, notes)``: ``model_columns`` has the context
    columns (``"context"``) and action-feature columns (``"action_features"``) the model used.
    The rows' sampling weights (column ``weight_column``; default the ``weight`` column when
    present, as :func:`ope.evaluate` reads them) weigh the model's fit, and that column is
    never one of its context columns.
    A :class:`~ope.reward_models.TwoStepRewardModel` reads each item's cluster from
    ``embedding`` (:func:`ope.marginal.item_clusters`). ``outcomes`` (n, L), instead of the
    reward, fits one model per column on the same design and catalog (the indicators of DR's
    outcome CDF, :func:`ope.outcome_distribution`): ``q_logged`` is then (n, L) and
    ``q_target`` (n, P, L).
    """
    import scipy.sparse as sp

    from ope.context import context_column_choice

    notes: list[str] = []
    if action_features is None:
        action_features = logs.action_features
    weight_column = sampling_weight_column(logs.columns, weight_column)
    weight = None
    if weight_column is not None:
        weight = check_sampling_weight(logs.column(weight_column), logs.n, name=weight_column)
    if context_columns is not None:
        columns = list(context_columns)
        if weight_column in columns:
            raise ParameterError(
                f"`context_columns` names {weight_column!r}, the column of the rows' sampling "
                "weights: a property of the logging pipeline, not of the context, and the "
                "weights of the reward model's fit. Drop it from context_columns (a feature "
                "that happens to equal it can be copied under another name)."
            )
    else:
        choice = context_column_choice(logs, weight_column=weight_column)
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
        mats.append(
            sp.csr_array((m.data, new_code[m.indices], m.indptr), shape=(m.shape[0], len(catalog)))
        )
    feats = None
    feat_names: list[str] = []
    if action_features is not None:
        feats, feat_names = action_feature_matrix(action_features, catalog)
    targets = (
        [logs.column("reward")]
        if outcomes is None
        else [outcomes[:, c] for c in range(outcomes.shape[1])]
    )
    found = [  # a loop over the outcomes modelled (one for DM/DR), not rows
        _fit_predict(logs, x, codes, y, mats, catalog, feats, reward_model, rng, embedding, weight)
        for y in targets
    ]
    q_logged = np.column_stack([q for q, _ in found])
    q_target = np.stack([q for _, q in found], axis=-1)
    if not (np.isfinite(q_logged).all() and np.isfinite(q_target).all()) and x.shape[1]:
        _name_unfit_features(logs, columns, x)
    if outcomes is None:
        q_logged, q_target = q_logged[:, 0], q_target[..., 0]
    return q_logged, q_target, {"context": columns, "action_features": feat_names}, notes


def _fit_predict(
    logs: BanditLogs,
    x: np.ndarray,
    codes: np.ndarray,
    y: np.ndarray,
    mats: list[Any],
    catalog: np.ndarray,
    feats: np.ndarray | None,
    reward_model: Any,
    rng: int | np.random.Generator | None,
    embedding: Any,
    weight: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """One cross-fitted model of ``y``, fitted with the rows' sampling weights ``weight`` when
    given: q̂ at the logged actions (n,) and under each policy (n, P)."""
    from ope.reward_models import RewardModel, TwoStepRewardModel

    if isinstance(reward_model, TwoStepRewardModel):
        from ope.marginal import item_clusters

        clusters = None if embedding is None else item_clusters(logs, embedding, catalog)
        if clusters is None:
            raise ParameterError(
                "TwoStepRewardModel needs one cluster per item: pass embedding=ActionEmbedding("
                "clusters=<an item-table column>) or ActionEmbedding(columns=[...]) with the "
                "items' table (per-row clusters and a stochastic p(e|a) give none); or use "
                "RewardModel."
            )
        pair = reward_model.pair_column
        if pair is not None and pair not in logs.table.column_names:
            raise SchemaError(
                f"TwoStepRewardModel(pair_column={pair!r}): the logs have no column {pair!r}; "
                f"columns: {', '.join(map(repr, logs.table.column_names))}."
            )
        groups = None if pair is None else logs.table.column(pair).to_numpy(zero_copy_only=False)
        fitted = reward_model.fit(
            x,
            codes,
            y,
            clusters=clusters,
            n_actions=len(catalog),
            groups=groups,
            sample_weight=weight,
        )
    else:
        if reward_model is None:
            # with action features: shared feature effects, context x feature interactions,
            # and an intercept per action (RewardModel.action_intercepts)
            model = RewardModel(rng=rng, action_intercepts=feats is not None)
        elif isinstance(reward_model, RewardModel):
            model = reward_model
        else:
            model = RewardModel(estimator=reward_model, rng=rng)
        fitted = model.fit(
            x, codes, y, n_actions=len(catalog), action_features=feats, sample_weight=weight
        )
    q_logged = fitted.predict_logged()
    q_target = fitted.predict_policy(mats)
    return q_logged, np.asarray(q_target, dtype=np.float64).reshape(len(q_logged), len(mats))


def _name_unfit_features(logs: BanditLogs, columns: Sequence[str], x: np.ndarray) -> None:
    """A reward model whose predictions are not finite: name the context column(s) whose
    magnitudes overflow its fit (squares beyond float64), rather than a derived quantity."""
    labels = feature_labels(logs, columns)
    with np.errstate(all="ignore"):
        peak = np.nanmax(np.abs(np.where(np.isfinite(x), x, 0.0)), axis=0)
    worst = [j for j in np.argsort(-peak) if peak[j] > 1e150] or [int(np.argmax(peak))]
    named = ", ".join(f"{labels[j]!r} (max |value| {peak[j]:.3g})" for j in worst[:5])
    raise ValidationError(
        f"the reward model of DM/DR gave non-finite predictions: context column(s) {named} are "
        "too large for its fit (their squares overflow float64). Rescale them (e.g. divide by "
        "a power of ten or standardize), or leave them out with context_columns=[...]."
    )


def model_estimators_apply(
    logs: BanditLogs,
    policies: Any,
    *,
    context_columns: Sequence[str] | None = None,
    action_features: Any = None,
    weight_column: str | None = None,
) -> bool:
    """Whether DM and the DR family can run on these logs and candidates: each candidate's
    whole distribution over every row's support is known, and the reward model has features
    (``context_columns`` or ``action_features`` given, else the logs' own: the default context
    columns of :func:`ope.context.context_column_choice`, never the sampling weights'
    ``weight_column``, or their action features). Logs with no feature column, such as DSJSON
    imported without features, give False."""
    try:
        _candidates(logs, policies, True)
    except (PolicyError, EstimationError):
        return False
    return _model_has_features(logs, context_columns, action_features, weight_column)


def _model_has_features(
    logs: BanditLogs,
    context_columns: Sequence[str] | None,
    action_features: Any,
    weight_column: str | None = None,
) -> bool:
    """Whether a reward model has features on these logs: ``context_columns`` or
    ``action_features`` given, else the logs' action features or default context columns
    (the sampling weights' ``weight_column`` is none of them)."""
    if action_features is not None or logs.action_features is not None:
        return True
    if context_columns is not None:
        return len(list(context_columns)) > 0
    from ope.context import context_column_choice

    return len(context_column_choice(logs, weight_column=weight_column).columns) > 0


def model_obstacle(
    logs: BanditLogs, policies: Any, model: Mapping[str, Any], weight_column: str | None = None
) -> str | None:
    """Why DM and the DR family cannot run on these logs and candidates, read off the logs'
    columns alone (no pass over the rows), or None: the candidates named by the logs' own
    ``target__<name>`` columns (``policies`` None or names) lack their whole distributions
    (``candidates`` and ``target_dist__<name>``) or are given by factor, or the reward model
    has no features (:func:`model_estimators_apply` resolves the distributions too)."""
    if policies is None or (
        isinstance(policies, (list, tuple)) and all(isinstance(p, str) for p in policies)
    ):
        available = logs.target_policies
        # a name may be given with its column's prefix, as target_propensities reads it
        names = (
            list(available)
            if policies is None
            else [
                p[len("target__") :]
                if p not in available
                and p.startswith("target__")
                and p[len("target__") :] in available
                else p
                for p in policies
            ]
        )
        factored = _factored_candidates(logs)
        if factored and (policies is None or any(p in factored for p in names)):
            return (
                "candidates given by factor (target__<policy>__<factor>) have no whole distribution"
            )
        columns = set(logs.table.column_names)
        lacking = ["candidates"] if "candidates" not in columns else []
        lacking += [f"target_dist__{p}" for p in names if f"target_dist__{p}" not in columns]
        if lacking:
            shown = ", ".join(lacking[:3]) + (", ..." if len(lacking) > 3 else "")
            return f"the logs lack {shown}, each candidate's whole distribution"
    if not _model_has_features(
        logs, model.get("context_columns"), model.get("action_features"), weight_column
    ):
        return "the logs have no context column for its reward model"
    return None


def _candidates(
    logs: BanditLogs, policies: Any, needs_model: bool, needing: Sequence[str] = ()
) -> tuple[Any, dict[str, dict[str, str]]]:
    """The target propensities of the candidates, and the candidates given by factor;
    ``needing`` names the estimators that need whole distributions (for the messages).

    Returns ``(TargetPropensities, {policy: {factor: target column}})``.
    """
    who = (
        f"{', '.join(needing)} need{'s' if len(needing) == 1 else ''}" if needing else "DM/DR need"
    )
    from ope.policies import TargetPropensities, target_propensities

    factored = (
        _factored_candidates(logs)
        if policies is None or isinstance(policies, (list, tuple))
        else {}
    )
    if factored:
        factor_cols = {
            col[len("target__") :] for cols in factored.values() for col in cols.values()
        }
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
                f"{who} each candidate's whole distribution. Use ips, clipped_ips or snips."
            )
        policies = plain
    if factored and not policies:
        return TargetPropensities([], np.empty((logs.n, 0))), factored
    try:
        tp = target_propensities(logs, policies, with_distributions=needs_model)
    except PolicyError as exc:
        if needs_model and "distribution" in str(exc).lower():
            raise PolicyError(
                f"{exc}\n{who} each candidate's whole distribution; evaluate with "
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
    sampling_weight: np.ndarray | None = None,
    logging_out: list[Estimate] | None = None,
    stats: Any = None,
) -> tuple[dict[tuple[str, str], Estimate], Any]:
    """Every estimate of the candidates ``names`` on these rows, and the pass's statistics.

    IPS, clipped IPS and SNIPS always come from one pass of the moment kernel (so their numbers
    do not depend on which other estimators are asked for), backed by the rows for row-level
    intervals and paired comparisons; the others from one ``estimate_many`` pass each.
    ``target`` is the (n, P) matrix or the P columns (zero-copy views of the log's columns).
    Returns ``(estimates, MomentStats or None)``. With ``sampling_weight`` every estimator runs
    its Horvitz-Thompson weighted form (``estimate_many(..., sampling_weight=...)``) and no
    moment statistics are formed; the weighted logging value then comes from the same pass,
    appended to ``logging_out`` when it is given. ``stats`` (MomentStats of these rows and
    candidates, e.g. from the one pass of several outcomes, :func:`ope.evaluate_outcomes`)
    replace the pass.
    """
    from ope.streaming import MomentStats

    if not len(names):
        return {}, None
    rr = settings.reward_range
    if (
        stats is None
        and sampling_weight is None
        and any(key in STREAMING_ESTIMATORS for key, _ in resolved)
    ):
        stats = MomentStats.from_arrays(
            reward,
            propensity,
            target,
            names=names,
            estimators=[e for k, e in resolved if k in STREAMING_ESTIMATORS],
        )
    out: dict[tuple[str, str], Estimate] = {}
    one_pass = [(k, e) for k, e in resolved if k in STREAMING_ESTIMATORS]
    weighted: dict[str, list[Estimate]] = {}
    if sampling_weight is not None and one_pass:  # one kernel pass for IPS, SNIPS, clipped IPS
        with_logging = logging_out is not None  # and the logging value
        found = estimate_weighted_many(
            [e for _, e in one_pass] + ([LoggingValue()] if with_logging else []),
            reward=reward,
            logging_propensity=propensity,
            target_propensity=target,
            sampling_weight=sampling_weight,
            weight_name=settings.weight_column or "sampling_weight",
            reward_range=rr,
            names=names,
            rewards_checked=True,
        )
        if logging_out is not None:
            logging_out.extend(found.pop())
        weighted = dict(zip([k for k, _ in one_pass], found))
    for key, est in resolved:  # loop over estimators
        if key in weighted:
            results = weighted[key]
        elif stats is not None and key in STREAMING_ESTIMATORS:
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
                sampling_weight=sampling_weight,
                weight_name=settings.weight_column or "sampling_weight",
            )
        out.update({(name, key): res for name, res in zip(names, results)})
    return out, stats


def _target_columns(logs: BanditLogs, policies: Any) -> tuple[list[str], list[np.ndarray]] | None:
    """The ``target__<name>`` columns of validated logs as zero-copy float64 views
    (:func:`ope.policies.join.validated_target_columns`), or None when the candidates need the
    general path (also when they are given by factor)."""
    from ope.policies.join import validated_target_columns

    if _factored_candidates(logs):
        return None
    return validated_target_columns(logs, policies)


def _logging_estimate(
    stats: Any,
    reward: np.ndarray,
    settings: EvaluationSettings,
    sampling_weight: np.ndarray | None = None,
) -> Estimate:
    """The logging value from the pass's statistics (backed by the rows), or on its own."""
    if stats is None:
        return logging_value(
            reward,
            reward_range=settings.reward_range,
            rewards_checked=True,
            sampling_weight=sampling_weight,
            weight_name=settings.weight_column or "sampling_weight",
        )
    (base,) = stats.with_rows(
        [stats.logging_estimate(reward_range=settings.reward_range)],
        reward=reward,
        logging_propensity=None,
        target_propensity=None,
        reward_range=settings.reward_range,
    )
    return base


def evaluate_eager(
    logs: BanditLogs, plan: Any, provenance: Provenance, *, shared: SharedPass | None = None
) -> Evaluation:
    """The evaluation of validated logs under ``plan`` (an
    :class:`ope.evaluation.plan.EvaluationPlan`, read here, not imported): the eager driver.
    ``shared``: the candidates and the statistics of these rows already formed by a pass
    shared with other outcomes (:func:`ope.evaluation.outcomes.evaluate_outcomes`)."""
    policies, resolved, model = plan.policies, plan.resolved, plan.model
    settings = dataclasses.replace(
        plan.settings, weight_column=sampling_weight_column(logs.columns, plan.weight_column)
    )
    segment_columns = check_segment_columns(logs.table.schema, plan.by, source=logs.report.source)
    embedding = plan.embedding
    check_embedding(resolved, embedding, running=True)
    model, embedding_notes = _without_observed_embedding(
        logs, model, embedding, settings.weight_column
    )
    run = _eager_run(logs, policies, resolved, settings, model, embedding=embedding, shared=shared)
    segments: dict[tuple[str, str, str, str], Estimate] = {}
    segment_notes: list[str] = []
    if segment_columns:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # each segment's estimates carry their own notes
            segments, segment_notes = _segment_estimates(
                logs, segment_columns, policies, resolved, settings, model, run, embedding
            )
    interval_values = None
    if settings.ci == "bootstrap":
        interval_values = _shared_bootstrap_intervals(run, resolved, settings)
    notes = logs.report.dropped_notes()
    if run.sampling_weight is not None:
        notes.append(
            sampling_weight_note(
                settings.weight_column or "", float(np.sum(run.sampling_weight)), logs.n
            )
        )
    notes += run.model_notes
    notes += embedding_notes
    notes += _marginal_notes(resolved, embedding, run.embedding_checks)
    source = propensity_info(logs)
    notes += propensity_notes(
        logs,
        None if run.sampling_weight is None else settings.weight_column,
        run.sampling_weight,
    )
    if run.rows_ignored:
        notes.append(
            f"{run.rows_ignored:,} policy-table rows for events dropped from the logs were ignored"
        )
    notes += segment_notes
    return Evaluation(
        estimates=run.estimates,
        logging=run.logging,
        policies=[*run.names, *run.factored],
        estimators=[k for k, _ in resolved],
        report=logs.report,
        confidence_level=settings.confidence_level,
        ci_method=settings.ci,
        notes=tuple(notes),
        ci_options=settings.ci_options,
        weight_bound=settings.weight_bound,
        propensity_source=source["propensity_source"],
        model_columns=run.model_columns,
        statistics=run.stats,
        by=tuple(segment_columns),
        segment_estimates=segments,
        interval_values=interval_values,
        ci_fallback=settings.ci_fallback,
        weight_column=None if run.sampling_weight is None else settings.weight_column,
        embedding_checks=run.embedding_checks,
        _provenance=provenance,
    )


@dataclass(frozen=True, eq=False)
class SharedPass:
    """The candidates of the rows and their moment statistics for one outcome, formed by one
    pass shared by several outcomes of the same rows (``ope.streaming.MomentStats.from_outcomes``):
    the eager driver uses them instead of resolving the candidates and running its own pass.
    Only for IPS, clipped IPS and SNIPS, without sampling weights, segments or factored
    candidates (:func:`shares_pass`)."""

    names: list[str]
    target: Any  # (n, P) matrix or P column views
    rows_ignored: int
    stats: Any  # MomentStats


def shares_pass(plan: Any, logs: BanditLogs) -> str | None:
    """None when several outcomes of ``logs`` can share one pass under ``plan``, else why not."""
    if any(key not in STREAMING_ESTIMATORS for key, _ in plan.resolved):
        return "an estimator other than ips, clipped_ips and snips"
    if sampling_weight_column(logs.columns, plan.weight_column) is not None:
        return "sampling weights"
    if plan.by:
        return "segments"
    if _factored_candidates(logs):
        return "candidates given by factor"
    return None


def shared_passes(
    logs: BanditLogs, plan: Any, rewards: Sequence[np.ndarray]
) -> list[SharedPass] | None:
    """One :class:`SharedPass` per outcome in ``rewards`` (each (n,), checked finite) of
    ``logs`` under ``plan``, from one pass of the moment kernel, or None when the plan does not
    allow a shared pass (:func:`shares_pass`) or there are no candidates."""
    from ope.streaming import MomentStats

    if shares_pass(plan, logs) is not None:
        return None
    for r in rewards:  # the range check of each outcome, before the pass (as evaluate does)
        check_rewards_in_range(r, plan.settings.reward_range)
    direct = _target_columns(logs, plan.policies)
    if direct is not None:  # the logs' own columns: no (n, P) copy
        names, target = direct
        rows_ignored = 0
    else:
        tp, _ = _candidates(logs, plan.policies, False)
        names, target, rows_ignored = tp.names, tp.values, tp.table_rows_ignored
    if not len(names):
        return None
    stats = MomentStats.from_outcomes(
        rewards,
        logs.column("propensity"),
        target,
        names=names,
        estimators=[e for k, e in plan.resolved if k in STREAMING_ESTIMATORS],
    )
    return [SharedPass(list(names), target, rows_ignored, s) for s in stats]


@dataclass(frozen=True, eq=False)
class _EagerRun:
    """What one eager pass over validated logs computed (the inputs kept for the intervals)."""

    names: list[str]
    target: Any  # (n, P) matrix or P column views
    factored: dict[str, dict[str, str]]
    rows_ignored: int
    reward: np.ndarray
    propensity: np.ndarray
    sampling_weight: np.ndarray | None
    estimates: dict[tuple[str, str], Estimate]
    logging: Estimate
    stats: Any
    model_columns: dict[str, list[str]] | None
    model_notes: list[str]
    distributions: Mapping[str, Any] | None = None  # each candidate's, when DM/DR/MIPS asked
    embedding_checks: tuple[Any, ...] = ()  # the marginalized estimators' embedding tests


def _eager_run(
    logs: BanditLogs,
    policies: Any,
    resolved: Sequence[tuple[str, Any]],
    settings: EvaluationSettings,
    model: Mapping[str, Any],
    *,
    candidates: Any = None,
    embedding: Any = None,
    shared: SharedPass | None = None,
) -> _EagerRun:
    """Every estimate of ``resolved`` on the rows of ``logs`` (the body of :func:`evaluate`).

    ``candidates`` (a ``TargetPropensities`` with distributions, one row per row of ``logs``)
    are the candidates already resolved, used in place of ``policies``: a segment's rows
    take their rows of the candidates resolved once on the whole logs. The marginalized
    estimators (``mips``, ``snmips``, ``mdr``) run on the rows' embedding propensities under
    ``embedding`` (:func:`ope.marginal.marginal_propensities`), the others on the items'.
    """
    marginal = [(k, e) for k, e in resolved if getattr(e, "marginal", False)]
    resolved = [(k, e) for k, e in resolved if not getattr(e, "marginal", False)]
    needs_model = any(k in MODEL_ESTIMATORS for k, _ in [*resolved, *marginal])
    # the items' reward model: for DM and the DR family, and for the marginalized ones that do
    # not fit their own (mdr's of the embedding, offcem's two-step model, one cluster per item)
    needs_items_model = any(k in MODEL_ESTIMATORS for k, _ in resolved) or any(
        k in MODEL_ESTIMATORS and not _fits_own_model(k, logs, embedding, model)
        for k, _ in marginal
    )
    # the marginalized estimators read the aligned list columns of validated logs themselves;
    # otherwise they need each candidate's distribution
    marginal_dist = bool(marginal) and (
        candidates is not None or not reads_aligned_columns(logs, embedding, policies)
    )
    needs_dist = needs_model or marginal_dist
    factored: dict[str, dict[str, str]] = {}
    direct = (
        None
        if needs_dist or candidates is not None or shared is not None
        else _target_columns(logs, policies)
    )
    if shared is not None:  # resolved once for several outcomes (the caller checked the plan)
        names, target, rows_ignored = shared.names, shared.target, shared.rows_ignored
    elif direct is not None:  # the log's own columns: no (n, P) copy
        names, target = direct
        rows_ignored = 0
    else:
        if candidates is not None:
            tp = candidates
        else:
            needing = [k for k, _ in resolved if k in MODEL_ESTIMATORS] + [
                k for k, _ in marginal if marginal_dist or k in MODEL_ESTIMATORS
            ]
            tp, factored = _candidates(logs, policies, needs_dist, needing)
        names, target, rows_ignored = tp.names, tp.values, tp.table_rows_ignored
    reward = logs.column("reward")
    # the one check of the rewards against reward_range for every estimator of this call
    check_rewards_in_range(reward, settings.reward_range)
    propensity = logs.column("propensity")
    weight = None
    if settings.weight_column is not None:
        weight = check_sampling_weight(
            logs.column(settings.weight_column), logs.n, name=settings.weight_column
        )
        if bool(np.all(weight == 1.0)):  # every row kept for sure: the unweighted numbers
            weight = None
    q_logged = q_target = None
    model_columns = None
    model_notes: list[str] = []
    if needs_items_model:
        q_logged, q_target, model_columns, model_notes = model_predictions(
            logs,
            tp.distributions,
            tp.names,
            **model,
            embedding=embedding,
            weight_column=settings.weight_column,
        )
    logging_out: list[Estimate] = []
    estimates, stats = _row_estimates(
        resolved,
        settings,
        reward,
        propensity,
        target,
        names,
        q_logged,
        q_target,
        weight,
        logging_out=logging_out,
        stats=None if shared is None else shared.stats,
    )
    for name, changed in factored.items():  # loop over factored candidates
        p_c, t_c = _factored_arrays(logs, changed)
        estimates.update(
            _row_estimates(
                resolved, settings, reward, p_c, t_c[:, None], [name], sampling_weight=weight
            )[0]
        )
    checks: tuple[Any, ...] = ()
    if marginal:
        estimates_m, checks, notes_m = _marginal_estimates(
            logs,
            names,
            target,
            tp.distributions if needs_dist else None,
            policies,
            embedding,
            marginal,
            settings,
            reward,
            propensity,
            q_logged,
            q_target,
            weight,
            model,
        )
        estimates.update(estimates_m)
        model_notes = [*model_notes, *notes_m]
    base = logging_out[0] if logging_out else _logging_estimate(stats, reward, settings, weight)
    return _EagerRun(
        names=list(names),
        target=target,
        factored=factored,
        rows_ignored=rows_ignored,
        reward=reward,
        propensity=propensity,
        sampling_weight=weight,
        estimates=estimates,
        logging=base,
        stats=stats,
        model_columns=model_columns,
        model_notes=model_notes,
        distributions=tp.distributions if needs_dist else None,
        embedding_checks=checks,
    )


def _marginal_estimates(
    logs: BanditLogs,
    names: Sequence[str],
    target: Any,
    distributions: Mapping[str, Any] | None,
    policies: Any,
    embedding: Any,
    marginal: Sequence[tuple[str, Any]],
    settings: EvaluationSettings,
    reward: np.ndarray,
    propensity: np.ndarray,
    q_logged: np.ndarray | None,
    q_target: np.ndarray | None,
    weight: np.ndarray | None,
    model: Mapping[str, Any],
) -> tuple[dict[tuple[str, str], Estimate], tuple[Any, ...], list[str]]:
    """The marginalized estimators on the rows' embedding propensities, each candidate's test
    of the embedding (IPS minus MIPS on the same rows), and notes on the models used.
    ``distributions`` are the candidates' (None: the logs' aligned columns are read,
    :func:`ope.marginal.reads_aligned_columns`).

    The reward models: the marginalized DR's is fitted on the embeddings, :math:`\\hat q(x, e)`,
    when each item has one embedding (:func:`ope.marginal.embedding_level`); OffCEM's is
    :class:`~ope.reward_models.TwoStepRewardModel` there unless ``reward_model`` is set; else
    both use the items' model (``q_logged``, ``q_target``)."""
    from ope.marginal import embedding_level, embedding_sufficiency, marginal_propensities
    from ope.reward_models import TwoStepRewardModel

    if not len(names):
        return {}, (), []
    if distributions is None:
        mp = marginal_propensities(logs, embedding, list(names))
    else:
        mp = marginal_propensities(logs, embedding, distributions=distributions)
    notes: list[str] = []
    keys = {k for k, _ in marginal}
    default = (q_logged, q_target)
    models: dict[str, tuple[Any, Any]] = {k: default for k in keys}
    if (
        distributions is not None
        and "mdr" in keys
        and _fits_own_model("mdr", logs, embedding, model)
    ):
        # the marginalized DR's reward model is of the embedding, q(x, e), when each item has
        # one: an item-level model's errors within an embedding would bias it
        level = embedding_level(logs, embedding, distributions)
        assert level is not None  # one embedding per item
        level_model = {**model, "action_features": None}
        if isinstance(model.get("reward_model"), TwoStepRewardModel):  # of items, not embeddings
            level_model["reward_model"] = None
        q_l, q_t, _, _ = model_predictions(
            level[0], level[1], list(names), **level_model, weight_column=settings.weight_column
        )
        models["mdr"] = (q_l, q_t)
    if "offcem" in keys and model.get("reward_model") is None:
        if distributions is not None and _fits_own_model("offcem", logs, embedding, model):
            q_l, q_t, _, _ = model_predictions(
                logs,
                distributions,
                list(names),
                **{**model, "reward_model": TwoStepRewardModel(rng=model.get("rng"))},
                embedding=embedding,
                weight_column=settings.weight_column,
            )
            models["offcem"] = (q_l, q_t)
        else:
            notes.append(
                "offcem uses the items' reward model q̂(x, a): its two-step model needs one "
                "cluster per item (per-row clusters and a stochastic p(e|a) give none)"
            )
    estimates: dict[tuple[str, str], Estimate] = {}
    for pair in {id(v): v for v in models.values()}.values():  # a loop over distinct models
        group = [(k, e) for k, e in marginal if models[k] is pair]
        found, _ = _row_estimates(
            group, settings, reward, mp.logging, mp.values, names, pair[0], pair[1], weight
        )
        estimates.update(found)
    matrix = target if isinstance(target, np.ndarray) else np.column_stack(list(target))
    checks = tuple(embedding_sufficiency(reward, propensity, matrix, mp, sampling_weight=weight))
    return estimates, checks, notes


def _fits_own_model(key: str, logs: BanditLogs, embedding: Any, model: Mapping[str, Any]) -> bool:
    """Whether the marginalized estimator ``key`` fits a reward model of its own instead of
    using the items' (the one rule of :func:`_eager_run` and :func:`_marginal_estimates`):
    ``mdr`` its model of the embedding, ``offcem`` (with no ``reward_model`` given) the two-step
    model, both only when each item has one embedding (:func:`ope.marginal.one_per_item`)."""
    if embedding is None or not one_per_item(logs, embedding):
        return False
    return key == "mdr" or (key == "offcem" and model.get("reward_model") is None)


def _without_observed_embedding(
    logs: BanditLogs, model: Mapping[str, Any], embedding: Any, weight_column: str | None
) -> tuple[Mapping[str, Any], list[str]]:
    """The reward model's settings with the rows' observed embedding columns (a stochastic
    ``ActionEmbedding(distribution=...)``) left out of its default context: they are drawn
    after the item, so a model that read them as context would predict every candidate item
    with the logged row's embedding. Columns named in ``context_columns`` are kept; the
    sampling-weight column ``weight_column`` is never in the context."""
    from ope.context import context_column_choice

    if embedding is None or not embedding.observed:
        return model, []
    if model.get("context_columns") is not None:
        return model, []
    choice = context_column_choice(logs, weight_column=weight_column)
    observed = (*embedding.names, *embedding.dropped)  # a restricted one's dropped columns too
    dropped = [c for c in choice.columns if c in observed]
    if not dropped:
        return model, []
    kept = [c for c in choice.columns if c not in observed]
    note = (
        f"the observed embedding columns {', '.join(dropped)} are left out of the reward "
        "model's default context (they depend on the logged item)"
    )
    return {**model, "context_columns": kept}, [note]


def _marginal_notes(
    resolved: Sequence[tuple[str, Any]], embedding: Any, checks: Sequence[Any]
) -> list[str]:
    """What the marginalized estimates assume, and each candidate's test of the embedding."""
    keys = [k for k, e in resolved if getattr(e, "marginal", False)]
    if not keys:
        return []
    notes = [
        f"{', '.join(keys)} weigh each row by its logged embedding's probabilities under "
        f"{embedding.describe()}"
    ]
    if embedding.kind == "estimated":
        notes.append(
            "p(e|a) is estimated from the logs' observed embeddings (cross-fitted item "
            "frequencies): it assumes the embedding depends on the item alone, and the "
            "intervals leave out the error of the estimate"
        )
    plain = [k for k in keys if k in ("mips", "snmips")]
    if plain:
        notes.append(
            f"{', '.join(plain)}: unbiased only if the reward depends on the item through its "
            "embedding alone (no direct effect)"
        )
    if "mdr" in keys:
        notes.append(
            "mdr: unbiased if its reward model's residual has no direct effect of the item "
            "beyond its embedding"
        )
    if "offcem" in keys:
        notes.append(
            "offcem: unbiased if its item model is right about the reward differences between "
            "the items of one embedding (local correctness), whatever its error on each "
            "embedding's level"
        )
    return notes + [c.note() for c in checks]


def _shared_bootstrap_intervals(
    run: _EagerRun, resolved: Sequence[tuple[str, Any]], settings: EvaluationSettings
) -> dict[Any, tuple[float, float]]:
    """Every bootstrap interval of the run from one set of resamples
    (:func:`ope.intervals.bootstrap.shared_bootstrap`): each equals the estimate's own
    ``ci(method="bootstrap", rng=seed, n_resamples=B)``. DM has none (its ``ci`` is NaN).

    The weighting estimators enter through their row sources (``row_source``: per-row columns
    built from the shared weights, block by block); the others through their estimates'
    sources."""
    from ope.estimators import WeightingEstimator
    from ope.intervals.bootstrap import shared_bootstrap

    if run.sampling_weight is not None:
        return _weighted_shared_bootstrap(run, resolved, settings)
    # the marginalized estimators resample their own rows (embedding weights): their sources
    weighting = [
        (k, e) for k, e in resolved if isinstance(e, WeightingEstimator) and not e.marginal
    ]
    sources = {
        (p, k): run.estimates[(p, k)].source
        for p in [*run.names, *run.factored]
        for k, e in resolved
        if (not isinstance(e, WeightingEstimator) or e.marginal)
        and _bootstrappable(run.estimates[(p, k)])
    }
    sources.update(
        {(p, k): run.estimates[(p, k)].source for p in run.factored for k, _ in weighting}
    )
    shared = shared_bootstrap(
        run.reward,
        run.propensity if weighting and run.names else None,
        run.target if weighting and run.names else None,
        names=run.names if weighting and run.names else None,
        estimators=weighting if run.names else (),
        sources=sources,
        logging=True,
        reward_range=settings.reward_range,
        confidence_level=settings.confidence_level,
        n_resamples=settings.ci_options.get("n_resamples"),
        bootstrap_method="percentile",
        rng=settings.ci_options.get("rng"),
    )
    out: dict[Any, tuple[float, float]] = {
        key: (float(iv.low), float(iv.high)) for key, iv in shared.intervals.items()
    }
    assert shared.logging is not None  # asked for with logging=True
    out["logging"] = (float(shared.logging.low), float(shared.logging.high))
    return out


def _bootstrappable(estimate: Estimate) -> bool:
    """Whether an estimate's rows can be resampled for an interval: not a model-conditional
    (DM) estimate, whose resamples would hold its reward model fixed (its ``ci`` is NaN)."""
    source = estimate.source
    return source is not None and not getattr(source, "model_conditional", False)


def _weighted_shared_bootstrap(
    run: _EagerRun, resolved: Sequence[tuple[str, Any]], settings: EvaluationSettings
) -> dict[Any, tuple[float, float]]:
    """:func:`_shared_bootstrap_intervals` of sampling-weighted rows: every estimate (and the
    logging value) is resampled through its row source, whose components carry the sampling
    weights, so each resample's weights are its Poisson counts times ``s_i``."""
    from ope.intervals.bootstrap import shared_bootstrap

    sources: dict[Any, Any] = {
        (p, k): run.estimates[(p, k)].source
        for p in [*run.names, *run.factored]
        for k, _ in resolved
        if _bootstrappable(run.estimates[(p, k)])
    }
    sources["logging"] = run.logging.source
    shared = shared_bootstrap(
        run.reward,
        sources=sources,
        logging=False,
        estimators=(),
        reward_range=settings.reward_range,
        confidence_level=settings.confidence_level,
        n_resamples=settings.ci_options.get("n_resamples"),
        bootstrap_method="percentile",
        rng=settings.ci_options.get("rng"),
    )
    return {key: (float(iv.low), float(iv.high)) for key, iv in shared.intervals.items()}


def _segment_estimates(
    logs: BanditLogs,
    columns: Sequence[str],
    policies: Any,
    resolved: Sequence[tuple[str, Any]],
    settings: EvaluationSettings,
    model: Mapping[str, Any],
    run: _EagerRun,
    embedding: Any = None,
) -> tuple[dict[tuple[str, str, str, str], Estimate], list[str]]:
    """(column, segment, policy, estimator) -> the estimate on that segment's rows alone.

    IPS, clipped IPS and SNIPS of every segment of a column come from one grouped pass of the
    moment kernel (:func:`ope.moments.grouped_moments`), backed by the segment's rows for the
    row-level intervals; factored candidates and the reward-model estimators (refitted on each
    segment, as ``evaluate`` on those rows would) run per segment (a loop over segments).
    """
    from ope.diagnostics.segments import segment_codes
    from ope.estimators import weighted_estimates
    from ope.moments import grouped_moments, grouped_weighted_moments
    from ope.streaming import MomentStats

    weighting = [(k, e) for k, e in resolved if k in STREAMING_ESTIMATORS]
    modelled = [(k, e) for k, e in resolved if k not in STREAMING_ESTIMATORS]
    order_keys = [k for k, _ in resolved]
    clipped = next((e for k, e in weighting if k == "clipped_ips"), None)
    mw = None if clipped is None else clipped.max_weight  # read from its estimator
    rr, level = settings.reward_range, settings.confidence_level
    out: dict[tuple[str, str, str, str], Estimate] = {}
    skipped: list[str] = []
    for col in columns:  # loop over segment columns
        seg = segment_codes(col, logs.table.column(col).to_pandas(), logs.n)
        counts = np.bincount(seg.codes, minlength=seg.size)
        order = np.argsort(seg.codes, kind="stable")  # rows of each segment, in log order
        bounds = np.concatenate(([0], np.cumsum(counts)))
        groups = wgroups = None
        if weighting and run.names and run.sampling_weight is None:
            groups, _ = grouped_moments(
                run.reward, run.propensity, run.target, seg.codes, seg.size, max_weight=mw
            )
        elif weighting and run.names:  # one grouped pass of the weighted statistics
            assert run.sampling_weight is not None
            wgroups, _ = grouped_weighted_moments(
                run.reward,
                run.propensity,
                run.target,
                run.sampling_weight,
                seg.codes,
                seg.size,
                max_weight=mw,
            )
        for g, label in enumerate(seg.labels):  # loop over segments, not rows
            if counts[g] < MIN_ROWS:
                skipped.append(f"{col}={label} ({int(counts[g])} row)")
                continue
            idx = order[bounds[g] : bounds[g + 1]]
            r_g, p_g = run.reward[idx], run.propensity[idx]
            found: dict[tuple[str, str], Estimate] = {}
            s_g = None if run.sampling_weight is None else run.sampling_weight[idx]
            if wgroups is not None and s_g is not None:
                t_g = (
                    [c[idx] for c in run.target]
                    if isinstance(run.target, (list, tuple))
                    else run.target[idx]
                )
                wm_g = wgroups[g]
                assert wm_g is not None
                for (key, _), results in zip(
                    weighting,
                    weighted_estimates(
                        [e for _, e in weighting],
                        wm_g,
                        reward=r_g,
                        logging_propensity=p_g,
                        target=t_g,
                        sampling_weight=s_g,
                        labels=run.names,
                        reward_range=rr,
                        weight_name=settings.weight_column or "sampling_weight",
                    ),
                ):
                    found.update({(p, key): res for p, res in zip(run.names, results)})
            if groups is not None:
                t_g = (
                    [c[idx] for c in run.target]
                    if isinstance(run.target, (list, tuple))
                    else run.target[idx]
                )
                centered = groups[g]
                assert centered is not None  # the segment has rows
                stats = MomentStats(
                    n=int(counts[g]),
                    min_r=float(r_g.min()),
                    max_r=float(r_g.max()),
                    centered=centered,
                    max_weight=mw,
                    names=tuple(run.names),
                )
                for key, est in weighting:  # loop over estimators
                    results = stats.with_rows(
                        stats.estimates(est, reward_range=rr, confidence_level=level),
                        reward=r_g,
                        logging_propensity=p_g,
                        target_propensity=t_g,
                        reward_range=rr,
                    )
                    found.update({(p, key): res for p, res in zip(run.names, results)})
            for name, changed in run.factored.items():  # loop over factored candidates
                p_c, t_c = _factored_arrays(logs, changed)
                found.update(
                    _row_estimates(
                        weighting,
                        settings,
                        r_g,
                        p_c[idx],
                        t_c[idx, None],
                        [name],
                        sampling_weight=s_g,
                    )[0]
                )
            if modelled:
                sub = logs.table.take(_row_positions(idx))
                part = (BanditLogs.from_validated if logs.targets_validated() else BanditLogs)(
                    sub,
                    logs.report,
                    dropped_event_ids=logs.dropped_event_ids,
                    unit_roundoff=logs.unit_roundoff,
                )
                part.action_features = logs.action_features
                found.update(
                    _eager_run(
                        part,
                        policies,
                        modelled,
                        settings,
                        model,
                        # without distributions (marginalized estimators reading the aligned
                        # columns) the segment's own columns are read the same way
                        candidates=(
                            _candidate_rows(run, idx) if run.distributions is not None else None
                        ),
                        embedding=embedding,
                    ).estimates
                )
            for p in [*run.names, *run.factored]:  # loop over policies
                for key in order_keys:
                    out[(col, label, p, key)] = found[(p, key)]
    notes = []
    if skipped:
        notes.append(
            f"segments with fewer than {MIN_ROWS} rows have no estimate: {', '.join(skipped)}"
        )
    return out, notes


def _candidate_rows(run: _EagerRun, idx: np.ndarray) -> Any:
    """The rows ``idx`` of the candidates the whole-log run resolved (a ``TargetPropensities``
    with distributions), each distribution over the actions those rows give probability.

    The candidates are resolved once, on the logs they were written for (a policy table joins
    on every logged event), and a segment takes its rows: its DM and DR equal those of
    ``evaluate`` on the segment's rows with the candidates' rows for them.
    """
    from ope.policies import PolicyDistribution, TargetPropensities

    dists = {}
    assert run.distributions is not None  # a run with a reward model keeps them
    for name in run.names:  # loop over policies
        full = run.distributions[name]
        m = full.matrix[idx]
        used, codes = np.unique(m.indices, return_inverse=True)
        m = type(m)((m.data, codes.reshape(-1), m.indptr), shape=(m.shape[0], used.size))
        dists[name] = PolicyDistribution(m, np.asarray(full.actions)[used])
    return TargetPropensities(run.names, np.asarray(run.target)[idx], dists)


def _row_positions(idx: np.ndarray) -> Any:
    """Row positions as a pyarrow array (for ``pyarrow.Table.take``)."""
    import pyarrow as pa

    return pa.array(idx, type=pa.int64())


@dataclass(frozen=True)
class EmbeddingStatistics:
    """The merged statistics of a pass with the marginalized estimators (MIPS, SNMIPS): the
    items' (:class:`ope.streaming.MomentStats` of the logged propensities, for IPS, clipped
    IPS, SNIPS and the logging value) and the embeddings' (the same statistics of each row's
    embedding propensities, :func:`ope.marginal.marginal_propensities`). Merged batch by batch
    (scans, Dask partitions) like the statistics they hold."""

    items: Any
    marginal: Any

    @property
    def n(self) -> int:
        return int(self.items.n)

    def merge(self, other: EmbeddingStatistics) -> EmbeddingStatistics:
        return EmbeddingStatistics(
            self.items.merge(other.items), self.marginal.merge(other.marginal)
        )


def batch_statistics(
    logs: BanditLogs,
    policies: Any,
    estimators: Sequence[Any],
    weight_column: str | None = None,
    *,
    embedding: Any = None,
    marginal: Sequence[tuple[str, Any]] = (),
    origin: RowOrigin | None = None,
) -> Any:
    """The moment statistics (:class:`ope.streaming.MomentStats`) of one validated batch for
    the weighting ``estimators`` of a plan: the per-batch step shared by the scan and the Dask
    partitions, merged by the same kernel. The batch's ``target__`` columns are read as they
    are (no (n, P) copy) when the reader validated them. With ``weight_column`` the statistics
    are of the sampling-weighted rows. With ``marginal`` estimators (MIPS, SNMIPS) and their
    ``embedding`` an :class:`EmbeddingStatistics`: the batch's embedding propensities are
    computed from its own rows (candidates and distributions are per row).

    An error of the batch's rows (a policy object's propensity above 1, a weight that
    overflows) numbers them from the batch's first row; with ``origin`` it is raised again
    (same class) naming the rows of the source and the batch (:class:`ope._validation.RowOrigin`).
    """
    try:
        return _batch_statistics(
            logs, policies, estimators, weight_column, embedding=embedding, marginal=marginal
        )
    except OPEError as exc:
        if origin is None:
            raise
        raise origin.located(exc) from exc.__cause__


def _batch_statistics(
    logs: BanditLogs,
    policies: Any,
    estimators: Sequence[Any],
    weight_column: str | None,
    *,
    embedding: Any,
    marginal: Sequence[tuple[str, Any]],
) -> Any:
    """:func:`batch_statistics` without the row origin."""
    from ope.policies import target_propensities
    from ope.streaming import MomentStats

    direct = _target_columns(logs, policies)
    target: Any
    tp = None
    if direct is not None:
        names, target = direct
    else:
        tp = target_propensities(logs, policies, with_distributions=bool(marginal))
        names, target = tp.names, tp.values
    weight = None if weight_column is None else logs.column(weight_column)
    weight_name = weight_column or "sampling_weight"
    items = MomentStats.from_arrays(
        logs.column("reward"),
        logs.column("propensity"),
        target,
        estimators=estimators,
        names=names,
        sampling_weight=weight,
        weight_name=weight_name,
    )
    if not marginal:
        return items
    from ope.marginal import marginal_propensities

    if tp is None and reads_aligned_columns(logs, embedding, policies):
        mp = marginal_propensities(logs, embedding, list(names))
    else:
        if tp is None:  # the target__ columns were read directly
            tp = target_propensities(logs, policies, with_distributions=True)
        mp = marginal_propensities(logs, embedding, distributions=tp.distributions)
    return EmbeddingStatistics(
        items,
        MomentStats.from_arrays(
            logs.column("reward"),
            mp.logging,
            mp.values,
            names=list(mp.names),
            sampling_weight=weight,
            weight_name=weight_name,
        ),
    )


def _scan_origin(scan: Any, batch: BanditLogs) -> RowOrigin:
    """Where a scan's batch lies in its source, for the errors of its rows: the scan numbers
    each row of its batches in the whole source (:meth:`ope.logs.BanditLogs.source_rows`),
    rows dropped as invalid included."""
    rows = batch.source_rows()
    assert rows is not None and rows.size  # a scan yields batches of rows it numbered
    return RowOrigin(
        f"in a batch of {scan.source}: source rows {int(rows[0]):,} to {int(rows[-1]):,}",
        rows=rows,
    )


def evaluate_scan(scan: Any, plan: Any) -> Evaluation:
    """The evaluation of a lazy scan under ``plan``: the moment kernel per batch, merged."""
    settings = dataclasses.replace(
        plan.settings, weight_column=sampling_weight_column(scan.columns, plan.weight_column)
    )
    stats = None
    marginal = plan.marginal_weighting
    for batch in scan.to_batches():  # loop over batches
        part = batch_statistics(
            batch,
            plan.policies,
            plan.weighting,
            settings.weight_column,
            embedding=plan.embedding,
            marginal=marginal,
            origin=_scan_origin(scan, batch),
        )
        stats = part if stats is None else stats.merge(part)
    if stats is None:
        raise EstimationError(f"the scan of {scan.source} yielded no rows.")
    return Evaluation.from_statistics(
        stats,
        plan.resolved,
        settings,
        report=scan.report,
        notes=[*merged_marginal_notes(plan), *propensity_notes(scan, settings.weight_column)],
        propensity_source=propensity_info(scan)["propensity_source"],
    )


def merged_marginal_notes(plan: Any) -> list[str]:
    """What merged statistics' MIPS/SNMIPS assume; their test of the embedding needs the rows."""
    if not plan.marginal_weighting:
        return []
    return [
        *_marginal_notes(plan.resolved, plan.embedding, ()),
        "the test of the embedding (per-item minus marginal IPS) needs the rows: run "
        "ope.evaluate or ope.diagnose on eager logs for it",
    ]
