"""Benchmark: evaluate_distributed on Dask against single-process streaming over the same files.

On 8 generated parquet files (``benchmarks/_data/``, git-ignored) with ``event_id`` (int64, a
shuffled dense range), ``action`` (int64, 10 actions), ``propensity``, ``reward`` and P = 4
``target__`` columns (float64), it times, best and median of ``--repeat`` runs:

* ``pyarrow``: a bare ``pyarrow.dataset`` read of the same columns (the floor: no validation);
* ``streaming``: ``ope.evaluate(ope.scan_logs(dir), estimators=("ips", "snips"))``, one
  process (the baseline of the ratios);
* ``dask_threads``: ``evaluate_distributed`` on ``LocalCluster(processes=False)``, 2 workers
  with 1 thread each;
* ``dask_processes``: the same on ``LocalCluster(processes=True)``, 2 worker processes;
* ``dask_processes_no_malloc_trim``: the same without the ``MALLOC_TRIM_THRESHOLD_=65536``
  that distributed's nannies set in worker processes;
* ``*_partition_ids``: each of these with ``check_duplicates="partition"``, to show the cost
  of the global ``event_id`` check. The ids here are shuffled across files (the worst case:
  every partition's id range overlaps the others', so all ids are read again and merged);
  with ids that grow across files the global check reads nothing more and costs what the
  ``*_partition_ids`` rows show.

Each method runs once untimed first (imports in fresh worker processes); cluster start-up
is timed separately. Every run must give the streaming numbers (relative
difference below 1e-12), or the benchmark fails. The machine may be shared: compare ratios
measured in the same run, not seconds.

Usage::

    python benchmarks/bench_distributed.py [--rows 8000000] [--repeat 3] [--quick]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np

HERE = Path(__file__).resolve().parent
DATA = HERE / "_data"
RESULTS = HERE / "results"
N_FILES = 8
N_POLICIES = 4
N_ACTIONS = 10
WORKERS = 2
ESTIMATORS = ("ips", "snips")
# distributed's nannies start worker processes with MALLOC_TRIM_THRESHOLD_=65536 (to give
# memory back to the OS); this variant unsets it to show what it costs this kernel
NO_TRIM = {"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}


def make_files(rows: int) -> Path:
    """Write N_FILES parquet files holding ``rows`` rows in all (once; reused afterwards)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = DATA / f"distributed_{rows}"
    if folder.exists() and len(list(folder.glob("*.parquet"))) == N_FILES:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    ids = rng.permutation(rows).astype(np.int64)
    logging_dist = rng.dirichlet(np.full(N_ACTIONS, 5.0))
    targets = rng.dirichlet(np.ones(N_ACTIONS), N_POLICIES)
    bounds = np.linspace(0, rows, N_FILES + 1).astype(np.int64)
    for k in range(N_FILES):  # loop over files
        n = int(bounds[k + 1] - bounds[k])
        action = rng.choice(N_ACTIONS, n, p=logging_dist)
        columns: dict[str, Any] = {
            "event_id": ids[bounds[k] : bounds[k + 1]],
            "action": action,
            "propensity": logging_dist[action],
            "reward": rng.binomial(1, 0.1 + 0.05 * (action % 3)).astype(np.float64),
        }
        for p in range(N_POLICIES):
            columns[f"target__p{p}"] = targets[p, action]
        tmp = folder / f"part-{k:02d}.tmp"
        pq.write_table(pa.table(columns), tmp, row_group_size=256_000)
        tmp.rename(folder / f"part-{k:02d}.parquet")
    return folder


def timed(fn: Callable[[], Any], repeat: int) -> tuple[list[float], Any]:
    """Wall times of ``repeat`` calls after one untimed warm-up (imports in fresh workers)."""
    out = fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return times, out


def values(ev: Any) -> np.ndarray:
    t = ev.table()
    return t[["value", "std_error", "ci_low", "ci_high", "ess"]].to_numpy(dtype=np.float64)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=None, help="rows in all (default 8,000,000)")
    parser.add_argument("--repeat", type=int, default=None, help="runs per method (default 3)")
    parser.add_argument("--quick", action="store_true", help="800,000 rows, one run each")
    args = parser.parse_args(argv)
    rows = args.rows or (800_000 if args.quick else 8_000_000)
    repeat = args.repeat or (1 if args.quick else 3)

    import dask
    import pyarrow.dataset as ds
    from distributed import Client, LocalCluster

    import ope
    from ope.distributed import evaluate_distributed
    from ope.io import scan_logs

    logging.getLogger("distributed").setLevel(logging.WARNING)
    warnings.simplefilter("ignore")  # overlap notes of the synthetic policies are not timed
    folder = make_files(rows)
    columns = ["event_id", "action", "propensity", "reward"] + [
        f"target__p{p}" for p in range(N_POLICIES)
    ]
    times: dict[str, list[float]] = {}
    load_before = os.getloadavg()

    times["pyarrow"], _ = timed(
        lambda: ds.dataset(folder, format="parquet").to_table(columns=columns).num_rows, repeat
    )
    times["streaming"], ref = timed(
        lambda: ope.evaluate(scan_logs(folder), estimators=ESTIMATORS), repeat
    )
    reference = values(ref)
    results: dict[str, Any] = {}

    def check(name: str, ev: Any) -> None:
        err = float(np.max(np.abs(values(ev) - reference) / np.abs(reference)))
        results[f"max_rel_diff_{name}"] = err
        if err > 1e-12:
            raise AssertionError(f"{name} differs from streaming by {err:.3g} (relative)")

    startup: dict[str, float] = {}
    variants = (
        ("threads", False, {}),
        ("processes", True, {}),
        ("processes_no_malloc_trim", True, NO_TRIM),
    )
    for kind, processes, config in variants:
        t0 = time.perf_counter()
        with (
            dask.config.set(config),
            LocalCluster(
                n_workers=WORKERS,
                threads_per_worker=1,
                processes=processes,
                dashboard_address=None,
                memory_limit="3GiB",
                silence_logs=logging.ERROR,
            ) as cluster,
            Client(cluster) as client,
        ):
            startup[kind] = time.perf_counter() - t0
            name = f"dask_{kind}"
            times[name], ev = timed(
                lambda: evaluate_distributed(folder, client=client, estimators=ESTIMATORS),
                repeat,
            )
            check(name, ev)
            # the same without the global event_id check
            name = f"dask_{kind}_partition_ids"
            times[name], ev = timed(
                lambda: evaluate_distributed(
                    folder,
                    client=client,
                    estimators=ESTIMATORS,
                    check_duplicates="partition",
                ),
                repeat,
            )
            check(name, ev)

    base = min(times["streaming"])
    result = {
        "rows": rows,
        "files": N_FILES,
        "policies": N_POLICIES,
        "data_mb": sum(f.stat().st_size for f in folder.glob("*.parquet")) / 2**20,
        "workers": WORKERS,
        "repeat": repeat,
        "best_s": {k: min(v) for k, v in times.items()},
        "median_s": {k: statistics.median(v) for k, v in times.items()},
        "all_s": times,
        "ratio_best_vs_streaming": {k: min(v) / base for k, v in times.items()},
        "cluster_startup_s": startup,
        **results,
        "cpus": os.cpu_count(),
        "load_average_1m_before_after": [load_before[0], os.getloadavg()[0]],
        "python": platform.python_version(),
    }
    print(
        f"rows: {rows:,} in {N_FILES} files ({result['data_mb']:.0f} MB), P = {N_POLICIES}, "
        f"{WORKERS} workers x 1 thread, {os.cpu_count()} CPUs, best of {repeat}"
    )
    print(f"{'method':<46}{'best s':>9}{'median s':>10}{'vs streaming':>14}")
    for k in times:
        print(
            f"{k:<46}{result['best_s'][k]:>9.2f}{result['median_s'][k]:>10.2f}"
            f"{result['ratio_best_vs_streaming'][k]:>14.2f}"
        )
    print(
        "cluster start-up (s): "
        + ", ".join(f"{k} {v:.2f}" for k, v in startup.items())
        + f"; 1-min load average before/after: {load_before[0]:.1f}/{os.getloadavg()[0]:.1f}"
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "bench_distributed.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
