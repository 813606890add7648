"""The HTML report: well formed, self-contained, escaped, deterministic, and saying the right thing.

Reports of the bundled sample and of a simulation are checked as documents (balanced tags with
``html.parser``, every SVG parsed as XML, unique ids, every section, no URL but the SVG
namespaces, no script) and by what they claim (the headline never calls a candidate better than
the logging policy when its exact value says otherwise). Hostile names (``<script>``, quotes,
ampersands, dollar signs) appear as text only. ``tests/test_report_browser.py`` renders the same
reports in a headless browser.
"""

from __future__ import annotations

import html
import math
import re
import sys
import warnings
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("matplotlib", reason="the report's figures need the plot extra")

import ope  # noqa: E402
from ope.report import REPORT_SECTIONS, check_report_destination, render_report, write_report  # noqa: E402
from ope.report import views  # noqa: E402
from ope._thresholds import heavy_tail  # noqa: E402
from ope._format import format_estimate  # noqa: E402
from ope.report.html import _decimals, _num, _share, _signed  # noqa: E402
from ope.simulate import ContextualBandit  # noqa: E402

#: the bundled sample's settings (those of ``ope demo``)
ESTIMATORS = ("ips", "clipped_ips", "snips")
MAX_WEIGHT = 50.0

#: elements without an end tag
VOID = frozenset(
    {
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "source",
        "track",
        "wbr",
    }
)

#: the only URLs a report may contain: the SVG namespace declarations
NAMESPACES = ('xmlns="http://www.w3.org/2000/svg"', 'xmlns:xlink="http://www.w3.org/1999/xlink"')

HOSTILE = "<script>alert(1)</script>"

#: Where the diagnostics' gap advice sends a Python user (the library's own text) ...
PLAN_POINTER = "(see Diagnostics.plan())"
#: ... and how the report, read in Python or on the command line, says it: both ways.
PLAN_BOTH_WAYS = (
    "(see the exploration plan: Diagnostics.plan() in Python, "
    "ope diagnose --reward-range LO HI --target-width W --new-rows N on the command line)"
)
QUOTES = "&\"'"


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ope.OPEWarning)
        return fn(*args, **kwargs)


class _Checker(HTMLParser):
    """Balanced tags, and the text and tags the parser saw."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, tuple[int, int]]] = []
        self.errors: list[str] = []
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str, str | None]] = []
        self.text: list[str] = []
        self.ids: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += [(tag, k, v) for k, v in attrs]
        self.ids += [v for k, v in attrs if k == "id"]
        if tag not in VOID:
            self.stack.append((tag, self.getpos()))

    def handle_startendtag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += [(tag, k, v) for k, v in attrs]
        self.ids += [v for k, v in attrs if k == "id"]

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1][0] != tag:
            where = self.stack[-1] if self.stack else None
            self.errors.append(f"</{tag}> at {self.getpos()} closes {where}")
            return
        self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


def _check(page: str) -> _Checker:
    checker = _Checker()
    checker.feed(page)
    checker.close()
    return checker


def _svgs(page: str) -> list[str]:
    return re.findall(r"<svg\b.*?</svg>", page, flags=re.S)


# --------------------------------------------------------------------------------------------
# fixtures: the bundled sample and a simulation
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sample():
    return ope.load_sample()


@pytest.fixture(scope="module")
def sample_results(sample):
    logs = ope.read_logs(sample.path)
    ev = _quiet(
        ope.evaluate, logs, estimators=ESTIMATORS, max_weight=MAX_WEIGHT, reward_range=(0, 1)
    )
    d = _quiet(
        ope.diagnose,
        logs,
        by=["segment"],
        max_weight=MAX_WEIGHT,
        reward_range=(0, 1),
        target_width=0.02,
        new_rows=100_000,
    )
    return logs, ev, d


@pytest.fixture(scope="module")
def sample_page(sample, sample_results):
    _, ev, d = sample_results
    return render_report(
        evaluation=ev,
        diagnostics=d,
        truth=sample.truth,
        provenance={
            "command": ["ope", "report", str(sample.path), "--out", "report.html"],
            "seed": 0,
        },
    )


@pytest.fixture(scope="module")
def simulation():
    env = ContextualBandit(n_actions=6, unsupported_actions=1, seed=0)
    logs = ope.read_logs(env.sample(20_000, rng=1, distributions=True))
    ev = _quiet(
        ope.evaluate, logs, estimators=("dm", "ips", "snips", "dr"), reward_range=(0, 1), rng=0
    )
    d = _quiet(ope.diagnose, logs, by=["segment"], reward_range=(0, 1))
    truth = {p: env.true_value(p) for p in env.candidate_policies}
    truth["logging"] = env.true_value("logging")
    return env, logs, ev, d, truth


@pytest.fixture(scope="module")
def simulation_page(simulation):
    _, _, ev, d, truth = simulation
    return render_report(evaluation=ev, diagnostics=d, truth=truth)


@pytest.fixture(scope="module")
def hostile():
    """Logs whose policy names, segment labels and source are hostile text."""
    rng = np.random.default_rng(3)
    n = 4000
    action = rng.integers(0, 3, n)
    reward = rng.binomial(1, np.where(action == 0, 0.6, 0.3)).astype(float)
    df = pd.DataFrame(
        {
            "action": action,
            "propensity": np.full(n, 1 / 3),
            "reward": reward,
            "segment": np.where(rng.random(n) < 0.5, "<b>seg</b>", "a&b \"'"),
            f"target__{HOSTILE}": (action == 0).astype(float),
            f"target__{QUOTES}": np.full(n, 1 / 3),
            "target__$x$": np.where(action == 1, 0.8, 0.1),
        }
    )
    logs = ope.read_logs(df)
    ev = _quiet(ope.evaluate, logs, estimators=("ips", "snips"), reward_range=(0, 1))
    d = _quiet(
        ope.diagnose, logs, by=["segment"], reward_range=(0, 1), target_width=0.05, new_rows=10_000
    )
    page = render_report(
        evaluation=ev,
        diagnostics=d,
        title=f"title {HOSTILE}",
        provenance={
            "command": f"ope report {HOSTILE}",
            "input": f"{QUOTES}.parquet",
            "options": {"by": [HOSTILE]},
            HOSTILE: QUOTES,
        },
    )
    return ev, d, page


# --------------------------------------------------------------------------------------------
# documents
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("which", ["sample_page", "simulation_page"])
def test_the_report_is_well_formed(which, request):
    page = request.getfixturevalue(which)
    assert page.startswith('<!DOCTYPE html>\n<html lang="en">')
    checker = _check(page)
    assert not checker.errors, checker.errors[:5]
    assert not checker.stack, f"unclosed: {checker.stack[:5]}"
    assert len(checker.ids) == len(set(checker.ids)), "duplicate ids"
    svgs = _svgs(page)
    # forest plot, differences with logging and between, split, weight panels, heatmap panels
    assert len(svgs) >= 6
    for svg in svgs:
        root = ET.fromstring(svg)
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
    # every reference inside a figure points at an id of that figure
    for svg in svgs:
        ids = set(re.findall(r'\sid="([^"]+)"', svg))
        refs = set(re.findall(r'href="#([^"]+)"', svg)) | set(re.findall(r"url\(#([^)]+)\)", svg))
        assert refs <= ids


@pytest.mark.parametrize("which", ["sample_page", "simulation_page"])
def test_every_section_is_present_in_order(which, request):
    page = request.getfixturevalue(which)
    positions = [page.find(f'<section id="{sid}"') for sid, _ in REPORT_SECTIONS]
    assert all(p > 0 for p in positions)
    assert positions == sorted(positions)
    for sid, heading in REPORT_SECTIONS:
        assert f'<a href="#{sid}">' in page
        assert f"<h2>{heading}</h2>" in page


def test_the_contents_list_the_sections_not_in_the_report_apart(sample_page, simulation_page):
    """The contents list the sections with content, then apart, muted, those whose input was
    not given (each still on the page, saying how to add it); the sample page has a plan, the
    simulation page none."""
    for page, has_plan in ((sample_page, True), (simulation_page, False)):
        nav = re.search(r'<nav aria-label="sections">(.*?)</nav>', page, re.S).group(1)
        listed, absent = nav.split('<p class="absent">')
        for sid in ("headline", "estimates", "candidates", "notes", "reproduce"):
            assert f'href="#{sid}"' in listed and f'<section id="{sid}" class="{sid}">' in page
        for sid in ("distribution", "guardrails", "slates", "certificate"):
            assert f'href="#{sid}"' in absent and f'href="#{sid}"' not in listed
            assert f'<section id="{sid}" class="{sid} absent">' in page
        assert ('href="#plan"' in listed) is has_plan
        assert ('href="#plan"' in absent) is not has_plan


@pytest.mark.parametrize("which", ["sample_page", "simulation_page"])
def test_the_report_is_self_contained(which, request):
    page = request.getfixturevalue(which)
    stripped = page
    for ns in NAMESPACES:
        stripped = stripped.replace(ns, "")
    assert not re.search(r"(?i)(https?|ftp|wss?):", stripped), re.findall(
        r".{40}https?:.{40}", stripped
    )[:3]
    assert "//" not in re.sub(r"<svg\b.*?</svg>", "", stripped, flags=re.S).replace("<!DOCTYPE", "")
    checker = _check(page)
    assert not {"script", "link", "img", "iframe", "object", "embed", "base", "form"} & set(
        checker.tags
    )
    assert not [a for a in checker.attrs if a[1].lower().startswith("on")], "event handlers"
    for tag, key, value in checker.attrs:
        if key in ("href", "xlink:href", "src"):
            # a link within the page, or a raster inlined by matplotlib (heatmap cells)
            assert value.startswith(("#", "data:image/png;base64,")), (tag, key, value[:40])
    assert not re.search(r"url\((?!#)", page) and "@import" not in page
    assert "@media print" in page


def test_the_report_is_deterministic(sample, sample_results, sample_page):
    logs, ev, d = sample_results
    again = render_report(
        evaluation=ev,
        diagnostics=d,
        truth=sample.truth,
        provenance={
            "command": ["ope", "report", str(sample.path), "--out", "report.html"],
            "seed": 0,
        },
    )
    assert again == sample_page
    # recomputed from scratch (a bootstrap with a seed), twice: the same bytes
    part = ope.read_logs(sample.table.slice(0, 20_000))
    pages = []
    for _ in range(2):
        ev2 = _quiet(
            ope.evaluate,
            part,
            estimators=("ips", "snips"),
            ci="bootstrap",
            n_resamples=200,
            rng=5,
            reward_range=(0, 1),
        )
        pages.append(render_report(evaluation=ev2, truth=sample.truth))
    assert pages[0] == pages[1]
    assert not re.search(r"\b(19|20)\d\d-\d\d-\d\d", sample_page)  # no date stamp


# --------------------------------------------------------------------------------------------
# escaping
# --------------------------------------------------------------------------------------------
def test_user_text_is_escaped_everywhere(hostile):
    ev, d, page = hostile
    checker = _check(page)
    assert not checker.errors and not checker.stack
    assert "script" not in checker.tags
    assert HOSTILE not in page and "<b>seg</b>" not in page
    assert "&amp;lt;" not in page and "&amp;amp;" not in page  # escaped once, never twice
    text = "".join(checker.text)
    # every hostile string reaches the reader as text: in tables and inside the figures
    assert text.count(HOSTILE) >= 10 and text.count(QUOTES) >= 5
    assert "<b>seg</b>" in text and "a&b \"'" in text and "$x$" in text
    assert f"<title>title {HOSTILE.replace('<', '&lt;').replace('>', '&gt;')}</title>" in page
    for svg in _svgs(page):
        ET.fromstring(svg)  # still well-formed XML
    # attribute values never carry a raw quote or angle bracket from the data
    for tag, key, value in checker.attrs:
        if value and key not in ("style", "d", "transform", "viewBox", "points"):
            assert HOSTILE not in value or key == "aria-label", (tag, key)


def test_user_text_in_attributes_is_quoted(hostile):
    _, _, page = hostile
    for label in re.findall(r'aria-label="([^"]*)"', page):
        assert "<" not in label and ">" not in label


# --------------------------------------------------------------------------------------------
# content
# --------------------------------------------------------------------------------------------
def test_the_headline_answers_for_the_bundled_sample(sample, sample_results, sample_page):
    logs, ev, d = sample_results
    head = sample_page[
        sample_page.index('<section id="headline"') : sample_page.index('<section id="estimates"')
    ]
    assert "Better than the logging policy" in head and "The logs cannot tell" in head
    verdicts = {
        v.policy: v
        for v in views.candidate_verdicts(
            ev, views.comparison_table(ev), d, views.Truth.of(sample.truth)
        )
    }
    # personalized is better on every estimator, with a clear margin; the support gaps of
    # long_tail and uniform (new users never see the tail) make them unanswerable
    assert verdicts["personalized"].answer == views.BETTER
    assert verdicts["personalized"].lower_bound > 0.05
    comps = views.comparison_table(ev)  # the bound at the precision of the differences' errors
    bound = _signed(
        verdicts["personalized"].lower_bound,
        decimals=_decimals(comps["std_error"], comps["difference"]),
    )
    assert f"by at least {bound}" in head and re.fullmatch(r"\+0\.\d{4}", bound)
    for policy in ("long_tail", "uniform"):
        assert verdicts[policy].answer == views.UNCLEAR
        assert "segment=new" in verdicts[policy].summary
    assert verdicts["popular"].answer == views.UNCLEAR  # its estimators disagree
    assert "the estimators disagree" in verdicts["popular"].summary


@pytest.mark.parametrize("which", ["sample", "simulation"])
def test_the_headline_never_claims_what_the_truth_denies(which, request, sample_results):
    if which == "sample":
        truth = views.Truth.of(request.getfixturevalue("sample").truth)
        _, ev, d = sample_results
    else:
        _, _, ev, d, raw = request.getfixturevalue("simulation")
        truth = views.Truth.of(raw)
    verdicts = views.candidate_verdicts(ev, views.comparison_table(ev), d, truth)
    for v in verdicts:
        exact = truth.difference(v.policy)
        if v.answer == views.BETTER:
            assert exact > 0 and v.lower_bound > 0, v
        if v.answer == views.WORSE:
            assert exact < 0 and v.upper_bound < 0, v


def test_the_report_shows_every_estimate_and_comparison(sample_results, sample_page):
    _, ev, _ = sample_results
    table = ev.table()
    dec = _decimals(
        [*table["std_error"], ev.logging.std_error], [*table["value"], ev.logging.value]
    )
    for r in table.itertuples(index=False):
        assert f"[{_num(r.ci_low, decimals=dec)}, {_num(r.ci_high, decimals=dec)}]" in sample_page
    comps = views.comparison_table(ev)
    assert len(comps) == len(ev.policies) * len(ev.estimators) + 10  # + the 10 candidate pairs
    vs = comps[comps["baseline"] == "logging"]
    expected = ev.comparisons().set_index(["policy", "estimator"])
    for r in vs.itertuples(index=False):
        assert r.difference == pytest.approx(
            expected.loc[(r.policy, r.estimator), "difference"], rel=1e-12
        )
    assert list(comps["ci_low"].fillna(-math.inf)) == sorted(
        comps["ci_low"].fillna(-math.inf), reverse=True
    )


def test_pairs_of_candidates_are_oriented_and_paired(sample_results):
    _, ev, _ = sample_results
    comps = views.comparison_table(ev)
    between = comps[comps["baseline"] != "logging"]
    assert set(between["estimator"]) == {"snips"}
    for r in between.itertuples(index=False):
        assert r.difference > 0  # higher-valued minus lower-valued
        d = ev.compare(r.policy, r.baseline, estimator="snips")
        assert r.difference == pytest.approx(d.value, rel=1e-12)
        assert r.std_error == pytest.approx(d.std_error, rel=1e-12)


def test_the_sample_report_shows_weights_gaps_plan_and_validation(sample_page, sample_results):
    _, _, d = sample_results
    # five candidates, all drawn in full: one panel each in one figure of weights, one of heatmaps
    labels = re.findall(r'aria-label="([^"]*)"', sample_page)
    weights = [x for x in labels if x.startswith("importance weights, one panel per candidate: ")]
    heatmaps = [x for x in labels if x.startswith("coverage heatmaps, one panel per candidate: ")]
    assert len(weights) == len(heatmaps) == 1
    for label in (weights[0], heatmaps[0]):
        assert label.partition(": ")[2].split(", ") == list(d.policies)
    assert 'id="cap"' not in sample_page  # no candidate summarized
    gaps = d.segments().query("gap")
    assert len(gaps) == 2
    for reason in gaps["reason"]:  # the gap's words; its pointer to the plan said both ways
        head = reason.removesuffix(PLAN_POINTER)
        assert head != reason and head.replace("'", "&#x27;") + '(see the <a href="#plan">' in (
            sample_page
        )
    assert sample_page.count("support gap</span>") == 2
    assert "Which actions to play more" in sample_page and "(actions never logged)" in sample_page
    assert "<dt>rows read</dt><dd>100,000</dd>" in sample_page
    assert "Every row passed validation." in sample_page
    assert "ope report " in sample_page and "<dt>seed</dt><dd>0</dd>" in sample_page
    for dist in ("numpy", "pandas", "scipy", "scikit-learn", "pyarrow", "matplotlib"):
        assert f"<td>{dist}</td>" in sample_page
    assert f"<td>{ope.__version__}</td>" in sample_page


def test_a_gap_points_at_the_plan_for_python_and_command_line_readers(sample):
    """A segment gap's advice points a Python user at ``Diagnostics.plan()`` (the diagnostics'
    own text, unchanged); the report, whose reader may use Python or the command line, says
    both ways (the call, and ``ope diagnose`` with flags it has) and links its own plan
    section, in the gap lists and in the notes; a candidate's name around it stays escaped."""
    import argparse

    from ope.cli import build_parser

    name = '<b>&"tail"</b>'
    table = sample.table.slice(0, 20_000)
    table = table.rename_columns(
        [f"target__{name}" if c == "target__long_tail" else c for c in table.column_names]
    )
    d = _quiet(ope.diagnose, ope.read_logs(table), by=["segment"], reward_range=(0, 1))
    gaps = d.segments().query("gap")
    assert name in set(gaps["policy"])
    assert all(reason.endswith(PLAN_POINTER) for reason in gaps["reason"])  # for Python users
    pointed = sum(str(note).count(PLAN_POINTER) for note in d.notes)
    assert pointed >= 2
    page = render_report(diagnostics=d)
    checker = _check(page)
    assert not checker.errors and not checker.stack
    assert PLAN_POINTER not in page
    text = " ".join("".join(checker.text).split())
    assert text.count(PLAN_BOTH_WAYS) == len(gaps) + pointed
    assert page.count('<a href="#plan">exploration plan</a>') == len(gaps) + pointed
    for reason in gaps["reason"]:  # the gap's own words, escaped, then the pointer
        assert f"{reason.removesuffix(PLAN_POINTER)}{PLAN_BOTH_WAYS}" in text
    assert name not in page and "b" not in checker.tags
    assert html.escape(f"candidate {name} puts", quote=True) in page
    # the command's flags are those of ope diagnose
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    flags = {o for a in commands.choices["diagnose"]._actions for o in a.option_strings}
    assert set(re.findall(r"--[a-z-]+", PLAN_BOTH_WAYS)) <= flags


def test_the_simulation_report_handles_dm_and_unsupported_mass(simulation_page, simulation):
    _, _, ev, d, _ = simulation
    assert "dm" in ev.estimators and "<td>dr</td>" in simulation_page
    # DM has no interval: shown as a dash, and the headline bound comes from the others
    assert "<td>dm</td>" in simulation_page
    rows = d.table()
    assert (rows["unsupported_mass"] > 0).all()
    assert "of its mass is on actions the logger never plays" in simulation_page
    assert "mass where the logger never goes" in simulation_page


def test_rejected_rows_are_reported(sample):
    df = (
        sample.table.slice(0, 2000)
        .select(["action", "propensity", "reward", "target__greedy"])
        .to_pandas()
    )
    df.loc[[3, 17], "propensity"] = 0.0
    logs = _quiet(ope.read_logs, df, on_invalid="drop")
    ev = _quiet(ope.evaluate, logs, estimators=("ips",), reward_range=(0, 1))
    page = render_report(evaluation=ev)
    assert "<dt>rows rejected</dt><dd>2</dd>" in page
    assert '<td>propensity_out_of_range</td><td class="num">2</td><td>3, 17</td>' in page
    assert "were dropped" in page


def test_a_certificate_is_shown(sample, sample_results):
    logs, ev, _ = sample_results
    cert = ope.certify(
        logs.column("target__personalized"),
        None,
        logs.column("action"),
        logs.column("reward"),
        logs.column("propensity"),
        reward_range=(0, 1),
        max_weight=MAX_WEIGHT,
        name=f"learned {HOSTILE}",
    )
    page = render_report(evaluation=ev, certificate=cert)
    section = page[page.index('<section id="certificate"') : page.index('<section id="notes"')]
    assert "learned &lt;script&gt;" in section and HOSTILE not in page
    assert f"{cert.verdict}: " in section and _num(cert.lower_bound) in section


def test_per_segment_estimates_are_rendered_when_the_evaluation_has_them(sample, sample_results):
    """An evaluation whose ``table(by=...)`` gives per-segment rows (here each segment's rows
    evaluated alone, the definition of a per-segment estimate) gets them in the report."""
    import pyarrow as pa

    logs, ev, d = sample_results
    labels = np.asarray(logs.table.column("segment").to_pylist())
    frames = []
    for label in sorted(set(labels.tolist())):
        part = logs.table.filter(pa.array(labels == label))
        sub = _quiet(
            ope.evaluate,
            ope.read_logs(part),
            estimators=ESTIMATORS,
            max_weight=MAX_WEIGHT,
            reward_range=(0, 1),
        )
        frames.append(sub.table().assign(column="segment", segment=label))
    per_segment = pd.concat(frames, ignore_index=True)

    class Segmented:
        """The evaluation, with per-segment rows."""

        def __init__(self, base):
            self._base = base

        def __getattr__(self, name):
            return getattr(self._base, name)

        def __getitem__(self, key):
            return self._base[key]

        def table(self, by=None):
            return self._base.table() if by is None else per_segment

    page = render_report(evaluation=Segmented(ev), diagnostics=d, truth=sample.truth)
    section = page[page.index('<section id="segments"') : page.index('<section id="plan"')]
    assert "Estimates per segment (snips)" in section
    assert "per-segment estimates by segment" in section
    dec = _decimals(per_segment["std_error"], per_segment["value"])
    for r in per_segment.itertuples(index=False):
        assert (
            f'<td>segment={r.segment}</td><td class="num">{_num(r.value, decimals=dec)}</td>'
            in section
        )
    assert views.segment_estimates(ev) is None  # today's Evaluation: the diagnostics' rows


def test_a_report_of_diagnostics_alone(sample_results, tmp_path):
    logs, _, d = sample_results
    path = d.write_report(tmp_path / "overlap.html", validation=logs.report)
    page = path.read_text(encoding="utf-8")
    assert "overlap diagnostics only" in page
    checker = _check(page)
    assert not checker.errors and not checker.stack
    for sid, _ in REPORT_SECTIONS:
        assert f'<section id="{sid}"' in page
    assert "<dt>rows read</dt><dd>100,000</dd>" in page


def test_without_matplotlib_the_report_keeps_its_tables(sample_results, monkeypatch):
    _, ev, d = sample_results
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    page = render_report(evaluation=ev, diagnostics=d)
    assert "<svg" not in page
    assert page.count("pip install &#x27;ope-toolkit[plot]&#x27;") >= 5
    assert "Better than the logging policy" in page


# --------------------------------------------------------------------------------------------
# writing the file
# --------------------------------------------------------------------------------------------
def test_write_report_is_atomic_and_refuses_to_overwrite(sample_results, tmp_path, monkeypatch):
    _, ev, _ = sample_results
    target = tmp_path / "report.html"
    assert write_report(target, evaluation=ev) == target
    first = target.read_bytes()
    assert first.startswith(b"<!DOCTYPE html>")
    with pytest.raises(ope.ParameterError, match="exists; pass overwrite=True"):
        write_report(target, evaluation=ev)
    assert target.read_bytes() == first
    write_report(target, evaluation=ev, overwrite=True, title="second")
    assert b"<title>second</title>" in target.read_bytes()
    # a failure while rendering leaves neither a partial file nor a temporary one
    import ope.report.html as page_module

    def broken(**_):
        raise RuntimeError("renderer failed")

    monkeypatch.setattr(page_module, "render_report", broken)
    with pytest.raises(RuntimeError, match="renderer failed"):
        write_report(tmp_path / "other.html", evaluation=ev)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]


def test_the_destination_is_checked(sample, tmp_path):
    with pytest.raises(ope.DataFileError, match="does not exist"):
        check_report_destination(tmp_path / "missing" / "report.html")
    with pytest.raises(ope.ParameterError, match="is a directory"):
        check_report_destination(tmp_path)
    # never the logs it describes, even with overwrite=True (a copy: the bundled file is safe)
    logs_path = tmp_path / "logs.parquet"
    logs_path.write_bytes(sample.path.read_bytes())
    ev = _quiet(
        ope.evaluate,
        ope.read_logs(logs_path, columns=["target__greedy"]),
        estimators=("ips",),
        reward_range=(0, 1),
    )
    with pytest.raises(ope.ParameterError, match="is an input of the report"):
        write_report(logs_path, evaluation=ev, overwrite=True)
    assert logs_path.read_bytes() == sample.path.read_bytes()
    assert check_report_destination(tmp_path / "new.html") == tmp_path / "new.html"


def test_bad_arguments_are_refused(sample_results):
    _, ev, d = sample_results
    with pytest.raises(ope.ParameterError, match="needs an evaluation .* or diagnostics"):
        render_report()
    with pytest.raises(ope.ParameterError, match="`evaluation` must be the result of ope.evaluate"):
        render_report(evaluation=d)
    with pytest.raises(
        ope.ParameterError, match="`diagnostics` must be the result of ope.diagnose"
    ):
        render_report(diagnostics=ev)
    with pytest.raises(ope.ParameterError, match="`truth` must be a mapping"):
        render_report(evaluation=ev, truth=0.5)
    with pytest.raises(ope.ParameterError, match="must be a number"):
        render_report(evaluation=ev, truth={"greedy": "high"})
    with pytest.raises(ope.ParameterError, match="`provenance` must be a mapping"):
        render_report(evaluation=ev, provenance=["ope", "report"])


def test_truth_comes_in_either_shape(sample):
    flat = views.Truth.of({"greedy": 0.25, "logging": 0.1})
    assert flat.difference("greedy") == pytest.approx(0.15) and flat.by_segment == {}
    doc = views.Truth.of(sample.truth)
    assert doc.logging == sample.truth["logging"] and doc.column == "segment"
    assert doc.by_segment["greedy"] == sample.truth["by_segment"]["greedy"]
    assert views.Truth.of(None).difference("greedy") is None and not views.Truth.of(None)


def test_numbers_read_at_their_scale():
    """The report's numbers follow ope._format: a number alone to 4 significant digits
    (trailing zeros dropped), a column of estimates to 2 significant digits of its smallest
    standard error, a difference signed, a share as a percentage; missing as a dash."""
    assert _num(0.0046) == "0.0046" and _num(0.0048214) == "0.004821"
    assert _num(19.5984) == "19.6" and _num(50.0) == "50" and _num(0.95) == "0.95"
    assert _signed(-0.000286) == "−0.000286" and _signed(0.0941) == "+0.0941"
    assert _num(1234567) == "1,234,567" and _num(9999) == "9999" and _num(None) == "–"
    assert _decimals([0.0001, 0.002]) == 5 and _decimals([float("nan")]) is None
    assert _num(0.119812, decimals=_decimals([0.001027])) == "0.1198"
    assert _share(0.0043) == "0.43%" and _share(0.77) == "77%" and _share(3e-8) == "<0.01%"
    assert _num(0.0046031, decimals=5) == format_estimate(0.0046031, 0.000121)


def test_the_weight_tail_is_shown_and_a_heavy_one_is_a_reason(sample, sample_results, sample_page):
    _, ev, d = sample_results
    table = d.table()
    assert sample_page.count("tail of the weights") == len(table)
    verdicts = {
        v.policy: v
        for v in views.candidate_verdicts(
            ev, views.comparison_table(ev), d, views.Truth.of(sample.truth)
        )
    }
    for row in table.itertuples():
        reason = [r for r in verdicts[row.policy].reasons if r.startswith("Pareto k-hat")]
        assert bool(reason) == bool(heavy_tail(row.pareto_k, row.pareto_k_threshold))
    # on the bundled sample one candidate's weights have k-hat >= 0.5: the reason is shown
    assert (table["pareto_k"] >= 0.5).sum() >= 1
    assert "Pareto k-hat of its weights" in sample_page
