r"""Slate recommendation with exact truth under an additive or a cascade click model."""

from __future__ import annotations

from typing import Final

import numpy as np
import pyarrow as pa

from ope._validation import check_array_size, check_choice, check_positive_int, check_rng
from ope.exceptions import ParameterError
from ope.simulate._common import check_ids, check_model_size, check_sample_size
from ope.slates import PlackettLuce, SlateLogs, pseudoinverse_table

__all__ = [
    "SlateEnvironment",
    "CLICK_MODELS",
    "GREEDY_SCALE",
    "LOGGING_SCORE_SCALE",
    "ATTRACTION_LOW",
    "ATTRACTION_HIGH",
]

CLICK_MODELS: Final = ("additive", "cascade")

#: scale of the logger's item scores: a mildly informed Plackett-Luce logger whose slate
#: propensities stay within two orders of magnitude of uniform for the default 5 items x 3 slots
LOGGING_SCORE_SCALE: Final = 0.5
#: inverse temperature of the ``greedy`` candidate on the attraction logits: clearly better than
#: the logger, still stochastic so slate weights stay finite
GREEDY_SCALE: Final = 2.0
#: attraction probabilities are drawn in [ATTRACTION_LOW, ATTRACTION_HIGH]: far from 0 and 1 so
#: that cascade interactions (1 - theta above) are strong and every slot has clicks
ATTRACTION_LOW: Final = 0.1
ATTRACTION_HIGH: Final = 0.6


class SlateEnvironment:
    r"""Slates of ``slate_size`` items out of ``n_items``, with exact policy values.

    Contexts are ``n_contexts`` types with known probabilities; item ``a`` in context ``c`` has
    attraction :math:`\theta_{c,a}`. Clicks follow one of two click models:

    - ``"additive"`` (item-position): slot ``k`` is clicked with probability
      :math:`\kappa_k\theta_{c,a_k}`, independently, with position bias
      :math:`\kappa_k = 1/(k+1)`. Every slate estimator of :mod:`ope.slates` is unbiased.
    - ``"cascade"``: the user scans from the top and clicks the first attractive item, so slot
      ``k`` is clicked with probability :math:`\theta_{c,a_k}\prod_{j<k}(1-\theta_{c,a_j})`.
      Slate IPS and cascade IPS are unbiased; independent IPS and PI are biased (their exact
      expectation is :meth:`expected_estimate`).

    The logger and the candidates are Plackett-Luce policies (:class:`ope.slates.PlackettLuce`):
    ``"logging"``, ``"greedy"`` (sharp on the attractions), ``"similar"`` (the logger's scores
    plus noise) and ``"uniform"``. Values are the expected number of clicks per slate, computed by
    enumerating every slate.

    Parameters
    ----------
    n_items : int, default 5
    slate_size : int, default 3
    n_contexts : int, default 4
    click_model : {"additive", "cascade"}, default "additive"
    seed : int, default 0
        Fixes the model (attractions, context probabilities, scores).

    Examples
    --------
    >>> env = SlateEnvironment(click_model="cascade", seed=1)
    >>> logs = env.sample_logs(2000, rng=0)
    >>> from ope.slates import CascadeIPS
    >>> est = CascadeIPS().estimate(logs, env.policy("greedy"), logging=env.policy("logging"))
    >>> bool(abs(est.value - env.true_value("greedy")) < 4 * est.std_error)
    True
    """

    def __init__(
        self,
        n_items: int = 5,
        slate_size: int = 3,
        n_contexts: int = 4,
        *,
        click_model: str = "additive",
        seed: int = 0,
    ) -> None:
        self.n_items = check_positive_int(n_items, "n_items")
        self.slate_size = check_positive_int(slate_size, "slate_size")
        if self.slate_size > self.n_items:
            raise ParameterError(f"`slate_size` {slate_size} exceeds `n_items` {n_items}.")
        self.n_contexts = check_positive_int(n_contexts, "n_contexts")
        self.click_model = check_choice(click_model, "click_model", CLICK_MODELS)
        check_model_size(
            [("n_contexts", self.n_contexts), ("n_items", self.n_items)],
            what="the attraction table",
        )
        g = np.random.default_rng(check_positive_int(seed, "seed", minimum=0))
        c, m, L = self.n_contexts, self.n_items, self.slate_size
        self.context_probability = g.dirichlet(np.full(c, 5.0))
        self.attraction = g.uniform(ATTRACTION_LOW, ATTRACTION_HIGH, size=(c, m))
        self.position_bias = 1.0 / np.arange(1, L + 1)
        logit = np.log(self.attraction / (1 - self.attraction))
        log_scores = LOGGING_SCORE_SCALE * g.normal(size=(c, m))
        self._policies = {
            "logging": PlackettLuce(log_scores, L),
            "greedy": PlackettLuce(GREEDY_SCALE * logit, L),
            "similar": PlackettLuce(log_scores + 0.5 * g.normal(size=(c, m)), L),
            "uniform": PlackettLuce(np.zeros((c, m)), L),
        }

    @property
    def candidate_policies(self) -> tuple[str, ...]:
        """Names of the candidates (``"logging"`` excluded)."""
        return tuple(k for k in self._policies if k != "logging")

    def policy(self, name: str) -> PlackettLuce:
        """The Plackett-Luce policy ``name`` (a candidate or ``"logging"``)."""
        check_choice(name, "name", tuple(self._policies))
        return self._policies[name]

    def click_probability(self, context: np.ndarray, item: np.ndarray) -> np.ndarray:
        """Exact ``E[r(k) | context, slate]``, shape (n, L): ``context`` holds n context ids,
        ``item`` the (n, L) item ids of each slate."""
        context = check_ids(context, self.n_contexts, "context")
        item = np.asarray(item)
        if item.ndim != 2 or not np.issubdtype(item.dtype, np.integer):
            raise ParameterError(
                f"`item` must be a 2-d integer array of item ids, one row per slate; got dtype "
                f"{item.dtype}, shape {item.shape}."
            )
        if item.shape[0] != context.shape[0] or item.shape[1] > self.n_items:
            raise ParameterError(
                f"`item` must have one row per entry of `context` ({context.shape[0]}) and at "
                f"most n_items={self.n_items} columns; got shape {item.shape}."
            )
        item = check_ids(item.ravel(), self.n_items, "item").reshape(item.shape)
        th = np.take_along_axis(self.attraction[context], item, axis=1)
        if self.click_model == "additive":
            return th * self.position_bias
        above = np.cumprod(1 - th, axis=1) / (1 - th)
        return th * above

    def _slot_means(self) -> tuple[np.ndarray, np.ndarray]:
        slates, _ = self._policies["logging"].distribution()
        c = self.n_contexts
        ctx = np.repeat(np.arange(c), slates.shape[0])
        e = self.click_probability(ctx, np.tile(slates, (c, 1)))
        return slates, e.reshape(c, slates.shape[0], self.slate_size)

    def true_value(self, name: str) -> float:
        """Exact expected clicks per slate of policy ``name`` (enumeration over slates)."""
        _, e = self._slot_means()
        _, prob = self.policy(name).distribution()
        return float(np.einsum("c,cs,csk->", self.context_probability, prob, e))

    def expected_estimate(self, estimator: str, name: str) -> float:
        """Exact expectation of an unnormalized estimator (``"sips"``, ``"iips"``, ``"rips"``,
        ``"pi"``) for candidate ``name`` under this click model: its bias is this minus
        :meth:`true_value`."""
        kind = check_choice(estimator, "estimator", ("sips", "iips", "rips", "pi"))
        slates, e = self._slot_means()
        log, tgt = self._policies["logging"], self.policy(name)
        _, p0 = log.distribution()
        _, p = tgt.distribution()
        c, s = p0.shape
        if kind == "pi":
            w = pseudoinverse_table(tgt, log)[:, :, None] * np.ones(self.slate_size)
        else:
            logs = SlateLogs(
                slate_id=np.arange(c * s),
                item=np.tile(slates, (c, 1)),
                reward=np.zeros((c * s, self.slate_size)),
                context=np.repeat(np.arange(c), s),
            )
            pt, pl = tgt.slate_probabilities(logs), log.slate_probabilities(logs)
            field = {"sips": "slate", "iips": "marginal", "rips": "prefix"}[kind]
            w = getattr(pt, field) / getattr(pl, field)
            w = (w[:, None] if w.ndim == 1 else w) * np.ones(self.slate_size)
            w = w.reshape(c, s, self.slate_size)
        return float(np.einsum("c,cs,csk,csk->", self.context_probability, p0, w, e))

    def sample(self, n: int, *, rng: int | np.random.Generator | None = None) -> pa.Table:
        """Log ``n`` slates from the logger as a long ``pyarrow.Table``, one row per slot:
        ``slate_id``, ``context``, ``position``, ``item``, ``reward``, ``propensity`` (the
        logger's marginal), ``slate_propensity``, ``prefix_propensity``. Read it with
        :func:`ope.slates.slate_logs`."""
        logs = self.sample_logs(n, rng=rng)
        # the simulator fills every optional field
        assert logs.context is not None and logs.propensity is not None
        assert logs.slate_propensity is not None and logs.prefix_propensity is not None
        L = self.slate_size
        return pa.table(
            {
                "slate_id": np.repeat(logs.slate_id, L),
                "context": np.repeat(logs.context, L),
                "position": np.tile(np.arange(L), logs.n),
                "item": logs.item.ravel(),
                "reward": logs.reward.ravel(),
                "propensity": logs.propensity.ravel(),
                "slate_propensity": np.repeat(logs.slate_propensity, L),
                "prefix_propensity": logs.prefix_propensity.ravel(),
            }
        )

    def sample_logs(self, n: int, *, rng: int | np.random.Generator | None = None) -> SlateLogs:
        """Log ``n`` slates as :class:`ope.slates.SlateLogs` (valid by construction)."""
        n = check_sample_size(n, "slates")
        check_array_size([("n", n), ("n_items", self.n_items)], what="the slate draw")
        g = check_rng(rng)
        ctx = g.choice(self.n_contexts, size=n, p=self.context_probability)
        log = self._policies["logging"]
        item = log.sample(ctx, rng=g)
        L = self.slate_size
        if self.click_model == "additive":
            reward = (g.random((n, L)) < self.click_probability(ctx, item)).astype(float)
        else:
            th = np.take_along_axis(self.attraction[ctx], item, axis=1)
            hit = g.random((n, L)) < th
            first = np.argmax(hit, axis=1)
            reward = np.zeros((n, L))
            rows = np.flatnonzero(hit.any(axis=1))
            reward[rows, first[rows]] = 1.0
        pre = log.prefix_probabilities(ctx, item)
        marg = log.marginals()[ctx[:, None], np.arange(L), item]
        return SlateLogs(
            slate_id=np.arange(n),
            item=item,
            reward=reward,
            propensity=marg,
            slate_propensity=pre[:, -1].copy(),
            prefix_propensity=pre,
            context=ctx,
            rows=np.arange(n * L).reshape(n, L),
        )
