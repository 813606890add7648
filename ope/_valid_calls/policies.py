"""Valid calls of one area (the conventions are in :mod:`ope._valid_calls`): the policies (the
policy classes of ``ope`` and ``ope.policies``, slate policies) and the policy tables.

The planted logs here (:func:`policy_logs`) are the shared bandit logs of
:func:`ope._valid_calls._base.frame` plus what policies read: a ``candidates`` column with
aligned ``scores`` and ``logging_distribution``, and a ``chosen`` action column. A policy method's
call is the bound method of a freshly built policy; ``ope.Policy``'s methods are those of the
policy that :func:`ope.policies.policy_from_spec` returns (ope's own implementation of the
protocol that is not one of the named classes). ``ope.Policy`` itself is a ``typing.Protocol``:
it takes no argument and cannot be instantiated, so it has no call here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import numpy as np
import pandas as pd

from ope._entrypoints import Call, resolve
from ope._valid_calls._base import N, call, frame


# --------------------------------------------------------------------------------------------
# planted inputs of this area
# --------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def _policy_frame() -> pd.DataFrame:
    f = frame()
    f["candidates"] = [[0, 1, 2]] * N
    f["scores"] = [[0.1, 0.9, 0.3]] * N
    f["logging_distribution"] = [[1 / 3, 1 / 3, 1 / 3]] * N
    f["chosen"] = np.ones(N, dtype=np.int64)
    return f


@functools.lru_cache(maxsize=1)
def _read_policy_logs() -> Any:
    return resolve("ope.read_logs")(_policy_frame().copy())


def policy_logs() -> Any:
    """The planted logs with candidates, aligned scores and logging distribution: a fresh
    BanditLogs around the table read once (Arrow tables are immutable)."""
    read = _read_policy_logs()
    return type(read).from_validated(read.table, read.report, unit_roundoff=read.unit_roundoff)


def _scores(X: np.ndarray) -> np.ndarray:
    """A callable policy score: three actions, linear in the one feature."""
    return np.column_stack([X[:, 0], -X[:, 0], np.zeros(len(X))])


@functools.lru_cache(maxsize=1)
def _classifier() -> Any:
    from sklearn.linear_model import LogisticRegression

    f = frame()
    return LogisticRegression().fit(f[["x0"]].to_numpy(), f["action"].to_numpy())


def _npy(tmp: Path) -> Path:
    path = tmp / "dist.npy"
    if not path.exists():
        np.save(path, np.full((N, 3), 1 / 3))
    return path


def _skops(tmp: Path) -> Path:
    path = tmp / "clf.skops"
    if not path.exists():
        import skops.io as sio

        sio.dump(_classifier(), path)
    return path


def _action_table() -> pd.DataFrame:
    return pd.DataFrame({"action": [0, 1, 2], "probability": [0.2, 0.5, 0.3]})


def _policy_table(tmp: Path) -> Path:
    """A policy table for the planted logs, its probability column named ``prob``."""
    path = tmp / "policy_table.parquet"
    if not path.exists():
        pd.DataFrame(
            {
                "event_id": np.repeat(np.arange(N), 3),
                "policy": "u",
                "action": np.tile([0, 1, 2], N),
                "prob": 1 / 3,
            }
        ).to_parquet(path)
    return path


def _slate_logs() -> pd.DataFrame:
    """Three slates of two items in the long layout (one row per slot), all in context 0:
    the table :func:`ope.slate_logs` reads (a DataFrame, so the harness can vary its columns)."""
    return pd.DataFrame(
        {
            "slate_id": [0, 0, 1, 1, 2, 2],
            "position": [0, 1] * 3,
            "item": [0, 1, 1, 0, 0, 2],
            "reward": [1.0, 0.0, 0.0, 1.0, 0.0, 0.0],
            "propensity": [0.5] * 6,
            "context": [0] * 6,
        }
    )


def _enumerated() -> Any:
    return resolve("ope.EnumeratedSlatePolicy")(
        slates=[[0, 1], [1, 0], [0, 2]], probabilities=[[0.5, 0.25, 0.25]], n_items=3
    )


def _plackett_luce() -> Any:
    return resolve("ope.PlackettLuce")(scores=[[0.0, 0.5, 1.0]], slate_size=2)


def _distribution() -> Any:
    import scipy.sparse as sp

    return resolve("ope.PolicyDistribution")(
        matrix=sp.csr_array(np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])),
        actions=np.array([0, 1, 2]),
    )


def _deterministic() -> Any:
    return resolve("ope.DeterministicPolicy")(_scores, actions=[0, 1, 2], feature_columns=["x0"])


def _method(build: Callable[[], Any], method: str, **kwargs: Any) -> Callable[[Path], Call]:
    """The factory of ``build().method(logs=<planted logs>, **kwargs)``."""

    def valid(tmp: Path) -> Call:
        return Call(getattr(build(), method), {"logs": policy_logs(), **kwargs})

    return valid


def _policy_methods(name: str, build: Callable[[], Any]) -> dict[str, Callable[[Path], Call]]:
    return {f"{name}.{m}": _method(build, m) for m in ("distribution", "propensity")}


def _spec_policy() -> Any:
    return resolve("ope.policies.policy_from_spec")("u=uniform", policy_logs())


#: Registered name -> a factory of its minimal valid call (see :class:`ope._entrypoints.Call`).
def _embedding() -> Any:
    """Actions 0 and 1 in one cluster, 2 in another (an item table given with the embedding)."""
    import pyarrow as pa

    items = pa.table({"action": [0, 1, 2], "genre": ["a", "a", "b"]})
    return resolve("ope.ActionEmbedding")(clusters="genre", items=items)


def _two_dims() -> Any:
    """Two categorical dimensions of 3 actions (an item table given with the embedding)."""
    import pyarrow as pa

    items = pa.table({"action": [0, 1, 2], "genre": ["a", "a", "b"], "shelf": ["x", "y", "y"]})
    return resolve("ope.ActionEmbedding")(columns=("genre", "shelf"), items=items)


def _embedding_choice() -> Any:
    return resolve("ope.tune_embedding")(
        policy_logs(), {"u": resolve("ope.UniformPolicy")()}, embedding=_two_dims()
    )


def _marginal() -> Any:
    return resolve("ope.marginal_propensities")(
        logs=policy_logs(), embedding=_embedding(), policies={"u": resolve("ope.UniformPolicy")()}
    )


def _sufficiency_call(tmp: Path) -> Call:
    logs = policy_logs()
    m = _marginal()
    return call(
        "ope.embedding_sufficiency",
        reward=logs.column("reward"),
        logging_propensity=logs.column("propensity"),
        target_propensity=np.full((logs.n, 1), 1 / 3),
        marginal=m,
    )


VALID: Final[dict[str, Callable[[Path], Call]]] = {
    "ope.ActionEmbedding": lambda tmp: call(
        "ope.ActionEmbedding", clusters="genre", smoothing=1.0, n_folds=5, rng=0
    ),
    "ope.marginal_propensities": lambda tmp: call(
        "ope.marginal_propensities",
        logs=policy_logs(),
        embedding=_embedding(),
        policies={"u": resolve("ope.UniformPolicy")()},
    ),
    "ope.embedding_sufficiency": _sufficiency_call,
    "ope.ActionEmbedding.restricted": lambda tmp: Call(
        _two_dims().restricted, {"dimensions": ["shelf"]}
    ),
    "ope.tune_embedding": lambda tmp: call(
        "ope.tune_embedding",
        logs=policy_logs(),
        policies={"u": resolve("ope.UniformPolicy")()},
        embedding=_two_dims(),
        estimator="mips",
        rule="slope",
        search="exact",
        min_dims=1,
        delta=0.1,
        rng=0,
    ),
    "ope.EmbeddingChoice.value_for": lambda tmp: Call(
        _embedding_choice().value_for, {"policy": "u"}
    ),
    "ope.EmbeddingChoice.embedding_for": lambda tmp: Call(
        _embedding_choice().embedding_for, {"policy": "u"}
    ),
    "ope.EmbeddingChoice.with_provenance": lambda tmp: Call(
        _embedding_choice().with_provenance, {"seed": 0}
    ),
    # ---- policy objects computed from the logs --------------------------------------------
    "ope.UniformPolicy": lambda tmp: call("ope.UniformPolicy", actions=[0, 1, 2]),
    **_policy_methods("ope.UniformPolicy", lambda: resolve("ope.UniformPolicy")(actions=[0, 1, 2])),
    "ope.EpsilonGreedyPolicy": lambda tmp: call(
        "ope.EpsilonGreedyPolicy", base=_deterministic(), epsilon=0.1, actions=[0, 1, 2]
    ),
    **_policy_methods(
        "ope.EpsilonGreedyPolicy",
        lambda: resolve("ope.EpsilonGreedyPolicy")(_deterministic(), 0.1, actions=[0, 1, 2]),
    ),
    "ope.DeterministicPolicy": lambda tmp: call(
        "ope.DeterministicPolicy", scores=_scores, actions=[0, 1, 2], feature_columns=["x0"]
    ),
    **_policy_methods("ope.DeterministicPolicy", _deterministic),
    "ope.SoftmaxPolicy": lambda tmp: call(
        "ope.SoftmaxPolicy",
        scores=_scores,
        temperature=0.5,
        actions=[0, 1, 2],
        feature_columns=["x0"],
    ),
    **_policy_methods(
        "ope.SoftmaxPolicy", lambda: resolve("ope.SoftmaxPolicy")("scores", temperature=0.5)
    ),
    "ope.ClassifierPolicy": lambda tmp: call(
        "ope.ClassifierPolicy", estimator=_classifier(), feature_columns=["x0"]
    ),
    **_policy_methods(
        "ope.ClassifierPolicy", lambda: resolve("ope.ClassifierPolicy")(_classifier(), ["x0"])
    ),
    # the protocol: its methods as ope's spec policy implements them
    **_policy_methods("ope.Policy", _spec_policy),
    # ---- policies given as numbers ---------------------------------------------------------
    "ope.policies.LoggingPolicy": lambda tmp: call("ope.policies.LoggingPolicy"),
    **_policy_methods(
        "ope.policies.LoggingPolicy", lambda: resolve("ope.policies.LoggingPolicy")()
    ),
    "ope.policies.ChosenActionPolicy": lambda tmp: call(
        "ope.policies.ChosenActionPolicy", column="chosen"
    ),
    **_policy_methods(
        "ope.policies.ChosenActionPolicy",
        lambda: resolve("ope.policies.ChosenActionPolicy")("chosen"),
    ),
    "ope.policies.ArrayPolicy": lambda tmp: call("ope.policies.ArrayPolicy", path=_npy(tmp)),
    "ope.policies.ArrayPolicy.distribution": lambda tmp: Call(
        resolve("ope.policies.ArrayPolicy")(_npy(tmp)).distribution, {"logs": policy_logs()}
    ),
    "ope.policies.ArrayPolicy.propensity": lambda tmp: Call(
        resolve("ope.policies.ArrayPolicy")(_npy(tmp)).propensity, {"logs": policy_logs()}
    ),
    "ope.policies.ActionTablePolicy": lambda tmp: call(
        "ope.policies.ActionTablePolicy", table=_action_table()
    ),
    **_policy_methods(
        "ope.policies.ActionTablePolicy",
        lambda: resolve("ope.policies.ActionTablePolicy")(_action_table()),
    ),
    "ope.policies.logged_action_table": lambda tmp: call(
        "ope.policies.logged_action_table", logs=policy_logs(), by_position=False
    ),
    # ---- distributions ---------------------------------------------------------------------
    "ope.PolicyDistribution": lambda tmp: call(
        "ope.PolicyDistribution", matrix=_distribution().matrix, actions=np.array([0, 1, 2])
    ),
    "ope.PolicyDistribution.probability": lambda tmp: Call(
        _distribution().probability, {"action": np.array([0, 2])}
    ),
    "ope.PolicyDistribution.reindex": lambda tmp: Call(
        _distribution().reindex, {"actions": [0, 1, 2, 3]}
    ),
    "ope.logging_distribution": lambda tmp: call("ope.logging_distribution", logs=policy_logs()),
    "ope.target_propensities": lambda tmp: call(
        "ope.target_propensities", logs=policy_logs(), policies=["greedy"], with_distributions=False
    ),
    # ---- specs -----------------------------------------------------------------------------
    "ope.policies.PolicySpec": lambda tmp: call(
        "ope.policies.PolicySpec",
        name="explore",
        kind="epsilon-greedy",
        column="scores",
        number=0.1,
        path=None,
        columns=None,
        text="explore=epsilon-greedy:scores:0.1",
    ),
    "ope.policies.is_policy_spec": lambda tmp: call("ope.policies.is_policy_spec", text="greedy"),
    "ope.policies.parse_policy_spec": lambda tmp: call(
        "ope.policies.parse_policy_spec", text="u=uniform"
    ),
    "ope.policies.policy_from_spec": lambda tmp: call(
        "ope.policies.policy_from_spec",
        spec="u=uniform",
        logs=policy_logs(),
        label="--policy u=uniform",
    ),
    "ope.policies.load_classifier": lambda tmp: call(
        "ope.policies.load_classifier", path=_skops(tmp)
    ),
    "ope.policies.candidates_with_specs": lambda tmp: call(
        "ope.policies.candidates_with_specs",
        logs=policy_logs(),
        specs=["u=uniform"],
        names=["greedy"],
        table=None,
        labels=["--policy u=uniform"],
    ),
    # ---- policy tables ---------------------------------------------------------------------
    "ope.read_policy_table": lambda tmp: call(
        "ope.read_policy_table", path=_policy_table(tmp), mapping={"probability": "prob"}
    ),
    "ope.write_policy_table": lambda tmp: call(
        "ope.write_policy_table",
        table=pd.DataFrame(
            {"event_id": [0, 0], "policy": ["p", "p"], "action": [0, 1], "probability": [0.5, 0.5]}
        ),
        path=tmp / "policy.parquet",
    ),
    "ope.to_policy_table": lambda tmp: call(
        "ope.to_policy_table",
        logs=policy_logs(),
        policies={"u": resolve("ope.UniformPolicy")(actions=[0, 1, 2])},
    ),
    # ---- slate policies --------------------------------------------------------------------
    "ope.SlatePolicy": lambda tmp: call("ope.SlatePolicy"),
    "ope.SlatePolicy.slate_probabilities": lambda tmp: Call(
        _enumerated().slate_probabilities, {"logs": _slate_logs()}
    ),
    "ope.EnumeratedSlatePolicy": lambda tmp: call(
        "ope.EnumeratedSlatePolicy",
        slates=[[0, 1], [1, 0], [0, 2]],
        probabilities=[[0.5, 0.25, 0.25]],
        n_items=3,
    ),
    "ope.EnumeratedSlatePolicy.slate_probabilities": lambda tmp: Call(
        _enumerated().slate_probabilities, {"logs": _slate_logs()}
    ),
    "ope.PlackettLuce": lambda tmp: call(
        "ope.PlackettLuce",
        scores=[[0.0, 0.5, 1.0]],
        slate_size=2,
        temperature=1.0,
        n_samples=100,
        rng=0,
    ),
    "ope.PlackettLuce.prefix_probabilities": lambda tmp: Call(
        _plackett_luce().prefix_probabilities,
        {"context": np.array([0, 0]), "item": np.array([[0, 1], [2, 1]])},
    ),
    "ope.PlackettLuce.sample": lambda tmp: Call(
        _plackett_luce().sample, {"context": np.array([0, 0]), "rng": 0}
    ),
    "ope.PlackettLuce.slate_probabilities": lambda tmp: Call(
        _plackett_luce().slate_probabilities, {"logs": _slate_logs()}
    ),
}

#: ``"<entry>::<argument>"`` -> how the contract breaks today.
KNOWN_BROKEN: Final[dict[str, str]] = {}
