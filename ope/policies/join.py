"""Target propensities: each candidate policy's probability of each logged action.

:func:`target_propensities` turns the three ways a candidate can be given (docs/guide/logs.md) into
an (n, P) matrix: ``target__<name>`` columns of the logs, a long-format policy table joined on
``event_id``, or policy objects; :func:`logging_distribution` reads the logging policy's logged
distribution over each row's candidates.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ope._progress import progress
from ope._validation import check_flag, user_stacklevel
from ope.exceptions import DataFileError, DroppedRowsWarning, PolicyError, SchemaError
from ope.logs import BanditLogs
from ope.policies._core import (
    EXAMPLES,
    PROBABILITY_TOLERANCE,
    PolicyDistribution,
    TargetPropensities,
    action_column,
    action_index,
    aligned_list,
    candidate_sets,
    check_rows,
    decode,
    examples,
    float_values,
    is_dataframe,
    is_label_type,
    is_policy,
    label_codes,
    lookup,
    policy_distribution,
    require_logs,
    rows_text,
    same_kind,
    to_float64,
    tolerance,
    trusted_distribution,
)
from ope.policies.objects import Policy
from ope.policies.table import (
    POLICY_TABLE_COLUMNS,
    canonical_policy_table,
    probability_roundoff,
    read_policy_table,
    whole_ids,
)

if TYPE_CHECKING:  # scipy.sparse is imported where a matrix is built
    import scipy.sparse as sp

__all__ = ["target_propensities", "logging_distribution", "validated_target_columns"]

_TARGET: Final = "target__"


_TARGET_DIST: Final = "target_dist__"


def validated_target_columns(
    logs: BanditLogs, policies: Any
) -> tuple[list[str], list[np.ndarray]] | None:
    """The candidates' ``target__<name>`` columns as float64 (n,) arrays read where they are
    (zero-copy views of single-chunk columns), when a reader has validated them and
    ``policies`` names columns (None: every one); None otherwise (other kinds of candidates,
    unchecked targets, or names that :func:`target_propensities` rejects with its message): the
    fast path of :func:`target_propensities` for the evaluation and the diagnostics.

    >>> import pyarrow as pa
    >>> from ope.io import read_logs
    >>> logs = read_logs(pa.table({"action": [0, 1], "propensity": [0.5, 0.5],
    ...                            "reward": [1.0, 0.0], "target__a": [1.0, 0.0]}))
    >>> names, columns = validated_target_columns(logs, None)
    >>> names, columns[0].tolist()
    (['a'], [1.0, 0.0])
    """
    if not logs.targets_validated():
        return None
    available = logs.target_policies
    if policies is None:
        names = list(available)
    elif isinstance(policies, (list, tuple)) and all(isinstance(x, str) for x in policies):
        names = [
            x[len("target__") :] if x not in available and x.startswith("target__") else x
            for x in policies
        ]
    else:
        return None
    if not names or len(set(names)) != len(names) or any(x not in available for x in names):
        return None
    columns = [logs.column(f"target__{x}") for x in names]
    if not all(c.dtype == np.float64 and c.ndim == 1 and c.flags.c_contiguous for c in columns):
        return None
    return names, columns


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
    import scipy.sparse as sp

    logs = require_logs(logs, "logging_distribution")
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
    check_rows(m, what="logging_distribution", tol=tolerance(logs, "logging_distribution"))
    if "propensity" in have:
        propensity = to_float64(logs.table.column("propensity"))
        at_logged = lookup(m, index.logged)
        tol = tolerance(logs, "logging_distribution", "propensity")
        bad = np.abs(at_logged - propensity) > tol
        if bad.any():
            raise PolicyError(
                f"logging_distribution disagrees with `propensity` at the logged action in "
                f"{rows_text(bad)} (propensity {examples(propensity[bad])} vs "
                f"logging_distribution {examples(at_logged[bad])}). Both must come from the "
                "logging policy's same decision."
            )
    m.eliminate_zeros()
    return trusted_distribution(m, index.actions)


def _check_values(name: str, values: Any, n: int) -> npt.NDArray[np.float64]:
    values = float_values(values, f"policy {name!r}: propensities")
    if values.shape != (n,):
        raise PolicyError(
            f"policy {name!r}: propensities must have shape ({n},), got {values.shape}."
        )
    bad = ~((values >= 0.0) & (values <= 1.0))
    if bad.any():
        raise PolicyError(
            f"policy {name!r}: target propensities must be finite and in [0, 1]; they are not in "
            f"{rows_text(bad)} (values {examples(values[bad])})."
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
    col = decode(col)
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
    check = not logs.targets_validated()
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


def _from_columns(
    logs: BanditLogs, names: Sequence[str], with_distributions: bool
) -> TargetPropensities:
    import scipy.sparse as sp

    available = logs.target_policies
    if not names:
        raise PolicyError(
            "no candidate policies: the logs have no `target__<name>` columns. Log the candidate "
            "policies' propensities as target__<name>, or pass policies= (a list of names, a "
            "policy table, or a dict of policy objects)."
        )
    # the column's full name ("target__new") names the policy "new" too
    names = [
        nm[len(_TARGET) :]
        if nm not in available and nm.startswith(_TARGET) and nm[len(_TARGET) :] in available
        else nm
        for nm in names
    ]
    unknown = [nm for nm in names if nm not in available]
    if unknown:
        raise PolicyError(
            f"unknown policies {unknown} in `policies`: the logs have no column "
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
        check_rows(m, what=f"policy {nm!r} ({col})", tol=tolerance(logs, col))
        at_logged = lookup(m, index.logged)
        bad = np.abs(at_logged - values[:, j]) > tolerance(logs, col, _TARGET + nm)
        if bad.any():
            raise PolicyError(
                f"policy {nm!r}: {_TARGET + nm} disagrees with {col} at the logged action in "
                f"{rows_text(bad)} (target__ {examples(values[bad, j])} vs target_dist__ "
                f"{examples(at_logged[bad])}). Both must come from the same policy."
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
                raise PolicyError(
                    f"policy {name!r}: the distribution has {pol.n:,} rows, the logs {n:,}."
                )
            values[:, j] = pol.probability(logs.table.column("action"))
            dists[name] = pol
            continue
        if not is_policy(pol):
            raise PolicyError(
                f"policy {name!r}: expected a policy object with distribution(logs) and "
                f"propensity(logs) methods (e.g. ope.policies.SoftmaxPolicy) or a "
                f"PolicyDistribution, got {type(pol).__name__}."
            )
        if with_distributions:
            dist = policy_distribution(name, pol, logs)
            dists[name] = dist
            values[:, j] = _check_values(name, dist.probability(logs.table.column("action")), n)
        else:
            values[:, j] = _check_values(name, pol.propensity(logs), n)
    return TargetPropensities(names, values, dists if with_distributions else None)


def _cast_like(
    col: pa.ChunkedArray, target: pa.DataType, *, column: str, source: str
) -> pa.ChunkedArray:
    col = decode(col)
    if col.type == target:
        return col
    try:
        return pc.cast(col, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        pass
    if pa.types.is_integer(target) and is_label_type(col.type):
        try:  # integer ids written as "12.0" (a CSV from a float column)
            whole, problem = whole_ids(pc.cast(col, pa.float64()), column)
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
    import scipy.sparse as sp

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
        [
            np.asarray(c.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
            for c in policy.chunks
        ]
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
        table = canonical_policy_table(table, source=source)
    n = logs.n
    if table.num_rows == 0:
        raise PolicyError(f"policy table {source} has no rows.")
    if "event_id" not in logs.table.column_names:
        raise PolicyError(
            "a policy table joins on `event_id`, but the logs have no `event_id` column; map "
            "yours with mapping={'event_id': ...}."
        )
    log_ids = decode(logs.table.column("event_id"))
    if log_ids.null_count or pc.count_distinct(log_ids).as_py() != n:
        raise PolicyError(
            "the logs' `event_id` must be unique and non-null to join a policy table; it has "
            f"{n - pc.count_distinct(log_ids).as_py():,} repeated or missing values."
        )
    problems: list[str] = []
    for c in POLICY_TABLE_COLUMNS:
        if table.column(c).null_count:
            bad = np.asarray(pc.is_null(table.column(c)).to_numpy(), dtype=bool)
            problems.append(f"`{c}` is null in {rows_text(bad)} of the table")
    if problems:
        raise PolicyError(f"policy table {source}: " + "; ".join(problems) + ".")

    action = action_column(logs)
    id_type_in_table = decode(table.column("event_id")).type
    tab_ids = _cast_like(table.column("event_id"), log_ids.type, column="event_id", source=source)
    tab_actions = _cast_like(table.column("action"), action.type, column="action", source=source)
    prob = to_float64(table.column("probability"))
    event = label_codes(
        tab_ids, log_ids.combine_chunks() if isinstance(log_ids, pa.ChunkedArray) else log_ids
    )
    index = action_index(logs, [tab_actions])
    act = index.codes(tab_actions)

    unknown = event < 0
    ignored = _dropped_event_rows(logs, tab_ids, unknown)
    unknown &= ~ignored
    bad = ~((prob >= 0.0) & (prob <= 1.0)) & ~ignored
    if bad.any():
        problems.append(
            f"probabilities must be finite and in [0, 1]; they are not in {rows_text(bad)} of the "
            f"table (values {examples(prob[bad])})"
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
            if id_type_in_table is not None and not same_kind(id_type_in_table, log_ids.type)
            else ""
        )
        problems.append(
            f"{len(ids):,} event{'s' if len(ids) != 1 else ''} in the table "
            f"{'are' if len(ids) != 1 else 'is'} not in the logs ({rows_text(unknown)} of the "
            f"table; first event_id {examples(ids.to_pylist())}); keep only the logged events' "
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
            stacklevel=user_stacklevel(),
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
    # a table stored in float16/float32 is judged by its own precision (its row sums are off
    # by up to its rounding error), never by the float64 tolerance alone
    roundoff = probability_roundoff(table)
    sum_tol = max(PROBABILITY_TOLERANCE, 2.0 * roundoff)
    precision = (
        f", widened to {sum_tol:g} because the table stores probabilities in "
        f"{'float16' if roundoff >= 2.0**-11 else 'float32'}"
        if sum_tol > PROBABILITY_TOLERANCE
        else ""
    )
    joined = zip(names, groups)
    if P > 1:
        joined = progress(joined, desc=f"join policy table {source}", total=P, unit="policy")
    for j, (name, rows) in enumerate(joined):
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
                f"{examples(table_rows)}); keep one row per action"
            )
        counts = np.diff(m.indptr)
        uncovered = counts == 0
        if log_labels is None:
            log_labels = log_ids
        if uncovered.any():
            ids = log_labels.take(pa.array(np.flatnonzero(uncovered)[: EXAMPLES + 1])).to_pylist()
            issues.append(
                f"{int(uncovered.sum()):,} of the {n:,} logged events have no rows (first event_id "
                f"{examples(ids)}); the table must give every logged event's distribution"
            )
        sums = np.asarray(m.sum(axis=1), dtype=np.float64).ravel()
        off = (np.abs(sums - 1.0) > sum_tol) & ~uncovered
        if off.any():
            ids = log_labels.take(pa.array(np.flatnonzero(off)[: EXAMPLES + 1])).to_pylist()
            issues.append(
                f"probabilities must sum to 1 (within {PROBABILITY_TOLERANCE:g}{precision}) for each event; "
                f"{int(off.sum()):,} events do not (first event_id {examples(ids)}, sums "
                f"{examples(np.round(sums[off], 6))}); renormalize them"
            )
        if issues:
            raise PolicyError(f"policy table {source}, policy {name!r}: " + "; ".join(issues) + ".")
        m.eliminate_zeros()
        values[:, j] = lookup(m, index.logged)
        if with_distributions:
            dists[name] = trusted_distribution(m, index.actions)
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
    dropped = decode(dropped)
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
    needs [1]_. A policy table is joined without a Python loop over rows: event ids and action
    labels are hashed to integer codes, and the rows of each policy are placed into a CSR matrix
    by a counting sort, so the cost is linear in the table size and memory is proportional to
    its number of rows, never to n times the catalog size.

    References
    ----------
    .. [1] Horvitz, D. G. and Thompson, D. J. (1952). A generalization of sampling without
       replacement from a finite universe. Journal of the American Statistical Association,
       47(260), 663-685.

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
    with_distributions = bool(check_flag(with_distributions, "with_distributions"))
    if policies is None:
        return _from_columns(logs, logs.target_policies, with_distributions)
    if isinstance(policies, (str, os.PathLike)):
        try:
            exists = Path(policies).exists() and str(policies).strip() != ""
        except (OSError, ValueError):  # a name too long for a path: read_policy_table says so
            exists = True
        if not exists and isinstance(policies, str):
            name = policies[len(_TARGET) :] if policies.startswith(_TARGET) else policies
            if name in logs.target_policies:
                raise DataFileError(
                    f"policy table {policies!r} does not exist; to use the column "
                    f"target__{name} pass policies=[{name!r}]."
                )
        return _from_table(logs, policies, with_distributions)
    if isinstance(policies, (pa.Table, pa.RecordBatch)) or is_dataframe(policies):
        return _from_table(logs, policies, with_distributions)
    if isinstance(policies, Mapping):
        return _from_objects(logs, policies, with_distributions)
    if isinstance(policies, (list, tuple)) and all(isinstance(x, str) for x in policies):
        return _from_columns(logs, list(policies), with_distributions)
    raise PolicyError(
        "policies must be None, a list of target__ column names, a policy table (DataFrame, "
        f"pyarrow Table or path) or a dict of name -> policy object; got {type(policies).__name__}."
    )
