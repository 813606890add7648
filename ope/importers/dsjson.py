"""Vowpal Wabbit DSJSON (Decision Service / Azure Personalizer exports) to ``BanditLogs``.

One JSON object per line (``.json`` or ``.json.gz``), read the way VW's DSJSON reader
(``--dsjson``) reads it. A file holds one kind of event, set by its first JSON line:

* **CB** (contextual bandit, ``--cb_adf`` / ``--cb_explore_adf``): one row per line;
* **CCB** (conditional contextual bandit, ``--ccb_explore_adf``; the line has ``_outcomes``
  or ``c._slots``): one row per labeled slot. A CB line in a CCB file is read as a one-slot CCB
  event, as VW's CCB reader does (action ``_label_Action - 1``).

Other kinds are refused with one error naming the kind: continuous actions (``_label_ca`` or
``pdf``; :func:`ope.read_continuous` reads them), slates (``_slot_id`` in ``c._multi``), and
VW's plain JSON example format (``--json``: ``_label``/``_multi`` at the top level, no ``c``).
A later line of another kind than the file's is rejected (``dsjson_kind_mismatch``).

CB fields
=========

========================  =====================================================================
DSJSON                    ope column
========================  =====================================================================
``EventId`` (string)      ``event_id``; when absent ``"<file name>:<k>"`` with ``k`` the
                          0-based line number (the report's row number), stable across runs
``Timestamp`` (string)    ``timestamp`` (kept as written)
``_labelIndex``           ``action`` (0-based index into ``c._multi``). VW attaches the label to
                          action ``_labelIndex`` and never reads ``_label_Action`` in ADF mode,
                          so ``_labelIndex`` wins when the two disagree; a labeled line without
                          it is rejected (``dsjson_label_index_missing``: VW would put the label
                          on the shared example and not learn from it)
``_label_probability``    ``propensity``
``_label_cost``           ``reward = -_label_cost`` (``"NaN"`` is read as NaN, as VW does)
``a``                     the logged action ids (1-based), required: VW skips a line without
                          them (``dsjson_no_actions``, counted, not an error)
``p`` or ``_p``           ``logging_distribution``: ``p[i]`` is the probability of ``a[i]``,
                          scattered to candidate order (``p[i]`` at ``a[i] - 1``); the later of
                          ``p``/``_p`` in the line wins (VW's rule). VW never learns from
                          ``a``/``p``, so the file's first row decides: when its ``a``/``p`` form
                          a distribution over ``c._multi`` (ids once each, entries in [0, 1]
                          summing to 1, ``p`` of the logged action equal to
                          ``_label_probability``) the file has the column and a later row
                          without one is ``dsjson_a_p_mismatch``; otherwise it has none. An
                          entry ``"NaN"`` reads as NaN, as VW reads it: no distribution (a
                          later row's ``dsjson_a_p_mismatch`` says so in a note)
``c._multi``              ``candidates = [0, ..., K-1]`` (K actions)
``pdrop``                 ``weight = 1 / (1 - pdrop)`` (1 when absent)
``_skipLearn: true``      excluded, counted under ``dsjson_skip_learn``
========================  =====================================================================

Label keys are matched as VW's DSJSON reader matches them: ``_label`` exactly, the rest in any
case (``_label_COST``, ``_label_Probability``, ``_labelINDEX``, in ``_outcomes`` too;
``_LABEL_cost`` is no label key for VW, nor for ope). A ``_label_<property>`` key of a property
VW does not know (``_label_foo``, ``_label_Index``) makes VW refuse the line, and ope rejects
it (``dsjson_field_type``, with a note); the simple label's ``Label``, ``Initial`` and
``Weight`` are accepted and not read. When a line holds a key twice, in two spellings or the
same one, the last wins, as VW reads the keys in order and overwrites.

CCB fields
==========

Each entry ``i`` of ``_outcomes`` labels slot ``i`` (``c._slots[i]``): ``_a`` (a 0-based action
index or a list of them, the chosen one first) and ``_p`` (its probability, or a list aligned
with ``_a``; ``"NaN"`` reads as NaN), ``_label_cost``. A row per labeled slot: ``slate_id`` =
the event id, ``position`` = ``i``, ``event_id`` = ``"<event id>/<i>"``, ``action = _a[0]``,
``propensity = _p[0]``, ``reward = -_label_cost``, ``weight`` from ``pdrop``. VW ignores the
slots' ``_id``, and so does ope. The rest of ``_a``/``_p`` is the logger's ranking of the
actions left for the slot, not always a full distribution, so CCB rows carry no
``candidates``/``logging_distribution``. A slot without a logged action (an outcome without
``_a``/``_p``, or no outcome: slots after the last one, or ``c._slots`` without ``_outcomes``)
is an unlabeled row (``dsjson_unlabeled``, counted per slot); a line with neither slots nor
outcomes is one. ``_a`` and ``_p`` of different lengths, an index outside ``c._multi`` or more
outcomes than slots reject the line (``dsjson_outcome_malformed``, the note says which). The
report's rows are then slots, plus one per line rejected whole; a note says how the lines read
and the rows add up.

Ignored, as VW's CB/CCB readers ignore them: ``Version``, ``VWState``, ``_original_label_cost``,
``_ba``, and ``o`` (the observations only VW's ``--experimental_igl`` reads: an IGL file imports
as the CB events ``--cb_explore_adf`` learns from, with their ``_label_cost``).

Lines
=====

Lines are numbered from 0 (report rows are these numbers). Whitespace-only lines are skipped
uncounted; a line that does not start with ``{`` is skipped by VW and counted here under
``dsjson_not_object`` (not an error). A line that is not valid JSON (truncated, a lone
surrogate escape, invalid UTF-8 in a field ope reads, a bare ``NaN``, nesting too deep to
decode) is ``dsjson_bad_json``; a field of the wrong JSON type (a numeric ``EventId``, a string
``pdrop``, a number that overflows a double) is ``dsjson_field_type``, as VW refuses such
lines. For the first lines of these reasons (and of ``dsjson_outcome_malformed``), a note says
where and what: the parser's message with the column (1-based, in characters) and byte offset
where it stopped, or the field of the wrong type. Bytes that are not UTF-8 in fields ope does
not read (the features under ``c``) keep the row, as VW hashes them unchecked; a note counts
such lines and locates the first. The first repeats of an ``EventId`` (``event_id_duplicate``)
are named in a note with the line where the id first appeared. A line longer than
``max_line_bytes`` (:data:`MAX_LINE_BYTES`, 32 MiB) is rejected (``dsjson_line_too_long``)
without being held in memory. UTF-16/32 files and damaged gzip streams are a
:class:`~ope.exceptions.DataFileError`.

The file is read in blocks of at most ``chunk_bytes`` bytes and ``chunk_lines`` lines, so memory
is bounded by the chunk whatever the file or line length; :func:`iter_dsjson` yields the
validated chunks and :func:`import_dsjson` writes them to parquet (``ope import dsjson``), with
the same columns, rows and metadata as :func:`read_dsjson`. Each line is decoded once by
``msgspec`` into a typed record naming only these fields (the features under ``c`` are skipped
without being built; only the number of entries of ``c._multi`` is kept): a plain CB line with a
strict record (which refuses any top-level key it does not name), any other line again with a
permissive one and then resolved line by line. The
columns are built and checked with numpy/Arrow and validated by :func:`ope.read_logs` chunk by
chunk. A terminal shows a progress bar (bytes read) on stderr.

With ``workers`` processes (:data:`DEFAULT_WORKERS`, at most the CPUs available), the first
block (1 MiB) is parsed here and, once it has set the file's kind and columns, the next blocks
of at least 1 MiB are parsed by the workers (which read a plain file's blocks themselves) while
this process validates and writes the parsed ones in file order, with at most ``workers + 1``
blocks in flight. The rows, line numbers and report do not depend on ``workers`` or on the
chunk sizes (an ``EventId`` of an earlier chunk's row, valid or not, is a repeat, as within one
table).
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import dataclasses
import gzip
import io
import itertools
import json
import math
import multiprocessing
import operator
import os
import re
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import IO, Annotated, Any, Final, cast

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ope._progress import progress
from ope._validation import check_choice, check_positive_int, show_value
from ope.exceptions import DataFileError, ParameterError, ValidationError
from ope.importers._common import (
    NOT_A_NUMBER,
    ChunkValidator,
    lines_before_damage,
    no_gc,
    object_fields,
    vw_number,
)
from ope._paths import UTF8_BOM, locate_input
from ope.logs import EXAMPLE_ROWS, BanditLogs, ValidationReport
from ope.schema import distribution_faults, propensity_disagrees

__all__ = [
    "read_dsjson",
    "iter_dsjson",
    "import_dsjson",
    "DSJSON_SCHEMA",
    "DSJSON_METADATA",
    "DEFAULT_CHUNK_LINES",
    "DEFAULT_CHUNK_BYTES",
    "MAX_CHUNK_BYTES",
    "MAX_LINE_BYTES",
    "DEFAULT_WORKERS",
]

#: Lines per chunk at most. Each chunk is one ``read_logs`` validation and one parquet row group;
#: 50,000 lines of ~1.2 kB are ~60 MB of text, within :data:`DEFAULT_CHUNK_BYTES`' order.
DEFAULT_CHUNK_LINES: Final[int] = 50_000

#: Bytes read per block (the other bound of a chunk): 16 MiB keeps a chunk's decoded columns
#: within a few tens of MB whatever the line length.
DEFAULT_CHUNK_BYTES: Final[int] = 16 * 1024 * 1024

#: Largest ``chunk_bytes`` accepted: a block is read into one buffer of that size, so a larger
#: one (``chunk_bytes=2**40``) would be a MemoryError, not a faster import.
MAX_CHUNK_BYTES: Final[int] = 1024 * 1024 * 1024

#: Worker processes that parse blocks in parallel (at most the CPUs this process may use). The
#: first blocks, up to the one that sets the file's kind and columns, are parsed in this process;
#: then the workers parse the next blocks while this process validates (and writes) in order.
DEFAULT_WORKERS: Final[int] = 2

#: The smallest block worth a worker (bytes): smaller ones cost more to hand over than to parse.
_POOL_MIN_BYTES = 1 << 20

#: With workers, the first block read (bytes): small, so that the file's kind and columns are
#: known (and the workers can start) early.
_FIRST_BYTES = 1 << 20

#: Longest line read (bytes, without the newline). Personalizer events are kilobytes; a line of
#: 32 MiB already decodes to a few hundred MB of Python objects at worst, so longer lines are
#: rejected (``dsjson_line_too_long``) and skipped in blocks without being held whole.
MAX_LINE_BYTES: Final[int] = 32 * 1024 * 1024

#: The Arrow schema of every column an imported DSJSON table can have. A CB file has
#: ``candidates`` (and ``logging_distribution`` when its first row has a usable ``a``/``p``);
#: a CCB file has ``slate_id`` and ``position`` instead; ``features_json`` only with
#: ``features=True``. ``timestamp`` is null where a line has none.
DSJSON_SCHEMA: Final[pa.Schema] = pa.schema(
    [
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
        ("features_json", pa.string()),
    ]
)

_KIND_COLUMNS: Final = {
    "cb": ("candidates", "logging_distribution"),
    "ccb": ("slate_id", "position"),
}


def _schema(kind: str | None, features: bool, distribution: bool | None) -> pa.Schema:
    """The columns of a chunk of a file of ``kind`` (CB when not known yet)."""
    drop = set(_KIND_COLUMNS["ccb" if kind != "ccb" else "cb"])
    if kind != "ccb" and not distribution:
        drop.add("logging_distribution")
    if not features:
        drop.add("features_json")
    return pa.schema([f for f in DSJSON_SCHEMA if f.name not in drop])


#: What the imported columns mean, stored in the table's schema metadata (plus
#: ``ope.dsjson_kind``: ``cb`` or ``ccb``).
DSJSON_METADATA: Final = {
    "ope.source_format": "dsjson",
    "ope.propensity": "P(logged action | context) of the logging policy (_label_probability); "
    "CCB: P(action at this slot | slot context, earlier slots) (_p[0])",
    "ope.weight": "1/(1 - pdrop): the sampling weight of the event",
    "ope.event_id": "EventId; without one '<file name>:<0-based line>'; CCB: '<id>/<slot>'",
}

_FIELD = msgspec.field


# ------------------------------------------------------------------------------------------
# the typed line records: decoding skips every field not named here without building it
# ------------------------------------------------------------------------------------------
#: Whole numbers ope reads (``_labelIndex``, action ids) stay far inside int64.
_Int = Annotated[int, msgspec.Meta(ge=-(2**62), le=2**62)]
_Index = Annotated[int, msgspec.Meta(ge=0, le=2**62)]


class _Item(msgspec.Struct, gc=False):
    slot_id: Any = _FIELD(default=None, name="_slot_id")


class _Slot(msgspec.Struct, gc=False):
    pass


class _C(msgspec.Struct, gc=False):
    multi: list[_Item] | None = _FIELD(default=None, name="_multi")
    slots: list[_Slot] | None = _FIELD(default=None, name="_slots")


#: A probability or a list of them as VW reads one (``p``, ``_p``): numbers, and the string
#: "NaN" (any case), which VW reads as NaN; another string is refused (``dsjson_field_type``).
_Probs = float | str | list[float | str]


class _Outcome(msgspec.Struct, gc=False):
    cost: float | str | None = _FIELD(default=None, name="_label_cost")
    a: _Int | list[_Int] | None = _FIELD(default=None, name="_a")
    p: _Probs | None = _FIELD(default=None, name="_p")


class _Line(msgspec.Struct, gc=False):
    """Every field ope reads from a line, with every JSON type VW accepts for it."""

    event_id: str | None = _FIELD(default=None, name="EventId")
    timestamp: str | None = _FIELD(default=None, name="Timestamp")
    cost: float | str | None = _FIELD(default=None, name="_label_cost")
    prob: float | str | None = _FIELD(default=None, name="_label_probability")
    action: float | None = _FIELD(default=None, name="_label_Action")
    index: _Index | None = _FIELD(default=None, name="_labelIndex")
    a: _Int | list[_Int] | None = None
    p: _Probs | None = None
    pdrop: float | None = None
    skip: bool | None = _FIELD(default=None, name="_skipLearn")
    c: _C | None = None
    outcomes: list[_Outcome] | None = _FIELD(default=None, name="_outcomes")
    p_alt: _Probs | None = _FIELD(default=None, name="_p")
    label_ca: Any = _FIELD(default=None, name="_label_ca")
    pdf: Any = None
    label: Any = _FIELD(default=None, name="_label")
    multi_top: Any = _FIELD(default=None, name="_multi")


class _FastItem(msgspec.Struct, gc=False):
    slot_id: None = _FIELD(default=None, name="_slot_id")


class _FastC(msgspec.Struct, gc=False):
    """``c`` of a plain CB line: its ``_multi`` actions, no ``_slots``, and none of VW's label
    keys at its top level, which VW reads as the line's label there too: a ``c`` with one (not
    null) fails the plain decoding, and the line is then checked by
    :func:`_no_label_under_c`. Such a key in an action or a namespace is not looked for on a
    plain CB line (the fields in every action cost a fifth of the decoding, a search of every
    line's bytes a fifth of the import); lines decoded key by key are searched whole."""

    label: None = _FIELD(default=None, name="_label")
    label_cost: None = _FIELD(default=None, name="_label_cost")
    label_probability: None = _FIELD(default=None, name="_label_probability")
    label_action: None = _FIELD(default=None, name="_label_Action")
    label_index: None = _FIELD(default=None, name="_labelIndex")
    label_ca: None = _FIELD(default=None, name="_label_ca")
    multi: list[_FastItem] | None = _FIELD(default=None, name="_multi")
    slots: None = _FIELD(default=None, name="_slots")


class _FastLine(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    """A plain CB line: decoding fails on anything else (another kind, a string label value, a
    scalar ``a``, and any top-level key not named here, so every other spelling of a
    ``_label_*`` key), which then goes through :class:`_Line`."""

    event_id: str | None = _FIELD(default=None, name="EventId")
    timestamp: str | None = _FIELD(default=None, name="Timestamp")
    cost: float | None = _FIELD(default=None, name="_label_cost")
    prob: float | None = _FIELD(default=None, name="_label_probability")
    action: float | None = _FIELD(default=None, name="_label_Action")
    index: _Index | None = _FIELD(default=None, name="_labelIndex")
    a: list[_Int] | None = None
    p: list[float] | None = None
    pdrop: float | None = None
    skip: bool | None = _FIELD(default=None, name="_skipLearn")
    c: _FastC | None = None
    outcomes: None = _FIELD(default=None, name="_outcomes")
    p_alt: None = _FIELD(default=None, name="_p")
    label_ca: None = _FIELD(default=None, name="_label_ca")
    pdf: None = None
    label: None = _FIELD(default=None, name="_label")
    multi_top: None = _FIELD(default=None, name="_multi")
    # the bookkeeping VW's DSJSON writers add, skipped unread (VW ignores them in CB mode)
    version: msgspec.Raw = _FIELD(default=msgspec.Raw(), name="Version")
    vw_state: msgspec.Raw = _FIELD(default=msgspec.Raw(), name="VWState")
    o: msgspec.Raw = _FIELD(default=msgspec.Raw())
    original_cost: msgspec.Raw = _FIELD(default=msgspec.Raw(), name="_original_label_cost")
    baseline: msgspec.Raw = _FIELD(default=msgspec.Raw(), name="_ba")


_DECODE = msgspec.json.Decoder(_Line).decode
_FAST = msgspec.json.Decoder(_FastLine).decode

#: The CB fields the columnar path reads, in this order.
_CB_NAMES: Final = (
    "event_id",
    "timestamp",
    "cost",
    "prob",
    "index",
    "a",
    "p",
    "pdrop",
    "skip",
    "c",
)
_CB_GET: Final = attrgetter(*_CB_NAMES)
_CB_FIELDS: Final = tuple(attrgetter(f) for f in _CB_NAMES)
_MULTI: Final = attrgetter("multi")


class _Kind:
    CB: Final = "cb"
    CCB: Final = "ccb"


def _p_is_distribution(
    a_arr: pa.Array, p_arr: pa.Array, idx: np.ndarray, prob: np.ndarray, n: int
) -> np.ndarray:
    """Per row, whether ``p`` is a probability distribution by the rules read_logs applies to
    the ``logging_distribution`` it becomes (the same functions,
    :func:`ope.schema.distribution_faults` and :func:`ope.schema.propensity_disagrees`: the
    values are float64, so without their widening for narrower storage): entries in [0, 1]
    summing to 1, and the entry for the logged action (``a`` equal to ``_labelIndex + 1``)
    equal to ``_label_probability`` where that probability is in (0, 1]. Whether ``a`` and
    ``p`` line up is the caller's check."""
    p_flat = pc.list_flatten(p_arr).to_numpy(zero_copy_only=False).astype(np.float64)
    p_par = pc.list_parent_indices(p_arr).to_numpy(zero_copy_only=False).astype(np.int64)
    with np.errstate(invalid="ignore"):
        out_of_range, not_normalized = distribution_faults(p_flat, p_par, n)
    ok = ~out_of_range & ~not_normalized
    # the p entry of each a entry: the same position in the row (where the row has one)
    a_flat = pc.list_flatten(a_arr).to_numpy(zero_copy_only=False)
    a_par = pc.list_parent_indices(a_arr).to_numpy(zero_copy_only=False).astype(np.int64)
    a_start = np.asarray(a_arr.offsets)[:-1] - a_arr.offsets[0].as_py()
    p_start = np.asarray(p_arr.offsets)[:-1] - p_arr.offsets[0].as_py()
    p_len = np.diff(np.asarray(p_arr.offsets))
    pos = np.arange(a_flat.size) - a_start[a_par]
    logged = np.flatnonzero((a_flat == idx[a_par] + 1) & (pos < p_len[a_par]))
    rows = a_par[logged]
    d, pr = p_flat[p_start[rows] + pos[logged]], prob[rows]
    ok[rows[propensity_disagrees(pr, d)]] = False
    # a p without an entry for the logged action gives it probability 0
    missing = np.bincount(rows, minlength=n) == 0
    with np.errstate(invalid="ignore"):
        ok &= ~(missing & (prob > 0.0) & (prob <= 1.0))
    return ok


def _kind_error(kind: str, name: str, line: int) -> DataFileError:
    what = {
        "continuous": "continuous-action DSJSON (`_label_ca`/`pdf`) is not a discrete bandit "
        "log: read it with ope.read_continuous or evaluate it with `ope continuous FILE`",
        "slates": "slates DSJSON (`_slot_id` in `c._multi`) is not supported yet: ope's slate "
        "estimators read slate logs (ope.slate_logs), which this importer does not build",
        "json": "this is Vowpal Wabbit's plain JSON example format (`--json`: `_label`/`_multi` "
        "at the top level, no `c`), not DSJSON (`--dsjson`)",
    }[kind]
    return DataFileError(
        f"{what} (line {line} of {name}, the first event, sets the file's kind). "
        "ope imports CB and CCB DSJSON."
    )


def _line_kind(obj: _Line) -> str:
    """The kind of a decoded line: cb, ccb, continuous, slates or json."""
    if obj.label_ca is not None or obj.pdf is not None:
        return "continuous"
    c = obj.c
    if c is not None and c.multi is not None and any(it.slot_id is not None for it in c.multi):
        return "slates"
    if c is None and (obj.multi_top is not None or obj.label is not None):
        return "json"
    if obj.outcomes is not None or (c is not None and c.slots is not None):
        return _Kind.CCB
    return _Kind.CB


# ------------------------------------------------------------------------------------------
# reading: bounded blocks of whole lines
# ------------------------------------------------------------------------------------------
@dataclass
class _Block:
    """Whole lines from line ``start`` on: a list, or (the fast path) their bytes joined."""

    start: int  # line number of the first line
    lines: Sequence[bytes | None] | None = None  # None entries: a line over the size limit
    data: bytes | None = None  # when ``lines`` is None: the lines joined by b"\n"
    path: str | None = None  # when ``data`` is None too: ``nbytes`` bytes of this plain
    offset: int = 0  # file from ``offset`` (a worker reads them itself: no copy
    nbytes: int = 0  # through the pipe); 0 for ``lines``

    def split(self) -> Sequence[bytes | None]:
        if self.lines is not None:
            return self.lines
        data = self.data
        if data is None:
            assert self.path is not None
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read(self.nbytes)
            if len(data) != self.nbytes:
                raise DataFileError(
                    f"{self.path} changed while it was being read (line "
                    f"{self.start}); import it again once it is complete"
                )
        return data.split(b"\n")


def _count_lines(data: bytes, end: int) -> int:
    """Lines in ``data[:end]`` (newlines + 1), counted with numpy (3x faster than
    bytes.count) in pieces of :data:`_COUNT_PIECE` bytes (no block-sized temporary to page in)."""
    view = np.frombuffer(data, dtype=np.uint8, count=end)
    return (
        sum(
            int(np.count_nonzero(view[i : i + _COUNT_PIECE] == _NEWLINE))
            for i in range(0, end, _COUNT_PIECE)
        )
        + 1
    )


_COUNT_PIECE: Final = 1 << 16


_NEWLINE: Final = ord("\n")


def _open(path: str | os.PathLike[str]) -> tuple[IO[bytes], int | None, str, str | None]:
    """(binary stream, byte size when known and uncompressed, display name, the local path of
    a plain file)."""
    found = locate_input(path, what="DSJSON file", directories=False, argument="path")
    name = os.path.basename(str(found.name).rstrip("/")) or str(found.name)
    if found.filesystem is None:
        try:  # a file the system will not read (permissions, EIO): the path and the reason
            with open(found.path, "rb") as fh:
                magic = fh.read(2)
            if magic[:2] == b"\x1f\x8b":
                return cast(IO[bytes], gzip.open(found.path, "rb")), None, name, None
            return open(found.path, "rb"), os.path.getsize(found.path), name, str(found.path)  # noqa: SIM115
        except OSError as exc:
            raise DataFileError(
                f"cannot read DSJSON file {found.path}: {exc.strerror or exc}"
            ) from None
    fs = found.filesystem
    try:
        with fs.open_input_stream(found.path) as fh:
            magic = bytes(fh.read(2))
        compression = "gzip" if magic[:2] == b"\x1f\x8b" else None
        return (
            io.BufferedReader(fs.open_input_stream(found.path, compression=compression)),
            None,
            name,
            None,
        )
    except (pa.ArrowException, OSError) as exc:
        if isinstance(exc, DataFileError):
            raise
        raise DataFileError(f"cannot read DSJSON file {found.name}: {exc}") from None


def _check_encoding(magic: bytes, name: str) -> None:
    """A UTF-16/32 file (a byte-order mark, or NUL bytes among the first four) is refused."""
    if magic[:2] in (b"\xff\xfe", b"\xfe\xff") or (len(magic) >= 2 and b"\x00" in magic[:4]):
        raise DataFileError(
            f"{name} is UTF-16 or UTF-32 encoded (it starts with {magic[:4]!r}); DSJSON is "
            "UTF-8, one JSON object per line. Convert it, e.g. `iconv -f UTF-16 -t UTF-8`."
        )


def _read(fh: IO[bytes], n: int, name: str, line: int) -> bytes:
    try:
        return fh.read(n)
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        whole = lines_before_damage(fh)
        if whole is None:  # a stream that cannot be read again: where this read started
            where = f"the damage is after line {line}"
        elif whole == 0:
            where = "no line decodes before the damage"
        else:
            where = (
                f"lines 0 to {whole - 1:,} decode, and line {whole:,} is cut by the damage; "
                f"`zcat {name} | head -n {whole}` keeps the lines that decode"
            )
        raise DataFileError(
            f"{name} is a damaged or truncated gzip stream: {where} ({exc}). Re-export or "
            "re-download the file."
        ) from None
    except (pa.ArrowException, OSError) as exc:
        raise DataFileError(f"cannot read {name} (after line {line}): {exc}") from None


def _blocks(
    fh: IO[bytes],
    name: str,
    chunk_lines: int,
    chunk_bytes: int,
    max_line: int,
    bar: Any,
    path: str | None = None,
    *,
    unsplit: bool = False,
    first_bytes: int | None = None,
) -> Iterator[_Block]:
    """Whole lines in blocks of at most ``chunk_bytes`` (plus one line) and ``chunk_lines``.

    With ``unsplit``, a block of whole lines is yielded as one bytes object for its parser (a
    worker) to split; with ``path`` too (``fh`` reads that plain file from its start) as its
    place in the file, for its parser to read again. The first read is of ``first_bytes``
    (default ``chunk_bytes``).
    """
    line = 0
    tail = b""
    skipping = False  # inside a line over the limit: drop bytes until its newline
    first = True
    pos = 0  # the file offset after data
    while True:
        size = chunk_bytes if pos or first_bytes is None else first_bytes
        # the first read holds the 4 bytes the encoding check and the byte-order mark need
        data = _read(fh, max(size, 4) if first else size, name, line)
        at, pos = pos, pos + len(data)
        bar.update(len(data) / 1e6)
        if first:
            _check_encoding(data[:4], name)
            first = False
            if data.startswith(UTF8_BOM):  # not part of the first line: skipped
                data = data[len(UTF8_BOM) :]
                at += len(UTF8_BOM)
        if not data:
            if skipping:
                yield _Block(line, lines=[None])
            elif tail:
                yield from _split(line, [tail], chunk_lines)
            return
        if unsplit and not skipping and len(tail) + len(data) <= max_line:
            # no line can be over the limit: pass the whole lines on unsplit (the worker splits)
            end = data.rfind(b"\n")
            if end < 0:
                tail += data
                continue
            n = _count_lines(data, end)  # the tail holds no newline
            if n > chunk_lines:
                yield from _split(line, (tail + data[:end]).split(b"\n"), chunk_lines)
            elif path is not None:
                yield _Block(line, path=path, offset=at - len(tail), nbytes=len(tail) + end)
            else:
                yield _Block(
                    line, data=tail + data[:end] if tail else data[:end], nbytes=len(tail) + end
                )
            tail = data[end + 1 :]
            line += n
            continue
        lines = data.split(b"\n")
        if skipping:  # the first piece ends the line over the limit
            if len(lines) == 1:
                continue
            yield _Block(line, lines=[None])
            line += 1
            skipping = False
            del lines[0]
        elif tail:
            lines[0] = tail + lines[0]
        tail = lines.pop()  # the unfinished last line (b"" at "\n")
        if len(tail) > max_line:
            skipping, tail = True, b""
        kept: Sequence[bytes | None] = lines  # None: a line over the limit
        if (
            lines
            and (len(data) > max_line or len(lines[0]) > max_line)
            and max(map(len, lines)) > max_line
        ):
            kept = [None if len(x) > max_line else x for x in lines]
        if kept:
            yield from _split(line, kept, chunk_lines)
            line += len(kept)


def _split(start: int, lines: Sequence[bytes | None], chunk_lines: int) -> Iterator[_Block]:
    for i in range(0, len(lines), chunk_lines):
        yield _Block(start + i, lines=lines[i : i + chunk_lines])


# ------------------------------------------------------------------------------------------
# parsing a chunk
# ------------------------------------------------------------------------------------------
@dataclass
class _State:
    """What carries from chunk to chunk: the file's name and kind."""

    name: str
    features: bool
    kind: str | None = None
    distribution: bool | None = None  # CB: whether the file carries logging_distribution
    decided_at: int | None = None  # the line whose a/p decided ``distribution``
    p_ignored_at: int | None = None  # without it: the first kept line whose `p` is not kept

    @property
    def schema(self) -> pa.Schema:
        return _schema(self.kind, self.features, self.distribution)

    @property
    def settled(self) -> bool:
        """Whether the kind and columns are known: no later block changes the state, so blocks
        can be parsed independently (in worker processes)."""
        return self.kind == _Kind.CCB or (self.kind == _Kind.CB and self.distribution is not None)


@dataclass
class _Parts:
    """One chunk's output: tables of rows, their source lines, rejected lines by reason, what
    is wrong in the first rejected lines of a reason, and the counts of :class:`_Counts`."""

    tables: list[pa.Table] = field(default_factory=list)
    lines: list[np.ndarray] = field(default_factory=list)
    rejected: dict[str, list[np.ndarray]] = field(default_factory=dict)
    details: dict[str, list[tuple[int, str]]] = field(default_factory=dict)
    counts: _Counts = field(default_factory=lambda: _Counts())

    def reject(self, reason: str, lines: Any, detail: str | None = None) -> None:
        """Reject ``lines`` (one line or an array) for ``reason``; ``detail``: what is wrong in
        the (one) line, kept for the first :data:`~ope.logs.EXAMPLE_ROWS` lines."""
        arr = np.asarray(lines, dtype=np.int64).reshape(-1)
        if arr.size:
            self.rejected.setdefault(reason, []).append(arr)
            self.counts.rows += arr.size
            if detail is not None:
                self.detail(reason, int(arr[0]), detail)

    def detail(self, key: str, line: int, text: str) -> None:
        kept = self.details.setdefault(key, [])
        if len(kept) < EXAMPLE_ROWS:
            kept.append((line, text))

    def add(self, table: pa.Table, lines: np.ndarray) -> None:
        if table.num_rows:
            self.tables.append(table)
            self.lines.append(lines)
            self.counts.rows += table.num_rows


@dataclass
class _Counts:
    """What a chunk (or the file so far) read, in the units the report's lines speak of."""

    rows: int = 0  # the report's rows: lines for CB; CCB: slots, and lines rejected whole
    lines: int = 0  # lines read (not whitespace-only)
    slots: int = 0  # CCB: slot rows (labeled or not) of the lines split into slots
    split: int = 0  # CCB: the lines split into slots
    not_utf8: int = 0  # lines kept whose bytes are not all UTF-8 (in fields ope does not read)

    def __iadd__(self, other: _Counts) -> _Counts:
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        return self


def _parse_block(block: _Block, state: _State, parts: _Parts) -> None:
    """Decode a block line by line (the one per-line step) and build its rows column-wise.

    A plain CB line decodes with :class:`_FastLine` and its fields are gathered in C
    (``attrgetter``); any other line (another kind, a rarer spelling, an error) is decoded
    again with :class:`_Line` and resolved by :func:`_slow_line`.
    """
    with no_gc():  # the decoded lines are built and dropped while collection is off
        _parse_block_rows(block, state, parts)


def _parse_block_rows(block: _Block, state: _State, parts: _Parts) -> None:
    fast: list[_FastLine] = []
    fast_at: list[np.ndarray] = []
    slow: list[tuple[Any, ...]] = []
    slow_at: list[int] = []
    ccb = _CcbRows(state)
    start = block.start
    lines = block.split()

    def one(i: int) -> None:  # line i through _Line
        row = _slow_line(lines[i], start + i, state, parts, ccb)
        if row is not None:
            slow.append(row)
            slow_at.append(i)

    # lines that are not objects (or over the size limit) are never decoded as plain CB
    others = [i for i, raw in enumerate(lines) if raw is None or raw[:1] != b"{"]
    blank = sum(1 for i in others if (raw := lines[i]) is not None and not raw.strip())
    parts.counts.lines += len(lines) - blank
    i = 0
    for stop in [*others, len(lines)]:
        while i < stop:
            if state.kind == _Kind.CCB:  # in a CCB file every line goes through _Line
                one(i)
                i += 1
                continue
            # decode lines i.. as plain CB in one C loop; it stops at the first other line
            before = len(fast)
            try:
                # lines i..stop-1 are not None (a None line is one of `others`)
                fast.extend(map(_FAST, itertools.islice(lines, i, stop)))  # type: ignore[arg-type]
            except (msgspec.DecodeError, RecursionError):
                failed = True
            else:
                failed = False
            got = len(fast) - before  # extend keeps the lines decoded before a failure
            if got:
                state.kind = _Kind.CB  # a plain CB line sets or keeps the kind CB
                fast_at.append(np.arange(i, i + got))
                i += got
            if failed:
                one(i)
                i += 1
        if stop < len(lines):
            one(stop)
            i = stop + 1
    at = np.concatenate(fast_at) if fast_at else np.zeros(0, dtype=np.int64)
    if slow:  # merge the two kinds of rows in line order (for first-occurrence checks)
        rows = list(map(_CB_GET, fast)) + slow
        at = np.concatenate([at, np.asarray(slow_at, dtype=np.int64)])
        order = np.argsort(at, kind="stable")
        cols: list[Sequence[Any]] = list(zip(*[rows[j] for j in order.tolist()]))
        at = at[order]
    else:
        cols = [list(map(getter, fast)) for getter in _CB_FIELDS]
    del fast
    if at.size:
        raws = [lines[i] for i in at.tolist()] if state.features else None
        _cb_rows(cols, at.astype(np.int64) + start, state, parts, raws=raws)
    ccb.finish(parts)
    _not_utf8(lines, start, parts)


def _utf8_error(data: bytes) -> int | None:
    """The offset of the first byte of ``data`` that is not UTF-8 (None: all are)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start
    return None


#: The key of :class:`_Parts` details on lines kept with bytes that are not UTF-8.
_NOT_UTF8: Final = "not UTF-8"


def _not_utf8(lines: Sequence[bytes | None], start: int, parts: _Parts) -> None:
    """Count (and describe the first of) the lines that gave rows although bytes in them are
    not UTF-8: in fields ope does not decode (the features under ``c``, VW's bookkeeping),
    since a line with such bytes in a field ope reads is ``dsjson_bad_json``. VW does not check
    the encoding (RapidJSON without ``kParseValidateEncodingFlag``) and hashes the bytes as
    they are, so the row is kept; the report says so."""
    try:
        if all(map(bytes.isascii, lines)):  # type: ignore[arg-type]
            return  # ASCII is UTF-8: one C loop over the block
    except TypeError:  # a line over the size limit (None): checked one by one below
        pass
    bad: list[tuple[int, int]] = []
    for i, raw in enumerate(lines):  # only in a block that holds bytes above 0x7F
        if raw is not None and not raw.isascii() and (at := _utf8_error(raw)) is not None:
            bad.append((start + i, at))
    if not bad or not parts.lines:
        return
    kept = set(np.concatenate(parts.lines).tolist())
    for ln, at in bad:  # the lines with such bytes (rare)
        if ln not in kept:
            continue  # rejected for another reason: its rows are not read
        parts.counts.not_utf8 += 1
        raw = lines[ln - start]
        assert raw is not None
        c = object_fields(raw).get("c")
        in_c = c is not None and _utf8_error(bytes(c)) is not None
        where = ", in the features under `c`" if in_c else ", in a field ope does not read"
        column = len(raw[:at].decode("utf-8", "replace")) + 1
        parts.detail(_NOT_UTF8, ln, f"column {column} (byte {at}){where}")


def _slow_line(
    raw: bytes | None, ln: int, state: _State, parts: _Parts, ccb: _CcbRows
) -> tuple[Any, ...] | None:
    """One line that is not plain CB: its CB row (normalized), or None (rejected, CCB, blank)."""
    if raw is None:
        parts.reject("dsjson_line_too_long", ln)
        return None
    if raw[:1] != b"{":
        if raw.strip():
            parts.reject("dsjson_not_object", ln)
        return None
    try:
        obj = _DECODE(raw)
        spelled = _OTHER_LABEL_SPELLING.search(raw) is not None
        # the line's ordered pairs, parsed once where the order of its keys matters: a label
        # key spelled other than _Line names it, or both `p` and `_p`
        pairs = (
            _ordered_fields(raw)
            if spelled or (obj.p is not None and obj.p_alt is not None)
            else None
        )
        if spelled:
            assert pairs is not None
            _label_spellings(obj, pairs)
        if pairs is not None or raw.count(_LABEL_KEY) > _top_label_keys(obj):
            _no_label_under_c(raw, pairs)
    except msgspec.ValidationError as exc:
        parts.reject("dsjson_field_type", ln, str(exc))
        return None
    except (msgspec.DecodeError, RecursionError) as exc:
        parts.reject("dsjson_bad_json", ln, _json_error(raw, exc))
        return None
    except _Rejected as exc:  # a label key or value VW refuses
        parts.reject(exc.reason, ln, exc.detail)
        return None
    kind = _line_kind(obj)
    if state.kind is None:
        if kind not in (_Kind.CB, _Kind.CCB):
            raise _kind_error(kind, state.name, ln)
        state.kind = kind
    if kind not in (_Kind.CB, state.kind):
        parts.reject("dsjson_kind_mismatch", ln)
        return None
    try:
        if state.kind == _Kind.CCB:
            ccb.add(obj, raw, ln, parts)
            return None
        return _normalize_cb(obj, pairs)
    except _Rejected as exc:
        parts.reject(exc.reason, ln, exc.detail)
        return None


#: How every key starting with ``_label`` begins in a line's bytes.
_LABEL_KEY: Final = b'"_label'
_TOP_LABELS: Final = attrgetter("cost", "prob", "action", "index")
#: A JSON value decoded whole (the ``c`` of a line that has ``_label`` keys in it).
_JSON_ANY: Final = msgspec.json.Decoder().decode


def _top_label_keys(obj: _Line | _FastLine) -> int:
    """How many label keys the line has at its top level and in ``_outcomes`` (not null)."""
    n = 4 - operator.countOf(_TOP_LABELS(obj), None)
    if isinstance(obj, _Line) and obj.outcomes:
        n += sum(o.cost is not None for o in obj.outcomes)
    return n


def _label_paths(value: Any, path: str, found: list[str]) -> None:
    """The paths of the keys starting with ``_label`` in ``value`` (decoded whole, or as
    :class:`_Object` pairs), at any depth."""
    if isinstance(value, dict):
        value = _Object(value.items())
    if isinstance(value, _Object):
        for key, item in value:  # a loop over one object's keys
            if key.startswith("_label"):
                found.append(f"{path}.{key}")
            _label_paths(item, f"{path}.{key}", found)
    elif isinstance(value, list):
        for i, item in enumerate(value):  # a loop over one array's entries
            _label_paths(item, f"{path}[{i}]", found)


def _no_label_under_c(raw: bytes, pairs: Sequence[tuple[str, Any]] | None) -> None:
    """Raise :class:`_Rejected` when the line has a key starting with ``_label`` under ``c``
    (in ``_multi``, ``_slots`` or a namespace): VW's reader takes such a key for the line's
    label wherever it is (or refuses the line), and ope reads the label at the top level (and
    in ``_outcomes``) only. ``pairs``: the line's :func:`_ordered_fields` when parsed."""
    if pairs is not None:
        c = next((v for key, v in reversed(pairs) if key == "c"), None)
    else:
        c_raw = object_fields(raw).get("c")
        if c_raw is None or _LABEL_KEY not in bytes(c_raw):
            return
        c = _JSON_ANY(c_raw)
    found: list[str] = []
    _label_paths(c, "c", found)
    if found:
        raise _Rejected(
            "dsjson_field_type",
            f"{_keys_text(found)} under `c`: VW reads a key starting with `_label` as the "
            "line's label wherever it is (or refuses the line), and ope reads the label only at "
            "the top level, so the line is rejected. Move the label to the top level, or "
            "rename the feature",
        )


def _keys_text(paths: Sequence[str]) -> str:
    shown = ", ".join(f"`{p}`" for p in paths[:3]) + (", ..." if len(paths) > 3 else "")
    return f"the key{'s' if len(paths) > 1 else ''} {shown}"


class _Rejected(Exception):
    """A line rejected for ``reason``; ``detail`` says what is wrong in it (or None)."""

    def __init__(self, reason: str, detail: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


# ------------------------------------------------------------------------------------------
# the label keys' spellings, as VW matches them
# ------------------------------------------------------------------------------------------
#: VW's DSJSON reader (``DecisionServiceState`` at the top level of a line, ``DefaultState`` in
#: the entries of ``_outcomes``) takes a key for a label property when it starts with
#: ``_label_`` exactly (a case-sensitive prefix), and ``LabelObjectState`` compares the rest
#: without regard to case: these properties (lower case), each with the :class:`_Line` field it
#: sets, or None for the simple label's (``Label``, ``Initial``, ``Weight``: a number or "NaN",
#: accepted and not read in CB). Any other rest makes VW refuse the line ("Unsupported label
#: property"); ``_labelIndex`` (as a whole, in any case) is the index.
_LABEL_PROPERTIES: Final[dict[str, str | None]] = {
    "cost": "cost",
    "probability": "prob",
    "action": "action",
    "label": None,
    "initial": None,
    "weight": None,
}

#: A key (or a string) that starts with ``_label`` and is spelled other than :class:`_Line`
#: names it (or ``_label``/``_label_ca``, other kinds' labels): the line's keys are walked in
#: order by :func:`_label_spellings`. Lines VW's writers produce never match.
_OTHER_LABEL_SPELLING: Final = re.compile(
    rb'"_label(?!_cost"|_probability"|_Action"|Index"|_ca"|")'
)

#: The types :class:`_Line` gives the label fields (VW's: a number, and "NaN" where
#: ``LabelObjectState`` reads a string; ``_labelIndex`` a whole number).
_LABEL_TYPES: Final[dict[str, Any]] = {
    "cost": float | str | None,
    "prob": float | str | None,
    "action": float | None,
    "index": _Index | None,
}
_LABEL_DECODERS: Final = {
    name: msgspec.json.Decoder(kind).decode for name, kind in _LABEL_TYPES.items()
}


class _Number(str):
    """A JSON number as written, decoded by the label field's own decoder (a number beyond a
    double's range is refused there, as on the typed path)."""


class _Object(list[tuple[str, Any]]):
    """A JSON object as its (key, value) pairs in the line's order, repeated keys kept."""


#: The line as ordered pairs (:class:`_Object`), numbers kept as written: VW reads a line's keys
#: one after the other, so of two spellings (or two copies) of a key the later one wins.
_ORDERED: Final = json.JSONDecoder(
    object_pairs_hook=_Object, parse_float=_Number, parse_int=_Number
)


def _ordered_fields(raw: bytes) -> list[tuple[str, Any]]:
    """The top-level (key, value) pairs of a line that decoded (so is one JSON object), in its
    order; bytes that are not UTF-8 (in features VW hashes unchecked) read as U+FFFD."""
    fields: list[tuple[str, Any]] = _ORDERED.decode(raw.decode("utf-8", "replace"))
    return fields


def _label_value(field: str, value: Any, where: str) -> Any:
    """``value`` as the label field ``field`` types it; raises :class:`_Rejected`."""
    try:
        if isinstance(value, _Number):
            return _LABEL_DECODERS[field](value.encode())
        if isinstance(value, _Object):
            raise msgspec.ValidationError("got an object")
        return msgspec.convert(value, _LABEL_TYPES[field])
    except msgspec.ValidationError as exc:
        raise _Rejected("dsjson_field_type", f"{where}: {exc}") from None


def _label_entry(key: str, value: Any, *, outcome: str, continuous: bool) -> tuple[str, Any]:
    """The :class:`_Line` field a key starting with ``_label`` sets and its value, as VW's
    reader takes the key (``""``: none that ope reads); ``outcome`` is the ``_outcomes[i]``
    the key is in (``""`` at the top level); ``continuous``: a ``_label_ca...`` key came
    first (VW then reads a ``pdf_value``). Raises :class:`_Rejected` where VW refuses the
    line."""
    where = f"the key {show_value(key)}" + (f" of {outcome}" if outcome else "")
    if len(key) == 6:  # `_label`: VW's own label format (another kind; read elsewhere)
        return "", None
    if key[6] != "_":
        if key.lower() == "_labelindex":
            return "index", _label_value("index", value, where)
        if not outcome:  # VW's DSJSON reader ignores `_labelX` at a line's top level
            return "", None
        raise _Rejected(
            "dsjson_field_type",
            f"{where} starts with _label but is neither `_label_<property>` nor "
            '`_labelIndex`: VW refuses the line ("Unsupported key")',
        )
    rest = key[7:]
    if rest == "ca" or value is None:  # the continuous label (its kind), or a null VW skips
        return "", None
    if isinstance(value, _Object):  # whatever the property: VW reads the object's keys
        raise _Rejected(
            "dsjson_field_type",
            f"{where} holds an object (a label object VW reads property by property, which "
            "ope does not): write each property as `_label_<property>: value`",
        )
    field = _LABEL_PROPERTIES.get(rest.lower(), "?")
    if field == "?" and not (continuous and rest.lower() == "pdf_value"):
        raise _Rejected(
            "dsjson_field_type",
            f'{where}: VW refuses the line ("Unsupported label property"), its label '
            "properties after `_label_` being Cost, Probability, Action (and the simple "
            "label's Label, Initial, Weight), in any case",
        )
    if field in ("?", None):  # a property VW accepts and ope does not read: a number or "NaN"
        if not isinstance(value, _Number) and (
            not isinstance(value, str) or vw_number(value) is NOT_A_NUMBER
        ):
            raise _Rejected(
                "dsjson_field_type",
                f'{where} holds {show_value(value)}: VW takes a number or "NaN" there',
            )
        return "", None
    assert field is not None
    return field, _label_value(field, value, where)


def _label_spellings(obj: _Line, fields: Sequence[tuple[str, Any]]) -> None:
    """Set the label fields of ``obj`` from every key VW takes for one (:data:`_LABEL_PROPERTIES`,
    ``_labelIndex`` in any case), in the line's order: a later key wins, as VW overwrites, at
    the top level and in ``_outcomes`` (costs). The keys are walked as ordered pairs, so that
    of repeated keys the last one wins too. Raises :class:`_Rejected` on a key or a value VW
    refuses (``dsjson_field_type``, with what and why). ``fields``: the line's
    :func:`_ordered_fields`."""
    continuous = False
    outcomes: list[Any] | None = None
    for key, value in fields:  # the line's keys (a dozen)
        if key == "_outcomes":
            outcomes = value
        if not key.startswith("_label"):
            continue
        continuous = continuous or key[6:9] == "_ca"  # VW's test: `_label_` then "ca"
        name, got = _label_entry(key, value, outcome="", continuous=continuous)
        if name:
            setattr(obj, name, got)
    if obj.outcomes is None or not isinstance(outcomes, list):
        return
    for i, (outcome, entry) in enumerate(zip(obj.outcomes, outcomes, strict=True)):
        for key, value in entry:  # an outcome's keys
            if key.startswith("_label"):
                name, got = _label_entry(
                    key, value, outcome=f"_outcomes[{i}]", continuous=continuous
                )
                if name == "cost":
                    outcome.cost = got


# ------------------------------------------------------------------------------------------
# what is wrong in a line that is not JSON
# ------------------------------------------------------------------------------------------
#: The byte offset msgspec gives at the end of its message.
_AT_BYTE: Final = re.compile(r"\s*\(byte (\d+)\)$")
#: A ``\uXXXX`` escape in a JSON string (to find a lone surrogate, which msgspec reports as a
#: truncated input).
_ESCAPE: Final = re.compile(rb"\\u([0-9a-fA-F]{4})")
#: Bare non-finite numbers: not JSON, so not read by VW either (its parser is RapidJSON without
#: ``kParseNanAndInfFlag``).
_BARE_NON_FINITE: Final = (b"NaN", b"nan", b"Infinity", b"-Infinity", b"inf", b"-inf")


def _lone_surrogate(raw: bytes) -> int | None:
    """The byte offset of the first ``\\uD800``-``\\uDFFF`` escape not part of a pair."""
    escapes = list(_ESCAPE.finditer(raw))
    k = 0
    while k < len(escapes):  # the line's escapes (only on a line that did not decode)
        code = int(escapes[k].group(1), 16)
        if 0xD800 <= code < 0xDC00:
            nxt = escapes[k + 1] if k + 1 < len(escapes) else None
            if (
                nxt is not None
                and nxt.start() == escapes[k].end()
                and 0xDC00 <= int(nxt.group(1), 16) < 0xE000
            ):
                k += 2
                continue
            return escapes[k].start()
        if 0xDC00 <= code < 0xE000:
            return escapes[k].start()
        k += 1
    return None


def _json_error(raw: bytes, exc: BaseException) -> str:
    """Where and why ``raw`` is not JSON: the parser's message with its position as a 1-based
    column (characters) and a 0-based byte offset."""
    if isinstance(exc, RecursionError):
        return "nested deeper than the JSON decoder's recursion limit (no position)"
    text = str(exc)
    found = _AT_BYTE.search(text)
    at: int | None
    if found is not None:
        at, text = int(found.group(1)), text[: found.start()]
    elif "UTF-8" in text:
        at = _utf8_error(raw)
        text = f"bytes that are not UTF-8 ({text})"
    elif (at := _lone_surrogate(raw)) is not None:
        text = "a lone surrogate escape (half of a UTF-16 pair: not a character)"
    else:
        at, text = len(raw.rstrip()), f"the line ends before its JSON value does ({text})"
    if at is None:
        return text
    column = len(raw[:at].decode("utf-8", "replace")) + 1
    hint = ""
    if raw[at:].startswith(_BARE_NON_FINITE):
        hint = (
            '; a bare NaN or Infinity is not JSON (VW refuses the line too): write "NaN", a '
            "string VW reads as NaN"
        )
    return f"column {column} (byte {at}): {text}{hint}"


def _p_field(obj: _Line, pairs: Sequence[tuple[str, Any]] | None) -> Any:
    """``p`` or ``_p``: when both are present, the one whose last copy comes later in the line
    (VW clears and refills at each), found in its :func:`_ordered_fields` ``pairs`` (given
    for such a line)."""
    if obj.p is None or obj.p_alt is None:
        return obj.p if obj.p is not None else obj.p_alt
    assert pairs is not None
    last = {key: k for k, (key, _) in enumerate(pairs)}
    return obj.p if last["p"] > last["_p"] else obj.p_alt


def _as_list(v: Any) -> Any:
    return [v] if isinstance(v, (int, float, str)) and not isinstance(v, bool) else v


def _probabilities(v: Any, name: str) -> Any:
    """``p``/``_p`` as a list of floats: the string "NaN" (any case) as NaN, as VW reads it
    (its only string there); another string rejects the line (VW refuses it)."""
    v = _as_list(v)
    if v is None or not any(isinstance(x, str) for x in v):
        return v
    out = [vw_number(x) for x in v]
    bad = next((x for x, y in zip(v, out, strict=True) if y is NOT_A_NUMBER), None)
    if bad is not None:
        raise _Rejected(
            "dsjson_field_type",
            f"`{name}` holds the string {show_value(bad)}: its entries must be numbers (the only "
            'string VW reads there is "NaN")',
        )
    return out


def _normalize_cb(obj: _Line, pairs: Sequence[tuple[str, Any]] | None) -> tuple[Any, ...]:
    """The fields of :data:`_CB_GET` with strings resolved (``pairs``: the line's
    :func:`_ordered_fields` when it has both ``p`` and ``_p``); raises :class:`_Rejected`."""
    cost, prob = vw_number(obj.cost), vw_number(obj.prob)
    if cost is NOT_A_NUMBER or prob is NOT_A_NUMBER:
        raise _Rejected("dsjson_cost_not_numeric")
    p = _p_field(obj, pairs)
    a, p = _as_list(obj.a), _probabilities(p, "p" if p is obj.p else "_p")
    return (obj.event_id, obj.timestamp, cost, prob, obj.index, a, p, obj.pdrop, obj.skip, obj.c)


def _flag(values: Any, default: bool) -> np.ndarray:
    return pc.fill_null(pa.array(values, type=pa.bool_()), default).to_numpy(zero_copy_only=False)


def _floats(values: pa.Array) -> np.ndarray:
    if not values.null_count:
        return values.to_numpy(zero_copy_only=False)
    return pc.fill_null(values, np.nan).to_numpy(zero_copy_only=False)


def _event_ids(ids: pa.Array, lines: np.ndarray, name: str) -> pa.Array:
    """``EventId``, or ``"<name>:<line>"`` where it is absent."""
    if not ids.null_count:
        return ids
    derived = pc.binary_join_element_wise(
        pa.scalar(name + ":"), pa.array(lines).cast(pa.string()), ""
    )
    return pc.coalesce(ids, derived)


def _cb_rows(
    cols: list[Any],
    lines: np.ndarray,
    state: _State,
    parts: _Parts,
    raws: list[bytes] | None = None,
) -> None:
    """CB rows of one chunk, built and checked column-wise (reasons in VW's order)."""
    eid, ts, cost, prob, index, a, p, pdrop, skip, c = cols
    n = lines.size
    try:  # the number of actions (c._multi's entries); -1 for a line without them
        k = np.fromiter(map(len, map(_MULTI, c)), dtype=np.int64, count=n)
    except (AttributeError, TypeError):  # no c, or no c._multi
        k = np.fromiter(
            (-1 if x is None or x.multi is None else len(x.multi) for x in c),
            dtype=np.int64,
            count=n,
        )
    a_arr = pa.array(a, type=pa.list_(pa.int64()))
    p_arr = pa.array(p, type=pa.list_(pa.float64()))
    idx = pc.fill_null(pa.array(index, type=pa.int64()), -1).to_numpy(zero_copy_only=False)
    pd = pc.fill_null(pa.array(pdrop, type=pa.float64()), 0.0).to_numpy(zero_copy_only=False)
    cost_a, prob_a = pa.array(cost, type=pa.float64()), pa.array(prob, type=pa.float64())
    cost_v, prob_v = _floats(cost_a), _floats(prob_a)
    labeled = ~(
        pc.is_null(cost_a).to_numpy(zero_copy_only=False)
        & pc.is_null(prob_a).to_numpy(zero_copy_only=False)
    )
    a_len = pc.fill_null(pc.list_value_length(a_arr), 0).to_numpy(zero_copy_only=False)

    # a: ids 1..K, each once; p: one per id. Entry (row, id) has the slot off[row] + id - 1 of
    # the row's candidate list (the flat candidate layout, no (rows, actions) array).
    kc = np.maximum(k, 0)
    off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(kc, out=off[1:])
    a_flat = pc.list_flatten(a_arr).to_numpy(zero_copy_only=False)
    a_par = pc.list_parent_indices(a_arr).to_numpy(zero_copy_only=False).astype(np.int64)
    bad_id = (a_flat < 1) | (a_flat > kc[a_par])
    bad_a = np.bincount(a_par[bad_id], minlength=n) > 0
    slot = off[a_par] + a_flat - 1
    ok_id = ~bad_id
    seen = np.bincount(slot[ok_id], minlength=int(off[-1]))
    bad_a |= np.bincount(a_par[ok_id], weights=seen[slot[ok_id]] > 1, minlength=n) > 0
    has_p = ~pc.is_null(p_arr).to_numpy(zero_copy_only=False)
    p_len = pc.fill_null(pc.list_value_length(p_arr), 0).to_numpy(zero_copy_only=False)
    bad_a |= has_p & (p_len != a_len)
    usable = has_p & ~bad_a & (k >= 0) & _p_is_distribution(a_arr, p_arr, idx, prob_v, n)
    reasons = (
        ("dsjson_pdrop_out_of_range", ~((pd >= 0.0) & (pd < 1.0))),
        ("dsjson_skip_learn", _flag(skip, False)),
        ("dsjson_no_actions", a_len == 0),
        ("dsjson_unlabeled", ~labeled),
        ("dsjson_label_index_missing", idx < 0),
        ("dsjson_label_index_out_of_range", idx >= np.maximum(k, 0)),
    )
    left = np.ones(n, dtype=bool)
    for reason, mask in reasons:
        hit = left & mask
        parts.reject(reason, lines[hit])
        left &= ~hit
    if state.distribution is None and left.any():
        first = np.argmax(left)
        state.distribution = bool(usable[first])  # the file's first row decides
        state.decided_at = int(lines[first])
    if state.distribution is False and state.p_ignored_at is None and (left & has_p).any():
        state.p_ignored_at = int(lines[np.argmax(left & has_p)])  # a `p` that is not kept
    if state.distribution:
        hit = left & ~usable
        parts.reject("dsjson_a_p_mismatch", lines[hit])
        left &= ~hit
        if hit.any():  # say which of them hold NaN ("NaN", read as VW reads it)
            p_flat = pc.list_flatten(p_arr).to_numpy(zero_copy_only=False)
            p_par = pc.list_parent_indices(p_arr).to_numpy(zero_copy_only=False)
            nan = np.bincount(p_par[np.isnan(p_flat)], minlength=n) > 0
            for r in np.flatnonzero(hit & nan)[:EXAMPLE_ROWS].tolist():  # at most 5 lines
                parts.detail(
                    "dsjson_a_p_mismatch",
                    int(lines[r]),
                    '`p` holds "NaN" (VW reads it as NaN): a probability that is NaN cannot '
                    "weight a row, so `p` is no distribution",
                )
    keep = np.flatnonzero(left)
    if not keep.size:
        return
    nan_prob = keep[np.isnan(prob_v[keep])]  # NaN: "NaN", or null (absent)
    if nan_prob.size and prob_a.null_count:
        nan_prob = nan_prob[~pc.is_null(prob_a).to_numpy(zero_copy_only=False)[nan_prob]]
    for r in nan_prob[:EXAMPLE_ROWS].tolist():  # read_logs rejects them: say why (5 at most)
        parts.detail("propensity_missing", int(lines[r]), _nan_propensity(["`_label_probability`"]))
    nan_cost = keep[np.isnan(cost_v[keep])]  # NaN: "NaN", or null (absent)
    if nan_cost.size and cost_a.null_count:
        nan_cost = nan_cost[~pc.is_null(cost_a).to_numpy(zero_copy_only=False)[nan_cost]]
    for r in nan_cost[:EXAMPLE_ROWS].tolist():  # read_logs rejects them: say why (5 at most)
        parts.detail("reward_missing", int(lines[r]), _nan_cost(["`_label_cost`"]))
    take = pa.array(keep)

    def kept(arr: pa.Array) -> pa.Array:
        return arr if keep.size == n else arr.take(take)

    # candidates and distribution of every row in the flat layout, then the kept rows
    offsets32 = pa.array(off, pa.int32())  # a chunk holds far fewer than 2**31 entries
    cand_vals = np.arange(off[-1], dtype=np.int64) - np.repeat(off[:-1], kc)
    candidates = kept(pa.ListArray.from_arrays(offsets32, pa.array(cand_vals)))
    if state.distribution:
        # p[i] at candidate a[i] - 1 of the rows whose a/p are usable (aligned entry by entry)
        p_flat = pc.list_flatten(p_arr).to_numpy(zero_copy_only=False).astype(np.float64)
        p_par = pc.list_parent_indices(p_arr).to_numpy(zero_copy_only=False).astype(np.int64)
        dist = np.zeros(int(off[-1]), dtype=np.float64)
        use_a, use_p = usable[a_par], usable[p_par]
        dist[slot[use_a]] = p_flat[use_p]
        distribution = kept(pa.ListArray.from_arrays(offsets32, pa.array(dist)))
    kept_lines = lines[keep]
    columns = {
        "event_id": _event_ids(kept(pa.array(eid, type=pa.string())), kept_lines, state.name),
        "timestamp": kept(pa.array(ts, type=pa.string())),
        "action": pa.array(idx[keep]),
        "propensity": pa.array(prob_v[keep]),
        "reward": pa.array(-cost_v[keep]),
        "weight": pa.array(1.0 / (1.0 - pd[keep])),
        "candidates": candidates.cast(pa.list_(pa.int64())),
    }
    if state.distribution:
        columns["logging_distribution"] = distribution.cast(pa.list_(pa.float64()))
    if state.features:
        columns["features_json"] = _features_text(raws, keep)
    parts.add(pa.table(columns, schema=state.schema), kept_lines)


def _c_text(raw: bytes) -> str | None:
    """The JSON text of a line's ``c`` (None without one); bytes that are not UTF-8 (which VW
    hashes as they are, and ope notes) read as U+FFFD."""
    found = object_fields(raw).get("c")
    return None if found is None else bytes(found).decode("utf-8", "replace")


def _features_text(raws: list[bytes] | None, keep: np.ndarray) -> pa.Array:
    """The JSON text of each kept line's ``c`` (with ``features=True``)."""
    out: list[str | None] = []
    for i in keep.tolist():  # one lookup per kept line, only when features are asked for
        out.append(_c_text(raws[i]) if raws is not None else None)
    return pa.array(out, type=pa.string())


class _CcbRows:
    """CCB rows built line by line (one row per labeled slot)."""

    def __init__(self, state: _State) -> None:
        self.state = state
        self.rows: list[dict[str, Any]] = []
        self.lines: list[int] = []

    def add(self, obj: _Line, raw: bytes, ln: int, parts: _Parts) -> None:
        """The rows of one CCB line; raises :class:`_Rejected` for a line rejected whole."""
        pdrop = obj.pdrop if obj.pdrop is not None else 0.0
        if not 0.0 <= pdrop < 1.0:
            raise _Rejected("dsjson_pdrop_out_of_range")
        if obj.skip:
            raise _Rejected("dsjson_skip_learn")
        c = obj.c
        k = len(c.multi) if c is not None and c.multi is not None else 0
        slots = _ccb_slots(obj, k)
        if not slots:  # no slot and no outcome: nothing was logged
            raise _Rejected("dsjson_unlabeled")
        parts.counts.split += 1
        parts.counts.slots += len(slots)
        sid = obj.event_id if obj.event_id is not None else f"{self.state.name}:{ln}"
        text = _c_text(raw) if self.state.features else None
        weight = 1.0 / (1.0 - pdrop)
        # "NaN" strings, which read_logs rejects as propensity_missing / reward_missing: say why
        for at, reason, top, inside, say in (
            (1, "propensity_missing", "`_label_probability`", "_p[0]", _nan_propensity),
            (2, "reward_missing", "`_label_cost`", "_label_cost", _nan_cost),
        ):  # the two label fields that may be "NaN"
            nan = [
                top if obj.outcomes is None else f"`_outcomes[{slot}].{inside}`"
                for slot, fields in enumerate(slots)
                if fields[0] is not None
                and isinstance(fields[at], float)
                and math.isnan(fields[at])
            ]
            if nan:
                parts.detail(reason, ln, say(nan))
        for slot, (action, prob, cost) in enumerate(slots):  # the slots of one line
            if action is None:  # a slot without a logged action: counted, as VW learns nothing
                parts.reject("dsjson_unlabeled", ln)
                continue
            row = {
                "event_id": f"{sid}/{slot}",
                "timestamp": obj.timestamp,
                "action": action,
                "propensity": prob,
                "reward": None if cost is None else -cost,
                "weight": weight,
                "slate_id": sid,
                "position": slot,
                "features_json": text,
            }
            self.rows.append(row)
            self.lines.append(ln)

    def finish(self, parts: _Parts) -> None:
        if self.lines:
            schema = self.state.schema
            table = pa.Table.from_pylist(self.rows, schema=schema)
            parts.add(table, np.asarray(self.lines, dtype=np.int64))


def _nan_propensity(fields: Sequence[str]) -> str:
    """What a note says of a line whose propensity (``fields``) is the string "NaN"."""
    verb = "is" if len(fields) == 1 else "are"
    return (
        f'{" and ".join(fields)} {verb} "NaN" (VW reads it as NaN): the propensity is present, '
        "as NaN, which cannot weight a row"
    )


def _nan_cost(fields: Sequence[str]) -> str:
    """What a note says of a line whose cost (``fields``) is the string "NaN"."""
    verb = "is" if len(fields) == 1 else "are"
    return (
        f'{" and ".join(fields)} {verb} "NaN" (VW reads it as NaN): the cost is present, as '
        "NaN, which gives no reward (reward = -cost)"
    )


#: A slot without a logged action (no outcome, or one without ``_a``/``_p``).
_UNLABELED: Final = (None, None, None)


def _ccb_slots(obj: _Line, k: int) -> list[tuple[Any, Any, Any]]:
    """(action, probability, cost) per slot of a CCB line (:data:`_UNLABELED` for a slot
    without a logged action; empty: the line has no slot and no outcome); raises
    :class:`_Rejected` for a line rejected whole."""
    if obj.outcomes is None:
        if obj.c is not None and obj.c.slots is not None:
            return [_UNLABELED] * len(obj.c.slots)  # slots without outcomes: nothing logged
        # a CB line in a CCB file: one slot, action _label_Action - 1 (VW's CB-as-CCB rule)
        cost, prob = vw_number(obj.cost), vw_number(obj.prob)
        if cost is NOT_A_NUMBER or prob is NOT_A_NUMBER:
            raise _Rejected("dsjson_cost_not_numeric")
        if cost is None and prob is None:
            return []
        action = obj.action
        if action is None or not 1 <= action <= k or action != int(action):
            raise _Rejected(
                "dsjson_outcome_malformed",
                f"a CB line in a CCB file needs _label_Action in 1..{k} (the actions of "
                f"c._multi); it has {'none' if action is None else show_value(str(action))}",
            )
        return [(int(action) - 1, prob, cost)]
    n_slots = len(obj.c.slots) if obj.c is not None and obj.c.slots is not None else 0
    if len(obj.outcomes) > n_slots:
        raise _Rejected(
            "dsjson_outcome_malformed",
            f"{len(obj.outcomes)} outcomes for {n_slots} slot(s) in c._slots",
        )
    out: list[tuple[Any, Any, Any]] = []
    for i, o in enumerate(obj.outcomes):  # the slots of one line
        a, p = _as_list(o.a), _probabilities(o.p, f"_outcomes[{i}]._p")
        if not a or not p:
            out.append(_UNLABELED)
            continue
        if len(a) != len(p):
            raise _Rejected(
                "dsjson_outcome_malformed",
                f"_outcomes[{i}] has {len(a)} `_a` and {len(p)} `_p` entries (VW throws)",
            )
        outside = next((x for x in a if not 0 <= x < k), None)
        if outside is not None:
            raise _Rejected(
                "dsjson_outcome_malformed",
                f"_outcomes[{i}]._a holds {outside}, outside c._multi's indices 0..{k - 1}",
            )
        cost = vw_number(o.cost)
        if cost is NOT_A_NUMBER:
            raise _Rejected("dsjson_cost_not_numeric")
        out.append((a[0], p[0], cost))
    # slots after the last outcome have none: unlabeled (VW learns nothing from them)
    return out + [_UNLABELED] * (n_slots - len(out))


# ------------------------------------------------------------------------------------------
# public API
# ------------------------------------------------------------------------------------------
def _check_options(
    on_invalid: str, chunk_lines: int, chunk_bytes: int, max_line_bytes: int
) -> None:
    check_choice(on_invalid, "on_invalid", ("raise", "drop"))
    check_positive_int(chunk_lines, "chunk_lines")
    check_positive_int(chunk_bytes, "chunk_bytes", maximum=MAX_CHUNK_BYTES)
    check_positive_int(max_line_bytes, "max_line_bytes")


def iter_dsjson(
    path: str | os.PathLike[str],
    *,
    on_invalid: str = "raise",
    chunk_lines: int = DEFAULT_CHUNK_LINES,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    max_line_bytes: int = MAX_LINE_BYTES,
    features: bool = False,
    workers: int | None = None,
) -> Iterator[tuple[pa.Table, ChunkValidator]]:
    """Parse and validate a DSJSON file chunk by chunk (bounded memory).

    Yields ``(valid_rows, validator)`` per chunk; ``validator.report`` is the report so far
    (source line numbers) and ``validator.source_metadata["ope.dsjson_kind"]`` the file's kind
    (``"cb"``/``"ccb"``, empty before the first event). After the
    last chunk, the caller should raise ``validator.failure()`` if it is not None
    (``on_invalid="raise"``), as :func:`read_dsjson` does. Every chunk has the full schema
    (:data:`DSJSON_SCHEMA`); :func:`read_dsjson` and :func:`import_dsjson` leave out the
    optional columns no row fills.

    Examples
    --------
    >>> import json, os, tempfile
    >>> from ope.importers import iter_dsjson
    >>> path = os.path.join(tempfile.mkdtemp(), "x.json")
    >>> with open(path, "w") as f:
    ...     for i in range(3):
    ...         _ = f.write(json.dumps({"EventId": str(i), "_label_cost": -1.0,
    ...             "_label_probability": 0.5, "_labelIndex": 0, "a": [1, 2], "p": [0.5, 0.5],
    ...             "c": {"_multi": [{"x": 1}, {"x": 2}]}}) + "\\n")
    >>> [t.num_rows for t, _ in iter_dsjson(path, chunk_lines=2)]
    [2, 1]
    """
    _check_options(on_invalid, chunk_lines, chunk_bytes, max_line_bytes)
    n_workers = _n_workers(workers)
    fh, size, name, local = _open(path)
    validator = ChunkValidator(os.fspath(path), on_invalid, unit="line", shown_id="slate_id")
    state = _State(name, bool(features))
    notes = _FileNotes()
    total = None if size is None else size / 1e6
    with contextlib.ExitStack() as stack:
        stack.enter_context(fh)
        bar = stack.enter_context(progress(desc=f"import {name}", total=total, unit="MB"))
        pool = None
        pending: collections.deque[Any] = collections.deque()
        # with workers, a block goes to its parser unsplit (a plain file's as its place in it)
        parallel = n_workers > 1
        for block in _blocks(
            fh,
            name,
            chunk_lines,
            chunk_bytes,
            max_line_bytes,
            bar,
            local if parallel else None,
            unsplit=parallel,
            first_bytes=min(_FIRST_BYTES, chunk_bytes) if parallel else None,
        ):
            # a worker parses a large block of whole lines once the file's kind and columns
            # are known; anything else is parsed here, in order after the blocks in flight
            if n_workers > 1 and state.settled and block.nbytes >= _POOL_MIN_BYTES:
                if pool is None:
                    pool = stack.enter_context(_pool(n_workers))
                pending.append(pool.submit(_parse_chunk, block, state))
                if len(pending) > n_workers:  # at most workers + 1 blocks in flight
                    yield _validate(pending.popleft().result(), validator, notes), validator
                continue
            while pending:
                yield _validate(pending.popleft().result(), validator, notes), validator
            chunk = _parse_chunk(block, state)
            state = chunk.state
            yield _validate(chunk, validator, notes), validator
        while pending:
            yield _validate(pending.popleft().result(), validator, notes), validator


@dataclass
class _Chunk:
    """One parsed block: its rows, their source lines, rejected lines by reason, what is wrong
    in the first lines of a reason (:attr:`_Parts.details`), and its counts."""

    table: pa.Table
    lines: np.ndarray
    rejected: dict[str, np.ndarray]
    details: dict[str, list[tuple[int, str]]]
    counts: _Counts
    state: _State


def _parse_chunk(block: _Block, state: _State) -> _Chunk:
    """Parse one block (in this process or a worker's; a worker gets and returns a copy of
    ``state``, unchanged once the file's kind and columns are known)."""
    parts = _Parts()
    _parse_block(block, state, parts)
    table, lines = _concat(parts, state)
    rejected = {k: np.concatenate(v) for k, v in parts.rejected.items()}
    return _Chunk(table, lines, rejected, parts.details, parts.counts, state)


@dataclass
class _FileNotes:
    """What the report's notes say about the whole file, kept from chunk to chunk."""

    counts: _Counts = field(default_factory=_Counts)
    not_utf8: list[tuple[int, str]] = field(default_factory=list)


def _validate(chunk: _Chunk, validator: ChunkValidator, notes: _FileNotes) -> pa.Table:
    validator.source_metadata["ope.dsjson_kind"] = chunk.state.kind or ""
    state = chunk.state
    for reason, details in chunk.details.items():  # what is wrong in the first lines
        if reason != _NOT_UTF8:
            validator.explain(reason, details)
    if state.p_ignored_at is not None:  # said once (ChunkValidator.note keeps one copy)
        validator.note(
            "`p` not kept as logging_distribution: the first labeled line (line "
            f"{state.decided_at}) decides for the file, and its `a`/`p` are missing or are not "
            "the logger's distribution over its candidates (ids 1..K once each, entries in "
            "[0, 1] summing to 1, the logged action's equal to `_label_probability`); every "
            f"line's `p` is ignored (the first at line {state.p_ignored_at}). "
            "`_label_probability` is the propensity; estimators that need the logger's whole "
            "distribution cannot use this file."
        )
    used = validator.add(chunk.table, chunk.lines, chunk.rejected, n_source=chunk.counts.rows)
    notes.counts += chunk.counts
    totals = notes.counts
    if totals.not_utf8:
        notes.not_utf8 = (notes.not_utf8 + chunk.details.get(_NOT_UTF8, []))[:EXAMPLE_ROWS]
        validator.set_note(
            _NOT_UTF8,
            f"{totals.not_utf8:,} line(s) read into rows hold bytes that are not UTF-8 outside "
            "the fields ope reads (first: "
            + "; ".join(f"line {ln}, {text}" for ln, text in notes.not_utf8)
            + "). Vowpal Wabbit does not check the encoding and hashes such bytes as they are, "
            "so these rows are kept; features_json (features=True) shows each such byte as "
            "U+FFFD. Re-export the file as UTF-8 to keep the features' text exact.",
        )
    if state.kind == _Kind.CCB:  # rows are slots: say how lines and rows add up
        report = validator.report
        whole = totals.lines - totals.split
        validator.set_note(
            "ccb_counts",
            f"CCB rows are slots: {totals.lines:,} lines read; {totals.split:,} of them gave "
            f"{totals.slots:,} slot rows ({report.rows_used:,} used, the rows `ope import` "
            f"writes; {totals.slots - report.rows_used:,} rejected: unlabeled or breaking a "
            f"rule) and {whole:,} were rejected whole, one row each: rows read = "
            f"{totals.slots:,} + {whole:,} = {report.rows_read:,}.",
        )
    return used


def _n_workers(workers: int | None) -> int:
    if workers is None:
        try:
            cpus = len(os.sched_getaffinity(0))
        except AttributeError:  # not on Linux
            cpus = os.cpu_count() or 1
        return min(DEFAULT_WORKERS, cpus)
    check_positive_int(workers, "workers")
    return workers


@contextlib.contextmanager
def _pool(n: int) -> Iterator[concurrent.futures.ProcessPoolExecutor]:
    """``n`` worker processes, forked where the platform can (no re-import in each)."""
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else None)
    pool = concurrent.futures.ProcessPoolExecutor(n, mp_context=ctx)
    try:
        yield pool
    finally:  # on an error or an early stop, the blocks not started are dropped
        pool.shutdown(wait=True, cancel_futures=True)


def _concat(parts: _Parts, state: _State) -> tuple[pa.Table, np.ndarray]:
    schema = state.schema
    if not parts.tables:
        return schema.empty_table(), np.zeros(0, dtype=np.int64)
    table = pa.concat_tables(parts.tables) if len(parts.tables) > 1 else parts.tables[0]
    lines = np.concatenate(parts.lines)
    if len(parts.tables) > 1:  # rows in line order
        order = np.argsort(lines, kind="stable")
        table, lines = table.take(pa.array(order)), lines[order]
    return table, lines


def read_dsjson(
    path: str | os.PathLike[str],
    *,
    on_invalid: str = "raise",
    chunk_lines: int = DEFAULT_CHUNK_LINES,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    max_line_bytes: int = MAX_LINE_BYTES,
    features: bool = False,
    mapping: Any = None,
    workers: int | None = None,
) -> BanditLogs:
    """Read a Vowpal Wabbit DSJSON file (plain or gzip) into validated ``BanditLogs``.

    Parameters
    ----------
    path : str or os.PathLike
        The DSJSON file; gzip is detected from its first bytes.
    on_invalid : {"raise", "drop"}, default "raise"
        As in :func:`ope.read_logs`. Lines VW itself skips (``_skipLearn``, no ``a``, no label,
        not starting with ``{``) are excluded and counted; they never make ``"raise"`` raise.
    chunk_lines : int, default 50,000
        Lines parsed and validated at a time (at most).
    chunk_bytes : int, default 16 MiB
        Bytes read at a time (at most, plus the rest of a line); at most
        :data:`MAX_CHUNK_BYTES` (1 GiB).
    max_line_bytes : int, default 32 MiB
        Longer lines are rejected (``dsjson_line_too_long``) without being held in memory.
    features : bool, default False
        Add ``features_json``: the JSON text of each line's ``c`` (context and action
        features), for a reward model that parses them. Slower: the features are kept.
    workers : int, optional
        Processes that parse blocks in parallel (default :data:`DEFAULT_WORKERS`, at most the
        CPUs available; 1 parses in this process). The result does not depend on it: blocks
        are validated in file order, with the same line numbers.
    mapping : None
        Accepted for the CLI's reader interface; DSJSON fields have fixed names (must be None).

    Returns
    -------
    BanditLogs
        The columns of the file's kind (:data:`DSJSON_SCHEMA`): CB ``event_id, timestamp,
        action, propensity, reward, weight, candidates[, logging_distribution]``; CCB the same
        with ``slate_id, position`` in place of the lists. The schema metadata records the
        format, the file's kind (``ope.dsjson_kind``), what ``propensity``, ``weight`` and
        ``event_id`` mean.
        ``logs.report`` counts rows by reason with 0-based line numbers.

    Raises
    ------
    DataFileError
        The file is missing, a directory, UTF-16/32, a damaged gzip stream, or of a kind ope
        does not import (continuous actions, slates, VW's plain JSON).
    ValidationError
        Lines break rules (``on_invalid="raise"``), or no row is left.

    Examples
    --------
    >>> import json, os, tempfile
    >>> from ope.importers import read_dsjson
    >>> path = os.path.join(tempfile.mkdtemp(), "x.json")
    >>> with open(path, "w") as f:
    ...     _ = f.write(json.dumps({"EventId": "e1", "_label_cost": -1.0,
    ...         "_label_probability": 0.8, "_label_Action": 2, "_labelIndex": 1,
    ...         "a": [2, 1], "p": [0.8, 0.2], "c": {"u": {"age": 3},
    ...         "_multi": [{"x": 1}, {"x": 2}]}}) + "\\n")
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
        raise ParameterError("`mapping` does not apply to DSJSON: its field names are fixed")
    tables = []
    validator = None
    for table, validator in iter_dsjson(
        path,
        on_invalid=on_invalid,
        chunk_lines=chunk_lines,
        chunk_bytes=chunk_bytes,
        max_line_bytes=max_line_bytes,
        features=features,
        workers=workers,
    ):
        if table.num_rows:
            tables.append(table)
    if validator is None:  # an empty file
        validator = ChunkValidator(str(path), on_invalid)
    return validator.finish(
        tables or [_schema(None, features, None).empty_table()], DSJSON_METADATA
    )


def import_dsjson(
    path: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    on_invalid: str = "raise",
    chunk_lines: int = DEFAULT_CHUNK_LINES,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    max_line_bytes: int = MAX_LINE_BYTES,
    features: bool = False,
    workers: int | None = None,
) -> tuple[int, ValidationReport]:
    """Stream a DSJSON file into a parquet file (``ope import dsjson``), chunk by chunk.

    The file gets the table :func:`read_dsjson` returns (same columns, rows and schema
    metadata), without holding it in memory: each chunk is written as it is validated.

    Parameters
    ----------
    path : str or os.PathLike
        The DSJSON file.
    out : str or os.PathLike
        The parquet file to write (overwritten; the CLI writes to a temporary name first and
        renames it only on success: on an error ``out`` holds a partial file). Checked before
        the import starts: not empty, not ``path``, not a directory or a special file, in a
        folder that exists and can be written.
    on_invalid, chunk_lines, chunk_bytes, max_line_bytes, features, workers
        As in :func:`read_dsjson`.

    Returns
    -------
    (int, ValidationReport)
        Rows written, and the report.

    Raises
    ------
    DataFileError, ValidationError
        As :func:`read_dsjson`.
    ParameterError
        ``out`` cannot be a destination (see above).
    OutputError
        ``out`` cannot be written: no permission, no space left, a read-only file system.

    Examples
    --------
    >>> import json, os, tempfile
    >>> import pyarrow.parquet as pq
    >>> from ope.importers import import_dsjson
    >>> d = tempfile.mkdtemp()
    >>> src, out = os.path.join(d, "x.json"), os.path.join(d, "x.parquet")
    >>> with open(src, "w") as f:
    ...     _ = f.write(json.dumps({"_label_cost": 0.0, "_label_probability": 0.5,
    ...         "_labelIndex": 0, "a": [1, 2], "c": {"_multi": [{}, {}]}}) + "\\n")
    >>> n, report = import_dsjson(src, out)
    >>> n, pq.read_table(out).column("event_id").to_pylist()
    (1, ['x.json:0'])
    """
    import pyarrow.parquet as pq

    from ope._output import check_outputs, output_error

    _check_options(on_invalid, chunk_lines, chunk_bytes, max_line_bytes)
    inputs = [("path", path)] if isinstance(path, (str, os.PathLike)) else []
    out = os.fspath(check_outputs([("out", out)], inputs=inputs, force=True)[0])
    written = 0
    validator = None
    writer = None
    try:
        for table, validator in iter_dsjson(
            path,
            on_invalid=on_invalid,
            chunk_lines=chunk_lines,
            chunk_bytes=chunk_bytes,
            max_line_bytes=max_line_bytes,
            features=features,
            workers=workers,
        ):
            if not table.num_rows:
                continue
            try:  # an OSError here is the destination's (no space, no permission)
                if writer is None:  # the file's kind (so its columns) is known at its first row
                    meta = {
                        k.encode(): v.encode()
                        for k, v in {**DSJSON_METADATA, **validator.source_metadata}.items()
                    }
                    # no dictionary pages: 2.5x faster to write here, and no smaller
                    writer = pq.ParquetWriter(
                        out, table.schema.with_metadata(meta), use_dictionary=False
                    )
                writer.write_table(table)
            except OSError as exc:
                raise output_error(out, exc, flag="out") from exc
            written += table.num_rows
    finally:
        if writer is not None:
            writer.close()
    if validator is None:
        raise ValidationError(f"{os.fspath(path)} holds no rows; there is nothing to import")
    error = validator.failure()
    if error is not None:
        raise error
    report = validator.report
    if report.rows_used == 0:
        raise report.no_rows_error()
    return written, report
