"""Coverage and multiplicity of ``ope.paired_effect`` on the paired-replay simulator.

Two studies against exact effects (``PairedReplaySimulator.true_effect``):

1. Interval coverage of the mean pair difference at 30 and 200 pairs (2 replicates per arm), for
   the t and normal intervals and the finite-sample Hoeffding, Bernstein and betting intervals
   (outcome in [0, 1]), with mean widths; the spread of the estimates over replications beside the
   mean paired and unpaired standard errors (what the pairing saves).
2. The simulator's other outcomes: bias and t-interval coverage of the ``cost`` and ``latency_ms``
   effects at 300 pairs (``outcomes="all"``).
3. Multiplicity: with 10 null items, the family-wise error of Holm and Benjamini-Hochberg against
   no correction; with 10 null and 10 items of effect 0.3, BH's false discovery rate and power.

Usage::

    python benchmarks/bench_paired.py              # 1,000 / 300 replications (several minutes)
    python benchmarks/bench_paired.py --quick      # 60 / 40 replications
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pyarrow as pa

from ope.io import read_paired
from ope.paired import paired_effect
from ope.simulate import PairedReplaySimulator

TREATED, CONTROL = "with_memory", "no_memory"
METHODS = ("t", "normal", "hoeffding", "bernstein", "betting")


def coverage(reps: int) -> dict:
    env = PairedReplaySimulator(n_replicates=2, seed=3)
    truth = env.true_effect()
    out: dict = {"true_effect": truth, "replications": reps, "cells": []}
    for n_pairs in (30, 200):
        hit = dict.fromkeys(METHODS, 0)
        width: dict[str, list[float]] = {m: [] for m in METHODS}
        values, se_paired, se_unpaired = [], [], []
        for s in range(reps):  # one replication per draw: a loop over replications, not rows
            replays = read_paired(env.sample(n_pairs, rng=10_000 + s))
            for m in METHODS:
                bounded = m not in ("t", "normal")
                row = (
                    paired_effect(
                        replays,
                        treated=TREATED,
                        control=CONTROL,
                        ci=m,
                        reward_range=(0, 1) if bounded else None,
                    )
                    .table()
                    .iloc[0]
                )
                hit[m] += bool(row.ci_low <= truth <= row.ci_high)
                width[m].append(row.ci_high - row.ci_low)
                if m == "t":
                    values.append(row.value)
                    se_paired.append(row.std_error)
                    se_unpaired.append(row.unpaired_std_error)
        out["cells"].append(
            {
                "n_pairs": n_pairs,
                "coverage": {m: hit[m] / reps for m in METHODS},
                "mean_width": {m: float(np.mean(width[m])) for m in METHODS},
                "sd_of_estimates": float(np.std(values, ddof=1)),
                "mean_paired_se": float(np.mean(se_paired)),
                "mean_unpaired_se": float(np.mean(se_unpaired)),
            }
        )
    return out


def other_outcomes(reps: int) -> dict:
    env = PairedReplaySimulator(n_replicates=2, seed=6)
    names = ("cost", "latency_ms")
    truth = {o: env.true_effect(outcome=o) for o in names}
    est: dict[str, list[float]] = {o: [] for o in names}
    hit = dict.fromkeys(names, 0)
    for s in range(reps):
        tab = (
            paired_effect(env.sample(300, rng=s), treated=TREATED, control=CONTROL, outcomes="all")
            .table()
            .set_index("outcome")
        )
        for o in names:
            est[o].append(tab.loc[o, "value"])
            hit[o] += bool(tab.loc[o, "ci_low"] <= truth[o] <= tab.loc[o, "ci_high"])
    return {
        o: {
            "truth": truth[o],
            "mean_estimate": float(np.mean(est[o])),
            "mc_se": float(np.std(est[o], ddof=1) / np.sqrt(reps)),
            "coverage": hit[o] / reps,
        }
        for o in names
    } | {"replications": reps}


def multiplicity(reps: int) -> dict:
    env = PairedReplaySimulator(n_items=10, n_replicates=2, effect_mean=0.0, effect_sd=0.0, seed=4)
    holm = bh = raw = 0
    for s in range(reps):
        sample = env.sample(2000, rng=s)
        tab = paired_effect(sample, treated=TREATED, control=CONTROL, by="item_id").table()
        holm += bool(tab.significant.any())
        raw += bool((tab.p_value <= 0.05).any())
        bh += bool(
            paired_effect(sample, treated=TREATED, control=CONTROL, by="item_id", correction="bh")
            .table()
            .significant.any()
        )
    rng = np.random.default_rng(8)
    null = np.arange(20) < 10
    fdr, fdp_raw, power = [], [], []
    for _ in range(reps):
        n = 1200
        item = rng.integers(0, 20, n)
        base = rng.normal(size=n)
        treated = base + np.where(null[item], 0.0, 0.3) + rng.normal(size=n)
        control = base + rng.normal(size=n)
        table = pa.table(
            {
                "pair_id": np.tile(np.arange(n), 2),
                "arm": np.repeat(["t", "c"], n),
                "item_id": np.tile(item, 2),
                "outcome": np.concatenate([treated, control]),
            }
        )
        tab = paired_effect(table, treated="t", control="c", by="item_id", correction="bh").table()
        is_null = null[tab.group.astype(int).to_numpy()]
        flagged = tab.significant.to_numpy()
        raw_flag = tab.p_value.to_numpy() <= 0.05
        fdr.append((flagged & is_null).sum() / max(1, flagged.sum()))
        fdp_raw.append((raw_flag & is_null).sum() / max(1, raw_flag.sum()))
        power.append((flagged & ~is_null).sum() / 10)
    return {
        "replications": reps,
        "null_items_fwer": {"holm": holm / reps, "bh": bh / reps, "uncorrected": raw / reps},
        "mixed_items": {
            "bh_fdr": float(np.mean(fdr)),
            "bh_power": float(np.mean(power)),
            "uncorrected_fdp": float(np.mean(fdp_raw)),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few replications (a smoke run)")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "bench_paired.json"
    )
    args = parser.parse_args()
    cov = coverage(60 if args.quick else 1000)
    print(f"true effect {cov['true_effect']:.5f}, {cov['replications']} replications, 95% nominal")
    for cell in cov["cells"]:
        for m in METHODS:
            print(
                f"  {cell['n_pairs']:4d} pairs  {m:9s} coverage {cell['coverage'][m]:.3f}  "
                f"mean width {cell['mean_width'][m]:.3f}"
            )
        print(
            f"  {cell['n_pairs']:4d} pairs  sd of estimates {cell['sd_of_estimates']:.4f}, mean "
            f"paired SE {cell['mean_paired_se']:.4f}, unpaired {cell['mean_unpaired_se']:.4f}"
        )
    other = other_outcomes(40 if args.quick else 1000)
    for o in ("cost", "latency_ms"):
        r = other[o]
        print(
            f"{o}: truth {r['truth']:.6g}, mean estimate {r['mean_estimate']:.6g} (MC se "
            f"{r['mc_se']:.2g}), t coverage {r['coverage']:.3f} ({other['replications']} "
            "replications, 300 pairs)"
        )
    mult = multiplicity(40 if args.quick else 300)
    f = mult["null_items_fwer"]
    print(
        f"10 null items, {mult['replications']} replications: FWER Holm {f['holm']:.3f}, "
        f"BH {f['bh']:.3f}, uncorrected {f['uncorrected']:.3f}"
    )
    m = mult["mixed_items"]
    print(
        f"10 null + 10 items of effect 0.3: BH FDR {m['bh_fdr']:.3f} (power {m['bh_power']:.2f}),"
        f" uncorrected FDP {m['uncorrected_fdp']:.3f}"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps({"coverage": cov, "other_outcomes": other, "multiplicity": mult}, indent=2)
    )


if __name__ == "__main__":
    main()
