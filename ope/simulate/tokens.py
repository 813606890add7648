r"""A small autoregressive "language model" with exact sequence probabilities, values and KL
divergences: the ground truth of :mod:`ope.sequences`.

Each prompt type :math:`m` has next-token scores :math:`\theta_{m, h, y}` given the previous
token :math:`h` (a begin token first), over a vocabulary of ``vocab_size`` tokens of which
token 0 ends the response; a response also ends after ``max_length`` tokens. A policy is a
distribution over the next token per (prompt, previous token); the sequence probability is the
product over the response, and every expectation over responses (the value, the KL divergence
between two policies) is an exact sum by dynamic programming over (step, previous token).

The logger samples at ``temperature`` with nucleus (top-p) truncation ``top_p``, renormalized
over the kept tokens: the **sampler**. What it *reports* as the behavior log-probabilities is
chosen by ``reported``: ``"sampled"`` (the sampler's own, correct for importance sampling) or
``"untruncated"`` (the model's full softmax at temperature 1: what an engine gives when it
reports the raw model probability while sampling with temperature and top-p, the pitfall of the
issue threads in ``docs/guide/sequences.md``); ``logprob_noise`` adds Gaussian noise to each
reported token log-probability, capped at 0 (numeric mismatch between a serving engine and a
trainer).

Candidates (their log-probabilities of the logged tokens are exact):

- ``"sampler"``: the logger's sampling distribution (the on-policy candidate);
- ``"model"``: the untruncated model at temperature 1 (what a trainer recomputes for the same
  weights; its ratio to the sampler is the kept mass of the truncation);
- ``"cooler"``: the model at 0.7 times the logger's temperature, untruncated;
- ``"tuned"``: the model with scores shifted toward the tokens of higher reward (a fine-tune).

Each token :math:`y` emitted for prompt :math:`m` earns :math:`g_{m, y}`; the response's reward is
the sum over its tokens plus Gaussian noise (``reward_noise``), logged per token in
``step_rewards`` (the noise on the last token) and in total in ``reward``.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from ope._validation import check_choice, check_rng
from ope.exceptions import ParameterError
from ope.simulate._common import check_float, check_int, check_sample_size

__all__ = ["TokenModel", "TOKEN_CANDIDATES", "REPORTED_LOGPROBS"]

#: The candidates of :class:`TokenModel`, in their column order.
TOKEN_CANDIDATES: Final = ("sampler", "model", "cooler", "tuned")

#: What the logged behavior log-probabilities are (see the module).
REPORTED_LOGPROBS: Final = ("sampled", "untruncated")

#: The temperature of ``"cooler"`` relative to the logger's.
COOLER_FACTOR: Final = 0.7

#: The most cells of one policy table (prompts x previous tokens x tokens).
MAX_TABLE_CELLS: Final = 1 << 18


def _nucleus(probs: np.ndarray, top_p: float) -> np.ndarray:
    """Top-p truncation of each row of ``probs`` (last axis), renormalized: the smallest set of
    the most probable tokens whose mass reaches ``top_p`` (ties kept in index order)."""
    if top_p >= 1.0:
        return probs
    order = np.argsort(-probs, axis=-1, kind="stable")
    ranked = np.take_along_axis(probs, order, axis=-1)
    before = np.cumsum(ranked, axis=-1) - ranked  # mass of the more probable tokens
    keep_ranked = before < top_p
    keep = np.empty_like(keep_ranked)
    np.put_along_axis(keep, order, keep_ranked, axis=-1)
    kept = np.where(keep, probs, 0.0)
    return kept / kept.sum(axis=-1, keepdims=True)


def _softmax(scores: np.ndarray, temperature: float) -> np.ndarray:
    z = scores / temperature
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


class TokenModel:
    """An autoregressive model over a small vocabulary with exact truth (see the module).

    Parameters
    ----------
    n_prompts : int, default 5
        Prompt types, drawn uniformly.
    vocab_size : int, default 4
        Tokens, token 0 ending the response (at least 2).
    max_length : int, default 8
        The most tokens of a response.
    temperature : float, default 1.0
        The logger's sampling temperature.
    top_p : float, default 1.0
        The logger's nucleus truncation (1: none).
    reported : {"sampled", "untruncated"}, default "sampled"
        What the logged behavior log-probabilities are.
    logprob_noise : float, default 0.0
        Standard deviation of Gaussian noise on each reported token log-probability.
    reward_noise : float, default 0.5
        Standard deviation of the noise on each response's reward.
    end_shift : float, default 0.0
        Added to the score of the ending token: negative values make responses longer (at
        -6, most run to ``max_length``).
    seed : int, default 0
        The model (scores, token rewards).

    Examples
    --------
    >>> from ope.simulate import TokenModel
    >>> env = TokenModel(top_p=0.9, seed=0)
    >>> table = env.sample(1000, rng=0)
    >>> table.num_rows, "target_logprobs__tuned" in table.column_names
    (1000, True)
    >>> env.kl("sampler", "sampler")
    0.0
    """

    def __init__(
        self,
        n_prompts: int = 5,
        vocab_size: int = 4,
        max_length: int = 8,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        reported: str = "sampled",
        logprob_noise: float = 0.0,
        reward_noise: float = 0.5,
        end_shift: float = 0.0,
        seed: int = 0,
    ) -> None:
        self.n_prompts = check_int("n_prompts", n_prompts, minimum=1)
        self.vocab_size = check_int("vocab_size", vocab_size, minimum=2)
        self.max_length = check_int("max_length", max_length, minimum=1, maximum=1000)
        cells = self.n_prompts * (self.vocab_size + 1) * self.vocab_size
        if cells > MAX_TABLE_CELLS:
            raise ParameterError(
                f"n_prompts x (vocab_size + 1) x vocab_size = {cells:,} cells is more than "
                f"a policy table holds (MAX_TABLE_CELLS = {MAX_TABLE_CELLS:,}); use fewer "
                "prompts or tokens."
            )
        self.temperature = check_float("temperature", temperature, low=0.05, high=20.0)
        self.top_p = check_float("top_p", top_p, low=0.0, high=1.0, low_open=True)
        self.reported = check_choice(reported, "reported", REPORTED_LOGPROBS)
        self.logprob_noise = check_float("logprob_noise", logprob_noise, low=0.0, high=10.0)
        self.reward_noise = check_float("reward_noise", reward_noise, low=0.0, high=1e6)
        self.end_shift = check_float("end_shift", end_shift, low=-50.0, high=50.0)
        self.seed = check_int("seed", seed, minimum=0)
        gen = np.random.default_rng(self.seed)
        v, m = self.vocab_size, self.n_prompts
        self.scores = gen.normal(0.0, 1.5, size=(m, v + 1, v))
        self.scores[:, :, 0] += np.linspace(-1.5, 0.5, v + 1)[None, :]  # ending grows likelier
        self.scores[:, v, 0] = -3.0  # an empty response is rare
        self.scores[:, :, 0] += self.end_shift
        self.token_rewards = gen.uniform(0.0, 1.0, size=(m, v))
        self._tables = {
            "sampler": _nucleus(_softmax(self.scores, self.temperature), self.top_p),
            "model": _softmax(self.scores, 1.0),
            "cooler": _softmax(self.scores, COOLER_FACTOR * self.temperature),
            "tuned": _softmax(self.scores + 1.5 * self.token_rewards[:, None, :], 1.0),
        }

    def __repr__(self) -> str:
        return (
            f"TokenModel(n_prompts={self.n_prompts}, vocab_size={self.vocab_size}, "
            f"max_length={self.max_length}, temperature={self.temperature:g}, "
            f"top_p={self.top_p:g}, reported={self.reported!r}, "
            f"logprob_noise={self.logprob_noise:g}, seed={self.seed})"
        )

    @property
    def candidate_policies(self) -> tuple[str, ...]:
        """The candidates' names (:data:`TOKEN_CANDIDATES`)."""
        return TOKEN_CANDIDATES

    def policy_table(self, policy: str) -> npt.NDArray[np.float64]:
        """The next-token probabilities (prompts, previous token incl. the begin token last,
        tokens) of a candidate, ``"logging"`` being the sampler."""
        return self._table(policy, "policy").copy()

    def _table(self, policy: Any, argument: str) -> np.ndarray:
        name = "sampler" if policy == "logging" else policy
        return self._tables[check_choice(name, argument, TOKEN_CANDIDATES)]

    def _occupancy(self, table: np.ndarray) -> np.ndarray:
        """(max_length, prompts, previous token): the probability that a response is still
        going at each step with that previous token, per prompt."""
        v = self.vocab_size
        d = np.zeros((self.max_length, self.n_prompts, v + 1))
        d[0, :, v] = 1.0
        for t in range(1, self.max_length):  # a loop over steps, not responses
            step = np.einsum("mh,mhy->my", d[t - 1], table)
            d[t, :, :v] = step
            d[t, :, 0] = 0.0  # token 0 ended the response
        return d

    def true_value(self, policy: str) -> float:
        """The exact expected reward of a response under ``policy`` (``"logging"``: the
        sampler)."""
        return float(np.mean(self.prompt_values(policy)))

    def prompt_values(self, policy: str) -> npt.NDArray[np.float64]:
        """The exact expected reward of a response to each prompt under ``policy``, shape
        ``(n_prompts,)``: what a model of the reward averages over fresh responses from the
        candidate (the ``v`` of a doubly robust estimate)."""
        table = self.policy_table(policy)
        d = self._occupancy(table)
        per_state = np.einsum("mhy,my->mh", table, self.token_rewards)
        return np.asarray(np.einsum("tmh,mh->m", d, per_state), dtype=np.float64)

    def kl(self, policy: str, reference: str = "sampler") -> float:
        r"""The exact KL divergence :math:`KL(\pi \| \pi_{ref})` between the response
        distributions of two candidates, averaged over prompts (the chain rule: the expected
        sum over steps of the next-token KL under ``policy``). ``inf`` where ``policy`` gives
        mass to a token ``reference`` never emits."""
        p, q = self._table(policy, "policy"), self._table(reference, "reference")
        d = self._occupancy(p)
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(p > 0, p * (np.log(p) - np.log(q)), 0.0)
        per_state = terms.sum(axis=-1)
        reached = d.sum(axis=0) > 0
        if np.isinf(per_state[reached]).any():
            return float("inf")
        return float(np.einsum("tmh,mh->", d, np.where(reached, per_state, 0.0)) / self.n_prompts)

    def sample(self, n: int, *, rng: Any = None, oracle: bool = False) -> pa.Table:
        """``n`` logged responses: ``prompt_id``, ``tokens``, ``behavior_logprobs`` (as
        ``reported``, with ``logprob_noise``), ``target_logprobs__<candidate>`` (exact),
        ``step_rewards`` and ``reward``; list columns hold one value per token. With
        ``oracle=True`` also ``q_logged`` (the exact expected reward of each logged response:
        its reward without the noise) and ``v_target__<candidate>`` (the exact expected reward
        of the candidate's responses to the row's prompt): a perfect reward model."""
        if not isinstance(oracle, (bool, np.bool_)):
            raise ParameterError(f"`oracle` must be True or False; got {oracle!r}.")
        n = check_sample_size(n, "responses")
        gen = check_rng(rng)
        v, length = self.vocab_size, self.max_length
        prompt = gen.integers(0, self.n_prompts, size=n)
        prev = np.full(n, v)
        alive = np.ones(n, dtype=bool)
        tokens = np.full((n, length), -1, dtype=np.int64)
        sampler = self._tables["sampler"]
        cdf = np.cumsum(sampler, axis=-1)
        for t in range(length):  # a loop over steps, vectorized over responses
            rows = np.flatnonzero(alive)
            if not rows.size:
                break
            u = gen.random(rows.size)
            c = cdf[prompt[rows], prev[rows]]
            y = np.minimum((u[:, None] >= c).sum(axis=1), v - 1)
            tokens[rows, t] = y
            prev[rows] = y
            alive[rows] = y != 0
        mask = tokens >= 0
        lengths = mask.sum(axis=1)
        offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int32)
        flat = tokens[mask]
        row = np.repeat(np.arange(n), lengths)
        before = np.where(
            np.arange(flat.size) == np.repeat(offsets[:-1], lengths),
            v,
            np.concatenate(([v], flat[:-1])),
        )
        m = prompt[row]

        def logprobs(table: np.ndarray) -> np.ndarray:
            with np.errstate(divide="ignore"):
                return np.log(table[m, before, flat])

        behavior = logprobs(sampler if self.reported == "sampled" else self._tables["model"])
        if self.logprob_noise > 0:
            # an engine's log-softmax stays <= 0 whatever its rounding
            behavior = np.minimum(behavior + gen.normal(0.0, self.logprob_noise, flat.size), 0.0)
        step = self.token_rewards[m, flat]
        noise = gen.normal(0.0, self.reward_noise, size=n) if self.reward_noise > 0 else 0.0
        last = offsets[1:] - 1
        step = step.copy()
        step[last] += noise
        reward = np.add.reduceat(step, offsets[:-1]) if flat.size else np.zeros(n)

        def lists(values: np.ndarray) -> pa.ListArray:
            return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))

        columns = {
            "prompt_id": pa.array(prompt),
            "tokens": lists(flat),
            "behavior_logprobs": lists(behavior),
            **{
                f"target_logprobs__{name}": lists(logprobs(self._tables[name]))
                for name in TOKEN_CANDIDATES
            },
            "step_rewards": lists(step),
            "reward": pa.array(reward),
        }
        if oracle:
            columns["q_logged"] = pa.array(reward - noise)
            for name in TOKEN_CANDIDATES:  # a loop over candidates
                columns[f"v_target__{name}"] = pa.array(self.prompt_values(name)[prompt])
        return pa.table(columns)
