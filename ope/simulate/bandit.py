"""A contextual bandit with a finite context distribution, so that every policy value is exact."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from ope.simulate._common import (
    Q_TARGET_PREFIX,
    TARGET_DIST_PREFIX,
    TARGET_PREFIX,
    argmax_table,
    cdf_table,
    check_float,
    check_ids,
    check_int,
    check_policy_names,
    check_policy_table,
    check_rng,
    draw_rows,
    list_column,
    resolve_policy,
    softmax,
)

__all__ = ["ContextualBandit"]

#: exploration share of the ``epsilon_greedy`` candidate: enough that every action keeps some
#: target mass (so it is not deterministic) while staying close to the optimal policy
EPSILON_GREEDY_EPSILON: Final = 0.1
#: temperature of the ``softmax`` candidate on the reward logits: sharper than the logger but
#: still stochastic
SOFTMAX_TEMPERATURE: Final = 0.5
#: share of the optimal policy in the ``mixture`` candidate (rest: the logging policy); a
#: modest improvement that keeps weights at most 1/(1 - share) off the optimal action
MIXTURE_SHARE: Final = 0.3
#: amplitude of the non-linear term of the reward logit, so that a linear reward model is
#: misspecified (as in practice) while the truth stays exact
NONLINEAR_AMPLITUDE: Final = 0.75
#: standard deviation of the logger's error on the reward logits (an informed, imperfect logger)
LOGGING_SCORE_NOISE: Final = 1.0

_BUILTIN: Final = ("uniform", "optimal", "epsilon_greedy", "softmax", "mixture")


class ContextualBandit:
    r"""Contextual bandit with exact policy values.

    The context is one of ``n_contexts`` types, drawn with known probabilities; each type has a
    feature vector and belongs to a segment. The reward of action ``a`` in context type ``m`` is
    Bernoulli (or Gaussian) with a known mean ``q(m, a)``, so the value of any policy is a finite
    sum, computed exactly rather than by simulation.

    Parameters
    ----------
    n_actions : int, default 10
        Number of actions ``K``.
    n_features : int, default 5
        Number of context features ``d`` (columns ``x0 .. x{d-1}``).
    n_contexts : int, default 200
        Number of context types ``M``.
    n_segments : int, default 4
        Segments (``segment_0`` ..), formed by quantiles of the first feature.
    n_noise_features : int, default 0
        Extra columns ``x{d} ..`` of standard normal noise drawn per row; they do not affect
        rewards (for testing reward models against irrelevant features).
    reward : {"bernoulli", "gaussian"}, default "bernoulli"
        Bernoulli rewards lie in ``[0, 1]`` (``reward_range == (0.0, 1.0)``). Gaussian rewards
        are ``q(m, a) + reward_noise * N(0, 1)``: unbounded, so ``reward_range`` is None.
    reward_noise : float, default 0.1
        Standard deviation of Gaussian rewards (ignored for Bernoulli rewards).
    logging_temperature : float, default 1.0
        Temperature of the logger's softmax; larger means flatter, i.e. better overlap.
    logging_epsilon : float, default 0.05
        Share of the logger spread uniformly over its supported actions.
    unsupported_actions : int, default 0
        Deficient support: in the contexts of ``segment_0`` the logger never takes this many
        actions, namely the ones with the highest mean reward there. Must be ``< n_actions``.
    policies : mapping of str to array of shape (n_contexts, n_actions), optional
        Extra named candidate policies given as probability tables ``pi[m, a]``.
    seed : int, default 0
        Seed of the model's parameters (features, rewards, logger). Sampling randomness comes
        from the ``rng`` of :meth:`sample`.

    Attributes
    ----------
    candidate_policies : tuple of str
        Names of the candidate policies: ``uniform``, ``optimal`` (argmax of the mean reward),
        ``epsilon_greedy``, ``softmax`` (of the reward logits, temperature 0.5), ``mixture``
        (0.7 logging + 0.3 optimal), then those given in ``policies``. The logging policy is
        named ``"logging"``.
    reward_range : tuple of float or None
        A priori reward bounds: ``(0.0, 1.0)`` for Bernoulli rewards, None for Gaussian.
    segments : tuple of str
        Segment labels.

    Notes
    -----
    With context type probabilities :math:`p_m` and mean rewards
    :math:`q(m, a) = \sigma\big(x_m^\top\theta_a + b_a + 0.75\sin(2x_m^\top\phi_a)\big)`,

    .. math:: V(\pi) = \sum_{m=1}^{M} p_m \sum_{a=1}^{K} \pi(a \mid m)\, q(m, a),

    an exact finite sum. The logger is
    :math:`\pi_0 = (1-\epsilon)\,\mathrm{softmax}(s/\tau) + \epsilon/|S_m|` restricted to its
    support :math:`S_m`, where the score :math:`s` is the reward logit plus a fixed error.
    ``propensity`` is :math:`\pi_0(a_i \mid m_i)`, the probability the action was drawn with.

    References
    ----------
    .. [1] M. Dudík, J. Langford and L. Li, "Doubly robust policy evaluation and learning",
       Proc. ICML, 2011.

    Examples
    --------
    >>> from ope.simulate import ContextualBandit
    >>> env = ContextualBandit(n_actions=5, n_features=3, seed=0)
    >>> logs = env.sample(1000, rng=1)
    >>> logs.num_rows
    1000
    >>> logs.column_names[:7]
    ['event_id', 'action', 'propensity', 'reward', 'x0', 'x1', 'x2']
    >>> env.candidate_policies
    ('uniform', 'optimal', 'epsilon_greedy', 'softmax', 'mixture')
    >>> env.true_value("optimal") > env.true_value("logging") > 0
    True
    """

    def __init__(
        self,
        *,
        n_actions: int = 10,
        n_features: int = 5,
        n_contexts: int = 200,
        n_segments: int = 4,
        n_noise_features: int = 0,
        reward: Literal["bernoulli", "gaussian"] = "bernoulli",
        reward_noise: float = 0.1,
        logging_temperature: float = 1.0,
        logging_epsilon: float = 0.05,
        unsupported_actions: int = 0,
        policies: Mapping[str, npt.ArrayLike] | None = None,
        seed: int = 0,
    ) -> None:
        self.n_actions = check_int("n_actions", n_actions, minimum=2)
        self.n_features = check_int("n_features", n_features, minimum=1)
        self.n_contexts = check_int("n_contexts", n_contexts, minimum=1)
        self.n_segments = check_int("n_segments", n_segments, minimum=1, maximum=self.n_contexts)
        self.n_noise_features = check_int("n_noise_features", n_noise_features, minimum=0)
        if reward not in ("bernoulli", "gaussian"):
            raise ValueError(f"reward must be 'bernoulli' or 'gaussian'; got {reward!r}.")
        self.reward = reward
        self.reward_noise = check_float("reward_noise", reward_noise, low=0.0, high=np.inf)
        self.logging_temperature = check_float(
            "logging_temperature", logging_temperature, low=0.0, high=np.inf, low_open=True
        )
        self.logging_epsilon = check_float("logging_epsilon", logging_epsilon, low=0.0, high=1.0)
        self.unsupported_actions = check_int(
            "unsupported_actions", unsupported_actions, minimum=0, maximum=self.n_actions - 1
        )
        self.seed = check_int("seed", seed, minimum=0)
        self.reward_range: tuple[float, float] | None = (
            (0.0, 1.0) if reward == "bernoulli" else None
        )

        M, K, d = self.n_contexts, self.n_actions, self.n_features
        g = np.random.default_rng(self.seed)
        features = g.standard_normal((M, d))
        probs = g.dirichlet(np.full(M, 2.0))
        theta = g.standard_normal((d, K)) / np.sqrt(d)
        bias = 0.5 * g.standard_normal(K)
        phi = g.standard_normal((d, K)) / np.sqrt(d)
        logits = features @ theta + bias + NONLINEAR_AMPLITUDE * np.sin(2.0 * (features @ phi))
        q = 1.0 / (1.0 + np.exp(-logits))
        score = logits + LOGGING_SCORE_NOISE * g.standard_normal((M, K))

        # segments: quantile groups of the first feature
        seg = np.empty(M, dtype=np.int64)
        seg[np.argsort(features[:, 0], kind="stable")] = (np.arange(M) * self.n_segments) // M
        self.segments: tuple[str, ...] = tuple(f"segment_{k}" for k in range(self.n_segments))

        # logger: softmax of an imperfect score, epsilon-mixed over its support
        support = np.ones((M, K), dtype=bool)
        if self.unsupported_actions:
            best_first = np.argsort(-q, axis=1, kind="stable")[:, : self.unsupported_actions]
            rows = np.flatnonzero(seg == 0)
            support[rows[:, None], best_first[rows]] = False
        soft = softmax(np.where(support, score, -np.inf), self.logging_temperature)
        logging = (1.0 - self.logging_epsilon) * soft + self.logging_epsilon * (
            support / support.sum(axis=1, keepdims=True)
        )

        optimal = argmax_table(q)
        uniform = np.full((M, K), 1.0 / K)
        tables: dict[str, npt.NDArray[np.float64]] = {
            "logging": logging,
            "uniform": uniform,
            "optimal": optimal,
            "epsilon_greedy": (1.0 - EPSILON_GREEDY_EPSILON) * optimal
            + EPSILON_GREEDY_EPSILON * uniform,
            "softmax": softmax(logits, SOFTMAX_TEMPERATURE),
            "mixture": (1.0 - MIXTURE_SHARE) * logging + MIXTURE_SHARE * optimal,
        }
        if policies:
            check_policy_names(policies, set(tables))
            for name, table in policies.items():
                tables[name] = check_policy_table(
                    table, shape=(M, K), what=f"policy {name!r}", rows="contexts", columns="actions"
                )
        for arr in (features, probs, q, seg, support, *tables.values()):
            arr.setflags(write=False)
        self._features = features
        self._probs = probs
        self._q = q
        self._seg = seg
        self._tables = tables
        self._support = support
        self._logging_cdf = cdf_table(logging)
        self.candidate_policies: tuple[str, ...] = tuple(n for n in tables if n != "logging")

    # ------------------------------------------------------------------ model tables
    @property
    def context_probabilities(self) -> npt.NDArray[np.float64]:
        """Probability of each context type, shape (n_contexts,) (read-only)."""
        return self._probs

    @property
    def context_features(self) -> npt.NDArray[np.float64]:
        """Feature vector of each context type, shape (n_contexts, n_features) (read-only)."""
        return self._features

    @property
    def context_segments(self) -> npt.NDArray[np.int64]:
        """Segment index of each context type (into ``segments``), shape (n_contexts,)."""
        return self._seg

    @property
    def logging_support(self) -> npt.NDArray[np.bool_]:
        """True where the logging policy can take the action, shape (n_contexts, n_actions)."""
        return self._support

    @property
    def reward_means(self) -> npt.NDArray[np.float64]:
        """Mean reward ``q(m, a)``, shape (n_contexts, n_actions) (read-only)."""
        return self._q

    def policy_table(self, name: str) -> npt.NDArray[np.float64]:
        """Probability table ``pi[m, a]`` of a named policy (``"logging"`` or a candidate)."""
        if not isinstance(name, str):
            raise TypeError(f"name must be a policy name (str); got {type(name).__name__}.")
        return resolve_policy(name, self._tables, **self._shape_kw())

    # ------------------------------------------------------------------ exact truth
    def true_value(self, policy: str | npt.ArrayLike) -> float:
        r"""Exact value :math:`V(\pi) = \sum_m p_m \sum_a \pi(a|m) q(m, a)` of a policy.

        Parameters
        ----------
        policy : str or array of shape (n_contexts, n_actions)
            ``"logging"``, a name in ``candidate_policies``, or a probability table.
        """
        table = resolve_policy(policy, self._tables, **self._shape_kw())
        return float(self._probs @ np.einsum("ij,ij->i", table, self._q))

    def true_value_by_segment(self, policy: str | npt.ArrayLike) -> dict[str, float]:
        """Exact value of a policy conditional on each segment, ``{segment: value}``."""
        table = resolve_policy(policy, self._tables, **self._shape_kw())
        per_context = self._probs * np.einsum("ij,ij->i", table, self._q)
        num = np.bincount(self._seg, weights=per_context, minlength=self.n_segments)
        den = np.bincount(self._seg, weights=self._probs, minlength=self.n_segments)
        return {s: float(num[k] / den[k]) for k, s in enumerate(self.segments)}

    def unsupported_mass(self, policy: str | npt.ArrayLike) -> float:
        r"""Exact share of a policy's choices that the logging policy never makes.

        :math:`\sum_m P(m) \sum_{a:\,\pi_0(a|m) = 0} \pi(a|m)`: zero unless the logger has
        deficient support. No amount of these logs identifies the value on that share.
        """
        table = resolve_policy(policy, self._tables, **self._shape_kw())
        return float(self._probs @ np.where(self._tables["logging"] > 0, 0.0, table).sum(axis=1))

    def supported_value(self, policy: str | npt.ArrayLike) -> float:
        r"""Exact part of :math:`V(\pi)` earned on actions the logger can take.

        :math:`\sum_m P(m) \sum_{a:\,\pi_0(a|m) > 0} \pi(a|m) q(m, a)`, the limit of IPS
        under deficient support; equal to :meth:`true_value` when the support is full.
        """
        table = resolve_policy(policy, self._tables, **self._shape_kw())
        kept = np.where(self._tables["logging"] > 0, table, 0.0)
        return float(self._probs @ np.einsum("ij,ij->i", kept, self._q))

    def expected_reward(
        self, context_ids: npt.ArrayLike, actions: npt.ArrayLike
    ) -> npt.NDArray[np.float64]:
        """Mean reward ``q(m_i, a_i)`` for per-row context types and actions."""
        m = check_ids(context_ids, self.n_contexts, "context_ids")
        a = check_ids(actions, self.n_actions, "actions")
        if m.shape != a.shape:
            raise ValueError(
                f"context_ids and actions must have the same length; got {m.shape[0]} and "
                f"{a.shape[0]}."
            )
        return self._q[m, a]

    def policy_expected_reward(
        self, policy: str | npt.ArrayLike, context_ids: npt.ArrayLike
    ) -> npt.NDArray[np.float64]:
        r"""Per-row :math:`q(m_i, \pi) = \sum_a \pi(a|m_i) q(m_i, a)` (the DM/DR oracle term)."""
        table = resolve_policy(policy, self._tables, **self._shape_kw())
        m = check_ids(context_ids, self.n_contexts, "context_ids")
        return np.einsum("ij,ij->i", table, self._q)[m]

    # ------------------------------------------------------------------ sampling
    def sample(
        self,
        n: int,
        *,
        rng: int | np.random.Generator | None = None,
        logging_policy: str | npt.ArrayLike = "logging",
        oracle: bool = False,
        distributions: bool = False,
    ) -> pa.Table:
        r"""Draw ``n`` logged decisions in the canonical bandit schema (DESIGN.md §2).

        Parameters
        ----------
        n : int
            Number of rows.
        rng : int, numpy.random.Generator or None
            Randomness of the draw; the same seed gives the same table.
        logging_policy : str or array, default "logging"
            The policy that draws the actions: ``"logging"``, a candidate name (on-policy
            data) or a probability table. ``propensity`` and ``logging_distribution`` are its
            probabilities.
        oracle : bool, default False
            Also return ``context_id``, ``q_logged`` (mean reward of the logged action) and
            ``q_target__<name>`` (:math:`\sum_a \pi(a|x_i) q(x_i, a)`) for each candidate.
        distributions : bool, default False
            Also return ``candidates`` (all actions), ``logging_distribution`` and
            ``target_dist__<name>`` list columns (``n_actions`` values per row).

        Returns
        -------
        pyarrow.Table
            ``event_id`` (int64), ``action`` (int64), ``propensity``, ``reward``, ``x0 ..``
            (float64), ``segment`` (string), then optional lists, ``target__<name>`` per
            candidate, and the oracle columns.
        """
        n = check_int("n", n, minimum=1)
        g = check_rng(rng)
        logging = resolve_policy(logging_policy, self._tables, **self._shape_kw())
        cdf = (
            self._logging_cdf
            if isinstance(logging_policy, str) and logging_policy == "logging"
            else cdf_table(logging)
        )
        ctx = g.choice(self.n_contexts, size=n, p=self._probs)
        action = draw_rows(cdf, ctx, g)
        q_logged = self._q[ctx, action]
        if self.reward == "bernoulli":
            reward = (g.random(n) < q_logged).astype(np.float64)
        else:
            reward = q_logged + self.reward_noise * g.standard_normal(n)
        noise = g.standard_normal((n, self.n_noise_features)) if self.n_noise_features else None

        cols: dict[str, pa.Array] = {
            "event_id": pa.array(np.arange(n, dtype=np.int64)),
            "action": pa.array(action),
            "propensity": pa.array(logging[ctx, action]),
            "reward": pa.array(reward),
        }
        feats = self._features[ctx]
        for j in range(self.n_features):
            cols[f"x{j}"] = pa.array(np.ascontiguousarray(feats[:, j]))
        if noise is not None:
            for j in range(self.n_noise_features):
                cols[f"x{self.n_features + j}"] = pa.array(np.ascontiguousarray(noise[:, j]))
        cols["segment"] = pa.DictionaryArray.from_arrays(
            pa.array(self._seg[ctx].astype(np.int32)), pa.array(list(self.segments))
        ).cast(pa.string())
        K = self.n_actions
        if distributions:
            cols["candidates"] = list_column(np.tile(np.arange(K, dtype=np.int64), n), K)
            cols["logging_distribution"] = list_column(logging[ctx].ravel(), K)
        for name in self.candidate_policies:
            cols[TARGET_PREFIX + name] = pa.array(self._tables[name][ctx, action])
        if distributions:
            for name in self.candidate_policies:
                cols[TARGET_DIST_PREFIX + name] = list_column(self._tables[name][ctx].ravel(), K)
        if oracle:
            cols["context_id"] = pa.array(ctx.astype(np.int64))
            cols["q_logged"] = pa.array(q_logged)
            for name in self.candidate_policies:
                per_context = np.einsum("ij,ij->i", self._tables[name], self._q)
                cols[Q_TARGET_PREFIX + name] = pa.array(per_context[ctx])
        return pa.table(cols)

    # ------------------------------------------------------------------ helpers
    def _shape_kw(self) -> dict[str, Any]:
        return {
            "shape": (self.n_contexts, self.n_actions),
            "rows": "contexts",
            "columns": "actions",
        }

    def __repr__(self) -> str:
        return (
            f"ContextualBandit(n_actions={self.n_actions}, n_features={self.n_features}, "
            f"n_contexts={self.n_contexts}, reward={self.reward!r}, "
            f"unsupported_actions={self.unsupported_actions}, seed={self.seed})"
        )

