"""Readers: every source type, projection, eager vs streamed parity, trajectories, paired replays."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import ope
from ope._validation import MIN_PROPENSITY
from ope.exceptions import DroppedRowsWarning, SchemaError, ValidationError
from ope._dedup import SeenIds, merge_sorted
from ope.io import LogScan, read_logs, read_paired, read_trajectories, scan_logs
from ope.logs import BanditLogs, Trajectories, ValidationReport


def make_logs(n: int, *, seed: int = 0, bad: bool = True, ids: str = "int") -> pa.Table:
    """n bandit rows; with ``bad``, about 6% of rows break one of several rules."""
    rng = np.random.default_rng(seed)
    k = 4
    action = rng.integers(0, k, n)
    dist = np.full(k, 1.0 / k)
    propensity = np.full(n, 1.0 / k)
    reward = rng.binomial(1, 0.3, n).astype(np.float64)
    event_id = rng.permutation(n).astype(np.int64) * 7 + 11
    if bad:
        i = rng.choice(n, size=n // 50, replace=False)
        propensity[i] = 0.0
        j = rng.choice(n, size=n // 50, replace=False)
        reward[j] = np.nan
        d = rng.choice(n, size=n // 50, replace=False)
        event_id[d] = event_id[rng.integers(0, n, d.size)]  # duplicates, often across batches
    if ids == "string":
        eid = pa.array([f"ev-{v}" for v in event_id])
    elif ids == "sparse":
        eid = pa.array(event_id * 1_000_003 + (1 << 50))
    else:
        eid = pa.array(event_id)
    return pa.table(
        {
            "event_id": eid,
            "action": action,
            "propensity": propensity,
            "reward": reward,
            "target__uniform": np.full(n, 1.0 / k),
            "candidates": pa.array([list(range(k))] * n),
            "logging_distribution": pa.array([list(dist)] * n),
            "segment": rng.choice(["a", "b"], n),
        }
    )


def quiet_read(source, **kw) -> BanditLogs:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DroppedRowsWarning)
        return read_logs(source, **kw)


def quiet_scan(source, **kw) -> tuple[LogScan, pa.Table]:
    scan = scan_logs(source, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DroppedRowsWarning)
        parts = [b.table for b in scan]
    return scan, pa.concat_tables(parts)


# ---------------------------------------------------------------- sources


class ArrowStream:
    """Any object exporting the Arrow C stream interface (as polars and duckdb results do)."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table

    def __arrow_c_stream__(self, requested_schema=None):  # noqa: ANN001, ANN204
        return self.table.__arrow_c_stream__(requested_schema)


def test_all_source_types_agree(tmp_path: Path) -> None:
    table = make_logs(500, bad=False)
    path = tmp_path / "one.parquet"
    pq.write_table(table, path)
    d = tmp_path / "dir"
    d.mkdir()
    pq.write_table(table.slice(0, 200), d / "part-0.parquet")
    pq.write_table(table.slice(200), d / "part-1.parquet")
    sources = {
        "table": table,
        "batch": table.combine_chunks().to_batches()[0],
        "frame": table.to_pandas(),
        "file": path,
        "str": str(path),
        "dir": d,
        "dataset": ds.dataset(d),
        "arrow_stream": ArrowStream(table),
    }
    expected = table.column("reward").to_numpy()
    for name, source in sources.items():
        logs = read_logs(source)
        assert logs.n == 500, name
        assert logs.report.ok and logs.report.rows_read == 500, name
        np.testing.assert_array_equal(logs.column("reward"), expected, err_msg=name)
        assert logs.target_policies == ["uniform"]
    assert read_logs(path).report.source == str(path)
    assert read_logs(table.to_pandas()).report.source == "<DataFrame>"
    assert read_logs(ArrowStream(table)).report.source == "<ArrowStream>"


def test_hive_partitions_become_columns(tmp_path: Path) -> None:
    table = make_logs(100, bad=False)
    for day in (1, 2):
        part = tmp_path / f"day={day}"
        part.mkdir()
        pq.write_table(table.slice((day - 1) * 50, 50), part / "data.parquet")
    logs = read_logs(tmp_path)
    assert logs.n == 100
    assert sorted(set(logs.column("day").tolist())) == [1, 2]


def test_files_with_different_widths_read_in_the_widest(tmp_path: Path) -> None:
    pq.write_table(
        pa.table(
            {
                "action": pa.array([1], pa.int32()),
                "propensity": pa.array([0.5], pa.float32()),
                "reward": [1.0],
            }
        ),
        tmp_path / "a.parquet",
    )
    pq.write_table(
        pa.table({"action": [2], "propensity": [0.1234567890123], "reward": [0]}),
        tmp_path / "b.parquet",
    )
    logs = read_logs(tmp_path)
    assert logs.column("propensity").tolist() == [0.5, 0.1234567890123]  # not narrowed to float32
    assert logs.column("action").tolist() == [1, 2]
    streamed = [b.column("propensity")[0] for b in scan_logs(tmp_path)]
    assert streamed == [0.5, 0.1234567890123]


def test_projection_reads_only_needed_columns(tmp_path: Path) -> None:
    path = tmp_path / "logs.parquet"
    pq.write_table(make_logs(50, bad=False), path)
    logs = read_logs(path, columns=["target__uniform"])
    assert logs.columns == ["action", "propensity", "reward", "target__uniform"]
    scan = scan_logs(path, columns=["event_id"])
    assert scan.columns == ["action", "propensity", "reward", "event_id"]
    assert [b.columns for b in scan][0] == scan.columns


def test_mapping_from_user_names() -> None:
    df = pd.DataFrame(
        {
            "item": np.array([1, 2, 3], np.int32),
            "pscore": np.float32(0.5),
            "click": [1, 0, 1],
            "pi_new": [0.0, 1.0, 0.5],
        }
    )
    logs = read_logs(
        df,
        mapping={
            "action": "item",
            "propensity": "pscore",
            "reward": "click",
            "target__new": "pi_new",
        },
    )
    assert logs.columns == ["action", "propensity", "reward", "target__new"]
    assert logs.table.schema.field("propensity").type == pa.float64()
    assert logs.column("action").dtype == np.int64
    assert logs.target_policies == ["new"]


def test_column_accessor_and_repr() -> None:
    logs = read_logs(
        pa.table(
            {
                "action": ["x", "y"],
                "propensity": pa.array([0.5, 0.25], pa.float32()),
                "reward": [1.0, 0.0],
            }
        )
    )
    assert logs.column("propensity").dtype == np.float64
    assert logs.column("action").tolist() == ["x", "y"]
    with pytest.raises(
        SchemaError, match="`name`: column 'nope' is not in these logs; they have: action"
    ):
        logs.column("nope")
    assert (
        repr(logs) == "BanditLogs(n=2, columns=['action', 'propensity', 'reward'], rows_rejected=0)"
    )


# ---------------------------------------------------------------- eager vs streamed


@pytest.mark.parametrize("ids", ["int", "sparse", "string"])
def test_scan_matches_read_across_batches_and_files(tmp_path: Path, ids: str) -> None:
    table = make_logs(3_000, seed=3, ids=ids)
    d = tmp_path / "logs"
    d.mkdir()
    bounds = [0, 700, 1_900, 3_000]
    for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
        pq.write_table(table.slice(a, b - a), d / f"part-{i}.parquet", row_group_size=300)
    eager = quiet_read(d, on_invalid="drop")
    assert eager.report.rejected.keys() == {
        "propensity_out_of_range",
        "reward_missing",
        "event_id_duplicate",
    }
    for batch_size in (128, 1_000, 10_000):
        scan, streamed = quiet_scan(d, on_invalid="drop", batch_size=batch_size)
        assert scan.report == eager.report
        assert streamed.equals(eager.table)
    # the same data in memory, in one table
    scan, streamed = quiet_scan(table, on_invalid="drop", batch_size=257)
    assert scan.report.rejected == eager.report.rejected
    assert scan.report.examples == eager.report.examples
    assert streamed.equals(eager.table)


def test_scan_batches_carry_their_own_reports() -> None:
    table = make_logs(1_000, seed=5)
    scan = scan_logs(table, on_invalid="drop", batch_size=300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DroppedRowsWarning)
        batches = list(scan)
    assert [b.report.rows_read for b in batches] == [300, 300, 300, 100]
    assert [b.n for b in batches] == [b.report.rows_used for b in batches]
    merged = batches[0].report
    for b in batches[1:]:
        merged = merged.merge(b.report)
    assert merged == scan.report  # batch examples are source row numbers already
    eager = quiet_read(table, on_invalid="drop")
    assert merged.examples == eager.report.examples


def test_scan_warns_once_with_merged_counts() -> None:
    table = make_logs(1_000, seed=9)
    with pytest.warns(DroppedRowsWarning) as record:
        scan = scan_logs(table, on_invalid="drop", batch_size=100)
        n = sum(b.n for b in scan)
    assert len(record) == 1
    assert f"dropped {scan.report.rows_rejected} of 1,000 rows" in str(record[0].message)
    assert n == scan.report.rows_used


def test_scan_is_repeatable_and_reports_need_a_full_pass() -> None:
    scan = scan_logs(make_logs(100, bad=False), batch_size=30)
    with pytest.raises(RuntimeError, match="complete only after a full pass"):
        scan.report
    first = [b.n for b in scan]
    second = [b.n for b in scan]
    assert first == second == [30, 30, 30, 10]
    assert scan.report.rows_used == 100
    assert "batch_size=30" in repr(scan)


def test_duplicate_across_batches_is_flagged_in_the_later_batch() -> None:
    t = pa.table(
        {
            "event_id": [5, 6, 7, 6, 8, 5],
            "action": [1] * 6,
            "propensity": [0.5] * 6,
            "reward": [1.0] * 6,
        }
    )
    with pytest.raises(ValidationError) as info:
        read_logs(t)
    assert info.value.report.examples == {"event_id_duplicate": (3, 5)}
    scan, streamed = quiet_scan(t, batch_size=2, on_invalid="drop")
    assert scan.report.examples == {"event_id_duplicate": (3, 5)}
    assert streamed.column("event_id").to_pylist() == [5, 6, 7, 8]


def test_seen_ids_switch_from_map_to_runs() -> None:
    rng = np.random.default_rng(0)
    seen = SeenIds()
    truth: set[int] = set()
    for step in range(30):
        hi = 10**3 if step < 10 else 10**15  # dense first, then far too sparse for a map
        x = np.unique(rng.integers(0, hi, 200))
        hit = seen.contains(x)
        np.testing.assert_array_equal(hit, np.isin(x, np.fromiter(truth, np.int64, len(truth))))
        seen.add(x[~hit])
        truth.update(x.tolist())
    assert seen._map is None and len(seen._runs) >= 1
    assert seen.nbytes == 8 * len(truth)


def test_seen_ids_keep_increasing_whole_ranges_as_intervals() -> None:
    seen = SeenIds()
    for start in (0, 100, 250):  # 0-99, 100-199 (adjacent: one interval), 250-299 (a gap)
        size = 100 if start < 250 else 50
        x = np.random.default_rng(start).permutation(np.arange(start, start + size))
        assert not seen.add_new(x).any()
    assert seen._ranges == [[0, 199], [250, 299]] and seen._map is None and not seen._runs
    assert seen.nbytes == 0  # no per-id storage
    # a lookup below the largest id, and a batch that is not a whole range, expand them
    hit = seen.add_new(np.array([199, 200, 249, 250, 400], np.int64))
    np.testing.assert_array_equal(hit, [True, False, False, True, False])
    assert seen._ranges == []
    np.testing.assert_array_equal(
        seen.contains(np.array([0, 150, 200, 299, 400, 401])), [1, 1, 1, 1, 1, 0]
    )


@pytest.mark.parametrize("seed", range(6))
def test_seen_ids_equal_a_set_whatever_the_batches(seed: int) -> None:
    rng = np.random.default_rng(seed)
    seen = SeenIds()
    truth: set[int] = set()
    nxt = 0
    for _ in range(25):
        kind = rng.integers(0, 3)
        if kind == 0:  # a whole range above every id so far (shuffled)
            size = int(rng.integers(1, 50))
            x = rng.permutation(np.arange(nxt, nxt + size, dtype=np.int64))
        elif kind == 1:  # a whole range after a gap
            nxt += int(rng.integers(1, 20))
            size = int(rng.integers(1, 50))
            x = np.arange(nxt, nxt + size, dtype=np.int64)
        else:  # anything, repeats of earlier ids included
            x = np.unique(rng.integers(0, nxt + 30, int(rng.integers(1, 40))))
        nxt = max(nxt, int(x.max()) + 1)
        want = np.isin(x, np.fromiter(truth, np.int64, len(truth)))
        np.testing.assert_array_equal(seen.add_new(x), want)
        truth.update(x.tolist())
    probe = np.arange(-5, nxt + 5, dtype=np.int64)
    np.testing.assert_array_equal(
        seen.contains(probe), np.isin(probe, np.fromiter(truth, np.int64, len(truth)))
    )


def testmerge_sorted() -> None:
    a = np.array([1, 4, 9], np.int64)
    b = np.array([0, 5, 10, 11], np.int64)
    np.testing.assert_array_equal(merge_sorted(a, b), [0, 1, 4, 5, 9, 10, 11])
    s = merge_sorted(np.array([b"a", b"c"]), np.array([b"bb"]))
    assert s.tolist() == [b"a", b"bb", b"c"]


# ---------------------------------------------------------------- reports


def test_report_dict_and_merge() -> None:
    a = ValidationReport("s", 10, 8, {"reward_missing": 2}, {"reward_missing": (1, 4)})
    b = ValidationReport("s", 5, 4, {"reward_missing": 1}, {"reward_missing": (2,)}, dropped=True)
    m = a.merge(b, row_offset=10)
    assert m.rows_read == 15 and m.rows_used == 12 and m.rows_rejected == 3
    assert m.examples == {"reward_missing": (1, 4, 12)}
    d = m.to_dict()
    assert d["rejected"] == {"reward_missing": 3} and d["dropped"] is True
    assert d["episodes_read"] is None
    assert "reward_missing: 3 (rows 1, 4, 12)" in str(m)


def test_error_message_explains_every_reason() -> None:
    t = make_logs(200, seed=1)
    with pytest.raises(ValidationError) as info:
        read_logs(t)
    msg = str(info.value)
    assert "propensity_out_of_range: propensity must be in (0, 1]" in msg
    assert "reward_missing: reward must not be null or NaN" in msg
    assert 'pass on_invalid="drop"' in msg
    assert info.value.report.rows_read == 200


@pytest.mark.filterwarnings("ignore::ope.exceptions.DroppedRowsWarning")
@pytest.mark.filterwarnings("ignore::ope.exceptions.SmallSampleWarning")
def test_a_propensity_whose_weight_overflows_is_a_read_rule() -> None:
    """A logged propensity below 1 / MAX_FINITE_WEIGHT breaks propensity_out_of_range when the
    logs are read, so on_invalid='drop' drops and counts it, as the estimators' overflow error
    advises (before, the read kept it and every evaluation of the logs failed)."""
    p = np.full(50, 0.5)
    p[7] = 1e-300
    p[9] = MIN_PROPENSITY  # the smallest accepted
    t = pa.table({"action": np.zeros(50, np.int64), "propensity": p, "reward": np.ones(50)})
    target = np.full(50, 0.5)
    target[9] = 0.0
    t = t.append_column("target__a", pa.array(target))
    with pytest.raises(ValidationError, match="propensity_out_of_range: 1 .rows 7."):
        read_logs(t)
    logs = read_logs(t, on_invalid="drop")
    assert logs.report.rejected == {"propensity_out_of_range": 1}
    assert logs.report.examples == {"propensity_out_of_range": (7,)}
    # 48 rows of weight 1 and reward 1, row 9 of weight 0
    assert ope.evaluate(logs, estimators=("ips",)).table()["value"].tolist() == pytest.approx(
        [48 / 49]
    )


def test_float32_inputs_are_read_as_float64(tmp_path: Path) -> None:
    n = 1_000
    p = np.full(n, 0.1, np.float32)
    path = tmp_path / "f32.parquet"
    pq.write_table(
        pa.table(
            {"action": np.zeros(n, np.int16), "propensity": p, "reward": np.ones(n, np.float32)}
        ),
        path,
    )
    logs = read_logs(path)
    assert logs.column("propensity").dtype == np.float64
    assert logs.column("propensity")[0] == np.float64(np.float32(0.1))


# ---------------------------------------------------------------- trajectories


def test_trajectories_sorted_with_offsets_and_truncation() -> None:
    df = pd.DataFrame(
        {
            "episode_id": ["b", "a", "b", "c", "a", "b"],
            "step": [2, 1, 0, 0, 0, 1],
            "action": [0, 1, 1, 0, 0, 1],
            "propensity": 0.5,
            "reward": [1.0, 0.0, 0.5, 1.0, 0.0, 0.0],
            "done": [True, False, False, True, False, False],
            "tool": ["x", "y", "z", "w", "v", "u"],
        }
    )
    traj = read_trajectories(df)
    assert isinstance(traj, Trajectories)
    assert traj.column("episode_id").tolist() == ["a", "a", "b", "b", "b", "c"]
    assert traj.column("step").tolist() == [0, 1, 0, 1, 2, 0]
    assert traj.column("tool").tolist() == ["v", "y", "z", "u", "x", "w"]
    assert traj.episode_starts.tolist() == [0, 2, 5, 6]
    assert traj.n_episodes == 3
    assert traj.episode_lengths.tolist() == [2, 3, 1]
    assert traj.episode_index.tolist() == [0, 0, 1, 1, 1, 2]
    assert traj.episode_ids.to_pylist() == ["a", "b", "c"]
    assert traj.truncated.tolist() == [True, False, False]
    assert traj.report.episodes_read == 3 and traj.report.episodes_used == 3


def test_trajectory_drop_removes_whole_episodes() -> None:
    df = pd.DataFrame(
        {
            "episode_id": [1, 1, 1, 2, 2, 3],
            "step": [0, 1, 2, 0, 1, 0],
            "action": [0] * 6,
            "propensity": [0.5, 0.5, 0.0, 0.5, 0.5, 0.5],
            "reward": 1.0,
            "done": [False, False, True, False, True, True],
        }
    )
    with pytest.warns(DroppedRowsWarning, match=r"dropped 3 of 6 rows"):
        traj = read_trajectories(df, on_invalid="drop")
    assert traj.column("episode_id").tolist() == [2, 2, 3]
    assert traj.report.rejected == {"propensity_out_of_range": 1, "episode_invalidated": 2}
    assert traj.report.examples == {"propensity_out_of_range": (2,), "episode_invalidated": (0, 1)}
    assert traj.report.episodes_read == 3 and traj.report.episodes_used == 2
    assert "episodes:      2 of 3 used" in str(traj.report)
    assert traj.episode_starts.tolist() == [0, 2, 3]


# ---------------------------------------------------------------- paired replays


def test_paired_replays(tmp_path: Path) -> None:
    df = pd.DataFrame(
        {
            "prefix": [0, 0, 0, 0, 1, 1, 2],
            "branch": ["mem", "none", "mem", "none", "mem", "none", "mem"],
            "seed": [0, 0, 1, 1, 0, 0, 0],
            "score": [1.0, 0.0, 1.0, 1.0, 0.5, 0.0, 1.0],
            "tokens": [10, 12, 11, 9, 20, 21, 5],
        }
    )
    path = tmp_path / "pairs.parquet"
    df.to_parquet(path)
    mapping = {"pair_id": "prefix", "arm": "branch", "replicate": "seed", "outcome": "score"}
    with pytest.raises(ValidationError, match=r"pair_missing_arm: 1 \(rows 6\)"):
        read_paired(path, mapping=mapping)
    with pytest.warns(DroppedRowsWarning):
        pairs = read_paired(path, mapping=mapping, on_invalid="drop")
    assert pairs.n == 6 and pairs.n_pairs == 2
    assert pairs.arms == ["mem", "none"]
    assert pairs.columns == ["pair_id", "arm", "replicate", "outcome", "tokens"]


# --------------------------------------------------------------------------------------------
# messy real-world sources (review R2): each failed, or lost data, before its fix
# --------------------------------------------------------------------------------------------


def _small(**more) -> dict:
    cols = {
        "event_id": [1, 2, 3, 4],
        "action": [0, 1, 2, 1],
        "propensity": [0.5, 0.25, 0.25, 0.25],
        "reward": [1.0, 0.0, 1.0, 0.0],
    }
    cols.update(more)
    return cols


def test_decimal_columns_from_a_warehouse_are_accepted() -> None:
    import decimal

    D = decimal.Decimal
    table = pa.table(
        {
            "event_id": pa.array([D(1), D(2), D(3), D(2**62)], pa.decimal128(38, 0)),
            "action": pa.array([D(0), D(1), D(2), D(1)], pa.decimal128(10, 0)),
            "propensity": pa.array(
                [D("0.5"), D("0.25"), D("0.25"), D("0.25")], pa.decimal128(5, 4)
            ),
            "reward": pa.array([D("1.5"), D("0"), D("-2.25"), D("0")], pa.decimal128(6, 2)),
        }
    )
    logs = read_logs(table)
    assert logs.table.schema.types == [pa.int64(), pa.int64(), pa.float64(), pa.float64()]
    assert logs.column("event_id").tolist() == [1, 2, 3, 2**62]  # exact beyond 2**53
    assert logs.column("reward").tolist() == [1.5, 0.0, -2.25, 0.0]
    assert logs.column("propensity").tolist() == [0.5, 0.25, 0.25, 0.25]


def test_list_view_candidates_are_cast_not_crashed() -> None:
    table = pa.table(
        _small(
            action=["a", "b", "a", "b"],
            propensity=[0.5] * 4,
            candidates=pa.array(
                [["a", "b"], ["a", "b"], None, ["b", "a"]], pa.list_view(pa.string())
            ),
            logging_distribution=pa.array([[0.5, 0.5]] * 4, pa.list_view(pa.float32())),
        )
    )
    with pytest.warns(DroppedRowsWarning, match=r"candidates_missing: 1"):
        logs = read_logs(table, on_invalid="drop")
    assert logs.table.column("candidates").type == pa.list_(pa.string())
    assert logs.table.column("candidates").to_pylist() == [["a", "b"], ["a", "b"], ["b", "a"]]
    assert logs.table.column("logging_distribution").to_pylist() == [[0.5, 0.5]] * 3


def test_named_dataframe_index_is_read_as_a_column() -> None:
    df = pd.DataFrame(_small()).set_index("event_id")
    logs = read_logs(df)
    assert logs.columns[0] == "event_id"
    assert logs.column("event_id").tolist() == [1, 2, 3, 4]
    # an unnamed index is row labels, not data
    assert (
        "event_id"
        not in read_logs(
            pd.DataFrame(_small(event_id=None)).drop(columns="event_id").set_axis([9, 8, 7, 6])
        ).columns
    )


def test_pandas_range_index_kept_only_as_parquet_metadata_is_read(tmp_path: Path) -> None:
    df = pd.DataFrame(_small(event_id=[10, 11, 12, 13])).set_index("event_id")
    assert isinstance(df.index, pd.RangeIndex)  # pandas stores it as 3 numbers, not a column
    path = tmp_path / "logs.parquet"
    df.to_parquet(path)
    assert "event_id" not in pq.read_schema(path).names
    assert read_logs(path).column("event_id").tolist() == [10, 11, 12, 13]
    scan = scan_logs(path, columns=["event_id"], batch_size=3)
    assert [b.column("event_id").tolist() for b in scan] == [[10, 11, 12], [13]]
    assert "event_id" not in read_logs(path, columns=[]).columns
    df.iloc[1:].to_parquet(path)  # a sliced range index keeps its start and step
    assert read_logs(path).column("event_id").tolist() == [11, 12, 13]


@pytest.mark.parametrize("extra_first", [True, False])
def test_directory_reads_the_union_of_its_files_columns(tmp_path: Path, extra_first: bool) -> None:
    """A pass-through column only some files have is read (null elsewhere), whatever the order."""
    a = pa.table(_small())
    b = pa.table(_small(event_id=[5, 6, 7, 8])).select(
        ["reward", "action", "event_id", "propensity"]
    )
    b = b.append_column("segment", pa.array(["x", "y", "x", "y"]))
    first, second = (b, a) if extra_first else (a, b)
    pq.write_table(first, tmp_path / "part-0.parquet")
    pq.write_table(second, tmp_path / "part-1.parquet")
    logs = read_logs(tmp_path)
    seg = logs.table.column("segment").to_pylist()
    assert seg == (
        ["x", "y", "x", "y", None, None, None, None]
        if extra_first
        else [None, None, None, None, "x", "y", "x", "y"]
    )
    streamed = pa.concat_tables(b.table for b in scan_logs(tmp_path, batch_size=3))
    assert streamed.column("segment").to_pylist() == seg
    assert sorted(logs.column("event_id").tolist()) == [1, 2, 3, 4, 5, 6, 7, 8]


def test_directory_skips_bookkeeping_files_and_reads_hive_partitions(tmp_path: Path) -> None:
    for day, first in ((1, 1), (2, 5)):
        part = tmp_path / f"day={day}"
        part.mkdir()
        pq.write_table(pa.table(_small(event_id=list(range(first, first + 4)))), part / "p.parquet")
        (part / ".p.parquet.crc").write_bytes(b"\x00crc")
    (tmp_path / "_SUCCESS").write_text("")
    (tmp_path / "_temporary").mkdir()
    (tmp_path / "_temporary" / "junk").write_text("not parquet")
    logs = read_logs(tmp_path)
    assert logs.column("event_id").tolist() == list(range(1, 9))
    assert logs.table.column("day").to_pylist() == [1] * 4 + [2] * 4


def test_drop_records_the_dropped_event_ids(tmp_path: Path) -> None:
    table = pa.table(_small(propensity=[0.5, 0.0, 0.25, float("nan")]))
    with pytest.warns(DroppedRowsWarning):
        logs = read_logs(table, on_invalid="drop")
    assert logs.dropped_event_ids.to_pylist() == [2, 4]
    assert read_logs(pa.table(_small())).dropped_event_ids is None  # nothing dropped, nothing kept
    scan = scan_logs(table, on_invalid="drop", batch_size=2)
    with pytest.warns(DroppedRowsWarning):
        ids = [b.dropped_event_ids for b in scan]
    assert [None if i is None else i.to_pylist() for i in ids] == [[2], [4]]


@pytest.mark.parametrize("dist_type", [pa.float16(), pa.float32(), pa.float64()])
def test_float16_probabilities_are_compared_within_their_storage_precision(dist_type) -> None:
    p = np.array([0.3, 0.3, 0.4, 0.7])  # not representable in float16: stored 2.4e-4 off
    table = pa.table(
        {
            "action": [0, 1, 2, 0],
            "propensity": pa.array(p.astype(np.float16)),
            "reward": [1.0, 0.0, 1.0, 0.0],
            "candidates": [[0, 1, 2]] * 3 + [[0, 1]],
            "logging_distribution": pa.array(
                [[0.3, 0.3, 0.4]] * 3 + [[0.7, 0.3]], pa.list_(dist_type)
            ),
        }
    )
    logs = read_logs(table)
    assert logs.n == 4 and logs.report.ok
    assert logs.unit_roundoff["propensity"] == 2.0**-11
    # a float64 propensity gets no such slack: 0.301 vs 0.3 is a different policy
    strict = table.set_column(1, "propensity", pa.array([0.301, 0.3, 0.4, 0.7]))
    with pytest.raises(ValidationError, match=r"logged_propensity_mismatch: 1 \(rows 0\)"):
        read_logs(strict)


@pytest.mark.parametrize("collide", [False, True])
def test_seen_string_ids_are_exact_even_when_hashes_collide(monkeypatch, collide: bool) -> None:
    import ope._dedup as io

    if collide:  # 4 hash values for hundreds of ids: every lookup must fall back to the bytes
        real = io._hash_bytes
        monkeypatch.setattr(io, "_hash_bytes", lambda x: real(x) & np.uint64(3))
    rng = np.random.default_rng(2)
    seen = SeenIds()
    truth: set[str] = set()
    for step in range(25):
        vals = np.unique(rng.integers(0, 600, 80)).astype(str)
        vals = np.char.add(np.where(rng.random(vals.size) < 0.5, "", "a-much-longer-prefix-"), vals)
        vals = np.unique(vals)  # widths differ from batch to batch
        x = SeenIds.as_numpy(pa.array(vals.tolist()))
        expected = np.array([v in truth for v in vals])
        if step % 2:
            np.testing.assert_array_equal(seen.contains(x), expected)
            seen.add(x[~expected])
        else:
            np.testing.assert_array_equal(seen.add_new(x), expected)
        truth.update(vals.tolist())
    assert seen._count == len(truth)
    # ids that differ only by trailing NUL bytes, or by non-ASCII bytes, stay distinct
    odd = SeenIds.as_numpy(pa.array(["id", "id\x00", "id\x00\x00", "\u00e9", "e"]))
    fresh = SeenIds()
    np.testing.assert_array_equal(fresh.add_new(odd), [False] * 5)
    np.testing.assert_array_equal(
        fresh.contains(SeenIds.as_numpy(pa.array(["id\x00", "x"]))), [True, False]
    )


def test_log_scan_public_surface(tmp_path) -> None:
    import pyarrow.dataset as ds

    from ope.schema import ColumnPlan

    path = tmp_path / "logs.parquet"
    pq.write_table(
        pa.table(
            {
                "event_id": [1, 2, 3],
                "action": [0, 1, 0],
                "propensity": [0.5] * 3,
                "reward": [1.0, 0.0, 1.0],
            }
        ),
        path,
        row_group_size=2,
    )
    scan = scan_logs(path, batch_size=2)
    assert isinstance(scan.dataset, ds.Dataset) and isinstance(scan.plan, ColumnPlan)
    assert scan.count_rows() == 3 and scan.on_invalid == "raise"
    assert [b.n for b in scan.to_batches()] == [2, 1]
    assert all(b.targets_validated() for b in scan.to_batches())
    assert scan.report.rows_used == 3
    assert (
        scan_logs(pa.table({"action": [0], "propensity": [0.5], "reward": [1.0]})).dataset is None
    )


# --------------------------------------------------------------------------------------------
# progress on long reads (ope._progress: on stderr, off unless it is a terminal or forced)
# --------------------------------------------------------------------------------------------


def _partitioned(tmp_path: Path, parts: int = 3) -> Path:
    d = tmp_path / "logs"
    d.mkdir()
    for i in range(parts):
        pq.write_table(
            make_logs(50, seed=i, bad=False).drop_columns(["event_id"]), d / f"part-{i}.parquet"
        )
    return d


def test_scans_and_directory_reads_show_progress_only_when_enabled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    d = _partitioned(tmp_path)
    monkeypatch.setenv("OPE_PROGRESS", "0")
    assert sum(b.n for b in scan_logs(d, batch_size=40)) == 150
    assert read_logs(d).n == 150
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("OPE_PROGRESS", "1")
    assert sum(b.n for b in scan_logs(d, batch_size=40)) == 150
    err = capsys.readouterr().err
    assert f"scan {d}" in err and "/150 [" in err  # the total rows, from the footers
    logs = read_logs(d)
    err = capsys.readouterr().err
    assert logs.n == 150 and f"read {d}" in err and "/150 [" in err
    assert logs.table.equals(read_logs(d).table)  # the same rows with or without a bar


def test_policy_table_joins_show_progress_per_policy(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ope.policies import target_propensities

    logs = quiet_read(make_logs(20, bad=False))
    ids = logs.column("event_id")
    table = pd.DataFrame(
        {
            "event_id": np.concatenate([ids, ids]),
            "policy": ["a"] * 20 + ["b"] * 20,
            "action": np.concatenate([logs.column("action")] * 2),
            "probability": 1.0,
        }
    )
    monkeypatch.setenv("OPE_PROGRESS", "1")
    tp = target_propensities(logs, table)
    assert tp.names == ["a", "b"] and np.all(tp.values == 1.0)
    assert "join policy table" in capsys.readouterr().err
    monkeypatch.setenv("OPE_PROGRESS", "0")
    target_propensities(logs, table)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("metadata", "refused"),
    [
        ({b"pandas": b"[" * 100_000 + b"]" * 100_000}, None),  # not ope's: ignored
        ({b"ope.context_columns": b"[" * 100_000 + b"]" * 100_000}, None),
        ({b"ope.context_columns": b"\xff"}, None),
        ({b"ope.propensity_source": b"\xff"}, "'ope.propensity_source'"),
        (
            {b"ope.propensity_source": b"estimated", b"ope.propensity_floor": b"{"},
            "'ope.propensity_floor'",
        ),
        (
            {
                b"ope.propensity_source": b"estimated",
                b"ope.propensity_floor": b"[" * 100_000 + b"]" * 100_000,
            },
            "nested too deeply",
        ),
    ],
)
def test_schema_metadata_that_does_not_read_is_ignored_or_refused_by_name(
    tmp_path, metadata, refused
):
    """Metadata written by something else (pandas' record, a context list that does not parse)
    is ignored; ope's own record of where the propensities come from, when it does not read, is
    a SchemaError naming the key. Before: RecursionError, UnicodeDecodeError, JSONDecodeError."""
    rng = np.random.default_rng(0)
    n = 60
    action = rng.integers(0, 3, n)
    table = pa.table(
        {
            "action": action,
            "propensity": np.full(n, 1 / 3),
            "reward": rng.binomial(1, 0.4, n).astype(float),
            "target__greedy": np.where(action == 1, 0.8, 0.1),
        }
    )
    path = tmp_path / "logs.parquet"
    pq.write_table(table.replace_schema_metadata(metadata), path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logs = ope.read_logs(path)
        if refused is None:
            assert ope.evaluate(logs, estimators=["ips"]).table().shape[0] == 1
            ope.diagnose(logs)
            # the one reader of an importer's context list (RecursionError, UnicodeDecodeError
            # from obp's export before)
            assert ope.importers.to_bandit_feedback(logs)["n_rounds"] == n
        else:
            for run in (lambda: ope.evaluate(logs, estimators=["ips"]), lambda: ope.diagnose(logs)):
                with pytest.raises(SchemaError, match=refused):
                    run()


def test_a_csv_header_that_is_not_utf8_is_a_schema_error(tmp_path):
    """pyarrow decodes a CSV's column names only when asked: a header that is not UTF-8 raised
    a UnicodeDecodeError from the first look at them (an item table, a per-action policy
    table); now every CSV reader names the file."""
    from ope.io import read_table
    from ope.policies import ActionTablePolicy

    path = tmp_path / "t.csv"
    path.write_bytes(b"action,probability\xff\n0,1\n")
    with pytest.raises(SchemaError, match="header line .* is not UTF-8"):
        read_table(path, what="item table")
    with pytest.raises(SchemaError, match="header line .* is not UTF-8"):
        ActionTablePolicy(path)


def test_read_table_refuses_a_csv_body_that_is_not_utf8(tmp_path):
    """A CSV cell that is not UTF-8 (pyarrow reads its column as binary) is a SchemaError naming
    the column, not a later error about its values."""
    from ope.io import read_table

    path = tmp_path / "slates.csv"
    path.write_bytes(b"slate_id,position,item\n1,0,a\n\xff,1,b\n")
    with pytest.raises(SchemaError, match="column 'slate_id' holds text that is not UTF-8"):
        read_table(path, what="slate logs")


@pytest.mark.filterwarnings("ignore::ope.exceptions.DroppedRowsWarning")
@pytest.mark.filterwarnings("ignore::ope.exceptions.SmallSampleWarning")
def test_a_bad_sampling_weight_is_a_read_rule(tmp_path: Path) -> None:
    """A null, NaN, non-positive or overflowing ``weight`` breaks weight_missing or
    weight_out_of_range when the logs are read (eagerly and as a scan), so on_invalid='drop'
    drops and counts the row; before, the read kept it and every evaluation refused the logs."""
    w = np.full(60, 2.0)
    w[[3, 8]] = np.nan
    w[11], w[20], w[25] = 0.0, -1.0, 1e200
    w[30] = 1e150  # the largest accepted
    weight = pa.array(w, mask=np.arange(60) == 40)  # row 40: null
    t = pa.table(
        {
            "action": np.zeros(60, np.int64),
            "propensity": np.full(60, 0.5),
            "reward": np.ones(60),
            "weight": weight,
            "target__a": np.full(60, 0.5),
        }
    )
    expected = {"weight_missing": (3, 8, 40), "weight_out_of_range": (11, 20, 25)}
    with pytest.raises(ValidationError, match=r"weight_missing: 3 \(rows 3, 8, 40\)") as info:
        read_logs(t)
    assert "weight_out_of_range: 3 (rows 11, 20, 25)" in str(info.value)
    logs = read_logs(t, on_invalid="drop")
    assert logs.report.examples == expected
    assert len(logs) == 54
    path = tmp_path / "w.parquet"
    pq.write_table(t, path, row_group_size=16)
    scanned = ope.scan_logs(path, batch_size=16, on_invalid="drop")
    result = ope.evaluate(scanned, estimators=("ips",))
    assert scanned.report.examples == expected
    assert result.table()["value"].tolist() == pytest.approx([1.0])
