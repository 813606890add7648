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

import dataclasses
import math
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
    resolve_seed,
)
from ope._format import format_estimate, number_notes
from ope._thresholds import MIN_ROWS
from ope.context import action_feature_matrix, context_matrix, feature_labels
from ope.estimators import (
    ESTIMATORS,
    Estimator,
    LoggingValue,
    estimate_many,
    estimate_weighted_many,
    estimator_settings,
    get_estimator,
    logging_value,
)
from ope.exceptions import (
    EstimationError,
    ParameterError,
    PolicyError,
    SchemaError,
    ValidationError,
)
from ope.intervals.asymptotic import normal_interval, t_interval
from ope.logs import BanditLogs, ValidationReport
from ope.propensity import estimated_propensity_note, propensity_info
from ope.results import (
    CI_METHODS,
    Estimate,
    Provenance,
    Result,
    ResultParts,
    compare,
    render_text,
)
from ope.schema import check_segment_columns
from ope.weights import (
    check_sampling_weight,
    sampling_weight_column,
    sampling_weight_note,
)

__all__ = [
    "evaluate",
    "Evaluation",
    "TABLE_COLUMNS",
    "SEGMENT_TABLE_COLUMNS",
    "EvaluationPlan",
    "EvaluationSettings",
    "STREAMING_ESTIMATORS",
    "WEIGHT_BOUND_ESTIMATORS",
    "WEIGHT_BOUND_METHODS",
    "batch_statistics",
    "resolve_estimators",
]

#: Columns of :meth:`Evaluation.table`, in order (docs/design.md).
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
#: Columns of :meth:`Evaluation.table` with ``by=``: the segment column and its label (spelled
#: as in :meth:`ope.Diagnostics.segments`) after the policy and estimator.
SEGMENT_TABLE_COLUMNS: Final = (*TABLE_COLUMNS[:2], "column", "segment", *TABLE_COLUMNS[2:])

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
#: Interval methods ``ci_fallback`` may name: those that apply to every estimate with a
#: standard error.
CI_FALLBACKS: Final = ("normal", "t")
#: Estimators computable from mergeable sums over batches (the moment kernel).
STREAMING_ESTIMATORS: Final = frozenset({"ips", "clipped_ips", "snips"})


#: An example value of each estimator setting, for messages.
_SETTING_EXAMPLES: Final = {"max_weight": "10.0", "tau": "20.0", "shrinkage": "10.0"}


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
    if isinstance(estimators, str) or callable(getattr(estimators, "estimate", None)):
        estimators = (estimators,)  # one name, or one estimator object
    if not isinstance(estimators, Iterable):
        raise ParameterError(
            f"`estimators` must be a list of estimator names or objects, e.g. ('ips', 'snips'); "
            f"got {estimators!r} ({type(estimators).__name__})."
        )
    estimators = list(estimators)
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
                        f"estimator {key!r} needs its setting `{name}`: pass {name}=... (e.g. "
                        f"{name}={_SETTING_EXAMPLES.get(name, '10.0')}), or an estimator object "
                        "that holds it instead of the name."
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
        name = unused[0]
        owner = next(k for k in ESTIMATORS if name in estimator_settings(k))
        listed = ", ".join(k for k, _ in resolved)
        raise ParameterError(
            f"`{name}` is a setting of {owner}, which `estimators` ({listed}) does not "
            f"include; add {owner} to `estimators` or drop `{name}`."
        )
    names = [k for k, _ in resolved]
    dup = sorted({k for k in names if names.count(k) > 1})
    if dup:
        raise ParameterError(f"estimator {', '.join(dup)} is listed twice in `estimators`.")
    return resolved


@dataclass(frozen=True)
class EvaluationSettings:
    """The validated interval settings of one evaluation (see :meth:`checked`)."""

    ci: str
    confidence_level: float
    reward_range: tuple[float, float] | None
    weight_bound: float | None
    ci_options: dict[str, Any]
    ci_fallback: str | None = None
    #: the column of the rows' sampling (Horvitz-Thompson) weights, None without one
    weight_column: str | None = None

    @classmethod
    def checked(
        cls, *, ci: Any, confidence_level: Any, reward_range: Any, weight_bound: Any = None,
        n_resamples: Any = None, rng: Any = None, ci_fallback: Any = None,
    ) -> EvaluationSettings:
        """Validate the arguments of ``evaluate`` that every entry point shares, once.

        Raises
        ------
        ope.ParameterError
            An unknown ``ci``, a ``confidence_level`` outside (0, 1), a malformed
            ``reward_range``, ``weight_bound``, ``n_resamples`` or ``rng``, ``n_resamples``
            without ``ci="bootstrap"``, or a ``ci_fallback`` other than normal or t.

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
            ci_fallback=None if ci_fallback is None else check_choice(
                ci_fallback, "ci_fallback", CI_FALLBACKS
            ),
        )


#: Interval methods that need no a priori bound; every other method needs ``reward_range``.
UNBOUNDED_CI_METHODS: Final = ("normal", "t", "bootstrap")


@dataclass(frozen=True, eq=False)
class EvaluationPlan:
    """Everything one evaluation needs besides the rows, checked once.

    A plan is built by :meth:`build` from the options of :func:`evaluate` (which builds one and
    runs it); every driver runs the same plan: eager logs (:meth:`run`), a lazy
    :func:`ope.scan_logs` source (the moment kernel batch by batch), Dask partitions
    (``ope.distributed.evaluate_distributed``) and the command line. Each setting is validated
    where it enters: the interval settings in :class:`EvaluationSettings`, each estimator's
    own setting (the clip level of clipped IPS, Switch-DR's τ, DRos's λ) by the estimator
    object that keeps it; the drivers read the estimator, never a copy of the number.

    Attributes
    ----------
    estimators : tuple of (str, Estimator)
        The registry name and the estimator object (with its settings inside), in order.
    settings : EvaluationSettings
        The interval method, level, a priori bounds, bootstrap options and fallback.
    policies : object
        The candidates as given (None, names, a long-format table or policy objects); they
        are resolved against the rows when the plan runs.
    by : str, sequence of str or None
        Segment columns as given (checked against the logs' schema when the plan runs).
    model : dict
        ``reward_model``, ``context_columns``, ``action_features`` of DM and the DR family,
        and ``rng``, the randomness of cross-fitting and the bootstrap.
    weight_column : str or None
        The sampling-weight column asked for (the ``weight`` column is used by default when
        the rows have one).
    seed : int or None
        The recorded seed (None when the caller passed a ``numpy.random.Generator``).
    options : dict
        The options as given, recorded in the evaluation's provenance.

    Examples
    --------
    >>> from ope.evaluation import EvaluationPlan
    >>> plan = EvaluationPlan.build(estimators=("ips", "clipped_ips", "dr"), max_weight=20.0,
    ...                             ci="t", rng=0)
    >>> [key for key, _ in plan.estimators], plan.clipped
    (['ips', 'clipped_ips', 'dr'], ClippedIPS(max_weight=20.0))
    >>> plan.stream_obstacles()
    (('estimators', 'dr needs a reward model fitted on every row'),)
    """

    estimators: tuple[tuple[str, Any], ...]
    settings: EvaluationSettings
    policies: Any = None
    by: str | Sequence[str] | None = None
    model: Mapping[str, Any] = field(default_factory=dict)
    weight_column: str | None = None
    seed: int | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
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
        by: str | Sequence[str] | None = None,
        ci_fallback: str | None = None,
        weight_column: str | None = None,
    ) -> EvaluationPlan:
        """The plan of :func:`evaluate` with these options (the same arguments, without the
        logs), every argument checked before any row is read.

        Raises
        ------
        ope.ParameterError
            A malformed argument: an unknown ``ci`` or estimator, a ``confidence_level``
            outside (0, 1), a setting an estimator needs and lacks or one no estimator uses, a
            malformed ``by``, ``context_columns`` or ``weight_column`` name.
        ope.MissingBoundsError
            ``ci`` needs an a priori bound that was not given: ``reward_range`` for every
            method but normal, t and bootstrap; ``weight_bound`` for the hoeffding, bernstein
            and empirical-likelihood intervals of IPS and SNIPS.
        """
        check_rng(rng)
        seed, generator = resolve_seed(rng)
        # every random step (cross-fitting folds, bootstrap) draws from `rand`: the recorded
        # seed, or the caller's Generator
        rand: int | np.random.Generator = seed if seed is not None else generator
        settings = EvaluationSettings.checked(
            ci=ci, confidence_level=confidence_level, reward_range=reward_range,
            weight_bound=weight_bound, n_resamples=n_resamples, rng=rand,
            ci_fallback=ci_fallback,
        )
        resolved = resolve_estimators(
            estimators, max_weight=max_weight, tau=tau, shrinkage=shrinkage
        )
        _check_bounds(resolved, settings)
        given = {
            "policies": policies if policies is None or isinstance(policies, (str, list, tuple))
            else type(policies).__name__,
            "estimators": [getattr(e, "name", e) if not isinstance(e, str) else e
                           for e in ((estimators,) if isinstance(estimators, str)
                                     or callable(getattr(estimators, "estimate", None))
                                     else estimators)],
            "ci": ci, "confidence_level": confidence_level, "reward_range": reward_range,
            "max_weight": max_weight, "weight_bound": weight_bound, "tau": tau,
            "shrinkage": shrinkage, "context_columns": context_columns,
            "n_resamples": n_resamples, "by": by, "ci_fallback": ci_fallback,
            "weight_column": weight_column,
        }
        return cls(
            estimators=tuple(resolved),
            settings=settings,
            policies=policies,
            by=by,
            model={"reward_model": reward_model, "context_columns": context_columns,
                   "action_features": action_features, "rng": rand},
            weight_column=weight_column,
            seed=seed,
            options={k: v for k, v in given.items() if v is not None},
        )

    @property
    def resolved(self) -> list[tuple[str, Any]]:
        """The (name, estimator) pairs as a list (what the row passes take)."""
        return list(self.estimators)

    @property
    def clipped(self) -> Any:
        """The clipped estimator of the plan (its ``max_weight`` is the clip level of the
        moment statistics), None without one."""
        return next((est for key, est in self.estimators if key == "clipped_ips"), None)

    @property
    def weighting(self) -> list[Any]:
        """The estimator objects the moment kernel computes (IPS, clipped IPS, SNIPS)."""
        return [est for key, est in self.estimators if key in STREAMING_ESTIMATORS]

    def stream_obstacles(self) -> tuple[tuple[str, str], ...]:
        """Why the plan cannot run on merged statistics (a scan or Dask partitions): one
        ``(argument, reason)`` pair per obstacle; empty when it can.

        Merged statistics give IPS, clipped IPS and SNIPS with the normal or t interval
        (every other interval method reads the rows) for candidates named by their
        ``target__`` columns or given as policy objects.
        """
        obstacles: list[tuple[str, str]] = []
        for key, _ in self.estimators:  # loop over estimators
            if key not in STREAMING_ESTIMATORS:
                why = ("needs a reward model fitted on every row" if key in MODEL_ESTIMATORS
                       else "needs every row")
                obstacles.append(("estimators", f"{key} {why}"))
        if self.policies is not None and not isinstance(self.policies, (list, tuple, Mapping)):
            obstacles.append(("policies", "a long-format policy table is joined on every event"))
        if self.by is not None:
            obstacles.append(("by", "per-segment estimates need every row"))
        if self.settings.ci not in CI_FALLBACKS:
            obstacles.append(("ci", f"the {self.settings.ci} interval reads every row"))
        return tuple(obstacles)

    def check_streamable(self, where: str) -> None:
        """Refuse a plan merged statistics cannot compute (``where`` names the driver).

        Raises
        ------
        ope.EstimationError
            An estimator that needs the rows.
        ope.PolicyError
            A long-format policy table.
        """
        found = dict(self.stream_obstacles())
        if "estimators" in found:
            unsupported = [k for k, _ in self.estimators if k not in STREAMING_ESTIMATORS]
            raise EstimationError(
                f"estimator(s) {', '.join(unsupported)} cannot run {where}; merged statistics "
                f"support {', '.join(sorted(STREAMING_ESTIMATORS))}. Read the logs eagerly "
                "(ope.evaluate(ope.read_logs(...))) for the others."
            )
        if "policies" in found:
            raise PolicyError(
                f"{where}, policies must be target__<name> column names or a dict of policy "
                "objects; a long-format policy table needs the whole log (use "
                "ope.evaluate(ope.read_logs(...)))."
            )
        if "by" in found:
            raise EstimationError(
                f"per-segment estimates (by=...) cannot run {where}: they need the rows; read "
                "the logs eagerly (ope.evaluate(ope.read_logs(...), by=...))."
            )

    def with_policies(self, policies: Any) -> EvaluationPlan:
        """The same plan for other candidates (e.g. those a command line builds once the rows
        are read); nothing is checked again."""
        options = dict(self.options)
        options.pop("policies", None)
        if policies is not None:
            options["policies"] = (policies if isinstance(policies, (str, list, tuple))
                                   else type(policies).__name__)
        return dataclasses.replace(self, policies=policies, options=options)

    def run(self, logs: Any) -> Evaluation:
        """The evaluation of ``logs`` under this plan.

        ``logs`` are validated logs, a lazy :func:`ope.scan_logs` source (its plan must have
        no :meth:`stream_obstacles`) or anything :func:`ope.read_logs` accepts. The warnings
        of the run are re-emitted once each (the estimates also carry them as notes).
        """
        from ope.io import LogScan, read_logs

        provenance = Provenance(options=dict(self.options), seed=self.seed)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if isinstance(logs, LogScan):
                self.check_streamable("over a lazy scan")
                evaluation = _evaluate_streaming(logs, self).with_provenance(provenance)
            else:
                if not isinstance(logs, BanditLogs):
                    logs = read_logs(logs)
                evaluation = _evaluate_eager(logs, self, provenance)
        for category, message in dict.fromkeys((w.category, str(w.message)) for w in caught):
            warnings.warn(message, category, stacklevel=3)
        return evaluation

    def diagnose(self, logs: Any, *, target_width: float | None = None,
                 new_rows: int | None = None, statistics: Any = None) -> Any:
        """The overlap diagnostics (:func:`ope.diagnose`) of the plan's candidates on
        ``logs``, with its clip level (read from its clipped estimator), reward range,
        confidence level, segments and sampling weights; ``statistics`` of an evaluation under
        this plan are reused."""
        from ope.diagnostics import diagnose

        clipped = self.clipped
        return diagnose(
            logs, self.policies, by=self.by,
            max_weight=None if clipped is None else clipped.max_weight,
            reward_range=self.settings.reward_range,
            confidence_level=self.settings.confidence_level,
            target_width=target_width, new_rows=new_rows, statistics=statistics,
            weight_column=self.weight_column,
        )


def _check_bounds(resolved: Sequence[tuple[str, Any]], settings: EvaluationSettings) -> None:
    """The a priori bounds ``settings.ci`` needs for the estimators it applies to, before any
    row is read: ``reward_range`` for every bounded method, ``weight_bound`` for the methods of
    IPS and SNIPS that use one (an estimator the method does not apply to falls back, or is
    refused when the evaluation is built, and needs neither)."""
    from ope.exceptions import MissingBoundsError

    ci = settings.ci
    takes = [k for k, est in resolved if ci in type(est).interval_methods]
    if ci in UNBOUNDED_CI_METHODS or not takes:
        return
    if settings.reward_range is None:
        raise MissingBoundsError(
            f"ci={ci!r} needs the a priori range of the rewards (of {', '.join(takes)}): pass "
            "reward_range=(low, high) (e.g. (0, 1) for clicks). The observed minimum and "
            "maximum reward are not bounds."
        )
    bounded = [k for k in takes if k in WEIGHT_BOUND_ESTIMATORS]
    if ci in WEIGHT_BOUND_METHODS and bounded and settings.weight_bound is None:
        raise MissingBoundsError(
            f"ci={ci!r} of {', '.join(bounded)} needs an a priori bound on the "
            "importance weights: pass weight_bound=M with M >= pi(a|x)/pi_0(a|x) for every "
            "context and action (e.g. 1 / the smallest logging probability), or use "
            "ClippedIPS(max_weight=M), whose weights are bounded by construction. The largest "
            "observed weight is not a bound."
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
        action_features = logs.action_features
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
    feats = None
    feat_names: list[str] = []
    if action_features is not None:
        feats, feat_names = action_feature_matrix(action_features, catalog)
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
    if not (np.isfinite(q_logged).all() and np.isfinite(q_target).all()) and x.shape[1]:
        _name_unfit_features(logs, columns, x)
    return q_logged, q_target, {"context": columns, "action_features": feat_names}, notes


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
        stats : ope.streaming.MomentStats
            Merged over every batch (scan) or partition (Dask), with the policy names.
        resolved : sequence of (str, estimator)
            :func:`resolve_estimators` of IPS, clipped IPS and SNIPS only.
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
        rr, level = settings.reward_range, settings.confidence_level
        unweighted = stats.weighted is None or stats.weighted.unit
        weighted = [] if unweighted else [
            sampling_weight_note(stats.weight_name, stats.weighted.sum_weights(), stats.n)
        ]
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

    def __post_init__(self) -> None:
        object.__setattr__(self, "by", tuple(self.by))
        fell_back = self.fallback_estimators
        fallback_notes = [] if not fell_back else [
            f"ci={self.ci_method!r} does not apply to {', '.join(fell_back)}: "
            + (f"its interval is {self.ci_fallback}" if len(fell_back) == 1
               else f"their intervals are {self.ci_fallback}")
        ]
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
            e for e in self.estimators
            if any(self._method_of(est) != self.ci_method
                   for (_, key), est in self.estimates.items() if key == e)
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
        return self.ci_method if source is not None and self.ci_method in source.methods else (
            self.ci_fallback
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
        ci = self.logging.ci(self.confidence_level, method, **options)
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
            "notes": "; ".join(est.notes),
        }

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
        estimator = (self.estimators[0] if estimator is None
                     else check_choice(estimator, "estimator", self.estimators))
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
                    asymptotic = (normal_interval(value, se, confidence_level=self.confidence_level)
                                  if method == "normal" else
                                  t_interval(value, se, n, confidence_level=self.confidence_level))
                    low, high = float(asymptotic.low), float(asymptotic.high)
                else:
                    d = self.compare(p, "logging", estimator=e, ci=method)
                    paired = d.ci(self.confidence_level, method)
                    value, se = d.value, d.std_error
                    low, high = float(paired.low), float(paired.high)
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
    ) -> Any:
        """Write the self-contained HTML report of this evaluation (with ``diagnostics`` from
        ope.diagnose for the weights, gaps and plan) to ``path``; returns the path. See
        :func:`ope.report.write_report`. (Named ``write_report``, not ``report``: the
        ``report`` attribute is the logs' :class:`~ope.logs.ValidationReport`.)"""
        from ope.report import write_report

        if provenance is None and self.provenance is not None:
            provenance = self.provenance.to_dict()
        return write_report(
            path, evaluation=self, diagnostics=diagnostics, certificate=certificate,
            truth=truth, provenance=provenance, title=title, overwrite=overwrite,
        )

    def _estimator_of(self, key: str) -> Any:
        """The estimator object behind the estimates of ``key`` (the name when none keeps it)."""
        from ope.estimators import EstimatorRows

        return next((est.source.estimator for (_, k), est in self.estimates.items()
                     if k == key and isinstance(est.source, EstimatorRows)), key)

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
                # the estimator object of the estimates (with its setting inside)
                pairs = stats.paired_with_logging(
                    self._estimator_of(key), reward_range=reward_range
                )
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
            ("logging policy (mean logged reward)" if self.weight_column is None
             else "logging policy (weighted mean reward)", logging),
            ("rows", f"{self.logging.n:,} used" + (
                f", {rejected:,} of {self.report.rows_read:,} rejected and dropped"
                if rejected else "")),
            ("propensities", self.propensity_source),
        ]
        if self.weight_column is not None:
            fields.append(("sampling weights", f"column `{self.weight_column}` "
                           "(Horvitz-Thompson weighted estimates)"))
        if self.model_columns is not None:
            fields += [
                ("reward model context columns", _column_list(self.model_columns["context"])),
                ("reward model action features",
                 _column_list(self.model_columns["action_features"])),
            ]
        if self.by:
            fields.append(("segments", f"{len(self.segment_estimates):,} estimates by "
                           f"{', '.join(self.by)} (table(by='segment'))"))
        return ResultParts(
            title=self._title(),
            fields=tuple(fields),
            table=shown,
            notes=self.notes,  # evaluation-level notes (dropped rows, model choice, ...)
            # each estimate's notes on its row: stated once, referenced as [i] from the rows
            row_notes=self._row_notes(t),
        )

    def _row_notes(self, t: pd.DataFrame) -> list[tuple[str, ...]]:
        return [self.estimates[(p, e)].notes for p, e in zip(t["policy"], t["estimator"])]

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
        shown = t[["column", "segment", "policy", "estimator", "value", "std_error", "ci_low",
                   "ci_high", "n", "ess_ratio"]]
        return render_text(ResultParts(
            title=(f"per-segment estimates by {', '.join(self.by)}: {self.ci_method} intervals "
                   f"at {self.confidence_level:.0%}, each on the segment's rows alone"),
            table=shown,
        ))

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
    sampling_weight: np.ndarray | None = None,
    logging_out: list[Estimate] | None = None,
) -> tuple[dict[tuple[str, str], Estimate], Any]:
    """Every estimate of the candidates ``names`` on these rows, and the pass's statistics.

    IPS, clipped IPS and SNIPS always come from one pass of the moment kernel (so their numbers
    do not depend on which other estimators are asked for), backed by the rows for row-level
    intervals and paired comparisons; the others from one ``estimate_many`` pass each.
    ``target`` is the (n, P) matrix or the P columns (zero-copy views of the log's columns).
    Returns ``(estimates, MomentStats or None)``. With ``sampling_weight`` every estimator runs
    its Horvitz-Thompson weighted form (``estimate_many(..., sampling_weight=...)``) and no
    moment statistics are formed; the weighted logging value then comes from the same pass,
    appended to ``logging_out`` when it is given.
    """
    from ope.streaming import MomentStats

    if not len(names):
        return {}, None
    rr = settings.reward_range
    stats = None
    if sampling_weight is None and any(key in STREAMING_ESTIMATORS for key, _ in resolved):
        stats = MomentStats.from_arrays(
            reward, propensity, target, names=names,
            estimators=[e for k, e in resolved if k in STREAMING_ESTIMATORS],
        )
    out: dict[tuple[str, str], Estimate] = {}
    one_pass = [(k, e) for k, e in resolved if k in STREAMING_ESTIMATORS]
    weighted: dict[str, list[Estimate]] = {}
    if sampling_weight is not None and one_pass:  # one kernel pass for IPS, SNIPS, clipped IPS
        with_logging = logging_out is not None  # and the logging value
        found = estimate_weighted_many(
            [e for _, e in one_pass] + ([LoggingValue()] if with_logging else []),
            reward=reward, logging_propensity=propensity,
            target_propensity=target, sampling_weight=sampling_weight,
            weight_name=settings.weight_column or "sampling_weight", reward_range=rr,
            names=names, rewards_checked=True,
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


def _logging_estimate(
    stats: Any, reward: np.ndarray, settings: EvaluationSettings,
    sampling_weight: np.ndarray | None = None,
) -> Estimate:
    """The logging value from the pass's statistics (backed by the rows), or on its own."""
    if stats is None:
        return logging_value(
            reward, reward_range=settings.reward_range, rewards_checked=True,
            sampling_weight=sampling_weight,
            weight_name=settings.weight_column or "sampling_weight",
        )
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
    by: str | Sequence[str] | None = None,
    ci_fallback: str | None = None,
    weight_column: str | None = None,
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
        Randomness of cross-fitting folds and the bootstrap. ``None`` draws a seed and records
        it (``ev.provenance.seed``): ``rng=ev.provenance.seed`` gives the same numbers again.
    by : str or sequence of str, optional
        Segment columns of the logs (one scalar label per row; numeric columns with many
        values are cut into quantile bins as in ``ope.diagnose``): every estimator's value and
        interval is also computed on each segment's rows alone (``ev.table(by="segment")``).
        IPS, clipped IPS and SNIPS of every segment come from one grouped pass of the moment
        kernel; DM and the DR family fit their reward model on each segment's rows. The
        candidates are resolved once on all rows (a policy table or distributions cover
        every logged event) and each segment takes its rows of them: each segment's numbers
        equal those of ``evaluate`` on that segment's rows with the candidates' rows for them.
    ci_fallback : {"normal", "t"}, optional
        Interval of the estimators ``ci`` does not apply to (e.g. ``ci="hoeffding"`` with
        SNIPS): their rows' ``ci_method`` says so and a note names them. Without it such an
        estimator is an error.
    weight_column : str, optional
        Column of the rows' sampling (Horvitz-Thompson) weights, ``1 / P(row kept)``. By
        default the ``weight`` column when the logs have one (the DSJSON importer writes
        ``1 / (1 - pdrop)`` there), else none. With weights every estimate, interval, segment
        and the shared bootstrap are weighted (e.g. IPS: ``sum s w r / sum s``; see
        :mod:`ope.estimators`), a note gives the estimated population size ``sum s``, and the
        interval methods that cannot take weights (hoeffding, bernstein, bottou,
        empirical_likelihood, betting) refuse.

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
    plan = EvaluationPlan.build(
        policies, estimators=estimators, ci=ci, confidence_level=confidence_level,
        reward_range=reward_range, max_weight=max_weight, weight_bound=weight_bound, tau=tau,
        shrinkage=shrinkage, reward_model=reward_model, context_columns=context_columns,
        n_resamples=n_resamples, rng=rng, action_features=action_features, by=by,
        ci_fallback=ci_fallback, weight_column=weight_column,
    )
    return plan.run(logs)


def _evaluate_eager(logs: BanditLogs, plan: EvaluationPlan, provenance: Provenance) -> Evaluation:
    """The evaluation of validated logs under ``plan`` (the eager driver)."""
    policies, resolved, model = plan.policies, plan.resolved, plan.model
    settings = dataclasses.replace(
        plan.settings, weight_column=sampling_weight_column(logs.columns, plan.weight_column)
    )
    segment_columns = check_segment_columns(logs.table.schema, plan.by, source=logs.report.source)
    run = _eager_run(logs, policies, resolved, settings, model)
    segments: dict[tuple[str, str, str, str], Estimate] = {}
    segment_notes: list[str] = []
    if segment_columns:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # each segment's estimates carry their own notes
            segments, segment_notes = _segment_estimates(
                logs, segment_columns, policies, resolved, settings, model, run
            )
    interval_values = None
    if settings.ci == "bootstrap":
        interval_values = _shared_bootstrap_intervals(run, resolved, settings)
    notes = logs.report.dropped_notes()
    if run.sampling_weight is not None:
        notes.append(sampling_weight_note(
            settings.weight_column or "", float(np.sum(run.sampling_weight)), logs.n
        ))
    notes += run.model_notes
    source = propensity_info(logs)
    estimated = estimated_propensity_note(logs)
    if estimated is not None:
        notes.append(estimated)
    if run.rows_ignored:
        notes.append(
            f"{run.rows_ignored:,} policy-table rows for events dropped from the logs were "
            "ignored"
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
        _provenance=provenance,
    )


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
    distributions: Mapping[str, Any] | None = None  # each candidate's, when DM/DR asked


def _eager_run(
    logs: BanditLogs,
    policies: Any,
    resolved: Sequence[tuple[str, Any]],
    settings: EvaluationSettings,
    model: Mapping[str, Any],
    *,
    candidates: Any = None,
) -> _EagerRun:
    """Every estimate of ``resolved`` on the rows of ``logs`` (the body of :func:`evaluate`).

    ``candidates`` (a ``TargetPropensities`` with distributions, one row per row of ``logs``)
    are the candidates already resolved, used in place of ``policies``: a segment's rows
    take their rows of the candidates resolved once on the whole logs.
    """
    needs_model = any(k in MODEL_ESTIMATORS for k, _ in resolved)
    direct = None if needs_model or candidates is not None else _target_columns(logs, policies)
    factored: dict[str, dict[str, str]] = {}
    if direct is not None:  # the log's own columns: no (n, P) copy
        names, target = direct
        rows_ignored = 0
    else:
        if candidates is not None:
            tp = candidates
        else:
            tp, factored = _candidates(logs, policies, needs_model)
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
    if needs_model:
        q_logged, q_target, model_columns, model_notes = _model_predictions(
            logs, tp.distributions, tp.names, **model
        )
    logging_out: list[Estimate] = []
    estimates, stats = _row_estimates(
        resolved, settings, reward, propensity, target, names, q_logged, q_target, weight,
        logging_out=logging_out,
    )
    for name, changed in factored.items():  # loop over factored candidates
        p_c, t_c = _factored_arrays(logs, changed)
        estimates.update(_row_estimates(
            resolved, settings, reward, p_c, t_c[:, None], [name], sampling_weight=weight
        )[0])
    base = (logging_out[0] if logging_out
            else _logging_estimate(stats, reward, settings, weight))
    return _EagerRun(
        names=list(names), target=target, factored=factored, rows_ignored=rows_ignored,
        reward=reward, propensity=propensity, sampling_weight=weight, estimates=estimates,
        logging=base, stats=stats,
        model_columns=model_columns, model_notes=model_notes,
        distributions=tp.distributions if needs_model else None,
    )


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
    weighting = [(k, e) for k, e in resolved if isinstance(e, WeightingEstimator)]
    sources = {
        (p, k): run.estimates[(p, k)].source
        for p in [*run.names, *run.factored]
        for k, e in resolved
        if not isinstance(e, WeightingEstimator) and k != "dm"
    }
    sources.update({(p, k): run.estimates[(p, k)].source for p in run.factored for k, _ in weighting})
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
        if k != "dm"
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
                run.reward, run.propensity, run.target, run.sampling_weight, seg.codes,
                seg.size, max_weight=mw,
            )
        for g, label in enumerate(seg.labels):  # loop over segments, not rows
            if counts[g] < MIN_ROWS:
                skipped.append(f"{col}={label} ({int(counts[g])} row)")
                continue
            idx = order[bounds[g]:bounds[g + 1]]
            r_g, p_g = run.reward[idx], run.propensity[idx]
            found: dict[tuple[str, str], Estimate] = {}
            s_g = None if run.sampling_weight is None else run.sampling_weight[idx]
            if wgroups is not None and s_g is not None:
                t_g = ([c[idx] for c in run.target] if isinstance(run.target, (list, tuple))
                       else run.target[idx])
                wm_g = wgroups[g]
                assert wm_g is not None
                for (key, _), results in zip(weighting, weighted_estimates(
                    [e for _, e in weighting], wm_g, reward=r_g, logging_propensity=p_g,
                    target=t_g, sampling_weight=s_g, labels=run.names, reward_range=rr,
                    weight_name=settings.weight_column or "sampling_weight",
                )):
                    found.update({(p, key): res for p, res in zip(run.names, results)})
            if groups is not None:
                t_g = ([c[idx] for c in run.target] if isinstance(run.target, (list, tuple))
                       else run.target[idx])
                centered = groups[g]
                assert centered is not None  # the segment has rows
                stats = MomentStats(
                    n=int(counts[g]), min_r=float(r_g.min()), max_r=float(r_g.max()),
                    centered=centered, max_weight=mw, names=tuple(run.names),
                )
                for key, est in weighting:  # loop over estimators
                    results = stats.with_rows(
                        stats.estimates(est, reward_range=rr, confidence_level=level),
                        reward=r_g, logging_propensity=p_g, target_propensity=t_g,
                        reward_range=rr,
                    )
                    found.update({(p, key): res for p, res in zip(run.names, results)})
            for name, changed in run.factored.items():  # loop over factored candidates
                p_c, t_c = _factored_arrays(logs, changed)
                found.update(_row_estimates(
                    weighting, settings, r_g, p_c[idx], t_c[idx, None], [name],
                    sampling_weight=s_g,
                )[0])
            if modelled:
                sub = logs.table.take(_row_positions(idx))
                part = (BanditLogs.from_validated if logs.targets_validated() else BanditLogs)(
                    sub, logs.report, dropped_event_ids=logs.dropped_event_ids,
                    unit_roundoff=logs.unit_roundoff,
                )
                part.action_features = logs.action_features
                found.update(_eager_run(
                    part, policies, modelled, settings, model,
                    candidates=_candidate_rows(run, idx),
                ).estimates)
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


def batch_statistics(
    logs: BanditLogs, policies: Any, estimators: Sequence[Any], weight_column: str | None = None
) -> Any:
    """The moment statistics (:class:`ope.streaming.MomentStats`) of one validated batch for
    the weighting ``estimators`` of a plan: the per-batch step shared by the scan and the Dask
    partitions, merged by the same kernel. The batch's ``target__`` columns are read as they
    are (no (n, P) copy) when the reader validated them. With ``weight_column`` the statistics
    are of the sampling-weighted rows."""
    from ope.policies import target_propensities
    from ope.streaming import MomentStats

    direct = _target_columns(logs, policies)
    target: Any
    if direct is not None:
        names, target = direct
    else:
        tp = target_propensities(logs, policies)
        names, target = tp.names, tp.values
    return MomentStats.from_arrays(
        logs.column("reward"),
        logs.column("propensity"),
        target,
        estimators=estimators,
        names=names,
        sampling_weight=None if weight_column is None else logs.column(weight_column),
        weight_name=weight_column or "sampling_weight",
    )


def _evaluate_streaming(scan: Any, plan: EvaluationPlan) -> Evaluation:
    """The evaluation of a lazy scan under ``plan``: the moment kernel per batch, merged."""
    settings = dataclasses.replace(
        plan.settings, weight_column=sampling_weight_column(scan.columns, plan.weight_column)
    )
    stats = None
    for batch in scan.to_batches():  # loop over batches
        part = batch_statistics(batch, plan.policies, plan.weighting, settings.weight_column)
        stats = part if stats is None else stats.merge(part)
    if stats is None:
        raise EstimationError(f"the scan of {scan.source} yielded no rows.")
    estimated = estimated_propensity_note(scan)
    return Evaluation.from_statistics(
        stats, plan.resolved, settings, report=scan.report,
        notes=[estimated] if estimated else [],
        propensity_source=propensity_info(scan)["propensity_source"],
    )
