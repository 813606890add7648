"""Open Bandit Pipeline's ``bandit_feedback`` dict to and from ``BanditLogs``.

obp's datasets return a dict with ``n_rounds, n_actions, action, position, reward, pscore,
context, action_context`` (and, from a policy, an ``action_dist`` of shape
``(n_rounds, n_actions, len_list)``). :func:`from_bandit_feedback` turns it into validated
logs in one line; :func:`to_bandit_feedback` goes back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

import numpy as np
import pyarrow as pa

from ope._validation import (
    as_float_array,
    check_choice,
    check_distribution_rows,
    check_name,
    check_positions,
    check_positive_int,
    describe,
)
from ope.context import recorded_context_columns
from ope.exceptions import ParameterError
from ope.importers._common import ChunkValidator
from ope.logs import BanditLogs

__all__ = ["from_bandit_feedback", "to_bandit_feedback"]

_REQUIRED: Final = ("action", "reward", "pscore")
#: prefixes of the columns ``context`` and ``action_context`` become
CONTEXT_PREFIX: Final = "context_"
ACTION_FEATURE_PREFIX: Final = "action_feature_"


def _array(d: Mapping[str, Any], key: str, n: int | None, ndim: int) -> np.ndarray | None:
    value = d.get(key)
    if value is None:
        return None
    a = np.asarray(value)
    if ndim == 1 and a.ndim == 2 and a.shape[1] == 1:
        a = a[:, 0]
    if a.ndim != ndim or (n is not None and a.shape[0] != n):
        want = f"({n}{', ...' * (ndim - 1)})" if n is not None else f"{ndim}-d"
        raise ParameterError(f"bandit_feedback[{key!r}] must have shape {want}, got {a.shape}")
    return a


def _required_array(d: Mapping[str, Any], key: str, n: int | None, ndim: int) -> np.ndarray:
    a = _array(d, key, n, ndim)
    if a is None:
        raise ParameterError(
            f"bandit_feedback[{key!r}] is None; it must be an array of shape (n_rounds,)"
        )
    return a


def from_bandit_feedback(
    d: Mapping[str, Any],
    *,
    policy_name: str = "candidate",
    on_invalid: str = "raise",
) -> BanditLogs:
    """Validated ``BanditLogs`` from obp's ``bandit_feedback`` dict.

    Parameters
    ----------
    d : mapping
        ``action``, ``reward``, ``pscore`` (required, shape (n,)); optional ``position`` (n,),
        ``context`` (n, k), ``action_context`` (n_actions, m), ``action_dist``
        (n, n_actions, len_list) -- a candidate policy's probabilities, as obp's policies
        return them -- and ``n_rounds`` / ``n_actions`` (checked when given).
    policy_name : str, default "candidate"
        Name of the ``target__<policy_name>`` column made from ``action_dist``.
    on_invalid : {"raise", "drop"}, default "raise"
        As in :func:`ope.read_logs`.

    Returns
    -------
    BanditLogs
        ``event_id`` (0..n-1, the round), ``action``, ``position`` (if given), ``reward``,
        ``propensity`` (= ``pscore``), ``context_0..k-1`` and, from ``action_dist``,
        ``target__<policy_name>`` = ``action_dist[i, action[i], position[i]]`` (the
        per-position probability, matching OBD's position-wise ``pscore``; slot 0 without
        ``position``). ``logs.action_features`` holds ``action_context`` (columns ``action``,
        ``action_feature_0..m-1``) or None.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.importers import from_bandit_feedback, to_bandit_feedback
    >>> bf = {"n_rounds": 2, "n_actions": 2, "action": np.array([0, 1]),
    ...       "position": np.array([0, 1]), "reward": np.array([1, 0]),
    ...       "pscore": np.array([0.5, 0.25]), "context": np.array([[1.0], [2.0]]),
    ...       "action_context": np.eye(2)}
    >>> logs = from_bandit_feedback(bf)
    >>> logs.columns
    ['event_id', 'action', 'reward', 'propensity', 'position', 'context_0']
    >>> to_bandit_feedback(logs)["pscore"].tolist()
    [0.5, 0.25]
    """
    check_choice(on_invalid, "on_invalid", ("raise", "drop"))
    check_name(
        policy_name,
        "policy_name",
        what="the name of the candidate policy (its column is target__<policy_name>)",
        example="policy_name='candidate'",
    )
    if not isinstance(d, Mapping):
        raise ParameterError(f"`d` must be obp's bandit_feedback dict; got {describe(d)}.")
    missing = [k for k in _REQUIRED if k not in d]
    if missing:
        raise ParameterError(f"bandit_feedback lacks the key(s) {', '.join(missing)}")
    action = _required_array(d, "action", None, 1)
    n = action.shape[0]
    counts = {
        k: check_positive_int(d[k], f"bandit_feedback[{k!r}]", minimum=0)
        for k in ("n_rounds", "n_actions")
        if d.get(k) is not None
    }
    if counts.get("n_rounds", n) != n:
        raise ParameterError(
            f"bandit_feedback['n_rounds'] is {d['n_rounds']} but 'action' has {n} rows"
        )
    cols: dict[str, Any] = {
        "event_id": np.arange(n, dtype=np.int64),
        "action": action,
        **{
            name: as_float_array(
                _required_array(d, key, n, 1), f"bandit_feedback[{key!r}]", ndim=(1,)
            ).astype(np.float64, copy=False)
            for name, key in (("reward", "reward"), ("propensity", "pscore"))
        },
    }
    dist = _array(d, "action_dist", n, 3)
    position = _array(d, "position", n, 1)
    if position is not None:
        position = check_positions(
            position, "bandit_feedback['position']", n_slots=None if dist is None else dist.shape[2]
        )
        cols["position"] = position
    context = _array(d, "context", n, 2)
    if context is not None:
        cols.update({f"{CONTEXT_PREFIX}{j}": context[:, j] for j in range(context.shape[1])})
    if dist is not None:
        check_distribution_rows(dist, "bandit_feedback['action_dist']", axis=1)
        slot = position if position is not None else np.zeros(n, dtype=np.int64)
        a = check_positions(
            action,
            "bandit_feedback['action']",
            n_slots=dist.shape[1],
            what="the actions of action_dist",
        )
        cols[f"target__{policy_name}"] = dist[np.arange(n), a, slot].astype(np.float64)
    table = pa.table(cols)
    validator = ChunkValidator("<bandit_feedback>", on_invalid)
    used = validator.add(table, np.arange(n, dtype=np.int64), {}, n_source=n)
    logs = validator.finish(
        [used],
        {
            "ope.source_format": "bandit_feedback",
            "ope.context_columns": json.dumps([c for c in cols if c.startswith(CONTEXT_PREFIX)]),
        },
    )
    action_context = _array(d, "action_context", None, 2)
    if (
        "n_actions" in counts
        and action_context is not None
        and action_context.shape[0] != counts["n_actions"]
    ):
        raise ParameterError(
            f"bandit_feedback['action_context'] has {action_context.shape[0]} rows but "
            f"n_actions is {d['n_actions']}"
        )
    logs = logs.with_action_features(
        None
        if action_context is None
        else pa.table(
            {
                "action": np.arange(action_context.shape[0], dtype=np.int64),
                **{
                    f"{ACTION_FEATURE_PREFIX}{j}": action_context[:, j]
                    for j in range(action_context.shape[1])
                },
            }
        )
    )
    logs.n_actions = counts.get("n_actions")
    return logs


def to_bandit_feedback(logs: BanditLogs) -> dict[str, Any]:
    """obp's ``bandit_feedback`` dict from ``BanditLogs`` (integer actions 0..n_actions-1).

    ``context`` stacks the ``context_*`` columns, or the numeric columns named in the schema
    metadata ``ope.context_columns`` (None when there are none); ``action_context`` comes from
    ``logs.action_features`` (its columns after ``action``, rows in action order); ``position``
    is None without a ``position`` column. ``n_actions`` is the number of ``action_features``
    rows, or the largest action + 1. Candidate-policy columns are not exported (obp's
    ``action_dist`` needs every action's probability, which a ``target__`` column lacks).

    Examples
    --------
    >>> import pyarrow as pa
    >>> from ope import read_logs
    >>> from ope.importers import to_bandit_feedback
    >>> logs = read_logs(pa.table({"action": [0, 2], "propensity": [0.5, 0.5], "reward": [1.0, 0.0]}))
    >>> bf = to_bandit_feedback(logs)
    >>> bf["n_rounds"], bf["n_actions"], bf["position"], bf["context"]
    (2, 3, None, None)
    """
    if not isinstance(logs, BanditLogs):
        raise ParameterError(
            f"`logs` must be ope.BanditLogs (read a table or file with ope.read_logs first); "
            f"got {describe(logs)}."
        )
    t = logs.table
    action = logs.column("action")
    if not np.issubdtype(np.asarray(action).dtype, np.integer):
        raise ParameterError(
            "to_bandit_feedback needs integer actions (obp's actions are 0..n_actions-1)"
        )
    recorded = recorded_context_columns(t.schema)
    ctx = [c for c in t.column_names if c.startswith(CONTEXT_PREFIX)]
    if not ctx and recorded:
        numeric = {
            f.name for f in t.schema if pa.types.is_floating(f.type) or pa.types.is_integer(f.type)
        }
        ctx = [c for c in recorded if c in numeric]
    af = logs.action_features
    action_context = None
    if af is not None:
        af = af.sort_by("action")
        action_context = np.column_stack(
            [
                np.asarray(af.column(c).to_numpy(zero_copy_only=False))
                for c in af.column_names
                if c != "action"
            ]
        )
    n_actions = logs.n_actions or (
        af.num_rows if af is not None else int(action.max(initial=-1)) + 1
    )
    return {
        "n_rounds": logs.n,
        "n_actions": n_actions,
        "action": action,
        "position": logs.column("position") if "position" in t.column_names else None,
        "reward": logs.column("reward"),
        "pscore": logs.column("propensity"),
        "context": np.column_stack([logs.column(c) for c in ctx]) if ctx else None,
        "action_context": action_context,
    }
