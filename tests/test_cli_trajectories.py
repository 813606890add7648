"""``ope evaluate`` on trajectory logs: the sequential estimators, equal to the Python API."""

from __future__ import annotations

import json
import math
import warnings

import pandas as pd
import pyarrow.parquet as pq
import pytest

from ope.cli import EXIT_DATAERR, EXIT_OK, EXIT_USAGE, main
from ope.evaluation import TABLE_COLUMNS
from ope.io import read_trajectories
from ope.sequential import sequential_estimate
from ope.simulate import TabularMDP

POLICIES = ("uniform", "greedy", "epsilon_greedy", "softmax")


@pytest.fixture(scope="module")
def steps(tmp_path_factory):
    """400 episodes of a small MDP (horizon 10: some are truncated), with the oracle Q and V."""
    env = TabularMDP(n_states=5, n_actions=2, horizon=10, seed=0)
    table = env.sample(400, rng=1, oracle=True)
    path = tmp_path_factory.mktemp("traj") / "steps.parquet"
    pq.write_table(table, path)
    return str(path), read_trajectories(table)


def _run_json(argv, capsys):
    code = main(argv)
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err  # exactly one document


def _expected(traj, policy, estimator, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sequential_estimate(traj, policy, estimator=estimator, **kwargs)


def _check_rows(doc, traj, estimators, kwargs_of):
    assert [(r["policy"], r["estimator"]) for r in doc["estimates"]] == [
        (p, e) for p in POLICIES for e in estimators
    ]
    for row in doc["estimates"]:
        assert list(row) == list(TABLE_COLUMNS)
        want = _expected(traj, row["policy"], row["estimator"], **kwargs_of(row))
        for key in ("value", "std_error", "ci_low", "ci_high", "ess"):
            assert math.isclose(row[key], getattr(want, key), rel_tol=1e-12, abs_tol=1e-12), key
        assert row["n"] == want.n == traj.n_episodes
        assert row["ci_method"] == want.ci_method
        assert row["notes"] == "; ".join(want.notes)


def test_trajectory_logs_are_recognised_and_match_the_api(steps, capsys):
    path, traj = steps
    code, doc, err = _run_json(
        [
            "evaluate",
            path,
            "--estimator",
            "is",
            "pdis",
            "wis",
            "wpdis",
            "--gamma",
            "0.95",
            "--json",
        ],
        capsys,
    )
    assert code == EXIT_OK and doc["kind"] == "trajectories" and doc["ok"] is True
    assert doc["episodes"] == 400 and doc["truncated_episodes"] == int(traj.truncated.sum()) > 0
    assert "within the logged steps" in doc["estimand"]
    assert doc["validation"]["rows_used"] == traj.n
    _check_rows(doc, traj, ("is", "pdis", "wis", "wpdis"), lambda r: {"gamma": 0.95})
    own = traj.table.column("propensity").to_numpy()
    logging = _expected(traj, own, "is", gamma=0.95)
    assert math.isclose(doc["logging_policy"]["value"], logging.value, rel_tol=1e-12)
    # each distinct warning once on stderr (the truncation one names every estimate)
    lines = [line for line in err.splitlines() if line.startswith("warning (OPEWarning)")]
    assert len(lines) == 1 and "truncated" in lines[0] and "wpdis (policy 'softmax')" in lines[0]


def test_model_based_estimators_with_tail_and_clipping(steps, capsys):
    path, traj = steps
    argv = [
        "evaluate",
        path,
        "--estimator",
        "dr",
        "wdr",
        "pdis",
        "--q-column",
        "q_target__{policy}",
        "--v-column",
        "v_target__{policy}",
        "--tail-value",
        "0.5",
        "--max-weight",
        "20",
        "--gamma",
        "0.9",
        "--confidence-level",
        "0.9",
        "--ci",
        "t",
        "--json",
    ]
    code, doc, _ = _run_json(argv, capsys)
    assert code == EXIT_OK and "bootstrapped with --tail-value 0.5" in doc["estimand"]

    def kwargs_of(row):
        kw = {
            "gamma": 0.9,
            "tail_value": 0.5,
            "max_weight": 20.0,
            "confidence_level": 0.9,
            "ci": "t",
        }
        if row["estimator"] != "pdis":
            p = row["policy"]
            kw.update(q_hat=f"q_target__{p}", v_hat=f"v_target__{p}")
        return kw

    _check_rows(doc, traj, ("dr", "wdr", "pdis"), kwargs_of)


def test_tail_column_per_policy(steps, capsys):
    path, traj = steps
    argv = [
        "evaluate",
        path,
        "--estimator",
        "wpdis",
        "--tail-column",
        "v_target__{policy}",
        "--json",
    ]
    code, doc, _ = _run_json(argv, capsys)
    assert code == EXIT_OK and doc["logging_policy"] is None
    _check_rows(doc, traj, ("wpdis",), lambda r: {"tail_value": f"v_target__{r['policy']}"})


@pytest.mark.parametrize("ci", ["hoeffding", "bernstein", "betting"])
def test_bounded_intervals(steps, capsys, ci):
    path, traj = steps
    argv = [
        "evaluate",
        path,
        "--estimator",
        "is",
        "pdis",
        "--ci",
        ci,
        "--reward-range",
        "0",
        "1",
        "--horizon",
        "10",
        "--weight-bound",
        "20",
        "--gamma",
        "0.95",
        "--tail-value",
        "0",
        "--json",
    ]
    code, doc, _ = _run_json(argv, capsys)
    assert code == EXIT_OK
    _check_rows(
        doc,
        traj,
        ("is", "pdis"),
        lambda r: {
            "gamma": 0.95,
            "tail_value": 0.0,
            "ci": ci,
            "reward_range": (0.0, 1.0),
            "horizon": 10,
            "weight_bound": 20.0,
        },
    )
    assert {r["ci_method"] for r in doc["estimates"]} == {ci}


def test_text_output_states_the_estimand(steps, capsys):
    path, traj = steps
    assert main(["evaluate", path, "--policy", "softmax"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "1 candidate policy x 2 sequential estimators on 400 episodes" in out
    assert "within the logged steps" in out
    want = _expected(traj, "softmax", "pdis")
    assert f"{want.value:.4g}" in out


def test_forced_and_mapped_trajectories(steps, tmp_path, capsys):
    _, traj = steps
    df = traj.table.to_pandas().rename(columns={"episode_id": "ep", "done": "terminal"})
    path = tmp_path / "theirs.parquet"
    df.to_parquet(path)
    mapping = ["--mapping", "episode_id=ep", "done=terminal"]
    for extra in ([], ["--trajectories"]):
        code, doc, _ = _run_json(
            ["evaluate", str(path), *mapping, *extra, "--policy", "greedy", "--json"], capsys
        )
        assert code == EXIT_OK and doc["kind"] == "trajectories"
        want = _expected(traj, "greedy", "pdis")
        assert math.isclose(doc["estimates"][0]["value"], want.value, rel_tol=1e-12)


@pytest.mark.parametrize(
    ("extra", "flag", "phrase"),
    [
        (["--gamma", "1.5"], "--gamma", "`--gamma` (discount factor) must be in [0, 1]"),
        (["--estimator", "ips"], "--estimator", "`--estimator` must be one of 'is'"),
        (["--estimator", "dr"], "--estimator", "pass `--q-column` and `--v-column`"),
        (
            ["--estimator", "dr", "--q-column", "q", "--v-column", "v"],
            "--q-column",
            "depend on the policy",
        ),
        (["--q-column", "q_target__{policy}"], None, "serves the model-based estimators"),
        (["--ci", "bogus"], "--ci", "`--ci` must be one of"),
        (["--confidence-level", "0"], "--confidence-level", "(0, 1)"),
        (
            [
                "--estimator",
                "pdis",
                "--ci",
                "hoeffding",
                "--reward-range",
                "0",
                "1",
                "--horizon",
                "ten",
            ],
            "--horizon",
            "`--horizon` must be a positive integer",
        ),
        (
            ["--estimator", "pdis", "--weight-bound", "-2"],
            "--weight-bound",
            "`--weight-bound` must be",
        ),
        (["--by", "state"], None, "--by applies to bandit logs only"),
        (["--tail-value", "nan"], "--tail-value", "must be a finite number"),
        (["--tail-column", "v"], "--tail-column", "depend on the policy"),
    ],
)
def test_bad_values_exit_2_naming_the_flag(steps, capsys, extra, flag, phrase):
    path, _ = steps
    assert main(["evaluate", path, *extra]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert phrase in err and "unexpected" not in err
    if flag:
        assert f"argument {flag}:" in err
    code, doc, _ = _run_json(["evaluate", path, *extra, "--json"], capsys)
    assert code == EXIT_USAGE and doc["ok"] is False and doc["error"]["type"] == "usage"


def test_trajectory_flags_on_bandit_logs_are_refused(tmp_path, capsys):
    path = tmp_path / "bandit.parquet"
    pd.DataFrame(
        {"action": [0, 1], "propensity": [0.5, 0.5], "reward": [1.0, 0.0], "target__a": [1.0, 0.0]}
    ).to_parquet(path)
    assert main(["evaluate", str(path), "--gamma", "0.9"]) == EXIT_USAGE
    assert "--gamma applies to trajectory logs only" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("drop", "extra", "kind"),
    [
        ("reward", [], "SchemaError"),
        (None, ["--policy", "nope"], "SchemaError"),
        (
            None,
            ["--estimator", "dr", "--q-column", "q_target__{policy}", "--v-column", "v_{policy}"],
            "SchemaError",
        ),
        (
            None,
            [
                "--ci",
                "hoeffding",
                "--estimator",
                "pdis",
                "--reward-range",
                "0",
                "0.5",
                "--horizon",
                "10",
                "--weight-bound",
                "20",
            ],
            "ValidationError",
        ),
    ],
)
def test_data_errors_exit_65_with_one_document(steps, tmp_path, capsys, drop, extra, kind):
    path, traj = steps
    if drop:
        path = str(tmp_path / "dropped.parquet")
        pq.write_table(traj.table.drop_columns([drop]), path)
    code, doc, _ = _run_json(["evaluate", path, "--trajectories", *extra, "--json"], capsys)
    assert code == EXIT_DATAERR and doc["ok"] is False and doc["error"]["type"] == kind


def test_invalid_steps_print_the_report(tmp_path, capsys):
    path = tmp_path / "bad_steps.parquet"
    pd.DataFrame(
        {
            "episode_id": [0, 0, 1],
            "step": [0, 1, 0],
            "action": [0, 1, 0],
            "propensity": [0.5, 0.0, 0.5],
            "reward": [1.0, 0.0, 1.0],
            "done": [False, True, True],
            "target__a": [1.0, 0.0, 1.0],
        }
    ).to_parquet(path)
    code, doc, _ = _run_json(["evaluate", str(path), "--json"], capsys)
    assert code == EXIT_DATAERR and doc["valid"] is False
    # the bad row, and the other step of its episode (an episode is used whole or not at all)
    assert doc["report"]["rows_rejected"] == 2
    assert doc["report"]["rejected"]["propensity_out_of_range"] == 1


@pytest.mark.parametrize("extra", [["--weight-bound", "5"], ["--horizon", "10"]])
def test_bounds_no_estimator_uses_are_refused(steps, capsys, extra):
    path, _ = steps
    assert main(["evaluate", path, "--estimator", "wis", "wpdis", *extra]) == EXIT_USAGE
    assert "serves the bounded intervals of is and pdis only" in capsys.readouterr().err


def test_logged_horizon_and_zero_tail_state_the_estimand(steps, capsys):
    path, traj = steps
    argv = [
        "evaluate",
        path,
        "--estimator",
        "pdis",
        "--ci",
        "bernstein",
        "--reward-range",
        "0",
        "1",
        "--horizon",
        "logged",
        "--weight-bound",
        "20",
        "--tail-value",
        "0",
        "--json",
    ]
    code, doc, _ = _run_json(argv, capsys)
    assert code == EXIT_OK and "stated as the target by --tail-value 0" in doc["estimand"]
    _check_rows(
        doc,
        traj,
        ("pdis",),
        lambda r: {
            "tail_value": 0.0,
            "ci": "bernstein",
            "reward_range": (0.0, 1.0),
            "horizon": "logged",
            "weight_bound": 20.0,
        },
    )


def test_advice_names_flags_even_where_python_leaves_the_value_open(steps, capsys):
    """Python's advice ``with reward_range=..., horizon=... and weight_bound=...`` reads as
    flags with their placeholders on the command line, and ``estimator='is' or 'pdis'`` as
    ``--estimator is or pdis``."""
    path, _ = steps
    code = main(["evaluate", path, "--estimator", "is", "wpdis"])
    err = capsys.readouterr().err
    assert code == EXIT_OK
    assert "--reward-range LO HI, --horizon H and --weight-bound M" in err
    assert "Pass --tail-value V (a value estimate" in err
    assert "--estimator is or pdis and --ci betting" in err
    for keyword in ("reward_range=", "horizon=", "weight_bound=", "tail_value=", "'pdis'"):
        assert keyword not in err
