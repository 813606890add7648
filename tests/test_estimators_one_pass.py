"""Several estimators on the same rows share one pass of the moment kernel: ``estimate_many``
with a list of estimators (numbers equal to one call per estimator, one kernel pass for every
weighting estimator), and diagnostics that reuse an evaluation's statistics."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest

import ope
import ope.moments
from ope.estimators import (
    DM,
    DR,
    IPS,
    SNDR,
    SNIPS,
    ClippedIPS,
    SwitchDR,
    estimate_many,
)
from ope.evaluation import EvaluationPlan
from ope.exceptions import ParameterError

N, P_COLS = 3000, 3


@pytest.fixture(scope="module")
def rows() -> dict[str, Any]:
    rng = np.random.default_rng(7)
    logging = rng.uniform(0.1, 1.0, N)
    target = rng.dirichlet(np.ones(4), size=N)[:, :P_COLS]
    return {
        "reward": rng.binomial(1, 0.3, N).astype(float),
        "logging_propensity": logging,
        "target_propensity": target,
        "q_logged": rng.uniform(0.0, 1.0, N),
        "q_target": rng.uniform(0.0, 1.0, (N, P_COLS)),
        "names": ["a", "b", "c"],
    }


class _Counter:
    """Counts the passes of the moment kernel (``accumulate``) while installed."""

    def __init__(self) -> None:
        self.passes = 0


@pytest.fixture()
def kernel_passes(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Counter]:
    counter = _Counter()
    original = ope.moments.accumulate

    def counting(*args: Any, **kwargs: Any) -> Any:
        counter.passes += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(ope.moments, "accumulate", counting)
    yield counter


def _same(a: Any, b: Any) -> None:
    assert a.estimator == b.estimator and a.policy == b.policy
    assert a.value == b.value
    assert a.std_error == b.std_error
    assert a.notes == b.notes
    assert a.ess == b.ess


def test_three_weighting_estimators_share_one_kernel_pass(rows, kernel_passes):
    ests = [IPS(), SNIPS(), ClippedIPS(max_weight=5.0)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        many = estimate_many(ests, **{k: rows[k] for k in rows if not k.startswith("q_")})
    assert kernel_passes.passes == 1
    assert [len(x) for x in many] == [P_COLS] * 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        separate = [
            estimate_many(e, **{k: rows[k] for k in rows if not k.startswith("q_")}) for e in ests
        ]
    assert kernel_passes.passes == 4  # one each when called one by one
    for got, want in zip(many, separate):
        for a, b in zip(got, want):
            _same(a, b)
            # backed by the same rows: the bootstrap and paired comparisons work as before
            assert a.ci(method="bootstrap", n_resamples=200, rng=0) == b.ci(
                method="bootstrap", n_resamples=200, rng=0
            )


def test_two_clip_levels_cost_two_passes_and_names_resolve(rows, kernel_passes):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        many = estimate_many(
            ("ips", ClippedIPS(max_weight=3.0), ClippedIPS(max_weight=8.0), "snips"),
            reward=rows["reward"],
            logging_propensity=rows["logging_propensity"],
            target_propensity=rows["target_propensity"],
        )
    assert kernel_passes.passes == 2
    assert [x[0].estimator for x in many] == ["ips", "clipped_ips", "clipped_ips", "snips"]
    assert many[1][0].value != many[2][0].value


def test_model_estimators_equal_their_single_calls(rows, kernel_passes):
    ests = [DR(), "ips", DM(), SNDR(), SwitchDR(tau=4.0)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        many = estimate_many(ests, **rows)
        assert kernel_passes.passes == 1  # IPS alone; the model ones have their own passes
        separate = [estimate_many(e, **rows) for e in ests]
    for got, want in zip(many, separate):
        for a, b in zip(got, want):
            _same(a, b)


def test_sampling_weights_share_one_weighted_pass(rows, kernel_passes):
    s = np.linspace(1.0, 3.0, N)
    ests = [IPS(), SNIPS(), ClippedIPS(max_weight=5.0), DR()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        many = estimate_many(ests, sampling_weight=s, **rows)
        assert kernel_passes.passes == 1
        separate = [estimate_many(e, sampling_weight=s, **rows) for e in ests]
    for got, want in zip(many, separate):
        for a, b in zip(got, want):
            assert a.value == pytest.approx(b.value, rel=1e-12, abs=1e-15)
            assert a.std_error == pytest.approx(b.std_error, rel=1e-12)


def test_one_estimator_still_returns_one_list(rows):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = estimate_many("ips", **rows)
    assert [e.policy for e in res] == rows["names"]


@pytest.mark.parametrize(
    ("estimators", "message"),
    [
        ([], "empty list"),
        (["ips", "nope"], r"`estimator\[1\]`: unknown estimator"),
        ([IPS(), 3.0], r"`estimator\[1\]` must be an ope estimator"),
        ([["ips"]], r"`estimator\[0\]` must be an ope estimator"),
    ],
)
def test_bad_lists_of_estimators_are_refused(rows, estimators, message):
    with pytest.raises(ParameterError, match=message):
        estimate_many(estimators, **rows)


def test_the_result_of_a_list_equals_evaluate(rows):
    frame = pd.DataFrame(
        {
            "action": np.zeros(N, dtype=int),
            "propensity": rows["logging_propensity"],
            "reward": rows["reward"],
            **{f"target__{x}": rows["target_propensity"][:, j] for j, x in enumerate("abc")},
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ev = ope.evaluate(frame, estimators=("ips", "snips", "clipped_ips"), max_weight=5.0)
        many = estimate_many(
            [IPS(), SNIPS(), ClippedIPS(max_weight=5.0)],
            reward=rows["reward"],
            logging_propensity=rows["logging_propensity"],
            target_propensity=rows["target_propensity"],
            names=rows["names"],
        )
    table = ev.table().set_index(["policy", "estimator"])
    for res in many:
        for e in res:
            assert table.loc[(e.policy, e.estimator), "value"] == pytest.approx(e.value, rel=1e-12)
            assert table.loc[(e.policy, e.estimator), "std_error"] == pytest.approx(
                e.std_error, rel=1e-12
            )


@pytest.fixture(scope="module")
def logs(rows: dict[str, Any]) -> Any:
    return ope.read_logs(
        pd.DataFrame(
            {
                "action": np.zeros(N, dtype=int),
                "propensity": rows["logging_propensity"],
                "reward": rows["reward"],
                **{f"target__{x}": rows["target_propensity"][:, j] for j, x in enumerate("abc")},
            }
        )
    )


def test_diagnose_after_evaluate_reads_no_moment_pass_and_changes_no_number(logs, kernel_passes):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan = EvaluationPlan.build(
            estimators=("ips", "snips", "clipped_ips"), max_weight=5.0, reward_range=(0.0, 1.0)
        )
        ev = plan.run(logs)
        assert kernel_passes.passes == 1  # the evaluation's one pass
        reused = plan.diagnose(logs, statistics=ev.statistics)
        assert kernel_passes.passes == 1  # every moment of the diagnosis came from it
        fresh = plan.diagnose(logs)
        assert kernel_passes.passes == 2  # without the statistics: a pass of its own
    a, b = reused.table(), fresh.table()
    assert list(a.columns) == list(b.columns)
    for column in a.columns:
        if pd.api.types.is_float_dtype(a[column]):
            np.testing.assert_allclose(a[column], b[column], rtol=1e-12, atol=1e-15)
        else:
            assert a[column].tolist() == b[column].tolist()


def test_diagnose_refuses_the_statistics_of_another_clip_level(logs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ev = ope.evaluate(logs, estimators=("ips", "clipped_ips"), max_weight=5.0)
        with pytest.raises(ParameterError, match="other rows or settings"):
            ope.diagnose(logs, max_weight=3.0, statistics=ev.statistics)


def test_the_command_lines_diagnostics_ride_on_the_evaluations_pass(
    logs, tmp_path, kernel_passes, capsys
):
    from ope.cli import EXIT_OK, main

    path = tmp_path / "logs.parquet"
    logs.table.to_pandas().to_parquet(path)
    code = main(
        [
            "evaluate",
            str(path),
            "--estimator",
            "ips",
            "--estimator",
            "snips",
            "--reward-range",
            "0",
            "1",
            "--json",
        ]
    )
    assert code == EXIT_OK
    document = capsys.readouterr().out
    assert '"diagnostics"' in document
    assert kernel_passes.passes == 1  # the evaluation's pass; the diagnostics read its moments


@pytest.mark.parametrize(
    ("column", "row", "value", "message"),
    [
        ("q_target", N - 5, np.nan, "q_target"),
        ("q_logged", 7, np.inf, "q_logged"),
        ("reward", N - 1, np.nan, "reward"),
        ("target_propensity", N // 2, 1.5, "target_propensity"),
        ("logging_propensity", N - 2, 0.0, "logging_propensity"),
    ],
)
def test_dr_checks_its_inputs_from_what_its_pass_saw(rows, column, row, value, message):
    """The model estimators' value checks ride on their chunked pass: a bad value in any
    block (the first, a middle or the last one) is still found and named."""
    bad = {k: np.array(v, dtype=float, copy=True) for k, v in rows.items() if k != "names"}
    bad[column][row] = value
    for est in (DR(), SNDR(), DM()):
        if column not in ("reward", "q_target") and not est.uses_weights:
            continue  # DM reads neither the propensities nor q_logged
        with pytest.raises(ope.ValidationError, match=message):
            estimate_many(est, chunk_size=256, **bad)


def test_dr_with_large_rewards_equals_the_scaled_pass(rows):
    """Rewards past 2**64 are computed in units of a power of two (as when checked first)."""
    big = {k: v for k, v in rows.items() if k != "names"}
    factor = 2.0**70
    big = {**big, "reward": big["reward"] * factor, "q_logged": big["q_logged"] * factor}
    big["q_target"] = big["q_target"] * factor
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scaled = estimate_many(DR(), **big)
        plain = estimate_many(DR(), **{k: v for k, v in rows.items() if k != "names"})
    for a, b in zip(scaled, plain):
        assert a.value == b.value * factor
        assert a.std_error == b.std_error * factor
