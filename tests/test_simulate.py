"""Tests of ope.simulate: exact truth against Monte Carlo, schemas, propensities, support."""

from __future__ import annotations

import doctest
import importlib
import json
import math

import numpy as np
import pyarrow as pa
import pytest

from ope.exceptions import DataFileError, ParameterError, PolicyError, SchemaError
from ope.simulate import (
    ContextualBandit,
    PairedReplaySimulator,
    Recommendation,
    TabularMDP,
    load_sample,
)
from ope.simulate._common import cdf_table, draw_rows

#: Monte Carlo agreement: |estimate - truth| within this many standard errors
Z_TOL = 4.0


def col(table: pa.Table, name: str) -> np.ndarray:
    return table.column(name).to_numpy()


def assert_mc_close(values: np.ndarray, truth: float, *, z: float = Z_TOL) -> None:
    se = values.std(ddof=1) / math.sqrt(values.size)
    assert abs(values.mean() - truth) <= z * se + 1e-12, (values.mean(), truth, se)


def list_values(table: pa.Table, name: str, width: int) -> np.ndarray:
    arr = table.column(name).combine_chunks()
    assert np.all(arr.value_lengths().to_numpy() == width)
    return arr.flatten().to_numpy().reshape(-1, width)


# --------------------------------------------------------------------------- helpers
def test_draw_rows_never_draws_zero_probability_and_matches_frequencies():
    probs = np.array(
        [[0.0, 0.5, 0.0, 0.5, 0.0], [0.2, 0.0, 0.3, 0.5, 0.0], [0.0, 0.0, 0.0, 0.0, 1.0]]
    )
    cdf = cdf_table(probs)
    rows = np.repeat(np.arange(3), 40_000)
    draws = draw_rows(cdf, rows, np.random.default_rng(0))
    for r in range(3):
        freq = np.bincount(draws[rows == r], minlength=5) / 40_000
        assert np.all(freq[probs[r] == 0] == 0)
        np.testing.assert_allclose(freq, probs[r], atol=4 * np.sqrt(0.25 / 40_000))


# --------------------------------------------------------------------------- bandit
@pytest.fixture(scope="module")
def bandit() -> ContextualBandit:
    return ContextualBandit(n_actions=6, n_features=3, n_contexts=50, seed=3)


def test_bandit_schema_is_canonical(bandit):
    t = bandit.sample(500, rng=0, oracle=True, distributions=True)
    expected = {
        "event_id": pa.int64(),
        "action": pa.int64(),
        "propensity": pa.float64(),
        "reward": pa.float64(),
        "x0": pa.float64(),
        "x2": pa.float64(),
        "segment": pa.string(),
        "candidates": pa.list_(pa.int64()),
        "logging_distribution": pa.list_(pa.float64()),
        "target__optimal": pa.float64(),
        "target_dist__softmax": pa.list_(pa.float64()),
        "context_id": pa.int64(),
        "q_logged": pa.float64(),
        "q_target__uniform": pa.float64(),
    }
    for name, typ in expected.items():
        assert t.schema.field(name).type == typ, name
    assert t.column_names[:4] == ["event_id", "action", "propensity", "reward"]
    targets = [c[len("target__") :] for c in t.column_names if c.startswith("target__")]
    assert tuple(targets) == bandit.candidate_policies
    plain = bandit.sample(10, rng=0)
    assert not {"candidates", "context_id", "q_logged"} & set(plain.column_names)
    assert set(np.unique(col(t, "reward"))) <= {0.0, 1.0}


def test_bandit_propensities_are_the_drawing_probabilities(bandit):
    t = bandit.sample(2000, rng=1, oracle=True, distributions=True)
    ctx, action = col(t, "context_id"), col(t, "action")
    logging = bandit.policy_table("logging")
    np.testing.assert_array_equal(col(t, "propensity"), logging[ctx, action])
    dist = list_values(t, "logging_distribution", bandit.n_actions)
    np.testing.assert_array_equal(dist[np.arange(t.num_rows), action], col(t, "propensity"))
    np.testing.assert_allclose(dist.sum(axis=1), 1.0, atol=1e-12)
    for name in bandit.candidate_policies:
        np.testing.assert_array_equal(
            col(t, f"target__{name}"), bandit.policy_table(name)[ctx, action]
        )
    np.testing.assert_array_equal(col(t, "q_logged"), bandit.expected_reward(ctx, action))
    # the action frequencies follow the logging table (pooled over contexts)
    t = bandit.sample(100_000, rng=2, oracle=True)
    ctx, action = col(t, "context_id"), col(t, "action")
    expected = bandit.context_probabilities @ logging
    freq = np.bincount(action, minlength=bandit.n_actions) / action.size
    np.testing.assert_allclose(freq, expected, atol=4 * np.sqrt(0.25 / action.size))


def test_bandit_true_value_is_the_hand_written_finite_sum(bandit):
    p, q = bandit.context_probabilities, bandit.reward_means
    for name in ("logging", *bandit.candidate_policies):
        pi = bandit.policy_table(name)
        by_hand = 0.0
        for m in range(bandit.n_contexts):
            for a in range(bandit.n_actions):
                by_hand += p[m] * pi[m, a] * q[m, a]
        assert bandit.true_value(name) == pytest.approx(by_hand, rel=1e-12)
        by_seg = bandit.true_value_by_segment(name)
        seg_mass = np.bincount(bandit.context_segments, weights=p)
        assert sum(seg_mass[k] * v for k, v in enumerate(by_seg.values())) == pytest.approx(
            bandit.true_value(name), rel=1e-12
        )
    assert bandit.true_value(np.full((50, 6), 1 / 6)) == pytest.approx(
        float(p @ q.mean(axis=1)), rel=1e-12
    )
    assert bandit.true_value("optimal") == pytest.approx(float(p @ q.max(axis=1)), rel=1e-12)


@pytest.mark.parametrize(
    "name", ["logging", "uniform", "optimal", "epsilon_greedy", "softmax", "mixture"]
)
def test_bandit_truth_agrees_with_on_policy_monte_carlo(bandit, name):
    t = bandit.sample(100_000, rng=10, logging_policy=name, oracle=True)
    assert_mc_close(col(t, "reward"), bandit.true_value(name))
    np.testing.assert_array_equal(
        col(t, "propensity"), bandit.policy_table(name)[col(t, "context_id"), col(t, "action")]
    )


def test_bandit_ips_and_oracle_dm_are_unbiased_under_full_support(bandit):
    t = bandit.sample(100_000, rng=11)
    t_oracle = bandit.sample(100_000, rng=11, oracle=True)
    for name in bandit.candidate_policies:
        w = col(t, f"target__{name}") / col(t, "propensity")
        assert_mc_close(w * col(t, "reward"), bandit.true_value(name))
        assert_mc_close(col(t_oracle, f"q_target__{name}"), bandit.true_value(name))


def test_bandit_gaussian_rewards_have_the_stated_means():
    env = ContextualBandit(n_actions=4, n_features=2, reward="gaussian", reward_noise=0.3, seed=1)
    assert env.reward_range is None
    t = env.sample(50_000, rng=0, oracle=True)
    residual = col(t, "reward") - col(t, "q_logged")
    assert abs(residual.mean()) < Z_TOL * 0.3 / math.sqrt(t.num_rows)
    assert residual.std() == pytest.approx(0.3, rel=0.02)
    assert_mc_close(
        col(env.sample(50_000, rng=1, logging_policy="softmax"), "reward"),
        env.true_value("softmax"),
    )


def test_bandit_deficient_support():
    env = ContextualBandit(n_actions=8, n_features=3, unsupported_actions=3, seed=5)
    logging = env.policy_table("logging")
    in_gap = env.context_segments == 0
    zeros = (logging == 0).sum(axis=1)
    assert np.all(zeros[in_gap] == 3) and np.all(zeros[~in_gap] == 0)
    np.testing.assert_array_equal(env.logging_support, logging > 0)
    # the unsupported actions are the three best ones of each affected context
    best3 = np.argsort(-env.reward_means, axis=1)[:, :3]
    assert np.all(logging[np.flatnonzero(in_gap)[:, None], best3[in_gap]] == 0)
    t = env.sample(50_000, rng=0, oracle=True)
    ctx, action = col(t, "context_id"), col(t, "action")
    assert np.all(logging[ctx, action] > 0)
    assert np.all(col(t, "propensity") > 0)
    # the optimal policy sits entirely on unsupported actions in segment_0
    p_gap = env.context_probabilities[in_gap].sum()
    assert env.unsupported_mass("optimal") == pytest.approx(p_gap, rel=1e-12)
    assert env.unsupported_mass("logging") == 0.0
    assert env.supported_value("optimal") < env.true_value("optimal")
    # IPS converges to the supported part, not to the truth
    w = col(t, "target__optimal") / col(t, "propensity")
    assert_mc_close(w * col(t, "reward"), env.supported_value("optimal"))
    gap = env.true_value("optimal") - env.supported_value("optimal")
    se = (w * col(t, "reward")).std() / math.sqrt(t.num_rows)
    assert gap > 10 * se


def test_bandit_noise_features_and_custom_policies():
    table = np.zeros((30, 4))
    table[:, 2] = 1.0
    env = ContextualBandit(
        n_actions=4,
        n_features=2,
        n_contexts=30,
        n_noise_features=2,
        policies={"always_two": table},
        seed=2,
    )
    t = env.sample(1000, rng=0, oracle=True)
    assert {"x0", "x1", "x2", "x3"} <= set(t.column_names)
    np.testing.assert_array_equal(
        np.column_stack([col(t, "x0"), col(t, "x1")]), env.context_features[col(t, "context_id")]
    )
    assert "always_two" in env.candidate_policies
    np.testing.assert_array_equal(col(t, "target__always_two"), (col(t, "action") == 2) * 1.0)
    assert env.true_value("always_two") == pytest.approx(
        float(env.context_probabilities @ env.reward_means[:, 2]), rel=1e-12
    )


@pytest.mark.parametrize(
    ("policy", "match"),
    [
        ("nope", r"unknown policy 'nope'; known policies: .*logging"),
        (np.full((50, 5), 0.2), r"shape \(50, 6\) \(contexts x actions\); got shape \(50, 5\)"),
        (np.full((50, 6), 0.2), r"must sum to 1; 50 contexts do not \(first at row 0"),
        (np.where(np.eye(50, 6) > 0, 1.5, -0.1), r"probabilities in \[0, 1\]; 50 contexts"),
    ],
)
def test_bandit_bad_policies_raise_policy_error(bandit, policy, match):
    with pytest.raises(PolicyError, match=match):
        bandit.true_value(policy)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"n_actions": 1}, ParameterError, "`n_actions` must be a whole number >= 2; got 1"),
        (
            {"unsupported_actions": 10},
            ParameterError,
            r"`unsupported_actions` must be a whole number >= 0 and <= 9",
        ),
        ({"reward": "poisson"}, ParameterError, "`reward` must be one of 'bernoulli', 'gaussian'"),
        ({"logging_temperature": 0.0}, ParameterError, r"logging_temperature must be in \(0.0"),
        ({"n_features": 2.5}, ParameterError, "`n_features` must be a positive integer"),
        ({"policies": {"optimal": np.full((200, 10), 0.1)}}, PolicyError, "already used"),
        ({"policies": {"bad name": np.full((200, 10), 0.1)}}, PolicyError, "identifiers"),
    ],
)
def test_bandit_bad_settings(kwargs, error, match):
    with pytest.raises(error, match=match):
        ContextualBandit(**kwargs)


def test_bandit_sampling_is_reproducible(bandit):
    assert bandit.sample(300, rng=5, oracle=True).equals(bandit.sample(300, rng=5, oracle=True))
    assert not bandit.sample(300, rng=5).equals(bandit.sample(300, rng=6))
    assert ContextualBandit(seed=4).true_value("softmax") == ContextualBandit(seed=4).true_value(
        "softmax"
    )
    with pytest.raises(TypeError, match="rng must be an int seed"):
        bandit.sample(10, rng="zero")
    with pytest.raises(ParameterError, match="`n` must be a positive integer; got 0"):
        bandit.sample(0)
    with pytest.raises(ValueError, match=r"actions must lie in \[0, 5\]; 1 entries"):
        bandit.expected_reward(np.array([0, 1]), np.array([0, 6]))


# --------------------------------------------------------------------------- recommendation
@pytest.fixture(scope="module")
def reco() -> Recommendation:
    return Recommendation(
        n_items=2000,
        n_candidates=12,
        n_requests=400,
        logging_top_k=9,
        restricted_segments=["new", "power"],
        seed=1,
    )


def test_recommendation_schema_and_candidates(reco):
    L = reco.n_candidates
    t = reco.sample(3000, rng=0, oracle=True, distributions=True)
    for name, typ in {
        "event_id": pa.int64(),
        "action": pa.int64(),
        "propensity": pa.float64(),
        "reward": pa.float64(),
        "x0": pa.float64(),
        "segment": pa.string(),
        "candidates": pa.list_(pa.int64()),
        "logging_distribution": pa.list_(pa.float64()),
        "target__long_tail": pa.float64(),
        "target_dist__greedy": pa.list_(pa.float64()),
    }.items():
        assert t.schema.field(name).type == typ, name
    cands = list_values(t, "candidates", L)
    dist = list_values(t, "logging_distribution", L)
    action = col(t, "action")
    pos = np.argmax(cands == action[:, None], axis=1)
    assert np.all(cands[np.arange(t.num_rows), pos] == action)  # logged item is a candidate
    np.testing.assert_array_equal(dist[np.arange(t.num_rows), pos], col(t, "propensity"))
    np.testing.assert_allclose(dist.sum(axis=1), 1.0, atol=1e-12)
    for name in reco.candidate_policies:
        target = list_values(t, f"target_dist__{name}", L)
        np.testing.assert_array_equal(target[np.arange(t.num_rows), pos], col(t, f"target__{name}"))
    # candidate lists hold distinct catalog items
    sets = np.sort(reco.candidate_sets, axis=1)
    assert np.all(np.diff(sets, axis=1) > 0) and sets.max() < reco.n_items
    np.testing.assert_array_equal(
        col(t, "q_logged"), reco.expected_reward(col(t, "context_id"), action)
    )
    assert set(np.unique(col(t, "reward"))) <= {0.0, 1.0}


def test_recommendation_popularity_is_long_tailed():
    env = Recommendation(n_items=3000, n_candidates=10, n_requests=500, zipf_exponent=1.2, seed=0)
    pop = np.sort(env.item_popularity)[::-1]
    assert pop.sum() == pytest.approx(1.0)
    assert pop[0] / pop[9] == pytest.approx(10**1.2, rel=1e-9)
    # candidate draws follow popularity: the top 1% of items fill far more than 1% of slots
    top = np.argsort(-env.item_popularity)[:30]
    assert np.isin(env.candidate_sets, top).mean() > 0.1


def test_recommendation_deficient_support_is_where_stated(reco):
    logging = reco.policy_table("logging")
    restricted = np.isin(reco.context_segments, [0, 4])  # "new", "power"
    zeros = (logging == 0).sum(axis=1)
    assert np.all(zeros[restricted] == 3) and np.all(zeros[~restricted] == 0)
    np.testing.assert_array_equal(reco.logging_support, logging > 0)
    t = reco.sample(20_000, rng=3, oracle=True)
    assert np.all(col(t, "propensity") > 0)
    dist = list_values(t, "logging_distribution", reco.n_candidates)
    in_gap = np.isin(col(t, "segment"), ["new", "power"])
    assert np.all((dist == 0).sum(axis=1)[in_gap] == 3)
    assert np.all((dist == 0).sum(axis=1)[~in_gap] == 0)
    assert reco.unsupported_mass("long_tail") > reco.unsupported_mass("popular") == 0.0


@pytest.mark.parametrize(
    "name", ["logging", "popular", "personalized", "greedy", "long_tail", "uniform"]
)
def test_recommendation_truth_agrees_with_on_policy_monte_carlo(reco, name):
    t = reco.sample(100_000, rng=20, logging_policy=name)
    assert_mc_close(col(t, "reward"), reco.true_value(name))


def test_recommendation_ips_converges_to_supported_value(reco):
    t = reco.sample(100_000, rng=21, oracle=True)
    for name in reco.candidate_policies:
        w = col(t, f"target__{name}") / col(t, "propensity")
        assert_mc_close(w * col(t, "reward"), reco.supported_value(name))
        assert_mc_close(col(t, f"q_target__{name}"), reco.true_value(name))
    full = Recommendation(n_items=2000, n_candidates=12, n_requests=400, seed=1)
    for name in full.candidate_policies:
        assert full.supported_value(name) == full.true_value(name)
        assert full.unsupported_mass(name) == 0.0


def test_recommendation_by_segment_and_reproducibility(reco):
    p = reco.context_probabilities
    for name in ("logging", "greedy"):
        by_seg = reco.true_value_by_segment(name)
        mass = {s: p[reco.context_segments == k].sum() for k, s in enumerate(reco.segments)}
        assert sum(mass[s] * v for s, v in by_seg.items()) == pytest.approx(reco.true_value(name))
    assert reco.sample(200, rng=1).equals(reco.sample(200, rng=1))
    assert not reco.sample(200, rng=1).equals(reco.sample(200, rng=2))
    with pytest.raises(ParameterError, match=r"restricted_segments must be a list of labels"):
        Recommendation(n_items=100, n_candidates=5, n_requests=10, restricted_segments=["vip"])
    with pytest.raises(
        ParameterError, match=r"`n_candidates` must be a whole number >= 2 and <= 100"
    ):
        Recommendation(n_items=100, n_candidates=500)


# --------------------------------------------------------------------------- MDP
@pytest.fixture(scope="module")
def mdp() -> TabularMDP:
    return TabularMDP(n_states=6, n_actions=3, horizon=15, gamma=0.9, seed=2)


def returns(t: pa.Table, gamma: float) -> np.ndarray:
    ep, step, r = col(t, "episode_id"), col(t, "step"), col(t, "reward")
    return np.bincount(ep, weights=r * gamma**step)


def test_mdp_schema_and_episode_structure(mdp):
    t = mdp.sample(4000, rng=0, oracle=True)
    for name, typ in {
        "episode_id": pa.int64(),
        "step": pa.int64(),
        "state": pa.int64(),
        "action": pa.int64(),
        "propensity": pa.float64(),
        "reward": pa.float64(),
        "done": pa.bool_(),
        "next_state": pa.int64(),
        "x0": pa.float64(),
        "target__greedy": pa.float64(),
        "q_target__softmax": pa.float64(),
        "v_target__softmax": pa.float64(),
    }.items():
        assert t.schema.field(name).type == typ, name
    ep, step, done = col(t, "episode_id"), col(t, "step"), col(t, "done")
    assert np.all(np.diff(ep) >= 0)
    starts = np.r_[True, np.diff(ep) != 0]
    assert np.all(step[starts] == 0)
    assert np.all(step[~starts] == step[np.flatnonzero(~starts) - 1] + 1)  # contiguous
    last = np.r_[np.diff(ep) != 0, True]
    assert not done[~last].any()  # done only on an episode's last row
    terminated = last & done
    truncated = last & ~done
    assert terminated.sum() > 500 and truncated.sum() > 100  # both endings occur
    assert np.all(step[truncated] == mdp.horizon - 1)
    assert np.all(col(t, "next_state")[terminated] == -1)
    # the next row's state is the previous row's next_state
    cont = ~last[:-1]
    np.testing.assert_array_equal(col(t, "state")[1:][cont], col(t, "next_state")[:-1][cont])
    # one-hot features by default
    top = mdp.n_states - 1
    np.testing.assert_array_equal(col(t, f"x{top}"), col(t, "state") == top)
    np.testing.assert_array_equal(
        col(t, "propensity"), mdp.policy_table("logging")[col(t, "state"), col(t, "action")]
    )


@pytest.mark.parametrize("name", ["logging", "uniform", "greedy", "epsilon_greedy", "softmax"])
def test_mdp_dp_value_equals_monte_carlo_rollouts(mdp, name):
    t = mdp.sample(40_000, rng=30, logging_policy=name)
    assert_mc_close(returns(t, mdp.gamma), mdp.true_value(name))


def test_mdp_per_decision_importance_sampling_is_unbiased(mdp):
    t = mdp.sample(40_000, rng=31)
    ep, step, r = col(t, "episode_id"), col(t, "step"), col(t, "reward")
    for name in ("uniform", "softmax"):
        log_rho = np.log(col(t, f"target__{name}") / col(t, "propensity"))
        starts = np.r_[0, np.flatnonzero(np.diff(ep)) + 1]
        cum = np.cumsum(log_rho)
        cum -= np.repeat(np.r_[0.0, cum[starts[1:] - 1]], np.diff(np.r_[starts, ep.size]))
        pdis = np.bincount(ep, weights=np.exp(cum) * mdp.gamma**step * r)
        assert_mc_close(pdis, mdp.true_value(name))


def test_mdp_values_by_hand_one_state():
    env = TabularMDP(
        n_states=1, n_actions=2, horizon=7, gamma=0.8, termination_probability=0.3, seed=4
    )
    pi = np.array([[0.25, 0.75]])
    r_pi = float(pi[0] @ env.reward_means[0])
    c = env.gamma * float(pi[0] @ (1.0 - env.transitions[0, :, 1]))
    assert env.true_value(pi) == pytest.approx(r_pi * (1 - c**7) / (1 - c), rel=1e-12)
    assert env.true_value(pi, horizon=3) == pytest.approx(r_pi * (1 + c + c**2), rel=1e-12)
    assert env.true_value(pi, horizon=math.inf) == pytest.approx(r_pi / (1 - c), rel=1e-12)


def test_mdp_q_functions_satisfy_bellman_equations(mdp):
    S = mdp.n_states
    p_next = mdp.transitions[:, :, :S]
    for name in ("softmax", "greedy"):
        pi = mdp.policy_table(name)
        q = mdp.q_function(name)
        assert q.shape == (mdp.horizon, S, mdp.n_actions)
        v = np.einsum("sa,tsa->ts", pi, q)
        np.testing.assert_allclose(q[-1], mdp.reward_means)
        for t in range(mdp.horizon - 1):
            np.testing.assert_allclose(
                q[t], mdp.reward_means + mdp.gamma * p_next @ v[t + 1], rtol=1e-12
            )
        assert float(mdp.initial_distribution @ v[0]) == pytest.approx(mdp.true_value(name))
        qd = mdp.discounted_q_function(name)
        vd = np.einsum("sa,sa->s", pi, qd)
        np.testing.assert_allclose(qd, mdp.reward_means + mdp.gamma * p_next @ vd)
        # a long truncation horizon converges to the untruncated value
        assert mdp.true_value(name, horizon=600) == pytest.approx(
            mdp.true_value(name, horizon=math.inf), abs=1e-10
        )
    t = mdp.sample(3000, rng=1, oracle=True)
    first = col(t, "step") == 0
    assert_mc_close(col(t, "v_target__softmax")[first], mdp.true_value("softmax"))
    np.testing.assert_allclose(
        col(t, "q_target__greedy"),
        mdp.q_function("greedy")[col(t, "step"), col(t, "state"), col(t, "action")],
    )


def test_mdp_features_settings_and_errors():
    env = TabularMDP(n_states=5, n_features=3, seed=0)
    t = env.sample(200, rng=0)
    feats = np.column_stack([col(t, f"x{k}") for k in range(3)])
    np.testing.assert_array_equal(feats, env.state_features[col(t, "state")])
    assert "x3" not in t.column_names
    never_ends = TabularMDP(n_states=3, gamma=1.0, termination_probability=0.0, seed=0)
    assert never_ends.true_value("uniform") > 0  # finite horizon: fine
    with pytest.raises(ValueError, match="untruncated value is infinite"):
        never_ends.true_value("uniform", horizon=math.inf)
    with pytest.raises(ValueError, match=r"termination_probability must be in \[0.0, 0.5\]"):
        TabularMDP(termination_probability=0.7)
    assert env.sample(100, rng=9).equals(env.sample(100, rng=9))
    with pytest.raises(PolicyError, match=r"shape \(5, 3\) \(states x actions\)"):
        env.true_value(np.ones((3, 5)) / 5)


# --------------------------------------------------------------------------- paired replays
def test_paired_schema_and_pairing():
    env = PairedReplaySimulator(n_replicates=2, seed=1)
    t = env.sample(300, rng=0, oracle=True)
    assert t.num_rows == 300 * 2 * 2
    for name, typ in {
        "pair_id": pa.int64(),
        "arm": pa.string(),
        "replicate": pa.int64(),
        "outcome": pa.float64(),
        "item_id": pa.int64(),
        "task_id": pa.int64(),
        "tokens": pa.int64(),
    }.items():
        assert t.schema.field(name).type == typ, name
    df = t.to_pandas()
    per_pair = df.groupby("pair_id").agg(
        arms=("arm", "nunique"), n_items=("item_id", "nunique"), n=("arm", "size")
    )
    assert (per_pair.arms == 2).all() and (per_pair.n_items == 1).all() and (per_pair.n == 4).all()
    assert sorted(df.arm.unique()) == ["no_memory", "with_memory"]
    treated = (df.arm == "with_memory").to_numpy()
    np.testing.assert_allclose(
        df.expected_outcome,
        env.expected_outcome(df.task_id.to_numpy(), df.item_id.to_numpy(), treated),
    )


def test_paired_true_effects_by_hand_and_against_monte_carlo():
    env = PairedReplaySimulator(n_tasks=4, n_items=5, n_replicates=3, seed=2)
    pk, rho, delta = env.task_probabilities, env.item_probabilities, env.item_logit_effects
    base = env.expected_outcome(np.arange(4), np.zeros(4, dtype=int), np.zeros(4, dtype=bool))
    ate = 0.0
    for k in range(4):
        for j in range(5):
            p1 = 1 / (1 + math.exp(-(math.log(base[k] / (1 - base[k])) + delta[j])))
            ate += pk[k] * rho[j] * (p1 - base[k])
    assert env.true_effect() == pytest.approx(ate, rel=1e-12)
    assert env.true_effect() == pytest.approx(
        env.true_value("with_memory") - env.true_value("no_memory"), rel=1e-12
    )
    assert env.true_effect(item=3) == pytest.approx(env.true_item_effects()[3])
    df = env.sample(40_000, rng=5).to_pandas()
    sign = np.where(df.arm == "with_memory", 1.0, -1.0) / env.n_replicates
    for outcome in ("outcome", "tokens"):
        diff = np.bincount(df.pair_id, weights=sign * df[outcome].to_numpy())
        assert_mc_close(diff, env.true_effect(outcome=outcome))
    assert_mc_close(df.outcome[df.arm == "no_memory"].to_numpy(), env.true_value("no_memory"), z=6)
    with pytest.raises(
        ParameterError, match="`arm` must be one of 'with_memory', 'no_memory'; got 'memory'"
    ):
        env.true_value("memory")
    with pytest.raises(ValueError, match="arms must be two distinct"):
        PairedReplaySimulator(arms=("a", "a"))
    assert env.sample(20, rng=3).equals(env.sample(20, rng=3))


# --------------------------------------------------------------------------- bundled sample
def test_bundled_sample_matches_its_truth():
    sample = load_sample()
    t, truth = sample.table, sample.truth
    assert sample.path.stat().st_size < 5e6
    assert t.num_rows == truth["n_events"] >= 50_000
    targets = sorted(c[len("target__") :] for c in t.column_names if c.startswith("target__"))
    assert targets == sorted(truth["policies"]) and 3 <= len(targets) <= 5
    assert {"candidates", "logging_distribution", "segment", "propensity"} <= set(t.column_names)
    env = Recommendation(**truth["settings"])
    # the stored truth was computed on another machine: equal to rel 1e-12, not bit for bit
    # (BLAS kernels and SIMD paths round sums differently in the last ulp)
    assert truth["logging"] == pytest.approx(env.true_value("logging"), rel=1e-12)
    for name, value in truth["policies"].items():
        assert value == pytest.approx(env.true_value(name), rel=1e-12)
        by_segment = env.true_value_by_segment(name)
        assert set(truth["by_segment"][name]) == set(by_segment)
        for seg, v in by_segment.items():
            assert truth["by_segment"][name][seg] == pytest.approx(v, rel=1e-12)
    assert_mc_close(col(t, "reward"), truth["logging"])
    for name in ("popular", "personalized"):
        w = col(t, f"target__{name}") / col(t, "propensity")
        assert_mc_close(w * col(t, "reward"), truth["supported_value"][name])
    dist = list_values(t, "logging_distribution", env.n_candidates)
    cands = list_values(t, "candidates", env.n_candidates)
    pos = np.argmax(cands == col(t, "action")[:, None], axis=1)
    np.testing.assert_array_equal(dist[np.arange(t.num_rows), pos], col(t, "propensity"))
    json.dumps(truth)  # plain JSON types only


def test_load_sample_reports_a_missing_file(tmp_path, monkeypatch):
    sample_module = importlib.import_module("ope.simulate._sample")
    monkeypatch.setattr(sample_module, "_datasets_dir", lambda: tmp_path)
    missing = r"sample_recommendation.parquet is missing.*make_sample"
    with pytest.raises(DataFileError, match=missing):
        load_sample()
    (tmp_path / "sample_recommendation.parquet").write_bytes(b"not parquet")
    (tmp_path / "sample_recommendation.truth.json").write_text("{}")
    with pytest.raises(DataFileError, match="could not read the bundled sample"):
        load_sample()


def test_load_sample_column_selection():
    sample = load_sample(columns=["reward", "segment"])
    assert sample.table.column_names == ["reward", "segment"]
    with pytest.raises(SchemaError, match=r"no column\(s\) \['rewards'\]; it has: event_id"):
        load_sample(columns=["reward", "rewards"])


# --------------------------------------------------------------------------- docstrings
@pytest.mark.parametrize(
    "module",
    [
        "ope.simulate.bandit",
        "ope.simulate.recommendation",
        "ope.simulate.mdp",
        "ope.simulate.paired",
        "ope.simulate._sample",
    ],
)
def test_docstring_examples_run(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


# --------------------------------------------------------------------------- slow validation
@pytest.mark.slow
def test_truth_against_very_large_on_policy_samples():
    """Millions of draws: the exact values hold to a fraction of a percent of a click."""
    bandit = ContextualBandit(unsupported_actions=2, seed=11)
    for name in ("logging", "softmax", "optimal"):
        rewards = np.concatenate(
            [
                col(bandit.sample(500_000, rng=100 + k, logging_policy=name), "reward")
                for k in range(4)
            ]
        )
        assert_mc_close(rewards, bandit.true_value(name))
    reco = Recommendation(logging_top_k=15, restricted_segments=["new"], seed=12)
    for name in ("logging", "personalized", "long_tail"):
        rewards = np.concatenate(
            [
                col(reco.sample(500_000, rng=200 + k, logging_policy=name), "reward")
                for k in range(4)
            ]
        )
        assert_mc_close(rewards, reco.true_value(name))
    mdp = TabularMDP(n_states=10, n_actions=4, horizon=30, gamma=0.97, seed=13)
    for name in ("logging", "epsilon_greedy"):
        ret = np.concatenate(
            [
                returns(mdp.sample(200_000, rng=300 + k, logging_policy=name), mdp.gamma)
                for k in range(2)
            ]
        )
        assert_mc_close(ret, mdp.true_value(name))


@pytest.mark.slow
def test_truth_z_scores_over_replications_are_standard_normal():
    """Over 400 independent samples the standardized errors have mean 0 and 5% tails."""
    env = ContextualBandit(n_actions=5, n_features=3, seed=21)
    truth = env.true_value("epsilon_greedy")
    rng = np.random.default_rng(0)
    z = np.empty(400)
    for k in range(z.size):  # replications, not rows
        r = col(env.sample(2_000, rng=rng, logging_policy="epsilon_greedy"), "reward")
        z[k] = (r.mean() - truth) / (r.std(ddof=1) / math.sqrt(r.size))
    assert abs(z.mean()) < 4 / math.sqrt(z.size)
    assert abs((np.abs(z) > 1.96).mean() - 0.05) < 4 * math.sqrt(0.05 * 0.95 / z.size)
