"""The safety gate's false-approval rate (and power) for each bound mode, against exact values.

Each design is a context-free bandit with Bernoulli rewards: the logging policy plays arm ``a``
with probability ``p[a]``, arm ``a`` pays 1 with probability ``q[a]``, and the candidate always
plays one arm. Both values are exact finite sums, ``V(pi_0) = sum_a p[a] q[a]`` and
``V(pi) = q[candidate]``, so whether an approval is false has no Monte Carlo error. The clip
level ``M = 3`` is above every weight of the designs, so the gate's clipped estimand equals
``V(pi) - V(pi_0)`` exactly.

* ``boundary, uniform``: two arms both paying 0.5, uniform logging: V(pi) = V(pi_0);
* ``boundary, rare sure-win``: logging plays a sure-win arm with probability 0.002 and two arms
  with 0.499 each; the candidate plays the third arm, whose mean is set so that V(pi) = V(pi_0);
* ``worse by 0.001`` (the case the t mode fails): logging plays a sure-win arm with probability 0.002 and an arm
  paying 0.5 otherwise; the candidate never plays the sure-win arm: V(pi) - V(pi_0) = -0.001.
  With n rows, the sure-win arm is absent from the logs with probability 0.998**n (0.135 at
  n = 1,000), and then every paired difference is >= 0 with a tiny variance;
* ``better by 0.025`` (power): uniform logging over arms paying 0.5 and 0.55, candidate on the
  second arm.

Every approval on the first three designs is false (nominal rate <= 1 - confidence_level =
0.05); on the last every approval is right. The gate runs through ``ope.learning.certify``,
once per replication and mode (a certification is one call; the logs are drawn vectorized).

Run ``python benchmarks/bench_gate.py`` (2,000 replications per cell, about 1.5 minutes;
``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import format_table, write_result  # noqa: E402

from ope.learning import certify  # noqa: E402

CONFIDENCE = 0.95
MAX_WEIGHT = 3.0
MODES = ("t", "bernstein", "betting")
SIZES = (1_000, 10_000)

_Q2 = (0.002 + 0.499 * 0.5) / 0.501  # the rare sure-win design's candidate arm: V(pi) = V(pi_0)

#: name -> (logging probabilities p, arm reward means q, candidate arm)
DESIGNS: dict[str, tuple[tuple[float, ...], tuple[float, ...], int]] = {
    "boundary, uniform": ((0.5, 0.5), (0.5, 0.5), 1),
    "boundary, rare sure-win": ((0.002, 0.499, 0.499), (1.0, 0.5, _Q2), 2),
    "worse by 0.001": ((0.002, 0.998), (1.0, 0.5), 1),
    "better by 0.025": ((0.5, 0.5), (0.5, 0.55), 1),
}


def true_gap(design: str) -> float:
    """Exact V(pi) - V(pi_0) of a design."""
    p, q, arm = DESIGNS[design]
    return q[arm] - float(np.dot(p, q))


def draw_logs(design: str, reps: int, n: int, seed: int):
    """``reps`` independent logs of ``n`` rows: arrays (reps, n) of action, reward, propensity
    and the candidate's probability of the logged action."""
    p, q, arm = DESIGNS[design]
    rng = np.random.default_rng(seed)
    action = np.searchsorted(np.cumsum(p), rng.random((reps, n)), side="right")
    action = np.minimum(action, len(p) - 1)
    reward = (rng.random((reps, n)) < np.asarray(q)[action]).astype(float)
    propensity = np.asarray(p)[action]
    target = (action == arm).astype(float)
    return action, reward, propensity, target


def approval_rates(design: str, n: int, reps: int, seed: int) -> dict[str, dict[str, float]]:
    action, reward, propensity, target = draw_logs(design, reps, n, seed)
    out: dict[str, dict[str, float]] = {}
    for mode in MODES:
        start = time.perf_counter()
        approved = np.zeros(reps, dtype=bool)
        bounds = np.zeros(reps)
        for k in range(reps):  # one certification per replication (not a loop over rows)
            cert = certify(
                target[k],
                None,
                action[k],
                reward[k],
                propensity[k],
                reward_range=(0.0, 1.0),
                max_weight=MAX_WEIGHT,
                confidence_level=CONFIDENCE,
                ci=mode,
            )
            approved[k] = cert.approved
            bounds[k] = cert.improvement_lower_bound
        rate = float(approved.mean())
        out[mode] = {
            "approval_rate": rate,
            "std_error": math.sqrt(max(rate * (1 - rate), 1e-12) / reps),
            "mean_improvement_lower_bound": float(bounds.mean()),
            "seconds": time.perf_counter() - start,
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 replications (a smoke run)")
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    reps = 200 if args.quick else args.reps
    results = []
    for d_index, design in enumerate(DESIGNS):
        for n in SIZES:
            rates = approval_rates(design, n, reps, seed=1000 * d_index + n)
            results.append({"design": design, "n": n, "true_gap": true_gap(design), "modes": rates})
            print(
                f"{design} n={n}: "
                + ", ".join(f"{m} {r['approval_rate']:.4f}" for m, r in rates.items()),
                flush=True,
            )
    headers = (
        ["design", "V(pi)-V(pi_0)", "n"]
        + [f"{m} approval" for m in MODES]
        + [f"{m} mean LB" for m in MODES]
    )
    rows = [
        [r["design"], f"{r['true_gap']:+.4f}", f"{r['n']:,}"]
        + [f"{r['modes'][m]['approval_rate']:.4f}" for m in MODES]
        + [f"{r['modes'][m]['mean_improvement_lower_bound']:.4f}" for m in MODES]
        for r in results
    ]
    print(f"\n{reps} replications per cell, confidence_level={CONFIDENCE}, max_weight={MAX_WEIGHT}")
    print(format_table(headers, rows))
    write_result(
        "bench_gate",
        {
            "replications": reps,
            "confidence_level": CONFIDENCE,
            "max_weight": MAX_WEIGHT,
            "results": results,
        },
        out=args.out,
    )


if __name__ == "__main__":
    main()
