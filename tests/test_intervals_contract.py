"""The interval methods' shared contract: one validation layer, the glossary, the import rules.

- bad *arguments* raise :class:`ope.ParameterError` (which is also a ValueError and a TypeError),
  missing a priori bounds :class:`ope.MissingBoundsError`, bad *rows* :class:`ope.ValidationError`;
- the a priori bound on the importance weights is ``weight_bound``; ``max_weight=`` still works
  for the empirical likelihood functions, with a DeprecationWarning, and gives the same numbers;
- the bootstrap refuses a resample count too small for its percentile interval;
- ``ope.intervals`` imports nothing from ``ope.estimators`` and no private name of another module.
"""

from __future__ import annotations

import ast
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from ope.exceptions import MissingBoundsError, ParameterError, ValidationError
from ope.intervals import (
    bernstein_interval,
    betting_confidence_sequence,
    betting_interval,
    bootstrap_interval,
    bootstrap_replicates,
    bottou_interval,
    empirical_likelihood_estimate,
    empirical_likelihood_interval,
    hoeffding_interval,
    normal_interval,
    t_interval,
)
from ope.intervals.bootstrap import DEFAULT_N_RESAMPLES, default_n_resamples, min_resamples

INTERVALS = Path(__file__).resolve().parents[1] / "ope" / "intervals"

W = np.array([0.5, 2.0, 0.0, 1.5, 1.0, 1.0])
R = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 1.0])


def _mean(m: np.ndarray) -> np.ndarray:
    return m[..., 0]


# ---------------------------------------------------------------------------------------------
# one validation layer: the same argument error from every method
# ---------------------------------------------------------------------------------------------
CALLS_WITH_LEVEL = {
    "normal": lambda level: normal_interval(0.5, 0.1, confidence_level=level),
    "t": lambda level: t_interval(0.5, 0.1, 10, confidence_level=level),
    "bootstrap": lambda level: bootstrap_interval(R, _mean, confidence_level=level, rng=0),
    "hoeffding": lambda level: hoeffding_interval(0.5, 10, low=0, high=1, confidence_level=level),
    "bernstein": lambda level: bernstein_interval(
        0.5, 0.2, 10, low=0, high=1, confidence_level=level
    ),
    "bottou": lambda level: bottou_interval(
        0.9, 0.5, 0.4, 0.3, 100, max_weight=10.0, reward_range=(0, 1), confidence_level=level
    ),
    "empirical_likelihood": lambda level: empirical_likelihood_interval(
        W, R, reward_range=(0, 1), weight_bound=10.0, confidence_level=level
    ),
    "betting": lambda level: betting_interval(W, R, reward_range=(0, 1), confidence_level=level),
    "betting_sequence": lambda level: betting_confidence_sequence(
        W, R, reward_range=(0, 1), confidence_level=level
    ),
}


@pytest.mark.parametrize("method", sorted(CALLS_WITH_LEVEL))
@pytest.mark.parametrize("level", [95, 1.0, 0.0, -0.5, "0.95", None, True])
def test_every_method_refuses_a_bad_confidence_level_the_same_way(method, level):
    with pytest.raises(
        ParameterError,
        match=r"`confidence_level` must be a number in \(0, 1\)|"
        r"`confidence_level` must be in \(0, 1\)",
    ):
        CALLS_WITH_LEVEL[method](level)


@pytest.mark.parametrize("method", sorted(CALLS_WITH_LEVEL))
def test_every_method_accepts_a_good_level(method):
    CALLS_WITH_LEVEL[method](0.9)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: hoeffding_interval(0.5, 10, low="0", high=1), r"`low` must be a number"),
        (lambda: hoeffding_interval(0.5, 10, low=0, high=math.inf), r"both finite"),
        (lambda: bernstein_interval(0.5, 0.1, 10.0, low=0, high=1), r"`n` must be a whole"),
        (lambda: bernstein_interval(0.5, "0.1", 10, low=0, high=1), r"`variance` must be a num"),
        (
            lambda: bottou_interval(0.9, 0.5, 0.4, 0.3, 100, max_weight=-1.0, reward_range=(0, 1)),
            r"`max_weight` must be a positive finite number \(the clip level\)",
        ),
        (
            lambda: bottou_interval(0.9, 0.5, 0.4, 0.3, 100, max_weight=10.0, reward_range="01"),
            r"`reward_range` must be a pair",
        ),
        (lambda: normal_interval("0.5", 0.1), r"`value` must be a number"),
        (lambda: t_interval(0.5, 0.1, True), r"`n` must be a whole number >= 2"),
        (lambda: betting_interval(W, R, reward_range=(0, 1, 2)), r"got 3 values"),
        (
            lambda: empirical_likelihood_interval(W, R, reward_range=(0, 1), weight_bound="10"),
            r"`weight_bound` must be a number",
        ),
        (
            lambda: empirical_likelihood_interval(W, R, reward_range=(0, 1), weight_bound=0.5),
            r"`weight_bound` must exceed 1",
        ),
        (
            lambda: empirical_likelihood_estimate(
                W, R, reward_range=(0, 1), weight_bound=10, min_weight="0"
            ),
            r"`min_weight` must be a number",
        ),
        (lambda: bootstrap_replicates(R, _mean, rng=3.5), r"rng must be an int seed"),
        (lambda: bootstrap_replicates(R, _mean, n_resamples=10.0), r"positive integer"),
        (lambda: bootstrap_interval(R, _mean, bootstrap_method="BCa"), r"'percentile', 'bca'"),
    ],
)
def test_bad_arguments_raise_parameter_error(call, match):
    with pytest.raises(ParameterError, match=match):
        call()


def test_parameter_error_is_still_a_value_error_and_a_type_error():
    for builtin in (ValueError, TypeError):
        with pytest.raises(builtin):
            normal_interval(0.0, 1.0, confidence_level=95)


def test_bad_rows_stay_validation_errors():
    with pytest.raises(ValidationError, match=r"`weight` must be non-negative"):
        betting_interval([1.0, -1.0], [0.0, 1.0], reward_range=(0, 1))
    with pytest.raises(ValidationError, match=r"`components` must be finite"):
        bootstrap_interval([1.0, np.nan, 2.0], _mean)
    with pytest.raises(ValidationError, match=r"`components` must be numeric"):
        bootstrap_interval(["a", "b"], _mean)
    with pytest.raises(ValidationError, match=r"lies outside its a priori range"):
        hoeffding_interval(1.5, 10, low=0, high=1)


def test_missing_bounds_name_the_method_and_the_argument():
    with pytest.raises(MissingBoundsError, match=r"'betting' needs the a priori reward range"):
        betting_interval(W, R, reward_range=None)
    with pytest.raises(MissingBoundsError, match=r"'bottou' needs the a priori reward range"):
        bottou_interval(0.9, 0.5, 0.4, 0.3, 100, max_weight=10.0, reward_range=None)
    with pytest.raises(
        MissingBoundsError,
        match=r"'empirical_likelihood' needs an a priori bound .* weight_bound=M",
    ):
        empirical_likelihood_interval(W, R, reward_range=(0, 1))


# ---------------------------------------------------------------------------------------------
# glossary: weight_bound is the a priori bound, max_weight= a deprecated spelling of it here
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("function", [empirical_likelihood_estimate, empirical_likelihood_interval])
def test_max_weight_is_a_deprecated_spelling_of_weight_bound(function):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = function(W, R, reward_range=(0, 1), weight_bound=10.0)
    with pytest.warns(DeprecationWarning, match=r"use weight_bound="):
        old = function(W, R, reward_range=(0, 1), max_weight=10.0)
    assert old == new
    with pytest.raises(ParameterError, match=r"once, as `weight_bound=`"):
        function(W, R, reward_range=(0, 1), weight_bound=10.0, max_weight=10.0)


def test_the_deprecation_points_at_the_caller():
    with pytest.warns(DeprecationWarning) as record:
        empirical_likelihood_interval(W, R, reward_range=(0, 1), max_weight=10.0)
    assert record[0].filename == __file__


def test_weights_above_the_bound_are_reported_as_weight_bound():
    with pytest.raises(
        ValidationError,
        match=r"1 weights are above weight_bound=1.75 \(first at "
        r"row 1, weight 2.0\)",
    ):
        empirical_likelihood_interval(W, R, reward_range=(0, 1), weight_bound=1.75)


def test_bottou_max_weight_stays_the_clip_level():
    # the clip level is required for the Bernstein margins (they need bounded clipped weights)
    with pytest.raises(MissingBoundsError, match=r"`max_weight` is required.*clip level"):
        bottou_interval(0.9, 0.5, 0.4, 0.3, 100, max_weight=None, reward_range=(0, 1))


def test_bottou_without_clipping_uses_normal_margins_by_hand():
    # no clip level: wbar = w; the normal margins need no weight bound
    w_hat, w_var, y_hat, y_var, n, level = 0.97, 2.5, 0.41, 1.2, 5000, 0.9
    iv = bottou_interval(
        w_hat,
        w_var,
        y_hat,
        y_var,
        n,
        max_weight=None,
        reward_range=(-1, 1),
        confidence_level=level,
        outer="normal",
    )
    alpha = 1 - level
    eps = stats.norm.isf(alpha / 4) * math.sqrt(y_var / n)
    xi = stats.norm.isf(alpha / 2) * math.sqrt(w_var / n)
    centre = -1 + y_hat
    inner_high = centre + 2 * (1 - min(1.0, max(0.0, w_hat - xi)))
    assert iv.outer_low == pytest.approx(centre - eps, rel=1e-12)
    assert iv.outer_high == pytest.approx(centre + eps, rel=1e-12)
    assert iv.inner_low == pytest.approx(centre, rel=1e-12)
    assert iv.inner_high == pytest.approx(inner_high, rel=1e-12)
    assert iv.high == pytest.approx(min(1.0, inner_high + eps), rel=1e-12)
    # with a clip level large enough not to bind, the normal interval is the same
    clipped = bottou_interval(
        w_hat,
        w_var,
        y_hat,
        y_var,
        n,
        max_weight=1e6,
        reward_range=(-1, 1),
        confidence_level=level,
        outer="normal",
    )
    assert tuple(clipped) == tuple(iv)


# ---------------------------------------------------------------------------------------------
# the bootstrap's resample count
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("level", "fewest"), [(0.95, 81), (0.99, 401), (0.9, 41), (0.5, 9), (0.8, 21), (0.999, 4001)]
)
def test_min_resamples_keeps_each_end_off_the_two_most_extreme_replicates(level, fewest):
    # numpy.quantile puts the alpha quantile of B replicates at 0-based position alpha (B - 1);
    # the rule asks for position >= 2 (the third most extreme replicate or a less extreme one)
    alpha = (1 - level) / 2
    assert min_resamples(level) == fewest
    assert alpha * (fewest - 1) >= 2 - 1e-9
    assert alpha * (fewest - 2) < 2  # and no fewer would do


def test_bootstrap_refuses_too_few_resamples_for_the_level():
    comps = np.linspace(0.0, 1.0, 50)
    bootstrap_interval(comps, _mean, n_resamples=81, rng=0)  # just enough at 0.95
    with pytest.raises(
        ParameterError,
        match=r"`n_resamples` must be at least 81 for a 0.95 "
        r"interval .*got 80",
    ):
        bootstrap_interval(comps, _mean, n_resamples=80, rng=0)
    with pytest.raises(ParameterError, match=r"at least 401 for a 0.99 interval"):
        bootstrap_interval(comps, _mean, n_resamples=400, confidence_level=0.99, rng=0)
    # bca uses the same tails
    with pytest.raises(ParameterError, match=r"at least 81"):
        bootstrap_interval(comps, _mean, n_resamples=10, bootstrap_method="bca", rng=0)
    assert default_n_resamples(0.999) >= min_resamples(0.999)
    assert default_n_resamples(0.95) == DEFAULT_N_RESAMPLES


def test_bootstrap_rng_through_the_one_checker():
    comps = np.linspace(0.0, 1.0, 30)
    gen = np.random.default_rng(5)
    a = bootstrap_replicates(comps, _mean, n_resamples=50, rng=gen)
    b = bootstrap_replicates(comps, _mean, n_resamples=50, rng=np.random.default_rng(5))
    c = bootstrap_replicates(comps, _mean, n_resamples=50, rng=5)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)
    with pytest.raises(ParameterError, match=r"rng must be an int seed"):
        bootstrap_replicates(comps, _mean, rng=-1)


# ---------------------------------------------------------------------------------------------
# import rules for the package (intervals sit below estimators)
# ---------------------------------------------------------------------------------------------
def _ope_imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ope"):
            for alias in node.names:
                yield node.module, alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("ope"):
                    yield alias.name, None


@pytest.mark.parametrize("path", sorted(INTERVALS.glob("*.py")), ids=lambda p: p.name)
def test_intervals_import_no_estimator_and_no_private_name(path):
    module = f"ope.intervals.{path.stem}"
    for target, name in _ope_imports(path):
        assert not target.startswith(("ope.estimators", "ope.results", "ope.estimate")), (
            f"{path.name} imports {target}: intervals must not depend on the estimators"
        )
        if name and name.startswith("_") and target != module:
            assert f"{target}.{name}" in {
                f"ope.intervals.{p.stem}" for p in INTERVALS.glob("_*.py")
            }, f"{path.name} imports the private name {name} from {target}"


# ---------------------------------------------------------------------------------------------
# small typed results
# ---------------------------------------------------------------------------------------------
def test_interval_results_keep_tuple_behaviour_and_give_plain_dicts():
    ci = normal_interval(np.float64(0.5), np.float64(0.1))
    low, high = ci
    assert (low, high) == (ci.low, ci.high) and ci.width == pytest.approx(high - low)
    d = ci.to_dict()
    assert list(d) == ["low", "high"] and all(type(v) is float for v in d.values())
    iv = bottou_interval(0.9, 0.5, 0.4, 0.3, 10_000, max_weight=10.0, reward_range=(0, 1))
    d = iv.to_dict()
    assert list(d) == list(iv._fields) and tuple(d.values()) == tuple(iv)
    assert iv.width == iv.high - iv.low
