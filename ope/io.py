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
"""

from __future__ import annotations

import os
import sys
import warnings
from dataclasses import replace
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from ope.exceptions import DataFileError, DroppedRowsWarning, SchemaError, ValidationError
from ope.logs import EXAMPLE_ROWS, BanditLogs, PairedReplays, Trajectories, ValidationReport
from ope.schema import (
    BANDIT,
    LogSchema,
    _column_problem,
    _id_type_of,
    BITMAP_FACTOR,
    BITMAP_MIN_BYTES,
    PAIRED,
    REJECTION_REASONS,
    TRAJECTORY,
    ColumnPlan,
    check_bandit_rows,
    check_paired_rows,
    check_trajectory_rows,
    conform,
    plan_columns,
)

__all__ = ["read_logs", "scan_logs", "read_trajectories", "read_paired", "LogScan"]

#: Default rows per batch of :func:`scan_logs`: about 10 MB per float64 column, large enough
#: to amortise per-batch overhead and small enough to keep several columns in cache-friendly,
#: bounded memory.
DEFAULT_BATCH_SIZE: Final[int] = 262_144

_PARQUET_MAGIC: Final[bytes] = b"PAR1"
_ON_INVALID: Final = ("raise", "drop")

OnInvalid = Literal["raise", "drop"]
Source = Any  # str | os.PathLike | pandas.DataFrame | pyarrow.Table | pyarrow.dataset.Dataset


# --------------------------------------------------------------------------------------------
# sources
# --------------------------------------------------------------------------------------------


def _check_parquet_file(path: Path) -> None:
    """Raise a DataFileError unless ``path`` looks like a complete parquet file."""
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            head = fh.read(4)
            if size >= 8:
                fh.seek(-4, os.SEEK_END)
            tail = fh.read(4)
    except OSError as exc:
        raise DataFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    if size == 0:
        raise DataFileError(
            f"{path} is empty (0 bytes), not a parquet file; was the write interrupted?"
        )
    if head != _PARQUET_MAGIC:
        raise DataFileError(
            f"{path} is not a parquet file (it does not start with the parquet magic bytes "
            f"'PAR1' but with {head!r}). ope reads parquet: convert CSV/JSON first, e.g. "
            "pandas.read_csv(path).to_parquet('logs.parquet'), or pass a DataFrame"
        )
    if size < 12 or tail != _PARQUET_MAGIC:
        raise DataFileError(
            f"{path} is a truncated parquet file (it has no parquet footer; {size:,} bytes). "
            "It was probably cut short while being written or copied; rewrite or re-copy it"
        )


class _Opened:
    """A source resolved to a name, an Arrow schema, and ways to read it."""

    def __init__(
        self, name: str, dataset: ds.Dataset | None, table: pa.Table | None,
        file: Path | None = None,
        file_schemas: dict[str, pa.Schema] | None = None,
    ) -> None:
        self.name = name
        self.dataset = dataset
        self.table = table
        self.file = file
        self.file_schemas = file_schemas or {}
        self.reopen: Any = None  # schema -> dataset, for directories

    def reconcile(self, plan: ColumnPlan, log_schema: LogSchema) -> None:
        """Check the planned columns in every file of a directory; read them in one type.

        A dataset takes its schema from one file and casts the others to it on read, which
        could parse strings into numbers or narrow float64 to float32 silently. Instead, every
        file must hold every planned column in a type ope accepts, and each column is read in
        the widest type of its files.
        """
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
            if missing:
                problems.append(
                    f"column {name!r} is missing from {len(missing)} of {len(self.file_schemas)} "
                    f"files (e.g. {missing[0]})"
                )
            if kind is not None:
                for path, t in types.items():
                    problem = _column_problem(t, kind, plan.id_types.get("action"))
                    if problem is None and kind == "int64 or string" and _id_type_of(t) != plan.id_types[ours]:
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
        return self.dataset.schema if self.dataset is not None else self.table.schema

    def read(self, columns: Sequence[str]) -> pa.Table:
        if self.table is not None:
            return self.table.select(list(columns))
        try:
            return self.dataset.to_table(columns=list(columns))
        except (pa.ArrowException, OSError) as exc:
            raise DataFileError(f"cannot read {self.name}: {exc}") from None

    def batches(self, columns: Sequence[str], batch_size: int) -> Iterator[pa.RecordBatch]:
        if self.table is not None:
            yield from self.table.select(list(columns)).to_batches(max_chunksize=batch_size)
            return
        try:
            if self.file is not None:
                # a single file: read row group by row group without read-ahead, which keeps
                # the peak memory at about one row group (Dataset.to_batches buffers ahead)
                reader = pq.ParquetFile(self.file)
                yield from reader.iter_batches(columns=list(columns), batch_size=batch_size)
            else:
                yield from self.dataset.to_batches(
                    columns=list(columns), batch_size=batch_size, batch_readahead=1,
                    fragment_readahead=1,
                )
        except (pa.ArrowException, OSError) as exc:
            raise DataFileError(f"cannot read {self.name}: {exc}") from None


def _from_pandas(df: Any) -> pa.Table:
    try:
        return pa.Table.from_pandas(df, preserve_index=False)
    except (pa.ArrowException, TypeError, ValueError):
        pass
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
        "the DataFrame cannot be converted to Arrow:\n  - " + "\n  - ".join(problems)
        + "\nConvert each column to one type (e.g. pandas.to_numeric or .astype(str))"
    )


def _open(source: Source) -> _Opened:
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.exists():
            raise DataFileError(f"{path} does not exist; check the path (cwd is {Path.cwd()})")
        if path.is_dir():
            try:
                dataset = ds.dataset(path, format="parquet", partitioning="hive",
                                     exclude_invalid_files=False)
            except (pa.ArrowException, OSError) as exc:
                raise DataFileError(f"cannot open the parquet directory {path}: {exc}") from None
            if not dataset.files:
                raise DataFileError(
                    f"{path} is a directory without parquet files (files whose names start "
                    "with '.' or '_' are ignored)"
                )
            for f in dataset.files:
                _check_parquet_file(Path(f))
            try:
                # re-open now that every file is known to be parquet (reads the footers)
                dataset = ds.dataset(sorted(dataset.files), format="parquet",
                                     partitioning=ds.partitioning(flavor="hive"),
                                     partition_base_dir=str(path))
            except (pa.ArrowException, OSError) as exc:
                raise DataFileError(f"cannot open the parquet files in {path}: {exc}") from None
            file_schemas = {}
            for fragment in dataset.get_fragments():
                try:
                    file_schemas[fragment.path] = fragment.physical_schema
                except (pa.ArrowException, OSError) as exc:
                    raise DataFileError(
                        f"{fragment.path} is not a readable parquet file: {exc}"
                    ) from None
            opened = _Opened(str(path), dataset, None, file_schemas=file_schemas)
            files = sorted(dataset.files)

            def reopen(schema: pa.Schema) -> ds.Dataset:
                return ds.dataset(files, schema=schema, format="parquet",
                                  partitioning=ds.partitioning(flavor="hive"),
                                  partition_base_dir=str(path))

            opened.reopen = reopen
            return opened
        _check_parquet_file(path)
        try:
            dataset = ds.dataset(path, format="parquet")
            dataset.schema  # noqa: B018 - forces the footer to be read
        except (pa.ArrowException, OSError) as exc:
            raise DataFileError(f"{path} is not a readable parquet file: {exc}") from None
        return _Opened(str(path), dataset, None, file=path)
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
    raise TypeError(
        "source must be a parquet path (file or directory), a pyarrow.dataset.Dataset, a "
        "pyarrow.Table, a pandas.DataFrame or an object exporting an Arrow stream; got "
        f"{type(source).__name__}"
    )


def _check_on_invalid(on_invalid: str) -> None:
    if on_invalid not in _ON_INVALID:
        raise ValueError(f'on_invalid must be "raise" or "drop", got {on_invalid!r}')


# --------------------------------------------------------------------------------------------
# reports
# --------------------------------------------------------------------------------------------


def _report(
    masks: dict[str, np.ndarray], n: int, source: str, *, dropped: bool,
    examples_from: np.ndarray | None = None,
) -> tuple[ValidationReport, np.ndarray | None]:
    """Build a report; return it with the mask of rejected rows (None when none)."""
    if not masks:
        return ValidationReport(source, n, n, dropped=False), None
    bad = np.zeros(n, dtype=bool)
    rejected: dict[str, int] = {}
    examples: dict[str, tuple[int, ...]] = {}
    for reason, mask in masks.items():
        bad |= mask
        rejected[reason] = int(np.count_nonzero(mask))
        examples[reason] = tuple(int(r) for r in np.flatnonzero(mask)[:EXAMPLE_ROWS])
    used = n - int(np.count_nonzero(bad))
    return ValidationReport(source, n, used, rejected, examples, dropped=dropped), bad


def _fail_message(report: ValidationReport, what: str, tail: str = "") -> str:
    lines = [
        f"{report.rows_rejected:,} of {report.rows_read:,} rows of {report.source} break "
        f"{what} rules{tail}:",
        str(report),
        "rules broken:",
    ]
    for reason in sorted(report.rejected):
        lines.append(f"  {reason}: {REJECTION_REASONS[reason]}")
    lines.append(
        'Fix the data, or pass on_invalid="drop" to drop these rows (they stay counted in '
        "the .report of the result)."
    )
    return "\n".join(lines)


def _warn_dropped(report: ValidationReport, stacklevel: int) -> None:
    reasons = ", ".join(f"{k}: {v:,}" for k, v in sorted(report.rejected.items()))
    warnings.warn(
        f"dropped {report.rows_rejected:,} of {report.rows_read:,} rows of {report.source} "
        f"({reasons}); see .report for the first row numbers of each reason",
        DroppedRowsWarning,
        stacklevel=stacklevel,
    )


def _no_rows(report: ValidationReport) -> ValidationError:
    if report.rows_read == 0:
        return ValidationError(
            f"{report.source} holds no rows; there is nothing to evaluate", report=report
        )
    return ValidationError(
        f"every one of the {report.rows_read:,} rows of {report.source} was rejected; nothing "
        f"is left to evaluate:\n{report}",
        report=report,
    )


def _finish(
    table: pa.Table, masks: dict[str, np.ndarray], source: str, on_invalid: str, what: str
) -> tuple[pa.Table, ValidationReport]:
    report, bad = _report(masks, table.num_rows, source, dropped=on_invalid == "drop")
    if bad is not None:
        if on_invalid == "raise":
            raise ValidationError(_fail_message(report, what), report=report)
        table = table.filter(pa.array(~bad))
        _warn_dropped(report, stacklevel=4)
    if report.rows_used == 0:
        raise _no_rows(report)
    return table, report


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
        (ope's names). Only these are read from parquet. ``None`` reads every column.

    Returns
    -------
    BanditLogs
        The validated table (canonical names and types) and its ``ValidationReport``.

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
    reject every occurrence after the first.

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
    _check_on_invalid(on_invalid)
    opened = _open(source)
    plan = plan_columns(opened.schema, BANDIT, mapping=mapping, columns=columns, source=opened.name)
    opened.reconcile(plan, BANDIT)
    table = conform(opened.read(plan.source_columns), plan)
    masks = check_bandit_rows(table)
    table, report = _finish(table, masks, opened.name, on_invalid, "bandit-log")
    return BanditLogs(table, report)


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
    _check_on_invalid(on_invalid)
    opened = _open(source)
    plan = plan_columns(opened.schema, TRAJECTORY, mapping=mapping, columns=columns,
                        source=opened.name)
    opened.reconcile(plan, TRAJECTORY)
    table = conform(opened.read(plan.source_columns), plan)
    masks, order = check_trajectory_rows(table)
    eid = table.column("episode_id")
    report, bad = _report(masks, table.num_rows, opened.name, dropped=on_invalid == "drop")
    valid_eid = pc.drop_null(eid)
    kept_eid = eid.filter(pa.array(~bad)) if bad is not None else valid_eid
    report = replace(
        report, episodes_read=len(pc.unique(valid_eid)), episodes_used=len(pc.unique(kept_eid))
    )
    # report row numbers are source positions; the result is sorted by (episode_id, step)
    table = table.take(pa.array(order))
    if bad is not None:
        if on_invalid == "raise":
            raise ValidationError(_fail_message(report, "trajectory"), report=report)
        table = table.filter(pa.array(~bad[order]))
        _warn_dropped(report, stacklevel=3)
    if report.rows_used == 0:
        raise _no_rows(report)
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
    _check_on_invalid(on_invalid)
    opened = _open(source)
    plan = plan_columns(opened.schema, PAIRED, mapping=mapping, columns=columns, source=opened.name)
    opened.reconcile(plan, PAIRED)
    table = conform(opened.read(plan.source_columns), plan)
    masks = check_paired_rows(table)
    table, report = _finish(table, masks, opened.name, on_invalid, "paired-replay")
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


class _SeenIds:
    """The event ids of earlier batches of a scan, stored compactly.

    Integer ids live in a byte map over ``[min, max]`` while it stays dense (at most
    ``BITMAP_FACTOR`` bytes per id seen, or ``BITMAP_MIN_BYTES`` in all); beyond that, and for
    string ids, they live in a few sorted numpy runs (a log-structured set: 8 bytes per int64
    id, the longest id's length per string id; lookups are binary searches of sorted needles).
    """

    def __init__(self) -> None:
        self._runs: list[np.ndarray] = []
        self._map: np.ndarray | None = None  # byte map of integer ids
        self._lo = 0
        self._count = 0
        self._max: int | None = None

    @property
    def nbytes(self) -> int:
        return sum(r.nbytes for r in self._runs) + (self._map.nbytes if self._map is not None else 0)

    @staticmethod
    def as_numpy(ids: pa.Array | pa.ChunkedArray) -> np.ndarray:
        if pa.types.is_integer(ids.type):
            return np.asarray(ids.to_numpy(), dtype=np.int64)
        return np.asarray(pc.cast(ids, pa.binary()).to_numpy(zero_copy_only=False)).astype(np.bytes_)

    def contains(self, x: np.ndarray) -> np.ndarray:
        """Which of the (distinct) ids ``x`` were seen before."""
        if x.size == 0 or self._count == 0:
            return np.zeros(x.size, dtype=bool)
        if x.dtype.kind == "i":
            if int(x.min()) > self._max:
                return np.zeros(x.size, dtype=bool)  # ids increasing across batches
            if self._map is not None:
                rel = x - self._lo
                inside = (rel >= 0) & (rel < self._map.size)
                hit = np.zeros(x.size, dtype=bool)
                hit[inside] = self._map[rel[inside]]
                return hit
        xs = np.sort(x)
        hs = np.zeros(x.size, dtype=bool)
        for run in self._runs:
            pos = np.searchsorted(run, xs)
            np.minimum(pos, run.size - 1, out=pos)
            hs |= run[pos] == xs
        if not hs.any():
            return np.zeros(x.size, dtype=bool)
        return np.isin(x, xs[hs])

    def add(self, x: np.ndarray) -> None:
        """Remember the (distinct, unseen) ids ``x``."""
        if x.size == 0:
            return
        self._count += x.size
        if x.dtype.kind == "i":
            lo, hi = int(x.min()), int(x.max())
            self._max = hi if self._max is None else max(self._max, hi)
            if not self._runs:
                new_lo = lo if self._map is None else min(lo, self._lo)
                span = self._max - new_lo + 1
                if span <= max(BITMAP_FACTOR * self._count, BITMAP_MIN_BYTES):
                    if self._map is None or new_lo < self._lo or span > self._map.size:
                        # grow with head room so that increasing ids reallocate rarely
                        grown = np.zeros(span + span // 2, dtype=np.bool_)
                        if self._map is not None:
                            grown[self._lo - new_lo : self._lo - new_lo + self._map.size] = self._map
                        self._map, self._lo = grown, new_lo
                    self._map[x - self._lo] = True
                    return
                if self._map is not None:  # too sparse for a map: switch to sorted runs
                    self._runs.append(np.flatnonzero(self._map).astype(np.int64) + self._lo)
                    self._map = None
        self._push(np.sort(x))

    def _push(self, run: np.ndarray) -> None:
        self._runs.append(run)
        while len(self._runs) > 1 and self._runs[-2].size <= 2 * self._runs[-1].size:
            b = self._runs.pop()
            a = self._runs.pop()
            self._runs.append(_merge_sorted(a, b))


def _merge_sorted(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Merge two sorted arrays in O(len(a) + len(b)) memory traffic."""
    dtype = np.result_type(a, b)
    out = np.empty(a.size + b.size, dtype=dtype)
    at = np.searchsorted(a, b) + np.arange(b.size)
    from_a = np.ones(out.size, dtype=bool)
    from_a[at] = False
    out[at] = b
    out[from_a] = a
    return out


class LogScan:
    """A lazy, validated pass over bandit logs in record batches (see :func:`scan_logs`).

    Iterating yields ``BanditLogs`` batches; each pass re-reads the source. ``report`` holds
    the merged ``ValidationReport`` once a pass has completed, and ``seen_id_bytes`` the memory
    the cross-batch ``event_id`` check used.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from ope.io import scan_logs
    >>> t = pa.table({"event_id": [1, 2, 3, 2], "action": [0, 1, 0, 1],
    ...               "propensity": [0.5] * 4, "reward": [1.0, 0.0, 1.0, 1.0]})
    >>> scan = scan_logs(t, batch_size=2, on_invalid="drop")
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     sizes = [batch.n for batch in scan]
    >>> sizes, scan.report.rejected, scan.report.examples
    ([2, 1], {'event_id_duplicate': 1}, {'event_id_duplicate': (3,)})
    """

    def __init__(
        self, opened: _Opened, plan: ColumnPlan, on_invalid: str, batch_size: int
    ) -> None:
        self._opened = opened
        self._plan = plan
        self._on_invalid = on_invalid
        self.batch_size = batch_size
        self._report: ValidationReport | None = None
        self.seen_id_bytes = 0

    @property
    def source(self) -> str:
        return self._opened.name

    @property
    def columns(self) -> list[str]:
        """The columns of every yielded batch (ope's names)."""
        return self._plan.output_columns

    @property
    def report(self) -> ValidationReport:
        """The merged report of the last complete pass."""
        if self._report is None:
            raise RuntimeError(
                "the scan's report is complete only after a full pass over the data; iterate "
                "over it first (for batch in scan: ...)"
            )
        return self._report

    def __repr__(self) -> str:
        return f"LogScan(source={self.source!r}, columns={self.columns}, batch_size={self.batch_size:,})"

    def __iter__(self) -> Iterator[BanditLogs]:
        source = self._opened.name
        drop = self._on_invalid == "drop"
        total = ValidationReport(source, 0, 0, dropped=False)
        seen = _SeenIds() if "event_id" in self._plan.output_columns else None
        offset = 0
        for batch in self._opened.batches(self._plan.source_columns, self.batch_size):
            n = batch.num_rows
            if n == 0:
                continue
            table = conform(pa.Table.from_batches([batch]), self._plan, row_offset=offset)
            masks = check_bandit_rows(table)
            if seen is not None:
                self._cross_batch_duplicates(table, masks, seen)
            part, bad = _report(masks, n, source, dropped=drop)
            if part.examples:  # batch reports, too, give source row numbers
                part = replace(
                    part, examples={k: tuple(r + offset for r in v) for k, v in part.examples.items()}
                )
            total = total.merge(part)
            offset += n
            if bad is not None:
                if not drop:
                    self._report = None
                    raise ValidationError(
                        _fail_message(
                            total, "bandit-log",
                            f" (the scan stopped after row {offset - 1:,}; later rows were not checked)",
                        ),
                        report=total,
                    )
                table = table.filter(pa.array(~bad))
            if table.num_rows:
                yield BanditLogs(table, part)
        self.seen_id_bytes = seen.nbytes if seen is not None else 0
        self._report = total
        if total.rows_used == 0:
            raise _no_rows(total)
        if total.rows_rejected:
            _warn_dropped(total, stacklevel=3)

    @staticmethod
    def _cross_batch_duplicates(table: pa.Table, masks: dict[str, np.ndarray], seen: _SeenIds) -> None:
        eid = table.column("event_id")
        missing = masks.get("event_id_missing")
        dup = masks.get("event_id_duplicate")
        first = np.ones(table.num_rows, dtype=bool)
        if missing is not None:
            first &= ~missing
        if dup is not None:
            first &= ~dup
        rows = np.flatnonzero(first) if not first.all() else None
        ids = eid if rows is None else eid.take(pa.array(rows))
        x = _SeenIds.as_numpy(ids)  # distinct: duplicates within the batch are excluded
        hit = seen.contains(x)
        if hit.any():
            cross = np.zeros(table.num_rows, dtype=bool)
            cross[rows[hit] if rows is not None else np.flatnonzero(hit)] = True
            masks["event_id_duplicate"] = cross if dup is None else dup | cross
        seen.add(x[~hit])


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
        Optional columns to read besides the required ones; only these are read from parquet.
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
    distinct int64 id (16 bytes transiently while runs merge), or the longest id's length in
    bytes per string id (``LogScan.seen_id_bytes`` after a pass). Scanning without an
    ``event_id`` column keeps no per-row state.

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
    _check_on_invalid(on_invalid)
    if not isinstance(batch_size, (int, np.integer)) or isinstance(batch_size, bool) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    opened = _open(source)
    plan = plan_columns(opened.schema, BANDIT, mapping=mapping, columns=columns, source=opened.name)
    opened.reconcile(plan, BANDIT)
    return LogScan(opened, plan, on_invalid, int(batch_size))
