"""Estimators: hand-computed vectors, exact bias, validation messages, many-policy path."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from ope.estimators import (
    DM,
    DR,
    IPS,
    SNDR,
    SNIPS,
    ClippedIPS,
    DRos,
    SwitchDR,
    estimate_many,
    get_estimator,
    logging_value,
)
from ope.exceptions import (
    EstimationError,
    OverlapWarning,
    ParameterError,
    SmallSampleWarning,
    ValidationError,
)

# ---------------------------------------------------------------------------------------------
# a tiny n = 5 example worked by hand
# ---------------------------------------------------------------------------------------------
R = np.array([1.0, 0.0, 1.0, 0.5, 0.0])
P = np.array([0.5, 0.25, 0.5, 0.8, 0.4])
T = np.array([1.0, 0.5, 0.25, 0.4, 0.2])
# w = T / P = [2, 2, 0.5, 0.5, 0.5]
QL = np.array([0.8, 0.1, 0.6, 0.5, 0.1])  # q(x_i, a_i)
QT = np.array([0.6, 0.4, 0.5, 0.5, 0.2])  # q(x_i, pi); sum = 2.2
IPS_ARGS = {"reward": R, "logging_propensity": P, "target_propensity": T}
DR_ARGS = {**IPS_ARGS, "q_logged": QL, "q_target": QT}


def _se(values):
    values = np.asarray(values, dtype=float)
    return float(np.std(values, ddof=1) / math.sqrt(values.size))


@pytest.fixture(autouse=True)
def _quiet_small_sample():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallSampleWarning)
        yield


def test_ips_by_hand():
    res = IPS().estimate(**IPS_ARGS)
    # w*r = [2*1, 2*0, 0.5*1, 0.5*0.5, 0.5*0] = [2, 0, 0.5, 0.25, 0]; sum 2.75
    assert res.value == pytest.approx(2.75 / 5)
    # deviations from 0.55: [1.45, -0.55, -0.05, -0.3, -0.55]; squares sum to 2.8
    # sample variance 2.8 / 4 = 0.7; se = sqrt(0.7 / 5) = sqrt(0.14)
    assert res.std_error == pytest.approx(math.sqrt(0.14))
    # Kish ESS: (sum w)^2 / sum w^2 = 5.5^2 / (4 + 4 + 0.25*3) = 30.25 / 8.75
    assert res.ess == pytest.approx(30.25 / 8.75)
    assert res.n == 5 and res.estimator == "ips"


def test_clipped_ips_by_hand():
    res = ClippedIPS(max_weight=1.5).estimate(**IPS_ARGS)
    # min(w, 1.5) = [1.5, 1.5, 0.5, 0.5, 0.5]; times r = [1.5, 0, 0.5, 0.25, 0]; sum 2.25
    assert res.value == pytest.approx(2.25 / 5)
    assert res.std_error == pytest.approx(_se([1.5, 0, 0.5, 0.25, 0]))
    assert res.ess == pytest.approx(4.5**2 / (2.25 * 2 + 0.25 * 3))


def test_snips_by_hand():
    res = SNIPS().estimate(**IPS_ARGS)
    # sum w r = 2.75, sum w = 5.5 -> 0.5
    assert res.value == pytest.approx(0.5)
    # w (r - 0.5) = [1, -1, 0.25, 0, -0.25]; squares sum 2.125
    # se = sqrt(n / (n - 1)) * sqrt(2.125) / 5.5
    assert res.std_error == pytest.approx(math.sqrt(5 / 4 * 2.125) / 5.5)


def test_dm_by_hand():
    res = DM().estimate(R, q_target=QT)
    assert res.value == pytest.approx(2.2 / 5)
    assert res.std_error == pytest.approx(_se(QT))
    assert res.ess == 5.0


def test_dr_by_hand():
    res = DR().estimate(**DR_ARGS)
    # r - q_logged = [0.2, -0.1, 0.4, 0, -0.1]; w * that = [0.4, -0.2, 0.2, 0, -0.05]
    # contributions q_target + correction = [1.0, 0.2, 0.7, 0.5, 0.15]; sum 2.55
    assert res.value == pytest.approx(2.55 / 5)
    assert res.std_error == pytest.approx(_se([1.0, 0.2, 0.7, 0.5, 0.15]))


def test_sndr_by_hand():
    res = SNDR().estimate(**DR_ARGS)
    # mean q_target = 0.44; sum w (r - q_logged) = 0.35; sum w = 5.5
    assert res.value == pytest.approx(0.44 + 0.35 / 5.5)
    theta = 0.35 / 5.5
    w = T / P
    psi = (QT - 0.44) + w * (R - QL - theta) / 1.1  # mean weight 5.5 / 5 = 1.1
    assert res.std_error == pytest.approx(_se(psi))


def test_switch_dr_by_hand():
    res = SwitchDR(tau=1.0).estimate(**DR_ARGS)
    # weights 2 > tau are switched off: corrections [0, 0, 0.2, 0, -0.05]; sum 0.15
    assert res.value == pytest.approx((2.2 + 0.15) / 5)
    assert res.std_error == pytest.approx(_se([0.6, 0.4, 0.7, 0.5, 0.15]))
    # ESS of the switched weights [0, 0, 0.5, 0.5, 0.5]: 1.5^2 / 0.75 = 3
    assert res.ess == pytest.approx(3.0)


def test_dros_by_hand():
    res = DRos(shrinkage=4.0).estimate(**DR_ARGS)
    # shrunk weights: 4*2/(4+4) = 1 and 4*0.5/(0.25+4) = 2/4.25
    ws = 2 / 4.25
    corrections = [1 * 0.2, 1 * -0.1, ws * 0.4, 0.0, ws * -0.1]
    assert res.value == pytest.approx((2.2 + sum(corrections)) / 5)
    assert res.std_error == pytest.approx(_se(QT + np.array(corrections)))


def test_logging_value_by_hand():
    res = logging_value(R)
    assert res.value == pytest.approx(2.5 / 5)
    assert res.std_error == pytest.approx(_se(R))
    assert res.estimator == "logging"


def test_dros_limits_are_dm_and_dr():
    dm = DM().estimate(R, q_target=QT).value
    dr = DR().estimate(**DR_ARGS).value
    assert DRos(shrinkage=1e-12).estimate(**DR_ARGS).value == pytest.approx(dm, abs=1e-9)
    assert DRos(shrinkage=1e12).estimate(**DR_ARGS).value == pytest.approx(dr, abs=1e-9)


# ---------------------------------------------------------------------------------------------
# registry and settings
# ---------------------------------------------------------------------------------------------
def test_registry_builds_every_estimator():
    assert get_estimator("ips") == IPS()
    assert get_estimator("CLIPPED_IPS", max_weight=5.0) == ClippedIPS(max_weight=5.0)
    assert get_estimator("switch_dr", tau=3.0) == SwitchDR(tau=3.0)
    assert get_estimator("dros", shrinkage=2.0) == DRos(shrinkage=2.0)
    for name in ("dm", "snips", "dr", "sndr"):
        assert get_estimator(name).name == name


@pytest.mark.parametrize(
    ("name", "settings", "match"),
    [
        ("ipw", {}, r"unknown estimator 'ipw'; choose one of dm, ips, clipped_ips"),
        (
            "ips",
            {"max_weight": 3.0},
            r"estimator 'ips' does not take max_weight; its settings: none",
        ),
        ("clipped_ips", {}, r"estimator 'clipped_ips' needs max_weight=\.\.\."),
        (
            "dros",
            {"tau": 1.0, "shrinkage": 1.0},
            r"'dros' does not take tau; its settings: shrinkage",
        ),
    ],
)
def test_registry_errors(name, settings, match):
    with pytest.raises(ValueError, match=match):
        get_estimator(name, **settings)


@pytest.mark.parametrize(
    ("factory", "match"),
    [
        (
            lambda: ClippedIPS(max_weight=0),
            r"`max_weight` must be a positive finite number \(the clip level\)",
        ),
        (lambda: SwitchDR(tau=-1.0), r"SwitchDR: `tau` must be a positive finite number; got -1.0"),
        (lambda: DRos(shrinkage=float("nan")), r"DRos: `shrinkage` must be a positive finite"),
    ],
)
def test_invalid_settings(factory, match):
    with pytest.raises(ValueError, match=match):
        factory()


def test_estimators_are_frozen_settings_only():
    est = ClippedIPS(max_weight=2.0)
    with pytest.raises(AttributeError):
        est.max_weight = 3.0  # type: ignore[misc]
    import dataclasses

    assert dataclasses.replace(est, max_weight=3.0).max_weight == 3.0
    assert [f.name for f in dataclasses.fields(IPS())] == []
    assert [f.name for f in dataclasses.fields(SwitchDR(tau=1.0))] == ["tau"]


# ---------------------------------------------------------------------------------------------
# validation messages
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: DR().estimate(**IPS_ARGS),
            r"dr needs a reward model's predictions: pass q_logged= and q_target=.*reward_model=",
        ),
        (
            lambda: SNDR().estimate(**IPS_ARGS, q_target=QT),
            r"sndr needs a reward model's predictions: pass q_logged= \(",
        ),
        (lambda: DM().estimate(R), r"dm needs a reward model's predictions: pass q_target="),
        (
            lambda: IPS().estimate(R, P[:4], T[:4]),
            r"`logging_propensity` has 4 rows but `reward` has 5",
        ),
        (
            lambda: IPS().estimate(R, np.r_[P[:4], 0.0], T),
            r"`logging_propensity` must be in \(0, 1\]; 1 rows are not \(first at row 4: 0.0\)",
        ),
        (
            lambda: IPS().estimate(np.r_[R[:4], np.inf], P, T),
            r"`reward` must be finite; 1 rows are NaN or infinite \(first at row 4\)",
        ),
        (
            lambda: IPS().estimate(R, P, T, reward_range=(0.0, 0.5)),
            r"`reward` has 2 rows outside reward_range=\(0, 0.5\) \(first at row 0: 1.0\)",
        ),
        (
            lambda: IPS().estimate(R, P, np.c_[T, T]),
            r"ips.estimate takes one candidate policy.*estimate_many",
        ),
        (lambda: IPS().estimate(R[:1], P[:1], T[:1]), r"ips: need at least 2 rows"),
        (
            lambda: DR().estimate(**IPS_ARGS, q_logged=QL, q_target=np.c_[QT, QT]),
            r"`q_target` has 2 policy columns but `target_propensity` has 1",
        ),
    ],
)
def test_validation_errors(call, match):
    with pytest.raises(ValidationError, match=match):
        call()


@pytest.mark.parametrize("est", [IPS(), SNIPS(), ClippedIPS(max_weight=2.0), SNDR()])
def test_all_zero_weights_is_an_estimation_error(est):
    kwargs = {"q_logged": QL, "q_target": QT} if isinstance(est, SNDR) else {}
    with pytest.raises(EstimationError, match=r"all 5 importance weights are zero.*DM or DR"):
        est.estimate(R, P, np.zeros(5), **kwargs)


@pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning")
@pytest.mark.parametrize("est", [IPS(), SNIPS(), ClippedIPS(max_weight=5.0)], ids=lambda e: e.name)
def test_weights_that_overflow_float64_are_an_error_not_nan(est):
    # 1 / 1e-320 is inf in float64 (and 1 / 1e-200 squares to inf): never a silent NaN
    p = np.array([0.5, 1e-320, 0.5, 1e-200])
    r = np.array([1.0, 1.0, 0.0, 1.0])
    t = np.array([0.5, 1.0, 0.5, 1.0])
    with pytest.raises(
        ValidationError,
        match=r"importance weights overflow float64: 2 rows "
        r"\(first at row 1: logging propensity 1e-320\)",
    ):
        est.estimate(r, p, t)
    from ope.streaming import MomentStats

    with pytest.raises(ValidationError, match=r"importance weights overflow float64: 2 rows"):
        MomentStats.from_arrays(r, p, t)


def test_all_zero_weights_reduce_dr_to_dm_with_a_note():
    with pytest.warns(OverlapWarning) as record:
        res = DR().estimate(R, P, np.zeros(5), q_logged=QL, q_target=QT)
    assert "dr: all 5 importance weights are zero" in str(record[0].message)
    assert "mean importance weight is 0, while every weight is equal" in str(record[1].message)
    assert res.value == pytest.approx(0.44)
    assert any("reduces to the reward model" in note for note in res.notes)
    # as DM's, the estimate carries no interval: its standard error treats the model as exact
    dm = DM().estimate(R, q_target=QT)
    assert (res.value, res.std_error) == pytest.approx((dm.value, dm.std_error))
    for method in ("normal", "t", "bootstrap"):
        assert all(math.isnan(x) for x in res.ci(method=method)), method
    assert math.isnan(res.ci_low) and math.isnan(res.ci_high)


def test_switch_dr_with_every_weight_switched_off_says_why():
    # w = [2, 2, .5, .5, .5] are all above tau = 0.1: the candidate does choose logged actions,
    # the switch discards them all
    with pytest.warns(OverlapWarning) as record:
        res = SwitchDR(tau=0.1).estimate(R, P, T, q_logged=QL, q_target=QT)
    message = str(record[0].message)
    assert message.startswith("switch_dr: every importance weight is switched off or shrunk to 0")
    assert "never chooses a logged action" not in message
    assert res.value == pytest.approx(0.44)  # the reward model alone (DM)


def test_low_ess_and_support_gap_warn_and_note():
    n = 1000
    p = np.full(n, 0.5)
    t = np.zeros(n)
    t[0] = 1.0  # one row carries all the weight, and the candidate's mass is mostly unlogged
    r = np.ones(n)
    with pytest.warns(OverlapWarning) as record:
        res = IPS().estimate(r, p, t)
    messages = " ".join(str(w.message) for w in record)
    assert "effective sample size 1.0 is 0.10% of n=1000" in messages
    assert "mean importance weight is 0.002" in messages
    # and the estimate's own standard error rests on that one row (the low-ESS note alone
    # before: SNIPS' interval here is [1, 1])
    assert "ips: the estimate rests on 1 effective row (< 30) and its standard error" in messages
    assert len(res.notes) == 3
    assert record[0].filename == __file__  # warnings point at the caller, not at ope


def test_small_sample_warns():
    with warnings.catch_warnings():
        warnings.simplefilter("error", SmallSampleWarning)
        with pytest.raises(SmallSampleWarning, match=r"^only n=5 rows \(< 30\)"):
            IPS().estimate(**IPS_ARGS)


def test_weight_warnings_do_not_depend_on_the_estimator():
    # ope.evaluate runs several estimators on each policy and emits each distinct message once:
    # warnings about a policy's raw weights must read the same whichever estimator found them
    n = 1000
    p = np.full(n, 0.5)
    t = np.zeros((n, 2))
    t[0, 0] = t[1, 1] = 1.0
    r = np.ones(n)
    q = np.zeros((n, 2))
    seen = {}
    for est in (IPS(), SNIPS(), DR(), ClippedIPS(max_weight=10.0)):
        with pytest.warns(OverlapWarning) as record:
            estimate_many(
                est,
                reward=r,
                logging_propensity=p,
                target_propensity=t,
                q_logged=q[:, 0],
                q_target=q,
                names=["a", "b"],
            )
        # the notes on the policies' weights (the estimate's own, on its standard error,
        # name the estimator)
        seen[est.name] = {str(w.message) for w in record if w.category is OverlapWarning}
        assert {str(w.message).split(" (policy")[0] for w in record} >= {est.name}
    assert len(seen["ips"]) == 4  # ESS and mean weight, for each of the two policies
    assert seen["ips"] == seen["snips"] == seen["dr"]
    assert any(m.startswith("policy 'a': mean importance weight is 0.002") for m in seen["ips"])
    # clipping at 10 changes no weight here (all are 0 or 2): the same messages again
    assert seen["clipped_ips"] == seen["ips"]
    # clipping that changes the weights changes the ESS, so that warning names the estimator
    t[0, 0], t[2:5, 1] = 0.5, 1e-3  # policy a: weights 0 and 1, none clipped
    with pytest.warns(OverlapWarning) as record:
        estimate_many(
            ClippedIPS(max_weight=1.5),
            reward=r,
            logging_propensity=p,
            target_propensity=t,
            names=["a", "b"],
        )
    messages = {str(w.message) for w in record}
    assert any(m.startswith("clipped_ips (policy 'b'): effective sample size") for m in messages)
    assert any(m.startswith("policy 'a': effective sample size") for m in messages)


def test_mean_weight_above_one_is_not_called_a_support_gap():
    n = 200
    with pytest.warns(OverlapWarning) as record:
        IPS().estimate(np.ones(n), np.full(n, 0.25), np.full(n, 0.75))
    message = str(record[0].message)
    assert "mean importance weight is 3" in message
    assert "propensities are too small" in message and "support gap" not in message


def test_no_warning_on_clean_data():
    rng = np.random.default_rng(0)
    n = 500
    p = np.full(n, 0.5)
    t = rng.choice([0.25, 0.75], size=n)
    t = np.where(rng.uniform(size=n) < 0.5, t, 1 - t)  # E[w] = 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = SNIPS().estimate(rng.uniform(size=n), p, t)
    assert res.notes == ()


# ---------------------------------------------------------------------------------------------
# many policies, chunking, float32
# ---------------------------------------------------------------------------------------------
def _many_policy_data(n=3001, n_pol=4, seed=5):
    rng = np.random.default_rng(seed)
    r = rng.binomial(1, 0.4, size=n).astype(float)
    p = rng.uniform(0.1, 1.0, size=n)
    t = rng.uniform(size=(n, n_pol))
    ql = rng.uniform(size=n)
    qt = rng.uniform(size=(n, n_pol))
    return r, p, t, ql, qt


ALL = [
    IPS(),
    ClippedIPS(max_weight=3.0),
    SNIPS(),
    DM(),
    DR(),
    SNDR(),
    SwitchDR(tau=4.0),
    DRos(shrinkage=5.0),
]


def _one(est, r, p, t, ql, qt):
    if isinstance(est, DM):
        return est.estimate(r, q_target=qt)
    if isinstance(est, (IPS, ClippedIPS, SNIPS)):
        return est.estimate(r, p, t)
    return est.estimate(r, p, t, q_logged=ql, q_target=qt)


@pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning")
@pytest.mark.parametrize("est", ALL, ids=lambda e: e.name)
def test_estimate_many_equals_per_policy_estimate_and_is_chunk_invariant(est):
    r, p, t, ql, qt = _many_policy_data()
    kwargs = dict(reward=r, logging_propensity=p, target_propensity=t, q_logged=ql, q_target=qt)
    many = estimate_many(est, **kwargs, names=["a", "b", "c", "d"])
    chunked = estimate_many(est, **kwargs, chunk_size=97)
    for j, res in enumerate(many):
        single = _one(est, r, p, t[:, j], ql, qt[:, j])
        assert res.policy == "abcd"[j]
        assert res.value == pytest.approx(single.value, rel=1e-12)
        assert res.std_error == pytest.approx(single.std_error, rel=1e-10)
        assert res.ess == pytest.approx(single.ess, rel=1e-12)
        assert chunked[j].value == pytest.approx(res.value, rel=1e-12)
        assert chunked[j].std_error == pytest.approx(res.std_error, rel=1e-10)
        # the influence vector reproduces the chunked standard error
        psi = res.influence()
        assert abs(psi.mean()) < 1e-12
        assert res.std_error == pytest.approx(_se(psi), rel=1e-9)


@pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning")
@pytest.mark.parametrize("est", ALL, ids=lambda e: e.name)
def test_float32_inputs_give_float64_results(est):
    r, p, t, ql, qt = _many_policy_data(n=2000, n_pol=1)
    cast = [a.astype(np.float32) for a in (r, p, t[:, 0], ql, qt[:, 0])]
    ref = _one(est, *[a.astype(np.float64) for a in cast])
    res = _one(est, *cast)
    assert isinstance(res.value, float)
    assert res.value == pytest.approx(ref.value, rel=1e-6)
    assert res.std_error == pytest.approx(ref.std_error, rel=1e-6)


@pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning")
@pytest.mark.parametrize("est", ALL, ids=lambda e: e.name)
def test_long_double_inputs_are_read_as_float64(est):
    """numpy's long double (80 or 128 bits) is read as float64, on either backend; the compiled
    kernel refused its type (a numba TypingError) before."""
    r, p, t, ql, qt = _many_policy_data(n=500, n_pol=1)
    plain = [r, p, t[:, 0], ql, qt[:, 0]]
    ref = _one(est, *plain)
    res = _one(est, *[a.astype(np.longdouble) for a in plain])
    assert res.value == ref.value and res.std_error == ref.std_error


@pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning")
def test_estimate_many_accepts_names_and_checks_them():
    r, p, t, ql, qt = _many_policy_data(n=100, n_pol=2)
    with pytest.raises(
        ValidationError,
        match=r"`names` has 3 entries but `target_propensity` "
        r"has 2 policy columns",
    ):
        estimate_many(
            "ips", reward=r, logging_propensity=p, target_propensity=t, names=["a", "b", "c"]
        )
    with pytest.raises(
        ParameterError,
        match=r"`names` must be a list of names .* not the "
        r"single string 'abc'",
    ):
        estimate_many("ips", reward=r, logging_propensity=p, target_propensity=t, names="abc")
    with pytest.raises(TypeError, match=r"`estimator` must be an ope estimator"):
        estimate_many(42, reward=r, logging_propensity=p, target_propensity=t)  # type: ignore


# ---------------------------------------------------------------------------------------------
# exact expectations and bias over replications
# ---------------------------------------------------------------------------------------------
def _two_action_rows(n, k):
    """One context, two actions: k rows of the rare action a1, n - k of a0.

    Logging (0.9, 0.1), target (0.1, 0.9); rewards r(a0) = 0, r(a1) = 1 deterministically, so
    the true target value is 0.9. A reward model q(a0) = 0.2, q(a1) = 0.5 gives
    q(x, pi) = 0.1 * 0.2 + 0.9 * 0.5 = 0.47 on every row.
    """
    rare = np.arange(n) < k
    return {
        "reward": rare.astype(float),
        "logging_propensity": np.where(rare, 0.1, 0.9),
        "target_propensity": np.where(rare, 0.9, 0.1),
        "q_logged": np.where(rare, 0.5, 0.2),
        "q_target": np.full(n, 0.47),
    }


def _exact_expectation(est, n):
    """E[estimate] over k ~ Binomial(n, 0.1), computed exactly by enumerating k."""
    total = 0.0
    for k in range(n + 1):  # enumerate the n + 1 possible samples, weighted by their pmf
        rows = _two_action_rows(n, k)
        if not isinstance(est, (DR, SNDR)):
            rows = {key: rows[key] for key in ("reward", "logging_propensity", "target_propensity")}
        if k == 0 and isinstance(est, SNIPS):
            value = 0.0  # sum w r = 0 over a positive sum of weights
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                value = est.estimate(**rows).value
        total += stats.binom.pmf(k, n, 0.1) * value
    return total


def test_ips_is_exactly_unbiased_and_snips_bias_shrinks_with_n():
    assert _exact_expectation(IPS(), 10) == pytest.approx(0.9, abs=1e-12)
    assert _exact_expectation(DR(), 10) == pytest.approx(0.9, abs=1e-12)
    biases = [abs(_exact_expectation(SNIPS(), n) - 0.9) for n in (5, 20, 80)]
    assert biases[0] > biases[1] > biases[2]
    # O(1/n): quadrupling n divides the bias by more than 2 once n is past the k = 0 regime
    assert biases[0] > 0.1 and biases[2] < 0.02 and biases[1] / biases[2] > 2
    sndr = [abs(_exact_expectation(SNDR(), n) - 0.9) for n in (5, 20, 80)]
    assert sndr[0] > sndr[1] > sndr[2] and sndr[2] < 0.01


def test_clipped_ips_expectation_is_the_clipped_estimand():
    # E[min(w, 5) r] = 0.1 * 5 * 1 = 0.5 <= 0.9: clipping biases down for rewards >= 0
    assert _exact_expectation(ClippedIPS(max_weight=5.0), 12) == pytest.approx(0.5, abs=1e-12)


def _simulate(rng, reps, n):
    """Contextual bandit with exact truth: 3 contexts, 4 actions, Bernoulli rewards."""
    px = np.array([0.2, 0.5, 0.3])
    pi0 = np.array([[0.4, 0.3, 0.2, 0.1], [0.25, 0.25, 0.25, 0.25], [0.1, 0.2, 0.3, 0.4]])
    pi = np.array([[0.1, 0.1, 0.2, 0.6], [0.7, 0.1, 0.1, 0.1], [0.25, 0.25, 0.25, 0.25]])
    mu = np.array([[0.2, 0.4, 0.6, 0.8], [0.9, 0.3, 0.2, 0.1], [0.5, 0.5, 0.1, 0.3]])
    truth = float(np.sum(px[:, None] * pi * mu))
    x = (rng.uniform(size=(reps, n, 1)) > np.cumsum(px)).sum(-1)
    a = (rng.uniform(size=(reps, n, 1)) > np.cumsum(pi0[x], axis=-1)).sum(-1)
    r = (rng.uniform(size=(reps, n)) < mu[x, a]).astype(float)
    model = np.clip(mu + 0.15, 0, 1)  # a deliberately biased reward model
    return truth, {
        "reward": r,
        "p": pi0[x, a],
        "t": pi[x, a],
        "ql": model[x, a],
        "qt": np.sum(pi[x] * model[x], axis=-1),
        "qt_true": np.sum(pi[x] * mu[x], axis=-1),
    }


@pytest.mark.parametrize(
    "est",
    [IPS(), DR(), DM(), DRos(shrinkage=1e9)],
    ids=["ips", "dr", "dm_true_model", "dros_large"],
)
def test_unbiased_estimators_over_replications(est):
    rng = np.random.default_rng(11)
    truth, d = _simulate(rng, reps=300, n=200)
    values = []
    for i in range(300):  # replications, not rows
        if isinstance(est, DM):
            res = est.estimate(d["reward"][i], q_target=d["qt_true"][i])
        elif isinstance(est, IPS):
            res = est.estimate(d["reward"][i], d["p"][i], d["t"][i])
        else:
            res = est.estimate(
                d["reward"][i], d["p"][i], d["t"][i], q_logged=d["ql"][i], q_target=d["qt"][i]
            )
        values.append(res.value)
    values = np.array(values)
    se = values.std(ddof=1) / math.sqrt(values.size)
    assert abs(values.mean() - truth) < 3 * se


def test_dm_with_biased_model_is_biased_but_dr_corrects_it():
    rng = np.random.default_rng(12)
    truth, d = _simulate(rng, reps=1, n=20000)
    dm = DM().estimate(d["reward"][0], q_target=d["qt"][0])
    dr = DR().estimate(
        d["reward"][0], d["p"][0], d["t"][0], q_logged=d["ql"][0], q_target=d["qt"][0]
    )
    assert abs(dm.value - truth) > 10 * dm.std_error
    assert abs(dr.value - truth) < 4 * dr.std_error


@pytest.mark.slow
def test_normal_interval_coverage_over_replications():
    rng = np.random.default_rng(13)
    reps = 1000
    truth, d = _simulate(rng, reps=reps, n=400)
    cover = {"ips": 0, "snips": 0, "dr": 0}
    for i in range(reps):
        r, p, t = d["reward"][i], d["p"][i], d["t"][i]
        for est in (IPS(), SNIPS()):
            res = est.estimate(r, p, t)
            cover[est.name] += res.ci_low <= truth <= res.ci_high
        res = DR().estimate(r, p, t, q_logged=d["ql"][i], q_target=d["qt"][i])
        cover["dr"] += res.ci_low <= truth <= res.ci_high
    for name, hits in cover.items():
        # 95% nominal; binomial sd at 1000 reps is 0.0069, allow 3 sd
        assert abs(hits / reps - 0.95) < 0.021, name


def test_a_reversed_reward_range_is_a_bad_argument():
    # restored from the data-error table: the range is an argument, so it is a ParameterError now
    from ope.exceptions import ParameterError

    r, p, t = np.array([1.0, 0.0, 1.0]), np.full(3, 0.5), np.array([1.0, 0.0, 0.5])
    with pytest.raises(ParameterError, match=r"`reward_range` must be finite with low < high"):
        IPS().estimate(r, p, t, reward_range=(1.0, 0.0))
