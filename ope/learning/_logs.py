"""Glue between the learners and validated logs: fit from logs, certify, export a policy table."""

from __future__ import annotations

from typing import Any, Literal, Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from sklearn.base import clone

from ope.exceptions import SchemaError, ValidationError
from ope.learning._common import as_generator, first_rows
from ope.learning._gate import Certificate, SafetyGate
from ope.learning._learners import ConservativePolicyLearner

__all__ = ["learn_from_logs", "learner_policy_table", "context_matrix"]

#: share of rows held out for certification by default: an even split; HCPI (Thomas et al. 2015)
#: certifies on 4/5, which favours the bound over the quality of the learned policy
DEFAULT_CERTIFY_FRACTION = 0.5


def context_matrix(logs: Any, context_columns: str | Sequence[str]) -> npt.NDArray[np.float64]:
    """The ``(n, n_features)`` float64 context matrix from numeric and/or list columns of ``logs``.

    A numeric column gives one feature; a list column (e.g. ``context``) gives one feature per
    element and must have the same length on every row.
    """
    if isinstance(context_columns, str):
        context_columns = [context_columns]
    names = list(context_columns)
    if not names:
        raise SchemaError("context_columns is empty; name the context feature column(s).")
    table: pa.Table = logs.table
    missing = [c for c in names if c not in table.column_names]
    if missing:
        raise SchemaError(
            f"context column(s) {missing} are not in the logs; they have: "
            f"{', '.join(table.column_names)}."
        )
    blocks = []
    problems = []
    for name in names:
        col = table.column(name).combine_chunks()
        typ = col.type
        if pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ):
            lengths = col.value_lengths().fill_null(-1).to_numpy(zero_copy_only=False)
            if lengths.size and (lengths.min() < 0 or lengths.min() != lengths.max()):
                bad = lengths != (lengths.max() if lengths.min() >= 0 else -2)
                problems.append(
                    f"list column {name!r} must hold one equal-length feature vector per row; "
                    f"{first_rows(bad | (lengths < 0))} differ or are null"
                )
                continue
            value_type = typ.value_type
            if not (pa.types.is_integer(value_type) or pa.types.is_floating(value_type)):
                problems.append(f"list column {name!r} holds {value_type}, not numbers")
                continue
            width = int(lengths[0]) if lengths.size else 0
            values = col.flatten().to_numpy(zero_copy_only=False).astype(np.float64)
            blocks.append(values.reshape(len(col), width))
        elif pa.types.is_integer(typ) or pa.types.is_floating(typ) or pa.types.is_boolean(typ):
            if col.null_count:
                nulls = col.is_null().to_numpy(zero_copy_only=False)
                problems.append(f"column {name!r} has missing values in {first_rows(nulls)}")
                continue
            blocks.append(col.to_numpy(zero_copy_only=False).astype(np.float64)[:, None])
        else:
            problems.append(f"column {name!r} has type {typ}, not numeric (encode it first)")
    if problems:
        raise SchemaError("cannot build the context matrix: " + "; ".join(problems) + ".")
    X = np.hstack(blocks) if len(blocks) > 1 else blocks[0]
    bad = ~np.isfinite(X).all(axis=1)
    if bad.any():
        raise ValidationError(
            f"context features must be finite; {first_rows(bad)} have NaN or infinite values."
        )
    return X


def _log_columns(
    logs: Any,
) -> tuple[npt.NDArray[Any], npt.NDArray[np.float64], npt.NDArray[np.float64], Any]:
    missing = [c for c in ("action", "reward", "propensity") if c not in logs.table.column_names]
    if missing:
        raise SchemaError(
            f"learning needs the columns action, reward and propensity; missing: "
            f"{', '.join(missing)}."
        )
    cand = logs.table.column("candidates") if "candidates" in logs.table.column_names else None
    return logs.column("action"), logs.column("reward"), logs.column("propensity"), cand


def fit_logs(
    learner: Any, logs: Any, *, context_columns: str | Sequence[str]
) -> Any:
    """``learner.fit`` on validated logs (actions, rewards, propensities, candidates if present)."""
    X = context_matrix(logs, context_columns)
    action, reward, propensity, cand = _log_columns(logs)
    return learner.fit(X, action, reward, propensity, candidates=cand)


def learn_from_logs(
    logs: Any,
    *,
    context_columns: str | Sequence[str],
    learner: Any = None,
    certify_fraction: float = DEFAULT_CERTIFY_FRACTION,
    confidence_level: float = 0.95,
    method: Literal["bernstein", "t"] = "bernstein",
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
        raise ValueError(f"certify_fraction must be in (0, 1), got {certify_fraction!r}.")
    X = context_matrix(logs, context_columns)
    action, reward, propensity, cand = _log_columns(logs)
    n = X.shape[0]
    n_cert = int(round(n * fraction))
    if n_cert < 2 or n - n_cert < 2:
        raise ValidationError(
            f"cannot split {n} rows into training and certification parts with "
            f"certify_fraction={fraction}; at least 2 rows are needed in each."
        )
    perm = as_generator(rng).permutation(n)
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
    >>> from ope.learning._logs import fit_logs
    >>> dm = fit_logs(DirectMethodPolicyLearner(), logs, context_columns="x")
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
