"""The report's size bounds: at most ``max_segments`` segments per segment chart, heatmap or table
(the rest in one summary line) and at most ``max_candidates`` candidates drawn in full, the
most telling ones; the others summarized in a table, with a note saying how many and how to
draw them all. No wall-clock asserts: the figures and their panels are counted."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ope
from ope.cli import EXIT_OK, EXIT_USAGE, main
from ope.report import render_report, write_report
from ope.report.views import (
    BETTER,
    MAX_FIGURE_CANDIDATES,
    MAX_REPORT_SEGMENTS,
    UNCLEAR,
    CandidateVerdict,
    figure_candidates,
    ranked_candidates,
    top_segments,
)

pytest.importorskip("matplotlib")
pytestmark = pytest.mark.filterwarnings("ignore::ope.OverlapWarning")  # small segments

#: A candidate name that must come out escaped wherever the page shows it.
HOSTILE = '<i>&"'


def _name(j: int, hostile: bool = False) -> str:
    return f"{HOSTILE}c{j:02d}" if hostile else f"c{j:02d}"


def _table(rows: int, candidates: int, segments: int, *, hostile: bool = False) -> pa.Table:
    rng = np.random.default_rng(7)
    action = rng.integers(0, 4, rows)
    cols: dict[str, object] = {
        "event_id": np.arange(rows),
        "action": action,
        "propensity": np.full(rows, 0.25),
        "reward": (rng.random(rows) < 0.2 + 0.1 * (action == 1)).astype(float),
    }
    for j in range(candidates):
        share = 0.3 + 0.6 * j / max(candidates - 1, 1)
        cols[f"target__{_name(j, hostile)}"] = np.where(action == j % 4, share, (1 - share) / 3)
    if segments:
        # segment k holds 2 (k + 1) rows: s000 the fewest, no two segments the same size
        labels = np.repeat(np.arange(segments), 2 * np.arange(1, segments + 1))
        assert len(labels) == rows
        cols["seg"] = pa.array([f"s{k:03d}" for k in rng.permutation(labels)])
    return pa.table(cols)


def _results(candidates: int, segments: int = 0, *, hostile: bool = False):
    rows = segments * (segments + 1) if segments else 2_000
    table = _table(rows, candidates, segments, hostile=hostile)
    by = ["seg"] if segments else None
    ev = ope.evaluate(table, estimators=("ips",), reward_range=(0, 1), by=by)
    d = ope.diagnose(table, reward_range=(0, 1), by=by)
    return ev, d


def _panels(page: str, what: str) -> list[str]:
    """The candidates of the panel figure ``what`` (``importance weights`` or ``coverage
    heatmaps``), from its label (escaped in the page)."""
    labels = re.findall(rf'aria-label="{what}, one panel per candidate: ([^"]*)"', page)
    assert len(labels) <= 1
    return html.unescape(labels[0]).split(", ") if labels else []


def _best_by_lower_bound(ev, k: int) -> set[str]:
    """The k candidates with the highest lower end of their difference with logging, read
    from the evaluation itself (not from the report's ranking)."""
    low = ev.comparisons(ci="normal").groupby("policy")["ci_low"].min()
    return set(low.sort_values(ascending=False, kind="stable").index[:k])


# --------------------------------------------------------------------------------------------
# the selections
# --------------------------------------------------------------------------------------------
def test_top_segments_keeps_the_largest_and_summarizes_the_rest() -> None:
    shown, line = top_segments(["a", "b", "c", "d", "b"], [5, 50, 30, 15, 40], limit=2)
    assert shown == ["b", "c"]  # in their order of appearance
    assert line == "2 more segments, 20% of rows: d, a"
    assert top_segments(list("abc"), [1, 1, 1], limit=3) == (["a", "b", "c"], "")
    assert top_segments(list("abcd"), [1, 2, 3, 4], limit=None) == (list("abcd"), "")
    names = [f"s{i}" for i in range(15)]
    _, line = top_segments(names, [100] + [1] * 14, limit=1)
    assert line.endswith(": s1, s2, s3, s4, s5, s6, s7, s8, s9, s10 and 4 more")


def test_candidates_are_ranked_by_the_lower_bound_of_their_gain() -> None:
    def v(name: str, low: float, high: float, answer: str = UNCLEAR) -> CandidateVerdict:
        return CandidateVerdict(name, answer, low, high, "ips", 0.0, 0.0)

    verdicts = [
        v("a", -0.2, 0.1),
        v("b", float("nan"), float("nan")),
        v("c", 0.05, 0.2, BETTER),
        v("d", -0.2, 0.3),
    ]
    assert ranked_candidates(verdicts) == ["c", "d", "a", "b"]
    ranked = ranked_candidates(verdicts)
    # the drawn ones keep the given order; the summarized ones too
    assert figure_candidates(list("abcd"), limit=2, ranked=ranked) == (["c", "d"], ["a", "b"])
    assert figure_candidates(list("abcd"), limit=None, ranked=ranked) == (list("abcd"), [])
    assert figure_candidates(["a", "b"], limit=2) == (["a", "b"], [])


# --------------------------------------------------------------------------------------------
# the caps on a page
# --------------------------------------------------------------------------------------------
def test_many_segments_are_capped_with_one_summary_line() -> None:
    segments = MAX_REPORT_SEGMENTS + 35
    ev, d = _results(2, segments)
    page = render_report(evaluation=ev, diagnostics=d)
    summaries = re.findall(
        r'<p class="note more">seg: (\d+) more segments, ([^<]*?) of rows: ', page
    )
    # the estimates' chart and the overlap table each summarize the 35 smallest segments
    assert len(summaries) == 2 and {k for k, _ in summaries} == {"35"}
    shown = set(re.findall(r"<td>seg=(s\d{3})</td>", page))  # the per-segment estimates
    assert len(shown) == MAX_REPORT_SEGMENTS
    assert shown == {f"s{k:03d}" for k in range(segments - MAX_REPORT_SEGMENTS, segments)}
    # forest, differences (with logging, between), split, weight panels, segments, heatmaps
    assert page.count("<svg") == 7
    # raised: every segment shown, no summary line
    page = render_report(evaluation=ev, diagnostics=d, max_segments=None)
    assert len(set(re.findall(r"<td>seg=(s\d{3})</td>", page))) == segments
    assert "more segments" not in page


def test_the_cap_is_applied_and_announced_with_the_rest_in_a_table() -> None:
    candidates = MAX_FIGURE_CANDIDATES + 3
    ev, d = _results(candidates, hostile=True)
    page = render_report(evaluation=ev, diagnostics=d)
    names = [_name(j, True) for j in range(candidates)]
    drawn = _best_by_lower_bound(ev, MAX_FIGURE_CANDIDATES)
    assert set(_panels(page, "importance weights")) == drawn
    assert set(_panels(page, "coverage heatmaps")) == drawn
    assert page.count("<svg") == 6  # forest, differences x2, split, weights, heatmaps
    # the visible note: how many are drawn, how many summarized, how to draw them all
    note = re.search(r'<p class="note cap" id="cap">(.*?)</p>', page, flags=re.S)
    assert note is not None
    text = html.unescape(re.sub(r"<[^>]+>", "", note.group(1)))
    assert text.startswith(f"{MAX_FIGURE_CANDIDATES} candidates of {candidates} are drawn in full")
    assert "The other 3 candidates are summarized" in text
    assert "max_candidates=None" in text and "--max-candidates all" in text
    # the summary table lists exactly the others, escaped
    table = page.partition('<h3 id="summarized">')[2].partition("</table>")[0]
    listed = [html.unescape(x) for x in re.findall(r"<td><strong>(.*?)</strong></td>", table)]
    rest = [n for n in names if n not in drawn]
    assert listed == rest
    assert HOSTILE not in page  # every name escaped: in text, tables and figure labels
    escaped = html.escape(HOSTILE, quote=True)
    for name in names:  # every candidate is still in the tables of estimates
        assert f"<td>{escaped}{name[len(HOSTILE) :]}</td>" in page


def test_the_cap_is_raised_and_lowered_from_the_api(tmp_path: Path) -> None:
    candidates = MAX_FIGURE_CANDIDATES + 3
    ev, d = _results(candidates)
    names = [_name(j) for j in range(candidates)]
    page = render_report(evaluation=ev, diagnostics=d, max_candidates=None)
    assert _panels(page, "importance weights") == names
    assert _panels(page, "coverage heatmaps") == names
    assert 'id="cap"' not in page and 'id="summarized"' not in page
    path = write_report(tmp_path / "r.html", evaluation=ev, diagnostics=d, max_candidates=2)
    page = path.read_text(encoding="utf-8")
    assert set(_panels(page, "importance weights")) == _best_by_lower_bound(ev, 2)
    assert "2 candidates of 15 are drawn in full" in page
    # diagnostics alone: the same cap
    page = render_report(diagnostics=d, max_candidates=4)
    assert len(_panels(page, "importance weights")) == 4
    assert "The other 11 candidates are summarized" in page
    # the result objects' own write_report pass the caps through
    page = ev.write_report(tmp_path / "e.html", diagnostics=d, max_candidates=3).read_text(
        encoding="utf-8"
    )
    assert set(_panels(page, "importance weights")) == _best_by_lower_bound(ev, 3)
    page = d.write_report(tmp_path / "d.html", max_candidates=None).read_text(encoding="utf-8")
    assert _panels(page, "importance weights") == names


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "3"])
def test_a_cap_that_is_not_a_positive_integer_is_refused(bad) -> None:
    ev, _ = _results(2)
    with pytest.raises(ope.ParameterError, match="max_candidates"):
        render_report(evaluation=ev, max_candidates=bad)
    with pytest.raises(ope.ParameterError, match="max_segments"):
        render_report(evaluation=ev, max_segments=bad)


# --------------------------------------------------------------------------------------------
# the flags
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def logs_path(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("bounds") / "logs.parquet"
    pq.write_table(_table(2_000, MAX_FIGURE_CANDIDATES + 3, 0), path)
    return str(path)


def _drawn_in(path: Path) -> list[str]:
    return _panels(path.read_text(encoding="utf-8"), "importance weights")


def test_the_cap_is_raised_from_the_cli(logs_path: str, tmp_path: Path, capsys) -> None:
    candidates = MAX_FIGURE_CANDIDATES + 3
    out = tmp_path / "default.html"
    assert main(["report", logs_path, "--out", str(out), "--json"]) == EXIT_OK
    assert len(_drawn_in(out)) == MAX_FIGURE_CANDIDATES
    out = tmp_path / "all.html"
    code = main(["report", logs_path, "--out", str(out), "--max-candidates", "all", "--json"])
    assert code == EXIT_OK
    assert len(_drawn_in(out)) == candidates
    out = tmp_path / "evaluate.html"
    code = main(["evaluate", logs_path, "--report", str(out), "--max-candidates", "3", "--json"])
    assert code == EXIT_OK
    assert len(_drawn_in(out)) == 3
    assert "3 candidates of 15 are drawn in full" in out.read_text(encoding="utf-8")
    capsys.readouterr()


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "{logs}", "--out", "{out}", "--max-candidates", "0"],
        ["report", "{logs}", "--out", "{out}", "--max-segments", "many"],
        ["evaluate", "{logs}", "--max-candidates", "3"],  # no report to bound
    ],
)
def test_a_bad_cap_flag_is_a_usage_error(argv, logs_path: str, tmp_path: Path, capsys) -> None:
    out = tmp_path / "r.html"
    args = [a.format(logs=logs_path, out=out) for a in argv]
    assert main([*args, "--json"]) == EXIT_USAGE
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False and "--max-" in json.dumps(doc)
    assert not out.exists()


# --------------------------------------------------------------------------------------------
# the work grows linearly: figures and panels counted
# --------------------------------------------------------------------------------------------
def _drawing_work(monkeypatch, ev, d, **caps) -> tuple[int, int]:
    """(figures created, axes saved) while rendering the page."""
    import matplotlib.figure

    import ope.report.svg as svg

    created: list[object] = []
    axes: list[int] = []
    init = matplotlib.figure.Figure.__init__
    inline = svg.inline_svg

    def counting_init(self, *args, **kwargs):
        created.append(self)
        init(self, *args, **kwargs)

    def counting_inline(figure, key, *, label=""):
        axes.append(len(figure.axes))
        return inline(figure, key, label=label)

    monkeypatch.setattr(matplotlib.figure.Figure, "__init__", counting_init)
    monkeypatch.setattr(svg, "inline_svg", counting_inline)
    render_report(evaluation=ev, diagnostics=d, **caps)
    monkeypatch.undo()
    assert len(created) == len(axes)  # every figure made is drawn once, none kept aside
    return len(created), sum(axes)


@pytest.mark.filterwarnings("ignore::ope.exceptions.SmallSampleWarning")  # 72 rows
def test_drawing_work_is_linear_in_candidates_and_flat_in_segments(monkeypatch) -> None:
    work = {
        (n, s): _drawing_work(monkeypatch, *_results(n, s), max_candidates=None)
        for n in (2, 6)
        for s in (8, 40)
    }
    capped = _drawing_work(monkeypatch, *_results(6, 40), max_candidates=2)
    # the same figures whatever the number of candidates and segments
    assert len({figures for figures, _ in work.values()}) == 1
    # each candidate drawn adds a fixed number of axes (a weights panel, a heatmap panel and
    # its colour bar), whatever the number of segments: not candidates x segments
    for s in (8, 40):
        assert work[(6, s)][1] - work[(2, s)][1] == 4 * 3
    assert work[(6, 8)] == work[(6, 40)]
    # capped at 2, six candidates cost what two do
    assert capped == work[(2, 40)]
