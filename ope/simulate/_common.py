"""Shared helpers of the simulators: argument checks, policy tables, exact categorical draws.

Everything here works on small model tables (context types × actions) or on per-row vectors;
nothing builds a dense (rows × actions) array.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from ope.exceptions import PolicyError

__all__: list[str] = []

#: tolerance on ``|sum_a pi(a|x) - 1|`` for a user-supplied policy table; float64 sums of a few
#: thousand probabilities stay far below it, while a table that forgot to normalise does not
POLICY_SUM_TOL: Final = 1e-8

#: prefix of the columns holding pi_name(action_i | x_i) (DESIGN.md §2)
TARGET_PREFIX: Final = "target__"
#: prefix of the list columns holding pi_name over ``candidates`` (DESIGN.md §2)
TARGET_DIST_PREFIX: Final = "target_dist__"
#: prefix of the oracle columns holding q(x_i, pi_name) = sum_a pi_name(a|x_i) q(x_i, a)
Q_TARGET_PREFIX: Final = "q_target__"

def check_rng(rng: int | np.random.Generator | None) -> np.random.Generator:
    """Return a Generator from an int seed, a Generator (used as is) or None (fresh entropy)."""
    if rng is None or isinstance(rng, (int, np.integer)):
        return np.random.default_rng(rng)
    if isinstance(rng, np.random.Generator):
        return rng
    raise TypeError(
        f"rng must be an int seed, a numpy.random.Generator or None; got {type(rng).__name__}. "
        "Pass e.g. rng=0 or rng=numpy.random.default_rng(0)."
    )


def check_int(name: str, value: object, *, minimum: int, maximum: int | None = None) -> int:
    """Check that ``value`` is an integer in ``[minimum, maximum]``; return it as ``int``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer; got {value!r} ({type(value).__name__}).")
    if value < minimum or (maximum is not None and value > maximum):
        upper = "" if maximum is None else f" and <= {maximum}"
        raise ValueError(f"{name} must be >= {minimum}{upper}; got {value}.")
    return int(value)


def check_float(
    name: str,
    value: object,
    *,
    low: float,
    high: float,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """Check that ``value`` is a finite real number in the stated interval; return it."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number; got {value!r} ({type(value).__name__}).")
    v = float(value)
    bad = (
        not np.isfinite(v)
        or (v <= low if low_open else v < low)
        or (v >= high if high_open else v > high)
    )
    if bad:
        lb = "(" if low_open else "["
        hb = ")" if high_open else "]"
        raise ValueError(f"{name} must be in {lb}{low}, {high}{hb}; got {value!r}.")
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
    table: npt.ArrayLike, *, shape: tuple[int, int], what: str, rows: str, columns: str
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
            f"{what} must have shape {shape} ({rows} x {columns}); got shape {arr.shape}."
        )
    bad = ~np.isfinite(arr).all(axis=1) | (arr < 0).any(axis=1) | (arr > 1).any(axis=1)
    if bad.any():
        idx = np.flatnonzero(bad)
        raise PolicyError(
            f"{what} must hold probabilities in [0, 1]; {idx.size} {rows} break this "
            f"(first at row {idx[0]}: {arr[idx[0]].tolist()})."
        )
    sums = arr.sum(axis=1)
    off = np.abs(sums - 1.0) > POLICY_SUM_TOL
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
) -> npt.NDArray[np.float64]:
    """A policy given by name (a key of ``tables``) or as a probability table."""
    if isinstance(policy, str):
        try:
            return tables[policy]
        except KeyError:
            raise PolicyError(
                f"unknown policy {policy!r}; known policies: {', '.join(sorted(tables))}. "
                f"Or pass a probability table of shape {shape} ({rows} x {columns})."
            ) from None
    return check_policy_table(policy, shape=shape, what="policy table", rows=rows, columns=columns)


def check_policy_names(names: Mapping[str, object], reserved: set[str]) -> None:
    """Policy names become column suffixes: they must be non-empty identifiers, not reserved."""
    for name in names:
        if not isinstance(name, str) or not name.isidentifier():
            raise PolicyError(
                f"policy names must be Python identifiers (they become column names "
                f"'target__<name>'); got {name!r}."
            )
        if name in reserved:
            raise PolicyError(
                f"policy name {name!r} is already used by a built-in policy "
                f"({', '.join(sorted(reserved))}); choose another name."
            )


def check_ids(ids: npt.ArrayLike, size: int, name: str) -> npt.NDArray[np.int64]:
    """Check per-row integer ids in ``[0, size)``; return them as int64."""
    arr = np.asarray(ids)
    if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(
            f"{name} must be a 1-d integer array; got dtype {arr.dtype}, shape {arr.shape}."
        )
    bad = (arr < 0) | (arr >= size)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{name} must lie in [0, {size - 1}]; {int(bad.sum())} entries do not "
            f"(first at position {i}: {arr[i]})."
        )
    return arr.astype(np.int64, copy=False)
