"""Minimal valid calls of the entry points of one area: learning and selection (the policy
learners, reward models, propensity estimation and checks, the safety gate and its certificate,
policy selection and ranking).

``VALID`` maps each registered name to a factory ``valid(tmp) -> Call``; ``KNOWN_BROKEN`` maps
``"<entry>::<argument>"`` to what breaks the hostile-input contract today (each a bug to fix at
its root; the contract test marks it a strict xfail so that the fix asks for its removal).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Final

import numpy as np

from ope._entrypoints import Call
from ope._valid_calls._base import call

#: Registered name -> a factory of its minimal valid call (see :class:`ope._entrypoints.Call`).
VALID: Final[dict[str, Callable[[Path], Call]]] = {
    "ope.selection_regret": lambda tmp: call(
        "ope.selection_regret", true_values=np.array([1.0, 0.5]), scores=np.array([0.9, 0.2]), k=1),
    "ope.rank_correlation": lambda tmp: call(
        "ope.rank_correlation", true_values=np.array([1.0, 0.5, 0.1]),
        scores=np.array([0.9, 0.2, 0.3])),
}

#: ``"<entry>::<argument>"`` -> how the contract breaks today.
KNOWN_BROKEN: Final[dict[str, str]] = {
}
