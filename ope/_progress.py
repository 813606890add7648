"""Progress bars for long steps: one home, on stderr, off unless stderr is a terminal.

Every step that can take more than a few seconds (scanning, policy-table joins,
cross-fitting, bootstrap, learner fits, Dask tasks) wraps its loop in :func:`progress`.
Bars go to stderr only, so they never mix into ``--json`` output on stdout; they are
off when stderr is not a terminal, inside :func:`quiet`, or with ``OPE_PROGRESS=0``
(``OPE_PROGRESS=1`` forces them on, e.g. for a test on a pseudo-terminal).

Examples
--------
>>> from ope._progress import progress
>>> sum(progress(range(3), desc="demo"))   # a doctest's stderr is not a terminal: no bar
3
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

__all__ = ["enabled", "progress", "quiet", "set_quiet"]

T = TypeVar("T")

_QUIET = False


def set_quiet(value: bool) -> None:
    """Turn every progress bar off (``True``) or back to automatic (``False``)."""
    global _QUIET
    _QUIET = bool(value)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """A block in which no progress bar is shown."""
    global _QUIET
    before = _QUIET
    _QUIET = True
    try:
        yield
    finally:
        _QUIET = before


def enabled() -> bool:
    """Whether a bar would be drawn now: not quiet, and stderr a terminal (or forced on)."""
    if _QUIET:
        return False
    forced = os.environ.get("OPE_PROGRESS", "").strip()
    if forced == "0":
        return False
    if forced == "1":
        return True
    stream = sys.stderr
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


class _Silent:
    """The disabled bar: the same calls as tqdm's, doing nothing."""

    def __init__(self, iterable: Iterable[Any] | None) -> None:
        self._iterable = iterable

    def __iter__(self) -> Iterator[Any]:
        return iter(self._iterable if self._iterable is not None else ())

    def __enter__(self) -> _Silent:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def update(self, n: float = 1) -> None:
        return None

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        return None

    def close(self) -> None:
        return None


def progress(
    iterable: Iterable[T] | None = None,
    *,
    desc: str,
    total: float | None = None,
    unit: str = "it",
    leave: bool = False,
) -> Any:
    """A tqdm bar on stderr around ``iterable`` (or a manual one, ``update(n)``), or a no-op.

    Use as ``for x in progress(xs, desc="bootstrap", total=B): ...`` or
    ``with progress(desc="scan", total=n_rows, unit="row") as bar: bar.update(k)``.
    """
    if not enabled():
        return _Silent(iterable)
    from tqdm.auto import tqdm  # deferred: only a drawn bar pays for the import

    from ope._format import safe_text  # a file name in ``desc`` is shown, never obeyed

    return tqdm(
        iterable,
        desc=safe_text(desc),
        total=total,
        unit=unit,
        leave=leave,
        file=sys.stderr,
        dynamic_ncols=True,
        mininterval=0.5,
    )
