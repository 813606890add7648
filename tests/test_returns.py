"""Returns, TD errors, lambda-returns and GAE: a per-episode loop reference, exact DP values on
TabularMDP in expectation, the truncation guard, argument and data errors."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ope.exceptions import EstimationError, ParameterError, SchemaError, ValidationError
from ope.io import read_trajectories
from ope.logs import Trajectories
from ope.returns import discounted_returns, gae, lambda_returns, td_errors
from ope.simulate import TabularMDP

TOL = {"rtol": 1e-12, "atol": 1e-12}


# ---------------------------------------------------------------------------------------------
# the reference: a straightforward Python loop per episode, from the definitions
# ---------------------------------------------------------------------------------------------
def _split(starts, *arrays):
    """Yield per-episode slices of each array."""
    for e in range(len(starts) - 1):
        sl = slice(starts[e], starts[e + 1])
        yield e, tuple(a[sl] for a in arrays)


def ref_returns(r, starts, truncated, tail, gamma):
    """G_t = sum_{k>=t} gamma^(k-t) r_k + gamma^(L-t) tail [truncated], term by term."""
    out = []
    for e, (re,) in _split(starts, r):
        L = len(re)
        boot = tail[e] if truncated[e] else 0.0
        for t in range(L):
            g = sum(gamma ** (k - t) * re[k] for k in range(t, L))
            out.append(g + gamma ** (L - t) * boot)
    return np.array(out)


def ref_td(r, v, starts, truncated, tail, gamma):
    out = []
    for e, (re, ve) in _split(starts, r, v):
        L = len(re)
        for t in range(L):
            if t + 1 < L:
                nxt = ve[t + 1]
            else:
                nxt = tail[e] if truncated[e] else 0.0
            out.append(re[t] + gamma * nxt - ve[t])
    return np.array(out)


def ref_lambda(r, v, starts, truncated, tail, gamma, lam):
    """G^lam_t = r_t + gamma((1 - lam) V_{t+1} + lam G^lam_{t+1}), backwards per episode."""
    out = []
    for e, (re, ve) in _split(starts, r, v):
        L = len(re)
        boot = tail[e] if truncated[e] else 0.0
        g = [0.0] * L
        for t in reversed(range(L)):
            if t == L - 1:
                g[t] = re[t] + gamma * boot
            else:
                g[t] = re[t] + gamma * ((1 - lam) * ve[t + 1] + lam * g[t + 1])
        out.extend(g)
    return np.array(out)


def ref_vtrace_adv(r, v, rho, starts, truncated, tail, gamma, lam, c_bar, rho_bar):
    """v_s - V(s_s) = sum_t gamma^(t-s) (prod_{i=s}^{t-1} lam min(c_bar, rho_i))
    min(rho_bar, rho_t) delta_t (Espeholt et al. 2018, eq. 1), as a double loop."""
    delta = ref_td(r, v, starts, truncated, tail, gamma)
    out = []
    for _, (de, pe) in _split(starts, delta, rho):
        L = len(de)
        for s in range(L):
            acc = 0.0
            for t in range(s, L):
                trace = 1.0
                for i in range(s, t):
                    trace *= lam * min(c_bar, pe[i])
                acc += gamma ** (t - s) * trace * min(rho_bar, pe[t]) * de[t]
            out.append(acc)
    return np.array(out)


def ref_gae(r, v, starts, truncated, tail, gamma, lam):
    """A_t = sum_k (gamma lam)^k delta_{t+k}, term by term."""
    ones = np.ones(len(r))
    return ref_vtrace_adv(r, v, ones, starts, truncated, tail, gamma, lam, 1.0, 1.0)


def random_episodes(rng, n_episodes=25, max_len=30, p_trunc=0.5):
    lengths = rng.integers(1, max_len + 1, size=n_episodes)
    starts = np.concatenate(([0], np.cumsum(lengths)))
    n = int(starts[-1])
    truncated = rng.random(n_episodes) < p_trunc
    done = np.zeros(n, dtype=bool)
    done[starts[1:] - 1] = ~truncated
    return {
        "lengths": lengths,
        "starts": starts,
        "truncated": truncated,
        "done": done,
        "reward": rng.normal(size=n),
        "values": rng.normal(size=n),
        "ratios": rng.lognormal(sigma=0.7, size=n),
        "tail": rng.normal(size=n_episodes) * 3.0,
        "episode_id": np.repeat(rng.permutation(n_episodes) * 7 + 3, lengths),
    }


@pytest.fixture(scope="module")
def eps():
    return random_episodes(
        np.random.default_rng(20260),
    )


def _kw(d):
    return {"done": d["done"], "episode_starts": d["starts"][:-1], "tail_value": d["tail"]}


GAMMAS = [0.0, 0.5, 0.9, 1.0]
LAMS = [0.0, 0.3, 0.95, 1.0]


# ---------------------------------------------------------------------------------------------
# equal to the loop reference
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("gamma", GAMMAS)
def test_discounted_returns_equal_the_loop(eps, gamma):
    d = eps
    ref = ref_returns(d["reward"], d["starts"], d["truncated"], d["tail"], gamma)
    got = discounted_returns(d["reward"], gamma=gamma, **_kw(d))
    assert got.dtype == np.float64 and got.shape == d["reward"].shape
    np.testing.assert_allclose(got, ref, **TOL)


@pytest.mark.parametrize("gamma", GAMMAS)
def test_td_errors_equal_the_loop(eps, gamma):
    d = eps
    ref = ref_td(d["reward"], d["values"], d["starts"], d["truncated"], d["tail"], gamma)
    got = td_errors(d["reward"], values=d["values"], gamma=gamma, **_kw(d))
    np.testing.assert_allclose(got, ref, **TOL)


@pytest.mark.parametrize("gamma", GAMMAS)
@pytest.mark.parametrize("lam", LAMS)
def test_lambda_returns_and_gae_equal_the_loop(eps, gamma, lam):
    d = eps
    args = (d["reward"], d["values"], d["starts"], d["truncated"], d["tail"], gamma)
    lr = lambda_returns(d["reward"], values=d["values"], gamma=gamma, lam=lam, **_kw(d))
    adv = gae(d["reward"], values=d["values"], gamma=gamma, lam=lam, **_kw(d))
    np.testing.assert_allclose(lr, ref_lambda(*args, lam), **TOL)
    np.testing.assert_allclose(adv, ref_gae(*args, lam), **TOL)


@pytest.mark.parametrize("gamma", GAMMAS)
def test_limits_in_lambda(eps, gamma):
    d = eps
    kw = {"values": d["values"], "gamma": gamma, **_kw(d)}
    ret = discounted_returns(d["reward"], gamma=gamma, **_kw(d))
    td = td_errors(d["reward"], **kw)
    # lam = 1: returns minus values; lam = 0: TD errors
    np.testing.assert_allclose(gae(d["reward"], lam=1.0, **kw), ret - d["values"], **TOL)
    np.testing.assert_allclose(gae(d["reward"], lam=0.0, **kw), td, **TOL)
    np.testing.assert_allclose(lambda_returns(d["reward"], lam=1.0, **kw), ret, **TOL)
    np.testing.assert_allclose(lambda_returns(d["reward"], lam=0.0, **kw), td + d["values"], **TOL)


@pytest.mark.parametrize("gamma", [0.0, 0.9, 1.0])
@pytest.mark.parametrize("lam", [0.0, 0.7, 1.0])
@pytest.mark.parametrize("c_bar,rho_bar", [(None, None), (1.0, 1.0), (1.0, None), (0.5, 2.0)])
def test_off_policy_targets_equal_the_vtrace_loop(eps, gamma, lam, c_bar, rho_bar):
    d = eps
    ref = ref_vtrace_adv(
        d["reward"],
        d["values"],
        d["ratios"],
        d["starts"],
        d["truncated"],
        d["tail"],
        gamma,
        lam,
        math.inf if c_bar is None else c_bar,
        math.inf if rho_bar is None else rho_bar,
    )
    kw = {
        "values": d["values"],
        "gamma": gamma,
        "lam": lam,
        "ratios": d["ratios"],
        "max_ratio": c_bar,
        "max_td_ratio": rho_bar,
        **_kw(d),
    }
    np.testing.assert_allclose(gae(d["reward"], **kw), ref, **TOL)
    np.testing.assert_allclose(lambda_returns(d["reward"], **kw), d["values"] + ref, **TOL)
    # discounted_returns with ratios: the same with V = 0 and lam = 1
    zero = np.zeros_like(d["values"])
    ref0 = ref_vtrace_adv(
        d["reward"],
        zero,
        d["ratios"],
        d["starts"],
        d["truncated"],
        d["tail"],
        gamma,
        1.0,
        math.inf if c_bar is None else c_bar,
        math.inf if rho_bar is None else rho_bar,
    )
    got0 = discounted_returns(
        d["reward"],
        gamma=gamma,
        ratios=d["ratios"],
        max_ratio=c_bar,
        max_td_ratio=rho_bar,
        **_kw(d),
    )
    np.testing.assert_allclose(got0, ref0, **TOL)


def test_unit_ratios_give_the_on_policy_targets(eps):
    d = eps
    kw = {"values": d["values"], "gamma": 0.9, "lam": 0.8, **_kw(d)}
    ones = np.ones_like(d["reward"])
    np.testing.assert_allclose(gae(d["reward"], ratios=ones, **kw), gae(d["reward"], **kw), **TOL)


def test_episode_id_and_trajectories_give_the_same_values(eps):
    d = eps
    by_starts = gae(d["reward"], values=d["values"], gamma=0.9, lam=0.8, **_kw(d))
    by_id = gae(
        d["reward"],
        values=d["values"],
        gamma=0.9,
        lam=0.8,
        done=d["done"],
        episode_id=d["episode_id"],
        tail_value=d["tail"],
    )
    np.testing.assert_array_equal(by_id, by_starts)
    # ope.Trajectories: read_trajectories sorts by (episode_id, step), so shuffle the rows
    step = np.arange(d["reward"].size) - np.repeat(d["starts"][:-1], d["lengths"])
    last = np.zeros(d["reward"].size, dtype=bool)
    last[d["starts"][1:] - 1] = True
    tail_next = np.where(last, np.repeat(d["tail"], d["lengths"]), np.nan)
    frame = pd.DataFrame(
        {
            "episode_id": d["episode_id"],
            "step": step,
            "action": 0,
            "propensity": 1.0,
            "reward": d["reward"],
            "done": d["done"],
            "v": d["values"],
            "v_next": tail_next,
        }
    )
    traj = read_trajectories(frame.sample(frac=1.0, random_state=0))
    order = np.lexsort((step, d["episode_id"]))
    got = gae(traj, values="v", gamma=0.9, lam=0.8, tail_value="v_next")
    np.testing.assert_allclose(got, by_starts[order], **TOL)
    got = gae(traj, values=traj.column("v"), gamma=0.9, lam=0.8, tail_value="v_next")
    np.testing.assert_allclose(got, by_starts[order], **TOL)


def test_every_form_of_tail_value_gives_the_same_values(eps):
    d = eps
    kw = {
        "values": d["values"],
        "gamma": 0.9,
        "lam": 0.5,
        "done": d["done"],
        "episode_starts": d["starts"],
    }  # the (E + 1,) offsets form, as Trajectories have
    per_episode = np.where(d["truncated"], d["tail"], np.nan)  # terminated: ignored
    per_truncated = d["tail"][d["truncated"]]
    per_step = np.repeat(d["tail"], d["lengths"])  # V(s_{t+1}); only last rows are read
    per_step[:-1] += 1000.0 * (np.diff(np.repeat(np.arange(d["lengths"].size), d["lengths"])) == 0)
    base = gae(d["reward"], tail_value=d["tail"], **kw)
    for form in (per_episode, per_truncated, per_step):
        np.testing.assert_array_equal(gae(d["reward"], tail_value=form, **kw), base)
    # a scalar is the same value for every truncated episode
    const = gae(d["reward"], tail_value=2.5, **kw)
    np.testing.assert_array_equal(
        const, gae(d["reward"], tail_value=np.full(d["tail"].size, 2.5), **kw)
    )


def test_tail_value_is_not_used_after_termination():
    r = np.array([1.0, 2.0, 3.0])
    done = np.array([False, False, True])
    for tail in (0.0, 123.0, np.nan):
        np.testing.assert_array_equal(
            discounted_returns(r, done=done, episode_starts=[0], gamma=1.0, tail_value=tail),
            [6.0, 5.0, 3.0],
        )
        np.testing.assert_array_equal(
            discounted_returns(r, done=done, episode_starts=[0], gamma=1.0), [6.0, 5.0, 3.0]
        )


def test_hand_computed_small_case():
    # episode A (rows 0-1) terminates, episode B (row 2) is truncated with V(s_L) = 4
    r, v = [1.0, 2.0, 0.5], [3.0, 1.0, 2.0]
    kw = {"done": [False, True, False], "episode_starts": [0, 2], "tail_value": 4.0}
    np.testing.assert_allclose(discounted_returns(r, gamma=0.5, **kw), [2.0, 2.0, 2.5])
    # delta: 1 + 0.5*1 - 3 = -1.5; 2 + 0 - 1 = 1; 0.5 + 0.5*4 - 2 = 0.5
    np.testing.assert_allclose(td_errors(r, values=v, gamma=0.5, **kw), [-1.5, 1.0, 0.5])
    # gae lam = 0.5: -1.5 + 0.25*1 = -1.25
    np.testing.assert_allclose(gae(r, values=v, gamma=0.5, lam=0.5, **kw), [-1.25, 1.0, 0.5])
    np.testing.assert_allclose(
        lambda_returns(r, values=v, gamma=0.5, lam=0.5, **kw), [1.75, 2.0, 2.5]
    )


def test_no_cancellation_between_episodes_of_different_scale():
    # a long, huge-reward episode before a tiny one: a cumulative sum over the whole array with
    # subtraction at the boundaries would leave the tiny episode with rounding noise of 1e-8
    rng = np.random.default_rng(3)
    big = 1e8 * (1.0 + rng.random(2000))
    small = 1e-8 * (1.0 + rng.random(50))
    r = np.concatenate([big, small])
    done = np.zeros(r.size, dtype=bool)
    done[[1999, r.size - 1]] = True
    got = discounted_returns(r, done=done, episode_starts=[0, 2000], gamma=0.99)
    ref = ref_returns(small, [0, 50], [False], [0.0], 0.99)
    np.testing.assert_allclose(got[2000:], ref, rtol=1e-13, atol=0)
    assert discounted_returns(r, done=done, episode_starts=[0, 2000], gamma=1.0)[0] == (
        pytest.approx(math.fsum(big), rel=1e-13)
    )


def test_empty_and_single_step_episodes():
    empty = discounted_returns(np.zeros(0), done=np.zeros(0, bool), episode_starts=[0], gamma=0.9)
    assert empty.shape == (0,) and empty.dtype == np.float64
    assert gae(
        np.zeros(0), values=np.zeros(0), done=np.zeros(0, bool), episode_id=[], gamma=0.9, lam=0.9
    ).shape == (0,)
    r = np.array([1.0, 2.0, 3.0])
    got = gae(
        r,
        values=[0.5, 0.5, 0.5],
        done=[True, False, True],
        episode_starts=[0, 1, 2],
        gamma=0.5,
        lam=1.0,
        tail_value=10.0,
    )
    np.testing.assert_allclose(got, [0.5, 2.0 + 5.0 - 0.5, 2.5])


# ---------------------------------------------------------------------------------------------
# property test: random episode structures against the loop
# ---------------------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 12), min_size=1, max_size=8),
    seed=st.integers(0, 2**32 - 1),
    gamma=st.sampled_from([0.0, 0.3, 0.99, 1.0]) | st.floats(0.0, 1.0),
    lam=st.sampled_from([0.0, 1.0]) | st.floats(0.0, 1.0),
    off_policy=st.booleans(),
)
def test_property_random_structures_match_the_loop(lengths, seed, gamma, lam, off_policy):
    rng = np.random.default_rng(seed)
    lengths = np.array(lengths)
    starts = np.concatenate(([0], np.cumsum(lengths)))
    n = int(starts[-1])
    truncated = rng.random(lengths.size) < 0.5
    done = np.zeros(n, dtype=bool)
    done[starts[1:] - 1] = ~truncated
    r, v = rng.normal(size=n), rng.normal(size=n)
    tail = rng.normal(size=lengths.size)
    rho = rng.lognormal(size=n) if off_policy else np.ones(n)
    c_bar, rho_bar = (1.0, 1.5) if off_policy else (math.inf, math.inf)
    kw = {"done": done, "episode_starts": starts[:-1], "tail_value": tail}
    off = {"ratios": rho, "max_ratio": c_bar, "max_td_ratio": rho_bar} if off_policy else {}
    ref = ref_vtrace_adv(r, v, rho, starts, truncated, tail, gamma, lam, c_bar, rho_bar)
    np.testing.assert_allclose(gae(r, values=v, gamma=gamma, lam=lam, **kw, **off), ref, **TOL)
    np.testing.assert_allclose(
        td_errors(r, values=v, gamma=gamma, **kw),
        ref_td(r, v, starts, truncated, tail, gamma),
        **TOL,
    )
    np.testing.assert_allclose(
        discounted_returns(r, gamma=gamma, **kw),
        ref_returns(r, starts, truncated, tail, gamma),
        **TOL,
    )


# ---------------------------------------------------------------------------------------------
# exact dynamic-programming values on TabularMDP, in expectation
# ---------------------------------------------------------------------------------------------
N_EPISODES = 4000
Z = 4.0  # standard errors allowed; the seeds are fixed, so these tests are deterministic


@pytest.fixture(scope="module")
def mdp():
    """On-policy episodes, truncated at the horizon, and the exact untruncated V of the
    behaviour policy (so that V(next_state) is the right tail after a truncation)."""
    env = TabularMDP(
        n_states=6, n_actions=3, horizon=20, gamma=0.95, termination_probability=0.03, seed=1
    )
    traj = read_trajectories(env.sample(N_EPISODES, rng=11))
    pi = env.policy_table("logging")
    v_true = np.einsum("sa,sa->s", pi, env.discounted_q_function("logging"))
    state = traj.column("state")
    nxt = traj.column("next_state")
    v = v_true[state]
    v_next = np.where(nxt >= 0, v_true[np.maximum(nxt, 0)], 0.0)
    return env, traj, v, v_next


def _mean_and_se(x):
    return float(np.mean(x)), float(np.std(x, ddof=1) / math.sqrt(x.size))


def test_returns_mean_equals_the_exact_value(mdp):
    env, traj, _, v_next = mdp
    first = traj.episode_starts[:-1]
    assert traj.truncated.mean() > 0.3  # truncation matters in this environment
    g = discounted_returns(traj, gamma=env.gamma, tail_value=v_next)
    mean, se = _mean_and_se(g[first])
    truth = env.true_value("logging", horizon=math.inf)
    assert abs(mean - truth) < Z * se
    # treating truncation as termination estimates the H-step value instead: off by many SEs
    g0 = discounted_returns(traj, gamma=env.gamma, tail_value=0.0)
    mean0, se0 = _mean_and_se(g0[first])
    assert abs(mean0 - env.true_value("logging")) < Z * se0  # horizon-H truth
    assert truth - mean0 > 10 * se0


def test_td_errors_under_the_true_values_have_mean_zero_at_every_step(mdp):
    env, traj, v, v_next = mdp
    delta = td_errors(traj, values=v, gamma=env.gamma, tail_value=v_next)
    step = traj.column("step")
    for t in np.unique(step):
        mean, se = _mean_and_se(delta[step == t])
        assert abs(mean) < Z * se, (t, mean, se)
    # the last step (H - 1): episodes that terminate there and episodes truncated there
    # (conditioning on "truncated" alone would select on the transition's outcome)
    last_step = step == env.horizon - 1
    assert traj.truncated.sum() > 100 and last_step.sum() == traj.truncated.sum() + int(
        traj.column("done")[last_step].sum()
    )
    mean, se = _mean_and_se(delta[last_step])
    assert abs(mean) < Z * se
    # the bug the API prevents: truncation as termination shifts the last step's mean error
    # by -gamma E[V(s_H) 1(truncated)]
    delta0 = td_errors(traj, values=v, gamma=env.gamma, tail_value=0.0)
    mean0, se0 = _mean_and_se(delta0[last_step])
    assert mean0 < -10 * se0
    assert mean0 == pytest.approx(mean - env.gamma * v_next[last_step].mean(), rel=1e-9)
    # elsewhere the errors are the same
    np.testing.assert_array_equal(delta0[~last_step], delta[~last_step])


@pytest.mark.parametrize("lam", [0.0, 0.5, 1.0])
def test_gae_under_the_true_values_has_mean_zero(mdp, lam):
    env, traj, v, v_next = mdp
    first = traj.episode_starts[:-1]
    adv = gae(traj, values=v, gamma=env.gamma, lam=lam, tail_value=v_next)
    mean, se = _mean_and_se(adv[first])
    assert abs(mean) < Z * se


@pytest.fixture(scope="module")
def off_policy_mdp():
    """Behaviour-policy episodes with the ratios and exact untruncated V of a target."""
    env = TabularMDP(
        n_states=5, n_actions=3, horizon=10, gamma=0.9, termination_probability=0.05, seed=4
    )
    traj = read_trajectories(env.sample(N_EPISODES, rng=5))
    target = "epsilon_greedy"
    rho = traj.column("target__" + target) / traj.column("propensity")
    pi = env.policy_table(target)
    v_true = np.einsum("sa,sa->s", pi, env.discounted_q_function(target))
    state, nxt = traj.column("state"), traj.column("next_state")
    v = v_true[state]
    v_next = np.where(nxt >= 0, v_true[np.maximum(nxt, 0)], 0.0)
    return env, traj, target, rho, v, v_next


def test_importance_weighted_returns_are_unbiased_for_the_target(off_policy_mdp):
    env, traj, target, rho, _, v_next = off_policy_mdp
    first = traj.episode_starts[:-1]
    g = discounted_returns(traj, gamma=env.gamma, tail_value=v_next, ratios=rho)
    mean, se = _mean_and_se(g[first])
    truth = env.true_value(target, horizon=math.inf)
    assert abs(mean - truth) < Z * se
    # the on-policy return of the same logs estimates the behaviour policy instead
    # (its tail is the behaviour policy's value of the state left in)
    v_mu = np.einsum("sa,sa->s", env.policy_table("logging"), env.discounted_q_function("logging"))
    nxt = traj.column("next_state")
    tail_mu = np.where(nxt >= 0, v_mu[np.maximum(nxt, 0)], 0.0)
    on_mean, on_se = _mean_and_se(
        discounted_returns(traj, gamma=env.gamma, tail_value=tail_mu)[first]
    )
    assert abs(on_mean - env.true_value("logging", horizon=math.inf)) < Z * on_se
    assert abs(on_mean - truth) > 10 * on_se


@pytest.mark.parametrize("lam,c_bar", [(1.0, None), (0.5, None), (0.5, 1.0), (1.0, 1.0)])
def test_vtrace_targets_with_the_true_values_are_unbiased(off_policy_mdp, lam, c_bar):
    # with V = V^pi and unclipped TD ratios, E[rho_t delta_t | past] = 0 at every step, so the
    # targets are unbiased for any lambda and any trace clip level (Retrace-style cutting)
    env, traj, target, rho, v, v_next = off_policy_mdp
    first = traj.episode_starts[:-1]
    adv = gae(
        traj, values=v, gamma=env.gamma, lam=lam, tail_value=v_next, ratios=rho, max_ratio=c_bar
    )
    mean, se = _mean_and_se(adv[first])
    assert abs(mean) < Z * se


# ---------------------------------------------------------------------------------------------
# truncation without a tail value is refused
# ---------------------------------------------------------------------------------------------
def test_truncation_without_tail_value_is_refused(mdp):
    env, traj, v, _ = mdp
    n_trunc = int(traj.truncated.sum())
    msg = rf"^{n_trunc} of {traj.n_episodes} episodes are truncated .*tail_value="
    for call in (
        lambda: discounted_returns(traj, gamma=0.9),
        lambda: td_errors(traj, values=v, gamma=0.9),
        lambda: lambda_returns(traj, values=v, gamma=0.9, lam=0.5),
        lambda: gae(traj, values=v, gamma=0.9, lam=0.5),
    ):
        with pytest.raises(EstimationError, match=msg):
            call()


def test_terminated_episodes_need_no_tail_value():
    got = td_errors(
        [1.0, 1.0], values=[0.0, 0.0], done=[True, True], episode_starts=[0, 1], gamma=0.9
    )
    np.testing.assert_array_equal(got, [1.0, 1.0])


# ---------------------------------------------------------------------------------------------
# bad arguments and bad data
# ---------------------------------------------------------------------------------------------
R = np.array([1.0, 0.0, 2.0, 1.0])
DONE = np.array([False, True, False, True])
BASE = {"done": DONE, "episode_starts": [0, 2]}


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        (
            {"gamma": 1.5},
            ParameterError,
            r"`gamma` \(discount factor\) must be in \[0, 1\]; got 1.5",
        ),
        ({"gamma": -0.1}, ParameterError, r"`gamma` .* must be in \[0, 1\]"),
        ({"gamma": float("nan")}, ParameterError, r"`gamma` .* must be in \[0, 1\]; got nan"),
        ({"gamma": "0.9"}, ParameterError, r"`gamma` must be a number; got '0.9'"),
        (
            {"lam": -0.1},
            ParameterError,
            r"`lam` \(the lambda of TD\(lambda\)\) must be in \[0, 1\]; got -0.1",
        ),
        ({"lam": 2}, ParameterError, r"`lam` .* got 2"),
        (
            {"values": [1.0, 2.0, 3.0]},
            ValidationError,
            r"`values` has 3 rows but the data have 4 steps",
        ),
        (
            {"values": [1.0, np.nan, 2.0, 0.0]},
            ValidationError,
            r"`values` must be finite; 1 rows .* row 1",
        ),
        ({"done": DONE[:3]}, ValidationError, r"`done` must have shape \(4,\)"),
        ({"done": [0, 2, 0, 1]}, ValidationError, r"`done` must be boolean \(or 0/1\)"),
        (
            {"done": [True, True, False, True]},
            ValidationError,
            r"`done` may be true only at the last step .*first at row 0",
        ),
        ({"episode_starts": [1, 2]}, ValidationError, r"`episode_starts` must begin with 0"),
        ({"episode_starts": [0, 2, 2]}, ValidationError, r"strictly increasing"),
        ({"episode_starts": [0, 0.5]}, ValidationError, r"integer row offsets"),
        (
            {"episode_starts": None},
            ParameterError,
            r"exactly one of `episode_starts` .* got neither",
        ),
        ({"episode_id": [1, 1, 2, 2]}, ParameterError, r"exactly one of .* got both"),
        ({"done": None}, ParameterError, r"with array data pass `done`"),
        (
            {"ratios": [1.0, -1.0, 1.0, 1.0]},
            ValidationError,
            r"`ratios` must be >= 0 .*; 1 rows are negative \(first at row 1: -1.0\)",
        ),
        ({"ratios": [1.0, 1.0]}, ValidationError, r"`ratios` has 2 rows"),
        (
            {"max_ratio": 1.0},
            ParameterError,
            r"`max_ratio` clip importance ratios, but no `ratios`",
        ),
        (
            {"ratios": np.ones(4), "max_ratio": 0.0},
            ParameterError,
            r"`max_ratio` \(clip level of the trace coefficients\) must be a positive number",
        ),
        ({"ratios": np.ones(4), "max_td_ratio": -1}, ParameterError, r"`max_td_ratio` .* positive"),
        ({"values": "v"}, ParameterError, r"names a column, which needs ope.Trajectories"),
    ],
)
def test_bad_arguments_and_data(kwargs, error, match):
    call = {"values": np.zeros(4), "gamma": 0.9, "lam": 0.5, **BASE, **kwargs}
    with pytest.raises(error, match=match):
        gae(R, **{k: v for k, v in call.items()})


@pytest.mark.parametrize(
    "reward,match",
    [
        (
            [1.0, np.nan, 2.0, 1.0],
            r"`reward` must be finite; 1 rows are NaN or infinite \(first at row 1\)",
        ),
        ([1.0, np.inf, 2.0, 1.0], r"`reward` must be finite"),
        ([[1.0, 2.0]], r"`reward` must have shape \(n,\)"),
        (["a", "b", "c", "d"], r"`reward` must be numeric"),
    ],
)
def test_bad_rewards(reward, match):
    with pytest.raises(ValidationError, match=match):
        discounted_returns(reward, gamma=0.9, **BASE)


def test_bad_tail_values():
    kw = {"done": [False, True, False, False], "episode_starts": [0, 2, 3], "gamma": 0.9}
    with pytest.raises(
        ValidationError,
        match=r"`tail_value` has 5 entries; pass a float, one "
        r"value per truncated episode \(2\), one per episode \(3\) or one per "
        r"step \(4",
    ):
        discounted_returns(R, tail_value=np.zeros(5), **kw)
    with pytest.raises(
        ValidationError,
        match=r"`tail_value` must be finite for truncated "
        r"episodes; 1 are not \(first: the episode ending at row 3\)",
    ):
        discounted_returns(R, tail_value=[0.0, np.nan], **kw)
    with pytest.raises(ParameterError, match=r"tail_value='v' names a column"):
        discounted_returns(R, tail_value="v", **kw)
    with pytest.raises(ParameterError, match=r"`tail_value` must be a number"):
        discounted_returns(R, tail_value=True, **kw)


def test_episode_ids_must_be_contiguous():
    with pytest.raises(ValidationError, match=r"3 runs of equal ids and only 2 distinct ids"):
        discounted_returns(
            R, gamma=0.9, done=[False, True, True, True], episode_id=[1, 1, 2, 1], tail_value=0.0
        )


@pytest.mark.parametrize(
    "episode_id, first",
    [
        ([None, None, "a", "a"], 0),  # object ids: sorting None raised a bare TypeError
        ([1.0, np.nan, np.nan, 2.0], 1),  # NaN ids: blamed on unsorted rows
        (pd.Series(["a", "a", pd.NA, None], dtype=object), 2),
        (np.array(["2024-01-01", "NaT", "NaT", "2024-01-02"], dtype="datetime64[D]"), 1),
    ],
)
@pytest.mark.parametrize("function", [discounted_returns, td_errors, gae, lambda_returns])
def test_missing_episode_ids_are_named(episode_id, first, function):
    kwargs = {"gamma": 0.9, "done": [False, True, False, True], "episode_id": episode_id}
    if function is not discounted_returns:
        kwargs["values"] = np.zeros(4)
    if function in (gae, lambda_returns):
        kwargs["lam"] = 0.5
    match = rf"`episode_id` is missing \(None or NaN\) for 2 rows \(first at row {first}\)"
    with pytest.raises(ValidationError, match=match):
        function(R, **kwargs)


def test_episode_ids_of_mixed_kinds_are_refused():
    with pytest.raises(ValidationError, match=r"`episode_id` mixes label kinds"):
        discounted_returns(
            R,
            gamma=0.9,
            done=[False, True, False, True],
            episode_id=np.array([1, 1, "a", "a"], dtype=object),
        )


def test_trajectories_reject_array_structure_arguments_and_bad_columns(mdp):
    env, traj, v, v_next = mdp
    with pytest.raises(
        ParameterError,
        match=r"`done`, `episode_starts` cannot be given with "
        r"ope.Trajectories",
    ):
        discounted_returns(
            traj, gamma=0.9, done=np.zeros(traj.n, bool), episode_starts=[0], tail_value=0.0
        )
    with pytest.raises(
        SchemaError,
        match=r"`values` names column 'nope', which is not in the "
        r"trajectories",
    ):
        td_errors(traj, values="nope", gamma=0.9, tail_value=0.0)
    with pytest.raises(ValidationError, match=r"`values` has 3 rows"):
        td_errors(traj, values=np.zeros(3), gamma=0.9, tail_value=0.0)
    with pytest.raises(ParameterError, match=r"string 'logs.parquet'"):
        discounted_returns("logs.parquet", gamma=0.9)


def test_column_names_for_values_ratios_and_tail(off_policy_mdp):
    env, traj, target, rho, v, v_next = off_policy_mdp
    table = traj.table.append_column("v", pa.array(v)).append_column("rho", pa.array(rho))
    table = table.append_column("v_next", pa.array(v_next))
    named = Trajectories(table, traj.report)
    kw = {"gamma": env.gamma, "lam": 0.7, "max_ratio": 1.0}
    np.testing.assert_array_equal(
        gae(named, values="v", ratios="rho", tail_value="v_next", **kw),
        gae(traj, values=v, ratios=rho, tail_value=v_next, **kw),
    )


def test_float32_and_integer_inputs_give_float64():
    got = lambda_returns(
        np.array([1, 2, 3], dtype=np.int32),
        values=np.array([0.5, 0.25, 0.125], np.float32),
        done=np.array([0, 0, 1]),
        episode_starts=np.array([0], np.int32),
        gamma=0.5,
        lam=0.5,
    )
    assert got.dtype == np.float64
    # G2 = 3; G1 = 2 + 0.5 (0.5 * 0.125 + 0.5 * 3); G0 = 1 + 0.5 (0.5 * 0.25 + 0.5 * G1)
    g1 = 2 + 0.5 * (0.5 * 0.125 + 0.5 * 3)
    np.testing.assert_allclose(got, [1 + 0.5 * (0.5 * 0.25 + 0.5 * g1), g1, 3.0], rtol=1e-7)
