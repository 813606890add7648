"""The shared argument checkers of ope._validation: what they accept, what they refuse, and
that every refusal names the parameter, shows the value and its type, and gives a right value."""

from __future__ import annotations

import decimal
import fractions
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ope._validation import (
    FLOAT64_MAX,
    check_choice,
    check_confidence_level,
    check_max_weight,
    check_positive_int,
    check_positive_real,
    check_real,
    check_reward_range,
    check_value_bounds,
    check_weight_bound,
    describe,
    parameter_error,
    power_of_two_scale,
)
from ope.exceptions import MissingBoundsError, ParameterError


# ---------------------------------------------------------------------------------------------
# numbers
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value, expected",
    [
        (3, 3.0),
        (2.5, 2.5),
        (np.float32(0.5), 0.5),
        (np.float16(0.25), 0.25),
        (np.int8(-4), -4.0),
        (np.uint64(7), 7.0),
        (fractions.Fraction(3, 4), 0.75),
    ],
    ids=["int", "float", "float32", "float16", "int8", "uint64", "Fraction"],
)
def test_check_real_accepts_real_numbers_of_every_kind(value: object, expected: float) -> None:
    got = check_real(value, "x")
    assert type(got) is float and got == expected


@pytest.mark.parametrize(
    "value, pattern",
    [
        (
            "10",
            r"`x` must be a number; got '10' \(str\)\. Pass e\.g\. x=1\.0 \(a number, not "
            r"the string '10'\)\.",
        ),
        ("ten", r"`x` must be a number; got 'ten' \(str\)\. Pass e\.g\. x=1\.0\.$"),
        (True, r"got True \(bool\)\. Pass e\.g\. x=1\.0 \(True and False are not numbers here\)"),
        (np.bool_(False), r"got np\.False_ \(bool\)|got False \(bool_?\)"),
        (None, r"got None \(NoneType\)"),
        ([1.0], r"got \[1\.0\] \(list\)"),
        (1 + 2j, r"got \(1\+2j\) \(complex\)"),
        (np.array([1.0, 2.0]), r"got array\(\[1\., 2\.\]\) \(ndarray\)"),
        (
            np.array(1.5),
            r"got array\(1\.5\) \(ndarray\)\. Pass e\.g\. x=1\.0 \(a scalar, not an "
            r"array: pass x\.item\(\)\)",
        ),
        (
            decimal.Decimal("2.5"),
            r"got Decimal\('2\.5'\) \(Decimal\)\. Pass e\.g\. x=1\.0 "
            r"\(convert it: float\(Decimal\('2\.5'\)\)\)",
        ),
    ],
    ids=[
        "numeric-str",
        "word",
        "bool",
        "np-bool",
        "None",
        "list",
        "complex",
        "1d-array",
        "0d-array",
        "Decimal",
    ],
)
def test_check_real_refuses_non_numbers_naming_value_type_and_example(
    value: object, pattern: str
) -> None:
    with pytest.raises(ParameterError, match=pattern):
        check_real(value, "x")


def test_check_real_finite_and_example() -> None:
    assert check_real(math.inf, "x") == math.inf  # not finite=True: inf is a number
    with pytest.raises(
        ParameterError,
        match=r"`x` must be a finite number; got inf \(float\)\. "
        r"Pass e\.g\. x=2\.0\.",
    ):
        check_real(math.inf, "x", finite=True, example="x=2.0")
    with pytest.raises(ParameterError, match=r"got nan \(float\)"):
        check_real(float("nan"), "x", finite=True)
    # an int too large for float64 counts as infinite, not as an OverflowError
    with pytest.raises(ParameterError, match=r"a finite number"):
        check_real(10**400, "x", finite=True)


@pytest.mark.parametrize(
    "bad",
    [0, 0.0, -1.0, math.inf, -math.inf, float("nan"), 10**400],
    ids=["0", "0.0", "-1.0", "inf", "-inf", "nan", "10**400"],
)
def test_check_positive_real_refuses_what_is_not_a_positive_finite_number(bad: object) -> None:
    with pytest.raises(
        ParameterError,
        match=r"`tau` must be a positive finite number \(the "
        r"threshold\); got .* \(\w+\)\. Pass e\.g\. tau=3\.0\.",
    ):
        check_positive_real(bad, "tau", example="tau=3.0", what="the threshold")


def test_describe_cuts_long_values() -> None:
    text = describe(list(range(1000)))
    assert text.endswith("... (list)") and len(text) < 100


def test_parameter_error_is_one_sentence_pattern() -> None:
    err = parameter_error("n_folds", "a whole number >= 2", 1, "n_folds=5")
    assert isinstance(err, ParameterError)
    assert str(err) == "`n_folds` must be a whole number >= 2; got 1 (int). Pass e.g. n_folds=5."


# ---------------------------------------------------------------------------------------------
# counts and choices
# ---------------------------------------------------------------------------------------------
def test_check_positive_int() -> None:
    assert check_positive_int(np.int64(3), "k") == 3
    assert check_positive_int(0, "k", minimum=0) == 0
    with pytest.raises(
        ParameterError,
        match=r"`k` must be a positive integer; got 5\.0 \(float\)"
        r"\. Pass e\.g\. k=10 \(an int, not the float 5\.0\)",
    ):
        check_positive_int(5.0, "k")
    with pytest.raises(
        ParameterError,
        match=r"`n` must be a whole number >= 2; got 1 \(int\)\. "
        r"Pass e\.g\. n=10\.",
    ):
        check_positive_int(1, "n", minimum=2)
    with pytest.raises(ParameterError, match=r"got True \(bool\)"):
        check_positive_int(True, "k")
    with pytest.raises(ParameterError, match=r"got '3' \(str\).*not the string '3'"):
        check_positive_int("3", "k")


def test_check_choice_suggests_the_nearest_choice() -> None:
    assert check_choice("drop", "on_invalid", ("raise", "drop")) == "drop"
    with pytest.raises(
        ParameterError,
        match=r"`outer` must be one of 'bernstein', 'normal'; got "
        r"'bernstien' \(str\)\. Pass e\.g\. "
        r"outer='bernstein' \(did you mean 'bernstein'\?\)",
    ):
        check_choice("bernstien", "outer", ("bernstein", "normal"))
    with pytest.raises(ParameterError, match=r"got 3 \(int\)\. Pass e\.g\. outer='bernstein'\.$"):
        check_choice(3, "outer", ("bernstein", "normal"))


# ---------------------------------------------------------------------------------------------
# glossary settings
# ---------------------------------------------------------------------------------------------
def test_check_confidence_level() -> None:
    assert check_confidence_level(np.float32(0.5)) == 0.5
    with pytest.raises(
        ParameterError,
        match=r"`confidence_level` must be in \(0, 1\); got 95 "
        r"\(int\)\. Pass e\.g\. confidence_level=0\.95 for a "
        r"95% interval \(not 95, and not alpha=0\.05\)",
    ):
        check_confidence_level(95)
    with pytest.raises(ParameterError, match=r"must be a number in \(0, 1\); got '0\.9' \(str\)"):
        check_confidence_level("0.9")
    with pytest.raises(ParameterError, match=r"got nan \(float\)"):
        check_confidence_level(float("nan"))


def test_check_max_weight_and_weight_bound() -> None:
    assert check_max_weight(None) is None and check_max_weight(np.int32(10)) == 10.0
    with pytest.raises(
        ParameterError,
        match=r"`max_weight` must be a positive finite number "
        r"\(the clip level\); got -1 \(int\)\. Pass e\.g\. "
        r"max_weight=10\.0\.",
    ):
        check_max_weight(-1)
    assert check_weight_bound(None) is None
    with pytest.raises(MissingBoundsError, match=r"interval method 'hoeffding' needs an a priori"):
        check_weight_bound(None, method="hoeffding")
    with pytest.raises(
        ParameterError,
        match=r"`weight_bound` must be a number; got '5' \(str\)\. "
        r"Pass e\.g\. weight_bound=100\.0",
    ):
        check_weight_bound("5")


@pytest.mark.parametrize(
    "value, expected",
    [
        ((0, 1), (0.0, 1.0)),
        ([np.float32(-1), np.int64(2)], (-1.0, 2.0)),
        (np.array([0.0, 5.0]), (0.0, 5.0)),
        (range(0, 2), (0.0, 1.0)),
        ((-1e307, 1e307), (-1e307, 1e307)),
    ],
    ids=["tuple", "numpy-scalars", "array", "range", "wide-but-representable"],
)
def test_check_reward_range_accepts_ordered_pairs(value: object, expected: tuple) -> None:
    assert check_reward_range(value) == expected


@pytest.mark.parametrize(
    "value, pattern",
    [
        (
            "01",
            r"must be a pair \(low, high\) of numbers; got '01' \(str\)\. Pass e\.g\. "
            r"reward_range=\(0\.0, 1\.0\) \(a tuple of two numbers, not the string '01'\)",
        ),
        (b"01", r"not the string b'01'"),
        ({0: 1, 1: 2}, r"got \{0: 1, 1: 2\} \(dict\).*a dict has no order"),
        ({0.0, 1.0}, r"\(set\).*a set has no order"),
        (1.0, r"got 1\.0 \(float\)"),
        (np.array([[0.0, 1.0]]), r"\(ndarray\)"),
        ((0,), r"got 1 values: \(0,\) \(tuple\)"),
        ((0, 1, 2), r"got 3 values"),
        ((True, False), r"its low end, True \(bool\), is not a number"),
        ((0, "1"), r"its high end, '1' \(str\), is not a number"),
        (
            (1, 0),
            r"must be finite with low < high; got \(1\.0, 0\.0\)\. Pass e\.g\. "
            r"reward_range=\(0\.0, 1\.0\)",
        ),
        ((0, math.inf), r"must be finite with low < high"),
        ((-1e308, 1e308), r"is wider than float64 can represent"),
    ],
    ids=[
        "str",
        "bytes",
        "dict",
        "set",
        "scalar",
        "2d-array",
        "one",
        "three",
        "bools",
        "str-end",
        "reversed",
        "inf",
        "span-overflows",
    ],
)
def test_check_reward_range_refusals(value: object, pattern: str) -> None:
    with pytest.raises(ParameterError, match=pattern):
        check_reward_range(value)


def test_check_value_bounds() -> None:
    assert check_value_bounds(np.int64(0), 1.5) == (0.0, 1.5)
    with pytest.raises(MissingBoundsError, match=r"`low` and `high` are required"):
        check_value_bounds(None, None)
    with pytest.raises(ParameterError, match=r"`high` must be a number; got '1' \(str\)"):
        check_value_bounds(0, "1")
    with pytest.raises(
        ParameterError,
        match=r"`low` must be smaller than `high`, both finite "
        r"\(low < high\); got low=1\.0, high=1\.0",
    ):
        check_value_bounds(1, 1)


# ---------------------------------------------------------------------------------------------
# scaling
# ---------------------------------------------------------------------------------------------
def test_power_of_two_scale_edges() -> None:
    assert power_of_two_scale() == 1.0 and power_of_two_scale(0.0, -0.0) == 1.0
    assert power_of_two_scale(FLOAT64_MAX) == 2.0**1023  # finite even at the float64 limit
    assert power_of_two_scale(5e-324) == 5e-324  # the smallest subnormal is a power of two


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=4))
def test_power_of_two_scale_is_exact(values: list[float]) -> None:
    s = power_of_two_scale(*values)
    top = max(abs(v) for v in values)
    assert math.frexp(s)[0] == 0.5  # a power of two
    if top > 0:
        assert 1.0 <= top / s < 2.0
        tiny = np.finfo(np.float64).tiny  # below it, v / s would lose bits as a subnormal
        assert all((v / s) * s == v for v in values if v == 0.0 or abs(v / s) >= tiny)
