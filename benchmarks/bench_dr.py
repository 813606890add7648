"""Benchmark: DR's reward-model predictions over each row's candidate set, by the coefficient
gather of the default linear model, against the design-row predictions they replace.

Workload (the issue's): a 1,000-item catalog, 1M events with 8 context features, a candidate
policy spread over 20 candidate items per event; ``FittedRewardModel.predict_policy`` computes
``q(x_i, pi) = sum_a pi(a|x_i) q(x_i, a)`` over the 20M (event, item) pairs, each by the model
of the event's own fold (cross-fitting). Cases (interleaved rounds, medians):

* ``gather``: this tree: per-action coefficient rows ``coef[f, a]`` (context part plus the
  action's interactions) and constants are gathered for every pair and dotted with the context;
* ``design``: the reward-model module of ``--before-rev`` (``git show``), predicting the same
  fitted fold models on design rows ``[x, one-hot(a), x (x) one-hot(a)]`` built chunk by chunk
  (sparse CSR) and passed to ``Ridge.predict``;
* ``validation``: the shared part, checking the policy's CSR matrix (both cases pay it).

Both use the same fitted Ridge models (fitted once by this tree; the old module's fitted-model
class is built around them), so the predictions must agree to rounding (reported).

Usage::

    python benchmarks/bench_dr.py            # 1M events, 3 rounds
    python benchmarks/bench_dr.py --quick    # 100k events
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Final

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_bootstrap import DEFAULT_BEFORE_REV, load_before  # noqa: E402  (imports numba first)
from _common import interleaved, ratio, summarize, write_result  # noqa: E402

NAME: Final = "bench_dr"
N_ITEMS: Final = 1000
N_CONTEXT: Final = 8
SUPPORT: Final = 20


def make_data(n: int, seed: int = 0) -> dict[str, Any]:
    """Contexts, uniformly logged items, click rewards depending on context x item, and a
    candidate spread over 20 distinct items per event (softmax weights)."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, N_CONTEXT))
    a = rng.integers(0, N_ITEMS, size=n)
    item = rng.normal(size=(N_ITEMS, N_CONTEXT)) * 0.3
    logit = -1.5 + np.einsum("ij,ij->i", x, item[a])
    r = (rng.random(n) < 1.0 / (1.0 + np.exp(-logit))).astype(np.float64)
    # 20 distinct items per event: 20 of 50 blocks of 20 items, one item in each block
    blocks = np.sort(np.argsort(rng.random((n, N_ITEMS // SUPPORT)), axis=1)[:, :SUPPORT], axis=1)
    cols = blocks * SUPPORT + rng.integers(0, SUPPORT, size=(n, SUPPORT))
    probs = np.exp(rng.normal(size=(n, SUPPORT)))
    probs /= probs.sum(axis=1, keepdims=True)
    dist = sp.csr_array(
        (probs.ravel(), cols.ravel().astype(np.int64), np.arange(n + 1, dtype=np.int64) * SUPPORT),
        shape=(n, N_ITEMS),
    )
    return {"x": x, "action": a, "reward": r, "dist": dist}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100k events (a smoke run)")
    parser.add_argument("--events", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--before-rev", default=DEFAULT_BEFORE_REV)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    n = args.events or (100_000 if args.quick else 1_000_000)
    rounds = args.rounds or (2 if args.quick else 3)

    from ope.reward_models import RewardModel, _as_distribution

    old = load_before(args.before_rev, "ope/reward_models.py", "ope_reward_models_before")
    data = make_data(n)
    t0 = time.perf_counter()
    fitted = RewardModel(rng=0).fit(data["x"], data["action"], data["reward"], n_actions=N_ITEMS)
    fit_s = time.perf_counter() - t0
    design = fitted._design
    before = old.FittedRewardModel(
        model=old.RewardModel(rng=0),
        estimators=fitted.estimators_,
        fold=fitted.fold_,
        n_actions=N_ITEMS,
        reward_values=None,
        design=old._Design(
            design.n_context,
            design.n_actions,
            None,
            design.interactions,
            design.sparse,
            intercepts=False,
        ),
        context=fitted._context,
        q_logged=fitted.predict_logged(),
    )
    dist = data["dist"]
    q_new = fitted.predict_policy(dist)
    q_old = before.predict_policy(dist)
    cases = {
        "gather": lambda: fitted.predict_policy(dist),
        "design": lambda: before.predict_policy(dist),
        "validation": lambda: _as_distribution(dist, n, N_ITEMS, None),
    }
    times = interleaved(cases, rounds=rounds, warmup=1)
    result: dict[str, Any] = {
        "quick": args.quick,
        "events": n,
        "items": N_ITEMS,
        "support": SUPPORT,
        "pairs": int(dist.nnz),
        "before_rev": args.before_rev,
        "fit_seconds": fit_s,
        "max_abs_difference": float(np.abs(q_new - q_old).max()),
        "cases": {
            k: {**summarize(v), "cpu_median_s": statistics.median(times.cpu[k])}
            for k, v in times.wall.items()
        },
        "design_vs_gather_ratio": ratio(times.wall["design"], times.wall["gather"]),
        "design_vs_gather_cpu_ratio": ratio(times.cpu["design"], times.cpu["gather"]),
    }
    lines = [
        f"DR predictions, {n:,} events x {SUPPORT} candidates ({dist.nnz:,} pairs), "
        f"{N_ITEMS:,} items, {N_CONTEXT} context features; {rounds} interleaved rounds",
        "",
        "| case | wall s | CPU s |",
        "|---|---:|---:|",
    ]
    for k, s in result["cases"].items():
        lines.append(f"| {k} | {s['median_s']:.2f} | {s['cpu_median_s']:.2f} |")
    lines += [
        "",
        f"design / gather: {result['design_vs_gather_ratio']['ratio']:.2f}x wall "
        f"(paired {result['design_vs_gather_ratio']['paired_min']:.2f}-"
        f"{result['design_vs_gather_ratio']['paired_max']:.2f}), "
        f"{result['design_vs_gather_cpu_ratio']['ratio']:.2f}x CPU; largest "
        f"difference {result['max_abs_difference']:.1e}; the fit (5 folds): "
        f"{fit_s:.1f} s",
    ]
    result["markdown"] = "\n".join(lines)
    print(result["markdown"])
    write_result(NAME, result, out=args.out)
    return result


if __name__ == "__main__":
    main()
