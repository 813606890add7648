"""Benchmark: validated reading of bandit logs against a bare parquet read of the same columns.

Measures, on one generated parquet file (``benchmarks/_data/``, git-ignored):

* ``read_logs`` (names, types and every row rule) vs ``pyarrow.parquet.read_table`` of the same
  columns: wall time, best of ``--repeat`` runs, and their ratio (target <= 1.5x);
* ``scan_logs`` (a full validated pass) vs ``read_table``: peak RSS, each measured in a fresh
  subprocess (``VmHWM`` of ``/proc/self/status``; ``ru_maxrss`` where that is missing), and
  their ratio.

The file holds ``event_id`` (int64, a shuffled dense range, so the duplicate check cannot rely
on increasing ids), ``action`` (int64, 100 actions), ``propensity``, ``reward`` and two
``target__`` columns (float64). The machine may be shared: compare ratios, not seconds.

Usage::

    python benchmarks/bench_io.py [--rows 10000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DATA = HERE / "_data"
RESULTS = HERE / "results"
COLUMNS = ["event_id", "action", "propensity", "reward", "target__greedy", "target__uniform"]


def make_file(rows: int) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = DATA / f"bandit_{rows}.parquet"
    if path.exists():
        return path
    DATA.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    n_actions = 100
    action = rng.integers(0, n_actions, rows)
    propensity = rng.uniform(0.005, 0.05, rows)
    reward = rng.binomial(1, 0.1, rows).astype(np.float64)
    table = pa.table(
        {
            "event_id": rng.permutation(rows).astype(np.int64),
            "action": action,
            "propensity": propensity,
            "reward": reward,
            "target__greedy": (action == 0).astype(np.float64),
            "target__uniform": np.full(rows, 1.0 / n_actions),
        }
    )
    tmp = path.with_suffix(".tmp")
    pq.write_table(table, tmp, row_group_size=1_000_000)
    tmp.rename(path)
    return path


_CHILD = r"""
import json, resource, sys, time
path, mode, columns = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
t0 = time.perf_counter()
if mode == "read_table":
    import pyarrow.parquet as pq
    t = pq.read_table(path, columns=columns)
    n = t.num_rows
elif mode == "read_logs":
    from ope.io import read_logs
    n = read_logs(path, columns=columns).n
elif mode == "scan_logs":
    from ope.io import scan_logs
    n = sum(b.n for b in scan_logs(path, columns=columns))
elif mode == "iter_batches":
    import pyarrow.parquet as pq
    n = sum(b.num_rows for b in pq.ParquetFile(path).iter_batches(columns=columns, batch_size=262_144))
seconds = time.perf_counter() - t0
# VmHWM is this process's own peak RSS; ru_maxrss would also count the parent's pages that the
# fork before exec made resident (Linux keeps ru_maxrss across execve)
with open("/proc/self/status") as fh:
    hwm = [int(l.split()[1]) for l in fh if l.startswith("VmHWM:")]
peak_kb = hwm[0] if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"rows": n, "seconds": seconds, "peak_rss_mb": peak_kb / 1024}))
"""


def run_child(path: Path, mode: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), mode, ",".join(COLUMNS)],
        check=True, capture_output=True, text=True,
    )
    return json.loads(out.stdout)


def time_in_process(path: Path, repeat: int) -> dict:
    import pyarrow.parquet as pq

    from ope.io import read_logs

    from ope.schema import BANDIT, check_bandit_rows, conform, plan_columns

    times: dict[str, list[float]] = {"read_table": [], "read_logs": [], "validate_only": []}
    for _ in range(repeat):
        # alternate the two so that load on the shared machine hits both alike
        t0 = time.perf_counter()
        pq.read_table(path, columns=COLUMNS)
        times["read_table"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        read_logs(path, columns=COLUMNS)
        times["read_logs"].append(time.perf_counter() - t0)
    # the validation alone, on a table already in memory (less exposed to I/O noise)
    table = pq.read_table(path, columns=COLUMNS)
    for _ in range(repeat):
        t0 = time.perf_counter()
        check_bandit_rows(conform(table, plan_columns(table.schema, BANDIT)))
        times["validate_only"].append(time.perf_counter() - t0)
    return {k: min(v) for k, v in times.items()} | {"all": times}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    path = make_file(args.rows)
    timing = time_in_process(path, args.repeat)
    rss = {mode: run_child(path, mode) for mode in ("read_table", "scan_logs", "read_logs")}
    result = {
        "rows": args.rows,
        "file_mb": path.stat().st_size / 2**20,
        "columns": COLUMNS,
        "read_table_s": timing["read_table"],
        "read_logs_s": timing["read_logs"],
        "time_ratio_read_logs_vs_read_table": timing["read_logs"] / timing["read_table"],
        "validate_only_s": timing["validate_only"],
        "all_times_s": timing["all"],
        "peak_rss_mb": {k: v["peak_rss_mb"] for k, v in rss.items()},
        "subprocess_seconds": {k: v["seconds"] for k, v in rss.items()},
        "rss_ratio_scan_logs_vs_read_table": rss["scan_logs"]["peak_rss_mb"]
        / rss["read_table"]["peak_rss_mb"],
        "python": platform.python_version(),
    }
    print(f"rows: {args.rows:,}   file: {result['file_mb']:.0f} MB   columns: {', '.join(COLUMNS)}")
    print(f"{'measure':<34}{'read_table':>12}{'ope':>12}{'ratio':>8}")
    print(
        f"{'time, best of ' + str(args.repeat) + ' (s): read_logs':<34}"
        f"{timing['read_table']:>12.3f}{timing['read_logs']:>12.3f}"
        f"{result['time_ratio_read_logs_vs_read_table']:>8.2f}"
    )
    print(
        f"{'validation alone, in memory (s)':<34}{'':>12}{timing['validate_only']:>12.3f}"
        f"{timing['validate_only'] / timing['read_table']:>8.2f}"
    )
    print(
        f"{'peak RSS (MB): scan_logs':<34}{rss['read_table']['peak_rss_mb']:>12.0f}"
        f"{rss['scan_logs']['peak_rss_mb']:>12.0f}{result['rss_ratio_scan_logs_vs_read_table']:>8.2f}"
    )
    print(
        f"{'peak RSS (MB): read_logs':<34}{rss['read_table']['peak_rss_mb']:>12.0f}"
        f"{rss['read_logs']['peak_rss_mb']:>12.0f}"
        f"{rss['read_logs']['peak_rss_mb'] / rss['read_table']['peak_rss_mb']:>8.2f}"
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "bench_io.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
