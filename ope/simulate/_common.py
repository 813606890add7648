"""Shared helpers of the simulators: argument checks, policy tables, exact truth, categorical draws.

Everything here works on small model tables (context types × actions) or on per-row vectors;
nothing builds a dense (rows × actions) array.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from operator import attrgetter
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from ope._validation import check_array_size, check_positive_int, check_real, check_rng
from ope._thresholds import PROBABILITY_TOLERANCE
from ope.exceptions import ParameterError, PolicyError

__all__ = [
    "EPSILON_GREEDY_EPSILON",
    "MAX_MODEL_CELLS",
    "MAX_SAMPLE_SIZE",
    "check_model_size",
    "check_sample_size",
    "REWARD_KINDS",
    "TARGET_PREFIX",
    "TARGET_DIST_PREFIX",
    "Q_TARGET_PREFIX",
    "check_int",
    "check_float",
    "softmax",
    "argmax_table",
    "check_policy_table",
    "cdf_table",
    "draw_rows",
    "list_column",
    "CandidateListTables",
    "resolve_policy",
    "check_policy_names",
    "check_ids",
    "check_id_pair",
    "model_array",
    "PolicyTables",
    "ContextTables",
]


#: exploration share of every simulator's ``epsilon_greedy`` candidate: enough that every action
#: keeps some target mass (so it is not deterministic) while staying close to the greedy policy
EPSILON_GREEDY_EPSILON: Final = 0.1

#: reward distributions of the simulators: Bernoulli draws of the means, or Gaussian noise on them
REWARD_KINDS: Final = ("bernoulli", "gaussian")

#: prefix of the columns holding pi_name(action_i | x_i) (docs/guide/logs.md)
TARGET_PREFIX: Final = "target__"
#: prefix of the list columns holding pi_name over ``candidates`` (docs/guide/logs.md)
TARGET_DIST_PREFIX: Final = "target_dist__"
#: prefix of the oracle columns holding q(x_i, pi_name) = sum_a pi_name(a|x_i) q(x_i, a)
Q_TARGET_PREFIX: Final = "q_target__"

#: the most cells of one model table of a simulator (context types x actions, tasks x items,
#: states x actions x next states, ...): the exact truth sums over every cell, and 2**20 cells
#: keep a simulator building in about a second; larger sizes are refused before allocating
MAX_MODEL_CELLS: Final = 1 << 20
#: the most rows (episodes for the MDP, pairs for paired replays, slates) one ``sample`` call
#: draws, about a second of work; draw more as several samples with different ``rng``
MAX_SAMPLE_SIZE: Final = 1 << 20


def check_model_size(counts: Sequence[tuple[str, int]], *, what: str) -> None:
    """Refuse a model table of more than :data:`MAX_MODEL_CELLS` cells, naming the sizes."""
    check_array_size(
        counts,
        what=what,
        limit=("MAX_MODEL_CELLS", MAX_MODEL_CELLS, "a simulator builds in one model table"),
    )


def check_sample_size(n: object, unit: str = "rows") -> int:
    """``n`` of ``sample``: a whole number in ``[1, MAX_SAMPLE_SIZE]``."""
    v = check_int("n", n, minimum=1)
    if v > MAX_SAMPLE_SIZE:
        shown = f"{v:,}" if v < 10**12 else f"~1e{len(str(v)) - 1}"
        raise ParameterError(
            f"`n`={shown} {unit} is more than one sample() call draws (MAX_SAMPLE_SIZE = "
            f"{MAX_SAMPLE_SIZE:,}); draw several samples with different rng and concatenate "
            "them."
        )
    return v


def check_int(name: str, value: object, *, minimum: int, maximum: int | None = None) -> int:
    """:func:`ope._validation.check_positive_int` with an optional upper bound.

    A simulator's sizes are bounded by each other (``n_candidates <= n_items``), a bound the
    general checker has no use for.
    """
    v = check_positive_int(value, name, minimum=minimum)
    if maximum is not None and v > maximum:
        raise ParameterError(
            f"`{name}` must be a whole number >= {minimum} and <= {maximum}; got {value!r}."
        )
    return v


def check_float(
    name: str,
    value: object,
    *,
    low: float,
    high: float,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """:func:`ope._validation.check_real`, finite and in the stated interval; return it."""
    v = check_real(value, name)
    bad = (
        not np.isfinite(v)
        or (v <= low if low_open else v < low)
        or (v >= high if high_open else v > high)
    )
    if bad:
        lb = "(" if low_open else "["
        hb = ")" if high_open else "]"
        raise ParameterError(f"{name} must be in {lb}{low}, {high}{hb}; got {value!r}.")
    return v


def softmax(scores: npt.NDArray[np.float64], temperature: float) -> npt.NDArray[np.float64]:
    """Row-wise softmax of ``scores / temperature`` (stable: the row maximum is subtracted)."""
    z = scores / temperature
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def argmax_table(scores: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Deterministic policy table: probability one on the row argmax (first one on ties)."""
    table = np.zeros_like(scores, dtype=np.float64)
    table[np.arange(scores.shape[0]), np.argmax(scores, axis=1)] = 1.0
    return table


def check_policy_table(
    table: npt.ArrayLike,
    *,
    shape: tuple[int, int],
    what: str,
    rows: str,
    columns: str,
    sizes: tuple[str, str] = ("rows", "columns"),
) -> npt.NDArray[np.float64]:
    """Validate a policy table ``pi[row, column]``: shape, finite, in [0, 1], rows sum to one.

    Returns a float64 copy. Raises :class:`ope.exceptions.PolicyError` naming the first
    offending row.
    """
    try:
        arr = np.array(table, dtype=np.float64)  # a copy: the caller's array stays untouched
    except (TypeError, ValueError) as exc:
        raise PolicyError(
            f"{what} must be a numeric array of shape {shape} ({rows} x {columns}); "
            f"it could not be converted to float64: {exc}"
        ) from None
    if arr.shape != shape:
        raise PolicyError(
            f"{what} must have shape {shape} ({rows} x {columns}); got shape {arr.shape}. "
            f"The shape is the simulator's ({', '.join(f'`{s}`' for s in sizes)})."
        )
    bad = ~np.isfinite(arr).all(axis=1) | (arr < 0).any(axis=1) | (arr > 1).any(axis=1)
    if bad.any():
        idx = np.flatnonzero(bad)
        raise PolicyError(
            f"{what} must hold probabilities in [0, 1]; {idx.size} {rows} break this "
            f"(first at row {idx[0]}: {arr[idx[0]].tolist()})."
        )
    sums = arr.sum(axis=1)
    off = np.abs(sums - 1.0) > PROBABILITY_TOLERANCE
    if off.any():
        idx = np.flatnonzero(off)
        raise PolicyError(
            f"each row of {what} must sum to 1; {idx.size} {rows} do not "
            f"(first at row {idx[0]}, sum {sums[idx[0]]!r}). Normalise each row."
        )
    return arr


def cdf_table(probs: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Cumulative sums of each row, with every entry from the last positive one on set to 1.0.

    Setting the tail to exactly 1.0 makes ``u < 1`` always land on an action, and keeps
    zero-probability actions (also trailing ones) impossible to draw despite rounding.
    """
    cdf = np.cumsum(probs, axis=1)
    k = probs.shape[1]
    last_positive = k - 1 - np.argmax(probs[:, ::-1] > 0, axis=1)
    cdf[np.arange(k)[None, :] >= last_positive[:, None]] = 1.0
    return cdf


def draw_rows(
    cdf: npt.NDArray[np.float64], row_ids: npt.NDArray[np.int64], rng: np.random.Generator
) -> npt.NDArray[np.int64]:
    """Draw one column index per entry of ``row_ids`` from the rows of a ``cdf_table``.

    Inverse-CDF sampling: the draw is the number of cdf entries ``<= u`` with ``u ~ U[0, 1)``.
    The loop runs over the (few) columns, each step touching one per-row vector, so no
    (rows × columns) array is built.
    """
    u = rng.random(row_ids.shape[0])
    out = np.zeros(row_ids.shape[0], dtype=np.int64)
    columns = np.ascontiguousarray(cdf.T)
    for j in range(cdf.shape[1] - 1):
        out += columns[j][row_ids] <= u
    return out


def list_column(values: npt.NDArray, width: int) -> pa.ListArray:
    """A ``list<...>`` Arrow column from a flat vector holding ``width`` values per row."""
    n = values.shape[0] // width
    offsets = pa.array(np.arange(n + 1, dtype=np.int32) * width, type=pa.int32())
    return pa.ListArray.from_arrays(offsets, pa.array(values))


def resolve_policy(
    policy: str | npt.ArrayLike,
    tables: Mapping[str, npt.NDArray[np.float64]],
    *,
    shape: tuple[int, int],
    rows: str,
    columns: str,
    sizes: tuple[str, str] = ("rows", "columns"),
    argument: str = "policy",
) -> npt.NDArray[np.float64]:
    """A policy given by name (a key of ``tables``) or as a probability table; errors name the
    ``argument`` it was passed as."""
    if isinstance(policy, str):
        try:
            return tables[policy]
        except KeyError:
            raise PolicyError(
                f"`{argument}`: unknown policy {policy!r}; known policies: "
                f"{', '.join(sorted(tables))}. Or pass a probability table of shape {shape} "
                f"({rows} x {columns})."
            ) from None
    return check_policy_table(
        policy,
        shape=shape,
        what=f"`{argument}` (a policy table)",
        rows=rows,
        columns=columns,
        sizes=sizes,
    )


def check_policy_names(names: object, reserved: set[str]) -> None:
    """``policies`` maps names to tables; the names become column suffixes: they must be
    non-empty identifiers, not reserved."""
    if not isinstance(names, Mapping):
        raise ParameterError(
            f"`policies` must be a mapping of policy names to probability tables, e.g. "
            f"policies={{'mine': table}}; got {type(names).__name__}."
        )
    for name in names:
        if not isinstance(name, str) or not name.isidentifier():
            raise PolicyError(
                f"`policies`: policy names must be Python identifiers (they become column names "
                f"'target__<name>'); got {name!r}."
            )
        if name in reserved:
            raise PolicyError(
                f"`policies`: policy name {name!r} is already used by a built-in policy "
                f"({', '.join(sorted(reserved))}); choose another name."
            )


def check_ids(ids: npt.ArrayLike, size: int, name: str) -> npt.NDArray[np.int64]:
    """Check per-row integer ids in ``[0, size)``; return them as int64."""
    arr = np.asarray(ids)
    if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
        raise ParameterError(
            f"{name} must be a 1-d integer array; got dtype {arr.dtype}, shape {arr.shape}."
        )
    bad = (arr < 0) | (arr >= size)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ParameterError(
            f"{name} must lie in [0, {size - 1}]; {int(bad.sum())} entries do not "
            f"(first at position {i}: {arr[i]})."
        )
    return arr.astype(np.int64, copy=False)


def check_id_pair(
    first: npt.ArrayLike,
    second: npt.ArrayLike,
    *,
    sizes: tuple[int, int],
    names: tuple[str, str],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Two per-row id vectors (e.g. context types and actions), checked and of one length."""
    a = check_ids(first, sizes[0], names[0])
    b = check_ids(second, sizes[1], names[1])
    if a.shape != b.shape:
        raise ParameterError(
            f"{names[0]} and {names[1]} must have the same length; got {a.shape[0]} and "
            f"{b.shape[0]}."
        )
    return a, b


def model_array(attribute: str, doc: str) -> property:
    """A read-only property returning the (non-writable) model array stored in ``attribute``."""
    return property(attrgetter(attribute), doc=f"{doc} Read-only.")


class PolicyTables(ABC):
    """Named policies of a simulator as probability tables ``pi[row, column]``.

    A subclass stores its tables (policy name -> table, ``"logging"`` included) with
    :meth:`_install_tables` and names the rows and columns of its tables in :meth:`_shape_kw`.
    """

    _tables: Mapping[str, npt.NDArray[np.float64]]
    candidate_policies: tuple[str, ...]

    @abstractmethod
    def _shape_kw(self) -> dict[str, Any]:
        """``shape``, ``rows`` and ``columns`` of the tables (for :func:`resolve_policy`)."""

    def _table(
        self, policy: str | npt.ArrayLike, argument: str = "policy"
    ) -> npt.NDArray[np.float64]:
        return resolve_policy(policy, self._tables, argument=argument, **self._shape_kw())

    def _checked_policies(
        self, policies: object, builtin: Sequence[str]
    ) -> dict[str, npt.NDArray[np.float64]]:
        """The user's ``policies`` (names and tables) checked before the model is built, so that
        a wrong one fails at once; ``builtin`` are the simulator's own candidate names."""
        if policies is None:
            return {}
        check_policy_names(policies, {"logging", *builtin})
        assert isinstance(policies, Mapping)
        return {
            name: check_policy_table(table, what=f"`policies` entry {name!r}", **self._shape_kw())
            for name, table in policies.items()
        }

    def _install_tables(
        self,
        tables: dict[str, npt.NDArray[np.float64]],
        policies: Mapping[str, npt.NDArray[np.float64]],
        model: Sequence[npt.NDArray[Any]],
    ) -> None:
        """Add the user's ``policies`` (from :meth:`_checked_policies`) to the built-in
        ``tables`` and store them read-only.

        The ``model`` arrays (the simulator's parameters) are made read-only too, so that the
        exact truth cannot drift from the tables that :meth:`sample` draws from.
        """
        assert not set(policies) & set(tables), "a built-in name is missing from `builtin`"
        tables.update(policies)
        for arr in (*model, *tables.values()):
            arr.setflags(write=False)
        self._tables = tables
        self.candidate_policies = tuple(n for n in tables if n != "logging")

    def policy_table(self, name: str) -> npt.NDArray[np.float64]:
        """Probability table ``pi[row, column]`` of a named policy (``"logging"`` or a candidate).

        The rows and columns are those of :attr:`reward_means`.
        """
        if not isinstance(name, str):
            raise ParameterError(f"`name` must be a policy name (str); got {type(name).__name__}.")
        return self._table(name, "name")


class ContextTables(PolicyTables):
    r"""The exact truth of a one-step simulator with finitely many context types.

    Context type ``m`` occurs with probability ``p_m`` and lies in segment ``seg[m]``; a policy
    is a table ``pi[m, a]`` over the columns of the mean-reward table ``q[m, a]`` (actions, or a
    request's candidates). A subclass holds ``_probs``, ``_q``, ``_seg``, ``_support`` (where
    the logger has positive probability), ``_logging_cdf`` (:func:`cdf_table` of the logger),
    ``segments`` and ``candidate_policies``, and supplies the steps of :meth:`sample` that
    differ: the logged action ids, the reward draw, the feature blocks and the list columns.
    """

    _probs: npt.NDArray[np.float64]
    _q: npt.NDArray[np.float64]
    _seg: npt.NDArray[np.int64]
    _support: npt.NDArray[np.bool_]
    _logging_cdf: npt.NDArray[np.float64]
    segments: tuple[str, ...]
    candidate_policies: tuple[str, ...]

    @abstractmethod
    def _n_context_types(self) -> int:
        """Number of context types (rows of the tables)."""

    @abstractmethod
    def _row_width(self) -> int:
        """The most values one sampled row holds across its columns (features, lists)."""

    def _install_model(
        self,
        tables: dict[str, npt.NDArray[np.float64]],
        policies: Mapping[str, npt.NDArray[np.float64]],
        *,
        probs: npt.NDArray[np.float64],
        q: npt.NDArray[np.float64],
        seg: npt.NDArray[np.int64],
        support: npt.NDArray[np.bool_],
        model: Sequence[npt.NDArray[Any]] = (),
    ) -> None:
        """Store the context model and the policy tables (:meth:`_install_tables`), read-only."""
        self._install_tables(tables, policies, (probs, q, seg, support, *model))
        self._probs, self._q, self._seg, self._support = probs, q, seg, support
        self._logging_cdf = cdf_table(tables["logging"])

    @abstractmethod
    def _action_ids(
        self, ctx: npt.NDArray[np.int64], col: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.int64]:
        """The logged action ids of rows whose context type is ``ctx`` and table column ``col``."""

    @abstractmethod
    def _draw_reward(
        self, q_logged: npt.NDArray[np.float64], g: np.random.Generator
    ) -> npt.NDArray[np.float64]:
        """One reward per row with mean ``q_logged``."""

    @abstractmethod
    def _feature_blocks(
        self, ctx: npt.NDArray[np.int64], g: np.random.Generator
    ) -> list[npt.NDArray[np.float64]]:
        """The (rows, d_k) blocks of the columns ``x0 ..``, in order (drawn after the rewards)."""

    @abstractmethod
    def _list_columns(
        self, ctx: npt.NDArray[np.int64], logging: npt.NDArray[np.float64], distributions: bool
    ) -> dict[str, pa.Array]:
        """The ``candidates`` and ``logging_distribution`` columns, where the logs carry them."""

    def sample(
        self,
        n: int,
        *,
        rng: int | np.random.Generator | None = None,
        logging_policy: str | npt.ArrayLike = "logging",
        oracle: bool = False,
        distributions: bool = False,
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
            data) or a probability table. ``propensity`` and ``logging_distribution`` are its
            probabilities.
        oracle : bool, default False
            Also return ``context_id`` (the context type), ``q_logged`` (mean reward of the
            logged action) and ``q_target__<name>`` (:math:`\sum_a \pi(a|x_i) q(x_i, a)`) for
            each candidate.
        distributions : bool, default False
            Also return ``target_dist__<name>`` lists aligned with ``candidates`` (and, for a
            simulator whose logs do not always list them, ``candidates`` and
            ``logging_distribution``).

        Returns
        -------
        pyarrow.Table
            ``event_id`` (int64), ``action`` (int64), ``propensity``, ``reward``, ``x0 ..``
            (float64), ``segment`` (string), the list columns, ``target__<name>`` per
            candidate policy, then the optional columns.
        """
        n = check_sample_size(n)
        check_array_size([("n", n)], what="the sample", factor=self._row_width())
        g = check_rng(rng)
        logging = self._table(logging_policy, "logging_policy")
        cdf = (
            self._logging_cdf
            if isinstance(logging_policy, str) and logging_policy == "logging"
            else cdf_table(logging)
        )
        ctx = g.choice(self._n_context_types(), size=n, p=self._probs)
        col = draw_rows(cdf, ctx, g)
        q_logged = self._q[ctx, col]
        cols: dict[str, pa.Array] = {
            "event_id": pa.array(np.arange(n, dtype=np.int64)),
            "action": pa.array(self._action_ids(ctx, col)),
            "propensity": pa.array(logging[ctx, col]),
            "reward": pa.array(self._draw_reward(q_logged, g)),
        }
        blocks = self._feature_blocks(ctx, g)
        features = [np.ascontiguousarray(b[:, j]) for b in blocks for j in range(b.shape[1])]
        cols.update({f"x{j}": pa.array(x) for j, x in enumerate(features)})
        cols["segment"] = pa.DictionaryArray.from_arrays(
            pa.array(self._seg[ctx].astype(np.int32)), pa.array(list(self.segments))
        ).cast(pa.string())
        cols.update(self._list_columns(ctx, logging, distributions))
        width = self._q.shape[1]
        for name in self.candidate_policies:
            cols[TARGET_PREFIX + name] = pa.array(self._tables[name][ctx, col])
        if distributions:
            for name in self.candidate_policies:
                cols[TARGET_DIST_PREFIX + name] = list_column(
                    self._tables[name][ctx].ravel(), width
                )
        if oracle:
            cols["context_id"] = pa.array(ctx.astype(np.int64))
            cols["q_logged"] = pa.array(q_logged)
            for name in self.candidate_policies:
                per_context = np.einsum("ij,ij->i", self._tables[name], self._q)
                cols[Q_TARGET_PREFIX + name] = pa.array(per_context[ctx])
        return pa.table(cols)

    context_probabilities = model_array(
        "_probs", "Probability ``p_m`` of each context type, shape (context types,)."
    )
    context_segments = model_array(
        "_seg", "Segment index (into ``segments``) of each context type, shape (context types,)."
    )
    logging_support = model_array(
        "_support", "True where the logging policy can take the column's action (bool)."
    )
    reward_means = model_array("_q", "Mean reward ``q(m, a)`` of each context type and column.")

    def true_value(self, policy: str | npt.ArrayLike) -> float:
        r"""Exact value :math:`V(\pi) = \sum_m p_m \sum_a \pi(a|m) q(m, a)` of a policy.

        Parameters
        ----------
        policy : str or array shaped as ``reward_means``
            ``"logging"``, a name in ``candidate_policies``, or a probability table.
        """
        return float(self._probs @ np.einsum("ij,ij->i", self._table(policy), self._q))

    def true_value_by_segment(self, policy: str | npt.ArrayLike) -> dict[str, float]:
        """Exact value of a policy conditional on each (non-empty) segment, ``{segment: value}``."""
        per_context = self._probs * np.einsum("ij,ij->i", self._table(policy), self._q)
        S = len(self.segments)
        num = np.bincount(self._seg, weights=per_context, minlength=S)
        den = np.bincount(self._seg, weights=self._probs, minlength=S)
        return {s: float(num[k] / den[k]) for k, s in enumerate(self.segments) if den[k] > 0}

    def unsupported_mass(self, policy: str | npt.ArrayLike) -> float:
        r"""Exact share of a policy's choices that the logging policy never makes.

        :math:`\sum_m p_m \sum_{a:\,\pi_0(a|m) = 0} \pi(a|m)`: zero unless the logger has
        deficient support. No amount of these logs identifies the value on that share.
        """
        unsupported = np.where(self._tables["logging"] > 0, 0.0, self._table(policy))
        return float(self._probs @ unsupported.sum(axis=1))

    def supported_value(self, policy: str | npt.ArrayLike) -> float:
        r"""Exact part of :math:`V(\pi)` earned on actions the logger can take.

        :math:`\sum_m p_m \sum_{a:\,\pi_0(a|m) > 0} \pi(a|m) q(m, a)`, the limit of IPS
        under deficient support; equal to :meth:`true_value` when the support is full.
        """
        kept = np.where(self._tables["logging"] > 0, self._table(policy), 0.0)
        return float(self._probs @ np.einsum("ij,ij->i", kept, self._q))

    def policy_expected_reward(
        self, policy: str | npt.ArrayLike, context_ids: npt.ArrayLike
    ) -> npt.NDArray[np.float64]:
        r"""Per-row :math:`q(m_i, \pi) = \sum_a \pi(a|m_i) q(m_i, a)` (the DM/DR oracle term)."""
        table = self._table(policy)
        m = check_ids(context_ids, self._n_context_types(), "context_ids")
        return np.einsum("ij,ij->i", table, self._q)[m]


class CandidateListTables(ContextTables):
    """Context tables whose contexts are request types, each with a fixed list of
    ``n_candidates`` items (``self._cands``, (n_requests, n_candidates)) and user features
    (``self._user``): the shared logs layout of :class:`ope.simulate.Recommendation` and
    :class:`ope.simulate.CatalogBandit`."""

    n_requests: int
    n_candidates: int
    _user: npt.NDArray[np.float64]
    _cands: npt.NDArray[np.int64]

    def _feature_blocks(
        self, ctx: npt.NDArray[np.int64], g: np.random.Generator
    ) -> list[npt.NDArray[np.float64]]:
        return [self._user[ctx]]

    def _list_columns(
        self, ctx: npt.NDArray[np.int64], logging: npt.NDArray[np.float64], distributions: bool
    ) -> dict[str, pa.Array]:
        L = self.n_candidates
        return {
            "candidates": list_column(self._cands[ctx].ravel(), L),
            "logging_distribution": list_column(logging[ctx].ravel(), L),
        }

    def _shape_kw(self) -> dict[str, Any]:
        return {
            "shape": (self.n_requests, self.n_candidates),
            "rows": "requests",
            "columns": "candidates",
            "sizes": ("n_requests", "n_candidates"),
        }
