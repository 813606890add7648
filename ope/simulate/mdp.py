"""A small tabular MDP with terminating and truncated episodes, with exact DP values."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final, Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from ope._validation import check_array_size, check_choice, check_rng
from ope.exceptions import ParameterError
from ope.simulate._common import (
    EPSILON_GREEDY_EPSILON,
    REWARD_KINDS,
    TARGET_PREFIX,
    PolicyTables,
    argmax_table,
    cdf_table,
    check_float,
    check_id_pair,
    check_int,
    check_model_size,
    check_sample_size,
    draw_rows,
    model_array,
    softmax,
)

__all__ = ["TabularMDP", "MAX_HORIZON", "MAX_SAMPLED_STEPS"]

#: temperature of the ``softmax`` candidate on the optimal action values (rewards lie in [0, 1],
#: so action values differ by fractions of a unit: 0.5 keeps the policy clearly stochastic)
SOFTMAX_TEMPERATURE: Final = 0.5
#: concentration of the Dirichlet draw of next-state distributions: below 1, so each
#: (state, action) leads to a few likely states, as in real environments
TRANSITION_CONCENTRATION: Final = 0.5
#: next-state id written for rows whose episode terminated at that step
TERMINAL: Final = -1
#: spectral radius of gamma * P_pi above which (I - gamma P_pi) counts as singular: the
#: untruncated value would exceed 1e12 times the reward scale
SPECTRAL_RADIUS_MAX: Final = 1.0 - 1e-12
#: the longest episode: backward induction and sampling loop over the steps in Python (ten
#: thousand steps of a small MDP take a fraction of a second), and a horizon of 10**30 would
#: never end
MAX_HORIZON: Final = 10_000
#: the most steps one ``sample`` call may draw (episodes x horizon, the rows if no episode
#: terminates): a few seconds of work
MAX_SAMPLED_STEPS: Final = 1 << 23

_BUILTIN: Final = ("uniform", "greedy", "epsilon_greedy", "softmax")


class TabularMDP(PolicyTables):
    r"""Finite MDP with an absorbing terminal state, truncation at a horizon and exact values.

    Episodes start in a state drawn from a known initial distribution, end when they reach the
    terminal state (``done = True`` on their last row) or are cut after ``horizon`` steps
    (``done = False`` on their last row: truncated). Rewards are Bernoulli (or Gaussian) with a
    known mean ``R(s, a)``. Policy values come from dynamic programming, not from rollouts.

    Parameters
    ----------
    n_states : int, default 8
        Non-terminal states ``0 .. n_states-1``.
    n_actions : int, default 3
        Actions ``0 .. n_actions-1``.
    horizon : int, default 20
        Episodes are truncated after this many steps (at most ``MAX_HORIZON``, 10,000).
    gamma : float, default 0.95
        Discount factor in ``(0, 1]``.
    termination_probability : float, default 0.1
        Mean per-step probability of reaching the terminal state; each (state, action) gets a
        probability uniform in ``[0, 2 * termination_probability]``. In ``[0, 0.5]``.
    reward : {"bernoulli", "gaussian"}, default "bernoulli"
        Bernoulli rewards lie in ``[0, 1]``; Gaussian ones are ``R(s, a) + reward_noise * N(0, 1)``
        (unbounded: ``reward_range`` is None).
    reward_noise : float, default 0.1
        Standard deviation of Gaussian rewards.
    n_features : int, optional
        State features ``x0 ..`` written per step: one-hot of the state when None (so that a
        linear model in the features is tabular), otherwise a fixed random Gaussian map of
        dimension ``n_features`` (a compressed, generally misspecified feature view).
    logging_temperature : float, default 1.0
        Temperature of the behaviour policy's softmax over random scores.
    logging_epsilon : float, default 0.1
        Share of the behaviour policy spread uniformly over the actions.
    policies : mapping of str to array of shape (n_states, n_actions), optional
        Extra named stationary candidate policies.
    seed : int, default 0
        Seed of the model; sampling randomness comes from :meth:`sample`'s ``rng``.

    Attributes
    ----------
    candidate_policies : tuple of str
        ``uniform``, ``greedy`` (argmax of the optimal ``horizon``-step action values at the
        first step), ``epsilon_greedy`` (0.9 greedy + 0.1 uniform), ``softmax`` (of the same
        values, temperature 0.5), then those in ``policies``. The behaviour policy is
        ``"logging"``.
    reward_range : tuple of float or None
        ``(0.0, 1.0)`` per step for Bernoulli rewards, None for Gaussian ones.
    initial_distribution, transitions, reward_means, state_features : numpy.ndarray
        The model: shapes (S,), (S, A, S + 1) with the terminal state last, (S, A), (S, d).

    Notes
    -----
    The value of a stationary policy :math:`\pi` over episodes truncated at horizon :math:`H`
    is :math:`V(\pi) = \sum_s \mu_0(s) V_0(s)`, by backward induction from :math:`V_H = 0`:

    .. math::

        Q_t(s, a) = R(s, a) + \gamma \sum_{s' \ne \text{terminal}} P(s' \mid s, a) V_{t+1}(s'),
        \qquad V_t(s) = \sum_a \pi(a \mid s) Q_t(s, a).

    This is the expectation of the discounted return :math:`\sum_{t<T} \gamma^t r_t` of an
    episode as sampled. Without truncation (``horizon=math.inf`` in :meth:`true_value`) the
    value solves :math:`(I - \gamma P_\pi) V = R_\pi` over the non-terminal states.

    References
    ----------
    .. [1] M. L. Puterman, *Markov Decision Processes: Discrete Stochastic Dynamic
       Programming*, Wiley, 1994.
    .. [2] N. Jiang and L. Li, "Doubly robust off-policy value evaluation for reinforcement
       learning", Proc. ICML, 2016.

    Examples
    --------
    >>> from ope.simulate import TabularMDP
    >>> env = TabularMDP(n_states=5, n_actions=2, horizon=10, seed=0)
    >>> steps = env.sample(100, rng=0)
    >>> steps.column_names[:4]
    ['episode_id', 'step', 'state', 'x0']
    >>> env.true_value("greedy") > env.true_value("uniform")
    True
    """

    def __init__(
        self,
        *,
        n_states: int = 8,
        n_actions: int = 3,
        horizon: int = 20,
        gamma: float = 0.95,
        termination_probability: float = 0.1,
        reward: Literal["bernoulli", "gaussian"] = "bernoulli",
        reward_noise: float = 0.1,
        n_features: int | None = None,
        logging_temperature: float = 1.0,
        logging_epsilon: float = 0.1,
        policies: Mapping[str, npt.ArrayLike] | None = None,
        seed: int = 0,
    ) -> None:
        self.n_states = check_int("n_states", n_states, minimum=1)
        self.n_actions = check_int("n_actions", n_actions, minimum=2)
        self.horizon = check_int("horizon", horizon, minimum=1, maximum=MAX_HORIZON)
        self.gamma = check_float("gamma", gamma, low=0.0, high=1.0, low_open=True)
        self.termination_probability = check_float(
            "termination_probability", termination_probability, low=0.0, high=0.5
        )
        self.reward = check_choice(reward, "reward", REWARD_KINDS)
        self.reward_noise = check_float("reward_noise", reward_noise, low=0.0, high=np.inf)
        self.n_features = (
            None if n_features is None else check_int("n_features", n_features, minimum=1)
        )
        self.logging_temperature = check_float(
            "logging_temperature", logging_temperature, low=0.0, high=np.inf, low_open=True
        )
        self.logging_epsilon = check_float("logging_epsilon", logging_epsilon, low=0.0, high=1.0)
        self.seed = check_int("seed", seed, minimum=0)
        self.reward_range: tuple[float, float] | None = (
            (0.0, 1.0) if reward == "bernoulli" else None
        )

        S, A = self.n_states, self.n_actions
        check_model_size(
            [("n_states", S), ("n_actions", A), ("n_states + 1", S + 1)],
            what="the transition table",
        )
        check_model_size(
            [("n_states", S), ("n_features", self.n_features or S)], what="the state features"
        )
        checked = self._checked_policies(policies, _BUILTIN)
        g = np.random.default_rng(self.seed)
        term = g.uniform(0.0, 2.0 * self.termination_probability, size=(S, A))
        nxt = g.dirichlet(np.full(S, TRANSITION_CONCENTRATION), size=(S, A))
        transitions = np.concatenate([(1.0 - term)[..., None] * nxt, term[..., None]], axis=2)
        rewards = g.uniform(0.0, 1.0, size=(S, A))
        initial = g.dirichlet(np.ones(S))
        features = np.eye(S) if self.n_features is None else g.standard_normal((S, self.n_features))
        behaviour_scores = g.standard_normal((S, A))

        self._P = transitions
        self._R = rewards
        self._mu0 = initial
        self._features = features
        # optimal H-step action values at the first step: define the greedy candidates
        v = np.zeros(S)
        q_star = rewards.copy()
        for _ in range(self.horizon):
            q_star = rewards + self.gamma * (transitions[:, :, :S] @ v)
            v = q_star.max(axis=1)
        greedy = argmax_table(q_star)
        uniform = np.full((S, A), 1.0 / A)
        tables: dict[str, npt.NDArray[np.float64]] = {
            "logging": (1.0 - self.logging_epsilon)
            * softmax(behaviour_scores, self.logging_temperature)
            + self.logging_epsilon * uniform,
            "uniform": uniform,
            "greedy": greedy,
            "epsilon_greedy": (1.0 - EPSILON_GREEDY_EPSILON) * greedy
            + EPSILON_GREEDY_EPSILON * uniform,
            "softmax": softmax(q_star, SOFTMAX_TEMPERATURE),
        }
        self._install_tables(tables, checked, (transitions, rewards, initial, features))
        self._cdf = {"logging": cdf_table(tables["logging"])}
        self._transition_cdf = cdf_table(transitions.reshape(S * A, S + 1))
        self._initial_cdf = cdf_table(initial[None, :])

    # ------------------------------------------------------------------ model
    initial_distribution = model_array("_mu0", "Initial state distribution, shape (n_states,).")
    transitions = model_array(
        "_P", "``P[s, a, s']`` with the terminal state as the last entry, shape (S, A, S + 1)."
    )
    reward_means = model_array("_R", "Mean reward ``R(s, a)``, shape (n_states, n_actions).")
    state_features = model_array(
        "_features", "Feature vector of each state (the ``x`` columns), shape (n_states, d)."
    )

    def expected_reward(
        self, states: npt.ArrayLike, actions: npt.ArrayLike
    ) -> npt.NDArray[np.float64]:
        """Mean reward ``R(s_i, a_i)`` per row."""
        s, a = check_id_pair(
            states, actions, sizes=(self.n_states, self.n_actions), names=("states", "actions")
        )
        return self._R[s, a]

    # ------------------------------------------------------------------ exact truth
    def q_function(self, policy: str | npt.ArrayLike) -> npt.NDArray[np.float64]:
        r"""Time-dependent action values :math:`Q_t(s, a)` under truncation at ``horizon``.

        Returns
        -------
        numpy.ndarray of shape (horizon, n_states, n_actions)
            Entry ``[t, s, a]`` is the expected discounted return from step ``t`` on, with
            ``horizon - t`` steps left.
        """
        table = self._table(policy)
        return self._backward(table, self.horizon)

    def discounted_q_function(self, policy: str | npt.ArrayLike) -> npt.NDArray[np.float64]:
        r"""Action values without truncation: :math:`Q = R + \gamma P V`, shape (S, A)."""
        table = self._table(policy)
        v = self._stationary_v(table)
        return self._R + self.gamma * (self._P[:, :, : self.n_states] @ v)

    def true_value(
        self, policy: str | npt.ArrayLike, *, horizon: int | float | None = None
    ) -> float:
        """Exact expected discounted return of a stationary policy.

        Parameters
        ----------
        policy : str or array of shape (n_states, n_actions)
            ``"logging"``, a name in ``candidate_policies``, or a probability table.
        horizon : int, math.inf or None
            None (default): truncated at the environment's ``horizon``, i.e. the expected
            return of an episode as :meth:`sample` draws it. An int: truncated there.
            ``math.inf``: not truncated (requires ``gamma < 1`` or sure termination).
        """
        table = self._table(policy)
        if isinstance(horizon, float) and math.isinf(horizon) and horizon > 0:
            return float(self._mu0 @ self._stationary_v(table))
        h = (
            self.horizon
            if horizon is None
            else check_int("horizon", horizon, minimum=1, maximum=MAX_HORIZON)
        )
        q = self._backward(table, h)
        return float(self._mu0 @ np.einsum("sa,sa->s", table, q[0]))

    # ------------------------------------------------------------------ sampling
    def sample(
        self,
        n: int,
        *,
        rng: int | np.random.Generator | None = None,
        logging_policy: str | npt.ArrayLike = "logging",
        oracle: bool = False,
    ) -> pa.Table:
        r"""Draw ``n`` episodes in the canonical step schema (docs/guide/logs.md), one row per step.

        Parameters
        ----------
        n : int
            Number of episodes.
        rng : int, numpy.random.Generator or None
            Randomness of the draw; the same seed gives the same table.
        logging_policy : str or array of shape (n_states, n_actions), default "logging"
            The policy that draws the actions (a candidate name gives on-policy data);
            ``propensity`` is its probability of each logged action.
        oracle : bool, default False
            Also return ``q_target__<name>`` (:math:`Q_t(s_t, a_t)`) and ``v_target__<name>``
            (:math:`V_t(s_t)`) of each candidate, for the truncated process as sampled.

        Returns
        -------
        pyarrow.Table
            Sorted by (``episode_id``, ``step``): ``episode_id``, ``step`` (0-based),
            ``state``, ``x0 ..``, ``action``, ``propensity``, ``reward``, ``done`` (True only
            where the episode terminated), ``next_state`` (-1 after termination; after a
            truncation the state the episode was left in), ``target__<name>``.
        """
        n = check_sample_size(n, "episodes")
        check_array_size(
            [("n", n), ("horizon", self.horizon)],
            what="the sampled steps",
            limit=("MAX_SAMPLED_STEPS", MAX_SAMPLED_STEPS, "one sample() draws"),
        )
        check_array_size(
            [("n", n), ("horizon", self.horizon)],
            what="the sampled features",
            factor=self._features.shape[1],
        )
        g = check_rng(rng)
        behaviour = self._table(logging_policy, "logging_policy")
        if isinstance(logging_policy, str):
            cdf = self._cdf.get(logging_policy)
            if cdf is None:
                cdf = self._cdf.setdefault(logging_policy, cdf_table(behaviour))
        else:
            cdf = cdf_table(behaviour)
        S, A = self.n_states, self.n_actions
        state = draw_rows(self._initial_cdf, np.zeros(n, dtype=np.int64), g)
        alive = np.arange(n)
        parts: list[tuple[npt.NDArray, ...]] = []
        for t in range(self.horizon):
            if alive.size == 0:
                break
            s = state[alive]
            a = draw_rows(cdf, s, g)
            r_mean = self._R[s, a]
            if self.reward == "bernoulli":
                r = (g.random(alive.size) < r_mean).astype(np.float64)
            else:
                r = r_mean + self.reward_noise * g.standard_normal(alive.size)
            nxt = draw_rows(self._transition_cdf, s * A + a, g)
            done = nxt == S
            next_id = np.where(done, TERMINAL, nxt)
            parts.append((alive, np.full(alive.size, t), s, a, r, done, next_id))
            state[alive] = nxt
            alive = alive[~done]
        merged = [np.concatenate(c) for c in zip(*parts)]  # episode, step, s, a, r, done, nxt
        order = np.lexsort((merged[1], merged[0]))
        episode, step, s, a, r, done, nxt = (x[order] for x in merged)
        cols: dict[str, pa.Array] = {
            "episode_id": pa.array(episode.astype(np.int64)),
            "step": pa.array(step.astype(np.int64)),
            "state": pa.array(s.astype(np.int64)),
        }
        feats = self._features[s]
        for k in range(feats.shape[1]):
            cols[f"x{k}"] = pa.array(np.ascontiguousarray(feats[:, k]))
        cols["action"] = pa.array(a.astype(np.int64))
        cols["propensity"] = pa.array(behaviour[s, a])
        cols["reward"] = pa.array(r)
        cols["done"] = pa.array(done)
        cols["next_state"] = pa.array(nxt.astype(np.int64))
        for name in self.candidate_policies:
            cols[TARGET_PREFIX + name] = pa.array(self._tables[name][s, a])
        if oracle:
            for name in self.candidate_policies:
                q = self._backward(self._tables[name], self.horizon)
                v = np.einsum("sa,tsa->ts", self._tables[name], q)
                cols["q_target__" + name] = pa.array(q[step, s, a])
                cols["v_target__" + name] = pa.array(v[step, s])
        return pa.table(cols)

    # ------------------------------------------------------------------ helpers
    def _backward(self, table: npt.NDArray[np.float64], horizon: int) -> npt.NDArray[np.float64]:
        check_model_size(
            [("horizon", horizon), ("n_states", self.n_states), ("n_actions", self.n_actions)],
            what="the action values",
        )
        S = self.n_states
        p = self._P[:, :, :S]
        q = np.empty((horizon, S, self.n_actions))
        v = np.zeros(S)
        for t in range(horizon - 1, -1, -1):
            q[t] = self._R + self.gamma * (p @ v)
            v = np.einsum("sa,sa->s", table, q[t])
        return q

    def _stationary_v(self, table: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        S = self.n_states
        p_pi = np.einsum("sa,sat->st", table, self._P[:, :, :S])
        r_pi = np.einsum("sa,sa->s", table, self._R)
        system = np.eye(S) - self.gamma * p_pi
        # (I - gamma P_pi) is invertible iff the spectral radius of gamma P_pi is below one
        if np.max(np.abs(np.linalg.eigvals(self.gamma * p_pi))) >= SPECTRAL_RADIUS_MAX:
            raise ParameterError(
                "the untruncated value is infinite: with gamma = 1 this policy can avoid the "
                "terminal state forever. Use a finite horizon (true_value(policy, horizon=H)) "
                "or gamma < 1."
            )
        return np.linalg.solve(system, r_pi)

    def _shape_kw(self) -> dict[str, Any]:
        return {
            "shape": (self.n_states, self.n_actions),
            "rows": "states",
            "columns": "actions",
            "sizes": ("n_states", "n_actions"),
        }

    def __repr__(self) -> str:
        return (
            f"TabularMDP(n_states={self.n_states}, n_actions={self.n_actions}, "
            f"horizon={self.horizon}, gamma={self.gamma}, seed={self.seed})"
        )
