"""Bootstrap: the resample counts, hand replicates, in-resample renormalization, BCa, errors.

The counts are exact multinomial draws over the rows up to ``EXACT_MAX_ROWS`` rows and
Poisson(1) above (or multinomial over few distinct rows); tests that need the Poisson path use
more rows than that, or lower the threshold with monkeypatch.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats

import ope._kernel as kernel
import ope.intervals._resampling as rs
import ope.intervals.bootstrap as bs
from ope.estimators import IPS, SNIPS
from ope.exceptions import EstimationError, ParameterError, SmallSampleWarning
from ope.intervals.bootstrap import (
    POISSON_TABLE,
    bootstrap_interval,
    bootstrap_replicates,
    default_n_resamples,
    min_resamples,
    resample_counts,
    shared_bootstrap,
)

R = np.array([1.0, 0.0, 1.0, 0.5, 0.0])
W = np.array([2.0, 2.0, 0.5, 0.5, 0.5])
#: rows above the multinomial threshold: the Poisson path (continuous columns, all distinct)
N_POISSON = bs.EXACT_MAX_ROWS + 3_001


def _ratio(m):
    return m[..., 0] / m[..., 1]


def _mean(m):
    return m[..., 0]


# ------------------------------------------------------------------------------- the counts
def test_replicates_match_a_hand_resampling_with_renormalization():
    """The same counts by hand; SNIPS is renormalized inside each resample."""
    comps = np.c_[W * R, W]
    reps = bootstrap_replicates(comps, _ratio, n_resamples=6, rng=7)
    counts = resample_counts(5, 6, rng=7)
    assert (counts.sum(axis=1) == 5).all()  # multinomial: n rows per resample
    by_hand = (counts @ (W * R)) / (counts @ W)
    np.testing.assert_allclose(reps, by_hand, rtol=1e-12)
    # keeping the full-sample denominator (sum w = 5.5) gives different replicates
    assert not np.allclose(reps, (counts @ (W * R)) / 5.5)
    # percentile interval = the empirical quantiles of the replicates
    ci = bootstrap_interval(comps, _ratio, n_resamples=200, rng=7, confidence_level=0.5)
    ref = resample_counts(5, 200, rng=7) @ comps
    np.testing.assert_allclose(
        tuple(ci), np.quantile(ref[:, 0] / ref[:, 1], [0.25, 0.75]), rtol=1e-12
    )


def test_multinomial_counts_have_the_multinomial_moments():
    n, b = 40, 20_000
    c = resample_counts(n, b, rng=3)
    assert (c.sum(axis=1) == n).all()
    # each count is Binomial(n, 1/n): mean 1, variance 1 - 1/n; two counts covary by -1/n
    assert c.mean() == pytest.approx(1.0, abs=1e-12)
    se = math.sqrt(2.0 / (b * n))  # about the sd of a variance estimate of b n counts
    assert c.var() == pytest.approx(1 - 1 / n, abs=5 * se)
    assert np.mean(c[:, 0] * c[:, 1]) - 1.0 == pytest.approx(-1 / n, abs=5 * math.sqrt(3 / b))


def test_the_poisson_table_is_poisson_one_to_two_to_the_minus_16():
    assert POISSON_TABLE.size == 1 << 16 and POISSON_TABLE.dtype == np.uint8
    pmf = np.bincount(POISSON_TABLE) / POISSON_TABLE.size
    exact = stats.poisson.pmf(np.arange(pmf.size), 1.0)
    assert np.abs(pmf - exact).max() <= 2.0**-16
    values = np.arange(pmf.size)
    assert pmf @ values == pytest.approx(1.0, abs=1e-4)
    assert pmf @ values**2 - (pmf @ values) ** 2 == pytest.approx(1.0, abs=1e-4)


def test_poisson_counts_above_the_threshold():
    c = resample_counts(N_POISSON, 50, rng=1)
    assert c.shape == (50, N_POISSON)
    assert not (c.sum(axis=1) == N_POISSON).all()  # Poisson: the resample size varies
    m = c.size
    assert c.mean() == pytest.approx(1.0, abs=5 / math.sqrt(m))
    assert c.var() == pytest.approx(1.0, abs=5 * math.sqrt(3.0 / m))
    assert set(np.unique(c)) <= set(range(9))
    # neighbouring rows and resamples are uncorrelated
    z = c - 1.0
    assert abs(np.mean(z[:, 1:] * z[:, :-1])) < 5 / math.sqrt(m)
    assert abs(np.mean(z[1:] * z[:-1])) < 5 / math.sqrt(m)


def test_the_sums_use_exactly_the_counts_of_resample_counts():
    rng = np.random.default_rng(0)
    for n in (300, N_POISSON):  # the multinomial and the Poisson path
        a = rng.uniform(size=(n, 2))
        reps = bootstrap_replicates(a, _ratio, n_resamples=37, rng=11)
        c = resample_counts(n, 37, rng=11)
        np.testing.assert_allclose(reps, (c @ a[:, 0]) / (c @ a[:, 1]), rtol=1e-12)


@pytest.mark.parametrize("n", [257, N_POISSON])
def test_compiled_and_numpy_backends_give_the_same_replicates(n):
    if not kernel.numba_available():
        pytest.skip("numba is not installed (the optional extra 'fast')")
    a = np.random.default_rng(1).exponential(size=(n, 3))
    try:
        kernel.set_backend("numba")
        fast = bootstrap_replicates(
            a, lambda m: m[..., 0] / m[..., 1] + m[..., 2], rng=4, n_resamples=203
        )
        kernel.set_backend("numpy")
        slow = bootstrap_replicates(
            a, lambda m: m[..., 0] / m[..., 1] + m[..., 2], rng=4, n_resamples=203
        )
    finally:
        kernel.set_backend(None)
    np.testing.assert_allclose(fast, slow, rtol=1e-12)


def test_the_bootstrap_loops_compile_once_through_the_kernel_registry(monkeypatch):
    """One compile registry: the bootstrap has no numba.njit of its own, and threads asking for
    its loops at once (Dask's threaded workers) get one compilation, under the kernel's lock."""
    import inspect
    import threading

    assert "njit" not in inspect.getsource(bs) and "njit" not in inspect.getsource(rs)
    if not kernel.numba_available():
        pytest.skip("numba is not installed (the optional extra 'fast')")
    monkeypatch.setattr(kernel, "_LOOPS", {})  # as in a fresh process
    calls = []
    real = kernel._njit
    monkeypatch.setattr(kernel, "_njit", lambda *a: calls.append(a[1].__name__) or real(*a))
    got, start = [], threading.Barrier(4)

    def ask():
        start.wait()
        got.append(rs.compiled_sums())

    try:
        kernel.set_backend("numba")
        workers = [threading.Thread(target=ask) for _ in range(4)]
        for t in workers:
            t.start()
        for t in workers:
            t.join()
    finally:
        kernel.set_backend(None)
    assert len(got) == 4 and all(g is got[0] for g in got)
    assert sorted(calls) == ["_nb_multinomial_sums", "_nb_poisson_sums"]
    assert kernel._LOOPS[rs.__name__] is got[0]


@pytest.mark.parametrize("backend", ["numpy", None])
def test_counts_do_not_depend_on_the_block_sizes(monkeypatch, backend):
    a = np.random.default_rng(2).uniform(size=(N_POISSON, 2))
    ref = bootstrap_replicates(a, _ratio, n_resamples=101, rng=0)
    monkeypatch.setattr(rs, "BLOCK_ROWS", 4 * 1001)  # many blocks, the last one padded
    monkeypatch.setattr(rs, "SUB_BLOCK_ROWS", 4 * 13)
    monkeypatch.setattr(rs, "NUMPY_SUB_BLOCK_ROWS", 4 * 77)
    monkeypatch.setattr(rs, "NUMPY_COUNT_ELEMENTS", 5_000)
    try:
        kernel.set_backend(backend)
        again = bootstrap_replicates(a, _ratio, n_resamples=101, rng=0)
    finally:
        kernel.set_backend(None)
    np.testing.assert_allclose(again, ref, rtol=1e-12)


def test_few_distinct_rows_are_resampled_as_exact_multinomial_counts():
    """Two reward values, three weights: the counts of the six distinct rows are multinomial,
    so every replicate of the mean reward is a multiple of 1 / n."""
    rng = np.random.default_rng(3)
    n = 2 * bs.EXACT_MAX_ROWS
    w = rng.choice([0.5, 1.0, 2.0], size=n)
    r = rng.integers(0, 2, size=n).astype(float)
    reps = bootstrap_replicates(np.c_[w * r, w, r], lambda m: m[..., 2], n_resamples=300, rng=1)
    np.testing.assert_allclose(reps * n, np.round(reps * n), atol=1e-6)
    assert np.std(reps) == pytest.approx(r.std() / math.sqrt(n), rel=0.15)


# ------------------------------------------------------------------------------- intervals
def test_snips_bootstrap_renormalizes_inside_each_resample():
    """Constant rewards: SNIPS is exactly 1 in every resample, so the interval is [1, 1].

    With the full-sample denominator the replicates would be sum(c w r) / sum(w), which varies.
    """
    rng = np.random.default_rng(0)
    n = 300
    p = np.full(n, 0.5)
    t = rng.uniform(size=n)
    res = SNIPS().estimate(np.ones(n), p, t)
    lo, hi = res.ci(method="bootstrap", rng=1)
    assert lo == pytest.approx(1.0, abs=1e-12) and hi == pytest.approx(1.0, abs=1e-12)
    w = t / p
    c = resample_counts(n, 200, rng=1)
    assert np.ptp(c @ w / w.sum()) > 0.1


def test_percentile_interval_is_close_to_normal_for_a_mean():
    rng = np.random.default_rng(3)
    x = rng.normal(1.0, 2.0, size=2000)
    ci = bootstrap_interval(x, _mean, n_resamples=4000, rng=4)
    half = 1.959963984540054 * x.std(ddof=1) / np.sqrt(x.size)
    assert ci.low == pytest.approx(x.mean() - half, abs=0.1 * half)
    assert ci.high == pytest.approx(x.mean() + half, abs=0.1 * half)


def test_bca_agrees_with_scipy():
    rng = np.random.default_rng(5)
    x = rng.exponential(size=150)
    ours = bootstrap_interval(x, _mean, n_resamples=20000, rng=6, bootstrap_method="bca")
    ref = stats.bootstrap(
        (x,), np.mean, n_resamples=20000, method="BCa", rng=np.random.default_rng(8)
    )
    width = ref.confidence_interval.high - ref.confidence_interval.low
    assert ours.low == pytest.approx(ref.confidence_interval.low, abs=0.05 * width)
    assert ours.high == pytest.approx(ref.confidence_interval.high, abs=0.05 * width)
    # for right-skewed data BCa moves both ends up relative to the percentile interval
    pct = bootstrap_interval(x, _mean, n_resamples=20000, rng=6)
    assert ours.high > pct.high and ours.low > pct.low


def test_bca_agrees_with_scipy_on_a_ratio_of_means():
    # a self-normalized (SNIPS-like) statistic: scipy resamples the paired columns together
    rng = np.random.default_rng(11)
    y, z = rng.exponential(size=300), rng.uniform(0.5, 2.0, size=300)
    comps = np.c_[y * z, z]
    ours = bootstrap_interval(comps, _ratio, n_resamples=20000, rng=12, bootstrap_method="bca")
    ref = stats.bootstrap(
        (y * z, z),
        lambda a, b, axis=-1: a.mean(axis=axis) / b.mean(axis=axis),
        paired=True,
        vectorized=True,
        n_resamples=20000,
        method="BCa",
        rng=np.random.default_rng(13),
    ).confidence_interval
    width = ref.high - ref.low
    assert ours.low == pytest.approx(ref.low, abs=0.03 * width)
    assert ours.high == pytest.approx(ref.high, abs=0.03 * width)


@pytest.mark.parametrize("method", ["percentile", "bca"])
@pytest.mark.parametrize("statistic", [_ratio, _mean], ids=["snips", "ips"])
def test_poisson_intervals_match_the_multinomial_ones_within_monte_carlo_error(
    monkeypatch, method, statistic
):
    """The same data resampled both ways (the multinomial path is the classical bootstrap, see
    the hand test above): the ends agree within Monte Carlo error.

    Tolerance: an end of a B-replicate percentile interval has Monte Carlo sd about
    ``sd * sqrt(a (1 - a) / B) / phi(z_a)`` (0.038 sd of the replicates at B = 4000, a = 0.025);
    the difference of two independent ends is sqrt(2) times that; 4 of those are 0.21 sd. The
    Poisson and multinomial bootstraps differ by O(1/n) beyond that. (The mean ``S(c w r) / n``
    instead of ``S(c w r) / S(c)`` would widen the IPS interval about 3-fold here.)
    """
    rng = np.random.default_rng(21)
    n = N_POISSON
    w = rng.uniform(0.5, 1.5, size=n)
    r = 2.0 + rng.uniform(size=n) * w
    comps = np.c_[w * r, w]
    b = 4000
    poisson = bootstrap_interval(comps, statistic, n_resamples=b, rng=1, bootstrap_method=method)
    reps = bootstrap_replicates(comps, statistic, n_resamples=b, rng=1)
    monkeypatch.setattr(rs, "EXACT_MAX_ROWS", n)
    multinomial = bootstrap_interval(
        comps, statistic, n_resamples=b, rng=2, bootstrap_method=method
    )
    tol = 4 * math.sqrt(2) * np.std(reps) * math.sqrt(0.025 * 0.975 / b) / stats.norm.pdf(1.96)
    assert poisson.low == pytest.approx(multinomial.low, abs=tol)
    assert poisson.high == pytest.approx(multinomial.high, abs=tol)


def test_estimate_bootstrap_is_reproducible_and_records_the_seed_effect():
    rng = np.random.default_rng(9)
    n = 400
    res = IPS().estimate(rng.uniform(size=n), np.full(n, 0.5), rng.uniform(size=n))
    a = res.ci(method="bootstrap", rng=1, n_resamples=500)
    b = res.ci(method="bootstrap", rng=1, n_resamples=500)
    c = res.ci(method="bootstrap", rng=2, n_resamples=500)
    assert a == b and a != c
    gen = res.ci(method="bootstrap", rng=np.random.default_rng(1), n_resamples=500)
    assert gen == a  # a Generator seeded 1 draws the same counts as the seed 1
    bca = res.with_ci(0.9, "bootstrap", rng=1, bootstrap_method="bca")
    assert bca.ci_method == "bootstrap" and bca.confidence_level == 0.9
    assert bca.ci_low < res.value < bca.ci_high


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
    ("alternatives", "named", "absent"),
    [
        (("betting", "bernstein"), "ci(method='betting' or 'bernstein')", "normal"),
        (("bootstrap", "hoeffding"), "ci(method='hoeffding')", "betting"),
        (("bootstrap",), "ci(method='normal' or 't')", "betting"),
        ((), "ci(method='normal' or 't')", "bernstein"),
    ],
)
def test_an_undefined_bootstrap_advises_the_methods_the_caller_offers(alternatives, named, absent):
    w = np.zeros(50)
    w[0] = 1.0  # one row carries all the weight: most resamples are undefined
    with pytest.raises(EstimationError, match="undefined estimate") as info:
        bootstrap_interval(np.c_[w, w], _ratio, n_resamples=200, rng=0, alternatives=alternatives)
    assert named in str(info.value) and absent not in str(info.value)


def test_the_shared_bootstrap_and_weighted_rows_advise_what_the_estimate_allows():
    """SNIPS offers betting and empirical likelihood, not Bernstein; rows with sampling weights
    allow no bounded interval (each refuses them): the advice of an undefined bootstrap follows
    that in ``shared_bootstrap`` (as ``ope.evaluate`` runs it) and in ``Estimate.ci``."""
    n = 40
    r, p, t = np.linspace(0.0, 1.0, n), np.full(n, 0.5), np.zeros(n)
    t[0] = 1.0  # one row carries all the weight: most resamples are undefined
    with pytest.raises(EstimationError, match="undefined estimate") as shared:
        shared_bootstrap(r, p, t, estimators=(SNIPS(),), n_resamples=200, rng=0)
    assert "ci(method='betting' or 'empirical_likelihood')" in str(shared.value)
    assert "bernstein" not in str(shared.value)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        weighted = SNIPS().estimate(r, p, t, sampling_weight=np.full(n, 2.0))
    with pytest.raises(EstimationError, match="undefined estimate") as info:
        weighted.ci(method="bootstrap", rng=0)
    assert "ci(method='normal' or 't')" in str(info.value) and "betting" not in str(info.value)


# ------------------------------------------------------------------------------- arguments
@pytest.mark.parametrize(
    ("level", "fewest"), [(0.95, 81), (0.99, 401), (0.9, 41), (0.5, 9), (0.999, 4001)]
)
def test_min_resamples_keeps_the_two_most_extreme_replicates_out_of_the_ends(level, fewest):
    assert min_resamples(level) == fewest
    alpha = (1 - level) / 2
    assert alpha * (fewest - 1) >= 2 - 1e-9  # the lower end sits at order position >= 2
    assert alpha * (fewest - 2) < 2  # and one fewer resample would not do
    assert default_n_resamples(level) == max(bs.DEFAULT_N_RESAMPLES, fewest)


def test_the_position_of_the_ends_with_the_fewest_resamples():
    """With min_resamples(0.95) = 81 replicates 0..80 the ends are the 3rd smallest and the 3rd
    largest exactly; with 80 they would interpolate towards the 2nd."""
    x = np.arange(81.0)
    assert tuple(np.quantile(x, [0.025, 0.975])) == (2.0, 78.0)
    assert np.quantile(np.arange(80.0), 0.025) < 2.0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            {"bootstrap_method": "studentized"},
            r"`bootstrap_method` must be one of 'percentile', 'bca'; got 'studentized'",
        ),
        ({"n_resamples": 0}, r"`n_resamples` must be a positive integer; got 0"),
        (
            {"n_resamples": 1},
            r"`n_resamples` must be at least 81 for a 0.95 interval .*got 1\. Pass n_resamples=2000",
        ),
        ({"n_resamples": 80}, r"`n_resamples` must be at least 81 for a 0.95 interval"),
        ({"n_resamples": 400, "confidence_level": 0.99}, r"at least 401 for a 0.99 interval"),
        ({"n_resamples": 40, "bootstrap_method": "bca"}, r"at least 81"),
        ({"n_resamples": 100.0}, r"`n_resamples` must be a positive integer"),
        ({"confidence_level": 1.5}, r"`confidence_level` must be in \(0, 1\)"),
        ({"rng": "seven"}, r"rng must be an int seed"),
    ],
)
def test_argument_errors(kwargs, match):
    with pytest.raises(ParameterError, match=match):
        bootstrap_interval(R, _mean, **kwargs)


def test_the_fewest_resamples_are_accepted_and_the_default_covers_high_levels():
    comps = np.linspace(0.0, 1.0, 50)
    lo, hi = bootstrap_interval(comps, _mean, n_resamples=81, rng=0)
    assert lo < 0.5 < hi
    lo, hi = bootstrap_interval(comps, _mean, confidence_level=0.999, rng=0)  # 4001 resamples
    assert lo < 0.5 < hi


def test_component_errors():
    with pytest.raises(ValueError, match=r"with n >= 2 rows; got \(1, 1\)"):
        bootstrap_interval([1.0], _mean)
    with pytest.raises(ValueError, match=r"`components` must be finite"):
        bootstrap_interval([1.0, np.nan], _mean)


def test_a_progress_bar_over_row_blocks_for_long_bootstraps(monkeypatch):
    calls = []

    def fake(iterable, **kw):
        calls.append(kw)
        return iterable

    monkeypatch.setattr(rs, "progress", fake)
    a = np.random.default_rng(0).uniform(size=N_POISSON)
    bootstrap_replicates(a, _mean, n_resamples=100, rng=0)
    assert calls == []  # short: no bar
    monkeypatch.setattr(rs, "PROGRESS_MIN_COUNTS", 1000)
    monkeypatch.setattr(rs, "BLOCK_ROWS", 4096)
    bootstrap_replicates(a, _mean, n_resamples=100, rng=0)
    assert calls == [{"desc": "bootstrap", "total": -(-N_POISSON // 4096), "unit": "block"}]


# ------------------------------------------------------------------------------- coverage
@pytest.mark.slow
def test_snips_bootstrap_coverage_over_replications():
    """Percentile bootstrap of SNIPS covers the exact value about 95% of the time (n = 300:
    multinomial counts)."""
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
