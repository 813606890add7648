"""Long-format policy tables: ``event_id, policy, action, probability``.

:func:`read_policy_table` and :func:`write_policy_table` move a table between files (parquet or
CSV) and Arrow with checked column types; :func:`to_policy_table` tabulates policies evaluated on
the logs. Joining a table to the logs is :func:`ope.policies.target_propensities`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ope.exceptions import DataFileError, PolicyError, SchemaError
from ope.logs import BanditLogs
from ope.policies._core import (
    PolicyDistribution,
    TargetPropensities,
    catalog_array,
    decode,
    is_dataframe,
    is_label_type,
    policy_distribution,
    rows_of,
)
from ope.policies.objects import Policy

__all__ = [
    "POLICY_TABLE_COLUMNS",
    "canonical_policy_table",
    "whole_ids",
    "read_policy_table",
    "write_policy_table",
    "to_policy_table",
]

POLICY_TABLE_COLUMNS: Final = ("event_id", "policy", "action", "probability")


def canonical_policy_table(
    table: Any, *, source: str, mapping: Mapping[str, str] | None = None
) -> pa.Table:
    """The four columns of a long-format policy table with checked types."""
    if is_dataframe(table):
        table = pa.Table.from_pandas(table, preserve_index=False)
    elif isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    if not isinstance(table, pa.Table):
        raise PolicyError(
            f"a policy table must be a pandas DataFrame, a pyarrow Table or a path, got "
            f"{type(table).__name__}."
        )
    if mapping:
        rename = {theirs: ours for ours, theirs in mapping.items()}
        table = table.rename_columns([rename.get(c, c) for c in table.column_names])
    missing = [c for c in POLICY_TABLE_COLUMNS if c not in table.column_names]
    if missing:
        raise SchemaError(
            f"policy table {source}: missing columns {missing}; it needs {list(POLICY_TABLE_COLUMNS)} "
            f"and has {table.column_names}. Rename yours with mapping={{'event_id': ...}}."
        )
    cols = {c: decode(table.column(c)) for c in ("event_id", "action", "probability")}
    problems = []
    for c in ("event_id", "action"):
        t = cols[c].type
        if pa.types.is_floating(t) or pa.types.is_decimal(t):
            # ids that pandas turned into floats (a merge, a NaN once present): whole numbers only
            whole, problem = whole_ids(cols[c], c)
            if problem is None:
                cols[c] = whole
            else:
                problems.append(problem)
        elif pa.types.is_string_view(t):
            cols[c] = pc.cast(cols[c], pa.string())
        elif not is_label_type(t):
            problems.append(f"`{c}` must be int64 or string, got {t}")
    # policy names: a string column, kept dictionary-encoded when it is (the join uses the codes)
    policy = table.column("policy")
    if pa.types.is_dictionary(policy.type) and not is_label_type(policy.type.value_type):
        policy = decode(policy)
    if pa.types.is_integer(policy.type) or (
        pa.types.is_dictionary(policy.type) and pa.types.is_integer(policy.type.value_type)
    ):
        policy = pc.cast(decode(policy), pa.string())
    elif not (is_label_type(policy.type) or pa.types.is_dictionary(policy.type)):
        problems.append(f"`policy` must be string, got {policy.type}")
    cols["policy"] = policy
    pt = cols["probability"].type
    if pa.types.is_integer(pt) or pa.types.is_floating(pt) or pa.types.is_decimal(pt):
        if pt != pa.float64():
            cols["probability"] = pc.cast(cols["probability"], pa.float64())
    else:
        problems.append(f"`probability` must be float64, got {pt}")
    if problems:
        raise SchemaError(f"policy table {source}: " + "; ".join(problems) + ".")
    return pa.table({c: cols[c] for c in POLICY_TABLE_COLUMNS})


def whole_ids(col: pa.ChunkedArray | pa.Array, name: str) -> tuple[Any, str | None]:
    """A float or decimal id column as int64 when every value is a whole number, else a problem."""
    x = np.asarray(pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
    with np.errstate(invalid="ignore"):
        ok = np.isnan(x) | (np.isfinite(x) & (np.floor(x) == x) & (np.abs(x) < 2.0**63))
    if not ok.all():
        first = int(np.flatnonzero(~ok)[0])
        return None, (
            f"`{name}` is {col.type} and holds {int((~ok).sum()):,} values that are not whole "
            f"numbers (first at row {first}: {float(x[first])!r}); ids must be int64 or string"
        )
    if pa.types.is_decimal(col.type):
        try:
            return pc.cast(col, pa.int64()), None
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
    if np.abs(x[~np.isnan(x)]).max(initial=0.0) > 2.0**53:
        return None, (
            f"`{name}` is {col.type} with values beyond 2**53, where floats no longer hold every "
            "integer; write the ids as int64 or string"
        )
    return pc.cast(col, pa.int64(), safe=False), None


def read_policy_table(path: str | os.PathLike[str], *, mapping: Mapping[str, str] | None = None) -> pa.Table:
    """Read a long-format policy table from parquet or CSV.

    Parameters
    ----------
    path : str or path-like
        A ``.csv`` file, or a parquet file or directory of parquet files.
    mapping : dict, optional
        ``{"our_name": "their_name"}`` for columns named differently in the file.

    Returns
    -------
    pyarrow.Table
        Columns ``event_id`` (int64 or string), ``policy`` (string), ``action`` (int64 or
        string) and ``probability`` (float64). A CSV's ids are read as strings, exactly as
        written (``"007"`` stays ``"007"``), and converted to the logs' id type at the join.
        Rows are not validated against any logs here; :func:`target_propensities` does that
        when it joins the table.

    Notes
    -----
    One row per (event, policy, action) with :math:`\\pi_{\\text{policy}}(\\text{action} \\mid
    x_{\\text{event}}) > 0`; for each (event, policy) the probabilities sum to 1.

    References
    ----------
    .. [1] Saito, Y., Aihara, S., Matsutani, M. and Narita, Y. (2021). Open Bandit Dataset and
       Pipeline: Towards Realistic and Reproducible Off-Policy Evaluation. NeurIPS Datasets and
       Benchmarks Track.

    Examples
    --------
    >>> import tempfile, pathlib, pyarrow as pa
    >>> t = pa.table({"event_id": [1, 1], "policy": ["new", "new"], "action": [3, 4],
    ...               "probability": [0.5, 0.5]})
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "policy.parquet"
    >>> write_policy_table(t, path)
    >>> read_policy_table(path).num_rows
    2
    """
    p = Path(path)
    source = str(p)
    if not p.exists():
        raise DataFileError(f"policy table {source} does not exist.")
    mapping = dict(mapping or {})
    try:
        if p.is_file() and p.suffix.lower() == ".csv" or p.name.lower().endswith(".csv.gz"):
            import pyarrow.csv as pacsv

            # ids are read as written ("007" stays "007", not 7) and converted to the logs' id
            # type at the join; the probability column is numbers
            types = {mapping.get(c, c): pa.string() for c in ("event_id", "policy", "action")}
            types[mapping.get("probability", "probability")] = pa.float64()
            options = pacsv.ConvertOptions(column_types=types)
            table = pacsv.read_csv(p, convert_options=options)
        else:
            import pyarrow.parquet as pq

            table = pq.read_table(p)
    except (pa.ArrowInvalid, OSError) as exc:
        raise DataFileError(f"policy table {source} could not be read: {exc}") from None
    if table.num_rows == 0:
        raise DataFileError(f"policy table {source} has no rows.")
    return canonical_policy_table(table, source=source, mapping=mapping)


def write_policy_table(table: Any, path: str | os.PathLike[str]) -> None:
    """Write a long-format policy table to parquet (``.parquet``) or CSV (``.csv``).

    Parameters
    ----------
    table : pyarrow.Table or pandas.DataFrame
        Columns ``event_id, policy, action, probability``, e.g. from :func:`to_policy_table`.
    path : str or path-like
        Destination; the suffix chooses the format.

    Notes
    -----
    The table is written as it is (after checking its columns and types), so that
    ``ope evaluate LOGS --policies FILE`` can score it; its probabilities are validated against
    the logs when it is joined. The format is that of :func:`read_policy_table`.

    Examples
    --------
    >>> import tempfile, pathlib, pyarrow as pa
    >>> t = pa.table({"event_id": ["e1"], "policy": ["new"], "action": ["a"], "probability": [1.0]})
    >>> write_policy_table(t, pathlib.Path(tempfile.mkdtemp()) / "policy.csv")
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in (".parquet", ".pq", ".csv"):
        raise DataFileError(f"policy table path {str(p)!r} must end in .parquet or .csv.")
    canonical = canonical_policy_table(table, source="<table>")
    try:
        if suffix == ".csv":
            import pyarrow.csv as pacsv

            pacsv.write_csv(canonical, p)
        else:
            import pyarrow.parquet as pq

            pq.write_table(canonical, p)
    except OSError as exc:
        raise DataFileError(f"could not write policy table {str(p)!r}: {exc}") from None


def to_policy_table(
    logs: BanditLogs, policies: Mapping[str, Policy | PolicyDistribution] | TargetPropensities
) -> pa.Table:
    """Long-format policy table of policies evaluated on the logs (nonzero entries only).

    Parameters
    ----------
    logs : BanditLogs
        Logs with an ``event_id`` column.
    policies : dict of str to policy object or PolicyDistribution, or TargetPropensities
        The policies to tabulate; a :class:`TargetPropensities` must carry distributions.

    Returns
    -------
    pyarrow.Table
        ``event_id, policy, action, probability``: one row per (event, policy, action) with
        positive probability, in log order then action order.

    Notes
    -----
    Row ``(e_i, p, a)`` holds :math:`\\pi_p(a \\mid x_i) > 0`; the table has
    :math:`\\sum_p \\sum_i |\\mathrm{supp}\\,\\pi_p(\\cdot \\mid x_i)|` rows, in the format of
    :func:`read_policy_table`.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from ope.logs import BanditLogs, ValidationReport
    >>> from ope.policies import UniformPolicy
    >>> t = pa.table({"event_id": [10, 11], "action": [1, 2], "propensity": [0.5, 0.5],
    ...               "reward": [1.0, 0.0], "candidates": [[1, 2], [2]]})
    >>> logs = BanditLogs(t, ValidationReport(source="<doc>", rows_read=2, rows_used=2))
    >>> to_policy_table(logs, {"u": UniformPolicy()}).to_pydict()
    {'event_id': [10, 10, 11], 'policy': ['u', 'u', 'u'], 'action': [1, 2, 2], 'probability': [0.5, 0.5, 1.0]}
    """
    if "event_id" not in logs.table.column_names:
        raise PolicyError(
            "to_policy_table needs an `event_id` column in the logs to key the table; map yours "
            "with mapping={'event_id': ...}."
        )
    if isinstance(policies, TargetPropensities):
        if policies.distributions is None:
            raise PolicyError(
                "to_policy_table needs distributions; call target_propensities(..., "
                "with_distributions=True)."
            )
        items: Mapping[str, Any] = policies.distributions
    elif isinstance(policies, Mapping):
        items = policies
    else:
        raise PolicyError(
            f"policies must be a dict of name -> policy object or a TargetPropensities, got "
            f"{type(policies).__name__}."
        )
    event_id = decode(logs.table.column("event_id"))
    parts = []
    for name, pol in items.items():
        dist = pol if isinstance(pol, PolicyDistribution) else policy_distribution(name, pol, logs)
        if dist.n != logs.n:
            raise PolicyError(f"policy {name!r}: its distribution has {dist.n} rows, the logs {logs.n}.")
        m = dist.matrix
        nz = m.data > 0
        rows = rows_of(m.indptr)[nz]
        catalog = catalog_array(dist.actions)
        parts.append(
            pa.table(
                {
                    "event_id": event_id.take(pa.array(rows)),
                    "policy": pa.repeat(pa.scalar(str(name), type=pa.string()), rows.size),
                    "action": catalog.take(pa.array(m.indices[nz].astype(np.int64))),
                    "probability": pa.array(m.data[nz]),
                }
            )
        )
    if not parts:
        raise PolicyError("policies is empty; give at least one policy.")
    return pa.concat_tables(parts).combine_chunks()
