"""Shared helpers of the benchmark scripts: timing, peak memory, result files, data files.

The machines these benchmarks run on are shared and noisy, so every comparison is a *ratio*
against a baseline measured in the same process and the same rounds:

* :func:`interleaved` runs every case once per round, rotating the order from round to round,
  so a burst of load from another process hits all cases alike; it records wall-clock and CPU
  time; report medians over at least :data:`MIN_ROUNDS` rounds (:func:`summarize`,
  :func:`ratio`), and the spread as the noise;
* :func:`peak_rss` runs a workload in a fresh interpreter and reads the kernel's high-water mark
  of resident memory (``VmHWM`` in ``/proc/self/status``), reset with ``/proc/self/clear_refs``
  after the set-up so that the number is the workload's own extra peak;
* :func:`write_result` writes ``benchmarks/results/<name>.json`` (git-ignored) with the machine
  description and the load average, so that a number is never read without its context;
* :func:`data_path` places generated inputs in the git-ignored ``benchmarks/_data/``.

Tests never assert on any of these times.
"""

from __future__ import annotations

import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

HERE: Final = Path(__file__).resolve().parent
DATA_DIR: Final = HERE / "_data"
RESULTS_DIR: Final = HERE / "results"

#: Rounds of interleaved timing whose median is reported. Five is the fewest for which one
#: outlier round (a neighbour's burst of load) cannot move the median.
MIN_ROUNDS: Final = 5

__all__ = [
    "HERE",
    "DATA_DIR",
    "RESULTS_DIR",
    "MIN_ROUNDS",
    "Timings",
    "interleaved",
    "summarize",
    "ratio",
    "peak_rss",
    "machine_info",
    "write_result",
    "data_path",
    "format_table",
]


# --------------------------------------------------------------------------------------------
# timing
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Timings:
    """Seconds per round of each case: wall-clock and this process's CPU time.

    On a shared machine a process that is descheduled keeps its wall clock running but not its
    CPU clock, so CPU-time ratios are the less noisy of the two when the machine is loaded
    (they still feel cache and memory-bandwidth contention). Multithreaded code (BLAS) adds the
    CPU time of all its threads.
    """

    wall: dict[str, list[float]]
    cpu: dict[str, list[float]]


def interleaved(
    cases: Mapping[str, Callable[[], Any]],
    *,
    rounds: int = MIN_ROUNDS,
    warmup: int = 1,
) -> Timings:
    """Time each case once per round, rotating the order from round to round.

    Parameters
    ----------
    cases : mapping of str to callable
        The workloads; each is called without arguments and its result discarded.
    rounds : int, default MIN_ROUNDS
        Timed rounds.
    warmup : int, default 1
        Untimed rounds first (page faults of first-touch allocations, lazy imports, caches).

    Returns
    -------
    Timings
        Wall and CPU seconds per round for each case, in round order (round ``k`` of every case
        ran back to back, so ``wall[a][k] / wall[b][k]`` is a paired ratio).
    """
    if rounds < 1:
        raise ValueError(f"`rounds` must be at least 1; got {rounds}.")
    names = list(cases)
    for _ in range(warmup):
        for name in names:
            cases[name]()
    wall: dict[str, list[float]] = {name: [0.0] * rounds for name in names}
    cpu: dict[str, list[float]] = {name: [0.0] * rounds for name in names}
    for k in range(rounds):
        shift = k % len(names)
        for name in names[shift:] + names[:shift]:
            gc.collect()  # garbage of the previous case is not charged to this one
            c0 = time.process_time()
            t0 = time.perf_counter()
            cases[name]()
            wall[name][k] = time.perf_counter() - t0
            cpu[name][k] = time.process_time() - c0
    return Timings(wall, cpu)


def summarize(seconds: Sequence[float]) -> dict[str, float]:
    """Median, min, max and relative spread ``(max - min) / median`` of repeated timings."""
    med = statistics.median(seconds)
    return {
        "median_s": med,
        "min_s": min(seconds),
        "max_s": max(seconds),
        "spread": (max(seconds) - min(seconds)) / med if med > 0 else math.nan,
        "rounds": len(seconds),
    }


def ratio(numerator: Sequence[float], denominator: Sequence[float]) -> dict[str, float]:
    """Ratio of medians, and the range of the paired per-round ratios (the noise).

    The per-round ratios pair runs made back to back in the same round, so a slow round of the
    machine moves numerator and denominator together; their range says how far to trust the
    ratio of medians.
    """
    if len(numerator) != len(denominator):
        raise ValueError("numerator and denominator need the same number of rounds.")
    paired = [a / b for a, b in zip(numerator, denominator)]
    return {
        "ratio": statistics.median(numerator) / statistics.median(denominator),
        "paired_median": statistics.median(paired),
        "paired_min": min(paired),
        "paired_max": max(paired),
    }


# --------------------------------------------------------------------------------------------
# memory
# --------------------------------------------------------------------------------------------
_RSS_CHILD: Final = r"""
import gc, json, sys, time
sys.path.insert(0, sys.argv[1])
setup, workload = sys.argv[2], sys.argv[3]

def status(key):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024.0
    return float("nan")

ns = {"__name__": "__bench_child__"}
exec(setup, ns)
gc.collect()
before = status("VmRSS")
try:  # writing 5 resets VmHWM to the current RSS (Linux >= 4.0)
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    reset = True
except OSError:
    reset = False
baseline = before if reset else status("VmHWM")
t0 = time.perf_counter()
exec(workload, ns)
seconds = time.perf_counter() - t0
peak = status("VmHWM")
print("__RSS__" + json.dumps({
    "rss_before_mb": before, "peak_mb": peak, "extra_peak_mb": max(peak - baseline, 0.0),
    "hwm_reset": reset, "seconds": seconds,
}))
"""


def peak_rss(setup: str, workload: str, *, timeout: float | None = None) -> dict[str, Any]:
    """Peak resident memory of ``workload`` after ``setup``, in a fresh interpreter.

    Parameters
    ----------
    setup : str
        Python source run first (imports, data generation); not charged to the workload. The
        ``benchmarks`` directory is on ``sys.path``.
    workload : str
        Python source measured, run in the namespace of ``setup``.
    timeout : float, optional
        Seconds before the child is killed.

    Returns
    -------
    dict
        ``rss_before_mb`` (resident after set-up), ``peak_mb`` (high-water mark during the
        workload), ``extra_peak_mb`` (their difference: the workload's own peak) and
        ``hwm_reset`` (False where ``/proc/self/clear_refs`` is unavailable: then
        ``extra_peak_mb`` is the increase over the set-up's peak, a lower bound).
    """
    proc = subprocess.run(
        [sys.executable, "-c", _RSS_CHILD, str(HERE), setup, workload],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"peak_rss child failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}"
        )
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("__RSS__"):
            return json.loads(line[len("__RSS__") :])
    raise RuntimeError(f"peak_rss child printed no result:\n{proc.stdout[-2000:]}")


# --------------------------------------------------------------------------------------------
# results and data
# --------------------------------------------------------------------------------------------
def machine_info() -> dict[str, Any]:
    """Interpreter, library versions, CPUs and the current load average."""
    import numpy as np

    info: dict[str, Any] = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": (
            len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        ),
    }
    try:
        import pyarrow

        info["pyarrow"] = pyarrow.__version__
    except ImportError:  # pragma: no cover - pyarrow is a dependency of ope
        pass
    if hasattr(os, "getloadavg"):
        info["load_average_1_5_15"] = list(os.getloadavg())
    return info


def write_result(name: str, result: Mapping[str, Any], *, out: Path | None = None) -> Path:
    """Write ``result`` (plus ``machine``) as JSON to ``out`` or ``results/<name>.json``."""
    path = Path(out) if out is not None else RESULTS_DIR / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = dict(result)
    doc.setdefault("benchmark", name)
    doc.setdefault("machine", machine_info())
    path.write_text(json.dumps(doc, indent=2, default=_jsonable) + "\n")
    return path


def _jsonable(value: Any) -> Any:
    try:
        import numpy as np

        if isinstance(value, np.generic):
            return value.item()
        if isinstance(value, np.ndarray):
            return value.tolist()
    except ImportError:  # pragma: no cover
        pass
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON-serializable: {type(value).__name__}")


def data_path(filename: str) -> Path:
    """Path of a generated input in ``benchmarks/_data/`` (created; git-ignored)."""
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    return DATA_DIR / filename


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Plain-text table: first column left-aligned, the others right-aligned."""
    cells = [[str(h) for h in headers]] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for k, row in enumerate(cells):
        parts = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:])]
        lines.append("  ".join(parts))
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)
