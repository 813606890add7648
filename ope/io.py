"""Reading logs: parquet files, directories and datasets, DataFrames and Arrow tables.

Eager readers return validated containers (:func:`read_logs` -> ``BanditLogs``,
:func:`read_trajectories` -> ``Trajectories``, :func:`read_paired` -> ``PairedReplays``);
:func:`scan_logs` returns a lazy :class:`LogScan` that yields validated ``BanditLogs`` batches in
bounded memory. Every reader

1. resolves the user's ``mapping`` and checks names and types against the schema *before*
   reading data (one ``SchemaError`` listing every problem),
2. reads only the needed columns (a parquet projection),
3. casts to canonical types without loss and applies the row rules of :mod:`ope.schema`,
4. counts rejected rows by reason in a :class:`~ope.logs.ValidationReport`, then raises
   ``ValidationError`` (``on_invalid="raise"``, the default) or drops them with a
   ``DroppedRowsWarning`` (``on_invalid="drop"``).

Row numbers in reports are 0-based positions in the source (for a directory: files in sorted
path order, rows in file order).

Every input path (logs, policy tables, importer inputs) goes through :func:`locate_input`
(:mod:`ope._paths`, re-exported here): it is stat-ed before anything opens it, only regular
files are read, links are followed but never into what was read, and URIs other than
``file://`` go through ``pyarrow.fs``.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import sys
from dataclasses import dataclass, replace
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from ope._dedup import SeenIds, mark_repeats
from ope._paths import (
    REMOTE_TIMEOUT_SECONDS,
    SKIP_REASONS,
    Located,
    check_regular_file,
    csv_column_names,
    locate_input,
    os_error,
)
from ope._progress import enabled as progress_enabled
from ope._progress import progress
from ope._provenance import PROVENANCE_PREFIX, propensity_metadata
from ope._validation import check_choice, check_positive_int, describe, repeated_names
from ope.exceptions import DataFileError, ParameterError, SchemaError, ValidationError
from ope.logs import BanditLogs, PairedReplays, SkippedPath, Trajectories, ValidationReport
from ope.schema import (
    BANDIT,
    PAIRED,
    TRAJECTORY,
    ColumnPlan,
    LogSchema,
    check_bandit_rows,
    check_paired_rows,
    check_trajectory_rows,
    column_problem,
    conform,
    id_type_of,
    plan_columns,
)

__all__ = [
    "read_logs",
    "scan_logs",
    "read_trajectories",
    "read_paired",
    "LogScan",
    "ACTION_FEATURES_KEY",
    "with_action_features",
    "embedded_action_features",
    "locate_input",
    "check_regular_file",
    "check_parquet_file",
    "read_parquet_input",
    "read_item_table",
    "read_table",
    "REMOTE_TIMEOUT_SECONDS",
    "SKIP_REASONS",
    "check_on_invalid",
]

#: Default rows per batch of :func:`scan_logs`: about 10 MB per float64 column, large enough
#: to amortise per-batch overhead and small enough to keep several columns in cache-friendly,
#: bounded memory.
DEFAULT_BATCH_SIZE: Final[int] = 262_144

_PARQUET_MAGIC: Final[bytes] = b"PAR1"
#: The values of ``on_invalid`` every reader accepts.
ON_INVALID: Final = ("raise", "drop")

OnInvalid = Literal["raise", "drop"]
Source = Any  # str | os.PathLike | pandas.DataFrame | pyarrow.Table | pyarrow.dataset.Dataset


# --------------------------------------------------------------------------------------------
# sources
# --------------------------------------------------------------------------------------------


def check_parquet_file(
    path: str, *, fs: Any = None, in_directory: bool = False, what: str = "logs"
) -> None:
    """Raise a DataFileError unless ``path`` (local, or on the filesystem ``fs``) looks like a
    complete parquet file: the magic bytes at both ends, at least 12 bytes."""
    parent = str(Path(path).parent) if fs is None else path.rsplit("/", 1)[0]
    stray = (
        f". If it is not part of the {what}, move it out of the directory {parent} (files "
        "and folders whose names start with '.' or '_', such as _SUCCESS or .crc files, are "
        "ignored)"
        if in_directory
        else ""
    )
    try:
        if fs is None:
            size = os.stat(path).st_size
            fh: Any = open(path, "rb")  # noqa: SIM115 - closed below
        else:
            fh = fs.open_input_file(path)
            size = fh.size()
        with fh:
            head = fh.read(4)
            if size >= 8:
                fh.seek(size - 4)
            tail = fh.read(4)
    except (OSError, pa.ArrowException) as exc:
        if isinstance(exc, OSError) and exc.errno is not None:
            raise os_error(exc, path, what) from None
        raise DataFileError(f"cannot read {path}: {exc}") from None
    if size == 0:
        raise DataFileError(
            f"{path} is empty (0 bytes), not a parquet file; was the write interrupted?" + stray
        )
    if head != _PARQUET_MAGIC:
        raise DataFileError(
            f"{path} is not a parquet file (it does not start with the parquet magic bytes "
            f"'PAR1' but with {head!r}). ope reads parquet; Vowpal Wabbit DSJSON and Open Bandit "
            "Dataset folders have their importers (ope.read_dsjson / ope.read_obd, on the command "
            "line --format dsjson|obd or ope import); convert other CSV/JSON first, e.g. "
            "pandas.read_csv(path).to_parquet('logs.parquet'), or pass a DataFrame" + stray
        )
    if size < 12 or tail != _PARQUET_MAGIC:
        raise DataFileError(
            f"{path} is a truncated parquet file (it has no parquet footer; {size:,} bytes). "
            "It was probably cut short while being written or copied; rewrite or re-copy it" + stray
        )


@dataclass(frozen=True)
class _RangeIndex:
    """A named pandas RangeIndex kept only in a parquet file's metadata."""

    name: str
    start: int
    step: int
    stop: int | None

    def problem(self, n_rows: int) -> str | None:
        """Why serving this index as a column of ``n_rows`` rows would be wrong (None if not)."""
        if self.step == 0:
            return "with step 0, which pandas never writes (every id would be the same)"
        if self.stop is not None and len(range(self.start, self.stop, self.step)) != n_rows:
            return (
                f"of {len(range(self.start, self.stop, self.step)):,} rows, but the file holds "
                f"{n_rows:,} (the metadata is stale: the file was changed after pandas wrote it)"
            )
        last = self.start + self.step * max(n_rows - 1, 0)  # exact: Python integers
        for end in (self.start, last):
            if not -(2**63) <= end <= 2**63 - 1:
                return (
                    f"whose values leave int64 (its row {n_rows - 1 if end == last else 0:,} "
                    f"would be {end:,}), so they would wrap around into wrong ids"
                )
        return None

    def values(self, offset: int, count: int) -> pa.Array:
        return pa.array(self.start + self.step * np.arange(offset, offset + count, dtype=np.int64))


class _Opened:
    """A source resolved to a name, an Arrow schema, and ways to read it."""

    def __init__(
        self,
        name: str,
        dataset: ds.Dataset | None,
        table: pa.Table | None,
        file: str | None = None,
        file_schemas: dict[str, pa.Schema] | None = None,
        *,
        filesystem: Any = None,
        required: Sequence[str] = (),
        files: int | None = None,
        skipped: Sequence[SkippedPath] = (),
    ) -> None:
        self.name = name
        # exactly one of the two is set; pyarrow is untyped, so the dataset's methods are Any
        self.dataset: Any = dataset
        self.table = table
        self.file = file
        self.filesystem = filesystem
        self.file_schemas = file_schemas or {}
        self.files = files
        self.skipped = tuple(skipped)
        self.reopen: Any = None  # schema -> dataset, for directories
        # a named pandas RangeIndex that the file keeps only in its metadata: it is served as
        # an int64 column, unless it would stand in for a required column (metadata never
        # supplies one); ``hints`` says why such a column is missing
        self.range_index: _RangeIndex | None = None
        self.hints: dict[str, str] = {}
        if file is not None and dataset is not None:
            index = _pandas_range_index(dataset.schema)
            if index is not None and index.name in required:
                self.hints[index.name] = (
                    f"; {name}'s pandas metadata names its index {index.name!r} (a RangeIndex "
                    "kept only as metadata, not a column), and ope never takes a required "
                    "column from metadata: write it as a column, e.g. "
                    "df.reset_index().to_parquet(path)"
                )
            else:
                self.range_index = index

    def reconcile(self, plan: ColumnPlan, log_schema: LogSchema) -> None:
        """Check the planned columns in every file of a directory; read them in one type.

        A dataset takes its schema from one file and casts the others to it on read, which
        could parse strings into numbers or narrow float64 to float32 silently. Instead, every
        file must hold every planned column that ope knows (``action``, ``event_id``,
        ``target__<name>``, ...) in a type ope accepts, and each column is read in the widest
        type of its files. A pass-through column (a segment, an extra outcome) that only some
        files have is read as null in the others: schemas grow over time.

        A RangeIndex served from a file's pandas metadata is checked here too, when it is
        planned: it must describe exactly the file's rows, within int64.
        """
        index = self.range_index
        if index is not None and index.name in plan.source_columns:
            problem = index.problem(self.count_rows())
            if problem is not None:
                raise SchemaError(
                    f"{self.name}: its pandas metadata describes the index {index.name!r} as "
                    f"RangeIndex(start={index.start}, stop={index.stop}, step={index.step}) "
                    f"{problem}. ope reads such an index as the column {index.name!r} and "
                    "cannot do so faithfully: write the index as a column "
                    "(df.reset_index().to_parquet(path)), or drop it (df.reset_index(drop=True))"
                )
        if len(self.file_schemas) < 2:
            return
        partition_fields = set(self.dataset.schema.names) - {
            n for s in self.file_schemas.values() for n in s.names
        }
        problems: list[str] = []
        fields = []
        for name in self.dataset.schema.names:
            if name not in plan.source_columns or name in partition_fields:
                fields.append(self.dataset.schema.field(name))
                continue
            ours = plan.renames[name]
            kind = plan.kinds.get(ours)
            types: dict[str, pa.DataType] = {}
            missing = []
            for path, schema in self.file_schemas.items():
                if name in schema.names:
                    types[path] = schema.field(name).type
                else:
                    missing.append(path)
            if missing and kind is not None:
                problems.append(
                    f"column {name!r} is missing from {len(missing)} of {len(self.file_schemas)} "
                    f"files (e.g. {missing[0]}); add it to every file"
                    + (
                        ""
                        if ours in log_schema.required
                        else f", or leave {ours!r} out of columns=[...] to read the others"
                    )
                )
            if kind is not None:
                for path, t in types.items():
                    problem = column_problem(t, kind, plan.id_types.get("action"))
                    if (
                        problem is None
                        and kind == "int64 or string"
                        and id_type_of(t) != plan.id_types[ours]
                    ):
                        problem = f"has type {t} but {plan.id_types[ours]} in other files"
                    if problem is not None:
                        problems.append(f"column {name!r} in {path} {problem}")
                        break
            try:
                unified = pa.unify_schemas(
                    [pa.schema([pa.field(name, t)]) for t in dict.fromkeys(types.values())],
                    promote_options="permissive",
                )
                fields.append(unified.field(name))
            except (pa.ArrowException, TypeError) as exc:
                if kind is None:
                    problems.append(f"column {name!r} has incompatible types across files ({exc})")
                fields.append(self.dataset.schema.field(name))
        if problems:
            raise SchemaError(
                f"the files of {self.name} disagree on their columns:\n  - "
                + "\n  - ".join(problems)
            )
        schema = pa.schema(fields)
        if not schema.equals(self.dataset.schema):
            self.dataset = self.reopen(schema)

    @property
    def schema(self) -> pa.Schema:
        if self.table is not None:
            return self.table.schema
        if self.range_index is not None:
            return self.dataset.schema.append(pa.field(self.range_index.name, pa.int64()))
        return self.dataset.schema

    @property
    def provenance(self) -> dict[bytes, bytes]:
        """The source's propensity provenance (``ope.propensity_*`` schema metadata) that the
        validated tables carry on: estimated propensities stay estimated after a round trip."""
        return propensity_metadata(list(self.file_schemas.values()) or self.schema)

    def count_rows(self) -> int:
        """Rows in the source before validation (from parquet footers; reads no data)."""
        if self.table is not None:
            return int(self.table.num_rows)
        try:
            return int(self.dataset.count_rows())
        except (pa.ArrowException, OSError) as exc:
            raise DataFileError(f"cannot read {self.name}: {exc}") from None

    def _physical(self, columns: Sequence[str]) -> list[str]:
        index = self.range_index.name if self.range_index is not None else None
        return [c for c in columns if c != index]

    def _with_index(
        self, part: pa.Table | pa.RecordBatch, columns: Sequence[str], offset: int
    ) -> Any:
        """Insert the RangeIndex column (rows ``offset ...``) where ``columns`` puts it."""
        if self.range_index is None or self.range_index.name not in columns:
            return part
        name = self.range_index.name
        at = list(columns).index(name)
        values = self.range_index.values(offset, part.num_rows)
        arrays = list(part.columns)
        names = list(part.schema.names)
        arrays.insert(at, values)
        names.insert(at, name)
        cls = pa.RecordBatch if isinstance(part, pa.RecordBatch) else pa.Table
        return cls.from_arrays(arrays, names=names)

    def read(self, columns: Sequence[str]) -> pa.Table:
        if self.table is not None:
            return self.table.select(list(columns))
        physical = self._physical(columns)
        try:
            if progress_enabled() and (self.files or 1) > 1:
                # many files: read batch by batch with a bar (the same rows, in the same order)
                total = self.count_rows()
                parts = []
                with progress(desc=f"read {self.name}", total=total, unit="row") as bar:
                    for batch in self.dataset.to_batches(columns=physical):
                        parts.append(batch)
                        bar.update(batch.num_rows)
                table = (
                    pa.Table.from_batches(parts)
                    if parts
                    else self.dataset.to_table(columns=physical)
                )
            else:
                table = self.dataset.to_table(columns=physical)
        except (pa.ArrowException, OSError) as exc:
            raise DataFileError(f"cannot read {self.name}: {exc}") from None
        return self._with_index(table, columns, 0)

    def batches(self, columns: Sequence[str], batch_size: int) -> Iterator[pa.RecordBatch]:
        if self.table is not None:
            yield from self.table.select(list(columns)).to_batches(max_chunksize=batch_size)
            return
        try:
            if self.file is not None:
                # a single file: batch by batch, the next one read on a thread while this one
                # is used (pyarrow releases the GIL while it decodes), which keeps the peak
                # memory at about two batches (Dataset.to_batches buffers more ahead)
                reader = pq.ParquetFile(self.file, filesystem=self.filesystem)
                offset = 0
                for batch in _read_ahead(
                    reader.iter_batches(columns=self._physical(columns), batch_size=batch_size)
                ):
                    yield self._with_index(batch, columns, offset)
                    offset += batch.num_rows
            else:
                yield from self.dataset.to_batches(
                    columns=list(columns),
                    batch_size=batch_size,
                    batch_readahead=1,
                    fragment_readahead=1,
                )
        except (pa.ArrowException, OSError) as exc:
            raise DataFileError(f"cannot read {self.name}: {exc}") from None


def _read_ahead(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The batches of ``batches``, each read on a worker thread while the caller uses the one
    before (one batch ahead at most); an error of the reader is raised here, in order, and a
    caller that stops early stops the reader."""
    import queue
    import threading

    ahead: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=1)
    stop = threading.Event()

    def put(item: tuple[str, Any]) -> bool:
        while not stop.is_set():
            try:
                ahead.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def read() -> None:
        try:
            for batch in batches:  # a loop over batches, not rows
                if not put(("batch", batch)):
                    return
        except BaseException as exc:  # raised again by the caller's thread
            put(("error", exc))
            return
        put(("end", None))

    worker = threading.Thread(target=read, name="ope-read-ahead", daemon=True)
    worker.start()
    try:
        while True:
            kind, item = ahead.get()
            if kind == "end":
                return
            if kind == "error":
                raise item
            yield item
    finally:
        stop.set()
        worker.join()


def _pandas_range_index(schema: pa.Schema) -> _RangeIndex | None:
    """A named pandas RangeIndex stored only as file metadata (None when there is none).

    ``DataFrame.to_parquet`` writes a RangeIndex (which pandas also infers for ids such as
    0, 1, 2, ... after ``set_index("event_id")``) as three numbers in the metadata, not as a
    column; reading the columns alone would lose it. Metadata that does not parse is ignored:
    it is only metadata, and the real columns are read as they are.
    """
    meta = schema.metadata or {}
    raw = meta.get(b"pandas")
    if raw is None:
        return None
    try:
        index_columns = json.loads(raw).get("index_columns", [])
    except (ValueError, AttributeError, RecursionError):
        return None
    if (
        not isinstance(index_columns, list)
        or len(index_columns) != 1
        or not isinstance(index_columns[0], dict)
    ):
        return None
    info = index_columns[0]
    name = info.get("name")
    if info.get("kind") != "range" or not isinstance(name, str) or name in schema.names:
        return None
    try:
        start, step = int(info.get("start", 0)), int(info.get("step", 1))
        stop = info.get("stop")
        stop = None if stop is None else int(stop)
    except (TypeError, ValueError, OverflowError):
        return None
    return _RangeIndex(name, start, step, stop)


def _from_pandas(df: Any) -> pa.Table:
    names = [str(c) for c in df.columns]
    repeated = repeated_names(names)
    if repeated:
        raise SchemaError(
            f"the DataFrame has {len(names) - len(set(names))} repeated column name(s): "
            f"{', '.join(map(repr, repeated))} appear more than once (as strings; pandas allows "
            "it, Arrow and ope do not). Rename or drop the repeats, e.g. "
            "df.loc[:, ~df.columns.duplicated()]"
        )
    try:
        table = pa.Table.from_pandas(df, preserve_index=False)
    except (pa.ArrowException, TypeError, ValueError):
        table = None
    if table is not None:
        # a named index (df.set_index("event_id")) is data; an unnamed one is row labels
        for level, name in reversed(list(enumerate(df.index.names))):
            if name is not None:
                values = pa.array(df.index.get_level_values(level), from_pandas=True)
                table = table.add_column(0, str(name), values)
        return table
    problems = []
    for name in df.columns:
        try:
            pa.array(df[name], from_pandas=True)
        except (pa.ArrowException, TypeError, ValueError) as exc:
            kinds = sorted({type(v).__name__ for v in df[name].head(10_000)})
            problems.append(
                f"column {str(name)!r} holds Python objects of mixed types ({', '.join(kinds)}) "
                f"that Arrow cannot store in one column ({exc})"
            )
    raise SchemaError(
        "the DataFrame cannot be converted to Arrow:\n  - "
        + "\n  - ".join(problems)
        + "\nConvert each column to one type (e.g. pandas.to_numeric or .astype(str))"
    )


def _open_directory(found: Located) -> _Opened:
    files = list(found.files)
    fs = found.filesystem
    path = found.path
    if not files:
        raise DataFileError(
            f"{found.name} is a directory without parquet files (files whose names start "
            "with '.' or '_' are ignored)"
            + (f"; skipped: {'; '.join(s.text() for s in found.skipped)}" if found.skipped else "")
        )
    for f in files:
        check_parquet_file(f, fs=fs, in_directory=True)
    partitioning = ds.partitioning(flavor="hive")
    try:
        dataset = ds.dataset(
            files,
            format="parquet",
            partitioning=partitioning,
            partition_base_dir=path,
            filesystem=fs,
        )
    except (pa.ArrowException, OSError) as exc:
        raise (
            _repeated_name_error(found)
            or DataFileError(f"cannot open the parquet files in {found.name}: {exc}")
        ) from None
    file_schemas = {}
    for fragment in dataset.get_fragments():
        try:
            file_schemas[fragment.path] = fragment.physical_schema
        except (pa.ArrowException, OSError) as exc:
            raise DataFileError(f"{fragment.path} is not a readable parquet file: {exc}") from None

    def reopen(schema: pa.Schema) -> ds.Dataset:
        return ds.dataset(
            files,
            schema=schema,
            format="parquet",
            partitioning=partitioning,
            partition_base_dir=path,
            filesystem=fs,
        )

    # every column of every file (a dataset's schema is its first file's): a column that only
    # later files have is read too, instead of being left out without a word
    try:
        union = pa.unify_schemas(
            [dataset.schema, *file_schemas.values()], promote_options="permissive"
        )
    except (pa.ArrowException, TypeError):
        union = None  # reconcile() names the column whose types disagree
    if union is not None and not union.equals(dataset.schema):
        try:
            dataset = reopen(union)
        except (pa.ArrowException, OSError) as exc:
            raise DataFileError(f"cannot open the parquet files in {found.name}: {exc}") from None
    opened = _Opened(
        found.name,
        dataset,
        None,
        file_schemas=file_schemas,
        filesystem=fs,
        files=len(files),
        skipped=found.skipped,
    )
    opened.reopen = reopen
    return opened


def _repeated_name_error(found: Located) -> SchemaError | None:
    """The SchemaError naming the repeated column names of a parquet file (Arrow cannot open a
    dataset with them and says only "duplicate field names"); None when there are none."""
    for f in found.files:  # a loop over files
        try:
            names = pq.read_schema(f, filesystem=found.filesystem).names
        except (pa.ArrowException, OSError):
            continue
        repeated = repeated_names(names)
        if repeated:
            return SchemaError(
                f"{f}: column name(s) {', '.join(map(repr, repeated))} appear more than once; "
                "rewrite the file with every column named once so that each has one meaning"
            )
    return None


def _open(source: Source, log_schema: LogSchema | None = None) -> _Opened:
    required = log_schema.required if log_schema is not None else ()
    if isinstance(source, (str, os.PathLike)):
        found = locate_input(source, what="logs", argument="source")
        if found.is_dir:
            return _open_directory(found)
        check_parquet_file(found.path, fs=found.filesystem)
        try:
            dataset = ds.dataset(found.path, format="parquet", filesystem=found.filesystem)
            dataset.schema  # noqa: B018 - forces the footer to be read
        except (pa.ArrowException, OSError) as exc:
            raise (
                _repeated_name_error(found)
                or DataFileError(f"{found.name} is not a readable parquet file: {exc}")
            ) from None
        return _Opened(
            found.name,
            dataset,
            None,
            file=found.path,
            filesystem=found.filesystem,
            required=required,
            files=1,
        )
    if isinstance(source, ds.Dataset):
        return _Opened("<Dataset>", source, None)
    if isinstance(source, pa.Table):
        return _Opened("<Table>", None, source)
    if isinstance(source, pa.RecordBatch):
        return _Opened("<RecordBatch>", None, pa.Table.from_batches([source]))
    pandas = sys.modules.get("pandas")
    if pandas is not None and isinstance(source, pandas.DataFrame):
        return _Opened("<DataFrame>", None, _from_pandas(source))
    if hasattr(source, "__arrow_c_stream__"):  # polars, duckdb, ... via the Arrow C stream
        try:
            table = pa.table(source)
        except (pa.ArrowException, TypeError, ValueError) as exc:
            raise SchemaError(
                f"cannot convert the {type(source).__name__} to an Arrow table: {exc}"
            ) from None
        return _Opened(f"<{type(source).__name__}>", None, table)
    raise ParameterError(
        "source must be a parquet path (file or directory), a pyarrow.dataset.Dataset, a "
        "pyarrow.Table, a pandas.DataFrame or an object exporting an Arrow stream; got "
        f"{type(source).__name__}"
    )


def _open_and_plan(
    source: Source,
    log_schema: LogSchema,
    mapping: Mapping[str, str] | None,
    columns: Sequence[str] | None,
) -> tuple[_Opened, ColumnPlan]:
    """Open a source and plan its columns (names and types checked before any row is read)."""
    opened = _open(source, log_schema)
    plan = plan_columns(
        opened.schema,
        log_schema,
        mapping=mapping,
        columns=columns,
        source=opened.name,
        missing_hints=opened.hints,
    )
    opened.reconcile(plan, log_schema)
    return opened, plan


def check_on_invalid(on_invalid: Any) -> str:
    """``on_invalid`` of a reader: ``"raise"`` or ``"drop"`` (else a ParameterError)."""
    return check_choice(on_invalid, "on_invalid", ON_INVALID)


# --------------------------------------------------------------------------------------------
# reports
# --------------------------------------------------------------------------------------------


def _dropped_event_ids(table: pa.Table, masks: dict[str, np.ndarray]) -> pa.Array | None:
    """The non-null ``event_id`` of the rows the masks reject (None without an id column)."""
    if "event_id" not in table.column_names:
        return None
    bad = np.zeros(table.num_rows, dtype=bool)
    for mask in masks.values():
        bad |= mask
    ids = table.column("event_id")
    if not bad.any():
        return pa.array([], type=ids.type)
    return pc.drop_null(ids.filter(pa.array(bad))).combine_chunks()


def _described(
    report: ValidationReport, opened: _Opened, columns: Sequence[str]
) -> ValidationReport:
    """``report`` with what it describes: the columns read, the files, the entries skipped."""
    return replace(report, columns=tuple(columns), files_read=opened.files, skipped=opened.skipped)


def _finish(
    table: pa.Table, masks: dict[str, np.ndarray], opened: _Opened, on_invalid: str, what: str
) -> tuple[pa.Table, ValidationReport]:
    report, bad = ValidationReport.from_masks(
        masks, table.num_rows, opened.name, dropped=on_invalid == "drop"
    )
    report = _described(report, opened, table.column_names)
    if bad is not None:
        if on_invalid == "raise":
            raise ValidationError(report.failure_message(what), report=report)
        table = table.filter(pa.array(~bad))
        report.warn_dropped(stacklevel=4)
    if report.rows_used == 0:
        raise report.no_rows_error()
    return table, report


# --------------------------------------------------------------------------------------------
# ope's schema metadata: what travels with the rows (importer records, the action features)
# --------------------------------------------------------------------------------------------

#: Schema metadata key of logs that carry their action (item) feature table: an Arrow IPC
#: stream, base64-encoded. ``ope import obd`` embeds ``item_context.csv`` under it, so the
#: parquet file alone holds everything DM/DR need; :func:`read_logs` restores the table as
#: ``logs.action_features``.
ACTION_FEATURES_KEY: Final = b"ope.action_features"

#: Prefix of ope's own schema metadata keys (``ope.source_format``, ``ope.context_columns``,
#: ``ope.propensity_source``, :data:`ACTION_FEATURES_KEY`, ...), which :func:`read_logs` keeps.
_OPE_METADATA_PREFIX: Final = b"ope."


def read_parquet_input(found: Any, source: str, what: str) -> pa.Table:
    """Every parquet file of a located input (:func:`locate_input`) as one table.

    Raises
    ------
    DataFileError
        A file that is not complete parquet, a directory without parquet files, or a read
        error, naming ``what`` and ``source``.
    """
    import pyarrow.dataset as ds

    try:
        for f in found.files:
            check_parquet_file(f, fs=found.filesystem, in_directory=found.is_dir, what=what)
    except DataFileError as exc:
        raise DataFileError(f"{what} {source} could not be read: {exc}") from None
    if not found.files:
        raise DataFileError(f"{what} {source} is a directory without parquet files.")
    try:
        return ds.dataset(
            list(found.files), format="parquet", filesystem=found.filesystem
        ).to_table()
    except (pa.ArrowException, OSError) as exc:
        raise DataFileError(f"{what} {source} could not be read: {exc}") from None


def read_table(path: str | os.PathLike[str], *, what: str = "table") -> pa.Table:
    """A whole table from a parquet file or directory, or a UTF-8 CSV file (``.csv``,
    ``.csv.gz``), for the small side inputs of a command (item tables, slate logs, scores);
    ``what`` names it in the errors.

    Raises
    ------
    DataFileError
        A missing, empty, truncated or unreadable file.

    Examples
    --------
    >>> import tempfile, pathlib, pyarrow as pa, pyarrow.parquet as pq
    >>> from ope.io import read_table
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "scores.parquet"
    >>> pq.write_table(pa.table({"item": [0, 1], "score": [0.5, 1.0]}), path)
    >>> read_table(path, what="scores table").num_rows
    2
    """
    found = locate_input(path, what=what, argument="path")
    source = str(path)
    name = found.path.lower()
    if not found.is_dir and (name.endswith(".csv") or name.endswith(".csv.gz")):
        import pyarrow.csv as pacsv

        try:
            stream = (
                found.path
                if found.filesystem is None
                else found.filesystem.open_input_stream(found.path)
            )
            table = pacsv.read_csv(stream)
        except (pa.ArrowInvalid, OSError, UnicodeDecodeError) as exc:
            raise DataFileError(f"{what} {source} could not be read as UTF-8 CSV: {exc}") from None
        csv_column_names(table, f"{what} {source}")
        # pyarrow reads a CSV column with bytes that are not UTF-8 as binary
        binary = [
            f.name
            for f in table.schema
            if pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type)
        ]
        if binary:
            raise SchemaError(
                f"{what} {source}: column {binary[0]!r} holds text that is not UTF-8; ope reads "
                "CSV as UTF-8. Re-save the file as UTF-8, e.g. pandas.read_csv(path, "
                "encoding='latin-1').to_csv(path, index=False), using the encoding it was "
                "written in"
            )
    else:
        table = read_parquet_input(found, source, what)
    if table.num_rows == 0:
        raise DataFileError(f"{what} {source} has no rows.")
    return table


def read_item_table(path: str | os.PathLike[str]) -> pa.Table:
    """An item (action-feature) table from a parquet file or directory, or a UTF-8 CSV file:
    one row per action, an ``action`` column and the item's columns (features, clusters,
    embeddings).

    Parameters
    ----------
    path : str or path-like
        The file (``.csv``/``.csv.gz`` is read as CSV, anything else as parquet) or a folder
        of parquet files.

    Returns
    -------
    pyarrow.Table

    Raises
    ------
    DataFileError
        A missing, empty, truncated or unreadable file.
    SchemaError
        No ``action`` column.

    Examples
    --------
    >>> import tempfile, pathlib, pyarrow as pa, pyarrow.parquet as pq
    >>> from ope.io import read_item_table
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "items.parquet"
    >>> pq.write_table(pa.table({"action": [0, 1], "genre": ["a", "b"]}), path)
    >>> read_item_table(path).column_names
    ['action', 'genre']
    """
    source = str(path)
    table = read_table(path, what="item table")
    if "action" not in table.column_names:
        raise SchemaError(
            f"item table {source} has no `action` column (one row per action); its columns: "
            f"{', '.join(table.column_names)}."
        )
    return table


def with_action_features(table: pa.Table, features: pa.Table) -> pa.Table:
    """``table`` with the action-feature table ``features`` embedded in its schema metadata.

    The table travels with the rows: through ``pyarrow.parquet.write_table``, ``take`` and
    ``filter``, and back through :func:`read_logs` (:func:`embedded_action_features`).

    Examples
    --------
    >>> import pyarrow as pa
    >>> from ope.io import embedded_action_features, with_action_features
    >>> logs = pa.table({"action": [1, 0], "propensity": [0.5, 0.5], "reward": [1.0, 0.0]})
    >>> items = pa.table({"action": [0, 1], "price": [9.5, 3.0]})
    >>> embedded_action_features(with_action_features(logs, items).schema).equals(items)
    True
    """
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, features.schema) as writer:
        writer.write_table(features)
    blob = base64.b64encode(sink.getvalue().to_pybytes())
    return table.replace_schema_metadata(
        {**(table.schema.metadata or {}), ACTION_FEATURES_KEY: blob}
    )


def embedded_action_features(schema: pa.Schema) -> pa.Table | None:
    """The action-feature table embedded by :func:`with_action_features` (None without one).

    Raises
    ------
    DataFileError
        The metadata entry is not a base64 Arrow IPC stream (written by something else, or cut).
    """
    raw = (schema.metadata or {}).get(ACTION_FEATURES_KEY)
    if raw is None:
        return None
    try:
        with pa.ipc.open_stream(pa.py_buffer(base64.b64decode(raw, validate=True))) as reader:
            return reader.read_all()
    except (binascii.Error, ValueError, pa.ArrowInvalid) as exc:
        raise DataFileError(
            f"the schema metadata {ACTION_FEATURES_KEY.decode()!r} is not an action-feature table "
            f"(a base64 Arrow IPC stream, as ope import writes): {exc}. Re-import the source, "
            "or remove the entry and pass action_features=... to ope.evaluate."
        ) from None


def _ope_metadata(schema: pa.Schema) -> dict[bytes, bytes]:
    """ope's own entries of a source's schema metadata (other entries, e.g. pandas', describe
    the source's columns, not the validated table), less the propensity provenance, which
    :attr:`provenance` reads from every file of the source."""
    return {
        k: v
        for k, v in (schema.metadata or {}).items()
        if k.startswith(_OPE_METADATA_PREFIX) and not k.startswith(PROVENANCE_PREFIX)
    }


# --------------------------------------------------------------------------------------------
# eager readers
# --------------------------------------------------------------------------------------------


def read_logs(
    source: Source,
    *,
    mapping: Mapping[str, str] | None = None,
    on_invalid: OnInvalid = "raise",
    columns: Sequence[str] | None = None,
) -> BanditLogs:
    """Read and validate bandit / recommendation logs (one row per decision).

    Parameters
    ----------
    source : str, os.PathLike, pyarrow.dataset.Dataset, pyarrow.Table or pandas.DataFrame
        A parquet file, a directory of parquet files (hive partitions become columns), a
        dataset, or data in memory.
    mapping : dict, optional
        ``{"our_name": "their_name"}``: which of your columns hold ope's ``action``,
        ``propensity``, ``reward``, ``event_id``, ``target__<name>``, ... columns.
    on_invalid : {"raise", "drop"}, default "raise"
        What to do with rows that break a rule: raise ``ValidationError`` with the report, or
        drop them, warn with ``DroppedRowsWarning`` and keep the counts in ``logs.report``.
    columns : sequence of str, optional
        Optional columns to read besides the required ``action``, ``propensity``, ``reward``
        (ope's names) and ``weight`` (the sampling weights, read whenever present: they change
        every estimate). Only these are read from parquet. ``None`` reads every column.

    Returns
    -------
    BanditLogs
        The validated table (canonical names and types) and its ``ValidationReport``. ope's
        own schema metadata (keys ``ope.*``: an importer's record of the source, the context
        columns it chose) stays on ``logs.table``; an action-feature table embedded by an
        importer (``ope import obd``: :data:`ACTION_FEATURES_KEY`) becomes
        ``logs.action_features``, which DM/DR and the policy learners join on the action.

    Raises
    ------
    DataFileError
        The path is missing, empty, truncated, corrupt, or not parquet.
    SchemaError
        Required columns are missing or columns cannot be cast without loss (all are listed).
    ValidationError
        Rows break rules (``on_invalid="raise"``), or no row is left. ``.report`` has counts.

    Notes
    -----
    The row rules and their names are listed in ``ope.schema.REJECTION_REASONS``. A row is
    used only if it passes all of them; with ``on_invalid="drop"`` exactly
    ``report.rows_read - report.rows_used`` rows are dropped. Duplicate ``event_id`` values
    reject every occurrence after the first. The ids of dropped rows are kept in
    ``logs.dropped_event_ids``, so that a policy table written for the whole log can still be
    joined: its rows for dropped events are ignored and counted (see
    :func:`ope.policies.target_propensities`).

    A directory is read as the union of its files' columns. Every column ope knows (``action``,
    ``event_id``, ``target__<name>``, ...) must be in every file, in compatible types; another
    column that only some files have (a segment added later) is null in the others. Files and
    folders whose names start with ``.`` or ``_`` (``_SUCCESS``, ``.crc``) are skipped; any
    other file must be parquet. Hive partitions (``day=1/``) become columns. Symbolic links are
    followed, but a file or folder is read once however many paths lead to it (a link to the
    directory itself or to a partition is skipped); a FIFO, socket or device is never opened;
    both are named in ``report.skipped``. A dangling link or a link loop is a
    ``DataFileError``. ``file://`` URIs are local paths; ``s3://``, ``gs://``, ``hdfs://`` and
    ``abfs://`` are read through ``pyarrow.fs``.

    A pandas index is data when it is named: a DataFrame's named index levels become columns,
    and a named RangeIndex that ``DataFrame.to_parquet`` kept only in the file's metadata is
    read as an int64 column when it describes exactly the file's rows within int64 (else a
    ``SchemaError``); metadata never supplies a required column.

    References
    ----------
    .. [1] Apache Parquet file format, https://parquet.apache.org/docs/file-format/

    Examples
    --------
    >>> import pandas as pd
    >>> from ope.io import read_logs
    >>> df = pd.DataFrame({"item": [3, 1, 2], "pscore": [0.5, 0.25, 0.0], "click": [1, 0, 1]})
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     logs = read_logs(df, mapping={"action": "item", "propensity": "pscore",
    ...                                   "reward": "click"}, on_invalid="drop")
    >>> logs.n, logs.report.rejected
    (2, {'propensity_out_of_range': 1})
    >>> logs.column("reward")
    array([1., 0.])
    """
    check_on_invalid(on_invalid)
    opened, plan = _open_and_plan(source, BANDIT, mapping, columns)
    table = conform(opened.read(plan.source_columns), plan)
    masks = check_bandit_rows(table, unit_roundoff=plan.unit_roundoff)
    dropped_ids = _dropped_event_ids(table, masks) if on_invalid == "drop" else None
    table, report = _finish(table, masks, opened, on_invalid, "bandit-log")
    # ope's own entries (an embedded item table, ...) and the propensity provenance of every
    # file of the source (a directory whose files disagree is marked estimated)
    kept = {**_ope_metadata(opened.schema), **opened.provenance}
    if kept:
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), **kept})
    return BanditLogs.from_validated(
        table,
        report,
        dropped_event_ids=dropped_ids,
        unit_roundoff=plan.unit_roundoff,
        action_features=embedded_action_features(table.schema),
    )


def read_trajectories(
    source: Source,
    *,
    mapping: Mapping[str, str] | None = None,
    on_invalid: OnInvalid = "raise",
    columns: Sequence[str] | None = None,
) -> Trajectories:
    """Read and validate multi-step trajectories (one row per step), sorted by episode and step.

    Parameters
    ----------
    source : str, os.PathLike, pyarrow.dataset.Dataset, pyarrow.Table or pandas.DataFrame
        A parquet file, a directory of parquet files, a dataset, or data in memory. Rows may come
        in any order.
    mapping : dict, optional
        ``{"our_name": "their_name"}`` for ``episode_id``, ``step``, ``action``, ``propensity``,
        ``reward``, ``done`` and ``target__<name>`` columns.
    on_invalid : {"raise", "drop"}, default "raise"
        Raise ``ValidationError`` on any invalid row, or drop every episode that holds one
        (its valid rows are counted under ``episode_invalidated``).
    columns : sequence of str, optional
        Optional columns to read besides the required ones; ``None`` reads every column.

    Returns
    -------
    Trajectories
        Sorted by (episode_id, step), with ``episode_starts`` offsets and a per-episode
        ``truncated`` flag.

    Notes
    -----
    Within an episode the steps must be exactly 0, 1, ..., L-1 (rows at the first gap or repeat
    onwards are ``step_not_contiguous``) and ``done`` may be true only at step L-1. An episode
    whose last row has ``done = False`` is valid and marked truncated.

    References
    ----------
    .. [1] Thomas, P. and Brunskill, E. (2016). Data-efficient off-policy policy evaluation for
       reinforcement learning. ICML.

    Examples
    --------
    >>> import pandas as pd
    >>> from ope.io import read_trajectories
    >>> df = pd.DataFrame({"episode_id": [1, 0, 0, 1], "step": [0, 1, 0, 1],
    ...                    "action": [0, 1, 1, 0], "propensity": 0.5, "reward": 1.0,
    ...                    "done": [False, True, False, False]})
    >>> traj = read_trajectories(df)
    >>> traj.episode_starts.tolist(), traj.truncated.tolist()
    ([0, 2, 4], [False, True])
    """
    check_on_invalid(on_invalid)
    opened, plan = _open_and_plan(source, TRAJECTORY, mapping, columns)
    table = conform(opened.read(plan.source_columns), plan)
    masks, order = check_trajectory_rows(table)
    eid = table.column("episode_id")
    report, bad = ValidationReport.from_masks(
        masks, table.num_rows, opened.name, dropped=on_invalid == "drop"
    )
    valid_eid = pc.drop_null(eid)
    kept_eid = eid.filter(pa.array(~bad)) if bad is not None else valid_eid
    report = replace(
        _described(report, opened, table.column_names),
        episodes_read=len(pc.unique(valid_eid)),
        episodes_used=len(pc.unique(kept_eid)),
    )
    # report row numbers are source positions; the result is sorted by (episode_id, step)
    table = table.take(pa.array(order))
    if bad is not None:
        if on_invalid == "raise":
            raise ValidationError(report.failure_message("trajectory"), report=report)
        table = table.filter(pa.array(~bad[order]))
        report.warn_dropped(stacklevel=3)
    if report.rows_used == 0:
        raise report.no_rows_error()
    return Trajectories(table, report)


def read_paired(
    source: Source,
    *,
    mapping: Mapping[str, str] | None = None,
    on_invalid: OnInvalid = "raise",
    columns: Sequence[str] | None = None,
) -> PairedReplays:
    """Read and validate paired replays (counterfactual branches sharing a prefix).

    Parameters
    ----------
    source : str, os.PathLike, pyarrow.dataset.Dataset, pyarrow.Table or pandas.DataFrame
        A parquet file, a directory of parquet files, a dataset, or data in memory.
    mapping : dict, optional
        ``{"our_name": "their_name"}`` for ``pair_id``, ``arm``, ``outcome``, ``replicate``.
    on_invalid : {"raise", "drop"}, default "raise"
        Raise ``ValidationError`` on any invalid row, or drop the invalid rows and every row
        of a pair left without one of the arms (``pair_missing_arm``).
    columns : sequence of str, optional
        Optional columns to read besides the required ones; ``None`` reads every column.

    Returns
    -------
    PairedReplays

    Raises
    ------
    ValidationError
        Rows break rules (``on_invalid="raise"``), no row is left, or fewer than two arms
        remain (a paired comparison needs two).

    Notes
    -----
    A pair is usable when it holds a valid row for every arm present among the valid rows;
    ``(pair_id, arm, replicate)`` must be unique.

    References
    ----------
    .. [1] Rubin, D. B. (1974). Estimating causal effects of treatments in randomized and
       nonrandomized studies. Journal of Educational Psychology 66(5).

    Examples
    --------
    >>> import pandas as pd
    >>> from ope.io import read_paired
    >>> df = pd.DataFrame({"pair_id": [0, 0, 1, 1], "arm": ["a", "b", "a", "b"],
    ...                    "outcome": [1.0, 0.0, 1.0, 1.0]})
    >>> read_paired(df).arms
    ['a', 'b']
    """
    check_on_invalid(on_invalid)
    opened, plan = _open_and_plan(source, PAIRED, mapping, columns)
    table = conform(opened.read(plan.source_columns), plan)
    masks = check_paired_rows(table)
    table, report = _finish(table, masks, opened, on_invalid, "paired-replay")
    arms = pc.unique(table.column("arm"))
    if len(arms) < 2:
        raise ValidationError(
            f"{opened.name} has only one arm ({arms.to_pylist()[0]!r}) among its valid rows; "
            "paired replays compare at least two arms per pair",
            report=report,
        )
    return PairedReplays(table, report)


# --------------------------------------------------------------------------------------------
# streaming
# --------------------------------------------------------------------------------------------


class LogScan:
    """A lazy, validated pass over bandit logs in record batches (see :func:`scan_logs`).

    :meth:`to_batches` (or iterating) yields ``BanditLogs`` batches; each pass re-reads the
    source. ``report`` holds the merged ``ValidationReport`` once a pass has completed, and
    ``seen_id_bytes`` the memory the cross-batch ``event_id`` check used.

    Attributes
    ----------
    source : str
        Where the rows come from.
    columns : list of str
        The columns of every yielded batch (ope's names).
    plan : ope.schema.ColumnPlan
        How source columns are read, renamed and cast (checked before any row is read).
    dataset : pyarrow.dataset.Dataset or None
        The source as a dataset, each column in the widest type of its files (None for data
        in memory).
    on_invalid : {"raise", "drop"}
    batch_size : int

    Examples
    --------
    >>> import pyarrow as pa
    >>> from ope.io import scan_logs
    >>> t = pa.table({"event_id": [1, 2, 3, 2], "action": [0, 1, 0, 1],
    ...               "propensity": [0.5] * 4, "reward": [1.0, 0.0, 1.0, 1.0]})
    >>> scan = scan_logs(t, batch_size=2, on_invalid="drop")
    >>> scan.count_rows(), scan.dataset is None
    (4, True)
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     sizes = [batch.n for batch in scan.to_batches()]
    >>> sizes, scan.report.rejected, scan.report.examples
    ([2, 1], {'event_id_duplicate': 1}, {'event_id_duplicate': (3,)})
    """

    def __init__(self, opened: _Opened, plan: ColumnPlan, on_invalid: str, batch_size: int) -> None:
        self._opened = opened
        self.plan = plan
        self.on_invalid = on_invalid
        self.batch_size = batch_size
        self._report: ValidationReport | None = None
        self.seen_id_bytes = 0

    @property
    def source(self) -> str:
        """Where the rows come from (a path, ``"<DataFrame>"``, ...)."""
        return self._opened.name

    @property
    def columns(self) -> list[str]:
        """The columns of every yielded batch (ope's names)."""
        return self.plan.output_columns

    @property
    def dataset(self) -> ds.Dataset | None:
        """The source as a pyarrow dataset (None for data in memory)."""
        return self._opened.dataset

    @property
    def metadata(self) -> dict[bytes, bytes]:
        """The schema metadata every yielded batch carries: the propensity provenance
        (``ope.propensity_source`` and its companions; see :func:`ope.propensity.propensity_info`)."""
        return self._opened.provenance

    def count_rows(self) -> int:
        """Rows in the source before validation (from parquet footers; reads no data)."""
        return self._opened.count_rows()

    def describe(self, report: ValidationReport) -> ValidationReport:
        """``report`` (of rows of this scan's source) with the source's columns, the number of
        files read and the directory entries skipped, as the readers' reports carry them.

        For code that validates the scan's rows its own way (``ope.distributed``).
        """
        if not isinstance(report, ValidationReport):
            raise ParameterError(
                f"`report` must be an ope.ValidationReport (e.g. from "
                f"ope.ValidationReport.from_masks); got {describe(report)}."
            )
        return _described(report, self._opened, self.columns)

    @property
    def report(self) -> ValidationReport:
        """The merged report of the last complete pass."""
        if self._report is None:
            raise RuntimeError(
                "the scan's report is complete only after a full pass over the data; iterate "
                "over it first (for batch in scan.to_batches(): ...)"
            )
        return self._report

    def __repr__(self) -> str:
        return f"LogScan(source={self.source!r}, columns={self.columns}, batch_size={self.batch_size:,})"

    def __iter__(self) -> Iterator[BanditLogs]:
        return self.to_batches()

    def to_batches(self) -> Iterator[BanditLogs]:
        """One validated pass: ``BanditLogs`` batches, each with its own batch report.

        Raises
        ------
        ope.ValidationError
            At the first batch holding an invalid row under ``on_invalid="raise"``, or at the
            end of a pass that kept no row.
        """
        source = self.source
        drop = self.on_invalid == "drop"
        total = _described(
            ValidationReport(source, 0, 0, dropped=False), self._opened, self.columns
        )
        seen = SeenIds() if "event_id" in self.plan.output_columns else None
        # a bar over rows (its total from the parquet footers, read only when it is drawn)
        bar = progress(
            desc=f"scan {source}",
            total=self.count_rows() if progress_enabled() else None,
            unit="row",
        )
        with bar:
            yield from self._pass(source, drop, total, seen, bar)

    def _pass(
        self, source: str, drop: bool, total: ValidationReport, seen: SeenIds | None, bar: Any
    ) -> Iterator[BanditLogs]:
        offset = 0
        metadata = self.metadata or None
        for batch in self._opened.batches(self.plan.source_columns, self.batch_size):
            n = batch.num_rows
            bar.update(n)
            if n == 0:
                continue
            table = conform(pa.Table.from_batches([batch]), self.plan, row_offset=offset)
            table = table.replace_schema_metadata(metadata)
            masks = check_bandit_rows(table, unit_roundoff=self.plan.unit_roundoff)
            if seen is not None:
                mark_repeats(table, masks, seen)
            part, bad = ValidationReport.from_masks(
                masks, n, source, dropped=drop, row_offset=offset
            )
            total = total.merge(part)
            offset += n
            dropped_ids = None
            if bad is not None:
                if not drop:
                    self._report = None
                    raise ValidationError(
                        total.failure_message(
                            tail=f" (the scan stopped after row {offset - 1:,}; later rows were "
                            "not checked)"
                        ),
                        report=total,
                    )
                dropped_ids = _dropped_event_ids(table, masks)
                table = table.filter(pa.array(~bad))
            if table.num_rows:
                rows = np.arange(offset - n, offset, dtype=np.int64)
                yield BanditLogs.from_validated(
                    table,
                    part,
                    dropped_event_ids=dropped_ids,
                    unit_roundoff=self.plan.unit_roundoff,
                    source_rows=rows if bad is None else rows[~bad],
                )
        self.seen_id_bytes = seen.nbytes if seen is not None else 0
        self._report = total
        if total.rows_used == 0:
            raise total.no_rows_error()
        if total.rows_rejected:
            total.warn_dropped(stacklevel=4)


def scan_logs(
    source: Source,
    *,
    mapping: Mapping[str, str] | None = None,
    on_invalid: OnInvalid = "raise",
    columns: Sequence[str] | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> LogScan:
    """Scan bandit logs lazily: validated record batches in bounded memory.

    Names and types are checked now (so a ``SchemaError`` comes before any data is read);
    rows are read, cast and validated batch by batch while you iterate.

    Parameters
    ----------
    source : str, os.PathLike, pyarrow.dataset.Dataset, pyarrow.Table or pandas.DataFrame
        A parquet file, a directory of parquet files, a dataset, or data in memory.
    mapping : dict, optional
        ``{"our_name": "their_name"}``, as in :func:`read_logs`.
    on_invalid : {"raise", "drop"}, default "raise"
        ``"raise"`` raises ``ValidationError`` at the first batch holding an invalid row (its
        report covers the rows up to the end of that batch). ``"drop"`` drops invalid rows from
        each batch and warns once, with the merged counts, at the end of the pass.
    columns : sequence of str, optional
        Optional columns to read besides the required ones (and ``weight``, read whenever
        present); only these are read from parquet.
    batch_size : int, default 262_144
        Maximum rows per batch (batches can be smaller at row-group and file boundaries).

    Returns
    -------
    LogScan
        Iterate for ``BanditLogs`` batches (each with its own batch report); ``.report`` gives
        the merged report after a complete pass.

    Notes
    -----
    Every rule of :func:`read_logs` applies per batch, and ``event_id_duplicate`` is also
    checked across batches: a complete pass yields exactly the rows :func:`read_logs` keeps and
    the same merged report. The ids seen so far are kept as sorted numpy arrays: 8 bytes per
    distinct int64 id (16 bytes transiently while runs merge), or, per string id, an 8-byte
    hash plus the longest id's length and one byte, with every hash match confirmed on the
    bytes (``LogScan.seen_id_bytes`` after a pass). Scanning without an ``event_id`` column
    keeps no per-row state.

    References
    ----------
    .. [1] Apache Arrow, Tabular Datasets, https://arrow.apache.org/docs/python/dataset.html

    Examples
    --------
    >>> import pandas as pd
    >>> from ope.io import scan_logs
    >>> df = pd.DataFrame({"event_id": range(10), "action": 1, "propensity": 0.5, "reward": 1.0})
    >>> scan = scan_logs(df, batch_size=4)
    >>> [batch.n for batch in scan]
    [4, 4, 2]
    >>> scan.report.rows_used
    10
    """
    check_on_invalid(on_invalid)
    batch_size = check_positive_int(batch_size, "batch_size")
    opened, plan = _open_and_plan(source, BANDIT, mapping, columns)
    return LogScan(opened, plan, on_invalid, batch_size)
