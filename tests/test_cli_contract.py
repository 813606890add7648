"""The command line's contract, over every subcommand x failure kind.

For each (subcommand, failure) the exit code is the documented one (2 usage -- a bad flag, a bad
flag value, an output that cannot be written --, 65 invalid data), and with ``--json`` stdout
holds exactly one JSON document and nothing else: ``ok: false``, the exit code, the error's type
and message, ope's version, the command, the options and the seed. Then: reproducibility (the
same command twice gives byte-identical JSON; the seed is recorded and changes the bootstrap),
outputs checked before the work, repeated flags accumulating, ``--version``, and the interval
method that falls back per estimator.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from ope import __version__
from ope.cli import DEFAULT_SEED, EXIT_DATAERR, EXIT_OK, EXIT_USAGE, main

ENVELOPE = ("ok", "exit_code", "ope_version", "command", "options", "seed")
ROOT = Path(__file__).resolve().parents[1]


def run(*argv: str) -> tuple[int, str, str]:
    """``main(argv)`` with stdout and stderr captured."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def one_document(stdout: str) -> dict:
    """The one JSON document that is the whole of stdout (json.loads fails on anything else)."""
    doc = json.loads(stdout)
    assert isinstance(doc, dict)
    return doc


def bandit_frame(n: int = 400, seed: int = 0) -> pd.DataFrame:
    """Uniform logging over 3 actions, two candidates with full distributions (for dm/dr)."""
    rng = np.random.default_rng(seed)
    action = rng.integers(0, 3, size=n)
    x0, x1 = rng.normal(size=n), rng.normal(size=n)
    reward = rng.binomial(1, 0.2 + 0.2 * (action == 1) + 0.1 * (x0 > 0)).astype(float)
    greedy = np.array([0.1, 0.8, 0.1])
    soft = np.array([0.3, 0.4, 0.3])
    return pd.DataFrame(
        {
            "event_id": np.arange(n),
            "action": action,
            "propensity": np.full(n, 1 / 3),
            "reward": reward,
            "x0": x0,
            "x1": x1,
            "segment": np.where(x1 > 0, "a", "b"),
            "candidates": [[0, 1, 2]] * n,
            "target__greedy": greedy[action],
            "target__soft": soft[action],
            "target_dist__greedy": [greedy.tolist()] * n,
            "target_dist__soft": [soft.tolist()] * n,
        }
    )


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Every input the failure kinds need, written once."""
    root = tmp_path_factory.mktemp("contract")
    f = {}
    df = bandit_frame()
    f["logs"] = root / "logs.parquet"
    df.to_parquet(f["logs"])
    f["no_reward"] = root / "no_reward.parquet"
    df.drop(columns=["reward"]).to_parquet(f["no_reward"])
    bad = df.copy()
    bad.loc[[3, 7], "propensity"] = 0.0
    f["bad_rows"] = root / "bad_rows.parquet"
    bad.to_parquet(f["bad_rows"])
    table = pd.DataFrame(
        {
            "event_id": np.repeat(df["event_id"].to_numpy(), 2),
            "policy": "half",
            "action": np.tile([0, 1], len(df)),
            "probability": 0.45,
        }
    )  # sums to 0.9, not 1
    f["policy_not_1"] = root / "policy_not_1.parquet"
    table.to_parquet(f["policy_not_1"])
    f["policy_no_id"] = root / "policy_no_id.parquet"
    table.drop(columns=["event_id"]).to_parquet(f["policy_no_id"])
    pairs = pd.DataFrame(
        {
            "pair_id": np.repeat(np.arange(30), 2),
            "arm": ["t", "c"] * 30,
            "outcome": np.tile([1.0, 0.0], 30),
        }
    )
    f["pairs"] = root / "pairs.parquet"
    pairs.to_parquet(f["pairs"])
    f["pairs_dup"] = root / "pairs_dup.parquet"
    pd.concat([pairs, pairs.iloc[:1]]).to_parquet(f["pairs_dup"])
    f["no_pair_id"] = root / "no_pair_id.parquet"
    pairs.drop(columns=["pair_id"]).to_parquet(f["no_pair_id"])
    from tests.test_import_dsjson import LINES

    f["dsjson"] = root / "events.json"
    f["dsjson"].write_text("\n".join(LINES) + "\n")
    f["exists"] = root / "exists.parquet"
    f["exists"].write_bytes(b"keep me")
    f["missing"] = root / "nope.parquet"
    from ope.simulate import TokenModel

    for key, settings in (("responses", {}), ("responses_top_p", {"top_p": 0.8})):
        f[key] = root / f"{key}.parquet"
        TokenModel(**settings, seed=0).sample(300, rng=0).to_pandas().to_parquet(f[key])
    from ope.simulate import ContinuousBandit

    cont = ContinuousBandit(n_features=1, seed=0).sample(300, rng=0).to_pandas()
    f["continuous"] = root / "continuous.parquet"
    cont.to_parquet(f["continuous"])
    f["continuous_bad"] = root / "continuous_bad.parquet"
    cont.assign(density=np.where(np.arange(300) == 5, 0.0, cont["density"])).to_parquet(
        f["continuous_bad"]
    )
    from ope.simulate import SlateEnvironment

    slates = SlateEnvironment(seed=0).sample(200, rng=0).to_pandas()
    f["slates"] = root / "slates.parquet"
    slates.to_parquet(f["slates"])
    f["slates_bad"] = root / "slates_bad.parquet"  # row 4: position 5 in a 3-slot slate
    slates.assign(position=np.where(np.arange(len(slates)) == 4, 5, slates["position"])).to_parquet(
        f["slates_bad"]
    )
    f["root"] = root
    return f


LEARN = ("--context-columns", "x0", "x1")
PAIRED = ("--treated", "t", "--control", "c")

# (command, failure kind) -> (argv builder over the files, exit code, error type, phrase)
CASES = {
    ("validate", "bad flag value"): (
        lambda f: ["validate", f["logs"], "--mapping", "reward"],
        EXIT_USAGE,
        "usage",
        "--mapping",
    ),
    ("validate", "missing file"): (
        lambda f: ["validate", f["missing"]],
        EXIT_DATAERR,
        "DataFileError",
        "nope.parquet",
    ),
    ("validate", "schema error"): (
        lambda f: ["validate", f["no_reward"]],
        EXIT_DATAERR,
        "SchemaError",
        "reward",
    ),
    ("validate", "validation error"): (
        lambda f: ["validate", f["bad_rows"]],
        EXIT_DATAERR,
        "ValidationError",
        "propensity_out_of_range",
    ),
    ("validate", "usage error"): (
        lambda f: ["validate", f["logs"], "--frobnicate"],
        EXIT_USAGE,
        "usage",
        "--frobnicate",
    ),
    ("evaluate", "bad flag value"): (
        lambda f: ["evaluate", f["logs"], "--confidence-level", "1.5"],
        EXIT_USAGE,
        "usage",
        "--confidence-level",
    ),
    ("evaluate", "missing file"): (
        lambda f: ["evaluate", f["missing"]],
        EXIT_DATAERR,
        "DataFileError",
        "nope.parquet",
    ),
    ("evaluate", "schema error"): (
        lambda f: ["evaluate", f["no_reward"]],
        EXIT_DATAERR,
        "SchemaError",
        "reward",
    ),
    ("evaluate", "validation error"): (
        lambda f: ["evaluate", f["bad_rows"]],
        EXIT_DATAERR,
        "ValidationError",
        "propensity_out_of_range",
    ),
    ("evaluate", "policy error"): (
        lambda f: ["evaluate", f["logs"], "--policies", f["policy_not_1"]],
        EXIT_DATAERR,
        "PolicyError",
        "half",
    ),
    ("evaluate", "usage error"): (lambda f: ["evaluate"], EXIT_USAGE, "usage", "logs"),
    ("diagnose", "bad flag value"): (
        lambda f: ["diagnose", f["logs"], "--target-width", "0.1"],
        EXIT_USAGE,
        "usage",
        "--new-rows",
    ),
    ("diagnose", "missing file"): (
        lambda f: ["diagnose", f["missing"]],
        EXIT_DATAERR,
        "DataFileError",
        "nope.parquet",
    ),
    ("diagnose", "schema error"): (
        lambda f: ["diagnose", f["logs"], "--by", "nope"],
        EXIT_DATAERR,
        "SchemaError",
        "--by nope",
    ),
    ("diagnose", "validation error"): (
        lambda f: ["diagnose", f["bad_rows"]],
        EXIT_DATAERR,
        "ValidationError",
        "propensity_out_of_range",
    ),
    ("diagnose", "policy error"): (
        lambda f: ["diagnose", f["logs"], "--policy", "nope"],
        EXIT_DATAERR,
        "PolicyError",
        "nope",
    ),
    ("diagnose", "usage error"): (
        lambda f: ["diagnose", f["logs"], "--max-weight"],
        EXIT_USAGE,
        "usage",
        "--max-weight",
    ),
    ("learn", "bad flag value"): (
        lambda f: ["learn", f["logs"], *LEARN, "--certify-fraction", "2"],
        EXIT_USAGE,
        "usage",
        "--certify-fraction",
    ),
    ("learn", "missing file"): (
        lambda f: ["learn", f["missing"], *LEARN],
        EXIT_DATAERR,
        "DataFileError",
        "nope.parquet",
    ),
    ("learn", "schema error"): (
        lambda f: ["learn", f["logs"], "--context-columns", "nope"],
        EXIT_DATAERR,
        "SchemaError",
        "--context-columns nope",
    ),
    ("learn", "validation error"): (
        lambda f: ["learn", f["bad_rows"], *LEARN],
        EXIT_DATAERR,
        "ValidationError",
        "propensity_out_of_range",
    ),
    ("learn", "output conflict"): (
        lambda f: ["learn", f["logs"], *LEARN, "--out", f["logs"]],
        EXIT_USAGE,
        "usage",
        "is the input LOGS",
    ),
    ("learn", "usage error"): (
        lambda f: ["learn", f["logs"]],
        EXIT_USAGE,
        "usage",
        "--context-columns",
    ),
    ("paired", "bad flag value"): (
        lambda f: ["paired", f["pairs"], *PAIRED, "--ci", "bogus"],
        EXIT_USAGE,
        "usage",
        "--ci",
    ),
    ("paired", "missing file"): (
        lambda f: ["paired", f["missing"], *PAIRED],
        EXIT_DATAERR,
        "DataFileError",
        "nope.parquet",
    ),
    ("paired", "schema error"): (
        lambda f: ["paired", f["no_pair_id"], *PAIRED],
        EXIT_DATAERR,
        "SchemaError",
        "pair_id",
    ),
    ("paired", "validation error"): (
        lambda f: ["paired", f["pairs_dup"], *PAIRED],
        EXIT_DATAERR,
        "ValidationError",
        "pair_duplicate",
    ),
    ("paired", "usage error"): (
        lambda f: ["paired", f["pairs"], "--control", "c"],
        EXIT_USAGE,
        "usage",
        "--treated",
    ),
    ("import", "bad flag value"): (
        lambda f: [
            "import",
            "dsjson",
            f["dsjson"],
            "--out",
            f["root"] / "a.parquet",
            "--chunk-lines",
            "0",
        ],
        EXIT_USAGE,
        "usage",
        "--chunk-lines",
    ),
    ("import", "missing file"): (
        lambda f: ["import", "dsjson", f["root"] / "nope.json", "--out", f["root"] / "b.parquet"],
        EXIT_DATAERR,
        "DataFileError",
        "nope.json",
    ),
    ("import", "validation error"): (
        lambda f: ["import", "dsjson", f["dsjson"], "--out", f["root"] / "c.parquet"],
        EXIT_DATAERR,
        "ValidationError",
        "dsjson_bad_json",
    ),
    ("import", "output conflict"): (
        lambda f: ["import", "dsjson", f["dsjson"], "--out", f["exists"], "--on-invalid", "drop"],
        EXIT_USAGE,
        "usage",
        "--force",
    ),
    ("import", "usage error"): (
        lambda f: ["import", "csv", f["dsjson"], "--out", "x.parquet"],
        EXIT_USAGE,
        "usage",
        "csv",
    ),
    ("report", "bad flag value"): (
        lambda f: [
            "report",
            f["logs"],
            "--out",
            f["root"] / "r1.html",
            "--confidence-level",
            "1.5",
        ],
        EXIT_USAGE,
        "usage",
        "--confidence-level",
    ),
    ("report", "missing file"): (
        lambda f: ["report", f["missing"], "--out", f["root"] / "r2.html"],
        EXIT_DATAERR,
        "DataFileError",
        "nope.parquet",
    ),
    ("report", "validation error"): (
        lambda f: ["report", f["bad_rows"], "--out", f["root"] / "r3.html"],
        EXIT_DATAERR,
        "ValidationError",
        "propensity_out_of_range",
    ),
    ("report", "output conflict"): (
        lambda f: ["report", f["logs"], "--out", f["root"] / "missing_dir" / "r.html"],
        EXIT_USAGE,
        "usage",
        "does not exist",
    ),
    ("report", "usage error"): (lambda f: ["report", f["logs"]], EXIT_USAGE, "usage", "--out"),
    ("action-table", "missing file"): (
        lambda f: ["action-table", f["missing"], "--out", f["root"] / "t.csv"],
        EXIT_DATAERR,
        "DataFileError",
        "nope.parquet",
    ),
    ("action-table", "schema error"): (
        lambda f: ["action-table", f["no_reward"], "--out", f["root"] / "t.csv"],
        EXIT_DATAERR,
        "SchemaError",
        "reward",
    ),
    ("action-table", "output conflict"): (
        lambda f: ["action-table", f["logs"], "--out", f["exists"]],
        EXIT_USAGE,
        "usage",
        "exists",
    ),
    ("action-table", "usage error"): (
        lambda f: ["action-table", f["logs"]],
        EXIT_USAGE,
        "usage",
        "--out",
    ),
    ("tune", "bad flag value"): (
        lambda f: ["tune", f["logs"], "--estimator", "clipped_ips", "--delta", "0.7"],
        EXIT_USAGE,
        "usage",
        "--delta",
    ),
    ("tune", "missing file"): (
        lambda f: ["tune", f["missing"], "--estimator", "clipped_ips"],
        EXIT_DATAERR,
        "DataFileError",
        "nope.parquet",
    ),
    ("tune", "validation error"): (
        lambda f: ["tune", f["bad_rows"], "--estimator", "clipped_ips"],
        EXIT_DATAERR,
        "ValidationError",
        "propensity_out_of_range",
    ),
    ("tune", "usage error"): (
        lambda f: ["tune", f["logs"], "--estimator", "snips"],
        EXIT_USAGE,
        "usage",
        "--estimator",
    ),
    ("monitor", "bad flag value"): (
        lambda f: ["monitor", f["logs"], "--reward-range", "0", "1", "--every", "soon"],
        EXIT_USAGE,
        "usage",
        "--every",
    ),
    ("monitor", "missing file"): (
        lambda f: ["monitor", f["missing"], "--reward-range", "0", "1"],
        EXIT_DATAERR,
        "DataFileError",
        "nope.parquet",
    ),
    ("monitor", "validation error"): (
        lambda f: ["monitor", f["bad_rows"], "--reward-range", "0", "1"],
        EXIT_DATAERR,
        "ValidationError",
        "propensity_out_of_range",
    ),
    ("monitor", "usage error"): (
        lambda f: [
            "monitor",
            f["logs"],
            "--reward-range",
            "0",
            "1",
            "--estimator",
            "dr",
            "--method",
            "betting",
        ],
        EXIT_USAGE,
        "usage",
        "--method",
    ),
    ("sequences", "bad flag value"): (
        lambda f: ["sequences", f["responses"], "--weighting", "per_token"],
        EXIT_USAGE,
        "usage",
        "--weighting",
    ),
    ("sequences", "missing file"): (
        lambda f: ["sequences", f["missing"]],
        EXIT_DATAERR,
        "DataFileError",
        "nope.parquet",
    ),
    ("sequences", "schema error"): (
        lambda f: ["sequences", f["logs"]],
        EXIT_DATAERR,
        "SchemaError",
        "behavior_logprobs",
    ),
    ("sequences", "validation error"): (
        lambda f: ["sequences", f["responses_top_p"], "--on-policy", "model"],
        EXIT_DATAERR,
        "ValidationError",
        "kept mass",
    ),
    ("sequences", "usage error"): (
        lambda f: ["sequences", f["responses"], "--max-weight", "10"],
        EXIT_USAGE,
        "usage",
        "--max-weight",
    ),
    ("continuous", "bad flag value"): (
        lambda f: ["continuous", f["continuous"], "--bandwidth", "wide"],
        EXIT_USAGE,
        "usage",
        "--bandwidth",
    ),
    ("continuous", "missing file"): (
        lambda f: ["continuous", f["missing"]],
        EXIT_DATAERR,
        "DataFileError",
        "nope.parquet",
    ),
    ("continuous", "schema error"): (
        lambda f: ["continuous", f["logs"]],
        EXIT_DATAERR,
        "SchemaError",
        "density",
    ),
    ("continuous", "validation error"): (
        lambda f: ["continuous", f["continuous_bad"]],
        EXIT_DATAERR,
        "ValidationError",
        "row 5",
    ),
    ("continuous", "usage error"): (
        lambda f: ["continuous", f["continuous"], "--constant", "fixed"],
        EXIT_USAGE,
        "usage",
        "--constant",
    ),
    ("slates", "bad flag value"): (
        lambda f: ["slates", f["slates"], "--estimator", "ips"],
        EXIT_USAGE,
        "usage",
        "--estimator",
    ),
    ("slates", "missing file"): (
        lambda f: ["slates", f["missing"]],
        EXIT_DATAERR,
        "DataFileError",
        "nope.parquet",
    ),
    ("slates", "schema error"): (
        lambda f: ["slates", f["logs"]],
        EXIT_DATAERR,
        "SchemaError",
        "slate_id",
    ),
    ("slates", "validation error"): (
        lambda f: ["slates", f["slates_bad"]],
        EXIT_DATAERR,
        "ValidationError",
        "row 4",
    ),
    ("slates", "usage error"): (
        lambda f: ["slates", f["slates"], "--scores", "greedy"],
        EXIT_USAGE,
        "usage",
        "--scores",
    ),
    ("demo", "bad flag value"): (lambda f: ["demo", "--seed", "-1"], EXIT_USAGE, "usage", "--seed"),
    ("demo", "usage error"): (lambda f: ["demo", "extra"], EXIT_USAGE, "usage", "extra"),
}


def test_every_subcommand_is_covered():
    from ope.cli import _COMMANDS

    assert {command for command, _ in CASES} == set(_COMMANDS)
    kinds = {kind for _, kind in CASES}
    assert kinds == {
        "bad flag value",
        "missing file",
        "schema error",
        "validation error",
        "policy error",
        "output conflict",
        "usage error",
    }


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("case", sorted(CASES), ids=lambda c: f"{c[0]}-{c[1].replace(' ', '_')}")
def test_failure_exit_code_and_one_json_document(files, case):
    build, code, kind, phrase = CASES[case]
    argv = build(files)
    got, stdout, stderr = run(*argv)
    assert got == code, stderr
    # the report is the output: stdout; its gist on stderr (a refusal of responses' logged
    # log-probabilities, `ope sequences`, of continuous-action rows, `ope continuous`, or of
    # slates, `ope slates`, has no
    # per-rule report: it is on stderr)
    if case[1] == "validation error" and case[0] not in ("sequences", "continuous", "slates"):
        assert phrase in stdout and "ValidationError" in stderr and "report" in stderr
    else:
        assert stdout == "" and phrase in stderr
    got, stdout, stderr = run(*argv, "--json")
    assert got == code, stderr
    doc = one_document(stdout)
    assert all(key in doc for key in ENVELOPE)
    assert doc["ok"] is False and doc["exit_code"] == code
    assert doc["ope_version"] == __version__ and doc["command"] == case[0]
    assert doc["error"]["type"] == kind and phrase in doc["error"]["message"]
    if kind == "usage":
        assert "flag" not in doc["error"] or doc["error"]["flag"].startswith("--")
    if doc["options"] is not None:  # parsed: the options are recorded, the seed too
        assert doc["seed"] == doc["options"].get("seed")
    assert "Traceback" not in stderr


def test_output_conflict_leaves_the_input_intact_and_fails_before_reading(files, tmp_path):
    logs = tmp_path / "logs.parquet"
    bandit_frame().to_parquet(logs)
    before = logs.read_bytes()
    link = tmp_path / "link.parquet"
    os.symlink(logs, link)
    hard = tmp_path / "hard.parquet"
    os.link(logs, hard)
    for out in (logs, link, hard):
        code, _, err = run("learn", logs, *LEARN, "--out", out, "--force")
        assert code == EXIT_USAGE and "is the input LOGS" in err
    assert logs.read_bytes() == before
    # the check comes before the data are read: a corrupt input is not even opened
    corrupt = tmp_path / "corrupt.parquet"
    corrupt.write_bytes(b"not parquet")
    code, _, err = run("learn", corrupt, *LEARN, "--out", tmp_path / "nodir" / "p.parquet")
    assert code == EXIT_USAGE and "argument --out" in err and "does not exist" in err
    code, _, err = run("learn", corrupt, *LEARN, "--out", tmp_path / "p.txt")
    assert code == EXIT_USAGE and ".parquet or .pq or .csv" in err


def test_output_inside_an_input_directory_is_refused(tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    bandit_frame().to_parquet(folder / "part-0.parquet")
    code, _, err = run("learn", folder, *LEARN, "--out", folder / "learned.parquet")
    assert code == EXIT_USAGE and "inside the input directory" in err
    assert sorted(p.name for p in folder.iterdir()) == ["part-0.parquet"]


def test_learn_writes_atomically_and_refuses_to_overwrite(files, tmp_path):
    out = tmp_path / "learned.parquet"
    code, stdout, err = run("learn", files["logs"], *LEARN, "--out", out, "--json")
    assert code == EXIT_OK, err
    assert one_document(stdout)["policy_table"] == str(out)
    assert pq.read_table(out).column_names[:4] == ["event_id", "policy", "action", "probability"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["learned.parquet"]  # no temporary left
    first = out.read_bytes()
    code, _, err = run("learn", files["logs"], *LEARN, "--out", out)
    assert code == EXIT_USAGE and "pass --force" in err and out.read_bytes() == first
    code, _, _ = run("learn", files["logs"], *LEARN, "--out", out, "--force")
    assert code == EXIT_OK


@pytest.mark.filterwarnings("ignore")
def test_success_documents_carry_the_envelope(files):
    for argv in (
        ["validate", files["logs"]],
        ["evaluate", files["logs"]],
        ["diagnose", files["logs"]],
        ["paired", files["pairs"], *PAIRED],
    ):
        code, stdout, _ = run(*argv, "--json")
        assert code == EXIT_OK
        doc = one_document(stdout)
        assert doc["ok"] is True and doc["exit_code"] == 0 and doc["command"] == argv[0]
        assert doc["ope_version"] == __version__
        assert doc["options"]["on_invalid"] == "raise"
    code, stdout, _ = run("evaluate", files["logs"], "--json")
    doc = one_document(stdout)
    assert doc["seed"] == DEFAULT_SEED and doc["options"]["seed"] == DEFAULT_SEED
    assert doc["options"]["ci"] == "normal" and doc["options"]["streaming"] == "auto"


def test_text_output_prints_the_seed(files):
    code, stdout, _ = run("evaluate", files["logs"], "--seed", "7")
    assert code == EXIT_OK and "seed: 7" in stdout


def _cli(*argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OPE_PROGRESS": "0"}
    return subprocess.run(
        [sys.executable, "-m", "ope", *map(str, argv)],
        capture_output=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )


def test_same_command_twice_gives_byte_identical_json(files):
    for extra in (
        ["--estimator", "dm", "dr"],
        ["--estimator", "ips", "snips", "--ci", "bootstrap", "--n-resamples", "200"],
    ):
        first = _cli("evaluate", files["logs"], *extra, "--json")
        second = _cli("evaluate", files["logs"], *extra, "--json")
        assert first.returncode == 0, first.stderr.decode()
        assert first.stdout == second.stdout
        doc = json.loads(first.stdout)
        assert doc["seed"] == DEFAULT_SEED and doc["options"]["estimator"] == extra[1:3]
        assert str(files["root"]) not in first.stdout.decode().replace(str(files["logs"]), "")


def test_the_seed_reproduces_and_changes_the_bootstrap(files):
    argv = [
        "evaluate",
        files["logs"],
        "--estimator",
        "ips",
        "--ci",
        "bootstrap",
        "--n-resamples",
        "200",
        "--json",
    ]
    a = one_document(run(*argv)[1])
    b = one_document(run(*argv, "--seed", "1")[1])
    c = one_document(run(*argv, "--seed", "1")[1])
    lows = [[r["ci_low"] for r in d["estimates"]] for d in (a, b, c)]
    assert lows[1] == lows[2] and lows[0] != lows[1]
    assert [r["value"] for r in a["estimates"]] == [r["value"] for r in b["estimates"]]
    assert b["seed"] == 1


def test_json_stdout_is_nothing_but_the_document_in_a_real_process(files):
    for argv in (
        ["evaluate", files["logs"], "--ci", "bogus"],  # a ParameterError
        ["evaluate", files["no_reward"]],  # a SchemaError
        ["evaluate", "--confidence-level"],  # argparse's usage error
        ["evaluate", files["logs"]],
    ):  # success, with warnings
        proc = _cli(*argv, "--json")
        doc = json.loads(proc.stdout)  # the whole of stdout is one document
        assert doc["exit_code"] == proc.returncode
        assert proc.stdout.decode().count("\n{") == 0 and proc.stdout.decode().startswith("{")


def test_version_flag():
    proc = _cli("--version")
    assert proc.returncode == 0 and proc.stdout.decode().strip() == f"ope {__version__}"


@pytest.mark.filterwarnings("ignore")
def test_repeated_list_flags_accumulate_and_scalars_refuse(files, tmp_path):
    df = bandit_frame().rename(columns={"propensity": "pscore", "reward": "click"})
    theirs = tmp_path / "theirs.parquet"
    df.to_parquet(theirs)
    code, stdout, err = run(
        "validate", theirs, "--mapping", "propensity=pscore", "--mapping", "reward=click", "--json"
    )
    assert code == EXIT_OK, err
    assert one_document(stdout)["options"]["mapping"] == ["propensity=pscore", "reward=click"]
    code, stdout, _ = run(
        "evaluate", files["logs"], "--estimator", "ips", "--estimator", "snips", "--json"
    )
    assert code == EXIT_OK
    assert {r["estimator"] for r in one_document(stdout)["estimates"]} == {"ips", "snips"}
    code, _, err = run("evaluate", files["logs"], "--ci", "t", "--ci", "normal")
    assert code == EXIT_USAGE and "argument --ci: given twice" in err
    code, _, err = run("evaluate", files["logs"], "--estimator", "ips", "--estimator", "ips")
    assert code == EXIT_USAGE and "argument --estimator" in err and "twice" in err


@pytest.mark.filterwarnings("ignore")
def test_an_interval_method_falls_back_per_estimator(files):
    code, stdout, err = run(
        "evaluate",
        files["logs"],
        "--estimator",
        "ips",
        "snips",
        "--ci",
        "hoeffding",
        "--reward-range",
        "0",
        "1",
        "--weight-bound",
        "10",
        "--json",
    )
    assert code == EXIT_OK, err
    doc = one_document(stdout)
    methods = {(r["policy"], r["estimator"]): r["ci_method"] for r in doc["estimates"]}
    assert set(methods) == {(p, e) for p in ("greedy", "soft") for e in ("ips", "snips")}
    assert {e: m for (_, e), m in methods.items()} == {"ips": "hoeffding", "snips": "normal"}
    assert [r["estimator"] for r in doc["estimates"]] == ["ips", "snips"] * 2  # requested order
    assert doc["ci_fallback"] == {"snips": "normal"}
    assert "ci='hoeffding' does not apply to snips: its interval is normal" in doc["notes"]
    code, stdout, _ = run(
        "evaluate",
        files["logs"],
        "--estimator",
        "ips",
        "snips",
        "--ci",
        "hoeffding",
        "--reward-range",
        "0",
        "1",
        "--weight-bound",
        "10",
    )
    assert code == EXIT_OK and "does not apply to snips" in stdout
    assert stdout.count("candidate policies x") == 1  # one table, not one per interval method


@pytest.mark.filterwarnings("ignore")
def test_a_fallback_run_fits_the_reward_model_once_with_the_numbers_of_each_method(
    files, monkeypatch
):
    """--ci bottou with DR (which bottou does not apply to): one evaluation, so one
    cross-fitted reward model; each row's numbers are those of its own method's evaluation."""
    import ope
    import ope.evaluation._driver as evaluation

    fits = []
    predictions = evaluation.model_predictions

    def counted(*args, **kwargs):
        fits.append(1)
        return predictions(*args, **kwargs)

    monkeypatch.setattr(evaluation, "model_predictions", counted)
    code, stdout, err = run(
        "evaluate",
        files["logs"],
        "--estimator",
        "clipped_ips",
        "dr",
        "--max-weight",
        "20",
        "--ci",
        "bottou",
        "--reward-range",
        "0",
        "1",
        "--seed",
        "3",
        "--json",
    )
    assert code == EXIT_OK, err
    assert len(fits) == 1
    doc = one_document(stdout)
    assert doc["ci_method"] == "bottou" and doc["ci_fallback"] == {"dr": "normal"}
    assert doc["model_columns"] == {"context": ["x0", "x1"], "action_features": []}
    assert "ci='bottou' does not apply to dr: its interval is normal" in doc["notes"]
    rows = {(r["policy"], r["estimator"]): r for r in doc["estimates"]}
    common = dict(reward_range=(0, 1), rng=3)
    bottou = ope.evaluate(
        ope.read_logs(files["logs"]),
        estimators=[ope.get_estimator("clipped_ips", max_weight=20)],
        ci="bottou",
        **common,
    ).table()
    normal = ope.evaluate(
        ope.read_logs(files["logs"]), estimators=["dr"], ci="normal", **common
    ).table()
    for t, method in ((bottou, "bottou"), (normal, "normal")):
        for r in t.to_dict(orient="records"):
            got = rows[(r["policy"], r["estimator"])]
            assert got["ci_method"] == method
            for f in ("value", "std_error", "ci_low", "ci_high"):
                assert got[f] == pytest.approx(r[f], rel=1e-12), (r["estimator"], f)


@pytest.mark.filterwarnings("ignore")
def test_estimator_settings_flags(files):
    code, stdout, err = run(
        "evaluate",
        files["logs"],
        "--estimator",
        "switch_dr",
        "dros",
        "--tau",
        "5",
        "--shrinkage",
        "10",
        "--json",
    )
    assert code == EXIT_OK, err
    assert {r["estimator"] for r in one_document(stdout)["estimates"]} == {"switch_dr", "dros"}
    code, _, err = run("evaluate", files["logs"], "--estimator", "switch_dr")
    assert code == EXIT_USAGE and "argument --tau:" in err
    code, _, err = run("evaluate", files["logs"], "--estimator", "dros", "--shrinkage", "0")
    assert code == EXIT_USAGE and "argument --shrinkage:" in err


HEAVY = ("numpy", "pandas", "pyarrow", "scipy", "sklearn", "numba")


def _modules_after(argv: list[str]) -> set[str]:
    """Top-level packages imported by ``main(argv)`` in a fresh interpreter."""
    code = (
        "import contextlib, io, json, sys\n"
        "from ope.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        f"    main({argv!r})\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} | "
        "{m for m in sys.modules if m.startswith('scipy.')})))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stdout))


def test_lean_imports(files):
    """``--help``/``--version`` import no numerical library; ``validate`` no scipy."""
    for argv in (["--version"], ["--help"], ["evaluate", "--help"]):
        assert not _modules_after(argv) & set(HEAVY), argv
    assert "scipy" not in _modules_after(["validate", str(files["logs"])])


#: What ``ope evaluate`` with normal intervals never needs (scipy.linalg and scipy.sparse come
#: with numba and the candidate tables; scipy.stats alone takes about a second to import).
EVALUATE_NEVER = ("scipy.stats", "scipy.optimize", "scipy.special", "sklearn", "matplotlib", "dask")


@pytest.mark.parametrize("streaming", ["off", "on"])
def test_evaluate_imports_no_scipy_stats(files, streaming):
    """The whole read (estimates, diagnostics, paired comparisons) and the streamed pass with
    normal intervals import none of :data:`EVALUATE_NEVER`; a t interval imports scipy.stats."""
    argv = ["evaluate", str(files["logs"]), "--json", "--streaming", streaming]
    loaded = _modules_after(argv)
    assert "ope" in loaded and not loaded & set(EVALUATE_NEVER), loaded & set(EVALUATE_NEVER)
    if streaming == "on":  # the target__ columns are read as they are: no sparse candidates
        assert "scipy.sparse" not in loaded
    assert "scipy.stats" in _modules_after([*argv, "--ci", "t"])


@pytest.mark.filterwarnings("ignore")
def test_large_files_stream_by_default_with_the_same_numbers(files, monkeypatch):
    import ope.cli

    eager = one_document(run("evaluate", files["logs"], "--json")[1])
    assert eager["streaming"] is False and eager["diagnostics"] is not None
    monkeypatch.setattr(ope.cli, "STREAM_MIN_ROWS", 100)  # the file's 400 rows are "large"
    streamed = one_document(run("evaluate", files["logs"], "--json")[1])
    assert streamed["streaming"] is True and streamed["diagnostics"] is None
    assert any("ope diagnose" in n for n in streamed["notes"])
    for a, b in zip(eager["estimates"], streamed["estimates"]):
        assert (a["policy"], a["estimator"]) == (b["policy"], b["estimator"])
        for key in ("value", "std_error", "ci_low", "ci_high", "ess"):
            assert a[key] == pytest.approx(b[key], rel=1e-12, abs=1e-15)
    assert streamed["validation"]["rows_used"] == eager["validation"]["rows_used"]
    off = one_document(run("evaluate", files["logs"], "--json", "--streaming", "off")[1])
    assert off["streaming"] is False
    # what cannot stream is read whole under auto (dm needs a reward model over every row)
    dm = one_document(run("evaluate", files["logs"], "--estimator", "dm", "--json")[1])
    assert dm["streaming"] is False


@pytest.mark.filterwarnings("ignore")
def test_the_flag_of_an_error_is_one_the_message_is_about(tmp_path):
    """``error.flag`` names the argument the message is about, never a flag guessed from a word
    of its advice: files of a folder that disagree on their columns concern no flag (their
    message once ended with advice about ``ope.read_logs(columns=[...])``, read as
    --embedding-columns)."""
    folder = tmp_path / "logs"
    folder.mkdir()
    df = bandit_frame()[["action", "propensity", "reward", "target__greedy"]]
    df.iloc[:200].to_parquet(folder / "a.parquet")
    df.iloc[200:].drop(columns=["target__greedy"]).to_parquet(folder / "b.parquet")
    code, out, _ = run("evaluate", folder, "--json")
    error = one_document(out)["error"]
    assert code == EXIT_DATAERR and "disagree on their columns" in error["message"]
    assert "flag" not in error and "columns=" not in error["message"]


#: (command, an API message, the flag of its error): a generic word (``columns``, ``method``,
#: ``state``, ``context``) is a flag only where the message is about that argument; a name
#: whose "flag" is not one flag (``source``: LOGS; ``embedding``: three flags) is none.
FLAG_CASES = [
    (
        "evaluate",
        "the files of d disagree on their columns:\n  - column 'x' is missing from 1 of 2 files "
        "(e.g. d/b.parquet); add it to every file, or leave 'x' out of columns=[...] to read "
        "the others",
        None,
    ),
    ("monitor", "`outer` applies only to method='bottou'; got 'betting'.", None),
    ("monitor", "`method` must be one of betting, asymptotic; got 'x'.", "--method"),
    ("evaluate", "resume the monitor with Monitor.from_state(state=...) instead.", None),
    (
        "evaluate",
        "`state` serves the marginalized estimators (mis, mis_dr) only.",
        "--state-column",
    ),
    ("import", "the item table is missing; read_obd(src, context='none') reads without it.", None),
    ("import", "context='x' is not one of user, user+affinity, none.", "--obd-context"),
    ("sequences", "`source` 'x.jsonl' is not readable as JSON lines: ...", None),
    (
        "evaluate",
        "estimator(s) mips need embedding=ope.ActionEmbedding(...): how the actions map to "
        "embeddings (clusters=COLUMN, columns=[...] of the item table, a known distribution=, "
        "or estimated=[...] observed columns).",
        "--estimator",
    ),
    ("continuous", "`density_column`: no column 'density' in the logs.", "--density-column"),
    ("continuous", "`action_column`: no column 'action' in the logs.", "--action-column"),
    ("evaluate", "unknown policy names ['a'] in `names`: the table holds p.", "--policy"),
]


@pytest.mark.parametrize(("command", "message", "flag"), FLAG_CASES)
def test_the_flag_of_an_api_message(command, message, flag):
    from ope.cli import _COMMAND, _flag_named

    token = _COMMAND.set(command)
    try:
        assert _flag_named(message) == flag
    finally:
        _COMMAND.reset(token)


def test_continuous_column_errors_name_the_flags(files):
    # the library names its arguments (`density_column`); the command line has flags
    for drop, flag in (("density", "--density-column"), ("action", "--action-column")):
        path = files["root"] / f"no_{drop}.parquet"
        pd.read_parquet(files["continuous"]).drop(columns=[drop]).to_parquet(path)
        code, out, _ = run("continuous", path, "--json")
        error = one_document(out)["error"]
        assert code == EXIT_DATAERR and error["flag"] == flag
        assert error["message"].startswith(f"`{flag}`: no column '{drop}'")
        assert f"{drop}_column" not in error["message"]
