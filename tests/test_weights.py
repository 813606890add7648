"""Tests of the weight kernel: hand values, validation messages, chunking, float32, factors."""

from __future__ import annotations

import numpy as np
import pytest

from ope.exceptions import ValidationError
from ope.moments import centered_moments
from ope.streaming import MomentStats
from ope.weights import (
    MOMENT_KEYS,
    factor_weights,
    importance_weights,
)


def _moment_sums(reward, logging_propensity, target_propensity, **kwargs):
    """The kernel's raw per-policy sums (``MomentStats.moments``) with ``n``, ``sum_r`` and
    ``sum_r2``."""
    stats = MomentStats.from_arrays(reward, logging_propensity, target_propensity, **kwargs)
    return {**stats.moments, "n": stats.n, "sum_r": stats.sum_r, "sum_r2": stats.sum_r2}


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
        (
            [0.5, 0.0, 0.0],
            [0.5, 0.5, 0.5],
            r"`logging_propensity` must be in \(0, 1\]; 2 rows are not \(first at row 1",
        ),
        ([0.5, 1.5, 0.5], [0.5, 0.5, 0.5], r"must be in \(0, 1\].*on_invalid='drop'"),
        (
            [0.5, 0.5, np.nan],
            [0.5, 0.5, 0.5],
            r"`logging_propensity` must be finite; 1 rows are NaN or infinite \(first at row 2\)",
        ),
        (
            [0.5, 0.5, 0.5],
            [0.5, -0.1, 0.5],
            r"`target_propensity` must be in \[0, 1\].*first at row 1.*not scores",
        ),
        (
            [0.5, 0.5],
            [0.5, 0.5, 0.5],
            r"`target_propensity` has 3 rows but `logging_propensity` has 2",
        ),
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


def test_moment_sums_equal_direct_sums_and_chunking_invariant():
    rng = np.random.default_rng(2)
    n = 1001
    r = rng.normal(size=n)
    p = rng.uniform(0.1, 1.0, size=n)
    t = rng.uniform(size=(n, 3))
    w = t / p[:, None]
    cw = np.minimum(w, 2.0)
    whole = _moment_sums(r, p, t, max_weight=2.0)
    np.testing.assert_allclose(whole["sum_w"], w.sum(0))
    np.testing.assert_allclose(whole["sum_w2r2"], ((w * r[:, None]) ** 2).sum(0))
    np.testing.assert_allclose(whole["sum_cwr"], (cw * r[:, None]).sum(0))
    np.testing.assert_allclose(whole["sum_cw2r"], (cw**2 * r[:, None]).sum(0))
    np.testing.assert_allclose(whole["max_w"], w.max(0))
    np.testing.assert_array_equal(whole["n_clipped"], (w > 2.0).sum(0))
    assert int(whole["n"]) == n
    chunked = _moment_sums(r, p, t, max_weight=2.0, chunk_size=7)
    for key in MOMENT_KEYS:
        np.testing.assert_allclose(chunked[key], whole[key], rtol=1e-12)
    f32 = _moment_sums(r.astype(np.float32), p.astype(np.float32), t.astype(np.float32))
    f64 = _moment_sums(
        r.astype(np.float32).astype(np.float64),
        p.astype(np.float32).astype(np.float64),
        t.astype(np.float32).astype(np.float64),
    )
    for key in ("sum_w", "sum_wr", "sum_w2r2"):
        assert f32[key].dtype == np.float64
        np.testing.assert_allclose(f32[key], f64[key], rtol=1e-6)


def test_moment_sums_without_clipping_copy_raw_sums():
    m = _moment_sums([1.0, 0.0], [0.5, 0.5], [1.0, 0.5])
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


# ---------------------------------------------------------------------------------------------
# the centred-moment kernel (blocked, transposed, clipped only where a block needs it)
# ---------------------------------------------------------------------------------------------
def _direct_centered(r, p, t, max_weight):
    """Means, centred co-moments, max and clip counts by plain numpy over all rows at once."""
    shift = r.mean()
    w = t / p[:, None]
    mean, com = [], []
    for ww in (w, np.minimum(w, max_weight)):
        a, b = ww * (r - shift)[:, None], ww
        da, db = a - a.mean(0), b - b.mean(0)
        mean.append([a.mean(0), b.mean(0)])
        com.append([(da * da).sum(0), (da * db).sum(0), (db * db).sum(0)])
    rs = r - shift
    return {
        "shift": shift,
        "mean": np.array(mean),
        "comoment": np.array(com),
        "max_w": w.max(0),
        "n_clipped": (w > max_weight).sum(0),
        "r_m2": ((rs - rs.mean()) ** 2).sum(),
    }


def _kernel_data(n=1003, seed=5):
    rng = np.random.default_rng(seed)
    r = 3.0 + rng.normal(size=n)
    p = rng.uniform(0.1, 1.0, size=n)
    t = rng.uniform(size=(n, 4))  # weights up to 1 / 0.1 = 10
    t[:, 0] = 0.9 * p * rng.uniform(size=n)  # column 0: w < 0.9, never clipped at 2
    return r, p, t


@pytest.mark.parametrize("chunk_size", [1, 7, 64, 1003, 1 << 18])
@pytest.mark.parametrize("max_weight", [2.0, 0.5, 100.0])
def test_centered_kernel_equals_direct_two_pass(chunk_size, max_weight):
    # max_weight 2: some columns clipped, column 0 not (the skip path); 0.5: every column
    # clipped in most blocks (the in-place path); 100: nothing clipped
    r, p, t = _kernel_data()
    got = centered_moments(r, p, t, max_weight=max_weight, chunk_size=chunk_size)
    ref = _direct_centered(r, p, t, max_weight)
    assert got.n == r.size and got.shift == pytest.approx(ref["shift"], rel=1e-14)
    np.testing.assert_allclose(got.mean, ref["mean"], rtol=1e-12, atol=1e-14)
    # co-moments against the scale sqrt(caa cbb) (the cross term can be near zero)
    caa, cbb = ref["comoment"][:, 0], ref["comoment"][:, 2]
    scale = np.stack([caa, np.sqrt(caa * cbb), cbb], axis=1)
    assert np.max(np.abs(got.comoment - ref["comoment"]) / scale) < 1e-12
    np.testing.assert_array_equal(got.max_w, ref["max_w"])
    np.testing.assert_array_equal(got.n_clipped, ref["n_clipped"])
    assert got.r_mean == pytest.approx(0.0, abs=1e-14)
    assert got.r_m2 == pytest.approx(ref["r_m2"], rel=1e-12)
    if max_weight == 2.0:
        assert ref["n_clipped"][0] == 0 and ref["n_clipped"][1:].min() > 0


def test_centered_kernel_without_clip_level_reuses_raw_moments():
    r, p, t = _kernel_data()
    got = centered_moments(r, p, t, max_weight=None, chunk_size=100)
    np.testing.assert_array_equal(got.mean[1], got.mean[0])
    np.testing.assert_array_equal(got.comoment[1], got.comoment[0])
    np.testing.assert_array_equal(got.n_clipped, np.zeros(4))


def test_centered_kernel_float32_divides_in_float64():
    # float32 inputs are divided and summed in float64: the result is that of the float32
    # values cast to float64, bit for bit (a float32 division would differ in the 8th digit)
    r, p, t = _kernel_data()
    r32, p32, t32 = r.astype(np.float32), p.astype(np.float32), t.astype(np.float32)
    a = centered_moments(r32, p32, t32, max_weight=2.0, chunk_size=64)
    b = centered_moments(
        r32.astype(np.float64),
        p32.astype(np.float64),
        t32.astype(np.float64),
        max_weight=2.0,
        chunk_size=64,
    )
    for attr in ("mean", "comoment", "max_w", "n_clipped"):
        np.testing.assert_array_equal(getattr(a, attr), getattr(b, attr))
    assert a.mean.dtype == np.float64


def test_centered_kernel_refuses_bad_chunk_size():
    r, p, t = _kernel_data(n=10)
    with pytest.raises(ValueError, match=r"`chunk_size` must be a positive integer; got 0"):
        centered_moments(r, p, t, max_weight=None, chunk_size=0)
    with pytest.raises(ValueError, match=r"`chunk_size` must be a positive integer; got 0"):
        _moment_sums(r, p, t, chunk_size=0)


def test_moment_sums_partial_blocks_and_single_policy():
    r, p, t = _kernel_data()
    w = t[:, 2] / p
    m = _moment_sums(r, p, t[:, 2], max_weight=2.0, chunk_size=10)
    assert m["sum_w"].shape == (1,)
    np.testing.assert_allclose(m["sum_w2r"], [(w**2 * r).sum()], rtol=1e-12)
    np.testing.assert_allclose(m["sum_cw2"], [(np.minimum(w, 2.0) ** 2).sum()], rtol=1e-12)
    assert m["n_clipped"][0] == (w > 2.0).sum() and m["max_w"][0] == w.max()
    assert float(m["sum_r2"]) == pytest.approx((r * r).sum(), rel=1e-12)


# validation reads min/max block by block; the detailed messages (count, first row) must be
# those of the full masks, including rows past the first validation block
_BIG_N: int = 3 * (1 << 18)  # 2 blocks of the (n,) propensities, 5 of the (n, 3) targets


@pytest.mark.parametrize(
    ("where", "value", "match"),
    [
        (
            "target",
            np.nan,
            r"`target_propensity` must be finite; 1 rows are NaN or infinite \(first at row 700000\)",
        ),
        (
            "target",
            1.5,
            r"`target_propensity` must be in \[0, 1\].*; 2 rows are not \(first at row 300000\)",
        ),
        ("target", -np.inf, r"`target_propensity` must be finite; 2 rows"),
        (
            "logging",
            0.0,
            r"`logging_propensity` must be in \(0, 1\]; 2 rows are not \(first at row 300000: 0\.0\)",
        ),
        (
            "logging",
            np.inf,
            r"`logging_propensity` must be finite; 2 rows are NaN or infinite \(first at row 300000\)",
        ),
    ],
)
def test_blockwise_validation_reports_global_rows(where, value, match):
    rng = np.random.default_rng(0)
    p = rng.uniform(0.2, 1.0, size=_BIG_N)
    t = rng.uniform(size=(_BIG_N, 3)) * p[:, None]
    rows = [700_000] if np.isnan(value) else [300_000, 700_000]
    if where == "target":
        t[rows, 2] = value
    else:
        p[rows] = value
    with pytest.raises(ValidationError, match=match):
        importance_weights(p, t)
