"""Tests of ope.simulate.CatalogBandit: schema, probabilities, exact truth against Monte Carlo
and IPS, the embedding structure of the reward, weights of the cluster shift, validation."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pyarrow as pa
import pytest

import ope
from ope.exceptions import ParameterError, PolicyError
from ope.simulate import CatalogBandit

#: Monte Carlo agreement: |estimate - truth| within this many standard errors
Z_TOL = 4.0

SMALL = dict(
    n_items=600,
    n_candidates=12,
    n_requests=40,
    n_features=3,
    n_embedding_dims=2,
    n_categories=4,
    n_candidate_clusters=4,
)


def col(table: pa.Table, name: str) -> np.ndarray:
    return table.column(name).to_numpy()


def list_values(table: pa.Table, name: str, width: int) -> np.ndarray:
    arr = table.column(name).combine_chunks()
    assert np.all(arr.value_lengths().to_numpy() == width)
    return arr.flatten().to_numpy().reshape(-1, width)


def assert_mc_close(values: np.ndarray, truth: float, *, z: float = Z_TOL) -> None:
    se = values.std(ddof=1) / math.sqrt(values.size)
    assert abs(values.mean() - truth) <= z * se, (values.mean(), truth, se)


def cluster_sums(env: CatalogBandit, table: np.ndarray) -> np.ndarray:
    """Sum of a (requests, candidates) table over the candidates of each (request, cluster),
    on a key per request and cluster."""
    M = env.n_requests
    keys = (np.arange(M)[:, None] * env.n_clusters + env.candidate_clusters).ravel()
    _, group = np.unique(keys, return_inverse=True)
    return np.bincount(group, weights=table.ravel())


@pytest.fixture(scope="module")
def env() -> CatalogBandit:
    return CatalogBandit(**SMALL, direct_effect=0.5, seed=1)


@pytest.fixture(scope="module")
def logs(env: CatalogBandit) -> pa.Table:
    return env.sample(40_000, rng=0, oracle=True)


# --------------------------------------------------------------------------- schema
def test_logs_validate_and_carry_the_documented_columns(env, logs):
    read = ope.read_logs(logs.drop_columns(["context_id", "q_logged"]))
    assert read.report.rows_used == logs.num_rows and not read.report.rejected
    names = logs.column_names
    assert names[:4] == ["event_id", "action", "propensity", "reward"]
    assert [f"x{k}" for k in range(env.n_features)] == names[4 : 4 + env.n_features]
    assert logs.schema.field("candidates").type == pa.list_(pa.int64())
    assert logs.schema.field("logging_distribution").type == pa.list_(pa.float64())
    for name in env.candidate_policies:
        assert f"target__{name}" in names
        assert logs.schema.field(f"target_dist__{name}").type == pa.list_(pa.float64())
    assert "e0" not in names  # deterministic embeddings come from action_features()


def test_action_features_join_the_logs(env):
    features = env.action_features()
    assert features.column_names == ["action", "cluster", "e0", "e1"]
    assert features.num_rows == env.n_items
    e = np.stack([col(features, "e0"), col(features, "e1")], axis=1)
    # the cluster is the joint embedding's index
    np.testing.assert_array_equal(col(features, "cluster"), e[:, 0] + e[:, 1] * env.n_categories)
    np.testing.assert_array_equal(col(features, "cluster"), env.item_clusters)
    # every cluster holds n_items / n_clusters items, give or take one
    sizes = np.bincount(col(features, "cluster"), minlength=env.n_clusters)
    assert sizes.max() - sizes.min() <= 1
    read = ope.read_logs(env.sample(200, rng=3)).with_action_features(features)
    assert read.action_features.num_rows == env.n_items


def test_probabilities_are_aligned_with_the_candidates(env, logs):
    L = env.n_candidates
    cands = list_values(logs, "candidates", L)
    dist = list_values(logs, "logging_distribution", L)
    ctx = col(logs, "context_id")
    np.testing.assert_allclose(dist.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_array_equal(cands, env.candidate_sets[ctx])
    assert np.all(np.diff(np.sort(cands, axis=1), axis=1) > 0)  # distinct items
    at = np.argmax(cands == col(logs, "action")[:, None], axis=1)
    assert np.all(cands[np.arange(cands.shape[0]), at] == col(logs, "action"))
    np.testing.assert_array_equal(col(logs, "propensity"), dist[np.arange(dist.shape[0]), at])
    for name in env.candidate_policies:
        target = list_values(logs, f"target_dist__{name}", L)
        np.testing.assert_allclose(target.sum(axis=1), 1.0, atol=1e-12)
        np.testing.assert_array_equal(
            col(logs, f"target__{name}"), target[np.arange(target.shape[0]), at]
        )


def test_each_candidate_list_spans_the_stated_number_of_clusters(env):
    clusters = env.candidate_clusters
    assert all(len(set(row)) == env.n_candidate_clusters for row in clusters.tolist())
    np.testing.assert_array_equal(clusters, env.item_clusters[env.candidate_sets])


# --------------------------------------------------------------------------- exact truth
def test_true_value_of_the_logger_matches_the_mean_reward(env, logs):
    assert_mc_close(col(logs, "reward"), env.true_value("logging"))
    # and the oracle's mean of each logged action is the model's
    np.testing.assert_allclose(
        col(logs, "q_logged"), env.expected_reward(col(logs, "context_id"), col(logs, "action"))
    )


@pytest.mark.parametrize("name", ["greedy", "cluster_shift", "uniform"])
def test_true_value_of_each_candidate_matches_on_policy_rewards(env, name):
    on_policy = env.sample(30_000, rng=11, logging_policy=name)
    assert_mc_close(col(on_policy, "reward"), env.true_value(name))


def test_ips_on_sampled_logs_agrees_with_the_exact_value(env, logs):
    read = ope.read_logs(logs.drop_columns(["context_id", "q_logged"]))
    result = ope.evaluate(read, estimators=("ips",))
    for name in ("uniform", "cluster_shift"):
        est = result[(name, "ips")]
        # IPS is unbiased: within four standard errors (about 1 in 16,000 by chance)
        assert abs(est.value - env.true_value(name)) <= Z_TOL * est.std_error, name


def test_true_value_is_the_finite_sum_over_the_candidates(env):
    for name in ("logging", *env.candidate_policies):
        pi = env.policy_table(name)
        by_hand = sum(
            env.context_probabilities[m] * float(pi[m] @ env.reward_means[m])
            for m in range(env.n_requests)
        )
        assert env.true_value(name) == pytest.approx(by_hand, abs=1e-12)


# --------------------------------------------------------------------------- the reward model
def test_without_direct_effect_the_mean_depends_on_the_item_only_through_its_cluster():
    flat = CatalogBandit(**SMALL, direct_effect=0.0, seed=1)
    q = flat.reward_means
    keys = (np.arange(flat.n_requests)[:, None] * flat.n_clusters + flat.candidate_clusters).ravel()
    _, group = np.unique(keys, return_inverse=True)
    low = np.full(group.max() + 1, np.inf)
    high = np.full(group.max() + 1, -np.inf)
    np.minimum.at(low, group, q.ravel())
    np.maximum.at(high, group, q.ravel())
    assert np.all(np.bincount(group) >= 2)  # every cluster has several candidates
    np.testing.assert_allclose(high, low, atol=1e-15)

    shifted = CatalogBandit(**SMALL, direct_effect=0.5, seed=1)
    np.minimum.at(low, group, shifted.reward_means.ravel())
    np.maximum.at(high, group, shifted.reward_means.ravel())
    assert np.all(high - low > 1e-6)
    # same catalog, same logger's taste: only the item-level term differs
    np.testing.assert_array_equal(shifted.candidate_sets, flat.candidate_sets)


def test_the_item_effect_sums_to_zero_over_each_cluster_of_the_catalog():
    kwargs = dict(SMALL, n_requests=5)
    flat = CatalogBandit(**kwargs, direct_effect=0.0, seed=2)
    shifted = CatalogBandit(**kwargs, direct_effect=1.0, seed=2)
    items = np.arange(flat.n_items)
    for m in range(flat.n_requests):
        ctx = np.full(items.size, m)
        h = shifted.expected_reward(ctx, items) - flat.expected_reward(ctx, items)
        sums = np.bincount(flat.item_clusters, weights=h, minlength=flat.n_clusters)
        np.testing.assert_allclose(sums, 0.0, atol=1e-12)
        assert np.abs(h).max() > 1e-3
    assert 0.0 <= shifted.reward_means.min() and shifted.reward_means.max() <= 1.0


def test_cluster_shift_has_moderate_cluster_weights_and_huge_item_weights():
    env = CatalogBandit(seed=0)  # the default catalog: 10,000 items, 50 candidates
    logging = env.policy_table("logging")
    shift = env.policy_table("cluster_shift")
    item_max = float((shift / logging).max())
    cluster_max = float((cluster_sums(env, shift) / cluster_sums(env, logging)).max())
    assert cluster_max < 5.0
    assert item_max > 20 * cluster_max
    # for the greedy policy the clusters do not help as much
    greedy = env.policy_table("greedy")
    assert (cluster_sums(env, greedy) / cluster_sums(env, logging)).max() > cluster_max


# --------------------------------------------------------------------------- stochastic embeddings
@pytest.fixture(scope="module")
def noisy() -> CatalogBandit:
    return CatalogBandit(
        **SMALL, direct_effect=0.3, stochastic_embeddings=True, embedding_noise=0.4, seed=4
    )


def test_embedding_distribution_is_sparse_and_sums_to_one(env, noisy):
    V = noisy.n_categories
    for k, (name, table) in enumerate(noisy.embedding_distribution().items()):
        assert name == f"e{k}"
        assert table.column_names == ["action", "value", "probability"]
        prob = col(table, "probability")
        assert np.all(prob > 0)
        np.testing.assert_allclose(np.bincount(col(table, "action"), weights=prob), 1.0)
        own = noisy.item_embeddings[col(table, "action"), k] == col(table, "value")
        np.testing.assert_allclose(prob[own], 1 - 0.4 + 0.4 / V)
        np.testing.assert_allclose(prob[~own], 0.4 / V)
    for k, table in enumerate(env.embedding_distribution().values()):
        assert table.num_rows == env.n_items
        np.testing.assert_array_equal(col(table, "value"), env.item_embeddings[:, k])
        np.testing.assert_array_equal(col(table, "probability"), 1.0)


def test_stochastic_embeddings_are_logged_and_drive_the_reward(noisy):
    logs = noisy.sample(60_000, rng=5, oracle=True)
    assert ope.read_logs(logs.drop_columns(["context_id", "q_logged"])).report.rows_used == 60_000
    own = noisy.item_embeddings[col(logs, "action")]
    observed = np.stack([col(logs, "e0"), col(logs, "e1")], axis=1)
    assert logs.schema.field("e0").type == pa.int64()
    # each observed category is the item's own with probability 1 - eta + eta / V
    V = noisy.n_categories
    kept = (observed == own).mean(axis=0)
    p = 1 - 0.4 + 0.4 / V
    assert np.all(np.abs(kept - p) <= Z_TOL * math.sqrt(p * (1 - p) / 60_000))
    # the logged rewards average to the exact value (over the embedding draw)
    assert_mc_close(col(logs, "reward"), noisy.true_value("logging"))
    # among rows whose embedding was redrawn, the reward follows the observed embedding, not
    # the item's own: a flat-embedding environment gives the observed part of the mean
    moved = np.any(observed != own, axis=1)
    ctx, action = col(logs, "context_id"), col(logs, "action")
    mean = (
        0.5
        + noisy._embedding_effect(ctx, observed)
        + noisy.direct_effect * noisy._item_effect(ctx, action)
    )
    residual = col(logs, "reward")[moved] - mean[moved]
    assert abs(residual.mean()) <= Z_TOL * residual.std() / math.sqrt(residual.size)
    gap = mean[moved] - col(logs, "q_logged")[moved]
    assert np.abs(gap).mean() > 0.01  # the observed embedding matters


def test_stochastic_logs_without_oracle_drop_its_columns(noisy):
    logs = noisy.sample(100, rng=0)
    assert "context_id" not in logs.column_names and "q_logged" not in logs.column_names
    assert logs.column_names[-2:] == ["e0", "e1"]
    assert not np.isnan(col(logs, "reward")).any()


# --------------------------------------------------------------------------- reproducibility
def test_a_seed_fixes_the_model_and_an_rng_the_sample(env):
    twin = CatalogBandit(**SMALL, direct_effect=0.5, seed=1)
    np.testing.assert_array_equal(twin.reward_means, env.reward_means)
    np.testing.assert_array_equal(twin.policy_table("logging"), env.policy_table("logging"))
    assert env.sample(500, rng=7).equals(twin.sample(500, rng=7))
    assert not env.sample(500, rng=7).equals(env.sample(500, rng=8))
    other = CatalogBandit(**SMALL, direct_effect=0.5, seed=2)
    assert not np.array_equal(other.candidate_sets, env.candidate_sets)


def test_sample_memory_is_per_candidate_not_per_catalog_item():
    """50,000 items: a (rows x items) array of 20,000 rows would need 8 GB."""
    big = CatalogBandit(n_items=50_000, n_candidates=20, n_requests=100, seed=0)
    tracemalloc.start()
    try:
        big.sample(20_000, rng=0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 30 * 20_000 * 20 * 8  # 30 (rows x candidates) float arrays: 96 MB


# --------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(n_items=1), "n_items"),
        (dict(n_items=10, n_candidates=20), "n_candidates.*n_items"),
        (dict(n_candidates=0), "n_candidates"),
        (dict(n_requests=0), "n_requests"),
        (dict(n_features=2.5), "n_features"),
        (dict(n_categories=1), "n_categories"),
        (dict(n_embedding_dims=0), "n_embedding_dims"),
        (dict(n_categories=1000, n_embedding_dims=3), "MAX_MODEL_CELLS"),
        (dict(n_candidate_clusters=60), "n_candidate_clusters"),
        (dict(n_items=300, n_candidates=50, n_candidate_clusters=2), "n_candidate_clusters"),
        (dict(direct_effect=-0.1), "direct_effect"),
        (dict(direct_effect=1.5), "direct_effect"),
        (dict(direct_effect=float("nan")), "direct_effect"),
        (dict(stochastic_embeddings="yes"), "stochastic_embeddings"),
        (dict(embedding_noise=2.0), "embedding_noise"),
        (dict(logging_temperature=0.0), "logging_temperature"),
        (dict(logging_epsilon=-0.5), "logging_epsilon"),
        (dict(n_requests=10**30), "n_requests"),
        (dict(seed=-1), "seed"),
    ],
)
def test_bad_parameters_raise_parameter_error(kwargs, match):
    with pytest.raises(ParameterError, match=match):
        CatalogBandit(**kwargs)


def test_bad_policies_and_sample_arguments_are_refused(env):
    with pytest.raises(PolicyError, match="policies"):
        CatalogBandit(**SMALL, policies={"mine": np.ones((3, 3))})
    with pytest.raises(PolicyError, match="already used"):
        CatalogBandit(**SMALL, policies={"greedy": np.full((40, 12), 1 / 12)})
    with pytest.raises(ParameterError, match="oracle"):
        env.sample(10, rng=0, oracle="yes")
    with pytest.raises(ParameterError, match="`n`"):
        env.sample(0, rng=0)
    with pytest.raises(ParameterError, match="items"):
        env.expected_reward([0], [env.n_items])


def test_extra_policies_become_candidates(env):
    mine = np.full((40, 12), 1 / 12)
    extra = CatalogBandit(**SMALL, direct_effect=0.5, policies={"mine": mine}, seed=1)
    assert extra.candidate_policies[-1] == "mine"
    assert extra.true_value("mine") == pytest.approx(env.true_value("uniform"))
    assert "target_dist__mine" in extra.sample(50, rng=0).column_names
