"""Tests of ope.diagnostics: hand-computed vectors, planted gaps and bugs, simulated plans."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy import stats

from ope.diagnostics import (
    GAP_MIN_ESS,
    N_QUANTILE_BINS,
    SUPPORT_FLOOR,
    VERDICT_EXPLORE,
    VERDICT_MORE_DATA,
    WEIGHT_QUANTILES,
    Diagnostics,
    PolicyRow,
    SegmentRow,
    diagnose,
    diagnose_arrays,
)
from ope.exceptions import (
    MissingBoundsError,
    OverlapWarning,
    ParameterError,
    PolicyError,
    SchemaError,
    ValidationError,
)
from ope.diagnostics._pass import fused_pass, weight_quantiles
from ope.intervals.bounded import bottou_interval
from ope.logs import BanditLogs, ValidationReport


def quiet(*args, **kwargs) -> Diagnostics:
    """diagnose_arrays with OverlapWarnings silenced (tests that check warnings do not use it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OverlapWarning)
        return diagnose_arrays(*args, **kwargs)


def draw_actions(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One action per row from a (n, K) probability table (inverse CDF, vectorized)."""
    u = rng.random(probs.shape[0])[:, None]
    return np.minimum((probs.cumsum(axis=1) < u).sum(axis=1), probs.shape[1] - 1)


def bandit(
    n: int,
    rng: np.random.Generator,
    *,
    logger: str = "uniform",
    k: int = 5,
    explore: float = 0.0,
    scope: str | None = None,
) -> dict[str, np.ndarray]:
    """A contextual bandit with a segment ``user`` (new: 20 % of rows) and a greedy target.

    logger="uniform": full support; "gap": in segment new the logger never plays action 0;
    "tiny": in segment new the logger plays action 0 with probability 1e-4. The target always
    plays action 0. ``explore`` mixes the target into the logger on ``scope`` ("all" or "new").
    """
    x = rng.random(n)
    new = x < 0.2
    pb = np.full((n, k), 1.0 / k)
    if logger == "gap":
        pb[new] = np.r_[0.0, np.full(k - 1, 1.0 / (k - 1))]
    elif logger == "tiny":
        pb[new] = np.r_[1e-4, np.full(k - 1, (1 - 1e-4) / (k - 1))]
    elif logger == "skewed":
        pb[:] = np.r_[0.6, np.full(k - 1, 0.4 / (k - 1))]
    pe = np.zeros((n, k))
    pe[:, 0] = 1.0
    if explore > 0:
        m = np.ones(n, bool) if scope == "all" else new
        pb[m] = (1 - explore) * pb[m] + explore * pe[m]
    a = draw_actions(pb, rng)
    mu = np.where(new[:, None], np.r_[0.6, np.full(k - 1, 0.2)], np.r_[0.3, np.full(k - 1, 0.5)])
    rows = np.arange(n)
    r = (rng.random(n) < mu[rows, a]).astype(float)
    return {
        "x": x,
        "user": np.where(new, "new", "old"),
        "action": a,
        "p": pb[rows, a],
        "pe": pe[rows, a],
        "reward": r,
        "pb": pb,
        "pe_table": pe,
        "truth": np.float64(0.2 * 0.6 + 0.8 * 0.3),
    }


# --------------------------------------------------------------------------------------------
# hand-computed vectors
# --------------------------------------------------------------------------------------------
R = np.array([1.0, 0.0, 1.0, 0.5, 0.0, 1.0])
P = np.array([0.5, 0.25, 0.5, 0.2, 0.8, 0.1])
T = np.array([[1.0, 0.5], [0.5, 0.0], [0.0, 1.0], [0.6, 0.2], [0.4, 0.8], [0.3, 0.1]])
SEG = np.array(["a", "a", "b", "b", "b", "c"])


def hand_weights() -> np.ndarray:
    return T / P[:, None]


def test_policy_statistics_match_hand_computation():
    w = hand_weights()  # [[2,1],[2,0],[0,2],[3,1],[.5,1],[3,1]]
    d = quiet(R, P, T, policy_names=["u", "v"], segments={"seg": SEG}, max_weight=2.5)
    tab = d.table().set_index("policy")
    n = len(R)
    for j, name in enumerate(["u", "v"]):
        wj = w[:, j]
        row = tab.loc[name]
        assert row["n"] == n
        assert row["ess"] == pytest.approx(wj.sum() ** 2 / (wj @ wj))
        assert row["ess_ratio"] == pytest.approx(wj.sum() ** 2 / (wj @ wj) / n)
        assert row["mean_weight"] == pytest.approx(wj.mean())
        assert row["mean_weight_se"] == pytest.approx(wj.std(ddof=1) / math.sqrt(n))
        assert row["weight_max"] == pytest.approx(wj.max())
        pos = wj[wj > 0]
        assert row["kl_divergence"] == pytest.approx((pos * np.log(pos)).sum() / n)
        assert row["chi2_divergence"] == pytest.approx((wj**2).mean() - 1)
        assert row["renyi2_divergence"] == pytest.approx(math.log((wj**2).mean()))
        for q in WEIGHT_QUANTILES:
            col = "weight_q" + {0.5: "50", 0.9: "90", 0.99: "99", 0.999: "999"}[q]
            assert row[col] == pytest.approx(np.quantile(wj, q))
        assert row["max_weight"] == 2.5  # the clip level (glossary: max_weight)
        assert row["clipped_share"] == pytest.approx((wj > 2.5).mean())
        assert row["clipped_weight_share"] == pytest.approx(wj[wj > 2.5].sum() / wj.sum())
    # policy u by hand: w = 2, 2, 0, 3, .5, 3 -> sum 10.5, sum of squares 26.25
    assert tab.loc["u", "ess"] == pytest.approx(10.5**2 / 26.25)
    assert tab.loc["u", "clipped_share"] == pytest.approx(2 / 6)


def test_segment_statistics_match_hand_computation():
    d = quiet(R, P, T, policy_names=["u", "v"], segments={"seg": SEG})
    seg = d.segments()
    w = hand_weights()
    for j, name in enumerate(["u", "v"]):
        wj = w[:, j]
        terms = wj * R
        dev2 = (terms - terms.mean()) ** 2
        for label in ["a", "b", "c"]:
            m = SEG == label
            row = seg[(seg.policy == name) & (seg.segment == label)].iloc[0]
            assert row["column"] == "seg"
            assert row["rows"] == m.sum()
            assert row["row_share"] == pytest.approx(m.mean())
            assert row["target_mass_share"] == pytest.approx(wj[m].sum() / wj.sum())
            ess = wj[m].sum() ** 2 / (wj[m] ** 2).sum() if (wj[m] ** 2).sum() > 0 else 0.0
            assert row["ess"] == pytest.approx(ess)
            assert row["weight_max"] == pytest.approx(wj[m].max())
            assert row["mean_weight"] == pytest.approx(wj[m].mean())
            assert row["variance_share"] == pytest.approx(dev2[m].sum() / dev2.sum())
    # hand: policy u, segment b has weights 0, 3, 0.5 -> mass 3.5 / 10.5 = 1/3
    row = seg[(seg.policy == "u") & (seg.segment == "b")].iloc[0]
    assert row["target_mass_share"] == pytest.approx(1 / 3)
    assert row["ess"] == pytest.approx(3.5**2 / 9.25)


def test_segment_sums_agree_between_joint_and_separate_columns():
    rng = np.random.default_rng(3)
    n = 3000
    cols = {"c1": rng.integers(0, 4, n), "c2": rng.choice(["x", "y", "z"], n), "c3": rng.random(n)}
    p = rng.uniform(0.1, 1, n)
    t = rng.uniform(0, 1, (n, 2)) * p[:, None]
    r = rng.random(n)
    joint = quiet(r, p, t, segments=cols).segments()
    for name, values in cols.items():
        alone = quiet(r, p, t, segments={name: values}).segments()
        mine = joint[joint.column == name].reset_index(drop=True)
        pd.testing.assert_frame_equal(mine, alone.reset_index(drop=True), check_exact=False)


@pytest.mark.parametrize("chunk_rows", [7, 1 << 14])
def test_exact_quantiles_equal_numpy(chunk_rows, monkeypatch):
    monkeypatch.setattr("ope.diagnostics._pass.CHUNK_ROWS", chunk_rows)
    rng = np.random.default_rng(0)
    cases = [
        rng.lognormal(0, 2, 10_001),
        np.where(rng.random(5000) < 0.8, 0.0, 5.0),  # a greedy target: zeros and one value
        np.full(37, 1.0),
        np.array([0.0, 0.0]),
        np.where(rng.random(999) < 0.5, 5.0, 5.0 + 2.0**-40),  # two values in one bin
        rng.pareto(1.1, 20_000) * 3.0,
        np.full(1000, 10.0 / 3.0),  # one value that is not its bin's lower edge
        np.where(rng.random(4000) < 0.75, 0.0, 4.0),  # uniform logger, greedy target: no pass 2
    ]
    qs = (0.0, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0)
    for w in cases:
        p = np.full(w.size, 1.0 / (w.max() + 1.0))
        t = w * p[0]
        d = quiet(np.zeros(w.size), p, t)
        sums = fused_pass(p, t[:, None])
        got = weight_quantiles(p, t[:, None], sums, np.array([(t / p).max()]), qs)[0]
        np.testing.assert_allclose(got, np.quantile(t / p, qs), rtol=1e-12, atol=0)
        row = d.table().iloc[0]
        for q in WEIGHT_QUANTILES:
            col = "weight_q" + {0.5: "50", 0.9: "90", 0.99: "99", 0.999: "999"}[q]
            assert row[col] == pytest.approx(np.quantile(t / p, q), rel=1e-12)


def test_results_do_not_depend_on_chunking(monkeypatch):
    rng = np.random.default_rng(6)
    data = bandit(3001, rng, logger="tiny")
    t = np.column_stack([data["pe"], rng.uniform(0, 1, 3001) * data["p"]])
    args = (data["reward"], data["p"], t)
    kwargs = {
        "segments": {"user": data["user"], "x": data["x"]},
        "action": data["action"],
        "max_weight": 30.0,
        "reward_range": (0, 1),
    }
    whole = quiet(*args, **kwargs)
    monkeypatch.setattr("ope.diagnostics._pass.CHUNK_ROWS", 100)
    monkeypatch.setattr("ope.diagnostics.segments.SEGMENT_ROWS", 100)
    chunked = quiet(*args, **kwargs)
    pd.testing.assert_frame_equal(whole.table(), chunked.table(), check_exact=False, rtol=1e-10)
    pd.testing.assert_frame_equal(
        whole.segments(), chunked.segments(), check_exact=False, rtol=1e-10, atol=1e-12
    )
    pd.testing.assert_frame_equal(
        whole.weight_histogram("policy_1"), chunked.weight_histogram("policy_1")
    )


def pinned_data() -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    rng = np.random.default_rng(2024)
    n = 20_000
    p = rng.uniform(0.05, 0.2, n)
    t = np.column_stack([(rng.random(n) < 0.1).astype(float), rng.uniform(0.0, 0.2, n)])
    r = (rng.random(n) < 0.3).astype(float)
    segs = {
        "region": rng.integers(0, 5, n),
        "age": rng.gamma(3.0, 12.0, n),
        "device": rng.choice(["desktop", "phone", "tablet"], n),
    }
    return r, p, t, segs


def test_outputs_pinned_on_a_fixed_seed():
    # computed by the first implementation (one bincount per statistic, masked logarithm,
    # weighted histogram); the fused, cell-sorted pass must reproduce them up to rounding
    r, p, t, segs = pinned_data()
    d = quiet(
        r,
        p,
        t,
        policy_names=["greedy", "soft"],
        segments=segs,
        max_weight=12.0,
        reward_range=(0, 1),
    )
    tab = d.table().set_index("policy")
    expected = {
        "greedy": {
            "ess": 1657.4713097266495,
            "kl_divergence": 2.0708578945397944,
            "weight_q50": 0.0,
            "weight_q90": 0.0,
            "weight_q99": 15.32509872283602,
            "weight_q999": 19.512579008573837,
            "weight_max": 19.979680470438456,
            "clipped_weight_share": 0.335483567264486 / 0.8987404377009045,
            "ci_low": 0.2100738386700126,
            "ci_high": 0.5284129300553841,
        },
        "soft": {
            "ess": 12761.297738855656,
            "kl_divergence": 0.1727504600183439,
            "weight_q50": 0.7920899237029788,
            "weight_q90": 1.8757931626299382,
            "weight_q99": 3.1017464867630937,
            "weight_q999": 3.694547386101026,
            "weight_max": 3.9295493701406246,
            "clipped_weight_share": 0.0,
            "ci_low": 0.2567301945848923,
            "ci_high": 0.40015076181000586,
        },
    }
    for policy, values in expected.items():
        for column, value in values.items():
            assert tab.loc[policy, column] == pytest.approx(value, rel=1e-12, abs=0), column
    age = d.segments().query("column == 'age'")
    assert list(age.segment[:5]) == [
        "[0.9724, 18.28)",
        "[18.28, 27.4)",
        "[27.4, 37.35)",
        "[37.35, 51.59)",
        "[51.59, 155]",
    ]
    np.testing.assert_allclose(
        age.ess,
        [
            326.9524771356425,
            344.61786156509726,
            322.9252456432739,
            312.6348549384818,
            352.1293513345857,
            2567.5190462771184,
            2542.870699781225,
            2553.269549377571,
            2571.368842005881,
            2526.7445619305245,
        ],
        rtol=1e-12,
    )
    np.testing.assert_allclose(
        age.variance_share,
        [
            0.20095910869229058,
            0.20858192499711467,
            0.17585435276126193,
            0.20844072966783728,
            0.20616388388149548,
            0.2087941898164438,
            0.19569396780377138,
            0.20570664836642313,
            0.20236089088375495,
            0.1874443031296069,
        ],
        rtol=1e-12,
    )
    np.testing.assert_array_equal(
        age.weight_max,
        [  # maxima are exact
            19.86626899987104,
            19.95272512767397,
            19.979680470438456,
            19.974601335905948,
            19.92217113599255,
            3.9295493701406246,
            3.799850933697261,
            3.9124562256963373,
            3.8190671740291164,
            3.7799828179659576,
        ],
    )
    hist = d.weight_histogram("soft").head(6)
    assert list(hist.rows) == [0, 1, 1, 1, 1, 4]
    np.testing.assert_allclose(
        hist.target_mass,
        [
            0.0,
            2.85114479319989e-09,
            4.597559272516614e-09,
            9.262890026386064e-09,
            1.861159051166133e-08,
            1.5141271683346055e-07,
        ],
        rtol=1e-12,
    )


@pytest.mark.parametrize("joint_cells", [12, 1 << 16])
def test_segment_rows_match_direct_computation(joint_cells, monkeypatch):
    # 12 joint cells put c1 x c2 in one group and c3 in another (the rows are ordered by each
    # group's cells, and a column's segments are merges of its cells' moments); 2**16 puts all
    # three in one group. Pieces of 257 rows split the larger cells into merged parts.
    monkeypatch.setattr("ope.diagnostics.segments.JOINT_SEGMENT_CELLS", joint_cells)
    monkeypatch.setattr("ope.diagnostics._pass.CHUNK_ROWS", 257)
    monkeypatch.setattr("ope.diagnostics.segments.SEGMENT_ROWS", 257)  # cells merged in pieces
    rng = np.random.default_rng(31)
    n, k, clip = 3000, 4, 5.0
    pb = rng.dirichlet(np.ones(k), n)
    pb[rng.random(n) < 0.2, 0] = 0.0  # the logger never plays action 0 on a fifth of the rows
    pb /= pb.sum(axis=1, keepdims=True)
    pe = rng.dirichlet(np.ones(k), n)
    a = draw_actions(pb, rng)
    rows = np.arange(n)
    cols = {"c1": rng.integers(0, 3, n), "c2": rng.choice(list("wxyz"), n), "c3": rng.random(n)}
    reward = rng.random(n)
    d = quiet(
        reward,
        pb[rows, a],
        pe[rows, a],
        policy_names=["pi"],
        segments=cols,
        action=a,
        target_distributions={"pi": sp.csr_array(pe)},
        logging_distribution=sp.csr_array(pb),
        max_weight=clip,
        reward_range=(0, 1),
    )
    w = pe[rows, a] / pb[rows, a]
    terms = np.minimum(w, clip) * reward
    dev2 = (terms - terms.mean()) ** 2
    unsupported = (pe * (pb <= SUPPORT_FLOOR)).sum(axis=1)
    assert unsupported.mean() > 0.02  # the deficiency statistic is exercised
    np.testing.assert_allclose(d.unsupported_mass("pi"), unsupported, atol=1e-15)
    seg = d.segments()
    assert list(seg.column.unique()) == ["c1", "c2", "c3"]
    for name in cols:
        codes = d._segmentation(name).codes
        sub = seg[seg.column == name].reset_index(drop=True)
        assert sub.rows.sum() == n
        for g, row in sub.iterrows():
            m = codes == g
            assert row["rows"] == m.sum()
            assert row["target_mass_share"] == pytest.approx(w[m].sum() / w.sum(), rel=1e-12)
            assert row["ess"] == pytest.approx(w[m].sum() ** 2 / (w[m] ** 2).sum(), rel=1e-12)
            assert row["mean_weight"] == pytest.approx(w[m].mean(), rel=1e-12)
            assert row["weight_max"] == w[m].max()
            assert row["variance_share"] == pytest.approx(dev2[m].sum() / dev2.sum(), rel=1e-10)
            assert row["unsupported_share"] == pytest.approx(unsupported[m].mean(), rel=1e-12)


def test_weight_histogram_counts_and_mass_by_octave():
    rng = np.random.default_rng(32)
    w = np.concatenate([np.zeros(50), rng.lognormal(0.0, 2.0, 2000), [2.0**-1070]])
    p = np.full(w.size, 1.0 / (w.max() + 1.0))
    t = w * p[0]
    d = quiet(np.zeros(w.size), p, t)
    ww = t / p
    hist = d.weight_histogram("policy_0")
    assert hist.rows.sum() == w.size
    # the first row holds the zeros (and subnormal weights, whose exponent field is 0 too)
    assert hist.rows.iloc[0] == 51
    for _, row in hist.iloc[1:].iterrows():
        assert row["weight_high"] == 2 * row["weight_low"]
        m = (ww >= row["weight_low"]) & (ww < row["weight_high"])
        assert row["rows"] == m.sum()
        assert row["target_mass"] == pytest.approx(ww[m].sum() / w.size, rel=1e-12)
        assert row["row_share"] == pytest.approx(m.mean(), rel=1e-12)


def test_weight_histogram_is_log_spaced_and_complete():
    rng = np.random.default_rng(1)
    n = 5000
    p = rng.uniform(0.01, 1.0, n)
    t = np.where(rng.random(n) < 0.3, 0.0, rng.uniform(0, 1, n))
    d = quiet(rng.random(n), p, t, policy_names=["pi"])
    h = d.weight_histogram("pi")
    w = t / p
    assert list(h.columns) == ["weight_low", "weight_high", "rows", "row_share", "target_mass"]
    assert h["rows"].sum() == n
    assert h.loc[0, "rows"] == (w == 0).sum()
    assert h["target_mass"].sum() == pytest.approx(w.mean())
    body = h.iloc[1:]
    np.testing.assert_allclose(body["weight_high"], 2 * body["weight_low"])  # factor-2 bins
    for _, b in body.iterrows():
        inside = (w >= b["weight_low"]) & (w < b["weight_high"])
        assert b["rows"] == inside.sum()
        assert b["target_mass"] == pytest.approx(w[inside].sum() / n)


def test_divergences_and_ess_match_exact_values_on_synthetic_data():
    # logger and candidate are context-dependent tables; the exact divergences are averages
    # over contexts of sums over actions, and the estimates must sit within a few standard
    # errors of them
    rng = np.random.default_rng(31)
    n = 200_000
    x = rng.integers(0, 3, n)
    logger = np.array([[0.4, 0.3, 0.2, 0.1], [0.25] * 4, [0.1, 0.1, 0.1, 0.7]])
    cand = np.array([[0.1, 0.2, 0.3, 0.4], [0.7, 0.1, 0.1, 0.1], [0.25] * 4])
    a = draw_actions(logger[x], rng)
    w = cand[x, a] / logger[x, a]
    d = quiet(np.zeros(n), logger[x, a], cand[x, a], policy_names=["c"])
    row = d.table().iloc[0]
    ctx = np.bincount(x, minlength=3) / n  # exact expectations over the drawn contexts
    kl = ctx @ (cand * np.log(cand / logger)).sum(axis=1)
    second = ctx @ (cand**2 / logger).sum(axis=1)
    se = lambda v: v.std(ddof=1) / math.sqrt(n)  # noqa: E731
    assert abs(row["kl_divergence"] - kl) < 4 * se(w * np.log(w))
    assert abs(row["chi2_divergence"] - (second - 1)) < 4 * se(w**2)
    assert row["renyi2_divergence"] == pytest.approx(math.log(row["chi2_divergence"] + 1))
    assert abs(row["mean_weight"] - 1) < 4 * se(w)
    # Kish ESS / n tends to 1 / E[w^2]
    assert row["ess_ratio"] == pytest.approx(1 / second, rel=0.02)


# --------------------------------------------------------------------------------------------
# outer vs inner uncertainty
# --------------------------------------------------------------------------------------------
def test_without_clip_level_the_narrowest_level_of_the_profile_is_used():
    # no clip level: the profile's levels are 1, 2, 4, 2.5 -> [1, 2, 2.5]; each row is the
    # Bottou interval of min(w, R) by hand and the row uses the narrowest
    lo, hi = -1.0, 2.0
    r = np.array([2.0, -1.0, 0.5, 1.0, 0.0, 2.0, -0.5, 1.5] * 30)
    p = np.array([0.5, 0.5, 0.25, 0.5, 0.8, 0.4, 0.5, 0.2] * 30)
    t = np.array([1.0, 0.0, 0.5, 0.25, 0.0, 0.4, 0.5, 0.0] * 30)
    d = quiet(r, p, t, policy_names=["pi"], reward_range=(lo, hi), confidence_level=0.9)
    row = d.table().iloc[0]
    prof = d.clip_profile("pi")
    w = t / p
    assert prof.max_weight.tolist() == [1.0, 2.0]  # max weight 2: levels 1 and 2 (no clip)
    n = len(r)
    for _, level in prof.iterrows():
        wc = np.minimum(w, level.max_weight)
        prod = wc * (r - lo)
        iv = bottou_interval(
            wc.mean(),
            wc.var(ddof=1),
            prod.mean(),
            prod.var(ddof=1),
            n,
            max_weight=level.max_weight,
            reward_range=(lo, hi),
            confidence_level=0.9,
            outer="bernstein",
        )
        assert (level.ci_low, level.ci_high) == pytest.approx((iv.low, iv.high), rel=1e-9)
        assert level.clipped_share == pytest.approx((w > level.max_weight).mean())
        assert level.clipped_weight_share == pytest.approx(w[w > level.max_weight].sum() / w.sum())
        width = iv.high - iv.low
        assert level.coverage_width == pytest.approx(min((hi - lo) * max(0, 1 - wc.mean()), width))
    best = prof[prof.narrowest].iloc[0]
    assert best.width == prof.width.min()
    assert row["clip_rule"] == "narrowest interval"
    assert row["max_weight"] == best.max_weight == row["verdict_max_weight"]
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((best.ci_low, best.ci_high))
    assert d.interval("pi").low == row["ci_low"]
    width = row["ci_high"] - row["ci_low"]
    assert row["sampling_width"] + row["coverage_width"] == pytest.approx(width)


@pytest.mark.parametrize("sampling", [False, True])
def test_a_clip_profile_whose_squares_overflow_names_the_statistic(sampling):
    # rewards near 3e152: the squared sums of the profile overflow, and the error says which
    # statistic is not a float64 number (not an IndexError from a profile of NaN widths)
    rng = np.random.default_rng(0)
    n = 2000
    r = rng.uniform(0.0, 3e152, n)
    p = rng.uniform(0.05, 1.0, n)
    t = rng.uniform(0.0, 1.0, n)
    kwargs = {"sampling_weight": rng.uniform(0.5, 2.0, n)} if sampling else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValidationError, match="variance"):
            diagnose_arrays(r, p, t, reward_range=(0.0, 3e152), **kwargs)


def test_outer_inner_split_with_clip_level_uses_bottou_interval():
    rng = np.random.default_rng(5)
    n = 4000
    data = bandit(n, rng, logger="tiny")
    d = quiet(
        data["reward"],
        data["p"],
        data["pe"],
        policy_names=["greedy"],
        reward_range=(0, 1),
        max_weight=20.0,
    )
    row = d.table().iloc[0]
    wc = np.minimum(data["pe"] / data["p"], 20.0)
    prod = wc * data["reward"]
    iv = bottou_interval(
        wc.mean(),
        wc.var(ddof=1),
        prod.mean(),
        prod.var(ddof=1),
        n,
        max_weight=20.0,
        reward_range=(0, 1),
        outer="bernstein",
    )
    assert d.interval("greedy") == pytest.approx(iv)
    # clipped and unsupported mass: 1 - mean(min(w, R)) in reward units (M = 1)
    assert row["coverage_width"] == pytest.approx(min(1 - wc.mean(), iv.high - iv.low))
    assert row["clipped_share"] == pytest.approx((data["pe"] / data["p"] > 20).mean())


def test_verdicts_follow_the_documented_rule():
    rng = np.random.default_rng(2)
    gap = bandit(20_000, rng, logger="gap")
    full = bandit(2_000, rng, logger="uniform")
    dg = quiet(gap["reward"], gap["p"], gap["pe"], policy_names=["g"], reward_range=(0, 1))
    df = quiet(full["reward"], full["p"], full["pe"], policy_names=["g"], reward_range=(0, 1))
    rg, rf = dg.table().iloc[0], df.table().iloc[0]
    # 20 % of the target's mass is unsupported: coverage dominates
    assert rg["coverage_share"] >= 0.5 and rg["verdict"] == VERDICT_EXPLORE
    assert rf["coverage_share"] < 0.5 and rf["verdict"] == VERDICT_MORE_DATA
    assert rg["coverage_width"] == pytest.approx(1 - (gap["pe"] / gap["p"]).mean(), abs=1e-12)
    no_range = quiet(gap["reward"], gap["p"], gap["pe"], policy_names=["g"]).table().iloc[0]
    assert "reward_range" in no_range["verdict"]
    assert math.isnan(no_range["ci_low"])


@pytest.mark.slow
def test_outer_inner_interval_covers_the_true_value():
    rng = np.random.default_rng(11)
    reps, hits_clip, hits_free = 300, 0, 0
    for _ in range(reps):
        data = bandit(3000, rng, logger="tiny")
        d = quiet(
            data["reward"],
            data["p"],
            data["pe"],
            policy_names=["g"],
            reward_range=(0, 1),
            max_weight=50.0,
        )
        iv = d.interval("g")
        hits_clip += iv.low <= data["truth"] <= iv.high
        free = quiet(
            data["reward"], data["p"], data["pe"], policy_names=["g"], reward_range=(0, 1)
        ).interval("g")
        hits_free += free.low <= data["truth"] <= free.high
    assert hits_clip / reps >= 0.95
    # normal margins: asymptotic; allow three binomial standard errors below 0.95
    assert hits_free / reps >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / reps)


# --------------------------------------------------------------------------------------------
# planted gaps and bugs
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("logger", ["gap", "tiny"])
def test_planted_gap_is_reported(logger):
    rng = np.random.default_rng(7)
    data = bandit(20_000, rng, logger=logger)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        d = diagnose_arrays(
            data["reward"],
            data["p"],
            data["pe"],
            policy_names=["greedy"],
            segments={"user": data["user"], "x": data["x"]},
        )
    messages = [str(c.message) for c in caught if issubclass(c.category, OverlapWarning)]
    assert any("2 segment gaps" in m for m in messages)
    assert tuple(messages) == d.notes
    seg = d.segments()
    flagged = seg[seg.gap]
    first_x_bin = seg[seg.column == "x"].segment.iloc[0]  # x < 0.2 is segment new
    assert set(zip(flagged.column, flagged.segment)) == {("user", "new"), ("x", first_x_bin)}
    reason = flagged[flagged.column == "user"].reason.iloc[0]
    assert reason.startswith("candidate greedy puts 20% of its mass on segment user=new")
    assert "effective sample" in reason
    assert not seg[(seg.column == "user") & (seg.segment == "old")].gap.iloc[0]
    assert d.table().iloc[0]["gaps"] == 2


def test_no_gap_and_no_warning_under_uniform_full_support():
    rng = np.random.default_rng(8)
    data = bandit(20_000, rng, logger="uniform")
    t = np.column_stack([data["pe"], np.full(len(data["p"]), 0.2)])  # greedy and uniform targets
    with warnings.catch_warnings():
        warnings.simplefilter("error", OverlapWarning)
        d = diagnose_arrays(
            data["reward"],
            data["p"],
            t,
            policy_names=["greedy", "uniform"],
            segments={"user": data["user"], "x": data["x"]},
            action=data["action"],
            reward_range=(0, 1),
        )
    assert not d.segments().gap.any()
    assert (d.table().propensity_check == "ok").all()
    assert d.notes == ()
    assert "no segment gaps" in d.summary()


@pytest.mark.parametrize(
    ("bug", "expected"),
    [("wrong_action", "high"), ("scaled_down", "high"), ("scaled_up", "low")],
)
def test_planted_propensity_bug_is_flagged(bug, expected):
    rng = np.random.default_rng(9)
    n, k = 20_000, 5
    data = bandit(n, rng, logger="skewed", k=k)
    p = data["p"].copy()
    rows = np.arange(n)
    if bug == "wrong_action":  # the logger wrote the propensity of the next action
        p = data["pb"][rows, (data["action"] + 1) % k]
    elif bug == "scaled_down":
        p = p * 0.8
    else:
        p = np.minimum(p * 1.25, 1.0)
    target = np.column_stack([data["pe"], np.full(n, 1.0 / k)])
    with pytest.warns(OverlapWarning, match="mean importance weight"):
        d = diagnose_arrays(data["reward"], p, target, policy_names=["greedy", "uniform"])
    checks = d.table().set_index("policy")["propensity_check"]
    assert expected in set(checks)
    # the summary wraps at 88 characters: read it as running text
    assert "weighting estimates are biased" in " ".join(d.summary().split())
    clean = quiet(data["reward"], data["p"], target, policy_names=["greedy", "uniform"])
    assert (clean.table().propensity_check == "ok").all()


def test_low_ess_warns():
    rng = np.random.default_rng(4)
    n = 5000
    p = np.full(n, 0.001)
    t = np.zeros(n)
    t[:3] = 1.0  # three rows carry everything: ESS 3 = 0.06 % of the rows
    with pytest.warns(OverlapWarning, match=r"effective sample size 3\.0 is 0\.06% of n=5000"):
        diagnose_arrays(rng.random(n), p, t, policy_names=["rare"])


# --------------------------------------------------------------------------------------------
# support deficiency from distributions
# --------------------------------------------------------------------------------------------
def test_support_deficiency_from_distributions_by_hand():
    # 3 rows, 3 actions; logger never plays action 2 in row 0 and gives 1e-5 to action 1 in row 1
    logging = sp.csr_array(np.array([[0.5, 0.5, 0.0], [0.99999, 1e-5, 0.0], [0.2, 0.3, 0.5]]))
    target = sp.csr_array(np.array([[0.5, 0.0, 0.5], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]))
    action = np.array([0, 0, 2])
    p = logging.toarray()[np.arange(3), action]
    t = target.toarray()[np.arange(3), action]
    with pytest.warns(OverlapWarning, match="on actions the logger plays with probability"):
        d = diagnose_arrays(
            np.array([1.0, 0.0, 1.0]),
            p,
            t,
            policy_names=["pi"],
            action=action,
            target_distributions={"pi": target},
            logging_distribution=logging,
        )
    row = d.table().iloc[0]
    # per-row deficiency (floor 1e-4): 0.5, 1.0, 0 -> mean 0.5
    np.testing.assert_allclose(d.unsupported_mass("pi"), [0.5, 1.0, 0.0])
    assert row["unsupported_mass"] == pytest.approx(0.5)
    # expected mean weight uses exact zeros only: 1 - (0.5 + 0 + 0) / 3
    assert row["mean_weight_expected"] == pytest.approx(1 - 0.5 / 3)
    cm = d.coverage_matrix("pi", value="target_mass")
    np.testing.assert_allclose(cm.to_numpy(), [[0.5 / 3, 1 / 3, 1.5 / 3]])
    lm = d.coverage_matrix("pi", value="logging_mass")
    np.testing.assert_allclose(lm.to_numpy().ravel(), logging.toarray().sum(axis=0) / 3)
    assert SUPPORT_FLOOR == 1e-4


def test_support_deficiency_flags_segment():
    rng = np.random.default_rng(12)
    data = bandit(8000, rng, logger="gap", k=4)
    n = len(data["p"])
    logging = sp.csr_array(data["pb"])
    target = sp.csr_array(data["pe_table"])
    with pytest.warns(OverlapWarning):
        d = diagnose_arrays(
            data["reward"],
            data["p"],
            data["pe"],
            policy_names=["g"],
            segments={"user": data["user"]},
            action=data["action"],
            target_distributions={"g": target},
            logging_distribution=logging,
        )
    row = d.table().iloc[0]
    assert row["unsupported_mass"] == pytest.approx((data["user"] == "new").mean())
    # with the unsupported mass known, the mean weight is as expected: no propensity alarm
    assert row["propensity_check"] == "ok"
    seg = d.segments().set_index("segment")
    assert seg.loc["new", "unsupported_share"] == pytest.approx(1.0)
    assert seg.loc["old", "unsupported_share"] == pytest.approx(0.0)
    assert "probability <= 0.0001" in seg.loc["new", "reason"]
    cm = d.coverage_matrix("g", by="user")
    assert cm.loc["new", 0] == pytest.approx((data["user"] == "new").sum() / n)
    assert d.coverage_matrix("g", by="user", value="logging_mass").loc["new", 0] == 0.0


# --------------------------------------------------------------------------------------------
# exploration plan
# --------------------------------------------------------------------------------------------
def simulated_widths(eps: float, scope: str, m: int, reps: int, rng) -> np.ndarray:
    z = stats.norm.ppf(0.975)
    widths = np.empty(reps)
    for i in range(reps):
        new = bandit(m, rng, logger="gap", explore=eps, scope=scope)
        terms = new["pe"] / new["p"] * new["reward"]
        widths[i] = 2 * z * terms.std(ddof=1) / math.sqrt(m)
    return widths


def test_exploration_plan_reaches_width_in_simulation():
    rng = np.random.default_rng(21)
    data = bandit(50_000, rng, logger="gap")
    target_width, new_rows = 0.06, 10_000
    d = quiet(
        data["reward"],
        data["p"],
        data["pe"],
        policy_names=["greedy"],
        segments={"user": data["user"]},
        reward_range=(0, 1),
        target_width=target_width,
        new_rows=new_rows,
    )
    plan = d.plan()
    assert list(plan.column) == ["all", "user"]
    assert list(plan.segment) == ["all", "new"]
    assert plan.feasible.all()
    for _, row in plan.iterrows():
        eps = row["exploration_share"]
        assert 0 < eps < 1
        assert row["predicted_width"] == pytest.approx(target_width, rel=1e-6)
        scope = "all" if row["column"] == "all" else "new"
        widths = simulated_widths(eps, scope, new_rows, 40, rng)
        # the plan reaches the width (it bounds unexplored rewards by the range, so it may be
        # conservative, but not grossly so)
        assert np.quantile(widths, 0.9) <= target_width
        assert widths.mean() >= 0.6 * target_width
        # and exploring half as much does not reach it: the share is close to the minimum
        assert simulated_widths(eps / 2, scope, new_rows, 10, rng).mean() > target_width
    as_json = d.to_dict()["policies"][0]["plan"]
    assert as_json[1]["segment"] == "new" and as_json[1]["feasible"] is True


def test_plan_without_gap_is_exact_and_infeasible_reports_rows():
    rng = np.random.default_rng(22)
    data = bandit(40_000, rng, logger="uniform")
    d = quiet(data["reward"], data["p"], data["pe"], policy_names=["g"], reward_range=(0, 1))
    w = data["pe"] / data["p"]
    terms = w * data["reward"]
    # with full support and a loose target, no exploration is needed; the predicted width is
    # the normal width computed from the second moment minus the squared lower bound
    plan = d.plan(target_width=0.2, new_rows=1000)
    assert plan.exploration_share.iloc[0] == 0.0
    iv = d.interval("g")
    v = min(max(terms.mean(), iv.low), iv.high)  # the IPS value, kept in the Bottou interval
    var = (terms**2).mean() - v**2
    z = stats.norm.ppf(0.975)
    assert plan.predicted_width.iloc[0] == pytest.approx(2 * z * math.sqrt(var / 1000))
    tight = d.plan(target_width=0.001, new_rows=1000)
    assert not tight.feasible.iloc[0]
    assert tight.rows_needed.iloc[0] > 1000
    assert "new rows" in tight.reason.iloc[0]


# --------------------------------------------------------------------------------------------
# segments: binning, popularity, coverage matrix
# --------------------------------------------------------------------------------------------
def test_numeric_columns_are_binned_and_missing_values_kept():
    rng = np.random.default_rng(13)
    n = 1000
    x = rng.normal(size=n)
    x[:7] = np.nan
    small_int = rng.integers(10, 13, n)
    d = quiet(
        rng.random(n),
        np.full(n, 0.5),
        np.full(n, 0.5),
        segments={"x": x, "k": small_int, "flag": rng.random(n) < 0.5},
    )
    seg = d.segments()
    xs = seg[seg.column == "x"]
    assert len(xs) == N_QUANTILE_BINS + 1
    assert xs.segment.iloc[-1] == "<missing>" and xs.rows.iloc[-1] == 7
    assert xs.rows.sum() == n
    assert list(seg[seg.column == "k"].segment) == ["10", "11", "12"]
    assert list(seg[seg.column == "flag"].segment) == ["False", "True"]


def test_a_segment_column_of_nulls_only_is_one_missing_segment():
    """A column whose Arrow type is null (every value missing) is one ``<missing>`` segment;
    pandas refused it as categories (a ValueError) before."""
    rng = np.random.default_rng(14)
    n = 300
    frame = pd.DataFrame(
        {
            "action": rng.integers(0, 2, n),
            "propensity": 0.5,
            "reward": rng.random(n),
            "target__a": rng.random(n),
            "seg": pd.Series([None] * n, dtype=object),
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = diagnose(frame, by="seg")
    seg = d.segments()
    assert list(seg.segment) == ["<missing>"] and list(seg.rows) == [n]


def test_popularity_buckets_for_large_catalogs():
    rng = np.random.default_rng(14)
    n, k = 20_000, 200
    pop = 1.0 / np.arange(1, k + 1)
    pop /= pop.sum()
    a = rng.choice(k, n, p=pop)
    p = pop[a]
    t = np.where(a >= 100, 1.0 / 100, 0.0)  # the candidate only recommends the tail items
    d = quiet(rng.random(n), p, t, policy_names=["tail"], action=a)
    seg = d.segments()
    assert set(seg.column) == {"action_popularity"}
    assert list(seg.segment) == ["head", "torso", "tail", "long_tail"]
    share = seg.set_index("segment").target_mass_share
    assert share["head"] == 0.0 and share[["tail", "long_tail"]].sum() > 0.5
    cm = d.coverage_matrix("tail", value="rows")
    assert list(cm.columns) == ["head", "torso", "tail", "long_tail"]
    assert cm.to_numpy().sum() == n


def test_coverage_matrix_without_distributions_uses_weights():
    d = quiet(
        R, P, T, policy_names=["u", "v"], segments={"seg": SEG}, action=np.array([0, 1, 0, 1, 2, 2])
    )
    w = hand_weights()[:, 0]
    cm = d.coverage_matrix("u")
    assert cm.loc["a", 0] == pytest.approx(w[0] / 6)
    assert cm.loc["b", 1] == pytest.approx(w[3] / 6)
    assert cm.loc["c", 2] == pytest.approx(w[5] / 6)
    assert cm.loc["c", 0] == 0.0
    ess = d.coverage_matrix("u", value="ess")
    assert ess.loc["b", 2] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="`value` must be one of"):
        d.coverage_matrix("u", value="mass")


# --------------------------------------------------------------------------------------------
# export
# --------------------------------------------------------------------------------------------
def test_to_dict_is_json_ready_and_carries_gaps():
    rng = np.random.default_rng(15)
    data = bandit(6000, rng, logger="gap")
    d = quiet(
        data["reward"],
        data["p"],
        data["pe"],
        policy_names=["g"],
        segments={"user": data["user"]},
        reward_range=(0, 1),
        target_width=0.1,
        new_rows=5000,
    )
    doc = json.loads(json.dumps(d.to_dict(), allow_nan=False))
    pol = doc["policies"][0]
    assert pol["policy"] == "g" and pol["verdict"] == VERDICT_EXPLORE
    segs = {s["segment"]: s for s in pol["segments"]}
    assert segs["new"]["gap"] is True and "user=new" in segs["new"]["reason"]
    assert segs["old"]["gap"] is False and segs["old"]["reason"] == ""
    assert pol["unsupported_mass"] is None  # not computed: no distributions given
    assert doc["thresholds"]["gap_min_ess"] == GAP_MIN_ESS
    text = d.summary()
    assert "gap: candidate g puts 20% of its mass on segment user=new" in text
    assert "plan: on all traffic" in text
    assert "Diagnostics(n=6,000" in repr(d)


def test_float32_inputs_accumulate_in_float64():
    rng = np.random.default_rng(16)
    n = 50_000
    p = rng.uniform(0.05, 1, n)
    t = rng.uniform(0, 1, (n, 2))
    r = rng.random(n)
    a = quiet(r, p, t).table()
    b = quiet(r.astype(np.float32), p.astype(np.float32), t.astype(np.float32)).table()
    for col in ("ess", "mean_weight", "kl_divergence", "chi2_divergence"):
        np.testing.assert_allclose(a[col], b[col], rtol=1e-6)


@settings(deadline=None, derandomize=True, database=None, max_examples=40)
@given(
    w_p=arrays(np.float64, 30, elements=st.floats(1e-3, 1.0)),
    w_t=arrays(np.float64, 30, elements=st.floats(0.0, 1.0)),
    seed=st.integers(0, 1000),
)
def test_properties_ess_bounds_and_permutation_invariance(w_p, w_t, seed):
    r = np.linspace(0, 1, 30)
    seg = np.arange(30) % 3
    a = quiet(r, w_p, w_t, segments={"s": seg})
    ess = a.table().ess.iloc[0]
    if w_t.sum() > 0:
        assert 1.0 - 1e-9 <= ess <= 30 + 1e-9
    perm = np.random.default_rng(seed).permutation(30)
    b = quiet(r[perm], w_p[perm], w_t[perm], segments={"s": seg[perm]})
    pd.testing.assert_frame_equal(a.table(), b.table(), check_exact=False, rtol=1e-9)
    pd.testing.assert_frame_equal(a.segments(), b.segments(), check_exact=False, rtol=1e-9)


# --------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (
            {"logging_propensity": np.array([0.5, 0.0, 0.5])},
            ValidationError,
            r"`logging_propensity` must be in \(0, 1\]; 1 rows are not \(first at row 1",
        ),
        (
            {"target_propensity": np.array([0.5, 1.5, 0.5])},
            ValidationError,
            r"`target_propensity` must be in \[0, 1\].*1 rows are not \(first at row 1\)",
        ),
        (
            {"reward": np.array([1.0, np.nan, 0.0])},
            ValidationError,
            r"`reward` must be finite; 1 rows are NaN or infinite \(first at row 1\)",
        ),
        (
            {"reward": np.array([1.0, 0.0])},
            ValidationError,
            r"`reward` has 2 rows but `logging_propensity` has 3",
        ),
        (
            {"reward": np.array([1.0, 2.0, 0.0]), "reward_range": (0, 1)},
            ValidationError,
            r"1 rows outside reward_range=\(0, 1\) \(first at row 1: 2.0\)",
        ),
        (
            {"segments": {"s": [1, 2]}},
            ValidationError,
            r"segment column 's' must be one value per logged row: expected shape \(3,\)",
        ),
        ({"policy_names": ["a", "b"]}, PolicyError, r"`policy_names` must give 1 distinct"),
        (
            {"segments": {"id": np.array(["u1", "u2", "u3"])}, "n_max": 2},
            ValidationError,
            r"segment column 'id' has 3 distinct values; a segment column may have at most 2",
        ),
        ({"confidence_level": 95}, ParameterError, r"`confidence_level` must be in \(0, 1\)"),
        ({"max_weight": 0}, ParameterError, r"`max_weight` must be a positive finite number"),
        ({"reward_range": (1, 0)}, ParameterError, r"finite with low < high"),
        ({"target_width": 0.1}, ParameterError, r"pass both `target_width` and `new_rows`"),
        ({"target_width": 0.1, "new_rows": 100}, MissingBoundsError, r"reward_range=\(low, high\)"),
        (
            {"target_distributions": {"policy_0": sp.csr_array(np.eye(3))}},
            ValidationError,
            r"need both `target_distributions` and `logging_distribution`",
        ),
        (
            {
                "target_distributions": {"x": sp.csr_array(np.eye(3))},
                "logging_distribution": sp.csr_array(np.eye(3)),
            },
            PolicyError,
            r"no distribution for \['policy_0'\]",
        ),
    ],
)
def test_errors_say_what_where_and_how(kwargs, error, match):
    args = {
        "reward": np.array([1.0, 0.0, 1.0]),
        "logging_propensity": np.array([0.5, 0.5, 0.5]),
        "target_propensity": np.array([1.0, 0.0, 1.0]),
    }
    options = {k: v for k, v in kwargs.items() if k not in args and k != "n_max"}
    args.update({k: v for k, v in kwargs.items() if k in args})
    with pytest.MonkeyPatch.context() as mp:
        if "n_max" in kwargs:
            mp.setattr("ope.diagnostics.segments.MAX_SEGMENTS", kwargs["n_max"])
        with pytest.raises(error, match=match):
            quiet(args["reward"], args["logging_propensity"], args["target_propensity"], **options)


def test_result_errors():
    d = quiet(R, P, T, policy_names=["u", "v"], segments={"seg": SEG})
    with pytest.raises(PolicyError, match=r"unknown policy 'w'; these diagnostics have: u, v"):
        d.weight_histogram("w")
    with pytest.raises(MissingBoundsError, match="reward_range"):
        d.interval("u")
    with pytest.raises(ValueError, match="needs `target_width`"):
        d.plan()
    with pytest.raises(MissingBoundsError, match="a priori reward bounds"):
        d.plan(target_width=0.1, new_rows=100)
    with pytest.raises(ValueError, match="unknown segment column 'zz'"):
        d.coverage_matrix("u", by="zz")
    with pytest.raises(ValidationError, match="needs the logged actions"):
        d.coverage_matrix("u")
    with pytest.raises(ValidationError, match="per-row support needs the full distributions"):
        d.unsupported_mass("u")


# --------------------------------------------------------------------------------------------
# logs-level entry point
# --------------------------------------------------------------------------------------------
def make_logs(table: pa.Table) -> BanditLogs:
    return BanditLogs(table, ValidationReport("<Table>", table.num_rows, table.num_rows))


def test_diagnose_on_logs_matches_arrays():
    rng = np.random.default_rng(17)
    data = bandit(5000, rng, logger="gap")
    table = pa.table(
        {
            "action": data["action"].astype(np.int64),
            "propensity": data["p"],
            "reward": data["reward"],
            "target__greedy": data["pe"],
            "target__uniform": np.full(5000, 0.2),
            "user": data["user"],
            "x": data["x"],
        }
    )
    with pytest.warns(OverlapWarning):
        d = diagnose(make_logs(table), by=["user", "x"], reward_range=(0, 1))
    assert d.policies == ["greedy", "uniform"]
    both = np.column_stack([data["pe"], np.full(5000, 0.2)])
    arrays_version = quiet(
        data["reward"],
        data["p"],
        both,
        policy_names=["greedy", "uniform"],
        segments={"user": data["user"], "x": data["x"]},
        action=data["action"],
        reward_range=(0, 1),
    )
    pd.testing.assert_frame_equal(d.table(), arrays_version.table())
    pd.testing.assert_frame_equal(d.segments(), arrays_version.segments())
    with pytest.raises(
        SchemaError, match=r"cannot segment .* by \['country'\]: column 'country' is not in"
    ):
        diagnose(make_logs(table), by="country")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OverlapWarning)
        only = diagnose(make_logs(table), ["uniform"], by="user")
    assert only.policies == ["uniform"]


def test_diagnose_with_policy_objects_and_inconsistent_propensity():
    from ope.policies import UniformPolicy

    table = pa.table(
        {
            "action": [1, 2, 1, 3],
            "propensity": [0.5, 0.5, 0.9, 1.0],  # row 2 disagrees with its logging distribution
            "reward": [1.0, 0.0, 1.0, 0.0],
            "candidates": [[1, 2], [1, 2], [1, 2, 3], [3]],
            "logging_distribution": [[0.5, 0.5], [0.5, 0.5], [0.5, 0.5, 0.0], [1.0]],
        }
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        d = diagnose(make_logs(table), {"uniform": UniformPolicy()})
    assert any(
        re.search(
            r"disagrees with `logging_distribution` .* 1 rows \(first at row 2: 0.9 vs "
            r"0.5\)",
            str(c.message),
        )
        for c in caught
    )
    # row 2: the uniform candidate puts 1/3 on action 3, which the logger never plays
    np.testing.assert_allclose(d.unsupported_mass("uniform"), [0, 0, 1 / 3, 0])


def test_diagnose_reads_logged_distributions():
    # string actions, candidate sets and distributions logged per row
    table = pa.table(
        {
            "action": ["a", "b", "a", "c"],
            "propensity": [0.5, 0.5, 0.5, 1.0],
            "reward": [1.0, 0.0, 1.0, 0.0],
            "candidates": [["a", "b"], ["a", "b"], ["a", "b"], ["c"]],
            "logging_distribution": [[0.5, 0.5], [0.5, 0.5], [0.5, 0.5], [1.0]],
            "target__pi": [1.0, 0.0, 1.0, 1.0],
            "target_dist__pi": [[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [1.0]],
            "user": ["x", "x", "y", "y"],
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OverlapWarning)
        d = diagnose(make_logs(table), by="user")
    row = d.table().iloc[0]
    assert row["unsupported_mass"] == pytest.approx(0.0)
    cm = d.coverage_matrix("pi")
    assert list(cm.columns) == ["a", "b", "c"]
    np.testing.assert_allclose(cm.to_numpy(), [[0.5, 0.0, 0.0], [0.25, 0.0, 0.25]])


def test_docstring_examples_run():
    import doctest
    import importlib
    import pkgutil

    import ope.diagnostics

    modules = [ope.diagnostics] + [
        importlib.import_module(f"ope.diagnostics.{m.name}")
        for m in pkgutil.iter_modules(ope.diagnostics.__path__)
    ]
    attempted = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", OverlapWarning)  # the examples are clean data
        for module in modules:
            result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
            assert result.failed == 0, module.__name__
            attempted += result.attempted
    assert attempted >= 15


def test_mean_weight_rule_is_the_estimators_rule():
    # mean weight 1.011 at z ~ 7: IPS().estimate warns that weighting estimates are biased,
    # and the diagnostics say the same (one rule, not a tolerance of their own)
    from ope.estimators import IPS

    rng = np.random.default_rng(8)
    n = 150_000
    p = rng.uniform(0.2, 0.45, n)
    t = p * rng.uniform(0.0, 2.022, n)
    t *= 1.011 / (t / p).mean()
    r = (rng.random(n) < 0.3).astype(float)
    with pytest.warns(OverlapWarning):
        estimate = IPS().estimate(reward=r, logging_propensity=p, target_propensity=t)
    assert any("mean importance weight" in note for note in estimate.notes)
    with pytest.warns(OverlapWarning, match="mean importance weight is 1.011"):
        d = diagnose_arrays(r, p, t, policy_names=["pi"])
    row = d.table().iloc[0]
    assert row["mean_weight"] == pytest.approx(1.011, rel=1e-12)
    assert 7.0 < row["mean_weight_z"] < 7.5
    assert row["propensity_check"] == "high"
    # the same kernel: the diagnostics' mean weight is the estimator's, bit for bit
    assert row["mean_weight"] == pytest.approx(float(np.mean(t / p)), rel=1e-14)
    # below the shared tolerance (1%) the check stays quiet however large z is
    t_small = t * (1.009 / 1.011)
    quiet_row = quiet(r, p, t_small, policy_names=["pi"]).table().iloc[0]
    assert abs(quiet_row["mean_weight_z"]) > 4 and quiet_row["propensity_check"] == "ok"


def test_diagnostics_follow_the_result_contract():
    from ope.results import Result

    d = quiet(
        R,
        P,
        T,
        policy_names=["<b>u</b>", "v"],
        segments={"seg": SEG},
        max_weight=2.5,
        reward_range=(0, 1),
    )
    assert isinstance(d, Result)
    assert isinstance(d.notes, tuple)
    assert [r.policy for r in d.rows] == ["<b>u</b>", "v"]
    assert list(d.table().columns) == [f.name for f in dataclasses.fields(PolicyRow)]
    assert list(d.segments().columns) == [
        f.name for f in dataclasses.fields(SegmentRow) if f.metadata.get("column", True)
    ]
    assert "clip_level" not in d.table().columns
    assert d.to_dict()["policies"][0]["max_weight"] == 2.5
    html = d._repr_html_()
    assert "<b>u</b>" not in html and "&lt;b&gt;u&lt;/b&gt;" in html
    assert d.summary().startswith("Overlap diagnostics: 6 logged rows, 2 candidate policies")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"confidence_level": "0.95"}, "`confidence_level` must be a number"),
        ({"max_weight": "10"}, "`max_weight` must be a number"),
        ({"reward_range": "01"}, "`reward_range` must be a pair"),
        (
            {"target_width": 0.1, "new_rows": 10.5, "reward_range": (0, 1)},
            "`new_rows` must be a whole number >= 2",
        ),
    ],
)
def test_bad_arguments_raise_parameter_error(kwargs, match):
    with pytest.raises(ParameterError, match=match):
        quiet(R, P, T, **kwargs)
    d = quiet(R, P, T, segments={"seg": SEG}, action=np.arange(6) % 3)
    with pytest.raises(ParameterError, match="`value` must be one of"):
        d.coverage_matrix("policy_0", value="mass")


# ---- text summary: numbers by ope._format, wrapped, each warning stated once ----------------
def _miscalibrated(n=4000, seed=81):
    """Uniform logging over 4 actions logged with propensity 0.2 instead of 0.25 (mean weight
    1.25 for ``greedy``), and a candidate ``rare`` acting on 1 row in 200 (ESS below 1%)."""
    rng = np.random.default_rng(seed)
    action = rng.integers(0, 4, n)
    rare = (np.arange(n) % 200 == 0).astype(float)
    target = np.column_stack([(action == 0).astype(float), rare * (action == 1)])
    return rng.random(n), np.full(n, 0.2), target


def test_summary_refers_to_each_warning_note_instead_of_restating_it():
    reward, p, target = _miscalibrated()
    d = quiet(reward, p, target, policy_names=["greedy", "rare"], reward_range=(0, 1))
    text = d.summary()
    notes = d.notes
    checks = d.table().set_index("policy")["propensity_check"]
    assert checks["greedy"] == "high"
    mean_k = next(i for i, n in enumerate(notes, 1) if n.startswith("greedy: mean importance"))
    ess_k = next(i for i, n in enumerate(notes, 1) if n.startswith("rare: effective sample"))
    assert f"! mean weight too high for the propensities: see note [{mean_k}]" in text
    assert f"see note [{ess_k}]" in text.split("\nrare\n")[1].split("\n\n")[0]
    # the z-score and the expected value are stated once per flagged policy: in its note
    flagged = sum(n.split(": ", 1)[1].startswith("mean importance weight") for n in notes)
    assert flagged == int((checks != "ok").sum()) >= 1
    running = " ".join(text.split())
    assert running.count("standard errors from its expected value") == flagged
    assert "weighting estimates are biased" in running
    # every line fits the text width, the notes are numbered in order
    assert max(len(line) for line in text.splitlines()) <= 88
    assert re.findall(r"^  \[(\d+)\] ", text, flags=re.M) == [
        str(i) for i in range(1, len(notes) + 1)
    ]


def test_summary_formats_numbers_like_the_other_results():
    reward, p, target = _miscalibrated()
    d = quiet(reward, p, target, policy_names=["greedy", "rare"], reward_range=(0, 1))
    row = d.table().set_index("policy").loc["greedy"]
    line = next(
        x
        for x in d.summary().splitlines()
        if x.startswith("  ESS ") and "1,000" not in x and "mean weight" in x
    )
    # the mean weight to the precision of its standard error (2 significant digits of it)
    se = row["mean_weight_se"]
    decimals = max(0, 1 - math.floor(math.log10(se)))
    assert f"mean weight {row['mean_weight']:.{decimals}f} +/- {se:.{decimals}f}" in line
    assert f"max weight {row['weight_max']:g};" in line  # whole weights read whole (5, not 5.000)


# ---- diagnose accepts what evaluate accepts; segment columns are checked first --------------
def _frame(n=100):
    return pd.DataFrame(
        {
            "action": [0, 1] * (n // 2),
            "propensity": [0.5] * n,
            "reward": [1.0, 0.0] * (n // 2),
            "target__a": [1.0, 0.0] * (n // 2),
            "tags": [[1, 2], [3]] * (n // 2),
            "country": ["fr", "de"] * (n // 2),
        }
    )


def test_logs_to_diagnose_reads_a_dataframe_as_evaluate_does():
    from ope.diagnostics._logs import logs_to_diagnose

    frame = _frame()
    logs = logs_to_diagnose(frame)
    assert isinstance(logs, BanditLogs) and logs.n == 100
    assert logs_to_diagnose(logs) is logs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = diagnose(logs, ["a"], by="country")
    assert d.table().loc[0, "ess"] == pytest.approx(50.0, rel=1e-12)


def test_segment_columns_rejects_a_list_column_by_name():
    from ope.diagnostics._logs import logs_to_diagnose, segment_columns

    logs = logs_to_diagnose(_frame())
    assert segment_columns(logs, "country") == ["country"]
    with pytest.raises(SchemaError, match="'tags'.*list"):
        segment_columns(logs, ["country", "tags"])


def test_diagnose_accepts_a_dataframe_like_evaluate():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = diagnose(_frame().drop(columns=["tags"]), ["a"])
    assert d.table().loc[0, "ess"] == pytest.approx(50.0, rel=1e-12)


def test_diagnose_rejects_a_list_segment_column_by_name():
    from ope.diagnostics._logs import logs_to_diagnose

    with pytest.raises(SchemaError, match="'tags'"):
        diagnose(logs_to_diagnose(_frame()), ["a"], by=["tags"])


# ---- the shared notes say which rule raised them ---------------------------------------------
def test_threshold_notes_name_their_rule_and_subject():
    from ope._format import note_key, number_notes
    from ope._thresholds import (
        ess_note,
        few_effective_rows_note,
        mean_weight_note,
        small_sample_note,
    )

    a = ess_note(553.2, 100_000, subject=("long_tail", "raw weights"))
    assert isinstance(a, str) and a.startswith("effective sample size 553.2 is 0.55% of n=100000")
    assert (a.rule, a.subject) == ("low_ess", ("long_tail", "raw weights"))
    assert mean_weight_note(0.68, -11.1).rule == "mean_weight_check"
    assert small_sample_note(20).rule == "small_sample"
    assert few_effective_rows_note(3.0, 0.1).rule == "few_effective_rows"
    # another wording of the same warning about the same weights is stated once ...
    from ope._format import Note

    b = Note(
        "effective sample size 553 is 0.55% of the 100,000 rows",
        rule="low_ess",
        subject=("long_tail", "raw weights"),
    )
    assert note_key(a) == note_key(b)
    assert number_notes([a, b])[0] == (a,)
    # ... and the clipped weights' note (another subject) is not
    c = ess_note(700.0, 100_000, subject=("long_tail", "clipped at 50"))
    assert len(number_notes([a, c])[0]) == 2


def test_equal_weights_with_a_rounding_spread_are_equal_weights():
    # blocks' sums leave equal weights a variance of ~1e-32: no spread, not a huge z-score
    from ope._thresholds import mean_weight_check

    assert mean_weight_check(4000, 0.9000000000000002, 4.9e-32) == ("low", -math.inf)
    assert mean_weight_check(4000, 1.0000000000000002, 4.9e-32) == ("ok", 0.0)
    status, z = mean_weight_check(4000, 0.9, 1e-4)  # a real spread keeps its z-score
    assert status == "low" and z == pytest.approx(-0.1 / math.sqrt(1e-4 / 4000))
