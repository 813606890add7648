"""Paired counterfactual replays (e.g. an agent with and without a memory item), exact effects."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from ope._validation import check_array_size, check_choice, check_rng
from ope.exceptions import ParameterError
from ope.simulate._common import (
    check_float,
    check_ids,
    check_int,
    check_model_size,
    check_sample_size,
    model_array,
)

__all__ = ["PairedReplaySimulator"]

#: range of the mean token count of a task's replay without the item (uniform draw)
TASK_TOKENS: Final = (300.0, 3000.0)
#: range of the mean token count an injected item adds (uniform draw)
ITEM_TOKENS: Final = (50.0, 500.0)
#: range of the mean number of paid tool calls of a task's replay without the item: from
#: tasks that mostly answer directly to tasks that search several times (uniform draw)
TASK_TOOL_CALLS: Final = (0.5, 5.0)
#: range of the change in mean tool calls an injected item brings: a memory can save a lookup
#: (negative, never below the smallest task mean, so the Poisson mean stays positive) or
#: prompt extra ones (uniform draw)
ITEM_TOOL_CALLS: Final = (-0.5, 2.0)
#: range of a task's fixed latency (planning, tool round trips) in milliseconds (uniform draw)
TASK_LATENCY_MS: Final = (500.0, 5000.0)
#: range of the fixed delay an injected item adds in milliseconds (retrieval; negative when it
#: saves a step); above minus the smallest task latency, so every mean latency stays positive
ITEM_DELAY_MS: Final = (-200.0, 800.0)
#: decoding time per generated token in milliseconds (200 tokens per second), so latency grows
#: with the token count as in real traces
MS_PER_TOKEN: Final = 5.0

Outcome = Literal["outcome", "tokens", "cost", "latency_ms"]
#: the outcomes with exact truth, in column order
OUTCOMES: Final = ("outcome", "tokens", "cost", "latency_ms")


class PairedReplaySimulator:
    r"""Paired replays of tasks with and without an injected item, with exact true effects.

    Each pair replays one task (a shared prefix) twice: in the treated arm with an item (e.g. a
    memory) injected and in the control arm with it suppressed, each ``n_replicates`` times
    with different seeds. The task type and the item are drawn from finite distributions; the
    success probability of a replay is known, so every average effect is an exact finite sum.

    Parameters
    ----------
    n_tasks : int, default 20
        Task types; type ``k`` has probability ``P(k)`` and baseline success ``b_k``.
    n_items : int, default 50
        Items; item ``j`` is drawn with Zipf-like probability ``rho_j`` and shifts the success
        logit by ``delta_j``.
    n_replicates : int, default 3
        Replicates (seeds) per arm and pair.
    effect_mean : float, default 0.3
        Mean of the item effects ``delta_j`` on the logit scale.
    effect_sd : float, default 0.6
        Standard deviation of the item effects (some items hurt when it exceeds the mean).
    arms : tuple of two str, default ("with_memory", "no_memory")
        Labels of the treated arm (item injected) and the control arm (item suppressed).
    price_per_token : float, default 1e-5
        Price of one token in the unit of ``cost`` (1e-5: ten dollars per million tokens).
    tool_fee : float, default 1e-3
        Price of one tool call in the unit of ``cost``.
    latency_sd : float, default 0.4
        Standard deviation of the log of the multiplicative latency noise (mean one).
    seed : int, default 0
        Seed of the model; sampling randomness comes from :meth:`sample`'s ``rng``.

    Attributes
    ----------
    outcome_range : tuple of float
        ``(0.0, 1.0)``: the outcome is task success.

    Notes
    -----
    With :math:`\sigma` the logistic function, the success probabilities are
    :math:`p_0(k) = b_k` without the item and :math:`p_1(k, j) = \sigma(\mathrm{logit}(b_k) +
    \delta_j)` with it. The exact average effect and the effect of item :math:`j` are

    .. math::

        \tau = \sum_k \sum_j P(k)\, \rho_j\, [p_1(k, j) - p_0(k)], \qquad
        \tau_j = \sum_k P(k)\, [p_1(k, j) - p_0(k)].

    Token counts are Poisson with mean :math:`T_k + \ell_j t`, with :math:`t = 1` in the treated
    arm and 0 in the control arm, so the exact token effect is :math:`\sum_j \rho_j \ell_j`.
    A replay also makes a Poisson number :math:`C` of tool calls with mean :math:`c_k + m_j t`
    and pays for its tokens :math:`N` and its tool calls; its latency is a fixed time plus the
    decoding time, times lognormal noise of mean one:

    .. math::

        \text{cost} = \text{price} \cdot N + \text{fee} \cdot C, \qquad
        \text{latency} = (A_k + r_j t + s N)\, e^{\sigma Z - \sigma^2/2}, \quad
        Z \sim \mathcal N(0, 1),

    with :math:`s` = ``MS_PER_TOKEN``. Tokens, cost and latency so have the exact mean
    :math:`\mu_k + e_j t`: :math:`\mu_k = \text{price}\, T_k + \text{fee}\, c_k` and
    :math:`e_j = \text{price}\, \ell_j + \text{fee}\, m_j` for the cost,
    :math:`\mu_k = A_k + s T_k` and :math:`e_j = r_j + s \ell_j` for the latency. The exact
    effect of item :math:`j` is :math:`e_j` and the average effect :math:`\sum_j \rho_j e_j`.
    The cost and latency are drawn from a child stream of ``rng``
    (:meth:`numpy.random.Generator.spawn`), so the success and token draws of a seed, and the
    state ``rng`` is left in, are those of a simulator without them.

    References
    ----------
    .. [1] G. W. Imbens and D. B. Rubin, *Causal Inference for Statistics, Social, and
       Biomedical Sciences*, Cambridge University Press, 2015 (ch. 10, paired experiments).

    Examples
    --------
    >>> from ope.simulate import PairedReplaySimulator
    >>> env = PairedReplaySimulator(n_replicates=2, seed=0)
    >>> replays = env.sample(100, rng=0)
    >>> replays.num_rows                       # 100 pairs x 2 arms x 2 replicates
    400
    >>> replays.column_names[:5]
    ['pair_id', 'arm', 'replicate', 'outcome', 'item_id']
    >>> effect = env.true_effect()
    >>> bool(abs(effect - (env.true_value("with_memory") - env.true_value("no_memory"))) < 1e-12)
    True
    >>> replays.column_names[5:]
    ['task_id', 'tokens', 'cost', 'latency_ms']
    >>> round(env.true_effect(outcome="latency_ms"), 1)   # milliseconds added by the item
    2122.3
    >>> lat = env.true_item_effects(outcome="latency_ms")  # exact effect of each item
    >>> bool(abs(env.item_probabilities @ lat - env.true_effect(outcome="latency_ms")) < 1e-9)
    True
    """

    def __init__(
        self,
        *,
        n_tasks: int = 20,
        n_items: int = 50,
        n_replicates: int = 3,
        effect_mean: float = 0.3,
        effect_sd: float = 0.6,
        arms: tuple[str, str] = ("with_memory", "no_memory"),
        price_per_token: float = 1e-5,
        tool_fee: float = 1e-3,
        latency_sd: float = 0.4,
        seed: int = 0,
    ) -> None:
        self.n_tasks = check_int("n_tasks", n_tasks, minimum=1)
        self.n_items = check_int("n_items", n_items, minimum=1)
        self.n_replicates = check_int("n_replicates", n_replicates, minimum=1)
        self.effect_mean = check_float("effect_mean", effect_mean, low=-10.0, high=10.0)
        self.effect_sd = check_float("effect_sd", effect_sd, low=0.0, high=10.0)
        if (
            isinstance(arms, str)
            or not isinstance(arms, (Sequence, np.ndarray))
            or len(arms) != 2
            or not all(isinstance(a, str) and a for a in arms)
            or arms[0] == arms[1]
        ):
            raise ParameterError(
                f"arms must be two distinct non-empty labels (treated, control); got {arms!r}."
            )
        self.arms: tuple[str, str] = (arms[0], arms[1])
        self.price_per_token = check_float("price_per_token", price_per_token, low=0.0, high=1e6)
        self.tool_fee = check_float("tool_fee", tool_fee, low=0.0, high=1e6)
        self.latency_sd = check_float("latency_sd", latency_sd, low=0.0, high=5.0)
        self.seed = check_int("seed", seed, minimum=0)
        self.outcome_range: tuple[float, float] = (0.0, 1.0)
        check_model_size(
            [("n_tasks", self.n_tasks), ("n_items", self.n_items)], what="the success table"
        )

        g = np.random.default_rng(self.seed)
        self._task_probs = g.dirichlet(np.full(self.n_tasks, 2.0))
        self._baseline = g.beta(2.0, 2.0, size=self.n_tasks)
        item_weights = 1.0 / (g.permutation(self.n_items) + 1.0)
        self._item_probs = item_weights / item_weights.sum()
        self._effects = self.effect_mean + self.effect_sd * g.standard_normal(self.n_items)
        self._task_tokens = g.uniform(*TASK_TOKENS, size=self.n_tasks)
        self._item_tokens = g.uniform(*ITEM_TOKENS, size=self.n_items)
        # drawn after the success and token model, which so stay those of earlier versions
        task_calls = g.uniform(*TASK_TOOL_CALLS, size=self.n_tasks)
        item_calls = g.uniform(*ITEM_TOOL_CALLS, size=self.n_items)
        task_latency = g.uniform(*TASK_LATENCY_MS, size=self.n_tasks)
        item_delay = g.uniform(*ITEM_DELAY_MS, size=self.n_items)
        # (control mean per task, treated extra per item) of every additive outcome
        self._calls = (task_calls, item_calls)
        self._additive = {
            "tokens": (self._task_tokens, self._item_tokens),
            "cost": (
                self.price_per_token * self._task_tokens + self.tool_fee * task_calls,
                self.price_per_token * self._item_tokens + self.tool_fee * item_calls,
            ),
            "latency_ms": (
                task_latency + MS_PER_TOKEN * self._task_tokens,
                item_delay + MS_PER_TOKEN * self._item_tokens,
            ),
        }
        self._latency_fixed = (task_latency, item_delay)
        base_logit = np.log(self._baseline / (1.0 - self._baseline))
        # success probability with each item, per task: a small (tasks x items) model table
        self._treated = 1.0 / (1.0 + np.exp(-(base_logit[:, None] + self._effects[None, :])))
        extra = [
            a for pair in (self._calls, self._latency_fixed, *self._additive.values()) for a in pair
        ]
        for arr in (
            self._task_probs,
            self._baseline,
            self._item_probs,
            self._effects,
            self._task_tokens,
            self._item_tokens,
            self._treated,
            *extra,
        ):
            arr.setflags(write=False)

    # ------------------------------------------------------------------ model
    task_probabilities = model_array("_task_probs", "``P(k)``, shape (n_tasks,).")
    item_probabilities = model_array("_item_probs", "``rho_j``, shape (n_items,).")
    item_logit_effects = model_array(
        "_effects", "``delta_j``: each item's shift of the success logit, shape (n_items,)."
    )

    def expected_outcome(
        self,
        task_ids: npt.ArrayLike,
        item_ids: npt.ArrayLike,
        treated: npt.ArrayLike,
        *,
        outcome: Outcome = "outcome",
    ) -> npt.NDArray[np.float64]:
        r"""Exact mean of an outcome per row, given its task, item and arm.

        Parameters
        ----------
        task_ids, item_ids : array of int
            Task type and item of each row.
        treated : array of bool
            True in the treated arm (item injected).
        outcome : {"outcome", "tokens", "cost", "latency_ms"}, default "outcome"
            ``"outcome"``: the success probability, ``p_1(k, j)`` where ``treated`` else
            ``p_0(k)``; the others: :math:`\mu_k + e_j t` (see the class notes).

        Returns
        -------
        numpy.ndarray
            One float64 per row.
        """
        name = self._check_outcome(outcome)
        k = check_ids(task_ids, self.n_tasks, "task_ids")
        j = check_ids(item_ids, self.n_items, "item_ids")
        t = np.asarray(treated, dtype=bool)
        if not (k.shape == j.shape == t.shape):
            raise ParameterError(
                f"task_ids, item_ids and treated must have the same length; got "
                f"{k.shape[0]}, {j.shape[0]} and {t.shape[0] if t.ndim else 'a scalar'}."
            )
        if name == "outcome":
            return np.where(t, self._treated[k, j], self._baseline[k])
        base, extra = self._additive[name]
        return base[k] + np.where(t, extra[j], 0.0)

    # ------------------------------------------------------------------ exact truth
    def true_value(self, arm: str, *, outcome: Outcome = "outcome") -> float:
        """Exact mean of an outcome in one arm (over tasks and items).

        Parameters
        ----------
        arm : str
            One of :attr:`arms`.
        outcome : {"outcome", "tokens", "cost", "latency_ms"}, default "outcome"
            Success rate, mean tokens, mean cost or mean latency in milliseconds.
        """
        treated = self._arm_index(arm) == 0
        name = self._check_outcome(outcome)
        if name != "outcome":
            base, extra = self._additive[name]
            shift = float(self._item_probs @ extra) if treated else 0.0
            return float(self._task_probs @ base) + shift
        if treated:
            return float(self._task_probs @ self._treated @ self._item_probs)
        return float(self._task_probs @ self._baseline)

    def true_item_effects(self, *, outcome: Outcome = "outcome") -> npt.NDArray[np.float64]:
        r"""Exact effect of each item, :math:`\tau_j` (success) or :math:`e_j`, shape (n_items,).

        Parameters
        ----------
        outcome : {"outcome", "tokens", "cost", "latency_ms"}, default "outcome"
            The outcome whose treated-minus-control effects are returned.
        """
        name = self._check_outcome(outcome)
        if name != "outcome":
            return self._additive[name][1].copy()
        return self._task_probs @ (self._treated - self._baseline[:, None])

    def true_effect(self, *, outcome: Outcome = "outcome", item: int | None = None) -> float:
        r"""Exact average effect treated minus control, :math:`\tau` (or :math:`\tau_j`).

        Parameters
        ----------
        outcome : {"outcome", "tokens", "cost", "latency_ms"}, default "outcome"
            The outcome compared.
        item : int or None
            An item id for the effect of that item alone; None averages over the items with
            their probabilities :math:`\rho_j`.
        """
        effects = self.true_item_effects(outcome=outcome)
        if item is None:
            return float(self._item_probs @ effects)
        j = check_int("item", item, minimum=0, maximum=self.n_items - 1)
        return float(effects[j])

    # ------------------------------------------------------------------ sampling
    def sample(
        self, n: int, *, rng: int | np.random.Generator | None = None, oracle: bool = False
    ) -> pa.Table:
        """Draw ``n`` pairs in the paired-replay schema (docs/guide/logs.md).

        Parameters
        ----------
        n : int
            Number of pairs; the table has ``2 * n * n_replicates`` rows.
        rng : int, numpy.random.Generator or None
            Randomness of the draw; the same seed gives the same table.
        oracle : bool, default False
            Also return ``expected_outcome``, ``expected_tokens``, ``expected_cost`` and
            ``expected_latency_ms`` of each row (:meth:`expected_outcome`).

        Returns
        -------
        pyarrow.Table
            Sorted by pair, arm (treated first), replicate: ``pair_id`` (int64), ``arm``
            (string), ``replicate`` (int64), ``outcome`` (0/1 as float64), ``item_id`` (the
            item injected, or suppressed in the control arm), ``task_id`` (int64), ``tokens``
            (int64), ``cost`` and ``latency_ms`` (float64). The columns up to ``tokens`` are
            drawn from ``rng`` itself, ``cost`` and ``latency_ms`` from a child stream.
        """
        n = check_sample_size(n, "pairs")
        check_array_size(
            [("n", n), ("n_replicates", self.n_replicates)], what="the sample", factor=2
        )
        g = check_rng(rng)
        R = self.n_replicates
        task = g.choice(self.n_tasks, size=n, p=self._task_probs)
        item = g.choice(self.n_items, size=n, p=self._item_probs)
        per_pair = 2 * R
        pair = np.repeat(np.arange(n, dtype=np.int64), per_pair)
        treated = np.tile(np.repeat(np.array([True, False]), R), n)
        replicate = np.tile(np.arange(R, dtype=np.int64), 2 * n)
        k, j = task[pair], item[pair]
        p = np.where(treated, self._treated[k, j], self._baseline[k])
        outcome = (g.random(pair.size) < p).astype(np.float64)
        mean_tokens = self._task_tokens[k] + np.where(treated, self._item_tokens[j], 0.0)
        tokens = g.poisson(mean_tokens).astype(np.int64)
        h = _child_stream(g)
        t = treated.astype(np.float64)
        calls = h.poisson(self._calls[0][k] + t * self._calls[1][j])
        cost = self.price_per_token * tokens + self.tool_fee * calls
        fixed_task, fixed_item = self._latency_fixed
        sd = self.latency_sd
        noise = np.exp(sd * h.standard_normal(pair.size) - 0.5 * sd * sd)
        latency = (fixed_task[k] + t * fixed_item[j] + MS_PER_TOKEN * tokens) * noise
        cols: dict[str, pa.Array] = {
            "pair_id": pa.array(pair),
            "arm": pa.DictionaryArray.from_arrays(
                pa.array((~treated).astype(np.int32)), pa.array(list(self.arms))
            ).cast(pa.string()),
            "replicate": pa.array(replicate),
            "outcome": pa.array(outcome),
            "item_id": pa.array(j.astype(np.int64)),
            "task_id": pa.array(k.astype(np.int64)),
            "tokens": pa.array(tokens),
            "cost": pa.array(cost),
            "latency_ms": pa.array(latency),
        }
        if oracle:
            cols["expected_outcome"] = pa.array(p)
            cols["expected_tokens"] = pa.array(mean_tokens)
            for name in ("cost", "latency_ms"):
                base, extra = self._additive[name]
                cols[f"expected_{name}"] = pa.array(base[k] + t * extra[j])
        return pa.table(cols)

    # ------------------------------------------------------------------ helpers
    def _arm_index(self, arm: str) -> int:
        return self.arms.index(check_choice(arm, "arm", self.arms))

    @staticmethod
    def _check_outcome(outcome: str) -> str:
        return check_choice(outcome, "outcome", OUTCOMES)

    def __repr__(self) -> str:
        return (
            f"PairedReplaySimulator(n_tasks={self.n_tasks}, n_items={self.n_items}, "
            f"n_replicates={self.n_replicates}, arms={self.arms!r}, seed={self.seed})"
        )


def _child_stream(g: np.random.Generator) -> np.random.Generator:
    """An independent generator spawned from ``g`` without consuming ``g``'s own stream.

    A generator whose bit generator cannot spawn (no seed sequence) gives a seed drawn from
    ``g`` instead, after every draw that depends on ``g`` alone.
    """
    try:
        return g.spawn(1)[0]
    except TypeError:
        return np.random.default_rng(int(g.integers(np.iinfo(np.int64).max)))
