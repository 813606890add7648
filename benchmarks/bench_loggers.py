"""Pooling two loggers: per-logger vs balanced (mixture) propensities, against the exact value.

Logger A is the simulator's logger; logger B plays the worst action 98% of the time (poor overlap
with the candidate ``optimal``). 300 replications of 1,000 rows from each logger on
``ContextualBandit(n_actions=5, n_features=3, n_contexts=50, seed=0)``: the mean, spread and bias
z of IPS with each row's own logger's propensity and with the balanced propensity
sum_j (n_j / n) pi_j (Agarwal et al. 2017).

Usage::

    python benchmarks/bench_loggers.py      # about a minute
"""

from __future__ import annotations

import warnings

import numpy as np
import pyarrow as pa

from ope.estimators import IPS
from ope.loggers import balanced_propensities
from ope.simulate import ContextualBandit

REPLICATIONS = 300


def main() -> None:
    warnings.simplefilter("ignore")
    env = ContextualBandit(n_actions=5, n_features=3, n_contexts=50, seed=0)
    worst = np.argmin(env.reward_means, axis=1)
    tables = {"A": env.policy_table("logging"), "B": 0.02 / 5 + 0.98 * np.eye(5)[worst]}
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
        return t.set_column(0, "event_id", pa.array(np.arange(t.num_rows)))

    g = np.random.default_rng(0)
    per, bal = [], []
    for _ in range(REPLICATIONS):  # a loop over replications, not rows
        t = draw(g)
        r, tp = t.column("reward").to_numpy(), t.column("target__optimal").to_numpy()
        per.append(IPS().estimate(r, t.column("propensity").to_numpy(), tp).value)
        bal.append(IPS().estimate(r, balanced_propensities(t).column("propensity"), tp).value)
    print(f"truth {truth:.4f}; {REPLICATIONS} replications of 2 x 1,000 rows")
    for label, v in (("per-logger", np.array(per)), ("balanced", np.array(bal))):
        z = (v.mean() - truth) / (v.std(ddof=1) / np.sqrt(v.size))
        print(f"  {label:<10} mean {v.mean():.4f}  sd {v.std(ddof=1):.4f}  bias z {z:+.2f}")


if __name__ == "__main__":
    main()
