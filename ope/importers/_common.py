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
    "shown",
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
    unit : str, optional
        What a source row is called in the notes (``"line"``). When given, the first rows
        rejected as ``event_id_duplicate`` are described in a note: the id and the row where
        it first appeared (:meth:`explain`).
    """

    def __init__(self, source: str, on_invalid: str, *, unit: str | None = None) -> None:
        self.source = source
        self.on_invalid = on_invalid
        self.unit = unit
        self.report = ValidationReport(source, 0, 0)
        self._seen = SeenIds()
        self._dropped: list[pa.Array] = []
        self.unit_roundoff: dict[str, float] = {}
        #: Schema metadata the importer learns while reading (merged over ``finish``'s).
        self.source_metadata: dict[str, str] = {}
        self._keyed_notes: dict[str, str] = {}
        self._details: dict[str, list[tuple[int, str]]] = {}
        # where each id first appeared, until the first repeats are described (None: not kept)
        self._first_rows = _FirstRows() if unit is not None else None

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
            repeats, within, new = self._repeats(table)
            if self._first_rows is not None:
                self._describe_repeats(table, lines, repeats, within, new)
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

    def _repeats(self, table: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rows of ``table`` whose ``event_id`` an earlier chunk's row had (valid or not); the
        mask of the rows that repeat an id of an earlier row of ``table``; the rows of the ids
        no earlier row had (each id's first row).

        Within a chunk ``read_logs`` rejects every occurrence of an id after its first, valid or
        not; so the first occurrence in this chunk of an id of an earlier chunk is a repeat
        too, and the chunks keep the rows one table would (whatever the chunk size).
        """
        if "event_id" not in table.column_names:
            none = np.zeros(0, dtype=np.int64)
            return none, np.zeros(table.num_rows, dtype=bool), none
        eid = table.column("event_id")
        has = ~pc.is_null(eid).to_numpy(zero_copy_only=False)
        within = first_occurrence_duplicates(eid, has)
        rows = np.flatnonzero(has & ~within)
        if rows.size == table.num_rows:
            hit = self._seen.add_new(SeenIds.as_numpy(eid))
        else:
            hit = self._seen.add_new(SeenIds.as_numpy(eid.take(pa.array(rows))))
        return rows[hit], within, rows[~hit]

    def _describe_repeats(
        self,
        table: pa.Table,
        lines: np.ndarray,
        repeats: np.ndarray,
        within: np.ndarray,
        new: np.ndarray,
    ) -> None:
        """Describe the first rows rejected as ``event_id_duplicate`` (:meth:`explain`): the id
        (escaped, cut) and the row where it first appeared; then remember where this chunk's
        new ids appear, until :data:`~ope.logs.EXAMPLE_ROWS` repeats are described."""
        first_rows = self._first_rows
        assert first_rows is not None
        reason = "event_id_duplicate"
        wanted = EXAMPLE_ROWS - len(self._details.get(reason, ()))
        eid = table.column("event_id")
        mask = within.copy()
        mask[repeats] = True
        rows = np.flatnonzero(mask)[:wanted]
        if rows.size:
            ids = eid.take(pa.array(rows)).to_pylist()
            # each id's first row in this chunk: a repeat of an earlier chunk's id, or its first
            first_here = [pc.index(eid, pa.scalar(x, eid.type)).as_py() for x in ids]
            earlier = set(repeats.tolist())
            found = first_rows.find([hash(x) for x, f in zip(ids, first_here) if f in earlier])
            details = []
            for row, x, f in zip(rows.tolist(), ids, first_here, strict=True):  # at most 5 rows
                at = found.pop(0) if f in earlier else int(lines[f])
                first = f"{self._unit} {at}" if at is not None else "an earlier " + self._unit
                details.append((int(lines[row]), f"repeats {_id_text(x)} of {first}"))
            self.explain(reason, details)
        if len(self._details.get(reason, ())) >= EXAMPLE_ROWS:
            self._first_rows = None  # every repeat shown is described: forget the rows
        elif new.size:
            ids = eid.take(pa.array(new)).to_pylist()
            first_rows.add(np.fromiter(map(hash, ids), np.int64, len(ids)), lines[new])

    @property
    def _unit(self) -> str:
        return self.unit or "row"

    def explain(self, reason: str, details: Sequence[tuple[int, str]]) -> None:
        """Say what is wrong in the first source rows rejected for ``reason``, in one note of
        the report: ``details`` are (source row, text) pairs of one chunk in source order; the
        note keeps the first :data:`~ope.logs.EXAMPLE_ROWS` of the source (those the report's
        examples name)."""
        kept = sorted([*self._details.get(reason, ()), *details])[:EXAMPLE_ROWS]
        self._details[reason] = kept
        self.set_note(
            reason, f"{reason}: " + "; ".join(f"{self._unit} {r}: {text}" for r, text in kept)
        )

    def set_note(self, key: str, text: str) -> None:
        """Add a note that is said again as reading goes on (a running count, the first rows
        of a reason): the note of ``key`` replaces the earlier one. These notes follow those of
        :meth:`note`, in the order of their keys, so the notes do not depend on the chunks."""
        old = set(self._keyed_notes.values())
        self._keyed_notes[key] = text
        plain = [n for n in self.report.notes if n not in old]
        keyed = [self._keyed_notes[k] for k in sorted(self._keyed_notes)]
        self.report = dataclasses.replace(self.report, notes=tuple(plain + keyed))

    def note(self, text: str) -> None:
        """Add what the importer left out of the source, and why, to the report's notes."""
        if text not in self.report.notes:
            keyed = set(self._keyed_notes.values())
            plain = [n for n in self.report.notes if n not in keyed]
            rest = [n for n in self.report.notes if n in keyed]
            self.report = dataclasses.replace(self.report, notes=(*plain, text, *rest))

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


#: Longest text of the source (an id, a string value) shown in a note or message: longer ones
#: are cut.
SHOWN_CHARS: Final = 60


def shown(value: Any) -> str:
    """A value of the source as a note or message shows it: quoted and escaped (``repr``:
    control and bidirectional characters as escapes), a string longer than
    :data:`SHOWN_CHARS` cut, with its length.

    Examples
    --------
    >>> from ope.importers._common import shown
    >>> print(shown("a\\x1bb"), shown("x" * 100)[-20:])
    'a\\x1bb' ... (100 characters)
    """
    if isinstance(value, str) and len(value) > SHOWN_CHARS:
        return f"{value[: SHOWN_CHARS - 3]!r}... ({len(value):,} characters)"
    return repr(value)


def _id_text(value: Any) -> str:
    return f"EventId {shown(value)}"


class _FirstRows:
    """Where each id first appeared: (hash of the id, source row) pairs, one pair of arrays per
    chunk (16 bytes per id). Kept only until the first repeats are described; then dropped."""

    def __init__(self) -> None:
        self._hashes: list[np.ndarray] = []
        self._rows: list[np.ndarray] = []

    def add(self, hashes: np.ndarray, rows: np.ndarray) -> None:
        self._hashes.append(hashes)
        self._rows.append(np.asarray(rows, dtype=np.int64))

    def find(self, hashes: list[int]) -> list[int | None]:
        """The row where each id of an earlier chunk (by its hash) first appeared: its one
        entry; None when two ids of its hash are kept (a 64-bit collision: which one is
        unknown)."""
        wanted = np.asarray(hashes, dtype=np.int64)
        found: dict[int, list[int]] = {}
        for h, rows in zip(self._hashes, self._rows, strict=True):  # a loop over chunks
            at = np.flatnonzero(np.isin(h, wanted))
            for k in at.tolist():  # the few matches
                found.setdefault(int(h[k]), []).append(int(rows[k]))
        out: list[int | None] = []
        for x in hashes:  # at most EXAMPLE_ROWS ids
            hits = found.get(x, [])
            out.append(hits[0] if len(hits) == 1 else None)
        return out


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
