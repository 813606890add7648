"""The report page: sections of escaped HTML around inline SVG figures.

:func:`render_report` assembles the page from the result objects (through
:mod:`ope.report.views`) and the figures of :mod:`ope.plots`; :func:`write_report` writes it
atomically. Every string that comes from the user or the data (policy names, segment labels,
column values, paths, options) goes through :func:`_e` (:func:`ope._format.safe_text`, then
``html.escape`` with quotes) or, inside a figure, through :func:`ope.plots` labels (the same
``safe_text``) and matplotlib's SVG writer, which escapes markup.
"""

from __future__ import annotations

import functools
import html
import importlib.metadata
import dataclasses
import math
import os
import platform
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import pandas as pd

from ope._format import (
    SIG_DIGITS,
    format_estimate,
    format_fixed,
    format_number,
    format_setting,
    format_share,
    format_signed,
    is_number,
    note_key,
    safe_text,
    se_decimals,
)
from ope._output import atomic_path
from ope._thresholds import heavy_tail, shown_notes
from ope.diagnostics.msm import describe_approval_tipping, describe_tipping
from ope.diagnostics.segments import PLAN_POINTER
from ope.marginal import SUFFICIENCY_ALPHA
from ope.exceptions import DataFileError, ParameterError, ValidationError
from ope.report.views import (
    ANSWERABLE,
    BETTER,
    MAX_FIGURE_CANDIDATES,
    MAX_REPORT_SEGMENTS,
    UNCLEAR,
    WORSE,
    CandidateVerdict,
    Truth,
    candidate_verdicts,
    comparison_method,
    comparison_table,
    check_cap,
    figure_candidates,
    headline_estimator,
    logging_reference,
    overlap_verdicts,
    ranked_candidates,
    segment_estimates,
    summarized_line,
    top_segments,
)

__all__ = [
    "REPORT_SECTIONS",
    "MONITOR_SECTIONS",
    "DEPENDENCIES",
    "render_report",
    "write_report",
    "check_report_destination",
]

#: The sections of every report, in order: (id, heading). Each is always present; a section
#: whose input was not given says what would fill it (:func:`_not_in_report`), and the
#: contents list it apart.
REPORT_SECTIONS: Final = (
    ("headline", "The answer"),
    ("estimates", "Estimates"),
    ("comparisons", "Paired differences"),
    ("distribution", "Outcome distributions"),
    ("guardrails", "Several outcomes: guardrails"),
    ("monitoring", "Monitoring over time"),
    ("sequences", "Language-model logs: what they can tell"),
    ("continuous", "Continuous actions: bandwidths and kernel windows"),
    ("slates", "Slates: what each estimator assumes, and overlap per slot"),
    ("candidates", "Each candidate: weights and overlap"),
    ("segments", "Per segment"),
    ("plan", "Exploration plan"),
    ("validation", "Validation of the logs"),
    ("certificate", "Certificate of a learned policy"),
    ("notes", "Notes"),
    ("reproduce", "Reproduce this report"),
)

#: The sections of a report made from a monitor alone (``ope monitor --report``): the
#: others need the rows, which a monitor does not keep.
MONITOR_SECTIONS: Final = ("headline", "monitoring", "notes", "reproduce")

#: Distributions whose versions the reproduce section lists (beside ope and Python).
DEPENDENCIES: Final = ("numpy", "pandas", "scipy", "scikit-learn", "pyarrow", "matplotlib")

#: Plan actions listed per plan row (the rest are counted).
_PLAN_ACTIONS: Final = 3

_CSS: Final = """
:root { --ink: #1f2328; --muted: #59636e; --line: #d1d9e0; --better: #1a7f37;
        --worse: #c62828; --unclear: #9a6700; --bg-soft: #f6f8fa; }
* { box-sizing: border-box; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", Arial, sans-serif;
       color: var(--ink); margin: 0 auto; max-width: 1100px; padding: 24px 32px 64px; }
h1 { font-size: 1.7em; margin: 0 0 4px; }
h2 { font-size: 1.3em; border-bottom: 1px solid var(--line); padding-bottom: 4px;
     margin-top: 36px; }
h3 { font-size: 1.08em; margin: 22px 0 6px; }
p.sub, .muted { color: var(--muted); }
nav ol { columns: 2; margin: 8px 0 0; padding-left: 20px; }
nav p.absent, section.absent { color: var(--muted); font-size: 0.9em; }
section.absent h2 { font-size: 1em; }
nav a, a { color: #0550ae; }
section.headline { border: 2px solid var(--ink); border-radius: 8px; padding: 4px 20px 12px;
                   margin-top: 16px; }
section.headline h2 { border: 0; margin-top: 12px; }
ul.answers { font-size: 1.08em; padding-left: 20px; }
ul.answers li { margin: 4px 0; }
.badge { display: inline-block; padding: 0 8px; border-radius: 10px; font-size: 0.85em;
         font-weight: 600; white-space: nowrap; border: 1px solid currentColor; }
.better { color: var(--better); } .worse { color: var(--worse); }
.unclear { color: var(--unclear); }
table { border-collapse: collapse; margin: 8px 0 12px; font-size: 0.88em; }
th, td { border-bottom: 1px solid var(--line); padding: 3px 8px; text-align: left;
         vertical-align: top; }
th { background: var(--bg-soft); font-weight: 600; }
td.prose { min-width: 14em; }
.scroll { overflow-x: auto; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.num { white-space: nowrap; }
figure { margin: 10px 0 16px; }
figure svg { width: 100%; max-width: 980px; height: auto; display: block; }
figcaption { color: var(--muted); font-size: 0.88em; margin-top: 2px; }
article.candidate { border-top: 1px dashed var(--line); margin-top: 14px; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px;
           font-size: 0.92em; margin: 6px 0; }
dl.facts dt { color: var(--muted); } dl.facts dd { margin: 0; }
.note { background: var(--bg-soft); border-left: 3px solid var(--line); padding: 6px 10px; }
code { font-size: 0.92em; background: var(--bg-soft); padding: 0 3px; }
pre { background: var(--bg-soft); padding: 8px 10px; white-space: pre-wrap;
      word-break: break-all; font-size: 0.88em; }
@media print {
  body { max-width: none; padding: 0; font-size: 10.5pt; }
  nav { display: none; }
  h2 { break-after: avoid; }
  figure, table, article.candidate, section.headline { break-inside: avoid; }
  a { color: inherit; text-decoration: none; }
  .badge { border-width: 1px; }
  .scroll { overflow: visible; }
}
"""


def _settings_paragraph(evaluation: Any) -> str:
    """The settings given or tuned per candidate (``Evaluation.settings``; with
    ``estimators="auto"`` the tuning rule and grid of each), or nothing."""
    settings = getattr(evaluation, "settings", None) or {}
    if not settings:
        return ""
    selection = getattr(evaluation, "selection", None)
    tuned = {
        c.setting: c
        for c in (*getattr(evaluation, "tuning", ()), *getattr(selection, "tuning", ()))
    }
    parts = []
    for key, values in settings.items():
        choice = tuned.get(key)
        how = _e(choice.how()) if choice is not None else "given per candidate"
        listed = ", ".join(
            f"{_e(p)} <strong>{_e(format_setting(v))}</strong>" for p, v in values.items()
        )
        parts.append(f"<code>{_e(key)}</code> {how}: {listed}")
    return "<p>Settings per candidate: " + "; ".join(parts) + ".</p>"


def _e(value: Any) -> str:
    """HTML-escaped text (quotes too: safe in content and in attributes), control and bidi
    characters shown escaped (:func:`ope._format.safe_text`)."""
    return html.escape(safe_text(value), quote=True)


#: What the diagnostics' pointer to the exploration plan (:data:`PLAN_POINTER`, the Python
#: call) reads as in a report, whose reader may work in Python or on the command line: both
#: ways (the flags are ``ope diagnose``'s), and a link to the report's own plan section.
_PLAN_POINTER_HTML: Final = (
    '(see the <a href="#plan">exploration plan</a>: <code>Diagnostics.plan()</code> in Python, '
    "<code>ope diagnose --reward-range LO HI --target-width W --new-rows N</code> on the "
    "command line)"
)


def _e_advice(value: Any) -> str:
    """:func:`_e` of a text of the diagnostics (a gap's reason, a note), its pointer to the
    exploration plan said for both audiences (:data:`_PLAN_POINTER_HTML`)."""
    return _PLAN_POINTER_HTML.join(_e(part) for part in str(value).split(PLAN_POINTER))


def _more(summary: str) -> str:
    """The line that stands for what the report's size bounds leave out
    (:data:`ope.report.views.MAX_REPORT_SEGMENTS`, :data:`~ope.report.views.MAX_FIGURE_CANDIDATES`),
    or nothing."""
    if not summary:
        return ""
    return f'<p class="note more">{_e(summary)}</p>'


def _drawn(ctx: Mapping[str, Any], policies: Sequence[str]) -> tuple[list[str], list[str]]:
    """Of ``policies``, those drawn in full and those summarized (each in the given order):
    the first ``max_candidates`` of the ranking (:func:`ope.report.views.ranked_candidates`)."""
    return figure_candidates(policies, limit=ctx["max_candidates"], ranked=ctx["ranked"])


#: How to draw every candidate, in the note that says some are summarized.
_RAISE_CAP: Final = (
    "To draw them all, pass max_candidates=None to ope.report.write_report (or render_report), "
    "or --max-candidates all to ope report and ope evaluate --report."
)


def _cap_note(ctx: Mapping[str, Any]) -> str:
    """The visible note that some candidates are summarized, not drawn: how many, which are
    drawn and how to draw them all (nothing when every candidate is drawn)."""
    policies = [v.policy for v in ctx["verdicts"]]
    drawn, rest = _drawn(ctx, policies)
    if not rest:
        return ""
    how = (
        "those with the highest lower end of the interval of their difference with the "
        "logging policy (the estimate less its uncertainty)"
        if ctx["evaluation"] is not None
        else "those the logs cannot answer for first, then in their order"
    )
    return (
        f'<p class="note cap" id="cap">{_e(_count(len(drawn), "candidate"))} of '
        f"{_e(_num(len(policies)))} are drawn in full: {_e(how)}. The other "
        f"{_e(_count(len(rest), 'candidate'))} are summarized: every estimate and difference "
        'is still in the tables, and their overlap in <a href="#summarized">one table</a>. '
        f"{_e(_RAISE_CAP)}</p>"
    )


def _answer_class(answer: str) -> str:
    return {BETTER: "better", ANSWERABLE: "better", WORSE: "worse"}.get(answer, "unclear")


def _badge(answer: str) -> str:
    return f'<span class="badge {_answer_class(answer)}">{_e(answer)}</span>'


def _table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    numeric: Sequence[int] = (),
    raw: bool = False,
    wide: int | None = None,
) -> str:
    """A table; cells are escaped unless ``raw`` (then the caller escaped them). Columns in
    ``numeric`` are right-aligned; column ``wide`` holds prose (a wider minimum width)."""
    num = set(numeric)

    def cell(tag: str, i: int, text: str) -> str:
        cls = ' class="num"' if i in num else ' class="prose"' if i == wide else ""
        return f"<{tag}{cls}>{text if raw else _e(text)}</{tag}>"

    head = "".join(cell("th", i, _e(h) if raw else h) for i, h in enumerate(header))
    body = "".join(
        "<tr>" + "".join(cell("td", i, c) for i, c in enumerate(r)) + "</tr>" for r in rows
    )
    return (
        f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody>'
        "</table></div>"
    )


# --------------------------------------------------------------------------------------------
# numbers: the rules of ope._format, with a dash for a missing value and a typographic minus
# --------------------------------------------------------------------------------------------
def _minus(text: str) -> str:
    return "−" + text[1:] if text.startswith("-") else text


def _missing(x: Any) -> bool:
    return x is None or (is_number(x) and math.isnan(float(x)))


def _num(x: Any, sig: int = SIG_DIGITS, *, decimals: int | None = None, trim: bool = True) -> str:
    """A number of the page by :mod:`ope._format`: ``decimals`` (a column's, from its standard
    errors: :func:`_decimals`) or, without, ``sig`` significant digits (trailing zeros dropped
    unless ``trim`` is False); missing as ``–``."""
    if _missing(x):
        return "–"
    if not is_number(x):
        return safe_text(x)
    if decimals is not None:
        return _minus(format_fixed(x, decimals))
    return _minus(format_number(x, sig, trim=trim))


def _signed(
    x: Any, sig: int = SIG_DIGITS, *, decimals: int | None = None, trim: bool = True
) -> str:
    """:func:`_num` of a difference, with its sign (:func:`ope._format.format_signed`)."""
    if _missing(x):
        return "–"
    return _minus(format_signed(x, decimals=decimals, sig=sig, trim=trim and decimals is None))


def _share(x: Any) -> str:
    """A share as a percentage (:func:`ope._format.format_share`); missing as ``–``."""
    return "–" if _missing(x) else _minus(format_share(x))


def _decimals(std_errors: Iterable[Any], values: Iterable[Any] = ()) -> int | None:
    """The decimals of a column of estimates: two significant digits of its smallest usable
    standard error (:func:`ope._format.se_decimals`), None when none is usable (each number
    then gets :data:`~ope._format.SIG_DIGITS` significant digits)."""
    finite = [abs(float(v)) for v in values if is_number(v) and math.isfinite(float(v))]
    return se_decimals(list(std_errors), scale=max(finite) if finite else None)


def _count(n: int, singular: str, plural: str | None = None) -> str:
    """``n`` and the noun it counts, singular for one: ``1 candidate``, ``5 candidates``.

    >>> _count(1, "candidate"), _count(100000, "logged row"), _count(2, "policy", "policies")
    ('1 candidate', '100,000 logged rows', '2 policies')
    """
    return f"{_num(n)} {singular if n == 1 else plural or singular + 's'}"


def _interval(low: float, high: float, decimals: int | None = None, *, signed: bool = False) -> str:
    f = _signed if signed else _num
    if not (math.isfinite(low) and math.isfinite(high)):
        return "–"
    # both ends keep their trailing zeros: [0.1162, 0.1400], not [0.1162, 0.14]
    return f"[{f(low, decimals=decimals, trim=False)}, {f(high, decimals=decimals, trim=False)}]"


class _Figures:
    """Draws the report's figures as inline SVG, numbered in page order."""

    def __init__(self) -> None:
        self.count = 0
        try:
            from ope.plots import require_matplotlib

            require_matplotlib()
            self.missing: str | None = None
        except ImportError as exc:
            self.missing = str(exc)

    def figure(self, draw: Callable[..., Any], caption: str, *, label: str) -> str:
        """``draw()`` (a plot of :mod:`ope.plots` with ``ax=None``) as a ``<figure>``."""
        if self.missing is not None:
            return f'<p class="note">Figure omitted: {_e(self.missing)}</p>'
        import matplotlib

        from ope.plots import detached_figures
        from ope.report.svg import REPORT_RC, inline_svg

        self.count += 1
        with matplotlib.rc_context(REPORT_RC), detached_figures():
            ax = draw()
            svg = inline_svg(ax.figure, f"f{self.count}-", label=label)
        return f"<figure>{svg}<figcaption>{caption}</figcaption></figure>"

    def panels(
        self,
        draws: Sequence[Callable[[Any], Any]],
        caption: str,
        *,
        label: str,
        height: float,
        left: float,
        right: float = 0.3,
        width: float = 8.0,
        gap: float = 0.9,
    ) -> str:
        """One ``<figure>`` of ``len(draws)`` panels stacked top to bottom, ``draw(ax)`` each
        (a plot of :mod:`ope.plots` given its axes): the per-candidate plots of the report.

        One figure for every candidate rather than one each, and fixed margins in inches
        (``height`` per panel, ``gap`` between panels, ``left`` and ``right``) rather than a
        layout engine, which draws each figure twice and measures every label: the work is
        one drawing pass over the panels, linear in their number."""
        if self.missing is not None:
            return f'<p class="note">Figure omitted: {_e(self.missing)}</p>'
        if not draws:
            return ""
        import matplotlib
        from matplotlib.figure import Figure

        from ope.report.svg import REPORT_RC, inline_svg

        self.count += 1
        n = len(draws)
        top, bottom = 0.4, 0.6
        total = top + bottom + n * height + (n - 1) * gap
        with matplotlib.rc_context(REPORT_RC):
            fig = Figure(figsize=(width, total))
            axes = fig.subplots(n, 1, squeeze=False)[:, 0]
            fig.subplots_adjust(
                left=left / width,
                right=1 - right / width,
                top=1 - top / total,
                bottom=bottom / total,
                hspace=gap / height,
            )
            for draw, ax in zip(draws, axes):
                draw(ax)
            svg = inline_svg(fig, f"f{self.count}-", label=label)
        return f"<figure>{svg}<figcaption>{caption}</figcaption></figure>"


# --------------------------------------------------------------------------------------------
# inputs
# --------------------------------------------------------------------------------------------
#: What the report reads of a certificate and of a validation report (their duck types).
_CERTIFICATE_FIELDS: Final = ("verdict", "reason", "policy", "lower_bound", "confidence_level")
_VALIDATION_FIELDS: Final = ("source", "rows_read", "rows_used", "rejected", "examples")


def _checked(
    evaluation: Any, diagnostics: Any, certificate: Any = None, validation: Any = None
) -> None:
    if evaluation is None and diagnostics is None:
        raise ParameterError(
            "a report needs an evaluation (ope.evaluate(...)) or diagnostics "
            "(ope.diagnose(...)), or both; got neither."
        )
    if evaluation is not None and not all(
        hasattr(evaluation, a)
        for a in ("table", "comparisons", "policies", "estimators", "logging")
    ):
        raise ParameterError(
            "`evaluation` must be the result of ope.evaluate (an ope.Evaluation); got "
            f"{type(evaluation).__name__}."
        )
    if diagnostics is not None and not all(
        hasattr(diagnostics, a) for a in ("weight_histogram", "segments", "coverage_matrix", "rows")
    ):
        raise ParameterError(
            "`diagnostics` must be the result of ope.diagnose (an ope.Diagnostics); got "
            f"{type(diagnostics).__name__}."
        )
    if certificate is not None and not all(hasattr(certificate, a) for a in _CERTIFICATE_FIELDS):
        raise ParameterError(
            "`certificate` must be the safety gate's certificate (an ope.Certificate, from "
            f"ope.learn_from_logs or ope.certify); got {type(certificate).__name__}."
        )
    if validation is not None and not all(hasattr(validation, a) for a in _VALIDATION_FIELDS):
        raise ParameterError(
            "`validation` must be the logs' validation report (an ope.ValidationReport, e.g. "
            f"logs.report); got {type(validation).__name__}."
        )


def _source(
    evaluation: Any, validation: Any, provenance: Mapping[str, Any]
) -> tuple[str, int | None]:
    report = validation if validation is not None else getattr(evaluation, "report", None)
    source = provenance.get("input", getattr(report, "source", None))
    rows = provenance.get("rows", getattr(report, "rows_read", None))
    return ("" if source is None else str(source)), rows


# --------------------------------------------------------------------------------------------
# sections
# --------------------------------------------------------------------------------------------
def _names(items: Sequence[CandidateVerdict], detail: Callable[[CandidateVerdict], str]) -> str:
    return ", ".join(f"<strong>{_e(v.policy)}</strong> ({detail(v)})" for v in items)


def _headline(ctx: dict[str, Any]) -> str:
    ev, verdicts, ref = ctx["evaluation"], ctx["verdicts"], ctx["reference"]
    truth: Truth = ctx["truth"]
    level = ctx["level"]
    out = []
    if ev is None:
        can = [v for v in verdicts if v.answer != UNCLEAR]
        cannot = [v for v in verdicts if v.answer == UNCLEAR]
        out.append(
            "<p>These are overlap diagnostics only (no estimates were given): they say "
            "for which candidates these logs can answer, not how good they are.</p>"
        )
        items = []
        if can:
            items.append(
                "<li>The logs can answer for: "
                + ", ".join(f"<strong>{_e(v.policy)}</strong>" for v in can)
                + ".</li>"
            )
        if cannot:
            items.append(
                '<li><span class="unclear">The logs cannot tell</span> for: '
                + _names(cannot, lambda v: _e(v.summary))
                + ".</li>"
            )
        out.append(f'<ul class="answers">{"".join(items)}</ul>')
        rows = [[_e(v.policy), _badge(v.answer), _e("; ".join(v.reasons))] for v in verdicts]
        out.append(_table(["candidate", "answer", "why"], rows, raw=True, wide=2))
        out.append(_settings_paragraph(ctx["evaluation"]))
        return "".join(out)
    better = sorted((v for v in verdicts if v.answer == BETTER), key=lambda v: -v.lower_bound)
    worse = sorted((v for v in verdicts if v.answer == WORSE), key=lambda v: v.upper_bound)
    unclear = [v for v in verdicts if v.answer == UNCLEAR]
    dec = _decimals([ev.logging.std_error], [ref.value])
    comps: pd.DataFrame = ctx["comparisons"]
    # the differences, their bounds and the exact differences: at the precision of the paired
    # differences' standard errors, as in the comparisons' tables
    ddec = _decimals(comps["std_error"], comps["difference"]) if len(comps) else None

    def rel(x: float) -> str:
        if ref.value > 0 and math.isfinite(x):
            return f", {_signed(100 * x / ref.value, 2)}% of its value"
        return ""

    items = []
    if better:
        items.append(
            '<li><span class="better">Better than the logging policy</span>: '
            + _names(
                better,
                lambda v: (
                    f"by at least {_e(_signed(v.lower_bound, decimals=ddec))}"
                    f"{_e(rel(v.lower_bound))}"
                ),
            )
            + ".</li>"
        )
    else:
        items.append("<li>No candidate is shown to be better than the logging policy.</li>")
    if worse:
        items.append(
            '<li><span class="worse">Worse</span>: '
            + _names(worse, lambda v: f"by at least {_e(_signed(-v.upper_bound, decimals=ddec))}")
            + ".</li>"
        )
    if unclear:
        items.append(
            '<li><span class="unclear">The logs cannot tell</span> for '
            + _names(unclear, lambda v: _e(v.summary or "see below"))
            + ".</li>"
        )
    out.append(f'<ul class="answers">{"".join(items)}</ul>')
    out.append(
        f"<p>“By at least” is the lower end of the {level:.0%} interval of the paired "
        f"difference with the logging policy (the same logged {_unit(ctx['evaluation'])}), "
        + (
            "under the estimator chosen for each candidate by off-policy cross-validation "
            "(estimators=&quot;auto&quot;; the others are in the tables below)"
            if getattr(ctx["evaluation"], "selection", None) is not None
            else "the smallest over the estimators"
        )
        + f". The logging policy's value on these rows is <strong>"
        f"{_e(_num(ref.value, decimals=dec))}</strong> {_e(_interval(ref.ci_low, ref.ci_high, dec))}"
        + (
            f"; its exact value is {_e(_num(truth.logging, decimals=dec))}"
            if truth.logging is not None
            else ""
        )
        + ".</p>"
    )
    out.append(_settings_paragraph(ctx["evaluation"]))
    has_truth = any(v.true_difference is not None for v in verdicts)
    header = ["candidate", "answer", "estimated difference", "how sure: lower end"]
    header += ["exact difference"] if has_truth else []
    header += ["why / what to watch"]
    rows = []
    for v in verdicts:
        est = (
            "–"
            if not math.isfinite(v.low)
            else _signed(v.low, decimals=ddec)
            if v.low == v.high
            else f"{_signed(v.low, decimals=ddec)} to {_signed(v.high, decimals=ddec)}"
        )
        row = [
            f"<strong>{_e(v.policy)}</strong>",
            _badge(v.answer),
            _e(est),
            (
                f'{_e(_signed(v.lower_bound, decimals=ddec))}<br><span class="muted">'
                f"{_e(v.bound_estimator)}</span>"
                if v.bound_estimator
                else "–"
            ),
        ]
        if has_truth:
            row.append(
                _e(_signed(v.true_difference, decimals=ddec))
                if v.true_difference is not None
                else "–"
            )
        row.append(_e("; ".join(v.reasons)) or "–")
        rows.append(row)
    out.append(
        _table(
            header,
            rows,
            numeric=(2, 3) + ((4,) if has_truth else ()),
            raw=True,
            wide=len(header) - 1,
        )
    )
    out.append(
        '<p class="muted">Intervals are per comparison, not adjusted for looking at '
        f'{_count(len(verdicts), "candidate")} at once. Details: <a href="#comparisons">paired '
        'differences</a>, <a href="#candidates">overlap</a>, <a href="#segments">'
        "segments</a>.</p>"
    )
    return "".join(out)


def _tail_fact(r: Any) -> str:
    """The candidate's Pareto k-hat in words (one row of the diagnostics)."""
    k, limit = r["pareto_k"], r["pareto_k_threshold"]
    if math.isnan(k):
        return "no tail to fit (the largest weights are tied or zero: bounded weights)"
    shown = "inf (too few positive weights)" if math.isinf(k) else f"{k:.2f}"
    verdict = {
        "unreliable": f"above {limit:.2f}: the unclipped weighting estimates are unreliable",
        "infinite_variance": "at least 0.5: the weights' variance is likely infinite",
        "": f"at most {limit:.2f}: reliable",
    }[heavy_tail(k, limit)]
    # Hill's index stays in the table: on weights that are not Pareto above the threshold (the
    # bundled sample's are discrete) it can disagree with 1 / k-hat, and k-hat is the rule
    return f"Pareto k-hat {shown} ({verdict}), fitted to the {r['tail_length']:,} largest"


def _sensitivity_fact(d: Any, policy: str) -> str:
    """The candidate's tipping point and a few points of its bound curve, in words."""
    analysis = d.sensitivity
    text = describe_tipping(
        analysis.tipping_points().set_index("policy").loc[policy, "decision"],
        analysis.gamma_star(policy),
    )
    curve = analysis.table()
    mine = curve[(curve["policy"] == policy) & (curve["gamma"] > 1.0)].head(4)
    points = "; ".join(
        f"Γ = {g:g}: {_interval(lo, hi)}"
        for g, lo, hi in zip(mine["gamma"], mine["lower"], mine["upper"])
    )
    source = (
        "the propensities were estimated"
        if analysis.propensity_source == "estimated"
        else "requested"
    )
    return (
        f"{text}. Bounds of its {analysis.estimator.upper()} value: {points} "
        f"(marginal sensitivity model; {source})"
    )


def _estimates(ctx: dict[str, Any], figures: _Figures) -> str:
    ev = ctx["evaluation"]
    truth: Truth = ctx["truth"]
    if ev is None:
        return (
            "<p>No estimates: this report was made from diagnostics alone. "
            "<code>ope.evaluate(...)</code> (or <code>ope report LOGS</code>) adds them.</p>"
        )
    ref = ctx["reference"]
    table = ev.table()
    dec = _decimals([*table["std_error"], ev.logging.std_error], [*table["value"], ref.value])
    drawn, rest = _drawn(ctx, ev.policies)
    out = [
        figures.figure(
            lambda: _plots().plot_evaluation(ev, truth=truth, policies=drawn),
            f"Each candidate × estimator: the point estimate and its {ctx['level']:.0%} "
            f"{_e(ev.ci_method)} interval. Grey line and band: the logging policy's value and "
            "interval on the same rows"
            + ("; black diamonds: the exact values" if truth else "")
            + ". An open marker covers the clipped value (clipped IPS), not the policy's value.",
            label="forest plot of the estimates",
        ),
        _more(summarized_line(rest)),
    ]
    header = [
        "policy",
        "estimator",
        "value",
        "std. error",
        f"{ctx['level']:.0%} interval",
        "covers",
        "ESS / n",
    ]
    if truth:
        header += ["exact value", "in interval"]
    rows = [
        [
            "logging policy",
            "mean discounted return" if hasattr(ev, "gamma") else "mean reward",
            _num(ref.value, decimals=dec),
            _num(ev.logging.std_error, decimals=dec),
            _interval(ref.ci_low, ref.ci_high, dec),
            "policy value",
            "100%",
        ]
        + (
            [
                _num(truth.logging, decimals=dec) if truth.logging is not None else "–",
                _in(truth.logging, ref.ci_low, ref.ci_high),
            ]
            if truth
            else []
        )
    ]
    for r in table.itertuples(index=False):
        exact = truth.policies.get(r.policy)
        rows.append(
            [
                r.policy,
                r.estimator,
                _num(r.value, decimals=dec),
                _num(r.std_error, decimals=dec),
                _interval(r.ci_low, r.ci_high, dec),
                str(r.target),
                _share(r.ess_ratio),
            ]
            + (
                [
                    _num(exact, decimals=dec) if exact is not None else "–",
                    _in(exact, r.ci_low, r.ci_high),
                ]
                if truth
                else []
            )
        )
    out.append(_table(header, rows, numeric=(2, 3, 4, 6, 7)))
    return "".join(out)


def _in(x: float | None, low: float, high: float) -> str:
    if x is None or not (math.isfinite(low) and math.isfinite(high)):
        return "–"
    return "yes" if low <= x <= high else "NO"


def _comparisons(ctx: dict[str, Any], figures: _Figures) -> str:
    ev = ctx["evaluation"]
    if ev is None:
        return "<p>No paired differences: they need an evaluation (ope.evaluate).</p>"
    comps: pd.DataFrame = ctx["comparisons"]
    if not len(comps):
        return (
            "<p>No paired differences: a streamed evaluation keeps merged statistics, not "
            "the rows that pairing needs. Evaluate eagerly "
            "(<code>ope.evaluate(ope.read_logs(...))</code>) to compare.</p>"
        )
    truth: Truth = ctx["truth"]
    method = comparison_method(ev)
    dec = _decimals(comps["std_error"], comps["difference"])
    out = [
        f"<p>Differences in value on the same logged {_unit(ev)} ({ctx['level']:.0%} "
        f"{_e(method)} intervals from the per-{_unit(ev)[:-1]} terms of both estimates), ranked "
        "by the lower end of "
        "the interval: the top rows are the surest gains.</p>"
    ]
    vs = comps[comps["baseline"] == "logging"]
    drawn, rest = _drawn(ctx, ev.policies)
    shown = comps[
        comps["policy"].isin(drawn)
        & (comps["baseline"].isin(drawn) | (comps["baseline"] == "logging"))
    ]
    out.append("<h3>Against the logging policy</h3>")
    out.append(_more(summarized_line(rest)))
    out.append(
        figures.figure(
            lambda: _plots().plot_comparisons(ev, truth=truth, comparisons=shown),
            "Green: the interval lies above 0; red: below; grey: it includes 0"
            + ("; black diamonds: the exact differences" if truth else "")
            + ".",
            label="paired differences with the logging policy",
        )
    )
    out.append(_comparison_table(vs, truth, dec))
    between = comps[comps["baseline"] != "logging"]
    if len(between):
        out.append(f"<h3>Between candidates ({_e(headline_estimator(ev))})</h3>")
        out.append(
            figures.figure(
                lambda: _plots().plot_comparisons(ev, between=True, truth=truth, comparisons=shown),
                "Each pair as higher-valued minus lower-valued candidate.",
                label="paired differences between candidates",
            )
        )
        out.append(_comparison_table(between, truth, dec))
        est = headline_estimator(ev)
        left = [p for p in ev.policies if (p, est) not in ev.estimates]
        if left:  # a slate candidate whose probabilities cannot serve that estimator
            out.append(
                f"<p>Not in these pairs (no {_e(est)} estimate): "
                f"{', '.join(_e(p) for p in left)}; see the section on slates.</p>"
            )
    return "".join(out)


def _comparison_table(rows: pd.DataFrame, truth: Truth, dec: int | None) -> str:
    header = ["difference", "estimator", "estimate", "std. error", "interval", "answer"]
    if truth:
        header.append("exact")
    body = []
    for r in rows.itertuples(index=False):
        line = [
            f"{r.policy} − {r.baseline}",
            r.estimator,
            _signed(r.difference, decimals=dec),
            _num(r.std_error, decimals=dec),
            _interval(r.ci_low, r.ci_high, dec, signed=True),
            r.answer,
        ]
        if truth:
            exact = truth.difference(r.policy, r.baseline)
            line.append("–" if exact is None else _signed(exact, decimals=dec))
        body.append(line)
    return _table(header, body, numeric=(2, 3, 4, 6))


def _embedding_checks(ev: Any) -> str:
    """Per-item against marginal weights, for the marginalized estimators (MIPS and kin): each
    candidate's effective sample sizes and the test of a direct effect of the item."""
    checks = getattr(ev, "embedding_checks", ()) if ev is not None else ()
    if not checks:
        return ""
    rows = []
    for c in checks:  # loop over candidates
        gain = c.ess_embedding / c.ess_items if c.ess_items > 0 else math.inf
        verdict = (
            "evidence of a direct effect: MIPS biased"
            if c.p_value < SUFFICIENCY_ALPHA
            else "no evidence against the embedding"
        )
        rows.append(
            [
                c.policy,
                _num(c.ess_items),
                _num(c.ess_embedding),
                f"{_num(gain)}×",
                _minus(_num(c.difference)),
                _num(c.std_error),
                _num(c.p_value),
                verdict,
            ]
        )
    return (
        '<h3 id="embedding-weights">Per-item against marginal weights</h3>'
        "<p>The marginalized estimators weigh each row by its logged embedding's probability "
        "under the candidate over the logger's, summed over the row's candidates, instead of "
        "the item's: the effective sample size (ESS) of each kind of weight, and the test of "
        "the embedding. Per-item IPS is unbiased whatever the embedding, MIPS only when the "
        "reward depends on the item through its embedding alone, so their difference on the "
        "same rows (IPS − MIPS, with its standard error and p-value) far from 0 is evidence "
        "of a direct effect of the item that biases MIPS. The test has little power when the "
        "per-item weights are heavy: a large p-value does not prove the embedding "
        "sufficient.</p>"
        + _table(
            [
                "policy",
                "ESS per item",
                "ESS per embedding",
                "gain",
                "IPS − MIPS",
                "SE",
                "p-value",
                "reading",
            ],
            rows,
            numeric=(1, 2, 3, 4, 5, 6),
            wide=7,
        )
    )


def _candidates(ctx: dict[str, Any], figures: _Figures) -> str:
    d, ev = ctx["diagnostics"], ctx["evaluation"]
    truth: Truth = ctx["truth"]
    verdicts = {v.policy: v for v in ctx["verdicts"]}
    out = [_embedding_checks(ev)]
    if d is None:
        unit = _unit(ev)
        out.append(
            "<p>The distribution of the importance weights and the outer/inner split "
            "come from the diagnostics: pass <code>diagnostics=ope.diagnose(...)</code> "
            "(the command <code>ope report</code> does). The effective sample sizes of "
            "the estimates:</p>"
            if unit == "rows"
            else "<p>The distribution of the importance weights and the outer/inner split are "
            "diagnostics of bandit logs (one decision per row); "
            + (
                "here the weights are products over each episode."
                if unit == "episodes"
                else "the overlap of slates per slot is in the section on slates."
            )
            + " The effective sample sizes of the estimates (Kish's, of the weights each "
            "estimator uses):</p>"
        )
        t = ev.table()
        out.append(
            _table(
                ["policy", "estimator", "ESS", "ESS / n"],
                [
                    [r.policy, r.estimator, _num(r.ess), _share(r.ess_ratio)]
                    for r in t.itertuples(index=False)
                ],
                numeric=(2, 3),
            )
        )
        return "".join(out)
    rows = {r["policy"]: r for r in d.table().to_dict("records")}
    weighted = getattr(d, "sampling_weight", None)
    if weighted is not None:
        out.append(
            '<p class="note" id="weighted-diagnostics">Weighted diagnostics: the rows carry '
            f"sampling weights (column <code>{_e(weighted)}</code>, 1 / P(row kept)), so every "
            "diagnostic below is Horvitz-Thompson weighted and describes the logged population: "
            "weight shares, quantiles and histograms are of the population, the mean weight, "
            "the clipped and unsupported mass and the segment masses are Hajek means, the "
            "effective sample size is Kish's of the sampling times the importance weights "
            "(compared with Kish's of the sampling weights alone), and the outer/inner "
            "intervals use linearized variances with normal margins.</p>"
        )
    drawn, rest = _drawn(ctx, d.policies)
    out.append(_more(summarized_line(rest)))
    if d.reward_range is not None:
        ref = ctx["reference"]
        out.append(
            figures.figure(
                lambda: _plots().plot_interval_split(
                    d, truth=truth, logging_value=None if ref is None else ref.value, policies=drawn
                ),
                "The outer/inner interval (Bottou et al. 2013) of each candidate at its clip level: "
                "the blue part is sampling error, which more logs of the same kind shrink; the "
                "orange part is coverage (clipped or unsupported mass), which only different "
                "exploration shrinks.",
                label="outer and inner interval split",
            )
        )
    else:
        out.append(
            '<p class="note">No outer/inner split: the diagnostics were computed without '
            "an a priori <code>reward_range</code>.</p>"
        )
    out.append(
        figures.panels(
            [functools.partial(_weights_panel, d, policy) for policy in drawn],
            "One panel per candidate drawn in full: the share of rows (bars) and of the "
            "candidate's probability mass (orange) per factor-of-two bin of the weight π/π₀; the "
            "dashed line is the clip level. Mass far right of the rows means a few rows carry "
            "the estimate.",
            label="importance weights, one panel per candidate: " + ", ".join(drawn),
            height=2.0,
            left=0.75,
            right=2.7,
        )
    )
    shown = set(drawn)
    for i, policy in enumerate(d.policies, 1):
        if policy not in shown:
            continue
        r = rows[policy]
        v = verdicts.get(policy)
        out.append(
            f'<article class="candidate" id="candidate-{i}"><h3>{_e(policy)} '
            + (_badge(v.answer) if v is not None else "")
            + "</h3>"
        )
        of_what = (
            _count(r["n"], "row")
            if weighted is None
            else f"the sampling weights' own ESS {_num(r['ess_reference'])}, from "
            f"{_count(r['n'], 'kept row')}"
        )
        facts = [
            ("effective sample size", f"{_num(r['ess'])} ({_share(r['ess_ratio'])} of {of_what})"),
            (
                "largest weight",
                f"{_num(r['weight_max'])} (99.9th percentile {_num(r['weight_q999'])})",
            ),
            (
                "mean weight",
                f"{_minus(format_estimate(r['mean_weight'], r['mean_weight_se']))} ± "
                f"{format_estimate(r['mean_weight_se'], r['mean_weight_se'])} "
                f"(expected {_num(r['mean_weight_expected'])}: "
                f"{r['propensity_check']})",
            ),
        ]
        facts.append(("tail of the weights", _tail_fact(r)))
        if r.get("sensitivity_decision"):
            facts.append(("sensitivity to wrong propensities", _sensitivity_fact(d, policy)))
        if _finite(r["unsupported_mass"]):
            facts.append(("mass where the logger never goes", _share(r["unsupported_mass"])))
        if _finite(r["ci_low"]):
            rule = "given" if r["clip_rule"] == "given" else "the narrowest interval"
            facts.append(
                (
                    f"outer/inner interval at clip level {_num(r['max_weight'])}",
                    f"{_interval(r['ci_low'], r['ci_high'])} ({rule}; {_share(r['clipped_share'])} "
                    f"of rows and {_share(r['clipped_weight_share'])} of the weight clipped): "
                    f"sampling {_num(r['sampling_width'])}, coverage {_num(r['coverage_width'])} "
                    f"({_share(r['coverage_share'])} of this interval)",
                )
            )
            if _finite(r["verdict_max_weight"]) and r["verdict_max_weight"] != r["max_weight"]:
                facts.append(
                    (
                        f"narrowest interval: clip level {_num(r['verdict_max_weight'])}",
                        f"coverage {_share(r['verdict_coverage_share'])} of that interval (the "
                        "verdict below reads this one)",
                    )
                )
        if _finite(r.get("log_smoothing_low", math.nan)):
            facts.append(
                (
                    "log-smoothing lower bound",
                    f"{_num(r['log_smoothing_low'])} (one-sided, {_share(d.confidence_level)}; "
                    "finite-sample with no clip level or weight bound: Sakhi et al. 2024)",
                )
            )
        facts.append(("verdict", f"{r['verdict']} ({r['verdict_reason']})"))
        out.append(
            '<dl class="facts">'
            + "".join(f"<dt>{_e(k)}</dt><dd>{_e(val)}</dd>" for k, val in facts)
            + "</dl></article>"
        )
    if rest:
        out.append(_summary_table(rest, rows, verdicts))
    return "".join(out)


def _weights_panel(d: Any, policy: str, ax: Any) -> Any:
    """:func:`ope.plots.plot_weights` as a panel of the report: the decades labelled, without
    the minor ticks between them (a third of the panel's drawing time)."""
    from matplotlib.ticker import NullLocator

    ax = _plots().plot_weights(d, policy, ax)
    ax.xaxis.set_minor_locator(NullLocator())
    return ax


def _summary_table(
    policies: Sequence[str], rows: Mapping[str, Mapping[str, Any]], verdicts: Mapping[str, Any]
) -> str:
    """The candidates summarized instead of drawn (:func:`_drawn`): one row each, from the
    diagnostics' table (``rows``) and the headline's verdicts."""
    body = []
    for policy in policies:
        r = rows[policy]
        v = verdicts.get(policy)
        body.append(
            [
                f"<strong>{_e(policy)}</strong>",
                _badge(v.answer) if v is not None else "–",
                _e(f"{_num(r['ess'])} ({_share(r['ess_ratio'])})"),
                _e(_num(r["weight_max"])),
                _e(f"{_num(r['mean_weight'])} ({r['propensity_check']})"),
                _e(f"{r['verdict']} ({r['verdict_reason']})"),
            ]
        )
    return '<h3 id="summarized">Candidates summarized, not drawn</h3>' + _table(
        ["candidate", "answer", "ESS (share of rows)", "largest weight", "mean weight", "verdict"],
        body,
        numeric=(2, 3, 4),
        raw=True,
        wide=5,
    )


def _segments(ctx: dict[str, Any], figures: _Figures) -> str:
    d, ev = ctx["diagnostics"], ctx["evaluation"]
    truth: Truth = ctx["truth"]
    if d is None and ev is not None and _unit(ev) != "rows":
        return (
            f"<p>Per-segment estimates and overlap are made on bandit logs (one decision per "
            f"row); this report is of {_e(_unit(ev))}.</p>"
        )
    out = []
    seg = ctx["segment_estimates"]
    if seg is not None:
        est = headline_estimator(ev) if ev is not None else str(seg["estimator"].iloc[0])
        if est not in set(seg["estimator"]):
            est = str(seg["estimator"].iloc[0])
        out.append(f"<h3>Estimates per segment ({_e(est)})</h3>")
        drawn, rest = _drawn(ctx, list(dict.fromkeys(seg["policy"])))
        out.append(_more(summarized_line(rest)))
        kept_rows = []
        for column in dict.fromkeys(seg["column"]):
            mine = seg[seg["column"] == column]
            counts = mine["n"] if "n" in mine.columns else [1.0] * len(mine)
            top, summary = top_segments(list(mine["segment"]), counts, limit=ctx["max_segments"])
            mine = mine[mine["segment"].isin(top)]
            kept_rows.append(mine)
            out.append(
                figures.figure(
                    lambda mine=mine, column=column: _plots().plot_segments(
                        mine[mine["policy"].isin(drawn)], estimator=est, column=column, truth=truth
                    ),
                    f"Each candidate's {_e(est)} estimate and interval within each segment of "
                    f"<code>{_e(column)}</code>"
                    + ("; black diamonds: the exact values" if truth.by_segment else "")
                    + ".",
                    label=f"per-segment estimates by {column}",
                )
            )
            out.append(_more(f"{column}: {summary}" if summary else ""))
        seg = pd.concat(kept_rows, ignore_index=True)
        cols = [
            c
            for c in (
                "policy",
                "estimator",
                "column",
                "segment",
                "value",
                "std_error",
                "ci_low",
                "ci_high",
                "n",
                "ess",
            )
            if c in seg.columns
        ]
        dec = _decimals(seg["std_error"], seg["value"]) if "std_error" in seg.columns else None
        body = []
        for r in seg[cols].to_dict("records"):
            line = [
                str(r["policy"]),
                str(r["estimator"]),
                f"{r['column']}={r['segment']}",
                _num(r["value"], decimals=dec),
            ]
            if "std_error" in r:
                line.append(_num(r["std_error"], decimals=dec))
            line.append(_interval(r["ci_low"], r["ci_high"], dec))
            line += [_num(r[c]) for c in ("n", "ess") if c in r]
            body.append(line)
        header = (
            ["policy", "estimator", "segment", "value"]
            + (["std. error"] if "std_error" in cols else [])
            + ["interval"]
            + [c for c in ("n", "ess") if c in cols]
        )
        out.append(_table(header, body, numeric=tuple(range(3, len(header)))))
    elif ev is not None:
        out.append(
            "<p>This evaluation has no per-segment estimates (evaluate with segments "
            "to add them); below is the diagnostics' per-segment overlap.</p>"
        )
    if d is None:
        out.append(
            "<p>Per-segment overlap and the coverage heatmaps come from the diagnostics: "
            "pass <code>diagnostics=ope.diagnose(logs, by=[...])</code> "
            "(<code>ope report LOGS --by COLUMN</code>).</p>"
        )
        return "".join(out)
    table = d.segments()
    if len(table):
        out.append("<h3>Overlap per segment</h3>")
        out.append(
            "<p>Each cell: the candidate's effective sample size in the segment and the "
            "share of its probability mass there (as the weights recover it). A gap is "
            "a segment the logs cannot answer for; its reason is under the candidate's "
            "heatmap below.</p>"
        )
        if getattr(d, "sampling_weight", None) is not None:
            out.append(
                '<p class="note">Sampling-weighted (column '
                f"<code>{_e(d.sampling_weight)}</code>): the masses and the coverage "
                "heatmaps are of the logged population (Hajek means), the effective "
                "sample sizes Kish's of the sampling times the importance weights; "
                "<em>rows</em> counts the kept rows.</p>"
            )
        for column in dict.fromkeys(table["column"]):
            out.append(
                _segment_matrix(table[table["column"] == column], column, ctx["max_segments"])
            )
        first = str(table["column"].iloc[0])
        mine = table[table["column"] == first]
        heat_segments, _ = top_segments(
            list(mine["segment"]), list(mine["rows"]), limit=ctx["max_segments"]
        )
    else:
        out.append(
            '<p class="note">No segments were requested: pass <code>by=[...]</code> to '
            "ope.diagnose (<code>--by COLUMN</code>) to look for gaps per segment. The "
            "heatmaps below cover all rows.</p>"
        )
        first, heat_segments = None, None
    out.append("<h3>Coverage: where each candidate's mass lies</h3>")
    drawn, rest = _drawn(ctx, d.policies)
    out.append(_more(summarized_line(rest)))
    out.append(_heatmaps(d, drawn, first, heat_segments, figures))
    for policy in d.policies:
        gaps = table[(table["policy"] == policy) & table["gap"]] if len(table) else table
        if len(gaps):
            out.append(
                f"<h3>{_e(policy)}</h3><ul>"
                + "".join(
                    f"<li><strong>{_e(g.column)}={_e(g.segment)}</strong> ({_e(g.gap_kind)}): "
                    f"{_e_advice(g.reason)}</li>"
                    for g in gaps.itertuples(index=False)
                )
                + "</ul>"
            )
    if len(table) and not table["gap"].any():
        out.append('<p class="muted">No segment gaps.</p>')
    return "".join(out)


def _heatmaps(
    d: Any, drawn: Sequence[str], by: str | None, segments: Sequence[Any] | None, figures: _Figures
) -> str:
    """The coverage heatmaps of the candidates drawn in full, one panel each in one figure."""
    if not drawn:
        return ""
    try:
        matrix = d.coverage_matrix(drawn[0], by=by, value="target_mass")
    except ValidationError as exc:  # diagnostics of arrays without the logged actions
        return f'<p class="note">No coverage heatmaps: {_e(exc)}</p>'
    labels = [str(s) for s in matrix.index if segments is None or str(s) in set(map(str, segments))]
    n_rows, n_cols = max(len(labels), 1), max(matrix.shape[1], 1)
    # the widest row label (and its "  (gap)" mark) at about 0.07 inch a character
    left = min(0.6 + 0.07 * (max(map(len, labels), default=3) + 7), 3.2)
    return figures.panels(
        [
            functools.partial(_plots().plot_coverage, d, policy, by=by, segments=segments)
            for policy in drawn
        ],
        "One panel per candidate drawn in full. Colour: the candidate's mass in each cell (share "
        "of all rows); text: candidate share / logger share. Red frames: segments with a gap.",
        label="coverage heatmaps, one panel per candidate: " + ", ".join(drawn),
        height=0.5 + 0.32 * n_rows,
        left=left,
        width=left + min(3.2 + 0.85 * n_cols, 9.0),
        gap=1.0,
    )


def _segment_matrix(rows: pd.DataFrame, column: str, limit: int | None) -> str:
    """Segments of one column x candidates: ESS and mass share per cell, gaps marked."""
    policies = list(dict.fromkeys(rows["policy"]))
    segments, summary = top_segments(list(rows["segment"]), list(rows["rows"]), limit=limit)
    cells = {(r["policy"], r["segment"]): r for r in rows.to_dict("records")}
    first = {seg: cells[(policies[0], seg)] for seg in segments if (policies[0], seg) in cells}
    header = [str(column), "rows"] + [str(p) for p in policies]
    body = []
    for seg in segments:
        head = first.get(seg) or next(cells[(p, seg)] for p in policies if (p, seg) in cells)
        line = [_e(seg), _e(f"{_num(head['rows'])} ({_share(head['row_share'])})")]
        for p in policies:
            r = cells.get((p, seg))
            if r is None:
                line.append("–")
                continue
            text = _e(f"ESS {_num(r['ess'])} · {_share(r['target_mass_share'])} of mass")
            if r["gap"]:
                text += f' <span class="badge worse">{_e(r["gap_kind"] or "gap")} gap</span>'
            line.append(text)
        body.append(line)
    return _table(header, body, numeric=(1,), raw=True) + _more(
        f"{column}: {summary}" if summary else ""
    )


def _plan(ctx: dict[str, Any]) -> str:
    d, ev = ctx["diagnostics"], ctx["evaluation"]
    if d is None and ev is not None and _unit(ev) != "rows":
        return _not_in_report(
            "The exploration plan is made from the diagnostics of bandit logs; this report "
            f"is of {_e(_unit(ev))}."
        )
    if d is None:
        return _not_in_report(
            "The exploration plan comes from the diagnostics (ope.diagnose), not in this report."
        )
    if d.target_width is None or d.new_rows is None or d.reward_range is None:
        return _not_in_report(
            "No plan was requested. To see how much traffic to explore so that new logs "
            "answer, pass <code>target_width</code>, <code>new_rows</code> and "
            "<code>reward_range</code> to ope.diagnose (<code>--target-width W --new-rows N "
            "--reward-range LO HI</code>)."
        )
    plan = d.plan()
    out = [
        f"<p>The smallest share of traffic on which to play each candidate's own choice so "
        f"that {_e(_count(d.new_rows, 'new logged row'))} give an IPS interval narrower than "
        f"{_num(d.target_width)}.</p>"
    ]
    body = [
        [
            r.policy,
            "all traffic" if r.column == "all" else f"{r.column}={r.segment}",
            _share(r.exploration_share),
            _num(r.exploration_rows),
            _num(r.predicted_width),
            "yes" if r.feasible else "no",
            _num(r.rows_needed),
            r.reason,
        ]
        for r in plan.itertuples(index=False)
    ]
    out.append(
        _table(
            [
                "policy",
                "scope",
                "explore",
                "rows explored",
                "predicted width",
                "reaches the width",
                "rows needed",
                "plan",
            ],
            body,
            numeric=(2, 3, 4, 6),
        )
    )
    try:
        actions = d.plan_actions()
    except ValidationError:  # diagnostics of arrays without the logged actions
        actions = None
    if actions is not None and len(actions):
        out.append("<h3>Which actions to play more</h3>")
        body = []
        for (policy, column, segment), group in actions.groupby(
            ["policy", "column", "segment"], sort=False
        ):
            for r in group.head(_PLAN_ACTIONS).itertuples(index=False):
                body.append(
                    [
                        policy,
                        "all traffic" if column == "all" else f"{column}={segment}",
                        str(r.action),
                        _share(r.logging_share),
                        _share(r.planned_share),
                        _share(r.extra_share),
                    ]
                )
            if len(group) > _PLAN_ACTIONS:
                body.append(
                    [
                        policy,
                        "",
                        f"… {_count(len(group) - _PLAN_ACTIONS, 'more action')}",
                        "",
                        "",
                        "",
                    ]
                )
        out.append(
            _table(
                ["policy", "scope", "action", "logged share", "planned share", "extra traffic"],
                body,
                numeric=(3, 4, 5),
            )
        )
    return "".join(out)


def _validation(ctx: dict[str, Any]) -> str:
    report = ctx["validation"]
    if report is None:
        return (
            "<p>No validation report was given (diagnostics do not carry one): pass "
            "<code>validation=logs.report</code>.</p>"
        )
    facts = [
        ("source", report.source),
        ("rows read", _num(report.rows_read)),
        ("rows used", _num(report.rows_used)),
        ("rows rejected", _num(report.rows_read - report.rows_used)),
    ]
    if getattr(report, "episodes_read", None) is not None:
        facts += [
            ("episodes read", _num(report.episodes_read)),
            ("episodes used", _num(report.episodes_used)),
        ]
    out = [
        '<dl class="facts">'
        + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in facts)
        + "</dl>"
    ]
    if report.rejected:
        body = [
            [reason, _num(count), ", ".join(str(x) for x in report.examples.get(reason, ()))]
            for reason, count in report.rejected.items()
        ]
        out.append(_table(["reason", "rows", "first rows (0-based)"], body, numeric=(1,)))
        out.append(
            "<p>"
            + (
                'The rejected rows were dropped (<code>on_invalid="drop"</code>).'
                if report.dropped
                else "Rows were rejected."
            )
            + "</p>"
        )
    else:
        out.append("<p>Every row passed validation.</p>")
    return "".join(out)


def _distribution(ctx: dict[str, Any], figures: _Figures) -> str:
    """The outcome distributions of ``--metric`` (:func:`ope.outcome_distribution`): what the
    bands assume and the metrics with their simultaneous intervals."""
    dist = ctx["distribution"]
    if dist is None:
        return _not_in_report(
            "No outcome distribution in this report. <code>ope evaluate LOGS --metric "
            "quantile:0.95 cvar:0.05 --outcome COLUMN</code> (or "
            "<code>ope.outcome_distribution</code>) estimates each candidate's distribution of "
            "an outcome with bands that hold over every threshold; pass "
            "<code>distribution=</code> to include it."
        )
    level = f"{dist.confidence_level:.0%}"
    if dist.band == "hoeffding":
        band = (
            f"finite-sample {level} bands (Hoeffding at the CDF's quantile brackets, weight "
            f"bound {_num(dist.weight_bound)}): they hold for any n"
        )
    else:
        band = (
            f"{level} multiplier-bootstrap bands: asymptotic, valid as the rows grow, like the "
            "normal intervals of the estimates"
        )
    intro = (
        f"<p>The distribution of <code>{_e(dist.outcome)}</code> under each candidate, by "
        f"{_e(dist.estimator.upper())} on "
        f"{_count(dist.n, 'episode' if dist.outcome == 'return' else 'row')}, with {band}. Each "
        "band holds "
        "at every threshold at once, so all of a candidate's intervals below hold jointly "
        "(not across candidates). The logging policy's row is its own empirical distribution "
        "(Dvoretzky-Kiefer-Wolfowitz band). Quantile and CVaR bounds read the band; an "
        "infinite bound means the band leaves that tail open (give the outcome's range).</p>"
    )
    table = dist.metrics()
    rows = []
    for r in table.itertuples():
        at = _num(r.threshold) if r.metric in ("cdf", "exceed") else _num(r.level)
        rows.append(
            [
                _e(r.policy),
                _e(r.metric),
                at,
                _num(r.value),
                f"[{_num(r.ci_low)}, {_num(r.ci_high)}]",
            ]
        )
    shown = _table(
        ["policy", "metric", "at", "estimate", f"{level} interval"],
        rows,
        numeric=(2, 3, 4),
        raw=True,
    )
    notes = "".join(f'<p class="note">{_e(n)}</p>' for n in dist.notes)
    drawn = dist.policies[: ctx["max_candidates"]] if ctx["max_candidates"] else dist.policies
    figure = figures.figure(
        lambda: _plots().plot_distribution(dist, policies=drawn),
        f"Each candidate's CDF of {_e(dist.outcome)} (line) in its simultaneous band (shaded); the "
        "logging policy's in grey"
        + (
            f"; the first {len(drawn)} of {len(dist.policies)} candidates"
            if len(drawn) < len(dist.policies)
            else ""
        ),
        label=f"outcome distributions of {dist.outcome}",
    )
    return intro + figure + shown + notes


def _guardrails(ctx: dict[str, Any]) -> str:
    """The multi-outcome decision of ``--guardrail`` (:func:`ope.guardrail_decision`)."""
    dec = ctx["guardrails"]
    if dec is None:
        return _not_in_report(
            "No guardrail decision in this report. <code>ope evaluate LOGS --guardrail "
            "latency_ms:lower:50 cost:lower:0.1</code> (or <code>ope.guardrail_decision</code>) "
            "approves a candidate only when its reward improves and no guardrail outcome is "
            "worse by more than its margin; pass <code>guardrails=</code> to include it."
        )
    alpha = 1 - dec.confidence_level
    approved = ", ".join(_e(p) for p in dec.approved) or "none"
    intro = (
        f"<p>Approved: <strong>{approved}</strong>. A candidate is approved when every claim "
        f"below is shown by a one-sided test at {alpha:g} on the paired difference with the "
        f"logging policy ({_e(dec.estimator.upper())} of each outcome on the same "
        f"{_count(dec.n, 'row')}): an intersection-union test, so the chance of approving a "
        "candidate that fails any claim is at most "
        f"{alpha:g}{', with Holm over the candidates' if dec.correction == 'holm' else ''}.</p>"
    )
    rows = [
        [
            _e(r.policy),
            _e(r.claim),
            _num(r.difference),
            f"{'≤' if r.bound >= r.difference else '≥'} {_num(r.bound)}",
            _num(r.p_value),
            "yes" if r.shown else "no",
        ]
        for r in dec.claims().itertuples()
    ]
    claims = _table(
        [
            "policy",
            "claim",
            "difference",
            f"one-sided {dec.confidence_level:.0%} bound",
            "p (one-sided)",
            "shown",
        ],
        rows,
        numeric=(2, 3, 4),
        raw=True,
    )
    reasons = "".join(f"<li>{_e(p)}: {_e(dec.reason(p))}</li>" for p in dec.table()["policy"])
    return intro + claims + f"<ul>{reasons}</ul>"


def _not_evaluable(verdicts: Mapping[str, str]) -> str:
    """The list of the candidates the logs cannot evaluate, each with why (empty when none)."""
    items = "".join(f"<li>{_e(p)}: {_e(v)}</li>" for p, v in verdicts.items() if v != "evaluable")
    return f"<ul>{items}</ul>" if items else ""


def _model_estimates(result: Any, intro: str) -> str:
    """The DR table of a result with ``model_estimates`` and ``model_table()`` (language-model
    and continuous-action evaluations), after ``intro``; empty without a model."""
    if not result.model_estimates:
        return ""
    level = result.evaluation.confidence_level
    rows = [
        [
            _e(r["policy"]),
            _num(r["value"]),
            _num(r["std_error"]),
            f"[{_num(r['ci_low'])}, {_num(r['ci_high'])}]",
        ]
        for r in result.model_table().to_dict(orient="records")
    ]
    return f"<p>{intro}</p>" + _table(
        ["policy", "DR", "standard error", f"{level:.0%} interval (normal)"],
        rows,
        numeric=(1, 2, 3),
        raw=True,
    )


def _sequences(ctx: dict[str, Any]) -> str:
    """Logged responses (:func:`ope.evaluate_sequences`): the audit of the logged
    log-probabilities, and per candidate the divergences and whether the logs can tell."""
    seq = ctx["sequences"]
    if seq is None:
        return _not_in_report(
            "No language-model logs in this report. <code>ope sequences RESPONSES.jsonl "
            "--on-policy SAME</code> (or <code>ope.evaluate_sequences</code>) evaluates "
            "candidates from logged responses and their token log-probabilities, audits the "
            "logged log-probabilities and says which candidates the logs cannot evaluate; pass "
            "<code>sequences=</code> to include it."
        )
    audit = seq.audit
    state = (
        _e(audit.state)
        if audit.usable or audit.signature == "support"
        else ("<strong>not usable</strong>")
    )
    intro = (
        f"<p>Each of the {_count(seq.divergences.n, 'logged response')} is one decision "
        "weighted by exp(the sum of its token log-ratios), computed in log space "
        f"(weighting: {_e(seq.weighting)}). Audit of the logged log-probabilities: {state} "
        f"({_e(audit.signature)}): {_e(audit.reason)}.</p>"
    )
    div = seq.divergences.table()
    rows = [
        [
            _e(r.policy),
            "evaluable" if seq.verdicts.get(r.policy) == "evaluable" else "<strong>no</strong>",
            f"{_num(r.k1)} ± {_num(r.k1_se)}",
            _num(r.k3),
            _num(r.kl_candidate_logger),
            f"{_num(r.ess)} ({r.ess_share:.1%})",
            _num(r.predicted_ess),
            _num(r.pareto_k),
        ]
        for r in div.itertuples()
    ]
    table = _table(
        [
            "policy",
            "evaluable",
            "KL(logger ‖ candidate), k1 ± SE",
            "k3",
            "KL(candidate ‖ logger)",
            "effective sample",
            "predicted by k1",
            "Pareto k̂",
        ],
        rows,
        numeric=(2, 3, 4, 5, 6, 7),
        raw=True,
    )
    reasons = _not_evaluable(seq.verdicts)
    model = _model_estimates(
        seq,
        "Doubly robust, with the given reward model's predictions (the model's value of the "
        "candidate's responses, corrected by the weighted residual of the logged ones):",
    )
    return intro + table + reasons + model


def _continuous(ctx: dict[str, Any]) -> str:
    """Continuous-action logs (:func:`ope.evaluate_continuous`): per candidate the bandwidth,
    the kernel window and kernel DR, then the bias/variance trade-off over the bandwidth grid."""
    from ope.continuous import MIN_WINDOW_ESS

    cont = ctx["continuous"]
    if cont is None:
        return _not_in_report(
            "No continuous-action logs in this report. <code>ope continuous LOGS</code> (or "
            "<code>ope.evaluate_continuous</code>) evaluates candidates of a real-valued action "
            "(a price, a bid, a dose) by kernel-smoothed weights; pass <code>continuous=</code> "
            "to include it."
        )
    rule = (
        "chosen by SLOPE++ over a grid, then undersmoothed (0.35 times SLOPE's choice) so that "
        "the bias is small against the interval"
        if cont.rule == "slope"
        else "given"
    )
    intro = (
        f"<p>Kernel: {_e(cont.kernel)}. A deterministic candidate is weighted by the kernel of "
        "the distance between its action and the logged one, over the logger's density: kernel "
        "IPS and SNIPS estimate the candidate smoothed at its bandwidth (a bias of order h², "
        f"which their intervals do not include); the bandwidths are {rule}.</p>"
    )
    win = cont.window
    rows = [
        [
            _e(r.policy),
            _e(r.form),
            "exact density" if not math.isfinite(r.bandwidth) else _num(r.bandwidth),
            f"{_num(r.window_rows)} ({r.window_share:.1%})",
            f"{_num(r.ess)} ({r.ess_share:.1%})",
            _num(r.mean_weight),
            _num(r.outside_support),
            "evaluable" if cont.verdicts.get(r.policy) == "evaluable" else "<strong>no</strong>",
        ]
        for r in win.itertuples()
    ]
    table = _table(
        [
            "policy",
            "candidate",
            "bandwidth",
            "rows in the window",
            "effective sample",
            "mean weight",
            "actions outside the logger's support",
            "evaluable",
        ],
        rows,
        numeric=(2, 3, 4, 5, 6),
        raw=True,
    )
    reasons = _not_evaluable(cont.verdicts)
    model = _model_estimates(
        cont,
        "Kernel DR (a reward model of context and action at the candidate's action, corrected "
        "by the kernel-weighted residual at the logged one):",
    )
    grid = cont.bandwidths
    trade = ""
    if len(grid):
        grid_rows = [
            [
                _e(r.policy),
                _num(r.bandwidth),
                _num(r.value),
                _num(r.std_error),
                _num(r.ess),
                ("used" if r.chosen else "") + (" SLOPE" if r.slope else ""),
            ]
            for r in grid.itertuples()
        ]
        trade = (
            "<p>The trade-off: the estimate falls or rises with the bandwidth as the smoothing "
            "bias grows, and its standard error shrinks (a bandwidth with fewer than "
            f"{_num(MIN_WINDOW_ESS)} effective rows has none).</p>"
            + _table(
                ["policy", "bandwidth", "estimate", "standard error", "effective sample", ""],
                grid_rows,
                numeric=(1, 2, 3, 4),
                raw=True,
            )
        )
    return intro + table + reasons + model + trade


def _slates(ctx: dict[str, Any]) -> str:
    """Slate logs (:func:`ope.evaluate_slates`): what each estimator assumes of the clicks, the
    estimates a candidate's probabilities cannot serve, and each kind of weight's overlap per
    slot."""
    ev = ctx["slates"]
    if ev is None:
        return _not_in_report(
            "No slate logs in this report. <code>ope slates LOGS</code> (or "
            "<code>ope.evaluate_slates</code>) evaluates candidate rankings with slate, cascade "
            "and independent IPS and Cascade-DR; pass <code>slates=</code> to include it."
        )
    intro = (
        f"<p>{_num(ev.n_slates)} slates of {_num(ev.slate_size)} slots. Each estimate is of the "
        "candidate's expected slate reward (the reward summed over the slots); the estimators "
        "differ in what they assume of the clicks, and so in their weights: whole slates "
        "(any click model, the largest weights), prefixes (cascade: a slot's reward depends on "
        "the items above it), or one item at its slot (item-position: no interaction). When "
        "they disagree, the one with the weaker assumption is the one to trust, if its "
        "interval allows.</p>"
    )
    table = _table(
        ["estimator", "assumes"],
        [[_e(e), _e(text)] for e, text in ev.assumptions.items()],
        raw=True,
    )
    missing = ""
    if ev.unavailable:
        items = "".join(
            f"<li>{_e(p)}, {_e(e)}: {_e(why)}</li>" for (p, e), why in ev.unavailable.items()
        )
        missing = f"<p>Not estimated, and why:</p><ul>{items}</ul>"
    ov = ev.overlap
    overlap = (
        "<p>Overlap per slot: the effective sample (Kish) and the largest weight of each kind "
        "of weight (blank where a side lacks those probabilities). Prefix weights grow down "
        "the slate; a slot with a small effective sample is where the cascade estimators rest "
        "on few slates.</p>"
        + _table(
            [
                "policy",
                "slot",
                "marginal ESS",
                "largest marginal weight",
                "prefix ESS",
                "largest prefix weight",
                "slate ESS",
            ],
            [
                [
                    _e(r.policy),
                    _num(r.position),
                    *(
                        "" if not math.isfinite(v) else _num(v)
                        for v in (
                            r.marginal_ess,
                            r.marginal_max_weight,
                            r.prefix_ess,
                            r.prefix_max_weight,
                            r.slate_ess,
                        )
                    ),
                ]
                for r in ov.itertuples()
            ],
            numeric=(1, 2, 3, 4, 5, 6),
            raw=True,
        )
    )
    return intro + table + missing + overlap


def _monitoring(ctx: dict[str, Any], figures: _Figures) -> str:
    """The confidence sequences of a monitor (:class:`ope.monitor.Monitor`): what they assume,
    the sequence of each candidate's difference over the looks, and the current state."""
    mon = ctx["monitoring"]
    if mon is None:
        return _not_in_report(
            "No monitoring in this report. <code>ope monitor LOGS_DIR --reward-range 0 1 "
            "--every 10m</code> (or <code>ope.monitor.Monitor</code>) updates anytime-valid "
            "confidence sequences as new log files land; pass <code>monitoring=</code> (or "
            "<code>--report</code> to ope monitor) to include them."
        )
    level = f"{mon.confidence_level:.0%}"
    if mon.method == "betting":
        how = (
            "betting confidence sequences (finite-sample: valid at every look for any n, under "
            "an adaptive logger whose logged propensities are the ones it used, with no bound on "
            "the weights)"
        )
    else:
        how = (
            "asymptotic confidence sequences (Gaussian mixture: valid at every look in the limit "
            "of many rows, like a normal interval is at one look)"
        )
    intro = (
        f"<p>{_e(mon.estimator.upper())} monitored over {_count(mon.looks, 'look')} "
        f"({_count(mon.rows, 'row')}) with {level} {how}"
        f"{', the level split over every sequence (Bonferroni)' if mon.simultaneous else ' per sequence'}. Because each "
        "sequence holds at every look at once, the rollout may be watched continuously and "
        "stopped as soon as a candidate is decided; an interval recomputed at every look is "
        "not valid under such peeking. The difference is with the logging policy's average "
        "value over the same rows (the logger may change as it learns).</p>"
    )
    cur = mon.current
    rows = [
        [
            _e(r.policy),
            _num(r.estimate),
            f"[{_num(r.ci_low)}, {_num(r.ci_high)}]",
            _signed(r.difference),
            _interval(r.difference_low, r.difference_high, signed=True),
            _num(r.p_value),
            _badge({"better": BETTER, "worse": WORSE}.get(r.decision, "not decided yet")),
        ]
        for r in cur.itertuples()
    ]
    table = _table(
        [
            "policy",
            "value",
            f"{level} sequence",
            "difference",
            f"{level} sequence",
            "anytime p (not better)",
            "decision",
        ],
        rows,
        numeric=(1, 2, 3, 4, 5),
        raw=True,
    )
    drawn = mon.policies[: ctx["max_candidates"]] if ctx["max_candidates"] else mon.policies
    figure = figures.figure(
        lambda: _plots().plot_monitor(mon, policies=drawn),
        "Each candidate's difference with the logging policy (line) in its confidence "
        "sequence (shaded), against the rows seen"
        + (
            f"; the first {len(drawn)} of {len(mon.policies)} candidates"
            if len(drawn) < len(mon.policies)
            else ""
        ),
        label="monitoring over time",
    )
    return intro + figure + table


def _monitor_headline(ctx: dict[str, Any]) -> str:
    """The answer of a report made from a monitor alone: each candidate's decision."""
    mon = ctx["monitoring"]
    groups = {
        d: mon.current[mon.current["decision"] == d] for d in ("better", "worse", "undecided")
    }
    items = []
    for decision, label, css in (
        ("better", "Better than the logging policy", "better"),
        ("worse", "Worse than the logging policy", "worse"),
        ("undecided", "Not decided yet", "unclear"),
    ):
        rows = groups[decision]
        if len(rows):
            names = ", ".join(f"<strong>{_e(p)}</strong>" for p in rows["policy"])
            items.append(f'<li><span class="{css}">{label}</span>: {names}.</li>')
    return (
        f"<p>After {_count(mon.looks, 'look')} ({_count(mon.rows, 'row')}), by "
        f"{_e(mon.estimator.upper())} with {mon.confidence_level:.0%} confidence sequences:</p>"
        f'<ul class="answers">{"".join(items)}</ul>'
    )


def _certificate(ctx: dict[str, Any]) -> str:
    cert = ctx["certificate"]
    if cert is None:
        return _not_in_report(
            "No learned policy in this report. <code>ope learn LOGS</code> (or "
            "<code>ope.learn_from_logs</code>) learns one and certifies it on held-out rows; "
            "pass <code>certificate=</code> to include it."
        )
    answer = BETTER if cert.verdict == "approve" else UNCLEAR
    level = f"{cert.confidence_level:.0%}"
    facts = [
        ("verdict", f"{cert.verdict}: {cert.reason}"),
        ("estimate (clipped IPS)", _num(cert.value)),
        (f"one-sided {level} lower bound", _num(cert.lower_bound)),
        ("baseline", f"{cert.baseline} = {_num(cert.baseline_value)} ({cert.baseline_source})"),
    ]
    if cert.improvement_estimate is not None:
        facts.append(
            (
                "improvement over logging",
                f"{_signed(cert.improvement_estimate)}, lower bound "
                f"{_signed(cert.improvement_lower_bound)}",
            )
        )
    facts += [
        ("bound", f"{cert.ci_method} at {level} (one-sided)"),
        ("clip level", _num(cert.max_weight)),
        ("reward range", f"[{_num(cert.reward_range[0])}, {_num(cert.reward_range[1])}]"),
        (
            "rows",
            f"{_num(cert.n_train) if cert.n_train is not None else '–'} to train, "
            f"{_num(cert.n)} to certify",
        ),
        ("clipped rows", _share(cert.clipped_fraction)),
    ]
    gamma = getattr(cert, "tipping_gamma", None)
    if gamma is not None:
        facts.append(("sensitivity to wrong propensities", describe_approval_tipping(gamma)))
    out = [
        f"<h3>{_e(cert.policy)} {_badge(answer if cert.verdict == 'approve' else 'rejected')}</h3>",
        '<dl class="facts">'
        + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in facts)
        + "</dl>",
    ]
    if cert.notes:
        out.append("<ol>" + "".join(f"<li>{_e(n)}</li>" for n in cert.notes) + "</ol>")
    return "".join(out)


def _notes(ctx: dict[str, Any]) -> str:
    notes = ctx["notes"]
    if not notes:
        return "<p>No warnings.</p>"
    return "<ol>" + "".join(f"<li>{_e_advice(n)}</li>" for n in notes) + "</ol>"


def _versions() -> list[tuple[str, str]]:
    import ope

    out = [("ope (ope-toolkit)", ope.__version__), ("Python", platform.python_version())]
    for dist in DEPENDENCIES:
        try:
            out.append((dist, importlib.metadata.version(dist)))
        except importlib.metadata.PackageNotFoundError:
            out.append((dist, "not installed"))
    return out


def _reproduce(ctx: dict[str, Any]) -> str:
    prov: Mapping[str, Any] = ctx["provenance"]
    ev, d = ctx["evaluation"], ctx["diagnostics"]
    out = []
    command = prov.get("command")
    if command is not None:
        text = command if isinstance(command, str) else shlex.join(str(c) for c in command)
        out.append(f"<h3>Command</h3><pre>{_e(text)}</pre>")
    else:
        out.append(
            "<p>No command was recorded (made from Python); the settings below reproduce it.</p>"
        )
    seed = prov.get("seed")
    if seed is None and ev is not None:
        seed = getattr(ev, "ci_options", {}).get("rng")
    facts = [
        ("input", ctx["source"] or "–"),
        ("rows", _num(ctx["rows"]) if ctx["rows"] is not None else "–"),
        ("seed", "none (no randomness used, or not recorded)" if seed is None else str(seed)),
    ]
    if ev is not None:
        facts += [
            ("estimators", ", ".join(ev.estimators)),
            ("interval", f"{ev.ci_method} at {_num(ev.confidence_level)}"),
            (
                "weight bound",
                _num(ev.weight_bound) if getattr(ev, "weight_bound", None) is not None else "none",
            ),
            ("propensities", getattr(ev, "propensity_source", "logged")),
        ]
        options = {k: v for k, v in getattr(ev, "ci_options", {}).items() if v is not None}
        if options:
            facts.append(("interval options", ", ".join(f"{k}={v}" for k, v in options.items())))
        model = getattr(ev, "model_columns", None)
        if model is not None:
            facts.append(("reward model columns", ", ".join(model.get("context", [])) or "none"))
    if d is not None:
        rr = d.reward_range
        facts += [
            (
                "diagnostics clip level",
                _num(d.max_weight) if d.max_weight is not None else "narrowest interval",
            ),
            ("reward range", "none" if rr is None else f"[{_num(rr[0])}, {_num(rr[1])}]"),
        ]
        if d.target_width is not None:
            facts.append(
                ("plan", f"target width {_num(d.target_width)}, {_count(d.new_rows, 'new row')}")
            )
    out.append(
        '<dl class="facts">'
        + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in facts)
        + "</dl>"
    )
    run_options = prov.get("options")
    if isinstance(run_options, Mapping) and run_options:
        out.append("<h3>Options</h3>")
        out.append(
            _table(["option", "value"], [[str(k), _option(v)] for k, v in run_options.items()])
        )
    extra = {
        k: v for k, v in prov.items() if k not in ("command", "options", "seed", "input", "rows")
    }
    if extra:
        out.append(
            _table(["provenance", "value"], [[str(k), _option(v)] for k, v in extra.items()])
        )
    out.append("<h3>Versions</h3>")
    out.append(_table(["package", "version"], [[k, v] for k, v in _versions()]))
    return "".join(out)


def _option(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    return "–" if value is None else str(value)


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _plots() -> Any:
    import ope.plots

    return ope.plots


# --------------------------------------------------------------------------------------------
# the page
# --------------------------------------------------------------------------------------------
def _plain(text: str) -> str:
    return " ".join(str(text).split()).rstrip(".").casefold()


def _unit(evaluation: Any) -> str:
    """What an evaluation's estimates average over: ``"episodes"`` for trajectories (a
    :class:`ope.sequential.TrajectoryEvaluation`, which has a discount), ``"slates"`` for a
    :class:`ope.SlateEvaluation` (which has a slate size), else ``"rows"``."""
    if hasattr(evaluation, "gamma"):
        return "episodes"
    return "slates" if hasattr(evaluation, "slate_size") else "rows"


def _all_notes(evaluation: Any, diagnostics: Any, extra: Sequence[str]) -> list[str]:
    """One list of the page's notes, each warning once: the evaluation's own notes, each
    estimate note once per candidate with the estimators it concerns, then the diagnostics'.

    A warning about one candidate is the same when its text after the candidate's name is
    (up to case and spacing): the estimators and the diagnostics word a low effective sample
    size and a mean weight off 1 alike (:mod:`ope._thresholds`), so the diagnostics' copy of a
    warning the estimates already gave is dropped. Other notes are the same when their
    :func:`ope._format.note_key` is.
    """
    keyed: dict[Any, str] = {}
    for note in extra:
        keyed.setdefault(note_key(note), note)
    if evaluation is not None:
        grouped: dict[tuple[str, str], tuple[str, list[str]]] = {}
        table = evaluation.table()  # each row's interval method: the notes shown beside it
        method = dict(zip(zip(table["policy"], table["estimator"]), table["ci_method"]))
        for (policy, estimator), estimate in evaluation.estimates.items():
            shown = method.get((policy, estimator), estimate.ci_method)
            for note in shown_notes(estimate.notes, shown):
                grouped.setdefault((policy, _plain(note)), (note, []))[1].append(estimator)
        about = {
            ("about", policy, plain): f"{policy} ({', '.join(estimators)}): {note}"
            for (policy, plain), (note, estimators) in grouped.items()
        }
        stated = {_plain(text) for text in about.values()}
        for note in evaluation.notes:  # a trajectory evaluation states the grouped ones too
            if _plain(str(note)) not in stated:
                keyed.setdefault(note_key(note), note)
        for key, text in about.items():
            keyed.setdefault(key, text)
    if diagnostics is not None:
        policies = set(diagnostics.policies)
        for note in diagnostics.notes:
            head, sep, rest = str(note).partition(": ")
            key = ("about", head, _plain(rest)) if sep and head in policies else note_key(note)
            keyed.setdefault(key, note)
    return list(keyed.values())


def render_report(
    *,
    evaluation: Any = None,
    diagnostics: Any = None,
    certificate: Any = None,
    truth: Any = None,
    provenance: Mapping[str, Any] | None = None,
    title: str | None = None,
    validation: Any = None,
    max_candidates: int | None = MAX_FIGURE_CANDIDATES,
    max_segments: int | None = MAX_REPORT_SEGMENTS,
    distribution: Any = None,
    guardrails: Any = None,
    monitoring: Any = None,
    sequences: Any = None,
    continuous: Any = None,
    slates: Any = None,
) -> str:
    """The report as one self-contained HTML document (a string).

    Parameters
    ----------
    evaluation : ope.Evaluation, optional
        Estimates (:func:`ope.evaluate`): the forest plot, the paired differences, the
        per-segment estimates when it has them.
    diagnostics : ope.Diagnostics, optional
        Overlap (:func:`ope.diagnose`): the weights, the outer/inner split, the per-segment
        overlap and coverage heatmaps, the exploration plan. At least one of the two.
    certificate : ope.Certificate, optional
        The safety gate's certificate of a learned policy.
    truth : mapping, optional
        Exact values when known: ``{policy: value}`` with ``"logging"`` for the logging
        policy, or the bundled sample's ``ope.load_sample().truth`` (per segment too).
    provenance : mapping, optional
        How it was made: ``command`` (a string or argv list), ``options`` (a mapping),
        ``seed``, ``input`` (the logs' path) and ``rows``; other keys are listed as they are.
        ope's, Python's and the main dependencies' versions are always listed.
    title : str, optional
        The page title (default: "Off-policy evaluation of <input>").
    validation : ope.ValidationReport, optional
        The logs' validation report (default: the evaluation's ``report``).
    max_candidates : int or None, default :data:`~ope.report.views.MAX_FIGURE_CANDIDATES`
        How many candidates to draw in full (rows in the summary figures, a panel in the
        weight histograms and coverage heatmaps, their facts): those with the highest lower
        end of the interval of their difference with the logging policy
        (:func:`ope.report.views.ranked_candidates`). The others are summarized in a table,
        and a note at the top of the estimates says how many and how to draw them all; every
        estimate stays in the tables. None draws every candidate.
    max_segments : int or None, default :data:`~ope.report.views.MAX_REPORT_SEGMENTS`
        How many segments of a column the per-segment charts, heatmaps and tables show: those
        with the most rows; one line summarizes the others. None shows all.
    distribution : ope.OutcomeDistributions, optional
        Each candidate's outcome distribution (:func:`ope.outcome_distribution`): the
        section *Outcome distributions* lists its metrics (``shown``) with their simultaneous
        intervals.
    guardrails : ope.GuardrailDecision, optional
        A multi-outcome decision (:func:`ope.guardrail_decision`): the section *Several
        outcomes: guardrails* lists each claim and why each candidate is approved or not.
    monitoring : ope.monitor.MonitorResult, optional
        A monitor's state (:class:`ope.monitor.Monitor`): the section *Monitoring over time*
        draws each candidate's confidence sequence over the looks. Alone (no evaluation and no
        diagnostics: ``ope monitor --report``) it makes a page of the sections
        :data:`MONITOR_SECTIONS`.
    sequences : ope.SequenceEvaluation, optional
        An evaluation from logged responses and their token log-probabilities
        (:func:`ope.evaluate_sequences`; its ``evaluation`` is the report's, so ``evaluation``
        may be left out, and another one is refused): the section
        *Language-model logs* gives the audit of the logged log-probabilities and, per
        candidate, the divergences and whether the logs can evaluate it.
    continuous : ope.ContinuousEvaluation, optional
        An evaluation from continuous-action logs (:func:`ope.evaluate_continuous`; its
        ``evaluation`` is the report's, as with ``sequences``): the section *Continuous
        actions* gives each candidate's bandwidth, the trade-off over the grid, the kernel
        window and kernel DR.
    slates : ope.SlateEvaluation, optional
        An evaluation of candidate rankings from slate logs (:func:`ope.evaluate_slates`; it
        is the report's evaluation, so ``evaluation`` may be left out): the section *Slates*
        gives what each estimator assumes of the clicks, the estimates a candidate's
        probabilities cannot serve, and the overlap of each kind of weight per slot.

    Returns
    -------
    str
        The HTML page. The same inputs give the same bytes: no date, fixed SVG ids.

    Raises
    ------
    ope.ParameterError
        Neither ``evaluation`` nor ``diagnostics``, an argument of the wrong kind, a
        malformed ``truth``, or a cap that is not a positive integer or None.

    Examples
    --------
    >>> import ope
    >>> from ope.report import render_report
    >>> sample = ope.load_sample(columns=["action", "propensity", "reward", "target__greedy"])
    >>> ev = ope.evaluate(sample.table, estimators=("ips", "snips"), reward_range=(0, 1))
    >>> page = render_report(evaluation=ev, truth=sample.truth)
    >>> page.startswith("<!DOCTYPE html>"), "Better than the logging policy" in page
    (True, True)
    """
    if monitoring is not None and type(monitoring).__name__ != "MonitorResult":
        raise ParameterError(
            "`monitoring` must be a monitor's state (ope.monitor.Monitor(...).update(...)); got "
            f"{type(monitoring).__name__}."
        )
    if sequences is not None and type(sequences).__name__ == "SequenceEvaluation":
        # the responses' evaluation is the report's: given alone, or the same object
        if evaluation is None:
            evaluation = sequences.evaluation
        elif evaluation is not sequences.evaluation:
            raise ParameterError(
                "`sequences` and `evaluation` disagree: pass sequences.evaluation as "
                "`evaluation` (or leave it out), so that the verdicts and the estimates are of "
                "the same responses."
            )
    if continuous is not None:
        if type(continuous).__name__ != "ContinuousEvaluation":
            raise ParameterError(
                "`continuous` must be the result of ope.evaluate_continuous; got "
                f"{type(continuous).__name__}."
            )
        if sequences is not None:
            raise ParameterError("give `sequences` or `continuous`, not both: one set of rows.")
        if evaluation is None:
            evaluation = continuous.evaluation
        elif evaluation is not continuous.evaluation:
            raise ParameterError(
                "`continuous` and `evaluation` disagree: pass continuous.evaluation as "
                "`evaluation` (or leave it out)."
            )
    if slates is not None:
        if type(slates).__name__ != "SlateEvaluation":
            raise ParameterError(
                f"`slates` must be the result of ope.evaluate_slates; got {type(slates).__name__}."
            )
        if sequences is not None or continuous is not None:
            raise ParameterError(
                "give one of `slates`, `sequences` and `continuous`: one set of logs."
            )
        if evaluation is None:
            evaluation = slates
        elif evaluation is not slates:
            raise ParameterError(
                "`slates` and `evaluation` disagree: pass the slate evaluation as `slates` "
                "alone (it is the report's evaluation)."
            )
    monitor_only = evaluation is None and diagnostics is None and monitoring is not None
    if not monitor_only:
        _checked(evaluation, diagnostics, certificate, validation)
    if distribution is not None and type(distribution).__name__ != "OutcomeDistributions":
        raise ParameterError(
            "`distribution` must be the result of ope.outcome_distribution; got "
            f"{type(distribution).__name__}."
        )
    if sequences is not None and type(sequences).__name__ != "SequenceEvaluation":
        raise ParameterError(
            "`sequences` must be the result of ope.evaluate_sequences; got "
            f"{type(sequences).__name__}."
        )
    if guardrails is not None and type(guardrails).__name__ != "GuardrailDecision":
        raise ParameterError(
            "`guardrails` must be the result of ope.guardrail_decision; got "
            f"{type(guardrails).__name__}."
        )
    max_candidates = check_cap(max_candidates, "max_candidates")
    max_segments = check_cap(max_segments, "max_segments")
    prov: Mapping[str, Any] = provenance if provenance is not None else {}
    if not isinstance(prov, Mapping):
        raise ParameterError(f"`provenance` must be a mapping; got {type(prov).__name__}.")
    truth = Truth.of(truth)
    if validation is None and evaluation is not None:
        validation = evaluation.report
    source, rows = _source(evaluation, validation, prov)
    extra_notes = []
    comparisons = comparison_table(evaluation) if evaluation is not None else pd.DataFrame()
    if evaluation is not None:
        verdicts = candidate_verdicts(evaluation, comparisons, diagnostics, truth)
    elif diagnostics is not None:
        verdicts = overlap_verdicts(diagnostics)
    else:
        verdicts = []
    if continuous is not None:  # a candidate without logged actions near its own: no answer
        verdicts = [
            v
            if continuous.verdicts.get(v.policy, "evaluable") == "evaluable"
            else dataclasses.replace(
                v,
                answer=UNCLEAR,
                summary="too few logged actions near the candidate's",
                reasons=(continuous.verdicts[v.policy], *v.reasons),
            )
            for v in verdicts
        ]
    if sequences is not None:  # a candidate the responses cannot evaluate has no answer
        verdicts = [
            v
            if sequences.verdicts.get(v.policy) == "evaluable"
            else dataclasses.replace(
                v,
                answer=UNCLEAR,
                summary=sequences.causes.get(v.policy, "the responses cannot evaluate it"),
                reasons=(sequences.verdicts[v.policy], *v.reasons),
            )
            for v in verdicts
        ]
        shown = {v.policy for v in verdicts}
        verdicts += [  # a candidate the responses cannot weigh has no estimate, but an answer
            CandidateVerdict(
                policy=name,
                answer=UNCLEAR,
                lower_bound=math.nan,
                upper_bound=math.nan,
                bound_estimator="",
                low=math.nan,
                high=math.nan,
                summary=sequences.causes.get(name, "the responses cannot evaluate it"),
                reasons=(text,),
            )
            for name, text in sequences.verdicts.items()
            if name not in shown and text != "evaluable"
        ]
    if evaluation is not None and diagnostics is not None and diagnostics.n != evaluation.n:
        extra_notes.append(
            f"the diagnostics were computed on {_count(diagnostics.n, 'row')} and the evaluation "
            f"on {_num(evaluation.n)}: they describe different logs."
        )
    if evaluation is not None:
        level = evaluation.confidence_level
    elif diagnostics is not None:
        level = diagnostics.confidence_level
    else:
        level = monitoring.confidence_level
        rows = monitoring.rows if rows is None else rows
    ctx: dict[str, Any] = {
        "evaluation": evaluation,
        "diagnostics": diagnostics,
        "certificate": certificate,
        "truth": truth,
        "provenance": prov,
        "validation": validation,
        "source": source,
        "rows": rows,
        "comparisons": comparisons,
        "verdicts": verdicts,
        "level": level,
        "reference": logging_reference(evaluation) if evaluation is not None else None,
        "segment_estimates": segment_estimates(evaluation) if evaluation is not None else None,
        "notes": _all_notes(evaluation, diagnostics, extra_notes),
        "ranked": ranked_candidates(verdicts),
        "max_candidates": max_candidates,
        "max_segments": max_segments,
        "distribution": distribution,
        "guardrails": guardrails,
        "monitoring": monitoring,
        "sequences": sequences,
        "continuous": continuous,
        "slates": slates,
    }
    figures = _Figures()
    if monitor_only:
        ctx["notes"] = _all_notes(None, None, list(monitoring.notes))
        return _page(
            ctx,
            {
                "headline": _monitor_headline(ctx),
                "monitoring": _monitoring(ctx, figures),
                "notes": _notes(ctx),
                "reproduce": _reproduce(ctx),
            },
            title,
            [
                _count(monitoring.rows, "logged row"),
                _count(len(monitoring.policies), "candidate policy", "candidate policies"),
                f"{monitoring.confidence_level:.0%} confidence sequences",
            ],
            what="Monitoring",
        )
    bodies = {
        "headline": _headline(ctx) + _cap_note(ctx),
        "estimates": _estimates(ctx, figures),
        "comparisons": _comparisons(ctx, figures),
        "distribution": _distribution(ctx, figures),
        "guardrails": _guardrails(ctx),
        "monitoring": _monitoring(ctx, figures),
        "sequences": _sequences(ctx),
        "continuous": _continuous(ctx),
        "slates": _slates(ctx),
        "candidates": _candidates(ctx, figures),
        "segments": _segments(ctx, figures),
        "plan": _plan(ctx),
        "validation": _validation(ctx),
        "certificate": _certificate(ctx),
        "notes": _notes(ctx),
        "reproduce": _reproduce(ctx),
    }
    n_policies = len(evaluation.policies) if evaluation is not None else len(diagnostics.policies)
    sub = [
        _count(
            rows,
            {"rows": "logged row", "episodes": "logged step", "slates": "logged slate"}[
                _unit(evaluation)
            ],
        )
        if rows is not None
        else "",
        _count(n_policies, "candidate policy", "candidate policies"),
    ]
    if evaluation is not None and _unit(evaluation) == "episodes":
        sub.insert(1, _count(evaluation.n, "episode"))
    if evaluation is not None:
        sub.append(
            f"{_count(len(evaluation.estimators), 'estimator')}, {level:.0%} "
            f"{evaluation.ci_method} intervals"
        )
    return _page(ctx, bodies, title, sub)


#: How a section whose input was not given begins (:func:`_not_in_report`): the page lists
#: those sections apart in its contents and shows them muted.
_ABSENT_OPEN: Final = '<p class="absent">'


def _not_in_report(text: str) -> str:
    """The body of a section whose input was not given: ``text`` (HTML) says what would fill
    it and how."""
    return f"{_ABSENT_OPEN}{text}</p>"


def _page(
    ctx: Mapping[str, Any],
    bodies: Mapping[str, str],
    title: str | None,
    sub: list[str],
    what: str = "Off-policy evaluation",
) -> str:
    """The HTML page of the sections in ``bodies`` (in :data:`REPORT_SECTIONS` order), titled
    ``title`` or "<what> of <the input's name>"."""
    source = ctx["source"]
    name = Path(source).name if source and not source.startswith("<") else (source or "logs")
    page_title = title if title is not None else f"{what} of {name}"
    if source:
        sub = [*sub, f"source: {source}"]
    shown = [(sid, heading) for sid, heading in REPORT_SECTIONS if sid in bodies]
    absent = {sid for sid, _ in shown if bodies[sid].startswith(_ABSENT_OPEN)}
    nav = "<ol>{}</ol>".format(
        "".join(
            f'<li><a href="#{sid}">{_e(heading)}</a></li>'
            for sid, heading in shown
            if sid not in absent
        )
    )
    if absent:
        links = " · ".join(
            f'<a href="#{sid}">{_e(heading)}</a>' for sid, heading in shown if sid in absent
        )
        nav += f'<p class="absent">Not in this report (each says how to add it): {links}</p>'
    sections = "".join(
        f'<section id="{sid}" class="{sid}{" absent" if sid in absent else ""}">'
        f"<h2>{_e(heading)}</h2>{bodies[sid]}</section>\n"
        for sid, heading in shown
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="generator" content="ope report">\n'
        f"<title>{_e(page_title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        f"<header><h1>{_e(page_title)}</h1>"
        f'<p class="sub">{_e(" · ".join(s for s in sub if s))}</p></header>\n'
        f'<nav aria-label="sections">{nav}</nav>\n'
        f"<main>\n{sections}</main>\n</body>\n</html>\n"
    )


def check_report_destination(
    path: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    inputs: Sequence[Any] = (),
) -> Path:
    """Check where a report will be written, before any work: returns the path.

    Raises
    ------
    ope.ParameterError
        The file exists and ``overwrite`` is False, the path is a directory, or it is one of
        ``inputs`` (a report never replaces the logs it describes).
    ope.DataFileError
        Its directory does not exist.
    """
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        raise ParameterError(f"the report path must be a file path; got {path!r}.")
    target = Path(path)
    if target.is_dir():
        raise ParameterError(
            f"the report path {str(target)!r} is a directory; name a file, e.g. report.html."
        )
    if not target.parent.is_dir():
        raise DataFileError(
            f"cannot write the report to {str(target)!r}: the directory "
            f"{str(target.parent)!r} does not exist."
        )
    if isinstance(inputs, (str, bytes, os.PathLike)) or not isinstance(inputs, Iterable):
        raise ParameterError(
            "`inputs` must be a list of the report's input paths (None entries are skipped), "
            f"e.g. inputs=['logs.parquet']; got {type(inputs).__name__}."
        )
    for source in inputs:
        if source is None:
            continue
        candidate = Path(str(source))
        if candidate.exists() and candidate.resolve() == target.resolve():
            raise ParameterError(
                f"the report path {str(target)!r} is an input of the report; "
                "choose another file name."
            )
    if target.exists() and not overwrite:
        raise ParameterError(
            f"{str(target)!r} exists; pass overwrite=True (--force) to replace it."
        )
    return target


def write_report(
    path: str | os.PathLike[str],
    *,
    evaluation: Any = None,
    diagnostics: Any = None,
    certificate: Any = None,
    truth: Any = None,
    provenance: Mapping[str, Any] | None = None,
    title: str | None = None,
    validation: Any = None,
    overwrite: bool = False,
    max_candidates: int | None = MAX_FIGURE_CANDIDATES,
    max_segments: int | None = MAX_REPORT_SEGMENTS,
    distribution: Any = None,
    guardrails: Any = None,
    monitoring: Any = None,
    sequences: Any = None,
    continuous: Any = None,
    slates: Any = None,
) -> Path:
    """Write the HTML report to ``path`` atomically; returns the path.

    The arguments are those of :func:`render_report`. The destination is checked first
    (:func:`check_report_destination`); the page is written to a temporary file in the same
    directory and renamed over ``path`` only when complete, so a failure leaves no partial
    file. An existing file is replaced only with ``overwrite=True``.

    Examples
    --------
    >>> import os, tempfile
    >>> import ope
    >>> from ope.report import write_report
    >>> sample = ope.load_sample(columns=["action", "propensity", "reward", "target__greedy"])
    >>> ev = ope.evaluate(sample.table, estimators=("ips",), reward_range=(0, 1))
    >>> path = write_report(os.path.join(tempfile.mkdtemp(), "report.html"), evaluation=ev)
    >>> path.read_text(encoding="utf-8").count("<svg")
    2
    """
    report = validation if validation is not None else getattr(evaluation, "report", None)
    inputs = [getattr(report, "source", None)]
    if provenance is not None and isinstance(provenance, Mapping):
        inputs.append(provenance.get("input"))
    target = check_report_destination(path, overwrite=overwrite, inputs=inputs)
    page = render_report(
        evaluation=evaluation,
        diagnostics=diagnostics,
        certificate=certificate,
        truth=truth,
        provenance=provenance,
        title=title,
        validation=validation,
        max_candidates=max_candidates,
        max_segments=max_segments,
        distribution=distribution,
        guardrails=guardrails,
        monitoring=monitoring,
        sequences=sequences,
        continuous=continuous,
        slates=slates,
    )
    with atomic_path(target, force=overwrite, force_flag="overwrite=True (--force)") as tmp:
        with open(tmp, "x", encoding="utf-8", newline="\n") as handle:
            handle.write(page)
    return target
