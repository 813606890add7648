"""Coverage of the logarithmic-smoothing lower bound, beside betting's and the normal one.

``Estimate.ci(method="log_smoothing")`` of IPS gives the one-sided interval ``[L, r_max]`` of
Sakhi et al. (NeurIPS 2024): finite-sample, no weight bound (``ope.intervals.smoothing``). On
the bandit designs of ``benchmarks/coverage_bandit.py`` (exact values; ``heavy`` has weights up
to 86, ``rare large`` rewards of 100 with probability 0.002 to 0.02), this prints for each
design and n the share of replications whose lower bound is at most the value (nominal 0.95,
one-sided), and the mean distance from the value to the lower end, for the log-smoothing bound,
the lower end of the betting interval (two-sided 0.95, so its lower end alone holds at 0.975)
and the lower end of the normal interval.

Usage::

    python benchmarks/log_smoothing.py                 # 500 replications, ~1 min
    python benchmarks/log_smoothing.py --reps 2000
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import format_table  # noqa: E402
from coverage_bandit import make_designs  # noqa: E402


def run(
    reps: int, sizes: tuple[int, ...], seed: int = 0, designs: tuple[str, ...] | None = None
) -> list[list[object]]:
    """One row per design and n: design, n, the share of replications each lower end held
    (log smoothing, betting, normal) and its mean distance below the value."""
    import ope.estimators as oe

    rng = np.random.default_rng(seed)
    rows: list[list[object]] = []
    for d in make_designs():
        if designs is not None and d.name not in designs:
            continue
        c = d.cells
        for n in sizes:
            held = {"log_smoothing": [], "betting": [], "normal": []}
            gap = {k: [] for k in held}
            for _ in range(reps):  # loop over replications
                pick = rng.choice(c["prob"].size, size=n, p=c["prob"])
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    est = oe.IPS().estimate(
                        reward=c["r"][pick],
                        logging_propensity=c["propensity"][pick],
                        target_propensity=c["target_propensity"][pick],
                        reward_range=d.reward_range,
                    )
                for method in held:
                    low = est.ci(method=method).low
                    held[method].append(low <= d.truth)
                    gap[method].append(d.truth - low)
            rows.append(
                [d.name, n]
                + [float(np.mean(held[m])) for m in held]
                + [float(np.mean(gap[m])) for m in gap]
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=500)
    parser.add_argument("--sizes", default="100,1000,10000")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    rows = run(args.reps, tuple(int(x) for x in args.sizes.split(",")))
    headers = [
        "design",
        "n",
        "held LS",
        "held betting",
        "held normal",
        "gap LS",
        "gap betting",
        "gap normal",
    ]
    print(format_table(headers, rows))
    print(f"\n{args.reps} replications per cell, {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
