"""SLOPE++ choice of an estimator's setting (ope.evaluation.tuning): the rule by hand, on logs,
against Open Bandit Pipeline's tuning on identical arrays, and the refusals."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import ope
from ope.evaluation import SettingChoice, slope_index, tune_setting
from ope.evaluation.tuning import SLOPE_C
from ope.exceptions import ParameterError, ValidationError
from ope.simulate import ContextualBandit

pytestmark = pytest.mark.filterwarnings("ignore::ope.exceptions.OPEWarning")

OBP_PYTHON = os.environ.get("OPE_BENCH_OBP_PYTHON", "/tmp/obp-venv/bin/python")


def test_the_rule_by_hand() -> None:
    # widest first: 0 (c .10), 1 (.05), 2 (.01); 2 is refused: |0.70 - 0.50| > .01 + C .10
    assert slope_index([0.50, 0.52, 0.70], [0.10, 0.05, 0.01]) == 1
    assert slope_index([0.50, 0.51, 0.52], [0.10, 0.05, 0.02]) == 2
    # the acceptance test at its boundary: |d| <= c_i + C c_j accepts
    c_i, c_j = 0.01, 0.1
    edge = c_i + SLOPE_C * c_j
    assert slope_index([0.0, edge * (1 - 1e-9)], [c_j, c_i]) == 1
    assert slope_index([0.0, edge * (1 + 1e-9)], [c_j, c_i]) == 0
    # ties in width: the later grid value is visited first (obp's order)
    assert slope_index([0.3, 0.3, 0.3], [0.1, 0.1, 0.1]) == 0
    # the order is by width, not by grid position
    assert slope_index([0.70, 0.52, 0.50], [0.01, 0.05, 0.10]) == 1
    with pytest.raises(ValidationError):
        slope_index([0.5, 0.4], [0.1])
    with pytest.raises(ValidationError):
        slope_index([0.5], [-0.1])


@pytest.fixture(scope="module")
def heavy():
    env = ContextualBandit(
        n_actions=5, n_contexts=50, seed=0, logging_temperature=0.3, logging_epsilon=0.01
    )
    return env.sample(3000, rng=0, distributions=True)


def test_tune_on_logs(heavy) -> None:
    choice = tune_setting(heavy, "clipped_ips")
    assert isinstance(choice, SettingChoice) and choice.setting == "max_weight"
    table = choice.table()
    for p, value in choice.chosen.items():
        mine = table[table.policy == p].reset_index(drop=True)
        assert value == mine["max_weight"].iloc[slope_index(mine["value"], mine["width"])]
        # each grid value's estimate is ope.evaluate's at that clip level
        one = ope.evaluate(heavy, estimators=("clipped_ips",), max_weight=value, rng=0)
        row = mine[mine["max_weight"] == value].iloc[0]
        assert row["value"] == pytest.approx(one.estimates[(p, "clipped_ips")].value, rel=1e-12)
        assert bool(row["chosen"])
    assert table["chosen"].sum() == len(choice.chosen)
    json.dumps(choice.to_dict())
    assert "by SLOPE" in choice.summary()
    dr = tune_setting(heavy, "switch_dr", grid=[1, 10, 100])
    assert set(dr.chosen.values()) <= {1.0, 10.0, 100.0}


def test_refusals(heavy) -> None:
    with pytest.raises(ParameterError, match="estimator"):
        tune_setting(heavy, "ips")
    for bad in ([], [1, 1], [0.0], [-1], "10", [float("inf")]):
        with pytest.raises(ParameterError, match="grid"):
            tune_setting(heavy, "clipped_ips", grid=bad)
    for d in (0.0, 0.5, 2):
        with pytest.raises(ParameterError, match="delta"):
            tune_setting(heavy, "clipped_ips", delta=d)
    # a tiny delta: the t quantile from its upper tail (1 - 1e-26 rounds to 1: an infinite
    # width, refused as "`widths` finite" before)
    for rule in ("slope", "mse"):
        tiny = tune_setting(heavy, "clipped_ips", grid=[1, 10], delta=1e-26, rule=rule)
        assert np.isfinite(tiny.table()["width"]).all()
    choice = tune_setting(heavy, "clipped_ips", grid=[1, 10])
    with pytest.raises(ParameterError, match="`policy` must name a candidate"):
        choice.value_for("nobody")


_OBP_SCRIPT = r"""
import json, sys
import numpy as np
from obp.ope import InverseProbabilityWeightingTuning
d = np.load(sys.argv[1])
out = {}
for j in range(d["pi"].shape[1]):
    n, k = d["action"].shape[0], int(d["n_actions"])
    dist = np.zeros((n, k, 1))
    dist[np.arange(n), :, 0] = d["full"][:, j, :]
    est = InverseProbabilityWeightingTuning(lambdas=list(d["grid"]), tuning_method="slope",
                                            delta=float(d["delta"]))
    est.estimate_policy_value(reward=d["reward"], action=d["action"], pscore=d["pscore"],
                              action_dist=dist, position=np.zeros(n, dtype=int))
    out[str(j)] = float(est.best_hyperparam)
print(json.dumps(out))
"""


@pytest.mark.skipif(
    not Path(OBP_PYTHON).exists(),
    reason=f"no obp interpreter at {OBP_PYTHON} (set OPE_BENCH_OBP_PYTHON)",
)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_clip_level_equals_obps_slope(tmp_path, seed) -> None:
    """The same arrays and grid: obp's IPW tuning (SLOPE, delta 0.1) and ope's choose the same
    clip level for every candidate."""
    env = ContextualBandit(
        n_actions=5, n_contexts=50, seed=seed, logging_temperature=0.3, logging_epsilon=0.01
    )
    table = env.sample(2000, rng=seed, distributions=True)
    names = list(env.candidate_policies)
    action = table["action"].to_numpy()
    full = np.stack(
        [np.stack(table[f"target_dist__{p}"].to_numpy(zero_copy_only=False)) for p in names],
        axis=1,
    )
    grid = np.array([1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0])
    arrays = tmp_path / "a.npz"
    np.savez(
        arrays,
        reward=table["reward"].to_numpy(),
        action=action,
        pscore=table["propensity"].to_numpy(),
        full=full,
        pi=np.column_stack([table[f"target__{p}"].to_numpy() for p in names]),
        n_actions=5,
        grid=grid,
        delta=0.1,
    )
    script = tmp_path / "obp_slope.py"
    script.write_text(_OBP_SCRIPT)
    done = subprocess.run(
        [OBP_PYTHON, str(script), str(arrays)], capture_output=True, text=True, check=True
    )
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    ours = tune_setting(table, "clipped_ips", grid=grid, delta=0.1)
    for j, p in enumerate(names):
        assert ours.chosen[p] == theirs[str(j)], p


def test_the_mse_rule_bounds_the_bias_by_the_paired_difference_with_the_unbiased_estimator():
    import warnings

    from scipy import stats

    import ope
    from ope.exceptions import ParameterError
    from ope.results import compare

    logs = ope.read_logs(ope.load_sample().path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ope.exceptions.OPEWarning)
        choice = ope.tune_setting(
            logs, "clipped_ips", grid=(2.0, 10.0, 50.0), rule="mse", reward_range=(0, 1)
        )
        ref = ope.evaluate(logs, estimators=("ips",), reward_range=(0, 1))
        at10 = ope.evaluate(logs, estimators=("clipped_ips",), max_weight=10.0, reward_range=(0, 1))
    assert choice.rule.startswith("smallest MSE bound")
    table = choice.table()
    row = table[(table["policy"] == "greedy") & (table["max_weight"] == 10.0)].iloc[0]
    est = at10.estimates[("greedy", "clipped_ips")]
    diff = compare(est, ref.estimates[("greedy", "ips")])
    bound = abs(diff.value) + stats.t.ppf(0.9, est.n - 1) * diff.std_error
    assert row["bias"] == pytest.approx(diff.value, rel=1e-12)
    assert row["mse_bound"] == pytest.approx(est.std_error**2 + bound**2, rel=1e-12)
    for policy, mine in table.groupby("policy"):  # the chosen value minimizes the bound
        best = mine.loc[mine["mse_bound"].idxmin(), "max_weight"]
        assert choice.value_for(policy) == best
    with pytest.raises(ParameterError, match="`rule`"):
        ope.tune_setting(logs, "clipped_ips", rule="oracle")


def test_the_command_line_tunes_and_states_the_rule(tmp_path):
    import contextlib
    import io
    import json
    import warnings

    import ope
    from ope import cli
    from ope.evaluation import tuning

    # the parser's restated choices are the library's
    assert cli.TUNABLE_ESTIMATORS == tuple(tuning.TUNABLE)
    assert cli.TUNING_RULES == tuple(tuning.RULES)
    assert cli.TUNING_DELTA == tuning.SLOPE_DELTA
    path = str(ope.load_sample().path)
    out = io.StringIO()
    argv = [
        "tune",
        path,
        "--estimator",
        "clipped_ips",
        "--rule",
        "mse",
        "--grid",
        "2",
        "10",
        "50",
        "--reward-range",
        "0",
        "1",
        "--json",
    ]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ope.exceptions.OPEWarning)
            code = cli.main(argv)
    assert code == 0
    doc = json.loads(out.getvalue())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ope.exceptions.OPEWarning)
        api = ope.tune_setting(
            ope.read_logs(path), "clipped_ips", grid=(2, 10, 50), rule="mse", reward_range=(0, 1)
        )
    assert doc["chosen"] == api.chosen and doc["rule"] == api.rule and doc["grid"] == [2, 10, 50]
    bad = io.StringIO()
    with contextlib.redirect_stdout(bad), contextlib.redirect_stderr(io.StringIO()):
        code = cli.main(["tune", path, "--estimator", "ips", "--json"])
    assert code == cli.EXIT_USAGE and json.loads(bad.getvalue())["ok"] is False
