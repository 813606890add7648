"""Off-policy evaluation past one machine: the streaming kernel as Dask tasks.

:func:`evaluate_distributed` runs the per-batch kernel of ``ope.evaluate`` over a lazy scan
(conform and validate the rows → target propensities → :class:`ope.streaming.MomentStats`) as one
``dask.delayed`` task per parquet file or group of row groups, and merges the statistics and the
validation reports by an ordered tree reduction. The numbers equal
``ope.evaluate(ope.scan_logs(source), ...)`` up to floating-point summation order.

Each task reads its row groups with pyarrow (a column projection, no pandas), so the data never
pass through the client. Dask is an optional dependency: ``pip install 'ope-toolkit[dask]'``.
"""

from __future__ import annotations


import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from ope._dedup import mark_known
from ope._validation import RowOrigin, check_choice, check_positive_int, describe
from ope.evaluation import (
    Evaluation,
    EvaluationPlan,
    batch_statistics,
    check_embedding,
    merged_marginal_notes,
)
from ope.exceptions import DataFileError, ParameterError, SchemaError, ValidationError
from ope.io import check_on_invalid, scan_logs
from ope.logs import BanditLogs, ValidationReport
from ope._provenance import propensity_notes
from ope.propensity import propensity_source
from ope.schema import ColumnPlan, check_bandit_rows, conform
from ope.weights import sampling_weight_column

__all__ = ["evaluate_distributed", "DEFAULT_BATCH_SIZE", "REDUCTION_FAN_IN", "ID_BUCKETS"]

#: Default maximum rows per task: 2**20 rows is about 8 MB per float64 column, large enough
#: that the scheduler's per-task overhead (about a millisecond) is negligible next to reading
#: and validating the rows, small enough that a worker holds only a few such blocks at once.
DEFAULT_BATCH_SIZE: Final[int] = 1 << 20

#: Children per node of the reduction tree. Merging statistics is cheap, so a wide tree keeps
#: the number of tasks and levels low (10,000 partitions reduce in 5 levels) while no node
#: receives more than this many partial results.
REDUCTION_FAN_IN: Final[int] = 8

#: Hash buckets of the global event_id check (a power of two). Each bucket's ids reduce in a
#: tree of their own, so the check runs in parallel and its largest task holds about 1/16 of
#: the distinct ids instead of all of them.
ID_BUCKETS: Final[int] = 16

#: Fibonacci hashing multiplier (2**64 / golden ratio). Multiplying int64 ids by it modulo
#: 2**64 is a bijection (the multiplier is odd) that spreads structured ids (strides, ranges)
#: evenly over the buckets, which are the top bits; the inverse recovers the ids exactly.
_FIB: Final[int] = 0x9E3779B97F4A7C15
_FIB_INV: Final[int] = pow(_FIB, -1, 1 << 64)

_DASK_HINT: Final = (
    "evaluate_distributed needs Dask and dask.distributed, which are optional; install them "
    "with: pip install 'ope-toolkit[dask]'"
)
_CHECK_DUPLICATES: Final = ("global", "partition")


def _import_dask() -> Any:
    """Import dask lazily with an install hint."""
    try:
        import dask
        from dask import delayed  # noqa: F401 - checks the submodule is importable
    except ImportError as exc:
        raise ImportError(f"{_DASK_HINT} ({exc})") from exc
    return dask


# --------------------------------------------------------------------------------------------
# the per-partition kernel
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Partition:
    """One task's share of the source: row groups of one parquet file."""

    index: int
    path: str
    filesystem: Any
    partition_expression: Any
    row_groups: tuple[int, ...]
    row_offset: int  # source row number of the first row (files in path order)
    num_rows: int


@dataclass(frozen=True)
class _Kernel:
    """Settings shared by every task (shipped once to the workers)."""

    schema: pa.Schema
    file_format: ds.ParquetFileFormat  # the dataset's (keeps its read options)
    plan: ColumnPlan
    id_plan: ColumnPlan | None  # reads the event_id column alone
    source: str
    policies: Any
    estimators: tuple[Any, ...]  # the plan's weighting estimators (the clip level inside)
    dropped: bool
    weight_column: str | None = None
    embedding: Any = None  # the plan's ActionEmbedding, for MIPS and SNMIPS
    marginal: tuple[Any, ...] = ()  # the plan's (key, estimator) pairs of MIPS and SNMIPS


@dataclass(frozen=True)
class _Partial:
    """Merged statistics and report of a run of consecutive partitions."""

    stats: Any  # MomentStats, or None when no row was used
    report: ValidationReport
    id_ranges: dict[int, tuple[Any, Any]]  # partition -> (smallest, largest) event_id


@dataclass(frozen=True)
class _IdSet:
    """Distinct event ids of consecutive partitions, the partition of each id's first
    occurrence, and the (id, partition) pairs of later occurrences in other partitions."""

    ids: Any  # numpy uint64 keys of int64 ids (see _keys), or a pyarrow string array
    tags: np.ndarray  # int32 partition index per id
    dup_ids: Any
    dup_tags: np.ndarray


def _read(part: _Partition, kernel: _Kernel, plan: ColumnPlan) -> pa.Table:
    """Read the planned columns of a partition and conform them to ope's names and types."""
    fragment = kernel.file_format.make_fragment(
        part.path,
        part.filesystem,
        partition_expression=part.partition_expression,
        row_groups=list(part.row_groups),
    )
    try:
        table = fragment.to_table(schema=kernel.schema, columns=list(plan.source_columns))
    except (pa.ArrowException, OSError) as exc:
        raise DataFileError(
            f"cannot read row groups {list(part.row_groups)} of {part.path}: {exc}"
        ) from None
    try:
        return conform(table, plan, row_offset=part.row_offset)
    except SchemaError as exc:
        raise SchemaError(f"in {part.path}: {exc}") from None


def _id_values(ids: pa.ChunkedArray | pa.Array) -> Any:
    """Ids as a numpy int64 array (integer ids) or a pyarrow string array (exact comparison)."""
    if isinstance(ids, pa.ChunkedArray):
        ids = ids.combine_chunks()
    if pa.types.is_integer(ids.type):
        return np.asarray(ids.to_numpy(), dtype=np.int64)
    return ids


def _keys(ids: np.ndarray) -> np.ndarray:
    """uint64 keys of int64 ids: a bijection whose top bits are well-mixed hash bits."""
    return ids.view(np.uint64) * np.uint64(_FIB)  # wraps modulo 2**64


def _ids_of(keys: np.ndarray) -> np.ndarray:
    """The int64 ids of uint64 keys (the inverse of :func:`_keys`)."""
    return (keys * np.uint64(_FIB_INV)).view(np.int64)


def _buckets(ids: Any, n_buckets: int) -> np.ndarray:
    """The hash bucket (0 .. n_buckets-1) of each id; the same id always gets the same bucket."""
    if n_buckets == 1:
        return np.zeros(len(ids), dtype=np.intp)
    if isinstance(ids, np.ndarray):
        h = _keys(ids)
    else:
        import pandas as pd

        h = pd.util.hash_array(ids.to_numpy(zero_copy_only=False))  # deterministic SipHash
    return (h >> np.uint64(64 - (n_buckets.bit_length() - 1))).astype(np.intp)


def _bucketed_id_sets(ids: Any, index: int, n_buckets: int) -> list[_IdSet]:
    """Split a partition's distinct ids by hash bucket, each bucket sorted.

    Integer ids are stored as their uint64 keys, sorted: the buckets are then consecutive
    runs (the top bits), and every merge up a bucket's tree is a merge of sorted runs.
    """
    bits = n_buckets.bit_length() - 1
    if isinstance(ids, np.ndarray):
        ids = np.sort(_keys(ids))
        starts = (
            np.arange(1, n_buckets, dtype=np.uint64) << np.uint64(64 - bits)
            if bits
            else np.zeros(0, dtype=np.uint64)
        )
        bounds = np.concatenate(([0], np.searchsorted(ids, starts), [ids.size])).astype(np.intp)
    else:
        ids = ids.take(pc.sort_indices(ids))
        bucket = _buckets(ids, n_buckets).astype(np.uint8)  # n_buckets <= ID_BUCKETS < 256
        order = np.argsort(bucket, kind="stable")  # a radix sort; keeps each bucket sorted
        ids = ids.take(pa.array(order))
        bounds = np.concatenate(([0], np.cumsum(np.bincount(bucket, minlength=n_buckets))))
    tags = np.full(len(ids), index, dtype=np.int32)
    no_tags = np.zeros(0, dtype=np.int32)
    return [
        _IdSet(ids[bounds[b] : bounds[b + 1]], tags[bounds[b] : bounds[b + 1]], ids[:0], no_tags)
        for b in range(n_buckets)  # loop over buckets
    ]


def _partition_stats(kernel: _Kernel, part: _Partition, earlier_ids: Any) -> _Partial:
    """Validate one partition and compute its MomentStats, report and event_id range.

    ``earlier_ids`` holds the ids of this partition that occur in earlier partitions: their rows
    are rejected as ``event_id_duplicate``, as a sequential scan would.
    """

    table = _read(part, kernel, kernel.plan)
    n = table.num_rows
    masks = check_bandit_rows(table, unit_roundoff=kernel.plan.unit_roundoff)
    id_ranges: dict[int, tuple[Any, Any]] = {}
    if "event_id" in table.column_names:
        mark_known(table, masks, earlier_ids)
        lo, hi = pc.min_max(table.column("event_id")).values()  # nulls are skipped
        if lo.is_valid:
            id_ranges[part.index] = (lo.as_py(), hi.as_py())
    report, bad = ValidationReport.from_masks(
        masks, n, kernel.source, dropped=kernel.dropped, row_offset=part.row_offset
    )
    stats = None
    if report.rows_used:
        if bad is not None:
            table = table.filter(pa.array(~bad))
        logs = BanditLogs.from_validated(table, report, unit_roundoff=kernel.plan.unit_roundoff)
        stats = batch_statistics(
            logs,
            kernel.policies,
            kernel.estimators,
            kernel.weight_column,
            embedding=kernel.embedding,
            marginal=kernel.marginal,
            origin=RowOrigin(
                f"in partition {part.index} of {kernel.source}: {part.path}, row groups "
                f"{list(part.row_groups)}, source rows {part.row_offset:,} to "
                f"{part.row_offset + n - 1:,}",
                offset=part.row_offset,
                kept=None if bad is None else ~bad,
            ),
        )
    return _Partial(stats, report, id_ranges)


def _partition_ids(kernel: _Kernel, part: _Partition, n_buckets: int) -> list[_IdSet]:
    """The distinct event ids of one partition (read alone), split into hash buckets."""
    assert kernel.id_plan is not None  # ids are gathered only when the logs have event_id
    table = _read(part, kernel, kernel.id_plan)
    ids = pc.unique(pc.drop_null(table.column("event_id").combine_chunks()))
    return _bucketed_id_sets(_id_values(ids), part.index, n_buckets)


# --------------------------------------------------------------------------------------------
# the reductions
# --------------------------------------------------------------------------------------------


def _merge_partials(*parts: _Partial) -> _Partial:
    """Merge partial results of consecutive partitions, in order (associative)."""
    stats = None
    report = parts[0].report
    id_ranges: dict[int, tuple[Any, Any]] = {}
    for i, part in enumerate(parts):  # loop over a few partial results, not rows
        if i:
            report = report.merge(part.report)  # example rows are already source positions
        if part.stats is not None:
            stats = part.stats if stats is None else stats.merge(part.stats)
        id_ranges.update(part.id_ranges)
    return _Partial(stats, report, id_ranges)


def _overlapping(id_ranges: dict[int, tuple[Any, Any]]) -> list[int]:
    """Partitions whose event_id range overlaps another's (only they can share an id).

    Sorted by their smallest id, the ranges form chains in which each range starts before the
    largest end so far; every partition of a chain of two or more is returned.
    """
    order = sorted(id_ranges, key=lambda i: id_ranges[i][0])
    out: list[int] = []
    chain: list[int] = []
    end = None
    for i in order:  # loop over partitions
        lo, hi = id_ranges[i]
        if end is not None and lo <= end:
            chain.append(i)
            end = max(end, hi)
            continue
        if len(chain) > 1:
            out += chain
        chain, end = [i], hi
    if len(chain) > 1:
        out += chain
    return sorted(out)


def _concat_ids(values: Sequence[Any]) -> Any:
    if isinstance(values[0], np.ndarray):
        return np.concatenate(values)
    return pa.concat_arrays(values)


def _merge_id_sets(*sets: _IdSet) -> _IdSet:
    """Union of the id sets of consecutive partitions, in order (associative).

    Within each set every id is distinct. After a stable sort of the concatenation, the first of
    each run of equal ids comes from the earliest partition; the others are later occurrences.
    """
    ids = _concat_ids([s.ids for s in sets])
    tags = np.concatenate([s.tags for s in sets])
    if isinstance(ids, np.ndarray):
        order = np.argsort(ids, kind="stable")
        ids = ids[order]
        later = np.zeros(ids.size, dtype=bool)
        np.equal(ids[1:], ids[:-1], out=later[1:])
    else:
        order = pc.sort_indices(ids).to_numpy()  # Arrow's sort is stable
        ids = ids.take(pa.array(order))
        later = np.zeros(len(ids), dtype=bool)
        if len(ids) > 1:
            later[1:] = pc.equal(ids[1:], ids[:-1]).to_numpy(zero_copy_only=False)
    tags = tags[order]
    if later.any():
        keep = ~later
        new_ids = ids[later] if isinstance(ids, np.ndarray) else ids.filter(pa.array(later))
        new_tags = tags[later]
        ids = ids[keep] if isinstance(ids, np.ndarray) else ids.filter(pa.array(keep))
        tags = tags[keep]
    else:
        new_ids, new_tags = ids[:0], tags[:0]
    dup_ids = _concat_ids([s.dup_ids for s in sets] + [new_ids])
    dup_tags = np.concatenate([s.dup_tags for s in sets] + [new_tags])
    return _IdSet(ids, tags, dup_ids, dup_tags)


def _duplicates_only(*roots: _IdSet) -> tuple[Any, np.ndarray]:
    """The later occurrences (id, partition) of every bucket; the unions stay on the workers."""
    ids = _concat_ids([r.dup_ids for r in roots])
    return (_ids_of(ids) if isinstance(ids, np.ndarray) else ids), np.concatenate(
        [r.dup_tags for r in roots]
    )


def _tree(dask: Any, items: list[Any], combine: Any, prefix: str) -> Any:
    """An ordered tree reduction of delayed objects with REDUCTION_FAN_IN children per node."""
    level = 0
    while len(items) > 1:  # loop over tree levels and nodes, not rows
        items = [
            dask.delayed(combine, pure=False)(
                *items[i : i + REDUCTION_FAN_IN], dask_key_name=f"{prefix}-{level}-{i}"
            )
            for i in range(0, len(items), REDUCTION_FAN_IN)
        ]
        level += 1
    return items[0]


# --------------------------------------------------------------------------------------------
# planning
# --------------------------------------------------------------------------------------------


def _partitions(dataset: ds.Dataset, source: str, batch_size: int) -> list[_Partition]:
    """Split the files (in the scan's order) into runs of row groups of at most batch_size rows."""
    parts: list[_Partition] = []
    offset = 0
    for fragment in dataset.get_fragments():  # loop over files
        if not isinstance(fragment, ds.ParquetFileFragment):
            raise ParameterError(
                f"evaluate_distributed reads parquet files; {source} holds a "
                f"{type(fragment).__name__}. Use ope.evaluate(ope.scan_logs(...)) instead."
            )
        try:
            meta = fragment.metadata
        except (pa.ArrowException, OSError) as exc:
            raise DataFileError(
                f"cannot read the parquet footer of {fragment.path}: {exc}"
            ) from None
        sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
        # runs of consecutive row groups of at most batch_size rows (one run per oversized group)
        runs: list[list[int]] = [[]]
        run_rows = 0
        for i, size in enumerate(sizes):  # loop over row groups
            if runs[-1] and run_rows + size > batch_size:
                runs.append([])
                run_rows = 0
            if size:
                runs[-1].append(i)
                run_rows += size
        for run in runs:  # loop over the runs of this file
            if not run:
                continue
            rows = sum(sizes[i] for i in run)
            parts.append(
                _Partition(
                    len(parts),
                    fragment.path,
                    fragment.filesystem,
                    fragment.partition_expression,
                    tuple(run),
                    offset,
                    rows,
                )
            )
            offset += rows
    return parts


def _id_plan(plan: ColumnPlan) -> ColumnPlan:
    """The plan reading only the event_id column."""
    (source,) = [c for c in plan.source_columns if plan.renames[c] == "event_id"]
    return replace(plan, source_columns=(source,))


#: What evaluate_distributed reads: parquet files, which each task opens itself.
_SOURCES: Final = (
    "a parquet file or directory (a str or os.PathLike path, local or on a filesystem the "
    "workers reach) or a pyarrow.dataset.Dataset of parquet files"
)


def _check_client(client: Any) -> None:
    """``client`` is None or a dask.distributed.Client, else a ParameterError."""
    if client is None:
        return
    try:
        from distributed import Client
    except ImportError:  # then no Client can exist
        is_client = False
    else:
        is_client = isinstance(client, Client)
    if not is_client:
        raise ParameterError(
            "client must be a dask.distributed.Client (or None for Dask's default scheduler); "
            f"got {describe(client)}."
        )


def _check_source(source: Any) -> None:
    """``source`` names parquet files the tasks can read, else a ParameterError that says
    what to pass instead (rows in memory go to ope.evaluate)."""
    if isinstance(source, (str, os.PathLike, ds.Dataset)):
        return
    kind = type(source)
    if kind.__module__.split(".")[0] in ("dask", "dask_expr"):
        raise ParameterError(
            f"evaluate_distributed reads parquet files inside the workers; got a Dask "
            f"{kind.__name__}. Write it with .to_parquet(path) and pass the path, or use "
            "ope.evaluate(...) on data that fits in memory."
        )
    if kind.__name__ == "LogScan":
        raise ParameterError(
            "evaluate_distributed scans the files itself; got an ope.scan_logs(...) scan. Pass "
            "the path it scans (with the same mapping= and columns=)."
        )
    in_memory = (
        isinstance(source, (pa.Table, pa.RecordBatch, BanditLogs))
        or kind.__name__ in ("DataFrame", "Series")
        or hasattr(source, "__arrow_c_stream__")
    )
    raise ParameterError(
        f"source must be {_SOURCES}; got "
        + (
            f"a {kind.__name__} in memory. Use ope.evaluate(...) for data that fits in memory, "
            "or write it to parquet first."
            if in_memory
            else f"{describe(source)}."
            + (
                " For a list of files pass their directory, or "
                "pyarrow.dataset.dataset([...], format='parquet')."
                if isinstance(source, (list, tuple))
                else ""
            )
        )
    )


def evaluate_distributed(
    source: Any,
    policies: Sequence[str] | Mapping[str, Any] | None = None,
    *,
    estimators: Sequence[Any] | str = ("ips", "snips"),
    ci: str = "normal",
    confidence_level: float = 0.95,
    reward_range: tuple[float, float] | None = None,
    max_weight: float | None = None,
    weight_bound: float | None = None,
    client: Any = None,
    mapping: Mapping[str, str] | None = None,
    on_invalid: Literal["raise", "drop"] = "raise",
    columns: Sequence[str] | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    check_duplicates: Literal["global", "partition"] = "global",
    weight_column: str | None = None,
    embedding: Any = None,
) -> Any:
    """Evaluate candidate policies on parquet logs with Dask: one task per file or row-group run.

    Parameters
    ----------
    source : str, os.PathLike or pyarrow.dataset.Dataset
        A parquet file, a directory of parquet files (hive partitions become columns), or a
        parquet ``FileSystemDataset`` (e.g. on object storage the workers can reach).
    policies : None, list of str, or dict of str to policy object
        ``None`` evaluates every ``target__<name>`` column; a list names some of them; a dict
        maps names to policy objects of ``ope.policies`` (pickled to the workers). A
        long-format policy table needs the whole log: use ``ope.evaluate(ope.read_logs(...))``.
    estimators : sequence of str or estimator objects, default ("ips", "snips")
        Among ``ips``, ``clipped_ips`` and ``snips`` (and with ``embedding`` ``mips`` and
        ``snmips``): the estimators computed from mergeable sums (DM and DR need a reward model
        fitted on the rows).
    ci : str, default "normal"
        Interval method of ``ci_low``/``ci_high``: ``normal``, ``t``, or with an a priori
        ``reward_range`` ``hoeffding``, ``bernstein`` and (clipped IPS) ``bottou``.
    confidence_level : float, default 0.95
    reward_range : (float, float), optional
        A priori range of the rewards (clicks: (0, 1)). Never taken from the data.
    max_weight : float, optional
        Clip level of ``clipped_ips``.
    weight_bound : float, optional
        A priori bound on the importance weights π_e/π_b of every context and action (e.g.
        1 / the smallest probability the logger can give), used by the ``hoeffding`` and
        ``bernstein`` intervals of IPS and SNIPS, as in :func:`ope.evaluate`. The largest
        observed weight is not a bound.
    client : dask.distributed.Client, optional
        Run on this client's cluster; ``None`` uses Dask's default scheduler (a client made
        current with ``Client(...)`` or ``with client:``, else the local thread pool).
    mapping : dict, optional
        ``{"our_name": "their_name"}``, as in :func:`ope.read_logs`.
    on_invalid : {"raise", "drop"}, default "raise"
        ``"raise"``: validate every partition, then raise ``ValidationError`` whose ``report``
        covers all rows. ``"drop"``: drop invalid rows, warn once with the merged counts.
    columns : sequence of str, optional
        Optional columns to read besides the required ones (ope's names); ``None`` reads all.
    batch_size : int, default DEFAULT_BATCH_SIZE
        Maximum rows per task. Each file is split at row-group boundaries into runs of at most
        this many rows (a larger row group is one task by itself); files are never combined.
    check_duplicates : {"global", "partition"}, default "global"
        ``"global"`` rejects every repeat of an ``event_id``, across partitions as within
        (see Notes). ``"partition"`` checks within each partition only, never reads ids
        twice, and says so in the result's notes.
    weight_column : str, optional
        Column of the rows' sampling (Horvitz-Thompson) weights; by default the ``weight``
        column when the files have one. Each partition then accumulates
        :class:`ope.moments.WeightedMoments`, and the estimates are the weighted ones of
        ``ope.evaluate`` (normal and t intervals; the bounded methods refuse weighted rows).
    embedding : ope.ActionEmbedding, optional
        How items map to embeddings, for ``mips`` and ``snmips``: each partition computes its
        rows' embedding propensities from its own candidates and distributions (give the item
        table with ``items=``; it is shipped to the workers once).

    Returns
    -------
    ope.Evaluation
        ``streaming=True``; ``report`` is the merged ``ValidationReport`` with source row
        numbers (files in path order, rows in file order), as ``ope.scan_logs`` gives them.

    Raises
    ------
    ImportError
        Dask is not installed.
    SchemaError, DataFileError, PolicyError
        As the readers and ``ope.evaluate`` raise them; schema problems are found before any
        task runs. An error of a partition's rows (a policy object's propensity above 1, a
        weight that overflows) names the row's number in the source and the partition's file
        and row groups.
    ValidationError
        Invalid rows under ``on_invalid="raise"``, or no valid row.
    EstimationError
        An estimator that needs the rows.

    Notes
    -----
    Partition :math:`k` yields, for each candidate :math:`p` with weights
    :math:`w_{ip}=\\pi_p(a_i\\mid x_i)/\\pi_b(a_i\\mid x_i)`, the sums
    :math:`S_k=(n_k,\\sum_i w_{ip},\\sum_i w_{ip}^2,\\sum_i w_{ip}r_i,\\sum_i w_{ip}^2r_i,
    \\sum_i w_{ip}^2r_i^2,\\max_i w_{ip},\\dots)` of :class:`ope.streaming.MomentStats`. Sums
    add and maxima take the maximum, so :math:`S=\\bigoplus_k S_k` is associative and the
    reduction tree's shape does not change the result beyond rounding (relative differences of
    order :math:`10^{-16}` per addition). IPS is :math:`\\sum wr/n`, SNIPS
    :math:`\\sum wr/\\sum w`, with delta-method standard errors from the same sums.

    With ``check_duplicates="global"`` a row is rejected as ``event_id_duplicate`` exactly when
    ``ope.scan_logs`` would reject it: when its id occurred at an earlier source row. Repeats
    inside a partition are found by that partition's task, which also returns its smallest and
    largest id. Only partitions whose id ranges overlap can share an id (none when ids grow
    across files); for those, a second reduction reads the ``event_id`` column again and merges
    the distinct ids in partition order, hash-split into up to :data:`ID_BUCKETS` buckets with
    a tree each (12 bytes per distinct int64 id, about the id's length + 12 bytes per string
    id, spread over the buckets). Ids are compared exactly; hashing only picks the bucket. When
    repeats are found, the partitions holding them run again with those rows rejected (or the
    call raises under ``on_invalid="raise"``).

    References
    ----------
    .. [1] M. Rocklin, "Dask: Parallel computation with blocked algorithms and task scheduling",
       Proceedings of the 14th Python in Science Conference (SciPy 2015), 130-136.
    .. [2] T. F. Chan, G. H. Golub and R. J. LeVeque, "Updating formulae and a pairwise
       algorithm for computing sample variances", COMPSTAT 1982.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> import numpy as np, pyarrow as pa, pyarrow.parquet as pq
    >>> from ope.distributed import evaluate_distributed
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> for k in range(2):  # two files of 20 logged decisions each
    ...     pq.write_table(pa.table({"event_id": np.arange(20 * k, 20 * k + 20),
    ...                              "action": [0, 1, 0, 1] * 5, "propensity": [0.5] * 20,
    ...                              "reward": [1.0, 1.0, 0.0, 0.0] * 5,
    ...                              "target__always_1": [0.0, 1.0, 0.0, 1.0] * 5}),
    ...                    folder / f"part-{k}.parquet")
    >>> ev = evaluate_distributed(folder, estimators=("ips", "snips"))
    >>> ev.table()[["policy", "estimator", "value", "n"]].values.tolist()
    [['always_1', 'ips', 0.5, 40], ['always_1', 'snips', 0.5, 40]]
    >>> ev.report.rows_used, ev.streaming
    (40, True)
    """
    dask = _import_dask()
    check_on_invalid(on_invalid)
    check_choice(check_duplicates, "check_duplicates", _CHECK_DUPLICATES)
    batch_size = check_positive_int(batch_size, "batch_size")
    _check_client(client)
    _check_source(source)
    plan = EvaluationPlan.build(
        policies,
        estimators=estimators,
        ci=ci,
        confidence_level=confidence_level,
        reward_range=reward_range,
        max_weight=max_weight,
        weight_bound=weight_bound,
        weight_column=weight_column,
        embedding=embedding,
    )
    check_embedding(plan.estimators, embedding, running=True)  # mips without one: say so
    plan.check_streamable("distributed (evaluate_distributed)")

    # names, types and file schemas are checked here, before any task runs
    scan = scan_logs(
        source, mapping=mapping, on_invalid=on_invalid, columns=columns, batch_size=batch_size
    )
    dataset = scan.dataset  # the reconciled dataset (widest type per column)
    if dataset is None:
        raise ParameterError(
            f"evaluate_distributed reads parquet files; got {type(source).__name__}. Use "
            "ope.evaluate(...) for data in memory."
        )
    plan.candidate_names(scan.columns, scan.source)
    parts = _partitions(dataset, scan.source, int(batch_size))
    if not parts:
        raise ValidationError(
            f"{scan.source} holds no rows; there is nothing to evaluate",
            report=ValidationReport(scan.source, 0, 0),
        )
    kernel = _Kernel(
        schema=dataset.schema,
        file_format=dataset.format,
        plan=scan.plan,
        id_plan=_id_plan(scan.plan) if "event_id" in scan.columns else None,
        source=scan.source,
        policies=policies,
        estimators=tuple(plan.weighting),
        dropped=on_invalid == "drop",
        weight_column=sampling_weight_column(scan.columns, weight_column),
        embedding=embedding,
        marginal=tuple(plan.marginal_weighting),
    )
    token = uuid.uuid4().hex
    kernel_d = dask.delayed(kernel, name=f"ope-kernel-{token}")
    global_check = check_duplicates == "global" and "event_id" in scan.columns

    def statistics(
        exclusions: dict[int, Any], done: list[_Partial] | None
    ) -> tuple[_Partial, list[_Partial]]:
        """Merged and per-partition results (small); ``done`` holds results to reuse."""
        phase = "a" if done is None else "b"
        leaves = [
            dask.delayed(_partition_stats, pure=False)(
                kernel_d,
                part,
                exclusions.get(part.index),
                dask_key_name=f"ope-partition-{phase}-{part.index}-{token}",
            )
            if done is None or part.index in exclusions
            else dask.delayed(done[part.index], name=f"ope-done-{part.index}-{token}")
            for part in parts  # loop over partitions: builds the task graph
        ]
        root = _tree(dask, leaves, _merge_partials, f"ope-merge-{phase}-{token}")
        merged, *each = dask.compute(root, *leaves, scheduler=client)
        return merged, each

    def later_occurrences(members: list[_Partition]) -> tuple[Any, np.ndarray]:
        n_buckets = 1
        while n_buckets < min(len(members), ID_BUCKETS):  # a power of two, <= ID_BUCKETS
            n_buckets *= 2
        id_lists = [
            dask.delayed(_partition_ids, pure=False)(
                kernel_d, part, n_buckets, dask_key_name=f"ope-ids-{part.index}-{token}"
            )
            for part in members  # in partition order
        ]
        roots = [
            _tree(dask, [ids[b] for ids in id_lists], _merge_id_sets, f"ope-idtree-{b}-{token}")
            for b in range(n_buckets)  # loop over hash buckets
        ]
        dups = dask.delayed(_duplicates_only, pure=False)(*roots, dask_key_name=f"ope-dups-{token}")
        (out,) = dask.compute(dups, scheduler=client)
        return out

    merged, each = statistics({}, None)
    if global_check:
        # only partitions whose id ranges overlap can share an id: with ids that grow across
        # files (the usual case) there are none, and no id leaves its partition
        members = [parts[i] for i in _overlapping(merged.id_ranges)]
        if members:
            dup_ids, dup_tags = later_occurrences(members)
            if len(dup_tags):
                # ids that repeat an earlier partition's: rerun the partitions holding them
                # with those rows rejected, and merge again
                exclusions: dict[int, Any] = {}
                for tag in np.unique(dup_tags):  # loop over affected partitions
                    sel = np.flatnonzero(dup_tags == tag)
                    exclusions[int(tag)] = (
                        dup_ids[sel]
                        if isinstance(dup_ids, np.ndarray)
                        else dup_ids.take(pa.array(sel))
                    )
                merged, _ = statistics(exclusions, each)

    report = replace(merged.report, dropped=on_invalid == "drop" and not merged.report.ok)
    partition_only = "event_id" in scan.columns and not global_check
    if not report.ok and on_invalid == "raise":
        caveat = (
            "(event_id duplicates were checked within each partition only: "
            'check_duplicates="partition")'
        )
        raise ValidationError(
            report.failure_message(caveats=[caveat] if partition_only else []), report=report
        )
    if report.rows_used == 0 or merged.stats is None:
        raise report.no_rows_error()
    if report.rows_rejected:
        report.warn_dropped(stacklevel=2)
    notes = merged_marginal_notes(plan)
    if partition_only:
        notes.append(
            f"event_id duplicates were checked within each of the {len(parts)} partitions only "
            '(check_duplicates="partition"); a repeat across partitions was not detected.'
        )
    notes += propensity_notes(scan, kernel.weight_column)  # from the files' metadata
    settings = replace(plan.settings, weight_column=kernel.weight_column)
    return Evaluation.from_statistics(
        merged.stats,
        plan.resolved,
        settings,
        report=report,
        notes=notes,
        propensity_source=propensity_source(scan),
    )
