"""Hostile arguments of the drivers, the result objects' methods, the report and the simulators
fail with an ope error naming the argument, before any work: the roots the contract harness
(ope.testing.check_entry_point_contract) found broken, one test each."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pytest

import ope
from ope._validation import MAX_ARRAY_ELEMENTS, check_array_size
from ope._valid_calls._base import diagnostics, estimate, evaluation, frame
from ope.diagnostics import diagnose_arrays
from ope.exceptions import OPEError, ParameterError, PolicyError, ValidationError
from ope.report import check_report_destination, render_report
from ope.simulate import (
    ContextualBandit,
    PairedReplaySimulator,
    Recommendation,
    SlateEnvironment,
    TabularMDP,
)
from ope.simulate._common import MAX_MODEL_CELLS, MAX_SAMPLE_SIZE
from ope.simulate.mdp import MAX_HORIZON

pytestmark = pytest.mark.filterwarnings("ignore::ope.OPEWarning")


# ---------------------------------------------------------------------------- sizes
def test_array_size_guard_names_every_count_and_the_largest():
    check_array_size([("n_contexts", 200), ("n_actions", 10)], what="the reward table")
    with pytest.raises(
        ParameterError,
        match=r"`n_contexts`=~1e30 x `n_actions`=10 .* Pass a "
        r"smaller `n_contexts`",
    ):
        check_array_size([("n_contexts", 10**30), ("n_actions", 10)], what="the reward table")
    with pytest.raises(ParameterError, match="MAX_ARRAY_ELEMENTS"):
        check_array_size([("n", MAX_ARRAY_ELEMENTS + 1)], what="x")


@pytest.mark.parametrize(
    ("make", "argument"),
    [
        (lambda v: ContextualBandit(n_actions=v), "n_actions"),
        (lambda v: ContextualBandit(n_features=v), "n_features"),
        (lambda v: ContextualBandit(n_contexts=v, n_segments=1), "n_contexts"),
        (lambda v: ContextualBandit(n_noise_features=v), "n_noise_features"),
        (lambda v: Recommendation(n_items=v), "n_items"),
        (lambda v: Recommendation(n_requests=v), "n_requests"),
        (lambda v: Recommendation(n_features=v), "n_features"),
        (lambda v: TabularMDP(n_states=v), "n_states"),
        (lambda v: TabularMDP(n_actions=v), "n_actions"),
        (lambda v: PairedReplaySimulator(n_tasks=v), "n_tasks"),
        (lambda v: PairedReplaySimulator(n_items=v), "n_items"),
        (lambda v: SlateEnvironment(n_items=v), "n_items"),
        (lambda v: SlateEnvironment(n_contexts=v), "n_contexts"),
    ],
)
@pytest.mark.parametrize("huge", [10**30, 2**21 + 1])
def test_simulator_sizes_are_refused_before_allocating(make, argument, huge):
    # 10**30 failed inside numpy ("Maximum allowed dimension exceeded"); 2**21 + 1 is
    # allocatable but larger than one model table of MAX_MODEL_CELLS
    assert huge > MAX_MODEL_CELLS
    with pytest.raises(ParameterError, match=f"`{argument}`="):
        make(huge)


def test_model_tables_at_the_bound_still_build():
    env = ContextualBandit(n_contexts=MAX_MODEL_CELLS // 4, n_actions=4, n_features=1, n_segments=1)
    assert env.reward_means.shape == (MAX_MODEL_CELLS // 4, 4)


@pytest.mark.parametrize(
    "env",
    [
        ContextualBandit(n_actions=3, n_features=2, n_contexts=8),
        Recommendation(n_items=20, n_candidates=3, n_requests=8, n_features=2),
        TabularMDP(n_states=3, n_actions=2, horizon=2),
        PairedReplaySimulator(n_tasks=4, n_items=5),
        SlateEnvironment(n_items=4, slate_size=2, n_contexts=2),
    ],
    ids=type,
)
@pytest.mark.parametrize("n", [10**30, MAX_SAMPLE_SIZE + 1])
def test_sample_sizes_are_bounded(env, n):
    with pytest.raises(
        ParameterError, match=r"`n`=.* is more than one sample\(\) call draws \(MAX_SAMPLE_SIZE"
    ):
        env.sample(n, rng=0)


def test_mdp_horizon_and_steps_are_bounded():
    with pytest.raises(ParameterError, match="`horizon` must be a whole number >= 1 and <= "):
        TabularMDP(horizon=10**30)
    env = TabularMDP(n_states=3, n_actions=2, horizon=MAX_HORIZON)
    with pytest.raises(ParameterError, match="`horizon` must be"):
        env.true_value("uniform", horizon=MAX_HORIZON + 1)
    with pytest.raises(ParameterError, match=r"the sampled steps .*MAX_SAMPLED_STEPS"):
        env.sample(MAX_SAMPLE_SIZE, rng=0)


# ---------------------------------------------------------------------------- policies
@pytest.mark.parametrize("policies", [3.5, ["mine"], "mine"])
def test_simulator_policies_must_be_a_mapping(policies):
    with pytest.raises(ParameterError, match="`policies` must be a mapping"):
        ContextualBandit(n_actions=3, n_contexts=8, n_segments=2, policies=policies)


def test_bad_policy_names_and_shapes_name_the_arguments():
    with pytest.raises(PolicyError, match="`policies`: policy names must be Python identifiers"):
        TabularMDP(policies={"\x00": np.full((8, 3), 1 / 3)})
    # the user's table is checked before the model is built; its shape follows the sizes
    with pytest.raises(PolicyError, match=r"shape \(8, 4\) .*`n_contexts`, `n_actions`"):
        ContextualBandit(
            n_actions=4, n_contexts=8, n_segments=2, policies={"mine": np.full((8, 3), 1 / 3)}
        )


def test_unknown_policies_name_the_argument_they_were_passed_as():
    env = ContextualBandit(n_actions=3, n_contexts=8, n_segments=2)
    with pytest.raises(PolicyError, match="`name`: unknown policy 'nope'"):
        env.policy_table("nope")
    with pytest.raises(PolicyError, match="`logging_policy`: unknown policy 'nope'"):
        env.sample(5, logging_policy="nope")
    with pytest.raises(PolicyError, match=r"`logging_policy` \(a policy table\) must have shape"):
        env.sample(5, logging_policy=0.5)
    with pytest.raises(PolicyError, match="`policy`: unknown policy"):
        env.true_value("nope")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"segments": 3.5}, "segments must be a sequence of str labels"),
        ({"restricted_segments": 3.5}, "restricted_segments must be a list of labels"),
        ({"restricted_segments": ["nowhere"]}, r"unknown: \['nowhere'\]"),
    ],
)
def test_recommendation_segment_arguments(kwargs, match):
    with pytest.raises(ParameterError, match=match):
        Recommendation(n_items=20, n_candidates=3, n_requests=8, **kwargs)


@pytest.mark.parametrize("arms", [3.5, object(), ("a",), ("a", "a"), "ab"])
def test_paired_arms_must_be_two_labels(arms):
    with pytest.raises(ParameterError, match="arms must be two distinct non-empty labels"):
        PairedReplaySimulator(arms=arms)


def test_paired_arms_as_a_list_still_work():
    assert PairedReplaySimulator(arms=["a", "b"]).arms == ("a", "b")


@pytest.mark.parametrize(
    ("context", "item", "argument"),
    [
        (3.5, np.array([[0, 1]]), "context"),
        (np.array([5]), np.array([[0, 1]]), "context"),
        (np.array([0]), 3.5, "item"),
        (np.array([0]), np.array([[0, 9]]), "item"),
        (np.array([0, 1]), np.array([[0, 1]]), "item"),
    ],
)
def test_click_probability_checks_its_ids(context, item, argument):
    env = SlateEnvironment(n_items=4, slate_size=2, n_contexts=2)
    with pytest.raises(ParameterError, match=argument):
        env.click_probability(context, item)


def test_click_probability_on_valid_ids_is_unchanged():
    env = SlateEnvironment(n_items=4, slate_size=2, n_contexts=2, seed=3)
    item = np.array([[0, 1], [3, 2]])
    expected = np.take_along_axis(env.attraction[[0, 1]], item, axis=1) * env.position_bias
    np.testing.assert_array_equal(env.click_probability(np.array([0, 1]), item), expected)


# ---------------------------------------------------------------------------- results
@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"policy": ""}, "policy"),
        ({"policy": "greedy", "baseline": object()}, "baseline"),
        ({"policy": "greedy", "estimator": "\x00"}, "estimator"),
    ],
)
def test_compare_names_an_unknown_policy_baseline_or_estimator(kwargs, argument):
    with pytest.raises(ParameterError, match=f"`{argument}` must be one of"):
        evaluation().compare(**kwargs)


def test_compare_defaults_are_unchanged():
    ev = evaluation()
    assert ev.compare("greedy").value == ev.compare("greedy", "logging", estimator="ips").value


@pytest.mark.parametrize("truth", [3.5, "greedy", object()])
def test_summary_truth_must_be_a_mapping(truth):
    with pytest.raises(ParameterError, match="`truth` must be a mapping"):
        evaluation().summary(truth=truth)


def test_summary_truth_reads_the_bundled_form_too():
    ev = evaluation()
    flat = ev.summary(truth={"greedy": 0.4})
    assert flat == ev.summary(truth={"policies": {"greedy": 0.4}})
    assert "truth" in flat


@pytest.mark.parametrize(("argument", "value"), [("certificate", object()), ("validation", 3.5)])
def test_report_refuses_a_foreign_certificate_or_validation(argument, value):
    with pytest.raises(ParameterError, match=f"`{argument}` must be"):
        render_report(evaluation=evaluation(), **{argument: value})


@pytest.mark.parametrize("inputs", [object(), 3.5, "logs.parquet"])
def test_report_destination_inputs_must_be_a_list(tmp_path, inputs):
    with pytest.raises(ParameterError, match="`inputs` must be a list"):
        check_report_destination(tmp_path / "r.html", inputs=inputs)


def test_deprecated_max_weight_is_named_as_given():
    est = estimate()
    for method in (est.ci, est.with_ci):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            with pytest.raises(ParameterError, match="`max_weight` must be a positive finite"):
                method(0.9, "normal", max_weight=math.nan)
            with pytest.raises(ParameterError, match="`max_weight` is an a priori weight bound"):
                method(0.9, "normal", max_weight=10.0)
    with pytest.raises(ParameterError, match="`weight_bound` is an a priori weight bound"):
        est.ci(0.9, "normal", weight_bound=10.0)


def test_with_source_and_with_provenance_check_their_arguments():
    est = estimate()
    with pytest.raises(ParameterError, match="`source` must describe"):
        est.with_source(Path("logs.parquet"))
    assert est.with_source(est.source).value == est.value
    prov = ope.results.Provenance(seed=3)
    assert est.with_provenance(prov).provenance.seed == 3
    with pytest.raises(ParameterError, match="got `sed`, not a field"):
        est.with_provenance(sed=3)


@pytest.mark.parametrize("by", [[], ["seg"], 3, "\x00"])
def test_coverage_by_names_the_argument(by):
    with pytest.raises(ParameterError, match="`by`: unknown segment column"):
        diagnostics().coverage_matrix("greedy", by=by)


def test_plan_widths_at_the_float_range():
    d = diagnostics()
    wide = d.plan(target_width=1e308, new_rows=100)
    assert wide["exploration_share"].eq(0.0).all()
    assert np.isfinite(wide["predicted_width"]).all()
    with pytest.raises(ParameterError, match="`target_width`=.* cannot be planned"):
        d.plan(target_width=5e-324, new_rows=100)


def _arrays():
    f = frame()
    return f["reward"].to_numpy(), f["propensity"].to_numpy(), f["target__greedy"].to_numpy()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"policy_names": 3.5}, "`policy_names` must be a list of names"),
        ({"policy_names": "greedy"}, "`policy_names` must be a list of names"),
        ({"segments": object()}, "`segments` must map each segment column"),
    ],
)
def test_diagnose_arrays_checks_names_and_segments(kwargs, match):
    with pytest.raises(ParameterError, match=match):
        diagnose_arrays(*_arrays(), **kwargs)


def test_diagnose_arrays_on_no_rows_names_the_arrays():
    r, p, t = _arrays()
    with pytest.raises(ValidationError, match="`reward` has 60 rows but `logging_propensity`"):
        diagnose_arrays(r, p[:0], t)
    with pytest.raises(ValidationError, match="`logging_propensity` and `target_propensity`"):
        diagnose_arrays(r[:0], p[:0], t[:0])


def test_evaluate_estimators_one_object_or_a_list():
    with pytest.raises(ParameterError, match="`estimators` must be a list"):
        ope.evaluate(frame(), ["greedy"], estimators=3.5)
    one = ope.evaluate(frame(), ["greedy"], estimators=ope.IPS())
    listed = ope.evaluate(frame(), ["greedy"], estimators=[ope.IPS()])
    assert one["greedy", "ips"].value == listed["greedy", "ips"].value


def test_distributed_unknown_policy_names_the_argument(tmp_path):
    dask = pytest.importorskip("dask")
    path = tmp_path / "logs.parquet"
    frame().to_parquet(path)
    with dask.config.set(scheduler="synchronous"), pytest.raises(PolicyError, match="`policies`"):
        ope.evaluate_distributed(path, ["nope"])


def test_every_error_here_is_an_ope_error():
    # ParameterError is also a TypeError/ValueError for callers that catch those
    assert issubclass(ParameterError, OPEError) and issubclass(PolicyError, OPEError)
