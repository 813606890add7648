"""The package's structure, checked: one home per concept, layers that do not loop.

These tests read ope's source (they import nothing from it) and fail on

- an import of another module's private name (``from ope.x import _y``), including imports inside
  functions: what several modules share gets a public name;
- an import of a name outside the target module's ``__all__`` (unless the target is an
  underscore module, where shared internals live);
- an import cycle between ope modules, counting imports inside functions (a package's
  ``__init__`` importing its own submodules, and a submodule importing its package, are fine);
- a second definition of a named threshold of ``ope._thresholds`` or of a validator of
  ``ope._validation`` anywhere else;
- a bare ``raise ValueError`` / ``raise TypeError``: every error ope raises on purpose comes from
  the exception tree (``ope.exceptions``), so callers and the CLI can tell arguments from data;
- a comment, docstring or test (in ``ope``, ``tests`` or ``benchmarks``) that points at an
  issue number or at a document outside the repository instead of saying the fact itself: the
  design lives in ``docs/``, the history in the CHANGELOG and the commits.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "ope"


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.with_suffix("").relative_to(PACKAGE.parent).parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()
TREES = {name: ast.parse(path.read_text(encoding="utf-8")) for name, path in MODULES.items()}


def _resolve(module: str, node: ast.ImportFrom) -> str | None:
    if not node.level:
        return node.module
    base = module.split(".")
    if MODULES[module].name != "__init__.py":
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module: str) -> Iterator[tuple[str, str | None, int]]:
    """(imported module, imported name or None, line) for every ope import of ``module``."""
    for node in ast.walk(TREES[module]):
        if isinstance(node, ast.ImportFrom):
            target = _resolve(module, node)
            if target and (target == "ope" or target.startswith("ope.")):
                for alias in node.names:
                    yield target, alias.name, node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "ope" or alias.name.startswith("ope."):
                    yield alias.name, None, node.lineno


def _related(a: str, b: str) -> bool:
    """A package and its own submodules may import each other."""
    return a.startswith(b + ".") or b.startswith(a + ".")


def test_the_scan_sees_the_package():
    assert {"ope", "ope._validation", "ope._thresholds", "ope.moments", "ope.results"} <= set(
        MODULES
    )


def test_no_module_imports_another_modules_private_names():
    offending = []
    for module in MODULES:
        for target, name, line in _imports(module):
            if name is None or not name.startswith("_") or name.startswith("__"):
                continue
            if f"{target}.{name}" in MODULES:  # a private submodule, imported as a module
                continue
            if target != module:
                offending.append(
                    f"{MODULES[module].relative_to(PACKAGE.parent)}:{line} imports "
                    f"{name} from {target}"
                )
    assert not offending, "cross-module private imports:\n" + "\n".join(offending)


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module in MODULES:
        for target, name, _ in _imports(module):
            dep = f"{target}.{name}" if name and f"{target}.{name}" in MODULES else target
            if dep in MODULES and dep != module and not _related(module, dep):
                graph[module].add(dep)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    comp.append(member)
                    if member == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_cycle_finder_finds_a_planted_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    cycles = _cycles(_graph())
    assert not cycles, f"import cycles (imports inside functions count): {cycles}"


def _top_level_names(module: str) -> set[str]:
    names = set()
    for node in TREES[module].body:
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        for t in targets:
            if isinstance(t, ast.Name):
                names.add(t.id)
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
    return names


def _public_all(module: str) -> list[str]:
    for node in TREES[module].body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return list(ast.literal_eval(node.value))
    raise AssertionError(f"{module} has no __all__")


@pytest.mark.parametrize("home", ["ope._thresholds", "ope._validation"])
def test_thresholds_and_validators_have_one_home(home):
    defined_here = set(_public_all(home))
    # private spellings of the same checker count as copies too (``_check_max_weight``)
    watched = defined_here | {f"_{name}" for name in defined_here}
    copies = []
    for module in MODULES:
        if module == home:
            continue
        for name in sorted(_top_level_names(module) & watched):
            copies.append(f"{module}.{name}")
    assert not copies, f"defined again outside {home}: {copies}"


def test_errors_come_from_the_exception_tree():
    bare = []
    for module, tree in TREES.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Raise) or node.exc is None:
                continue
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(exc, ast.Name) and exc.id in {"ValueError", "TypeError"}:
                bare.append(f"{MODULES[module].relative_to(PACKAGE.parent)}:{node.lineno}")
    assert not bare, (
        "raise ParameterError (bad arguments) or a data error from ope.exceptions instead of a "
        "bare ValueError/TypeError at:\n" + "\n".join(bare)
    )


def _literal_all(module: str) -> set[str] | None:
    for node in TREES[module].body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            try:
                return set(ast.literal_eval(node.value))
            except ValueError:
                return None
    return None


def _public_all(module: str) -> set[str]:
    """A module's ``__all__``: read from the source, or (when it is computed, as ``ope``'s is
    from its table of lazy names) from the imported module."""
    found = _literal_all(module)
    if found is None:
        import importlib

        found = set(importlib.import_module(module).__all__)
    return found


def test_modules_import_only_the_public_names_of_public_modules():
    """What one module takes from another is in that module's ``__all__``, unless the other is
    an underscore module (``ope._validation``, ``ope.policies._core``): shared internals live
    there, and everything else another module needs is public in its home."""
    offending = []
    for module in MODULES:
        for target, name, line in _imports(module):
            if (
                name is None
                or target == module
                or target not in MODULES
                or f"{target}.{name}" in MODULES
                or name.startswith("__")
            ):
                continue
            if any(part.startswith("_") for part in target.split(".")):
                continue
            if name not in _public_all(target):
                offending.append(
                    f"{MODULES[module].relative_to(PACKAGE.parent)}:{line} imports "
                    f"{name}, not in {target}.__all__"
                )
    assert not offending, "imports of names outside __all__:\n" + "\n".join(offending)


def test_no_function_is_rebound_into_another_modules_globals():
    # building a function with another module's globals (a call of types.FunctionType) or
    # reading a function's __globals__ couples modules behind the import graph's back
    found = []
    for module, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            reads_globals = isinstance(node, ast.Attribute) and node.attr == "__globals__"
            builds = (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "FunctionType"
            )
            if reads_globals or builds:
                found.append(f"{module}:{node.lineno}")
    assert not found, found


# ---------------------------------------------------------------------------------------------
# the repository explains itself
# ---------------------------------------------------------------------------------------------
ROOT = PACKAGE.parent
#: Where references may not point outside the repository.
SELF_EXPLAINED = ("ope", "tests", "benchmarks")
#: Pointers at an issue number or at notes kept outside the repository, built from pieces so
#: that this file does not match itself.
_ISSUE = "iss" + "ue"
OUTSIDE_REFERENCES = re.compile(
    rf"\b{_ISSUE}s? ?#? ?[0-9]"
    rf"|\b{_ISSUE} #"
    r"|\b(?-i:DESIGN|STYLE|LAYOUT|PREAMBLE)"
    r"\.md\b"
    r"|(?<![\w/.])notes"
    r"/"
    r"|(?<![\w/])theory"
    r"\.md\b",
    re.IGNORECASE,
)


def _outside_references(text: str) -> list[tuple[int, str]]:
    """(line number, line) of each line of ``text`` pointing at an issue or an outside note."""
    return [
        (i, line.strip())
        for i, line in enumerate(text.splitlines(), 1)
        if OUTSIDE_REFERENCES.search(line)
    ]


def test_the_reference_finder_finds_planted_references():
    planted = [
        f"# see {_ISSUE} 10, item 4",
        f"(per {_ISSUE.title()} #12)",
        # built with +, so that neither this file nor the formatter joins them into a match
        "STYLE" + ".md §17",
        "DESIGN" + ".md",
        "notes" + "/theory.md 3.5",
        "theory" + ".md §3.8",
    ]
    for line in planted:
        assert _outside_references(line) == [(1, line)], line
    fine = [
        "the clip level (docs/guide/estimators.md)",
        "benchmarks/pdrop.md",
        "t" + _ISSUE + " 10",
        "an issue with the data",
        "README.md",
        "docs/design.md",
    ]
    for line in fine:
        assert _outside_references(line) == [], line


def test_no_comment_docstring_or_test_points_outside_the_repository():
    """Each comment, docstring and test says the fact itself (or points at ``docs/``): never
    at an issue number or at design notes kept elsewhere, which a reader of the repository
    cannot open."""
    offending = []
    for top in SELF_EXPLAINED:
        for path in sorted((ROOT / top).rglob("*")):
            if path.suffix not in (".py", ".md", ".txt", ".toml", ".cfg") or not path.is_file():
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            offending += [
                f"{path.relative_to(ROOT)}:{i}: {line}" for i, line in _outside_references(text)
            ]
    assert not offending, "references outside the repository:\n" + "\n".join(offending)


def _docstring_writes(tree: ast.AST) -> list[int]:
    """Lines that assign a ``__doc__`` (``f.__doc__ = ...``, ``f.__doc__ += ...``)."""
    lines = []
    for node in ast.walk(tree):
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, (ast.AugAssign, ast.AnnAssign))
            else []
        )
        lines += [
            node.lineno for t in targets if isinstance(t, ast.Attribute) and t.attr == "__doc__"
        ]
    return lines


def test_docstring_writer_finds_a_planted_write():
    assert _docstring_writes(ast.parse("def f(): pass\nf.__doc__ = 'x' % {}\n")) == [2]


def test_one_helper_fills_docstrings_from_templates():
    """Shared docstring text goes in through ``ope._docstrings.fill_doc`` only (``<key>``
    placeholders), not through a module's own ``__doc__`` substitution."""
    offending = [
        f"{MODULES[m].relative_to(PACKAGE.parent)}:{line}"
        for m, tree in TREES.items()
        if m != "ope._docstrings"
        for line in _docstring_writes(tree)
    ]
    assert not offending, "docstrings written outside ope._docstrings:\n" + "\n".join(offending)
