r"""Griffe extension for the API reference: docstrings as Python sees them, in Markdown.

Several docstrings are completed at import time from shared parameter text (a template filled
in by a helper), so the source holds placeholders that a static reader cannot expand. For every
function and class whose source docstring differs from the imported object's ``__doc__``, this
extension takes the imported one: the reference shows what ``help()`` shows.

The docstrings are numpydoc, whose markup is reStructuredText; the site is Markdown. So the few
constructs ope's docstrings use are translated: ``.. math::`` blocks and ``:math:`` roles become
``\[ \]`` and ``\( \)`` (rendered by MathJax through pymdownx.arithmatex), cross-reference
roles (``:class:`ope.IPS```) become inline code, and ``.. [1]`` references become list items.
"""

from __future__ import annotations

import importlib
import inspect
import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|mod|data|exc|obj|const|ref|term):`~?([^`]+)`")
_MATH_ROLE = re.compile(r":math:`([^`]+)`")
_MATH_BLOCK = re.compile(r"^(?P<indent>[ ]*)\.\. math::[ ]*(?P<first>.*)$")
_CITATION = re.compile(r"^(?P<indent>[ ]*)\.\. (?P<label>\[[^\]]+\])", re.M)


def markdown(text: str) -> str:
    """Translate the reStructuredText constructs of ope's docstrings into Markdown."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        block = _MATH_BLOCK.match(lines[i])
        if block is None:
            out.append(lines[i])
            i += 1
            continue
        indent = len(block["indent"])
        body = [block["first"].strip()] if block["first"].strip() else []
        i += 1
        while i < len(lines) and (
            not lines[i].strip()
            and not body
            or lines[i].strip()
            and len(lines[i]) - len(lines[i].lstrip()) > indent
        ):
            if lines[i].strip():
                body.append(lines[i].strip())
            i += 1
        pad = block["indent"]
        out += ["", f"{pad}\\[", *(pad + line for line in body), f"{pad}\\]", ""]
    text = "\n".join(out)
    text = _MATH_ROLE.sub(lambda m: "\\(" + m.group(1) + "\\)", text)
    text = _ROLE.sub(r"`\1`", text)
    return _CITATION.sub(r"\g<indent>- \g<label>", text)


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
        obj.docstring.value = markdown(obj.docstring.value)
