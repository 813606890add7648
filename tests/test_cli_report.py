"""`ope report`, `ope evaluate --report` and the demo's report.html: written once, checked
before any row is read, never over the logs, replaced only with --force (or, for the demo, when
the existing file is a report ope wrote)."""

from __future__ import annotations

import json
import re
import shutil

import pytest

import ope
from ope.cli import EXIT_OK, EXIT_USAGE, main

SAMPLE = ope.load_sample().path
REPORT = ["--by", "segment", "--max-weight", "50", "--reward-range", "0", "1"]


@pytest.fixture(scope="module")
def policies():
    return sorted(
        c[len("target__") :] for c in ope.read_logs(SAMPLE).columns if c.startswith("target__")
    )


def _report(out, *extra):
    return main(["report", str(SAMPLE), *REPORT, "--out", str(out), *extra])


def test_report_writes_html_refuses_to_overwrite_and_force_replaces(tmp_path, capsys, policies):
    out = tmp_path / "r.html"
    assert _report(out) == EXIT_OK
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert all(name in page for name in policies)
    assert "report written to" in capsys.readouterr().out
    out.write_text("<!DOCTYPE html>stale", encoding="utf-8")
    assert _report(out) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "--force" in err and "exists" in err
    assert out.read_text(encoding="utf-8") == "<!DOCTYPE html>stale"  # untouched
    assert _report(out, "--force") == EXIT_OK
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>\n<html")


def test_report_destination_is_checked_before_reading(tmp_path, capsys):
    """A missing folder is a usage error (exit 2) naming --out, even when LOGS does not exist:
    the destination is checked before any row is read."""
    missing_logs = tmp_path / "nope.parquet"
    code = main(["report", str(missing_logs), "--out", str(tmp_path / "missing_dir" / "r.html")])
    assert code == EXIT_USAGE
    err = capsys.readouterr().err
    assert "argument --out" in err and "does not exist" in err and "nope.parquet" not in err


def test_report_never_overwrites_the_logs(tmp_path, capsys):
    logs = tmp_path / "logs.html"  # a name the suffix check accepts: the input check refuses it
    shutil.copyfile(SAMPLE, logs)
    before = logs.read_bytes()
    assert main(["report", str(logs), *REPORT, "--out", str(logs), "--force"]) == EXIT_USAGE
    assert "is the input LOGS" in capsys.readouterr().err
    assert logs.read_bytes() == before
    parquet = tmp_path / "logs.parquet"
    shutil.copyfile(SAMPLE, parquet)
    assert main(["report", str(parquet), "--out", str(parquet), "--force"]) == EXIT_USAGE
    assert parquet.read_bytes() == before


def test_report_json_is_one_document_with_the_path(tmp_path, capsys):
    out = tmp_path / "r.html"
    assert _report(out, "--json", "--title", "Sample report") == EXIT_OK
    doc = json.loads(capsys.readouterr().out)  # exactly one document: json.loads would fail
    assert doc["ok"] is True and doc["report"] == str(out)
    assert doc["command"] == "report" and doc["options"]["out"] == str(out)
    assert "<title>Sample report</title>" in out.read_text(encoding="utf-8")
    assert "diagnostics" in doc and doc["diagnostics"] is not None


def test_evaluate_report_writes_the_page_and_is_never_streamed(tmp_path, capsys, policies):
    out = tmp_path / "e.html"
    argv = ["evaluate", str(SAMPLE), "--reward-range", "0", "1", "--report", str(out), "--json"]
    assert main(argv) == EXIT_OK
    doc = json.loads(capsys.readouterr().out)
    assert doc["report"] == str(out) and doc["diagnostics"] is not None
    assert all(name in out.read_text(encoding="utf-8") for name in policies)
    assert main(argv) == EXIT_USAGE  # exists
    assert "--force" in json.loads(capsys.readouterr().out)["error"]["message"]
    assert main([*argv, "--force", "--streaming", "on"]) == EXIT_USAGE
    message = json.loads(capsys.readouterr().out)["error"]["message"]
    assert "--report" in message and "--streaming" in message


def test_demo_writes_report_html_and_replaces_only_its_own(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["demo"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "report written to report.html" in out and "ope report" in out
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "greedy" in page
    assert main(["demo", "--json"]) == EXIT_OK  # its own report: replaced without --force
    assert json.loads(capsys.readouterr().out)["report"] == "report.html"
    (tmp_path / "report.html").write_text("my notes", encoding="utf-8")
    assert main(["demo"]) == EXIT_USAGE  # refused before the work
    assert "--force" in capsys.readouterr().err
    assert (tmp_path / "report.html").read_text(encoding="utf-8") == "my notes"


# ---------------------------------------------------------------------------------------------
# --truth: the known truth from a file, as Python's truth=
# ---------------------------------------------------------------------------------------------
TRUTH = SAMPLE.with_name("sample_recommendation.truth.json")
SMALL = ["--policy", "greedy", "--estimator", "ips"]


def test_report_draws_the_bundled_truth_file(tmp_path, capsys):
    out = tmp_path / "r.html"
    assert _report(out, "--truth", str(TRUTH)) == EXIT_OK
    page = out.read_text(encoding="utf-8")
    truth = json.loads(TRUTH.read_text(encoding="utf-8"))
    assert "exact value" in page and "black diamonds: the exact values" in page
    assert f"its exact value is {truth['logging']:.4f}" in page  # the logging policy's, 4 decimals
    without = tmp_path / "plain.html"
    assert _report(without) == EXIT_OK
    assert "exact value" not in without.read_text(encoding="utf-8")


def test_evaluate_report_takes_a_flat_truth_file(tmp_path, capsys):
    truth = tmp_path / "truth.json"
    truth.write_text(json.dumps({"greedy": 0.2408, "logging": 0.1198}), encoding="utf-8")
    out = tmp_path / "r.html"
    code = main(["evaluate", str(SAMPLE), *SMALL, "--report", str(out), "--truth", str(truth)])
    assert code == EXIT_OK, capsys.readouterr().err
    page = out.read_text(encoding="utf-8")
    assert "exact difference" in page and "its exact value is 0.1198" in page


@pytest.mark.parametrize(
    "content, words",
    [
        ({"greedy": 0.24, "nobody": 0.1}, ["'nobody'", "not among the candidates", "greedy"]),
        ({"greedy": float("nan")}, ["greedy", "not a finite number"]),
        ({"greedy": float("inf")}, ["greedy", "not a finite number"]),
        ({"greedy": "high"}, ["must be a number"]),
        ([0.24], ["must be a mapping"]),
        (None, ["is not JSON"]),
        ("deep", ["is not JSON (nested too deeply)"]),
    ],
)
def test_a_bad_truth_file_is_a_usage_error_naming_the_flag(tmp_path, capsys, content, words):
    truth = tmp_path / "truth.json"
    if content is None:
        text = "{greedy"
    elif content == "deep":
        text = "[" * 100_000 + "]" * 100_000
    else:
        text = json.dumps(content)
    truth.write_text(text, encoding="utf-8")
    out = tmp_path / "r.html"
    code = main(["report", str(SAMPLE), *SMALL, "--truth", str(truth), "--out", str(out), "--json"])
    document = json.loads(capsys.readouterr().out)
    assert code == EXIT_USAGE and not out.exists()
    assert document["ok"] is False and document["error"]["flag"] == "--truth", document
    assert all(w in document["error"]["message"] for w in words), document["error"]["message"]


def test_a_missing_truth_file_fails_before_any_row_is_read(tmp_path, capsys):
    code = main(
        [
            "report",
            str(tmp_path / "nope.parquet"),
            "--truth",
            str(tmp_path / "t.json"),
            "--out",
            str(tmp_path / "r.html"),
        ]
    )
    err = capsys.readouterr().err
    assert code == EXIT_USAGE and "nope" not in err
    assert re.search(r"argument --truth: path \S*t\.json does not exist", err)


def test_evaluate_truth_without_a_report_is_a_usage_error(tmp_path, capsys):
    truth = tmp_path / "t.json"
    truth.write_text('{"a": 0.5}')
    code = main(["evaluate", str(tmp_path / "nope.parquet"), "--truth", str(truth)])
    err = capsys.readouterr().err
    assert (
        code == EXIT_USAGE
        and "argument --truth: the known true values are drawn in the report" in err
    )
