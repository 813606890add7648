"""Validated logs as the arrays the learners fit on (context matrix, logged columns).

Separate from :mod:`ope.learning._logs` (which certifies and exports policies and so needs the
learners) so that the learners' ``fit_logs`` can use it without an import cycle. The context
matrix is :func:`ope.context.context_matrix`, the one shared with the reward models.
"""

from __future__ import annotations

import inspect
from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

from ope.context import context_matrix
from ope.exceptions import EstimationError, ParameterError, SchemaError
from ope.weights import check_sampling_weight, sampling_weight_column

__all__ = ["log_columns", "fit_logs", "feature_arguments"]


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
    _refuse_sampling_weights(logs)
    cand = logs.table.column("candidates") if "candidates" in logs.table.column_names else None
    return logs.column("action"), logs.column("reward"), logs.column("propensity"), cand


def _refuse_sampling_weights(logs: Any) -> None:
    """The learners' objectives and the safety gate's bounds (betting, bernstein) are for
    unweighted rows: logs whose sampling weights (the ``weight`` column) are not all 1 are
    refused rather than fitted as if every row stood for one event."""
    name = sampling_weight_column(logs.table.column_names, None)
    if name is None:
        return
    s = check_sampling_weight(logs.column(name), logs.n, name=name)
    if bool(np.all(s == 1.0)):
        return
    raise EstimationError(
        f"the rows carry sampling weights (column `{name}`, not all 1, e.g. from DSJSON "
        "pdrop), and the learners' lower-bound objectives and the safety gate's betting and "
        "bernstein bounds are for unweighted rows: a policy learned or certified on them would "
        "be for the kept rows, not the logged population. Evaluate candidates with "
        "ope.evaluate (weighted estimates and normal or bootstrap intervals), or drop the "
        f"`{name}` column to learn on the kept rows as they are."
    )


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


def fit_logs(
    learner: Any, logs: Any, *, context_columns: str | Sequence[str], action_features: Any = None
) -> Any:
    """``learner.fit`` on validated logs (actions, rewards, propensities, candidates and action
    features if present)."""
    X = context_matrix(logs, context_columns)
    action, reward, propensity, cand = log_columns(logs)
    return learner.fit(X, action, reward, propensity, candidates=cand,
                       **feature_arguments(learner, logs, action_features))
