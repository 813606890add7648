"""Coverage of ``ope.outcome_distribution``'s simultaneous bands, and of the quantile and CVaR
intervals read from them, against the exact reward distribution of a simulator.

Usage::

    python benchmarks/coverage_distribution.py                     # 300 replications
    python benchmarks/coverage_distribution.py --replications 100
    python benchmarks/coverage_distribution.py --quick             # a smoke run

The environment: ``ope.simulate.ContextualBandit(n_actions=5, n_contexts=50,
reward="gaussian", reward_noise=0.5, logging_temperature=3.0, logging_epsilon=0.2, seed=0)``;
its exact CDF under each candidate is ``env.outcome_cdf`` (a mixture of normals), its quantiles
are found by bisection on it and its lower CVaR at level a is
``(1/a) sum p pi (mu Phi(z) - sigma phi(z))`` with ``z = (q_a - mu) / sigma``. The band is
checked on 400 thresholds spanning the truth's 0.1% to 99.9% quantiles (``covers all``: every
one inside, the band's promise) for the five candidates; ``quantile 0.5``, ``quantile 0.9``
and ``cvar 0.1`` report whether the interval read from the band holds the truth. CVaR bounds
need closed tails: the study passes ``outcome_range`` = the smallest and largest mean reward
-/+ 6 noise standard deviations (a row falls outside with probability below 2e-9).

Configurations: IPS with the finite-sample band (``weight_bound`` = 1 / the logger's smallest
probability), IPS, SNIPS and DR (its default model: 16 cross-fitted ridge regressions of the
indicators on the five context features) with the multiplier band. Writes
``benchmarks/results/coverage_distribution.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import format_table, write_result  # noqa: E402

ENV = dict(
    n_actions=5,
    n_contexts=50,
    reward="gaussian",
    reward_noise=0.5,
    logging_temperature=3.0,
    logging_epsilon=0.2,
    seed=0,
)

CONFIGS: dict[str, dict[str, Any]] = {
    "IPS, finite-sample band": dict(estimator="ips", band="hoeffding"),
    "IPS, multiplier band": dict(estimator="ips", band="multiplier"),
    "SNIPS, multiplier band": dict(estimator="snips", band="multiplier"),
    "DR, multiplier band": dict(estimator="dr", band="multiplier"),
}

LEVELS = (0.5, 0.9)
CVAR_LEVEL = 0.1


def truths(env: Any, policy: str, grid: np.ndarray) -> dict[str, Any]:
    """The exact CDF on ``grid``, the quantiles at :data:`LEVELS` and the lower CVaR."""
    from scipy.special import ndtr

    cdf = env.outcome_cdf(policy, grid)

    def quantile(u: float) -> float:
        lo, hi = float(grid[0]) - 5.0, float(grid[-1]) + 5.0
        for _ in range(80):  # bisection on the exact CDF
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if env.outcome_cdf(policy, mid) < u else (lo, mid)
        return 0.5 * (lo + hi)

    quantiles = {u: quantile(u) for u in (*LEVELS, CVAR_LEVEL)}
    table = env.policy_table(policy)
    mass = (env._probs[:, None] * table).ravel()
    mu = env.reward_means.ravel()
    sigma = env.reward_noise
    z = (quantiles[CVAR_LEVEL] - mu) / sigma
    phi = np.exp(-0.5 * z * z) / np.sqrt(2 * np.pi)
    cvar = float(np.sum(mass * (mu * ndtr(z) - sigma * phi)) / CVAR_LEVEL)
    return {"cdf": cdf, "quantiles": quantiles, "cvar": cvar}


def run(n: int, reps: int) -> list[dict[str, Any]]:
    import ope
    from ope.simulate import ContextualBandit

    env = ContextualBandit(**ENV)
    policies = list(env.candidate_policies)
    lo_mean, hi_mean = float(env.reward_means.min()), float(env.reward_means.max())
    span = (lo_mean - 6 * env.reward_noise, hi_mean + 6 * env.reward_noise)
    bound = float(1.0 / env.policy_table("logging").min())
    grids, truth = {}, {}
    for p in policies:
        coarse = np.linspace(span[0], span[1], 4001)
        cdf = env.outcome_cdf(p, coarse)
        a, b = coarse[np.searchsorted(cdf, 0.001)], coarse[np.searchsorted(cdf, 0.999)]
        grids[p] = np.linspace(a, b, 400)
        truth[p] = truths(env, p, grids[p])
    keys = ("covers all", *(f"quantile {u}" for u in LEVELS), f"cvar {CVAR_LEVEL}")
    hits = {c: {k: 0 for k in keys} for c in CONFIGS}
    widths: dict[str, list[float]] = {c: [] for c in CONFIGS}
    seconds: dict[str, float] = {c: 0.0 for c in CONFIGS}
    for rep in range(reps):  # a loop over replications
        logs = ope.read_logs(env.sample(n, rng=rep, distributions=True))
        for name, config in CONFIGS.items():  # a loop over the configurations
            extra = {"weight_bound": bound} if config["band"] == "hoeffding" else {}
            started = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                d = ope.outcome_distribution(logs, outcome_range=span, rng=rep, **config, **extra)
            seconds[name] += time.perf_counter() - started
            for p in policies:  # a loop over the five candidates
                dist, true = d[p], truth[p]
                _, low, high = dist.cdf_at(grids[p])
                hits[name]["covers all"] += bool(
                    np.all((low <= true["cdf"] + 1e-12) & (true["cdf"] <= high + 1e-12))
                )
                for u in LEVELS:
                    _, qlo, qhi = dist.quantile(np.array([u]))
                    hits[name][f"quantile {u}"] += bool(qlo[0] <= true["quantiles"][u] <= qhi[0])
                _, clo, chi = dist.cvar(CVAR_LEVEL)
                hits[name][f"cvar {CVAR_LEVEL}"] += bool(clo <= true["cvar"] <= chi)
                widths[name].append(dist.half_width)
    total = reps * len(policies)
    return [
        {
            "configuration": name,
            "n": n,
            "replications": reps,
            "coverage": {k: v / total for k, v in hits[name].items()},
            "mean_half_width": float(np.mean(widths[name])),
            "seconds_per_call": seconds[name] / reps,
        }
        for name in CONFIGS
    ]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 replications at n = 1,000")
    parser.add_argument("--replications", type=int, default=300)
    parser.add_argument("--n", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    sizes, reps = ([1_000], 3) if args.quick else (args.n, args.replications)
    rows = [row for n in sizes for row in run(n, reps)]
    result = {"replications": reps, "rows": rows, "seconds": time.perf_counter() - started}
    keys = list(rows[0]["coverage"])
    table = [
        [
            r["configuration"],
            f"{r['n']:,}",
            *(f"{r['coverage'][k]:.3f}" for k in keys),
            f"{r['mean_half_width']:.4f}",
            f"{r['seconds_per_call']:.3f}",
        ]
        for r in rows
    ]
    print(f"coverage at nominal 0.95 over {reps} replications x 5 candidates")
    print(format_table(["configuration", "n", *keys, "half-width", "s / call"], table))
    path = write_result(
        "coverage_distribution" + ("_quick" if args.quick else ""), result, out=args.out
    )
    print(f"wrote {path} ({result['seconds']:.0f} s)")
    return result


if __name__ == "__main__":
    main()
