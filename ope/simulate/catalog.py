"""A large catalog whose items share categorical embeddings: exact truth for marginalized
estimators (MIPS, OffCEM)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from ope._validation import check_array_size, check_flag, check_rng
from ope.exceptions import ParameterError
from ope.simulate._common import (
    MAX_MODEL_CELLS,
    CandidateListTables,
    check_float,
    check_id_pair,
    check_int,
    check_model_size,
    model_array,
    softmax,
)

__all__ = ["CatalogBandit"]

#: mean reward around which the embedding and item effects move (the middle of [0, 1])
BASE_REWARD: Final = 0.5
#: the most the embedding effect moves the mean from BASE_REWARD (shared over the dimensions):
#: the embedding part of the mean lies in (0.2, 0.8)
EMBEDDING_AMPLITUDE: Final = 0.3
#: scale of the item-level (direct) effect h = ITEM_EFFECT_SCALE * x'(w_a - mean of the
#: cluster's w); x and w are unit vectors, so |h| <= 2 * ITEM_EFFECT_SCALE = 0.2 and, with
#: direct_effect <= 1, the mean stays in [0, 1] without clipping
ITEM_EFFECT_SCALE: Final = 0.1
#: standard deviation of the category biases of the embedding effect
CATEGORY_BIAS_SD: Final = 0.5
#: weight of the mean reward in the logger's score (beside its own N(0, 1) item-level taste):
#: an informed, imperfect logger whose probabilities also vary within a cluster
LOGGING_REWARD_WEIGHT: Final = 10.0
#: temperature of the ``greedy`` candidate's softmax on the mean reward: concentrated on the best
#: few candidates, so per-item overlap with the logger is poor
GREEDY_TEMPERATURE: Final = 0.02
#: temperature of the ``cluster_shift`` candidate's tilt of the logger's cluster masses towards
#: clusters of higher embedding effect: cluster-level weights stay moderate
CLUSTER_SHIFT_TEMPERATURE: Final = 0.1
#: the most random keys the candidate draw uses (one per request and eligible cluster, and per
#: request, chosen cluster and position in it); 2**24 keep it near a second
MAX_CANDIDATE_KEYS: Final = 1 << 24
#: the most embedding dimensions (with at least 2 categories each, 2**20 joint embeddings)
MAX_EMBEDDING_DIMS: Final = 20

_BUILTIN: Final = ("greedy", "cluster_shift", "uniform")


class CatalogBandit(CandidateListTables):
    r"""A large catalog whose items share categorical embeddings, with exact policy values.

    The simulator of off-policy evaluation in large action spaces: a catalog of ``n_items``
    items, each with ``n_embedding_dims`` categorical features ``e0, e1, ..`` of
    ``n_categories`` values. The joint embedding of an item is its ``cluster`` (the index
    ``e0 + e1 * n_categories + ...``): clusters and joint embeddings coincide. A request
    (context) is one of ``n_requests`` types drawn with known probabilities, with features
    ``x0 ..`` and a fixed list of ``n_candidates`` items from ``n_candidate_clusters`` clusters
    (several items per cluster, so that a policy can move mass between the items of a cluster).
    The reward is Bernoulli; its mean depends on the item through its embedding and, with
    weight ``direct_effect``, through an item-level effect that the embedding does not see. All
    per-row arrays run over the candidates only, never over the catalog.

    Parameters
    ----------
    n_items : int, default 10000
        Catalog size; item ids are ``0 .. n_items-1``.
    n_candidates : int, default 50
        Items per candidate list ``L`` (at most ``n_items``).
    n_requests : int, default 1000
        Number of request types ``M``.
    n_features : int, default 4
        Request features ``x0 .. x{d-1}`` (a unit vector per request type).
    n_embedding_dims : int, default 2
        Categorical embedding dimensions ``D`` (columns ``e0 .. e{D-1}``).
    n_categories : int, default 10
        Values of each embedding dimension ``V``; there are ``V ** D`` clusters, and the items
        are spread evenly over them (at random, fixed by ``seed``).
    n_candidate_clusters : int, default 10
        Clusters each candidate list is drawn from (``L`` items spread as evenly as possible
        over them); at most ``n_candidates``.
    direct_effect : float, default 0.0
        Weight :math:`\delta \in [0, 1]` of the item-level effect. With 0 the mean reward
        depends on the item only through its embedding (the no-direct-effect assumption of
        MIPS holds exactly); larger values break it.
    embedding_effects : sequence of float, optional
        A scale in [0, 1] per embedding dimension multiplying its effect :math:`g_d` (default
        1 for each): a dimension of scale 0 has no effect on the reward, so a marginalized
        estimator may drop it without bias (what ``ActionEmbedding(select=...)`` is for). The
        random draws do not depend on it: the same seed gives the same catalog, candidates and
        effects before scaling.
    stochastic_embeddings : bool, default False
        Draw each logged row's embedding ``e_d`` from :math:`p(e_d \mid a)` (the item's own
        category with probability ``1 - embedding_noise``, else a uniform category) and record
        it in the columns ``e0 ..``; the reward mean then depends on the observed embedding.
    embedding_noise : float, default 0.2
        :math:`\eta \in [0, 1]` of the stochastic embeddings (ignored without them).
    logging_temperature : float, default 1.0
        Temperature of the logger's softmax; larger means flatter, i.e. better overlap.
    logging_epsilon : float, default 0.05
        Share of the logger spread uniformly over the candidates.
    policies : mapping of str to array of shape (n_requests, n_candidates), optional
        Extra named candidate policies as probability tables over each request's candidates.
    seed : int, default 0
        Seed of the model's parameters; sampling randomness comes from :meth:`sample`'s ``rng``.

    Attributes
    ----------
    candidate_policies : tuple of str
        ``greedy`` (softmax of the mean reward at temperature 0.02: concentrated, poor per-item
        overlap), ``cluster_shift`` (the logger's cluster masses tilted towards clusters of
        higher embedding effect, each cluster's mass put on the candidate the logger shows
        least: huge item-level weights, moderate cluster-level ones), ``uniform``, then those
        given in ``policies``. The logging policy is ``"logging"``.
    segments : tuple of str
        ``("all",)``: one segment (the logs' ``segment`` column is constant).
    reward_range : tuple of float
        ``(0.0, 1.0)``: rewards are Bernoulli.

    Notes
    -----
    Request type :math:`m` has probability :math:`P(m)`, features :math:`x_m` (a unit vector)
    and candidates :math:`C_m`. Item :math:`a` has categories :math:`e_d(a)`, cluster
    :math:`c(a) = \sum_d e_d(a) V^d` and a unit factor :math:`w_a`. The mean reward is

    .. math::

        q(x, a) = \tfrac12 + \sum_{d} \mathbb{E}_{e_d \sim p(\cdot \mid a)}\, g_d(x, e_d)
                  + \delta\, h(x, a),

    with the embedding effect :math:`g_d(x, v) = \frac{0.3}{D} \tanh(x^\top \beta_{d,v} +
    b_{d,v})` (Gaussian :math:`\beta`, :math:`b`) and the item-level effect
    :math:`h(x, a) = 0.1\, x^\top (w_a - \bar w_{c(a)})`, where :math:`\bar w_c` is the mean
    factor of the catalog's items in cluster :math:`c`: :math:`h` sums to zero over each
    cluster for every context and :math:`|h| \le 0.2`, so :math:`q \in [0, 1]` without
    clipping. Deterministic embeddings have :math:`p(e_d \mid a) = 1[e_d = e_d(a)]`; stochastic
    ones :math:`p(e_d \mid a) = (1 - \eta)\, 1[e_d = e_d(a)] + \eta / V`, and a row's reward
    mean given its observed embedding :math:`e` is
    :math:`\tfrac12 + \sum_d g_d(x, e_d) + \delta h(x, a)`. Bernoulli rewards keep the reward
    range known (``(0, 1)``, like clicks), which the bounded-interval estimators need.

    With :math:`\delta = 0` the reward depends on the action only through its embedding: the
    assumption of the marginalized IPS (MIPS) estimator [1]_, whose weights
    :math:`p(e \mid x, \pi) / p(e \mid x, \pi_0)` stay moderate where the item-level weights
    :math:`\pi(a \mid x) / \pi_0(a \mid x)` explode (``cluster_shift``). With
    :math:`\delta > 0`, MIPS is biased by the item-level effect it cannot see, while the
    conjunct effect model (OffCEM) [2]_ with a model of :math:`h` stays unbiased (its residual
    :math:`q - \delta h` depends on the action only through the cluster: local correctness).

    The value of a policy is the exact finite sum

    .. math:: V(\pi) = \sum_{m} P(m) \sum_{a \in C_m} \pi(a \mid m)\, q(x_m, a).

    The logger is a softmax of :math:`10\, q(x_m, a) + \xi_{m,a}` (:math:`\xi` standard normal,
    fixed by the seed) at ``logging_temperature``, mixed with ``logging_epsilon`` uniform.

    References
    ----------
    .. [1] Y. Saito and T. Joachims, "Off-policy evaluation for large action spaces via
       embeddings", ICML, 2022 (arXiv:2202.06317).
    .. [2] Y. Saito, Q. Ren and T. Joachims, "Off-policy evaluation for large action spaces
       via conjunct effect modeling", ICML, 2023 (arXiv:2305.08062).

    Examples
    --------
    >>> import ope
    >>> from ope.simulate import CatalogBandit
    >>> env = CatalogBandit(n_items=2000, n_candidates=20, n_requests=100, seed=0)
    >>> env.candidate_policies
    ('greedy', 'cluster_shift', 'uniform')
    >>> logs = ope.read_logs(env.sample(1000, rng=0)).with_action_features(env.action_features())
    >>> logs.action_features.column_names
    ['action', 'cluster', 'e0', 'e1']
    >>> env.true_value("greedy") > env.true_value("logging")
    True
    """

    def __init__(
        self,
        *,
        n_items: int = 10_000,
        n_candidates: int = 50,
        n_requests: int = 1000,
        n_features: int = 4,
        n_embedding_dims: int = 2,
        n_categories: int = 10,
        n_candidate_clusters: int = 10,
        direct_effect: float = 0.0,
        embedding_effects: Sequence[float] | None = None,
        stochastic_embeddings: bool = False,
        embedding_noise: float = 0.2,
        logging_temperature: float = 1.0,
        logging_epsilon: float = 0.05,
        policies: Mapping[str, npt.ArrayLike] | None = None,
        seed: int = 0,
    ) -> None:
        self.n_items = check_int("n_items", n_items, minimum=2)
        self.n_candidates = check_int("n_candidates", n_candidates, minimum=2)
        if self.n_candidates > self.n_items:
            raise ParameterError(
                f"`n_candidates`={self.n_candidates} is more than the catalog's "
                f"`n_items`={self.n_items}: a candidate list holds distinct items. Pass "
                "n_candidates <= n_items."
            )
        self.n_requests = check_int("n_requests", n_requests, minimum=1)
        self.n_features = check_int("n_features", n_features, minimum=1)
        self.n_embedding_dims = check_int(
            "n_embedding_dims", n_embedding_dims, minimum=1, maximum=MAX_EMBEDDING_DIMS
        )
        self.n_categories = check_int(
            "n_categories", n_categories, minimum=2, maximum=MAX_MODEL_CELLS
        )
        self.n_clusters = self.n_categories**self.n_embedding_dims
        if self.n_clusters > MAX_MODEL_CELLS:
            raise ParameterError(
                f"`n_categories`={self.n_categories} ** `n_embedding_dims`="
                f"{self.n_embedding_dims} gives {self.n_clusters:,} joint embeddings (clusters), "
                f"more than the {MAX_MODEL_CELLS:,} (MAX_MODEL_CELLS) a simulator builds in one "
                "model table. Pass fewer `n_categories` or `n_embedding_dims`."
            )
        self.n_candidate_clusters = check_int(
            "n_candidate_clusters", n_candidate_clusters, minimum=1, maximum=self.n_candidates
        )
        self.direct_effect = check_float("direct_effect", direct_effect, low=0.0, high=1.0)
        if embedding_effects is None:
            scales = (1.0,) * self.n_embedding_dims
        elif isinstance(embedding_effects, (str, bytes)) or not isinstance(
            embedding_effects, Sequence | np.ndarray
        ):
            raise ParameterError(
                "`embedding_effects` must be a sequence of one scale in [0, 1] per embedding "
                f"dimension, e.g. [1.0, 0.0]; got {type(embedding_effects).__name__}."
            )
        else:
            scales = tuple(
                check_float("embedding_effects", v, low=0.0, high=1.0) for v in embedding_effects
            )
            if len(scales) != self.n_embedding_dims:
                raise ParameterError(
                    f"`embedding_effects` must hold one scale per embedding dimension "
                    f"(n_embedding_dims={self.n_embedding_dims}); got {len(scales)}."
                )
        self.embedding_effects: tuple[float, ...] = scales
        flag = check_flag(stochastic_embeddings, "stochastic_embeddings")
        self.stochastic_embeddings: bool = bool(flag)
        self.embedding_noise = check_float("embedding_noise", embedding_noise, low=0.0, high=1.0)
        self.logging_temperature = check_float(
            "logging_temperature", logging_temperature, low=0.0, high=np.inf, low_open=True
        )
        self.logging_epsilon = check_float("logging_epsilon", logging_epsilon, low=0.0, high=1.0)
        self.seed = check_int("seed", seed, minimum=0)
        self.segments: tuple[str, ...] = ("all",)
        self.reward_range: tuple[float, float] = (0.0, 1.0)

        N, L, M, d = self.n_items, self.n_candidates, self.n_requests, self.n_features
        D, V, C, K = (
            self.n_embedding_dims,
            self.n_categories,
            self.n_clusters,
            self.n_candidate_clusters,
        )
        check_model_size([("n_items", N), ("n_features", d)], what="the item factors")
        check_model_size([("n_items", N), ("n_embedding_dims", D)], what="the item embeddings")
        check_model_size(
            [("n_requests", M), ("n_candidates", L), ("n_features", d)],
            what="the candidates' factors",
        )
        check_model_size(
            [("n_requests", M), ("n_embedding_dims", D), ("n_categories", V)],
            what="the embedding effects",
        )
        need = -(-L // K)  # items taken from each chosen cluster (one fewer for some)
        sizes = np.maximum(0, -(-(N - np.arange(C)) // C))  # items per cluster, size N // C + 0/1
        eligible = np.flatnonzero(sizes >= need)
        if eligible.size < K:
            raise ParameterError(
                f"`n_candidate_clusters`={K} clusters of up to {need} candidates each need {K} "
                f"clusters of at least {need} items; a catalog of `n_items`={N} spread over "
                f"{C:,} clusters (`n_categories` ** `n_embedding_dims`) has {eligible.size}. "
                "Pass a larger `n_candidate_clusters` or `n_items`, or fewer `n_categories`."
            )
        s_max = int(sizes[0])
        check_array_size(
            [("n_requests", M), ("n_candidate_clusters", K)],
            what="the candidate draw (a key per request, chosen cluster and item of that "
            + f"cluster: up to {s_max:,} items)",
            factor=s_max,
            limit=("MAX_CANDIDATE_KEYS", MAX_CANDIDATE_KEYS, "a catalog draws"),
        )
        check_array_size(
            [("n_requests", M)],
            what=f"the cluster draw (a key per request and each of the {C:,} clusters)",
            factor=C,
            limit=("MAX_CANDIDATE_KEYS", MAX_CANDIDATE_KEYS, "a catalog draws"),
        )
        checked = self._checked_policies(policies, _BUILTIN)
        g = np.random.default_rng(self.seed)

        # catalog: item a has slot perm[a]; its cluster is slot % C and its rank in the
        # cluster slot // C, so the clusters' sizes differ by at most one
        perm = g.permutation(N)
        by_slot = np.argsort(perm)
        cluster = perm % C
        emb = (cluster[:, None] // V ** np.arange(D)[None, :]) % V
        w = _unit_rows(g.standard_normal((N, d)))
        counts = np.bincount(cluster, minlength=C).astype(np.float64)
        centres = (
            np.stack([np.bincount(cluster, weights=w[:, k], minlength=C) for k in range(d)], axis=1)
            / np.maximum(counts, 1.0)[:, None]
        )
        centred = w - centres[cluster]
        # requests: unit features, known probabilities, embedding effects per category
        user = _unit_rows(g.standard_normal((M, d)))
        probs = g.dirichlet(np.full(M, 2.0))
        beta = g.standard_normal((D, V, d))
        bias = CATEGORY_BIAS_SD * g.standard_normal((D, V))
        effects = (EMBEDDING_AMPLITUDE / D) * np.tanh(
            np.einsum("md,evd->emv", user, beta) + bias[:, None, :]
        )
        effects *= np.asarray(self.embedding_effects)[:, None, None]
        cands, slots, chosen = _draw_candidates(
            g, M=M, L=L, K=K, C=C, eligible=eligible, sizes=sizes, s_max=s_max, by_slot=by_slot
        )

        self._user, self._emb, self._cluster = user, emb, cluster
        self._centred, self._effects = centred, effects
        self._noise = self.embedding_noise if self.stochastic_embeddings else 0.0
        rows = np.repeat(np.arange(M), L)
        embedding_part = self._embedding_mean(rows, cands.ravel()).reshape(M, L)
        q = embedding_part + self.direct_effect * self._item_effect(rows, cands.ravel()).reshape(
            M, L
        )

        taste = g.standard_normal((M, L))
        soft = softmax(LOGGING_REWARD_WEIGHT * q + taste, self.logging_temperature)
        logging = (1.0 - self.logging_epsilon) * soft + self.logging_epsilon / L
        tables: dict[str, npt.NDArray[np.float64]] = {
            "logging": logging,
            "greedy": softmax(q, GREEDY_TEMPERATURE),
            "cluster_shift": _cluster_shift(logging, embedding_part, slots, K),
            "uniform": np.full((M, L), 1.0 / L),
        }
        self._install_model(
            tables,
            checked,
            probs=probs,
            q=q,
            seg=np.zeros(M, dtype=np.int64),
            support=logging > 0,
            model=(user, emb, cluster, centred, effects, cands, chosen),
        )
        self._cands = cands
        self._cand_clusters = chosen[np.arange(M)[:, None], slots]
        self._cand_clusters.setflags(write=False)

    # ------------------------------------------------------------------ model tables
    context_features = model_array(
        "_user", "Features of each request type, shape (n_requests, n_features)."
    )
    candidate_sets = model_array(
        "_cands", "Item ids of each request's candidates, shape (n_requests, n_candidates)."
    )
    candidate_clusters = model_array(
        "_cand_clusters",
        "Cluster of each request's candidates, shape (n_requests, n_candidates).",
    )
    item_clusters = model_array("_cluster", "Cluster (joint embedding index) of each item.")
    item_embeddings = model_array(
        "_emb", "Categories of each item, shape (n_items, n_embedding_dims)."
    )

    def action_features(self) -> pa.Table:
        """One row per catalog item: ``action``, ``cluster`` and its categories ``e0 ..``.

        For :meth:`ope.BanditLogs.with_action_features`. With stochastic embeddings the
        categories are the items' own (the most likely value of :math:`p(e_d \\mid a)`); the
        logs' ``e0 ..`` columns hold the ones each row observed.
        """
        cols: dict[str, pa.Array] = {
            "action": pa.array(np.arange(self.n_items, dtype=np.int64)),
            "cluster": pa.array(self._cluster.astype(np.int64)),
        }
        for k in range(self.n_embedding_dims):
            cols[f"e{k}"] = pa.array(np.ascontiguousarray(self._emb[:, k]).astype(np.int64))
        return pa.table(cols)

    def embedding_distribution(self) -> dict[str, pa.Table]:
        r"""The known :math:`p(e_d \mid a)` of each embedding column, sparse.

        Returns
        -------
        dict of str to pyarrow.Table
            ``{"e0": table, ..}``; each table has ``action``, ``value`` (int64) and
            ``probability`` (float64), one row per (item, category) of positive probability:
            one row per item for deterministic embeddings (probability 1), ``n_categories`` rows
            per item for stochastic ones (:math:`1 - \eta + \eta / V` on the item's own
            category, :math:`\eta / V` on each other).
        """
        N, V, eta = self.n_items, self.n_categories, self._noise
        out: dict[str, pa.Table] = {}
        for k in range(self.n_embedding_dims):
            own = self._emb[:, k].astype(np.int64)
            if eta == 0.0:
                action, value, prob = np.arange(N, dtype=np.int64), own, np.ones(N)
            else:
                action = np.repeat(np.arange(N, dtype=np.int64), V)
                value = np.tile(np.arange(V, dtype=np.int64), N)
                prob = np.where(value == np.repeat(own, V), 1.0 - eta + eta / V, eta / V)
            out[f"e{k}"] = pa.table(
                {"action": pa.array(action), "value": pa.array(value), "probability": prob}
            )
        return out

    def expected_reward(
        self, context_ids: npt.ArrayLike, items: npt.ArrayLike
    ) -> npt.NDArray[np.float64]:
        """Mean reward ``q(m_i, a_i)`` of item ``a_i`` (any catalog item) for request ``m_i``.

        With stochastic embeddings, the mean over the embedding draw :math:`p(e \\mid a)`.
        """
        m, j = check_id_pair(
            context_ids,
            items,
            sizes=(self.n_requests, self.n_items),
            names=("context_ids", "items"),
        )
        return self._embedding_mean(m, j) + self.direct_effect * self._item_effect(m, j)

    # ------------------------------------------------------------------ sampling
    def sample(
        self,
        n: int,
        *,
        rng: int | np.random.Generator | None = None,
        logging_policy: str | npt.ArrayLike = "logging",
        oracle: bool = False,
        distributions: bool = True,
    ) -> pa.Table:
        r"""Draw ``n`` logged decisions in the canonical bandit schema (docs/guide/logs.md).

        Parameters
        ----------
        n : int
            Number of rows (logged events).
        rng : int, numpy.random.Generator or None
            Randomness of the draw; the same seed gives the same table.
        logging_policy : str or array, default "logging"
            The policy that draws the actions: ``"logging"``, a candidate name (on-policy
            data) or a probability table of shape (n_requests, n_candidates).
        oracle : bool, default False
            Also return ``context_id``, ``q_logged`` (mean reward of the logged action, over
            the embedding draw when it is stochastic) and ``q_target__<name>``.
        distributions : bool, default True
            Return the ``target_dist__<name>`` lists aligned with ``candidates`` (what a
            marginalized estimator needs to compute :math:`p(e \mid x, \pi)`).

        Returns
        -------
        pyarrow.Table
            ``event_id``, ``action``, ``propensity``, ``reward``, ``x0 ..``, ``segment``,
            ``candidates`` (list<int64>), ``logging_distribution`` (list<float64>),
            ``target__<name>`` per candidate policy, ``target_dist__<name>`` (with
            ``distributions``), the oracle columns, then, with stochastic embeddings, the
            observed categories ``e0 ..`` (int64).
        """
        oracle = bool(check_flag(oracle, "oracle"))
        distributions = bool(check_flag(distributions, "distributions"))
        g = check_rng(rng)
        stochastic = self.stochastic_embeddings
        table = super().sample(
            n,
            rng=g,
            logging_policy=logging_policy,
            oracle=oracle or stochastic,
            distributions=distributions,
        )
        if not stochastic:
            return table
        ctx = table.column("context_id").to_numpy()
        action = table.column("action").to_numpy()
        observed = self._emb[action].astype(np.int64)
        replaced = g.random(observed.shape) < self._noise
        observed[replaced] = g.integers(0, self.n_categories, size=int(replaced.sum()))
        mean = (
            BASE_REWARD
            + self._embedding_effect(ctx, observed)
            + self.direct_effect * self._item_effect(ctx, action)
        )
        reward = (g.random(mean.shape[0]) < mean).astype(np.float64)
        table = table.set_column(table.column_names.index("reward"), "reward", pa.array(reward))
        for k in range(self.n_embedding_dims):
            table = table.append_column(f"e{k}", pa.array(np.ascontiguousarray(observed[:, k])))
        if not oracle:
            table = table.drop_columns(
                [c for c in table.column_names if c in ("context_id", "q_logged")]
                + [c for c in table.column_names if c.startswith("q_target__")]
            )
        return table

    # ------------------------------------------------------------------ helpers
    def _embedding_effect(
        self, m: npt.NDArray[np.int64], e: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64]:
        """:math:`\\sum_d g_d(x_m, e_d)` per row, for categories ``e`` of shape (rows, D)."""
        out = np.zeros(m.shape[0])
        for k in range(self.n_embedding_dims):
            out += self._effects[k][m, e[:, k]]
        return out

    def _embedding_mean(
        self, m: npt.NDArray[np.int64], j: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64]:
        """The embedding part of ``q``: 1/2 plus the effect of item ``j``'s categories, averaged
        over the embedding draw."""
        own = self._embedding_effect(m, self._emb[j])
        if self._noise == 0.0:
            return BASE_REWARD + own
        uniform = self._effects.mean(axis=2).sum(axis=0)[m]
        return BASE_REWARD + (1.0 - self._noise) * own + self._noise * uniform

    def _item_effect(
        self, m: npt.NDArray[np.int64], j: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64]:
        """The item-level effect ``h(x_m, j)``, zero-sum over each cluster of the catalog."""
        return ITEM_EFFECT_SCALE * np.einsum("nd,nd->n", self._user[m], self._centred[j])

    def _n_context_types(self) -> int:
        return self.n_requests

    def _row_width(self) -> int:
        return max(self.n_candidates, self.n_features, self.n_embedding_dims)

    # ------------------------------------------------------------------ steps of sample()
    def _action_ids(
        self, ctx: npt.NDArray[np.int64], col: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.int64]:
        return self._cands[ctx, col]

    def _draw_reward(
        self, q_logged: npt.NDArray[np.float64], g: np.random.Generator
    ) -> npt.NDArray[np.float64]:
        if self.stochastic_embeddings:  # drawn by sample() once the embeddings are
            return np.full(q_logged.shape[0], np.nan)
        return (g.random(q_logged.shape[0]) < q_logged).astype(np.float64)

    def __repr__(self) -> str:
        return (
            f"CatalogBandit(n_items={self.n_items}, n_candidates={self.n_candidates}, "
            f"n_requests={self.n_requests}, n_embedding_dims={self.n_embedding_dims}, "
            f"n_categories={self.n_categories}, direct_effect={self.direct_effect}, "
            + (
                f"embedding_effects={self.embedding_effects}, "
                if any(v != 1.0 for v in self.embedding_effects)
                else ""
            )
            + f"stochastic_embeddings={self.stochastic_embeddings}, seed={self.seed})"
        )


def _unit_rows(a: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Each row scaled to unit length (a zero row, of probability zero, stays zero)."""
    norms = np.linalg.norm(a, axis=1, keepdims=True)
    return a / np.where(norms > 0, norms, 1.0)


def _draw_candidates(
    g: np.random.Generator,
    *,
    M: int,
    L: int,
    K: int,
    C: int,
    eligible: npt.NDArray[np.int64],
    sizes: npt.NDArray[np.int64],
    s_max: int,
    by_slot: npt.NDArray[np.int64],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Each request's candidates: ``K`` distinct clusters among ``eligible`` (uniformly), then
    distinct items of each, ``L`` in all, in a random order.

    Returns the item ids (M, L), the index of each candidate's cluster among the request's
    chosen ones (M, L) and the chosen clusters (M, K). Item ``by_slot[c + k * C]`` is the
    ``k``-th item of cluster ``c``. Drawn in blocks of requests so that the keys of one block
    stay near 2**20.
    """
    need = -(-L // K)
    full = L - K * (
        need - 1
    )  # the first `full` chosen clusters give `need` items, the rest one less
    keep = np.arange(need)[None, :] < np.where(np.arange(K) < full, need, need - 1)[:, None]
    slot_of = np.broadcast_to(np.arange(K)[:, None], (K, need))[keep]
    cands = np.empty((M, L), dtype=np.int64)
    slots = np.empty((M, L), dtype=np.int64)
    chosen = np.empty((M, K), dtype=np.int64)
    block = max(1, (1 << 20) // (eligible.size + K * s_max + L))
    for start in range(0, M, block):
        stop = min(start + block, M)
        B = stop - start
        picks = np.argpartition(g.random((B, eligible.size)), K - 1, axis=1)[:, :K]
        clusters = eligible[picks]
        keys = g.random((B, K, s_max))
        keys[np.arange(s_max)[None, None, :] >= sizes[clusters][:, :, None]] = 2.0
        ranks = np.argpartition(keys, need - 1, axis=2)[:, :, :need]
        items = by_slot[clusters[:, :, None] + ranks * C][:, keep]
        order = np.argsort(g.random((B, L)), axis=1)
        cands[start:stop] = np.take_along_axis(items, order, axis=1)
        slots[start:stop] = slot_of[order]
        chosen[start:stop] = clusters
    return cands, slots, chosen


def _cluster_shift(
    logging: npt.NDArray[np.float64],
    embedding_part: npt.NDArray[np.float64],
    slots: npt.NDArray[np.int64],
    K: int,
) -> npt.NDArray[np.float64]:
    """The ``cluster_shift`` table: the logger's mass of each (request, cluster) tilted by
    ``exp(embedding part / CLUSTER_SHIFT_TEMPERATURE)`` and renormalized, all of it on the
    cluster's candidate that the logger shows least (the first on ties)."""
    M, L = logging.shape
    group = (np.arange(M)[:, None] * K + slots).ravel()
    mass = np.bincount(group, weights=logging.ravel(), minlength=M * K).reshape(M, K)
    level = np.zeros((M, K))
    level[np.arange(M)[:, None], slots] = embedding_part  # constant within a cluster
    tilt = mass * np.exp((level - level.max(axis=1, keepdims=True)) / CLUSTER_SHIFT_TEMPERATURE)
    shifted = (tilt / tilt.sum(axis=1, keepdims=True)).ravel()
    order = np.lexsort((np.arange(M * L), logging.ravel(), group))
    first = order[np.r_[0, np.flatnonzero(np.diff(group[order])) + 1]]
    out = np.zeros(M * L)
    out[first] = shifted[group[first]]
    return out.reshape(M, L)
