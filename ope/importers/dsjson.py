"""Vowpal Wabbit DSJSON (Decision Service / Azure Personalizer exports) to ``BanditLogs``.

One JSON object per line (``.json`` or ``.json.gz``). The fields and their import rules follow
VW's DSJSON parser (``DecisionServiceState`` in ``parse_example_json.cc``):

========================  =====================================================================
DSJSON                    ope column
========================  =====================================================================
``EventId``               ``event_id`` (string); CCB/slates: ``"<EventId>/<slot>"``
``Timestamp``             ``timestamp`` (kept as the string written)
``_label_Action`` (1-b.)  ``action`` = ``_label_Action - 1``, a 0-based index into ``c._multi``
``_label_probability``    ``propensity``
``_label_cost``           ``reward`` = ``-_label_cost`` (writers emit the negated reward)
``a``, ``p``              ``logging_distribution``: ``p`` is in the order of ``a`` (1-based
                          ids), scattered to ``candidates`` order (``p[i]`` at ``a[i] - 1``)
``c._multi``              ``candidates`` = ``[0, ..., K-1]``; ``action_features`` = the JSON
                          text of ``c._multi`` (entry ``i`` is action ``i``'s features);
                          the other keys of ``c`` -> ``shared_context`` (JSON text)
``pdrop``                 ``weight`` = ``1 / (1 - pdrop)`` (1 when absent)
``_skipLearn``            the row is excluded and counted under ``dsjson_skip_learn``
``_outcomes`` (CCB)       one row per slot: ``slate_id`` = ``EventId``, ``position`` = slot,
                          ``action`` = ``_a[0]`` (0-based indices into ``c._multi``, as
                          VW's CCB labels), ``candidates`` = ``_a`` (the actions left for
                          the slot, ranked), ``logging_distribution`` = ``_p``,
                          ``propensity`` = ``_p[0]``, ``reward`` = ``-_label_cost`` of the slot
========================  =====================================================================

Blank lines are skipped. Report row numbers are 0-based line numbers of the file (line ``k``
is the ``k+1``-th line), one per slot row for CCB. The file is read in chunks of
``chunk_lines`` lines, never whole; :func:`iter_dsjson` yields the validated chunks for a
consumer that writes them out (``ope import dsjson`` does), so memory stays bounded by one chunk.
Decoding a line (``json.loads``) is the one per-line step; everything after it is columnar.
"""

from __future__ import annotations

import gzip
import io
import json
import os
from collections.abc import Iterator
from typing import IO, Any, Final

import numpy as np
import pyarrow as pa

from ope._validation import check_choice, check_positive_int
from ope.exceptions import DataFileError
from ope.importers._common import ChunkValidator
from ope.io import locate_input
from ope.logs import BanditLogs

__all__ = ["read_dsjson", "iter_dsjson", "DSJSON_SCHEMA", "DEFAULT_CHUNK_LINES"]

#: Lines per chunk. Measured (benchmarks/bench_import.py, 1.16 kB lines, 400 MB file): the
#: import's peak RSS was 233 MB with 10,000-line chunks and 484 MB with 50,000, at the same
#: throughput (~14k rows/s), and did not grow with the file (481 MB for 200 MB at 50,000). Per-chunk
#: overhead (one read_logs call) is already negligible at 10,000 lines.
DEFAULT_CHUNK_LINES: Final[int] = 10_000

#: The Arrow schema of an imported DSJSON table (before validation).
DSJSON_SCHEMA: Final[pa.Schema] = pa.schema([
    ("event_id", pa.string()),
    ("timestamp", pa.string()),
    ("action", pa.int64()),
    ("propensity", pa.float64()),
    ("reward", pa.float64()),
    ("weight", pa.float64()),
    ("candidates", pa.list_(pa.int64())),
    ("logging_distribution", pa.list_(pa.float64())),
    ("slate_id", pa.string()),
    ("position", pa.int64()),
    ("action_features", pa.string()),
    ("shared_context", pa.string()),
])

#: What the imported columns mean, stored in the table's schema metadata.
DSJSON_METADATA: Final = {
    "ope.source_format": "dsjson",
    "ope.propensity": "P(logged action | context) of the logging policy (_label_probability); "
    "CCB/slates: P(action at this slot | slot context, earlier slots) (_p[0])",
    "ope.weight": "1/(1 - pdrop): the sampling weight of the event",
}


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


_IDS: dict[int, frozenset[int]] = {}


def _valid_ids(a: list[Any], k: int) -> bool:
    """``a`` lists distinct action ids among 1..k (whole numbers; bools are not ids)."""
    ids = _IDS.get(k)
    if ids is None:
        ids = _IDS.setdefault(k, frozenset(range(1, k + 1)))
    try:
        distinct = set(a)
    except TypeError:  # an unhashable entry (a list or an object)
        return False
    return len(distinct) == len(a) and distinct <= ids \
        and not any(isinstance(x, bool) for x in distinct)


def _numbers(p: list[Any]) -> bool:
    """Every entry of ``p`` is a number (``sum`` refuses strings, None, lists, objects)."""
    try:
        sum(p)
    except TypeError:
        return False
    return True


def _open(path: str | os.PathLike[str]) -> IO[bytes]:
    """The DSJSON file as a binary line stream (gzip detected from its first bytes).

    The path goes through ope's one input policy (:func:`ope.io.locate_input`): a regular file
    (a FIFO or device is refused before it is opened, so nothing blocks), a ``file://`` URI, or
    a URI of ``pyarrow.fs`` (``s3://``, ``gs://``, ...).
    """
    found = locate_input(path, what="DSJSON file", directories=False)
    if found.filesystem is None:
        with open(found.path, "rb") as fh:
            magic = fh.read(2)
        if magic == b"\x1f\x8b":
            return gzip.open(found.path, "rb")
        return open(found.path, "rb")  # noqa: SIM115
    fs = found.filesystem
    try:
        with fs.open_input_stream(found.path) as fh:
            magic = bytes(fh.read(2))
        compression = "gzip" if magic == b"\x1f\x8b" else None
        return io.BufferedReader(fs.open_input_stream(found.path, compression=compression))
    except (pa.ArrowException, OSError) as exc:
        raise DataFileError(f"cannot read DSJSON file {found.name}: {exc}") from None


class _Rows:
    """Column lists of one chunk being parsed."""

    def __init__(self) -> None:
        self.cols: dict[str, list[Any]] = {f.name: [] for f in DSJSON_SCHEMA}
        self.lines: list[int] = []
        self.rejected: dict[str, list[int]] = {}

    def reject(self, reason: str, line: int) -> None:
        self.rejected.setdefault(reason, []).append(line)

    def add(self, line: int, **values: Any) -> None:
        for name, col in self.cols.items():
            col.append(values.get(name))
        self.lines.append(line)


_COMPACT: Final = (",", ":")


def _features(c: Any) -> tuple[str | None, str | None, int | None]:
    """(JSON of c._multi, JSON of the shared namespaces, number of actions) of a line."""
    if not isinstance(c, dict):
        return None, None, None
    multi = c.get("_multi")
    shared = {k: v for k, v in c.items() if k not in ("_multi", "_slots")}
    if not isinstance(multi, list):
        multi = None
    return (None if multi is None else json.dumps(multi, separators=_COMPACT),
            json.dumps(shared, separators=_COMPACT) if shared else None,
            None if multi is None else len(multi))


def _parse_ccb(rows: _Rows, obj: dict[str, Any], line: int, weight: float) -> None:
    outcomes = obj["_outcomes"]
    feats, shared, _ = _features(obj.get("c"))
    eid = obj.get("EventId")
    ok = isinstance(outcomes, list) and all(
        isinstance(o, dict) and _is_number(o.get("_label_cost"))
        and isinstance(o.get("_a"), list) and isinstance(o.get("_p"), list) and o["_a"]
        and len(o["_a"]) == len(o["_p"]) for o in outcomes)
    if not ok or not outcomes:
        rows.reject("dsjson_outcome_malformed", line)
        return
    for slot, o in enumerate(outcomes):  # slots of one line, not rows of the file
        cand = o["_a"]
        rows.add(
            line, event_id=None if eid is None else f"{eid}/{slot}", timestamp=obj.get("Timestamp"),
            action=cand[0], propensity=o["_p"][0], reward=-float(o["_label_cost"]), weight=weight,
            candidates=cand, logging_distribution=o["_p"], slate_id=eid, position=slot,
            action_features=feats, shared_context=shared,
        )


def _parse_line(rows: _Rows, raw: bytes, line: int) -> None:
    try:
        obj = json.loads(raw)
    except ValueError:
        rows.reject("dsjson_bad_json", line)
        return
    if not isinstance(obj, dict):
        rows.reject("dsjson_bad_json", line)
        return
    if obj.get("_skipLearn") is True:
        rows.reject("dsjson_skip_learn", line)
        return
    pdrop = obj.get("pdrop", 0.0)
    if not _is_number(pdrop) or not 0.0 <= pdrop < 1.0:
        rows.reject("dsjson_pdrop_out_of_range", line)
        return
    weight = 1.0 / (1.0 - float(pdrop))
    if "_outcomes" in obj:
        _parse_ccb(rows, obj, line, weight)
        return
    cost = obj.get("_label_cost")
    if cost is not None and not _is_number(cost):
        rows.reject("dsjson_cost_not_numeric", line)
        return
    feats, shared, k = _features(obj.get("c"))
    a, p = obj.get("a"), obj.get("p")
    label = obj.get("_label_Action")
    cand = dist = None
    if a is not None or p is not None:
        k = k if k is not None else (len(a) if isinstance(a, list) else 0)
        if (not isinstance(a, list) or not isinstance(p, list) or len(a) != len(p) or len(a) > k
                or not _valid_ids(a, k) or not _numbers(p)):
            rows.reject("dsjson_a_p_mismatch", line)
            return
        if label is not None and label not in a:
            rows.reject("dsjson_action_not_in_a", line)
            return
        cand = list(range(k))
        dist = [0.0] * k
        for ai, pi in zip(a, p):  # entries of one line
            dist[int(ai) - 1] = float(pi)
    prob = obj.get("_label_probability")
    rows.add(
        line, event_id=obj.get("EventId"), timestamp=obj.get("Timestamp"),
        action=None if not _is_number(label) else int(label) - 1,
        propensity=float(prob) if _is_number(prob) else None,
        reward=None if cost is None else -float(cost), weight=weight,
        candidates=cand, logging_distribution=dist, action_features=feats, shared_context=shared,
    )


def _chunk_table(rows: _Rows) -> tuple[pa.Table, np.ndarray, dict[str, np.ndarray]]:
    table = pa.table({f.name: pa.array(rows.cols[f.name], type=f.type) for f in DSJSON_SCHEMA},
                     schema=DSJSON_SCHEMA)
    # one schema for every chunk; all-null optional columns are removed by read_dsjson
    return (table, np.asarray(rows.lines, dtype=np.int64),
            {k: np.asarray(v, dtype=np.int64) for k, v in rows.rejected.items()})


def iter_dsjson(
    path: str | os.PathLike[str], *, on_invalid: str = "raise",
    chunk_lines: int = DEFAULT_CHUNK_LINES,
) -> Iterator[tuple[pa.Table, ChunkValidator]]:
    """Parse and validate a DSJSON file chunk by chunk (bounded memory).

    Yields ``(valid_rows, validator)`` per chunk of ``chunk_lines`` lines; ``validator.report``
    is the report so far (source line numbers). After the last chunk, the caller should raise
    ``validator.failure()`` if it is not None (``on_invalid="raise"``), as :func:`read_dsjson`
    does.

    Examples
    --------
    >>> import json, os, tempfile
    >>> from ope.importers import iter_dsjson
    >>> path = os.path.join(tempfile.mkdtemp(), "x.json")
    >>> with open(path, "w") as f:
    ...     for i in range(3):
    ...         _ = f.write(json.dumps({"EventId": str(i), "_label_cost": -1.0,
    ...             "_label_probability": 0.5, "_label_Action": 1, "a": [1, 2], "p": [0.5, 0.5],
    ...             "c": {"_multi": [{"x": 1}, {"x": 2}]}}) + "\\n")
    >>> [t.num_rows for t, _ in iter_dsjson(path, chunk_lines=2)]
    [2, 1]
    """
    check_choice(on_invalid, "on_invalid", ("raise", "drop"))
    check_positive_int(chunk_lines, "chunk_lines")
    validator = ChunkValidator(os.fspath(path), on_invalid)
    with _open(path) as fh:
        line = -1
        while True:
            rows = _Rows()
            raw_lines = []
            for raw in fh:  # reads at most chunk_lines lines
                line += 1
                raw_lines.append((line, raw))
                if len(raw_lines) >= chunk_lines:
                    break
            if not raw_lines:
                return
            for ln, raw in raw_lines:  # the JSON decode, one line at a time
                if raw.strip():
                    _parse_line(rows, raw, ln)
            table, lines, rejected = _chunk_table(rows)
            n_source = table.num_rows + sum(v.size for v in rejected.values())
            yield validator.add(table, lines, rejected, n_source=n_source), validator


def read_dsjson(
    path: str | os.PathLike[str], *, on_invalid: str = "raise",
    chunk_lines: int = DEFAULT_CHUNK_LINES, mapping: Any = None,
) -> BanditLogs:
    """Read a Vowpal Wabbit DSJSON file (plain or gzip) into validated ``BanditLogs``.

    Parameters
    ----------
    path : str or os.PathLike
        The DSJSON file; gzip is detected from its first bytes.
    on_invalid : {"raise", "drop"}, default "raise"
        As in :func:`ope.read_logs`. ``_skipLearn`` rows are always excluded and counted under
        ``dsjson_skip_learn``; they never make ``"raise"`` raise.
    chunk_lines : int, default 10,000
        Lines parsed and validated at a time.
    mapping : None
        Accepted for the CLI's reader interface; DSJSON fields have fixed names (must be None).

    Returns
    -------
    BanditLogs
        Columns as in the module table; all-null optional columns (``slate_id``/``position``
        without CCB lines, ``action_features`` without ``c._multi``) are left out. The schema
        metadata (``logs.table.schema.metadata``) records the format and what ``propensity``
        means. ``logs.report`` counts rows by reason with 0-based line numbers.

    Raises
    ------
    DataFileError
        The file is missing or a directory.
    ValidationError
        Lines break rules (``on_invalid="raise"``), or no row is left.

    Examples
    --------
    >>> import json, os, tempfile
    >>> from ope.importers import read_dsjson
    >>> path = os.path.join(tempfile.mkdtemp(), "x.json")
    >>> with open(path, "w") as f:
    ...     _ = f.write(json.dumps({"EventId": "e1", "_label_cost": -1.0,
    ...         "_label_probability": 0.8, "_label_Action": 2, "a": [2, 1], "p": [0.8, 0.2],
    ...         "c": {"u": {"age": 3}, "_multi": [{"x": 1}, {"x": 2}]}}) + "\\n")
    ...     _ = f.write('{"EventId": "e2", "_skipLearn": true}\\n')
    >>> logs = read_dsjson(path)
    >>> logs.column("action").tolist(), logs.column("reward").tolist()
    ([1], [1.0])
    >>> logs.table.column("logging_distribution").to_pylist()
    [[0.2, 0.8]]
    >>> logs.report.rejected
    {'dsjson_skip_learn': 1}
    """
    if mapping:
        from ope.exceptions import ParameterError

        raise ParameterError("`mapping` does not apply to DSJSON: its field names are fixed")
    tables = []
    validator = None
    for table, validator in iter_dsjson(path, on_invalid=on_invalid, chunk_lines=chunk_lines):
        tables.append(table)
    if validator is None:  # an empty file
        validator = ChunkValidator(str(path), on_invalid)
        tables = [DSJSON_SCHEMA.empty_table()]
    logs = validator.finish(tables, DSJSON_METADATA)
    return _drop_empty_optional(logs)


#: Optional columns left out of the result when no row has a value.
_OPTIONAL: Final = ("timestamp", "candidates", "logging_distribution", "slate_id", "position",
                    "action_features", "shared_context", "event_id")


def _drop_empty_optional(logs: BanditLogs) -> BanditLogs:
    t = logs.table
    empty = [c for c in _OPTIONAL if c in t.column_names and t.column(c).null_count == t.num_rows]
    if not empty:
        return logs
    return BanditLogs.from_validated(t.drop_columns(empty), logs.report,
                                     dropped_event_ids=logs.dropped_event_ids,
                                     unit_roundoff=logs.unit_roundoff)
