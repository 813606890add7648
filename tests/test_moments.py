"""One moment kernel, one set of rules, one validation layer, one result contract.

The weighting estimates (IPS, clipped IPS, SNIPS, the logging value) are the same computation
eager, in ``estimate_many`` and from merged ``MomentStats``; the model-based ones accumulate
through ``ope.moments.component_moments``; the warning rules are those of ``ope._thresholds``;
bad arguments raise ``ParameterError`` when an object is built; ``Estimate`` is a ``Result``.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import ope.estimators as oe
from ope._thresholds import MEAN_WEIGHT_TOLERANCE, mean_weight_note
from ope.estimators import (
    DM,
    DR,
    IPS,
    SNDR,
    SNIPS,
    ClippedIPS,
    DRos,
    SwitchDR,
    estimate_many,
    get_estimator,
    logging_value,
)
from ope.exceptions import OverlapWarning, ParameterError
from ope.moments import centered_moments, component_moments
from ope.results import (
    DEFAULT_CI_METHOD,
    DEFAULT_CONFIDENCE_LEVEL,
    Result,
    make_estimate,
)
from ope.streaming import MomentStats
from ope.weights import MOMENT_KEYS


def _rows(n=5000, n_pol=3, seed=0):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.05, 1.0, n)
    t = rng.uniform(0.0, 1.0, (n, n_pol))
    r = rng.normal(3.0, 1.0, n)
    return r, p, t


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


# --------------------------------------------------------------------------------------------
# 1. one kernel
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("est", [IPS(), SNIPS(), ClippedIPS(max_weight=3.0)], ids=lambda e: e.name)
def test_eager_estimate_many_and_moment_stats_are_the_same_computation(est):
    r, p, t = _rows()
    clip = est.clip_level
    stats = _quiet(MomentStats.from_arrays(r, p, t, max_weight=clip).estimates, est)
    many = _quiet(estimate_many, est, reward=r, logging_propensity=p, target_propensity=t)
    for j in range(t.shape[1]):
        eager = _quiet(est.estimate, r, p, t[:, j])
        for other in (many[j], stats[j]):
            for field in ("value", "std_error", "ess", "ci_low", "ci_high"):
                a, b = getattr(eager, field), getattr(other, field)
                assert b == pytest.approx(a, rel=1e-15, abs=0.0), field
            assert other.notes == eager.notes


def test_logging_value_is_the_moment_stats_logging_estimate():
    r, p, t = _rows(n=300)
    eager = logging_value(r, reward_range=(-10.0, 20.0))
    streamed = MomentStats.from_arrays(r, p, t).logging_estimate(reward_range=(-10.0, 20.0))
    assert streamed.value == pytest.approx(eager.value, rel=1e-15)
    assert streamed.std_error == pytest.approx(eager.std_error, rel=1e-15)
    assert streamed.ci(method="bernstein") == pytest.approx(eager.ci(method="bernstein"), rel=1e-15)


def test_an_estimate_does_not_depend_on_the_other_policies_or_estimators_requested():
    r, p, t = _rows(n=2000, n_pol=4)
    alone = _quiet(estimate_many, "ips", reward=r, logging_propensity=p, target_propensity=t[:, :1])
    together = _quiet(estimate_many, "ips", reward=r, logging_propensity=p, target_propensity=t)
    assert alone[0].value == together[0].value
    assert alone[0].std_error == together[0].std_error


def test_evaluate_gives_identical_ips_whatever_else_is_requested():
    pd = pytest.importorskip("pandas")
    import ope

    r, p, t = _rows(n=3000, n_pol=1)
    df = pd.DataFrame(
        {"action": np.zeros(r.size, dtype=int), "reward": r, "propensity": p, "target__a": t[:, 0]}
    )
    one = _quiet(ope.evaluate, df, estimators=("ips",)).table()
    many = _quiet(
        ope.evaluate, df, estimators=("ips", "snips", "clipped_ips"), max_weight=2.0
    ).table()
    a, b = one[one.estimator == "ips"].iloc[0], many[many.estimator == "ips"].iloc[0]
    assert (a.value, a.std_error, a.ess) == (b.value, b.std_error, b.ess)


def test_moment_stats_sums_are_the_kernels_raw_sums():
    r, p, t = _rows(n=1000)
    stats = MomentStats.from_arrays(r, p, t, max_weight=2.0)
    m = {**stats.moments, "sum_r2": stats.sum_r2}
    w = t / p[:, None]
    cw = np.minimum(w, 2.0)
    np.testing.assert_allclose(m["sum_w2r"], (w * w * r[:, None]).sum(0), rtol=1e-12)
    np.testing.assert_allclose(m["sum_cwr"], (cw * r[:, None]).sum(0), rtol=1e-12)
    assert float(m["sum_r2"]) == pytest.approx(float((r * r).sum()), rel=1e-12)
    kernel = centered_moments(r, p, t, max_weight=2.0)
    for key in MOMENT_KEYS:
        np.testing.assert_array_equal(m[key], [kernel.raw_sums(j)[key] for j in range(3)])


@pytest.mark.parametrize(
    "est", [DM(), DR(), SNDR(), SwitchDR(tau=3.0), DRos(shrinkage=2.0)], ids=lambda e: e.name
)
def test_model_based_estimators_accumulate_through_component_moments(est):
    r, p, t = _rows(n=500, n_pol=1)
    rng = np.random.default_rng(3)
    ql, qt = rng.normal(3.0, 1.0, r.size), rng.normal(3.0, 1.0, r.size)
    args = (
        {"q_target": qt}
        if isinstance(est, DM)
        else {"logging_propensity": p, "target_propensity": t[:, 0], "q_logged": ql, "q_target": qt}
    )
    res = _quiet(est.estimate, r, **args)
    psi = res.influence()
    assert res.std_error == pytest.approx(np.std(psi, ddof=1) / math.sqrt(r.size), rel=1e-12)
    a = res._source.components()
    cm = component_moments(
        lambda sl: (a[sl, :, None], None, None), r.size, est._gradient, chunk_size=64
    )
    assert float(est._statistic(cm.means[:, 0])) == pytest.approx(res.value, rel=1e-12)


def test_one_plain_component_takes_the_short_path_with_the_general_numbers():
    """One component whose gradient is 1 (DR and its kin) is centred without the gradient
    product, and raw weights used as they are are summed once: the numbers of the general
    path (gradient 2 scales the variance by 4 and leaves the skewness)."""
    rng = np.random.default_rng(5)
    n, n_pol = 1_000, 3
    a = rng.lognormal(0.0, 1.0, (n, 1, n_pol))
    w = rng.exponential(1.0, (n, n_pol))
    same = component_moments(
        lambda sl: (a[sl], w[sl], w[sl]), n, lambda m: np.ones(1), chunk_size=128
    )
    apart = component_moments(
        lambda sl: (a[sl], w[sl], w[sl].copy()), n, lambda m: np.full(1, 2.0), chunk_size=128
    )
    np.testing.assert_array_equal(same.means, apart.means)
    np.testing.assert_allclose(4.0 * same.psi_var, apart.psi_var, rtol=1e-13)
    np.testing.assert_allclose(same.psi_skew, apart.psi_skew, rtol=1e-12)
    np.testing.assert_allclose(same.weight_sums, apart.weight_sums, rtol=1e-13)
    d = a[:, 0, :] - a[:, 0, :].mean(0)
    np.testing.assert_allclose(same.psi_var, (d * d).sum(0) / (n - 1), rtol=1e-12)


def test_a_degenerate_snips_has_standard_error_zero_in_any_row_order():
    # one weighted row: every influence term is 0; the centred form must not return rounding noise
    r = np.array([0.0, 0.375, 0.375, 0.375, 0.375])
    t = np.array([0.5, 0.0, 0.0, 0.0, 0.0])
    for order in (np.arange(5), np.array([4, 2, 0, 1, 3])):
        res = _quiet(SNIPS().estimate, r[order], np.ones(5), t[order])
        assert res.std_error == 0.0


# --------------------------------------------------------------------------------------------
# 2. one set of rules
# --------------------------------------------------------------------------------------------
def _mean_weight_logs(center, n=40_000):
    # weights 2 t with mean 2 * center, spread sd ~ 0.314: z = (mean - 1) / (sd / sqrt(n))
    t = center + 0.272 * np.linspace(-1.0, 1.0, n)
    p = np.full(n, 0.5)
    r = np.tile([0.0, 1.0], n // 2)
    return r, p, t


def test_the_planted_mean_weight_case_gets_the_same_note_from_every_entry_point():
    r, p, t = _mean_weight_logs(0.5055)
    w = t / p
    z = (w.mean() - 1.0) / (w.std(ddof=1) / math.sqrt(w.size))
    assert w.mean() == pytest.approx(1.011) and 6.5 < z < 7.5
    expected = mean_weight_note(float(w.mean()), z)
    notes = []
    for est in (IPS(), SNIPS(), ClippedIPS(max_weight=10.0)):
        with pytest.warns(OverlapWarning, match=r"mean importance weight is 1.011, 7"):
            notes.append(est.estimate(r, p, t).notes)
        notes.append(
            _quiet(
                estimate_many, est, reward=r, logging_propensity=p, target_propensity=t[:, None]
            )[0].notes
        )
        stats = MomentStats.from_arrays(r, p, t, max_weight=est.clip_level)
        notes.append(_quiet(stats.estimates, est)[0].notes)
    assert all(got == (expected,) for got in notes), notes


def test_a_small_mean_weight_deviation_is_within_tolerance_even_when_z_is_large():
    r, p, t = _mean_weight_logs(0.5 * (1.0 + MEAN_WEIGHT_TOLERANCE / 2), n=400_000)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = IPS().estimate(r, p, t)
    assert res.notes == ()


def test_thresholds_are_defined_once_and_reexported():
    import ope._thresholds as th

    for name in ("ESS_RATIO_WARN", "MEAN_WEIGHT_Z", "SMALL_SAMPLE_ROWS", "MIN_ROWS"):
        assert getattr(oe, name) is getattr(th, name)


# --------------------------------------------------------------------------------------------
# 3. one validation layer: bad arguments are refused when the object is built
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("factory", "match"),
    [
        (lambda: ClippedIPS(max_weight="10"), r"`max_weight` must be a number; got '10'"),
        (lambda: ClippedIPS(max_weight=True), r"`max_weight` must be a number; got True"),
        (lambda: ClippedIPS(max_weight=None), r"ClippedIPS needs `max_weight`"),
        (lambda: ClippedIPS(max_weight=math.inf), r"`max_weight` must be a positive finite"),
        (lambda: SwitchDR(tau="3"), r"`tau` must be a number; got '3'"),
        (lambda: SwitchDR(tau=0.0), r"SwitchDR: `tau` must be a positive finite number"),
        (lambda: DRos(shrinkage=False), r"`shrinkage` must be a number; got False"),
        (lambda: DRos(shrinkage=-2), r"DRos: `shrinkage` must be a positive finite number"),
        (
            lambda: get_estimator("ipw"),
            r"unknown estimator 'ipw'; choose one of dm, ips, clipped_ips, snips, dr, sndr, switch_dr, dros",
        ),
        (lambda: get_estimator("switch_dr"), r"estimator 'switch_dr' needs tau="),
        (lambda: estimate_many(42, reward=np.ones(3)), r"`estimator` must be an ope estimator"),
    ],
)
def test_bad_arguments_are_parameter_errors(factory, match):
    with pytest.raises(ParameterError, match=match):
        factory()


def test_policy_names_must_be_distinct():
    r, p, t = _rows(n=100, n_pol=2)
    with pytest.raises(
        ParameterError, match=r"`names` must be distinct.*'a' appears more than once"
    ):
        estimate_many("ips", reward=r, logging_propensity=p, target_propensity=t, names=["a", "a"])
    with pytest.raises(ParameterError, match=r"`names` must be distinct"):
        MomentStats.from_arrays(r, p, t, names=["a", "a"])


@pytest.mark.parametrize(
    ("reward_range", "match"),
    [
        ((1.0, 0.0), r"`reward_range` must be finite with low < high"),
        ("01", r"`reward_range` must be a pair"),
        ((0.0, 1.0, 2.0), r"got 3 values"),
    ],
)
def test_reward_range_is_checked_as_an_argument_everywhere(reward_range, match):
    r, p, t = _rows(n=50, n_pol=1)
    calls = [
        lambda: IPS().estimate(r, p, t[:, 0], reward_range=reward_range),
        lambda: logging_value(r, reward_range=reward_range),
        lambda: MomentStats.from_arrays(r, p, t).estimates("ips", reward_range=reward_range),
    ]
    for call in calls:
        with pytest.raises(ParameterError, match=match):
            _quiet(call)


def test_moment_stats_argument_errors():
    r, p, t = _rows(n=50, n_pol=1)
    s = MomentStats.from_arrays(r, p, t)
    with pytest.raises(ParameterError, match=r"can only merge MomentStats"):
        s.merge(3)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match=r"`parts` is empty"):
        MomentStats.merge_all([])
    with pytest.raises(ParameterError, match=r"`confidence_level` must be in \(0, 1\)"):
        s.estimates("ips", confidence_level=95)


# --------------------------------------------------------------------------------------------
# 4. glossary: weight_bound is the a priori bound, max_weight the clip level
# --------------------------------------------------------------------------------------------
def test_ci_max_weight_is_a_deprecated_alias_of_weight_bound():
    r, p, t = _rows(n=400, n_pol=1)
    r = (r > 3.0).astype(float)
    res = _quiet(IPS().estimate, r, p, t[:, 0], reward_range=(0.0, 1.0))
    new = res.ci(method="bernstein", weight_bound=20.0)
    with pytest.warns(
        DeprecationWarning,
        match=r"`max_weight=` of Estimate.ci/with_ci is deprecated.*weight_bound=",
    ):
        old = res.ci(method="bernstein", max_weight=20.0)
    assert old == new
    with pytest.warns(DeprecationWarning, match=r"use|weight_bound"):
        moved = res.with_ci(ci="hoeffding", max_weight=20.0)
    assert (moved.ci_low, moved.ci_high) == tuple(res.ci(method="hoeffding", weight_bound=20.0))
    with pytest.raises(ParameterError, match=r"pass the a priori weight bound once"):
        _quiet(res.ci, method="bernstein", weight_bound=20.0, max_weight=20.0)


# --------------------------------------------------------------------------------------------
# 5. the result contract
# --------------------------------------------------------------------------------------------
def test_estimate_is_a_result_rendered_by_the_one_renderer():
    res = _quiet(
        IPS().estimate, np.array([1.0, 0.0, 1.0]), np.full(3, 0.5), np.array([0.5, 0.5, 1.0])
    )
    res = make_estimate(
        estimator="ips",
        value=res.value,
        std_error=res.std_error,
        n=res.n,
        ess=res.ess,
        notes=("<script>x</script>",),
        policy="<b>p</b>",
    )
    assert isinstance(res, Result) and isinstance(res.notes, tuple)
    page = res._repr_html_()
    assert "<script>" not in page and "&lt;script&gt;" in page and "&lt;b&gt;p&lt;/b&gt;" in page
    text = res.summary()
    assert text.startswith("Estimate (ips)") and "[1] <script>x</script>" in text
    assert sorted(res.to_dict()) == sorted(
        [
            "estimator",
            "policy",
            "value",
            "std_error",
            "ci_low",
            "ci_high",
            "confidence_level",
            "ci_method",
            "n",
            "ess",
            "target",
            "notes",
        ]
    )


def test_result_defaults():
    assert (DEFAULT_CONFIDENCE_LEVEL, DEFAULT_CI_METHOD) == (0.95, "normal")
