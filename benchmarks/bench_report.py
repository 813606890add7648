"""Benchmark: the HTML report's render time as the candidates and the segments grow.

Two sweeps, each case timed as :func:`ope.report.render_report` alone (the evaluation and the
diagnostics are computed once, before the timing), on ``--rows`` synthetic logged rows with a
uniform logger over four actions:

* ``candidates=N`` -- N candidate policies (``--candidates``, default 10 20 40 80), no
  segments: the forest plot, the paired differences, the weight-histogram and coverage panels
  of the candidates drawn in full, the summary table of the rest;
* ``segments=S`` -- S distinct values in one segment column (``--segments``, default 50 100
  200 400), two candidates: the per-segment estimates, the overlap matrix, the heatmaps.

The report draws at most ``--max-candidates`` candidates and ``--max-segments`` segments in
full (default: the report's caps; ``all`` lifts a cap, to see the work grow with what is
drawn). Every case runs ``--rounds`` times, interleaved (:func:`_common.interleaved`); per
case the median, the seconds per candidate (per segment), the ratio to the sweep's first case
with the range of its paired per-round ratios, the number of inline figures (``<svg``) and the
page size are printed, with the load average, and written to
``benchmarks/results/bench_report.json``. Tests never assert on these times.

Usage::

    python benchmarks/bench_report.py                          # 5,000 rows, 5 rounds
    python benchmarks/bench_report.py --rounds 1 --quick       # 10 and 40 candidates, 50 segments
    python benchmarks/bench_report.py --max-candidates all     # every candidate drawn
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    MIN_ROUNDS,
    interleaved,
    machine_info,
    ratio,
    summarize,
    write_result,
)


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


def _case(rows: int, candidates: int, segments: int, caps: dict[str, Any]):
    import ope
    from ope.report import render_report

    table = _table(rows, candidates, segments)
    by = ["seg"] if segments else None
    ev = ope.evaluate(table, estimators=("ips", "snips"), reward_range=(0, 1), by=by)
    d = ope.diagnose(table, reward_range=(0, 1), by=by)
    pages: list[str] = []

    def run() -> None:
        pages[:] = [render_report(evaluation=ev, diagnostics=d, **caps)]

    return run, pages


def _cap(text: str) -> int | None:
    return None if text == "all" else int(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000)
    parser.add_argument("--candidates", type=int, nargs="+", default=[10, 20, 40, 80])
    parser.add_argument("--segments", type=int, nargs="+", default=[50, 100, 200, 400])
    parser.add_argument("--max-candidates", type=_cap, default=argparse.SUPPRESS, metavar="K|all")
    parser.add_argument("--max-segments", type=_cap, default=argparse.SUPPRESS, metavar="K|all")
    parser.add_argument("--rounds", type=int, default=MIN_ROUNDS)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="10 and 40 candidates, 50 segments")
    args = parser.parse_args(argv)
    if args.quick:
        args.candidates, args.segments = [10, 40], [50]
    caps = {k: getattr(args, k) for k in ("max_candidates", "max_segments") if hasattr(args, k)}
    sweeps: dict[str, list[tuple[str, int]]] = {"candidates": [], "segments": []}
    cases, pages = {}, {}
    for n in args.candidates:
        name = f"candidates={n}"
        cases[name], pages[name] = _case(args.rows, n, 0, caps)
        sweeps["candidates"].append((name, n))
    for s in args.segments:
        name = f"segments={s}"
        cases[name], pages[name] = _case(args.rows, 2, s, caps)
        sweeps["segments"].append((name, s))
    timings = interleaved(cases, rounds=args.rounds, warmup=args.warmup)
    result: dict[str, Any] = {
        "rows": args.rows,
        "rounds": args.rounds,
        "caps": {k: ("all" if v is None else v) for k, v in caps.items()} or "default",
        "cases": {},
    }
    for sweep, members in sweeps.items():
        if not members:
            continue
        first = members[0][0]
        unit = sweep[:-1]
        for name, size in members:
            wall = summarize(timings.wall[name])
            vs_first = ratio(timings.wall[name], timings.wall[first])
            page = pages[name][0]
            result["cases"][name] = {
                "wall_s": wall,
                f"s_per_{unit}": wall["median_s"] / size,
                f"vs_{first}": vs_first,
                "figures": page.count("<svg"),
                "html_bytes": len(page.encode()),
            }
            print(
                f"{name:>15}: median {wall['median_s']:.2f} s "
                f"({wall['median_s'] / size * 1e3:.1f} ms per {unit}), "
                f"{vs_first['ratio']:.2f}x {first} "
                f"[{vs_first['paired_min']:.2f}, {vs_first['paired_max']:.2f}], "
                f"{page.count('<svg')} figures, {len(page.encode()) / 1e3:,.0f} kB"
            )
    print(f"rounds: {args.rounds}; load average: {machine_info().get('load_average_1_5_15')}")
    print(f"written to {write_result('bench_report', result)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
