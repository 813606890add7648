"""The Open Bandit Dataset (ZOZOTOWN; Saito et al. 2021) to ``BanditLogs``.

A campaign folder (``random/all``, ``bts/men``, ...) holds the log CSV (``all.csv``, ``men.csv``,
...) and ``item_context.csv``. The log CSV starts with an unnamed row index, then
``timestamp, item_id, position, click, propensity_score, user_feature_0..3,
user-item_affinity_0..{n_items-1}``; ``item_context.csv`` has ``item_id, item_feature_0``
(a number) and ``item_feature_1..3`` (hashed categories).

==============================  ==============================================================
OBD                             ope
==============================  ==============================================================
unnamed row index               ``event_id`` (int64; the CSV's own index, kept after sorting)
``timestamp``                   ``timestamp``; rows are sorted by it (stable: ties keep the
                                CSV order, which obp's unstable sort may not)
``item_id``                     ``action``
``position`` (1, 2, 3)          ``position`` = position - 1 (0 = left, 1 = centre, 2 = right)
``click``                       ``reward``
``propensity_score``            ``propensity``: the probability that the logger put *this item
                                at this position* (position-wise), recorded in the schema
                                metadata key ``ope.propensity``
``user_feature_0..3``           categorical columns (dictionary-encoded strings), for segments
                                (``by="user_feature_0"``) and as the record
(built)                         ``context``: the reward model's features, one fixed-size list
                                of 0/1 per row: one-hot ``user_feature_0..3`` (one entry per
                                category, categories sorted) then one-hot ``position`` (3
                                entries); labels in the schema metadata ``ope.context_labels``
``user-item_affinity_*``        left out unless ``context="user+affinity"``
``item_context.csv``            ``logs.action_features``, keyed by ``action``:
                                ``item_feature_0`` (a number) and one 0/1 column per category
                                of ``item_feature_1..3`` (``item_feature_1=<category>``);
                                embedded in the schema metadata (``ope.action_features``), so
                                it travels with the rows into the parquet file ``ope import
                                obd`` writes and comes back with ``ope.read_logs``
==============================  ==============================================================

The reward model of DM and the doubly robust estimators (:func:`ope.evaluate`) then uses, by
default, the one-hot user features and position (``ope.context_columns`` lists ``context``,
plus the affinity columns when asked for) and the item features. obp's OBD loader feeds its
regression model the same information differently: one-hot user features (its first category
dropped), the item table with the hashed categories label-encoded (here one-hot, so no order is
imposed on hashed labels), and one model per position (here the position is one-hot in the
context, and the default model has context x item-feature interactions).

Rows break OBD's rules when their ``position`` is missing, text or fractional
(``obd_position_missing``), a whole number outside 1..3 (``obd_position_out_of_range``), or
their ``item_id`` has no row in ``item_context.csv`` (``obd_item_unknown``), or their
``timestamp`` is missing or not a date and time (``obd_timestamp_invalid``); report row numbers
are 0-based data rows of the log CSV (row 0 is the line after the header).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from ope._validation import check_choice
from ope.exceptions import DataFileError, ParameterError, SchemaError
from ope.importers._common import ChunkValidator
from ope._paths import check_regular_file, csv_column_names, locate_input
from ope.io import with_action_features
from ope.logs import EXAMPLE_ROWS, BanditLogs

__all__ = [
    "read_obd",
    "OBD_CONTEXT_CHOICES",
    "OBD_PROPENSITY_MEANING",
    "OBD_POSITIONS",
    "OBD_CONTEXT_COLUMN",
    "OBD_CONTEXT_LABELS_KEY",
]

#: ``context=`` choices: the user features only (default), plus the affinity columns, or none.
OBD_CONTEXT_CHOICES: Final = ("user", "user+affinity", "none")

#: What OBD's ``propensity_score`` is (obp's README and loader): position-wise.
OBD_PROPENSITY_MEANING: Final = (
    "position-wise: P(logged item at the logged position | context) of the logging policy "
    "(OBD propensity_score); a candidate's target__ value must be the same per-position quantity"
)

#: Slots of ZOZOTOWN's recommendation interface (OBD ``position`` 1, 2, 3: left, centre, right).
OBD_POSITIONS: Final = 3

#: The column of one-hot user features and position that the reward model reads.
OBD_CONTEXT_COLUMN: Final = "context"

#: Schema metadata key: JSON ``{"context": [label of each entry]}`` (``user_feature_0=<value>``,
#: ..., ``position=0``, ...), what each entry of :data:`OBD_CONTEXT_COLUMN` is.
OBD_CONTEXT_LABELS_KEY: Final = "ope.context_labels"

_REQUIRED: Final = ("timestamp", "item_id", "position", "click", "propensity_score")
_AFFINITY_PREFIX: Final = "user-item_affinity_"
_USER_PREFIX: Final = "user_feature_"
_ITEM_PREFIX: Final = "item_feature_"
#: The one numeric item feature; the other ``item_feature_*`` columns are hashed categories.
_ITEM_NUMERIC: Final = "item_feature_0"
#: A whole-number position written as text ("2", " 3 ", "1.0"); anything else is not one.
_WHOLE_NUMBER: Final = r"^\s*[+]?[0-9]+(\.0*)?\s*$"


def _locate(src: str | os.PathLike[str]) -> tuple[Path, Path | None]:
    """(log CSV, item_context.csv or None) of a campaign folder or a log CSV.

    The path goes through ope's one input policy (:func:`ope.io.locate_input`): regular files
    only (a FIFO or device is refused before anything opens it), links followed; the CSVs of
    a folder must be regular files too.
    """
    found = locate_input(src, what="OBD campaign", argument="src")
    if found.filesystem is not None:
        raise DataFileError(
            f"{found.name}: read_obd reads a local OBD campaign folder or log CSV; copy it "
            "locally first (the campaign's two CSVs are read whole)"
        )
    path = Path(found.path)
    if found.is_dir:
        csvs = sorted(p for p in path.glob("*.csv") if p.name != "item_context.csv")
        if len(csvs) != 1:
            raise DataFileError(
                f"{path}: an OBD campaign folder holds one log CSV besides item_context.csv "
                f"(e.g. random/all/all.csv); found {[p.name for p in csvs] or 'none'}"
            )
        log_csv = check_regular_file(csvs[0], "OBD log CSV")
    else:
        log_csv = path
    item = log_csv.parent / "item_context.csv"
    if not (item.exists() or item.is_symlink()):
        return log_csv, None
    return log_csv, check_regular_file(item, "OBD item_context.csv")


def _read_csv(path: Path, keep: Any = None, strings: Any = None) -> pa.Table:
    """The CSV at ``path``: the columns ``keep(name)`` accepts (all by default), those that
    ``strings(name)`` accepts read as text (hashed categories are labels, never numbers)."""
    try:
        with pacsv.open_csv(path) as reader:  # the header only: the reader parses one block
            names = csv_column_names(reader.schema, str(path))
        include = [c for c in names if keep(c)] if keep is not None else None
        types = {c: pa.string() for c in names if strings is not None and strings(c)}
        options = pacsv.ConvertOptions(include_columns=include, column_types=types)
        return pacsv.read_csv(path, convert_options=options)
    except (pa.ArrowInvalid, OSError) as exc:
        where = _parse_error_line(path, str(exc))
        at = f" at line {where} (1-based, the header is line 1)" if where is not None else ""
        raise DataFileError(f"{path}: not a readable CSV{at} ({exc})") from exc


def _parse_error_line(path: Path, message: str, block: int = 1 << 24) -> int | None:
    """The 1-based line of the row a CSV parse error quotes (pyarrow names none), found by
    reading the file in blocks of ``block`` bytes; None when the message quotes no row or the
    row is not found.

    The file is searched as ``"\\n" + file`` for ``"\\n" + row``: a match ending the
    newlines before it, counted as the blocks go, gives the line."""
    quoted = message.partition("CSV parse error: ")[2]
    text = quoted.rpartition(": ")[2].rstrip("\n")
    row = text.removesuffix(" ...")
    if not quoted.startswith("Expected") or not row:
        return None
    # the whole row ends at a line break (or the file's end); a shortened one anywhere
    start = b"\n" + row.encode("utf-8", "surrogateescape")
    needles = [start] if row != text else [start + b"\n", start + b"\r\n"]
    longest = max(map(len, needles))
    before = 0  # newlines of the searched text before ``data``
    data = b"\n"
    try:
        with open(path, "rb") as fh:
            while True:
                chunk = fh.read(block)
                data += chunk if chunk else b"\n"  # the file's end closes its last line
                found = [at for at in (data.find(x) for x in needles) if at >= 0]
                if found:
                    return before + data.count(b"\n", 0, min(found) + 1)
                if not chunk:
                    return None
                cut = max(len(data) - longest + 1, 0)
                before += data.count(b"\n", 0, cut)
                data = data[cut:]
    except OSError:
        return None


def _positions(column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(0-based position, missing/text/fractional mask, out-of-range mask) of OBD positions.

    A column with any text in it is read by the CSV parser as text: its whole-number entries
    still count, the others are ``obd_position_missing``.
    """
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        number = pc.fill_null(pc.match_substring_regex(column, _WHOLE_NUMBER), False)
        column = pc.if_else(number, pc.utf8_trim_whitespace(column), pa.scalar(None, column.type))
    try:
        values = pc.fill_null(column.cast(pa.float64()), np.nan).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # e.g. booleans, dates
        values = np.full(len(column), np.nan)
    values = np.asarray(values, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        whole = np.isfinite(values) & (values == np.round(values))
        in_range = whole & (values >= 1) & (values <= OBD_POSITIONS)
    return (np.where(in_range, values - 1, 0).astype(np.int64), ~whole, whole & ~in_range)


#: A zone offset (or Z) at the end of a timestamp's text.
_ZONE: Final = r"(Z|[+-]\d\d:?\d\d)$"


def _timestamps(column: pa.ChunkedArray) -> tuple[pa.ChunkedArray | pa.Array, np.ndarray]:
    """OBD's timestamps, and which rows have none (``obd_timestamp_invalid``): missing, or text
    that is no date and time.

    The CSV parser types the column as timestamps when every cell is one, in nanoseconds (kept:
    parquet stores them as they are, so the imported file reads back with the same type;
    seconds and milliseconds become microseconds). One cell that is not makes the whole column
    text: its cells are then parsed one by one (ISO 8601; with a zone offset in UTC, as the
    parser gives), the others marked, so that the rows keep their time order."""
    if pa.types.is_timestamp(column.type):
        if column.type.unit in ("s", "ms"):
            column = column.cast(pa.timestamp("us", tz=column.type.tz))
        return column, np.asarray(pc.is_null(column).to_numpy(zero_copy_only=False), dtype=bool)
    import pandas as pd

    text = pc.utf8_trim_whitespace(column.cast(pa.string()))
    zoned = pc.fill_null(pc.match_substring_regex(text, _ZONE), False)
    utc = bool(pc.any(zoned).as_py())
    values = pd.Series(text.to_numpy(zero_copy_only=False), dtype=object)
    parsed = pd.to_datetime(values, errors="coerce", utc=utc, format="ISO8601")
    bad = parsed.isna().to_numpy()
    if utc:  # a time without a zone among zoned ones is not read as UTC
        bad = bad | ~np.asarray(zoned.to_numpy(zero_copy_only=False), dtype=bool)
    # the parser's unit: seconds (stored as microseconds, above) unless a time has a fraction
    valid = parsed[~bad]
    fraction = bool(((valid.dt.microsecond != 0) | (valid.dt.nanosecond != 0)).any())
    unit = "ns" if fraction else "us"
    out = pa.array(parsed.dt.as_unit(unit), type=pa.timestamp(unit, tz="UTC" if utc else None))
    return pc.if_else(pa.array(bad), pa.scalar(None, out.type), out), bad


def _categories(column: pa.ChunkedArray) -> tuple[list[str], np.ndarray]:
    """(sorted categories, each row's category code; -1 where the value is missing)."""
    values = pc.drop_null(pc.unique(column))
    labels = values.take(pc.sort_indices(values))
    codes = pc.fill_null(pc.index_in(column, value_set=labels), -1)
    return [str(v) for v in labels.to_pylist()], np.asarray(
        codes.to_numpy(zero_copy_only=False), dtype=np.int64
    )


def _one_hot(blocks: list[tuple[np.ndarray, int]], n: int) -> pa.FixedSizeListArray:
    """One 0/1 entry per category of each block (codes, n_categories), side by side."""
    width = sum(k for _, k in blocks)
    flat = np.zeros((n, width), dtype=np.int8)
    rows = np.arange(n)
    offset = 0
    for codes, k in blocks:  # a loop over feature columns, not rows
        hit = codes >= 0
        flat[rows[hit], offset + codes[hit]] = 1
        offset += k
    return pa.FixedSizeListArray.from_arrays(pa.array(flat.reshape(-1)), width)


def read_obd(
    src: str | os.PathLike[str],
    *,
    context: str = "user",
    on_invalid: str = "raise",
    mapping: Any = None,
) -> BanditLogs:
    """Read an Open Bandit Dataset campaign (folder or log CSV) into validated ``BanditLogs``.

    Parameters
    ----------
    src : str or os.PathLike
        A campaign folder (``.../random/all``) or its log CSV (``.../random/all/all.csv``).
        ``item_context.csv`` next to the CSV becomes ``logs.action_features``.
    context : {"user", "user+affinity", "none"}, default "user"
        The reward model's context: the one-hot ``user_feature_0..3`` and position (default),
        also the ``user-item_affinity_*`` columns, or the one-hot position alone (no user
        feature column is kept).
    on_invalid : {"raise", "drop"}, default "raise"
        As in :func:`ope.read_logs`. Report row numbers are 0-based data rows of the log CSV.
    mapping : None
        Accepted for the CLI's reader interface; OBD's columns are fixed (must be None).

    Returns
    -------
    BanditLogs
        Columns ``event_id, timestamp, action, position, reward, propensity``, the kept
        ``user_feature_*`` (categorical), ``context`` (one-hot user features and position) and
        the affinity columns when asked for, sorted by timestamp. ``logs.action_features`` is
        the item table (``action, item_feature_0, item_feature_<j>=<category>...``) or None; it
        is also embedded in the schema metadata (``ope.io.ACTION_FEATURES_KEY``), so that the
        parquet file written from ``logs.table`` carries it. Schema metadata:
        ``ope.source_format``, ``ope.propensity`` (:data:`OBD_PROPENSITY_MEANING`),
        ``ope.context_columns``, ``ope.context_labels``, ``ope.position``.

    Raises
    ------
    DataFileError
        Missing or unreadable files.
    SchemaError
        A required OBD column is missing; ``item_context.csv`` has no ``item_id``, repeats an
        ``item_id``, or has one that is not a whole number.
    ValidationError
        Rows break rules (``on_invalid="raise"``): ope's row rules, and OBD's
        ``obd_position_missing``, ``obd_position_out_of_range``, ``obd_item_unknown``,
        ``obd_timestamp_invalid``; or no row is left.

    Examples
    --------
    >>> import os, tempfile
    >>> from ope.importers import read_obd
    >>> d = tempfile.mkdtemp()
    >>> with open(os.path.join(d, "all.csv"), "w") as f:
    ...     _ = f.write(",timestamp,item_id,position,click,propensity_score,user_feature_0,"
    ...                 "user-item_affinity_0\\n"
    ...                 "0,2019-11-24 00:00:02+00:00,1,3,1,0.25,a1,0.0\\n"
    ...                 "1,2019-11-24 00:00:01+00:00,0,1,0,0.5,b2,1.0\\n")
    >>> logs = read_obd(d)
    >>> logs.column("event_id").tolist(), logs.column("position").tolist()
    ([1, 0], [0, 2])
    >>> logs.columns
    ['event_id', 'timestamp', 'action', 'position', 'reward', 'propensity', 'user_feature_0', 'context']
    >>> logs.table.column("context").to_pylist()
    [[0, 1, 1, 0, 0], [1, 0, 0, 0, 1]]
    >>> import json
    >>> json.loads(logs.table.schema.metadata[b"ope.context_labels"])["context"]
    ['user_feature_0=a1', 'user_feature_0=b2', 'position=0', 'position=1', 'position=2']
    """
    check_choice(context, "context", OBD_CONTEXT_CHOICES)
    if mapping:
        raise ParameterError("`mapping` does not apply to OBD: its column names are fixed")
    log_csv, item_csv = _locate(src)

    def keep(c: str) -> bool:
        if c.startswith(_AFFINITY_PREFIX):
            return context == "user+affinity"
        if c.startswith(_USER_PREFIX):
            return context != "none"
        return True

    raw = _read_csv(log_csv, keep, strings=lambda c: c.startswith(_USER_PREFIX))
    index_col = (
        raw.column_names[0]
        if raw.column_names and raw.column_names[0] in ("", "Unnamed: 0")
        else None
    )
    missing = [c for c in _REQUIRED if c not in raw.column_names]
    if missing:
        raise SchemaError(f"{log_csv}: not an OBD log CSV; missing column(s) {', '.join(missing)}")
    n = raw.num_rows
    event_id = raw.column(index_col) if index_col is not None else pa.array(np.arange(n))
    user_cols = [c for c in raw.column_names if c.startswith(_USER_PREFIX)]
    affinity_cols = [c for c in raw.column_names if c.startswith(_AFFINITY_PREFIX)]
    position, pos_missing, pos_out = _positions(raw.column("position"))
    timestamp, no_time = _timestamps(raw.column("timestamp"))
    items = _item_table(item_csv) if item_csv is not None else None
    unknown = np.zeros(n, dtype=bool)
    if items is not None:
        logged = raw.column("item_id")
        if pa.types.is_integer(logged.type):
            known = pc.is_in(logged, value_set=items.column("action").cast(logged.type))
        else:  # text or fractional ids never equal a whole-number item_id
            known = pc.is_in(
                logged.cast(pa.string()), value_set=items.column("action").cast(pa.string())
            )
        unknown = ~np.asarray(pc.fill_null(known, False).to_numpy(zero_copy_only=False), dtype=bool)
    blocks, labels, user = [], [], {}
    for c in user_cols:  # a loop over the user feature columns
        cats, codes = _categories(raw.column(c))
        blocks.append((codes, len(cats)))
        labels += [f"{c}={v}" for v in cats]
        user[c] = pa.DictionaryArray.from_arrays(
            pa.array(np.where(codes >= 0, codes, 0).astype(np.int32), mask=codes < 0),
            pa.array(cats, type=pa.string()),
        )
    blocks.append((np.where(pos_missing | pos_out, -1, position), OBD_POSITIONS))
    labels += [f"position={k}" for k in range(OBD_POSITIONS)]
    table = pa.table(
        {
            "event_id": event_id.cast(pa.int64()),
            "timestamp": timestamp,
            "action": raw.column("item_id"),
            "position": pa.array(position),
            "reward": raw.column("click"),
            "propensity": raw.column("propensity_score"),
            **user,
            OBD_CONTEXT_COLUMN: _one_hot(blocks, n),
            **{c: raw.column(c) for c in affinity_cols},
        }
    )
    # validated in CSV order, so that report rows are the CSV's data rows (0-based) whatever
    # its index column holds, and a repeated index is rejected after its first CSV row
    rejected = {
        "obd_position_missing": pos_missing,
        "obd_position_out_of_range": pos_out,
        "obd_item_unknown": unknown & ~(pos_missing | pos_out),
        "obd_timestamp_invalid": no_time & ~(pos_missing | pos_out | unknown),
    }
    bad = np.zeros(n, dtype=bool)
    for mask in rejected.values():
        bad |= mask
    validator = ChunkValidator(str(log_csv), on_invalid)
    used = validator.add(
        table.filter(pa.array(~bad)),
        np.flatnonzero(~bad),
        {k: np.flatnonzero(v) for k, v in rejected.items()},
        n_source=n,
    )
    # sorted by time; ties keep the CSV order (the rows kept are in CSV order)
    used = used.take(
        pc.sort_indices(
            pa.table({"t": used.column("timestamp"), "i": pa.array(np.arange(used.num_rows))}),
            sort_keys=[("t", "ascending"), ("i", "ascending")],
        )
    )
    logs = validator.finish(
        [used],
        {
            "ope.source_format": "obd",
            "ope.propensity": OBD_PROPENSITY_MEANING,
            "ope.context_columns": json.dumps([OBD_CONTEXT_COLUMN, *affinity_cols]),
            OBD_CONTEXT_LABELS_KEY: json.dumps({OBD_CONTEXT_COLUMN: labels}),
            "ope.position": "0-based: 0 = left, 1 = centre, 2 = right (OBD position - 1)",
        },
    )
    if items is not None:
        logs = BanditLogs.from_validated(
            with_action_features(logs.table, items),
            logs.report,
            dropped_event_ids=logs.dropped_event_ids,
            unit_roundoff=logs.unit_roundoff,
            action_features=items,
        )
    return logs


def _rows(mask: np.ndarray) -> str:
    """``"rows 1, 2"``: the first rows of ``mask`` (as many as a validation report shows)."""
    rows = np.flatnonzero(mask)
    shown = ", ".join(str(r) for r in rows[:EXAMPLE_ROWS])
    more = ", ..." if rows.size > EXAMPLE_ROWS else ""
    return f"row{'s' if rows.size != 1 else ''} {shown}{more}"


def _item_table(path: Path) -> pa.Table:
    """``item_context.csv`` as ope's action-feature table: ``action``, ``item_feature_0`` and
    one 0/1 column per category of every other ``item_feature_*`` (one row per item)."""
    raw = _read_csv(path, strings=lambda c: c.startswith(_ITEM_PREFIX) and c != _ITEM_NUMERIC)
    if "item_id" not in raw.column_names:
        raise SchemaError(f"{path}: item_context.csv has no item_id column")
    ids = raw.column("item_id")
    try:
        if ids.null_count:
            raise pa.ArrowInvalid("missing values")
        action = ids.cast(pa.int64())  # safe cast: fractions and text raise
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        as_float = (
            pc.cast(ids, pa.float64(), safe=False)
            if not pa.types.is_string(ids.type)
            else pc.cast(
                pc.if_else(pc.match_substring_regex(ids, _WHOLE_NUMBER), ids, None), pa.float64()
            )
        )
        vals = np.asarray(pc.fill_null(as_float, np.nan).to_numpy(zero_copy_only=False))
        with np.errstate(invalid="ignore"):
            bad = ~(np.isfinite(vals) & (vals == np.round(vals)))
        raise SchemaError(
            f"{path}: item_id must be a whole number on every row (the log's item_id joins on "
            f"it); it is not at {_rows(bad)} (0-based data rows). Fix item_context.csv."
        ) from None
    keys = np.asarray(action.to_numpy(), dtype=np.int64)
    uniq, first, counts = np.unique(keys, return_index=True, return_counts=True)
    if (counts > 1).any():
        repeated = uniq[counts > 1]
        mask = np.isin(keys, repeated)
        raise SchemaError(
            f"{path}: item_id must be unique (one row of features per item); "
            f"{repeated.size} item_id value{'s' if repeated.size != 1 else ''} repeat "
            f"(item_id {', '.join(str(v) for v in repeated[:EXAMPLE_ROWS])}) at {_rows(mask)} "
            "(0-based data rows). Keep one row per item."
        )
    cols: dict[str, Any] = {"action": action}
    for c in [c for c in raw.column_names if c.startswith(_ITEM_PREFIX)]:  # loop over columns
        if c == _ITEM_NUMERIC:
            cols[c] = raw.column(c)
            continue
        cats, codes = _categories(raw.column(c))
        for j, v in enumerate(cats):  # a loop over the categories of one column
            cols[f"{c}={v}"] = pa.array((codes == j).astype(np.int8))
    return pa.table(cols)
