"""Tests of ope.learning: policy learners, ranking, the safety gate and the logs helpers."""

from __future__ import annotations

import json
import re

import numpy as np
import pyarrow as pa
import pytest
from scipy.optimize import check_grad
from sklearn.utils.estimator_checks import parametrize_with_checks

from ope.exceptions import (
    EstimationError,
    MissingBoundsError,
    OPEWarning,
    ParameterError,
    PolicyError,
    SchemaError,
    ValidationError,
)
from ope.learning import (
    Certificate,
    ConservativePolicyLearner,
    DirectMethodPolicyLearner,
    IPSPolicyLearner,
    SafetyGate,
    certify,
    learn_from_logs,
    learner_policy_table,
    rank_policies,
)
from ope.learning._common import penalized_value
from ope.learning._common import Standardizer
from ope.learning._learners import _Bilinear, _PerAction, _Problem, _problem, policy_objective
from ope.learning._support import GatherLayout, ScatterLayout, Support, build_support
from ope.logs import BanditLogs, ValidationReport


# ------------------------------------------------------------------------------------------
# a synthetic environment with exact ground truth
# ------------------------------------------------------------------------------------------
def make_env(
    seed: int,
    *,
    n_actions: int = 5,
    d: int = 10,
    eps: float = 0.05,
    base: float = 0.2,
    lift: float = 0.6,
):
    """Supervised-to-bandit: label y(x), reward ~ Bernoulli(base + lift 1[a = y]).

    Logging: (1 - eps) on a weak linear classifier + eps uniform. The true value of a policy on
    held-out rows is ``base + lift * mean_i pi(y_i | x_i)`` (exact given the labels).
    """
    rng = np.random.default_rng(seed)
    B = np.random.default_rng(123).normal(size=(n_actions, d))
    G = np.random.default_rng(456).normal(size=(n_actions, d))

    def draw(n: int):
        X = rng.normal(size=(n, d))
        y = np.argmax(X @ B.T + 0.5 * rng.gumbel(size=(n, n_actions)), axis=1)
        weak = np.argmax(X @ (B + G).T, axis=1)
        P0 = np.full((n, n_actions), eps / n_actions)
        P0[np.arange(n), weak] += 1 - eps
        a = (P0.cumsum(axis=1) > rng.uniform(size=(n, 1))).argmax(axis=1)
        r = rng.binomial(1, base + lift * (a == y)).astype(float)
        return X, y, a, r, P0[np.arange(n), a], P0

    def value(P: np.ndarray, y: np.ndarray) -> float:
        return base + lift * float(np.mean(P[np.arange(y.size), y]))

    return draw, value


def uniform_logs(seed: int, n: int, d: int = 3):
    """Two actions, uniform logging; action 1 pays iff x0 > 0 (deterministic rewards)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    action = rng.integers(0, 2, size=n)
    reward = (action == (X[:, 0] > 0)).astype(float)
    return X, action, reward, np.full(n, 0.5)


# ------------------------------------------------------------------------------------------
# the objective
# ------------------------------------------------------------------------------------------
def _objective_setup(layout: str, model: str, seed: int = 0):
    """A small fit problem on one of the three layouts, with per-action or bilinear scores."""
    rng = np.random.default_rng(seed)
    n, d, k, m = 150, 4, 3, 2
    X = rng.normal(loc=1.0, size=(n, d))
    a = rng.integers(0, k, n)
    r = rng.uniform(size=n)
    p = rng.uniform(0.1, 0.9, n)
    if layout == "dense":
        support = Support(n, k)
    else:
        mask = rng.uniform(size=(n, k)) < 0.6
        mask[np.arange(n), a] = True
        support = build_support(mask, np.arange(k), n)
    XsT = Standardizer.fit(X, center=True).transform_t(X)
    if layout == "gather":  # forced: make_layout picks the scatter layout for 3 actions
        lay = GatherLayout(XsT, support)
        problem = _Problem(lay, lay.native(support.position(a)), r, p)
    else:
        problem = _problem(XsT, support, a, r, p)
        assert isinstance(problem.layout, ScatterLayout) == (layout == "scatter")
    if model == "per_action":
        score_model = _PerAction(k, d, True)
    else:
        score_model = _Bilinear(rng.normal(size=(k, m)), d, True)
    theta = 0.3 * rng.normal(size=score_model.size)
    return problem, score_model, theta


@pytest.mark.parametrize("objective", ["clipped_ips", "self_normalized"])
@pytest.mark.parametrize("max_weight", [None, 3.0])
@pytest.mark.parametrize("layout", ["dense", "scatter", "gather"])
@pytest.mark.parametrize("model", ["per_action", "bilinear"])
def test_analytic_gradient_matches_numerical(objective, max_weight, layout, model):
    problem, score_model, theta = _objective_setup(layout, model)
    kw = dict(objective=objective, variance_penalty=1.3, max_weight=max_weight, l2_penalty=0.01)

    def f(t):
        return policy_objective(t, problem, score_model, **kw)[0]

    def g(t):
        return policy_objective(t, problem, score_model, **kw)[1]

    err = check_grad(f, g, theta)
    assert err < 1e-5 * max(1.0, np.linalg.norm(g(theta)))


def test_the_candidate_layouts_give_the_same_objective():
    """Scatter (BLAS, then a gather) and gather (candidates only) on one support agree."""
    kw = dict(objective="clipped_ips", variance_penalty=1.0, max_weight=3.0, l2_penalty=0.01)
    scatter = _objective_setup("scatter", "per_action")
    gather = _objective_setup("gather", "per_action")
    f1, g1 = policy_objective(scatter[2], scatter[0], scatter[1], **kw)
    f2, g2 = policy_objective(gather[2], gather[0], gather[1], **kw)
    assert f1 == pytest.approx(f2, rel=1e-12)
    np.testing.assert_allclose(g1, g2, rtol=1e-10, atol=1e-14)


def test_penalized_value_hand_computed():
    wbar = np.array([1.0, 2.0, 0.5])
    r = np.array([1.0, 0.0, 1.0])
    # clipped IPS: u = (1, 0, 0.5), mean 0.5, unbiased var 0.25, se = sqrt(0.25 / 3)
    bound, (est, se), _ = penalized_value(wbar, r, "clipped_ips", 1.0)
    assert est == pytest.approx(0.5)
    assert se == pytest.approx(np.sqrt(0.25 / 3))
    assert bound == pytest.approx(0.5 - np.sqrt(0.25 / 3))
    # self-normalized: V = 1.5 / 3.5; sd^2 = sum (r - V)^2 w^2 / 3.5^2
    bound, (est, sd), _ = penalized_value(wbar, r, "self_normalized", 2.0)
    v = 1.5 / 3.5
    q = (1 - v) ** 2 * 1 + v**2 * 4 + (1 - v) ** 2 * 0.25
    assert est == pytest.approx(v)
    assert sd == pytest.approx(np.sqrt(q) / 3.5)
    assert bound == pytest.approx(v - 2.0 * np.sqrt(q) / 3.5)


@pytest.mark.parametrize(
    "learner",
    [IPSPolicyLearner(), ConservativePolicyLearner(variance_penalty=0.0, max_weight=None)],
    ids=["ips", "conservative_lambda0"],
)
def test_unpenalized_objective_is_ips_estimate_of_learned_policy(learner):
    X, action, reward, p = uniform_logs(0, 800)
    learner.fit(X, action, reward, p)
    pi = learner.predict_proba(X)[np.arange(800), action]
    ips = float(np.mean(reward * pi / p))
    assert learner.value_estimate_ == pytest.approx(ips, rel=1e-12)
    assert learner.value_lower_bound_ == pytest.approx(ips, rel=1e-12)
    np.testing.assert_allclose(learner.target_propensity(X, action), pi)


def test_lower_bound_is_estimate_minus_penalty_times_std_error():
    X, action, reward, p = uniform_logs(1, 600)
    learner = ConservativePolicyLearner(variance_penalty=2.0).fit(X, action, reward, p)
    assert learner.value_lower_bound_ == pytest.approx(
        learner.value_estimate_ - 2.0 * learner.value_std_error_
    )
    assert learner.max_weight_ == pytest.approx(2.0)  # 1 / q10(p) with p = 0.5


def test_reward_translation_reports_values_in_reward_units():
    X, action, reward, p = uniform_logs(2, 600)
    a = IPSPolicyLearner().fit(X, action, reward, p)
    b = IPSPolicyLearner(reward_range=(-1.0, 3.0)).fit(X, action, 4 * reward - 1, p)
    np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(X), atol=1e-5)
    pi = b.predict_proba(X)[np.arange(600), action]
    # translated IPS: r_lo + mean((r - r_lo) w)
    assert b.value_estimate_ == pytest.approx(-1 + np.mean(4 * reward * pi / p))


def test_float32_inputs_give_float64_results():
    X, action, reward, p = uniform_logs(3, 500)
    a = ConservativePolicyLearner().fit(X, action, reward, p)
    b = ConservativePolicyLearner().fit(
        X.astype(np.float32), action, reward.astype(np.float32), p.astype(np.float32)
    )
    assert b.coef_.dtype == np.float64
    np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(X), atol=1e-4)


# ------------------------------------------------------------------------------------------
# learning quality against exact ground truth
# ------------------------------------------------------------------------------------------
def test_learner_beats_logging_in_true_value():
    draw, value = make_env(0, eps=0.3)
    X, y, a, r, p, _ = draw(2000)
    Xt, yt, _, _, _, P0t = draw(20_000)
    learner = ConservativePolicyLearner().fit(X, a, r, p)
    assert value(learner.predict_proba(Xt), yt) > value(P0t, yt) + 0.03


def test_conservative_beats_ips_maximization_when_overlap_is_weak():
    gaps, logging = [], []
    for seed in range(4):
        draw, value = make_env(seed, eps=0.05)
        X, y, a, r, p, _ = draw(1000)
        Xt, yt, _, _, _, P0t = draw(10_000)
        cons = value(ConservativePolicyLearner().fit(X, a, r, p).predict_proba(Xt), yt)
        ips = value(IPSPolicyLearner().fit(X, a, r, p).predict_proba(Xt), yt)
        gaps.append(cons - ips)
        logging.append(cons - value(P0t, yt))
    # measured: mean gap about 0.065 (s.e. about 0.01) over 10 seeds
    assert np.mean(gaps) > 0.02
    assert np.mean(logging) > 0.0


def test_direct_method_learns_the_greedy_rule():
    X, action, reward, p = uniform_logs(4, 1000)
    dm = DirectMethodPolicyLearner().fit(X, action, reward, p)
    grid = np.array([[2.0, 0.0, 0.0], [-2.0, 0.0, 0.0]])
    assert dm.predict(grid).tolist() == [1, 0]
    proba = dm.predict_proba(grid)
    np.testing.assert_array_equal(proba, [[0.0, 1.0], [1.0, 0.0]])
    # true value of the greedy policy: the share of rows where it picks the paying action
    assert np.mean(dm.predict(X) == (X[:, 0] > 0)) > 0.95
    # in-sample DM estimate: mean of the (linear, hence shrunk) predicted best reward
    assert 0.5 < dm.value_estimate_ < 1.0


def test_select_validation_searches_the_grid_and_refits():
    draw, _ = make_env(5, eps=0.3)
    X, y, a, r, p, _ = draw(800)
    learner = ConservativePolicyLearner(select="validation", rng=0).fit(X, a, r, p)
    assert len(learner.selection_results_) == 12
    chosen = [(d["variance_penalty"], d["max_weight"]) for d in learner.selection_results_]
    assert (learner.variance_penalty_, learner.max_weight_) in chosen
    best = max(d["validation_ips"] for d in learner.selection_results_)
    picked = [
        d["validation_ips"]
        for d in learner.selection_results_
        if (d["variance_penalty"], d["max_weight"])
        == (learner.variance_penalty_, learner.max_weight_)
    ]
    assert picked[0] == best


# ------------------------------------------------------------------------------------------
# candidate sets
# ------------------------------------------------------------------------------------------
def test_candidate_masking_gives_zero_probability_outside_candidates():
    rng = np.random.default_rng(6)
    n = 600
    X = rng.normal(size=(n, 2))
    cands = [["a", "b"], ["b", "c"], ["a", "b", "c"]]
    row_cands = [cands[i % 3] for i in range(n)]
    action = np.array([c[rng.integers(len(c))] for c in row_cands])
    p = np.array([1.0 / len(c) for c in row_cands])
    reward = (action == np.where(X[:, 0] > 0, "b", "a")).astype(float)
    learner = ConservativePolicyLearner().fit(X, action, reward, p, candidates=row_cands)
    assert learner.classes_.tolist() == ["a", "b", "c"]
    proba = learner.predict_proba(X, candidates=pa.array(row_cands))
    allowed = np.array([[lab in c for lab in ["a", "b", "c"]] for c in row_cands])
    assert np.all(proba[~allowed] == 0.0)
    assert np.all(proba[allowed] > 0.0)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    # a null candidate list means "every action"
    proba_null = learner.predict_proba(
        X[:2], candidates=pa.array([None, ["c"]], pa.list_(pa.string()))
    )
    assert np.all(proba_null[0] > 0) and proba_null[1].tolist() == [0.0, 0.0, 1.0]


def test_candidates_may_name_actions_never_logged():
    X, action, reward, p = uniform_logs(7, 300)
    cands = [[0, 1, 2]] * 300
    learner = IPSPolicyLearner().fit(X, action, reward, p, candidates=cands)
    assert learner.classes_.tolist() == [0, 1, 2]
    assert learner.predict_proba(X).shape == (300, 3)


# ------------------------------------------------------------------------------------------
# scikit-learn conformance
# ------------------------------------------------------------------------------------------
@parametrize_with_checks(
    [
        ConservativePolicyLearner(),
        ConservativePolicyLearner(objective="self_normalized"),
        IPSPolicyLearner(),
        DirectMethodPolicyLearner(),
    ],
    expected_failed_checks=lambda est: {
        "check_sample_weight_equivalence_on_dense_data": (
            "sample_weight holds sampling (Horvitz-Thompson) weights, which are > 0: the check's "
            "zero weights are refused (tests/test_learning_weighted.py checks integer weights "
            "against repeated rows)"
        ),
    },
)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_fit_logs_matches_fit_on_arrays():
    X, action, reward, p = uniform_logs(8, 400, d=2)
    table = pa.table(
        {"x0": X[:, 0], "x1": X[:, 1], "action": action, "reward": reward, "propensity": p}
    )
    logs = BanditLogs(table, ValidationReport("<Table>", 400, 400))
    a = ConservativePolicyLearner().fit_logs(logs, context_columns=["x0", "x1"])
    b = ConservativePolicyLearner().fit(X, action, reward, p)
    np.testing.assert_allclose(a.coef_, b.coef_)
    # the same features as one list column
    table_list = table.append_column("context", pa.array(X.tolist(), pa.list_(pa.float64())))
    logs_list = BanditLogs(table_list, ValidationReport("<Table>", 400, 400))
    c = ConservativePolicyLearner().fit_logs(logs_list, context_columns="context")
    np.testing.assert_allclose(c.coef_, b.coef_)


# ------------------------------------------------------------------------------------------
# errors
# ------------------------------------------------------------------------------------------
def _xy(n=10):
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, 2)), np.arange(n) % 2


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (
            {"reward": np.ones(9), "propensity": np.full(10, 0.5)},
            ValidationError,
            r"`reward` has 9 rows but X has 10",
        ),
        (
            {"reward": np.ones(10), "propensity": np.r_[np.full(8, 0.5), 0.0, 1.5]},
            ValidationError,
            r"`propensity` must be in \(0, 1\]; 2 rows are not \(first at row 8",
        ),
        (
            {"reward": np.r_[np.ones(9), np.nan], "propensity": np.full(10, 0.5)},
            ValidationError,
            r"`reward` must be finite; 1 rows .*\(first at row 9\)",
        ),
        (
            {"reward": np.r_[np.ones(9), 5.0], "propensity": np.full(10, 0.5)},
            ValidationError,
            r"`reward` has 1 rows outside reward_range=\(0, 1\).*widen it or fix the rewards",
        ),
        ({"reward": np.ones(10)}, ValidationError, r"`propensity` is missing"),
        (
            {
                "reward": np.ones(10),
                "propensity": np.full(10, 0.5),
                "candidates": [[0]] * 9 + [[0]],
            },
            ValidationError,
            r"logged action is not among the row's `candidates` in 5 rows \(first at rows 1, 3",
        ),
    ],
)
def test_fit_errors_say_what_where_and_how_to_fix(kwargs, error, match):
    X, y = _xy()
    reward = kwargs.pop("reward", None)
    propensity = kwargs.pop("propensity", None)
    with pytest.raises(error, match=match):
        ConservativePolicyLearner().fit(X, y, reward, propensity, **kwargs)


def test_predict_with_actions_unseen_in_fit_and_bad_x():
    X, action, reward, p = uniform_logs(9, 100)
    learner = ConservativePolicyLearner().fit(X, action, reward, p)
    # an action the learner never saw has no parameters: probability 0, said once per call
    with pytest.warns(
        OPEWarning,
        match=r"^1 \(row, candidate\) pairs name 1 actions not seen in "
        r"fit \(e\.g\. \[7\]\); the policy has no parameters for them",
    ):
        proba = learner.predict_proba(X[:3], candidates=[[0, 7], [1], [0]])
    np.testing.assert_array_equal(proba, [[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    pi = learner.target_propensity(X[:2], [0, 5])
    assert pi[1] == 0.0 and 0.0 < pi[0] < 1.0
    with pytest.raises(
        ValidationError,
        match=r"at least one candidate action the learner knows; "
        r"1 row \(first at row 1\) have none",
    ):
        learner.predict_proba(X[:2], candidates=[[0], [9]])
    with pytest.raises(ValidationError, match=r"X has 2 features, but .* expecting 3"):
        learner.predict(X[:, :2])
    with pytest.raises(
        ValidationError, match=r"at least one candidate action the learner knows; 1 row"
    ):
        learner.predict_proba(X[:2], candidates=[[0], []])


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"objective": "poem"}, r"objective must be 'clipped_ips' or 'self_normalized'"),
        ({"variance_penalty": -1.0}, r"`variance_penalty` must be a finite number >= 0"),
        ({"max_weight": 0.5}, r"max_weight must be a number >= 1"),
        ({"reward_range": (1.0, 0.0)}, r"`reward_range` must be finite with low < high"),
        ({"select": "cv"}, r"select must be None or 'validation'"),
    ],
)
def test_bad_hyperparameters_are_rejected_at_fit(params, match):
    X, action, reward, p = uniform_logs(10, 50)
    with pytest.raises(ValueError, match=match):
        ConservativePolicyLearner(**params).fit(X, action, reward, p)


# ------------------------------------------------------------------------------------------
# the gate
# ------------------------------------------------------------------------------------------
def two_arm_logs(seed: int, n: int, p1: float = 0.5, v0: float = 0.4, v1: float = 0.6):
    """Context-free two-armed bandit; logging picks arm 1 with probability p1."""
    rng = np.random.default_rng(seed)
    action = (rng.uniform(size=n) < p1).astype(int)
    reward = rng.binomial(1, np.where(action == 1, v1, v0)).astype(float)
    propensity = np.where(action == 1, p1, 1 - p1)
    return action, reward, propensity


def test_gate_approves_clearly_better_and_rejects_truly_worse():
    action, reward, propensity = two_arm_logs(0, 20_000)
    gate = SafetyGate(reward_range=(0.0, 1.0), max_weight=2.0)
    better = gate.certify((action == 1) * 1.0, None, action, reward, propensity, name="arm1")
    worse = gate.certify((action == 0) * 1.0, None, action, reward, propensity, name="arm0")
    assert better.verdict == "approve" and better.improvement_lower_bound > 0
    assert worse.verdict == "reject" and worse.improvement_lower_bound <= 0
    # true values: logging 0.5, arm1 0.6, arm0 0.4
    assert better.lower_bound < 0.6 < better.value + 0.02
    assert better.baseline_value == pytest.approx(0.5, abs=0.02)
    assert "improvement over the logging policy" in better.reason


def test_gate_with_threshold_baseline():
    action, reward, propensity = two_arm_logs(1, 20_000)
    pe = (action == 1) * 1.0
    assert certify(
        pe, None, action, reward, propensity, reward_range=(0, 1), max_weight=2.0, baseline=0.5
    ).approved
    assert not certify(
        pe, None, action, reward, propensity, reward_range=(0, 1), max_weight=2.0, baseline=0.65
    ).approved


@pytest.mark.slow
@pytest.mark.parametrize("method", ["betting", "bernstein", "t"])
def test_gate_false_approval_rate_at_most_one_minus_confidence(method):
    # the candidate is exactly as good as logging (both arms pay 0.5): every approval is false
    approvals = 0
    reps = 1000
    for seed in range(reps):  # loop over replications, not rows
        action, reward, propensity = two_arm_logs(seed, 300, p1=0.3, v0=0.5, v1=0.5)
        cert = certify(
            (action == 1) * 1.0,
            None,
            action,
            reward,
            propensity,
            reward_range=(0, 1),
            max_weight=1 / 0.3,
            ci=method,
        )
        approvals += cert.approved
    rate = approvals / reps
    # binomial upper margin: 0.05 + 3 * sqrt(0.05 * 0.95 / 1000) = 0.071
    assert rate <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / reps)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["betting", "bernstein", "t"])
def test_lower_bound_exceeds_true_value_at_most_one_minus_confidence(method):
    # threshold baseline set to the exact value 0.6 of "always arm 1": approval = miscoverage
    misses = 0
    reps = 1000
    for seed in range(reps):  # loop over replications, not rows
        action, reward, propensity = two_arm_logs(10_000 + seed, 400, p1=0.3, v1=0.6)
        cert = certify(
            (action == 1) * 1.0,
            None,
            action,
            reward,
            propensity,
            reward_range=(0, 1),
            max_weight=1 / 0.3,
            ci=method,
            baseline=0.6,
        )
        misses += cert.approved
    assert misses / reps <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / reps)


def test_gate_requires_a_priori_bounds():
    action, reward, propensity = two_arm_logs(2, 100)
    pe = (action == 1) * 1.0
    with pytest.raises(MissingBoundsError, match=r"reward_range=\(low, high\)"):
        SafetyGate(max_weight=2.0).certify(pe, None, action, reward, propensity)
    with pytest.raises(MissingBoundsError, match=r"needs max_weight"):
        SafetyGate(reward_range=(0, 1)).certify(pe, None, action, reward, propensity)
    # an unclipped IPS learner has no clip level to borrow
    X = np.random.default_rng(0).normal(size=(100, 2))
    ips = IPSPolicyLearner().fit(X, action, reward, propensity)
    with pytest.raises(MissingBoundsError, match=r"needs max_weight"):
        SafetyGate(reward_range=(0, 1)).certify(ips, X, action, reward, propensity)
    with pytest.raises(MissingBoundsError, match=r"max_weight"):
        rank_policies(
            {"a": pe}, None, action, reward, propensity, reward_range=(0, 1), max_weight=None
        )


def test_gate_input_errors():
    action, reward, propensity = two_arm_logs(3, 100)
    gate = SafetyGate(reward_range=(0, 1), max_weight=2.0)
    with pytest.raises(PolicyError, match=r"one per certification row \(100\)"):
        gate.certify(np.ones(99), None, action, reward, propensity)
    with pytest.raises(PolicyError, match=r"must be in \[0, 1\].*1 rows are not"):
        gate.certify(np.r_[np.ones(99), 2.0], None, action, reward, propensity)
    with pytest.raises(EstimationError, match=r"at least 2 held-out rows"):
        gate.certify(np.ones(1), None, action[:1], reward[:1], propensity[:1])
    with pytest.raises(ValueError, match=r"confidence_level must be in \(0.5, 1\)"):
        SafetyGate(reward_range=(0, 1), max_weight=2.0, confidence_level=0.3).certify(
            np.ones(100), None, action, reward, propensity
        )


def _arm1_certificate() -> Certificate:
    """The certificate of always playing arm 1 on two-arm logs of 5,000 rows."""
    action, reward, propensity = two_arm_logs(4, 5000)
    return certify(
        (action == 1) * 1.0,
        None,
        action,
        reward,
        propensity,
        reward_range=(0, 1),
        max_weight=2.0,
        name="arm1",
        n_train=1234,
    )


def test_certificate_json_round_trip_and_text():
    cert = _arm1_certificate()
    back = Certificate.from_json(cert.to_json())
    assert back == cert
    d = json.loads(cert.to_json())
    assert d["verdict"] == cert.verdict and d["n_train"] == 1234 and d["n"] == 5000
    text = str(cert)
    assert "certificate for policy 'arm1'" in text and "one-sided 95%" in text
    assert "<table>" in cert._repr_html_()
    with pytest.raises(ValidationError, match=r"misses keys: baseline"):
        Certificate.from_dict({k: v for k, v in d.items() if k != "baseline"})


def test_certificate_text_is_wrapped_to_the_text_width():
    """The certificate's text (printed by ``ope learn`` and ``ope demo``) is wrapped to the
    width of ope's other text output: a long field goes on under its value, and nothing of it
    is lost."""
    import dataclasses

    from ope._format import TEXT_WIDTH
    from ope.diagnostics.msm import describe_approval_tipping

    cert = dataclasses.replace(_arm1_certificate(), tipping_gamma=1.35, seed=7)
    text = str(cert)
    lines = text.splitlines()
    assert [len(line) for line in lines if len(line) > TEXT_WIDTH] == []
    assert lines[0] == f"certificate for policy 'arm1': {cert.verdict.upper()}"
    column = len("  baseline:          ")  # where every value starts, also when wrapped
    for line in lines[1:]:  # a field's label, or the continuation of its value: blank
        head = line[:column]
        assert head.isspace() or re.fullmatch(r"  [a-z][a-z ]*: +", head), line
        assert line[column] != " ", line
    flat = " ".join(text.split())
    assert f"baseline: {cert.baseline_value:.6g} ({cert.baseline_source})" in flat
    assert f"reason: {cert.reason}" in flat
    assert f"sensitivity: {describe_approval_tipping(1.35)}" in flat
    assert "split seed: 7 (rng=7 reproduces it)" in flat


def test_rank_policies_orders_by_lower_bound_with_bonferroni_levels():
    action, reward, propensity = two_arm_logs(5, 10_000)
    policies = {
        "arm0": (action == 0) * 1.0,
        "arm1": (action == 1) * 1.0,
        "logging": np.where(action == 1, 0.5, 0.5),
    }
    table = rank_policies(
        policies, None, action, reward, propensity, reward_range=(0, 1), max_weight=2.0
    )
    assert table["policy"].tolist() == ["arm1", "logging", "arm0"]
    assert table["rank"].tolist() == [1, 2, 3]
    assert np.allclose(table["confidence_level"], 1 - 0.05 / 3)
    assert list(table.columns) == [
        "rank",
        "policy",
        "value",
        "lower_bound",
        "improvement_estimate",
        "improvement_lower_bound",
        "confidence_level",
        "ci_method",
        "n",
    ]
    single = rank_policies(
        policies,
        None,
        action,
        reward,
        propensity,
        reward_range=(0, 1),
        max_weight=2.0,
        simultaneous=False,
    )
    assert np.all(single["lower_bound"].to_numpy() >= table["lower_bound"].to_numpy())


def test_gate_scores_a_fitted_learner_and_a_sklearn_classifier():
    from sklearn.linear_model import LogisticRegression

    X, action, reward, p = uniform_logs(11, 4000)
    learner = ConservativePolicyLearner().fit(X[:2000], action[:2000], reward[:2000], p[:2000])
    cert = SafetyGate(reward_range=(0, 1)).certify(
        learner, X[2000:], action[2000:], reward[2000:], p[2000:], name="cons"
    )
    assert cert.max_weight == learner.max_weight_ and cert.approved
    clf = LogisticRegression().fit(X[:2000], (X[:2000, 0] > 0).astype(int))
    cert2 = certify(
        clf, X[2000:], action[2000:], reward[2000:], p[2000:], reward_range=(0, 1), max_weight=2.0
    )
    assert cert2.approved and cert2.policy == "LogisticRegression"


# ------------------------------------------------------------------------------------------
# logs helpers
# ------------------------------------------------------------------------------------------
def _string_logs(n: int = 3000, seed: int = 12) -> BanditLogs:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    cands = [["ham", "egg"], ["ham", "egg", "spam"]]
    row_cands = [cands[i % 2] for i in range(n)]
    k = np.array([len(c) for c in row_cands])
    pick = (rng.uniform(size=n) * k).astype(int)
    action = np.array([c[j] for c, j in zip(row_cands, pick)])
    reward = (action == np.where(x > 0, "egg", "ham")).astype(float)
    table = pa.table(
        {
            "event_id": pa.array([f"e{i}" for i in range(n)]),
            "x": x,
            "action": pa.array(action, pa.string()),
            "reward": reward,
            "propensity": 1.0 / k,
            "candidates": pa.array(row_cands, pa.list_(pa.string())),
        }
    )
    return BanditLogs(table, ValidationReport("<Table>", n, n))


def test_learn_from_logs_splits_fits_and_certifies():
    logs = _string_logs()
    learner, cert = learn_from_logs(logs, context_columns="x", rng=0)
    assert cert.n_train == 1500 and cert.n == 1500
    assert cert.verdict == "approve" and cert.policy == "learned"
    assert cert.max_weight == learner.max_weight_
    assert learner.classes_.tolist() == ["egg", "ham", "spam"]


def test_learn_from_logs_with_an_unclipped_learner_needs_max_weight():
    logs = _string_logs(400)
    with pytest.raises(MissingBoundsError, match=r"needs max_weight"):
        learn_from_logs(logs, context_columns="x", learner=IPSPolicyLearner(), rng=0)
    learner, cert = learn_from_logs(
        logs,
        context_columns="x",
        learner=IPSPolicyLearner(),
        max_weight=3.0,
        certify_fraction=0.25,
        rng=0,
    )
    assert cert.max_weight == 3.0 and cert.n == 100 and cert.n_train == 300
    assert learner.max_weight_ is None


def test_learner_policy_table_long_format():
    logs = _string_logs(600)
    learner = ConservativePolicyLearner().fit_logs(logs, context_columns=["x"])
    table = learner_policy_table(learner, logs, context_columns=["x"], name="cons")
    assert table.column_names == ["event_id", "policy", "action", "probability"]
    assert table.schema.field("action").type == pa.string()
    df = table.to_pandas()
    assert (df["probability"] > 0).all() and set(df["policy"]) == {"cons"}
    sums = df.groupby("event_id")["probability"].sum()
    np.testing.assert_allclose(sums.to_numpy(), 1.0)
    assert len(sums) == 600
    # rows with candidates (ham, egg) never list spam
    even = df[df["event_id"].isin([f"e{i}" for i in range(0, 600, 2)])]
    assert "spam" not in set(even["action"])


def test_learner_policy_table_refuses_columns_other_than_those_fitted_on():
    logs = _string_logs(200)
    table = logs.table.append_column("z", pa.array(np.linspace(-1.0, 1.0, 200)))
    logs = BanditLogs(table, logs.report)
    learner = ConservativePolicyLearner().fit_logs(logs, context_columns=["x"])
    assert learner.context_columns_ == ("x",)
    # one feature either way: scoring on z read every row's feature from the wrong column
    with pytest.raises(
        SchemaError,
        match=r"`context_columns` \['z'\] are not the columns "
        r"ConservativePolicyLearner was fitted on, \['x'\].*"
        r"Pass context_columns=\['x'\]",
    ):
        learner_policy_table(learner, logs, context_columns=["z"])
    assert learner_policy_table(learner, logs, context_columns="x").num_rows > 0
    learned, _ = learn_from_logs(logs, context_columns=["z", "x"], rng=0)
    assert learned.context_columns_ == ("z", "x")
    with pytest.raises(SchemaError, match=r"\['x', 'z'\] are not the columns .* \['z', 'x'\]"):
        learner_policy_table(learned, logs, context_columns=["x", "z"])
    # a refit on arrays forgets the columns: its features came from wherever the caller took them
    learner.fit(np.zeros((4, 1)), [0, 1, 0, 1], np.ones(4), np.full(4, 0.5))
    assert not hasattr(learner, "context_columns_")


def test_logs_helpers_schema_errors():
    logs = _string_logs(20)
    with pytest.raises(SchemaError, match=r"context column\(s\) \['nope'\] are not in the logs"):
        ConservativePolicyLearner().fit_logs(logs, context_columns=["nope"])
    with pytest.raises(SchemaError, match=r"column 'event_id' has type string, not numeric"):
        ConservativePolicyLearner().fit_logs(logs, context_columns=["event_id"])
    with pytest.raises(SchemaError, match=r"\['action'\] .* are the logged decision"):
        ConservativePolicyLearner().fit_logs(logs, context_columns=["action"])
    no_id = BanditLogs(logs.table.drop_columns(["event_id"]), logs.report)
    learner = ConservativePolicyLearner().fit_logs(no_id, context_columns="x")
    with pytest.raises(SchemaError, match=r"no event_id column"):
        learner_policy_table(learner, no_id, context_columns="x")


# ------------------------------------------------------------------------------------------
# one moment kernel, one validation layer, one result contract
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("max_weight", [None, 1.5])
def test_objective_value_agrees_with_the_clipped_ips_estimator(max_weight):
    """The learner's objective value is ClippedIPS's estimate - penalty * std_error + L2."""
    import ope

    X, action, reward, p = uniform_logs(5, 400)
    n_actions, d = 2, X.shape[1]
    theta = np.random.default_rng(1).normal(size=n_actions * d + n_actions)
    XsT = Standardizer.fit(X, center=True).transform_t(X)
    problem = _problem(XsT, Support(X.shape[0], n_actions), action, reward, p)
    f, _ = policy_objective(
        theta,
        problem,
        _PerAction(n_actions, d, True),
        objective="clipped_ips",
        variance_penalty=1.5,
        max_weight=max_weight,
        l2_penalty=0.1,
    )
    W = theta[: n_actions * d].reshape(n_actions, d)
    z = W @ XsT[:d] + theta[n_actions * d :][:, None]  # (actions, rows), by hand
    P = np.exp(z - z.max(axis=0))
    pi = (P / P.sum(axis=0))[action, np.arange(X.shape[0])]
    est = (ope.IPS() if max_weight is None else ope.ClippedIPS(max_weight=max_weight)).estimate(
        reward=reward, logging_propensity=p, target_propensity=pi
    )
    expected = -(est.value - 1.5 * est.std_error) + 0.05 * float(np.sum(W**2))
    assert f == pytest.approx(expected, rel=1e-12)


def test_self_normalized_objective_agrees_with_snips():
    import ope

    rng = np.random.default_rng(2)
    n = 300
    p = rng.uniform(0.2, 1.0, size=n)
    pi = rng.uniform(0.0, 1.0, size=n)
    r = rng.uniform(size=n)
    _, (value, sd), _ = penalized_value(pi / p, r, "self_normalized", 1.0)
    snips = ope.SNIPS().estimate(reward=r, logging_propensity=p, target_propensity=pi)
    assert value == pytest.approx(snips.value, rel=1e-12)
    # Norm-POEM's spread sqrt(sum (r - V)^2 w^2) / sum w is the delta-method se * sqrt((n-1)/n)
    assert sd == pytest.approx(snips.std_error * np.sqrt((n - 1) / n), rel=1e-10)


def test_gate_numbers_match_the_pessimistic_estimate_by_hand():
    action, reward, propensity = two_arm_logs(7, 3000, p1=0.3)
    pe = (action == 1) * 0.9 + (action == 0) * 0.1
    cert = certify(
        pe, None, action, reward, propensity, reward_range=(0.0, 1.0), max_weight=2.5, ci="t"
    )
    w = pe / propensity
    z = reward * np.minimum(w, 2.5)
    assert cert.value == pytest.approx(z.mean(), rel=1e-12)
    assert cert.clipped_fraction == pytest.approx(np.mean(w > 2.5))
    half = cert.value - cert.lower_bound
    from scipy import stats

    assert half == pytest.approx(stats.t.ppf(0.95, 2999) * z.std(ddof=1) / np.sqrt(3000), rel=1e-9)
    diff = reward * (np.minimum(w, 2.5) - 1.0)
    assert cert.improvement_estimate == pytest.approx(diff.mean(), rel=1e-12)


def test_certificate_follows_the_result_contract():
    from ope.results import Result

    action, reward, propensity = two_arm_logs(4, 20)
    cert = certify(
        (action == 1) * 1.0,
        None,
        action,
        reward,
        propensity,
        reward_range=(0, 1),
        max_weight=2.0,
        ci="t",
        name="<script>alert(1)</script>",
    )
    assert isinstance(cert, Result)
    assert cert.n == 20 and cert.ci_method == "t"
    for renamed in ("estimate", "n_certify", "method"):  # one name per field, no aliases
        assert not hasattr(cert, renamed), renamed
    assert isinstance(cert.notes, tuple) and any("only n=20 rows" in t for t in cert.notes)
    html = cert._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html
    summary = cert.summary()
    assert "certificate for policy '<script>alert(1)</script>': " in summary
    assert "[1] only n=20 rows" in summary
    d = cert.to_dict()
    assert (d["value"], d["n"], d["ci_method"]) == (cert.value, 20, "t")
    assert not {"estimate", "n_certify", "method"} & set(d)
    assert d["notes"] == list(cert.notes)
    assert Certificate.from_dict(d) == cert
    assert Certificate.from_json(cert.to_json()) == cert
    short = {k: v for k, v in d.items() if k not in ("notes", "weighted")}
    back = Certificate.from_dict(short)  # the optional keys may be left out
    assert back.notes == () and back.value == cert.value and back.n == 20
    bernstein = certify(
        (action == 1) * 1.0, None, action, reward, propensity, reward_range=(0, 1), max_weight=2.0
    )
    assert bernstein.notes == ()  # valid at every sample size: no small-sample caveat


@pytest.mark.parametrize(
    ("gate", "match"),
    [
        ({"confidence_level": 1.5}, r"`confidence_level` must be in \(0, 1\)"),
        ({"ci": "hoeffding"}, r"`ci` must be one of 'auto', 'betting', 'bernstein', 't'"),
        ({"max_weight": "2"}, r"`max_weight` must be a number"),
        ({"max_weight": 0.5}, r"max_weight must be a finite number >= 1"),
        ({"baseline": "median"}, r"baseline must be 'logging' or a number"),
        ({"reward_range": (1, 0)}, r"`reward_range` must be finite with low < high"),
    ],
)
def test_gate_bad_arguments_raise_parameter_error(gate, match):
    action, reward, propensity = two_arm_logs(3, 100)
    settings = {"reward_range": (0, 1), "max_weight": 2.0, **gate}
    with pytest.raises(ParameterError, match=match):
        SafetyGate(**settings).certify(np.ones(100), None, action, reward, propensity)


def test_learner_bad_hyperparameters_raise_parameter_error():
    X, action, reward, p = uniform_logs(10, 50)
    for params in (
        {"l2_penalty": -1.0},
        {"max_iter": 0},
        {"max_weight": float("nan")},
        {"select": "validation", "validation_fraction": 2.0},
        {"select": "validation", "rng": -1},
    ):
        with pytest.raises(ParameterError):
            ConservativePolicyLearner(**params).fit(X, action, reward, p)
    with pytest.raises(MissingBoundsError, match=r"need reward_range=\(low, high\)"):
        ConservativePolicyLearner(reward_range=None).fit(X, action, reward, p)


def test_learning_modules_import_without_a_cycle():
    """_learners gets fit_logs from _columns, which needs none of _logs, _gate or _learners."""
    import ast
    import pathlib

    import ope.learning

    root = pathlib.Path(ope.learning.__file__).parent
    imports = {}
    for name in ("_columns", "_common", "_learners", "_gate", "_logs"):
        tree = ast.parse((root / f"{name}.py").read_text())
        imports[name] = {
            n.module.rsplit(".", 1)[-1]
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("ope.learning.")
        }
    assert imports["_columns"] <= {"_common"} and imports["_common"] == set()
    assert "_logs" not in imports["_learners"] | imports["_gate"]
