"""A catalogue of large (and tiny) finite numbers: every estimate is finite and correct, or a
specific ValidationError/ParameterError names the column and the row.

Rewards near 1.8e308, rewards of +-1e160 (whose squares overflow), a propensity of 1e-149 under
a reward of 1e6 (a weighted reward of 1e155, whose square overflows), subnormal rewards. Every
finite case is compared with an exact reference: the same statistic computed in rational
arithmetic (``fractions.Fraction``) on the float inputs, rounded once at the end.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest

import ope
from ope import _kernel
from ope.estimators import IPS, SNIPS, ClippedIPS, estimate_many, logging_value
from ope.exceptions import ParameterError, ValidationError
from ope.streaming import MomentStats

#: Agreement with the exact reference: a few roundings of float64 arithmetic.
RTOL = 1e-12


# --------------------------------------------------------------------------------------------
# exact references
# --------------------------------------------------------------------------------------------
def _f(x: float) -> Fraction:
    return Fraction(float(x))


def _to_float(x: Fraction) -> float:
    return float(x.numerator / x.denominator) if x else 0.0


def _sqrt(x: Fraction) -> float:
    """sqrt of a non-negative rational, as float64 even when x itself is not representable."""
    if x == 0:
        return 0.0
    k = (x.numerator.bit_length() - x.denominator.bit_length()) // 2
    return math.ldexp(math.sqrt(_to_float(x / Fraction(4) ** k)), k)


def mean_se(terms: list[Fraction]) -> tuple[float, float]:
    """Exact mean of the terms and the standard error sd / sqrt(n)."""
    n = len(terms)
    mean = sum(terms, Fraction(0)) / n
    var = sum(((x - mean) ** 2 for x in terms), Fraction(0)) / (n - 1)
    return _to_float(mean), _sqrt(var / n)


def ref_ips(r, p, t, clip=None, origin=0.0):
    w = [_f(a) / _f(b) for a, b in zip(t, p)]
    if clip is not None:
        w = [min(x, _f(clip)) for x in w]
    o = _f(origin)
    terms = [x * (_f(y) - o) for x, y in zip(w, r)]
    m, se = mean_se(terms)
    return _to_float(o + _f(m)), se


def ref_snips(r, p, t):
    w = [_f(a) / _f(b) for a, b in zip(t, p)]
    v = sum((x * _f(y) for x, y in zip(w, r)), Fraction(0)) / sum(w, Fraction(0))
    mw = sum(w, Fraction(0)) / len(w)
    psi = [x * (_f(y) - v) / mw for x, y in zip(w, r)]
    return _to_float(v), mean_se(psi)[1]


def ref_paired(r, p, t):
    """IPS minus the logging value, paired row by row: (difference, standard error)."""
    w = [_f(a) / _f(b) for a, b in zip(t, p)]
    return mean_se([x * _f(y) - _f(y) for x, y in zip(w, r)])


def _quiet(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


# --------------------------------------------------------------------------------------------
# the inputs
# --------------------------------------------------------------------------------------------
N = 12
HALF = np.full(N, 0.5)
ALT = np.array([0.5, 1.0] * (N // 2))
BIG160 = np.array([1e160, -1e160, 3e159] * (N // 3))
BIG308 = np.full(N, 1.7e308)
PM308 = np.array([1.7e308, -1.7e308] * (N // 2))
TINY_P = HALF.copy()
TINY_P[3] = 1e-149
TARGET_TINY_P = HALF.copy()
TARGET_TINY_P[3] = 1.0
REWARD_1E6 = np.linspace(1e6, 2e6, N)
SUBNORMAL = np.array([5e-324, 1e-310, 0.0, 2e-320] * (N // 4))
TINY = np.linspace(1e-300, 3e-300, N)


@dataclass(frozen=True)
class Finite:
    """A case whose value and standard error must equal the exact reference."""

    name: str
    run: Callable[[], tuple[float, float]]
    reference: Callable[[], tuple[float, float]]
    #: absolute tolerance of the standard error, for a deviation below the float64 resolution
    #: of the terms it is computed from (0: the relative tolerance alone)
    se_abs: float = 0.0


def _ips(r, p, t, **kw):
    e = _quiet(IPS().estimate, r, p, t, **kw)
    return e.value, e.std_error


def _snips(r, p, t):
    e = _quiet(SNIPS().estimate, r, p, t)
    return e.value, e.std_error


def _clipped(r, p, t, m, **kw):
    e = _quiet(ClippedIPS(max_weight=m).estimate, r, p, t, **kw)
    return e.value, e.std_error


def _logging(r):
    e = _quiet(logging_value, r)
    return e.value, e.std_error


def _streamed(r, p, t, cut):
    parts = [
        MomentStats.from_arrays(r[:cut], p[:cut], t[:cut]),
        MomentStats.from_arrays(r[cut:], p[cut:], t[cut:]),
    ]
    (e,) = _quiet(MomentStats.merge_all(parts).estimates, "ips")
    return e.value, e.std_error


def _many(r, p, t, j):
    e = _quiet(
        estimate_many,
        "ips",
        reward=r,
        logging_propensity=p,
        target_propensity=np.column_stack([t, HALF]),
    )[j]
    return e.value, e.std_error


def _evaluate(r, p, t, estimator):
    df = pd.DataFrame(
        {"action": np.zeros(N, dtype=int), "propensity": p, "reward": r, "target__a": t}
    )
    ev = _quiet(ope.evaluate, df, estimators=("ips", "snips"))
    row = ev.table().set_index("estimator").loc[estimator]
    assert math.isfinite(row.ci_low) and math.isfinite(row.ci_high)
    return row.value, row.std_error


def _comparison(r, p, t):
    df = pd.DataFrame(
        {"action": np.zeros(N, dtype=int), "propensity": p, "reward": r, "target__a": t}
    )
    ev = _quiet(ope.evaluate, df, estimators=("ips",))
    row = ev.comparisons().iloc[0]
    assert math.isfinite(row.ci_low) and math.isfinite(row.ci_high)
    return row.difference, row.std_error


FINITE = [
    Finite(
        "ips rewards +-1e160", lambda: _ips(BIG160, HALF, ALT), lambda: ref_ips(BIG160, HALF, ALT)
    ),
    Finite(
        "snips rewards +-1e160",
        lambda: _snips(BIG160, HALF, ALT),
        lambda: ref_snips(BIG160, HALF, ALT),
    ),
    Finite(
        "clipped ips rewards +-1e160",
        lambda: _clipped(BIG160, HALF, ALT, 1.5),
        lambda: ref_ips(BIG160, HALF, ALT, clip=1.5),
    ),
    Finite(
        "clipped ips about r_lo = -1e160",
        lambda: _clipped(BIG160, HALF, ALT, 1.5, reward_range=(-1e160, 1e160)),
        lambda: ref_ips(BIG160, HALF, ALT, clip=1.5, origin=-1e160),
    ),
    Finite(
        "ips rewards 1.7e308 on-policy",
        lambda: _ips(BIG308, HALF, HALF),
        lambda: ref_ips(BIG308, HALF, HALF),
    ),
    Finite(
        "logging value rewards +-1.7e308",
        lambda: _logging(PM308),
        lambda: mean_se([_f(x) for x in PM308]),
    ),
    Finite(
        "snips rewards +-1.7e308",
        lambda: _snips(PM308, HALF, ALT),
        lambda: ref_snips(PM308, HALF, ALT),
    ),
    Finite(
        "ips propensity 1e-149 x reward 1e6",
        lambda: _ips(REWARD_1E6, TINY_P, TARGET_TINY_P),
        lambda: ref_ips(REWARD_1E6, TINY_P, TARGET_TINY_P),
    ),
    # one weight of 1e149 carries the ratio: its influence terms cancel to 3e-143, far below the
    # rounding of rewards of 1e6 (1e-10), so the standard error is 0 to that resolution
    Finite(
        "snips propensity 1e-149 x reward 1e6",
        lambda: _snips(REWARD_1E6, TINY_P, TARGET_TINY_P),
        lambda: ref_snips(REWARD_1E6, TINY_P, TARGET_TINY_P),
        se_abs=1e6 * RTOL,
    ),
    Finite(
        "snips weights 1e10 x rewards 1.7e308 (the ratio is representable)",
        lambda: _snips(BIG308, np.full(N, 1e-10), np.ones(N)),
        lambda: ref_snips(BIG308, np.full(N, 1e-10), np.ones(N)),
    ),
    Finite(
        "clipped ips propensity 1e-149 (clip binds)",
        lambda: _clipped(REWARD_1E6, TINY_P, TARGET_TINY_P, 10.0),
        lambda: ref_ips(REWARD_1E6, TINY_P, TARGET_TINY_P, clip=10.0),
    ),
    Finite(
        "ips subnormal rewards",
        lambda: _ips(SUBNORMAL, HALF, ALT),
        lambda: ref_ips(SUBNORMAL, HALF, ALT),
    ),
    Finite(
        "ips rewards 1e-300 (squares underflow)",
        lambda: _ips(TINY, HALF, ALT),
        lambda: ref_ips(TINY, HALF, ALT),
    ),
    Finite(
        "merged batches: rewards 1e308 and 1",
        lambda: _streamed(np.r_[np.full(6, 1e308), np.ones(6)], HALF, ALT, 6),
        lambda: ref_ips(np.r_[np.full(6, 1e308), np.ones(6)], HALF, ALT),
    ),
    Finite(
        "merged batches: propensity 1e-149 in the second",
        lambda: _streamed(REWARD_1E6, TINY_P, TARGET_TINY_P, 2),
        lambda: ref_ips(REWARD_1E6, TINY_P, TARGET_TINY_P),
    ),
    Finite(
        "estimate_many rewards +-1e160",
        lambda: _many(BIG160, HALF, ALT, 0),
        lambda: ref_ips(BIG160, HALF, ALT),
    ),
    Finite(
        "evaluate ips rewards +-1e160",
        lambda: _evaluate(BIG160, HALF, ALT, "ips"),
        lambda: ref_ips(BIG160, HALF, ALT),
    ),
    Finite(
        "evaluate snips propensity 1e-149",
        lambda: _evaluate(REWARD_1E6, TINY_P, TARGET_TINY_P, "snips"),
        lambda: ref_snips(REWARD_1E6, TINY_P, TARGET_TINY_P),
        se_abs=1e6 * RTOL,
    ),
    Finite(
        "paired comparison rewards +-1e160",
        lambda: _comparison(BIG160, HALF, ALT),
        lambda: ref_paired(BIG160, HALF, ALT),
    ),
    Finite(
        "paired comparison propensity 1e-149",
        lambda: _comparison(REWARD_1E6, TINY_P, TARGET_TINY_P),
        lambda: ref_paired(REWARD_1E6, TINY_P, TARGET_TINY_P),
    ),
]


@pytest.fixture(params=["numba", "numpy"])
def backend(request):
    if request.param == "numba" and not _kernel.numba_available():
        pytest.skip("numba is not installed")
    _kernel.set_backend(request.param)
    yield request.param
    _kernel.set_backend(None)


@pytest.mark.parametrize("case", FINITE, ids=lambda c: c.name)
def test_finite_cases_equal_the_exact_reference(case, backend):
    value, se = case.run()
    ref_value, ref_se = case.reference()
    assert math.isfinite(value) and math.isfinite(se)
    assert value == pytest.approx(ref_value, rel=RTOL, abs=0.0)
    assert se == pytest.approx(ref_se, rel=RTOL, abs=case.se_abs)


# --------------------------------------------------------------------------------------------
# specific errors
# --------------------------------------------------------------------------------------------
def _nan_at(arr: np.ndarray, i: int, value: float = math.nan) -> np.ndarray:
    out = arr.copy()
    out[i] = value
    return out


ERRORS = [
    (
        "weighted rewards above 1.8e308",
        lambda: IPS().estimate(BIG308, np.full(N, 1e-10), np.ones(N)),
        ValidationError,
        r"ips: the estimate is not representable in float64 .* largest \|weight x reward\| is at "
        r"row 0 \(weight 1e\+10, reward 1\.7e\+308\)\. Rescale the `reward` column",
    ),
    (
        "weighted rewards above 1.8e308 in estimate_many",
        lambda: estimate_many(
            "ips",
            reward=BIG308,
            logging_propensity=np.full(N, 1e-10),
            target_propensity=np.ones((N, 1)),
            names=["big"],
        ),
        ValidationError,
        r"ips \(policy 'big'\): the estimate is not representable",
    ),
    (
        "a weight above 1e150 (propensity 1e-200)",
        lambda: IPS().estimate(np.ones(N), _nan_at(HALF, 5, 1e-200), np.ones(N)),
        ValidationError,
        r"importance weights overflow float64: 1 rows \(first at row 5: logging propensity "
        r"1e-200\)",
    ),
    (  # the diagnostics named the reward for it
        "diagnostics of a weight above 1e150 (propensity 1e-200)",
        lambda: ope.diagnostics.diagnose_arrays(np.ones(N), _nan_at(HALF, 5, 1e-200), np.ones(N)),
        ValidationError,
        r"importance weights overflow float64: 1 rows \(first at row 5: logging propensity "
        r"1e-200\)",
    ),
    (  # the same through the logs' validated target__ columns
        "diagnostics of logs with a weight above 1e150",
        lambda: ope.diagnose(
            ope.read_logs(
                pd.DataFrame(
                    {
                        "action": np.zeros(N, dtype=int),
                        "propensity": _nan_at(HALF, 6, 1e-200),
                        "reward": np.ones(N),
                        "target__c": np.ones(N),
                    }
                )
            )
        ),
        ValidationError,  # the read rule (MIN_PROPENSITY) names it when the logs are read
        r"propensity_out_of_range: 1 \(rows 6\)",
    ),
    (
        "a NaN reward",
        lambda: SNIPS().estimate(_nan_at(BIG160, 4), HALF, ALT),
        ValidationError,
        r"`reward` must be finite; 1 rows are NaN or infinite \(first at row 4\)",
    ),
    (
        "an infinite reward",
        lambda: IPS().estimate(_nan_at(BIG308, 7, math.inf), HALF, ALT),
        ValidationError,
        r"`reward` must be finite; 1 rows are NaN or infinite \(first at row 7\)",
    ),
    (
        "a NaN target propensity",
        lambda: IPS().estimate(BIG160, HALF, _nan_at(ALT, 2)),
        ValidationError,
        r"`target_propensity` must be finite; 1 rows are NaN or infinite "
        r"\(first at row 2\)",
    ),
    (
        "a negative zero and a negative target propensity",
        lambda: IPS().estimate(BIG160, HALF, _nan_at(_nan_at(ALT, 1, -0.0), 9, -1e-300)),
        ValidationError,
        r"`target_propensity` must be in \[0, 1\] .* 1 rows are not \(first at "
        r"row 9\)",
    ),
    (
        "a subnormal logging propensity (weight 1/5e-324 overflows)",
        lambda: IPS().estimate(np.ones(N), _nan_at(HALF, 6, 5e-324), np.ones(N)),
        ValidationError,
        r"importance weights overflow float64: 1 rows \(first at row 6",
    ),
    (
        "rewards outside reward_range",
        lambda: IPS().estimate(BIG160, HALF, ALT, reward_range=(-1e159, 1e160)),
        ValidationError,
        r"`reward` has 4 rows outside reward_range=\(-1e\+159, 1e\+160\) \(first at row 1: "
        r"-1e\+160\)",
    ),
    (
        "an infinite reward_range",
        lambda: IPS().estimate(BIG160, HALF, ALT, reward_range=(-math.inf, 1e160)),
        ParameterError,
        r"`reward_range` must be finite",
    ),
    (
        "streamed statistics with a NaN reward",
        lambda: MomentStats.from_arrays(_nan_at(BIG308, 3), HALF, ALT),
        ValidationError,
        r"`reward` must be finite; 1 rows are NaN or infinite \(first at row 3\)",
    ),
]


@pytest.mark.parametrize(("name", "call", "error", "match"), ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_name_the_column_and_row(name, call, error, match, backend):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(error, match=match):
            call()


def test_the_catalogue_has_at_least_fifteen_cases():
    assert len(FINITE) + len(ERRORS) >= 15


def test_ordinary_numbers_are_not_rescaled():
    # rewards and weights within 2**+-200 are used as they are: the kernel's units are 1
    rng = np.random.default_rng(0)
    r, p = rng.normal(5.0, 1.0, 500), rng.uniform(0.05, 1.0, 500)
    m, _ = _kernel.accumulate(r, p, rng.uniform(size=(500, 3)), max_weight=2.0)
    assert not m.r_exp.any() and not m.w_exp.any()


def test_a_reward_range_far_from_the_rewards_is_blamed_for_the_overflow():
    """Rewards in [0, 1] with a reward_range reaching -1e160 or -1.8e308: the squares of
    r - r_lo overflow in the diagnostics' clip profile, and clipped IPS's w (r - r_lo) itself.
    The messages named internal statistics (`product_variance`) or told to rescale `reward`;
    they now name reward_range."""
    rng = np.random.default_rng(0)
    n = 60
    action = rng.integers(0, 3, n)
    frame = pd.DataFrame(
        {
            "action": action,
            "propensity": 1 / 3,
            "reward": rng.binomial(1, 0.4, n).astype(float),
            "target__greedy": np.where(action == 1, 0.8, 0.1),
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for low in (-1e160, -1.7976931348623157e308):
            with pytest.raises(ValidationError, match=r"reward_range=\(-1[.0-9]*e\+(160|308), 1\)"):
                ope.diagnose(frame, reward_range=(low, 1.0))
        wide = (-1.7976931348623157e308, 1.0)
        r, p = frame["reward"].to_numpy(), frame["propensity"].to_numpy()
        t = frame["target__greedy"].to_numpy()
        with pytest.raises(ValidationError, match="lower end of reward_range"):
            ClippedIPS(max_weight=10.0).estimate(r, p, t, reward_range=wide)
        with pytest.raises(ValidationError, match="lower end of reward_range"):
            ope.evaluate(frame, estimators=["clipped_ips"], max_weight=10.0, reward_range=wide)


def test_a_clip_profile_overflowed_by_one_weight_says_so():
    """One weight of 1e149 with rewards up to 1e6: the squares of w (r - r_lo) overflow. The
    range is around the rewards, so it is not blamed; the message names the weight and the
    span (it said `weight_mean` = -1.9e131 lay outside [0, max_weight])."""
    rng = np.random.default_rng(0)
    n = 60
    action = rng.integers(0, 3, n)
    propensity = np.full(n, 1 / 3)
    propensity[0] = 1e-149
    frame = pd.DataFrame(
        {
            "action": action,
            "propensity": propensity,
            "reward": rng.uniform(0, 1e6, n),
            "target__greedy": np.where(action == 1, 0.8, 0.1),
        }
    )
    frame.loc[0, "target__greedy"] = 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValidationError, match=r"weights up to 1e\+149 times r - r_lo up to"):
            ope.diagnose(frame, reward_range=(0.0, 1e6))


def test_diagnostics_without_candidates_accept_a_tiny_propensity():
    """No candidate: no weight to check (a numpy reduction error escaped before)."""
    d = ope.diagnostics.diagnose_arrays(np.ones(N), _nan_at(HALF, 5, 1e-200), np.ones((N, 0)))
    assert d.policies == []
