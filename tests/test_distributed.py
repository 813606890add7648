"""evaluate_distributed: the streaming kernel on Dask gives the scan's numbers and reports."""

from __future__ import annotations

import logging
import re
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from ope.distributed import _buckets, _IdSet, _merge_id_sets, _overlapping, evaluate_distributed
from ope.evaluation import evaluate
from ope.exceptions import (
    DroppedRowsWarning,
    ParameterError,
    EstimationError,
    MissingBoundsError,
    PolicyError,
    SchemaError,
    ValidationError,
)
from ope.io import read_logs, scan_logs
from ope.policies import UniformPolicy

K = 4
FILE_ROWS = (3000, 2000, 2500, 1500)  # several files of different sizes
ROW_GROUP = 700  # several row groups per file


def make_table(n: int, *, seed: int, first_id: int, float32: bool = False) -> pa.Table:
    rng = np.random.default_rng(seed)
    logging_dist = np.array([0.1, 0.2, 0.3, 0.4])
    action = rng.choice(K, n, p=logging_dist)
    propensity = logging_dist[action]
    reward = rng.binomial(1, 0.2 + 0.15 * action / K, n).astype(np.float64)
    greedy = np.where(action == K - 1, 0.85, 0.05)
    soft = rng.dirichlet(np.ones(K), n)[np.arange(n), action]
    p_type = pa.float32() if float32 else pa.float64()
    return pa.table(
        {
            "event_id": pa.array(np.arange(first_id, first_id + n), pa.int64()),
            "action": action,
            "propensity": pa.array(propensity, p_type),
            "reward": reward,
            "target__greedy": greedy,
            "target__soft": soft,
        }
    )


def write_dir(folder: Path, tables: list[pa.Table]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i, t in enumerate(tables):
        pq.write_table(t, folder / f"part-{i:02d}.parquet", row_group_size=ROW_GROUP)
    return folder


def clean_tables(float32: bool = False) -> list[pa.Table]:
    out, start = [], 0
    for i, n in enumerate(FILE_ROWS):
        out.append(make_table(n, seed=i, first_id=start, float32=float32))
        start += n
    return out


@pytest.fixture(scope="module")
def clean_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dir(tmp_path_factory.mktemp("clean"), clean_tables())


def local_cluster(*, processes: bool):
    """A 2-worker LocalCluster without dashboard, quiet (distributed logs at INFO otherwise)."""
    distributed = pytest.importorskip("distributed")
    logging.getLogger("distributed").setLevel(logging.WARNING)
    with warnings.catch_warnings():
        # the scheduler's HTTP server falls back to a free port when 8787 is taken: harmless
        warnings.filterwarnings("ignore", message="Port .* is already in use")
        return distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=processes,
            dashboard_address=None,
            # in-process workers measure the whole test process's memory: a limit there pauses
            # them once the suite has grown past 80% of it, and a gather then waits forever
            memory_limit="1GiB" if processes else 0,
            silence_logs=logging.ERROR,
        )


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    level = logging.getLogger("distributed").level
    with local_cluster(processes=False) as cluster, distributed.Client(cluster) as c:
        yield c
    logging.getLogger("distributed").setLevel(level)


def quiet(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kw)


def assert_same(a, b, rtol: float = 1e-12) -> None:
    ta, tb = a.table(), b.table()
    assert list(ta["policy"]) == list(tb["policy"])
    assert list(ta["estimator"]) == list(tb["estimator"])
    assert list(ta["n"]) == list(tb["n"])
    for col in ("value", "std_error", "ci_low", "ci_high", "ess"):
        np.testing.assert_allclose(ta[col].to_numpy(), tb[col].to_numpy(), rtol=rtol, atol=0)
    np.testing.assert_allclose(a.logging.value, b.logging.value, rtol=rtol)
    np.testing.assert_allclose(a.logging.std_error, b.logging.std_error, rtol=rtol)


# ------------------------------------------------------------------------------------------
# same numbers as the single-process paths
# ------------------------------------------------------------------------------------------


@pytest.fixture
def threads():
    """Dask's local thread pool, even when a distributed Client of this module is current."""
    dask = pytest.importorskip("dask")
    with dask.config.set(scheduler="threads"):
        yield


@pytest.mark.parametrize("batch_size", [1_000_000, 1500, 1])
def test_equals_streaming_and_eager_default_scheduler(
    clean_dir: Path, batch_size: int, threads: None
) -> None:
    # 1_000_000: one task per file; 1500: runs of two row groups; 1: one task per row group
    kw = dict(estimators=("ips", "clipped_ips", "snips"), max_weight=5.0)
    dist = quiet(evaluate_distributed, clean_dir, batch_size=batch_size, **kw)
    stream = quiet(evaluate, scan_logs(clean_dir), **kw)
    eager = quiet(evaluate, read_logs(clean_dir), **kw)
    assert_same(dist, stream)
    assert_same(dist, eager)
    assert dist.streaming and dist.report == stream.report
    assert dist.report.rows_used == sum(FILE_ROWS)
    assert dist.policies == ["greedy", "soft"]


def test_equals_streaming_on_local_cluster(clean_dir: Path, client) -> None:
    kw = dict(estimators=("ips", "snips"), ci="t", confidence_level=0.9)
    dist = quiet(evaluate_distributed, clean_dir, client=client, batch_size=1500, **kw)
    stream = quiet(evaluate, scan_logs(clean_dir), **kw)
    assert_same(dist, stream)
    assert dist.ci_method == "t" and dist.confidence_level == 0.9


def test_bounded_interval_and_policy_objects_on_cluster(clean_dir: Path, client) -> None:
    pols = {"uniform": UniformPolicy(actions=list(range(K)))}
    kw = dict(estimators=("clipped_ips",), max_weight=10.0, ci="bernstein", reward_range=(0.0, 1.0))
    dist = quiet(evaluate_distributed, clean_dir, pols, client=client, **kw)
    stream = quiet(evaluate, scan_logs(clean_dir), pols, **kw)
    assert_same(dist, stream)
    assert dist.policies == ["uniform"]


def test_float32_propensities_and_single_file(tmp_path: Path) -> None:
    t = make_table(4000, seed=7, first_id=0, float32=True)
    path = tmp_path / "one.parquet"
    pq.write_table(t, path, row_group_size=500)
    dist = quiet(evaluate_distributed, path, ["soft"], batch_size=1000)
    eager = quiet(evaluate, read_logs(path), ["soft"], estimators=("ips", "snips"))
    assert_same(dist, eager)


def test_hive_partitions_and_mapping(tmp_path: Path) -> None:
    tables = clean_tables()
    for i, t in enumerate(tables):
        d = tmp_path / f"day={i}"
        d.mkdir()
        t = t.rename_columns(["id", "item", "pscore", "click", "target__greedy", "target__soft"])
        pq.write_table(t, d / "part.parquet", row_group_size=ROW_GROUP)
    mapping = {"event_id": "id", "action": "item", "propensity": "pscore", "reward": "click"}
    cols = ["event_id", "day", "target__greedy", "target__soft"]
    dist = quiet(evaluate_distributed, tmp_path, mapping=mapping, columns=cols)
    stream = quiet(
        evaluate, scan_logs(tmp_path, mapping=mapping, columns=cols), estimators=("ips", "snips")
    )
    assert_same(dist, stream)
    assert dist.report.rows_used == sum(FILE_ROWS)


def test_pyarrow_dataset_source_and_empty_files(tmp_path: Path) -> None:
    tables = clean_tables()
    tables.insert(1, tables[0].slice(0, 0))  # an empty file between two others
    write_dir(tmp_path, tables)
    dataset = ds.dataset(tmp_path, format="parquet")
    dist = quiet(evaluate_distributed, dataset, batch_size=1000)
    stream = quiet(evaluate, scan_logs(dataset), estimators=("ips", "snips"))
    assert_same(dist, stream)
    assert dist.report == stream.report and dist.report.source == "<Dataset>"


def test_only_empty_files_is_an_error(tmp_path: Path) -> None:
    write_dir(tmp_path, [clean_tables()[0].slice(0, 0)])
    with pytest.raises(ValidationError, match="holds no rows"):
        evaluate_distributed(tmp_path)


def test_no_candidate_columns_is_found_before_any_task(clean_dir: Path) -> None:
    with pytest.raises(PolicyError, match=r"no target__<name> columns.*columns=\["):
        evaluate_distributed(clean_dir, columns=["event_id"])


def test_estimates_cover_the_exact_policy_values(clean_dir: Path) -> None:
    # E[r | a] = 0.2 + 0.15 a / K; the candidates' values are exact expectations
    mean_reward = 0.2 + 0.15 * np.arange(K) / K
    truth = {
        "greedy": float(np.r_[0.05, 0.05, 0.05, 0.85] @ mean_reward),
        "soft": float(mean_reward.mean()),
    }  # Dirichlet(1) rows: E[pi(a|x)] = 1/K
    ev = quiet(evaluate_distributed, clean_dir, batch_size=1500)
    for row in ev.table().itertuples():
        assert abs(row.value - truth[row.policy]) < 4 * row.std_error, row


# ------------------------------------------------------------------------------------------
# invalid rows
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dirty_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tables = clean_tables()
    t = tables[2].to_pandas()
    t.loc[[5, 800, 801], "propensity"] = 0.0
    t.loc[[10, 1999], "reward"] = np.nan
    tables[2] = pa.Table.from_pandas(t, preserve_index=False)
    return write_dir(tmp_path_factory.mktemp("dirty"), tables)


def test_invalid_rows_raise_with_merged_report(dirty_dir: Path, client) -> None:
    match = r"5 of 9,000 rows of .* break bandit-log rules"
    with pytest.raises(ValidationError, match=match) as info:
        evaluate_distributed(dirty_dir, client=client, batch_size=1500)
    report = info.value.report
    expected = quiet(read_logs, dirty_dir, on_invalid="drop").report
    offset = FILE_ROWS[0] + FILE_ROWS[1]  # rows are numbered across files in path order
    assert report.rejected == {"propensity_out_of_range": 3, "reward_missing": 2}
    assert report.examples == {
        "propensity_out_of_range": (offset + 5, offset + 800, offset + 801),
        "reward_missing": (offset + 10, offset + 1999),
    }
    assert report.rejected == expected.rejected and report.examples == expected.examples
    assert (report.rows_read, report.rows_used, report.dropped) == (9000, 8995, False)


def test_invalid_rows_drop_counts_and_values(dirty_dir: Path, client) -> None:
    with pytest.warns(DroppedRowsWarning, match=r"dropped 5 of 9,000 rows"):
        dist = evaluate_distributed(dirty_dir, client=client, on_invalid="drop")
    stream = quiet(evaluate, scan_logs(dirty_dir, on_invalid="drop"), estimators=("ips", "snips"))
    assert_same(dist, stream)
    assert dist.report == stream.report
    assert dist.report.dropped and dist.report.rows_used == 8995
    assert any("5 of 9,000 rows were rejected" in n for n in dist.notes)


def test_all_rows_invalid_is_an_error(tmp_path: Path) -> None:
    t = make_table(50, seed=1, first_id=0).set_column(2, "propensity", pa.array(np.zeros(50)))
    pq.write_table(t, tmp_path / "a.parquet")
    with pytest.raises(ValidationError, match="every one of the 50 rows .* was rejected"):
        quiet(evaluate_distributed, tmp_path, on_invalid="drop")


def test_lossy_cast_names_file_and_source_row(tmp_path: Path) -> None:
    tables = clean_tables()[:2]
    bad = tables[1].to_pandas()
    bad["action"] = bad["action"].astype(float)
    bad.loc[7, "action"] = 1.5
    tables[1] = pa.Table.from_pandas(bad, preserve_index=False)
    write_dir(tmp_path, tables)
    with pytest.raises(SchemaError, match=r"part-01\.parquet.*'action'.*3007"):
        evaluate_distributed(tmp_path)


def test_files_disagreeing_on_types_fail_before_any_task(tmp_path: Path) -> None:
    tables = clean_tables()[:2]
    tables[1] = tables[1].set_column(
        1, "action", pa.array([str(a) for a in tables[1].column("action").to_pylist()])
    )
    write_dir(tmp_path, tables)
    with pytest.raises(SchemaError, match="disagree on their columns"):
        evaluate_distributed(tmp_path)


# ------------------------------------------------------------------------------------------
# duplicate event ids across partitions
# ------------------------------------------------------------------------------------------


def dup_tables(string_ids: bool) -> list[pa.Table]:
    tables = clean_tables()
    # file 3 repeats two ids of file 0 and one of file 1; file 1 repeats one of its own
    ids = [t.column("event_id").to_numpy().copy() for t in tables]
    ids[3][[4, 900]] = ids[0][[10, 2999]]
    ids[3][1200] = ids[1][0]
    ids[1][1500] = ids[1][3]
    out = []
    for t, v in zip(tables, ids):
        col = pa.array([f"ev-{x}" for x in v]) if string_ids else pa.array(v)
        out.append(t.set_column(0, "event_id", col))
    return out


@pytest.mark.parametrize("string_ids", [False, True])
def test_cross_partition_duplicates_match_the_scan(tmp_path: Path, string_ids: bool) -> None:
    folder = write_dir(tmp_path, dup_tables(string_ids))
    dist = quiet(evaluate_distributed, folder, on_invalid="drop", batch_size=1000)
    stream = quiet(evaluate, scan_logs(folder, on_invalid="drop"), estimators=("ips", "snips"))
    assert_same(dist, stream)
    assert dist.report == stream.report
    start3 = sum(FILE_ROWS[:3])
    assert dist.report.rejected == {"event_id_duplicate": 4}
    assert dist.report.examples["event_id_duplicate"] == (
        FILE_ROWS[0] + 1500,
        start3 + 4,
        start3 + 900,
        start3 + 1200,
    )
    with pytest.raises(ValidationError, match="event_id_duplicate: 4") as info:
        evaluate_distributed(folder, batch_size=1000)
    assert info.value.report.rejected == {"event_id_duplicate": 4}


def test_ids_are_read_again_only_where_ranges_overlap(
    tmp_path: Path, clean_dir: Path, monkeypatch: pytest.MonkeyPatch, threads: None
) -> None:
    import ope.distributed as distributed_module

    calls: list[int] = []
    original = distributed_module._partition_ids

    def counting(kernel, part, n_buckets):
        calls.append(part.index)
        return original(kernel, part, n_buckets)

    monkeypatch.setattr(distributed_module, "_partition_ids", counting)
    stats_calls: list[int] = []
    original_stats = distributed_module._partition_stats

    def counting_stats(kernel, part, earlier_ids):
        stats_calls.append(part.index)
        return original_stats(kernel, part, earlier_ids)

    monkeypatch.setattr(distributed_module, "_partition_stats", counting_stats)
    quiet(evaluate_distributed, clean_dir, batch_size=1000)  # ids grow across partitions
    assert calls == [] and sorted(stats_calls) == list(range(13))
    stats_calls.clear()
    # runs of row groups of at most 1000 rows: files of 3000, 2000, 2500, 1500 rows (groups
    # of 700) give partitions 0-3, 4-6, 7-10, 11-12. The first row of file 3 repeats the last
    # id of file 2, so only the ranges of partitions 10 and 11 overlap.
    tables = clean_tables()
    ids = tables[3].column("event_id").to_numpy().copy()
    ids[0] = sum(FILE_ROWS[:3]) - 1
    tables[3] = tables[3].set_column(0, "event_id", pa.array(ids))
    folder = write_dir(tmp_path, tables)
    ev = quiet(evaluate_distributed, folder, on_invalid="drop", batch_size=1000)
    assert sorted(calls) == [10, 11]
    # every partition once, then only the one holding the repeat again
    assert sorted(stats_calls) == sorted(list(range(13)) + [11])
    assert ev.report.rejected == {"event_id_duplicate": 1}
    assert ev.report.examples == {"event_id_duplicate": (sum(FILE_ROWS[:3]),)}


def test_partition_only_duplicate_check_says_so(tmp_path: Path) -> None:
    folder = write_dir(tmp_path, dup_tables(False))
    dist = quiet(evaluate_distributed, folder, on_invalid="drop", check_duplicates="partition")
    # only the repeat inside file 1 is found; the three across files are not
    assert dist.report.rejected == {"event_id_duplicate": 1}
    assert any("checked within each of the 4 partitions only" in n for n in dist.notes)


def test_id_set_tree_finds_every_later_occurrence() -> None:
    rng = np.random.default_rng(3)
    parts = [np.unique(rng.integers(0, 60, rng.integers(1, 25))) for _ in range(9)]
    leaves = [
        _IdSet(p, np.full(p.size, k, np.int32), p[:0], np.zeros(0, np.int32))
        for k, p in enumerate(parts)
    ]
    first_seen: dict[int, int] = {}
    expected = set()
    for k, p in enumerate(parts):
        for v in p.tolist():
            if v in first_seen:
                expected.add((v, k))
            else:
                first_seen[v] = k
    # different tree shapes give the same answer (associativity)
    flat = _merge_id_sets(*leaves)
    nested = _merge_id_sets(_merge_id_sets(*leaves[:4]), _merge_id_sets(*leaves[4:7]), *leaves[7:])
    for root in (flat, nested):
        assert set(zip(root.dup_ids.tolist(), root.dup_tags.tolist())) == expected
        assert root.ids.tolist() == sorted(first_seen)
        assert root.tags.tolist() == [first_seen[v] for v in sorted(first_seen)]


@pytest.mark.parametrize(
    "ranges, expected",
    [
        ({0: (0, 9), 1: (10, 19), 2: (20, 29)}, []),  # ids growing across partitions
        ({0: (0, 9), 1: (10, 19), 2: (5, 6)}, [0, 2]),
        ({0: (0, 100), 1: (10, 19), 2: (50, 60), 3: (101, 200)}, [0, 1, 2]),  # nested
        ({0: (0, 10), 1: (10, 20), 2: (30, 40), 3: (35, 36)}, [0, 1, 2, 3]),  # shared end id
        ({0: ("a", "c"), 1: ("b", "d"), 2: ("x", "z")}, [0, 1]),  # string ids
    ],
)
def test_only_overlapping_id_ranges_are_compared(ranges: dict, expected: list) -> None:
    assert _overlapping(ranges) == expected


@pytest.mark.parametrize("kind", ["strided", "string"])
def test_id_buckets_are_deterministic_and_even(kind: str) -> None:
    ints = np.arange(0, 16 * 4000, 16, dtype=np.int64)  # a stride equal to the bucket count
    ids = ints if kind == "strided" else pa.array([f"ev-{v}" for v in ints])
    b = _buckets(ids, 16)
    backwards = ids[::-1] if kind == "strided" else ids.take(pa.array(np.arange(4000)[::-1]))
    again = _buckets(backwards, 16)
    np.testing.assert_array_equal(b, again[::-1])  # a bucket depends on the id only
    counts = np.bincount(b, minlength=16)
    assert counts.min() > 0.7 * 250 and counts.max() < 1.3 * 250, counts
    assert not _buckets(ids, 1).any()


# ------------------------------------------------------------------------------------------
# arguments and the optional dependency
# ------------------------------------------------------------------------------------------


def test_missing_dask_names_the_extra(clean_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "dask", None)
    with pytest.raises(ImportError, match=r"pip install 'ope-toolkit\[dask\]'"):
        evaluate_distributed(clean_dir)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"estimators": ("ips", "dr")}, EstimationError, "dr cannot run distributed"),
        ({"on_invalid": "skip"}, ParameterError, "`on_invalid` must be one of 'raise', 'drop'"),
        ({"batch_size": 0}, ParameterError, "`batch_size` must be a positive integer"),
        ({"check_duplicates": "none"}, ParameterError, "`check_duplicates` must be one of"),
        (
            {"client": "tcp://127.0.0.1:8786"},
            ParameterError,
            "client must be a dask.distributed.Client",
        ),
        # a dict has a .get, as a Client has: refused here, not by Dask's scheduler lookup
        ({"client": {}}, ParameterError, r"client must be a dask.distributed.Client.*got \{\}"),
        ({"estimators": ("mips",)}, ParameterError, r"mips need embedding=ope.ActionEmbedding"),
        ({"estimators": ("clipped_ips",)}, ParameterError, "needs its setting `max_weight`"),
        ({"ci": "bogus"}, ParameterError, "`ci` must be one of"),
        ({"confidence_level": 1.5}, ParameterError, r"`confidence_level` must be in \(0, 1\)"),
        ({"policies": ["nope"]}, PolicyError, r"target__nope is not among .* target__greedy"),
        (
            {"columns": ["action", "propensity", "reward"]},
            PolicyError,
            "no candidate policies: the columns read from",
        ),
        (
            {
                "policies": pd.DataFrame(
                    {"event_id": [0], "policy": ["x"], "action": [0], "probability": [1.0]}
                )
            },
            PolicyError,
            "long-format policy table needs the whole log",
        ),
    ],
)
def test_bad_arguments(clean_dir: Path, kwargs: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        evaluate_distributed(clean_dir, **kwargs)


@pytest.mark.parametrize(
    "embedding, estimators, says",
    [
        (None, ("ips", "mips"), r"\(and mips, snmips with a known embedding=ope.ActionEmbedding"),
        ({"clusters": "genre"}, ("ips", "dr", "mips"), r"and, with the embedding given, mips"),
        (
            {"estimated": ["genre"]},
            ("ips", "mips"),
            r"mips, snmips need a known embedding, and the one given is estimated",
        ),
    ],
)
def test_what_merged_statistics_give_is_said_of_the_embedding_given(
    clean_dir: Path, embedding: dict | None, estimators: tuple, says: str
) -> None:
    from ope.marginal import ActionEmbedding

    emb = None if embedding is None else ActionEmbedding(**embedding)
    runs = [lambda: evaluate(scan_logs(clean_dir), estimators=estimators, embedding=emb)]
    if emb is not None:  # without one, evaluate_distributed asks for it first
        runs.append(lambda: evaluate_distributed(clean_dir, estimators=estimators, embedding=emb))
    for run in runs:
        with pytest.raises(EstimationError, match="cannot run") as info:
            run()
        assert re.search(says, str(info.value)), str(info.value)
        if emb is not None:  # never "with an embedding" to a caller who gave one
            assert "with an embedding" not in str(info.value)


def test_in_memory_source_is_refused() -> None:
    df = pd.DataFrame({"action": [0, 1], "propensity": [0.5, 0.5], "reward": [1.0, 0.0]})
    with pytest.raises(ParameterError, match="Use ope.evaluate"):
        evaluate_distributed(df)


def test_sources_it_cannot_read_are_named_with_what_it_reads(clean_dir: Path) -> None:
    dd = pytest.importorskip("dask.dataframe")
    table = clean_tables()[0]
    accepted = r"parquet file or directory .* or a pyarrow.dataset.Dataset of parquet files"
    cases = [
        (dd.from_pandas(table.to_pandas(), npartitions=2), r"got a Dask DataFrame.*to_parquet"),
        (scan_logs(clean_dir), r"got an ope.scan_logs\(...\) scan. Pass the path it scans"),
        (read_logs(table), accepted + r"; got a BanditLogs in memory. Use ope.evaluate"),
        (table, accepted + r"; got a Table in memory"),
        ([str(p) for p in sorted(clean_dir.iterdir())], accepted + r".*pass their directory"),
        (5, accepted + r"; got 5 \(int\)\.$"),
    ]
    for source, match in cases:
        with pytest.raises(ParameterError, match=match) as info:
            evaluate_distributed(source, estimators=("ips",))
        # never the types of ope.scan_logs that evaluate_distributed refuses
        assert "pandas.DataFrame" not in str(info.value)
        assert "Arrow stream" not in str(info.value)


def test_weight_bound_gives_the_scans_bounded_intervals(clean_dir: Path, threads) -> None:
    kw = dict(estimators=("ips",), ci="hoeffding", reward_range=(0.0, 1.0))
    with pytest.raises(MissingBoundsError, match="pass weight_bound=M"):
        evaluate_distributed(clean_dir, **kw)
    dist = quiet(evaluate_distributed, clean_dir, weight_bound=10.0, **kw)  # as advised
    stream = quiet(evaluate, scan_logs(clean_dir), weight_bound=10.0, **kw)
    assert_same(dist, stream)
    assert dist.weight_bound == 10.0
    with pytest.raises(ParameterError, match="`weight_bound` must be a positive finite number"):
        evaluate_distributed(clean_dir, weight_bound=-1.0, **kw)


def test_bounded_intervals_of_weighted_rows_name_what_merged_statistics_give(
    tmp_path: Path, threads
) -> None:
    table = clean_tables()[0]
    folder = write_dir(
        tmp_path, [table.append_column("weight", pa.array(np.full(len(table), 2.0)))]
    )
    kw = dict(estimators=("ips",), ci="hoeffding", reward_range=(0.0, 1.0), weight_bound=10.0)
    for run in (evaluate_distributed, lambda f, **k: evaluate(scan_logs(f), **k)):
        with pytest.raises(
            EstimationError, match=r"keep no rows: use ci='normal' or 't'\."
        ) as info:
            quiet(run, folder, **kw)
        assert "'t' or 'bootstrap'" not in str(info.value)  # the bootstrap needs the rows
    assert (
        quiet(evaluate_distributed, folder, estimators=("ips",), ci="t").weight_column == "weight"
    )


@pytest.mark.slow
def test_process_workers_pickle_the_kernel_and_policy_objects(clean_dir: Path) -> None:
    distributed = pytest.importorskip("distributed")
    pols = {"uniform": UniformPolicy(actions=list(range(K)))}
    with local_cluster(processes=True) as cluster, distributed.Client(cluster) as c:
        dist = quiet(evaluate_distributed, clean_dir, pols, client=c, batch_size=1500)
    stream = quiet(evaluate, scan_logs(clean_dir), pols, estimators=("ips", "snips"))
    assert_same(dist, stream)


def test_float16_propensities_are_compared_within_their_precision(tmp_path):
    # a float16 propensity differs from the float64 logged distribution by its rounding error
    import pyarrow as pa
    import pyarrow.parquet as pq

    import ope
    from ope.distributed import evaluate_distributed

    p = np.array([0.3, 0.7, 0.3, 0.7] * 25)
    table = pa.table(
        {
            "event_id": np.arange(100),
            "action": np.array([0, 1, 0, 1] * 25),
            "propensity": pa.array(p.astype(np.float16)),
            "reward": np.linspace(0, 1, 100),
            "candidates": [[0, 1]] * 100,
            "logging_distribution": [[0.3, 0.7]] * 100,
            "target__b": np.full(100, 0.5),
        }
    )
    pq.write_table(table, tmp_path / "f16.parquet")
    ev = evaluate_distributed(tmp_path, estimators=("ips",))
    eager = ope.evaluate(ope.read_logs(tmp_path), estimators=("ips",))
    assert ev.report.rows_used == 100
    assert ev[("b", "ips")].value == pytest.approx(eager[("b", "ips")].value, rel=1e-12)
