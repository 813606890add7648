"""Vectorized bootstrap: hand replicates, in-resample renormalization, BCa, errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats

import ope.intervals.bootstrap as bs
from ope.estimators import SNIPS, IPS
from ope.exceptions import EstimationError, SmallSampleWarning
from ope.intervals.bootstrap import bootstrap_interval, bootstrap_replicates

R = np.array([1.0, 0.0, 1.0, 0.5, 0.0])
W = np.array([2.0, 2.0, 0.5, 0.5, 0.5])


def _ratio(m):
    return m[..., 0] / m[..., 1]


def test_replicates_match_a_hand_resampling_with_renormalization():
    """Draw the same indices by hand; SNIPS is renormalized inside each resample."""
    comps = np.c_[W * R, W]
    reps = bootstrap_replicates(comps, _ratio, n_resamples=6, rng=7)
    idx = np.random.default_rng(7).integers(0, 5, size=(6, 5))  # one block: same draws
    by_hand = np.array([(W[i] * R[i]).sum() / W[i].sum() for i in idx])
    np.testing.assert_allclose(reps, by_hand, rtol=1e-12)
    # keeping the full-sample denominator (sum w = 5.5) gives different replicates
    full_denominator = np.array([(W[i] * R[i]).sum() / 5.5 for i in idx])
    assert not np.allclose(reps, full_denominator)
    # percentile interval = the empirical quantiles of the replicates
    ci = bootstrap_interval(comps, _ratio, n_resamples=6, rng=7, confidence_level=0.5)
    assert (ci.low, ci.high) == tuple(np.quantile(by_hand, [0.25, 0.75]))


def test_snips_bootstrap_renormalizes_inside_each_resample():
    """Constant rewards: SNIPS is exactly 1 in every resample, so the interval is [1, 1].

    With the full-sample denominator the replicates would be sum(w* r*) / sum(w), which varies.
    """
    rng = np.random.default_rng(0)
    n = 300
    p = np.full(n, 0.5)
    t = rng.uniform(size=n)
    res = SNIPS().estimate(np.ones(n), p, t)
    lo, hi = res.ci(method="bootstrap", rng=1)
    assert lo == pytest.approx(1.0, abs=1e-12) and hi == pytest.approx(1.0, abs=1e-12)
    w = t / p
    idx = np.random.default_rng(1).integers(0, n, size=(200, n))
    full_denominator = w[idx].sum(axis=1) / w.sum()
    assert np.ptp(full_denominator) > 0.1


def test_percentile_interval_is_close_to_normal_for_a_mean():
    rng = np.random.default_rng(3)
    x = rng.normal(1.0, 2.0, size=2000)
    ci = bootstrap_interval(x, lambda m: m[..., 0], n_resamples=4000, rng=4)
    half = 1.959963984540054 * x.std(ddof=1) / np.sqrt(x.size)
    assert ci.low == pytest.approx(x.mean() - half, abs=0.1 * half)
    assert ci.high == pytest.approx(x.mean() + half, abs=0.1 * half)


def test_bca_agrees_with_scipy():
    rng = np.random.default_rng(5)
    x = rng.exponential(size=150)
    ours = bootstrap_interval(x, lambda m: m[..., 0], n_resamples=20000, rng=6, bootstrap_method="bca")
    ref = stats.bootstrap((x,), np.mean, n_resamples=20000, method="BCa", rng=np.random.default_rng(8))
    width = ref.confidence_interval.high - ref.confidence_interval.low
    assert ours.low == pytest.approx(ref.confidence_interval.low, abs=0.05 * width)
    assert ours.high == pytest.approx(ref.confidence_interval.high, abs=0.05 * width)
    # for right-skewed data BCa moves both ends up relative to the percentile interval
    pct = bootstrap_interval(x, lambda m: m[..., 0], n_resamples=20000, rng=6)
    assert ours.high > pct.high and ours.low > pct.low


def test_estimate_bootstrap_is_reproducible_and_records_the_seed_effect():
    rng = np.random.default_rng(9)
    n = 400
    res = IPS().estimate(rng.uniform(size=n), np.full(n, 0.5), rng.uniform(size=n))
    a = res.ci(method="bootstrap", rng=1, n_resamples=500)
    b = res.ci(method="bootstrap", rng=1, n_resamples=500)
    c = res.ci(method="bootstrap", rng=2, n_resamples=500)
    assert a == b and a != c
    bca = res.with_ci(0.9, "bootstrap", rng=1, bootstrap_method="bca")
    assert bca.ci_method == "bootstrap" and bca.confidence_level == 0.9
    assert bca.ci_low < res.value < bca.ci_high


def test_many_blocks(monkeypatch):
    monkeypatch.setattr(bs, "BLOCK_ELEMENTS", 12)  # 2 resamples of n = 5 per block
    reps = bootstrap_replicates(R, lambda m: m[..., 0], n_resamples=1001, rng=0)
    assert reps.shape == (1001,)
    assert reps.mean() == pytest.approx(R.mean(), abs=0.03)
    assert set(np.round(reps * 10)) <= set(range(0, 11))  # means of 5 values in {0, .5, 1}


def test_undefined_replicates_are_refused_or_warned():
    n = 50
    w = np.zeros(n)
    w[0] = 1.0  # one row carries all the weight: ~36% of resamples miss it (0/0)
    with pytest.raises(EstimationError, match=r"bootstrap resamples give an undefined estimate"):
        bootstrap_interval(np.c_[w, w], _ratio, n_resamples=200, rng=0)
    w = np.ones(n)
    w[:40] = 0.0  # 10 rows carry weight: a resample misses all of them with prob ~ 1e-5
    comps = np.c_[w * np.linspace(0, 1, n), w]
    with warnings.catch_warnings():
        warnings.simplefilter("error", SmallSampleWarning)
        bootstrap_interval(comps, _ratio, n_resamples=200, rng=0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"bootstrap_method": "studentized"}, r"`bootstrap_method` must be one of 'percentile', 'bca'; got 'studentized'"),
        ({"n_resamples": 0}, r"`n_resamples` must be a positive integer; got 0"),
        ({"confidence_level": 1.5}, r"`confidence_level` must be in \(0, 1\)"),
    ],
)
def test_argument_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        bootstrap_interval(R, lambda m: m[..., 0], **kwargs)


def test_component_errors():
    with pytest.raises(ValueError, match=r"with n >= 2 rows; got \(1, 1\)"):
        bootstrap_interval([1.0], lambda m: m[..., 0])
    with pytest.raises(ValueError, match=r"`components` must be finite"):
        bootstrap_interval([1.0, np.nan], lambda m: m[..., 0])


@pytest.mark.slow
def test_snips_bootstrap_coverage_over_replications():
    """Percentile bootstrap of SNIPS covers the exact value about 95% of the time."""
    rng = np.random.default_rng(21)
    reps, n = 400, 300
    pi0 = np.array([0.5, 0.3, 0.2])
    pi = np.array([0.2, 0.3, 0.5])
    mu = np.array([0.2, 0.5, 0.7])
    truth = float(pi @ mu)
    a = (rng.uniform(size=(reps, n, 1)) > np.cumsum(pi0)).sum(-1)
    r = (rng.uniform(size=(reps, n)) < mu[a]).astype(float)
    hits = 0
    for i in range(reps):  # replications, not resamples
        res = SNIPS().estimate(r[i], pi0[a[i]], pi[a[i]])
        lo, hi = res.ci(method="bootstrap", n_resamples=1000, rng=i)
        hits += lo <= truth <= hi
    # binomial sd at 400 reps is 0.011; allow about 3 sd
    assert abs(hits / reps - 0.95) < 0.035


@pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning")
def test_dr_bootstrap_resamples_rows_with_their_model_values():
    from ope.estimators import DR

    rng = np.random.default_rng(30)
    n = 3000
    p = np.full(n, 0.5)
    t = rng.choice([0.2, 0.8], size=n)
    q = rng.uniform(size=n)
    r = rng.binomial(1, q).astype(float)
    res = DR().estimate(r, p, t, q_logged=q, q_target=q * 1.1)
    lo, hi = res.ci(method="bootstrap", rng=0)
    assert hi - lo == pytest.approx(res.ci_high - res.ci_low, rel=0.1)
    assert lo < res.value < hi


def test_bca_agrees_with_scipy_on_a_ratio_of_means():
    # a self-normalized (SNIPS-like) statistic: scipy resamples the paired columns together
    rng = np.random.default_rng(11)
    y, z = rng.exponential(size=300), rng.uniform(0.5, 2.0, size=300)
    comps = np.c_[y * z, z]
    ours = bootstrap_interval(comps, _ratio, n_resamples=20000, rng=12, bootstrap_method="bca")
    ref = stats.bootstrap(
        (y * z, z), lambda a, b, axis=-1: a.mean(axis=axis) / b.mean(axis=axis), paired=True,
        vectorized=True, n_resamples=20000, method="BCa", rng=np.random.default_rng(13),
    ).confidence_interval
    width = ref.high - ref.low
    assert ours.low == pytest.approx(ref.low, abs=0.03 * width)
    assert ours.high == pytest.approx(ref.high, abs=0.03 * width)
