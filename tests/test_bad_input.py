"""A catalogue of malformed inputs: each must end in a specific ope error, never a raw traceback.

Every case states the exact exception type, the message pattern and, for row-level problems,
the exact counts per reason and the first row numbers.
"""

from __future__ import annotations

import decimal
import json
import os
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ope.exceptions import (
    ParameterError,
    DataFileError,
    DroppedRowsWarning,
    OPEError,
    PolicyError,
    SchemaError,
    ValidationError,
)
from ope.importers import read_dsjson, read_obd
from ope.io import read_logs, read_paired, read_trajectories, scan_logs
from ope.policies import read_policy_table, target_propensities
from ope.schema import check_segment_columns

N = 8


def bandit(**overrides: Any) -> dict[str, Any]:
    """A valid bandit log of N rows as a column dict; ``overrides`` replace or add columns."""
    cols: dict[str, Any] = {
        "event_id": list(range(100, 100 + N)),
        "action": [0, 1, 2, 0, 1, 2, 0, 1],
        "propensity": [0.25, 0.5, 0.25, 0.25, 0.5, 0.25, 0.25, 0.5],
        "reward": [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0],
        "target__new": [0.5] * N,
        "candidates": [[0, 1, 2]] * N,
        "logging_distribution": [[0.25, 0.5, 0.25]] * N,
    }
    for k, v in overrides.items():
        if v is None:
            cols.pop(k)
        else:
            cols[k] = v
    return cols


def with_value(column: str, rows: dict[int, Any], **more: Any) -> pa.Table:
    cols = bandit(**more)
    values = list(cols[column])
    for r, v in rows.items():
        values[r] = v
    cols[column] = values
    return pa.table(cols)


def trajectories(**overrides: Any) -> pa.Table:
    """Two valid episodes: 7 (3 steps, done) and 3 (2 steps, truncated), rows shuffled."""
    cols: dict[str, Any] = {
        "episode_id": [7, 3, 7, 3, 7],
        "step": [1, 0, 0, 1, 2],
        "action": [1, 0, 1, 1, 0],
        "propensity": [0.5] * 5,
        "reward": [0.0, 1.0, 0.0, 0.0, 1.0],
        "done": [False, False, False, False, True],
    }
    cols.update(overrides)
    return pa.table(cols)


def paired(**overrides: Any) -> pa.Table:
    cols: dict[str, Any] = {
        "pair_id": [0, 0, 1, 1, 2, 2],
        "arm": ["mem", "none", "mem", "none", "mem", "none"],
        "outcome": [1.0, 0.0, 1.0, 1.0, 0.0, 0.0],
    }
    cols.update(overrides)
    return pa.table(cols)


@dataclass
class Case:
    id: str
    make: Callable[[Path], Any]  # tmp_path -> source
    error: type[Exception]
    match: str
    rejected: dict[str, int] | None = None
    examples: dict[str, tuple[int, ...]] = field(default_factory=dict)
    reader: Callable[..., Any] = read_logs
    kwargs: dict[str, Any] = field(default_factory=dict)
    needs: str | None = None  # "mkfifo", "symlink", "/dev/null": skipped where missing


def _write(table: pa.Table, name: str = "logs.parquet") -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        path = tmp / name
        pq.write_table(table, path)
        return path

    return make


def _raw(data: bytes, name: str = "logs.parquet") -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        path = tmp / name
        path.write_bytes(data)
        return path

    return make


def _truncated(tmp: Path) -> Path:
    path = tmp / "whole.parquet"
    pq.write_table(pa.table(bandit()), path)
    data = path.read_bytes()
    cut = tmp / "cut.parquet"
    cut.write_bytes(data[: len(data) // 2])
    return cut


def _corrupt(tmp: Path) -> Path:
    rng = np.random.default_rng(0)
    path = tmp / "corrupt.parquet"
    pq.write_table(
        pa.table(
            {
                "action": np.arange(50_000),
                "propensity": rng.uniform(0.1, 1, 50_000),
                "reward": rng.uniform(size=50_000),
            }
        ),
        path,
        compression="snappy",
    )
    data = bytearray(path.read_bytes())
    for i in range(200, len(data) // 2, 7):  # scramble the column chunks, keep the footer
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    return path


def _empty_dir(tmp: Path) -> Path:
    d = tmp / "logs"
    d.mkdir()
    (d / "_SUCCESS").write_text("")
    return d


def _dir_with_csv(tmp: Path) -> Path:
    d = tmp / "logs"
    d.mkdir()
    pq.write_table(pa.table(bandit()), d / "part-0.parquet")
    (d / "part-1.parquet").write_text("action,propensity,reward\n1,0.5,1\n")
    return d


def _dir_inconsistent(tmp: Path) -> Path:
    d = tmp / "logs"
    d.mkdir()
    pq.write_table(pa.table(bandit()), d / "a.parquet")
    pq.write_table(pa.table(bandit(reward=["1.0"] * N)), d / "b.parquet")  # parseable strings
    pq.write_table(pa.table(bandit(reward=None)), d / "c.parquet")
    return d


def _dir_with_readme(tmp: Path) -> Path:
    d = tmp / "logs"
    d.mkdir()
    (d / "README.txt").write_text("exported by the nightly job")  # sorts before the data
    pq.write_table(pa.table(bandit()), d / "part-0.parquet")
    return d


def _dir_known_column_in_one_file(tmp: Path) -> Path:
    d = tmp / "logs"
    d.mkdir()
    pq.write_table(pa.table(bandit(event_id=None)), d / "a.parquet")
    pq.write_table(pa.table(bandit()), d / "b.parquet")
    return d


def const(x: Any) -> Callable[[Path], Any]:
    return lambda tmp: x


CASES: list[Case] = [
    # ---- schema: names and types (all problems listed at once) ----
    Case(
        "missing_action",
        const(pa.table(bandit(action=None, candidates=None, logging_distribution=None))),
        SchemaError,
        r"required column 'action' is missing; if it has another name, pass mapping",
    ),
    Case(
        "missing_two_columns",
        const(pa.table(bandit(propensity=None, reward=None))),
        SchemaError,
        r"\(2 problems\):\n  - required column 'propensity' is missing.*\n"
        r"  - required column 'reward' is missing",
    ),
    Case(
        "reward_strings",
        const(pa.table(bandit(reward=["1"] * N))),
        SchemaError,
        r"column 'reward' has type string; expected numbers \(float64\) \(parse it",
    ),
    Case(
        "propensity_and_reward_mistyped",
        const(pa.table(bandit(propensity=["a"] * N, reward=[[1.0]] * N))),
        SchemaError,
        r"(?s)2 problems.*'propensity' has type string.*'reward' has type "
        r"list<item: double>",
    ),
    Case(
        "action_fractional",
        const(
            pa.table(
                bandit(
                    action=[0.0, 1.5, 2.0, 0, 1, 2, 0, 1],
                    candidates=None,
                    logging_distribution=None,
                )
            )
        ),
        SchemaError,
        r"column 'action' is floating point and holds 1 value\(s\) that are not "
        r"whole numbers \(first at row 1: 1\.5\)",
    ),
    Case(
        "action_bool",
        const(pa.table(bandit(action=[True] * N, candidates=None, logging_distribution=None))),
        SchemaError,
        r"column 'action' has type bool; expected integers or strings",
    ),
    Case(
        "candidates_type_differs_from_action",
        const(pa.table(bandit(candidates=[["0", "1", "2"]] * N))),
        SchemaError,
        r"column 'candidates' has type list<item: string> but action is int64",
    ),
    Case(
        "distribution_without_candidates",
        const(pa.table(bandit(candidates=None))),
        SchemaError,
        r"'logging_distribution' needs the 'candidates' column",
    ),
    Case(
        "mapping_unknown_column",
        const(pa.table(bandit())),
        SchemaError,
        r"mapping 'reward': 'click' names a column that is not in the source "
        r"\(available: event_id, action, propensity, reward, target__new",
        kwargs={"mapping": {"reward": "click"}},
    ),
    Case(
        "mapping_collides",
        const(pa.table(bandit(pscore=[0.5] * N))),
        SchemaError,
        r"renames 'pscore' to 'propensity', but the source already has a column "
        r"'propensity'",
        kwargs={"mapping": {"propensity": "pscore"}},
    ),
    Case(
        "columns_unknown",
        const(pa.table(bandit())),
        SchemaError,
        r"column 'segment' was requested in columns= but is not in the source",
        kwargs={"columns": ["segment"]},
    ),
    Case(
        "action_uint64_beyond_int64",
        const(
            pa.table(
                bandit(
                    action=pa.array([0, 1, 2, 0, 1, 2, 0, 2**63 + 5], pa.uint64()),
                    candidates=None,
                    logging_distribution=None,
                )
            )
        ),
        SchemaError,
        r"column 'action' of type uint64 cannot be cast to int64 without loss; "
        r"1 value\(s\) do not fit \(first at row 7: 9223372036854775813\).*"
        r"Fix: .*store larger or fractional ids as strings",
    ),
    Case(
        "event_id_decimal_fraction",
        const(
            pa.table(
                bandit(
                    event_id=pa.array(
                        [decimal.Decimal(f"{i}.0") for i in range(7)] + [decimal.Decimal("7.5")]
                    )
                )
            )
        ),
        SchemaError,
        r"column 'event_id' of type decimal128\(2, 1\) cannot be cast to int64 "
        r"without loss; 1 value\(s\) do not fit \(first at row 7: Decimal\('7\.5'\)\)",
    ),
    Case(
        "reward_int_beyond_2_53",
        const(pa.table(bandit(reward=[0, 1, 2**60, 0, 1, 0, 1, 0]))),
        SchemaError,
        r"column 'reward' of type int64 cannot be cast to double without loss; "
        r"1 value\(s\) do not fit \(first at row 2: 1152921504606846976\)",
    ),
    Case(
        "mapping_key_misspelt",
        const(pa.table(bandit(pscore=[0.5] * N))),
        SchemaError,
        r"mapping key 'propensty' is not one of ope's column names; did you mean "
        r"'propensity'\?",
        kwargs={"mapping": {"propensty": "pscore"}},
    ),
    Case(
        "mapping_reversed",
        const(
            pa.table(bandit(action=None, candidates=None, logging_distribution=None, item=[0] * N))
        ),
        SchemaError,
        r"mapping 'item': 'action' names a column that is not in the source .*"
        r"you probably meant \{'action': 'item'\}",
        kwargs={"mapping": {"item": "action"}},
    ),
    Case(
        "columns_by_source_name",
        const(pa.table(bandit(event_id=None, eid=list(range(N))))),
        SchemaError,
        r"column 'eid' was requested in columns=, but mapping renames it to "
        r"'event_id'; columns= takes ope's names: use 'event_id'",
        kwargs={"mapping": {"event_id": "eid"}, "columns": ["eid"]},
    ),
    Case(
        "dataframe_mixed_objects",
        const(pd.DataFrame({"action": [1, "x", 2], "propensity": 0.5, "reward": 1.0})),
        SchemaError,
        r"column 'action' holds Python objects of mixed types \(int, str\)",
    ),
    Case(
        "done_strings",
        const(trajectories(done=["yes"] * 5)),
        SchemaError,
        r"column 'done' has type string; expected bool",
        reader=read_trajectories,
    ),
    Case(
        "done_not_binary_int",
        const(trajectories(done=[0, 0, 0, 2, 1])),
        SchemaError,
        r"column 'done' is int64 and holds values other than 0 and 1 \(first at row 3\)",
        reader=read_trajectories,
    ),
    # ---- rows: bandit rules ----
    Case(
        "propensity_zero",
        const(with_value("propensity", {3: 0.0})),
        ValidationError,
        r"1 of 8 rows of <Table> break",
        {"propensity_out_of_range": 1},
        {"propensity_out_of_range": (3,)},
    ),
    Case(
        "propensity_negative",
        const(with_value("propensity", {1: -0.5, 6: -1e-9})),
        ValidationError,
        r"propensity_out_of_range: 2 \(rows 1, 6\)",
        {"propensity_out_of_range": 2},
        {"propensity_out_of_range": (1, 6)},
    ),
    Case(
        "propensity_above_one",
        const(with_value("propensity", {0: 1.5}, candidates=None, logging_distribution=None)),
        ValidationError,
        r"propensity must be in \(0, 1\]",
        {"propensity_out_of_range": 1},
        {"propensity_out_of_range": (0,)},
    ),
    Case(
        "propensity_nan",
        const(with_value("propensity", {2: float("nan")})),
        ValidationError,
        r"propensity_missing: 1",
        {"propensity_missing": 1},
        {"propensity_missing": (2,)},
    ),
    Case(
        "propensity_null",
        const(with_value("propensity", {5: None, 7: None})),
        ValidationError,
        r"propensity_missing: 2",
        {"propensity_missing": 2},
        {"propensity_missing": (5, 7)},
    ),
    Case(
        "reward_nan",
        const(with_value("reward", {4: float("nan")})),
        ValidationError,
        r"reward_missing: 1",
        {"reward_missing": 1},
        {"reward_missing": (4,)},
    ),
    Case(
        "reward_inf",
        const(with_value("reward", {1: float("inf"), 2: -float("inf")})),
        ValidationError,
        r"reward_not_finite: 2",
        {"reward_not_finite": 2},
        {"reward_not_finite": (1, 2)},
    ),
    Case(
        "action_null",
        const(with_value("action", {6: None}, candidates=None, logging_distribution=None)),
        ValidationError,
        r"action_missing",
        {"action_missing": 1},
        {"action_missing": (6,)},
    ),
    Case(
        "event_id_duplicates",
        const(with_value("event_id", {3: 100, 5: 100, 6: 101})),
        ValidationError,
        r"event_id_duplicate: 3 \(rows 3, 5, 6\)",
        {"event_id_duplicate": 3},
        {"event_id_duplicate": (3, 5, 6)},
    ),
    Case(
        "event_id_null",
        const(with_value("event_id", {0: None})),
        ValidationError,
        r"event_id_missing",
        {"event_id_missing": 1},
        {"event_id_missing": (0,)},
    ),
    Case(
        "string_event_id_duplicates",
        const(pa.table(bandit(event_id=["a", "b", "a", "c", "b", "d", "e", "a"]))),
        ValidationError,
        r"event_id_duplicate: 3",
        {"event_id_duplicate": 3},
        {"event_id_duplicate": (2, 4, 7)},
    ),
    Case(
        "target_out_of_range",
        const(with_value("target__new", {1: 1.2, 2: float("nan"), 3: -0.1})),
        ValidationError,
        r"target_probability_out_of_range: 3",
        {"target_probability_out_of_range": 3},
        {"target_probability_out_of_range": (1, 2, 3)},
    ),
    Case(
        "action_not_in_candidates",
        const(with_value("candidates", {2: [0, 1, 5]})),
        ValidationError,
        r"action_not_in_candidates: 1",
        {"action_not_in_candidates": 1},
        {"action_not_in_candidates": (2,)},
    ),
    Case(
        "candidates_null",
        const(with_value("candidates", {4: None, 5: [0, None, 2]})),
        ValidationError,
        r"candidates_missing: 2",
        {"candidates_missing": 2},
        {"candidates_missing": (4, 5)},
    ),
    Case(
        "candidates_repeated",
        const(with_value("candidates", {0: [0, 0, 2]})),
        ValidationError,
        r"candidates_duplicate",
        {"candidates_duplicate": 1},
        {"candidates_duplicate": (0,)},
    ),
    Case(
        "distribution_length_mismatch",
        const(with_value("logging_distribution", {3: [0.25, 0.75]})),
        ValidationError,
        r"candidates_length_mismatch: 1",
        {"candidates_length_mismatch": 1},
        {"candidates_length_mismatch": (3,)},
    ),
    Case(
        "distribution_not_normalized",
        const(with_value("logging_distribution", {1: [0.2, 0.5, 0.2], 2: [0.2502, 0.5, 0.25]})),
        ValidationError,
        r"logging_distribution must sum to 1 \(within 0\.0001\)",
        {"logging_distribution_not_normalized": 2},
        {"logging_distribution_not_normalized": (1, 2)},
    ),
    Case(
        "distribution_out_of_range",
        const(with_value("logging_distribution", {6: [-0.25, 0.5, 0.75], 7: None})),
        ValidationError,
        r"logging_distribution_out_of_range: 2",
        {"logging_distribution_out_of_range": 2},
        {"logging_distribution_out_of_range": (6, 7)},
    ),
    Case(
        "propensity_disagrees_with_distribution",
        const(with_value("propensity", {4: 0.4})),
        ValidationError,
        r"logged_propensity_mismatch: 1",
        {"logged_propensity_mismatch": 1},
        {"logged_propensity_mismatch": (4,)},
    ),
    Case(
        "several_reasons_one_row",
        const(
            with_value(
                "reward", {3: float("nan")}, propensity=[0.25, 0.5, 0.25, 0.0, 0.5, 0.25, 0.25, 0.5]
            )
        ),
        ValidationError,
        r"1 of 8 rows",
        {"propensity_out_of_range": 1, "reward_missing": 1},
        {"propensity_out_of_range": (3,), "reward_missing": (3,)},
    ),
    # ---- files ----
    Case(
        "missing_path",
        lambda tmp: tmp / "nope.parquet",
        DataFileError,
        r"nope\.parquet does not exist",
    ),
    Case("empty_file", _raw(b""), DataFileError, r"logs\.parquet is empty \(0 bytes\)"),
    Case(
        "csv_file",
        _raw(b"action,propensity,reward\n1,0.5,1\n", "logs.csv"),
        DataFileError,
        r"logs\.csv is not a parquet file .* pandas\.read_csv",
    ),
    Case("truncated_file", _truncated, DataFileError, r"cut\.parquet is a truncated parquet file"),
    Case("corrupt_file", _corrupt, DataFileError, r"cannot read .*corrupt\.parquet"),
    Case(
        "zero_rows",
        _write(pa.table(bandit()).slice(0, 0)),
        ValidationError,
        r"logs\.parquet holds no rows",
        {},
    ),
    Case("dir_without_parquet", _empty_dir, DataFileError, r"directory without parquet files"),
    Case(
        "dir_with_csv_part", _dir_with_csv, DataFileError, r"part-1\.parquet is not a parquet file"
    ),
    Case(
        "dir_with_stray_text_file",
        _dir_with_readme,
        DataFileError,
        r"README\.txt is not a parquet file .*If it is not part of the logs, move it out of "
        r"the directory .*names start with '\.' or '_', such as _SUCCESS or \.crc files, are "
        r"ignored",
    ),
    Case(
        "dir_known_column_in_one_file",
        _dir_known_column_in_one_file,
        SchemaError,
        r"column 'event_id' is missing from 1 of 2 files \(e\.g\. .*a\.parquet\); add it to "
        r"every file, or leave 'event_id' out of columns=\[\.\.\.\] to read the others",
    ),
    Case(
        "dir_files_disagree",
        _dir_inconsistent,
        SchemaError,
        r"(?s)the files of .*logs disagree on their columns:\n"
        r"  - column 'reward' is missing from 1 of 3 files \(e\.g\. .*c\.parquet\); add it to "
        r"every file\n"
        r"  - column 'reward' in .*b\.parquet has type string",
    ),
    # ---- trajectories ----
    Case(
        "step_gap",
        const(trajectories(step=[1, 0, 0, 2, 2])),
        ValidationError,
        r"step_not_contiguous: 1",
        {"step_not_contiguous": 1, "episode_invalidated": 1},
        {"step_not_contiguous": (3,), "episode_invalidated": (1,)},
        reader=read_trajectories,
    ),
    Case(
        "step_repeated",
        const(trajectories(step=[0, 0, 0, 1, 2])),
        ValidationError,
        r"steps of an episode must be 0, 1, 2",
        {"step_not_contiguous": 1, "episode_invalidated": 2},
        {"step_not_contiguous": (2,), "episode_invalidated": (0, 4)},
        reader=read_trajectories,
    ),
    Case(
        "done_in_the_middle",
        const(trajectories(done=[False, True, False, False, True])),
        ValidationError,
        r"done_not_last_step: 1",
        {"done_not_last_step": 1, "episode_invalidated": 1},
        {"done_not_last_step": (1,), "episode_invalidated": (3,)},
        reader=read_trajectories,
    ),
    Case(
        "episode_id_null",
        const(trajectories(episode_id=[7, None, 7, 3, 7])),
        ValidationError,
        r"episode_id_missing: 1",
        {"episode_id_missing": 1, "step_not_contiguous": 1},
        {"episode_id_missing": (1,), "step_not_contiguous": (3,)},
        reader=read_trajectories,
    ),
    # ---- paired replays ----
    Case(
        "pair_missing_arm",
        const(paired(arm=["mem", "none", "mem", "mem", "mem", "none"])),
        ValidationError,
        r"pair_missing_arm: 1",
        {"pair_duplicate": 1, "pair_missing_arm": 1},
        {"pair_duplicate": (3,), "pair_missing_arm": (2,)},
        reader=read_paired,
    ),
    Case(
        "pair_outcome_nan_leaves_arm_missing",
        const(paired(outcome=[1.0, float("nan"), 1.0, 1.0, 0.0, 0.0])),
        ValidationError,
        r"outcome_missing: 1",
        {"outcome_missing": 1, "pair_missing_arm": 1},
        {"outcome_missing": (1,), "pair_missing_arm": (0,)},
        reader=read_paired,
    ),
    Case(
        "paired_single_arm",
        const(paired(arm=["mem"] * 6, pair_id=[0, 1, 2, 3, 4, 5])),
        ValidationError,
        r"only one arm \('mem'\)",
        None,
        reader=read_paired,
    ),
]


# --------------------------------------------------------------------------------------------
# directories and special files, odd columns and metadata, and messages that name the
# culprit
# --------------------------------------------------------------------------------------------


def _fifo(name: str = "logs.parquet", *, inside: bool = False) -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        if inside:
            d = tmp / "logs"
            d.mkdir()
            os.mkfifo(d / name)
            return d
        os.mkfifo(tmp / name)
        return tmp / name

    return make


def _linked_dir(kind: str) -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        d = tmp / "logs"
        d.mkdir()
        pq.write_table(pa.table(bandit()), d / "part-0.parquet")
        if kind == "dangling":
            os.symlink(tmp / "gone", d / "day=3")
        else:
            os.symlink(d / "loop-b", d / "loop-a")
            os.symlink(d / "loop-a", d / "loop-b")
        return d

    return make


def _dangling_path(tmp: Path) -> Path:
    os.symlink(tmp / "gone.parquet", tmp / "logs.parquet")
    return tmp / "logs.parquet"


def _pandas_index(index: dict[str, Any], drop: str = "event_id") -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        table = pa.table(bandit(**{drop: None}))
        meta = {"index_columns": [{"kind": "range", **index}], "columns": []}
        path = tmp / "logs.parquet"
        pq.write_table(table.replace_schema_metadata({b"pandas": json.dumps(meta).encode()}), path)
        return path

    return make


def _csv(data: bytes) -> Callable[[Path], Path]:
    return _raw(data, "policy.csv")


def _duplicate_names_df(tmp: Path) -> pd.DataFrame:
    df = pd.DataFrame(bandit(candidates=None, logging_distribution=None))
    return pd.concat([df, df[["reward"]]], axis=1)


def _colliding_names_df(tmp: Path) -> pd.DataFrame:
    df = pd.DataFrame(bandit(candidates=None, logging_distribution=None))
    df[1] = 0.0
    df["1"] = 1.0
    return df


def _float16_off(tmp: Path) -> pa.Table:
    return pa.table(
        {
            "event_id": np.repeat(np.arange(100, 100 + N), 2),
            "policy": ["p"] * (2 * N),
            "action": np.tile([0, 1], N),
            "probability": pa.array(np.full(2 * N, 0.49, dtype=np.float16)),
        }
    )


def _table_with_dup_columns(tmp: Path) -> pa.Table:
    return pa.Table.from_arrays(
        [
            pa.array(np.arange(100, 100 + N)),
            pa.array(["p"] * N),
            pa.array(np.zeros(N, np.int64)),
            pa.array(np.ones(N)),
            pa.array(np.ones(N)),
        ],
        names=["event_id", "policy", "action", "probability", "probability"],
    )


class _MaskedPropensity:
    def distribution(self, logs: Any) -> Any:  # pragma: no cover - not reached
        raise AssertionError

    def propensity(self, logs: Any) -> Any:
        return np.ma.masked_array(
            np.full(logs.n, 0.5), mask=[False, False, True] + [False] * (logs.n - 3)
        )


def _join(source: Any, **kwargs: Any) -> Any:
    """A policy table (path or in memory) joined to the catalogue's valid logs."""
    return target_propensities(read_logs(pa.table(bandit())), source, **kwargs)


def _segments(source: Any, **kwargs: Any) -> Any:
    return check_segment_columns(source.schema, **kwargs)


NEEDS = {
    "mkfifo": hasattr(os, "mkfifo"),
    "symlink": hasattr(os, "symlink"),
    "/dev/null": os.path.exists("/dev/null"),
}

HOSTILE_CASES: list[Case] = [
    # ---- class 1: directories, links, special files, URIs, paths ----
    Case(
        "fifo_as_the_file",
        _fifo(),
        DataFileError,
        r"logs path .*logs\.parquet is a FIFO \(named pipe\), not a regular file; ope reads only "
        r"regular files",
        needs="mkfifo",
    ),
    Case(
        "fifo_as_the_file_scan",
        _fifo(),
        DataFileError,
        r"is a FIFO \(named pipe\)",
        reader=scan_logs,
        needs="mkfifo",
    ),
    Case(
        "fifo_as_the_file_trajectories",
        _fifo(),
        DataFileError,
        r"is a FIFO \(named pipe\)",
        reader=read_trajectories,
        needs="mkfifo",
    ),
    Case(
        "dir_holding_only_a_fifo",
        _fifo(inside=True),
        DataFileError,
        r"is a directory without parquet files .*; skipped: .*logs\.parquet \(a FIFO \(named "
        r"pipe\)\)",
        needs="mkfifo",
    ),
    Case(
        "char_device_as_the_file",
        const("/dev/null"),
        DataFileError,
        r"logs path /dev/null is a character device, not a regular file",
        needs="/dev/null",
    ),
    Case(
        "dangling_link_in_dir",
        _linked_dir("dangling"),
        DataFileError,
        r"logs path .*day=3 is a symbolic link to .*gone, which does not exist \(a dangling "
        r"link\); restore its target or remove the link",
        needs="symlink",
    ),
    Case(
        "link_loop_in_dir",
        _linked_dir("loop"),
        DataFileError,
        r"loop-a is a loop of symbolic links \(ELOOP\)",
        needs="symlink",
    ),
    Case(
        "dangling_link_as_the_path",
        _dangling_path,
        DataFileError,
        r"logs\.parquet is a symbolic link to .*gone\.parquet, which does not exist",
        needs="symlink",
    ),
    Case(
        "empty_path",
        const(""),
        ParameterError,
        r"the logs path is empty; give a file, a directory or a URI",
    ),
    Case("blank_path", const("  "), ParameterError, r"the logs path is empty"),
    Case("empty_path_scan", const(""), ParameterError, r"the logs path is empty", reader=scan_logs),
    Case("nul_in_path", const("logs\x00.parquet"), ParameterError, r"contains a NUL character"),
    Case(
        "path_of_5000_characters",
        const("a" * 5000),
        DataFileError,
        r"logs path 'a{60}\.\.\.a{40}' \(5,000 characters\) is too long: one of its components "
        r"is 5,000 bytes long .*\(ENAMETOOLONG\)",
    ),
    Case(
        "component_of_300_characters",
        lambda tmp: tmp / ("b" * 300),
        DataFileError,
        r"is too long: one of its components is 300 bytes long and this filesystem allows 255",
    ),
    Case(
        "http_uri",
        const("https://example.com/logs.parquet"),
        DataFileError,
        r"cannot read logs https://example\.com/logs\.parquet: ope reads local paths, file:// "
        r"URIs and the URIs that pyarrow\.fs serves \(s3://, gs://.*https:// is not one of them",
    ),
    Case(
        "file_uri_missing",
        lambda tmp: (tmp / "nope.parquet").as_uri(),
        DataFileError,
        r"logs path .*nope\.parquet does not exist",
    ),
    Case(
        "file_uri_other_host",
        const("file://fileserver/logs.parquet"),
        DataFileError,
        r"cannot read logs file://fileserver/logs\.parquet: .*hostname",
    ),
    Case(
        "policy_table_fifo",
        _fifo("policy.parquet"),
        DataFileError,
        r"policy table path .*policy\.parquet is a FIFO \(named pipe\)",
        reader=_join,
        needs="mkfifo",
    ),
    Case(
        "policy_table_csv_fifo",
        _fifo("policy.csv"),
        DataFileError,
        r"is a FIFO",
        reader=read_policy_table,
        needs="mkfifo",
    ),
    Case(
        "policy_table_empty_path",
        const(""),
        ParameterError,
        r"the policy table path is empty",
        reader=read_policy_table,
    ),
    Case(
        "policy_table_path_too_long",
        const("p" * 5000),
        DataFileError,
        r"policy table path .* \(5,000 characters\) is too long",
        reader=read_policy_table,
    ),
    Case(
        "dsjson_fifo",
        _fifo("x.json"),
        DataFileError,
        r"DSJSON file path .*x\.json is a FIFO",
        reader=read_dsjson,
        needs="mkfifo",
    ),
    Case(
        "dsjson_directory",
        lambda tmp: tmp,
        DataFileError,
        r"DSJSON file path .* is a directory; give one file",
        reader=read_dsjson,
    ),
    Case(
        "obd_fifo",
        _fifo("all.csv"),
        DataFileError,
        r"OBD campaign path .*all\.csv is a FIFO",
        reader=read_obd,
        needs="mkfifo",
    ),
    # ---- class 4: odd columns and metadata ----
    Case(
        "target_without_a_name",
        const(pa.table(bandit(**{"target__": [0.5] * N}))),
        SchemaError,
        r"column 'target__' is a per-policy column without a policy name; name it "
        r"target__<name> \(e\.g\. target__new\), or pass mapping=\{'target__new': 'target__'\}",
    ),
    Case(
        "target_dist_without_a_name",
        const(pa.table(bandit(**{"target_dist__": [[0.2, 0.3, 0.5]] * N}))),
        SchemaError,
        r"column 'target_dist__' is a per-policy column without a policy name",
    ),
    Case(
        "target_dist_as_text",
        const(pa.table(bandit(**{"target_dist__new": ["[0.2, 0.3, 0.5]"] * N}))),
        SchemaError,
        r"column 'target_dist__new' has type string; expected a list column "
        r"\(list<float64>\); it holds text: parse each row into a list of numbers",
    ),
    Case(
        "dataframe_duplicate_columns",
        _duplicate_names_df,
        SchemaError,
        r"the DataFrame has 1 repeated column name\(s\): 'reward' appear more than once",
    ),
    Case(
        "dataframe_names_collide_as_strings",
        _colliding_names_df,
        SchemaError,
        r"'1' appear more than once \(as strings; pandas allows it, Arrow and ope do not\)",
    ),
    Case(
        "arrow_duplicate_columns",
        const(
            pa.Table.from_arrays(
                [pa.array([0] * N), pa.array([0.5] * N), pa.array([1.0] * N), pa.array([0.5] * N)],
                names=["action", "propensity", "reward", "propensity"],
            )
        ),
        SchemaError,
        r"column name\(s\) 'propensity' appear more than once; rename or drop",
    ),
    Case(
        "parquet_duplicate_columns",
        _write(
            pa.Table.from_arrays(
                [pa.array([0] * N), pa.array([0.5] * N), pa.array([1.0] * N), pa.array([1.0] * N)],
                names=["action", "propensity", "reward", "reward"],
            )
        ),
        SchemaError,
        r"logs\.parquet: column name\(s\) 'reward' appear more than once; rewrite "
        r"the file with every column named once",
    ),
    Case(
        "range_index_overflows_int64",
        _pandas_index({"name": "event_id", "start": 2**63 - 4, "stop": 2**63 - 4 + N, "step": 1}),
        SchemaError,
        r"describes the index 'event_id' as RangeIndex\(start=9223372036854775804, "
        r"stop=9223372036854775812, step=1\) whose values leave int64 \(its row 7 "
        r"would be 9,223,372,036,854,775,811\), so they would wrap around",
    ),
    Case(
        "range_index_wraps_by_its_step",
        _pandas_index(
            {"name": "event_id", "start": -(2**62), "stop": -(2**62) - N * 2**61, "step": -(2**61)}
        ),
        SchemaError,
        r"whose values leave int64 \(its row 7 would be -20,752,587,082,923,245,568\)",
    ),
    Case(
        "range_index_step_zero",
        _pandas_index({"name": "event_id", "start": 5, "stop": 13, "step": 0}),
        SchemaError,
        r"with step 0, which pandas never writes",
    ),
    Case(
        "range_index_stale",
        _pandas_index({"name": "event_id", "start": 0, "stop": 100, "step": 1}),
        SchemaError,
        r"RangeIndex\(start=0, stop=100, step=1\) of 100 rows, but the file holds 8 "
        r"\(the metadata is stale",
    ),
    Case(
        "range_index_would_supply_reward",
        _pandas_index({"name": "reward", "start": 0, "stop": N, "step": 1}, drop="reward"),
        SchemaError,
        r"required column 'reward' is missing; if it has another name, pass "
        r"mapping=\{'reward': 'your_column'\}; .*pandas metadata names its index "
        r"'reward' .*never takes a required column from metadata",
    ),
    Case(
        "policy_table_duplicate_columns",
        _table_with_dup_columns,
        SchemaError,
        r"policy table <Table>: column name\(s\) 'probability' appear more than once",
        reader=_join,
    ),
    Case(
        "policy_table_csv_duplicate_header",
        _csv(b"event_id,policy,action,probability,probability\n100,p,0,1,1\n"),
        SchemaError,
        r"policy table .*policy\.csv: column name\(s\) 'probability' appear more than once",
        reader=read_policy_table,
    ),
    Case(
        "policy_table_csv_not_utf8",
        _csv(b"event_id,policy,action,probability\n100,p,0,1.0\n101,nouveaut\xe9,0,1.0\n"),
        SchemaError,
        r"policy\.csv: column 'policy' \(#1\) holds text that is not UTF-8 \(first "
        r"at line 3, 1-based with the header\); .*Re-save the file as UTF-8",
        reader=read_policy_table,
    ),
    Case(
        "policy_table_csv_utf16",
        _csv("event_id,policy,action,probability\n100,p,0,1.0\n".encode("utf-16")),
        SchemaError,
        r"policy\.csv is UTF-16 text; ope reads CSV policy tables as UTF-8",
        reader=read_policy_table,
    ),
    Case(
        "policy_table_csv_probability_text",
        _csv(b"event_id,policy,action,probability\n100,p,0,half\n"),
        SchemaError,
        r"column 'probability' \(#3\) must hold numbers \(probabilities\), but holds 'half'",
        reader=read_policy_table,
    ),
    Case(
        "policy_table_float16_really_off",
        _float16_off,
        PolicyError,
        r"policy 'p': probabilities must sum to 1 \(within 1e-06, widened to 0\.000976562 "
        r"because the table stores probabilities in float16\) for each event; 8 events do not",
        reader=_join,
    ),
    Case(
        "policy_masked_propensities",
        const({"masked": _MaskedPropensity()}),
        PolicyError,
        r"`policy 'masked': propensities` is a masked array with 1 masked rows \(first at row "
        r"2\); ope does not read a mask as missing values",
        reader=_join,
    ),
    Case(
        "segment_list_column",
        const(pa.table(bandit(tags=[["a", "b"]] * N))),
        SchemaError,
        r"cannot segment the logs by \['tags'\]: column 'tags' has type list<item: string>: a "
        r"segment column holds one label per row",
        reader=_segments,
        kwargs={"by": "tags"},
    ),
    Case(
        "segment_struct_column",
        const(pa.table(bandit(user=[{"age": 3}] * N))),
        SchemaError,
        r"column 'user' has type struct<age: int64>: .*and a struct holds several",
        reader=_segments,
        kwargs={"by": ["user"]},
    ),
    # ---- class 7: messages that name the culprit ----
    Case(
        "target_out_of_range_in_two_columns",
        const(
            with_value(
                "target__new",
                {1: 1.5, 4: -0.5},
                target__old=[0.5, 0.5, 0.5, float("nan"), 0.5, 0.5, 0.5, 0.5],
            )
        ),
        ValidationError,
        r"(?s)target_probability_out_of_range: 3 \(rows 1, 3, 4\)\n"
        r"      in target__new: 2 \(rows 1, 4\)\n      in target__old: 1 \(rows 3\)"
        r".*target_probability_out_of_range: every target__<name> value must be in "
        r"\[0, 1\] and not NaN/null \(in target__new, target__old\)",
        {"target_probability_out_of_range": 3},
        {"target_probability_out_of_range": (1, 3, 4)},
    ),
    Case(
        "target_dist_out_of_range_named",
        const(
            with_value(
                "target_dist__new", {6: [0.5, 0.75, -0.25]}, target_dist__new=[[0.2, 0.5, 0.3]] * N
            )
        ),
        ValidationError,
        r"target_distribution_out_of_range: 1 \(rows 6\)\n      in "
        r"target_dist__new: 1 \(rows 6\)",
        {"target_distribution_out_of_range": 1},
        {"target_distribution_out_of_range": (6,)},
    ),
    Case(
        "trajectory_target_out_of_range_named",
        const(trajectories(target__greedy=[0.5, 2.0, 0.5, 0.5, 0.5])),
        ValidationError,
        r"target_probability_out_of_range: 1 \(rows 1\)\n      in target__greedy: 1 \(rows 1\)",
        {"target_probability_out_of_range": 1, "episode_invalidated": 1},
        {"target_probability_out_of_range": (1,), "episode_invalidated": (3,)},
        reader=read_trajectories,
    ),
]
CASES += HOSTILE_CASES


#: Seconds a catalogue read may take before the case fails as a hang (each takes milliseconds).
READ_TIMEOUT = 20.0


def read_within_timeout(case: Case, source: Any, **kwargs: Any) -> Any:
    """``case.reader(source)`` in a thread: a read that blocks (a FIFO) fails instead of hanging.

    The error is re-raised outside any ``except`` block, so its ``__context__`` is its own.
    """
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = case.reader(source, **case.kwargs, **kwargs)
        except BaseException as exc:  # handed to the test's thread
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(READ_TIMEOUT)
    if thread.is_alive():
        fifo = Path(source) if isinstance(source, (str, Path)) else None
        if fifo is not None:  # wake a reader blocked in open(): open the FIFO for writing
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
        pytest.fail(f"{case.id}: the read blocked for more than {READ_TIMEOUT:g} s")
    error = out.get("error")
    if error is not None:
        raise error
    return out.get("value")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_catalogue(case: Case, tmp_path: Path) -> None:
    if case.needs is not None and not NEEDS[case.needs]:
        pytest.skip(f"this platform has no {case.needs}")
    source = case.make(tmp_path)
    with pytest.raises(case.error, match=case.match) as info:
        read_within_timeout(case, source)
    exc = info.value
    assert isinstance(exc, OPEError), "bad input must end in an ope error"
    # no raw numpy/pyarrow exception chained into what the user sees
    assert exc.__cause__ is None
    assert exc.__context__ is None or exc.__suppress_context__
    assert type(exc).__module__ == "ope.exceptions"
    if case.rejected is not None:
        assert isinstance(exc, ValidationError)
        report = exc.report
        assert report.rejected == case.rejected
        for reason, rows in case.examples.items():
            assert report.examples[reason] == rows
        rows_bad = set()
        for rows in case.examples.values():
            rows_bad |= set(rows)
        if case.examples and all(len(v) == case.rejected[k] for k, v in case.examples.items()):
            assert report.rows_rejected == len(rows_bad)
        assert 'on_invalid="drop"' in str(exc) or report.rows_read == 0


def test_catalogue_is_large_enough() -> None:
    assert len(CASES) >= 25
    assert len(HOSTILE_CASES) >= 30
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize(
    "case", [c for c in CASES if c.rejected], ids=[c.id for c in CASES if c.rejected]
)
def test_drop_keeps_exact_counts(case: Case, tmp_path: Path) -> None:
    source = case.make(tmp_path)
    with pytest.raises(ValidationError) as info:
        case.reader(source, **case.kwargs)
    expected = info.value.report
    with pytest.warns(DroppedRowsWarning, match=f"dropped {expected.rows_rejected} of"):
        logs = case.reader(source, on_invalid="drop", **case.kwargs)
    assert logs.report.dropped
    assert logs.report.rejected == expected.rejected
    assert logs.report.examples == expected.examples
    assert logs.n == logs.report.rows_used == expected.rows_used
    assert logs.report.rows_read == expected.rows_read


def test_drop_removes_exactly_the_flagged_rows() -> None:
    table = with_value("propensity", {1: 0.0, 4: float("nan")})
    table = table.set_column(
        3, "reward", pa.array([1.0, 0.0, 1.0, float("inf"), 1.0, 0.0, 1.0, 0.0])
    )
    with pytest.warns(DroppedRowsWarning, match=r"dropped 3 of 8 rows of <Table>"):
        logs = read_logs(table, on_invalid="drop")
    assert logs.column("event_id").tolist() == [100, 102, 105, 106, 107]
    assert logs.report.rejected == {
        "propensity_out_of_range": 1,
        "propensity_missing": 1,
        "reward_not_finite": 1,
    }


def test_everything_rejected_raises_even_when_dropping() -> None:
    table = pa.table(bandit(propensity=[0.0] * N, candidates=None, logging_distribution=None))
    with (
        pytest.warns(DroppedRowsWarning),
        pytest.raises(
            ValidationError, match=r"every one of the 8 rows of <Table> was rejected"
        ) as info,
    ):
        read_logs(table, on_invalid="drop")
    assert info.value.report.rejected == {"propensity_out_of_range": 8}


def test_on_invalid_and_source_types_are_checked() -> None:
    with pytest.raises(
        ParameterError, match=r"`on_invalid` must be one of 'raise', 'drop'; got 'ignore'"
    ):
        read_logs(pa.table(bandit()), on_invalid="ignore")  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match=r"source must be a parquet path .* got list"):
        read_logs([1, 2, 3])
    with pytest.raises(ParameterError, match=r"`batch_size` must be a positive integer; got 0"):
        scan_logs(pa.table(bandit()), batch_size=0)


def test_schema_error_before_reading_any_batch(tmp_path: Path) -> None:
    path = tmp_path / "logs.parquet"
    pq.write_table(pa.table(bandit(reward=None)), path)
    with pytest.raises(SchemaError, match=r"required column 'reward' is missing"):
        scan_logs(path)


def test_scan_raise_stops_at_first_bad_batch() -> None:
    table = with_value("reward", {6: float("nan")})
    scan = scan_logs(table, batch_size=3)
    seen = []
    with pytest.raises(ValidationError, match=r"the scan stopped after row 7") as info:
        for batch in scan:
            seen.append(batch.n)
    assert seen == [3, 3]
    assert info.value.report.rejected == {"reward_missing": 1}
    assert info.value.report.examples == {"reward_missing": (6,)}
    with pytest.raises(RuntimeError, match=r"complete only after a full pass"):
        scan.report


def test_no_warning_when_nothing_dropped() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        logs = read_logs(pa.table(bandit()), on_invalid="drop")
    assert logs.report.ok and not logs.report.dropped
