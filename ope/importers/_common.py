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

import contextlib
import dataclasses
import gc
import gzip
import math
import warnings
import zlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ope._dedup import SeenIds
from ope._validation import show_value
from ope.exceptions import DroppedRowsWarning, SchemaError, ValidationError
from ope.logs import EXAMPLE_ROWS, BanditLogs, ValidationReport
from ope.schema import IMPORT_REASON_PREFIXES, REJECTION_REASONS, first_occurrence_duplicates

__all__ = [
    "IMPORT_REJECTION_REASONS",
    "NOT_A_NUMBER",
    "EXCLUDED_REASONS",
    "ChunkValidator",
    "broken_rules",
    "import_failure",
    "lines_before_damage",
    "no_gc",
    "object_fields",
    "reason_text",
    "vw_number",
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


#: A JSON object's fields, each value undecoded (``msgspec.Raw``): the keys of a DSJSON line,
#: looked at without building its values. A key given twice keeps its last value, at the place
#: of its first.
object_fields: Final = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """Collection off while a block of lines is decoded: decoded JSON holds no reference
    cycles, and the collector's passes over the block's many new containers would otherwise
    cost more than the decoding (measured 2x on 1.2 kB DSJSON lines, a third of the time of
    continuous-action lines). Collection is back on (when it was) as the block ends."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


#: What :func:`vw_number` gives for a string VW refuses where it expects a number.
NOT_A_NUMBER: Final[Any] = object()


def vw_number(value: Any) -> Any:
    """``value`` as VW's JSON parser reads it where it expects a number (a label's cost or
    probability, ``p``/``_p``, a ``pdf_value``): anything but a string as it is; the string
    "NaN" in any case as NaN, as its ``_stricmp(str, "NaN")`` compares (ASCII letters only);
    :data:`NOT_A_NUMBER` for any other string, which VW refuses.

    Examples
    --------
    >>> from ope.importers._common import NOT_A_NUMBER, vw_number
    >>> vw_number(0.5), vw_number("nAn")
    (0.5, nan)
    >>> [vw_number(s) is NOT_A_NUMBER for s in ("NaN ", "inf", "")]
    [True, True, True]
    """
    if not isinstance(value, str):
        return value
    if len(value) == 3 and value.isascii() and value.lower() == "nan":
        return math.nan
    return NOT_A_NUMBER


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
        rejected as ``event_id_duplicate`` are described in a note, one per source row: the id
        and the row where it first appeared (:meth:`explain`). The id seen first is found by
        the repeat check's own set of ids (:class:`~ope._dedup.SeenIds`), which keeps each
        id's source row in its hash key (no memory of its own).
    shown_id : str, optional
        The column whose value the note shows as a row's id when the table has it (a CCB slot
        row's ``slate_id``: the EventId of its line, where ``event_id`` is ``"<id>/<slot>"``).
    """

    def __init__(
        self,
        source: str,
        on_invalid: str,
        *,
        unit: str | None = None,
        shown_id: str | None = None,
    ) -> None:
        self.source = source
        self.on_invalid = on_invalid
        self.unit = unit
        self.shown_id = shown_id
        self.report = ValidationReport(source, 0, 0)
        self._seen = SeenIds(lines=unit is not None)
        self._dropped: list[pa.Array] = []
        self.unit_roundoff: dict[str, float] = {}
        #: Schema metadata the importer learns while reading (merged over ``finish``'s).
        self.source_metadata: dict[str, str] = {}
        self._keyed_notes: dict[str, str] = {}
        self._details: dict[str, list[tuple[int, str]]] = {}

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
            repeats, within = self._repeats(table, lines)
            if self.unit is not None:
                self._describe_repeats(table, lines, repeats, within)
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

    def _repeats(self, table: pa.Table, lines: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows of ``table`` whose ``event_id`` an earlier chunk's row had (valid or not), and
        the mask of the rows that repeat an id of an earlier row of ``table``.

        Within a chunk ``read_logs`` rejects every occurrence of an id after its first, valid or
        not; so the first occurrence in this chunk of an id of an earlier chunk is a repeat
        too, and the chunks keep the rows one table would (whatever the chunk size). The ids
        new to the set keep their source rows ``lines`` when the notes name first rows.
        """
        if "event_id" not in table.column_names:
            return np.zeros(0, dtype=np.int64), np.zeros(table.num_rows, dtype=bool)
        eid = table.column("event_id")
        has = ~pc.is_null(eid).to_numpy(zero_copy_only=False)
        within = first_occurrence_duplicates(eid, has)
        rows = np.flatnonzero(has & ~within)
        at = lines if self.unit is not None else None
        if rows.size == table.num_rows:
            hit = self._seen.add_new(SeenIds.as_numpy(eid), lines=at)
        else:
            hit = self._seen.add_new(
                SeenIds.as_numpy(eid.take(pa.array(rows))), lines=None if at is None else at[rows]
            )
        return rows[hit], within

    def _describe_repeats(
        self, table: pa.Table, lines: np.ndarray, repeats: np.ndarray, within: np.ndarray
    ) -> None:
        """Describe the first source rows with rows rejected as ``event_id_duplicate``
        (:meth:`explain`), one each (a CCB line's slot rows share it): the id (escaped, cut;
        the ``shown_id`` column's value when the table has it) and the row where it first
        appeared, in this chunk or (:meth:`~ope._dedup.SeenIds.first_lines`) an earlier one."""
        reason = "event_id_duplicate"
        wanted = EXAMPLE_ROWS - len(self._details.get(reason, ()))
        mask = within.copy()
        mask[repeats] = True
        rows = np.flatnonzero(mask)
        if wanted <= 0 or not rows.size:
            return
        _, first = np.unique(lines[rows], return_index=True)  # a row per source row
        rows = rows[np.sort(first)][:wanted]
        eid = table.column("event_id")
        ids = eid.take(pa.array(rows)).to_pylist()
        column = self.shown_id if self.shown_id in table.column_names else "event_id"
        names = table.column(column).take(pa.array(rows)).to_pylist()
        # each id's first row in this chunk: a repeat of an earlier chunk's id, or its first
        first_here = [pc.index(eid, pa.scalar(x, eid.type)).as_py() for x in ids]
        earlier = set(repeats.tolist())
        cross = [x for x, f in zip(ids, first_here, strict=True) if f in earlier]
        found = iter(
            self._seen.first_lines(SeenIds.as_numpy(pa.array(cross, eid.type))).tolist()
            if cross
            else ()
        )
        details = []
        for row, name, f in zip(rows.tolist(), names, first_here, strict=True):  # at most 5
            at = next(found) if f in earlier else int(lines[f])
            where = f"{self._unit} {at}" if at >= 0 else "an earlier " + self._unit
            details.append((int(lines[row]), f"repeats {_id_text(name)} of {where}"))
        self.explain(reason, details)

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


def _id_text(value: Any) -> str:
    return f"EventId {show_value(value)}"


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


def lines_before_damage(fh: object) -> int | None:
    """The number of whole lines (newlines) a damaged gzip stream decodes to before its
    damage, read again from its start in the pieces each decompression step gives (``read1``:
    nothing decoded is lost to the error); None for a stream that cannot be read again (not
    a local gzip file). Only on the error path: one more decompression of the file."""
    if not isinstance(fh, gzip.GzipFile):
        return None
    newlines = 0
    try:
        fh.seek(0)
        while piece := fh.read1(1 << 16):
            newlines += piece.count(b"\n")
    except (EOFError, zlib.error, gzip.BadGzipFile, OSError):
        pass
    return newlines
