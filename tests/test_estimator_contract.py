"""The executable estimator contract (ope.testing) over the registry, and proof it can fail."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys
from types import SimpleNamespace
from typing import ClassVar

import numpy as np
import pytest

from ope.estimators import ESTIMATORS, IPS, ClippedIPS, SwitchDR
from ope.exceptions import ParameterError
from ope.testing import check_estimator, estimator_checks, parametrize_with_checks


# ------------------------------------------------------------------------------------------
# every registered estimator honours the contract
# ------------------------------------------------------------------------------------------
@parametrize_with_checks()
def test_registered_estimators_honour_the_contract(estimator, check) -> None:
    check()


def test_the_registry_is_covered_without_a_hand_kept_list() -> None:
    (mark,) = parametrize_with_checks().mark.args[1:]  # the list of pytest.param
    names = [name for name, _ in estimator_checks(IPS())]
    ids = [p.id for p in mark]
    assert len(ids) == len(ESTIMATORS) * len(names) == len(set(ids))
    for cls in ESTIMATORS.values():
        assert sum(i.startswith((cls.name + "-", cls.__name__ + "(")) for i in ids) == len(names)


def test_estimator_checks_names_and_binds_each_check() -> None:
    checks = list(estimator_checks(ClippedIPS(max_weight=5.0)))
    assert [name for name, _ in checks] == [
        "on_policy_value",
        "row_permutation",
        "reward_scaling",
        "reward_shift",
        "evaluate_equals_eager",
        "streamed_equals_eager",
        "scan_equals_eager",
        "distributed_equals_eager",
        "low_ess_notes",
        "mean_weight_notes",
        "sampling_weights",
    ]
    assert all(callable(check) for _, check in checks)


def test_names_and_classes_are_built_with_the_default_settings() -> None:
    by_name = [repr(c.args[0]) for _, c in estimator_checks("clipped_ips")]
    by_class = [repr(c.args[0]) for _, c in estimator_checks(ClippedIPS)]
    assert set(by_name) == set(by_class) == {"ClippedIPS(max_weight=10.0)"}


@pytest.mark.parametrize(
    ("estimator", "match"),
    [("ipss", r"`estimator` must be one of 'dm', 'ips'"), (42, r"has no estimate method")],
)
def test_what_is_not_an_estimator_is_a_parameter_error(estimator, match) -> None:
    with pytest.raises(ParameterError, match=match):
        estimator_checks(estimator)
    with pytest.raises(ParameterError, match=match):
        check_estimator(estimator)


@pytest.mark.parametrize("estimator", [ClippedIPS(max_weight=0.5), SwitchDR(tau=0.5)])
def test_settings_that_shrink_unit_weights_are_accepted(estimator) -> None:
    # clipping below 1 or switching off every weight is biased on-policy, by the measured factor
    checks = dict(estimator_checks(estimator))
    for name in (
        "on_policy_value",
        "row_permutation",
        "reward_scaling",
        "reward_shift",
        "streamed_equals_eager",
    ):
        checks[name](rng=2)


# ------------------------------------------------------------------------------------------
# the contract can fail: deliberately broken estimators
# ------------------------------------------------------------------------------------------
def _result(contrib: np.ndarray, se: float, *, ess: float | None = None):
    n = contrib.shape[0]
    return SimpleNamespace(
        value=float(contrib.mean()),
        std_error=se,
        n=n,
        ess=float(n if ess is None else ess),
        notes=(),
    )


class _FakeIPS:
    """IPS written by hand (no notes, ess = n); subclasses break one promise each."""

    name = "fake_ips"

    def contributions(self, reward, logging_propensity, target_propensity):
        return np.asarray(target_propensity) / np.asarray(logging_propensity) * np.asarray(reward)

    def standard_error(self, contrib: np.ndarray) -> float:
        return float(contrib.std(ddof=1) / math.sqrt(contrib.shape[0]))

    def estimate(self, reward, logging_propensity, target_propensity, *, reward_range=None):
        contrib = self.contributions(reward, logging_propensity, target_propensity)
        return _result(contrib, self.standard_error(contrib))


class _BiasedIPS(_FakeIPS):
    def contributions(self, reward, logging_propensity, target_propensity):
        return 1.01 * super().contributions(reward, logging_propensity, target_propensity)


class _OrderDependentIPS(_FakeIPS):
    def standard_error(self, contrib: np.ndarray) -> float:  # from the first half only
        half = contrib[: contrib.shape[0] // 2]
        return float(half.std(ddof=1) / math.sqrt(contrib.shape[0]))


class _WrongShiftIPS(_FakeIPS):
    """On-policy right, but a reward shift c moves it by c / mean(w), not c * mean(w)."""

    def contributions(self, reward, logging_propensity, target_propensity):
        w = np.asarray(target_propensity) / np.asarray(logging_propensity)
        return w * np.asarray(reward) / w.mean() ** 2


class _SkewedScaleIPS(_FakeIPS):
    def contributions(self, reward, logging_propensity, target_propensity):
        r = np.asarray(reward)
        return super().contributions(
            np.where(r < 0, 0.5 * r, r), logging_propensity, target_propensity
        )


@dataclasses.dataclass(frozen=True)
class _DropsARowIPS(IPS):
    """A registered-looking IPS (name 'ips', streams) whose eager path loses the first row."""

    def estimate(self, reward, logging_propensity, target_propensity, *, reward_range=None):
        return super().estimate(
            np.asarray(reward)[1:],
            np.asarray(logging_propensity)[1:],
            np.asarray(target_propensity)[1:],
            reward_range=reward_range,
        )


@pytest.mark.parametrize(
    ("estimator", "failed"),
    [
        (_BiasedIPS(), "on_policy_value"),
        (_OrderDependentIPS(), "row_permutation"),
        (_SkewedScaleIPS(), "reward_scaling"),
        (_WrongShiftIPS(), "reward_shift"),
        (_FakeIPS(), "low_ess_notes"),  # its ess is n, not the Kish ESS of the weights
    ],
)
def test_a_broken_estimator_fails_the_check_that_it_breaks(estimator, failed) -> None:
    with pytest.raises(AssertionError, match=rf"^{failed} failed for .*expected"):
        dict(estimator_checks(estimator))[failed]()


def test_check_estimator_names_the_first_failed_check_and_the_numbers() -> None:
    with pytest.raises(
        AssertionError,
        match=r"on_policy_value failed .* is [-0-9.e]+, "
        r"expected [-0-9.e]+ \(relative difference",
    ):
        check_estimator(_BiasedIPS())


def test_the_eager_path_must_match_the_streamed_one() -> None:
    with pytest.raises(
        AssertionError, match=r"^streamed_equals_eager failed .*streamed n is 3000, expected 2999"
    ):
        dict(estimator_checks(_DropsARowIPS()))["streamed_equals_eager"]()


def test_a_streaming_name_must_be_computable_by_the_streamed_path() -> None:
    fake = _FakeIPS()
    fake.name = "ips"  # claims a name of STREAMING_ESTIMATORS, but MomentStats cannot run it
    with pytest.raises(AssertionError, match="streamed_equals_eager failed .*refused it"):
        dict(estimator_checks(fake))["streamed_equals_eager"]()


@dataclasses.dataclass(frozen=True)
class _RenamedIPS(IPS):
    name: ClassVar[str] = "renamed_ips"


def test_a_name_outside_streaming_estimators_must_be_refused_by_the_streamed_path() -> None:
    with pytest.raises(AssertionError, match="not in STREAMING_ESTIMATORS, yet MomentStats"):
        dict(estimator_checks(_RenamedIPS()))["streamed_equals_eager"]()


def test_a_missing_mean_weight_note_fails() -> None:
    # _FakeIPS writes no notes: the planted mean weight 1.011 (z ~ 7) goes unflagged
    with pytest.raises(AssertionError, match=r"^mean_weight_notes failed .*1\.0110.*miss"):
        dict(estimator_checks(_FakeIPS()))["mean_weight_notes"]()


@dataclasses.dataclass(frozen=True)
class _QuietIPS(IPS):
    """IPS whose eager estimate drops its notes: the streamed and evaluate paths keep theirs."""

    def estimate(self, reward, logging_propensity, target_propensity, *, reward_range=None):
        res = super().estimate(
            reward, logging_propensity, target_propensity, reward_range=reward_range
        )
        return dataclasses.replace(res, notes=())


@pytest.mark.parametrize(
    ("failed", "match"),
    [
        ("low_ess_notes", r"ess=13\.\d of n=3000 but its notes do not mention"),
        ("mean_weight_notes", r"mean weight 1\.0110 .*: its notes miss it"),
    ],
)
def test_notes_that_disagree_with_the_rule_fail(failed, match) -> None:
    with pytest.raises(AssertionError, match=rf"^{failed} failed for _QuietIPS\(\): {match}"):
        dict(estimator_checks(_QuietIPS()))[failed]()


@dataclasses.dataclass(frozen=True)
class _ChattyIPS(IPS):
    """IPS whose eager estimate adds a note that no other path gives."""

    def estimate(self, reward, logging_propensity, target_propensity, *, reward_range=None):
        res = super().estimate(
            reward, logging_propensity, target_propensity, reward_range=reward_range
        )
        return dataclasses.replace(res, notes=(*res.notes, "only eager says this"))


def test_notes_that_differ_between_paths_fail() -> None:
    with pytest.raises(
        AssertionError,
        match=r"^mean_weight_notes failed .*the streamed "
        r"notes .* differ from the notes of \.estimate .*only eager says this",
    ):
        dict(estimator_checks(_ChattyIPS()))["mean_weight_notes"]()


def test_import_does_not_need_pytest() -> None:
    code = (
        "import sys; sys.modules['pytest'] = None; import ope.testing; print(ope.testing.__all__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "check_estimator" in out.stdout


def test_check_estimator_runs_every_check_and_skips_one_whose_extra_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "dask", None)  # as if ope[dask] were not installed
    with pytest.warns(UserWarning, match=r"distributed_equals_eager skipped, it needs dask"):
        check_estimator("snips", rng=5)


def test_an_estimator_that_evaluate_refuses_fails_the_evaluate_check() -> None:
    with pytest.raises(
        AssertionError,
        match=r"^evaluate_equals_eager failed .*ope\.evaluate "
        r"refused it",
    ):
        dict(estimator_checks(_FakeIPS()))["evaluate_equals_eager"]()
