"""Glue between the learners and validated logs: fit from logs, certify, export a policy table."""

from __future__ import annotations

from typing import Any, Literal, Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from sklearn.base import clone

from ope._validation import check_rng
from ope.exceptions import ParameterError, SchemaError, ValidationError
from ope.context import context_matrix
from ope.learning._columns import log_columns
from ope.learning._gate import Certificate, GateMethod, SafetyGate
from ope.learning._learners import ConservativePolicyLearner

__all__ = ["learn_from_logs", "learner_policy_table", "context_matrix"]

#: share of rows held out for certification by default: an even split; HCPI (Thomas et al. 2015)
#: certifies on 4/5, which favours the bound over the quality of the learned policy
DEFAULT_CERTIFY_FRACTION = 0.5


def learn_from_logs(
    logs: Any,
    *,
    context_columns: str | Sequence[str],
    learner: Any = None,
    certify_fraction: float = DEFAULT_CERTIFY_FRACTION,
    confidence_level: float = 0.95,
    method: GateMethod = "betting",
    baseline: Literal["logging"] | float = "logging",
    max_weight: float | None = None,
    name: str = "learned",
    rng: int | np.random.Generator | None = None,
) -> tuple[Any, Certificate]:
    """Fit a policy on one split of the logs and certify it on the other.

    Parameters
    ----------
    logs : ope.logs.BanditLogs
        Validated logs with ``action``, ``reward``, ``propensity``, the context columns and
        optionally ``candidates``.
    context_columns : str or sequence of str
        Numeric columns and/or one list column holding the context features.
    learner : estimator, optional
        An unfitted ope learner (default ``ConservativePolicyLearner()``); it is cloned.
    certify_fraction : float, default=0.5
        Share of rows held out for certification (drawn at random with ``rng``).
    confidence_level, method, baseline, max_weight
        As in :class:`SafetyGate`; ``reward_range`` is the learner's, and ``max_weight`` defaults
        to the learner's ``max_weight_`` (chosen on the training split).
    name : str, default="learned"
        Policy name in the certificate.
    rng : int, numpy.random.Generator or None
        Randomness of the split.

    Returns
    -------
    learner : fitted estimator
        Fitted on the training split only: the certified policy is exactly this one.
        Refitting it on all rows would give a different, uncertified policy.
    certificate : Certificate

    Examples
    --------
    >>> import numpy as np, pyarrow as pa
    >>> from ope.logs import BanditLogs, ValidationReport
    >>> from ope.learning import learn_from_logs
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=4000)
    >>> action = rng.integers(0, 2, size=4000)
    >>> reward = (action == (x > 0)).astype(float)
    >>> table = pa.table({"x": x, "action": action, "reward": reward,
    ...                   "propensity": np.full(4000, 0.5)})
    >>> logs = BanditLogs(table, ValidationReport("<Table>", 4000, 4000))
    >>> learner, cert = learn_from_logs(logs, context_columns=["x"], rng=0)
    >>> cert.verdict
    'approve'
    """
    fraction = float(certify_fraction)
    if not 0.0 < fraction < 1.0:
        raise ParameterError(f"certify_fraction must be in (0, 1), got {certify_fraction!r}.")
    X = context_matrix(logs, context_columns)
    action, reward, propensity, cand = log_columns(logs)
    n = X.shape[0]
    n_cert = int(round(n * fraction))
    if n_cert < 2 or n - n_cert < 2:
        raise ValidationError(
            f"cannot split {n} rows into training and certification parts with "
            f"certify_fraction={fraction}; at least 2 rows are needed in each."
        )
    perm = check_rng(rng).permutation(n)
    cert_rows, train_rows = np.sort(perm[:n_cert]), np.sort(perm[n_cert:])
    est = clone(learner if learner is not None else ConservativePolicyLearner())

    def take(rows: npt.NDArray[np.intp]) -> Any:
        return None if cand is None else cand.take(pa.array(rows))

    est.fit(X[train_rows], action[train_rows], reward[train_rows], propensity[train_rows],
            candidates=take(train_rows))
    gate = SafetyGate(
        reward_range=getattr(est, "reward_range", None), confidence_level=confidence_level,
        method=method, baseline=baseline, max_weight=max_weight,
    )
    certificate = gate.certify(
        est, X[cert_rows], action[cert_rows], reward[cert_rows], propensity[cert_rows],
        candidates=take(cert_rows), name=name, n_train=train_rows.size,
    )
    return est, certificate


def learner_policy_table(
    learner: Any,
    logs: Any,
    *,
    context_columns: str | Sequence[str],
    name: str = "learned",
) -> pa.Table:
    """A fitted learner's policy on every logged event, as a long-format policy table.

    Columns ``event_id, policy, action, probability``, one row per (event, action) with
    probability > 0 (each event's probabilities sum to 1), action labels typed as in the logs:
    the format ``ope evaluate --policies FILE`` reads (DESIGN.md §2).

    Examples
    --------
    >>> import numpy as np, pyarrow as pa
    >>> from ope.logs import BanditLogs, ValidationReport
    >>> from ope.learning import DirectMethodPolicyLearner, learner_policy_table
    >>> table = pa.table({"event_id": [10, 11, 12, 13], "x": [-1.0, -0.5, 0.5, 1.0],
    ...                   "action": [0, 1, 0, 1], "reward": [1.0, 0.0, 0.0, 1.0],
    ...                   "propensity": [0.5, 0.5, 0.5, 0.5]})
    >>> logs = BanditLogs(table, ValidationReport("<Table>", 4, 4))
    >>> dm = DirectMethodPolicyLearner().fit_logs(logs, context_columns="x")
    >>> learner_policy_table(dm, logs, context_columns="x").to_pydict()["action"]
    [0, 0, 1, 1]
    """
    if "event_id" not in logs.table.column_names:
        raise SchemaError(
            "the logs have no event_id column; a policy table is joined to the logs on event_id. "
            "Add a unique event_id per row when reading the logs."
        )
    X = context_matrix(logs, context_columns)
    cand = logs.table.column("candidates") if "candidates" in logs.table.column_names else None
    proba = learner.predict_proba(X, candidates=cand)
    rows, cols = np.nonzero(proba > 0.0)
    event_id = logs.table.column("event_id").combine_chunks().take(pa.array(rows))
    action_type = logs.table.schema.field("action").type
    labels = np.asarray(learner.classes_)[cols]
    try:
        actions = pa.array(labels, type=action_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        actions = pa.array(labels)
    return pa.table(
        {
            "event_id": event_id,
            "policy": pa.array(np.full(rows.size, name, dtype=object), type=pa.string()),
            "action": actions,
            "probability": pa.array(proba[rows, cols], type=pa.float64()),
        }
    )
