"""Bias and interval coverage of the slate estimators against exact truth.

For each click model of ``ope.simulate.SlateEnvironment`` (additive, cascade; 5 items, 3 slots,
4 contexts, Plackett-Luce logger) and each candidate, every slate estimator of ``ope.slates``
(slate IPS, independent IPS, cascade IPS, pseudoinverse, and their self-normalized versions) is
run on ``--replications`` independent logs of n slates. The table gives, per estimator x click
model x n: the bias of the mean estimate against the exact value (and in units of its Monte
Carlo standard error), the exact bias of the unnormalized estimators
(``expected_estimate - true_value``, by enumeration), the RMSE, the coverage of the 95% normal
interval and its mean width.

Usage::

    python benchmarks/bench_slates.py            # 1,000 replications, n = 250, 1,000, 4,000
    python benchmarks/bench_slates.py --quick    # 200 replications, n = 250, 1,000
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import format_table, write_result  # noqa: E402

import ope.slates as S  # noqa: E402
from ope.simulate import SlateEnvironment  # noqa: E402

ESTIMATORS = (S.SlateIPS(), S.IndependentIPS(), S.CascadeIPS(), S.PseudoInverse())
ESTIMATORS = ESTIMATORS + tuple(type(e)(self_normalized=True) for e in ESTIMATORS)


def cell_rows(click_model: str, candidate: str, n: int, reps: int, seed: int) -> list[dict]:
    env = SlateEnvironment(click_model=click_model, seed=0)
    lg, tp = env.policy("logging"), env.policy(candidate)
    truth = env.true_value(candidate)
    big = env.sample_logs(reps * n, rng=seed)
    vals = np.empty((len(ESTIMATORS), reps))
    lo, hi = np.empty_like(vals), np.empty_like(vals)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for r in range(reps):  # loop over replications; each estimate is vectorized
            sl = slice(r * n, (r + 1) * n)
            logs = S.SlateLogs(
                slate_id=big.slate_id[sl],
                item=big.item[sl],
                reward=big.reward[sl],
                propensity=big.propensity[sl],
                slate_propensity=big.slate_propensity[sl],
                prefix_propensity=big.prefix_propensity[sl],
                context=big.context[sl],
            )
            for j, est in enumerate(ESTIMATORS):
                res = est.estimate(logs, tp, logging=lg)
                vals[j, r], lo[j, r], hi[j, r] = res.value, res.ci_low, res.ci_high
    rows = []
    for j, est in enumerate(ESTIMATORS):
        v = vals[j]
        mc_se = v.std(ddof=1) / math.sqrt(reps)
        exact = (
            math.nan if est.self_normalized else env.expected_estimate(est.name, candidate) - truth
        )
        rows.append(
            {
                "click_model": click_model,
                "candidate": candidate,
                "n": n,
                "estimator": est.estimator_name,
                "truth": truth,
                "bias": float(v.mean() - truth),
                "bias_z": float((v.mean() - truth) / mc_se),
                "exact_bias": exact,
                "rmse": float(np.sqrt(np.mean((v - truth) ** 2))),
                "coverage": float(np.mean((lo[j] <= truth) & (truth <= hi[j]))),
                "mean_width": float(np.mean(hi[j] - lo[j])),
            }
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--replications", type=int, default=None)
    args = ap.parse_args()
    reps = args.replications or (200 if args.quick else 1000)
    ns = (250, 1000) if args.quick else (250, 1000, 4000)
    t0 = time.perf_counter()
    rows: list[dict] = []
    for cm in ("additive", "cascade"):
        for cand in ("greedy", "similar"):
            for k, n in enumerate(ns):
                rows += cell_rows(cm, cand, n, reps, seed=1000 + 10 * k + len(rows))
    headers = (
        "click_model",
        "candidate",
        "n",
        "estimator",
        "bias",
        "bias_z",
        "exact_bias",
        "rmse",
        "coverage",
        "mean_width",
    )
    print(f"slate estimators, {reps} replications, 95% normal intervals")
    print(format_table(headers, [[r[h] for h in headers] for r in rows]))
    path = write_result(
        "bench_slates",
        {"replications": reps, "n": list(ns), "rows": rows, "seconds": time.perf_counter() - t0},
    )
    print(f"saved {path}")


if __name__ == "__main__":
    main()
