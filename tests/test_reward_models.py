"""Tests of ope.reward_models: cross-fitting, sparse policy predictions, classifiers, DR use."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestRegressor
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge
from sklearn.neighbors import KNeighborsRegressor
from sklearn.tree import DecisionTreeRegressor

from ope.exceptions import (
    EstimationError,
    ParameterError,
    PolicyError,
    SchemaError,
    SmallSampleWarning,
    ValidationError,
)
from ope.reward_models import FittedRewardModel, RewardModel

# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def _random_policy(rng: np.random.Generator, n: int, k: int, support: int) -> sp.csr_array:
    """A CSR policy with `support` distinct random actions per row and random probabilities."""
    cols = np.argsort(rng.random((n, k)), axis=1)[:, :support]
    cols.sort(axis=1)
    probs = rng.random((n, support)) + 0.05
    probs /= probs.sum(axis=1, keepdims=True)
    indptr = np.arange(n + 1) * support
    return sp.csr_array((probs.ravel(), cols.ravel(), indptr), shape=(n, k))


def _onehot_design(x: np.ndarray, a: np.ndarray, k: int) -> np.ndarray:
    """The documented design [x, one-hot(a), x ⊗ one-hot(a)], built by hand."""
    n, d = x.shape
    onehot = np.zeros((n, k))
    onehot[np.arange(n), a] = 1.0
    inter = np.zeros((n, k * d))
    for j in range(k):  # loop over actions, not rows
        inter[:, j * d : (j + 1) * d] = x * onehot[:, [j]]
    return np.hstack([x, onehot, inter])


def _linear_env(rng: np.random.Generator, n: int, k: int, d: int):
    x = rng.normal(size=(n, d))
    a = rng.integers(0, k, size=n)
    b = rng.normal(size=k)
    c = rng.normal(size=(k, d))
    q_all = b[None, :] + x @ c.T  # (n, k): test-sized only
    return x, a, q_all


# --------------------------------------------------------------------------------------------
# cross-fitting
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "estimator", [KNeighborsRegressor(n_neighbors=1), DecisionTreeRegressor()], ids=["1nn", "tree"]
)
def test_in_sample_memorizes_but_cross_fit_does_not(estimator):
    rng = np.random.default_rng(0)
    n = 400
    x = rng.normal(size=(n, 2))
    a = rng.integers(0, 3, size=n)
    r = x[:, 0] + rng.normal(size=n)  # continuous noise: every reward distinct
    in_sample = RewardModel(estimator, cross_fit=False).fit(x, a, r).predict_logged()
    np.testing.assert_array_equal(in_sample, r)

    fitted = RewardModel(estimator, n_folds=4, rng=0).fit(x, a, r)
    oof = fitted.predict_logged()
    assert not np.any(oof == r)
    assert np.mean(np.abs(oof - r)) > 0.5  # noise sd is 1: far from memorized


def test_one_nn_prediction_comes_from_another_fold():
    rng = np.random.default_rng(1)
    n = 300
    x = rng.normal(size=(n, 2))
    a = rng.integers(0, 2, size=n)
    r = rng.normal(size=n)
    fitted = RewardModel(KNeighborsRegressor(n_neighbors=1), n_folds=3, rng=5).fit(x, a, r)
    oof = fitted.predict_logged()
    for k in range(3):
        inside = fitted.fold_ == k
        assert np.isin(oof[inside], r[~inside]).all()
        assert not np.isin(oof[inside], r[inside]).any()


def test_folds_are_balanced_and_estimators_per_fold():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(103, 2))
    a = rng.integers(0, 3, size=103)
    fitted = RewardModel(n_folds=5, rng=0).fit(x, a, rng.normal(size=103))
    counts = np.bincount(fitted.fold_, minlength=5)
    assert counts.max() - counts.min() <= 1 and counts.sum() == 103
    assert fitted.n_folds_ == 5 == len(fitted.estimators_)
    assert len({id(e) for e in fitted.estimators_}) == 5
    single = RewardModel(cross_fit=False).fit(x, a, rng.normal(size=103))
    assert single.n_folds_ == 1 and not single.fold_.any()


def test_classifier_folds_are_stratified_by_reward():
    rng = np.random.default_rng(3)
    n = 200
    x = rng.normal(size=(n, 1))
    a = rng.integers(0, 2, size=n)
    r = np.zeros(n)
    r[rng.choice(n, 10, replace=False)] = 1.0  # 10 positives over 5 folds: 2 each
    fitted = RewardModel(LogisticRegression(), n_folds=5, rng=0).fit(x, a, r)
    np.testing.assert_array_equal(np.bincount(fitted.fold_[r == 1], minlength=5), [2] * 5)


def test_oof_matches_each_fold_model_on_hand_built_design():
    rng = np.random.default_rng(4)
    n, k, d = 240, 4, 2
    x = rng.normal(size=(n, d))
    a = rng.integers(0, k, size=n)
    r = x[:, 0] * (a == 2) + rng.normal(size=n)
    fitted = RewardModel(Ridge(alpha=0.5), n_folds=3, sparse=False, rng=1).fit(x, a, r, n_actions=k)
    dist = _random_policy(rng, n, k, support=3)
    dense = dist.toarray()
    q_oof = np.zeros((n, k))
    for act in range(k):
        design = _onehot_design(x, np.full(n, act), k)
        for f in range(3):
            rows = fitted.fold_ == f
            q_oof[rows, act] = fitted.estimators_[f].predict(design[rows])
    np.testing.assert_allclose(fitted.predict_policy(dist), (dense * q_oof).sum(axis=1), atol=1e-12)
    np.testing.assert_allclose(fitted.predict_logged(), q_oof[np.arange(n), a], rtol=0, atol=1e-12)


# --------------------------------------------------------------------------------------------
# predict_policy
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sparse", [True, False])
def test_predict_policy_equals_hand_sum_of_predict(sparse):
    rng = np.random.default_rng(5)
    n, k = 150, 6
    x = rng.normal(size=(n, 3))
    a = rng.integers(0, k, size=n)
    r = np.sin(x[:, 0]) + a * 0.2 + rng.normal(size=n)
    fitted = RewardModel(cross_fit=False, sparse=sparse).fit(x, a, r, n_actions=k)
    assert fitted.sparse_ is sparse
    dist = _random_policy(rng, n, k, support=2)
    q_all = np.column_stack([fitted.predict(x, np.full(n, j)) for j in range(k)])
    expected = (dist.toarray() * q_all).sum(axis=1)
    np.testing.assert_allclose(fitted.predict_policy(dist), expected, rtol=1e-12, atol=1e-12)


def test_predict_policy_new_context_uses_fold_average():
    rng = np.random.default_rng(6)
    n, k = 200, 4
    x = rng.normal(size=(n, 2))
    a = rng.integers(0, k, size=n)
    r = x[:, 1] + rng.normal(size=n)
    fitted = RewardModel(Ridge(alpha=2.0), n_folds=4, rng=0).fit(x, a, r)
    x_new = rng.normal(size=(30, 2))
    dist = _random_policy(rng, 30, k, support=3)
    avg = np.zeros((30, k))
    for est in fitted.estimators_:
        for j in range(k):
            design = sp.csr_matrix(_onehot_design(x_new, np.full(30, j), k))
            avg[:, j] += est.predict(design) / 4
    np.testing.assert_allclose(fitted.predict(x_new, np.full(30, 1)), avg[:, 1], atol=1e-12)
    np.testing.assert_allclose(
        fitted.predict_policy(dist, context=x_new), (dist.toarray() * avg).sum(1), atol=1e-12
    )


def test_logged_action_policy_reproduces_predict_logged():
    rng = np.random.default_rng(7)
    n, k = 300, 5
    x = rng.normal(size=(n, 2))
    a = rng.integers(0, k, size=n)
    r = x[:, 0] * (a == 1) + rng.normal(size=n)
    fitted = RewardModel(DecisionTreeRegressor(max_depth=4, random_state=0), rng=3).fit(
        x, a, r, n_actions=k
    )
    logged = sp.csr_matrix((np.ones(n), (np.arange(n), a)), shape=(n, k))
    np.testing.assert_allclose(fitted.predict_policy(logged), fitted.predict_logged(), atol=0)


def test_several_policies_at_once_and_small_chunks():
    rng = np.random.default_rng(8)
    n, k = 120, 7
    x = rng.normal(size=(n, 2))
    a = rng.integers(0, k, size=n)
    r = x[:, 0] + rng.normal(size=n)
    policies = [_random_policy(rng, n, k, s) for s in (1, 3, 7)]
    big = RewardModel(rng=0).fit(x, a, r, n_actions=k)
    tiny = RewardModel(rng=0, chunk_size=7).fit(x, a, r, n_actions=k)
    block = big.predict_policy(policies)
    assert block.shape == (n, 3) and block.dtype == np.float64
    for p, dist in enumerate(policies):
        np.testing.assert_allclose(block[:, p], big.predict_policy(dist), atol=1e-12)
    np.testing.assert_allclose(tiny.predict_policy(policies), block, atol=1e-10)
    # other sparse formats, explicit zeros and dense arrays are accepted
    coo = sp.coo_matrix(policies[1])
    np.testing.assert_allclose(big.predict_policy(coo), block[:, 1], atol=1e-12)
    np.testing.assert_allclose(big.predict_policy(policies[2].toarray()), block[:, 2], atol=1e-12)


# --------------------------------------------------------------------------------------------
# exactness and determinism
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sparse", [True, False])
def test_linear_model_recovers_exact_q_on_noiseless_data(sparse):
    rng = np.random.default_rng(9)
    n, k, d = 400, 5, 3
    x, a, q_all = _linear_env(rng, n, k, d)
    r = q_all[np.arange(n), a]
    # sparse least squares is iterative (lsqr): ask for a tight tolerance
    fitted = RewardModel(LinearRegression(tol=1e-12), sparse=sparse, rng=0).fit(
        x, a, r, n_actions=k
    )
    np.testing.assert_allclose(fitted.predict_logged(), r, atol=1e-6)
    dist = _random_policy(rng, n, k, support=3)
    np.testing.assert_allclose(
        fitted.predict_policy(dist), (dist.toarray() * q_all).sum(1), atol=1e-6
    )


def test_action_features_recover_exact_bilinear_q():
    rng = np.random.default_rng(10)
    n, k, d, da = 500, 40, 2, 3
    emb = rng.normal(size=(k, da))
    beta = rng.normal(size=da)
    m = rng.normal(size=(d, da))
    x = rng.normal(size=(n, d))
    a = rng.integers(0, k, size=n)
    q_all = emb @ beta + x @ m @ emb.T + 0.3  # q(x, a) = 0.3 + e_a·β + xᵀ M e_a
    r = q_all[np.arange(n), a]
    fitted = RewardModel(LinearRegression(), rng=0).fit(x, a, r, action_features=emb)
    assert fitted.n_actions_ == k and not fitted.sparse_
    assert fitted.n_design_columns_ == d + da + d * da
    np.testing.assert_allclose(fitted.predict_logged(), r, atol=1e-8)
    dist = _random_policy(rng, n, k, support=4)
    expected = (dist.toarray() * q_all).sum(1)
    np.testing.assert_allclose(fitted.predict_policy(dist), expected, atol=1e-8)


def test_interactions_false_is_additive():
    rng = np.random.default_rng(11)
    n, k = 300, 4
    x = rng.normal(size=(n, 2))
    a = rng.integers(0, k, size=n)
    r = 2.0 * x[:, 0] + np.array([0.0, 1.0, -1.0, 0.5])[a]
    fitted = RewardModel(LinearRegression(), interactions=False, rng=0).fit(x, a, r)
    assert fitted.n_design_columns_ == 2 + k
    np.testing.assert_allclose(fitted.predict_logged(), r, atol=1e-8)


def test_deterministic_given_rng():
    rng = np.random.default_rng(12)
    n = 200
    x = rng.normal(size=(n, 2))
    a = rng.integers(0, 3, size=n)
    r = x[:, 0] + rng.normal(size=n)
    forest = RandomForestRegressor(n_estimators=5, max_depth=3)  # random_state=None
    one = RewardModel(forest, rng=42).fit(x, a, r)
    two = RewardModel(forest, rng=42).fit(x, a, r)
    np.testing.assert_array_equal(one.fold_, two.fold_)
    np.testing.assert_array_equal(one.predict_logged(), two.predict_logged())
    assert forest.get_params()["random_state"] is None  # the user's estimator is untouched
    three = RewardModel(forest, rng=np.random.default_rng(42)).fit(x, a, r)
    np.testing.assert_array_equal(one.fold_, three.fold_)
    other = RewardModel(forest, rng=43).fit(x, a, r)
    assert not np.array_equal(one.fold_, other.fold_)


def test_float32_inputs_give_float64_outputs():
    rng = np.random.default_rng(13)
    n = 200
    x = rng.normal(size=(n, 2))
    a = rng.integers(0, 3, size=n)
    r = x[:, 0] + rng.normal(size=n)
    f64 = RewardModel(rng=0).fit(x, a, r)
    f32 = RewardModel(rng=0).fit(x.astype(np.float32), a.astype(np.int16), r.astype(np.float32))
    assert f32.predict_logged().dtype == np.float64
    np.testing.assert_allclose(f32.predict_logged(), f64.predict_logged(), atol=1e-5)
    dist = _random_policy(rng, n, 3, 2)
    dist32 = sp.csr_array(
        (dist.data.astype(np.float32), dist.indices, dist.indptr), shape=dist.shape
    )
    np.testing.assert_allclose(f32.predict_policy(dist32), f64.predict_policy(dist), atol=1e-5)


def test_dataframe_context_and_zero_feature_context():
    rng = np.random.default_rng(14)
    n = 120
    df = pd.DataFrame({"age": rng.normal(size=n), "score": rng.normal(size=n)})
    a = rng.integers(0, 3, size=n)
    r = df["age"].to_numpy() + a
    fitted = RewardModel(LinearRegression(), rng=0).fit(df, a, r)
    np.testing.assert_allclose(fitted.predict_logged(), r, atol=1e-8)
    means = np.array([0.1, 0.5, 0.9])
    no_context = RewardModel(LinearRegression(), rng=0).fit(np.empty((n, 0)), a, means[a])
    np.testing.assert_allclose(no_context.predict_logged(), means[a], atol=1e-10)


# --------------------------------------------------------------------------------------------
# classifiers
# --------------------------------------------------------------------------------------------


def test_classifier_on_clicks_estimates_probabilities():
    rng = np.random.default_rng(15)
    n, k = 6000, 3
    x = rng.normal(size=(n, 1))
    a = rng.integers(0, k, size=n)
    logit = np.array([-1.0, 0.0, 1.0])[a] + np.array([0.5, -0.5, 1.0])[a] * x[:, 0]
    p = 1.0 / (1.0 + np.exp(-logit))
    clicks = (rng.random(n) < p).astype(float)
    fitted = RewardModel(LogisticRegression(C=100.0), rng=0).fit(x, a, clicks)
    np.testing.assert_array_equal(fitted.reward_values_, [0.0, 1.0])
    q = fitted.predict_logged()
    assert q.min() > 0.0 and q.max() < 1.0
    assert np.mean(np.abs(q - p)) < 0.03  # well specified: close to the true probability
    # cross_fit=False: q̂ is exactly predict_proba[:, 1]
    single = RewardModel(LogisticRegression(), cross_fit=False).fit(x, a, clicks)
    design = sp.csr_matrix(_onehot_design(x, a, k))
    np.testing.assert_allclose(
        single.predict_logged(), single.estimators_[0].predict_proba(design)[:, 1], atol=1e-12
    )


def test_classifier_on_ratings_is_expected_value():
    rng = np.random.default_rng(16)
    n, k = 600, 2
    x = rng.normal(size=(n, 2))
    a = rng.integers(0, k, size=n)
    ratings = rng.choice(np.array([1.0, 2.5, 5.0]), size=n)
    fitted = RewardModel(LogisticRegression(), cross_fit=False).fit(x, a, ratings)
    np.testing.assert_array_equal(fitted.reward_values_, [1.0, 2.5, 5.0])
    proba = fitted.estimators_[0].predict_proba(sp.csr_matrix(_onehot_design(x, a, k)))
    np.testing.assert_allclose(fitted.predict_logged(), proba @ [1.0, 2.5, 5.0], atol=1e-12)


def test_single_class_fold_falls_back_to_constant_with_warning():
    rng = np.random.default_rng(17)
    n = 30
    x = rng.normal(size=(n, 1))
    a = rng.integers(0, 2, size=n)
    r = np.zeros(n)
    r[4] = 1.0
    with pytest.warns(SmallSampleWarning, match=r"fold\(s\) \[\d\] hold one reward value"):
        fitted = RewardModel(LogisticRegression(), n_folds=3, rng=0).fit(x, a, r)
    k = fitted.fold_[4]
    np.testing.assert_array_equal(fitted.predict_logged()[fitted.fold_ == k], 0.0)
    other = fitted.predict_logged()[fitted.fold_ != k]
    assert np.all((other > 0.0) & (other < 1.0))


def test_constant_reward_classifier_warns_and_predicts_constant():
    rng = np.random.default_rng(18)
    x = rng.normal(size=(20, 1))
    a = rng.integers(0, 2, size=20)
    with pytest.warns(SmallSampleWarning, match="all rewards are equal"):
        fitted = RewardModel(LogisticRegression(), n_folds=2, rng=0).fit(x, a, np.ones(20))
    np.testing.assert_array_equal(fitted.predict_logged(), 1.0)
    np.testing.assert_array_equal(fitted.predict(x[:3], a[:3]), 1.0)


def test_classifier_refuses_continuous_reward():
    rng = np.random.default_rng(19)
    x = rng.normal(size=(500, 1))
    with pytest.raises(EstimationError, match=r"takes 500 distinct values.*Pass a regressor"):
        RewardModel(LogisticRegression()).fit(x, np.zeros(500, int), rng.normal(size=500))


# --------------------------------------------------------------------------------------------
# large catalogs
# --------------------------------------------------------------------------------------------


def test_large_catalog_sparse_path_has_bounded_memory():
    rng = np.random.default_rng(20)
    n, k, support = 5000, 50_000, 10
    x = rng.normal(size=(n, 3))
    a = rng.integers(0, k, size=n)
    r = x[:, 0] + (a % 5) * 0.2 + rng.normal(size=n)
    cols = (rng.integers(0, k, size=(n, 1)) + np.arange(support) * 4999) % k
    cols.sort(axis=1)
    dist = sp.csr_array(
        (np.full(n * support, 1.0 / support), cols.ravel(), np.arange(n + 1) * support),
        shape=(n, k),
    )
    tracemalloc.start()
    try:
        fitted = RewardModel(rng=0, chunk_size=8192).fit(x, a, r, n_actions=k)
        q_target = fitted.predict_policy(dist)
        both = fitted.predict_policy([dist, dist])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    dense_bytes = n * k * 8  # 2 GB: one dense (n, K) float64 array
    assert peak < dense_bytes / 20, peak
    assert fitted.sparse_ and fitted.n_design_columns_ == 3 + k + 3 * k
    np.testing.assert_allclose(both, np.column_stack([q_target, q_target]), atol=1e-12)
    # hand check of the first rows: Σ_a π(a|x_i) q̂^{(-k(i))}(x_i, a) via the fold's estimator
    for i in range(5):
        acts = cols[i]
        design = sp.csr_matrix(_onehot_design(np.repeat(x[[i]], support, 0), acts, k))
        q_i = fitted.estimators_[fitted.fold_[i]].predict(design)
        assert q_target[i] == pytest.approx(q_i.mean(), abs=1e-10)


def test_dense_only_estimator_with_large_catalog_is_refused():
    rng = np.random.default_rng(21)
    n, k = 5000, 50_000
    x = rng.normal(size=(n, 3))
    a = rng.integers(0, k, size=n)
    match = r"dense design matrix would be 5000 x 200003.*sparse"
    with pytest.raises(EstimationError, match=match):
        RewardModel(HistGradientBoostingRegressor()).fit(x, a, rng.normal(size=n), n_actions=k)


def test_dense_only_estimator_with_small_catalog_works():
    rng = np.random.default_rng(22)
    n = 300
    x = rng.normal(size=(n, 2))
    a = rng.integers(0, 3, size=n)
    r = np.where(x[:, 0] > 0, 1.0, 0.0) * (a == 1)
    fitted = RewardModel(HistGradientBoostingRegressor(max_iter=30), n_folds=3, rng=0).fit(x, a, r)
    assert not fitted.sparse_
    assert np.mean(np.abs(fitted.predict_logged() - r)) < 0.15


# --------------------------------------------------------------------------------------------
# DR with cross-fitted q̂ on an exact environment
# --------------------------------------------------------------------------------------------


def _exact_environment():
    """Discrete contexts with known probabilities: the policy value is an exact finite sum."""
    grid = np.array([[x0, x1] for x0 in (-1.5, -0.5, 0.5, 1.5) for x1 in (-1.0, 1.0)])
    p_context = np.full(len(grid), 1.0 / len(grid))
    k = 3
    # non-linear mean reward: the default (linear) reward model is misspecified
    q = 0.5 + 0.4 * np.sin(grid[:, [0]] * np.arange(1, k + 1)) * np.tanh(grid[:, [1]] + 0.3)

    def softmax(z):
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    logging = softmax(grid @ np.array([[0.5, -0.3, 0.1], [0.2, 0.4, -0.6]]))
    target = softmax(3.0 * q)
    value = float(p_context @ (target * q).sum(axis=1))
    return grid, p_context, q, logging, target, value


def _dr_replications(n_reps: int, n: int, seed: int, estimator=None):
    """DR and DM estimates over independent replications, and the exact value."""
    grid, p_context, q, logging, target, value = _exact_environment()
    rng = np.random.default_rng(seed)
    k = q.shape[1]
    dr = np.empty(n_reps)
    dm = np.empty(n_reps)
    for rep in range(n_reps):  # replications, not rows
        m = rng.choice(len(grid), size=n, p=p_context)
        u = rng.random(n)
        a = (u[:, None] > np.cumsum(logging[m], axis=1)).sum(axis=1)
        r = (rng.random(n) < q[m, a]).astype(float)
        fitted = RewardModel(estimator, rng=rng).fit(grid[m], a, r, n_actions=k)
        dist = sp.csr_array(target[m])
        w = target[m, a] / logging[m, a]
        q_logged, q_target = fitted.predict_logged(), fitted.predict_policy(dist)
        dr[rep] = np.mean(q_target + w * (r - q_logged))
        dm[rep] = np.mean(q_target)
    return dr, dm, value


def _z(estimates: np.ndarray, value: float) -> float:
    return float((estimates.mean() - value) / (estimates.std(ddof=1) / np.sqrt(estimates.size)))


def test_dr_with_cross_fitted_model_is_unbiased():
    dr, dm, value = _dr_replications(n_reps=150, n=300, seed=0)
    assert abs(_z(dr, value)) < 4, (dr.mean(), value)
    # the linear model is misspecified here: DM alone is far off, so DR's correction is doing work
    assert abs(_z(dm, value)) > 10, (dm.mean(), value)


@pytest.mark.slow
@pytest.mark.parametrize(
    "estimator", [None, DecisionTreeRegressor(min_samples_leaf=5)], ids=["ridge", "tree"]
)
def test_dr_unbiased_over_many_replications(estimator):
    dr, _, value = _dr_replications(n_reps=800, n=400, seed=1, estimator=estimator)
    assert abs(_z(dr, value)) < 4, (dr.mean(), value)


# --------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------


def _data(n: int = 40):
    rng = np.random.default_rng(23)
    return rng.normal(size=(n, 3)), rng.integers(0, 4, size=n), rng.normal(size=n)


def test_nan_context_names_column_and_rows():
    x, a, r = _data()
    x[[3, 7], 1] = np.nan
    with pytest.raises(ValidationError, match=r"2 rows \(first rows: 3, 7\) in column\(s\) 1\b"):
        RewardModel().fit(x, a, r)
    df = pd.DataFrame(x, columns=["age", "income", "score"])
    with pytest.raises(ValidationError, match=r"column\(s\) 1 \('income'\).*Impute"):
        RewardModel().fit(df, a, r)


@pytest.mark.parametrize(
    ("mutate", "error", "match"),
    [
        (lambda x, a, r: (x[:, 0], a, r), SchemaError, r"must be 2-D.*reshape\(-1, 1\)"),
        (lambda x, a, r: (x.astype(str), a, r), SchemaError, r"`context` must be numeric"),
        (lambda x, a, r: (sp.csr_matrix(x), a, r), SchemaError, r"dense numeric.*toarray"),
        (lambda x, a, r: (x, a[:-1], r), SchemaError, r"`action` has 39 rows but `context` has 40"),
        (lambda x, a, r: (x, a + 0.5, r), SchemaError, r"integer codes.*40 rows are not whole"),
        (lambda x, a, r: (x, a.astype(str), r), SchemaError, r"integer codes.*Categorical"),
        (lambda x, a, r: (x, a - 10, r), ValidationError, r"must be >= 0; \d+ rows are negative"),
        (lambda x, a, r: (x, a, r[:-2]), SchemaError, r"`reward` has 38 rows"),
        (
            lambda x, a, r: (x, a, np.where(np.arange(40) == 9, np.nan, r)),
            ValidationError,
            r"`reward` has NaN.*1 rows \(first rows: 9\)",
        ),
    ],
)
def test_fit_input_errors(mutate, error, match):
    x, a, r = mutate(*_data())
    with pytest.raises(error, match=match):
        RewardModel().fit(x, a, r)


def test_action_codes_out_of_range():
    x, a, r = _data()
    a[[5, 6]] = 4
    match = r"\[0, 4\) for n_actions=4; 2 rows are outside \(first rows: 5, 6"
    with pytest.raises(ValidationError, match=match):
        RewardModel().fit(x, a, r, n_actions=4)
    with pytest.raises(SchemaError, match=r"`action_features` has 3 rows but n_actions=4"):
        RewardModel().fit(x, a % 4, r, n_actions=4, action_features=np.ones((3, 2)))
    feats = np.ones((4, 2))
    feats[2, 1] = np.inf
    with pytest.raises(ValidationError, match=r"action_features.*first action codes: 2"):
        RewardModel().fit(x, a % 4, r, action_features=feats)


def test_too_few_rows_for_folds():
    x, a, r = _data(4)
    with pytest.raises(EstimationError, match=r"4 rows cannot be split into n_folds=5"):
        RewardModel().fit(x, a, r)
    assert isinstance(RewardModel(cross_fit=False).fit(x, a, r), FittedRewardModel)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"n_folds": 1}, ParameterError, r"`n_folds` must be a whole number >= 2.*cross_fit=False"),
        ({"n_folds": True}, ParameterError, r"`n_folds` must be a whole number >= 2; got True"),
        ({"chunk_size": 0}, ParameterError, r"`chunk_size` must be a positive int"),
        ({"cross_fit": "yes"}, ParameterError, r"cross_fit must be True or False"),
        ({"sparse": "auto"}, ParameterError, r"sparse must be True, False or None"),
        ({"estimator": object()}, ParameterError, r"lacks \['fit', 'predict'\]"),
        ({"rng": 2.5}, ParameterError, r"rng must be an int seed"),
    ],
)
def test_bad_settings(kwargs, error, match):
    with pytest.raises(error, match=match):
        RewardModel(**kwargs)


def test_policy_errors():
    x, a, r = _data()
    fitted = RewardModel(rng=0).fit(x, a, r, n_actions=4)
    good = np.full((40, 4), 0.25)
    with pytest.raises(PolicyError, match=r"shape \(39, 4\); expected \(40, 4\)"):
        fitted.predict_policy(sp.csr_array(good[:-1]))
    with pytest.raises(PolicyError, match=r"shape \(40, 3\); expected \(40, 4\)"):
        fitted.predict_policy(sp.csr_array(good[:, :3]))
    bad = good.copy()
    bad[[2, 8], 0] = 0.5
    match = r"must sum to 1.*2 rows do not \(first rows: 2, 8; row 2 sums to 1.25"
    with pytest.raises(PolicyError, match=match):
        fitted.predict_policy(sp.csr_array(bad))
    neg = good.copy()
    neg[11] = [-0.5, 0.5, 0.5, 0.5]
    with pytest.raises(PolicyError, match=r"\[0, 1\]; 1 rows have NaN, negative.*first rows: 11"):
        fitted.predict_policy(sp.csr_array(neg))
    empty_row = good.copy()
    empty_row[0] = 0.0
    with pytest.raises(PolicyError, match=r"Rows with no support sum to 0"):
        fitted.predict_policy(sp.csr_array(empty_row))
    with pytest.raises(PolicyError, match=r"`distribution\[1\]` has shape"):
        fitted.predict_policy([sp.csr_array(good), sp.csr_array(good[:5])])
    with pytest.raises(PolicyError, match="empty list"):
        fitted.predict_policy([])
    with pytest.raises(SchemaError, match=r"`context` has 2 columns but the model was fitted on 3"):
        fitted.predict(x[:, :2], a)
    with pytest.raises(ValidationError, match=r"\[0, 4\) for n_actions=4"):
        fitted.predict(x, a + 4)


def test_repr_mentions_settings():
    x, a, r = _data()
    text = repr(RewardModel(rng=0).fit(x, a, r))
    assert "Ridge (default)" in text and "n=40" in text and "n_folds=5" in text


# --------------------------------------------------------------------------------------------
# integration with the rest of ope
# --------------------------------------------------------------------------------------------


def test_feeds_dr_estimator_for_several_policies():
    from ope.estimators import DR

    rng = np.random.default_rng(24)
    n, k = 500, 3
    x = rng.normal(size=(n, 2))
    a = rng.integers(0, k, size=n)
    p = np.full(n, 1.0 / k)
    r = x[:, 0] * (a == 1) + rng.normal(size=n)
    pi = [_random_policy(rng, n, k, 2), _random_policy(rng, n, k, 3)]
    fitted = RewardModel(rng=0).fit(x, a, r, n_actions=k)
    q_logged, q_target = fitted.predict_logged(), fitted.predict_policy(pi)
    pe = np.column_stack([d.toarray()[np.arange(n), a] for d in pi])
    manual = np.mean(q_target + pe / p[:, None] * (r - q_logged)[:, None], axis=0)
    for j in range(2):
        res = DR().estimate(
            reward=r,
            logging_propensity=p,
            target_propensity=pe[:, j],
            q_logged=q_logged,
            q_target=q_target[:, j],
        )
        assert res.value == pytest.approx(manual[j], rel=1e-12, abs=1e-12)


def test_accepts_policy_distribution_objects():
    from ope.policies import PolicyDistribution

    rng = np.random.default_rng(25)
    n, k = 100, 4
    x = rng.normal(size=(n, 2))
    labels = np.array([10, 20, 30, 40])
    logged = labels[rng.integers(0, k, size=n)]
    dist = PolicyDistribution(_random_policy(rng, n, k, 2), labels)
    codes = np.searchsorted(dist.actions, logged)
    fitted = RewardModel(rng=0).fit(x, codes, rng.normal(size=n), n_actions=len(dist.actions))
    np.testing.assert_allclose(
        fitted.predict_policy(dist), fitted.predict_policy(dist.matrix), atol=0
    )


def test_docstring_examples_run():
    import doctest

    import ope.reward_models

    result = doctest.testmod(ope.reward_models, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 10 and result.failed == 0


# --------------------------------------------------------------------------------------------
# linear models: predictions by a gather of per-action coefficients
# --------------------------------------------------------------------------------------------


class _DesignRidge(Ridge):
    """Ridge whose predict is not the linear models' own: predicted on design rows (the path
    every non-linear estimator takes), with the same fit and so the same coefficients."""

    def predict(self, X):  # noqa: N803 - scikit-learn's argument name
        return super().predict(X)


class _DesignLinearRegression(LinearRegression):
    def predict(self, X):  # noqa: N803
        return super().predict(X)


@pytest.mark.parametrize(
    ("linear", "by_design", "settings"),
    [
        (None, _DesignRidge(alpha=1.0), {}),  # the default Ridge, sparse one-hot
        (Ridge(alpha=0.3), _DesignRidge(alpha=0.3), {"sparse": False}),
        (Ridge(), _DesignRidge(), {"interactions": False}),
        (LinearRegression(), _DesignLinearRegression(), {"sparse": False}),
    ],
    ids=["default", "dense", "additive", "ols"],
)
def test_linear_predictions_by_gather_equal_the_design_predictions(linear, by_design, settings):
    rng = np.random.default_rng(40)
    n, k, d = 600, 7, 3
    x = rng.normal(size=(n, d))
    a = rng.integers(0, k, size=n)
    r = x[:, 0] * (a % 3) - x[:, 2] + 0.5 * a + rng.normal(size=n)
    gathered = RewardModel(linear, n_folds=3, rng=2, **settings).fit(x, a, r, n_actions=k)
    designed = RewardModel(by_design, n_folds=3, rng=2, **settings).fit(x, a, r, n_actions=k)
    np.testing.assert_allclose(gathered.predict_logged(), designed.predict_logged(), atol=1e-10)
    dists = [_random_policy(rng, n, k, s) for s in (1, 4)]
    np.testing.assert_allclose(
        gathered.predict_policy(dists), designed.predict_policy(dists), rtol=1e-10, atol=1e-10
    )
    x_new = rng.normal(size=(50, d))
    a_new = rng.integers(0, k, size=50)
    np.testing.assert_allclose(
        gathered.predict(x_new, a_new), designed.predict(x_new, a_new), rtol=1e-10, atol=1e-10
    )
    new_dist = _random_policy(rng, 50, k, 3)
    np.testing.assert_allclose(
        gathered.predict_policy(new_dist, context=x_new),
        designed.predict_policy(new_dist, context=x_new),
        rtol=1e-10,
        atol=1e-10,
    )


def test_the_default_model_predicts_pairs_without_building_design_rows(monkeypatch):
    import ope.reward_models as rm

    rng = np.random.default_rng(41)
    n, k = 300, 5
    x = rng.normal(size=(n, 2))
    a = rng.integers(0, k, size=n)
    r = x[:, 0] + rng.normal(size=n)
    fitted = RewardModel(rng=0).fit(x, a, r, n_actions=k)
    designed = RewardModel(_DesignRidge(), rng=0).fit(x, a, r, n_actions=k)
    dist = _random_policy(rng, n, k, 3)

    def no_design(self, *args):
        raise AssertionError("a design row was built")

    monkeypatch.setattr(rm._Design, "build", no_design)
    q = fitted.predict_policy(dist)  # the gather: no design row
    assert q.shape == (n,)
    with pytest.raises(AssertionError, match="a design row was built"):
        designed.predict_policy(dist)


# --------------------------------------------------------------------------------------------
# seeds and progress
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "estimator", [None, RandomForestRegressor(n_estimators=5, max_depth=3)], ids=["ridge", "forest"]
)
def test_a_seed_reproduces_the_folds_and_the_predictions(estimator):
    rng = np.random.default_rng(42)
    n, k = 400, 4
    x = rng.normal(size=(n, 2))
    a = rng.integers(0, k, size=n)
    r = np.sin(x[:, 0]) * a + rng.normal(size=n)
    dist = _random_policy(rng, n, k, 2)
    one = RewardModel(estimator, rng=11).fit(x, a, r, n_actions=k)
    two = RewardModel(estimator, rng=11).fit(x, a, r, n_actions=k)
    assert one.seed_ == two.seed_ == 11
    np.testing.assert_array_equal(one.fold_, two.fold_)
    np.testing.assert_allclose(one.predict_policy(dist), two.predict_policy(dist), rtol=1e-12)
    other = RewardModel(estimator, rng=12).fit(x, a, r, n_actions=k)
    assert not np.array_equal(one.fold_, other.fold_)
    # rng=None: a seed is drawn and recorded; it reproduces the fit exactly
    drawn = RewardModel(estimator).fit(x, a, r, n_actions=k)
    assert isinstance(drawn.seed_, int) and 0 <= drawn.seed_ < 2**63
    again = RewardModel(estimator, rng=drawn.seed_).fit(x, a, r, n_actions=k)
    np.testing.assert_array_equal(drawn.fold_, again.fold_)
    np.testing.assert_allclose(drawn.predict_logged(), again.predict_logged(), rtol=1e-12)
    np.testing.assert_allclose(drawn.predict_policy(dist), again.predict_policy(dist), rtol=1e-12)
    # a Generator is used as given: its state is the caller's, nothing to record
    gen = RewardModel(estimator, rng=np.random.default_rng(11)).fit(x, a, r, n_actions=k)
    assert gen.seed_ is None
    np.testing.assert_array_equal(gen.fold_, one.fold_)


def test_cross_fitting_shows_progress_over_folds(monkeypatch):
    import ope.reward_models as rm

    calls = []

    def fake(iterable, **kw):
        calls.append(kw)
        return iterable

    monkeypatch.setattr(rm, "progress", fake)
    rng = np.random.default_rng(43)
    x = rng.normal(size=(100, 1))
    a = rng.integers(0, 2, size=100)
    RewardModel(n_folds=4, rng=0).fit(x, a, rng.normal(size=100))
    assert calls == [{"desc": "cross-fitting", "total": 4, "unit": "fold"}]
    RewardModel(cross_fit=False).fit(x, a, rng.normal(size=100))  # one fit: no bar
    assert len(calls) == 1
