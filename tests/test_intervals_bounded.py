"""Hoeffding, empirical Bernstein and Bottou intervals: hand-computed vectors, properties,
errors, and coverage on simulated data."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ope.exceptions import EstimationError, MissingBoundsError, ParameterError, ValidationError
from ope.intervals._types import BottouInterval, ConfidenceInterval
from ope.intervals.bounded import bernstein_interval, bottou_interval, hoeffding_interval


# Monte Carlo slack for coverage checks: 3 standard errors of a proportion near 0.95
def _slack(reps: int, level: float = 0.95) -> float:
    return 3.0 * math.sqrt(level * (1.0 - level) / reps)


# --------------------------------------------------------------------------- Hoeffding


def test_hoeffding_hand_vector() -> None:
    # half-width (b - a) sqrt(ln(2/alpha) / (2n)) = 1 * sqrt(ln(40) / 2000) = 0.0429469...
    ci = hoeffding_interval(0.3, 1000, low=0.0, high=1.0, confidence_level=0.95)
    assert isinstance(ci, ConfidenceInterval)
    half = math.sqrt(math.log(40.0) / 2000.0)
    assert half == pytest.approx(0.0429469, abs=1e-7)
    assert ci.low == pytest.approx(0.3 - half, rel=1e-12)
    assert ci.high == pytest.approx(0.3 + half, rel=1e-12)


def test_hoeffding_scales_with_range_and_clips() -> None:
    ci = hoeffding_interval(1.0, 50, low=-2.0, high=3.0, confidence_level=0.9)
    half = 5.0 * math.sqrt(math.log(20.0) / 100.0)
    assert ci.low == pytest.approx(max(-2.0, 1.0 - half))
    assert ci.high == pytest.approx(min(3.0, 1.0 + half))
    near_edge = hoeffding_interval(0.01, 10, low=0.0, high=1.0)
    assert near_edge.low == 0.0 and 0.01 < near_edge.high < 1.0


def test_bernstein_hand_vector() -> None:
    # two-sided: delta = alpha/2 per side -> ln(2/delta) = ln(4/alpha) = ln(80)
    values = np.array([0.0, 1.0, 1.0, 0.0, 0.5, 0.25, 1.0, 0.0])
    n, mean, var = values.size, values.mean(), values.var(ddof=1)
    log_term = math.log(80.0)
    half = math.sqrt(2 * var * log_term / n) + 7 * 2.0 * log_term / (3 * (n - 1))
    ci = bernstein_interval(mean, var, n, low=-1.0, high=1.0)
    assert ci.low == pytest.approx(max(-1.0, mean - half))
    assert ci.high == pytest.approx(min(1.0, mean + half))
    # a large sample where neither end is clipped
    ci = bernstein_interval(0.3, 0.21, 1000, low=0.0, high=1.0)
    half = math.sqrt(2 * 0.21 * log_term / 1000) + 7 * log_term / (3 * 999)
    assert ci == pytest.approx((0.3 - half, 0.3 + half), rel=1e-12)


def test_bernstein_beats_hoeffding_for_small_variance() -> None:
    # importance-weighted values with range 100 but small variance
    hoeff = hoeffding_interval(1.0, 100_000, low=0.0, high=100.0)
    bern = bernstein_interval(1.0, 0.5, 100_000, low=0.0, high=100.0)
    assert bern.width < hoeff.width / 5


@pytest.mark.parametrize("method", ["hoeffding", "bernstein"])
def test_monotone_in_level_and_n(method: str) -> None:
    def ci(level: float, n: int) -> ConfidenceInterval:
        if method == "hoeffding":
            return hoeffding_interval(0.4, n, low=0.0, high=10.0, confidence_level=level)
        return bernstein_interval(0.4, 0.8, n, low=0.0, high=10.0, confidence_level=level)

    widths = [ci(level, 5000).width for level in (0.5, 0.8, 0.9, 0.95, 0.99)]
    assert np.all(np.diff(widths) > 0)
    widths = [ci(0.95, n).width for n in (100, 1000, 10_000, 100_000)]
    assert np.all(np.diff(widths) < 0)
    for level in (0.5, 0.99):
        for n in (2, 10, 100):
            lo, hi = ci(level, n)
            assert 0.0 <= lo <= 0.4 <= hi <= 10.0


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(low=None, high=1.0), MissingBoundsError, r"`low` is required"),
        (dict(low=0.0, high=None), MissingBoundsError, r"`high` is required"),
        (dict(low=None, high=None), MissingBoundsError, r"`low` and `high` are required"),
        (dict(low=1.0, high=1.0), ParameterError, r"`low` must be smaller than `high`"),
        (dict(low=0.0, high=1.0, confidence_level=95), ParameterError, r"in \(0, 1\); got 95"),
        (dict(low=0.0, high=1.0, confidence_level=0.0), ParameterError, r"in \(0, 1\)"),
        (dict(low=0.0, high=0.2), ValidationError, r"outside its a priori range"),
    ],
)
def test_hoeffding_errors(kwargs: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        hoeffding_interval(0.3, 100, **kwargs)


def test_bernstein_errors() -> None:
    with pytest.raises(MissingBoundsError, match="`high` is required.*Empirical maxima"):
        bernstein_interval(0.3, 0.1, 100, low=0.0, high=None)
    with pytest.raises(EstimationError, match="at least 2 rows, got n=1"):
        bernstein_interval(0.3, 0.1, 1, low=0.0, high=1.0)
    with pytest.raises(ValidationError, match="non-negative .*variance, got -0.1"):
        bernstein_interval(0.3, -0.1, 100, low=0.0, high=1.0)
    with pytest.raises(ValidationError, match="`mean` must be finite"):
        bernstein_interval(float("nan"), 0.1, 100, low=0.0, high=1.0)
    with pytest.raises(ParameterError, match="`n` must be a whole number"):
        bernstein_interval(0.3, 0.1, 10.5, low=0.0, high=1.0)
    # errors are ValueErrors for callers that catch the builtin
    with pytest.raises(ValueError):
        bernstein_interval(0.3, 0.1, 100, low=2.0, high=1.0)


def test_hoeffding_bernstein_coverage_small_n() -> None:
    # Bernoulli(0.1) scaled to [0, 5]: skewed, n = 40; both finite-sample bounds must cover
    rng = np.random.default_rng(3)
    reps, n, truth = 2000, 40, 0.5
    x = 5.0 * rng.binomial(1, 0.1, size=(reps, n))
    means, variances = x.mean(axis=1), x.var(axis=1, ddof=1)
    hits_h = hits_b = 0
    for m, v in zip(means, variances):
        lo, hi = hoeffding_interval(m, n, low=0.0, high=5.0)
        hits_h += lo <= truth <= hi
        lo, hi = bernstein_interval(m, v, n, low=0.0, high=5.0)
        hits_b += lo <= truth <= hi
    assert hits_h / reps >= 0.95 - _slack(reps)
    assert hits_b / reps >= 0.95 - _slack(reps)


# --------------------------------------------------------------------------- Bottou


def _summaries(clipped: np.ndarray, reward: np.ndarray, r_min: float) -> tuple:
    prod = clipped * (reward - r_min)
    return (clipped.mean(), clipped.var(ddof=1), prod.mean(), prod.var(ddof=1), clipped.size)


def _mp(var: float, n: int, rng_: float, delta: float) -> float:
    lt = math.log(2 / delta)
    return math.sqrt(2 * var * lt / n) + 7 * rng_ * lt / (3 * (n - 1))


def test_bottou_hand_example_bernstein() -> None:
    # six rows, clip level R = 3, rewards in [-1, 1]  (M = 2)
    weight = np.array([0.0, 2.0, 5.0, 1.0, 0.5, 4.0])
    reward = np.array([1.0, 0.5, -1.0, 0.0, 1.0, 0.25])
    clipped = np.minimum(weight, 3.0)  # [0, 2, 3, 1, .5, 3]
    w_mean, w_var, y_mean, y_var, n = _summaries(clipped, reward, -1.0)
    assert w_mean == pytest.approx(9.5 / 6)
    assert y_mean == pytest.approx((0 + 3 + 0 + 1 + 1 + 3.75) / 6)
    iv = bottou_interval(
        w_mean,
        w_var,
        y_mean,
        y_var,
        n,
        max_weight=3.0,
        reward_range=(-1.0, 1.0),
        confidence_level=0.9,
    )
    assert isinstance(iv, BottouInterval)
    alpha = 0.1
    eps = _mp(y_var, n, 3.0 * 2.0, alpha / 4)  # two-sided at 1 - alpha/2 on range R*M
    xi = _mp(w_var, n, 3.0, alpha / 2)  # one-sided at 1 - alpha/2 on range R
    centre = -1.0 + y_mean
    # with n = 6 the margins are huge: everything is clipped to the reward range
    assert iv.outer_low == max(-1.0, centre - eps) == -1.0
    assert iv.outer_high == min(1.0, centre + eps) == 1.0
    assert iv.inner_low == pytest.approx(centre)
    w_lcl = min(1.0, max(0.0, w_mean - xi))
    assert iv.inner_high == pytest.approx(min(1.0, centre + 2.0 * (1.0 - w_lcl)))
    assert (iv.low, iv.high) == (-1.0, 1.0)


def test_bottou_pieces_by_definition_normal_outer() -> None:
    # the same kind of example at a size where nothing is clipped
    rng = np.random.default_rng(0)
    n = 20_000
    weight = rng.choice([0.2, 1.0, 8.0], p=[0.5, 0.4, 0.1], size=n)
    reward = rng.uniform(2.0, 4.0, size=n)
    clipped = np.minimum(weight, 5.0)
    w_mean, w_var, y_mean, y_var, _ = _summaries(clipped, reward, 2.0)
    level = 0.95
    iv = bottou_interval(
        w_mean,
        w_var,
        y_mean,
        y_var,
        n,
        max_weight=5.0,
        reward_range=(2.0, 4.0),
        confidence_level=level,
        outer="normal",
    )
    eps = stats.norm.ppf(1 - 0.05 / 4) * math.sqrt(y_var / n)
    xi = stats.norm.ppf(1 - 0.05 / 2) * math.sqrt(w_var / n)
    centre = 2.0 + y_mean
    assert iv.outer_low == pytest.approx(centre - eps)
    assert iv.outer_high == pytest.approx(centre + eps)
    assert iv.inner_low == pytest.approx(centre)
    assert iv.inner_high == pytest.approx(centre + 2.0 * (1.0 - (w_mean - xi)))
    assert iv.low == pytest.approx(iv.outer_low)
    assert iv.high == pytest.approx(iv.inner_high + eps)
    bern = bottou_interval(
        w_mean,
        w_var,
        y_mean,
        y_var,
        n,
        max_weight=5.0,
        reward_range=(2.0, 4.0),
        confidence_level=level,
    )
    assert bern.outer_high - bern.outer_low > iv.outer_high - iv.outer_low


def test_bottou_outer_shrinks_with_n_inner_does_not() -> None:
    args = dict(max_weight=10.0, reward_range=(0.0, 1.0))
    small = bottou_interval(0.8, 0.9, 0.3, 0.4, 1_000, **args)
    large = bottou_interval(0.8, 0.9, 0.3, 0.4, 1_000_000, **args)
    assert large.outer_high - large.outer_low < (small.outer_high - small.outer_low) / 10
    # inner width tends to M (1 - W) = 0.2, the clipped mass, however many rows
    assert large.inner_high - large.inner_low == pytest.approx(0.2, abs=0.01)
    assert small.inner_high - small.inner_low > 0.2


@pytest.mark.parametrize("seed", range(5))
def test_bottou_inner_interval_holds_in_population(seed: int) -> None:
    # exact environment: finite contexts and actions, deficient support allowed, rewards in
    # a general range [r_min, r_max]; the population inner interval must contain the truth
    rng = np.random.default_rng(seed)
    n_ctx, n_act, r_min, r_max = 4, 5, -3.0, 2.0
    p_x = rng.dirichlet(np.ones(n_ctx))
    logging = rng.dirichlet(np.ones(n_act), size=n_ctx)
    logging[:, 0] = 0.0  # the logger never plays action 0 ...
    logging /= logging.sum(axis=1, keepdims=True)
    target = rng.dirichlet(np.ones(n_act), size=n_ctx)  # ... but the target does
    q = rng.uniform(r_min, r_max, size=(n_ctx, n_act))
    truth = float(np.sum(p_x[:, None] * target * q))
    supported = logging > 0
    w = np.where(supported, target / np.where(supported, logging, 1.0), 0.0)
    for clip in (0.5, 1.5, 4.0, 1e9):
        wc = np.minimum(w, clip)
        w_bar = float(np.sum(p_x[:, None] * logging * wc))
        y_bar = float(np.sum(p_x[:, None] * logging * wc * (q - r_min)))
        assert w_bar < 1.0
        # population limit: huge n makes the margins vanish
        iv = bottou_interval(
            w_bar, 1.0, y_bar, 1.0, 10**22, max_weight=clip, reward_range=(r_min, r_max)
        )
        assert iv.inner_low - 1e-6 <= truth <= iv.inner_high + 1e-6
        assert iv.inner_high == pytest.approx(
            r_min + y_bar + (r_max - r_min) * (1 - w_bar), abs=1e-6
        )


def test_bottou_zero_weight_mass_gives_whole_range() -> None:
    iv = bottou_interval(0.0, 0.0, 0.0, 0.0, 500, max_weight=2.0, reward_range=(0.0, 1.0))
    assert (iv.low, iv.high) == (0.0, 1.0)
    assert iv.inner_low == 0.0 and iv.inner_high == 1.0


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(max_weight=None), MissingBoundsError, r"`max_weight` is required.*clip level"),
        (dict(reward_range=None), MissingBoundsError, r"needs the a priori reward range"),
        (
            dict(outer="t"),
            ParameterError,
            r"`outer` must be one of 'bernstein', 'normal'; got 't' \(str\)",
        ),
        (dict(n=1), EstimationError, r"at least 2 rows"),
        (dict(max_weight=0.5), ValidationError, r"`weight_mean`=0.8 lies outside"),
        (
            dict(reward_range=(1.0, 0.0)),
            ParameterError,
            r"`reward_range` must be finite with low < high",
        ),
        (dict(confidence_level=1.0), ParameterError, r"confidence_level"),
    ],
)
def test_bottou_errors(kwargs: dict, error: type, match: str) -> None:
    args = dict(n=100, max_weight=5.0, reward_range=(0.0, 1.0))
    args.update(kwargs)
    n = args.pop("n")
    with pytest.raises(error, match=match):
        bottou_interval(0.8, 0.5, 0.3, 0.2, n, **args)


def test_bottou_coverage_small_n_heavy_weights() -> None:
    # logger gives action 1 propensity 0.01, the target plays it with prob. 0.5; clip at 20
    rng = np.random.default_rng(7)
    reps, n, clip = 2000, 300, 20.0
    p_log = np.array([0.99, 0.01])
    p_tgt = np.array([0.5, 0.5])
    mean_r = np.array([0.3, 0.9])
    truth = float(p_tgt @ mean_r)
    actions = (rng.random((reps, n)) < p_log[1]).astype(int)
    reward = rng.binomial(1, mean_r[actions]).astype(float)
    wc = np.minimum(p_tgt[actions] / p_log[actions], clip)
    prod = wc * reward
    hits = 0
    for i in range(reps):
        iv = bottou_interval(
            wc[i].mean(),
            wc[i].var(ddof=1),
            prod[i].mean(),
            prod[i].var(ddof=1),
            n,
            max_weight=clip,
            reward_range=(0.0, 1.0),
        )
        hits += iv.low <= truth <= iv.high
    assert hits / reps >= 0.95 - _slack(reps)
