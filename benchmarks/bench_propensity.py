"""Bias and coverage of IPS and SNIPS on logs whose propensities were estimated.

Usage::

    python benchmarks/bench_propensity.py                      # 300 replications, n = 2,000 and 10,000
    python benchmarks/bench_propensity.py --reps 1000 --sizes 2000,20000
    python benchmarks/bench_propensity.py --quick              # 40 replications, n = 2,000
    python benchmarks/bench_propensity.py --out benchmarks/propensity_coverage.md
    # in parallel processes, then one table:
    python benchmarks/bench_propensity.py --designs well-specified --sizes 2000 --json a.json
    ...
    python benchmarks/bench_propensity.py --merge a.json b.json --out benchmarks/propensity_coverage.md

Each replication draws ``n`` logged rows from a :class:`ope.simulate.ContextualBandit` whose
logger is a probability table we choose, drops the logged propensity, re-estimates it with
:func:`ope.propensity.estimate_propensities` under each setting, and computes IPS and SNIPS of
one candidate policy (the simulator's ``softmax`` policy) with the normal interval and, unless
``--no-bootstrap``, the default percentile bootstrap (2,000 resamples). The truth is the
simulator's exact value (a finite sum, :meth:`ContextualBandit.true_value`), not a Monte Carlo
estimate. The row ``true propensities`` uses the logger's own probabilities: the reference.

Designs (4 actions, 3 context features, 200 context types):

``well-specified``
    The logger is ``softmax(x @ B)``, a multinomial logit of the three features: the default
    model family (standardized multinomial logistic regression) contains it.
``misspecified``
    The logger is ``softmax(h(x) @ B)`` with ``h(x) = (x0 * x1, x2**2 - 1, |x0|)``:
    interactions and even functions that no linear logit in ``x`` can represent, so every
    setting estimates the wrong propensities (the assumption "the model family contains the
    logger" fails, while "no unlogged confounder" still holds).

For every (design, n, setting, estimator) the table gives the mean bias with its Monte Carlo
standard error, the mean and the maximum over replications of the largest weight, the number of
floored rows, and the empirical coverage of the nominal 95% normal (and bootstrap) interval with
its binomial standard error.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import shlex
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

# one BLAS/OpenMP thread: the fits are small, and on a shared 2-core machine a thread pool per
# fit oversubscribes the cores (measured 3x slower at n = 2,000); set before numpy is imported,
# and only when run as a script (an importing test process keeps its settings)
if __name__ == "__main__":
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

from ope.estimators import IPS, SNIPS  # noqa: E402
from ope.propensity import CALIBRATIONS, estimate_propensities  # noqa: E402
from ope.simulate import ContextualBandit  # noqa: E402

CONFIDENCE_LEVEL: Final = 0.95
N_ACTIONS: Final = 4
FEATURES: Final = ("x0", "x1", "x2")
TARGET: Final = "softmax"
#: the settings compared besides the true propensities, as keyword arguments of
#: estimate_propensities: the default, the same model cross-fitted, each offered calibration,
#: and the default of earlier releases (isotonic calibration inside 5-fold cross-fitting)
SETTINGS: Final = {
    "default": {},
    "cross-fitted (n_folds=5)": {"n_folds": 5},
    **{f"calibration={c}": {"calibration": c} for c in CALIBRATIONS if c != "none"},
    "earlier default (isotonic, n_folds=5)": {"calibration": "isotonic", "n_folds": 5},
}


def _softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def designs() -> dict[str, tuple[ContextualBandit, np.ndarray]]:
    """The simulator and the logger's probability table of each design."""
    env = ContextualBandit(n_actions=N_ACTIONS, n_features=len(FEATURES), n_contexts=200, seed=0)
    x = env.context_features
    g = np.random.default_rng(5)
    well = _softmax(x @ (0.5 * g.standard_normal((3, N_ACTIONS))))
    h = np.column_stack([x[:, 0] * x[:, 1], x[:, 2] ** 2 - 1.0, np.abs(x[:, 0])])
    mis = _softmax(h @ (0.65 * g.standard_normal((3, N_ACTIONS))))
    return {"well-specified": (env, well), "misspecified": (env, mis)}


@dataclass
class Cell:
    """Per-replication results of one (design, n, setting, estimator)."""

    errors: list[float]
    covered_normal: list[bool]
    covered_boot: list[bool]
    max_weight: list[float]
    floored: list[int]


def _one(
    est: Any, r: np.ndarray, p: np.ndarray, t: np.ndarray, truth: float, boot: bool, seed: int
) -> tuple[float, bool, bool]:
    res = est.estimate(r, p, t)
    lo, hi = res.ci(CONFIDENCE_LEVEL, "normal")
    cb = False
    if boot:
        blo, bhi = res.ci(CONFIDENCE_LEVEL, "bootstrap", rng=seed)
        cb = bool(blo <= truth <= bhi)
    return res.value - truth, bool(lo <= truth <= hi), cb


def run(
    reps: int,
    sizes: list[int],
    boot: bool,
    settings: tuple[str, ...],
    only: tuple[str, ...] | None = None,
) -> list[dict[str, Any]]:
    """One row per (design, n, propensities, estimator); ``only`` restricts the designs."""
    rows: list[dict[str, Any]] = []
    for design, (env, logger) in designs().items():
        if only is not None and design not in only:
            continue
        truth = env.true_value(TARGET)
        true_max_w = float((env.policy_table(TARGET) / logger).max())
        for n in sizes:
            cells: dict[tuple[str, str], Cell] = {}
            start = time.perf_counter()
            for rep in range(reps):  # one replication per iteration (a model fit each)
                seed = 10_000 * n + rep
                t = env.sample(n, rng=seed, logging_policy=logger)
                r = t.column("reward").to_numpy()
                target = t.column(f"target__{TARGET}").to_numpy()
                raw = t.drop_columns(["propensity"])
                variants = {"true propensities": (t.column("propensity").to_numpy(), 0)}
                for name in settings:
                    kw: dict[str, Any] = SETTINGS[name]
                    logs = estimate_propensities(
                        raw, context_columns=list(FEATURES), rng=seed, **kw
                    )
                    info = logs.table.schema.metadata or {}
                    variants[name] = (
                        logs.column("propensity"),
                        int(info.get(b"ope.propensity_floored_rows", b"0")),
                    )
                for name, (p, floored) in variants.items():
                    for est_name, est in (("IPS", IPS()), ("SNIPS", SNIPS())):
                        err, cn, cb = _one(est, r, p, target, truth, boot, seed)
                        c = cells.setdefault((name, est_name), Cell([], [], [], [], []))
                        c.errors.append(err)
                        c.covered_normal.append(cn)
                        c.covered_boot.append(cb)
                        c.max_weight.append(float((target / p).max()))
                        c.floored.append(floored)
            secs = time.perf_counter() - start
            print(f"{design} n={n}: {reps} replications in {secs:.0f} s", file=sys.stderr)
            for (name, est_name), c in cells.items():
                e = np.asarray(c.errors)
                rows.append(
                    {
                        "design": design,
                        "n": n,
                        "propensities": name,
                        "estimator": est_name,
                        "truth": truth,
                        "true_max_weight": true_max_w,
                        "bias": float(e.mean()),
                        "bias_se": float(e.std(ddof=1) / math.sqrt(e.size)),
                        "rmse": float(np.sqrt((e**2).mean())),
                        "cover_normal": float(np.mean(c.covered_normal)),
                        "cover_boot": float(np.mean(c.covered_boot)) if boot else math.nan,
                        "mean_max_weight": float(np.mean(c.max_weight)),
                        "max_weight": float(np.max(c.max_weight)),
                        "floored": float(np.mean(c.floored)),
                        "reps": e.size,
                    }
                )
    return rows


def markdown(rows: list[dict[str, Any]], reps: int, boot: bool, commands: list[str]) -> str:
    se = math.sqrt(CONFIDENCE_LEVEL * (1 - CONFIDENCE_LEVEL) / reps)
    out = [
        "# IPS and SNIPS with estimated propensities: bias and coverage",
        "",
        f"Run on {_dt.date.today().isoformat()}, Python {platform.python_version()}, by:",
        "",
        *(f"- `{c}`" for c in commands),
        "",
        f"{reps} replications per row; nominal coverage {CONFIDENCE_LEVEL:.0%} "
        f"(binomial standard error at the nominal rate: {se:.3f}). Bias is the mean of "
        "estimate - exact truth, +- its Monte Carlo standard error. `max w` is the largest "
        "weight of a replication (mean / max over replications); `floored` the mean number of "
        "rows raised to the floor.",
        "",
    ]
    head = "| design | n | propensities | estimator | bias +- MC se | RMSE | cover normal |"
    sep = "|---|---|---|---|---|---|---|"
    if boot:
        head += " cover bootstrap |"
        sep += "---|"
    head += " max w (mean / max) | floored |"
    sep += "---|---|"
    last = None
    for row in rows:
        key = (row["design"], row["n"])
        if key != last:
            out += [
                "",
                f"**{row['design']}, n = {row['n']:,}**: truth {row['truth']:.4f}, "
                f"largest true weight {row['true_max_weight']:.1f}",
                "",
                head,
                sep,
            ]
            last = key
        line = (
            f"| {row['design']} | {row['n']:,} | {row['propensities']} | {row['estimator']} | "
            f"{row['bias']:+.4f} +- {row['bias_se']:.4f} | {row['rmse']:.4f} | "
            f"{row['cover_normal']:.3f} |"
        )
        if boot:
            line += f" {row['cover_boot']:.3f} |"
        line += f" {row['mean_max_weight']:.1f} / {row['max_weight']:.1f} | {row['floored']:.2f} |"
        out.append(line)
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=300)
    parser.add_argument("--sizes", default="2000,10000", help="comma-separated sample sizes")
    parser.add_argument("--no-bootstrap", action="store_true", help="normal intervals only")
    parser.add_argument(
        "--settings",
        default=";".join(SETTINGS),
        help=f"semicolon-separated, of: {'; '.join(SETTINGS)}",
    )
    parser.add_argument(
        "--designs",
        default=",".join(designs()),
        help="comma-separated, of: " + ", ".join(designs()),
    )
    parser.add_argument("--quick", action="store_true", help="40 replications at n = 2,000")
    parser.add_argument("--out", type=Path, help="also write the markdown table here")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    parser.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        metavar="JSON",
        help="render the rows of earlier --json runs as one table (no new run)",
    )
    args = parser.parse_args(argv)
    command = shlex.join(
        ["python", "benchmarks/bench_propensity.py", *(argv if argv is not None else sys.argv[1:])]
    )
    if args.merge:
        runs = [json.loads(path.read_text()) for path in args.merge]
        rows = [row for r in runs for row in r["rows"]]
        order = list(designs())
        rows.sort(
            key=lambda row: (order.index(row["design"]), row["n"])
        )  # stable: settings keep order
        commands = [r["command"] for r in runs] + [command]
        text = markdown(rows, rows[0]["reps"], runs[0]["bootstrap"], commands)
    else:
        reps, sizes = (
            (40, [2000]) if args.quick else (args.reps, [int(s) for s in args.sizes.split(",")])
        )
        boot = not args.no_bootstrap
        settings = tuple(s for s in args.settings.split(";") if s)
        unknown = [s for s in settings if s not in SETTINGS]
        if unknown:
            parser.error(f"unknown setting(s) {unknown}; choose from: {'; '.join(SETTINGS)}")
        only = tuple(d for d in args.designs.split(",") if d)
        with warnings.catch_warnings():
            warnings.simplefilter(
                "ignore"
            )  # small-sample and weight warnings of single replications
            rows = run(reps, sizes, boot, settings, only=only)
        text = markdown(rows, reps, boot, [command])
        if args.json is not None:
            args.json.write_text(
                json.dumps({"command": command, "bootstrap": boot, "rows": rows}, indent=1)
            )
    print(text)
    if args.out is not None:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
