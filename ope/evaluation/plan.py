"""The evaluation plan (:class:`EvaluationPlan`): built once from the options, checked once, run
by every driver; and :func:`evaluate`, which builds one and runs it.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

import numpy as np

from ope._validation import (
    check_rng,
    resolve_seed,
    user_stacklevel,
)
from ope.exceptions import (
    EstimationError,
    PolicyError,
)
from ope.logs import BanditLogs
from ope.results import (
    Provenance,
)
from ope.schema import TARGET_PREFIX
from ope.evaluation._settings import (
    MODEL_ESTIMATORS,
    CI_FALLBACKS,
    MARGINAL_STREAMING_ESTIMATORS,
    STREAMING_ESTIMATORS,
    resolve_estimators,
    EvaluationSettings,
    check_bounds,
    check_embedding,
)
from ope.evaluation.result import (
    Evaluation,
)
from ope.evaluation._driver import (
    evaluate_eager,
    evaluate_scan,
    model_obstacle,
)

__all__ = [
    "DEFAULT_ESTIMATORS",
    "EvaluationPlan",
    "evaluate",
]

#: The estimators of :func:`evaluate` when none are named: IPS and SNIPS, and DR when the logs
#: give what it needs (each candidate's whole distribution and a context for its reward
#: model); when they do not, DR is left out with a note (:meth:`EvaluationPlan.run`).
DEFAULT_ESTIMATORS: Final = ("ips", "snips", "dr")


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
    default_estimators : bool
        The estimators are the default (:data:`DEFAULT_ESTIMATORS`, none named): DR is left
        out, with a note, of a run on logs that cannot give it (a lazy scan, or logs without
        the candidates' whole distributions or a context).

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
    embedding: Any = None
    default_estimators: bool = False

    @classmethod
    def build(
        cls,
        policies: Any = None,
        *,
        estimators: Sequence[Any] | str | None = None,
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
        embedding: Any = None,
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
            ci=ci,
            confidence_level=confidence_level,
            reward_range=reward_range,
            weight_bound=weight_bound,
            n_resamples=n_resamples,
            rng=rand,
            ci_fallback=ci_fallback,
        )
        default = estimators is None
        if estimators is None:
            estimators = DEFAULT_ESTIMATORS
        resolved = resolve_estimators(
            estimators, max_weight=max_weight, tau=tau, shrinkage=shrinkage
        )
        check_bounds(resolved, settings)
        check_embedding(resolved, embedding)
        given = {
            "policies": policies
            if policies is None or isinstance(policies, (str, list, tuple))
            else type(policies).__name__,
            "estimators": [
                getattr(e, "name", e) if not isinstance(e, str) else e
                for e in (
                    (estimators,)
                    if isinstance(estimators, str)
                    or callable(getattr(estimators, "estimate", None))
                    else estimators
                )
            ],
            "ci": ci,
            "confidence_level": confidence_level,
            "reward_range": reward_range,
            "max_weight": max_weight,
            "weight_bound": weight_bound,
            "tau": tau,
            "shrinkage": shrinkage,
            "context_columns": context_columns,
            "n_resamples": n_resamples,
            "by": by,
            "ci_fallback": ci_fallback,
            "weight_column": weight_column,
            "embedding": None if embedding is None else embedding.describe(),
        }
        return cls(
            estimators=tuple(resolved),
            settings=settings,
            policies=policies,
            by=by,
            model={
                "reward_model": reward_model,
                "context_columns": context_columns,
                "action_features": action_features,
                "rng": rand,
            },
            weight_column=weight_column,
            seed=seed,
            options={k: v for k, v in given.items() if v is not None},
            embedding=embedding,
            default_estimators=default,
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

    @property
    def marginal_weighting(self) -> list[tuple[str, Any]]:
        """The marginalized estimators merged statistics give (MIPS, SNMIPS), with their keys."""
        return [(k, est) for k, est in self.estimators if k in MARGINAL_STREAMING_ESTIMATORS]

    def streams(self, key: str) -> bool:
        """Whether merged statistics give the estimator ``key`` under this plan."""
        return key in STREAMING_ESTIMATORS or (
            key in MARGINAL_STREAMING_ESTIMATORS
            and self.embedding is not None
            and self.embedding.kind != "estimated"  # cross-fitted over every row
        )

    def stream_obstacles(self) -> tuple[tuple[str, str], ...]:
        """Why the plan cannot run on merged statistics (a scan or Dask partitions): one
        ``(argument, reason)`` pair per obstacle; empty when it can.

        Merged statistics give IPS, clipped IPS and SNIPS with the normal or t interval
        (every other interval method reads the rows) for candidates named by their
        ``target__`` columns or given as policy objects, and with an ``embedding`` MIPS and
        SNMIPS (each batch's embedding propensities are computed from its own rows).
        """
        obstacles: list[tuple[str, str]] = []
        for key, _ in self.estimators:  # loop over estimators
            if not self.streams(key):
                why = (
                    "needs a reward model fitted on every row"
                    if key in MODEL_ESTIMATORS
                    else "needs a known embedding=ope.ActionEmbedding(...) (an estimated "
                    "p(e|a) is cross-fitted over every row)"
                    if key in MARGINAL_STREAMING_ESTIMATORS
                    else "needs every row"
                )
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
            unsupported = [k for k, _ in self.estimators if not self.streams(k)]
            marginal = ", ".join(sorted(MARGINAL_STREAMING_ESTIMATORS))
            if self.embedding is None:
                also = f" (and {marginal} with a known embedding=ope.ActionEmbedding(...))"
            elif self.embedding.kind == "estimated":
                also = (
                    f"; {marginal} need a known embedding, and the one given is estimated (its "
                    "p(e|a) is cross-fitted over every row)"
                )
            else:
                also = f" and, with the embedding given, {marginal}"
            raise EstimationError(
                f"estimator(s) {', '.join(unsupported)} cannot run {where}; merged statistics "
                f"support {', '.join(sorted(STREAMING_ESTIMATORS))}{also}. Read the logs "
                "eagerly (ope.evaluate(ope.read_logs(...))) for the others."
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

    def candidate_names(self, columns: Sequence[str], source: str) -> list[str]:
        """The names of the plan's candidates among the ``columns`` read from ``source``.

        A dict of policy objects names its candidates itself; otherwise each candidate is a
        ``target__<name>`` column among ``columns``: every one when ``policies`` is None, else
        the named ones. Drivers that read the columns first (Dask, Spark) call this before any
        task runs.

        Raises
        ------
        ope.PolicyError
            No ``target__`` column when ``policies`` is None, or a named policy whose column is
            not read.

        Examples
        --------
        >>> from ope.evaluation import EvaluationPlan
        >>> read = ["action", "propensity", "reward", "target__new", "target__old"]
        >>> EvaluationPlan.build().candidate_names(read, "logs.parquet")
        ['new', 'old']
        >>> EvaluationPlan.build(["old"]).candidate_names(read, "logs.parquet")
        ['old']
        """
        if isinstance(self.policies, Mapping):
            return [str(p) for p in self.policies]
        have = [c for c in columns if c.startswith(TARGET_PREFIX)]
        if self.policies is None and not have:
            raise PolicyError(
                f"no candidate policies: the columns read from {source} ({', '.join(columns)}) "
                "hold no target__<name> columns. Log the candidates' propensities as "
                "target__<name>, include them in columns=[...], or pass policies= (names or a "
                "dict of policy objects)."
            )
        wanted = [f"{TARGET_PREFIX}{p}" for p in self.policies or ()]
        missing = [c for c in wanted if c not in have]
        if missing:
            raise PolicyError(
                f"`policies`: policy column(s) {', '.join(missing)} is not among the columns "
                f"read from {source}; its candidate columns are: {', '.join(have) or 'none'}."
            )
        return [c[len(TARGET_PREFIX) :] for c in (wanted or have)]

    def with_policies(self, policies: Any) -> EvaluationPlan:
        """The same plan for other candidates (e.g. those a command line builds once the rows
        are read); nothing is checked again."""
        options = dict(self.options)
        options.pop("policies", None)
        if policies is not None:
            options["policies"] = (
                policies if isinstance(policies, (str, list, tuple)) else type(policies).__name__
            )
        return dataclasses.replace(self, policies=policies, options=options)

    def run(self, logs: Any) -> Evaluation:
        """The evaluation of ``logs`` under this plan.

        ``logs`` are validated logs, a lazy :func:`ope.scan_logs` source (its plan must have
        no :meth:`stream_obstacles`) or anything :func:`ope.read_logs` accepts. The warnings
        of the run are re-emitted once each (the estimates also carry them as notes).
        """
        from ope.io import LogScan, read_logs

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if isinstance(logs, LogScan):
                plan, note = self.for_logs(None)
                plan.check_streamable("over a lazy scan")
                provenance = Provenance(options=dict(plan.options), seed=plan.seed)
                evaluation = evaluate_scan(logs, plan).with_provenance(provenance)
            else:
                if not isinstance(logs, BanditLogs):
                    logs = read_logs(logs)
                plan, note = self.for_logs(logs)
                provenance = Provenance(options=dict(plan.options), seed=plan.seed)
                evaluation = evaluate_eager(logs, plan, provenance)
            if note:
                evaluation = evaluation.with_note(note)
        level = user_stacklevel()  # the user's line, however many of ope's frames called this
        for category, message in dict.fromkeys((w.category, str(w.message)) for w in caught):
            warnings.warn(message, category, stacklevel=level)
        return evaluation

    def for_logs(self, logs: BanditLogs | None) -> tuple[EvaluationPlan, str | None]:
        """This plan for ``logs`` (None: a lazy scan), with DR left out of the default
        estimators when the logs cannot give it, and the note that says so (else None). The
        plan's recorded options then list the estimators it runs."""
        if not self.default_estimators or not any(k == "dr" for k, _ in self.estimators):
            return self, None
        why = (
            "a lazy scan gives merged statistics, and DR needs a reward model fitted on every row"
            if logs is None
            else model_obstacle(logs, self.policies, self.model, self.weight_column)
        )
        if why is None:
            return self, None
        kept = tuple((k, e) for k, e in self.estimators if k != "dr")
        note = (
            f"dr, one of the default estimators, was left out: {why}. Name the estimators "
            "(estimators=...) to choose them."
        )
        options = {**self.options, "estimators": [k for k, _ in kept]}
        return replace(self, estimators=kept, default_estimators=False, options=options), note

    def diagnose(
        self,
        logs: Any,
        *,
        target_width: float | None = None,
        new_rows: int | None = None,
        statistics: Any = None,
        sensitivity: bool | str = "auto",
    ) -> Any:
        """The overlap diagnostics (:func:`ope.diagnose`) of the plan's candidates on
        ``logs``, with its clip level (read from its clipped estimator), reward range,
        confidence level, segments and sampling weights; ``statistics`` of an evaluation under
        this plan are reused; ``sensitivity`` as :func:`ope.diagnose` takes it."""
        from ope.diagnostics import diagnose

        clipped = self.clipped
        return diagnose(
            logs,
            self.policies,
            by=self.by,
            max_weight=None if clipped is None else clipped.max_weight,
            reward_range=self.settings.reward_range,
            confidence_level=self.settings.confidence_level,
            target_width=target_width,
            new_rows=new_rows,
            statistics=statistics,
            weight_column=self.weight_column,
            embedding=self.embedding,
            sensitivity=sensitivity,
        )


def evaluate(
    logs: Any,
    policies: Any = None,
    *,
    estimators: Sequence[Any] | str | None = None,
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
    embedding: Any = None,
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
    estimators : sequence of str or estimator objects, "auto", or None
        None (the default): ``ips``, ``snips`` and ``dr`` (:data:`DEFAULT_ESTIMATORS`), DR left
        out with a note when the logs cannot give it (a lazy scan; logs without the
        candidates' whole distributions, ``candidates`` and ``target_dist__<name>``, or
        without a context column for its reward model). Names among ``dm, ips, clipped_ips,
        snips, dr, sndr, switch_dr, dros`` and, with an ``embedding``, the marginalized
        ``mips, snmips, mdr, offcem``. ``"auto"``: every estimator that applies to the logs,
        with one chosen per candidate by off-policy cross-validation
        (:mod:`ope.evaluation.auto`; the choice, its scores and the reason in
        :attr:`Evaluation.selection` and a note per candidate).
    ci : str, default "normal"
        Interval method for ``ci_low``/``ci_high`` (``normal, t, bootstrap, hoeffding,
        bernstein, bottou, empirical_likelihood, betting``). Bounded methods need
        ``reward_range``; a method that does not apply to one of the estimators is an error.
    confidence_level : float, default 0.95
    reward_range : (float, float), optional
        A priori range of the rewards (clicks: (0, 1)). Never taken from the data.
    max_weight, tau, shrinkage : float, mapping of str to float, or SettingChoice, optional
        Settings of ``clipped_ips``, ``switch_dr`` and ``dros`` when those are named: one
        value, or one per candidate (a mapping of candidate name to value, or the
        :class:`ope.evaluation.SettingChoice` of :func:`ope.tune_setting`; in-memory logs;
        :func:`ope.evaluation.tuning.evaluate_with_settings`). A tuning rule's name
        (``"slope"``, ``"mse"``) tunes the setting per candidate on these rows first (also
        with ``estimators="auto"``; not by default).
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
    embedding : ope.ActionEmbedding, optional
        How actions map to embeddings (clusters, categorical item features, or a known
        ``p(e|a)``), for ``mips``, ``snmips`` and ``mdr``: their weights are the candidate's
        probability of the row's logged embedding over the logger's, summed over each row's
        candidates (:func:`ope.marginal.marginal_propensities`; the logs need ``candidates``,
        ``logging_distribution`` and each candidate's whole distribution). The evaluation
        also tests each candidate's embedding for a direct effect of the item
        (:attr:`Evaluation.embedding_checks`, :func:`ope.marginal.embedding_sufficiency`).
        Required by those estimators, refused without them. Per candidate (in-memory logs,
        :func:`ope.evaluation.tuning.evaluate_with_settings`): a mapping of candidate name to
        ``ActionEmbedding``, the :class:`ope.evaluation.EmbeddingChoice` of
        :func:`ope.tune_embedding`, or an ``ActionEmbedding(select="slope" | "mse")`` whose
        dimensions are chosen per candidate on these rows first
        (:attr:`Evaluation.settings`).

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
    # every argument but the rows is an option of the plan, under the same name
    options = {name: value for name, value in locals().items() if name != "logs"}
    plan = EvaluationPlan.build(**options)
    return plan.run(logs)
