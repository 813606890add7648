"""evaluate_spark: the streaming kernel in Spark partitions gives the eager numbers and reports.

The Spark tests share one local[2] session. Without pyspark (or Java) they skip, saying why;
with ``OPE_REQUIRE_SPARK=1`` (CI) that skip is a failure.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ope._valid_calls.results import spark_unavailable
from ope.evaluation import evaluate
from ope.exceptions import (
    DataFileError,
    DroppedRowsWarning,
    EstimationError,
    MissingDependencyError,
    ParameterError,
    PolicyError,
    SchemaError,
    ValidationError,
)
from ope.io import read_logs
from ope.policies import UniformPolicy
from ope.spark import evaluate_spark
from ope.streaming import MomentStats

K = 4
FILE_ROWS = (3000, 2000, 2500, 1500)  # several files, several partitions
NUMBERS = ["value", "std_error", "ci_low", "ci_high"]

#: the tests that start the shared Spark session (a JVM: about 15 s, then seconds per test)
SPARK = pytest.mark.slow


@pytest.fixture(scope="session")
def spark():
    why = spark_unavailable()
    if why is not None:
        if os.environ.get("OPE_REQUIRE_SPARK") == "1":
            pytest.fail(f"OPE_REQUIRE_SPARK=1 but {why}")
        pytest.skip(why)
    from pyspark.sql import SparkSession

    # the Python workers run this interpreter (with ope and pyarrow importable)
    active = SparkSession.getActiveSession()
    if active is not None:  # another test's session: these tests need their own settings
        active.stop()
    previous = os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("ope-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.files.maxPartitionBytes", "64k")  # several partitions per test
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "500")  # several batches each
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
    if previous is None:
        os.environ.pop("PYSPARK_PYTHON", None)
    else:
        os.environ["PYSPARK_PYTHON"] = previous


def make_table(n: int, *, seed: int, first_id: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    logging_dist = np.array([0.1, 0.2, 0.3, 0.4])
    action = rng.choice(K, n, p=logging_dist)
    return pa.table(
        {
            "event_id": pa.array(np.arange(first_id, first_id + n), pa.int64()),
            "action": action,
            "propensity": logging_dist[action],
            "reward": rng.normal(0.3 + 0.1 * action, 1.0),
            "target__greedy": np.where(action == K - 1, 0.85, 0.05),
            "target__soft": rng.dirichlet(np.ones(K), n)[np.arange(n), action],
            "weight": rng.uniform(1.0, 4.0, n),
        }
    )


def clean_tables() -> list[pa.Table]:
    out, start = [], 0
    for i, n in enumerate(FILE_ROWS):
        out.append(make_table(n, seed=i, first_id=start))
        start += n
    return out


def write_dir(folder: Path, tables: list[pa.Table]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i, t in enumerate(tables):
        pq.write_table(t, folder / f"part-{i:02d}.parquet", row_group_size=700)
    return folder


@pytest.fixture(scope="module")
def clean_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dir(tmp_path_factory.mktemp("clean"), clean_tables())


def assert_same(streamed, eager, tol: float = 1e-12) -> None:
    a, b = streamed.table(), eager.table()
    assert list(a["policy"]) == list(b["policy"])
    assert list(a["estimator"]) == list(b["estimator"])
    assert list(a["n"]) == list(b["n"])
    diff = np.abs(a[NUMBERS].to_numpy(float) - b[NUMBERS].to_numpy(float))
    scale = np.maximum(1.0, np.abs(b[NUMBERS].to_numpy(float)))
    assert np.all(diff <= tol * scale), diff.max()


# --------------------------------------------------------------------------------------------
# the numbers
# --------------------------------------------------------------------------------------------
#: the optional columns read: without ``weight`` the rows are unweighted
UNWEIGHTED = ["event_id", "target__greedy", "target__soft"]


@SPARK
@pytest.mark.parametrize(
    "options, columns",
    [
        (dict(estimators=("ips", "snips"), weight_column="weight"), None),
        (dict(estimators=("ips", "clipped_ips", "snips"), max_weight=3.0, ci="t"), UNWEIGHTED),
        (dict(estimators=("ips", "snips"), confidence_level=0.9), UNWEIGHTED),
    ],
    ids=["weighted", "clipped-t", "level"],
)
@pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning")
def test_a_parquet_directory_gives_the_eager_numbers(spark, clean_dir, options, columns):
    ev = evaluate_spark(clean_dir, spark=spark, columns=columns, **options)
    eager = evaluate(read_logs(clean_dir, columns=columns), **options)
    n_parts = spark.read.parquet(str(clean_dir)).rdd.getNumPartitions()
    assert n_parts > 1
    assert_same(ev, eager)
    assert ev.streaming
    assert ev.report.rows_used == sum(FILE_ROWS)
    assert ev.report.ok


@SPARK
@pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning")
def test_a_dataframe_of_many_partitions_gives_the_eager_numbers(spark):
    table = pa.concat_tables(clean_tables())
    frame = spark.createDataFrame(table.to_pandas()).repartition(5)
    ev = evaluate_spark(frame, ["greedy"], estimators=("ips", "snips"), weight_column="weight")
    eager = evaluate(
        read_logs(table), ["greedy"], estimators=("ips", "snips"), weight_column="weight"
    )
    assert_same(ev, eager)


@SPARK
@pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning")
def test_policy_objects_and_a_mapping(spark, clean_dir):
    frame = spark.read.parquet(str(clean_dir)).withColumnRenamed("reward", "click")
    policies = {"uniform": UniformPolicy(actions=list(range(K)))}
    ev = evaluate_spark(
        frame, policies, mapping={"reward": "click"}, columns=["event_id"], estimators=("ips",)
    )
    eager = evaluate(read_logs(clean_dir, columns=["event_id"]), policies, estimators=("ips",))
    assert_same(ev, eager)


# --------------------------------------------------------------------------------------------
# validation: what eager rejects, Spark rejects
# --------------------------------------------------------------------------------------------
def _bad_frame() -> pd.DataFrame:
    frame = pa.concat_tables(clean_tables()).to_pandas()
    frame.loc[[5, 4000], "propensity"] = 0.0
    frame.loc[7000, "target__soft"] = 1.5
    frame.loc[8000, "event_id"] = 3  # a repeat of an id of the first partition
    return frame


@SPARK
@pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning")
def test_invalid_rows_raise_with_the_eager_report(spark):
    frame = _bad_frame()
    with pytest.raises(ValidationError) as eager:
        read_logs(frame)
    ordered = spark.createDataFrame(frame)  # slices in row order, one per core
    assert ordered.rdd.getNumPartitions() > 1
    with pytest.raises(ValidationError, match="propensity") as streamed:
        evaluate_spark(ordered)
    # row numbers count rows in the DataFrame's order, across its partitions
    assert dataclasses.replace(streamed.value.report, source="<DataFrame>") == eager.value.report
    with pytest.raises(ValidationError) as shuffled:
        evaluate_spark(spark.createDataFrame(frame).repartition(4))
    assert shuffled.value.report.rejected == eager.value.report.rejected
    assert streamed.value.report.rejected["event_id_duplicate"] == 1


@SPARK
@pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning")
def test_drop_gives_the_eager_numbers_of_the_kept_rows(spark):
    frame = _bad_frame()
    with pytest.warns(DroppedRowsWarning):
        eager = evaluate(
            read_logs(frame, on_invalid="drop"), estimators=("ips", "snips"), weight_column="weight"
        )
    with pytest.warns(DroppedRowsWarning, match="4 of 9,000 rows"):
        ev = evaluate_spark(
            spark.createDataFrame(frame).repartition(3), on_invalid="drop", weight_column="weight"
        )
    assert_same(ev, eager)
    assert ev.report.rows_used == eager.report.rows_used == 9000 - 4


@SPARK
@pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning")
def test_partition_duplicates_only_says_so(spark):
    frame = spark.createDataFrame(_bad_frame().drop(index=[5, 4000, 7000])).repartition(3)
    ev = evaluate_spark(frame, check_duplicates="partition", estimators=("ips",))
    assert any("within each of the" in note for note in ev.notes)


@SPARK
def test_a_missing_column_is_a_schema_error_naming_it(spark, clean_dir):
    frame = spark.read.parquet(str(clean_dir)).drop("propensity")
    with pytest.raises(SchemaError, match="'propensity' is missing"):
        evaluate_spark(frame)


@SPARK
def test_a_lossy_cast_in_a_task_keeps_its_class(spark):
    frame = pa.concat_tables(clean_tables()).to_pandas()
    frame["action"] = frame["action"].astype(float)
    frame.loc[10, "action"] = 1.5
    with pytest.raises(SchemaError) as eager:
        read_logs(frame)
    with pytest.raises(SchemaError, match="action"):
        evaluate_spark(spark.createDataFrame(frame))
    assert "action" in str(eager.value)


@SPARK
def test_an_empty_dataframe_has_nothing_to_evaluate(spark, clean_dir):
    frame = spark.read.parquet(str(clean_dir)).limit(0)
    with pytest.raises(ValidationError, match="holds no rows"):
        evaluate_spark(frame)


@SPARK
@pytest.mark.parametrize(
    "options, error, match",
    [
        (dict(estimators=("dr",)), EstimationError, "cannot run on Spark"),
        (dict(policies=pd.DataFrame({"event_id": [0]})), PolicyError, "long-format"),
        (dict(policies=["nope"]), PolicyError, "target__nope"),
        (
            dict(columns=["action", "propensity", "reward"]),
            PolicyError,
            "no candidate policies: the columns read from",
        ),
        (dict(spark="local"), ParameterError, "SparkSession"),
        (dict(check_duplicates="all"), ParameterError, "check_duplicates"),
        (dict(batch_size=0), ParameterError, "batch_size"),
    ],
)
def test_what_merged_statistics_cannot_do_is_refused(spark, clean_dir, options, error, match):
    with pytest.raises(error, match=match):
        evaluate_spark(clean_dir, **options)


@SPARK
def test_a_source_that_is_not_a_frame_or_path(spark):
    with pytest.raises(ParameterError, match="`source`"):
        evaluate_spark(pa.table({"a": [1]}))
    with pytest.raises(DataFileError, match="does not exist"):
        evaluate_spark("/nonexistent/logs", spark=spark)


# --------------------------------------------------------------------------------------------
# without Spark
# --------------------------------------------------------------------------------------------
def test_missing_pyspark_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("pyspark", "pyspark.sql"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'ope-toolkit\[spark\]'"):
        evaluate_spark("logs/")
    assert issubclass(MissingDependencyError, ImportError)


@pytest.mark.parametrize("sampling", [False, True])
def test_statistics_travel_as_flat_columns_exactly(sampling: bool) -> None:
    table = clean_tables()[0]
    columns = [table.column("target__greedy").to_numpy(), table.column("target__soft").to_numpy()]
    stats = MomentStats.from_arrays(
        table.column("reward").to_numpy(),
        table.column("propensity").to_numpy(),
        columns,
        names=["greedy", "soft"],
        max_weight=5.0,
        sampling_weight=table.column("weight").to_numpy() if sampling else None,
    )
    flat = stats.to_columns()
    assert all(a.dtype == np.float64 and a.ndim == 1 for a in flat.values())
    back = MomentStats.from_columns(
        {k: pa.array(v) for k, v in flat.items()}, names=["greedy", "soft"]
    )
    for est in ("ips", "clipped_ips", "snips"):
        ours = [(e.value, e.std_error, e.ci_low) for e in back.estimates(est)]
        assert ours == [(e.value, e.std_error, e.ci_low) for e in stats.estimates(est)]
    half = back.merge(stats)
    assert half.n == 2 * stats.n
    with pytest.raises(ParameterError, match="'moments.mean'"):
        MomentStats.from_columns({**flat, "moments.mean": flat["moments.mean"][:-1]})
    with pytest.raises(ParameterError, match="to_columns"):
        MomentStats.from_columns([1.0])


def test_id_intervals_keep_the_files_of_a_partition_apart() -> None:
    from ope.spark import ID_INTERVALS, _overlapping, _spans

    # a partition holding two files of disjoint id ranges, another holding the file between
    first = _spans(np.r_[np.arange(0.0, 100.0), np.arange(200.0, 300.0)])
    assert first.tolist() == [[0.0, 99.0], [200.0, 299.0]]
    second = _spans(np.arange(100.0, 200.0))
    assert _overlapping({0: first.tolist(), 1: second.tolist()}) == []
    assert _overlapping({0: first.tolist(), 1: [(150.0, 250.0)], 2: [(400.0, 500.0)]}) == [0, 1]
    # sparse ids: at most ID_INTERVALS intervals, split at the largest gaps, covering every id
    ids = np.sort(np.random.default_rng(0).choice(10**9, 5000, replace=False)).astype(float)
    spans = _spans(ids)
    assert len(spans) == ID_INTERVALS
    inside = (ids[:, None] >= spans[:, 0]) & (ids[:, None] <= spans[:, 1])
    assert inside.sum(axis=1).tolist() == [1] * len(ids)
    # intervals of several blocks merge where they overlap
    assert _spans(np.array([[5.0, 9.0], [0.0, 6.0], [20.0, 30.0], [10.0, 12.0]])).tolist() == [
        [0.0, 12.0],
        [20.0, 30.0],
    ]
