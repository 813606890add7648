"""Benchmark: DSJSON import throughput and peak memory.

Generates a DSJSON file of ``--mb`` megabytes (default 20) in VW's Decision Service layout (10
actions with a few features each, a shared user namespace, ``a``/``p`` and the label fields;
about 1.6 kB per line), then times, each in a fresh subprocess so that the peak resident set
(``VmHWM`` from ``/proc/self/status``, else ``ru_maxrss``) is the import's own:

* ``stream`` -- ``ope import dsjson SRC --out LOGS.parquet``: chunks of ``--chunk-lines`` lines
  parsed, validated and written one at a time (memory bounded by a chunk);
* ``read`` -- ``ope.importers.read_dsjson`` into an in-memory ``BanditLogs`` (memory grows with
  the rows kept).

Results are printed and written to ``benchmarks/results/bench_import.json``. Throughput is
rows/s and MB/s of DSJSON text; nothing is extrapolated here.

Usage::

    python benchmarks/bench_import.py --mb 200
    python benchmarks/bench_import.py --mb 1024 --modes stream
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"


def _line_block(rng: np.random.Generator, start: int, n: int, k: int = 10) -> str:
    """``n`` DSJSON lines (vectorized draws; the text join is the only per-line step)."""
    probs = rng.dirichlet(np.ones(k), size=n)
    order = np.argsort(-probs, axis=1)
    cost = -(rng.random(n) < 0.1).astype(float)
    multi = json.dumps([{"TAction": {"id": f"item{j}", "cat": f"c{j % 3}", "price": 1.5 * j,
                                      "tags": ["x", "y"]}} for j in range(k)])
    lines = []
    for i in range(n):
        a = (order[i] + 1).tolist()
        p = np.round(probs[i, order[i]], 6)
        p[0] += 1.0 - p.sum()
        lines.append(json.dumps({
            "_label_cost": cost[i], "_label_probability": float(p[0]), "_label_Action": a[0],
            "_labelIndex": a[0] - 1, "Timestamp": "2020-01-01T00:00:00.000Z", "Version": "1",
            "EventId": f"ev{start + i}", "a": a, "p": p.tolist(),
        })[:-1] + ', "c": {"User": {"age": ' + str(20 + i % 50) + ', "city": "c' + str(i % 97)
            + '"}, "_multi": ' + multi + '}}')
    return "\n".join(lines) + "\n"


def generate(path: Path, mb: float, seed: int = 0) -> int:
    rng = np.random.default_rng(seed)
    target = int(mb * 1_000_000)
    written = rows = 0
    with open(path, "w") as fh:
        while written < target:
            block = _line_block(rng, rows, 5_000)
            fh.write(block)
            written += len(block)
            rows += 5_000
    return rows


def _peak_mb() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(src: str, mode: str, chunk_lines: int) -> dict:
    t0 = time.perf_counter()
    if mode == "stream":
        from ope.cli import main

        out = Path(tempfile.mkdtemp()) / "logs.parquet"
        code = main(["import", "dsjson", src, "--out", str(out), "--chunk-lines", str(chunk_lines)])
        assert code == 0
        import pyarrow.parquet as pq

        rows = pq.read_metadata(out).num_rows
        out.unlink()
    else:
        from ope.importers import read_dsjson

        rows = read_dsjson(src, chunk_lines=chunk_lines).n
    seconds = time.perf_counter() - t0
    return {"mode": mode, "rows": rows, "seconds": seconds, "rows_per_s": rows / seconds,
            "peak_rss_mb": _peak_mb()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=20.0, help="size of the generated file (MB)")
    ap.add_argument("--modes", nargs="+", default=["stream", "read"], choices=["stream", "read"])
    ap.add_argument("--chunk-lines", type=int, default=10_000)
    ap.add_argument("--keep", metavar="FILE", help="generate to / reuse this file")
    ap.add_argument("--measure", nargs=2, metavar=("FILE", "MODE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.measure[0], args.measure[1], args.chunk_lines)))
        return 0
    path = Path(args.keep) if args.keep else Path(tempfile.mkdtemp()) / "bench.json"
    if not path.exists():
        generate(path, args.mb)
    size_mb = path.stat().st_size / 1e6
    results = {"file_mb": size_mb, "chunk_lines": args.chunk_lines, "runs": []}
    for mode in args.modes:
        proc = subprocess.run(
            [sys.executable, __file__, "--measure", str(path), mode,
             "--chunk-lines", str(args.chunk_lines)],
            capture_output=True, text=True, check=True)
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        r["mb_per_s"] = size_mb / r["seconds"]
        results["runs"].append(r)
        print(f"{mode:6s} {size_mb:8.1f} MB  {r['rows']:>10,} rows  {r['seconds']:7.1f} s  "
              f"{r['rows_per_s']:>9,.0f} rows/s  {r['mb_per_s']:6.1f} MB/s  "
              f"peak RSS {r['peak_rss_mb']:7.0f} MB")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "bench_import.json").write_text(json.dumps(results, indent=2))
    if not args.keep:
        path.unlink()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
