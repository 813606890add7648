"""State-marginalized estimators of trajectories (``mis``, ``mis_dr``): the recursion against a
loop over episodes written here, the influence terms against a numerical derivative, exact
values of a tabular MDP, the refusals, and the entry points (evaluate_trajectories, the CLI)."""

from __future__ import annotations

import json
import math
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import ope
from ope.cli import main
from ope.exceptions import ParameterError
from ope.io import read_trajectories
from ope.sequential import evaluate_trajectories, sequential_estimate
from ope.simulate import TabularMDP


def quiet(run):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run()


def _random_episodes(seed: int, n: int = 50) -> pd.DataFrame:
    gen = np.random.default_rng(seed)
    lengths = gen.integers(1, 6, n)
    rows = int(lengths.sum())
    return pd.DataFrame(
        {
            "episode_id": np.repeat(np.arange(n), lengths),
            "step": np.concatenate([np.arange(k) for k in lengths]),
            "action": gen.integers(0, 2, rows),
            "propensity": gen.uniform(0.2, 1.0, rows),
            "reward": gen.normal(size=rows),
            "done": np.concatenate([[False] * (k - 1) + [True] for k in lengths]),
            "target__pi": gen.uniform(0.0, 1.0, rows),
            "state": gen.choice(["a", "b", "c"], rows),
            "q": gen.normal(size=rows),
            "v": gen.normal(size=rows),
        }
    )


def _loop_reference(df: pd.DataFrame, gamma: float, model: bool) -> float:
    """MIS (or MIS-DR) by the definitions, one episode and one step at a time: the candidate's
    mass D_t(s) moves along the logged transitions, each row taking D_t(s) rho / (sum of the
    rho of its cell)."""
    episodes = [g.sort_values("step") for _, g in df.groupby("episode_id")]
    n = len(episodes)
    mass = defaultdict(float)
    for e in episodes:
        mass[e.iloc[0]["state"]] += 1.0
    horizon = max(len(e) for e in episodes)
    total = 0.0
    for t in range(horizon):
        sigma, count, nxt_mass = defaultdict(float), defaultdict(int), defaultdict(float)
        here = [e.iloc[t] for e in episodes if len(e) > t]
        for row in here:
            sigma[row["state"]] += row["target__pi"] / row["propensity"]
            count[row["state"]] += 1
        for e in episodes:
            if len(e) <= t:
                continue
            row = e.iloc[t]
            rho = row["target__pi"] / row["propensity"]
            mu = mass[row["state"]] * rho / sigma[row["state"]]
            if model:
                w_state = mass[row["state"]] / count[row["state"]]
                total += gamma**t * (mu * (row["reward"] - row["q"]) + w_state * row["v"])
            else:
                total += gamma**t * mu * row["reward"]
            if len(e) > t + 1:
                nxt_mass[e.iloc[t + 1]["state"]] += mu
        mass = nxt_mass
    return total / n


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("estimator", ["mis", "mis_dr"])
def test_matches_a_loop_over_episodes(seed, estimator):
    df = _random_episodes(seed)
    traj = read_trajectories(df.sample(frac=1.0, random_state=seed))
    model = {"q_hat": "q", "v_hat": "v"} if estimator == "mis_dr" else {}
    res = quiet(lambda: sequential_estimate(traj, "pi", estimator=estimator, gamma=0.9, **model))
    want = _loop_reference(df, 0.9, estimator == "mis_dr")
    assert res.value == pytest.approx(want, rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("estimator", ["mis", "mis_dr"])
def test_the_influence_terms_average_to_the_estimate(estimator):
    df = _random_episodes(6, n=80)
    model = {"q_hat": "q", "v_hat": "v"} if estimator == "mis_dr" else {}
    res = quiet(
        lambda: sequential_estimate(
            read_trajectories(df), "pi", estimator=estimator, gamma=0.9, **model
        )
    )
    src = res._source
    assert float(src.statistic(src.components().mean(axis=0))) == pytest.approx(
        res.value, rel=1e-10
    )


@pytest.mark.parametrize("estimator", ["mis", "mis_dr"])
def test_mis_standard_error_is_the_delta_method(estimator):
    """The influence terms match the change of the estimate when an episode is counted twice
    (a finite-step derivative with respect to its multiplicity)."""
    df = _random_episodes(4, n=40)
    traj = read_trajectories(df)
    model = {"q_hat": "q", "v_hat": "v"} if estimator == "mis_dr" else {}
    res = quiet(lambda: sequential_estimate(traj, "pi", estimator=estimator, gamma=0.9, **model))
    # the estimate as a function of per-episode multiplicities c (c = 1: the sample)
    base = res.value
    grads = []
    for e in range(40):  # a loop over episodes (a test)
        rep = pd.concat([df, df[df["episode_id"] == e].assign(episode_id=1000)])
        # weight 1 + 1 for episode e, normalized over n + 1 episodes: d value / d c_e
        bumped = quiet(
            lambda rep=rep: sequential_estimate(
                read_trajectories(rep), "pi", estimator=estimator, gamma=0.9, **model
            )
        ).value
        grads.append((bumped * 41 - base * 40))  # influence of one more copy of e
    psi = np.array(grads) - np.mean(grads)
    # one added copy is a finite step (O(1/n) from the derivative): the terms agree closely
    assert np.corrcoef(res.influence(), psi)[0, 1] > 0.98
    assert res.std_error == pytest.approx(np.std(psi, ddof=1) / math.sqrt(40), rel=0.1)


def test_on_tabular_mdp_mis_is_consistent_and_beats_pdis_at_long_horizons():
    env = TabularMDP(n_states=4, n_actions=2, horizon=60, seed=0)
    truth = env.true_value("greedy")
    traj = read_trajectories(env.sample(4000, rng=1))
    mis = quiet(lambda: sequential_estimate(traj, "greedy", estimator="mis", gamma=env.gamma))
    pdis = quiet(lambda: sequential_estimate(traj, "greedy", estimator="pdis", gamma=env.gamma))
    assert abs(mis.value - truth) < 4 * mis.std_error
    assert mis.std_error < pdis.std_error
    assert mis.ess > 10 * pdis.ess


def test_on_policy_mis_is_the_mean_return():
    df = _random_episodes(5).assign(target__pi=lambda d: d["propensity"])
    traj = read_trajectories(df)
    res = quiet(lambda: sequential_estimate(traj, "pi", estimator="mis", gamma=0.8))
    disc = 0.8 ** df["step"]
    assert res.value == pytest.approx(float((disc * df["reward"]).sum() / 50), rel=1e-12)


def test_refusals_name_the_argument():
    df = _random_episodes(0)
    traj = read_trajectories(df.drop(columns=["state"]))
    with pytest.raises(ParameterError, match="`state`"):
        sequential_estimate(traj, "pi", estimator="mis")
    traj = read_trajectories(df)
    with pytest.raises(ParameterError, match="`state` serves the marginalized"):
        sequential_estimate(traj, "pi", estimator="pdis", state="state")
    with pytest.raises(ParameterError, match="`max_weight`"):
        sequential_estimate(traj, "pi", estimator="mis", max_weight=5.0)
    with pytest.raises(ParameterError, match="q_hat and v_hat"):
        sequential_estimate(traj, "pi", estimator="mis_dr")
    res = quiet(
        lambda: sequential_estimate(
            traj, "pi", estimator="mis", state=df["state"].map({"a": 0, "b": 1, "c": 1}).to_numpy()
        )
    )
    assert math.isfinite(res.value)  # coarser states are the user's choice


def test_evaluate_trajectories_and_the_cli_run_them(tmp_path, capsys):
    env = TabularMDP(n_states=3, n_actions=2, horizon=8, seed=0)
    table = env.sample(400, rng=0, oracle=True)
    traj = read_trajectories(table)
    ev = quiet(
        lambda: evaluate_trajectories(
            traj,
            ["greedy"],
            estimators=["pdis", "mis", "mis_dr"],
            gamma=env.gamma,
            q_hat="q_target__greedy",
            v_hat="v_target__greedy",
        )
    )
    assert set(ev.table()["estimator"]) == {"pdis", "mis", "mis_dr"}
    path = tmp_path / "steps.parquet"
    pq.write_table(table, path)
    code = main(
        [
            "evaluate",
            str(path),
            "--policy",
            "greedy",
            "--estimator",
            "mis",
            "wpdis",
            "--gamma",
            str(env.gamma),
            "--json",
        ]
    )
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    assert {r["estimator"] for r in doc["estimates"]} == {"mis", "wpdis"}
    assert ope.sequential.MARGINALIZED == frozenset({"mis", "mis_dr"})


def test_ope_report_takes_trajectory_logs(tmp_path, capsys):
    env = TabularMDP(n_states=3, n_actions=2, horizon=12, seed=0)
    path = tmp_path / "steps.parquet"
    pq.write_table(env.sample(300, rng=0), path)
    out = tmp_path / "report.html"
    code = main(
        [
            "report",
            str(path),
            "--estimator",
            "mis",
            "wpdis",
            "--gamma",
            str(env.gamma),
            "--out",
            str(out),
            "--json",
        ]
    )
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["report"] == str(out)
    page = out.read_text()
    assert "mean discounted return" in page and ">mis<" in page
    assert main(["report", str(path), "--by", "state", "--out", str(tmp_path / "b.html")]) == 2
    assert "--by" in capsys.readouterr().err


def test_trajectory_evaluation_compares_by_episode():
    env = TabularMDP(n_states=3, n_actions=2, horizon=12, seed=0)
    traj = read_trajectories(env.sample(400, rng=1))
    ev = quiet(
        lambda: evaluate_trajectories(traj, ["greedy"], estimators=["mis", "pdis"], gamma=0.9)
    )
    table = ev.comparisons()
    assert list(table["estimator"]) == ["mis", "pdis"]
    d = ev.compare("greedy", estimator="mis")
    assert d.value == pytest.approx(ev["greedy", "mis"].value - ev.logging.value, rel=1e-12)
    with pytest.raises(KeyError):
        ev["greedy", "wdr"]


def test_magic_blends_between_the_model_and_wdr(monkeypatch):
    """With the blend forced onto one return, MAGIC is the model's value of the first states
    (the first return, j = -1) or WDR (the last, j = H - 1)."""
    import ope.sequential.estimators as est

    env = TabularMDP(n_states=4, n_actions=2, horizon=15, seed=2)
    table = env.sample(600, rng=3, oracle=True)
    traj = read_trajectories(table)
    q = 0.7 * table.column("q_target__greedy").to_numpy()
    v = 0.7 * table.column("v_target__greedy").to_numpy()
    model = {"q_hat": q, "v_hat": v, "gamma": env.gamma}
    wdr = quiet(lambda: sequential_estimate(traj, "greedy", estimator="wdr", **model))
    free = quiet(lambda: sequential_estimate(traj, "greedy", estimator="magic", **model))
    assert any("MAGIC blends" in n for n in free.notes)
    first_states = traj.episode_starts[:-1]
    for pick, want in ((0, float(v[first_states].mean())), (-1, wdr.value)):

        def vertex(m, pick=pick):
            x = np.zeros(m.shape[0])
            x[pick] = 1.0
            return x

        monkeypatch.setattr(est, "_simplex_minimum", vertex)
        forced = quiet(lambda: sequential_estimate(traj, "greedy", estimator="magic", **model))
        assert forced.value == pytest.approx(want, rel=1e-10)
    # the standard error adds the distance to WDR: at WDR itself it is WDR's own
    assert forced.std_error == pytest.approx(wdr.std_error, rel=1e-9)


def test_review_fixes_for_marginalized_and_magic(tmp_path, capsys):
    env = TabularMDP(n_states=5, n_actions=3, horizon=15, seed=0)
    table = env.sample(500, rng=0, oracle=True)
    traj = read_trajectories(table)
    q = 0.8 * table.column("q_target__softmax").to_numpy()
    v = 0.8 * table.column("v_target__softmax").to_numpy()
    ev = quiet(
        lambda: evaluate_trajectories(
            traj, ["softmax"], estimators=["magic"], gamma=env.gamma, q_hat=q, v_hat=v
        )
    )
    magic = ev["softmax", "magic"]
    d = ev.compare("softmax", estimator="magic")
    rows_only = float(np.std(d.influence(), ddof=1) / math.sqrt(d.n))
    # the paired difference keeps MAGIC's error beyond its rows (its bias bound)
    beyond = math.sqrt(max(magic.std_error**2 - np.var(magic.influence(), ddof=1) / magic.n, 0))
    assert beyond > 0 and d.std_error == pytest.approx(math.hypot(rows_only, beyond), rel=1e-9)
    # continuous states: refused, not the logged mean
    cont = table.to_pandas().assign(state=np.random.default_rng(0).normal(size=table.num_rows))
    with pytest.raises(ope.EstimationError, match="alone in their"):
        sequential_estimate(read_trajectories(cont), "softmax", estimator="mis", gamma=0.9)
    # states as a pandas column of strings
    df = _random_episodes(1)
    res = quiet(
        lambda: sequential_estimate(
            read_trajectories(df), "pi", estimator="mis", state=df["state"].astype(object)
        )
    )
    assert math.isfinite(res.value)
    with pytest.raises(ParameterError, match="mixes types"):
        sequential_estimate(
            read_trajectories(df),
            "pi",
            estimator="mis",
            state=np.array([1, "a"] * 200, dtype=object)[: len(df)],
        )


def test_mis_effective_sample_is_the_least_effective_step():
    # two-step episodes: at step 0 two of 300 rows carry the candidate's action (rho = 100)
    n = 300
    df = pd.DataFrame(
        {
            "episode_id": np.repeat(np.arange(n), 2),
            "step": np.tile([0, 1], n),
            "action": 0,
            "propensity": 0.01,
            "reward": 1.0,
            "done": np.tile([False, True], n),
            "target__pi": np.where((np.arange(2 * n) < 4) & (np.tile([0, 1], n) == 0), 1.0, 0.01),
            "state": 0,
        }
    )
    res = quiet(lambda: sequential_estimate(read_trajectories(df), "pi", estimator="mis"))
    mu = np.where(np.arange(n) < 2, 100.0, 1.0) * n / (2 * 100.0 + (n - 2))  # step 0's weights
    assert res.ess == pytest.approx(float(mu.sum() ** 2 / (mu**2).sum()), rel=1e-9)
    assert res.ess < 0.05 * n  # not the last step's (every weight 1 there)


def test_the_trajectory_report_refuses_what_it_cannot_show(tmp_path, capsys):
    env = TabularMDP(n_states=3, n_actions=2, horizon=8, seed=0)
    path = tmp_path / "steps.parquet"
    pq.write_table(env.sample(200, rng=0), path)
    out = str(tmp_path / "r.html")
    for extra in (
        ["--guardrail", "reward:lower:1"],
        ["--tail-column", "v_{policy}"],
        ["--sensitivity", "on"],
    ):
        assert main(["report", str(path), "--gamma", "0.9", "--out", out, *extra]) == 2, extra
        assert extra[0] in capsys.readouterr().err
    assert main(["report", str(path), "--estimator", "mis", "--gamma", "0.9", "--out", out]) == 0
    page = Path(out).read_text()
    notes = page[page.index('id="notes"') :]
    assert notes.count("were truncated") <= len(env.candidate_policies)  # each once


def test_the_trajectory_report_shows_the_return_distribution(tmp_path, capsys):
    """``ope report STEPS --metric ...``: the section *Outcome distributions* of the returns,
    counted in episodes."""
    env = TabularMDP(n_states=3, n_actions=2, horizon=4, seed=0)
    path = tmp_path / "steps.parquet"
    pq.write_table(env.sample(300, rng=0), path)
    out = tmp_path / "r.html"
    args = ["report", str(path), "--metric", "quantile:0.5", "--tail-value", "0"]
    assert main([*args, "--distribution-estimator", "dr", "--out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["distribution"]["estimator"] == "dr"
    page = out.read_text()
    section = page[page.index('id="distribution"') : page.index('id="guardrails"')]
    assert "<code>return</code>" in section and "on 300 episodes" in section
    assert "products over each episode" in page and "this report is of episodes" in page
