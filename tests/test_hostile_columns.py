"""Odd columns and metadata: nameless policy columns, duplicate names, pandas metadata, segment
columns that hold lists, masked arrays, float16 policy tables, undecodable CSVs; messages that
name the culprit column; the readable validation report."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ope
from ope.context import feature_labels
from ope.exceptions import PolicyError, SchemaError, ValidationError
from ope.io import read_logs, read_trajectories, scan_logs
from ope.logs import REPORT_WIDTH, ValidationReport, summarize_columns
from ope.policies import (
    EpsilonGreedyPolicy,
    SoftmaxPolicy,
    read_policy_table,
    target_propensities,
)
from ope.schema import check_segment_columns

N = 8


def cols(**extra: object) -> dict[str, object]:
    base: dict[str, object] = {
        "event_id": list(range(N)),
        "action": [0, 1] * (N // 2),
        "propensity": [0.5] * N,
        "reward": [1.0, 0.0] * (N // 2),
    }
    base.update(extra)
    return {k: v for k, v in base.items() if v is not None}


def with_pandas_index(tmp_path: Path, table: pa.Table, index: dict[str, object]) -> Path:
    """A parquet file whose pandas metadata describes ``index`` (as DataFrame.to_parquet does)."""
    meta = {"index_columns": [{"kind": "range", **index}], "columns": [], "pandas_version": "2.2"}
    path = tmp_path / "logs.parquet"
    pq.write_table(table.replace_schema_metadata({b"pandas": json.dumps(meta).encode()}), path)
    return path


# --------------------------------------------------------------------------------------------
# column names
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["target__", "target_dist__"])
def test_a_policy_column_without_a_name_is_a_schema_error(name: str) -> None:
    extra = (
        {name: [0.5] * N}
        if name == "target__"
        else {name: [[0.5, 0.5]] * N, "candidates": [[0, 1]] * N}
    )
    with pytest.raises(
        SchemaError,
        match=rf"column '{name}' is a per-policy column without a "
        rf"policy name; name it {name}<name> \(e\.g\. {name}new\)",
    ):
        read_logs(pa.table(cols(**extra)))


def test_a_nameless_policy_column_can_be_mapped_to_a_name() -> None:
    logs = read_logs(
        pa.table(cols(**{"target__": [0.25] * N})), mapping={"target__new": "target__"}
    )
    assert logs.target_policies == ["new"]


def test_a_nameless_policy_column_in_trajectories() -> None:
    t = pa.table(
        {
            "episode_id": [0, 0],
            "step": [0, 1],
            "action": [0, 1],
            "propensity": [0.5, 0.5],
            "reward": [1.0, 0.0],
            "done": [False, True],
            "target__": [0.5, 0.5],
        }
    )
    with pytest.raises(
        SchemaError, match=r"'target__' is a per-policy column without a policy name"
    ):
        read_trajectories(t)


def test_a_string_distribution_column_says_to_parse_it() -> None:
    t = pa.table(cols(candidates=[[0, 1]] * N, **{"target_dist__new": ["[0.5, 0.5]"] * N}))
    with pytest.raises(
        SchemaError,
        match=r"'target_dist__new' has type string; expected a list "
        r"column \(list<float64>\); it holds text: parse each "
        r"row .*json\.loads",
    ):
        read_logs(t)


def test_duplicate_dataframe_columns_are_named() -> None:
    df = pd.DataFrame(cols())
    dup = pd.concat([df, df[["reward"]]], axis=1)
    with pytest.raises(
        SchemaError,
        match=r"the DataFrame has 1 repeated column name\(s\): 'reward' "
        r"appear more than once .*df\.loc\[:, ~df\.columns\.duplicated",
    ):
        read_logs(dup)
    clash = df.copy()
    clash[0] = 1.0
    clash["0"] = 2.0  # distinct in pandas, both "0" in Arrow
    with pytest.raises(SchemaError, match=r"'0' appear more than once \(as strings"):
        read_logs(clash)


def test_duplicate_arrow_columns_are_named() -> None:
    t = pa.Table.from_arrays(
        [pa.array([0] * N), pa.array([0.5] * N), pa.array([1.0] * N), pa.array([1.0] * N)],
        names=["action", "propensity", "reward", "reward"],
    )
    with pytest.raises(SchemaError, match=r"column name\(s\) 'reward' appear more than once"):
        read_logs(t)


# --------------------------------------------------------------------------------------------
# pandas metadata: never a required column, never a wrapped id
# --------------------------------------------------------------------------------------------


def test_a_range_index_that_leaves_int64_is_refused(tmp_path: Path) -> None:
    start = 2**63 - 3
    path = with_pandas_index(
        tmp_path,
        pa.table(cols(event_id=None)),
        {"name": "event_id", "start": start, "stop": start + N, "step": 1},
    )
    with pytest.raises(
        SchemaError,
        match=r"RangeIndex\(start=9223372036854775805, stop=9223372036854775813, "
        r"step=1\) whose values leave int64 \(its row 7 would be "
        r"9,223,372,036,854,775,812\), so they would wrap",
    ):
        read_logs(path)
    with pytest.raises(SchemaError, match=r"whose values leave int64"):
        scan_logs(path)


def test_a_range_index_with_a_huge_step_is_refused(tmp_path: Path) -> None:
    step = 2**62
    path = with_pandas_index(
        tmp_path,
        pa.table(cols(event_id=None)),
        {"name": "event_id", "start": 0, "stop": step * N, "step": step},
    )
    with pytest.raises(
        SchemaError,
        match=r"whose values leave int64 \(its row 7 would be "
        r"32,281,802,128,991,715,328\)",
    ):
        read_logs(path)


@pytest.mark.parametrize(
    "index,match",
    [
        (
            {"name": "event_id", "start": 0, "stop": 8, "step": 0},
            r"with step 0, which pandas never writes",
        ),
        (
            {"name": "event_id", "start": 0, "stop": 10, "step": 1},
            r"of 10 rows, but the file holds 8 \(the metadata is stale",
        ),
    ],
)
def test_a_range_index_that_does_not_describe_the_rows_is_refused(
    tmp_path: Path, index: dict[str, object], match: str
) -> None:
    path = with_pandas_index(tmp_path, pa.table(cols(event_id=None)), index)
    with pytest.raises(SchemaError, match=match):
        read_logs(path)


def test_a_bad_range_index_does_not_matter_when_it_is_not_read(tmp_path: Path) -> None:
    path = with_pandas_index(
        tmp_path,
        pa.table(cols(event_id=None)),
        {"name": "event_id", "start": 0, "stop": 8, "step": 0},
    )
    assert read_logs(path, columns=[]).columns == ["action", "propensity", "reward"]


def test_a_valid_range_index_is_still_read(tmp_path: Path) -> None:
    path = with_pandas_index(
        tmp_path,
        pa.table(cols(event_id=None)),
        {"name": "event_id", "start": 10, "stop": 10 + 3 * N, "step": 3},
    )
    assert read_logs(path).column("event_id").tolist() == list(range(10, 10 + 3 * N, 3))


@pytest.mark.parametrize("required", ["action", "reward"])
def test_metadata_never_supplies_a_required_column(tmp_path: Path, required: str) -> None:
    path = with_pandas_index(
        tmp_path,
        pa.table(cols(**{required: None})),
        {"name": required, "start": 0, "stop": N, "step": 1},
    )
    with pytest.raises(
        SchemaError,
        match=rf"required column '{required}' is missing.*pandas "
        rf"metadata names its index '{required}'.*never takes a "
        r"required column from metadata",
    ):
        read_logs(path)


def test_metadata_from_a_real_dataframe_round_trip(tmp_path: Path) -> None:
    df = pd.DataFrame(cols(event_id=None)).rename_axis("action_index")
    df.index = pd.RangeIndex(0, N, name="action")
    df = df.drop(columns=["action"])
    path = tmp_path / "df.parquet"
    df.to_parquet(path)  # pandas writes the RangeIndex 'action' as metadata only
    with pytest.raises(SchemaError, match=r"required column 'action' is missing"):
        read_logs(path)


# --------------------------------------------------------------------------------------------
# segment columns
# --------------------------------------------------------------------------------------------


def test_segment_columns_must_hold_one_label_per_row() -> None:
    schema = pa.table(
        cols(tags=[[1]] * N, meta=[{"a": 1}] * N, raw=[b"x"] * N, country=["de"] * N)
    ).schema
    assert check_segment_columns(schema, "country") == ["country"]
    assert check_segment_columns(schema, None) == []
    with pytest.raises(
        SchemaError,
        match=r"(?s)cannot segment the logs by \['tags', 'meta', 'raw'\]: "
        r"column 'tags' has type list<item: int64>: .*a list holds "
        r"several.*column 'meta' has type struct<a: int64>.*a struct "
        r"holds several.*column 'raw' holds raw bytes",
    ):
        check_segment_columns(schema, ["tags", "meta", "raw"])
    with pytest.raises(
        SchemaError, match=r"column 'contry' is not in the logs; did you mean 'country'\?"
    ):
        check_segment_columns(schema, ["contry"])
    with pytest.raises(ope.ParameterError, match=r"names column\(s\) 'country' twice"):
        check_segment_columns(schema, ["country", "country"])


# --------------------------------------------------------------------------------------------
# masked arrays: the mask is honoured or refused, never dropped
# --------------------------------------------------------------------------------------------


def test_masked_arrays_in_data_keep_their_mask() -> None:
    p = np.ma.masked_array([0.5] * N, mask=[False, True] + [False] * (N - 2))
    for source in (pd.DataFrame(cols(propensity=p)), pa.table(cols(propensity=p))):
        with pytest.raises(ValidationError) as info:
            read_logs(source)
        assert info.value.report.rejected == {"propensity_missing": 1}
        assert info.value.report.examples == {"propensity_missing": (1,)}


class _MaskedPolicy:
    def distribution(self, logs):  # pragma: no cover - not reached
        raise AssertionError

    def propensity(self, logs):
        return np.ma.masked_array(np.full(logs.n, 0.5), mask=[True] + [False] * (logs.n - 1))


def test_a_policy_returning_a_masked_array_is_refused() -> None:
    logs = read_logs(pa.table(cols()))
    with pytest.raises(
        PolicyError,
        match=r"propensities` is a masked array with 1 masked rows "
        r"\(first at row 0\)",
    ):
        target_propensities(logs, {"masked": _MaskedPolicy()})
    with pytest.raises(PolicyError, match=r"_MaskedPolicy\.propensity\(logs\)` is a masked array"):
        EpsilonGreedyPolicy(_MaskedPolicy(), epsilon=0.1).propensity(logs)
    t = pa.table(cols(x=[0.1] * N))
    scores = SoftmaxPolicy(
        lambda X: np.ma.masked_array(np.zeros((len(X), 2)), mask=True),
        actions=[0, 1],
        feature_columns=["x"],
    )
    with pytest.raises(PolicyError, match=r"scores\(X\)` is a masked array"):
        target_propensities(read_logs(t), {"s": scores})


def test_an_unmasked_masked_array_is_read() -> None:
    logs = read_logs(pa.table(cols()))

    class Fine(_MaskedPolicy):
        def propensity(self, logs):
            return np.ma.masked_array(np.full(logs.n, 0.5), mask=False)

    assert target_propensities(logs, {"fine": Fine()}).values[:, 0].tolist() == [0.5] * N


# --------------------------------------------------------------------------------------------
# policy tables: duplicate columns, float16, undecodable CSV
# --------------------------------------------------------------------------------------------


def _thirds(dtype: type, n_events: int = N) -> pa.Table:
    k = 3
    return pa.table(
        {
            "event_id": np.repeat(np.arange(n_events), k),
            "policy": ["p"] * (k * n_events),
            "action": np.tile(np.arange(k), n_events),
            "probability": pa.array(np.full(k * n_events, 1 / 3, dtype=dtype)),
        }
    )


def test_a_float16_policy_table_is_judged_by_its_own_precision(tmp_path: Path) -> None:
    logs = read_logs(pa.table(cols()))
    tp = target_propensities(logs, _thirds(np.float16))  # rows sum to 0.99976
    assert np.allclose(tp.values[:, 0], np.float16(1 / 3), rtol=0, atol=1e-12)
    path = tmp_path / "p16.parquet"
    pq.write_table(_thirds(np.float16), path)
    assert read_policy_table(path).schema.metadata[b"ope.probability_roundoff"] == b"0.00048828125"
    assert np.allclose(target_propensities(logs, path).values[:, 0], np.float16(1 / 3), atol=1e-12)
    # the same sums in float64 are a real error: float64 tolerance for float64 storage
    rounded = _thirds(np.float64).set_column(
        3, "probability", pa.array(np.full(3 * N, float(np.float16(1 / 3))))
    )
    with pytest.raises(
        PolicyError, match=r"must sum to 1 \(within 1e-06\) for each event; 8 events"
    ):
        target_propensities(logs, rounded)


def test_a_float16_table_that_is_really_off_is_still_refused() -> None:
    logs = read_logs(pa.table(cols()))
    table = _thirds(np.float16).set_column(
        3, "probability", pa.array(np.full(3 * N, 0.33, dtype=np.float16))
    )
    with pytest.raises(
        PolicyError,
        match=r"must sum to 1 \(within 1e-06, widened to 0\.000976562 "
        r"because the table stores probabilities in float16\)",
    ):
        target_propensities(logs, table)


def test_duplicate_policy_table_columns_are_refused(tmp_path: Path) -> None:
    logs = read_logs(pa.table(cols()))
    t = _thirds(np.float64)
    dup = pa.Table.from_arrays(
        [*t.columns, t.column("probability")], names=[*t.column_names, "probability"]
    )
    with pytest.raises(SchemaError, match=r"column name\(s\) 'probability' appear more than once"):
        target_propensities(logs, dup)
    df = pd.concat([t.to_pandas(), t.to_pandas()[["policy"]]], axis=1)
    with pytest.raises(SchemaError, match=r"column name\(s\) 'policy' appear more than once"):
        target_propensities(logs, df)
    csv = tmp_path / "dup.csv"
    csv.write_text("event_id,policy,action,probability,probability\n0,p,0,1,1\n")
    with pytest.raises(SchemaError, match=r"'probability' appear more than once"):
        read_policy_table(csv)


@pytest.mark.parametrize(
    "data,error,match",
    [
        (
            b"event_id,policy,action,probability\n0,p,0,1.0\n1,caf\xe9,0,1.0\n",
            SchemaError,
            r"column 'policy' \(#1\) holds text that is not UTF-8 \(first at line 3, 1-based with the "
            r"header\).*encoding='latin-1'",
        ),
        (
            "event_id,policy,action,probability\n0,p,0,1.0\n".encode("utf-16"),
            SchemaError,
            r"is UTF-16 text; ope reads CSV policy tables as UTF-8",
        ),
        (
            b"event_id,policy,action,probability\n0,p,0,one\n",
            SchemaError,
            r"column 'probability' \(#3\) must hold numbers \(probabilities\), but holds 'one'",
        ),
        (b"", ope.DataFileError, r"is empty \(0 bytes\)"),
        (
            b"event_id,policy,action,probability\n0,p,0\n",
            ope.DataFileError,
            r"could not be read: CSV parse error: Expected 4 columns, got 3",
        ),
    ],
    ids=["latin1", "utf16", "probability_text", "empty", "ragged"],
)
def test_unreadable_csv_policy_tables(tmp_path: Path, data: bytes, error: type, match: str) -> None:
    path = tmp_path / "policy.csv"
    path.write_bytes(data)
    with pytest.raises(error, match=match) as info:
        read_policy_table(path)
    exc = info.value
    assert exc.__cause__ is None and (exc.__context__ is None or exc.__suppress_context__)


# --------------------------------------------------------------------------------------------
# messages that name the culprit
# --------------------------------------------------------------------------------------------


def test_target_out_of_range_names_each_column_and_its_rows() -> None:
    t = pa.table(
        cols(
            **{
                "target__a": [0.5, 1.5, 0.5, -1.0, 0.5, 0.5, 0.5, 0.5],
                "target__b": [0.5, 0.5, float("nan"), 0.5, 0.5, 0.5, 0.5, 2.0],
            }
        )
    )
    with pytest.raises(ValidationError) as info:
        read_logs(t)
    report = info.value.report
    assert report.rejected == {"target_probability_out_of_range": 4}
    assert report.rejected_by_column == {
        "target_probability_out_of_range": {"target__a": 2, "target__b": 2}
    }
    assert report.examples_by_column == {
        "target_probability_out_of_range": {"target__a": (1, 3), "target__b": (2, 7)}
    }
    text = str(info.value)
    assert "      in target__a: 2 (rows 1, 3)\n      in target__b: 2 (rows 2, 7)" in text
    assert "(in target__a, target__b)" in text
    assert report.to_dict()["rejected_by_column"] == {
        "target_probability_out_of_range": {
            "target__a": {"rows": 2, "examples": [1, 3]},
            "target__b": {"rows": 2, "examples": [2, 7]},
        }
    }


def test_scans_merge_the_culprit_columns_across_batches() -> None:
    t = pa.table(
        cols(
            **{
                "target__a": [0.5, 1.5, 0.5, 0.5, 0.5, -1.0, 0.5, 0.5],
                "target__b": [0.5] * 7 + [2.0],
            }
        )
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eager = read_logs(t, on_invalid="drop")
        scan = scan_logs(t, batch_size=3, on_invalid="drop")
        list(scan)
    assert scan.report == eager.report
    assert scan.report.rejected_by_column == {
        "target_probability_out_of_range": {"target__a": 2, "target__b": 1}
    }
    assert scan.report.examples_by_column["target_probability_out_of_range"]["target__a"] == (1, 5)


def test_target_distribution_rules_name_their_column() -> None:
    t = pa.table(
        cols(
            candidates=[[0, 1]] * N,
            target__a=[0.5] * N,
            target_dist__a=[[0.5, 0.5]] * 7 + [[0.5, 1.5]],
            target__b=[0.5] * N,
            target_dist__b=[[0.5, 0.5]] * 6 + [[0.5], [0.5, 0.5]],
        )
    )
    with pytest.raises(ValidationError) as info:
        read_logs(t)
    assert info.value.report.rejected_by_column == {
        "target_distribution_out_of_range": {"target_dist__a": 1},
        "target_distribution_length_mismatch": {"target_dist__b": 1},
    }


def test_feature_labels_name_the_context_column_of_each_feature() -> None:
    logs = read_logs(pa.table(cols(x=[0.0] * N, emb=[[1.0, 2.0, 3.0]] * N)))
    assert feature_labels(logs, ["emb", "x"]) == ["emb[0]", "emb[1]", "emb[2]", "x"]
    assert feature_labels(logs, "x") == ["x"]
    with pytest.raises(SchemaError, match=r"context column 'y' is not in the logs"):
        feature_labels(logs, ["y"])


# --------------------------------------------------------------------------------------------
# the readable report
# --------------------------------------------------------------------------------------------


def test_a_report_of_120_columns_fits_the_width_and_keeps_the_full_list() -> None:
    names = (
        ["event_id", "action", "propensity", "reward"]
        + [f"target__p{i}" for i in range(20)]
        + [f"user_feature_{i}" for i in range(90)]
        + ["country", "device", "day", "hour", "a-very-long-segment-column-name", "z"]
    )
    assert len(names) == 120
    t = pa.table({n: [0.5] * 2 if n not in ("action", "event_id") else [0, 1] for n in names})
    logs = read_logs(t)
    text = str(logs.report)
    assert all(len(line) <= REPORT_WIDTH for line in text.splitlines())
    assert (
        "  columns (120): event_id, action, propensity, reward, 20 target__* (target__p0,\n"
        "                 target__p1, target__p2, ...), 90 user_feature_* (user_feature_0,\n"
    ) in text
    assert "90 user_feature_* (user_feature_0, user_feature_1, user_feature_2, ...)" in " ".join(
        line.strip() for line in text.splitlines()
    )
    assert len(text.splitlines()) <= 10
    assert logs.report.to_dict()["columns"] == names


def test_a_short_column_list_is_listed_in_full_and_wrapped() -> None:
    names = tuple(f"feature_{i}" for i in range(30))
    text = ValidationReport("<Table>", 1, 1, columns=names).format(width=50)
    lines = text.splitlines()
    assert all(len(line) <= 50 for line in lines)
    assert " ".join(" ".join(line.split()) for line in lines[4:]) == (
        "columns (30): " + ", ".join(names)
    )
    assert summarize_columns(names) == ", ".join(names)
    assert summarize_columns(names, max_names=10).startswith("30 feature_* (feature_0, feature_1,")
