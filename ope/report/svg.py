"""A matplotlib figure as SVG markup that inlines cleanly in an HTML page, byte for byte the
same for the same figure.

matplotlib writes a standalone SVG document: an XML prolog and DOCTYPE (which the HTML parser
does not want inside a page), a metadata block with the date and a URL, and element ids
(``patch_1``, clip paths, markers) that repeat from figure to figure. :func:`inline_svg` removes
the prolog, the metadata and comments, and prefixes every id (and every reference to one) with a
key unique to the figure, so many figures share one page without colliding (an id repeated
within a figure, as identical images in two panels, is numbered). No control, bidi or
XML-illegal character reaches the page (:func:`ope._format.safe_text`). Text is kept as
text (``svg.fonttype = "none"``: small, selectable, printed sharply) and hashed ids use a fixed
salt, so the output does not change between runs.
"""

from __future__ import annotations

import html
import io
import re
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:  # matplotlib is optional (the plot extra)
    from matplotlib.typing import RcKeyType

from ope._format import safe_text

__all__ = ["REPORT_RC", "SVG_METADATA", "inline_svg", "clean_svg"]

#: matplotlib settings of the report's figures: deterministic ids, text as text, a font list
#: that browsers have, and a white background.
REPORT_RC: Final[dict[RcKeyType, Any]] = {
    "svg.hashsalt": "ope-report",
    "svg.fonttype": "none",
    "svg.image_inline": True,
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Liberation Sans", "Arial", "Helvetica"],
    "font.size": 9.0,
    "figure.facecolor": "white",
    "axes.spines.top": False,
    "axes.spines.right": False,
}

#: No date, creator (a URL) or format entries: the SVG carries no metadata block.
SVG_METADATA: Final = {"Date": None, "Creator": None, "Format": None, "Type": None}

_PROLOG: Final = re.compile(r"\A.*?(?=<svg\b)", re.S)
_COMMENT: Final = re.compile(r"<!--.*?-->\s*", re.S)
_METADATA: Final = re.compile(r"<metadata\b.*?</metadata>\s*", re.S)
_TAG: Final = re.compile(r"<[^<>]+>")
_ID: Final = re.compile(r'(\sid=")([^"]+)(")')
_HREF: Final = re.compile(r'((?:xlink:)?href="#)([^"]+)(")')
_URL: Final = re.compile(r"(url\(#)([^)]+)(\))")
_ROOT: Final = re.compile(r"<svg\b")


def clean_svg(svg: str, key: str, *, label: str = "") -> str:
    """matplotlib's SVG document as inline markup: no prolog, metadata or comments; every id
    and reference prefixed with ``key``; ``role="img"`` and an escaped ``aria-label``.

    >>> doc = ('<?xml version="1.0"?>\\n<!DOCTYPE svg>\\n<svg xmlns="http://www.w3.org/2000/svg">'
    ...        '<!-- x --><g id="a"><use xlink:href="#a" clip-path="url(#a)"/></g></svg>')
    >>> clean_svg(doc, "f1-", label="a <b>")
    '<svg role="img" aria-label="a &lt;b&gt;" xmlns="http://www.w3.org/2000/svg"><g id="f1-a"><use xlink:href="#f1-a" clip-path="url(#f1-a)"/></g></svg>'
    >>> clean_svg('<svg><image id="i"/><image id="i"/></svg>', "f2-")
    '<svg role="img" aria-label=""><image id="f2-i"/><image id="f2-i-2"/></svg>'
    """
    svg = _PROLOG.sub("", svg, count=1)
    svg = _METADATA.sub("", _COMMENT.sub("", svg))

    seen: dict[str, int] = {}

    def unique(m: re.Match[str]) -> str:
        # matplotlib names an image by a hash of its pixels: two panels of one figure with the
        # same image get the same id; the second is renamed (a reference finds the first,
        # whose content is the same)
        name = m.group(2)
        seen[name] = seen.get(name, 0) + 1
        suffix = f"-{seen[name]}" if seen[name] > 1 else ""
        return m.group(1) + key + name + suffix + m.group(3)

    def prefix(tag: re.Match[str]) -> str:
        t = tag.group(0)
        t = _ID.sub(unique, t)
        t = _HREF.sub(lambda m: m.group(1) + key + m.group(2) + m.group(3), t)
        return _URL.sub(lambda m: m.group(1) + key + m.group(2) + m.group(3), t)

    svg = _TAG.sub(prefix, svg)
    attrs = f'<svg role="img" aria-label="{html.escape(safe_text(label), quote=True)}"'
    # the labels are escaped before drawing; this keeps any other text (a tick label matplotlib
    # formatted from data) from bringing an XML-illegal or bidi character into the page
    return safe_text(_ROOT.sub(lambda _: attrs, svg, count=1).strip(), keep_newlines=True)


def inline_svg(figure: Any, key: str, *, label: str = "") -> str:
    """``figure`` saved as SVG (:data:`REPORT_RC`, :data:`SVG_METADATA`) and cleaned for
    inlining (:func:`clean_svg`) under the id prefix ``key``."""
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context(REPORT_RC):
        figure.savefig(buffer, format="svg", metadata=SVG_METADATA)
    return clean_svg(buffer.getvalue(), key, label=label)
