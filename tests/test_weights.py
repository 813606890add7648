"""Tests of the weight kernel: hand values, validation messages, chunking, float32, factors."""

from __future__ import annotations

import numpy as np
import pytest

from ope.exceptions import ValidationError
from ope.weights import MOMENT_KEYS, factor_weights, importance_weights, weight_moments


def test_importance_weights_by_hand():
    p = np.array([0.5, 0.25, 0.8])
    t = np.array([[1.0, 0.5], [0.0, 0.25], [0.4, 0.8]])
    # 1.0/0.5 = 2, 0.5/0.5 = 1; 0/0.25 = 0, 0.25/0.25 = 1; 0.4/0.8 = 0.5, 0.8/0.8 = 1
    np.testing.assert_allclose(importance_weights(p, t), [[2.0, 1.0], [0.0, 1.0], [0.5, 1.0]])
    np.testing.assert_allclose(importance_weights(p, t[:, 0]), [2.0, 0.0, 0.5])
    np.testing.assert_allclose(importance_weights(p, t[:, 0], max_weight=1.5), [1.5, 0.0, 0.5])


def test_importance_weights_float32_accumulates_in_float64():
    rng = np.random.default_rng(1)
    p = rng.uniform(0.05, 1.0, size=1000)
    t = rng.uniform(0.0, 1.0, size=(1000, 3))
    w32 = importance_weights(p.astype(np.float32), t.astype(np.float32))
    assert w32.dtype == np.float64
    np.testing.assert_allclose(w32, importance_weights(p, t), rtol=1e-6)


@pytest.mark.parametrize(
    ("p", "t", "match"),
    [
        ([0.5, 0.0, 0.0], [0.5, 0.5, 0.5], r"`logging_propensity` must be in \(0, 1\]; 2 rows are not \(first at row 1"),
        ([0.5, 1.5, 0.5], [0.5, 0.5, 0.5], r"must be in \(0, 1\].*on_invalid='drop'"),
        ([0.5, 0.5, np.nan], [0.5, 0.5, 0.5], r"`logging_propensity` must be finite; 1 rows are NaN or infinite \(first at row 2\)"),
        ([0.5, 0.5, 0.5], [0.5, -0.1, 0.5], r"`target_propensity` must be in \[0, 1\].*first at row 1.*not scores"),
        ([0.5, 0.5], [0.5, 0.5, 0.5], r"`target_propensity` has 3 rows but `logging_propensity` has 2"),
        ([[0.5]], [0.5], r"`logging_propensity` must have shape \(n,\); got shape \(1, 1\)"),
        (["a", "b"], [0.5, 0.5], r"`logging_propensity` must be numeric; got dtype"),
    ],
)
def test_importance_weights_errors(p, t, match):
    with pytest.raises(ValidationError, match=match):
        importance_weights(p, t)


def test_max_weight_must_be_positive():
    with pytest.raises(ValueError, match=r"`max_weight` must be a positive finite number"):
        importance_weights([0.5], [0.5], max_weight=0.0)


def test_weight_moments_equal_direct_sums_and_chunking_invariant():
    rng = np.random.default_rng(2)
    n = 1001
    r = rng.normal(size=n)
    p = rng.uniform(0.1, 1.0, size=n)
    t = rng.uniform(size=(n, 3))
    w = t / p[:, None]
    cw = np.minimum(w, 2.0)
    whole = weight_moments(r, p, t, max_weight=2.0)
    np.testing.assert_allclose(whole["sum_w"], w.sum(0))
    np.testing.assert_allclose(whole["sum_w2r2"], ((w * r[:, None]) ** 2).sum(0))
    np.testing.assert_allclose(whole["sum_cwr"], (cw * r[:, None]).sum(0))
    np.testing.assert_allclose(whole["sum_cw2r"], (cw**2 * r[:, None]).sum(0))
    np.testing.assert_allclose(whole["max_w"], w.max(0))
    np.testing.assert_array_equal(whole["n_clipped"], (w > 2.0).sum(0))
    assert int(whole["n"]) == n
    chunked = weight_moments(r, p, t, max_weight=2.0, chunk_size=7)
    for key in MOMENT_KEYS:
        np.testing.assert_allclose(chunked[key], whole[key], rtol=1e-12)
    f32 = weight_moments(r.astype(np.float32), p.astype(np.float32), t.astype(np.float32))
    f64 = weight_moments(
        r.astype(np.float32).astype(np.float64),
        p.astype(np.float32).astype(np.float64),
        t.astype(np.float32).astype(np.float64),
    )
    for key in ("sum_w", "sum_wr", "sum_w2r2"):
        assert f32[key].dtype == np.float64
        np.testing.assert_allclose(f32[key], f64[key], rtol=1e-6)


def test_weight_moments_without_clipping_copies_raw_sums():
    m = weight_moments([1.0, 0.0], [0.5, 0.5], [1.0, 0.5])
    # w = [2, 1]: sum 3, sum w^2 5, sum w r = 2
    assert m["sum_w"][0] == 3.0 and m["sum_w2"][0] == 5.0 and m["sum_wr"][0] == 2.0
    assert m["sum_cw"][0] == 3.0 and m["n_clipped"][0] == 0.0


def test_factor_weights_by_hand():
    logged = {"retrieval": [0.5, 0.2, 0.1], "ranking": [0.25, 1.0, 0.5]}
    # only ranking changes: retrieval cancels; 0.5/0.25 = 2, 0.5/1 = 0.5, 0/0.5 = 0
    np.testing.assert_allclose(factor_weights(logged, {"ranking": [0.5, 0.5, 0.0]}), [2, 0.5, 0])
    # both change: (1/0.5)*(0.5/0.25) = 4; (0.4/0.2)*(0.5/1) = 1; (0.1/0.1)*(1/0.5) = 2
    both = factor_weights(logged, {"retrieval": [1.0, 0.4, 0.1], "ranking": [0.5, 0.5, 1.0]})
    np.testing.assert_allclose(both, [4.0, 1.0, 2.0])
    # one (n,) factor times one (n, P) factor broadcasts over policies
    multi = factor_weights(
        logged, {"retrieval": [1.0, 0.4, 0.1], "ranking": [[0.5, 0.25], [0.5, 1.0], [1.0, 0.5]]}
    )
    np.testing.assert_allclose(multi, [[4.0, 2.0], [1.0, 2.0], [2.0, 1.0]])
    np.testing.assert_allclose(
        factor_weights(logged, {"ranking": [0.5, 0.5, 0.0]}, max_weight=1.0), [1.0, 0.5, 0.0]
    )


@pytest.mark.parametrize(
    ("target", "match"),
    [
        ({}, r"`target_factors` is empty"),
        ({"blending": [0.5, 0.5]}, r"changed factors \['blending'\] have no logged propensity"),
        ({"ranking": [0.5]}, r"factor 'ranking': all factor arrays must have the same number"),
        ({"ranking": [0.5, 1.5]}, r"`target__ranking` must be in \[0, 1\]"),
    ],
)
def test_factor_weights_errors(target, match):
    with pytest.raises(ValidationError, match=match):
        factor_weights({"retrieval": [0.5, 0.5], "ranking": [0.5, 0.5]}, target)


def test_factor_replacement_is_unbiased_when_one_factor_changes():
    """Two-stage decisions: retrieval picks a pool s, ranking picks an item a within it.

    Only the ranking policy changes; the retrieval propensity is logged but cancels. The exact
    target value is sum_s q1(s) sum_a q2*(a|s) mu(s, a).
    """
    rng = np.random.default_rng(3)
    q1 = np.array([0.3, 0.7])  # retrieval, unchanged
    q2 = np.array([[0.6, 0.3, 0.1], [0.2, 0.2, 0.6]])  # logged ranking
    q2_new = np.array([[0.1, 0.3, 0.6], [0.5, 0.4, 0.1]])  # candidate ranking
    mu = np.array([[0.1, 0.5, 0.9], [0.3, 0.2, 0.7]])
    truth = float(np.sum(q1[:, None] * q2_new * mu))
    reps, n = 300, 2000
    s = (rng.uniform(size=(reps, n)) > q1[0]).astype(int)
    u = rng.uniform(size=(reps, n))
    a = (u[..., None] > np.cumsum(q2[s], axis=-1)).sum(-1)
    r = (rng.uniform(size=(reps, n)) < mu[s, a]).astype(float)
    w = factor_weights(
        {"retrieval": q1[s].ravel(), "ranking": q2[s, a].ravel()},
        {"ranking": q2_new[s, a].ravel()},
    ).reshape(reps, n)
    estimates = (w * r).mean(axis=1)
    se = estimates.std(ddof=1) / np.sqrt(reps)
    assert abs(estimates.mean() - truth) < 3 * se
    # the logged factor product would be wrong if used as the target probability of retrieval
    wrong = (q2_new[s, a] / (q1[s] * q2[s, a]) * r).mean(axis=1)
    assert abs(wrong.mean() - truth) > 10 * se
