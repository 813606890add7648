"""Choosing MIPS's embedding dimensions (``ActionEmbedding(select="mse"|"slope")``) against
the full embedding and every fixed subset, on catalogs with exact truth.

Usage::

    python benchmarks/embedding_selection.py                     # 300 replications per design
    python benchmarks/embedding_selection.py --replications 100  # fewer
    python benchmarks/embedding_selection.py --quick             # a smoke run

Designs (``ope.simulate.CatalogBandit(n_items=2000, n_candidates=20, n_requests=200,
n_embedding_dims=3, n_categories=4, n_candidate_clusters=5, seed=0)`` with
``embedding_effects``):

* ``one dimension matters``: ``(1, 0, 0)``: e1 and e2 have no effect on the reward, so MIPS on
  ``{e0}`` is unbiased and pools 16 times more items per embedding value than the full one;
* ``decreasing effects``: ``(1, 0.3, 0.1)``: dropping e2 (then e1) trades a small bias for a
  smaller variance;
* ``every dimension matters``: ``(1, 1, 1)``: any subset is biased; the full embedding is right.

Each replication draws ``n`` rows and evaluates IPS and MIPS with the full embedding, with each
fixed subset, and with the subset chosen per candidate by the MSE bound and by SLOPE++ (greedy
and exact search each; it also counts how often each subset was chosen). Per design it prints the RMSE over
replications and the three candidates (``greedy``, ``cluster_shift``, ``uniform``) of each, the
bias (mean error) of the chosen subsets and the coverage of their 95% normal intervals (which
do not account for the choice). Writes ``benchmarks/results/embedding_selection.json``.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import format_table, write_result  # noqa: E402

DIMS = ("e0", "e1", "e2")

#: The catalog: 6 categories per dimension (216 joint embeddings), 20 candidates per request
#: from 20 distinct joint embeddings, so MIPS on the full embedding is IPS (one item per value
#: in each candidate set) and a dimension fewer pools items.
CATALOG: dict[str, int] = dict(
    n_items=5000,
    n_candidates=20,
    n_requests=200,
    n_embedding_dims=3,
    n_categories=6,
    n_candidate_clusters=20,
)

DESIGNS: dict[str, tuple[float, ...]] = {
    "one dimension matters": (1.0, 0.0, 0.0),
    "decreasing effects": (1.0, 0.3, 0.1),
    "every dimension matters": (1.0, 1.0, 1.0),
}

#: The selections compared: label -> (rule, search) of ``ActionEmbedding(select=, search=)``.
RUNS: dict[str, tuple[str, str]] = {
    "mse greedy": ("mse", "greedy"),
    "mse exact": ("mse", "exact"),
    "slope greedy": ("slope", "greedy"),
    "slope exact": ("slope", "exact"),
}

#: Every non-empty subset of the dimensions, from the full one down.
SUBSETS = [s for k in range(len(DIMS), 0, -1) for s in itertools.combinations(DIMS, k)]


def run_design(name: str, n: int, reps: int) -> dict[str, Any]:
    import ope
    from ope.marginal import ActionEmbedding
    from ope.simulate import CatalogBandit

    env = CatalogBandit(**CATALOG, embedding_effects=DESIGNS[name], seed=0)
    items = env.action_features()
    policies = list(env.candidate_policies)
    truth = np.array([env.true_value(p) for p in policies])
    labels = ["ips", *(("mips " + "+".join(s)) for s in SUBSETS), *RUNS]
    errors = np.empty((reps, len(policies), len(labels)))
    covered = np.zeros((len(policies), len(RUNS)))
    chosen: dict[str, dict[str, int]] = {label: {} for label in RUNS}
    for rep in range(reps):  # a loop over replications
        logs = ope.read_logs(env.sample(n, rng=rep)).with_action_features(items)
        values = np.empty((len(policies), len(labels)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for j, subset in enumerate(SUBSETS):  # a loop over the seven subsets
                ev = ope.evaluate(
                    logs,
                    estimators=("ips", "mips") if j == 0 else ("mips",),
                    embedding=ActionEmbedding(columns=subset),
                    rng=rep,
                )
                if j == 0:
                    values[:, 0] = [ev.estimates[(p, "ips")].value for p in policies]
                values[:, 1 + j] = [ev.estimates[(p, "mips")].value for p in policies]
            for k, (label, (rule, search)) in enumerate(RUNS.items()):
                ev = ope.evaluate(
                    logs,
                    estimators=("mips",),
                    embedding=ActionEmbedding(columns=DIMS, select=rule, search=search),
                    rng=rep,
                )
                col = len(labels) - len(RUNS) + k
                for i, p in enumerate(policies):
                    est = ev.estimates[(p, "mips")]
                    values[i, col] = est.value
                    covered[i, k] += est.ci_low <= truth[i] <= est.ci_high
                    key = "+".join(ev.settings["embedding"][p])
                    chosen[label][key] = chosen[label].get(key, 0) + 1
        errors[rep] = values - truth[:, None]
    flat = errors.reshape(-1, len(labels))
    rmse = np.sqrt((flat**2).mean(axis=0))
    bias = flat.mean(axis=0)
    best_fixed = int(np.argmin(rmse[1 : 1 + len(SUBSETS)])) + 1
    return {
        "design": name,
        "embedding_effects": list(DESIGNS[name]),
        "n": n,
        "replications": reps,
        "truth": dict(zip(policies, truth.tolist())),
        "rmse": dict(zip(labels, rmse.tolist())),
        "bias": dict(zip(labels, bias.tolist())),
        "best_fixed": labels[best_fixed],
        "coverage": {
            label: float(covered[:, k].sum() / (reps * len(policies)))
            for k, label in enumerate(RUNS)
        },
        "chosen": chosen,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 replications at n = 1,000")
    parser.add_argument("--replications", type=int, default=300)
    parser.add_argument("--n", type=int, default=2_000)
    parser.add_argument("--designs", nargs="+", default=list(DESIGNS), choices=list(DESIGNS))
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    n, reps = (1_000, 3) if args.quick else (args.n, args.replications)
    rows = [run_design(d, n, reps) for d in args.designs]
    result = {"n": n, "replications": reps, "rows": rows}
    result["seconds"] = time.perf_counter() - started
    labels = list(rows[0]["rmse"])
    headers = ["estimator", *(r["design"] for r in rows)]
    table = [[label, *(f"{r['rmse'][label]:.4f}" for r in rows)] for label in labels]
    print(f"RMSE over {reps} replications x 3 candidates, n = {n:,}")
    print(format_table(headers, table))
    for r in rows:
        print(f"{r['design']}: best fixed {r['best_fixed']}")
        for label, counts in r["chosen"].items():
            listed = ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))
            print(
                f"  {label}: bias {r['bias'][label]:+.4f}, coverage of the 95% interval "
                f"{r['coverage'][label]:.3f}; chosen {listed}"
            )
    suffix = "_quick" if args.quick else ""
    path = write_result("embedding_selection" + suffix, result, out=args.out)
    print(f"wrote {path} ({result['seconds']:.0f} s)")
    return result


if __name__ == "__main__":
    main()
