"""Plots of ope's results on a matplotlib axis: the one home for drawing.

matplotlib is an optional dependency (the ``plot`` extra: ``pip install 'ope-toolkit[plot]'``),
imported on first use. Every function takes the result object, draws on ``ax`` (a new figure
when None) and returns the axis; none computes a statistic: they draw what the result objects
report (:mod:`ope.report.views` turns them into rows). The HTML report (:mod:`ope.report`) draws
with the same functions.

* :func:`plot_evaluation` -- the forest plot: each candidate x estimator with its interval, the
  logging policy's value as a reference line, the exact values when known;
* :func:`plot_comparisons` -- paired differences with the logging policy (or between
  candidates), ranked by their lower bound;
* :func:`plot_weights` -- the distribution of one candidate's importance weights on a log
  scale, with the clip level;
* :func:`plot_coverage` -- a segment x action (or popularity bucket) heatmap of the candidate's
  and the logger's mass, with the gaps framed;
* :func:`plot_interval_split` -- the outer/inner interval of each candidate split into its
  sampling and coverage parts;
* :func:`plot_segments` -- per-segment estimates with intervals.

When ``ax`` is None and no matplotlib backend has been chosen (no ``MPLBACKEND``, no
``matplotlib.use``, pyplot not yet imported), the non-interactive Agg backend is selected, so
plotting never needs a display; in Jupyter the inline backend is already chosen and the figure
shows under the cell.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Final

import numpy as np
import pandas as pd

from ope._format import format_number, format_share, safe_text
from ope.exceptions import ParameterError
from ope.report.views import (
    Truth,
    comparison_method,
    comparison_table,
    headline_estimator,
    logging_reference,
)

__all__ = [
    "PLOT_INSTALL_HINT",
    "ESTIMATOR_COLORS",
    "require_matplotlib",
    "detached_figures",
    "plot_evaluation",
    "plot_comparisons",
    "plot_weights",
    "plot_coverage",
    "plot_interval_split",
    "plot_segments",
    "plot_distribution",
    "plot_monitor",
]

#: How to install the optional plotting dependency.
PLOT_INSTALL_HINT: Final = "pip install 'ope-toolkit[plot]'"

#: Colours of the estimators (Okabe & Ito's colour-blind safe palette), in registry order; a
#: name not listed takes the next colour of :data:`_CYCLE`.
ESTIMATOR_COLORS: Final = {
    "ips": "#0072B2",
    "clipped_ips": "#56B4E9",
    "snips": "#009E73",
    "dm": "#999999",
    "dr": "#D55E00",
    "sndr": "#CC79A7",
    "switch_dr": "#E69F00",
    "dros": "#F0E442",
}
_CYCLE: Final = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")

#: Colours of an answer (better / worse / no clear difference) and of the two interval parts.
_ANSWER_COLORS: Final = {
    "better": "#1a7f37",
    "worse": "#c62828",
    "no clear difference": "#6e7781",
    "no interval": "#6e7781",
}
_SAMPLING_COLOR: Final = "#4C78A8"
_COVERAGE_COLOR: Final = "#F58518"
_LOGGING_COLOR: Final = "#555555"
_GAP_COLOR: Final = "#c62828"

#: Figure width (inches) of a new figure, and the height per row of a forest plot.
_WIDTH: Final = 8.0
_ROW_HEIGHT: Final = 0.26


def _matplotlib_home() -> None:
    """Before matplotlib's first import: when its configuration and cache folders cannot be
    written (a read-only or missing home, as in some containers), point ``MPLCONFIGDIR`` at a
    private temporary folder removed at exit, which matplotlib would otherwise make itself,
    printing two lines about it on every run. Only where matplotlib keeps them in the XDG
    folders (Linux and the BSDs; ``~/.matplotlib`` and the Windows profile are left to it)."""
    if "matplotlib" in sys.modules or os.environ.get("MPLCONFIGDIR"):
        return
    if not sys.platform.startswith(("linux", "freebsd")):
        return
    try:
        home = Path.home()
    except (RuntimeError, KeyError):
        home = None
    roots = [os.environ.get("XDG_CONFIG_HOME"), os.environ.get("XDG_CACHE_HOME")]
    folders = [
        Path(root or (home / default if home is not None else "")) / "matplotlib"
        for root, default in zip(roots, (".config", ".cache"), strict=True)
        if root or home is not None
    ]
    try:
        for folder in folders:
            folder.mkdir(parents=True, exist_ok=True)
        if len(folders) == 2 and all(os.access(f, os.W_OK) for f in folders):
            return
    except OSError:
        pass
    import atexit
    import shutil
    import tempfile

    private = tempfile.mkdtemp(prefix="ope-matplotlib-")
    atexit.register(shutil.rmtree, private, ignore_errors=True)
    os.environ["MPLCONFIGDIR"] = private


def require_matplotlib() -> Any:
    """Import matplotlib, or raise ImportError saying how to install it."""
    _matplotlib_home()
    try:
        import matplotlib
    except ImportError as exc:
        raise ImportError(
            "ope's plots and the HTML report's figures need matplotlib, an optional "
            f"dependency; install it with: {PLOT_INSTALL_HINT} ({exc})",
            name="matplotlib",
        ) from exc
    return matplotlib


#: True inside :func:`detached_figures`.
_DETACHED: ContextVar[bool] = ContextVar("ope_plots_detached", default=False)


@contextlib.contextmanager
def detached_figures() -> Iterator[None]:
    """Inside, a plot drawn with ``ax=None`` gets a plain :class:`matplotlib.figure.Figure`
    that pyplot does not know: nothing is shown, nothing is kept open, and the global backend
    is left alone (the HTML report draws this way, then saves ``ax.figure`` as SVG)."""
    token = _DETACHED.set(True)
    try:
        yield
    finally:
        _DETACHED.reset(token)


def _backend_chosen(mpl: Any) -> bool:
    """True when the user (or Jupyter, or the environment) has chosen a backend."""
    if "matplotlib.pyplot" in sys.modules or os.environ.get("MPLBACKEND"):
        return True
    getter = getattr(mpl.rcParams, "_get_backend_or_none", None)
    return getter is not None and getter() is not None


def _new_axes(height: float, width: float = _WIDTH) -> Any:
    """A new figure's axis through pyplot (shown by Jupyter), on Agg when no backend is set."""
    mpl = require_matplotlib()
    if _DETACHED.get():
        from matplotlib.figure import Figure

        return Figure(figsize=(width, height), layout="constrained").add_subplot()
    if not _backend_chosen(mpl):
        mpl.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(width, height), layout="constrained")
    return fig.add_subplot()


def _axes(ax: Any, height: float, width: float = _WIDTH) -> Any:
    if ax is None:
        return _new_axes(height, width)
    if not hasattr(ax, "errorbar") or not hasattr(ax, "figure"):
        raise ParameterError(f"`ax` must be a matplotlib Axes or None; got {type(ax).__name__}.")
    return ax


def _text(value: Any) -> str:
    """User text as a literal label: matplotlib reads ``$...$`` as mathematics and hides
    legend entries that start with ``_``; control and bidi characters are shown escaped
    (:func:`ope._format.safe_text`: a NUL would make the SVG malformed XML)."""
    text = safe_text(value).replace("$", r"\$")
    return " " + text if text.startswith("_") else text


def _number(x: Any) -> str:
    """A number of a label, by the rules of :mod:`ope._format` (4 significant digits)."""
    return format_number(x, trim=True)


def _color(estimator: str, index: int) -> str:
    return ESTIMATOR_COLORS.get(estimator, _CYCLE[index % len(_CYCLE)])


def _finite(*values: float) -> bool:
    return all(v is not None and math.isfinite(v) for v in values)


# --------------------------------------------------------------------------------------------
# the forest plot
# --------------------------------------------------------------------------------------------
def plot_evaluation(
    evaluation: Any,
    ax: Any = None,
    *,
    truth: Any = None,
    estimators: Sequence[str] | None = None,
    policies: Sequence[str] | None = None,
) -> Any:
    """Forest plot of an :class:`ope.Evaluation`: every candidate x estimator with its interval.

    Parameters
    ----------
    evaluation : ope.Evaluation
        The result of :func:`ope.evaluate`.
    ax : matplotlib.axes.Axes, optional
        Where to draw (a new figure when None).
    truth : mapping, optional
        Exact values (``{policy: value}``, ``"logging"`` for the logging policy, or the bundled
        sample's ``truth``): drawn as black diamonds (a dotted line for the logging policy).
    estimators : sequence of str, optional
        Only these estimators (default all).
    policies : sequence of str, optional
        Only these candidates, in this order (default all; the report draws at most
        :data:`ope.report.views.MAX_FIGURE_CANDIDATES`).

    Returns
    -------
    matplotlib.axes.Axes

    Notes
    -----
    The logging policy's value (the mean logged reward on the same rows) is the grey line, its
    interval the grey band. An open marker is an interval that covers the *clipped* value
    (clipped IPS whose clip binds), not the policy's value. DM carries no interval: its point
    alone is drawn.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import ope
    >>> from ope.plots import plot_evaluation
    >>> sample = ope.load_sample(columns=["action", "propensity", "reward", "target__greedy"])
    >>> ev = ope.evaluate(sample.table, estimators=("ips", "snips"), reward_range=(0, 1))
    >>> ax = plot_evaluation(ev, truth=sample.truth)
    >>> [t.get_text() for t in ax.get_yticklabels()]
    ['greedy']
    """
    truth = Truth.of(truth)
    table = evaluation.table()
    chosen = list(estimators) if estimators is not None else list(evaluation.estimators)
    unknown = [e for e in chosen if e not in evaluation.estimators]
    if unknown:
        raise ParameterError(
            f"`estimators` {unknown} were not evaluated; this evaluation has "
            f"{', '.join(evaluation.estimators)}."
        )
    table = table[table["estimator"].isin(chosen)]
    policies = (
        list(evaluation.policies)
        if policies is None
        else [p for p in policies if p in set(evaluation.policies)]
    )
    k = len(chosen)
    ax = _axes(ax, 1.2 + _ROW_HEIGHT * len(policies) * (k + 0.6))
    ref = logging_reference(evaluation)
    if _finite(ref.ci_low, ref.ci_high):
        ax.axvspan(ref.ci_low, ref.ci_high, color=_LOGGING_COLOR, alpha=0.12, lw=0)
    ax.axvline(
        ref.value, color=_LOGGING_COLOR, lw=1.2, label=f"logging policy {_number(ref.value)}"
    )
    if truth.logging is not None:
        ax.axvline(
            truth.logging,
            color="black",
            lw=1.0,
            ls=":",
            label=f"logging policy, exact {_number(truth.logging)}",
        )
    band = k + 0.6
    centers = []
    drawn: set[str] = set()
    clipped_drawn = False
    for i, policy in enumerate(policies):
        top = -i * band
        centers.append(top - (k - 1) / 2)
        if i:
            ax.axhline(top + 0.8, color="#dddddd", lw=0.6)
        rows = table[table["policy"] == policy].set_index("estimator")
        for j, est in enumerate(chosen):
            if est not in rows.index:
                continue
            r = rows.loc[est]
            y = top - j
            color = _color(est, j)
            clipped = str(r["target"]).startswith("clipped")
            clipped_drawn |= clipped
            has_ci = _finite(float(r["ci_low"]), float(r["ci_high"]))
            xerr = None
            if has_ci:
                xerr = [[max(r["value"] - r["ci_low"], 0.0)], [max(r["ci_high"] - r["value"], 0.0)]]
            ax.errorbar(
                [r["value"]],
                [y],
                xerr=xerr,
                fmt="o",
                color=color,
                ms=5,
                capsize=2.5,
                lw=1.4,
                mfc="white" if clipped else color,
                label=None if est in drawn else _text(est),
            )
            drawn.add(est)
        if policy in truth.policies:
            ax.plot(
                [truth.policies[policy]],
                [centers[-1]],
                marker="D",
                color="black",
                ms=5,
                ls="none",
                label=None if "exact" in drawn else "exact value",
            )
            drawn.add("exact")
    ax.set_yticks(centers, labels=[_text(p) for p in policies])
    ax.set_ylim(-(len(policies) - 1) * band - k + 0.2, 0.8)
    ax.set_xlabel(
        f"estimated value, {evaluation.confidence_level:.0%} {evaluation.ci_method} intervals"
    )
    ax.grid(axis="x", color="#eeeeee", lw=0.6)
    ax.set_axisbelow(True)
    if clipped_drawn:
        ax.plot(
            [],
            [],
            "o",
            mfc="white",
            color="#333333",
            ls="none",
            label="open: covers the clipped value",
        )
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.set_title("Estimates beside the logging policy", loc="left", fontsize=11)
    return ax


# --------------------------------------------------------------------------------------------
# paired differences
# --------------------------------------------------------------------------------------------
def plot_comparisons(
    evaluation: Any,
    ax: Any = None,
    *,
    between: bool = False,
    truth: Any = None,
    comparisons: pd.DataFrame | None = None,
) -> Any:
    """Paired differences on the same rows, ranked by their lower bound.

    Parameters
    ----------
    evaluation : ope.Evaluation
    ax : matplotlib.axes.Axes, optional
    between : bool, default False
        Differences between candidates (under the report's headline estimator) instead of
        every candidate x estimator against the logging policy.
    truth : mapping, optional
        Exact values, as in :func:`plot_evaluation`: the exact differences are drawn as black
        diamonds.
    comparisons : pandas.DataFrame, optional
        :func:`ope.report.views.comparison_table` of ``evaluation`` when already computed.

    Returns
    -------
    matplotlib.axes.Axes

    Notes
    -----
    Green: the interval lies above 0 (better); red: below (worse); grey: it includes 0. The
    intervals are paired: the standard error of each difference comes from the per-row terms
    of both estimates, so it is smaller than treating them as independent.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import ope
    >>> from ope.plots import plot_comparisons
    >>> sample = ope.load_sample(columns=["action", "propensity", "reward", "target__greedy"])
    >>> ev = ope.evaluate(sample.table, estimators=("ips", "snips"), reward_range=(0, 1))
    >>> [t.get_text() for t in plot_comparisons(ev).get_yticklabels()]
    ['greedy − logging  (ips)', 'greedy − logging  (snips)']
    """
    truth = Truth.of(truth)
    table = comparison_table(evaluation, between=between) if comparisons is None else comparisons
    table = table[(table["baseline"] != "logging") if between else (table["baseline"] == "logging")]
    n = len(table)
    ax = _axes(ax, 1.3 + _ROW_HEIGHT * max(n, 1))
    ax.axvline(0.0, color="black", lw=1.0)
    if not n:
        ax.text(
            0.5,
            0.5,
            "no paired differences (a streamed evaluation has no rows to pair)"
            if getattr(evaluation, "streaming", False)
            else "no other candidate to compare",
            ha="center",
            va="center",
            transform=ax.transAxes,
            fontsize=9,
        )
        ax.set_yticks([])
        return ax
    labels = []
    exact_drawn = False
    for i, r in enumerate(table.itertuples(index=False)):
        y = -i
        color = _ANSWER_COLORS.get(r.answer, "#6e7781")
        xerr = None
        if _finite(r.ci_low, r.ci_high):
            xerr = [[max(r.difference - r.ci_low, 0.0)], [max(r.ci_high - r.difference, 0.0)]]
        ax.errorbar([r.difference], [y], xerr=xerr, fmt="o", color=color, ms=5, capsize=2.5, lw=1.4)
        labels.append(f"{_text(r.policy)} − {_text(r.baseline)}  ({r.estimator})")
        exact = truth.difference(r.policy, r.baseline)
        if exact is not None:
            ax.plot(
                [exact],
                [y],
                marker="D",
                color="black",
                ms=4.5,
                ls="none",
                label=None if exact_drawn else "exact difference",
            )
            exact_drawn = True
    ax.set_yticks([-i for i in range(n)], labels=labels)
    ax.set_ylim(-n + 0.4, 0.6)
    level = evaluation.confidence_level
    ax.set_xlabel(
        f"difference in value, {level:.0%} {comparison_method(evaluation)} intervals (paired)"
    )
    ax.grid(axis="x", color="#eeeeee", lw=0.6)
    ax.set_axisbelow(True)
    for answer in ("better", "worse", "no clear difference"):
        if (table["answer"] == answer).any():
            ax.plot([], [], "o", color=_ANSWER_COLORS[answer], label=answer)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    title = (
        f"Between candidates ({headline_estimator(evaluation)}), ranked by lower bound"
        if between
        else "Against the logging policy, ranked by lower bound"
    )
    ax.set_title(title, loc="left", fontsize=11)
    return ax


# --------------------------------------------------------------------------------------------
# importance weights
# --------------------------------------------------------------------------------------------
def _weight_bins(weights: np.ndarray) -> pd.DataFrame:
    """Factor-of-two bins of raw weights (the layout of ``Diagnostics.weight_histogram``)."""
    w = np.asarray(weights, dtype=np.float64).ravel()
    if w.size == 0 or not np.isfinite(w).all() or (w < 0).any():
        raise ParameterError(
            "weights must be a non-empty array of finite, non-negative importance weights."
        )
    n = w.size
    positive = w[w > 0]
    rows = [
        {
            "weight_low": 0.0,
            "weight_high": 0.0,
            "rows": int(n - positive.size),
            "row_share": (n - positive.size) / n,
            "target_mass": 0.0,
        }
    ]
    if positive.size:
        _, exponents = np.frexp(positive)  # w in [2**(e-1), 2**e)
        lo, hi = int(exponents.min()), int(exponents.max())
        counts = np.bincount(exponents - lo, minlength=hi - lo + 1)
        mass = np.bincount(exponents - lo, weights=positive, minlength=hi - lo + 1)
        for k in range(hi - lo + 1):
            e = lo + k
            rows.append(
                {
                    "weight_low": math.ldexp(1.0, e - 1),
                    "weight_high": math.ldexp(1.0, e),
                    "rows": int(counts[k]),
                    "row_share": counts[k] / n,
                    "target_mass": mass[k] / n,
                }
            )
    return pd.DataFrame(rows)


def plot_weights(
    diagnostics_or_weights: Any,
    policy: str | None = None,
    ax: Any = None,
    *,
    max_weight: float | None = None,
) -> Any:
    """Distribution of a candidate's importance weights on a log scale, with the clip level.

    Parameters
    ----------
    diagnostics_or_weights : ope.Diagnostics or array_like
        Diagnostics (their :meth:`~ope.Diagnostics.weight_histogram` of ``policy``, and its
        ESS and clip level), or the weights w = pi_e / pi_b themselves.
    policy : str, optional
        The candidate (required with diagnostics; a label with weights).
    ax : matplotlib.axes.Axes, optional
    max_weight : float, optional
        The clip level to mark (default: the diagnostics' clip level of ``policy``).

    Returns
    -------
    matplotlib.axes.Axes

    Notes
    -----
    Bars: the share of rows whose weight falls in each factor-of-two bin. Orange steps: the
    share of the candidate's probability mass those rows carry (the bin's sum of weights / n).
    Heavy weights are where the orange mass sits far to the right of the blue rows: a few rows
    then carry the estimate. Diagnostics of rows with sampling weights ``s`` plot the
    population's histogram (shares of ``sum s``, masses ``sum s w / sum s``) and say so.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> from ope.plots import plot_weights
    >>> ax = plot_weights(np.array([0.0, 0.5, 1.0, 1.5, 8.0]), "demo", max_weight=4)
    >>> ax.get_xscale()
    'log'
    """
    info: dict[str, Any] = {}
    rows_word = "rows"
    if hasattr(diagnostics_or_weights, "weight_histogram"):
        if getattr(diagnostics_or_weights, "sampling_weight", None) is not None:
            rows_word = "population rows (sampling-weighted)"
        d = diagnostics_or_weights
        if policy is None:
            raise ParameterError(
                f"`policy` is required with diagnostics; they have: {', '.join(d.policies)}."
            )
        bins = d.weight_histogram(policy)
        info = next(r for r in d.table().to_dict("records") if r["policy"] == policy)
        if max_weight is None and _finite(info.get("max_weight", math.nan)):
            max_weight = float(info["max_weight"])
    else:
        bins = _weight_bins(diagnostics_or_weights)
    ax = _axes(ax, 2.8, _WIDTH)
    zero = bins[bins["weight_high"] == 0]
    pos = bins[bins["weight_high"] > 0]
    if len(pos):
        lows = pos["weight_low"].to_numpy()
        highs = pos["weight_high"].to_numpy()
        ax.bar(
            lows,
            pos["row_share"],
            width=highs - lows,
            align="edge",
            color=_SAMPLING_COLOR,
            alpha=0.75,
            label=f"share of {rows_word}",
            edgecolor="white",
            lw=0.4,
        )
        edges = np.append(lows, highs[-1])
        ax.stairs(
            pos["target_mass"].to_numpy(),
            edges,
            color=_COVERAGE_COLOR,
            lw=1.8,
            label="share of the candidate's mass",
        )
        ax.set_xscale("log")
        ax.set_xlim(lows[0], highs[-1])
        _plain_log_ticks(ax)
    if max_weight is not None and _finite(max_weight) and max_weight > 0:
        where = f"clip level {_number(max_weight)}"
        if info and _finite(info.get("clipped_share", math.nan)):
            where += (
                f":\n{format_share(info['clipped_share'])} of rows, "
                f"{format_share(info['clipped_weight_share'])} of the weight"
            )
        ax.axvline(max_weight, color=_GAP_COLOR, ls="--", lw=1.2, label=where)
    ax.set_ylim(
        0, 1.05 * max(float(bins["row_share"].max()), float(bins["target_mass"].max()), 1e-12)
    )
    ax.set_xlabel("importance weight π/π₀ (log scale; bins of a factor of two)")
    ax.set_ylabel("share")
    zero_share = float(zero["row_share"].sum()) if len(zero) else 0.0
    ax.plot(
        [],
        [],
        ls="none",
        label=f"weight 0: {format_share(zero_share)} of {rows_word}\n(never the "
        "candidate's action)",
    )
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    name = _text(policy) if policy is not None else "weights"
    if info:
        base = "rows" if rows_word == "rows" else "the sampling weights' ESS"
        title = (
            f"{name}: ESS {_number(info['ess'])} ({format_share(info['ess_ratio'])} of {base}), "
            f"largest weight {_number(info['weight_max'])}"
        )
    else:
        w = bins["target_mass"].sum()
        title = f"{name}: mean weight {_number(w)}"
    ax.set_title(title, loc="left", fontsize=10)
    return ax


# --------------------------------------------------------------------------------------------
# coverage heatmap
# --------------------------------------------------------------------------------------------
def plot_coverage(
    diagnostics: Any,
    policy: str,
    ax: Any = None,
    *,
    by: str | None = None,
    segments: Sequence[Any] | None = None,
) -> Any:
    """Segment x action (or popularity bucket) heatmap of the candidate's and the logger's mass.

    Parameters
    ----------
    diagnostics : ope.Diagnostics
    policy : str
        The candidate.
    ax : matplotlib.axes.Axes, optional
    by : str, optional
        The segment column of the rows (default: the diagnostics' first segment column; one
        row ``all`` without one).
    segments : sequence, optional
        Only these segments (rows) of ``by``, in the heatmap's order (default all; the report
        shows at most :data:`ope.report.views.MAX_REPORT_SEGMENTS`).

    Returns
    -------
    matplotlib.axes.Axes

    Notes
    -----
    The colour is the candidate's probability mass in the cell, as a share of all rows
    (``Diagnostics.coverage_matrix(value="target_mass")``); each cell reads "candidate share /
    logger share". Segments (rows) and popularity buckets (columns) with a gap are framed in
    red and marked ``(gap)``; the reasons are in ``Diagnostics.segments()``.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import ope
    >>> from ope.plots import plot_coverage
    >>> import warnings
    >>> logs = ope.read_logs(ope.load_sample().table)
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", ope.OverlapWarning)  # long_tail's gap, shown below
    ...     d = ope.diagnose(logs, ["long_tail"], by=["segment"], reward_range=(0, 1))
    >>> [t.get_text() for t in plot_coverage(d, "long_tail").get_yticklabels()][:3]
    ['casual', 'loyal', 'new  (gap)']
    """
    target = diagnostics.coverage_matrix(policy, by=by, value="target_mass")
    logged = diagnostics.coverage_matrix(policy, by=by, value="logging_mass")
    if segments is not None:
        wanted = {str(s) for s in segments}
        keep = [i for i, s in enumerate(target.index) if str(s) in wanted]
        target, logged = target.iloc[keep], logged.iloc[keep]
    column = target.index.name
    seg_table = diagnostics.segments()
    mine = (
        seg_table[(seg_table["policy"] == policy) & seg_table["gap"]]
        if len(seg_table)
        else seg_table
    )
    gap_rows = (
        set(mine.loc[mine["column"] == column, "segment"].astype(str)) if len(mine) else set()
    )
    gap_cols = (
        set(mine.loc[mine["column"] == target.columns.name, "segment"].astype(str))
        if len(mine)
        else set()
    )
    n_rows, n_cols = target.shape
    ax = _axes(ax, 1.4 + 0.42 * n_rows, min(2.6 + 0.85 * n_cols, 11.0))
    values = target.to_numpy(dtype=np.float64)
    top = float(np.nanmax(values)) if values.size and np.isfinite(values).any() else 1.0
    image = ax.imshow(values, cmap="Blues", vmin=0.0, vmax=max(top, 1e-12), aspect="auto")
    fontsize = 8 if n_cols <= 8 else 6
    for i in range(n_rows):
        for j in range(n_cols):
            c, lg = values[i, j], float(logged.iat[i, j])
            text = f"{format_share(c)} / {format_share(lg)}" if n_cols <= 8 else format_share(c)
            ax.text(
                j,
                i,
                text,
                ha="center",
                va="center",
                fontsize=fontsize,
                color="white" if c > 0.6 * top else "black",
            )
    row_labels = [_text(s) + ("  (gap)" if str(s) in gap_rows else "") for s in target.index]
    col_labels = [_text(a) + ("\n(gap)" if str(a) in gap_cols else "") for a in target.columns]
    ax.set_yticks(range(n_rows), labels=row_labels)
    ax.set_xticks(range(n_cols), labels=col_labels, fontsize=8 if n_cols <= 10 else 6)
    for i, s in enumerate(target.index):
        if str(s) in gap_rows:
            ax.add_patch(_frame(ax, -0.5, i - 0.5, n_cols, 1.0))
            ax.get_yticklabels()[i].set_color(_GAP_COLOR)
    for j, a in enumerate(target.columns):
        if str(a) in gap_cols:
            ax.add_patch(_frame(ax, j - 0.5, -0.5, 1.0, n_rows))
            ax.get_xticklabels()[j].set_color(_GAP_COLOR)
    ax.set_ylabel(_text(column))
    ax.set_xlabel(_text(target.columns.name))
    from matplotlib.ticker import PercentFormatter

    bar = ax.figure.colorbar(image, ax=ax, label="candidate's mass (share of rows)", shrink=0.9)
    bar.ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=None))
    what = "candidate / logger share of rows" if n_cols <= 8 else "candidate's share of rows"
    ax.set_title(f"{_text(policy)}: {what}", loc="left", fontsize=10)
    return ax


def _plain_log_ticks(ax: Any) -> None:
    """Decimal labels (0.001, 1, 100) on a log x axis instead of powers in mathtext."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.xaxis.set_major_locator(LogLocator(base=10.0, numticks=7))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _frame(ax: Any, x: float, y: float, w: float, h: float) -> Any:
    from matplotlib.patches import Rectangle

    return Rectangle((x, y), w, h, fill=False, edgecolor=_GAP_COLOR, lw=2.0, clip_on=False)


# --------------------------------------------------------------------------------------------
# outer/inner split
# --------------------------------------------------------------------------------------------
def plot_interval_split(
    diagnostics: Any,
    ax: Any = None,
    *,
    truth: Any = None,
    logging_value: float | None = None,
    policies: Sequence[str] | None = None,
) -> Any:
    """Each candidate's outer/inner (Bottou) interval split into sampling and coverage parts.

    Parameters
    ----------
    diagnostics : ope.Diagnostics
        With ``reward_range`` (otherwise there is no interval to split).
    ax : matplotlib.axes.Axes, optional
    truth : mapping, optional
        Exact values, drawn as black diamonds.
    logging_value : float, optional
        The logging policy's value, drawn as a grey line.
    policies : sequence of str, optional
        Only these candidates (default all).

    Returns
    -------
    matplotlib.axes.Axes

    Notes
    -----
    Blue: the sampling part of the interval (more logs of the same kind shrink it); orange: the
    coverage part (clipped or unsupported mass: only different exploration shrinks it). The
    dot is the clipped value, at the diagnostics' clip level.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import ope
    >>> from ope.plots import plot_interval_split
    >>> import warnings
    >>> logs = ope.read_logs(ope.load_sample().table)
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", ope.OverlapWarning)  # long_tail's weak overlap
    ...     d = ope.diagnose(logs, ["greedy", "long_tail"], max_weight=50, reward_range=(0, 1))
    >>> len(plot_interval_split(d).patches)
    4
    """
    truth = Truth.of(truth)
    rows = [
        r
        for r in diagnostics.table().to_dict("records")
        if _finite(r["ci_low"], r["ci_high"]) and (policies is None or r["policy"] in set(policies))
    ]
    ax = _axes(ax, 1.3 + 0.4 * max(len(rows), 1))
    if not rows:
        ax.text(
            0.5,
            0.5,
            "no outer/inner interval: pass reward_range to diagnose",
            ha="center",
            va="center",
            transform=ax.transAxes,
            fontsize=9,
        )
        ax.set_yticks([])
        return ax
    if logging_value is not None:
        ax.axvline(
            logging_value,
            color=_LOGGING_COLOR,
            lw=1.2,
            label=f"logging policy {_number(logging_value)}",
        )
    # the axis fits what is estimated: the clipped values, the sampling parts, the exact and
    # logging values; a coverage part (set by the a priori reward range: up to 0.165 for a
    # click rate of 0.005) may run past it and is cut at the edge, its end written there
    core = [
        float(v)
        for r in rows
        for v in (
            r["ci_low"],
            float(r["ci_low"]) + _sampling_part(r),
            r["clipped_value"],
            truth.policies.get(r["policy"]),
        )
        if v is not None and _finite(float(v))
    ]
    if logging_value is not None and _finite(logging_value):
        core.append(float(logging_value))
    low, high = _fitted_range(core, [float(r["ci_high"]) for r in rows])
    for i, r in enumerate(rows):
        y = -i
        sampling = _sampling_part(r)
        coverage = max(float(r["ci_high"]) - float(r["ci_low"]) - sampling, 0.0)
        ax.barh(
            y,
            sampling,
            left=r["ci_low"],
            height=0.5,
            color=_SAMPLING_COLOR,
            label="sampling part" if i == 0 else None,
        )
        ax.barh(
            y,
            coverage,
            left=r["ci_low"] + sampling,
            height=0.5,
            color=_COVERAGE_COLOR,
            label="coverage part" if i == 0 else None,
        )
        ax.plot(
            [r["clipped_value"]],
            [y],
            "o",
            color="black",
            ms=3.5,
            label="clipped value" if i == 0 else None,
        )
        if r["policy"] in truth.policies:
            ax.plot(
                [truth.policies[r["policy"]]],
                [y],
                "D",
                color="black",
                mfc="white",
                ms=5,
                label="exact value" if i == 0 else None,
            )
    ax.set_xlim(low, high)
    for i, r in enumerate(rows):
        if float(r["ci_high"]) > high:
            ax.text(
                high,
                -i,
                f"to {_number(r['ci_high'])} \u2192",
                ha="right",
                va="center",
                fontsize=7,
                color="black",
                bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8},
            )
    ax.set_yticks(
        [-i for i in range(len(rows))],
        labels=[
            f"{_text(r['policy'])}  (clip {_number(r['max_weight'])}, "
            f"{format_share(r['coverage_share'])} coverage)"
            for r in rows
        ],
    )
    ax.set_ylim(-len(rows) + 0.4, 0.6)
    ax.set_xlabel(f"value, {diagnostics.confidence_level:.0%} outer/inner interval (Bottou)")
    ax.grid(axis="x", color="#eeeeee", lw=0.6)
    ax.set_axisbelow(True)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.set_title(
        "What more of the same logs would shrink (blue) and would not (orange)",
        loc="left",
        fontsize=10,
    )
    return ax


def _sampling_part(row: dict[str, Any]) -> float:
    """The sampling part's width of an outer/inner interval (the whole width without one)."""
    width = row["sampling_width"]
    return float(width) if _finite(width) else float(row["ci_high"]) - float(row["ci_low"])


#: The outer/inner chart's axis: past what it fits, at most this share of its span more for
#: the coverage parts, and this share of padding on either side.
_REACH: Final = 0.5
_PAD: Final = 0.06


def _fitted_range(core: Sequence[float], ends: Sequence[float]) -> tuple[float, float]:
    """An axis range that fits the values of ``core`` with padding, and reaches the interval
    ends of ``ends`` past them by at most :data:`_REACH` of the span.

    >>> _fitted_range([0.0, 0.012, 0.0046], [0.165])
    (-0.00108, 0.01908)
    >>> _fitted_range([0.2, 0.3], [0.32])
    (0.1928, 0.3272)
    """
    low, high = min(core), max(core)
    span = high - low
    if not span > 0:
        span = abs(high) * 0.1 or 1.0
    high = max(high, min(max(ends, default=high), high + _REACH * span))
    span = high - low
    return round(low - _PAD * span, 15), round(high + _PAD * span, 15)


# --------------------------------------------------------------------------------------------
# per-segment estimates
# --------------------------------------------------------------------------------------------
def plot_segments(
    segment_table: pd.DataFrame,
    ax: Any = None,
    *,
    estimator: str,
    column: str,
    truth: Any = None,
) -> Any:
    """Per-segment estimates with intervals, one group of candidates per segment.

    Parameters
    ----------
    segment_table : pandas.DataFrame
        Rows ``policy, estimator, column, segment, value, ci_low, ci_high`` (an evaluation's
        per-segment table; see :func:`ope.report.views.segment_estimates`).
    ax : matplotlib.axes.Axes, optional
    estimator : str
        The estimator to draw.
    column : str
        The segment column to draw.
    truth : mapping, optional
        Exact per-segment values (the bundled sample's ``truth["by_segment"]``), as diamonds.

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import pandas as pd
    >>> from ope.plots import plot_segments
    >>> t = pd.DataFrame({"policy": ["a", "a"], "estimator": "ips", "column": "segment",
    ...                   "segment": ["new", "old"], "value": [0.1, 0.2], "ci_low": [0.05, 0.15],
    ...                   "ci_high": [0.15, 0.25]})
    >>> [x.get_text() for x in plot_segments(t, estimator="ips", column="segment").get_yticklabels()]
    ['new', 'old']
    """
    truth = Truth.of(truth)
    rows = segment_table[
        (segment_table["estimator"] == estimator) & (segment_table["column"] == column)
    ]
    segments = list(dict.fromkeys(rows["segment"].astype(str)))
    policies = list(dict.fromkeys(rows["policy"]))
    k = max(len(policies), 1)
    band = k + 0.6
    ax = _axes(ax, 1.2 + _ROW_HEIGHT * max(len(segments), 1) * band)
    centers = []
    exact_drawn = False
    for i, seg in enumerate(segments):
        top = -i * band
        centers.append(top - (k - 1) / 2)
        if i:
            ax.axhline(top + 0.8, color="#dddddd", lw=0.6)
        here = rows[rows["segment"].astype(str) == seg]
        for j, policy in enumerate(policies):
            r = here[here["policy"] == policy]
            if not len(r):
                continue
            r = r.iloc[0]
            y = top - j
            xerr = None
            if _finite(float(r["ci_low"]), float(r["ci_high"])):
                xerr = [[max(r["value"] - r["ci_low"], 0.0)], [max(r["ci_high"] - r["value"], 0.0)]]
            ax.errorbar(
                [r["value"]],
                [y],
                xerr=xerr,
                fmt="o",
                ms=4.5,
                capsize=2,
                lw=1.3,
                color=_CYCLE[j % len(_CYCLE)],
                label=_text(policy) if i == 0 else None,
            )
            exact = (
                truth.by_segment.get(policy, {}).get(seg)
                if truth.column in (None, column)
                else None
            )
            if exact is not None:
                ax.plot(
                    [exact],
                    [y],
                    "D",
                    color="black",
                    ms=4,
                    ls="none",
                    label=None if exact_drawn else "exact value",
                )
                exact_drawn = True
    ax.set_yticks(centers, labels=[_text(s) for s in segments])
    if segments:
        ax.set_ylim(-(len(segments) - 1) * band - k + 0.2, 0.8)
    ax.set_xlabel(f"estimated value ({estimator})")
    ax.grid(axis="x", color="#eeeeee", lw=0.6)
    ax.set_axisbelow(True)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.set_title(f"Per segment of {_text(column)}", loc="left", fontsize=10)
    return ax


# --------------------------------------------------------------------------------------------
# outcome distributions
# --------------------------------------------------------------------------------------------
def plot_distribution(
    distributions: Any, ax: Any = None, *, policies: Sequence[str] | None = None
) -> Any:
    """Each candidate's outcome CDF (a step line) inside its simultaneous band (shaded), with
    the logging policy's in grey: :func:`ope.outcome_distribution`.

    Parameters
    ----------
    distributions : ope.OutcomeDistributions
    ax : matplotlib.axes.Axes, optional
        Where to draw (a new figure when None).
    policies : sequence of str, optional
        Only these candidates, in this order (default all; the report draws at most
        :data:`ope.report.views.MAX_FIGURE_CANDIDATES`).

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np, pandas as pd, ope
    >>> from ope.plots import plot_distribution
    >>> a = np.random.default_rng(0).integers(0, 2, 500)
    >>> df = pd.DataFrame({"action": a, "propensity": 0.5, "reward": a + 0.1 * np.arange(500) % 3,
    ...                    "target__one": (a == 1).astype(float)})
    >>> ax = plot_distribution(ope.outcome_distribution(df, n_resamples=200))
    >>> ax.get_ylabel()
    'P(outcome <= t)'
    """
    names = list(distributions.policies) if policies is None else list(policies)
    unknown = [p for p in names if p not in distributions.distributions]
    if unknown:
        raise ParameterError(f"`policies` names no distribution: {unknown}.")
    ax = _axes(ax, 3.2)
    for i, name in enumerate(["logging", *names]):  # a loop over the policies drawn
        d = distributions.distributions[name]
        color = "0.45" if name == "logging" else _CYCLE[i % len(_CYCLE)]
        x = d.edges
        ax.fill_between(x, d.lower, d.upper, step="post", color=color, alpha=0.15, linewidth=0)
        ax.step(x, d.cdf, where="post", color=color, linewidth=1.4, label=_text(name))
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel(_text(distributions.outcome))
    ax.set_ylabel("P(outcome <= t)")
    ax.legend(loc="lower right", fontsize="small", frameon=False)
    return ax


def plot_monitor(result: Any, ax: Any = None, *, policies: Sequence[str] | None = None) -> Any:
    """Each candidate's difference with the logging policy over the looks of a monitor: the
    estimate (a line) inside its confidence sequence (shaded), against the rows seen, with 0
    marked: :class:`ope.monitor.Monitor`.

    Parameters
    ----------
    result : ope.monitor.MonitorResult
    ax : matplotlib.axes.Axes, optional
        Where to draw (a new figure when None).
    policies : sequence of str, optional
        Only these candidates, in this order (default all).

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np, pandas as pd
    >>> from ope.monitor import Monitor
    >>> from ope.plots import plot_monitor
    >>> rng = np.random.default_rng(0)
    >>> mon = Monitor(reward_range=(0, 1))
    >>> for _ in range(3):
    ...     a = rng.integers(0, 2, 300)
    ...     res = mon.update(pd.DataFrame({"action": a, "propensity": 0.5, "reward": a * 1.0,
    ...                                    "target__one": (a == 1).astype(float)}))
    >>> plot_monitor(res).get_xlabel()
    'rows seen'
    """
    names = list(result.policies) if policies is None else list(policies)
    unknown = [p for p in names if p not in result.policies]
    if unknown:
        raise ParameterError(f"`policies` names no monitored candidate: {unknown}.")
    ax = _axes(ax, 3.2)
    history = result.history
    for i, name in enumerate(names):  # a loop over the candidates drawn
        h = history[history["policy"] == name]
        color = _CYCLE[i % len(_CYCLE)]
        ax.fill_between(
            h["rows"],
            h["difference_low"],
            h["difference_high"],
            color=color,
            alpha=0.15,
            linewidth=0,
            step="post",
        )
        ax.step(
            h["rows"], h["difference"], where="post", color=color, linewidth=1.4, label=_text(name)
        )
    ax.axhline(0.0, color="0.45", linewidth=0.8, linestyle="--")
    ax.set_xlabel("rows seen")
    ax.set_ylabel("difference with logging")
    if names:
        ax.legend(loc="upper right", fontsize="small", frameon=False)
    return ax
