"""Minimal valid calls of ope's registered entry points, one module per area.

Each area module (``estimators``, ``policies``, ``learning``, ``data``, ``results``,
``simulate``, ``cli``) holds ``VALID``, which maps each registered name to a factory
``valid(tmp) -> Call`` (for ``cli``: the argv of one successful run), and ``KNOWN_BROKEN``,
which maps ``"<entry>::<argument>"`` to what breaks the hostile-input contract today (each a
bug to fix at its root; the contract test marks it a strict xfail so that the fix asks for its
removal). :func:`valid_calls`, :func:`cli_runs` and :func:`known_broken` merge them; a name
claimed by two areas is an error.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

AREAS: Final = ("estimators", "policies", "learning", "data", "results", "simulate")


def _merged(modules: tuple[str, ...], attr: str) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for area in modules:
        part = getattr(importlib.import_module(f"ope._valid_calls.{area}"), attr)
        twice = sorted(set(merged) & set(part))
        if twice:
            raise LookupError(f"{attr} of {twice} written in two areas (one is {area})")
        merged.update(part)
    return merged


def valid_calls() -> dict[str, Callable[[Path], Any]]:
    """Registered Python name -> factory of its minimal valid call."""
    return _merged(AREAS, "VALID")


def cli_runs() -> dict[str, Callable[[Path], list[str]]]:
    """Subcommand -> factory of the argv of a successful run."""
    return _merged(("cli",), "VALID")


def engines() -> dict[str, Callable[[], str | None]]:
    """Registered name -> why its valid call cannot run here (None when it can), for the
    entries whose valid call starts an engine (their contract cases are slow)."""
    merged: dict[str, Callable[[], str | None]] = {}
    for area in AREAS:  # loop over areas
        merged.update(getattr(importlib.import_module(f"ope._valid_calls.{area}"), "ENGINES", {}))
    return merged


def known_broken() -> dict[str, str]:
    """``"<entry>::<argument>"`` -> the contract violation still open, over every area."""
    return _merged((*AREAS, "cli"), "KNOWN_BROKEN")
