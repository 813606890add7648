"""Candidate (target) policies and their per-row probabilities.

Off-policy estimators need, for each candidate policy ``p`` and each logged row ``i``, the
probability ``pi_p(a_i | x_i)`` that the candidate gives to the action that was logged; the
doubly robust family also needs each row's whole distribution over its support. This module turns
the three ways a candidate can be given (DESIGN.md §2) into those numbers:

1. columns of the logs: ``target__<name>`` (the probability of the logged action) and optionally
   ``target_dist__<name>`` (the distribution over the row's ``candidates``);
2. a long-format policy table ``event_id, policy, action, probability`` joined on ``event_id``;
3. policy objects computed from the logs: :class:`UniformPolicy`, :class:`EpsilonGreedyPolicy`,
   :class:`DeterministicPolicy`, :class:`SoftmaxPolicy`, :class:`ClassifierPolicy`.

Distributions are sparse: a :class:`PolicyDistribution` is a ``scipy.sparse.csr_array`` of shape
``(n, K)`` whose column ``j`` is the action label ``actions[j]``. Its number of stored entries is
the total size of the rows' supports, never ``n * K`` unless the policy really puts mass on every
action of every row. Everything is vectorized: no Python loop runs over rows.
"""

from __future__ import annotations

import math
import os
import sys
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse as sp

from ope.exceptions import DataFileError, DroppedRowsWarning, PolicyError, SchemaError
from ope.logs import BanditLogs

__all__ = [
    "PROBABILITY_TOLERANCE",
    "Policy",
    "PolicyDistribution",
    "TargetPropensities",
    "UniformPolicy",
    "EpsilonGreedyPolicy",
    "DeterministicPolicy",
    "SoftmaxPolicy",
    "ClassifierPolicy",
    "target_propensities",
    "logging_distribution",
    "read_policy_table",
    "write_policy_table",
    "to_policy_table",
]

#: Largest accepted ``|sum_a pi(a|x) - 1|`` for one row, and largest accepted disagreement between
#: a ``target__`` value and its ``target_dist__`` entry. Probabilities stored as float32 carry a
#: relative error of at most 6e-8 each, so the absolute error of a row sum is below 6e-8 whatever
#: the support size; 1e-6 leaves room for that and float64 round-off while still catching a
#: dropped action or a mis-scaled row (errors of 1e-3 and more in practice).
PROBABILITY_TOLERANCE: Final = 1e-6

#: How many example rows / event ids an error message shows (enough to locate the problem).
_EXAMPLES: Final = 5

_TARGET: Final = "target__"
_TARGET_DIST: Final = "target_dist__"
_POLICY_TABLE_COLUMNS: Final = ("event_id", "policy", "action", "probability")


# --------------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------------


def _examples(values: Any, k: int = _EXAMPLES) -> str:
    """First ``k`` items of ``values`` as ``"a, b, c, ..."``."""
    items = [v.item() if isinstance(v, np.generic) else v for v in list(values[: k + 1])]
    text = ", ".join(repr(v) if isinstance(v, str) else str(v) for v in items[:k])
    return text + (", ..." if len(items) > k else "")


def _rows_text(mask: npt.NDArray[np.bool_]) -> str:
    """``"3 rows (first at rows 0, 4, 9)"`` for a boolean mask over rows."""
    idx = np.flatnonzero(mask)
    word = "row" if idx.size == 1 else "rows"
    return f"{idx.size:,} {word} (first at {word} {_examples(idx)})"


def _is_dataframe(obj: Any) -> bool:
    pd = sys.modules.get("pandas")
    return pd is not None and isinstance(obj, pd.DataFrame)


def _decode(col: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """Dictionary-encoded columns as plain columns of their value type."""
    if pa.types.is_dictionary(col.type):
        return pc.cast(col, col.type.value_type)
    return col


def _is_label_type(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t)


#: Integer labels whose range spans at most this many slots per distinct label are encoded with a
#: direct lookup table (one int32 per slot) instead of a hash join: ids are usually dense
#: (0..n-1, item indices), where a table gather is several times faster than hashing a large
#: value set, and 8 slots per label bounds the table at 32 bytes per label.
_LUT_SLOTS_PER_LABEL: Final = 8
#: Ranges this small always get a lookup table (256 KiB of int32 at most).
_LUT_MIN_SLOTS: Final = 1 << 16


def _codes(values: pa.ChunkedArray | pa.Array, catalog: pa.Array) -> npt.NDArray[np.int32]:
    """Position of each value in ``catalog`` (-1 when absent); ``catalog`` holds distinct labels.

    Vectorized: a lookup table for dense integer labels, Arrow's hash kernel otherwise.
    """
    if (
        pa.types.is_integer(values.type)
        and pa.types.is_integer(catalog.type)
        and len(catalog)
        and not values.null_count
        and not catalog.null_count
    ):
        bounds = pc.min_max(catalog).as_py()
        lo, hi = int(bounds["min"]), int(bounds["max"])
        span = hi - lo + 1
        if span <= max(_LUT_SLOTS_PER_LABEL * len(catalog), _LUT_MIN_SLOTS):
            lut = np.full(span, -1, dtype=np.int32)
            lut[np.asarray(catalog.to_numpy(zero_copy_only=False), dtype=np.int64) - lo] = np.arange(
                len(catalog), dtype=np.int32
            )
            out = np.empty(len(values), dtype=np.int32)
            start = 0
            chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
            for chunk in chunks:  # chunk by chunk: no concatenated copy of the labels
                v = chunk.to_numpy(zero_copy_only=False)
                part = out[start : start + v.size]
                start += v.size
                if v.size == 0:
                    continue
                if lo <= int(v.min()) and int(v.max()) <= hi:
                    np.take(lut, v - lo if lo else v, out=part)
                else:
                    inside = (v >= lo) & (v <= hi)
                    part[:] = -1
                    part[inside] = lut[v[inside] - lo]
            return out
    idx = pc.fill_null(pc.index_in(values, value_set=catalog), -1)
    if isinstance(idx, pa.ChunkedArray):
        idx = idx.combine_chunks() if idx.num_chunks != 1 else idx.chunk(0)
    return idx.to_numpy(zero_copy_only=False)


def _to_numpy(col: pa.ChunkedArray | pa.Array) -> npt.NDArray[Any]:
    """Zero-copy where Arrow allows (one chunk, no nulls)."""
    return col.to_numpy() if isinstance(col, pa.ChunkedArray) else col.to_numpy(zero_copy_only=False)


def _to_float64(col: pa.ChunkedArray | pa.Array) -> npt.NDArray[np.float64]:
    return np.asarray(_to_numpy(col), dtype=np.float64)


def _labels_to_numpy(catalog: pa.Array) -> npt.NDArray[Any]:
    return catalog.to_numpy(zero_copy_only=False)


def _as_label_array(labels: Any, action_type: pa.DataType, what: str) -> pa.Array:
    """User-given action labels as an Arrow array of the logged actions' type."""
    values = labels.tolist() if isinstance(labels, np.ndarray) else list(labels)
    try:
        arr = pa.array(values)
        if arr.type != action_type:
            if not (_is_label_type(arr.type) and _same_kind(arr.type, action_type)):
                raise TypeError
            arr = pc.cast(arr, action_type)
    except (TypeError, pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        raise PolicyError(
            f"{what} must be labels of the same type as the logged actions ({action_type}); "
            f"got {_examples(values)}. Use the action ids exactly as they appear in the "
            "logs' `action` column."
        ) from None
    if arr.null_count:
        raise PolicyError(f"{what} contains missing (null) labels; remove them.")
    return arr


def _same_kind(a: pa.DataType, b: pa.DataType) -> bool:
    ints = pa.types.is_integer
    strs = lambda t: pa.types.is_string(t) or pa.types.is_large_string(t)  # noqa: E731
    return (ints(a) and ints(b)) or (strs(a) and strs(b))


def _rows_of(indptr: npt.NDArray[np.integer]) -> npt.NDArray[np.int64]:
    """Row number of each stored entry of a CSR structure."""
    n = indptr.size - 1
    return np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))


# --------------------------------------------------------------------------------------------
# action catalog
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class _ActionIndex:
    """Integer codes of the logged actions (and candidates) in a sorted catalog of labels."""

    catalog: pa.Array  # sorted unique labels; code j <-> catalog[j]
    logged: npt.NDArray[np.int32]  # (n,) code of each logged action
    candidates: pa.ChunkedArray | None  # the logs' candidates column (decoded), if any

    @property
    def actions(self) -> npt.NDArray[Any]:
        return _labels_to_numpy(self.catalog)

    @property
    def n_actions(self) -> int:
        return len(self.catalog)

    def codes(self, values: pa.ChunkedArray | pa.Array) -> npt.NDArray[np.int32]:
        return _codes(values, self.catalog)


def _action_column(logs: BanditLogs) -> pa.ChunkedArray:
    if "action" not in logs.table.column_names:
        raise SchemaError("the logs have no `action` column; map yours with mapping={'action': ...}")
    action = _decode(logs.table.column("action"))
    if not _is_label_type(action.type):
        raise SchemaError(f"`action` must be int64 or string, got {action.type}")
    return action


def _candidates_column(logs: BanditLogs, action_type: pa.DataType) -> pa.ChunkedArray | None:
    if "candidates" not in logs.table.column_names:
        return None
    cand = logs.table.column("candidates")
    t = cand.type
    if not (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)):
        raise SchemaError(f"`candidates` must be a list of action labels, got {t}")
    value_type = t.value_type
    if pa.types.is_dictionary(value_type):
        value_type = value_type.value_type
    if value_type != action_type:
        if not _same_kind(value_type, action_type):
            raise SchemaError(
                f"`candidates` holds {t.value_type} labels but `action` is {action_type}; "
                "both must use the same action ids"
            )
        cand = pc.cast(cand, pa.list_(action_type))
    return cand


def action_index(logs: BanditLogs, extra: Sequence[pa.Array | pa.ChunkedArray] = ()) -> _ActionIndex:
    """Catalog = sorted unique labels of the logged actions, the candidates and ``extra``."""
    action = _action_column(logs)
    cand = _candidates_column(logs, action.type)
    chunks: list[pa.Array] = list(action.chunks)
    if cand is not None:
        chunks.extend(pc.list_flatten(cand).chunks)
    for arr in extra:
        arr = _decode(arr)
        chunks.extend(arr.chunks if isinstance(arr, pa.ChunkedArray) else [arr])
    everything = pa.chunked_array(chunks, type=action.type)
    uniq = pc.unique(everything)
    uniq = pc.drop_null(uniq)
    catalog = uniq.take(pc.sort_indices(uniq))
    return _ActionIndex(catalog=catalog, logged=_codes(action, catalog), candidates=cand)


@dataclass(frozen=True, eq=False)
class _Candidates:
    """Each row's candidate set as a CSR structure of action codes (in the logged order)."""

    indptr: npt.NDArray[np.int64]  # (n + 1,)
    codes: npt.NDArray[np.int32]  # (nnz,) in the order of the logged lists
    order: npt.NDArray[np.int64]  # permutation putting codes in ascending order within each row

    @property
    def lengths(self) -> npt.NDArray[np.int64]:
        return np.diff(self.indptr)


def candidate_sets(index: _ActionIndex, *, what: str) -> _Candidates:
    """Validated candidate sets (no nulls, no duplicate labels within a row)."""
    cand = index.candidates
    if cand is None:
        raise PolicyError(f"{what} needs the logs' `candidates` column, which is absent.")
    lengths = pc.list_value_length(cand)
    if lengths.null_count:
        bad = np.asarray(pc.is_null(lengths).to_numpy(zero_copy_only=False), dtype=bool)
        raise PolicyError(
            f"{what}: `candidates` is missing (null) in {_rows_text(bad)}. Log the candidate "
            "set of every decision."
        )
    lengths_np = np.asarray(lengths.to_numpy(), dtype=np.int64)
    flat = pc.list_flatten(cand)
    if flat.null_count:
        raise PolicyError(f"{what}: `candidates` contains {flat.null_count:,} null labels; remove them.")
    codes = index.codes(flat)
    indptr = np.zeros(lengths_np.size + 1, dtype=np.int64)
    np.cumsum(lengths_np, out=indptr[1:])
    # sort within rows in C (scipy's per-row sort); the data carry the permutation
    nnz = codes.size
    tmp = sp.csr_array(
        (np.arange(nnz, dtype=np.int64), codes.astype(np.int64), indptr),
        shape=(lengths_np.size, index.n_actions),
    )
    tmp.has_sorted_indices = False
    tmp.sort_indices()
    sorted_codes = tmp.indices
    if nnz > 1:
        rows = _rows_of(indptr)
        dup = np.zeros(lengths_np.size, dtype=bool)
        same = (np.diff(sorted_codes) == 0) & (np.diff(rows) == 0)
        if same.any():
            dup[rows[1:][same]] = True
            raise PolicyError(
                f"{what}: `candidates` lists the same action more than once in {_rows_text(dup)}. "
                "Each candidate set must hold distinct actions."
            )
    return _Candidates(indptr=indptr, codes=codes, order=np.asarray(tmp.data, dtype=np.int64))


def aligned_list(
    logs: BanditLogs, column: str, cand: _Candidates, *, what: str
) -> npt.NDArray[np.float64]:
    """A list<float64> column aligned with ``candidates``, flattened (validated lengths, no nulls)."""
    if column not in logs.table.column_names:
        raise PolicyError(f"{what}: the logs have no column {column!r}.")
    col = logs.table.column(column)
    t = col.type
    if not (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)) or not (
        pa.types.is_floating(t.value_type) or pa.types.is_integer(t.value_type)
    ):
        raise SchemaError(f"{what}: column {column!r} must be a list of floats, got {t}")
    lengths = pc.list_value_length(col)
    lengths_np = np.asarray(pc.fill_null(lengths, -1).to_numpy(), dtype=np.int64)
    bad = lengths_np != cand.lengths
    if bad.any():
        raise PolicyError(
            f"{what}: column {column!r} must have one entry per candidate (aligned with "
            f"`candidates`); its length differs or it is null in {_rows_text(bad)}."
        )
    flat = pc.list_flatten(col)
    if flat.null_count:
        raise PolicyError(f"{what}: column {column!r} holds {flat.null_count:,} null entries.")
    return _to_float64(flat)


# --------------------------------------------------------------------------------------------
# distributions and results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class PolicyDistribution:
    """A policy's distribution over each row's support, stored sparsely.

    Parameters
    ----------
    matrix : scipy.sparse.csr_array of shape (n, K)
        ``matrix[i, j]`` is the probability of action ``actions[j]`` in row ``i``. Rows sum to 1
        (within :data:`PROBABILITY_TOLERANCE`); entries are finite and in ``[0, 1]``. The matrix
        is kept in canonical CSR form (sorted column indices, no duplicates).
    actions : numpy.ndarray of shape (K,)
        The action labels (int64 or str, as in the logs), sorted ascending.

    Notes
    -----
    The stored entries of row ``i`` are the support of :math:`\\pi(\\cdot \\mid x_i)`, so memory is
    proportional to :math:`\\sum_i |\\mathrm{supp}\\,\\pi(\\cdot \\mid x_i)|`, not to
    :math:`nK`. A doubly robust estimator needs
    :math:`\\hat q(x_i, \\pi) = \\sum_a \\pi(a \\mid x_i)\\,\\hat q(x_i, a)`, a sum over the stored
    entries of row ``i``.

    References
    ----------
    .. [1] Dudík, M., Langford, J. and Li, L. (2011). Doubly robust policy evaluation and learning.
       Proceedings of the 28th International Conference on Machine Learning (ICML), 1097-1104.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> m = sp.csr_array(np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]))
    >>> dist = PolicyDistribution(m, np.array(["a", "b", "c"], dtype=object))
    >>> dist.probability(np.array(["b", "c"], dtype=object)).tolist()
    [0.5, 1.0]
    >>> dist.nnz
    3
    """

    matrix: sp.csr_array
    actions: npt.NDArray[Any]

    def __post_init__(self) -> None:
        m = self.matrix
        if not isinstance(m, (sp.csr_array, sp.csr_matrix)) or m.ndim != 2:
            raise PolicyError(
                f"matrix must be a 2-D scipy.sparse.csr_array, got {type(m).__name__}; "
                "convert with scipy.sparse.csr_array(...)."
            )
        actions = np.asarray(self.actions)
        if actions.ndim != 1 or actions.size != m.shape[1]:
            raise PolicyError(
                f"actions must hold one label per matrix column ({m.shape[1]:,}); got shape "
                f"{actions.shape}."
            )
        if isinstance(m, sp.csr_matrix) or m.dtype != np.float64 or not m.has_canonical_format:
            m = sp.csr_array(m, dtype=np.float64, copy=True)
            m.sum_duplicates()
        object.__setattr__(self, "matrix", m)
        object.__setattr__(self, "actions", actions)
        _check_rows(m, what="the distribution")

    @property
    def n(self) -> int:
        """Number of rows."""
        return int(self.matrix.shape[0])

    @property
    def n_actions(self) -> int:
        """Size ``K`` of the action catalog."""
        return int(self.matrix.shape[1])

    @property
    def nnz(self) -> int:
        """Number of stored (row, action) entries: the total support size."""
        return int(self.matrix.nnz)

    def probability(self, action: npt.ArrayLike | pa.Array | pa.ChunkedArray) -> npt.NDArray[np.float64]:
        """``pi(action_i | x_i)`` for one action label per row.

        Parameters
        ----------
        action : array-like or pyarrow array of shape (n,)
            One label per row (e.g. ``logs.table.column("action")``). Labels outside
            ``actions`` have probability 0.

        Returns
        -------
        numpy.ndarray of shape (n,), float64
        """
        catalog = self._catalog()
        if isinstance(action, (pa.Array, pa.ChunkedArray)):
            values = _decode(action)
        else:
            arr = np.asarray(action)
            if arr.ndim != 1:
                raise PolicyError(f"action must be 1-D with one label per row, got shape {arr.shape}.")
            values = pa.array(arr.tolist()) if arr.dtype == object else pa.array(arr)
        if len(values) != self.n:
            raise PolicyError(f"action must have one label per row ({self.n:,}), got {len(values):,}.")
        if values.type != catalog.type and len(catalog):
            try:
                values = pc.cast(values, catalog.type)
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                raise PolicyError(
                    f"action labels ({values.type}) do not match the catalog's type ({catalog.type})."
                ) from None
        return _lookup(self.matrix, _codes(values, catalog))

    def _catalog(self) -> pa.Array:
        if self.actions.dtype == object:
            return pa.array(self.actions.tolist())
        return pa.array(self.actions)

    def reindex(self, actions: npt.ArrayLike) -> PolicyDistribution:
        """The same distribution over another action catalog.

        Parameters
        ----------
        actions : array-like of shape (K2,)
            Distinct labels, of the same type as ``actions``, containing every action that has
            positive probability in some row (e.g. the union of two policies' catalogs).

        Returns
        -------
        PolicyDistribution
            Column ``j`` of the new matrix is ``actions[j]``; probabilities are unchanged.
        """
        target = _as_label_array(actions, self._catalog().type, "reindex actions")
        if pc.count_distinct(target).as_py() != len(target):
            raise PolicyError("reindex actions must be distinct labels.")
        m = self.matrix
        code = _codes(self._catalog(), target).astype(np.int64)[m.indices]
        lost = (code < 0) & (m.data > 0)
        if lost.any():
            labels = self.actions[m.indices[lost]]
            raise PolicyError(
                f"reindex: {int(lost.sum()):,} entries with positive probability have actions "
                f"missing from the new catalog (first {_examples(labels)}); include them."
            )
        keep = code >= 0
        counts = np.bincount(_rows_of(m.indptr)[keep], minlength=m.shape[0])
        indptr = np.zeros(m.shape[0] + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        new = _csr(m.shape[0], len(target), indptr, code[keep], m.data[keep])
        return _trusted_distribution(new, _labels_to_numpy(target))

    def _reindex(self, catalog: pa.Array) -> sp.csr_array:
        """This distribution's matrix over a larger sorted catalog that contains ``actions``."""
        new_code = _codes(self._catalog(), catalog).astype(np.int64)
        m = self.matrix
        return sp.csr_array(
            (m.data, new_code[m.indices], m.indptr), shape=(m.shape[0], len(catalog))
        )


def _lookup(matrix: sp.csr_array, codes: npt.NDArray[np.integer]) -> npt.NDArray[np.float64]:
    """``matrix[i, codes[i]]`` for every row (0 where ``codes[i] < 0``), in C via scipy."""
    n = matrix.shape[0]
    out = np.zeros(n, dtype=np.float64)
    ok = codes >= 0
    if ok.all():
        out[:] = matrix[np.arange(n), codes.astype(np.int64)]
    elif ok.any():
        rows = np.flatnonzero(ok)
        out[rows] = matrix[rows, codes[rows].astype(np.int64)]
    return out


def _tolerance(logs: BanditLogs, *columns: str) -> float:
    """:data:`PROBABILITY_TOLERANCE`, widened for columns the source stored in float16/float32.

    Comparing two stored probabilities (or a row sum with 1) can be off by the storage
    rounding of both sides: at most ``u`` of each value, ``u = 2**-11`` for float16.
    """
    u = getattr(logs, "unit_roundoff", None) or {}
    return max(PROBABILITY_TOLERANCE, 2.0 * sum(float(u.get(c, 0.0)) for c in columns))


def _check_rows(m: sp.csr_array, *, what: str, tol: float = PROBABILITY_TOLERANCE) -> None:
    """Entries finite in [0, 1] and every row summing to 1 (within ``tol``)."""
    data = m.data
    bad_entry = ~((data >= 0.0) & (data <= 1.0))  # NaN fails both comparisons
    if bad_entry.any():
        rows = _rows_of(m.indptr)[bad_entry]
        raise PolicyError(
            f"{what}: probabilities must be finite and in [0, 1]; {int(bad_entry.sum()):,} entries "
            f"are not (first values {_examples(data[bad_entry])} in rows {_examples(rows)})."
        )
    sums = np.asarray(m.sum(axis=1), dtype=np.float64).ravel()
    bad = np.abs(sums - 1.0) > tol
    if bad.any():
        raise PolicyError(
            f"{what}: each row's probabilities must sum to 1 (within {tol:g}); "
            f"{_rows_text(bad)} do not (sums {_examples(np.round(sums[bad], 6))}). Renormalize each "
            "row, and make sure no action with positive probability was left out."
        )


@dataclass(frozen=True, eq=False)
class TargetPropensities:
    """Target propensities of ``P`` candidate policies on ``n`` logged rows.

    Attributes
    ----------
    names : list of str
        The policy names, in column order.
    values : numpy.ndarray of shape (n, P), float64
        ``values[i, p] = pi_p(a_i | x_i)``: candidate ``p``'s probability of the logged action.
    distributions : dict of str to PolicyDistribution, or None
        Each policy's full (sparse) distribution; present only when requested with
        ``with_distributions=True``.
    table_rows_ignored : int
        Rows of a policy table that were ignored because their events were dropped from the
        logs as invalid (``read_logs(..., on_invalid="drop")``); 0 otherwise.

    Examples
    --------
    >>> import numpy as np
    >>> tp = TargetPropensities(["a", "b"], np.array([[0.5, 1.0], [0.25, 0.0]]))
    >>> tp["b"].tolist()
    [1.0, 0.0]
    """

    names: list[str]
    values: npt.NDArray[np.float64]
    distributions: dict[str, PolicyDistribution] | None = field(default=None)
    table_rows_ignored: int = 0

    def __post_init__(self) -> None:
        values = np.asarray(self.values, dtype=np.float64)
        if values.ndim != 2 or values.shape[1] != len(self.names):
            raise PolicyError(
                f"values must have shape (n, {len(self.names)}) for names {self.names}, got "
                f"{values.shape}."
            )
        object.__setattr__(self, "names", list(self.names))
        object.__setattr__(self, "values", values)

    @property
    def n(self) -> int:
        """Number of rows."""
        return int(self.values.shape[0])

    def __getitem__(self, name: str) -> npt.NDArray[np.float64]:
        """The column of one policy: ``pi_name(a_i | x_i)`` for every row."""
        try:
            j = self.names.index(name)
        except ValueError:
            raise KeyError(f"no policy {name!r}; available: {', '.join(self.names)}") from None
        return self.values[:, j]

    def __repr__(self) -> str:
        dists = "" if self.distributions is None else ", with distributions"
        ignored = f", table_rows_ignored={self.table_rows_ignored:,}" if self.table_rows_ignored else ""
        return f"TargetPropensities(n={self.n:,}, names={self.names}{dists}{ignored})"


# --------------------------------------------------------------------------------------------
# policy objects
# --------------------------------------------------------------------------------------------


@runtime_checkable
class Policy(Protocol):
    """What a policy object provides: its distribution on logs, and its logged-action probability.

    Both methods are vectorized over rows. ``propensity(logs)`` equals
    ``distribution(logs).probability(logs.column("action"))`` but may be cheaper.
    """

    def distribution(self, logs: BanditLogs) -> PolicyDistribution: ...

    def propensity(self, logs: BanditLogs) -> npt.NDArray[np.float64]: ...


class _PolicyBase(ABC):
    """Shared ``distribution``/``propensity`` of the policy classes; each supplies one step."""

    def propensity(self, logs: BanditLogs) -> npt.NDArray[np.float64]:
        """``pi(a_i | x_i)`` for the logged actions, shape (n,)."""
        index = action_index(logs, self._extra_labels(logs))
        dist = self._distribution(logs, index)
        return _lookup(dist.matrix, index.logged)

    def distribution(self, logs: BanditLogs) -> PolicyDistribution:
        """The distribution over each row's support."""
        return self._distribution(logs, action_index(logs, self._extra_labels(logs)))

    def _extra_labels(self, logs: BanditLogs) -> list[pa.Array]:
        """Action labels the policy may choose beyond the logged actions and candidates."""
        return []

    @abstractmethod
    def _distribution(self, logs: BanditLogs, index: _ActionIndex) -> PolicyDistribution:
        """The distribution, with the logs' actions already encoded in ``index``."""


def _is_policy(obj: Any) -> bool:
    """Duck-typed check for the :class:`Policy` protocol (both methods callable)."""
    return callable(getattr(obj, "distribution", None)) and callable(getattr(obj, "propensity", None))


def _validate_actions(actions: Any, *, owner: str) -> tuple[Any, ...] | None:
    if actions is None:
        return None
    if isinstance(actions, (str, bytes)):
        raise PolicyError(f"{owner}: actions must be a list of action labels, got the string {actions!r}.")
    flat = np.asarray(actions, dtype=object).ravel()
    values = tuple(v.item() if isinstance(v, np.generic) else v for v in flat)
    if not values:
        raise PolicyError(f"{owner}: actions must not be empty.")
    if len(set(values)) != len(values):
        raise PolicyError(f"{owner}: actions must be distinct; got {_examples(list(values))}.")
    return values


def _validate_feature_columns(feature_columns: Any, *, owner: str) -> tuple[str, ...]:
    if isinstance(feature_columns, str):
        feature_columns = [feature_columns]
    cols = tuple(feature_columns)
    if not cols or not all(isinstance(c, str) for c in cols):
        raise PolicyError(f"{owner}: feature_columns must be a non-empty list of column names.")
    return cols


def _context_matrix(
    logs: BanditLogs, feature_columns: Sequence[str], *, owner: str
) -> npt.NDArray[np.float64]:
    """The context matrix (n, d) float64 from numeric columns and fixed-length numeric lists."""
    names = logs.table.column_names
    missing = [c for c in feature_columns if c not in names]
    if missing:
        raise SchemaError(
            f"{owner}: feature columns {missing} are not in the logs; available: {', '.join(names)}."
        )
    n = logs.n
    blocks: list[npt.NDArray[np.float64]] = []
    for name in feature_columns:
        col = _decode(logs.table.column(name))
        t = col.type
        if col.null_count:
            bad = np.asarray(pc.is_null(col).to_numpy(), dtype=bool)
            raise PolicyError(f"{owner}: feature column {name!r} is missing (null) in {_rows_text(bad)}.")
        if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
            blocks.append(np.asarray(col.to_numpy(), dtype=np.float64).reshape(n, 1))
        elif (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)) and (
            pa.types.is_integer(t.value_type) or pa.types.is_floating(t.value_type)
        ):
            lengths = np.asarray(pc.list_value_length(col).to_numpy(), dtype=np.int64)
            if n and (lengths != lengths[0]).any():
                raise PolicyError(
                    f"{owner}: list feature column {name!r} must have the same length in every row; "
                    f"lengths range from {lengths.min()} to {lengths.max()}."
                )
            flat = pc.list_flatten(col)
            if flat.null_count:
                raise PolicyError(f"{owner}: feature column {name!r} holds {flat.null_count:,} nulls.")
            width = int(lengths[0]) if n else 0
            blocks.append(_to_float64(flat).reshape(n, width))
        else:
            raise SchemaError(f"{owner}: feature column {name!r} must be numeric or a numeric list, got {t}.")
    X = np.hstack(blocks) if len(blocks) > 1 else blocks[0]
    bad = ~np.isfinite(X).all(axis=1)
    if bad.any():
        raise PolicyError(f"{owner}: features are NaN or infinite in {_rows_text(bad)}.")
    return np.ascontiguousarray(X, dtype=np.float64)


def _csr(
    n: int,
    K: int,
    indptr: npt.NDArray[np.int64],
    codes: npt.NDArray[np.integer],
    probs: npt.NDArray[np.float64],
) -> sp.csr_array:
    """A canonical CSR from per-row entries (codes distinct within rows, any order)."""
    # copy indptr: eliminate_zeros below edits it in place, and callers share theirs
    m = sp.csr_array((probs, codes.astype(np.int64, copy=False), indptr.copy()), shape=(n, K))
    m.has_sorted_indices = False
    m.sort_indices()
    m.eliminate_zeros()
    return m


@dataclass(frozen=True)
class UniformPolicy(_PolicyBase):
    """The uniform policy over each row's candidate set.

    Parameters
    ----------
    actions : sequence of labels, optional
        The action set used when the logs have no ``candidates`` column. When the logs have
        ``candidates``, each row's candidate set is used and ``actions`` is ignored.

    Notes
    -----
    With candidate set :math:`C_i` in row ``i``,

    .. math:: \\pi(a \\mid x_i) = \\frac{\\mathbb 1[a \\in C_i]}{|C_i|}.

    Without candidates, :math:`C_i` is ``actions`` for every row; the distribution then stores
    ``n * len(actions)`` entries, so keep that list small (``propensity`` needs only one number
    per row whatever its size).

    References
    ----------
    .. [1] Li, L., Chu, W., Langford, J. and Schapire, R. E. (2010). A contextual-bandit approach
       to personalized news article recommendation. Proceedings of the 19th International
       Conference on World Wide Web (WWW), 661-670.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from ope.logs import BanditLogs, ValidationReport
    >>> t = pa.table({"action": [1, 2], "propensity": [0.5, 0.5], "reward": [1.0, 0.0],
    ...               "candidates": [[1, 2], [2, 3, 4, 5]]})
    >>> logs = BanditLogs(t, ValidationReport(source="<doc>", rows_read=2, rows_used=2))
    >>> UniformPolicy().propensity(logs).tolist()
    [0.5, 0.25]
    """

    _: KW_ONLY
    actions: Sequence[Any] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "actions", _validate_actions(self.actions, owner="UniformPolicy"))

    def _extra_labels(self, logs: BanditLogs) -> list[pa.Array]:
        if self.actions is None or "candidates" in logs.table.column_names:
            return []
        return [_as_label_array(self.actions, _action_column(logs).type, "UniformPolicy actions")]

    def _no_support(self) -> PolicyError:
        return PolicyError(
            "UniformPolicy needs a support: the logs have no `candidates` column, so pass "
            "UniformPolicy(actions=[...]) with the action set."
        )

    def propensity(self, logs: BanditLogs) -> npt.NDArray[np.float64]:
        """``pi(a_i | x_i)`` for the logged actions, without building the distribution."""
        if "candidates" in logs.table.column_names:
            return super().propensity(logs)
        if self.actions is None:
            raise self._no_support()
        action = _action_column(logs)
        labels = _as_label_array(self.actions, action.type, "UniformPolicy actions")
        inside = _codes(action, labels) >= 0
        return np.where(inside, 1.0 / len(labels), 0.0)

    def _distribution(self, logs: BanditLogs, index: _ActionIndex) -> PolicyDistribution:
        n = logs.n
        if index.candidates is not None:
            cand = candidate_sets(index, what="UniformPolicy")
            lengths = cand.lengths
            empty = lengths == 0
            if empty.any():
                raise PolicyError(f"UniformPolicy: the candidate set is empty in {_rows_text(empty)}.")
            probs = np.repeat(1.0 / lengths, lengths)
            m = _csr(n, index.n_actions, cand.indptr, cand.codes, probs)
            return PolicyDistribution(m, index.actions)
        if self.actions is None:
            raise self._no_support()
        codes = np.sort(index.codes(_as_label_array(self.actions, index.catalog.type, "actions")))
        k = codes.size
        indptr = np.arange(0, (n + 1) * k, k, dtype=np.int64)
        m = sp.csr_array(
            (np.full(n * k, 1.0 / k), np.tile(codes.astype(np.int64), n), indptr),
            shape=(n, index.n_actions),
        )
        return PolicyDistribution(m, index.actions)


@dataclass(frozen=True)
class EpsilonGreedyPolicy:
    """A base policy mixed with the uniform policy over the same support.

    Parameters
    ----------
    base : Policy
        The greedy part, e.g. a :class:`DeterministicPolicy`.
    epsilon : float
        Exploration rate in ``[0, 1]``.
    actions : sequence of labels, optional
        The support of the uniform part when the logs have no ``candidates``; defaults to the
        base policy's ``actions`` when it has one.

    Notes
    -----
    .. math:: \\pi(a \\mid x) = (1 - \\varepsilon)\\, \\pi_{\\mathrm{base}}(a \\mid x)
              + \\varepsilon\\, \\pi_{\\mathrm{unif}}(a \\mid x),

    where :math:`\\pi_{\\mathrm{unif}}` is :class:`UniformPolicy` over the row's candidate set
    (or over ``actions``).

    References
    ----------
    .. [1] Sutton, R. S. and Barto, A. G. (2018). Reinforcement Learning: An Introduction,
       2nd edition, Section 2.2. MIT Press.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from ope.logs import BanditLogs, ValidationReport
    >>> t = pa.table({"action": [1, 2], "propensity": [0.5, 0.5], "reward": [1.0, 0.0],
    ...               "candidates": [[1, 2], [1, 2]], "scores": [[0.9, 0.1], [0.9, 0.1]]})
    >>> logs = BanditLogs(t, ValidationReport(source="<doc>", rows_read=2, rows_used=2))
    >>> pol = EpsilonGreedyPolicy(DeterministicPolicy("scores"), 0.2)
    >>> pol.propensity(logs).tolist()
    [0.9, 0.1]
    """

    base: Policy
    epsilon: float
    _: KW_ONLY
    actions: Sequence[Any] | None = None

    def __post_init__(self) -> None:
        if not _is_policy(self.base):
            raise PolicyError(
                f"EpsilonGreedyPolicy: base must be a policy object with distribution(logs) and "
                f"propensity(logs) methods, got {type(self.base).__name__}."
            )
        eps = self.epsilon
        if isinstance(eps, bool) or not isinstance(eps, (int, float, np.integer, np.floating)) or not (
            0.0 <= float(eps) <= 1.0
        ):
            raise PolicyError(f"EpsilonGreedyPolicy: epsilon must be a number in [0, 1], got {eps!r}.")
        object.__setattr__(self, "epsilon", float(eps))
        object.__setattr__(self, "actions", _validate_actions(self.actions, owner="EpsilonGreedyPolicy"))

    def _uniform(self) -> UniformPolicy:
        actions = self.actions if self.actions is not None else getattr(self.base, "actions", None)
        return UniformPolicy(actions=actions)

    def propensity(self, logs: BanditLogs) -> npt.NDArray[np.float64]:
        """``(1 - epsilon) * base.propensity(logs) + epsilon * uniform.propensity(logs)``."""
        base = np.asarray(self.base.propensity(logs), dtype=np.float64)
        if self.epsilon == 0.0:
            return base
        return (1.0 - self.epsilon) * base + self.epsilon * self._uniform().propensity(logs)

    def distribution(self, logs: BanditLogs) -> PolicyDistribution:
        """The mixture, over the union of the two parts' action catalogs."""
        base = self.base.distribution(logs)
        if self.epsilon == 0.0:
            return base
        unif = self._uniform().distribution(logs)
        labels = [pa.array(d.actions.tolist()) for d in (base, unif)]
        catalog = pc.unique(pa.chunked_array(labels))
        catalog = catalog.take(pc.sort_indices(catalog))
        m = (1.0 - self.epsilon) * base._reindex(catalog) + self.epsilon * unif._reindex(catalog)
        m = sp.csr_array(m)
        m.sum_duplicates()
        m.eliminate_zeros()
        return PolicyDistribution(m, _labels_to_numpy(catalog))


class _ScorePolicy(_PolicyBase):
    """Shared machinery of policies defined by per-candidate scores."""

    scores: str | Callable[[npt.NDArray[np.float64]], npt.ArrayLike]
    actions: Sequence[Any] | None
    feature_columns: Sequence[str] | None

    def _validate_scores(self, owner: str) -> None:
        if isinstance(self.scores, str):
            if self.actions is not None or self.feature_columns is not None:
                raise PolicyError(
                    f"{owner}: scores={self.scores!r} names a list column aligned with `candidates`; "
                    "actions= and feature_columns= are only used with a callable scores."
                )
            return
        if not callable(self.scores):
            raise PolicyError(
                f"{owner}: scores must be the name of a list<float64> column aligned with "
                f"`candidates` or a callable, got {type(self.scores).__name__}."
            )
        if self.actions is None or self.feature_columns is None:
            raise PolicyError(
                f"{owner}: a callable scores needs actions=[...] (the labels of its K output "
                "columns) and feature_columns=[...] (the columns of its input matrix)."
            )
        object.__setattr__(self, "actions", _validate_actions(self.actions, owner=owner))
        object.__setattr__(
            self, "feature_columns", _validate_feature_columns(self.feature_columns, owner=owner)
        )

    def _extra_labels(self, logs: BanditLogs) -> list[pa.Array]:
        if isinstance(self.scores, str):
            return []
        return [_as_label_array(self.actions, _action_column(logs).type, f"{type(self).__name__} actions")]

    def _segments(
        self, logs: BanditLogs, index: _ActionIndex
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32], npt.NDArray[np.float64]]:
        """Per-row (indptr, codes, scores) over each row's support; -inf marks excluded actions."""
        owner = type(self).__name__
        n = logs.n
        if isinstance(self.scores, str):
            cand = candidate_sets(index, what=f"{owner}(scores={self.scores!r})")
            scores = aligned_list(logs, self.scores, cand, what=owner)
            indptr, codes = cand.indptr, cand.codes
        else:
            labels = _as_label_array(self.actions, index.catalog.type, f"{owner} actions")
            action_codes = index.codes(labels)
            k = action_codes.size
            X = _context_matrix(logs, self.feature_columns, owner=owner)
            S = np.asarray(self.scores(X), dtype=np.float64)
            if S.shape != (n, k):
                raise PolicyError(
                    f"{owner}: scores(X) must return an array of shape (n, len(actions)) = "
                    f"({n}, {k}); got {S.shape}."
                )
            if index.candidates is not None:
                # restrict to each row's candidates: a dense (n, K) mask, K = len(actions) is small
                cand = candidate_sets(index, what=owner)
                member = sp.csr_array(
                    (np.ones(cand.codes.size, dtype=bool), cand.codes.astype(np.int64), cand.indptr),
                    shape=(n, index.n_actions),
                )
                mask = member[:, action_codes.astype(np.int64)].toarray()
                S = np.where(mask, S, -np.inf)
            indptr = np.arange(0, (n + 1) * k, k, dtype=np.int64)
            codes = np.tile(action_codes, n)
            scores = S.ravel()
        bad = np.isnan(scores) | (scores == np.inf)
        if bad.any():
            rows = np.zeros(n, dtype=bool)
            rows[_rows_of(indptr)[bad]] = True
            raise PolicyError(f"{owner}: scores are NaN or +inf in {_rows_text(rows)}.")
        lengths = np.diff(indptr)
        empty = lengths == 0
        if empty.any():
            raise PolicyError(
                f"{owner}: no action to choose from (empty candidate set) in {_rows_text(empty)}."
            )
        row_max = np.maximum.reduceat(scores, indptr[:-1]) if n else np.zeros(0)
        none = row_max == -np.inf
        if none.any():
            raise PolicyError(
                f"{owner}: every score is -inf (or no listed action is a candidate) in {_rows_text(none)}."
            )
        return indptr, codes, scores


@dataclass(frozen=True)
class DeterministicPolicy(_ScorePolicy):
    """Choose the highest-scoring action of each row.

    Parameters
    ----------
    scores : str or callable
        Either the name of a ``list<float64>`` column aligned with ``candidates`` (one score per
        candidate), or a callable mapping the context matrix ``X`` of shape (n, d) to scores of
        shape (n, K) for the fixed ``actions`` list. The callable form builds a dense (n, K)
        array, so it is for small K; for large catalogs log per-candidate scores instead.
    actions : sequence of labels, optional
        The K action labels of the callable's output columns (callable form only).
    feature_columns : sequence of str, optional
        The columns stacked into ``X`` (numeric columns, or fixed-length numeric list columns),
        in order (callable form only).

    Notes
    -----
    .. math:: \\pi(a \\mid x_i) = \\mathbb 1\\big[a = \\operatorname{argmax}_{b \\in C_i} s(x_i, b)\\big].

    Ties go to the first maximal action in the row's order: the first candidate in the logged
    ``candidates`` list, or the first of ``actions`` for a callable (as ``numpy.argmax``). With a
    callable and logs that have ``candidates``, actions outside a row's candidate set are
    excluded. A score of ``-inf`` excludes an action; NaN or ``+inf`` scores are errors.

    References
    ----------
    .. [1] Dudík, M., Langford, J. and Li, L. (2011). Doubly robust policy evaluation and learning.
       Proceedings of the 28th International Conference on Machine Learning (ICML), 1097-1104.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from ope.logs import BanditLogs, ValidationReport
    >>> t = pa.table({"action": ["x", "y"], "propensity": [0.5, 0.5], "reward": [1.0, 0.0],
    ...               "candidates": [["x", "y"], ["x", "y"]], "s": [[2.0, 1.0], [3.0, 3.0]]})
    >>> logs = BanditLogs(t, ValidationReport(source="<doc>", rows_read=2, rows_used=2))
    >>> DeterministicPolicy("s").propensity(logs).tolist()   # row 2 is a tie: "x" wins
    [1.0, 0.0]
    """

    scores: str | Callable[[npt.NDArray[np.float64]], npt.ArrayLike]
    _: KW_ONLY
    actions: Sequence[Any] | None = None
    feature_columns: Sequence[str] | None = None

    def __post_init__(self) -> None:
        self._validate_scores("DeterministicPolicy")

    def _distribution(self, logs: BanditLogs, index: _ActionIndex) -> PolicyDistribution:
        n = logs.n
        indptr, codes, scores = self._segments(logs, index)
        row_max = np.maximum.reduceat(scores, indptr[:-1]) if n else np.zeros(0)
        rows = _rows_of(indptr)
        pos = np.flatnonzero(scores == row_max[rows])
        first = pos[np.r_[True, rows[pos[1:]] != rows[pos[:-1]]]] if pos.size else pos
        m = sp.csr_array(
            (np.ones(n), codes[first].astype(np.int64), np.arange(n + 1, dtype=np.int64)),
            shape=(n, index.n_actions),
        )
        return PolicyDistribution(m, index.actions)


@dataclass(frozen=True)
class SoftmaxPolicy(_ScorePolicy):
    """Softmax (Boltzmann) policy over each row's scores.

    Parameters
    ----------
    scores : str or callable
        As for :class:`DeterministicPolicy`.
    temperature : float, default 1.0
        Positive and finite. Small values approach the argmax policy, large ones the uniform.
    actions, feature_columns
        As for :class:`DeterministicPolicy` (callable form only).

    Notes
    -----
    .. math:: \\pi(a \\mid x_i) = \\frac{\\exp\\big((s(x_i, a) - m_i)/\\tau\\big)}
              {\\sum_{b \\in C_i} \\exp\\big((s(x_i, b) - m_i)/\\tau\\big)},
              \\qquad m_i = \\max_{b \\in C_i} s(x_i, b).

    Subtracting the row maximum :math:`m_i` leaves the value unchanged and keeps every exponent
    :math:`\\le 0`, so nothing overflows and the denominator is at least 1 [2]_. A score of
    ``-inf`` gives probability 0; entries that underflow to 0 are not stored.

    References
    ----------
    .. [1] Sutton, R. S. and Barto, A. G. (2018). Reinforcement Learning: An Introduction,
       2nd edition, Section 2.8. MIT Press.
    .. [2] Blanchard, P., Higham, D. J. and Higham, N. J. (2021). Accurately computing the
       log-sum-exp and softmax functions. IMA Journal of Numerical Analysis, 41(4), 2311-2330.

    Examples
    --------
    >>> import numpy as np, pyarrow as pa
    >>> from ope.logs import BanditLogs, ValidationReport
    >>> t = pa.table({"action": [1], "propensity": [0.5], "reward": [1.0],
    ...               "candidates": [[1, 2]], "s": [[np.log(3.0), 0.0]]})
    >>> logs = BanditLogs(t, ValidationReport(source="<doc>", rows_read=1, rows_used=1))
    >>> SoftmaxPolicy("s", temperature=1.0).propensity(logs).round(6).tolist()
    [0.75]
    """

    scores: str | Callable[[npt.NDArray[np.float64]], npt.ArrayLike]
    temperature: float = 1.0
    _: KW_ONLY
    actions: Sequence[Any] | None = None
    feature_columns: Sequence[str] | None = None

    def __post_init__(self) -> None:
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, (int, float, np.integer, np.floating)) or not (
            math.isfinite(float(t)) and float(t) > 0.0
        ):
            raise PolicyError(f"SoftmaxPolicy: temperature must be a finite number > 0, got {t!r}.")
        object.__setattr__(self, "temperature", float(t))
        self._validate_scores("SoftmaxPolicy")

    def _distribution(self, logs: BanditLogs, index: _ActionIndex) -> PolicyDistribution:
        n = logs.n
        indptr, codes, scores = self._segments(logs, index)
        starts = indptr[:-1]
        rows = _rows_of(indptr)
        row_max = np.maximum.reduceat(scores, starts) if n else np.zeros(0)
        e = np.exp((scores - row_max[rows]) / self.temperature)
        total = np.add.reduceat(e, starts) if n else np.zeros(0)
        probs = e / total[rows]
        m = _csr(n, index.n_actions, indptr, codes, probs)
        return PolicyDistribution(m, index.actions)


@dataclass(frozen=True, eq=False)
class ClassifierPolicy(_PolicyBase):
    """A fitted scikit-learn classifier's ``predict_proba`` as a policy.

    Parameters
    ----------
    estimator : fitted classifier
        Any object with ``predict_proba(X)`` and ``classes_`` (the action labels of its output
        columns), e.g. ``sklearn.linear_model.LogisticRegression`` fitted on (context, action).
    feature_columns : sequence of str
        The columns stacked, in order, into the matrix ``X`` passed to ``predict_proba``
        (numeric columns, or fixed-length numeric list columns).

    Notes
    -----
    .. math:: \\pi(a \\mid x_i) = \\hat P(A = a \\mid X = x_i) \\text{ for } a \\in
              \\texttt{classes\\_}, \\qquad 0 \\text{ otherwise.}

    The row's ``candidates`` are not used: the classifier's probabilities are taken as they are.
    ``predict_proba`` returns a dense (n, len(classes_)) array, so this is for a modest number
    of classes.

    References
    ----------
    .. [1] Dudík, M., Langford, J. and Li, L. (2011). Doubly robust policy evaluation and learning.
       Proceedings of the 28th International Conference on Machine Learning (ICML), 1097-1104.

    Examples
    --------
    >>> import numpy as np, pyarrow as pa
    >>> from sklearn.linear_model import LogisticRegression
    >>> from ope.logs import BanditLogs, ValidationReport
    >>> x = np.array([0.0, 0.1, 0.9, 1.0])
    >>> clf = LogisticRegression().fit(x.reshape(-1, 1), [1, 1, 2, 2])
    >>> t = pa.table({"action": [1, 1, 2, 2], "propensity": [0.5] * 4, "reward": [1.0] * 4, "x": x})
    >>> logs = BanditLogs(t, ValidationReport(source="<doc>", rows_read=4, rows_used=4))
    >>> p = ClassifierPolicy(clf, ["x"]).propensity(logs)
    >>> bool(np.allclose(p, clf.predict_proba(x.reshape(-1, 1))[[0, 1, 2, 3], [0, 0, 1, 1]]))
    True
    """

    estimator: Any
    feature_columns: Sequence[str]

    def __post_init__(self) -> None:
        if not callable(getattr(self.estimator, "predict_proba", None)):
            raise PolicyError(
                f"ClassifierPolicy: estimator must have a predict_proba method, got "
                f"{type(self.estimator).__name__}."
            )
        object.__setattr__(
            self,
            "feature_columns",
            _validate_feature_columns(self.feature_columns, owner="ClassifierPolicy"),
        )

    def _classes(self) -> npt.NDArray[Any]:
        classes = getattr(self.estimator, "classes_", None)
        if classes is None:
            raise PolicyError(
                f"ClassifierPolicy: {type(self.estimator).__name__} is not fitted (it has no "
                "classes_); call fit(X, action) first."
            )
        return np.asarray(classes)

    def _extra_labels(self, logs: BanditLogs) -> list[pa.Array]:
        return [_as_label_array(self._classes(), _action_column(logs).type, "ClassifierPolicy classes_")]

    def _distribution(self, logs: BanditLogs, index: _ActionIndex) -> PolicyDistribution:
        n = logs.n
        classes = self._classes()
        codes = index.codes(_as_label_array(classes, index.catalog.type, "ClassifierPolicy classes_"))
        X = _context_matrix(logs, self.feature_columns, owner="ClassifierPolicy")
        proba = np.asarray(self.estimator.predict_proba(X), dtype=np.float64)
        k = codes.size
        if proba.shape != (n, k):
            raise PolicyError(
                f"ClassifierPolicy: predict_proba returned shape {proba.shape}; expected "
                f"(n, len(classes_)) = ({n}, {k})."
            )
        order = np.argsort(codes, kind="stable")
        indptr = np.arange(0, (n + 1) * k, k, dtype=np.int64)
        m = sp.csr_array(
            (proba[:, order].ravel(), np.tile(codes[order].astype(np.int64), n), indptr),
            shape=(n, index.n_actions),
        )
        m.eliminate_zeros()
        return PolicyDistribution(m, index.actions)


# --------------------------------------------------------------------------------------------
# policy tables
# --------------------------------------------------------------------------------------------


def _canonical_policy_table(
    table: Any, *, source: str, mapping: Mapping[str, str] | None = None
) -> pa.Table:
    """The four columns of a long-format policy table with checked types."""
    if _is_dataframe(table):
        table = pa.Table.from_pandas(table, preserve_index=False)
    elif isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    if not isinstance(table, pa.Table):
        raise PolicyError(
            f"a policy table must be a pandas DataFrame, a pyarrow Table or a path, got "
            f"{type(table).__name__}."
        )
    if mapping:
        rename = {theirs: ours for ours, theirs in mapping.items()}
        table = table.rename_columns([rename.get(c, c) for c in table.column_names])
    missing = [c for c in _POLICY_TABLE_COLUMNS if c not in table.column_names]
    if missing:
        raise SchemaError(
            f"policy table {source}: missing columns {missing}; it needs {list(_POLICY_TABLE_COLUMNS)} "
            f"and has {table.column_names}. Rename yours with mapping={{'event_id': ...}}."
        )
    cols = {c: _decode(table.column(c)) for c in ("event_id", "action", "probability")}
    problems = []
    for c in ("event_id", "action"):
        t = cols[c].type
        if pa.types.is_floating(t) or pa.types.is_decimal(t):
            # ids that pandas turned into floats (a merge, a NaN once present): whole numbers only
            whole, problem = _whole_ids(cols[c], c)
            if problem is None:
                cols[c] = whole
            else:
                problems.append(problem)
        elif pa.types.is_string_view(t):
            cols[c] = pc.cast(cols[c], pa.string())
        elif not _is_label_type(t):
            problems.append(f"`{c}` must be int64 or string, got {t}")
    # policy names: a string column, kept dictionary-encoded when it is (the join uses the codes)
    policy = table.column("policy")
    if pa.types.is_dictionary(policy.type) and not _is_label_type(policy.type.value_type):
        policy = _decode(policy)
    if pa.types.is_integer(policy.type) or (
        pa.types.is_dictionary(policy.type) and pa.types.is_integer(policy.type.value_type)
    ):
        policy = pc.cast(_decode(policy), pa.string())
    elif not (_is_label_type(policy.type) or pa.types.is_dictionary(policy.type)):
        problems.append(f"`policy` must be string, got {policy.type}")
    cols["policy"] = policy
    pt = cols["probability"].type
    if pa.types.is_integer(pt) or pa.types.is_floating(pt) or pa.types.is_decimal(pt):
        if pt != pa.float64():
            cols["probability"] = pc.cast(cols["probability"], pa.float64())
    else:
        problems.append(f"`probability` must be float64, got {pt}")
    if problems:
        raise SchemaError(f"policy table {source}: " + "; ".join(problems) + ".")
    return pa.table({c: cols[c] for c in _POLICY_TABLE_COLUMNS})


def _whole_ids(col: pa.ChunkedArray | pa.Array, name: str) -> tuple[Any, str | None]:
    """A float or decimal id column as int64 when every value is a whole number, else a problem."""
    x = np.asarray(pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
    with np.errstate(invalid="ignore"):
        ok = np.isnan(x) | (np.isfinite(x) & (np.floor(x) == x) & (np.abs(x) < 2.0**63))
    if not ok.all():
        first = int(np.flatnonzero(~ok)[0])
        return None, (
            f"`{name}` is {col.type} and holds {int((~ok).sum()):,} values that are not whole "
            f"numbers (first at row {first}: {float(x[first])!r}); ids must be int64 or string"
        )
    if pa.types.is_decimal(col.type):
        try:
            return pc.cast(col, pa.int64()), None
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
    if np.abs(x[~np.isnan(x)]).max(initial=0.0) > 2.0**53:
        return None, (
            f"`{name}` is {col.type} with values beyond 2**53, where floats no longer hold every "
            "integer; write the ids as int64 or string"
        )
    return pc.cast(col, pa.int64(), safe=False), None


def read_policy_table(path: str | os.PathLike[str], *, mapping: Mapping[str, str] | None = None) -> pa.Table:
    """Read a long-format policy table from parquet or CSV.

    Parameters
    ----------
    path : str or path-like
        A ``.csv`` file, or a parquet file or directory of parquet files.
    mapping : dict, optional
        ``{"our_name": "their_name"}`` for columns named differently in the file.

    Returns
    -------
    pyarrow.Table
        Columns ``event_id`` (int64 or string), ``policy`` (string), ``action`` (int64 or
        string) and ``probability`` (float64). A CSV's ids are read as strings, exactly as
        written (``"007"`` stays ``"007"``), and converted to the logs' id type at the join.
        Rows are not validated against any logs here; :func:`target_propensities` does that
        when it joins the table.

    Notes
    -----
    One row per (event, policy, action) with :math:`\\pi_{\\text{policy}}(\\text{action} \\mid
    x_{\\text{event}}) > 0`; for each (event, policy) the probabilities sum to 1.

    References
    ----------
    .. [1] Saito, Y., Aihara, S., Matsutani, M. and Narita, Y. (2021). Open Bandit Dataset and
       Pipeline: Towards Realistic and Reproducible Off-Policy Evaluation. NeurIPS Datasets and
       Benchmarks Track.

    Examples
    --------
    >>> import tempfile, pathlib, pyarrow as pa
    >>> t = pa.table({"event_id": [1, 1], "policy": ["new", "new"], "action": [3, 4],
    ...               "probability": [0.5, 0.5]})
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "policy.parquet"
    >>> write_policy_table(t, path)
    >>> read_policy_table(path).num_rows
    2
    """
    p = Path(path)
    source = str(p)
    if not p.exists():
        raise DataFileError(f"policy table {source} does not exist.")
    mapping = dict(mapping or {})
    try:
        if p.is_file() and p.suffix.lower() == ".csv" or p.name.lower().endswith(".csv.gz"):
            import pyarrow.csv as pacsv

            # ids are read as written ("007" stays "007", not 7) and converted to the logs' id
            # type at the join; the probability column is numbers
            types = {mapping.get(c, c): pa.string() for c in ("event_id", "policy", "action")}
            types[mapping.get("probability", "probability")] = pa.float64()
            options = pacsv.ConvertOptions(column_types=types)
            table = pacsv.read_csv(p, convert_options=options)
        else:
            import pyarrow.parquet as pq

            table = pq.read_table(p)
    except (pa.ArrowInvalid, OSError) as exc:
        raise DataFileError(f"policy table {source} could not be read: {exc}") from None
    if table.num_rows == 0:
        raise DataFileError(f"policy table {source} has no rows.")
    return _canonical_policy_table(table, source=source, mapping=mapping)


def write_policy_table(table: Any, path: str | os.PathLike[str]) -> None:
    """Write a long-format policy table to parquet (``.parquet``) or CSV (``.csv``).

    Parameters
    ----------
    table : pyarrow.Table or pandas.DataFrame
        Columns ``event_id, policy, action, probability``, e.g. from :func:`to_policy_table`.
    path : str or path-like
        Destination; the suffix chooses the format.

    Notes
    -----
    The table is written as it is (after checking its columns and types), so that
    ``ope evaluate LOGS --policies FILE`` can score it; its probabilities are validated against
    the logs when it is joined.

    References
    ----------
    .. [1] Saito, Y., Aihara, S., Matsutani, M. and Narita, Y. (2021). Open Bandit Dataset and
       Pipeline: Towards Realistic and Reproducible Off-Policy Evaluation. NeurIPS Datasets and
       Benchmarks Track.

    Examples
    --------
    >>> import tempfile, pathlib, pyarrow as pa
    >>> t = pa.table({"event_id": ["e1"], "policy": ["new"], "action": ["a"], "probability": [1.0]})
    >>> write_policy_table(t, pathlib.Path(tempfile.mkdtemp()) / "policy.csv")
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in (".parquet", ".pq", ".csv"):
        raise DataFileError(f"policy table path {str(p)!r} must end in .parquet or .csv.")
    canonical = _canonical_policy_table(table, source="<table>")
    try:
        if suffix == ".csv":
            import pyarrow.csv as pacsv

            pacsv.write_csv(canonical, p)
        else:
            import pyarrow.parquet as pq

            pq.write_table(canonical, p)
    except OSError as exc:
        raise DataFileError(f"could not write policy table {str(p)!r}: {exc}") from None


def to_policy_table(
    logs: BanditLogs, policies: Mapping[str, Policy | PolicyDistribution] | TargetPropensities
) -> pa.Table:
    """Long-format policy table of policies evaluated on the logs (nonzero entries only).

    Parameters
    ----------
    logs : BanditLogs
        Logs with an ``event_id`` column.
    policies : dict of str to policy object or PolicyDistribution, or TargetPropensities
        The policies to tabulate; a :class:`TargetPropensities` must carry distributions.

    Returns
    -------
    pyarrow.Table
        ``event_id, policy, action, probability``: one row per (event, policy, action) with
        positive probability, in log order then action order.

    Notes
    -----
    Row ``(e_i, p, a)`` holds :math:`\\pi_p(a \\mid x_i) > 0`; the table has
    :math:`\\sum_p \\sum_i |\\mathrm{supp}\\,\\pi_p(\\cdot \\mid x_i)|` rows.

    References
    ----------
    .. [1] Saito, Y., Aihara, S., Matsutani, M. and Narita, Y. (2021). Open Bandit Dataset and
       Pipeline: Towards Realistic and Reproducible Off-Policy Evaluation. NeurIPS Datasets and
       Benchmarks Track.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from ope.logs import BanditLogs, ValidationReport
    >>> t = pa.table({"event_id": [10, 11], "action": [1, 2], "propensity": [0.5, 0.5],
    ...               "reward": [1.0, 0.0], "candidates": [[1, 2], [2]]})
    >>> logs = BanditLogs(t, ValidationReport(source="<doc>", rows_read=2, rows_used=2))
    >>> to_policy_table(logs, {"u": UniformPolicy()}).to_pydict()
    {'event_id': [10, 10, 11], 'policy': ['u', 'u', 'u'], 'action': [1, 2, 2], 'probability': [0.5, 0.5, 1.0]}
    """
    if "event_id" not in logs.table.column_names:
        raise PolicyError(
            "to_policy_table needs an `event_id` column in the logs to key the table; map yours "
            "with mapping={'event_id': ...}."
        )
    if isinstance(policies, TargetPropensities):
        if policies.distributions is None:
            raise PolicyError(
                "to_policy_table needs distributions; call target_propensities(..., "
                "with_distributions=True)."
            )
        items: Mapping[str, Any] = policies.distributions
    elif isinstance(policies, Mapping):
        items = policies
    else:
        raise PolicyError(
            f"policies must be a dict of name -> policy object or a TargetPropensities, got "
            f"{type(policies).__name__}."
        )
    event_id = _decode(logs.table.column("event_id"))
    parts = []
    for name, pol in items.items():
        dist = pol if isinstance(pol, PolicyDistribution) else _policy_distribution(name, pol, logs)
        if dist.n != logs.n:
            raise PolicyError(f"policy {name!r}: its distribution has {dist.n} rows, the logs {logs.n}.")
        m = dist.matrix
        nz = m.data > 0
        rows = _rows_of(m.indptr)[nz]
        catalog = dist._catalog()
        parts.append(
            pa.table(
                {
                    "event_id": event_id.take(pa.array(rows)),
                    "policy": pa.repeat(pa.scalar(str(name), type=pa.string()), rows.size),
                    "action": catalog.take(pa.array(m.indices[nz].astype(np.int64))),
                    "probability": pa.array(m.data[nz]),
                }
            )
        )
    if not parts:
        raise PolicyError("policies is empty; give at least one policy.")
    return pa.concat_tables(parts).combine_chunks()


# --------------------------------------------------------------------------------------------
# target propensities
# --------------------------------------------------------------------------------------------


def logging_distribution(logs: BanditLogs) -> PolicyDistribution:
    """The logging policy's distribution over each row's candidates, as logged.

    Parameters
    ----------
    logs : BanditLogs
        Logs with ``candidates`` and ``logging_distribution`` (list<float64> aligned with
        ``candidates``) columns.

    Returns
    -------
    PolicyDistribution
        Over the same catalog that :func:`target_propensities` uses for these logs (logged
        actions and candidates), so supports can be compared column by column.

    Raises
    ------
    PolicyError
        The columns are absent or misaligned, a row does not sum to 1, or the distribution
        disagrees with ``propensity`` at the logged action.

    Notes
    -----
    Row ``i`` holds :math:`\\pi_b(a \\mid x_i)` for :math:`a \\in C_i`; it must satisfy
    :math:`\\sum_{a \\in C_i} \\pi_b(a \\mid x_i) = 1` and
    :math:`\\pi_b(a_i \\mid x_i) = \\texttt{propensity}_i` (both within
    :data:`PROBABILITY_TOLERANCE`). Support checks compare it with a candidate's distribution:
    mass that a candidate puts where :math:`\\pi_b = 0` cannot be estimated by importance
    weighting.

    References
    ----------
    .. [1] Sachdeva, N., Su, Y. and Joachims, T. (2020). Off-policy bandits with deficient
       support. Proceedings of the 26th ACM SIGKDD Conference on Knowledge Discovery and Data
       Mining, 965-975.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from ope.logs import BanditLogs, ValidationReport
    >>> t = pa.table({"action": [1, 3], "propensity": [0.8, 0.5], "reward": [1.0, 0.0],
    ...               "candidates": [[1, 2], [3, 1]], "logging_distribution": [[0.8, 0.2], [0.5, 0.5]]})
    >>> logs = BanditLogs(t, ValidationReport(source="<doc>", rows_read=2, rows_used=2))
    >>> logging_distribution(logs).matrix.toarray().tolist()
    [[0.8, 0.2, 0.0], [0.5, 0.0, 0.5]]
    """
    have = logs.table.column_names
    lacking = [c for c in ("candidates", "logging_distribution") if c not in have]
    if lacking:
        raise PolicyError(
            f"the logging distribution needs the columns {lacking}, which the logs lack. Log "
            "`candidates` (list of actions) and `logging_distribution` (list<float64> aligned "
            "with candidates)."
        )
    index = action_index(logs)
    cand = candidate_sets(index, what="logging_distribution")
    probs = aligned_list(logs, "logging_distribution", cand, what="logging_distribution")
    m = sp.csr_array(
        (probs[cand.order], cand.codes[cand.order].astype(np.int64), cand.indptr.copy()),
        shape=(logs.n, index.n_actions),
    )
    _check_rows(m, what="logging_distribution", tol=_tolerance(logs, "logging_distribution"))
    if "propensity" in have:
        propensity = _to_float64(logs.table.column("propensity"))
        at_logged = _lookup(m, index.logged)
        tol = _tolerance(logs, "logging_distribution", "propensity")
        bad = np.abs(at_logged - propensity) > tol
        if bad.any():
            raise PolicyError(
                f"logging_distribution disagrees with `propensity` at the logged action in "
                f"{_rows_text(bad)} (propensity {_examples(propensity[bad])} vs "
                f"logging_distribution {_examples(at_logged[bad])}). Both must come from the "
                "logging policy's same decision."
            )
    m.eliminate_zeros()
    return _trusted_distribution(m, index.actions)


def _policy_distribution(name: str, pol: Any, logs: BanditLogs) -> PolicyDistribution:
    if not callable(getattr(pol, "distribution", None)):
        raise PolicyError(
            f"policy {name!r}: expected a policy object with distribution(logs) and "
            f"propensity(logs) methods, got {type(pol).__name__}."
        )
    dist = pol.distribution(logs)
    if not isinstance(dist, PolicyDistribution) or dist.n != logs.n:
        raise PolicyError(
            f"policy {name!r}: distribution(logs) must return a PolicyDistribution with one row per "
            f"logged event ({logs.n:,})."
        )
    return dist


def _check_values(name: str, values: Any, n: int) -> npt.NDArray[np.float64]:
    values = np.asarray(values, dtype=np.float64)
    if values.shape != (n,):
        raise PolicyError(f"policy {name!r}: propensities must have shape ({n},), got {values.shape}.")
    bad = ~((values >= 0.0) & (values <= 1.0))
    if bad.any():
        raise PolicyError(
            f"policy {name!r}: target propensities must be finite and in [0, 1]; they are not in "
            f"{_rows_text(bad)} (values {_examples(values[bad])})."
        )
    return values


#: Bytes of the (n, P) matrix filled per block of rows when the ``target__`` columns are copied.
#: The matrix is C-ordered, so one column is strided: copying whole columns one after the other
#: sweeps the entire matrix through memory once per column, while filling all P columns of a
#: block of rows keeps the block in a core's L2 cache (1-2 MiB on current x86), where the range
#: check then reads it with one contiguous min and max. At n = 10M, P = 8, blocks of 1, 2, 4 and
#: 16 MiB took 0.17, 0.16, 0.16 and 0.22 s.
_TARGET_BLOCK_BYTES: Final = 1 << 21


def _numeric_chunks(name: str, col: pa.ChunkedArray) -> list[npt.NDArray[Any]]:
    """Numpy views of a ``target__`` column's non-empty chunks (zero-copy for numbers without nulls).

    Chunks with nulls become float64 with NaN (caught by the range check); dictionary and
    decimal columns are converted; any other type is an error.
    """
    col = _decode(col)
    t = col.type
    if pa.types.is_decimal(t) or pa.types.is_null(t):
        col = pc.cast(col, pa.float64())
    elif not (pa.types.is_floating(t) or pa.types.is_integer(t) or pa.types.is_boolean(t)):
        raise PolicyError(
            f"policy {name!r}: column {_TARGET + name} must hold probabilities as numbers "
            f"(float64), got {t}. Convert it to floats, or read the logs with ope.read_logs, which "
            "converts and checks it."
        )
    views = []
    for chunk in col.chunks:
        if not len(chunk):
            continue
        if chunk.null_count:
            chunk = pc.cast(chunk, pa.float64())  # nulls -> NaN in to_numpy
        views.append(chunk.to_numpy(zero_copy_only=False))
    return views


def _target_matrix(logs: BanditLogs, names: Sequence[str]) -> npt.NDArray[np.float64]:
    """The ``target__<name>`` columns as one C-ordered (n, P) float64 matrix, range-checked.

    Each Arrow chunk is cast into its slot of the preallocated matrix during the copy (no
    intermediate float64 column). Logs that a reader has just validated (every ``target__``
    value in [0, 1], no NaN or null: rule ``target_probability_out_of_range``) skip the check;
    other logs are checked with a min and max per block of rows, and only when a block fails are
    the full masks built, for the error message with row numbers.
    """
    n = logs.n
    P = len(names)
    out = np.empty((n, P), dtype=np.float64)
    sources = [_numeric_chunks(nm, logs.table.column(_TARGET + nm)) for nm in names]
    check = not logs._targets_validated()
    violated = False
    block_rows = max(1, _TARGET_BLOCK_BYTES // (8 * max(P, 1)))
    cursor = [0] * P  # per column: index of the chunk holding the next row
    offset = [0] * P  # per column: first row of that chunk
    for start in range(0, n, block_rows):
        stop = min(start + block_rows, n)
        for j, views in enumerate(sources):
            row = start
            while row < stop:  # at most a few chunks per block
                chunk = views[cursor[j]]
                end = min(stop, offset[j] + chunk.size)
                np.copyto(out[row:end, j], chunk[row - offset[j] : end - offset[j]])
                if end == offset[j] + chunk.size:
                    offset[j] += chunk.size
                    cursor[j] += 1
                row = end
        if check and not violated:
            block = out[start:stop]
            # min/max propagate NaN, and `not (nan >= 0)` holds: NaN fails the test too
            violated = not (block.min() >= 0.0 and block.max() <= 1.0)
    if violated:
        for j, nm in enumerate(names):  # the first offending column raises, with row numbers
            _check_values(nm, out[:, j], n)
    return out


def _from_columns(logs: BanditLogs, names: Sequence[str], with_distributions: bool) -> TargetPropensities:
    available = logs.target_policies
    if not names:
        raise PolicyError(
            "no candidate policies: the logs have no `target__<name>` columns. Log the candidate "
            "policies' propensities as target__<name>, or pass policies= (a list of names, a "
            "policy table, or a dict of policy objects)."
        )
    # the column's full name ("target__new") names the policy "new" too
    names = [
        nm[len(_TARGET):] if nm not in available and nm.startswith(_TARGET)
        and nm[len(_TARGET):] in available else nm
        for nm in names
    ]
    unknown = [nm for nm in names if nm not in available]
    if unknown:
        raise PolicyError(
            f"unknown policies {unknown}: the logs have no column "
            f"{', '.join(_TARGET + u for u in unknown)}. Available: {available or 'none'}."
        )
    if len(set(names)) != len(names):
        raise PolicyError(f"policy names must be distinct, got {list(names)}.")
    n = logs.n
    values = _target_matrix(logs, names)
    if not with_distributions:
        return TargetPropensities(list(names), values)
    lacking = [nm for nm in names if _TARGET_DIST + nm not in logs.table.column_names]
    if lacking or "candidates" not in logs.table.column_names:
        what = [_TARGET_DIST + nm for nm in lacking] + (
            [] if "candidates" in logs.table.column_names else ["candidates"]
        )
        raise PolicyError(
            f"with_distributions=True needs each policy's full distribution, but the logs lack "
            f"{', '.join(what)}. Log `candidates` (list of actions) and `target_dist__<name>` "
            "(list<float64> aligned with candidates), or pass the policies as a long-format policy "
            "table or as policy objects."
        )
    index = action_index(logs)
    cand = candidate_sets(index, what="target_dist")
    dists = {}
    for j, nm in enumerate(names):
        col = _TARGET_DIST + nm
        probs = aligned_list(logs, col, cand, what=f"policy {nm!r}")
        m = sp.csr_array(
            (probs[cand.order], cand.codes[cand.order].astype(np.int64), cand.indptr.copy()),
            shape=(n, index.n_actions),
        )
        _check_rows(m, what=f"policy {nm!r} ({col})", tol=_tolerance(logs, col))
        at_logged = _lookup(m, index.logged)
        bad = np.abs(at_logged - values[:, j]) > _tolerance(logs, col, _TARGET + nm)
        if bad.any():
            raise PolicyError(
                f"policy {nm!r}: {_TARGET + nm} disagrees with {col} at the logged action in "
                f"{_rows_text(bad)} (target__ {_examples(values[bad, j])} vs target_dist__ "
                f"{_examples(at_logged[bad])}). Both must come from the same policy."
            )
        m.eliminate_zeros()
        dists[nm] = PolicyDistribution(m, index.actions)
    return TargetPropensities(list(names), values, dists)


def _from_objects(
    logs: BanditLogs, policies: Mapping[str, Any], with_distributions: bool
) -> TargetPropensities:
    if not policies:
        raise PolicyError("policies is an empty dict; give at least one name -> policy object.")
    n = logs.n
    names = [str(k) for k in policies]
    values = np.empty((n, len(names)), dtype=np.float64)
    dists: dict[str, PolicyDistribution] = {}
    for j, (name, pol) in enumerate(zip(names, policies.values())):
        if isinstance(pol, PolicyDistribution):
            if pol.n != n:
                raise PolicyError(f"policy {name!r}: the distribution has {pol.n:,} rows, the logs {n:,}.")
            values[:, j] = pol.probability(logs.table.column("action"))
            dists[name] = pol
            continue
        if not _is_policy(pol):
            raise PolicyError(
                f"policy {name!r}: expected a policy object with distribution(logs) and "
                f"propensity(logs) methods (e.g. ope.policies.SoftmaxPolicy) or a "
                f"PolicyDistribution, got {type(pol).__name__}."
            )
        if with_distributions:
            dist = _policy_distribution(name, pol, logs)
            dists[name] = dist
            values[:, j] = _check_values(name, dist.probability(logs.table.column("action")), n)
        else:
            values[:, j] = _check_values(name, pol.propensity(logs), n)
    return TargetPropensities(names, values, dists if with_distributions else None)


def _cast_like(col: pa.ChunkedArray, target: pa.DataType, *, column: str, source: str) -> pa.ChunkedArray:
    col = _decode(col)
    if col.type == target:
        return col
    try:
        return pc.cast(col, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        pass
    if pa.types.is_integer(target) and _is_label_type(col.type):
        try:  # integer ids written as "12.0" (a CSV from a float column)
            whole, problem = _whole_ids(pc.cast(col, pa.float64()), column)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            whole, problem = None, "not numbers"
        if problem is None:
            return whole
    raise SchemaError(
        f"policy table {source}: `{column}` is {col.type} but the logs' `{column}` is {target}, "
        "and the values do not convert. Use the same ids in both."
    )


def _rows_to_csr(
    event: npt.NDArray[np.integer],
    action: npt.NDArray[np.integer],
    prob: npt.NDArray[np.float64],
    shape: tuple[int, int],
) -> sp.csr_array:
    """Canonical CSR from (event code, action code, probability) rows; duplicates are summed.

    Rows already grouped by event in log order (as :func:`to_policy_table` writes them) become
    the CSR arrays directly; otherwise scipy's COO -> CSR conversion places them with a counting
    sort in C. Either way no sort of the whole table is needed, and callers detect duplicates by
    comparing ``nnz`` with the number of rows.
    """
    if event.size and bool(np.all(event[1:] >= event[:-1])):
        indptr = np.zeros(shape[0] + 1, dtype=np.int64)
        np.cumsum(np.bincount(event, minlength=shape[0]), out=indptr[1:])
        m = sp.csr_array((np.array(prob, dtype=np.float64), np.array(action), indptr), shape=shape)
        m.sum_duplicates()  # checks sortedness in O(nnz); sorts rows only when needed
        return m
    return sp.coo_array((prob, (event, action)), shape=shape).tocsr()


def _policy_codes(policy: pa.ChunkedArray) -> tuple[list[str], npt.NDArray[np.int64] | None]:
    """Sorted distinct policy names and each row's position among them (None for one policy)."""
    if not pa.types.is_dictionary(policy.type):
        policy = pc.dictionary_encode(policy)
    policy = policy.unify_dictionaries()
    if policy.num_chunks == 0:
        return [], None
    dictionary = policy.chunk(0).dictionary
    if len(dictionary) == 1:
        return [str(dictionary[0].as_py())], None
    idx = np.concatenate(
        [np.asarray(c.indices.to_numpy(zero_copy_only=False), dtype=np.int64) for c in policy.chunks]
    )
    used = np.flatnonzero(np.bincount(idx, minlength=len(dictionary)))
    used_names = [str(x) for x in dictionary.take(pa.array(used)).to_pylist()]
    names = sorted(set(used_names))
    position = {name: j for j, name in enumerate(names)}
    remap = np.full(len(dictionary), -1, dtype=np.int64)
    remap[used] = [position[name] for name in used_names]
    return names, remap[idx]


def _from_table(logs: BanditLogs, table: Any, with_distributions: bool) -> TargetPropensities:
    source = str(table) if isinstance(table, (str, os.PathLike)) else f"<{type(table).__name__}>"
    if isinstance(table, (str, os.PathLike)):
        table = read_policy_table(table)
    else:
        table = _canonical_policy_table(table, source=source)
    n = logs.n
    if table.num_rows == 0:
        raise PolicyError(f"policy table {source} has no rows.")
    if "event_id" not in logs.table.column_names:
        raise PolicyError(
            "a policy table joins on `event_id`, but the logs have no `event_id` column; map "
            "yours with mapping={'event_id': ...}."
        )
    log_ids = _decode(logs.table.column("event_id"))
    if log_ids.null_count or pc.count_distinct(log_ids).as_py() != n:
        raise PolicyError(
            "the logs' `event_id` must be unique and non-null to join a policy table; it has "
            f"{n - pc.count_distinct(log_ids).as_py():,} repeated or missing values."
        )
    problems: list[str] = []
    for c in _POLICY_TABLE_COLUMNS:
        if table.column(c).null_count:
            bad = np.asarray(pc.is_null(table.column(c)).to_numpy(), dtype=bool)
            problems.append(f"`{c}` is null in {_rows_text(bad)} of the table")
    if problems:
        raise PolicyError(f"policy table {source}: " + "; ".join(problems) + ".")

    action = _action_column(logs)
    id_type_in_table = _decode(table.column("event_id")).type
    tab_ids = _cast_like(table.column("event_id"), log_ids.type, column="event_id", source=source)
    tab_actions = _cast_like(table.column("action"), action.type, column="action", source=source)
    prob = _to_float64(table.column("probability"))
    event = _codes(tab_ids, log_ids.combine_chunks() if isinstance(log_ids, pa.ChunkedArray) else log_ids)
    index = action_index(logs, [tab_actions])
    act = index.codes(tab_actions)

    unknown = event < 0
    ignored = _dropped_event_rows(logs, tab_ids, unknown)
    unknown &= ~ignored
    bad = ~((prob >= 0.0) & (prob <= 1.0)) & ~ignored
    if bad.any():
        problems.append(
            f"probabilities must be finite and in [0, 1]; they are not in {_rows_text(bad)} of the "
            f"table (values {_examples(prob[bad])})"
        )
    if unknown.any():
        ids = pc.unique(tab_ids.take(pa.array(np.flatnonzero(unknown))))
        dropped = (
            f"; the logs dropped {logs.report.rows_rejected:,} invalid rows but do not record "
            "their event ids: read them with ope.read_logs(..., on_invalid='drop') so that "
            "the table's rows for dropped events are ignored"
            if logs.report.rows_rejected and getattr(logs, "dropped_event_ids", None) is None
            else ""
        )
        converted = (
            f"; the table's event_id was {id_type_in_table} and was converted to the logs' "
            f"{log_ids.type} to join, so check that the ids are written the same way in both "
            "(e.g. no leading zeros)"
            if id_type_in_table is not None and not _same_kind(id_type_in_table, log_ids.type)
            else ""
        )
        problems.append(
            f"{len(ids):,} event{'s' if len(ids) != 1 else ''} in the table "
            f"{'are' if len(ids) != 1 else 'is'} not in the logs ({_rows_text(unknown)} of the "
            f"table; first event_id {_examples(ids.to_pylist())}); keep only the logged events' "
            "rows" + converted + dropped
        )
    if problems:
        raise PolicyError(f"policy table {source}: " + "; ".join(problems) + ".")
    n_ignored = int(np.count_nonzero(ignored))
    if n_ignored:
        n_events = len(pc.unique(tab_ids.take(pa.array(np.flatnonzero(ignored)))))
        warnings.warn(
            f"policy table {source}: ignored {n_ignored:,} rows for {n_events:,} events that "
            f"the logs dropped as invalid ({logs.report.rows_rejected:,} rows dropped; see "
            "logs.report)",
            DroppedRowsWarning,
            stacklevel=3,
        )

    policy_column = table.column("policy")
    if n_ignored:
        policy_column = policy_column.filter(pa.array(~ignored))
    names, pcode = _policy_codes(policy_column)
    P = len(names)
    kept = np.flatnonzero(~ignored) if n_ignored else None
    if pcode is None or P == 1:
        groups = [kept]
    else:
        pcode = pcode.astype(np.uint16 if P < 2**16 else np.int64)
        order = np.argsort(pcode, kind="stable")  # radix sort for 16-bit codes
        bounds = np.searchsorted(pcode[order], np.arange(P + 1))
        if kept is not None:
            order = kept[order]  # back to table row numbers
        groups = [order[bounds[j] : bounds[j + 1]] for j in range(P)]

    log_labels = None
    values = np.empty((n, P), dtype=np.float64)
    dists: dict[str, PolicyDistribution] = {}
    for j, (name, rows) in enumerate(zip(names, groups)):
        e = event if rows is None else event[rows]
        a = act if rows is None else act[rows]
        pr = prob if rows is None else prob[rows]
        m = _rows_to_csr(e, a, pr, (n, index.n_actions))
        issues: list[str] = []
        if m.nnz != e.size:
            key_order = np.lexsort((a, e))
            dup_rows = np.zeros(e.size, dtype=bool)
            same = (np.diff(e[key_order]) == 0) & (np.diff(a[key_order]) == 0)
            dup_rows[key_order[1:][same]] = True
            table_rows = np.flatnonzero(dup_rows) if rows is None else np.sort(rows[dup_rows])
            issues.append(
                f"{e.size - m.nnz:,} duplicate (event_id, policy, action) rows (first at table rows "
                f"{_examples(table_rows)}); keep one row per action"
            )
        counts = np.diff(m.indptr)
        uncovered = counts == 0
        if log_labels is None:
            log_labels = log_ids
        if uncovered.any():
            ids = log_labels.take(pa.array(np.flatnonzero(uncovered)[: _EXAMPLES + 1])).to_pylist()
            issues.append(
                f"{int(uncovered.sum()):,} of the {n:,} logged events have no rows (first event_id "
                f"{_examples(ids)}); the table must give every logged event's distribution"
            )
        sums = np.asarray(m.sum(axis=1), dtype=np.float64).ravel()
        off = (np.abs(sums - 1.0) > PROBABILITY_TOLERANCE) & ~uncovered
        if off.any():
            ids = log_labels.take(pa.array(np.flatnonzero(off)[: _EXAMPLES + 1])).to_pylist()
            issues.append(
                f"probabilities must sum to 1 (within {PROBABILITY_TOLERANCE:g}) for each event; "
                f"{int(off.sum()):,} events do not (first event_id {_examples(ids)}, sums "
                f"{_examples(np.round(sums[off], 6))}); renormalize them"
            )
        if issues:
            raise PolicyError(f"policy table {source}, policy {name!r}: " + "; ".join(issues) + ".")
        m.eliminate_zeros()
        values[:, j] = _lookup(m, index.logged)
        if with_distributions:
            dists[name] = _trusted_distribution(m, index.actions)
    return TargetPropensities(
        names, values, dists if with_distributions else None, table_rows_ignored=n_ignored
    )


def _dropped_event_rows(
    logs: BanditLogs, tab_ids: pa.ChunkedArray | pa.Array, unknown: npt.NDArray[np.bool_]
) -> npt.NDArray[np.bool_]:
    """Table rows (among ``unknown``) whose event the logs dropped as invalid."""
    ignored = np.zeros(unknown.size, dtype=bool)
    dropped = getattr(logs, "dropped_event_ids", None)
    if dropped is None or len(dropped) == 0 or not unknown.any():
        return ignored
    dropped = _decode(dropped)
    if isinstance(dropped, pa.ChunkedArray):
        dropped = dropped.combine_chunks()
    if dropped.type != tab_ids.type:
        try:
            dropped = pc.cast(dropped, tab_ids.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return ignored
    rows = np.flatnonzero(unknown)
    hit = pc.is_in(tab_ids.take(pa.array(rows)), value_set=dropped)
    hit = np.asarray(pc.fill_null(hit, False).to_numpy(zero_copy_only=False), dtype=bool)
    ignored[rows[hit]] = True
    return ignored


def _trusted_distribution(m: sp.csr_array, actions: npt.NDArray[Any]) -> PolicyDistribution:
    """A PolicyDistribution from a matrix already validated (skips re-checking)."""
    dist = object.__new__(PolicyDistribution)
    object.__setattr__(dist, "matrix", m)
    object.__setattr__(dist, "actions", actions)
    return dist


def target_propensities(
    logs: BanditLogs,
    policies: Sequence[str] | Mapping[str, Policy | PolicyDistribution] | Any = None,
    *,
    with_distributions: bool = False,
) -> TargetPropensities:
    """Each candidate policy's probability of each logged action.

    Parameters
    ----------
    logs : BanditLogs
        Validated logs (``ope.read_logs``).
    policies : None, list of str, policy table, or dict of str to policy object
        - ``None``: every ``target__<name>`` column of the logs;
        - a list of names: those ``target__<name>`` columns (``"new"`` or ``"target__new"``);
        - a long-format policy table (pandas DataFrame, pyarrow Table, or path to a parquet or
          CSV file) with columns ``event_id, policy, action, probability``, one row per action
          with positive probability, joined to the logs on ``event_id``. Its rows for events
          that the reader dropped as invalid (``on_invalid="drop"``) are ignored, with a
          ``DroppedRowsWarning`` and a count in ``table_rows_ignored``, so a table written for
          the whole log still joins; rows for events that were never logged are an error;
        - a dict of name to policy object (:class:`UniformPolicy`, :class:`SoftmaxPolicy`, ...,
          or anything with ``distribution(logs)`` and ``propensity(logs)``) or to a
          :class:`PolicyDistribution`.
    with_distributions : bool, default False
        Also return each policy's sparse distribution over every row's support (needed by the
        doubly robust estimators). For ``target__`` columns this needs ``candidates`` and
        ``target_dist__<name>`` columns in the logs.

    Returns
    -------
    TargetPropensities
        ``names`` and ``values`` of shape (n, P); ``distributions`` when requested.

    Raises
    ------
    PolicyError
        Unknown policy names; a policy table with probabilities outside [0, 1], events whose
        probabilities do not sum to 1 (within :data:`PROBABILITY_TOLERANCE`), logged events it
        does not cover, duplicate (event, policy, action) rows or events absent from the logs;
        distributions requested but not logged. Each message gives counts, first examples and
        the fix.
    SchemaError
        A policy table misses columns or has mistyped ones.

    Notes
    -----
    The value for policy :math:`p` and row :math:`i` is :math:`\\pi_p(a_i \\mid x_i)`, the
    quantity an importance weight :math:`w_i = \\pi_p(a_i \\mid x_i) / \\pi_b(a_i \\mid x_i)`
    needs. A policy table is joined without a Python loop over rows: event ids and action
    labels are hashed to integer codes, and the rows of each policy are placed into a CSR matrix
    by a counting sort, so the cost is linear in the table size and memory is proportional to
    its number of rows, never to n times the catalog size.

    References
    ----------
    .. [1] Dudík, M., Langford, J. and Li, L. (2011). Doubly robust policy evaluation and learning.
       Proceedings of the 28th International Conference on Machine Learning (ICML), 1097-1104.

    Examples
    --------
    >>> import pandas as pd, pyarrow as pa
    >>> from ope.logs import BanditLogs, ValidationReport
    >>> t = pa.table({"event_id": ["e1", "e2"], "action": ["a", "b"], "propensity": [0.5, 0.5],
    ...               "reward": [1.0, 0.0]})
    >>> logs = BanditLogs(t, ValidationReport(source="<doc>", rows_read=2, rows_used=2))
    >>> table = pd.DataFrame({"event_id": ["e1", "e1", "e2"], "policy": ["new"] * 3,
    ...                       "action": ["a", "b", "a"], "probability": [0.25, 0.75, 1.0]})
    >>> tp = target_propensities(logs, table)
    >>> tp.names, tp.values[:, 0].tolist()
    (['new'], [0.25, 0.0])
    """
    if not isinstance(logs, BanditLogs):
        raise PolicyError(
            f"logs must be BanditLogs (from ope.read_logs), got {type(logs).__name__}."
        )
    if policies is None:
        return _from_columns(logs, logs.target_policies, with_distributions)
    if isinstance(policies, (str, os.PathLike)):
        p = Path(policies)
        if not p.exists() and isinstance(policies, str):
            name = policies[len(_TARGET):] if policies.startswith(_TARGET) else policies
            if name in logs.target_policies:
                raise DataFileError(
                    f"policy table {policies!r} does not exist; to use the column "
                    f"target__{name} pass policies=[{name!r}]."
                )
        return _from_table(logs, policies, with_distributions)
    if isinstance(policies, (pa.Table, pa.RecordBatch)) or _is_dataframe(policies):
        return _from_table(logs, policies, with_distributions)
    if isinstance(policies, Mapping):
        return _from_objects(logs, policies, with_distributions)
    if isinstance(policies, (list, tuple)) and all(isinstance(x, str) for x in policies):
        return _from_columns(logs, list(policies), with_distributions)
    raise PolicyError(
        "policies must be None, a list of target__ column names, a policy table (DataFrame, "
        f"pyarrow Table or path) or a dict of name -> policy object; got {type(policies).__name__}."
    )
