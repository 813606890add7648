"""The safety gate's modes: the betting mode's bounds by hand, the finite-sample default
everywhere a mode is chosen, and the t mode's false approvals on a rare sure-win arm."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from ope.intervals.betting import betting_lower_bound
from ope.learning import SafetyGate, certify, learn_from_logs, rank_policies


def sure_win_logs(reps: int, n: int, seed: int):
    """The rare sure-win design: logging plays a sure-win arm (reward 1) with probability
    0.002 and an arm paying Bernoulli(0.5) otherwise; the candidate always plays the second arm, so
    V(pi) - V(pi_0) = 0.5 - (0.002 + 0.998 * 0.5) = -0.001 and every approval is false."""
    rng = np.random.default_rng(seed)
    action = (rng.random((reps, n)) >= 0.002).astype(int)
    reward = np.where(action == 0, 1.0, (rng.random((reps, n)) < 0.5) * 1.0)
    propensity = np.where(action == 0, 0.002, 0.998)
    return action, reward, propensity, (action == 1) * 1.0


def test_t_mode_approves_a_worse_policy_far_above_nominal_while_safe_modes_do_not():
    reps = 400
    action, reward, propensity, target = sure_win_logs(reps, 1000, seed=7)
    rates = {}
    for method in ("t", "bernstein", "betting"):
        rates[method] = np.mean(
            [
                certify(
                    target[k],
                    None,
                    action[k],
                    reward[k],
                    propensity[k],
                    reward_range=(0, 1),
                    max_weight=3.0,
                    ci=method,
                ).approved
                for k in range(reps)  # one certification per replication
            ]
        )
    # the sure-win arm is absent from 0.998**1000 = 13.5% of the logs; then the t bound of the
    # non-negative, nearly constant differences is > 0. 0.08 is 3 standard errors below 0.135
    assert rates["t"] > 0.08
    # nominal 0.05; the finite-sample modes approve none of these runs
    assert rates["bernstein"] <= 0.05 and rates["betting"] <= 0.05


def test_betting_mode_bounds_are_the_betting_bounds_of_the_gate_terms():
    rng = np.random.default_rng(3)
    n, max_weight = 500, 2.5
    action = (rng.random(n) < 0.4).astype(int)
    reward = 1.0 + 2.0 * rng.random(n)  # rewards in [1, 3], a priori
    propensity = np.where(action == 1, 0.4, 0.6)
    target = np.where(action == 1, 0.9, 0.1)  # weights 2.25 and 1/6
    cert = certify(
        target,
        None,
        action,
        reward,
        propensity,
        reward_range=(1.0, 3.0),
        max_weight=max_weight,
        ci="betting",
    )
    w = np.minimum(target / propensity, max_weight)
    z = 1.0 + (reward - 1.0) * w  # in [1, 1 + 2.5 * 2]
    d = z - reward  # in [-2, (2.5 - 1) * 2]
    assert cert.ci_method == "betting"
    assert cert.value == pytest.approx(z.mean(), rel=1e-12)
    assert cert.lower_bound == betting_lower_bound(z, low=1.0, high=6.0)
    assert cert.improvement_lower_bound == betting_lower_bound(d, low=-2.0, high=3.0)
    assert cert.approved == (cert.improvement_lower_bound > 0)


def test_the_finite_sample_betting_mode_is_the_default_everywhere():
    for func in (SafetyGate, certify, rank_policies, learn_from_logs):
        # "auto": betting on unweighted rows (t on rows with sampling weights)
        assert inspect.signature(func).parameters["ci"].default == "auto", func
    rng = np.random.default_rng(4)
    action = rng.integers(0, 2, size=400)
    reward = rng.binomial(1, 0.5, size=400) * 1.0
    cert = SafetyGate(reward_range=(0, 1), max_weight=2.0).certify(
        (action == 1) * 1.0, None, action, reward, np.full(400, 0.5)
    )
    assert cert.ci_method == "betting" and cert.notes == ()
    table = rank_policies(
        {"a1": (action == 1) * 1.0},
        None,
        action,
        reward,
        np.full(400, 0.5),
        reward_range=(0, 1),
        max_weight=2.0,
    )
    assert table["ci_method"].tolist() == ["betting"]


def test_betting_mode_approves_a_better_policy_more_often_than_bernstein():
    # uniform logging, arms paying 0.5 and 0.55, candidate on the second: +0.025
    rng = np.random.default_rng(9)
    reps, n = 60, 10_000
    action = rng.integers(0, 2, size=(reps, n))
    reward = (rng.random((reps, n)) < np.where(action == 1, 0.55, 0.5)) * 1.0
    lower = {
        m: np.array(
            [
                certify(
                    (action[k] == 1) * 1.0,
                    None,
                    action[k],
                    reward[k],
                    np.full(n, 0.5),
                    reward_range=(0, 1),
                    max_weight=3.0,
                    ci=m,
                ).improvement_lower_bound
                for k in range(reps)
            ]
        )
        for m in ("bernstein", "betting")
    }
    assert np.all(lower["betting"] > lower["bernstein"])


@pytest.mark.parametrize(
    ("learner", "message"),
    [
        ("IPSPolicyLearner", r"\(IPSPolicyLearner\) is not fitted: fit it"),
        ("LogisticRegression", r"must be a fitted learner.*got LogisticRegression"),
    ],
)
def test_certifying_an_unfitted_policy_says_to_fit_it(learner, message):
    from sklearn.linear_model import LogisticRegression

    import ope
    from ope.exceptions import PolicyError

    g = np.random.default_rng(0)
    n = 100
    x = g.normal(size=(n, 1))
    a = g.integers(0, 3, n)
    r = g.binomial(1, 0.4, n).astype(float)
    p = np.full(n, 1 / 3)
    policy = ope.IPSPolicyLearner() if learner == "IPSPolicyLearner" else LogisticRegression()
    with pytest.raises(PolicyError, match=message):
        certify(policy, x, a, r, p, reward_range=(0, 1), max_weight=10.0)


def test_rank_policies_refuses_a_blank_policy_name():
    from ope.exceptions import ParameterError

    g = np.random.default_rng(0)
    n = 200
    x = g.normal(size=(n, 1))
    a = g.integers(0, 2, n)
    r = g.binomial(1, 0.4, n).astype(float)
    p = np.full(n, 0.5)
    with pytest.raises(ParameterError, match=r"`policies\[0\]` is blank"):
        rank_policies({"": np.full(n, 0.5)}, x, a, r, p, reward_range=(0, 1), max_weight=10.0)
