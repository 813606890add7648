"""Time-uniform coverage of ope.monitor's confidence sequences, under a fixed logger and under an
epsilon-greedy logger that learns, against a naive fixed-n peeker.

Design (exact truth): 10 equally likely context types, 4 actions, Bernoulli rewards with a
known mean table; the candidate puts 0.9 (+0.025) on each context's best action. The fixed
logger is uniform; the learning logger is epsilon-greedy (epsilon = 0.2) on the running mean
reward of its own logs per (context, action), updated after each batch, so its propensities
change from look to look. Each run has 100 looks of 200 rows. The value target is the
candidate's exact value; the difference target is that value minus the average, over the rows
so far, of the logger's exact value at each row's time.

Reported per design and method (ope.monitor's betting IPS, asymptotic IPS and asymptotic DR;
95%): the share of runs in which the truth ever leaves the sequence over the 100 looks (value,
difference), the mean width of the value sequence at looks 10 and 100 next to the fixed-n normal
interval of IPS at the same rows, the look of the first decision, and, in the null designs
(rewards that do not depend on the action, so every policy's value equals the logger's), the
share of runs that ever decide ("false stops"), against a naive peeker who recomputes the
fixed-n normal interval of the IPS difference at every look and stops when it excludes 0.

Run: ``python benchmarks/monitoring.py`` (500 runs per design; ``--runs`` to change; two
worker processes by default, ``--workers``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

N_CONTEXTS = 10
N_ACTIONS = 4
LOOKS = 100
BATCH = 200
EPSILON = 0.2
LEVEL = 0.95
METHODS = (("ips", "betting"), ("ips", "asymptotic"), ("dr", "asymptotic"))


def _design(null: bool, seed: int = 12345) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    mu = rng.uniform(0.1, 0.9, (N_CONTEXTS, N_ACTIONS))
    if null:  # rewards that ignore the action: every policy has the logger's value
        mu = np.repeat(mu.mean(axis=1, keepdims=True), N_ACTIONS, axis=1)
    candidate = np.full((N_CONTEXTS, N_ACTIONS), 0.1 / N_ACTIONS)
    best = np.random.default_rng(seed + 1).permuted(np.arange(N_ACTIONS))
    candidate[np.arange(N_CONTEXTS), np.argmax(mu + 1e-9 * best, axis=1)] += 0.9
    return mu, candidate


def _batch(rng: np.random.Generator, logger: np.ndarray, mu: np.ndarray, cand: np.ndarray):
    import pyarrow as pa

    c = rng.integers(0, N_CONTEXTS, BATCH)
    probs = logger[c]
    a = (probs.cumsum(axis=1) > rng.random(BATCH)[:, None]).argmax(axis=1)
    r = rng.binomial(1, mu[c, a]).astype(float)
    columns = {
        "action": pa.array(a),
        "propensity": pa.array(probs[np.arange(BATCH), a]),
        "reward": pa.array(r),
        "target__candidate": pa.array(cand[c, a]),
        "candidates": pa.array([list(range(N_ACTIONS))] * BATCH),
        "target_dist__candidate": pa.array(list(cand[c])),
    }
    for j in range(N_CONTEXTS):
        columns[f"x{j}"] = pa.array((c == j).astype(float))
    return pa.table(columns), c, a, r


def _run(args: tuple[int, bool, bool]) -> dict[str, float]:
    import warnings

    from ope.io import read_logs
    from ope.monitor import Monitor

    seed, learning, null = args
    warnings.simplefilter("ignore")
    mu, cand = _design(null)
    theta = float((cand * mu).sum(axis=1).mean())
    rng = np.random.default_rng(seed)
    logger = np.full((N_CONTEXTS, N_ACTIONS), 1.0 / N_ACTIONS)
    sums = np.zeros((N_CONTEXTS, N_ACTIONS))
    counts = np.zeros((N_CONTEXTS, N_ACTIONS))
    monitors = [
        Monitor(reward_range=(0.0, 1.0), estimator=e, method=m, rng=seed) for e, m in METHODS
    ]
    out: dict[str, float] = {}
    missed_value = np.zeros(len(METHODS), bool)
    missed_diff = np.zeros(len(METHODS), bool)
    decided_at = np.full(len(METHODS), np.nan)
    logger_value_sum = 0.0
    diffs: list[np.ndarray] = []
    values: list[np.ndarray] = []
    naive_stop = False
    for look in range(1, LOOKS + 1):
        table, c, a, r = _batch(rng, logger, mu, cand)
        logs = read_logs(table)
        logger_value_sum += BATCH * float((logger * mu).sum(axis=1).mean())
        delta = theta - logger_value_sum / (look * BATCH)
        for k, mon in enumerate(monitors):
            row = mon.update(logs).current.iloc[0]
            missed_value[k] |= not (row["ci_low"] <= theta <= row["ci_high"])
            missed_diff[k] |= not (row["difference_low"] <= delta <= row["difference_high"])
            if np.isnan(decided_at[k]) and row["decision"] != "undecided":
                decided_at[k] = look
            if look in (10, 100):
                out[f"width{look}_{k}"] = float(row["ci_high"] - row["ci_low"])
        w = cand[c, a] / logger[c, a]
        values.append(w * r)
        diffs.append(w * r - r)
        d = np.concatenate(diffs)
        half = 1.959964 * d.std(ddof=1) / np.sqrt(d.size)
        naive_stop |= abs(d.mean()) > half
        if look in (10, 100):
            v = np.concatenate(values)
            out[f"width{look}_fixed"] = float(2 * 1.959964 * v.std(ddof=1) / np.sqrt(v.size))
        if learning:  # epsilon-greedy on its own running means, updated after each batch
            np.add.at(sums, (c, a), r)
            np.add.at(counts, (c, a), 1.0)
            means = np.where(counts > 0, sums / np.maximum(counts, 1.0), 1.0)
            logger = np.full((N_CONTEXTS, N_ACTIONS), EPSILON / N_ACTIONS)
            logger[np.arange(N_CONTEXTS), means.argmax(axis=1)] += 1.0 - EPSILON
    for k in range(len(METHODS)):
        out[f"miss_value_{k}"] = float(missed_value[k])
        out[f"miss_diff_{k}"] = float(missed_diff[k])
        out[f"decided_{k}"] = decided_at[k]
    out["naive_stop"] = float(naive_stop)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    args = parser.parse_args()
    rows = []
    start = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        for learning in (False, True):
            for null in (False, True):
                jobs = [(1000 * s + 7, learning, null) for s in range(args.runs)]
                res = pd.DataFrame(list(pool.map(_run, jobs, chunksize=10)))
                for k, (est, meth) in enumerate(METHODS):
                    rows.append(
                        {
                            "logger": "epsilon-greedy" if learning else "fixed",
                            "design": "null" if null else "alternative",
                            "method": f"{est} {meth}",
                            "miss_value": res[f"miss_value_{k}"].mean(),
                            "miss_difference": res[f"miss_diff_{k}"].mean(),
                            "width_10": res[f"width10_{k}"].mean(),
                            "width_100": res[f"width100_{k}"].mean(),
                            "fixed_n_width_10": res["width10_fixed"].mean(),
                            "fixed_n_width_100": res["width100_fixed"].mean(),
                            "decided_share": res[f"decided_{k}"].notna().mean(),
                            "median_decision_look": res[f"decided_{k}"].median(),
                            "naive_false_stop": res["naive_stop"].mean() if null else np.nan,
                        }
                    )
    table = pd.DataFrame(rows)
    pd.set_option("display.width", 200)
    print(f"{args.runs} runs x {LOOKS} looks of {BATCH} rows per design, level {LEVEL}")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(
        "miss_*: share of runs in which the truth ever left the sequence (target <= 0.05); "
        "in the null designs decided_share is the false-stop rate, next to the naive peeker's."
    )
    seconds = time.perf_counter() - start
    print(f"total {seconds:.0f} s")
    out = Path(__file__).parent / "results" / "monitoring.json"
    out.write_text(
        json.dumps(
            {
                "runs": args.runs,
                "looks": LOOKS,
                "batch": BATCH,
                "seconds": round(seconds),
                "rows": table.to_dict(orient="records"),
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
