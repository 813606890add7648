"""Valid calls of one area (the conventions are in :mod:`ope._valid_calls`): learning and selection
(the policy learners, reward models, propensity estimation and checks, the safety gate and its
certificate, policy selection and ranking).

The learners are costly, so the planted logs here are small (:data:`N_LEARN` rows) and a fitted
learner, reward model or certificate is built once (:func:`functools.cache`) for the methods
that only read it; a method that fits (``fit``, ``fit_logs``, ``set_params``) gets a fresh
object per call. A constructor's valid call builds the object and uses it (a learner is fitted,
a gate certifies), so that a hostile setting meets the check that reads it, wherever it lives.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import numpy as np
import pandas as pd

from ope._entrypoints import Call, resolve
from ope._valid_calls._base import call, frame

#: Rows of the planted logs the learners fit on: a few per action, fast.
N_LEARN: Final = 24

#: The learner classes and their fit-time settings (as keywords, so that each is varied).
_LEARNERS: Final = {
    "ConservativePolicyLearner": dict(
        objective="clipped_ips",
        variance_penalty=1.0,
        max_weight="auto",
        l2_penalty=1e-3,
        reward_range=(0.0, 1.0),
        action_model="auto",
        select=None,
        validation_fraction=0.25,
        fit_intercept=True,
        max_iter=50,
        tol=1e-6,
        rng=0,
    ),
    "IPSPolicyLearner": dict(
        l2_penalty=1e-3,
        reward_range=(0.0, 1.0),
        action_model="auto",
        fit_intercept=True,
        max_iter=50,
        tol=1e-6,
    ),
    "DirectMethodPolicyLearner": dict(l2_penalty=1.0, reward_range=(0.0, 1.0)),
}


def _learn_frame() -> pd.DataFrame:
    return frame(seed=3, n=N_LEARN)


def _data() -> dict[str, Any]:
    """``X, y, reward, propensity`` of the planted logs (fresh arrays: a call may not keep
    another's)."""
    f = _learn_frame()
    return {
        "X": f[["x0"]].to_numpy(),
        "y": f["action"].to_numpy(),
        "reward": f["reward"].to_numpy(),
        "propensity": f["propensity"].to_numpy(),
    }


def _logs() -> Any:
    return resolve("ope.read_logs")(_learn_frame())


def _learner(cls: str, **settings: Any) -> Any:
    return resolve(f"ope.{cls}")(**{**_LEARNERS[cls], **settings})


@functools.cache
def _fitted(cls: str) -> Any:
    """A learner fitted on the planted logs, shared by the calls that only read it."""
    d = _data()
    return _learner(cls).fit(d["X"], d["y"], d["reward"], d["propensity"])


def _construct_and_fit(cls: str) -> Callable[..., Any]:
    """The constructor, then ``fit``: hyperparameters are checked where they are read."""

    def build_and_fit(**settings: Any) -> Any:
        d = _data()
        return resolve(f"ope.{cls}")(**settings).fit(d["X"], d["y"], d["reward"], d["propensity"])

    return build_and_fit


def _consumed(method: Callable[..., Any]) -> Callable[..., Any]:
    """A generator method, run to its end: what it yields is what the caller sees."""

    def run(**kwargs: Any) -> list[Any]:
        return list(method(**kwargs))

    return run


def _learner_calls(cls: str) -> dict[str, Callable[[Path], Call]]:
    name = f"ope.{cls}"
    d = _data
    calls: dict[str, Callable[[Path], Call]] = {
        name: lambda tmp: Call(_construct_and_fit(cls), dict(_LEARNERS[cls])),
        f"{name}.fit": lambda tmp: Call(
            _learner(cls).fit,
            {
                **d(),
                "candidates": None,
                "sample_weight": None,
                **({} if cls == "DirectMethodPolicyLearner" else {"action_features": None}),
            },
        ),
        f"{name}.fit_logs": lambda tmp: Call(
            _learner(cls).fit_logs,
            {
                "logs": _logs(),
                "context_columns": ["x0"],
                "action_features": None,
                "weight_column": None,
            },
        ),
        f"{name}.get_params": lambda tmp: Call(_fitted(cls).get_params, {"deep": True}),
        f"{name}.set_params": lambda tmp: Call(_learner(cls).set_params, {"l2_penalty": 0.5}),
        f"{name}.iter_candidates": lambda tmp: Call(
            _consumed(_fitted(cls).iter_candidates), {"X": d()["X"], "candidates": None}
        ),
        f"{name}.predict": lambda tmp: Call(
            _fitted(cls).predict, {"X": d()["X"], "candidates": None}
        ),
        f"{name}.predict_candidates": lambda tmp: Call(
            _fitted(cls).predict_candidates, {"X": d()["X"], "candidates": None}
        ),
        f"{name}.predict_proba": lambda tmp: Call(
            _fitted(cls).predict_proba, {"X": d()["X"], "candidates": None}
        ),
        f"{name}.score": lambda tmp: Call(
            _fitted(cls).score, {"X": d()["X"], "y": d()["y"], "sample_weight": None}
        ),
        f"{name}.target_propensity": lambda tmp: Call(
            _fitted(cls).target_propensity, {"X": d()["X"], "action": d()["y"], "candidates": None}
        ),
    }
    if cls == "DirectMethodPolicyLearner":
        calls[f"{name}.predict_reward"] = lambda tmp: Call(
            _fitted(cls).predict_reward, {"X": d()["X"]}
        )
    return calls


# ----------------------------------------------------------------------------- the gate
def _gate_settings() -> dict[str, Any]:
    return dict(
        reward_range=(0.0, 1.0),
        confidence_level=0.95,
        ci="auto",
        baseline="logging",
        max_weight=3.0,
        max_sampling_weight=None,
    )


def _certify_arguments() -> dict[str, Any]:
    d = _data()
    return {
        "policy": _fitted("IPSPolicyLearner"),
        "X": d["X"],
        "action": d["y"],
        "reward": d["reward"],
        "propensity": d["propensity"],
        "candidates": None,
        "name": "ips",
        "n_train": 10,
        "sampling_weight": None,
        "weight_name": None,
    }


def _gate_and_certify(**settings: Any) -> Any:
    """The gate's constructor, then ``certify``: its settings are checked where they are read."""
    return resolve("ope.SafetyGate")(**settings).certify(**_certify_arguments())


@functools.cache
def _certificate() -> Any:
    return resolve("ope.SafetyGate")(**_gate_settings()).certify(**_certify_arguments())


# ----------------------------------------------------------------------------- propensities
def _two_logger_logs() -> Any:
    f = _learn_frame()
    return resolve("ope.read_logs")(
        f.assign(
            logging_policy=np.where(np.arange(len(f)) % 2 == 0, "a", "b"),
            **{"propensity__a": f["propensity"], "propensity__b": f["propensity"]},
        )
    )


@functools.cache
def _propensity_check() -> Any:
    return resolve("ope.check_propensities")(_logs(), context_columns=["x0"], rng=0)


# ----------------------------------------------------------------------------- reward models
def _reward_model_settings() -> dict[str, Any]:
    return dict(
        estimator=None,
        n_folds=2,
        cross_fit=True,
        interactions=True,
        sparse=None,
        chunk_size=1024,
        rng=0,
        action_intercepts=False,
    )


def _two_step_settings() -> dict[str, Any]:
    """Every setting of TwoStepRewardModel, at small values."""
    return dict(
        alpha=1.0,
        n_folds=2,
        rng=0,
        interactions=True,
        pair_column=None,
        chunk_size=1024,
        cross_fit=True,
        estimator=None,
    )


@functools.cache
def _fitted_reward_model() -> Any:
    d = _data()
    return resolve("ope.RewardModel")(**_reward_model_settings()).fit(
        d["X"], d["y"], d["reward"], n_actions=3
    )


def _policy_matrix() -> np.ndarray:
    """``pi(. | x_i)`` of "always action 1" over the 3 actions, one row per planted row."""
    dist = np.zeros((N_LEARN, 3))
    dist[:, 1] = 1.0
    return dist


# ----------------------------------------------------------------------------- selection
def _evaluation_table() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "policy": ["a", "b", "c"],
            "estimator": "ips",
            "value": [0.30, 0.60, 0.50],
            "ci_low": [0.20, 0.40, 0.45],
        }
    )


#: Registered name -> a factory of its minimal valid call (see :class:`ope._entrypoints.Call`).
VALID: Final[dict[str, Callable[[Path], Call]]] = {
    "ope.selection_regret": lambda tmp: call(
        "ope.selection_regret", true_values=np.array([1.0, 0.5]), scores=np.array([0.9, 0.2]), k=1
    ),
    "ope.rank_correlation": lambda tmp: call(
        "ope.rank_correlation",
        true_values=np.array([1.0, 0.5, 0.1]),
        scores=np.array([0.9, 0.2, 0.3]),
    ),
    **_learner_calls("ConservativePolicyLearner"),
    **_learner_calls("IPSPolicyLearner"),
    **_learner_calls("DirectMethodPolicyLearner"),
    # the safety gate and its certificate
    "ope.SafetyGate": lambda tmp: Call(_gate_and_certify, _gate_settings()),
    "ope.SafetyGate.certify": lambda tmp: Call(
        resolve("ope.SafetyGate")(**_gate_settings()).certify, _certify_arguments()
    ),
    "ope.certify": lambda tmp: call("ope.certify", **{**_certify_arguments(), **_gate_settings()}),
    "ope.rank_policies": lambda tmp: call(
        "ope.rank_policies",
        **{
            **{
                k: v
                for k, v in _certify_arguments().items()
                if k not in ("policy", "name", "n_train")
            },
            "policies": {
                "ips": _fitted("IPSPolicyLearner"),
                "dm": _fitted("DirectMethodPolicyLearner"),
            },
            "reward_range": (0.0, 1.0),
            "max_weight": 3.0,
            "confidence_level": 0.95,
            "ci": "auto",
            "simultaneous": True,
            "max_sampling_weight": None,
        },
    ),
    "ope.Certificate.from_dict": lambda tmp: call(
        resolve("ope.Certificate").from_dict, data=_certificate().to_dict()
    ),
    "ope.Certificate.from_json": lambda tmp: call(
        resolve("ope.Certificate").from_json, text=_certificate().to_json()
    ),
    "ope.Certificate.to_json": lambda tmp: Call(_certificate().to_json, {"indent": 1}),
    "ope.Certificate.with_provenance": lambda tmp: Call(_certificate().with_provenance, {}),
    # learning from logs and the learned policy as a table
    "ope.learn_from_logs": lambda tmp: call(
        "ope.learn_from_logs",
        logs=_logs(),
        context_columns=["x0"],
        learner=_learner("IPSPolicyLearner"),
        action_features=None,
        certify_fraction=0.5,
        confidence_level=0.95,
        ci="auto",
        baseline="logging",
        max_weight=3.0,
        name="learned",
        rng=0,
        weight_column=None,
        max_sampling_weight=None,
    ),
    "ope.learner_policy_batches": lambda tmp: Call(
        _consumed(resolve("ope.learner_policy_batches")),
        {
            "learner": _fitted("DirectMethodPolicyLearner"),
            "logs": _logs(),
            "context_columns": ["x0"],
            "name": "dm",
        },
    ),
    "ope.learner_policy_table": lambda tmp: call(
        "ope.learner_policy_table",
        learner=_fitted("DirectMethodPolicyLearner"),
        logs=_logs(),
        context_columns=["x0"],
        name="dm",
    ),
    "ope.write_learner_policy_table": lambda tmp: call(
        "ope.write_learner_policy_table",
        learner=_fitted("DirectMethodPolicyLearner"),
        logs=_logs(),
        path=tmp / "learned.parquet",
        context_columns=["x0"],
        name="dm",
    ),
    # reward models
    "ope.RewardModel": lambda tmp: call("ope.RewardModel", **_reward_model_settings()),
    "ope.RewardModel.fit": lambda tmp: Call(
        resolve("ope.RewardModel")(**_reward_model_settings()).fit,
        {
            "context": _data()["X"],
            "action": _data()["y"],
            "reward": _data()["reward"],
            "n_actions": 3,
            "action_features": None,
        },
    ),
    "ope.TwoStepRewardModel": lambda tmp: call("ope.TwoStepRewardModel", **_two_step_settings()),
    "ope.TwoStepRewardModel.fit": lambda tmp: Call(
        resolve("ope.TwoStepRewardModel")(**_two_step_settings()).fit,
        {
            "context": _data()["X"],
            "action": _data()["y"],
            "reward": _data()["reward"],
            "clusters": np.array([0, 0, 1]),
            "n_actions": 3,
            "groups": None,
        },
    ),
    "ope.FittedRewardModel.predict": lambda tmp: Call(
        _fitted_reward_model().predict, {"context": _data()["X"], "action": _data()["y"]}
    ),
    "ope.FittedRewardModel.predict_policy": lambda tmp: Call(
        _fitted_reward_model().predict_policy,
        {"distribution": _policy_matrix(), "context": _data()["X"]},
    ),
    # propensities
    "ope.estimate_propensities": lambda tmp: call(
        "ope.estimate_propensities",
        logs=_logs(),
        context_columns=["x0"],
        classifier=None,
        n_folds=None,
        rng=0,
        calibration="none",
        min_propensity=1e-3,
    ),
    "ope.check_propensities": lambda tmp: call(
        "ope.check_propensities",
        logs=_logs(),
        context_columns=["x0"],
        by=None,
        classifier=None,
        n_folds=None,
        rng=0,
        calibration="none",
        min_propensity=1e-3,
        ratio_tolerance=1.5,
        n_worst=5,
    ),
    "ope.PropensityCheck.with_provenance": lambda tmp: Call(
        _propensity_check().with_provenance, {}
    ),
    "ope.propensity_source": lambda tmp: call("ope.propensity_source", logs=_logs()),
    "ope.balanced_propensities": lambda tmp: call(
        "ope.balanced_propensities", logs=_two_logger_logs(), long_table=None
    ),
    # selection
    "ope.approval_error_rates": lambda tmp: call(
        "ope.approval_error_rates",
        true_values=np.array([0.1, 0.2, 0.5, 0.6]),
        approved=np.array([True, False, False, True]),
        logging_value=0.3,
    ),
    "ope.selection_report": lambda tmp: call(
        "ope.selection_report",
        evaluation=_evaluation_table(),
        true_values={"a": 0.2, "b": 0.4, "c": 0.6},
        logging_value=0.3,
        baseline=0.42,
        gate={"a": False, "b": False, "c": True},
        k=1,
        normalize=False,
    ),
}

#: ``"<entry>::<argument>"`` -> how the contract breaks today.
KNOWN_BROKEN: Final[dict[str, str]] = {}
