"""ope.selection: off-policy selection metrics against hand-computed values and exact truth."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import ope
from ope.exceptions import ParameterError, ValidationError
from ope.selection import (
    SELECTION_COLUMNS,
    ApprovalErrorRates,
    RankCorrelation,
    approval_error_rates,
    rank_correlation,
    selection_regret,
    selection_report,
)
from ope.simulate import ContextualBandit


def _regret_by_enumeration(v, s, k):
    """Reference: average over every tie-breaking order of the best true value in the top k."""
    v, s = np.asarray(v, float), np.asarray(s, float)
    outcomes = []
    for order in itertools.permutations(range(v.size)):  # all tie-breakings (tiny P only)
        ranked = sorted(order, key=lambda i: -s[i])  # stable: ties in the order of `order`
        outcomes.append(v[ranked[:k]].max())
    return v.max() - float(np.mean(outcomes))


# ---------------------------------------------------------------------------- regret
@pytest.mark.parametrize(
    ("v", "s", "k", "expected"),
    [
        ([1.0, 2.0, 3.0], [0.0, 0.0, 1.0], 1, 0.0),
        ([1.0, 2.0, 3.0], [0.9, 0.1, 0.5], 1, 2.0),
        ([1.0, 2.0, 3.0], [0.9, 0.1, 0.5], 2, 0.0),
        ([1.0, 2.0, 3.0], [1.0, 1.0, 0.0], 1, 1.5),  # tie at the top: (1 + 2) / 2 chosen
        ([1.0, 2.0, 3.0], [1.0, 1.0, 0.0], 2, 1.0),  # both tied chosen
        ([1.0, 2.0, 3.0], [1.0, 0.0, 0.0], 2, 0.5),  # 1 sure + one of {2, 3}: E max = 2.5
        ([1.0, 2.0, 3.0, 4.0], [5.0, 3.0, 3.0, 3.0], 2, 1.0),  # E max(1, one of 2,3,4) = 3
        ([1.0, 2.0, 3.0, 4.0], [5.0, 3.0, 3.0, 3.0], 3, 1.0 / 3.0),  # two of {2,3,4}: 11/3
        ([1.0, 2.0, 3.0], [7.0, 7.0, 7.0], 3, 0.0),
        ([2.0, 2.0, 2.0], [3.0, 1.0, 2.0], 1, 0.0),
    ],
)
def test_selection_regret_by_hand(v, s, k, expected):
    assert selection_regret(v, s, k=k) == pytest.approx(expected, abs=1e-15)
    assert selection_regret(v, s, k=k) == pytest.approx(_regret_by_enumeration(v, s, k))


def test_selection_regret_matches_enumeration_on_random_ties():
    rng = np.random.default_rng(0)
    for _ in range(30):
        v = rng.integers(0, 4, size=6).astype(float)  # ties in the truth too
        s = rng.integers(0, 3, size=6).astype(float)  # many ties in the scores
        k = int(rng.integers(1, 7))
        assert selection_regret(v, s, k=k) == pytest.approx(
            _regret_by_enumeration(v, s, k), abs=1e-12
        )


def test_selection_regret_normalized_and_many_candidates():
    v = np.arange(5.0)
    assert selection_regret(v, -v, normalize=True) == 1.0
    assert selection_regret(v, -v, k=4, normalize=True) == pytest.approx(0.25)
    assert selection_regret(np.ones(4), [0, 1, 2, 3], normalize=True) == 0.0
    # 100,000 candidates with one tie group of 50,000 at the top
    rng = np.random.default_rng(1)
    v = rng.standard_normal(100_000)
    s = np.where(np.arange(100_000) < 50_000, 1.0, 0.0)
    expected = v.max() - v[:50_000].mean()  # k = 1: one of the tied at random
    assert selection_regret(v, s) == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"k": 4}, ParameterError, r"at most the number of candidates \(3\); got k=4"),
        ({"k": 0}, ParameterError, "positive integer"),
        ({"k": 1.0}, ParameterError, "positive integer"),
        ({"k": True}, ParameterError, "positive integer"),
    ],
)
def test_selection_regret_refuses_bad_k(kwargs, error, match):
    with pytest.raises(error, match=match):
        selection_regret([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], **kwargs)


def test_selection_regret_refuses_bad_arrays():
    with pytest.raises(ValidationError, match="3 candidates but `scores` has 2"):
        selection_regret([1.0, 2.0, 3.0], [1.0, 2.0])
    with pytest.raises(ValidationError, match="`scores` must be finite"):
        selection_regret([1.0, 2.0], [1.0, math.nan])
    with pytest.raises(ValidationError, match="no candidates"):
        selection_regret([], [])
    with pytest.raises(ValidationError, match="shape"):
        selection_regret([[1.0, 2.0]], [[1.0, 2.0]])


def test_selection_regret_near_the_float64_limit():
    v = [-1e308, 1e308, 0.0]
    # normalized: computed in units of a power of two, 1e308 / 2e308 by hand
    assert selection_regret(v, [0.2, 0.4, 0.6], normalize=True) == 0.5
    assert selection_regret(v, [0.6, 0.4, 0.2], normalize=True) == 1.0
    assert selection_regret(v, [0.2, 0.6, 0.4], normalize=True) == 0.0
    # raw: 1e308 is representable, the regret 2e308 is not
    assert selection_regret(v, [0.2, 0.4, 0.6]) == 1e308
    with pytest.raises(ValidationError, match=r"regret overflows float64.*Rescale `true_values`"):
        selection_regret(v, [0.6, 0.4, 0.2])
    rc = rank_correlation(v, [0.2, 0.4, 0.6])  # no overflow warning from the range
    assert rc == pytest.approx((0.5, 1 / 3))


@pytest.mark.parametrize("normalize", ["no", 1, None, np.float64(0.0)])
def test_selection_regret_normalize_is_a_flag(normalize):
    with pytest.raises(ParameterError, match="`normalize` must be True or False"):
        selection_regret([0.1, 0.5, 0.3], [0.2, 0.4, 0.6], normalize=normalize)


def test_labelled_candidates_are_paired_by_label():
    tv = pd.Series([0.1, 0.5, 0.3], index=["a", "b", "c"])
    sc = pd.Series([0.2, 0.4, 0.6], index=["c", "b", "a"])  # by label a=0.6 is the top score
    assert selection_regret(tv, sc) == pytest.approx(0.5 - 0.1)
    assert rank_correlation(tv, sc) == pytest.approx((-0.5, -1 / 3))
    as_dict = {"c": 0.2, "b": 0.4, "a": 0.6}
    assert selection_regret(tv, as_dict) == selection_regret(tv.to_dict(), as_dict)
    assert selection_regret(tv.to_dict(), as_dict) == pytest.approx(0.4)
    # plain arrays stay positional (a Series with a plain array too)
    assert selection_regret(tv, sc.to_numpy()) == pytest.approx(0.5 - 0.3)


@pytest.mark.parametrize(
    "scores, match",
    [
        (pd.Series([1.0, 2.0, 3.0], index=["a", "b", "d"]), r"'c' only in `true_values`; 'd' only"),
        ({"a": 1.0, "b": 2.0}, r"'c' only in `true_values`.*reindex"),
        (pd.Series([1.0, 2.0, 3.0], index=["a", "a", "b"]), "`scores` repeats the candidate"),
    ],
)
def test_labelled_candidates_must_match(scores, match):
    tv = pd.Series([0.1, 0.5, 0.3], index=["a", "b", "c"])
    with pytest.raises(ValidationError, match=match):
        selection_regret(tv, scores)
    with pytest.raises(ValidationError, match=match):
        rank_correlation(tv, scores)


# ---------------------------------------------------------------------------- correlation
def test_rank_correlation_by_hand():
    assert rank_correlation([1, 2, 3, 4], [10, 20, 30, 40]) == RankCorrelation(1.0, 1.0)
    assert rank_correlation([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx((-1.0, -1.0))
    # a tie in the scores: ranks (1.5, 1.5, 3) -> rho = sqrt(3)/2; tau-b = 2 / sqrt(3 * 2)
    rc = rank_correlation([1.0, 2.0, 3.0], [1.0, 1.0, 2.0])
    assert rc.spearman == pytest.approx(math.sqrt(3) / 2, abs=1e-14)
    assert rc.kendall == pytest.approx(2 / math.sqrt(6), abs=1e-14)
    # ties in both: agrees with scipy's spearmanr and kendalltau (tau-b)
    v, s = [1, 1, 2, 3, 3, 4], [2, 1, 1, 3, 5, 5]
    rc = rank_correlation(v, s)
    assert rc.spearman == pytest.approx(stats.spearmanr(v, s).statistic, abs=1e-14)
    assert rc.kendall == pytest.approx(stats.kendalltau(v, s).statistic, abs=1e-14)


def test_rank_correlation_constant_is_nan():
    rc = rank_correlation([1.0, 2.0, 3.0], [5.0, 5.0, 5.0])
    assert math.isnan(rc.spearman) and math.isnan(rc.kendall)
    assert all(math.isnan(x) for x in rank_correlation([1.0], [2.0]))


# ---------------------------------------------------------------------------- approval
def test_approval_error_rates_by_hand():
    v = [0.1, 0.2, 0.3, 0.5, 0.6, 0.7]  # 0.3 equals logging: counts as no better
    approved = np.array([True, False, True, False, True, True])
    r = approval_error_rates(v, approved, 0.3)
    assert r == ApprovalErrorRates(2 / 3, 1 / 3, 3, 3)
    none_better = approval_error_rates([0.1, 0.2], np.array([True, False]), 0.5)
    assert none_better.approve_worse == 0.5 and math.isnan(none_better.reject_better)
    none_worse = approval_error_rates([0.6, 0.7], np.array([False, False]), 0.5)
    assert math.isnan(none_worse.approve_worse) and none_worse.reject_better == 1.0


def test_approval_error_rates_refuses():
    with pytest.raises(ValidationError, match="array of bool"):
        approval_error_rates([0.1, 0.2], [1, 0], 0.3)
    with pytest.raises(ValidationError, match="shape"):
        approval_error_rates([0.1, 0.2], np.array([True]), 0.3)
    with pytest.raises(ParameterError, match="finite"):
        approval_error_rates([0.1, 0.2], np.array([True, False]), math.inf)


# ---------------------------------------------------------------------------- report
def _table():
    return pd.DataFrame(
        {
            "policy": ["a", "b", "c", "a", "b", "c"],
            "estimator": ["ips"] * 3 + ["snips"] * 3,
            "value": [0.30, 0.60, 0.50, 0.25, 0.35, 0.55],
            "ci_low": [0.20, 0.40, 0.45, 0.10, 0.30, 0.50],
        }
    )


TRUTH = {"a": 0.2, "b": 0.4, "c": 0.6}


def test_selection_report_by_hand():
    gate = pd.DataFrame({"policy": ["c", "b", "a"], "improvement_lower_bound": [0.1, -0.1, -0.2]})
    rep = selection_report(_table(), TRUTH, logging_value=0.3, baseline=0.42, gate=gate, k=2)
    assert list(rep.columns) == list(SELECTION_COLUMNS)
    assert list(zip(rep["estimator"], rep["rule"])) == [
        (e, r) for e in ("ips", "snips") for r in ("value", "lower_bound", "gate")
    ]
    got = rep.set_index(["estimator", "rule"])
    # ips by value ranks b > c > a: top-1 b (0.4), top-2 {b, c} contains the best
    assert got.loc[("ips", "value"), "regret_top1"] == pytest.approx(0.2)
    assert got.loc[("ips", "value"), "regret_topk"] == 0.0
    assert got.loc[("ips", "value"), "n_approved"] == 2  # 0.6 and 0.5 > 0.42
    assert got.loc[("ips", "value"), "approve_worse_rate"] == 0.0  # a (worse) rejected
    assert got.loc[("ips", "value"), "reject_better_rate"] == 0.0
    assert got.loc[("ips", "value"), "deployed_improvement"] == pytest.approx(0.1)
    assert got.loc[("ips", "value"), "spearman"] == pytest.approx(0.5)
    assert got.loc[("ips", "value"), "kendall"] == pytest.approx(1 / 3)
    # snips by value ranks c > b > a: perfect
    assert got.loc[("snips", "value"), "regret_top1"] == 0.0
    assert got.loc[("snips", "value"), "spearman"] == pytest.approx(1.0)
    assert got.loc[("snips", "value"), "n_approved"] == 1  # only c beats 0.42
    assert got.loc[("snips", "value"), "reject_better_rate"] == pytest.approx(0.5)  # b
    # the gate approves c only; approved first, so c is on top for both estimators
    for est in ("ips", "snips"):
        row = got.loc[(est, "gate")]
        assert row["regret_top1"] == 0.0 and row["n_approved"] == 1
        assert row["deployed_improvement"] == pytest.approx(0.3)
    # gate-ranked ips: c (approved), then b > a -> the true order exactly
    assert got.loc[("ips", "gate"), "spearman"] == pytest.approx(1.0)


def test_selection_report_keeps_logging_when_nothing_is_approved():
    rep = selection_report(_table(), TRUTH, logging_value=0.3, baseline=0.99)
    assert set(rep["rule"]) == {"value", "lower_bound"}  # no gate given
    assert (rep["n_approved"] == 0).all() and (rep["deployed_improvement"] == 0.0).all()
    assert (rep["reject_better_rate"] == 1.0).all()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"baseline": None}, "`baseline`"),
        ({"true": {"a": 0.2, "b": 0.4}}, r"no value for the policies \['c'\]"),
        ({"true": [0.2, 0.4, 0.6]}, "must be a mapping"),
        ({"k": 4}, "at most the number of candidates"),
        ({"gate": {"a": True}}, r"no verdict for the policies \['b', 'c'\]"),
        ({"gate": pd.DataFrame({"policy": ["a"]})}, "needs a `policy` column and one of"),
        ({"gate": 3}, "must be a mapping"),
        ({"evaluation": [1, 2]}, "must be an ope.Evaluation"),
    ],
)
def test_selection_report_refuses(kwargs, match):
    args = {"baseline": 0.4, "k": 1, "gate": None}
    args.update({k: v for k, v in kwargs.items() if k in args})
    with pytest.raises(ParameterError, match=match):
        selection_report(
            kwargs.get("evaluation", _table()),
            kwargs.get("true", TRUTH),
            logging_value=0.3,
            **args,
        )


# ---------------------------------------------------------------------------- simulation
def test_oracle_and_anti_oracle_scores_on_the_simulator():
    env = ContextualBandit(n_actions=6, n_contexts=50, seed=3)
    names = list(env.candidate_policies)
    v = np.array([env.true_value(p) for p in names])
    assert selection_regret(v, v) == 0.0
    assert selection_regret(v, v, k=len(names)) == 0.0
    assert rank_correlation(v, v) == pytest.approx((1.0, 1.0))
    assert selection_regret(v, -v) == pytest.approx(v.max() - v.min())
    assert rank_correlation(v, -v) == pytest.approx((-1.0, -1.0))
    v0 = env.true_value("logging")
    assert approval_error_rates(v, v > v0, v0)[:2] == (0.0, 0.0)  # the oracle decision
    # an "estimator" that returns the truth, judged by selection_report
    oracle = pd.DataFrame({"policy": names, "estimator": "oracle", "value": v, "ci_low": v})
    rep = selection_report(oracle, dict(zip(names, v)), logging_value=v0, baseline=v0, k=2)
    assert (rep[["regret_top1", "regret_topk", "approve_worse_rate"]] == 0.0).all().all()
    assert rep[["spearman", "kendall"]].to_numpy().ravel() == pytest.approx(np.ones(2 * len(rep)))
    assert rep["deployed_improvement"].to_numpy() == pytest.approx(v.max() - v0)


def test_selection_report_of_an_evaluation_on_the_simulator():
    env = ContextualBandit(n_actions=5, n_contexts=100, seed=0)
    logs = env.sample(20_000, rng=7)
    ev = ope.evaluate(logs, estimators=("ips", "snips"))
    names = list(env.candidate_policies)
    truth = {p: env.true_value(p) for p in names}
    gate = ope.learning.rank_policies(
        {p: logs.column(f"target__{p}").to_numpy() for p in names},
        None,
        logs.column("action").to_numpy(),
        logs.column("reward").to_numpy(),
        logs.column("propensity").to_numpy(),
        reward_range=(0.0, 1.0),
        max_weight=20.0,
    )
    rep = selection_report(ev, truth, logging_value=env.true_value("logging"), gate=gate, k=2)
    assert len(rep) == 2 * 3
    best = max(truth, key=truth.get)
    assert best == "optimal"
    # at n = 20,000 with 5 well separated candidates, every rule ships the optimal policy
    assert (rep["regret_top1"] == 0.0).all()
    assert rep["deployed_improvement"].to_numpy() == pytest.approx(
        truth["optimal"] - env.true_value("logging")
    )
    # the baseline defaults to the evaluation's logging estimate
    explicit = selection_report(
        ev.table(),
        truth,
        logging_value=env.true_value("logging"),
        baseline=ev.logging.value,
        gate=gate,
        k=2,
    )
    pd.testing.assert_frame_equal(rep, explicit)
    assert (rep["spearman"] > 0.8).all()
    assert (rep.loc[rep["rule"] == "gate", "approve_worse_rate"] == 0.0).all()
