"""The result contract: every result object of ope speaks one vocabulary and renders one way.

A result (:class:`ope.Estimate`, :class:`ope.Evaluation`, :class:`ope.Diagnostics`,
:class:`ope.Certificate`, and those to come) has typed fields and

- ``to_dict()``: a JSON-ready dict with stable keys that never depend on arguments;
- ``summary()``: plain text (a title, ``name: value`` lines, an optional table, numbered notes);
- ``_repr_html_()``: the same parts as escaped HTML, for notebooks.

The shared vocabulary: ``value``, ``n``, ``ci_low``, ``ci_high``, ``ci_method``,
``confidence_level``, ``notes`` (a tuple of str); ``max_weight`` is only ever a clip level and
``weight_bound`` an a priori bound on the weights. A subclass supplies :meth:`Result._parts`;
the text and HTML renderers here are the only ones, so every user-provided string (policy names,
column values) is escaped in one place.
"""

from __future__ import annotations

import html
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Result", "ResultParts", "format_value", "render_html", "render_text"]


def format_value(x: Any, digits: int = 4) -> str:
    """A number with ``digits`` significant digits (``nan`` for missing); text as it is."""
    if x is None:
        return ""
    if isinstance(x, (bool,)):
        return str(x)
    if isinstance(x, numbers.Integral):
        return f"{int(x):,}" if abs(int(x)) >= 10_000 else str(int(x))
    if isinstance(x, numbers.Real):
        v = float(x)
        if math.isnan(v):
            return "nan"
        return f"{v:.{digits}g}"
    if isinstance(x, (tuple, list)):
        return "(" + ", ".join(format_value(v, digits) for v in x) + ")"
    return str(x)


@dataclass(frozen=True)
class ResultParts:
    """What a result shows: a title, labelled fields, an optional table and numbered notes."""

    title: str
    fields: Sequence[tuple[str, Any]] = ()
    table: Any = None  # a pandas.DataFrame or None
    notes: Sequence[str] = field(default_factory=tuple)


def render_text(parts: ResultParts, *, digits: int = 4) -> str:
    """Plain text: the title, aligned ``name: value`` lines, the table, then ``[i] note``."""
    lines = [parts.title]
    if parts.fields:
        width = max(len(k) for k, _ in parts.fields)
        lines += [f"  {k + ':':<{width + 1}} {format_value(v, digits)}" for k, v in parts.fields]
    if parts.table is not None and len(parts.table):
        lines.append("")
        lines.append(
            parts.table.to_string(
                index=False, float_format=lambda v: format_value(float(v), digits)
            )
        )
    if parts.notes:
        lines.append("")
        lines.append("Notes:")
        lines += [f"  [{i}] {note}" for i, note in enumerate(parts.notes, 1)]
    return "\n".join(lines)


def render_html(parts: ResultParts, *, digits: int = 6, css_class: str = "ope-result") -> str:
    """Escaped HTML of the same parts (no script, no external resource)."""
    esc = html.escape
    out = [f"<div class='{esc(css_class)}'><p><strong>{esc(parts.title)}</strong></p>"]
    if parts.fields:
        rows = "".join(
            f"<tr><th style='text-align:left'>{esc(str(k))}</th>"
            f"<td>{esc(format_value(v, digits))}</td></tr>"
            for k, v in parts.fields
        )
        out.append(f"<table>{rows}</table>")
    table = parts.table
    if table is not None and len(table):
        head = "".join(f"<th>{esc(str(c))}</th>" for c in table.columns)
        body = "".join(
            "<tr>" + "".join(f"<td>{esc(format_value(v, digits))}</td>" for v in row) + "</tr>"
            for row in table.itertuples(index=False, name=None)
        )
        out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
    if parts.notes:
        items = "".join(f"<li>{esc(note)}</li>" for note in parts.notes)
        out.append(f"<ol class='ope-notes'>{items}</ol>")
    out.append("</div>")
    return "".join(out)


class Result:
    """Base of ope's result objects: ``summary()`` and ``_repr_html_()`` from :meth:`_parts`.

    Subclasses implement ``to_dict()`` and ``_parts()``; they may override ``summary()`` with a
    richer text layout, but never ``_repr_html_``.
    """

    def to_dict(self) -> dict[str, Any]:  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    def _parts(self) -> ResultParts:  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    def summary(self) -> str:
        """The result as plain text (title, fields, table, numbered notes)."""
        return render_text(self._parts())

    def _repr_html_(self) -> str:
        return render_html(self._parts())
