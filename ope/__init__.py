"""ope: off-policy evaluation of logged policies.

How would a candidate policy have done on the traffic we logged, how sure are we, and where can
the logs not tell us? The public names live in this flat namespace; the modules behind them are
named by concept (``ope.io``, ``ope.policies``, ``ope.estimators``, ``ope.intervals``, ...).

Submodules are imported on first use, so ``import ope`` stays fast.
"""

from __future__ import annotations

import importlib
from typing import Any

# the one place the version is written: pyproject.toml reads it (a literal, read without import)
__version__ = "0.1.0"

# public name -> module that defines it
_PUBLIC: dict[str, str] = {
    # errors and warnings
    "OPEError": "ope.exceptions",
    "ParameterError": "ope.exceptions",
    "SchemaError": "ope.exceptions",
    "ValidationError": "ope.exceptions",
    "DataFileError": "ope.exceptions",
    "OutputError": "ope.exceptions",
    "PolicyError": "ope.exceptions",
    "MissingBoundsError": "ope.exceptions",
    "EstimationError": "ope.exceptions",
    "MissingDependencyError": "ope.exceptions",
    "OPEWarning": "ope.exceptions",
    "OverlapWarning": "ope.exceptions",
    "SmallSampleWarning": "ope.exceptions",
    "DroppedRowsWarning": "ope.exceptions",
    # logs and reading
    "ValidationReport": "ope.logs",
    "BanditLogs": "ope.logs",
    "Trajectories": "ope.logs",
    "PairedReplays": "ope.logs",
    "read_logs": "ope.io",
    "scan_logs": "ope.io",
    "read_trajectories": "ope.io",
    "read_paired": "ope.io",
    "LogScan": "ope.io",
    "REJECTION_REASONS": "ope.schema",
    # results shared by intervals
    "ConfidenceInterval": "ope.intervals._types",
    "BottouInterval": "ope.intervals._types",
    # candidate policies
    "PolicyDistribution": "ope.policies",
    "TargetPropensities": "ope.policies",
    "Policy": "ope.policies",
    "UniformPolicy": "ope.policies",
    "EpsilonGreedyPolicy": "ope.policies",
    "DeterministicPolicy": "ope.policies",
    "SoftmaxPolicy": "ope.policies",
    "ClassifierPolicy": "ope.policies",
    "target_propensities": "ope.policies",
    "logging_distribution": "ope.policies",
    "read_policy_table": "ope.policies",
    "write_policy_table": "ope.policies",
    "to_policy_table": "ope.policies",
    # simulators and the bundled sample (environments stay under ope.simulate)
    "load_sample": "ope.simulate",
    # estimators, results, comparisons
    "DM": "ope.estimators",
    "IPS": "ope.estimators",
    "ClippedIPS": "ope.estimators",
    "SNIPS": "ope.estimators",
    "DR": "ope.estimators",
    "SNDR": "ope.estimators",
    "SwitchDR": "ope.estimators",
    "DRos": "ope.estimators",
    "MIPS": "ope.estimators",
    "SNMIPS": "ope.estimators",
    "MarginalizedDR": "ope.estimators",
    "OffCEM": "ope.estimators",
    # large catalogs: marginal weights over action embeddings and clusters
    "ActionEmbedding": "ope.marginal",
    "marginal_propensities": "ope.marginal",
    "embedding_sufficiency": "ope.marginal",
    "get_estimator": "ope.estimators",
    "estimate_many": "ope.estimators",
    "logging_value": "ope.estimators",
    "Estimate": "ope.results",
    "compare": "ope.results",
    "MomentStats": "ope.streaming",
    "importance_weights": "ope.weights",
    "factor_weights": "ope.weights",
    # reward models for DM / DR
    "RewardModel": "ope.reward_models",
    "FittedRewardModel": "ope.reward_models",
    "TwoStepRewardModel": "ope.reward_models",
    # policy learning and the safety gate
    "ConservativePolicyLearner": "ope.learning",
    "IPSPolicyLearner": "ope.learning",
    "DirectMethodPolicyLearner": "ope.learning",
    "SafetyGate": "ope.learning",
    "Certificate": "ope.learning",
    "certify": "ope.learning",
    "rank_policies": "ope.learning",
    "learn_from_logs": "ope.learning",
    "learner_policy_table": "ope.learning",
    "learner_policy_batches": "ope.learning",
    "write_learner_policy_table": "ope.learning",
    "CandidateProbabilities": "ope.learning",
    # multi-step trajectories
    "sequential_estimate": "ope.sequential",
    "evaluate_trajectories": "ope.sequential",
    "TrajectoryEvaluation": "ope.sequential",
    "fitted_q_evaluation": "ope.sequential",
    "FittedQ": "ope.sequential",
    # returns and advantages over episodes (truncation handled, never a silent zero)
    "discounted_returns": "ope.returns",
    "td_errors": "ope.returns",
    "lambda_returns": "ope.returns",
    "gae": "ope.returns",
    # importers of real log formats
    "read_obd": "ope.importers",
    "read_dsjson": "ope.importers",
    "from_bandit_feedback": "ope.importers",
    "to_bandit_feedback": "ope.importers",
    # estimated propensities and several loggers
    "estimate_propensities": "ope.propensity",
    "check_propensities": "ope.propensity",
    "PropensityCheck": "ope.propensity",
    "propensity_source": "ope.propensity",
    "check_loggers": "ope.loggers",
    "balanced_propensities": "ope.loggers",
    "evaluate_loggers": "ope.loggers",
    "LoggerCheck": "ope.loggers",
    # slates and positions
    "SlateLogs": "ope.slates",
    "slate_logs": "ope.slates",
    "SlateProbabilities": "ope.slates",
    "SlatePolicy": "ope.slates",
    "PlackettLuce": "ope.slates",
    "EnumeratedSlatePolicy": "ope.slates",
    "SlateIPS": "ope.slates",
    "IndependentIPS": "ope.slates",
    "CascadeIPS": "ope.slates",
    "CascadeDR": "ope.slates",
    "PseudoInverse": "ope.slates",
    "position_estimates": "ope.slates",
    "position_diagnostics": "ope.slates",
    "plackett_luce_from_table": "ope.slates",
    "evaluate_slates": "ope.slate_evaluation",
    "SlateEvaluation": "ope.slate_evaluation",
    # off-policy selection metrics (against known true values)
    "selection_regret": "ope.selection",
    "rank_correlation": "ope.selection",
    "approval_error_rates": "ope.selection",
    "selection_report": "ope.selection",
    # paired replays (counterfactual branches)
    "paired_effect": "ope.paired",
    "PairedEffect": "ope.paired",
    # overlap diagnostics
    "diagnose": "ope.diagnostics",
    "diagnose_arrays": "ope.diagnostics",
    "Diagnostics": "ope.diagnostics",
    # evaluation
    "evaluate_distributed": "ope.distributed",
    "evaluate_spark": "ope.spark",
    "evaluate": "ope.evaluation",
    "Evaluation": "ope.evaluation",
    "select_estimators": "ope.evaluation",
    "EstimatorChoice": "ope.evaluation",
    "tune_setting": "ope.evaluation",
    "SettingChoice": "ope.evaluation",
    "tune_embedding": "ope.evaluation",
    "EmbeddingChoice": "ope.evaluation",
    # outcome distributions
    "outcome_distribution": "ope.distribution",
    "return_distribution": "ope.distribution",
    # language-model and agent policies from token log-probabilities
    "read_sequences": "ope.sequences",
    "SequenceLogs": "ope.sequences",
    "evaluate_sequences": "ope.sequences",
    "SequenceEvaluation": "ope.sequences",
    "sequence_trajectories": "ope.sequences",
    "sequence_divergences": "ope.sequences",
    "SequenceDivergences": "ope.sequences",
    "audit_logprobs": "ope.sequences",
    "LogprobAudit": "ope.sequences",
    # continuous actions
    "read_continuous": "ope.continuous",
    "ContinuousLogs": "ope.continuous",
    "evaluate_continuous": "ope.continuous",
    "ContinuousEvaluation": "ope.continuous",
    # several outcomes
    "evaluate_outcomes": "ope.evaluation.outcomes",
    "guardrail_decision": "ope.guardrails",
    "GuardrailDecision": "ope.guardrails",
    "Guardrail": "ope.guardrails",
    # anytime-valid monitoring of a rollout
    "Monitor": "ope.monitor",
    "MonitorResult": "ope.monitor",
    "run_monitor": "ope.monitor",
    "OutcomeDistributions": "ope.distribution",
    "OutcomeDistribution": "ope.distribution",
}

# submodules reachable as attributes (``ope.simulate``)
_SUBMODULES = frozenset(
    {
        "exceptions",
        "logs",
        "io",
        "schema",
        "sequential",
        "returns",
        "paired",
        "selection",
        "slates",
        "importers",
        "propensity",
        "loggers",
        "streaming",
        "moments",
        "results",
        "testing",
        "policies",
        "simulate",
        "weights",
        "estimators",
        "intervals",
        "reward_models",
        "evaluation",
        "diagnostics",
        "distributed",
        "distribution",
        "guardrails",
        "monitor",
        "spark",
        "learning",
        "cli",
        "plots",
        "report",
    }
)

__all__ = sorted(_PUBLIC) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        value = importlib.import_module(f"ope.{name}")
        globals()[name] = value
        return value
    raise AttributeError(f"module 'ope' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC) | _SUBMODULES)
