"""Benchmark: DSJSON import throughput and peak memory against bare JSON decoding.

Generates a DSJSON file of ``--size`` megabytes (default 1024) in VW's Decision Service layout
(10 actions with a few features each, a shared user namespace, ``a``/``p`` and the label fields;
about 1.2 kB per line), then runs, each in a fresh subprocess so that the peak resident set
(``VmHWM`` from ``/proc/self/status``, else ``ru_maxrss``) is the run's own, all in one run of
this script on the same file:

* ``json`` -- a bare ``for line in f: json.loads(line)`` loop (the reference);
* ``pyarrow`` -- ``pyarrow.json.open_json`` streaming the whole file into Arrow record batches
  (no validation; applies because every line has the same structure);
* ``import`` -- ``ope import dsjson SRC --out LOGS.parquet``: decoded, validated and written
  chunk by chunk (memory bounded by a chunk);
* ``read`` -- ``ope.read_dsjson`` into an in-memory ``BanditLogs`` (memory grows with the rows);
* ``import1``, ``read1`` -- the same with one process (``--workers 1``, ``workers=1``);
* ``longline`` -- ``ope import dsjson`` on a file of one 200 MB line (rejected over the
  line limit) between two events: the peak memory of a line far over the limit.

Printed: events/s, MB/s, seconds, CPU seconds (user + system, worker processes included),
peak RSS (of the main process), and each mode's speed relative to ``json``, by wall clock and by
CPU time: on a loaded machine the wall clock ratio depends on the cores left free, the CPU ratio
much less.
Results also go to ``benchmarks/results/bench_import.json``.

Usage::

    python benchmarks/bench_import.py                    # 1 GB
    python benchmarks/bench_import.py --size 100         # 100 MB
    python benchmarks/bench_import.py --modes json import --keep /tmp/dsjson.json
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
MODES = ("json", "pyarrow", "import", "import1", "read", "read1", "longline")


def _line_block(rng: np.random.Generator, start: int, n: int, k: int = 10) -> str:
    """``n`` DSJSON lines (vectorized draws; the text join is the only per-line step)."""
    probs = rng.dirichlet(np.ones(k), size=n)
    order = np.argsort(-probs, axis=1)
    cost = -(rng.random(n) < 0.1).astype(float)
    multi = json.dumps(
        [
            {
                "TAction": {
                    "id": f"item{j}",
                    "cat": f"c{j % 3}",
                    "price": 1.5 * j,
                    "tags": ["x", "y"],
                }
            }
            for j in range(k)
        ]
    )
    lines = []
    for i in range(n):
        a = (order[i] + 1).tolist()
        p = np.round(probs[i, order[i]], 6)
        p[0] += 1.0 - p.sum()
        lines.append(
            json.dumps(
                {
                    "_label_cost": cost[i],
                    "_label_probability": float(p[0]),
                    "_label_Action": a[0],
                    "_labelIndex": a[0] - 1,
                    "Timestamp": "2020-01-01T00:00:00.000Z",
                    "Version": "1",
                    "EventId": f"ev{start + i}",
                    "a": a,
                    "p": p.tolist(),
                }
            )[:-1]
            + ', "c": {"User": {"age": '
            + str(20 + i % 50)
            + ', "city": "c'
            + str(i % 97)
            + '"}, "_multi": '
            + multi
            + "}}"
        )
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


def generate_long_line(path: Path, mb: float = 200.0) -> None:
    """Two events around one line of ``mb`` MB (a feature string), written in pieces."""
    one = _line_block(np.random.default_rng(1), 0, 2)
    first, second = one.splitlines()
    piece = "x" * 1_000_000
    with open(path, "w") as fh:
        fh.write(first + "\n" + '{"EventId": "huge", "c": {"f": "')
        for _ in range(int(mb)):
            fh.write(piece)
        fh.write('"}}\n' + second + "\n")


def _peak_mb() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(src: str, mode: str) -> dict:
    """One mode on ``src``; imports happen before the clock starts."""
    import pyarrow.json as pj
    import pyarrow.parquet as pq

    from ope.cli import main
    from ope.importers import read_dsjson

    out = Path(tempfile.mkdtemp()) / "logs.parquet"
    cpu0 = _cpu_seconds()
    t0 = time.perf_counter()
    if mode == "json":
        rows = 0
        with open(src, "rb") as fh:
            for line in fh:
                json.loads(line)
                rows += 1
    elif mode == "pyarrow":
        rows = 0
        reader = pj.open_json(src, read_options=pj.ReadOptions(block_size=16 << 20))
        for batch in reader:
            rows += batch.num_rows
    elif mode in ("import", "import1", "longline"):
        argv = ["import", "dsjson", src, "--out", str(out)]
        argv += ["--workers", "1"] if mode == "import1" else []
        code = main(argv + (["--on-invalid", "drop"] if mode == "longline" else []))
        assert code == 0, code
        rows = pq.read_metadata(out).num_rows
        out.unlink()
    else:
        rows = read_dsjson(src, workers=1 if mode == "read1" else None).n
    seconds = time.perf_counter() - t0
    return {
        "mode": mode,
        "rows": rows,
        "seconds": seconds,
        "rows_per_s": rows / seconds,
        "cpu_seconds": _cpu_seconds() - cpu0,
        "peak_rss_mb": _peak_mb(),
    }


def _cpu_seconds() -> float:
    """User + system time of this process and its (ended) worker processes."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=float, default=1024.0, help="generated file size in MB")
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    ap.add_argument("--keep", metavar="FILE", help="generate to / reuse this file")
    ap.add_argument("--measure", nargs=2, metavar=("FILE", "MODE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.measure[0], args.measure[1])))
        return 0
    tmp = Path(tempfile.mkdtemp())
    path = Path(args.keep) if args.keep else tmp / "bench.json"
    if not path.exists():
        generate(path, args.size)
    size_mb = path.stat().st_size / 1e6
    results = {"file_mb": size_mb, "load_average": os.getloadavg(), "runs": []}
    env = {**os.environ, "OPE_PROGRESS": "0"}
    reference = reference_cpu = None
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    for mode in args.modes:
        src = path
        if mode == "longline":
            src = tmp / "longline.json"
            generate_long_line(src)
        proc = subprocess.run(
            [sys.executable, __file__, "--measure", str(src), mode],
            capture_output=True,
            text=True,
            env=env,
        )
        if proc.returncode:
            print(f"{mode}: failed\n{proc.stderr[-2000:]}")
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        mb = src.stat().st_size / 1e6
        r["mb_per_s"] = mb / r["seconds"]
        if mode == "json":
            reference = r["rows_per_s"]
            reference_cpu = r["cpu_seconds"] / r["rows"]
        r["vs_json"] = r["rows_per_s"] / reference if reference and mode != "longline" else None
        r["cpu_vs_json"] = (
            reference_cpu * r["rows"] / r["cpu_seconds"]
            if reference_cpu and mode != "longline"
            else None
        )
        results["runs"].append(r)
        rel = (
            f"  {r['vs_json']:5.2f}x json.loads (CPU {r['cpu_vs_json']:4.2f}x)"
            if r["vs_json"]
            else ""
        )
        print(
            f"{mode:8s} {mb:8.1f} MB  {r['rows']:>10,} events  {r['seconds']:7.1f} s  "
            f"{r['rows_per_s']:>9,.0f} events/s  {r['mb_per_s']:6.1f} MB/s  "
            f"CPU {r['cpu_seconds']:6.1f} s  peak RSS {r['peak_rss_mb']:7.0f} MB{rel}"
        )
        if mode == "longline":
            src.unlink()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "bench_import.json").write_text(json.dumps(results, indent=2))
    if not args.keep:
        path.unlink()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
