"""The evaluation plan: every option checked once, before any row is read, and run by every
driver (eager, scan, command line) with the same numbers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import ope
from ope import _validation
from ope.evaluation import EvaluationPlan
from ope.exceptions import EstimationError, MissingBoundsError, ParameterError, PolicyError
from ope.streaming import MomentStats


def _frame(n: int = 400, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    action = rng.integers(0, 2, n)
    return pd.DataFrame(
        {
            "event_id": np.arange(n),
            "action": action,
            "propensity": np.full(n, 0.5),
            "reward": rng.binomial(1, 0.3 + 0.2 * action).astype(float),
            "target__always_1": (action == 1).astype(float),
        }
    )


def test_the_plan_holds_estimator_objects_with_their_settings():
    plan = EvaluationPlan.build(estimators=("ips", "clipped_ips"), max_weight=20.0, rng=0)
    assert [key for key, _ in plan.estimators] == ["ips", "clipped_ips"]
    assert plan.clipped is not None and plan.clipped.max_weight == 20.0
    assert plan.seed == 0 and plan.options["max_weight"] == 20.0


@pytest.mark.parametrize(
    "kwargs, argument",
    [
        ({"estimators": ("ips", "dr")}, "estimators"),
        ({"estimators": ("ips",), "by": "segment"}, "by"),
        ({"estimators": ("ips",), "ci": "bootstrap"}, "ci"),
    ],
)
def test_stream_obstacles_name_the_argument(kwargs, argument):
    plan = EvaluationPlan.build(**kwargs)
    assert [arg for arg, _ in plan.stream_obstacles()] == [argument]
    assert EvaluationPlan.build(estimators=("ips", "snips")).stream_obstacles() == ()


def test_a_long_format_policy_table_cannot_stream():
    table = pd.DataFrame({"event_id": [0], "action": [1], "policy": ["p"], "probability": [1.0]})
    plan = EvaluationPlan.build(estimators=("ips",)).with_policies(table)
    assert [arg for arg, _ in plan.stream_obstacles()] == ["policies"]
    with pytest.raises(PolicyError, match="long-format policy table"):
        plan.check_streamable("over a lazy scan")
    with pytest.raises(EstimationError, match="dr cannot run over a lazy scan"):
        EvaluationPlan.build(estimators=("dr",)).check_streamable("over a lazy scan")


def test_the_candidates_of_a_streamed_source_are_its_target_columns_or_the_named_ones():
    read = ["action", "propensity", "reward", "target__a", "target__b"]
    assert EvaluationPlan.build().candidate_names(read, "x") == ["a", "b"]
    assert EvaluationPlan.build(["b"]).candidate_names(read, "x") == ["b"]
    objects = {"p": ope.policies.UniformPolicy()}
    assert EvaluationPlan.build(objects).candidate_names(read[:3], "x") == ["p"]
    with pytest.raises(PolicyError, match=r"^no candidate policies: the columns read from x "):
        EvaluationPlan.build().candidate_names(read[:3], "x")
    with pytest.raises(
        PolicyError,
        match=r"^`policies`: policy column\(s\) target__c is not among the columns read from x; "
        + r"its candidate columns are: target__a, target__b\.$",
    ):
        EvaluationPlan.build(["a", "c"]).candidate_names(read, "x")
    with pytest.raises(PolicyError, match="its candidate columns are: none"):
        EvaluationPlan.build(["a"]).candidate_names(read[:3], "x")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"ci": "hoeffding", "estimators": ("ips",)}, "needs the a priori range of the rewards"),
        (
            {"ci": "bernstein", "estimators": ("ips",), "reward_range": (0, 1)},
            "needs an a priori bound on the importance weights",
        ),
    ],
)
def test_missing_bounds_are_refused_before_any_row_is_read(tmp_path, kwargs, match):
    missing = tmp_path / "absent.parquet"  # reading it would be a DataFileError
    with pytest.raises(MissingBoundsError, match=match):
        ope.evaluate(missing, **kwargs)


def test_a_method_that_does_not_apply_needs_no_bound_but_the_logging_value_does():
    # clipped IPS has hoeffding; DR does not: with only DR, hoeffding falls back for DR, but
    # the logging policy's value (a plain mean) still takes hoeffding, which needs the range:
    # refused when the plan is built (the run raised it only after reading the rows)
    with pytest.raises(MissingBoundsError, match=r"^ci='hoeffding' needs .* plain mean\) gets"):
        EvaluationPlan.build(estimators=("dr",), ci="hoeffding", ci_fallback="normal")
    plan = EvaluationPlan.build(
        estimators=("dr",), ci="hoeffding", ci_fallback="normal", reward_range=(0.0, 1.0)
    )
    assert plan.settings.ci == "hoeffding"


def test_the_clip_level_is_validated_once_from_the_cli(tmp_path, monkeypatch):
    path = tmp_path / "logs.parquet"
    _frame().to_parquet(path)
    calls: list[object] = []
    original = _validation.check_max_weight

    def counting(value):
        calls.append(value)
        return original(value)

    import sys

    import ope.cli
    import ope.diagnostics  # noqa: F401 - loaded before the patch, whatever ran earlier

    for module in list(sys.modules.values()):  # every module holding the validator
        if (
            getattr(module, "__name__", "").startswith("ope")
            and getattr(module, "check_max_weight", None) is original
        ):
            monkeypatch.setattr(module, "check_max_weight", counting)
    code = ope.cli.main(
        [
            "evaluate",
            str(path),
            "--estimator",
            "clipped_ips",
            "--max-weight",
            "20",
            "--json",
            "--quiet",
            "--streaming",
            "off",
        ]
    )
    assert code == 0
    # once where it enters (the estimator's constructor), once by the diagnostics' own entry
    assert calls == [20.0, 20.0]


def test_moment_stats_read_the_clip_level_from_the_clipped_estimator():
    df = _frame()
    r, p, t = (df[c].to_numpy(float) for c in ("reward", "propensity", "target__always_1"))
    by_number = MomentStats.from_arrays(r, p, t, max_weight=1.5)
    by_object = MomentStats.from_arrays(r, p, t, estimators=[ope.IPS(), ope.ClippedIPS(1.5)])
    assert by_object.max_weight == 1.5
    np.testing.assert_allclose(
        by_object.moments["sum_cwr"], by_number.moments["sum_cwr"], rtol=1e-12
    )
    with pytest.raises(ParameterError, match="not both"):
        MomentStats.from_arrays(r, p, t, max_weight=1.5, estimators=[ope.ClippedIPS(1.5)])
    with pytest.raises(ParameterError, match="2 clip levels"):
        MomentStats.from_arrays(r, p, t, estimators=[ope.ClippedIPS(1.5), ope.ClippedIPS(2.0)])
    with pytest.raises(ParameterError, match="weighting estimators"):
        MomentStats.from_arrays(r, p, t, estimators=[ope.DR()])


def test_the_scan_and_the_eager_run_of_one_plan_agree(tmp_path):
    path = tmp_path / "logs.parquet"
    _frame(2_000, seed=3).to_parquet(path)
    plan = EvaluationPlan.build(estimators=("ips", "clipped_ips", "snips"), max_weight=1.5, rng=0)
    eager = plan.run(ope.read_logs(path)).table()
    streamed = plan.run(ope.scan_logs(path)).table()
    np.testing.assert_allclose(streamed["value"], eager["value"], rtol=1e-12)
    np.testing.assert_allclose(streamed["std_error"], eager["std_error"], rtol=1e-9)


def test_the_default_estimators_leave_out_dr_where_the_logs_cannot_give_it(tmp_path):
    """Without named estimators, DR runs where the logs give it (the candidates' whole
    distributions and a context) and is left out, with a note, where they do not: before,
    the default failed on logs of target__<name> columns alone (the bundled sample's
    layout) and on every lazy scan."""
    frame = _frame()
    ev = ope.evaluate(frame)
    assert ev.table()["estimator"].tolist() == ["ips", "snips"]
    assert any(
        n.startswith(
            "dr, one of the default estimators, was left out: the logs lack candidates, "
            "target_dist__always_1, each candidate's whole distribution."
        )
        for n in ev.notes
    )
    # the provenance records the estimators run, not the default asked for
    assert ev.provenance.options["estimators"] == ["ips", "snips"]
    with pytest.raises(PolicyError, match="whole distribution"):  # named: still an error
        ope.evaluate(frame, estimators=("ips", "snips", "dr"))
    # evaluate_outcomes takes the same default (it raised on these logs)
    outcomes = ope.evaluate_outcomes(frame.assign(cost=1.0), outcomes=["reward", "cost"])
    for outcome in ("reward", "cost"):
        each = outcomes[outcome]
        assert each.table()["estimator"].tolist() == ["ips", "snips"]
        assert any("dr, one of the default estimators, was left out" in n for n in each.notes)
        assert each.provenance.options["estimators"] == ["ips", "snips"]
    assert outcomes["reward"].table()["value"].tolist() == pytest.approx(
        ev.table()["value"].tolist(), rel=1e-12
    )
    path = tmp_path / "logs.parquet"
    frame.to_parquet(path)
    scanned = ope.evaluate(ope.scan_logs(path))
    assert scanned.table()["value"].tolist() == pytest.approx(ev.table()["value"].tolist())
    assert any("was left out: a lazy scan gives merged statistics" in n for n in scanned.notes)
    assert scanned.provenance.options["estimators"] == ["ips", "snips"]
    n = len(frame)
    full = frame.assign(
        x=np.random.default_rng(1).normal(size=n),
        candidates=[[0, 1]] * n,
        target_dist__always_1=[[0.0, 1.0]] * n,
    )
    ev = ope.evaluate(full, rng=0)
    assert ev.table()["estimator"].tolist() == ["ips", "snips", "dr"]
    assert not any("default estimators" in n for n in ev.notes)
    assert ev.provenance.options["estimators"] == ["ips", "snips", "dr"]
    bare = ope.evaluate(full.drop(columns="x"), rng=0)  # no context for the reward model
    assert bare.table()["estimator"].tolist() == ["ips", "snips"]
    assert any("no context column for its reward model" in n for n in bare.notes)


def test_the_default_keeps_dr_for_names_given_with_their_column_prefix():
    """`target__always_1` names the same candidate as `always_1` (target_propensities reads
    both): the default estimators keep DR when its distribution is there (a review found the
    prefixed name judged to lack `target_dist__target__always_1`)."""
    frame = _frame()
    n = len(frame)
    full = frame.assign(
        x=np.random.default_rng(1).normal(size=n),
        candidates=[[0, 1]] * n,
        target_dist__always_1=[[0.0, 1.0]] * n,
    )
    ev = ope.evaluate(full, ["target__always_1"], rng=0)
    assert ev.table()["estimator"].tolist() == ["ips", "snips", "dr"]
    assert not any("default estimators" in n for n in ev.notes)
