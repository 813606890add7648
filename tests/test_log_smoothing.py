"""The logarithmic-smoothing lower bound (Sakhi et al., NeurIPS 2024): hand-computed values,
equivariance, no weight bound, and coverage with exact truth on heavy-tailed weights."""

from __future__ import annotations

import math
import warnings
import sys
from pathlib import Path

import numpy as np
import pytest

import ope.estimators as oe
from ope.exceptions import EstimationError, MissingBoundsError, ValidationError
from ope.intervals import log_smoothing_interval, log_smoothing_lower_bound


def test_hand_computed_bound():
    w = np.array([1.0, 2.0, 0.0, 4.0])
    r = np.array([1.0, 0.5, 1.0, 0.0])
    lam = math.sqrt(4) * 1.0  # sqrt(n) times the range's width
    psi = lam * np.log1p(w * r / lam)  # x = w (r - lo), lo = 0
    expected = lam * math.expm1((psi.mean() - lam * math.log(1 / 0.1) / 4) / lam)
    got = log_smoothing_lower_bound(w, r, reward_range=(0, 1), confidence_level=0.9)
    assert got == pytest.approx(max(expected, 0.0), abs=1e-15)
    rng = np.random.default_rng(0)
    w, r = rng.exponential(size=500), rng.uniform(size=500)
    lam = math.sqrt(500)
    psi = lam * np.log1p(w * r / lam)
    expected = lam * math.expm1((psi.mean() - lam * math.log(20) / 500) / lam)
    assert log_smoothing_lower_bound(w, r, reward_range=(0, 1)) == pytest.approx(
        expected, rel=1e-12
    )


def test_equivariant_to_shifting_and_scaling_rewards():
    rng = np.random.default_rng(1)
    w, r = rng.pareto(1.5, 300), rng.uniform(size=300)
    base = log_smoothing_lower_bound(w, r, reward_range=(0, 1))
    moved = log_smoothing_lower_bound(w, 10 + 3 * r, reward_range=(10, 13))
    assert moved == pytest.approx(10 + 3 * base, rel=1e-12)


def test_no_weight_bound_is_needed_and_one_huge_weight_cannot_break_it():
    w = np.ones(1000)
    r = np.zeros(1000)
    r[0], w[0] = 1.0, 1e9  # one row: plain IPS says 1e6, far outside the range
    bound = log_smoothing_lower_bound(w, r, reward_range=(0, 1))
    # the log caps what one row can add: sqrt(n) log(1 + 1e9 / sqrt(n)) / n, here 0.45
    assert 0.0 <= bound < 0.5
    iv = log_smoothing_interval(w, r, reward_range=(0, 1))
    assert (iv.low, iv.high) == (bound, 1.0)


def test_estimate_ci_offers_it_for_ips_and_the_logging_value_only():
    rng = np.random.default_rng(2)
    n = 400
    r = rng.binomial(1, 0.4, n).astype(float)
    p = np.full(n, 0.5)
    t = rng.uniform(size=n)
    ips = oe.IPS().estimate(r, p, t, reward_range=(0, 1))
    assert ips.ci(method="log_smoothing").low == log_smoothing_lower_bound(
        t / p, r, reward_range=(0, 1)
    )
    logging = oe.logging_value(r, reward_range=(0, 1))
    assert logging.ci(0.9, method="log_smoothing").low == log_smoothing_lower_bound(
        np.ones(n), r, reward_range=(0, 1), confidence_level=0.9
    )
    with pytest.raises(EstimationError, match="log_smoothing"):
        oe.SNIPS().estimate(r, p, t, reward_range=(0, 1)).ci(method="log_smoothing")
    with pytest.raises(MissingBoundsError, match="reward_range"):
        oe.IPS().estimate(r, p, t).ci(method="log_smoothing")
    with pytest.raises(ValidationError):
        log_smoothing_lower_bound([-1.0, 1.0], [0.0, 1.0], reward_range=(0, 1))


def test_lower_bound_holds_with_exact_truth_on_heavy_tails():
    """At least 95% of replications (one-sided, nominal 0.95) on the heavy-tailed designs of
    benchmarks/coverage_bandit.py, where the normal interval undercovers at small n
    (benchmarks/log_smoothing.py, at 300 replications)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import log_smoothing

    rows = log_smoothing.run(300, (200,), seed=3, designs=("heavy", "shifted [-1, 3]", "edge"))
    assert len(rows) == 3
    for design, _, held_ls, *_ in rows:
        # 300 draws: a true rate of 0.95 falls below 0.92 with probability < 0.01
        assert held_ls >= 0.92, (design, held_ls)


@pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning")  # the sample's own notes
def test_diagnostics_and_report_show_it_beside_the_bottou_interval():
    import html

    import ope
    from ope.report import render_report

    logs = ope.read_logs(ope.load_sample().path)
    d = ope.diagnose(logs, reward_range=(0, 1))
    table = d.table().set_index("policy")
    w = logs.table.column("target__greedy").to_numpy() / logs.table.column("propensity").to_numpy()
    r = logs.table.column("reward").to_numpy()
    assert table.loc["greedy", "log_smoothing_low"] == pytest.approx(
        log_smoothing_lower_bound(w, r, reward_range=(0, 1)), rel=1e-12
    )
    assert np.isnan(ope.diagnose(logs).table()["log_smoothing_low"]).all()  # no reward_range
    page = html.unescape(render_report(diagnostics=d))
    assert (
        f"log-smoothing lower bound</dt><dd>{table.loc['greedy', 'log_smoothing_low']:.4g}" in page
    )


def test_a_bound_above_the_range_is_capped_at_its_upper_end():
    # one row with a weight of 1e8 and reward 1: log smoothing alone would say 1.4 > r_max
    n = 100
    p = np.full(n, 1.0)
    p[0] = 1e-8
    t = np.full(n, 0.99)
    t[0] = 1.0
    r = np.zeros(n)
    r[0] = 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = oe.IPS().estimate(r, p, t, reward_range=(0, 1))
    iv = est.ci(method="log_smoothing")
    assert iv.low == 1.0 and iv.high == 1.0
