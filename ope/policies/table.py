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

from ope._validation import check_mapping, describe, repeated_names
from ope.exceptions import DataFileError, ParameterError, PolicyError, SchemaError
from ope._paths import locate_input
from ope.io import read_parquet_input
from ope.logs import BanditLogs
from ope.schema import storage_roundoff
from ope.policies._core import (
    PolicyDistribution,
    TargetPropensities,
    catalog_array,
    decode,
    is_dataframe,
    is_label_type,
    policy_distribution,
    require_logs,
    rows_of,
)
from ope.policies.objects import Policy
from ope._output import check_utf8_destination

__all__ = [
    "POLICY_TABLE_COLUMNS",
    "ROUNDOFF_KEY",
    "probability_roundoff",
    "canonical_policy_table",
    "whole_ids",
    "read_policy_table",
    "write_policy_table",
    "to_policy_table",
]

POLICY_TABLE_COLUMNS: Final = ("event_id", "policy", "action", "probability")


#: Schema metadata key of a canonical policy table whose probabilities were stored in fewer
#: bits than float64 (float16, float32): the relative rounding error of that storage, by which
#: the join widens its row-sum tolerance (see :func:`probability_roundoff`).
ROUNDOFF_KEY: Final = b"ope.probability_roundoff"


def probability_roundoff(table: pa.Table) -> float:
    """The storage rounding error a canonical policy table's probabilities carry (0 for float64).

    A table stored in float16 rounds each probability by up to 2**-11 of itself (1/3 becomes
    0.33325), so three equal entries sum to 0.99976: it is judged by its own precision, not by
    the float64 tolerance (``ope.policies.PROBABILITY_TOLERANCE``).
    """
    raw = (table.schema.metadata or {}).get(ROUNDOFF_KEY)
    try:
        return float(raw) if raw is not None else 0.0
    except ValueError:
        return 0.0


def canonical_policy_table(
    table: Any, *, source: str, mapping: Mapping[str, str] | None = None
) -> pa.Table:
    """The four columns of a long-format policy table with checked types.

    ``probability`` becomes float64; when it was stored in float16 or float32, the storage's
    rounding error is kept in the schema metadata (:func:`probability_roundoff`).
    """
    if is_dataframe(table):
        names = [str(c) for c in table.columns]
        repeated = repeated_names(names)
        if repeated:
            raise SchemaError(
                f"policy table {source}: column name(s) {', '.join(map(repr, repeated))} appear "
                "more than once; keep one column of each name, e.g. "
                "df.loc[:, ~df.columns.duplicated()]."
            )
        table = pa.Table.from_pandas(table, preserve_index=False)
    elif isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    if not isinstance(table, pa.Table):
        raise PolicyError(
            f"a policy table must be a pandas DataFrame, a pyarrow Table or a path, got "
            f"{type(table).__name__}."
        )
    names = table.column_names
    repeated = repeated_names(names)
    if repeated:
        raise SchemaError(
            f"policy table {source}: column name(s) {', '.join(map(repr, repeated))} appear "
            "more than once; keep one column of each name (which one holds the probabilities "
            "cannot be guessed)."
        )
    if mapping:
        _check_table_mapping(mapping, table.column_names, source)
        rename = {theirs: ours for ours, theirs in mapping.items()}
        table = table.rename_columns([rename.get(c, c) for c in table.column_names])
        names = table.column_names
        repeated = repeated_names(names, among=set(POLICY_TABLE_COLUMNS))
        if repeated:
            raise SchemaError(
                f"policy table {source}: after mapping, column name(s) "
                f"{', '.join(map(repr, repeated))} appear more than once; the table already has "
                "a column of that name: drop it or map another one."
            )
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
    else:
        blank = _blank_policy_names(policy)
        if blank is not None:
            problems.append(blank)
    cols["policy"] = policy
    pt = cols["probability"].type
    roundoff = probability_roundoff(table) if table.schema.metadata else 0.0
    if pa.types.is_integer(pt) or pa.types.is_floating(pt) or pa.types.is_decimal(pt):
        roundoff = max(roundoff, storage_roundoff(pt))
        if pt != pa.float64():
            cols["probability"] = pc.cast(cols["probability"], pa.float64())
    else:
        hint = (
            " (parse it to numbers first, e.g. pandas.to_numeric)"
            if pa.types.is_string(pt) or pa.types.is_large_string(pt)
            else ""
        )
        problems.append(f"`probability` must be float64, got {pt}{hint}")
    if problems:
        raise SchemaError(f"policy table {source}: " + "; ".join(problems) + ".")
    out = pa.table({c: cols[c] for c in POLICY_TABLE_COLUMNS})
    if roundoff:
        out = out.replace_schema_metadata({ROUNDOFF_KEY: repr(roundoff).encode()})
    return out


def _check_table_mapping(mapping: Mapping[str, str], names: list[str], source: str) -> None:
    """Each ``{ope_name: their_name}`` of a policy table's mapping renames a column the table
    has to one of the four policy-table columns; any other entry would be ignored silently."""
    unknown = [ours for ours in mapping if ours not in POLICY_TABLE_COLUMNS]
    if unknown:
        raise ParameterError(
            f"mapping keys {unknown} are not policy-table columns: mapping is "
            f"{{ope_name: their_name}} with ope_name one of {', '.join(POLICY_TABLE_COLUMNS)}; "
            "e.g. mapping={'probability': 'prob'}."
        )
    absent = {ours: theirs for ours, theirs in mapping.items() if theirs not in names}
    if absent:
        raise SchemaError(
            f"policy table {source}: mapping {absent} names columns the table does not have "
            f"(it has {names}); map each policy-table column to one of them."
        )


def _blank_policy_names(policy: pa.ChunkedArray) -> str | None:
    """The problem of policy names that are empty or only whitespace (they cannot be selected,
    nor told apart in a result), with the count and the first row; None when there are none."""
    values = policy
    if pa.types.is_dictionary(values.type):
        names = [c.dictionary for c in values.chunks]
        if not any(pc.any(pc.equal(pc.utf8_trim_whitespace(d), "")).as_py() for d in names):
            return None  # only the dictionaries are read: no empty name is used
        values = decode(values)
    blank = pc.fill_null(pc.equal(pc.utf8_trim_whitespace(values), ""), False)
    rows = np.flatnonzero(np.asarray(blank.to_numpy(zero_copy_only=False), dtype=bool))
    if rows.size == 0:
        return None
    return (
        f"`policy` is empty (or only whitespace) in {rows.size:,} rows (first at row "
        f"{int(rows[0])}); give every row the name of its policy, which selects it (--policy "
        "NAME) and labels its results"
    )


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


def read_policy_table(
    path: str | os.PathLike[str], *, mapping: Mapping[str, str] | None = None
) -> pa.Table:
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
    mapping = check_mapping(mapping)
    found = locate_input(path, what="policy table", argument="path")
    source = str(path)
    name = found.path.lower()
    if not found.is_dir and (name.endswith(".csv") or name.endswith(".csv.gz")):
        table = _read_csv(found, source, mapping)
    else:
        table = read_parquet_input(found, source, "policy table")
    if table.num_rows == 0:
        raise DataFileError(f"policy table {source} has no rows.")
    return canonical_policy_table(table, source=source, mapping=mapping)


def _read_csv(found: Any, source: str, mapping: Mapping[str, str]) -> pa.Table:
    """A CSV policy table: ids as written (strings), probabilities as float64, UTF-8 only."""
    import pyarrow.csv as pacsv

    types = {mapping.get(c, c): pa.string() for c in ("event_id", "policy", "action")}
    types[mapping.get("probability", "probability")] = pa.float64()
    options = pacsv.ConvertOptions(column_types=types)

    def stream() -> Any:
        if found.filesystem is None:
            return found.path
        return found.filesystem.open_input_stream(found.path)

    try:
        table = pacsv.read_csv(stream(), convert_options=options)
        table.column_names  # noqa: B018 - decodes the header: binary bytes raise here
        return table
    except (pa.ArrowInvalid, OSError) as exc:
        text = str(exc)
    except UnicodeDecodeError:  # a header line that is not UTF-8 text
        text = _HEADER_NOT_UTF8
    head = _head_bytes(found)
    if text.startswith("Empty CSV file"):
        raise DataFileError(f"policy table {source} is empty (0 bytes); was the write interrupted?")
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise SchemaError(
            f"policy table {source} is UTF-16 text; ope reads CSV policy tables as UTF-8. Re-save "
            "it as UTF-8, e.g. pandas.read_csv(path, encoding='utf-16').to_csv(path, index=False)"
        )
    binary = _binary_offset(found)
    if binary is not None:
        raise DataFileError(
            f"policy table {source} is not a text file (a NUL or control byte at byte "
            f"{binary}); a CSV policy table is UTF-8 text with the columns event_id, policy, "
            "action, probability. Was a binary (e.g. parquet) file given a .csv name? Pass the "
            "CSV, or name the parquet file .parquet"
        )
    column = "names" if text == _HEADER_NOT_UTF8 else _csv_column(text, found, head)
    if "invalid UTF8" in text:
        where = _first_undecodable_line(found)
        raise SchemaError(
            f"policy table {source}: column {column} holds text that is not UTF-8{where}; ope "
            "reads CSV policy tables as UTF-8. Re-save the file as UTF-8, e.g. "
            "pandas.read_csv(path, encoding='latin-1').to_csv(path, index=False), using the "
            "encoding it was written in"
        )
    if "conversion error to double" in text:
        value = text.rsplit("invalid value", 1)[-1].strip()
        raise SchemaError(
            f"policy table {source}: column {column} must hold numbers (probabilities), but holds "
            f"{value}; fix those rows, or write the column as numbers"
        )
    raise DataFileError(f"policy table {source} could not be read: {_printable(text)}")


#: the parse error of a header line that is not UTF-8 (pyarrow reads it, its names do not decode)
_HEADER_NOT_UTF8: Final = "invalid UTF8 in the header line"
#: bytes of the head of a CSV policy table inspected for binary content, and of a parse error
#: quoted in a message
_SNIFF_BYTES: Final = 1 << 16
_MAX_QUOTED_CHARS: Final = 200


def _binary_offset(found: Any) -> int | None:
    """Offset of the first NUL or C0 control byte (other than tab, CR, LF, FF) in the head of
    the file, None for text: what no CSV text file holds, and every binary format does."""
    head = _head_bytes(found, _SNIFF_BYTES)
    control = bytes(c for c in range(32) if c not in (9, 10, 12, 13))
    hits = [i for i in (head.find(bytes([c])) for c in control) if i >= 0]
    return min(hits) if hits else None


def _printable(text: str) -> str:
    """``text`` with non-printable characters escaped and cut to a message's length."""
    safe = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    if len(safe) > _MAX_QUOTED_CHARS:
        safe = safe[:_MAX_QUOTED_CHARS] + " ..."
    return safe


def _head_bytes(found: Any, size: int = 4) -> bytes:
    try:
        if found.filesystem is None:
            with open(found.path, "rb") as fh:
                return fh.read(size)
        with found.filesystem.open_input_stream(found.path) as fh:
            return bytes(fh.read(size))
    except (OSError, pa.ArrowException):
        return b""


def _csv_column(text: str, found: Any, head: bytes) -> str:
    """``'name' (#k)`` for pyarrow's "In CSV column #k" (from the header line), else "?"."""
    import re

    m = re.search(r"CSV column #(\d+)", text)
    if m is None:
        return "?"
    k = int(m.group(1))
    first = _head_bytes(found, 1 << 16).split(b"\n", 1)[0]
    names = [
        n.strip().strip('"') for n in first.decode("utf-8", "replace").lstrip("\ufeff").split(",")
    ]
    return f"{names[k]!r} (#{k})" if k < len(names) else f"#{k}"


def _first_undecodable_line(found: Any) -> str:
    """`` (first at line N)`` of the first bytes that are not UTF-8 (read in 1 MiB blocks)."""
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")()
    line = 1
    try:
        fh: Any = (
            open(found.path, "rb")
            if found.filesystem is None
            else found.filesystem.open_input_stream(found.path)
        )
        with fh:
            while True:
                block = bytes(fh.read(1 << 20))
                try:
                    decoder.decode(block, final=not block)
                except UnicodeDecodeError as exc:
                    line += block.count(b"\n", 0, exc.start)
                    return f" (first at line {line}, 1-based with the header)"
                if not block:
                    return ""
                line += block.count(b"\n")
    except (OSError, pa.ArrowException):
        return ""


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
    if not isinstance(path, (str, os.PathLike)) or not str(os.fspath(path)).strip():
        raise ParameterError(
            f"`path` must be the file to write (a str or os.PathLike ending in .parquet or "
            f".csv); got {describe(path)}."
        )
    p = Path(path)
    check_utf8_destination(os.fspath(path), "`path`")
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
    logs = require_logs(logs, "to_policy_table")
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
            raise PolicyError(
                f"policy {name!r}: its distribution has {dist.n} rows, the logs {logs.n}."
            )
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
