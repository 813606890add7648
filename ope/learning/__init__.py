"""Policy learning from logged bandit feedback and the safe-deployment gate.

* :class:`ConservativePolicyLearner` maximizes a lower bound of a linear softmax policy's value
  (counterfactual risk minimization); :class:`IPSPolicyLearner` and
  :class:`DirectMethodPolicyLearner` are the baselines, all with the scikit-learn API.
* :func:`rank_policies` ranks candidate policies by a lower bound of their value;
  :class:`SafetyGate` / :func:`certify` approve a policy only when a held-out, finite-sample
  lower bound beats the logging policy or a threshold, and return a :class:`Certificate`.
* :func:`learn_from_logs` and :func:`learner_policy_table` (or, streaming,
  :func:`write_learner_policy_table`) connect the learners to validated logs and to
  ``ope evaluate --policies``; a policy spreads over each row's candidate set only, and actions
  can share parameters through their features, so catalogs of thousands of items are learnable.
"""

from __future__ import annotations

from ope.learning._gate import Certificate, SafetyGate, certify, rank_policies
from ope.learning._learners import (
    CandidateProbabilities,
    ConservativePolicyLearner,
    DirectMethodPolicyLearner,
    IPSPolicyLearner,
)
from ope.learning._logs import (
    learn_from_logs,
    learner_policy_batches,
    learner_policy_table,
    write_learner_policy_table,
)

__all__ = [
    "ConservativePolicyLearner",
    "IPSPolicyLearner",
    "DirectMethodPolicyLearner",
    "SafetyGate",
    "Certificate",
    "certify",
    "rank_policies",
    "learn_from_logs",
    "learner_policy_table",
    "learner_policy_batches",
    "write_learner_policy_table",
    "CandidateProbabilities",
]
