"""Candidate (target) policies and their per-row probabilities.

Off-policy estimators need, for each candidate policy ``p`` and each logged row ``i``, the
probability ``pi_p(a_i | x_i)`` that the candidate gives to the action that was logged; the
doubly robust family also needs each row's whole distribution over its support. This package
turns the three ways a candidate can be given (docs/guide/logs.md) into those numbers:

1. columns of the logs: ``target__<name>`` (the probability of the logged action) and optionally
   ``target_dist__<name>`` (the distribution over the row's ``candidates``);
2. a long-format policy table ``event_id, policy, action, probability`` joined on ``event_id``;
3. policy objects computed from the logs: :class:`UniformPolicy`, :class:`EpsilonGreedyPolicy`,
   :class:`DeterministicPolicy`, :class:`SoftmaxPolicy`, :class:`ClassifierPolicy`, or given as
   numbers: :class:`LoggingPolicy`, :class:`ChosenActionPolicy`, :class:`ArrayPolicy` (a
   ``.npy`` distribution array), :class:`ActionTablePolicy` (a context-free per-action or
   per-(action, position) table); any of them named by a one-line spec ``NAME=KIND[:ARGS]``
   (:func:`parse_policy_spec`, :func:`policy_from_spec`; the command line's ``--policy``).

Modules, by concept:

- ``_core``: action codes, candidate sets, :class:`PolicyDistribution` (a sparse (n, K)
  distribution) and :class:`TargetPropensities` (the (n, P) result), shared by the others;
- ``objects``: the policy objects and the :class:`Policy` protocol;
- ``given``: the policies given as numbers (logging propensities, arrays, per-action tables);
- ``specs``: the ``NAME=KIND[:ARGS]`` grammar and the policy each spec builds;
- ``table``: reading, writing and building long-format policy tables;
- ``join``: :func:`target_propensities` (columns, tables or objects -> (n, P)) and
  :func:`logging_distribution`.
"""

from __future__ import annotations

from ope.policies._core import (
    PROBABILITY_TOLERANCE,
    PolicyDistribution,
    TargetPropensities,
)
from ope.policies.join import logging_distribution, target_propensities
from ope.policies.objects import (
    ClassifierPolicy,
    DeterministicPolicy,
    EpsilonGreedyPolicy,
    Policy,
    SoftmaxPolicy,
    UniformPolicy,
)
from ope.policies.given import (
    ActionTablePolicy,
    ArrayPolicy,
    ChosenActionPolicy,
    LoggingPolicy,
    logged_action_table,
)
from ope.policies.specs import (
    PolicySpec,
    candidates_with_specs,
    is_policy_spec,
    load_classifier,
    parse_policy_spec,
    policy_from_spec,
)
from ope.policies.table import read_policy_table, to_policy_table, write_policy_table

__all__ = [
    "PROBABILITY_TOLERANCE",
    "Policy",
    "PolicyDistribution",
    "TargetPropensities",
    "UniformPolicy",
    "EpsilonGreedyPolicy",
    "DeterministicPolicy",
    "SoftmaxPolicy",
    "ClassifierPolicy",
    "LoggingPolicy",
    "ChosenActionPolicy",
    "ArrayPolicy",
    "ActionTablePolicy",
    "logged_action_table",
    "PolicySpec",
    "is_policy_spec",
    "parse_policy_spec",
    "policy_from_spec",
    "load_classifier",
    "candidates_with_specs",
    "target_propensities",
    "logging_distribution",
    "read_policy_table",
    "write_policy_table",
    "to_policy_table",
]
