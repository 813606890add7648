r"""Discounted returns, TD errors, lambda-returns and GAE over variable-length episodes.

Four functions turn one row per step (``ope.Trajectories`` or plain arrays) into one float64
value per step, aligned with the rows:

:func:`discounted_returns`
    :math:`G_t = \sum_{k \ge 0} \gamma^k r_{t+k}` to the end of the episode;
:func:`td_errors`
    :math:`\delta_t = r_t + \gamma V(s_{t+1}) - V(s_t)`;
:func:`lambda_returns`
    :math:`G^\lambda_t`, the TD(:math:`\lambda`) target (V-trace targets with ``ratios=``);
:func:`gae`
    generalized advantage estimates :math:`G^\lambda_t - V(s_t)` (Schulman et al. 2016).

**What comes after an episode's last step** is decided by ``done`` (docs/guide/logs.md): after a
step with ``done = True`` the episode terminated and the value of what follows is 0; after a
last step with ``done = False`` the episode was *truncated* (the log ends, the episode did not)
and what follows is worth :math:`V(s_L)`, the value of the state it was left in. That value is
``tail_value``. When truncated episodes exist and no ``tail_value`` is given the functions raise
:class:`ope.EstimationError` rather than silently use 0: treating truncation as termination
biases every return and TD error near the end of the truncated episodes (the most common bug of
trajectory code). ``tail_value=0.0`` says so knowingly.

**Off-policy corrections.** With ``ratios=`` (per-step :math:`\rho_t = \pi(a_t|s_t) /
\mu(a_t|s_t)`, target over behaviour) the targets are V-trace targets (Espeholt et al. 2018)
with two clip levels: ``max_ratio`` :math:`\bar c` clips the trace coefficients
:math:`c_t = \lambda \min(\bar c, \rho_t)` (Retrace-style trace cutting, Munos et al. 2016),
``max_td_ratio`` :math:`\bar\rho` clips the ratio that weights each TD error. None (the default
of both) means no clipping.

**Vectorized.** Every target solves the backward linear recurrence :math:`x_t = b_t + a_t
x_{t+1}` with :math:`a_t = 0` at the last step of each episode, which resets the recurrence
exactly at episode boundaries. It is solved for all episodes at once by recursive doubling:
round :math:`k` composes the affine maps of :math:`2^k` consecutive steps, so
:math:`\lceil \log_2 L_{\max} \rceil` rounds of whole-array numpy operations suffice
(:math:`O(n \log L_{\max})` work, no Python loop over episodes or steps). Each value is a sum
of products of the inputs, never a difference of large running sums, so the result matches a
per-episode loop to rounding error.

References
----------
.. [1] J. Schulman, P. Moritz, S. Levine, M. Jordan and P. Abbeel, "High-dimensional continuous
   control using generalized advantage estimation", Proc. ICLR, 2016.
.. [2] R. Munos, T. Stepleton, A. Harutyunyan and M. G. Bellemare, "Safe and efficient
   off-policy reinforcement learning", Proc. NeurIPS, 2016.
.. [3] L. Espeholt et al., "IMPALA: Scalable distributed deep-RL with importance weighted
   actor-learner architectures", Proc. ICML, 2018.
.. [4] F. Pardo, A. Tavakoli, V. Levdik and P. Kormushev, "Time limits in reinforcement
   learning", Proc. ICML, 2018.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from ope._docstrings import fill_doc
from ope._validation import (
    as_float_array,
    check_finite,
    check_label_kinds,
    check_no_overflow,
    check_real,
    first_rows,
)
from ope.exceptions import EstimationError, ParameterError, SchemaError, ValidationError
from ope.logs import Trajectories

__all__ = ["discounted_returns", "td_errors", "lambda_returns", "gae"]

PerStep = str | npt.ArrayLike
TailValue = float | str | npt.ArrayLike

# --------------------------------------------------------------------------------------------
# shared docstring text (written once, substituted into each function's docstring)
# --------------------------------------------------------------------------------------------
_DOC = {
    "data": """\
data : ope.Trajectories or array_like of shape (n,)
        The steps: validated trajectories (``ope.read_trajectories``; their ``reward`` and
        ``done`` columns and episode offsets are used), or the per-step rewards ``r_t`` as an
        array, in episode order and step order within each episode (then pass ``done`` and
        one of ``episode_starts`` / ``episode_id``).""",
    "values": """\
values : str or array_like of shape (n,)
        :math:`V(s_t)`, a value estimate of the state of each step: a column name of the
        trajectories or an array aligned with the rows.""",
    "gamma": """\
gamma : float
        Discount factor in [0, 1].""",
    "lam": """\
lam : float
        The :math:`\\lambda` of TD(:math:`\\lambda`) / GAE in [0, 1]: 0 gives one-step TD
        targets, 1 Monte Carlo returns.""",
    "structure": """\
done : array_like of bool, shape (n,), optional
        With array ``data`` only: True at the last step of an episode that terminated. An
        episode whose last step has ``done = False`` was truncated.
    episode_starts : array_like of int, optional
        With array ``data`` only: the first row of each episode (0, ...), optionally followed
        by ``n`` (the offsets ``Trajectories.episode_starts`` has).
    episode_id : array_like of shape (n,), optional
        With array ``data`` only, instead of ``episode_starts``: the episode of each row (the
        rows of an episode contiguous).""",
    "tail_value": """\
tail_value : float, str or array_like, optional
        :math:`V(s_L)`, the value of the state each *truncated* episode was left in (read only
        for truncated episodes; after ``done = True`` the bootstrap is always 0):

        - a float: the same value for every truncated episode (``0.0`` treats truncation as
          termination, knowingly);
        - an array with one value per truncated episode (in episode order), or one per episode
          (entries of terminated episodes ignored, may be NaN);
        - an array of shape (n,), or a column name of the trajectories, holding the value of
          the state *after* each step, :math:`V(s_{t+1})` (e.g. a model evaluated on a
          ``next_state`` column): only each truncated episode's last row is read.

        None (default) with truncated episodes present raises ``EstimationError``.""",
    "ratios": """\
ratios : str or array_like of shape (n,), optional
        Per-step importance ratios :math:`\\rho_t = \\pi(a_t|s_t) / \\mu(a_t|s_t)` (target
        over behaviour, >= 0) for off-policy targets; a column name or an array. None: the
        data are on-policy.
    max_ratio : float, optional
        :math:`\\bar c`, the clip level of the *trace* coefficients
        :math:`c_t = \\lambda \\min(\\bar c, \\rho_t)`. None (default): not clipped. Only with
        ``ratios``; Retrace and IMPALA use 1.
    max_td_ratio : float, optional
        :math:`\\bar\\rho`, the clip level of the ratio :math:`\\min(\\bar\\rho, \\rho_t)` that
        weights each TD error (V-trace). None (default): not clipped. Only with ``ratios``;
        IMPALA uses 1. Below the ratios it biases the target towards the value of a policy
        between behaviour and target.""",
    "returns": """\
numpy.ndarray of float64, shape (n,)
        One value per step, aligned with the rows.""",
    "raises": """\
ParameterError
        ``gamma`` or ``lam`` outside [0, 1], a clip level that is not positive, conflicting or
        missing episode arguments.
    ValidationError
        Arrays of the wrong length, NaN or infinite rewards or values, negative ratios,
        ``done = True`` before an episode's last step.
    EstimationError
        Truncated episodes and no ``tail_value``.""",
}


# --------------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Episodes:
    """The validated step structure of one call."""

    reward: np.ndarray  # (n,) float64
    starts: np.ndarray  # (E + 1,) int64 row offsets, last = n
    truncated: np.ndarray  # (E,) bool
    traj: Trajectories | None

    @property
    def n(self) -> int:
        return int(self.reward.size)

    @property
    def n_episodes(self) -> int:
        return int(self.starts.size - 1)

    @property
    def last(self) -> np.ndarray:
        """Row of each episode's last step, (E,)."""
        return self.starts[1:] - 1

    @property
    def max_length(self) -> int:
        return int(np.diff(self.starts).max()) if self.n else 0


def _unit_interval(value: Any, name: str, what: str) -> float:
    x = check_real(value, name)
    if not 0.0 <= x <= 1.0:  # False for NaN
        raise ParameterError(f"`{name}` ({what}) must be in [0, 1]; got {value!r}.")
    return x


def _clip_level(value: Any, name: str, what: str) -> float:
    """A clip level: None (no clipping, returned as inf) or a positive number."""
    if value is None:
        return math.inf
    x = check_real(value, name)
    if not x > 0.0:  # False for NaN
        raise ParameterError(
            f"`{name}` ({what}) must be a positive number, or None for no clipping; got {value!r}."
        )
    return x


def _column(traj: Trajectories, name: str, role: str, rows: np.ndarray | None = None) -> np.ndarray:
    """A numeric column as float64, without missing values (only ``rows`` of it, if given)."""
    if name not in traj.table.column_names:
        raise SchemaError(
            f"`{role}` names column {name!r}, which is not in the trajectories; they have: "
            f"{', '.join(traj.table.column_names)}."
        )
    col = traj.table.column(name)
    if not (pa.types.is_floating(col.type) or pa.types.is_integer(col.type)):
        raise SchemaError(f"`{role}` column {name!r} must be numeric; it has type {col.type}.")
    if rows is not None:
        col = col.take(pa.array(rows))
    if col.null_count:
        count, first = first_rows(col.is_null().to_numpy(zero_copy_only=False))
        where = f"row {first}" if rows is None else f"row {int(rows[first])}"
        raise ValidationError(
            f"`{role}` column {name!r} has {count} missing values where it is read (first at "
            f"{where}). Fill them, or drop those episodes when reading."
        )
    return col.to_numpy().astype(np.float64)


def _per_step(ep: _Episodes, value: PerStep, role: str) -> np.ndarray:
    """A finite float64 array of shape (n,) from a column name or an array."""
    if isinstance(value, str):
        if ep.traj is None:
            raise ParameterError(
                f"`{role}`={value!r} names a column, which needs ope.Trajectories as data; with "
                f"array data pass `{role}` as an array with one value per step."
            )
        arr = _column(ep.traj, value, role)
    else:
        arr = as_float_array(value, role, ndim=(1,)).astype(np.float64, copy=False)
        if arr.shape[0] != ep.n:
            raise ValidationError(
                f"`{role}` has {arr.shape[0]} rows but the data have {ep.n} steps; pass one "
                "value per step, aligned with the rows."
            )
    check_finite(arr, role)
    return arr


def _done_array(done: npt.ArrayLike, n: int) -> np.ndarray:
    arr = np.asarray(done)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValidationError(
            f"`done` must have shape ({n},), one flag per step like the rewards; got shape "
            f"{arr.shape}."
        )
    if arr.dtype == bool:
        return arr
    if arr.dtype.kind in "iuf":
        bad = ~((arr == 0) | (arr == 1))
        if bad.any():
            count, first = first_rows(bad)
            raise ValidationError(
                f"`done` must be boolean (or 0/1); {count} rows are not (first at row {first}: "
                f"{arr[first]!r})."
            )
        return arr.astype(bool)
    raise ValidationError(f"`done` must be boolean; got dtype {arr.dtype}.")


def _starts_from_offsets(episode_starts: npt.ArrayLike, n: int) -> np.ndarray:
    arr = np.asarray(episode_starts)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise ValidationError(
            "`episode_starts` must be a 1-d array of integer row offsets (0, ...); got "
            f"dtype {arr.dtype} and shape {arr.shape}."
        )
    arr = arr.astype(np.int64)
    if n == 0:
        if arr.size and not (arr.size == 1 and arr[0] == 0):
            raise ValidationError(f"`episode_starts` must be empty for empty data; got {arr}.")
        return np.zeros(1, dtype=np.int64)
    if arr.size and arr[-1] == n:  # the offsets form, with the end appended
        arr = arr[:-1]
    if arr.size == 0 or arr[0] != 0:
        raise ValidationError(
            "`episode_starts` must begin with 0 (the first episode starts at row 0); got "
            f"{arr[:3].tolist()}..."
        )
    steps = np.diff(arr)
    if (steps <= 0).any() or arr[-1] >= n:
        count, first = first_rows(np.append(steps <= 0, arr[-1] >= n))
        raise ValidationError(
            f"`episode_starts` must be strictly increasing row offsets below n={n}; {count} "
            f"entries are not (first at entry {first + 1})."
        )
    return np.append(arr, n)


def _starts_from_ids(episode_id: npt.ArrayLike, n: int) -> np.ndarray:
    ids = np.asarray(episode_id)
    if ids.ndim != 1 or ids.shape[0] != n:
        raise ValidationError(
            f"`episode_id` must have shape ({n},), one id per step like the rewards; got shape "
            f"{ids.shape}."
        )
    if n == 0:
        return np.zeros(1, dtype=np.int64)
    if ids.dtype.kind in "fcOmM":  # the kinds that can hold None, NaN or NaT
        import pandas as pd

        missing = np.asarray(pd.isna(ids), dtype=bool)
        if missing.any():
            count, first = first_rows(missing)
            raise ValidationError(
                f"`episode_id` is missing (None or NaN) for {count} rows (first at row "
                f"{first}); every step needs the id of its episode. Fill those ids, or drop "
                "the rows."
            )
        check_label_kinds(ids, "episode_id")  # 1 and "a" have no order to sort by
    change = np.flatnonzero(ids[1:] != ids[:-1]) + 1
    starts = np.concatenate(([0], change, [n])).astype(np.int64)
    n_runs = starts.size - 1
    if np.unique(ids).size != n_runs:
        raise ValidationError(
            f"the rows of an episode must be contiguous, but `episode_id` has {n_runs} runs of "
            f"equal ids and only {np.unique(ids).size} distinct ids: some episode occurs in "
            "separate runs. Sort the rows by (episode_id, step)."
        )
    return starts


def _episodes(
    data: Trajectories | npt.ArrayLike,
    done: npt.ArrayLike | None,
    episode_starts: npt.ArrayLike | None,
    episode_id: npt.ArrayLike | None,
) -> _Episodes:
    """Rewards, episode offsets and truncation flags from either form of the input."""
    if isinstance(data, Trajectories):
        given = [
            name
            for name, val in (
                ("done", done),
                ("episode_starts", episode_starts),
                ("episode_id", episode_id),
            )
            if val is not None
        ]
        if given:
            raise ParameterError(
                f"{', '.join(f'`{g}`' for g in given)} cannot be given with ope.Trajectories, "
                "which carry their own episode structure and `done` column; drop the argument."
            )
        missing = [c for c in ("reward", "done") if c not in data.table.column_names]
        if missing:
            raise SchemaError(
                f"the trajectories lack the column(s) {', '.join(map(repr, missing))}; read "
                "them with ope.read_trajectories (with mapping= for other column names)."
            )
        reward = _column(data, "reward", "reward")
        col = data.table.column("done")
        if col.null_count:
            count, first = first_rows(col.is_null().to_numpy(zero_copy_only=False))
            raise ValidationError(
                f"column 'done' has {count} missing values (first at row {first}); read the "
                "trajectories with ope.read_trajectories, which rejects such episodes."
            )
        done_arr = col.to_numpy(zero_copy_only=False).astype(bool)
        starts = np.asarray(data.episode_starts, dtype=np.int64)
        traj: Trajectories | None = data
    else:
        if isinstance(data, (str, bytes)):
            raise ParameterError(
                f"`data` must be ope.Trajectories or an array of per-step rewards; got the "
                f"string {data!r}. Read a file with ope.read_trajectories first."
            )
        reward = as_float_array(data, "reward", ndim=(1,)).astype(np.float64, copy=False)
        n = reward.shape[0]
        if done is None:
            raise ParameterError(
                "with array data pass `done` (True at the last step of each episode that "
                "terminated, False elsewhere) so that truncated episodes can be told apart."
            )
        done_arr = _done_array(done, n)
        if (episode_starts is None) == (episode_id is None):
            raise ParameterError(
                "with array data pass exactly one of `episode_starts` (the first row of each "
                "episode) or `episode_id` (the episode of each row); got "
                + ("both." if episode_starts is not None else "neither.")
            )
        if episode_starts is not None:
            starts = _starts_from_offsets(episode_starts, n)
        else:
            starts = _starts_from_ids(episode_id, n)  # type: ignore[arg-type]
        traj = None
    check_finite(reward, "reward")
    n = reward.shape[0]
    last_mask = np.zeros(n, dtype=bool)
    last_mask[starts[1:] - 1] = True
    early = done_arr & ~last_mask
    if early.any():
        count, first = first_rows(early)
        raise ValidationError(
            f"`done` may be true only at the last step of an episode; {count} rows have done=True "
            f"before their episode's last step (first at row {first}). Cut each episode at its "
            "first done=True step, or check the episode boundaries."
        )
    truncated = ~done_arr[starts[1:] - 1] if n else np.zeros(0, dtype=bool)
    return _Episodes(reward=reward, starts=starts, truncated=truncated, traj=traj)


def _tail(ep: _Episodes, tail_value: TailValue | None) -> np.ndarray:
    """Per-step bootstrap after each row's episode ends: V(s_L) on truncated last rows, else 0."""
    out = np.zeros(ep.n)
    n_trunc = int(np.count_nonzero(ep.truncated))
    if tail_value is None:
        if n_trunc:
            first = int(np.flatnonzero(ep.truncated)[0])
            raise EstimationError(
                f"{n_trunc} of {ep.n_episodes} episodes are truncated (their last step has "
                f"done=False; the first is episode {first}, rows {int(ep.starts[first])}.."
                f"{int(ep.last[first])}) and no tail_value was given. After a truncation the "
                "episode goes on, so its remaining value is not 0. Pass tail_value=..., the value "
                "V(s_L) of the state each truncated episode was left in (a float, one value per "
                "truncated episode, or V(s_{t+1}) per step), or tail_value=0.0 to treat "
                "truncation as termination knowingly (this biases returns and TD errors "
                "downward near the end of those episodes)."
            )
        return out
    if n_trunc == 0:
        return out
    trunc_last = ep.last[ep.truncated]
    if isinstance(tail_value, str):
        if ep.traj is None:
            raise ParameterError(
                f"tail_value={tail_value!r} names a column, which needs ope.Trajectories as "
                "data; with array data pass a float or an array."
            )
        tail = _column(ep.traj, tail_value, "tail_value", rows=trunc_last)
    else:
        if isinstance(tail_value, (bool, np.bool_)):
            raise ParameterError(f"`tail_value` must be a number or an array; got {tail_value!r}.")
        arr = as_float_array(tail_value, "tail_value", ndim=(0, 1)).astype(np.float64)
        if arr.ndim == 0:
            tail = np.full(n_trunc, float(arr))
        elif arr.shape[0] == n_trunc:
            tail = arr
        elif arr.shape[0] == ep.n_episodes:
            tail = arr[ep.truncated]
        elif arr.shape[0] == ep.n:
            tail = arr[trunc_last]
        else:
            raise ValidationError(
                f"`tail_value` has {arr.shape[0]} entries; pass a float, one value per "
                f"truncated episode ({n_trunc}), one per episode ({ep.n_episodes}) or one per "
                f"step ({ep.n}, V of the state after each step)."
            )
    bad = ~np.isfinite(tail)
    if bad.any():
        count, first = first_rows(bad)
        raise ValidationError(
            f"`tail_value` must be finite for truncated episodes; {count} are not (first: the "
            f"episode ending at row {int(trunc_last[first])})."
        )
    out[trunc_last] = tail
    return out


def _ratios(
    ep: _Episodes, ratios: PerStep | None, max_ratio: Any, max_td_ratio: Any
) -> tuple[np.ndarray, np.ndarray] | None:
    """Clipped trace ratios min(c_bar, rho) and TD-error ratios min(rho_bar, rho), or None."""
    c_bar = _clip_level(max_ratio, "max_ratio", "clip level of the trace coefficients")
    rho_bar = _clip_level(max_td_ratio, "max_td_ratio", "clip level of the TD-error ratios")
    if ratios is None:
        given = [
            name
            for name, val in (("max_ratio", max_ratio), ("max_td_ratio", max_td_ratio))
            if val is not None
        ]
        if given:
            raise ParameterError(
                f"{' and '.join(f'`{g}`' for g in given)} clip importance ratios, but no "
                "`ratios` were given; pass ratios= (pi/mu per step) or drop the clip level."
            )
        return None
    rho = _per_step(ep, ratios, "ratios")
    neg = rho < 0
    if neg.any():
        count, first = first_rows(neg)
        raise ValidationError(
            f"`ratios` must be >= 0 (target over behaviour probability of each logged action); "
            f"{count} rows are negative (first at row {first}: {float(rho[first])!r})."
        )
    return np.minimum(rho, c_bar), np.minimum(rho, rho_bar)


# --------------------------------------------------------------------------------------------
# the kernel
# --------------------------------------------------------------------------------------------
def _backward_scan(a: np.ndarray, b: np.ndarray, max_length: int) -> np.ndarray:
    """Solve :math:`x_t = b_t + a_t x_{t+1}` backwards, with ``a = 0`` at each episode's end.

    Recursive doubling: after round k, ``B[t] + A[t] x[t + 2**k]`` equals ``x[t]``, where ``A``
    is the product of ``a`` over the window and ``B`` the window's partial solution. Once the
    window covers the longest episode every ``A`` holds a zero (an episode end), so ``B = x``.
    Windows that would run past the last row also hold its zero, so no padding is needed.
    """
    A = a.astype(np.float64, copy=True)
    B = b.astype(np.float64, copy=True)
    d = 1
    while d < max_length:  # ceil(log2(L_max)) rounds, each over the whole array
        B[:-d] += A[:-d] * B[d:]  # the product is formed before B is updated
        A[:-d] *= A[d:]
        d *= 2
    return B


def _next_values(ep: _Episodes, values: np.ndarray, tail: np.ndarray) -> np.ndarray:
    """V(s_{t+1}) per step: the next row's value, the tail after truncation, 0 after done."""
    nxt = np.empty(ep.n)
    nxt[:-1] = values[1:]
    nxt[ep.last] = tail[ep.last]
    return nxt


def _continues(ep: _Episodes) -> np.ndarray:
    """1.0 on rows followed by a row of the same episode, 0.0 on each episode's last row."""
    cont = np.ones(ep.n)
    cont[ep.last] = 0.0
    return cont


def _corrected(
    ep: _Episodes,
    delta: np.ndarray,
    gamma: float,
    lam: float,
    clipped: tuple[np.ndarray, np.ndarray] | None,
) -> np.ndarray:
    r""":math:`x_t = \bar\rho_t \delta_t + \gamma \lambda \bar c_t x_{t+1}` within episodes."""
    cont = _continues(ep)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused by _finite
        if clipped is None:
            return _backward_scan(gamma * lam * cont, delta, ep.max_length)
        trace, td = clipped
        return _backward_scan(gamma * lam * trace * cont, td * delta, ep.max_length)


def _finite(out: np.ndarray, what: str, ep: _Episodes, **inputs: np.ndarray | None) -> np.ndarray:
    """``out``, refused (ValidationError naming the largest input) if a sum overflowed."""
    named = {"reward": ep.reward, **{k: v for k, v in inputs.items() if v is not None}}
    check_no_overflow(out, what, named)
    return out


def _values_and_advantages(
    data: Trajectories | npt.ArrayLike,
    values: PerStep,
    gamma: Any,
    lam: Any,
    done: npt.ArrayLike | None,
    episode_starts: npt.ArrayLike | None,
    episode_id: npt.ArrayLike | None,
    tail_value: TailValue | None,
    ratios: PerStep | None,
    max_ratio: Any,
    max_td_ratio: Any,
) -> tuple[np.ndarray, np.ndarray]:
    """The validated ``values`` and the (V-trace) advantages of :func:`gae`."""
    g = _unit_interval(gamma, "gamma", "discount factor")
    lm = _unit_interval(lam, "lam", "the lambda of TD(lambda)")
    ep = _episodes(data, done, episode_starts, episode_id)
    v = _per_step(ep, values, "values")
    clipped = _ratios(ep, ratios, max_ratio, max_td_ratio)
    tail = _tail(ep, tail_value)
    if ep.n == 0:
        return v, np.zeros(0)
    with np.errstate(over="ignore", invalid="ignore"):
        delta = ep.reward + g * _next_values(ep, v, tail) - v
        adv = _corrected(ep, delta, g, lm, clipped)
        target = v + adv
    rho = None if clipped is None else clipped[1]
    _finite(adv, "advantages (GAE)", ep, values=v, tail_value=tail, ratios=rho)
    # the targets v + adv too: lambda_returns returns them
    _finite(target, "lambda-returns", ep, values=v, tail_value=tail, ratios=rho)
    return v, adv


# --------------------------------------------------------------------------------------------
# public functions
# --------------------------------------------------------------------------------------------
@fill_doc(_DOC)
def discounted_returns(
    data: Trajectories | npt.ArrayLike,
    *,
    gamma: float,
    done: npt.ArrayLike | None = None,
    episode_starts: npt.ArrayLike | None = None,
    episode_id: npt.ArrayLike | None = None,
    tail_value: TailValue | None = None,
    ratios: PerStep | None = None,
    max_ratio: float | None = None,
    max_td_ratio: float | None = None,
) -> npt.NDArray[np.float64]:
    r"""Discounted return from every step to the end of its episode.

    Parameters
    ----------
    <data>
    <gamma>
    <structure>
    <tail_value>
    <ratios>

    Returns
    -------
    <returns>

    Raises
    ------
    <raises>

    See Also
    --------
    lambda_returns : TD(:math:`\lambda`) targets with a value estimate.

    Notes
    -----
    For step :math:`t` of an episode with last step :math:`L - 1`,

    .. math::

        G_t = \sum_{k=t}^{L-1} \gamma^{k-t} r_k + \gamma^{L-t}\, \mathbb 1[\text{truncated}]\,
        V(s_L),

    i.e. :math:`G_t = r_t + \gamma G_{t+1}` with :math:`G_L = 0` after termination and
    :math:`G_L = V(s_L)` (``tail_value``) after truncation. In expectation :math:`G_0` is the
    value of the episode's first state under the policy that drew the actions.

    With ``ratios`` the return is the per-decision importance-sampling return of the target
    policy, with the clip levels of :func:`lambda_returns` (it is that function with
    :math:`V \equiv 0` and :math:`\lambda = 1`):
    :math:`G_t = \bar\rho_t (r_t + \gamma\,\mathbb 1[t = L-1]\,\mathbb 1[\text{truncated}]
    V(s_L)) + \gamma \bar c_t G_{t+1}`, with :math:`\bar\rho_t = \min(\bar\rho, \rho_t)` and
    :math:`\bar c_t = \min(\bar c, \rho_t)`. Without clipping, :math:`G_t = \sum_k
    \gamma^{k-t} \rho_t \cdots \rho_k r_k` (+ the tail), unbiased for the target policy's
    value of :math:`s_t`.

    References
    ----------
    .. [1] R. S. Sutton and A. G. Barto, *Reinforcement Learning: An Introduction*, 2nd ed.,
       MIT Press, 2018, ch. 3.3.
    .. [2] D. Precup, R. S. Sutton and S. Singh, "Eligibility traces for off-policy policy
       evaluation", Proc. ICML, 2000.

    Examples
    --------
    Two episodes: rows 0-2 terminate, rows 3-4 are truncated and the state left is worth 10.

    >>> from ope.returns import discounted_returns
    >>> r = [1.0, 0.0, 2.0, 1.0, 1.0]
    >>> done = [False, False, True, False, False]
    >>> discounted_returns(r, done=done, episode_starts=[0, 3], gamma=0.5, tail_value=10.0)
    array([1.5, 1. , 2. , 4. , 6. ])

    Without ``tail_value`` the truncated episode is refused, not silently cut:

    >>> discounted_returns(r, done=done, episode_starts=[0, 3], gamma=0.5)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ope.exceptions.EstimationError: 1 of 2 episodes are truncated ...
    """
    g = _unit_interval(gamma, "gamma", "discount factor")
    ep = _episodes(data, done, episode_starts, episode_id)
    clipped = _ratios(ep, ratios, max_ratio, max_td_ratio)
    tail = _tail(ep, tail_value)
    if ep.n == 0:
        return np.zeros(0)
    with np.errstate(over="ignore", invalid="ignore"):
        out = _corrected(ep, ep.reward + g * tail, g, 1.0, clipped)
    return _finite(
        out,
        "discounted returns",
        ep,
        tail_value=tail,
        ratios=None if clipped is None else clipped[1],
    )


@fill_doc(_DOC)
def td_errors(
    data: Trajectories | npt.ArrayLike,
    *,
    values: PerStep,
    gamma: float,
    done: npt.ArrayLike | None = None,
    episode_starts: npt.ArrayLike | None = None,
    episode_id: npt.ArrayLike | None = None,
    tail_value: TailValue | None = None,
) -> npt.NDArray[np.float64]:
    r"""One-step temporal-difference errors of a value estimate.

    Parameters
    ----------
    <data>
    <values>
    <gamma>
    <structure>
    <tail_value>

    Returns
    -------
    <returns>

    Raises
    ------
    <raises>

    Notes
    -----
    .. math::

        \delta_t = r_t + \gamma V(s_{t+1}) - V(s_t),

    where :math:`V(s_{t+1})` is the next row's value inside an episode, 0 after a step with
    ``done = True`` and ``tail_value`` :math:`V(s_L)` after the last step of a truncated
    episode. Under the value function of the policy that drew the actions,
    :math:`\mathbb E[\delta_t \mid s_t] = 0` at every step, the last step of a truncated
    episode included; with truncation treated as termination the last step's error has mean
    :math:`-\gamma\, \mathbb E[V(s_L)]` instead (Pardo et al. 2018). For off-policy TD errors
    multiply by the (clipped) ratios, as V-trace does.

    References
    ----------
    .. [1] R. S. Sutton, "Learning to predict by the methods of temporal differences",
       *Machine Learning* 3:9-44, 1988.
    .. [2] F. Pardo, A. Tavakoli, V. Levdik and P. Kormushev, "Time limits in reinforcement
       learning", Proc. ICML, 2018.

    Examples
    --------
    >>> from ope.returns import td_errors
    >>> r = [1.0, 0.0, 2.0, 1.0, 1.0]
    >>> v = [2.0, 2.0, 2.0, 4.0, 4.0]
    >>> done = [False, False, True, False, False]
    >>> td_errors(r, values=v, done=done, episode_id=[7, 7, 7, 9, 9], gamma=0.5,
    ...           tail_value=6.0)
    array([ 0., -1.,  0., -1.,  0.])
    """
    g = _unit_interval(gamma, "gamma", "discount factor")
    ep = _episodes(data, done, episode_starts, episode_id)
    v = _per_step(ep, values, "values")
    tail = _tail(ep, tail_value)
    if ep.n == 0:
        return np.zeros(0)
    with np.errstate(over="ignore", invalid="ignore"):
        out = ep.reward + g * _next_values(ep, v, tail) - v
    return _finite(out, "TD errors", ep, values=v, tail_value=tail)


@fill_doc(_DOC)
def gae(
    data: Trajectories | npt.ArrayLike,
    *,
    values: PerStep,
    gamma: float,
    lam: float,
    done: npt.ArrayLike | None = None,
    episode_starts: npt.ArrayLike | None = None,
    episode_id: npt.ArrayLike | None = None,
    tail_value: TailValue | None = None,
    ratios: PerStep | None = None,
    max_ratio: float | None = None,
    max_td_ratio: float | None = None,
) -> npt.NDArray[np.float64]:
    r"""Generalized advantage estimates :math:`\hat A_t = G^\lambda_t - V(s_t)`.

    Parameters
    ----------
    <data>
    <values>
    <gamma>
    <lam>
    <structure>
    <tail_value>
    <ratios>

    Returns
    -------
    <returns>

    Raises
    ------
    <raises>

    See Also
    --------
    lambda_returns : the targets, ``values + gae(...)``.
    td_errors : the :math:`\delta_t` that GAE discounts.

    Notes
    -----
    With :math:`\delta_t` the TD errors of :func:`td_errors` (bootstrap 0 after termination,
    ``tail_value`` after truncation),

    .. math::

        \hat A_t = \sum_{k=t}^{L-1} (\gamma\lambda)^{k-t} \delta_k,
        \qquad\text{i.e.}\qquad \hat A_t = \delta_t + \gamma\lambda \hat A_{t+1},
        \quad \hat A_L = 0.

    :math:`\lambda = 0` gives :math:`\delta_t`; :math:`\lambda = 1` gives the discounted return
    minus :math:`V(s_t)`.

    With ``ratios`` (V-trace, Espeholt et al. 2018, their Remark 1),

    .. math::

        \hat A_t = \bar\rho_t \delta_t + \gamma \lambda \bar c_t \hat A_{t+1},
        \qquad \bar\rho_t = \min(\bar\rho, \rho_t),\quad \bar c_t = \min(\bar c, \rho_t),

    the V-trace target minus :math:`V(s_t)`. Without clipping and with :math:`\lambda = 1` the
    target is the per-decision importance-sampling return with :math:`V` as a control variate
    (unbiased for any :math:`V`); with :math:`V` the target policy's value function it is
    unbiased for any :math:`\lambda` and any ``max_ratio`` (trace cutting, as in Retrace,
    Munos et al. 2016) as long as ``max_td_ratio`` is None. IMPALA's policy-gradient
    advantage :math:`\bar\rho_t (r_t + \gamma v_{t+1} - V(s_t))` uses the targets
    :math:`v_{t+1}` of :func:`lambda_returns` instead.

    References
    ----------
    .. [1] J. Schulman, P. Moritz, S. Levine, M. Jordan and P. Abbeel, "High-dimensional
       continuous control using generalized advantage estimation", Proc. ICLR, 2016.
    .. [2] L. Espeholt et al., "IMPALA: Scalable distributed deep-RL with importance weighted
       actor-learner architectures", Proc. ICML, 2018.
    .. [3] R. Munos, T. Stepleton, A. Harutyunyan and M. G. Bellemare, "Safe and efficient
       off-policy reinforcement learning", Proc. NeurIPS, 2016.

    Examples
    --------
    >>> from ope.returns import gae
    >>> r = [1.0, 0.0, 2.0, 1.0, 1.0]
    >>> v = [2.0, 2.0, 2.0, 4.0, 4.0]
    >>> done = [False, False, True, False, False]
    >>> gae(r, values=v, done=done, episode_starts=[0, 3], gamma=0.5, lam=0.5,
    ...     tail_value=6.0)
    array([-0.25, -1.  ,  0.  , -1.  ,  0.  ])

    Off-policy, with the V-trace clip levels of IMPALA:

    >>> gae(r, values=v, done=done, episode_starts=[0, 3], gamma=0.5, lam=1.0,
    ...     tail_value=6.0, ratios=[2.0, 0.5, 1.0, 1.0, 3.0], max_ratio=1.0, max_td_ratio=1.0)
    array([-0.25, -0.5 ,  0.  , -1.  ,  0.  ])
    """
    return _values_and_advantages(
        data,
        values,
        gamma,
        lam,
        done,
        episode_starts,
        episode_id,
        tail_value,
        ratios,
        max_ratio,
        max_td_ratio,
    )[1]


@fill_doc(_DOC)
def lambda_returns(
    data: Trajectories | npt.ArrayLike,
    *,
    values: PerStep,
    gamma: float,
    lam: float,
    done: npt.ArrayLike | None = None,
    episode_starts: npt.ArrayLike | None = None,
    episode_id: npt.ArrayLike | None = None,
    tail_value: TailValue | None = None,
    ratios: PerStep | None = None,
    max_ratio: float | None = None,
    max_td_ratio: float | None = None,
) -> npt.NDArray[np.float64]:
    r"""TD(:math:`\lambda`) targets :math:`G^\lambda_t` (V-trace targets with ``ratios``).

    Parameters
    ----------
    <data>
    <values>
    <gamma>
    <lam>
    <structure>
    <tail_value>
    <ratios>

    Returns
    -------
    <returns>

    Raises
    ------
    <raises>

    See Also
    --------
    gae : the same targets minus ``values``.

    Notes
    -----
    .. math::

        G^\lambda_t = r_t + \gamma \big[(1 - \lambda) V(s_{t+1}) + \lambda G^\lambda_{t+1}\big],

    ending with :math:`G^\lambda_{L-1} = r_{L-1} + \gamma V(s_L)`, where :math:`V(s_L)` is 0
    after termination and ``tail_value`` after truncation. It equals
    :math:`V(s_t) + \hat A_t` with :math:`\hat A_t` of :func:`gae`, which is how it is computed
    (and, with ``ratios``, the V-trace target
    :math:`v_t = V(s_t) + \sum_{k \ge t} \gamma^{k-t} (\prod_{i=t}^{k-1} \lambda \bar c_i)
    \bar\rho_k \delta_k` of Espeholt et al. 2018, with the clip levels
    :math:`\bar c` = ``max_ratio`` and :math:`\bar\rho` = ``max_td_ratio``). :math:`\lambda = 1`
    gives :func:`discounted_returns`; :math:`\lambda = 0` gives :math:`r_t + \gamma
    V(s_{t+1})`.

    References
    ----------
    .. [1] R. S. Sutton and A. G. Barto, *Reinforcement Learning: An Introduction*, 2nd ed.,
       MIT Press, 2018, ch. 12.1.
    .. [2] L. Espeholt et al., "IMPALA: Scalable distributed deep-RL with importance weighted
       actor-learner architectures", Proc. ICML, 2018.

    Examples
    --------
    >>> from ope.returns import lambda_returns
    >>> r = [1.0, 0.0, 2.0, 1.0, 1.0]
    >>> v = [2.0, 2.0, 2.0, 4.0, 4.0]
    >>> done = [False, False, True, False, False]
    >>> lambda_returns(r, values=v, done=done, episode_starts=[0, 3], gamma=0.5, lam=0.5,
    ...                tail_value=6.0)
    array([1.75, 1.  , 2.  , 3.  , 4.  ])
    """
    v, adv = _values_and_advantages(
        data,
        values,
        gamma,
        lam,
        done,
        episode_starts,
        episode_id,
        tail_value,
        ratios,
        max_ratio,
        max_td_ratio,
    )
    return v + adv
