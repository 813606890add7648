"""Valid calls of one area (the conventions are in :mod:`ope._valid_calls`): readers and importers
(parquet, OBD, DSJSON, trajectories, paired replays, bandit-feedback dicts, slates), the log
objects' methods, the sequential estimators and returns, paired effects."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Final

import numpy as np
import pandas as pd
import pyarrow as pa

from ope._entrypoints import Call, resolve as resolve_call
from ope._valid_calls._base import call, frame, paired_parquet, parquet, quietly, written


# --------------------------------------------------------------------- planted inputs
def _trajectory_frame() -> pd.DataFrame:
    """4 episodes over 2 states and 2 actions, each ending in ``done``; candidate ``pi``."""
    return pd.DataFrame(
        {
            "episode_id": [0, 0, 0, 1, 1, 2, 2, 2, 3, 3],
            "step": [0, 1, 2, 0, 1, 0, 1, 2, 0, 1],
            "action": [0, 1, 1, 1, 0, 0, 0, 1, 1, 1],
            "propensity": 0.5,
            "reward": [1.0, 0.0, 0.5, 0.0, 1.0, 0.5, 0.5, 1.0, 0.0, 0.5],
            "done": [False, False, True, False, True, False, False, True, False, True],
            "state": [0, 1, 0, 1, 1, 0, 0, 1, 1, 0],
            "target__pi": 0.5,
        }
    )


def trajectories():  # validated trajectories of the planted frame
    from ope import read_trajectories

    return read_trajectories(_trajectory_frame())


def _trajectory_evaluation():  # its small-sample warnings are planted: 4 episodes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return resolve_call("ope.evaluate_trajectories")(trajectories())


def trajectories_parquet(tmp: Path) -> Path:
    return written(tmp, "trajectories.parquet", _trajectory_frame)


def obd_folder(tmp: Path) -> Path:
    """An Open Bandit Dataset campaign folder: ``all.csv`` (3 rows) and ``item_context.csv``."""
    folder = tmp / "obd" / "random" / "all"
    if not folder.exists():
        folder.mkdir(parents=True)
        (folder / "all.csv").write_text(
            ",timestamp,item_id,position,click,propensity_score,user_feature_0,"
            "user-item_affinity_0\n"
            "0,2019-11-24 00:00:02+00:00,1,3,1,0.25,a1,0.0\n"
            "1,2019-11-24 00:00:01+00:00,0,1,0,0.5,b2,1.0\n"
            "2,2019-11-24 00:00:03+00:00,2,2,0,0.4,a1,0.5\n"
        )
        (folder / "item_context.csv").write_text(
            ",item_id,item_feature_0\n0,0,-0.5\n1,1,0.1\n2,2,0.7\n"
        )
    return folder


def dsjson_file(tmp: Path) -> Path:
    """A DSJSON file of 4 contextual-bandit events over 2 actions."""
    path = tmp / "events.json"
    if not path.exists():
        lines = [
            {
                "EventId": f"e{i}",
                "_label_cost": -float(i % 2),
                "_label_probability": 0.5,
                "_label_Action": 1 + i % 2,
                "_labelIndex": i % 2,
                "a": [1 + i % 2, 2 - i % 2],
                "p": [0.5, 0.5],
                "c": {"_multi": [{"x": 1}, {"x": 2}]},
            }
            for i in range(4)
        ]
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def bandit_feedback() -> dict[str, object]:
    """An Open Bandit Pipeline ``bandit_feedback`` dict: 8 rounds, 3 actions, 2 positions."""
    gen = np.random.default_rng(2)
    n, n_actions, len_list = 8, 3, 2
    dist = gen.dirichlet(np.ones(n_actions), size=(n, len_list)).transpose(0, 2, 1)
    return {
        "n_rounds": n,
        "n_actions": n_actions,
        "action": gen.integers(0, n_actions, n),
        "position": gen.integers(0, len_list, n),
        "reward": gen.integers(0, 2, n),
        "pscore": gen.uniform(0.2, 1.0, n),
        "context": gen.normal(size=(n, 2)),
        "action_context": gen.normal(size=(n_actions, 2)),
        "action_dist": dist,
    }


def slate_frame() -> pd.DataFrame:
    """Two slates of two slots in the long layout, every probability column given."""
    return pd.DataFrame(
        {
            "slate_id": [7, 7, 3, 3],
            "position": [1, 0, 0, 1],
            "item": [2, 0, 1, 2],
            "reward": [0.0, 1.0, 0.0, 1.0],
            "propensity": [0.5, 0.5, 0.25, 0.5],
            "slate_propensity": [0.2, 0.2, 0.125, 0.125],
            "prefix_propensity": [0.2, 0.5, 0.25, 0.125],
            "context": [1, 1, 0, 0],
        }
    )


def _logs(tmp: Path):  # validated bandit logs of the planted frame
    from ope import read_logs

    return read_logs(frame())


def _returns(name: str, **settings: object) -> Callable[[Path], Call]:
    """A call of one of the returns functions on the planted trajectories, every array
    argument a keyword."""

    def build(tmp: Path) -> Call:
        traj = trajectories()
        kwargs: dict[str, object] = {"data": traj, "gamma": 0.9, **settings}
        if name != "ope.discounted_returns":
            kwargs["values"] = np.full(traj.n, 0.5)
        kwargs.update(done=None, episode_starts=None, episode_id=None, tail_value=None)
        if name in ("ope.discounted_returns", "ope.gae", "ope.lambda_returns"):
            kwargs.update(ratios=None, max_ratio=None, max_td_ratio=None)
        return call(name, **kwargs)

    return build


def _consumed(target: Callable[..., object]) -> Callable[..., list[object]]:
    """``target`` (a generator function) run to its end, so that every chunk is read."""

    def run(**kwargs: object) -> list[object]:
        return list(target(**kwargs))  # type: ignore[call-overload]

    return run


#: Registered name -> a factory of its minimal valid call (see :class:`ope._entrypoints.Call`).
VALID: Final[dict[str, Callable[[Path], Call]]] = {
    "ope.read_logs": lambda tmp: call("ope.read_logs", source=parquet(tmp), on_invalid="raise"),
    "ope.scan_logs": lambda tmp: call("ope.scan_logs", source=parquet(tmp), batch_size=32),
    "ope.read_paired": lambda tmp: call("ope.read_paired", source=paired_parquet(tmp)),
    "ope.paired_effect": lambda tmp: call(
        "ope.paired_effect",
        replays=paired_parquet(tmp),
        treated="mem",
        control="none",
        confidence_level=0.95,
    ),
    "ope.load_sample": lambda tmp: call("ope.load_sample", columns=None),
    "ope.BanditLogs.column": lambda tmp: Call(_logs(tmp).column, {"name": "reward"}),
    "ope.BanditLogs.with_action_features": lambda tmp: Call(
        _logs(tmp).with_action_features,
        {"action_features": pa.table({"action": [0, 1, 2], "af_0": [0.1, 0.2, 0.3]})},
    ),
    "ope.Trajectories.column": lambda tmp: Call(trajectories().column, {"name": "reward"}),
    "ope.PairedReplays.column": lambda tmp: Call(
        resolve_call("ope.read_paired")(paired_parquet(tmp)).column, {"name": "outcome"}
    ),
    "ope.ValidationReport.failure_message": lambda tmp: Call(
        _logs(tmp).report.failure_message, {"what": "bandit-log", "tail": "", "caveats": ()}
    ),
    "ope.ValidationReport.format": lambda tmp: Call(_logs(tmp).report.format, {"width": 88}),
    "ope.ValidationReport.warn_dropped": lambda tmp: Call(
        _logs(tmp).report.warn_dropped, {"stacklevel": 2}
    ),
    "ope.LogScan.describe": lambda tmp: Call(
        resolve_call("ope.scan_logs")(parquet(tmp)).describe, {"report": _logs(tmp).report}
    ),
    "ope.PairedEffect.with_provenance": lambda tmp: Call(
        quietly(
            resolve_call("ope.paired_effect"), paired_parquet(tmp), treated="mem", control="none"
        ).with_provenance,
        {},
    ),
    "ope.read_obd": lambda tmp: call(
        "ope.read_obd", src=obd_folder(tmp), context="user", on_invalid="raise", mapping=None
    ),
    "ope.read_dsjson": lambda tmp: call(
        "ope.read_dsjson",
        path=dsjson_file(tmp),
        on_invalid="raise",
        chunk_lines=100,
        chunk_bytes=1 << 16,
        max_line_bytes=1 << 16,
        features=False,
        mapping=None,
        workers=1,
    ),
    "ope.importers.iter_dsjson": lambda tmp: Call(
        _consumed(resolve_call("ope.importers.iter_dsjson")),
        {
            "path": dsjson_file(tmp),
            "on_invalid": "raise",
            "chunk_lines": 100,
            "chunk_bytes": 1 << 16,
            "max_line_bytes": 1 << 16,
            "features": False,
            "workers": 1,
        },
    ),
    "ope.importers.import_dsjson": lambda tmp: call(
        "ope.importers.import_dsjson",
        path=dsjson_file(tmp),
        out=tmp / "imported.parquet",
        on_invalid="raise",
        chunk_lines=100,
        chunk_bytes=1 << 16,
        max_line_bytes=1 << 16,
        features=False,
        workers=1,
    ),
    "ope.read_trajectories": lambda tmp: call(
        "ope.read_trajectories",
        source=trajectories_parquet(tmp),
        mapping=None,
        on_invalid="raise",
        columns=None,
    ),
    "ope.from_bandit_feedback": lambda tmp: call(
        "ope.from_bandit_feedback", d=bandit_feedback(), policy_name="candidate", on_invalid="raise"
    ),
    "ope.to_bandit_feedback": lambda tmp: call(
        "ope.to_bandit_feedback", logs=resolve_call("ope.from_bandit_feedback")(bandit_feedback())
    ),
    "ope.slate_logs": lambda tmp: call(
        "ope.slate_logs",
        data=slate_frame(),
        mapping={"slate_id": "slate_id"},
        position_base=0,
        allow_repeats=False,
    ),
    "ope.sequential_estimate": lambda tmp: Call(
        resolve_call("ope.sequential_estimate"),
        {
            "trajectories": trajectories(),
            "target": "pi",
            "estimator": "pdis",
            "gamma": 0.9,
            "q_hat": None,
            "v_hat": None,
            "tail_value": None,
            "reward_range": None,
            "max_weight": None,
            "confidence_level": 0.95,
            "ci": "normal",
            "weight_bound": None,
            "horizon": None,
            "state": None,
        },
    ),
    "ope.sequential.episode_weights": lambda tmp: Call(
        resolve_call("ope.sequential.episode_weights"),
        {
            "trajectories": trajectories(),
            "target": "pi",
            "gamma": 0.9,
            "tail_value": 0.0,
            "reward_range": (0.0, 1.0),
        },
    ),
    "ope.return_distribution": lambda tmp: call(
        "ope.return_distribution",
        trajectories=trajectories(),
        policies=["pi"],
        gamma=0.9,
        tail_value=0.0,
        estimator="dr",
        band="multiplier",
        weight_bound=None,
        confidence_level=0.95,
        outcome_range=(0.0, 5.0),
        resolution=100,
        n_resamples=200,
        rng=0,
        state=None,
    ),
    "ope.evaluate_trajectories": lambda tmp: call(
        "ope.evaluate_trajectories",
        trajectories=trajectories(),
        policies=["pi"],
        estimators=("pdis", "wpdis"),
        ci="normal",
        ci_fallback=None,
        confidence_level=0.95,
        gamma=0.9,
        reward_range=None,
        max_weight=None,
        weight_bound=None,
        horizon=None,
        tail_value=None,
        q_hat=None,
        v_hat=None,
        state=None,
    ),
    "ope.TrajectoryEvaluation.with_provenance": lambda tmp: Call(
        _trajectory_evaluation().with_provenance, {}
    ),
    "ope.TrajectoryEvaluation.compare": lambda tmp: Call(
        _trajectory_evaluation().compare,
        {"policy": "pi", "baseline": "logging", "estimator": "pdis", "ci": "normal"},
    ),
    "ope.TrajectoryEvaluation.comparisons": lambda tmp: Call(
        _trajectory_evaluation().comparisons, {"ci": "t"}
    ),
    "ope.fitted_q_evaluation": lambda tmp: call(
        "ope.fitted_q_evaluation",
        trajectories=trajectories(),
        target_policy=[[0.5, 0.5], [0.5, 0.5]],
        gamma=0.9,
        state_column="state",
        feature_columns=None,
        next_state_column=None,
        n_iterations=50,
        ridge=1e-3,
    ),
    "ope.discounted_returns": _returns("ope.discounted_returns"),
    "ope.td_errors": _returns("ope.td_errors"),
    "ope.gae": _returns("ope.gae", lam=0.9),
    "ope.lambda_returns": _returns("ope.lambda_returns", lam=0.9),
}

#: ``"<entry>::<argument>"`` -> how the contract breaks today.
KNOWN_BROKEN: Final[dict[str, str]] = {}
