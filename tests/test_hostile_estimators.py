"""Hostile values on the estimators, their moment statistics, the slate estimators and the
intervals: each is refused by an ope error that names the argument, or gives finite numbers.

The registry's harness (tests/test_contract_registry.py) feeds whole catalogues; these pin the
root fixes one by one: the message, and the numbers where a computation is scaled.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from ope import DM, DR, IPS, SNDR, SNIPS, ClippedIPS, DRos, SwitchDR
from ope.estimators import estimate_many, get_estimator
from ope.exceptions import EstimationError, ParameterError, PolicyError, ValidationError
from ope.intervals import (
    bernstein_interval,
    bootstrap_interval,
    bootstrap_replicates,
    bottou_interval,
    hoeffding_interval,
    normal_interval,
    resample_counts,
    shared_bootstrap,
    t_interval,
)
from ope.slates import CascadeDR, CascadeIPS, IndependentIPS, PseudoInverse, SlateIPS
from ope.streaming import MomentStats
from ope.weights import factor_weights

N = 60
GEN = np.random.default_rng(0)
ACTION = GEN.integers(0, 3, N)
R = GEN.binomial(1, 0.4, N).astype(np.float64)
P = np.full(N, 1 / 3)
T = np.where(ACTION == 1, 0.8, 0.1)
QL = GEN.uniform(0.2, 0.6, N)
QT = GEN.uniform(0.2, 0.6, N)

MODEL_BASED = [DM(), DR(), SNDR(), SwitchDR(tau=2.0), DRos(shrinkage=1.0)]


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def _estimate(est, **changes):
    kwargs = dict(reward=R, logging_propensity=P, target_propensity=T)
    if "q_logged" in est.needs:
        kwargs["q_logged"] = QL
    if "q_target" in est.needs:
        kwargs["q_target"] = QT
    kwargs.update(changes)
    if not est.uses_weights:
        kwargs.pop("logging_propensity")
        kwargs.pop("target_propensity")
    return _quiet(est.estimate, **kwargs)


# ---------------------------------------------------------------------------------------------
# the shared validation of the estimators names the argument
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "est", [IPS(), SNIPS(), ClippedIPS(max_weight=10.0), *MODEL_BASED], ids=lambda e: e.name
)
def test_too_few_rows_name_reward(est):
    with pytest.raises(ValidationError, match=r"need at least 2 rows .*; `reward` has 0"):
        _estimate(est, reward=np.empty(0))


@pytest.mark.parametrize(
    "est", [IPS(), SNIPS(), ClippedIPS(max_weight=10.0), SNDR()], ids=lambda e: e.name
)
def test_all_zero_weights_name_target_propensity(est):
    with pytest.raises(EstimationError, match=r"`target_propensity` is 0 on every row"):
        _estimate(est, target_propensity=np.zeros(N))


def test_names_must_be_a_sequence_and_match_the_named_columns():
    t2 = np.column_stack([T, T])
    with pytest.raises(
        ParameterError,
        match=r"`names` must be a list of names \(strings\); "
        r"got 3.5",
    ):
        estimate_many("ips", reward=R, logging_propensity=P, target_propensity=t2, names=3.5)
    with pytest.raises(
        ValidationError,
        match=r"`names` has 1 entries but `target_propensity` "
        r"has 2 policy columns",
    ):
        _quiet(MomentStats.from_arrays, R, P, t2, names=["a"])
    with pytest.raises(ValidationError, match=r"`names` has 2 entries but `q_target` has 1"):
        estimate_many("dm", reward=R, q_target=QT, names=["a", "b"])


def test_unknown_estimator_names_the_argument_it_came_in():
    with pytest.raises(ParameterError, match=r"^`name`: unknown estimator 'ipw'"):
        get_estimator("ipw")
    with pytest.raises(ParameterError, match=r"^`estimator`: unknown estimator 'ipw'"):
        estimate_many("ipw", reward=R, logging_propensity=P, target_propensity=T)
    stats = _quiet(MomentStats.from_arrays, R, P, T)
    with pytest.raises(ParameterError, match=r"^`estimator`: unknown estimator ''"):
        stats.estimates("")


# ---------------------------------------------------------------------------------------------
# DM and the doubly robust family: computed in units of a power of two near the float64 limit
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("est", MODEL_BASED, ids=lambda e: e.name)
def test_model_based_estimates_scale_exactly_up_to_the_float64_limit(est):
    small = _estimate(est)
    big = 2.0**1000  # rewards and predictions near 1e301: the sums of squares would overflow
    scaled = {"reward": R * big, "q_logged": QL * big, "q_target": QT * big}
    large = _estimate(est, **{k: v for k, v in scaled.items() if k in ("reward", *est.needs)})
    assert large.value == small.value * big
    assert large.std_error == small.std_error * big
    assert math.isfinite(large.value) and math.isfinite(large.std_error)


@pytest.mark.parametrize(
    "est, column",
    [
        pytest.param(est, column, id=f"{est.name}-{column}")
        for est in MODEL_BASED
        for column in ("reward", *est.needs)
    ],
)
def test_one_input_at_1e308_gives_a_finite_estimate(est, column):
    res = _estimate(est, **{column: np.full(N, 1e308)})
    assert math.isfinite(res.value) and math.isfinite(res.std_error)
    if column != "reward" or est.uses_weights:  # DM's value does not read the rewards
        assert abs(res.value) > 1e307


def test_a_value_float64_cannot_hold_is_refused_naming_the_input():
    with pytest.raises(
        ValidationError,
        match=r"dr's value and standard error overflow float64: "
        r"`reward` reaches \|value\| 1\.7e\+308",
    ):
        _estimate(DR(), reward=np.full(N, 1.7e308), q_logged=np.full(N, -1.7e308))


def test_weighted_rows_are_scaled_the_same_way():
    s = GEN.uniform(1.0, 3.0, N)
    kwargs = dict(
        reward=R,
        logging_propensity=P,
        target_propensity=T,
        q_logged=QL,
        q_target=QT,
        sampling_weight=s,
    )
    (small,) = _quiet(estimate_many, "dr", **kwargs)
    big = 2.0**1000
    kwargs.update(reward=R * big, q_logged=QL * big, q_target=QT * big)
    (large,) = _quiet(estimate_many, "dr", **kwargs)
    assert (large.value, large.std_error) == (small.value * big, small.std_error * big)


def test_sampling_weights_are_bounded_and_their_length_names_reward():
    s = np.full(N, 1e308)
    for est in (IPS(), DR()):
        with pytest.raises(
            ValidationError,
            match=r"`sampling_weight` \(the rows' sampling "
            r"weights\) must be at most 1e\+150; 60 rows",
        ):
            _estimate(est, sampling_weight=s)
    with pytest.raises(
        ValidationError,
        match=r"`sampling_weight` has 59 rows but the logs have "
        r"60 \(the rows of `reward`\)",
    ):
        _estimate(IPS(), sampling_weight=np.ones(N - 1))


def test_a_weighted_weighting_estimate_float64_cannot_hold_is_refused_naming_reward():
    with pytest.raises(
        ValidationError,
        match=r"clipped_ips: the estimate is not representable "
        r"in float64 .*Rescale the `reward` column",
    ):
        _estimate(
            ClippedIPS(max_weight=10.0),
            reward=np.full(N, 1e308),
            sampling_weight=np.linspace(1.0, 3.0, N),
        )


# ---------------------------------------------------------------------------------------------
# the moment statistics
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "change, match",
    [
        ({"mom": object()}, r"`mom` must be the centred moments"),
        ({"j": 1}, r"`j` must be the index of a policy column of `mom`.*\[0, 1\); got 1 \(int\)"),
        ({"j": 0.0}, r"`j` must be the index"),
        ({"j": True}, r"`j` must be the index"),
        ({"origin": "\x00"}, r"`origin` must be a number"),
        ({"origin": math.inf}, r"`origin` must be a finite number"),
    ],
)
@pytest.mark.parametrize("est", [IPS(), ClippedIPS(max_weight=10.0), SNIPS()], ids=lambda e: e.name)
def test_moment_statistic_checks_its_arguments(est, change, match):
    stats = _quiet(MomentStats.from_arrays, R, P, T, max_weight=est.clip_level)
    kwargs = {"mom": stats.centered, "j": 0, "origin": 0.0, **change}
    with pytest.raises(ParameterError, match=match):
        est.moment_statistic(**kwargs)


def test_moment_statistic_of_good_arguments_is_unchanged():
    stats = _quiet(MomentStats.from_arrays, R, P, T)
    value, sd = IPS().moment_statistic(stats.centered, 0, 0.0)
    assert value == pytest.approx(float(np.mean(T / P * R)), rel=1e-14)
    assert sd == pytest.approx(float(np.std(T / P * R, ddof=1)), rel=1e-12)


@pytest.mark.parametrize("est", [IPS(), SNIPS(), ClippedIPS(max_weight=10.0)], ids=lambda e: e.name)
@pytest.mark.parametrize("bad", [(math.nan, 1.0), 5, ("a", "b"), []])
def test_reward_origin_checks_the_range(est, bad):
    with pytest.raises(ParameterError, match=r"`reward_range`"):
        est.reward_origin(bad)


def test_with_rows_checks_the_estimates_and_the_arrays():
    stats = _quiet(MomentStats.from_arrays, R, P, T)
    ests = _quiet(stats.estimates, "ips")
    good = dict(reward=R, logging_propensity=P, target_propensity=T[:, None])
    with pytest.raises(ParameterError, match=r"`estimates` must be the list of Estimates"):
        stats.with_rows(3.5, **good)
    with pytest.raises(ValidationError, match=r"`reward` must be numeric"):
        stats.with_rows(ests, **{**good, "reward": "0.5"})
    with pytest.raises(ValidationError, match=r"`reward` must have shape \(n,\)"):
        stats.with_rows(ests, **{**good, "reward": 3})
    with pytest.raises(
        ValidationError,
        match=r"`target_propensity` has 59 rows but these "
        r"statistics summarize 60",
    ):
        stats.with_rows(ests, **{**good, "target_propensity": T[:-1]})
    with pytest.raises(
        ValidationError,
        match=r"`target_propensity` has 2 policy columns but "
        r"`estimates` has 1",
    ):
        stats.with_rows(ests, **{**good, "target_propensity": np.column_stack([T, T])})
    one_column = _quiet(stats.with_rows, ests, **{**good, "target_propensity": T})
    (two_d,) = _quiet(stats.with_rows, ests, **good)  # 60 skewed rows: a short-interval note
    assert one_column[0].value == two_d.value
    assert one_column[0].ci(0.9, "bootstrap", rng=0, n_resamples=200) == two_d.ci(
        0.9, "bootstrap", rng=0, n_resamples=200
    )


def test_factor_weights_checks_its_mappings():
    logged = {"retrieval": np.full(4, 0.5), "ranking": np.full(4, 0.25)}
    with pytest.raises(ParameterError, match=r"`logging_factors` must be a mapping"):
        factor_weights(3.5, {"ranking": np.full(4, 0.5)})
    with pytest.raises(ParameterError, match=r"`target_factors` must be a mapping"):
        factor_weights(logged, "\x00")
    with pytest.raises(
        ValidationError,
        match=r"keys of `target_factors`, not of "
        r"`logging_factors`",
    ):
        factor_weights({}, {"ranking": np.full(4, 0.5)})


# ---------------------------------------------------------------------------------------------
# the slate estimators
# ---------------------------------------------------------------------------------------------
def _slates():
    from ope._valid_calls._base import slate_frame, slate_policies

    target, logging = slate_policies()
    return slate_frame(), target, logging


@pytest.mark.parametrize(
    "est",
    [SlateIPS(), IndependentIPS(), CascadeIPS(), PseudoInverse(product_logging=True)],
    ids=lambda e: e.name,
)
@pytest.mark.parametrize("argument", ["target", "logging"])
@pytest.mark.parametrize("bad", [object(), math.nan, "\x00"])
def test_slate_policies_that_are_not_policies_are_named(est, argument, bad):
    logs, target, _ = _slates()
    kwargs = {"target": target, "logging": None, argument: bad}
    with pytest.raises(
        PolicyError,
        match=rf"^`{argument}` \(the slate "
        rf"{'logger' if argument == 'logging' else 'candidate'}"
        r"\) must be SlateProbabilities",
    ):
        est.estimate(logs, **kwargs)


@pytest.mark.parametrize("cls", [SlateIPS, IndependentIPS, CascadeIPS, PseudoInverse])
@pytest.mark.parametrize("bad", ["no", 2, math.nan])
def test_slate_switches_are_booleans(cls, bad):
    # "no" is truthy: it would silently self-normalize
    with pytest.raises(ParameterError, match=r"`self_normalized` must be True or False"):
        cls(self_normalized=bad)
    if cls is PseudoInverse:
        with pytest.raises(ParameterError, match=r"`product_logging` must be True or False"):
            cls(product_logging=bad)


SLATE_ESTIMATORS = [
    SlateIPS(),
    SlateIPS(self_normalized=True),
    IndependentIPS(),
    IndependentIPS(self_normalized=True),
    CascadeIPS(),
    CascadeDR(model="zero"),
    PseudoInverse(product_logging=True),
]


@pytest.mark.parametrize("est", SLATE_ESTIMATORS, ids=lambda e: e.estimator_name)
def test_slate_estimates_scale_exactly_up_to_the_float64_limit(est):
    logs, target, _ = _slates()
    big = 2.0**1000
    small = _quiet(est.estimate, logs, target)
    large = _quiet(est.estimate, logs.assign(reward=logs["reward"] * big), target)
    assert (large.value, large.std_error) == (small.value * big, small.std_error * big)
    interval = [_quiet(e.ci, 0.9, "bootstrap", rng=0, n_resamples=200) for e in (small, large)]
    assert (interval[1].low, interval[1].high) == (interval[0].low * big, interval[0].high * big)


@pytest.mark.parametrize("est", SLATE_ESTIMATORS, ids=lambda e: e.estimator_name)
def test_a_slate_value_float64_cannot_hold_is_refused_naming_reward(est):
    logs, target, _ = _slates()  # 1e308 on both slots: the slate reward is 2e308
    with pytest.raises(
        ValidationError,
        match=rf"{est.estimator_name}'s value and standard error "
        r"overflow float64: `reward` reaches",
    ):
        _quiet(est.estimate, logs.assign(reward=1e308), target)


@pytest.mark.parametrize("cls", [SlateIPS, IndependentIPS, CascadeIPS])
def test_self_normalized_slate_estimates_of_zero_weights_are_refused(cls):
    from ope.slates import SlateProbabilities, slate_logs

    logs = slate_logs(_slates()[0])
    zero = np.zeros((logs.n, 2))
    target = SlateProbabilities(slate=zero[:, 0], marginal=zero, prefix=zero)
    with pytest.raises(
        EstimationError,
        match=r"the importance weights of a slot sum to zero "
        r"\(`target` gives",
    ):
        _quiet(cls(self_normalized=True).estimate, logs, target)
    assert _quiet(cls().estimate, logs, target).value == 0.0


def test_missing_slate_probabilities_name_where_to_give_them():
    from ope.slates import SlateProbabilities, slate_logs

    logs = slate_logs(_slates()[0].drop(columns=["slate_propensity", "prefix_propensity"]))
    marginal_only = SlateProbabilities(marginal=np.full((logs.n, 2), 0.5))
    with pytest.raises(
        PolicyError,
        match=r"slate IPS needs the candidate's slate probabilities"
        r".*`target`",
    ):
        SlateIPS().estimate(logs, marginal_only)
    _, target, _ = _slates()
    with pytest.raises(
        PolicyError,
        match=r"slate IPS needs the logger's slate probabilities.*"
        r"`slate_propensity` column, or `logging`",
    ):
        SlateIPS().estimate(logs, target)


# ---------------------------------------------------------------------------------------------
# the intervals
# ---------------------------------------------------------------------------------------------
COMPONENTS = np.column_stack([T / P * R, T / P])


def _ratio(m):
    return m[..., 0] / m[..., 1]


@pytest.mark.parametrize("fn", [bootstrap_interval, bootstrap_replicates])
def test_bootstrap_statistic_must_be_a_vectorized_function_of_the_columns(fn):
    with pytest.raises(
        ParameterError,
        match=r"`statistic` must be a function of the column "
        r"means.*got 3 \(int\)",
    ):
        fn(COMPONENTS, 3, n_resamples=100, rng=0)
    with pytest.raises(
        ParameterError,
        match=r"`statistic` failed on the column means of "
        r"`components` \(shape \(2, 1\) .*IndexError",
    ):
        fn(COMPONENTS[:, 0], _ratio, n_resamples=100, rng=0)
    with pytest.raises(ParameterError, match=r"`statistic` must return one value per row"):
        fn(COMPONENTS, lambda m: float(m.sum()), n_resamples=100, rng=0)


@pytest.mark.parametrize(
    "call",
    [
        lambda n: bootstrap_interval(COMPONENTS, _ratio, n_resamples=n, rng=0),
        lambda n: bootstrap_replicates(COMPONENTS, _ratio, n_resamples=n, rng=0),
        lambda n: shared_bootstrap(R, P, T, n_resamples=n, rng=0),
        lambda n: resample_counts(2, n, rng=0),
    ],
    ids=["interval", "replicates", "shared", "counts"],
)
def test_resamples_are_bounded(call):
    for n in (10**30, 2**70, 1_000_001):
        with pytest.raises(
            ParameterError,
            match=r"`n_resamples` must be at most "
            r"MAX_N_RESAMPLES=1,000,000",
        ):
            call(n)


def test_a_level_needing_more_resamples_than_the_bound_names_the_level():
    with pytest.raises(
        ParameterError,
        match=r"`confidence_level`=0.9999999 is too close to 1 "
        r"for a bootstrap",
    ):
        bootstrap_interval(COMPONENTS, _ratio, confidence_level=0.9999999, rng=0)


def test_resample_counts_bounds_the_dense_array_naming_both_counts():
    for n, b in ((10**30, 5), (10**6, 100)):
        with pytest.raises(ParameterError, match=r"`n`=\d+ rows times `n_resamples`=\d+ make"):
            resample_counts(n, b, rng=0)
    assert resample_counts(20, 5, rng=0).shape == (5, 20)


def test_shared_bootstrap_checks_names_estimators_and_sources():
    with pytest.raises(ParameterError, match=r"`names` must be a list of names"):
        shared_bootstrap(R, P, T, names=3.5, n_resamples=100, rng=0)
    with pytest.raises(ParameterError, match=r"`estimators` must be a sequence of estimators"):
        shared_bootstrap(R, P, T, estimators=3.5, n_resamples=100, rng=0)
    with pytest.raises(ParameterError, match=r"`sources` must be a mapping"):
        shared_bootstrap(R, P, T, sources=3.5, n_resamples=100, rng=0)
    with pytest.raises(ParameterError, match=r"`sources`\['x'\] must be a row-backed"):
        shared_bootstrap(R, P, T, sources={"x": 3.5}, n_resamples=100, rng=0)
    with pytest.raises(
        ParameterError,
        match=r"2 candidates \(the columns of "
        r"`target_propensity`\)",
    ):
        shared_bootstrap(R, P, np.column_stack([T, T]), names=["a"], n_resamples=100, rng=0)


def test_undefined_snips_resamples_name_target_propensity():
    with pytest.raises(
        EstimationError,
        match=r"policy '0', snips: 100 of 100 bootstrap "
        r"resamples .*column 0 of `target_propensity` "
        r"is 0 on nearly every row",
    ):
        shared_bootstrap(R, P, np.zeros(N), estimators=(IPS(), SNIPS()), n_resamples=100, rng=0)


@pytest.mark.parametrize("n", [10**30, 10**400])
def test_t_interval_of_more_rows_than_int64_is_the_normal_interval(n):
    assert t_interval(0.5, 0.1, n) == normal_interval(0.5, 0.1)
    assert t_interval(0.5, 0.1, 30).high > normal_interval(0.5, 0.1).high


def test_bounds_that_exclude_the_mean_are_named():
    with pytest.raises(
        ValidationError,
        match=r"`mean`=0.5 lies outside its a priori range "
        r"\[`low`, `high`\] = \[0.0, 5e-324\].*Check "
        r"`low`, `high`",
    ):
        hoeffding_interval(0.5, 30, low=0.0, high=5e-324)
    with pytest.raises(ValidationError, match=r"range \[`low`, `high`\]"):
        bernstein_interval(0.5, 0.1, 30, low=0.0, high=5e-324)
    with pytest.raises(
        ValidationError,
        match=r"`weight_mean`=1.0 lies outside its a priori "
        r"range \[0, `max_weight`\]",
    ):
        bottou_interval(1.0, 0.5, 0.4, 0.3, 60, max_weight=5e-324, reward_range=(0.0, 1.0))
