"""Context features: which log columns describe the context, and the float64 matrix of them.

Reward models (DM and the doubly robust family in :func:`ope.evaluate`), policy learners and
policies of fitted classifiers all read the context of each logged decision as an ``(n, d)``
float64 matrix. :func:`context_matrix` builds it once for all of them: a numeric (or boolean)
column gives one feature, a list column such as ``context`` one feature per element (the same
length on every row). :func:`default_context_columns` names the features used when none are
given: every numeric column that is not part of the log schema and whose name does not look
like an outcome, an identifier or a time (:data:`OUTCOME_LIKE_NAMES`,
:data:`EXCLUDED_NAME_PREFIXES`, :data:`EXCLUDED_NAME_SUFFIXES`); :func:`context_column_choice`
also says which columns it left out and, past :data:`MANY_DEFAULT_CONTEXT_COLUMNS`, writes a
note naming the columns it took.

Examples
--------
>>> import pyarrow as pa
>>> from ope.context import context_matrix, default_context_columns
>>> from ope.logs import BanditLogs, ValidationReport
>>> t = pa.table({"action": [0, 1], "propensity": [0.5, 0.5], "reward": [1.0, 0.0],
...               "x0": [0.5, 1.5], "emb": [[1.0, 2.0], [3.0, 4.0]]})
>>> logs = BanditLogs(t, ValidationReport("<Table>", 2, 2))
>>> default_context_columns(logs)
['x0']
>>> t2 = t.append_column("cost", pa.array([0.1, 0.2])).append_column("user_id", pa.array([7, 8]))
>>> default_context_columns(BanditLogs(t2, ValidationReport("<Table>", 2, 2)))
['x0']
>>> context_matrix(logs, ["x0", "emb"]).tolist()
[[0.5, 1.0, 2.0], [1.5, 3.0, 4.0]]
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ope._validation import describe, first_rows
from ope.exceptions import ParameterError, SchemaError, ValidationError

__all__ = [
    "action_feature_matrix",
    "RESERVED_COLUMNS",
    "DECISION_COLUMNS",
    "DECISION_PREFIXES",
    "OUTCOME_LIKE_NAMES",
    "EXCLUDED_NAME_PREFIXES",
    "EXCLUDED_NAME_SUFFIXES",
    "MANY_DEFAULT_CONTEXT_COLUMNS",
    "ContextChoice",
    "context_column_choice",
    "default_context_columns",
    "context_matrix",
    "feature_labels",
    "recorded_context_columns",
]

#: Columns with a fixed meaning in the log schema; never used as context features by default.
RESERVED_COLUMNS: Final = frozenset(
    {
        "event_id",
        "action",
        "propensity",
        "reward",
        "candidates",
        "logging_distribution",
        "position",
        "logging_policy",
        "timestamp",
        "cost",
        "latency_ms",
    }
)

#: Prefixes of per-policy and per-factor columns (never context features).
_POLICY_PREFIXES: Final = ("target__", "target_dist__", "propensity__")

#: Columns that are the logged decision, its probability or its outcome (a subset of
#: :data:`RESERVED_COLUMNS`, which are left out of the default context), refused as context
#: or policy features even when named (``context_columns=[...]``): a model fed one reads the
#: answer. A policy learned on ``action`` picks the logged action on every held-out row, so
#: its weights are ``1 / propensity`` and the gate approves a value no policy can reach; a
#: propensity model fed ``action`` or ``propensity`` fits the logger perfectly.
DECISION_COLUMNS: Final = frozenset({"action", "propensity", "reward", "cost", "latency_ms"})

#: Prefixes of per-candidate columns of the logged action (``target__`` and ``propensity__``
#: hold probabilities of the logged action), refused as :data:`DECISION_COLUMNS` are.
DECISION_PREFIXES: Final = ("target__", "propensity__")

#: Column names (lower-cased) that are outcomes or by-products of the decision, never context:
#: a reward model fed the outcome (or a cost, latency or token count measured after the action)
#: predicts the reward from itself, and DM/DR report that leak as a precise value. ``weight``
#: is the DSJSON ``pdrop`` row weight, a property of the logging pipeline, not of the context.
OUTCOME_LIKE_NAMES: Final = frozenset(
    {
        "cost",
        "latency_ms",
        "latency",
        "tokens",
        "click",
        "clicks",
        "conversion",
        "conversions",
        "revenue",
        "weight",
        "time",
        "ts",
        "date",
    }
)

#: Name prefixes (lower-cased) left out by default: outcomes (``reward*``, ``outcome*``), times
#: (``timestamp*``), and the 80 Open Bandit Dataset ``user-item_affinity_*`` columns, which are
#: numeric but many (they made DR 4x slower when a numeric-columns default took them silently).
EXCLUDED_NAME_PREFIXES: Final = ("reward", "outcome", "timestamp", "user-item_affinity_")

#: Name suffixes (lower-cased) left out by default: identifiers (``*_id``: a user or session id
#: is a label, not a quantity, and a linear model on it is noise) and times.
EXCLUDED_NAME_SUFFIXES: Final = ("_id", "_timestamp", "_time", "_ts", "_at")

#: Past this many default context columns the choice is reported in a note. A handful of context
#: features is the usual case; dozens mean the default swept in a block of columns (embeddings,
#: per-item scores) that the user may not have meant, and the reward model's design grows with
#: d x (K + 1) columns, so its cost should be a decision, not an accident.
MANY_DEFAULT_CONTEXT_COLUMNS: Final = 20


def _is_number(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t)


def _is_number_list(t: pa.DataType) -> bool:
    """A list of numbers (one feature per element), e.g. the one-hot ``context`` of OBD."""
    listed = pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)
    return listed and _is_number(t.value_type)


def _outcome_like(name: str) -> bool:
    low = name.lower()
    return (
        low in OUTCOME_LIKE_NAMES
        or low.startswith(EXCLUDED_NAME_PREFIXES)
        or low.endswith(EXCLUDED_NAME_SUFFIXES)
    )


@dataclass(frozen=True)
class ContextChoice:
    """The default context columns of some logs, the numeric ones left out, and a note.

    Attributes
    ----------
    columns : list of str
        The columns used, in column order.
    excluded : list of str
        Numeric columns left out because their name looks like an outcome, id or time, or
        because they hold the rows' sampling weights.
    notes : tuple of str
        One when more than :data:`MANY_DEFAULT_CONTEXT_COLUMNS` columns were taken, one when
        context columns listed by an importer are not numeric (so not used).
    """

    columns: list[str]
    excluded: list[str]
    notes: tuple[str, ...]


def context_column_choice(logs: Any, *, weight_column: str | None = None) -> ContextChoice:
    """The default context columns of ``logs``, what was left out, and a note when they are many.

    Parameters
    ----------
    logs : BanditLogs or any object with a pyarrow ``table``
    weight_column : str, optional
        The column of the rows' sampling weights (``ope.evaluate(..., weight_column=...)``): a
        property of the logging pipeline, not of the context, so never a context column,
        whatever its name (the ``weight`` column is left out by its name already).

    Returns
    -------
    ContextChoice
        ``columns``: every numeric (not boolean, not list) column of ``logs.table`` that is not
        in :data:`RESERVED_COLUMNS`, not a per-policy column (``target__``, ``target_dist__``,
        ``propensity__``), and whose name is not outcome-, id- or time-like
        (:data:`OUTCOME_LIKE_NAMES`, :data:`EXCLUDED_NAME_PREFIXES`,
        :data:`EXCLUDED_NAME_SUFFIXES`; case-insensitive). Columns an importer listed as
        context (schema metadata ``ope.context_columns``, e.g. the OBD affinity columns with
        ``read_obd(context="user+affinity")``) count as named: they are used when numeric (or
        lists of numbers, such as OBD's one-hot ``context``) whatever their name, and a note
        says which listed ones are not numeric. Naming a column explicitly
        (``context_columns=[...]``) always uses it.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from ope.logs import BanditLogs, ValidationReport
    >>> cols = {"action": [0], "propensity": [1.0], "reward": [1.0], "revenue": [3.0],
    ...         "session_id": [12], **{f"x{j}": [0.0] for j in range(21)}}
    >>> choice = context_column_choice(BanditLogs(pa.table(cols), ValidationReport("<T>", 1, 1)))
    >>> len(choice.columns), choice.excluded
    (21, ['revenue', 'session_id'])
    >>> choice.notes[0].split(":")[0]
    'the reward model took 21 context columns by default (every numeric column outside the log schema)'
    >>> holder = BanditLogs(pa.table(cols), ValidationReport("<T>", 1, 1))
    >>> context_column_choice(holder, weight_column="x20").excluded  # the sampling weights
    ['revenue', 'session_id', 'x20']
    """
    listed = recorded_context_columns(logs.table.schema)
    numeric = [
        fld.name
        for fld in logs.table.schema
        if fld.name not in RESERVED_COLUMNS
        and not fld.name.startswith(_POLICY_PREFIXES)
        and (_is_number(fld.type) or (fld.name in listed and _is_number_list(fld.type)))
    ]
    columns = [c for c in numeric if c != weight_column and (c in listed or not _outcome_like(c))]
    excluded = [c for c in numeric if c not in columns]
    notes = []
    unused = [c for c in listed if c in logs.table.column_names and c not in numeric]
    if unused:
        notes.append(
            f"context column(s) {', '.join(unused)} listed by the importer are not numeric and "
            "were not used by the reward model; encode them (e.g. one-hot) and name them in "
            "context_columns=[...] to use them"
        )
    if len(columns) > MANY_DEFAULT_CONTEXT_COLUMNS:
        shown = ", ".join(columns[:MANY_DEFAULT_CONTEXT_COLUMNS])
        more = f", ... ({len(columns) - MANY_DEFAULT_CONTEXT_COLUMNS} more)"
        notes.append(
            f"the reward model took {len(columns)} context columns by default (every numeric "
            f"column outside the log schema): {shown}{more}; name the ones you mean with "
            "context_columns=[...] (CLI: --context-columns) to choose, and to make DM/DR faster"
        )
    return ContextChoice(columns, excluded, tuple(notes))


def recorded_context_columns(schema: Any) -> list[str]:
    """The context columns an importer recorded in a pyarrow schema's metadata
    (``ope.context_columns``, a JSON list), or [] when there is none or it does not parse
    (metadata written by something else, or nested past Python's recursion limit, is ignored:
    the columns are then chosen as for any table)."""
    raw = (schema.metadata or {}).get(b"ope.context_columns")
    if raw is None:
        return []
    try:
        names = json.loads(raw)
    except (ValueError, RecursionError):
        return []
    return [str(c) for c in names] if isinstance(names, list) else []


def default_context_columns(logs: Any) -> list[str]:
    """The default context columns of ``logs`` (:func:`context_column_choice`), in column order."""
    return context_column_choice(logs).columns


def _rows_text(bad: np.ndarray) -> str:
    count, first = first_rows(bad)
    return f"{count} row{'s' if count != 1 else ''} (first at row {first})"


def context_matrix(
    logs: Any, context_columns: str | Sequence[str], *, role: str = "context"
) -> npt.NDArray[np.float64]:
    """The ``(n, d)`` float64 context matrix from numeric and/or list columns of ``logs``.

    Parameters
    ----------
    logs : BanditLogs or any object with a pyarrow ``table``
    context_columns : str or sequence of str
        Numeric (or boolean) columns, one feature each, and/or list columns of numbers, one
        feature per element (the same length on every row). Dictionary-encoded columns are
        read as their values.
    role : str, default "context"
        What the columns are called in messages (``"policy"`` for a policy's features).

    Returns
    -------
    numpy.ndarray of float64, shape (n, d)

    Raises
    ------
    ope.SchemaError
        No column named, a column not in the logs, or a column that is not numeric, has missing
        values or lists of unequal length (every problem is listed at once).
    ope.ValidationError
        A feature is NaN or infinite.
    """
    # what messages call the columns: the argument for the context, the role otherwise (a
    # policy's or an action table's columns come from arguments named by their callers)
    arg = "`context_columns`" if role == "context" else f"the {role} columns"
    names = (
        [context_columns]
        if isinstance(context_columns, str)
        else None
        if isinstance(context_columns, (bytes, Mapping))
        or not isinstance(context_columns, Iterable)
        else list(context_columns)
    )
    if names is None or not all(isinstance(c, str) for c in names):
        raise ParameterError(
            f"{arg} must be a column name or a list of column names (str); got "
            f"{describe(context_columns)}. Pass e.g. ['x0', 'x1']."
        )
    if not names:
        raise SchemaError(f"{arg} is empty; name the {role} feature column(s).")
    table: pa.Table = logs.table
    missing = [c for c in names if c not in table.column_names]
    if missing:
        raise SchemaError(
            f"{role} column(s) {missing} are not in the logs ({arg}); they have: "
            f"{', '.join(table.column_names)}."
        )
    leaked = (
        [c for c in names if c in DECISION_COLUMNS or c.startswith(DECISION_PREFIXES)]
        if role in ("context", "policy")
        else []
    )
    if leaked:
        raise SchemaError(
            f"{role} column(s) {leaked} ({arg}) are the logged decision, its probability or its "
            "outcome, not features known before the decision: a model fed them reads the "
            "answer (a learned policy would pick the logged action and look far better than "
            "any policy can be). Drop them from the list."
        )
    blocks = []
    problems = []
    for name in names:  # loop over columns, not rows
        col = table.column(name).combine_chunks()
        if pa.types.is_dictionary(col.type):
            col = col.dictionary_decode()
        typ = col.type
        if pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ):
            lengths = col.value_lengths().fill_null(-1).to_numpy(zero_copy_only=False)
            if lengths.size and (lengths.min() < 0 or lengths.min() != lengths.max()):
                bad = lengths != (lengths.max() if lengths.min() >= 0 else -2)
                problems.append(
                    f"list column {name!r} must hold one equal-length feature vector per row; "
                    f"{_rows_text(bad | (lengths < 0))} differ or are null"
                )
                continue
            if not _is_number(typ.value_type):
                problems.append(f"list column {name!r} holds {typ.value_type}, not numbers")
                continue
            width = int(lengths[0]) if lengths.size else 0
            values = col.flatten().to_numpy(zero_copy_only=False).astype(np.float64)
            blocks.append(values.reshape(len(col), width))
        elif _is_number(typ) or pa.types.is_boolean(typ):
            if col.null_count:
                nulls = col.is_null().to_numpy(zero_copy_only=False)
                problems.append(f"column {name!r} has missing values in {_rows_text(nulls)}")
                continue
            blocks.append(col.to_numpy(zero_copy_only=False).astype(np.float64)[:, None])
        else:
            problems.append(f"column {name!r} has type {typ}, not numeric (encode it first)")
    if problems:
        raise SchemaError(f"cannot build the {role} matrix of {arg}: " + "; ".join(problems) + ".")
    x = np.hstack(blocks) if len(blocks) > 1 else blocks[0]
    bad = ~np.isfinite(x).all(axis=1)
    if bad.any():
        raise ValidationError(
            f"{role} features must be finite; {_rows_text(bad)} have NaN or infinite values."
        )
    return x


def feature_labels(logs: Any, context_columns: str | Sequence[str]) -> list[str]:
    """The column behind each feature of :func:`context_matrix` (``emb[3]`` for list entries).

    For messages about a feature found by position (a reward model whose predictions are not
    finite because of feature ``j``): ``feature_labels(logs, cols)[j]`` names the context
    column to fix, rather than a derived quantity such as ``q_target``.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from ope.context import feature_labels
    >>> from ope.logs import BanditLogs, ValidationReport
    >>> t = pa.table({"x0": [0.5], "emb": [[1.0, 2.0]]})
    >>> feature_labels(BanditLogs(t, ValidationReport("<Table>", 1, 1)), ["x0", "emb"])
    ['x0', 'emb[0]', 'emb[1]']
    """
    names = [context_columns] if isinstance(context_columns, str) else list(context_columns)
    table: pa.Table = logs.table
    labels: list[str] = []
    for name in names:  # a loop over columns
        if name not in table.column_names:
            raise SchemaError(f"context column {name!r} is not in the logs")
        typ = table.schema.field(name).type
        if pa.types.is_dictionary(typ):
            typ = typ.value_type
        if pa.types.is_fixed_size_list(typ):
            labels += [f"{name}[{k}]" for k in range(typ.list_size)]
        elif pa.types.is_list(typ) or pa.types.is_large_list(typ):
            col = table.column(name)
            width = (
                int(pc.list_value_length(col.chunk(0))[0].as_py() or 0)
                if col.num_chunks and len(col.chunk(0))
                else 0
            )
            labels += [f"{name}[{k}]" for k in range(width)]
        else:
            labels.append(name)
    return labels


@dataclass(frozen=True)
class _TableLogs:
    """A bare pyarrow table where :func:`context_matrix` expects logs."""

    table: Any


def action_feature_matrix(
    table: Any, catalog: np.ndarray, *, where: str = "logged or in a candidate's support"
) -> tuple[np.ndarray, list[str]]:
    """Rows of the side table ``table`` (an ``action`` column + features) in ``catalog`` order.

    The numeric (and boolean) columns besides ``action`` are the features; other columns
    (hashed strings, ...) are left out and must be encoded first to be used. ``where`` says,
    in the message for a missing row, where the actions without one come from. Shared by the
    reward models of ``ope.evaluate`` and the policy learners.
    """
    import pyarrow as pa

    if type(table).__module__.partition(".")[0] == "pandas":
        table = pa.Table.from_pandas(table, preserve_index=False)
    if not isinstance(table, pa.Table):
        raise ParameterError(
            "action_features must be a pyarrow.Table or pandas.DataFrame with an `action` column "
            f"and numeric feature columns; got {type(table).__name__}."
        )
    if "action" not in table.column_names:
        raise SchemaError(
            "action_features has no `action` column to join on; it has: "
            f"{', '.join(table.column_names)}."
        )
    names = [
        f.name
        for f in table.schema
        if f.name != "action"
        and (
            pa.types.is_integer(f.type)
            or pa.types.is_floating(f.type)
            or pa.types.is_boolean(f.type)
        )
    ]
    if not names:
        raise SchemaError(
            "action_features has no numeric feature column besides `action`; encode its "
            f"columns ({', '.join(c for c in table.column_names if c != 'action')}) as numbers."
        )
    keys = np.asarray(table.column("action").combine_chunks().to_numpy(zero_copy_only=False))
    uniq, counts = np.unique(keys, return_counts=True)
    if (counts > 1).any():
        raise SchemaError(
            f"action_features must have one row per action; {int((counts > 1).sum())} actions "
            f"repeat (e.g. {uniq[counts > 1][0]!r})."
        )
    try:
        order = np.argsort(keys, kind="stable")
        pos = np.searchsorted(keys[order], catalog)
        pos = np.minimum(pos, keys.size - 1)
        found = keys[order][pos] == catalog
    except TypeError as exc:  # labels of different kinds (int vs str)
        raise SchemaError(
            f"action_features' `action` labels ({keys.dtype}) cannot be matched with the logged "
            f"actions ({catalog.dtype}): {exc}"
        ) from None
    if not found.all():
        miss = catalog[~found]
        raise SchemaError(
            f"action_features has no row for {miss.size} action(s) {where} "
            f"(e.g. {', '.join(repr(v) for v in miss[:5].tolist())}); give every action a row."
        )
    feats = context_matrix(_TableLogs(table.take(order[pos])), names, role="action feature")
    return feats, names


@dataclass(frozen=True)
class _TableHolder:
    """A bare pyarrow table where :func:`ope.context.context_matrix` expects logs."""

    table: Any
