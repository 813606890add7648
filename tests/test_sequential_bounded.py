"""Finite-sample (bounded) intervals of the trajectory estimators ``is`` and ``pdis``.

Hand-computed ranges and intervals, the refusals (missing bounds, bounds the data break), and
coverage against exact values of ``ope.simulate.TabularMDP``: the unclipped value by dynamic
programming, the clipped value by exact enumeration of every trajectory.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

from ope.exceptions import (
    EstimationError,
    MissingBoundsError,
    ParameterError,
    SmallSampleWarning,
    ValidationError,
)
from ope.intervals import bernstein_interval, betting_interval, hoeffding_interval
from ope.io import read_trajectories
from ope.logs import Trajectories
from ope.sequential import sequential_estimate
from ope.simulate import TabularMDP


@pytest.fixture(autouse=True)
def _quiet_small_sample():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallSampleWarning)
        yield


# ---------------------------------------------------------------------------------------------
# two episodes by hand (gamma = 0.5), rewards in [0, 2]
#   episode 10: rho = [2, 2]      -> w = [2, 4],        r = [1, 2],    terminates
#   episode 20: rho = [0.5, 1, 2] -> w = [0.5, 0.5, 1], r = [0, 1, 1], truncated
# per-episode terms: IS  8 and 0.75; PDIS 2 + 0.5*4*2 = 6 and 0 + 0.25 + 0.25 = 0.5
# ---------------------------------------------------------------------------------------------
HAND = pd.DataFrame(
    {
        "episode_id": [20, 10, 20, 10, 20],
        "step": [0, 1, 1, 0, 2],
        "action": [1, 0, 0, 1, 1],
        "propensity": [0.5, 0.25, 1.0, 0.5, 0.5],
        "reward": [0.0, 2.0, 1.0, 1.0, 1.0],
        "done": [False, True, False, False, False],
        "target__pi": [0.25, 0.5, 1.0, 1.0, 1.0],
    }
)
G = 0.5
RR = (0.0, 2.0)
KW = dict(gamma=G, tail_value=0.0, reward_range=RR, horizon=3, weight_bound=2.0)
# W_t = 2^(t+1) = [2, 4, 8]; S_L = [1, 1.5, 1.75]; returns in [0, 2 * 1.75]
PDIS_RANGE = (0.0, 2 * (2 + 0.5 * 4 + 0.25 * 8))  # 12
IS_RANGE = (0.0, 2 * max(2 * 1.0, 4 * 1.5, 8 * 1.75))  # 28
VALUE_RANGE = (0.0, 3.5)


@pytest.fixture(scope="module")
def hand() -> Trajectories:
    return read_trajectories(HAND)


def test_hand_pdis_intervals(hand):
    res = sequential_estimate(hand, "pi", estimator="pdis", **KW)
    terms = np.array([6.0, 0.5])
    assert res.value == pytest.approx(terms.mean())
    hi = hoeffding_interval(terms.mean(), 2, low=PDIS_RANGE[0], high=PDIS_RANGE[1])
    assert tuple(res.ci(method="hoeffding")) == pytest.approx(
        (max(hi.low, VALUE_RANGE[0]), min(hi.high, VALUE_RANGE[1]))
    )
    be = bernstein_interval(
        terms.mean(), terms.var(ddof=1), 2, low=0.0, high=12.0, confidence_level=0.8
    )
    assert tuple(res.ci(0.8, method="bernstein")) == pytest.approx(
        (max(be.low, 0.0), min(be.high, 3.5))
    )
    bt = betting_interval(np.ones(2), terms, reward_range=PDIS_RANGE)
    assert tuple(res.ci(method="betting")) == pytest.approx((max(bt.low, 0.0), min(bt.high, 3.5)))


def test_hand_is_intervals(hand):
    res = sequential_estimate(hand, "pi", estimator="is", **KW)
    terms = np.array([8.0, 0.75])
    h = hoeffding_interval(terms.mean(), 2, low=IS_RANGE[0], high=IS_RANGE[1], confidence_level=0.5)
    assert tuple(res.ci(0.5, method="hoeffding")) == pytest.approx(
        (max(h.low, 0.0), min(h.high, 3.5))
    )
    # betting for IS: weights W_i and returns G_i in [0, 3.5], no weight bound needed
    bt = betting_interval([4.0, 1.0], [2.0, 0.75], reward_range=VALUE_RANGE)
    free = sequential_estimate(
        hand, "pi", estimator="is", gamma=G, tail_value=0.0, reward_range=RR, horizon=3
    )
    assert tuple(free.ci(method="betting")) == pytest.approx(tuple(bt))


def test_stored_interval_and_clipped_ranges(hand):
    # clip level 3 caps W_t = [2, 4, 8] at [2, 3, 3]: PDIS range 2 * (2 + 1.5 + 0.75) = 8.5;
    # clipped episode-10 term 2 + 0.5 * 3 * 2 = 5; clipped values lie in [0, 3.5] as well
    res = sequential_estimate(hand, "pi", estimator="pdis", ci="hoeffding", max_weight=3.0, **KW)
    h = hoeffding_interval(2.75, 2, low=0.0, high=8.5)
    assert res.ci_method == "hoeffding"
    assert (res.ci_low, res.ci_high) == pytest.approx((max(h.low, 0.0), min(h.high, 3.5)))
    assert any("clipped value" in note for note in res.notes)
    # max_weight alone bounds the weights: W_t = 3 for every t, range 2 * 3 * 1.75 = 10.5
    alone = {k: v for k, v in KW.items() if k != "weight_bound"}
    res = sequential_estimate(hand, "pi", estimator="pdis", max_weight=3.0, **alone)
    h = hoeffding_interval(2.75, 2, low=0.0, high=10.5, confidence_level=0.2)
    assert tuple(res.ci(0.2, "hoeffding")) == pytest.approx((max(h.low, 0.0), min(h.high, 3.5)))


def test_cumulative_weight_bounds_as_array(hand):
    # bounds on w_{0:t} directly: [2, 4, 1] hold for the data (w = [2, 4] and [0.5, 0.5, 1])
    kw = dict(KW, weight_bound=np.array([2.0, 4.0, 1.0]))
    res = sequential_estimate(hand, "pi", estimator="pdis", **kw)
    h = hoeffding_interval(3.25, 2, low=0.0, high=2 * (2 + 2 + 0.25), confidence_level=0.3)
    assert tuple(res.ci(0.3, "hoeffding")) == pytest.approx((h.low, min(h.high, 3.5)))
    with pytest.raises(ValidationError, match="cumulative weights"):
        sequential_estimate(hand, "pi", estimator="pdis", **dict(KW, weight_bound=[2, 3, 8]))
    with pytest.raises(ParameterError, match="one bound per step"):
        sequential_estimate(hand, "pi", estimator="pdis", **dict(KW, weight_bound=[2, 4]))


def test_missing_bounds_are_named(hand):
    est = sequential_estimate(hand, "pi", estimator="pdis", gamma=G, tail_value=0.0)
    with pytest.raises(MissingBoundsError, match="reward_range"):
        est.ci(method="hoeffding")
    no_h = sequential_estimate(
        hand, "pi", estimator="pdis", gamma=G, tail_value=0.0, reward_range=RR
    )
    with pytest.raises(MissingBoundsError, match="horizon="):
        no_h.ci(method="bernstein")
    no_w = sequential_estimate(
        hand, "pi", estimator="pdis", gamma=G, tail_value=0.0, reward_range=RR, horizon=3
    )
    for method in ("hoeffding", "bernstein", "betting"):
        with pytest.raises(MissingBoundsError, match="weight_bound="):
            no_w.ci(method=method)
    # the bound can come later, to ci(); it is checked against the data there too
    assert no_w.ci(method="hoeffding", weight_bound=2.0) == sequential_estimate(
        hand, "pi", estimator="pdis", **KW
    ).ci(method="hoeffding")
    with pytest.raises(ValidationError, match="not a bound"):
        no_w.ci(method="hoeffding", weight_bound=1.5)
    with pytest.raises(MissingBoundsError, match="reward range"):
        sequential_estimate(
            hand, "pi", estimator="is", gamma=G, ci="betting", horizon=3, tail_value=0.0
        )


def test_bounds_broken_by_the_data(hand):
    with pytest.raises(ValidationError, match="not a bound on these weights"):
        sequential_estimate(hand, "pi", estimator="pdis", **dict(KW, weight_bound=1.9))
    with pytest.raises(ValidationError, match="horizon=2 is not a bound"):
        sequential_estimate(hand, "pi", estimator="pdis", **dict(KW, horizon=2))
    with pytest.raises(ValidationError, match="outside reward_range"):
        sequential_estimate(hand, "pi", estimator="pdis", **dict(KW, reward_range=(0.0, 1.0)))
    # "logged": the caller states the longest logged episode (3 steps) is the horizon
    logged = sequential_estimate(hand, "pi", estimator="pdis", **dict(KW, horizon="logged"))
    assert logged.ci(method="hoeffding") == sequential_estimate(
        hand, "pi", estimator="pdis", **KW
    ).ci(method="hoeffding")


def test_refusals(hand):
    for estimator in ("wis", "wpdis"):
        res = sequential_estimate(
            hand, "pi", estimator=estimator, gamma=G, tail_value=0.0, reward_range=RR
        )
        with pytest.raises(EstimationError, match="does not apply"):
            res.ci(method="hoeffding")
        with pytest.raises(ParameterError, match="'is' and 'pdis' only"):
            sequential_estimate(hand, "pi", estimator=estimator, gamma=G, horizon=3)
    with pytest.raises(ParameterError, match="ci='bootstrap' is random"):
        sequential_estimate(hand, "pi", estimator="pdis", ci="bootstrap", **KW)
    with pytest.raises(ParameterError, match="`ci` must be one of"):
        sequential_estimate(hand, "pi", estimator="pdis", ci="bottou", **KW)
    with pytest.raises(ParameterError, match="horizon"):
        sequential_estimate(hand, "pi", estimator="pdis", **dict(KW, horizon="max"))
    tail = sequential_estimate(hand, "pi", estimator="pdis", **dict(KW, tail_value=1.0))
    with pytest.raises(EstimationError, match="tail values"):
        tail.ci(method="hoeffding")
    res = sequential_estimate(hand, "pi", estimator="is", **KW)
    with pytest.raises(ParameterError, match="needs no weight bound"):
        res.ci(method="betting", weight_bound=2.0)
    with pytest.raises(EstimationError, match="overflows"):
        sequential_estimate(
            hand, "pi", estimator="pdis", **dict(KW, weight_bound=1e200, horizon=3)
        ).ci(method="hoeffding")


# ---------------------------------------------------------------------------------------------
# coverage against exact values on the tabular MDP
# ---------------------------------------------------------------------------------------------
ENV_KW = dict(n_states=4, n_actions=2, horizon=4, gamma=0.9, seed=3)
CLIP = 2.0
METHODS = ("hoeffding", "bernstein", "betting")


def _env() -> TabularMDP:
    base = TabularMDP(**ENV_KW)
    mix = 0.5 * base.policy_table("logging") + 0.5 * base.policy_table("softmax")
    return TabularMDP(**ENV_KW, policies={"mix": mix})


def _exact_values(env: TabularMDP, policy: str, clip: float) -> dict[str, float]:
    """Exact ``E_b[min(w_{L-1}, c) G]`` and ``E_b[sum_t g^t min(w_t, c) r_t]`` by enumerating
    every state-action prefix (vectorized over prefixes; one pass per step)."""
    b, pi = env.policy_table("logging"), env.policy_table(policy)
    p_next, r_mean = env.transitions, env.reward_means
    n_s, n_a = b.shape
    state = np.arange(n_s)
    prob, w, ret = env.initial_distribution.copy(), np.ones(n_s), np.zeros(n_s)
    out = {"is": 0.0, "pdis": 0.0}
    for t in range(env.horizon):
        s = np.repeat(state, n_a)
        a = np.tile(np.arange(n_a), state.size)
        pa = np.repeat(prob, n_a) * b[s, a]
        wt = np.repeat(w, n_a) * pi[s, a] / b[s, a]
        gt = np.repeat(ret, n_a) + env.gamma**t * r_mean[s, a]
        out["pdis"] += float(np.sum(pa * np.minimum(wt, clip) * env.gamma**t * r_mean[s, a]))
        end = np.ones_like(pa) if t == env.horizon - 1 else p_next[s, a, n_s]
        out["is"] += float(np.sum(pa * end * np.minimum(wt, clip) * gt))
        state = np.tile(np.arange(n_s), s.size)
        prob = np.repeat(pa, n_s) * p_next[s, a, :n_s].ravel()
        w, ret = np.repeat(wt, n_s), np.repeat(gt, n_s)
    return out


def test_exact_enumeration_matches_dynamic_programming():
    env = _env()
    exact = _exact_values(env, "mix", math.inf)
    assert exact["is"] == pytest.approx(env.true_value("mix"), rel=1e-12)
    assert exact["pdis"] == pytest.approx(env.true_value("mix"), rel=1e-12)


def _coverage(
    n_episodes: int, reps: int, seed: int
) -> dict[tuple[str, bool, str], tuple[float, float]]:
    """Coverage and mean width of each (estimator, clipped, method) over ``reps`` disjoint
    replications."""
    env = _env()
    truth = env.true_value("mix")
    clipped_truth = _exact_values(env, "mix", CLIP)
    bound = float((env.policy_table("mix") / env.policy_table("logging")).max())  # a priori
    traj = read_trajectories(env.sample(n_episodes * reps, rng=seed))
    s = traj.episode_starts
    hits: dict[tuple[str, bool, str], list[tuple[bool, float]]] = {}
    for k in range(reps):
        lo, hi = s[k * n_episodes], s[(k + 1) * n_episodes]
        block = Trajectories(traj.table.slice(lo, hi - lo), traj.report)
        for estimator in ("is", "pdis"):
            for clipped in (False, True):
                res = sequential_estimate(
                    block,
                    "mix",
                    estimator=estimator,
                    gamma=env.gamma,
                    tail_value=0.0,
                    reward_range=env.reward_range,
                    horizon=env.horizon,
                    weight_bound=bound,
                    max_weight=CLIP if clipped else None,
                )
                for method in METHODS:
                    # hoeffding/bernstein cover the estimand (clipped value when clipping);
                    # betting of 'is' covers the candidate's value in both cases
                    target = truth
                    if clipped and not (estimator == "is" and method == "betting"):
                        target = clipped_truth[estimator]
                    c_lo, c_hi = res.ci(0.95, method)
                    hits.setdefault((estimator, clipped, method), []).append(
                        (c_lo <= target <= c_hi, c_hi - c_lo)
                    )
    return {key: tuple(np.mean(v, axis=0)) for key, v in hits.items()}


@pytest.mark.slow  # statistical validation: coverage over hundreds of replications
@pytest.mark.parametrize(("n_episodes", "reps", "seed"), [(30, 1000, 11), (1000, 300, 12)])
def test_bounded_coverage_at_least_nominal(n_episodes, reps, seed):
    # 95% intervals: every one of the 12 (estimator x clipping x method) at or above nominal
    coverage = _coverage(n_episodes, reps, seed)
    assert len(coverage) == 12
    low = {key: c for key, (c, _) in coverage.items() if c < 0.95}
    assert not low, low
    if n_episodes < 1000:
        # at 30 episodes only the betting interval of 'is' is narrower than the whole range
        assert coverage[("is", False, "betting")][1] < 0.7 * 3.44
    else:
        # and informative: the value can lie anywhere in [0, S_4] = [0, 3.44]; Bernstein and
        # betting narrow that to well under a third (a coverage of 1 is no free pass)
        wide = {key: w for key, (_, w) in coverage.items() if key[2] != "hoeffding" and w > 1.0}
        assert not wide, wide
