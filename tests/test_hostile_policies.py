"""Hostile input on the policies: each root fix refuses the value with an error from ope's
tree whose message names the argument, or computes a finite, right result.

The contract harness (tests/test_contract_registry.py) draws the hostile values; these tests pin
one case per root so that a regression fails here by name.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import ope
from ope import ParameterError, PolicyError, ValidationError
from ope._valid_calls.policies import VALID, policy_logs
from ope.exceptions import OPEError, SchemaError
from ope.policies import (
    ActionTablePolicy,
    ArrayPolicy,
    ChosenActionPolicy,
    DeterministicPolicy,
    EpsilonGreedyPolicy,
    LoggingPolicy,
    PolicyDistribution,
    PolicySpec,
    SoftmaxPolicy,
    UniformPolicy,
    candidates_with_specs,
    is_policy_spec,
    load_classifier,
    logged_action_table,
    logging_distribution,
    parse_policy_spec,
    policy_from_spec,
    read_policy_table,
    target_propensities,
    to_policy_table,
    write_policy_table,
)
from ope.slates import EnumeratedSlatePolicy, PlackettLuce, slate_logs


def _scores(X):
    return np.column_stack([X[:, 0], -X[:, 0], np.zeros(len(X))])


def _raises(error, argument, call, *args, **kwargs):
    with pytest.raises(error) as info:
        call(*args, **kwargs)
    assert argument in str(info.value), str(info.value)
    return str(info.value)


# ---------------------------------------------------------------------------- logs
def _policies(tmp_path):
    npy = tmp_path / "d.npy"
    np.save(npy, np.full((60, 3), 1 / 3))
    return [
        UniformPolicy(actions=[0, 1, 2]),
        EpsilonGreedyPolicy(DeterministicPolicy("scores"), 0.1),
        DeterministicPolicy(_scores, actions=[0, 1, 2], feature_columns=["x0"]),
        SoftmaxPolicy("scores"),
        LoggingPolicy(),
        ChosenActionPolicy("chosen"),
        ArrayPolicy(npy),
        ActionTablePolicy(pd.DataFrame({"action": [0, 1, 2], "probability": [0.2, 0.5, 0.3]})),
        policy_from_spec("u=uniform", policy_logs()),
    ]


@pytest.mark.parametrize("method", ["propensity", "distribution"])
def test_policy_methods_refuse_logs_that_are_not_bandit_logs(tmp_path, method):
    frame = policy_logs().table.to_pandas()
    for policy in _policies(tmp_path):
        getattr(policy, method)(policy_logs())  # the validated logs: fine
        for bad in (frame, 3, ["a"], tmp_path / "missing.parquet"):
            message = _raises(ParameterError, "`logs`", getattr(policy, method), bad)
            assert "ope.read_logs" in message


@pytest.mark.parametrize(
    "call",
    [
        logging_distribution,
        logged_action_table,
        lambda logs: to_policy_table(logs, {"u": LoggingPolicy()}),
    ],
)
def test_functions_of_the_logs_refuse_a_dataframe(call):
    _raises(ParameterError, "`logs`", call, pd.DataFrame({"x": [1.0]}))


# ---------------------------------------------------------------------------- arguments
@pytest.mark.parametrize("cls", [DeterministicPolicy, SoftmaxPolicy])
def test_feature_columns_must_be_a_list_of_names(cls):
    for bad in (3.5, [3], [["a"]], {"x0": 1}):
        _raises(
            ParameterError, "feature_columns", cls, _scores, actions=[0, 1, 2], feature_columns=bad
        )
    _raises(
        ParameterError,
        "feature_columns",
        ope.ClassifierPolicy,
        _ClassifierStub(),
        feature_columns=3.5,
    )
    cls(_scores, actions=[0, 1, 2], feature_columns="x0")  # one column by its name: fine


class _ClassifierStub:
    classes_ = np.array([0, 1, 2])

    def predict_proba(self, X):
        return np.full((len(X), 3), 1 / 3)


def test_actions_must_be_a_flat_list_of_labels():
    for bad in ([[1]], [np.nan], [1.5], 3, [object()], [True], {0: 1}):
        _raises(PolicyError, "actions", UniformPolicy, actions=bad)
    _raises(ValidationError, "actions", UniformPolicy, actions=[1, "a"])
    assert UniformPolicy(actions=np.array([2, 0])).actions == (2, 0)


def test_flags_are_true_or_false():
    logs = policy_logs()
    for bad in ("yes", 2, np.nan):
        _raises(
            ParameterError,
            "with_distributions",
            target_propensities,
            logs,
            ["greedy"],
            with_distributions=bad,
        )
        _raises(ParameterError, "by_position", logged_action_table, logs, by_position=bad)
    assert logged_action_table(logs, by_position=np.False_).num_rows == 3


def test_policy_distribution_refuses_labels_arrow_cannot_hold():
    dist = PolicyDistribution(sp.csr_array(np.array([[0.5, 0.5], [0.0, 1.0]])), np.array([0, 1]))
    _raises(PolicyError, "action", dist.probability, [object(), object()])
    _raises(PolicyError, "action", dist.probability, np.array([0.5, 1.0]))
    assert dist.probability(np.array([1, 1])).tolist() == [0.5, 1.0]


# ---------------------------------------------------------------------------- paths
def test_paths_that_are_not_paths(tmp_path):
    for call in (ArrayPolicy, read_policy_table, load_classifier):
        for bad in (3, [str(tmp_path)]):
            _raises(ParameterError, "path", call, bad)
        _raises(ParameterError, "path", call, "")
    table = pd.DataFrame({"event_id": [0], "policy": ["p"], "action": [0], "probability": [1.0]})
    for bad in (3, "", None):
        _raises(ParameterError, "`path`", write_policy_table, table, bad)


def test_load_classifier_names_a_missing_file_and_a_directory(tmp_path):
    _raises(OPEError, "does not exist", load_classifier, tmp_path / "m.skops")
    _raises(OPEError, "is a directory", load_classifier, tmp_path)


def test_read_policy_table_checks_its_mapping(tmp_path):
    path = tmp_path / "t.parquet"
    pd.DataFrame(
        {"event_id": [0, 0], "policy": ["p", "p"], "action": [0, 1], "prob": [0.5, 0.5]}
    ).to_parquet(path)
    assert read_policy_table(path, mapping={"probability": "prob"}).num_rows == 2
    for bad in ("reward", [1], 6.0, True, {3: "x"}):
        _raises(ParameterError, "mapping", read_policy_table, path, mapping=bad)
    _raises(
        ParameterError, "mapping", read_policy_table, path, mapping={"reward": "prob"}
    )  # not a policy-table column
    _raises(
        SchemaError, "mapping", read_policy_table, path, mapping={"probability": "no_such_column"}
    )


# ---------------------------------------------------------------------------- specs
def test_spec_functions_name_their_text():
    for bad in (3, None, b"u=uniform"):
        _raises(ParameterError, "`text`", is_policy_spec, bad)
        _raises(ParameterError, "`text`", parse_policy_spec, bad)
    for bad in ("", "\x00", "u=nope", "a" * 100_000):
        message = _raises(ParameterError, "spec text", parse_policy_spec, bad)
        assert len(message) < 1_000
    assert is_policy_spec("u=uniform") and not is_policy_spec("greedy")


def test_candidates_with_specs_checks_specs_names_and_labels():
    logs = policy_logs()
    call = candidates_with_specs
    _raises(ParameterError, "`specs`", call, logs, "u=uniform")
    _raises(ParameterError, "`specs`", call, logs, 3.5)
    _raises(ParameterError, "`specs`", call, logs, [0.5])
    _raises(ParameterError, "`specs` item 0", call, logs, ["u=nope"])
    _raises(ParameterError, "`names`", call, logs, ["u=uniform"], names="greedy")
    _raises(PolicyError, "policy names ['nope']", call, logs, ["u=uniform"], names=["nope"])
    _raises(ParameterError, "`labels`", call, logs, ["u=uniform"], labels=3.5)
    _raises(ParameterError, "`labels`", call, logs, ["u=uniform"], labels=["a", "b"])
    _raises(ParameterError, "`logs`", call, logs.table, ["u=uniform"])
    out = call(logs, ["u=uniform"], names=["target__greedy"])
    assert list(out) == ["target__greedy", "u"]


def test_a_policy_spec_built_by_hand_is_checked_by_the_grammar():
    assert PolicySpec("e", "epsilon-greedy", column="s", number=0.1) == parse_policy_spec(
        "e=epsilon-greedy:s:0.1"
    )
    assert PolicySpec("s", "softmax", column="s").number == 1.0
    _raises(ParameterError, "kind", PolicySpec, "a", "weird")
    _raises(ParameterError, "number", PolicySpec, "e", "epsilon-greedy", column="s")
    _raises(ParameterError, "number", PolicySpec, "e", "epsilon-greedy", column="s", number=1.5)
    _raises(ParameterError, "`name`", PolicySpec, 3, "uniform")
    _raises(ParameterError, "column", PolicySpec, "u", "uniform", column="s")
    _raises(
        ParameterError, "`columns`", PolicySpec, "c", "classifier", path="m.skops", columns=["a,b"]
    )
    _raises(ParameterError, "path", PolicySpec, "n", "npy")
    _raises(ParameterError, "`text`", PolicySpec, "u", "uniform", text=3)


def test_a_hand_built_spec_evaluates_like_its_text():
    logs = policy_logs()
    by_hand = policy_from_spec(PolicySpec("s", "softmax", column="scores", number=0.5), logs)
    by_text = policy_from_spec("s=softmax:scores:0.5", logs)
    np.testing.assert_array_equal(by_hand.propensity(logs), by_text.propensity(logs))


# ---------------------------------------------------------------------------- slates
def _slate_frame():
    return VALID["ope.SlatePolicy.slate_probabilities"](None).kwargs["logs"]


@pytest.mark.parametrize(
    "policy",
    [
        EnumeratedSlatePolicy([[0, 1], [1, 0], [0, 2]], [[0.5, 0.25, 0.25]], n_items=3),
        PlackettLuce([[0.0, 0.5, 1.0]], slate_size=2),
    ],
)
def test_slate_policies_read_their_logs_as_the_estimators_do(policy):
    frame = _slate_frame()
    from_frame = policy.slate_probabilities(frame)
    from_logs = policy.slate_probabilities(slate_logs(frame))
    np.testing.assert_array_equal(from_frame.prefix, from_logs.prefix)
    _raises(
        ValidationError, "propensity", policy.slate_probabilities, frame.assign(propensity=np.nan)
    )
    _raises(ParameterError, "slate logs", policy.slate_probabilities, 3)


def test_plackett_luce_checks_context_and_items():
    pol = PlackettLuce([[0.0, 0.5, 1.0]], slate_size=2)
    for bad in ("\x00", 0.0, np.nan, object(), True, [1], [-1]):
        _raises(ValidationError, "`context`", pol.prefix_probabilities, bad, [[0, 1]])
        _raises(ValidationError, "`context`", pol.sample, bad, rng=0)
    for bad in ("\x00", 0.0, [[0, 3]], [[0.5, 1]], [[0, 1, 2]]):
        _raises(ValidationError, "`item`", pol.prefix_probabilities, [0], bad)
    assert pol.sample([0, 0], rng=0).shape == (2, 2)


def test_plackett_luce_prefix_of_a_repeated_item_is_zero():
    pol = PlackettLuce([[0.0, 0.5, 1.0]], slate_size=2)
    p = pol.prefix_probabilities(np.array([0]), np.array([[2, 2]]))
    assert p[0, 1] == 0.0 and 0.0 < p[0, 0] < 1.0


@pytest.mark.parametrize(
    "scores, expected",
    [
        ([[0.0, -40.0, -40.0]], [1.0, 0.5]),  # the shown item holds all but 4e-18 of the mass
        ([[0.0, -800.0, -800.0]], [1.0, 0.5]),  # the other weights underflow to 0
    ],
)
def test_plackett_luce_prefixes_stay_finite_when_one_item_holds_the_mass(scores, expected):
    pol = PlackettLuce(scores, slate_size=2)
    p = pol.prefix_probabilities(np.array([0]), np.array([[0, 1]]))
    np.testing.assert_allclose(p[0], expected, rtol=1e-12)


def test_plackett_luce_prefixes_are_unchanged_on_ordinary_scores():
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(2, 5))
    pol = PlackettLuce(logits, slate_size=3)
    slates = np.array(list(itertools.permutations(range(5), 3)))
    ctx = np.repeat([0, 1], len(slates))
    items = np.tile(slates, (2, 1))
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    shown = e[ctx[:, None], items]
    naive = np.cumprod(
        shown / (e.sum(axis=1)[ctx][:, None] - (np.cumsum(shown, axis=1) - shown)), axis=1
    )
    np.testing.assert_array_equal(pol.prefix_probabilities(ctx, items), naive)
    _, prob = pol.distribution()
    np.testing.assert_allclose(prob.sum(axis=1), 1.0, atol=1e-12)


def test_enumerated_slate_policy_checks_its_slates():
    probs = [[0.5, 0.5]]
    for bad in (0, [], [[-1, 0], [1, 0]], [[0, 1], [0, 1]]):
        _raises(ParameterError, "`slates`", EnumeratedSlatePolicy, bad, probs)
    _raises(ParameterError, "`n_items`", EnumeratedSlatePolicy, [[0, 1], [1, 0]], probs, n_items=1)
    _raises(
        ParameterError, "`n_items`", EnumeratedSlatePolicy, [[0, 1], [1, 0]], probs, n_items=2**40
    )
    _raises(
        ParameterError, "`probabilities`", EnumeratedSlatePolicy, [[0, 1], [1, 0]], np.empty((0, 2))
    )
    # an item may fill two slots (a logger filling slots independently)
    assert EnumeratedSlatePolicy([[0, 0], [1, 0]], probs).n_items == 2
