"""Minimal valid calls of the entry points of one area: readers and importers (parquet, OBD,
DSJSON, trajectories, paired replays, bandit-feedback dicts, slates), the log objects' methods,
the sequential estimators and returns, paired effects.

``VALID`` maps each registered name to a factory ``valid(tmp) -> Call``; ``KNOWN_BROKEN`` maps
``"<entry>::<argument>"`` to what breaks the hostile-input contract today (each a bug to fix at
its root; the contract test marks it a strict xfail so that the fix asks for its removal).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Final


from ope._entrypoints import Call
from ope._valid_calls._base import (
    call, paired_parquet, parquet,
)

#: Registered name -> a factory of its minimal valid call (see :class:`ope._entrypoints.Call`).
VALID: Final[dict[str, Callable[[Path], Call]]] = {
    "ope.read_logs": lambda tmp: call("ope.read_logs", source=parquet(tmp), on_invalid="raise"),
    "ope.scan_logs": lambda tmp: call("ope.scan_logs", source=parquet(tmp), batch_size=32),
    "ope.read_paired": lambda tmp: call("ope.read_paired", source=paired_parquet(tmp)),
    "ope.paired_effect": lambda tmp: call(
        "ope.paired_effect", replays=paired_parquet(tmp), treated="mem", control="none",
        confidence_level=0.95),
    "ope.load_sample": lambda tmp: call("ope.load_sample", columns=None),
}

#: ``"<entry>::<argument>"`` -> how the contract breaks today.
KNOWN_BROKEN: Final[dict[str, str]] = {
    'ope.load_sample::columns': (
        "ope.load_sample(columns=['no_such_column']) raised SchemaError not naming `colum"
        "ns`: the bundled sample has no column(s) ['no_such_column']; it has: event_id, a"
        'ction, propensity, reward, x0, x1, x2, x3, segment, candidates, loggin'
    ),
    'ope.paired_effect::treated': (
        'ope.paired_effect(treated=<object object at 0x…>) raised ParameterError not nami'
        'ng `treated`: arm <object object at 0x…> is not in the replays; their arms are: '
        "'mem', 'none'."
    ),
    'ope.paired_effect::control': (
        'ope.paired_effect(control=<object object at 0x…>) raised ParameterError not nami'
        'ng `control`: arm <object object at 0x…> is not in the replays; their arms are: '
        "'mem', 'none'."
    ),
    'ope.read_logs::source': (
        "ope.read_logs(source='') raised ParameterError not naming `source`: the logs pat"
        'h is empty; give a file, a directory or a URI'
    ),
    'ope.read_paired::source': (
        "ope.read_paired(source='') raised ParameterError not naming `source`: the logs p"
        'ath is empty; give a file, a directory or a URI'
    ),
    'ope.scan_logs::source': (
        "ope.scan_logs(source='') raised ParameterError not naming `source`: the logs pat"
        'h is empty; give a file, a directory or a URI'
    ),
}
