"""Off-policy evaluation on Spark: the streaming kernel inside ``DataFrame.mapInArrow``.

:func:`evaluate_spark` runs the per-batch step of ``ope.evaluate`` on a lazy source (conform and
validate the rows → target propensities → :class:`ope.streaming.MomentStats`) inside each Spark
partition, on the Arrow batches Spark hands to Python, and merges the statistics within the
partition. Each partition sends back plain numeric Arrow columns (the statistics'
:meth:`~ope.streaming.MomentStats.to_columns`, the validation counts and first row numbers),
never pickled objects; the driver merges them in partition order. The numbers equal
``ope.evaluate`` on the same rows up to floating-point summation order, as those of
:func:`ope.distributed.evaluate_distributed` (Dask) do.

Spark is an optional dependency: ``pip install 'ope-toolkit[spark]'`` (pyspark, which needs a
Java runtime). The executors import ope too: install it wherever the Python workers run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ope import exceptions as _exceptions
from ope._dedup import SeenIds, mark_known, mark_repeats
from ope._validation import RowOrigin, check_choice, check_positive_int
from ope.evaluation import Evaluation, EvaluationPlan, batch_statistics
from ope.exceptions import (
    DataFileError,
    MissingDependencyError,
    OPEError,
    ParameterError,
    SchemaError,
    ValidationError,
)
from ope.io import check_on_invalid
from ope.logs import BanditLogs, ValidationReport
from ope.schema import BANDIT, ColumnPlan, check_bandit_rows, conform, plan_columns
from ope.streaming import MomentStats
from ope.weights import sampling_weight_column

__all__ = ["evaluate_spark", "DEFAULT_BATCH_SIZE"]

#: Default maximum rows per statistics step: Spark hands Python Arrow batches of
#: ``spark.sql.execution.arrow.maxRecordsPerBatch`` rows (10,000 by default), and each step
#: has a fixed cost (conform, validate, one kernel call) of about a millisecond; gathering
#: batches up to 2**20 rows (about 8 MB per float64 column) makes that cost negligible while a
#: task holds only one such block at a time.
DEFAULT_BATCH_SIZE: Final[int] = 1 << 20

_SPARK_HINT: Final = (
    "evaluate_spark needs pyspark (and a Java runtime), which are optional; install them with: "
    "pip install 'ope-toolkit[spark]'"
)
_CHECK_DUPLICATES: Final = ("global", "partition")

#: Most event-id intervals a partition reports. A partition often holds several files (Spark
#: packs small files together), whose id ranges are disjoint; one (min, max) per partition
#: would make every partition overlap another and force the cross-partition check, while up
#: to this many intervals (split at the largest gaps between its sorted ids) keep them apart.
ID_INTERVALS: Final[int] = 64

#: The schema of what each partition sends back: one row per item, numbers only in ``values``
#: (``name`` carries a reason, a column or an error class and message).
_OUT_SCHEMA: Final = pa.schema(
    [
        ("partition", pa.int32()),
        ("key", pa.string()),
        ("name", pa.string()),
        ("values", pa.list_(pa.float64())),
    ]
)
_OUT_DDL: Final = "partition INT, key STRING, name STRING, values ARRAY<DOUBLE>"


def _import_spark() -> Any:
    """Import pyspark.sql lazily, with the install hint."""
    try:
        import pyspark.sql
    except ImportError as exc:
        raise MissingDependencyError(f"{_SPARK_HINT} ({exc})") from exc
    return pyspark.sql


# --------------------------------------------------------------------------------------------
# the task: what one partition computes
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Task:
    """Settings shared by every partition (shipped once with the function)."""

    plan: ColumnPlan
    source: str
    policies: Any
    estimators: tuple[Any, ...]  # the plan's weighting estimators (the clip level inside)
    dropped: bool
    weight_column: str | None
    batch_size: int
    #: partition -> event ids that occur in an earlier partition (None: first pass, every
    #: partition runs; else only the partitions named run)
    exclusions: Mapping[int, Any] | None = None


def _rows(partition: int, key: str, name: str, values: Sequence[float]) -> dict[str, Any]:
    return {"partition": partition, "key": key, "name": name, "values": [float(v) for v in values]}


def _blocks(batches: Iterator[pa.RecordBatch], size: int) -> Iterator[pa.Table]:
    """Spark's Arrow batches gathered into tables of at least ``size`` rows (the last fewer)."""
    pending: list[pa.RecordBatch] = []
    rows = 0
    for batch in batches:  # loop over Arrow batches, not rows
        pending.append(batch)
        rows += batch.num_rows
        if rows >= size:
            yield pa.Table.from_batches(pending)
            pending, rows = [], 0
    if pending:
        yield pa.Table.from_batches(pending)


def _partition_items(task: _Task, partition: int, batches: Iterator[pa.RecordBatch]) -> list[Any]:
    """Validate one partition block by block and merge its statistics; the items to send."""
    stats = None
    report: ValidationReport | None = None
    offset = 0
    seen = SeenIds()
    low = high = None  # string ids: the smallest and largest
    spans = np.empty((0, 2))  # integer ids: disjoint intervals covering them
    known = None if task.exclusions is None else task.exclusions.get(partition)
    # a task does not know how many rows the partitions before its own hold: its messages
    # number the rows of its partition, and say so
    within = f"Spark partition {partition}"
    where = (
        f"in {within} of {task.source}, whose rows are numbered from 0 in the order Spark reads "
        "them: a Spark task does not know how many rows the partitions before it hold"
    )
    for raw in _blocks(batches, task.batch_size):  # loop over blocks of Arrow batches
        try:
            table = conform(raw, task.plan, row_offset=offset)
        except SchemaError as exc:  # its row numbers already count the partition's rows
            raise RowOrigin(where, None, within=within).located(exc) from exc.__cause__
        n = table.num_rows
        masks = check_bandit_rows(table, unit_roundoff=task.plan.unit_roundoff)
        if "event_id" in table.column_names:
            mark_known(table, masks, known)
            mark_repeats(table, masks, seen)
            ids = pc.drop_null(table.column("event_id"))
            if pa.types.is_integer(ids.type):
                values = np.sort(ids.to_numpy()).astype(np.float64)  # repeats: gaps of 0
                spans = _spans(np.concatenate([spans, _spans(values)]))
            elif len(ids):
                lo, hi = pc.min_max(ids).values()
                low = lo.as_py() if low is None else min(low, lo.as_py())
                high = hi.as_py() if high is None else max(high, hi.as_py())
        part, bad = ValidationReport.from_masks(
            masks, n, task.source, dropped=task.dropped, row_offset=offset
        )
        report = part if report is None else report.merge(part)
        if part.rows_used:
            if bad is not None:
                table = table.filter(pa.array(~bad))
            logs = BanditLogs.from_validated(table, part, unit_roundoff=task.plan.unit_roundoff)
            origin = RowOrigin(where, offset, None if bad is None else ~bad, within=within)
            step = batch_statistics(
                logs, task.policies, task.estimators, task.weight_column, origin=origin
            )
            stats = step if stats is None else stats.merge(step)
        offset += n
    report = report or ValidationReport(task.source, 0, 0)
    items = [_rows(partition, "rows", "", [report.rows_read, report.rows_used])]
    for reason, count in report.rejected.items():  # loop over rejection reasons
        items.append(
            _rows(partition, "rejected", reason, [count, *report.examples.get(reason, ())])
        )
    for reason, columns in report.rejected_by_column.items():
        for column, count in columns.items():  # loop over culprit columns
            first = report.examples_by_column.get(reason, {}).get(column, ())
            items.append(_rows(partition, f"by_column.{reason}", column, [count, *first]))
    if stats is not None:
        for key, arr in stats.to_columns().items():  # loop over the statistics' arrays
            items.append(_rows(partition, f"stats.{key}", "", arr.tolist()))
    if low is not None and high is not None:
        items.append(_rows(partition, "id_low", str(low), []))
        items.append(_rows(partition, "id_high", str(high), []))
    elif len(spans):  # float64 rounding is monotonic: overlapping intervals stay overlapping
        items.append(_rows(partition, "id_spans", "", spans.ravel().tolist()))
    return items


def _spans(values: np.ndarray) -> np.ndarray:
    """At most ID_INTERVALS disjoint intervals (k, 2) covering sorted integer ids ``values``
    (points, or the rows of intervals (m, 2)): runs of consecutive ids are one interval, and
    the runs are joined across the smallest gaps until ID_INTERVALS remain."""
    if values.ndim == 2:  # intervals: in order of their starts, each extending the largest end
        order = np.argsort(values[:, 0], kind="stable")
        lows, highs = values[order, 0], np.maximum.accumulate(values[order, 1])
    else:
        lows = highs = values
    if not len(lows):
        return np.empty((0, 2))
    gaps = lows[1:] - highs[:-1]
    cut = np.flatnonzero(gaps > 1.0)  # a gap of 1 joins consecutive ids
    if len(cut) > ID_INTERVALS - 1:  # keep the ID_INTERVALS - 1 largest gaps
        cut = np.sort(cut[np.argpartition(gaps[cut], -(ID_INTERVALS - 1))[-(ID_INTERVALS - 1) :]])
    return np.column_stack([np.r_[lows[0], lows[cut + 1]], np.r_[highs[cut], highs[-1]]])


def _run_partition(task: _Task, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The function ``mapInArrow`` runs on each partition's Arrow batches.

    An ope error (a column that cannot be cast, a policy object that fails) travels back as
    an ``error`` item naming its class, so the driver raises the same class.
    """
    from pyspark import TaskContext

    context = TaskContext.get()
    partition = context.partitionId() if context is not None else 0
    if task.exclusions is not None and partition not in task.exclusions:
        for _ in batches:  # a partition the rerun leaves as it was: nothing to send
            pass
        return
    try:
        items = _partition_items(task, partition, batches)
    except OPEError as exc:
        items = [_rows(partition, "error", f"{type(exc).__name__}\n{exc}", [])]
    yield pa.RecordBatch.from_pylist(items, schema=_OUT_SCHEMA)


# --------------------------------------------------------------------------------------------
# the driver: decode and merge
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Result:
    """What the driver rebuilt of one partition."""

    stats: MomentStats | None
    report: ValidationReport
    id_spans: list[tuple[Any, Any]] | None  # intervals covering the partition's event ids


def _decode(
    table: pa.Table, source: str, names: Sequence[str], weight_name: str, dropped: bool
) -> dict[int, _Result]:
    """The partitions' items, rebuilt as statistics and reports (partition -> result)."""
    by_part: dict[int, list[tuple[str, str, list[float]]]] = {}
    for part, key, name, values in zip(
        table.column("partition").to_pylist(),
        table.column("key").to_pylist(),
        table.column("name").to_pylist(),
        table.column("values").to_pylist(),
    ):  # loop over a few items per partition, not rows
        by_part.setdefault(int(part), []).append((key, name, values))
    out: dict[int, _Result] = {}
    for part, items in sorted(by_part.items()):  # loop over partitions
        for key, name, _ in items:
            if key == "error":
                kind, _, message = name.partition("\n")
                cls = getattr(_exceptions, kind, None)
                if not (isinstance(cls, type) and issubclass(cls, OPEError)):
                    cls = OPEError
                raise cls(message)
        rows_read = rows_used = 0
        rejected: dict[str, int] = {}
        examples: dict[str, tuple[int, ...]] = {}
        by_column: dict[str, dict[str, int]] = {}
        examples_by_column: dict[str, dict[str, tuple[int, ...]]] = {}
        columns: dict[str, np.ndarray] = {}
        spans: Any = None
        low = None
        for key, name, values in items:  # loop over the partition's items
            if key == "rows":
                rows_read, rows_used = int(values[0]), int(values[1])
            elif key == "rejected":
                rejected[name] = int(values[0])
                examples[name] = tuple(int(v) for v in values[1:])
            elif key.startswith("by_column."):
                reason = key[len("by_column.") :]
                by_column.setdefault(reason, {})[name] = int(values[0])
                examples_by_column.setdefault(reason, {})[name] = tuple(int(v) for v in values[1:])
            elif key.startswith("stats."):
                columns[key[len("stats.") :]] = np.asarray(values, dtype=np.float64)
            elif key == "id_spans":
                spans = [tuple(pair) for pair in np.reshape(values, (-1, 2)).tolist()]
            elif key == "id_low":
                low = name
            elif key == "id_high":
                spans = [(low, name)]
        report = ValidationReport(
            source,
            rows_read,
            rows_used,
            rejected,
            examples,
            dropped=dropped and bool(rejected),
            rejected_by_column=by_column,
            examples_by_column=examples_by_column,
        )
        stats = (
            MomentStats.from_columns(columns, names=names, weight_name=weight_name)
            if columns
            else None
        )
        out[part] = _Result(stats, report, spans)
    return out


def _overlapping(spans: Mapping[int, Sequence[tuple[Any, Any]]]) -> list[int]:
    """Partitions one of whose event-id intervals overlaps another partition's (only they can
    share an id).

    Sorted by their starts, the intervals form chains in which each starts before the largest
    end so far; the partitions of every chain holding two or more partitions are returned.
    """
    items = sorted(((lo, hi, part) for part, s in spans.items() for lo, hi in s), key=_start)
    out: set[int] = set()
    chain: set[int] = set()
    end = None
    for lo, hi, part in items:  # loop over intervals (a few per partition)
        if end is not None and lo <= end:
            chain.add(part)
            end = max(end, hi)
            continue
        if len(chain) > 1:
            out |= chain
        chain, end = {part}, hi
    if len(chain) > 1:
        out |= chain
    return sorted(out)


def _start(item: tuple[Any, Any, int]) -> Any:
    return item[0]


def _partition_ids(
    column: str, members: frozenset[int], batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """The function ``mapInArrow`` runs to list a member partition's non-null event ids (as the
    source holds them), each with the partition's index."""
    from pyspark import TaskContext

    context = TaskContext.get()
    partition = context.partitionId() if context is not None else 0
    for batch in batches:  # loop over Arrow batches, not rows
        if partition not in members:
            continue
        ids = pc.drop_null(batch.column(column))
        yield pa.RecordBatch.from_arrays(
            [pa.array(np.full(len(ids), partition, dtype=np.int32)), ids], names=["part", "id"]
        )


def _later_occurrences(
    sql: Any, frame: Any, id_column: str, members: Sequence[int], id_type: pa.DataType
) -> dict[int, Any]:
    """Partition -> the event ids it holds that also occur in an earlier partition.

    The ids of ``members`` (the partitions whose id ranges overlap) are listed by the same
    ``mapInArrow`` plan as the statistics, so that the partition indices agree, and a Spark
    aggregation keeps the ids that several partitions hold.
    """
    f = sql.functions
    index = frame.columns.index(id_column)
    spark_type = frame.schema.fields[index].dataType.simpleString()
    chosen = frozenset(int(m) for m in members)
    pairs = frame.select(f.col(_quoted(id_column)).alias("id")).mapInArrow(
        lambda batches: _partition_ids("id", chosen, batches), f"part INT, id {spark_type}"
    )
    shared = (
        pairs.groupBy("id")
        .agg(f.array_sort(f.collect_set("part")).alias("parts"))
        .where(f.size("parts") > 1)
    )
    found: dict[int, list[Any]] = {}
    for row in shared.toLocalIterator():  # loop over ids held by several partitions
        for part in row["parts"][1:]:  # every partition after the first holding the id
            found.setdefault(int(part), []).append(row["id"])
    return {part: pa.array(ids_, type=id_type) for part, ids_ in found.items()}


def _quoted(column: str) -> str:
    """A column name as Spark's ``col`` reads it literally (dots and spaces included)."""
    return "`" + column.replace("`", "``") + "`"


def _frame(sql: Any, source: Any, spark: Any) -> tuple[Any, str]:
    """The Spark DataFrame of ``source`` and its name in messages."""
    if isinstance(source, sql.DataFrame):
        return source, "<Spark DataFrame>"
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        session = spark
        if session is None:
            session = sql.SparkSession.getActiveSession() or sql.SparkSession.builder.getOrCreate()
        if "://" not in path and not os.path.exists(path):
            raise DataFileError(f"source {path!r} does not exist; give a parquet file or folder.")
        try:
            return session.read.parquet(path), path
        except Exception as exc:  # pyspark's AnalysisException and JVM errors
            raise DataFileError(f"Spark cannot read {path!r} as parquet: {exc}") from None
    raise ParameterError(
        "`source` must be a Spark DataFrame or the path of a parquet file or folder; got "
        f"{type(source).__name__}. For data in memory use ope.evaluate(...)."
    )


def evaluate_spark(
    source: Any,
    policies: Sequence[str] | Mapping[str, Any] | None = None,
    *,
    estimators: Sequence[Any] | str = ("ips", "snips"),
    ci: str = "normal",
    confidence_level: float = 0.95,
    reward_range: tuple[float, float] | None = None,
    max_weight: float | None = None,
    spark: Any = None,
    mapping: Mapping[str, str] | None = None,
    on_invalid: Literal["raise", "drop"] = "raise",
    columns: Sequence[str] | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    check_duplicates: Literal["global", "partition"] = "global",
    weight_column: str | None = None,
) -> Evaluation:
    """Evaluate candidate policies on logs in Spark: the moment kernel in each partition.

    Parameters
    ----------
    source : pyspark.sql.DataFrame, str or os.PathLike
        A Spark DataFrame of logs in ope's schema (see ``ope.schema``), or the path of a
        parquet file or directory, read with ``spark.read.parquet``.
    policies : None, list of str, or dict of str to policy object
        ``None`` evaluates every ``target__<name>`` column; a list names some of them; a dict
        maps names to policy objects of ``ope.policies`` (shipped to the executors). A
        long-format policy table needs the whole log: use ``ope.evaluate(ope.read_logs(...))``.
    estimators : sequence of str or estimator objects, default ("ips", "snips")
        Among ``ips``, ``clipped_ips`` and ``snips``: the estimators computed from mergeable
        sums (DM and DR need a reward model fitted on the rows).
    ci : str, default "normal"
        Interval method of ``ci_low``/``ci_high``: ``normal``, ``t``, or with an a priori
        ``reward_range`` ``hoeffding``, ``bernstein`` and (clipped IPS) ``bottou``.
    confidence_level : float, default 0.95
    reward_range : (float, float), optional
        A priori range of the rewards (clicks: (0, 1)). Never taken from the data.
    max_weight : float, optional
        Clip level of ``clipped_ips``.
    spark : pyspark.sql.SparkSession, optional
        The session that reads a path; ``None`` uses the active session (else Spark's default,
        ``SparkSession.builder.getOrCreate()``). A DataFrame runs on its own session.
    mapping : dict, optional
        ``{"our_name": "their_name"}``, as in :func:`ope.read_logs`.
    on_invalid : {"raise", "drop"}, default "raise"
        ``"raise"``: validate every partition, then raise ``ValidationError`` whose ``report``
        covers all rows. ``"drop"``: drop invalid rows, warn once with the merged counts.
    columns : sequence of str, optional
        Optional columns to read besides the required ones (ope's names); ``None`` reads all.
    batch_size : int, default DEFAULT_BATCH_SIZE
        Rows per statistics step: a partition's Arrow batches are gathered into blocks of at
        least this many rows (the partition's last block fewer).
    check_duplicates : {"global", "partition"}, default "global"
        ``"global"`` rejects every repeat of an ``event_id``, across partitions as within
        (see Notes). ``"partition"`` checks within each partition only and says so in the
        result's notes.
    weight_column : str, optional
        Column of the rows' sampling (Horvitz-Thompson) weights; by default the ``weight``
        column when the logs have one. The estimates are then the weighted ones of
        ``ope.evaluate`` (normal and t intervals; the bounded methods refuse weighted rows).

    Returns
    -------
    ope.Evaluation
        ``streaming=True``; ``report`` is the merged ``ValidationReport``, whose row numbers
        count rows in the DataFrame's order (partition by partition, as ``collect`` gives them).

    Raises
    ------
    ope.MissingDependencyError
        pyspark is not installed.
    SchemaError, DataFileError, PolicyError
        As the readers and ``ope.evaluate`` raise them; schema problems are found from the
        DataFrame's schema before any task runs. An error of a partition's rows (a value that
        cannot be cast, a policy object's propensity above 1) names "row k of Spark partition
        j": a task does not know how many rows the partitions before its own hold.
    ValidationError
        Invalid rows under ``on_invalid="raise"``, or no valid row.
    EstimationError
        An estimator, interval or option that needs the rows.

    Notes
    -----
    Each partition yields the mergeable statistics of :class:`ope.streaming.MomentStats`
    (means and centred co-moments of the weights and weighted rewards of every candidate),
    sent as flat float64 Arrow columns (:meth:`ope.streaming.MomentStats.to_columns`); the
    driver merges them by Chan, Golub & LeVeque's pairwise update, exactly as the scan and
    Dask paths do, so the numbers equal the eager ones up to the summation order (about
    :math:`10^{-16}` relative per merge).

    With ``check_duplicates="global"`` a row is rejected as ``event_id_duplicate`` when its id
    occurred at an earlier row of the DataFrame. Repeats within a partition are found by its
    task, which also sends its smallest and largest id; only partitions whose id ranges
    overlap can share an id (none when ids grow with the partitions), and for those a Spark
    aggregation lists the ids held by several partitions, whose later partitions then run
    again with those rows rejected (or the call raises under ``on_invalid="raise"``).

    References
    ----------
    .. [1] M. Zaharia et al., "Apache Spark: a unified engine for big data processing",
       Communications of the ACM 59(11), 56-65, 2016.
    .. [2] T. F. Chan, G. H. Golub and R. J. LeVeque, "Updating formulae and a pairwise
       algorithm for computing sample variances", COMPSTAT 1982.

    Examples
    --------
    >>> import ope
    >>> from pyspark.sql import SparkSession                      # doctest: +SKIP
    >>> spark = SparkSession.builder.master("local[2]").getOrCreate()  # doctest: +SKIP
    >>> ev = ope.evaluate_spark("logs/", estimators=("ips", "snips"),
    ...                         spark=spark)                      # doctest: +SKIP
    >>> ev.table()[["policy", "estimator", "value", "n"]]        # doctest: +SKIP
    """
    sql = _import_spark()
    check_on_invalid(on_invalid)
    check_choice(check_duplicates, "check_duplicates", _CHECK_DUPLICATES)
    batch_size = check_positive_int(batch_size, "batch_size")
    if spark is not None and not isinstance(spark, sql.SparkSession):
        raise ParameterError(
            "spark must be a pyspark.sql.SparkSession (or None for the active session); got "
            f"{type(spark).__name__}."
        )
    plan = EvaluationPlan.build(
        policies,
        estimators=estimators,
        ci=ci,
        confidence_level=confidence_level,
        reward_range=reward_range,
        max_weight=max_weight,
        weight_column=weight_column,
    )
    plan.check_streamable("on Spark (evaluate_spark)")
    frame, name = _frame(sql, source, spark)
    from pyspark.sql.pandas.types import to_arrow_schema

    try:
        schema = to_arrow_schema(frame.schema)
    except Exception as exc:  # a Spark type without an Arrow counterpart
        raise SchemaError(f"{name}: its schema has no Arrow equivalent: {exc}") from None
    # names and types are checked here, before any task runs
    col_plan = plan_columns(schema, BANDIT, mapping=mapping, columns=columns, source=name)
    read = col_plan.output_columns
    names = plan.candidate_names(read, name)
    weights = sampling_weight_column(read, weight_column)
    task = _Task(
        plan=col_plan,
        source=name,
        policies=policies,
        estimators=tuple(plan.weighting),
        dropped=on_invalid == "drop",
        weight_column=weights,
        batch_size=batch_size,
    )
    selected = frame.select(*[sql.functions.col(_quoted(c)) for c in col_plan.source_columns])
    weight_name = weights or "sampling_weight"

    def run(task: _Task) -> dict[int, _Result]:
        out = selected.mapInArrow(lambda batches: _run_partition(task, batches), _OUT_DDL)
        return _decode(out.toArrow(), name, names, weight_name, task.dropped)

    results = run(task)
    global_check = check_duplicates == "global" and "event_id" in read
    if global_check:
        spans = {p: r.id_spans for p, r in results.items() if r.id_spans is not None}
        members = _overlapping(spans)
        if members:
            (id_source,) = [c for c in col_plan.source_columns if col_plan.renames[c] == "event_id"]
            exclusions = _later_occurrences(
                sql, selected, id_source, members, col_plan.id_types["event_id"]
            )
            if exclusions:  # rerun the partitions holding repeats of earlier partitions' ids
                results.update(run(replace(task, exclusions=exclusions)))
    report = ValidationReport(name, 0, 0)
    stats = None
    for part in sorted(results):  # loop over partitions, in order
        res = results[part]
        report = report.merge(res.report, row_offset=report.rows_read)
        if res.stats is not None:
            stats = res.stats if stats is None else stats.merge(res.stats)
    report = replace(report, dropped=on_invalid == "drop" and not report.ok, columns=tuple(read))
    partition_only = "event_id" in read and not global_check
    if not report.ok and on_invalid == "raise":
        caveat = (
            "(event_id duplicates were checked within each partition only: "
            'check_duplicates="partition")'
        )
        raise ValidationError(
            report.failure_message(caveats=[caveat] if partition_only else []), report=report
        )
    if report.rows_used == 0 or stats is None:
        raise report.no_rows_error()
    if report.rows_rejected:
        report.warn_dropped(stacklevel=2)
    notes = []
    if partition_only:
        notes.append(
            f"event_id duplicates were checked within each of the {len(results)} Spark "
            'partitions only (check_duplicates="partition"); a repeat across partitions was '
            "not detected."
        )
    settings = replace(plan.settings, weight_column=weights)
    return Evaluation.from_statistics(stats, plan.resolved, settings, report=report, notes=notes)
