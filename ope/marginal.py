"""Marginal importance weights over action embeddings and clusters (MIPS, marginalized DR).

With a catalog of thousands of items, per-item importance weights ``pi(a|x) / pi_0(a|x)`` are
large wherever a candidate favours items the logger rarely showed, and IPS-family intervals
are dominated by a few rows. When the reward depends on the item only through an *embedding*
``e`` (a category, a cluster, a tuple of categorical features), the weight of the logged
embedding,

.. math:: w(x, e) = \\frac{\\pi(e \\mid x)}{\\pi_0(e \\mid x)}, \\qquad
          \\pi(e \\mid x) = \\sum_{a} \\pi(a \\mid x)\\, p(e \\mid x, a),

gives an unbiased estimate with far smaller weights (Saito & Joachims 2022, MIPS): many items
share an embedding, so a candidate that moves mass between items of one cluster pays nothing.

This module turns each row's candidate set into those marginal propensities:
:class:`ActionEmbedding` says how actions map to embeddings (a cluster column, categorical
embedding columns of the item table, or a known distribution ``p(e_d | a)`` per embedding
dimension with the observed embedding logged per row), and :func:`marginal_propensities` gives
``pi_0(e_i | x_i)`` and every candidate's ``pi(e_i | x_i)`` as (n,) and (n, P) arrays. The
estimators :class:`ope.estimators.MIPS`, :class:`~ope.estimators.SNMIPS` and
:class:`~ope.estimators.MarginalizedDR` are IPS, SNIPS and DR on those arrays, and ``ope.evaluate(...,
estimators=("mips", ...), embedding=...)`` computes them next to the per-item estimators.
Everything runs over the rows' candidates (a CSR structure): memory is proportional to the
candidate sets, never to ``n`` times the catalog.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ope._thresholds import PROBABILITY_TOLERANCE
from ope._validation import (
    as_float_array,
    check_finite,
    check_name,
    check_names,
    check_positive_int,
    check_rng,
    describe,
    fold_assignment,
    resolve_seed,
    validated_pair,
)
from ope.exceptions import ParameterError, PolicyError, SchemaError, ValidationError
from ope.logs import BanditLogs, require_logs
from ope.policies._core import (
    PolicyDistribution,
    action_index,
    candidate_sets,
    decode,
    examples,
    label_codes,
    rows_of,
    rows_text,
    to_float64,
)
from ope.schema import DISTRIBUTION_SUM_ATOL
from ope.weights import varying_sampling_weight

__all__ = [
    "ActionEmbedding",
    "reads_aligned_columns",
    "embedding_level",
    "item_clusters",
    "one_per_item",
    "MarginalPropensities",
    "marginal_propensities",
    "embedding_sufficiency",
    "SufficiencyTest",
    "SUFFICIENCY_ALPHA",
    "EMBEDDING_SEARCHES",
    "EMBEDDING_RULES",
]

#: How ``ActionEmbedding(select=..., search=...)`` visits the subsets of the dimensions
#: (:func:`ope.tune_embedding`).
EMBEDDING_SEARCHES: Final = ("greedy", "exact")

#: The rules of ``ActionEmbedding(select=...)``: SLOPE++, or the MSE bound.
EMBEDDING_RULES: Final = ("slope", "mse")

#: Largest excess over 1 of the logger's marginal propensity read as 1. The marginal propensity
#: sums entries of a row's logging distribution, whose total the reader accepts within
#: :data:`ope.schema.DISTRIBUTION_SUM_ATOL` of 1 (float64 round-off of the sum, or a
#: distribution stored in float32): when all of a row's candidates share one embedding the
#: marginal is that total, and may exceed 1 by as much. A larger excess is not round-off and
#: is left to the estimator's check of ``logging_propensity``.
MARGINAL_EXCESS_ATOL: Final = DISTRIBUTION_SUM_ATOL


@dataclass(frozen=True)
class ActionEmbedding:
    """How actions map to embeddings, for marginal importance weights.

    Exactly one of the three ways:

    Parameters
    ----------
    clusters : str, optional
        A cluster id per action: a column of the item table (``items``, else the logs'
        ``action_features``: one id per catalog item), or a list column of the logs aligned with
        ``candidates`` (a cluster per candidate of each row: clusters that vary by row).
    columns : sequence of str, optional
        Categorical embedding columns of the item table, deterministic per action; the joint
        value (the tuple) is the embedding, so two items share it only if they agree on every
        column.
    distribution : mapping of str to table, optional
        Stochastic embeddings with a known ``p(e_d | a)``: for each embedding column ``d`` of
        the logs (the embedding observed on each row), a table (pyarrow Table or pandas
        DataFrame) with columns ``action``, ``value``, ``probability``, holding the entries with
        positive probability (each action's probabilities sum to 1). Dimensions are independent
        given the action: :math:`p(e \\mid a) = \\prod_d p(e_d \\mid a)`, so that
        :math:`\\pi(e \\mid x) = \\sum_a \\pi(a \\mid x) \\prod_d p(e_d \\mid a)` (the joint form,
        as Open Bandit Pipeline 0.5.7's MIPS; its self-normalized MIPS multiplies per-dimension
        mixtures instead, which agrees with it only for one dimension).
    estimated : sequence of str, optional
        Observed embedding columns of the logs whose ``p(e_d | a)`` is **estimated** from the
        logs themselves: the frequencies of each item's observed values, cross-fitted (the
        rows of one fold are weighted with the frequencies of the other folds, never their
        own) and smoothed towards each value's overall frequency. With the logger's known
        distribution over each row's candidates this is the classifier
        :math:`\\hat\\pi_0(a \\mid x, e) \\propto \\pi_0(a \\mid x) \\prod_d \\hat p(e_d \\mid a)`
        over the row's candidate set, and the weight
        :math:`\\sum_a \\hat\\pi_0(a|x,e)\\, \\pi(a|x)/\\pi_0(a|x)` is the ratio of the
        candidates' and the logger's mixtures of :math:`\\hat p`. It assumes the embedding
        depends on the item only (not on the context) with dimensions independent given the
        item; the intervals do not include the error of :math:`\\hat p`.
    items : pyarrow Table or pandas DataFrame, optional
        The item table of ``clusters``/``columns`` (an ``action`` column and the embedding
        columns); default the logs' ``action_features``.
    smoothing : float, default 1.0
        With ``estimated``: the weight (in rows) of the overall frequency in each item's
        :math:`\\hat p(e_d \\mid a) = (c_{a,v} + s f_v) / (c_a + s)`; an item seen in no other
        fold gets the overall frequencies. ``f_v`` is add-one smoothed, so no observed value
        has probability 0.
    n_folds : int, default 5
        With ``estimated``: cross-fitting folds.
    rng : int, numpy.random.Generator or None, default 0
        With ``estimated``: the randomness of the fold assignment (an int reproduces it).
    select : {"slope", "mse"}, optional
        Choose, per candidate policy, the subset of the embedding's dimensions (``columns``,
        ``distribution`` or ``estimated``; at least ``min_dims`` of them) on the logs, by this
        rule (:func:`ope.tune_embedding`): ``ope.evaluate`` then evaluates each candidate with
        its own subset (:attr:`ope.Evaluation.settings`). Fewer dimensions pool more items and
        give smaller weights; a dimension dropped that has an effect of its own on the reward
        biases MIPS. ``"slope"``: SLOPE++ (Lepski's principle, as in Saito & Joachims 2022),
        which accepts a bias up to the order of the noise; ``"mse"``: the smallest bound on
        the mean squared error, the bias bounded by the paired difference with the full
        embedding (conservative: it keeps the full embedding unless a subset's variance falls
        by more than its bias can be). Neither beats the full embedding on every catalog:
        ``benchmarks/embedding_selection.py`` measures both. Not with ``clusters`` (one
        dimension).
    search : {"greedy", "exact"}, optional
        With ``select``: ``"exact"`` visits every subset (2^d - 1 evaluations, d <= 10);
        ``"greedy"`` drops one dimension at a time (at most d(d + 1) / 2 evaluations). Default:
        exact up to 10 dimensions, else greedy.
    min_dims : int, default 1
        With ``select``: the fewest dimensions a subset keeps.

    Raises
    ------
    ope.ParameterError
        None or more than one of ``clusters``, ``columns``, ``distribution``; an empty
        ``columns``; a name that is not a string; ``search`` or ``min_dims`` without
        ``select``.

    Examples
    --------
    >>> from ope.marginal import ActionEmbedding
    >>> ActionEmbedding(clusters="genre").kind
    'clusters'
    >>> ActionEmbedding(columns=("genre", "brand")).describe()
    'the joint embedding of genre, brand (per item)'
    """

    clusters: str | None = None
    columns: tuple[str, ...] = ()
    distribution: Mapping[str, Any] | None = field(default=None, compare=False)
    items: Any = field(default=None, compare=False, repr=False)
    estimated: tuple[str, ...] = ()
    smoothing: float = 1.0
    n_folds: int = 5
    rng: Any = field(default=0, compare=False)
    select: str | None = None
    search: str | None = None
    min_dims: int = 1
    #: the dimensions :meth:`restricted` dropped (observed columns stay out of a reward
    #: model's default context: they are drawn after the item)
    dropped: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        for argument in ("columns", "estimated"):
            value = getattr(self, argument)
            if isinstance(value, str):
                object.__setattr__(self, argument, (value,))
            elif value:
                object.__setattr__(self, argument, tuple(check_names(value, argument)))
            else:
                object.__setattr__(self, argument, ())
        s = self.smoothing
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not 0 <= s < np.inf:
            raise ParameterError(f"smoothing must be a finite number >= 0; got {s!r}.")
        check_positive_int(self.n_folds, "n_folds", minimum=2)
        check_rng(self.rng)
        if self.clusters is not None:
            check_name(self.clusters, "clusters", what="a column name")
        for name in self.columns:
            check_name(name, "columns", what="a column name")
        if self.distribution is not None and not isinstance(self.distribution, Mapping):
            raise ParameterError(
                "`distribution` must map each embedding column to its table of p(e|a); got "
                f"{describe(self.distribution)}."
            )
        given = [
            name
            for name, value in (
                ("clusters", self.clusters),
                ("columns", self.columns),
                ("distribution", self.distribution),
                ("estimated", self.estimated),
            )
            if value
        ]
        if len(given) != 1:
            raise ParameterError(
                "an ActionEmbedding takes exactly one of clusters= (a cluster column), "
                "columns= (categorical embedding columns of the item table), distribution= "
                "(a known p(e|a) per embedding column) or estimated= (observed embedding "
                f"columns whose p(e|a) is estimated); got {', '.join(given) or 'none'}."
            )
        argument = self.kind
        names = list(self.names)
        for name in names:
            check_name(name, argument, what="a column name")
        if len(set(names)) != len(names):
            raise ParameterError(f"embedding columns are listed twice: {names}.")
        check_positive_int(self.min_dims, "min_dims", minimum=1)
        if self.search is not None and self.search not in EMBEDDING_SEARCHES:
            raise ParameterError(
                f"`search` must be one of {', '.join(EMBEDDING_SEARCHES)}; got {self.search!r}."
            )
        if self.select is not None:
            if self.select not in EMBEDDING_RULES:
                raise ParameterError(
                    f"`select` must be a rule among {', '.join(EMBEDDING_RULES)} (choosing a "
                    f"subset of the dimensions per candidate) or None; got {self.select!r}."
                )
            if argument == "clusters":
                raise ParameterError(
                    "`select` chooses among an embedding's dimensions; a cluster column is one "
                    "dimension: give the embedding as columns=, distribution= or estimated=."
                )
        if self.select is None and (self.search is not None or self.min_dims != 1):
            given = [
                f"{k}={v!r}"
                for k, v in (("search", self.search), ("min_dims", self.min_dims))
                if v not in (None, 1)
            ]
            raise ParameterError(
                f"{' and '.join(given)} apply only with select= (the rule that chooses a "
                "subset of the dimensions per candidate); without it they would be ignored. "
                f"Pass select={EMBEDDING_RULES[0]!r} (or {EMBEDDING_RULES[1]!r}), or leave "
                f"{'them' if len(given) > 1 else 'it'} out."
            )
        if self.min_dims > len(names):
            raise ParameterError(
                f"`min_dims` ({self.min_dims}) is more than the embedding's {len(names)} "
                f"dimension(s) {names}."
            )

    @property
    def kind(self) -> str:
        """``"clusters"``, ``"columns"``, ``"distribution"`` or ``"estimated"``."""
        if self.clusters:
            return "clusters"
        if self.columns:
            return "columns"
        return "estimated" if self.estimated else "distribution"

    @property
    def names(self) -> tuple[str, ...]:
        """The columns this embedding reads."""
        if self.clusters:
            return (self.clusters,)
        if self.columns:
            return self.columns
        return self.estimated if self.estimated else tuple(self.distribution or {})

    def restricted(self, dimensions: Sequence[str]) -> ActionEmbedding:
        """This embedding on a subset of its dimensions (in this embedding's order), without
        ``select`` (nor its ``search`` and ``min_dims``): what a candidate is evaluated with
        once its subset is chosen.

        Raises
        ------
        ope.ParameterError
            A cluster embedding, an empty subset, or a name that is not a dimension.

        Examples
        --------
        >>> ActionEmbedding(columns=("genre", "brand", "price_band")).restricted(["brand"]).names
        ('brand',)
        """
        if self.kind == "clusters":
            raise ParameterError("a cluster embedding has one dimension: nothing to restrict.")
        wanted = (
            [dimensions] if isinstance(dimensions, str) else check_names(dimensions, "dimensions")
        )
        unknown = [d for d in wanted if d not in self.names]
        if unknown or not wanted:
            raise ParameterError(
                f"the dimensions must be a non-empty subset of {list(self.names)}; got {wanted}."
            )
        kept = tuple(d for d in self.names if d in wanted)
        if self.kind == "columns":
            changes: dict[str, Any] = {"columns": kept}
        elif self.kind == "estimated":
            changes = {"estimated": kept}
        else:
            changes = {"distribution": {d: (self.distribution or {})[d] for d in kept}}
        gone = tuple(d for d in self.names if d not in kept) + self.dropped
        return replace(self.without_selection(), dropped=gone, **changes)

    def without_selection(self) -> ActionEmbedding:
        """This embedding with its dimensions as they are: no ``select``, nor the ``search``
        and ``min_dims`` that apply only with it.

        >>> e = ActionEmbedding(columns=("a", "b"), select="slope", min_dims=2)
        >>> e.without_selection() == ActionEmbedding(columns=("a", "b"))
        True
        """
        return replace(self, select=None, search=None, min_dims=1)

    @property
    def observed(self) -> bool:
        """Whether the embedding is observed on each row (a column of the logs drawn after the
        item): a known or an estimated ``p(e|a)``."""
        return self.kind in ("distribution", "estimated")

    def describe(self) -> str:
        """The embedding in words, for notes and reports."""
        if self.kind == "clusters":
            return f"the clusters of column {self.clusters}"
        if self.kind == "columns":
            text = f"the joint embedding of {', '.join(self.columns)} (per item)"
        elif self.kind == "estimated":
            text = (
                f"the observed embedding {', '.join(self.names)} with p(e|a) estimated from "
                f"the logs ({self.n_folds}-fold cross-fitted frequencies, smoothing "
                f"{self.smoothing:g})"
            )
        else:
            text = f"the observed embedding {', '.join(self.names)} with a known p(e|a)"
        if self.select is not None:
            text += (
                f", {self.min_dims} or more of its dimensions chosen per candidate by the "
                f"{self.select} rule"
            )
        return text


@dataclass(frozen=True, eq=False)
class MarginalPropensities:
    """Marginal propensities of the logged embedding, per row.

    Attributes
    ----------
    names : list of str
        The candidate policies, in column order.
    logging : numpy.ndarray of shape (n,)
        :math:`\\pi_0(e_i \\mid x_i)`, at least the logged propensity for deterministic
        embeddings (the logged item is one of the items of its embedding).
    values : numpy.ndarray of shape (n, P)
        :math:`\\pi_p(e_i \\mid x_i)` of each candidate.
    embedding : ActionEmbedding
        How the actions were mapped.
    n_embeddings : int
        Distinct embeddings among the catalog's items (deterministic kinds), or among the
        observed embeddings (``distribution``).

    Examples
    --------
    >>> import numpy as np
    >>> m = MarginalPropensities(["b"], np.array([0.5]), np.array([[1.0]]),
    ...                          ActionEmbedding(clusters="c"), 2)
    >>> (m.values[:, 0] / m.logging).tolist()
    [2.0]
    """

    names: list[str]
    logging: npt.NDArray[np.float64]
    values: npt.NDArray[np.float64]
    embedding: ActionEmbedding
    n_embeddings: int

    def weights(self) -> npt.NDArray[np.float64]:
        """The marginal importance weights, shape (n, P)."""
        return self.values / self.logging[:, None]


def _as_table(table: Any, what: str) -> pa.Table:
    """A pyarrow Table from a Table or a pandas DataFrame."""
    if isinstance(table, pa.Table):
        return table
    if type(table).__name__ == "DataFrame" and hasattr(table, "columns"):
        return pa.Table.from_pandas(table, preserve_index=False)
    raise ParameterError(
        f"{what} must be a pyarrow Table or a pandas DataFrame; got {type(table).__name__}."
    )


def _category_codes(column: pa.ChunkedArray | pa.Array, what: str) -> npt.NDArray[np.int64]:
    """Integer codes 0 .. G-1 of a categorical column (nulls and non-finite floats are errors)."""
    column = decode(column)
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if column.null_count:
        bad = np.asarray(pc.is_null(column).to_numpy(zero_copy_only=False), dtype=bool)
        raise SchemaError(f"{what} is missing (null) in {rows_text(bad)}; give every one a value.")
    values = column.to_numpy(zero_copy_only=False)
    if pa.types.is_floating(column.type) and not np.all(np.isfinite(values)):
        raise SchemaError(f"{what} must be finite categories; it holds NaN or infinities.")
    return np.unique(values, return_inverse=True)[1].reshape(-1).astype(np.int64)


def _arrow_pieces(column: pa.ChunkedArray | pa.Array) -> list[pa.Array]:
    return list(column.chunks) if isinstance(column, pa.ChunkedArray) else [column]


def _joint_codes(parts: Sequence[npt.NDArray[np.int64]]) -> tuple[npt.NDArray[np.int64], int]:
    """Codes of the tuples of several code arrays (0 .. G-1) and G."""
    if len(parts) == 1:
        codes = parts[0]
        uniq, inverse = np.unique(codes, return_inverse=True)
        return inverse.astype(np.int64), int(uniq.size)
    stacked = np.stack(parts, axis=1)
    uniq, inverse = np.unique(stacked, axis=0, return_inverse=True)
    return inverse.reshape(-1).astype(np.int64), int(uniq.shape[0])


@dataclass(frozen=True, eq=False)
class _ItemCodes:
    """The embedding code of each item of the item table, and the table's action labels."""

    actions: pa.Array
    codes: npt.NDArray[np.int64]
    n_codes: int

    def of(self, labels: pa.Array, what: str) -> npt.NDArray[np.int64]:
        """The code of each label (an error naming the labels missing from the table)."""
        lut = self._lookup()
        if lut is not None and pa.types.is_integer(labels.type) and not labels.null_count:
            lo, table = lut
            v = np.asarray(labels.to_numpy(zero_copy_only=False), dtype=np.int64) - lo
            inside = (v >= 0) & (v < table.size)
            if bool(inside.all()):
                codes = table[v]
                missing = codes < 0
                if not missing.any():
                    return codes
        pos = label_codes(labels, self.actions).astype(np.int64)
        missing = pos < 0
        if missing.any():
            shown = labels.filter(pa.array(missing)).to_pylist()
            raise PolicyError(
                f"{what}: {int(missing.sum()):,} actions have no row in the item table "
                f"(e.g. {examples(shown)}); give every action that is logged or offered an "
                "embedding (a row of the item table)."
            )
        return self.codes[pos]

    def _lookup(self) -> tuple[int, npt.NDArray[np.int64]] | None:
        """``(lowest label, code by label - lowest)`` for integer labels within a span of a
        few times their number (-1 for labels without a row), else None."""
        cached = self.__dict__.get("_lut")
        if cached is not None or "_lut" in self.__dict__:
            return cached
        lut = None
        if pa.types.is_integer(self.actions.type) and len(self.actions):
            labels = np.asarray(self.actions.to_numpy(zero_copy_only=False), dtype=np.int64)
            lo, hi = int(labels.min()), int(labels.max())
            if hi - lo < max(8 * labels.size, 1 << 16):
                table = np.full(hi - lo + 1, -1, dtype=np.int64)
                table[labels - lo] = self.codes
                lut = (lo, table)
        self.__dict__["_lut"] = lut
        return lut


def _item_codes(logs: BanditLogs, embedding: ActionEmbedding) -> _ItemCodes:
    """The embedding code of each item, from the item table (deterministic kinds)."""
    source = embedding.items if embedding.items is not None else logs.action_features
    if source is None:
        raise PolicyError(
            f"{embedding.describe()} needs an item table: an `action` column with "
            f"{', '.join(embedding.names)}. Give it with ActionEmbedding(..., items=table) or "
            "logs.with_action_features(table) (on the command line: --items FILE)."
        )
    items = _as_table(source, "the item table")
    if "action" not in items.column_names:
        raise SchemaError("the item table has no `action` column (one row per action).")
    lacking = [c for c in embedding.names if c not in items.column_names]
    if lacking:
        raise SchemaError(
            f"the item table lacks the embedding columns {lacking}; it has "
            f"{', '.join(items.column_names)}."
        )
    actions = decode(items.column("action"))
    actions = actions.combine_chunks() if isinstance(actions, pa.ChunkedArray) else actions
    if actions.null_count:
        raise SchemaError("the item table's `action` column has nulls.")
    if len(pc.unique(actions)) != len(actions):
        counts = pc.value_counts(actions)
        dup = [v["values"] for v in counts.to_pylist() if v["counts"] > 1]
        raise SchemaError(
            f"the item table lists actions more than once (e.g. {examples(dup)}); give one row "
            "per action."
        )
    parts = [
        _category_codes(items.column(c), f"the item table's column {c!r}") for c in embedding.names
    ]
    codes, g = _joint_codes(parts)
    return _ItemCodes(actions=actions, codes=codes, n_codes=g)


def _entry_rows(dist: PolicyDistribution) -> tuple[npt.NDArray[np.int64], Any]:
    m = dist.matrix
    return rows_of(np.asarray(m.indptr, dtype=np.int64)), m


def _labels(values: npt.NDArray[Any], like: pa.DataType) -> pa.Array:
    return pa.array(values, type=like)


def _marginal_deterministic(
    dist: PolicyDistribution,
    item_code_of_labels: Any,
    logged_code: npt.NDArray[np.int64],
) -> npt.NDArray[np.float64]:
    """sum of the distribution's mass on the items whose code is the logged item's, per row."""
    rows, m = _entry_rows(dist)
    code_of_column = item_code_of_labels(dist.actions)
    same = code_of_column[np.asarray(m.indices, dtype=np.int64)] == logged_code[rows]
    n = logged_code.size
    sums = np.bincount(rows[same], weights=np.asarray(m.data)[same], minlength=n)
    return np.asarray(sums, dtype=np.float64)


def reads_aligned_columns(logs: BanditLogs, embedding: ActionEmbedding, policies: Any) -> bool:
    """Whether :func:`marginal_propensities` reads the logs' aligned list columns directly:
    reader-validated logs (``candidates``, ``logging_distribution`` and each named candidate's
    ``target_dist__<name>`` were checked row by row when read), candidates named by their
    ``target__`` columns (``policies`` None or a list of names), and one embedding per item
    (an item-table column or columns). Then no candidate's sparse distribution is built."""
    from ope.policies.join import validated_target_columns

    if embedding.observed or not logs.targets_validated():
        return False
    have = logs.table.column_names
    if embedding.clusters is not None and embedding.clusters in have:
        return False
    if "candidates" not in have or "logging_distribution" not in have:
        return False
    if policies is not None and not (
        isinstance(policies, (list, tuple)) and all(isinstance(p, str) for p in policies)
    ):
        return False
    found = validated_target_columns(logs, policies)
    return found is not None and all(f"target_dist__{name}" in have for name in found[0])


def _flat_float(column: pa.ChunkedArray, what: str) -> npt.NDArray[np.float64]:
    """The entries of a reader-validated list<float64> column, as one float64 array: Arrow's
    own buffer (read-only, no copy) when they are one chunk of float64."""
    flat = pc.list_flatten(column)
    if flat.null_count:
        raise PolicyError(f"{what} holds {flat.null_count:,} null entries.")
    if flat.num_chunks == 1 and pa.types.is_float64(flat.type):
        return flat.chunk(0).to_numpy(zero_copy_only=True)
    return to_float64(flat)


#: Entries per block when :func:`_from_aligned_columns` decides how many threads to use, and
#: rows per block of each thread's range.
_ENTRY_BLOCK: Final = 1 << 12
_ROW_BLOCK: Final = 1 << 8

#: Rows per chunk of :func:`_from_aligned_columns`: the temporaries over a chunk's entries
#: (codes, rows, picks: 50 candidates per row, 8 bytes each) stay near 100 MB.
ALIGNED_CHUNK_ROWS = 1 << 18


def _from_aligned_columns(
    logs: BanditLogs, embedding: ActionEmbedding, policies: Any
) -> tuple[list[str], npt.NDArray[np.float64], npt.NDArray[np.float64], int]:
    """``(names, p0, values, n_embeddings)`` from the aligned list columns (see
    :func:`reads_aligned_columns`), chunk by chunk of rows (a loop over chunks, not rows).

    Per chunk, each row's entries whose item has the logged item's embedding are summed in
    every column (the logger's and each candidate's distribution), and each candidate's row
    sums are checked against 1: one compiled pass over the entries with the numba backend
    (:func:`_nb_pick_sums`; integer item labels), else vectorized numpy."""
    from ope._kernel import column_addresses, row_ranges, run_threads
    from ope.policies.join import validated_target_columns

    found = validated_target_columns(logs, policies)
    assert found is not None  # reads_aligned_columns said so
    names = list(found[0])
    items = _item_codes(logs, embedding)
    n = logs.n
    columns = ["logging_distribution", *(f"target_dist__{name}" for name in names)]
    out = np.zeros((len(columns), n))
    totals = np.zeros((len(columns), n))
    table = logs.table.select(["action", "candidates", *columns])
    loops = _compiled()
    start = 0
    # batches of whole arrays (one chunk per column): the flattened entries are Arrow's own
    # buffers, read in place
    for batch in table.to_batches(max_chunksize=ALIGNED_CHUNK_ROWS):
        part = pa.Table.from_batches([batch])
        m = part.num_rows
        if m == 0:  # an empty chunk (e.g. an empty file of a dataset): nothing to sum
            continue
        action = decode(part.column("action")).combine_chunks()
        logged = items.of(action, "the logged actions")
        cand = part.column("candidates")
        lengths = np.asarray(pc.list_value_length(cand).to_numpy(), dtype=np.int64)
        offsets = np.zeros(m + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        entries = decode(pc.list_flatten(cand)).combine_chunks()
        flats = []
        for column in columns:  # a loop over candidates
            values = _flat_float(part.column(column), f"column {column!r}")
            if values.size != len(entries):
                raise PolicyError(
                    f"column {column!r} must have one entry per candidate (aligned with "
                    "`candidates`)."
                )
            flats.append(np.ascontiguousarray(values))
        lut = items._lookup()
        labels = None
        if loops is not None and lut is not None and pa.types.is_integer(entries.type):
            labels = np.ascontiguousarray(entries.to_numpy(zero_copy_only=False), dtype=np.int64)
        if labels is not None and lut is not None and loops is not None:
            addresses = column_addresses(flats)
            code_of, lowest = lut[1], lut[0]

            def pick(lo: int, hi: int) -> int:
                return int(
                    loops["_nb_pick_sums"](
                        offsets[lo : hi + 1],
                        labels,
                        code_of,
                        lowest,
                        logged[lo:hi],
                        addresses,
                        out[:, start + lo : start + hi],
                        totals[:, start + lo : start + hi],
                    )
                )

            # as many threads as a compiled pass over the entries uses (rows are split: each
            # thread writes its own rows' sums)
            parts = len(row_ranges(int(offsets[-1]), _ENTRY_BLOCK))
            unknown = sum(run_threads(pick, row_ranges(m, _ROW_BLOCK, parts)))
            if unknown:
                items.of(entries, "the candidates' actions")  # raises, naming them
        else:
            code = items.of(entries, "the candidates' actions")
            picked = np.flatnonzero(code == np.repeat(logged, lengths))
            rows = np.repeat(np.arange(m, dtype=np.int64), lengths)
            for k, values in enumerate(flats):  # a loop over candidates
                out[k, start : start + m] = np.bincount(
                    rows[picked], weights=values[picked], minlength=m
                )
                totals[k, start : start + m] = np.bincount(rows, weights=values, minlength=m)
        del flats
        start += m
    lengths_all = np.asarray(
        pc.list_value_length(logs.table.column("candidates")).to_numpy(), dtype=np.int64
    )
    for k, column in enumerate(columns[1:], start=1):  # the reader checked the logger's sums
        bad = (lengths_all > 0) & (
            np.abs(totals[k] - 1.0) > PROBABILITY_TOLERANCE * np.maximum(lengths_all, 1)
        )
        if bad.any():
            raise PolicyError(
                f"column {column!r}: a candidate's distribution must sum to 1 over the row's "
                f"candidates; it does not in {rows_text(bad)}."
            )
    values_out = out[1:].T.copy() if names else np.empty((n, 0))
    return names, out[0], values_out, items.n_codes


def _nb_pick_sums(offsets, labels, lut, lo, logged, addresses, out, totals):
    """For each row ``i`` and column ``j`` (a float64 array at ``addresses[j]``, one entry per
    candidate): ``out[j, i]`` the sum of the entries whose item's embedding code
    ``lut[label - lo]`` is the logged item's ``logged[i]``, ``totals[j, i]`` the sum of all.
    Returns the number of entries whose label has no code (the caller names them). ``offsets``
    may be those of a range of rows (``offsets[0] > 0``): the entries stay where they are, and
    ``logged``, ``out`` and ``totals`` are the range's.

    The entries of the logged embedding are marked once (a 0/1 float per entry), then each
    column is two sums per row, which vectorize."""
    m = offsets.shape[0] - 1
    n_cols = addresses.shape[0]
    nnz = labels.shape[0]
    span = lut.shape[0]
    base = offsets[0]  # the rows' entries are [offsets[0], offsets[m]) (a range of rows)
    match = np.empty(offsets[m] - base)
    unknown = 0
    # each row's entries as slices from 0: an index ``offsets[i] + k`` would keep the loops
    # from vectorizing
    for i in range(m):
        a, b = offsets[i], offsets[i + 1]
        g = logged[i]
        row_labels = labels[a:b]
        row_match = match[a - base : b - base]
        for k in range(b - a):
            v = row_labels[k] - lo
            inside = (v >= 0) & (v < span)
            c = lut[v if inside else 0] if inside else -1
            row_match[k] = 1.0 if c == g else 0.0
            unknown += 1 if c < 0 else 0
    for j in range(n_cols):
        col = _nb_carray(_nb_pointer(addresses[j]), nnz, np.float64)
        for i in range(m):
            a, b = offsets[i], offsets[i + 1]
            row = col[a:b]
            row_match = match[a - base : b - base]
            acc = 0.0
            tot = 0.0
            for k in range(b - a):
                x = row[k]
                acc += x * row_match[k]
                tot += x
            out[j, i] = acc
            totals[j, i] = tot
    return unknown


#: Set by :func:`_compiled` before the loop compiles: the kernel's column access
#: (:func:`ope._kernel.column_access`: an address as a ``void *``, and ``numba.carray``).
_nb_pointer: Any = None
_nb_carray: Any = None


def _compiled() -> dict[str, Any] | None:
    """The compiled loop when the numba backend is in use (compiled on first use), else None."""
    global _nb_pointer, _nb_carray
    from ope._kernel import backend, column_access, compiled_loops

    if _nb_pointer is None and backend() == "numba":
        _nb_pointer, _nb_carray = column_access()
    return compiled_loops(__name__, (_nb_pick_sums,))


def _from_distributions(
    logs: BanditLogs,
    embedding: ActionEmbedding,
    policies: Any,
    distributions: Mapping[str, PolicyDistribution] | None,
) -> tuple[list[str], npt.NDArray[np.float64], npt.NDArray[np.float64], int]:
    """``(names, p0, values, n_embeddings)`` from the logger's and the candidates' sparse
    distributions (given, or resolved from ``policies``): every embedding form."""
    from ope.policies import logging_distribution, target_propensities

    logging = logging_distribution(logs)
    if distributions is None:
        tp = target_propensities(logs, policies, with_distributions=True)
        assert tp.distributions is not None
        names, dists = list(tp.names), [tp.distributions[p] for p in tp.names]
    else:
        if not isinstance(distributions, Mapping) or not all(
            isinstance(d, PolicyDistribution) and d.matrix.shape[0] == logs.n
            for d in distributions.values()
        ):
            raise ParameterError(
                "`distributions` must map each candidate's name to its PolicyDistribution over "
                f"these {logs.n:,} rows; got {describe(distributions)}."
            )
        names, dists = [str(k) for k in distributions], list(distributions.values())
    action = decode(logs.table.column("action"))
    action_type = action.type
    n = logs.n
    if embedding.observed:
        fn: _StochasticLookup | _EstimatedLookup = (
            _StochasticLookup(logs, embedding)
            if embedding.kind == "distribution"
            else _EstimatedLookup(logs, embedding)
        )
        p0 = fn.marginal(logging)
        values = np.column_stack([fn.marginal(d) for d in dists]) if dists else np.empty((n, 0))
        n_embeddings = fn.n_observed
    elif embedding.clusters is not None and embedding.clusters in logs.table.column_names:
        per_row = _PerRowClusters(logs, embedding.clusters)
        p0 = per_row.marginal(logging)
        values = (
            np.column_stack([per_row.marginal(d) for d in dists]) if dists else np.empty((n, 0))
        )
        n_embeddings = per_row.n_clusters
    else:
        items = _item_codes(logs, embedding)
        flat_action = action.combine_chunks() if isinstance(action, pa.ChunkedArray) else action
        logged = items.of(flat_action, "the logged actions")

        def code_of(labels: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
            return items.of(_labels(labels, action_type), "the candidates' actions")

        p0 = _marginal_deterministic(logging, code_of, logged)
        values = (
            np.column_stack([_marginal_deterministic(d, code_of, logged) for d in dists])
            if dists
            else np.empty((n, 0))
        )
        n_embeddings = items.n_codes
    return names, p0, values, n_embeddings


def marginal_propensities(
    logs: BanditLogs,
    embedding: ActionEmbedding,
    policies: Any = None,
    *,
    distributions: Mapping[str, PolicyDistribution] | None = None,
) -> MarginalPropensities:
    """The logger's and every candidate's probability of each row's logged embedding.

    Parameters
    ----------
    logs : BanditLogs
        Validated logs with ``candidates`` and ``logging_distribution`` (the logger's whole
        distribution over each row's candidates: ``pi_0(e | x)`` sums over it).
    embedding : ActionEmbedding
        How actions map to embeddings.
    policies : optional
        The candidates, as :func:`ope.policies.target_propensities` takes them (default: the
        logs' ``target__<name>`` columns, each with its ``target_dist__<name>``).
    distributions : mapping of str to PolicyDistribution, optional
        The candidates' distributions already resolved (``policies`` is then not read).

    Returns
    -------
    MarginalPropensities

    Raises
    ------
    ope.PolicyError
        The logs lack the logging distribution or a candidate's whole distribution; an action
        logged or offered has no embedding; a logged embedding has probability 0 under the
        logger (impossible under the stated embedding).
    ope.SchemaError
        A malformed item table or embedding column.

    Notes
    -----
    With deterministic embeddings (clusters, or the joint value of categorical columns)
    :math:`\\pi(e \\mid x_i) = \\sum_{a \\in C_i: e(a) = e} \\pi(a \\mid x_i)`; with a known
    stochastic :math:`p(e \\mid a) = \\prod_d p(e_d \\mid a)` the sum is weighted by it. Each is a
    sum over the stored entries of the row's distribution (CSR), vectorized: no loop over rows.

    References
    ----------
    .. [1] Y. Saito and T. Joachims, "Off-policy evaluation for large action spaces via
       embeddings", ICML 2022, arXiv:2202.06317.

    Examples
    --------
    >>> import pyarrow as pa, ope
    >>> from ope.marginal import ActionEmbedding, marginal_propensities
    >>> t = pa.table({"action": [1, 3], "propensity": [0.25, 0.5], "reward": [1.0, 0.0],
    ...     "candidates": [[1, 2, 3], [1, 3]], "logging_distribution": [[0.25, 0.25, 0.5], [0.5, 0.5]],
    ...     "target__new": [0.0, 1.0], "target_dist__new": [[0.0, 1.0, 0.0], [0.0, 1.0]]})
    >>> items = pa.table({"action": [1, 2, 3], "genre": ["a", "a", "b"]})
    >>> m = marginal_propensities(ope.read_logs(t), ActionEmbedding(clusters="genre", items=items))
    >>> m.logging.tolist(), m.values[:, 0].tolist()
    ([0.5, 0.5], [1.0, 1.0])
    """

    logs = require_logs(logs, "marginal_propensities")
    if not isinstance(embedding, ActionEmbedding):
        raise ParameterError(
            "`embedding` must be an ope.ActionEmbedding (e.g. ActionEmbedding(clusters='genre')); "
            f"got {type(embedding).__name__}."
        )
    have = logs.table.column_names
    lacking = [c for c in ("candidates", "logging_distribution") if c not in have]
    if lacking:
        raise PolicyError(
            f"`embedding`: marginal weights need the logger's whole distribution over each row's "
            f"candidates: the logs lack {', '.join(lacking)}. Log `candidates` (list of actions) and "
            "`logging_distribution` (list<float64> aligned with candidates)."
        )
    if distributions is None and reads_aligned_columns(logs, embedding, policies):
        names, p0, values, n_embeddings = _from_aligned_columns(logs, embedding, policies)
    else:
        names, p0, values, n_embeddings = _from_distributions(
            logs, embedding, policies, distributions
        )
    # sums of probabilities: a row total above 1 by round-off (accepted when the logs were
    # read) is 1; so are the candidates' (their row sums were checked against 1)
    p0 = np.where((p0 > 1.0) & (p0 <= 1.0 + MARGINAL_EXCESS_ATOL), 1.0, p0)
    _check_logged(p0, logs, embedding)
    return MarginalPropensities(
        names=names,
        logging=p0,
        values=np.minimum(values, 1.0),
        embedding=embedding,
        n_embeddings=n_embeddings,
    )


def one_per_item(logs: BanditLogs, embedding: ActionEmbedding) -> bool:
    """Whether ``embedding`` gives each item one code (not per-row clusters or a ``p(e|a)``)."""
    return not (
        embedding.observed
        or (embedding.kind == "clusters" and embedding.clusters in logs.table.column_names)
    )


def embedding_level(
    logs: BanditLogs,
    embedding: ActionEmbedding,
    distributions: Mapping[str, PolicyDistribution],
) -> tuple[BanditLogs, dict[str, PolicyDistribution]] | None:
    """The logs and distributions with each item replaced by its embedding, for a reward model
    of ``(x, e)`` (the marginalized DR's :math:`\\hat q(x, e)`), or None for embeddings that
    are not one per item (per-row clusters, a stochastic ``p(e|a)``).

    The ``action`` column becomes the logged item's embedding code (0 .. G-1), and each
    candidate's distribution its distribution over embeddings (the items' probabilities summed
    per embedding), so that a reward model fitted on these logs predicts
    :math:`\\hat q(x_i, e_i)` and :math:`\\sum_e \\pi(e \\mid x_i) \\hat q(x_i, e)`. A model of
    the embedding leaves no item-level error in the residual :math:`r - \\hat q`, which the
    marginal weights could not correct.
    """
    import scipy.sparse as sp

    if not one_per_item(logs, embedding):
        return None
    items = _item_codes(logs, embedding)
    action = decode(logs.table.column("action"))
    flat = action.combine_chunks() if isinstance(action, pa.ChunkedArray) else action
    logged = items.of(flat, "the logged actions")
    g = max(items.n_codes, 1)
    out: dict[str, PolicyDistribution] = {}
    for name, dist in distributions.items():  # a loop over candidates
        m = dist.matrix
        code = items.of(_labels(dist.actions, flat.type), "the candidates' actions")
        merged = sp.csr_array(
            # copies: summing duplicates rewrites the arrays in place
            (np.array(m.data), code[np.asarray(m.indices, dtype=np.int64)], np.array(m.indptr)),
            shape=(m.shape[0], g),
        )
        merged.sum_duplicates()
        out[name] = PolicyDistribution(merged, np.arange(g, dtype=np.int64))
    index = logs.table.column_names.index("action")
    table = logs.table.set_column(index, "action", pa.array(logged, type=pa.int64()))
    return BanditLogs(table, logs.report, unit_roundoff=logs.unit_roundoff), out


def item_clusters(
    logs: BanditLogs, embedding: ActionEmbedding, items: npt.NDArray[Any]
) -> npt.NDArray[np.int64] | None:
    """The embedding code (cluster) of each item label in ``items``, for a reward model with
    one cluster per item (:class:`~ope.reward_models.TwoStepRewardModel`), or None for
    embeddings that are not one per item (per-row clusters, a stochastic ``p(e|a)``)."""
    if not one_per_item(logs, embedding):
        return None
    codes = _item_codes(logs, embedding)
    action = decode(logs.table.column("action"))
    flat = action.combine_chunks() if isinstance(action, pa.ChunkedArray) else action
    return codes.of(_labels(np.asarray(items), flat.type), "the items of the reward model")


def _check_logged(
    p0: npt.NDArray[np.float64], logs: BanditLogs, embedding: ActionEmbedding
) -> None:
    """Every logged embedding has positive probability under the logger (and at least the
    logged item's own for deterministic embeddings)."""
    zero = ~(p0 > 0.0)
    if zero.any():
        raise PolicyError(
            f"the logged embedding has probability 0 under the logger in {rows_text(zero)} "
            f"({embedding.describe()}): the logged item's own probability should count toward it. "
            "Check that the embedding of each logged action matches the one the logger used, "
            "and that p(e|a) gives the observed embedding positive probability."
        )
    if not embedding.observed:
        propensity = np.asarray(logs.column("propensity"), dtype=np.float64)
        low = p0 < propensity * (1.0 - PROBABILITY_TOLERANCE) - PROBABILITY_TOLERANCE
        if low.any():
            raise PolicyError(
                f"the logger's probability of the logged embedding is below the logged "
                f"propensity in {rows_text(low)}: the logged item is one of its embedding's "
                "items, so the logging distribution and `propensity` disagree."
            )


class _PerRowClusters:
    """Clusters given per row: a list column aligned with ``candidates``."""

    def __init__(self, logs: BanditLogs, column: str) -> None:
        col = logs.table.column(column)
        t = col.type
        if not (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)):
            raise SchemaError(
                f"the cluster column {column!r} of the logs must be a list aligned with "
                f"`candidates` (one cluster per candidate), got {t}; a cluster per item belongs "
                "in the item table (action_features)."
            )
        index = action_index(logs)
        cand = candidate_sets(index, what=f"the cluster column {column!r}")
        lengths = np.asarray(pc.fill_null(pc.list_value_length(col), -1).to_numpy(), dtype=np.int64)
        bad = lengths != cand.lengths
        if bad.any():
            raise PolicyError(
                f"the cluster column {column!r} must have one entry per candidate (aligned with "
                f"`candidates`); its length differs or it is null in {rows_text(bad)}."
            )
        flat = pc.list_flatten(col)
        codes = _category_codes(flat, f"the cluster column {column!r}")
        self.n_clusters = int(codes.max()) + 1 if codes.size else 0
        self.n = logs.n
        self.catalog = index.catalog
        k = index.n_actions
        rows = rows_of(cand.indptr)
        keys = rows * k + cand.codes.astype(np.int64)
        order = np.argsort(keys, kind="stable")
        self.keys = keys[order]
        self.codes = codes[order]
        self.k = k
        logged_keys = np.arange(self.n, dtype=np.int64) * k + index.logged.astype(np.int64)
        pos = np.searchsorted(self.keys, logged_keys)
        pos_c = np.minimum(pos, self.keys.size - 1)
        found = (self.keys.size > 0) & (self.keys[pos_c] == logged_keys)
        if not np.all(found):
            raise PolicyError(
                f"the logged action is not among the candidates in {rows_text(~found)}, so "
                f"{column!r} gives it no cluster."
            )
        self.logged = self.codes[pos_c]

    def marginal(self, dist: PolicyDistribution) -> npt.NDArray[np.float64]:
        rows, m = _entry_rows(dist)
        col_codes = label_codes(pa.array(dist.actions, type=self.catalog.type), self.catalog)
        keys = rows * self.k + col_codes.astype(np.int64)[np.asarray(m.indices, dtype=np.int64)]
        pos = np.searchsorted(self.keys, keys)
        pos_c = np.minimum(pos, max(self.keys.size - 1, 0))
        found = (self.keys.size > 0) & (self.keys[pos_c] == keys)
        data = np.asarray(m.data)
        outside = ~found & (data > 0)
        if outside.any():
            raise PolicyError(
                f"a distribution puts mass on actions outside the row's candidates in "
                f"{rows_text(np.bincount(rows[outside], minlength=self.n) > 0)}; a cluster "
                "column aligned with `candidates` gives them no cluster."
            )
        same = found & (self.codes[pos_c] == self.logged[rows])
        sums = np.bincount(rows[same], weights=data[same], minlength=self.n)
        return np.asarray(sums, dtype=np.float64)


class _StochasticLookup:
    """A known p(e_d | a) per embedding column, with the embedding observed on each row."""

    def __init__(self, logs: BanditLogs, embedding: ActionEmbedding) -> None:
        assert embedding.distribution is not None
        self.n = logs.n
        self.catalog = action_index(logs).catalog
        self.dims: list[
            tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.int64], int]
        ] = []
        observed_parts = []
        for column, table in embedding.distribution.items():
            if column not in logs.table.column_names:
                raise SchemaError(
                    f"the logs have no column {column!r}: with distribution= each embedding "
                    "column holds the embedding observed on each row."
                )
            table = _as_table(table, f"the distribution of {column!r}")
            lacking = [c for c in ("action", "value", "probability") if c not in table.column_names]
            if lacking:
                raise SchemaError(
                    f"the distribution of {column!r} lacks the columns {lacking} "
                    "(action, value, probability)."
                )
            observed = decode(logs.table.column(column))
            values = decode(table.column("value"))
            if observed.null_count:
                bad = np.asarray(pc.is_null(observed).to_numpy(zero_copy_only=False), dtype=bool)
                raise SchemaError(f"the embedding column {column!r} is null in {rows_text(bad)}.")
            if values.type != observed.type:
                raise SchemaError(
                    f"the distribution of {column!r} has values of type {values.type}, the "
                    f"column has {observed.type}; give them the same type."
                )
            both = pa.chunked_array(
                [*_arrow_pieces(observed), *_arrow_pieces(values)], type=observed.type
            )
            codes = _category_codes(both, f"the embedding {column!r}")
            n_values = int(codes.max()) + 1 if codes.size else 0
            row_code, table_value = codes[: self.n], codes[self.n :]
            prob = to_float64(table.column("probability"))
            if not np.all(np.isfinite(prob)) or np.any(prob < 0) or np.any(prob > 1):
                raise SchemaError(
                    f"the distribution of {column!r} has probabilities outside [0, 1]."
                )
            t_actions = decode(table.column("action"))
            a_code = label_codes(t_actions, self.catalog).astype(np.int64)
            # actions not in the logs' catalog are never offered: their rows are not needed
            keep = a_code >= 0
            sums = np.bincount(a_code[keep], weights=prob[keep], minlength=len(self.catalog))
            present = np.bincount(a_code[keep], minlength=len(self.catalog)) > 0
            off = present & (np.abs(sums - 1.0) > 1e-6)
            if off.any():
                shown = self.catalog.filter(pa.array(off)).to_pylist()
                raise SchemaError(
                    f"the distribution of {column!r} does not sum to 1 over the values of "
                    f"actions {examples(shown)}."
                )
            keys = a_code[keep] * max(n_values, 1) + table_value[keep]
            order = np.argsort(keys, kind="stable")
            keys, p_sorted = keys[order], prob[keep][order]
            if keys.size > 1 and np.any(np.diff(keys) == 0):
                raise SchemaError(
                    f"the distribution of {column!r} lists an (action, value) pair twice."
                )
            self.dims.append((keys, p_sorted, row_code, max(n_values, 1)))
            observed_parts.append(row_code)
        self.present = present
        self.n_observed = _joint_codes(observed_parts)[1] if self.n else 0

    def marginal(self, dist: PolicyDistribution) -> npt.NDArray[np.float64]:
        rows, m = _entry_rows(dist)
        col_codes = label_codes(pa.array(dist.actions, type=self.catalog.type), self.catalog)
        a = col_codes.astype(np.int64)[np.asarray(m.indices, dtype=np.int64)]
        factor = np.asarray(m.data, dtype=np.float64).copy()
        for keys, prob, row_code, n_values in self.dims:
            key = a * n_values + row_code[rows]
            pos = np.searchsorted(keys, key)
            pos_c = np.minimum(pos, max(keys.size - 1, 0))
            found = (keys.size > 0) & (keys[pos_c] == key) & (a >= 0)
            factor *= np.where(found, prob[pos_c] if keys.size else 0.0, 0.0)
        unknown = (col_codes < 0)[np.asarray(m.indices, dtype=np.int64)] | ~self.present[
            np.maximum(a, 0)
        ]
        if np.any(unknown & (np.asarray(m.data) > 0)):
            raise PolicyError(
                "a distribution puts mass on actions with no p(e|a) in the embedding "
                "distribution; give every offered action its distribution."
            )
        sums = np.bincount(rows, weights=factor, minlength=self.n)
        return np.asarray(sums, dtype=np.float64)


class _EstimatedLookup:
    """``p(e_d | a)`` estimated from the logs' observed embeddings, cross-fitted: the rows of
    fold k are weighted with the counts of the other folds (:attr:`ActionEmbedding.estimated`).

    For an entry (row i, item a) of a distribution and each dimension d with the row's
    observed value v, :math:`\\hat p = (c_{-k}(a, v) + s f_{-k}(v)) / (c_{-k}(a) + s)`, with
    :math:`f_{-k}(v) = (c_{-k}(v) + 1) / (n_{-k} + V_d)`; counts over the rows of the other
    folds, found by binary search in sorted (fold, item, value) keys: no (items x values) table.
    """

    def __init__(self, logs: BanditLogs, embedding: ActionEmbedding) -> None:
        self.n = logs.n
        index = action_index(logs)
        self.catalog = index.catalog
        k_items = max(len(self.catalog), 1)
        folds = int(embedding.n_folds)
        if self.n < folds:
            raise ValidationError(
                f"estimating p(e|a) with {folds}-fold cross-fitting needs at least {folds} rows; "
                f"got {self.n:,}. Pass fewer n_folds or a known distribution=."
            )
        _, gen = resolve_seed(embedding.rng)
        self.fold = fold_assignment(self.n, folds, gen)
        self.folds = folds
        self.smoothing = float(embedding.smoothing)
        logged = index.logged.astype(np.int64)
        fold_rows = np.bincount(self.fold, minlength=folds).astype(np.float64)
        self.rows_out = self.n - fold_rows  # rows of the other folds, per fold
        self.item_out = self._out_counts(logged, k_items)  # c_{-k}(a): (folds, items)
        self.dims: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], Any]] = []
        parts = []
        for column in embedding.estimated:
            if column not in logs.table.column_names:
                raise SchemaError(
                    f"the logs have no column {column!r}: with estimated= each embedding column "
                    "holds the embedding observed on each row."
                )
            observed = decode(logs.table.column(column))
            if observed.null_count:
                bad = np.asarray(pc.is_null(observed).to_numpy(zero_copy_only=False), dtype=bool)
                raise SchemaError(f"the embedding column {column!r} is null in {rows_text(bad)}.")
            v = _category_codes(observed, f"the embedding {column!r}")
            n_values = int(v.max()) + 1 if v.size else 1
            parts.append(v)
            # per fold: the overall frequency of each value in the other folds, add-one smoothed
            value_out = self._out_counts(v, n_values)
            freq = (value_out + 1.0) / (self.rows_out[:, None] + n_values)
            # (item, value) counts of the other folds, as sorted keys with a count per fold
            pair = logged * n_values + v
            keys, inverse = np.unique(pair, return_inverse=True)
            per_fold = np.zeros((folds, keys.size), dtype=np.float64)
            np.add.at(per_fold, (self.fold, inverse), 1.0)
            out = per_fold.sum(axis=0)[None, :] - per_fold
            self.dims.append((keys, out, (v, n_values, freq)))
        self.n_observed = _joint_codes(parts)[1] if self.n else 0

    def _out_counts(self, codes: npt.NDArray[np.int64], size: int) -> npt.NDArray[np.float64]:
        """(folds, size): the counts of each code over the rows of the other folds."""
        per_fold = np.zeros((self.folds, size), dtype=np.float64)
        np.add.at(per_fold, (self.fold, codes), 1.0)
        return per_fold.sum(axis=0)[None, :] - per_fold

    def marginal(self, dist: PolicyDistribution) -> npt.NDArray[np.float64]:
        rows, m = _entry_rows(dist)
        col_codes = label_codes(pa.array(dist.actions, type=self.catalog.type), self.catalog)
        a = col_codes.astype(np.int64)[np.asarray(m.indices, dtype=np.int64)]
        a_safe = np.maximum(a, 0)  # an item outside the logs' catalog: masked below (a < 0)
        fold = self.fold[rows]
        seen = np.where(a >= 0, self.item_out[fold, a_safe], 0.0)
        factor = np.asarray(m.data, dtype=np.float64).copy()
        s = self.smoothing
        for keys, out, (v, n_values, freq) in self.dims:
            value = v[rows]
            key = a_safe * n_values + value
            pos = np.minimum(np.searchsorted(keys, key), max(keys.size - 1, 0))
            found = (keys[pos] == key) & (a >= 0)
            count = np.where(found, out[fold, pos], 0.0)
            f = freq[fold, value]
            with np.errstate(invalid="ignore", divide="ignore"):
                p_hat = np.where(seen + s > 0, (count + s * f) / (seen + s), f)
            factor *= p_hat
        return np.asarray(np.bincount(rows, weights=factor, minlength=self.n), dtype=np.float64)


#: The p-value below which a test of the embedding is read as evidence of a direct effect.
SUFFICIENCY_ALPHA = 0.01


@dataclass(frozen=True)
class SufficiencyTest:
    """Whether per-item and marginal weights estimate the same value (a test of the embedding).

    Attributes
    ----------
    policy : str
    difference : float
        IPS minus MIPS, :math:`\\frac1n\\sum_i (w_i - w^e_i) r_i`; with sampling weights
        :math:`s_i`, :math:`\\sum_i s_i (w_i - w^e_i) r_i / \\sum_i s_i`, the difference of
        the weighted IPS and MIPS of :func:`ope.evaluate`.
    std_error : float
        Standard error of the difference (from the per-row differences: both on the same rows;
        with sampling weights, linearized as the weighted estimates' are).
    z : float
        ``difference / std_error``.
    p_value : float
        Two-sided normal p-value.
    ess_items, ess_embedding : float
        Kish effective sample sizes of the per-item and of the marginal weights (of their
        products with the sampling weights, when the rows carry them).
    """

    policy: str
    difference: float
    std_error: float
    z: float
    p_value: float
    ess_items: float
    ess_embedding: float

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict (JSON-ready floats)."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    def note(self) -> str:
        """The result in one line, for the notes of an evaluation or a diagnosis."""
        text = (
            f"{self.policy}: per-item minus marginal IPS {self.difference:+.4g} (SE "
            f"{self.std_error:.3g}, p = {self.p_value:.3g}); ESS {self.ess_items:,.0f} rows per "
            f"item, {self.ess_embedding:,.0f} per embedding"
        )
        if self.p_value < SUFFICIENCY_ALPHA:
            text += ": evidence of a direct effect of the item beyond its embedding (MIPS biased)"
        return text


def embedding_sufficiency(
    reward: npt.ArrayLike,
    logging_propensity: npt.ArrayLike,
    target_propensity: npt.ArrayLike,
    marginal: MarginalPropensities,
    *,
    sampling_weight: npt.ArrayLike | None = None,
) -> list[SufficiencyTest]:
    """Evidence of a direct effect of the action beyond its embedding, per candidate.

    Under overlap, IPS with per-item weights is unbiased for the candidate's value whatever the
    embedding; MIPS is unbiased only when the reward depends on the action through its
    embedding alone (no direct effect) [1]_. So the per-row differences
    :math:`d_i = (w_i - w^e_i) r_i` have mean 0 when the embedding is sufficient, and a
    difference many standard errors from 0 is evidence of a direct effect (a biased MIPS). The
    test has little power when the per-item weights are heavy (then IPS is noisy too): a large
    p-value is no proof of sufficiency, and the note says so.

    Parameters
    ----------
    reward, logging_propensity : array_like of shape (n,)
        Rewards and logged per-item propensities.
    target_propensity : array_like of shape (n, P) or (n,)
        Each candidate's per-item probability of the logged action, in ``marginal.names``'s
        order.
    marginal : MarginalPropensities
        The same rows' marginal propensities.
    sampling_weight : array_like of shape (n,), optional
        The rows' sampling weights :math:`s_i` (1 / the probability that a row was kept; the
        ``weight`` column in :func:`ope.evaluate`). The difference is then of the
        Horvitz-Thompson weighted estimates, :math:`\\sum_i s_i d_i / \\sum_i s_i` (the
        weighted IPS minus the weighted MIPS), and its standard error is linearized as theirs
        are: :math:`\\psi_i = s_i (d_i - \\bar d_s) / \\bar s` and
        :math:`\\mathrm{sd}(\\psi)/\\sqrt n`. Equal weights give the unweighted test exactly.

    Returns
    -------
    list of SufficiencyTest

    References
    ----------
    .. [1] Y. Saito and T. Joachims, "Off-policy evaluation for large action spaces via
       embeddings", ICML 2022, arXiv:2202.06317 (Assumption 3.2 and Theorem 3.5).

    Examples
    --------
    >>> import numpy as np
    >>> from ope.marginal import ActionEmbedding, MarginalPropensities, embedding_sufficiency
    >>> m = MarginalPropensities(["b"], np.full(4, 0.5), np.full((4, 1), 0.5),
    ...                          ActionEmbedding(clusters="c"), 2)
    >>> t = embedding_sufficiency([1.0, 0.0, 1.0, 0.0], np.full(4, 0.25), np.full((4, 1), 0.25), m)
    >>> t[0].difference, t[0].ess_items
    (0.0, 4.0)
    """
    from scipy.special import ndtr

    if not isinstance(marginal, MarginalPropensities):
        raise ParameterError(
            "`marginal` must be the MarginalPropensities of the same rows "
            f"(ope.marginal_propensities); got {type(marginal).__name__}."
        )
    p, t = validated_pair(logging_propensity, target_propensity)
    r = as_float_array(reward, "reward", ndim=(1,))
    check_finite(r, "reward")
    t = t.reshape(p.size, -1)
    n = r.size
    if p.size != n or marginal.logging.size != n or t.shape[1] != len(marginal.names):
        raise ValidationError(
            f"`reward` ({n} rows), `logging_propensity` ({p.size}), `target_propensity` "
            f"({t.shape[0]} rows x {t.shape[1]}) and `marginal` ({marginal.logging.size} rows x "
            f"{len(marginal.names)}) must describe the same rows and candidates."
        )
    # equal weights: the unweighted test, exactly
    s = varying_sampling_weight(sampling_weight, n, name="sampling_weight")
    out = []
    for j, name in enumerate(marginal.names):  # a loop over candidates
        w = t[:, j] / p
        we = marginal.values[:, j] / marginal.logging
        d = (w - we) * r
        if s is None:
            diff = float(d.mean())
            se = float(d.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
        else:  # the Hajek ratio sum s d / sum s and its linearized standard error
            total = float(np.sum(s))
            diff = float(np.dot(s, d) / total)
            dev = s * (d - diff)
            se = float(np.sqrt(n / (n - 1.0) * np.dot(dev, dev)) / total) if n > 1 else float("nan")
            w, we = s * w, s * we  # the ESS of the weights used: of s w and s w^e
        z = diff / se if se > 0 else (0.0 if diff == 0 else float("inf"))
        pv = float(2.0 * ndtr(-abs(z))) if np.isfinite(z) else 0.0
        ess_i = float(w.sum() ** 2 / (w * w).sum()) if (w * w).sum() > 0 else 0.0
        ess_e = float(we.sum() ** 2 / (we * we).sum()) if (we * we).sum() > 0 else 0.0
        out.append(SufficiencyTest(name, diff, se, float(z), pv, ess_i, ess_e))
    return out
