"""Finite inputs of extreme magnitude in the interval methods: a finite,
correct interval, or a specific error naming the input; never NaN, inf or an internal
"must be finite".

The reference is the scaled problem. Every method is scale-equivariant, interval(c x) =
c interval(x) (the rewards, the reward range or the value bounds, the means and the standard
errors scaled by c > 0; variances by c^2), so each method is run on values of order 1 and on the
same values times c for c from 1e-300 to 1e300, and near the float64 limit (1.8e308), and the
two must agree to a relative 1e-12 of the range. A reflection (c < 0) swaps the two ends.
Variances scale by c^2, which float64 holds only for |c| in about [1e-150, 1e150]; beyond that,
the variance-based methods are checked with zero variance, and a variance that overflowed to
inf is refused by name.
"""

from __future__ import annotations

import math
import warnings
from typing import Final

import numpy as np
import pytest

from ope.exceptions import EstimationError, ParameterError, ValidationError
from ope.intervals import (
    bernstein_interval,
    betting_confidence_sequence,
    betting_interval,
    betting_lower_bound,
    bottou_interval,
    empirical_likelihood_estimate,
    empirical_likelihood_interval,
    hoeffding_interval,
    normal_interval,
    t_interval,
)

#: scales over the whole float64 range (powers of ten and of two, whose scaling is exact)
SCALES: Final = (
    1e-300,
    2.0**-900,
    1e-200,
    1e-150,
    1e-100,
    1e-30,
    1e-5,
    1.0,
    3.0,
    1e5,
    1e30,
    1e100,
    1e150,
    1e200,
    2.0**900,
    1e300,
)
#: scales whose squares (variances) are normal float64 numbers
SQUARE_SCALES: Final = tuple(c for c in SCALES if 1e-150 <= c <= 1e150)
#: relative tolerance, of the width of the a priori range, for interval(c x) vs c interval(x)
RTOL: Final = 1e-12

RNG = np.random.default_rng(20240901)
N: Final = 300
WEIGHT = RNG.choice([0.0, 0.5, 2.0, 4.0], size=N, p=[0.35, 0.3, 0.25, 0.1])
UNIT_REWARD = RNG.uniform(-1.0, 1.0, size=N).round(3)  # rewards in [-1, 1]


def _close(got: object, want: object, span: float) -> None:
    got_a = np.asarray(got, dtype=np.float64)
    want_a = np.asarray(want, dtype=np.float64)
    assert np.all(np.isfinite(got_a)), got
    np.testing.assert_allclose(got_a, want_a, rtol=0, atol=RTOL * span)


def _ids(values: tuple[float, ...]) -> list[str]:
    return [f"{v:.0e}" for v in values]


# ---------------------------------------------------------------------------------------------
# interval(c x) == c interval(x), for every method
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("c", SCALES, ids=_ids(SCALES))
def test_wald_intervals_are_scale_equivariant(c: float) -> None:
    ref_n, ref_t = normal_interval(0.4, 0.05), t_interval(0.4, 0.05, 12)
    _close(normal_interval(0.4 * c, 0.05 * c), [c * ref_n.low, c * ref_n.high], c)
    _close(t_interval(0.4 * c, 0.05 * c, 12), [c * ref_t.low, c * ref_t.high], c)


@pytest.mark.parametrize("c", SCALES, ids=_ids(SCALES))
def test_hoeffding_and_zero_variance_bernstein_are_scale_equivariant(c: float) -> None:
    ref_h = hoeffding_interval(0.3, 50, low=-1.0, high=1.0)
    ref_b = bernstein_interval(0.3, 0.0, 50, low=-1.0, high=1.0)
    _close(hoeffding_interval(0.3 * c, 50, low=-c, high=c), [c * ref_h.low, c * ref_h.high], 2 * c)
    _close(
        bernstein_interval(0.3 * c, 0.0, 50, low=-c, high=c), [c * ref_b.low, c * ref_b.high], 2 * c
    )


@pytest.mark.parametrize("c", SQUARE_SCALES, ids=_ids(SQUARE_SCALES))
def test_bernstein_and_bottou_are_scale_equivariant_with_their_variances(c: float) -> None:
    ref = bernstein_interval(0.1, 0.04, 400, low=-1.0, high=1.0)
    _close(
        bernstein_interval(0.1 * c, 0.04 * c * c, 400, low=-c, high=c),
        [c * ref.low, c * ref.high],
        2 * c,
    )
    # Bottou: rewards in [c, 3c]; the weight statistics are unitless, the product's scale by c
    args = dict(weight_mean=0.9, weight_variance=0.5, n=5_000, max_weight=10.0)
    for outer in ("bernstein", "normal"):
        unit = bottou_interval(
            product_mean=0.4, product_variance=0.3, reward_range=(1.0, 3.0), outer=outer, **args
        )
        big = bottou_interval(
            product_mean=0.4 * c,
            product_variance=0.3 * c * c,
            reward_range=(c, 3.0 * c),
            outer=outer,
            **args,
        )
        _close(big, [c * x for x in unit], 2 * c)


@pytest.mark.parametrize("c", SCALES, ids=_ids(SCALES))
def test_bottou_with_zero_product_variance_is_scale_equivariant(c: float) -> None:
    args = dict(
        weight_mean=0.8, weight_variance=0.2, product_variance=0.0, n=1_000, max_weight=20.0
    )
    unit = bottou_interval(product_mean=0.5, reward_range=(-1.0, 1.0), **args)
    big = bottou_interval(product_mean=0.5 * c, reward_range=(-c, c), **args)
    _close(big, [c * x for x in unit], 2 * c)


@pytest.mark.parametrize("c", SCALES, ids=_ids(SCALES))
def test_betting_is_scale_equivariant(c: float) -> None:
    unit = betting_interval(WEIGHT, UNIT_REWARD, reward_range=(-1.0, 1.0))
    _close(
        betting_interval(WEIGHT, c * UNIT_REWARD, reward_range=(-c, c)),
        [c * unit.low, c * unit.high],
        2 * c,
    )
    lo, hi = betting_confidence_sequence(WEIGHT, UNIT_REWARD, reward_range=(-1.0, 1.0))
    big_lo, big_hi = betting_confidence_sequence(WEIGHT, c * UNIT_REWARD, reward_range=(-c, c))
    _close(big_lo, c * lo, 2 * c)
    _close(big_hi, c * hi, 2 * c)


@pytest.mark.parametrize("c", SCALES, ids=_ids(SCALES))
def test_betting_lower_bound_is_scale_equivariant(c: float) -> None:
    values = (UNIT_REWARD + 1.0) / 2.0  # in [0, 1]
    unit = betting_lower_bound(values, low=0.0, high=1.0)
    _close(betting_lower_bound(c * values, low=0.0, high=c), c * unit, c)


@pytest.mark.parametrize("c", SCALES, ids=_ids(SCALES))
def test_empirical_likelihood_is_scale_equivariant(c: float) -> None:
    w, r = WEIGHT[:120], UNIT_REWARD[:120]
    unit = empirical_likelihood_interval(w, r, reward_range=(-1.0, 1.0), weight_bound=50.0)
    big = empirical_likelihood_interval(w, c * r, reward_range=(-c, c), weight_bound=50.0)
    _close(big, [c * unit.low, c * unit.high], 2 * c)
    est = empirical_likelihood_estimate(w, r, reward_range=(-1.0, 1.0), weight_bound=50.0)
    _close(
        empirical_likelihood_estimate(w, c * r, reward_range=(-c, c), weight_bound=50.0),
        c * est,
        2 * c,
    )


@pytest.mark.parametrize("c", (1.0, 1e150, 1e300), ids=_ids((1.0, 1e150, 1e300)))
def test_a_reflection_swaps_the_ends(c: float) -> None:
    # rewards r -> -r with the range (-hi, -lo): the interval (low, high) -> (-high, -low)
    r = c * (UNIT_REWARD + 1.0) / 2.0  # in [0, c]
    for method in (
        lambda rr, rng: betting_interval(WEIGHT, rr, reward_range=rng),
        lambda rr, rng: empirical_likelihood_interval(
            WEIGHT[:120], rr[:120], reward_range=rng, weight_bound=50.0
        ),
    ):
        up = method(r, (0.0, c))
        down = method(-r, (-c, 0.0))
        _close([down.low, down.high], [-up.high, -up.low], c)


# ---------------------------------------------------------------------------------------------
# at the float64 limit (1.8e308)
# ---------------------------------------------------------------------------------------------
TOP: Final = float(np.finfo(np.float64).max)


def test_rewards_up_to_1e308_give_finite_correct_intervals() -> None:
    u = (UNIT_REWARD + 1.0) / 2.0  # in [0, 1]
    r = 1e308 * u
    unit = betting_interval(WEIGHT, u, reward_range=(0.0, 1.0))
    _close(
        betting_interval(WEIGHT, r, reward_range=(0.0, 1e308)),
        [1e308 * unit.low, 1e308 * unit.high],
        1e308,
    )
    # a range ending at the largest float64: the upper end is finite, not rounded to inf
    top = betting_interval(np.ones(N), np.full(N, TOP), reward_range=(0.0, TOP))
    assert top.high == TOP and math.isfinite(top.low)
    # a range far from 0: (1e308, 1.7e308), the same interval shifted and scaled
    lo, span = 1e308, 7e307
    shifted = betting_interval(WEIGHT, lo + span * u, reward_range=(lo, lo + span))
    _close(shifted, [lo + span * unit.low, lo + span * unit.high], span)


def test_value_bounds_whose_width_overflows_are_handled_in_scaled_units() -> None:
    # low=-1e308, high=1e308: high - low is not a float64, but the interval is
    unit_h = hoeffding_interval(0.25, 40, low=-1.0, high=1.0)
    _close(
        hoeffding_interval(0.25e308, 40, low=-1e308, high=1e308),
        [1e308 * unit_h.low, 1e308 * unit_h.high],
        1e308,
    )
    unit_b = bernstein_interval(0.25, 0.0, 40, low=-1.0, high=1.0)
    _close(
        bernstein_interval(0.25e308, 0.0, 40, low=-1e308, high=1e308),
        [1e308 * unit_b.low, 1e308 * unit_b.high],
        1e308,
    )
    values = UNIT_REWARD  # in [-1, 1]
    unit = betting_lower_bound(values, low=-1.0, high=1.0)
    _close(betting_lower_bound(1e308 * values, low=-1e308, high=1e308), 1e308 * unit, 1e308)


def test_a_wald_end_beyond_float64_is_refused_by_name() -> None:
    with pytest.raises(
        EstimationError,
        match=r"the normal interval value -/\+ 1\.96 \* std_error "
        r"\(value=1e\+308, std_error=1e\+308\) has an end "
        r"beyond the float64 range.*scale-equivariant",
    ):
        normal_interval(1e308, 1e308)
    with pytest.raises(EstimationError, match=r"the t interval .* beyond the float64 range"):
        t_interval(-1.5e308, 1e308, 5)
    # just inside the range: finite
    ci = normal_interval(1e308, 1e307)
    assert ci.high < TOP and math.isfinite(ci.low)


def test_a_variance_that_overflowed_is_refused_by_name() -> None:
    # values of 1e160 have squares of 1e320: a caller's variance of them is inf
    with pytest.raises(
        ValidationError,
        match=r"`variance` is inf: the squares of values this "
        r"large .* Divide the values and their bounds",
    ):
        bernstein_interval(1e160, math.inf, 100, low=0.0, high=2e160)
    with pytest.raises(ValidationError, match=r"`product_variance` is inf"):
        bottou_interval(0.9, 0.1, 1e160, math.inf, 100, max_weight=5.0, reward_range=(0, 1e160))


def test_a_reward_range_wider_than_float64_is_refused_by_name() -> None:
    for call in (
        lambda: betting_interval(WEIGHT, UNIT_REWARD, reward_range=(-1e308, 1e308)),
        lambda: empirical_likelihood_interval(
            WEIGHT, UNIT_REWARD, reward_range=(-TOP, TOP), weight_bound=50.0
        ),
        lambda: bottou_interval(
            0.9, 0.1, 0.4, 0.1, 100, max_weight=5.0, reward_range=(-1e308, 1e308)
        ),
    ):
        with pytest.raises(ParameterError, match=r"`reward_range`=.* is wider than float64"):
            call()


# ---------------------------------------------------------------------------------------------
# huge importance weights and weight bounds
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("clip", (1e10, 1e100, 1e149, 1e300), ids=_ids((1e10, 1e100, 1e149, 1e300)))
def test_bottou_with_a_huge_clip_level_and_wide_rewards(clip: float) -> None:
    # R * (r_max - r_min) = 1e300 * 1e150 is no float64; the interval is computed in span units
    span = 1e150  # its square, the scale of the product variance, is still a float64
    unit = bottou_interval(
        0.9, 0.5, 0.4, 0.3, 1_000, max_weight=clip, reward_range=(0.0, 1.0), outer="normal"
    )
    big = bottou_interval(
        0.9,
        0.5,
        0.4 * span,
        0.3 * span * span,
        1_000,
        max_weight=clip,
        reward_range=(0.0, span),
        outer="normal",
    )
    _close(big, [span * x for x in unit], span)
    bern = bottou_interval(0.9, 0.5, 0.4, 0.3, 1_000, max_weight=clip, reward_range=(0.0, 1.0))
    assert all(math.isfinite(x) for x in bern) and bern.low == 0.0 and bern.high == 1.0


@pytest.mark.parametrize(
    "bound", (1e61, 1e100, 1e149, 1e200, 1e300), ids=_ids((1e61, 1e100, 1e149, 1e200, 1e300))
)
def test_empirical_likelihood_with_a_huge_weight_bound(bound: float) -> None:
    # the interval converges as the a priori weight bound grows (its effect is O(1 / bound));
    # bounds beyond 1e60 used to stop the dual's bracket search ("did not converge") on the
    # second sample (weights 0 or 2, clicks)
    rng = np.random.default_rng(0)
    samples = [
        (WEIGHT[:200], (UNIT_REWARD[:200] + 1.0) / 2.0),
        (rng.choice([0.0, 2.0], 200), rng.binomial(1, 0.4, 200).astype(float)),
    ]
    for w, r in samples:
        limit = empirical_likelihood_interval(w, r, reward_range=(0.0, 1.0), weight_bound=1e30)
        got = empirical_likelihood_interval(w, r, reward_range=(0.0, 1.0), weight_bound=bound)
        _close(got, limit, 1.0)
        assert 0.0 < got.low < got.high < 1.0


@pytest.mark.parametrize("big", (1e10, 1e100, 1e149), ids=_ids((1e10, 1e100, 1e149)))
def test_empirical_likelihood_with_a_huge_observed_weight(big: float) -> None:
    w, r = WEIGHT[:200].copy(), (UNIT_REWARD[:200] + 1.0) / 2.0
    w[17] = big
    ci = empirical_likelihood_interval(w, r, reward_range=(0.0, 1.0), weight_bound=big)
    est = empirical_likelihood_estimate(w, r, reward_range=(0.0, 1.0), weight_bound=big)
    assert 0.0 <= ci.low <= est <= ci.high <= 1.0


def test_weights_above_1e150_are_refused_by_name() -> None:
    w = WEIGHT.copy()
    w[9] = 1e200
    for call in (
        lambda: betting_interval(w, UNIT_REWARD, reward_range=(-1.0, 1.0)),
        lambda: betting_confidence_sequence(w, UNIT_REWARD, reward_range=(-1.0, 1.0)),
        lambda: empirical_likelihood_interval(
            w, UNIT_REWARD, reward_range=(-1.0, 1.0), weight_bound=1e300
        ),
    ):
        with pytest.raises(
            ValidationError,
            match=r"`weight` has 1 rows above 1e\+150 \(first at "
            r"row 9: 1e\+200\)",
        ):
            call()


def test_betting_with_one_huge_weight_matches_the_wealth_equation() -> None:
    # one weight W among 500 unit weights makes V ~ W^2; the closed form of the mixture
    # martingale used to lose all precision from V ~ 1e15 on, giving e.g. [0.756, 0.756] (an
    # "empty" interval and a spurious warning) instead of [0, 0.512] at W = 1.1e8. The lower end
    # is 0 (a single huge weight carries no evidence); the upper one is that of the other rows.
    n = 500
    r = np.full(n, 0.5)
    r[3] = 1.0
    base = betting_interval(np.delete(np.ones(n), 3), np.delete(r, 3), reward_range=(0.0, 1.0))
    for big in (1.1e8, 5.2e8, 1.8e9, 1e12, 1e16, 1e100, 1e149):
        w = np.ones(n)
        w[3] = big
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no spurious "empty interval" warning
            ci = betting_interval(w, r, reward_range=(0.0, 1.0))
        assert ci.low == 0.0, big
        # the huge row has 1 - r = 0, so the upper bound sees 499 rows of 0.5 and one 0
        assert 0.5 < ci.high < base.high + 0.01, (big, ci)
