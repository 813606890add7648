"""Benchmark: joining a long-format policy table to the logs (``ope.policies.target_propensities``).

Workload: 1,000,000 logged events; one candidate policy with 20 nonzero actions per event out of
a 10,000-item catalog, so the policy table has 20,000,000 rows (shuffled, as a table written by
another system would be). The join validates every row (range, per-event sums, coverage,
duplicates, unknown events) and returns pi(a_i | x_i) plus the sparse distribution.

Measured in a fresh subprocess (so that ``ru_maxrss`` is this workload's own peak):

- time of the join (median of ``--repeats`` runs), and the ratio against two baselines measured
  in the same process: one numpy pass summing the table's fixed-width columns (the bytes the
  join must at least read), and a pyarrow hash join on (event_id, action), which finds the
  logged action's probability without any validation or distribution;
- peak resident memory before and after the join, and the join's extra peak relative to the
  bytes of the input table.

Run: ``python benchmarks/bench_policy_join.py`` (writes ``benchmarks/results/bench_policy_join.json``).
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any, Final

import numpy as np

N_EVENTS: Final = 1_000_000
N_SUPPORT: Final = 20  # nonzero actions per event in the policy
N_CATALOG: Final = 10_000
RESULTS: Final = Path(__file__).resolve().parent / "results" / "bench_policy_join.json"


def _rss_now() -> int:
    """Current resident set size in bytes (Linux /proc)."""
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    return pages * resource.getpagesize()


def _rss_peak() -> int:
    """Peak resident set size of this process in bytes (ru_maxrss is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class _RssSampler(threading.Thread):
    """Polls the resident set size in the background; ``peak`` is the largest value seen."""

    def __init__(self, interval: float = 0.002) -> None:
        super().__init__(daemon=True)
        self.interval = interval
        self.peak = _rss_now()
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.peak = max(self.peak, _rss_now())
            time.sleep(self.interval)

    def __enter__(self) -> _RssSampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop_event.set()
        self.join()
        self.peak = max(self.peak, _rss_now())


def make_files(directory: Path, n: int, k: int, catalog: int, seed: int = 0) -> None:
    """Write logs.parquet and policy.parquet for the workload (run in its own subprocess)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    start = rng.integers(0, catalog, n)
    # k distinct actions per event: consecutive items from a random start (mod catalog)
    actions = (start[:, None] + np.arange(k)) % catalog
    weights = rng.random((n, k)) + 0.05
    probs = weights / weights.sum(axis=1, keepdims=True)
    logged = actions[np.arange(n), rng.integers(0, k, n)]
    pq.write_table(
        pa.table(
            {
                "event_id": np.arange(n, dtype=np.int64),
                "action": logged.astype(np.int64),
                "propensity": np.full(n, 1.0 / k),
                "reward": rng.random(n),
            }
        ),
        directory / "logs.parquet",
        compression="none",
    )
    perm = rng.permutation(n * k)
    pq.write_table(
        pa.table(
            {
                "event_id": np.repeat(np.arange(n, dtype=np.int64), k)[perm],
                "policy": pa.DictionaryArray.from_arrays(
                    np.zeros(n * k, dtype=np.int8), pa.array(["candidate"])
                ),
                "action": actions.ravel().astype(np.int64)[perm],
                "probability": probs.ravel()[perm],
            }
        ),
        directory / "policy.parquet",
        compression="none",
    )


def measure(directory: Path, repeats: int) -> dict[str, Any]:
    """Time and memory of the join (run in a fresh subprocess)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ope.logs import BanditLogs, ValidationReport
    from ope.policies import target_propensities

    logs_table = pq.read_table(directory / "logs.parquet")
    table = pq.read_table(directory / "policy.parquet")  # chunked by row group, as users get it
    logs = BanditLogs(
        logs_table, ValidationReport("<bench>", logs_table.num_rows, logs_table.num_rows)
    )
    input_bytes = table.nbytes
    gc.collect()
    pa.default_memory_pool().release_unused()  # do not count the reader's freed buffers
    rss_before = _rss_now()
    peak_before = _rss_peak()

    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        tp = target_propensities(logs, table, with_distributions=True)
        times.append(time.perf_counter() - t0)
        nnz = tp.distributions["candidate"].nnz
        values = tp.values[:, 0].copy()
        del tp
    peak_after = _rss_peak()

    # resident memory sampled every 2 ms during one (untimed) join: unlike ru_maxrss it cannot
    # be dominated by the parquet reader's earlier peak
    gc.collect()
    pa.default_memory_pool().release_unused()
    sampled_before = _rss_now()
    with _RssSampler() as sampler:
        tp = target_propensities(logs, table, with_distributions=True)
    del tp
    sampled_peak = sampler.peak

    # numpy/scipy allocations of one join, traced (not timed: tracing slows allocation)
    tracemalloc.start()
    tp = target_propensities(logs, table, with_distributions=True)
    traced_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    kept = tp.distributions["candidate"].matrix
    result_bytes = kept.data.nbytes + kept.indices.nbytes + kept.indptr.nbytes + tp.values.nbytes
    del tp, kept

    # baseline 1: one numpy pass over the fixed-width columns' bytes
    cols = [table.column(c).to_numpy() for c in ("event_id", "action", "probability")]
    base_bytes = sum(c.nbytes for c in cols)
    scan = []
    for _ in range(max(repeats, 3)):
        t0 = time.perf_counter()
        for c in cols:
            c.sum()
        scan.append(time.perf_counter() - t0)

    # baseline 2: an unvalidated pyarrow hash join on (event_id, action) for the logged action
    joined = []
    keys = logs_table.select(["event_id", "action"])
    for _ in range(repeats):
        t0 = time.perf_counter()
        j = keys.join(table.select(["event_id", "action", "probability"]), ["event_id", "action"])
        joined.append(time.perf_counter() - t0)
        assert j.num_rows == logs_table.num_rows
        del j

    t_join = statistics.median(times)
    return {
        "n_events": logs_table.num_rows,
        "table_rows": table.num_rows,
        "table_chunks": table.column("event_id").num_chunks,
        "nnz": int(nnz),
        "mean_logged_probability": float(values.mean()),
        "join_seconds": t_join,
        "join_seconds_all": times,
        "rows_per_second": table.num_rows / t_join,
        "numpy_scan_seconds": statistics.median(scan),
        "numpy_scan_bytes": base_bytes,
        "ratio_to_numpy_scan": t_join / statistics.median(scan),
        "arrow_join_seconds": statistics.median(joined),
        "ratio_to_arrow_join": t_join / statistics.median(joined),
        "input_table_bytes": input_bytes,
        "rss_before_join_bytes": rss_before,
        "peak_rss_before_join_bytes": peak_before,
        "peak_rss_after_join_bytes": peak_after,
        "join_extra_peak_bytes": peak_after - rss_before,
        "join_extra_peak_over_input": (peak_after - rss_before) / input_bytes,
        "sampled_rss_before_bytes": sampled_before,
        "sampled_rss_peak_bytes": sampled_peak,
        "sampled_join_extra_bytes": sampled_peak - sampled_before,
        "sampled_join_extra_over_input": (sampled_peak - sampled_before) / input_bytes,
        "traced_numpy_peak_bytes": traced_peak,
        "traced_numpy_peak_over_input": traced_peak / input_bytes,
        "result_bytes": result_bytes,
    }


def _run(args: list[str]) -> str:
    proc = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"benchmark subprocess failed: {' '.join(args)}")
    return proc.stdout


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=N_EVENTS)
    parser.add_argument("--support", type=int, default=N_SUPPORT)
    parser.add_argument("--catalog", type=int, default=N_CATALOG)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--_make", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--_measure", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args._make is not None:
        make_files(args._make, args.events, args.support, args.catalog)
        return {}
    if args._measure is not None:
        print(json.dumps(measure(args._measure, args.repeats)))
        return {}

    with tempfile.TemporaryDirectory() as tmp:
        _run(
            [
                "--_make",
                tmp,
                "--events",
                str(args.events),
                "--support",
                str(args.support),
                "--catalog",
                str(args.catalog),
            ]
        )
        result = json.loads(_run(["--_measure", tmp, "--repeats", str(args.repeats)]))
    result["machine"] = {
        "python": platform.python_version(),
        "cpus": _cpus(),
        "numpy": np.__version__,
    }

    mb = 1e6
    rows = [
        (
            "events x support",
            f"{result['n_events']:,} x {args.support} = {result['table_rows']:,} rows",
        ),
        (
            "join + validate + CSR (median)",
            f"{result['join_seconds']:.2f} s  ({result['rows_per_second'] / 1e6:.1f} M rows/s)",
        ),
        (
            "numpy scan of same columns",
            f"{result['numpy_scan_seconds']:.3f} s  -> join is {result['ratio_to_numpy_scan']:.0f}x",
        ),
        (
            "pyarrow hash join (no checks)",
            f"{result['arrow_join_seconds']:.2f} s  -> join is {result['ratio_to_arrow_join']:.2f}x",
        ),
        ("input policy table", f"{result['input_table_bytes'] / mb:,.0f} MB"),
        ("RSS before join", f"{result['rss_before_join_bytes'] / mb:,.0f} MB"),
        ("peak RSS after join", f"{result['peak_rss_after_join_bytes'] / mb:,.0f} MB"),
        ("peak RSS before join (reading)", f"{result['peak_rss_before_join_bytes'] / mb:,.0f} MB"),
        (
            "join's extra peak (ru_maxrss)",
            f"{result['join_extra_peak_bytes'] / mb:,.0f} MB = {result['join_extra_peak_over_input']:.2f}x input"
            + (
                "  (peak set while reading: an upper bound)"
                if result["peak_rss_after_join_bytes"] <= result["peak_rss_before_join_bytes"]
                else ""
            ),
        ),
        (
            "join's extra peak (sampled)",
            f"{result['sampled_join_extra_bytes'] / mb:,.0f} MB = {result['sampled_join_extra_over_input']:.2f}x input",
        ),
        (
            "traced numpy/scipy peak",
            f"{result['traced_numpy_peak_bytes'] / mb:,.0f} MB = {result['traced_numpy_peak_over_input']:.2f}x input",
        ),
        ("result (CSR + values)", f"{result['result_bytes'] / mb:,.0f} MB"),
    ]
    width = max(len(r[0]) for r in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return result


def _cpus() -> int:
    import os

    return (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    )


if __name__ == "__main__":
    main()
