"""Griffe extension for the API reference: docstrings as Python sees them, roles as code.

Several docstrings are completed at import time from shared parameter text (a template filled
in by a helper), so the source holds placeholders that a static reader cannot expand. For every
function and class whose source docstring differs from the imported object's ``__doc__``, this
extension takes the imported one: the reference shows what ``help()`` shows. It also renders
Sphinx roles (``:class:`ope.IPS```) as inline code, since the site is Markdown.
"""

from __future__ import annotations

import importlib
import inspect
import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|mod|data|exc|obj|const|ref|term):`~?([^`]+)`")


def _runtime_object(path: str) -> Any:
    """The imported object at a dotted ``path`` (module first, then attributes), or None."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for name in parts[cut:]:
                obj = getattr(obj, name)
        except AttributeError:
            return None
        return obj
    return None


class RuntimeDocstrings(griffe.Extension):
    """Replace templated source docstrings by the imported ones; Sphinx roles become code."""

    def on_object(self, *, obj: griffe.Object, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if obj.docstring is None or obj.is_alias:
            return
        if obj.kind in (griffe.Kind.FUNCTION, griffe.Kind.CLASS):
            runtime = _runtime_object(obj.path)
            doc = getattr(runtime, "__doc__", None) if runtime is not None else None
            if isinstance(doc, str) and inspect.cleandoc(doc) != obj.docstring.value:
                obj.docstring.value = inspect.cleandoc(doc)
        obj.docstring.value = _ROLE.sub(r"`\1`", obj.docstring.value)
