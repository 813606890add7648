"""shared_bootstrap: every candidate x estimator and the logging value from one set of counts.

It must give, interval by interval, what ``bootstrap_interval`` / ``Estimate.ci`` give with the
same seed (the same counts), on the multinomial and the Poisson path; record its seed; and take
the per-row arrays in any of their forms without changing a number.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import ope.intervals._resampling as rs
import ope.intervals.bootstrap as bs
from ope.estimators import DR, IPS, SNIPS, ClippedIPS, logging_value
from ope.exceptions import EstimationError, ParameterError, ValidationError
from ope.intervals.bootstrap import (
    SharedBootstrap,
    bootstrap_interval,
    resample_counts,
    shared_bootstrap,
)

N_POISSON = bs.EXACT_MAX_ROWS + 3_001
RR = (0.0, 1.0)


def _data(n: int, p_count: int = 3, seed: int = 0):
    rng = np.random.default_rng(seed)
    r = rng.uniform(size=n)
    p = rng.uniform(0.2, 1.0, size=n)
    t = rng.uniform(size=(n, p_count)) * p[:, None]
    t[:, -1] = np.minimum(1.0, t[:, -1] * 3.0)  # weights up to 3: clipped at 2 below binds
    return r, p, t


ESTIMATORS = [("ips", IPS()), ("snips", SNIPS()), ("clipped_ips", ClippedIPS(max_weight=2.0))]
IPS_SNIPS = (IPS(), SNIPS())


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # weight diagnostics of the random candidates
        yield


@pytest.mark.parametrize("n", [2_000, N_POISSON], ids=["multinomial", "poisson"])
@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_every_interval_equals_its_own_bootstrap_with_the_same_seed(n, method):
    r, p, t = _data(n)
    q = np.clip(r + 0.1, 0, 1)
    dr = DR().estimate(r, p, t[:, 0], q_logged=q, q_target=q * 0.9, reward_range=RR)
    res = shared_bootstrap(
        r,
        p,
        t,
        names=["a", "b", "c"],
        estimators=ESTIMATORS,
        sources={"dr a": dr.source},
        reward_range=RR,
        n_resamples=300,
        bootstrap_method=method,
        rng=17,
    )
    assert res.resampling == ("multinomial" if n <= bs.EXACT_MAX_ROWS else "poisson")
    assert res.seed == 17 and res.n == n and res.n_resamples == 300
    opts = {"n_resamples": 300, "bootstrap_method": method, "rng": 17}
    for j, name in enumerate("abc"):
        for key, est in ESTIMATORS:
            single = est.estimate(r, p, t[:, j], reward_range=RR).ci(method="bootstrap", **opts)
            np.testing.assert_allclose(
                tuple(res.intervals[(name, key)]), tuple(single), rtol=1e-12, atol=1e-14
            )
    np.testing.assert_allclose(
        tuple(res.logging),
        tuple(logging_value(r, reward_range=RR).ci(method="bootstrap", **opts)),
        rtol=1e-12,
    )
    np.testing.assert_allclose(
        tuple(res.intervals["dr a"]), tuple(dr.ci(method="bootstrap", **opts)), rtol=1e-12
    )
    # bootstrap_interval on the IPS components: the same counts as well
    direct = bootstrap_interval(
        (t[:, 1] / p * r)[:, None],
        lambda m: m[..., 0],
        n_resamples=300,
        bootstrap_method=method,
        rng=17,
    )
    np.testing.assert_allclose(tuple(res.intervals[("b", "ips")]), tuple(direct), rtol=1e-12)


@pytest.mark.parametrize("n", [1_500, N_POISSON], ids=["multinomial", "poisson"])
def test_intervals_are_the_quantiles_of_replicates_from_the_documented_counts(n):
    r, p, t = _data(n, p_count=2, seed=1)
    res = shared_bootstrap(
        r, p, t, estimators=IPS_SNIPS, n_resamples=250, rng=3, confidence_level=0.9
    )
    c = resample_counts(n, 250, rng=3)
    w = t / p[:, None]
    size = c.sum(axis=1)
    for j in range(2):
        swr, sw = c @ (w[:, j] * r), c @ w[:, j]
        np.testing.assert_allclose(
            tuple(res.intervals[(str(j), "ips")]), np.quantile(swr / size, [0.05, 0.95]), rtol=1e-12
        )
        np.testing.assert_allclose(
            tuple(res.intervals[(str(j), "snips")]), np.quantile(swr / sw, [0.05, 0.95]), rtol=1e-12
        )
    np.testing.assert_allclose(
        tuple(res.logging), np.quantile(c @ r / size, [0.05, 0.95]), rtol=1e-12
    )


def test_the_candidates_in_any_form_give_the_same_intervals():
    r, p, t = _data(N_POISSON, p_count=4, seed=2)
    ref = shared_bootstrap(r, p, t, estimators=IPS_SNIPS, n_resamples=200, rng=5)
    names = [str(j) for j in range(4)]
    as_list = shared_bootstrap(
        r, p, [t[:, j] for j in range(4)], estimators=IPS_SNIPS, n_resamples=200, rng=5
    )
    fortran = shared_bootstrap(
        r, p, np.asfortranarray(t), estimators=IPS_SNIPS, n_resamples=200, rng=5
    )
    wide = np.zeros((t.shape[0], 8))
    wide[:, ::2] = t
    strided = shared_bootstrap(
        r, p, wide[:, ::2], estimators=IPS_SNIPS, n_resamples=200, rng=5
    )  # a view, not copied
    f32 = shared_bootstrap(
        r.astype(np.float32),
        p.astype(np.float32),
        t.astype(np.float32),
        estimators=IPS_SNIPS,
        n_resamples=200,
        rng=5,
    )
    for other in (as_list, fortran, strided):
        for key in ((nm, e) for nm in names for e in ("ips", "snips")):
            np.testing.assert_allclose(
                tuple(other.intervals[key]), tuple(ref.intervals[key]), rtol=1e-12
            )
    # float32 inputs are accumulated in float64: equal to the float32 values' own intervals
    single = (
        IPS()
        .estimate(r.astype(np.float32), p.astype(np.float32), t[:, 0].astype(np.float32))
        .ci(method="bootstrap", n_resamples=200, rng=5)
    )
    np.testing.assert_allclose(tuple(f32.intervals[("0", "ips")]), tuple(single), rtol=1e-12)


def test_the_seed_is_drawn_recorded_and_reproduces_the_intervals():
    r, p, t = _data(3_000, p_count=2, seed=3)
    drawn = shared_bootstrap(r, p, t, estimators=IPS_SNIPS, n_resamples=200)
    assert isinstance(drawn.seed, int) and 0 <= drawn.seed < 2**63
    again = shared_bootstrap(r, p, t, estimators=IPS_SNIPS, n_resamples=200, rng=drawn.seed)
    assert again.intervals == drawn.intervals and again.logging == drawn.logging
    other = shared_bootstrap(r, p, t, estimators=IPS_SNIPS, n_resamples=200, rng=drawn.seed + 1)
    assert other.intervals != drawn.intervals
    gen = shared_bootstrap(
        r, p, t, estimators=IPS_SNIPS, n_resamples=200, rng=np.random.default_rng(drawn.seed)
    )
    assert gen.seed is None and gen.intervals == drawn.intervals
    doc = drawn.to_dict()
    assert doc["seed"] == drawn.seed and doc["resampling"] == "multinomial"
    assert sorted(doc["intervals"]) == ["0/ips", "0/snips", "1/ips", "1/snips"]
    assert set(doc["logging"]) == {"low", "high"}


def test_intervals_are_intersected_with_the_reward_range():
    r = np.r_[np.ones(60), np.zeros(2)]  # a mean near the top of [0, 1]
    p = np.full(r.size, 0.5)
    t = np.c_[np.full(r.size, 0.5)]
    wide = shared_bootstrap(r, p, t, n_resamples=200, rng=0, estimators=(IPS(),))
    assert wide.logging.high <= 1.0  # a mean of values in [0, 1] stays in it
    # IPS with weights 1: the same as the logging value, so weights 2 give values above 1
    t2 = np.c_[np.ones(r.size)]
    raw = shared_bootstrap(r, p, t2, n_resamples=200, rng=0, estimators=(IPS(),))
    cut = shared_bootstrap(
        r, p, t2, n_resamples=200, rng=0, estimators=(IPS(),), reward_range=(0, 1)
    )
    assert raw.intervals[("0", "ips")].high > 1.0
    assert cut.intervals[("0", "ips")].high == 1.0
    assert cut.intervals[("0", "ips")].low == min(raw.intervals[("0", "ips")].low, 1.0)


def test_few_distinct_rows_take_the_exact_multinomial_over_distinct_rows(monkeypatch):
    rng = np.random.default_rng(4)
    n = 3 * bs.EXACT_MAX_ROWS
    p = rng.choice([0.25, 0.5], size=n)
    t = np.c_[rng.choice([0.0, 0.5, 1.0], size=n), rng.choice([0.2, 0.8], size=n)]
    r = rng.integers(0, 2, size=n).astype(float)
    grouped = shared_bootstrap(r, p, t, estimators=IPS_SNIPS, n_resamples=2000, rng=1)
    assert grouped.resampling == "multinomial over distinct rows"
    monkeypatch.setattr(rs, "MAX_DISTINCT_ROWS", 0)  # the same data through Poisson counts
    poisson = shared_bootstrap(r, p, t, estimators=IPS_SNIPS, n_resamples=2000, rng=2)
    assert poisson.resampling == "poisson"
    # Monte Carlo agreement: 4 sqrt(2) x the sd of an end at B = 2000 (0.054 sd of the replicates
    # each), with the replicate sd read off the normal interval's half width / 1.96
    for key in grouped.intervals:
        est = (IPS() if key[1] == "ips" else SNIPS()).estimate(r, p, t[:, int(key[0])])
        tol = 4 * math.sqrt(2) * est.std_error * math.sqrt(0.025 * 0.975 / 2000) / 0.0584
        assert grouped.intervals[key].low == pytest.approx(poisson.intervals[key].low, abs=tol)
        assert grouped.intervals[key].high == pytest.approx(poisson.intervals[key].high, abs=tol)


def test_an_undefined_statistic_is_named_in_the_error():
    n = 200
    r = np.linspace(0, 1, n)
    p = np.full(n, 0.5)
    t = np.c_[np.full(n, 0.5), np.r_[0.5, np.zeros(n - 1)]]  # 'lone': one row carries weight
    with pytest.raises(EstimationError, match=r"policy 'lone', snips: \d+ of 200 bootstrap"):
        shared_bootstrap(
            r, p, t, names=["fine", "lone"], estimators=IPS_SNIPS, n_resamples=200, rng=0
        )


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (
            {"n_resamples": 1},
            ParameterError,
            r"`n_resamples` must be at least 81 for a 0.95 interval",
        ),
        ({"n_resamples": 100, "confidence_level": 0.99}, ParameterError, r"at least 401"),
        (
            {"estimators": (DR(),)},
            ParameterError,
            r"are weighting estimators, objects with a row source .*got DR\(.*`sources`",
        ),
        ({"estimators": ("ips",)}, ParameterError, r"with a row source .*got 'ips'"),
        ({"estimators": (IPS(), ("ips", IPS()))}, ParameterError, r"names 'ips' twice"),
        (
            {"estimators": ()},
            ParameterError,
            r"`estimators` is empty: pass the weighting estimators",
        ),
        ({"names": ["a"]}, ParameterError, r"distinct name; got \['a'\]"),
        ({"names": ["a", "a"]}, ParameterError, r"distinct name"),
        ({"bootstrap_method": "basic"}, ParameterError, r"`bootstrap_method` must be one of"),
        ({"rng": 1.5}, ParameterError, r"rng must be an int seed"),
        ({"reward_range": (0.0, 0.5)}, ValidationError, r"reward"),
    ],
)
def test_argument_errors(kwargs, error, match):
    r, p, t = _data(100, p_count=2)
    with pytest.raises(error, match=match):
        shared_bootstrap(r, p, t, **{"estimators": IPS_SNIPS, **kwargs})


def test_data_errors():
    r, p, t = _data(100, p_count=2)
    with pytest.raises(ParameterError, match=r"go together"):
        shared_bootstrap(r, p, None)
    with pytest.raises(ParameterError, match=r"need `logging_propensity` and `target_propensity`"):
        shared_bootstrap(r, estimators=IPS_SNIPS)
    with pytest.raises(ParameterError, match=r"nothing to bootstrap"):
        shared_bootstrap(r, estimators=(), logging=False)
    with pytest.raises(ValidationError, match=r"`target_propensity` must be in \[0, 1\]"):
        shared_bootstrap(r, p, t * 3)
    with pytest.raises(ValidationError, match=r"has 99 rows but `reward` has 100"):
        shared_bootstrap(r, p[:-1], t[:-1])
    src = IPS().estimate(r[:50], p[:50], t[:50, 0]).source
    with pytest.raises(ValidationError, match=r"source 'x' has 50 rows but `reward` has 100"):
        shared_bootstrap(r, estimators=(), sources={"x": src})
    with pytest.raises(ParameterError, match=r"`sources` key \('0', 'ips'\) is also"):
        shared_bootstrap(
            r,
            p,
            t,
            estimators=IPS_SNIPS,
            sources={("0", "ips"): IPS().estimate(r, p, t[:, 0]).source},
        )
    with pytest.raises(ValidationError, match=r"n >= 2 rows"):
        shared_bootstrap(r[:1], estimators=())


def test_sources_and_the_logging_value_alone():
    r, p, t = _data(500, p_count=1, seed=6)
    est = SNIPS().estimate(r, p, t[:, 0])
    res = shared_bootstrap(r, estimators=(), sources={"s": est.source}, n_resamples=200, rng=2)
    assert list(res.intervals) == ["s"] and isinstance(res, SharedBootstrap)
    np.testing.assert_allclose(
        tuple(res.intervals["s"]),
        tuple(est.ci(method="bootstrap", n_resamples=200, rng=2)),
        rtol=1e-12,
    )
    assert res.logging is not None


def test_a_dm_source_or_a_difference_with_one_is_refused():
    # DM's resamples hold the reward model fixed: the interval it would give, (0.5516, 0.5566)
    # against a truth of 0.512 in the case, is refused, and so is a paired
    # difference that carries a DM estimate
    from ope.estimators import DM
    from ope.results import compare

    r, p, t = _data(400, p_count=1, seed=8)
    q = np.full(r.shape, 0.5)
    dm = DM().estimate(reward=r, q_target=q)
    dr = DR().estimate(r, p, t[:, 0], q_logged=q, q_target=q)
    with pytest.raises(ParameterError, match=r"`sources`\['dm'\] is a direct-method"):
        shared_bootstrap(r, sources={"dm": dm.source}, n_resamples=200, rng=0)
    diff = compare(dr, dm).source
    assert diff is not None and diff.model_conditional
    with pytest.raises(ParameterError, match="bootstrap DR or SNDR"):
        shared_bootstrap(r, sources={"dr - dm": diff}, n_resamples=200, rng=0)
    # the DR source with the same model is accepted
    res = shared_bootstrap(r, sources={"dr": dr.source}, n_resamples=200, rng=0)
    assert np.isfinite(tuple(res.intervals["dr"])).all()


def test_the_bootstrap_names_no_estimator_and_reads_no_estimator_setting():
    """The weighting estimators enter through their row sources: no string of the bootstrap's
    code is an estimator's name, and it reads no clip level or reward origin (as an attribute
    or through getattr)."""
    import ast
    import inspect

    from ope.estimators import ESTIMATORS as REGISTRY

    tree = ast.parse(inspect.getsource(bs))
    strings = {
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }
    attributes = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    assert not strings & set(REGISTRY), strings & set(REGISTRY)
    settings = {"clip_level", "reward_origin", "max_weight"}
    assert not (strings | attributes) & settings, (strings | attributes) & settings


@pytest.mark.parametrize("rr", [None, (0.25, 1.0)])
def test_each_row_source_gives_the_estimate_and_its_intervals(rr):
    """An estimator's row source: its columns' means through its statistic are the estimate's
    value, and a row source passed as is gives the same intervals as its estimator."""
    r, p, t = _data(400, p_count=1, seed=7)
    r = 0.25 + 0.75 * r
    w = t[:, 0] / p
    for key, est in ESTIMATORS:
        rows = est.row_source(rr)
        assert rows.name == key
        cols = np.empty((len(rows.columns), r.size))
        for col, out in zip(rows.columns, cols):
            col.fill(r, w, out)
        value = est.estimate(r, p, t[:, 0], reward_range=rr).value
        assert float(rows.statistic(cols.mean(axis=1))) == pytest.approx(value, rel=1e-12)
        by_estimator = shared_bootstrap(
            r, p, t, estimators=(est,), reward_range=rr, n_resamples=200, rng=1
        )
        by_rows = shared_bootstrap(
            r, p, t, estimators=(rows,), reward_range=rr, n_resamples=200, rng=1
        )
        assert by_rows.intervals == by_estimator.intervals


def test_a_row_source_of_the_wrong_type_is_refused():
    class Odd:
        def row_source(self, reward_range):
            return ("w r",)

    r, p, t = _data(100, p_count=1)
    with pytest.raises(ParameterError, match=r"gave a row source of type tuple, not WeightingRows"):
        shared_bootstrap(r, p, t, estimators=(Odd(),))


# ------------------------------------------------------------------------------- coverage
@pytest.mark.slow
def test_ips_and_snips_coverage_on_the_poisson_path():
    """Percentile intervals of IPS and SNIPS from shared Poisson counts cover the exact value
    about 95% of the time (n above EXACT_MAX_ROWS, continuous rewards: every row distinct).

    Three actions, logging (0.5, 0.3, 0.2), target (0.2, 0.3, 0.5), rewards
    ``mu_a + U(-0.1, 0.1)`` with ``mu = (0.2, 0.5, 0.7)``: the value is exactly
    ``sum_a pi(a) mu_a = 0.54``. 300 replications: binomial sd 0.0126; 3 sd allowed.
    """
    rng = np.random.default_rng(31)
    reps, n = 300, bs.EXACT_MAX_ROWS + 1
    pi0 = np.array([0.5, 0.3, 0.2])
    pi = np.array([0.2, 0.3, 0.5])
    mu = np.array([0.2, 0.5, 0.7])
    truth = float(pi @ mu)
    hits = {"ips": 0, "snips": 0}
    for i in range(reps):  # replications, not resamples
        a = rng.choice(3, size=n, p=pi0)
        r = mu[a] + rng.uniform(-0.1, 0.1, size=n)
        res = shared_bootstrap(
            r, pi0[a], pi[a][:, None], estimators=IPS_SNIPS, n_resamples=1000, rng=i
        )
        assert res.resampling == "poisson"
        for key in hits:
            lo, hi = res.intervals[("0", key)]
            hits[key] += lo <= truth <= hi
    for key, h in hits.items():
        assert abs(h / reps - 0.95) < 3 * math.sqrt(0.95 * 0.05 / reps), (key, h / reps)
