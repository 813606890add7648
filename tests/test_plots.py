"""ope.plots: each plot draws what the result objects report, on a given axis or a new one.

The figures are checked through what matplotlib holds after drawing (tick labels, lines,
patches), against the numbers of the result objects they show; the backend rule (Agg when none
is chosen) runs in a fresh interpreter; a missing matplotlib raises the install hint.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib", reason="the plots need the plot extra")
matplotlib.use("Agg")  # this test process draws off screen

from matplotlib.figure import Figure  # noqa: E402

import ope  # noqa: E402
from ope import plots  # noqa: E402
from ope.report.views import comparison_table  # noqa: E402

#: the bundled sample's estimators and clip level (those of ``ope demo``)
ESTIMATORS = ("ips", "clipped_ips", "snips")
MAX_WEIGHT = 50.0


@pytest.fixture(scope="module")
def sample():
    return ope.load_sample()


@pytest.fixture(scope="module")
def logs(sample):
    return ope.read_logs(sample.table)


@pytest.fixture(scope="module")
def ev(logs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ope.OPEWarning)
        return ope.evaluate(logs, estimators=ESTIMATORS, max_weight=MAX_WEIGHT, reward_range=(0, 1))


@pytest.fixture(scope="module")
def diag(logs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ope.OPEWarning)
        return ope.diagnose(logs, by=["segment"], max_weight=MAX_WEIGHT, reward_range=(0, 1))


def _axes():
    return Figure(figsize=(6, 4)).add_subplot()


def _labels(ticks):
    return [t.get_text() for t in ticks]


def test_forest_plot_draws_every_estimate_its_interval_and_the_references(ev, sample):
    ax = _axes()
    assert plots.plot_evaluation(ev, ax, truth=sample.truth) is ax
    assert _labels(ax.get_yticklabels()) == ev.policies
    table = ev.table()
    # one errorbar per policy x estimator, at its value, spanning its interval
    bars = ax.containers
    assert len(bars) == len(table)
    points = sorted(float(b.lines[0].get_xdata()[0]) for b in bars)
    np.testing.assert_allclose(points, sorted(table["value"]), rtol=1e-12)
    spans = sorted(tuple(seg[:, 0]) for b in bars for seg in b.lines[2][0].get_segments())
    expected = sorted(zip(table["ci_low"], table["ci_high"]))
    np.testing.assert_allclose(spans, expected, rtol=1e-12)
    # the logging policy's value and its exact value are vertical lines
    xs = {
        round(float(line.get_xdata()[0]), 12)
        for line in ax.get_lines()
        if len(line.get_xdata()) == 2 and line.get_xdata()[0] == line.get_xdata()[1]
    }
    assert round(ev.logging.value, 12) in xs
    assert round(sample.truth["logging"], 12) in xs
    # one diamond per candidate at its exact value
    diamonds = [line for line in ax.get_lines() if line.get_marker() == "D"]
    np.testing.assert_allclose(
        sorted(float(d.get_xdata()[0]) for d in diamonds),
        sorted(sample.truth["policies"][p] for p in ev.policies),
    )


def test_forest_plot_marks_clipped_value_intervals_open(ev):
    ax = plots.plot_evaluation(ev, _axes())
    table = ev.table()
    open_markers = sum(b.lines[0].get_markerfacecolor() == "white" for b in ax.containers)
    assert open_markers == int(table["target"].eq("clipped value").sum()) > 0


def test_forest_plot_refuses_an_estimator_that_was_not_evaluated(ev):
    with pytest.raises(ope.ParameterError, match="'dr'.*not evaluated.*ips, clipped_ips, snips"):
        plots.plot_evaluation(ev, _axes(), estimators=["dr"])


def test_comparisons_are_ranked_by_lower_bound_and_coloured_by_answer(ev, sample):
    table = comparison_table(ev)
    vs = table[table["baseline"] == "logging"]
    ax = plots.plot_comparisons(ev, _axes(), truth=sample.truth, comparisons=table)
    labels = _labels(ax.get_yticklabels())
    assert labels == [f"{p} − logging  ({e})" for p, e in zip(vs["policy"], vs["estimator"])]
    assert list(vs["ci_low"]) == sorted(vs["ci_low"], reverse=True)
    colours = [matplotlib.colors.to_hex(b.lines[0].get_color()) for b in ax.containers]
    expected = [plots._ANSWER_COLORS[a] for a in vs["answer"]]  # noqa: SLF001 - the palette
    assert colours == expected
    between = plots.plot_comparisons(ev, _axes(), between=True, comparisons=table)
    assert len(between.containers) == len(ev.policies) * (len(ev.policies) - 1) // 2


def test_weights_plot_shows_the_diagnostics_histogram_and_clip_level(diag):
    ax = _axes()
    assert plots.plot_weights(diag, "long_tail", ax) is ax
    hist = diag.weight_histogram("long_tail")
    positive = hist[hist["weight_high"] > 0]
    (bars,) = ax.containers
    np.testing.assert_allclose([b.get_height() for b in bars], positive["row_share"])
    np.testing.assert_allclose([b.get_x() for b in bars], positive["weight_low"])
    assert ax.get_xscale() == "log"
    clip = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert [float(c.get_xdata()[0]) for c in clip] == [MAX_WEIGHT]
    assert "ESS 553" in ax.get_title(loc="left")


def test_weights_plot_of_raw_weights_bins_like_the_diagnostics():
    rng = np.random.default_rng(0)
    n = 5000
    p = rng.uniform(0.05, 1.0, n)
    t = np.where(rng.random(n) < 0.3, 0.0, rng.uniform(0.0, 1.0, n))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ope.OPEWarning)
        d = ope.diagnostics.diagnose_arrays(rng.random(n), p, t, policy_names=["x"])
    hist = d.weight_histogram("x")
    ours = plots._weight_bins(t / p)  # noqa: SLF001 - the binning of raw weights
    assert ours["rows"].sum() == n
    np.testing.assert_array_equal(ours["weight_low"], hist["weight_low"])
    np.testing.assert_array_equal(ours["rows"], hist["rows"])
    np.testing.assert_allclose(ours["target_mass"], hist["target_mass"], rtol=1e-9)


def test_weights_plot_refuses_bad_input(diag):
    with pytest.raises(ope.ParameterError, match="`policy` is required with diagnostics"):
        plots.plot_weights(diag)
    with pytest.raises(ope.ParameterError, match="finite, non-negative importance weights"):
        plots.plot_weights(np.array([1.0, -2.0]), "w", _axes())
    with pytest.raises(ope.ParameterError, match="`ax` must be a matplotlib Axes"):
        plots.plot_weights(np.array([1.0]), "w", ax="left")


def test_coverage_heatmap_frames_the_gap_segment(diag):
    ax = plots.plot_coverage(diag, "long_tail", _axes())
    target = diag.coverage_matrix("long_tail", value="target_mass")
    np.testing.assert_allclose(ax.images[0].get_array(), target.to_numpy())
    labels = _labels(ax.get_yticklabels())
    assert labels == [s + ("  (gap)" if s == "new" else "") for s in target.index]
    frames = [p for p in ax.patches if not p.get_fill()]
    assert len(frames) == 1 and frames[0].get_y() == pytest.approx(labels.index("new  (gap)") - 0.5)
    # a candidate without a gap has no frame
    plain = plots.plot_coverage(diag, "personalized", _axes())
    assert not [p for p in plain.patches if not p.get_fill()]


def test_interval_split_adds_up_to_the_outer_inner_interval(diag):
    ax = plots.plot_interval_split(diag, _axes())
    table = diag.table()
    bars = [b for container in ax.containers for b in container]
    assert len(bars) == 2 * len(table)
    for k, row in enumerate(table.itertuples(index=False)):
        sampling, coverage = bars[2 * k], bars[2 * k + 1]
        assert sampling.get_x() == pytest.approx(row.ci_low)
        assert coverage.get_x() + coverage.get_width() == pytest.approx(row.ci_high)
        assert sampling.get_width() == pytest.approx(row.sampling_width)


def test_segment_plot_draws_one_point_per_policy_and_segment():
    import pandas as pd

    t = pd.DataFrame(
        {
            "policy": ["a", "a", "b", "b"],
            "estimator": "ips",
            "column": "segment",
            "segment": ["new", "old", "new", "old"],
            "value": [0.1, 0.2, 0.3, 0.4],
            "ci_low": [0.05, 0.15, 0.25, 0.35],
            "ci_high": [0.15, 0.25, 0.35, 0.45],
        }
    )
    ax = plots.plot_segments(
        t,
        _axes(),
        estimator="ips",
        column="segment",
        truth={"policies": {}, "by_segment": {"a": {"new": 0.12}}},
    )
    assert _labels(ax.get_yticklabels()) == ["new", "old"]
    assert sorted(float(b.lines[0].get_xdata()[0]) for b in ax.containers) == [0.1, 0.2, 0.3, 0.4]
    assert [float(d.get_xdata()[0]) for d in ax.get_lines() if d.get_marker() == "D"] == [0.12]


def test_user_text_is_drawn_literally():
    """A policy name with dollar signs is text, not mathematics, and an underscore-led name
    keeps its legend entry."""
    import pandas as pd

    t = pd.DataFrame(
        {
            "policy": ["$x$ & <b>", "_hidden"],
            "estimator": "ips",
            "column": "segment",
            "segment": ["a$b", "a$b"],
            "value": [0.1, 0.2],
            "ci_low": [0.0, 0.1],
            "ci_high": [0.2, 0.3],
        }
    )
    ax = plots.plot_segments(t, _axes(), estimator="ips", column="segment")
    buffer = io.StringIO()
    ax.figure.savefig(buffer, format="svg")
    svg = buffer.getvalue()
    assert "$x$ &amp; &lt;b&gt;" in svg and "a$b" in svg
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [r"\$x\$ & <b>", " _hidden"]


def test_diagnostics_methods_draw_the_same_plots(diag):
    ax = diag.plot_weights("greedy", ax=_axes())
    assert ax.get_title(loc="left").startswith("greedy: ESS")
    ax = diag.plot_coverage("uniform", ax=_axes(), by="segment")
    assert "new  (gap)" in _labels(ax.get_yticklabels())


@pytest.mark.slow
def test_a_new_figure_uses_agg_when_no_backend_is_chosen(tmp_path):
    """In a fresh interpreter without MPLBACKEND, ax=None selects Agg itself (it never relies on
    matplotlib finding no display); a backend chosen by the user (here through MPLBACKEND) is
    left alone."""
    code = (
        "import numpy as np, matplotlib\n"
        "chosen = []\n"
        "use = matplotlib.use\n"
        "matplotlib.use = lambda name, **kw: (chosen.append(name), use(name, **kw))\n"
        "from ope.plots import plot_weights\n"
        "ax = plot_weights(np.array([0.5, 1.0, 4.0]), 'w')\n"
        "print(matplotlib.get_backend().lower(), chosen or ['none'])\n"
    )
    env = {
        k: v for k, v in os.environ.items() if k not in ("MPLBACKEND", "DISPLAY", "WAYLAND_DISPLAY")
    }
    env["MPLCONFIGDIR"] = str(tmp_path)
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert out.stdout.split() == ["agg", "['Agg']"]
    env["MPLBACKEND"] = "svg"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert out.stdout.split() == ["svg", "['none']"]


def test_detached_figures_are_not_registered_with_pyplot():
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    with plots.detached_figures():
        ax = plots.plot_weights(np.array([0.5, 2.0]), "w")
    assert plt.get_fignums() == before
    assert ax.figure.canvas.manager is None


def test_missing_matplotlib_raises_the_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"pip install 'ope-toolkit\[plot\]'"):
        plots.require_matplotlib()
    with pytest.raises(ImportError, match=r"pip install 'ope-toolkit\[plot\]'"):
        plots.plot_weights(np.array([1.0]), "w")


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs a folder that takes no files")
def test_a_home_that_cannot_be_written_prints_nothing_about_matplotlib(tmp_path):
    """With a home where matplotlib cannot make its folders (read-only, or missing as here),
    ope points it at a private temporary folder, removed at exit: matplotlib says nothing."""
    code = (
        "import os, ope.plots as p\n"
        "p.require_matplotlib()\n"
        "import matplotlib\n"
        "print(os.environ['MPLCONFIGDIR'])\n"
        "matplotlib.get_cachedir()\n"
    )
    env = {**os.environ, "HOME": "/proc/no-home", "XDG_CONFIG_HOME": "", "XDG_CACHE_HOME": ""}
    env.pop("MPLCONFIGDIR", None)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "matplotlib" not in done.stderr.lower(), done.stderr
    private = done.stdout.strip()
    assert "ope-matplotlib-" in private and not os.path.exists(private)
