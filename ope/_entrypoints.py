"""The registry of ope's public entry points: every callable that takes user input.

An entry point is a public function, a public class (its constructor), a public method of a
public class, or a subcommand of the ``ope`` command line. The registry says, for each one, the
glossary term of every argument (``reward``, ``propensity``, ``confidence_level``, ``rng``,
``path``, ``logs``, ...; see :data:`TERMS`) and, where one is written, a minimal valid call: a
factory that builds the arguments of a call that succeeds, so that a harness
(:func:`ope.testing.check_entry_point_contract`) can replace one argument at a time by a hostile
value.

Where the names come from:

* :data:`PUBLIC_NAMESPACES`: every name in the ``__all__`` of ``ope`` and of its public
  namespaces; exceptions and non-callables (constants) take no input and are left out;
  :data:`REGISTERED` must list every other one, and every public method (own or inherited) of a
  public class that takes an argument. :func:`unregistered` names those it misses.
* the command line: the subcommands of the parser of :mod:`ope.cli`, read at run time with
  their flags (:func:`cli_flags`); :data:`CLI_SUBCOMMANDS` must list every subcommand.

The term of an argument comes from its name (:func:`term_of`): an exact glossary name first,
then a rule on the name (``n_*`` is a ``count``, ``*_column`` a ``column``, ...), and
``object`` otherwise.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final


__all__ = [
    "PUBLIC_NAMESPACES",
    "REGISTERED",
    "NOT_USER_INPUT",
    "CLI_SUBCOMMANDS",
    "TERMS",
    "Call",
    "Entry",
    "term_of",
    "public_entry_points",
    "unregistered",
    "entries",
    "cli_entries",
    "cli_flags",
    "cli_positionals",
    "resolve",
]

#: The namespaces whose ``__all__`` is the public surface.
PUBLIC_NAMESPACES: Final = (
    "ope",
    "ope.policies",
    "ope.importers",
    "ope.intervals",
    "ope.sequential",
    "ope.learning",
    "ope.diagnostics",
    "ope.report",
    "ope.simulate",
)

#: Every public entry point, by the name it is first reached under (namespace order above).
REGISTERED: Final[tuple[str, ...]] = (
    "ope.BanditLogs",
    "ope.BanditLogs.column",
    "ope.BanditLogs.from_validated",
    "ope.BanditLogs.with_action_features",
    "ope.BottouInterval",
    "ope.CandidateProbabilities",
    "ope.CascadeIPS",
    "ope.CascadeIPS.estimate",
    "ope.CascadeDR",
    "ope.CascadeDR.estimate",
    "ope.Certificate",
    "ope.Certificate.from_dict",
    "ope.Certificate.from_json",
    "ope.Certificate.to_json",
    "ope.Certificate.with_provenance",
    "ope.ClassifierPolicy",
    "ope.ClassifierPolicy.distribution",
    "ope.ClassifierPolicy.propensity",
    "ope.ClippedIPS",
    "ope.ClippedIPS.estimate",
    "ope.ClippedIPS.moment_statistic",
    "ope.ClippedIPS.paired_logging_sd",
    "ope.ClippedIPS.reward_origin",
    "ope.ClippedIPS.row_source",
    "ope.ConfidenceInterval",
    "ope.ConservativePolicyLearner",
    "ope.ConservativePolicyLearner.fit",
    "ope.ConservativePolicyLearner.fit_logs",
    "ope.ConservativePolicyLearner.get_params",
    "ope.ConservativePolicyLearner.iter_candidates",
    "ope.ConservativePolicyLearner.predict",
    "ope.ConservativePolicyLearner.predict_candidates",
    "ope.ConservativePolicyLearner.predict_proba",
    "ope.ConservativePolicyLearner.score",
    "ope.ConservativePolicyLearner.set_params",
    "ope.ConservativePolicyLearner.target_propensity",
    "ope.evaluate_outcomes",
    "ope.guardrail_decision",
    "ope.Guardrail",
    "ope.GuardrailDecision",
    "ope.GuardrailDecision.reason",
    "ope.GuardrailDecision.with_provenance",
    "ope.Monitor",
    "ope.Monitor.from_state",
    "ope.Monitor.update",
    "ope.MonitorResult",
    "ope.MonitorResult.with_provenance",
    "ope.LogprobAudit",
    "ope.LogprobAudit.with_provenance",
    "ope.SequenceDivergences",
    "ope.SequenceDivergences.with_provenance",
    "ope.SequenceEvaluation",
    "ope.SequenceEvaluation.with_provenance",
    "ope.ContinuousEvaluation",
    "ope.ContinuousEvaluation.with_provenance",
    "ope.ContinuousLogs",
    "ope.ContinuousLogs.with_candidates",
    "ope.evaluate_continuous",
    "ope.read_continuous",
    "ope.SequenceLogs",
    "ope.SequenceLogs.log_weights",
    "ope.audit_logprobs",
    "ope.evaluate_sequences",
    "ope.read_sequences",
    "ope.sequence_divergences",
    "ope.sequence_trajectories",
    "ope.outcome_distribution",
    "ope.OutcomeDistributions",
    "ope.OutcomeDistributions.metrics",
    "ope.OutcomeDistributions.to_dict",
    "ope.OutcomeDistributions.with_provenance",
    "ope.OutcomeDistribution",
    "ope.OutcomeDistribution.cdf_at",
    "ope.OutcomeDistribution.exceedance",
    "ope.OutcomeDistribution.quantile",
    "ope.OutcomeDistribution.cvar",
    "ope.ActionEmbedding",
    "ope.ActionEmbedding.restricted",
    "ope.tune_embedding",
    "ope.EmbeddingChoice",
    "ope.EmbeddingChoice.value_for",
    "ope.EmbeddingChoice.embedding_for",
    "ope.EmbeddingChoice.with_provenance",
    "ope.MIPS",
    "ope.MIPS.estimate",
    "ope.MIPS.moment_statistic",
    "ope.MIPS.paired_logging_sd",
    "ope.MIPS.reward_origin",
    "ope.MIPS.row_source",
    "ope.MarginalizedDR",
    "ope.MarginalizedDR.estimate",
    "ope.OffCEM",
    "ope.OffCEM.estimate",
    "ope.SNMIPS",
    "ope.SNMIPS.estimate",
    "ope.SNMIPS.moment_statistic",
    "ope.SNMIPS.paired_logging_sd",
    "ope.SNMIPS.reward_origin",
    "ope.SNMIPS.row_source",
    "ope.embedding_sufficiency",
    "ope.marginal_propensities",
    "ope.DM",
    "ope.DM.estimate",
    "ope.DR",
    "ope.DR.estimate",
    "ope.DRos",
    "ope.DRos.estimate",
    "ope.DeterministicPolicy",
    "ope.DeterministicPolicy.distribution",
    "ope.DeterministicPolicy.propensity",
    "ope.Diagnostics",
    "ope.Diagnostics.clip_profile",
    "ope.Diagnostics.coverage_matrix",
    "ope.Diagnostics.interval",
    "ope.Diagnostics.plan",
    "ope.Diagnostics.plan_actions",
    "ope.Diagnostics.plot_coverage",
    "ope.Diagnostics.plot_weights",
    "ope.Diagnostics.write_report",
    "ope.Diagnostics.unsupported_mass",
    "ope.Diagnostics.weight_histogram",
    "ope.Diagnostics.with_provenance",
    "ope.DirectMethodPolicyLearner",
    "ope.DirectMethodPolicyLearner.fit",
    "ope.DirectMethodPolicyLearner.fit_logs",
    "ope.DirectMethodPolicyLearner.get_params",
    "ope.DirectMethodPolicyLearner.iter_candidates",
    "ope.DirectMethodPolicyLearner.predict",
    "ope.DirectMethodPolicyLearner.predict_candidates",
    "ope.DirectMethodPolicyLearner.predict_proba",
    "ope.DirectMethodPolicyLearner.predict_reward",
    "ope.DirectMethodPolicyLearner.score",
    "ope.DirectMethodPolicyLearner.set_params",
    "ope.DirectMethodPolicyLearner.target_propensity",
    "ope.EnumeratedSlatePolicy",
    "ope.EnumeratedSlatePolicy.slate_probabilities",
    "ope.EpsilonGreedyPolicy",
    "ope.EpsilonGreedyPolicy.distribution",
    "ope.EpsilonGreedyPolicy.propensity",
    "ope.Estimate",
    "ope.Estimate.ci",
    "ope.Estimate.target_of",
    "ope.Estimate.with_ci",
    "ope.Estimate.with_provenance",
    "ope.Estimate.with_source",
    "ope.Evaluation",
    "ope.Evaluation.compare",
    "ope.Evaluation.comparisons",
    "ope.Evaluation.from_statistics",
    "ope.Evaluation.plot",
    "ope.Evaluation.summary",
    "ope.Evaluation.table",
    "ope.Evaluation.with_note",
    "ope.Evaluation.with_provenance",
    "ope.Evaluation.write_report",
    "ope.FittedQ",
    "ope.FittedRewardModel",
    "ope.FittedRewardModel.predict",
    "ope.FittedRewardModel.predict_policy",
    "ope.IPS",
    "ope.IPS.estimate",
    "ope.IPS.moment_statistic",
    "ope.IPS.paired_logging_sd",
    "ope.IPS.reward_origin",
    "ope.IPS.row_source",
    "ope.IPSPolicyLearner",
    "ope.IPSPolicyLearner.fit",
    "ope.IPSPolicyLearner.fit_logs",
    "ope.IPSPolicyLearner.get_params",
    "ope.IPSPolicyLearner.iter_candidates",
    "ope.IPSPolicyLearner.predict",
    "ope.IPSPolicyLearner.predict_candidates",
    "ope.IPSPolicyLearner.predict_proba",
    "ope.IPSPolicyLearner.score",
    "ope.IPSPolicyLearner.set_params",
    "ope.IPSPolicyLearner.target_propensity",
    "ope.IndependentIPS",
    "ope.IndependentIPS.estimate",
    "ope.LogScan",
    "ope.LogScan.describe",
    "ope.LoggerCheck",
    "ope.LoggerCheck.with_provenance",
    "ope.MomentStats",
    "ope.MomentStats.estimates",
    "ope.MomentStats.from_arrays",
    "ope.MomentStats.from_outcomes",
    "ope.MomentStats.from_columns",
    "ope.MomentStats.logging_estimate",
    "ope.MomentStats.merge",
    "ope.MomentStats.merge_all",
    "ope.MomentStats.paired_with_logging",
    "ope.MomentStats.to_estimates",
    "ope.MomentStats.with_rows",
    "ope.PairedEffect",
    "ope.PairedEffect.with_provenance",
    "ope.PairedReplays",
    "ope.PairedReplays.column",
    "ope.PlackettLuce",
    "ope.PlackettLuce.prefix_probabilities",
    "ope.PlackettLuce.sample",
    "ope.PlackettLuce.slate_probabilities",
    "ope.Policy",
    "ope.Policy.distribution",
    "ope.Policy.propensity",
    "ope.PolicyDistribution",
    "ope.PolicyDistribution.probability",
    "ope.PolicyDistribution.reindex",
    "ope.PropensityCheck",
    "ope.PropensityCheck.with_provenance",
    "ope.PseudoInverse",
    "ope.PseudoInverse.estimate",
    "ope.RewardModel",
    "ope.RewardModel.fit",
    "ope.TwoStepRewardModel",
    "ope.TwoStepRewardModel.fit",
    "ope.SNDR",
    "ope.SNDR.estimate",
    "ope.SNIPS",
    "ope.SNIPS.estimate",
    "ope.SNIPS.moment_statistic",
    "ope.SNIPS.paired_logging_sd",
    "ope.SNIPS.reward_origin",
    "ope.SNIPS.row_source",
    "ope.SafetyGate",
    "ope.SafetyGate.certify",
    "ope.SlateIPS",
    "ope.SlateIPS.estimate",
    "ope.SlateLogs",
    "ope.SlatePolicy",
    "ope.SlatePolicy.slate_probabilities",
    "ope.SlateProbabilities",
    "ope.SoftmaxPolicy",
    "ope.SoftmaxPolicy.distribution",
    "ope.SoftmaxPolicy.propensity",
    "ope.SwitchDR",
    "ope.SwitchDR.estimate",
    "ope.TargetPropensities",
    "ope.Trajectories",
    "ope.Trajectories.column",
    "ope.TrajectoryEvaluation",
    "ope.TrajectoryEvaluation.compare",
    "ope.TrajectoryEvaluation.comparisons",
    "ope.TrajectoryEvaluation.with_provenance",
    "ope.UniformPolicy",
    "ope.UniformPolicy.distribution",
    "ope.UniformPolicy.propensity",
    "ope.ValidationReport",
    "ope.ValidationReport.failure_message",
    "ope.ValidationReport.format",
    "ope.ValidationReport.from_masks",
    "ope.ValidationReport.merge",
    "ope.ValidationReport.warn_dropped",
    "ope.approval_error_rates",
    "ope.balanced_propensities",
    "ope.certify",
    "ope.check_loggers",
    "ope.check_propensities",
    "ope.compare",
    "ope.diagnose",
    "ope.diagnose_arrays",
    "ope.discounted_returns",
    "ope.estimate_many",
    "ope.estimate_propensities",
    "ope.evaluate",
    "ope.select_estimators",
    "ope.tune_setting",
    "ope.SettingChoice",
    "ope.SettingChoice.value_for",
    "ope.SettingChoice.with_provenance",
    "ope.EstimatorChoice",
    "ope.EstimatorChoice.estimator_for",
    "ope.EstimatorChoice.reason",
    "ope.EstimatorChoice.with_provenance",
    "ope.evaluate_trajectories",
    "ope.evaluate_slates",
    "ope.SlateEvaluation",
    "ope.SlateEvaluation.compare",
    "ope.SlateEvaluation.comparisons",
    "ope.SlateEvaluation.with_provenance",
    "ope.plackett_luce_from_table",
    "ope.evaluate_distributed",
    "ope.evaluate_spark",
    "ope.evaluate_loggers",
    "ope.factor_weights",
    "ope.fitted_q_evaluation",
    "ope.from_bandit_feedback",
    "ope.gae",
    "ope.get_estimator",
    "ope.importance_weights",
    "ope.lambda_returns",
    "ope.learn_from_logs",
    "ope.learner_policy_batches",
    "ope.learner_policy_table",
    "ope.load_sample",
    "ope.logging_distribution",
    "ope.logging_value",
    "ope.paired_effect",
    "ope.position_diagnostics",
    "ope.position_estimates",
    "ope.propensity_source",
    "ope.rank_correlation",
    "ope.rank_policies",
    "ope.read_dsjson",
    "ope.read_logs",
    "ope.read_obd",
    "ope.read_paired",
    "ope.read_policy_table",
    "ope.read_trajectories",
    "ope.scan_logs",
    "ope.selection_regret",
    "ope.selection_report",
    "ope.sequential_estimate",
    "ope.sequential.episode_weights",
    "ope.return_distribution",
    "ope.run_monitor",
    "ope.slate_logs",
    "ope.target_propensities",
    "ope.td_errors",
    "ope.to_bandit_feedback",
    "ope.to_policy_table",
    "ope.write_learner_policy_table",
    "ope.write_policy_table",
    "ope.policies.LoggingPolicy",
    "ope.policies.LoggingPolicy.distribution",
    "ope.policies.LoggingPolicy.propensity",
    "ope.policies.ChosenActionPolicy",
    "ope.policies.ChosenActionPolicy.distribution",
    "ope.policies.ChosenActionPolicy.propensity",
    "ope.policies.ArrayPolicy",
    "ope.policies.ArrayPolicy.distribution",
    "ope.policies.ArrayPolicy.propensity",
    "ope.policies.ActionTablePolicy",
    "ope.policies.ActionTablePolicy.distribution",
    "ope.policies.ActionTablePolicy.propensity",
    "ope.policies.logged_action_table",
    "ope.policies.PolicySpec",
    "ope.policies.is_policy_spec",
    "ope.policies.parse_policy_spec",
    "ope.policies.policy_from_spec",
    "ope.policies.load_classifier",
    "ope.policies.candidates_with_specs",
    "ope.importers.iter_dsjson",
    "ope.importers.import_dsjson",
    "ope.intervals.bernstein_interval",
    "ope.intervals.betting_confidence_sequence",
    "ope.intervals.betting_interval",
    "ope.intervals.log_smoothing_interval",
    "ope.intervals.log_smoothing_lower_bound",
    "ope.intervals.betting_lower_bound",
    "ope.intervals.bootstrap_interval",
    "ope.intervals.SharedBootstrap",
    "ope.intervals.default_n_resamples",
    "ope.intervals.resample_counts",
    "ope.intervals.shared_bootstrap",
    "ope.intervals.bootstrap_replicates",
    "ope.intervals.bottou_interval",
    "ope.intervals.empirical_likelihood_estimate",
    "ope.intervals.empirical_likelihood_interval",
    "ope.intervals.hoeffding_interval",
    "ope.intervals.normal_interval",
    "ope.intervals.t_interval",
    "ope.diagnostics.PolicyRow",
    "ope.diagnostics.SegmentRow",
    "ope.diagnostics.TailFit",
    "ope.diagnostics.pareto_k",
    "ope.diagnostics.sensitivity",
    "ope.diagnostics.sensitivity_arrays",
    "ope.diagnostics.msm_weight_range",
    "ope.diagnostics.Sensitivity",
    "ope.diagnostics.Sensitivity.gamma_star",
    "ope.diagnostics.Sensitivity.note",
    "ope.diagnostics.Sensitivity.with_provenance",
    "ope.report.write_report",
    "ope.report.render_report",
    "ope.report.check_report_destination",
    "ope.simulate.BundledSample",
    "ope.simulate.CatalogBandit",
    "ope.simulate.CatalogBandit.action_features",
    "ope.simulate.CatalogBandit.embedding_distribution",
    "ope.simulate.CatalogBandit.expected_reward",
    "ope.simulate.CatalogBandit.policy_expected_reward",
    "ope.simulate.CatalogBandit.policy_table",
    "ope.simulate.CatalogBandit.sample",
    "ope.simulate.CatalogBandit.supported_value",
    "ope.simulate.CatalogBandit.true_value",
    "ope.simulate.CatalogBandit.true_value_by_segment",
    "ope.simulate.CatalogBandit.unsupported_mass",
    "ope.simulate.ConfoundedBandit",
    "ope.simulate.ConfoundedBandit.sample",
    "ope.simulate.ConfoundedBandit.true_value",
    "ope.simulate.ContextualBandit",
    "ope.simulate.ContextualBandit.expected_reward",
    "ope.simulate.ContextualBandit.outcome_cdf",
    "ope.simulate.ContextualBandit.policy_expected_reward",
    "ope.simulate.ContextualBandit.policy_table",
    "ope.simulate.ContextualBandit.sample",
    "ope.simulate.ContextualBandit.supported_value",
    "ope.simulate.ContextualBandit.true_value",
    "ope.simulate.ContextualBandit.true_value_by_segment",
    "ope.simulate.ContextualBandit.unsupported_mass",
    "ope.simulate.PairedReplaySimulator",
    "ope.simulate.PairedReplaySimulator.expected_outcome",
    "ope.simulate.PairedReplaySimulator.sample",
    "ope.simulate.PairedReplaySimulator.true_effect",
    "ope.simulate.PairedReplaySimulator.true_item_effects",
    "ope.simulate.PairedReplaySimulator.true_value",
    "ope.simulate.Recommendation",
    "ope.simulate.Recommendation.expected_reward",
    "ope.simulate.Recommendation.policy_expected_reward",
    "ope.simulate.Recommendation.policy_table",
    "ope.simulate.Recommendation.sample",
    "ope.simulate.Recommendation.supported_value",
    "ope.simulate.Recommendation.true_value",
    "ope.simulate.Recommendation.true_value_by_segment",
    "ope.simulate.Recommendation.unsupported_mass",
    "ope.simulate.SlateEnvironment",
    "ope.simulate.SlateEnvironment.click_probability",
    "ope.simulate.SlateEnvironment.expected_estimate",
    "ope.simulate.SlateEnvironment.policy",
    "ope.simulate.SlateEnvironment.sample",
    "ope.simulate.SlateEnvironment.sample_logs",
    "ope.simulate.SlateEnvironment.true_value",
    "ope.simulate.TabularMDP",
    "ope.simulate.TabularMDP.discounted_q_function",
    "ope.simulate.TabularMDP.expected_reward",
    "ope.simulate.TabularMDP.policy_table",
    "ope.simulate.TabularMDP.q_function",
    "ope.simulate.TabularMDP.sample",
    "ope.simulate.TabularMDP.true_value",
    "ope.simulate.ContinuousBandit",
    "ope.simulate.ContinuousBandit.expected_reward",
    "ope.simulate.ContinuousBandit.sample",
    "ope.simulate.ContinuousBandit.smoothed_value",
    "ope.simulate.ContinuousBandit.true_value",
    "ope.simulate.TokenModel",
    "ope.simulate.TokenModel.kl",
    "ope.simulate.TokenModel.policy_table",
    "ope.simulate.TokenModel.prompt_values",
    "ope.simulate.TokenModel.sample",
    "ope.simulate.TokenModel.true_value",
)

#: Registered entry points that take no user input although public: result objects that ope
#: builds (the user reads them) and constructors ope calls on validated parts.
NOT_USER_INPUT: Final[Mapping[str, str]] = {
    **{
        f"ope.{name}": "a result ope builds and the user reads"
        for name in (
            "BanditLogs",
            "Trajectories",
            "PairedReplays",
            "ValidationReport",
            "LogScan",
            "ConfidenceInterval",
            "BottouInterval",
            "TargetPropensities",
            "Estimate",
            "MomentStats",
            "FittedRewardModel",
            "Certificate",
            "CandidateProbabilities",
            "FittedQ",
            "PropensityCheck",
            "LoggerCheck",
            "SlateProbabilities",
            "PairedEffect",
            "Diagnostics",
            "Evaluation",
            "SlateLogs",
            "TrajectoryEvaluation",
            "EstimatorChoice",
            "SettingChoice",
            "EmbeddingChoice",
            "OutcomeDistributions",
            "OutcomeDistribution",
            "SequenceLogs",
            "SequenceDivergences",
            "SequenceEvaluation",
            "ContinuousLogs",
            "ContinuousEvaluation",
            "LogprobAudit",
            "GuardrailDecision",
            "MonitorResult",
            "SlateEvaluation",
        )
    },
    "ope.intervals.SharedBootstrap": "a result ope builds and the user reads",
    "ope.diagnostics.PolicyRow": "a row of Diagnostics, built by ope",
    "ope.diagnostics.SegmentRow": "a row of Diagnostics, built by ope",
    "ope.diagnostics.TailFit": "a result of ope.diagnostics.pareto_k",
    "ope.diagnostics.Sensitivity": "a result of ope.diagnostics.sensitivity",
    "ope.simulate.BundledSample": "a result of ope.load_sample",
    "ope.BanditLogs.from_validated": "ope's reader calls it on rows it validated",
    "ope.ValidationReport.from_masks": "ope's validators call it on their masks",
    "ope.ValidationReport.merge": "ope merges the reports of its own batches",
    "ope.Evaluation.from_statistics": "ope's streamed and distributed paths call it",
    "ope.MomentStats.merge": "merges statistics ope computed",
    "ope.MomentStats.merge_all": "merges statistics ope computed",
    "ope.SNIPS.moment_statistic": "called by MomentStats on its own moments",
    "ope.SNMIPS.moment_statistic": "called by MomentStats on its own moments",
    "ope.Policy": "a typing.Protocol: the interface a policy object follows, never called",
}

#: The subcommands of ``ope``; each is an entry point with the flags of its parser.
CLI_SUBCOMMANDS: Final = (
    "validate",
    "evaluate",
    "diagnose",
    "learn",
    "paired",
    "import",
    "action-table",
    "report",
    "tune",
    "monitor",
    "sequences",
    "continuous",
    "slates",
    "demo",
)

#: Glossary terms of arguments, by exact argument name.
TERMS: Final[Mapping[str, str]] = {
    "reward": "reward",
    "y": "reward",
    "propensity": "propensity",
    "logging_propensity": "propensity",
    "target_propensity": "target_propensity",
    "weight": "weight",
    "weights": "weight",
    "sampling_weight": "weight",
    "q_logged": "reward",
    "q_target": "reward",
    "confidence_level": "confidence_level",
    "max_weight": "max_weight",
    "weight_bound": "max_weight",
    "max_sampling_weight": "max_weight",
    "tau": "max_weight",
    "shrinkage": "positive_real",
    "temperature": "positive_real",
    "rng": "rng",
    "seed": "rng",
    "path": "path",
    "source": "path",
    "src": "path",
    "out": "path",
    "logs": "logs",
    "replays": "logs",
    "trajectories": "logs",
    "data": "logs",
    "policy_name": "policy_name",
    "name": "policy_name",
    "policy": "policy_name",
    "policy_names": "names",
    "names": "names",
    "title": "text",
    "text": "text",
    "label": "text",
    "reward_range": "reward_range",
    "ci": "choice",
    "method": "choice",
    "on_invalid": "choice",
    "bootstrap_method": "choice",
    "estimator": "choice",
    "estimators": "names",
    "policies": "names",
    "correction": "choice",
    "calibration": "choice",
    "objective": "choice",
    "outer": "choice",
    "gamma": "fraction",
    "lam": "fraction",
    "epsilon": "fraction",
    "certify_fraction": "fraction",
    "validation_fraction": "fraction",
    "termination_probability": "fraction",
    "logging_epsilon": "fraction",
    "n": "count",
    "k": "count",
    "horizon": "count",
    "value": "real",
    "std_error": "positive_real",
    "mean": "real",
    "variance": "positive_real",
    "low": "real",
    "high": "real",
    "target_width": "positive_real",
    "new_rows": "count",
    "overwrite": "flag",
    "normalize": "flag",
    "self_normalized": "flag",
    "mapping": "mapping",
    "columns": "columns",
    "context_columns": "columns",
    "feature_columns": "columns",
    "by": "columns",
    "actions": "actions",
    "action": "actions",
}

#: Rules on the argument name, in order, when no exact name matches: (kind, text, term).
_RULES: Final = (
    ("prefix", "n_", "count"),
    ("prefix", "max_", "positive_real"),
    ("prefix", "min_", "positive_real"),
    ("suffix", "_column", "column"),
    ("suffix", "_columns", "columns"),
    ("suffix", "_size", "count"),
    ("suffix", "_lines", "count"),
    ("suffix", "_bytes", "count"),
    ("suffix", "_range", "reward_range"),
    ("suffix", "_tolerance", "positive_real"),
    ("suffix", "_penalty", "positive_real"),
    ("suffix", "_propensity", "propensity"),
    ("suffix", "_weight", "weight"),
    ("suffix", "_name", "policy_name"),
    ("prefix", "with_", "flag"),
    ("prefix", "allow_", "flag"),
    ("prefix", "check_", "flag"),
)


def term_of(argument: str) -> str:
    """The glossary term of an argument name (``object`` when no name or rule matches).

    Examples
    --------
    >>> from ope._entrypoints import term_of
    >>> term_of("confidence_level"), term_of("n_resamples"), term_of("weight_column")
    ('confidence_level', 'count', 'column')
    """
    if argument in TERMS:
        return TERMS[argument]
    for kind, text, term in _RULES:
        if argument.startswith(text) if kind == "prefix" else argument.endswith(text):
            return term
    return "object"


@dataclass(frozen=True)
class Call:
    """One valid call: ``target(*args, **kwargs)`` succeeds. ``target`` may be a bound method."""

    target: Callable[..., Any]
    kwargs: dict[str, Any]
    args: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Entry:
    """One entry point: its name, the term of each argument, and its minimal valid call.

    ``valid(tmp)`` builds a :class:`Call` using the directory ``tmp`` for any file it needs;
    None when no minimal call is written yet (the harness then skips the entry and says so).
    For a CLI entry, ``valid(tmp)`` returns the argv (a list of str) of a successful run and
    ``terms`` maps each flag (``--confidence-level``) or positional (``LOGS``) to its term.
    """

    name: str
    terms: Mapping[str, str]
    valid: Callable[[Path], Any] | None = None
    skip: str | None = None  # why the entry takes no hostile value (NOT_USER_INPUT)
    cli: bool = False
    aliases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def resolve(name: str) -> Any:
    """The object of a registered name (``ope.Estimate.ci`` -> the function)."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = inspect.getattr_static(obj, attr) if isinstance(obj, type) else getattr(obj, attr)
            if isinstance(obj, (classmethod, staticmethod)):
                obj = obj.__func__
        return obj
    raise LookupError(name)


def _arguments(obj: Any) -> tuple[str, ...]:
    try:
        params = inspect.signature(obj).parameters
    except (TypeError, ValueError):
        return ()
    return tuple(
        p
        for p, par in params.items()
        if p not in ("self", "cls") and par.kind not in (par.VAR_POSITIONAL, par.VAR_KEYWORD)
    )


def public_entry_points() -> dict[str, Any]:
    """Every public callable taking input, walked from the ``__all__``s: name -> object.

    Exceptions and constants are left out; a class counts (its constructor), and so does each
    public method of a public class (own or inherited) that takes an argument.
    """
    seen: dict[int, str] = {}
    found: dict[str, Any] = {}
    for ns in PUBLIC_NAMESPACES:
        module = importlib.import_module(ns)
        for public in module.__all__:
            obj = getattr(module, public)
            if id(obj) in seen or not callable(obj):
                continue
            if isinstance(obj, type) and issubclass(obj, BaseException):
                continue
            seen[id(obj)] = qual = f"{ns}.{public}"
            found[qual] = obj
            if not isinstance(obj, type):
                continue
            for attr in dir(obj):
                if attr.startswith("_"):
                    continue
                member = inspect.getattr_static(obj, attr)
                func = (
                    member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
                )
                if inspect.isfunction(func) and _arguments(func):
                    found[f"{qual}.{attr}"] = func
    return found


def unregistered() -> list[str]:
    """Public entry points (and CLI subcommands, as ``ope <cmd>``) missing from the registry."""
    missing = [name for name in public_entry_points() if name not in REGISTERED]
    missing += [f"ope {cmd}" for cmd in _parser_subcommands() if cmd not in CLI_SUBCOMMANDS]
    return missing


# ============================================================================================
# the command line, read from its parser
# ============================================================================================
def _parser() -> argparse.ArgumentParser:
    from ope.cli import build_parser  # read, never modified

    return build_parser()


def _parser_subcommands() -> dict[str, argparse.ArgumentParser]:
    for action in _parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def cli_positionals(subcommand: str) -> list[str]:
    """The positionals of a subcommand, in the order argv gives them (their ``dest``)."""
    parser = _parser_subcommands()[subcommand]
    return [a.dest for a in parser._actions if not a.option_strings]


def cli_flags(subcommand: str) -> dict[str, str]:
    """Each flag (or positional, by its metavar/dest) of a subcommand -> its term.

    ``float`` flags are ``real``, ``int`` flags ``count``, flags with choices ``choice``, flags
    and positionals naming a file (``--out``, ``--report``, ``--policies``, ``LOGS``, ``src``)
    ``path``, switches ``flag``, the rest ``text``.
    """
    parser = _parser_subcommands()[subcommand]
    flags: dict[str, str] = {}
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        key = max(action.option_strings, key=len) if action.option_strings else action.dest
        metavar = str(action.metavar or "")
        if action.nargs == 0:
            term = "flag"
        elif action.choices is not None:
            term = "choice"
        elif action.type is float:
            term = "real"
        elif action.type is int:
            term = "count"
        elif (
            key in ("--out", "--report", "--policies", "logs", "src", "replays")
            or "FILE" in metavar
            or metavar.endswith((".parquet", ".csv", ".html"))
        ):
            term = "path"
        else:
            term = "text"
        flags[key] = term
    return flags


def entries() -> Iterator[Entry]:
    """The Python entry points of :data:`REGISTERED`, each with its terms and valid call.

    The minimal valid calls live in :mod:`ope._valid_calls`, one module per area.
    """
    from ope._valid_calls import valid_calls

    valid = valid_calls()
    for name in REGISTERED:
        obj = resolve(name)
        terms = {arg: term_of(arg) for arg in _arguments(obj)}
        yield Entry(name=name, terms=terms, valid=valid.get(name), skip=NOT_USER_INPUT.get(name))


# ----------------------------- command line -------------------------------------------------
def cli_entries() -> Iterator[Entry]:
    """One entry per subcommand of :data:`CLI_SUBCOMMANDS`, its flags read from the parser."""
    from ope._valid_calls import cli_runs

    runs = cli_runs()
    for sub in CLI_SUBCOMMANDS:
        yield Entry(name=f"ope {sub}", terms=cli_flags(sub), valid=runs.get(sub), cli=True)
