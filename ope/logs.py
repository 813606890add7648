"""Validated log containers and the validation report.

A reader (``ope.read_logs``, ``ope.scan_logs``, ``ope.read_trajectories``, ``ope.read_paired``)
returns one of these containers. Each holds an Arrow table whose columns carry ope's canonical
names (docs/guide/logs.md) and types, plus the ``ValidationReport`` of how it was read: rows read,
used and rejected by reason. Nothing is ever dropped without being counted here.
"""

from __future__ import annotations

import copy
import re
import textwrap
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ope._format import safe_text
from ope._validation import check_positive_int, describe
from ope.exceptions import DroppedRowsWarning, ParameterError, SchemaError, ValidationError
from ope.schema import REJECTION_REASONS, episode_bounds

__all__ = [
    "ValidationReport",
    "SkippedPath",
    "BanditLogs",
    "Trajectories",
    "PairedReplays",
    "require_logs",
    "as_log_table",
    "EXAMPLE_ROWS",
]

#: how many example row numbers a report keeps per rejection reason
EXAMPLE_ROWS: int = 5

#: Width of the text report: lists of column names wrap here (the report is also pasted into
#: issues and e-mails, so it does not follow the terminal's width).
REPORT_WIDTH: int = 88

#: Up to this many columns the text report lists every name; past it, it shows counts by kind
#: (ope's columns, ``<prefix>__`` families such as ``target__``, numbered families such as
#: ``x0 .. x99``) with the first names of each. 30 names fill about four wrapped lines; the
#: full list stays in ``to_dict()["columns"]`` (and the CLI's ``--json``).
REPORT_MAX_NAMES: int = 30

#: Names shown per family of columns when they are summarized.
REPORT_NAMES_PER_FAMILY: int = 3

#: Columns that the text report names one by one even in the summary (ope's log schemas).
_SCHEMA_COLUMNS: tuple[str, ...] = (
    "event_id",
    "action",
    "propensity",
    "reward",
    "candidates",
    "logging_distribution",
    "episode_id",
    "step",
    "done",
    "pair_id",
    "arm",
    "outcome",
    "replicate",
)


@dataclass(frozen=True)
class SkippedPath:
    """An entry of a logs directory that a reader left out, and why.

    Attributes
    ----------
    path : str
        The entry, as found under the directory (through links, as listed).
    reason : str
        ``"already_read"`` (the same file or folder reached again, e.g. through a symbolic
        link) or ``"not_regular_file"`` (a FIFO, socket or device); see
        ``ope.io.SKIP_REASONS``.
    detail : str
        What it is (``"a link to logs, a folder already read"``, ``"a FIFO (named pipe)"``).
    """

    path: str
    reason: str
    detail: str

    def text(self) -> str:
        """``"path (detail)"``."""
        return f"{self.path} ({self.detail})"

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "reason": self.reason, "detail": self.detail}


def _family(name: str) -> str:
    """The family a column belongs to for the summary: ``target__*``, ``x*``, or itself."""
    if "__" in name.strip("_"):
        return name[: name.index("__", 1) + 2] + "*"
    stem = re.sub(r"[0-9]+$", "", name)
    if stem != name and stem:
        return stem + "*"
    return name


def summarize_columns(columns: Sequence[str], *, max_names: int = REPORT_MAX_NAMES) -> str:
    """Column names for a report: all of them, or counts by family past ``max_names``.

    Examples
    --------
    >>> from ope.logs import summarize_columns
    >>> summarize_columns(["action", "reward"])
    'action, reward'
    >>> cols = ["action", "propensity", "reward"] + [f"target__p{i}" for i in range(40)]
    >>> print(summarize_columns(cols + ["x0", "x1", "country"]))
    action, propensity, reward, 40 target__* (target__p0, target__p1, target__p2, ...), 2 x* (x0, x1), country
    """
    names = [str(c) for c in columns]
    if len(names) <= max_names:
        return ", ".join(names)
    families: dict[str, list[str]] = {}
    for name in names:  # a loop over column names, not rows
        key = name if name in _SCHEMA_COLUMNS else _family(name)
        families.setdefault(key, []).append(name)
    parts = []
    for key, members in families.items():
        if len(members) == 1:
            parts.append(members[0])
            continue
        shown = ", ".join(members[:REPORT_NAMES_PER_FAMILY])
        more = ", ..." if len(members) > REPORT_NAMES_PER_FAMILY else ""
        parts.append(f"{len(members)} {key} ({shown}{more})")
    return ", ".join(parts)


def _wrapped(label: str, text: str, width: int) -> list[str]:
    """``label text`` wrapped at ``width``, continuation lines indented under the text.

    Breaks only after ", " so that names (which may hold spaces or hyphens) stay whole.
    """
    indent = " " * len(label)
    items = text.split(", ")
    lines: list[str] = []
    line = label
    for i, item in enumerate(items):
        piece = item + ("," if i < len(items) - 1 else "")
        if line.strip() and len(line) + 1 + len(piece) > width and line != label:
            lines.append(line)
            line = indent + piece
        else:
            line = line + ("" if line == label else " ") + piece
    lines.append(line)
    return lines


@dataclass(frozen=True)
class ValidationReport:
    """What a reader did with each row.

    Attributes
    ----------
    source : str
        Where the rows came from (a path, ``"<DataFrame>"``, ``"<Table>"``).
    rows_read : int
        Rows found in the source.
    rows_used : int
        Rows kept in the logs. ``rows_read - rows_used`` rows were rejected and dropped.
    rejected : dict[str, int]
        Rows rejected, by reason (e.g. ``{"propensity_out_of_range": 3}``). A row breaking several
        rules is counted under each reason but only once in ``rows_rejected``.
    examples : dict[str, tuple[int, ...]]
        The first few (0-based, source-order) row numbers of each reason.
    dropped : bool
        True when rejected rows were dropped under ``on_invalid="drop"``.
    episodes_read, episodes_used : int or None
        For trajectories: episodes found (with a non-null ``episode_id``) and episodes kept. An
        invalid row invalidates its whole episode; its valid rows are counted under
        ``episode_invalidated``. None for other logs.
    rejected_by_column : dict[str, dict[str, int]]
        For the rules checked column by column (``target_probability_out_of_range``,
        ``target_distribution_*``): reason -> culprit column -> rows it rejects.
    examples_by_column : dict[str, dict[str, tuple[int, ...]]]
        The first row numbers of each culprit column.
    columns : tuple of str
        The columns of the logs read (ope's names); the text report wraps or summarizes them.
    files_read : int or None
        Files read (for a path; None for data in memory).
    skipped : tuple of SkippedPath
        Entries of a directory left out (a second path to a file already read, a FIFO...),
        each named with its reason. They never hold rows that were lost: see ``ope.io``.
    notes : tuple of str
        What the reader left out of the source beyond rows, and why (e.g. a DSJSON file's
        ``p`` lists not kept as ``logging_distribution``). Results built on the logs carry
        them with the rows' notes (:meth:`dropped_notes`).

    ``columns``, ``files_read``, ``skipped`` and ``notes`` describe the source, not its rows: they are
    left out of comparisons (``==``), so reports of the same rows compare equal however the
    rows were read.

    Examples
    --------
    >>> from ope.logs import ValidationReport
    >>> r = ValidationReport("logs.parquet", rows_read=10, rows_used=8,
    ...                      rejected={"reward_missing": 2}, examples={"reward_missing": (3, 7)})
    >>> r.rows_rejected
    2
    >>> print(r)
    validation report for logs.parquet
      rows read:     10
      rows used:     8
      rows rejected: 2
        reward_missing: 2 (rows 3, 7)
    """

    source: str
    rows_read: int
    rows_used: int
    rejected: dict[str, int] = field(default_factory=dict)
    examples: dict[str, tuple[int, ...]] = field(default_factory=dict)
    dropped: bool = False
    episodes_read: int | None = None
    episodes_used: int | None = None
    rejected_by_column: dict[str, dict[str, int]] = field(default_factory=dict)
    examples_by_column: dict[str, dict[str, tuple[int, ...]]] = field(default_factory=dict)
    columns: tuple[str, ...] = field(default=(), compare=False)
    files_read: int | None = field(default=None, compare=False)
    skipped: tuple[SkippedPath, ...] = field(default=(), compare=False)
    notes: tuple[str, ...] = field(default=(), compare=False)

    @classmethod
    def from_masks(
        cls,
        masks: Mapping[str, np.ndarray],
        n: int,
        source: str,
        *,
        dropped: bool,
        row_offset: int = 0,
    ) -> tuple[ValidationReport, np.ndarray | None]:
        """The report of ``n`` rows given one rejection mask per reason, and the rejected rows.

        Parameters
        ----------
        masks : mapping of str to numpy.ndarray of bool, shape (n,)
            Rows that break each rule (``ope.schema.REJECTION_REASONS``); an
            ``ope.schema.RowMasks`` also names the culprit columns of per-column rules.
        n : int
            Rows read.
        source : str
            Where they came from.
        dropped : bool
            Whether rejected rows are dropped (``on_invalid="drop"``); recorded only when some
            row is rejected.
        row_offset : int, default 0
            Source row number of the first row (example rows are source positions).

        Returns
        -------
        (ValidationReport, numpy.ndarray or None)
            The report and the mask of rejected rows (None when every row passes).

        Examples
        --------
        >>> import numpy as np
        >>> from ope.logs import ValidationReport
        >>> report, bad = ValidationReport.from_masks(
        ...     {"reward_missing": np.array([False, True, False])}, 3, "<Table>", dropped=True,
        ...     row_offset=10)
        >>> report.rows_used, report.examples, bad.tolist()
        (2, {'reward_missing': (11,)}, [False, True, False])
        """
        if not masks:
            return cls(source, n, n), None
        bad = np.zeros(n, dtype=bool)
        rejected: dict[str, int] = {}
        examples: dict[str, tuple[int, ...]] = {}
        for reason, mask in masks.items():  # loop over rules, not rows
            bad |= mask
            rejected[reason] = int(np.count_nonzero(mask))
            examples[reason] = tuple(
                int(r) + row_offset for r in np.flatnonzero(mask)[:EXAMPLE_ROWS]
            )
        used = n - int(np.count_nonzero(bad))
        by_column: dict[str, dict[str, int]] = {}
        examples_by_column: dict[str, dict[str, tuple[int, ...]]] = {}
        for reason, cols in getattr(masks, "by_column", {}).items():  # a loop over columns
            by_column[reason] = {c: int(np.count_nonzero(m)) for c, m in cols.items()}
            examples_by_column[reason] = {
                c: tuple(int(r) + row_offset for r in np.flatnonzero(m)[:EXAMPLE_ROWS])
                for c, m in cols.items()
            }
        return cls(
            source,
            n,
            used,
            rejected,
            examples,
            dropped=dropped,
            rejected_by_column=by_column,
            examples_by_column=examples_by_column,
        ), bad

    @property
    def rows_rejected(self) -> int:
        """Rows read but not used."""
        return self.rows_read - self.rows_used

    @property
    def ok(self) -> bool:
        """True when no row was rejected."""
        return self.rows_rejected == 0 and not self.rejected

    def merge(self, other: ValidationReport, *, row_offset: int = 0) -> ValidationReport:
        """Combine the reports of two consecutive parts of one source.

        ``row_offset`` is added to ``other``'s example row numbers (the rows before it).
        """
        rejected = dict(self.rejected)
        examples = {k: tuple(v) for k, v in self.examples.items()}
        for reason, count in other.rejected.items():
            rejected[reason] = rejected.get(reason, 0) + count
            shifted = tuple(r + row_offset for r in other.examples.get(reason, ()))
            examples[reason] = (examples.get(reason, ()) + shifted)[:EXAMPLE_ROWS]
        by_column = {k: dict(v) for k, v in self.rejected_by_column.items()}
        examples_by_column = {k: dict(v) for k, v in self.examples_by_column.items()}
        for reason, cols in other.rejected_by_column.items():
            counts = by_column.setdefault(reason, {})
            first = examples_by_column.setdefault(reason, {})
            for column, count in cols.items():
                counts[column] = counts.get(column, 0) + count
                shifted = tuple(
                    r + row_offset for r in other.examples_by_column.get(reason, {}).get(column, ())
                )
                first[column] = (first.get(column, ()) + shifted)[:EXAMPLE_ROWS]
        return ValidationReport(
            source=self.source,
            rows_read=self.rows_read + other.rows_read,
            rows_used=self.rows_used + other.rows_used,
            rejected=rejected,
            examples=examples,
            dropped=self.dropped or other.dropped,
            episodes_read=_add_optional(self.episodes_read, other.episodes_read),
            episodes_used=_add_optional(self.episodes_used, other.episodes_used),
            rejected_by_column=by_column,
            examples_by_column=examples_by_column,
            columns=self.columns or other.columns,
            files_read=self.files_read if self.files_read is not None else other.files_read,
            skipped=self.skipped or other.skipped,
            notes=self.notes + tuple(x for x in other.notes if x not in self.notes),
        )

    def failure_message(
        self, what: str = "bandit-log", *, tail: str = "", caveats: Sequence[str] = ()
    ) -> str:
        """The message of the ``ValidationError`` a reader raises for these rejected rows.

        Parameters
        ----------
        what : str, default "bandit-log"
            The kind of rules broken (``"trajectory"``, ``"paired-replay"``, ...).
        tail : str, optional
            Appended to the first line (e.g. where a scan stopped).
        caveats : sequence of str, optional
            Lines shown before the fix (e.g. how far duplicates were checked).

        Examples
        --------
        >>> from ope.logs import ValidationReport
        >>> r = ValidationReport("logs.parquet", 3, 2, {"reward_missing": 1}, {"reward_missing": (2,)})
        >>> print(r.failure_message().splitlines()[0])
        1 of 3 rows of logs.parquet break bandit-log rules:
        """
        for name, text in (("what", what), ("tail", tail)):
            if not isinstance(text, str):
                raise ParameterError(f"`{name}` must be a str; got {describe(text)}.")
        if (
            isinstance(caveats, str)
            or not isinstance(caveats, Sequence)
            or not all(isinstance(c, str) for c in caveats)
        ):
            raise ParameterError(
                f"`caveats` must be a sequence of lines (str); got {describe(caveats)}."
            )
        lines = [
            f"{self.rows_rejected:,} of {self.rows_read:,} rows of {self.source} break "
            f"{what} rules{tail}:",
            str(self),
            "rules broken:",
        ]
        for reason in sorted(self.rejected):
            culprits = sorted(self.rejected_by_column.get(reason, {}))
            where = f" (in {', '.join(culprits)})" if culprits else ""
            lines.append(f"  {reason}: {REJECTION_REASONS[reason]}{where}")
        lines += list(caveats)
        lines.append(
            'Fix the data, or pass on_invalid="drop" to drop these rows (they stay counted in '
            "the .report of the result)."
        )
        return "\n".join(lines)

    def warn_dropped(self, *, stacklevel: int) -> None:
        """Warn (``DroppedRowsWarning``) that the rejected rows were dropped, with the counts.

        ``stacklevel`` counts this method as 1 (as ``warnings.warn`` does for its caller).
        """
        check_positive_int(stacklevel, "stacklevel", example="stacklevel=2", maximum=2**31 - 1)
        reasons = ", ".join(f"{k}: {v:,}" for k, v in sorted(self.rejected.items()))
        warnings.warn(
            f"dropped {self.rows_rejected:,} of {self.rows_read:,} rows of {self.source} "
            f"({reasons}); see .report for the first row numbers of each reason",
            DroppedRowsWarning,
            stacklevel=stacklevel,
        )

    def no_rows_error(self) -> ValidationError:
        """The error for a source left without rows (empty, or every row rejected)."""
        if self.rows_read == 0:
            return ValidationError(
                f"{self.source} holds no rows; there is nothing to evaluate", report=self
            )
        return ValidationError(
            f"every one of the {self.rows_read:,} rows of {self.source} was rejected; nothing "
            f"is left to evaluate:\n{self}",
            report=self,
        )

    def dropped_notes(self) -> list[str]:
        """The notes a result carries about rejected and dropped rows, skipped directory
        entries and what the reader left out (:attr:`notes`; empty when none)."""
        notes = []
        if self.rows_rejected:
            notes.append(
                f"{self.rows_rejected:,} of {self.rows_read:,} rows were rejected and dropped "
                f"before estimation: {dict(self.rejected)}"
            )
        if self.skipped:
            notes.append(self._skipped_text())
        return notes + list(self.notes)

    def _skipped_text(self) -> str:
        shown = "; ".join(s.text() for s in self.skipped[:EXAMPLE_ROWS])
        more = (
            f"; and {len(self.skipped) - EXAMPLE_ROWS} more"
            if len(self.skipped) > EXAMPLE_ROWS
            else ""
        )
        return (
            f"{len(self.skipped)} entr{'y' if len(self.skipped) == 1 else 'ies'} of "
            f"{self.source} {'was' if len(self.skipped) == 1 else 'were'} not read: "
            f"{shown}{more}"
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with stable keys."""
        return {
            "source": self.source,
            "rows_read": self.rows_read,
            "rows_used": self.rows_used,
            "rows_rejected": self.rows_rejected,
            "rejected": dict(self.rejected),
            "examples": {k: list(v) for k, v in self.examples.items()},
            "dropped": self.dropped,
            "episodes_read": self.episodes_read,
            "episodes_used": self.episodes_used,
            "rejected_by_column": {
                reason: {
                    column: {
                        "rows": count,
                        "examples": list(self.examples_by_column.get(reason, {}).get(column, ())),
                    }
                    for column, count in cols.items()
                }
                for reason, cols in self.rejected_by_column.items()
            },
            "columns": list(self.columns),
            "files_read": self.files_read,
            "files_skipped": [s.to_dict() for s in self.skipped],
            "notes": list(self.notes),
        }

    def __str__(self) -> str:
        return self.format()

    def format(self, *, width: int = REPORT_WIDTH) -> str:
        """The text report, with lists of names wrapped at ``width`` characters.

        Examples
        --------
        >>> from ope.logs import ValidationReport
        >>> r = ValidationReport("logs/", 4, 4, columns=tuple(f"feature_{i}" for i in range(12)))
        >>> print(r.format(width=60))
        validation report for logs/
          rows read:     4
          rows used:     4
          rows rejected: 0
          columns (12):  feature_0, feature_1, feature_2, feature_3,
                         feature_4, feature_5, feature_6, feature_7,
                         feature_8, feature_9, feature_10,
                         feature_11
        """
        check_positive_int(width, "width", example="width=88")
        lines = [f"validation report for {self.source}"]
        if self.files_read is not None and (self.files_read > 1 or self.skipped):
            lines.append(f"  files read:    {self.files_read:,}")
        lines += [
            f"  rows read:     {self.rows_read:,}",
            f"  rows used:     {self.rows_used:,}",
            f"  rows rejected: {self.rows_rejected:,}" + (" (dropped)" if self.dropped else ""),
        ]
        if self.episodes_read is not None:
            lines.append(f"  episodes:      {self.episodes_used:,} of {self.episodes_read:,} used")
        for reason, count in sorted(self.rejected.items(), key=lambda kv: (-kv[1], kv[0])):
            rows = ", ".join(str(r) for r in self.examples.get(reason, ()))
            more = ", ..." if count > len(self.examples.get(reason, ())) else ""
            lines.append(f"    {reason}: {count:,} (rows {rows}{more})")
            culprits = self.rejected_by_column.get(reason, {})
            ranked = sorted(culprits.items(), key=lambda kv: (-kv[1], kv[0]))
            for column, n_col in ranked[:EXAMPLE_ROWS]:
                first = self.examples_by_column.get(reason, {}).get(column, ())
                tail = ", ..." if n_col > len(first) else ""
                lines.append(
                    f"      in {column}: {n_col:,} (rows {', '.join(map(str, first))}{tail})"
                )
            if len(ranked) > EXAMPLE_ROWS:
                lines.append(f"      and {len(ranked) - EXAMPLE_ROWS} more columns (see to_dict())")
        if len(self.skipped) == 1:
            lines.append(f"  not read:      {self.skipped[0].text()}")
        elif self.skipped:
            lines.append(f"  not read:      {len(self.skipped)} entries")
            lines += [f"    {s.text()}" for s in self.skipped[:REPORT_MAX_NAMES]]
            if len(self.skipped) > REPORT_MAX_NAMES:
                lines.append(
                    f"    ... and {len(self.skipped) - REPORT_MAX_NAMES} more (see to_dict())"
                )
        for note in self.notes:
            lines += textwrap.wrap(
                note, width, initial_indent="  note: ", subsequent_indent=" " * 8
            )
        if self.columns:
            label = f"  columns ({len(self.columns)}):"
            label = label.ljust(max(len(label) + 1, 17))
            lines += _wrapped(label, summarize_columns(self.columns), width)
        return safe_text("\n".join(lines), keep_newlines=True)  # column names from the data


def _add_optional(a: int | None, b: int | None) -> int | None:
    if a is None and b is None:
        return None
    return (a or 0) + (b or 0)


class _TableLogs:
    """Shared behaviour of the log containers: an Arrow table plus its report."""

    def __init__(self, table: pa.Table, report: ValidationReport) -> None:
        self.table = table
        self.report = report

    @property
    def n(self) -> int:
        """Number of rows used."""
        return self.table.num_rows

    def __len__(self) -> int:
        return self.table.num_rows

    @property
    def columns(self) -> list[str]:
        return list(self.table.column_names)

    def column(self, name: str) -> np.ndarray:
        """One column as a numpy array (zero-copy where Arrow allows; floats as float64)."""
        if not isinstance(name, str) or name not in self.table.column_names:
            raise SchemaError(
                f"`name`: column {name!r:.80} is not in these logs; they have: "
                f"{summarize_columns(self.table.column_names)}"
            )
        col = self.table.column(name)
        if pa.types.is_floating(col.type):
            return col.to_numpy().astype(np.float64, copy=False)
        return col.to_numpy()

    @property
    def target_policies(self) -> list[str]:
        """Names of the candidate policies stored as ``target__<name>`` columns."""
        return [c[len("target__") :] for c in self.table.column_names if c.startswith("target__")]

    def to_pandas(self) -> Any:
        return self.table.to_pandas()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(n={self.n:,}, columns={self.columns}, "
            f"rows_rejected={self.report.rows_rejected:,})"
        )


class BanditLogs(_TableLogs):
    """Validated bandit / recommendation events, one row per decision (docs/guide/logs.md).

    Parameters
    ----------
    table : pyarrow.Table
        The validated rows, with ope's column names and canonical types.
    report : ValidationReport
        How the rows were read.
    dropped_event_ids : pyarrow.Array, optional
        The ``event_id`` of every row dropped under ``on_invalid="drop"`` (rows without an id
        excluded). Readers fill it in; it lets :func:`ope.policies.target_propensities` tell a
        policy table's rows for dropped events (ignored and counted) from rows for events that
        were never logged (an error). Its size is the number of dropped rows.
    unit_roundoff : dict, optional
        Column -> relative rounding error of the type the source stored it in (float16:
        2**-11, float32: 2**-24; absent for float64). Checks that compare two stored
        probabilities (a ``target__`` value with its ``target_dist__`` entry, a distribution's
        row sum with 1) widen their tolerance by it.
    action_features : pyarrow.Table, optional
        One row per action: an ``action`` column and the action's feature columns (an OBD
        campaign's ``item_context.csv``, obp's ``action_context``, a table embedded in the
        file's metadata). DM/DR reward models and policies with action features use it when
        they are given none of their own. None (the default): the logs carry none.
    n_actions : int, optional
        The number of actions the source declares (obp's ``n_actions``), when it declares one;
        it may exceed the number of actions logged.

    Attributes
    ----------
    action_features : pyarrow.Table or None
        As given (see :meth:`with_action_features`).
    n_actions : int or None
        As given.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from ope.logs import BanditLogs, ValidationReport
    >>> t = pa.table({"event_id": [1, 3], "action": [0, 1], "propensity": [0.5, 0.5],
    ...               "reward": [1.0, 0.0]})
    >>> logs = BanditLogs(t, ValidationReport("<Table>", 3, 2, {"reward_missing": 1}, {"reward_missing": (1,)},
    ...                   dropped=True), dropped_event_ids=pa.array([2]))
    >>> logs.n, logs.dropped_event_ids.to_pylist(), logs.action_features
    (2, [2], None)
    """

    def __init__(
        self,
        table: pa.Table,
        report: ValidationReport,
        *,
        dropped_event_ids: pa.Array | None = None,
        unit_roundoff: Mapping[str, float] | None = None,
        action_features: pa.Table | None = None,
        n_actions: int | None = None,
    ) -> None:
        super().__init__(table, report)
        self.unit_roundoff = dict(unit_roundoff or {})
        self.action_features: pa.Table | None = action_features
        self.n_actions: int | None = n_actions
        if dropped_event_ids is not None and not isinstance(dropped_event_ids, pa.Array):
            dropped_event_ids = pa.array(dropped_event_ids)
        self.dropped_event_ids = dropped_event_ids
        self._validated_table: pa.Table | None = None
        self._source_rows: np.ndarray | None = None

    @classmethod
    def from_validated(
        cls,
        table: pa.Table,
        report: ValidationReport,
        *,
        dropped_event_ids: pa.Array | None = None,
        unit_roundoff: Mapping[str, float] | None = None,
        action_features: pa.Table | None = None,
        n_actions: int | None = None,
        source_rows: np.ndarray | None = None,
    ) -> BanditLogs:
        """Logs whose ``table`` has just passed every row rule of ``ope.schema`` (for readers).

        Records that very table object, so that consumers may skip re-checking what the rules
        guarantee (e.g. ``target__`` values in [0, 1]; see :meth:`targets_validated`). The
        constructor never sets it, and the record lapses if ``table`` is replaced (Arrow tables
        are immutable). Parameters are those of the constructor, and ``source_rows`` (a
        scan's batch): the number in the whole source of each of the table's rows
        (:meth:`source_rows`).

        Examples
        --------
        >>> import pyarrow as pa
        >>> from ope.logs import BanditLogs, ValidationReport
        >>> t = pa.table({"action": [0], "propensity": [0.5], "reward": [1.0]})
        >>> BanditLogs.from_validated(t, ValidationReport("<Table>", 1, 1)).targets_validated()
        True
        >>> BanditLogs(t, ValidationReport("<Table>", 1, 1)).targets_validated()
        False
        """
        logs = cls(
            table,
            report,
            dropped_event_ids=dropped_event_ids,
            unit_roundoff=unit_roundoff,
            action_features=action_features,
            n_actions=n_actions,
        )
        logs._validated_table = table
        logs._source_rows = source_rows
        return logs

    def source_rows(self) -> np.ndarray | None:
        """The number in its source of each row, counted from 0 over every row read (those
        dropped as invalid included), when these logs are a batch of a lazy scan
        (:meth:`ope.io.LogScan.to_batches`); None otherwise (row ``i`` is then the source's row
        ``i``). Errors about a batch's rows name them by these numbers."""
        return self._source_rows

    def with_action_features(self, action_features: pa.Table | None) -> BanditLogs:
        """A copy of these logs whose ``action_features`` is ``action_features``.

        The copy shares the rows (Arrow tables are immutable), the report and the record of
        validation (:meth:`targets_validated`); these logs are left as they are.

        Parameters
        ----------
        action_features : pyarrow.Table, pandas.DataFrame or None
            One row per action: an ``action`` column and its feature columns (a DataFrame is
            converted to a table); None drops them.

        Returns
        -------
        BanditLogs

        Raises
        ------
        ParameterError
            When ``action_features`` is neither a table, a DataFrame nor None.
        SchemaError
            When it has no ``action`` column.

        Examples
        --------
        >>> import pyarrow as pa
        >>> from ope.logs import BanditLogs, ValidationReport
        >>> t = pa.table({"action": [0, 1], "propensity": [0.5, 0.5], "reward": [1.0, 0.0]})
        >>> logs = BanditLogs(t, ValidationReport("<Table>", 2, 2))
        >>> items = pa.table({"action": [0, 1], "af_0": [0.1, 0.9]})
        >>> with_items = logs.with_action_features(items)
        >>> with_items.action_features.num_rows, logs.action_features
        (2, None)
        """
        if action_features is not None and not isinstance(action_features, pa.Table):
            import pandas as pd  # a core dependency

            if not isinstance(action_features, pd.DataFrame):
                raise ParameterError(
                    "`action_features` must be a pyarrow.Table or pandas.DataFrame with one row "
                    f"per action (an `action` column and feature columns), or None; got "
                    f"{describe(action_features)}."
                )
            action_features = pa.Table.from_pandas(action_features, preserve_index=False)
        if action_features is not None and "action" not in action_features.column_names:
            raise SchemaError(
                "`action_features` has no `action` column; it has "
                f"{summarize_columns(action_features.column_names)}. Name the column of action "
                "ids `action`."
            )
        out = copy.copy(self)
        out.action_features = action_features
        return out

    def targets_validated(self) -> bool:
        """True when ``table`` is the table a reader validated (see :meth:`from_validated`)."""
        validated = getattr(self, "_validated_table", None)
        return validated is not None and validated is self.table

    # the spellings of earlier releases
    _from_reader = from_validated
    _targets_validated = targets_validated


class Trajectories(_TableLogs):
    """Validated multi-step trajectories, one row per step, sorted by (episode_id, step).

    Every episode has contiguous steps 0, 1, ..., L-1 and ``done`` can be true only at its last
    step. An episode whose last step has ``done = False`` was truncated (the log ends before the
    episode did); its tail value is to be bootstrapped, not taken as zero.

    Episode structure is exposed as flat arrays so that sequential estimators need no groupby:
    episode ``e`` occupies rows ``episode_starts[e]:episode_starts[e + 1]``.
    """

    @cached_property
    def episode_starts(self) -> np.ndarray:
        """Row offsets of the episodes, int64 of length ``n_episodes + 1`` (last = ``n``)."""
        return episode_bounds(self.table.column("episode_id"))

    @property
    def n_episodes(self) -> int:
        """Number of episodes."""
        return int(self.episode_starts.size - 1)

    @property
    def episode_lengths(self) -> np.ndarray:
        """Steps per episode (int64, one per episode)."""
        return np.diff(self.episode_starts)

    @cached_property
    def episode_index(self) -> np.ndarray:
        """The episode number (0 .. n_episodes-1) of every row."""
        return np.repeat(np.arange(self.n_episodes, dtype=np.int64), self.episode_lengths)

    @property
    def episode_ids(self) -> pa.Array:
        """The ``episode_id`` of each episode, in order."""
        col = self.table.column("episode_id")
        return col.take(pa.array(self.episode_starts[:-1])).combine_chunks()

    @cached_property
    def truncated(self) -> np.ndarray:
        """Boolean per episode: True when its last step has ``done = False``."""
        if self.n == 0:
            return np.zeros(0, dtype=bool)
        done = self.table.column("done").take(pa.array(self.episode_starts[1:] - 1))
        return ~done.to_numpy(zero_copy_only=False).astype(bool)


class PairedReplays(_TableLogs):
    """Validated paired replays (counterfactual branches), one row per (pair_id, arm, replicate).

    Every pair has at least one valid row for every arm.
    """

    @property
    def arms(self) -> list[Any]:
        """The distinct arms, sorted."""
        return sorted(pc.unique(self.table.column("arm")).to_pylist())

    @property
    def n_pairs(self) -> int:
        """Number of distinct pairs."""
        return len(pc.unique(self.table.column("pair_id")))


def as_log_table(logs: Any) -> pa.Table:
    """The Arrow table of ``logs``: ``BanditLogs`` (or any log container), a ``pyarrow.Table`` or
    a ``pandas.DataFrame``; anything else is a ParameterError (read files with ope.read_logs)."""
    if isinstance(logs, _TableLogs):
        return logs.table
    if isinstance(logs, pa.Table):
        return logs
    import pandas as pd  # only for the type check; pandas is a core dependency

    if isinstance(logs, pd.DataFrame):
        return pa.Table.from_pandas(logs, preserve_index=False)
    raise ParameterError(
        f"logs must be BanditLogs, a pyarrow.Table or a pandas.DataFrame; got "
        f"{type(logs).__name__}. Read a file first with ope.read_logs(path)."
    )


def require_logs(logs: Any, where: str) -> BanditLogs:
    """``logs`` when it is :class:`BanditLogs`, else a ParameterError naming ``logs`` and
    ``where`` (the function called).

    Policies and learners read validated logs only: a DataFrame read here would be validated with
    the reader's defaults, and rows dropped there would shift every row a policy aligns by
    position (an :class:`~ope.policies.ArrayPolicy`), so the reading is the caller's, once, with
    :func:`ope.read_logs`, whose report says which rows it kept.

    Examples
    --------
    >>> from ope.logs import require_logs
    >>> require_logs([1, 2], "UniformPolicy.propensity")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ope.exceptions.ParameterError: UniformPolicy.propensity: `logs` must be BanditLogs...
    """
    if isinstance(logs, BanditLogs):
        return logs
    raise ParameterError(
        f"{where}: `logs` must be BanditLogs, the validated logs ope.read_logs returns; got "
        f"a {type(logs).__name__}. Read them first: logs = ope.read_logs(data) (a pandas DataFrame, "
        "a pyarrow Table or a path), then pass logs."
    )
