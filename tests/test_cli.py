"""The command line: exit codes, --json documents, and the demo on the bundled sample."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from ope.cli import EXIT_DATAERR, EXIT_OK, EXIT_USAGE, main
from ope.simulate import load_sample


@pytest.fixture(scope="module")
def sample_path():
    return str(load_sample(columns=["action"]).path)


@pytest.fixture()
def bad_logs(tmp_path):
    df = pd.DataFrame(
        {
            "action": [0, 1, 0, 1],
            "propensity": [0.5, 0.0, 0.5, 1.5],
            "reward": [1.0, 0.0, np.nan, 1.0],
            "target__a": [1.0, 0.0, 1.0, 0.0],
        }
    )
    path = tmp_path / "bad.parquet"
    df.to_parquet(path)
    return str(path)


def test_validate_ok_json(sample_path, capsys):
    assert main(["validate", sample_path, "--json"]) == EXIT_OK
    doc = json.loads(capsys.readouterr().out)
    assert doc["valid"] is True
    assert doc["report"]["rows_read"] == doc["report"]["rows_used"] == 100_000
    assert set(doc["target_policies"]) == {
        "popular",
        "personalized",
        "greedy",
        "long_tail",
        "uniform",
    }


def test_validate_invalid_exits_65_with_report(bad_logs, capsys):
    assert main(["validate", bad_logs, "--json"]) == EXIT_DATAERR
    doc = json.loads(capsys.readouterr().out)
    assert doc["valid"] is False
    assert doc["report"]["rejected"] == {"propensity_out_of_range": 2, "reward_missing": 1}
    assert main(["validate", bad_logs]) == EXIT_DATAERR
    out = capsys.readouterr().out
    assert "propensity_out_of_range: 2" in out and "--on-invalid drop" in out


def test_validate_drop_keeps_counts(bad_logs, capsys):
    assert main(["validate", bad_logs, "--on-invalid", "drop", "--json"]) == EXIT_OK
    doc = json.loads(capsys.readouterr().out)
    assert doc["report"]["rows_used"] == 1 and doc["report"]["rows_rejected"] == 3


def test_mapping_renames_columns(tmp_path, capsys):
    df = pd.DataFrame({"item": [0, 1], "pscore": [0.5, 0.5], "click": [1.0, 0.0]})
    path = tmp_path / "theirs.parquet"
    df.to_parquet(path)
    argv = [
        "validate",
        str(path),
        "--mapping",
        "action=item",
        "propensity=pscore",
        "reward=click",
        "--json",
    ]
    assert main(argv) == EXIT_OK
    assert json.loads(capsys.readouterr().out)["report"]["rows_used"] == 2


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["frobnicate"],
        ["validate"],
        ["evaluate", "x.parquet", "--confidence-level", "high"],
    ],
)
def test_usage_errors_exit_2(argv, capsys):
    assert main(argv) == EXIT_USAGE


def test_bad_mapping_is_a_usage_error(sample_path, capsys):
    assert main(["validate", sample_path, "--mapping", "propensity"]) == EXIT_USAGE
    assert "OUR_NAME=THEIR_NAME" in capsys.readouterr().err


def test_missing_file_is_reported(tmp_path, capsys):
    code = main(["validate", str(tmp_path / "nope.parquet")])
    assert code == EXIT_DATAERR
    assert "nope.parquet" in capsys.readouterr().err


def test_evaluate_json_is_one_document(sample_path, capsys):
    argv = [
        "evaluate",
        sample_path,
        "--estimator",
        "ips",
        "snips",
        "clipped_ips",
        "--max-weight",
        "50",
        "--reward-range",
        "0",
        "1",
        "--json",
    ]
    assert main(argv) == EXIT_OK
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["estimates"]) == 5 * 3
    assert doc["validation"]["rows_used"] == 100_000
    assert all(r["ci_low"] <= r["value"] <= r["ci_high"] for r in doc["estimates"])


def test_evaluate_bounded_ci_without_range_fails_clearly(sample_path, capsys):
    # a missing a priori bound is a missing flag: a usage error (exit 2), not a runtime failure
    code = main(["evaluate", sample_path, "--estimator", "ips", "--ci", "betting"])
    assert code == 2
    assert "argument --reward-range:" in capsys.readouterr().err


def test_evaluate_policy_table(tmp_path, capsys):
    df = pd.DataFrame(
        {
            "event_id": [0, 1, 2],
            "action": [0, 1, 1],
            "propensity": [0.5] * 3,
            "reward": [1.0, 0.0, 1.0],
        }
    )
    logs = tmp_path / "logs.parquet"
    df.to_parquet(logs)
    table = pd.DataFrame(
        {
            "event_id": [0, 0, 1, 1, 2, 2],
            "policy": ["half"] * 6,
            "action": [0, 1, 0, 1, 0, 1],
            "probability": [0.5] * 6,
        }
    )
    pol = tmp_path / "policies.parquet"
    table.to_parquet(pol)
    assert (
        main(["evaluate", str(logs), "--policies", str(pol), "--estimator", "ips", "--json"])
        == EXIT_OK
    )
    doc = json.loads(capsys.readouterr().out)
    assert doc["estimates"][0]["policy"] == "half"
    assert doc["estimates"][0]["value"] == pytest.approx(2 / 3)


def test_demo_json_shows_truth(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the demo writes report.html in the current directory
    assert main(["demo", "--json"]) == EXIT_OK
    doc = json.loads(capsys.readouterr().out)
    rows = doc["table"]
    assert {r["policy"] for r in rows} == set(doc["truth"]["policies"])
    assert all(np.isfinite(r["true_value"]) for r in rows)


def test_console_entry_point_runs(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "ope", "demo"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert "truth" in out.stdout and "greedy" in out.stdout


_RUN_WITH_EXIT_HANDLER = """
import atexit, sys
atexit.register(lambda: print("exit handler ran", file=sys.stderr))
from ope.cli import run
sys.argv = ["ope", *sys.argv[1:]]
run()
"""


@pytest.mark.parametrize(
    ("argv", "code"),
    [(["evaluate", "{sample}", "--json"], EXIT_OK), (["evaluate", "--nope", "--json"], EXIT_USAGE)],
)
def test_run_ends_with_mains_code_after_the_output_and_the_exit_handlers(tmp_path, argv, code):
    sample = str(load_sample(columns=["reward"]).path)
    out = subprocess.run(
        [sys.executable, "-c", _RUN_WITH_EXIT_HANDLER, *(a.format(sample=sample) for a in argv)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert out.returncode == code, out.stderr
    assert json.loads(out.stdout)["exit_code"] == code  # the whole document, flushed
    assert out.stderr.rstrip().endswith("exit handler ran")


def test_run_when_the_reader_leaves_early(tmp_path):
    sample = str(load_sample(columns=["reward"]).path)
    cmd = [sys.executable, "-m", "ope", "evaluate", sample, "--json"]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path) as p:
        assert p.stdout is not None and p.stderr is not None
        p.stdout.close()  # the reader leaves before the document is written (EPIPE)
        err = p.stderr.read().decode()
        assert p.wait(timeout=300) == EXIT_OK
    assert "Traceback" not in err and "BrokenPipeError" not in err


def test_learn_writes_a_policy_that_evaluate_scores(tmp_path, capsys):
    from ope.simulate import ContextualBandit

    env = ContextualBandit(n_actions=4, seed=2)
    logs = tmp_path / "logs.parquet"
    pq.write_table(env.sample(8_000, rng=5), logs)
    out = tmp_path / "learned.parquet"
    argv = ["learn", str(logs), "--context-columns", "x0", "x1", "x2", "--out", str(out), "--json"]
    assert main(argv) == EXIT_OK
    doc = json.loads(capsys.readouterr().out)
    cert = doc["certificate"]
    assert cert["verdict"] in ("approve", "reject")
    assert cert["confidence_level"] == 0.95
    assert (
        main(["evaluate", str(logs), "--policies", str(out), "--estimator", "snips", "--json"])
        == EXIT_OK
    )
    ev = json.loads(capsys.readouterr().out)
    assert [r["policy"] for r in ev["estimates"]] == ["learned"]


def test_learn_requires_context_columns(sample_path, capsys):
    assert main(["learn", sample_path]) == EXIT_USAGE


def test_diagnose_json_reports_the_planted_gap(sample_path, capsys):
    argv = [
        "diagnose",
        sample_path,
        "--by",
        "segment",
        "--max-weight",
        "50",
        "--reward-range",
        "0",
        "1",
        "--json",
    ]
    assert main(argv) == EXIT_OK
    doc = json.loads(capsys.readouterr().out)
    policies = {p["policy"]: p for p in doc["diagnostics"]["policies"]}
    # cold-start users only see the logger's top 16 of 20 candidates: long_tail's gap is there
    gaps = [s for s in policies["long_tail"]["segments"] if s["gap"]]
    assert [s["segment"] for s in gaps] == ["new"]
    assert "new" in gaps[0]["reason"]
    assert not any(s["gap"] for s in policies["popular"]["segments"])
    assert policies["long_tail"]["verdict"] == "change the logging policy's exploration"


def test_evaluate_json_carries_diagnostics(sample_path, capsys):
    argv = ["evaluate", sample_path, "--estimator", "snips", "--by", "segment", "--json"]
    assert main(argv) == EXIT_OK
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert {p["policy"] for p in doc["diagnostics"]["policies"]} == {
        r["policy"] for r in doc["estimates"]
    }
    assert all(
        "gap" in s and "reason" in s for p in doc["diagnostics"]["policies"] for s in p["segments"]
    )
    # weak overlap is also said on stderr, one line per warning
    assert "warning (OverlapWarning)" in captured.err


@pytest.mark.parametrize(
    ("extra", "flag", "phrase"),
    [
        (["--ci", "bogus"], "--ci", "`--ci` must be one of"),
        (
            ["--confidence-level", "1.5"],
            "--confidence-level",
            "`--confidence-level` must be in (0, 1)",
        ),
        (["--reward-range", "1", "0"], "--reward-range", "low < high"),
        (["--estimator", "ipz"], "--estimator", "unknown estimator 'ipz'"),
        (["--estimator", "clipped_ips"], "--max-weight", "needs its setting `--max-weight`"),
    ],
)
def test_bad_argument_values_exit_2_naming_the_flag(sample_path, capsys, extra, flag, phrase):
    assert main(["evaluate", sample_path, *extra]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"argument {flag}:" in err and phrase in err
    assert "unexpected" not in err


def test_bad_argument_value_with_json_prints_one_error_document(sample_path, capsys):
    assert main(["evaluate", sample_path, "--ci", "bogus", "--json"]) == EXIT_USAGE
    doc = json.loads(capsys.readouterr().out)  # exactly one document
    assert doc["ok"] is False and doc["exit_code"] == EXIT_USAGE
    assert doc["error"]["type"] == "usage" and "--ci" in doc["error"]["message"]


def test_rewards_outside_the_range_are_a_data_error(tmp_path, capsys):
    path = tmp_path / "logs.parquet"
    pd.DataFrame(
        {
            "action": [0, 1, 1],
            "propensity": [0.5] * 3,
            "reward": [1.0, 5.0, 0.0],
            "target__a": [0.5, 0.5, 0.5],
        }
    ).to_parquet(path)
    argv = ["evaluate", str(path), "--estimator", "ips", "--reward-range", "0", "1", "--json"]
    assert main(argv) == EXIT_DATAERR
    doc = json.loads(capsys.readouterr().out)
    assert (
        doc["error"]["type"] == "ValidationError"
        and "outside --reward-range 0 1" in doc["error"]["message"]
    )


def test_demo_states_each_warning_once(capsys, tmp_path, monkeypatch):
    """Every warning of the demo is one numbered note, referenced where it applies: nothing on
    stderr, no note twice, and the diagnostics' rewording of the evaluation's weight warnings
    (ESS, mean weight) is not repeated."""
    import re

    monkeypatch.chdir(tmp_path)
    assert main(["demo"]) == EXIT_OK
    captured = capsys.readouterr()
    assert "warning (" not in captured.err
    notes: list[tuple[str, str]] = []  # (number, whole text); a wrapped note goes on indented lines
    current = None
    for line in captured.out.splitlines():
        head = re.match(r"^\s*\[(\d+)\] (.*)$", line)
        if head:
            current = [head.group(1), head.group(2)]
            notes.append(current)
        elif current is not None and line.startswith("      ") and line.strip():
            current[1] += " " + line.strip()
        else:
            current = None
    notes = [(n, t) for n, t in notes]
    numbers = [int(n) for n, _ in notes]
    assert numbers == list(range(1, len(numbers) + 1))  # numbered once, in order
    texts = [t for _, t in notes]
    assert len(set(texts)) == len(texts)
    assert not any(
        t.split(":")[0].strip() == "long_tail" and "effective sample size" in t for t in texts
    )  # diagnose's own wording of note about long_tail's ESS
    assert sum("effective sample size 553" in t for t in texts) == 1
    # the candidate's coverage line, wrapped (read as one line)
    refs = re.findall(r"long_tail +ESS/n[^\[]*\[see ([\d, ]+)\]", " ".join(captured.out.split()))
    assert refs and all(int(n) <= len(texts) for n in refs[0].split(", "))
    assert "gap: candidate long_tail" in captured.out
    # the rows' origin is the bundled sample, the truth its file; clip levels as the
    # diagnostics print them
    assert "validation report for ope.load_sample() (sample_recommendation.parquet)" in captured.out
    assert "<Table>" not in captured.out and "datasets/README.md" not in captured.out
    assert "sample_recommendation.truth.json" in captured.out
    assert re.search(r"\(clip \d+(\.\d{1,2})?\) is coverage", captured.out)
    assert not re.search(r"\(clip \d+\.\d{3,}\)", captured.out)


def test_evaluate_records_the_command_the_input_and_its_rows(sample_path, capsys, tmp_path):
    """The provenance of ``ope evaluate`` (JSON and text, eager and streamed) holds the command
    as typed, the input and the rows read from it, beside the options and the seed; the text
    keeps the command on one line however long the path (the reader copies it and runs it)."""
    for streaming in ("off", "on"):
        argv = ["evaluate", sample_path, "--seed", "2024", "--streaming", streaming, "--json"]
        assert main(argv) == EXIT_OK
        prov = json.loads(capsys.readouterr().out)["provenance"]
        assert prov["command"] == shlex.join(
            ["ope", "evaluate", sample_path, "--seed", "2024", "--streaming", streaming, "--json"]
        )
        assert prov["input"] == sample_path and prov["rows"] == 100_000 and prov["seed"] == 2024
    deep = tmp_path / ("a directory with a long name " * 3) / "sample_recommendation.parquet"
    deep.parent.mkdir()
    shutil.copyfile(sample_path, deep)
    for path in (sample_path, str(deep)):
        assert main(["evaluate", path, "--seed", "2024"]) == EXIT_OK
        out = capsys.readouterr().out
        command = shlex.join(["ope", "evaluate", path, "--seed", "2024"])
        assert f"\n  command: {command}\n" in out
        assert f"\n  input:   {path} (100,000 rows)\n" in out


def test_evaluate_text_and_warnings_use_the_cli_spelling(sample_path, capsys):
    """The diagnostics' notes in ``ope evaluate`` and ``ope diagnose`` say flags and commands,
    also where the summary wrapped a phrase over two lines, and a warning about one policy
    names it once (the estimates say "policy 'x'", the diagnostics "x")."""
    for argv in (["evaluate", sample_path], ["diagnose", sample_path]):
        assert main(argv) == EXIT_OK
        captured = capsys.readouterr()
        text = " ".join((captured.out + captured.err).split())
        assert "ope.diagnostics" not in text and "reward_range" not in text, argv
        assert "pass --reward-range for the outer/inner split" in text, argv
        assert "policy 'long_tail', long_tail" not in captured.err, argv
        # every warning is a note of the text already (in either spelling): none on stderr
        assert "warning (" not in captured.err, (argv, captured.err)
        # a translated phrase keeps the summary's line breaks (the provenance's command and
        # input, which hold the path, are never broken: they are not measured)
        kept = [ln for ln in captured.out.splitlines() if sample_path not in ln]
        assert max(len(line) for line in kept) <= 100, argv
    from ope.cli import _cli_phrases

    wrapped = "betting or empirical likelihood with an a priori\n      reward_range), or clip"
    assert _cli_phrases(wrapped) == (
        "betting or empirical likelihood with an a priori\n      --reward-range), or clip"
    )
    assert _cli_phrases("(see Diagnostics.plan())") == (
        "(see the exploration plan of "
        "`ope diagnose --reward-range LO HI --target-width W --new-rows N`)"
    )


def test_help_lists_every_exit_code(capsys):
    from ope.cli import EXIT_CANTCREAT, EXIT_INTERRUPTED, EXIT_TERMINATED

    assert main(["--help"]) == EXIT_OK
    text = " ".join(capsys.readouterr().out.split())
    for code in (EXIT_OK, 1, EXIT_USAGE, EXIT_DATAERR, EXIT_CANTCREAT):
        assert f"{code} " in text
    assert f"{EXIT_INTERRUPTED}/{EXIT_TERMINATED} interrupted" in text


@pytest.mark.parametrize("bad", [0.0, -1.0, float("inf"), "all 1e-200"])
def test_validate_checks_the_sampling_weights_as_the_estimates_will(tmp_path, capsys, bad):
    """``ope validate`` said valid (exit 0) for a ``weight`` column that ``ope evaluate`` then
    refused (exit 65); it now refuses it the same way: a weight <= 0 or infinite breaks the
    read rule ``weight_out_of_range`` (naming its row), weights whose squares all underflow
    the table-level check of the weights."""
    frame = pd.DataFrame(
        {
            "action": [0, 1, 0, 1],
            "propensity": 0.5,
            "reward": [1.0, 0.0, 1.0, 0.0],
            "target__a": [1.0, 0.0, 1.0, 0.0],
            "weight": [1e-200] * 4 if bad == "all 1e-200" else [1.0, bad, 2.0, 1.0],
        }
    )
    path = tmp_path / "weighted.parquet"
    frame.to_parquet(path)
    for command in ("validate", "evaluate"):
        assert main([command, str(path), "--json"]) == EXIT_DATAERR, command
        error = json.loads(capsys.readouterr().out)["error"]
        if bad == "all 1e-200":
            assert error["message"].startswith("`weight` "), error
        else:
            assert "weight_out_of_range: 1 (rows 1)" in error["message"], error
    frame["weight"] = [1.0, 3.0, 2.0, 1.0]
    frame.to_parquet(path)
    assert main(["validate", str(path), "--json"]) == EXIT_OK


def _numbered_notes(text):
    """Every note of a command's text output: (number, whole text) in order, a wrapped note
    read as one line; the labels of each ``Notes:`` block (and of the demo's numbered lists)."""
    import re

    notes, current = [], None
    for line in text.splitlines():
        head = re.match(r"^  \[(\d+)\] (.*)$", line)
        if head:
            current = [int(head.group(1)), head.group(2)]
            notes.append(current)
        elif current is not None and line.startswith("      ") and line.strip():
            current[1] += " " + line.strip()
        else:
            current = None
    return [(n, t) for n, t in notes]


def test_evaluate_numbers_every_note_once_and_its_references_name_it(sample_path, capsys):
    """The estimates and the overlap diagnostics of ``ope evaluate`` are one numbered sequence
    of notes: no number is given twice, the table's references and the diagnostics' "see note
    [k]" name the note about that candidate."""
    import re

    assert main(["evaluate", sample_path]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.count("\nNotes:\n") == 2  # the estimates' and the diagnostics'
    notes = _numbered_notes(out)
    numbers = [n for n, _ in notes]
    assert numbers == list(range(1, len(numbers) + 1))  # one sequence, no number twice
    text = dict(notes)
    # the estimates' table: long_tail's rows reference its ESS and mean-weight notes
    row = next(ln for ln in out.splitlines() if ln.startswith("long_tail     ips"))
    refs = [int(k) for k in re.search(r"\[([\d,]+)\]$", row).group(1).split(",")]
    assert any("effective sample size 553.2" in text[k] for k in refs)
    assert any("mean importance weight is 0.6791" in text[k] for k in refs)
    # the diagnostics' lines: "see note [k]" is the note about that candidate, after the
    # estimates' notes
    diagnostics = out[out.index("Overlap diagnostics:") :]
    block = diagnostics[diagnostics.index("\nlong_tail\n") :]
    ess = int(re.search(r"ESS 553\.2 \(0\.55% of rows, see note \[(\d+)\]\)", block).group(1))
    low = int(re.search(r"too low for the propensities: see note \[(\d+)\]", block).group(1))
    assert text[ess].startswith("long_tail: effective sample size 553.2")
    assert text[low].startswith("long_tail: mean importance weight is 0.6791")
    first_block = out[: out.index("Overlap diagnostics:")]
    assert min(ess, low) > max(n for n, _ in _numbered_notes(first_block))


def test_diagnose_text_keeps_the_cli_spelling_within_the_text_width(sample_path, capsys):
    """A coverage gap's advice names the command that makes the exploration plan (not the
    Python method), in ``ope evaluate`` too, and a longer spelling is wrapped again to the text
    width: no line of the gaps or their notes is wider."""
    from ope._format import TEXT_WIDTH
    from ope.cli import build_parser

    for command in ("diagnose", "evaluate"):
        assert main([command, sample_path, "--by", "segment", "x0"]) == EXIT_OK
        out = capsys.readouterr().out
        assert "Diagnostics.plan()" not in out, command
        advice = "`ope diagnose --reward-range LO HI --target-width W --new-rows N`"
        assert advice in out, command
        diagnostics = out[out.index("Overlap diagnostics:") :]
        wide = [ln for ln in diagnostics.splitlines() if len(ln) > TEXT_WIDTH]
        assert not wide, (command, wide)
        gaps = " ".join(diagnostics.split())
        assert gaps.count("(see the exploration plan of " + advice + ")") >= 5, command
    # the advice is a command line ope diagnose takes
    args = build_parser().parse_args(
        ["diagnose", sample_path, "--reward-range", "0", "1", "--target-width", "0.05"]
        + ["--new-rows", "1000"]
    )
    assert (args.target_width, args.new_rows, args.reward_range) == (0.05, 1000, [0.0, 1.0])


def test_help_of_logs_names_every_source_the_readers_take(sample_path, capsys):
    """LOGS' help says what each command reads: parquet files and folders, URIs, and with
    --format the raw sources of the importers (an OBD campaign, a DSJSON file)."""
    from pathlib import Path

    def logs_help(command):
        assert main([command, "--help"]) == EXIT_OK
        text = capsys.readouterr().out
        section = text[text.index("positional arguments:") : text.index("options:")]
        return " ".join(section.split())

    for command in ("validate", "evaluate", "diagnose", "tune", "action-table", "report"):
        text = logs_help(command)
        assert "a directory of parquet files" in text and "s3://" in text, command
        assert "--format obd an Open Bandit Dataset campaign folder" in text, command
        assert "--format dsjson a DSJSON file" in text, command
    for command in ("learn", "paired"):
        text = logs_help(command)
        assert "a directory of parquet files" in text and "s3://" in text, command
        assert "--format" not in text, command  # they read parquet only
    assert "a local directory whose new .parquet files are read" in logs_help("monitor")
    # a URI is read as the help says
    assert main(["validate", Path(sample_path).as_uri(), "--json"]) == EXIT_OK
    assert json.loads(capsys.readouterr().out)["valid"] is True


def test_estimator_auto_is_shown_among_the_choices(sample_path, capsys):
    """``--estimator auto`` is accepted by ope evaluate and ope report: their usage and help
    show it, and an unknown name's error lists it beside the names."""
    for command in ("evaluate", "report"):
        assert main([command, "--help"]) == EXIT_OK
        text = capsys.readouterr().out
        assert "[--estimator NAME|auto [NAME|auto ...]]" in " ".join(text.split()), command
    assert main(["evaluate", sample_path, "--estimator", "bogus", "--json"]) == EXIT_USAGE
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["flag"] == "--estimator"
    assert "choose from dm, ips," in error["message"]
    assert "or auto alone (--estimator auto" in error["message"]


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """``ope demo``'s text and the report it writes (run once in a folder of its own)."""
    import contextlib
    import io
    import os

    folder = tmp_path_factory.mktemp("demo")
    out, cwd = io.StringIO(), os.getcwd()
    os.chdir(folder)  # the demo writes report.html in the current directory
    try:
        with contextlib.redirect_stdout(out):
            assert main(["demo"]) == EXIT_OK
    finally:
        os.chdir(cwd)
    return out.getvalue(), (folder / "report.html").read_text(encoding="utf-8")


def test_demo_text_is_wrapped_to_the_text_width_and_says_the_command(demo_run):
    """The demo's coverage gaps, their notes, the learned policy's certificate and its own
    lines are wrapped to the text width (the estimates' table aside: a table's columns are
    never cut), and a gap's advice names the command that makes the exploration plan."""
    from ope._format import TEXT_WIDTH

    out, _ = demo_run
    section = out[out.index("coverage gaps (") : out.index("policy learning:")]
    assert "gap: candidate long_tail" in section
    assert not [ln for ln in section.splitlines() if len(ln) > TEXT_WIDTH]
    certificate = out[out.index("certificate for policy") : out.index("\nseed: ")]
    assert "  baseline:" in certificate and "  sensitivity:" in certificate
    assert not [ln for ln in certificate.splitlines() if len(ln) > TEXT_WIDTH]
    table = out[out.index("\npolicy ") : out.index("\nNotes:")]
    others = out.replace(table, "")
    assert not [ln for ln in others.splitlines() if len(ln) > TEXT_WIDTH]
    assert "Diagnostics.plan()" not in out and "ope.diagnostics" not in out
    advice = "`ope diagnose --reward-range LO HI --target-width W --new-rows N`"
    assert " ".join(section.split()).count(f"(see the exploration plan of {advice})") == 2


def test_demo_text_and_report_show_the_same_plan_and_certificate(demo_run):
    """The demo prints a certificate and the exploration plan its gaps point to, and the
    report it writes has both (not listed under "Not in this report"), the certificate with a
    note that it was learned on other (simulated) logs than the sample the report evaluates."""
    import re

    out, page = demo_run
    assert "certificate for policy 'learned'" in out
    plan = out[out.index("exploration plan:") :]
    plan = " ".join(plan[: plan.index("\n\n")].split())
    assert "--target-width 0.05 --new-rows 100000" in plan
    assert "play long_tail's own choice on" in plan and "play uniform's own choice on" in plan
    assert "no exploration needed: popular, personalized, greedy" in plan
    absent = re.search(r'<p class="absent">Not in this report.*?</p>', page)
    assert absent is None or not re.search(r"#plan\b|#certificate\b", absent.group(0))
    plan_section = page[page.index('<section id="plan"') :]
    plan_section = plan_section[: plan_section.index("</section>")]
    assert "long_tail" in plan_section and 'class="absent"' not in plan_section
    cert_section = page[page.index('<section id="certificate"') :]
    cert_section = cert_section[: cert_section.index("</section>")]
    assert "learned" in cert_section and 'class="absent"' not in cert_section
    assert "not on the bundled sample this report evaluates" in cert_section


@pytest.fixture()
def small_logs(tmp_path):
    rng = np.random.default_rng(0)
    action = rng.integers(0, 3, 400)
    path = tmp_path / "small.parquet"
    pd.DataFrame(
        {
            "action": action,
            "propensity": np.full(400, 1 / 3),
            "reward": rng.binomial(1, 0.3, 400).astype(float),
            "target__good": np.where(action == 1, 0.8, 0.1),
        }
    ).to_parquet(path)
    return str(path)


def test_a_bound_asked_for_by_the_logging_values_interval_names_the_ci_given(small_logs, capsys):
    # --ci bottou applies to neither ips nor snips (they fall back to normal); the logging
    # value's interval, bernstein (bottou's counterpart for a mean), needs the range: the
    # message names bottou, which the user gave, and the flag that fixes it
    assert main(["evaluate", small_logs, "--ci", "bottou", "--json"]) == EXIT_USAGE
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["flag"] == "--reward-range"
    assert error["message"].startswith("argument --reward-range: --ci bottou needs")
    assert "Pass --reward-range LO HI (e.g. --reward-range 0 1 for clicks)" in error["message"]
    assert "interval method 'bernstein' needs" not in error["message"]
    assert "low high" not in error["message"] and "reward_range" not in error["message"]


@pytest.mark.parametrize("command", ["validate", "evaluate"])
def test_an_unknown_mapping_key_is_a_usage_error_naming_the_known_keys(small_logs, capsys, command):
    # bogus=reward renamed the reward column to `bogus`, and the error then said reward was
    # missing: the key names none of ope's columns
    argv = [command, small_logs, "--mapping", "bogus=reward", "--json"]
    assert main(argv) == EXIT_USAGE
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["flag"] == "--mapping"
    message = error["message"]
    assert "'bogus' (of bogus=reward) is not one of ope's column names" in message
    assert "action, propensity, reward" in message and "target__<name>" in message
    # ope's names and the per-candidate families map as before
    theirs = pd.read_parquet(small_logs).rename(columns={"reward": "click", "target__good": "g"})
    path = small_logs.replace("small", "theirs")
    theirs.to_parquet(path)
    argv = [command, path, "--mapping", "reward=click", "target__good=g", "--json"]
    assert main(argv) == EXIT_OK
    capsys.readouterr()


def test_dropped_rows_warning_speaks_the_command_line(small_logs, capsys):
    # the library's warning points at the result's .report (a Python attribute)
    bad = pd.read_parquet(small_logs)
    bad.loc[[3, 7], "propensity"] = 0.0
    bad.to_parquet(small_logs)
    assert main(["evaluate", small_logs, "--on-invalid", "drop"]) == EXIT_OK
    err = capsys.readouterr().err
    assert "dropped 2 of 400 rows" in err and ".report" not in err
    assert "`ope validate --on-invalid drop` lists the first row numbers" in err
    assert main(["evaluate", small_logs]) == EXIT_DATAERR
    out = capsys.readouterr().out
    assert "--on-invalid drop" in out and ".report" not in out
