"""Benchmark: several outcomes of the same rows on the same weights, against one evaluation.

``--rows`` logged rows, ``--policies`` candidates as the logs' ``target__`` columns and three
outcome columns (a binary reward, a cost, a latency). Timed in the same process, in interleaved
rounds (median of ``--rounds``; the paired per-round ratios as the noise), wall and CPU time:

* ``evaluate`` -- ``ope.evaluate`` of the reward alone with SNIPS (normal intervals): the unit;
* ``evaluate_outcomes`` -- ``ope.evaluate_outcomes`` of the three outcomes with SNIPS: one pass
  of the moment kernel for all three;
* ``three_evaluates`` -- three ``ope.evaluate`` calls, one per outcome (what it replaces);
* ``guardrail_decision`` -- ``ope.guardrail_decision`` with the reward as primary and the cost
  and latency as guardrails (the same one pass, then the claims and the decision);
* ``kernel_shared`` / ``kernel_three`` -- the moment kernel alone:
  ``ope._kernel.accumulate_outcomes`` of the three outcomes against three
  ``ope._kernel.accumulate`` calls.

The benchmark checks itself: each outcome's evaluation equals ``ope.evaluate`` of that outcome
(1e-12). Results are printed and written to ``benchmarks/results/bench_outcomes.json``.

Usage::

    python benchmarks/bench_outcomes.py --rows 1000000 --policies 8 --rounds 9
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import format_table, interleaved, ratio, summarize, write_result  # noqa: E402

import ope  # noqa: E402
from ope import _kernel  # noqa: E402
from ope.exceptions import OPEWarning  # noqa: E402

OUTCOMES = ("reward", "cost", "latency_ms")


def make_logs(n: int, n_pol: int, seed: int) -> Any:
    """Validated logs: 10 actions, a softmax-like logger, ``n_pol`` candidates, 3 outcomes."""
    import pyarrow as pa

    g = np.random.default_rng(seed)
    a = g.integers(0, 10, n)
    p = g.uniform(0.05, 0.3, n)
    columns: dict[str, Any] = {
        "action": a,
        "propensity": p,
        "reward": g.binomial(1, 0.1 + 0.02 * a).astype(np.float64),
        "cost": g.gamma(2.0, 1.0 + 0.1 * a),
        "latency_ms": g.normal(200.0 + 3.0 * a, 30.0),
    }
    for j in range(n_pol):
        columns[f"target__c{j}"] = g.uniform(0.0, 1.0, n) * p * 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OPEWarning)
        return ope.read_logs(pa.table(columns))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--policies", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)

    logs = make_logs(args.rows, args.policies, args.seed)
    swapped = {
        o: logs if o == "reward" else _swapped(logs, o) for o in OUTCOMES
    }  # ope.evaluate's view of each outcome
    names = [f"c{j}" for j in range(args.policies)]
    p = logs.column("propensity")
    cols = [logs.column(f"target__{c}") for c in names]
    rewards = [logs.column(o).astype(np.float64) for o in OUTCOMES]

    def quiet(fn):
        def run() -> Any:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", OPEWarning)
                return fn()

        return run

    cases = {
        "evaluate": quiet(lambda: ope.evaluate(logs, estimators=("snips",))),
        "evaluate_outcomes": quiet(
            lambda: ope.evaluate_outcomes(logs, outcomes=list(OUTCOMES), estimators=("snips",))
        ),
        "three_evaluates": quiet(
            lambda: [ope.evaluate(swapped[o], estimators=("snips",)) for o in OUTCOMES]
        ),
        "guardrail_decision": quiet(
            lambda: ope.guardrail_decision(
                logs, guardrails=["cost:lower:0.1", "latency_ms:lower:5"]
            )
        ),
        "kernel_shared": lambda: _kernel.accumulate_outcomes(rewards, p, cols, max_weight=None),
        "kernel_three": lambda: [_kernel.accumulate(r, p, cols, max_weight=None) for r in rewards],
    }
    # the benchmark checks itself: each outcome's evaluation is ope.evaluate's of that outcome
    shared = cases["evaluate_outcomes"]()
    for o in OUTCOMES:
        mine = shared[o].table()["value"].to_numpy()
        theirs = quiet(lambda o=o: ope.evaluate(swapped[o], estimators=("snips",)))()
        np.testing.assert_allclose(mine, theirs.table()["value"].to_numpy(), rtol=1e-12)
    times = interleaved(cases, rounds=args.rounds)
    unit_wall, unit_cpu = times.wall["evaluate"], times.cpu["evaluate"]
    rows = []
    result: dict[str, Any] = {
        "rows": args.rows,
        "policies": args.policies,
        "outcomes": len(OUTCOMES),
        "rounds": args.rounds,
        "threads": _kernel.threads(),
        "load_1min": os.getloadavg()[0],
        "seconds_wall": {k: summarize(v) for k, v in times.wall.items()},
        "seconds_cpu": {k: summarize(v) for k, v in times.cpu.items()},
    }
    for case in cases:
        if case.startswith("kernel"):
            continue
        rw, rc = ratio(times.wall[case], unit_wall), ratio(times.cpu[case], unit_cpu)
        result[f"{case}_vs_evaluate_wall"], result[f"{case}_vs_evaluate_cpu"] = rw, rc
        rows.append(
            [
                case,
                f"{np.median(times.wall[case]) * 1e3:.1f}",
                f"{rw['ratio']:.2f}x ({rw['paired_min']:.2f}-{rw['paired_max']:.2f})",
                f"{rc['ratio']:.2f}x",
            ]
        )
    kr = ratio(times.wall["kernel_shared"], times.wall["kernel_three"])
    result["kernel_shared_vs_three_wall"] = kr
    print(format_table(["case", "wall ms", "x evaluate (wall, paired range)", "x (cpu)"], rows))
    print(
        f"kernel: shared pass {np.median(times.wall['kernel_shared']) * 1e3:.1f} ms, three passes "
        f"{np.median(times.wall['kernel_three']) * 1e3:.1f} ms: {kr['ratio']:.2f}x "
        f"({kr['paired_min']:.2f}-{kr['paired_max']:.2f}); load {result['load_1min']:.2f}"
    )
    path = write_result("bench_outcomes", result, out=args.out)
    print(f"written to {path}")
    return 0


def _swapped(logs: Any, outcome: str) -> Any:
    from ope.evaluation.outcomes import with_outcome

    return with_outcome(logs, outcome, "outcome")


if __name__ == "__main__":
    pd.set_option("display.width", 120)
    raise SystemExit(main())
