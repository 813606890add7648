"""DR's outcome distribution (ope.outcome_distribution(estimator="dr")): the estimator against
its row-level formula and DR of the mean, the identity with IPS under a zero model, the band
against a row-level multiplier bootstrap, the exact truth of a simulator, the refusals, and
the command line."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sklearn.dummy import DummyRegressor

import ope
from ope.distribution import (
    _dr_knots,
    _dr_model,
    _knot_weights,
    _weights_and_outcome,
    outcome_distribution,
)
from ope.exceptions import ParameterError, PolicyError, ValidationError
from ope.simulate import ContextualBandit, TabularMDP


def _gaussian_logs(n: int, seed: int = 0) -> ope.BanditLogs:
    env = ContextualBandit(n_actions=3, n_contexts=10, reward="gaussian", reward_noise=0.5, seed=0)
    return ope.read_logs(env.sample(n, rng=seed, distributions=True))


def test_knots_and_their_weights():
    y = np.array([3.0, 1.0, 2.0, 2.0])
    np.testing.assert_array_equal(_dr_knots(y, 16), [1.0, 2.0, 3.0])  # every distinct value
    many = np.linspace(0.0, 1.0, 1001)
    knots = _dr_knots(many, 4)
    assert knots[0] == 0.0 and knots[-1] == 1.0 and knots.size == 5
    assert np.isin(knots, many).all()  # logged values
    mix = _knot_weights(np.array([0.0, 0.125, 0.25, 1.0]), np.array([0.0, 0.25, 0.5, 1.0]))
    np.testing.assert_allclose(
        mix,
        [[1, 0, 0, 0], [0.5, 0.5, 0, 0], [0, 1, 0, 0], [0, 0, 0, 1]],
    )
    np.testing.assert_allclose(mix.sum(axis=1), 1.0)


def test_dr_matches_its_row_level_formula_and_the_band_a_row_level_bootstrap():
    logs = _gaussian_logs(3000)
    d = outcome_distribution(logs, estimator="dr", resolution=60, n_resamples=20_000, rng=0)
    assert d.estimator == "dr" and d["optimal"].estimator == "dr"
    y, w, names, _, _, lg, tp = _weights_and_outcome(logs, None, "reward", None, dr=True)
    model = _dr_model(lg, tp, y, 16, None, None, rng=0, outcome="reward")
    dist = d["optimal"]
    j = names.index("optimal")
    mix = _knot_weights(dist.edges, model.knots)
    phi = (  # per row and threshold: w 1{y <= t} + G(t | x, pi) - w G(t | x, a)
        w[:, j : j + 1] * (y[:, None] <= dist.edges[None, :])
        + np.column_stack((model.q_target[:, j, :] - w[:, j : j + 1] * model.q_logged, 1 - w[:, j]))
        @ mix.T
    )
    cdf = phi.mean(axis=0)
    np.testing.assert_allclose(dist.cdf, np.clip(np.sort(cdf), 0, 1), atol=1e-13)
    assert dist.cdf[-1] == pytest.approx(1.0)  # the model is 1 at the largest outcome
    gen = np.random.default_rng(1)
    sups = np.concatenate(
        [  # a loop over blocks of draws of the row-level multiplier process
            np.abs(gen.standard_normal((1000, y.size)) @ (phi - cdf)).max(axis=1) / y.size
            for _ in range(20)
        ]
    )
    assert dist.half_width == pytest.approx(np.quantile(sups, 0.95), rel=0.03)


def test_dr_of_a_binary_outcome_is_one_minus_dr_of_its_mean():
    # for a 0/1 reward the indicator 1{y <= 0} is 1 - y, and ridge is equivariant to it
    env = ContextualBandit(n_actions=3, n_contexts=5, seed=0)
    logs = ope.read_logs(env.sample(4000, rng=0, distributions=True))
    d = outcome_distribution(logs, estimator="dr", rng=0, n_resamples=100)
    ev = ope.evaluate(logs, estimators=["dr"], rng=0)
    for p in env.candidate_policies:
        np.testing.assert_array_equal(d[p].edges, [0.0, 1.0])
        value = ev[p, "dr"].value
        assert d[p].cdf[0] == pytest.approx(1.0 - value, abs=1e-6), p
        assert d[p].cdf[1] == 1.0


def test_a_zero_model_gives_ips():
    logs = _gaussian_logs(2000)
    zero = ope.RewardModel(estimator=DummyRegressor(strategy="constant", constant=0.0))
    dr = outcome_distribution(logs, estimator="dr", reward_model=zero, n_resamples=100)
    ips = outcome_distribution(logs, estimator="ips", n_resamples=100)
    y = np.asarray(logs.column("reward"))
    below = dr["optimal"].edges <= _dr_knots(y, 16)[-2]  # up to the last knot before the largest
    assert below.sum() > 1800
    for p in dr.policies:
        # there DR adds nothing; above, the model rises linearly to 1 at the largest outcome
        np.testing.assert_allclose(dr[p].cdf[below], ips[p].cdf[below], atol=1e-14)
        assert dr[p].cdf[-1] == pytest.approx(1.0)


def test_the_band_holds_the_exact_cdf_and_a_good_model_narrows_it():
    env = ContextualBandit(n_actions=4, n_contexts=20, reward="gaussian", reward_noise=0.5, seed=0)
    logs = ope.read_logs(env.sample(20_000, rng=0, distributions=True))
    grid = np.linspace(-1.0, 2.0, 200)
    dr = outcome_distribution(logs, estimator="dr", rng=0)
    ips = outcome_distribution(logs, estimator="ips", rng=0)
    for p in env.candidate_policies:
        value, low, high = dr[p].cdf_at(grid)
        truth = env.outcome_cdf(p, grid)
        assert np.all((low <= truth) & (truth <= high)), p
        assert np.all(np.diff(dr[p].cdf) >= 0) and 0.0 <= dr[p].cdf.min()
        assert dr[p].half_width < 0.8 * ips[p].half_width, p
    assert any("DR's model of the conditional CDF" in n for n in dr.notes)
    assert any("x0" in n for n in dr.notes if n.startswith("DR's model"))


def test_refusals():
    logs = _gaussian_logs(500)
    with pytest.raises(ParameterError, match="`reward_model`"):
        outcome_distribution(logs, reward_model=ope.RewardModel())
    with pytest.raises(ParameterError, match="`context_columns`, `model_thresholds`"):
        outcome_distribution(logs, estimator="snips", context_columns=["x0"], model_thresholds=4)
    with pytest.raises(ParameterError, match="model_thresholds"):
        outcome_distribution(logs, estimator="dr", model_thresholds=0)
    env = ContextualBandit(n_actions=3, n_contexts=10, seed=0)
    bare = ope.read_logs(env.sample(500, rng=0))
    with pytest.raises(PolicyError, match="DR's outcome distribution needs each candidate's"):
        outcome_distribution(bare, estimator="dr")
    mdp = TabularMDP(n_states=3, n_actions=2, horizon=3, seed=0)
    traj = ope.read_trajectories(mdp.sample(200, rng=0))
    with pytest.raises(ParameterError, match="`state` groups the episodes"):
        ope.return_distribution(traj, ["greedy"], tail_value=0.0, state="state")
    # one distinct outcome: the model is the constant 1, and so is the CDF
    table = env.sample(300, rng=0, distributions=True)
    same = ope.read_logs(
        table.set_column(table.column_names.index("reward"), "reward", pa.array(np.zeros(300)))
    )
    one = outcome_distribution(same, estimator="dr", n_resamples=100)
    for p in one.policies:
        np.testing.assert_array_equal(one[p].cdf, [1.0])


def test_command_line(tmp_path):
    env = ContextualBandit(n_actions=3, n_contexts=10, reward="gaussian", seed=0)
    table = env.sample(1500, rng=0, distributions=True)
    path = tmp_path / "logs.parquet"
    pq.write_table(table, path)
    args = ["--metric", "quantile:0.5", "exceed:1", "--distribution-estimator", "dr"]
    out = subprocess.run(
        [sys.executable, "-m", "ope", "evaluate", path, *args, "--context-columns", "x0", "x1"]
        + ["--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)["distribution"]
    assert doc["estimator"] == "dr"
    assert any("x0, x1" in n for n in doc["notes"])
    want = outcome_distribution(
        ope.read_logs(table), estimator="dr", context_columns=["x0", "x1"], rng=0
    ).metrics(["quantile:0.5", "exceed:1"])
    got = [m["value"] for m in doc["metrics"]]
    np.testing.assert_allclose(got, want["value"], rtol=1e-12)
    bare = tmp_path / "bare.parquet"
    pq.write_table(env.sample(300, rng=0), bare)
    out = subprocess.run(
        [sys.executable, "-m", "ope", "evaluate", bare, *args, "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    error = json.loads(out.stdout)["error"]
    assert out.returncode == 65 and error["type"] == "PolicyError"
    assert "--estimator" not in error["message"] and "IPS or SNIPS" in error["message"]


def _return_dr_by_hand(returns, w, first, edges, fold):
    """SCOPE-RL's trajectory-wise DR CDF at ``edges`` with the state model of the other fold
    (the formula of the docstring, one episode and one threshold at a time)."""
    out = []
    for t in edges:
        total = 0.0
        for i in range(returns.size):
            other = fold != fold[i]
            mine = other & (first == first[i])
            overall = np.sum(w[other] * (returns[other] <= t)) / np.sum(w[other])
            g = (np.sum(w[mine] * (returns[mine] <= t)) + overall) / (np.sum(w[mine]) + 1.0)
            total += g + w[i] * ((returns[i] <= t) - g)
        out.append(total / returns.size)
    return np.array(out)


def test_return_distribution_dr_matches_its_formula_at_the_knots():
    """At the model's knots (every distinct return here) the trajectory DR CDF is the formula:
    the first state's weighted return CDF from the other fold, shrunk by one pseudo-episode."""
    from ope._validation import resolve_seed

    mdp = TabularMDP(n_states=3, n_actions=2, horizon=3, seed=0)
    traj = ope.read_trajectories(mdp.sample(120, rng=0))
    w, g = ope.sequential.episode_weights(traj, "softmax", tail_value=0.0)
    first = traj.table.column("state").to_numpy()[traj.episode_starts[:-1]]
    d = ope.return_distribution(traj, ["softmax"], tail_value=0.0, estimator="dr", rng=7)
    _, gen = resolve_seed(7)
    fold = gen.permutation(g.size) % 2
    knots = np.unique(g)
    assert knots.size <= 17  # every distinct return is a knot: the model is exact there
    want = _return_dr_by_hand(g, w, first, knots[:-1], fold)
    got = d["softmax"].cdf_at(knots[:-1])[0]
    # the estimate is rearranged to be monotone; here it already is
    assert np.all(np.diff(want) >= 0)
    np.testing.assert_allclose(got, np.clip(want, 0, 1), rtol=0, atol=1e-12)
    assert "first state" in " ".join(d.notes)


# some of the 400-episode replications rest on fewer than 30 effective episodes (and warn):
# the test measures the bias over the replications, not one band's coverage
@pytest.mark.filterwarnings("ignore::ope.exceptions.SmallSampleWarning")
def test_return_distribution_dr_is_unbiased_and_narrower_than_ips():
    """Over 200 replications of 400 episodes the mean DR CDF is within Monte Carlo error of the
    candidate's own return CDF (400,000 episodes drawn from it) at every threshold, while IPS's
    (clipped to [0, 1]) falls short where its weights push it above 1; DR's band is narrower and
    its largest error smaller."""
    mdp = TabularMDP(n_states=4, n_actions=3, horizon=4, seed=0)
    ts = np.linspace(0.5, 6.0, 12)
    on = ope.read_trajectories(mdp.sample(400_000, rng=999, logging_policy="softmax"))
    _, returns = ope.sequential.episode_weights(on, "softmax", tail_value=0.0)
    truth = (returns[:, None] <= ts[None, :]).mean(axis=0)
    cdfs: dict[str, list[np.ndarray]] = {"ips": [], "dr": []}
    widths: dict[str, list[float]] = {"ips": [], "dr": []}
    for rep in range(200):
        traj = ope.read_trajectories(mdp.sample(400, rng=rep))
        for est in cdfs:
            d = ope.return_distribution(traj, ["softmax"], tail_value=0.0, estimator=est, rng=rep)
            cdfs[est].append(d["softmax"].cdf_at(ts)[0])
            widths[est].append(d["softmax"].half_width)
    dr, ips = np.array(cdfs["dr"]), np.array(cdfs["ips"])
    se = dr.std(axis=0, ddof=1) / np.sqrt(len(dr))
    assert np.all(np.abs(dr.mean(axis=0) - truth) <= 4 * se + 0.003)
    assert np.max(np.abs(dr - truth), axis=1).mean() < np.max(np.abs(ips - truth), axis=1).mean()
    assert np.mean(widths["dr"]) < np.mean(widths["ips"])


def test_command_line_on_trajectories(tmp_path):
    """``ope evaluate STEPS --metric ... --distribution-estimator dr``: the return distribution by
    DR, its model conditioned on --state-column without a marginalized estimator."""
    mdp = TabularMDP(n_states=3, n_actions=2, horizon=3, seed=0)
    path = tmp_path / "steps.parquet"
    pq.write_table(mdp.sample(800, rng=0), path)
    args = ["--metric", "cdf:1", "--distribution-estimator", "dr", "--tail-value", "0"]
    out = subprocess.run(
        [sys.executable, "-m", "ope", "evaluate", path, *args, "--state-column", "state"]
        + ["--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)["distribution"]
    assert doc["outcome"] == "return" and doc["n"] == 800
    assert doc["estimator"] == "dr"
    assert any("first state" in note for note in doc["notes"])


# 200 episodes of a greedy candidate: 12 effective episodes, which the band's note says
@pytest.mark.filterwarnings("ignore::ope.exceptions.SmallSampleWarning")
def test_return_dr_state_edges_and_notes(tmp_path):
    """Review edges: states an array cannot hold, the notes of the return model (not the
    bandit regressions), and --state-column refused early when nothing uses it."""
    mdp = TabularMDP(n_states=3, n_actions=2, horizon=3, seed=0)
    table = mdp.sample(200, rng=0)
    traj = ope.read_trajectories(table)
    n = traj.table.num_rows
    kw = {"tail_value": 0.0, "estimator": "dr"}
    with pytest.raises(ParameterError, match="`state`"):
        ope.return_distribution(traj, ["greedy"], state=np.full(n, 2**70, dtype=object), **kw)
    with pytest.raises(ValidationError, match="`state` must be finite"):
        nan_first = np.array([np.nan] + [1.0] * (n - 1), dtype=object)
        ope.return_distribution(traj, ["greedy"], state=nan_first, **kw)
    with pytest.raises(ValidationError, match="masked"):
        masked = np.ma.masked_array(np.ones(n), mask=[True] + [False] * (n - 1))
        ope.return_distribution(traj, ["greedy"], state=masked, **kw)
    d = ope.return_distribution(traj, ["greedy"], **kw)
    text = " ".join(d.notes)
    assert "first state" in text and "regressions" not in text and "rearrangement" in text
    unique = np.arange(n, dtype=np.float64)  # every episode its own first state
    d = ope.return_distribution(traj, ["greedy"], state=unique, **kw)
    assert any("distinct first states" in note for note in d.notes)
    path = tmp_path / "steps.parquet"
    pq.write_table(table, path)
    for extra in (
        ["--metric", "cdf:1", "--distribution-estimator", "ips"],
        [],
    ):
        out = subprocess.run(
            [sys.executable, "-m", "ope", "evaluate", path, "--tail-value", "0"]
            + ["--state-column", "state", *extra, "--json"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        doc = json.loads(out.stdout)
        assert out.returncode == 2 and doc["error"]["flag"] == "--state-column"
        assert "--distribution-estimator dr" in doc["error"]["message"]
    out = subprocess.run(
        [sys.executable, "-m", "ope", "evaluate", path, "--tail-value", "0", "--metric", "cdf:1"]
        + ["--distribution-estimator", "dr", "--state-column", "nope", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    doc = json.loads(out.stdout)
    assert out.returncode == 65 and "nope" in doc["error"]["message"]
    assert "warnings" not in doc or not doc["warnings"]  # refused before the evaluation ran
