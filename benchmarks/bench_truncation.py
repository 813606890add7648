"""Truncation done right vs truncation treated as termination, against exact values.

On ``TabularMDP(n_states=6, n_actions=3, horizon=20, gamma=0.95, termination_probability=0.03,
seed=1)``, 4,000 on-policy episodes (the set-up of ``tests/test_returns.py``): the mean discounted
return at t = 0 and the mean TD error at the last step (under the exact V), with the tail value
of truncated episodes taken as the exact V of the state they were left in, and as 0. Then the
time of ``gae`` on 2M steps in episodes of 1 to 199 steps (median of 5 warm calls).

Usage::

    python benchmarks/bench_truncation.py
"""

from __future__ import annotations

import math
import time

import numpy as np

from ope import discounted_returns, gae, read_trajectories, td_errors
from ope.simulate import TabularMDP


def main() -> None:
    env = TabularMDP(
        n_states=6, n_actions=3, horizon=20, gamma=0.95, termination_probability=0.03, seed=1
    )
    traj = read_trajectories(env.sample(4000, rng=11))
    pi = env.policy_table("logging")
    v_true = np.einsum("sa,sa->s", pi, env.discounted_q_function("logging"))
    state, nxt = traj.column("state"), traj.column("next_state")
    v = v_true[state]
    v_next = np.where(nxt >= 0, v_true[np.maximum(nxt, 0)], 0.0)
    first = traj.episode_starts[:-1]
    last = traj.column("step") == env.horizon - 1
    print(
        f"{traj.n_episodes} episodes, {traj.truncated.mean():.0%} truncated; exact value "
        f"{env.true_value('logging', horizon=math.inf):.3f} (untruncated), "
        f"{env.true_value('logging'):.3f} ({env.horizon} steps)"
    )
    for label, tail in (("tail = exact V(s_L)", v_next), ("truncation as termination", 0.0)):
        g = discounted_returns(traj, gamma=env.gamma, tail_value=tail)[first]
        d = td_errors(traj, values=v, gamma=env.gamma, tail_value=tail)[last]
        print(
            f"  {label:<26} mean return at t=0 {g.mean():.3f} ± {g.std(ddof=1) / math.sqrt(g.size):.3f}"
            f"   mean TD error at the last step {d.mean():+.3f} ± "
            f"{d.std(ddof=1) / math.sqrt(d.size):.3f}"
        )
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 200, 20_000)
    lengths = lengths[: np.searchsorted(np.cumsum(lengths), 2_000_000)]
    n = int(lengths.sum())
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    done = np.zeros(n, dtype=bool)
    done[starts + lengths - 1] = True
    reward, values = rng.random(n), rng.random(n)
    times = []
    for _ in range(6):
        t0 = time.perf_counter()
        gae(reward, values=values, gamma=0.99, lam=0.95, done=done, episode_starts=starts)
        times.append(time.perf_counter() - t0)
    print(f"gae on {n:,} steps in {lengths.size:,} episodes: {1e3 * np.median(times[1:]):.0f} ms")


if __name__ == "__main__":
    main()
