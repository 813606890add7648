"""Kernel estimators for continuous actions (``ope.evaluate_continuous``): parity with Open
Bandit Pipeline, the bias/variance trade-off of the bandwidth, and the coverage of the default
(SLOPE++, then undersmoothed) intervals.

Design: ``ope.simulate.ContinuousBandit(seed=0)`` (2 context features, a Gaussian logger of
scale 1, reward ``1 + e'x - (a - theta'x)^2 + N(0, 0.5^2)``), its five candidates (four
deterministic, ``noisy_optimal`` stochastic with exact density weights). Exact values: the
candidate's and the kernel-smoothed candidate's (``smoothed_value``: the value minus
``h^2 mu_2(K)``).

1. **Parity** (``--obp-python PATH``, a Python with ``obp==0.5.7``; obp is not a dependency of
   ope): on one sample of 5,000 rows, for each of the four kernels and two bandwidths, ope's
   kernel IPS, SNIPS and DR against obp's ``KernelizedInverseProbabilityWeighting``,
   ``KernelizedSelfNormalizedInverseProbabilityWeighting`` and ``KernelizedDoublyRobust`` on
   the same arrays (DR with the model at the candidate's action in both places, obp's form, given
   to ope as ``q_column``/``v_column``), and both against the formula in numpy.
2. **Trade-off** (gaussian kernel, n = 4,000, ``--replications`` each): per fixed bandwidth the
   mean and standard deviation of kernel IPS for ``optimal``; its bias against the exact
   smoothing bias ``-h^2 mu_2`` (bias proportional to h^2) and ``n h Var`` (about constant:
   variance proportional to 1 / (n h)).
3. **Coverage** (n = 2,000 and 10,000, gaussian and epanechnikov kernels, ``--replications``
   each): with the default bandwidth rule, the share of 95% normal intervals holding the
   candidate's value, and holding the smoothed value; the same at SLOPE's own bandwidth (not
   undersmoothed) for contrast; IPS, SNIPS and DR.

Run: ``python benchmarks/continuous.py [--replications 300] [--obp-python PATH]`` (about three
minutes on 2 workers). Writes ``benchmarks/results/continuous.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import format_table, write_result  # noqa: E402

DEFAULT_OBP_PYTHON = "/tmp/obp-venv/bin/python"
KERNELS = ("gaussian", "epanechnikov", "triangular", "cosine")
PARITY_BANDWIDTHS = (0.1, 0.4)
TRADEOFF_BANDWIDTHS = (0.05, 0.1, 0.2, 0.4, 0.8)
COVERAGE_SIZES = (2000, 10000)
COVERAGE_KERNELS = ("gaussian", "epanechnikov")
ESTIMATORS = ("ips", "snips", "dr")

_OBP_CHILD = r"""
import json, sys, warnings
import numpy as np
warnings.simplefilter("ignore")
from obp.ope import (KernelizedInverseProbabilityWeighting as KIPW,
    KernelizedSelfNormalizedInverseProbabilityWeighting as KSN, KernelizedDoublyRobust as KDR)
d = np.load(sys.argv[1])
out = {}
for kernel in json.loads(sys.argv[2]):
    for h in json.loads(sys.argv[3]):
        common = dict(reward=d["reward"], action_by_behavior_policy=d["action"],
                      pscore=d["density"], action_by_evaluation_policy=d["target"].copy())
        out[f"{kernel}/{h}"] = {
            "ips": float(KIPW(kernel=kernel, bandwidth=h).estimate_policy_value(**common)),
            "snips": float(KSN(kernel=kernel, bandwidth=h).estimate_policy_value(
                **dict(common, action_by_evaluation_policy=d["target"].copy()))),
            "dr": float(KDR(kernel=kernel, bandwidth=h).estimate_policy_value(
                **dict(common, action_by_evaluation_policy=d["target"].copy()),
                estimated_rewards_by_reg_model=d["q_pi"])),
        }
import obp
print(json.dumps({"obp": obp.__version__, "values": out}))
"""


def _parity_inputs(n: int = 5000) -> dict[str, np.ndarray]:
    from ope.simulate import ContinuousBandit

    env = ContinuousBandit(seed=0)
    t = env.sample(n, rng=7)
    x = np.column_stack([t.column(f"x{j}").to_numpy() for j in range(env.n_features)])
    target = t.column("target__optimal").to_numpy()
    q_pi = env.expected_reward(x, target) + 0.1 * np.sin(3.0 * x[:, 0])  # a model, not the truth
    return {
        "x0": x[:, 0],
        "x1": x[:, 1],
        "action": t.column("action").to_numpy(),
        "density": t.column("density").to_numpy(),
        "reward": t.column("reward").to_numpy(),
        "target": target,
        "q_pi": q_pi,
    }


def _numpy_values(d: dict[str, np.ndarray], kernel: str, h: float) -> dict[str, float]:
    from ope.continuous import kernel as k

    w = k((d["target"] - d["action"]) / h, kernel) / (h * d["density"])
    return {
        "ips": float(np.mean(w * d["reward"])),
        "snips": float(np.sum(w * d["reward"]) / np.sum(w)),
        "dr": float(np.mean(d["q_pi"] + w * (d["reward"] - d["q_pi"]))),
    }


def _ope_values(d: dict[str, np.ndarray], kernel: str, h: float) -> dict[str, float]:
    import pandas as pd

    import ope

    frame = pd.DataFrame(
        {
            "x0": d["x0"],
            "x1": d["x1"],
            "action": d["action"],
            "density": d["density"],
            "reward": d["reward"],
            "target__optimal": d["target"],
            "q_pi": d["q_pi"],
            "v__optimal": d["q_pi"],
        }
    )
    logs = ope.read_continuous(frame, context_columns=["x0", "x1"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ev = ope.evaluate_continuous(
            logs,
            kernel=kernel,
            bandwidth=h,
            q_column="q_pi",
            v_column="v__{policy}",
            estimators=ESTIMATORS,
        )
    return {e: float(ev["optimal", e].value) for e in ESTIMATORS}


def bench_parity(python: str) -> dict[str, Any]:
    """ope, obp and numpy on the same arrays; the largest differences."""
    d = _parity_inputs()
    out: dict[str, Any] = {"rows": int(d["action"].size), "cases": {}}
    obp: dict[str, Any] = {}
    if Path(python).exists():
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "continuous.npz"
            np.savez(path, **d)
            proc = subprocess.run(
                [
                    python,
                    "-c",
                    _OBP_CHILD,
                    str(path),
                    json.dumps(KERNELS),
                    json.dumps(PARITY_BANDWIDTHS),
                ],
                capture_output=True,
                text=True,
                timeout=600,
            )
        if proc.returncode == 0:
            obp = json.loads(proc.stdout.strip().splitlines()[-1])
            out["obp_version"] = obp["obp"]
        else:
            out["obp_failed"] = proc.stderr[-2000:]
    else:
        out["obp_skipped"] = f"no obp interpreter at {python} (--obp-python)"
    worst = {"ope_vs_numpy": 0.0, "ope_vs_obp": 0.0}
    for kernel in KERNELS:
        for h in PARITY_BANDWIDTHS:
            key = f"{kernel}/{h}"
            mine = _ope_values(d, kernel, h)
            ref = _numpy_values(d, kernel, h)
            case: dict[str, Any] = {"ope": mine, "numpy": ref}
            for e in ESTIMATORS:
                worst["ope_vs_numpy"] = max(worst["ope_vs_numpy"], abs(mine[e] - ref[e]))
            if obp:
                theirs = obp["values"][key]
                case["obp"] = theirs
                for e in ESTIMATORS:
                    worst["ope_vs_obp"] = max(worst["ope_vs_obp"], abs(mine[e] - theirs[e]))
            out["cases"][key] = case
    out["max_abs_difference"] = worst if obp else {"ope_vs_numpy": worst["ope_vs_numpy"]}
    return out


def _tradeoff_run(seed: int, n: int) -> dict[str, float]:
    import ope
    from ope.simulate import ContinuousBandit

    env = ContinuousBandit(seed=0)
    logs = ope.read_continuous(env.sample(n, rng=seed), policies=["optimal"])
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for h in TRADEOFF_BANDWIDTHS:
            ev = ope.evaluate_continuous(logs, bandwidth=h, estimators=["ips"])
            out[str(h)] = float(ev["optimal", "ips"].value)
    return out


def _coverage_run(seed: int, n: int, kernel: str) -> dict[str, Any]:
    import ope
    from ope.simulate import ContinuousBandit

    env = ContinuousBandit(seed=0)
    logs = ope.read_continuous(env.sample(n, rng=seed, samples=10))
    out: dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ev = ope.evaluate_continuous(logs, kernel=kernel, rng=seed, estimators=ESTIMATORS)
        grid = ev.bandwidths
        slope_h = {r.policy: float(r.bandwidth) for r in grid.itertuples() if r.slope}
        at_slope = ope.evaluate_continuous(
            logs,
            list(slope_h),
            kernel=kernel,
            bandwidth=slope_h,
            rng=seed,
            estimators=ESTIMATORS,
        )
    for p in env.candidate_policies:
        truth = env.true_value(p)
        for rule, result in (("default", ev), ("slope", at_slope)):
            if p not in result.verdicts:
                continue
            h = result.bandwidth[p]
            smoothed = truth if h is None else env.smoothed_value(p, kernel, h)
            for e in ESTIMATORS:
                est = result[p, e]
                ci = est.ci(0.95, "normal")
                out[f"{rule}/{p}/{e}"] = {
                    "value": est.value,
                    "truth": bool(ci.low <= truth <= ci.high),
                    "smoothed": bool(ci.low <= smoothed <= ci.high),
                    "bandwidth": h,
                }
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replications", type=int, default=300)
    parser.add_argument("--obp-python", default=DEFAULT_OBP_PYTHON)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="60 replications")
    args = parser.parse_args(argv)
    reps = 60 if args.quick else args.replications
    result: dict[str, Any] = {"replications": reps}
    parity = bench_parity(args.obp_python)
    result["parity"] = parity
    print(f"parity on {parity['rows']:,} rows: max |difference| {parity['max_abs_difference']}")
    from ope.continuous import KERNEL_MOMENTS
    from ope.simulate import ContinuousBandit

    env = ContinuousBandit(seed=0)
    with ProcessPoolExecutor(args.workers) as pool:
        n_trade = 4000
        runs = list(pool.map(_tradeoff_run, range(reps), [n_trade] * reps))
        rows = []
        trade = {}
        mu2 = KERNEL_MOMENTS["gaussian"][0]
        for h in TRADEOFF_BANDWIDTHS:
            values = np.array([r[str(h)] for r in runs])
            bias = float(values.mean() - env.true_value("optimal"))
            exact = -env.curvature * h * h * mu2
            var = float(values.var(ddof=1))
            trade[str(h)] = {
                "mean": float(values.mean()),
                "bias": bias,
                "bias_se": float(values.std(ddof=1) / np.sqrt(reps)),
                "exact_smoothing_bias": exact,
                "sd": float(np.sqrt(var)),
                "n_h_var": n_trade * h * var,
            }
            rows.append(
                [
                    h,
                    f"{bias:+.4f} ± {trade[str(h)]['bias_se']:.4f}",
                    f"{exact:+.4f}",
                    f"{np.sqrt(var):.4f}",
                    f"{n_trade * h * var:.2f}",
                ]
            )
        result["tradeoff"] = {"rows": n_trade, "kernel": "gaussian", "by_bandwidth": trade}
        print(f"\nkernel IPS of 'optimal', gaussian kernel, n = {n_trade:,}, {reps} replications")
        print(format_table(["h", "bias (± MC se)", "-h² μ₂ (exact)", "sd", "n·h·Var"], rows))
        coverage: dict[str, Any] = {}
        for kernel in COVERAGE_KERNELS:
            for n in COVERAGE_SIZES:
                runs = list(pool.map(_coverage_run, range(reps), [n] * reps, [kernel] * reps))
                table = {}
                for key in runs[0]:
                    got = [r[key] for r in runs if key in r]
                    table[key] = {
                        "truth": float(np.mean([g["truth"] for g in got])),
                        "smoothed": float(np.mean([g["smoothed"] for g in got])),
                        "rmse": float(
                            np.sqrt(
                                np.mean(
                                    [
                                        (g["value"] - env.true_value(key.split("/")[1])) ** 2
                                        for g in got
                                    ]
                                )
                            )
                        ),
                        "median_bandwidth": float(
                            np.median([g["bandwidth"] if g["bandwidth"] else np.nan for g in got])
                        ),
                    }
                coverage[f"{kernel}/{n}"] = table
                rows = []
                for p in env.candidate_policies:
                    cells = [p]
                    for e in ESTIMATORS:
                        d = table.get(f"default/{p}/{e}")
                        s = table.get(f"slope/{p}/{e}")
                        if d and s:
                            cells.append(f"{d['truth']:.3f} ({s['truth']:.3f})")
                        else:
                            cells.append(f"{d['truth']:.3f}" if d else "")
                    h = table[f"default/{p}/ips"]["median_bandwidth"]
                    cells.append(f"{h:.3g}" if np.isfinite(h) else "exact density")
                    rows.append(cells)
                print(
                    f"\ncoverage of the candidate's value, {kernel}, n = {n:,}, {reps} "
                    "replications: default rule (at SLOPE's bandwidth)"
                )
                print(format_table(["candidate", *ESTIMATORS, "median h"], rows))
        result["coverage"] = coverage
    path = write_result("continuous", result)
    print(f"\nwritten to {path}")


if __name__ == "__main__":
    main()
