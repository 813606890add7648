"""Marginal sensitivity bounds (ope.diagnostics.msm): the closed form against a brute-force
linear program, the reduction to the point estimate at gamma = 1, the tipping point, the
hidden-confounder simulator and the entry points' refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import linprog

from ope.diagnostics import Sensitivity, msm_weight_range, sensitivity, sensitivity_arrays
from ope.diagnostics.msm import GAMMA_SEARCH
from ope.estimators import IPS, SNIPS
from ope.exceptions import ParameterError, ValidationError
from ope.simulate.confounded import ConfoundedBandit


def _lp_ratio(c: np.ndarray, r: np.ndarray, lo: np.ndarray, hi: np.ndarray, sense: int) -> float:
    """max (sense=+1) or min of sum c W r / sum c W over lo <= W <= hi, by the Charnes-Cooper
    linear program in (y = t W, t): optimize sum c r y subject to sum c y = 1, lo t <= y <= hi t."""
    n = r.shape[0]
    cost = np.concatenate((-sense * c * r, [0.0]))
    a_eq = np.concatenate((c, [0.0]))[None, :]
    eye = np.eye(n)
    a_ub = np.vstack((np.hstack((eye, -hi[:, None])), np.hstack((-eye, lo[:, None]))))
    res = linprog(
        cost,
        A_ub=a_ub,
        b_ub=np.zeros(2 * n),
        A_eq=a_eq,
        b_eq=[1.0],
        bounds=(0, None),
        method="highs",
    )
    assert res.status == 0
    return float(sense * -res.fun) if sense > 0 else float(res.fun)


def _lp_linear(
    c: np.ndarray, r: np.ndarray, lo: np.ndarray, hi: np.ndarray, s: np.ndarray, sense: int
) -> float:
    res = linprog(-sense * c * r, bounds=list(zip(lo, hi)), method="highs")
    assert res.status == 0
    return float(-sense * res.fun) / float(s.sum())


def test_weight_range_by_hand() -> None:
    lo, hi = msm_weight_range([0.5, 0.25, 1.0], 3.0)
    np.testing.assert_allclose(lo, [1 + 1 / 3, 2.0, 1.0], rtol=1e-15)
    np.testing.assert_allclose(hi, [4.0, 10.0, 1.0], rtol=1e-15)
    lo1, hi1 = msm_weight_range([0.2], 1.0)
    assert lo1[0] == hi1[0] == pytest.approx(5.0, rel=1e-15)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("gamma", [1.3, 2.0, 4.0])
def test_closed_form_equals_the_linear_program(seed: int, gamma: float) -> None:
    g = np.random.default_rng(seed)
    n = 30
    # rewards with ties (a discrete scale) and a few negative ones; a candidate with zeros
    r = g.integers(-2, 5, size=n).astype(float) / 2.0
    p = g.uniform(0.05, 1.0, size=n)
    p[0] = 1.0  # a sure row stays exact
    pi = g.uniform(0.0, 1.0, size=n) * (g.random(n) < 0.8)
    s = g.integers(1, 4, size=n).astype(float) if seed % 2 else np.ones(n)
    c = s * pi
    lo, hi = msm_weight_range(p, gamma)
    for estimator in ("snips", "ips"):
        res = sensitivity_arrays(
            r,
            p,
            pi,
            gammas=[gamma],
            estimator=estimator,
            sampling_weight=None if seed % 2 == 0 else s,
        )
        row = res.table().set_index("gamma").loc[gamma]
        if estimator == "snips":
            want = (_lp_ratio(c, r, lo, hi, -1), _lp_ratio(c, r, lo, hi, +1))
        else:
            want = (_lp_linear(c, r, lo, hi, s, -1), _lp_linear(c, r, lo, hi, s, +1))
        assert row["lower"] == pytest.approx(want[0], rel=1e-9, abs=1e-9)
        assert row["upper"] == pytest.approx(want[1], rel=1e-9, abs=1e-9)


def _snips_influence_sd(r, c, w_inv, s):
    """The row-level reference: sd (ddof 1) of c W (r - V) / mean(c W), and of its difference
    with the logging terms s (r - rbar) / mean s."""
    cw = c * w_inv
    v = np.dot(cw, r) / cw.sum()
    psi = cw * (r - v) / cw.mean()
    rbar = np.dot(s, r) / s.sum()
    beta = s * (r - rbar) / s.mean()
    return v, np.std(psi, ddof=1), np.std(psi - beta, ddof=1)


@pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning")  # random candidates
@pytest.mark.parametrize("weighted", [False, True])
def test_gamma_one_is_the_estimators_point_and_interval(weighted: bool) -> None:
    g = np.random.default_rng(3)
    n = 5000
    r = g.normal(size=n)
    p = g.uniform(0.1, 0.9, size=n)
    pi = g.uniform(0.0, 1.0, size=(n, 2))
    s = g.uniform(1.0, 3.0, size=n) if weighted else None
    res = sensitivity_arrays(r, p, pi, policy_names=["a", "b"], sampling_weight=s)
    ips = sensitivity_arrays(r, p, pi, policy_names=["a", "b"], estimator="ips", sampling_weight=s)
    table, table_ips = res.table(), ips.table()
    for j, name in enumerate(["a", "b"]):
        at_one = table[(table.policy == name) & (table.gamma == 1.0)].iloc[0]
        want = SNIPS().estimate(r, p, pi[:, j], sampling_weight=s)
        assert at_one["lower"] == pytest.approx(want.value, rel=1e-12)
        assert at_one["upper"] == pytest.approx(want.value, rel=1e-12)
        assert at_one["ci_low"] == pytest.approx(want.ci_low, rel=1e-10)
        assert at_one["ci_high"] == pytest.approx(want.ci_high, rel=1e-10)
        ips_one = table_ips[(table_ips.policy == name) & (table_ips.gamma == 1.0)].iloc[0]
        want_ips = IPS().estimate(r, p, pi[:, j], sampling_weight=s)
        assert ips_one["lower"] == pytest.approx(want_ips.value, rel=1e-12)
        assert ips_one["ci_high"] == pytest.approx(want_ips.ci_high, rel=1e-10)
        # the paired effect's interval, from the rows
        ones = np.ones(n) if s is None else s
        v, sd, sd_effect = _snips_influence_sd(r, ones * pi[:, j], 1.0 / p, ones)
        half = 1.959963984540054 * sd_effect / math.sqrt(n)
        assert at_one["effect_ci_low"] == pytest.approx(v - res.baseline_value - half, rel=1e-9)


def test_the_group_sums_equal_the_rows_at_every_gamma() -> None:
    """The variances from per-reward-group sums equal the row-level ones with the extremal
    weights recovered from the linear program's threshold."""
    g = np.random.default_rng(11)
    n = 400
    r = g.integers(0, 4, size=n).astype(float)
    p = g.uniform(0.1, 0.9, size=n)
    pi = g.uniform(0.0, 1.0, size=n)
    res = sensitivity_arrays(r, p, pi, gammas=[1.5, 3.0])
    for _, row in res.table().iterrows():
        lo, hi = msm_weight_range(p, row["gamma"])
        # the lower end puts A on rows above the threshold reward, B below: find the threshold
        best = None
        for k in np.unique(r):
            w = np.where(r >= k, lo, hi)
            v, sd, _ = _snips_influence_sd(r, pi, w, np.ones(n))
            if best is None or v < best[0]:
                best = (v, sd)
        assert row["lower"] == pytest.approx(best[0], rel=1e-12)
        z = 1.959963984540054
        assert row["ci_low"] == pytest.approx(best[0] - z * best[1] / math.sqrt(n), rel=1e-10)


def test_bounds_widen_with_gamma_and_the_tipping_point_is_a_crossing() -> None:
    g = np.random.default_rng(0)
    n = 4000
    a = g.integers(0, 2, n)
    r = g.binomial(1, np.where(a == 1, 0.6, 0.4)).astype(float)
    pi = (a == 1).astype(float)
    res = sensitivity_arrays(r, np.full(n, 0.5), pi, policy_names=["one"])
    t = res.table()
    assert (np.diff(t["lower"]) <= 1e-15).all() and (np.diff(t["upper"]) >= -1e-15).all()
    row = res.tipping_points().iloc[0]
    assert row["decision"] == "better"
    star = row["gamma_star"]
    assert 1.0 < star < 2.0 and res.gamma_star("one") == star
    below = sensitivity_arrays(r, np.full(n, 0.5), pi, gammas=[star / 1.001]).table()
    above = sensitivity_arrays(r, np.full(n, 0.5), pi, gammas=[star]).table()
    assert below["effect_ci_low"].iloc[1] > 0.0 >= above["effect_ci_low"].iloc[1]
    assert "Γ* = " in res.note("one") and "fragile" in res.note("one")
    # a worse candidate mirrors it; a candidate without a clear difference has no tipping point
    worse = sensitivity_arrays(r, np.full(n, 0.5), 1.0 - pi, policy_names=["zero"])
    assert worse.tipping_points().iloc[0]["decision"] == "worse"
    assert 1.0 < worse.gamma_star("zero") < 2.0
    even = sensitivity_arrays(r, np.full(n, 0.5), np.full(n, 0.5), policy_names=["half"])
    assert even.tipping_points().iloc[0]["decision"] == "unclear"
    assert math.isnan(even.gamma_star("half"))


def test_a_decision_that_survives_the_search_is_infinite() -> None:
    g = np.random.default_rng(1)
    n = 20_000
    a = g.integers(0, 2, n)
    r = (a == 1).astype(float)  # action 1 always pays, action 0 never
    res = sensitivity_arrays(r, np.full(n, 0.5), (a == 1).astype(float), policy_names=["one"])
    # the candidate's every weighted row pays 1: its SNIPS is 1 at every gamma
    assert res.gamma_star("one") == math.inf
    assert str(GAMMA_SEARCH[-1])[:3] in res.note("one")


def test_the_bounds_hold_the_true_propensity_estimate_in_every_replication() -> None:
    """At gamma >= the simulator's exact gamma_0 the bounds contain the self-normalized estimate
    with the true propensities, in every replication (a deterministic property)."""
    env = ConfoundedBandit(confounding=0.6, seed=2)
    g0 = env.gamma
    assert g0 > 1.5
    missed_at_one = 0
    for rep in range(60):
        t = env.sample(1500, rng=rep, oracle=True)
        r, p = t["reward"].to_numpy(), t["propensity"].to_numpy()
        true_p = t["true_propensity"].to_numpy()
        pi = np.column_stack([t[f"target__{k}"].to_numpy() for k in env.candidate_policies])
        res = sensitivity_arrays(r, p, pi, policy_names=list(env.candidate_policies), gammas=[g0])
        table = res.table()
        for j, name in enumerate(env.candidate_policies):
            w = pi[:, j] / true_p
            oracle = float(np.dot(w, r) / w.sum())
            row = table[(table.policy == name) & (table.gamma == g0)].iloc[0]
            assert row["lower"] - 1e-12 <= oracle <= row["upper"] + 1e-12
            one = table[(table.policy == name) & (table.gamma == 1.0)].iloc[0]
            missed_at_one += not (one["lower"] - 1e-12 <= oracle <= one["upper"] + 1e-12)
    assert missed_at_one > 100  # at gamma = 1 (a point) it misses nearly always


def test_the_confounded_simulator_is_exact() -> None:
    env = ConfoundedBandit(confounding=0.0, seed=0)
    assert env.gamma == pytest.approx(1.0, abs=1e-12)
    env = ConfoundedBandit(confounding=0.8, seed=1)
    t = env.sample(200_000, rng=0, oracle=True)
    r = t["reward"].to_numpy()
    w = t["target__always_1"].to_numpy() / t["true_propensity"].to_numpy()
    # IPS with the true propensities is unbiased for the exact value (4 standard errors)
    se = np.std(w * r) / math.sqrt(r.shape[0])
    assert abs(np.mean(w * r) - env.true_value("always_1")) < 4 * se
    assert abs(r.mean() - env.true_value("logging")) < 4 * r.std() / math.sqrt(r.shape[0])
    with pytest.raises(ParameterError, match="unknown policy"):
        env.true_value("nope")


def test_refusals_name_what_and_how() -> None:
    r, p, pi = np.array([1.0, 0.0, 1.0]), np.full(3, 0.5), np.array([1.0, 0.0, 1.0])
    for bad in ([0.5], [float("nan")], ["x"], 3.0, [True]):
        with pytest.raises(ParameterError, match="gammas"):
            sensitivity_arrays(r, p, pi, gammas=bad)
    with pytest.raises(ParameterError, match="estimator"):
        sensitivity_arrays(r, p, pi, estimator="dr")
    with pytest.raises(ValidationError, match="probability 0 to every logged action"):
        sensitivity_arrays(r, p, np.zeros(3))
    with pytest.raises(ValidationError):
        sensitivity_arrays(r, np.array([0.5, 0.0, 0.5]), pi)
    with pytest.raises(ParameterError, match="gamma"):
        msm_weight_range([0.5], 0.9)
    res = sensitivity_arrays(r, p, pi, policy_names=["x"])
    with pytest.raises(ParameterError, match="`policy` must name a candidate"):
        res.gamma_star("y")


def test_logs_entry_reads_the_provenance(tmp_path) -> None:
    from ope.propensity import estimate_propensities

    env = ConfoundedBandit(confounding=0.5, seed=0)
    table = env.sample(3000, rng=0)
    logged = sensitivity(table)
    assert isinstance(logged, Sensitivity) and logged.propensity_source == "logged"
    assert logged.policies == env.candidate_policies
    estimated = sensitivity(estimate_propensities(table, context_columns=["x0"], rng=0))
    assert estimated.propensity_source == "estimated"
    d = estimated.to_dict()
    assert d["policies"][0]["curve"][0]["gamma"] == 1.0
    assert "marginal sensitivity model" in d["model"]
    assert "Sensitivity to wrong propensities" in estimated.summary()


# ---- the gate's certificate -----------------------------------------------------------------
def _gate_rows(n: int = 20_000):
    g = np.random.default_rng(1)
    action = g.integers(0, 2, size=n)
    reward = g.binomial(1, np.where(action == 1, 0.7, 0.3)).astype(float)
    return action, reward, (action == 1).astype(float), np.full(n, 0.5)


@pytest.mark.parametrize("ci", ["t", "bernstein", "betting"])
def test_the_certificate_says_how_wrong_the_propensities_may_be(ci: str) -> None:
    from ope.learning import Certificate, SafetyGate

    action, reward, pi, p = _gate_rows()
    gate = SafetyGate(reward_range=(0.0, 1.0), max_weight=2.0, ci=ci)
    cert = gate.certify(pi, None, action, reward, p, name="always_1")
    assert cert.approved and 1.5 < cert.tipping_gamma < 4.0
    # the same gate on the propensities moved to the edge of the box: approves just below
    # gamma*, rejects at it (the smallest weight pi (1 + (1/p - 1)/gamma) is pi / p_true)
    for gamma, verdict in ((cert.tipping_gamma / 1.001, "approve"), (cert.tipping_gamma, "reject")):
        p_true = 1.0 / (1.0 + (1.0 / p - 1.0) / gamma)
        assert gate.certify(pi, None, action, reward, p_true).verdict == verdict
    assert "sensitivity:" in str(cert)
    back = Certificate.from_json(cert.to_json())
    assert back.tipping_gamma == pytest.approx(cert.tipping_gamma, rel=1e-15)
    rejected = gate.certify(1.0 - pi, None, action, reward, p)
    assert rejected.tipping_gamma is None and rejected.to_dict()["tipping_gamma"] is None


def test_certificate_tipping_gamma_infinite_and_malformed() -> None:
    import json

    from ope.learning import Certificate, SafetyGate

    action, _, pi, p = _gate_rows()
    reward = (action == 1).astype(float)  # the candidate's action always pays
    cert = SafetyGate(reward_range=(0.0, 1.0), max_weight=1.0, baseline=0.3).certify(
        pi, None, action, reward, p
    )
    # clipped at 1, a weight pi / p_true >= 1 stays 1 whatever gamma: the approval never flips
    assert cert.tipping_gamma == math.inf
    data = cert.to_dict()
    assert data["tipping_gamma"] == "inf" and "Infinity" not in json.dumps(data)
    assert Certificate.from_dict(data).tipping_gamma == math.inf
    for bad in (0.5, "big", True, float("nan")):
        with pytest.raises(ValidationError, match="tipping_gamma"):
            Certificate.from_dict({**data, "tipping_gamma": bad})
    old = {k: v for k, v in data.items() if k != "tipping_gamma"}  # written before the field
    assert Certificate.from_dict(old).tipping_gamma is None


# ---- diagnose, the report and the command line ----------------------------------------------
@pytest.fixture(scope="module")
def estimated_logs():
    import warnings

    from ope.propensity import estimate_propensities

    env = ConfoundedBandit(confounding=0.5, seed=0)
    table = env.sample(20_000, rng=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return table, estimate_propensities(table, context_columns=["x0"], rng=0)


@pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning")
def test_diagnose_runs_it_for_estimated_propensities(estimated_logs) -> None:
    from ope import diagnose, diagnose_arrays

    logged, estimated = estimated_logs
    assert diagnose(logged, reward_range=(0, 1)).sensitivity is None
    d = diagnose(estimated, reward_range=(0, 1))
    assert d.sensitivity is not None and d.sensitivity.propensity_source == "estimated"
    table = d.table().set_index("policy")
    # the estimated propensities make always_0 look better than logging (truly it is worse):
    # the decision is flagged as fragile, far below the simulator's gamma_0 = 1.79
    assert table.loc["always_0", "sensitivity_decision"] == "better"
    assert 1.0 < table.loc["always_0", "gamma_star"] < 1.2
    assert math.isnan(table.loc["follow_x", "gamma_star"])
    assert any("always_0: better than logging until" in n for n in d.notes)
    assert d.to_dict()["sensitivity"]["policies"][0]["policy"] == "always_1"
    assert diagnose(estimated, reward_range=(0, 1), sensitivity=False).sensitivity is None
    assert diagnose(logged, sensitivity=True).sensitivity.propensity_source == "logged"
    with pytest.raises(ParameterError, match="`sensitivity` must be True, False or 'auto'"):
        diagnose(logged, sensitivity="yes")
    r, p = logged["reward"].to_numpy(), logged["propensity"].to_numpy()
    t = logged["target__always_1"].to_numpy()
    arr = diagnose_arrays(r, p, t, sensitivity=True)
    assert arr.table()["sensitivity_decision"].iloc[0] in ("better", "worse", "unclear")


@pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning")
def test_the_report_shows_the_tipping_point_and_watches_a_fragile_one(estimated_logs) -> None:
    import html as html_lib

    from ope import diagnose, evaluate
    from ope.report import render_report

    _, estimated = estimated_logs
    ev = evaluate(estimated, estimators=("ips", "snips"), reward_range=(0, 1))
    page = html_lib.unescape(
        render_report(evaluation=ev, diagnostics=diagnose(estimated, reward_range=(0, 1)))
    )
    assert "sensitivity to wrong propensities" in page
    assert "better than logging until the propensities' odds are off by a factor Γ* = 1.0" in page
    assert "its decision against logging flips if the propensities' odds are off" in page
    assert "Γ = 1.5: [" in page
    plain = html_lib.unescape(
        render_report(evaluation=ev, diagnostics=diagnose(estimated, sensitivity=False))
    )
    assert "sensitivity to wrong propensities" not in plain


def test_the_command_line_flag(tmp_path, estimated_logs) -> None:
    import json
    import subprocess
    import sys

    import pyarrow.parquet as pq

    logged, estimated = estimated_logs
    paths = {}
    for name, table in (("logged", logged), ("estimated", estimated.table)):
        paths[name] = tmp_path / f"{name}.parquet"
        pq.write_table(table, paths[name])

    def run(*args: str) -> dict:
        out = subprocess.run(
            [sys.executable, "-m", "ope", "diagnose", *args, "--json"],
            capture_output=True,
            text=True,
            check=False,
        )
        return json.loads(out.stdout)

    auto = run(str(paths["estimated"]), "--reward-range", "0", "1")
    assert auto["diagnostics"]["sensitivity"]["propensity_source"] == "estimated"
    assert "sensitivity" not in run(str(paths["logged"]))["diagnostics"]
    assert "sensitivity" in run(str(paths["logged"]), "--sensitivity", "on")["diagnostics"]
    assert "sensitivity" not in run(str(paths["estimated"]), "--sensitivity", "off")["diagnostics"]
    bad = run(str(paths["logged"]), "--sensitivity", "maybe")
    assert bad["exit_code"] == 2 and bad["error"]["flag"] == "--sensitivity"


def test_the_benchmark_script_quick_run(tmp_path) -> None:
    """``benchmarks/sensitivity.py --quick``: the bounds at gamma_0 hold the true-propensity
    estimate in every replication, and the timing is of both sides in the same run."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "sensitivity.py"
    spec = importlib.util.spec_from_file_location("ope_benchmark_sensitivity", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = module.main(["--quick", "--out", str(tmp_path / "s.json")])
    assert (tmp_path / "s.json").exists()
    assert {r["policy"] for r in result["rows"]} == {"always_1", "always_0", "follow_x"}
    assert all(r["oracle_inside_at_gamma0"] == 1.0 for r in result["rows"])
    assert result["timing"]["sensitivity"] > 0 and result["timing"]["evaluate"] > 0


@pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning")
def test_the_reports_certificate_shows_its_tipping_point() -> None:
    import html as html_lib

    import pandas as pd

    from ope import evaluate
    from ope.learning import SafetyGate
    from ope.report import render_report

    action, reward, pi, p = _gate_rows(4000)
    cert = SafetyGate(reward_range=(0.0, 1.0), max_weight=2.0, ci="t").certify(
        pi, None, action, reward, p, name="always_1"
    )
    logs = pd.DataFrame(
        {"action": action, "propensity": p, "reward": reward, "target__always_1": pi}
    )
    page = html_lib.unescape(
        render_report(evaluation=evaluate(logs, estimators=("ips",)), certificate=cert)
    )
    assert f"propensities' odds are off by a factor Γ* = {cert.tipping_gamma:.3g}" in page
