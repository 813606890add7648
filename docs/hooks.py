"""MkDocs hook: the API page of the flat ``ope`` namespace, written from ``ope/__init__.py``.

``import ope`` resolves its public names lazily from the ``_PUBLIC`` mapping (name -> defining
module), which a static documentation tool cannot follow. This hook reads that mapping (and the
comment above each group of names, used as the group's heading) from the source without
importing ope, and replaces the marker line of ``docs/api/ope.md`` with one mkdocstrings block
per name, at its defining module. A name added to ``_PUBLIC`` is documented at the next build; a
mapping that can no longer be read fails the build instead of giving an empty page.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INIT = ROOT / "ope" / "__init__.py"
MARKER = "<!-- ope public names -->"
PAGE = "api/ope.md"

_ENTRY = re.compile(r'^\s*"(?P<name>[A-Za-z_][A-Za-z0-9_]*)"\s*:\s*"(?P<module>[\w.]+)",')
_GROUP = re.compile(r"^\s*#\s*(?P<title>.+?)\s*$")


def public_names(source: str) -> list[tuple[str, list[tuple[str, str]]]]:
    """``[(group title, [(name, module), ...]), ...]`` in the order of ``_PUBLIC``."""
    tree = ast.parse(source)
    mapping: dict[str, str] | None = None
    for node in tree.body:
        target = (
            node.target
            if isinstance(node, ast.AnnAssign)
            else (
                node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
            )
        )
        if isinstance(target, ast.Name) and target.id == "_PUBLIC" and node.value is not None:
            mapping = ast.literal_eval(node.value)
            start, end = node.lineno, node.end_lineno
            break
    if not mapping:
        raise RuntimeError(f"{INIT}: no literal `_PUBLIC = {{name: module}}` mapping to document")
    groups: list[tuple[str, list[tuple[str, str]]]] = []
    title = "Public names"
    seen: set[str] = set()
    for line in source.splitlines()[start - 1 : end]:
        group = _GROUP.match(line)
        if group:
            title = group["title"]
            continue
        entry = _ENTRY.match(line)
        if entry and entry["name"] in mapping:
            if not groups or groups[-1][0] != title:
                groups.append((title, []))
            groups[-1][1].append((entry["name"], mapping[entry["name"]]))
            seen.add(entry["name"])
    rest = sorted(set(mapping) - seen)
    if rest:  # entries written in a form the line scan does not read: still documented
        groups.append(("Other public names", [(name, mapping[name]) for name in rest]))
    return groups


def render(groups: list[tuple[str, list[tuple[str, str]]]]) -> str:
    out: list[str] = []
    for title, entries in groups:
        out.append(f"## {title[0].upper()}{title[1:]}\n")
        for name, module in entries:
            out.append(
                f"::: {module}.{name}\n    options:\n      heading_level: 3\n"
                f"      show_root_full_path: false\n"
            )
    return "\n".join(out)


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ANN001 (MkDocs API)
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise RuntimeError(f"docs/{PAGE} lost its marker line {MARKER!r}")
    return markdown.replace(MARKER, render(public_names(INIT.read_text(encoding="utf-8"))))
