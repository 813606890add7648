"""Simulation study of the marginalized estimators (MIPS, SNMIPS, marginalized DR, OffCEM) against exact truth.

Usage::

    python benchmarks/coverage_marginal.py                 # full study (300 replications)
    python benchmarks/coverage_marginal.py --quick         # a few replications, small sizes
    python benchmarks/coverage_marginal.py --replications 500 --workers 2

Every replication draws fresh logs from :class:`ope.simulate.CatalogBandit` (a catalog whose
items share categorical embeddings; clusters are the joint embeddings) and runs
``ope.evaluate`` on them: the numbers are the library's own code path. The truth of each
candidate (``greedy``, ``cluster_shift``, ``uniform``) is the simulator's exact finite sum
``true_value(name)``. For each (setting, n, policy, estimator) it reports the bias (with its
Monte Carlo standard error), the standard deviation and the RMSE of the estimates, the
coverage of the 95% normal interval (with its Monte Carlo standard error), the mean width of
the interval and the mean ESS share (``ess_ratio``: Kish effective sample size of the weights
over ``n``; the marginal weights for the marginalized estimators).

Settings (``n_items=2000``, 50 candidates per request from 10 of the 100 clusters, 500
request types):

``assumption holds``
    ``direct_effect=0``: the reward depends on the item only through its cluster, MIPS is
    unbiased.
``assumption broken``
    ``direct_effect=1``: an item-level effect that the cluster does not see; MIPS is biased.
``stochastic embeddings``
    ``direct_effect=0``, each logged row's categories ``e0, e1`` drawn from a known
    ``p(e | a)`` (``embedding_noise=0.2``); the embedding is
    ``ActionEmbedding(distribution=env.embedding_distribution())`` over the logs' observed
    ``e0, e1`` columns.

Estimators: ``ips, snips, dr, mips, snmips, mdr, offcem`` with ope's defaults (the reward model of
``dr`` is the default cross-fitted Ridge on the context, the item table's numeric columns,
their products and one intercept per item; ``mdr`` fits the same defaults on the embedding in
place of the item, ``q(x, e)``, when each item has one embedding, and the items' model under a
stochastic ``p(e|a)``; ``offcem`` fits OffCEM's two-step model of the items,
:class:`ope.reward_models.TwoStepRewardModel`, where each item has one cluster, and the items'
model under a stochastic ``p(e|a)``; the observed embedding columns are never context), and
``mdr (cluster model)``: ``mdr`` with ``RewardModel(action_intercepts=False)`` and the context
columns ``x0 ..`` named. The
rejection rate of ``Evaluation.embedding_checks`` (``p < 0.05``) is the size of that test in
the settings where the embedding is sufficient and its power where it is not.

A last table varies the catalog (``n_items`` 100, 1,000, 10,000; 9 clusters, 50 candidates per
request, 10 from each of 5 clusters, so that the smallest catalog can fill its candidate lists)
at a fixed n with fewer replications, and gives the RMSE of IPS, MIPS, DR and MDR. The
candidate lists keep their length: a larger catalog changes the items (their logging
probabilities, item effects and how often each item is seen by the reward model), not the
number of candidates a weight is spread over.

Each replication is one task of a process pool (``--workers``, default every available CPU)
with its own seed ``(seed, setting, n, replication)``; every worker runs ope's kernel on one
thread. Results go to ``benchmarks/results/coverage_marginal.json``; the markdown tables are
printed.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import math
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import write_result  # noqa: E402

CONFIDENCE_LEVEL: Final = 0.95
ESTIMATORS: Final = ("ips", "snips", "dr", "mips", "snmips", "mdr", "offcem")
#: label of marginalized DR with a reward model that sees the item only through its cluster
MDR_CLUSTER: Final = "mdr (cluster model)"
ROW_ESTIMATORS: Final = (*ESTIMATORS, MDR_CLUSTER)
CATALOG_ESTIMATORS: Final = ("ips", "mips", "dr", "mdr", "offcem", MDR_CLUSTER)
POLICIES: Final = ("greedy", "cluster_shift", "uniform")
SETTINGS: Final = ("assumption holds", "assumption broken", "stochastic embeddings")
FULL_SIZES: Final = (1_000, 5_000)
FULL_REPS: Final = 300
FULL_CATALOG: Final = (100, 1_000, 10_000)
FULL_CATALOG_N: Final = 5_000
FULL_CATALOG_REPS: Final = 100
QUICK_SIZES: Final = (500, 2_000)
QUICK_REPS: Final = 3
QUICK_CATALOG: Final = (100, 1_000)
QUICK_CATALOG_N: Final = 2_000
QUICK_CATALOG_REPS: Final = 2
#: p-value below which an embedding check rejects sufficiency
CHECK_LEVEL: Final = 0.05
#: the main settings' simulator (besides direct_effect and stochastic_embeddings)
BASE_ENV: Final = {"n_items": 2000, "n_candidates": 50, "n_requests": 500, "seed": 0}
#: the catalog table's simulator: 9 clusters (3 x 3 categories), so that the smallest catalog
#: (100 items) can fill each request's 50 candidates with 10 items of each of 5 clusters
CATALOG_ENV: Final = {
    "n_candidates": 50,
    "n_requests": 500,
    "n_categories": 3,
    "n_candidate_clusters": 5,
    "seed": 0,
}
QUICK_ENV: Final = {"n_items": 400, "n_candidates": 20, "n_requests": 100, "seed": 0}
#: single-threaded numerics in each worker: the pool uses the cores
THREAD_VARIABLES: Final = (
    "OPE_KERNEL_THREADS",
    "NUMBA_NUM_THREADS",
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
)


@dataclass(frozen=True)
class Task:
    """One replication: draw logs from the simulator ``env`` and evaluate."""

    table: str  # "settings" or "catalog"
    setting: str  # a SETTINGS name, or "n_items=<N>" for the catalog table
    env: tuple[tuple[str, Any], ...]  # CatalogBandit keyword arguments
    n: int
    rep: int
    seed: tuple[int, ...]
    estimators: tuple[str, ...] = field(default=ESTIMATORS)


def setting_env(setting: str, quick: bool) -> dict[str, Any]:
    """CatalogBandit keyword arguments of a main setting."""
    env = dict(QUICK_ENV if quick else BASE_ENV)
    if setting == "assumption holds":
        env["direct_effect"] = 0.0
    elif setting == "assumption broken":
        env["direct_effect"] = 1.0
    elif setting == "stochastic embeddings":
        env.update(direct_effect=0.0, stochastic_embeddings=True)
    else:
        raise ValueError(f"unknown setting {setting!r}; expected one of {SETTINGS}")
    return env


def catalog_env(n_items: int, quick: bool) -> dict[str, Any]:
    """CatalogBandit keyword arguments of a row of the catalog-size table."""
    env = dict(CATALOG_ENV, n_items=n_items)
    if quick:
        env.update(n_candidates=25, n_requests=100)
    return env


_ENVS: dict[tuple[tuple[str, Any], ...], Any] = {}


def _environment(key: tuple[tuple[str, Any], ...]) -> Any:
    """The simulator of ``key`` (built once per process)."""
    if key not in _ENVS:
        from ope.simulate import CatalogBandit

        _ENVS[key] = CatalogBandit(**dict(key))
    return _ENVS[key]


def _cluster_features(env: Any) -> Any:
    """Item table with the cluster one-hot as the only numeric item features."""
    import pyarrow as pa

    clusters = env.item_clusters
    cols = {"action": pa.array(np.arange(env.n_items, dtype=np.int64))}
    for c in np.unique(clusters):
        cols[f"cluster_{c}"] = pa.array((clusters == c).astype(np.float64))
    return pa.table(cols)


def run_task(task: Task) -> dict[str, Any]:
    """Evaluate one replication; returns estimates, intervals, ESS shares and check p-values."""
    import ope
    from ope.exceptions import OPEWarning
    from ope.reward_models import RewardModel

    env = _environment(task.env)
    rng = np.random.default_rng(list(task.seed))
    sample_seed, eval_seed = (int(s) for s in rng.integers(0, 2**31 - 1, size=2))
    items = env.action_features()
    if env.stochastic_embeddings:
        # the logs' own e0 .. columns are the observed embeddings; the item table keeps its
        # cluster only, so that the names do not collide
        items = items.select(["action", "cluster"])
        embedding = ope.ActionEmbedding(distribution=env.embedding_distribution())
    else:
        embedding = ope.ActionEmbedding(clusters="cluster")
    logs = ope.read_logs(env.sample(task.n, rng=sample_seed)).with_action_features(items)
    context = [f"x{k}" for k in range(env.n_features)]
    out: dict[str, Any] = {"estimates": {}, "checks": {}, "error": None}
    try:
        with warnings.catch_warnings():
            # small samples with heavy per-item weights warn about overlap: expected here
            warnings.simplefilter("ignore", OPEWarning)
            ev = ope.evaluate(
                logs,
                estimators=task.estimators,
                embedding=embedding,
                rng=eval_seed,
                confidence_level=CONFIDENCE_LEVEL,
            )
            cluster_ev = ope.evaluate(
                logs,
                estimators=("mdr",),
                embedding=embedding,
                rng=eval_seed,
                confidence_level=CONFIDENCE_LEVEL,
                reward_model=RewardModel(action_intercepts=False, rng=eval_seed),
                action_features=_cluster_features(env),
                context_columns=context,
            )
    except Exception as exc:  # noqa: BLE001 - a failed replication is counted, not hidden
        out["error"] = f"{type(exc).__name__}: {exc}"
        return out
    for evaluation, rename in ((ev, {}), (cluster_ev, {"mdr": MDR_CLUSTER})):
        table = evaluation.table()
        for row in table.itertuples(index=False):
            label = rename.get(row.estimator, row.estimator)
            out["estimates"][f"{row.policy}|{label}"] = (
                float(row.value),
                float(row.ci_low),
                float(row.ci_high),
                float(row.ess_ratio),
            )
    for check in ev.embedding_checks:
        out["checks"][check.policy] = float(check.p_value)
    return out


def _init_worker() -> None:
    for name in THREAD_VARIABLES:
        os.environ[name] = "1"


def _map(tasks: Sequence[Task], workers: int) -> Iterable[dict[str, Any]]:
    if workers <= 1:
        return map(run_task, tasks)
    saved = {name: os.environ.get(name) for name in THREAD_VARIABLES}
    _init_worker()  # spawned workers inherit the environment before they import numpy
    try:
        import multiprocessing as mp

        pool = ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"))
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    with pool:
        return list(pool.map(run_task, tasks, chunksize=4))


def summarize(
    values: Sequence[tuple[float, float, float, float]], truth: float
) -> dict[str, float]:
    """Bias, SD, RMSE, coverage, width and ESS share of one cell's replications."""
    arr = np.asarray(values, dtype=float)
    est, low, high, ess = arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3]
    reps = est.size
    err = est - truth
    cover = float(np.mean((low <= truth) & (truth <= high)))
    sd = float(est.std(ddof=1)) if reps > 1 else math.nan
    return {
        "replications": reps,
        "truth": truth,
        "mean": float(est.mean()),
        "bias": float(err.mean()),
        "bias_mc_se": sd / math.sqrt(reps) if reps > 1 else math.nan,
        "sd": sd,
        "rmse": float(np.sqrt(np.mean(err * err))),
        "coverage": cover,
        "coverage_mc_se": math.sqrt(cover * (1.0 - cover) / reps),
        "mean_width": float(np.mean(high - low)),
        "ess_share": float(np.mean(ess)),
    }


def build_tasks(
    *,
    quick: bool,
    reps: int,
    sizes: Sequence[int],
    catalog: Sequence[int],
    catalog_n: int,
    catalog_reps: int,
    seed: int,
) -> list[Task]:
    tasks = []
    for k, setting in enumerate(SETTINGS):
        key = tuple(sorted(setting_env(setting, quick).items()))
        for n in sizes:
            for rep in range(reps):
                tasks.append(Task("settings", setting, key, n, rep, (seed, k, n, rep)))
    for n_items in catalog:
        key = tuple(sorted(catalog_env(n_items, quick).items()))
        for rep in range(catalog_reps):
            tasks.append(
                Task(
                    "catalog",
                    f"n_items={n_items}",
                    key,
                    catalog_n,
                    rep,
                    (seed, 100 + n_items, catalog_n, rep),
                    estimators=("ips", "mips", "dr", "mdr", "offcem"),
                )
            )
    # the largest samples first, so that the pool does not end on one long task
    return sorted(tasks, key=lambda t: -t.n)


def run(
    *,
    quick: bool = False,
    reps: int | None = None,
    sizes: Sequence[int] | None = None,
    catalog_reps: int | None = None,
    seed: int = 2026,
    workers: int | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run the study; returns the JSON document (cells, checks, catalog table, settings)."""
    reps = reps if reps is not None else (QUICK_REPS if quick else FULL_REPS)
    sizes = tuple(sizes) if sizes else (QUICK_SIZES if quick else FULL_SIZES)
    catalog = QUICK_CATALOG if quick else FULL_CATALOG
    catalog_n = QUICK_CATALOG_N if quick else FULL_CATALOG_N
    if catalog_reps is None:
        catalog_reps = QUICK_CATALOG_REPS if quick else FULL_CATALOG_REPS
    if workers is None:
        workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    tasks = build_tasks(
        quick=quick,
        reps=reps,
        sizes=sizes,
        catalog=catalog,
        catalog_n=catalog_n,
        catalog_reps=catalog_reps,
        seed=seed,
    )
    log(f"{len(tasks)} replications on {workers} worker(s)")
    t0 = time.perf_counter()
    outputs = list(_map(tasks, workers))
    wall = time.perf_counter() - t0
    log(f"done in {wall:.0f} s")

    truths: dict[tuple[tuple[str, Any], ...], dict[str, float]] = {}
    for task in tasks:
        if task.env not in truths:
            env = _environment(task.env)
            truths[task.env] = {p: float(env.true_value(p)) for p in POLICIES}
    groups: dict[tuple[str, str, int, str, str], list[Any]] = {}
    pvalues: dict[tuple[str, int, str], list[float]] = {}
    errors: list[dict[str, Any]] = []
    for task, out in zip(tasks, outputs):
        if out["error"] is not None:
            errors.append({"setting": task.setting, "n": task.n, "rep": task.rep, **out})
            continue
        for key, value in out["estimates"].items():
            policy, estimator = key.split("|")
            groups.setdefault((task.table, task.setting, task.n, policy, estimator), []).append(
                value
            )
        if task.table == "settings":
            for policy, p in out["checks"].items():
                pvalues.setdefault((task.setting, task.n, policy), []).append(p)
    env_of = {(t.table, t.setting): t.env for t in tasks}
    cells = []
    for (table, setting, n, policy, estimator), values in groups.items():
        truth = truths[env_of[(table, setting)]][policy]
        cells.append(
            {
                "table": table,
                "setting": setting,
                "n": n,
                "policy": policy,
                "estimator": estimator,
                **summarize(values, truth),
            }
        )
    checks = []
    for (setting, n, policy), ps in pvalues.items():
        rate = float(np.mean(np.asarray(ps) < CHECK_LEVEL))
        checks.append(
            {
                "setting": setting,
                "n": n,
                "policy": policy,
                "replications": len(ps),
                "rejection_rate": rate,
                "mc_se": math.sqrt(rate * (1.0 - rate) / len(ps)),
            }
        )
    return {
        "quick": quick,
        "replications": reps,
        "sizes": list(sizes),
        "catalog_sizes": list(catalog),
        "catalog_n": catalog_n,
        "catalog_replications": catalog_reps,
        "seed": seed,
        "workers": workers,
        "wall_seconds": wall,
        "settings": {s: setting_env(s, quick) for s in SETTINGS},
        "catalog_env": {str(m): catalog_env(m, quick) for m in catalog},
        "truth": {
            (t.setting if t.table == "settings" else t.setting): truths[t.env] for t in tasks
        },
        "cells": cells,
        "checks": checks,
        "errors": errors,
    }


def _fmt_pm(value: float, se: float, digits: int = 4) -> str:
    return f"{value:+.{digits}f} ± {se:.{digits}f}"


def markdown(doc: dict[str, Any]) -> str:
    """The result tables in markdown."""
    cells = [c for c in doc["cells"] if c["table"] == "settings"]
    lines: list[str] = []
    for setting in SETTINGS:
        mine = [c for c in cells if c["setting"] == setting]
        if not mine:
            continue
        truth = doc["truth"][setting]
        lines.append(
            f"**{setting}** ({doc['replications']} replications; truth "
            + ", ".join(f"{p} {truth[p]:.4f}" for p in POLICIES)
            + ")\n"
        )
        lines.append(
            "| n | policy | estimator | bias ± MC se | SD | RMSE | coverage ± MC se "
            + "| mean width | ESS share |"
        )
        lines.append("|---|---|---|---|---|---|---|---|---|")
        for n in doc["sizes"]:
            for policy in POLICIES:
                for estimator in ROW_ESTIMATORS:
                    found = [
                        c
                        for c in mine
                        if c["n"] == n and c["policy"] == policy and c["estimator"] == estimator
                    ]
                    if not found:
                        continue
                    c = found[0]
                    lines.append(
                        f"| {n:,} | {policy} | {estimator} | {_fmt_pm(c['bias'], c['bias_mc_se'])} "
                        + f"| {c['sd']:.4f} | {c['rmse']:.4f} "
                        + f"| {c['coverage']:.3f} ± {c['coverage_mc_se']:.3f} "
                        + f"| {c['mean_width']:.4f} | {c['ess_share']:.3f} |"
                    )
        lines.append("")
    if doc["checks"]:
        lines.append(
            f"**Embedding check** (`Evaluation.embedding_checks`): share of replications with "
            f"p < {CHECK_LEVEL} (± MC se); its size where the embedding is sufficient "
            + "(assumption holds, stochastic embeddings), its power where it is not\n"
        )
        lines.append("| setting | n | " + " | ".join(POLICIES) + " |")
        lines.append("|---|---|" + "---|" * len(POLICIES))
        for setting in SETTINGS:
            for n in doc["sizes"]:
                row = []
                for policy in POLICIES:
                    found = [
                        c
                        for c in doc["checks"]
                        if c["setting"] == setting and c["n"] == n and c["policy"] == policy
                    ]
                    row.append(
                        f"{found[0]['rejection_rate']:.3f} ± {found[0]['mc_se']:.3f}"
                        if found
                        else "-"
                    )
                lines.append(f"| {setting} | {n:,} | " + " | ".join(row) + " |")
        lines.append("")
    catalog = [c for c in doc["cells"] if c["table"] == "catalog"]
    if catalog:
        lines.append(
            f"**RMSE against catalog size** (n = {doc['catalog_n']:,}, "
            f"{doc['catalog_replications']} replications, direct_effect = 0, 9 clusters, "
            + "50 candidates per request from 5 clusters; bias in parentheses)\n"
        )
        lines.append("| n_items | policy | " + " | ".join(CATALOG_ESTIMATORS) + " |")
        lines.append("|---|---|" + "---|" * len(CATALOG_ESTIMATORS))
        for n_items in doc["catalog_sizes"]:
            for policy in POLICIES:
                row = []
                for estimator in CATALOG_ESTIMATORS:
                    found = [
                        c
                        for c in catalog
                        if c["setting"] == f"n_items={n_items}"
                        and c["policy"] == policy
                        and c["estimator"] == estimator
                    ]
                    row.append(
                        f"{found[0]['rmse']:.4f} ({found[0]['bias']:+.4f})" if found else "-"
                    )
                lines.append(f"| {n_items:,} | {policy} | " + " | ".join(row) + " |")
        lines.append("")
    if doc["errors"]:
        lines.append(f"{len(doc['errors'])} replications failed: {doc['errors'][:3]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few replications, small sizes")
    parser.add_argument("--replications", type=int, default=None, help="per setting and n")
    parser.add_argument(
        "--catalog-replications", type=int, default=None, help="per row of the catalog table"
    )
    parser.add_argument("--sizes", type=str, default=None, help="comma-separated sample sizes")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--workers", type=int, default=None, help="processes (default: CPUs)")
    parser.add_argument("--out", type=Path, default=None, help="JSON output path")
    args = parser.parse_args(argv)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    t0 = time.perf_counter()
    doc = run(
        quick=args.quick,
        reps=args.replications,
        sizes=tuple(int(x) for x in args.sizes.split(",")) if args.sizes else None,
        catalog_reps=args.catalog_replications,
        seed=args.seed,
        workers=args.workers,
        log=log,
    )
    doc["started"] = stamp
    doc["uptime_before"] = uptime
    doc["uptime_after"] = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    doc["total_seconds"] = time.perf_counter() - t0
    doc["command"] = "python benchmarks/coverage_marginal.py " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    path = write_result("coverage_marginal", doc, out=args.out)
    print(
        f"<!-- {doc['command'].strip()} ({stamp}, {doc['total_seconds']:.0f} s, "
        f"{doc['workers']} workers; load before: {uptime}) -->"
    )
    print(markdown(doc))
    log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
