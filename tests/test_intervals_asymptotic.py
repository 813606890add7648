"""Normal and t intervals: hand values and argument errors."""

from __future__ import annotations

import math

import pytest

from ope.exceptions import ParameterError
from ope.intervals.asymptotic import normal_interval, t_interval


def test_normal_interval_by_hand():
    # z_{0.975} = 1.959963984540054
    ci = normal_interval(0.55, math.sqrt(0.14))
    half = 1.959963984540054 * math.sqrt(0.14)
    assert ci.low == pytest.approx(0.55 - half, rel=1e-12)
    assert ci.high == pytest.approx(0.55 + half, rel=1e-12)
    # 90%: z_{0.95} = 1.6448536269514722
    ci90 = normal_interval(1.0, 2.0, confidence_level=0.9)
    assert ci90.high - 1.0 == pytest.approx(2 * 1.6448536269514722, rel=1e-12)
    assert ci90.width == pytest.approx(4 * 1.6448536269514722)


def test_t_interval_by_hand():
    # two-sided 95% with 4 degrees of freedom: t_{4, 0.975} = 2.7764451051977987
    ci = t_interval(0.55, math.sqrt(0.14), 5)
    assert ci.high == pytest.approx(0.55 + 2.7764451051977987 * math.sqrt(0.14), rel=1e-12)
    assert ci.low == pytest.approx(0.55 - 2.7764451051977987 * math.sqrt(0.14), rel=1e-12)
    # t is wider than normal and converges to it
    assert t_interval(0.0, 1.0, 5).width > normal_interval(0.0, 1.0).width
    assert t_interval(0.0, 1.0, 10**7).width == pytest.approx(
        normal_interval(0.0, 1.0).width, rel=1e-6
    )


def test_zero_standard_error_gives_a_point():
    assert tuple(normal_interval(0.3, 0.0)) == (0.3, 0.3)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: normal_interval(0.0, 1.0, confidence_level=95),
            r"`confidence_level` must be in \(0, 1\); got 95",
        ),
        (
            lambda: normal_interval(0.0, 1.0, confidence_level=0.0),
            r"`confidence_level` must be in \(0, 1\)",
        ),
        (lambda: normal_interval(0.0, -1.0), r"`std_error` must be finite and >= 0; got -1.0"),
        (lambda: normal_interval(float("nan"), 1.0), r"`value` must be finite; got nan"),
        (lambda: t_interval(0.0, 1.0, 1), r"`n` must be a whole number >= 2; got 1"),
        (lambda: t_interval(0.0, 1.0, 2.5), r"`n` must be a whole number >= 2"),
    ],
)
def test_errors(call, match):
    with pytest.raises(ParameterError, match=match):
        call()
