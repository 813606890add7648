"""Empirical likelihood estimate and interval: reference vectors, properties, errors, coverage."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ope.exceptions import EstimationError, MissingBoundsError, ParameterError, ValidationError
from ope.intervals._types import ConfidenceInterval
from ope.intervals.likelihood import empirical_likelihood_estimate, empirical_likelihood_interval


def _expand(groups: list[tuple[int, float, float]]) -> tuple[np.ndarray, np.ndarray]:
    w = np.concatenate([np.full(c, w_) for c, w_, _ in groups])
    r = np.concatenate([np.full(c, r_) for c, _, r_ in groups])
    return w, r


# (count, weight, reward) groups with w_min = 0, w_max = 2000, alpha = 0.05, rewards in [0, 1],
# and the interval the authors' reference implementation returns for them
REFERENCE_VECTORS = [
    ([(2, 1.0101, 1.0), (8, 0.0, 0.0)], (0.025502, 1.0)),
    ([(9, 1.0101, 0.0), (1, 1.0101, 1.0)], (0.003083, 0.422993)),
    ([(1, 0.0, 0.0), (99, 1000 / 999, 1.0)], (0.957076, 1.0)),
    ([(21, 0.0, 0.0), (247, 1.0101, 0.0), (1, 1000.0, 0.0)], (0.0, 0.070013)),
    ([(10, 2.0, 0.0)], (0.0, 0.225762)),
]


@pytest.mark.parametrize("groups, expected", REFERENCE_VECTORS)
def test_reference_vectors(groups: list, expected: tuple[float, float]) -> None:
    w, r = _expand(groups)
    ci = empirical_likelihood_interval(
        w, r, reward_range=(0.0, 1.0), weight_bound=2000.0, confidence_level=0.95
    )
    assert isinstance(ci, ConfidenceInterval)
    assert ci.low == pytest.approx(expected[0], abs=1e-4)
    assert ci.high == pytest.approx(expected[1], abs=1e-4)


@pytest.mark.parametrize("groups, expected", REFERENCE_VECTORS)
def test_reference_vectors_after_affine_reward_map(groups: list, expected: tuple) -> None:
    # rewards r -> 5 - 2 r with range [3, 5]: the interval maps and flips accordingly
    w, r = _expand(groups)
    ci = empirical_likelihood_interval(
        w, 5.0 - 2.0 * r, reward_range=(3.0, 5.0), weight_bound=2000.0
    )
    assert ci.low == pytest.approx(5.0 - 2.0 * expected[1], abs=2e-4)
    assert ci.high == pytest.approx(5.0 - 2.0 * expected[0], abs=2e-4)


def test_estimate_hand_vector_uniform_mle() -> None:
    # sample mean weight exactly 1: beta* = 0, q_i = 1/n, so the MLE value is mean(w r)
    w = np.array([0.0, 2.0, 0.5, 1.5])
    r = np.array([1.0, 1.0, 0.0, 1.0])
    est = empirical_likelihood_estimate(w, r, reward_range=(0.0, 1.0), weight_bound=10.0)
    assert est == pytest.approx(np.mean(w * r), abs=1e-12)


def test_estimate_hand_vector_with_leftover_mass() -> None:
    # all weights below 1: beta* sits at its upper end n / (1 - w_min) restricted by q_j <= 1,
    # here the pair (w = 0.5, count 2) gives beta <= (n - 2) / (1 - 0.5) = 4 < n / 1 = 4?
    # n = 4: bounds n / (1 - 0) = 4 and (4 - 2) / 0.5 = 4, (4 - 2) / 1 = 2 for w = 0 (count 2)
    w = np.array([0.0, 0.0, 0.5, 0.5])
    r = np.array([0.0, 0.0, 1.0, 1.0])
    # beta* = 2: q(w=0) = 1/(4 - 2) = 1/2 each, q(w=.5) = 1/(4 - 1) = 1/3 each
    # mass on the data is 1 + 2/3 > 1 -> infeasible, so the gradient root decides; compute it:
    # grad(beta) = 2(-1)/(4 - beta) + 2(-0.5)/(4 - 0.5 beta) < 0 for all beta -> beta* = lower end
    # lower end = n / (1 - w_max) = 4 / (1 - 10) = -4/9: q(0) = 1/(4 + 4/9), q(.5) = 1/(4 + 2/9)
    q0, q5 = 1 / (4 + 4 / 9), 1 / (4 + 2 / 9)
    value = 2 * q5 * 0.5 * 1.0
    leftover = 1.0 - 2 * q5 * 0.5
    est = empirical_likelihood_estimate(w, r, reward_range=(0.0, 1.0), weight_bound=10.0)
    assert est == pytest.approx(value + 0.5 * leftover, abs=1e-12)
    # the extra atom at w_max carries the missing weight mass: total probability is one
    assert 2 * q0 + 2 * q5 + leftover / 10.0 == pytest.approx(1.0, abs=1e-12)


def test_interval_contains_estimate_and_stays_in_range() -> None:
    rng = np.random.default_rng(0)
    for _ in range(5):
        n = int(rng.integers(5, 400))
        w = rng.choice([0.0, 0.5, 2.0, 20.0], p=[0.3, 0.3, 0.35, 0.05], size=n)
        r = rng.uniform(-1.0, 3.0, size=n)
        ci = empirical_likelihood_interval(w, r, reward_range=(-1.0, 3.0), weight_bound=25.0)
        est = empirical_likelihood_estimate(w, r, reward_range=(-1.0, 3.0), weight_bound=25.0)
        assert -1.0 <= ci.low <= est <= ci.high <= 3.0


def test_permutation_invariance_and_float32() -> None:
    rng = np.random.default_rng(1)
    w = rng.choice([0.0, 1.0, 4.0], p=[0.5, 0.3, 0.2], size=300)
    r = rng.binomial(1, 0.4, size=300).astype(float)
    ci = empirical_likelihood_interval(w, r, reward_range=(0, 1), weight_bound=10.0)
    perm = rng.permutation(300)
    assert empirical_likelihood_interval(
        w[perm], r[perm], reward_range=(0, 1), weight_bound=10.0
    ) == pytest.approx(ci, abs=1e-12)
    ci32 = empirical_likelihood_interval(
        w.astype(np.float32), r.astype(np.float32), reward_range=(0, 1), weight_bound=10.0
    )
    assert ci32 == pytest.approx(ci, abs=1e-6)


def test_wider_at_higher_level_and_narrower_with_more_data() -> None:
    rng = np.random.default_rng(2)
    w = rng.choice([0.0, 2.0, 10.0], p=[0.55, 0.4, 0.05], size=200)
    r = rng.binomial(1, 0.5, size=200).astype(float)
    widths = [
        empirical_likelihood_interval(
            w, r, reward_range=(0, 1), weight_bound=50.0, confidence_level=level
        ).width
        for level in (0.5, 0.8, 0.95, 0.99)
    ]
    assert np.all(np.diff(widths) > 0)
    # the same sample repeated: more data of the same kind
    widths = [
        empirical_likelihood_interval(
            np.tile(w, k), np.tile(r, k), reward_range=(0, 1), weight_bound=50.0
        ).width
        for k in (1, 4, 16)
    ]
    assert np.all(np.diff(widths) < 0)


def test_unseen_large_weight_mass_widens_the_upper_end() -> None:
    # a larger a priori weight_bound allows more unseen mass: the interval cannot get narrower
    w = np.array([0.9] * 30 + [1.1] * 30)
    r = np.array([0.0, 1.0] * 30)
    small = empirical_likelihood_interval(w, r, reward_range=(0, 1), weight_bound=2.0)
    large = empirical_likelihood_interval(w, r, reward_range=(0, 1), weight_bound=1000.0)
    assert large.low <= small.low + 1e-9 and large.high >= small.high - 1e-9


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (
            dict(weight_bound=None),
            MissingBoundsError,
            r"needs an a priori bound on the importance weights",
        ),
        (dict(reward_range=None), MissingBoundsError, r"needs the a priori reward range"),
        (dict(weight_bound=1.0), ParameterError, r"`weight_bound` must exceed 1"),
        (
            dict(weight_bound=3.0),
            ValidationError,
            r"1 weights are above weight_bound=3.0 \(first at row 2, weight 4.0\)",
        ),
        (dict(min_weight=1.0), ParameterError, r"`min_weight` must be in \[0, 1\)"),
        (dict(min_weight=0.5), ValidationError, r"1 weights are below min_weight=0.5"),
        (dict(confidence_level=0.0), ParameterError, r"confidence_level"),
        (
            dict(reward_range=(0.0, 0.5)),
            ValidationError,
            r"1 rows outside reward_range=\(0, 0.5\) \(first at row 1: 1.0\)",
        ),
    ],
)
def test_errors(kwargs: dict, error: type, match: str) -> None:
    args = dict(reward_range=(0.0, 1.0), weight_bound=10.0)
    args.update(kwargs)
    w = np.array([0.0, 1.0, 4.0, 1.0])
    r = np.array([0.0, 1.0, 0.5, 0.0])
    with pytest.raises(error, match=match):
        empirical_likelihood_interval(w, r, **args)


def test_data_errors() -> None:
    with pytest.raises(
        ValidationError,
        match=r"`weight` must be non-negative; 1 rows are < 0 "
        r"\(first at row 1\)",
    ):
        empirical_likelihood_interval(
            [1.0, -1.0], [0.0, 1.0], reward_range=(0, 1), weight_bound=10.0
        )
    with pytest.raises(ValidationError, match=r"`reward` must be finite; 1 rows are NaN"):
        empirical_likelihood_estimate(
            [1.0, 1.0], [0.0, np.nan], reward_range=(0, 1), weight_bound=10.0
        )
    with pytest.raises(ValidationError, match="same length"):
        empirical_likelihood_estimate([1.0, 1.0], [0.0], reward_range=(0, 1), weight_bound=10.0)
    with pytest.raises(EstimationError, match="at least 2 rows"):
        empirical_likelihood_interval([1.0], [0.0], reward_range=(0, 1), weight_bound=10.0)


@pytest.mark.slow
def test_coverage_heavy_tailed_weights() -> None:
    # the authors' heavy-tailed design: w in {0, 2, 1000} with E w = 1 and E w^2 = 100
    rng = np.random.default_rng(11)
    p1000 = 98 / (1000 * 998)  # E w^2 = 2 * 2 * p2 + 1e6 * p1000 with 2 p2 + 1000 p1000 = 1
    p2 = (1 - 1000 * p1000) / 2
    probs = np.array([1 - p2 - p1000, p2, p1000])
    assert 4 * p2 + 1e6 * p1000 == pytest.approx(100.0)
    reps, n = 1000, 1000
    hits = 0
    for _ in range(reps):
        truth = rng.uniform()  # rewards Bernoulli(truth), independent of the weight
        w = rng.choice([0.0, 2.0, 1000.0], p=probs, size=n)
        r = rng.binomial(1, truth, size=n).astype(float)
        ci = empirical_likelihood_interval(w, r, reward_range=(0, 1), weight_bound=1000.0)
        hits += ci.low <= truth <= ci.high
    slack = 3 * math.sqrt(0.95 * 0.05 / reps)
    assert hits / reps >= 0.95 - slack


def test_interval_matches_a_direct_primal_solve() -> None:
    # solve the defining optimization problem directly (SLSQP over the masses of the data
    # points and the four extra atoms) and compare with the dual solution
    from scipy import optimize, stats
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(2)
    n, w_max = 12, 5.0
    w = rng.choice([0.0, 0.5, 2.0, 5.0], size=n)
    r = rng.choice([0.0, 1.0, 0.3], size=n)
    ci = empirical_likelihood_interval(w, r, reward_range=(0, 1), weight_bound=w_max)
    # MLE by the same route as a generic solver: maximize sum log q subject to the constraints
    extra_w = np.array([0.0, 0.0, w_max, w_max])
    extra_r = np.array([0.0, 1.0, 0.0, 1.0])
    all_w, all_r = np.concatenate([w, extra_w]), np.concatenate([r, extra_r])
    linear = [
        {"type": "eq", "fun": lambda x: x.sum() - 1.0},
        {"type": "eq", "fun": lambda x: x @ all_w - 1.0},
    ]
    bounds = [(1e-12, 1.0)] * (n + 4)
    # SLSQP's success flag depends on the BLAS build and thread count (it reports a line-search
    # failure on some machines at the same optimum), so the flag is never read: the solves run on
    # one BLAS thread whatever the machine has, and only the points they return are checked
    # (feasible; their values within 1e-6 of the dual solution's end points)
    with threadpool_limits(limits=1):
        mle = optimize.minimize(
            lambda x: -np.mean(np.log(x[:n])),
            np.full(n + 4, 1 / (n + 4)),
            constraints=linear,
            bounds=bounds,
            method="SLSQP",
            options={"maxiter": 1000, "ftol": 1e-15},
        )
    assert abs(mle.x.sum() - 1.0) < 1e-8 and abs(mle.x @ all_w - 1.0) < 1e-8
    mle_loglik = n * -mle.fun
    floor = mle_loglik - 0.5 * stats.f.isf(0.05, 1, n - 1)
    likelihood = {"type": "ineq", "fun": lambda x: np.sum(np.log(x[:n])) - floor}
    ends = []
    for sign in (1.0, -1.0):
        with threadpool_limits(limits=1):
            res = optimize.minimize(
                lambda x: sign * (x @ (all_w * all_r)),
                mle.x,
                constraints=[*linear, likelihood],
                bounds=bounds,
                method="SLSQP",
                options={"maxiter": 1000, "ftol": 1e-14},
            )
        # a feasible point: its value bounds the optimum (line-search warnings near the optimum
        # are harmless); weak duality puts the dual value on the other side
        x = res.x
        assert abs(x.sum() - 1.0) < 1e-8 and abs(x @ all_w - 1.0) < 1e-8
        assert np.sum(np.log(x[:n])) >= floor - 1e-8
        ends.append(sign * res.fun)
    assert ci.low == pytest.approx(ends[0], abs=1e-6)
    assert ci.high == pytest.approx(ends[1], abs=1e-6)
