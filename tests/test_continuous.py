"""Continuous actions (ope.continuous): kernels, hand-computed estimates, the bandwidth rule,
the simulator's exact values, Vowpal Wabbit's continuous-action DSJSON, the CLI and the report,
and parity with Open Bandit Pipeline's kernel estimators when its interpreter is present."""

from __future__ import annotations

import gzip
import zlib
import json
import math
import os
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from scipy import integrate

import ope
from ope.cli import main
from ope.continuous import (
    KERNEL_MOMENTS,
    KERNELS,
    MIN_WINDOW_ESS,
    UNDERSMOOTH_STEPS,
    ContinuousLogs,
    bandwidth_grid,
    kernel,
)
from ope.exceptions import (
    DataFileError,
    DroppedRowsWarning,
    EstimationError,
    ParameterError,
    SchemaError,
    ValidationError,
)
from ope.simulate import ContinuousBandit

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def quiet(run):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run()


# ------------------------------------------------------------------------------------ kernels
@pytest.mark.parametrize("name", KERNELS)
def test_each_kernel_is_a_density_with_the_stated_moments(name):
    f = lambda u: float(kernel(u, name))  # noqa: E731
    low, high = (-12.0, 12.0) if name == "gaussian" else (-1.0, 1.0)
    mass = integrate.quad(f, low, high, limit=200)[0]
    mu2 = integrate.quad(lambda u: u * u * f(u), low, high, limit=200)[0]
    r = integrate.quad(lambda u: f(u) ** 2, low, high, limit=200)[0]
    assert mass == pytest.approx(1.0, abs=1e-9)
    assert (mu2, r) == pytest.approx(KERNEL_MOMENTS[name], abs=1e-9)
    if name != "gaussian":
        assert kernel(np.array([-1.5, 1.01, 3.0]), name).tolist() == [0.0, 0.0, 0.0]


def test_an_unknown_kernel_is_refused_by_name():
    with pytest.raises(ParameterError, match="`kernel`"):
        kernel(0.0, "box")


# ----------------------------------------------------------------------- hand-computed values
def _rows():
    return pd.DataFrame(
        {
            "x0": [0.0, 1.0, -1.0, 0.5],
            "action": [0.0, 0.3, -0.2, 1.0],
            "density": [0.4, 0.5, 0.25, 2.0],
            "reward": [1.0, 2.0, 0.0, 3.0],
            "target__pi": [0.1, 0.2, 0.3, 0.6],
            "q": [0.5, 1.5, 0.5, 2.0],
            "v__pi": [0.8, 1.0, 0.2, 2.5],
        }
    )


def test_kernel_ips_snips_and_dr_equal_the_formulas_by_hand():
    df = _rows()
    h = 0.5
    u = (df["target__pi"] - df["action"]) / h
    k = np.exp(-0.5 * u**2) / math.sqrt(2 * math.pi)
    w = k / (h * df["density"])
    r = df["reward"]
    logs = ope.read_continuous(df, context_columns=["x0"])
    ev = quiet(
        lambda: ope.evaluate_continuous(
            logs,
            bandwidth=h,
            estimators=["ips", "snips", "dr"],
            q_column="q",
            v_column="v__{policy}",
        )
    )
    assert ev["pi", "ips"].value == pytest.approx(float(np.mean(w * r)), rel=1e-12)
    assert ev["pi", "snips"].value == pytest.approx(float(np.sum(w * r) / np.sum(w)), rel=1e-12)
    dr_terms = df["v__pi"] + w * (r - df["q"])
    assert ev["pi", "dr"].value == pytest.approx(float(dr_terms.mean()), rel=1e-12)
    assert ev["pi", "dr"].std_error == pytest.approx(float(dr_terms.std(ddof=1) / 2.0), rel=1e-12)
    assert ev["pi", "ips"].std_error == pytest.approx(float((w * r).std(ddof=1) / 2.0), rel=1e-12)


@pytest.mark.parametrize("name", ["epanechnikov", "triangular", "cosine"])
def test_compact_kernels_give_rows_outside_the_window_no_weight(name):
    df = _rows()
    logs = ope.read_continuous(df, context_columns=["x0"])
    ev = quiet(lambda: ope.evaluate_continuous(logs, kernel=name, bandwidth=0.15, estimators="ips"))
    d = (df["target__pi"] - df["action"]).abs()
    assert ev.window.loc[0, "window_rows"] == int((d <= 0.15).sum()) == 2
    w = kernel((df["target__pi"] - df["action"]) / 0.15, name) / (0.15 * df["density"])
    assert ev["pi", "ips"].value == pytest.approx(float(np.mean(w * df["reward"])), rel=1e-12)


def test_samples_of_a_stochastic_candidate_average_the_kernel():
    df = _rows().drop(columns=["target__pi"])
    draws = np.array([[0.1, -0.1], [0.2, 0.4], [0.3, 0.0], [0.6, 0.9]])
    h = 0.3
    k = kernel((draws - df["action"].to_numpy()[:, None]) / h).mean(axis=1)
    w = k / (h * df["density"].to_numpy())
    ev = quiet(
        lambda: ope.evaluate_continuous(
            df, candidates={"mix": draws}, bandwidth=h, estimators="ips"
        )
    )
    assert ev["mix", "ips"].value == pytest.approx(float(np.mean(w * df["reward"])), rel=1e-12)
    assert ev.window.loc[0, "form"] == "samples (2 per row)"


def test_a_density_candidate_gets_exact_weights_and_no_bandwidth():
    df = _rows().assign(density__exact=[0.2, 0.5, 0.5, 1.0])
    ev = quiet(lambda: ope.evaluate_continuous(df, ["exact"], estimators="ips"))
    w = df["density__exact"] / df["density"]
    assert ev["exact", "ips"].value == pytest.approx(float(np.mean(w * df["reward"])), rel=1e-12)
    assert ev.bandwidth == {"exact": None}
    assert any("exact weights" in n for n in ev.evaluation.notes)


def test_sampling_weights_enter_the_estimate():
    df = _rows().assign(weight=[1.0, 2.0, 1.0, 4.0])
    plain = quiet(lambda: ope.evaluate_continuous(df.drop(columns=["weight"]), bandwidth=0.5))
    weighted = quiet(lambda: ope.evaluate_continuous(df, bandwidth=0.5))
    w = kernel((df["target__pi"] - df["action"]) / 0.5) / (0.5 * df["density"])
    s = df["weight"]
    assert weighted["pi", "snips"].value == pytest.approx(
        float(np.sum(s * w * df["reward"]) / np.sum(s * w)), rel=1e-12
    )
    assert weighted["pi", "snips"].value != pytest.approx(plain["pi", "snips"].value)


# -------------------------------------------------------------------------- bandwidth choice
def test_slope_is_followed_by_undersmoothing_and_the_grid_is_reported():
    env = ContinuousBandit(seed=0)
    ev = quiet(lambda: ope.evaluate_continuous(env.sample(4000, rng=1), ["optimal"]))
    grid = ev.bandwidths
    assert list(grid.columns) == [
        "policy",
        "bandwidth",
        "value",
        "std_error",
        "width",
        "ess",
        "window_rows",
        "slope",
        "chosen",
    ]
    assert grid["slope"].sum() == 1 and grid["chosen"].sum() == 1
    logs = ope.read_continuous(env.sample(4000, rng=1))
    np.testing.assert_allclose(grid["bandwidth"], bandwidth_grid(logs, "optimal"), rtol=1e-12)
    i_slope = int(np.flatnonzero(grid["slope"])[0])
    i_used = int(np.flatnonzero(grid["chosen"])[0])
    assert i_used == i_slope - UNDERSMOOTH_STEPS
    assert ev.bandwidth["optimal"] == grid["bandwidth"][i_used]
    # the variance falls as the bandwidth grows (over most of the grid)
    assert grid["std_error"][:8].is_monotonic_decreasing


def test_a_candidate_far_from_every_logged_action_is_not_evaluable():
    env = ContinuousBandit(seed=0)
    table = env.sample(2000, rng=0).to_pandas()
    table["target__far"] = table["action"].max() + 6.0
    ev = quiet(lambda: ope.evaluate_continuous(table, ["optimal", "far"], estimators="snips"))
    assert ev.verdicts["optimal"] == "evaluable"
    assert ev.verdicts["far"].startswith("not evaluable from these logs")
    assert str(MIN_WINDOW_ESS) in ev.verdicts["far"]
    assert ev.evaluable == ["optimal"]


def test_no_weight_anywhere_is_an_estimation_error():
    df = _rows().assign(target__pi=100.0)
    with pytest.raises(EstimationError, match="no candidate can be weighed.*0 logged action"):
        quiet(lambda: ope.evaluate_continuous(df, kernel="triangular", bandwidth=0.1))


def _uniform_logs(n: int = 400) -> pd.DataFrame:
    gen = np.random.default_rng(1)
    a = gen.uniform(0.0, 1.0, n)
    return pd.DataFrame({"action": a, "density": 1.0, "reward": a + gen.normal(0, 0.1, n)})


def test_a_logged_density_whose_kernel_weight_overflows_is_named_in_its_own_terms():
    """A logged density of 1e-300 gives a kernel weight whose square overflows: the error
    speaks of densities and kernels and names the row (before: the internal bandit table's
    rule, propensity_out_of_range of '<DataFrame>', or a 'logging propensity')."""
    df = _uniform_logs()
    df.loc[5, "density"] = 1e-300
    with pytest.raises(ValidationError) as info:
        quiet(lambda: ope.evaluate_continuous(df, candidates={"same": df["action"]}))
    message = str(info.value)
    assert message.startswith(
        "kernel weights overflow float64 on 1 row (first at row 5): the candidate's kernel "
        "density over the logged density 1e-300 is above 1e+150"
    )
    assert "propensity" not in message and "<DataFrame>" not in message


@pytest.mark.parametrize("distance", [0.30, 0.40])  # weights of 1e-194 (squares 0), then 0
def test_kernel_weights_that_underflow_are_explained_with_kernel_and_bandwidth(distance):
    # 30 (40) bandwidths from every logged action: the gaussian kernel's weights are about
    # 1e-194 (exactly 0), whose squares underflow, so the estimators would see no weight
    df = _uniform_logs()
    far = {"far": df["action"].to_numpy() + distance}
    with pytest.raises(EstimationError, match="no candidate can be weighed") as info:
        quiet(lambda: ope.evaluate_continuous(df, candidates=far, bandwidth=0.01))
    message = str(info.value)
    assert "target_propensity" not in message and "never chooses" not in message
    for said in (
        "gaussian kernel's window at the bandwidth 0.01",
        "every kernel weight K(u) / (h p) is ",
        f"lie {distance / 0.01:.3g} bandwidths or more from the logged actions",
        "the logging density at the logged actions is 1",
        "Widen the bandwidth: a bandwidth of about",
    ):
        assert said in message, (said, message)
    # the bandwidth it suggests is wider, and does weigh the candidate
    suggested = float(message.split("a bandwidth of about ")[1].split(" ")[0])
    assert suggested > 0.01
    ev = quiet(
        lambda: ope.evaluate_continuous(
            df, candidates=far, bandwidth=suggested * 1.01, estimators="snips"
        )
    )
    assert ev.verdicts["far"] == "evaluable"


def test_a_candidate_whose_weights_underflow_is_not_evaluable_beside_one_that_is():
    # the one is estimated, the other refused with its reason (once an error for both)
    df = _uniform_logs()
    cands = {"near": np.full(len(df), 0.5), "far": df["action"].to_numpy() + 3.0}
    ev = quiet(lambda: ope.evaluate_continuous(df, candidates=cands, bandwidth=0.1))
    assert ev.evaluable == ["near"] and set(ev.table()["policy"]) == {"near"}
    assert "every kernel weight K(u) / (h p) is below 1.49e-154" in ev.verdicts["far"]


@pytest.mark.parametrize("name", KERNELS)
def test_a_bandwidth_check_bandwidth_accepts_weighs_a_candidate_at_the_logged_actions(name):
    """The weights are refused only where their squares leave float64's normal range: at the
    widest h p that check_bandwidth accepts (BANDWIDTH_RANGE), a candidate amid the logged
    actions is evaluable, with the SNIPS estimate of the same logs at a sane density scale."""
    from ope.continuous import BANDWIDTH_RANGE, MIN_LARGEST_WEIGHT, check_bandwidth

    assert MIN_LARGEST_WEIGHT**2 == pytest.approx(np.finfo(np.float64).tiny, rel=1e-12)
    df = _uniform_logs()
    h = 0.1
    huge = df.assign(density=BANDWIDTH_RANGE[1] / h)  # h p at the edge of the range
    assert check_bandwidth(h, density=huge["density"]) == h
    kw = {"candidates": {"near": np.full(len(df), 0.5)}, "kernel": name, "bandwidth": h}
    kw["estimators"] = ("ips", "snips")
    ev = quiet(lambda: ope.evaluate_continuous(huge, **kw))
    assert ev.verdicts == {"near": "evaluable"}
    sane = quiet(lambda: ope.evaluate_continuous(df.assign(density=10.0), **kw))
    assert ev["near", "snips"].value == pytest.approx(sane["near", "snips"].value, rel=1e-9)


def test_a_mis_scaled_logging_density_is_weighed_when_its_weights_are():
    # 9e150 (a density per 1e-150 units, say): every weight ~4e-151, whose squares are normal
    df = _uniform_logs().assign(density=9e150)
    near = {"near": np.full(len(df), 0.5)}
    ev = quiet(lambda: ope.evaluate_continuous(df, candidates=near, bandwidth=0.1))
    assert ev.verdicts == {"near": "evaluable"}
    assert ev["near", "snips"].value == pytest.approx(0.478, abs=0.005)


def test_a_full_window_of_weightless_rows_blames_the_logging_density():
    """With SLOPE's grid (no bandwidth given, so no h p check) and a logging density of 1e200,
    the window is full but every weight is ~1e-200: the verdict says so and blames the
    density, never "fewer than" 30 rows nor a bandwidth to widen to."""
    df = _uniform_logs().assign(density=1e200)
    near = {"near": np.full(len(df), 0.5)}
    with pytest.raises(EstimationError, match="no candidate can be weighed") as info:
        quiet(lambda: ope.evaluate_continuous(df, candidates=near, estimators="snips"))
    message = str(info.value)
    assert "fewer than" not in message and "Widen" not in message, message
    assert "400 logged action(s) in the gaussian kernel's window" in message
    assert f"(at least {MIN_WINDOW_ESS}), but every kernel weight" in message
    assert "the logging density at the logged actions is 1e+200" in message
    assert "Check that `density` is the logger's density in the actions' units" in message


def test_a_sparse_window_whose_weights_no_bandwidth_lifts_blames_the_density_not_the_width():
    # few logged actions near the candidate and a density of 1e200 (SLOPE's grid: no h p
    # check): widening to 30 rows in the window would leave every weight below the threshold
    # too, so no bandwidth is advised
    gen = np.random.default_rng(3)
    a = np.concatenate([gen.uniform(0.0, 0.1, 10), gen.uniform(0.5, 1.0, 390)])
    df = pd.DataFrame({"action": a, "density": 1e200, "reward": a})
    low = {"low": np.zeros(400)}
    with pytest.raises(EstimationError) as info:
        quiet(lambda: ope.evaluate_continuous(df, candidates=low, estimators="snips"))
    message = str(info.value)
    assert f"(fewer than {MIN_WINDOW_ESS})" in message and "Widen" not in message, message
    assert "would not weigh it either" in message
    assert "Check that `density` is the logger's density in the actions' units" in message


def test_a_density_candidate_whose_weights_underflow_says_its_density_is_negligible():
    df = _uniform_logs().assign(density__d=1e-320)
    with pytest.raises(EstimationError, match="no candidate can be weighed") as info:
        quiet(lambda: ope.evaluate_continuous(df, estimators=["ips", "snips"]))
    message = str(info.value)
    assert "target_propensity" not in message
    assert "the candidate's density at the logged actions (1e-320) is negligible" in message
    assert "Check that density__d is the candidate's density" in message


# ------------------------------------------------------------------------ exact ground truth
def test_true_and_smoothed_values_match_monte_carlo():
    env = ContinuousBandit(seed=3)
    gen = np.random.default_rng(0)
    x = gen.standard_normal((400_000, env.n_features))
    for name in env.candidate_policies:
        coef, b, s = env._candidate(name)
        a = x @ coef + b + s * gen.standard_normal(len(x))
        mu = env.expected_reward(x, a)
        assert env.true_value(name) == pytest.approx(mu.mean(), abs=5 * mu.std() / 632)
        u = gen.standard_normal(len(x))  # gaussian kernel noise
        mu_h = env.expected_reward(x, a + 0.3 * u)
        assert env.smoothed_value(name, "gaussian", 0.3) == pytest.approx(
            mu_h.mean(), abs=5 * mu_h.std() / 632
        )


def test_kernel_ips_is_unbiased_for_the_smoothed_value():
    env = ContinuousBandit(seed=0)
    h = 0.3
    values = []
    for r in range(150):  # a loop over replications
        logs = ope.read_continuous(env.sample(2000, rng=r), policies=["halfway"])
        ev = quiet(lambda: ope.evaluate_continuous(logs, bandwidth=h, estimators="ips"))
        values.append(ev["halfway", "ips"].value)
    values = np.array(values)
    se = values.std(ddof=1) / math.sqrt(len(values))
    assert values.mean() == pytest.approx(env.smoothed_value("halfway", "gaussian", h), abs=4 * se)
    # and biased for the candidate itself by -h^2 mu_2 (here 0.09, many standard errors)
    assert abs(values.mean() - env.true_value("halfway")) > 10 * se


def test_dr_with_the_default_model_recovers_the_value():
    env = ContinuousBandit(seed=0)
    ev = quiet(lambda: ope.evaluate_continuous(env.sample(20000, rng=5, samples=20)))
    for p in env.candidate_policies:
        est = ev[p, "dr"]
        assert abs(est.value - env.true_value(p)) < 4 * est.std_error + 0.01, p


# ------------------------------------------------------------------------------ bad input
def test_bad_columns_name_the_argument_and_row():
    df = _rows()
    with pytest.raises(SchemaError, match="`density_column`: no column 'p'"):
        ope.read_continuous(df, density_column="p")
    with pytest.raises(ValidationError, match="`density_column`.*row 2"):
        ope.read_continuous(df.assign(density=[0.4, 0.5, 0.0, 2.0]))
    with pytest.raises(ValidationError, match="`reward_column`.*row 1"):
        ope.read_continuous(df.assign(reward=[1.0, np.nan, 0.0, 1.0]))
    with pytest.raises(SchemaError, match="`policies`: no candidate 'nope'"):
        ope.read_continuous(df, policies=["nope"])
    with pytest.raises(ParameterError, match="`bandwidth`"):
        ope.evaluate_continuous(df, bandwidth=-1.0)
    with pytest.raises(ParameterError, match="`bandwidth`"):
        ope.evaluate_continuous(df, bandwidth="silverman")
    # h times the logged densities beyond BANDWIDTH_RANGE: the kernel weights K(u) / (h p)
    # leave float64 (a false "all weights are zero" blamed target_propensity before), and the
    # exact smoothed value's h**2 overflows
    for h in (1e183, 1e-200):
        with pytest.raises(ParameterError, match="`bandwidth` = .* times the logged densities"):
            ope.evaluate_continuous(df, bandwidth=h)
    with pytest.raises(ParameterError, match=r"`bandwidth\['pi'\]` = .* times the logged"):
        ope.evaluate_continuous(df, bandwidth={"pi": 1e183})
    from ope.simulate import ContinuousBandit

    with pytest.raises(ParameterError, match="`bandwidth` must be at most 1e"):
        ContinuousBandit(n_features=1, seed=0).smoothed_value("optimal", "cosine", 1e183)

    with pytest.raises(ParameterError, match="`estimators`"):
        ope.evaluate_continuous(df, estimators=["mips"])
    with pytest.raises(ValidationError, match=r"`candidates`\['c'\] must have shape"):
        ope.evaluate_continuous(df, candidates={"c": np.zeros(3)})


def test_a_bandwidth_on_the_actions_own_scale_is_accepted_at_any_scale():
    """Actions scaled by 1e-160 (densities by 1e160): a bandwidth scaled alike gives the same
    estimates, as bandwidth='slope' does; only h p enters a weight."""
    from ope.simulate import ContinuousBandit

    table = ContinuousBandit(n_features=1, seed=0).sample(400, rng=0).to_pandas()
    small = table.copy()
    for column in [c for c in table.columns if c == "action" or c.startswith("target__")]:
        small[column] = table[column] * 1e-160
    small["density"] = table["density"] * 1e160
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kw = {"policies": ["optimal"], "estimators": ("ips", "snips")}
        one = ope.evaluate_continuous(table, bandwidth=0.3, **kw).table()
        tiny = ope.evaluate_continuous(small, bandwidth=0.3e-160, **kw).table()
    np.testing.assert_allclose(tiny["value"], one["value"], rtol=1e-9)


def test_dr_without_a_context_says_what_to_give():
    df = _rows().drop(columns=["x0", "q", "v__pi"])
    with pytest.raises(ParameterError, match="no numeric context column"):
        quiet(lambda: ope.evaluate_continuous(df, estimators=["dr"], bandwidth=0.5))
    ev = quiet(lambda: ope.evaluate_continuous(df, bandwidth=0.5))  # default: no dr then
    assert ev.model_estimates == {}


# -------------------------------------------------------------------------------- DSJSON
def _cats_lines():
    return [
        {
            "_label_ca": {"cost": 0.5, "pdf_value": 0.125, "action": 3.0},
            "EventId": "e0",
            "c": {"room": "kitchen", "hour": 9, "outside": {"temp": 12.5}},
            "pdf": [
                {"left": 0.0, "right": 2.0, "pdf_value": 0.25},
                {"left": 2.0, "right": 6.0, "pdf_value": 0.125},
            ],
        },
        {
            "_label_ca": {"cost": 1.5, "pdf_value": 0.25, "action": 1.0},
            "c": {"room": "hall", "hour": 17},
            "pdrop": 0.5,
        },
        {"EventId": "e2", "c": {"room": "hall"}},  # no label: excluded, counted
        {"_label_ca": {"cost": 0.0, "pdf_value": 0.1, "action": 4.0}, "_skipLearn": True},
        {"_label_ca": {"cost": -1.0, "pdf_value": 0.2, "action": 5.5}, "c": {"room": "hall"}},
    ]


def test_a_cut_gzip_cats_file_is_named_at_its_damage(tmp_path):
    """A truncated gzip continuous-action file: the error says which lines decode (counted
    independently with zlib on the cut bytes), not only that the file is damaged."""
    events = [dict(_cats_lines()[0], EventId=f"e{i}") for i in range(3000)]
    whole = gzip.compress(("\n".join(json.dumps(x) for x in events) + "\n").encode())
    cut = tmp_path / "cut.json"
    cut.write_bytes(whole[: len(whole) // 2])
    decodes = zlib.decompressobj(31).decompress(whole[: len(whole) // 2]).count(b"\n")
    assert 0 < decodes < 3000
    with pytest.raises(DataFileError, match="damaged or truncated gzip stream") as info:
        ope.read_continuous(cut)
    assert f"lines 0 to {decodes - 1:,} decode, and line {decodes:,} is cut" in str(info.value)


def _write(path, lines, gz=False):
    text = "\n".join(json.dumps(x) for x in lines) + "\n\n"
    if gz:
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    return path


@pytest.mark.parametrize("gz", [False, True])
def test_continuous_dsjson_reads_as_vw_writes_it(tmp_path, gz):
    path = _write(tmp_path / ("cats.json.gz" if gz else "cats.json"), _cats_lines(), gz)
    logs = ope.read_continuous(path)
    assert logs.n == 3
    np.testing.assert_array_equal(logs.action, [3.0, 1.0, 5.5])
    np.testing.assert_array_equal(logs.density, [0.125, 0.25, 0.2])
    np.testing.assert_array_equal(logs.reward, [-0.5, -1.5, 1.0])
    np.testing.assert_array_equal(logs.weight, [1.0, 2.0, 1.0])
    assert list(logs.context.columns) == [
        "c.hour",
        "c.outside.temp",
        "c.room=hall",
        "c.room=kitchen",
    ]
    np.testing.assert_array_equal(logs.context["c.hour"], [9.0, 17.0, 0.0])
    np.testing.assert_array_equal(logs.context["c.room=kitchen"], [1.0, 0.0, 0.0])
    assert any("1 line(s) with _skipLearn" in n and "line 3" in n for n in logs.notes)
    assert any("1 line(s) without _label_ca" in n and "line 2" in n for n in logs.notes)
    assert logs.support is not None
    assert logs.support[0][0] == 0.0 and logs.support[1][0] == 6.0
    assert math.isinf(logs.support[1][1])


def test_continuous_dsjson_faults_are_rejected_by_reason_and_line(tmp_path):
    """A line that breaks a rule is counted under its reason with its line number (as the
    DSJSON importer does): the file raises with the report under on_invalid="raise", and the
    others are read under "drop"; lines VW skips are counted and never raise."""

    def fault(change, reason, line, name):
        lines = _cats_lines()
        change(lines)
        path = _write(tmp_path / name, lines)
        with pytest.raises(ValidationError, match=rf"{reason}: 1 \(rows {line}\)") as info:
            ope.read_continuous(path)
        assert info.value.report.rejected[reason] == 1
        with pytest.warns(DroppedRowsWarning):
            logs = ope.read_continuous(path, on_invalid="drop")
        assert logs.report.rejected[reason] == 1 and logs.report.examples[reason] == (line,)
        assert logs.report.rows_read == 5 and logs.n == 2
        assert any(f"rejected ({reason}) and dropped (first: line {line})" in n for n in logs.notes)

    # the pdf says 0.125 at action 3
    fault(lambda ls: ls[0]["_label_ca"].update(pdf_value=0.25), "cats_pdf_mismatch", 0, "a.json")
    fault(lambda ls: ls[1].update(pdrop=1.0), "dsjson_pdrop_out_of_range", 1, "b.json")
    fault(lambda ls: ls[4]["_label_ca"].update(pdf_value=0.0), "cats_pdf_value_invalid", 4, "d")
    fault(lambda ls: ls[4]["_label_ca"].update(action="3"), "dsjson_field_type", 4, "e.json")
    fault(lambda ls: ls[4].update(EventId=ls[0]["EventId"]), "event_id_duplicate", 4, "f.json")
    cb = {"_label_cost": -1.0, "_label_probability": 0.5, "_labelIndex": 0, "a": [1, 2]}
    fault(lambda ls: ls.__setitem__(1, cb), "dsjson_kind_mismatch", 1, "g.json")
    path = tmp_path / "c.json"
    path.write_text("\n".join(json.dumps(x) for x in _cats_lines()) + "\n{not json\n")
    with pytest.warns(DroppedRowsWarning):
        logs = ope.read_continuous(path, on_invalid="drop")
    assert logs.report.rejected["dsjson_bad_json"] == 1 and logs.report.rows_read == 6
    # skipped lines alone never raise; a name VW uses (.dsjson) or none at all, gzipped or
    # with a byte-order mark, is read as DSJSON by its first bytes
    body = ("\n".join(json.dumps(x) for x in _cats_lines()) + "\n").encode()
    for name, data in (
        ("x.dsjson", body),
        ("no_suffix", gzip.compress(body)),
        ("bom.json", b"\xef\xbb\xbf" + body),
    ):
        (tmp_path / name).write_bytes(data)
        logs = ope.read_continuous(tmp_path / name)
        assert logs.n == 3 and logs.report.rows_read == 5
        assert logs.report.rejected == {"dsjson_skip_learn": 1, "dsjson_unlabeled": 1}


def test_a_candidate_outside_the_logged_pdf_gets_no_weight(tmp_path):
    logs = ope.read_continuous(_write(tmp_path / "cats.json", _cats_lines()))
    ev = quiet(
        lambda: ope.evaluate_continuous(
            logs, candidates={"far": np.array([7.0, 1.0, 5.0])}, bandwidth=1.0, estimators="ips"
        )
    )
    assert ev.window.loc[0, "outside_support"] == 1  # 7.0 beyond the first line's [0, 6]


# -------------------------------------------------------------------------- CLI and report
def test_cli_runs_and_writes_the_report(tmp_path, capsys):
    env = ContinuousBandit(n_features=1, seed=0)
    path = tmp_path / "logs.parquet"
    pq.write_table(env.sample(1500, rng=0), path)
    out = tmp_path / "report.html"
    code = main(
        [
            "continuous",
            str(path),
            "--policy",
            "optimal",
            "shifted",
            "--constant",
            "zero<b>=0",
            "--kernel",
            "epanechnikov",
            "--report",
            str(out),
            "--json",
        ]
    )
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["ok"] is True
    assert doc["kernel"] == "epanechnikov"
    assert set(doc["verdicts"]) == {"optimal", "shifted", "zero<b>"}
    dr = [r for r in doc["evaluation"]["estimates"] if r["estimator"] == "dr"]
    assert {r["policy"] for r in dr} == {"optimal", "shifted", "zero<b>"}
    page = out.read_text()
    assert "Continuous actions: bandwidths and kernel windows" in page
    assert "zero&lt;b&gt;" in page and "zero<b>" not in page


def test_report_refuses_a_foreign_evaluation():
    from ope.report import render_report

    df = _rows()
    ev = quiet(lambda: ope.evaluate_continuous(df, bandwidth=0.5, estimators="ips"))
    other = quiet(lambda: ope.evaluate_continuous(df, bandwidth=0.4, estimators="ips"))
    with pytest.raises(ParameterError, match="`continuous` and `evaluation` disagree"):
        render_report(evaluation=other.evaluation, continuous=ev)
    with pytest.raises(ParameterError, match="`continuous` must be"):
        render_report(evaluation=ev.evaluation, continuous=ev.evaluation)


# ------------------------------------------------------------------------------ obp parity
def _obp_python():
    import os

    return os.environ.get("OPE_BENCH_OBP_PYTHON", "/tmp/obp-venv/bin/python")


@pytest.mark.skipif(
    not Path(_obp_python()).exists(),
    reason="no obp interpreter (set OPE_BENCH_OBP_PYTHON to a Python with obp==0.5.7)",
)
def test_parity_with_obp_kernel_estimators():
    import sys

    sys.path.insert(0, str(BENCH))
    import continuous as bench

    out = bench.bench_parity(_obp_python())
    assert "obp_version" in out, out
    assert out["max_abs_difference"]["ope_vs_obp"] < 1e-12
    assert out["max_abs_difference"]["ope_vs_numpy"] < 1e-12


# ------------------------------------------------------------------ review: edges and verdicts
def test_a_candidate_beyond_the_logged_actions_is_not_evaluable_whatever_the_ess():
    # gaussian-kernel weights of 1e-56 still have a Kish ESS of hundreds (ESS ignores scale):
    # the window, not the ESS, says that no logged action is near
    gen = np.random.default_rng(0)
    a = gen.uniform(0.0, 1.0, 2000)
    df = pd.DataFrame({"action": a, "density": 1.0, "reward": a + gen.normal(0, 0.1, 2000)})
    ev = quiet(
        lambda: ope.evaluate_continuous(
            df, candidates={"c": np.full(2000, 3.0), "mid": np.full(2000, 0.5)}, estimators="snips"
        )
    )
    assert ev.window.set_index("policy").loc["c", "window_rows"] == 0
    assert ev.verdicts["c"].startswith("not evaluable") and "0 logged action" in ev.verdicts["c"]
    assert ev.verdicts["mid"] == "evaluable"


def test_a_density_and_one_action_per_row_for_one_candidate_is_refused():
    env = ContinuousBandit(seed=0)
    t = env.sample(500, rng=0).to_pandas()
    t["target__noisy_optimal"] = 0.0
    with pytest.raises(ValidationError, match="'noisy_optimal' has a density.*and one action"):
        ope.read_continuous(t)
    # given again as actions, the candidate replaces the logs' density-form one
    logs = ope.read_continuous(env.sample(500, rng=0))
    again = logs.with_candidates({"noisy_optimal": np.zeros(500)})
    assert "noisy_optimal" not in again.densities and again.candidates["noisy_optimal"].ndim == 1


def test_sampling_weights_enter_the_window_diagnostics():
    env = ContinuousBandit(seed=0)
    t = env.sample(4000, rng=2).to_pandas()
    heavy = np.zeros(4000)
    heavy[:20] = 1e4
    t["weight"] = 1.0 + heavy
    ev = quiet(lambda: ope.evaluate_continuous(t, ["optimal"], bandwidth=0.2, estimators="ips"))
    w = kernel((t["target__optimal"] - t["action"]) / 0.2) / (0.2 * t["density"])
    sw = w * t["weight"]
    row = ev.window.iloc[0]
    assert row["ess"] == pytest.approx(float(sw.sum() ** 2 / (sw**2).sum()), rel=1e-10)
    assert row["mean_weight"] == pytest.approx(float(sw.sum() / t["weight"].sum()), rel=1e-10)


def test_the_logged_support_zeroes_samples_outside_it_too(tmp_path):
    logs = ope.read_continuous(_write(tmp_path / "cats.json", _cats_lines()))
    # row 0's pdf covers [0, 6]; rows 1 and 2 have no pdf (support unbounded)
    samples = np.array([[7.0, 3.5], [1.0, 1.2], [5.0, 5.5]])
    ev = quiet(
        lambda: ope.evaluate_continuous(
            logs, candidates={"s": samples}, bandwidth=1.0, estimators="ips"
        )
    )
    k0 = (0.0 + kernel(0.5)) / 2  # the sample at 7.0 adds nothing
    w0 = k0 / (1.0 * 0.125)
    w = [w0] + [float(kernel(samples[i] - logs.action[i]).mean() / logs.density[i]) for i in (1, 2)]
    s = logs.weight  # row 1 has pdrop 0.5: Horvitz-Thompson over the population's rows
    assert ev["s", "ips"].value == pytest.approx(
        float(np.sum(s * np.array(w) * logs.reward) / s.sum())
    )
    assert ev.window.iloc[0]["outside_support"] == 1


def test_degenerate_inputs_are_ope_errors(tmp_path):
    empty = pd.DataFrame({"action": [], "density": [], "reward": []}, dtype=float)
    with pytest.raises(ValidationError, match="0 row"):
        ope.read_continuous(empty)
    with pytest.raises(ValidationError, match="0 row"):
        ope.evaluate_continuous(empty)
    big = _rows().assign(x0=[0.0, 1e300, 1.0, 2.0])
    with pytest.raises(ValidationError, match="`reward_model`: the context"):
        quiet(lambda: ope.evaluate_continuous(big, bandwidth=0.5, estimators=["dr"]))
    bad = tmp_path / "bad.json.gz"
    raw = gzip.compress(("\n".join(json.dumps(x) for x in _cats_lines() * 50)).encode())
    bad.write_bytes(raw[:40] + bytes(b ^ 0xFF for b in raw[40:80]) + raw[80:])
    with pytest.raises(
        DataFileError, match="is a damaged or truncated gzip stream: no line decodes"
    ):
        ope.read_continuous(bad)
    import pyarrow as pa

    twice = pa.table(
        [[0.1, 0.2], [1.0, 1.0], [0.0, 1.0], [0.3, 0.4]],
        names=["action", "density", "reward", "action"],
    )
    with pytest.raises(SchemaError, match="'action' twice"):
        ope.read_continuous(twice)
    with pytest.raises(ParameterError, match="`estimators`"):
        ope.evaluate_continuous(_rows(), estimators=None)
    with pytest.raises(ParameterError, match="confidence_level"):
        ope.evaluate_continuous(_rows(), confidence_level="x")


def test_dsjson_without_pdrop_has_no_sampling_weights(tmp_path):
    lines = _cats_lines()
    del lines[1]["pdrop"]
    logs = ope.read_continuous(_write(tmp_path / "cats.json", lines))
    assert logs.weight is None


def test_dsjson_lines_without_a_context_keep_their_fields(tmp_path):
    """A DSJSON line may have no `c` (no context): its EventId, pdrop, pdf segments, Timestamp,
    Version and VWState are the DSJSON fields they are, not features, whether the file's other
    lines have a `c` or not: 2,500 such lines are 2,500 events with their ids (not 2,500
    features `EventId=e<i>`, over the limit), and pdrop weighs the rows. A numeric `pdf` there
    is the line's dsjson_field_type, as on a line with `c`."""
    label = {"_label_ca": {"cost": 0.5, "pdf_value": 0.125, "action": 3.0}}
    many = [{**label, "EventId": f"e{i}"} for i in range(2500)]
    logs = ope.read_continuous(_write(tmp_path / "many.json", many))
    assert logs.n == 2500 and logs.context.shape == (2500, 0) and logs.notes == ()
    assert logs.table.column("event_id").to_pylist()[:3] == ["e0", "e1", "e2"]
    every_other = [
        {**label, "EventId": f"e{i}", "pdrop": 0.5, **({"c": {"x": 1}} if i % 2 == 0 else {})}
        for i in range(12)
    ]
    logs = ope.read_continuous(_write(tmp_path / "noc.json", every_other))
    np.testing.assert_array_equal(logs.weight, np.full(12, 2.0))
    assert logs.context.to_dict("list") == {"c.x": [1.0, 0.0] * 6} and logs.notes == ()
    assert logs.table.column("event_id").to_pylist() == [f"e{i}" for i in range(12)]
    segments = [{"left": 0.0, "right": 8.0, "pdf_value": 0.125}]
    for extra in (
        {"Timestamp": "t"},
        {"Version": "1"},
        {"VWState": {"m": "N/A"}},
        {"pdf": segments},
    ):
        logs = ope.read_continuous(_write(tmp_path / "one.json", [{**label, **extra}] * 3))
        assert logs.context.shape == (3, 0) and logs.notes == (), extra
        assert (logs.support is not None) == ("pdf" in extra), extra
    numeric_pdf = [{**label, "EventId": e} for e in "ab"] + [{**label, "EventId": "c", "pdf": 3}]
    with pytest.warns(DroppedRowsWarning):
        logs = ope.read_continuous(_write(tmp_path / "pdf.json", numeric_pdf), on_invalid="drop")
    assert logs.report.rejected == {"dsjson_field_type": 1} and logs.context.shape == (2, 0)


def test_a_cats_line_is_read_key_by_key_only_when_its_record_refuses_it(tmp_path, monkeypatch):
    """A DSJSON line as VW's writers write it (`Version`, `VWState`, `pdf`, `pdrop`, `c`) is
    decoded once, as one record, and its keys are not parsed again; a line with another key is
    read key by key, once. In a file in VW's plain JSON form, the line that shows the form is
    read key by key and the others decode whole, once."""
    import ope.continuous as continuous_module

    seen = []
    real = continuous_module.object_fields
    monkeypatch.setattr(
        continuous_module, "object_fields", lambda line: seen.append(bytes(line)) or real(line)
    )
    lines = _cats_lines()
    lines[0] |= {"Version": "1", "VWState": {"m": "N/A"}, "Timestamp": "t"}
    other = {**lines[4], "EventId": "e5", "g": 1}
    path = _write(tmp_path / "cats.json", [*lines, other])
    assert ope.read_continuous(path).n == 4
    assert seen == [json.dumps(other).encode()]
    seen.clear()
    plain = [{"_label_ca": lines[0]["_label_ca"], "f": i} for i in range(3)]
    assert ope.read_continuous(_write(tmp_path / "plain.json", plain)).n == 3
    assert seen == [json.dumps(plain[0]).encode()]


def test_a_bandwidth_mapping_skips_density_candidates_and_dr_alone_shows_dr_alone():
    env = ContinuousBandit(seed=0)
    t = env.sample(3000, rng=0, samples=5)
    kernel_ones = ["logger_mean", "optimal", "halfway", "shifted"]
    ev = quiet(
        lambda: ope.evaluate_continuous(
            t, bandwidth={p: 0.3 for p in kernel_ones}, estimators=["dr"]
        )
    )
    assert set(ev.table()["estimator"]) == {"dr"}
    assert ev.bandwidth["noisy_optimal"] is None and ev.bandwidth["optimal"] == 0.3
    assert ev.rule == "given"


def test_cli_checks_the_report_and_the_constants_first(tmp_path, capsys):
    env = ContinuousBandit(n_features=1, seed=0)
    path = tmp_path / "logs.parquet"
    pq.write_table(env.sample(300, rng=0), path)
    assert main(["continuous", str(path), "--report", str(tmp_path / "r.txt")]) == 2
    assert "--report" in capsys.readouterr().err
    for spec in ("=1", " =1", "x=nan", "x=inf", "x"):
        assert main(["continuous", str(path), "--constant", spec]) == 2, spec
        assert "--constant" in capsys.readouterr().err
    code = main(["continuous", str(path), "--policy", "optimal", "--constant", "optimal=0.5"])
    assert code == 2 and "named twice" in capsys.readouterr().err
    assert main(["continuous", str(path), "--constant", "a=b=1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # the constant is evaluated beside the logs' own candidates (all of them, no --policy)
    assert set(doc["verdicts"]) == {"a=b", *ope.read_continuous(path).policies}
    assert main(["continuous", str(path), "--constant", "optimal=3"]) == 2
    assert "also a candidate of the logs" in capsys.readouterr().err


def test_a_window_partly_outside_the_logged_actions_is_noted():
    # uniform logged actions on [0, 1] (density 1); a candidate at 1.2 with h = 0.3: the
    # window is evaluable (hundreds of rows) but its mean weight is P(N(1.2, 0.3) in [0, 1])
    gen = np.random.default_rng(3)
    a = gen.uniform(0.0, 1.0, 2000)
    df = pd.DataFrame({"action": a, "density": 1.0, "reward": a, "target__edge": 1.2})
    ev = quiet(lambda: ope.evaluate_continuous(df, bandwidth=0.3, estimators="ips"))
    assert ev.verdicts["edge"] == "evaluable"
    assert ev.window.iloc[0]["mean_weight"] == pytest.approx(0.25, abs=0.05)
    assert any("mean weight well below 1 for edge" in n for n in ev.evaluation.notes)


def test_continuous_inputs_that_pyarrow_or_the_decoder_cannot_take_are_data_errors(tmp_path):
    """A file name that is not UTF-8 (pyarrow cannot open it: a UnicodeEncodeError before) is a
    DataFileError naming the file; a DSJSON line nested past the decoder's recursion limit (a
    RecursionError before) is a line rejected as not JSON."""
    from ope.exceptions import DataFileError
    from ope.simulate import ContinuousBandit

    table = ContinuousBandit(n_features=1, seed=0).sample(50, rng=0).to_pandas()
    odd = tmp_path / os.fsdecode(b"c\xff.parquet")
    table.to_parquet(tmp_path / "plain.parquet")
    os.rename(tmp_path / "plain.parquet", odd)
    with pytest.raises(DataFileError, match="not valid UTF-8"):
        ope.read_continuous(odd)
    deep = tmp_path / "deep.json"
    label = '{"_label_ca": {"cost": 0.5, "pdf_value": 0.1, "action": 3.0}, "c": {"x": '
    deep.write_text(label + "[" * 100_000 + "]" * 100_000 + "}}\n")
    with pytest.raises(ValidationError, match=r"dsjson_bad_json: 1 \(rows 0\)"):
        ope.read_continuous(deep)


def test_cli_messages_name_the_flags_ope_continuous_has(tmp_path, capsys):
    """An API keyword is spelled as the running command's own flag (--context-column here),
    and advice whose flag the command lacks (--ci) keeps the API's words."""
    from ope.cli import _cli_text, _COMMAND

    path = _write(tmp_path / "cats.json", _cats_lines())
    code = main(["continuous", str(path), "--constant", "c=3", "--context-column", "nope"])
    err = capsys.readouterr().err
    assert code == 65 and "`--context-column`: no column 'nope'" in err
    advice = "Use ci(method='betting') with an a priori reward_range, or clip."
    for command, expected in (
        ("continuous", advice),
        ("evaluate", "Use --ci betting with an a priori --reward-range, or clip."),
    ):
        token = _COMMAND.set(command)
        try:
            assert _cli_text(advice) == expected, command
        finally:
            _COMMAND.reset(token)


def test_continuous_dsjson_lines_are_decoded_each_on_its_own(tmp_path):
    """Every line is its own JSON document: two objects on one line, a number beyond a
    double's range (float or integer) are that line's faults; a repeat of an earlier event's
    id is one whether that event was read or not (as read_logs); a gzipped CSV stays a CSV;
    evaluate_continuous takes on_invalid for what it reads."""
    good = [json.dumps(x) for x in _cats_lines()]
    label = '{"_label_ca": {"cost": 0.5, "pdf_value": 0.1, "action": 3.0}, '
    lines = [
        *good,
        label + '"EventId": "A", "c": {"v": [1, 2]}}, ' + label + '"EventId": "B"}',  # 5
        label + '"EventId": "C", "c": {"x": 1' + "0" * 400 + "}}",  # 6: an int past 1e308
        '{"_label_ca": {"cost": 1e999, "pdf_value": 0.1, "action": 3.0}}',  # 7
        label.replace("0.1", "0.0") + '"EventId": "D", "c": {}}',  # 8: density 0
        label + '"EventId": "D", "c": {}}',  # 9: repeats line 8's id
        label + '"EventId": "E"}',  # 10
        " " + label + '"EventId": "F"}',  # 11: VW skips a line not starting with {
    ]
    path = tmp_path / "mixed.json"
    path.write_text("\n".join(lines) + "\n")
    with pytest.warns(DroppedRowsWarning):
        logs = ope.read_continuous(path, on_invalid="drop")
    r = logs.report
    assert r.rows_read == 12 and r.rows_used == 4
    assert r.rejected == {
        "dsjson_not_object": 1,
        "dsjson_bad_json": 1,
        "dsjson_field_type": 2,
        "cats_pdf_value_invalid": 1,
        "event_id_duplicate": 1,
        "dsjson_skip_learn": 1,
        "dsjson_unlabeled": 1,
    }
    assert r.examples["dsjson_bad_json"] == (5,) and r.examples["dsjson_field_type"] == (6, 7)
    assert r.examples["event_id_duplicate"] == (9,)
    table = ContinuousBandit(n_features=1, seed=0).sample(300, rng=0).to_pandas()
    csv = tmp_path / "logs.csv.gz"
    table.to_csv(csv, index=False, compression="gzip")
    assert ope.read_continuous(csv).n == 300
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        ev = ope.evaluate_continuous(
            path, candidates={"c": np.full(4, 3.0)}, bandwidth=1.0, estimators="ips",
            on_invalid="drop",
        )  # fmt: skip
    assert any(issubclass(w.category, DroppedRowsWarning) for w in seen)
    assert math.isfinite(ev["c", "ips"].value)
    # the evaluation's validation is the file's lines, not the weighted table built from them
    assert ev.evaluation.report == logs.report
    # logs built by the caller have no file report: the evaluation keeps its own
    built = ContinuousLogs(
        action=logs.action, density=logs.density, reward=logs.reward,
        candidates={"c": np.full(logs.n, 3.0)},
    )  # fmt: skip
    ev = quiet(lambda: ope.evaluate_continuous(built, bandwidth=1.0, estimators="ips"))
    assert ev.evaluation.report.rows_used == logs.n and ev.to_dict()["evaluation"]["validation"]


@pytest.mark.parametrize("gz", [False, True])
def test_continuous_dsjson_read_in_chunks_is_the_file_read_whole(tmp_path, monkeypatch, gz):
    """The lines are decoded and checked a chunk at a time: chunks of 1, 2 and 3 lines give the
    table, support, notes and report of one chunk for the whole file, a repeated EventId is
    found in a later chunk than its first, blank lines keep their numbers, and the contexts of
    different chunks (different features) line up, 0 where a line has none."""
    import ope.continuous as continuous_module

    label = '{"_label_ca": {"cost": 0.5, "pdf_value": 0.1, "action": 3.0}, '
    lines = [
        *(json.dumps(x) for x in _cats_lines()),
        "",  # 5: blank, not counted, numbered
        label + '"EventId": "e0", "c": {"late": 2, "only_dup": 7}}',  # 6: repeats line 0's id
        "not json",  # 7
        label + '"EventId": "z", "c": {"late": 4}}',  # 8: a feature the first chunks lack
    ]
    path = tmp_path / ("mixed.json.gz" if gz else "mixed.json")
    text = "\n".join(lines)  # no line break after the last line
    if gz:
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        path.write_text(text)

    def read():
        with pytest.warns(DroppedRowsWarning):
            return ope.read_continuous(path, on_invalid="drop")

    whole = read()
    r = whole.report
    assert r.rows_read == 8 and r.rows_used == 4
    assert r.examples["event_id_duplicate"] == (6,) and r.examples["dsjson_not_object"] == (7,)
    np.testing.assert_array_equal(whole.context["c.late"], [0.0, 0.0, 0.0, 4.0])
    assert "c.only_dup" not in whole.context.columns  # only on a line rejected: no column
    assert whole.table.column("event_id").to_pylist() == [
        "e0",
        f"{path.name}:1",
        f"{path.name}:4",
        "z",
    ]
    for size in (1, 2, 3):
        monkeypatch.setattr(continuous_module, "_CATS_CHUNK_LINES", size)
        part = read()
        assert part.table.equals(whole.table), size
        assert part.report == whole.report and part.notes == whole.notes
        for a, b in zip(part.support, whole.support, strict=True):
            np.testing.assert_array_equal(a, b)


def test_continuous_reader_sends_cb_and_ccb_dsjson_to_the_dsjson_importer(tmp_path, capsys):
    """A CB or CCB file (its first event has another kind's label) is refused as a whole with
    the commands that read it, as the DSJSON importer sends continuous files here; a CB line
    after a continuous-action first event stays that line's dsjson_kind_mismatch."""
    cb = {"_label_cost": -1.0, "_label_probability": 0.5, "_labelIndex": 0, "a": [1, 2],
          "p": [0.5, 0.5], "EventId": "cb0", "c": {"x": 1}}  # fmt: skip
    ccb = {"_outcomes": [{"_label_cost": 0.0, "_a": [0], "_p": [1.0]}], "EventId": "ccb0"}
    for first in (cb, ccb):
        path = _write(tmp_path / "cb.json", [{"_skipLearn": True, **first}, first, *_cats_lines()])
        with pytest.raises(
            DataFileError, match=r"CB or CCB DSJSON \(line 1, the first labelled event"
        ):
            ope.read_continuous(path)
        assert main(["continuous", str(path), "--constant", "c=1", "--json"]) == 65
        error = json.loads(capsys.readouterr().out)["error"]
        assert "ope import dsjson FILE" in error["message"]
    path = _write(tmp_path / "mixed.json", [*_cats_lines(), cb])
    with pytest.warns(DroppedRowsWarning):
        logs = ope.read_continuous(path, on_invalid="drop")
    assert logs.report.rejected["dsjson_kind_mismatch"] == 1


def test_continuous_command_without_a_candidate_names_its_flag(tmp_path, capsys):
    """Logs without candidate columns and no --constant: the command names --constant (the API
    names its arguments)."""
    path = _write(tmp_path / "cats.json", _cats_lines())
    with pytest.raises(SchemaError, match=r"none was given \(`candidates`, `densities`\)"):
        quiet(lambda: ope.evaluate_continuous(path))
    assert main(["continuous", str(path), "--json"]) == 65
    message = json.loads(capsys.readouterr().out)["error"]["message"]
    assert "pass --constant NAME=VALUE" in message and "`candidates`" not in message


@pytest.mark.parametrize("case", ["densities_tiny", "actions_huge"])
def test_overflowing_weights_or_actions_give_the_error_without_numpy_warnings(case):
    # the weights' overflow is refused by ope's own check: numpy's overflow warnings came first
    g = np.random.default_rng(0)
    n = 400
    x = g.normal(size=n)
    a = g.normal(0, 1, n)
    df = pd.DataFrame(
        {
            "x0": x,
            "action": a,
            "density": np.exp(-(a**2) / 2) / np.sqrt(2 * np.pi),
            "reward": -((a - x) ** 2) / 10,
            "target__opt": x,
        }
    )
    if case == "densities_tiny":
        df["density"] = 1e-300
    else:
        df["action"] = 1e300 * np.sign(g.normal(size=n))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ope.OPEWarning)
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(ope.OPEError):
            ope.evaluate_continuous(df, ["opt"])


def test_continuous_dsjson_is_decoded_and_checked_with_collection_off(tmp_path, monkeypatch):
    """The CATS reader decodes and checks each chunk with the garbage collector off (its passes
    over the chunk's new objects were a third of the reading time), through the importers' one
    switch, and leaves collection on."""
    import gc

    import ope.continuous as continuous
    from ope.importers import _common

    assert "no_gc" in _common.__all__
    seen: list[bool] = []
    for name in ("_decode_cats", "_cats_chunk"):
        real = getattr(continuous, name)

        def spy(*args, _real=real):
            seen.append(gc.isenabled())
            return _real(*args)

        monkeypatch.setattr(continuous, name, spy)
    label = {"action": 1.0, "cost": -0.5, "pdf_value": 0.1}
    lines = [
        json.dumps({"_label_ca": {**label, "action": 1.0 + i}, "c": {"f": i}}) for i in range(4)
    ]
    path = tmp_path / "ca.json"
    path.write_text("\n".join(lines) + "\n")
    assert ope.read_continuous(path).n == 4
    assert seen == [False, False] and gc.isenabled()
