"""Sampling (Horvitz-Thompson) weights: every estimator, interval, segment and the evaluation.

Rows kept with probability ``1 / s_i`` (DSJSON: ``s = 1 / (1 - pdrop)``) estimate the value of
the logged population by the Hajek ratio ``sum s A / sum s`` of each estimator's components.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pyarrow as pa
import pandas as pd
import pytest

import ope
import ope.estimators as oe
from ope.exceptions import EstimationError, SchemaError, ValidationError
from ope.intervals.bootstrap import bootstrap_interval

# a small log: weights w = t / p = (2, 2, 1, 0), sampling weights s = (1, 2, 1, 4), sum s = 8
R = np.array([1.0, 0.0, 1.0, 1.0])
P = np.array([0.5, 0.5, 0.25, 0.5])
T = np.array([1.0, 1.0, 0.25, 0.0])
S = np.array([1.0, 2.0, 1.0, 4.0])
QL = np.array([0.5, 0.5, 0.5, 0.5])
QT = np.array([0.6, 0.4, 0.5, 0.5])

TOL = 1e-12


@pytest.fixture(autouse=True)
def _quiet() -> None:
    # four rows: every estimate carries the small-sample note (and warning); the tests pin values
    warnings.simplefilter("ignore", ope.SmallSampleWarning)
    warnings.simplefilter("ignore", ope.OverlapWarning)


def _estimate(name: str, r=R, p=P, t=T, ql=QL, qt=QT, s=S, **settings):
    est = oe.get_estimator(name, **settings)
    kw = {"sampling_weight": s}
    if name == "dm":
        return est.estimate(r, q_target=qt, **kw)
    if name in ("dr", "sndr", "switch_dr", "dros"):
        return est.estimate(r, p, t, q_logged=ql, q_target=qt, **kw)
    return est.estimate(r, p, t, **kw)


# ---------------------------------------------------------------- hand-computed values
@pytest.mark.parametrize(
    ("name", "settings", "value"),
    [
        # sum s w r / sum s = (1*2*1 + 2*2*0 + 1*1*1 + 4*0*1) / 8
        ("ips", {}, 3.0 / 8.0),
        # sum s w r / sum s w = 3 / (2 + 4 + 1 + 0)
        ("snips", {}, 3.0 / 7.0),
        # sum s min(w, 1.5) r / sum s = (1.5 + 0 + 1 + 0) / 8
        ("clipped_ips", {"max_weight": 1.5}, 2.5 / 8.0),
        # sum s qt / sum s = (0.6 + 0.8 + 0.5 + 2.0) / 8
        ("dm", {}, 3.9 / 8.0),
        # A = qt + w (r - ql) = (1.6, -0.6, 1.0, 0.5): (1.6 - 1.2 + 1.0 + 2.0) / 8
        ("dr", {}, 3.4 / 8.0),
        # 3.9 / 8 + sum s w (r - ql) / sum s w = 0.4875 + (1 - 2 + 0.5) / 7
        ("sndr", {}, 3.9 / 8.0 - 0.5 / 7.0),
        # tau = 1.5 switches w = 2 off: A = (0.6, 0.4, 1.0, 0.5): (0.6 + 0.8 + 1.0 + 2.0) / 8
        ("switch_dr", {"tau": 1.5}, 4.4 / 8.0),
        # lambda = 4: w' = 4 w / (w^2 + 4) = (1, 1, 0.8, 0); A = (1.1, -0.1, 0.9, 0.5)
        ("dros", {"shrinkage": 4.0}, (1.1 - 0.2 + 0.9 + 2.0) / 8.0),
    ],
)
def test_weighted_values_by_hand(name: str, settings: dict, value: float) -> None:
    res = _estimate(name, **settings)
    assert res.value == pytest.approx(value, abs=TOL)
    assert any("Horvitz-Thompson" in n and "= 8 " in n for n in res.notes)


def test_weighted_ips_standard_error_is_the_linearized_ratio_by_hand() -> None:
    # psi_i = s_i (w_i r_i - V) / mean(s), V = 3/8, mean(s) = 2:
    # (0.8125, -0.375, 0.3125, -0.75), sum psi^2 = 1.4609375; se^2 = sum psi^2 / (n - 1) / n
    res = _estimate("ips")
    assert res.std_error == pytest.approx(math.sqrt(1.4609375 / 3 / 4), abs=TOL)
    np.testing.assert_allclose(res.influence(), [0.8125, -0.375, 0.3125, -0.75], atol=TOL)


def test_weighted_snips_standard_error_by_hand() -> None:
    # psi_i = s_i w_i (r_i - V) / mean(s w), V = 3/7, mean(s w) = 7/4
    v = 3.0 / 7.0
    psi = S * (T / P) * (R - v) / (7.0 / 4.0)
    res = _estimate("snips")
    assert res.std_error == pytest.approx(math.sqrt(np.sum(psi**2) / 3 / 4), abs=TOL)


def test_weighted_logging_value_by_hand() -> None:
    res = oe.logging_value(R, sampling_weight=S)
    assert res.value == pytest.approx(6.0 / 8.0, abs=TOL)  # (1 + 0 + 1 + 4) / 8
    psi = S * (R - 0.75) / 2.0
    assert res.std_error == pytest.approx(math.sqrt(np.sum(psi**2) / 3 / 4), abs=TOL)


def test_clipped_ips_about_the_lower_end_of_the_reward_range() -> None:
    r = R + 10.0
    res = oe.ClippedIPS(max_weight=1.5).estimate(r, P, T, reward_range=(10, 11), sampling_weight=S)
    # 10 + sum s min(w, 1.5) (r - 10) / sum s
    assert res.value == pytest.approx(10.0 + 2.5 / 8.0, abs=1e-12)
    assert res.target == "clipped value"


# ---------------------------------------------------------------- identities
ALL = [
    ("ips", {}),
    ("snips", {}),
    ("clipped_ips", {"max_weight": 1.5}),
    ("dm", {}),
    ("dr", {}),
    ("sndr", {}),
    ("switch_dr", {"tau": 1.5}),
    ("dros", {"shrinkage": 4.0}),
]


def _data(n: int = 300, seed: int = 3):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.1, 0.9, n)
    t = rng.uniform(0.0, 1.0, n)
    r = rng.binomial(1, 0.4, n).astype(float)
    ql = rng.uniform(0.2, 0.6, n)
    qt = rng.uniform(0.2, 0.6, n)
    s = rng.integers(1, 4, n).astype(float)
    return r, p, t, ql, qt, s


@pytest.mark.parametrize(("name", "settings"), ALL)
def test_integer_weights_equal_duplicated_rows_for_the_value(name: str, settings: dict) -> None:
    """A row of weight k is k copies of it (point estimates). The standard errors differ: the
    copies would count as k independent rows (n = sum s), while the weighted estimate keeps n
    rows and the linearized variance n/(n-1) sum s^2 (A - V)^2 / (sum s)^2."""
    r, p, t, ql, qt, s = _data()
    k = s.astype(int)
    weighted = _estimate(name, r, p, t, ql, qt, s, **settings)
    copies = _estimate(name, *(np.repeat(x, k) for x in (r, p, t, ql, qt)), s=None, **settings)
    assert weighted.value == pytest.approx(copies.value, abs=1e-12)
    assert weighted.n == len(r) and copies.n == int(k.sum())
    assert abs(weighted.std_error - copies.std_error) > 1e-4


def test_integer_weights_variance_formula_versus_duplication() -> None:
    r, p, t, _, _, s = _data()
    a = t / p * r
    weighted = oe.IPS().estimate(r, p, t, sampling_weight=s)
    v, n, total = weighted.value, len(r), s.sum()
    assert weighted.std_error**2 == pytest.approx(
        np.sum(s**2 * (a - v) ** 2) / total**2 * n / (n - 1), rel=1e-12
    )
    copies = oe.IPS().estimate(*(np.repeat(x, s.astype(int)) for x in (r, p, t)))
    assert copies.std_error**2 == pytest.approx(
        np.sum(s * (a - v) ** 2) / (total - 1) / total, rel=1e-12
    )


@pytest.mark.parametrize(("name", "settings"), ALL)
def test_unit_weights_equal_the_unweighted_estimate(name: str, settings: dict) -> None:
    r, p, t, ql, qt, _ = _data()
    ones = _estimate(name, r, p, t, ql, qt, np.ones_like(r), **settings)
    plain = _estimate(name, r, p, t, ql, qt, s=None, **settings)
    assert ones.value == pytest.approx(plain.value, abs=1e-12)
    assert ones.std_error == pytest.approx(plain.std_error, rel=1e-10)
    assert ones.ess == pytest.approx(plain.ess, rel=1e-12)
    if name != "dm":
        b1 = ones.ci(method="bootstrap", rng=5, n_resamples=400)
        b0 = plain.ci(method="bootstrap", rng=5, n_resamples=400)
        assert b1.low == pytest.approx(b0.low, abs=1e-12)
        assert b1.high == pytest.approx(b0.high, abs=1e-12)


def test_scaling_every_weight_changes_nothing_but_the_population_size() -> None:
    r, p, t, _, _, s = _data()
    a = oe.SNIPS().estimate(r, p, t, sampling_weight=s)
    b = oe.SNIPS().estimate(r, p, t, sampling_weight=10 * s)
    assert a.value == pytest.approx(b.value, abs=1e-12)
    assert a.std_error == pytest.approx(b.std_error, rel=1e-10)


def test_bootstrap_multiplies_the_resample_counts_by_the_sampling_weights() -> None:
    r, p, t, _, _, s = _data()
    res = oe.IPS().estimate(r, p, t, sampling_weight=s)
    comps = np.column_stack([s * t / p * r, s])  # (s w r, s): the ratio of their resampled sums
    expected = bootstrap_interval(comps, lambda m: m[..., 0] / m[..., 1], rng=11, n_resamples=500)
    got = res.ci(method="bootstrap", rng=11, n_resamples=500)
    assert (got.low, got.high) == pytest.approx((expected.low, expected.high), abs=1e-12)


def test_ess_is_kish_of_the_products_and_the_note_compares_it_with_the_weights_alone() -> None:
    r, p, t, _, _, s = _data()
    res = oe.IPS().estimate(r, p, t, sampling_weight=s)
    sw = s * t / p
    assert res.ess == pytest.approx(sw.sum() ** 2 / np.sum(sw**2), rel=1e-12)
    dm = oe.DM().estimate(r, q_target=np.full_like(r, 0.5), sampling_weight=s)
    assert dm.ess == pytest.approx(s.sum() ** 2 / np.sum(s**2), rel=1e-12)


def test_low_ess_note_is_relative_to_the_ess_of_the_sampling_weights() -> None:
    n = 2000
    r = np.ones(n)
    p = np.full(n, 0.5)
    t = np.zeros(n)
    t[:3] = 1.0  # three rows carry the candidate
    s = 1.0 + np.arange(n) % 2  # sum s = 3000, sum s^2 = 5000: Kish ESS 1800; s w of the
    # three rows (2, 4, 2): Kish ESS 64 / 24 = 2.7
    with pytest.warns(
        ope.OverlapWarning,
        match=r"effective sample size 2\.7 \(Kish, of the "
        r"sampling weights times the importance weights\) is 0\.15% of 1800\.0, "
        r"the effective sample size of the sampling weights alone \(n=2000\)",
    ):
        oe.IPS().estimate(r, p, t, sampling_weight=s)


# ---------------------------------------------------------------- refusals
@pytest.mark.parametrize(
    ("name", "method", "kwargs", "why"),
    [
        ("ips", "hoeffding", {"weight_bound": 4.0}, "i.i.d. terms in a known range"),
        ("ips", "bernstein", {"weight_bound": 4.0}, "i.i.d. terms in a known range"),
        ("ips", "empirical_likelihood", {"weight_bound": 4.0}, "equally weighted rows"),
        ("ips", "betting", {}, "bets on each unweighted row"),
        ("snips", "betting", {}, "bets on each unweighted row"),
        ("clipped_ips", "bottou", {}, "unweighted mean of clipped terms"),
    ],
)
def test_bounded_intervals_refuse_sampling_weights(
    name: str, method: str, kwargs: dict, why: str
) -> None:
    est = oe.get_estimator(name, **({"max_weight": 1.5} if name == "clipped_ips" else {}))
    res = est.estimate(R, P, T, reward_range=(0, 1), sampling_weight=S)
    with pytest.raises(
        EstimationError,
        match=rf"{method}.*{why}.*column `sampling_weight`.*"
        r"ci='normal', 't' or 'bootstrap'",
    ):
        res.ci(method=method, **kwargs)


def test_logging_value_bounded_intervals_refuse_sampling_weights() -> None:
    res = oe.logging_value(R, reward_range=(0, 1), sampling_weight=S)
    with pytest.raises(EstimationError, match="hoeffding.*column `sampling_weight`"):
        res.ci(method="hoeffding")


@pytest.mark.parametrize(
    ("weight", "match"),
    [
        (np.array([1.0, 0.0, 1.0, 1.0]), r"must be > 0; 1 rows are not \(first at row 1: 0.0\)"),
        (np.array([1.0, -2.0, 1.0, 1.0]), r"must be > 0; 1 rows are not \(first at row 1"),
        (np.array([1.0, np.nan, 1.0, 1.0]), r"must be finite; 1 rows are NaN"),
        (np.array([1.0, 2.0]), r"has 2 rows but the logs have 4"),
        # the mirror of the largest: squares below float64's range (ZeroDivisionError before)
        (np.full(4, 1e-200), r"the largest is 1e-200, below 1e-150"),
    ],
)
def test_bad_sampling_weights_are_refused(weight: np.ndarray, match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        oe.IPS().estimate(R, P, T, sampling_weight=weight)


# ---------------------------------------------------------------- evaluate
def _frame(n: int = 1200, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    action = rng.integers(0, 2, n)
    seg = rng.integers(0, 2, n)
    reward = rng.binomial(1, np.where(seg == 1, 0.6, 0.2)).astype(float)
    df = pd.DataFrame({"action": action, "propensity": 0.5, "reward": reward, "seg": seg})
    df["target__a"] = (action == 1).astype(float)
    df["target__b"] = np.where(action == 1, 0.3, 0.7)
    df["weight"] = np.where(seg == 1, 4.0, 1.0)
    return df


def test_evaluate_reads_the_weight_column_and_says_so() -> None:
    df = _frame()
    ev = ope.evaluate(df, estimators=("ips", "snips", "clipped_ips"), max_weight=1.5)
    many = oe.estimate_many(
        "ips",
        reward=df.reward,
        logging_propensity=df.propensity,
        target_propensity=df[["target__a", "target__b"]].to_numpy(),
        sampling_weight=df.weight,
    )
    assert ev[("a", "ips")].value == pytest.approx(many[0].value, abs=1e-15)
    assert ev[("b", "ips")].std_error == pytest.approx(many[1].std_error, abs=1e-15)
    total = df.weight.sum()
    note = (
        f"rows carry sampling weights (column `weight`, from pdrop): estimates are "
        f"Horvitz-Thompson weighted; the population size is estimated as the sum of weights "
        f"= {total:,.6g}"
    )
    assert any(n.startswith(note) for n in ev.notes)
    assert note.split(":")[0] in ev.summary().replace("\n      ", " ")
    assert "sampling weights:" in ev.summary() and "logging policy (weighted mean reward)" in (
        ev.summary()
    )
    assert any(n.startswith(note) for n in ev.to_dict()["notes"])
    lv = ev.logging
    assert lv.value == pytest.approx(np.sum(df.weight * df.reward) / total, abs=1e-14)


def test_evaluate_weight_column_option_names_another_column() -> None:
    df = _frame().rename(columns={"weight": "inv_keep"})
    ev = ope.evaluate(df, estimators=("snips",), weight_column="inv_keep")
    plain = ope.evaluate(df.drop(columns="inv_keep"), estimators=("snips",))
    assert ev[("a", "snips")].value != pytest.approx(plain[("a", "snips")].value, abs=1e-3)
    assert any("column `inv_keep`" in n for n in ev.notes)
    with pytest.raises(SchemaError, match="weight_column='w' is not a column of the logs"):
        ope.evaluate(df, estimators=("snips",), weight_column="w")


def test_evaluate_with_unit_weights_is_bit_for_bit_unweighted() -> None:
    df = _frame()
    df["weight"] = 1.0
    with_w = ope.evaluate(df, estimators=("ips", "snips"))
    without = ope.evaluate(df.drop(columns="weight"), estimators=("ips", "snips"))
    pd.testing.assert_frame_equal(with_w.table(), without.table())


def test_evaluate_segments_equal_evaluate_on_the_segment_rows() -> None:
    df = _frame()
    ev = ope.evaluate(df, estimators=("ips", "snips"), by="seg")
    seg = ev.table(by="segment")
    for label in (0, 1):
        part = ope.evaluate(df[df.seg == label].reset_index(drop=True), estimators=("ips", "snips"))
        for (policy, key), est in part.estimates.items():
            row = seg[
                (seg.segment.astype(str) == str(label))
                & (seg.policy == policy)
                & (seg.estimator == key)
            ]
            assert float(row.value.iloc[0]) == pytest.approx(est.value, abs=1e-14)
            assert float(row.std_error.iloc[0]) == pytest.approx(est.std_error, abs=1e-14)


def test_evaluate_shared_bootstrap_equals_each_estimates_own_bootstrap() -> None:
    df = _frame()
    ev = ope.evaluate(df, estimators=("ips", "snips"), ci="bootstrap", rng=7, n_resamples=400)
    t = ev.table()
    seed = ev.provenance.seed
    for (policy, key), est in ev.estimates.items():
        own = est.ci(method="bootstrap", rng=seed, n_resamples=400)
        row = t[(t.policy == policy) & (t.estimator == key)]
        assert float(row.ci_low.iloc[0]) == pytest.approx(own.low, abs=1e-12)
        assert float(row.ci_high.iloc[0]) == pytest.approx(own.high, abs=1e-12)


def test_evaluate_refuses_bounded_intervals_on_weighted_rows() -> None:
    df = _frame()
    with pytest.raises(
        EstimationError, match="'hoeffding' does not take sampling weights.*column `weight`"
    ):
        ope.evaluate(df, estimators=("ips",), ci="hoeffding", reward_range=(0, 1), weight_bound=2.0)


def _same(got, want, rel: float = 1e-12) -> None:
    assert got.n == want.n
    for a, b in (
        (got.value, want.value),
        (got.std_error, want.std_error),
        (got.ci_low, want.ci_low),
        (got.ci_high, want.ci_high),
        (got.ess, want.ess),
    ):
        assert a == pytest.approx(b, rel=rel, abs=1e-13)
    assert got.notes == want.notes


def test_streamed_statistics_equal_the_eager_weighted_estimates() -> None:
    from ope.streaming import MomentStats

    rng = np.random.default_rng(4)
    n = 3000
    r = rng.normal(5.0, 1.0, n)  # rewards far from 0: the shift keeps the variance exact
    p = rng.uniform(0.1, 0.9, n)
    t = rng.uniform(0.0, 1.0, (n, 2))
    s = rng.uniform(1.0, 4.0, n)
    parts = [
        MomentStats.from_arrays(
            r[a : a + 700],
            p[a : a + 700],
            t[a : a + 700],
            sampling_weight=s[a : a + 700],
            max_weight=1.5,
        )
        for a in range(0, n, 700)
    ]
    merged = MomentStats.merge_all(parts)
    for est in (oe.IPS(), oe.SNIPS(), oe.ClippedIPS(max_weight=1.5)):
        streamed = merged.estimates(est, reward_range=(-5.0, 15.0))
        eager = oe.estimate_many(
            est,
            reward=r,
            logging_propensity=p,
            target_propensity=t,
            reward_range=(-5.0, 15.0),
            sampling_weight=s,
        )
        for a, b in zip(streamed, eager):
            _same(a, b)
    _same(merged.logging_estimate(), oe.logging_value(r, sampling_weight=s))
    with pytest.raises(EstimationError, match="'bernstein' does not take sampling weights"):
        merged.estimates("ips", reward_range=(-5.0, 15.0))[0].ci(
            method="bernstein", weight_bound=10.0
        )
    unweighted = MomentStats.from_arrays(r[:10], p[:10], t[:10], max_weight=1.5)
    with pytest.raises(ValidationError, match="rows with sampling weights and of rows without"):
        merged.merge(unweighted)


def _same_evaluations(got, want) -> None:
    for key, est in want.estimates.items():
        _same(got[key], est)
    _same(got.logging, want.logging)
    assert [n for n in got.notes if "Horvitz" in n] == [n for n in want.notes if "Horvitz" in n]


def test_lazy_scan_equals_eager_on_weighted_rows(tmp_path) -> None:
    df = _frame()
    path = tmp_path / "logs.parquet"
    df.to_parquet(path)
    kw = {"estimators": ("ips", "snips", "clipped_ips"), "max_weight": 1.5}
    scanned = ope.evaluate(ope.scan_logs(path, batch_size=300), **kw)
    eager = ope.evaluate(ope.read_logs(path), **kw)
    assert scanned.streaming
    _same_evaluations(scanned, eager)


def test_dask_equals_eager_on_weighted_rows(tmp_path) -> None:
    pytest.importorskip("dask")
    df = _frame()
    for k, start in enumerate(range(0, len(df), 400)):
        df.iloc[start : start + 400].to_parquet(tmp_path / f"part-{k}.parquet")
    dist = ope.evaluate_distributed(tmp_path, batch_size=500, estimators=("ips", "snips"))
    eager = ope.evaluate(ope.read_logs(tmp_path), estimators=("ips", "snips"))
    _same_evaluations(dist, eager)


def test_weighting_corrects_the_bias_of_a_dropped_segment() -> None:
    """Segment 1 (reward rate 0.6) kept at rate 1/4 with weight 4: the full population value
    of the candidate is recovered by weighting and missed without it."""
    rng = np.random.default_rng(1)
    n = 40_000
    seg = rng.integers(0, 2, n)
    action = rng.integers(0, 2, n)
    reward = rng.binomial(1, np.where(seg == 1, 0.2, 0.6)).astype(float)
    kept = (seg == 0) | (rng.uniform(size=n) < 0.25)
    df = pd.DataFrame(
        {
            "action": action,
            "propensity": 0.5,
            "reward": reward,
            "seg": seg,
            "target__a": (action == 1).astype(float),
            "weight": np.where(seg == 1, 4.0, 1.0),
        }
    )[kept]
    truth = 0.4  # mean reward of the population, whichever action
    ev = ope.evaluate(df, estimators=("ips", "snips"))
    plain = ope.evaluate(df.drop(columns="weight"), estimators=("ips", "snips"))
    for key in ("ips", "snips"):
        w, u = ev[("a", key)], plain[("a", key)]
        assert abs(w.value - truth) < 3 * w.std_error
        assert abs(u.value - truth) > 10 * u.std_error


# ---------------------------------------------------------------- the estimator contract
class _IgnoresWeights(oe.IPS):
    """Takes sampling_weight and drops it: the silent bias the contract must catch."""

    def estimate(
        self,
        reward,
        logging_propensity,
        target_propensity,
        *,
        reward_range=None,
        sampling_weight=None,
    ):
        return super().estimate(
            reward, logging_propensity, target_propensity, reward_range=reward_range
        )


def test_the_contract_catches_an_estimator_that_ignores_sampling_weights() -> None:
    from ope.testing import estimator_checks

    check = dict(estimator_checks(_IgnoresWeights()))["sampling_weights"]
    with pytest.raises(
        AssertionError, match="sampling_weights failed .* value with integer sampling weights"
    ):
        check(rng=0)
    dict(estimator_checks(oe.IPS()))["sampling_weights"](rng=0)  # passes


# ---------------------------------------------------------------- exact-truth simulation
@pytest.mark.slow
def test_pdrop_simulation_weighted_is_unbiased_and_covers_unweighted_is_biased() -> None:
    """300 replications of benchmarks/bench_pdrop.py (segments thinned at pdrop 0.75 ... 0):
    weighted IPS, SNIPS, DR and the bootstrap have bias within 3.5 Monte Carlo standard errors
    and coverage within 3 binomial standard errors of 95 %; unweighted they miss the
    exact value by more than 8 Monte Carlo standard errors and cover it less than half the
    time."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import bench_pdrop

    reps = 300
    rows, info = bench_pdrop.run(reps, 5000, seed=1, vw=False)
    band = 3 * math.sqrt(0.95 * 0.05 / reps)
    for method in ("IPS normal", "SNIPS normal", "DR normal", "IPS bootstrap"):
        w, u = rows[f"{method}, weighted"], rows[f"{method}, unweighted"]
        assert abs(w["bias"]) < 3.5 * w["bias_se"], (method, w)
        assert abs(w["coverage"] - 0.95) <= band, (method, w)
        assert abs(u["bias"]) > 8 * u["bias_se"], (method, u)
        assert u["coverage"] < 0.5, (method, u)
    assert info["mean_kept"] < 0.7 * 5000


# ---------------------------------------------------------------- diagnostics, CLI, report
def test_diagnose_weights_rows_and_unit_weights_change_nothing() -> None:
    df = _frame()
    d = ope.diagnose(df)
    assert d.sampling_weight == "weight" and "Horvitz-Thompson weighted" in d.notes[0]
    plain = ope.diagnose(df.assign(weight=1.0))  # every row kept for sure: nothing to weight
    assert plain.sampling_weight is None
    assert plain.table().equals(ope.diagnose(df.drop(columns="weight")).table())


def _cli(*argv: str) -> tuple[int, str]:
    import contextlib
    import io

    from ope.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(list(argv))
    return code, out.getvalue()


def test_cli_evaluate_says_the_estimates_are_weighted_in_text_json_and_html(tmp_path) -> None:
    import json

    df = _frame()
    path = tmp_path / "logs.parquet"
    df.to_parquet(path)
    total = f"{df.weight.sum():,.6g}"
    code, text = _cli("evaluate", str(path), "--seed", "0")
    assert code == 0
    assert "Horvitz-Thompson weighted" in text and total in text
    assert "Overlap diagnostics: 1,200 kept rows weighted by `weight`" in text
    code, out = _cli("evaluate", str(path), "--json", "--seed", "0")
    doc = json.loads(out)
    assert code == 0 and doc["weight_column"] == "weight"
    assert doc["diagnostics"]["sampling_weight"] == "weight"
    assert any("Horvitz-Thompson weighted" in n and total in n for n in doc["notes"])
    ev = ope.evaluate(df, estimators=("ips", "snips"), rng=0)
    got = {(r["policy"], r["estimator"]): r["value"] for r in doc["estimates"]}
    assert got[("a", "ips")] == pytest.approx(ev[("a", "ips")].value, abs=1e-15)
    report = tmp_path / "report.html"
    code, _ = _cli("evaluate", str(path), "--seed", "0", "--report", str(report))
    assert code == 0
    html = report.read_text(encoding="utf-8")
    assert "Horvitz-Thompson weighted" in html and total in html


def test_cli_weight_column_flag(tmp_path) -> None:
    import json

    df = _frame().rename(columns={"weight": "keep_w"})
    path = tmp_path / "logs.parquet"
    df.to_parquet(path)
    code, out = _cli("evaluate", str(path), "--json", "--weight-column", "keep_w")
    doc = json.loads(out)
    assert code == 0 and doc["weight_column"] == "keep_w"
    code, out = _cli("evaluate", str(path), "--json", "--weight-column", "nope")
    assert code == 65 and "weight_column='nope' is not a column" in out
    code, out = _cli(
        "evaluate",
        str(path),
        "--json",
        "--ci",
        "bernstein",
        "--reward-range",
        "0",
        "1",
        "--weight-bound",
        "2",
        "--weight-column",
        "keep_w",
    )
    assert code != 0 and "does not take sampling weights" in out


def test_the_gates_finite_sample_bounds_refuse_weighted_rows() -> None:
    # the learners take the weights (tests/test_learning_weighted.py); betting does not
    df = _frame().assign(x0=np.linspace(0, 1, 1200))
    logs = ope.read_logs(df)
    with pytest.raises(
        EstimationError,
        match=r"ci='betting' does not take sampling weights"
        r".*column `weight`.*Use ci='t'",
    ):
        ope.learn_from_logs(logs, context_columns=["x0"], ci="betting", rng=0)


def test_slate_logs_refuse_sampling_weights() -> None:
    from ope.slates import slate_logs

    t = pd.DataFrame(
        {
            "slate_id": [7, 7, 3, 3],
            "position": [1, 0, 0, 1],
            "item": [2, 0, 1, 2],
            "reward": [0.0, 1.0, 0.0, 0.0],
            "propensity": [0.5, 0.5, 0.25, 0.5],
        }
    )
    assert slate_logs(t.assign(weight=1.0)).slate_size == 2
    with pytest.raises(EstimationError, match=r"slates carry sampling weights \(column `weight`"):
        slate_logs(t.assign(weight=[2.0, 2.0, 1.0, 1.0]))


def test_paired_comparison_of_weighted_estimates_pairs_the_weighted_rows() -> None:
    df = _frame()
    ev = ope.evaluate(df, estimators=("ips",))
    d = ev.compare("a", "logging", estimator="ips")
    a, b = ev[("a", "ips")], ev.logging
    assert d.value == pytest.approx(a.value - b.value, abs=1e-14)
    psi = a.influence() - b.influence()
    assert d.std_error == pytest.approx(psi.std(ddof=1) / math.sqrt(len(psi)), rel=1e-12)


def test_lazy_scan_with_unit_weights_is_bit_for_bit_unweighted(tmp_path) -> None:
    df = _frame().assign(weight=1.0)
    path = tmp_path / "logs.parquet"
    df.to_parquet(path)
    with_w = ope.evaluate(ope.scan_logs(path, batch_size=300), estimators=("ips", "snips"))
    plain = ope.evaluate(
        ope.scan_logs(df.drop(columns="weight"), batch_size=300), estimators=("ips", "snips")
    )
    pd.testing.assert_frame_equal(with_w.table(), plain.table())
    assert with_w.weight_column is None


# ---------------------------------------------------------------- the one-pass kernel
def _straightforward(r, p, t, s, kind, max_weight=None, origin=0.0):
    """Value and linearized standard error by plain numpy, with no shared code: the Hajek
    ratio V = sum s A / sum s (SNIPS: sum s w r / sum s w) and
    se^2 = n / (n - 1) * sum (s (A - V))^2 / (sum s)^2 (SNIPS: s w (r - V) over sum s w)."""
    w = t / p
    if kind == "snips":
        num, den = s * w * r, s * w
    else:
        a = {
            "ips": w * r,
            "clipped_ips": origin + np.minimum(w, max_weight) * (r - origin),
            "logging": r,
        }[kind]
        num, den = s * a, s
    v = num.sum() / den.sum()
    n = r.size
    psi = num - v * den
    return v, math.sqrt(n / (n - 1.0) * (psi @ psi)) / den.sum()


@pytest.mark.parametrize("backend", ["numba", "numpy"])
def test_weighted_estimates_equal_a_straightforward_numpy_computation(backend: str) -> None:
    from ope import _kernel
    from ope.streaming import MomentStats

    if backend == "numba" and not _kernel.numba_available():
        pytest.skip("numba is not installed")
    rng = np.random.default_rng(11)
    n = 40_000  # several kernel blocks of either backend
    r = rng.normal(3.0, 1.0, n)
    p = rng.uniform(0.05, 1.0, n)
    t = rng.uniform(0.0, 1.0, (n, 3))
    s = 1.0 / (1.0 - rng.uniform(0.0, 0.9, n))
    rr = (-5.0, 12.0)
    ests = [oe.IPS(), oe.SNIPS(), oe.ClippedIPS(max_weight=4.0), oe.LoggingValue()]
    _kernel.set_backend(backend)
    try:
        one_pass = oe.estimate_weighted_many(
            ests,
            reward=r,
            logging_propensity=p,
            target_propensity=[np.ascontiguousarray(t[:, j]) for j in range(3)],
            sampling_weight=s,
            reward_range=rr,
        )
        eager = [
            oe.estimate_many(
                e,
                reward=r,
                logging_propensity=p,
                target_propensity=t,
                sampling_weight=s,
                reward_range=rr,
            )
            for e in ests[:3]
        ]
        eager.append([oe.logging_value(r, sampling_weight=s, reward_range=rr)])
        stats = MomentStats.from_arrays(r, p, t, max_weight=4.0, sampling_weight=s)
        streamed = [stats.estimates(e, reward_range=rr) for e in ests[:3]]
        streamed.append([stats.logging_estimate(reward_range=rr)])
    finally:
        _kernel.set_backend(None)
    for est, a, b, c in zip(ests, one_pass, eager, streamed):
        kind = est.name if est.uses_weights else "logging"
        for j, (x, y, z) in enumerate(zip(a, b, c)):  # a loop over policies
            col = t[:, j] if est.uses_weights else p
            value, se = _straightforward(r, p, col, s, kind, 4.0, rr[0])
            for got in (x, y, z):
                assert got.value == pytest.approx(value, rel=1e-12)
                assert got.std_error == pytest.approx(se, rel=1e-12)
            _same(x, y)


def test_estimate_weighted_many_equals_estimate_many_per_estimator() -> None:
    r, p, t, _, _, s = _data(n=2000)
    t2 = np.column_stack([t, 1.0 - t])
    ests = [oe.ClippedIPS(max_weight=1.5), oe.IPS(), oe.ClippedIPS(max_weight=3.0), oe.SNIPS()]
    got = oe.estimate_weighted_many(
        ests,
        reward=r,
        logging_propensity=p,
        target_propensity=t2,
        sampling_weight=s,
        names=["a", "b"],
    )
    for est, results in zip(ests, got):  # two clip levels: two passes
        want = oe.estimate_many(
            est,
            reward=r,
            logging_propensity=p,
            target_propensity=t2,
            sampling_weight=s,
            names=["a", "b"],
        )
        assert [x.policy for x in results] == ["a", "b"]
        for x, y in zip(results, want):
            _same(x, y)
            b1 = x.ci(method="bootstrap", rng=2, n_resamples=200)
            b2 = y.ci(method="bootstrap", rng=2, n_resamples=200)
            assert (b1.low, b1.high) == pytest.approx((b2.low, b2.high), abs=1e-12)
    with pytest.raises(ope.ParameterError, match="takes weighting estimators"):
        oe.estimate_weighted_many(
            [oe.DM()], reward=r, logging_propensity=p, target_propensity=t2, sampling_weight=s
        )


@pytest.mark.parametrize(
    ("weight", "match"),
    [
        (np.array([1.0, 0.0, 1.0, 1.0]), r"must be > 0; 1 rows are not \(first at row 1: 0.0\)"),
        (np.array([1.0, -2.0, 1.0, 1.0]), r"must be > 0; 1 rows are not \(first at row 1"),
        (np.array([1.0, np.nan, 1.0, 1.0]), r"must be finite; 1 rows are NaN"),
        (np.array([1.0, np.inf, 1.0, 1.0]), r"must be finite"),
        (np.full(4, 1e-151), r"the largest is 1e-151, below 1e-150"),
    ],
)
def test_bad_sampling_weights_are_refused_after_the_one_pass(
    weight: np.ndarray, match: str
) -> None:
    with pytest.raises(ValidationError, match=match):
        oe.estimate_weighted_many(
            ["ips"], reward=R, logging_propensity=P, target_propensity=T, sampling_weight=weight
        )
    with pytest.raises(ValidationError, match=match):
        oe.logging_value(R, sampling_weight=weight)


def test_evaluate_takes_the_weighted_logging_value_from_the_estimates_pass() -> None:
    df = _frame()
    res = ope.evaluate(df, estimators=("ips", "snips"))
    alone = oe.logging_value(
        df["reward"].to_numpy(), sampling_weight=df["weight"].to_numpy(), weight_name="weight"
    )
    _same(res.logging, alone, rel=0.0)


def test_small_sample_notes_of_weighted_rows_do_not_point_to_refused_intervals():
    """Weighted rows: the small-sample note must not recommend bernstein/betting intervals,
    which refuse sampling-weighted rows."""
    from ope import IPS

    rng = np.random.default_rng(0)
    n = 20
    p = np.full(n, 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = IPS().estimate(
            reward=rng.random(n),
            logging_propensity=p,
            target_propensity=np.full(n, 0.5),
            reward_range=(0, 1),
            sampling_weight=np.where(np.arange(n) % 2, 1.0, 4.0),
        )
        plain = IPS().estimate(
            reward=rng.random(n),
            logging_propensity=p,
            target_propensity=np.full(n, 0.5),
            reward_range=(0, 1),
        )
    small = [note for note in est.notes if note.startswith("only n=20 rows")]
    assert len(small) == 1 and "bernstein" not in small[0] and "betting" not in small[0]
    assert small[0].endswith(
        "no finite-sample interval takes sampling weights: read the "
        "interval as approximate, or log more rows."
    )
    assert any("prefer bernstein or betting" in note for note in plain.notes)


def test_tiny_sampling_weights_are_refused_by_the_diagnostics_too() -> None:
    """Weights of 1e-200 are > 0 and finite, but their squares underflow: the diagnostics'
    Hajek variance divided 0 by 0 (a ZeroDivisionError); now the one check refuses them."""
    df = _frame()
    df["weight"] = 1e-200
    with pytest.raises(ValidationError, match="below 1e-150"):
        ope.diagnose(df)
    df["weight"] = 1e-150  # the smallest accepted: finite numbers
    d = ope.diagnose(df)
    assert np.isfinite(d.table()["ess"]).all()
    # one tiny weight among others is a row that counts for little, not an error
    df["weight"] = 1.0
    df.loc[0, "weight"] = 1e-160
    d = ope.diagnose(df)
    assert np.isfinite(d.table()["ess"]).all()
    assert np.isfinite(ope.evaluate(df, estimators=["ips"]).table()["value"]).all()


def test_columns_that_leave_out_the_weights_still_read_them(tmp_path):
    # columns=[...] without `weight` made every estimate unweighted without a word, and then
    # weight_column="weight" said the files had no such column
    import pyarrow.parquet as pq

    from ope.distributed import evaluate_distributed

    n = 300
    rng = np.random.default_rng(0)
    a = rng.integers(0, 3, n)
    table = pa.table(
        {
            "event_id": np.arange(n),
            "action": a,
            "propensity": np.full(n, 1 / 3),
            "reward": rng.random(n),
            "target__one": (a == 1) * 1.0,
            "weight": rng.uniform(0.5, 4.0, n),
        }
    )
    pq.write_table(table, tmp_path / "p.parquet")
    full = ope.evaluate(ope.read_logs(tmp_path), estimators=("ips",)).table()["value"].item()
    some = ope.read_logs(tmp_path, columns=["target__one"])
    assert "weight" in some.table.column_names
    assert ope.evaluate(some, estimators=("ips",)).table()["value"].item() == pytest.approx(full)
    dist = evaluate_distributed(tmp_path, estimators=("ips",), columns=["target__one"])
    assert dist.table()["value"].item() == pytest.approx(full, rel=1e-12)
    unweighted = float(np.mean(table["reward"].to_numpy() * (a == 1) * 3.0))
    assert abs(full - unweighted) > 1e-3  # the weights do change the estimate
