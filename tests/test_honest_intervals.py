"""Every interval says what it covers, and none collapses silently.

1. clipped IPS clips on the shifted scale ``r_lo + min(w, R) (r - r_lo)`` everywhere;
2. each estimate states its target (``Estimate.target``: "policy value" or "clipped value");
3. DM presents no model-conditional interval as a confidence interval;
4. near-degenerate standard errors are flagged, and every interval of an estimand that lies in
   ``reward_range`` is intersected with it.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import ope.estimators as oe
from ope._thresholds import MIN_EFFECTIVE_ROWS
from ope.exceptions import OPEWarning, SmallSampleWarning
from ope.results import compare
from ope.streaming import MomentStats

Z95 = 1.959963984540054


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OPEWarning)
        return fn(*args, **kwargs)


# --------------------------------------------------------------------------------------------
# 1. one definition of clipped IPS
# --------------------------------------------------------------------------------------------
R_HAND = np.array([11.0, 11.0, 10.0])
P_HAND = np.array([0.25, 0.5, 0.1])
T_HAND = np.array([1.0, 0.5, 1.0])  # weights 4, 1, 10 -> clipped 2, 1, 2


def test_clipped_ips_by_hand_about_the_lower_end_of_the_reward_range():
    res = _quiet(
        oe.ClippedIPS(max_weight=2.0).estimate, R_HAND, P_HAND, T_HAND, reward_range=(10.0, 11.0)
    )
    # 10 + (2 * 1 + 1 * 1 + 2 * 0) / 3 (on main: (2 * 11 + 11 + 2 * 10) / 3 = 17.67)
    assert res.value == pytest.approx(11.0, abs=1e-12)
    # sd of the shifted terms (2, 1, 0) is 1
    assert res.std_error == pytest.approx(1.0 / math.sqrt(3.0), rel=1e-12)
    assert any("r_lo = 10" in note for note in res.notes)
    # without reward_range the origin is 0, and the note says so
    res0 = _quiet(oe.ClippedIPS(max_weight=2.0).estimate, R_HAND, P_HAND, T_HAND)
    assert res0.value == pytest.approx((22.0 + 11.0 + 20.0) / 3.0)
    assert any("r_lo = 0 since no reward_range" in note for note in res0.notes)


def _two_action_logs(n: int, seed: int, low: float = 10.0, high: float = 11.0):
    """Logging plays action 1 w.p. 0.2, the target w.p. 0.9 (weights 4.5 and 0.125)."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(size=n) < 0.2
    p = np.where(a, 0.2, 0.8)
    t = np.where(a, 0.9, 0.1)
    b = rng.uniform(size=n) < np.where(a, 0.6, 0.3)
    r = low + (high - low) * b
    truth = low + (high - low) * (0.9 * 0.6 + 0.1 * 0.3)
    clipped = low + (high - low) * (0.2 * 2.0 * 0.6 + 0.8 * 0.125 * 0.3)  # clip level 2
    return r, p, t, truth, clipped


def test_the_issue_example_stays_in_the_range_and_agrees_with_bottou():
    r, p, t, truth, clipped_value = _two_action_logs(5000, 0)
    assert truth == pytest.approx(10.57) and clipped_value == pytest.approx(10.27)
    res = _quiet(oe.ClippedIPS(max_weight=2.0).estimate, r, p, t, reward_range=(10.0, 11.0))
    # on main: about 5.3, below the a priori range
    assert 10.0 <= res.value <= 11.0
    assert abs(res.value - clipped_value) < 4.0 * res.std_error
    bottou = res.ci(method="bottou")
    assert bottou.low <= truth <= bottou.high
    for method in ("normal", "t", "bootstrap", "hoeffding", "bernstein"):
        kw = {"rng": 0} if method == "bootstrap" else {}
        lo, hi = res.ci(method=method, **kw)
        assert 10.0 <= lo <= res.value <= hi <= 11.0, method
        # every interval of the clipped value overlaps Bottou's outer interval of it
        assert lo <= bottou.outer_high and bottou.outer_low <= hi, method
    # the streamed statistics and estimate_many give the same estimate and intervals
    (streamed,) = _quiet(
        MomentStats.from_arrays(r, p, t, max_weight=2.0).estimates,
        "clipped_ips",
        reward_range=(10.0, 11.0),
    )
    (many,) = _quiet(
        oe.estimate_many,
        oe.ClippedIPS(max_weight=2.0),
        reward=r,
        logging_propensity=p,
        target_propensity=t[:, None],
        reward_range=(10.0, 11.0),
    )
    for other in (streamed, many):
        assert other.value == pytest.approx(res.value, rel=1e-12)
        assert other.std_error == pytest.approx(res.std_error, rel=1e-9)
        assert np.allclose(other.ci(method="bernstein"), res.ci(method="bernstein"), rtol=1e-9)
        assert np.allclose(other.ci(method="bottou"), bottou, rtol=1e-9)


def test_clipped_ips_is_shift_equivariant_with_its_reward_range():
    r, p, t, _, _ = _two_action_logs(2000, 1, low=0.0, high=1.0)
    est = oe.ClippedIPS(max_weight=2.0)
    a = _quiet(est.estimate, r, p, t, reward_range=(0.0, 1.0))
    b = _quiet(est.estimate, r - 1.0, p, t, reward_range=(-1.0, 0.0))
    assert b.value == pytest.approx(a.value - 1.0, abs=1e-12)
    assert b.std_error == pytest.approx(a.std_error, rel=1e-9)
    for method in ("normal", "bernstein", "bottou"):
        assert np.allclose(np.array(b.ci(method=method)) + 1.0, a.ci(method=method), atol=1e-9)


# --------------------------------------------------------------------------------------------
# 2. each estimate states its target
# --------------------------------------------------------------------------------------------
def test_target_field_says_what_the_interval_covers():
    r, p, t, _, _ = _two_action_logs(2000, 2)
    res = _quiet(oe.ClippedIPS(max_weight=2.0).estimate, r, p, t, reward_range=(10.0, 11.0))
    assert res.target == "clipped value" and res.to_dict()["target"] == "clipped value"
    for method in ("normal", "t", "bootstrap", "hoeffding", "bernstein"):
        assert res.target_of(method) == "clipped value"
    assert res.with_ci(ci="bottou").target == "policy value"
    assert res.with_ci(ci="bernstein").target == "clipped value"
    assert "covers: " in res.summary() and any("ci(method='bottou')" in x for x in res.notes)
    # a clip that binds on no row: clipped IPS is IPS, and its target the policy value
    loose = _quiet(oe.ClippedIPS(max_weight=5.0).estimate, r, p, t, reward_range=(10.0, 11.0))
    assert loose.target == "policy value"
    q = np.full(r.size, 10.5)
    for est in (
        oe.IPS(),
        oe.SNIPS(),
        oe.DR(),
        oe.SNDR(),
        oe.SwitchDR(tau=3.0),
        oe.DRos(shrinkage=2.0),
    ):
        kw = {"q_logged": q, "q_target": q} if "q_target" in est.needs else {}
        assert _quiet(est.estimate, r, p, t, reward_range=(10.0, 11.0), **kw).target == (
            "policy value"
        )
    (streamed,) = _quiet(
        MomentStats.from_arrays(r, p, t, max_weight=2.0).estimates,
        "clipped_ips",
        reward_range=(10.0, 11.0),
    )
    assert streamed.target == "clipped value"
    assert streamed.target_of("bottou") == "policy value"


# --------------------------------------------------------------------------------------------
# 3. DM: no model-conditional interval
# --------------------------------------------------------------------------------------------
def test_dm_gives_no_interval_where_its_model_conditional_one_undercovered():
    # nonlinear truth r ~ Bernoulli(x^2), x ~ U(0, 1); the logger plays the evaluated action
    # w.p. 0.05 + 0.9 x^2, so a line fitted to its rows (least squares, per replication) and
    # averaged over every context is biased (by about -0.03): truth E[x^2] = 1/3
    reps, n = 300, 5000
    rng = np.random.default_rng(3)
    x = rng.uniform(size=(reps, n))
    played = rng.uniform(size=(reps, n)) < 0.05 + 0.9 * x * x
    r = (rng.uniform(size=(reps, n)) < x * x).astype(float)
    m = played.astype(float)
    k = m.sum(axis=1)
    mx, mr = (m * x).sum(axis=1) / k, (m * r).sum(axis=1) / k
    slope = (m * (x - mx[:, None]) * (r - mr[:, None])).sum(axis=1) / (
        m * (x - mx[:, None]) ** 2
    ).sum(axis=1)
    q_target = mr[:, None] + slope[:, None] * (x - mx[:, None])  # (reps, n)
    value = q_target.mean(axis=1)
    se = q_target.std(axis=1, ddof=1) / math.sqrt(n)
    old_cover = np.mean(np.abs(value - 1.0 / 3.0) <= Z95 * se)
    assert old_cover < 0.1  # the model-conditional normal interval of main: 0.043
    res = oe.DM().estimate(r[0], q_target=q_target[0], reward_range=(0.0, 1.0))
    assert res.value == pytest.approx(value[0]) and res.std_error == pytest.approx(se[0])
    assert math.isnan(res.ci_low) and math.isnan(res.ci_high)
    for method in ("normal", "t", "bootstrap"):
        assert all(math.isnan(v) for v in res.ci(method=method))
    assert any("no confidence interval" in note and "DR" in note for note in res.notes)
    diff = compare(res, oe.logging_value(r[0]))
    assert math.isnan(diff.ci_low) and math.isnan(diff.ci(method="t").high)


# --------------------------------------------------------------------------------------------
# 4. collapsing intervals
# --------------------------------------------------------------------------------------------
def _three_rare_rows(n: int = 50):
    # three rare-action rows (logging propensity 0.02, target 0.5: weight 25), the rest common
    p = np.full(n, 0.98)
    p[:3] = 0.02
    t = np.full(n, 0.5)
    return np.ones(n), p, t


def test_a_degenerate_standard_error_gets_a_note_and_a_warning():
    r, p, t = _three_rare_rows()
    with pytest.warns(SmallSampleWarning, match=r"ci\(method='betting'\).*holds at any n"):
        res = oe.SNIPS().estimate(r, p, t, reward_range=(0.0, 1.0))
    assert res.std_error < 1e-12 and res.ess < MIN_EFFECTIVE_ROWS
    assert any("near-degenerate" in note and "betting" in note for note in res.notes)
    # the method the note points to does not collapse
    lo, hi = res.ci(method="betting")
    assert hi - lo > 0.05 and lo < 0.9745
    # an estimate on many effective rows gets no such note
    with warnings.catch_warnings():
        warnings.simplefilter("error", SmallSampleWarning)
        on_policy = oe.SNIPS().estimate(r, p, p, reward_range=(0.0, 1.0))
    assert not any("near-degenerate" in note for note in on_policy.notes)


def test_dr_normal_interval_is_intersected_with_the_reward_range():
    n = 200
    r = np.zeros(n)
    r[0] = 1.0
    p = np.full(n, 0.5)
    q = np.zeros(n)
    # one reward of 1 among 200 zeros: skewness 14, so the normal interval is noted as short
    with pytest.warns(SmallSampleWarning, match="skewness 14"):
        free = oe.DR().estimate(r, p, p, q_logged=q, q_target=q)
    assert free.ci_low < 0.0  # no range given: nothing to intersect with
    assert any(getattr(x, "rule", None) == "skewed_terms" for x in free.notes)
    with pytest.warns(SmallSampleWarning):
        res = oe.DR().estimate(r, p, p, q_logged=q, q_target=q, reward_range=(0.0, 1.0))
    assert res.ci_low == 0.0 and res.ci_high == pytest.approx(free.ci_high)
    for method in ("t", "bootstrap"):
        kw = {"rng": 0} if method == "bootstrap" else {}
        assert res.ci(method=method, **kw).low >= 0.0
    with pytest.warns(SmallSampleWarning, match="skewness 14"):
        snips = oe.SNIPS().estimate(r, p, p, reward_range=(0.0, 1.0))
    assert snips.ci_low == 0.0


def test_raw_weight_sums_give_the_clipped_estimate_about_r_lo():
    from ope.streaming import MomentStats

    m = MomentStats.from_arrays(R_HAND, P_HAND, T_HAND, max_weight=2.0).moments
    value = 10.0 + (m["sum_cwr"][0] - 10.0 * m["sum_cw"][0]) / 3.0
    res = _quiet(
        oe.ClippedIPS(max_weight=2.0).estimate, R_HAND, P_HAND, T_HAND, reward_range=(10.0, 11.0)
    )
    assert value == pytest.approx(res.value, rel=1e-12)
