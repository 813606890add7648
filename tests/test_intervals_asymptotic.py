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


def test_normal_quantile_agrees_with_scipy():
    """The quantile without scipy: within 1e-15 (relative, |z| >= 1) of scipy's ndtri from the
    deep lower tail to the upper end of float64, exact at 0.5 and at the ends, antisymmetric."""
    import numpy as np
    from scipy import special

    from ope.intervals._shared import normal_quantile

    rng = np.random.default_rng(7)
    levels = np.array([0.5, 0.68, 0.8, 0.9, 0.95, 0.975, 0.99, 0.999, 1 - 1e-9])
    ps = np.concatenate(
        [
            0.5 + levels / 2.0,
            rng.uniform(0.0, 1.0, 400),
            1.0 - 10.0 ** rng.uniform(-16, -1, 100),
            10.0 ** rng.uniform(-307, -1, 100),
            [5e-324, 2.0**-1074 * 3, np.nextafter(1.0, 0.0), np.nextafter(0.5, 1.0)],
        ]
    )
    ours = np.array([normal_quantile(float(p)) for p in ps])
    theirs = special.ndtri(ps)
    gap = np.abs(ours - theirs) / np.maximum(1.0, np.abs(theirs))
    assert gap.max() <= 1e-15, ps[np.argmax(gap)]
    assert (normal_quantile(0.0), normal_quantile(0.5), normal_quantile(1.0)) == (
        -math.inf,
        0.0,
        math.inf,
    )
    assert math.isnan(normal_quantile(math.nan))
    assert normal_quantile(1.0 - 0.975) == -normal_quantile(0.975)  # 1 - p is exact here
    # correctly rounded: the float 0.975 lies 2.2e-17 below 39/40, its quantile 3.8e-16 below
    # z = 1.95996398454005423552..., nearest to 1.9599639845400538 (scipy: 1.959963984540054)
    assert normal_quantile(0.975) == 1.9599639845400538
    assert normal_interval(0.0, 1.0).high == normal_quantile(0.975)


def test_intervals_import_no_scipy_until_a_method_needs_it():
    """``ope.intervals`` and the normal interval import none of scipy's statistics: the
    command line's start-up; the t interval imports scipy.stats when it is computed."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from ope.intervals import normal_interval, t_interval, bernstein_interval\n"
        "normal_interval(0.5, 0.1)\n"
        "before = sorted(m for m in ('scipy.stats', 'scipy.optimize', 'scipy.special') "
        "if m in sys.modules)\n"
        "t_interval(0.5, 0.1, 10)\n"
        "print(before, 'scipy.stats' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[] True"
