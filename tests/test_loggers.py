"""Several logging policies (ope.loggers): checks, the balanced propensity, pooled estimation."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from ope.estimators import IPS
from ope.exceptions import ParameterError, SchemaError, ValidationError
from ope.loggers import (
    LoggerCheck,
    balanced_propensities,
    check_loggers,
    evaluate_loggers,
    logger_propensities,
)
from ope.simulate import ContextualBandit


def _small(**changes) -> pa.Table:
    cols = {
        "event_id": [0, 1, 2, 3],
        "action": [0, 1, 0, 1],
        "reward": [1.0, 0.0, 1.0, 1.0],
        "propensity": [0.5, 0.5, 0.9, 0.1],
        "logging_policy": ["A", "A", "B", "B"],
        "propensity__A": [0.5, 0.5, 0.5, 0.5],
        "propensity__B": [0.9, 0.1, 0.9, 0.1],
        "target__new": [0.2, 0.8, 0.2, 0.8],
    }
    cols.update(changes)
    return pa.table({k: v for k, v in cols.items() if v is not None})


def test_balanced_propensity_by_hand():
    # shares 2/4 each: pbar = 0.5 * pA + 0.5 * pB
    logs = balanced_propensities(_small())
    np.testing.assert_allclose(logs.column("propensity"), [0.7, 0.3, 0.7, 0.3], rtol=0, atol=1e-15)
    assert not any(c.startswith("propensity__") for c in logs.columns)
    assert logs.table.schema.metadata[b"ope.weighting"] == b"balanced"


def test_unequal_shares_by_hand():
    t = _small(logging_policy=["A", "A", "A", "B"], propensity=[0.5, 0.5, 0.5, 0.1])
    np.testing.assert_allclose(
        balanced_propensities(t).column("propensity"),
        [
            0.75 * 0.5 + 0.25 * 0.9,
            0.75 * 0.5 + 0.25 * 0.1,
            0.75 * 0.5 + 0.25 * 0.9,
            0.75 * 0.5 + 0.25 * 0.1,
        ],
        rtol=0,
        atol=1e-15,
    )


def test_evaluate_loggers_by_hand():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bal = evaluate_loggers(_small(), weighting="balanced", estimators=["ips"])
        per = evaluate_loggers(_small(), weighting="per_logger", estimators=["ips"])
    r, t = np.array([1.0, 0.0, 1.0, 1.0]), np.array([0.2, 0.8, 0.2, 0.8])
    assert bal["new", "ips"].value == pytest.approx(
        np.mean(r * t / [0.7, 0.3, 0.7, 0.3]), abs=1e-15
    )
    assert per["new", "ips"].value == pytest.approx(
        np.mean(r * t / [0.5, 0.5, 0.9, 0.1]), abs=1e-15
    )
    assert "balanced, Agarwal" in bal.notes[-1] and "own logger" in per.notes[-1]


def test_weighting_is_chosen_explicitly():
    with pytest.raises(TypeError):
        evaluate_loggers(_small())  # type: ignore[call-arg]
    with pytest.raises(ParameterError, match="weighting"):
        evaluate_loggers(_small(), weighting="mixture")


def test_long_table_equals_wide_columns():
    long = pd.DataFrame(
        {
            "event_id": [0, 1, 2, 3] * 2,
            "logging_policy": ["A"] * 4 + ["B"] * 4,
            "propensity": [0.5] * 4 + [0.9, 0.1, 0.9, 0.1],
        }
    )
    wide = balanced_propensities(_small()).column("propensity")
    narrow = balanced_propensities(
        _small(**{"propensity__A": None, "propensity__B": None}), long_table=long
    )
    np.testing.assert_array_equal(narrow.column("propensity"), wide)
    with pytest.raises(ValidationError, match="lacks some logger"):
        logger_propensities(_small(), long_table=long.iloc[:-1])
    with pytest.raises(ValidationError, match="repeats 1"):
        logger_propensities(_small(), long_table=pd.concat([long, long.iloc[:1]]))


@pytest.mark.parametrize(
    ("changes", "error", "match"),
    [
        ({"propensity__B": None}, SchemaError, r"propensity__B'\] are missing"),
        ({"logging_policy": None}, SchemaError, "no `logging_policy` column"),
        ({"logging_policy": ["A", None, "B", "B"]}, ValidationError, "missing on 1 rows"),
        (
            {"propensity__A": [0.5, 0.5, 1.5, 0.5]},
            ValidationError,
            r"propensity__A must be .* \(first at row 2",
        ),
        (
            {"propensity__B": [0.9, 0.1, 0.8, 0.1]},
            ValidationError,
            "differs from their `propensity` \\(first at row 2",
        ),
        ({"target__new__A": [0.5] * 4}, SchemaError, "factored candidates"),
    ],
)
def test_invalid_logger_propensities(changes, error, match):
    with pytest.raises(error, match=match):
        logger_propensities(_small(**changes))


def test_check_loggers_by_hand():
    res = check_loggers(_small(**{"propensity__B": None}))
    assert isinstance(res, LoggerCheck)
    got = res.table.set_index("logging_policy")
    assert got.loc["A", "rows"] == 2 and got.loc["B", "share"] == 0.5
    assert got.loc["B", "propensity_min"] == 0.1 and got.loc["B", "propensity_max"] == 0.9
    # A's weights 0.4, 1.6: ESS = 2^2 / (0.16 + 2.56) ... relative to its 2 rows
    assert got.loc["A", "ess_share__new"] == pytest.approx((0.4 + 1.6) ** 2 / (0.16 + 2.56) / 2)
    assert not res.has_all_propensities and "per_logger" in res.notes[0]
    assert json.loads(json.dumps(res.to_dict()))["loggers"][0]["logging_policy"] == "A"
    assert "Logging policies: 2" in res.summary()


# ---------------------------------------------------------------- simulation (Agarwal et al.)
def _two_loggers():
    env = ContextualBandit(n_actions=5, n_features=3, n_contexts=50, seed=0)
    worst = np.argmin(env.reward_means, axis=1)
    tables = {
        "A": env.policy_table("logging"),  # good overlap with the candidate
        "B": 0.02 / 5 + 0.98 * np.eye(5)[worst],  # mostly the worst action: poor overlap
    }
    return env, tables


def _draw(env, tables, g, n_each=1000):
    parts = []
    for name, table in tables.items():
        t = env.sample(n_each, rng=g, logging_policy=table, oracle=True)
        ctx, a = t.column("context_id").to_numpy(), t.column("action").to_numpy()
        t = t.append_column("logging_policy", pa.array([name] * n_each))
        for other, tab in tables.items():
            t = t.append_column(f"propensity__{other}", pa.array(tab[ctx, a]))
        parts.append(t)
    t = pa.concat_tables(parts)
    return t.set_column(0, "event_id", pa.array(np.arange(t.num_rows)))


def test_balanced_ips_is_unbiased_and_beats_per_logger_pooling():
    env, tables = _two_loggers()
    truth = env.true_value("optimal")
    g = np.random.default_rng(0)
    per, bal = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(400):  # replications (about 1 s)
            t = _draw(env, tables, g)
            r, tp = t.column("reward").to_numpy(), t.column("target__optimal").to_numpy()
            per.append(IPS().estimate(r, t.column("propensity").to_numpy(), tp).value)
            bal.append(IPS().estimate(r, balanced_propensities(t).column("propensity"), tp).value)
    per, bal = np.array(per), np.array(bal)
    for v in (per, bal):
        assert abs(v.mean() - truth) < 4 * v.std(ddof=1) / np.sqrt(v.size)
    assert bal.std() < per.std() / 3  # measured 0.041 vs 0.218


def test_check_loggers_shows_the_poor_overlap():
    env, tables = _two_loggers()
    res = check_loggers(_draw(env, tables, np.random.default_rng(1)))
    ess = res.table.set_index("logging_policy")["ess_share__optimal"]
    assert ess["B"] < 0.05 < ess["A"]
    assert res.has_all_propensities
