"""Benchmark: reading Vowpal Wabbit's continuous-action DSJSON (``ope.read_continuous``).

Generates a file of ``--lines`` events in the layout VW's CATS reduction logs (``_label_ca``
with action, cost and the logged density, one ``pdf`` segment, ``pdrop``, an ``EventId``, a
context ``c`` of a nested namespace, a string feature and an array of five numbers: about 370
bytes per line), then times in one run of this script, alternated over ``--rounds`` rounds,
each in a fresh interpreter so that the peak resident set is the run's own:

* ``json`` -- a bare ``for line in f: json.loads(line)`` loop keeping nothing (the reference);
* ``read`` -- ``ope.read_continuous(FILE)``: every line decoded, checked and counted in the
  report, the contexts flattened into columns, read a chunk of lines at a time.

Printed: seconds (median of the rounds), lines per second, the time relative to ``json``, and
the peak resident memory above the interpreter after ``import ope`` (``extra_peak_mb``) against
the file's size. Results also go to ``benchmarks/results/bench_cats.json``.

Usage::

    python benchmarks/bench_cats.py                   # 200,000 lines (about 73 MB)
    python benchmarks/bench_cats.py --lines 1000000 --rounds 3
    python benchmarks/bench_cats.py --quick           # 5,000 lines, one round
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any, Final

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import format_table, peak_rss, write_result  # noqa: E402

NAME: Final = "bench_cats"


def write_cats(path: Path, lines: int, seed: int = 0) -> None:
    """``lines`` continuous-action events (actions on [0, 100], the logged density 0.01 of a
    uniform ``pdf``), written in blocks."""
    rng = np.random.default_rng(seed)
    cities = np.array(["a", "b", "c"])
    with open(path, "w") as fh:
        for start in range(0, lines, 10_000):  # a loop over blocks of lines being written
            m = min(10_000, lines - start)
            action, cost = rng.uniform(0, 100, m), rng.random(m)
            age, city, x = rng.integers(18, 80, m), rng.choice(cities, m), rng.random((m, 5))
            fh.writelines(
                json.dumps(
                    {
                        "_label_ca": {"action": a, "cost": c, "pdf_value": 0.01},
                        "EventId": f"e{start + i}",
                        "Timestamp": "2026-12-07T00:00:00Z",
                        "pdrop": 0.1,
                        "c": {"u": {"age": int(g), "city": str(t)}, "x": v.tolist()},
                        "pdf": [{"left": 0, "right": 100, "pdf_value": 0.01}],
                    }
                )
                + "\n"
                for i, (a, c, g, t, v) in enumerate(
                    zip(action.tolist(), cost.tolist(), age, city, x, strict=True)
                )
            )


_WORKLOADS: Final = {
    "json": "with open(PATH, 'rb') as fh:\n    for line in fh:\n        json.loads(line)",
    "read": "logs = ope.read_continuous(PATH)\nassert logs.n == LINES",
}


def run(path: Path, lines: int, rounds: int) -> dict[str, Any]:
    setup = f"import json, ope\nPATH = {str(path)!r}\nLINES = {lines}"
    seconds: dict[str, list[float]] = {k: [] for k in _WORKLOADS}
    memory: dict[str, list[float]] = {k: [] for k in _WORKLOADS}
    for r in range(rounds):  # alternated: the order rotates from round to round
        order = list(_WORKLOADS) if r % 2 == 0 else list(reversed(_WORKLOADS))
        for name in order:
            got = peak_rss(setup, _WORKLOADS[name])  # the workload's own seconds and memory
            seconds[name].append(got["seconds"])
            memory[name].append(got["extra_peak_mb"])
    size_mb = path.stat().st_size / 1e6
    out: dict[str, Any] = {"lines": lines, "file_mb": size_mb, "rounds": rounds, "modes": {}}
    base = statistics.median(seconds["json"])
    for name in _WORKLOADS:
        s = statistics.median(seconds[name])
        out["modes"][name] = {
            "seconds": s,
            "seconds_all": seconds[name],
            "lines_per_second": lines / s,
            "vs_json": s / base,
            "extra_peak_mb": statistics.median(memory[name]),
            "extra_peak_per_file_mb": statistics.median(memory[name]) / size_mb,
        }
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="5,000 lines, one round")
    parser.add_argument("--keep", type=Path, default=None, help="write the file here and keep it")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.lines, args.rounds = 5_000, 1
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or Path(tmp) / "cats.json"
        if not path.exists():
            write_cats(path, args.lines)
        result = run(path, args.lines, args.rounds)
    rows = [
        [
            name,
            f"{m['seconds']:.2f}",
            f"{m['lines_per_second']:,.0f}",
            f"{m['vs_json']:.2f}x",
            f"{m['extra_peak_mb']:.0f} MB ({m['extra_peak_per_file_mb']:.1f}x the file)",
        ]
        for name, m in result["modes"].items()
    ]
    print(
        f"{args.lines:,} lines, {result['file_mb']:.0f} MB, median of {args.rounds} rounds\n"
        + format_table(["mode", "seconds", "lines/s", "vs json", "peak memory"], rows)
    )
    print(f"wrote {write_result(NAME, result, out=args.out)}")
    return result


if __name__ == "__main__":
    main()
