"""``evaluate_trajectories``: many candidate policies × many sequential estimators on one set
of trajectories, with the interval fallback, the logging policy's value and the estimand in
words; the trajectory counterpart of :func:`ope.evaluate` (which the ``ope evaluate`` command
runs on trajectory logs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import pandas as pd

from ope._format import plural
from ope._progress import progress
from ope._result import ESTIMATE_TABLE_COLUMNS
from ope._validation import check_choice, check_names
from ope.exceptions import EstimationError, ParameterError, SchemaError
from ope.logs import Trajectories, ValidationReport
from ope.results import (
    CI_METHODS,
    Estimate,
    Provenance,
    Result,
    ResultParts,
    compare,
    estimate_rows,
    estimate_summary,
    grouped_notes,
    logging_comparison_rows,
    render_text,
)
from ope.sequential.estimators import (
    BOUNDED_ESTIMATORS,
    BOUNDED_METHODS,
    MARGINALIZED,
    MODEL_BASED,
    SEQUENTIAL_ESTIMATORS,
    sequential_estimate,
)
from ope.sequential._steps import refuse_trajectory_weights

__all__ = ["evaluate_trajectories", "TrajectoryEvaluation", "TRAJECTORY_TABLE_COLUMNS"]

#: Columns of :meth:`TrajectoryEvaluation.table`, in order (those of ``Evaluation.table``).
TRAJECTORY_TABLE_COLUMNS: Final = ESTIMATE_TABLE_COLUMNS
#: The estimators of :func:`evaluate_trajectories` when none are named: the per-decision pair.
DEFAULT_TRAJECTORY_ESTIMATORS: Final = ("pdis", "wpdis")
#: Interval methods ``ci_fallback`` may name: those that apply to every sequential estimator.
TRAJECTORY_CI_FALLBACKS: Final = ("normal", "t")


@dataclass(frozen=True, eq=False)
class TrajectoryEvaluation(Result):
    """Candidate policies × sequential estimators on one set of trajectories.

    Attributes
    ----------
    estimates : dict of (policy, estimator) to Estimate
    logging : Estimate or None
        The logging policy's own mean discounted return (unit weights, the same tail), None
        when the tail values depend on the candidate.
    policies, estimators : list of str
    confidence_level : float
    ci_method : str
        The interval method asked for; :attr:`ci_fallback` is that of the estimators it does
        not apply to (:attr:`fallback_estimators`).
    gamma : float
    estimand : str
        What the estimates estimate, in words: the discounted return, and how truncated
        episodes count (never implied).
    n_episodes, n_truncated : int
    report : ValidationReport
    notes : tuple of str
        Each estimate's notes once, with the estimators they concern, and the fallback note.
    """

    estimates: dict[tuple[str, str], Estimate]
    logging: Estimate | None
    policies: list[str]
    estimators: list[str]
    confidence_level: float
    ci_method: str
    gamma: float
    estimand: str
    n_episodes: int
    n_truncated: int
    report: ValidationReport
    notes: tuple[str, ...] = ()
    ci_fallback: str | None = None
    fallback_estimators: tuple[str, ...] = ()
    _provenance: Provenance | None = field(default=None, compare=False)

    @property
    def n(self) -> int:
        """Episodes used."""
        return self.n_episodes

    def __getitem__(self, key: tuple[str, str]) -> Estimate:
        """``result[policy, estimator]``: one estimate."""
        if key not in self.estimates:
            raise KeyError(
                f"no estimate {key!r}; policies {self.policies}, estimators {self.estimators}"
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
        """Paired difference ``policy − baseline`` over the same episodes, with its interval
        (``baseline="logging"``: the logging policy's mean discounted return)."""
        policy = check_choice(policy, "policy", self.policies)
        baseline = check_choice(baseline, "baseline", ["logging", *self.policies])
        estimator = (
            self.estimators[0]
            if estimator is None
            else check_choice(estimator, "estimator", self.estimators)
        )
        if baseline == "logging" and self.logging is None:
            raise EstimationError(
                "the logging policy's value was not computed (the tail values depend on the "
                "candidate): compare two candidates instead."
            )
        b = self.logging if baseline == "logging" else self[(baseline, estimator)]
        assert b is not None
        return compare(self[(policy, estimator)], b, confidence_level=self.confidence_level, ci=ci)

    def comparisons(self, *, ci: str = "normal") -> pd.DataFrame:
        """Every candidate against the logging policy, per estimator (paired by episode)."""
        method = check_choice(ci, "ci", CI_METHODS)
        cells = [(p, e) for p in self.policies for e in self.estimators]
        rows = logging_comparison_rows(
            self, cells, ci=method, confidence_level=self.confidence_level
        )
        return pd.DataFrame(rows)

    def table(self) -> pd.DataFrame:
        """One row per policy × estimator with :data:`TRAJECTORY_TABLE_COLUMNS`."""
        return pd.DataFrame(estimate_rows(self.estimates), columns=list(TRAJECTORY_TABLE_COLUMNS))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict with stable keys."""
        lg = self.logging
        return {
            "kind": "trajectories",
            "confidence_level": self.confidence_level,
            "ci_method": self.ci_method,
            "ci_fallback": {e: self.ci_fallback for e in self.fallback_estimators},
            "gamma": self.gamma,
            "estimand": self.estimand,
            "episodes": self.n_episodes,
            "truncated_episodes": self.n_truncated,
            "validation": self.report.to_dict(),
            "logging_policy": None if lg is None else estimate_summary(lg),
            "estimates": self.table().to_dict(orient="records"),
            "notes": list(self.notes),
        }

    def _parts(self) -> ResultParts:
        lg = self.logging
        steps = int(self.report.rows_used)
        return ResultParts(
            title=(
                f"{plural(len(self.policies), 'candidate policy', 'candidate policies')} x "
                f"{plural(len(self.estimators), 'sequential estimator')} on "
                f"{plural(self.n_episodes, 'episode')} ({plural(steps, 'step')}); "
                f"{self.ci_method} intervals at {self.confidence_level:.0%}"
            ),
            fields=(
                ("estimand", self.estimand),
                *(
                    ()
                    if lg is None
                    else (
                        ("logging policy value (mean discounted return)", lg.value),
                        (f"logging policy interval ({lg.ci_method})", (lg.ci_low, lg.ci_high)),
                    )
                ),
                ("rows rejected", self.report.rows_rejected),
            ),
            table=self.table().drop(columns=["notes", "confidence_level", "target"]),
            notes=self.notes,
        )

    def summary(self) -> str:
        """The evaluation as plain text."""
        return render_text(self._parts())

    def __repr__(self) -> str:
        return (
            f"TrajectoryEvaluation({len(self.policies)} policies x "
            f"{len(self.estimators)} estimators, {self.n_episodes} episodes)"
        )


def _per_policy(value: Any, policy: str, name: str, n_policies: int) -> Any:
    """The per-step values of ``name`` for one policy: a mapping's entry for it, or the one
    value given for a single candidate (a model's values depend on the policy)."""
    if value is None or isinstance(value, (int, float)) and name == "tail_value":
        return value
    if isinstance(value, Mapping):
        if policy not in value:
            raise ParameterError(
                f"`{name}` has no entry for policy {policy!r}; its keys: "
                f"{', '.join(map(repr, value)) or 'none'}."
            )
        return value[policy]
    if n_policies > 1:
        raise ParameterError(
            f"`{name}` would serve {n_policies} candidate policies, but its values depend on "
            f"the policy: pass a mapping of policy name to column name or array, e.g. "
            f"{name}={{'greedy': '{name.split('_')[0]}_greedy', ...}}, or select one policy."
        )
    return value


def _estimand(gamma: float, n_truncated: int, n_episodes: int, tail: Any) -> str:
    """What the estimates estimate, in words (truncation stated, never implied)."""
    head = f"expected discounted return (gamma={gamma:g}) of each candidate"
    if n_truncated == 0:
        return f"{head}; every one of the {n_episodes} episodes terminated (done at its end)"
    truncated = f"{n_truncated} of {n_episodes} episodes were truncated"
    if isinstance(tail, (int, float)) and tail == 0.0:
        return (
            f"{head} within the logged steps, stated as the target by tail_value=0: "
            f"{truncated} and contribute nothing after their last logged step"
        )
    if tail is not None:
        given = (
            f"tail_value={tail:g}"
            if isinstance(tail, (int, float))
            else f"the values of column {tail!r}"
            if isinstance(tail, str)
            else "each candidate's tail values"
            if isinstance(tail, Mapping)
            else "the tail values given"
        )
        return (
            f"{head}; {truncated} and their tail (after the last logged step) is "
            f"bootstrapped with {given}"
        )
    return (
        f"{head} accumulated within the logged steps: {truncated} and contribute nothing "
        "after their last logged step (pass tail_value=... to bootstrap their tails)"
    )


def evaluate_trajectories(
    trajectories: Trajectories,
    policies: Sequence[str] | None = None,
    *,
    estimators: Sequence[str] | str = DEFAULT_TRAJECTORY_ESTIMATORS,
    ci: str = "normal",
    ci_fallback: str | None = None,
    confidence_level: float = 0.95,
    gamma: float = 1.0,
    reward_range: tuple[float, float] | None = None,
    max_weight: float | None = None,
    weight_bound: float | None = None,
    horizon: int | str | None = None,
    tail_value: Any = None,
    q_hat: Any = None,
    v_hat: Any = None,
    state: Any = None,
) -> TrajectoryEvaluation:
    """Estimate the expected discounted return of P candidates with several sequential
    estimators (:func:`ope.sequential_estimate` for each cell, one pass over the steps each).

    Parameters
    ----------
    trajectories : ope.Trajectories
        Validated steps (:func:`ope.read_trajectories`).
    policies : sequence of str, optional
        Candidates by name (their ``target__<name>`` columns); default every one.
    estimators : sequence of str, default ("pdis", "wpdis")
        Among ``is, pdis, wis, wpdis, dr, wdr``.
    ci : str, default "normal"
        Interval method. The bounded methods (hoeffding, bernstein, betting) apply to ``is``
        and ``pdis`` only: the other estimators then take ``ci_fallback``.
    ci_fallback : {"normal", "t"}, optional
        Interval of the estimators ``ci`` does not apply to; without it such an estimator is an
        error.
    confidence_level, gamma, reward_range, max_weight, weight_bound, horizon
        As in :func:`ope.sequential_estimate` (``weight_bound`` and ``horizon`` serve the
        bounded intervals of is and pdis only).
    tail_value : float, str, array or mapping of policy to str or array, optional
        The value of the state each truncated episode was left in (see
        :func:`ope.sequential_estimate`); a mapping gives each policy its own column or array.
        The logging policy's value takes a number or one column as it is, and is not computed
        when the tail values depend on the candidate (a mapping).
    q_hat, v_hat : str, array or mapping of policy to str or array, optional
        The model's per-step values of ``dr``, ``wdr`` and ``mis_dr`` (e.g. from
        :func:`ope.sequential.fitted_q_evaluation`); with several policies a mapping.
    state : str or array, optional
        Each step's discrete state, for ``mis`` and ``mis_dr`` (default: the ``state`` column).
        ``max_weight`` does not clip them (a note says so).

    Returns
    -------
    TrajectoryEvaluation

    Raises
    ------
    ope.ParameterError
        An unknown estimator or interval method, a model estimator without ``q_hat`` and
        ``v_hat`` (or model values without one), ``weight_bound`` or ``horizon`` without is or
        pdis, per-step values shared by several policies, or a bad setting.
    ope.SchemaError
        Trajectories without a ``target__<name>`` column.
    ope.EstimationError
        The trajectories carry a ``weight`` column that is not all 1: sampling weights, which
        the trajectory estimators do not take (drop or rename the column if it is not one).

    Examples
    --------
    >>> import pandas as pd, ope
    >>> steps = pd.DataFrame({"episode_id": [0, 0, 1, 1], "step": [0, 1, 0, 1],
    ...                       "action": [0, 1, 1, 0], "propensity": 0.5,
    ...                       "reward": [1.0, 0.0, 0.0, 1.0], "done": [False, True, False, True],
    ...                       "target__pi": [1.0, 0.0, 0.0, 1.0]})
    >>> ev = ope.evaluate_trajectories(ope.read_trajectories(steps), estimators=("pdis",))
    >>> ev.table()[["policy", "estimator", "value"]].values.tolist()
    [['pi', 'pdis', 1.0]]
    """
    if not isinstance(trajectories, Trajectories):
        raise ParameterError(
            "`trajectories` must be validated trajectories (ope.read_trajectories(...)); got "
            f"{type(trajectories).__name__}."
        )
    names = list(
        check_names(
            [estimators] if isinstance(estimators, str) else estimators,
            "estimators",
            example="estimators=('pdis', 'wpdis')",
        )
    )
    if not names:
        raise ParameterError("`estimators` is empty; pass e.g. estimators=('pdis', 'wpdis').")
    for name in names:  # loop over estimators
        check_choice(name, "estimators", SEQUENTIAL_ESTIMATORS)
    if len(set(names)) != len(names):
        raise ParameterError(f"`estimators` lists an estimator twice: {', '.join(names)}.")
    fallback_method = (
        None
        if ci_fallback is None
        else check_choice(ci_fallback, "ci_fallback", TRAJECTORY_CI_FALLBACKS)
    )
    model = [e for e in names if e in MODEL_BASED]
    lacking = [k for k, v in (("q_hat", q_hat), ("v_hat", v_hat)) if v is None]
    if model and lacking:
        raise ParameterError(
            f"`estimators` ({', '.join(model)}) need a model's values per step: pass "
            f"{' and '.join(f'`{k}`' for k in lacking)} (Q(s_t, a_t) of the logged action "
            "and V(s_t) under the candidate, e.g. from ope.sequential.fitted_q_evaluation), or "
            "use pdis/wpdis."
        )
    given = [k for k, v in (("q_hat", q_hat), ("v_hat", v_hat)) if v is not None]
    if given and not model:
        raise ParameterError(
            f"{' and '.join(f'`{k}`' for k in given)} serve{'s' if len(given) == 1 else ''} "
            "the model-based estimators dr, wdr, mis_dr and magic only; add them to `estimators`."
        )
    bounds = [k for k, v in (("weight_bound", weight_bound), ("horizon", horizon)) if v is not None]
    if bounds and not any(e in BOUNDED_ESTIMATORS for e in names):
        raise ParameterError(
            f"{' and '.join(f'`{k}`' for k in bounds)} serve{'s' if len(bounds) == 1 else ''} "
            "the bounded intervals of "
            f"{' and '.join(BOUNDED_ESTIMATORS)} only, and `estimators` ({', '.join(names)}) "
            "has neither; add is or pdis."
        )
    candidates = (
        trajectories.target_policies
        if policies is None
        else list(check_names(policies, "policies", example="policies=['greedy']"))
    )
    if policies is not None and not candidates:
        raise ParameterError(
            "`policies` is empty; name the candidates (e.g. policies=['greedy']) or pass None "
            "for every target__<name> column."
        )
    if not candidates:
        raise SchemaError(
            f"{trajectories.report.source} has no target__<name> column: trajectory candidates "
            "are the per-step target probabilities of the logged actions, one target__<name> "
            "column per policy."
        )
    refuse_trajectory_weights(trajectories)
    common: dict[str, Any] = {
        "gamma": gamma,
        "confidence_level": confidence_level,
        "reward_range": reward_range,
    }
    estimates: dict[tuple[str, str], Estimate] = {}
    fallback: list[str] = []
    unclipped: list[str] = []
    if state is not None and not any(e in MARGINALIZED for e in names):
        raise ParameterError(
            "`state` serves the marginalized estimators (mis, mis_dr) only; add one to "
            "`estimators`."
        )
    cells = [(p, e) for p in candidates for e in names]
    # candidates x estimators: a handful of calls, each one pass over the steps (no row loop)
    for policy, estimator in progress(
        cells, desc="sequential estimates", total=len(cells), unit="estimate"
    ):
        options: dict[str, Any] = {
            "tail_value": _per_policy(tail_value, policy, "tail_value", len(candidates)),
            "max_weight": max_weight,
        }
        if estimator in MODEL_BASED:
            options["q_hat"] = _per_policy(q_hat, policy, "q_hat", len(candidates))
            options["v_hat"] = _per_policy(v_hat, policy, "v_hat", len(candidates))
        method = ci
        if ci in BOUNDED_METHODS and estimator not in BOUNDED_ESTIMATORS:
            if fallback_method is None:
                raise ParameterError(
                    f"ci={ci!r} applies to {' and '.join(BOUNDED_ESTIMATORS)} only, not to "
                    f"{estimator}; pass ci_fallback='normal' for its interval, or drop it from "
                    "`estimators`."
                )
            method = fallback_method
            if estimator not in fallback:
                fallback.append(estimator)
        if estimator in BOUNDED_ESTIMATORS:
            options.update(weight_bound=weight_bound, horizon=horizon)
        if estimator in MARGINALIZED:
            options.update(state=state)
            if options["max_weight"] is not None:  # clipping serves the cumulative weights
                options["max_weight"] = None
                if estimator not in unclipped:
                    unclipped.append(estimator)
        estimates[(policy, estimator)] = sequential_estimate(
            trajectories, policy, estimator=estimator, ci=method, **common, **options
        )
    logging = None
    if not isinstance(tail_value, Mapping):  # the logging value: unit weights, the same tail
        own = trajectories.table.column("propensity").to_numpy(zero_copy_only=False)
        logging = sequential_estimate(
            trajectories,
            np.asarray(own, dtype=np.float64),
            estimator="is",
            tail_value=tail_value,
            **common,
        )
    notes = grouped_notes(estimates)  # each note once, with its estimators
    if unclipped:
        notes.append(
            f"max_weight clips cumulative weights; {', '.join(unclipped)} weight by the "
            "state-marginal ratio and are not clipped"
        )
    if fallback:
        notes.append(
            f"ci={ci!r} applies to {' and '.join(BOUNDED_ESTIMATORS)} only: the "
            f"intervals of {', '.join(fallback)} are {fallback_method} instead"
        )
    n_truncated = int(np.count_nonzero(trajectories.truncated))
    return TrajectoryEvaluation(
        estimates=estimates,
        logging=logging,
        policies=candidates,
        estimators=names,
        confidence_level=float(confidence_level),
        ci_method=ci,
        gamma=float(gamma),
        estimand=_estimand(float(gamma), n_truncated, trajectories.n_episodes, tail_value),
        n_episodes=trajectories.n_episodes,
        n_truncated=n_truncated,
        report=trajectories.report,
        notes=tuple(notes),
        ci_fallback=fallback_method,
        fallback_estimators=tuple(fallback),
    )
