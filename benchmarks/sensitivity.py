"""Marginal sensitivity bounds on a logger with a hidden input of known strength, and their cost.

Usage::

    python benchmarks/sensitivity.py                 # 500 replications at n = 2,000; 1M rows timed
    python benchmarks/sensitivity.py --quick         # a smoke run

Every replication draws fresh logs from ``ope.simulate.ConfoundedBandit(confounding=0.6,
seed=2)``, whose logged propensities are the marginal over a hidden coin the logger reads (the
exact strength ``gamma_0 = env.gamma``), and runs ``ope.diagnostics.sensitivity_arrays`` with
Γ in {1, gamma_0}. Per candidate it counts

* ``oracle inside``: the share of replications whose SNIPS bounds at gamma_0 contain the SNIPS
  estimate with the true propensities (the theory says every one);
* ``coverage``: the share whose interval (the lower end's lower limit to the upper end's upper
  limit) contains the exact value ``env.true_value(policy)``, at Γ = 1 (the estimator's own
  normal interval, biased by the hidden input) and at gamma_0;
* the decision at Γ = 1 against the exact one, and how often a wrong decision had Γ* below
  ``GAMMA_FRAGILE`` (flagged in the report).

It then times ``sensitivity_arrays`` (7 Γ values and the Γ* search for 8 candidates) on 1M
rows with binary rewards against ``ope.evaluate`` (IPS, SNIPS) on the same rows, both in this
run, and writes ``benchmarks/results/sensitivity.json``.
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


def coverage(n: int, reps: int) -> dict[str, Any]:
    from ope._thresholds import GAMMA_FRAGILE
    from ope.diagnostics import sensitivity_arrays
    from ope.simulate import ConfoundedBandit

    env = ConfoundedBandit(confounding=0.6, seed=2)
    g0 = env.gamma
    names = list(env.candidate_policies)
    truth = {k: env.true_value(k) for k in names}
    logging = env.true_value("logging")
    counts = {
        k: dict(inside=0, cover_one=0, cover_g0=0, wrong=0, wrong_flagged=0, decided=0)
        for k in names
    }
    for rep in range(reps):  # a loop over replications
        t = env.sample(n, rng=rep, oracle=True)
        r, p = t["reward"].to_numpy(), t["propensity"].to_numpy()
        true_p = t["true_propensity"].to_numpy()
        pi = np.column_stack([t[f"target__{k}"].to_numpy() for k in names])
        res = sensitivity_arrays(r, p, pi, policy_names=names, gammas=[g0])
        table = res.table()
        points = res.tipping_points().set_index("policy")
        for j, k in enumerate(names):  # a loop over the three candidates
            rows = table[table.policy == k].set_index("gamma")
            w = pi[:, j] / true_p
            oracle = float(np.dot(w, r) / w.sum())
            c = counts[k]
            c["inside"] += bool(rows.loc[g0, "lower"] <= oracle <= rows.loc[g0, "upper"])
            c["cover_one"] += bool(rows.loc[1.0, "ci_low"] <= truth[k] <= rows.loc[1.0, "ci_high"])
            c["cover_g0"] += bool(rows.loc[g0, "ci_low"] <= truth[k] <= rows.loc[g0, "ci_high"])
            decision = points.loc[k, "decision"]
            if decision != "unclear":
                c["decided"] += 1
                right = (decision == "better") == (truth[k] > logging)
                if not right:
                    c["wrong"] += 1
                    c["wrong_flagged"] += bool(points.loc[k, "gamma_star"] < GAMMA_FRAGILE)
    rows_out = [
        {
            "policy": k,
            "truth": truth[k],
            "logging": logging,
            "oracle_inside_at_gamma0": c["inside"] / reps,
            "coverage_gamma1": c["cover_one"] / reps,
            "coverage_gamma0": c["cover_g0"] / reps,
            "decided": c["decided"],
            "wrong_decisions": c["wrong"],
            "wrong_flagged_fragile": c["wrong_flagged"],
        }
        for k, c in counts.items()
    ]
    return {"n": n, "replications": reps, "gamma0": g0, "rows": rows_out}


def timing(n: int, rounds: int) -> dict[str, Any]:
    import ope
    from ope.diagnostics import sensitivity_arrays

    g = np.random.default_rng(0)
    k = 8
    action = g.integers(0, k, n)
    reward = g.binomial(1, 0.3 + 0.02 * action).astype(np.float64)
    p = np.full(n, 1.0 / k)
    target = np.column_stack([np.where(action == j, 0.6, 0.4 / (k - 1)) for j in range(k)])
    frame = {"action": action, "propensity": p, "reward": reward}
    frame.update({f"target__c{j}": target[:, j] for j in range(k)})
    import pandas as pd

    logs = pd.DataFrame(frame)
    times: dict[str, list[float]] = {"sensitivity": [], "evaluate": []}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(rounds):  # interleaved rounds, medians
            t0 = time.perf_counter()
            sensitivity_arrays(reward, p, target)
            times["sensitivity"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            ope.evaluate(logs, estimators=("ips", "snips"))
            times["evaluate"].append(time.perf_counter() - t0)
    med = {key: float(np.median(v)) for key, v in times.items()}
    return {
        "n": n,
        "candidates": k,
        "rounds": rounds,
        **med,
        "ratio": med["sensitivity"] / med["evaluate"],
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 replications, 20k rows timed")
    parser.add_argument("--replications", type=int, default=500)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    result = coverage(2_000, 20 if args.quick else args.replications)
    result["timing"] = timing(20_000 if args.quick else 1_000_000, 2 if args.quick else 5)
    result["seconds"] = time.perf_counter() - started
    headers = [
        "policy",
        "oracle inside at Γ0",
        "coverage Γ=1",
        "coverage Γ0",
        "decided",
        "wrong",
        "wrong & Γ*<1.5",
    ]
    table = [
        [
            r["policy"],
            f"{r['oracle_inside_at_gamma0']:.3f}",
            f"{r['coverage_gamma1']:.3f}",
            f"{r['coverage_gamma0']:.3f}",
            r["decided"],
            r["wrong_decisions"],
            r["wrong_flagged_fragile"],
        ]
        for r in result["rows"]
    ]
    print(
        f"ConfoundedBandit(confounding=0.6, seed=2): gamma_0 = {result['gamma0']:.4f}, "
        f"n = {result['n']:,}, {result['replications']} replications"
    )
    print(format_table(headers, table))
    t = result["timing"]
    print(
        f"timing at {t['n']:,} rows x {t['candidates']} candidates (median of {t['rounds']}): "
        f"sensitivity {t['sensitivity']:.3f} s, evaluate(ips, snips) {t['evaluate']:.3f} s, "
        f"ratio {t['ratio']:.2f}"
    )
    path = write_result("sensitivity" + ("_quick" if args.quick else ""), result, out=args.out)
    print(f"wrote {path} ({result['seconds']:.0f} s)")
    return result


if __name__ == "__main__":
    main()
