"""Estimate objects: fields, rendering, interval dispatch, bounds, paired comparisons."""

from __future__ import annotations

import dataclasses
import math
import pickle
import warnings

import numpy as np
import pytest

from ope.results import CI_METHODS, Estimate, compare
from ope.estimators import DM, DR, IPS, SNIPS, ClippedIPS, logging_value
from ope.exceptions import (
    EstimationError,
    MissingBoundsError,
    OverlapWarning,
    ParameterError,
    SmallSampleWarning,
    ValidationError,
)
from ope.intervals._types import BottouInterval, ConfidenceInterval
from ope.intervals.betting import betting_interval
from ope.intervals.bounded import bernstein_interval, bottou_interval, hoeffding_interval
from ope.intervals.likelihood import empirical_likelihood_interval

R = np.array([1.0, 0.0, 1.0, 0.5, 0.0])
P = np.array([0.5, 0.25, 0.5, 0.8, 0.4])
T = np.array([1.0, 0.5, 0.25, 0.4, 0.2])  # w = [2, 2, 0.5, 0.5, 0.5]

FIELDS = [
    "estimator",
    "policy",
    "value",
    "std_error",
    "ci_low",
    "ci_high",
    "confidence_level",
    "ci_method",
    "n",
    "ess",
    "target",
    "notes",
]


@pytest.fixture(autouse=True)
def _quiet_small_sample():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallSampleWarning)
        yield


@pytest.fixture
def hand():
    return IPS().estimate(R, P, T, reward_range=(0.0, 1.0))


def _data(n=400, seed=0):
    rng = np.random.default_rng(seed)
    p = rng.choice([0.2, 0.5, 0.8], size=n)
    t = np.clip(p + rng.uniform(-0.15, 0.15, size=n), 0.0, 1.0)
    r = rng.binomial(1, 0.4, size=n).astype(float)
    return r, p, t


def test_fields_and_default_interval(hand):
    assert hand.value == pytest.approx(0.55)
    assert hand.ci_method == "normal" and hand.confidence_level == 0.95
    half = 1.959963984540054 * math.sqrt(0.14)
    # intersected with reward_range=(0, 1), where the policy value lies
    assert hand.ci_low == pytest.approx(max(0.0, 0.55 - half))
    assert hand.ci_high == pytest.approx(min(1.0, 0.55 + half))
    assert hand.ci() == ConfidenceInterval(hand.ci_low, hand.ci_high)
    t = hand.ci(0.95, "t")
    assert 0.55 + 2.7764451051977987 * math.sqrt(0.14) > 1.0 and t.high == 1.0


def test_to_dict_names_never_depend_on_arguments(hand):
    d95 = hand.to_dict()
    d80 = hand.with_ci(0.8, "t").to_dict()
    assert list(d95) == FIELDS and list(d80) == FIELDS
    assert d80["confidence_level"] == 0.8 and d80["ci_method"] == "t"
    assert (
        d80["ci_high"] - d80["ci_low"] <= d95["ci_high"] - d95["ci_low"]
    )  # both clipped to [0, 1]
    import json

    json.dumps(d95)


def test_repr_and_html(hand):
    text = repr(hand)
    assert text.startswith("Estimate('ips', value=0.55, std_error=0.3742, ci=[")
    assert "(normal, 95%), n=5, ess=3.457, notes=1)" in text
    page = hand._repr_html_()
    assert "<div class='ope-result'>" in page and "95% CI (normal)" in page
    assert "<ol class='ope-notes'><li>only n=5 rows" in page


def test_estimate_keeps_references_not_copies(hand):
    assert hand._source.reward is R
    assert np.shares_memory(hand._source.target_propensity, T)  # a view of the caller's array


def test_influence(hand):
    psi = hand.influence()
    np.testing.assert_allclose(psi, R * T / P - 0.55)
    assert hand.std_error == pytest.approx(np.std(psi, ddof=1) / math.sqrt(5))


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        (
            {"method": "wald"},
            ValueError,
            r"unknown interval method 'wald'; choose one of normal, t, bootstrap, hoeffding",
        ),
        (
            {"method": "normal", "rng": 1},
            ValueError,
            r"`rng` applies only to method='bootstrap'; got 'normal'",
        ),
        (
            {"method": "t", "n_resamples": 10},
            ValueError,
            r"`n_resamples` applies only to method='bootstrap'",
        ),
        (
            {"method": "normal", "weight_bound": 2.0},
            ParameterError,
            r"`weight_bound` is an a priori weight bound for the bounded methods",
        ),
        (
            {"method": "bernstein", "outer": "normal"},
            ValueError,
            r"`outer` applies only to method='bottou'",
        ),
        (
            {"method": "bottou"},
            EstimationError,
            r"'bottou' does not apply to the 'ips' estimate; available methods: normal, t, bootstrap, hoeffding, bernstein, empirical_likelihood, betting, log_smoothing\.",
        ),
        (
            {"method": "hoeffding"},
            MissingBoundsError,
            r"needs an a priori bound on the importance weights: pass weight_bound=M",
        ),
        (
            {"method": "hoeffding", "weight_bound": 1.5},
            ValidationError,
            r"weight_bound=1.5 is not a bound on these weights: the largest observed weight is 2",
        ),
        (
            {"method": "betting", "weight_bound": 2.0},
            ParameterError,
            r"method 'betting' needs no weight bound",
        ),
        ({"confidence_level": 95}, ParameterError, r"`confidence_level` must be in \(0, 1\)"),
    ],
)
def test_ci_errors(hand, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        hand.ci(**kwargs)


def test_bounded_methods_need_reward_range():
    res = IPS().estimate(R, P, T)
    for method in ("hoeffding", "bernstein", "empirical_likelihood", "betting"):
        with pytest.raises(
            MissingBoundsError,
            match=rf"'{method}' needs the a priori reward range: pass reward_range=\(low, high\)",
        ):
            res.ci(method=method, weight_bound=2.0 if method != "betting" else None)
    with pytest.raises(MissingBoundsError, match=r"needs the a priori reward range"):
        ClippedIPS(max_weight=2.0).estimate(R, P, T).ci(method="bottou")


def test_methods_that_do_not_apply_list_the_ones_that_do():
    dr = DR().estimate(R, P, T, q_logged=R, q_target=R)
    with pytest.raises(
        EstimationError,
        match=r"'betting' does not apply to the 'dr' estimate; available methods: normal, t, bootstrap\.$",
    ):
        dr.ci(method="betting")
    sn = SNIPS().estimate(R, P, T, reward_range=(0, 1))
    with pytest.raises(
        EstimationError,
        match=r"available methods: normal, t, bootstrap, empirical_likelihood, betting",
    ):
        sn.ci(method="hoeffding")
    bare = Estimate("ips", 0.5, 0.1, 0.3, 0.7, n=10, ess=5.0)
    with pytest.raises(EstimationError, match=r"available methods: normal, t\.$"):
        bare.ci(method="bootstrap")
    assert set(CI_METHODS) == {
        "normal",
        "t",
        "bootstrap",
        "hoeffding",
        "bernstein",
        "bottou",
        "empirical_likelihood",
        "betting",
        "log_smoothing",
    }


def test_hoeffding_and_bernstein_for_ips_by_hand(hand):
    # values w*r in [0, max_weight * 1] = [0, 2]; Hoeffding half-width (b - a) sqrt(ln(2/d) / 2n)
    # ... then intersected with the reward range [0, 1], where the policy value must lie
    ci = hand.ci(method="hoeffding", weight_bound=2.0)
    raw = hoeffding_interval(0.55, 5, low=0.0, high=2.0)
    assert raw.high == pytest.approx(min(2.0, 0.55 + 2.0 * math.sqrt(math.log(2 / 0.05) / 10)))
    assert ci == (max(raw.low, 0.0), min(raw.high, 1.0))
    assert ci.high == 1.0  # the raw interval reaches past the reward range
    bern = hand.ci(method="bernstein", weight_bound=2.0)
    raw = bernstein_interval(0.55, 0.7, 5, low=0.0, high=2.0)
    assert bern == (max(raw.low, 0.0), min(raw.high, 1.0))


def test_clipped_ips_bounded_methods_use_its_max_weight():
    res = ClippedIPS(max_weight=1.5).estimate(R, P, T, reward_range=(0.0, 1.0))
    x = np.minimum(T / P, 1.5) * R
    raw = bernstein_interval(x.mean(), x.var(ddof=1), 5, low=0.0, high=1.5)
    # the clipped estimand E[min(w, R) r] lies in [0, 1] since E[min(w, R)] <= 1
    assert res.ci(method="bernstein") == (max(raw.low, 0.0), min(raw.high, 1.0))
    with pytest.raises(ValueError, match=r"ClippedIPS uses its own max_weight"):
        res.ci(method="hoeffding", weight_bound=3.0)
    cw = np.minimum(T / P, 1.5)
    bottou = res.ci(method="bottou", outer="normal")
    assert isinstance(bottou, BottouInterval)
    assert bottou == bottou_interval(
        cw.mean(),
        cw.var(ddof=1),
        (cw * R).mean(),
        (cw * R).var(ddof=1),
        5,
        max_weight=1.5,
        reward_range=(0.0, 1.0),
        outer="normal",
    )


def test_empirical_likelihood_and_betting_call_the_row_functions():
    r, p, t = _data()
    w = t / p
    ips = IPS().estimate(r, p, t, reward_range=(0.0, 1.0))
    el = ips.ci(method="empirical_likelihood", weight_bound=5.0)
    assert el == empirical_likelihood_interval(w, r, reward_range=(0.0, 1.0), weight_bound=5.0)
    assert el.low < ips.value < el.high
    bet = SNIPS().estimate(r, p, t, reward_range=(0.0, 1.0)).ci(0.9, method="betting")
    assert bet == betting_interval(w, r, reward_range=(0.0, 1.0), confidence_level=0.9)
    logging = logging_value(r, reward_range=(0.0, 1.0))
    lb = logging.ci(method="betting")
    assert lb == betting_interval(np.ones_like(r), r, reward_range=(0.0, 1.0))
    assert lb.low < r.mean() < lb.high
    np.testing.assert_allclose(
        logging.ci(method="hoeffding"),
        hoeffding_interval(r.mean(), r.size, low=0.0, high=1.0),
        rtol=1e-14,
    )


# ---------------------------------------------------------------------------------------------
# paired comparisons
# ---------------------------------------------------------------------------------------------
def test_compare_by_hand():
    a = IPS().estimate(R, P, T)
    b = logging_value(R)
    d = compare(a, b)
    # psi_a = w r - 0.55 = [1.45, -0.55, -0.05, -0.3, -0.55]; psi_b = r - 0.5
    diff = np.array([1.45, -0.55, -0.05, -0.3, -0.55]) - (R - 0.5)
    assert d.value == pytest.approx(0.55 - 0.5)
    assert d.std_error == pytest.approx(np.std(diff, ddof=1) / math.sqrt(5))
    assert d.estimator == "ips - logging" and d.n == 5
    assert d.policy is None  # neither side names a policy
    named = compare(dataclasses.replace(a, policy="greedy"), b)
    assert named.policy == "greedy - logging"  # the side without one by its estimator
    np.testing.assert_allclose(d.influence(), diff, atol=1e-12)


@pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning")  # t2 is not normalized
def test_paired_se_is_smaller_than_unpaired_for_correlated_candidates():
    r, p, t = _data(n=2000, seed=1)
    t2 = np.clip(t * 1.1, 0, 1)  # a close variant: strongly positively correlated estimates
    a = SNIPS().estimate(r, p, t)
    b = SNIPS().estimate(r, p, t2)
    d = compare(a, b, ci="t", confidence_level=0.9)
    assert d.std_error < 0.5 * math.hypot(a.std_error, b.std_error)
    assert d.ci_method == "t" and d.confidence_level == 0.9
    assert d.value == pytest.approx(a.value - b.value)


def test_paired_bootstrap_shares_resample_indices():
    r, p, t = _data(n=300, seed=2)
    a = SNIPS().estimate(r, p, t)
    same = compare(a, SNIPS().estimate(r, p, t))
    # identical estimates differ by exactly 0 in every jointly drawn resample
    assert tuple(same.ci(method="bootstrap", rng=0)) == (0.0, 0.0)
    d = compare(a, logging_value(r), ci="bootstrap", rng=3)
    normal = compare(a, logging_value(r))
    assert d.ci_method == "bootstrap"
    assert d.ci_high - d.ci_low == pytest.approx(normal.ci_high - normal.ci_low, rel=0.25)


def test_compare_refuses_different_rows():
    r, p, t = _data(n=100)
    a = IPS().estimate(r, p, t)
    with pytest.raises(EstimationError, match=r"same rows; `a` has n=100 and `b` has n=99"):
        compare(a, IPS().estimate(r[:99], p[:99], t[:99]))
    with pytest.raises(EstimationError, match=r"their reward arrays differ"):
        compare(a, logging_value(1.0 - r))
    bare = Estimate("ips", 0.5, 0.1, 0.3, 0.7, n=100, ess=5.0)
    with pytest.raises(EstimationError, match=r"estimate `b` \('ips'\) has none"):
        compare(a, bare)
    with pytest.raises(TypeError, match=r"`a` must be an ope Estimate"):
        compare(0.5, a)  # type: ignore[arg-type]


def test_dm_estimates_compare_on_the_same_rows():
    r, p, t = _data(n=200)
    q = np.full(200, 0.4)
    d = compare(DM().estimate(r, q_target=q), logging_value(r))
    assert d.value == pytest.approx(0.4 - r.mean())


def test_estimates_pickle():
    r, p, t = _data(n=50)
    res = IPS().estimate(r, p, t)
    back = pickle.loads(pickle.dumps(res))
    assert back.to_dict() == res.to_dict()
    seeded = res.with_ci(ci="bootstrap", rng=5, n_resamples=200)
    assert pickle.loads(pickle.dumps(seeded)).provenance == seeded.provenance


def test_compare_states_a_note_both_estimates_carry_once():
    a = IPS().estimate(R, P, T)  # n=5: both carry the same small-sample note
    d = compare(a, logging_value(R))
    assert len(a.notes) == 1 and d.notes == (f"ips and logging: {a.notes[0]}",)
    pa = dataclasses.replace(a, policy="greedy", notes=(*a.notes, "weights are heavy"))
    assert compare(pa, logging_value(R)).notes == (
        f"ips (greedy) and logging: {a.notes[0]}",
        "ips (greedy): weights are heavy",
    )
    assert compare(a, a).notes == (f"a and b: {a.notes[0]}",)  # two estimates of one label


# ---------------------------------------------------------------------------------------------
# provenance: a bootstrap interval records its seed
# ---------------------------------------------------------------------------------------------
def test_a_bootstrap_interval_records_the_seed_that_reproduces_it():
    r, p, t = _data(n=300, seed=4)
    res = SNIPS().estimate(r, p, t)
    assert res.provenance is None and "provenance" not in res.to_dict()
    drawn = res.with_ci(0.9, "bootstrap", n_resamples=300)  # rng=None: a seed is drawn
    seed = drawn.provenance.seed
    assert isinstance(seed, int) and seed >= 0
    assert drawn.provenance.options == {
        "ci_method": "bootstrap",
        "confidence_level": 0.9,
        "n_resamples": 300,
        "bootstrap_method": "percentile",
    }
    again = res.with_ci(0.9, "bootstrap", n_resamples=300, rng=seed)
    assert (again.ci_low, again.ci_high) == (drawn.ci_low, drawn.ci_high)
    assert again.provenance.seed == seed
    other = res.with_ci(0.9, "bootstrap", n_resamples=300, rng=seed + 1)
    assert (other.ci_low, other.ci_high) != (drawn.ci_low, drawn.ci_high)
    # a Generator's state is the caller's: no seed to record
    gen = res.with_ci(0.9, "bootstrap", n_resamples=300, rng=np.random.default_rng(0))
    assert gen.provenance.seed is None
    assert drawn.to_dict()["provenance"]["seed"] == seed
    assert list(drawn.to_dict()) == [*FIELDS, "provenance"]
    assert drawn.summary().splitlines()[-5:] == [
        "Provenance:",
        f"  ope:     {drawn.provenance.ope_version}",
        f"  seed:    {seed}",
        "  options: ci_method=bootstrap, confidence_level=0.9, n_resamples=300,",
        "           bootstrap_method=percentile",
    ]


def test_other_intervals_keep_the_recorded_provenance():
    r, p, t = _data(n=300, seed=4)
    boot = SNIPS().estimate(r, p, t).with_provenance(options={"by": "segment"}, seed=11)
    assert boot.with_ci(0.8, "t").provenance == boot.provenance
    assert boot.with_source(boot.source).provenance == boot.provenance
    rebooted = boot.with_ci(ci="bootstrap", rng=3, n_resamples=100)
    assert rebooted.provenance.seed == 3 and rebooted.provenance.options["by"] == "segment"
    with pytest.raises(ParameterError, match=r"rng must be an int seed"):
        boot.with_ci(ci="bootstrap", rng="seven")
    paired = compare(boot, logging_value(r), ci="bootstrap", rng=9, n_resamples=100)
    assert paired.provenance.seed == 9


def test_bottou_interval_covers_the_value_the_clipped_estimate_misses():
    """Two actions, logging (0.9, 0.1), target (0.1, 0.9), r(a1) = 1, r(a0) = 0: V = 0.9.

    Clipping at 5 gives E[min(w, 5) r] = 0.5 and clipped mass E[min(w, 5)] = 0.9/9 + 0.1*5 = 0.6,
    so the inner interval is [0.5, 0.5 + 1 * (1 - 0.6)] = [0.5, 0.9] at the estimated mass (the
    returned inner_high uses a lower confidence limit of the mass, so it is a little above 0.9);
    the expected frequencies are used exactly (2,000 rare rows of 20,000).
    """
    n, k = 20_000, 2_000
    rare = np.arange(n) < k
    res = ClippedIPS(max_weight=5.0).estimate(
        rare.astype(float), np.where(rare, 0.1, 0.9), np.where(rare, 0.9, 0.1), reward_range=(0, 1)
    )
    assert res.value == pytest.approx(0.5)
    assert res.ci_high < 0.9  # the normal interval of the clipped estimate misses V
    b = res.ci(method="bottou")
    assert b.inner_low == pytest.approx(0.5)
    assert 0.9 <= b.inner_high < 0.95
    assert b.low <= 0.9 <= b.high


# ---------------------------------------------------------------------------------------------
# bounded intervals: numerics with rewards far from zero, and cached moments
# ---------------------------------------------------------------------------------------------
def _offset_rows(n=20_000, seed=3):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.2, 0.8, size=n)
    t = np.clip(p + rng.normal(0.0, 0.3, size=n), 0.0, 1.0)
    r = rng.uniform(size=n)
    return r, p, t


@pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning")
@pytest.mark.parametrize("offset", [1e6, -3e7])
def test_bounded_intervals_are_shift_equivariant_for_rewards_far_from_zero(offset):
    # shifting rewards and reward_range by c shifts the value and every piece of the bottou
    # and logging-value intervals by c; sums of squares taken about zero lose ~12 digits here
    r, p, t = _offset_rows()
    rs = r + offset
    rr, rrs = (0.0, 1.0), (offset, offset + 1.0)
    clipped = ClippedIPS(max_weight=3.0)
    for outer in ("bernstein", "normal"):
        base = clipped.estimate(r, p, t, reward_range=rr).ci(method="bottou", outer=outer)
        moved = clipped.estimate(rs, p, t, reward_range=rrs).ci(method="bottou", outer=outer)
        np.testing.assert_allclose(np.asarray(moved) - offset, base, rtol=0, atol=1e-7)
        assert base.high - base.low > 1e-3  # the interval is not degenerate
    for method in ("hoeffding", "bernstein"):
        base = logging_value(r, reward_range=rr).ci(method=method)
        moved = logging_value(rs, reward_range=rrs).ci(method=method)
        np.testing.assert_allclose(np.asarray(moved) - offset, base, rtol=0, atol=1e-7)


def test_moment_based_intervals_reuse_the_moments_of_the_rows(monkeypatch):
    import ope.estimators as oe

    calls = []
    original = oe.centered_moments

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(oe, "centered_moments", counting)
    r, p, t = _data()
    res = ClippedIPS(max_weight=2.0).estimate(r, p, t, reward_range=(0.0, 1.0))
    first = res.ci(method="bernstein")
    assert res.ci(method="bernstein") == first
    res.ci(0.9, method="hoeffding")
    res.with_ci(ci="bottou")
    assert len(calls) == 1
    x = np.minimum(t / p, 2.0) * r
    expected = bernstein_interval(x.mean(), x.var(ddof=1), x.size, low=0.0, high=2.0)
    np.testing.assert_allclose(first, (max(expected.low, 0.0), min(expected.high, 1.0)), rtol=1e-13)


def _improper_rows(n=20_000, seed=0):
    # every weight is 3 (target 0.75 / logging 0.25): weights cannot average to 1, so the
    # mean of w*r (about 2.4) is far outside the reward range [0, 1] the value must lie in
    rng = np.random.default_rng(seed)
    return rng.binomial(1, 0.8, n).astype(float), np.full(n, 0.25), np.full(n, 0.75)


@pytest.mark.parametrize("method", ["hoeffding", "bernstein"])
def test_bounded_interval_outside_the_value_range_warns_and_is_never_inverted(method):
    r, p, t = _improper_rows()
    with pytest.warns(OverlapWarning):
        ips = IPS().estimate(r, p, t, reward_range=(0.0, 1.0))
    # the interval for E[w r] misses [0, 1] entirely: reduced to the end point, with a warning
    with pytest.warns(
        OverlapWarning,
        match=rf"{method} interval .* lies entirely above the "
        r"range \[0, 1\] .*mean importance weight is 3\b",
    ):
        ci = ips.ci(method=method, weight_bound=4.0)
    assert ci == (1.0, 1.0)
    with pytest.warns(OverlapWarning):
        clipped = ClippedIPS(max_weight=4.0).estimate(r, p, t, reward_range=(0.0, 1.0))
    with pytest.warns(OverlapWarning, match=r"lies entirely above the range \[0, 1\]"):
        assert clipped.ci(method=method) == (1.0, 1.0)
    # valid data far from the boundary: no warning
    rv, pv, tv = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ok = IPS().estimate(rv, pv, tv, reward_range=(0.0, 1.0)).ci(method=method, weight_bound=5.0)
    assert ok.low < ok.high


@pytest.mark.filterwarnings("ignore:mean importance weight is 3")
def test_betting_and_bottou_warn_on_data_inconsistent_with_mean_one_weights():
    r, p, t = _improper_rows()
    ips = IPS().estimate(r, p, t, reward_range=(0.0, 1.0))
    with pytest.warns(OverlapWarning, match=r"empty.*mean importance weight is 3\b"):
        bet = ips.ci(method="betting")
    assert bet.low == bet.high  # never inverted: reduced to the midpoint of the crossed bounds
    clipped = ClippedIPS(max_weight=4.0).estimate(r, p, t, reward_range=(0.0, 1.0))
    with pytest.warns(OverlapWarning, match=r"mean clipped weight is 3, which exceeds 1"):
        iv = clipped.ci(method="bottou")
    assert (iv.low, iv.high) == (1.0, 1.0)
