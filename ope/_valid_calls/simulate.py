"""Minimal valid calls of the entry points of one area: the simulators of ``ope.simulate`` and
their methods.

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
    call,
)

#: Registered name -> a factory of its minimal valid call (see :class:`ope._entrypoints.Call`).
VALID: Final[dict[str, Callable[[Path], Call]]] = {
    "ope.simulate.ContextualBandit": lambda tmp: call(
        "ope.simulate.ContextualBandit", n_actions=3, n_features=2, seed=0),
}

#: ``"<entry>::<argument>"`` -> how the contract breaks today.
KNOWN_BROKEN: Final[dict[str, str]] = {
    'ope.simulate.ContextualBandit::n_actions': (
        "ope.simulate.ContextualBandit(n_actions=10**30) raised ValueError (not from ope'"
        's exception tree): Maximum allowed dimension exceeded'
    ),
    'ope.simulate.ContextualBandit::n_features': (
        'ope.simulate.ContextualBandit(n_features=10**30) raised ValueError (not from ope'
        "'s exception tree): Maximum allowed dimension exceeded"
    ),
    'ope.simulate.ContextualBandit::n_contexts': (
        'ope.simulate.ContextualBandit(n_contexts=10**30) raised ValueError (not from ope'
        "'s exception tree): Maximum allowed dimension exceeded"
    ),
    'ope.simulate.ContextualBandit::policies': (
        "ope.simulate.ContextualBandit(policies=['\\x00']) raised PolicyError not naming `"
        "policies`: policy names must be Python identifiers (they become column names 'ta"
        "rget__<name>'); got '\\x00'."
    ),
}
