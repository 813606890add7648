"""A contextual bandit with a finite context distribution, so that every policy value is exact."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from ope._validation import as_float_array, check_choice, check_finite
from ope.simulate._common import (
    EPSILON_GREEDY_EPSILON,
    REWARD_KINDS,
    ContextTables,
    argmax_table,
    check_float,
    check_id_pair,
    check_int,
    check_model_size,
    list_column,
    model_array,
    softmax,
)

__all__ = ["ContextualBandit"]

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


class ContextualBandit(ContextTables):
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
        self.reward = check_choice(reward, "reward", REWARD_KINDS)
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
        check_model_size([("n_contexts", M), ("n_actions", K)], what="the reward table")
        check_model_size([("n_contexts", M), ("n_features", d)], what="the context features")
        check_model_size([("n_features", d), ("n_actions", K)], what="the reward parameters")
        check_model_size(
            [("n_noise_features", self.n_noise_features)], what="the noise features of one row"
        )
        checked = self._checked_policies(policies, _BUILTIN)
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
        self._install_model(
            tables, checked, probs=probs, q=q, seg=seg, support=support, model=(features,)
        )
        self._features = features

    # ------------------------------------------------------------------ model tables
    context_features = model_array(
        "_features", "Feature vector of each context type, shape (n_contexts, n_features)."
    )

    def expected_reward(
        self, context_ids: npt.ArrayLike, actions: npt.ArrayLike
    ) -> npt.NDArray[np.float64]:
        """Mean reward ``q(m_i, a_i)`` for per-row context types and actions."""
        m, a = check_id_pair(
            context_ids,
            actions,
            sizes=(self.n_contexts, self.n_actions),
            names=("context_ids", "actions"),
        )
        return self._q[m, a]

    def outcome_cdf(self, policy: str | npt.ArrayLike, t: npt.ArrayLike) -> npt.NDArray[np.float64]:
        r"""Exact CDF of the reward under a policy, :math:`P_\pi(R \le t)` at thresholds ``t``:
        :math:`\sum_m p_m \sum_a \pi(a|m)\, \Phi((t - q(m,a)) / \sigma)` for Gaussian
        rewards, :math:`(1 - V(\pi))\, 1\{0 \le t\} + V(\pi)\, 1\{1 \le t\}` for
        Bernoulli ones (the truth of :func:`ope.outcome_distribution`).

        Examples
        --------
        >>> from ope.simulate import ContextualBandit
        >>> env = ContextualBandit(n_actions=3, n_contexts=5, seed=0)
        >>> float(env.outcome_cdf("logging", 0.5)) == 1 - env.true_value("logging")
        True
        """
        x = np.asarray(as_float_array(t, "t", ndim=(0, 1)), dtype=np.float64)
        check_finite(np.atleast_1d(x), "t")
        table = self._table(policy)
        if self.reward == "bernoulli":
            value = self.true_value(table)
            return np.where(x >= 1.0, 1.0, np.where(x >= 0.0, 1.0 - value, 0.0))
        from scipy.special import ndtr

        mass = (self._probs[:, None] * table).ravel()
        keep = mass > 0
        means, mass = self._q.ravel()[keep], mass[keep]
        sigma = max(self.reward_noise, 1e-300)
        flat = x.reshape(-1)
        out = ndtr((flat[:, None] - means[None, :]) / sigma) @ mass
        return np.asarray(out.reshape(x.shape), dtype=np.float64)

    # ------------------------------------------------------------------ sampling

    # ------------------------------------------------------------------ steps of sample()
    def _action_ids(
        self, ctx: npt.NDArray[np.int64], col: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.int64]:
        return col  # the table columns are the actions

    def _draw_reward(
        self, q_logged: npt.NDArray[np.float64], g: np.random.Generator
    ) -> npt.NDArray[np.float64]:
        n = q_logged.shape[0]
        if self.reward == "bernoulli":
            return (g.random(n) < q_logged).astype(np.float64)
        return q_logged + self.reward_noise * g.standard_normal(n)

    def _feature_blocks(
        self, ctx: npt.NDArray[np.int64], g: np.random.Generator
    ) -> list[npt.NDArray[np.float64]]:
        blocks = [self._features[ctx]]
        if self.n_noise_features:
            blocks.append(g.standard_normal((ctx.shape[0], self.n_noise_features)))
        return blocks

    def _list_columns(
        self, ctx: npt.NDArray[np.int64], logging: npt.NDArray[np.float64], distributions: bool
    ) -> dict[str, pa.Array]:
        if not distributions:
            return {}
        K = self.n_actions
        return {
            "candidates": list_column(np.tile(np.arange(K, dtype=np.int64), ctx.shape[0]), K),
            "logging_distribution": list_column(logging[ctx].ravel(), K),
        }

    # ------------------------------------------------------------------ helpers
    def _n_context_types(self) -> int:
        return self.n_contexts

    def _row_width(self) -> int:
        return max(self.n_actions, self.n_features, self.n_noise_features)

    def _shape_kw(self) -> dict[str, Any]:
        return {
            "shape": (self.n_contexts, self.n_actions),
            "rows": "contexts",
            "columns": "actions",
            "sizes": ("n_contexts", "n_actions"),
        }

    def __repr__(self) -> str:
        return (
            f"ContextualBandit(n_actions={self.n_actions}, n_features={self.n_features}, "
            f"n_contexts={self.n_contexts}, reward={self.reward!r}, "
            f"unsupported_actions={self.unsupported_actions}, seed={self.seed})"
        )
