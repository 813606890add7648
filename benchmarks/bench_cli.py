"""``ope evaluate FILE --json`` against a bare ``pyarrow.parquet.read_table`` of the same columns.

What a user waits for: the whole command, in a fresh process (interpreter start, imports, the
read, the estimation, the JSON), against the floor of any tool that reads those columns -- a
fresh process that imports pyarrow and reads them with ``read_table``. Both are measured in the
same run, in interleaved rounds (the order rotates from round to round); wall time is the median
over rounds, peak RSS is each child's own high-water mark (``os.wait4``'s ``ru_maxrss``). The
ratio is also given per round (the command over the read of the same round, its median and
range): a round in which the machine is busy slows both sides, so the per-round median is the
steadier figure when the bare read's own time varies (its threaded decode and its fresh
allocation of every column at once make it the noisier side).

The parts, each a fresh process in the same rounds, say where the time goes:

* ``imports``: ``import ope.cli, ope.io, ope.evaluation`` (what ``ope evaluate`` imports before
  it reads a row) against ``import pyarrow.parquet`` (the floor's own import);
* ``scan``: one validated pass of ``ope.scan_logs`` over the same columns, no estimation (the
  reading and validation the CLI streams through);
* ``evaluate``: the whole command, streamed by default (``--streaming auto``: IPS and SNIPS,
  normal intervals, 10M rows); ``--eager`` adds the whole-read path (``--streaming off``, with
  the overlap diagnostics and paired comparisons) for reference.

The statistics (the moment kernel) are another engineer's; the CLI's share is the imports, the
choice to stream, the columns read and the batch size. Every child runs with bytecode written
and read (``PYTHONDONTWRITEBYTECODE`` dropped: an installed ope is compiled), after one warm-up
round; the load average before and after the rounds is printed with the table.

Run::

    .venv/bin/python benchmarks/bench_cli.py                  # 10M rows x 8 candidates
    .venv/bin/python benchmarks/bench_cli.py --rows 1000000 --rounds 3 --eager
    .venv/bin/python benchmarks/bench_cli.py --startup --rounds 7   # start-up of each command
    .venv/bin/python benchmarks/bench_cli.py --rounds 9 --breakdown  # and where evaluate's time goes
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
ROOT = HERE.parent

from _common import MIN_ROUNDS, data_path, format_table, write_result  # noqa: E402


def make_file(rows: int, candidates: int) -> Path:
    """``rows`` bandit events, ``candidates`` target columns and 4 context columns that
    ``ope evaluate`` does not read, written in row groups of 1M rows (bounded memory)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = data_path(f"cli_{rows}_{candidates}.parquet")
    if path.exists():
        return path
    tmp = path.with_name(path.name + ".tmp")
    rng = np.random.default_rng(0)
    n_actions = 10
    writer = None
    step = 1_000_000
    for start in range(0, rows, step):  # loop over row groups
        n = min(step, rows - start)
        action = rng.integers(0, n_actions, size=n)
        cols = {
            "event_id": np.arange(start, start + n, dtype=np.int64),
            "action": action,
            "propensity": np.full(n, 1.0 / n_actions),
            "reward": rng.binomial(1, 0.1 + 0.02 * action).astype(np.float64),
        }
        for j in range(4):
            cols[f"x{j}"] = rng.normal(size=n).astype(np.float32)
        for c in range(candidates):
            probs = rng.dirichlet(np.ones(n_actions))
            cols[f"target__p{c}"] = probs[action]
        table = pa.table(cols)
        if writer is None:
            writer = pq.ParquetWriter(tmp, table.schema)
        writer.write_table(table)
    assert writer is not None
    writer.close()
    os.replace(tmp, path)
    return path


def columns_of(candidates: int) -> list[str]:
    return [
        "event_id",
        "action",
        "propensity",
        "reward",
        *(f"target__p{c}" for c in range(candidates)),
    ]


def child(argv: list[str]) -> tuple[float, float, float]:
    """Run ``argv`` in a fresh process: (wall seconds, CPU seconds, peak RSS in MB).

    This process imports nothing numerical (the data file is made by a child too): a forked
    child's ``ru_maxrss`` starts from its parent's resident size, which would otherwise be
    charged to every case.
    """
    # bytecode is written and read as an installed package's is (pip compiles it): under
    # PYTHONDONTWRITEBYTECODE every run of a source tree would compile ope's modules anew
    env = {**os.environ, "OPE_PROGRESS": "0"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT, env=env
    )
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} failed ({proc.returncode}):\n{err[-3000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0


def cases(path: Path, candidates: int, eager: bool) -> dict[str, list[str]]:
    py = sys.executable
    cols = columns_of(candidates)
    out = {
        "read_table": [
            py,
            "-c",
            f"import sys, pyarrow.parquet as pq; pq.read_table(sys.argv[1], columns={cols!r})",
            str(path),
        ],
        "ope evaluate --json": [py, "-m", "ope", "evaluate", str(path), "--json"],
        "import pyarrow.parquet": [py, "-c", "import pyarrow.parquet"],
        "import ope (evaluate's)": [py, "-c", "import ope.cli, ope.io, ope.evaluation"],
        "scan_logs pass": [
            py,
            "-c",
            "import sys, ope; s = ope.scan_logs(sys.argv[1], columns="
            f"{cols[:1] + cols[4:]!r}, batch_size=1 << 20)\n"
            "for b in s: pass",
            str(path),
        ],
    }
    if eager:
        out["ope evaluate --json --streaming off"] = [
            *out["ope evaluate --json"],
            "--streaming",
            "off",
        ]
    return out


#: The critical path of one ``ope evaluate FILE --json`` in its own process (``--streaming on``,
#: what ``auto`` chooses at the benchmark's size, so that small files stream too), timed from the
#: interpreter's start: the imports, then each batch's statistics (the first one pays the
#: compiled kernel's start-up), the gaps between them (the next batch read and validated on
#: this thread, or waited for from the read-ahead thread) and the JSON.
_TRACE = """
import json, os, sys, time
t_start = time.perf_counter()
from ope.cli import main
import ope.evaluation._driver as driver
spans = []
inner = driver.batch_statistics
def timed(*args, **kwargs):
    t0 = time.perf_counter()
    out = inner(*args, **kwargs)
    spans.append((t0, time.perf_counter()))
    return out
driver.batch_statistics = timed
t_imported = time.perf_counter()
sys.stdout = open(os.devnull, "w")
main(["evaluate", sys.argv[1], "--json", "--streaming", "on"])
t_end = time.perf_counter()
gaps = [b[0] - a[1] for a, b in zip(spans, spans[1:])]
print(json.dumps({
    "imports": t_imported - t_start,
    "to first batch": spans[0][0] - t_imported,
    "first batch statistics (kernel start-up)": spans[0][1] - spans[0][0],
    "later batches: read/validate gaps": sum(gaps),
    "later batches: statistics": sum(b - a for a, b in spans[1:]),
    "after the last batch (result, JSON)": t_end - spans[-1][1],
    "total in process": t_end - t_start,
}), file=sys.stderr)
"""


def breakdown(path: Path, rounds: int) -> dict:
    """Where the time of ``ope evaluate FILE --json`` goes: :data:`_TRACE` in fresh processes
    (one warm-up), the median of each part over ``rounds``."""
    env = {**os.environ, "OPE_PROGRESS": "0"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    argv = [sys.executable, "-c", _TRACE, str(path)]
    parts: dict[str, list[float]] = {}
    for k in range(rounds + 1):
        done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env)
        if done.returncode != 0:
            raise RuntimeError(f"the traced run failed:\n{done.stderr[-3000:]}")
        if k == 0:
            continue  # warm-up
        for name, value in json.loads(done.stderr.strip().splitlines()[-1]).items():
            parts.setdefault(name, []).append(value)
    med = {n: statistics.median(v) for n, v in parts.items()}
    print(f"ope evaluate --json at {path.name}: where the time goes, median of {rounds} runs")
    print(
        format_table(
            ["part", "wall s (median)", "range"],
            [[n, f"{med[n]:.2f}", f"{min(v):.2f}-{max(v):.2f}"] for n, v in parts.items()],
        )
    )
    return {"breakdown_s": parts, "breakdown_median_s": med}


def startup(rounds: int) -> dict:
    """Start-up of the lean commands: each a fresh process, interleaved rounds, medians."""
    py = sys.executable
    sample = subprocess.run(
        [
            py,
            "-c",
            "from ope.simulate import load_sample; print(load_sample(columns=['action']).path)",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout.strip()
    runs = {
        "python -c pass": [py, "-c", "pass"],
        "ope --version": [py, "-m", "ope", "--version"],
        "ope evaluate --help": [py, "-m", "ope", "evaluate", "--help"],
        "import pyarrow.parquet": [py, "-c", "import pyarrow.parquet"],
        "ope validate SAMPLE": [py, "-m", "ope", "validate", sample],
        "import ope.cli, ope.io, ope.evaluation": [
            py,
            "-c",
            "import ope.cli, ope.io, ope.evaluation",
        ],
        "import scipy.stats": [py, "-c", "import scipy.stats"],
        "ope evaluate SAMPLE --json": [py, "-m", "ope", "evaluate", sample, "--json"],
    }
    names = list(runs)
    for name in names:
        child(runs[name])
    wall: dict[str, list[float]] = {n: [] for n in names}
    for k in range(rounds):
        shift = k % len(names)
        for name in names[shift:] + names[:shift]:
            wall[name].append(child(runs[name])[0])
    med = {n: statistics.median(wall[n]) for n in names}
    print(
        f"start-up, {rounds} interleaved rounds, each a fresh process (SAMPLE: the bundled "
        "100,000-row sample)"
    )
    print(
        format_table(
            ["command", "wall s (median)", "range"],
            [[n, f"{med[n]:.3f}", f"{min(wall[n]):.3f}-{max(wall[n]):.3f}"] for n in names],
        )
    )
    result = {"startup_wall_s": wall, "startup_median_s": med, "rounds": rounds}
    write_result("bench_cli_startup", result)
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--candidates", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=MIN_ROUNDS)
    parser.add_argument(
        "--eager", action="store_true", help="also time the whole-read path (--streaming off)"
    )
    parser.add_argument(
        "--startup",
        action="store_true",
        help="time the commands' start-up (imports) on the bundled sample instead",
    )
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="also time the parts of ope evaluate's critical path (imports, kernel start-up, "
        + "batches), each run a fresh process",
    )
    parser.add_argument("--make", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.make:  # the child that writes the data file
        print(make_file(args.rows, args.candidates))
        return {}
    if args.startup:
        return startup(args.rounds)
    made = subprocess.run(
        [
            sys.executable,
            __file__,
            "--make",
            "--rows",
            str(args.rows),
            "--candidates",
            str(args.candidates),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    path = Path(made.stdout.strip().splitlines()[-1])
    runs = cases(path, args.candidates, args.eager)
    names = list(runs)
    for name in names:  # warm-up: the page cache holds the file for every case alike
        child(runs[name])
    load_before = os.getloadavg()
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    rss: dict[str, list[float]] = {n: [] for n in names}
    for k in range(args.rounds):  # interleaved rounds, the order rotated
        shift = k % len(names)
        for name in names[shift:] + names[:shift]:
            w, c, r = child(runs[name])
            wall[name].append(w)
            cpu[name].append(c)
            rss[name].append(r)
    load_after = os.getloadavg()
    med = {n: statistics.median(wall[n]) for n in names}
    med_cpu = {n: statistics.median(cpu[n]) for n in names}
    peak = {n: max(rss[n]) for n in names}
    base_w, base_r = med["read_table"], peak["read_table"]
    paired = [a / b for a, b in zip(wall["ope evaluate --json"], wall["read_table"])]
    result = {
        "rows": args.rows,
        "candidates": args.candidates,
        "rounds": args.rounds,
        "file_mb": path.stat().st_size / 2**20,
        "wall_s": wall,
        "cpu_s": cpu,
        "median_wall_s": med,
        "median_cpu_s": med_cpu,
        "ratio_cpu_evaluate_vs_read_table": med_cpu["ope evaluate --json"] / med_cpu["read_table"],
        "peak_rss_mb": peak,
        "ratio_wall_evaluate_vs_read_table": med["ope evaluate --json"] / base_w,
        "ratio_wall_paired_median": statistics.median(paired),
        "ratio_wall_paired_range": [min(paired), max(paired)],
        "read_table_wall_first_round_s": wall["read_table"][0],
        "ratio_rss_evaluate_vs_read_table": peak["ope evaluate --json"] / base_r,
        "load_average_1_5_15_before_after": [list(load_before), list(load_after)],
    }
    base_c = med_cpu["read_table"]
    rows = [
        [
            n,
            f"{med[n]:.2f}",
            f"{min(wall[n]):.2f}-{max(wall[n]):.2f}",
            f"{med[n] / base_w:.2f}",
            f"{med_cpu[n]:.2f}",
            f"{med_cpu[n] / base_c:.2f}",
            f"{peak[n]:.0f}",
            f"{peak[n] / base_r:.2f}",
        ]
        for n in names
    ]
    print(
        f"{args.rows:,} rows x {args.candidates} candidates ({result['file_mb']:.0f} MB "
        f"parquet), {args.rounds} interleaved rounds, each case a fresh process; load "
        f"average (1 min) {load_before[0]:.2f} before, {load_after[0]:.2f} after, on "
        f"{os.cpu_count()} CPUs"
    )
    print(
        format_table(
            ["case", "wall s", "range", "x read", "CPU s", "x read", "peak RSS MB", "x read"], rows
        )
    )
    print(
        f"ope evaluate --json: {result['ratio_wall_evaluate_vs_read_table']:.2f}x the bare "
        f"read's wall time (per round: median {statistics.median(paired):.2f}, range "
        f"{min(paired):.2f}-{max(paired):.2f}), "
        f"{result['ratio_cpu_evaluate_vs_read_table']:.2f}x its CPU time, "
        f"{result['ratio_rss_evaluate_vs_read_table']:.2f}x its peak RSS"
    )
    if args.breakdown:
        result.update(breakdown(path, args.rounds))
    write_result("bench_cli", result)
    return result


if __name__ == "__main__":
    main()
