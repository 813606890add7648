"""The planted inputs the minimal valid calls share: small bandit logs, a parquet file of them,
paired replays, arrays, and the constructors of a :class:`~ope._entrypoints.Call`."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import numpy as np
import pandas as pd

from ope._entrypoints import Call, resolve
from ope.exceptions import OPEWarning

N: Final = 60  # rows of the planted logs: enough for every estimator, fast


def frame(seed: int = 0, n: int = N) -> pd.DataFrame:
    """Bandit logs over 3 uniformly logged actions with one candidate ``target__greedy``."""
    gen = np.random.default_rng(seed)
    action = gen.integers(0, 3, n)
    return pd.DataFrame(
        {
            "event_id": np.arange(n, dtype=np.int64),
            "action": action,
            "propensity": np.full(n, 1 / 3),
            "reward": gen.binomial(1, 0.3 + 0.2 * (action == 1)).astype(np.float64),
            "x0": gen.normal(size=n),
            "target__greedy": np.where(action == 1, 0.8, 0.1),
        }
    )


def written(tmp: Path, name: str, make: Callable[[], pd.DataFrame]) -> Path:
    """``tmp / name``, written from ``make()`` as parquet the first time it is asked for."""
    path = tmp / name
    if not path.exists():
        make().to_parquet(path)
    return path


def parquet(tmp: Path) -> Path:
    return written(tmp, "logs.parquet", frame)


def paired_parquet(tmp: Path) -> Path:
    path = tmp / "replays.parquet"
    if not path.exists():
        gen = np.random.default_rng(1)
        pd.DataFrame(
            {
                "pair_id": np.repeat(np.arange(20), 2),
                "arm": ["mem", "none"] * 20,
                "outcome": gen.binomial(1, 0.5, 40).astype(np.float64),
            }
        ).to_parquet(path)
    return path


def arrays() -> dict[str, np.ndarray]:
    f = frame()
    return {
        "reward": f["reward"].to_numpy(),
        "logging_propensity": f["propensity"].to_numpy(),
        "target_propensity": f["target__greedy"].to_numpy(),
    }


def quietly(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``func(*args, **kwargs)`` with ope's warnings silenced: for results a valid call is
    built on (the planted rows are few, so they draw small-sample notes)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OPEWarning)
        return func(*args, **kwargs)


def estimate() -> Any:
    """An IPS estimate on the planted rows (built quietly: a few dozen rows draw ope's
    small-sample notes, which are not what the calls built on it test)."""
    from ope.estimators import IPS

    a = arrays()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OPEWarning)
        return IPS().estimate(a["reward"], a["logging_propensity"], a["target_propensity"])


def evaluation() -> Any:
    """An evaluation of the planted rows (built quietly, as :func:`estimate`)."""
    from ope.evaluation import evaluate

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OPEWarning)
        return evaluate(frame(), ["greedy"], estimators=("ips", "snips"))


def call(target: str | Callable[..., Any], *args: Any, **kwargs: Any) -> Call:
    func = resolve(target) if isinstance(target, str) else target
    return Call(func, dict(kwargs), tuple(args))


def estimator_estimate(cls: str, **settings: Any) -> Callable[[Path], Call]:
    def build(tmp: Path) -> Call:
        a = arrays()
        est = resolve(cls)(**settings)
        kwargs: dict[str, Any] = {"reward": a["reward"]}
        params = inspect.signature(est.estimate).parameters
        if "target_propensity" in params:
            kwargs["logging_propensity"] = a["logging_propensity"]
            kwargs["target_propensity"] = a["target_propensity"]
        for q in ("q_logged", "q_target"):
            if q in params:
                kwargs[q] = np.full(N, 0.4)
        return Call(est.estimate, kwargs)

    return build


def slate_frame(n_slates: int = N) -> pd.DataFrame:
    """Long slate logs (one row per slot): ``n_slates`` slates of 2 slots over 3 items, logged
    uniformly at random without replacement (marginal 1/3, slate 1/6), in one context."""
    gen = np.random.default_rng(2)
    item = np.argsort(gen.random((n_slates, 3)), axis=1)[:, :2]
    return pd.DataFrame(
        {
            "slate_id": np.repeat(np.arange(n_slates), 2),
            "position": np.tile([0, 1], n_slates),
            "item": item.ravel(),
            "reward": gen.binomial(1, 0.4, 2 * n_slates).astype(np.float64),
            "propensity": np.full(2 * n_slates, 1 / 3),
            "slate_propensity": np.full(2 * n_slates, 1 / 6),
            "prefix_propensity": np.tile([1 / 3, 1 / 6], n_slates),
            "context": np.zeros(2 * n_slates, dtype=np.int64),
        }
    )


def slate_policies() -> tuple[Any, Any]:
    """A candidate and the uniform logger of :func:`slate_frame`, as slate policies over the 6
    ordered slates of 2 of 3 items (one context)."""
    from ope.slates import EnumeratedSlatePolicy

    slates = [[0, 1], [0, 2], [1, 0], [1, 2], [2, 0], [2, 1]]
    target = EnumeratedSlatePolicy(slates, [[0.2, 0.2, 0.15, 0.15, 0.15, 0.15]])
    logging = EnumeratedSlatePolicy(slates, [[1 / 6] * 6])
    return target, logging


def dsjson_file(tmp: Path) -> Path:
    """A DSJSON file of 12 valid contextual-bandit events over 3 actions (``ope import``)."""
    import json

    path = tmp / "events.json"
    if not path.exists():
        gen = np.random.default_rng(2)
        lines = []
        for i in range(12):
            index = int(gen.integers(0, 3))
            lines.append(
                json.dumps(
                    {
                        "_label_cost": -float(gen.binomial(1, 0.4)),
                        "_label_probability": 1 / 3,
                        "_label_Action": index + 1,
                        "_labelIndex": index,
                        "EventId": f"e{i}",
                        "a": [1, 2, 3],
                        "c": {"User": {"age": 20 + i}, "_multi": [{}, {}, {}]},
                        "p": [1 / 3] * 3,
                    }
                )
            )
        path.write_text("\n".join(lines) + "\n")
    return path


def obd_campaign(tmp: Path) -> Path:
    """An Open Bandit Dataset campaign folder (``random/all``: ``all.csv`` and
    ``item_context.csv``) of 9 events, 3 items at 3 positions (``ope import obd``)."""
    folder = tmp / "random" / "all"
    if not (folder / "all.csv").exists():
        folder.mkdir(parents=True, exist_ok=True)
        rows = [
            ",timestamp,item_id,position,click,propensity_score,user_feature_0,"
            "user_feature_1,user_feature_2,user_feature_3"
        ]
        for i in range(9):
            rows.append(
                f"{i},2019-11-24 00:00:0{i}+00:00,{i % 3},{i // 3 + 1},{i % 2},"
                f"0.3333333333,u{i % 2},v{i % 3},w,z"
            )
        (folder / "all.csv").write_text("\n".join(rows) + "\n")
        (folder / "item_context.csv").write_text(
            ",item_id,item_feature_0\n0,0,-0.5\n1,1,0.1\n2,2,0.7\n"
        )
    return folder


def logger_frame() -> pd.DataFrame:
    """:func:`frame` logged by two loggers ``A`` and ``B`` (alternate rows), with each logger's
    probability of every logged action (``propensity__A``, ``propensity__B``: both uniform)."""
    f = frame()
    return f.assign(
        logging_policy=np.where(np.arange(len(f)) % 2 == 0, "A", "B"),
        propensity__A=f["propensity"],
        propensity__B=f["propensity"],
    )


def diagnostics() -> Any:
    """Diagnostics of :func:`frame` with everything its methods read: a segment ``seg``, the
    actions, both full distributions (so per-row support), reward bounds and a plan."""
    import scipy.sparse as sp

    from ope.diagnostics import diagnose_arrays
    from ope.exceptions import OverlapWarning

    f = frame()
    n = len(f)
    target = np.tile([0.1, 0.8, 0.1], (n, 1))
    with warnings.catch_warnings():  # segment gaps in seg=hi, as planted: the calls read them
        warnings.simplefilter("ignore", OverlapWarning)
        return diagnose_arrays(
            f["reward"].to_numpy(),
            f["propensity"].to_numpy(),
            f["target__greedy"].to_numpy(),
            policy_names=["greedy"],
            segments={"seg": np.where(f["x0"] > 0, "hi", "lo")},
            action=f["action"].to_numpy(),
            target_distributions={"greedy": sp.csr_matrix(target)},
            logging_distribution=sp.csr_matrix(np.full((n, 3), 1 / 3)),
            reward_range=(0.0, 1.0),
            target_width=0.2,
            new_rows=100,
        )


def closing_figures(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` (a plotting method) drawing with matplotlib's Agg backend, every figure closed
    after the call (the harness calls it hundreds of times)."""
    import functools

    import matplotlib

    matplotlib.use("Agg")

    @functools.wraps(method)
    def draw(*args: Any, **kwargs: Any) -> Any:
        import matplotlib.pyplot as plt

        try:
            return method(*args, **kwargs)
        finally:
            plt.close("all")

    return draw
