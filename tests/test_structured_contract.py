"""The slate and sequential estimator contracts (ope.testing) over their registries, and proof
that each check can fail."""

from __future__ import annotations

import dataclasses

import pytest

import ope.sequential
from ope.exceptions import ParameterError
from ope.sequential import SEQUENTIAL_ESTIMATORS
from ope.slates import SLATE_ESTIMATORS, IndependentIPS, SlateIPS
from ope.continuous import CONTINUOUS_ESTIMATORS
from ope.testing import (
    check_sequential_estimator,
    continuous_estimator_checks,
    check_slate_estimator,
    sequential_estimator_checks,
    slate_estimator_checks,
)

SLATE_CHECKS = [name for name, _ in slate_estimator_checks(SlateIPS())]
SEQUENTIAL_CHECKS = [name for name, _ in sequential_estimator_checks("is")]
CONTINUOUS_CHECKS = [name for name, _ in continuous_estimator_checks("ips")]


# ------------------------------------------------------------------------------------------
# every registered estimator honours its contract
# ------------------------------------------------------------------------------------------
def _slate_params() -> list:
    """Every class of SLATE_ESTIMATORS in each of its contract variants (plain and
    self-normalized; Cascade-DR's table and zero models), times every check: an estimator added
    to the registry is checked without editing this list."""
    return [
        pytest.param(
            cls(**variant),
            name,
            id=f"{key}{''.join(f'[{k}={v}]' for k, v in variant.items())}-{name}",
        )
        for key, cls in SLATE_ESTIMATORS.items()
        for variant in cls.contract_variants
        for name in SLATE_CHECKS
    ]


@pytest.mark.parametrize(("estimator", "check_name"), _slate_params())
def test_slate_estimators_honour_the_contract(estimator, check_name) -> None:
    dict(slate_estimator_checks(estimator))[check_name]()


@pytest.mark.parametrize("estimator", SEQUENTIAL_ESTIMATORS)
@pytest.mark.parametrize("check_name", SEQUENTIAL_CHECKS)
def test_sequential_estimators_honour_the_contract(estimator, check_name) -> None:
    dict(sequential_estimator_checks(estimator))[check_name]()


@pytest.mark.parametrize("estimator", CONTINUOUS_ESTIMATORS)
@pytest.mark.parametrize("check_name", CONTINUOUS_CHECKS)
def test_continuous_estimators_honour_the_contract(estimator, check_name) -> None:
    dict(continuous_estimator_checks(estimator))[check_name]()


def test_the_continuous_contract_can_fail(monkeypatch) -> None:
    """A kernel estimate that drops a row breaks the permutation and on-policy checks."""
    import ope.continuous as cont

    real = cont._kernel_weight

    def broken(logs, name, kernel_name, bandwidth):
        w = real(logs, name, kernel_name, bandwidth).copy()
        w[0] = 0.0  # the first row of whatever order the rows come in
        return w

    monkeypatch.setattr(cont, "_kernel_weight", broken)
    checks = dict(continuous_estimator_checks("ips"))
    for name in ("row_permutation", "on_policy_value"):
        with pytest.raises(AssertionError, match=name):
            checks[name]()


def test_the_registries_are_covered_without_a_hand_kept_list() -> None:
    ids = [p.id for p in _slate_params()]
    variants = sum(len(cls.contract_variants) for cls in SLATE_ESTIMATORS.values())
    assert len(ids) == len(set(ids)) == variants * len(SLATE_CHECKS)
    assert all(len(cls.contract_variants) >= 2 for cls in SLATE_ESTIMATORS.values())
    assert {cls.name for cls in SLATE_ESTIMATORS.values()} == set(SLATE_ESTIMATORS)
    assert set(SEQUENTIAL_ESTIMATORS) == {
        "is",
        "pdis",
        "wis",
        "wpdis",
        "dr",
        "wdr",
        "mis",
        "mis_dr",
        "magic",
    }
    assert SLATE_CHECKS == [
        "finite_value",
        "interval_contains_estimate",
        "on_policy_value",
        "slate_permutation",
        "reward_scaling",
        "reward_shift",
        "refuses_bad_input",
    ]
    assert SEQUENTIAL_CHECKS == [
        "finite_value",
        "interval_contains_estimate",
        "on_policy_value",
        "episode_permutation",
        "reward_scaling",
        "refuses_bad_input",
    ]


def test_an_estimator_reading_some_positions_is_checked_on_those() -> None:
    check_slate_estimator(IndependentIPS(positions=[1]), rng=4)
    check_slate_estimator(IndependentIPS(positions=[0], self_normalized=True), rng=4)


def test_names_and_classes_are_accepted_and_anything_else_is_a_parameter_error() -> None:
    check_slate_estimator("rips", rng=2)
    check_slate_estimator(SLATE_ESTIMATORS["pi"], rng=2)
    with pytest.raises(ParameterError, match=r"`estimator` must be one of 'sips', 'iips'"):
        check_slate_estimator("cascade")
    with pytest.raises(ParameterError, match=r"a slate estimator object .* has no estimate"):
        check_slate_estimator(3.0)
    with pytest.raises(ParameterError, match=r"`estimator` must be one of 'is', 'pdis'"):
        check_sequential_estimator("q_learning")


# ------------------------------------------------------------------------------------------
# the checks can fail
# ------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class _LastSlotDropped(SlateIPS):
    def _weights(self, logs, target, logging):  # type: ignore[no-untyped-def]
        w = super()._weights(logs, target, logging)
        w[:, -1] = 0.0
        return w


@dataclasses.dataclass(frozen=True)
class _Offset(SlateIPS):
    """Adds 0.1 to every value: not equivariant to scaling the rewards."""

    def estimate(self, logs, target, *, logging=None, policy=None):  # type: ignore[no-untyped-def]
        res = super().estimate(logs, target, logging=logging, policy=policy)
        return dataclasses.replace(
            res, value=res.value + 0.1, ci_low=res.ci_low + 0.1, ci_high=res.ci_high + 0.1
        )


@dataclasses.dataclass(frozen=True)
class _IntervalBelow(SlateIPS):
    """Stores an interval that ends below its own estimate."""

    def estimate(self, logs, target, *, logging=None, policy=None):  # type: ignore[no-untyped-def]
        res = super().estimate(logs, target, logging=logging, policy=policy)
        return dataclasses.replace(res, ci_high=res.value - 1.0, ci_low=res.value - 2.0)


@dataclasses.dataclass(frozen=True)
class _NaNAsZero(SlateIPS):
    """Reads NaN rewards as 0 instead of refusing them."""

    def estimate(self, logs, target, *, logging=None, policy=None):  # type: ignore[no-untyped-def]
        if hasattr(logs, "assign") and "reward" in logs:
            logs = logs.assign(reward=logs["reward"].fillna(0.0))
        return super().estimate(logs, target, logging=logging, policy=policy)


@dataclasses.dataclass(frozen=True)
class _ForeignError(SlateIPS):
    """Lets a foreign exception out on a non-policy candidate."""

    def estimate(self, logs, target, *, logging=None, policy=None):  # type: ignore[no-untyped-def]
        if isinstance(target, str):
            raise KeyError(target)
        return super().estimate(logs, target, logging=logging, policy=policy)


@dataclasses.dataclass(frozen=True)
class _OrderDependent(SlateIPS):
    """Weights the first logged slate twice: the value depends on the slates' order."""

    def _weights(self, logs, target, logging):  # type: ignore[no-untyped-def]
        w = super()._weights(logs, target, logging)
        w[0] *= 2.0
        return w


@pytest.mark.parametrize(
    ("estimator", "failed", "match"),
    [
        (_LastSlotDropped(), "on_policy_value", "on-policy value is"),
        (_Offset(), "reward_scaling", r"value for rewards x 2\.5 is"),
        (_IntervalBelow(), "interval_contains_estimate", "the stored interval"),
        (_NaNAsZero(), "refuses_bad_input", "a NaN reward was accepted"),
        (_ForeignError(), "refuses_bad_input", r"raised KeyError: 'greedy' \(not an error"),
        (_OrderDependent(), "slate_permutation", "value after relabelling the slates is"),
    ],
)
def test_a_broken_slate_estimator_fails_the_check_it_breaks(estimator, failed, match) -> None:
    with pytest.raises(AssertionError, match=rf"^{failed} failed for .*{match}"):
        dict(slate_estimator_checks(estimator))[failed]()
    with pytest.raises(AssertionError):
        check_slate_estimator(estimator)


def test_a_broken_sequential_estimator_fails(monkeypatch) -> None:
    real = ope.sequential.sequential_estimate

    def inflated(*args, **kwargs):  # type: ignore[no-untyped-def]
        res = real(*args, **kwargs)
        return dataclasses.replace(res, value=res.value * 1.01)

    monkeypatch.setattr(ope.sequential, "sequential_estimate", inflated)
    with pytest.raises(
        AssertionError,
        match=r"^on_policy_value failed for 'pdis': on-policy "
        r"value is",
    ):
        dict(sequential_estimator_checks("pdis"))["on_policy_value"]()

    def gamma_clamped(*args, **kwargs):  # type: ignore[no-untyped-def]
        kwargs["gamma"] = min(kwargs.get("gamma", 1.0), 1.0)
        return real(*args, **kwargs)

    monkeypatch.setattr(ope.sequential, "sequential_estimate", gamma_clamped)
    with pytest.raises(
        AssertionError,
        match=r"^refuses_bad_input failed for 'wis': gamma=1\.5 "
        r"was accepted",
    ):
        dict(sequential_estimator_checks("wis"))["refuses_bad_input"]()
