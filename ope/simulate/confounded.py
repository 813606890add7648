r"""A two-action bandit whose logger reads a hidden input: wrong logged propensities of a known
strength, for the sensitivity analysis (:mod:`ope.diagnostics.msm`).

Each row has an observed context type :math:`m` (feature ``x0``) and a hidden coin
:math:`u \in \{0, 1\}` (probability 1/2 each, never logged). The logger plays action 1 with
probability :math:`p^*(m, u) = \sigma(\theta_m + \delta(2u - 1))`; the logs hold the
propensity a careful analyst would estimate from the logged context, the exact marginal
:math:`p(m) = \tfrac12(p^*(m,0) + p^*(m,1))`, not the one the logger used. The reward is
Bernoulli with mean :math:`q(m, a, u)`, and coin 1 both makes the logger play action 1 more
often and raises that action's reward (``reward_shift``): the rows that logged action 1 are the
lucky ones, so every weighting estimate on the logged propensities is biased towards action 1.

The strength of the hidden input is exact: :attr:`gamma` is the largest odds ratio between the
logger's true propensity of the logged action and the logged one, over contexts, coins and
actions (the :math:`\Gamma_0` of the marginal sensitivity model). Marginal sensitivity bounds
at :math:`\Gamma \ge \Gamma_0` contain the value that the self-normalized estimate with the
true propensities estimates.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from ope._validation import check_rng
from ope.exceptions import ParameterError
from ope.simulate._common import check_float, check_int, check_sample_size

__all__ = ["ConfoundedBandit"]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _odds(p: np.ndarray) -> np.ndarray:
    return p / (1.0 - p)


class ConfoundedBandit:
    """Two actions, a logged context and a hidden coin the logger reads (see the module).

    Parameters
    ----------
    n_contexts : int, default 20
        Context types, equally likely, with feature ``x0`` evenly spread over [-1, 1].
    confounding : float, default 0.5
        :math:`\\delta`, the hidden coin's shift of the logger's log-odds; 0 means the logged
        propensities are right (:attr:`gamma` is then 1).
    reward_shift : float, default 0.2
        The hidden coin's effect on the rewards: coin 1 raises the mean reward of action 1 by
        half of it and lowers that of action 0 by as much, coin 0 the reverse (means clipped
        to [0, 1]).
    seed : int, default 0
        Seed of the model (the logger's log-odds and the reward means).

    Examples
    --------
    >>> env = ConfoundedBandit(confounding=0.5, seed=0)
    >>> round(env.gamma, 3)
    1.787
    >>> table = env.sample(1000, rng=1)
    >>> table.column_names[:5]
    ['event_id', 'action', 'propensity', 'reward', 'x0']
    """

    candidate_policies = ("always_1", "always_0", "follow_x")

    def __init__(
        self,
        n_contexts: int = 20,
        *,
        confounding: float = 0.5,
        reward_shift: float = 0.2,
        seed: int = 0,
    ) -> None:
        self.n_contexts = check_int("n_contexts", n_contexts, minimum=2, maximum=10_000)
        self.confounding = check_float("confounding", confounding, low=0.0, high=5.0)
        self.reward_shift = check_float("reward_shift", reward_shift, low=0.0, high=0.4)
        self.seed = check_int("seed", seed, minimum=0)
        g = np.random.default_rng(self.seed)
        m = self.n_contexts
        self.x = np.linspace(-1.0, 1.0, m)
        theta = g.normal(0.0, 0.7, size=m)
        d = self.confounding
        # the logger's true probability of action 1, per context and coin: (m, 2)
        self.true_propensity = _sigmoid(theta[:, None] + d * np.array([-1.0, 1.0])[None, :])
        #: the logged propensity of action 1 per context: the exact marginal over the coin
        self.logged_propensity = self.true_propensity.mean(axis=1)
        base = g.uniform(0.3, 0.6, size=(m, 2))
        shift = self.reward_shift * np.array([[0.5, -0.5], [-0.5, 0.5]])  # (coin, action)
        #: mean reward q[m, u, a]
        self.q = np.clip(base[:, None, :] + shift[None, :, :], 0.0, 1.0)
        self.policies = {
            "always_1": np.column_stack((np.zeros(m), np.ones(m))),
            "always_0": np.column_stack((np.ones(m), np.zeros(m))),
            "follow_x": np.column_stack((self.x <= 0, self.x > 0)).astype(float),
        }

    @property
    def gamma(self) -> float:
        """:math:`\\Gamma_0`: the largest odds ratio of the true to the logged propensity of
        either action, in either direction."""
        ratio = _odds(self.true_propensity) / _odds(self.logged_propensity)[:, None]
        return float(np.max(np.maximum(ratio, 1.0 / ratio)))

    def true_value(self, policy: str) -> float:
        """The exact value of a candidate (or ``"logging"``)."""
        if policy == "logging":
            pi1 = self.true_propensity  # (m, 2 coins)
            v = (1.0 - pi1) * self.q[:, :, 0] + pi1 * self.q[:, :, 1]
            return float(v.mean())
        if policy not in self.policies:
            raise ParameterError(
                f"unknown policy {policy!r}; the candidates are {list(self.candidate_policies)} "
                "and 'logging'."
            )
        pi = self.policies[policy]  # (m, 2 actions)
        return float(np.einsum("ma,mua->", pi, self.q) / (2.0 * self.n_contexts))

    def sample(self, n: int, *, rng: Any = None, oracle: bool = False) -> pa.Table:
        """``n`` logged rows in the canonical schema: ``action``, ``propensity`` (the logged,
        wrong one), ``reward``, ``x0`` and one ``target__<name>`` per candidate. With
        ``oracle=True`` also ``true_propensity`` (the logger's probability of the logged
        action given the hidden coin) and ``hidden`` (the coin)."""
        n = check_sample_size(n)
        g = check_rng(rng)
        m = g.integers(0, self.n_contexts, size=n)
        u = g.integers(0, 2, size=n)
        p1 = self.true_propensity[m, u]
        action = (g.random(n) < p1).astype(np.int64)
        reward = (g.random(n) < self.q[m, u, action]).astype(np.float64)
        logged1 = self.logged_propensity[m]
        columns: dict[str, Any] = {
            "event_id": np.arange(n, dtype=np.int64),
            "action": action,
            "propensity": np.where(action == 1, logged1, 1.0 - logged1),
            "reward": reward,
            "x0": self.x[m],
        }
        for name, table in self.policies.items():
            columns[f"target__{name}"] = table[m, action]
        if oracle:
            columns["true_propensity"] = np.where(action == 1, p1, 1.0 - p1)
            columns["hidden"] = u
        return pa.table(columns)
