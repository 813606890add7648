"""Benchmark: ``ope.evaluate`` of sampling-weighted rows against unweighted rows and the floor.

Every DSJSON import carries a ``weight`` column (``1 / (1 - pdrop)``), so the weighted path is a
main path. The moment kernel accumulates the sampling-weighted statistics as extra accumulators
of its one pass (:mod:`ope._kernel`); this script measures what that costs. On the synthetic logs
of ``bench_evaluate.py`` (P = 8 candidates, 16 context groups, 10 actions) with a ``weight``
column of ``1 / (1 - pdrop)``, ``pdrop`` uniform in [0, 0.9), it times in interleaved rounds
(medians, with the range of the paired per-round ratios):

* ``floor``: ``np.sum`` over every column the unweighted evaluate reads (reward, propensity and
  the 8 ``target__`` columns, zero-copy views): one read of the input bytes;
* ``floor_weighted``: the same plus the ``weight`` column;
* ``evaluate``: ``ope.evaluate`` (IPS, SNIPS, clipped IPS; normal intervals) of the logs without
  the weight column;
* ``evaluate_weighted``: the same call on the logs with it (Horvitz-Thompson estimates);
* ``stats`` / ``stats_weighted``: ``MomentStats.from_arrays`` (the per-batch step of scans and
  Dask) without and with ``sampling_weight``.

The ratios are weighted / unweighted evaluate (target: <= 1.5 at 10M x 8), each against its
floor, and the weighted against the unweighted statistics. The load average is recorded before
and after. Run it with another ``ope`` on ``PYTHONPATH`` (e.g. the main checkout) to time an
older implementation with the same script.

Usage::

    python benchmarks/bench_weighted.py              # 1M and 10M rows (about 3 GB of memory)
    python benchmarks/bench_weighted.py --quick      # 200k rows, 3 rounds
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path
from typing import Any, Final

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    format_table,
    interleaved,
    machine_info,
    ratio,
    summarize,
    write_result,
)
from bench_evaluate import MAX_WEIGHT, build_logs, make_data  # noqa: E402

#: The estimators of the timed evaluate (those of bench_evaluate's floor table).
ESTIMATORS: Final = ("ips", "snips", "clipped_ips")
#: Target: weighted evaluate within this factor of unweighted evaluate at 10M x 8.
TARGET_WEIGHTED: Final = 1.5
#: Largest drop probability of the synthetic pdrop (uniform in [0, PDROP_MAX)).
PDROP_MAX: Final = 0.9


def weighted_logs(data: dict[str, Any], seed: int = 1) -> tuple[Any, Any, np.ndarray]:
    """The unweighted logs, the same logs with a ``weight`` column, and the weights."""
    import pyarrow as pa

    from ope.io import read_logs

    plain = build_logs(data)
    rng = np.random.default_rng(seed)
    weight = 1.0 / (1.0 - rng.uniform(0.0, PDROP_MAX, data["n"]))
    table = plain.table.append_column("weight", pa.array(weight))
    return plain, read_logs(table), weight


def floor(logs: Any, extra: tuple[str, ...] = ()) -> list[float]:
    """``np.sum`` over reward, propensity, every ``target__`` column and ``extra``."""
    names = [
        "reward",
        "propensity",
        *[c for c in logs.table.column_names if c.startswith("target__")],
        *extra,
    ]
    return [float(np.sum(logs.column(c))) for c in names]


def run_evaluate(logs: Any) -> Any:
    import ope

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ope.evaluate(logs, estimators=ESTIMATORS, max_weight=MAX_WEIGHT, ci="normal")


def run_stats(data: dict[str, Any], columns: list[np.ndarray], weight: np.ndarray | None) -> Any:
    from ope.streaming import MomentStats

    kw = {} if weight is None else {"sampling_weight": weight}
    return MomentStats.from_arrays(
        data["reward"], data["propensity"], columns, max_weight=MAX_WEIGHT, **kw
    )


def bench(n: int, rounds: int) -> dict[str, Any]:
    data = make_data(n)
    plain, weighted, weight = weighted_logs(data)
    columns = [np.ascontiguousarray(data["target"][:, j]) for j in range(data["target"].shape[1])]
    del data["target"], data["q_target"]
    ev_w = run_evaluate(weighted)
    assert ev_w.weight_column == "weight"
    cases = {
        "floor": lambda: floor(plain),
        "floor_weighted": lambda: floor(weighted, ("weight",)),
        "evaluate": lambda: run_evaluate(plain),
        "evaluate_weighted": lambda: run_evaluate(weighted),
        "stats": lambda: run_stats(data, columns, None),
        "stats_weighted": lambda: run_stats(data, columns, weight),
    }
    load_before = list(os.getloadavg())
    times = interleaved(cases, rounds=rounds)
    load_after = list(os.getloadavg())
    w = times.wall
    return {
        "n": n,
        "policies": len(columns),
        "median_s": {k: summarize(v)["median_s"] for k, v in w.items()},
        "weighted_vs_unweighted_evaluate": ratio(w["evaluate_weighted"], w["evaluate"]),
        "evaluate_vs_floor": ratio(w["evaluate"], w["floor"]),
        "evaluate_weighted_vs_floor": ratio(w["evaluate_weighted"], w["floor_weighted"]),
        "weighted_vs_unweighted_stats": ratio(w["stats_weighted"], w["stats"]),
        "cpu_weighted_vs_unweighted_evaluate": ratio(
            times.cpu["evaluate_weighted"], times.cpu["evaluate"]
        ),
        "load_average_before_after": [load_before, load_after],
        "values": {"/".join(k): e.value for k, e in list(ev_w.estimates.items())[:3]},
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200k rows, 3 rounds")
    parser.add_argument("--sizes", type=int, nargs="*", default=None)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    sizes = args.sizes or ([200_000] if args.quick else [1_000_000, 10_000_000])
    rounds = 3 if args.quick else args.rounds
    import ope

    results = {
        "ope": str(Path(ope.__file__).resolve().parent),
        "target": TARGET_WEIGHTED,
        "runs": [bench(n, rounds) for n in sizes],
        "machine": machine_info(),
    }
    rows = []
    for r in results["runs"]:
        med = r["median_s"]
        wv = r["weighted_vs_unweighted_evaluate"]
        rows.append(
            [
                f"{r['n']:,}",
                f"{med['floor']:.3f}",
                f"{med['evaluate']:.3f}",
                f"{med['evaluate_weighted']:.3f}",
                f"{wv['ratio']:.2f} ({wv['paired_min']:.2f}-{wv['paired_max']:.2f})",
                f"{r['evaluate_vs_floor']['ratio']:.2f}",
                f"{r['evaluate_weighted_vs_floor']['ratio']:.2f}",
                f"{r['weighted_vs_unweighted_stats']['ratio']:.2f}",
                " / ".join(f"{x[0]:.1f}" for x in r["load_average_before_after"]),
            ]
        )
    print(f"ope from {results['ope']}")
    print(
        format_table(
            [
                "n",
                "floor s",
                "evaluate s",
                "weighted s",
                "weighted / unweighted (paired)",
                "eval / floor",
                "weighted / its floor",
                "stats w / u",
                "load 1-min before / after",
            ],
            rows,
        )
    )
    path = write_result("bench_weighted", results)
    print(f"written to {path}")


if __name__ == "__main__":
    main()
