"""Valid calls of one area (the conventions are in :mod:`ope._valid_calls`): the ``ope``
subcommands: the argv of one successful run each."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Final


from ope._valid_calls._base import (
    dsjson_file,
    paired_parquet,
    parquet,
)

#: Subcommand -> argv of a run that exits 0 (``ope`` and ``--json`` left out).
VALID: Final[dict[str, Callable[[Path], list[str]]]] = {
    "validate": lambda tmp: ["validate", str(parquet(tmp))],
    "evaluate": lambda tmp: [
        "evaluate",
        str(parquet(tmp)),
        "--policy",
        "greedy",
        "--estimator",
        "ips",
        "--confidence-level",
        "0.9",
    ],
    "diagnose": lambda tmp: ["diagnose", str(parquet(tmp)), "--policy", "greedy"],
    "tune": lambda tmp: [
        "tune",
        str(parquet(tmp)),
        "--policy",
        "greedy",
        "--estimator",
        "clipped_ips",
        "--grid",
        "2",
        "10",
    ],
    "paired": lambda tmp: [
        "paired",
        str(paired_parquet(tmp)),
        "--treated",
        "mem",
        "--control",
        "none",
    ],
    "report": lambda tmp: [
        "report",
        str(parquet(tmp)),
        "--policy",
        "greedy",
        "--estimator",
        "ips",
        "--out",
        str(tmp / "cli.html"),
        "--force",
    ],
    "learn": lambda tmp: [
        "learn",
        str(parquet(tmp)),
        "--context-columns",
        "x0",
        "--out",
        str(tmp / "policy.parquet"),
    ],
    "import": lambda tmp: [
        "import",
        "dsjson",
        str(dsjson_file(tmp)),
        "--out",
        str(tmp / "imported.parquet"),
    ],
    "action-table": lambda tmp: [
        "action-table",
        str(parquet(tmp)),
        "--out",
        str(tmp / "table.csv"),
    ],
    "demo": lambda tmp: ["demo", "--out", str(tmp / "demo.html")],
    "sequences": lambda tmp: ["sequences", str(_responses(tmp)), "--on-policy", "sampler"],
    "continuous": lambda tmp: ["continuous", str(_continuous(tmp)), "--kernel", "triangular"],
    "slates": lambda tmp: ["slates", str(_slates(tmp)), "--estimator", "rips", "sips"],
    "monitor": lambda tmp: [
        "monitor",
        str(parquet(tmp)),
        "--policy",
        "greedy",
        "--reward-range",
        "0",
        "1",
        "--state",
        str(tmp / "monitor-state.json"),
    ],
}


def _continuous(tmp: Path) -> Path:
    """400 rows of a small continuous-action bandit as parquet."""
    import pyarrow.parquet as pq

    from ope.simulate import ContinuousBandit

    path = tmp / "continuous.parquet"
    pq.write_table(ContinuousBandit(n_features=1, seed=0).sample(400, rng=0), path)
    return path


def _slates(tmp: Path) -> Path:
    """200 slates of a small slate environment as parquet (one row per slot), with a
    candidate's prefix probabilities as a column."""
    import pyarrow.parquet as pq

    from ope.simulate import SlateEnvironment

    env = SlateEnvironment(seed=0)
    table = env.sample(200, rng=0)
    path = tmp / "slates.parquet"
    pq.write_table(table.append_column("target_prefix__logged", table["prefix_propensity"]), path)
    return path


def _responses(tmp: Path) -> Path:
    """200 responses of a small token model as JSON lines (as serving stacks export them)."""
    import json

    from ope.simulate import TokenModel

    path = tmp / "responses.jsonl"
    rows = TokenModel(n_prompts=2, vocab_size=3, max_length=4, seed=0).sample(200, rng=0)
    path.write_text("\n".join(json.dumps(r) for r in rows.to_pylist()) + "\n")
    return path


#: ``"<entry>::<argument>"`` -> how the contract breaks today.
KNOWN_BROKEN: Final[dict[str, str]] = {}
