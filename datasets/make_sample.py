"""Write the bundled sample: recommendation logs with exactly known policy values.

Run from the repository root (with ope installed)::

    python datasets/make_sample.py

It writes ``ope/data/sample_recommendation.parquet`` (the logs) and
``ope/data/sample_recommendation.truth.json`` (the exact value of the logging policy and of every
candidate policy, overall and per segment), and prints the truth. Both are package data: a
plain ``pip install`` ships them, and :func:`ope.load_sample` reads them from the installed
package. The settings and seeds below are fixed, so the output is the same on every run with the
same numpy. ``--out-dir DIR`` writes elsewhere (to compare with the bundled files, say).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ope.simulate import Recommendation

#: the simulator's settings (documented in datasets/README.md)
SETTINGS: Final[dict[str, Any]] = {
    "n_items": 5000,
    "n_candidates": 20,
    "n_requests": 2000,
    "n_features": 4,
    "segments": ["new", "casual", "regular", "loyal", "power"],
    "zipf_exponent": 1.0,
    "logging_temperature": 1.0,
    "logging_epsilon": 0.05,
    # cold start: for new users the production ranker only ever shows its top 16 candidates
    "logging_top_k": 16,
    "restricted_segments": ["new"],
    "seed": 20240601,
}
#: rows in the sample: enough for tight intervals on the well-covered policies, small enough
#: (about 3 MB) to ship in the repository
N_EVENTS: Final = 100_000
#: seed of the draw of the logged events
SAMPLE_SEED: Final = 7
NAME: Final = "sample_recommendation"
#: where the bundled files live: ope's package data, next to this script's datasheet
PACKAGE_DATA_DIR: Final = Path(__file__).resolve().parents[1] / "ope" / "data"
#: parquet codec and level: the best size for this file among those pyarrow ships
COMPRESSION: Final = "zstd"
COMPRESSION_LEVEL: Final = 19


def build(n_events: int = N_EVENTS) -> tuple[pa.Table, dict[str, Any]]:
    """The sample table and its truth dictionary."""
    env = Recommendation(**SETTINGS)
    table = env.sample(n_events, rng=SAMPLE_SEED)
    names = ["logging", *env.candidate_policies]
    truth: dict[str, Any] = {
        "dataset": f"{NAME}.parquet",
        "generator": "ope.simulate.Recommendation",
        "settings": SETTINGS,
        "sample_seed": SAMPLE_SEED,
        "n_events": table.num_rows,
        "reward_range": list(env.reward_range),
        "logging": env.true_value("logging"),
        "policies": {name: env.true_value(name) for name in env.candidate_policies},
        "by_segment": {name: env.true_value_by_segment(name) for name in names},
        "unsupported_mass": {name: env.unsupported_mass(name) for name in env.candidate_policies},
        "supported_value": {name: env.supported_value(name) for name in env.candidate_policies},
        "note": (
            "Exact expectations under the simulator's model, not Monte Carlo averages. "
            "'unsupported_mass' is the share of a policy's choices that the logger never makes "
            "(cold-start users see only the logger's top 16 candidates); no estimator can "
            "recover the value on that share from these logs, and IPS converges to "
            "'supported_value'."
        ),
    }
    return table, truth


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=PACKAGE_DATA_DIR,
        help="directory to write into (default: ope/data, the package data ope.load_sample reads)",
    )
    args = parser.parse_args(argv)
    table, truth = build()
    out = args.out_dir
    out.mkdir(parents=True, exist_ok=True)
    parquet_path = out / f"{NAME}.parquet"
    pq.write_table(
        table,
        parquet_path,
        compression=COMPRESSION,
        compression_level=COMPRESSION_LEVEL,
        use_dictionary=True,
    )
    # the file must read back identical, list columns and float64 values included
    if not pq.read_table(parquet_path).equals(table):
        print(f"error: {parquet_path} does not read back identical", file=sys.stderr)
        return 1
    truth_path = out / f"{NAME}.truth.json"
    truth_path.write_text(json.dumps(truth, indent=2) + "\n", encoding="utf-8")

    size_mb = parquet_path.stat().st_size / 1e6
    print(f"wrote {parquet_path} ({table.num_rows:,} events, {size_mb:.2f} MB)")
    print(f"wrote {truth_path}")
    mean_reward = float(np.mean(table.column("reward").to_numpy()))
    print(f"\nmean logged reward: {mean_reward:.5f}")
    print(f"{'policy':<14} {'true value':>11} {'unsupported':>12} {'supported value':>16}")
    print(f"{'logging':<14} {truth['logging']:>11.5f} {0.0:>12.5f} {truth['logging']:>16.5f}")
    for name, value in truth["policies"].items():
        print(
            f"{name:<14} {value:>11.5f} {truth['unsupported_mass'][name]:>12.5f} "
            f"{truth['supported_value'][name]:>16.5f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
