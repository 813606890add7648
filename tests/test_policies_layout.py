"""The policies package keeps its public surface, and arguments fail with ParameterError."""

from __future__ import annotations

import importlib

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp

from ope.exceptions import ParameterError, PolicyError
from ope.policies import (
    DeterministicPolicy,
    EpsilonGreedyPolicy,
    PolicyDistribution,
)
from ope.policies._core import matrix_over
from ope.simulate import ContextualBandit, PairedReplaySimulator, Recommendation, TabularMDP

PUBLIC = (
    "PROBABILITY_TOLERANCE Policy PolicyDistribution TargetPropensities UniformPolicy "
    "EpsilonGreedyPolicy DeterministicPolicy SoftmaxPolicy ClassifierPolicy target_propensities "
    "logging_distribution read_policy_table write_policy_table to_policy_table "
    "LoggingPolicy ChosenActionPolicy ArrayPolicy ActionTablePolicy logged_action_table "
    "PolicySpec is_policy_spec parse_policy_spec "
    "policy_from_spec load_classifier candidates_with_specs"
).split()


def test_every_public_name_stays_importable_from_ope_policies():
    module = importlib.import_module("ope.policies")
    assert sorted(module.__all__) == sorted(PUBLIC)
    assert module.PROBABILITY_TOLERANCE == 1e-6
    for name in PUBLIC[1:]:
        assert getattr(module, name).__module__.startswith("ope.policies")


def test_matrix_over_moves_columns_to_a_larger_catalog():
    dist = PolicyDistribution(sp.csr_array(np.array([[0.25, 0.75], [1.0, 0.0]])), np.array([2, 5]))
    m = matrix_over(dist, pa.array([1, 2, 3, 5]))
    assert m.toarray().tolist() == [[0.0, 0.25, 0.0, 0.75], [0.0, 1.0, 0.0, 0.0]]
    assert m.data is dist.matrix.data or np.shares_memory(
        m.data, dist.matrix.data
    )  # entries shared


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (
            lambda: EpsilonGreedyPolicy(DeterministicPolicy("s"), 1.5),
            r"epsilon must be a number in \[0, 1\]",
        ),
        (
            lambda: EpsilonGreedyPolicy(DeterministicPolicy("s"), "0.1"),
            r"`epsilon` must be a number",
        ),
        (lambda: ContextualBandit().sample(10, rng=-1), r"rng must be an int seed"),
        (
            lambda: ContextualBandit(reward="poisson"),
            r"`reward` must be one of 'bernoulli', 'gaussian'",
        ),
        (lambda: TabularMDP(reward="poisson"), r"`reward` must be one of 'bernoulli', 'gaussian'"),
        (
            lambda: Recommendation(n_items=50, n_candidates=5).expected_reward([0, 1], [0]),
            "same length",
        ),
        (
            lambda: TabularMDP().expected_reward([0], [0, 1]),
            "states and actions must have the same length",
        ),
        (lambda: PairedReplaySimulator().true_value("memory"), r"`arm` must be one of"),
        (
            lambda: PairedReplaySimulator().true_value("no_memory", outcome="both"),
            r"`outcome` must be one of",
        ),
        (lambda: ContextualBandit().policy_table(3), "`name` must be a policy name"),
    ],
)
def test_bad_arguments_raise_parameter_error(build, match):
    with pytest.raises(ParameterError, match=match) as info:
        build()
    assert not isinstance(info.value, PolicyError)


def test_shared_truth_of_the_one_step_simulators_adds_up():
    for env, name in (
        (ContextualBandit(unsupported_actions=2, seed=1), "optimal"),
        (Recommendation(seed=2), "long_tail"),
    ):
        by_segment = env.true_value_by_segment(name)
        mass = {
            s: env.context_probabilities[env.context_segments == k].sum()
            for k, s in enumerate(env.segments)
        }
        assert sum(mass[s] * v for s, v in by_segment.items()) == pytest.approx(
            env.true_value(name), rel=1e-12
        )
        assert env.supported_value(name) <= env.true_value(name) + 1e-12
        assert (env.unsupported_mass(name) > 0) == (
            env.supported_value(name) < env.true_value(name)
        )
        assert np.array_equal(env.policy_table(name), env.policy_table(name))


def test_model_arrays_are_read_only_views_with_their_docs():
    env = ContextualBandit(n_contexts=20, seed=0)
    for name in (
        "context_probabilities",
        "context_segments",
        "logging_support",
        "reward_means",
        "context_features",
    ):
        arr = getattr(env, name)
        assert not arr.flags.writeable, name
        with pytest.raises(AttributeError):
            setattr(env, name, arr)
        assert getattr(ContextualBandit, name).__doc__.endswith("Read-only.")
    assert not TabularMDP().transitions.flags.writeable
    assert not PairedReplaySimulator().item_logit_effects.flags.writeable
    assert not Recommendation(n_items=50, n_candidates=5).candidate_sets.flags.writeable
    for table in (env.policy_table(name) for name in ("logging", *env.candidate_policies)):
        assert not table.flags.writeable


def test_load_sample_refuses_a_string_of_columns_before_reading():
    from ope.simulate import load_sample

    with pytest.raises(ParameterError, match="columns must be a list of column names"):
        load_sample(columns="action")
