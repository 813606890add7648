"""``ope import obd|dsjson`` and ``--format obd|dsjson`` on validate / evaluate / diagnose."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ope.cli import main
from ope.io import read_logs
from tests.test_import_dsjson import LINES, _cb_line
from tests.test_import_obd import _write


def _run(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def dsjson(tmp_path):
    p = tmp_path / "events.json"
    p.write_text("\n".join(LINES) + "\n")
    return p


def test_import_dsjson_streams_and_reads_back(dsjson, tmp_path):
    out = tmp_path / "logs.parquet"
    code, stdout, _ = _run(
        "import",
        "dsjson",
        str(dsjson),
        "--out",
        str(out),
        "--json",
        "--on-invalid",
        "drop",
        "--chunk-lines",
        "3",
    )
    assert code == 0
    doc = json.loads(stdout)
    assert doc["rows_written"] == 4 and doc["report"]["rows_read"] == 18
    assert doc["report"]["rejected"]["dsjson_bad_json"] == 1
    logs = read_logs(out)
    assert logs.column("event_id").tolist() == ["e0", "events.json:1", "e2", "e13"]
    assert pq.read_schema(out).metadata[b"ope.source_format"] == b"dsjson"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_import_refuses_to_overwrite_and_leaves_no_file_on_invalid_data(dsjson, tmp_path):
    out = tmp_path / "logs.parquet"
    code, stdout, err = _run("import", "dsjson", str(dsjson), "--out", str(out))
    assert code == 65 and "dsjson_bad_json" in stdout and "ValidationError" in err
    assert not out.exists()
    assert not list(tmp_path.glob(".*.tmp"))
    out.write_bytes(b"keep me")
    code, _, err = _run("import", "dsjson", str(dsjson), "--out", str(out), "--on-invalid", "drop")
    assert code == 2 and "--force" in err and out.read_bytes() == b"keep me"
    code, _, _ = _run(
        "import", "dsjson", str(dsjson), "--out", str(out), "--on-invalid", "drop", "--force"
    )
    assert code == 0 and read_logs(out).n == 4


def test_import_obd_writes_logs_and_action_features(tmp_path):
    folder = _write(tmp_path / "random" / "all")
    out = tmp_path / "obd.parquet"
    code, stdout, _ = _run("import", "obd", str(folder), "--out", str(out))
    assert code == 0 and "wrote 6 rows" in stdout
    logs = read_logs(out)
    assert logs.column("position").tolist() == [1, 1, 2, 0, 0, 2]
    assert b"position-wise" in pq.read_schema(out).metadata[b"ope.propensity"]
    # the item table is embedded in the file: no side file, read back with the logs
    assert not (tmp_path / "obd.actions.parquet").exists()
    assert logs.action_features.column("action").to_pylist() == [0, 1, 2]


def test_format_flag_on_validate_evaluate_diagnose(tmp_path, dsjson):
    folder = _write(tmp_path / "random" / "all")
    code, stdout, _ = _run("validate", str(folder), "--format", "obd", "--json")
    assert code == 0 and json.loads(stdout)["report"]["rows_used"] == 6
    code, stdout, _ = _run("validate", str(dsjson), "--format", "dsjson", "--on-invalid", "drop")
    assert code == 0 and "dsjson_skip_learn: 1" in stdout
    code, _, err = _run("validate", str(dsjson), "--format", "dsjson")
    assert code == 65
    # a per-position candidate as a policy table joined on event_id
    pol = tmp_path / "policy.parquet"
    pq.write_table(
        pa.table(
            {
                "event_id": np.repeat(np.arange(6), 3),
                "policy": ["cand"] * 18,
                "action": np.tile(np.arange(3), 6),
                "probability": [1 / 3] * 18,
            }
        ),
        pol,
    )
    for cmd in ("evaluate", "diagnose"):
        code, stdout, err = _run(
            cmd,
            str(folder),
            "--format",
            "obd",
            "--policies",
            str(pol),
            "--reward-range",
            "0",
            "1",
            "--json",
        )
        assert code == 0, err
        doc = json.loads(stdout)
        if cmd == "evaluate":
            ips = next(e for e in doc["estimates"] if e["estimator"] == "ips")
            # rows: click / propensity over the CSV rows, target 1/3 everywhere
            hand = np.mean(
                np.array([1, 0, 1, 0, 1, 1]) / 3 / np.array([0.3, 0.25, 0.5, 0.4, 0.2, 0.1])
            )
            assert abs(ips["value"] - hand) < 1e-12
    code, _, err = _run("validate", str(folder), "--format", "obd", "--mapping", "reward=click")
    assert code == 2 and "--mapping" in err


def test_import_dsjson_workers_flag(dsjson, tmp_path):
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    for out, n in ((a, "1"), (b, "2")):
        code, _, err = _run(
            "import",
            "dsjson",
            str(dsjson),
            "--out",
            str(out),
            "--on-invalid",
            "drop",
            "--workers",
            n,
        )
        assert code == 0, err
    assert pq.read_table(a).equals(pq.read_table(b))
    code, _, err = _run(
        "import", "dsjson", str(dsjson), "--out", str(tmp_path / "c.parquet"), "--workers", "0"
    )
    assert code == 2 and "--workers" in err


def test_evaluate_of_a_one_event_dsjson_file_is_a_data_error(tmp_path):
    """One usable event (as in Vowpal Wabbit's own cb_simple test file) has no standard error:
    exit 65 with what to pass, as with sampling weights, not an internal error (exit 1)."""

    path = tmp_path / "one.json"
    path.write_text(_cb_line(0) + "\n")
    code, stdout, err = _run(
        "evaluate", str(path), "--format", "dsjson", "--policy", "u=uniform", "--json"
    )
    doc = json.loads(stdout)
    assert code == 65 and doc["exit_code"] == 65 and doc["error"]["type"] == "ValidationError"
    assert "1 usable row(s)" in doc["error"]["message"] and "every logged row" in err


def test_the_failure_headline_counts_the_broken_and_the_excluded_rows_apart(tmp_path):
    """Of the rows rejected, those VW also excludes (a line that is not an object) are counted
    apart from those that break a rule; the CLI's message names the flag once (no "(CLI: ...)"
    left after the keyword it translated)."""
    path = tmp_path / "two.json"
    path.write_text('"not an object"\n{"truncated": \n')
    code, out, err = _run("validate", str(path), "--format", "dsjson")
    assert code == 65
    assert "(1 of 2 rows read, 1 more excluded as Vowpal Wabbit excludes them)" in err
    assert "pass --on-invalid drop to drop these rows" in out and "(CLI:" not in out + err


def test_a_row_that_breaks_two_rules_counts_once_in_the_failure_headline(tmp_path):
    """A row rejected for two reasons (a repeated EventId and a propensity of 0) is one of the
    rows that break a rule; the excluded count is never negative."""
    lines = [_cb_line(i) for i in range(5)]
    lines[1] = _cb_line(0, _label_probability=0.0)  # repeats x0's id, and p = 0
    lines.append('"not an object"')
    path = tmp_path / "two.json"
    path.write_text("\n".join(lines) + "\n")
    code, out, err = _run("validate", str(path), "--format", "dsjson")
    assert code == 65
    assert "(1 of 6 rows read, 1 more excluded as Vowpal Wabbit excludes them)" in err
