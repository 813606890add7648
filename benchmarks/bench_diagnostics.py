"""Benchmark: overlap diagnostics vs the evaluation pass alone.

P candidate policies over ``--rows`` logged rows with three segment columns (a small-integer
category, a continuous feature cut into quantile bins, and a string category). Three timings,
each the best of ``--repeat`` runs in this process:

* ``baseline_numpy`` -- the weight sums IPS/SNIPS and their standard errors need, in one chunked
  numpy/BLAS pass: ``W = Pe / p[:, None]``, then ``W.T @ [1, r]`` and ``(W * W).T @ [1, r^2]``;
* ``baseline_weight_moments`` -- ``ope.weights.weight_moments``, the project's evaluation kernel;
* ``diagnostics`` -- ``ope.diagnostics.diagnose_arrays`` with the three segment columns, a clip
  level and a reward range (everything in ``Diagnostics.table()`` and ``.segments()``).

The ratio diagnostics / baseline is the number to watch (target: at most 2). Wall-clock and CPU
(process) times are both recorded, with the load average, because on a shared machine the wall
time of either side moves with the other processes. Results are printed and written to
``benchmarks/results/bench_diagnostics.json``.

Usage::

    python benchmarks/bench_diagnostics.py --rows 10000000 --policies 8
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ope.diagnostics import diagnose_arrays
from ope.exceptions import OverlapWarning
from ope.weights import weight_moments

CHUNK = 1 << 18


def make_data(n: int, n_policies: int, n_actions: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    region = rng.integers(0, 12, n).astype(np.int64)
    age = rng.gamma(3.0, 12.0, n)
    device = pd.Categorical.from_codes(rng.integers(0, 3, n),
                                       categories=["desktop", "phone", "tablet"])
    # logging propensity of the logged action and target propensities (n, P)
    p = rng.uniform(0.5 / n_actions, 2.0 / n_actions, n)
    target = np.empty((n, n_policies))
    for j in range(n_policies):  # one column per policy: a mix of greedy and soft candidates
        if j % 2 == 0:
            target[:, j] = (rng.random(n) < 1.0 / n_actions).astype(np.float64)
        else:
            target[:, j] = rng.uniform(0.0, 2.0 / n_actions, n)
    reward = (rng.random(n) < 0.1).astype(np.float64)
    return {"reward": reward, "p": p, "target": target,
            "segments": {"region": region, "age": age, "device": device}}


def baseline_numpy(reward: np.ndarray, p: np.ndarray, target: np.ndarray) -> np.ndarray:
    n, k = target.shape
    out = np.zeros((4, k))
    for start in range(0, n, CHUNK):
        sl = slice(start, min(start + CHUNK, n))
        r = reward[sl]
        w = target[sl] / p[sl, None]
        out[:2] += np.stack([np.ones_like(r), r]) @ w
        out[2:] += np.stack([np.ones_like(r), r * r]) @ (w * w)
    return out


def best_of(fn, repeat: int) -> tuple[float, float]:
    """Best wall-clock and best CPU (process) time over ``repeat`` runs, in seconds."""
    wall = cpu = float("inf")
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall = min(wall, time.perf_counter() - w0)
        cpu = min(cpu, time.process_time() - c0)
    return wall, cpu


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--policies", type=int, default=8)
    parser.add_argument("--actions", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).parent / "results" / "bench_diagnostics.json")
    args = parser.parse_args(argv)

    data = make_data(args.rows, args.policies, args.actions, args.seed)
    r, p, t = data["reward"], data["p"], data["target"]

    def run_diagnostics():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", OverlapWarning)
            d = diagnose_arrays(r, p, t, segments=data["segments"], max_weight=50.0,
                                reward_range=(0.0, 1.0))
        return d.table(), d.segments()

    load_before = os.getloadavg()[0]
    measured = {
        "baseline_numpy": best_of(lambda: baseline_numpy(r, p, t), args.repeat),
        "baseline_weight_moments": best_of(lambda: weight_moments(r, p, t, max_weight=50.0),
                                           args.repeat),
        "diagnostics": best_of(run_diagnostics, args.repeat),
    }
    table, segments = run_diagnostics()
    wall = {k: v[0] for k, v in measured.items()}
    cpu = {k: v[1] for k, v in measured.items()}
    result = {
        "rows": args.rows,
        "policies": args.policies,
        "segment_columns": 3,
        "segments_per_policy": int(len(segments) // args.policies),
        "seconds_wall": wall,
        "seconds_cpu": cpu,
        "ratio_vs_numpy": wall["diagnostics"] / wall["baseline_numpy"],
        "ratio_vs_weight_moments": wall["diagnostics"] / wall["baseline_weight_moments"],
        "cpu_ratio_vs_numpy": cpu["diagnostics"] / cpu["baseline_numpy"],
        "load_average": [load_before, os.getloadavg()[0]],
        "cpu_count": os.cpu_count(),
        "machine": {"python": platform.python_version(), "numpy": np.__version__,
                    "processor": platform.processor() or platform.machine()},
    }
    for name in measured:
        print(f"{name:>26}: {wall[name]:8.3f} s wall  {cpu[name]:8.3f} s cpu")
    print(f"{'diagnostics / numpy pass':>26}: {result['ratio_vs_numpy']:8.2f}x wall, "
          f"{result['cpu_ratio_vs_numpy']:.2f}x cpu")
    print(f"{'diagnostics / weight_moments':>26}: {result['ratio_vs_weight_moments']:8.2f}x wall")
    print(f"{'load average (1 min)':>26}: {load_before:.1f} -> {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
