"""Benchmark: overlap diagnostics against the evaluation pass they accompany.

P candidate policies over ``--rows`` logged rows with three segment columns (a small-integer
category, a continuous feature cut into quantile bins, and a string category). Timed in the same
process, in interleaved rounds (the order rotates from round to round; median of ``--rounds``,
at least five for a reported number), each with wall-clock and CPU (process) time:

* ``diagnostics`` -- ``ope.diagnostics.diagnose_arrays`` with the three segment columns, a clip
  level and a reward range, then ``Diagnostics.table()`` and ``.segments()``;
* ``evaluation`` -- the evaluation pass as users run it: ``ope.estimators.estimate_many`` for
  IPS and for SNIPS over the same (n, P) block (what ``ope.evaluate`` runs per estimator; the
  two are timed separately and added per round);
* ``numpy_minimal`` -- the least any evaluation must do: ``(Pe / p[:, None]).T @ r``;
* ``numpy_minimal_noalloc`` -- the same into a preallocated (n, P) buffer. A fresh (n, P)
  temporary is mapped from the kernel, whose zeroing of its pages can cost several times the
  arithmetic and varies with what ran before; this variant is the arithmetic alone, the
  strictest baseline.

A second interleaved run times the diagnostics of ``ope.evaluate``'s logs the way the command
line runs them (``after_evaluate`` in the result; skipped by ``--no-after-evaluate``):

* ``evaluate`` -- ``ope.evaluate`` of the P candidates (``target__`` columns of in-memory logs)
  with IPS, SNIPS and clipped IPS, a clip level and a reward range;
* ``diagnose_after_evaluate`` -- ``ope.diagnose`` of the same logs, candidates and clip level
  given that evaluation's ``statistics`` (every moment is read from them: no pass of the moment
  kernel; the diagnostics' own pass, histograms, KL sums, clip profile and exact quantiles,
  still reads the rows), without segment columns (target: <= 1.5x ``evaluate``);
* ``diagnose_alone`` -- the same without the statistics (its own moment pass), for reference.

The issue's target is diagnostics / evaluation <= 2; the ratio to the minimal numpy pass is
reported too. CPU-time ratios are the less noisy ones on a shared machine (a descheduled process
keeps its wall clock running, not its CPU clock); both are written, with the paired per-round
ratios as the noise. BLAS runs on one thread while timing (``--blas-threads``): idle OpenBLAS
threads spin-wait and would charge CPU time to whichever case runs next. Unless ``--no-stages``
is given, one more diagnostics call is timed stage by stage (input checks and segment coding, the
moment kernel per segment cell, the histogram pass, the exact-quantile pass, the result rows) so
that the breakdown of where the time goes is part of the result.

Results are printed and written to ``benchmarks/results/bench_diagnostics.json``.

Usage::

    python benchmarks/bench_diagnostics.py --rows 10000000 --policies 8
    python benchmarks/bench_diagnostics.py --quick
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    MIN_ROUNDS,
    format_table,
    interleaved,
    ratio,
    summarize,
    write_result,
)

import ope.diagnostics as diagnostics_module  # noqa: E402
from ope.diagnostics import diagnose_arrays  # noqa: E402
from ope.estimators import estimate_many  # noqa: E402
from ope.exceptions import OPEWarning  # noqa: E402

#: The issue's target for diagnostics / evaluation pass.
TARGET_RATIO: Final = 2.0

#: The target for diagnose after evaluate / evaluate (the evaluation's statistics reused).
TARGET_AFTER_EVALUATE: Final = 1.5

#: Clip level and reward range given to the diagnostics (every statistic is computed).
MAX_WEIGHT: Final = 50.0
REWARD_RANGE: Final = (0.0, 1.0)

#: Stages timed by ``--stages``: the functions ``ope.diagnostics`` calls, in call order.
STAGES: Final = (
    ("input checks and segment coding", "validated_inputs"),
    ("moment kernel per segment cell (all rows: their merge)", "segment_moments"),
    ("moment kernel (only without segment columns)", "centered_moments"),
    ("histogram and KL pass", "fused_pass"),
    ("exact-quantile pass", "weight_quantiles"),
    ("per-policy results", "policy_row"),
)


def make_data(n: int, n_policies: int, n_actions: int, seed: int) -> dict[str, Any]:
    """Synthetic logs: rewards, logged propensities, (n, P) target propensities, 3 segments."""
    rng = np.random.default_rng(seed)
    region = rng.integers(0, 12, n).astype(np.int64)
    age = rng.gamma(3.0, 12.0, n)
    device = pd.Categorical.from_codes(
        rng.integers(0, 3, n), categories=["desktop", "phone", "tablet"]
    )
    # logging propensity of the logged action and target propensities (n, P)
    p = rng.uniform(0.5 / n_actions, 2.0 / n_actions, n)
    target = np.empty((n, n_policies))
    for j in range(n_policies):  # one column per policy: a mix of greedy and soft candidates
        if j % 2 == 0:
            target[:, j] = (rng.random(n) < 1.0 / n_actions).astype(np.float64)
        else:
            target[:, j] = rng.uniform(0.0, 2.0 / n_actions, n)
    reward = (rng.random(n) < 0.1).astype(np.float64)
    return {
        "reward": reward,
        "p": p,
        "target": target,
        "segments": {"region": region, "age": age, "device": device},
    }


def numpy_minimal(reward: np.ndarray, p: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The minimal evaluation pass: IPS values of every column, ``(Pe / p).T @ r / n``."""
    return (target / p[:, None]).T @ reward / reward.shape[0]


def numpy_minimal_noalloc(
    reward: np.ndarray, p: np.ndarray, target: np.ndarray, out: np.ndarray
) -> np.ndarray:
    """:func:`numpy_minimal` writing the weights into ``out`` (allocated once, outside)."""
    return np.divide(target, p[:, None], out=out).T @ reward / reward.shape[0]


def run_diagnostics(data: dict[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OPEWarning)
        d = diagnose_arrays(
            data["reward"],
            data["p"],
            data["target"],
            segments=data["segments"],
            max_weight=MAX_WEIGHT,
            reward_range=REWARD_RANGE,
        )
        return d.table(), d.segments()


def run_estimator(name: str, data: dict[str, Any]) -> list[Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OPEWarning)
        return estimate_many(
            name,
            reward=data["reward"],
            logging_propensity=data["p"],
            target_propensity=data["target"],
        )


def bench_after_evaluate(data: dict[str, Any], rounds: int) -> dict[str, Any]:
    """``ope.diagnose`` given an evaluation's statistics against that ``ope.evaluate`` (and the
    diagnostics without them), on in-memory logs of the same rows, interleaved."""
    import pyarrow as pa

    import ope

    n, n_pol = data["target"].shape
    columns: dict[str, Any] = {
        "action": np.zeros(n, dtype=np.int64),
        "propensity": data["p"],
        "reward": data["reward"],
    }
    columns.update(
        {f"target__c{j}": np.ascontiguousarray(data["target"][:, j]) for j in range(n_pol)}
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OPEWarning)
        logs = ope.read_logs(pa.table(columns))

    def evaluate() -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", OPEWarning)
            return ope.evaluate(
                logs,
                estimators=("ips", "snips", "clipped_ips"),
                max_weight=MAX_WEIGHT,
                reward_range=REWARD_RANGE,
            )

    statistics = evaluate().statistics

    def diagnose(reuse: bool) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", OPEWarning)
            return ope.diagnose(
                logs,
                max_weight=MAX_WEIGHT,
                reward_range=REWARD_RANGE,
                statistics=statistics if reuse else None,
            ).table()

    # the benchmark checks itself: the statistics change no number of the diagnosis
    reused, alone = diagnose(True), diagnose(False)
    for column in reused.columns:
        if pd.api.types.is_float_dtype(reused[column]):
            np.testing.assert_allclose(reused[column], alone[column], rtol=1e-12, atol=1e-15)
    cases = {
        "evaluate": evaluate,
        "diagnose_after_evaluate": lambda: diagnose(True),
        "diagnose_alone": lambda: diagnose(False),
    }
    times = interleaved(cases, rounds=rounds)
    out: dict[str, Any] = {
        "target_ratio": TARGET_AFTER_EVALUATE,
        "seconds_wall": {k: summarize(v) for k, v in times.wall.items()},
        "seconds_cpu": {k: summarize(v) for k, v in times.cpu.items()},
    }
    for case in ("diagnose_after_evaluate", "diagnose_alone"):
        out[f"{case}_vs_evaluate_wall"] = ratio(times.wall[case], times.wall["evaluate"])
        out[f"{case}_vs_evaluate_cpu"] = ratio(times.cpu[case], times.cpu["evaluate"])
    return out


def stage_times(data: dict[str, Any]) -> dict[str, float]:
    """CPU seconds of each stage of one diagnostics call (wrapping the module's functions)."""
    spent: dict[str, float] = {label: 0.0 for label, _ in STAGES}
    originals: dict[str, Callable[..., Any]] = {}

    def timed(label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            c0 = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[label] += time.process_time() - c0

        return wrapper

    for label, attr in STAGES:
        originals[attr] = getattr(diagnostics_module, attr)
        setattr(diagnostics_module, attr, timed(label, originals[attr]))
    try:
        c0 = time.process_time()
        run_diagnostics(data)
        total = time.process_time() - c0
    finally:
        for attr, fn in originals.items():
            setattr(diagnostics_module, attr, fn)
    spent["rest (validation, notes, tables)"] = total - sum(spent.values())
    spent["total"] = total
    return spent


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--policies", type=int, default=8)
    parser.add_argument("--actions", type=int, default=10)
    parser.add_argument(
        "--rounds",
        "--repeat",
        dest="rounds",
        type=int,
        default=MIN_ROUNDS,
        help=f"timed rounds (median reported; at least {MIN_ROUNDS} for a number worth quoting)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--blas-threads",
        type=int,
        default=1,
        help="BLAS threads while timing (default 1: idle BLAS threads spin and "
        "charge CPU time to whatever case runs next; 0 leaves BLAS as it is)",
    )
    parser.add_argument("--quick", action="store_true", help="200,000 rows, 3 rounds")
    parser.add_argument(
        "--no-stages", dest="stages", action="store_false", help="skip the per-stage breakdown"
    )
    parser.add_argument(
        "--no-after-evaluate",
        dest="after_evaluate",
        action="store_false",
        help="skip diagnose-after-evaluate against evaluate",
    )
    parser.add_argument(
        "--only-after-evaluate",
        action="store_true",
        help="only diagnose-after-evaluate against evaluate",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="result file (default benchmarks/results/bench_diagnostics.json)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.rounds = 200_000, 3

    data = make_data(args.rows, args.policies, args.actions, args.seed)
    if args.only_after_evaluate:
        only = {"rows": args.rows, "policies": args.policies, "rounds": args.rounds}
        only["after_evaluate"] = _after_evaluate(data, args)
        path = write_result("bench_diagnostics_after_evaluate", only, out=args.out)
        print(f"written to {path}")
        return only
    r, p, t = data["reward"], data["p"], data["target"]
    weights_buffer = np.ones_like(t)  # touched once here, so its pages are resident
    cases = {
        "diagnostics": lambda: run_diagnostics(data),
        "estimate_many_ips": lambda: run_estimator("ips", data),
        "estimate_many_snips": lambda: run_estimator("snips", data),
        "numpy_minimal": lambda: numpy_minimal(r, p, t),
        "numpy_minimal_noalloc": lambda: numpy_minimal_noalloc(r, p, t, weights_buffer),
    }
    if args.blas_threads > 0:
        with threadpool_limits(limits=args.blas_threads, user_api="blas"):
            times = interleaved(cases, rounds=args.rounds)
    else:
        times = interleaved(cases, rounds=args.rounds)
    for clock in (times.wall, times.cpu):  # the evaluation pass: both estimators, per round
        clock["evaluation"] = [
            a + b for a, b in zip(clock["estimate_many_ips"], clock["estimate_many_snips"])
        ]
    table, segments = run_diagnostics(data)
    # the benchmark checks itself: the IPS values of the three paths agree
    ips = np.array([e.value for e in run_estimator("ips", data)])
    np.testing.assert_allclose(ips, numpy_minimal(r, p, t), rtol=1e-9)
    np.testing.assert_allclose(ips, numpy_minimal_noalloc(r, p, t, weights_buffer), rtol=1e-9)
    np.testing.assert_allclose(table["mean_weight"], t.T @ (1.0 / p) / args.rows, rtol=1e-9)

    result: dict[str, Any] = {
        "rows": args.rows,
        "policies": args.policies,
        "segment_columns": len(data["segments"]),
        "segments_per_policy": int(len(segments) // args.policies),
        "rounds": args.rounds,
        "blas_threads": args.blas_threads or "default",
        "target_ratio": TARGET_RATIO,
        "seconds_wall": {k: summarize(v) for k, v in times.wall.items()},
        "seconds_cpu": {k: summarize(v) for k, v in times.cpu.items()},
        "cpu_ratio_vs_evaluation": ratio(times.cpu["diagnostics"], times.cpu["evaluation"]),
        "wall_ratio_vs_evaluation": ratio(times.wall["diagnostics"], times.wall["evaluation"]),
        "cpu_ratio_vs_numpy_minimal": ratio(times.cpu["diagnostics"], times.cpu["numpy_minimal"]),
        "wall_ratio_vs_numpy_minimal": ratio(
            times.wall["diagnostics"], times.wall["numpy_minimal"]
        ),
        "cpu_ratio_vs_numpy_minimal_noalloc": ratio(
            times.cpu["diagnostics"], times.cpu["numpy_minimal_noalloc"]
        ),
        "wall_ratio_vs_numpy_minimal_noalloc": ratio(
            times.wall["diagnostics"], times.wall["numpy_minimal_noalloc"]
        ),
    }
    rows = [
        [
            name,
            result["seconds_cpu"][name]["median_s"],
            result["seconds_wall"][name]["median_s"],
            result["seconds_wall"][name]["spread"],
        ]
        for name in (
            "diagnostics",
            "evaluation",
            "estimate_many_ips",
            "estimate_many_snips",
            "numpy_minimal",
            "numpy_minimal_noalloc",
        )
    ]
    print(
        f"{args.rows:,} rows, {args.policies} policies, {len(data['segments'])} segment "
        f"columns; median of {args.rounds} interleaved rounds"
    )
    print(format_table(["case", "cpu s", "wall s", "wall spread"], rows))
    for base in ("evaluation", "numpy_minimal", "numpy_minimal_noalloc"):
        c, w = result[f"cpu_ratio_vs_{base}"], result[f"wall_ratio_vs_{base}"]
        print(
            f"diagnostics / {base}: {c['ratio']:.2f}x cpu (paired {c['paired_min']:.2f}-"
            f"{c['paired_max']:.2f}), {w['ratio']:.2f}x wall (paired {w['paired_min']:.2f}-"
            f"{w['paired_max']:.2f})"
        )
    print(
        f"target diagnostics / evaluation <= {TARGET_RATIO:g}: "
        f"{'met' if result['cpu_ratio_vs_evaluation']['ratio'] <= TARGET_RATIO else 'MISSED'}"
        " (cpu)"
    )
    if args.stages:
        stages = stage_times(data)
        result["stages_cpu_s"] = stages
        print(
            format_table(
                ["diagnostics stage", "cpu s", "share"],
                [[k, v, v / stages["total"]] for k, v in stages.items()],
            )
        )
    if args.after_evaluate:
        result["after_evaluate"] = _after_evaluate(data, args)
    path = write_result("bench_diagnostics", result, out=args.out)
    print(f"written to {path}")
    return result


def _after_evaluate(data: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """Run, print and return :func:`bench_after_evaluate` (BLAS threads as the main run)."""
    if args.blas_threads > 0:
        with threadpool_limits(limits=args.blas_threads, user_api="blas"):
            res = bench_after_evaluate(data, args.rounds)
    else:
        res = bench_after_evaluate(data, args.rounds)
    rows = [
        [name, res["seconds_cpu"][name]["median_s"], res["seconds_wall"][name]["median_s"]]
        for name in ("evaluate", "diagnose_after_evaluate", "diagnose_alone")
    ]
    print(format_table(["case (in-memory logs)", "cpu s", "wall s"], rows))
    for case in ("diagnose_after_evaluate", "diagnose_alone"):
        w, c = res[f"{case}_vs_evaluate_wall"], res[f"{case}_vs_evaluate_cpu"]
        print(
            f"{case} / evaluate: {w['ratio']:.2f}x wall (paired {w['paired_min']:.2f}-"
            f"{w['paired_max']:.2f}), {c['ratio']:.2f}x cpu"
        )
    met = res["diagnose_after_evaluate_vs_evaluate_wall"]["ratio"] <= TARGET_AFTER_EVALUATE
    print(
        f"target diagnose after evaluate / evaluate <= {TARGET_AFTER_EVALUATE:g}: "
        f"{'met' if met else 'MISSED'} (wall)"
    )
    return res


if __name__ == "__main__":
    main()
