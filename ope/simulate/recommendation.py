"""A recommendation environment: long-tail catalog, candidate sets, exact policy values."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final

import numpy as np
import numpy.typing as npt

from ope._validation import check_array_size, describe
from ope.exceptions import ParameterError
from ope.simulate._common import (
    CandidateListTables,
    argmax_table,
    check_float,
    check_id_pair,
    check_int,
    check_model_size,
    model_array,
    softmax,
)

__all__ = ["Recommendation"]

#: baseline click logit: a logged click-through rate near 10%, as in display and feed logs
BASE_CLICK_LOGIT: Final = -4.0
#: weight of log relative popularity in the click logit: popular items click a little more
POPULARITY_CLICK_WEIGHT: Final = 0.15
#: spread of the per-segment click logit offsets (new users click least, power users most)
SEGMENT_CLICK_SPREAD: Final = 0.6
#: weight of log popularity in the logger's score: a popularity-biased production ranker
LOGGING_POPULARITY_WEIGHT: Final = 1.0
#: weight of the user-item affinity in the logger's score: weakly personalised
LOGGING_AFFINITY_WEIGHT: Final = 0.5
#: temperature of the ``personalized`` candidate on the true click logits
PERSONALIZED_TEMPERATURE: Final = 0.5
#: temperature of the ``long_tail`` candidate on minus log popularity: strongly favours rare
#: items, which a popularity-biased logger seldom shows (poor overlap by design)
LONG_TAIL_TEMPERATURE: Final = 0.5
#: rows of the (requests x catalog) Gumbel keys built at once when drawing candidate sets
_GUMBEL_CHUNK: Final = 256
#: the most Gumbel keys of the candidate draw (one per request and catalog item, drawn in
#: blocks of _GUMBEL_CHUNK requests): 2**24 keep it near a second (the defaults draw 10**7)
MAX_CANDIDATE_KEYS: Final = 1 << 24

_BUILTIN: Final = ("popular", "personalized", "greedy", "long_tail", "uniform")

_DEFAULT_SEGMENTS: Final = ("new", "casual", "regular", "loyal", "power")


class Recommendation(CandidateListTables):
    r"""Single-slot recommendation from per-request candidate sets, with exact policy values.

    A request (context) is one of ``n_requests`` types drawn with known probabilities. Each type
    has a user segment, user features and a fixed candidate list of ``n_candidates`` distinct
    items drawn from a catalog of ``n_items`` items with Zipf-like (long-tail) popularity. The
    logger shows one candidate; the reward is a click, Bernoulli with a known probability. All
    per-row arrays run over the candidates only, never over the catalog.

    Parameters
    ----------
    n_items : int, default 5000
        Catalog size; item ids are ``0 .. n_items-1`` (not ordered by popularity).
    n_candidates : int, default 20
        Items per candidate list ``L``.
    n_requests : int, default 2000
        Number of request types ``M``.
    n_features : int, default 4
        User features ``x0 .. x{d-1}`` (also the dimension of the user-item affinity).
    segments : sequence of str, default ("new", "casual", "regular", "loyal", "power")
        User segment labels; their offsets of the click logit increase along this order.
    zipf_exponent : float, default 1.0
        Popularity of the item of popularity rank ``r`` (1-based) is proportional to
        ``r ** -zipf_exponent``.
    logging_temperature : float, default 1.0
        Temperature of the logger's softmax; larger means flatter, i.e. better overlap.
    logging_epsilon : float, default 0.05
        Share of the logger spread uniformly over its supported candidates.
    logging_top_k : int, optional
        Deficient support: the logger only ever shows its ``logging_top_k`` best-scored
        candidates (in ``restricted_segments``); the other candidates get probability 0.
    restricted_segments : sequence of str, optional
        Segments where ``logging_top_k`` applies; default all segments.
    policies : mapping of str to array of shape (n_requests, n_candidates), optional
        Extra named candidate policies as probability tables over each request's candidates.
    seed : int, default 0
        Seed of the model's parameters; sampling randomness comes from :meth:`sample`'s ``rng``.

    Attributes
    ----------
    candidate_policies : tuple of str
        ``popular`` (most popular candidate), ``personalized`` (softmax of the true click
        logits, temperature 0.5), ``greedy`` (highest click probability), ``long_tail`` (softmax
        of minus log popularity, temperature 0.5: poor overlap), ``uniform``, then those given in
        ``policies``. The logging policy is ``"logging"``.
    reward_range : tuple of float
        ``(0.0, 1.0)``: rewards are clicks.

    Notes
    -----
    The click probability of item :math:`j` for request type :math:`m` in segment :math:`k` is
    :math:`q(m, j) = \sigma(-4 + \beta_k + u_m^\top v_j/\sqrt d + c_j + 0.15 \log(N p_j))`,
    with popularity :math:`p_j`, catalog size :math:`N`, user features :math:`u_m`, item
    factors :math:`v_j` and item quality :math:`c_j`. With request probabilities
    :math:`P(m)` and candidate lists :math:`C_m`,

    .. math:: V(\pi) = \sum_{m} P(m) \sum_{j \in C_m} \pi(j \mid m)\, q(m, j),

    an exact finite sum. The logger is a softmax of
    :math:`\log p_j + 0.5\, u_m^\top v_j/\sqrt d` (popularity-biased) mixed with
    ``logging_epsilon`` uniform over its support.

    References
    ----------
    .. [1] D. Rohde, S. Bonner, T. Dunlop, F. Vasile and A. Karatzoglou, "RecoGym: A
       reinforcement learning environment for the problem of product recommendation in online
       advertising", REVEAL workshop, RecSys, 2018.
    .. [2] Y. Saito, S. Aihara, M. Matsutani and Y. Narita, "Open Bandit Dataset and Pipeline:
       Towards realistic and reproducible off-policy evaluation", NeurIPS Datasets and
       Benchmarks, 2021.

    Examples
    --------
    >>> from ope.simulate import Recommendation
    >>> env = Recommendation(n_items=1000, n_candidates=10, n_requests=300, seed=0)
    >>> logs = env.sample(500, rng=0)
    >>> logs.schema.field("candidates").type
    ListType(list<item: int64>)
    >>> env.candidate_policies
    ('popular', 'personalized', 'greedy', 'long_tail', 'uniform')
    >>> env.true_value("greedy") > env.true_value("logging")
    True
    """

    def __init__(
        self,
        *,
        n_items: int = 5000,
        n_candidates: int = 20,
        n_requests: int = 2000,
        n_features: int = 4,
        segments: Sequence[str] = _DEFAULT_SEGMENTS,
        zipf_exponent: float = 1.0,
        logging_temperature: float = 1.0,
        logging_epsilon: float = 0.05,
        logging_top_k: int | None = None,
        restricted_segments: Sequence[str] | None = None,
        policies: Mapping[str, npt.ArrayLike] | None = None,
        seed: int = 0,
    ) -> None:
        self.n_items = check_int("n_items", n_items, minimum=2)
        self.n_candidates = check_int("n_candidates", n_candidates, minimum=2, maximum=self.n_items)
        self.n_requests = check_int("n_requests", n_requests, minimum=1)
        self.n_features = check_int("n_features", n_features, minimum=1)
        if (
            isinstance(segments, (str, bytes))
            or not isinstance(segments, Iterable)
            or not all(isinstance(s, str) for s in segments)
        ):
            raise ParameterError(
                f"segments must be a sequence of str labels, e.g. segments=('new', 'loyal'); "
                f"got {describe(segments)}."
            )
        segments = tuple(segments)
        if len(segments) == 0 or len(set(segments)) != len(segments):
            raise ParameterError(f"segments must be non-empty and distinct; got {list(segments)}.")
        self.segments: tuple[str, ...] = segments
        self.zipf_exponent = check_float("zipf_exponent", zipf_exponent, low=0.0, high=10.0)
        self.logging_temperature = check_float(
            "logging_temperature", logging_temperature, low=0.0, high=np.inf, low_open=True
        )
        self.logging_epsilon = check_float("logging_epsilon", logging_epsilon, low=0.0, high=1.0)
        self.logging_top_k = (
            None
            if logging_top_k is None
            else check_int("logging_top_k", logging_top_k, minimum=1, maximum=self.n_candidates)
        )
        if restricted_segments is not None:
            if isinstance(restricted_segments, (str, bytes)) or not isinstance(
                restricted_segments, Iterable
            ):
                raise ParameterError(
                    f"restricted_segments must be a list of labels from segments "
                    f"{list(self.segments)}; got {describe(restricted_segments)}."
                )
            restricted_segments = tuple(restricted_segments)
            unknown = [s for s in restricted_segments if s not in self.segments]
            if unknown:
                raise ParameterError(
                    f"restricted_segments must be a list of labels from segments "
                    f"{list(self.segments)}; unknown: {unknown!r}."
                )
        self.restricted_segments = (
            self.segments if restricted_segments is None else tuple(restricted_segments)
        )
        self.seed = check_int("seed", seed, minimum=0)
        self.reward_range: tuple[float, float] = (0.0, 1.0)

        N, L, M, d, S = (
            self.n_items,
            self.n_candidates,
            self.n_requests,
            self.n_features,
            len(self.segments),
        )
        check_model_size([("n_items", N), ("n_features", d)], what="the item factors")
        check_model_size(
            [("n_requests", M), ("n_candidates", L), ("n_features", d)],
            what="the candidates' factors",
        )
        check_array_size(
            [("n_requests", M), ("n_items", N)],
            what="the candidate draw (a key per request and item)",
            limit=("MAX_CANDIDATE_KEYS", MAX_CANDIDATE_KEYS, "a catalog draws"),
        )
        checked = self._checked_policies(policies, _BUILTIN)
        g = np.random.default_rng(self.seed)
        # catalog: long-tail popularity over a random id order, item factors and quality
        rank = g.permutation(N)
        popularity = (rank + 1.0) ** -self.zipf_exponent
        popularity /= popularity.sum()
        item_factors = g.standard_normal((N, d))
        item_quality = 0.5 * g.standard_normal(N)
        # users: segment, features around the segment centre
        segment_probs = g.dirichlet(np.full(S, 5.0))
        centres = g.standard_normal((S, d))
        seg = g.choice(S, size=M, p=segment_probs)
        user = centres[seg] + 0.7 * g.standard_normal((M, d))
        probs = g.dirichlet(np.full(M, 2.0))
        seg_offset = np.linspace(-SEGMENT_CLICK_SPREAD, SEGMENT_CLICK_SPREAD, S)
        # candidate lists: L distinct items per request, successive sampling by popularity
        # (Gumbel top-L on log popularity), in chunks of requests
        cands = np.empty((M, L), dtype=np.int64)
        log_pop = np.log(popularity)
        for start in range(0, M, _GUMBEL_CHUNK):
            stop = min(start + _GUMBEL_CHUNK, M)
            keys = log_pop + g.gumbel(size=(stop - start, N))
            top = np.argpartition(-keys, L - 1, axis=1)[:, :L]
            order = np.argsort(-np.take_along_axis(keys, top, axis=1), axis=1)
            cands[start:stop] = np.take_along_axis(top, order, axis=1)

        self._popularity = popularity
        self._item_factors = item_factors
        self._item_quality = item_quality
        self._user = user
        self._seg = seg
        self._seg_offset = seg_offset
        logits = self._click_logits(np.repeat(np.arange(M), L), cands.ravel()).reshape(M, L)
        q = 1.0 / (1.0 + np.exp(-logits))
        affinity = np.einsum("mld,md->ml", item_factors[cands], user) / np.sqrt(d)
        score = LOGGING_POPULARITY_WEIGHT * log_pop[cands] + LOGGING_AFFINITY_WEIGHT * affinity

        support = np.ones((M, L), dtype=bool)
        if self.logging_top_k is not None and self.logging_top_k < L:
            restricted = np.isin(seg, [self.segments.index(s) for s in self.restricted_segments])
            worst_first = np.argsort(score, axis=1, kind="stable")[:, : L - self.logging_top_k]
            rows = np.flatnonzero(restricted)
            support[rows[:, None], worst_first[rows]] = False
        soft = softmax(np.where(support, score, -np.inf), self.logging_temperature)
        logging = (1.0 - self.logging_epsilon) * soft + self.logging_epsilon * (
            support / support.sum(axis=1, keepdims=True)
        )
        tables: dict[str, npt.NDArray[np.float64]] = {
            "logging": logging,
            "popular": argmax_table(log_pop[cands]),
            "personalized": softmax(logits, PERSONALIZED_TEMPERATURE),
            "greedy": argmax_table(q),
            "long_tail": softmax(-log_pop[cands], LONG_TAIL_TEMPERATURE),
            "uniform": np.full((M, L), 1.0 / L),
        }
        self._install_model(
            tables,
            checked,
            probs=probs,
            q=q,
            seg=seg,
            support=support,
            model=(popularity, item_factors, item_quality, user, cands),
        )
        self._cands = cands

    # ------------------------------------------------------------------ model tables
    item_popularity = model_array(
        "_popularity",
        "Popularity (probability of entering a candidate draw) of each item, sums to one.",
    )
    context_features = model_array(
        "_user", "User features of each request type, shape (n_requests, n_features)."
    )
    candidate_sets = model_array(
        "_cands", "Item ids of each request's candidates, shape (n_requests, n_candidates)."
    )

    def expected_reward(
        self, context_ids: npt.ArrayLike, items: npt.ArrayLike
    ) -> npt.NDArray[np.float64]:
        """Click probability ``q(m_i, j_i)`` of item ``j_i`` (any catalog item) for request ``m_i``.

        Items need not be among the request's candidates: the click model covers the catalog.
        """
        m, j = check_id_pair(
            context_ids,
            items,
            sizes=(self.n_requests, self.n_items),
            names=("context_ids", "items"),
        )
        return 1.0 / (1.0 + np.exp(-self._click_logits(m, j)))

    # ------------------------------------------------------------------ sampling

    # ------------------------------------------------------------------ helpers
    def _click_logits(
        self, m: npt.NDArray[np.int64], j: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64]:
        affinity = np.einsum("nd,nd->n", self._user[m], self._item_factors[j])
        return (
            BASE_CLICK_LOGIT
            + self._seg_offset[self._seg[m]]
            + affinity / np.sqrt(self.n_features)
            + self._item_quality[j]
            + POPULARITY_CLICK_WEIGHT * np.log(self.n_items * self._popularity[j])
        )

    def _n_context_types(self) -> int:
        return self.n_requests

    def _row_width(self) -> int:
        return max(self.n_candidates, self.n_features)

    # ------------------------------------------------------------------ steps of sample()
    def _action_ids(
        self, ctx: npt.NDArray[np.int64], col: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.int64]:
        return self._cands[ctx, col]  # column l of a request is its l-th candidate item

    def _draw_reward(
        self, q_logged: npt.NDArray[np.float64], g: np.random.Generator
    ) -> npt.NDArray[np.float64]:
        return (g.random(q_logged.shape[0]) < q_logged).astype(np.float64)  # clicks

    def __repr__(self) -> str:
        return (
            f"Recommendation(n_items={self.n_items}, n_candidates={self.n_candidates}, "
            f"n_requests={self.n_requests}, logging_top_k={self.logging_top_k}, seed={self.seed})"
        )
