"""Paired counterfactual replays (e.g. an agent with and without a memory item), exact effects."""

from __future__ import annotations

from typing import Final, Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from ope._validation import check_choice, check_rng
from ope.exceptions import ParameterError
from ope.simulate._common import check_float, check_ids, check_int, model_array

__all__ = ["PairedReplaySimulator"]

#: range of the mean token count of a task's replay without the item (uniform draw)
TASK_TOKENS: Final = (300.0, 3000.0)
#: range of the mean token count an injected item adds (uniform draw)
ITEM_TOKENS: Final = (50.0, 500.0)

Outcome = Literal["outcome", "tokens"]


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

    Token counts are Poisson with mean :math:`T_k + \ell_j \mathbb 1[\text{treated}]`, so the
    exact token effect is :math:`\sum_j \rho_j \ell_j`.

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
        seed: int = 0,
    ) -> None:
        self.n_tasks = check_int("n_tasks", n_tasks, minimum=1)
        self.n_items = check_int("n_items", n_items, minimum=1)
        self.n_replicates = check_int("n_replicates", n_replicates, minimum=1)
        self.effect_mean = check_float("effect_mean", effect_mean, low=-10.0, high=10.0)
        self.effect_sd = check_float("effect_sd", effect_sd, low=0.0, high=10.0)
        if (
            isinstance(arms, str)
            or len(arms) != 2
            or not all(isinstance(a, str) and a for a in arms)
            or arms[0] == arms[1]
        ):
            raise ParameterError(
                f"arms must be two distinct non-empty labels (treated, control); got {arms!r}."
            )
        self.arms: tuple[str, str] = (arms[0], arms[1])
        self.seed = check_int("seed", seed, minimum=0)
        self.outcome_range: tuple[float, float] = (0.0, 1.0)

        g = np.random.default_rng(self.seed)
        self._task_probs = g.dirichlet(np.full(self.n_tasks, 2.0))
        self._baseline = g.beta(2.0, 2.0, size=self.n_tasks)
        item_weights = 1.0 / (g.permutation(self.n_items) + 1.0)
        self._item_probs = item_weights / item_weights.sum()
        self._effects = self.effect_mean + self.effect_sd * g.standard_normal(self.n_items)
        self._task_tokens = g.uniform(*TASK_TOKENS, size=self.n_tasks)
        self._item_tokens = g.uniform(*ITEM_TOKENS, size=self.n_items)
        base_logit = np.log(self._baseline / (1.0 - self._baseline))
        # success probability with each item, per task: a small (tasks x items) model table
        self._treated = 1.0 / (1.0 + np.exp(-(base_logit[:, None] + self._effects[None, :])))
        for arr in (self._task_probs, self._baseline, self._item_probs, self._effects,
                    self._task_tokens, self._item_tokens, self._treated):
            arr.setflags(write=False)

    # ------------------------------------------------------------------ model
    task_probabilities = model_array("_task_probs", "``P(k)``, shape (n_tasks,).")
    item_probabilities = model_array("_item_probs", "``rho_j``, shape (n_items,).")
    item_logit_effects = model_array(
        "_effects", "``delta_j``: each item's shift of the success logit, shape (n_items,)."
    )

    def expected_outcome(
        self, task_ids: npt.ArrayLike, item_ids: npt.ArrayLike, treated: npt.ArrayLike
    ) -> npt.NDArray[np.float64]:
        """Success probability per row: ``p_1(k, j)`` where ``treated`` else ``p_0(k)``."""
        k = check_ids(task_ids, self.n_tasks, "task_ids")
        j = check_ids(item_ids, self.n_items, "item_ids")
        t = np.asarray(treated, dtype=bool)
        if not (k.shape == j.shape == t.shape):
            raise ParameterError(
                f"task_ids, item_ids and treated must have the same length; got "
                f"{k.shape[0]}, {j.shape[0]} and {t.shape[0] if t.ndim else 'a scalar'}."
            )
        return np.where(t, self._treated[k, j], self._baseline[k])

    # ------------------------------------------------------------------ exact truth
    def true_value(self, arm: str, *, outcome: Outcome = "outcome") -> float:
        """Exact mean outcome (success rate, or mean tokens) of one arm."""
        treated = self._arm_index(arm) == 0
        if self._check_outcome(outcome) == "tokens":
            extra = float(self._item_probs @ self._item_tokens) if treated else 0.0
            return float(self._task_probs @ self._task_tokens) + extra
        if treated:
            return float(self._task_probs @ self._treated @ self._item_probs)
        return float(self._task_probs @ self._baseline)

    def true_item_effects(self, *, outcome: Outcome = "outcome") -> npt.NDArray[np.float64]:
        r"""Exact effect of each item, :math:`\tau_j`, shape (n_items,)."""
        if self._check_outcome(outcome) == "tokens":
            return self._item_tokens.copy()
        return self._task_probs @ (self._treated - self._baseline[:, None])

    def true_effect(self, *, outcome: Outcome = "outcome", item: int | None = None) -> float:
        r"""Exact average effect treated minus control, :math:`\tau` (or :math:`\tau_j`)."""
        effects = self.true_item_effects(outcome=outcome)
        if item is None:
            return float(self._item_probs @ effects)
        j = check_int("item", item, minimum=0, maximum=self.n_items - 1)
        return float(effects[j])

    # ------------------------------------------------------------------ sampling
    def sample(
        self, n: int, *, rng: int | np.random.Generator | None = None, oracle: bool = False
    ) -> pa.Table:
        """Draw ``n`` pairs in the paired-replay schema (DESIGN.md §2).

        Parameters
        ----------
        n : int
            Number of pairs; the table has ``2 * n * n_replicates`` rows.
        rng : int, numpy.random.Generator or None
            Randomness of the draw; the same seed gives the same table.
        oracle : bool, default False
            Also return ``expected_outcome`` and ``expected_tokens`` of each row.

        Returns
        -------
        pyarrow.Table
            Sorted by pair, arm (treated first), replicate: ``pair_id`` (int64), ``arm``
            (string), ``replicate`` (int64), ``outcome`` (0/1 as float64), ``item_id`` (the
            item injected, or suppressed in the control arm), ``task_id`` (int64), ``tokens``
            (int64).
        """
        n = check_int("n", n, minimum=1)
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
        }
        if oracle:
            cols["expected_outcome"] = pa.array(p)
            cols["expected_tokens"] = pa.array(mean_tokens)
        return pa.table(cols)

    # ------------------------------------------------------------------ helpers
    def _arm_index(self, arm: str) -> int:
        return self.arms.index(check_choice(arm, "arm", self.arms))

    @staticmethod
    def _check_outcome(outcome: str) -> str:
        return check_choice(outcome, "outcome", ("outcome", "tokens"))

    def __repr__(self) -> str:
        return (
            f"PairedReplaySimulator(n_tasks={self.n_tasks}, n_items={self.n_items}, "
            f"n_replicates={self.n_replicates}, arms={self.arms!r}, seed={self.seed})"
        )
