"""Off-policy outcome distributions (ope.outcome_distribution): the CDF estimators on
hand-computed vectors, the bands' formulas, quantiles and CVaR read from step functions, the
multiplier band against a row-level multiplier bootstrap, the exact truth of a simulator, the
refusals, and the command line."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import ope
from ope.distribution import (
    dkw_band_width,
    hoeffding_band_width,
    outcome_distribution,
    parse_metric,
)
from ope.exceptions import ParameterError, SchemaError, ValidationError
from ope.simulate import ContextualBandit


def _frame() -> pd.DataFrame:
    # 6 rows, logger 1/2 on two actions; candidate "one" always plays action 1
    return pd.DataFrame(
        {
            "action": [0, 1, 1, 0, 1, 0],
            "propensity": [0.5] * 6,
            "reward": [3.0, 1.0, 2.0, 1.0, 5.0, 4.0],
            "target__one": [0.0, 1.0, 1.0, 0.0, 1.0, 0.0],
        }
    )


# six rows: every multiplier band rests on fewer than 30 effective rows and says so
# (test_a_band_on_few_effective_rows_says_not_to_trust_it pins that warning)
@pytest.mark.filterwarnings("ignore::ope.exceptions.SmallSampleWarning")
def test_cdf_estimators_on_a_hand_computed_vector():
    d = outcome_distribution(_frame(), n_resamples=100)
    np.testing.assert_array_equal(d["one"].edges, [1.0, 2.0, 3.0, 4.0, 5.0])
    # IPS: (1/6) sum w 1{y <= t}, w = 2 on the action-1 rows (y = 1, 2, 5)
    np.testing.assert_allclose(d["one"].cdf, [2 / 6, 4 / 6, 4 / 6, 4 / 6, 1.0], rtol=1e-15)
    np.testing.assert_allclose(d["logging"].cdf, [2 / 6, 3 / 6, 4 / 6, 5 / 6, 1.0], rtol=1e-15)
    sn = outcome_distribution(_frame(), estimator="snips", n_resamples=100)
    np.testing.assert_allclose(sn["one"].cdf, [1 / 3, 2 / 3, 2 / 3, 2 / 3, 1.0], rtol=1e-15)
    value, low, high = d["one"].cdf_at([0.5, 2.5, 9.0])
    np.testing.assert_allclose(value, [0.0, 4 / 6, 1.0])
    assert (low <= value).all() and (value <= high).all()
    # the quantile of the estimate: inf{t : F(t) >= u}
    np.testing.assert_array_equal(d["one"].quantile([0.3, 0.5, 0.9])[0], [1.0, 2.0, 5.0])
    v, lo, hi = d["one"].exceedance(2.5)
    assert v == pytest.approx(2 / 6) and lo <= v <= hi


def test_band_formulas():
    n, w, level = 5000, 4.0, 0.9
    ks = np.arange(1, 10_000)
    brute = w * np.sqrt(np.log(2 * (2 * ks - 1) / (1 - level)) / (2 * n)) + 1 / ks
    assert hoeffding_band_width(n, w, level) == pytest.approx(brute.min(), rel=1e-12)
    assert dkw_band_width(n, level) == pytest.approx(math.sqrt(math.log(20) / (2 * n)))
    d = outcome_distribution(_frame(), weight_bound=2.0)
    assert d.band == "hoeffding" and d["one"].band == "hoeffding"
    assert d["one"].half_width == pytest.approx(hoeffding_band_width(6, 2.0, 0.95))
    assert d["logging"].band == "dkw"
    assert d["logging"].half_width == pytest.approx(dkw_band_width(6, 0.95))
    np.testing.assert_allclose(d["one"].upper, np.minimum(1.0, d["one"].cdf + d["one"].half_width))


# four rows: the multiplier band rests on fewer than 30 effective rows and says so
@pytest.mark.filterwarnings("ignore::ope.exceptions.SmallSampleWarning")
def test_cvar_and_quantile_bounds_from_the_band():
    frame = pd.DataFrame(
        {
            "action": [0] * 4,
            "propensity": [1.0] * 4,
            "reward": [1.0, 2.0, 3.0, 4.0],
            "target__same": [1.0] * 4,
        }
    )
    d = outcome_distribution(frame, outcome_range=(0.0, 10.0), n_resamples=100)
    dist = d["same"]
    # the mean of the lowest half of 1, 2, 3, 4 and of the highest quarter
    assert dist.cvar(0.5)[0] == pytest.approx(1.5)
    assert dist.cvar(0.25, tail="upper")[0] == pytest.approx(4.0)
    for level in (0.1, 0.5, 1.0):
        v, lo, hi = dist.cvar(level)
        assert 0.0 <= lo <= v <= hi <= 10.0
    v, lo, hi = dist.quantile([0.5])
    assert lo[0] <= v[0] <= hi[0]
    # without a range the open tail is infinite, not invented
    open_tail = outcome_distribution(frame, n_resamples=100)["same"].cvar(0.1)
    assert open_tail[1] == -math.inf and math.isfinite(open_tail[0])
    table = d.metrics(["quantile:0.5", "cvar:0.5", "upper_cvar:0.25", "cdf:2.5", "exceed:2.5"])
    assert list(table["metric"].unique()) == ["quantile", "cvar", "upper_cvar", "cdf", "exceed"]
    row = table[(table.policy == "same") & (table.metric == "cvar")].iloc[0]
    assert row.value == pytest.approx(1.5) and row.level == 0.5
    assert d.metrics("cdf").shape[0] == 2 * len(np.unique(dist.quantile(np.arange(1, 10) / 10)[0]))


def test_many_distinct_values_are_bucketed_and_the_band_widened():
    g = np.random.default_rng(0)
    n = 3000
    a = g.integers(0, 2, n)
    frame = pd.DataFrame(
        {"action": a, "propensity": 0.5, "reward": g.normal(a, 1.0), "target__one": a * 1.0}
    )
    fine = outcome_distribution(frame, resolution=5000, n_resamples=200)
    coarse = outcome_distribution(frame, resolution=50, n_resamples=200)
    assert fine["one"].exact and not coarse["one"].exact
    assert coarse["one"].edges.size <= 50
    # at the bucket ends the estimate is the exact one
    exact_at_ends = fine["one"].cdf_at(coarse["one"].edges)[0]
    np.testing.assert_allclose(coarse["one"].cdf, exact_at_ends, rtol=1e-12)
    # between two ends the upper bound is the next end's
    mid = 0.5 * (coarse["one"].edges[3] + coarse["one"].edges[4])
    assert coarse["one"].cdf_at(mid)[2] == pytest.approx(coarse["one"].upper[4])
    assert any("bucket ends" in note for note in coarse.notes)


def test_multiplier_width_matches_a_row_level_multiplier_bootstrap():
    g = np.random.default_rng(1)
    n = 400
    a = g.integers(0, 2, n)
    y = np.round(g.normal(a, 1.0), 1)  # about 60 distinct values
    frame = pd.DataFrame({"action": a, "propensity": 0.5, "reward": y, "target__one": a * 1.0})
    for est in ("ips", "snips"):
        d = outcome_distribution(frame, estimator=est, n_resamples=20_000, rng=3)
        w = 2.0 * a
        ts = np.unique(y)
        ind = (y[:, None] <= ts[None, :]).astype(float)
        cdf = (w[:, None] * ind).mean(axis=0)
        if est == "snips":
            cdf = cdf / w.mean()
            phi = w[:, None] * (ind - cdf[None, :]) / w.mean()
        else:
            phi = w[:, None] * ind - cdf[None, :]
        xi = np.random.default_rng(4).standard_normal((20_000, n))
        sups = np.abs(xi @ phi).max(axis=1) / n
        want = np.quantile(sups, 0.95)
        assert d["one"].half_width == pytest.approx(want, rel=0.04), est


def test_the_band_holds_the_exact_cdf_of_a_simulator():
    env = ContextualBandit(n_actions=4, n_contexts=20, reward="gaussian", reward_noise=0.5, seed=0)
    logs = ope.read_logs(env.sample(20_000, rng=0))
    grid = np.linspace(-1.0, 2.0, 200)
    for est in ("ips", "snips"):
        d = outcome_distribution(logs, estimator=est, rng=0)
        for p in env.candidate_policies:
            _, low, high = d[p].cdf_at(grid)
            truth = env.outcome_cdf(p, grid)
            assert np.all((low <= truth) & (truth <= high)), (est, p)
    # the simulator's truth against its own draws
    draws = env.sample(200_000, rng=1).column("reward").to_numpy()
    assert env.outcome_cdf("logging", 0.5) == pytest.approx((draws <= 0.5).mean(), abs=0.005)
    bern = ContextualBandit(n_actions=3, n_contexts=5, seed=0)
    np.testing.assert_allclose(
        bern.outcome_cdf("uniform", [-0.5, 0.0, 0.5, 1.0]),
        [0.0, 1 - bern.true_value("uniform"), 1 - bern.true_value("uniform"), 1.0],
    )


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(band="hoeffding"), ParameterError, "needs weight_bound"),
        (dict(band="hoeffding", weight_bound=2.0, estimator="snips"), ParameterError, "IPS"),
        (dict(outcome="latency"), SchemaError, "no outcome column"),
        (dict(outcome_range=(2.0, 3.0)), ValidationError, "outside outcome_range"),
        (dict(weight_bound=1.5), ValidationError, "exceeded"),
        (dict(estimator="median"), ParameterError, "estimator"),
        (dict(estimator="dr", band="hoeffding", weight_bound=2.0), ParameterError, "IPS"),
        (dict(resolution=1), ParameterError, "resolution"),
    ],
)
def test_refusals(kwargs, error, match):
    with pytest.raises(error, match=match):
        outcome_distribution(_frame(), **kwargs)


# six rows: every multiplier band rests on fewer than 30 effective rows and says so
# (test_a_band_on_few_effective_rows_says_not_to_trust_it pins that warning)
@pytest.mark.filterwarnings("ignore::ope.exceptions.SmallSampleWarning")
def test_refusals_of_rows():
    frame = _frame().assign(weight=[1.0, 2.0, 1.0, 1.0, 1.0, 1.0])
    with pytest.raises(ParameterError, match="sampling weights"):
        outcome_distribution(frame, band="hoeffding", weight_bound=2.0)
    weighted = outcome_distribution(frame, n_resamples=100)
    assert any("sampling weights" in n for n in weighted.notes)
    # Horvitz-Thompson: the weighted mass over the weighted row count
    s = frame["weight"].to_numpy()
    w = 2.0 * frame["action"].to_numpy()
    y = frame["reward"].to_numpy()
    want = np.sum(s * w * (y <= 2.0)) / s.sum()
    assert weighted["one"].cdf_at(2.0)[0] == pytest.approx(want)
    with pytest.raises(ValidationError, match="non-finite"):
        outcome_distribution(_frame().assign(cost=[1.0, np.nan, 1, 1, 1, 1]), outcome="cost")
    for bad in ("quantile", "quantile:1.5", "median:0.5", "cvar:x", "exceed:inf"):
        with pytest.raises(ParameterError, match="metrics"):
            parse_metric(bad)
    d = outcome_distribution(_frame(), n_resamples=100)
    with pytest.raises(ParameterError, match="level"):
        d["one"].quantile(0.0)
    with pytest.raises(ParameterError, match="metrics"):
        d.metrics([])
    with pytest.raises(ParameterError, match="no distribution"):
        d["nobody"]


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "ope", "evaluate", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_command_line(tmp_path):
    env = ContextualBandit(n_actions=3, n_contexts=10, reward="gaussian", seed=0)
    table = env.sample(2000, rng=0)
    path = tmp_path / "logs.parquet"
    pq.write_table(table, path)
    out = _cli(path, "--metric", "quantile:0.9", "cvar:0.1", "--outcome-range", "-3", "4", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)["distribution"]
    assert doc["metrics_asked"] == ["quantile:0.9", "cvar:0.1"]
    want = outcome_distribution(ope.read_logs(table), outcome_range=(-3.0, 4.0), rng=0)
    got = pd.DataFrame(doc["metrics"])
    expected = want.metrics(["quantile:0.9", "cvar:0.1"])
    np.testing.assert_allclose(got["value"], expected["value"], rtol=1e-12)
    np.testing.assert_allclose(got["ci_low"], expected["ci_low"], rtol=1e-12)
    text = _cli(path, "--metric", "exceed:1.0")
    assert text.returncode == 0 and "distribution of reward by ips" in text.stdout
    for extra, flag in (
        (["--outcome", "reward"], "--outcome"),
        (["--metric", "quantile:2"], "--metric"),
        (["--metric", "cdf", "--streaming", "on"], "--streaming"),
        (["--metric", "cdf", "--outcome", "nope"], None),
    ):
        bad = _cli(path, *extra, "--json")
        error = json.loads(bad.stdout)["error"]
        if flag is not None:
            assert bad.returncode == 2 and error["flag"] == flag, bad.stdout
        else:  # a column the logs lack is a data problem (exit 65)
            assert bad.returncode == 65 and "nope" in error["message"]


@pytest.mark.filterwarnings("ignore::ope.exceptions.SmallSampleWarning")
def test_report_section_and_figure():
    pytest.importorskip("matplotlib")
    from ope.report import render_report

    frame = _frame().rename(columns={"target__one": "target__<b>x"})
    ev = ope.evaluate(frame, estimators=("ips",))
    d = outcome_distribution(frame, n_resamples=100, outcome_range=(0.0, 6.0))
    page = render_report(evaluation=ev, distribution=d)
    section = page[page.index('id="distribution"') :]
    section = section[: section.index("</section>")]
    assert "multiplier-bootstrap" in section and "<svg" in section
    assert "&lt;b&gt;x" in section and "<b>x" not in section
    without = render_report(evaluation=ev)
    assert "No outcome distribution in this report" in without
    with pytest.raises(ParameterError, match="distribution"):
        render_report(evaluation=ev, distribution="cdf")


# six rows: every multiplier band rests on fewer than 30 effective rows and says so
# (test_a_band_on_few_effective_rows_says_not_to_trust_it pins that warning)
@pytest.mark.filterwarnings("ignore::ope.exceptions.SmallSampleWarning")
def test_ties_at_the_minimum_and_edge_cases_from_review():
    g = np.random.default_rng(0)
    y = np.r_[np.zeros(900), np.arange(1, 101)].astype(float)
    a = g.integers(0, 2, 1000)
    df = pd.DataFrame({"action": a, "propensity": 0.5, "reward": y, "target__one": (a == 1) * 1.0})
    for kw in ({}, {"weight_bound": 2.0}):
        d = outcome_distribution(df, resolution=10, n_resamples=200, **kw)
        log = d["logging"]
        assert log.cdf.shape == log.edges.shape == log.lower.shape
        assert log.cdf_at([0.0])[0][0] == pytest.approx(0.9)
        assert log.quantile([0.5])[0][0] == 0.0
    # an IPS CDF whose mass stays below the level: the point quantile is the largest outcome
    frame = _frame()
    d = outcome_distribution(frame.assign(target__one=frame["target__one"] * 0.9), n_resamples=100)
    assert d["one"].quantile([0.99])[0][0] == 5.0
    assert d["one"].cvar(0.1, tail="upper")[0] <= 5.0
    from ope.exceptions import EstimationError

    zero = _frame().assign(target__one=0.0)
    for est in ("ips", "snips"):
        with pytest.raises(EstimationError, match="probability 0"):
            outcome_distribution(zero, estimator=est, n_resamples=100)
    with pytest.raises(ValidationError, match="at least 2 rows"):
        outcome_distribution(_frame().iloc[:1], n_resamples=100)
    with pytest.raises(SchemaError, match="numeric"):
        outcome_distribution(_frame().assign(label="x"), outcome="label")
    # sampling weights: the default band is the multiplier one even with a weight bound
    weighted = outcome_distribution(_frame().assign(weight=2.0), weight_bound=2.0, n_resamples=100)
    assert weighted.band == "multiplier"
    with pytest.raises(ParameterError, match="n_resamples"):
        outcome_distribution(_frame(), n_resamples=10**7)


def test_return_distribution_of_trajectories():
    from ope.simulate import TabularMDP

    env = TabularMDP(n_states=3, n_actions=2, horizon=3, seed=0)
    traj = ope.read_trajectories(env.sample(6000, rng=0))
    for name in ("greedy", "softmax"):
        w, g = ope.sequential.episode_weights(traj, name, tail_value=0.0)
        ips = ope.sequential_estimate(traj, name, estimator="is", tail_value=0.0)
        assert float(np.mean(w * g)) == pytest.approx(ips.value, rel=1e-12)
    d = ope.return_distribution(traj, ["greedy", "softmax"], tail_value=0.0, rng=0)
    assert d.outcome == "return" and d.n == 6000
    # Monte Carlo truth: episodes drawn under the candidate itself
    for name in ("greedy", "softmax"):
        on = ope.read_trajectories(env.sample(200_000, rng=1, logging_policy=name))
        _, returns = ope.sequential.episode_weights(on, name, tail_value=0.0)
        ts = np.unique(returns)
        truth = (returns[:, None] <= ts[None, :]).mean(axis=0)
        _, low, high = d[name].cdf_at(ts)
        assert np.all((low <= truth + 0.005) & (truth - 0.005 <= high)), name


def test_command_line_on_trajectories(tmp_path):
    from ope.simulate import TabularMDP

    env = TabularMDP(n_states=3, n_actions=2, horizon=3, seed=0)
    path = tmp_path / "traj.parquet"
    pq.write_table(env.sample(1000, rng=0), path)
    out = _cli(path, "--metric", "quantile:0.5", "cdf:1", "--tail-value", "0", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)["distribution"]
    assert doc["outcome"] == "return" and doc["n"] == 1000
    bad = _cli(path, "--metric", "cdf", "--outcome", "reward", "--tail-value", "0", "--json")
    assert bad.returncode == 2 and json.loads(bad.stdout)["error"]["flag"] == "--outcome"


def _one_dominant_weight() -> pd.DataFrame:
    g = np.random.default_rng(0)
    n = 400
    a = g.integers(0, 2, n)
    return pd.DataFrame(
        {
            "action": a,
            "propensity": 0.5,
            "reward": g.exponential(100 + 100 * a),
            "target__one": (a == 1) * 1.0,
            "w": np.r_[1e9, np.ones(n - 1)],
        }
    )


def test_a_band_on_few_effective_rows_says_not_to_trust_it():
    """One sampling weight of 1e9 among 399 of 1: every band collapses onto that row (zero
    width); each policy's note gives the effective rows ope.evaluate counts (Kish's ESS of the
    products s * w) and says the band is not to be trusted."""
    frame = _one_dominant_weight()
    with pytest.warns(ope.SmallSampleWarning, match="not to be trusted") as caught:
        d = outcome_distribution(frame, weight_column="w", n_resamples=100)
    few = [note for note in d.notes if getattr(note, "rule", None) == "few_effective_rows"]
    assert [note.split(":")[0] for note in few] == ["logging", "one"]
    assert {str(w.message) for w in caught} >= set(few)
    with pytest.warns(ope.OPEWarning):  # its own few-rows note, and an overlap one
        ev = ope.evaluate(frame, weight_column="w", estimators=("ips",))
    ess = float(ev.table()["ess"].iloc[0])
    assert few[1].startswith(f"one: the estimate rests on {ess:.3g} effective row ")
    assert "zero width" in few[1] and "no finite-sample band takes sampling weights" in few[1]
    # the bad weight's message names the column once, without nested backticks
    nan_weight = frame.assign(w=np.r_[np.nan, np.ones(len(frame) - 1)])
    with pytest.raises(ValidationError, match=r"^`w` must be finite"):
        outcome_distribution(nan_weight, weight_column="w", n_resamples=100)


def test_the_few_rows_note_gives_the_bands_largest_standard_error():
    """Unweighted rows, a candidate whose weight sits on 10 of 400 rows: the note's standard
    error is the largest over the thresholds of the IPS CDF's row-level one, and it points to
    the finite-sample band; a candidate of many effective rows gets no such note."""
    g = np.random.default_rng(2)
    n = 400
    a = g.integers(0, 2, n)
    y = g.normal(a, 1.0)
    t = np.where(np.arange(n) < 10, 1.0, 1e-3) * (a == 1)
    frame = pd.DataFrame(
        {"action": a, "propensity": 0.5, "reward": y, "target__rare": t, "target__one": a * 1.0}
    )
    with pytest.warns(ope.SmallSampleWarning, match="band='hoeffding'"):
        d = outcome_distribution(frame, n_resamples=100)
    (note,) = [n for n in d.notes if getattr(n, "rule", None) == "few_effective_rows"]
    assert note.startswith("rare: ")
    w = t / 0.5
    ts = np.unique(y)
    ind = (y[:, None] <= ts[None, :]).astype(float)
    phi = w[:, None] * ind - (w[:, None] * ind).mean(axis=0)[None, :]
    se = float(np.sqrt((phi**2).sum(axis=0)).max() / n)
    assert f"standard error {se:.3g} " in note
