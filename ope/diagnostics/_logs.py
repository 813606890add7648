"""What :func:`ope.diagnose` reads from validated logs: candidate propensities, distributions
and segment columns."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from scipy import sparse

from ope.diagnostics._inputs import Inputs, validated_inputs
from ope.io import read_logs
from ope.logs import BanditLogs
from ope.policies._core import (
    action_index,
    aligned_list,
    candidate_sets,
    matrix_over,
)
from ope.policies.join import target_propensities, validated_target_columns
from ope.schema import check_segment_columns

__all__ = [
    "logs_inputs",
    "logs_to_diagnose",
    "segment_columns",
    "segment_values",
    "target_from_logs",
]


def logs_to_diagnose(logs: Any) -> BanditLogs:
    """The validated logs :func:`ope.diagnose` reads: ``BanditLogs`` as they are, anything else
    ``ope.read_logs`` accepts (a pandas DataFrame, a pyarrow Table, a path) read by it, as
    :func:`ope.evaluate` does.

    >>> import pandas as pd
    >>> logs = logs_to_diagnose(pd.DataFrame({"action": [0, 1], "propensity": [0.5, 0.5],
    ...                                       "reward": [1.0, 0.0], "target__a": [1.0, 0.0]}))
    >>> type(logs).__name__, logs.n
    ('BanditLogs', 2)
    """
    return logs if isinstance(logs, BanditLogs) else read_logs(logs)


def segment_columns(logs: BanditLogs, by: Any) -> list[str]:
    """The segment columns of ``diagnose(by=...)``, checked before any segment is coded
    (:func:`ope.schema.check_segment_columns`): a missing column, or one holding lists,
    structs, maps or bytes, raises one ``SchemaError`` naming every such column and the fix.

    >>> import pyarrow as pa
    >>> from ope.io import read_logs
    >>> logs = read_logs(pa.table({"action": [0, 1], "propensity": [0.5, 0.5],
    ...                            "reward": [1.0, 0.0], "country": ["fr", "de"]}))
    >>> segment_columns(logs, "country")
    ['country']
    """
    return check_segment_columns(logs.table.schema, by, source=logs.report.source)


def segment_values(col: Any) -> Any:
    """A segment column as numpy (numeric) or a pandas Categorical (dictionary-encoded)."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if (
        pa.types.is_integer(col.type)
        or pa.types.is_floating(col.type)
        or pa.types.is_boolean(col.type)
    ):
        if col.null_count:
            return np.asarray(col.to_pandas())
        return col.to_numpy(zero_copy_only=False)
    if pa.types.is_null(col.type):  # every value missing: no category (none can be null)
        return pd.Categorical.from_codes(np.full(len(col), -1, dtype=np.intp), categories=[])
    encoded = pc.dictionary_encode(col) if not pa.types.is_dictionary(col.type) else col
    labels = encoded.dictionary.to_pylist()
    idx = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.intp)
    # sorted categories, as for numpy input; -1 marks missing values
    order = sorted(range(len(labels)), key=lambda k: str(labels[k]))
    rank = np.empty(len(labels) + 1, dtype=np.intp)
    rank[np.asarray(order, dtype=np.intp)] = np.arange(len(labels))
    rank[-1] = -1
    return pd.Categorical.from_codes(rank[idx], categories=[labels[k] for k in order])


def _pa_array(values: np.ndarray) -> Any:
    return pa.array(values.tolist()) if values.dtype == object else pa.array(values)


def target_from_logs(
    logs: Any, policies: Any, notes: list[str]
) -> tuple[
    list[str],
    np.ndarray | list[np.ndarray],
    dict[str, Any] | None,
    Any,
    np.ndarray | None,
    list[Any] | None,
]:
    """Candidate propensities and, when the logs allow, the sparse distributions.

    Returns ``names, values, target_csr, logging_csr, action_codes, action_labels``; the last
    four are None unless ``candidates`` and ``logging_distribution`` are logged and every
    candidate's full distribution is available. ``values`` is the list of the validated
    ``target__`` columns (:func:`ope.policies.join.validated_target_columns`) when the
    candidates are those columns and no distribution is read, else an (n, P) matrix.
    """
    have = set(logs.table.column_names)
    wants_support = {"candidates", "logging_distribution"} <= have
    by_column = policies is None or (
        isinstance(policies, (list, tuple)) and all(isinstance(x, str) for x in policies)
    )
    if not wants_support:
        direct = validated_target_columns(logs, policies)
        if direct is not None:
            return direct[0], direct[1], None, None, None, None
    if not wants_support or by_column:
        tp = target_propensities(logs, policies)
        names, values = list(tp.names), np.asarray(tp.values)
        if not wants_support:
            return names, values, None, None, None, None
        lacking = [f"target_dist__{nm}" for nm in names if f"target_dist__{nm}" not in have]
        if lacking:
            notes.append(
                "support deficiency not computed: the logs have a logging_distribution but "
                f"not {', '.join(lacking)} (each candidate's distribution over the candidates)"
            )
            return names, values, None, None, None, None
    # errors here are real inconsistencies in the logs (e.g. target__ and target_dist__
    # disagree) and propagate
    full = target_propensities(logs, policies, with_distributions=True)
    names, values = list(full.names), np.asarray(full.values)
    dists = full.distributions or {}
    extra = [_pa_array(d.actions) for d in dists.values()]
    index = action_index(logs, extra)
    cand = candidate_sets(index, what="logging_distribution")
    probs = aligned_list(logs, "logging_distribution", cand, what="logging_distribution")
    n = logs.n
    # the logged distribution as it is: unlike the public logging_distribution(), a logged
    # propensity that disagrees with it is reported as a diagnostic (a warning), not raised, so
    # the rest of the diagnosis still runs
    logging = sparse.csr_array(
        (probs[cand.order], cand.codes[cand.order].astype(np.int64), cand.indptr.copy()),
        shape=(n, index.n_actions),
    )
    target = {nm: matrix_over(d, index.catalog) for nm, d in dists.items()}
    return names, values, target, logging, index.logged.astype(np.intp), list(index.actions)


def logs_inputs(
    logs: Any,
    policies: Any,
    *,
    weight_column: str | None,
    reward_range: tuple[float, float] | None = None,
    by: Any = None,
    notes: list[str] | None = None,
) -> tuple[BanditLogs, Inputs]:
    """Validated logs and the checked inputs of a diagnosis (or a sensitivity analysis) of
    ``policies`` on them: the candidates' propensities and distributions, the segments of
    ``by``, the coded actions and the sampling weights. The estimated-propensity note and the
    notes found on the way are appended to ``notes``."""
    from ope._provenance import propensity_notes
    from ope.weights import sampling_weight_column

    notes = [] if notes is None else notes
    logs = logs_to_diagnose(logs)  # a DataFrame, Arrow table or path, as evaluate accepts
    weight_name = sampling_weight_column(logs.columns, weight_column)
    cols = segment_columns(logs, by)  # SchemaError naming missing / list / struct columns
    notes += propensity_notes(  # the same notes as every other result's
        logs, weight_name, None if weight_name is None else logs.column(weight_name)
    )
    names, target, tdists, ldist, codes, labels = target_from_logs(logs, policies, notes)
    segments = {c: segment_values(logs.table.column(c)) for c in cols}
    action: Any = codes if codes is not None else segment_values(logs.table.column("action"))
    data = validated_inputs(
        logs.column("reward"),
        logs.column("propensity"),
        target,
        reward_range=reward_range,
        policy_names=names,
        segments=segments,
        action=action,
        action_labels=labels,
        target_distributions=tdists,
        logging_distribution=ldist,
        sampling_weight=None if weight_name is None else logs.column(weight_name),
        weight_name=weight_name or "sampling_weight",
        target_columns=target if isinstance(target, list) else None,
        rows_validated=logs.targets_validated(),
    )
    return logs, data
