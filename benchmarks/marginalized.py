"""State-marginalized importance sampling on long horizons: ``mis`` and ``mis_dr`` against
per-decision IS as the horizon grows, with exact values.

Design: ``ope.simulate.TabularMDP(n_states=5, n_actions=3, horizon=H, gamma=0.98,
termination_probability=0.0, seed=0)`` for H = 10, 25, 50, 100, 200 (episodes run the whole horizon), the
candidates ``epsilon_greedy`` and ``softmax``, n = 500 episodes, ``--replications`` (default
300) each. Exact value: ``true_value`` (dynamic programming, truncated at H). Per (H,
candidate, estimator): the bias (with its Monte Carlo standard error), the standard deviation,
the RMSE, the coverage of the 95% normal interval and the median Kish effective sample of the
weights. ``dr`` and ``mis_dr`` use the exact per-step Q and V (``oracle=True``) times 0.8: a good
model that is not the truth.

Run: ``python benchmarks/marginalized.py [--replications 300]`` (a few minutes on 2 workers).
Writes ``benchmarks/results/marginalized.json``.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import format_table, write_result  # noqa: E402

HORIZONS = (10, 25, 50, 100, 200)
CANDIDATES = ("epsilon_greedy", "softmax")
ESTIMATORS = ("pdis", "wpdis", "dr", "wdr", "magic", "mis", "mis_dr")
EPISODES = 500
MODEL_SCALE = 0.8


def _env(horizon: int) -> Any:
    from ope.simulate import TabularMDP

    return TabularMDP(
        n_states=5, n_actions=3, horizon=horizon, gamma=0.98, termination_probability=0.0, seed=0
    )


def _run(seed: int, horizon: int) -> dict[str, Any]:
    import ope
    from ope.sequential import sequential_estimate

    env = _env(horizon)
    table = env.sample(EPISODES, rng=seed, oracle=True)
    traj = ope.read_trajectories(table)
    out: dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for p in CANDIDATES:
            q = MODEL_SCALE * table.column(f"q_target__{p}").to_numpy()
            v = MODEL_SCALE * table.column(f"v_target__{p}").to_numpy()
            for e in ESTIMATORS:
                model = {"q_hat": q, "v_hat": v} if e in ("dr", "wdr", "magic", "mis_dr") else {}
                try:
                    res = sequential_estimate(traj, p, estimator=e, gamma=env.gamma, **model)
                except ope.EstimationError:  # cumulative weights beyond float64
                    out[f"{p}/{e}"] = None
                    continue
                out[f"{p}/{e}"] = (res.value, res.ci_low, res.ci_high, res.ess)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replications", type=int, default=300)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="60 replications")
    args = parser.parse_args(argv)
    reps = 60 if args.quick else args.replications
    result: dict[str, Any] = {"replications": reps, "episodes": EPISODES, "by_horizon": {}}
    rows = []
    with ProcessPoolExecutor(args.workers) as pool:
        for h in HORIZONS:
            env = _env(h)
            runs = list(pool.map(_run, range(reps), [h] * reps))
            cell: dict[str, Any] = {}
            for p in CANDIDATES:
                truth = env.true_value(p)
                for e in ESTIMATORS:
                    got = [r[f"{p}/{e}"] for r in runs if r[f"{p}/{e}"] is not None]
                    failed = reps - len(got)
                    if not got:
                        cell[f"{p}/{e}"] = {"failed": failed}
                        rows.append([h, p, e, "", "", "", "", "", f"{failed} overflow"])
                        continue
                    v = np.array([g[0] for g in got])
                    cover = np.mean([g[1] <= truth <= g[2] for g in got])
                    stats = {
                        "truth": truth,
                        "bias": float(v.mean() - truth),
                        "bias_se": float(v.std(ddof=1) / np.sqrt(v.size)),
                        "sd": float(v.std(ddof=1)),
                        "rmse": float(np.sqrt(np.mean((v - truth) ** 2))),
                        "coverage": float(cover),
                        "median_ess": float(np.median([g[3] for g in got])),
                        "failed": failed,
                    }
                    cell[f"{p}/{e}"] = stats
                    rows.append(
                        [
                            h,
                            p,
                            e,
                            f"{stats['bias']:+.3f} ({stats['bias_se']:.3f})",
                            f"{stats['sd']:.3f}",
                            f"{stats['rmse']:.3f}",
                            f"{stats['coverage']:.3f}",
                            f"{stats['median_ess']:.0f}",
                            str(failed) if failed else "",
                        ]
                    )
            result["by_horizon"][str(h)] = cell
            print(f"horizon {h} done", flush=True)
    print(
        f"\n{EPISODES} episodes, {reps} replications; exact values by dynamic programming; "
        f"dr and mis_dr with {MODEL_SCALE} x the exact Q and V"
    )
    print(
        format_table(
            [
                "H",
                "candidate",
                "estimator",
                "bias (MC se)",
                "sd",
                "RMSE",
                "coverage",
                "ESS",
                "overflow",
            ],
            rows,
        )
    )
    path = write_result("marginalized", result)
    print(f"\nwritten to {path}")


if __name__ == "__main__":
    main()
