"""MIPS with an estimated p(e|a) against MIPS with the known one, on exact truth.

Usage::

    python benchmarks/estimated_embedding.py                  # n = 5,000 and 20,000
    python benchmarks/estimated_embedding.py --quick          # a smoke run

Every replication draws fresh logs from ``ope.simulate.CatalogBandit(n_items=200,
n_candidates=20, n_requests=100, n_categories=4, n_candidate_clusters=4, seed=0,
stochastic_embeddings=True)`` (each row's categories ``e0, e1`` drawn from a known ``p(e|a)``)
and runs ``ope.evaluate(..., estimators=("ips", "mips"))`` twice: with
``ActionEmbedding(distribution=env.embedding_distribution())`` (the known ``p(e|a)``) and with
``ActionEmbedding(estimated=["e0", "e1"], rng=replication)`` (cross-fitted, smoothed item
frequencies of the observed embeddings). It prints the bias (with its Monte Carlo standard
error), RMSE and normal-interval coverage of each against ``env.true_value(policy)``, and writes
``benchmarks/results/estimated_embedding.json``.
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


def run(sizes: tuple[int, ...], reps: int) -> dict[str, Any]:
    import ope
    from ope.exceptions import OPEWarning
    from ope.simulate import CatalogBandit

    env = CatalogBandit(
        n_items=200,
        n_candidates=20,
        n_requests=100,
        n_categories=4,
        n_candidate_clusters=4,
        seed=0,
        stochastic_embeddings=True,
    )
    items = env.action_features().select(["action", "cluster"])
    known = ope.ActionEmbedding(distribution=env.embedding_distribution())
    columns = list(env.embedding_distribution())
    cells: dict[str, list[tuple[float, float, float]]] = {}
    for n in sizes:  # a loop over sample sizes
        for rep in range(reps):  # a loop over replications
            logs = ope.read_logs(env.sample(n, rng=rep)).with_action_features(items)
            estimated = ope.ActionEmbedding(estimated=columns, rng=rep)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", OPEWarning)
                for label, emb in (("known", known), ("estimated", estimated)):
                    ev = ope.evaluate(logs, estimators=("ips", "mips"), embedding=emb)
                    for row in ev.table().itertuples(index=False):
                        if row.policy == "logging" or (
                            label == "estimated" and row.estimator == "ips"
                        ):
                            continue
                        name = row.estimator if row.estimator == "ips" else f"mips ({label})"
                        key = f"{n}|{row.policy}|{name}"
                        cells.setdefault(key, []).append(
                            (float(row.value), float(row.ci_low), float(row.ci_high))
                        )
    rows = []
    for key, values in cells.items():
        n, policy, name = key.split("|")
        v = np.array(values)
        truth = env.true_value(policy)
        err = v[:, 0] - truth
        rows.append(
            {
                "n": int(n),
                "policy": policy,
                "estimator": name,
                "bias": float(err.mean()),
                "bias_se": float(err.std(ddof=1) / np.sqrt(len(err)))
                if len(err) > 1
                else float("nan"),
                "rmse": float(np.sqrt((err**2).mean())),
                "coverage": float(((v[:, 1] <= truth) & (truth <= v[:, 2])).mean()),
            }
        )
    return {"replications": reps, "sizes": list(sizes), "rows": rows}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 replications at n = 2,000")
    parser.add_argument("--replications", type=int, default=30)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    sizes = (2_000,) if args.quick else (5_000, 20_000)
    result = run(sizes, 2 if args.quick else args.replications)
    result["seconds"] = time.perf_counter() - started
    headers = ["n", "policy", "estimator", "bias ± MC se", "RMSE", "coverage"]
    table = [
        [
            f"{r['n']:,}",
            r["policy"],
            r["estimator"],
            f"{r['bias']:+.4f} ± {r['bias_se']:.4f}",
            f"{r['rmse']:.4f}",
            f"{r['coverage']:.2f}",
        ]
        for r in sorted(result["rows"], key=lambda r: (r["n"], r["policy"], r["estimator"]))
    ]
    print(format_table(headers, table))
    path = write_result(
        "estimated_embedding" + ("_quick" if args.quick else ""), result, out=args.out
    )
    print(f"wrote {path} ({result['seconds']:.0f} s)")
    return result


if __name__ == "__main__":
    main()
