"""Several outcomes at once (ope.guardrail_decision): the claims' tests against hand-computed
paired differences, the intersection-union decision with Holm over candidates, the parsing and
refusals, the command line and the report."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

import ope
from ope.exceptions import ParameterError, SchemaError, ValidationError
from ope.guardrails import Guardrail, parse_guardrail
from ope.paired import adjust_p_values


def _frame(n: int = 6000, seed: int = 0) -> pd.DataFrame:
    g = np.random.default_rng(seed)
    a = g.integers(0, 2, n)
    return pd.DataFrame(
        {
            "action": a,
            "propensity": 0.5,
            "reward": g.binomial(1, 0.3 + 0.2 * a).astype(float),
            "latency_ms": g.normal(100 + 5 * a, 10),
            "cost": g.normal(1 + 0.5 * a, 1),
            "target__one": (a == 1).astype(float),
            "target__mix": np.where(a == 1, 0.6, 0.4),
        }
    )


def _paired_snips(frame: pd.DataFrame, column: str, policy: str) -> tuple[float, float]:
    """SNIPS of the candidate minus the mean logged outcome, and its paired standard error
    (the influence terms of the difference on the same rows)."""
    y = frame[column].to_numpy()
    w = frame[f"target__{policy}"].to_numpy() / frame["propensity"].to_numpy()
    v = np.sum(w * y) / np.sum(w)
    infl = w * (y - v) / w.mean() - (y - y.mean())
    return v - y.mean(), infl.std(ddof=1) / np.sqrt(y.size)


def test_claims_are_one_sided_tests_of_the_paired_differences():
    frame = _frame()
    d = ope.guardrail_decision(frame, guardrails=["latency_ms:lower:8", "cost:lower:0.1"])
    claims = d.claims().set_index(["policy", "outcome"])
    for p in ("one", "mix"):
        diff, se = _paired_snips(frame, "reward", p)
        row = claims.loc[(p, "reward")]
        assert row.difference == pytest.approx(diff, rel=1e-9)
        assert row.std_error == pytest.approx(se, rel=1e-6)
        assert row.p_value == pytest.approx(norm.sf(diff / se), rel=1e-6, abs=1e-300)
        diff, se = _paired_snips(frame, "latency_ms", p)
        want = norm.sf((8.0 - diff) / se)  # H0: Delta >= 8
        assert claims.loc[(p, "latency_ms")].p_value == pytest.approx(want, rel=1e-6, abs=1e-300)
    table = d.table().set_index("policy")
    # the joint p-value is the largest of a candidate's claims, Holm over the candidates
    joint = claims.groupby(level="policy")["p_value"].max()
    np.testing.assert_allclose(table.loc[joint.index, "p_value"], joint)
    np.testing.assert_allclose(
        table.loc[["one", "mix"], "adjusted_p_value"],
        adjust_p_values(joint.loc[["one", "mix"]], correction="holm"),
    )
    # cost rises by 0.25 for "one" (its 0.1 margin fails), by 0.05 for "mix"
    assert "one" not in d.approved
    assert "cost" in d.reason("one") and not table.loc["one", "approve"]
    ok = ope.guardrail_decision(frame, guardrails=["latency_ms:lower:8", "cost:lower:0.6"])
    assert "one" in ok.approved and ok.reason("one").startswith("approved")


def test_higher_is_better_guardrails_and_a_lower_primary():
    frame = _frame().assign(neg_cost=lambda f: -f["cost"])
    a = ope.guardrail_decision(frame, primary="reward", guardrails=["cost:lower:0.3"])
    b = ope.guardrail_decision(frame, primary="reward", guardrails=["neg_cost:higher:0.3"])
    pa = a.claims().query("outcome == 'cost'")["p_value"].to_numpy()
    pb = b.claims().query("outcome == 'neg_cost'")["p_value"].to_numpy()
    np.testing.assert_allclose(pa, pb, rtol=1e-9)
    c = ope.guardrail_decision(frame, primary="cost:lower", guardrails=[])
    diff, se = _paired_snips(frame, "cost", "one")
    assert c.claims().query("policy == 'one'")["p_value"].iloc[0] == pytest.approx(
        norm.cdf(diff / se), rel=1e-6
    )


def test_parsing_and_refusals():
    assert parse_guardrail("latency_ms:lower:50") == Guardrail("latency_ms", "lower", 50.0)
    assert parse_guardrail("reward", primary=True) == Guardrail("reward", "higher", 0.0)
    frame = _frame(500)
    for bad, error, match in (
        (dict(guardrails=["latency_ms:sideways:5"]), ParameterError, "guardrails"),
        (dict(guardrails=["latency_ms:lower:-1"]), ParameterError, "margin"),
        (dict(guardrails=["latency_ms:lower:x"]), ParameterError, "not a number"),
        (dict(primary="reward:higher:0.1"), ParameterError, "no margin"),
        (dict(guardrails=["nope:lower:1"]), SchemaError, "no outcome column"),
        (dict(guardrails=["reward:lower:1"]), ParameterError, "twice"),
        (dict(guardrails={"cost": ("lower",)}), ParameterError, "direction, margin"),
        (dict(correction="bonferroni"), ParameterError, "correction"),
        (dict(estimator="dr"), ParameterError, "estimator"),
    ):
        with pytest.raises(error, match=match):
            ope.guardrail_decision(frame, **bad)
    with pytest.raises(ValidationError, match="non-finite"):
        ope.guardrail_decision(
            frame.assign(cost=np.r_[np.nan, frame["cost"].to_numpy()[1:]]),
            guardrails=["cost:lower:1"],
        )
    mapping = ope.guardrail_decision(frame, guardrails={"cost": ("lower", 1.0)})
    assert mapping.guardrails == (Guardrail("cost", "lower", 1.0),)


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "ope", "evaluate", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_command_line_and_report(tmp_path):
    path = tmp_path / "logs.parquet"
    _frame().to_parquet(path)
    report = tmp_path / "r.html"
    out = _cli(path, "--guardrail", "latency_ms:lower:8", "cost:lower:0.6", "--json",
               "--report", report)  # fmt: skip
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)["guardrails"]
    want = ope.guardrail_decision(_frame(), guardrails=["latency_ms:lower:8", "cost:lower:0.6"])
    assert doc["approved"] == want.approved
    assert [c["p_value"] for c in doc["claims"]] == pytest.approx(want.claims()["p_value"].tolist())
    page = report.read_text()
    section = page[page.index('id="guardrails"') :]
    assert (
        "intersection-union" in section
        and "latency_ms (lower is better) not worse than logging by more than 8" in section
    )
    for extra, code, flag in (
        (["--primary", "reward"], 2, "--primary"),
        (["--guardrail", "latency_ms:up:3"], 2, "--guardrail"),
        (["--guardrail", "nope:lower:3"], 65, None),
        (["--guardrail", "cost:lower:1", "--streaming", "on"], 2, "--streaming"),
    ):
        bad = _cli(path, *extra, "--json")
        error = json.loads(bad.stdout)["error"]
        assert bad.returncode == code, bad.stdout
        assert (error.get("flag") == flag) if flag else "--guardrail" in error["message"]


def test_ope_report_draws_the_guardrails_and_the_distribution(tmp_path):
    path, out = tmp_path / "logs.parquet", tmp_path / "r.html"
    _frame(2000).to_parquet(path)
    run = subprocess.run(
        [sys.executable, "-m", "ope", "report", str(path), "--out", str(out),
         "--guardrail", "latency_ms:lower:20", "--metric", "quantile:0.5",
         "--outcome", "latency_ms", "--json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    page = out.read_text()
    assert "No guardrail decision" not in page and "Approved:" in page
    assert "No outcome distribution" not in page and "multiplier-bootstrap" in page


def test_review_fixes_grammar_clipping_warnings_and_bounds():
    with pytest.raises(ParameterError, match="not COLUMN"):
        parse_guardrail("latency_ms:50")  # a margin needs its direction
    frame = _frame(3000)
    with pytest.raises(ParameterError, match="estimator"):
        ope.guardrail_decision(frame, guardrails=["cost:lower:1"], estimator="clipped_ips")
    d = ope.guardrail_decision(frame, guardrails=["cost:lower:0.3", "latency_ms:lower:8"])
    claims = d.claims()
    # the claim is shown exactly when its one-sided bound is past the threshold
    threshold = np.where(
        claims["role"] == "primary", 0.0, claims["outcome"].map({"cost": 0.3, "latency_ms": 8.0})
    )
    lower = claims["outcome"].isin(["cost", "latency_ms"])
    past = np.where(lower, claims["bound"] < threshold, claims["bound"] > threshold)
    np.testing.assert_array_equal(past, claims["shown"].to_numpy())
    assert "lower is better" in claims.loc[claims["outcome"] == "cost", "claim"].iloc[0]
    # a candidate resting on one row: the evaluation's warning reaches the caller and the notes
    g = np.random.default_rng(0)
    n = 2000
    r, c = g.normal(0, 1, n), g.normal(0, 1, n)
    t = np.zeros(n)
    t[np.argmax(r - c)] = 1.0
    one = pd.DataFrame(
        dict(action=g.integers(0, 2, n), propensity=0.5, reward=r, cost=c, target__one_row=t)
    )
    with pytest.warns(ope.exceptions.OPEWarning):
        warned = ope.guardrail_decision(one, guardrails=["cost:lower:0"])
    assert any(n.startswith("reward: ") for n in warned.notes)
