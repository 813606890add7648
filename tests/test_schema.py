"""Schemas, safe casts and the row rules of ope.schema, against hand-made and brute-force truth."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ope.exceptions import SchemaError
from ope.schema import (
    BANDIT,
    DISTRIBUTION_SUM_ATOL,
    PAIRED,
    PROPENSITY_MATCH_RTOL,
    REJECTION_REASONS,
    TRAJECTORY,
    check_bandit_rows,
    conform,
    first_occurrence_duplicates,
    plan_columns,
)


def conformed(table: pa.Table, schema=BANDIT, **kw) -> pa.Table:
    return conform(table, plan_columns(table.schema, schema, **kw))


# ---------------------------------------------------------------- schemas


def test_schema_objects() -> None:
    assert BANDIT.required == ("action", "propensity", "reward")
    assert TRAJECTORY.required == ("episode_id", "step", "action", "propensity", "reward", "done")
    assert PAIRED.required == ("pair_id", "arm", "outcome")
    s = BANDIT.arrow_schema(id_type=pa.string())
    assert s.field("action").type == pa.string()
    assert s.field("candidates").type == pa.list_(pa.string())
    assert s.field("logging_distribution").type == pa.list_(pa.float64())
    assert not s.field("action").nullable and s.field("event_id").nullable
    assert BANDIT.kind_of("target__abc") == "float64"
    assert BANDIT.kind_of("target__") is None  # a bare prefix is not a policy column
    assert BANDIT.kind_of("segment") is None
    with pytest.raises(ValueError, match="id_type must be"):
        BANDIT.arrow_schema(id_type=pa.int32())


def test_every_reason_is_documented() -> None:
    for schema in (BANDIT, TRAJECTORY, PAIRED):
        assert set(schema.reasons) <= set(REJECTION_REASONS)
    assert all(isinstance(v, str) and v for v in REJECTION_REASONS.values())
    assert "propensity_out_of_range" in BANDIT.reasons
    assert "logged_propensity_mismatch" in BANDIT.reasons


# ---------------------------------------------------------------- casts


def test_safe_widening_casts() -> None:
    t = pa.table(
        {
            "action": pa.array([1, 2], pa.int32()),
            "propensity": pa.array([0.5, 0.25], pa.float32()),
            "reward": pa.array([1, 0], pa.uint8()),
            "event_id": pa.array(["a", "b"], pa.large_string()),
            "target__x": pa.array([0.5, 1.0], pa.float16()),
            "candidates": pa.array([[1, 2], [2, 3]], pa.list_(pa.int16(), 2)),
            "logging_distribution": pa.array(
                [[0.5, 0.5], [0.25, 0.75]], pa.large_list(pa.float32())
            ),
        }
    )
    out = conformed(t)
    assert out.schema.field("action").type == pa.int64()
    assert out.schema.field("propensity").type == pa.float64()
    assert out.schema.field("reward").type == pa.float64()
    assert out.schema.field("event_id").type == pa.string()
    assert out.schema.field("target__x").type == pa.float64()
    assert out.schema.field("candidates").type == pa.list_(pa.int64())
    assert out.schema.field("logging_distribution").type == pa.list_(pa.float64())
    assert out.column("candidates").to_pylist() == [[1, 2], [2, 3]]
    assert out.column("logging_distribution").to_pylist() == [[0.5, 0.5], [0.25, 0.75]]
    assert out.column("propensity").to_pylist() == [0.5, 0.25]  # exact in float32


def test_dictionary_columns_are_decoded() -> None:
    t = pa.table(
        {
            "action": pa.array(["x", "y", "x"]).dictionary_encode(),
            "propensity": [0.5, 0.5, 0.5],
            "reward": pa.array([1.0, 0.0, 1.0]).dictionary_encode(),
        }
    )
    out = conformed(t)
    assert out.schema.field("action").type == pa.string()
    assert out.column("action").to_pylist() == ["x", "y", "x"]
    assert out.column("reward").to_pylist() == [1.0, 0.0, 1.0]


def test_pass_through_columns_are_unchanged() -> None:
    seg = pa.array(["a", "b"]).dictionary_encode()
    ctx = pa.array([[0.1, 0.2], [0.3, 0.4]], pa.list_(pa.float32(), 2))
    t = pa.table(
        {
            "action": [1, 2],
            "propensity": [0.5, 0.5],
            "reward": [1.0, 0.0],
            "segment": seg,
            "context": ctx,
            "cost": pa.array([1, 2], pa.int8()),
        }
    )
    out = conformed(t)
    assert out.column("segment").type == seg.type
    assert out.column("context").type == ctx.type
    assert out.column("cost").type == pa.int8()


def test_float_ids_cast_only_when_whole() -> None:
    t = pa.table({"action": [1.0, float("nan"), 3.0], "propensity": [0.5] * 3, "reward": [1.0] * 3})
    out = conformed(t)
    assert out.column("action").type == pa.int64()
    assert out.column("action").to_pylist() == [1, None, 3]  # NaN is missing, not a number
    assert {k: v.nonzero()[0].tolist() for k, v in check_bandit_rows(out).items()} == {
        "action_missing": [1]
    }
    bad = pa.table(
        {"action": [1.0, 2.0, float("inf")], "propensity": [0.5] * 3, "reward": [1.0] * 3}
    )
    with pytest.raises(SchemaError, match=r"not whole numbers \(first at row 2: inf\)"):
        conformed(bad)


def test_lossy_integer_casts_are_schema_errors() -> None:
    big = pa.table(
        {"action": pa.array([2**64 - 1], pa.uint64()), "propensity": [0.5], "reward": [1.0]}
    )
    with pytest.raises(
        SchemaError, match=r"column 'action' of type uint64 cannot be cast to int64"
    ):
        conformed(big)
    huge = pa.table({"action": [1], "propensity": [0.5], "reward": pa.array([2**60], pa.int64())})
    with pytest.raises(
        SchemaError, match=r"column 'reward' of type int64 cannot be cast to double"
    ):
        conformed(huge)


def test_row_offset_in_value_errors() -> None:
    t = pa.table({"action": [1.0, 2.5], "propensity": [0.5] * 2, "reward": [1.0] * 2})
    plan = plan_columns(t.schema, BANDIT)
    with pytest.raises(SchemaError, match=r"first at row 1001: 2\.5"):
        conform(t, plan, row_offset=1000)


def test_bool_done_from_01_integers() -> None:
    t = pa.table(
        {
            "episode_id": [1, 1],
            "step": [0, 1],
            "action": [0, 1],
            "propensity": [0.5] * 2,
            "reward": [0.0, 1.0],
            "done": pa.array([0, 1], pa.int8()),
        }
    )
    out = conformed(t, TRAJECTORY)
    assert out.column("done").to_pylist() == [False, True]


# ---------------------------------------------------------------- planning


def test_mapping_renames_and_projects() -> None:
    s = pa.schema(
        [
            ("item", pa.int32()),
            ("pscore", pa.float32()),
            ("click", pa.int8()),
            ("pi_new", pa.float64()),
            ("junk", pa.string()),
        ]
    )
    plan = plan_columns(
        s,
        BANDIT,
        mapping={
            "action": "item",
            "propensity": "pscore",
            "reward": "click",
            "target__new": "pi_new",
        },
        columns=["target__new"],
    )
    assert plan.source_columns == ("item", "pscore", "click", "pi_new")
    assert plan.output_columns == ["action", "propensity", "reward", "target__new"]


def test_all_problems_listed_at_once() -> None:
    s = pa.schema(
        [
            ("action", pa.string()),
            ("propensity", pa.string()),
            ("candidates", pa.list_(pa.int64())),
            ("target__a", pa.string()),
        ]
    )
    with pytest.raises(SchemaError) as info:
        plan_columns(s, BANDIT, mapping={"event_id": "id"}, source="x.parquet")
    msg = str(info.value)
    assert msg.startswith("x.parquet does not match the bandit log schema (5 problems):")
    for part in (
        "mapping 'event_id': 'id' names a column that is not in the source "
        "(available: action, propensity, candidates, target__a)",
        "required column 'reward' is missing",
        "column 'propensity' has type string",
        "column 'candidates' has type list<item: int64> but action is string",
        "column 'target__a' has type string",
    ):
        assert part in msg


def test_mapping_problems() -> None:
    s = pa.schema([("a", pa.int64()), ("p", pa.float64()), ("r", pa.float64())])
    with pytest.raises(
        SchemaError, match=r"mapping sends column 'a' to both 'action' and 'event_id'"
    ):
        plan_columns(
            s, BANDIT, mapping={"action": "a", "event_id": "a", "propensity": "p", "reward": "r"}
        )
    with pytest.raises(TypeError, match="mapping must map ope's column names"):
        plan_columns(s, BANDIT, mapping={"action": 3})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="columns must be a list"):
        plan_columns(
            s, BANDIT, mapping={"action": "a", "propensity": "p", "reward": "r"}, columns="a"
        )
    dup = pa.schema(
        [
            ("action", pa.int64()),
            ("action", pa.int64()),
            ("propensity", pa.float64()),
            ("reward", pa.float64()),
        ]
    )
    with pytest.raises(SchemaError, match=r"column name\(s\) 'action' appear more than once"):
        plan_columns(dup, BANDIT)


# ---------------------------------------------------------------- row rules


def test_tolerances_at_their_boundaries() -> None:
    eps = DISTRIBUTION_SUM_ATOL
    t = pa.table(
        {
            "action": [0, 0, 0],
            "propensity": [
                0.5,
                0.5 * (1 + 0.5 * PROPENSITY_MATCH_RTOL),
                0.5 * (1 + 2 * PROPENSITY_MATCH_RTOL),
            ],
            "reward": [1.0] * 3,
            "candidates": [[0, 1]] * 3,
            "logging_distribution": [[0.5, 0.5 + 0.5 * eps], [0.5, 0.5], [0.5, 0.5 - 2 * eps]],
        }
    )
    masks = {k: v.nonzero()[0].tolist() for k, v in check_bandit_rows(conformed(t)).items()}
    assert masks == {"logging_distribution_not_normalized": [2], "logged_propensity_mismatch": [2]}


def test_float32_distributions_pass() -> None:
    rng = np.random.default_rng(1)
    k = 500
    raw = rng.dirichlet(np.ones(k), size=50).astype(np.float32)
    raw /= raw.sum(axis=1, keepdims=True, dtype=np.float32)
    action = rng.integers(0, k, 50)
    t = pa.table(
        {
            "action": action,
            "propensity": raw[np.arange(50), action],  # float32
            "reward": np.ones(50),
            "candidates": pa.array([list(range(k))] * 50),
            "logging_distribution": pa.array(list(raw), pa.list_(pa.float32())),
        }
    )
    assert check_bandit_rows(conformed(t)) == {}


def test_string_actions_and_candidates() -> None:
    t = pa.table(
        {
            "action": ["b", "z", "a"],
            "propensity": [0.5, 0.5, 0.25],
            "reward": [1.0, 0.0, 1.0],
            "candidates": [["a", "b"], ["a", "b"], ["c", "a", "d"]],
            "logging_distribution": [[0.5, 0.5], [0.5, 0.5], [0.5, 0.25, 0.25]],
            "target_dist__new": [[1.0, 0.0], [0.5, 0.5, 0.0], [0.2, 1.1, 0.0]],
        }
    )
    masks = {k: v.nonzero()[0].tolist() for k, v in check_bandit_rows(conformed(t)).items()}
    assert masks == {
        "action_not_in_candidates": [1],
        "target_distribution_length_mismatch": [1],
        "target_distribution_out_of_range": [2],
    }


def test_sliced_and_chunked_lists() -> None:
    full = pa.table(
        {
            "action": [9, 1, 2, 1],
            "propensity": [1.0, 0.5, 0.5, 0.5],
            "reward": [1.0] * 4,
            "candidates": [[9], [1, 2], [2, 3], [5, 6]],
            "logging_distribution": [[1.0], [0.5, 0.5], [0.5, 0.5], [0.5, 0.5]],
        }
    )
    sliced = full.slice(1)  # offsets no longer start at 0
    chunked = pa.concat_tables([full.slice(0, 2), full.slice(2)])
    for t, expected in ((sliced, [2]), (chunked, [3])):
        masks = {k: v.nonzero()[0].tolist() for k, v in check_bandit_rows(conformed(t)).items()}
        assert masks == {"action_not_in_candidates": expected}


@pytest.mark.parametrize("kind", ["dense", "sparse", "sorted", "string", "with_nulls"])
def test_first_occurrence_duplicates(kind: str) -> None:
    rng = np.random.default_rng(7)
    n = 2_000
    if kind == "dense":
        x = rng.integers(0, n, n)
    elif kind == "sparse":
        x = rng.integers(0, 2**62, n // 2)
        x = np.concatenate([x, x[rng.integers(0, x.size, n // 2)]])
    elif kind == "sorted":
        x = np.arange(n) * 3
    else:
        x = rng.integers(0, 300, n)
    values = [f"id{v}" for v in x] if kind == "string" else x.tolist()
    if kind == "with_nulls":
        values = [None if i % 10 == 0 else v for i, v in enumerate(values)]
    arr = pa.chunked_array([pa.array(values[: n // 3]), pa.array(values[n // 3 :])])
    valid = np.array([v is not None for v in values])
    got = first_occurrence_duplicates(arr, valid)
    seen: set = set()
    expected = np.zeros(len(values), dtype=bool)
    for i, v in enumerate(values):  # brute force reference
        if v is None:
            continue
        expected[i] = v in seen
        seen.add(v)
    np.testing.assert_array_equal(got, expected)


# ---------------------------------------------------------------- brute-force reference


def reference_bandit(rows: list[dict]) -> dict[str, list[int]]:
    """A row-by-row reading of REJECTION_REASONS, written independently of the vectorized code."""
    out: dict[str, list[int]] = {}

    def flag(reason: str, i: int) -> None:
        out.setdefault(reason, []).append(i)

    seen: set = set()
    for i, r in enumerate(rows):
        a, p, rew, eid = r["action"], r["propensity"], r["reward"], r["event_id"]
        if a is None:
            flag("action_missing", i)
        p_ok = p is not None and not math.isnan(p) and 0 < p <= 1
        if p is None or math.isnan(p):
            flag("propensity_missing", i)
        elif not p_ok:
            flag("propensity_out_of_range", i)
        if rew is None or math.isnan(rew):
            flag("reward_missing", i)
        elif math.isinf(rew):
            flag("reward_not_finite", i)
        if eid is None:
            flag("event_id_missing", i)
        elif eid in seen:
            flag("event_id_duplicate", i)
        else:
            seen.add(eid)
        t = r["target__x"]
        if t is None or math.isnan(t) or not 0 <= t <= 1:
            flag("target_probability_out_of_range", i)
        c, d = r["candidates"], r["logging_distribution"]
        if c is None or any(v is None for v in c):
            flag("candidates_missing", i)
        if c is not None:
            vals = [v for v in c if v is not None]
            if len(set(vals)) < len(vals):
                flag("candidates_duplicate", i)
            if a is not None and a not in vals:
                flag("action_not_in_candidates", i)
        d_bad = d is None or any(v is None or math.isnan(v) or not 0 <= v <= 1 for v in d)
        if c is not None and d is not None and len(d) != len(c):
            flag("candidates_length_mismatch", i)
        if d_bad:
            flag("logging_distribution_out_of_range", i)
        elif abs(sum(d) - 1) > DISTRIBUTION_SUM_ATOL:
            flag("logging_distribution_not_normalized", i)
        if (
            c is not None
            and d is not None
            and len(d) == len(c)
            and not d_bad
            and p_ok
            and a is not None
            and a in c
        ):
            dv = d[c.index(a)]
            if abs(p - dv) > PROPENSITY_MATCH_RTOL * max(p, dv):
                flag("logged_propensity_mismatch", i)
    return out


maybe_float = st.one_of(
    st.none(),
    st.just(float("nan")),
    st.sampled_from([0.0, 0.25, 0.5, 1.0, 1.5, -0.5, float("inf")]),
)
row = st.fixed_dictionaries(
    {
        "event_id": st.one_of(st.none(), st.integers(0, 12)),
        "action": st.one_of(st.none(), st.integers(0, 4)),
        "propensity": maybe_float,
        "reward": maybe_float,
        "target__x": maybe_float,
        "candidates": st.one_of(
            st.none(), st.lists(st.one_of(st.integers(0, 4), st.none()), max_size=4)
        ),
        "logging_distribution": st.one_of(st.none(), st.lists(maybe_float, max_size=4)),
    }
)


@settings(max_examples=150, deadline=None)
@given(st.lists(row, min_size=1, max_size=25), st.integers(1, 4))
def test_rules_match_brute_force(rows: list[dict], n_chunks: int) -> None:
    # normalized distributions too, so the sum and mismatch rules are exercised
    for r in rows:
        c = r["candidates"]
        if r["logging_distribution"] == [] and c:
            r["logging_distribution"] = [1.0 / len(c)] * len(c)
    schema = pa.schema(
        [
            ("event_id", pa.int64()),
            ("action", pa.int64()),
            ("propensity", pa.float64()),
            ("reward", pa.float64()),
            ("target__x", pa.float64()),
            ("candidates", pa.list_(pa.int64())),
            ("logging_distribution", pa.list_(pa.float64())),
        ]
    )
    table = pa.Table.from_pylist(rows, schema=schema)
    bounds = np.linspace(0, len(rows), n_chunks + 1).astype(int)
    table = pa.concat_tables([table.slice(a, b - a) for a, b in zip(bounds[:-1], bounds[1:])])
    got = {k: v.nonzero()[0].tolist() for k, v in check_bandit_rows(conformed(table)).items()}
    assert got == reference_bandit(rows)
