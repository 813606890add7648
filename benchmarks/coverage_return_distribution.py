"""Coverage of ``ope.return_distribution``'s simultaneous bands (IPS, SNIPS and DR) against the
return distribution of trajectories drawn from the candidate itself.

Usage::

    python benchmarks/coverage_return_distribution.py                 # 300 replications
    python benchmarks/coverage_return_distribution.py --quick         # a smoke run

The environment: ``ope.simulate.TabularMDP(n_states=4, n_actions=3, horizon=5, seed=0)``,
returns undiscounted (gamma = 1; an episode that ends early has the return it accumulated, as
``tail_value=0``). Its return distribution under a candidate is a discrete distribution the
simulator does not give in closed form; the truth is the empirical CDF of ``--truth-episodes``
episodes drawn from the candidate (1,000,000 by default: its standard error is below 0.0005 at
every threshold), and a band "covers" when the truth lies inside it up to ``TOLERANCE`` at every
logged return (the thresholds of the band; this MDP's returns are the integers 0 to 5, so they
are every point of the support). Per candidate, logged episode count and estimator: the share of
replications covered (nominal 0.95), the mean band half-width, and the mean largest distance
between the estimated and the true CDF. DR models the return's CDF given the first state
(cross-fitted over two folds of episodes).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Final

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import format_table, write_result  # noqa: E402

#: Slack of the coverage check for the Monte Carlo error of the truth.
TOLERANCE: Final = 1e-3
CANDIDATES: Final = ("softmax", "epsilon_greedy")
ESTIMATORS: Final = ("ips", "snips", "dr")


def environment() -> Any:
    from ope.simulate import TabularMDP

    return TabularMDP(n_states=4, n_actions=3, horizon=5, seed=0)


def true_returns(env: Any, policy: str, episodes: int) -> np.ndarray:
    """Sorted returns of ``episodes`` episodes drawn from ``policy`` itself (in batches)."""
    out = []
    batch = 200_000
    for k, start in enumerate(range(0, episodes, batch)):  # a loop over batches of episodes
        table = env.sample(min(batch, episodes - start), rng=10_000 + k, logging_policy=policy)
        ep = table.column("episode_id").to_numpy()
        reward = table.column("reward").to_numpy()
        starts = np.flatnonzero(np.r_[True, ep[1:] != ep[:-1]])
        out.append(np.add.reduceat(reward, starts))
    return np.sort(np.concatenate(out))


def run(n: int, reps: int, truth: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    import ope

    env = environment()
    stats = {
        (p, e): {"covered": 0, "width": [], "error": [], "seconds": 0.0}
        for p in CANDIDATES
        for e in ESTIMATORS
    }
    for rep in range(reps):  # a loop over replications
        traj = ope.read_trajectories(env.sample(n, rng=rep))
        for e in ESTIMATORS:
            started = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                found = ope.return_distribution(
                    traj, list(CANDIDATES), tail_value=0.0, estimator=e, rng=rep
                )
            seconds = time.perf_counter() - started
            for p in CANDIDATES:
                d = found[p]
                true_cdf = np.searchsorted(truth[p], d.edges, side="right") / truth[p].size
                s = stats[(p, e)]
                s["covered"] += bool(
                    np.all((true_cdf >= d.lower - TOLERANCE) & (true_cdf <= d.upper + TOLERANCE))
                )
                s["width"].append(d.half_width)
                s["error"].append(float(np.max(np.abs(d.cdf - true_cdf))))
                s["seconds"] += seconds / len(CANDIDATES)
    return [
        {
            "policy": p,
            "estimator": e,
            "n": n,
            "coverage": s["covered"] / reps,
            "mean_half_width": float(np.mean(s["width"])),
            "mean_sup_error": float(np.mean(s["error"])),
            "seconds_per_call": s["seconds"] / reps,
        }
        for (p, e), s in stats.items()
    ]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 replications at n = 1,000")
    parser.add_argument("--replications", type=int, default=300)
    parser.add_argument("--n", type=int, nargs="+", default=[1_000, 5_000])
    parser.add_argument("--truth-episodes", type=int, default=1_000_000)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    sizes, reps = ([1_000], 3) if args.quick else (args.n, args.replications)
    env = environment()
    truth = {p: true_returns(env, p, args.truth_episodes) for p in CANDIDATES}
    rows = [row for n in sizes for row in run(n, reps, truth)]
    result = {"replications": reps, "rows": rows, "seconds": time.perf_counter() - started}
    table = [
        [
            r["policy"],
            r["estimator"],
            f"{r['n']:,}",
            f"{r['coverage']:.3f}",
            f"{r['mean_half_width']:.4f}",
            f"{r['mean_sup_error']:.4f}",
        ]
        for r in rows
    ]
    print(f"return distributions: band coverage at nominal 0.95 over {reps} replications")
    print(
        format_table(
            ["candidate", "estimator", "episodes", "covers", "half-width", "sup error"], table
        )
    )
    path = write_result(
        "coverage_return_distribution" + ("_quick" if args.quick else ""), result, out=args.out
    )
    print(f"wrote {path} ({result['seconds']:.0f} s)")
    return result


if __name__ == "__main__":
    main()
