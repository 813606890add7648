"""A catalogue of hostile command lines: each ends in its documented exit code and a message
that names the culprit (the flag, the column, the file), never a traceback.

Each case is pinned to the exit code (2 usage, 65 data), the error type of the ``--json``
document and a message pattern. The classes: flag values, outputs,
data problems named by a flag (columns of --by/--context-columns/--policy, policy tables), and
repeated flags.
"""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pandas as pd
import pytest

from ope.cli import EXIT_DATAERR, EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from tests.test_cli_contract import bandit_frame, one_document, run


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad_cli")
    f = {"root": root}
    df = bandit_frame(n=300, seed=1)
    f["logs"] = root / "logs.parquet"
    df.to_parquet(f["logs"])
    ids = np.repeat(df["event_id"].to_numpy(), 3)
    table = pd.DataFrame(
        {
            "event_id": ids,
            "policy": "p",
            "action": np.tile([0, 1, 2], len(df)),
            "probability": 1 / 3,
        }
    )
    f["table_ok"] = root / "table_ok.parquet"
    table.to_parquet(f["table_ok"])
    short = table.assign(probability=0.3)
    f["table_sum"] = root / "table_sum.parquet"
    short.to_parquet(f["table_sum"])
    f["table_no_id"] = root / "table_no_id.parquet"
    table.drop(columns=["event_id"]).to_parquet(f["table_no_id"])
    f["table_negative"] = root / "table_negative.parquet"
    table.assign(probability=np.tile([1.5, -0.5, 0.0], len(df))).to_parquet(f["table_negative"])
    f["not_parquet"] = root / "not_parquet.parquet"
    f["not_parquet"].write_bytes(b"PAR1 but not really")
    f["empty"] = root / "empty.parquet"
    df[["event_id", "action", "propensity", "reward", "target__greedy"]].iloc[:0].to_parquet(
        f["empty"]
    )
    f["split"] = root / "split"  # two files, the second without a candidate's column
    f["split"].mkdir()
    df.iloc[:150].to_parquet(f["split"] / "a.parquet")
    df.iloc[150:].drop(columns=["target__greedy"]).to_parquet(f["split"] / "b.parquet")
    f["existing"] = root / "existing.csv"
    f["existing"].write_text("keep\n")
    f["truth"] = root / "truth.html"  # a truth document under a report's name
    f["truth"].write_text('{"greedy": 0.5}')
    f["fifo"] = root / "truth.json"
    if hasattr(os, "mkfifo"):  # POSIX
        os.mkfifo(f["fifo"])
    campaign = root / "campaign"  # an OBD log CSV and the item table read beside it
    campaign.mkdir()
    f["obd_csv"], f["item_context"] = campaign / "all.csv", campaign / "item_context.csv"
    f["obd_csv"].write_text("x\n")
    f["item_context"].write_text("item_id,item_feature_0\n0,1\n")
    return f


L = ("--context-columns", "x0", "x1")

# id -> (argv over the files, exit code, error type, message pattern)
CATALOGUE = {
    # flag values: exit 2, the flag named
    "confidence level above 1": (
        lambda f: ["evaluate", f["logs"], "--confidence-level", "1.5"],
        EXIT_USAGE,
        "usage",
        r"argument --confidence-level: .*\(0, 1\)",
    ),
    "confidence level as percent": (
        lambda f: ["diagnose", f["logs"], "--confidence-level", "95"],
        EXIT_USAGE,
        "usage",
        r"argument --confidence-level: .*not 95",
    ),
    "confidence level not a number": (
        lambda f: ["evaluate", f["logs"], "--confidence-level", "high"],
        EXIT_USAGE,
        "usage",
        r"argument --confidence-level: invalid",
    ),
    "reward range reversed": (
        lambda f: ["evaluate", f["logs"], "--reward-range", "1", "0"],
        EXIT_USAGE,
        "usage",
        r"argument --reward-range: .*low < high",
    ),
    "reward range infinite": (
        lambda f: ["evaluate", f["logs"], "--reward-range", "0", "inf"],
        EXIT_USAGE,
        "usage",
        r"argument --reward-range: .*finite",
    ),
    "reward range one value": (
        lambda f: ["evaluate", f["logs"], "--reward-range", "0"],
        EXIT_USAGE,
        "usage",
        r"argument --reward-range: expected 2",
    ),
    "max weight negative": (
        lambda f: ["evaluate", f["logs"], "--estimator", "clipped_ips", "--max-weight", "-3"],
        EXIT_USAGE,
        "usage",
        r"argument --max-weight: .*positive finite",
    ),
    "max weight without clipped ips": (
        lambda f: ["evaluate", f["logs"], "--max-weight", "10"],
        EXIT_USAGE,
        "usage",
        r"argument --max-weight: `--max-weight` is a setting of clipped_ips",
    ),
    "clipped ips without max weight": (
        lambda f: ["evaluate", f["logs"], "--estimator", "clipped_ips"],
        EXIT_USAGE,
        "usage",
        r"argument --max-weight: estimator 'clipped_ips' needs its setting `--max-weight`: pass --max-weight W \(e\.g\. --max-weight 10\.0\)\.$",
    ),
    "unknown estimator": (
        lambda f: ["evaluate", f["logs"], "--estimator", "bogus"],
        EXIT_USAGE,
        "usage",
        r"argument --estimator: unknown estimator 'bogus'",
    ),
    "estimator listed twice": (
        lambda f: ["evaluate", f["logs"], "--estimator", "ips", "--estimator", "ips"],
        EXIT_USAGE,
        "usage",
        r"argument --estimator: .*twice",
    ),
    "unknown interval method": (
        lambda f: ["evaluate", f["logs"], "--ci", "bogus"],
        EXIT_USAGE,
        "usage",
        r"argument --ci: `--ci` must be one of",
    ),
    "weight bound zero": (
        lambda f: ["evaluate", f["logs"], "--weight-bound", "0"],
        EXIT_USAGE,
        "usage",
        r"argument --weight-bound: .*positive finite",
    ),
    "target width without new rows": (
        lambda f: ["diagnose", f["logs"], "--target-width", "0.01"],
        EXIT_USAGE,
        "usage",
        r"argument --new-rows: --target-width needs --new-rows",
    ),
    "new rows without target width": (
        lambda f: ["diagnose", f["logs"], "--new-rows", "1000"],
        EXIT_USAGE,
        "usage",
        r"argument --target-width: --new-rows needs --target-width",
    ),
    "new rows zero": (
        lambda f: ["diagnose", f["logs"], "--target-width", "0.01", "--new-rows", "0"],
        EXIT_USAGE,
        "usage",
        r"argument --new-rows: .*positive integer",
    ),
    "tau negative": (
        lambda f: ["evaluate", f["logs"], "--estimator", "switch_dr", "--tau", "-1"],
        EXIT_USAGE,
        "usage",
        r"argument --tau: SwitchDR: `--tau` must be a positive finite",
    ),
    "shrinkage without dros": (
        lambda f: ["evaluate", f["logs"], "--shrinkage", "3"],
        EXIT_USAGE,
        "usage",
        r"argument --shrinkage: `--shrinkage` is a setting of dros",
    ),
    "n resamples without bootstrap": (
        lambda f: ["evaluate", f["logs"], "--n-resamples", "100"],
        EXIT_USAGE,
        "usage",
        r"argument --n-resamples: .*only to --ci bootstrap",
    ),
    "n resamples zero": (
        lambda f: ["evaluate", f["logs"], "--ci", "bootstrap", "--n-resamples", "0"],
        EXIT_USAGE,
        "usage",
        r"argument --n-resamples: .*positive integer",
    ),
    "bounded interval without range": (
        lambda f: ["evaluate", f["logs"], "--ci", "betting"],
        EXIT_USAGE,
        "usage",
        r"argument --reward-range: --ci betting needs",
    ),
    "hoeffding of ips without weight bound": (
        lambda f: [
            "evaluate",
            f["logs"],
            "--estimator",
            "ips",
            "--ci",
            "hoeffding",
            "--reward-range",
            "0",
            "1",
        ],
        EXIT_USAGE,
        "usage",
        r"argument --weight-bound: --ci hoeffding of ips needs",
    ),
    "negative seed": (
        lambda f: ["evaluate", f["logs"], "--seed", "-5"],
        EXIT_USAGE,
        "usage",
        r"argument --seed: must be a whole number >= 0",
    ),
    "seed not an integer": (
        lambda f: ["evaluate", f["logs"], "--seed", "1.5"],
        EXIT_USAGE,
        "usage",
        r"argument --seed: invalid int value",
    ),
    "certify fraction one": (
        lambda f: ["learn", f["logs"], *L, "--certify-fraction", "1"],
        EXIT_USAGE,
        "usage",
        r"argument --certify-fraction: must be in",
    ),
    "scalar flag given twice": (
        lambda f: ["evaluate", f["logs"], "--ci", "t", "--ci", "normal"],
        EXIT_USAGE,
        "usage",
        r"argument --ci: given twice",
    ),
    "mapping without equals": (
        lambda f: ["validate", f["logs"], "--mapping", "reward"],
        EXIT_USAGE,
        "usage",
        r"argument --mapping: expects OUR_NAME=",
    ),
    "mapping one name twice": (
        lambda f: ["validate", f["logs"], "--mapping", "reward=a", "--mapping", "reward=b"],
        EXIT_USAGE,
        "usage",
        r"argument --mapping: reward is mapped twice",
    ),
    "trajectory flag on bandit logs": (
        lambda f: ["evaluate", f["logs"], "--gamma", "0.9"],
        EXIT_USAGE,
        "usage",
        r"--gamma applies to trajectory logs",
    ),
    "streaming on with a reward model": (
        lambda f: ["evaluate", f["logs"], "--estimator", "dr", "--streaming", "on"],
        EXIT_USAGE,
        "usage",
        r"argument --streaming: cannot stream with --estimator \(dr needs a reward model",
    ),
    "unknown flag": (
        lambda f: ["evaluate", f["logs"], "--confidence", "0.9"],
        EXIT_USAGE,
        "usage",
        r"unrecognized arguments: --confidence",
    ),
    "no command": (lambda f: [], EXIT_USAGE, "usage", r"required: COMMAND"),
    # outputs: exit 2, checked before the work
    "learn out is the input": (
        lambda f: ["learn", f["logs"], *L, "--out", f["logs"]],
        EXIT_USAGE,
        "usage",
        r"argument --out: .* is the input LOGS",
    ),
    "learn out exists": (
        lambda f: ["learn", f["logs"], *L, "--out", f["existing"]],
        EXIT_USAGE,
        "usage",
        r"argument --out: .* exists; pass --force",
    ),
    "learn out folder missing": (
        lambda f: ["learn", f["logs"], *L, "--out", f["root"] / "no" / "p.parquet"],
        EXIT_USAGE,
        "usage",
        r"argument --out: .* does not exist",
    ),
    "learn out is a directory": (
        lambda f: ["learn", f["logs"], *L, "--out", f["root"], "--force"],
        EXIT_USAGE,
        "usage",
        r"argument --out: .*(is a directory|must end)",
    ),
    "learn out wrong suffix": (
        lambda f: ["learn", f["logs"], *L, "--out", f["root"] / "p.json"],
        EXIT_USAGE,
        "usage",
        r"argument --out: .* must end in .parquet",
    ),
    "import out not parquet": (
        lambda f: ["import", "obd", f["obd_csv"], "--out", f["root"] / "imported.csv"],
        EXIT_USAGE,
        "usage",
        r"argument --out: .* must end in \.parquet",
    ),
    "import out is the source": (
        lambda f: ["import", "obd", f["logs"], "--out", f["logs"], "--force"],
        EXIT_USAGE,
        "usage",
        r"argument --out: .* is the input SRC",
    ),
    "report over its --truth": (
        lambda f: ["report", f["logs"], "--truth", f["truth"], "--out", f["truth"], "--force"],
        EXIT_USAGE,
        "usage",
        r"argument --out: .* is the input --truth",
    ),
    "import over the OBD item table (a CSV: refused by its suffix)": (
        lambda f: ["import", "obd", f["obd_csv"], "--out", f["item_context"], "--force"],
        EXIT_USAGE,
        "usage",
        r"argument --out: .* must end in \.parquet or \.pq\.$",
    ),
    "action table over the OBD item table": (
        lambda f: [
            "action-table",
            f["obd_csv"],
            "--format",
            "obd",
            "--out",
            f["item_context"],
            "--force",
        ],
        EXIT_USAGE,
        "usage",
        r"argument --out: .* is the input item_context\.csv",
    ),
    "truth is a FIFO": (  # refused before it is opened (an open would block)
        lambda f: ["report", f["logs"], "--truth", f["fifo"], "--out", f["root"] / "r.html"],
        EXIT_USAGE,
        "usage",
        r"argument --truth: .* is a FIFO",
    ),
    # data problems named by a flag: exit 65
    "policy table not summing to 1": (
        lambda f: ["evaluate", f["logs"], "--policies", f["table_sum"]],
        EXIT_DATAERR,
        "PolicyError",
        r"sum",
    ),
    "policy table without event_id": (
        lambda f: ["evaluate", f["logs"], "--policies", f["table_no_id"]],
        EXIT_DATAERR,
        "SchemaError",
        r"event_id",
    ),
    "policy table probabilities out of [0, 1]": (
        lambda f: ["evaluate", f["logs"], "--policies", f["table_negative"]],
        EXIT_DATAERR,
        "PolicyError",
        r"probabilit",
    ),
    "policy table missing": (
        lambda f: ["evaluate", f["logs"], "--policies", f["root"] / "none.parquet"],
        EXIT_DATAERR,
        "DataFileError",
        r"none\.parquet",
    ),
    "unknown policy": (
        lambda f: ["evaluate", f["logs"], "--policy", "nope"],
        EXIT_DATAERR,
        "PolicyError",
        r"nope",
    ),
    "unknown by column": (
        lambda f: ["evaluate", f["logs"], "--by", "nope"],
        EXIT_DATAERR,
        "SchemaError",
        r"--by nope: not in the logs",
    ),
    "unknown context column": (
        lambda f: ["evaluate", f["logs"], "--estimator", "dm", "--context-columns", "x0", "nope"],
        EXIT_DATAERR,
        "SchemaError",
        r"--context-columns nope: not in the logs",
    ),
    "learn unknown context column": (
        lambda f: ["learn", f["logs"], "--context-columns", "zz"],
        EXIT_DATAERR,
        "SchemaError",
        r"--context-columns zz: not in the logs",
    ),
    "missing logs with a trajectory estimator": (  # the file's error, not the flag's
        lambda f: ["evaluate", f["root"] / "none.parquet", "--estimator", "pdis"],
        EXIT_DATAERR,
        "DataFileError",
        r"none\.parquet does not exist",
    ),
    "unreadable logs with a trajectory flag": (
        lambda f: ["evaluate", f["not_parquet"], "--gamma", "0.5"],
        EXIT_DATAERR,
        "DataFileError",
        r"not_parquet\.parquet",
    ),
    "a column missing from one file of a folder": (  # no advice about API-only columns=
        lambda f: ["evaluate", f["split"]],
        EXIT_DATAERR,
        "SchemaError",
        r"'target__greedy' is missing from 1 of 2 files \(e\.g\. \S*b\.parquet\); add it to "
        r"every file$",
    ),
    "not a parquet file": (
        lambda f: ["evaluate", f["not_parquet"]],
        EXIT_DATAERR,
        "DataFileError",
        r"not_parquet\.parquet",
    ),
    "empty logs": (lambda f: ["evaluate", f["empty"]], EXIT_DATAERR, None, r"empty\.parquet|rows"),
}


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_catalogue(data, name):
    if name == "truth is a FIFO" and not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this system")
    build, code, kind, pattern = CATALOGUE[name]
    argv = build(data)
    got, stdout, stderr = run(*argv)
    assert got == code, stderr
    assert re.search(pattern, stderr), stderr
    assert "Traceback" not in stderr and "unexpected" not in stderr
    got, stdout, _ = run(*argv, "--json")
    doc = one_document(stdout)
    assert got == code and doc["exit_code"] == code and doc["ok"] is False
    if kind is not None:
        assert doc["error"]["type"] == kind
    else:
        assert doc["error"]["type"] in ("SchemaError", "ValidationError", "DataFileError")
    assert re.search(pattern, doc["error"]["message"])


def test_catalogue_size():
    assert len(CATALOGUE) >= 20


def test_outputs_are_untouched_by_a_refused_run(data):
    before = data["existing"].read_bytes()
    logs_before = data["logs"].read_bytes()
    run("learn", data["logs"], *L, "--out", data["existing"])
    run("learn", data["logs"], *L, "--out", data["logs"])
    assert data["existing"].read_bytes() == before and data["logs"].read_bytes() == logs_before


def test_interval_advice_names_the_ci_flag(data):
    """An estimate's advice to use another interval (``ci(method='betting')`` in Python) reads
    ``--ci betting`` in the warnings and the text of ``ope evaluate``, not ``ci(--method ...)``."""
    rng = np.random.default_rng(0)
    n = 300
    p = np.full(n, 0.5)
    t = np.full(n, 0.5)
    p[:3], t[:3] = 0.001, 1.0  # three rows carry almost all the weight: few effective rows
    frame = pd.DataFrame(
        {
            "action": rng.integers(0, 2, n),
            "propensity": p,
            "reward": rng.binomial(1, 0.3, n).astype(float),
            "target__c": t,
        }
    )
    path = data["root"] / "few_effective_rows.parquet"
    frame.to_parquet(path)
    code, stdout, stderr = run("evaluate", path, "--reward-range", "0", "1")
    assert code == EXIT_OK, stderr
    # the notes state the advice; stderr repeats only warnings the text does not state
    assert "--ci betting" in stdout
    for shown in (stdout, stderr):
        # empirical likelihood is asymptotic: not advised for a small effective sample
        assert "--ci empirical_likelihood" not in shown
        assert "ci(method=" not in shown and "ci(--method" not in shown
        assert "a priori reward_range" not in shown
    _, json_out, _ = run("evaluate", path, "--reward-range", "0", "1", "--json")
    said = " ".join(w["message"] for w in json.loads(json_out)["warnings"])
    assert "--ci betting" in said or "ci(method='betting')" in said


def test_evaluate_text_keeps_column_names_and_python_hints(data):
    # the text of `ope evaluate` shows data too: a weight column named like an API keyword, and
    # the Python hint of the segment table, are not spelled as flags
    rng = np.random.default_rng(1)
    n = 400
    frame = pd.DataFrame(
        {
            "action": rng.integers(0, 2, n),
            "propensity": 0.5,
            "reward": rng.binomial(1, 0.3, n).astype(float),
            "target__c": rng.uniform(0.2, 0.8, n),
            "source": rng.uniform(0.5, 2.0, n),
            "seg": rng.choice(["a", "b"], n),
        }
    )
    path = data["root"] / "named_like_keywords.parquet"
    frame.to_parquet(path)
    code, stdout, stderr = run(
        "evaluate", path, "--reward-range", "0", "1", "--weight-column", "source"
    )
    assert code == EXIT_OK, stderr
    assert "`source`" in stdout and "`LOGS`" not in stdout
    code, stdout, stderr = run("evaluate", path, "--reward-range", "0", "1", "--by", "seg")
    assert code == EXIT_OK, stderr
    assert "table(by='segment')" in stdout and "table(--by" not in stdout


def test_slates_bootstrap_advice_names_intervals_slates_offer(data):
    from ope.simulate import SlateEnvironment

    frame = SlateEnvironment(seed=0).sample(60, rng=0).to_pandas()
    target = np.zeros(len(frame))
    first = frame.slate_id == 0  # the candidate shares one slate with the logger
    target[first] = frame.propensity[first]
    frame["target__c"] = target
    path = data["root"] / "one_shared_slate.parquet"
    frame.to_parquet(path)
    code, stdout, stderr = run("slates", path, "--estimator", "sniips", "--ci", "bootstrap")
    assert code == EXIT_FAILURE, stderr
    assert "bootstrap resamples give an undefined estimate" in stderr
    assert "--ci normal or --ci t" in stderr
    assert "betting" not in stderr and "bernstein" not in stderr


@pytest.mark.filterwarnings("ignore")
def test_a_keyword_named_in_prose_blames_no_flag_the_user_did_not_give(data):
    """``columns=`` in the reader's message (the columns asked of the logs) is not a flag of
    ``ope evaluate``: the message keeps it and the document names no flag for it."""
    path = data["root"] / "few_targets.parquet"
    bandit_frame(n=40).to_parquet(path)
    code, stdout, stderr = run(
        "evaluate",
        path,
        "--streaming",
        "on",
        "--policy",
        "zz",
        "--reward-range",
        "0",
        "1",
        "--json",
    )
    assert code != EXIT_OK
    doc = one_document(stdout)
    assert "--embedding-columns" not in stdout + stderr
    assert doc["error"].get("flag") in (None, "--policy")


@pytest.mark.filterwarnings("ignore")
def test_api_keywords_are_shown_as_flags(data):
    """Messages printed by the CLI name flags: the drop hint of a validation error too."""
    bad = bandit_frame(n=50)
    bad.loc[4, "propensity"] = 2.0
    path = data["root"] / "bad_propensity.parquet"
    bad.to_parquet(path)
    code, stdout, stderr = run("evaluate", path)
    assert code == EXIT_DATAERR
    assert "--on-invalid drop" in stdout and "on_invalid" not in stdout + stderr
