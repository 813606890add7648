"""Valid calls of one area (the conventions are in :mod:`ope._valid_calls`): the drivers
(``evaluate``, ``diagnose``, ``evaluate_distributed``, ``evaluate_spark``, loggers), the result objects' methods
(Estimate, Evaluation, Diagnostics, ...), the report."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import numpy as np


from ope._entrypoints import Call, resolve
from ope._valid_calls._base import (
    arrays,
    call,
    closing_figures,
    diagnostics,
    estimate,
    evaluation,
    frame,
    logger_frame,
    parquet,
    slate_frame,
    slate_policies,
)


def _slates() -> tuple[Any, Any]:
    """60 slates of 2 slots over 4 items (a long table, one row per slot: the harness varies
    its columns), and the environment they were logged in."""
    from ope.simulate import SlateEnvironment

    env = SlateEnvironment(n_items=4, slate_size=2, n_contexts=2, seed=0)
    return env, env.sample(60, rng=0).to_pandas()


def _position_call(name: str, **extra: Any) -> Callable[[Path], Call]:
    def build(tmp: Path) -> Call:
        env, logs = _slates()
        return Call(
            resolve(name),
            dict(logs=logs, target=env.policy("greedy"), logging=env.policy("logging"), **extra),
        )

    return build


def _report_diagnostics() -> Any:
    """Diagnostics without segments or bounds: the report draws its fewest figures (two), the
    cost of every report call (matplotlib's layout, about a second on a busy machine)."""
    from ope.diagnostics import diagnose

    return diagnose(frame(), ["greedy"])


def _distributed(**kwargs: Any) -> Any:
    """:func:`ope.evaluate_distributed` on Dask's synchronous scheduler (one thread, cheap)."""
    import dask

    from ope.distributed import evaluate_distributed

    with dask.config.set(scheduler="synchronous"):
        return evaluate_distributed(**kwargs)


def spark_unavailable() -> str | None:
    """Why :func:`ope.evaluate_spark` cannot run here (None when it can): pyspark or a Java
    runtime is missing."""
    import importlib.util
    import os
    import shutil

    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed (pip install 'ope-toolkit[spark]')"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "Spark needs a Java runtime: java is not on PATH and JAVA_HOME is unset"
    return None


def _spark(**kwargs: Any) -> Any:
    """:func:`ope.evaluate_spark` on the active Spark session, else a local[2] one (no UI, two
    shuffle partitions) whose Python workers run this interpreter."""
    import os
    import sys

    from pyspark.sql import SparkSession

    from ope.spark import evaluate_spark

    if SparkSession.getActiveSession() is None:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        session = (
            SparkSession.builder.master("local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate()
        )
        session.sparkContext.setLogLevel("ERROR")
    return evaluate_spark(**kwargs)


#: Entries whose valid call starts an engine (Spark's JVM, seconds per call): their contract
#: cases are slow tests, skipped with the reason the callable gives when the engine is missing.
ENGINES: Final[dict[str, Callable[[], str | None]]] = {"ope.evaluate_spark": spark_unavailable}


#: Registered name -> a factory of its minimal valid call (see :class:`ope._entrypoints.Call`).
def _choice() -> Any:
    from ope.evaluation import select_estimators

    return select_estimators(frame(), ["greedy"], n_splits=2, rng=0)


def _setting() -> Any:
    from ope.evaluation import tune_setting

    return tune_setting(frame(), "clipped_ips", ["greedy"], grid=(1.0, 10.0))


def _sensitivity() -> Any:
    from ope.diagnostics import sensitivity_arrays

    a = arrays()
    return sensitivity_arrays(
        a["reward"], a["logging_propensity"], a["target_propensity"], policy_names=["greedy"]
    )


def _distributions() -> Any:
    from ope.distribution import outcome_distribution

    return outcome_distribution(frame(), ["greedy"], weight_bound=3.0)


def _guarded_frame() -> Any:
    return frame().assign(cost=lambda f: 1.0 + 0.1 * f["action"])


def _sequence_frame() -> Any:
    """60 responses of a small token model, as a pandas frame (the harness varies columns)."""
    from ope.simulate import TokenModel

    env = TokenModel(n_prompts=2, vocab_size=3, max_length=4, seed=0)
    return env.sample(60, rng=0).to_pandas()


def _continuous_frame() -> Any:
    """400 rows of a small continuous-action bandit (one context column)."""
    from ope.simulate import ContinuousBandit

    return ContinuousBandit(n_features=1, seed=0).sample(400, rng=0).to_pandas()


def _continuous_logs() -> Any:
    from ope.continuous import read_continuous

    return read_continuous(_continuous_frame())


def _continuous_evaluation() -> Any:
    from ope.continuous import evaluate_continuous

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return evaluate_continuous(_continuous_logs(), ["optimal"], estimators=["snips"])


def _slate_evaluation() -> Any:
    from ope.slate_evaluation import evaluate_slates

    target, logging = slate_policies()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return evaluate_slates(slate_frame(), {"cand": target}, logging=logging)


def _sequences() -> Any:
    from ope.sequences import read_sequences

    return read_sequences(_sequence_frame())


def _divergences() -> Any:
    from ope.sequences import sequence_divergences

    return sequence_divergences(_sequences())


def _sequence_evaluation() -> Any:
    import warnings

    from ope.sequences import evaluate_sequences

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 60 rows: the small-sample notes are planted
        return evaluate_sequences(_sequences(), ["tuned"], estimators=["snips"])


def _audit() -> Any:
    from ope.sequences import audit_logprobs

    return audit_logprobs(_sequences(), on_policy="sampler")


def _guardrails() -> Any:  # its small-sample warnings are planted: 60 rows
    import warnings

    from ope.guardrails import guardrail_decision

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return guardrail_decision(_guarded_frame(), ["greedy"], guardrails=["cost:lower:0.5"])


def _later_batch() -> Any:
    """The logs of :func:`frame` that come after it: other rows, other event ids (a monitor
    refuses a batch whose ids an earlier look counted)."""
    later = frame(seed=1)
    later["event_id"] += len(later)
    return later


def _monitored() -> Any:
    from ope.monitor import Monitor

    mon = Monitor(["greedy"], reward_range=(0.0, 1.0))
    mon.update(frame())
    return mon


VALID: Final[dict[str, Callable[[Path], Call]]] = {
    "ope.Monitor": lambda tmp: call(
        "ope.Monitor",
        policies=["greedy"],
        reward_range=(0.0, 1.0),
        estimator="ips",
        method="betting",
        confidence_level=0.95,
        simultaneous=False,
        planned_rows=1000,
        context_columns=["x0"],
        reward_model=None,
        model_rows=1000,
        rng=0,
    ),
    "ope.Monitor.update": lambda tmp: Call(_monitored().update, {"logs": _later_batch()}),
    "ope.Monitor.from_state": lambda tmp: call(
        resolve("ope.Monitor").from_state, state=_monitored().state(), policies=["greedy"]
    ),
    "ope.MonitorResult.with_provenance": lambda tmp: Call(
        _monitored().result().with_provenance, {"seed": 0}
    ),
    "ope.run_monitor": lambda tmp: call(
        "ope.run_monitor",
        batches=[frame(), _later_batch()],
        policies=["greedy"],
        until_decided=False,
        reward_range=(0.0, 1.0),
    ),
    "ope.evaluate_outcomes": lambda tmp: call(
        "ope.evaluate_outcomes",
        logs=_guarded_frame(),
        policies=["greedy"],
        outcomes=["reward", "cost"],
        estimators=("ips", "snips"),
        confidence_level=0.95,
    ),
    "ope.guardrail_decision": lambda tmp: call(
        "ope.guardrail_decision",
        logs=_guarded_frame(),
        policies=["greedy"],
        primary="reward",
        guardrails=["cost:lower:0.5"],
        estimator="snips",
        confidence_level=0.95,
        correction="holm",
        weight_column=None,
    ),
    "ope.Guardrail": lambda tmp: call(
        "ope.Guardrail", outcome="latency_ms", direction="lower", margin=50.0
    ),
    "ope.GuardrailDecision.reason": lambda tmp: Call(_guardrails().reason, {"policy": "greedy"}),
    "ope.GuardrailDecision.with_provenance": lambda tmp: Call(
        _guardrails().with_provenance, {"seed": 0}
    ),
    "ope.read_continuous": lambda tmp: call(
        "ope.read_continuous",
        source=_continuous_frame(),
        action_column="action",
        density_column="density",
        reward_column="reward",
        weight_column=None,
        context_columns=["x0"],
        policies=["optimal"],
        on_invalid="raise",
    ),
    "ope.evaluate_continuous": lambda tmp: call(
        "ope.evaluate_continuous",
        logs=_continuous_frame(),
        policies=["optimal"],
        candidates={"fixed": np.zeros(400)},
        densities=None,
        kernel="epanechnikov",
        bandwidth="slope",
        tune_on="snips",
        reward_model=None,
        q_column=None,
        v_column=None,
        rng=0,
        on_invalid="raise",
    ),
    "ope.ContinuousLogs.with_candidates": lambda tmp: Call(
        _continuous_logs().with_candidates,
        {"candidates": {"fixed": np.zeros(400)}, "densities": None},
    ),
    "ope.ContinuousEvaluation.with_provenance": lambda tmp: Call(
        _continuous_evaluation().with_provenance, {"seed": 0}
    ),
    "ope.read_sequences": lambda tmp: call(
        "ope.read_sequences",
        source=_sequence_frame(),
        reward_column="reward",
        behavior_column="behavior_logprobs",
        policies=["tuned"],
    ),
    "ope.evaluate_sequences": lambda tmp: call(
        "ope.evaluate_sequences",
        logs=_sequence_frame(),
        policies=["tuned"],
        weighting="sequence",
        on_policy="sampler",
    ),
    "ope.sequence_trajectories": lambda tmp: call(
        "ope.sequence_trajectories", logs=_sequence_frame(), step_reward_column="step_rewards"
    ),
    "ope.sequence_divergences": lambda tmp: call(
        "ope.sequence_divergences", logs=_sequence_frame(), policies=["tuned"], weighting="sequence"
    ),
    "ope.audit_logprobs": lambda tmp: call(
        "ope.audit_logprobs", logs=_sequence_frame(), on_policy="sampler"
    ),
    "ope.SequenceLogs.log_weights": lambda tmp: Call(
        _sequences().log_weights, {"weighting": "length_normalized"}
    ),
    "ope.SequenceDivergences.with_provenance": lambda tmp: Call(
        _divergences().with_provenance, {"seed": 0}
    ),
    "ope.LogprobAudit.with_provenance": lambda tmp: Call(_audit().with_provenance, {"seed": 0}),
    "ope.SequenceEvaluation.with_provenance": lambda tmp: Call(
        _sequence_evaluation().with_provenance, {"seed": 0}
    ),
    "ope.outcome_distribution": lambda tmp: call(
        "ope.outcome_distribution",
        logs=frame(),
        policies=["greedy"],
        outcome="reward",
        estimator="ips",
        band="hoeffding",
        weight_bound=3.0,
        confidence_level=0.95,
        outcome_range=(0.0, 1.0),
        resolution=100,
        n_resamples=200,
        rng=0,
        weight_column=None,
    ),
    "ope.OutcomeDistributions.metrics": lambda tmp: Call(
        _distributions().metrics, {"metrics": ["quantile:0.5", "cvar:0.1"]}
    ),
    "ope.OutcomeDistributions.to_dict": lambda tmp: Call(
        _distributions().to_dict, {"metrics": ["cdf:0.5"]}
    ),
    "ope.OutcomeDistributions.with_provenance": lambda tmp: Call(
        _distributions().with_provenance, {"seed": 0}
    ),
    "ope.OutcomeDistribution.cdf_at": lambda tmp: Call(
        _distributions()["greedy"].cdf_at, {"t": np.array([0.0, 0.5])}
    ),
    "ope.OutcomeDistribution.exceedance": lambda tmp: Call(
        _distributions()["greedy"].exceedance, {"t": np.array([0.5])}
    ),
    "ope.OutcomeDistribution.quantile": lambda tmp: Call(
        _distributions()["greedy"].quantile, {"level": np.array([0.5, 0.9])}
    ),
    "ope.OutcomeDistribution.cvar": lambda tmp: Call(
        _distributions()["greedy"].cvar, {"level": 0.1, "tail": "upper"}
    ),
    "ope.evaluate": lambda tmp: call(
        "ope.evaluate",
        logs=frame(),
        policies=["greedy"],
        estimators=("ips", "snips"),
        ci="normal",
        confidence_level=0.95,
        reward_range=(0.0, 1.0),
        max_weight=None,
        n_resamples=None,
        rng=0,
        by=None,
        weight_column=None,
    ),
    "ope.diagnose": lambda tmp: call(
        "ope.diagnose",
        logs=frame(),
        policies=["greedy"],
        max_weight=None,
        reward_range=(0.0, 1.0),
        confidence_level=0.95,
        sensitivity="auto",
    ),
    "ope.diagnose_arrays": lambda tmp: call(
        "ope.diagnose_arrays",
        **arrays(),
        policy_names=["greedy"],
        confidence_level=0.95,
        reward_range=(0.0, 1.0),
        sensitivity=True,
    ),
    "ope.diagnostics.pareto_k": lambda tmp: call(
        "ope.diagnostics.pareto_k",
        weights=arrays()["target_propensity"] / arrays()["logging_propensity"],
    ),
    "ope.select_estimators": lambda tmp: call(
        "ope.select_estimators",
        logs=frame(),
        policies=["greedy"],
        candidates=("ips", "snips"),
        validator="ips",
        n_splits=2,
        train_share=0.5,
        rng=0,
    ),
    "ope.EstimatorChoice.estimator_for": lambda tmp: Call(
        _choice().estimator_for, {"policy": "greedy"}
    ),
    "ope.EstimatorChoice.reason": lambda tmp: Call(_choice().reason, {"policy": "greedy"}),
    "ope.EstimatorChoice.with_provenance": lambda tmp: Call(_choice().with_provenance, {"seed": 0}),
    "ope.tune_setting": lambda tmp: call(
        "ope.tune_setting",
        logs=frame(),
        estimator="clipped_ips",
        policies=["greedy"],
        grid=(1.0, 10.0),
        delta=0.1,
        rng=0,
    ),
    "ope.SettingChoice.value_for": lambda tmp: Call(_setting().value_for, {"policy": "greedy"}),
    "ope.SettingChoice.with_provenance": lambda tmp: Call(_setting().with_provenance, {"seed": 0}),
    "ope.diagnostics.sensitivity": lambda tmp: call(
        "ope.diagnostics.sensitivity",
        logs=frame(),
        policies=["greedy"],
        gammas=(1.0, 2.0),
        estimator="snips",
        confidence_level=0.95,
        weight_column=None,
    ),
    "ope.diagnostics.sensitivity_arrays": lambda tmp: call(
        "ope.diagnostics.sensitivity_arrays",
        **arrays(),
        policy_names=["greedy"],
        gammas=(1.0, 2.0),
        estimator="ips",
        confidence_level=0.9,
        sampling_weight=None,
    ),
    "ope.diagnostics.msm_weight_range": lambda tmp: call(
        "ope.diagnostics.msm_weight_range",
        propensity=arrays()["logging_propensity"],
        gamma=2.0,
    ),
    "ope.diagnostics.Sensitivity.gamma_star": lambda tmp: Call(
        _sensitivity().gamma_star, {"policy": "greedy"}
    ),
    "ope.diagnostics.Sensitivity.note": lambda tmp: Call(_sensitivity().note, {"policy": "greedy"}),
    "ope.diagnostics.Sensitivity.with_provenance": lambda tmp: Call(
        _sensitivity().with_provenance, {"seed": 0}
    ),
    "ope.Estimate.ci": lambda tmp: Call(
        estimate().ci, {"confidence_level": 0.9, "method": "normal"}
    ),
    "ope.Estimate.with_ci": lambda tmp: Call(
        estimate().with_ci, {"confidence_level": 0.9, "ci": "normal"}
    ),
    "ope.Evaluation.table": lambda tmp: Call(evaluation().table, {"by": None}),
    "ope.Evaluation.compare": lambda tmp: Call(
        evaluation().compare, {"policy": "greedy", "estimator": "ips", "ci": "normal"}
    ),
    "ope.Evaluation.write_report": lambda tmp: Call(
        evaluation().write_report, {"path": tmp / "report.html", "title": "t", "overwrite": True}
    ),
    "ope.report.check_report_destination": lambda tmp: call(
        "ope.report.check_report_destination", path=tmp / "r.html", overwrite=True
    ),
    "ope.report.render_report": lambda tmp: call(
        "ope.report.render_report",
        evaluation=evaluation(),
        diagnostics=None,
        certificate=None,
        truth={"greedy": 0.4},
        provenance={"seed": 0},
        title="t",
        validation=None,
    ),
    "ope.report.write_report": lambda tmp: call(
        "ope.report.write_report",
        path=tmp / "report.html",
        evaluation=evaluation(),
        diagnostics=None,
        certificate=None,
        truth={"greedy": 0.4},
        provenance={"seed": 0},
        title="t",
        validation=None,
        overwrite=True,
    ),
    "ope.Diagnostics.clip_profile": lambda tmp: Call(
        diagnostics().clip_profile, {"policy": "greedy"}
    ),
    "ope.Diagnostics.coverage_matrix": lambda tmp: Call(
        diagnostics().coverage_matrix, {"policy": "greedy", "by": "seg", "value": "target_mass"}
    ),
    "ope.Diagnostics.interval": lambda tmp: Call(diagnostics().interval, {"policy": "greedy"}),
    "ope.Diagnostics.plan": lambda tmp: Call(
        diagnostics().plan, {"target_width": 0.2, "new_rows": 100}
    ),
    "ope.Diagnostics.plan_actions": lambda tmp: Call(
        diagnostics().plan_actions, {"target_width": 0.2, "new_rows": 100}
    ),
    "ope.Diagnostics.plot_coverage": lambda tmp: Call(
        closing_figures(diagnostics().plot_coverage), {"policy": "greedy", "ax": None, "by": "seg"}
    ),
    "ope.Diagnostics.plot_weights": lambda tmp: Call(
        closing_figures(diagnostics().plot_weights), {"policy": "greedy", "ax": None}
    ),
    "ope.Diagnostics.write_report": lambda tmp: Call(
        _report_diagnostics().write_report,
        {
            "path": tmp / "report.html",
            "evaluation": None,
            "certificate": None,
            "truth": None,
            "provenance": {"seed": 0},
            "title": "t",
            "validation": None,
            "overwrite": True,
        },
    ),
    "ope.Diagnostics.unsupported_mass": lambda tmp: Call(
        diagnostics().unsupported_mass, {"policy": "greedy"}
    ),
    "ope.Diagnostics.weight_histogram": lambda tmp: Call(
        diagnostics().weight_histogram, {"policy": "greedy"}
    ),
    "ope.Diagnostics.with_provenance": lambda tmp: Call(diagnostics().with_provenance, {}),
    "ope.Estimate.target_of": lambda tmp: Call(estimate().target_of, {"ci": "normal"}),
    "ope.Estimate.with_provenance": lambda tmp: Call(estimate().with_provenance, {}),
    "ope.Estimate.with_source": lambda tmp: (
        lambda est: Call(est.with_source, {"source": est.source})
    )(estimate()),
    "ope.Evaluation.comparisons": lambda tmp: Call(evaluation().comparisons, {"ci": "normal"}),
    "ope.Evaluation.plot": lambda tmp: Call(
        closing_figures(evaluation().plot), {"ax": None, "truth": {"greedy": 0.4}}
    ),
    "ope.Evaluation.summary": lambda tmp: Call(evaluation().summary, {"truth": {"greedy": 0.4}}),
    "ope.Evaluation.with_provenance": lambda tmp: Call(evaluation().with_provenance, {}),
    "ope.Evaluation.with_note": lambda tmp: Call(evaluation().with_note, {"note": "one day"}),
    "ope.LoggerCheck.with_provenance": lambda tmp: Call(
        resolve("ope.check_loggers")(logger_frame()).with_provenance, {}
    ),
    "ope.check_loggers": lambda tmp: call("ope.check_loggers", logs=logger_frame()),
    "ope.evaluate_loggers": lambda tmp: call(
        "ope.evaluate_loggers",
        logs=logger_frame(),
        policies=["greedy"],
        weighting="balanced",
        long_table=None,
        estimators=("ips", "snips"),
        ci="normal",
        confidence_level=0.95,
        reward_range=(0.0, 1.0),
        max_weight=None,
        context_columns=None,
        rng=0,
    ),
    "ope.evaluate_distributed": lambda tmp: Call(
        _distributed,
        dict(
            source=parquet(tmp),
            policies=["greedy"],
            estimators=("ips", "snips"),
            ci="normal",
            confidence_level=0.95,
            reward_range=(0.0, 1.0),
            max_weight=None,
            client=None,
            mapping=None,
            on_invalid="raise",
            columns=None,
            batch_size=1000,
            check_duplicates="global",
            weight_column=None,
            embedding=None,
        ),
    ),
    "ope.evaluate_spark": lambda tmp: Call(
        _spark,
        dict(
            source=parquet(tmp),
            policies=["greedy"],
            estimators=("ips", "snips"),
            ci="normal",
            confidence_level=0.95,
            reward_range=(0.0, 1.0),
            max_weight=None,
            spark=None,
            mapping=None,
            on_invalid="raise",
            columns=None,
            batch_size=1000,
            check_duplicates="global",
            weight_column=None,
        ),
    ),
    "ope.evaluate_slates": lambda tmp: call(
        "ope.evaluate_slates",
        logs=slate_frame(),
        candidates={"cand": slate_policies()[0]},
        policies=["cand"],
        estimators=["sips", "rips", "cdr"],
        logging=slate_policies()[1],
        cascade_model="table",
        product_logging=False,
        ci="normal",
        confidence_level=0.95,
        rng=0,
        mapping=None,
        position_base=0,
    ),
    "ope.SlateEvaluation.compare": lambda tmp: Call(
        _slate_evaluation().compare,
        {"policy": "cand", "baseline": "logging", "estimator": "rips", "ci": "normal"},
    ),
    "ope.SlateEvaluation.comparisons": lambda tmp: Call(
        _slate_evaluation().comparisons, {"ci": "normal"}
    ),
    "ope.SlateEvaluation.with_provenance": lambda tmp: Call(
        _slate_evaluation().with_provenance, {"seed": 0}
    ),
    "ope.plackett_luce_from_table": lambda tmp: call(
        "ope.plackett_luce_from_table",
        table={"context": [0, 0, 0], "item": [0, 1, 2], "score": [0.0, 1.0, 2.0]},
        slate_size=2,
        context="context",
        item="item",
        score="score",
        temperature=1.0,
    ),
    "ope.position_diagnostics": _position_call("ope.position_diagnostics"),
    "ope.position_estimates": _position_call("ope.position_estimates", self_normalized=False),
}

#: ``"<entry>::<argument>"`` -> how the contract breaks today.
KNOWN_BROKEN: Final[dict[str, str]] = {}
