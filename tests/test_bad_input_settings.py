"""A catalogue of wrong-typed settings: each is refused when the object is
built or the call is made, by the shared checkers of ``ope._validation``, with a ParameterError
that names the parameter, shows what was received (value and type) and gives a right value.

Two parts: explicit cases, each pinned to its error type and message, and a sweep over the
estimator registry (``ope.estimators.ESTIMATORS`` with ``estimator_settings``), so that every
setting of every registered estimator, present or future, is refused the same way when it is
a string, a bool, a list, None, NaN, inf, zero or negative, and accepted as a numpy scalar.
"""

from __future__ import annotations

import decimal
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from ope.estimators import ESTIMATORS, IPS, ClippedIPS, estimator_settings, get_estimator
from ope.exceptions import ParameterError
from ope.intervals import bottou_interval, normal_interval, t_interval

REWARD = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0])
PROPENSITY = np.array([0.5, 0.25, 0.5, 0.25, 0.5, 0.25, 0.5, 0.25])
TARGET = np.array([1.0, 0.5, 0.0, 1.0, 0.5, 0.5, 1.0, 0.0])


def _ips(**kwargs: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # small-sample warnings are not the point here
        return IPS().estimate(
            reward=REWARD, logging_propensity=PROPENSITY, target_propensity=TARGET, **kwargs
        )


def _ci(**kwargs: Any) -> Any:
    est = _ips(reward_range=(0.0, 1.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.ci(**kwargs)


@dataclass(frozen=True)
class Case:
    id: str
    call: Callable[[], Any]
    match: str
    error: type[Exception] = ParameterError


CASES: list[Case] = [
    # the clip level: refused when ClippedIPS is built, not later inside numpy
    Case(
        "max_weight-numeric-string",
        lambda: ClippedIPS(max_weight="10"),
        r"ClippedIPS: `max_weight` must be a number; got '10' \(str\)\. Pass e\.g\. "
        r"max_weight=10\.0 \(a number, not the string '10'\)\.",
    ),
    Case(
        "max_weight-bool",
        lambda: ClippedIPS(max_weight=True),
        r"`max_weight` must be a number; got True \(bool\)\. Pass e\.g\. max_weight=10\.0 "
        r"\(True and False are not numbers here\)",
    ),
    Case(
        "max_weight-numpy-bool",
        lambda: ClippedIPS(max_weight=np.True_),
        r"`max_weight` must be a number; got np\.True_ \(bool\)",
    ),
    Case(
        "max_weight-nan",
        lambda: ClippedIPS(max_weight=float("nan")),
        r"`max_weight` must be a positive finite number \(the clip level\); got nan \(float\)\. "
        r"Pass e\.g\. max_weight=10\.0\.",
    ),
    Case(
        "max_weight-negative",
        lambda: ClippedIPS(max_weight=-3),
        r"positive finite number \(the clip level\); got -3 \(int\)",
    ),
    Case(
        "max_weight-huge-int",
        lambda: ClippedIPS(max_weight=10**400),
        r"positive finite number \(the clip level\); got 1000.*\.\.\. \(int\)",
    ),
    Case(
        "max_weight-list",
        lambda: ClippedIPS(max_weight=[10.0]),
        r"`max_weight` must be a number; got \[10\.0\] \(list\)",
    ),
    Case(
        "max_weight-Decimal",
        lambda: ClippedIPS(max_weight=decimal.Decimal("10")),
        r"got Decimal\('10'\) \(Decimal\)\. Pass e\.g\. max_weight=10\.0 \(convert it: "
        r"float\(Decimal\('10'\)\)\)",
    ),
    Case(
        "max_weight-0d-array",
        lambda: ClippedIPS(max_weight=np.array(10.0)),
        r"got array\(10\.\) \(ndarray\)\. .*\(a scalar, not an array: pass x\.item\(\)\)",
    ),
    Case(
        "max_weight-missing-via-registry",
        lambda: get_estimator("clipped_ips"),
        r"estimator 'clipped_ips' needs max_weight=\.\.\., e\.g\. "
        r"get_estimator\('clipped_ips', max_weight=10\.0\)",
    ),
    Case(
        "max_weight-string-via-registry",
        lambda: get_estimator("clipped_ips", max_weight="7"),
        r"`max_weight` must be a number; got '7' \(str\)",
    ),
    # the reward range: a pair, in order, of finite numbers
    Case(
        "reward_range-string",
        lambda: _ips(reward_range="01"),
        r"`reward_range` must be a pair \(low, high\) of numbers; got '01' \(str\)\. Pass e\.g\. "
        r"reward_range=\(0\.0, 1\.0\) \(a tuple of two numbers, not the string '01'\)\.",
    ),
    Case(
        "reward_range-one-value",
        lambda: _ips(reward_range=(1.0,)),
        r"`reward_range` must be a pair \(low, high\) of numbers; got 1 values: \(1\.0,\) "
        r"\(tuple\)\. Pass e\.g\. reward_range=\(0\.0, 1\.0\)\.",
    ),
    Case(
        "reward_range-three-values",
        lambda: _ips(reward_range=[0, 1, 2]),
        r"got 3 values: \[0, 1, 2\] \(list\)",
    ),
    Case(
        "reward_range-dict",
        lambda: _ips(reward_range={0: 1, 1: 2}),
        r"got \{0: 1, 1: 2\} \(dict\)\. Pass e\.g\. reward_range=\(0\.0, 1\.0\) \(a tuple or a "
        r"list: a dict has no order\)",
    ),
    Case(
        "reward_range-set", lambda: _ips(reward_range={0.0, 1.0}), r"\(set\)\. .*a set has no order"
    ),
    Case(
        "reward_range-bools",
        lambda: _ips(reward_range=(False, True)),
        r"its low end, False \(bool\), is not a number",
    ),
    Case(
        "reward_range-string-end",
        lambda: _ips(reward_range=(0, "1")),
        r"its high end, '1' \(str\), is not a number",
    ),
    Case(
        "reward_range-reversed",
        lambda: _ips(reward_range=(1, 0)),
        r"`reward_range` must be finite with low < high; got \(1\.0, 0\.0\)\. Pass e\.g\. "
        r"reward_range=\(0\.0, 1\.0\)\.",
    ),
    Case(
        "reward_range-nan",
        lambda: _ips(reward_range=(0.0, float("nan"))),
        r"must be finite with low < high; got \(0\.0, nan\)",
    ),
    Case(
        "reward_range-too-wide",
        lambda: _ips(reward_range=(-1e308, 1e308)),
        r"`reward_range`=\(-1e\+308, 1e\+308\) is wider than float64 can represent \(high - low "
        r"exceeds 1\.798e\+308\)\. Rescale",
    ),
    # the interval settings of Estimate.ci
    Case(
        "confidence_level-string",
        lambda: _ci(confidence_level="0.9"),
        r"`confidence_level` must be a number in \(0, 1\); got '0\.9' \(str\)\. Pass e\.g\. "
        r"confidence_level=0\.95 \(a number, not the string '0\.9'\)",
    ),
    Case(
        "confidence_level-percent",
        lambda: _ci(confidence_level=95),
        r"`confidence_level` must be in \(0, 1\); got 95 \(int\)\. Pass e\.g\. "
        r"confidence_level=0\.95 for a 95% interval \(not 95, and not alpha=0\.05\)",
    ),
    Case(
        "confidence_level-bool",
        lambda: _ci(confidence_level=True),
        r"`confidence_level` must be a number in \(0, 1\); got True \(bool\)",
    ),
    Case(
        "weight_bound-string",
        lambda: _ci(method="hoeffding", weight_bound="100"),
        r"`weight_bound` must be a number; got '100' \(str\)\. Pass e\.g\. weight_bound=100\.0 "
        r"\(a number, not the string '100'\)",
    ),
    Case(
        "weight_bound-zero",
        lambda: _ci(method="hoeffding", weight_bound=0),
        r"`weight_bound` must be a positive finite number \(an a priori bound on the importance "
        r"weights\); got 0 \(int\)\. Pass e\.g\. weight_bound=100\.0\.",
    ),
    # the interval functions' own settings
    Case(
        "t-n-float",
        lambda: t_interval(0.5, 0.1, 10.0),
        r"`n` must be a whole number >= 2; got 10\.0 \(float\)\. Pass e\.g\. n=10 \(an int, not "
        r"the float 10\.0\)",
    ),
    Case(
        "normal-value-string",
        lambda: normal_interval("0.5", 0.1),
        r"`value` must be a number; got '0\.5' \(str\)\. Pass e\.g\. value=0\.5",
    ),
    Case(
        "bottou-outer-typo",
        lambda: bottou_interval(
            0.9, 0.1, 0.4, 0.1, 100, max_weight=5.0, reward_range=(0, 1), outer="Normal"
        ),
        r"`outer` must be one of 'bernstein', 'normal'; got 'Normal' \(str\)\. Pass e\.g\. "
        r"outer='normal' \(did you mean 'normal'\?\)",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_catalogue(case: Case) -> None:
    with pytest.raises(case.error, match=case.match):
        case.call()


def test_catalogue_is_large_enough() -> None:
    assert len(CASES) >= 15
    assert len({c.id for c in CASES}) == len(CASES)


def test_numpy_scalars_and_arrays_are_accepted_where_a_number_or_pair_is() -> None:
    ref = _ips(reward_range=(0.0, 1.0))
    for rr in ([0, 1], np.array([0.0, 1.0]), (np.float32(0), np.int64(1))):
        got = _ips(reward_range=rr)
        assert got.value == pytest.approx(ref.value, rel=1e-12)
    ci = _ci(confidence_level=np.float32(0.9))
    want = _ci(confidence_level=float(np.float32(0.9)))
    assert (ci.low, ci.high) == pytest.approx((want.low, want.high), rel=1e-12)
    assert _ci(method="hoeffding", weight_bound=np.int64(4)) == pytest.approx(
        _ci(method="hoeffding", weight_bound=4.0), rel=1e-12
    )


# ---------------------------------------------------------------------------------------------
# every setting of every registered estimator
# ---------------------------------------------------------------------------------------------
SETTINGS = [(name, s) for name in ESTIMATORS for s in estimator_settings(name)]

#: a value of each wrong kind, and what the message must say besides the setting's name
WRONG_TYPE = [
    (
        "numeric-string",
        "10",
        r"must be a number; got '10' \(str\)\. Pass e\.g\. \w+=[\d.]+ "
        r"\(a number, not the string '10'\)",
    ),
    ("word", "auto", r"must be a number; got 'auto' \(str\)\. Pass e\.g\. \w+=[\d.]+"),
    ("bool", True, r"must be a number; got True \(bool\)\. Pass e\.g\."),
    ("numpy-bool", np.False_, r"must be a number; got np\.False_ \(bool\)"),
    ("list", [3.0], r"must be a number; got \[3\.0\] \(list\)\. Pass e\.g\."),
    ("complex", 3 + 0j, r"must be a number; got \(3\+0j\) \(complex\)\. Pass e\.g\."),
]
OUT_OF_RANGE = [("nan", math.nan), ("inf", math.inf), ("zero", 0.0), ("negative", -2.0)]


def test_the_registry_has_settings_to_check() -> None:
    # clipped IPS, Switch-DR and DRos take one setting each; the sweep below covers them all
    assert {name for name, _ in SETTINGS} >= {"clipped_ips", "switch_dr", "dros"}


@pytest.mark.parametrize("kind, value, pattern", WRONG_TYPE, ids=[k for k, _, _ in WRONG_TYPE])
@pytest.mark.parametrize("name, setting", SETTINGS, ids=[f"{n}.{s}" for n, s in SETTINGS])
def test_every_setting_refuses_wrong_types_at_construction(
    name: str, setting: str, kind: str, value: Any, pattern: str
) -> None:
    for build in (
        lambda: ESTIMATORS[name](**{setting: value}),
        lambda: get_estimator(name, **{setting: value}),
    ):
        with pytest.raises(ParameterError, match=rf"`{setting}` {pattern}"):
            build()


@pytest.mark.parametrize("kind, value", OUT_OF_RANGE, ids=[k for k, _ in OUT_OF_RANGE])
@pytest.mark.parametrize("name, setting", SETTINGS, ids=[f"{n}.{s}" for n, s in SETTINGS])
def test_every_setting_refuses_nan_inf_and_non_positive_values(
    name: str, setting: str, kind: str, value: float
) -> None:
    with pytest.raises(
        ParameterError,
        match=rf"`{setting}` must be a positive finite number.*; "
        rf"got {value!r}",
    ):
        ESTIMATORS[name](**{setting: value})


@pytest.mark.parametrize("name, setting", SETTINGS, ids=[f"{n}.{s}" for n, s in SETTINGS])
def test_every_setting_names_itself_when_missing(name: str, setting: str) -> None:
    with pytest.raises(ParameterError, match=rf"needs `?{setting}`?"):
        ESTIMATORS[name](**{setting: None})
    with pytest.raises(ParameterError, match=rf"needs {setting}="):
        get_estimator(name)


@pytest.mark.parametrize(
    "scalar",
    [np.float32(2.5), np.float64(2.5), np.int64(3), 3],
    ids=["float32", "float64", "int64", "int"],
)
@pytest.mark.parametrize("name, setting", SETTINGS, ids=[f"{n}.{s}" for n, s in SETTINGS])
def test_every_setting_accepts_numpy_scalars(name: str, setting: str, scalar: Any) -> None:
    q = np.full(REWARD.size, 0.5)
    arrays = dict(reward=REWARD, logging_propensity=PROPENSITY, target_propensity=TARGET)
    if "q_logged" in ESTIMATORS[name].estimate.__code__.co_varnames:
        arrays.update(q_logged=q, q_target=q)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = ESTIMATORS[name](**{setting: scalar}).estimate(**arrays)
        want = ESTIMATORS[name](**{setting: float(scalar)}).estimate(**arrays)
    assert math.isfinite(got.value)
    assert got.value == pytest.approx(want.value, rel=1e-12)
    assert got.std_error == pytest.approx(want.std_error, rel=1e-12)
