"""Candidate policies given as numbers the user already has, rather than computed from scores.

:class:`LoggingPolicy` is the logging policy itself (its logged propensities: an on-policy
check). :class:`ChosenActionPolicy` puts all its mass on the action named in a column of the
logs. :class:`ArrayPolicy` reads a distribution array saved with ``numpy.save``: shape (n, K),
or (n, K, P) with one distribution over the K actions per position, as the Open Bandit
Pipeline's ``action_dist``. :class:`ActionTablePolicy` is a context-free policy given by a small
table ``action[, position], probability``, e.g. the Bernoulli Thompson sampling policy of the
Open Bandit Dataset. Each implements the :class:`~ope.policies.Policy` protocol.
:func:`logged_action_table` reads such a table off logs whose logger does not depend on the
context (the Bernoulli TS campaign of the Open Bandit Dataset), so that it can be evaluated as
a candidate on other logs (``ope action-table``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ope._validation import check_flag
from ope.exceptions import DataFileError, PolicyError, SchemaError
from ope._paths import csv_column_names, locate_input
from ope.logs import BanditLogs
from ope.policies._core import (
    EXAMPLES,
    PROBABILITY_TOLERANCE,
    PolicyDistribution,
    action_column,
    action_index,
    candidate_sets,
    decode,
    examples,
    is_dataframe,
    is_label_type,
    require_logs,
    rows_text,
    same_kind,
    to_float64,
    trusted_distribution,
)
from ope.policies.join import logging_distribution

if TYPE_CHECKING:  # scipy.sparse is imported where a matrix is built
    import scipy.sparse as sp

__all__ = [
    "PICKLE_SUFFIXES",
    "refuse_pickle",
    "local_file",
    "LoggingPolicy",
    "ChosenActionPolicy",
    "ArrayPolicy",
    "ActionTablePolicy",
    "logged_action_table",
]

#: File names that hold pickles (joblib's too): ope never loads them, since unpickling runs
#: whatever code the file names.
PICKLE_SUFFIXES: Final = (".pkl", ".pickle", ".joblib", ".sav", ".dill")

#: Elements of an :class:`ArrayPolicy` file converted to float64 per block while it is checked
#: or read (8 MiB of float64): the file is memory-mapped, and only one block is ever copied.
_BLOCK_ELEMENTS: Final = 1 << 20


def refuse_pickle(path: str | os.PathLike[str], *, what: str) -> None:
    """Raise a DataFileError when ``path`` is (or is named as) a pickle or joblib file.

    Parameters
    ----------
    path : str or path-like
        The file to be read.
    what : str
        What the file should be, for the message (e.g. ``"a .npy distribution array"``).

    Notes
    -----
    The suffixes of :data:`PICKLE_SUFFIXES` are refused, and so is any file whose first byte is
    the pickle protocol marker ``0x80`` followed by a protocol number 2 to 5 (a pickle renamed
    to ``.npy`` or ``.skops``).
    """
    name = str(path)
    head = b""
    try:
        with open(name, "rb") as handle:
            head = handle.read(2)
    except OSError:
        pass
    is_pickle = name.lower().endswith(PICKLE_SUFFIXES) or (
        len(head) == 2 and head[0] == 0x80 and 2 <= head[1] <= 5
    )
    if is_pickle:
        raise DataFileError(
            f"{name}: ope never loads pickles: unpickling runs whatever code the file names, so a "
            f"model or array from elsewhere could take over this process. Give {what} instead "
            "(a scikit-learn classifier saved with skops.io.dump to a .skops file; an array "
            "saved with numpy.save to a .npy file)."
        )


def local_file(path: str | os.PathLike[str], what: str) -> Path:
    """The local regular file ``path`` names (:func:`ope.io.locate_input`: a str or path-like,
    not empty, existing, not a directory or special file); a remote URI is a DataFileError."""
    found = locate_input(path, what=what, directories=False, argument="path")
    if found.filesystem is not None:
        raise DataFileError(f"{path}: {what} is read from a local file; copy it locally first.")
    return Path(found.path)


def _int_column(logs: BanditLogs, name: str, *, owner: str, why: str) -> npt.NDArray[np.int64]:
    """An integer column of the logs (no nulls) as int64."""
    if name not in logs.table.column_names:
        raise PolicyError(f"{owner} needs the logs' `{name}` column ({why}), which is absent.")
    col = decode(logs.table.column(name))
    if not pa.types.is_integer(col.type):
        raise SchemaError(f"{owner}: `{name}` must hold whole numbers (int64), got {col.type}.")
    if col.null_count:
        bad = np.asarray(pc.is_null(col).to_numpy(zero_copy_only=False), dtype=bool)
        raise PolicyError(f"{owner}: `{name}` is missing (null) in {rows_text(bad)}.")
    return np.asarray(col.to_numpy(), dtype=np.int64)


class LoggingPolicy:
    """The logging policy itself, as a candidate: an on-policy sanity check.

    Its probability of each logged action is the logged ``propensity``, so every importance
    weight is 1 and the IPS estimate is the mean logged reward. Its distribution (needed by the
    doubly robust family) is the logged ``logging_distribution`` over ``candidates``
    (:func:`ope.policies.logging_distribution`).

    Notes
    -----
    .. math:: \\pi(a_i \\mid x_i) = \\pi_b(a_i \\mid x_i) = \\texttt{propensity}_i.

    For logs whose propensity is position-wise (the Open Bandit Dataset), the candidate is the
    same position-wise quantity, so the weights are 1 there too.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from ope.logs import BanditLogs, ValidationReport
    >>> t = pa.table({"action": [1, 2], "propensity": [0.5, 0.25], "reward": [1.0, 0.0]})
    >>> logs = BanditLogs(t, ValidationReport(source="<doc>", rows_read=2, rows_used=2))
    >>> LoggingPolicy().propensity(logs).tolist()
    [0.5, 0.25]
    """

    def propensity(self, logs: BanditLogs) -> npt.NDArray[np.float64]:
        """The logged ``propensity`` column, shape (n,)."""
        logs = require_logs(logs, "LoggingPolicy.propensity")
        if "propensity" not in logs.table.column_names:
            raise PolicyError("LoggingPolicy needs the logs' `propensity` column, which is absent.")
        return to_float64(logs.table.column("propensity"))

    def distribution(self, logs: BanditLogs) -> PolicyDistribution:
        """The logged ``logging_distribution`` over each row's ``candidates``."""
        logs = require_logs(logs, "LoggingPolicy.distribution")
        return logging_distribution(logs)

    def __repr__(self) -> str:
        return "LoggingPolicy()"


class ChosenActionPolicy:
    """The deterministic policy that takes, in each row, the action named in a column.

    Parameters
    ----------
    column : str
        A column of the logs holding one action label per row (the same type as ``action``),
        e.g. the action a new model would have chosen.

    Notes
    -----
    .. math:: \\pi(a \\mid x_i) = \\mathbb 1[a = g_i], \\qquad g_i = \\texttt{column}_i.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from ope.logs import BanditLogs, ValidationReport
    >>> t = pa.table({"action": [1, 2], "propensity": [0.5, 0.5], "reward": [1.0, 0.0],
    ...               "greedy": [1, 1]})
    >>> logs = BanditLogs(t, ValidationReport(source="<doc>", rows_read=2, rows_used=2))
    >>> ChosenActionPolicy("greedy").propensity(logs).tolist()
    [1.0, 0.0]
    """

    def __init__(self, column: str) -> None:
        if not isinstance(column, str) or not column:
            raise PolicyError(f"ChosenActionPolicy: column must be a column name, got {column!r}.")
        self.column = column

    def _chosen(self, logs: BanditLogs) -> pa.ChunkedArray:
        owner = f"ChosenActionPolicy({self.column!r})"
        if self.column not in logs.table.column_names:
            raise PolicyError(f"{owner}: the logs have no column {self.column!r}.")
        action = action_column(logs)
        chosen = decode(logs.table.column(self.column))
        if not (is_label_type(chosen.type) and same_kind(chosen.type, action.type)):
            raise SchemaError(
                f"{owner}: column {self.column!r} must hold action labels of the logged actions' "
                f"type ({action.type}), got {chosen.type}."
            )
        if chosen.null_count:
            bad = np.asarray(pc.is_null(chosen).to_numpy(zero_copy_only=False), dtype=bool)
            raise PolicyError(
                f"{owner}: column {self.column!r} is missing (null) in {rows_text(bad)}."
            )
        return pc.cast(chosen, action.type) if chosen.type != action.type else chosen

    def propensity(self, logs: BanditLogs) -> npt.NDArray[np.float64]:
        """1 where the logged action is the chosen one, else 0."""
        logs = require_logs(logs, "ChosenActionPolicy.propensity")
        chosen = self._chosen(logs)
        same = pc.equal(action_column(logs), chosen)
        return np.asarray(same.to_numpy(), dtype=np.float64)

    def distribution(self, logs: BanditLogs) -> PolicyDistribution:
        """One entry (probability 1) per row, at the chosen action."""
        import scipy.sparse as sp

        logs = require_logs(logs, "ChosenActionPolicy.distribution")
        chosen = self._chosen(logs)
        index = action_index(logs, [chosen])
        n = logs.n
        m = sp.csr_array(
            (np.ones(n), index.codes(chosen).astype(np.int64), np.arange(n + 1, dtype=np.int64)),
            shape=(n, index.n_actions),
        )
        return trusted_distribution(m, index.actions)

    def __repr__(self) -> str:
        return f"ChosenActionPolicy({self.column!r})"


def _integer_actions(logs: BanditLogs, k: int, *, owner: str) -> npt.NDArray[np.int64]:
    """The logged actions as column indices 0..k-1 of an array (integers in range)."""
    action = action_column(logs)
    if not pa.types.is_integer(action.type):
        raise PolicyError(
            f"{owner}: the columns of a distribution array are the action ids 0..{k - 1}, but "
            f"the logged actions are {action.type} labels; give a per-action table "
            "(action, probability) instead."
        )
    a = np.asarray(action.to_numpy(), dtype=np.int64)
    bad = (a < 0) | (a >= k)
    if bad.any():
        raise PolicyError(
            f"{owner}: the array has {k} action columns (ids 0..{k - 1}), but the logged action "
            f"is outside them in {rows_text(bad)} (actions {examples(a[bad])}); the array's "
            "columns must cover every logged action id."
        )
    return a


class ArrayPolicy:
    """A distribution array saved with ``numpy.save``: one row per logged event, in log order.

    Parameters
    ----------
    path : str or path-like
        A ``.npy`` file holding a float array of shape (n, K), where ``[i, a]`` is the
        probability of action id ``a`` in row ``i``, or (n, K, P), where ``[i, a, k]`` is the
        probability of action ``a`` at position ``k`` (the Open Bandit Pipeline's
        ``action_dist``). The file is memory-mapped, never loaded whole; pickled arrays are
        refused.

    Notes
    -----
    Row ``i`` of the file is row ``i`` of the logs as ope reads them (for an Open Bandit Dataset
    campaign: sorted by timestamp, ties in CSV order). The actions are the integer ids
    ``0..K-1``. For shape (n, K, P) the logs need a ``position`` column (0-based, as
    ``ope import obd`` writes it) and row ``i`` is the distribution at its logged position:

    .. math:: \\pi(a \\mid x_i) = D[i, a, k_i], \\qquad \\sum_a D[i, a, k] = 1 \\text{ for every } k.

    On construction every row (and position) is checked to hold finite probabilities in
    [0, 1] that sum to 1 (within :data:`~ope.policies.PROBABILITY_TOLERANCE`, widened by the
    rounding of a float32 or float16 file), one block of rows at a time.

    Examples
    --------
    >>> import numpy as np, pyarrow as pa, tempfile, os
    >>> from ope.logs import BanditLogs, ValidationReport
    >>> path = os.path.join(tempfile.mkdtemp(), "dist.npy")
    >>> np.save(path, np.array([[0.25, 0.75], [1.0, 0.0]]))
    >>> t = pa.table({"action": [1, 1], "propensity": [0.5, 0.5], "reward": [1.0, 0.0]})
    >>> logs = BanditLogs(t, ValidationReport(source="<doc>", rows_read=2, rows_used=2))
    >>> ArrayPolicy(path).propensity(logs).tolist()
    [0.75, 0.0]
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = str(path)
        local = local_file(path, "a distribution array")
        refuse_pickle(local, what="a .npy array saved with numpy.save")
        try:
            arr = np.load(local, mmap_mode="r", allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            raise DataFileError(
                f"{self.path}: not a .npy array that numpy.save wrote ({exc}); save the "
                "distribution with numpy.save(path, array)."
            ) from None
        if not isinstance(arr, np.ndarray):  # an .npz archive
            arr.close()
            raise DataFileError(
                f"{self.path}: an .npz archive, not one .npy array; save the distribution with "
                "numpy.save(path, array)."
            )
        if arr.dtype.kind != "f":
            raise DataFileError(
                f"{self.path}: the array holds {arr.dtype}; probabilities must be floats."
            )
        if arr.ndim not in (2, 3) or 0 in arr.shape:
            raise DataFileError(
                f"{self.path}: the array has shape {arr.shape}; it must be (n, K) (rows x actions) "
                "or (n, K, P) (rows x actions x positions), with n the number of logged events."
            )
        self._array = arr
        self._check()

    @property
    def shape(self) -> tuple[int, ...]:
        """The array's shape: (n, K) or (n, K, P)."""
        return tuple(self._array.shape)

    def _blocks(self) -> Any:
        arr = self._array
        per_row = int(np.prod(arr.shape[1:]))
        rows = max(1, _BLOCK_ELEMENTS // per_row)
        for start in range(0, arr.shape[0], rows):
            yield start, np.asarray(arr[start : start + rows], dtype=np.float64)

    def _check(self) -> None:
        arr = self._array
        u = 0.0 if arr.dtype == np.float64 else float(np.finfo(arr.dtype).eps) / 2.0
        tol = max(PROBABILITY_TOLERANCE, 2.0 * u)
        bad_entry: list[int] = []
        bad_sum: list[tuple[int, float]] = []
        n_entry = n_sum = 0
        for start, block in self._blocks():
            ok = (block >= 0.0) & (block <= 1.0)  # NaN fails both
            if not ok.all():
                rows = np.flatnonzero(~ok.reshape(ok.shape[0], -1).all(axis=1)) + start
                n_entry += rows.size
                bad_entry.extend(rows[: EXAMPLES + 1].tolist())
                continue
            sums = block.sum(axis=1)  # (rows,) or (rows, P)
            off = np.abs(sums - 1.0) > tol
            if off.ndim == 2:  # per position: report the first position that is off
                first = np.argmax(off, axis=1)
                sums = sums[np.arange(sums.shape[0]), first]
                off = off.any(axis=1)
            if off.any():
                rows = np.flatnonzero(off)
                n_sum += rows.size
                bad_sum.extend(zip((rows + start).tolist(), sums[rows].tolist()))
        if n_entry:
            raise PolicyError(
                f"{self.path}: probabilities must be finite and in [0, 1]; {n_entry:,} rows hold "
                f"other values (first at rows {examples(bad_entry)})."
            )
        if n_sum:
            per = "at every position " if arr.ndim == 3 else ""
            raise PolicyError(
                f"{self.path}: each row's probabilities over the {arr.shape[1]} actions must sum "
                f"to 1 {per}(within {tol:g}); {n_sum:,} rows do not (first at rows "
                f"{examples([r for r, _ in bad_sum])}, sums {examples([round(s, 6) for _, s in bad_sum])})."
            )

    def _aligned(
        self, logs: BanditLogs
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64] | None]:
        """(action ids, positions or None) of the logs, checked against the array's shape."""
        arr = self._array
        owner = self.path
        if arr.shape[0] != logs.n:
            dropped = logs.report.rows_rejected
            hint = (
                f"; the logs dropped {dropped:,} invalid rows of {logs.report.rows_read:,}, so the "
                "array's rows no longer line up with them: fix those rows or drop the same rows "
                "from the array"
                if dropped
                else "; row i of the array must be row i of the logs as ope reads them"
            )
            raise PolicyError(
                f"{owner}: the array has {arr.shape[0]:,} rows but the logs have {logs.n:,}"
                + hint
                + "."
            )
        a = _integer_actions(logs, arr.shape[1], owner=owner)
        if arr.ndim == 2:
            return a, None
        n_pos = arr.shape[2]
        pos = _int_column(
            logs,
            "position",
            owner=owner,
            why=f"the array holds one distribution per position, shape {arr.shape}",
        )
        bad = (pos < 0) | (pos >= n_pos)
        if bad.any():
            raise PolicyError(
                f"{owner}: the array has {n_pos} positions (0..{n_pos - 1}), but the logged "
                f"`position` is outside them in {rows_text(bad)} (positions {examples(pos[bad])}); "
                "positions are 0-based, as `ope import obd` writes them."
            )
        return a, pos

    def propensity(self, logs: BanditLogs) -> npt.NDArray[np.float64]:
        """``D[i, a_i]`` or ``D[i, a_i, k_i]`` for every row, shape (n,)."""
        logs = require_logs(logs, "ArrayPolicy.propensity")
        a, pos = self._aligned(logs)
        rows = np.arange(logs.n)
        if pos is None:
            return np.asarray(self._array[rows, a], dtype=np.float64)
        return np.asarray(self._array[rows, a, pos], dtype=np.float64)

    def distribution(self, logs: BanditLogs) -> PolicyDistribution:
        """The nonzero entries of each row (at its logged position), as a sparse matrix."""
        import scipy.sparse as sp

        logs = require_logs(logs, "ArrayPolicy.distribution")
        a, pos = self._aligned(logs)
        arr = self._array
        k = arr.shape[1]
        action_type = action_column(logs).type
        index = action_index(logs, [pa.array(np.arange(k), type=action_type)])
        code = index.codes(pa.array(np.arange(k), type=action_type)).astype(np.int64)
        counts, indices, data = [], [], []
        for start, block in self._blocks():
            if pos is not None:
                p = pos[start : start + block.shape[0]]
                block = np.take_along_axis(block, p[:, None, None], axis=2)[:, :, 0]
            r, c = np.nonzero(block)
            counts.append(np.bincount(r, minlength=block.shape[0]))
            indices.append(code[c])
            data.append(block[r, c])
        indptr = np.zeros(logs.n + 1, dtype=np.int64)
        np.cumsum(np.concatenate(counts), out=indptr[1:])
        m = sp.csr_array(
            (np.concatenate(data), np.concatenate(indices), indptr), shape=(logs.n, index.n_actions)
        )
        return trusted_distribution(m, index.actions)

    def __repr__(self) -> str:
        return f"ArrayPolicy({self.path!r}, shape={self.shape})"


_TABLE_COLUMNS: Final = ("action", "position", "probability")


def _read_table(path: str | os.PathLike[str]) -> pa.Table:
    local = local_file(path, "a per-action policy table")
    refuse_pickle(local, what="a per-action table in CSV or parquet")
    name = local.name.lower()
    try:
        if name.endswith((".csv", ".csv.gz")):
            import pyarrow.csv as pacsv

            table = pacsv.read_csv(local)
            csv_column_names(table, f"{path}")
            return table
        if name.endswith((".parquet", ".pq")):
            import pyarrow.parquet as pq

            return pq.read_table(local)
    except (pa.ArrowException, OSError) as exc:
        raise DataFileError(f"{path}: could not be read: {exc}") from None
    raise DataFileError(f"{path}: a per-action table must be a .csv or .parquet file.")


class ActionTablePolicy:
    """A context-free policy given by a table ``action[, position], probability``.

    Parameters
    ----------
    table : str, path-like, pyarrow.Table or pandas.DataFrame
        A CSV or parquet file (or a table) with columns ``action`` and ``probability``, and
        optionally ``position`` (0-based, as ``ope import obd`` writes it). Without
        ``position`` every row gets the same distribution; with it, each logged row gets the
        distribution of its logged position.

    Notes
    -----
    .. math:: \\pi(a \\mid x_i) = T(a, k_i), \\qquad \\sum_a T(a, k) = 1 \\text{ for every } k,

    with :math:`k_i` the logged position (one position for a table without ``position``).
    This is the form of a policy whose choice does not depend on the context, e.g. the
    Bernoulli Thompson sampling policy of the Open Bandit Dataset, whose probability of putting
    item ``a`` at position ``k`` is the same for every user. An action absent from the table has
    probability 0. When the logs have ``candidates``, the table's mass at each row's position
    must lie on that row's candidates (a policy cannot choose an action that was not offered):
    a row where the candidates carry less than all of it is a ``PolicyError`` naming the row
    and the actions outside. Its distribution stores one entry per row and table action of that
    row's position.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from ope.logs import BanditLogs, ValidationReport
    >>> table = pa.table({"action": [0, 1, 0, 1], "position": [0, 0, 1, 1],
    ...                   "probability": [0.9, 0.1, 0.2, 0.8]})
    >>> t = pa.table({"action": [1, 1], "position": [0, 1], "propensity": [0.5, 0.5],
    ...               "reward": [1.0, 0.0]})
    >>> logs = BanditLogs(t, ValidationReport(source="<doc>", rows_read=2, rows_used=2))
    >>> ActionTablePolicy(table).propensity(logs).tolist()
    [0.1, 0.8]
    """

    def __init__(self, table: Any) -> None:
        if isinstance(table, (str, os.PathLike)):
            self.source = str(table)
            table = _read_table(table)
        else:
            self.source = f"<{type(table).__name__}>"
            if is_dataframe(table):
                table = pa.Table.from_pandas(table, preserve_index=False)
            if not isinstance(table, pa.Table):
                raise PolicyError(
                    f"ActionTablePolicy: table must be a path, a pyarrow Table or a pandas "
                    f"DataFrame, got {type(table).__name__}."
                )
        self.actions, self.positions, self.probabilities = self._checked(table)

    def _checked(
        self, table: pa.Table
    ) -> tuple[pa.Array, npt.NDArray[np.int64] | None, npt.NDArray[np.float64]]:
        src = self.source
        names = table.column_names
        if "event_id" in names and "policy" in names:
            raise SchemaError(
                f"{src}: this is a long-format policy table (event_id, policy, action, "
                "probability), one distribution per event, not a per-action table: give it as "
                "a policy table (ope evaluate LOGS --policies FILE)."
            )
        missing = [c for c in ("action", "probability") if c not in names]
        extra = [c for c in names if c not in _TABLE_COLUMNS]
        if missing or extra or len(set(names)) != len(names):
            raise SchemaError(
                f"{src}: a per-action table has the columns action, probability and optionally "
                f"position (0-based); it has {names}"
                + (f" (missing {missing})" if missing else "")
                + (f" (unknown {extra})" if extra else "")
                + "."
            )
        if table.num_rows == 0:
            raise DataFileError(f"{src}: the table has no rows.")
        problems = []
        for c in names:
            if table.column(c).null_count:
                bad = np.asarray(
                    pc.is_null(table.column(c)).to_numpy(zero_copy_only=False), dtype=bool
                )
                problems.append(f"`{c}` is missing in {rows_text(bad)}")
        actions = decode(table.column("action")).combine_chunks()
        if not is_label_type(actions.type):
            problems.append(f"`action` must hold int64 or string labels, got {actions.type}")
        prob_col = decode(table.column("probability"))
        if not (pa.types.is_floating(prob_col.type) or pa.types.is_integer(prob_col.type)):
            problems.append(f"`probability` must hold numbers, got {prob_col.type}")
        positions = None
        if "position" in names:
            pos_col = decode(table.column("position"))
            if not pa.types.is_integer(pos_col.type):
                problems.append(f"`position` must hold whole numbers (0-based), got {pos_col.type}")
            else:
                positions = np.asarray(pos_col.to_numpy(zero_copy_only=False), dtype=np.int64)
        if problems:
            raise SchemaError(f"{src}: " + "; ".join(problems) + ".")
        prob = to_float64(prob_col)
        bad = ~((prob >= 0.0) & (prob <= 1.0))
        if bad.any():
            raise PolicyError(
                f"{src}: probabilities must be finite and in [0, 1]; they are not in "
                f"{rows_text(bad)} of the table (values {examples(prob[bad])})."
            )
        if positions is not None and (positions < 0).any():
            raise PolicyError(
                f"{src}: positions are 0-based; {rows_text(positions < 0)} are negative."
            )
        group = positions if positions is not None else np.zeros(prob.size, np.int64)
        key = pa.table({"a": actions, "k": group})
        if len(key.group_by(["a", "k"]).aggregate([])) != key.num_rows:
            raise PolicyError(
                f"{src}: an action appears more than once"
                + (" at the same position" if positions is not None else "")
                + "; give one probability per action"
                + (" and position." if positions is not None else ".")
            )
        levels, inverse = np.unique(group, return_inverse=True)
        sums = np.bincount(inverse, weights=prob)
        off = np.abs(sums - 1.0) > PROBABILITY_TOLERANCE
        if off.any():
            where = f"at positions {examples(levels[off])} " if positions is not None else ""
            raise PolicyError(
                f"{src}: the probabilities must sum to 1 over the actions"
                + (" of each position" if positions is not None else "")
                + f" (within {PROBABILITY_TOLERANCE:g}); they sum to "
                f"{examples(np.round(sums[off], 6))} {where}instead. Renormalize them, and make "
                "sure no action with positive probability was left out."
            )
        return actions, positions, prob

    def _segments(
        self, logs: BanditLogs
    ) -> tuple[Any, npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(action index, each table row's action code, each logged row's position level)."""
        action = action_column(logs)
        labels = self.actions
        if labels.type != action.type:
            if not same_kind(labels.type, action.type):
                raise SchemaError(
                    f"{self.source}: `action` holds {labels.type} labels but the logged actions "
                    f"are {action.type}; use the action ids exactly as they appear in the logs."
                )
            labels = pc.cast(labels, action.type)
        index = action_index(logs, [labels])
        codes = index.codes(labels).astype(np.int64)
        if self.positions is None:
            return index, codes, np.zeros(logs.n, dtype=np.int64)
        pos = _int_column(
            logs, "position", owner=self.source, why="the table gives one distribution per position"
        )
        levels = np.unique(self.positions)
        level = np.searchsorted(levels, pos)
        level_c = np.minimum(level, levels.size - 1)
        unknown = levels[level_c] != pos
        if unknown.any():
            raise PolicyError(
                f"{self.source}: the table has no probabilities for the logged position in "
                f"{rows_text(unknown)} (positions {examples(np.unique(pos[unknown]))}; the table "
                f"has {examples(levels)}); positions are 0-based, as `ope import obd` writes them."
            )
        return index, codes, level_c

    def _matrix(self, index: Any, codes: npt.NDArray[np.int64]) -> sp.csr_array:
        """(positions, catalog) matrix of the table's probabilities, canonical CSR."""
        import scipy.sparse as sp

        group = self.positions if self.positions is not None else np.zeros(codes.size, np.int64)
        levels, inverse = np.unique(group, return_inverse=True)
        m = sp.csr_array(
            (self.probabilities, (inverse, codes)), shape=(levels.size, index.n_actions)
        )
        m.sum_duplicates()
        m.eliminate_zeros()
        return m

    def _check_offered(self, index: Any, m: sp.csr_array, level: npt.NDArray[np.int64]) -> None:
        """Refuse rows whose ``candidates`` do not carry the table's whole mass at their
        position (the table would choose actions that were not offered)."""
        if index.candidates is None:
            return
        sets = candidate_sets(index, what=self.source)
        row = np.repeat(np.arange(sets.lengths.size), sets.lengths)  # one per candidate entry
        offered = np.asarray(m[level[row], sets.codes.astype(np.int64)], dtype=np.float64)
        mass = np.bincount(row, weights=offered.ravel(), minlength=sets.lengths.size)
        short = mass < 1.0 - PROBABILITY_TOLERANCE
        if not short.any():
            return
        first = int(np.flatnonzero(short)[0])
        table_codes = m.indices[m.indptr[level[first]] : m.indptr[level[first] + 1]]
        row_codes = sets.codes[sets.indptr[first] : sets.indptr[first + 1]]
        outside = np.setdiff1d(table_codes, row_codes)
        labels = index.catalog.take(pa.array(outside)).to_pylist()
        raise PolicyError(
            f"{self.source}: the table gives probability to actions that were not offered: in "
            f"{rows_text(short)} the row's `candidates` carry only "
            f"{examples(np.unique(np.round(mass[short], 6)))} of the table's mass (first row "
            f"{first}: actions {examples(labels)} are not among its candidates). Give "
            "probabilities only to offered actions, or evaluate on logs without a `candidates` "
            "column."
        )

    def propensity(self, logs: BanditLogs) -> npt.NDArray[np.float64]:
        """``T(a_i, k_i)`` for every row, shape (n,)."""
        logs = require_logs(logs, "ActionTablePolicy.propensity")
        index, codes, level = self._segments(logs)
        m = self._matrix(index, codes)
        self._check_offered(index, m, level)
        out = np.zeros(logs.n, dtype=np.float64)
        ok = index.logged >= 0
        out[ok] = m[level[ok], index.logged[ok].astype(np.int64)]
        return out

    def distribution(self, logs: BanditLogs) -> PolicyDistribution:
        """Each row's distribution at its logged position (the table's entries, repeated)."""
        import scipy.sparse as sp

        logs = require_logs(logs, "ActionTablePolicy.distribution")
        index, codes, level = self._segments(logs)
        m = self._matrix(index, codes)
        self._check_offered(index, m, level)
        lengths = np.diff(m.indptr)[level]
        indptr = np.zeros(logs.n + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        gather = np.repeat(m.indptr[level] - indptr[:-1], lengths) + np.arange(indptr[-1])
        rows = sp.csr_array(
            (m.data[gather], m.indices[gather], indptr), shape=(logs.n, index.n_actions)
        )
        return trusted_distribution(rows, index.actions)

    def __repr__(self) -> str:
        return f"ActionTablePolicy({self.source!r})"


def logged_action_table(logs: BanditLogs, *, by_position: bool | None = None) -> pa.Table:
    """The logging policy of context-free logs as a per-action (or per-(action, position)) table.

    Parameters
    ----------
    logs : BanditLogs
        Logs whose logging policy does not depend on the context: the logged ``propensity`` of
        an action (at a position) is the same in every row that logged it.
    by_position : bool, optional
        One distribution per logged ``position`` (default: when the logs have a ``position``
        column).

    Returns
    -------
    pyarrow.Table
        ``action[, position], probability``, sorted, in the format :class:`ActionTablePolicy`
        reads: a candidate for other logs (``--policy NAME=table:FILE``).

    Raises
    ------
    PolicyError
        The logged propensity of some (action, position) varies by more than
        :data:`~ope.policies.PROBABILITY_TOLERANCE` (the logger depends on the context or
        changed over time, so it is no one table), or a position's probabilities do not sum to
        1 (actions it puts there were never logged, so their probability is unknown).

    Notes
    -----
    For an Open Bandit Dataset campaign collected by Bernoulli Thompson sampling, the logged
    ``propensity_score`` is the probability that the policy puts the item at that position,
    so the table is

    .. math:: T(a, k) = \\texttt{propensity}_i \\text{ for any row } i \\text{ with }
              (a_i, k_i) = (a, k),

    and every (item, position) pair must have been logged at least once for the table to be
    complete.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from ope.logs import BanditLogs, ValidationReport
    >>> t = pa.table({"action": [0, 1, 0, 1], "position": [0, 0, 1, 1], "reward": [1.0] * 4,
    ...               "propensity": [0.75, 0.25, 0.5, 0.5]})
    >>> logs = BanditLogs(t, ValidationReport(source="<doc>", rows_read=4, rows_used=4))
    >>> logged_action_table(logs).to_pydict()
    {'action': [0, 1, 0, 1], 'position': [0, 0, 1, 1], 'probability': [0.75, 0.25, 0.5, 0.5]}
    """
    logs = require_logs(logs, "logged_action_table")
    by_position = check_flag(by_position, "by_position", allow_none=True)
    names = logs.table.column_names
    if by_position is None:
        by_position = "position" in names
    keys = ["action", "position"] if by_position else ["action"]
    if by_position:
        _int_column(logs, "position", owner="logged_action_table", why="by_position=True")
    if "propensity" not in names:
        raise PolicyError(
            "logged_action_table needs the logs' `propensity` column, which is absent."
        )
    table = pa.table(
        {
            "action": action_column(logs),
            **({"position": decode(logs.table.column("position"))} if by_position else {}),
            "propensity": pa.array(to_float64(logs.table.column("propensity"))),
        }
    )
    grouped = (
        table.group_by(keys)
        .aggregate([("propensity", "min"), ("propensity", "max"), ("propensity", "count")])
        .sort_by([(k, "ascending") for k in reversed(keys)])
    )  # by position, then action
    low = to_float64(grouped.column("propensity_min"))
    high = to_float64(grouped.column("propensity_max"))
    varies = (high - low) > PROBABILITY_TOLERANCE
    if varies.any():
        j = int(np.flatnonzero(varies)[0])
        where = ", ".join(f"{k} {grouped.column(k)[j].as_py()!r}" for k in keys)
        raise PolicyError(
            f"the logged propensity is not one number per {' and '.join(keys)}: it varies in "
            f"{int(varies.sum()):,} of {len(grouped):,} pairs (first: {where}, from {low[j]:g} to "
            f"{high[j]:g} over {grouped.column('propensity_count')[j].as_py():,} rows). The "
            "logging policy depends on the context or changed over time, so it is no one "
            "per-action table."
        )
    group = (
        np.asarray(grouped.column("position").to_numpy(), dtype=np.int64)
        if by_position
        else np.zeros(len(grouped), dtype=np.int64)
    )
    levels, inverse = np.unique(group, return_inverse=True)
    sums = np.bincount(inverse, weights=low)
    off = np.abs(sums - 1.0) > PROBABILITY_TOLERANCE
    if off.any():
        where = f" at positions {examples(levels[off])}" if by_position else ""
        raise PolicyError(
            f"the logged propensities of the distinct actions sum to {examples(np.round(sums[off], 6))}"
            f"{where}, not 1 (within {PROBABILITY_TOLERANCE:g}): actions the logger puts there "
            "with positive probability were never logged, so their probability is unknown. "
            "More logs (or the logger's own table) are needed."
        )
    out = {k: grouped.column(k) for k in keys}
    return pa.table({**out, "probability": pa.array(low)})
