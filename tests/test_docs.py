"""The README and the documentation site stay true: links resolve, the examples run.

The site itself is built by ``make docs`` (``mkdocs build --strict``, in ``.ci/run``): a broken
link between pages or a docstring the reference cannot parse fails that build. Here: the README's
relative links (which GitHub resolves and MkDocs never sees), the hook that writes the API page
of the flat namespace, and the README's Python and command-line examples (slow: they evaluate,
diagnose and render the bundled sample).
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Final

import pytest

REPO: Final = Path(__file__).resolve().parents[1]
README: Final = REPO / "README.md"

#: a Markdown link or image whose target is not a URL: ``[text](path#anchor)``
_LINK: Final = re.compile(r"!?\[[^\]]*\]\((?![a-z][a-z0-9+.-]*:)([^)\s]+)\)")


def _slug(heading: str) -> str:
    """The anchor GitHub and MkDocs give a heading: lower case, no punctuation, - for spaces."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return re.sub(r" ", "-", text)


def _anchors(path: Path) -> set[str]:
    fenced = False
    found = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            found.add(_slug(line.lstrip("#")))
    return found


def _section(text: str, heading: str, fence: str) -> str:
    """The first ``fence`` code block under the ``## heading`` of a Markdown text."""
    start = text.index(f"\n## {heading}\n")
    block = re.search(rf"```{fence}\n(.*?)```", text[start:], re.S)
    assert block is not None, f"no ```{fence} block under '## {heading}'"
    return block.group(1)


def test_readme_links_resolve() -> None:
    text = README.read_text(encoding="utf-8")
    links = _LINK.findall(text)
    assert len(links) >= 20, links  # the README is mostly a map of the documentation
    broken = []
    for link in links:
        target, _, anchor = link.partition("#")
        path = (README.parent / target).resolve() if target else README
        if not path.exists():
            broken.append(f"{link}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            broken.append(f"{link}: no heading with anchor #{anchor} in {target or 'README.md'}")
    assert not broken, "README.md links that do not resolve:\n" + "\n".join(broken)


def test_every_page_is_in_the_site_navigation() -> None:
    nav = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    pages = sorted(p.relative_to(REPO / "docs").as_posix() for p in (REPO / "docs").rglob("*.md"))
    missing = [page for page in pages if f" {page}\n" not in nav]
    assert not missing, f"docs pages not in mkdocs.yml's nav: {missing}"


def test_the_api_page_hook_documents_every_public_name() -> None:
    spec = importlib.util.spec_from_file_location("_docs_hooks", REPO / "docs" / "hooks.py")
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    import ope

    groups = hooks.public_names((REPO / "ope" / "__init__.py").read_text(encoding="utf-8"))
    listed = [name for _, entries in groups for name, _ in entries]
    assert len(listed) == len(set(listed))
    assert set(listed) == set(ope.__all__) - {"__version__"}
    page = hooks.render(groups)
    assert "::: ope.evaluation.evaluate\n" in page and "## Errors and warnings" in page


@pytest.mark.slow
def test_readme_python_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _section(README.read_text(encoding="utf-8"), "Ten lines", "python")
    assert len(code.strip().splitlines()) <= 12, "the README promises about ten lines"
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings(record=True):  # the sample's overlap warnings are the point
        warnings.simplefilter("always")
        exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out
    for candidate in ("popular", "personalized", "greedy", "long_tail", "uniform"):
        assert candidate in out
    assert (tmp_path / "report.html").stat().st_size > 10_000


@pytest.mark.slow
def test_documentation_short_tour_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The home page's tour runs as written, on the bundled sample."""
    text = (REPO / "docs" / "index.md").read_text(encoding="utf-8")
    code = _section(text, "A short tour", "python")
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        exec(compile(code, "docs/index.md", "exec"), {})
    assert "greedy" in capsys.readouterr().out


@pytest.mark.slow
def test_readme_language_model_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's language-model walk-through: its Python writes the responses, its command
    evaluates them, and the verdicts it quotes are those the command prints."""
    text = README.read_text(encoding="utf-8")
    code = _section(text, "Language-model logs", "python")
    command = shlex.split(_section(text, "Language-model logs", "sh").strip())
    quoted = re.search(r"```\n(\d candidate\(s\) on .*?)```", text, re.S)
    assert quoted is not None and command[:2] == ["ope", "sequences"]
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {})
    proc = subprocess.run(
        [sys.executable, "-m", "ope", *command[1:]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    printed = " ".join(proc.stdout.split())
    for line in quoted.group(1).strip().splitlines():  # each quoted fragment is printed
        fragment = " ".join(line.split()).split("(< 500")[0].split("...")[0]
        assert fragment.strip() in printed, fragment
    assert (tmp_path / "sequences.html").stat().st_size > 10_000


@pytest.mark.slow
def test_readme_command_line_example_runs(tmp_path: Path) -> None:
    block = _section(README.read_text(encoding="utf-8"), "The command line", "sh")
    sample = str(REPO / "ope" / "data" / "sample_recommendation.parquet")
    commands = [
        shlex.split(line.split("#")[0])
        for line in block.replace("\\\n", " ").splitlines()
        if line.strip()
    ]
    assert [c[:2] for c in commands] == [
        ["ope", "validate"],
        ["ope", "evaluate"],
        ["ope", "report"],
    ]
    for args in commands:
        args = [sample if a == "ope/data/sample_recommendation.parquet" else a for a in args[1:]]
        proc = subprocess.run(
            [sys.executable, "-m", "ope", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, f"ope {' '.join(args)}: {proc.stderr[-2000:]}"
        if "--json" in args:
            assert json.loads(proc.stdout)["ok"] is True
    assert (tmp_path / "sample-report.html").exists()
