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


def _cross_fitted(w, r, codes):
    """Precision-weighted IPS by hand: strata split in alternate rows, each half weighted by
    the other half's precisions n_j / var_j, the two halves averaged."""
    k = codes.max() + 1
    rank = np.zeros(codes.size, dtype=int)
    for j in range(k):  # strata (a test)
        idx = np.flatnonzero(codes == j)
        rank[idx] = np.arange(idx.size)
    value = 0.0
    for h in (0, 1):
        own, other = rank % 2 == h, rank % 2 != h
        prec = np.array(
            [other[codes == j].sum() / (w * r)[other & (codes == j)].var(ddof=1) for j in range(k)]
        )
        c = prec / prec.sum()
        value += 0.5 * sum(c[j] * (w * r)[own & (codes == j)].mean() for j in range(k))
    return value


def test_precision_weighting_by_hand():
    g = np.random.default_rng(3)
    n = 40
    codes = np.repeat([0, 1], [16, 24])
    p = np.where(codes == 0, 0.5, g.uniform(0.05, 0.95, n))
    target = g.uniform(0, 1, n)
    r = g.binomial(1, 0.4, n).astype(float)
    t = pa.table(
        {
            "action": g.integers(0, 2, n),
            "reward": r,
            "propensity": p,
            "logging_policy": np.where(codes == 0, "A", "B"),
            "target__new": target,
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ev = evaluate_loggers(t, weighting="precision", estimators=["ips", "snips"])
    est = ev["new", "ips"]
    w = target / p
    assert est.value == pytest.approx(_cross_fitted(w, r, codes), rel=1e-12)
    # the stratified standard error with the halves' mean weights, and rows that give it
    var = np.array([(w * r)[codes == j].var(ddof=1) for j in (0, 1)])
    assert "precision weights of the loggers' strata: A " in est.notes[-1]
    src_terms = est._source.components()[:, 0]
    assert src_terms.mean() == pytest.approx(est.value, rel=1e-12)
    assert src_terms.std(ddof=1) / np.sqrt(n) == pytest.approx(est.std_error, rel=1e-9)
    assert est.std_error < np.sqrt(var.max() / 16)  # below the worse stratum's alone
    # paired comparisons and the report run on it; the bootstrap is refused
    assert set(ev.comparisons()["estimator"]) == {"ips", "snips"}
    with pytest.raises(ParameterError, match="precision weighting gives normal and t"):
        evaluate_loggers(t, weighting="precision", ci="bootstrap")
    from ope.report import render_report

    assert "precision-weighted" in render_report(evaluation=ev)


def test_precision_weighting_is_unbiased_where_both_loggers_cover():
    env = ContextualBandit(n_actions=5, n_features=3, n_contexts=50, seed=0)
    worst = np.argmin(env.reward_means, axis=1)
    tables = {"A": env.policy_table("logging"), "B": 0.4 / 5 + 0.6 * np.eye(5)[worst]}
    truth = env.true_value("optimal")
    g = np.random.default_rng(0)
    found = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(150):  # replications (about 1 s)
            est = evaluate_loggers(
                _draw(env, tables, g).drop_columns(["propensity__A", "propensity__B"]),
                weighting="precision",
                estimators=["ips"],
            )["optimal", "ips"]
            found.append((est.value, est.std_error))
    v = np.array(found)
    assert abs(v[:, 0].mean() - truth) < 4 * v[:, 0].std(ddof=1) / np.sqrt(len(v))
    assert 0.8 < v[:, 1].mean() / v[:, 0].std(ddof=1) < 1.25  # measured 1.03


def test_command_line_pools_loggers(tmp_path):
    import subprocess
    import sys

    import pyarrow.parquet as pq

    env, tables = _two_loggers()
    table = _draw(env, tables, np.random.default_rng(0))
    keep = ["event_id", "action", "propensity", "reward", "logging_policy", "target__optimal"]
    path = tmp_path / "loggers.parquet"
    pq.write_table(table.select([*keep, "propensity__A", "propensity__B"]), path)

    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "ope", "evaluate", str(path), "--json", *args],
            capture_output=True,
            text=True,
            timeout=300,
        )

    for weighting in ("per_logger", "balanced", "precision"):
        out = run("--loggers", weighting, "--estimator", "ips")
        assert out.returncode == 0, out.stderr
        doc = json.loads(out.stdout)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = evaluate_loggers(table, weighting=weighting, estimators=["ips"])
        assert doc["estimates"][0]["value"] == pytest.approx(
            want["optimal", "ips"].value, rel=1e-12
        )
    out = run("--loggers", "precision", "--by", "action")
    assert out.returncode == 2 and json.loads(out.stdout)["error"]["flag"] == "--loggers"
    pq.write_table(table.select(keep[:4] + ["target__optimal"]), path)
    out = run("--loggers", "precision")
    assert out.returncode == 65 and "logging_policy" in json.loads(out.stdout)["error"]["message"]


def test_precision_weighting_edges():
    g = np.random.default_rng(5)
    n = 31  # one logger, an odd count: the halves' sizes weight them, so precision = plain
    t = pa.table(
        {
            "action": g.integers(0, 2, n),
            "reward": g.random(n),
            "propensity": g.uniform(0.2, 0.8, n),
            "logging_policy": ["A"] * n,
            "target__new": g.uniform(0, 1, n),
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = evaluate_loggers(t, weighting="per_logger", estimators=["ips"])["new", "ips"]
        precise = evaluate_loggers(t, weighting="precision", estimators=["ips"])["new", "ips"]
        assert precise.value == pytest.approx(plain.value, rel=1e-12)
        # a logger of 2 rows beside it gets no weight, and says so
        small = pa.concat_tables(
            [t, t.slice(0, 2).set_column(3, "logging_policy", pa.array(["B", "B"]))]
        )
        est = evaluate_loggers(small, weighting="precision", estimators=["ips"])["new", "ips"]
        assert "B 0.000" in est.notes[-1] and "fewer than 4 rows, B" in est.notes[-1]
        from ope.exceptions import EstimationError

        with pytest.raises(EstimationError, match="both halves"):
            evaluate_loggers(t.slice(0, 3), weighting="precision", estimators=["ips"])
