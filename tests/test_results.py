"""The result contract's rendering: numbers by their scale, tables sized to their content, each
note once, provenance on every result (ope.results and its formatting rules, ope._format)."""

from __future__ import annotations

import dataclasses
import doctest
import json
import math
import pathlib
import pickle
import sys
import types

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ope._format import (
    TEXT_WIDTH,
    Note,
    format_column,
    format_estimate,
    format_fixed,
    format_interval,
    format_list,
    format_number,
    note_key,
    number_notes,
    se_decimals,
    unique_notes,
)
from ope.exceptions import ParameterError
from ope.results import (
    Estimate,
    Provenance,
    Result,
    ResultParts,
    format_value,
    render_html,
    render_text,
)


# --------------------------------------------------------------------------------------------
# 1. numbers that fit their scale
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("x", "text"),
    [
        (0.0046031, "0.004603"),
        (0.0048214, "0.004821"),
        (0.00012, "0.0001200"),
        (0.12, "0.1200"),
        (-0.3742, "-0.3742"),
        (553.2, "553.2"),
        (9999.4, "9999"),
        (36321.5, "36,322"),
        (999_999_999.0, "999,999,999"),
        (1.234e-05, "1.234e-05"),
        (-2.5e12, "-2.500e+12"),
        (9.99996, "10.00"),  # rounding carries into a new digit: still 4 significant digits
        (0.0, "0"),
        (float("nan"), "nan"),
        (float("-inf"), "-inf"),
        (np.float32(0.25), "0.2500"),
        (np.int64(123456), "123,456"),
        (7, "7"),
        (10**12, "1,000,000,000,000"),  # counts in full, never scientific
        (True, "True"),
        (np.bool_(False), "False"),
    ],
)
def test_format_number(x, text):
    assert format_number(x) == text


def test_format_value_trims_what_format_number_keeps():
    assert format_value(0.95) == "0.95" and format_number(0.95) == "0.9500"
    assert format_value(None) == "" and format_value("text") == "text"
    assert format_value((0, 1.0)) == "(0, 1)" and format_value([0.5, None]) == "(0.5, )"


def test_a_standard_error_sets_the_precision_of_its_value_and_interval():
    # click rates 0.0046 vs 0.0048: readable, and an error of 0.00012 is not 0.0001
    assert format_column([0.0046031, 0.0048214, 0.00012], [0.00012] * 3) == [
        "0.00460",
        "0.00482",
        "0.00012",
    ]
    assert format_interval(0.0043659, 0.0048403, 0.000121) == "[0.00437, 0.00484]"
    assert format_estimate(0.0046031, 0.000121, 0.0043659, 0.0048403) == (
        "0.00460 [0.00437, 0.00484]"
    )
    # the column's smallest error decides: every row shows the digits that differ
    assert se_decimals([0.0103, 0.0054, 0.0015]) == 4
    assert se_decimals([35.0, 120.0]) == 0 and se_decimals([0.099]) == 3  # 0.099: 2 digits
    assert se_decimals([0.0995]) == 2  # rounds to 0.10: two digits need 2 decimals


def test_degenerate_and_missing_errors_do_not_set_the_precision():
    assert se_decimals([float("nan"), 0.0, -1.0, None, "x"]) is None
    # an on-policy difference with error 6e-17 next to real errors of 0.01
    assert se_decimals([6e-17, 0.012], scale=0.25) == 3
    assert format_column([0.25, 0.5], [float("nan"), 0.0]) == ["0.2500", "0.5000"]


def test_scientific_notation_only_at_extreme_magnitudes_or_precisions():
    assert format_fixed(1.5e-11, 12) == "1.5e-11"  # would need 12 decimals
    assert format_fixed(0.1234567, 8) == "0.12345670"
    assert format_fixed(-0.000001, 3) == "0.000"  # no negative zero
    assert format_fixed(2.5e9, 0) == "2.500000000e+09"
    assert format_column([1e-7, 3e-7], [1.2e-8, 1.1e-8]) == ["1.00e-07", "3.00e-07"]


def test_separators_are_shared_by_a_column():
    assert format_column([553.2, 6829.4, 36321.5]) == ["553.2", "6,829", "36,322"]
    assert format_column([553.2, 6829.4]) == ["553.2", "6829"]
    assert format_column([250.0, 4.0, 1.0]) == ["250", "4", "1"]  # whole numbers stay whole


# --------------------------------------------------------------------------------------------
# 2. columns sized to their content, text wrapped to 88 characters
# --------------------------------------------------------------------------------------------
def _spans(rule: str) -> list[tuple[int, int]]:
    """Column spans read off the rule line under a table's header."""
    spans, start = [], None
    for i, c in enumerate(rule + " "):
        if c == "-" and start is None:
            start = i
        elif c != "-" and start is not None:
            spans.append((start, i))
            start = None
    return spans


_names = st.text(st.characters(codec="ascii", categories=("L", "N", "P")), min_size=1, max_size=60)


@settings(max_examples=40, deadline=None)
@given(
    names=st.lists(_names, min_size=1, max_size=6),
    values=st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=6, max_size=6),
)
def test_no_cell_runs_into_the_next_column(names, values):
    n = len(names)
    table = pd.DataFrame(
        {
            "policy": names,
            "estimator": ["ips"] * n,
            "value": values[:n],
            "std_error": [abs(v) / 7 + 1e-3 for v in values[:n]],
        }
    )
    lines = render_text(ResultParts("t", table=table)).splitlines()
    header, rule, rows = lines[2], lines[3], lines[4:]
    spans = _spans(rule)
    assert [header[a:b].strip() for a, b in spans] == ["policy", "estimator", "value", "std_error"]
    for name, line in zip(names, rows):
        cells = [line[a:b].strip() for a, b in spans]
        assert cells[0] == name and cells[1] == "ips"
        # whatever lies between two columns is blank: nothing overlaps
        assert all(line[b:a2].strip() == "" for (_, b), (a2, _) in zip(spans, spans[1:]))
        float(cells[2].replace(",", ""))  # the value column holds one number


def test_a_policy_name_longer_than_18_characters_keeps_its_column():
    table = pd.DataFrame(
        {"policy": ["personalized_ranking_v2_holdout", "b"], "value": [0.12345, 0.2]}
    )
    text = render_text(ResultParts("t", table=table))
    assert text.splitlines()[2:] == [
        "policy                            value",
        "-------------------------------  ------",
        "personalized_ranking_v2_holdout  0.1235",
        "b                                0.2000",
    ]


def test_long_lists_and_notes_are_wrapped_to_88_characters():
    columns = [f"feature_{i:03d}" for i in range(120)]
    lines = format_list(columns, initial="  columns: ", subsequent="    ")
    assert len(lines) > 10 and max(map(len, lines)) <= TEXT_WIDTH
    assert " ".join(line.strip() for line in lines) == "columns: " + ", ".join(columns)
    parts = ResultParts(
        "t", fields=(("columns", ", ".join(columns)),), notes=("a long note " * 30,)
    )
    text = render_text(parts)
    assert max(map(len, text.splitlines())) <= TEXT_WIDTH
    assert text.count("feature_") == 120 and "  [1] a long note a long note" in text
    # a word longer than the width (a path) gets its own line, never broken
    path = "/data/" + "x" * 100 + ".parquet"
    assert path in render_text(ResultParts("t", fields=(("input", path),)))


# --------------------------------------------------------------------------------------------
# 3. each note once, numbered, referenced from the rows it concerns
# --------------------------------------------------------------------------------------------
def test_notes_are_the_same_up_to_case_spacing_and_a_final_period():
    assert unique_notes(["Low ESS.", "b"], ["low  ess", "c"]) == ("Low ESS.", "b", "c")
    assert note_key("x") != note_key("y")


def test_a_note_rule_and_subject_make_two_wordings_one_note():
    a = Note("ESS 553 is 0.55% of the 100,000 rows", rule="low_ess", subject="long_tail")
    b = Note(
        "effective sample size 553.2 is 0.55% of n=100000", rule="low_ess", subject="long_tail"
    )
    c = Note(
        "effective sample size 954.8 is 0.95% of n=100000",
        rule="low_ess",
        subject=("long_tail", "clipped"),
    )
    assert unique_notes([a], [b, c]) == (a, c)
    assert isinstance(a, str) and json.dumps([a]) == json.dumps([str(a)])
    back = pickle.loads(pickle.dumps(a))
    assert back == a and (back.rule, back.subject) == ("low_ess", "long_tail")


def test_rows_reference_their_notes_and_each_note_is_stated_once():
    table = pd.DataFrame({"policy": ["a", "b", "c"], "value": [0.1, 0.2, 0.3]})
    parts = ResultParts(
        "t",
        table=table,
        notes=("3 rows were dropped",),
        row_notes=[["heavy weights"], [], ["heavy weights.", "few rows"]],
    )
    text = render_text(parts)
    assert text.count("heavy weights") == 1
    assert text.splitlines()[2:] == [
        "policy   value  notes",
        "------  ------  -----",
        "a       0.1000  [2]",
        "b       0.2000",
        "c       0.3000  [2,3]",
        "",
        "Notes:",
        "  [1] 3 rows were dropped",
        "  [2] heavy weights",
        "  [3] few rows",
    ]
    assert number_notes(["x"], [["x"], ["y"]]) == (("x", "y"), ["[1]", "[2]"])


def test_row_notes_must_match_the_table():
    table = pd.DataFrame({"policy": ["a", "b"]})
    with pytest.raises(ParameterError, match=r"row_notes has 1 entries for a table of 2 rows"):
        render_text(ResultParts("t", table=table, row_notes=[["x"]]))
    with pytest.raises(
        ParameterError,
        match=r"precision names columns the table does not "
        r"have: se; its columns are policy",
    ):
        render_text(ResultParts("t", table=table, precision={"policy": "se"}))


def test_precision_follows_the_std_error_column_unless_told_otherwise():
    table = pd.DataFrame(
        {"value": [0.0046031, 0.0048214], "std_error": [0.00012, 0.00013], "ratio": [1.04748, 0.95]}
    )
    rows = render_text(ResultParts("t", table=table)).splitlines()[4:]
    assert rows == ["0.00460    0.00012   1.047", "0.00482    0.00013  0.9500"]
    rows = render_text(ResultParts("t", table=table, precision={})).splitlines()[4:]
    assert rows == ["0.004603  0.0001200   1.047", "0.004821  0.0001300  0.9500"]
    renamed = table.rename(columns={"std_error": "se"})
    rows = render_text(ResultParts("t", table=renamed, precision={"value": "se", "se": "se"}))
    assert rows.splitlines()[4:] == ["0.00460  0.00012   1.047", "0.00482  0.00013  0.9500"]


def test_html_shows_the_same_numbers_and_escapes_every_user_string():
    table = pd.DataFrame({"policy": ["<b>p</b>"], "value": [0.0046031], "std_error": [0.00012]})
    parts = ResultParts(
        "<i>title</i>",
        fields=(("<f>", "<v>"),),
        table=table,
        row_notes=[["<script>x</script>"]],
        provenance=Provenance(options={"by": "<seg>"}, ope_version="0.1.0"),
    )
    page = render_html(parts)
    assert "<script>" not in page and "<b>p</b>" not in page and "<i>" not in page
    assert "&lt;script&gt;x&lt;/script&gt;" in page and "&lt;b&gt;p&lt;/b&gt;" in page
    assert "<td style='text-align:right'>0.00460</td>" in page
    assert "<td style='text-align:right'>0.00012</td><td>[1]</td>" in page
    assert "<caption>Provenance</caption>" in page and "by=&lt;seg&gt;" in page


# --------------------------------------------------------------------------------------------
# 4. provenance: what produced a result, on every result
# --------------------------------------------------------------------------------------------
def test_provenance_to_dict_is_json_ready_with_stable_keys():
    p = Provenance(
        options={
            "reward_range": (0, 1),
            "n_resamples": np.int64(2000),
            "level": np.float64(0.9),
            "out": pathlib.Path("r.html"),
            "rng": np.random.default_rng(0),
            "by": ["segment"],
            "nested": {"a": (1, 2)},
        },
        seed=12,
        input=pathlib.Path("logs.parquet"),
        rows=100_000,
        command="ope evaluate x",
        ope_version="0.1.0",
    )
    d = p.to_dict()
    assert list(d) == ["ope_version", "seed", "options", "command", "input", "rows", "dependencies"]
    assert d["options"]["reward_range"] == [0, 1] and d["options"]["n_resamples"] == 2000
    assert d["options"]["out"] == "r.html" and d["options"]["rng"] == "<PCG64 Generator>"
    assert d["options"]["nested"] == {"a": [1, 2]} and d["input"] == "logs.parquet"
    json.dumps(d)
    assert Provenance.from_dict(json.loads(json.dumps(d))).seed == 12
    assert Provenance().ope_version == __import__("ope").__version__
    captured = Provenance.capture(seed=1)
    assert {"python", "numpy", "pandas"} <= set(captured.dependencies)
    assert captured.seed == 1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"seed": -1}, r"`seed` must be a whole number >= 0; got -1"),
        ({"seed": True}, r"`seed` must be a whole number >= 0; got True"),
        ({"seed": 1.5}, r"`seed` must be a whole number >= 0; got 1.5"),
        ({"rows": -3}, r"`rows` must be a whole number >= 0"),
        (
            {"options": ["ci"]},
            r"Provenance `options` must be a mapping of names to values; "
            r"got list",
        ),
        ({"command": ["ope", "evaluate"]}, r"Provenance `command` must be text"),
    ],
)
def test_provenance_checks_its_fields(kwargs, match):
    with pytest.raises(ParameterError, match=match):
        Provenance(**kwargs)


def test_provenance_text_says_what_is_known():
    p = Provenance(
        options={"ci": "bootstrap", "reward_range": (0, 1)},
        seed=None,
        command="ope evaluate logs.parquet --ci bootstrap",
        input="logs.parquet",
        rows=123_457,
        ope_version="0.1.0",
        dependencies={"numpy": "2.0.0"},
    )
    assert p.text_lines() == [
        "Provenance:",
        "  ope:      0.1.0",
        "  seed:     none",
        "  options:  ci=bootstrap, reward_range=(0, 1)",
        "  command:  ope evaluate logs.parquet --ci bootstrap",
        "  input:    logs.parquet (123,457 rows)",
        "  versions: numpy 2.0.0",
    ]
    assert Provenance(rows=10, ope_version="0").fields()[-1] == ("input", "10 rows")


@dataclasses.dataclass(frozen=True)
class _Toy(Result):
    value: float

    def to_dict(self):
        return {"value": self.value}

    def _parts(self):
        return ResultParts(f"Toy {self.value}")


@dataclasses.dataclass(frozen=True)
class _RichToy(_Toy):
    def summary(self, *, suffix: str = "") -> str:  # a subclass with its own layout
        return super().summary() + suffix


def test_any_result_carries_provenance_into_to_dict_summary_and_html():
    toy = _RichToy(0.5)
    assert toy.provenance is None and toy.to_dict() == {"value": 0.5}
    p = Provenance(options={"k": 1}, seed=3, ope_version="0.1.0")
    rec = toy.with_provenance(p)
    assert toy.provenance is None and rec.provenance is p and rec == toy  # a copy
    assert rec.to_dict() == {"value": 0.5, "provenance": p.to_dict()}
    text = rec.summary(suffix="\nmore")
    # once, at the end, even though summary() calls the base summary()
    assert text == "Toy 0.5\nmore\n\nProvenance:\n  ope:     0.1.0\n  seed:    3\n  options: k=1"
    assert "<caption>Provenance</caption>" in rec._repr_html_()
    assert rec.with_provenance(p, seed=4).provenance.seed == 4
    assert toy.with_provenance(seed=5, ope_version="x").provenance.options == {}
    with pytest.raises(ParameterError, match=r"`provenance` must be an ope.results.Provenance"):
        toy.with_provenance({"seed": 1})
    assert pickle.loads(pickle.dumps(rec)).provenance == p


def test_a_subclass_keeps_its_doctests_under_the_provenance_wrapper(monkeypatch):
    module = types.ModuleType("toy_results")
    monkeypatch.setitem(sys.modules, "toy_results", module)  # as an imported module is
    exec(
        "from ope.results import Result\n"
        "class Toy(Result):\n"
        "    def to_dict(self):\n"
        "        '''An empty dict.\n"
        "\n"
        "        >>> Toy().to_dict()\n"
        "        {}\n"
        "        '''\n"
        "        return {}\n",
        module.__dict__,
    )
    wrapped = module.Toy.to_dict
    assert wrapped.__module__ == "toy_results" and wrapped.__wrapped__.__doc__ == wrapped.__doc__
    tests = [t for t in doctest.DocTestFinder().find(module) if t.examples]
    assert [t.name for t in tests] == ["toy_results.Toy.to_dict"]
    runner = doctest.DocTestRunner()
    runner.run(tests[0])
    assert runner.summarize(verbose=False) == (0, 1)


def test_estimate_summary_renders_value_error_and_interval_at_one_precision():
    est = Estimate("snips", 0.0046031, 0.000121, 0.0043659, 0.0048403, n=120_000, ess=8.05e4)
    fields = est.summary().splitlines()[3:6]
    assert fields == [
        "  value:           0.00460",
        "  std_error:       0.00012",
        "  95% CI (normal): [0.00437, 0.00484]",
    ]
    nan = Estimate("dm", 0.25, 0.01, math.nan, math.nan, n=10, ess=10.0)
    assert "  95% CI (normal): [nan, nan]" in nan.summary()
