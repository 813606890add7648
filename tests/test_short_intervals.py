"""Skewed terms: the note that says when a normal (or t) interval is likely too short.

The rule (:func:`ope._thresholds.skewed_terms`, ``n < SKEW_MIN_ROWS + SKEW_ROWS * g**2`` with
``g`` the sample skewness of the influence terms) is read by every estimate: the moment-kernel estimators (with
an exact bound that skips the skewness pass when it cannot flag), the component estimators (DR
and the others, from the pass that gives their standard error), slates, sequential estimates
and paired effects; the report lists the flagged estimators under "why / what to watch".
Its calibration on simulations with exact truth is ``benchmarks/short_intervals.py``.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.stats as st

import ope
import ope.estimators as oe
from ope._thresholds import (
    SKEW_MIN_ROWS,
    SKEW_ROWS,
    skew_cannot_flag,
    skewed_terms,
    skewed_terms_note,
)
from ope.exceptions import SmallSampleWarning
from ope.moments import skewness
from ope.paired import paired_effect


def _rules(est: ope.Estimate) -> list[str | None]:
    return [getattr(x, "rule", None) for x in est.notes]


def _skewed_bandit(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Rare rewards under moderate weights: a uniform logger over 10 actions, a candidate that
    puts 0.4 on action 0 (weight 4; Kish ESS about n / 2), rewards 1 with probability 0.02
    (skewed IPS terms: most are 0)."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 10, n)
    p = np.full(n, 1 / 10)
    t = np.where(a == 0, 0.4, 0.6 / 9)
    r = (rng.random(n) < 0.02).astype(float)
    return {"reward": r, "logging_propensity": p, "target_propensity": t}


# ------------------------------------------------------------------------------------------
# the statistic and the rule
# ------------------------------------------------------------------------------------------
def test_skewness_equals_scipy_moment_estimator():
    rng = np.random.default_rng(1)
    for x in (rng.lognormal(size=500), rng.normal(size=50), rng.exponential(size=(40, 3))):
        np.testing.assert_allclose(skewness(x), st.skew(x, axis=0, bias=True), rtol=1e-12)
    assert skewness(np.full(10, 3.0)) == 0.0  # no spread: no skew (not NaN)


def test_rule_and_note_state_the_threshold():
    assert skewed_terms(252, 3.0) and not skewed_terms(253, 3.0)  # 28 + 25 x 9 = 253
    assert skewed_terms(27, 0.0) and not skewed_terms(28, 0.0)
    assert not skewed_terms(10, math.nan)
    note = skewed_terms_note(200, -3.0, "Use X.", unit="episodes")
    assert note.rule == "skewed_terms" and "253 episodes" in note and "-3" in note
    assert note.endswith("Use X.")


def test_the_bound_that_skips_the_pass_never_hides_a_flag():
    # |g| <= max|x - mean| / sqrt(m2): whenever the bound clears, the rule does not flag
    rng = np.random.default_rng(2)
    cleared = 0
    draws = (
        lambda n: rng.uniform(size=n),
        lambda n: rng.binomial(1, rng.uniform(0.01, 0.5), size=n) * rng.uniform(1, 20),
        lambda n: rng.pareto(rng.uniform(0.5, 5.0), size=n) * rng.choice([-1.0, 1.0]),
    )
    for i in range(1500):
        n = int(rng.integers(2, 5000))
        x = draws[i % 3](n)
        width = float(x.max() - x.min())
        if skew_cannot_flag(n, width, float(np.std(x, ddof=1))):
            cleared += 1
            assert not skewed_terms(n, float(skewness(x)))
    assert cleared > 100  # the bound does clear ordinary samples


# ------------------------------------------------------------------------------------------
# every estimate reads it
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("estimator", [oe.IPS(), oe.SNIPS(), oe.ClippedIPS(max_weight=100.0)])
def test_kernel_estimators_note_skewed_terms_and_name_an_interval_that_holds(estimator):
    data = _skewed_bandit(400)
    with pytest.warns(SmallSampleWarning, match="likely too short"):
        est = estimator.estimate(**data)
    g = skewness(est.influence())
    if estimator.name == "snips":  # SNIPS also reads the IPS terms' skewness
        g = max(g, skewness(est.source.components()[:, 0]), key=abs)
    assert 400 < SKEW_MIN_ROWS + SKEW_ROWS * g * g
    assert _rules(est).count("skewed_terms") == 1
    (note,) = (x for x in est.notes if getattr(x, "rule", None) == "skewed_terms")
    assert f"{g:.3g}" in note
    assert "ci(method='betting')" in note or "ci(method='bernstein')" in note
    # many more rows of the same design: the normal approximation is fine, no note
    with warnings.catch_warnings():
        warnings.simplefilter("error", SmallSampleWarning)
        big = estimator.estimate(**_skewed_bandit(20_000))
    assert "skewed_terms" not in _rules(big)


def test_component_estimators_measure_skew_in_their_variance_pass():
    data = _skewed_bandit(400)
    q = np.zeros(400)
    with pytest.warns(SmallSampleWarning, match="No interval of this estimator holds"):
        est = oe.DR().estimate(**data, q_logged=q, q_target=q)
    assert "skewed_terms" in _rules(est)
    (note,) = (x for x in est.notes if getattr(x, "rule", None) == "skewed_terms")
    assert f"{skewness(est.influence()):.3g}" in note


def test_low_effective_sample_is_said_once():
    # one weighted row among 1000: the low-ESS note (of the policy's weights) and the
    # few-effective-rows note (of this estimate's standard error) already say the interval
    # may be short; the skew note does not say it a third time
    n = 1000
    t = np.zeros(n)
    t[0] = 1.0
    with pytest.warns(ope.exceptions.OverlapWarning):
        with pytest.warns(SmallSampleWarning, match="rests on 1 effective row"):
            est = oe.IPS().estimate(
                reward=np.ones(n), logging_propensity=np.full(n, 0.5), target_propensity=t
            )
    rules = _rules(est)
    assert "low_ess" in rules and "few_effective_rows" in rules and "skewed_terms" not in rules


def test_paired_effect_reports_skewness_and_flags_normal_intervals():
    rng = np.random.default_rng(3)
    n = 200
    rare = (rng.random((n, 2)) < [0.03, 0.01]) * 10.0  # rare large outcomes: skewed differences
    df = pd.DataFrame(
        {
            "pair_id": np.tile(np.arange(n), 2),
            "arm": np.repeat(["t", "c"], n),
            "outcome": np.concatenate([rare[:, 0], rare[:, 1]]),
        }
    )
    with pytest.warns(SmallSampleWarning, match="too few pairs for their skew"):
        res = paired_effect(df, treated="t", control="c")
    row = res.table().iloc[0]
    assert row["skewness"] == pytest.approx(st.skew(rare[:, 0] - rare[:, 1]), rel=1e-12)
    assert bool(row["short_interval"])
    assert any("trust their normal intervals" in x and "ci='t'" in x for x in res.notes)
    with warnings.catch_warnings():  # the finite-sample methods need no such note
        warnings.simplefilter("error", SmallSampleWarning)
        bounded = paired_effect(
            df, treated="t", control="c", ci="betting", reward_range={"outcome": (0.0, 10.0)}
        )
    assert not any("too few pairs" in x for x in bounded.notes)
    assert not bounded.table()["short_interval"].any()


def _skewed_logs(n: int = 400) -> pd.DataFrame:
    data = _skewed_bandit(n)
    rng = np.random.default_rng(5)
    action = np.where(data["target_propensity"] == 0.4, 0, rng.integers(1, 10, n))
    return pd.DataFrame(
        {
            "event_id": [f"e{i}" for i in range(n)],
            "action": action,
            "propensity": data["logging_propensity"],
            "reward": data["reward"],
            "target__focused": data["target_propensity"],
        }
    )


def test_the_report_watches_a_short_interval():
    import html as html_lib

    from ope.report import render_report

    with pytest.warns(SmallSampleWarning):
        ev = ope.evaluate(_skewed_logs(), estimators=("ips", "snips"), reward_range=(0, 1))
    short = [e for e in ev.estimates.values() if "skewed_terms" in _rules(e)]
    assert {e.estimator for e in short} == {"ips", "snips"}
    page = html_lib.unescape(render_report(evaluation=ev))
    assert "its ips, snips intervals are likely too short" in page
    # the bounded interval the note recommends changes nothing of this
    with warnings.catch_warnings():
        warnings.simplefilter("error", SmallSampleWarning)
        big = ope.evaluate(_skewed_logs(20_000), estimators=("ips",), reward_range=(0, 1))
    assert "likely too short" not in html_lib.unescape(render_report(evaluation=big))


def test_the_note_is_shown_only_beside_an_asymptotic_interval():
    """With ci='betting' (the interval the note recommends) the estimates keep the note, but
    the evaluation's table, summary, notes and report do not show it beside their betting
    intervals; beside normal ones they do."""
    import html as html_lib

    from ope.report import render_report

    with pytest.warns(SmallSampleWarning):
        normal = ope.evaluate(_skewed_logs(), estimators=("ips", "snips"), reward_range=(0, 1))
    with pytest.warns(SmallSampleWarning):
        betting = ope.evaluate(
            _skewed_logs(), estimators=("ips", "snips"), reward_range=(0, 1), ci="betting"
        )
    assert all("skewed_terms" in _rules(e) for e in betting.estimates.values())
    assert normal.table()["notes"].str.contains("likely too short").all()
    assert not betting.table()["notes"].str.contains("likely too short").any()
    assert "likely too short" in normal.summary() and "likely too short" not in betting.summary()
    assert not any("likely too short" in n for n in betting.all_notes())
    page = html_lib.unescape(render_report(evaluation=betting))
    assert "intervals are likely too short" not in page


def test_the_command_line_carries_the_note(tmp_path):
    import contextlib
    import io
    import json

    from ope.cli import main

    path = tmp_path / "logs.parquet"
    _skewed_logs().to_parquet(path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SmallSampleWarning)
            code = main(
                ["evaluate", str(path), "--estimator", "ips", "--reward-range", "0", "1", "--json"]
            )
    assert code == 0
    doc = json.loads(out.getvalue())
    text = json.dumps(doc)
    assert "normal and t intervals are likely too short" in text
    assert "ci(method='betting')" in text


@pytest.mark.slow
def test_the_calibration_benchmark_flags_the_known_cases():
    """``benchmarks/short_intervals.py --quick``: the undercovering cases that asked for the
    rule are flagged, and the intervals the notes recommend cover on the flagged results."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import short_intervals

    df = short_intervals.run(60, quick=True, workers=1)
    tables = short_intervals.summary(df)
    cells = tables["cells"].set_index(["family", "design", "estimator", "n_nominal"])
    seq_is = cells.loc[("sequential", "mdp (4,2,H8,s1)", "IS", 200)]
    assert seq_is["coverage"] < 0.93 and seq_is["flagged"] > 0.9
    heavy_ips = cells.loc[("bandit", "heavy", "IPS", 200)]
    assert heavy_ips["coverage"] < 0.9 and heavy_ips["flagged"] > 0.5  # misses: blind spot
    by = tables["by_estimator"].set_index(["family", "estimator"])
    for key in (("bandit", "IPS"), ("bandit", "clipped IPS"), ("sequential", "IS")):
        assert by.loc[key, "advised_coverage_flagged"] >= 0.95, key
    holm = tables["holm"].set_index("n_nominal").loc[500]
    assert holm["families_flagged"] > 0.9 and holm["fwe_t"] < holm["fwe_normal"]


def test_a_paired_difference_keeps_each_members_own_note():
    from ope.results import compare

    data = _skewed_bandit(400)
    rng = np.random.default_rng(9)
    # a candidate whose weights vary on the rewarded rows: other terms, another skewness
    other = dict(data, target_propensity=rng.uniform(0.0, 0.2, 400))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ope.exceptions.OPEWarning)
        a, b = oe.IPS().estimate(**data), oe.IPS().estimate(**other)
        diff = compare(a, b)
    mine = [x for x in diff.notes if "likely too short" in x]
    assert len(mine) == 2  # unlabelled estimates of the same estimator: both notes stay
    for est in (a, b):
        assert any(f"{skewness(est.influence()):.3g}" in x for x in mine)


def test_paired_t_intervals_are_not_flagged_for_few_symmetric_pairs():
    rng = np.random.default_rng(4)
    n = 20
    diff = rng.normal(size=n)
    df = pd.DataFrame(
        {
            "pair_id": np.tile(np.arange(n), 2),
            "arm": np.repeat(["t", "c"], n),
            "outcome": np.concatenate([diff, np.zeros(n)]),
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", SmallSampleWarning)
        res = paired_effect(df, treated="t", control="c", ci="t")
    assert not res.table()["short_interval"].any()
    with pytest.warns(SmallSampleWarning, match="1 row has too few pairs"):  # normal: 28 + ...
        normal = paired_effect(df, treated="t", control="c")
    assert normal.table()["short_interval"].all()
    # the skewness of huge differences does not overflow
    big = df.assign(outcome=df["outcome"] * 1e110)
    with pytest.warns(SmallSampleWarning):
        table = paired_effect(big, treated="t", control="c").table()
    assert table["skewness"].iloc[0] == pytest.approx(st.skew(diff), rel=1e-9)


@pytest.mark.parametrize("backend", ["numba", "numpy"])
def test_terms_skewness_without_forming_the_terms(backend):
    from ope._kernel import numba_available, set_backend
    from ope.moments import weighted_terms_skewness

    if backend == "numba" and not numba_available():
        pytest.skip("numba is not installed")
    rng = np.random.default_rng(6)
    n = 5000
    p = rng.uniform(1e-3, 1.0, n)
    t = rng.uniform(size=(n, 3))  # a strided column, as evaluate's matrix gives
    r = rng.normal(2.0, 1.0, n)
    set_backend(backend)
    try:
        for clip, shift in ((None, 0.0), (5.0, 1.5), (None, -3.0)):
            w = t[:, 1] / p if clip is None else np.minimum(t[:, 1] / p, clip)
            got = weighted_terms_skewness(p, t[:, 1], r, max_weight=clip, shift=shift)
            assert got == pytest.approx(skewness(w * (r - shift)), rel=1e-9)
        # huge weights: the cubes are taken in units of the largest deviation
        assert math.isfinite(weighted_terms_skewness(np.full(3, 1e-150), np.ones(3), r[:3]))
    finally:
        set_backend(None)
