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

import numpy as np
import pandas as pd

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
    "ope.BottouInterval",
    "ope.CandidateProbabilities",
    "ope.CascadeIPS",
    "ope.CascadeIPS.estimate",
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
    "ope.ClippedIPS.reward_origin",
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
    "ope.Diagnostics.report",
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
    "ope.Evaluation.with_provenance",
    "ope.Evaluation.write_report",
    "ope.FittedQ",
    "ope.FittedRewardModel",
    "ope.FittedRewardModel.predict",
    "ope.FittedRewardModel.predict_policy",
    "ope.IPS",
    "ope.IPS.estimate",
    "ope.IPS.moment_statistic",
    "ope.IPS.reward_origin",
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
    "ope.SNDR",
    "ope.SNDR.estimate",
    "ope.SNIPS",
    "ope.SNIPS.estimate",
    "ope.SNIPS.moment_statistic",
    "ope.SNIPS.reward_origin",
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
    "ope.evaluate_distributed",
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
    "ope.report.write_report",
    "ope.report.render_report",
    "ope.report.check_report_destination",
    "ope.simulate.BundledSample",
    "ope.simulate.ContextualBandit",
    "ope.simulate.ContextualBandit.expected_reward",
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
    "ope.simulate.TabularMDP.true_value",)

#: Registered entry points that take no user input although public: result objects that ope
#: builds (the user reads them) and constructors ope calls on validated parts.
NOT_USER_INPUT: Final[Mapping[str, str]] = {
    **{
        f"ope.{name}": "a result ope builds and the user reads"
        for name in (
            "BanditLogs", "Trajectories", "PairedReplays", "ValidationReport", "LogScan",
            "ConfidenceInterval", "BottouInterval", "TargetPropensities", "Estimate",
            "MomentStats", "FittedRewardModel", "Certificate", "CandidateProbabilities",
            "FittedQ", "PropensityCheck", "LoggerCheck", "SlateProbabilities", "PairedEffect",
            "Diagnostics", "Evaluation", "SlateLogs",
        )
    },
    "ope.intervals.SharedBootstrap": "a result ope builds and the user reads",
    "ope.diagnostics.PolicyRow": "a row of Diagnostics, built by ope",
    "ope.diagnostics.SegmentRow": "a row of Diagnostics, built by ope",
    "ope.simulate.BundledSample": "a result of ope.load_sample",
    "ope.BanditLogs.from_validated": "ope's reader calls it on rows it validated",
    "ope.ValidationReport.from_masks": "ope's validators call it on their masks",
    "ope.ValidationReport.merge": "ope merges the reports of its own batches",
    "ope.Evaluation.from_statistics": "ope's streamed and distributed paths call it",
    "ope.MomentStats.merge": "merges statistics ope computed",
    "ope.MomentStats.merge_all": "merges statistics ope computed",
    "ope.SNIPS.moment_statistic": "called by MomentStats on its own moments",
}

#: The subcommands of ``ope``; each is an entry point with the flags of its parser.
CLI_SUBCOMMANDS: Final = (
    "validate", "evaluate", "diagnose", "learn", "paired", "import", "action-table", "report",
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
        if (argument.startswith(text) if kind == "prefix" else argument.endswith(text)):
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
            obj = (inspect.getattr_static(obj, attr) if isinstance(obj, type)
                   else getattr(obj, attr))
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
        p for p, par in params.items()
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
                func = (member.__func__ if isinstance(member, (classmethod, staticmethod))
                        else member)
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
    cli = importlib.import_module("ope.cli")
    # the parser is built by a function ope.cli keeps private; read, never modified
    return getattr(cli, "_build_parser")()


def _parser_subcommands() -> dict[str, argparse.ArgumentParser]:
    for action in _parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


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
        elif (key in ("--out", "--report", "--policies", "logs", "src", "replays")
              or "FILE" in metavar or metavar.endswith((".parquet", ".csv", ".html"))):
            term = "path"
        else:
            term = "text"
        flags[key] = term
    return flags


# ============================================================================================
# minimal valid calls
# ============================================================================================
_N: Final = 60  # rows of the planted logs: enough for every estimator, fast


def _frame(seed: int = 0, n: int = _N) -> pd.DataFrame:
    """Bandit logs over 3 uniformly logged actions with one candidate ``target__greedy``."""
    gen = np.random.default_rng(seed)
    action = gen.integers(0, 3, n)
    return pd.DataFrame({
        "event_id": np.arange(n, dtype=np.int64),
        "action": action,
        "propensity": np.full(n, 1 / 3),
        "reward": gen.binomial(1, 0.3 + 0.2 * (action == 1)).astype(np.float64),
        "x0": gen.normal(size=n),
        "target__greedy": np.where(action == 1, 0.8, 0.1),
    })


def _parquet(tmp: Path) -> Path:
    path = tmp / "logs.parquet"
    if not path.exists():
        _frame().to_parquet(path)
    return path


def _paired_parquet(tmp: Path) -> Path:
    path = tmp / "replays.parquet"
    if not path.exists():
        gen = np.random.default_rng(1)
        pd.DataFrame({
            "pair_id": np.repeat(np.arange(20), 2),
            "arm": ["mem", "none"] * 20,
            "outcome": gen.binomial(1, 0.5, 40).astype(np.float64),
        }).to_parquet(path)
    return path


def _arrays() -> dict[str, np.ndarray]:
    f = _frame()
    return {
        "reward": f["reward"].to_numpy(),
        "logging_propensity": f["propensity"].to_numpy(),
        "target_propensity": f["target__greedy"].to_numpy(),
    }


def _estimate() -> Any:
    from ope.estimators import IPS

    a = _arrays()
    return IPS().estimate(a["reward"], a["logging_propensity"], a["target_propensity"])


def _evaluation() -> Any:
    from ope.evaluation import evaluate

    return evaluate(_frame(), ["greedy"], estimators=("ips", "snips"))


def _call(target: str | Callable[..., Any], *args: Any, **kwargs: Any) -> Call:
    func = resolve(target) if isinstance(target, str) else target
    return Call(func, dict(kwargs), tuple(args))


def _estimator_estimate(cls: str, **settings: Any) -> Callable[[Path], Call]:
    def build(tmp: Path) -> Call:
        a = _arrays()
        est = resolve(cls)(**settings)
        kwargs: dict[str, Any] = {"reward": a["reward"]}
        params = inspect.signature(est.estimate).parameters
        if "target_propensity" in params:
            kwargs["logging_propensity"] = a["logging_propensity"]
            kwargs["target_propensity"] = a["target_propensity"]
        for q in ("q_logged", "q_target"):
            if q in params:
                kwargs[q] = np.full(_N, 0.4)
        return Call(est.estimate, kwargs)
    return build


_VALID: Final[dict[str, Callable[[Path], Any]]] = {
    "ope.read_logs": lambda tmp: _call("ope.read_logs", source=_parquet(tmp), on_invalid="raise"),
    "ope.scan_logs": lambda tmp: _call("ope.scan_logs", source=_parquet(tmp), batch_size=32),
    "ope.read_paired": lambda tmp: _call("ope.read_paired", source=_paired_parquet(tmp)),
    "ope.evaluate": lambda tmp: _call(
        "ope.evaluate", logs=_frame(), policies=["greedy"], estimators=("ips", "snips"),
        ci="normal", confidence_level=0.95, reward_range=(0.0, 1.0), max_weight=None,
        n_resamples=None, rng=0, by=None, weight_column=None),
    "ope.diagnose": lambda tmp: _call(
        "ope.diagnose", logs=_frame(), policies=["greedy"], max_weight=None,
        reward_range=(0.0, 1.0), confidence_level=0.95),
    "ope.diagnose_arrays": lambda tmp: _call(
        "ope.diagnose_arrays", **_arrays(), policy_names=["greedy"], confidence_level=0.95,
        reward_range=(0.0, 1.0)),
    "ope.get_estimator": lambda tmp: _call("ope.get_estimator", name="clipped_ips",
                                           max_weight=10.0),
    "ope.importance_weights": lambda tmp: _call(
        "ope.importance_weights", logging_propensity=_arrays()["logging_propensity"],
        target_propensity=_arrays()["target_propensity"], max_weight=10.0),
    "ope.logging_value": lambda tmp: _call("ope.logging_value", reward=_arrays()["reward"],
                                           reward_range=(0.0, 1.0)),
    "ope.ClippedIPS": lambda tmp: _call("ope.ClippedIPS", max_weight=10.0),
    "ope.SwitchDR": lambda tmp: _call("ope.SwitchDR", tau=10.0),
    "ope.DRos": lambda tmp: _call("ope.DRos", shrinkage=1.0),
    "ope.IPS.estimate": _estimator_estimate("ope.IPS"),
    "ope.SNIPS.estimate": _estimator_estimate("ope.SNIPS"),
    "ope.ClippedIPS.estimate": _estimator_estimate("ope.ClippedIPS", max_weight=10.0),
    "ope.DM.estimate": _estimator_estimate("ope.DM"),
    "ope.DR.estimate": _estimator_estimate("ope.DR"),
    "ope.SNDR.estimate": _estimator_estimate("ope.SNDR"),
    "ope.Estimate.ci": lambda tmp: Call(_estimate().ci, {
        "confidence_level": 0.9, "method": "normal"}),
    "ope.Estimate.with_ci": lambda tmp: Call(_estimate().with_ci, {
        "confidence_level": 0.9, "method": "normal"}),
    "ope.Evaluation.table": lambda tmp: Call(_evaluation().table, {"by": None}),
    "ope.Evaluation.compare": lambda tmp: Call(_evaluation().compare, {
        "policy": "greedy", "estimator": "ips"}),
    "ope.Evaluation.write_report": lambda tmp: Call(_evaluation().write_report, {
        "path": tmp / "report.html", "title": "t", "overwrite": True}),
    "ope.compare": lambda tmp: _call("ope.compare", a=_estimate(), b=_estimate(),
                                     confidence_level=0.95),
    "ope.intervals.normal_interval": lambda tmp: _call(
        "ope.intervals.normal_interval", value=0.5, std_error=0.1, confidence_level=0.95),
    "ope.intervals.t_interval": lambda tmp: _call(
        "ope.intervals.t_interval", value=0.5, std_error=0.1, n=30, confidence_level=0.95),
    "ope.intervals.hoeffding_interval": lambda tmp: _call(
        "ope.intervals.hoeffding_interval", mean=0.5, n=30, low=0.0, high=1.0,
        confidence_level=0.95),
    "ope.intervals.bernstein_interval": lambda tmp: _call(
        "ope.intervals.bernstein_interval", mean=0.5, variance=0.1, n=30, low=0.0, high=1.0,
        confidence_level=0.95),
    "ope.intervals.default_n_resamples": lambda tmp: _call(
        "ope.intervals.default_n_resamples", confidence_level=0.95),
    "ope.intervals.resample_counts": lambda tmp: _call(
        "ope.intervals.resample_counts", n=20, n_resamples=5, rng=0),
    "ope.intervals.betting_interval": lambda tmp: _call(
        "ope.intervals.betting_interval", weight=np.ones(_N), reward=_arrays()["reward"],
        reward_range=(0.0, 1.0), confidence_level=0.95),
    "ope.intervals.empirical_likelihood_interval": lambda tmp: _call(
        "ope.intervals.empirical_likelihood_interval", weight=np.ones(_N),
        reward=_arrays()["reward"], reward_range=(0.0, 1.0), weight_bound=10.0,
        confidence_level=0.95),
    "ope.intervals.betting_lower_bound": lambda tmp: _call(
        "ope.intervals.betting_lower_bound", values=_arrays()["reward"], low=0.0, high=1.0,
        confidence_level=0.95),
    "ope.simulate.ContextualBandit": lambda tmp: _call(
        "ope.simulate.ContextualBandit", n_actions=3, n_features=2, seed=0),
    "ope.UniformPolicy.propensity": lambda tmp: Call(
        resolve("ope.UniformPolicy")(actions=[0, 1, 2]).propensity,
        {"logs": resolve("ope.read_logs")(_frame())}),
    "ope.selection_regret": lambda tmp: _call(
        "ope.selection_regret", true_values=np.array([1.0, 0.5]), scores=np.array([0.9, 0.2]), k=1),
    "ope.rank_correlation": lambda tmp: _call(
        "ope.rank_correlation", true_values=np.array([1.0, 0.5, 0.1]),
        scores=np.array([0.9, 0.2, 0.3])),
    "ope.paired_effect": lambda tmp: _call(
        "ope.paired_effect", replays=_paired_parquet(tmp), treated="mem", control="none",
        confidence_level=0.95),
    "ope.load_sample": lambda tmp: _call("ope.load_sample", columns=None),
    "ope.UniformPolicy": lambda tmp: _call("ope.UniformPolicy", actions=[0, 1, 2]),
    "ope.policies.is_policy_spec": lambda tmp: _call("ope.policies.is_policy_spec",
                                                     text="greedy"),
    "ope.policies.parse_policy_spec": lambda tmp: _call(
        "ope.policies.parse_policy_spec", text="u=uniform"),
    "ope.write_policy_table": lambda tmp: _call(
        "ope.write_policy_table", table=pd.DataFrame({
            "event_id": [0, 0], "policy": ["p", "p"], "action": [0, 1],
            "probability": [0.5, 0.5]}), path=tmp / "policy.parquet"),
    "ope.report.check_report_destination": lambda tmp: _call(
        "ope.report.check_report_destination", path=tmp / "r.html", overwrite=True),
}


def entries() -> Iterator[Entry]:
    """The Python entry points of :data:`REGISTERED`, each with its terms and valid call."""
    for name in REGISTERED:
        obj = resolve(name)
        terms = {arg: term_of(arg) for arg in _arguments(obj)}
        yield Entry(name=name, terms=terms, valid=_VALID.get(name),
                    skip=NOT_USER_INPUT.get(name))


# ----------------------------- command line -------------------------------------------------
def _cli_valid(sub: str) -> Callable[[Path], list[str]] | None:
    common = {
        "validate": lambda tmp: ["validate", str(_parquet(tmp))],
        "evaluate": lambda tmp: ["evaluate", str(_parquet(tmp)), "--policy", "greedy",
                                 "--estimator", "ips", "--confidence-level", "0.9"],
        "diagnose": lambda tmp: ["diagnose", str(_parquet(tmp)), "--policy", "greedy"],
        "paired": lambda tmp: ["paired", str(_paired_parquet(tmp)), "--treated", "mem",
                               "--control", "none"],
        "report": lambda tmp: ["report", str(_parquet(tmp)), "--policy", "greedy",
                               "--estimator", "ips", "--out", str(tmp / "cli.html"),
                               "--force"],
    }
    return common.get(sub)


def cli_entries() -> Iterator[Entry]:
    """One entry per subcommand of :data:`CLI_SUBCOMMANDS`, its flags read from the parser."""
    for sub in CLI_SUBCOMMANDS:
        yield Entry(name=f"ope {sub}", terms=cli_flags(sub), valid=_cli_valid(sub), cli=True)
