"""Off-policy betting confidence sequence: closed form, constructed cases, invariances, errors
and time-uniform validity."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import integrate, special

from ope.exceptions import EstimationError, MissingBoundsError, ParameterError, ValidationError
from ope.intervals import betting
from ope.intervals._types import ConfidenceInterval
from ope.intervals.betting import (
    betting_confidence_sequence,
    betting_interval,
    betting_lower_bound,
)


@pytest.mark.parametrize("s, v", [(0.0, 0.0), (1.0, 0.25), (3.0, 2.0), (12.0, 7.5), (40.0, 60.0)])
def test_log_wealth_closed_form_equals_the_mixture_integral(s: float, v: float) -> None:
    # mixture over bets lambda in [0, 1) of exp(lambda s - psi(lambda) v) with density
    # rho^rho (1 - lambda)^(rho - 1) exp(-rho (1 - lambda)) / gamma_lower(rho, rho), rho = 1
    rho = betting.MIXTURE_RHO
    norm = special.gammainc(rho, rho) * special.gamma(rho) / rho**rho

    def integrand(lam: float) -> float:
        psi = -math.log1p(-lam) - lam
        return math.exp(lam * s - psi * v) * (1 - lam) ** (rho - 1) * math.exp(-rho * (1 - lam))

    value, _ = integrate.quad(integrand, 0.0, 1.0, epsabs=0, epsrel=1e-12, limit=200)
    assert float(betting.log_wealth(s, v)) == pytest.approx(math.log(value / norm), abs=1e-9)


def _psi(lam: float) -> float:
    """-ln(1 - lam) - lam, by its series where the difference would cancel."""
    if lam < 1e-3:
        return sum(lam**k / k for k in range(2, 14))
    return -math.log1p(-lam) - lam


def _log_mixture_by_quadrature(s: float, v: float) -> float:
    """ln of the mixture integral (rho = 1), integrated around the peak of its integrand: for a
    huge V the integrand is a spike of width (1 - lam*) / sqrt(V) at lam* = s / (s + V)."""

    def log_integrand(lam: float) -> float:
        return lam * s - _psi(lam) * v - (1.0 - lam)

    peak = s / (s + v)
    width = (1.0 - peak) / math.sqrt(v + 1.0)
    lo, hi = max(0.0, peak - 40.0 * width), min(1.0, peak + 40.0 * width)
    top = log_integrand(peak)
    value, _ = integrate.quad(
        lambda t: math.exp(log_integrand(lo + t * (hi - lo)) - top),
        0.0,
        1.0,
        epsabs=0,
        epsrel=1e-13,
        limit=200,
    )
    return top + math.log(value) + math.log(hi - lo) - math.log(-math.expm1(-1.0))


@pytest.mark.parametrize(
    "s, v",
    [
        (3.0, 2.0),
        (30.0, 100.0),
        (1e3, 1e5),
        (1e5, 1e9),
        (1e6, 1e11),
        (1e6, 1e12),
        (1e7, 1e13),
        (1e8, 1e15),
        (1e10, 1e20),
        (0.0, 1e200),
        (3e149, 1e298),
    ],
)
def test_log_wealth_stays_accurate_for_huge_variances(s: float, v: float) -> None:
    # huge importance weights make V ~ w^2 huge; the closed form, written the direct way, lost
    # all precision from V ~ 1e9 on (at (1e10, 1e20) it gave +524288 instead of -22.3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", integrate.IntegrationWarning)
        want = _log_mixture_by_quadrature(s, v)
    assert float(betting.log_wealth(s, v)) == pytest.approx(want, abs=1e-9)


def test_final_bound_solves_the_wealth_equation() -> None:
    # hand check of both ends: with X_t = w_t r_t (lower) and X'_t = w_t (1 - r_t) (upper), each
    # bound solves log M(sum X - n m, V) = log(2 / alpha), with V computed here from the
    # clipped predictable predictions min(1, (1/2 + sum_{s<t} X_s) / t)
    w = np.tile([2.0, 0.0], 100)
    r = np.tile([1.0, 1.0, 0.0, 1.0], 50)
    ci = betting_interval(w, r, reward_range=(0.0, 1.0), confidence_level=0.9)
    n = w.size
    for x, end in ((w * r, ci.low), (w * (1 - r), 1.0 - ci.high)):
        pred = np.minimum(
            1.0, (np.concatenate([[0.0], np.cumsum(x)[:-1]]) + 0.5) / np.arange(1, n + 1)
        )
        v = np.sum((x - pred) ** 2)
        assert 0.0 < end < x.mean() == 0.5
        assert float(betting.log_wealth(x.sum() - n * end, v)) == pytest.approx(
            math.log(20.0), abs=1e-8
        )


def test_mean_above_one_on_the_normalized_scale_gives_the_top() -> None:
    # weighted rewards averaging 1.4 > 1 (weights with sample mean 1.4): the lower end is the
    # top of the range, never above it
    w = np.tile([2.0, 0.0, 2.0, 2.0, 0.0, 2.0, 2.0, 2.0, 0.0, 2.0], 20)
    ci = betting_interval(w, np.ones_like(w), reward_range=(0.0, 1.0))
    assert ci == (1.0, 1.0)


def test_interval_is_the_last_element_of_the_sequence() -> None:
    rng = np.random.default_rng(0)
    w = rng.exponential(1.0, size=3000)  # unbounded weights with mean one
    r = rng.uniform(-2.0, 5.0, size=3000)
    lower, upper = betting_confidence_sequence(w, r, reward_range=(-2.0, 5.0))
    ci = betting_interval(w, r, reward_range=(-2.0, 5.0))
    assert isinstance(ci, ConfidenceInterval)
    assert lower.shape == upper.shape == (3000,)
    assert ci.low == pytest.approx(lower[-1], abs=1e-9)
    assert ci.high == pytest.approx(upper[-1], abs=1e-9)
    assert np.all(lower >= -2.0) and np.all(upper <= 5.0) and np.all(lower <= upper)


def test_on_policy_constant_reward_converges() -> None:
    # on-policy (w = 1), every reward 0.5: the sequence starts at the whole range and closes in
    w = np.ones(20_000)
    r = np.full(20_000, 0.5)
    lower, upper = betting_confidence_sequence(w, r, reward_range=(0.0, 1.0))
    assert (lower[0], upper[0]) == (0.0, 1.0)
    assert lower[-1] < 0.5 < upper[-1]
    assert upper[-1] - lower[-1] < 0.01
    # symmetric data give a symmetric interval
    assert 0.5 - lower[-1] == pytest.approx(upper[-1] - 0.5, abs=1e-9)
    assert upper[-1] - lower[-1] < upper[999] - lower[999] < upper[99] - lower[99]


def test_affine_reward_maps_and_reflection() -> None:
    rng = np.random.default_rng(1)
    w = rng.choice([0.0, 0.5, 4.0], p=[0.4, 0.4, 0.2], size=2000)
    r = rng.binomial(1, 0.3, size=2000).astype(float)
    base = betting_interval(w, r, reward_range=(0.0, 1.0))
    shifted = betting_interval(w, 10.0 + 3.0 * r, reward_range=(10.0, 13.0))
    assert shifted.low == pytest.approx(10.0 + 3.0 * base.low, abs=1e-9)
    assert shifted.high == pytest.approx(10.0 + 3.0 * base.high, abs=1e-9)
    # reflecting rewards inside the range swaps the roles of the two sides
    reflected = betting_interval(w, 1.0 - r, reward_range=(0.0, 1.0))
    assert reflected.low == pytest.approx(1.0 - base.high, abs=1e-9)
    assert reflected.high == pytest.approx(1.0 - base.low, abs=1e-9)


def test_monotone_in_level_and_float32_input() -> None:
    rng = np.random.default_rng(2)
    w = rng.choice([0.0, 2.0], size=5000)
    r = rng.binomial(1, 0.6, size=5000).astype(float)
    widths = [
        betting_interval(w, r, reward_range=(0, 1), confidence_level=lv).width
        for lv in (0.5, 0.8, 0.95, 0.99)
    ]
    assert np.all(np.diff(widths) > 0)
    ci32 = betting_interval(w.astype(np.float32), r.astype(np.float32), reward_range=(0, 1))
    assert ci32 == pytest.approx(betting_interval(w, r, reward_range=(0, 1)), abs=1e-9)


def test_needs_no_weight_bound() -> None:
    # a single huge weight is fine: only w >= 0 and bounded rewards are assumed
    w = np.concatenate([np.zeros(999), [1000.0]])
    r = np.ones(1000)
    ci = betting_interval(w, r, reward_range=(0.0, 1.0))
    assert 0.0 <= ci.low <= ci.high <= 1.0


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (
            dict(reward_range=None),
            MissingBoundsError,
            r"needs the a priori reward range: pass reward_range=\(low, high\)",
        ),
        (dict(reward_range=(1.0, 1.0)), ParameterError, r"must be finite with low < high"),
        (dict(confidence_level=1.5), ParameterError, r"in \(0, 1\); got 1.5"),
    ],
)
def test_argument_errors(kwargs: dict, error: type, match: str) -> None:
    args = dict(reward_range=(0.0, 1.0))
    args.update(kwargs)
    for fn in (betting_interval, betting_confidence_sequence):
        with pytest.raises(error, match=match):
            fn([1.0, 1.0], [0.0, 1.0], **args)


def test_data_errors() -> None:
    with pytest.raises(ValidationError, match=r"non-negative; 2 rows are < 0 \(first at row 1\)"):
        betting_interval([1.0, -0.5, -1.0], [0.0, 1.0, 1.0], reward_range=(0, 1))
    with pytest.raises(
        ValidationError, match=r"outside reward_range=\(0, 1\) \(first at row 0: 2.0\)"
    ):
        betting_confidence_sequence([1.0], [2.0], reward_range=(0, 1))
    with pytest.raises(ValidationError, match=r"`weight` must be finite; 1 rows are NaN"):
        betting_interval([np.inf], [0.0], reward_range=(0, 1))
    with pytest.raises(ValidationError, match=r"must have shape \(n,\)"):
        betting_interval(np.ones((2, 2)), np.ones((2, 2)), reward_range=(0, 1))
    with pytest.raises(EstimationError, match="no rows"):
        betting_interval([], [], reward_range=(0, 1))


def _ever_miss_fractions(paths: int, n: int, seed: int, level: float) -> tuple[float, float]:
    """Fraction of paths whose sequence ever excludes the truth, and ever excludes a wrong
    value 0.1 above it (the second shows the check has power: it is not vacuous)."""
    # logger: action 1 with prob. 0.25, the target always plays it -> w in {0, 4}, mean 1
    rng = np.random.default_rng(seed)
    truth, wrong = 0.7, 0.8
    misses = rejections = 0
    for _ in range(paths):
        played = rng.random(n) < 0.25
        w = np.where(played, 4.0, 0.0)
        r = np.where(played, rng.binomial(1, truth, n), rng.binomial(1, 0.2, n)).astype(float)
        lower, upper = betting_confidence_sequence(
            w, r, reward_range=(0.0, 1.0), confidence_level=level
        )
        misses += bool(np.any((lower > truth) | (upper < truth)))
        rejections += bool(np.any((lower > wrong) | (upper < wrong)))
    return misses / paths, rejections / paths


@pytest.mark.slow  # statistical validation: 150 paths of 1,500 steps
def test_time_uniform_validity_small() -> None:
    # 1 - confidence = 0.2; slack 3 Monte Carlo standard errors
    paths, level = 150, 0.8
    miss, power = _ever_miss_fractions(paths, 1500, seed=5, level=level)
    assert miss <= (1 - level) + 3 * math.sqrt(0.2 * 0.8 / paths)
    assert power >= 0.5


@pytest.mark.slow
def test_time_uniform_validity() -> None:
    paths, level = 300, 0.9
    miss, power = _ever_miss_fractions(paths, 3000, seed=6, level=level)
    assert miss <= (1 - level) + 3 * math.sqrt(0.1 * 0.9 / paths)
    assert power >= 0.9


# ------------------------------------------------- one-sided betting bound (Waudby-Smith & Ramdas)
def _max_log_capital(y: np.ndarray, m: float, alpha: float) -> float:
    """Reference: the hedged capital of one sample on [0, 1], written out bet by bet."""
    n = y.size
    mu, sq, log_k, best = 0.5, 0.0, 0.0, -math.inf
    for i in range(1, n + 1):  # reference implementation on a tiny sample
        sigma2 = (0.25 + sq) / i
        lam = min(math.sqrt(2 * math.log(1 / alpha) / (n * sigma2)), 0.5 / m)
        log_k += math.log(1 + lam * (y[i - 1] - m))
        best = max(best, log_k)
        sq += (y[i - 1] - mu) ** 2  # deviation from the prediction made before row i
        mu = (0.5 + y[:i].sum()) / (i + 1)
    return best


def test_betting_lower_bound_is_the_edge_of_the_rejected_means():
    # values in [2, 6]; on [0, 1] they are 0.25, 1, 0.5, 0.75, ...
    x = np.tile([3.0, 6.0, 4.0, 5.0, 2.0, 6.0], 15)
    level = 0.9
    lower = betting_lower_bound(x, low=2.0, high=6.0, confidence_level=level)
    y, edge = (x - 2.0) / 4.0, (lower - 2.0) / 4.0
    threshold = math.log(1 / (1 - level))
    assert _max_log_capital(y, edge, 1 - level) >= threshold  # rejected: below the bound
    assert _max_log_capital(y, edge + 1e-9, 1 - level) < threshold  # not rejected just above
    assert 2.0 < lower < x.mean()


def test_betting_lower_bound_vectorizes_over_samples_and_is_shift_scale_equivariant():
    rng = np.random.default_rng(5)
    x = rng.beta(0.5, 3.0, size=(4, 300))
    rows = betting_lower_bound(x, low=0.0, high=1.0)
    assert rows.shape == (4,)
    assert rows == pytest.approx([betting_lower_bound(v, low=0.0, high=1.0) for v in x], abs=0)
    moved = betting_lower_bound(10.0 - 3.0 * (1.0 - x), low=7.0, high=10.0)
    assert moved == pytest.approx(7.0 + 3.0 * rows, abs=1e-12)


@pytest.mark.parametrize(
    "draw, mean",
    [
        # rare large values: Bernoulli(0.002), and a mixture of 0.3 * Bernoulli(0.5) and a sure 1
        # with probability 0.002 (the safety gate's sure-win arm)
        (lambda rng, shape: (rng.random(shape) < 0.002) * 1.0, 0.002),
        (
            lambda rng, shape: np.where(
                rng.random(shape) < 0.002, 1.0, 0.3 * (rng.random(shape) < 0.5)
            ),
            0.002 + 0.998 * 0.15,
        ),
        # skewed continuous values (miss rate 0.043 with this seed)
        (lambda rng, shape: rng.beta(0.2, 2.0, size=shape), 0.2 / 2.2),
        # uniform values: the miss rate is close to nominal here (0.058 with this seed)
        (lambda rng, shape: rng.random(shape), 0.5),
    ],
)
def test_betting_lower_bound_covers_at_the_nominal_level_on_skewed_data(draw, mean):
    reps, n, level = 2000, 400, 0.9
    x = draw(np.random.default_rng(11), (reps, n))
    misses = np.mean(betting_lower_bound(x, low=0.0, high=1.0, confidence_level=level) > mean)
    assert misses <= 0.1 + 3 * math.sqrt(0.1 * 0.9 / reps)  # 0.120


def test_betting_lower_bound_is_tighter_than_empirical_bernstein():
    from ope.intervals.bounded import bernstein_interval

    rng = np.random.default_rng(2)
    for x in (
        rng.binomial(1, 0.3, (200, 1000)) * 1.0,
        rng.beta(2.0, 5.0, (200, 1000)),
        rng.binomial(1, 0.02, (200, 1000)) * 1.0,
    ):
        bet = betting_lower_bound(x, low=0.0, high=1.0)
        eb = np.array(
            [
                bernstein_interval(
                    v.mean(), v.var(ddof=1), v.size, low=0.0, high=1.0, confidence_level=0.9
                ).low
                for v in x
            ]
        )
        assert np.mean(bet > eb) >= 0.95  # one-sided 95% both
        assert np.mean(x.mean(axis=1) - bet) < 0.8 * np.mean(x.mean(axis=1) - eb)


@pytest.mark.parametrize(
    ("values", "kwargs", "error", "match"),
    [
        ([0.5], {"low": None, "high": 1.0}, MissingBoundsError, "a priori bounds"),
        ([0.5], {"low": 1.0, "high": 0.0}, ParameterError, "low < high"),
        (
            [0.5],
            {"low": 0.0, "high": 1.0, "confidence_level": 5},
            ParameterError,
            "confidence_level",
        ),
        ([0.5, 1.5], {"low": 0.0, "high": 1.0}, ValidationError, r"1 entries outside"),
        ([0.5, np.nan], {"low": 0.0, "high": 1.0}, ValidationError, "finite"),
        ([], {"low": 0.0, "high": 1.0}, EstimationError, "empty"),
    ],
)
def test_betting_lower_bound_errors(values, kwargs, error, match):
    with pytest.raises(error, match=match):
        betting_lower_bound(np.asarray(values, dtype=float), **kwargs)
