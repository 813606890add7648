"""Benchmark: ope.evaluate_spark (Spark local[2]) against Dask and eager ope.evaluate.

On a parquet directory written to a temporary folder (removed afterwards; 8 files, ``--rows``
rows in all, ``event_id`` growing across files, 10 actions, P = 4 ``target__`` columns), it
times in interleaved rounds (medians, the range of the per-round ratios):

* ``pyarrow``: a bare ``pyarrow.dataset`` read of the columns evaluate reads (no validation);
* ``eager``: ``ope.evaluate(ope.read_logs(dir), estimators=...)``, one process (the baseline
  of the ratios);
* ``dask``: ``ope.evaluate_distributed(dir, client=...)`` on ``LocalCluster(n_workers=2,
  threads_per_worker=1)`` (worker processes);
* ``spark``: ``ope.evaluate_spark(dir, spark=...)`` on ``local[2]`` (the UI off, Spark's
  other settings at their defaults).

The cluster and session start-ups are timed separately (not in the rounds). Every engine must
give the eager numbers (value, standard error, interval ends, ESS): the largest absolute and
relative differences are reported, and above 1e-12 relative the benchmark fails. The machine
may be shared: compare ratios measured in the same run, not seconds.

Usage::

    python benchmarks/bench_spark.py [--rows 10000000] [--rounds 3] [--quick]
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import interleaved, machine_info, ratio, summarize, write_result  # noqa: E402

N_FILES = 8
N_POLICIES = 4
N_ACTIONS = 10
WORKERS = 2
ESTIMATORS = ("ips", "snips", "clipped_ips")
MAX_WEIGHT = 5.0


def make_files(folder: Path, rows: int) -> Path:
    """Write N_FILES parquet files holding ``rows`` rows in all."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    logging_dist = rng.dirichlet(np.full(N_ACTIONS, 5.0))
    targets = rng.dirichlet(np.ones(N_ACTIONS), N_POLICIES)
    bounds = np.linspace(0, rows, N_FILES + 1).astype(np.int64)
    for k in range(N_FILES):  # loop over files
        n = int(bounds[k + 1] - bounds[k])
        action = rng.choice(N_ACTIONS, n, p=logging_dist)
        columns: dict[str, Any] = {
            "event_id": np.arange(bounds[k], bounds[k + 1], dtype=np.int64),
            "action": action,
            "propensity": logging_dist[action],
            "reward": rng.binomial(1, 0.1 + 0.05 * (action % 3)).astype(np.float64),
        }
        for p in range(N_POLICIES):
            columns[f"target__p{p}"] = targets[p, action]
        pq.write_table(pa.table(columns), folder / f"part-{k:02d}.parquet", row_group_size=256_000)
    return folder


def numbers(ev: Any) -> np.ndarray:
    t = ev.table()
    return t[["value", "std_error", "ci_low", "ci_high", "ess"]].to_numpy(dtype=np.float64)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=None, help="rows in all (default 10,000,000)")
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds (default 3)")
    parser.add_argument("--quick", action="store_true", help="1,000,000 rows, one round")
    args = parser.parse_args(argv)
    rows = args.rows or (1_000_000 if args.quick else 10_000_000)
    rounds = args.rounds or (1 if args.quick else 3)

    import pyarrow.dataset as ds
    from distributed import Client, LocalCluster
    from pyspark.sql import SparkSession

    import ope

    logging.getLogger("distributed").setLevel(logging.WARNING)
    warnings.simplefilter("ignore")  # overlap notes of the synthetic policies are not timed
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    load_before = os.getloadavg()
    tmp = Path(tempfile.mkdtemp(prefix="ope-bench-spark-"))
    try:
        folder = make_files(tmp, rows)
        read = ["action", "propensity", "reward"] + [f"target__p{p}" for p in range(N_POLICIES)]
        options = dict(estimators=ESTIMATORS, max_weight=MAX_WEIGHT)
        startup: dict[str, float] = {}
        t0 = time.perf_counter()
        session = (
            SparkSession.builder.master(f"local[{WORKERS}]")
            .appName("ope-bench")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .getOrCreate()
        )
        session.sparkContext.setLogLevel("ERROR")
        startup["spark"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        with (
            LocalCluster(
                n_workers=WORKERS,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=logging.ERROR,
            ) as cluster,
            Client(cluster) as client,
        ):
            startup["dask"] = time.perf_counter() - t0
            out: dict[str, Any] = {}
            cases = {
                "pyarrow": lambda: ds.dataset(folder, format="parquet").to_table(columns=read),
                "eager": lambda: out.__setitem__(
                    "eager", ope.evaluate(ope.read_logs(folder), **options)
                ),
                "dask": lambda: out.__setitem__(
                    "dask", ope.evaluate_distributed(folder, client=client, **options)
                ),
                "spark": lambda: out.__setitem__(
                    "spark", ope.evaluate_spark(folder, spark=session, **options)
                ),
            }
            timings = interleaved(cases, rounds=rounds, warmup=1)
        partitions = session.read.parquet(str(folder)).rdd.getNumPartitions()
        session.stop()
        data_mb = sum(f.stat().st_size for f in folder.glob("*.parquet")) / 2**20
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    reference = numbers(out["eager"])
    agreement = {}
    for engine in ("dask", "spark"):  # loop over engines
        diff = np.abs(numbers(out[engine]) - reference)
        agreement[engine] = {
            # value, standard error and interval ends; the ESS (about n) separately
            "max_abs_diff": float(diff[:, :4].max()),
            "max_abs_diff_ess": float(diff[:, 4].max()),
            "max_rel_diff": float((diff / np.maximum(np.abs(reference), 1e-300)).max()),
        }
    wall = timings.wall
    result = {
        "rows": rows,
        "files": N_FILES,
        "policies": N_POLICIES,
        "estimators": list(ESTIMATORS),
        "data_mb": data_mb,
        "spark_partitions": partitions,
        "workers": WORKERS,
        "rounds": rounds,
        "seconds": {k: summarize(v) for k, v in wall.items()},
        "vs_eager": {k: ratio(v, wall["eager"]) for k, v in wall.items()},
        "spark_vs_dask": ratio(wall["spark"], wall["dask"]),
        "startup_s": startup,
        "agreement_with_eager": agreement,
        "load_average_1m_before_after": [load_before[0], os.getloadavg()[0]],
        "machine": machine_info(),
    }
    print(
        f"rows: {rows:,} in {N_FILES} files ({data_mb:.0f} MB, {partitions} Spark partitions), "
        f"P = {N_POLICIES}, {len(ESTIMATORS)} estimators, {WORKERS} cores, {rounds} rounds"
    )
    print(f"{'method':<10}{'median s':>10}{'vs eager':>10}{'paired range':>16}")
    for k in wall:
        r = result["vs_eager"][k]
        print(
            f"{k:<10}{result['seconds'][k]['median_s']:>10.2f}{r['ratio']:>10.2f}"
            f"{r['paired_min']:>8.2f}-{r['paired_max']:.2f}"
        )
    s = result["spark_vs_dask"]
    print(f"spark / dask: {s['ratio']:.2f} (paired {s['paired_min']:.2f}-{s['paired_max']:.2f})")
    for engine, a in agreement.items():
        print(
            f"{engine} vs eager: max abs diff {a['max_abs_diff']:.3g} (value, std_error, "
            f"ci), {a['max_abs_diff_ess']:.3g} (ess); max rel diff {a['max_rel_diff']:.3g}"
        )
    print(
        "start-up (s): "
        + ", ".join(f"{k} {v:.2f}" for k, v in startup.items())
        + f"; 1-min load average before/after: {load_before[0]:.1f}/{os.getloadavg()[0]:.1f}"
    )
    for engine, a in agreement.items():
        if a["max_rel_diff"] > 1e-12:
            raise AssertionError(f"{engine} differs from eager by {a['max_rel_diff']:.3g}")
    write_result("bench_spark", result)
    return result


if __name__ == "__main__":
    main()
