"""Pooling two loggers: per-logger, balanced (mixture) and precision-weighted strata, against the
exact value.

Logger A is the simulator's logger; logger B plays the worst action 98% of the time (poor overlap
with the candidate ``optimal``), then 60% (unequal exploration, both covering). 300 replications of 1,000 rows from each logger on
``ContextualBandit(n_actions=5, n_features=3, n_contexts=50, seed=0)``; each replication runs
``ope.evaluate_loggers`` (IPS and SNIPS, normal 95% intervals) with each weighting:

* ``per_logger``: each row's own logger's propensity;
* ``balanced``: the mixture sum_j (n_j / n) pi_j (Agarwal et al. 2017; needs every logger's
  probability of each logged action);
* ``precision``: each logger's stratum alone, combined by the inverses of their variances
  (Kallus, Saito & Uehara 2021; needs only each row's own propensity).

Reported per weighting and estimator: the mean, the standard deviation over replications, the
bias z (mean minus truth over its Monte Carlo standard error), the coverage of the interval and
the mean reported standard error against the observed spread.

Usage::

    python benchmarks/bench_loggers.py      # about a minute
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pyarrow as pa

from ope.loggers import evaluate_loggers
from ope.simulate import ContextualBandit

REPLICATIONS = 300
Z = 1.959963984540054


def main() -> None:
    warnings.simplefilter("ignore")
    for share in (0.98, 0.6):
        design(share)


def design(share: float) -> None:
    env = ContextualBandit(n_actions=5, n_features=3, n_contexts=50, seed=0)
    worst = np.argmin(env.reward_means, axis=1)
    tables = {
        "A": env.policy_table("logging"),
        "B": (1 - share) / 5 + share * np.eye(5)[worst],
    }
    truth = env.true_value("optimal")

    def draw(g: np.random.Generator) -> pa.Table:
        parts = []
        for name in tables:
            t = env.sample(1000, rng=g, logging_policy=tables[name], oracle=True)
            ctx, a = t.column("context_id").to_numpy(), t.column("action").to_numpy()
            t = t.append_column("logging_policy", pa.array([name] * t.num_rows))
            for other, table in tables.items():
                t = t.append_column("propensity__" + other, pa.array(table[ctx, a]))
            parts.append(t)
        t = pa.concat_tables(parts)
        t = t.set_column(0, "event_id", pa.array(np.arange(t.num_rows)))
        keep = ["event_id", "action", "propensity", "reward", "logging_policy", "target__optimal"]
        return t.select(keep + [c for c in t.column_names if c.startswith("propensity__")])

    g = np.random.default_rng(0)
    weightings = ("per_logger", "balanced", "precision")
    found: dict[tuple[str, str], list[tuple[float, float]]] = {
        (w, e): [] for w in weightings for e in ("ips", "snips")
    }
    for _ in range(REPLICATIONS):  # a loop over replications, not rows
        t = draw(g)
        for w in weightings:  # a loop over the three weightings
            ev = evaluate_loggers(t, weighting=w, estimators=("ips", "snips"))
            for e in ("ips", "snips"):
                est = ev["optimal", e]
                found[(w, e)].append((est.value, est.std_error))
    print(
        f"\nlogger B plays the worst action {share:.0%} of the time; truth {truth:.4f}; "
        f"{REPLICATIONS} replications of 2 x 1,000 rows"
    )
    print("weighting   estimator   mean     sd       bias z  coverage  mean se / sd")
    for (w, e), values in found.items():
        v = np.array(values)
        z = (v[:, 0].mean() - truth) / (v[:, 0].std(ddof=1) / math.sqrt(len(v)))
        cover = float(np.mean(np.abs(v[:, 0] - truth) <= Z * v[:, 1]))
        ratio = v[:, 1].mean() / v[:, 0].std(ddof=1)
        print(
            f"{w:<11} {e:<9} {v[:, 0].mean():.4f}  {v[:, 0].std(ddof=1):.4f}  {z:+6.2f}"
            f"  {cover:8.3f}  {ratio:12.2f}"
        )


if __name__ == "__main__":
    main()
