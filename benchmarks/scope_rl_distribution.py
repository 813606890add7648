"""Parity of ope.return_distribution with SCOPE-RL's cumulative-distribution TIS and SNTIS
estimators (``scope_rl.ope.discrete.CumulativeDistributionTIS`` / ``...SNTIS``, version
0.2.1) on identical trajectories.

SCOPE-RL's own code is run, not re-implemented. It is not a dependency of ope: install the
wheel without its (heavy) dependencies into a folder and pass it::

    pip download scope-rl==0.2.1 --no-deps -d /tmp/scope
    pip install --no-deps --target /tmp/scope/site /tmp/scope/scope_rl-0.2.1-py3-none-any.whl
    python benchmarks/scope_rl_distribution.py --scope-path /tmp/scope/site

Only the two estimator files and their helpers are loaded (the package's ``__init__`` pulls
gym, d3rlpy and torch; the few names those files import from gym and d3rlpy are stood in for,
and none is used on this path).

Where the definitions match. SCOPE-RL evaluates the CDF on a grid ``reward_scale`` by a
histogram of the clipped returns: at an interior grid point t it gives
sum_i w_i 1{G_i < t} / n (SNTIS: / sum w), at the last one <=, and 0 at the first. ope gives
sum_i w_i 1{G_i <= t} / n. On continuous returns (no return on a grid point) the two agree at
every grid point from the second on, except where no return lies below the point: SCOPE-RL
then returns the smallest return's weight / n instead of 0 (an off-by-one of its histogram
index). Its discounting also starts at gamma (the first reward times gamma), so the comparison
uses gamma = 1. The script prints the largest difference where the definitions match and
counts the grid points of each exception.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import types

import numpy as np
import pandas as pd


def load_scope_rl(
    path: str, module: str = "cumulative_distribution_estimators"
) -> types.ModuleType:
    """One module of SCOPE-RL's discrete estimators (default: the cumulative-distribution
    ones), without its package ``__init__`` (which imports gym, d3rlpy and torch)."""
    for name in ("scope_rl", "scope_rl.ope", "scope_rl.ope.discrete"):
        mod = types.ModuleType(name)
        mod.__path__ = [f"{path}/{name.replace('.', '/')}"]
        sys.modules[name] = mod
    for name in ("gym", "gym.spaces", "d3rlpy", "d3rlpy.preprocessing"):
        try:
            importlib.import_module(name)
        except ImportError:
            stub = types.ModuleType(name)
            stub.__path__ = []
            sys.modules[name] = stub
    gym = sys.modules["gym"]
    gym.spaces = sys.modules["gym.spaces"]
    for attr in ("Env", "Wrapper", "ObservationWrapper", "ActionWrapper", "RewardWrapper"):
        if not hasattr(gym, attr):
            setattr(gym, attr, type(attr, (), {}))
    for attr in ("Box", "Discrete", "Space", "MultiDiscrete"):
        if not hasattr(gym.spaces, attr):
            setattr(gym.spaces, attr, type(attr, (), {}))
    pre = sys.modules["d3rlpy.preprocessing"]
    if not hasattr(pre, "ActionScaler"):
        pre.ActionScaler = object
    return importlib.import_module(f"scope_rl.ope.discrete.{module}")


def trajectories(n: int, seed: int) -> pd.DataFrame:
    """TabularMDP episodes of the full horizon (4 steps; the shorter ones are left out for
    both libraries: SCOPE-RL takes a fixed length) with Gaussian noise on every reward, so that
    no two returns tie and none lies on a grid point."""
    from ope.simulate import TabularMDP

    env = TabularMDP(n_states=4, n_actions=3, horizon=4, seed=seed)
    table = env.sample(n, rng=seed).to_pandas()
    length = table.groupby("episode_id")["step"].transform("size")
    table = table[length == length.max()].reset_index(drop=True)  # SCOPE-RL: fixed length
    noise = np.random.default_rng(seed + 1).normal(0.0, 0.3, len(table))
    return table.assign(reward=table["reward"] + noise)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scope-path", required=True, help="folder SCOPE-RL was installed to")
    parser.add_argument("--episodes", type=int, default=3000)
    parser.add_argument("--grid", type=int, default=200)
    args = parser.parse_args()
    import ope

    scope = load_scope_rl(args.scope_path)
    rows = []
    for seed in (0, 1, 2):
        table = trajectories(args.episodes, seed)
        horizon = int(table.groupby("episode_id").size().max())
        assert (table.groupby("episode_id").size() == horizon).all()
        traj = ope.read_trajectories(table)
        n_actions = int(table["action"].max()) + 1
        for name in ("softmax", "epsilon_greedy"):
            p = table[f"target__{name}"].to_numpy()
            dist = np.repeat(((1.0 - p) / (n_actions - 1))[:, None], n_actions, axis=1)
            dist[np.arange(len(table)), table["action"].to_numpy()] = p
            _, returns = ope.sequential.episode_weights(traj, name, tail_value=0.0)
            grid = np.linspace(returns.min() - 0.5, returns.max() + 0.5, args.grid)
            inputs = {
                "step_per_trajectory": horizon,
                "action": table["action"].to_numpy(),
                "reward": table["reward"].to_numpy(),
                "pscore": table["propensity"].to_numpy(),
                "evaluation_policy_action_dist": dist,
                "reward_scale": grid,
                "gamma": 1.0,
            }
            for estimator, cls in (
                ("ips", scope.CumulativeDistributionTIS),
                ("snips", scope.CumulativeDistributionSNTIS),
            ):
                theirs = cls().estimate_cumulative_distribution_function(**inputs)
                ours_dist = ope.return_distribution(
                    traj,
                    [name],
                    tail_value=0.0,
                    estimator=estimator,
                    resolution=len(returns) + 1,
                    n_resamples=100,
                    rng=0,
                )
                ours = ours_dist[name].cdf_at(grid)[0]
                below = (returns[:, None] < grid[None, :]).sum(axis=0)
                match = below >= 1
                match[0] = False  # SCOPE-RL's first grid point is 0 by construction
                rows.append(
                    {
                        "seed": seed,
                        "policy": name,
                        "estimator": f"{estimator} (SCOPE-RL {cls.__name__})",
                        "grid points compared": int(match.sum()),
                        "max |ope - SCOPE-RL|": float(np.max(np.abs(ours - theirs)[match])),
                        "points with no return below": int((below == 0).sum()),
                        "SCOPE-RL there (first weight / n)": float(theirs[1])
                        if below[1] == 0
                        else np.nan,
                    }
                )
    pd.set_option("display.width", 200)
    print(pd.DataFrame(rows).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
