"""The shared core of candidate policies: action codes, candidate sets and sparse distributions.

Everything the other policy modules (and the diagnostics) share lives here: the catalog of
action labels and their integer codes (:func:`action_index`), each row's candidate set as a CSR
structure (:func:`candidate_sets`, :func:`aligned_list`), a policy's sparse distribution
(:class:`PolicyDistribution`), the per-row probabilities of ``P`` candidates
(:class:`TargetPropensities`), and the row checks and message helpers they use.

Distributions are sparse: a :class:`PolicyDistribution` is a ``scipy.sparse.csr_array`` of shape
``(n, K)`` whose column ``j`` is the action label ``actions[j]``. Its number of stored entries is
the total size of the rows' supports, never ``n * K`` unless the policy really puts mass on every
action of every row. Everything is vectorized: no Python loop runs over rows.

The module is private; its names are public so that the sibling modules can share them.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ope._thresholds import PROBABILITY_TOLERANCE
from ope._validation import as_float_array
from ope.exceptions import PolicyError, SchemaError, ValidationError
from ope.logs import BanditLogs, require_logs

if TYPE_CHECKING:  # scipy.sparse is imported where a matrix is built
    import scipy.sparse as sp

__all__ = [
    "PROBABILITY_TOLERANCE",
    "EXAMPLES",
    "examples",
    "rows_text",
    "is_dataframe",
    "require_logs",
    "decode",
    "is_label_type",
    "label_codes",
    "to_float64",
    "float_values",
    "labels_to_numpy",
    "as_label_array",
    "same_kind",
    "rows_of",
    "ActionIndex",
    "action_column",
    "action_index",
    "CandidateSets",
    "candidate_sets",
    "aligned_list",
    "is_numeric_list",
    "flat_values",
    "PolicyDistribution",
    "catalog_array",
    "matrix_over",
    "lookup",
    "tolerance",
    "check_rows",
    "TargetPropensities",
    "is_policy",
    "canonical_csr",
    "policy_distribution",
    "trusted_distribution",
]


#: How many example rows / event ids an error message shows (enough to locate the problem).
EXAMPLES: Final = 5


def examples(values: Any, k: int = EXAMPLES) -> str:
    """First ``k`` items of ``values`` as ``"a, b, c, ..."``."""
    items = [v.item() if isinstance(v, np.generic) else v for v in list(values[: k + 1])]
    text = ", ".join(repr(v) if isinstance(v, str) else str(v) for v in items[:k])
    return text + (", ..." if len(items) > k else "")


def rows_text(mask: npt.NDArray[np.bool_]) -> str:
    """``"3 rows (first at rows 0, 4, 9)"`` for a boolean mask over rows."""
    idx = np.flatnonzero(mask)
    word = "row" if idx.size == 1 else "rows"
    return f"{idx.size:,} {word} (first at {word} {examples(idx)})"


def is_dataframe(obj: Any) -> bool:
    pd = sys.modules.get("pandas")
    return pd is not None and isinstance(obj, pd.DataFrame)


def decode(col: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """Dictionary-encoded columns as plain columns of their value type."""
    if pa.types.is_dictionary(col.type):
        return pc.cast(col, col.type.value_type)
    return col


def is_label_type(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t)


#: Integer labels whose range spans at most this many slots per distinct label are encoded with a
#: direct lookup table (one int32 per slot) instead of a hash join: ids are usually dense
#: (0..n-1, item indices), where a table gather is several times faster than hashing a large
#: value set, and 8 slots per label bounds the table at 32 bytes per label.
_LUT_SLOTS_PER_LABEL: Final = 8


#: Ranges this small always get a lookup table (256 KiB of int32 at most).
_LUT_MIN_SLOTS: Final = 1 << 16


def label_codes(values: pa.ChunkedArray | pa.Array, catalog: pa.Array) -> npt.NDArray[np.int32]:
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
            lut[np.asarray(catalog.to_numpy(zero_copy_only=False), dtype=np.int64) - lo] = (
                np.arange(len(catalog), dtype=np.int32)
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
    return (
        col.to_numpy() if isinstance(col, pa.ChunkedArray) else col.to_numpy(zero_copy_only=False)
    )


def to_float64(col: pa.ChunkedArray | pa.Array) -> npt.NDArray[np.float64]:
    return np.asarray(_to_numpy(col), dtype=np.float64)


def float_values(
    values: Any, what: str, *, ndim: tuple[int, ...] = (1, 2)
) -> npt.NDArray[np.float64]:
    """Numbers a policy computed (propensities, scores, probabilities) as float64.

    A masked array is refused when anything is masked (its mask would be lost), and so is a
    non-numeric array: both are the policy's problem, so a PolicyError naming ``what``.
    """
    try:
        arr = as_float_array(values, what, ndim=ndim)
    except ValidationError as exc:
        raise PolicyError(str(exc)) from None
    return np.asarray(arr, dtype=np.float64)


def labels_to_numpy(catalog: pa.Array) -> npt.NDArray[Any]:
    return catalog.to_numpy(zero_copy_only=False)


def as_label_array(labels: Any, action_type: pa.DataType, what: str) -> pa.Array:
    """User-given action labels as an Arrow array of the logged actions' type."""
    values = labels.tolist() if isinstance(labels, np.ndarray) else list(labels)
    try:
        arr = pa.array(values)
        compatible = arr.type == action_type or (
            is_label_type(arr.type) and same_kind(arr.type, action_type)
        )
        if compatible and arr.type != action_type:
            arr = pc.cast(arr, action_type)
    except (TypeError, pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        compatible = False
    if not compatible:
        raise PolicyError(
            f"{what} must be labels of the same type as the logged actions ({action_type}); "
            f"got {examples(values)}. Use the action ids exactly as they appear in the "
            "logs' `action` column."
        )
    if arr.null_count:
        raise PolicyError(f"{what} contains missing (null) labels; remove them.")
    return arr


def same_kind(a: pa.DataType, b: pa.DataType) -> bool:
    ints = pa.types.is_integer
    strs = lambda t: pa.types.is_string(t) or pa.types.is_large_string(t)  # noqa: E731
    return (ints(a) and ints(b)) or (strs(a) and strs(b))


def rows_of(indptr: npt.NDArray[np.integer]) -> npt.NDArray[np.int64]:
    """Row number of each stored entry of a CSR structure."""
    n = indptr.size - 1
    return np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))


@dataclass(frozen=True, eq=False)
class ActionIndex:
    """Integer codes of the logged actions (and candidates) in a sorted catalog of labels."""

    catalog: pa.Array  # sorted unique labels; code j <-> catalog[j]
    logged: npt.NDArray[np.int32]  # (n,) code of each logged action
    candidates: pa.ChunkedArray | None  # the logs' candidates column (decoded), if any

    @property
    def actions(self) -> npt.NDArray[Any]:
        return labels_to_numpy(self.catalog)

    @property
    def n_actions(self) -> int:
        return len(self.catalog)

    def codes(self, values: pa.ChunkedArray | pa.Array) -> npt.NDArray[np.int32]:
        return label_codes(values, self.catalog)


def action_column(logs: BanditLogs) -> pa.ChunkedArray:
    if "action" not in logs.table.column_names:
        raise SchemaError(
            "the logs have no `action` column; map yours with mapping={'action': ...}"
        )
    action = decode(logs.table.column("action"))
    if not is_label_type(action.type):
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
        if not same_kind(value_type, action_type):
            raise SchemaError(
                f"`candidates` holds {t.value_type} labels but `action` is {action_type}; "
                "both must use the same action ids"
            )
        cand = pc.cast(cand, pa.list_(action_type))
    return cand


def action_index(logs: BanditLogs, extra: Sequence[pa.Array | pa.ChunkedArray] = ()) -> ActionIndex:
    """Catalog = sorted unique labels of the logged actions, the candidates and ``extra``."""
    action = action_column(logs)
    cand = _candidates_column(logs, action.type)
    chunks: list[pa.Array] = list(action.chunks)
    if cand is not None:
        chunks.extend(pc.list_flatten(cand).chunks)
    for arr in extra:
        arr = decode(arr)
        chunks.extend(arr.chunks if isinstance(arr, pa.ChunkedArray) else [arr])
    everything = pa.chunked_array(chunks, type=action.type)
    uniq = pc.unique(everything)
    uniq = pc.drop_null(uniq)
    catalog = uniq.take(pc.sort_indices(uniq))
    return ActionIndex(catalog=catalog, logged=label_codes(action, catalog), candidates=cand)


@dataclass(frozen=True, eq=False)
class CandidateSets:
    """Each row's candidate set as a CSR structure of action codes (in the logged order)."""

    indptr: npt.NDArray[np.int64]  # (n + 1,)
    codes: npt.NDArray[np.int32]  # (nnz,) in the order of the logged lists
    order: npt.NDArray[np.int64]  # permutation putting codes in ascending order within each row

    @property
    def lengths(self) -> npt.NDArray[np.int64]:
        return np.diff(self.indptr)


def candidate_sets(index: ActionIndex, *, what: str) -> CandidateSets:
    """Validated candidate sets (no nulls, no duplicate labels within a row)."""
    import scipy.sparse as sp

    cand = index.candidates
    if cand is None:
        raise PolicyError(f"{what} needs the logs' `candidates` column, which is absent.")
    lengths = pc.list_value_length(cand)
    if lengths.null_count:
        bad = np.asarray(pc.is_null(lengths).to_numpy(zero_copy_only=False), dtype=bool)
        raise PolicyError(
            f"{what}: `candidates` is missing (null) in {rows_text(bad)}. Log the candidate "
            "set of every decision."
        )
    lengths_np = np.asarray(lengths.to_numpy(), dtype=np.int64)
    flat = pc.list_flatten(cand)
    if flat.null_count:
        raise PolicyError(
            f"{what}: `candidates` contains {flat.null_count:,} null labels; remove them."
        )
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
        rows = rows_of(indptr)
        dup = np.zeros(lengths_np.size, dtype=bool)
        same = (np.diff(sorted_codes) == 0) & (np.diff(rows) == 0)
        if same.any():
            dup[rows[1:][same]] = True
            raise PolicyError(
                f"{what}: `candidates` lists the same action more than once in {rows_text(dup)}. "
                "Each candidate set must hold distinct actions."
            )
    return CandidateSets(indptr=indptr, codes=codes, order=np.asarray(tmp.data, dtype=np.int64))


def aligned_list(
    logs: BanditLogs, column: str, cand: CandidateSets, *, what: str
) -> npt.NDArray[np.float64]:
    """A list<float64> column aligned with ``candidates``, flattened (validated lengths, no nulls)."""
    if column not in logs.table.column_names:
        raise PolicyError(f"{what}: the logs have no column {column!r}.")
    col = logs.table.column(column)
    t = col.type
    if not is_numeric_list(t):
        raise SchemaError(f"{what}: column {column!r} must be a list of floats, got {t}")
    lengths = pc.list_value_length(col)
    lengths_np = np.asarray(pc.fill_null(lengths, -1).to_numpy(), dtype=np.int64)
    bad = lengths_np != cand.lengths
    if bad.any():
        raise PolicyError(
            f"{what}: column {column!r} must have one entry per candidate (aligned with "
            f"`candidates`); its length differs or it is null in {rows_text(bad)}."
        )
    return flat_values(col, what=f"{what}: column {column!r}")


def is_numeric_list(t: pa.DataType) -> bool:
    """A list type (variable, large or fixed-size) of integers or floats."""
    is_list = pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)
    return is_list and (pa.types.is_floating(t.value_type) or pa.types.is_integer(t.value_type))


def flat_values(col: pa.ChunkedArray | pa.Array, *, what: str) -> npt.NDArray[np.float64]:
    """The entries of a numeric list column, flattened to float64 (a PolicyError on a null)."""
    flat = pc.list_flatten(col)
    if flat.null_count:
        raise PolicyError(f"{what} holds {flat.null_count:,} null entries.")
    return to_float64(flat)


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
        import scipy.sparse as sp

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
        check_rows(m, what="the distribution")

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

    def probability(
        self, action: npt.ArrayLike | pa.Array | pa.ChunkedArray
    ) -> npt.NDArray[np.float64]:
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
        catalog = catalog_array(self.actions)
        if isinstance(action, (pa.Array, pa.ChunkedArray)):
            values = decode(action)
        else:
            arr = np.asarray(action)
            if arr.ndim != 1:
                raise PolicyError(
                    f"action must be 1-D with one label per row, got shape {arr.shape}."
                )
            try:
                values = pa.array(arr.tolist()) if arr.dtype == object else pa.array(arr)
            except (
                pa.ArrowInvalid,
                pa.ArrowTypeError,
                pa.ArrowNotImplementedError,
                TypeError,
                OverflowError,
            ):
                raise PolicyError(
                    f"action must hold action labels (whole numbers or texts, one per row); "
                    f"got {examples(arr.tolist())}."
                ) from None
        if len(values) != self.n:
            raise PolicyError(
                f"action must have one label per row ({self.n:,}), got {len(values):,}."
            )
        if values.type != catalog.type and len(catalog):
            try:
                values = pc.cast(values, catalog.type)
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                raise PolicyError(
                    f"action labels ({values.type}) do not match the catalog's type ({catalog.type})."
                ) from None
        return lookup(self.matrix, label_codes(values, catalog))

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
        target = as_label_array(actions, catalog_array(self.actions).type, "reindex actions")
        if pc.count_distinct(target).as_py() != len(target):
            raise PolicyError("reindex actions must be distinct labels.")
        m = self.matrix
        code = label_codes(catalog_array(self.actions), target).astype(np.int64)[m.indices]
        lost = (code < 0) & (m.data > 0)
        if lost.any():
            labels = self.actions[m.indices[lost]]
            raise PolicyError(
                f"reindex: {int(lost.sum()):,} entries with positive probability have actions "
                f"missing from the new catalog (first {examples(labels)}); include them."
            )
        keep = code >= 0
        counts = np.bincount(rows_of(m.indptr)[keep], minlength=m.shape[0])
        indptr = np.zeros(m.shape[0] + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        new = canonical_csr(m.shape[0], len(target), indptr, code[keep], m.data[keep])
        return trusted_distribution(new, labels_to_numpy(target))


def catalog_array(actions: npt.NDArray[Any]) -> pa.Array:
    """A distribution's ``actions`` (a numpy label array) as an Arrow array of the same labels."""
    if actions.dtype == object:
        return pa.array(actions.tolist())
    return pa.array(actions)


def matrix_over(distribution: PolicyDistribution, catalog: pa.Array) -> sp.csr_array:
    """``distribution.matrix`` over a larger sorted ``catalog`` that contains its actions.

    Column ``j`` of the result is ``catalog[j]``; the stored entries are shared, not copied.
    """
    import scipy.sparse as sp

    new_code = label_codes(catalog_array(distribution.actions), catalog).astype(np.int64)
    m = distribution.matrix
    return sp.csr_array((m.data, new_code[m.indices], m.indptr), shape=(m.shape[0], len(catalog)))


def lookup(matrix: sp.csr_array, codes: npt.NDArray[np.integer]) -> npt.NDArray[np.float64]:
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


def tolerance(logs: BanditLogs, *columns: str) -> float:
    """:data:`PROBABILITY_TOLERANCE`, widened for columns the source stored in float16/float32.

    Comparing two stored probabilities (or a row sum with 1) can be off by the storage
    rounding of both sides: at most ``u`` of each value, ``u = 2**-11`` for float16.
    """
    u = getattr(logs, "unit_roundoff", None) or {}
    return max(PROBABILITY_TOLERANCE, 2.0 * sum(float(u.get(c, 0.0)) for c in columns))


def check_rows(m: sp.csr_array, *, what: str, tol: float = PROBABILITY_TOLERANCE) -> None:
    """Entries finite in [0, 1] and every row summing to 1 (within ``tol``)."""
    data = m.data
    bad_entry = ~((data >= 0.0) & (data <= 1.0))  # NaN fails both comparisons
    if bad_entry.any():
        rows = rows_of(m.indptr)[bad_entry]
        raise PolicyError(
            f"{what}: probabilities must be finite and in [0, 1]; {int(bad_entry.sum()):,} entries "
            f"are not (first values {examples(data[bad_entry])} in rows {examples(rows)})."
        )
    sums = np.asarray(m.sum(axis=1), dtype=np.float64).ravel()
    bad = np.abs(sums - 1.0) > tol
    if bad.any():
        raise PolicyError(
            f"{what}: each row's probabilities must sum to 1 (within {tol:g}); "
            f"{rows_text(bad)} do not (sums {examples(np.round(sums[bad], 6))}). Renormalize each "
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
        ignored = (
            f", table_rows_ignored={self.table_rows_ignored:,}" if self.table_rows_ignored else ""
        )
        return f"TargetPropensities(n={self.n:,}, names={self.names}{dists}{ignored})"


def is_policy(obj: Any) -> bool:
    """Duck-typed check for the :class:`Policy` protocol (both methods callable)."""
    return callable(getattr(obj, "distribution", None)) and callable(
        getattr(obj, "propensity", None)
    )


def canonical_csr(
    n: int,
    K: int,
    indptr: npt.NDArray[np.int64],
    codes: npt.NDArray[np.integer],
    probs: npt.NDArray[np.float64],
) -> sp.csr_array:
    """A canonical CSR from per-row entries (codes distinct within rows, any order)."""
    import scipy.sparse as sp

    # copy indptr: eliminate_zeros below edits it in place, and callers share theirs
    m = sp.csr_array((probs, codes.astype(np.int64, copy=False), indptr.copy()), shape=(n, K))
    m.has_sorted_indices = False
    m.sort_indices()
    m.eliminate_zeros()
    return m


def policy_distribution(name: str, pol: Any, logs: BanditLogs) -> PolicyDistribution:
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


def trusted_distribution(m: sp.csr_array, actions: npt.NDArray[Any]) -> PolicyDistribution:
    """A PolicyDistribution from a matrix already validated (skips re-checking)."""
    dist = object.__new__(PolicyDistribution)
    object.__setattr__(dist, "matrix", m)
    object.__setattr__(dist, "actions", actions)
    return dist
