"""Errors of a batch's rows name the rows of the source: Dask partitions, scan batches, Spark.

A policy object or the moment kernel checks one batch (a Dask partition, a batch of a lazy
scan, a block of a Spark partition) and numbers its rows from the batch's first; the message
the user gets names the row's number in the whole source (files in path order, from 0) and
the batch it was in, or, where a task cannot know its offset, says what the number counts.
"""

from __future__ import annotations

import traceback

import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ope

from ope._validation import RowOrigin
from ope.distributed import evaluate_distributed
from ope.evaluation import EvaluationPlan, evaluate
from ope.exceptions import PolicyError, SchemaError, ValidationError
from ope.io import scan_logs
from ope.schema import BANDIT, plan_columns
from ope.spark import _partition_items, _Task

FILE_ROWS = (100, 100)
ROW_GROUP = 30  # partitions and batches of at most 30 rows
BAD_ROW = 157  # in the second file (its row 57), in the row group of source rows 130 to 159


class OverOne:
    """A candidate whose probability of the logged action is 1.5 where ``x`` is 1."""

    def distribution(self, logs):  # not used by the moment statistics
        raise NotImplementedError

    def propensity(self, logs):
        return np.where(np.asarray(logs.column("x")) == 1.0, 1.5, 0.5)


def make_table(first: int, n: int) -> pa.Table:
    ids = np.arange(first, first + n)
    return pa.table(
        {
            "event_id": ids,
            "action": ids % 2,
            "propensity": np.full(n, 0.5),
            "reward": (ids % 3 == 0).astype(float),
            "target__half": np.full(n, 0.5),
            "x": (ids == BAD_ROW).astype(float),
        }
    )


def write(folder: Path, *edits) -> Path:
    first = 0
    for i, n in enumerate(FILE_ROWS):
        table = make_table(first, n)
        for edit in edits:
            table = edit(table, first)
        pq.write_table(table, folder / f"part-{i}.parquet", row_group_size=ROW_GROUP)
        first += n
    return folder


def set_value(column: str, row: int, value: float):
    """An edit of the file holding source row ``row``: ``column`` is ``value`` there."""

    def edit(table: pa.Table, first: int) -> pa.Table:
        if not first <= row < first + table.num_rows:
            return table
        values = table.column(column).to_numpy().astype(float)
        values[row - first] = value
        return table.set_column(table.schema.get_field_index(column), column, pa.array(values))

    return edit


def quiet(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the dropped rows' warning: not what is tested
        return fn(*args, **kw)


# --------------------------------------------------------------------------------------------
# Dask partitions: the offset of each partition is known from the parquet footers
# --------------------------------------------------------------------------------------------
@pytest.fixture
def threads():
    dask = pytest.importorskip("dask")
    with dask.config.set(scheduler="threads"):
        yield


@pytest.mark.parametrize("on_invalid", ["raise", "drop"])
def test_a_policy_error_in_a_partition_names_the_source_row_and_the_file(
    tmp_path: Path, threads, on_invalid: str
) -> None:
    folder = write(tmp_path)
    with pytest.raises(PolicyError) as info:
        evaluate_distributed(
            folder, {"over": OverOne()}, columns=["x"], batch_size=ROW_GROUP, on_invalid=on_invalid
        )
    message = str(info.value)
    assert f"first at row {BAD_ROW})" in message, message  # not row 27 of its partition
    assert "part-1.parquet, row groups [1], source rows 130 to 159" in message
    assert "in partition 5 of" in message


def test_rows_dropped_before_it_in_its_partition_do_not_shift_the_row(
    tmp_path: Path, threads
) -> None:
    # two invalid rows of the same partition are dropped first: the bad row is the 25th the
    # policy sees, and still row 157 of the source
    folder = write(tmp_path, set_value("reward", 135, np.nan), set_value("propensity", 140, 0.0))
    with pytest.raises(PolicyError, match=rf"first at row {BAD_ROW}\)"):
        quiet(
            evaluate_distributed,
            folder,
            {"over": OverOne()},
            columns=["x"],
            batch_size=ROW_GROUP,
            on_invalid="drop",
        )


def test_an_overflowing_weight_keeps_its_class_and_names_the_source_row(
    tmp_path: Path, threads
) -> None:
    # a propensity whose weight would overflow breaks the read rule propensity_out_of_range
    # (MIN_PROPENSITY), reported with the row's number in the whole source, not the batch's
    folder = write(tmp_path, set_value("propensity", BAD_ROW, 1e-200))
    with pytest.raises(ValidationError, match="propensity_out_of_range") as info:
        evaluate_distributed(folder, batch_size=ROW_GROUP)
    assert f"propensity_out_of_range: 1 (rows {BAD_ROW})" in str(info.value)


# --------------------------------------------------------------------------------------------
# a lazy scan
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("on_invalid", ["raise", "drop"])
def test_a_scan_batch_error_names_the_source_row(tmp_path: Path, on_invalid: str) -> None:
    # under "drop", a row dropped before it in its batch (and a batch dropped whole) do not
    # shift the row: the scan numbers each row of its batches in the whole source
    edits = [set_value("reward", 120, np.nan), set_value("reward", 140, np.nan)]
    folder = write(tmp_path, *(edits if on_invalid == "drop" else []))
    scan = scan_logs(folder, columns=["x"], batch_size=ROW_GROUP, on_invalid=on_invalid)
    with pytest.raises(PolicyError) as info:
        quiet(evaluate, scan, {"over": OverOne()}, estimators=("ips", "snips"))
    message = str(info.value)
    assert f"first at row {BAD_ROW})" in message, message
    assert "source rows 130 to 159" in message


def test_a_scans_batches_know_the_source_row_of_each_of_their_rows(tmp_path: Path) -> None:
    folder = write(tmp_path, set_value("reward", 1, np.nan), set_value("reward", 35, np.nan))
    scan = scan_logs(folder, columns=["x"], batch_size=ROW_GROUP, on_invalid="drop")
    batches = quiet(lambda: list(scan.to_batches()))
    rows = np.concatenate([b.source_rows() for b in batches])
    np.testing.assert_array_equal(rows, np.setdiff1d(np.arange(sum(FILE_ROWS)), [1, 35]))
    assert all(b.source_rows().size == b.n for b in batches)
    assert ope.read_logs(make_table(0, 10)).source_rows() is None  # logs read whole


# --------------------------------------------------------------------------------------------
# Spark: a task does not know the rows of the partitions before its own (run without Spark)
# --------------------------------------------------------------------------------------------
def spark_task(table: pa.Table, policies, batch_size: int = 40) -> _Task:
    plan = EvaluationPlan.build(policies, estimators=("ips", "snips"))
    return _Task(
        plan=plan_columns(table.schema, BANDIT, columns=["x"], source="<DataFrame>"),
        source="<DataFrame>",
        policies=policies,
        estimators=tuple(plan.weighting),
        dropped=True,
        weight_column=None,
        batch_size=batch_size,
    )


def test_a_spark_partition_names_its_own_row_and_says_so() -> None:
    # the partition holds source rows 100 to 199 (its rows 0 to 99), in blocks of 50 rows;
    # its row 52 is dropped, so the bad row is the 7th the policy sees of the second block
    table = make_table(100, 100)
    reward = table.column("reward").to_numpy().copy()
    reward[52] = np.nan
    table = table.set_column(3, "reward", pa.array(reward))
    with pytest.raises(PolicyError) as info:
        _partition_items(spark_task(table, {"over": OverOne()}), 3, iter(table.to_batches(25)))
    message = str(info.value)
    assert f"first at row {BAD_ROW - 100} of Spark partition 3)" in message, message
    assert "a Spark task does not know how many rows the partitions before it hold" in message


def test_a_lossy_cast_in_a_spark_partition_says_what_its_row_counts() -> None:
    table = make_table(0, 100)
    action = table.column("action").to_numpy().astype(float)
    action[62] = 1.5
    table = table.set_column(1, "action", pa.array(action))
    with pytest.raises(SchemaError, match="row 62 of Spark partition 2"):
        _partition_items(spark_task(table, {"over": OverOne()}), 2, iter(table.to_batches(25)))


# --------------------------------------------------------------------------------------------
# the one place that renumbers rows
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "origin, message, expected",
    [
        (  # a quoted name is the user's text, not a row number
            RowOrigin("b", 100),
            "policy 'row 2': propensities above 1 (first at row 7)",
            "policy 'row 2': propensities above 1 (first at row 107) (b)",
        ),
        (  # a name naming another table does not stop the batch's rows being relabelled
            RowOrigin("b", 100),
            'policy "policy table": 1 row (first at row 7)',
            'policy "policy table": 1 row (first at row 107) (b)',
        ),
        (  # an apostrophe inside a word opens no quoted value
            RowOrigin("b", 100),
            "the candidate's propensity at row 7 is the logger's",
            "the candidate's propensity at row 107 is the logger's (b)",
        ),
    ],
)
def test_quoted_values_in_a_message_are_left_as_they_are(origin, message, expected) -> None:
    assert origin.relabel(message) == expected


def test_a_located_error_keeps_the_traceback_into_the_policy(tmp_path: Path) -> None:
    folder = write(tmp_path)
    scan = scan_logs(folder, columns=["x", "target__half"], batch_size=ROW_GROUP)

    class Raising:
        def distribution(self, logs):
            raise NotImplementedError

        def propensity(self, logs):
            if np.asarray(logs.column("x")).any():
                raise PolicyError("the model refused row 3")
            return np.full(len(logs), 0.5)

    with pytest.raises(PolicyError) as info:
        evaluate(scan, {"raising": Raising()}, estimators=("ips",))
    assert "refused row 133 (in a batch of" in str(info.value)  # relabelled, and yet:
    names = [frame.name for frame in traceback.extract_tb(info.value.__traceback__)]
    assert names[-1] == "propensity", names  # down to the frame in the user's policy object


@pytest.mark.parametrize(
    "origin, message, expected",
    [
        (RowOrigin("b", 1000), "1 row (first at row 7)", "1 row (first at row 1007) (b)"),
        (
            RowOrigin("b", 1000, kept=np.array([False, True, True, False, True])),
            "rows 0, 2, ...; 3 rows are not",
            "rows 1001, 1004, ...; 3 rows are not (b)",
        ),
        (RowOrigin("b", 1_000_000), "row 1,500", "row 1,001,500 (b)"),
        (RowOrigin("b", 10, kept=np.array([True])), "at row 4", "at row 4 (b)"),  # no such row
        (
            RowOrigin("b", None, within="the batch's kept rows"),
            "(first at row 3: 1e-200)",
            "(first at row 3 of the batch's kept rows: 1e-200) (b)",
        ),
        (RowOrigin("b", 5), "has 30 rows but 29 row groups", "has 30 rows but 29 row groups (b)"),
        (  # another table's rows are not the batch's
            RowOrigin("b", 100),
            "the item table's column 'g' is missing (null) in 1 row (first at row 3)",
            "the item table's column 'g' is missing (null) in 1 row (first at row 3) (b)",
        ),
    ],
)
def test_row_numbers_of_a_batch_become_the_sources(origin, message, expected) -> None:
    assert origin.relabel(message) == expected


def test_a_located_error_keeps_its_class_and_report() -> None:
    report = object()
    located = RowOrigin("in partition 2", 100).located(ValidationError("row 3", report=report))
    assert type(located) is ValidationError and located.report is report
    assert str(located) == "row 103 (in partition 2)"
