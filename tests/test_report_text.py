"""What the HTML report says, read as text: each warning once, every number by ope._format's
rules, coverage shares labelled with the interval they are of, counts with the right plural,
and an outer/inner chart whose axis fits what is estimated, not the reward range."""

from __future__ import annotations

import html
import re
import warnings

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("matplotlib")

import matplotlib  # noqa: E402

matplotlib.use("Agg")

import ope  # noqa: E402
from ope.plots import detached_figures, plot_interval_split  # noqa: E402
from ope.report import render_report  # noqa: E402


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ope.OPEWarning)
        return fn(*args, **kwargs)


def _text(page: str) -> str:
    """The page's visible text (figures left out), one space between words."""
    page = re.sub(r"<svg\b.*?</svg>|<style>.*?</style>", " ", page, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def _section(page: str, sid: str) -> str:
    start = page.index(f'<section id="{sid}"')
    return page[start : page.index("</section>", start)]


@pytest.fixture(scope="module")
def demo_like():
    """The demo's report: the bundled sample with a given clip level, with its truth."""
    sample = ope.load_sample()
    logs = ope.read_logs(sample.path)
    ev = _quiet(
        ope.evaluate,
        logs,
        estimators=("ips", "clipped_ips", "snips"),
        max_weight=50,
        reward_range=(0, 1),
    )
    d = _quiet(ope.diagnose, logs, by=["segment"], max_weight=50, reward_range=(0, 1))
    return ev, d, render_report(evaluation=ev, diagnostics=d, truth=sample.truth)


def test_each_warning_is_stated_once(demo_like):
    ev, d, page = demo_like
    notes = re.findall(r"<li>(.*?)</li>", _section(page, "notes"), flags=re.S)
    texts = [" ".join(html.unescape(n).split()) for n in notes]
    assert len(texts) == len(set(texts))
    # a warning about a candidate, whoever raised it, is stated once: the text after the
    # candidate's name (and the estimators it concerns) differs between any two notes
    bodies = [re.sub(r"^\w+( \([\w, ]+\))?: ", "", t) for t in texts]
    assert len(bodies) == len(set(bodies)), texts
    # long_tail's raw weights have one low effective sample size (553) and one mean weight
    # off 1; uniform one mean weight off 1: the estimators' and the diagnostics' copies merged
    about = {p: [t for t in texts if t.startswith(p)] for p in ("long_tail", "uniform")}
    assert sum("effective sample size 553" in t for t in about["long_tail"]) == 1
    assert sum("mean importance weight" in t for t in about["long_tail"]) == 1
    assert sum("mean importance weight" in t for t in about["uniform"]) == 1
    # the diagnostics still word them as the estimators do
    assert any(
        n.startswith("long_tail: effective sample size 553.2 is 0.55% of n=100000") for n in d.notes
    )


def test_coverage_shares_say_which_interval_they_are_of(demo_like):
    _, d, page = demo_like
    row = d.table().set_index("policy").loc["long_tail"]
    assert row["max_weight"] == 50 and row["verdict_max_weight"] != 50
    text = _text(_section(page, "candidates"))
    start = text.index("long_tail the logs cannot tell")
    block = text[start : text.index("uniform", start + 30)]
    given = f"{row['coverage_share']:.0%}"
    narrowest = f"{row['verdict_coverage_share']:.0%}"
    assert given != narrowest  # two different intervals ...
    assert "outer/inner interval at clip level 50" in block
    assert f"({given} of this interval)" in block  # ... each labelled with its own
    assert (
        f"narrowest interval: clip level {row['verdict_max_weight']:.0f} coverage "
        f"{narrowest} of that interval"
    ) in block
    assert f"coverage is {narrowest} of the narrowest interval" in block  # the verdict's


def test_every_number_is_formatted_by_the_one_formatter():
    """A clip level chosen by the narrowest interval (uniform's largest weight, 19.9011...)
    reads at 4 significant digits like every other number, in the facts and the figure."""
    logs = ope.read_logs(ope.load_sample().path)
    d = _quiet(ope.diagnose, logs, ["uniform"], reward_range=(0, 1))
    level = float(d.table()["max_weight"].iloc[0])
    assert not level.is_integer()
    page = render_report(diagnostics=d)
    shown = ope._format.format_number(level, trim=True)
    assert f"outer/inner interval at clip level {shown}" in _text(page)
    assert f"{level:g}" not in page and f"clip {shown}," in page


def _one_candidate():
    sample = ope.load_sample(columns=["action", "propensity", "reward", "target__greedy"])
    return _quiet(ope.evaluate, sample.table, estimators=("ips",), reward_range=(0, 1))


def test_counts_take_the_right_plural():
    text = _text(render_report(evaluation=_one_candidate()))
    assert "looking at 1 candidate at once" in text
    assert "1 candidate policy ·" in text and "1 estimator," in text
    assert "candidates at once" not in text and "1 estimators" not in text


def _tiny_click_rate_diagnostics():
    """Open-Bandit-like logs: 80 actions logged uniformly, a 0.46% click rate, a candidate
    that favours 8 actions, diagnosed at a clip level that leaves most of its mass clipped."""
    rng = np.random.default_rng(0)
    n, k = 50_000, 80
    action = rng.integers(0, k, n)
    table = pd.DataFrame(
        {
            "action": action,
            "propensity": np.full(n, 1 / k),
            "reward": (rng.random(n) < 0.0046).astype(float),
            "target__favourite": np.where(action < 8, 0.9 / 8, 0.1 / (k - 8)),
        }
    )
    return _quiet(ope.diagnose, ope.read_logs(table), reward_range=(0, 1), max_weight=5)


def test_the_outer_inner_chart_fits_the_estimates_not_the_reward_range():
    d = _tiny_click_rate_diagnostics()
    row = d.table().iloc[0]
    truth, logging = {"favourite": 0.0046}, 0.0046
    end_of_sampling = row["ci_low"] + row["sampling_width"]
    # the coverage part, set by the reward range, runs far past what is estimated
    assert row["ci_high"] > 8 * max(end_of_sampling, row["clipped_value"], 0.0046)
    with detached_figures():
        ax = plot_interval_split(d, truth=truth, logging_value=logging)
    low, high = ax.get_xlim()
    drawn = max(end_of_sampling, row["clipped_value"], truth["favourite"], logging)
    assert high < 2 * drawn and high > drawn  # within a few multiples, nothing cut ...
    assert low <= min(row["ci_low"], row["clipped_value"]) and high - low < 2 * drawn
    # ... but the coverage part, which is cut at the edge, with its end written there
    labels = [t.get_text() for t in ax.texts]
    assert any(ope._format.format_number(row["ci_high"], trim=True) in t for t in labels)


def test_the_outer_inner_chart_keeps_intervals_within_reach():
    """Where the coverage parts end near what is estimated, the axis shows them whole."""
    logs = ope.read_logs(ope.load_sample().path)
    d = _quiet(ope.diagnose, logs, ["popular", "greedy"], max_weight=50, reward_range=(0, 1))
    with detached_figures():
        ax = plot_interval_split(d)
    low, high = ax.get_xlim()
    table = d.table()
    assert low < table["ci_low"].min() and high > table["ci_high"].max() and not ax.texts


def test_an_interval_without_a_standard_error_keeps_both_ends_at_one_precision():
    from ope.report.html import _interval

    assert _interval(0.11621, 0.14) == "[0.1162, 0.1400]"
    assert _interval(-0.0003, 0.004, signed=True) == "[−0.0003000, +0.004000]"
    assert _interval(0.0, 0.6984, 4) == "[0.0000, 0.6984]"
