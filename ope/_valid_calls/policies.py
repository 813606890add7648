"""Minimal valid calls of the entry points of one area: the policies (the policy
classes of ``ope`` and ``ope.policies``, slate policies) and the policy tables.

``VALID`` maps each registered name to a factory ``valid(tmp) -> Call``; ``KNOWN_BROKEN`` maps
``"<entry>::<argument>"`` to what breaks the hostile-input contract today (each a bug to fix at
its root; the contract test marks it a strict xfail so that the fix asks for its removal).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Final

import pandas as pd

from ope._entrypoints import Call, resolve
from ope._valid_calls._base import (
    call, frame,
)

#: Registered name -> a factory of its minimal valid call (see :class:`ope._entrypoints.Call`).
VALID: Final[dict[str, Callable[[Path], Call]]] = {
    "ope.UniformPolicy.propensity": lambda tmp: Call(
        resolve("ope.UniformPolicy")(actions=[0, 1, 2]).propensity,
        {"logs": resolve("ope.read_logs")(frame())}),
    "ope.UniformPolicy": lambda tmp: call("ope.UniformPolicy", actions=[0, 1, 2]),
    "ope.policies.is_policy_spec": lambda tmp: call("ope.policies.is_policy_spec",
                                                     text="greedy"),
    "ope.policies.parse_policy_spec": lambda tmp: call(
        "ope.policies.parse_policy_spec", text="u=uniform"),
    "ope.write_policy_table": lambda tmp: call(
        "ope.write_policy_table", table=pd.DataFrame({
            "event_id": [0, 0], "policy": ["p", "p"], "action": [0, 1],
            "probability": [0.5, 0.5]}), path=tmp / "policy.parquet"),
}

#: ``"<entry>::<argument>"`` -> how the contract breaks today.
KNOWN_BROKEN: Final[dict[str, str]] = {
    'ope.write_policy_table::path': (
        "ope.write_policy_table(path=3) raised TypeError (not from ope's exception tree):"
        ' expected str, bytes or os.PathLike object, not int'
    ),
    'ope.policies.is_policy_spec::text': (
        "ope.policies.is_policy_spec(text=3) raised TypeError (not from ope's exception t"
        "ree): argument of type 'int' is not iterable"
    ),
    'ope.policies.parse_policy_spec::text': (
        "ope.policies.parse_policy_spec(text='') raised ParameterError not naming `text`:"
        " policy spec '': it is empty. A spec is NAME=KIND[:ARGS] with KIND one of unifor"
        'm, logging, epsilon-greedy:COLUMN:EPS, softmax:COLUMN[:TEMPERATURE], n'
    ),
    'ope.UniformPolicy.propensity::logs': (
        'ope.UniformPolicy.propensity(logs=<a DataFrame>) raised AttributeError (not from'
        " ope's exception tree): 'DataFrame' object has no attribute 'table' (any non-Ban"
        'ditLogs value does the same)'
    ),
}
