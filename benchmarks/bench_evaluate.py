"""Benchmark: estimating P candidate policies against a minimal numpy pass, the bootstrap, and OBP.

Four measurements, each as a ratio against a baseline timed in the same process and the same
interleaved rounds (median of at least five; the per-round ratios give the noise), on synthetic
logs with exact ground truth (16 context groups, 10 actions, Bernoulli rewards):

1. ``ope.evaluate`` of P = 8 candidates with IPS, SNIPS and clipped IPS and normal intervals,
   starting from validated in-memory logs (``ope.read_logs(pyarrow_table)``, not timed), against
   the minimal numpy pass ``(Pe / p[:, None]).T @ r`` with ``Pe`` the (n, 8) float64 matrix
   (target: <= 2x). Also ``estimate_many`` alone for the same three estimators, the one-pass
   moment path (``ope.streaming.MomentStats``) that computes the same three from shared sums,
   and two numpy references: the baseline pass in blocks of 2**18 rows (the arithmetic without
   the page faults of a fresh (n, 8) temporary) and a fused one-pass numpy computation of the
   three values and standard errors.
   When a ratio misses its target, the stages of ``evaluate`` are timed one by one and a cProfile
   of one call lists where the time goes.
2. ``estimate_many("dr", ...)`` with given per-row reward-model vectors ``q_logged`` (n,) and
   ``q_target`` (n, 8), against the same baseline (target: <= 3x).
3. The vectorized bootstrap, ``Estimate.ci(method="bootstrap", n_resamples=1000)`` at n = 1M for
   IPS and SNIPS: seconds, and seconds per (resample x million rows).
4. Open Bandit Pipeline (``obp``), when an interpreter with obp is available (``--obp-python``;
   obp is never a dependency of ope): IPS, SNIPS and DR on identical inputs (obp gets the dense
   (n, K, 1) ``action_dist`` and ``estimated_rewards_by_reg_model`` it requires; ope the per-row
   vectors), values and times, interleaved with a persistent obp child process; and the two
   bootstraps at a small number of resamples.

5. The speed targets' ratios (``floor`` in the result): ``evaluate`` against the memory floor (``np.sum``
   over every column it reads: one read of the input bytes), the numpy baseline cold (a fresh
   (n, P) temporary per call) and warm (reused blocks) against the same floor, ``estimate_many``
   of the 3 estimators in one call (one pass of the moment kernel; target <= 1.2x), the same
   on a column-major copy of the matrix (the kernel's transposition of the row-major one
   is the difference), the same in 3 calls (one pass each, for reference) and the 24 single ``.estimate`` calls against
   ``evaluate`` (the same estimates), SNIPS against IPS; ``scaling``: evaluate's ns/row from 1M to 16M rows; ``jit``: the kernel's first
   call in fresh interpreters (compiling into an empty numba cache, loading a warm cache, the
   numpy fallback).

Peak memory of ``evaluate`` and of the numpy pass are measured in fresh interpreters
(``VmHWM``). Every ope number is checked against numpy on the same arrays and against the exact
policy values. Results are printed and written to ``benchmarks/results/bench_evaluate.json``.

Usage::

    python benchmarks/bench_evaluate.py               # n = 10M (about 3 GB of memory)
    python benchmarks/bench_evaluate.py --quick       # small sizes, well under a minute
    python benchmarks/bench_evaluate.py --floor-only  # only the speed targets' ratios (5.)
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import math
import os
import pstats
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Final

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    MIN_ROUNDS,
    data_path,
    format_table,
    interleaved,
    peak_rss,
    ratio,
    summarize,
    write_result,
)

NAME: Final = "bench_evaluate"
DEFAULT_ROWS: Final = 10_000_000
N_POLICIES: Final = 8
N_ACTIONS: Final = 10
#: Context groups of the synthetic logs; the exact value of a policy is an average over them.
N_GROUPS: Final = 16
#: Clip level of clipped IPS. The logging policy gives every action at least
#: LOGGING_FLOOR / N_ACTIONS, so raw weights stay below N_ACTIONS / LOGGING_FLOOR = 50 and a
#: level of 20 clips the tail of the sharpest candidates only.
MAX_WEIGHT: Final = 20.0
#: Share of the uniform policy mixed into the logging policy (bounds the weights, see above).
LOGGING_FLOOR: Final = 0.2
#: Targets of the issue: evaluate / numpy pass and DR / numpy pass.
TARGET_EVALUATE: Final = 2.0
TARGET_DR: Final = 3.0
#: ope and numpy must agree to this relative tolerance (float64 sums in different orders).
AGREEMENT_RTOL: Final = 1e-9

QUICK: Final = {
    "rows": 200_000,
    "bootstrap_rows": 100_000,
    "bootstrap_resamples": 200,
    "obp_rows": 50_000,
    "obp_bootstrap_resamples": 100,  # at least 4 / (1 - 0.95) + 1 = 81 (the interval rule)
}
FULL: Final = {
    "bootstrap_rows": 1_000_000,
    "bootstrap_resamples": 1000,
    "obp_rows": 1_000_000,
    "obp_bootstrap_resamples": 100,
}
DEFAULT_OBP_PYTHON: Final = os.environ.get("OPE_BENCH_OBP_PYTHON", "/tmp/obp-venv/bin/python")

ESTIMATORS_EVAL: Final = ("ips", "snips", "clipped_ips")
#: Rows per block of the chunked baseline: ope's own default chunk size, so both see the same
#: cache behaviour.
CHUNK_ROWS: Final = 1 << 18


# --------------------------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------------------------
def _softmax(x: np.ndarray) -> np.ndarray:
    z = np.exp(x - x.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def make_data(
    n: int, *, n_policies: int = N_POLICIES, n_actions: int = N_ACTIONS, seed: int = 0
) -> dict[str, Any]:
    """Synthetic logs with exact policy values.

    Contexts fall uniformly into ``N_GROUPS`` groups; the logging policy, the candidates and the
    reward means are tables over (group, action), so the value of candidate ``j`` is exactly
    ``mean_g sum_a pi_j(a|g) mu(g, a)``. The reward model ``q_hat`` is ``mu`` plus a fixed error.
    """
    rng = np.random.default_rng(seed)
    g_n, k = N_GROUPS, n_actions
    logging = (1.0 - LOGGING_FLOOR) * _softmax(rng.normal(size=(g_n, k))) + LOGGING_FLOOR / k
    betas = np.linspace(0.5, 4.0, n_policies)
    targets = np.stack([_softmax(b * rng.normal(size=(g_n, k))) for b in betas])  # (P, G, K)
    mu = rng.uniform(0.05, 0.6, size=(g_n, k))
    q_hat = np.clip(mu + rng.normal(0.0, 0.05, size=(g_n, k)), 0.0, 1.0)

    counts = rng.multinomial(n, np.full(g_n, 1.0 / g_n))
    group = np.repeat(np.arange(g_n), counts)
    action = np.concatenate(  # a loop over the 16 groups, not over rows
        [rng.choice(k, size=c, p=logging[gi]) for gi, c in enumerate(counts)]
    )
    order = rng.permutation(n)
    group, action = group[order], action[order].astype(np.int64)
    cell = group * k + action
    propensity = logging.ravel()[cell]
    reward = (rng.random(n) < mu.ravel()[cell]).astype(np.float64)
    target = np.empty((n, n_policies))
    for j in range(n_policies):
        target[:, j] = targets[j].ravel()[cell]
    q_target_tab = (targets * q_hat[None]).sum(axis=2)  # (P, G): q_hat(g, pi_j)
    return {
        "n": n,
        "group": group,
        "action": action,
        "propensity": propensity,
        "reward": reward,
        "target": target,
        "q_logged": q_hat.ravel()[cell],
        "q_target": np.ascontiguousarray(q_target_tab.T[group]),  # (n, P)
        "names": [f"policy_{j}" for j in range(n_policies)],
        "truth": (targets * mu[None]).sum(axis=2).mean(axis=1),  # (P,)
        "tables": {"targets": targets, "q_hat": q_hat},
    }


def build_logs(data: dict[str, Any]) -> Any:
    """Validated in-memory logs: an Arrow table with ``target__<name>`` columns."""
    import pyarrow as pa

    from ope.io import read_logs

    columns = {
        "action": data["action"],
        "propensity": data["propensity"],
        "reward": data["reward"],
    }
    for j, name in enumerate(data["names"]):
        columns[f"target__{name}"] = np.ascontiguousarray(data["target"][:, j])
    return read_logs(pa.table(columns))


# --------------------------------------------------------------------------------------------
# the workloads
# --------------------------------------------------------------------------------------------
def numpy_baseline(data: dict[str, Any]) -> np.ndarray:
    """The minimal pass: ``(Pe / p[:, None]).T @ r`` (IPS numerators of all P policies)."""
    return (data["target"] / data["propensity"][:, None]).T @ data["reward"]


def numpy_chunked(data: dict[str, Any]) -> np.ndarray:
    """The same pass in blocks of CHUNK_ROWS rows: the arithmetic without the (n, P) temporary.

    The unchunked baseline allocates a fresh (n, P) array per call, so its time includes the
    page faults of that allocation, which vary several-fold between runs on a busy machine; this
    variant is the steadier measure of the arithmetic alone.
    """
    t, p, r = data["target"], data["propensity"], data["reward"]
    out = np.zeros(t.shape[1])
    for start in range(0, t.shape[0], CHUNK_ROWS):  # a loop over blocks, not rows
        sl = slice(start, start + CHUNK_ROWS)
        out += (t[sl] / p[sl, None]).T @ r[sl]
    return out


def numpy_fused(data: dict[str, Any]) -> dict[str, np.ndarray]:
    """IPS, SNIPS and clipped IPS values and standard errors in one chunked numpy pass.

    A reference for what the three estimators need at the least: per block, the weights once
    (into a reused buffer), their squares and clipped versions, and ten per-policy sums (plain
    sums by ``einsum``, reward-weighted sums by BLAS). The standard errors come from the sums,
    e.g. ``sum w^2 (r - V)^2 = S_w2r2 - 2 V S_w2r + V^2 S_w2`` for SNIPS; this one-pass form
    can lose digits when the mean is large against the spread (a shift by a pilot estimate, or
    merging centred block statistics as in Chan, Golub & LeVeque 1983, avoids that).
    """
    t, p, r = data["target"], data["propensity"], data["reward"]
    n, n_pol = t.shape
    s = np.zeros((10, n_pol))
    buf_w = np.empty((min(CHUNK_ROWS, n), n_pol))
    buf_w2 = np.empty_like(buf_w)
    for start in range(0, n, CHUNK_ROWS):  # a loop over blocks, not rows
        sl = slice(start, start + CHUNK_ROWS)
        rc = r[sl]
        r2 = rc * rc
        w, w2 = buf_w[: rc.shape[0]], buf_w2[: rc.shape[0]]
        np.divide(t[sl], p[sl, None], out=w)
        for base in (0, 5):  # raw weights, then the clipped ones
            if base:
                np.minimum(w, MAX_WEIGHT, out=w)
            np.multiply(w, w, out=w2)
            s[base] += np.einsum("ip->p", w)
            s[base + 1] += w.T @ rc
            s[base + 2] += np.einsum("ip->p", w2)
            s[base + 3] += w2.T @ rc
            s[base + 4] += w2.T @ r2
    ips = s[1] / n
    snips = s[1] / s[0]
    clipped = s[6] / n
    sn_ss = s[4] - 2.0 * snips * s[3] + snips**2 * s[2]
    return {
        "ips_value": ips,
        "ips_se": np.sqrt(np.maximum(s[4] - n * ips**2, 0.0) / (n - 1) / n),
        "snips_value": snips,
        "snips_se": math.sqrt(n / (n - 1)) * np.sqrt(np.maximum(sn_ss, 0.0)) / s[0],
        "clipped_ips_value": clipped,
        "clipped_ips_se": np.sqrt(np.maximum(s[9] - n * clipped**2, 0.0) / (n - 1) / n),
    }


def run_evaluate(logs: Any) -> Any:
    from ope.evaluation import evaluate

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return evaluate(logs, estimators=ESTIMATORS_EVAL, max_weight=MAX_WEIGHT, ci="normal")


def run_evaluate_one_thread(logs: Any) -> Any:
    """``run_evaluate`` with the compiled pass kept on one thread (the kernel's threads
    setting), to show what the second core adds."""
    from ope import _kernel

    _kernel.set_threads(1)
    try:
        return run_evaluate(logs)
    finally:
        _kernel.set_threads(None)


def _estimator_objects() -> list[Any]:
    from ope.estimators import IPS, SNIPS, ClippedIPS

    return [IPS(), SNIPS(), ClippedIPS(max_weight=MAX_WEIGHT)]


def run_estimate_many(data: dict[str, Any], target: np.ndarray | None = None) -> list[list[Any]]:
    """The three estimators in one ``estimate_many`` call: one pass of the moment kernel (over
    ``target``, by default the row-major (n, P) matrix of ``data``)."""
    from ope.estimators import estimate_many

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return estimate_many(
            _estimator_objects(),
            reward=data["reward"],
            logging_propensity=data["propensity"],
            target_propensity=data["target"] if target is None else target,
            names=data["names"],
        )


def run_estimate_many_separately(data: dict[str, Any]) -> list[list[Any]]:
    """The three estimators in three ``estimate_many`` calls (one pass each), for reference."""
    from ope.estimators import estimate_many

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [
            estimate_many(
                est,
                reward=data["reward"],
                logging_propensity=data["propensity"],
                target_propensity=data["target"],
                names=data["names"],
            )
            for est in _estimator_objects()
        ]


def run_moment_stats(data: dict[str, Any]) -> list[list[Any]]:
    from ope.streaming import MomentStats

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        stats = MomentStats.from_arrays(
            data["reward"],
            data["propensity"],
            data["target"],
            max_weight=MAX_WEIGHT,
            names=data["names"],
        )
        return [stats.estimates(est) for est in _estimator_objects()]


def run_dr(data: dict[str, Any]) -> list[Any]:
    from ope.estimators import DR, estimate_many

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return estimate_many(
            DR(),
            reward=data["reward"],
            logging_propensity=data["propensity"],
            target_propensity=data["target"],
            q_logged=data["q_logged"],
            q_target=data["q_target"],
            names=data["names"],
        )


# --------------------------------------------------------------------------------------------
# against the memory floor: one read of the input bytes
# --------------------------------------------------------------------------------------------
#: Speed targets: evaluate within 2.5x (10M rows) or 4x (1M) the memory floor; estimate_many and the single
#: estimators within 1.2x of evaluate for the same estimates; SNIPS within 1.3x of IPS.
#: evaluate against the single-thread memory floor: at 10M rows (and more), and at 1M rows
TARGET_FLOOR: Final = 2.5
TARGET_FLOOR_1M: Final = 4.0
TARGET_SAME_ESTIMATES: Final = 1.2
TARGET_SNIPS_VS_IPS: Final = 1.3


def floor_pass(logs: Any) -> list[float]:
    """The memory floor: ``np.sum`` over every column evaluate reads (reward, propensity and
    each ``target__`` column, as zero-copy numpy views of the Arrow buffers): one read of the
    input bytes and nothing else."""
    table = logs.table
    names = ["reward", "propensity"] + [c for c in table.column_names if c.startswith("target__")]
    return [float(np.sum(logs.column(c))) for c in names]


def target_columns(data: dict[str, Any]) -> list[np.ndarray]:
    """The candidates' propensities as contiguous columns (how a user holding columns calls
    the single estimators)."""
    return [np.ascontiguousarray(data["target"][:, j]) for j in range(data["target"].shape[1])]


def run_singles(data: dict[str, Any], columns: list[np.ndarray]) -> list[Any]:
    """The same 3 x P estimates as evaluate, one ``Estimator.estimate`` call each."""
    from ope.estimators import IPS, SNIPS, ClippedIPS

    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for est in (IPS(), SNIPS(), ClippedIPS(max_weight=MAX_WEIGHT)):
            for col in columns:  # a loop over policies, not rows
                out.append(est.estimate(data["reward"], data["propensity"], col))
    return out


def run_single(est_name: str, data: dict[str, Any], column: np.ndarray) -> Any:
    from ope.estimators import get_estimator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return get_estimator(est_name).estimate(data["reward"], data["propensity"], column)


def bench_floor(data: dict[str, Any], logs: Any, *, rounds: int) -> dict[str, Any]:
    """evaluate, estimate_many and the single estimators against the memory floor and against
    each other, and the numpy baseline cold (a fresh (n, P) temporary per call: its page faults
    included) and warm (the same arithmetic in reused 2**18-row blocks), in one interleaved run.
    """
    columns = target_columns(data)
    # the same matrix in column-major order: the kernel reads its columns as they are, where
    # the row-major one is transposed block by block in cache (the difference is that cost)
    fortran = np.asfortranarray(data["target"])
    # the numpy baselines (a fresh 0.64 GB temporary per cold call at 10M rows) run in their own
    # interleaved rounds, each against the floor timed in those rounds: their page faults and
    # freed memory would otherwise slow whatever runs after them
    numpy_cases = {
        "floor": lambda: floor_pass(logs),
        "numpy_cold": lambda: numpy_baseline(data),
        "numpy_warm": lambda: numpy_chunked(data),
    }
    numpy_times = interleaved(numpy_cases, rounds=rounds)
    cases = {
        "floor": lambda: floor_pass(logs),
        "evaluate": lambda: run_evaluate(logs),
        "evaluate_one_thread": lambda: run_evaluate_one_thread(logs),
        "estimate_many_x3": lambda: run_estimate_many(data),
        "estimate_many_3_calls": lambda: run_estimate_many_separately(data),
        "estimate_many_x3_column_major": lambda: run_estimate_many(data, fortran),
        "single_estimates_x3P": lambda: run_singles(data, columns),
        "ips_single": lambda: run_single("ips", data, columns[0]),
        "snips_single": lambda: run_single("snips", data, columns[0]),
    }
    times = interleaved(cases, rounds=rounds)
    med = {k: summarize(v) for k, v in times.wall.items()}
    med.update(
        {
            f"{k}_numpy_rounds" if k == "floor" else k: summarize(v)
            for k, v in numpy_times.wall.items()
        }
    )
    n_est = len(ESTIMATORS_EVAL) * data["target"].shape[1]
    ratios = {
        "evaluate_vs_floor": ratio(times.wall["evaluate"], times.wall["floor"]),
        "evaluate_one_thread_vs_floor": ratio(
            times.wall["evaluate_one_thread"], times.wall["floor"]
        ),
        "threads_speedup": ratio(times.wall["evaluate_one_thread"], times.wall["evaluate"]),
        "numpy_cold_vs_floor": ratio(numpy_times.wall["numpy_cold"], numpy_times.wall["floor"]),
        "numpy_warm_vs_floor": ratio(numpy_times.wall["numpy_warm"], numpy_times.wall["floor"]),
        "estimate_many_vs_evaluate": ratio(times.wall["estimate_many_x3"], times.wall["evaluate"]),
        "estimate_many_3_calls_vs_evaluate": ratio(
            times.wall["estimate_many_3_calls"], times.wall["evaluate"]
        ),
        "estimate_many_column_major_vs_evaluate": ratio(
            times.wall["estimate_many_x3_column_major"], times.wall["evaluate"]
        ),
        "single_estimates_vs_evaluate": ratio(
            times.wall["single_estimates_x3P"], times.wall["evaluate"]
        ),
        "snips_vs_ips": ratio(times.wall["snips_single"], times.wall["ips_single"]),
        "ips_single_vs_floor": ratio(times.wall["ips_single"], times.wall["floor"]),
    }
    targets = {
        "evaluate_vs_floor": TARGET_FLOOR if data["n"] >= 10_000_000 else TARGET_FLOOR_1M,
        "estimate_many_vs_evaluate": TARGET_SAME_ESTIMATES,
        "single_estimates_vs_evaluate": TARGET_SAME_ESTIMATES,
        "snips_vs_ips": TARGET_SNIPS_VS_IPS,
    }
    n = data["n"]
    return {
        "rows": n,
        "policies": data["target"].shape[1],
        "estimates": n_est,
        "floor": "np.sum over reward, propensity and every target__ column (zero-copy views)",
        "floor_bytes": 8 * n * (2 + data["target"].shape[1]),
        "timings": med,
        "cpu_timings": {k: summarize(v) for k, v in times.cpu.items()},
        "all_times_s": {"wall": times.wall, "cpu": times.cpu},
        "numpy_rounds_s": {"wall": numpy_times.wall, "cpu": numpy_times.cpu},
        "ratios": {k: v["ratio"] for k, v in ratios.items()},
        "ratio_details": ratios,
        "targets": targets,
        "targets_met": {k: ratios[k]["ratio"] <= v for k, v in targets.items()},
        "evaluate_ns_per_row": med["evaluate"]["median_s"] / n * 1e9,
        "floor_gb_per_s": 8 * n * (2 + data["target"].shape[1]) / med["floor"]["median_s"] / 1e9,
        "kernel_backend": _backend(),
    }


def _backend() -> str:
    from ope import _kernel

    return _kernel.backend()


def bench_scaling(sizes: list[int], *, rounds: int) -> dict[str, Any]:
    """evaluate and the memory floor from 1M to 16M rows (P = 8): seconds and ns per row."""
    out: dict[str, Any] = {
        "sizes": sizes,
        "evaluate_ns_per_row": {},
        "floor_ns_per_row": {},
        "evaluate_vs_floor": {},
        "evaluate_s": {},
    }
    for n in sizes:  # a loop over sizes
        data = make_data(n)
        logs = build_logs(data)
        del data
        times = interleaved(
            {
                "floor": lambda logs=logs: floor_pass(logs),
                "evaluate": lambda logs=logs: run_evaluate(logs),
            },
            rounds=rounds,
        )
        ev = summarize(times.wall["evaluate"])["median_s"]
        fl = summarize(times.wall["floor"])["median_s"]
        out["evaluate_s"][n] = ev
        out["evaluate_ns_per_row"][n] = ev / n * 1e9
        out["floor_ns_per_row"][n] = fl / n * 1e9
        out["evaluate_vs_floor"][n] = ratio(times.wall["evaluate"], times.wall["floor"])["ratio"]
        del logs
    per_row = list(out["evaluate_ns_per_row"].values())
    out["ns_per_row_max_over_min"] = max(per_row) / min(per_row)
    return out


_JIT_CHILD: Final = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
from ope import _kernel
from ope.estimators import IPS
t_import = time.perf_counter() - t0
rng = np.random.default_rng(0)
n = int(sys.argv[1])
r, p, t = rng.random(n), rng.uniform(0.1, 1.0, n), rng.random(n)
t1 = time.perf_counter()
IPS().estimate(r, p, t)
first = time.perf_counter() - t1
t2 = time.perf_counter()
IPS().estimate(r, p, t)
second = time.perf_counter() - t2
print(json.dumps({"import_s": t_import, "first_call_s": first, "second_call_s": second,
                  "backend": _kernel.backend()}))
"""


def bench_jit(n: int) -> dict[str, Any]:
    """The kernel's first-call cost in fresh interpreters: compiling into an empty numba cache
    (cold), loading the cached machine code (warm cache), and the numpy fallback; each with the
    second call of the same process for comparison."""
    import tempfile

    out: dict[str, Any] = {"rows": n}
    with tempfile.TemporaryDirectory() as cache:
        runs = {
            "cold_compile": {"NUMBA_CACHE_DIR": cache},
            "warm_cache": {"NUMBA_CACHE_DIR": cache},
            "numpy_fallback": {"OPE_KERNEL": "numpy"},
        }
        for name, extra in runs.items():  # in this order: cold fills the cache warm reads
            env = dict(os.environ, **extra)
            proc = subprocess.run(
                [sys.executable, "-c", _JIT_CHILD, str(n)],
                env=env,
                capture_output=True,
                text=True,
                timeout=900,
                cwd=str(Path(__file__).resolve().parents[1]),
            )
            if proc.returncode != 0:
                out[name] = {"failed": proc.stderr[-2000:]}
            else:
                out[name] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


# --------------------------------------------------------------------------------------------
# correctness of what is timed
# --------------------------------------------------------------------------------------------
def reference_values(data: dict[str, Any]) -> dict[str, np.ndarray]:
    """Values and standard errors from plain numpy, one policy column at a time."""
    r, p = data["reward"], data["propensity"]
    n = r.shape[0]
    out: dict[str, list[float]] = {}

    def add(key: str, value: float, se: float) -> None:
        out.setdefault(f"{key}_value", []).append(value)
        out.setdefault(f"{key}_se", []).append(se)

    for j in range(data["target"].shape[1]):
        w = data["target"][:, j] / p
        wr = w * r
        add("ips", wr.mean(), wr.std(ddof=1) / math.sqrt(n))
        v = wr.sum() / w.sum()
        add("snips", v, math.sqrt(n / (n - 1)) * math.sqrt(np.sum((w * (r - v)) ** 2)) / w.sum())
        cwr = np.minimum(w, MAX_WEIGHT) * r
        add("clipped_ips", cwr.mean(), cwr.std(ddof=1) / math.sqrt(n))
        dr = data["q_target"][:, j] + w * (r - data["q_logged"])
        add("dr", dr.mean(), dr.std(ddof=1) / math.sqrt(n))
    return {k: np.asarray(v) for k, v in out.items()}


def check_values(data: dict[str, Any], logs: Any) -> dict[str, Any]:
    """ope's numbers (evaluate, estimate_many, moment path, DR) against numpy and the truth."""
    ref = reference_values(data)
    ev = run_evaluate(logs)
    em = dict(zip(ESTIMATORS_EVAL, run_estimate_many(data)))
    ms = dict(zip(ESTIMATORS_EVAL, run_moment_stats(data)))
    dr = run_dr(data)
    got: dict[str, dict[str, list[Any]]] = {"evaluate": {}, "estimate_many": {}, "moment_stats": {}}
    for key in ESTIMATORS_EVAL:
        got["evaluate"][key] = [ev[(name, key)] for name in data["names"]]
        got["estimate_many"][key] = em[key]
        got["moment_stats"][key] = ms[key]
    got["estimate_many"]["dr"] = dr

    def rel(a: list[float], b: np.ndarray) -> float:
        a_arr = np.asarray(a, dtype=np.float64)
        return float(np.max(np.abs(a_arr - b) / np.maximum(np.abs(b), 1e-300)))

    diffs: dict[str, float] = {}
    fused = numpy_fused(data)
    for key in ESTIMATORS_EVAL:
        for part, label in (("value", "value"), ("se", "std_error")):
            diffs[f"numpy_fused.{key}.{label}"] = rel(
                list(fused[f"{key}_{part}"]), ref[f"{key}_{part}"]
            )
    for path, by_est in got.items():
        for key, ests in by_est.items():
            diffs[f"{path}.{key}.value"] = rel([e.value for e in ests], ref[f"{key}_value"])
            diffs[f"{path}.{key}.std_error"] = rel([e.std_error for e in ests], ref[f"{key}_se"])
    z = {
        key: ((ref[f"{key}_value"] - data["truth"]) / ref[f"{key}_se"]).round(2).tolist()
        for key in ("ips", "snips", "dr")
    }
    return {
        "max_relative_difference": diffs,
        "agree": all(d <= AGREEMENT_RTOL for d in diffs.values()),
        "tolerance": AGREEMENT_RTOL,
        "z_vs_truth": z,
        "truth": data["truth"].tolist(),
    }


# --------------------------------------------------------------------------------------------
# where the time goes
# --------------------------------------------------------------------------------------------
def profile_evaluate(data: dict[str, Any], logs: Any, *, rounds: int) -> dict[str, Any]:
    """Time the pieces of ``evaluate`` and ``estimate_many`` one by one; cProfile one evaluate.

    ``evaluate`` computes IPS, SNIPS and clipped IPS from one pass of merged moments
    (``MomentStats``); ``estimate_many`` makes two passes per estimator. Both are timed here,
    with numpy versions of the input checks and of one plain pass for scale.
    """
    from ope.estimators import estimate_many, logging_value
    from ope.policies import target_propensities
    from ope.streaming import MomentStats

    state: dict[str, Any] = {}

    def stage_columns() -> None:
        state["reward"] = logs.column("reward")
        state["propensity"] = logs.column("propensity")

    def stage_target() -> None:
        state["tp"] = target_propensities(logs, None)

    def stage_estimator(est: Any) -> Any:
        def run() -> None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                estimate_many(
                    est,
                    reward=state["reward"],
                    logging_propensity=state["propensity"],
                    target_propensity=state["tp"].values,
                    names=state["tp"].names,
                )

        return run

    def stage_moments() -> None:
        state["stats"] = MomentStats.from_arrays(
            state["reward"],
            state["propensity"],
            state["tp"].values,
            max_weight=MAX_WEIGHT,
            names=state["tp"].names,
        )

    def stage_from_moments() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for est in _estimator_objects():
                state["stats"].estimates(est)

    ev = run_evaluate(logs)
    stage_columns()
    stage_target()
    stage_moments()
    stages: dict[str, Any] = {
        "logs.column(reward, propensity)": stage_columns,
        "target_propensities (Arrow -> (n, P) float64 + range checks)": stage_target,
        "MomentStats.from_arrays (one pass, all three estimators)": stage_moments,
        "MomentStats.estimates x 3": stage_from_moments,
        "logging_value": lambda: logging_value(state["reward"]),
        "Evaluation.table() (intervals)": ev.table,
    }
    for key, est in zip(ESTIMATORS_EVAL, _estimator_objects()):
        stages[f"estimate_many({key}) (two passes)"] = stage_estimator(est)
    # pieces of estimate_many: the input checks and one chunked pass, written out in numpy
    t = data["target"]
    p = data["propensity"]

    def numpy_checks() -> None:
        np.isfinite(t).all()
        ((t < 0) | (t > 1)).any()

    stages["  numpy: isfinite + [0, 1] checks of (n, P)"] = numpy_checks
    stages["  numpy: one pass W = Pe / p, W*r, column sums"] = lambda: np.einsum(
        "ip->p", (t / p[:, None]) * data["reward"][:, None]
    )
    times = interleaved(stages, rounds=rounds, warmup=0)
    med = {k: summarize(v)["median_s"] for k, v in times.wall.items()}
    med_cpu = {k: summarize(v)["median_s"] for k, v in times.cpu.items()}

    profiler = cProfile.Profile()
    profiler.enable()
    run_evaluate(logs)
    profiler.disable()
    st = pstats.Stats(profiler, stream=io.StringIO())
    total = st.total_tt  # type: ignore[attr-defined]
    rows = []
    entries = st.stats.items()  # type: ignore[attr-defined]
    for (filename, line, func), (_, nc, tt, ct, _) in entries:
        rows.append(
            {
                "function": f"{Path(filename).name}:{line}({func})",
                "calls": nc,
                "tottime_s": tt,
                "cumtime_s": ct,
            }
        )
    rows.sort(key=lambda r: r["tottime_s"], reverse=True)
    return {
        "stage_median_s": med,
        "stage_median_cpu_s": med_cpu,
        "cprofile_total_s": total,
        "cprofile_top": rows[:15],
    }


# --------------------------------------------------------------------------------------------
# bootstrap
# --------------------------------------------------------------------------------------------
def bench_bootstrap(n: int, n_resamples: int, rounds: int) -> dict[str, Any]:
    from ope.estimators import IPS, SNIPS

    data = make_data(n, n_policies=1, seed=1)
    args = {
        "reward": data["reward"],
        "logging_propensity": data["propensity"],
        "target_propensity": data["target"][:, 0],
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ests = {"ips": IPS().estimate(**args), "snips": SNIPS().estimate(**args)}
    intervals: dict[str, list[float]] = {}

    def case(key: str) -> Any:
        def run() -> None:
            ci = ests[key].ci(method="bootstrap", n_resamples=n_resamples, rng=0)
            intervals[key] = [float(ci.low), float(ci.high)]

        return run

    times = interleaved({k: case(k) for k in ests}, rounds=rounds, warmup=0)
    out: dict[str, Any] = {"rows": n, "n_resamples": n_resamples}
    for key, secs in times.wall.items():
        s = summarize(secs)
        normal = ests[key].ci(method="normal")
        out[key] = {
            **s,
            "cpu_median_s": summarize(times.cpu[key])["median_s"],
            "seconds_per_resample_million_rows": s["median_s"] / (n_resamples * n / 1e6),
            "interval": intervals[key],
            "normal_interval": [float(normal.low), float(normal.high)],
            "value": ests[key].value,
        }
    return out


# --------------------------------------------------------------------------------------------
# Open Bandit Pipeline, in its own interpreter
# --------------------------------------------------------------------------------------------
_OBP_CHILD: Final = r"""
import json, sys, time, warnings
warnings.filterwarnings("ignore")
import numpy as np
import obp
from obp.ope import (DoublyRobust, InverseProbabilityWeighting,
                     SelfNormalizedInverseProbabilityWeighting)
d = np.load(sys.argv[1])
inputs = {"reward": d["reward"], "action": d["action"], "pscore": d["pscore"],
          "action_dist": d["action_dist"]}
estimators = {"ips": InverseProbabilityWeighting(),
              "snips": SelfNormalizedInverseProbabilityWeighting(), "dr": DoublyRobust()}
def kwargs(name):
    kw = dict(inputs)
    if name == "dr":
        kw["estimated_rewards_by_reg_model"] = d["q_hat"]
    return kw
print(json.dumps({"ready": True, "obp": obp.__version__, "numpy": np.__version__,
                  "python": sys.version.split()[0]}), flush=True)
for line in sys.stdin:
    cmd = line.split()
    if not cmd or cmd[0] == "quit":
        break
    name = cmd[1]
    c0 = time.process_time()
    t0 = time.perf_counter()
    if cmd[0] == "value2":  # two calls in a row: the second's time
        estimators[name].estimate_policy_value(**kwargs(name))
        c0 = time.process_time()
        t0 = time.perf_counter()
    if cmd[0] in ("value", "value2"):
        value = float(estimators[name].estimate_policy_value(**kwargs(name)))
        out = {"seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0,
               "value": value}
    else:
        ci = estimators[name].estimate_interval(**kwargs(name), alpha=0.05,
                                                n_bootstrap_samples=int(cmd[2]), random_state=0)
        seconds = time.perf_counter() - t0
        low = [v for k, v in ci.items() if "lower" in k][0]
        high = [v for k, v in ci.items() if "upper" in k][0]
        out = {"seconds": seconds, "interval": [float(low), float(high)]}
    print(json.dumps(out), flush=True)
"""


class _ObpChild:
    """A persistent obp interpreter answering one timing request per line."""

    def __init__(self, python: str, inputs: Path) -> None:
        self.proc = subprocess.Popen(
            [python, "-c", _OBP_CHILD, str(inputs)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.info = self._read()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                err = self.proc.stderr.read() if self.proc.stderr else ""
                raise RuntimeError(f"obp child exited: {err[-3000:]}")
            if line.startswith("{"):
                return json.loads(line)

    def ask(self, command: str) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        """Ask the child to quit, wait for it and close its three pipes."""
        self.proc.communicate("quit\n" if self.proc.poll() is None else None, timeout=60)


def bench_obp(python: str, n: int, *, rounds: int, n_resamples: int) -> dict[str, Any]:
    """obp vs ope on identical inputs: values, interleaved times, and both bootstraps."""
    from ope.estimators import DR, IPS, SNIPS

    if not Path(python).exists():
        return {
            "skipped": f"no obp interpreter at {python}; create one with "
            "`python3.10 -m venv /tmp/obp-venv && /tmp/obp-venv/bin/pip install obp "
            "'matplotlib<3.6'` or pass --obp-python"
        }
    data = make_data(n, n_policies=1, n_actions=N_ACTIONS, seed=2)
    tabs = data["tables"]
    rows = np.arange(n)
    # obp's inputs: the dense distribution and reward-model tensors (n, K, len_list = 1)
    action_dist = tabs["targets"][0][data["group"]][:, :, None]
    q_hat = tabs["q_hat"][data["group"]][:, :, None]
    path = data_path(f"obp_inputs_{n}.npz")
    np.savez(
        path,
        reward=data["reward"],
        action=data["action"],
        pscore=data["propensity"],
        action_dist=action_dist,
        q_hat=q_hat,
    )
    # ope's inputs: one number per row (computed from the same tensors, not timed)
    t0 = time.perf_counter()
    target = action_dist[rows, data["action"], 0]
    q_logged = q_hat[rows, data["action"], 0]
    q_target = np.einsum("ik,ik->i", action_dist[:, :, 0], q_hat[:, :, 0])
    conversion_s = time.perf_counter() - t0
    args = {
        "reward": data["reward"],
        "logging_propensity": data["propensity"],
        "target_propensity": target,
    }
    ope_est = {"ips": IPS(), "snips": SNIPS(), "dr": DR()}

    def ope_run(key: str) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if key == "dr":
                return ope_est[key].estimate(**args, q_logged=q_logged, q_target=q_target)
            return ope_est[key].estimate(**args)

    child = _ObpChild(python, path)
    try:
        obp_times: dict[str, list[float]] = {k: [] for k in ope_est}
        ope_times: dict[str, list[float]] = {k: [] for k in ope_est}
        obp_cpu: dict[str, list[float]] = {k: [] for k in ope_est}
        ope_cpu: dict[str, list[float]] = {k: [] for k in ope_est}
        obp_values: dict[str, float] = {}
        ope_values: dict[str, float] = {}
        for key in ope_est:  # warm-up of both sides
            child.ask(f"value {key}")
            ope_run(key)
        for k in range(rounds):
            for key in ope_est:
                first_obp = (k % 2) == 0
                if first_obp:
                    res = child.ask(f"value {key}")
                c1 = time.process_time()
                t1 = time.perf_counter()
                est = ope_run(key)
                ope_times[key].append(time.perf_counter() - t1)
                ope_cpu[key].append(time.process_time() - c1)
                if not first_obp:
                    res = child.ask(f"value {key}")
                obp_times[key].append(res["seconds"])
                obp_cpu[key].append(res["cpu_seconds"])
                obp_values[key] = res["value"]
                ope_values[key] = est.value
        # each side's second of two calls in a row, in alternating rounds: the steady-state
        # time, without what a call pays after waiting idle for the other process (on these
        # virtual machines about a millisecond at the start of a call, whatever its length)
        steady_obp: dict[str, list[float]] = {k: [] for k in ope_est}
        steady_ope: dict[str, list[float]] = {k: [] for k in ope_est}
        for k in range(rounds):
            for key in ope_est:
                first_obp = (k % 2) == 0
                if first_obp:
                    steady_obp[key].append(child.ask(f"value2 {key}")["seconds"])
                ope_run(key)
                t1 = time.perf_counter()
                ope_run(key)
                steady_ope[key].append(time.perf_counter() - t1)
                if not first_obp:
                    steady_obp[key].append(child.ask(f"value2 {key}")["seconds"])
        boot: dict[str, Any] = {"n_resamples": n_resamples}
        for key in ("ips", "snips"):
            res = child.ask(f"interval {key} {n_resamples}")
            est = ope_run(key)
            t1 = time.perf_counter()
            ci = est.ci(method="bootstrap", n_resamples=n_resamples, rng=0)
            ope_s = time.perf_counter() - t1
            boot[key] = {
                "obp_seconds": res["seconds"],
                "ope_seconds": ope_s,
                "ratio_obp_vs_ope": res["seconds"] / ope_s,
                "obp_interval": res["interval"],
                "ope_interval": [float(ci.low), float(ci.high)],
                "ope_normal_interval": list(map(float, est.ci(method="normal"))),
            }
    finally:
        child.close()
    out: dict[str, Any] = {
        "rows": n,
        "n_actions": N_ACTIONS,
        "obp": child.info,
        "ope_input_conversion_s": conversion_s,
        "estimators": {},
        "bootstrap": boot,
        "note": "obp times estimate_policy_value (value only, dense (n, K, 1) inputs with "
        "their checks); ope times Estimator.estimate (value, standard error, normal interval "
        "and diagnostics) on per-row vectors.",
    }
    for key in ope_est:
        out["estimators"][key] = {
            "obp": summarize(obp_times[key]),
            "ope": summarize(ope_times[key]),
            **{f"obp_vs_ope_{k}": v for k, v in ratio(obp_times[key], ope_times[key]).items()},
            "obp_vs_ope_cpu_ratio": ratio(obp_cpu[key], ope_cpu[key])["ratio"],
            "obp_value": obp_values[key],
            "ope_value": ope_values[key],
            "abs_difference": abs(obp_values[key] - ope_values[key]),
            "back_to_back": {
                "obp": summarize(steady_obp[key]),
                "ope": summarize(steady_ope[key]),
                **{
                    f"obp_vs_ope_{k}": v for k, v in ratio(steady_obp[key], steady_ope[key]).items()
                },
            },
        }
    return out


# --------------------------------------------------------------------------------------------
# memory
# --------------------------------------------------------------------------------------------
def bench_memory(n: int) -> dict[str, Any]:
    """Extra peak RSS of evaluate and of the numpy pass over the same in-memory data."""
    # the set-up runs every workload once on tiny data, so that lazy imports and one-time
    # allocations are not charged to the measured run
    setup = (
        "import bench_evaluate as b\n"
        "small = b.make_data(1000)\n"
        "b.numpy_baseline(small); b.run_evaluate(b.build_logs(small)); b.run_estimate_many(small)\n"
        f"data = b.make_data({n})\n"
        "logs = b.build_logs(data)\n"
    )
    out: dict[str, Any] = {"rows": n, "target_matrix_mb": n * N_POLICIES * 8 / 2**20}
    for name, workload in (
        ("numpy_baseline", "b.numpy_baseline(data)"),
        ("evaluate", "b.run_evaluate(logs)"),
        ("estimate_many", "b.run_estimate_many(data)"),
    ):
        out[name] = peak_rss(setup, workload)
    out["evaluate_extra_over_target_matrix"] = (
        out["evaluate"]["extra_peak_mb"] / out["target_matrix_mb"]
    )
    return out


# --------------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=None, help="rows (default 10,000,000)")
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--rounds", type=int, default=MIN_ROUNDS, help="interleaved rounds")
    parser.add_argument("--bootstrap-rounds", type=int, default=3)
    parser.add_argument("--obp-python", default=DEFAULT_OBP_PYTHON)
    parser.add_argument("--skip-obp", action="store_true")
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--skip-scaling", action="store_true")
    parser.add_argument("--skip-jit", action="store_true")
    parser.add_argument(
        "--scaling-sizes",
        type=int,
        nargs="+",
        default=None,
        help="rows for the linear-scaling run (default 1M 2M 4M 8M 16M)",
    )
    parser.add_argument(
        "--floor-only", action="store_true", help="only the speed targets' ratios (floor)"
    )
    parser.add_argument("--out", type=Path, default=None, help="result file")
    args = parser.parse_args(argv)
    if args.rounds < MIN_ROUNDS:
        parser.error(f"--rounds must be at least {MIN_ROUNDS} (medians of fewer are noise)")
    sizes = dict(QUICK if args.quick else FULL)
    n = args.rows if args.rows is not None else sizes.get("rows", DEFAULT_ROWS)
    started = time.perf_counter()

    t0 = time.perf_counter()
    data = make_data(n)
    generate_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    logs = build_logs(data)
    read_logs_s = time.perf_counter() - t0
    checks = check_values(data, logs)
    if args.floor_only:
        result_floor = {
            "rows": n,
            "checks": checks,
            "floor": bench_floor(data, logs, rounds=args.rounds),
            "total_seconds": time.perf_counter() - started,
        }
        path = write_result(NAME + "_floor", result_floor, out=args.out)
        print(json.dumps(result_floor["floor"]["ratio_details"], indent=1))
        print(f"wrote {path}")
        return result_floor

    cases = {
        "numpy_baseline": lambda data=data: numpy_baseline(data),
        "numpy_chunked": lambda data=data: numpy_chunked(data),
        "numpy_fused": lambda data=data: numpy_fused(data),
        "evaluate": lambda logs=logs: run_evaluate(logs),
        "estimate_many": lambda data=data: run_estimate_many(data),
        "moment_stats": lambda data=data: run_moment_stats(data),
        "estimate_many_dr": lambda data=data: run_dr(data),
    }
    times = interleaved(cases, rounds=args.rounds)
    pairs = {
        "numpy_fused_vs_numpy": "numpy_fused",
        "evaluate_vs_numpy": "evaluate",
        "estimate_many_vs_numpy": "estimate_many",
        "moment_stats_vs_numpy": "moment_stats",
        "dr_estimate_many_vs_numpy": "estimate_many_dr",
    }
    ratios = {k: ratio(times.wall[c], times.wall["numpy_baseline"]) for k, c in pairs.items()}
    cpu_ratios = {k: ratio(times.cpu[c], times.cpu["numpy_baseline"]) for k, c in pairs.items()}
    chunked_ratios = {
        k: ratio(times.wall[c], times.wall["numpy_chunked"]) for k, c in pairs.items()
    }
    chunked_cpu_ratios = {
        k: ratio(times.cpu[c], times.cpu["numpy_chunked"]) for k, c in pairs.items()
    }
    result: dict[str, Any] = {
        "quick": args.quick,
        "rows": n,
        "policies": N_POLICIES,
        "actions": N_ACTIONS,
        "estimators": list(ESTIMATORS_EVAL),
        "max_weight": MAX_WEIGHT,
        "baseline": "(Pe / p[:, None]).T @ r with Pe the (n, P) float64 matrix",
        "setup_seconds": {"generate": generate_s, "read_logs_in_memory": read_logs_s},
        "timings": {k: summarize(v) for k, v in times.wall.items()},
        "cpu_timings": {k: summarize(v) for k, v in times.cpu.items()},
        "all_times_s": {"wall": times.wall, "cpu": times.cpu},
        "ratios": {k: v["ratio"] for k, v in ratios.items()},
        "ratio_details": ratios,
        "cpu_ratios": {k: v["ratio"] for k, v in cpu_ratios.items()},
        "cpu_ratio_details": cpu_ratios,
        "chunked_baseline": "numpy_chunked: the same pass in blocks of 2**18 rows",
        "ratios_vs_chunked": {k: v["ratio"] for k, v in chunked_ratios.items()},
        "ratio_details_vs_chunked": chunked_ratios,
        "cpu_ratios_vs_chunked": {k: v["ratio"] for k, v in chunked_cpu_ratios.items()},
        "targets": {"evaluate_vs_numpy": TARGET_EVALUATE, "dr_estimate_many_vs_numpy": TARGET_DR},
        "checks": checks,
    }
    result["targets_met"] = {k: result["ratios"][k] <= v for k, v in result["targets"].items()}
    result["profile"] = profile_evaluate(data, logs, rounds=3)
    result["floor"] = bench_floor(data, logs, rounds=args.rounds)
    del logs, data, cases
    if args.skip_scaling:
        result["scaling"] = {"skipped": "--skip-scaling"}
    else:
        sizes_n = args.scaling_sizes or (
            [50_000, 100_000, 200_000]
            if args.quick
            else [1_000_000, 2_000_000, 4_000_000, 8_000_000, 16_000_000]
        )
        result["scaling"] = bench_scaling(sizes_n, rounds=MIN_ROUNDS if args.quick else 3)
    result["jit"] = (
        {"skipped": "--skip-jit"}
        if args.skip_jit
        else bench_jit(10_000 if args.quick else 1_000_000)
    )

    result["bootstrap"] = bench_bootstrap(
        sizes["bootstrap_rows"], sizes["bootstrap_resamples"], rounds=args.bootstrap_rounds
    )
    if args.skip_obp:
        result["obp"] = {"skipped": "--skip-obp"}
    else:
        try:
            result["obp"] = bench_obp(
                args.obp_python,
                sizes["obp_rows"],
                rounds=args.rounds,
                n_resamples=sizes["obp_bootstrap_resamples"],
            )
        except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
            result["obp"] = {"skipped": f"obp run failed: {exc}"}
    if args.skip_memory:
        result["memory"] = {"skipped": "--skip-memory"}
    else:
        result["memory"] = bench_memory(n)
    result["total_seconds"] = time.perf_counter() - started
    path = write_result(NAME, result, out=args.out)
    print(report(result))
    print(f"wrote {path}")
    return result


def report(res: dict[str, Any]) -> str:
    """The printed summary of one run."""
    lines = [
        f"ope.evaluate benchmark: n = {res['rows']:,} rows, P = {res['policies']} policies, "
        f"{', '.join(res['estimators'])} (clip {res['max_weight']:g}), normal intervals",
        f"baseline: {res['baseline']}; 'vs chunked': wall ratio against {res['chunked_baseline']}",
        "numpy_fused: IPS + SNIPS + clipped IPS values and standard errors in one chunked numpy "
        "pass (a reference)",
        "",
    ]
    det = res["ratio_details"]
    rows = []
    for case, s in res["timings"].items():
        key = {
            "numpy_fused": "numpy_fused_vs_numpy",
            "evaluate": "evaluate_vs_numpy",
            "estimate_many": "estimate_many_vs_numpy",
            "moment_stats": "moment_stats_vs_numpy",
            "estimate_many_dr": "dr_estimate_many_vs_numpy",
        }.get(case)
        cpu = res["cpu_timings"][case]
        if key is None:
            rows.append([case, s["median_s"], s["spread"], "", "", cpu["median_s"], "", "", ""])
        else:
            d = det[key]
            target = res["targets"].get(key)
            verdict = (
                ""
                if target is None
                else (f"<= {target:g}: {'yes' if d['ratio'] <= target else 'NO'}")
            )
            rows.append(
                [
                    case,
                    s["median_s"],
                    s["spread"],
                    d["ratio"],
                    f"{d['paired_min']:.2f}-{d['paired_max']:.2f}",
                    cpu["median_s"],
                    res["cpu_ratios"][key],
                    res["ratios_vs_chunked"][key],
                    verdict,
                ]
            )
    lines.append(
        format_table(
            [
                "case",
                "wall s",
                "spread",
                "ratio",
                "paired range",
                "cpu s",
                "cpu ratio",
                "vs chunked",
                "target (wall)",
            ],
            rows,
        )
    )
    chk = res["checks"]
    worst = max(chk["max_relative_difference"].values())
    lines += [
        "",
        f"agreement with numpy: {'ok' if chk['agree'] else 'FAILED'} (worst relative difference "
        f"{worst:.1e}); (ips - truth) / se per policy: {chk['z_vs_truth']['ips']}",
        "",
        "pieces of evaluate and estimate_many (median s):",
    ]
    for stage, sec in res["profile"]["stage_median_s"].items():
        lines.append(f"  {stage:<62}{sec:8.3f}")
    lines.append("top functions by own time (one evaluate call under cProfile):")
    for row in res["profile"]["cprofile_top"][:8]:
        lines.append(f"  {row['function']:<62}{row['tottime_s']:8.3f}  x{row['calls']}")
    f = res["floor"]
    lines += [
        "",
        f"against the memory floor ({f['floor']}; {f['floor_bytes'] / 1e9:.2f} GB, "
        f"{f['floor_gb_per_s']:.1f} GB/s), kernel backend {f['kernel_backend']}:",
    ]
    frows = []
    for key, d in f["ratio_details"].items():
        target = f["targets"].get(key)
        frows.append(
            [
                key,
                d["ratio"],
                f"{d['paired_min']:.2f}-{d['paired_max']:.2f}",
                ""
                if target is None
                else f"<= {target:g}: {'yes' if d['ratio'] <= target else 'NO'}",
            ]
        )
    lines.append(format_table(["ratio", "median", "paired range", "target"], frows))
    lines.append(
        "  seconds: " + ", ".join(f"{k} {v['median_s']:.4f}" for k, v in f["timings"].items())
    )
    sc = res.get("scaling", {})
    if "skipped" not in sc and sc:
        lines.append(
            "linear in n (evaluate, P = 8): "
            + ", ".join(
                f"{int(k):,}: {v:.1f} ns/row ({sc['evaluate_vs_floor'][k]:.2f}x floor)"
                for k, v in sc["evaluate_ns_per_row"].items()
            )
        )
    jit = res.get("jit", {})
    if "skipped" not in jit and jit:
        for key in ("cold_compile", "warm_cache", "numpy_fallback"):
            j = jit.get(key, {})
            if "first_call_s" in j:
                lines.append(
                    f"  first call, {key}: {j['first_call_s']:.2f} s (second call "
                    f"{j['second_call_s'] * 1e3:.1f} ms, import {j['import_s']:.2f} s, "
                    f"{jit['rows']:,} rows, backend {j['backend']})"
                )
    b = res["bootstrap"]
    lines += ["", f"bootstrap: n = {b['rows']:,}, B = {b['n_resamples']}"]
    for key in ("ips", "snips"):
        lines.append(
            f"  {key:<6} {b[key]['median_s']:.2f} s (spread {b[key]['spread']:.2f}; cpu "
            f"{b[key]['cpu_median_s']:.2f} s), "
            f"{b[key]['seconds_per_resample_million_rows'] * 1e3:.2f} ms per resample per M rows"
        )
    o = res["obp"]
    lines.append("")
    if "skipped" in o:
        lines.append(f"obp: skipped ({o['skipped']})")
    else:
        lines.append(
            f"obp {o['obp']['obp']} vs ope on n = {o['rows']:,}, K = {o['n_actions']} "
            "(obp time / ope time; values)"
        )
        for key, e in o["estimators"].items():
            lines.append(
                f"  {key:<6} obp {e['obp']['median_s']:.3f} s, ope {e['ope']['median_s']:.3f} s, "
                f"ratio {e['obp_vs_ope_ratio']:.2f} (cpu {e['obp_vs_ope_cpu_ratio']:.2f}); "
                f"values {e['obp_value']:.6f} vs "
                f"{e['ope_value']:.6f} (|diff| {e['abs_difference']:.1e})"
            )
        bb = o["bootstrap"]
        for key in ("ips", "snips"):
            lines.append(
                f"  bootstrap {key} B={bb['n_resamples']}: obp {bb[key]['obp_seconds']:.2f} s, "
                f"ope {bb[key]['ope_seconds']:.2f} s; intervals obp "
                f"[{bb[key]['obp_interval'][0]:.5f}, {bb[key]['obp_interval'][1]:.5f}], ope "
                f"[{bb[key]['ope_interval'][0]:.5f}, {bb[key]['ope_interval'][1]:.5f}]"
            )
    m = res["memory"]
    if "skipped" not in m:
        lines += [
            "",
            f"extra peak RSS over the in-memory data (fresh interpreters; Pe is "
            f"{m['target_matrix_mb']:.0f} MB): numpy "
            f"{m['numpy_baseline']['extra_peak_mb']:.0f} MB, "
            f"evaluate {m['evaluate']['extra_peak_mb']:.0f} MB, estimate_many "
            f"{m['estimate_many']['extra_peak_mb']:.0f} MB",
        ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
