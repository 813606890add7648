"""Validated logs as the arrays the learners fit on (context matrix, logged columns).

Separate from :mod:`ope.learning._logs` (which certifies and exports policies and so needs the
learners) so that the learners' ``fit_logs`` can use it without an import cycle. The context
matrix is :func:`ope.context.context_matrix`, the one shared with the reward models.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

from ope.context import context_matrix
from ope.exceptions import EstimationError, ParameterError, SchemaError
from ope.logs import require_logs
from ope.weights import check_sampling_weight, sampling_weight_column

__all__ = [
    "log_columns",
    "log_sampling_weight",
    "weight_arguments",
    "fit_logs",
    "feature_arguments",
    "record_context_columns",
    "check_context_columns",
]


def log_columns(
    logs: Any,
) -> tuple[npt.NDArray[Any], npt.NDArray[np.float64], npt.NDArray[np.float64], Any]:
    """``(action, reward, propensity, candidates or None)`` of validated logs."""
    missing = [c for c in ("action", "reward", "propensity") if c not in logs.table.column_names]
    if missing:
        raise SchemaError(
            f"learning needs the columns action, reward and propensity; missing: "
            f"{', '.join(missing)}."
        )
    cand = logs.table.column("candidates") if "candidates" in logs.table.column_names else None
    return logs.column("action"), logs.column("reward"), logs.column("propensity"), cand


def log_sampling_weight(
    logs: Any, weight_column: str | None = None
) -> tuple[str | None, npt.NDArray[np.float64] | None]:
    """``(column, s)``: the rows' sampling (Horvitz-Thompson) weights and their column
    (:func:`ope.weights.sampling_weight_column`: ``weight_column``, else ``weight`` when
    present), checked by :func:`ope.weights.check_sampling_weight`. ``(None, None)`` without
    such a column, and also when every weight is 1: unit weights are the unweighted rows, so
    the learners and the gate then give exactly the unweighted numbers."""
    name = sampling_weight_column(logs.table.column_names, weight_column)
    if name is None:
        return None, None
    s = check_sampling_weight(logs.column(name), logs.n, name=name)
    if bool(np.all(s == 1.0)):
        return None, None
    return name, s


def weight_arguments(learner: Any, name: str | None, s: Any) -> dict[str, Any]:
    """``{"sample_weight": s}`` for ``learner.fit`` when the rows carry sampling weights (an
    error for a learner whose ``fit`` takes none), else ``{}``."""
    if s is None:
        return {}
    if "sample_weight" not in inspect.signature(learner.fit).parameters:
        raise EstimationError(
            f"the rows carry sampling weights (column `{name}`, not all 1, e.g. from DSJSON "
            f"pdrop) and {type(learner).__name__}.fit takes no sample_weight: it would learn "
            "the policy of the kept rows, not of the logged population. Use an ope learner "
            f"(they take sampling weights), or drop the `{name}` column to learn on the kept "
            "rows as they are."
        )
    return {"sample_weight": s}


def feature_arguments(learner: Any, logs: Any, action_features: Any) -> dict[str, Any]:
    """``{"action_features": ...}`` for ``learner.fit``: the ones given (an error for a learner
    that cannot use them), else ``logs.action_features`` when the logs carry them and the
    learner scores actions through features (not with ``action_model="per_action"``)."""
    accepts = "action_features" in inspect.signature(learner.fit).parameters
    if action_features is not None:
        if not accepts:
            raise ParameterError(
                f"{type(learner).__name__} does not score actions through their features; "
                "drop action_features or use ConservativePolicyLearner / IPSPolicyLearner."
            )
        return {"action_features": action_features}
    implicit = getattr(logs, "action_features", None)
    if implicit is None or not accepts or getattr(learner, "action_model", "auto") == "per_action":
        return {}
    return {"action_features": implicit}


def _column_names(context_columns: Any) -> tuple[str, ...] | None:
    """``context_columns`` as a tuple of names; None for what cannot be read without consuming
    it (an iterator) or is not a column list (:func:`ope.context.context_matrix` says why)."""
    if isinstance(context_columns, str):
        return (context_columns,)
    if isinstance(context_columns, (Iterator, bytes, Mapping)) or not isinstance(
        context_columns, Iterable
    ):
        return None
    names = tuple(context_columns)
    return names if all(isinstance(c, str) for c in names) else None


def record_context_columns(learner: Any, context_columns: str | Sequence[str]) -> None:
    """Record on a learner just fitted from logs the columns its features came from, in
    order (``context_columns_``): scoring it later on other columns would read each feature
    from the wrong column (:func:`check_context_columns`)."""
    names = _column_names(context_columns)
    if names is not None:
        learner.context_columns_ = names


def check_context_columns(learner: Any, context_columns: str | Sequence[str]) -> None:
    """A SchemaError when ``context_columns`` are not the columns, in order, that ``learner``
    was fitted on from logs (its ``context_columns_``); a learner fitted on arrays has no
    record, and only the number of features is checked (when the matrix is scored)."""
    fitted = getattr(learner, "context_columns_", None)
    if fitted is None:
        return
    given = _column_names(context_columns)
    if given is None or given == tuple(fitted):
        return  # the same columns, or none readable here (context_matrix judges them)
    raise SchemaError(
        f"`context_columns` {list(given)} are not the columns {type(learner).__name__} was "
        f"fitted on, {list(fitted)}: its features would be read from the wrong columns. Pass "
        f"context_columns={list(fitted)} (the same columns, in the same order), or refit the "
        "learner on the columns given."
    )


def fit_logs(
    learner: Any,
    logs: Any,
    *,
    context_columns: str | Sequence[str],
    action_features: Any = None,
    weight_column: str | None = None,
) -> Any:
    """``learner.fit`` on validated logs (actions, rewards, propensities, candidates, action
    features and sampling weights if present)."""
    logs = require_logs(logs, f"{type(learner).__name__}.fit_logs")
    X = context_matrix(logs, context_columns)
    action, reward, propensity, cand = log_columns(logs)
    name, s = log_sampling_weight(logs, weight_column)
    fitted = learner.fit(
        X,
        action,
        reward,
        propensity,
        candidates=cand,
        **feature_arguments(learner, logs, action_features),
        **weight_arguments(learner, name, s),
    )
    record_context_columns(learner, context_columns)
    return fitted
