"""What every importer shares: its rejection reasons, and validation through ``ope.read_logs``.

An importer parses its source into Arrow tables of ope's column names, one chunk of source
rows (lines) at a time. Problems only the source format can have (a line that is not JSON, a
``pdrop`` of 1) are found by the importer and counted under the reasons of
:data:`IMPORT_REJECTION_REASONS`; every row that parses goes through :func:`ope.read_logs`, so
the row rules of :mod:`ope.schema` stay the one validation layer. :class:`ChunkValidator` joins
the two into one :class:`~ope.logs.ValidationReport` whose example row numbers are positions in
the *source* (0-based line or CSV row numbers), and checks ``event_id`` across chunks.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ope._dedup import SeenIds
from ope.exceptions import DroppedRowsWarning, SchemaError, ValidationError
from ope.logs import EXAMPLE_ROWS, BanditLogs, ValidationReport
from ope.schema import IMPORT_REASON_PREFIXES, REJECTION_REASONS, first_occurrence_duplicates

__all__ = [
    "IMPORT_REJECTION_REASONS",
    "EXCLUDED_REASONS",
    "ChunkValidator",
    "broken_rules",
    "import_failure",
    "reason_text",
    "warn_dropped_invalid",
]

#: Rejection reasons of the importers (name -> what the rule requires): their entries of the one
#: registry, ``ope.schema.REJECTION_REASONS``.
IMPORT_REJECTION_REASONS: Final[Mapping[str, str]] = {
    k: v for k, v in REJECTION_REASONS.items() if k.startswith(IMPORT_REASON_PREFIXES)
}

#: The column that carries each row's source row number through ``read_logs`` (then dropped).
LINE_COLUMN: Final = "__ope_source_row"
#: How ``read_logs`` names an in-memory table in its messages (a chunk, here).
_CHUNK_NAME: Final = "<Table>"

#: Reasons that exclude a row by the source's own rule rather than mark it invalid: they are
#: counted in the report but never make ``on_invalid="raise"`` raise.
EXCLUDED_REASONS: Final = frozenset(
    {"dsjson_skip_learn", "dsjson_not_object", "dsjson_no_actions", "dsjson_unlabeled"}
)


def reason_text(reason: str) -> str:
    """What the rule named ``reason`` requires (schema reasons and importer reasons)."""
    return REJECTION_REASONS.get(reason, reason)


def _examples(lines: np.ndarray) -> tuple[int, ...]:
    return tuple(int(x) for x in lines[:EXAMPLE_ROWS])


class ChunkValidator:
    """Validate an importer's chunks through ``ope.read_logs`` into one source-numbered report.

    Parameters
    ----------
    source : str
        The source's name in the report.
    on_invalid : {"raise", "drop"}
        As in :func:`ope.read_logs`; rows under :data:`EXCLUDED_REASONS` never raise.
    """

    def __init__(self, source: str, on_invalid: str) -> None:
        self.source = source
        self.on_invalid = on_invalid
        self.report = ValidationReport(source, 0, 0)
        self._seen = SeenIds()
        self._dropped: list[pa.Array] = []
        self.unit_roundoff: dict[str, float] = {}
        #: Schema metadata the importer learns while reading (merged over ``finish``'s).
        self.source_metadata: dict[str, str] = {}

    def add(
        self,
        table: pa.Table,
        lines: np.ndarray,
        rejected: Mapping[str, np.ndarray],
        *,
        n_source: int,
    ) -> pa.Table:
        """Validate one chunk; return its valid rows.

        ``table`` holds the rows that parsed, ``lines[i]`` the source row number of row ``i``;
        ``rejected`` maps importer reasons to the source row numbers they reject; ``n_source``
        is the number of source rows the chunk covers (a CCB line gives several table rows
        and counts once per slot row).
        """
        from ope.io import read_logs

        counts = {k: int(v.size) for k, v in rejected.items() if v.size}
        examples = {k: _examples(np.sort(v)) for k, v in rejected.items() if v.size}
        used = table.slice(0, 0)
        if table.num_rows:
            repeats = self._repeats(table)
            table = table.append_column(LINE_COLUMN, pa.array(lines, type=pa.int64()))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DroppedRowsWarning)
                try:
                    logs = read_logs(table, on_invalid="drop")
                    sub, used = logs.report, logs.table
                    self.unit_roundoff.update(logs.unit_roundoff)
                    if logs.dropped_event_ids is not None and len(logs.dropped_event_ids):
                        self._dropped.append(logs.dropped_event_ids)
                except ValidationError as exc:  # every row rejected: keep its report
                    if exc.report is None:
                        raise
                    sub = exc.report
                except SchemaError as exc:  # say where: the source, not the chunk's table
                    text = str(exc)
                    if not text.startswith(_CHUNK_NAME):
                        raise
                    raise SchemaError(
                        f"{self.source} (its columns as imported under ope's "
                        f"names){text[len(_CHUNK_NAME) :]}"
                    ) from None
            for reason, count in sub.rejected.items():
                counts[reason] = counts.get(reason, 0) + count
                mapped = tuple(int(lines[r]) for r in sub.examples.get(reason, ()))
                examples[reason] = tuple(sorted(examples.get(reason, ()) + mapped))[:EXAMPLE_ROWS]
            if repeats.size:  # ids of earlier chunks: rejected as read_logs rejects repeats
                counts["event_id_duplicate"] = counts.get("event_id_duplicate", 0) + repeats.size
                examples["event_id_duplicate"] = tuple(
                    sorted(
                        examples.get("event_id_duplicate", ()) + _examples(np.sort(lines[repeats]))
                    )
                )[:EXAMPLE_ROWS]
                ids = table.column("event_id").take(pa.array(repeats))
                hit = pc.is_in(used.column("event_id"), value_set=ids.combine_chunks())
                if pc.any(hit).as_py():
                    self._dropped.append(used.column("event_id").filter(hit).combine_chunks())
                    used = used.filter(pc.invert(hit))
            if LINE_COLUMN in used.column_names:
                used = used.drop_columns([LINE_COLUMN])
        part = ValidationReport(
            self.source,
            n_source,
            used.num_rows,
            counts,
            examples,
            dropped=bool(counts) and self.on_invalid == "drop",
        )
        self.report = self.report.merge(part)
        return used

    def _repeats(self, table: pa.Table) -> np.ndarray:
        """Rows of ``table`` whose ``event_id`` an earlier chunk's row had (valid or not).

        Within a chunk ``read_logs`` rejects every occurrence of an id after its first, valid or
        not; so the first occurrence in this chunk of an id of an earlier chunk is a repeat
        too, and the chunks keep the rows one table would (whatever the chunk size).
        """
        if "event_id" not in table.column_names:
            return np.zeros(0, dtype=np.int64)
        eid = table.column("event_id")
        has = ~pc.is_null(eid).to_numpy(zero_copy_only=False)
        rows = np.flatnonzero(has & ~first_occurrence_duplicates(eid, has))
        if rows.size == table.num_rows:
            hit = self._seen.add_new(SeenIds.as_numpy(eid))
        else:
            hit = self._seen.add_new(SeenIds.as_numpy(eid.take(pa.array(rows))))
        return rows[hit]

    def note(self, text: str) -> None:
        """Add what the importer left out of the source, and why, to the report's notes."""
        if text not in self.report.notes:
            self.report = dataclasses.replace(self.report, notes=(*self.report.notes, text))

    def failure(self) -> ValidationError | None:
        """The error to raise under ``on_invalid="raise"`` (None when nothing is invalid)."""
        return import_failure(self.report, self.on_invalid)

    def finish(self, tables: Sequence[pa.Table], metadata: Mapping[str, str]) -> BanditLogs:
        """The validated ``BanditLogs`` of the chunks' valid rows (raises as ``read_logs`` does)."""
        error = self.failure()
        if error is not None:
            raise error
        r = self.report
        warn_dropped_invalid(r, self.on_invalid, stacklevel=4)
        if r.rows_used == 0:
            raise r.no_rows_error()
        table = pa.concat_tables([t for t in tables if t.num_rows] or list(tables[:1]))
        table = table.replace_schema_metadata(
            {**(table.schema.metadata or {}), **_encode(metadata), **_encode(self.source_metadata)}
        )
        dropped = (
            pa.concat_arrays([d.cast(table.column("event_id").type) for d in self._dropped])
            if self._dropped and "event_id" in table.column_names
            else None
        )
        return BanditLogs.from_validated(
            table, r, dropped_event_ids=dropped, unit_roundoff=self.unit_roundoff
        )


def _encode(metadata: Mapping[str, Any]) -> dict[bytes, bytes]:
    return {str(k).encode(): str(v).encode() for k, v in metadata.items()}


def broken_rules(rejected: Mapping[str, int]) -> dict[str, int]:
    """The reasons of ``rejected`` (reason -> rows) that break a rule: all but those of rows
    excluded as Vowpal Wabbit excludes them (:data:`EXCLUDED_REASONS`), which are counted and
    never raise or warn."""
    return {k: v for k, v in rejected.items() if k not in EXCLUDED_REASONS}


def import_failure(report: ValidationReport, on_invalid: str) -> ValidationError | None:
    """The error an importer raises under ``on_invalid="raise"`` when rows of ``report`` break
    its rules (None when none does, or under ``"drop"``): the rows that break them counted
    apart from those excluded as Vowpal Wabbit excludes them (:data:`EXCLUDED_REASONS`)."""
    invalid = broken_rules(report.rejected)
    if on_invalid != "raise" or not invalid:
        return None
    r = report
    # a row may break several rules (each counts it); a row VW excludes is excluded before
    # any rule is checked, under one reason
    excluded = sum(v for k, v in r.rejected.items() if k in EXCLUDED_REASONS)
    n_bad = r.rows_rejected - excluded
    also = f", {excluded:,} more excluded as Vowpal Wabbit excludes them" if excluded else ""
    lines = [
        f"rows of {r.source} break import rules ({n_bad:,} of {r.rows_read:,} rows read{also}):",
        str(r),
        "rules broken:",
    ]
    lines += [f"  {k}: {reason_text(k)}" for k in sorted(invalid)]
    lines.append(
        'Fix the source, or pass on_invalid="drop" (CLI: --on-invalid drop) to drop these '
        "rows (they stay counted in the .report of the result)."
    )
    return ValidationError("\n".join(lines), report=r)


def warn_dropped_invalid(report: ValidationReport, on_invalid: str, *, stacklevel: int) -> None:
    """Under ``on_invalid="drop"``, the ``DroppedRowsWarning`` of ``report`` when rows of it
    broke a rule (rows excluded as Vowpal Wabbit excludes them alone warn of nothing: they are
    counted). ``stacklevel`` counts this function as 1."""
    if report.rows_rejected and on_invalid == "drop" and broken_rules(report.rejected):
        report.warn_dropped(stacklevel=stacklevel + 1)
