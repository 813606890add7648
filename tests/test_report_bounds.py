"""The report's size bounds: at most MAX_REPORT_SEGMENTS segments per segment chart, heatmap or
table (the rest in one summary line) and at most MAX_FIGURE_CANDIDATES candidates with figures
(every candidate still in the tables). No wall-clock asserts: the figures are counted."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pytest

import ope
from ope.report import render_report
from ope.report.views import (
    MAX_FIGURE_CANDIDATES,
    MAX_REPORT_SEGMENTS,
    figure_candidates,
    top_segments,
)

pytest.importorskip("matplotlib")
pytestmark = pytest.mark.filterwarnings("ignore::ope.OverlapWarning")  # small segments


def _table(rows: int, candidates: int, segments: int) -> pa.Table:
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
        cols[f"target__c{j:02d}"] = np.where(action == j % 4, share, (1 - share) / 3)
    if segments:
        # segment k holds 2 (k + 1) rows: s000 the fewest, no two segments the same size
        labels = np.repeat(np.arange(segments), 2 * np.arange(1, segments + 1))
        assert len(labels) == rows
        cols["seg"] = pa.array([f"s{k:03d}" for k in rng.permutation(labels)])
    return pa.table(cols)


def test_top_segments_keeps_the_largest_and_summarizes_the_rest() -> None:
    shown, line = top_segments(["a", "b", "c", "d", "b"], [5, 50, 30, 15, 40], limit=2)
    assert shown == ["b", "c"]  # in their order of appearance
    assert line == "2 more segments, 20% of rows: d, a"
    assert top_segments(list("abc"), [1, 1, 1], limit=3) == (["a", "b", "c"], "")
    names = [f"s{i}" for i in range(15)]
    _, line = top_segments(names, [100] + [1] * 14, limit=1)
    assert line.endswith(": s1, s2, s3, s4, s5, s6, s7, s8, s9, s10 and 4 more")


def test_figure_candidates_are_the_first_ones() -> None:
    assert figure_candidates(["a", "b"], limit=2) == (["a", "b"], "")
    assert figure_candidates(list("abcd"), limit=1) == (
        ["a"],
        "3 more candidates without figures (in the tables): b, c, d",
    )


def test_many_segments_are_capped_with_one_summary_line() -> None:
    segments = MAX_REPORT_SEGMENTS + 35
    table = _table(segments * (segments + 1), 2, segments)
    ev = ope.evaluate(table, estimators=("ips",), reward_range=(0, 1), by=["seg"])
    d = ope.diagnose(table, reward_range=(0, 1), by=["seg"])
    page = render_report(evaluation=ev, diagnostics=d)
    summaries = re.findall(
        r'<p class="note more">seg: (\d+) more segments, ([^<]*?) of rows: ', page
    )
    # the estimates' chart and the overlap table each summarize the 35 smallest segments
    assert len(summaries) == 2 and {k for k, _ in summaries} == {"35"}
    shown = set(re.findall(r"<td>seg=(s\d{3})</td>", page))  # the per-segment estimates
    assert len(shown) == MAX_REPORT_SEGMENTS
    assert shown == {f"s{k:03d}" for k in range(segments - MAX_REPORT_SEGMENTS, segments)}
    # forest, differences (with logging, between), split, 2 weights, segments, 2 heatmaps
    assert page.count("<svg") == 9


def test_many_candidates_get_figures_up_to_the_cap() -> None:
    candidates = MAX_FIGURE_CANDIDATES + 3
    table = _table(2_000, candidates, 0)
    ev = ope.evaluate(table, estimators=("ips",), reward_range=(0, 1))
    d = ope.diagnose(table, reward_range=(0, 1))
    page = render_report(evaluation=ev, diagnostics=d)
    names = [f"c{j:02d}" for j in range(candidates)]
    assert page.count('aria-label="importance weights of candidate') == MAX_FIGURE_CANDIDATES
    assert page.count('aria-label="coverage heatmap of candidate') == MAX_FIGURE_CANDIDATES
    # forest, differences with logging and between, split; one weights and one heatmap each
    assert page.count("<svg") <= 4 + 2 * MAX_FIGURE_CANDIDATES
    assert "3 more candidates without figures (in the tables): c12, c13, c14" in page
    for name in names:  # every candidate is in the tables
        assert f"<td>{name}</td>" in page
