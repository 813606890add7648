"""Sequential estimators: hand-computed vectors, a loop reference, exact DP truths, errors."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from ope.results import compare
from ope.exceptions import (
    EstimationError,
    OPEWarning,
    OverlapWarning,
    ParameterError,
    PolicyError,
    SchemaError,
    SmallSampleWarning,
    ValidationError,
)
from ope.io import read_trajectories
from ope.logs import Trajectories
from ope.sequential import (
    MARGINALIZED,
    SEQUENTIAL_ESTIMATORS,
    fitted_q_evaluation,
    sequential_estimate,
)

from ope.simulate import TabularMDP

#: The estimators of cumulative weights (the hand values and the loop reference are theirs; the
#: marginalized ones have their own in tests/test_marginalized.py).
CUMULATIVE = tuple(e for e in SEQUENTIAL_ESTIMATORS if e not in MARGINALIZED and e != "magic")


@pytest.fixture(autouse=True)
def _quiet_small_sample():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallSampleWarning)
        yield


# ---------------------------------------------------------------------------------------------
# two episodes worked by hand (gamma = 0.5)
#   episode 10: rho = [2, 2]      -> w = [2, 4],        r = [1, 2],    terminates
#   episode 20: rho = [0.5, 1, 2] -> w = [0.5, 0.5, 1], r = [0, 1, 1], truncated
# ---------------------------------------------------------------------------------------------
HAND = pd.DataFrame(
    {
        "episode_id": [20, 10, 20, 10, 20],  # any row order: read_trajectories sorts
        "step": [0, 1, 1, 0, 2],
        "action": [1, 0, 0, 1, 1],
        "propensity": [0.5, 0.25, 1.0, 0.5, 0.5],
        "reward": [0.0, 2.0, 1.0, 1.0, 1.0],
        "done": [False, True, False, False, False],
        "target__pi": [0.25, 0.5, 1.0, 1.0, 1.0],
        "q": [0.2, 1.0, 0.5, 0.5, 0.3],
        "v": [0.4, 0.8, 0.5, 0.6, 0.2],
        "v_next": [0.0, 0.0, 0.0, 0.0, 2.0],
    }
)
GAMMA = 0.5

# values with tail_value = 0 (the truncated value), worked out in the comments
HAND_VALUES = {
    # IS: episode 10: W=4, R = 1 + 0.5*2 = 2 -> 8; episode 20: W=1, R = 0.5 + 0.25 = 0.75
    "is": (8 + 0.75) / 2,
    # PDIS: 2*1 + 0.5*4*2 = 6; 0 + 0.5*0.5*1 + 0.25*1*1 = 0.5
    "pdis": (6 + 0.5) / 2,
    # WIS: (8 + 0.75) / (4 + 1)
    "wis": 8.75 / 5,
    # WPDIS: D = [2.5, 4.5, 4 (frozen) + 1]; N = [2, 8.5, 1]
    "wpdis": 2 / 2.5 + 0.5 * 8.5 / 4.5 + 0.25 * 1 / 5,
    # DR: episode 10: [2*0.5 + 0.6] + 0.5*[4*1 + 2*0.8] = 4.4
    #     episode 20: [0.5*-0.2 + 0.4] + 0.5*[0.5*0.5 + 0.5*0.5] + 0.25*[1*0.7 + 0.5*0.2] = 0.75
    "dr": (4.4 + 0.75) / 2,
    # WDR: t=0: (1 - 0.1)/2.5 + (0.6 + 0.4)/2; t=1: 0.5*(4.25/4.5 + (1.6 + 0.25)/2.5);
    #      t=2: 0.25*(0.7/5 + 0.1/4.5)
    "wdr": 0.9 / 2.5 + 0.5 + 0.5 * (4.25 / 4.5 + 1.85 / 2.5) + 0.25 * (0.7 / 5 + 0.1 / 4.5),
}


def _model(estimator: str) -> dict[str, str]:
    return {"q_hat": "q", "v_hat": "v"} if estimator in ("dr", "wdr", "mis_dr", "magic") else {}


@pytest.fixture(scope="module")
def hand() -> Trajectories:
    return read_trajectories(HAND)


@pytest.mark.parametrize("estimator", CUMULATIVE)
def test_hand_values(hand, estimator):
    res = sequential_estimate(
        hand, "pi", estimator=estimator, gamma=GAMMA, tail_value=0.0, **_model(estimator)
    )
    assert res.value == pytest.approx(HAND_VALUES[estimator], rel=1e-12)
    assert res.n == 2
    assert res.estimator == estimator and res.policy == "pi"
    # Kish ESS of the trajectory weights [4, 1]
    assert res.ess == pytest.approx(25 / 17)


def test_hand_standard_errors(hand):
    # two per-episode terms a, b: sd = |a - b| / sqrt(2), se = |a - b| / 2
    pdis = sequential_estimate(hand, "pi", estimator="pdis", gamma=GAMMA, tail_value=0.0)
    assert pdis.std_error == pytest.approx(abs(6 - 0.5) / 2)
    dr = sequential_estimate(
        hand, "pi", estimator="dr", gamma=GAMMA, tail_value=0.0, q_hat="q", v_hat="v"
    )
    assert dr.std_error == pytest.approx(abs(4.4 - 0.75) / 2)
    # WIS, delta method: psi_i = (W_i R_i - V W_i) / mean(W) = (8 - 7)/2.5, (0.75 - 1.75)/2.5
    wis = sequential_estimate(hand, "pi", estimator="wis", gamma=GAMMA, tail_value=0.0)
    assert wis.std_error == pytest.approx(0.8 / 2)
    assert wis.influence() == pytest.approx([0.4, -0.4])


def test_hand_tail_value(hand):
    # episode 20 is truncated; its tail gamma^3 * w_2 * V(s_3) = 0.125 * 1 * 2 = 0.25
    per_episode = np.array([99.0, 2.0])  # the terminated episode's entry is not used
    for tail in (per_episode, "v_next", hand.column("v_next")):
        pdis = sequential_estimate(hand, "pi", estimator="pdis", gamma=GAMMA, tail_value=tail)
        assert pdis.value == pytest.approx((6 + 0.5 + 0.25) / 2)
    is_ = sequential_estimate(hand, "pi", estimator="is", gamma=GAMMA, tail_value=per_episode)
    assert is_.value == pytest.approx((8 + 1 * (0.75 + 0.25)) / 2)
    wdr = sequential_estimate(
        hand, "pi", estimator="wdr", gamma=GAMMA, tail_value=per_episode, q_hat="q", v_hat="v"
    )
    # the tail joins the last step's reward: 0.25 * (1 * 0.5 * 2) / D_2 with D_2 = 5
    assert wdr.value == pytest.approx(HAND_VALUES["wdr"] + 0.25 * 1.0 / 5)


def test_hand_clipping(hand):
    # max_weight=3 clips episode 10's w = [2, 4] to [2, 3]: PDIS term 2 + 0.5*3*2 = 5
    res = sequential_estimate(
        hand, "pi", estimator="pdis", gamma=GAMMA, tail_value=0.0, max_weight=3.0
    )
    assert res.value == pytest.approx((5 + 0.5) / 2)
    assert res.ess == pytest.approx(16 / 10)


def test_truncation_without_tail_warns(hand):
    with pytest.warns(OPEWarning, match=r"1 of 2 episodes were truncated .* tail_value"):
        res = sequential_estimate(hand, "pi", estimator="pdis", gamma=GAMMA)
    assert res.value == pytest.approx(HAND_VALUES["pdis"])
    assert any("truncated" in note for note in res.notes)
    with pytest.warns(OPEWarning) as record:
        sequential_estimate(hand, "pi", estimator="pdis", gamma=GAMMA)
    assert {w.filename for w in record} == {__file__}  # points at the caller's line
    with warnings.catch_warnings():
        warnings.simplefilter("error", OPEWarning)
        warnings.simplefilter("ignore", SmallSampleWarning)
        sequential_estimate(hand, "pi", estimator="pdis", gamma=GAMMA, tail_value=0.0)


def test_array_target_and_float32(hand):
    target = hand.column("target__pi")
    a = sequential_estimate(
        hand,
        target.astype(np.float32),
        estimator="wdr",
        gamma=GAMMA,
        tail_value=0.0,
        q_hat=hand.column("q").astype(np.float32),
        v_hat="v",
    )
    # float32 storage rounds q = 0.2, 0.3, ... at ~1e-8; accumulation is float64
    assert a.value == pytest.approx(HAND_VALUES["wdr"], rel=1e-7)
    assert a.policy is None


def test_confidence_level_and_intervals(hand):
    res = sequential_estimate(
        hand, "pi", estimator="pdis", gamma=GAMMA, tail_value=0.0, confidence_level=0.9
    )
    lo, hi = res.ci(0.9, "normal")
    assert (res.ci_low, res.ci_high, res.confidence_level) == (lo, hi, 0.9)
    assert hi - lo == pytest.approx(2 * 1.6448536269514722 * res.std_error)
    t_lo, t_hi = res.ci(0.9, "t")
    assert t_hi - t_lo > hi - lo  # t with 1 degree of freedom is wider


# ---------------------------------------------------------------------------------------------
# a plain loop reference (absorbing-state padding), on random variable-length trajectories
# ---------------------------------------------------------------------------------------------
def _reference(df: pd.DataFrame, estimator: str, gamma: float) -> float:
    """Each estimator by its textbook definition: episodes padded to the longest horizon with
    an absorbing state (rho = 1, r = q = v = 0)."""
    episodes = [g.sort_values("step") for _, g in df.groupby("episode_id", sort=True)]
    horizon = max(len(g) for g in episodes)
    n = len(episodes)
    rho = np.ones((n, horizon))
    r = np.zeros((n, horizon))
    q = np.zeros((n, horizon))
    v = np.zeros((n, horizon))
    for i, g in enumerate(episodes):
        k = len(g)
        rho[i, :k] = g["target__pi"].to_numpy() / g["propensity"].to_numpy()
        r[i, :k] = g["reward"].to_numpy()
        q[i, :k] = g["q"].to_numpy()
        v[i, :k] = g["v"].to_numpy()
    w = np.cumprod(rho, axis=1)
    disc = gamma ** np.arange(horizon)
    if estimator == "is":
        return float(np.mean(w[:, -1] * (r @ disc)))
    if estimator == "wis":
        return float(np.sum(w[:, -1] * (r @ disc)) / np.sum(w[:, -1]))
    if estimator == "pdis":
        return float(np.mean((w * r) @ disc))
    if estimator == "wpdis":
        return float(np.sum(disc * (w * r).sum(0) / w.sum(0)))
    if estimator == "dr":  # the Jiang & Li recursion, backwards in time
        total = 0.0
        for i in range(n):
            value = 0.0
            for t in range(horizon - 1, -1, -1):
                value = v[i, t] + rho[i, t] * (r[i, t] + gamma * value - q[i, t])
            total += value
        return total / n
    # wdr: Thomas & Brunskill with w_t / sum_j w^j_t and w_{-1} = 1/n
    wn = w / w.sum(0)
    wn_prev = np.hstack([np.full((n, 1), 1.0 / n), wn[:, :-1]])
    return float(np.sum(disc * (wn * (r - q) + wn_prev * v)))


def _random_trajectories(seed: int, n_episodes: int = 40) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 7, size=n_episodes)
    rows = int(lengths.sum())
    episode = np.repeat(rng.permutation(n_episodes) * 3 + 5, lengths)
    step = np.concatenate([np.arange(k) for k in lengths])
    done = np.zeros(rows, dtype=bool)
    ends = np.cumsum(lengths) - 1
    done[ends] = rng.random(n_episodes) < 0.6
    return pd.DataFrame(
        {
            "episode_id": episode,
            "step": step,
            "action": rng.integers(0, 3, rows),
            "propensity": rng.uniform(0.2, 1.0, rows),
            "reward": rng.normal(size=rows),
            "done": done,
            "target__pi": rng.uniform(0.0, 1.0, rows) * (rng.random(rows) > 0.1),
            "q": rng.normal(size=rows),
            "v": rng.normal(size=rows),
            "state": rng.integers(0, 3, rows),  # for mis and mis_dr
        }
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("estimator", CUMULATIVE)
def test_matches_loop_reference(seed, estimator):
    df = _random_trajectories(seed)
    traj = read_trajectories(df.sample(frac=1.0, random_state=seed))  # shuffled rows
    res = sequential_estimate(
        traj, "pi", estimator=estimator, gamma=0.8, tail_value=0.0, **_model(estimator)
    )
    assert res.value == pytest.approx(_reference(df, estimator, 0.8), rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("estimator", CUMULATIVE)
def test_influence_and_bootstrap_components_agree(estimator):  # the others have no bootstrap
    traj = read_trajectories(_random_trajectories(7, n_episodes=60))
    res = sequential_estimate(
        traj, "pi", estimator=estimator, gamma=0.9, tail_value=0.0, **_model(estimator)
    )
    src = res._source
    comps = src.components()
    means = comps.mean(axis=0)
    # the bootstrap's statistic at the full-sample means is the estimate ...
    assert float(src.statistic(means)) == pytest.approx(res.value, rel=1e-10)
    # ... and the per-step influence terms equal the delta method on the dense components
    dense_psi = (comps - means) @ src.gradient(means)
    np.testing.assert_allclose(res.influence(), dense_psi, rtol=1e-9, atol=1e-12)
    assert res.std_error == pytest.approx(np.std(dense_psi, ddof=1) / math.sqrt(60))
    lo, hi = res.ci(0.95, "bootstrap", rng=0, n_resamples=500)
    assert lo < res.value < hi


def test_episode_order_and_ids_do_not_matter():
    df = _random_trajectories(3)
    a = sequential_estimate(
        read_trajectories(df),
        "pi",
        estimator="wdr",
        gamma=0.7,
        tail_value=0.0,
        q_hat="q",
        v_hat="v",
    )
    relabelled = df.assign(episode_id=(-df["episode_id"]).astype(str))
    relabelled = relabelled.sample(frac=1.0, random_state=1)
    b = sequential_estimate(
        read_trajectories(relabelled),
        "pi",
        estimator="wdr",
        gamma=0.7,
        tail_value=0.0,
        q_hat="q",
        v_hat="v",
    )
    assert b.value == pytest.approx(a.value, rel=1e-12)
    assert b.std_error == pytest.approx(a.std_error, rel=1e-12)


# ---------------------------------------------------------------------------------------------
# exact ground truth from the tabular MDP
# ---------------------------------------------------------------------------------------------
def _mixed_env(**kw) -> TabularMDP:
    """An MDP whose candidate ``mix`` is half logging, half softmax: overlap is good."""
    base = TabularMDP(**kw)
    mix = 0.5 * base.policy_table("logging") + 0.5 * base.policy_table("softmax")
    return TabularMDP(**kw, policies={"mix": mix})


def _blocks(traj: Trajectories, size: int) -> list[Trajectories]:
    """Disjoint replications: consecutive blocks of ``size`` episodes (zero-copy slices)."""
    s = traj.episode_starts
    return [
        Trajectories(traj.table.slice(s[k], s[k + size] - s[k]), traj.report)
        for k in range(0, traj.n_episodes - size + 1, size)
    ]


def _untruncated_v(env: TabularMDP, policy: str) -> np.ndarray:
    q = env.discounted_q_function(policy)
    return np.einsum("sa,sa->s", env.policy_table(policy), q)


def test_on_policy_gives_average_discounted_return():
    env = TabularMDP(n_states=4, n_actions=2, horizon=5, gamma=0.8, seed=2)
    table = env.sample(300, rng=3, logging_policy="softmax")
    traj = read_trajectories(table)
    df = table.to_pandas()
    returns = (df["reward"] * 0.8 ** df["step"]).groupby(df["episode_id"]).sum()
    for estimator in ("is", "pdis", "wis", "wpdis"):
        res = sequential_estimate(traj, "softmax", estimator=estimator, gamma=0.8, tail_value=0.0)
        assert res.value == pytest.approx(returns.mean(), rel=1e-12)
        assert res.std_error == pytest.approx(returns.std(ddof=1) / math.sqrt(300), rel=1e-9)
        assert res.ess == pytest.approx(300)


def test_oracle_dr_has_much_smaller_variance_than_pdis():
    env = TabularMDP(
        n_states=5,
        n_actions=3,
        horizon=6,
        gamma=0.9,
        reward="gaussian",
        reward_noise=0.05,
        termination_probability=0.05,
        seed=4,
    )
    traj = read_trajectories(env.sample(3000, rng=5, oracle=True))
    pdis = sequential_estimate(traj, "softmax", estimator="pdis", gamma=0.9, tail_value=0.0)
    dr = sequential_estimate(
        traj,
        "softmax",
        estimator="dr",
        gamma=0.9,
        tail_value=0.0,
        q_hat="q_target__softmax",
        v_hat="v_target__softmax",
    )
    wdr = sequential_estimate(
        traj,
        "softmax",
        estimator="wdr",
        gamma=0.9,
        tail_value=0.0,
        q_hat="q_target__softmax",
        v_hat="v_target__softmax",
    )
    truth = env.true_value("softmax")
    assert dr.std_error < 0.5 * pdis.std_error
    assert wdr.std_error < 0.5 * pdis.std_error
    for res in (pdis, dr, wdr):
        assert abs(res.value - truth) < 4 * res.std_error


def test_truncated_value_and_tail_bootstrap_single_sample():
    env = _mixed_env(n_states=4, n_actions=2, horizon=4, gamma=0.8, seed=6)
    table = env.sample(20000, rng=7, oracle=True)
    traj = read_trajectories(table)
    assert 0.3 < traj.truncated.mean() < 0.9  # both kinds of episodes are present
    truncated_truth = env.true_value("mix")
    full_truth = env.true_value("mix", horizon=math.inf)
    assert full_truth > truncated_truth + 0.3  # the tail matters
    # without a tail value: the value truncated at the logged horizon
    for estimator in ("pdis", "wpdis"):
        with pytest.warns(OPEWarning, match="truncated"):
            res = sequential_estimate(traj, "mix", estimator=estimator, gamma=0.8)
        assert abs(res.value - truncated_truth) < 4 * res.std_error
    # with the exact tail value V(s_L) of the untruncated process: the untruncated value
    v_inf = _untruncated_v(env, "mix")
    next_state = table.column("next_state").to_numpy()
    tail = np.where(next_state >= 0, v_inf[np.maximum(next_state, 0)], 0.0)
    q_inf = env.discounted_q_function("mix")
    s, a = table.column("state").to_numpy(), table.column("action").to_numpy()
    for estimator in SEQUENTIAL_ESTIMATORS:
        model = (
            {"q_hat": q_inf[s, a], "v_hat": v_inf[s]}
            if estimator in ("dr", "wdr", "mis_dr", "magic")
            else {}
        )
        res = sequential_estimate(
            traj, "mix", estimator=estimator, gamma=0.8, tail_value=tail, **model
        )
        assert abs(res.value - full_truth) < 4 * res.std_error, estimator


def _replicated(env, policy, estimator, *, size, reps, rng, gamma, tail="zero", model_scale=1.0):
    """Estimates on ``reps`` disjoint blocks of ``size`` episodes (model: oracle x scale)."""
    table = env.sample(size * reps, rng=rng, oracle=True)
    traj = read_trajectories(table)
    if tail == "oracle":
        v_inf = _untruncated_v(env, policy)
        next_state = table.column("next_state").to_numpy()
        tail_value = np.where(next_state >= 0, v_inf[np.maximum(next_state, 0)], 0.0)
        q_inf = env.discounted_q_function(policy)
        s, a = table.column("state").to_numpy(), table.column("action").to_numpy()
        q_hat, v_hat = q_inf[s, a], v_inf[s]
    else:
        tail_value = 0.0
        q_hat = model_scale * table.column("q_target__" + policy).to_numpy()
        v_hat = model_scale * table.column("v_target__" + policy).to_numpy()
    values = []
    for k, block in enumerate(_blocks(traj, size)):
        rows = slice(traj.episode_starts[k * size], traj.episode_starts[(k + 1) * size])
        tv = tail_value if np.isscalar(tail_value) else tail_value[rows]
        model = {"q_hat": q_hat[rows], "v_hat": v_hat[rows]} if estimator in ("dr", "wdr") else {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", OverlapWarning)
            res = sequential_estimate(
                block, policy, estimator=estimator, gamma=gamma, tail_value=tv, **model
            )
        values.append(res.value)
    return np.asarray(values)


@pytest.mark.parametrize("estimator", ["is", "pdis", "dr"])
def test_unbiased_over_replications_truncated_value(estimator):
    env = _mixed_env(n_states=4, n_actions=2, horizon=5, gamma=0.9, seed=3)
    values = _replicated(env, "mix", estimator, size=50, reps=200, rng=12, gamma=0.9)
    se = values.std(ddof=1) / math.sqrt(values.size)
    assert abs(values.mean() - env.true_value("mix")) < 3 * se


@pytest.mark.parametrize("estimator", ["is", "pdis", "dr"])
def test_unbiased_over_replications_with_tail(estimator):
    env = _mixed_env(n_states=4, n_actions=2, horizon=4, gamma=0.8, seed=8)
    values = _replicated(env, "mix", estimator, size=50, reps=300, rng=12, gamma=0.8, tail="oracle")
    se = values.std(ddof=1) / math.sqrt(values.size)
    assert abs(values.mean() - env.true_value("mix", horizon=math.inf)) < 3 * se


@pytest.mark.slow
@pytest.mark.parametrize("estimator", ["wis", "wpdis", "wdr"])
def test_self_normalized_bias_shrinks_with_n(estimator):
    # the greedy-leaning candidate is worth more than the logger; with few episodes the
    # self-normalized estimators are pulled towards the logged returns (at n = 1, WIS *is* the
    # logged return). WDR gets a deliberately poor model (half the true values) so that its
    # weighting, not the model, carries the estimate.
    env = TabularMDP(n_states=4, n_actions=2, horizon=5, gamma=0.9, seed=3)
    truth = env.true_value("epsilon_greedy")
    assert truth - env.true_value("logging") > 0.2
    small = _replicated(
        env, "epsilon_greedy", estimator, size=5, reps=3000, rng=21, gamma=0.9, model_scale=0.5
    )
    large = _replicated(
        env, "epsilon_greedy", estimator, size=1000, reps=40, rng=22, gamma=0.9, model_scale=0.5
    )
    bias_small = small.mean() - truth
    se_small = small.std(ddof=1) / math.sqrt(small.size)
    bias_large = large.mean() - truth
    se_large = large.std(ddof=1) / math.sqrt(large.size)
    assert abs(bias_small) > 3 * se_small  # a real small-sample bias ...
    assert abs(bias_large) < 3 * se_large  # ... that is gone at n = 1000 episodes
    assert large.std() < small.std() / 5


@pytest.mark.slow
@pytest.mark.parametrize("estimator", SEQUENTIAL_ESTIMATORS)
def test_normal_interval_coverage(estimator):
    # 400 disjoint replications of 200 episodes; the 95% normal interval (delta-method
    # standard errors for the self-normalized estimators) should cover the exact DP value
    # 95% of the time: binomial sd 1.1%, so [0.92, 0.98] is a +-3 sd band.
    env = _mixed_env(n_states=4, n_actions=2, horizon=5, gamma=0.9, seed=3)
    truth = env.true_value("mix")
    table = env.sample(200 * 400, rng=31, oracle=True)
    traj = read_trajectories(table)
    model = {
        "q_hat": 0.5 * table.column("q_target__mix").to_numpy(),
        "v_hat": 0.5 * table.column("v_target__mix").to_numpy(),
    }
    covered = []
    for k, block in enumerate(_blocks(traj, 200)):
        rows = slice(traj.episode_starts[k * 200], traj.episode_starts[(k + 1) * 200])
        kw = (
            {key: val[rows] for key, val in model.items()}
            if estimator in ("dr", "wdr", "mis_dr", "magic")
            else {}
        )
        res = sequential_estimate(
            block, "mix", estimator=estimator, gamma=0.9, tail_value=0.0, **kw
        )
        covered.append(res.ci_low <= truth <= res.ci_high)
    assert 0.92 <= np.mean(covered) <= 0.98


@pytest.mark.slow
@pytest.mark.parametrize("estimator", ["wis", "wpdis", "wdr"])
def test_bootstrap_interval_coverage(estimator):
    # resampling whole episodes, renormalizing inside each resample: 200 replications of
    # 200 episodes, binomial sd 1.5% around 0.95
    env = _mixed_env(n_states=4, n_actions=2, horizon=5, gamma=0.9, seed=3)
    truth = env.true_value("mix")
    table = env.sample(200 * 200, rng=32, oracle=True)
    traj = read_trajectories(table)
    model = {
        "q_hat": 0.5 * table.column("q_target__mix").to_numpy(),
        "v_hat": 0.5 * table.column("v_target__mix").to_numpy(),
    }
    covered = []
    for k, block in enumerate(_blocks(traj, 200)):
        rows = slice(traj.episode_starts[k * 200], traj.episode_starts[(k + 1) * 200])
        kw = {key: val[rows] for key, val in model.items()} if estimator == "wdr" else {}
        res = sequential_estimate(
            block, "mix", estimator=estimator, gamma=0.9, tail_value=0.0, **kw
        )
        lo, hi = res.ci(0.95, "bootstrap", rng=k, n_resamples=1000)
        covered.append(lo <= truth <= hi)
    assert 0.90 <= np.mean(covered) <= 0.99


# ---------------------------------------------------------------------------------------------
# diagnostics and bad input
# ---------------------------------------------------------------------------------------------
def test_low_ess_warns():
    env = TabularMDP(n_states=5, n_actions=3, horizon=10, gamma=0.9, seed=1)
    traj = read_trajectories(env.sample(2000, rng=0))
    with pytest.warns(OverlapWarning, match="effective sample size"):
        res = sequential_estimate(traj, "greedy", estimator="wis", gamma=0.9, tail_value=0.0)
    assert res.ess < 0.01 * res.n


def test_compare_pairs_by_episode(hand):
    traj = read_trajectories(_random_trajectories(4, n_episodes=80))
    a = sequential_estimate(
        traj, "pi", estimator="dr", gamma=0.9, tail_value=0.0, q_hat="q", v_hat="v"
    )
    b = sequential_estimate(traj, "pi", estimator="pdis", gamma=0.9, tail_value=0.0)
    d = compare(a, b)
    assert d.value == pytest.approx(a.value - b.value)
    assert d.n == 80
    assert d.std_error == pytest.approx(
        np.std(a.influence() - b.influence(), ddof=1) / math.sqrt(80)
    )


def _table_with(**changes) -> Trajectories:
    df = HAND.sort_values(["episode_id", "step"]).reset_index(drop=True)
    for name, value in changes.items():
        df[name] = value
    table = pa.Table.from_pandas(df, preserve_index=False)
    return Trajectories(table, read_trajectories(HAND).report)


def test_unsorted_steps_are_rejected():
    df = HAND.copy()  # rows in their original (unsorted) order, wrapped without reading
    traj = Trajectories(
        pa.Table.from_pandas(df, preserve_index=False), read_trajectories(HAND).report
    )
    with pytest.raises(
        ValidationError,
        match=r"sorted by \(episode_id, step\).*first at row \d+ \(episode_id "
        r"\d+, step \d+\).*ope.read_trajectories",
    ):
        sequential_estimate(traj, "pi", tail_value=0.0)


def test_split_episode_is_rejected():
    df = pd.concat([HAND.iloc[[3, 1]], HAND.iloc[[0, 2, 4]], HAND.iloc[[3, 1]]])
    traj = Trajectories(
        pa.Table.from_pandas(df, preserve_index=False), read_trajectories(HAND).report
    )
    with pytest.raises(ValidationError, match=r"contiguous.*separate runs.*\(e.g. 10\)"):
        sequential_estimate(traj, "pi", tail_value=0.0)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (
            {"target": "nope"},
            SchemaError,
            r"no column 'nope' or 'target__nope'.*candidate policies .*'pi'",
        ),
        (
            {"target": np.array([0.5, 1.2, 1.0, 1.0, 1.0])},
            PolicyError,
            r"`target` must be in \[0, 1\].*1 row\(s\) break this, first at row 1 \(episode_id 10, "
            r"step 1\)",
        ),
        (
            {"target": np.array([0.5, np.nan, 1.0, 1.0, 1.0])},
            PolicyError,
            r"`target` must be finite",
        ),
        ({"target": np.ones(4)}, ValidationError, r"one value per step: shape \(5,\).*\(4,\)"),
        ({"estimator": "dr"}, ValueError, r"needs a model's values per step: pass q_hat and v_hat"),
        ({"estimator": "dr", "q_hat": "q"}, ValueError, r"pass v_hat"),
        ({"q_hat": "q"}, ValueError, r"'pdis' does not use a model, but q_hat"),
        (
            {"estimator": "dr", "q_hat": "q", "v_hat": "missing"},
            SchemaError,
            r"`v_hat` names column 'missing'",
        ),
        (
            {"estimator": "dr", "q_hat": np.array([0.0, 1.0, np.inf, 0.0, 0.0]), "v_hat": "v"},
            ValidationError,
            r"`q_hat` must be finite; 1 row\(s\) break this, first at row 2 "
            r"\(episode_id",
        ),
        ({"estimator": "ips"}, ParameterError, r"`estimator` must be one of 'is'.*got 'ips'"),
        ({"gamma": 1.5}, ValueError, r"`gamma` \(discount factor\) must be in \[0, 1\]"),
        ({"max_weight": 0.0}, ValueError, r"`max_weight`.*positive"),
        (
            {"reward_range": (0.0, 1.0)},
            ValidationError,
            r"`reward` has values outside reward_range=\(0, 1\); 1 row\(s\) break this, "
            r"first at row \d+ \(episode_id",
        ),
        ({"reward_range": (1.0, 0.0)}, ValueError, r"low < high"),
        ({"confidence_level": 95}, ValueError, r"confidence_level"),
        (
            {"tail_value": np.ones(3)},
            ValidationError,
            r"`tail_value` must be a scalar, a column name, an array with one value per episode "
            r"\(shape \(2,\)\)",
        ),
        (
            {"tail_value": np.array([1.0, np.nan])},
            ValidationError,
            r"finite for truncated episodes",
        ),
    ],
)
def test_bad_arguments(hand, kwargs, error, match):
    args = {"target": "pi", "tail_value": 0.0, "gamma": GAMMA, **kwargs}
    target = args.pop("target")
    with pytest.raises(error, match=match):
        sequential_estimate(hand, target, **args)


def test_nan_tail_of_terminated_episode_is_ignored(hand):
    res = sequential_estimate(hand, "pi", gamma=GAMMA, tail_value=np.array([np.nan, 0.0]))
    assert res.value == pytest.approx(HAND_VALUES["pdis"])


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"propensity": [0.5, 0.0, 0.5, 1.0, 0.5]}, r"`propensity` must be in \(0, 1\]; 1 row"),
        (
            {"done": [True, True, False, False, False]},
            r"`done` may be true only at the last step.*row 0 \(episode_id 10, step 0\)",
        ),
        ({"reward": [1.0, np.inf, 0.0, 1.0, 1.0]}, r"`reward` must be finite"),
    ],
)
def test_bad_rows_in_unvalidated_trajectories(changes, match):
    with pytest.raises(ValidationError, match=match):
        sequential_estimate(_table_with(**changes), "pi", tail_value=0.0)


def test_missing_required_column():
    table = pa.Table.from_pandas(HAND.drop(columns=["propensity", "done"]), preserve_index=False)
    traj = Trajectories(table, read_trajectories(HAND).report)
    with pytest.raises(SchemaError, match=r"lack required column\(s\) 'propensity', 'done'"):
        sequential_estimate(traj, "pi")


def test_not_trajectories():
    with pytest.raises(TypeError, match=r"must be ope.Trajectories .*got DataFrame"):
        sequential_estimate(HAND, "pi")  # type: ignore[arg-type]


def test_too_few_episodes_and_no_weight():
    one = read_trajectories(HAND[HAND["episode_id"] == 10])
    with pytest.raises(EstimationError, match=r"at least 2 episodes; got 1"):
        sequential_estimate(one, "pi")
    traj = read_trajectories(HAND.assign(target__pi=0.0))
    with pytest.raises(
        EstimationError, match=r"every importance weight is zero.*'dr', 'wdr' or 'mis_dr'"
    ):
        sequential_estimate(traj, "pi", estimator="wpdis", tail_value=0.0)
    with pytest.warns(OverlapWarning, match="reduces to the model"):
        res = sequential_estimate(
            traj, "pi", estimator="wdr", gamma=GAMMA, tail_value=0.0, q_hat="q", v_hat="v"
        )
    assert res.value == pytest.approx((0.6 + 0.4) / 2)  # the model's V(s_0)


def test_weight_overflow_needs_clipping():
    n = 400
    df = pd.DataFrame(
        {
            "episode_id": np.repeat([0, 1], n // 2),
            "step": np.tile(np.arange(n // 2), 2),
            "action": 0,
            "propensity": 1e-4,
            "reward": 1.0,
            "done": False,
            "target__pi": 1.0,
        }
    )
    traj = read_trajectories(df)
    with pytest.raises(EstimationError, match=r"overflow float64.*max_weight="):
        sequential_estimate(traj, "pi", tail_value=0.0)
    res = sequential_estimate(traj, "pi", tail_value=0.0, max_weight=1e6, gamma=0.5)
    assert np.isfinite(res.value)


# ---------------------------------------------------------------------------------------------
# fitted Q evaluation
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fqe_env() -> tuple[TabularMDP, pa.Table]:
    env = _mixed_env(n_states=4, n_actions=2, horizon=4, gamma=0.8, seed=6)
    return env, env.sample(20000, rng=9)


def test_fqe_tabular_recovers_q_and_feeds_dr(fqe_env):
    env, table = fqe_env
    traj = read_trajectories(table)
    pi = env.policy_table("mix")
    fq = fitted_q_evaluation(
        traj, pi, gamma=0.8, state_column="state", next_state_column="next_state"
    )
    q_true = env.discounted_q_function("mix")
    assert fq.converged
    np.testing.assert_allclose(fq.coef, q_true, atol=0.05)
    full_truth = env.true_value("mix", horizon=math.inf)
    assert fq.value == pytest.approx(full_truth, abs=0.05)
    assert np.isnan(fq.tail_value[~traj.truncated]).all()
    assert np.isfinite(fq.tail_value[traj.truncated]).all()
    dr = sequential_estimate(
        traj,
        "mix",
        estimator="dr",
        gamma=0.8,
        q_hat=fq.q_hat,
        v_hat=fq.v_hat,
        tail_value=fq.tail_value,
    )
    pdis = sequential_estimate(traj, "mix", estimator="pdis", gamma=0.8, tail_value=fq.tail_value)
    assert abs(dr.value - full_truth) < 4 * dr.std_error
    # Bernoulli rewards dominate the variance here; the model still removes some of it
    assert dr.std_error < pdis.std_error


def test_fqe_features_match_tabular_on_one_hot(fqe_env):
    env, table = fqe_env
    traj = read_trajectories(table)
    pi = env.policy_table("mix")
    features = [f"x{k}" for k in range(env.n_states)]  # one-hot states
    by_features = fitted_q_evaluation(traj, lambda x: x @ pi, gamma=0.8, feature_columns=features)
    # without next_state, both leave the truncated last steps out of the regression
    tabular = fitted_q_evaluation(traj, pi, gamma=0.8, state_column="state")
    np.testing.assert_allclose(by_features.coef, tabular.coef, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(by_features.q_hat, tabular.q_hat, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(by_features.v_hat, tabular.v_hat, rtol=1e-8, atol=1e-10)
    assert by_features.tail_value is None and tabular.tail_value is None


def test_fqe_hand_two_steps():
    # one state, one action, gamma 0.5: episode (r=1, r=2, terminal) and (r=3, terminal)
    df = pd.DataFrame(
        {
            "episode_id": [0, 0, 1],
            "step": [0, 1, 0],
            "action": 0,
            "propensity": 1.0,
            "reward": [1.0, 2.0, 3.0],
            "done": [False, True, True],
            "state": 0,
        }
    )
    traj = read_trajectories(df)
    fq = fitted_q_evaluation(traj, [[1.0]], gamma=0.5, state_column="state", ridge=1e-12)
    # fixed point: Q = (1 + 0.5 Q + 2 + 3) / 3  ->  Q = 6 / 2.5
    assert fq.coef[0, 0] == pytest.approx(6 / 2.5)
    assert fq.value == pytest.approx(6 / 2.5)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({}, ValueError, r"exactly one of `state_column`"),
        ({"state_column": "state", "feature_columns": ["x0"]}, ValueError, r"exactly one of"),
        (
            {"feature_columns": ["x0"], "next_state_column": "next_state"},
            ValueError,
            r"applies to tabular FQE",
        ),
        (
            {"state_column": "state", "target_policy": [[0.5, 0.4]] * 4},
            PolicyError,
            r"must be a probability distribution.*first: state 0",
        ),
        (
            {"state_column": "state", "target_policy": [[1.0]] * 4},
            ValidationError,
            r"`action` ids must be < 1",
        ),
        ({"state_column": "nope"}, SchemaError, r"`state_column` names column 'nope'"),
        ({"state_column": "state", "ridge": 0.0}, ValueError, r"`ridge` must be a positive"),
        (
            {"feature_columns": ["x0"], "target_policy": [[0.5, 0.5]]},
            PolicyError,
            r"must be a function",
        ),
    ],
)
def test_fqe_bad_arguments(fqe_env, kwargs, error, match):
    env, table = fqe_env
    traj = read_trajectories(table)
    args = {"target_policy": env.policy_table("mix"), "gamma": 0.8, **kwargs}
    policy = args.pop("target_policy")
    with pytest.raises(error, match=match):
        fitted_q_evaluation(traj, policy, **args)


def test_fqe_warns_when_not_converged(fqe_env):
    env, table = fqe_env
    with pytest.warns(OPEWarning, match=r"did not converge in 2 iterations"):
        fq = fitted_q_evaluation(
            read_trajectories(table),
            env.policy_table("mix"),
            gamma=0.8,
            state_column="state",
            n_iterations=2,
        )
    assert not fq.converged and fq.n_iterations == 2


# ---------------------------------------------------------------------------------------------
# one moment kernel, one validation layer
# ---------------------------------------------------------------------------------------------
def test_trajectory_wise_estimators_are_ips_and_snips_over_episodes():
    """``wis`` is SNIPS and ``is`` is IPS with one row per episode (weight W, return G)."""
    import ope

    env = _mixed_env(n_states=3, n_actions=2, horizon=5, gamma=0.9, seed=3)
    traj = read_trajectories(env.sample(400, rng=4))
    tab = traj.table
    rho = tab.column("target__mix").to_numpy() / tab.column("propensity").to_numpy()
    starts = np.asarray(traj.episode_starts)
    lengths = np.diff(starts)
    episode = np.repeat(np.arange(lengths.size), lengths)
    steps = tab.column("step").to_numpy().astype(float)
    big_w = np.exp(np.bincount(episode, weights=np.log(rho)))  # rho > 0 in this environment
    ret = np.bincount(episode, weights=0.9**steps * tab.column("reward").to_numpy())
    scale = big_w.max()  # SNIPS is invariant to the scale of the weights; IPS is linear in it
    args = {
        "reward": ret,
        "logging_propensity": np.ones(ret.size),
        "target_propensity": big_w / scale,
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OverlapWarning)
        wis = sequential_estimate(traj, "mix", estimator="wis", gamma=0.9, tail_value=0.0)
        snips = ope.SNIPS().estimate(**args)
        is_ = sequential_estimate(traj, "mix", estimator="is", gamma=0.9, tail_value=0.0)
        ips = ope.IPS().estimate(**args)
    assert wis.value == pytest.approx(snips.value, rel=1e-10)
    assert wis.std_error == pytest.approx(snips.std_error, rel=1e-10)
    assert is_.value == pytest.approx(scale * ips.value, rel=1e-10)
    assert is_.std_error == pytest.approx(scale * ips.std_error, rel=1e-10)
    assert wis.ess == pytest.approx(ips.ess, rel=1e-10) and wis.n == ips.n == lengths.size


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"gamma": "0.5"}, r"`gamma` must be a number"),
        ({"gamma": -0.1}, r"`gamma` \(discount factor\) must be in \[0, 1\]"),
        ({"max_weight": float("inf")}, r"`max_weight` must be a positive finite number"),
        ({"reward_range": "01"}, r"`reward_range` must be a pair"),
        ({"confidence_level": 1.5}, r"`confidence_level` must be in \(0, 1\)"),
        ({"estimator": "dr"}, r"needs a model's values per step"),
    ],
)
def test_bad_arguments_raise_parameter_error(hand, kwargs, match):
    args = {"tail_value": 0.0, "gamma": GAMMA, **kwargs}
    with pytest.raises(ParameterError, match=match) as info:
        sequential_estimate(hand, "pi", **args)
    assert isinstance(info.value, ValueError) and isinstance(info.value, TypeError)


def test_fqe_bad_arguments_raise_parameter_error(hand):
    with pytest.raises(ParameterError, match=r"must be ope.Trajectories"):
        fitted_q_evaluation(HAND, [[1.0]], gamma=0.5, state_column="state")  # type: ignore
    with pytest.raises(ParameterError, match=r"`n_iterations` must be a positive integer"):
        fitted_q_evaluation(hand, [[1.0]], gamma=0.5, state_column="action", n_iterations=0)
    with pytest.raises(ParameterError, match=r"`gamma` \(discount factor\)"):
        fitted_q_evaluation(hand, [[1.0]], gamma=2.0, state_column="action")


def test_sequential_names_stay_importable():
    import ope
    import ope.sequential as seq

    assert ope.sequential_estimate is seq.sequential_estimate
    assert ope.fitted_q_evaluation is seq.fitted_q_evaluation and ope.FittedQ is seq.FittedQ
    assert set(seq.__all__) == {
        "SEQUENTIAL_ESTIMATORS",
        "MARGINALIZED",
        "episode_weights",
        "sequential_estimate",
        "evaluate_trajectories",
        "TrajectoryEvaluation",
        "fitted_q_evaluation",
        "FittedQ",
    }
    assert ope.evaluate_trajectories is seq.evaluate_trajectories
    assert seq.MAX_BOOTSTRAP_CELLS == 1 << 25 and seq.MIN_EPISODES == 2
    assert seq.FQE_TOL > 0 and seq.POLICY_SUM_TOL > 0 and seq.FQE_MAX_ITERATIONS >= 1


@pytest.mark.parametrize("estimator", ["wpdis", "wis"])
def test_a_tiny_clip_level_gives_the_self_normalized_value_not_an_overflow(estimator):
    # every weight clipped to the same level: the self-normalized value is the same whether
    # the level is 1e-9 or 5e-324 (where 1 / sum of weights would overflow unscaled)
    steps = pd.DataFrame(
        {
            "episode_id": [0, 0, 1, 1, 2, 2],
            "step": [0, 1] * 3,
            "action": [0, 1, 1, 0, 0, 0],
            "propensity": 0.5,
            "reward": [1.0, 0.0, 0.5, 1.0, 0.0, 1.0],
            "done": [False, True] * 3,
            "target__pi": 0.5,
        }
    )
    traj = read_trajectories(steps)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        small = sequential_estimate(traj, "pi", estimator=estimator, max_weight=1e-9)
        tiny = sequential_estimate(traj, "pi", estimator=estimator, max_weight=5e-324)
    assert math.isclose(tiny.value, small.value, rel_tol=1e-12)
    assert math.isclose(tiny.std_error, small.std_error, rel_tol=1e-9)
