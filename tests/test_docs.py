"""The README and the documentation site stay true: links resolve, the examples run.

The site itself is built by ``make docs`` (``mkdocs build --strict``, in ``.ci/run``): a broken
link between pages or a docstring the reference cannot parse fails that build. Here: the README's
relative links (which GitHub resolves and MkDocs never sees), the hook that writes the API page
of the flat namespace, the README's Python and command-line examples, and every ```python block
of the user guide, run page by page in order (slow: they evaluate, diagnose and render the
bundled sample). A guide block that cannot run here (it needs a Spark session, say) carries
``<!-- docs-test: skip (reason) -->`` on the line just before its fence.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Final, NamedTuple

import pytest

REPO: Final = Path(__file__).resolve().parents[1]
README: Final = REPO / "README.md"
GUIDE: Final = REPO / "docs" / "guide"
GUIDE_PAGES: Final = sorted(p.name for p in GUIDE.glob("*.md"))
#: seconds one guide page's blocks may take, all together, in one fresh interpreter
PAGE_TIMEOUT: Final = 300

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


#: the comment that exempts the ```python block right after it: ``<!-- docs-test: skip (why) -->``
_SKIP: Final = re.compile(r"<!--\s*docs-test:\s*skip\s*\((?P<reason>[^)]+)\)\s*-->")

#: marks the runner's own lines among what the examples print
_EVENT: Final = "@@docs-test "

#: runs the blocks of a JSON list in order in one namespace; prints one event line per block
_BLOCK_RUNNER: Final = f"""
import json, sys, time, traceback
blocks = json.load(open(sys.argv[1], encoding="utf-8"))
namespace = {{"__name__": "__main__"}}
def event(**what):
    print({_EVENT!r} + json.dumps(what), flush=True)
for block in blocks:
    event(start=block["line"])
    started = time.perf_counter()
    try:
        exec(compile(block["code"], block["page"] + ":" + str(block["line"]), "exec"), namespace)
    except BaseException:
        event(failed=block["line"], error=traceback.format_exc(limit=-4))
        sys.exit(1)
    event(done=block["line"], seconds=round(time.perf_counter() - started, 2))
"""


class _Block(NamedTuple):
    line: int  # of the opening fence, 1-based
    code: str
    skip: str | None  # the reason of a docs-test: skip comment, else None


def _python_blocks(text: str) -> list[_Block]:
    """The fenced ```python blocks of a Markdown text, in order."""
    lines = text.splitlines()
    blocks = []
    i = 0
    while i < len(lines):
        fence = re.match(r"^(\s*)```python\s*$", lines[i])
        if fence is None:
            if lines[i].lstrip().startswith("```"):  # skip another language's block whole
                i += 1
                while i < len(lines) and not lines[i].lstrip().startswith("```"):
                    i += 1
            i += 1
            continue
        indent = len(fence.group(1))
        start = i
        i += 1
        body = []
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][indent:])
            i += 1
        skip = _SKIP.search(lines[start - 1]) if start else None
        blocks.append(_Block(start + 1, "\n".join(body) + "\n", skip and skip["reason"]))
        i += 1
    return blocks


def test_guide_skip_comments_sit_on_a_python_fence() -> None:
    """A ``docs-test: skip`` comment exempts only the block right after it, and says why."""
    misplaced = []
    for name in GUIDE_PAGES:
        lines = (GUIDE / name).read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, 1):
            if "docs-test:" not in line:
                continue
            following = lines[number] if number < len(lines) else ""
            if not _SKIP.search(line) or not following.lstrip().startswith("```python"):
                misplaced.append(f"{name}:{number}: {line.strip()}")
    assert not misplaced, (
        "docs-test comments not of the form '<!-- docs-test: skip (reason) -->' on the line just"
        " before a ```python fence:\n" + "\n".join(misplaced)
    )


def test_python_blocks_are_found_in_order() -> None:
    text = (
        "# t\n\n```python\nx = 1\n```\n\n```sh\nope evaluate\n```\n"
        "<!-- docs-test: skip (needs pyspark) -->\n```python\nimport pyspark\n```\n"
        "- item:\n\n    ```python\n    y = x\n    ```\n"
    )
    assert _python_blocks(text) == [
        _Block(3, "x = 1\n", None),
        _Block(11, "import pyspark\n", "needs pyspark"),
        _Block(16, "y = x\n", None),
    ]


def _events(out: str) -> list[dict]:
    """The runner's event lines of a page run's output, in order."""
    return [json.loads(line[len(_EVENT) :]) for line in out.splitlines() if line.startswith(_EVENT)]


#: the guide pages with ```python blocks (the others show commands or formats only)
_CODE_PAGES: Final = [
    name for name in GUIDE_PAGES if _python_blocks((GUIDE / name).read_text(encoding="utf-8"))
]


@pytest.mark.slow
@pytest.mark.parametrize("page", _CODE_PAGES)
def test_guide_python_blocks_run_in_order(page: str, tmp_path: Path) -> None:
    """Each guide page's ```python blocks run, in order, in one fresh interpreter started in an
    empty directory: a page defines every name and file its examples use (a block marked
    ``docs-test: skip`` is left out, its reason in the page)."""
    blocks = _python_blocks((GUIDE / page).read_text(encoding="utf-8"))
    runnable = [{"page": page, "line": b.line, "code": b.code} for b in blocks if not b.skip]
    first_lines = {b.line: b.code.strip().splitlines()[0] for b in blocks if b.code.strip()}
    (tmp_path / "blocks.json").write_text(json.dumps(runnable), encoding="utf-8")
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _BLOCK_RUNNER, str(tmp_path / "blocks.json")],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=PAGE_TIMEOUT,
            env={**os.environ, "MPLBACKEND": "Agg"},
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        started = [e["start"] for e in _events(out) if "start" in e]
        at = started[-1] if started else blocks[0].line
        pytest.fail(
            f"docs/guide/{page}: the blocks took more than {PAGE_TIMEOUT} s; still running the"
            f" block at line {at} ({first_lines.get(at, '')!r})"
        )
    events = _events(proc.stdout)
    failed = [e for e in events if "failed" in e]
    if failed or proc.returncode != 0:
        at = failed[0]["failed"] if failed else None
        error = failed[0]["error"] if failed else proc.stderr[-3000:]
        where = f"the block at line {at} ({first_lines.get(at, '')!r})" if at else "the runner"
        pytest.fail(f"docs/guide/{page}: {where} failed:\n{error}", pytrace=False)
    done = {e["done"] for e in events if "done" in e}
    assert done == {b["line"] for b in runnable}, (done, runnable)


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
