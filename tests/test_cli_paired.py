"""``ope paired``: paired-replay effects from the command line, equal to ``paired_effect``."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ope._format import TEXT_WIDTH
from ope.cli import EXIT_DATAERR, EXIT_OK, EXIT_USAGE, main
from ope.io import read_paired
from ope.paired import paired_effect
from ope.simulate import PairedReplaySimulator


@pytest.fixture(scope="module")
def replays(tmp_path_factory):
    """Two arms of the simulator plus a third, ``other`` (the treated replays, outcome flipped)."""
    df = PairedReplaySimulator(n_replicates=2, seed=0).sample(120, rng=1).to_pandas()
    other = df[df["arm"] == "with_memory"].copy()
    other["arm"] = "other"
    other["outcome"] = 1.0 - other["outcome"]
    table = pa.Table.from_pandas(pd.concat([df, other], ignore_index=True), preserve_index=False)
    path = tmp_path_factory.mktemp("paired") / "replays.parquet"
    pq.write_table(table, path)
    return str(path), table


@pytest.fixture(scope="module")
def skewed(tmp_path_factory):
    """Thirty pairs of two arms, each replayed once: the treated outcome is skewed (too few
    pairs for a normal or t interval) and one treated cost is missing (its pair is dropped)."""
    rng = np.random.default_rng(0)
    n = 30
    outcome = np.column_stack([rng.exponential(size=n), rng.exponential(size=n) ** 3]).ravel()
    cost = rng.random(2 * n)
    cost[1] = np.nan  # pair 0, treated
    path = tmp_path_factory.mktemp("skewed") / "replays.parquet"
    pd.DataFrame(
        {
            "pair_id": np.repeat(np.arange(n), 2),
            "arm": ["control", "treated"] * n,
            "outcome": outcome,
            "cost": cost,
        }
    ).to_parquet(path)
    return str(path)


def _close(a, b):
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is None and (b is None or math.isnan(b))
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)
    return a == b


def _run_json(argv, capsys):
    code = main(argv)
    out = capsys.readouterr().out
    return code, json.loads(out)  # exactly one document, or json.loads fails


@pytest.mark.filterwarnings("ignore::ope.exceptions.SmallSampleWarning")
@pytest.mark.parametrize(
    ("extra", "kwargs"),
    [
        ([], {}),
        (
            ["--outcomes", "all", "--ratio", "--ci", "normal"],
            {"outcomes": "all", "ratio": True, "ci": "normal"},
        ),
        (
            [
                "--outcome",
                "outcome",
                "--outcome",
                "cost",
                "--correction",
                "bh",
                "--confidence-level",
                "0.9",
            ],
            {"outcomes": ["outcome", "cost"], "correction": "bh", "confidence_level": 0.9},
        ),
        (
            ["--by", "task_id", "--ci", "bernstein", "--reward-range", "0", "1"],
            {"by": "task_id", "ci": "bernstein", "reward_range": (0.0, 1.0)},
        ),
    ],
)
def test_paired_json_equals_the_python_api(replays, capsys, extra, kwargs):
    path, table = replays
    argv = [
        "paired",
        path,
        "--treated",
        "with_memory",
        "--treated",
        "other",
        "--control",
        "no_memory",
        *extra,
        "--json",
    ]
    code, doc = _run_json(argv, capsys)
    assert code == EXIT_OK
    expected = paired_effect(
        read_paired(table), treated=["with_memory", "other"], control="no_memory", **kwargs
    ).to_dict()
    assert doc["ok"] is True and doc["command"] == "paired" and "ope_version" in doc
    assert doc["options"]["treated"] == ["with_memory", "other"]
    assert doc["validation"]["rows_used"] == table.num_rows
    assert doc["treated"] == ["with_memory", "other"] and doc["n_pairs"] == 120
    assert len(doc["rows"]) == len(expected["rows"]) > 0
    for got, want in zip(doc["rows"], expected["rows"]):
        assert set(got) == set(want)
        bad = {k: (got[k], want[k]) for k in want if not _close(got[k], want[k])}
        assert not bad


def test_paired_text_prints_the_summary(replays, capsys):
    path, table = replays
    assert main(["paired", path, "--treated", "with_memory", "--control", "no_memory"]) == EXIT_OK
    out = capsys.readouterr().out
    want = paired_effect(read_paired(table), treated="with_memory", control="no_memory")
    assert "Paired effects (with_memory vs no_memory)" in out
    assert want.summary() in out


@pytest.mark.parametrize("ci", ["normal", "t"])
def test_paired_text_speaks_the_command_line(skewed, capsys, ci):
    """The notes of ``ope paired`` name the arms and outcomes as they were typed (not as
    Python values, quoted) and advise flags (``--ci t``, ``--reward-range``), not the API's
    keywords, wrapped to the text width; the warnings they state are not repeated on stderr,
    and the JSON document keeps the API's notes."""
    argv = ["paired", skewed, "--treated", "treated", "--control", "control", "--ratio"]
    argv += ["--outcome", "outcome", "cost", "--ci", ci]
    assert main(argv) == EXIT_OK
    captured = capsys.readouterr()
    notes = captured.out[captured.out.index("Notes:") : captured.out.index("\nseed: ")]
    flat = " ".join(notes.split())
    for python in ("'treated'", "'control'", "'outcome'", "'cost'", "ci=", "reward_range", "None"):
        assert python not in flat, python
    assert "1 row has no finite cost value; it is left out of the cost cell means." in flat
    assert "miss arm treated or control (or a finite cost value in one of them)" in flat
    assert "dropped from the treated vs control effect on cost." in flat
    assert (
        "too short and their p-values too small, the adjusted ones too: treated/outcome (n=30,"
        in flat
    )
    assert "--ci betting or --ci bernstein with the outcomes' --reward-range hold at any n." in flat
    assert ("--ci t corrects the normal quantile for few pairs" in flat) is (ci == "normal")
    assert "NaN for treated vs control on outcome; treated vs control on cost." in flat
    assert not [line for line in notes.splitlines() if len(line) > TEXT_WIDTH]
    assert "warning" not in captured.err  # the notes state them
    code, doc = _run_json([*argv, "--json"], capsys)
    assert code == EXIT_OK
    assert any("ci='betting' or ci='bernstein'" in note for note in doc["notes"])
    assert any("'treated' vs 'control'" in note for note in doc["notes"])


def test_paired_bounded_intervals_name_the_flag(skewed, capsys):
    """A finite-sample method's note names ``--reward-range``, the flag that bounded it."""
    argv = ["paired", skewed, "--treated", "treated", "--control", "control", "--outcome"]
    argv += ["cost", "--ci", "betting", "--reward-range", "0", "1"]
    assert main(argv) == EXIT_OK
    out = capsys.readouterr().out
    flat = " ".join(out[out.index("Notes:") :].split())
    assert "on pair differences bounded by --reward-range." in flat
    assert "reward_range" not in flat and "'cost'" not in flat


def test_integer_arms_are_matched_from_the_command_line(tmp_path, capsys):
    path = tmp_path / "int_arms.parquet"
    pd.DataFrame(
        {
            "pair_id": [0, 0, 1, 1, 2, 2],
            "arm": [1, 0] * 3,
            "outcome": [1.0, 0.0, 1.0, 1.0, 1.0, 0.0],
        }
    ).to_parquet(path)
    code, doc = _run_json(
        ["paired", str(path), "--treated", "1", "--control", "0", "--json"], capsys
    )
    assert code == EXIT_OK
    assert doc["rows"][0]["value"] == pytest.approx(2 / 3, abs=1e-15)


@pytest.mark.parametrize(
    ("extra", "flag", "phrase"),
    [
        (["--treated", "nope", "--control", "no_memory"], "--treated", "arm 'nope' is not in"),
        (["--treated", "other", "--control", "nope"], "--control", "arm 'nope' is not in"),
        (["--treated", "no_memory", "--control", "no_memory"], "--treated", "also listed"),
        (
            ["--treated", "other", "--treated", "other", "--control", "no_memory"],
            "--treated",
            "twice",
        ),
        (
            ["--treated", "other", "--control", "no_memory", "--ci", "bogus"],
            "--ci",
            "`--ci` must be one of",
        ),
        (
            ["--treated", "other", "--control", "no_memory", "--correction", "bonf"],
            "--correction",
            "`--correction` must be one of",
        ),
        (
            ["--treated", "other", "--control", "no_memory", "--confidence-level", "95"],
            "--confidence-level",
            "(0, 1)",
        ),
        (
            ["--treated", "other", "--control", "no_memory", "--reward-range", "1", "0"],
            "--reward-range",
            "low < high",
        ),
    ],
)
def test_bad_values_exit_2_naming_the_flag(replays, capsys, extra, flag, phrase):
    path, _ = replays
    assert main(["paired", path, *extra]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"argument {flag}:" in err and phrase in err and "unexpected" not in err
    code, doc = _run_json(["paired", path, *extra, "--json"], capsys)
    assert code == EXIT_USAGE and doc["ok"] is False and doc["exit_code"] == EXIT_USAGE
    assert doc["error"]["type"] == "usage" and flag in doc["error"]["message"]


@pytest.mark.parametrize("extra", [["--outcome", "reward"], ["--by", "segment"]])
def test_missing_column_exits_65_with_one_document(replays, capsys, extra):
    path, _ = replays
    argv = ["paired", path, "--treated", "other", "--control", "no_memory", *extra, "--json"]
    code, doc = _run_json(argv, capsys)
    assert code == EXIT_DATAERR and doc["error"]["type"] == "SchemaError"
    message = doc["error"]["message"]
    assert extra[1] in message
    # the advice names the flag of the missing column, spelled as one, and blames it
    assert f"Pass {extra[0]} " in message and "outcomes=" not in message and "by=" not in message
    assert doc["error"].get("flag") == extra[0]


def test_invalid_replays_print_the_report(tmp_path, capsys):
    path = tmp_path / "dup.parquet"
    pd.DataFrame(
        {
            "pair_id": [0, 0, 0, 1, 1],
            "arm": ["a", "a", "b", "a", "b"],
            "outcome": [1.0, 1.0, 0.0, 1.0, 0.0],
        }
    ).to_parquet(path)
    code, doc = _run_json(
        ["paired", str(path), "--treated", "a", "--control", "b", "--json"], capsys
    )
    assert code == EXIT_DATAERR and doc["valid"] is False
    assert doc["report"]["rejected"] == {"pair_duplicate": 1}


def test_finite_sample_ci_without_range_fails_clearly(replays, capsys):
    path, _ = replays
    argv = ["paired", path, "--treated", "other", "--control", "no_memory", "--ci", "hoeffding"]
    assert main(argv) == EXIT_USAGE
    assert "argument --reward-range:" in capsys.readouterr().err


def test_treated_and_control_are_required(replays, capsys):
    path, _ = replays
    assert main(["paired", path, "--control", "no_memory"]) == EXIT_USAGE
    assert "--treated" in capsys.readouterr().err


def test_an_unknown_mapping_key_names_the_paired_columns(replays, capsys):
    path, _ = replays
    argv = ["paired", path, "--treated", "with_memory", "--control", "no_memory"]
    assert main([*argv, "--mapping", "bogus=outcome", "--json"]) == EXIT_USAGE
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["flag"] == "--mapping" and "'bogus' (of bogus=outcome)" in error["message"]
    assert "pair_id, arm, outcome, replicate, cost, tokens, latency_ms." in error["message"]
    assert main([*argv, "--mapping", "outcome=outcome", "--json"]) == EXIT_OK
    capsys.readouterr()
