"""Evidence for ope.selection: how well each estimator × rule picks among 20 candidates.

Two synthetic environments with exact truth (``ope.simulate``): a contextual bandit (10 actions)
and a long-tail recommendation task (20 candidates per request). Each gets the same family of 20
candidate policies of graded quality built from the environment's true reward logits:
softmax at several temperatures, anti-softmax (worse than logging), epsilon-greedy around the
best action, mixtures of the logger with the best action or with the uniform policy, and
softmax of noisy logits. Their exact values spread from well below to well above the logging
policy's.

Per environment and replication: draw ``n`` logged rows, run one ``ope.evaluate`` with IPS,
clipped IPS, SNIPS and DR (normal intervals), run the safety gate
(``ope.learning.rank_policies``: clipped IPS, empirical Bernstein, Bonferroni over the 20
candidates, paired against logging), and score every estimator × rule with
``ope.selection.selection_report``. The table is the mean over replications (± its Monte Carlo
standard error for the top-1 regret).

Run ``python benchmarks/bench_selection.py`` (``--quick`` for a smoke run); the result is
written to ``benchmarks/results/bench_selection.json``.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd

import ope
from ope.learning import rank_policies
from ope.selection import selection_report
from ope.simulate import ContextualBandit, Recommendation

from _common import format_table, write_result

ESTIMATORS = ("ips", "clipped_ips", "snips", "dr")
#: Clip level of clipped IPS and of the gate, fixed in advance (the logger's smallest
#: propensities are about 0.005, so unclipped weights reach ~200).
MAX_WEIGHT = 20.0
CONFIDENCE = 0.95
K = 3


def _softmax(x: np.ndarray, temperature: float) -> np.ndarray:
    z = x / temperature
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def candidate_tables(q: np.ndarray, logging: np.ndarray, seed: int) -> dict[str, np.ndarray]:
    """20 candidate policies of graded quality from the mean-reward table ``q``."""
    g = np.random.default_rng(seed)
    logit = np.log(q) - np.log1p(-q)
    best = np.zeros_like(q)
    best[np.arange(q.shape[0]), np.argmax(q, axis=1)] = 1.0
    uniform = np.full_like(q, 1.0 / q.shape[1])
    tables: dict[str, np.ndarray] = {}
    for t in (0.25, 0.5, 1.0, 2.0, 4.0):
        tables[f"softmax_t{t:g}"] = _softmax(logit, t)
    for t in (1.0, 4.0):
        tables[f"anti_softmax_t{t:g}"] = _softmax(-logit, t)
    for eps in (0.1, 0.3, 0.5, 0.7, 0.9):
        tables[f"eps_greedy_{eps:g}"] = (1 - eps) * best + eps * uniform
    for share in (0.1, 0.25, 0.5):
        tables[f"logging_best_{share:g}"] = (1 - share) * logging + share * best
    for share in (0.25, 0.5, 1.0):
        tables[f"logging_uniform_{share:g}"] = (1 - share) * logging + share * uniform
    for noise in (1.0, 2.0):
        tables[f"noisy_softmax_{noise:g}"] = _softmax(
            logit + noise * g.standard_normal(q.shape), 0.5
        )
    return {name.replace(".", "p"): table for name, table in tables.items()}


def environments() -> dict[str, tuple[object, list[str]]]:
    """Environment name -> (environment carrying the 20 candidates, their names)."""
    out = {}
    base = ContextualBandit(n_actions=10, n_contexts=200, seed=0)
    tables = candidate_tables(base.reward_means, base.policy_table("logging"), seed=1)
    out["bandit"] = (
        ContextualBandit(n_actions=10, n_contexts=200, seed=0, policies=tables),
        list(tables),
    )
    base = Recommendation(n_items=2000, n_candidates=20, n_requests=500, seed=0)
    tables = candidate_tables(base.reward_means, base.policy_table("logging"), seed=2)
    out["recommendation"] = (
        Recommendation(n_items=2000, n_candidates=20, n_requests=500, seed=0, policies=tables),
        list(tables),
    )
    return out


#: Rows per replication: a small and a large log per environment (clicks in the
#: recommendation task are ~10x rarer, so its logs are larger).
ROWS: dict[str, tuple[int, ...]] = {"bandit": (300, 3_000), "recommendation": (1_000, 10_000)}


def one_replication(env, names: list[str], n: int, rng: np.random.Generator) -> pd.DataFrame:
    """Selection metrics of every estimator × rule on one draw of ``n`` logged rows."""
    logs = env.sample(n, rng=rng, distributions=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # weak-overlap notes of the deliberately poor candidates
        ev = ope.evaluate(
            logs,
            names,
            estimators=ESTIMATORS,
            max_weight=MAX_WEIGHT,
            confidence_level=CONFIDENCE,
            rng=rng,
        )
        columns = {name: logs.column(f"target__{name}").to_numpy() for name in names}
        gate = rank_policies(
            columns,
            None,
            logs.column("action").to_numpy(),
            logs.column("reward").to_numpy(),
            logs.column("propensity").to_numpy(),
            reward_range=(0.0, 1.0),
            max_weight=MAX_WEIGHT,
            confidence_level=CONFIDENCE,
        )
    truth = {name: env.true_value(name) for name in names}
    return selection_report(ev, truth, logging_value=env.true_value("logging"), gate=gate, k=K)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: 3 replications")
    parser.add_argument("--replications", type=int, default=None)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    reps = args.replications or (3 if args.quick else 200)
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    frames, spread = [], {}
    for env_name, (env, names) in environments().items():
        values = np.array([env.true_value(p) for p in names])
        v0 = env.true_value("logging")
        spread[env_name] = {
            "logging_value": v0,
            "best_value": float(values.max()),
            "worst_value": float(values.min()),
            "n_better_than_logging": int((values > v0).sum()),
        }
        for n in ROWS[env_name]:
            for r in range(reps):  # loop over replications; each is one vectorized evaluation
                frames.append(one_replication(env, names, n, rng).assign(env=env_name, n=n, rep=r))
    raw = pd.concat(frames, ignore_index=True)
    metrics = [
        "regret_top1",
        "regret_topk",
        "spearman",
        "kendall",
        "n_approved",
        "approve_worse_rate",
        "reject_better_rate",
        "deployed_improvement",
    ]
    grouped = raw.groupby(["env", "n", "estimator", "rule"], sort=False)
    table = grouped[metrics].mean()
    table["regret_top1_se"] = grouped["regret_top1"].std(ddof=1) / np.sqrt(reps)
    table = table.reset_index()
    elapsed = time.perf_counter() - start
    headers = [
        "env",
        "n",
        "estimator",
        "rule",
        "regret@1",
        "(se)",
        f"regret@{K}",
        "spearman",
        "kendall",
        "approved",
        "approve worse",
        "reject better",
        "shipped gain",
    ]
    rows = [
        [
            t.env,
            t.n,
            t.estimator,
            t.rule,
            t.regret_top1,
            t.regret_top1_se,
            t.regret_topk,
            t.spearman,
            t.kendall,
            t.n_approved,
            t.approve_worse_rate,
            t.reject_better_rate,
            t.deployed_improvement,
        ]
        for t in table.itertuples(index=False)
    ]
    for env_name, info in spread.items():
        print(
            f"{env_name}: logging value {info['logging_value']:.4f}, "
            f"candidates {info['worst_value']:.4f} .. {info['best_value']:.4f}, "
            f"{info['n_better_than_logging']}/20 better than logging"
        )
    print(f"{reps} replications, {elapsed:.0f} s\n")
    print(format_table(headers, rows))
    path = write_result(
        "bench_selection",
        {
            "replications": reps,
            "seed": args.seed,
            "k": K,
            "max_weight": MAX_WEIGHT,
            "confidence_level": CONFIDENCE,
            "environments": spread,
            "rows": ROWS,
            "seconds": elapsed,
            "table": table.to_dict(orient="records"),
        },
    )
    print(f"\nwritten to {path}")


if __name__ == "__main__":
    main()
