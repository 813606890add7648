"""Benchmark: the HTML report's render time on many segments and on many candidates.

Two cases, each timed as :func:`ope.report.render_report` alone (the evaluation and the
diagnostics are computed once, before the timing), on ``--rows`` synthetic logged rows with a
uniform logger over four actions:

* ``segments`` -- ``--segments`` distinct values in one segment column (``--by``), two
  candidates: the per-segment estimates, overlap matrix and coverage heatmaps;
* ``candidates`` -- ``--candidates`` candidate policies, no segments: the forest plot, the
  paired differences and one weight histogram per candidate.

Each case runs ``--rounds`` times, interleaved (:func:`_common.interleaved`); the medians,
the number of inline figures (``<svg``) and the load average are printed and written to
``benchmarks/results/bench_report.json``. Tests never assert on these times.

Usage::

    python benchmarks/bench_report.py                      # 5,000 rows, 500 segments, 40 candidates
    python benchmarks/bench_report.py --rounds 1 --quick
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import interleaved, machine_info, summarize, write_result  # noqa: E402


def _table(rows: int, candidates: int, segments: int, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    action = rng.integers(0, 4, rows)
    cols = {
        "event_id": np.arange(rows),
        "action": action,
        "propensity": np.full(rows, 0.25),
        "reward": (rng.random(rows) < 0.2 + 0.1 * (action == 1)).astype(float),
    }
    for j in range(candidates):  # candidate j prefers action j % 4 with a rising share
        share = 0.3 + 0.6 * j / max(candidates - 1, 1)
        cols[f"target__c{j:02d}"] = np.where(action == j % 4, share, (1 - share) / 3)
    if segments:
        cols["seg"] = np.array([f"s{k:03d}" for k in range(segments)])[
            rng.integers(0, segments, rows)
        ]
    return pa.table(cols)


def _case(rows: int, candidates: int, segments: int):
    import ope
    from ope.report import render_report

    table = _table(rows, candidates, segments)
    by = ["seg"] if segments else None
    ev = ope.evaluate(table, estimators=("ips", "snips"), reward_range=(0, 1), by=by)
    d = ope.diagnose(table, reward_range=(0, 1), by=by)
    pages: list[str] = []

    def run() -> None:
        pages[:] = [render_report(evaluation=ev, diagnostics=d)]

    return run, pages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000)
    parser.add_argument("--segments", type=int, default=500)
    parser.add_argument("--candidates", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="100 segments, 10 candidates")
    args = parser.parse_args(argv)
    if args.quick:
        args.segments, args.candidates = 100, 10
    seg_run, seg_page = _case(args.rows, 2, args.segments)
    cand_run, cand_page = _case(args.rows, args.candidates, 0)
    timings = interleaved(
        {"segments": seg_run, "candidates": cand_run}, rounds=args.rounds, warmup=args.warmup
    )
    result = {
        "rows": args.rows,
        "segments": args.segments,
        "candidates": args.candidates,
        "rounds": args.rounds,
        "cases": {},
    }
    for name, page in (("segments", seg_page), ("candidates", cand_page)):
        wall = summarize(timings.wall[name])
        result["cases"][name] = {
            "wall_s": wall,
            "figures": page[0].count("<svg"),
            "html_bytes": len(page[0].encode()),
        }
        print(
            f"{name:>10}: median {wall['median_s']:.2f} s wall over {args.rounds} rounds, "
            f"{page[0].count('<svg')} figures, {len(page[0].encode()) / 1e3:,.0f} kB"
        )
    print(f"load average: {machine_info().get('load_average_1_5_15')}")
    print(f"written to {write_result('bench_report', result)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
