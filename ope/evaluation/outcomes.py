"""Several outcomes of the same rows on the same weights: :func:`evaluate_outcomes`.

A candidate judged on quality, cost and latency needs each outcome's estimate with its
interval, all from the same rows and the same importance weights (so that the decisions made
from them, e.g. :func:`ope.guardrail_decision`, are about one counterfactual). Each outcome's
:class:`~ope.Evaluation` is exactly the one :func:`ope.evaluate` gives with that column as the
reward; what is shared is the work:

* the options are checked and the candidates resolved once;
* for IPS, clipped IPS and SNIPS (without sampling weights, segments or candidates given by
  factor) the moment kernel makes **one pass** for every outcome
  (:meth:`ope.streaming.MomentStats.from_outcomes`): each block's weights are formed, and each
  candidate's column read, once, and every outcome's statistics are formed from them, equal to
  those of its own pass. Other settings run one evaluation per outcome (the same numbers).
"""

from __future__ import annotations


import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ope._validation import user_stacklevel
from ope.exceptions import OPEWarning, ParameterError, SchemaError, ValidationError

__all__ = ["evaluate_outcomes", "with_outcome", "check_outcomes", "outcome_evaluations"]


def with_outcome(logs: Any, outcome: str, arg: str) -> Any:
    """The validated ``logs`` with the numeric column ``outcome`` as their reward column (the
    same rows and report); ``arg`` names the argument in errors."""
    import pyarrow as pa

    if outcome == "reward":
        return logs
    if outcome not in logs.columns:
        raise SchemaError(
            f"`{arg}`: the logs have no outcome column {outcome!r}; columns: "
            f"{list(logs.columns)[:20]}."
        )
    kind = logs.table.schema.field(outcome).type
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind)):
        raise SchemaError(f"`{arg}`: outcome column {outcome!r} must be numeric; it holds {kind}.")
    values = np.asarray(logs.column(outcome), dtype=np.float64)
    if not np.isfinite(values).all():
        bad = int(np.flatnonzero(~np.isfinite(values))[0])
        raise ValidationError(
            f"outcome column {outcome!r} holds a missing or non-finite value (first at row "
            f"{bad}); drop or fill those rows first."
        )
    table = logs.table
    index = table.schema.get_field_index("reward")
    swapped = table.set_column(index, "reward", pa.array(values, type=pa.float64()))
    return type(logs).from_validated(swapped, logs.report, unit_roundoff=logs.unit_roundoff)


def check_outcomes(outcomes: Any, arg: str = "outcomes") -> list[str]:
    """The outcome column names of ``outcomes`` (a name or a sequence of distinct names)."""
    from ope._validation import check_name, check_names

    example = "outcomes=['reward', 'cost', 'latency_ms']"
    listed = check_names(
        [outcomes] if isinstance(outcomes, str) else outcomes, arg, example=example
    )
    if not listed:
        raise ParameterError(f"`{arg}` must name at least one outcome column, e.g. {example}.")
    names = [check_name(o, arg, what="a column name") for o in listed]
    twice = sorted({o for o in names if names.count(o) > 1})
    if twice:
        raise ParameterError(f"`{arg}` names {twice} more than once.")
    return names


def outcome_evaluations(
    logs: Any, plan: Any, outcomes: Sequence[str], args: str | Sequence[str] = "outcomes"
) -> list[tuple[Any, list[warnings.WarningMessage]]]:
    """``(Evaluation, warnings caught)`` of each outcome of validated ``logs`` under ``plan``
    (an :class:`ope.evaluation.EvaluationPlan`), in order: one shared pass when the plan allows
    it (:func:`ope.evaluation._driver.shares_pass`), else one evaluation per outcome. ``args``:
    the argument that named the outcomes (or each outcome's), for the errors."""
    from ope.evaluation._driver import evaluate_eager, shared_passes
    from ope.results import Provenance

    named = [args] * len(outcomes) if isinstance(args, str) else list(args)
    plan, note = plan.for_logs(logs)  # DR left out of the default estimators where it cannot run
    per = [with_outcome(logs, o, a) for o, a in zip(outcomes, named)]  # checked before a pass
    shared: list[Any] = [None] * len(per)
    if len(per) > 1:
        found = shared_passes(logs, plan, [part.column("reward") for part in per])
        if found is not None:
            shared = list(found)
    out = []
    for outcome, part, prepared in zip(outcomes, per, shared):  # a loop over outcomes
        provenance = Provenance(options={**plan.options, "outcome": outcome}, seed=plan.seed)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            evaluation = evaluate_eager(part, plan, provenance, shared=prepared)
        if note:
            evaluation = evaluation.with_note(note)
        out.append((evaluation, list(caught)))
    return out


def evaluate_outcomes(
    logs: Any, policies: Any = None, *, outcomes: Any, **options: Any
) -> dict[str, Any]:
    """Evaluate the candidates on several outcome columns of the same rows, on the same weights.

    Parameters
    ----------
    logs : BanditLogs or anything :func:`ope.read_logs` accepts
        Logs with a numeric column per outcome (``"reward"`` is the reward column).
    policies : optional
        As in :func:`ope.evaluate`.
    outcomes : str or sequence of str
        The outcome columns, e.g. ``["reward", "cost", "latency_ms"]`` (distinct; each finite
        on every row).
    **options
        The options of :func:`ope.evaluate` (``estimators``, ``ci``, ``confidence_level``,
        ``max_weight``, ...), applied to every outcome; a ``reward_range`` must hold for every
        outcome (leave it out when their units differ).

    Returns
    -------
    dict of str to Evaluation
        Each outcome's evaluation, in the order given: the one ``ope.evaluate`` gives with that
        column as the reward (its warnings are re-emitted once each, prefixed with the outcome).

    Raises
    ------
    ope.ParameterError
        A bad option or ``outcomes`` (before any row is read).
    ope.SchemaError, ope.ValidationError
        An outcome column missing, not numeric, or not finite on a row.

    Notes
    -----
    With IPS, clipped IPS and SNIPS only (no sampling weights, segments or candidates given by
    factor), one pass of the moment kernel serves every outcome: the candidates' columns are
    read and each block's weights formed once. Otherwise each outcome is its own evaluation.
    Either way the numbers are those of ``ope.evaluate`` per outcome. A decision over the
    outcomes (improve one, do not worsen the others, with the multiplicity handled) is
    :func:`ope.guardrail_decision`.

    Examples
    --------
    >>> import numpy as np, pandas as pd, ope
    >>> g = np.random.default_rng(0)
    >>> a = g.integers(0, 2, 2000)
    >>> df = pd.DataFrame({"action": a, "propensity": 0.5,
    ...                    "reward": g.binomial(1, 0.3 + 0.2 * a).astype(float),
    ...                    "cost": 1.0 + a, "target__one": (a == 1).astype(float)})
    >>> evs = ope.evaluate_outcomes(df, outcomes=["reward", "cost"], estimators=("snips",))
    >>> round(evs["cost"].estimates[("one", "snips")].value, 6)
    2.0
    """
    from ope.evaluation.plan import EvaluationPlan
    from ope.io import read_logs
    from ope.logs import BanditLogs

    names = check_outcomes(outcomes)
    plan = EvaluationPlan.build(policies, **options)
    if not isinstance(logs, BanditLogs):
        if type(logs).__name__ == "LogScan":
            raise ParameterError(
                "ope.evaluate_outcomes evaluates every outcome on the same rows: read them "
                "with ope.read_logs (a scan is not supported)."
            )
        logs = read_logs(logs)
    found = outcome_evaluations(logs, plan, names)
    said: dict[tuple[type[Warning], str], None] = {}
    for outcome, (_, caught) in zip(names, found):
        for w in caught:
            if issubclass(w.category, OPEWarning):
                said.setdefault((w.category, f"{outcome}: {w.message}"), None)
            else:  # not ope's: passed on as it came
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    level = user_stacklevel()
    for category, text in said:
        warnings.warn(text, category, stacklevel=level)
    return {outcome: ev for outcome, (ev, _) in zip(names, found)}
