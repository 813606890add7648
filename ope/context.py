"""Context features: which log columns describe the context, and the float64 matrix of them.

Reward models (DM and the doubly robust family in :func:`ope.evaluate`), policy learners and
policies of fitted classifiers all read the context of each logged decision as an ``(n, d)``
float64 matrix. :func:`context_matrix` builds it once for all of them: a numeric (or boolean)
column gives one feature, a list column such as ``context`` one feature per element (the same
length on every row). :func:`default_context_columns` names the features used when none are
given: every numeric column that is not part of the log schema.

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
>>> context_matrix(logs, ["x0", "emb"]).tolist()
[[0.5, 1.0, 2.0], [1.5, 3.0, 4.0]]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from ope._validation import first_rows
from ope.exceptions import SchemaError, ValidationError

__all__ = ["RESERVED_COLUMNS", "default_context_columns", "context_matrix"]

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


def _is_number(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t)


def default_context_columns(logs: Any) -> list[str]:
    """Every numeric column of ``logs.table`` outside the log schema, in column order."""
    return [
        fld.name
        for fld in logs.table.schema
        if fld.name not in RESERVED_COLUMNS
        and not fld.name.startswith(_POLICY_PREFIXES)
        and _is_number(fld.type)
    ]


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
    names = [context_columns] if isinstance(context_columns, str) else list(context_columns)
    if not names:
        raise SchemaError(f"{role}_columns is empty; name the {role} feature column(s).")
    table: pa.Table = logs.table
    missing = [c for c in names if c not in table.column_names]
    if missing:
        raise SchemaError(
            f"{role} column(s) {missing} are not in the logs; they have: "
            f"{', '.join(table.column_names)}."
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
        raise SchemaError(f"cannot build the {role} matrix: " + "; ".join(problems) + ".")
    x = np.hstack(blocks) if len(blocks) > 1 else blocks[0]
    bad = ~np.isfinite(x).all(axis=1)
    if bad.any():
        raise ValidationError(
            f"{role} features must be finite; {_rows_text(bad)} have NaN or infinite values."
        )
    return x
