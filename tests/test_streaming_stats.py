"""Mergeable statistics: merge equals whole, estimates equal the eager path, clear refusals."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from ope.estimators import DR, IPS, SNIPS, ClippedIPS, logging_value
from ope.exceptions import EstimationError, ParameterError, ValidationError
from ope.streaming import MomentStats
from ope.weights import MOMENT_KEYS

N = 10_000


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    r = rng.binomial(1, 0.3, size=N).astype(float)
    p = rng.choice([0.1, 0.3, 0.6], size=N)
    t = rng.uniform(size=(N, 3)) * np.minimum(1.9 * p, 1.0)[:, None]  # w in [0, 1.9]
    return r, p, t


def _parts(r, p, t, cuts, **kwargs):
    edges = [0, *cuts, len(r)]
    return [
        MomentStats.from_arrays(r[a:b], p[a:b], t[a:b], **kwargs)
        for a, b in zip(edges[:-1], edges[1:])
    ]


def test_merge_of_parts_equals_whole(data):
    r, p, t = data
    whole = MomentStats.from_arrays(r, p, t, max_weight=1.5)
    merged = MomentStats.merge_all(_parts(r, p, t, [1, 2500, 7000], max_weight=1.5))
    assert merged.n == whole.n == N
    assert (merged.min_r, merged.max_r) == (0.0, 1.0)
    assert merged.sum_r == pytest.approx(whole.sum_r, rel=1e-12)
    for key in MOMENT_KEYS:
        np.testing.assert_allclose(merged.moments[key], whole.moments[key], rtol=1e-12)
    # builtin sum and + work, and merging is associative
    a, b, c = _parts(r, p, t, [3000, 6000], max_weight=1.5)
    assert sum([a, b, c]).n == N
    left, right = (a + b) + c, a + (b + c)
    for key in MOMENT_KEYS:
        np.testing.assert_allclose(left.moments[key], right.moments[key], rtol=1e-12)


@pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning")
@pytest.mark.parametrize("est", [IPS(), SNIPS(), ClippedIPS(max_weight=1.5)], ids=lambda e: e.name)
def test_streamed_estimates_equal_eager(data, est):
    r, p, t = data
    merged = MomentStats.merge_all(_parts(r, p, t, [123, 5000], max_weight=1.5))
    streamed = merged.estimates(est, reward_range=(0.0, 1.0))
    for j, res in enumerate(streamed):
        eager = est.estimate(r, p, t[:, j], reward_range=(0.0, 1.0))
        assert res.estimator == eager.estimator
        assert res.value == pytest.approx(eager.value, rel=1e-12)
        assert res.std_error == pytest.approx(eager.std_error, rel=1e-12)
        assert res.ess == pytest.approx(eager.ess, rel=1e-12)
        assert res.notes == eager.notes
        for method in ("normal", "t"):
            np.testing.assert_allclose(res.ci(0.9, method), eager.ci(0.9, method), rtol=1e-12)
        bounded = {
            "ips": {"hoeffding": 1.9, "bernstein": 1.9},
            "clipped_ips": {"hoeffding": None, "bernstein": None, "bottou": None},
        }
        for method, bound in bounded.get(est.name, {}).items():
            np.testing.assert_allclose(
                res.ci(method=method, weight_bound=bound),
                eager.ci(method=method, weight_bound=bound),
                rtol=1e-12,
            )


@pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning")
def test_names_levels_and_strings(data):
    r, p, t = data
    stats = MomentStats.from_arrays(r, p, t, max_weight=2.0, names=["a", "b", "c"])
    res = stats.estimates("clipped_ips", confidence_level=0.8)
    assert [e.policy for e in res] == ["a", "b", "c"]
    assert res[0].estimator == "clipped_ips" and res[0].confidence_level == 0.8
    assert stats.to_estimates("snips")[1].value == pytest.approx(
        SNIPS().estimate(r, p, t[:, 1]).value, rel=1e-12
    )


@pytest.mark.parametrize(
    "names, match",
    [
        (["", "b", "c"], r"`names\[0\]` is blank \(''\)"),
        (["a", "  ", "c"], r"`names\[1\]` is blank"),
        (["a", "b", 3], r"`names` must be a list of names \(strings\); its item 2 is 3"),
    ],
)
def test_policy_names_are_non_blank_text(data, names, match):
    r, p, t = data
    with pytest.raises(ParameterError, match=match):
        MomentStats.from_arrays(r[:10], p[:10], t[:10], names=names)
    with pytest.raises(ParameterError, match=match):
        MomentStats.from_outcomes([r[:10]], p[:10], t[:10], names=names)
    columns = MomentStats.from_arrays(r[:10], p[:10], t[:10]).to_columns()
    with pytest.raises(ParameterError, match=match):
        MomentStats.from_columns(columns, names=names)


@pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning")
def test_refusals(data):
    r, p, t = data
    stats = MomentStats.from_arrays(r, p, t, max_weight=2.0)
    res = stats.estimates("ips", reward_range=(0, 1))[0]
    with pytest.raises(
        EstimationError,
        match=r"'bootstrap' does not apply to the 'ips' estimate \(this estimate has no rows: it was computed from merged summary statistics",
    ):
        res.ci(method="bootstrap")
    with pytest.raises(
        EstimationError, match=r"available methods: normal, t, hoeffding, bernstein\."
    ):
        res.ci(method="betting")
    with pytest.raises(EstimationError, match=r"per-row influence terms need the rows"):
        res.influence()
    with pytest.raises(
        EstimationError,
        match=r"merged statistics support the ips, clipped_ips and snips estimators; got 'dr'",
    ):
        stats.estimates(DR())
    with pytest.raises(
        ParameterError,
        match=r"ClippedIPS\(max_weight=3.0\) needs statistics accumulated with the same clip level; these have max_weight=2.0",
    ):
        stats.estimates(ClippedIPS(max_weight=3.0))
    with pytest.raises(
        ValidationError, match=r"rewards span \[0, 1\], outside reward_range=\(0, 0.5\)"
    ):
        stats.estimates("ips", reward_range=(0.0, 0.5))
    with pytest.raises(ValidationError, match=r"weight_bound=1 is not a bound on these weights"):
        res.ci(method="hoeffding", weight_bound=1.0)


def test_merge_refusals(data):
    r, p, t = data
    a = MomentStats.from_arrays(r[:10], p[:10], t[:10])
    with pytest.raises(ValidationError, match=r"cannot merge statistics of 3 and 1 policies"):
        a.merge(MomentStats.from_arrays(r[:10], p[:10], t[:10, 0]))
    with pytest.raises(
        ValidationError, match=r"clipped at different levels: max_weight=None vs 2.0"
    ):
        a.merge(MomentStats.from_arrays(r[:10], p[:10], t[:10], max_weight=2.0))
    named = MomentStats.from_arrays(r[:10], p[:10], t[:10], names=["a", "b", "c"])
    with pytest.raises(ValidationError, match=r"cannot merge statistics of different policies"):
        named.merge(MomentStats.from_arrays(r[:10], p[:10], t[:10], names=["a", "b", "d"]))
    with pytest.raises(ValueError, match=r"`parts` is empty"):
        MomentStats.merge_all([])
    # too few rows is a fact of the data (exit 65 from the CLI), with what to pass instead
    with pytest.raises(
        ValidationError, match=r"the logs hold 1 usable row\(s\).*needs at least 2.*every logged"
    ):
        MomentStats.from_arrays(r[:1], p[:1], t[:1]).estimates("ips")


def test_empty_batches_merge_as_identity(data):
    r, p, t = data
    empty = MomentStats.from_arrays(r[:0], p[:0], t[:0])
    part = MomentStats.from_arrays(r[:100], p[:100], t[:100])
    both = empty.merge(part)
    for key in MOMENT_KEYS:
        np.testing.assert_array_equal(both.moments[key], part.moments[key])
    assert (both.min_r, both.max_r) == (part.min_r, part.max_r)


def test_statistics_pickle_for_distributed_use(data):
    r, p, t = data
    stats = MomentStats.from_arrays(r[:100], p[:100], t[:100])
    back = pickle.loads(pickle.dumps(stats))
    np.testing.assert_array_equal(back.moments["sum_wr"], stats.moments["sum_wr"])


def test_logging_estimate_equals_eager(data):
    r, p, t = data
    merged = MomentStats.merge_all(_parts(r, p, t, [4000]))
    res = merged.logging_estimate(reward_range=(0.0, 1.0), confidence_level=0.9)
    eager = logging_value(r, reward_range=(0.0, 1.0))
    assert res.estimator == "logging" and res.confidence_level == 0.9
    assert res.value == pytest.approx(eager.value, rel=1e-12)
    assert res.std_error == pytest.approx(eager.std_error, rel=1e-12)
    for method in ("hoeffding", "bernstein"):
        np.testing.assert_allclose(res.ci(method=method), eager.ci(method=method), rtol=1e-12)
    with pytest.raises(
        EstimationError, match=r"available methods: normal, t, hoeffding, bernstein\."
    ):
        res.ci(method="betting")


# ---------------------------------------------------------------------------------------------
# numerics: rewards far from zero (a one-pass sum of squares would cancel catastrophically)
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def offset_data():
    rng = np.random.default_rng(7)
    n = 40_000
    r = 1e6 + rng.normal(size=n)  # mean 1e6, sd 1: E[r^2] / Var(r) = 1e12
    p = rng.uniform(0.2, 0.8, size=n)
    t = np.clip(p[:, None] + rng.normal(0.0, 0.1, size=(n, 2)), 0.0, 1.0)
    return r, p, t


@pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning")
@pytest.mark.parametrize("est", [IPS(), SNIPS(), ClippedIPS(max_weight=1.5)], ids=lambda e: e.name)
def test_streamed_std_error_with_large_reward_mean_equals_eager(offset_data, est):
    r, p, t = offset_data
    merged = MomentStats.merge_all(_parts(r, p, t, [1, 9_000, 25_000], max_weight=1.5))
    for j, res in enumerate(merged.estimates(est)):
        eager = est.estimate(r, p, t[:, j])
        assert res.value == pytest.approx(eager.value, rel=1e-12)
        assert res.std_error == pytest.approx(eager.std_error, rel=1e-9)


def test_streamed_logging_std_error_with_large_reward_mean_equals_eager(offset_data):
    r, p, t = offset_data
    merged = MomentStats.merge_all(_parts(r, p, t, [1, 9_000, 25_000]))
    res, eager = merged.logging_estimate(), logging_value(r)
    assert res.value == pytest.approx(eager.value, rel=1e-14)
    assert res.std_error == pytest.approx(eager.std_error, rel=1e-9)


def test_merge_of_batches_with_very_different_reward_levels(offset_data):
    # batches whose own reward means differ by 1e6: the shifted statistics must re-centre
    r, p, t = offset_data
    r2 = np.where(np.arange(r.size) < 20_000, r - 1e6, r)
    merged = MomentStats.merge_all(_parts(r2, p, t, [20_000]))
    for est in (IPS(), SNIPS()):
        eager = est.estimate(r2, p, t[:, 0])
        res = merged.estimates(est)[0]
        assert res.value == pytest.approx(eager.value, rel=1e-12)
        assert res.std_error == pytest.approx(eager.std_error, rel=1e-9)
    assert merged.logging_estimate().std_error == pytest.approx(
        logging_value(r2).std_error, rel=1e-12
    )


# ---------------------------------------------------------------------------------------------
# the fast kernel: block size, partial blocks, float32, validation messages
# ---------------------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning")
def test_block_size_does_not_change_the_estimates(data):
    r, p, t = data
    whole = MomentStats.from_arrays(r, p, t, max_weight=1.5)
    small = MomentStats.from_arrays(r, p, t, max_weight=1.5, chunk_size=7)  # 1429 blocks
    assert (small.min_r, small.max_r) == (whole.min_r, whole.max_r) == (0.0, 1.0)
    for key in MOMENT_KEYS:
        np.testing.assert_allclose(small.moments[key], whole.moments[key], rtol=1e-12)
    for est in ("ips", "clipped_ips", "snips"):
        for a, b in zip(small.estimates(est), whole.estimates(est)):
            assert a.value == pytest.approx(b.value, rel=1e-12)
            assert a.std_error == pytest.approx(b.std_error, rel=1e-12)


def test_float32_logs_give_the_float64_statistics_of_their_values(data):
    r, p, t = (x.astype(np.float32) for x in data)
    s32 = MomentStats.from_arrays(r, p, t, max_weight=1.5)
    s64 = MomentStats.from_arrays(
        r.astype(np.float64), p.astype(np.float64), t.astype(np.float64), max_weight=1.5
    )
    for key in MOMENT_KEYS:
        assert s32.moments[key].dtype == np.float64
        np.testing.assert_array_equal(s32.moments[key], s64.moments[key])


@pytest.mark.parametrize(
    ("column", "row", "value", "match"),
    [
        (
            "reward",
            4321,
            np.nan,
            r"`reward` must be finite; 1 rows are NaN or infinite \(first at row 4321\)",
        ),
        (
            "reward",
            17,
            -np.inf,
            r"`reward` must be finite; 1 rows are NaN or infinite \(first at row 17\)",
        ),
        (
            "target",
            9000,
            np.nan,
            r"`target_propensity` must be finite; 1 rows are NaN or infinite \(first at row 9000\)",
        ),
        (
            "target",
            2,
            1.0 + 1e-12,
            r"`target_propensity` must be in \[0, 1\].*1 rows are not \(first at row 2\)",
        ),
        (
            "propensity",
            5000,
            -0.5,
            r"`logging_propensity` must be in \(0, 1\]; 1 rows are not \(first at row 5000: -0\.5\)",
        ),
    ],
)
def test_from_arrays_validation_messages(data, column, row, value, match):
    r, p, t = (x.copy() for x in data)
    if column == "reward":
        r[row] = value
    elif column == "target":
        t[row, 1] = value
    else:
        p[row] = value
    with pytest.raises(ValidationError, match=match):
        MomentStats.from_arrays(r, p, t, max_weight=1.5)


def test_merge_refuses_names_on_one_side_and_other_sampling_weights(data):
    r, p, t = data
    named = MomentStats.from_arrays(r[:10], p[:10], t[:10], names=["a", "b", "c"])
    unnamed = MomentStats.from_arrays(r[10:20], p[10:20], t[10:20, ::-1])
    for left, right in ((named, unnamed), (unnamed, named)):  # either side: by position
        with pytest.raises(
            ValidationError, match=r"no names: they would be combined by position.*same names"
        ):
            left.merge(right)
    unnamed.merge(MomentStats.from_arrays(r[:10], p[:10], t[:10]))  # neither side: by position

    def weighted(rows, weight_name):
        s = np.full(rows.stop - rows.start, 2.0)
        return MomentStats.from_arrays(
            r[rows], p[rows], t[rows], sampling_weight=s, weight_name=weight_name
        )

    with pytest.raises(
        ValidationError, match=r"different sampling weights: weight_name='w1' vs 'w2'"
    ):
        weighted(slice(0, 10), "w1").merge(weighted(slice(10, 20), "w2"))
    assert weighted(slice(0, 10), "w1").merge(weighted(slice(10, 20), "w1")).n == 20


def _columns_with(stats, key, index, value):
    columns = {k: v.copy() for k, v in stats.to_columns().items()}
    columns[key][index] = value
    return columns


@pytest.mark.parametrize(
    ("clip", "key", "index", "value", "match"),
    [
        (None, "head", 3, 1.0, r"clip level max_weight=1, which the moments disagree with"),
        (1.0, "head", 3, 0.5, r"clip level max_weight=0.5, which the moments disagree with"),
        (1.0, "head", 3, np.nan, r"no clip level \(NaN\) but the moments count \d+ clipped"),
        (1.0, "head", 3, -1.0, r"max_weight=-1.0; a positive finite number"),
        (None, "head", 0, 10**6, r"gives n=1,000,000 rows but the moments summarize 200"),
        (None, "head", 0, 2.5, r"gives 2.5 rows; not a count"),
        (None, "head", 4, np.nan, r"gives nan policies; not a count"),
        (None, "head", 4, 2.0, r"gives 2 policies but `columns\['moments.max_w'\]` holds 3"),
        (None, "head", 5, 0.5, r"flags sampling weights with 0.5"),
    ],
)
def test_from_columns_refuses_a_head_that_disagrees_with_the_moments(
    data, clip, key, index, value, match
):
    r, p, t = data
    stats = MomentStats.from_arrays(r[:200], p[:200] / 3, t[:200], max_weight=clip)
    with pytest.raises(ParameterError, match=match + r".*one MomentStats.to_columns\(\)"):
        MomentStats.from_columns(_columns_with(stats, key, index, value))
    back = MomentStats.from_columns(stats.to_columns())  # the arrays as written
    assert (back.n, back.max_weight) == (200, clip)


def test_from_columns_refuses_weighted_arrays_of_other_rows_or_policies(data):
    r, p, t = data
    stats = MomentStats.from_arrays(r[:200], p[:200], t[:200], sampling_weight=np.full(200, 2.0))
    for index, value in ((0, 5.0), (4, 1.0), (0, np.nan)):
        with pytest.raises(ParameterError, match=r"columns\['weighted.head'\]"):
            MomentStats.from_columns(_columns_with(stats, "weighted.head", index, value))
