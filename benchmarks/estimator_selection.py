"""Regret of ``estimators="auto"`` (off-policy cross-validation) against fixed estimators and
the oracle's choice, on four designs with exact truth.

Usage::

    python benchmarks/estimator_selection.py                     # 300 replications per design
    python benchmarks/estimator_selection.py --replications 100  # fewer
    python benchmarks/estimator_selection.py --quick             # a smoke run

Designs (``ope.simulate.ContextualBandit(n_actions=5, n_contexts=50, seed=0)`` with):

* ``good overlap``: ``logging_temperature=3.0, logging_epsilon=0.2``;
* ``heavy tails``: ``logging_temperature=0.3, logging_epsilon=0.01`` (weights up to ~500);
* ``misspecified model``: the good-overlap logger, and the DR family's reward model sees one
  irrelevant context column (``context_columns=["x4"]`` with ``n_noise_features=1``);
* ``support gap``: ``unsupported_actions=1`` (the logger never plays the best action in one
  segment).

Each replication draws ``n`` rows (``distributions=True``, so DR applies), runs
``ope.evaluate(logs, estimators="auto", rng=rep)`` and records, per candidate policy, the
absolute error of the chosen estimator and of every fixed one (IPS, SNIPS, DR, SNDR; with
``--tuned-clip`` auto runs with ``max_weight="slope"`` and clipped IPS at its tuned level is
one more) against
``env.true_value``. It prints per design the mean absolute error and RMSE over replications and
candidates of: the automatic choice, each fixed estimator, the best fixed estimator in
hindsight (the oracle's fixed choice, by RMSE over the replications) and the per-replication
oracle (the smallest error in each replication); and the regret of the automatic choice
(its RMSE minus the best fixed estimator's). Writes ``benchmarks/results/estimator_selection.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import format_table, write_result  # noqa: E402

#: The estimators auto compares, each also as a fixed choice (with ``--tuned-clip`` also
#: clipped IPS at the clip level tuned per candidate by SLOPE++: ``Evaluation.settings``).
FIXED = ("ips", "snips", "dr", "sndr")

DESIGNS: dict[str, dict[str, Any]] = {
    "good overlap": dict(env=dict(logging_temperature=3.0, logging_epsilon=0.2), options={}),
    "heavy tails": dict(env=dict(logging_temperature=0.3, logging_epsilon=0.01), options={}),
    "misspecified model": dict(
        env=dict(logging_temperature=3.0, logging_epsilon=0.2, n_noise_features=1),
        options=dict(context_columns=["x5"]),
    ),
    "support gap": dict(env=dict(unsupported_actions=1), options={}),
}


def run_design(name: str, n: int, reps: int, tuned_clip: bool = False) -> dict[str, Any]:
    import ope
    from ope.simulate import ContextualBandit

    spec = DESIGNS[name]
    env = ContextualBandit(n_actions=5, n_contexts=50, seed=0, **spec["env"])
    policies = list(env.candidate_policies)
    truth = np.array([env.true_value(p) for p in policies])
    fixed = (*FIXED[:2], "clipped_ips", *FIXED[2:]) if tuned_clip else FIXED
    labels = ("auto", *fixed)
    options = {**spec["options"], **({"max_weight": "slope"} if tuned_clip else {})}
    errors = np.empty((reps, len(policies), len(labels)))
    chosen_counts: dict[str, int] = {}
    for rep in range(reps):  # a loop over replications
        table = env.sample(n, rng=rep, distributions=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ev = ope.evaluate(table, estimators="auto", rng=rep, **options)
        for i, p in enumerate(policies):  # a loop over the five candidates
            pick = ev.selection.estimator_for(p)
            chosen_counts[pick] = chosen_counts.get(pick, 0) + 1
            values = [ev.estimates[(p, pick)].value, *(ev.estimates[(p, e)].value for e in fixed)]
            errors[rep, i] = np.abs(np.array(values) - truth[i])
    flat = errors.reshape(-1, len(labels))
    rmse = np.sqrt((flat**2).mean(axis=0))
    mae = flat.mean(axis=0)
    per_rep_oracle = flat[:, 1:].min(axis=1)
    best_fixed = int(np.argmin(rmse[1:])) + 1
    return {
        "design": name,
        "n": n,
        "replications": reps,
        "rmse": dict(zip(labels, rmse.tolist())),
        "mae": dict(zip(labels, mae.tolist())),
        "best_fixed": labels[best_fixed],
        "per_rep_oracle_rmse": float(np.sqrt((per_rep_oracle**2).mean())),
        "per_rep_oracle_mae": float(per_rep_oracle.mean()),
        "regret_rmse": float(rmse[0] - rmse[best_fixed]),
        "chosen": chosen_counts,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 replications at n = 1,000")
    parser.add_argument("--replications", type=int, default=300)
    parser.add_argument("--n", type=int, default=2_000)
    parser.add_argument("--designs", nargs="+", default=list(DESIGNS), choices=list(DESIGNS))
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--tuned-clip",
        action="store_true",
        help="auto also compares clipped IPS at its SLOPE-tuned level (max_weight='slope')",
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    n, reps = (1_000, 3) if args.quick else (args.n, args.replications)
    rows = [run_design(d, n, reps, args.tuned_clip) for d in args.designs]
    result = {"n": n, "replications": reps, "rows": rows}
    result["seconds"] = time.perf_counter() - started
    result["tuned_clip"] = args.tuned_clip
    fixed = [k for k in rows[0]["rmse"] if k != "auto"]
    headers = [
        "design",
        "auto",
        *fixed,
        "best fixed",
        "per-rep oracle",
        "regret (auto - best fixed)",
        "auto chose",
    ]
    table = [
        [
            r["design"],
            f"{r['rmse']['auto']:.4f}",
            *(f"{r['rmse'][e]:.4f}" for e in fixed),
            r["best_fixed"],
            f"{r['per_rep_oracle_rmse']:.4f}",
            f"{r['regret_rmse']:+.4f}",
            ", ".join(f"{k} {v}" for k, v in sorted(r["chosen"].items())),
        ]
        for r in rows
    ]
    print(f"RMSE over {reps} replications x 5 candidates, n = {n:,}")
    print(format_table(headers, table))
    suffix = "_quick" if args.quick else ""
    path = write_result("estimator_selection" + suffix, result, out=args.out)
    print(f"wrote {path} ({result['seconds']:.0f} s)")
    return result


if __name__ == "__main__":
    main()
