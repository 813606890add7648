"""Tests of ope.policies: policy objects, target__ columns and the long-format policy table join."""

from __future__ import annotations

import doctest
import tracemalloc
from decimal import Decimal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import ope.policies._core as policies_core
import ope.policies.join as policies_join
import ope.policies.objects as policies_objects
import ope.policies.table as policies_table
from ope.exceptions import DataFileError, ParameterError, PolicyError, SchemaError
from ope.logs import BanditLogs, ValidationReport
from ope.policies import (
    PROBABILITY_TOLERANCE,
    ClassifierPolicy,
    DeterministicPolicy,
    EpsilonGreedyPolicy,
    Policy,
    PolicyDistribution,
    SoftmaxPolicy,
    TargetPropensities,
    UniformPolicy,
    read_policy_table,
    target_propensities,
    to_policy_table,
    write_policy_table,
)


def make_logs(table: pa.Table | dict, *, rejected: int = 0) -> BanditLogs:
    if isinstance(table, dict):
        table = pa.table(table)
    n = table.num_rows
    return BanditLogs(table, ValidationReport(source="<test>", rows_read=n + rejected, rows_used=n))


def base_cols(n: int, actions, event_id=None) -> dict:
    cols = {"action": actions, "propensity": [0.5] * n, "reward": [1.0] * n}
    if event_id is not None:
        cols = {"event_id": event_id, **cols}
    return cols


def dense(dist: PolicyDistribution, labels) -> np.ndarray:
    """Dense (n, len(labels)) view of a distribution in the order of ``labels`` (tests only)."""
    pos = {a: j for j, a in enumerate(dist.actions.tolist())}
    full = dist.matrix.toarray()
    out = np.zeros((dist.n, len(labels)))
    for k, a in enumerate(labels):
        if a in pos:
            out[:, k] = full[:, pos[a]]
    return out


# ---------------------------------------------------------------------------------------------
# long-format policy table join
# ---------------------------------------------------------------------------------------------


def int_table_case():
    logs = make_logs(base_cols(3, [7, 8, 7], event_id=[100, 101, 102]))
    rows = [
        (100, "new", 7, 0.25),
        (100, "new", 8, 0.75),
        (101, "new", 9, 1.0),
        (102, "new", 7, 0.5),
        (102, "new", 9, 0.5),
        (100, "old", 7, 1.0),
        (101, "old", 8, 1.0),
        (102, "old", 8, 0.5),
        (102, "old", 7, 0.5),
    ]
    df = pd.DataFrame(rows, columns=["event_id", "policy", "action", "probability"])
    return logs, df


def test_table_join_int_ids_hand_computed_and_shuffle_invariant():
    logs, df = int_table_case()
    expected = np.array([[0.25, 1.0], [0.0, 1.0], [0.5, 0.5]])  # columns sorted: new, old
    tp = target_propensities(logs, df)
    assert tp.names == ["new", "old"]
    np.testing.assert_array_equal(tp.values, expected)
    assert tp.values.dtype == np.float64 and tp.distributions is None
    for seed in range(3):
        shuffled = df.sample(frac=1.0, random_state=seed)
        np.testing.assert_array_equal(target_propensities(logs, shuffled).values, expected)


def test_table_join_distributions_hand_computed():
    logs, df = int_table_case()
    tp = target_propensities(logs, pa.Table.from_pandas(df), with_distributions=True)
    new = tp.distributions["new"]
    assert new.actions.tolist() == [7, 8, 9]
    np.testing.assert_array_equal(new.matrix.toarray(), [[0.25, 0.75, 0], [0, 0, 1], [0.5, 0, 0.5]])
    assert new.nnz == 5
    np.testing.assert_array_equal(
        tp.distributions["old"].matrix.toarray(), [[1, 0, 0], [0, 1, 0], [0.5, 0.5, 0]]
    )


def test_table_join_string_ids_and_actions():
    logs = make_logs(base_cols(2, ["b", "c"], event_id=["e2", "e1"]))
    table = pa.table(
        {
            "event_id": ["e1", "e2", "e2", "e1"],
            "policy": ["p", "p", "p", "p"],
            "action": ["c", "a", "b", "zz"],
            "probability": pa.array([0.6, 0.9, 0.1, 0.4], type=pa.float32()),
        }
    )
    tp = target_propensities(logs, table, with_distributions=True)
    np.testing.assert_allclose(tp["p"], [np.float32(0.1), np.float32(0.6)], rtol=0, atol=0)
    d = tp.distributions["p"]
    assert d.actions.tolist() == ["a", "b", "c", "zz"]
    np.testing.assert_allclose(
        dense(d, ["a", "b", "c", "zz"]), [[0.9, 0.1, 0, 0], [0, 0, 0.6, 0.4]], atol=1e-7
    )


def test_table_join_chunked_logs_and_dictionary_columns():
    t1 = pa.table(base_cols(2, [1, 2], event_id=[1, 2]))
    t2 = pa.table(base_cols(1, [3], event_id=[3]))
    logs = make_logs(pa.concat_tables([t1, t2]))
    table = pa.table(
        {
            "event_id": pa.array([3, 1, 2, 2], type=pa.int32()),
            "policy": pa.array(["q", "q", "q", "q"]).dictionary_encode(),
            "action": [3, 1, 2, 1],
            "probability": [1.0, 1.0, 0.5, 0.5],
        }
    )
    np.testing.assert_array_equal(target_propensities(logs, table).values[:, 0], [1.0, 0.5, 1.0])


def test_table_join_integer_policy_names_and_zero_rows_not_stored():
    logs = make_logs(base_cols(1, [1], event_id=[5]))
    df = pd.DataFrame(
        {"event_id": [5, 5], "policy": [3, 3], "action": [1, 2], "probability": [1.0, 0.0]}
    )
    tp = target_propensities(logs, df, with_distributions=True)
    assert tp.names == ["3"]
    assert tp.distributions["3"].nnz == 1


def test_policy_table_parquet_and_csv_round_trip(tmp_path):
    logs, df = int_table_case()
    expected = target_propensities(logs, df).values
    for name in ("p.parquet", "p.csv"):
        path = tmp_path / name
        write_policy_table(df, path)
        table = read_policy_table(path)
        assert table.column_names == ["event_id", "policy", "action", "probability"]
        np.testing.assert_array_equal(target_propensities(logs, path).values, expected)
        np.testing.assert_array_equal(target_propensities(logs, str(path)).values, expected)


def test_read_policy_table_mapping(tmp_path):
    path = tmp_path / "theirs.parquet"
    pq.write_table(pa.table({"id": [1], "pol": ["x"], "item": [4], "p": [1.0]}), path)
    t = read_policy_table(
        path, mapping={"event_id": "id", "policy": "pol", "action": "item", "probability": "p"}
    )
    assert t.to_pydict() == {"event_id": [1], "policy": ["x"], "action": [4], "probability": [1.0]}


def test_to_policy_table_round_trip_through_join():
    logs = make_logs(
        {
            **base_cols(3, ["a", "b", "c"], event_id=[1, 2, 3]),
            "candidates": [["a", "b"], ["b", "c", "d"], ["c"]],
            "s": [[0.0, 1.0], [2.0, 0.5, -1.0], [3.0]],
        }
    )
    pols = {
        "soft": SoftmaxPolicy("s", 0.7),
        "unif": UniformPolicy(),
        "greedy": DeterministicPolicy("s"),
    }
    direct = target_propensities(logs, pols)
    table = to_policy_table(logs, pols)
    assert table.num_rows == 6 + 6 + 3
    assert (np.asarray(table.column("probability")) > 0).all()
    joined = target_propensities(logs, table)
    order = [joined.names.index(n) for n in direct.names]
    np.testing.assert_allclose(joined.values[:, order], direct.values, rtol=0, atol=1e-15)
    # from TargetPropensities with distributions
    again = to_policy_table(logs, target_propensities(logs, pols, with_distributions=True))
    assert again.num_rows == table.num_rows
    with pytest.raises(PolicyError, match="needs distributions"):
        to_policy_table(logs, direct)


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 12),
    k=st.integers(1, 6),
    seed=st.integers(0, 2**32 - 1),
)
def test_property_table_join_recovers_random_sparse_policy(n, k, seed):
    rng = np.random.default_rng(seed)
    probs = rng.random((n, k)) * (rng.random((n, k)) < 0.6)
    probs[np.arange(n), rng.integers(0, k, n)] += 0.1  # every row has support
    probs /= probs.sum(axis=1, keepdims=True)
    actions = np.array([f"a{j}" for j in range(k)], dtype=object)
    logged = rng.integers(0, k, n)
    logs = make_logs(
        base_cols(n, actions[logged].tolist(), event_id=(np.arange(n) * 7 + 3).tolist())
    )
    ii, jj = np.nonzero(probs)
    perm = rng.permutation(ii.size)
    table = pa.table(
        {
            "event_id": (ii[perm] * 7 + 3),
            "policy": ["p"] * ii.size,
            "action": actions[jj[perm]].tolist(),
            "probability": probs[ii[perm], jj[perm]],
        }
    )
    tp = target_propensities(logs, table, with_distributions=True)
    np.testing.assert_allclose(tp["p"], probs[np.arange(n), logged], rtol=0, atol=0)
    np.testing.assert_allclose(
        dense(tp.distributions["p"], actions.tolist()), probs, rtol=0, atol=0
    )


# validation errors of the join ------------------------------------------------------------------


def _table(rows):
    return pd.DataFrame(rows, columns=["event_id", "policy", "action", "probability"])


GOOD = [(1, "p", 1, 0.5), (1, "p", 2, 0.5), (2, "p", 2, 1.0)]


@pytest.mark.parametrize(
    "rows, match",
    [
        (
            [(1, "p", 1, 1.5), (1, "p", 2, -0.5), (2, "p", 2, 1.0)],
            r"finite and in \[0, 1\]; they are not in 2 rows \(first at rows 0, 1\)",
        ),
        (
            [(1, "p", 1, np.inf), (2, "p", 2, 1.0)],
            r"finite and in \[0, 1\].*first at row 0\) of the table \(values inf\)",
        ),
        (
            [(1, "p", 1, 0.5), (1, "p", 2, 0.4), (2, "p", 2, 1.0)],
            r"policy 'p'.*sum to 1 \(within 1e-06\).*1 events do not \(first event_id 1, sums 0.9\); renormalize",
        ),
        ([(1, "p", 1, 1.0)], r"1 of the 2 logged events have no rows \(first event_id 2\)"),
        (
            GOOD + [(1, "p", 1, 0.5)],
            r"1 duplicate \(event_id, policy, action\) rows \(first at table rows 3\)",
        ),
        (
            GOOD + [(9, "p", 1, 1.0), (8, "p", 1, 1.0)],
            r"2 events in the table are not in the logs \(2 rows \(first at rows 3, 4\) of the table; first event_id 9, 8\)",
        ),
        (
            GOOD + [(1, "q", 1, 1.0)],
            r"policy 'q': 1 of the 2 logged events have no rows \(first event_id 2\)",
        ),
    ],
)
def test_table_join_validation_errors(rows, match):
    logs = make_logs(base_cols(2, [1, 2], event_id=[1, 2]))
    with pytest.raises(PolicyError, match=match):
        target_propensities(logs, _table(rows))


def test_table_join_reports_dropped_rows_hint():
    logs = make_logs(base_cols(2, [1, 2], event_id=[1, 2]), rejected=1)
    with pytest.raises(
        PolicyError, match=r"the logs dropped 1 invalid rows but do not record their event ids"
    ):
        target_propensities(logs, _table(GOOD + [(3, "p", 1, 1.0)]))


def test_table_join_null_cells():
    logs = make_logs(base_cols(2, [1, 2], event_id=[1, 2]))
    t = pa.table(
        {
            "event_id": [1, None, 2],
            "policy": ["p", "p", None],
            "action": [1, 2, 2],
            "probability": [1.0, 1.0, 1.0],
        }
    )
    with pytest.raises(
        PolicyError,
        match=r"`event_id` is null in 1 row \(first at row 1\).*`policy` is null in 1 row \(first at row 2\)",
    ):
        target_propensities(logs, t)


def test_table_join_schema_errors():
    logs = make_logs(base_cols(2, [1, 2], event_id=[1, 2]))
    with pytest.raises(SchemaError, match=r"missing columns \['policy', 'probability'\]"):
        target_propensities(logs, pd.DataFrame({"event_id": [1], "action": [1]}))
    bad = pa.table({"event_id": [1.5], "policy": ["p"], "action": [1], "probability": ["x"]})
    with pytest.raises(
        SchemaError,
        match=r"`event_id` is double and holds 1 values that are not whole numbers \(first at row 0: 1\.5\); ids must be int64 or string; `probability` must be float64, got string",
    ):
        target_propensities(logs, bad)
    ids = _table([("one", "p", 1, 1.0)])
    with pytest.raises(
        SchemaError,
        match=r"`event_id` is (large_)?string but the logs' `event_id` is int64, and the values do not convert",
    ):
        target_propensities(logs, ids)


def test_table_join_needs_unique_event_ids_in_logs():
    with pytest.raises(PolicyError, match=r"the logs have no `event_id` column"):
        target_propensities(make_logs(base_cols(1, [1])), _table([(1, "p", 1, 1.0)]))
    logs = make_logs(base_cols(2, [1, 2], event_id=[1, 1]))
    with pytest.raises(PolicyError, match=r"must be unique and non-null.*1 repeated or missing"):
        target_propensities(logs, _table([(1, "p", 1, 1.0)]))
    logs = make_logs(base_cols(1, [1], event_id=[1]))
    with pytest.raises(PolicyError, match=r"has no rows"):
        target_propensities(
            logs,
            _table([]).astype(
                {"event_id": "int64", "action": "int64", "probability": "float64", "policy": "str"}
            ),
        )


def test_policy_table_file_errors(tmp_path):
    logs = make_logs(
        base_cols(
            1,
            [1],
            event_id=[1],
        )
        | {"target__new": [1.0]}
    )
    with pytest.raises(DataFileError, match=r"does not exist"):
        read_policy_table(tmp_path / "nope.parquet")
    with pytest.raises(
        DataFileError, match=r"to use the column target__new pass policies=\['new'\]"
    ):
        target_propensities(logs, "new")
    garbage = tmp_path / "bad.parquet"
    garbage.write_bytes(b"not parquet at all")
    with pytest.raises(DataFileError, match=r"could not be read"):
        read_policy_table(garbage)
    with pytest.raises(DataFileError, match=r"must end in .parquet or .csv"):
        write_policy_table(_table(GOOD), tmp_path / "p.json")


# ---------------------------------------------------------------------------------------------
# target__ columns
# ---------------------------------------------------------------------------------------------


def columns_logs(**extra):
    cols = {
        **base_cols(3, ["a", "b", "c"], event_id=[1, 2, 3]),
        "candidates": [["a", "b"], ["c", "b"], ["c"]],
        "target__x": [0.3, 0.6, 1.0],
        "target_dist__x": [[0.3, 0.7], [0.4, 0.6], [1.0]],
        "target__y": [1.0, 0.0, 1.0],
    }
    cols.update(extra)
    return make_logs(cols)


def test_columns_default_and_by_name():
    logs = columns_logs()
    tp = target_propensities(logs)
    assert tp.names == ["x", "y"]
    np.testing.assert_array_equal(tp.values, [[0.3, 1.0], [0.6, 0.0], [1.0, 1.0]])
    np.testing.assert_array_equal(target_propensities(logs, ["y"]).values, [[1.0], [0.0], [1.0]])


def test_columns_distributions_from_target_dist():
    tp = target_propensities(columns_logs(), ["x"], with_distributions=True)
    d = tp.distributions["x"]
    np.testing.assert_allclose(dense(d, ["a", "b", "c"]), [[0.3, 0.7, 0], [0, 0.6, 0.4], [0, 0, 1]])


@pytest.mark.parametrize(
    "kwargs, names, match",
    [
        (
            {},
            ["z"],
            r"unknown policies \['z'\] in `policies`: the logs have no column "
            r"target__z. Available: \['x', 'y'\]",
        ),
        ({}, ["x", "x"], r"policy names must be distinct"),
        (
            {"target__x": [0.3, 1.2, np.nan]},
            ["x"],
            r"policy 'x': target propensities must be finite and in \[0, 1\]; they are not in 2 rows \(first at rows 1, 2\)",
        ),
    ],
)
def test_columns_errors(kwargs, names, match):
    with pytest.raises(PolicyError, match=match):
        target_propensities(columns_logs(**kwargs), names)


def test_columns_none_without_target_columns():
    with pytest.raises(PolicyError, match=r"the logs have no `target__<name>` columns"):
        target_propensities(make_logs(base_cols(1, [1])))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (
            {"target_dist__x": [[0.3, 0.7], [0.4, 0.5], [1.0]]},
            r"\(target_dist__x\): each row's probabilities must sum to 1.*1 row \(first at row 1\)",
        ),
        (
            {"target_dist__x": [[0.3, 0.7], [0.6], [1.0]]},
            r"one entry per candidate.*1 row \(first at row 1\)",
        ),
        (
            {"target_dist__x": [[0.7, 0.3], [0.4, 0.6], [1.0]]},
            r"target__x disagrees with target_dist__x at the logged action in 1 row \(first at row 0\)",
        ),
        ({"target_dist__x": [[0.3, 0.7], [0.4, 0.6], [1.5]]}, r"finite and in \[0, 1\]"),
        (
            {"candidates": [["a", "a"], ["c", "b"], ["c"]]},
            r"lists the same action more than once in 1 row \(first at row 0\)",
        ),
    ],
)
def test_columns_distribution_errors(kwargs, match):
    with pytest.raises(PolicyError, match=match):
        target_propensities(columns_logs(**kwargs), ["x"], with_distributions=True)


def test_columns_with_distributions_needs_target_dist():
    with pytest.raises(PolicyError, match=r"lack target_dist__y\. Log `candidates`"):
        target_propensities(columns_logs(), ["y"], with_distributions=True)


def test_bad_policies_argument():
    with pytest.raises(PolicyError, match=r"policies must be None, a list"):
        target_propensities(columns_logs(), 3)
    with pytest.raises(PolicyError, match=r"logs must be BanditLogs"):
        target_propensities(pa.table({"a": [1]}))


# ---------------------------------------------------------------------------------------------
# policy objects
# ---------------------------------------------------------------------------------------------


def cand_logs():
    return make_logs(
        {
            **base_cols(3, [10, 20, 40], event_id=[1, 2, 3]),
            "candidates": [[10, 20], [30, 20, 10, 40], [40]],
            "s": [[1.0, 2.0], [0.5, 3.0, 3.0, -1.0], [7.0]],
            "x1": [0.0, 1.0, 2.0],
            "x2": [1.0, 1.0, 0.0],
        }
    )


def test_uniform_over_candidates_hand_computed():
    logs = cand_logs()
    u = UniformPolicy()
    np.testing.assert_array_equal(u.propensity(logs), [0.5, 0.25, 1.0])
    d = u.distribution(logs)
    np.testing.assert_array_equal(
        dense(d, [10, 20, 30, 40]), [[0.5, 0.5, 0, 0], [0.25] * 4, [0, 0, 0, 1]]
    )
    assert isinstance(u, Policy)


def test_uniform_over_actions_list():
    logs = make_logs(base_cols(3, [1, 2, 9]))
    u = UniformPolicy(actions=[1, 2, 3])
    np.testing.assert_array_equal(u.propensity(logs), [1 / 3, 1 / 3, 0.0])
    d = u.distribution(logs)
    np.testing.assert_allclose(dense(d, [1, 2, 3, 9]), np.tile([1 / 3, 1 / 3, 1 / 3, 0], (3, 1)))
    np.testing.assert_array_equal(d.probability(logs.column("action")), u.propensity(logs))


@pytest.mark.parametrize(
    "logs_cols, policy, match",
    [
        (
            base_cols(1, [1]),
            UniformPolicy(),
            r"UniformPolicy needs a support.*pass UniformPolicy\(actions=\[...\]\)",
        ),
        (
            base_cols(2, [1, 2]) | {"candidates": [[1], []]},
            UniformPolicy(),
            r"candidate set is empty in 1 row \(first at row 1\)",
        ),
        (
            base_cols(2, [1, 2]) | {"candidates": pa.array([[1], None], type=pa.list_(pa.int64()))},
            UniformPolicy(),
            r"`candidates` is missing \(null\) in 1 row \(first at row 1\)",
        ),
        (
            base_cols(1, [1]),
            UniformPolicy(actions=["a"]),
            r"UniformPolicy actions must be labels of the same type as the logged actions \(int64\)",
        ),
    ],
)
def test_uniform_errors(logs_cols, policy, match):
    logs = make_logs(logs_cols)
    with pytest.raises(PolicyError, match=match):
        policy.distribution(logs)
    with pytest.raises(PolicyError, match=match):
        policy.propensity(logs)


def test_uniform_constructor_errors():
    with pytest.raises(PolicyError, match=r"actions must be distinct"):
        UniformPolicy(actions=[1, 1])
    with pytest.raises(PolicyError, match=r"actions must not be empty"):
        UniformPolicy(actions=[])
    with pytest.raises(PolicyError, match=r"got the string 'abc'"):
        UniformPolicy(actions="abc")


def test_deterministic_column_scores_and_ties():
    logs = cand_logs()
    d = DeterministicPolicy("s").distribution(logs)
    # row 1: tie between 20 and 10 at 3.0 -> first listed (20) wins
    np.testing.assert_array_equal(
        dense(d, [10, 20, 30, 40]), [[0, 1, 0, 0], [0, 1, 0, 0], [0, 0, 0, 1]]
    )
    np.testing.assert_array_equal(DeterministicPolicy("s").propensity(logs), [0.0, 1.0, 1.0])
    assert d.nnz == 3


def test_deterministic_callable_ties_and_candidate_mask():
    logs = make_logs({**base_cols(3, ["a", "b", "c"]), "x1": [0.0, 1.0, 2.0]})

    def scores(X):
        return np.column_stack([X[:, 0], np.ones(len(X)), np.full(len(X), 1.5)])

    pol = DeterministicPolicy(scores, actions=["a", "b", "c"], feature_columns=["x1"])
    # row 0: max 1.5 -> c; row 1: 1, 1, 1.5 -> c; row 2: a (2.0)
    np.testing.assert_array_equal(
        dense(pol.distribution(logs), ["a", "b", "c"]), [[0, 0, 1], [0, 0, 1], [1, 0, 0]]
    )
    tie = DeterministicPolicy(
        lambda X: np.zeros((len(X), 3)), actions=["c", "b", "a"], feature_columns=["x1"]
    )
    np.testing.assert_array_equal(
        dense(tie.distribution(logs), ["a", "b", "c"])[:, 2], [1, 1, 1]
    )  # first of actions
    masked_logs = make_logs(
        {
            **base_cols(3, ["a", "b", "c"]),
            "x1": [0.0, 1.0, 2.0],
            "candidates": [["a", "b"], ["b"], ["c", "a"]],
        }
    )
    np.testing.assert_array_equal(
        dense(pol.distribution(masked_logs), ["a", "b", "c"]), [[0, 1, 0], [0, 1, 0], [1, 0, 0]]
    )


def test_deterministic_score_errors():
    logs = cand_logs()
    with pytest.raises(PolicyError, match=r"scores are NaN or \+inf in 1 row \(first at row 1\)"):
        DeterministicPolicy("s").distribution(
            make_logs(
                logs.table.set_column(5, "s", pa.array([[1.0, 2.0], [np.nan, 0, 0, 0], [1.0]]))
            )
        )
    with pytest.raises(PolicyError, match=r"every score is -inf.*1 row \(first at row 2\)"):
        DeterministicPolicy("s").distribution(
            make_logs(
                logs.table.set_column(5, "s", pa.array([[1.0, 2.0], [0.0, 0, 0, 0], [-np.inf]]))
            )
        )
    with pytest.raises(PolicyError, match=r"column 's' must have one entry per candidate"):
        DeterministicPolicy("s").distribution(
            make_logs(logs.table.set_column(5, "s", pa.array([[1.0], [0.0, 0, 0, 0], [1.0]])))
        )
    with pytest.raises(PolicyError, match=r"the logs have no column 'nope'"):
        DeterministicPolicy("nope").distribution(logs)
    bad_shape = DeterministicPolicy(
        lambda X: np.zeros((len(X), 2)), actions=[10, 20, 30], feature_columns=["x1"]
    )
    with pytest.raises(
        PolicyError,
        match=r"must return an array of shape \(n, len\(actions\)\) = \(3, 3\); got \(3, 2\)",
    ):
        bad_shape.distribution(logs)
    missing = DeterministicPolicy(lambda X: X, actions=[10], feature_columns=["x1", "nope", "gone"])
    with pytest.raises(
        SchemaError, match=r"policy column\(s\) \['nope', 'gone'\] are not in the logs"
    ):
        missing.distribution(logs)


def test_score_policy_constructor_errors():
    with pytest.raises(PolicyError, match=r"a callable scores needs actions=\[...\]"):
        DeterministicPolicy(lambda X: X)
    with pytest.raises(
        PolicyError, match=r"actions= and feature_columns= are only used with a callable"
    ):
        SoftmaxPolicy("s", actions=[1])
    with pytest.raises(PolicyError, match=r"scores must be the name of a list<float64> column"):
        DeterministicPolicy(3)
    with pytest.raises(PolicyError, match=r"feature_columns must be a non-empty list"):
        SoftmaxPolicy(lambda X: X, actions=[1], feature_columns=[])
    for bad in (0, -1.0, np.inf, np.nan, "1", True):
        with pytest.raises(ParameterError, match=r"temperature`? must be a (finite )?number"):
            SoftmaxPolicy("s", temperature=bad)


def test_softmax_matches_direct_formula():
    rng = np.random.default_rng(0)
    n, k = 50, 6
    S = rng.normal(scale=3.0, size=(n, k))
    labels = np.array([f"item{j}" for j in range(k)], dtype=object)
    logged = rng.integers(0, k, n)
    logs = make_logs(
        {
            **base_cols(n, labels[logged].tolist()),
            "candidates": [labels.tolist()] * n,
            "s": S.tolist(),
            "x": np.arange(n, dtype=float),
        }
    )
    for tau in (0.3, 1.0, 4.0):
        expected = np.exp(S / tau) / np.exp(S / tau).sum(axis=1, keepdims=True)
        pol = SoftmaxPolicy("s", tau)
        np.testing.assert_allclose(
            dense(pol.distribution(logs), labels.tolist()), expected, rtol=1e-12, atol=0
        )
        np.testing.assert_allclose(pol.propensity(logs), expected[np.arange(n), logged], rtol=1e-12)
        by_callable = SoftmaxPolicy(lambda X: S, tau, actions=labels, feature_columns=["x"])
        np.testing.assert_allclose(
            by_callable.propensity(logs), expected[np.arange(n), logged], rtol=1e-12
        )


def test_softmax_stable_for_huge_scores_and_minus_inf():
    logs = make_logs(
        {
            **base_cols(2, [1, 2]),
            "candidates": [[1, 2, 3], [1, 2]],
            "s": [[1000.0, 1000.0 + np.log(3.0), -np.inf], [-1e308, -1e308]],
        }
    )
    d = SoftmaxPolicy("s").distribution(logs)
    np.testing.assert_allclose(
        dense(d, [1, 2, 3]), [[0.25, 0.75, 0.0], [0.5, 0.5, 0.0]], rtol=1e-12
    )
    assert d.nnz == 4  # the -inf entry is not stored


def test_epsilon_greedy_algebra():
    logs = cand_logs()
    base = SoftmaxPolicy("s", 0.5)
    for eps in (0.0, 0.1, 0.5, 1.0):
        pol = EpsilonGreedyPolicy(base, eps)
        labels = [10, 20, 30, 40]
        expected = (1 - eps) * dense(base.distribution(logs), labels) + eps * dense(
            UniformPolicy().distribution(logs), labels
        )
        np.testing.assert_allclose(
            dense(pol.distribution(logs), labels), expected, rtol=1e-15, atol=1e-15
        )
        np.testing.assert_allclose(
            pol.propensity(logs),
            (1 - eps) * base.propensity(logs) + eps * UniformPolicy().propensity(logs),
            rtol=1e-15,
        )
        np.testing.assert_allclose(
            pol.distribution(logs).probability(logs.column("action")),
            pol.propensity(logs),
            rtol=1e-15,
        )


def test_epsilon_greedy_hand_computed_with_actions_list():
    logs = make_logs({**base_cols(2, [1, 3]), "x": [0.0, 1.0]})
    greedy = DeterministicPolicy(
        lambda X: np.column_stack([1 - X[:, 0], X[:, 0], 0 * X[:, 0]]),
        actions=[1, 2, 3],
        feature_columns=["x"],
    )
    pol = EpsilonGreedyPolicy(greedy, 0.3)
    # row 0 picks 1: 0.7 + 0.1; row 1 picks 2; logged 3 gets 0.1
    np.testing.assert_allclose(pol.propensity(logs), [0.8, 0.1])
    np.testing.assert_allclose(
        dense(pol.distribution(logs), [1, 2, 3]), [[0.8, 0.1, 0.1], [0.1, 0.8, 0.1]]
    )


def test_epsilon_greedy_constructor_errors():
    for bad in (-0.1, 1.5, np.nan, "0.1", True, None):
        with pytest.raises(ParameterError, match=r"epsilon`? must be a number"):
            EpsilonGreedyPolicy(UniformPolicy(), bad)
    with pytest.raises(PolicyError, match=r"base must be a policy object"):
        EpsilonGreedyPolicy("greedy", 0.1)


def test_classifier_policy_matches_predict_proba():
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(1)
    n = 60
    X = rng.normal(size=(n, 3))
    y = np.array(["ad", "news", "video"], dtype=object)[rng.integers(0, 3, n)]
    clf = LogisticRegression().fit(X, y)
    logged = np.where(np.arange(n) % 10 == 0, "unseen", y).astype(
        object
    )  # "unseen" not in classes_
    logs = make_logs({**base_cols(n, logged.tolist()), "f0": X[:, 0], "ctx": X[:, 1:].tolist()})
    pol = ClassifierPolicy(clf, ["f0", "ctx"])
    proba = clf.predict_proba(X)
    col = {c: j for j, c in enumerate(clf.classes_)}
    expected = np.array([proba[i, col[a]] if a in col else 0.0 for i, a in enumerate(logged)])
    np.testing.assert_allclose(pol.propensity(logs), expected, rtol=1e-14)
    np.testing.assert_allclose(dense(pol.distribution(logs), list(clf.classes_)), proba, rtol=1e-14)
    assert "unseen" in pol.distribution(logs).actions.tolist()


def test_classifier_policy_errors():
    from sklearn.linear_model import LogisticRegression

    with pytest.raises(PolicyError, match=r"estimator must have a predict_proba method"):
        ClassifierPolicy(object(), ["x"])
    logs = make_logs({**base_cols(2, [0, 1]), "x": [0.0, np.nan]})
    with pytest.raises(PolicyError, match=r"LogisticRegression is not fitted"):
        ClassifierPolicy(LogisticRegression(), ["x"]).propensity(logs)
    clf = LogisticRegression().fit([[0.0], [1.0]], [0, 1])
    with pytest.raises(
        PolicyError,
        match=r"policy features must be finite; 1 row \(first at row 1\) have NaN or infinite",
    ):
        ClassifierPolicy(clf, ["x"]).propensity(logs)
    str_clf = LogisticRegression().fit([[0.0], [1.0]], ["a", "b"])
    with pytest.raises(
        PolicyError,
        match=r"classes_ must be labels of the same type as the logged actions \(int64\)",
    ):
        ClassifierPolicy(str_clf, ["x"]).propensity(logs)


def test_policy_objects_via_target_propensities():
    logs = cand_logs()
    pols = {
        "u": UniformPolicy(),
        "d": DeterministicPolicy("s"),
        "e": EpsilonGreedyPolicy(DeterministicPolicy("s"), 0.2),
    }
    tp = target_propensities(logs, pols, with_distributions=True)
    assert tp.names == ["u", "d", "e"]
    np.testing.assert_allclose(tp.values[:, 0], [0.5, 0.25, 1.0])
    np.testing.assert_allclose(tp.values[:, 2], 0.8 * tp.values[:, 1] + 0.2 * tp.values[:, 0])
    assert set(tp.distributions) == {"u", "d", "e"}
    np.testing.assert_array_equal(target_propensities(logs, pols).values, tp.values)
    # a PolicyDistribution as a dict value
    again = target_propensities(logs, {"u": tp.distributions["u"]})
    np.testing.assert_array_equal(again.values[:, 0], tp.values[:, 0])
    with pytest.raises(PolicyError, match=r"policy 'bad': expected a policy object"):
        target_propensities(logs, {"bad": 0.5})
    with pytest.raises(PolicyError, match=r"empty dict"):
        target_propensities(logs, {})


def test_user_policy_object_checked():
    logs = cand_logs()

    class Broken:
        def distribution(self, logs):
            raise AssertionError("not called")

        def propensity(self, logs):
            return np.array([0.5, 2.0, 0.1])

    with pytest.raises(
        PolicyError,
        match=r"policy 'b': target propensities must be finite and in \[0, 1\]; they are not in 1 row \(first at row 1\)",
    ):
        target_propensities(logs, {"b": Broken()})


# ---------------------------------------------------------------------------------------------
# PolicyDistribution and TargetPropensities
# ---------------------------------------------------------------------------------------------


def test_policy_distribution_validation():
    acts = np.array([1, 2])
    with pytest.raises(
        PolicyError, match=r"each row's probabilities must sum to 1.*1 row \(first at row 1\)"
    ):
        PolicyDistribution(sp.csr_array(np.array([[0.5, 0.5], [0.5, 0.0]])), acts)
    with pytest.raises(
        PolicyError,
        match=r"finite and in \[0, 1\]; 2 entries are not \(first values 1.5, -0.5 in rows 0, 0\)",
    ):
        PolicyDistribution(sp.csr_array(np.array([[1.5, -0.5]])), acts)
    with pytest.raises(PolicyError, match=r"one label per matrix column \(2\)"):
        PolicyDistribution(sp.csr_array(np.array([[1.0, 0.0]])), np.array([1]))
    with pytest.raises(PolicyError, match=r"2-D scipy.sparse.csr_array"):
        PolicyDistribution(np.eye(2), acts)
    # duplicates are summed into canonical form
    m = sp.csr_array((np.array([0.5, 0.5]), np.array([0, 0]), np.array([0, 2])), shape=(1, 2))
    d = PolicyDistribution(m, acts)
    assert d.nnz == 1 and d.probability(np.array([1])).tolist() == [1.0]
    assert d.probability(np.array([99])).tolist() == [0.0]  # labels outside the catalog


def test_target_propensities_container():
    tp = TargetPropensities(["a"], [[0.5], [1.0]])
    assert tp.n == 2 and tp.values.dtype == np.float64
    with pytest.raises(KeyError, match=r"no policy 'z'; available: a"):
        tp["z"]
    with pytest.raises(PolicyError, match=r"values must have shape \(n, 1\)"):
        TargetPropensities(["a"], np.zeros((2, 2)))


# ---------------------------------------------------------------------------------------------
# large catalogs stay sparse
# ---------------------------------------------------------------------------------------------


def test_large_catalog_never_dense():
    n, k, K = 20_000, 10, 200_000
    rng = np.random.default_rng(3)
    # 10 distinct items per row; together the rows use every one of the 200k items
    cand = rng.permutation(K).reshape(n, k)
    logged = cand[np.arange(n), rng.integers(0, k, n)]
    table = pa.table(
        {
            "event_id": np.arange(n),
            "action": logged,
            "propensity": np.full(n, 0.1),
            "reward": np.zeros(n),
            "candidates": pa.ListArray.from_arrays(np.arange(0, n * k + 1, k), cand.ravel()),
            "s": pa.ListArray.from_arrays(np.arange(0, n * k + 1, k), rng.normal(size=n * k)),
            "target__u": np.full(n, 1.0 / k),
            "target_dist__u": pa.ListArray.from_arrays(
                np.arange(0, n * k + 1, k), np.full(n * k, 1.0 / k)
            ),
        }
    )
    logs = make_logs(table)
    dense_bytes = n * 200_000 * 8  # 32 GB: any dense (n, K) array would fail loudly
    tracemalloc.start()
    try:
        for pol in (
            UniformPolicy(),
            SoftmaxPolicy("s", 0.5),
            EpsilonGreedyPolicy(DeterministicPolicy("s"), 0.1),
        ):
            d = pol.distribution(logs)
            assert d.nnz == k * n
            assert d.n_actions == K
            np.testing.assert_allclose(d.matrix.sum(axis=1), 1.0, atol=1e-12)
        ptable = to_policy_table(logs, {"soft": SoftmaxPolicy("s", 0.5)})
        assert ptable.num_rows == k * n
        tp = target_propensities(logs, ptable, with_distributions=True)
        assert tp.distributions["soft"].nnz == k * n
        by_column = target_propensities(logs, ["u"], with_distributions=True)
        assert by_column.distributions["u"].nnz == k * n
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 200e6 < dense_bytes  # numpy/scipy allocations stay O(nnz)
    np.testing.assert_allclose(
        tp.values[:, 0], SoftmaxPolicy("s", 0.5).propensity(logs), rtol=1e-14
    )


# ---------------------------------------------------------------------------------------------
# docstring examples
# ---------------------------------------------------------------------------------------------


def test_docstring_examples_run():
    attempted = 0
    for module in (policies_core, policies_objects, policies_table, policies_join):
        result = doctest.testmod(
            module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
        )
        assert result.failed == 0, module.__name__
        attempted += result.attempted
    assert attempted >= 10


def test_table_join_duplicates_detected_in_sorted_and_shuffled_tables():
    logs = make_logs(base_cols(2, [1, 2], event_id=[1, 2]))
    rows = [(1, "p", 1, 0.5), (1, "p", 1, 0.5), (2, "p", 2, 1.0)]  # grouped by event: fast path
    with pytest.raises(
        PolicyError,
        match=r"1 duplicate \(event_id, policy, action\) rows \(first at table rows 1\)",
    ):
        target_propensities(logs, _table(rows))
    with pytest.raises(PolicyError, match=r"1 duplicate \(event_id, policy, action\) rows"):
        target_propensities(logs, _table(rows[::-1]))


def test_keyword_only_options_and_probability_lookup_checks():
    with pytest.raises(TypeError):
        UniformPolicy([1, 2])
    with pytest.raises(TypeError):
        SoftmaxPolicy("s", 1.0, [1])
    d = PolicyDistribution(sp.csr_array(np.array([[1.0, 0.0]])), np.array([1, 2]))
    with pytest.raises(PolicyError, match=r"one label per row \(1\), got 2"):
        d.probability(np.array([1, 2]))
    with pytest.raises(PolicyError, match=r"do not match the catalog's type \(int64\)"):
        d.probability(np.array(["x"], dtype=object))


def test_ips_with_policy_propensities_recovers_exact_value():
    """End to end on synthetic data with exact ground truth: log actions from a softmax logger,
    score an epsilon-greedy candidate, and check the IPS mean sum(w r)/n against the candidate's
    exact value sum_i sum_a pi(a|x_i) mu(x_i, a) / n within 4 standard errors."""
    rng = np.random.default_rng(7)
    n, k = 40_000, 5
    labels = np.array([f"a{j}" for j in range(k)], dtype=object)
    scores = rng.normal(size=(n, k))
    mu = 1.0 / (1.0 + np.exp(-scores))  # click probability of each action
    logger_p = np.exp(scores * 0.3) / np.exp(scores * 0.3).sum(axis=1, keepdims=True)
    u = rng.random(n)
    logged = (logger_p.cumsum(axis=1) < u[:, None]).sum(axis=1).clip(max=k - 1)
    reward = (rng.random(n) < mu[np.arange(n), logged]).astype(float)
    logs = make_logs(
        {
            "event_id": np.arange(n),
            "action": labels[logged].tolist(),
            "propensity": logger_p[np.arange(n), logged],
            "reward": reward,
            "candidates": [labels.tolist()] * n,
            "s": scores.tolist(),
        }
    )
    pol = EpsilonGreedyPolicy(DeterministicPolicy("s"), 0.1)
    tp = target_propensities(logs, {"cand": pol}, with_distributions=True)
    w = tp["cand"] / logs.column("propensity")
    contrib = w * reward
    estimate, se = contrib.mean(), contrib.std(ddof=1) / np.sqrt(n)
    truth = (dense(tp.distributions["cand"], labels.tolist()) * mu).sum(axis=1).mean()
    greedy = mu[np.arange(n), scores.argmax(axis=1)]
    np.testing.assert_allclose(truth, (0.9 * greedy + 0.1 * mu.mean(axis=1)).mean(), rtol=1e-12)
    assert abs(estimate - truth) < 4 * se


def test_table_sum_tolerance_boundary():
    logs = make_logs(base_cols(1, [1], event_id=[1]))
    inside = 1.0 - 0.5 * PROBABILITY_TOLERANCE
    np.testing.assert_array_equal(
        target_propensities(logs, _table([(1, "p", 1, inside)])).values, [[inside]]
    )
    with pytest.raises(PolicyError, match=r"sum to 1 \(within 1e-06\)"):
        target_propensities(logs, _table([(1, "p", 1, 1.0 - 2 * PROBABILITY_TOLERANCE)]))


def test_logging_distribution_hand_computed_and_errors():
    from ope.policies import logging_distribution

    cols = {
        **base_cols(2, ["x", "z"]),
        "candidates": [["y", "x"], ["z", "x"]],
        "logging_distribution": [[0.5, 0.5], [0.5, 0.5]],
    }
    d = logging_distribution(make_logs(cols))
    assert d.actions.tolist() == ["x", "y", "z"]
    np.testing.assert_array_equal(d.matrix.toarray(), [[0.5, 0.5, 0], [0.5, 0, 0.5]])
    with pytest.raises(
        PolicyError,
        match=r"disagrees with `propensity` at the logged action in 1 row \(first at row 1\)",
    ):
        logging_distribution(make_logs(cols | {"logging_distribution": [[0.5, 0.5], [0.3, 0.7]]}))
    with pytest.raises(PolicyError, match=r"needs the columns \['logging_distribution'\]"):
        logging_distribution(
            make_logs({k: v for k, v in cols.items() if k != "logging_distribution"})
        )
    with pytest.raises(
        PolicyError, match=r"logging_distribution: each row's probabilities must sum to 1"
    ):
        logging_distribution(make_logs(cols | {"logging_distribution": [[0.5, 0.5], [0.5, 0.4]]}))


def test_reindex_to_a_larger_and_smaller_catalog():
    d = PolicyDistribution(
        sp.csr_array(np.array([[0.25, 0.0, 0.75], [0.0, 1.0, 0.0]])),
        np.array(["a", "b", "c"], dtype=object),
    )
    wider = d.reindex(np.array(["z", "c", "b", "a"], dtype=object))
    np.testing.assert_array_equal(
        dense(wider, ["a", "b", "c", "z"]), [[0.25, 0, 0.75, 0], [0, 1, 0, 0]]
    )
    assert wider.matrix.has_canonical_format
    with pytest.raises(
        PolicyError,
        match=r"1 entries with positive probability have actions missing from the new catalog \(first 'b'\)",
    ):
        d.reindex(["a", "c"])
    with pytest.raises(PolicyError, match=r"reindex actions must be labels of the same type"):
        d.reindex([1, 2, 3])


def test_table_join_sparse_integer_ids_use_the_hash_path():
    # ids spread over 10**15: too wide for a lookup table, so Arrow's hash kernel encodes them
    ids = [10**15, 3, 10**12]
    logs = make_logs(base_cols(3, [5 * 10**14, 1, 1], event_id=ids))
    table = _table(
        [
            (10**12, "p", 1, 1.0),
            (3, "p", 1, 0.5),
            (3, "p", 5 * 10**14, 0.5),
            (10**15, "p", 5 * 10**14, 1.0),
        ]
    )
    np.testing.assert_array_equal(target_propensities(logs, table).values[:, 0], [1.0, 0.5, 1.0])
    with pytest.raises(
        PolicyError, match=r"1 event in the table is not in the logs .*first event_id 7\)"
    ):
        target_propensities(logs, _table(table.values.tolist() + [(7, "p", 1, 1.0)]))


def test_target_dist_columns_with_zeros_do_not_share_row_pointers():
    # regression: every policy's CSR was built on one shared indptr that eliminate_zeros edited
    from ope.simulate import ContextualBandit

    table = ContextualBandit(seed=0).sample(2000, rng=1, distributions=True)
    logs = BanditLogs(table, ValidationReport(source="<test>", rows_read=2000, rows_used=2000))
    tp = target_propensities(logs, None, with_distributions=True)
    for name in tp.names:
        m = tp.distributions[name].matrix
        np.testing.assert_allclose(m.sum(axis=1), 1.0, atol=1e-9)
        np.testing.assert_allclose(
            tp.distributions[name].probability(table.column("action")), tp[name]
        )


# --------------------------------------------------------------------------------------------
# policy tables meet messy logs (review R2)
# --------------------------------------------------------------------------------------------


def _dropped_logs():
    """Events 1..5 logged; 2 and 4 have invalid propensities and are dropped."""
    from ope.io import read_logs
    from ope.exceptions import DroppedRowsWarning

    t = pa.table(
        {
            "event_id": [1, 2, 3, 4, 5],
            "action": [1, 2, 1, 2, 1],
            "propensity": [0.5, 0.0, 0.5, 1.5, 0.5],
            "reward": [1.0, 0.0, 1.0, 0.0, 1.0],
        }
    )
    with pytest.warns(DroppedRowsWarning):
        return read_logs(t, on_invalid="drop")


def test_table_rows_of_dropped_events_are_ignored_and_counted():
    from ope.exceptions import DroppedRowsWarning

    logs = _dropped_logs()
    table = _table(
        [(e, "p", a, pr) for e in (1, 2, 3, 4, 5) for a, pr in ((1, 0.25), (2, 0.75))]
        + [(2, "q", 1, 1.0), (4, "q", 1, 1.0)]
        + [(e, "q", 2, 1.0) for e in (1, 3, 5)]
    )
    with pytest.warns(
        DroppedRowsWarning,
        match=r"ignored 6 rows for 2 events that the logs "
        r"dropped as invalid \(2 rows dropped",
    ):
        tp = target_propensities(logs, table, with_distributions=True)
    assert tp.names == ["p", "q"]
    assert tp.table_rows_ignored == 6
    np.testing.assert_array_equal(tp.values, [[0.25, 0.0], [0.25, 0.0], [0.25, 0.0]])
    assert tp.distributions["q"].matrix.toarray().tolist() == [[0.0, 1.0]] * 3
    assert "table_rows_ignored=6" in repr(tp)


def test_table_rows_of_never_logged_events_still_fail_after_a_drop():
    logs = _dropped_logs()
    table = _table(
        [
            (1, "p", 1, 1.0),
            (2, "p", 1, 1.0),
            (3, "p", 1, 1.0),
            (5, "p", 1, 1.0),
            (99, "p", 1, 1.0),
            (2, "p", 7, 1.5),
        ]
    )  # a bad row of a dropped event: ignored
    with pytest.raises(
        PolicyError,
        match=r"1 event in the table is not in the logs \(1 row "
        r"\(first at row 4\) of the table; first event_id 99\)",
    ) as info:
        target_propensities(logs, table)
    assert "finite" not in str(info.value)


def test_evaluate_accepts_a_whole_log_policy_table_after_a_drop():
    import warnings

    from ope import evaluate

    logs = _dropped_logs()
    table = _table([(e, "always_1", 1, 1.0) for e in (1, 2, 3, 4, 5)])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ev = evaluate(logs, table, estimators=("ips",))
    assert any("ignored 2 rows for 2 events" in str(w.message) for w in caught)
    # rows 1, 3, 5 logged action 1 with propensity 0.5 and reward 1: IPS = 2
    assert ev.table()["value"].tolist() == [2.0]


def test_table_ids_written_as_floats_or_decimals_join_and_fractions_fail():
    import decimal

    logs = make_logs(base_cols(2, [1, 2], event_id=[1, 2]))
    floats = _table(GOOD).astype({"event_id": "float64", "action": "float64"})
    np.testing.assert_array_equal(target_propensities(logs, floats).values[:, 0], [0.5, 1.0])
    dec = pa.table(
        {
            "event_id": pa.array([decimal.Decimal(e) for e, *_ in GOOD]),
            "policy": ["p"] * 3,
            "action": [a for _, _, a, _ in GOOD],
            "probability": pa.array([decimal.Decimal(str(p)) for *_, p in GOOD]),
        }
    )
    np.testing.assert_array_equal(target_propensities(logs, dec).values[:, 0], [0.5, 1.0])
    frac = _table([(1.5, "p", 1, 1.0)])
    with pytest.raises(
        SchemaError,
        match=r"`event_id` is double and holds 1 values that are not "
        r"whole numbers \(first at row 0: 1\.5\)",
    ):
        target_propensities(logs, frac)


def test_table_join_names_an_id_conversion_that_finds_nothing():
    logs = make_logs(base_cols(2, [1, 2], event_id=["001", "002"]) | {"action": ["1", "2"]})
    with pytest.raises(
        PolicyError,
        match=r"2 events in the table are not in the logs .*the table's "
        r"event_id was int64 and was converted to the logs' string to "
        r"join, so check that the ids are written the same way in both",
    ):
        target_propensities(logs, _table([(1, "p", "1", 1.0), (2, "p", "1", 1.0)]))


def test_float16_target_columns_agree_with_their_distributions_within_storage_precision():
    from ope.io import read_logs
    from ope.policies import logging_distribution

    t = pa.table(
        {
            "action": ["x", "y", "z"],
            "propensity": pa.array(np.float16([0.3, 0.3, 0.4])),
            "reward": [1.0, 0.0, 1.0],
            "candidates": [["x", "y", "z"]] * 3,
            "logging_distribution": pa.array([[0.3, 0.3, 0.4]] * 3, pa.list_(pa.float16())),
            "target__new": pa.array(np.float16([0.1, 0.2, 0.3])),
            "target_dist__new": pa.array(
                [[0.1, 0.2, 0.7], [0.6, 0.2, 0.2], [0.4, 0.3, 0.3]], pa.list_(pa.float32())
            ),
        }
    )
    logs = read_logs(t)
    tp = target_propensities(logs, None, with_distributions=True)
    np.testing.assert_allclose(tp.values[:, 0], [0.1, 0.2, 0.3], atol=2e-4)
    assert logging_distribution(logs).nnz == 9


def test_target_columns_may_be_named_with_their_prefix():
    logs = make_logs(base_cols(2, [1, 2], event_id=[1, 2]) | {"target__new": [0.25, 1.0]})
    tp = target_propensities(logs, ["target__new"])
    assert tp.names == ["new"] and tp.values[:, 0].tolist() == [0.25, 1.0]
    with pytest.raises(
        DataFileError,
        match=r"policy table 'target__new' does not exist; to use the "
        r"column target__new pass policies=\['new'\]",
    ):
        target_propensities(logs, "target__new")


def test_csv_policy_table_keeps_ids_as_written(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text(
        "event_id,policy,action,probability\n001,new,07,1\n002,new,07,0.5\n002,new,08,0.5\n"
    )
    zero_padded = make_logs(base_cols(2, ["07", "08"], event_id=["001", "002"]))
    assert target_propensities(zero_padded, path).values[:, 0].tolist() == [1.0, 0.5]
    numeric = make_logs(base_cols(2, [7, 8], event_id=[1, 2]))
    assert target_propensities(numeric, path).values[:, 0].tolist() == [1.0, 0.5]
    floats = tmp_path / "f.csv"  # ids written from a float column
    floats.write_text("event_id,policy,action,probability\n1.0,new,7.0,1\n2.0,new,8.0,1\n")
    assert target_propensities(numeric, floats).values[:, 0].tolist() == [1.0, 1.0]


# ---------------------------------------------------------------------------------------------
# target__ columns: the blocked copy into one (n, P) matrix, and the validated-logs fast path
# ---------------------------------------------------------------------------------------------


def _chunked(
    values: np.ndarray, sizes: list[int], type_: pa.DataType | None = None
) -> pa.ChunkedArray:
    """``values`` split into chunks of the given sizes (empty chunks included)."""
    cuts = np.cumsum([0, *sizes])
    assert cuts[-1] == values.size
    return pa.chunked_array(
        [pa.array(values[a:b], type=type_) for a, b in zip(cuts[:-1], cuts[1:])],
        type=type_ or pa.from_numpy_dtype(values.dtype),
    )


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 60),
    p=st.integers(1, 4),
    block_bytes=st.sampled_from([8, 24, 64, 10_000]),
    data=st.data(),
)
def test_target_matrix_equals_stacked_columns_for_any_chunking_and_block(n, p, block_bytes, data):
    rng = np.random.default_rng(n * 7 + p)
    expected = rng.random((n, p))
    cols = {}
    for j in range(p):
        # random chunk sizes per column (columns need not share a chunk layout), with empty chunks
        cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=4)))
        sizes = list(np.diff([0, *cuts, n]))
        cols[f"target__c{j}"] = _chunked(expected[:, j], sizes)
    logs = make_logs(pa.table({**base_cols(n, [1] * n), **cols}))
    old = policies_join._TARGET_BLOCK_BYTES
    policies_join._TARGET_BLOCK_BYTES = block_bytes  # blocks of 1 to 1,250 rows
    try:
        tp = target_propensities(logs)
    finally:
        policies_join._TARGET_BLOCK_BYTES = old
    assert tp.values.flags.c_contiguous and tp.values.dtype == np.float64
    np.testing.assert_array_equal(tp.values, expected)


def test_target_columns_of_other_numeric_types_are_cast_exactly():
    vals = [0.5, 0.25, 1.0, 0.0]
    logs = make_logs(
        base_cols(4, [1, 2, 3, 4])
        | {
            "target__f32": pa.array(vals, pa.float32()),
            "target__f16": pa.array(np.float16(vals)),
            "target__int": pa.array([1, 0, 1, 0], pa.int8()),
            "target__bool": pa.array([True, False, True, True]),
            "target__dec": pa.array([Decimal(str(v)) for v in vals], pa.decimal128(4, 2)),
            "target__dict": pa.array(vals).dictionary_encode(),
        }
    )
    tp = target_propensities(logs)
    assert tp.names == ["f32", "f16", "int", "bool", "dec", "dict"]
    np.testing.assert_array_equal(
        tp.values, np.column_stack([vals, vals, [1, 0, 1, 0], [1, 0, 1, 1], vals, vals])
    )


@pytest.mark.parametrize(
    "column, match",
    [
        # a violation far past the first block, in the second column: the message names that
        # column and the right row numbers (the blocked check falls back to the full mask)
        (
            "late",
            r"policy 'late': target propensities must be finite and in \[0, 1\]; they are not "
            r"in 2 rows \(first at rows 4998, 4999\) \(values -0.5, 2.0\)",
        ),
        (
            "null",
            r"policy 'null': target propensities must be finite and in \[0, 1\]; they are not "
            r"in 1 row \(first at row 3\) \(values nan\)",
        ),
        ("intnull", r"policy 'intnull': .* not in 1 row \(first at row 1\) \(values nan\)"),
        (
            "allnull",
            r"policy 'allnull': .* not in 5,000 rows \(first at rows 0, 1, 2, 3, 4, \.\.\.\)",
        ),
        ("big", r"policy 'big': .* not in 1 row \(first at row 0\) \(values 2.0\)"),
    ],
)
def test_target_range_errors_name_column_and_rows(column, match):
    n = 5000
    ok = np.full(n, 0.5)
    late = ok.copy()
    late[-2:] = [-0.5, 2.0]
    null = pa.array([0.5, 0.5, 0.5, None] + [0.5] * (n - 4))
    extra = {
        "late": {"target__ok": ok, "target__late": _chunked(late, [1000, 0, 4000])},
        "null": {"target__null": null},
        "intnull": {"target__intnull": pa.array([1, None] + [0] * (n - 2), pa.int64())},
        "allnull": {"target__allnull": pa.nulls(n)},
        "big": {"target__big": pa.array([2] + [1] * (n - 1), pa.int32())},
    }[column]
    logs = make_logs(base_cols(n, [1] * n) | extra)
    with pytest.raises(PolicyError, match=match):
        target_propensities(logs)


def test_target_column_of_non_numbers_is_a_policy_error():
    logs = make_logs(base_cols(2, [1, 2]) | {"target__s": ["0.5", "1"]})
    with pytest.raises(
        PolicyError,
        match=r"policy 's': column target__s must hold probabilities as "
        r"numbers \(float64\), got string\. Convert it to floats",
    ):
        target_propensities(logs)


def test_readers_mark_their_logs_validated_and_the_mark_cannot_be_set_by_accident(tmp_path):
    from ope.io import read_logs, scan_logs

    n = 50
    t = pa.table(
        base_cols(n, list(range(n)), event_id=list(range(n))) | {"target__new": np.full(n, 0.2)}
    )
    eager = read_logs(t)
    assert eager.targets_validated()
    pq.write_table(t, tmp_path / "logs.parquet")
    batches = list(scan_logs(tmp_path / "logs.parquet", batch_size=20))
    assert len(batches) == 3 and all(b.targets_validated() for b in batches)
    # the public constructor never marks, even when given a reader's table and report
    assert not BanditLogs(eager.table, eager.report).targets_validated()
    assert not make_logs(t).targets_validated()
    # replacing the table after reading lapses the mark
    eager.table = eager.table.slice(1)
    assert not eager.targets_validated()
    np.testing.assert_array_equal(target_propensities(eager).values[:, 0], np.full(n - 1, 0.2))


def test_validated_logs_skip_the_range_check_and_unvalidated_logs_keep_it():
    # a table that did not pass the reader's rules, deliberately marked: the check is skipped
    # (this is what makes the validated path cheaper); the same table unmarked is rejected
    t = pa.table(base_cols(3, [1, 2, 3]) | {"target__x": [0.5, 1.5, np.nan]})
    marked = BanditLogs.from_validated(t, ValidationReport("<test>", 3, 3))
    assert marked.targets_validated()
    np.testing.assert_array_equal(target_propensities(marked).values[:, 0], [0.5, 1.5, np.nan])
    with pytest.raises(PolicyError, match=r"not in 2 rows \(first at rows 1, 2\)"):
        target_propensities(make_logs(t))
    # a reader rejects those rows, so a validated table cannot hold them
    from ope.exceptions import ValidationError
    from ope.io import read_logs

    with pytest.raises(ValidationError, match="target_probability_out_of_range"):
        read_logs(t)


def test_target_matrix_allocates_only_the_matrix_for_float32_chunked_columns():
    n, p = 200_000, 4
    rng = np.random.default_rng(3)
    cols = {
        f"target__c{j}": _chunked(rng.random(n).astype(np.float32), [70_000, 60_000, 70_000])
        for j in range(p)
    }
    logs = make_logs(pa.table({**base_cols(n, [1] * n), **cols}))
    target_propensities(logs)  # warm up (imports, caches)
    tracemalloc.start()
    try:
        tp = target_propensities(logs)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    matrix = n * p * 8
    # the old path made a float64 copy of each column and four boolean masks besides the matrix
    assert peak < matrix + 2**20, peak
    expected = np.column_stack([logs.table.column(f"target__c{j}").to_numpy() for j in range(p)])
    np.testing.assert_array_equal(tp.values, expected.astype(np.float64))
