"""Docstrings with shared text: one helper fills ``<key>`` placeholders, written once.

Several public functions document the same parameters, errors or returns (the interval
methods, the return recursions, the diagnostics entry points, the estimators' ``estimate``).
The shared text lives in one constant of the module that owns it; each docstring holds a
``<key>`` placeholder where it goes, and :func:`fill_doc` puts it there when the function is
defined, so ``help()``, the API reference and the doctests see the whole text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

__all__ = ["fill_doc"]

_F = TypeVar("_F", bound=Callable[..., Any])


def fill_doc(parts: Mapping[str, str]) -> Callable[[_F], _F]:
    """A decorator that replaces each ``<key>`` of a docstring by ``parts[key]``.

    The placeholder stands where the text starts: the text's first line continues the
    placeholder's line, so write the shared text with its later lines indented as they must
    appear in the docstring (e.g. a numpydoc parameter's description under the parameter). A
    docstring that is None (``python -OO``) is left alone. A docstring may use some of the
    parts only (a family's shared table, of which each function takes its own).

    Parameters
    ----------
    parts : mapping of str to str
        The shared text of each placeholder key.

    Returns
    -------
    callable
        A decorator returning the function it is given, with its docstring filled.

    Examples
    --------
    >>> from ope._docstrings import fill_doc
    >>> @fill_doc({"x": "filled"})
    ... def f():
    ...     "Doc: <x>."
    >>> f.__doc__
    'Doc: filled.'
    >>> def g():
    ...     "Parameters: <y>."
    >>> fill_doc({"y": "g's own"})(g).__doc__
    "Parameters: g's own."
    """

    def fill(function: _F) -> _F:
        doc = function.__doc__
        if doc is None:
            return function
        for key, text in parts.items():
            doc = doc.replace(f"<{key}>", text)
        function.__doc__ = doc
        return function

    return fill
