"""Hostile values on the command line, fixed where they broke the contract: every run ends in
its documented exit code (2 usage, 65 invalid data) with exactly one JSON document whose error
names the flag (``error.flag``) or, for a positional, starts ``argument logs:``/``src:``.

The classes: an unknown candidate name (a PolicyError of ``--policy``), a flag of another
format (``--chunk-lines`` without DSJSON), names that are not files (empty, ``-``), a policy
name a table cannot hold (``learn --name``, checked before the fit), a DSJSON file the system
will not read, the importer's SRC over the file-system cases, and the demo's ``--out``.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import io
import json
import os

import numpy as np
import pandas as pd
import pytest

import ope
import ope.cli
from ope._valid_calls._base import dsjson_file, frame, obd_campaign, parquet
from ope.cli import EXIT_DATAERR, EXIT_OK, EXIT_USAGE, main
from ope.exceptions import ParameterError


def run(*argv) -> tuple[int, dict]:
    """``main(argv + --json)``: the exit code and the one JSON document of stdout."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main([str(a) for a in argv] + ["--json"])
    return code, json.loads(out.getvalue())


@pytest.fixture
def logs(tmp_path):
    return parquet(tmp_path)


@pytest.fixture
def policy_table(tmp_path):
    ids = frame()["event_id"].to_numpy()
    path = tmp_path / "policies.parquet"
    pd.DataFrame(
        {
            "event_id": np.repeat(ids, 3),
            "policy": "p",
            "action": np.tile([0, 1, 2], len(ids)),
            "probability": 1 / 3,
        }
    ).to_parquet(path)
    return path


# ---------------------------------------------------------------------------------------------
# an unknown candidate: a data error (65) of --policy
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "extra",
    [
        ["evaluate", "--estimator", "ips"],
        ["diagnose"],
        ["report", "--estimator", "ips", "--out", "{tmp}/r.html"],
    ],
    ids=["evaluate", "diagnose", "report"],
)
@pytest.mark.parametrize("source", ["columns", "table", "table and spec"])
def test_an_unknown_candidate_names_the_policy_flag(tmp_path, logs, policy_table, extra, source):
    command, *options = [e.replace("{tmp}", str(tmp_path)) for e in extra]
    policy = ["--policy", "a" * 300]
    if source != "columns":
        policy += ["--policies", str(policy_table)]
    if source == "table and spec":
        policy += ["--policy", "u=uniform"]
    code, doc = run(command, logs, *options, *policy)
    assert code == EXIT_DATAERR and doc["error"]["type"] == "PolicyError"
    assert doc["error"]["flag"] == "--policy" and "unknown polic" in doc["error"]["message"]
    assert not (tmp_path / "r.html").exists()


# ---------------------------------------------------------------------------------------------
# importer flags given with another format: refused, not ignored
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv, flag",
    [
        (["validate", "{logs}", "--chunk-lines", "5"], "--chunk-lines"),
        (["evaluate", "{logs}", "--workers", "2"], "--workers"),
        (["validate", "{obd}", "--format", "obd", "--chunk-lines", "5"], "--chunk-lines"),
        (["import", "obd", "{obd}", "--out", "{out}", "--workers", "1"], "--workers"),
        (
            ["import", "dsjson", "{dsjson}", "--out", "{out}", "--obd-context", "user"],
            "--obd-context",
        ),
        (["action-table", "{logs}", "--out", "{tmp}/t.csv", "--chunk-lines", "9"], "--chunk-lines"),
    ],
)
def test_a_flag_of_another_format_is_a_usage_error(tmp_path, argv, flag):
    files = {
        "logs": parquet(tmp_path),
        "obd": obd_campaign(tmp_path),
        "dsjson": dsjson_file(tmp_path),
        "out": tmp_path / "o.parquet",
        "tmp": tmp_path,
    }
    code, doc = run(*[a.format(**files) for a in argv])
    assert code == EXIT_USAGE and doc["error"]["flag"] == flag
    assert "applies only to" in doc["error"]["message"]
    assert not (tmp_path / "o.parquet").exists() and not (tmp_path / "t.csv").exists()


# ---------------------------------------------------------------------------------------------
# names that are not files: empty inputs, '-' (no standard input or output)
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv, named",
    [
        (["validate", ""], "argument logs: is empty"),
        (["learn", "  ", "--context-columns", "x0"], "argument logs: is empty"),
        (["import", "dsjson", "", "--out", "o.parquet"], "argument src: is empty"),
        (["evaluate", "{logs}", "--policies", " "], "argument --policies: is empty"),
        (["validate", "-"], "argument logs: '-' (standard input)"),
        (["import", "obd", "-", "--out", "o.parquet"], "argument src: '-' (standard input)"),
        (["import", "dsjson", "{dsjson}", "--out", "-"], "argument --out: '-' (standard output)"),
        (["learn", "{logs}", "--context-columns", "x0", "--out", "-"], "argument --out: '-'"),
        (["action-table", "{logs}", "--out", "-"], "argument --out: '-'"),
        (["evaluate", "{logs}", "--policy", "greedy", "--report", "-"], "argument --report: '-'"),
        (["demo", "--out", "-"], "argument --out: '-' (standard output)"),
    ],
)
def test_a_name_that_is_not_a_file_is_a_usage_error(tmp_path, monkeypatch, argv, named):
    files = {"logs": parquet(tmp_path), "dsjson": dsjson_file(tmp_path)}
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)  # were '-' or '' taken for names, they would land here
    code, doc = run(*[a.format(**files) for a in argv])
    assert code == EXIT_USAGE and doc["error"]["message"].startswith(named)
    flag = named.split()[1].rstrip(":")
    assert doc["error"].get("flag") == (flag if flag.startswith("--") else None)
    assert list(work.iterdir()) == []


# ---------------------------------------------------------------------------------------------
# the learned policy's name labels a table: printable, not blank
# ---------------------------------------------------------------------------------------------
#: Names a policy table cannot hold: blank, a NUL, an unpaired surrogate (an undecodable byte of
#: the command line; not writable as UTF-8). Control and bidi characters are kept: text output
#: escapes them.
BAD_NAMES = ["", "   ", "\udcff", "nul\x00"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_learn_refuses_a_name_that_cannot_label_the_policy(tmp_path, logs, name):
    out = tmp_path / "policy.parquet"
    code, doc = run("learn", logs, "--context-columns", "x0", "--out", out, "--name", name)
    assert code == EXIT_USAGE and doc["error"]["flag"] == "--name"
    assert doc["error"]["message"].startswith("argument --name: `name` must be a non-blank str")
    assert not out.exists()


def test_the_python_learner_refuses_those_names_before_the_fit_and_the_write(tmp_path, logs):
    from ope.io import read_logs
    from ope.learning import learn_from_logs, write_learner_policy_table

    bandit = read_logs(logs)
    for name in BAD_NAMES:
        with pytest.raises(ParameterError, match="`name` must be a non-blank str"):
            learn_from_logs(bandit, context_columns=["x0"], name=name)
    learner, _ = learn_from_logs(bandit, context_columns=["x0"], rng=0)
    out = tmp_path / "policy.parquet"
    with pytest.raises(ParameterError, match="`name`"):
        write_learner_policy_table(learner, bandit, out, context_columns=["x0"], name="\udcff")
    assert not out.exists()


# ---------------------------------------------------------------------------------------------
# a DSJSON file the system will not read (EIO, permissions): a data error naming it
# ---------------------------------------------------------------------------------------------
def test_an_unreadable_dsjson_file_is_a_data_error_naming_it(tmp_path, monkeypatch):
    src = dsjson_file(tmp_path)
    module = importlib.import_module("ope.importers.dsjson")

    def failing_open(*args, **kwargs):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(module, "open", failing_open, raising=False)
    code, doc = run("import", "dsjson", src, "--out", tmp_path / "o.parquet")
    assert code == EXIT_DATAERR and doc["error"]["type"] == "DataFileError"
    assert str(src) in doc["error"]["message"] and "Input/output error" in doc["error"]["message"]
    assert not (tmp_path / "o.parquet").exists()


# ---------------------------------------------------------------------------------------------
# ope import's SRC over the file-system cases (the second positional, after the format)
# ---------------------------------------------------------------------------------------------
def _src_case(tmp_path, label):
    path = tmp_path / f"case-{label}"
    if label == "directory":
        path.mkdir()
    elif label == "fifo":
        os.mkfifo(path)  # refused from its type: never opened
    elif label == "empty":
        path.write_bytes(b"")
    elif label == "undecodable":
        path.write_bytes(b"\xff\xfe\x00\x80garbage" * 10)
    elif label == "binary":
        path.write_bytes(bytes(range(256)) * 4)
    elif label == "dangling link":
        path.symlink_to(tmp_path / "nowhere")
    elif label == "bidi name":
        path = tmp_path / "logs\u202e.json"
    return path


@pytest.mark.parametrize("fmt", ["dsjson", "obd"])
@pytest.mark.parametrize(
    "label",
    [
        "missing",
        "directory",
        "fifo",
        "empty",
        "undecodable",
        "binary",
        "dangling link",
        "bidi name",
    ],
)
def test_import_src_keeps_the_contract(tmp_path, fmt, label):
    src = _src_case(tmp_path, label)
    code, doc = run("import", fmt, src, "--out", tmp_path / "o.parquet")
    assert code in (EXIT_USAGE, EXIT_DATAERR), doc["error"]
    message = doc["error"]["message"]
    assert str(src) in message or src.name in message or message.startswith("argument src:")
    assert not (tmp_path / "o.parquet").exists()


# ---------------------------------------------------------------------------------------------
# ope demo --out: checked before the work, the report where it says, nothing in the cwd
# ---------------------------------------------------------------------------------------------
def test_demo_out_is_checked_before_the_work(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, doc = run("demo", "--out", tmp_path / "demo.txt")
    assert code == EXIT_USAGE and doc["error"]["flag"] == "--out"
    notes = tmp_path / "notes.html"
    notes.write_text("my notes", encoding="utf-8")
    code, doc = run("demo", "--out", notes)
    assert code == EXIT_USAGE and doc["error"]["flag"] == "--out"
    assert "--force" in doc["error"]["message"] and notes.read_text() == "my notes"
    code, doc = run("demo", "--out", tmp_path / "missing" / "demo.html")
    assert code == EXIT_USAGE and doc["error"]["flag"] == "--out"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.html"]


def test_demo_writes_its_report_at_out_and_nothing_in_the_current_folder(tmp_path, monkeypatch):
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    out = tmp_path / "demo.html"
    code, doc = run("demo", "--out", out)
    assert code == EXIT_OK and doc["report"] == str(out) and doc["options"]["out"] == str(out)
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert list(work.iterdir()) == []


# ---------------------------------------------------------------------------------------------
# the parser is public for the registry, not a name of the top-level namespace
# ---------------------------------------------------------------------------------------------
def test_the_parser_is_public_in_ope_cli_only():
    assert "build_parser" in ope.cli.__all__ and "build_parser" not in ope.__all__
    parser = ope.cli.build_parser()
    assert parser.parse_args(["demo", "--out", "x.html"]).out == "x.html"
    assert parser.parse_args(["demo"]).out == "report.html"
