"""Benchmark: validated reading of bandit logs against a bare parquet read of the same columns.

Measures, on one generated parquet file (``benchmarks/_data/``, git-ignored):

* ``read_logs`` (names, types and every row rule) vs ``pyarrow.parquet.read_table`` of the same
  columns: wall time, best of ``--repeat`` runs, and their ratio (target <= 1.5x);
* ``scan_logs`` (a full validated pass) vs ``read_table``: peak RSS, each measured in a fresh
  subprocess (``VmHWM`` of ``/proc/self/status``; ``ru_maxrss`` where that is missing), and
  their ratio;
* a directory of ``--files`` small parquet files in 10 hive partitions, without links:
  listing it with ``ope.io.locate_input`` (a stat of every entry before anything is opened,
  files deduplicated by inode) vs pyarrow's recursive ``FileSelector`` listing, and
  ``read_logs`` of the directory vs ``pyarrow.dataset`` reading the same files; interleaved
  rounds, medians, ratios. (With a link back to the directory, pyarrow's listing follows it
  until the system's link limit; ope lists each file once.)

The file holds ``event_id`` (int64, a shuffled dense range, so the duplicate check cannot rely
on increasing ids), ``action`` (int64, 100 actions), ``propensity``, ``reward`` and two
``target__`` columns (float64). The machine may be shared: compare ratios, not seconds.

Usage::

    python benchmarks/bench_io.py [--rows 10000000] [--repeat 3] [--files 2000] [--rounds 5]
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
        check=True,
        capture_output=True,
        text=True,
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


def make_directory(files: int) -> Path:
    """``files`` parquet files of 100 rows under 10 hive partitions (no links)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = DATA / f"dir_{files}"
    done = root / "_done"
    if done.exists():
        return root
    rng = np.random.default_rng(1)
    for i in range(files):
        folder = root / f"day={i % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        ids = np.arange(100 * i, 100 * i + 100, dtype=np.int64)
        pq.write_table(
            pa.table(
                {
                    "event_id": ids,
                    "action": rng.integers(0, 10, 100),
                    "propensity": np.full(100, 0.1),
                    "reward": rng.binomial(1, 0.1, 100).astype(float),
                }
            ),
            folder / f"part-{i:05d}.parquet",
        )
    done.write_text("")
    return root


def time_directory(root: Path, rounds: int) -> dict:
    """Listing and reading a directory: ope against pyarrow, interleaved, medians."""
    import statistics

    import pyarrow.dataset as ds
    import pyarrow.fs as pafs

    from ope.io import locate_input, read_logs

    def arrow_list() -> list[str]:
        infos = pafs.LocalFileSystem().get_file_info(pafs.FileSelector(str(root), recursive=True))
        return sorted(
            i.path
            for i in infos
            if i.type == pafs.FileType.File
            and not any(p.startswith((".", "_")) for p in Path(i.path).relative_to(root).parts)
        )

    times: dict[str, list[float]] = {
        k: [] for k in ("arrow_list", "ope_list", "arrow_read", "ope_read")
    }
    n_files = rows = 0
    for _ in range(rounds):
        t0 = time.perf_counter()
        listed = arrow_list()
        times["arrow_list"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        found = locate_input(root)
        times["ope_list"].append(time.perf_counter() - t0)
        n_files = len(found.files)
        assert list(found.files) == listed  # the same files, in the same order
        t0 = time.perf_counter()
        ds.dataset(
            listed, format="parquet", partitioning="hive", partition_base_dir=str(root)
        ).to_table()
        times["arrow_read"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        rows = read_logs(root).n
        times["ope_read"].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "files": n_files,
        "rows": rows,
        "median_s": med,
        "all_s": times,
        "list_ratio_ope_vs_arrow": med["ope_list"] / med["arrow_list"],
        "read_ratio_ope_vs_arrow": med["ope_read"] / med["arrow_read"],
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--files", type=int, default=2000, help="files in the directory benchmark (0 skips it)"
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--only-directory", action="store_true", help="run the directory benchmark alone"
    )
    args = parser.parse_args(argv)
    if args.only_directory:
        return directory_report(args)

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
    if args.files:
        result["directory"] = directory_report(args, write=False)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "bench_io.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def directory_report(args: argparse.Namespace, *, write: bool = True) -> dict:
    d = time_directory(make_directory(args.files), args.rounds)
    m = d["median_s"]
    print(f"directory: {d['files']:,} files, {d['rows']:,} rows, median of {args.rounds} rounds")
    print(f"{'measure':<34}{'pyarrow':>12}{'ope':>12}{'ratio':>8}")
    print(
        f"{'list the files (s)':<34}{m['arrow_list']:>12.4f}{m['ope_list']:>12.4f}"
        f"{d['list_ratio_ope_vs_arrow']:>8.2f}"
    )
    print(
        f"{'read the directory (s)':<34}{m['arrow_read']:>12.3f}{m['ope_read']:>12.3f}"
        f"{d['read_ratio_ope_vs_arrow']:>8.2f}"
    )
    if write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "bench_io_directory.json").write_text(json.dumps(d, indent=2) + "\n")
    return d


if __name__ == "__main__":
    main()
