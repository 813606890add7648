"""Overlap diagnostics of rows with sampling (Horvitz-Thompson) weights (DSJSON ``pdrop``).

Unit weights give today's numbers bit for bit; integer weights give, for every population
quantity, the numbers of the rows repeated ``s_i`` times; a four-row case is checked by hand;
``ope evaluate`` / ``diagnose`` / ``report`` show the weighted diagnostics and say so.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import sparse

import ope
from ope.diagnostics import diagnose_arrays
from ope.exceptions import OverlapWarning, ValidationError

#: Tolerance of float comparisons between a weighted diagnosis and its repeated-rows twin
#: (sums of a few thousand terms in another order).
TOL = 1e-12

#: Point quantities of the policy table that must equal those of the repeated rows.
POINT_COLUMNS = (
    "mean_weight",
    "mean_weight_expected",
    "weight_max",
    "weight_q50",
    "weight_q90",
    "weight_q99",
    "weight_q999",
    "max_weight",
    "clipped_share",
    "clipped_weight_share",
    "kl_divergence",
    "chi2_divergence",
    "renyi2_divergence",
    "unsupported_mass",
    "clipped_value",
)
SEGMENT_POINT_COLUMNS = (
    "row_share",
    "target_mass_share",
    "mean_weight",
    "weight_max",
    "unsupported_share",
)


def _case(n: int = 600, seed: int = 3) -> dict:
    """Three actions; the logger never plays action 2 on segment 'b' (a support gap there)."""
    rng = np.random.default_rng(seed)
    seg = rng.integers(0, 2, n)
    logging = np.where(seg[:, None] == 1, [0.5, 0.5, 0.0], [0.4, 0.3, 0.3])
    target = np.tile([0.2, 0.3, 0.5], (n, 1))
    action = (rng.random(n)[:, None] > np.cumsum(logging, axis=1)).sum(axis=1)
    reward = rng.binomial(1, 0.2 + 0.25 * action).astype(float)
    rows = np.arange(n)
    return dict(
        reward=reward,
        propensity=logging[rows, action],
        target=np.c_[target[rows, action], logging[rows, action]],
        segments={"seg": np.array(["a", "b"])[seg]},
        action=action,
        tdist={"new": sparse.csr_array(target), "same": sparse.csr_array(logging)},
        ldist=sparse.csr_array(logging),
    )


def _diagnose(c: dict, idx: np.ndarray | None = None, s: np.ndarray | None = None, **kw):
    sel = slice(None) if idx is None else idx
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OverlapWarning)
        return diagnose_arrays(
            c["reward"][sel],
            c["propensity"][sel],
            c["target"][sel],
            policy_names=["new", "same"],
            segments={"seg": c["segments"]["seg"][sel]},
            action=c["action"][sel],
            target_distributions={k: v[sel] for k, v in c["tdist"].items()},
            logging_distribution=c["ldist"][sel],
            sampling_weight=s,
            **kw,
        )


SETTINGS = [
    dict(reward_range=(0.0, 1.0)),
    dict(reward_range=(0.0, 1.0), max_weight=1.5, target_width=0.05, new_rows=20_000),
    dict(),
]


@pytest.mark.parametrize("kw", SETTINGS)
def test_unit_weights_give_todays_numbers_bit_for_bit(kw) -> None:
    c = _case()
    plain, ones = _diagnose(c, **kw), _diagnose(c, s=np.ones(c["reward"].size), **kw)
    assert ones.sampling_weight is None and ones.notes == plain.notes
    assert ones.table().equals(plain.table())
    assert ones.segments().equals(plain.segments())
    for p in plain.policies:
        assert ones.weight_histogram(p).equals(plain.weight_histogram(p))
        assert ones.coverage_matrix(p).equals(plain.coverage_matrix(p))
        if "reward_range" in kw:
            assert ones.clip_profile(p).equals(plain.clip_profile(p))
    if "target_width" in kw:
        assert ones.plan().equals(plain.plan())
        assert ones.plan_actions().equals(plain.plan_actions())


def test_equal_weights_through_the_weighted_path_match_unweighted_point_numbers() -> None:
    """All weights 3: the weighted formulas (Hajek means, Kish ESS of s w over that of s)
    reduce to the unweighted ones; only the margins differ (normal instead of Bernstein)."""
    c = _case()
    kw = dict(reward_range=(0.0, 1.0), max_weight=1.5)
    plain, three = _diagnose(c, **kw), _diagnose(c, s=np.full(c["reward"].size, 3.0), **kw)
    assert three.sampling_weight == "sampling_weight"
    a, b = three.table(), plain.table()
    for col in (*POINT_COLUMNS, "ess_ratio", "mean_weight_se", "mean_weight_z"):
        np.testing.assert_allclose(a[col], b[col], rtol=TOL, atol=TOL, err_msg=col)
    np.testing.assert_allclose(a["ess"], b["ess"], rtol=TOL)  # Kish is scale-free
    sa, sb = three.segments(), plain.segments()
    for col in (*SEGMENT_POINT_COLUMNS, "ess", "variance_share"):
        np.testing.assert_allclose(sa[col], sb[col], rtol=TOL, atol=TOL, err_msg=col)
    assert (sa["gap"] == sb["gap"]).all()


@pytest.mark.parametrize("kw", SETTINGS[:2])
def test_integer_weights_equal_repeated_rows_for_every_point_quantity(kw) -> None:
    c = _case()
    s = np.random.default_rng(7).integers(1, 5, c["reward"].size).astype(float)
    weighted = _diagnose(c, s=s, **kw)
    repeated = _diagnose(c, idx=np.repeat(np.arange(s.size), s.astype(int)), **kw)
    a, b = weighted.table(), repeated.table()
    for col in POINT_COLUMNS:
        np.testing.assert_allclose(a[col], b[col], rtol=TOL, atol=TOL, err_msg=col)
    assert a["unsupported_mass"].iloc[0] > 0.05  # the support gap is seen, weighted
    assert list(a["verdict"]) == list(b["verdict"])
    sa, sb = weighted.segments(), repeated.segments()
    for col in SEGMENT_POINT_COLUMNS:
        np.testing.assert_allclose(sa[col], sb[col], rtol=TOL, atol=TOL, err_msg=col)
    assert list(sa["gap_kind"]) == list(sb["gap_kind"])
    for p in weighted.policies:
        ha, hb = weighted.weight_histogram(p), repeated.weight_histogram(p)
        for col in ("weight_low", "rows", "row_share", "target_mass"):
            np.testing.assert_allclose(ha[col], hb[col], rtol=TOL, atol=TOL, err_msg=col)
        for value in ("target_mass", "logging_mass", "rows"):
            np.testing.assert_allclose(
                weighted.coverage_matrix(p, value=value),
                repeated.coverage_matrix(p, value=value),
                rtol=TOL,
                atol=TOL,
            )
        pa, pb = weighted.clip_profile(p), repeated.clip_profile(p)
        for col in ("max_weight", "clipped_share", "clipped_weight_share", "clipped_value"):
            np.testing.assert_allclose(pa[col], pb[col], rtol=TOL, atol=TOL, err_msg=col)
    if "target_width" in kw:  # with unsupported mass the plan's value is only bounded
        assert weighted.plan()["feasible"].tolist() == repeated.plan()["feasible"].tolist()


def test_integer_weights_equal_repeated_rows_in_the_plan_under_full_support() -> None:
    """Under full support the plan subtracts the IPS value (inside its interval): a point
    quantity, so the weighted plan is the repeated rows' plan. With unsupported mass it
    subtracts the smallest square in the Bottou interval, whose margins count kept rows."""
    rng = np.random.default_rng(11)
    n = 800
    seg = rng.integers(0, 3, n)
    action = rng.integers(0, 3, n)
    target = np.where(seg[:, None] == 2, [0.9, 0.05, 0.05], [0.4, 0.3, 0.3])
    c = dict(
        reward=rng.binomial(1, 0.3 + 0.2 * (action == 0)).astype(float),
        propensity=np.full(n, 1 / 3),
        target=np.c_[target[np.arange(n), action], np.full(n, 1 / 3)],
        segments={"seg": seg},
        action=action,
        tdist={"new": sparse.csr_array(target), "same": sparse.csr_array(np.full((n, 3), 1 / 3))},
        ldist=sparse.csr_array(np.full((n, 3), 1 / 3)),
    )
    s = rng.integers(1, 4, n).astype(float)
    kw = dict(reward_range=(0.0, 1.0), target_width=0.02, new_rows=20_000)
    weighted = _diagnose(c, s=s, **kw)
    repeated = _diagnose(c, idx=np.repeat(np.arange(n), s.astype(int)), **kw)
    qa, qb = weighted.plan(), repeated.plan()
    assert qa["exploration_share"].iloc[0] > 0
    for col in ("exploration_share", "predicted_width", "exploration_rows"):
        np.testing.assert_allclose(qa[col], qb[col], rtol=1e-9, err_msg=col)
    xa, xb = weighted.plan_actions(), repeated.plan_actions()
    assert len(xa) > 0
    for col in ("target_mass", "logging_share", "planned_share", "extra_share", "variance_share"):
        np.testing.assert_allclose(xa[col], xb[col], rtol=1e-9, atol=1e-12, err_msg=col)


def test_a_four_row_case_by_hand() -> None:
    # w = t / p = (2, 0, 2, 1), s = (1, 2, 3, 4): S = 10, sum s w = 12, sum (s w)^2 = 56
    reward = np.array([1.0, 0.0, 1.0, 0.0])
    with pytest.warns(OverlapWarning, match="segment gaps"):  # ESS 1 and 1.9: tiny segments
        d = diagnose_arrays(
            reward,
            np.full(4, 0.5),
            np.array([1.0, 0.0, 1.0, 0.5]),
            policy_names=["c"],
            segments={"g": np.array([0, 0, 1, 1])},
            sampling_weight=np.array([1.0, 2.0, 3.0, 4.0]),
            max_weight=1.5,
            reward_range=(0.0, 1.0),
        )
    r = d.table().iloc[0]
    assert r["ess"] == pytest.approx(144 / 56, rel=TOL)
    assert r["ess_reference"] == pytest.approx(100 / 30, rel=TOL)  # Kish ESS of s
    assert r["ess_ratio"] == pytest.approx((144 / 56) / (100 / 30), rel=TOL)
    assert r["mean_weight"] == pytest.approx(1.2, rel=TOL)
    # sqrt(n / (n - 1) sum s^2 (w - 1.2)^2) / S with sum s^2 (w - 1.2)^2 = 12.8
    assert r["mean_weight_se"] == pytest.approx(math.sqrt(4 / 3 * 12.8) / 10, rel=TOL)
    # sorted w with cumulative s: 0 (2), 1 (6), 2 (10): the population [0,0,1,1,1,1,2,2,2,2]
    assert (r["weight_q50"], r["weight_q90"]) == (1.0, 2.0)
    assert r["clipped_share"] == pytest.approx(0.4, rel=TOL)  # (1 + 3) / 10
    assert r["clipped_weight_share"] == pytest.approx(8 / 12, rel=TOL)  # (2 + 6) / 12
    assert r["chi2_divergence"] == pytest.approx(20 / 10 - 1, rel=TOL)  # sum s w^2 = 20
    assert r["kl_divergence"] == pytest.approx(0.8 * math.log(2), rel=TOL)
    # clipped value: sum s min(w, 1.5) r / S = (1.5 + 4.5) / 10; clipped mass W = 10 / 10
    assert r["clipped_value"] == pytest.approx(0.6, rel=TOL)
    assert r["coverage_width"] == 0.0
    seg = d.segments()
    np.testing.assert_allclose(seg["row_share"], [0.3, 0.7], rtol=TOL)
    np.testing.assert_allclose(seg["target_mass_share"], [2 / 12, 10 / 12], rtol=TOL)
    np.testing.assert_allclose(seg["mean_weight"], [2 / 3, 10 / 7], rtol=TOL)
    np.testing.assert_allclose(seg["ess"], [1.0, 100 / 52], rtol=TOL)
    assert list(seg["rows"]) == [2, 2]
    hist = d.weight_histogram("c")
    assert hist["rows"].tolist()[0] == 2.0 and hist["row_share"].sum() == pytest.approx(1.0)
    assert "Horvitz-Thompson weighted" in d.notes[0] and "10 rows" in d.notes[0]
    assert "kept rows weighted by `sampling_weight`" in d.summary()


def test_bad_sampling_weights_are_refused_by_row() -> None:
    with pytest.raises(ValidationError, match=r"must be > 0; 1 rows are not \(first at row 1"):
        diagnose_arrays(
            np.ones(3), np.full(3, 0.5), np.full(3, 0.5), sampling_weight=np.array([1.0, 0.0, 2.0])
        )


def _cli(*argv: str) -> tuple[int, str]:
    from ope.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(list(argv))
    return code, out.getvalue()


@pytest.fixture
def weighted_logs(tmp_path):
    """Logs as the DSJSON importer writes them: ``weight = 1 / (1 - pdrop)``."""
    rng = np.random.default_rng(0)
    n = 1000
    action = rng.integers(0, 2, n)
    seg = rng.integers(0, 2, n)
    pdrop = np.where(seg == 1, 0.75, 0.0)
    df = pd.DataFrame(
        {
            "event_id": [f"e{i}" for i in range(n)],
            "action": action,
            "propensity": 0.5,
            "reward": rng.binomial(1, np.where(seg == 1, 0.6, 0.2)).astype(float),
            "seg": seg,
            "target__a": (action == 1).astype(float),
            "target__b": np.where(action == 1, 0.3, 0.7),
            "weight": 1.0 / (1.0 - pdrop),
        }
    )
    path = tmp_path / "logs.parquet"
    df.to_parquet(path)
    return path, df


def test_cli_evaluate_and_diagnose_show_weighted_diagnostics(weighted_logs) -> None:
    path, df = weighted_logs
    total = float(df.weight.sum())
    for cmd in ("evaluate", "diagnose"):
        code, text = _cli(cmd, str(path), "--by", "seg", "--reward-range", "0", "1")
        assert code == 0, text
        assert (
            "Overlap diagnostics: 1,000 kept rows weighted by `weight` (a population of about "
            in text
        )
        assert "of the sampling weights' ESS" in text
        assert "the diagnostics are Horvitz-Thompson weighted" in " ".join(text.split())
        code, out = _cli(cmd, str(path), "--by", "seg", "--reward-range", "0", "1", "--json")
        doc = json.loads(out)["diagnostics"]
        assert code == 0 and doc["sampling_weight"] == "weight"
        assert doc["population_rows"] == pytest.approx(total, rel=TOL)
    api = ope.diagnose(df, by="seg", reward_range=(0, 1))
    row = doc["policies"][0]
    assert row["mean_weight"] == pytest.approx(float(api.table()["mean_weight"].iloc[0]), rel=TOL)
    w = df["target__a"] / df["propensity"]
    assert row["mean_weight"] == pytest.approx(float((df.weight * w).sum() / total), rel=TOL)


def test_cli_report_html_has_the_weighted_diagnostics_section(weighted_logs, tmp_path) -> None:
    path, _ = weighted_logs
    out = tmp_path / "report.html"
    code, text = _cli(
        "report",
        str(path),
        "--by",
        "seg",
        "--reward-range",
        "0",
        "1",
        "--out",
        str(out),
        "--seed",
        "0",
    )
    assert code == 0, text
    html = out.read_text(encoding="utf-8")
    assert 'id="weighted-diagnostics"' in html
    assert (
        "Weighted diagnostics: the rows carry sampling weights (column <code>weight</code>" in html
    )
    assert "Sampling-weighted (column <code>weight</code>)" in html
    assert "the sampling weights&#x27; own ESS" in html


def test_cli_diagnose_reads_pdrop_from_dsjson(tmp_path) -> None:
    """``--format dsjson``: ``pdrop`` becomes ``weight = 1 / (1 - pdrop)`` and the diagnostics
    of the uniform candidate are weighted by it."""
    rng = np.random.default_rng(5)
    p = [0.6, 0.3, 0.1]
    lines, total = [], 0.0
    for i in range(300):  # a loop writing a test file
        k = int(rng.choice(3, p=p))
        event = {
            "_label_cost": -float(rng.random() < 0.3),
            "_label_probability": p[k],
            "_label_Action": k + 1,
            "_labelIndex": k,
            "EventId": f"e{i}",
            "a": [1, 2, 3],
            "p": p,
            "c": {"_multi": [{"x": 1}, {"x": 2}, {"x": 3}]},
        }
        if i % 3 == 0:
            event["pdrop"] = 0.5
        total += 1.0 / (1.0 - event.get("pdrop", 0.0))
        lines.append(json.dumps(event))
    path = tmp_path / "events.json"
    path.write_text("\n".join(lines) + "\n")
    code, out = _cli(
        "diagnose",
        str(path),
        "--format",
        "dsjson",
        "--policy",
        "u=uniform",
        "--reward-range",
        "0",
        "1",
        "--json",
    )
    assert code == 0, out
    doc = json.loads(out)["diagnostics"]
    assert doc["sampling_weight"] == "weight" and doc["population_rows"] == total == 400.0
    assert doc["policies"][0]["propensity_check"] == "ok"
    assert "Horvitz-Thompson weighted" in doc["notes"][0]


@pytest.mark.parametrize("scale", [1.0, 1 / 9, 0.5, 3.0, 1e6])
def test_weight_quantiles_do_not_depend_on_the_scale_of_the_sampling_weights(scale):
    # equal weights describe the population of the rows themselves, at any scale: numpy's
    # quantiles of w (weights summing to 1 gave the smallest weight for every quantile)
    r = np.array([0.1, 0.9, 0.4, 0.7, 0.2, 0.8, 0.5, 0.3, 0.6])
    p = np.array([0.5, 0.25, 0.5, 0.8, 0.4, 0.5, 0.3, 0.9, 0.2])
    t = np.array([1.0, 0.5, 0.1, 0.6, 0.9, 0.2, 0.7, 0.3, 0.4])
    s = np.full(r.size, scale)
    s[::2] *= 2.0  # and unequal weights: the same quantiles as at scale 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        row = diagnose_arrays(r, p, t, policy_names=["a"], sampling_weight=s).table().iloc[0]
        ref = (
            diagnose_arrays(r, p, t, policy_names=["a"], sampling_weight=s / scale).table().iloc[0]
        )
        flat = diagnose_arrays(r, p, t, policy_names=["a"], sampling_weight=np.full(r.size, scale))
    cols = ["weight_q50", "weight_q90", "weight_q99"]
    np.testing.assert_allclose(row[cols].to_numpy(float), ref[cols].to_numpy(float), rtol=TOL)
    np.testing.assert_allclose(
        flat.table().iloc[0][cols].to_numpy(float),
        np.quantile(t / p, [0.5, 0.9, 0.99]),
        rtol=TOL,
    )
