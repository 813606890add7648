"""DR on an Open-Bandit-shaped table: the old numeric-columns default vs the new default.

20,000 rows, 80 items, 80 ``user-item_affinity_*`` columns and 27 other numeric columns, a
candidate spread over 3 items per row, an item feature table. The old default took every numeric
column (107); the new one leaves the affinity columns out unless named, and uses the item
feature. Times one ``ope.evaluate(..., estimators=("dr",))`` each and prints the columns used.

Usage::

    python benchmarks/bench_context_columns.py
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import pandas as pd

import ope


def main() -> None:
    warnings.simplefilter("ignore")
    rng = np.random.default_rng(0)
    n, n_items, top = 20_000, 80, 3
    df = pd.DataFrame(rng.random((n, 80)), columns=[f"user-item_affinity_{j}" for j in range(80)])
    for j in range(27):
        df[f"u{j}"] = rng.random(n)
    df = df.assign(
        event_id=np.arange(n),
        action=rng.integers(0, n_items, n),
        propensity=1 / n_items,
        reward=(rng.random(n) < 0.05).astype(float),
    )
    items = pd.DataFrame({"action": np.arange(n_items), "item_feature_0": rng.normal(size=n_items)})
    table = pd.DataFrame(
        {
            "event_id": np.repeat(np.arange(n), top),
            "policy": "p",
            "action": np.tile(np.arange(top), n),
            "probability": 1 / top,
        }
    )
    logs = ope.read_logs(df)
    old = [c for c in df.columns if c.startswith(("user-item", "u"))]
    for label, kw in (
        ("old default (every numeric column)", {"context_columns": old}),
        ("new default", {"action_features": items}),
    ):
        start = time.perf_counter()
        ev = ope.evaluate(logs, table, estimators=("dr",), rng=0, **kw)
        cols = ev.model_columns
        print(
            f"{label}: {time.perf_counter() - start:.2f} s, {len(cols['context'])} context "
            f"columns, action features {cols['action_features']}"
        )


if __name__ == "__main__":
    main()
