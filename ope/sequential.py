"""Off-policy value estimators for multi-step trajectories, and fitted Q evaluation.

Given trajectories logged by a behaviour policy (``ope.read_trajectories`` ->
:class:`ope.logs.Trajectories`, one row per step) and the candidate's probability of each logged
action, :func:`sequential_estimate` estimates the candidate's expected discounted return with one
of six estimators:

``is``
    trajectory-wise importance sampling (Precup et al. 2000);
``pdis``
    per-decision importance sampling (Precup et al. 2000);
``wis``
    weighted (self-normalized) trajectory-wise importance sampling;
``wpdis``
    weighted per-decision importance sampling (step-WIS of Jiang & Li 2016, CWPDIS of
    Thomas 2015);
``dr``
    sequential doubly robust (Jiang & Li 2016), with a model's ``q_hat`` and ``v_hat`` per step;
``wdr``
    weighted doubly robust (Thomas & Brunskill 2016).

:func:`fitted_q_evaluation` (linear FQE, tabular or on state features) produces the per-step
``q_hat``/``v_hat`` and the truncated episodes' ``tail_value`` that ``dr`` and ``wdr`` use.

Everything is vectorized over steps: cumulative importance weights within episodes come from one
cumulative sum of log-ratios reset at the episode offsets, per-episode sums from
``numpy.add.reduceat`` and per-step sums from ``numpy.bincount``. No Python loop runs over
episodes or steps, and no array is shaped (episodes, horizon) except the bootstrap components of
the per-step self-normalized estimators, which are built only when a bootstrap interval is asked
for.

The standard error comes from per-episode terms (episodes are the independent units): their
sample standard deviation over :math:`\\sqrt{n}` for ``is``, ``pdis`` and ``dr``, and the delta
method (per-episode influence terms) for the self-normalized ``wis``, ``wpdis`` and ``wdr``.
``Estimate.n`` is the number of episodes.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ope.estimate import DEFAULT_CONFIDENCE_LEVEL, Estimate, _make_estimate, _RowSource
from ope.estimators import ESS_RATIO_WARN, SMALL_SAMPLE_ROWS
from ope.exceptions import (
    EstimationError,
    OPEWarning,
    OverlapWarning,
    PolicyError,
    SchemaError,
    SmallSampleWarning,
    ValidationError,
)
from ope.intervals.asymptotic import _check_confidence_level
from ope.logs import Trajectories

__all__ = ["SEQUENTIAL_ESTIMATORS", "sequential_estimate", "fitted_q_evaluation", "FittedQ"]

#: The estimator names accepted by :func:`sequential_estimate`.
SEQUENTIAL_ESTIMATORS: Final = ("is", "pdis", "wis", "wpdis", "dr", "wdr")

#: Estimators that need a model's ``q_hat`` and ``v_hat`` per step.
_MODEL_BASED: Final = frozenset({"dr", "wdr"})

#: Largest (episodes x components) array built for a bootstrap of ``wpdis``/``wdr``: their
#: per-episode components have one column per step and statistic (3 x horizon). 2**25 float64
#: entries are 256 MB; past that the bootstrap would compete for memory with the data itself,
#: and the delta-method (normal / t) interval is the one to use.
MAX_BOOTSTRAP_CELLS: Final = 1 << 25

#: Episodes needed for a standard error at all (a sample standard deviation needs n - 1 >= 1).
MIN_EPISODES: Final = 2

#: How many example rows an error message names.
_EXAMPLES: Final = 3

_EstimatorName = Literal["is", "pdis", "wis", "wpdis", "dr", "wdr"]
PerStep = str | npt.ArrayLike


# ============================================================================================
# validation
# ============================================================================================
@dataclass(frozen=True)
class _Steps:
    """Validated, normalized per-step arrays of one call (float64, trajectory row order)."""

    starts: np.ndarray  # (E + 1,) row offsets of the episodes
    lengths: np.ndarray  # (E,)
    step: np.ndarray  # (n,) 0-based step of each row
    reward: np.ndarray  # (n,) observed rewards
    reward_tail: np.ndarray  # (n,) rewards plus gamma * tail value on truncated last rows
    rho: np.ndarray  # (n,) per-step ratios target / propensity
    q_hat: np.ndarray | None
    v_hat: np.ndarray | None
    gamma: float
    max_weight: float | None
    truncated: np.ndarray  # (E,) bool

    @property
    def n_episodes(self) -> int:
        return int(self.lengths.size)

    @property
    def horizon(self) -> int:
        return int(self.lengths.max())


def _where(traj: Trajectories, rows: np.ndarray) -> str:
    """'row 7 (episode_id 3, step 2), ...' for the first few rows of a mask's hits."""
    eid = traj.table.column("episode_id")
    step = traj.table.column("step")
    parts = [
        f"row {int(j)} (episode_id {eid[int(j)].as_py()!r}, step {step[int(j)].as_py()})"
        for j in rows[:_EXAMPLES]
    ]
    return ", ".join(parts) + (", ..." if rows.size > _EXAMPLES else "")


def _check_rows(
    traj: Trajectories,
    bad: np.ndarray,
    what: str,
    fix: str,
    error: type[Exception] = ValidationError,
) -> None:
    if bad.any():
        rows = np.flatnonzero(bad)
        raise error(f"{what}; {rows.size} row(s) break this, first at {_where(traj, rows)}. {fix}")


def _float_column(traj: Trajectories, name: str, role: str) -> np.ndarray:
    if name not in traj.table.column_names:
        raise SchemaError(
            f"`{role}` names column {name!r}, which is not in the trajectories; they have: "
            f"{', '.join(traj.table.column_names)}."
        )
    col = traj.table.column(name)
    if not (pa.types.is_floating(col.type) or pa.types.is_integer(col.type)):
        raise SchemaError(
            f"`{role}` column {name!r} must be numeric (float64); it has type {col.type}."
        )
    if col.null_count:
        rows = np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))
        raise ValidationError(
            f"`{role}` column {name!r} has {col.null_count} missing value(s), first at "
            f"{_where(traj, rows)}. Fill them or drop those episodes when reading."
        )
    return col.to_numpy().astype(np.float64, copy=False)


def _per_step(
    traj: Trajectories, values: PerStep, role: str, *, error: type[Exception] = ValidationError
) -> np.ndarray:
    """A per-step float64 array from a column name or an array of length n; finite."""
    if isinstance(values, str):
        out = _float_column(traj, values, role)
    else:
        try:
            out = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValidationError(
                f"`{role}` must be a column name or an array of floats, one per step; could "
                f"not convert it to float64 ({exc})."
            ) from None
        if out.shape != (traj.n,):
            raise ValidationError(
                f"`{role}` must hold one value per step: shape ({traj.n},) like the trajectories' "
                f"rows (in their sorted row order); got shape {out.shape}."
            )
    _check_rows(
        traj,
        ~np.isfinite(out),
        f"`{role}` must be finite",
        "Replace NaN/inf values (e.g. a model's prediction failed) before estimating.",
        error,
    )
    return out


def _check_structure(traj: Trajectories) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Episode offsets, lengths and steps; raise if rows are not sorted by (episode, step)."""
    required = ("episode_id", "step", "propensity", "reward", "done")
    missing = [c for c in required if c not in traj.table.column_names]
    if missing:
        raise SchemaError(
            f"the trajectories lack required column(s) {', '.join(map(repr, missing))}; they "
            f"have: {', '.join(traj.table.column_names)}. Read them with ope.read_trajectories "
            "(with mapping= for other column names)."
        )
    for name in required:
        col = traj.table.column(name)
        if col.null_count:
            rows = np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))
            raise ValidationError(
                f"column {name!r} has {col.null_count} missing value(s), first at row(s) "
                f"{', '.join(str(int(j)) for j in rows[:_EXAMPLES])}. Read the trajectories "
                "with ope.read_trajectories, which rejects (or with on_invalid='drop' drops) "
                "such episodes."
            )
    if traj.n == 0:
        raise EstimationError("the trajectories hold no steps; there is nothing to estimate.")
    starts = np.asarray(traj.episode_starts, dtype=np.int64)
    lengths = np.diff(starts)
    expected = np.arange(traj.n, dtype=np.int64) - np.repeat(starts[:-1], lengths)
    step = traj.table.column("step").to_numpy().astype(np.int64, copy=False)
    _check_rows(
        traj,
        step != expected,
        "rows must be sorted by (episode_id, step) with steps 0, 1, ..., L-1 in each episode",
        "Read the trajectories with ope.read_trajectories, which sorts them and rejects gaps.",
    )
    ids = traj.episode_ids
    if len(pc.unique(ids)) != len(ids):
        counts = pc.value_counts(ids)
        dup = counts.field("values").filter(pc.greater(counts.field("counts"), 1))
        raise ValidationError(
            f"the rows of an episode must be contiguous, but {len(dup)} episode_id(s) occur in "
            f"separate runs of rows (e.g. {dup[0].as_py()!r}). Read the trajectories with "
            "ope.read_trajectories, which sorts them by (episode_id, step)."
        )
    done = traj.table.column("done").to_numpy(zero_copy_only=False).astype(bool)
    last = np.zeros(traj.n, dtype=bool)
    last[starts[1:] - 1] = True
    _check_rows(
        traj,
        done & ~last,
        "`done` may be true only at the last step of an episode",
        "Cut each episode at its first done=True step.",
    )
    return starts, lengths, step


def _tail_per_episode(
    traj: Trajectories, tail_value: float | PerStep, starts: np.ndarray
) -> np.ndarray:
    """The tail value of each episode (float64, shape (E,)); only truncated ones are used."""
    n_ep = starts.size - 1
    last = starts[1:] - 1
    if isinstance(tail_value, str):
        return _float_column(traj, tail_value, "tail_value")[last]
    arr = np.asarray(tail_value, dtype=np.float64)
    if arr.ndim == 0:
        return np.full(n_ep, float(arr))
    if arr.shape == (n_ep,):
        return arr
    if arr.shape == (traj.n,):
        return arr[last]
    raise ValidationError(
        f"`tail_value` must be a scalar, a column name, an array with one value per episode "
        f"(shape ({n_ep},)) or one per step (shape ({traj.n},), the last step of each episode "
        f"is used); got shape {arr.shape}."
    )


def _sequential_iv(
    traj: Trajectories,
    target: PerStep,
    *,
    estimator: str,
    gamma: float,
    q_hat: PerStep | None,
    v_hat: PerStep | None,
    tail_value: float | PerStep | None,
    reward_range: tuple[float, float] | None,
    max_weight: float | None,
    confidence_level: float,
) -> tuple[_Steps, str | None, list[tuple[str, type[Warning]]]]:
    """Validate every input of :func:`sequential_estimate`; return normalized arrays."""
    if not isinstance(traj, Trajectories):
        raise TypeError(
            "`trajectories` must be ope.Trajectories (from ope.read_trajectories, which validates "
            f"and sorts the steps); got {type(traj).__name__}."
        )
    if estimator not in SEQUENTIAL_ESTIMATORS:
        raise ValueError(
            f"unknown sequential estimator {estimator!r}; choose one of "
            f"{', '.join(SEQUENTIAL_ESTIMATORS)}."
        )
    g = float(gamma)
    if not 0.0 <= g <= 1.0:
        raise ValueError(f"`gamma` (discount factor) must be in [0, 1]; got {gamma!r}.")
    if max_weight is not None:
        mw = float(max_weight)
        if not (mw > 0.0 and math.isfinite(mw)):
            raise ValueError(
                f"`max_weight` (clipping level of the cumulative importance weights) must be a "
                f"positive finite number; got {max_weight!r}."
            )
        max_weight = mw
    _check_confidence_level(confidence_level)
    if estimator in _MODEL_BASED:
        absent = [name for name, val in (("q_hat", q_hat), ("v_hat", v_hat)) if val is None]
        if absent:
            raise ValueError(
                f"estimator {estimator!r} needs a model's values per step: pass "
                f"{' and '.join(absent)} (q_hat: Q(s_t, a_t) of the logged action; v_hat: "
                "V(s_t) = sum_a pi(a|s_t) Q(s_t, a)). Without a model use 'pdis' or 'wpdis'."
            )
    else:
        given = [name for name, val in (("q_hat", q_hat), ("v_hat", v_hat)) if val is not None]
        if given:
            raise ValueError(
                f"estimator {estimator!r} does not use a model, but {' and '.join(given)} "
                "was given; use estimator='dr' or 'wdr' to include it."
            )

    starts, lengths, step = _check_structure(traj)

    # -- the target probabilities of the logged actions
    policy: str | None = None
    if isinstance(target, str):
        name = target
        if name not in traj.table.column_names:
            name = "target__" + target
        if name not in traj.table.column_names:
            have = traj.target_policies
            raise SchemaError(
                f"no column {target!r} or {'target__' + target!r} holds the target "
                f"probabilities; candidate policies in these trajectories: "
                f"{', '.join(map(repr, have)) if have else 'none (no target__<name> column)'}. "
                "Pass a target__<name> column name or an array with one probability per step."
            )
        policy = name[len("target__"):] if name.startswith("target__") else name
        pi_e = _per_step(traj, name, "target", error=PolicyError)
    else:
        pi_e = _per_step(traj, target, "target", error=PolicyError)
    _check_rows(
        traj,
        (pi_e < 0.0) | (pi_e > 1.0),
        "target probabilities must lie in [0, 1]",
        "Pass the candidate's probability of each logged action, not a score.",
        PolicyError,
    )
    prop = _float_column(traj, "propensity", "propensity")
    _check_rows(
        traj,
        ~((prop > 0.0) & (prop <= 1.0)),
        "`propensity` must be in (0, 1]",
        "Fix the logger, or read the trajectories with ope.read_trajectories(on_invalid='drop').",
    )
    reward = _float_column(traj, "reward", "reward")
    _check_rows(
        traj, ~np.isfinite(reward), "`reward` must be finite", "Fix or drop those episodes."
    )
    if reward_range is not None:
        try:
            lo, hi = (float(x) for x in reward_range)
        except (TypeError, ValueError):
            raise ValueError(
                f"`reward_range` must be a pair (low, high); got {reward_range!r}."
            ) from None
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ValueError(
                f"`reward_range` must be finite with low < high; got {reward_range!r}."
            )
        _check_rows(
            traj,
            (reward < lo) | (reward > hi),
            f"rewards must lie in the a priori reward_range [{lo:g}, {hi:g}]",
            "Widen reward_range to the true a priori range (not the observed one) or fix the "
            "rewards.",
        )
    qh = None if q_hat is None else _per_step(traj, q_hat, "q_hat")
    vh = None if v_hat is None else _per_step(traj, v_hat, "v_hat")

    # -- truncation: the tail after each truncated episode's last logged step
    notes: list[tuple[str, type[Warning]]] = []
    truncated = np.asarray(traj.truncated, dtype=bool)
    reward_tail = reward
    n_trunc = int(truncated.sum())
    if tail_value is None:
        if n_trunc:
            notes.append(
                (
                    f"{n_trunc} of {truncated.size} episodes were truncated (last step "
                    "done=False) and no tail_value was given: the estimate is the expected "
                    "discounted return accumulated within the logged steps (zero after the "
                    "point where each log ends), not the value of the untruncated episodes. "
                    "Pass tail_value= (a value estimate of the state each truncated episode "
                    "was left in) to bootstrap the tail, or tail_value=0.0 to state that the "
                    "truncated value is the target.",
                    OPEWarning,
                )
            )
    else:
        tail = _tail_per_episode(traj, tail_value, starts)
        bad = truncated & ~np.isfinite(tail)
        if bad.any():
            eps = np.flatnonzero(bad)
            raise ValidationError(
                f"`tail_value` must be finite for truncated episodes; {eps.size} are not, first "
                f"at {_where(traj, starts[1:][eps] - 1)}."
            )
        if n_trunc:
            last = starts[1:] - 1
            reward_tail = reward.copy()
            reward_tail[last[truncated]] += g * tail[truncated]

    data = _Steps(
        starts=starts,
        lengths=lengths,
        step=step,
        reward=reward,
        reward_tail=reward_tail,
        rho=pi_e / prop,
        q_hat=qh,
        v_hat=vh,
        gamma=g,
        max_weight=max_weight,
        truncated=truncated,
    )
    return data, policy, notes


# ============================================================================================
# weights
# ============================================================================================
def _cumulative_weights(data: _Steps) -> np.ndarray:
    """Cumulative importance weights ``w_t = prod_{k<=t} rho_k`` within each episode.

    One cumulative sum of log-ratios over all rows, reset at each episode start (zero ratios are
    counted separately, so a zero anywhere earlier in the episode gives an exact zero).
    """
    rho = data.rho
    first = data.starts[:-1]
    zero = rho == 0.0
    logs = np.log(np.where(zero, 1.0, rho))
    # reset the running sum at every episode start, then remove the small rounding residual
    seg = np.add.reduceat(logs, first)
    inc = logs.copy()
    inc[first[1:]] -= seg[:-1]
    cs = np.cumsum(inc)
    cs -= np.repeat(cs[first] - logs[first], data.lengths)
    zc = np.cumsum(zero, dtype=np.int64)
    zc -= np.repeat(zc[first] - zero[first], data.lengths)
    with np.errstate(over="ignore"):
        w = np.where(zc > 0, 0.0, np.exp(cs))
    if data.max_weight is not None:
        np.minimum(w, data.max_weight, out=w)
    elif not np.isfinite(w).all():
        rows = np.flatnonzero(~np.isfinite(w))
        raise EstimationError(
            f"cumulative importance weights overflow float64 (exceed 1e308) at {rows.size} "
            f"step(s), first at row {int(rows[0])}: the candidate and the logger disagree over "
            "too many steps. Pass max_weight= to clip the weights, evaluate a shorter horizon, "
            "or use estimator='wdr'/'wpdis' with clipping."
        )
    return w


def _previous(w: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """``w_{t-1}`` per row, with ``w_{-1} = 1`` at every episode start."""
    prev = np.empty_like(w)
    prev[1:] = w[:-1]
    prev[starts[:-1]] = 1.0
    return prev


# ============================================================================================
# the estimators
# ============================================================================================
class _SequentialSource(_RowSource):
    """Per-episode terms of a sequential estimate (episodes are the resampled units).

    ``components`` / ``statistic`` describe the estimate as a smooth function of per-episode
    column means, for the bootstrap and paired comparisons; ``influence`` is computed directly
    from per-step arrays, without the (episodes x horizon) components.
    """

    methods = ("bootstrap",)

    def __init__(
        self,
        kind: str,
        reward: np.ndarray,
        n: int,
        psi: np.ndarray,
        columns: tuple[np.ndarray, ...] | None = None,
        dense: _DenseTerms | None = None,
    ) -> None:
        self.kind = kind
        self.reward = reward
        self.n = n
        self._psi = psi
        self._columns = columns
        self._dense = dense

    def components(self) -> np.ndarray:
        if self._dense is not None:
            return self._dense.components()
        assert self._columns is not None
        return np.column_stack(self._columns)

    def statistic(self, means: np.ndarray) -> np.ndarray:
        if self._dense is not None:
            return self._dense.statistic(means)
        if self.kind == "wis":
            return means[..., 0] / means[..., 1]
        return means[..., 0]

    def gradient(self, means: np.ndarray) -> np.ndarray:
        if self._dense is not None:
            return self._dense.gradient(means)
        if self.kind == "wis":
            return np.array([1.0 / means[1], -means[0] / means[1] ** 2])
        return np.ones(1)

    def influence(self) -> np.ndarray:
        return self._psi.copy()


class _DenseTerms:
    """Per-episode, per-step components of ``wpdis`` / ``wdr`` (built only on request).

    Columns: ``x_t = w_t (r_t - q_t)``, ``y_t = w_{t-1} v_t`` and ``d_t = w_{min(t, L-1)}`` for
    ``t = 0 .. H-1``; the estimate is
    ``sum_t g^t x_t / d_t + y_0 + sum_{t>=1} g^t y_t / d_{t-1}`` of their means.
    """

    def __init__(
        self,
        episode: np.ndarray,
        step: np.ndarray,
        x: np.ndarray,
        y: np.ndarray,
        w: np.ndarray,
        final_w: np.ndarray,
        horizon: int,
        gamma: float,
        model: bool,
    ) -> None:
        self.episode, self.step, self.x, self.y, self.w = episode, step, x, y, w
        self.final_w = final_w
        self.horizon = horizon
        self.disc = gamma ** np.arange(horizon, dtype=np.float64)
        self.model = model

    def components(self) -> np.ndarray:
        n_ep, h = self.final_w.size, self.horizon
        if n_ep * 3 * h > MAX_BOOTSTRAP_CELLS:
            raise EstimationError(
                f"a bootstrap of this per-step self-normalized estimate needs {n_ep:,} episodes "
                f"x {3 * h:,} per-step components, more than {MAX_BOOTSTRAP_CELLS:,} entries. "
                "Use the delta-method interval (ci(method='normal' or 't'))."
            )
        out = np.zeros((n_ep, 3 * h))
        out[self.episode, self.step] = self.x
        out[self.episode, h + self.step] = self.y
        d = out[:, 2 * h :]
        d[:] = self.final_w[:, None]  # frozen after the last logged step
        d[self.episode, self.step] = self.w
        return out

    def statistic(self, means: np.ndarray) -> np.ndarray:
        h = self.horizon
        x, y, d = means[..., :h], means[..., h : 2 * h], means[..., 2 * h :]
        pos = d > 0.0
        safe = np.where(pos, d, 1.0)
        value = np.sum(np.where(pos, self.disc * x / safe, 0.0), axis=-1)
        # y_t / d_{t-1} for t >= 1; y_0 is the model's value of the first state
        value += y[..., 0]
        value += np.sum(np.where(pos[..., :-1], self.disc[1:] * y[..., 1:] / safe[..., :-1], 0.0),
                        axis=-1)
        if not self.model:
            value = np.where(pos[..., 0], value, np.nan)  # no weight at all: undefined
        return value

    def gradient(self, means: np.ndarray) -> np.ndarray:
        h = self.horizon
        x, y, d = means[:h], means[h : 2 * h], means[2 * h :]
        pos = d > 0.0
        safe = np.where(pos, d, 1.0)
        gx = np.where(pos, self.disc / safe, 0.0)
        gy = np.zeros(h)
        gy[0] = 1.0
        gy[1:] = np.where(pos[:-1], self.disc[1:] / safe[:-1], 0.0)
        gd = np.where(pos, -self.disc * x / safe**2, 0.0)
        gd[:-1] -= np.where(pos[:-1], self.disc[1:] * y[1:] / safe[:-1] ** 2, 0.0)
        return np.concatenate([gx, gy, gd])


def _plain(
    data: _Steps, kind: str, w: np.ndarray, final_w: np.ndarray
) -> tuple[float, np.ndarray, tuple[np.ndarray, ...]]:
    """Value, influence terms and components of ``is``, ``pdis``, ``dr`` and ``wis``."""
    first = data.starts[:-1]
    disc = data.gamma ** data.step.astype(np.float64)
    if kind in ("is", "wis"):
        ret = np.add.reduceat(disc * data.reward_tail, first)  # discounted return per episode
        wr = final_w * ret
        if kind == "is":
            return float(wr.mean()), wr - wr.mean(), (wr,)
        value = float(wr.sum() / final_w.sum())
        psi = (wr - value * final_w) / final_w.mean()
        return value, psi, (wr, final_w)
    term = w * data.reward_tail
    if kind == "dr":
        assert data.q_hat is not None and data.v_hat is not None
        term = term - w * data.q_hat + _previous(w, data.starts) * data.v_hat
    g = np.add.reduceat(disc * term, first)
    return float(g.mean()), g - g.mean(), (g,)


def _self_normalized(
    data: _Steps, kind: str, w: np.ndarray, final_w: np.ndarray, episode: np.ndarray
) -> tuple[float, np.ndarray, _DenseTerms]:
    """Value, influence terms and the dense-term builder of ``wpdis`` and ``wdr``.

    ``D_t = sum_i w^i_{min(t, L_i - 1)}`` is the step-``t`` normalizer (an episode that ended
    keeps its last weight and contributes zero reward, as in an absorbing state).
    """
    n_ep, h, g = data.n_episodes, data.horizon, data.gamma
    step = data.step
    first = data.starts[:-1]
    disc_h = g ** np.arange(h + 1, dtype=np.float64)
    disc = disc_h[step]
    d = np.bincount(step, weights=w, minlength=h)
    d += np.cumsum(np.bincount(data.lengths, weights=final_w, minlength=h + 1))[:h]
    pos = d > 0.0
    d_safe = np.where(pos, d, 1.0)
    x = w * data.reward_tail
    if kind == "wdr":
        assert data.q_hat is not None and data.v_hat is not None
        x = x - w * data.q_hat
        y = _previous(w, data.starts) * data.v_hat
    else:
        y = np.zeros_like(w)
    # normalizer of y_t is D_{t-1}, with D_{-1} = number of episodes (w_{-1} = 1)
    d_prev = np.concatenate(([float(n_ep)], d_safe[:-1]))
    pos_prev = np.concatenate(([True], pos[:-1]))
    a = np.where(pos[step], disc / d_safe[step], 0.0)
    b = np.where(pos_prev[step], disc / d_prev[step], 0.0)
    row_terms = a * x + b * y
    value = float(row_terms.sum())
    # influence: psi_i = sum_t (g^t / Dbar_t) (x_it - U_t d_it) + (y-terms) - Z-terms, Dbar = D/E
    xs = np.bincount(step, weights=x, minlength=h)
    ys = np.bincount(step, weights=y, minlength=h + 1)
    u = np.where(pos, xs / d_safe, 0.0)
    z = np.where(pos, ys[1:] / d_safe, 0.0)
    c = np.where(pos, (disc_h[:h] * u + disc_h[1:] * z) * n_ep / d_safe, 0.0)
    c_tail = np.concatenate((np.cumsum(c[::-1])[::-1], [0.0]))  # C_k = sum_{t >= k} c_t
    psi_rows = n_ep * row_terms - c[step] * w
    psi = np.add.reduceat(psi_rows, first) - final_w * c_tail[data.lengths]
    psi -= psi.mean()
    dense = _DenseTerms(episode, step, x, y, w, final_w, h, g, model=kind == "wdr")
    return value, psi, dense


def _diagnose(
    estimator: str,
    policy: str | None,
    n_ep: int,
    w: np.ndarray,
    final_w: np.ndarray,
    notes: list[tuple[str, type[Warning]]],
) -> tuple[str, ...]:
    """Raise when the value is undefined; return notes (each also emitted as a warning)."""
    who = estimator + (f" (policy {policy!r})" if policy else "")
    if n_ep < MIN_EPISODES:
        raise EstimationError(
            f"{who}: a standard error needs at least {MIN_EPISODES} episodes; got {n_ep}."
        )
    weightless = not w.any() if estimator in ("pdis", "wpdis", "dr", "wdr") else not final_w.any()
    if weightless:
        text = (
            "every importance weight is zero: the candidate never takes the logged actions, so "
            "the trajectories carry no information about it by weighting."
        )
        if estimator not in _MODEL_BASED:
            raise EstimationError(
                f"{who}: {text} Use 'dr' or 'wdr' with a model, or logs with more exploration."
            )
        notes.append((text + " The estimate reduces to the model's value of the first states.",
                      OverlapWarning))
    else:
        ess = _kish(final_w)
        if ess < ESS_RATIO_WARN * n_ep:
            notes.append(
                (
                    f"effective sample size of the trajectory weights is {ess:.1f}, "
                    f"{ess / n_ep:.2%} of {n_ep} episodes: the estimate rests on a few "
                    "trajectories. Prefer 'wdr' or 'dr' with a good model, clip with "
                    "max_weight=, or shorten the horizon.",
                    OverlapWarning,
                )
            )
    if n_ep < SMALL_SAMPLE_ROWS:
        notes.append(
            (
                f"only {n_ep} episodes (< {SMALL_SAMPLE_ROWS}): normal and t intervals rely on "
                "the central limit theorem and may undercover.",
                SmallSampleWarning,
            )
        )
    for text, category in notes:
        warnings.warn(f"{who}: {text}", category, stacklevel=3)
    return tuple(text for text, _ in notes)


def _kish(weights: np.ndarray) -> float:
    s2 = float(weights @ weights)
    return float(weights.sum()) ** 2 / s2 if s2 > 0.0 else 0.0


def sequential_estimate(
    trajectories: Trajectories,
    target: PerStep,
    *,
    estimator: _EstimatorName = "pdis",
    gamma: float = 1.0,
    q_hat: PerStep | None = None,
    v_hat: PerStep | None = None,
    tail_value: float | PerStep | None = None,
    reward_range: tuple[float, float] | None = None,
    max_weight: float | None = None,
    confidence_level: float = DEFAULT_CONFIDENCE_LEVEL,
) -> Estimate:
    r"""Estimate a candidate policy's expected discounted return from logged trajectories.

    Parameters
    ----------
    trajectories : ope.Trajectories
        Validated steps sorted by (episode_id, step), from :func:`ope.read_trajectories`. Every
        per-step array below is aligned with these rows (their sorted order).
    target : str or array_like of shape (n,)
        The candidate's probability :math:`\pi_e(a_t \mid s_t)` of each logged action, in
        [0, 1]: a column name (``"target__greedy"``, or just ``"greedy"``) or an array.
    estimator : {"is", "pdis", "wis", "wpdis", "dr", "wdr"}, default "pdis"
        See Notes.
    gamma : float, default 1.0
        Discount factor in [0, 1]; step ``t`` (0-based) is discounted by ``gamma**t``.
    q_hat, v_hat : str or array_like of shape (n,), optional
        ``dr`` and ``wdr`` only (required there): a model's :math:`\hat Q(s_t, a_t)` of the
        logged action and :math:`\hat V(s_t) = \sum_a \pi_e(a \mid s_t) \hat Q(s_t, a)`, per
        step (time-dependent values are fine), as column names or arrays.
    tail_value : float, str or array_like, optional
        A value estimate :math:`\hat V(s_L)` of the state each *truncated* episode was left in
        (after its last logged step): an array with one value per episode, or per step (the
        last step of each episode is read), a column name (per step), or a scalar. Entries of
        episodes that terminated are not used. None (default) with truncated episodes present
        emits an ``OPEWarning`` (see Notes); ``tail_value=0.0`` states that the truncated
        value is the target and silences it.
    reward_range : (float, float), optional
        A priori range of a single step's reward; rewards outside it are an error.
    max_weight : float, optional
        Clip every cumulative importance weight :math:`\rho_{0:t}` at this level (biased,
        lower variance). Must be positive.
    confidence_level : float, default 0.95
        Level of the normal interval stored in ``ci_low``/``ci_high``.

    Returns
    -------
    Estimate
        ``value``, ``std_error`` (from per-episode terms; the delta method for ``wis``,
        ``wpdis``, ``wdr``), ``n`` (episodes), ``ess`` (Kish effective sample size of the
        trajectory weights :math:`\rho_{0:L-1}`), ``notes``; ``ci(confidence_level, method)``
        for ``normal``, ``t`` and ``bootstrap`` (resampling whole episodes, self-normalized
        estimators renormalized in each resample). Two estimates on the same trajectories can
        be compared with :func:`ope.estimate.compare` (paired by episode).

    Raises
    ------
    TypeError
        ``trajectories`` is not an ``ope.Trajectories``.
    ValueError
        Unknown estimator; ``gamma``, ``max_weight``, ``reward_range`` or
        ``confidence_level`` out of range; a model array missing for ``dr``/``wdr`` or given to
        an estimator that does not use it.
    ope.SchemaError
        A named column (target, model, tail) or a required trajectory column is missing.
    ope.ValidationError
        Rows not sorted by (episode_id, step); ``done`` before an episode's last step;
        propensities outside (0, 1]; non-finite rewards or model values; rewards outside
        ``reward_range``; an array of the wrong length. Messages name the first rows.
    ope.PolicyError
        Target probabilities outside [0, 1] or not finite.
    ope.EstimationError
        Fewer than 2 episodes; every importance weight zero (for the estimators without a
        model); cumulative weights overflowing float64 without ``max_weight``.

    Warns
    -----
    OPEWarning
        Truncated episodes and no ``tail_value``.
    OverlapWarning
        Effective sample size below 1% of the episodes, or no weight at all (``dr``/``wdr``).
    SmallSampleWarning
        Fewer than 30 episodes.

    Notes
    -----
    Episode :math:`i` has steps :math:`t = 0 .. L_i - 1`, per-step ratios
    :math:`\rho_t = \pi_e(a_t|s_t)/\pi_b(a_t|s_t)`, cumulative weights
    :math:`w_t = \prod_{k \le t} \rho_k` (:math:`w_{-1} = 1`) and :math:`n` episodes:

    .. math::

        \hat V_{IS} &= \frac1n \sum_i w^i_{L_i-1} \sum_t \gamma^t r^i_t, \qquad
        \hat V_{PDIS} = \frac1n \sum_i \sum_t \gamma^t w^i_t r^i_t, \\
        \hat V_{WIS} &= \frac{\sum_i w^i_{L_i-1} \sum_t \gamma^t r^i_t}{\sum_i w^i_{L_i-1}},
        \qquad
        \hat V_{WPDIS} = \sum_t \gamma^t \frac{\sum_i w^i_t r^i_t}{D_t}, \\
        \hat V_{DR} &= \frac1n \sum_i \sum_t \gamma^t \big(w^i_t (r^i_t - \hat Q^i_t)
        + w^i_{t-1} \hat V^i_t\big), \\
        \hat V_{WDR} &= \sum_i \sum_t \gamma^t \Big(\frac{w^i_t}{D_t}(r^i_t - \hat Q^i_t)
        + \frac{w^i_{t-1}}{D_{t-1}} \hat V^i_t\Big), \quad D_{-1} = n,

    where :math:`D_t = \sum_i w^i_{\min(t, L_i - 1)}`: an episode that ended keeps its last
    weight and earns nothing afterwards, as in an absorbing state, so episodes of different
    lengths share one normalizer per step. ``dr`` is the recursion of Jiang & Li (2016),
    :math:`V^{(t)} = \hat V(s_t) + \rho_t (r_t + \gamma V^{(t+1)} - \hat Q(s_t, a_t))`,
    unrolled. ``is``, ``pdis`` and ``dr`` are unbiased (``dr`` when the model does not depend
    on these trajectories); ``wis``, ``wpdis`` and ``wdr`` are consistent, with a bias that
    vanishes as :math:`n` grows, and much lower variance. ``wpdis`` is ``wdr`` with a zero
    model, and ``pdis`` is ``dr`` with a zero model.

    **Truncation.** Without ``tail_value`` every estimator estimates
    :math:`E[\sum_{t < L} \gamma^t r_t]` with :math:`L` the logged length: the value of the
    episodes *truncated where the logs end* (for logs cut at a fixed horizon :math:`H`, the
    :math:`H`-step value; the truncation point must not depend on the actions). With
    ``tail_value`` :math:`\hat V(s_L)` the reward of each truncated episode's last step is
    replaced by :math:`r_{L-1} + \gamma \hat V(s_L)`, the tail term
    :math:`\gamma^L w_{L-1} \hat V(s_L)` of Thomas & Brunskill (2016); with an unbiased
    :math:`\hat V` of the untruncated process, ``is``, ``pdis`` and ``dr`` then estimate the
    untruncated value. For ``dr``/``wdr`` give ``q_hat``/``v_hat`` of the same process
    (truncated, time-dependent values for the first estimand; untruncated ones with a tail).

    **Standard errors.** For ``is``, ``pdis``, ``dr`` the per-episode terms :math:`G_i` give
    :math:`\mathrm{se} = \mathrm{sd}(G)/\sqrt n`. For the self-normalized estimators, the value
    is a smooth function of per-step means, and :math:`\mathrm{se} = \mathrm{sd}(\psi)/\sqrt n`
    with the influence terms :math:`\psi_i = \sum_t \gamma^t (x^i_t - U_t d^i_t)/\bar D_t +
    \ldots` (the delta method), computed per step without an (episodes x horizon) array.

    References
    ----------
    .. [1] D. Precup, R. S. Sutton and S. Singh, "Eligibility traces for off-policy policy
       evaluation", Proc. ICML, 2000.
    .. [2] N. Jiang and L. Li, "Doubly robust off-policy value evaluation for reinforcement
       learning", Proc. ICML, 2016.
    .. [3] P. S. Thomas and E. Brunskill, "Data-efficient off-policy policy evaluation for
       reinforcement learning", Proc. ICML, 2016.
    .. [4] P. S. Thomas, *Safe Reinforcement Learning*, PhD thesis, University of
       Massachusetts Amherst, 2015 (CWPDIS).

    Examples
    --------
    >>> import pandas as pd
    >>> from ope.io import read_trajectories
    >>> from ope.sequential import sequential_estimate
    >>> steps = pd.DataFrame({
    ...     "episode_id": [0, 0, 1, 1], "step": [0, 1, 0, 1], "action": [0, 1, 1, 1],
    ...     "propensity": 0.5, "reward": [1.0, 0.0, 0.0, 1.0], "done": [False, True] * 2,
    ...     "target__greedy": [1.0, 0.0, 1.0, 1.0]})
    >>> traj = read_trajectories(steps)
    >>> res = sequential_estimate(traj, "greedy", estimator="pdis", gamma=0.5)
    >>> res.value            # ((2 * 1) + (0.5 * 4 * 1)) / 2 episodes
    2.0
    >>> sequential_estimate(traj, "greedy", estimator="wpdis", gamma=0.5).value
    1.0
    """
    data, policy, notes = _sequential_iv(
        trajectories,
        target,
        estimator=estimator,
        gamma=gamma,
        q_hat=q_hat,
        v_hat=v_hat,
        tail_value=tail_value,
        reward_range=reward_range,
        max_weight=max_weight,
        confidence_level=confidence_level,
    )
    w = _cumulative_weights(data)
    final_w = w[data.starts[1:] - 1]
    n_ep = data.n_episodes
    note_texts = _diagnose(estimator, policy, n_ep, w, final_w, notes)
    source: _SequentialSource
    if estimator in ("wpdis", "wdr"):
        episode = np.repeat(np.arange(n_ep, dtype=np.int64), data.lengths)
        value, psi, dense = _self_normalized(data, estimator, w, final_w, episode)
        source = _SequentialSource(estimator, data.reward, n_ep, psi, dense=dense)
    else:
        value, psi, cols = _plain(data, estimator, w, final_w)
        source = _SequentialSource(estimator, data.reward, n_ep, psi, columns=cols)
    se = float(np.std(psi, ddof=1) / math.sqrt(n_ep))
    result = _make_estimate(
        estimator=estimator,
        value=value,
        std_error=se,
        n=n_ep,
        ess=_kish(final_w),
        notes=note_texts,
        policy=policy,
        source=source,
    )
    if confidence_level != DEFAULT_CONFIDENCE_LEVEL:
        result = result.with_ci(confidence_level, "normal")
    return result


# ============================================================================================
# fitted Q evaluation
# ============================================================================================
#: Allowed |sum_a pi(a|s) - 1| of a target policy's row: float32 storage of ~1,000 entries
#: accumulates about 1e-4 relative error at worst; past 1e-6 for float64 tables it is a bug.
POLICY_SUM_TOL: Final = 1e-6

#: FQE stops when the largest change of Q between iterations falls below this fraction of
#: max(1, max |Q|): with gamma < 1 the remaining error is then at most tol / (1 - gamma) of it.
FQE_TOL: Final = 1e-10

#: Rows per chunk when FQE accumulates its regression statistics: bounds the (rows x d x A)
#: temporary of next-state features times policy to a few tens of MB for moderate d * A.
_FQE_CHUNK_ROWS: Final = 1 << 14

#: Default cap on FQE iterations: with gamma = 0.95, 500 contractions shrink the initial error
#: by 0.95**500 ~ 7e-12, past FQE_TOL.
FQE_MAX_ITERATIONS: Final = 500


@dataclass(frozen=True)
class FittedQ:
    """What :func:`fitted_q_evaluation` learned, ready for ``sequential_estimate(estimator="dr")``.

    Attributes
    ----------
    q_hat : numpy.ndarray, shape (n,)
        :math:`\\hat Q(s_t, a_t)` of each logged step (trajectory row order).
    v_hat : numpy.ndarray, shape (n,)
        :math:`\\hat V(s_t) = \\sum_a \\pi(a|s_t) \\hat Q(s_t, a)` of each step.
    tail_value : numpy.ndarray of shape (n_episodes,) or None
        :math:`\\hat V` of the state each truncated episode was left in (NaN for episodes that
        terminated); None when the next state of truncated episodes is unknown (no
        ``next_state_column``, or feature-based FQE).
    value : float
        The model's own (direct-method) estimate, the mean of :math:`\\hat V(s_0)` over
        episodes. Its sampling error ignores the fit; use it through DR/WDR for inference.
    coef : numpy.ndarray
        The fitted Q table (n_states, n_actions), or weights (n_features, n_actions).
    n_iterations : int
        Iterations run.
    converged : bool
        True when the last change of Q fell below ``FQE_TOL``.
    """

    q_hat: np.ndarray
    v_hat: np.ndarray
    tail_value: np.ndarray | None
    value: float
    coef: np.ndarray
    n_iterations: int
    converged: bool


def _check_policy_table(table: npt.ArrayLike, n_states: int | None) -> np.ndarray:
    try:
        pi = np.array(table, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise PolicyError(
            f"`target_policy` must be an array of shape (n_states, n_actions); it could not be "
            f"converted to float64 ({exc})."
        ) from None
    if pi.ndim != 2 or pi.shape[1] < 1:
        raise PolicyError(
            f"`target_policy` must be a table of shape (n_states, n_actions); got shape "
            f"{pi.shape}."
        )
    if n_states is not None and pi.shape[0] < n_states:
        raise PolicyError(
            f"`target_policy` has {pi.shape[0]} rows but the trajectories hold state id "
            f"{n_states - 1}; it needs one row per state."
        )
    bad = ~np.isfinite(pi).all(axis=1) | (pi < 0).any(axis=1) | (pi > 1).any(axis=1)
    bad |= np.abs(pi.sum(axis=1) - 1.0) > POLICY_SUM_TOL
    if bad.any():
        s = int(np.flatnonzero(bad)[0])
        raise PolicyError(
            f"each row of `target_policy` must be a probability distribution over actions; "
            f"{int(bad.sum())} rows are not (first: state {s}, {pi[s].tolist()})."
        )
    return pi


def _int_column(traj: Trajectories, name: str, role: str) -> np.ndarray:
    if name not in traj.table.column_names:
        raise SchemaError(
            f"`{role}` names column {name!r}, which is not in the trajectories; they have: "
            f"{', '.join(traj.table.column_names)}."
        )
    col = traj.table.column(name)
    if not pa.types.is_integer(col.type) or col.null_count:
        raise SchemaError(
            f"column {name!r} ({role}) must hold integer ids 0, 1, ... without missing values; "
            f"it has type {col.type} and {col.null_count} missing value(s)."
        )
    return col.to_numpy().astype(np.int64, copy=False)


def fitted_q_evaluation(
    trajectories: Trajectories,
    target_policy: npt.ArrayLike | Callable[[np.ndarray], npt.ArrayLike],
    *,
    gamma: float,
    state_column: str | None = None,
    feature_columns: Sequence[str] | None = None,
    next_state_column: str | None = None,
    n_iterations: int = FQE_MAX_ITERATIONS,
    ridge: float = 1e-3,
) -> FittedQ:
    r"""Fitted Q evaluation (FQE) with a linear model: q̂, v̂ and tail values for DR / WDR.

    Parameters
    ----------
    trajectories : ope.Trajectories
        Validated steps (:func:`ope.read_trajectories`); ``action`` must hold integer ids
        ``0 .. n_actions-1``.
    target_policy : array of shape (n_states, n_actions), or callable
        With ``state_column``: the table :math:`\pi(a|s)`. With ``feature_columns``: a function
        mapping features of shape (m, d) to probabilities of shape (m, n_actions).
    gamma : float
        Discount factor in [0, 1].
    state_column : str, optional
        Integer state ids ``0 .. n_states-1``: tabular FQE (one-hot states, a Q table).
    feature_columns : sequence of str, optional
        Numeric state features: :math:`\hat Q(s, a) = \phi(s)^\top \theta_a`. Give exactly one of
        ``state_column`` and ``feature_columns``.
    next_state_column : str, optional
        Tabular only: the state each step led to (e.g. ``"next_state"`` of
        :class:`ope.simulate.TabularMDP`). It is read at the last step of truncated episodes,
        which then get a regression target and a ``tail_value``; without it those steps have
        no target and are left out of the regression (they still count in every estimate).
    n_iterations : int, default 500
        Largest number of iterations; FQE stops earlier once Q changes by less than
        ``FQE_TOL`` (relative).
    ridge : float, default 1e-3
        L2 penalty :math:`\lambda` of each regression (> 0 keeps unvisited actions at zero
        and the feature regressions well-posed).

    Returns
    -------
    FittedQ
        ``q_hat``, ``v_hat``, ``tail_value`` aligned with the trajectories, the model's value,
        the coefficients and convergence.

    Raises
    ------
    ValueError
        Neither or both of ``state_column`` / ``feature_columns``; bad ``gamma``, ``ridge`` or
        ``n_iterations``; ``next_state_column`` with features.
    ope.SchemaError
        A named column is missing or not of the needed type.
    ope.ValidationError
        Negative state or action ids, actions beyond the policy's, non-finite features.
    ope.PolicyError
        The policy table or function does not give probability distributions.

    Warns
    -----
    OPEWarning
        The iterations did not converge.

    Notes
    -----
    Starting from :math:`Q_0 = 0`, iteration :math:`k` regresses the targets

    .. math:: y_t = r_t + \gamma \sum_{a'} \pi(a' \mid s_{t+1})\, Q_{k-1}(s_{t+1}, a')

    (:math:`y_t = r_t` at a terminal step) on :math:`(s_t, a_t)` by ridge regression, one
    regression per action: :math:`\theta_a = (\Phi_a^\top\Phi_a + \lambda I)^{-1}\Phi_a^\top
    y_a`; in the tabular case :math:`Q(s,a) = \sum_{t: (s_t,a_t)=(s,a)} y_t / (N(s,a)+\lambda)`.
    The Gram matrices are factored once; each iteration costs one pass over the steps.
    FQE fits a *stationary* Q: the value of the untruncated discounted process, so pair its
    ``tail_value`` with DR/WDR to estimate the untruncated value.

    References
    ----------
    .. [1] H. Le, C. Voloshin and Y. Yue, "Batch policy learning under constraints",
       Proc. ICML, 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.io import read_trajectories
    >>> from ope.sequential import fitted_q_evaluation
    >>> from ope.simulate import TabularMDP
    >>> env = TabularMDP(n_states=3, n_actions=2, horizon=30, gamma=0.8, seed=0)
    >>> traj = read_trajectories(env.sample(3000, rng=0))
    >>> fq = fitted_q_evaluation(traj, env.policy_table("uniform"), gamma=0.8,
    ...                          state_column="state", next_state_column="next_state")
    >>> q_true = env.discounted_q_function("uniform")
    >>> bool(np.abs(fq.coef - q_true).max() < 0.1), fq.converged
    (True, True)
    """
    if not isinstance(trajectories, Trajectories):
        raise TypeError(
            "`trajectories` must be ope.Trajectories (from ope.read_trajectories); got "
            f"{type(trajectories).__name__}."
        )
    if (state_column is None) == (feature_columns is None):
        raise ValueError(
            "give exactly one of `state_column` (tabular FQE on integer state ids) and "
            "`feature_columns` (linear FQE on numeric state features)."
        )
    if next_state_column is not None and state_column is None:
        raise ValueError("`next_state_column` applies to tabular FQE (with `state_column`).")
    g = float(gamma)
    if not 0.0 <= g <= 1.0:
        raise ValueError(f"`gamma` (discount factor) must be in [0, 1]; got {gamma!r}.")
    lam = float(ridge)
    if not (lam > 0.0 and math.isfinite(lam)):
        raise ValueError(f"`ridge` must be a positive finite number; got {ridge!r}.")
    if int(n_iterations) != n_iterations or n_iterations < 1:
        raise ValueError(f"`n_iterations` must be a positive integer; got {n_iterations!r}.")
    traj = trajectories
    starts, lengths, _ = _check_structure(traj)
    reward = _float_column(traj, "reward", "reward")
    _check_rows(
        traj, ~np.isfinite(reward), "`reward` must be finite", "Fix or drop those episodes."
    )
    action = _int_column(traj, "action", "action")
    _check_rows(traj, action < 0, "`action` ids must be >= 0 for FQE",
                "Encode actions as 0 .. n_actions-1.")
    n = traj.n
    last = np.zeros(n, dtype=bool)
    last[starts[1:] - 1] = True
    truncated = np.asarray(traj.truncated, dtype=bool)
    trunc_last = starts[1:][truncated] - 1
    # the row whose state follows each row: the next row, except at episode ends
    nxt = np.arange(1, n + 1, dtype=np.int64)
    has_next = ~last
    fit = np.ones(n, dtype=bool)  # rows with a regression target
    fit[trunc_last] = False  # unless their next state is known (below)

    if state_column is not None:
        state = _int_column(traj, state_column, "state_column")
        _check_rows(traj, state < 0, f"state ids in {state_column!r} must be >= 0",
                    "Encode states as 0 .. n_states-1.")
        n_states = int(state.max()) + 1
        next_state = state[np.minimum(nxt, n - 1)]
        if next_state_column is not None:
            ns = _int_column(traj, next_state_column, "next_state_column")
            bad = np.zeros(n, dtype=bool)
            bad[trunc_last] = ns[trunc_last] < 0
            _check_rows(traj, bad, f"{next_state_column!r} must hold the state a truncated "
                        "episode was left in (>= 0) at its last step", "Fix the logger.")
            next_state[trunc_last] = ns[trunc_last]
            has_next[trunc_last] = True
            fit[trunc_last] = True
            n_states = max(n_states, int(ns[trunc_last].max(initial=-1)) + 1)
        pi = _check_policy_table(target_policy, n_states)
        n_actions = pi.shape[1]
        n_states = pi.shape[0]
        _check_rows(traj, action >= n_actions, f"`action` ids must be < {n_actions}, the "
                    "number of columns of `target_policy`", "Give the policy over all actions.")
        idx = state * n_actions + action
        denom = np.bincount(idx[fit], minlength=n_states * n_actions) + lam
        q = np.zeros((n_states, n_actions))
        converged, it = False, 0
        for it in range(1, int(n_iterations) + 1):  # iterations, not rows
            v = np.einsum("sa,sa->s", pi, q)
            y = reward + g * np.where(has_next, v[next_state], 0.0)
            sums = np.bincount(idx[fit], weights=y[fit], minlength=denom.size)
            new = (sums / denom).reshape(q.shape)
            change = float(np.abs(new - q).max())
            q = new
            if change <= FQE_TOL * max(1.0, float(np.abs(q).max())):
                converged = True
                break
        v = np.einsum("sa,sa->s", pi, q)
        q_hat, v_hat = q[state, action], v[state]
        tail = None
        if next_state_column is not None:
            tail = np.full(lengths.size, np.nan)
            tail[truncated] = v[next_state[trunc_last]]
        coef = q
    else:
        assert feature_columns is not None
        cols = list(feature_columns)
        if not cols:
            raise ValueError("`feature_columns` must name at least one column.")
        phi = np.column_stack([_float_column(traj, c, "feature_columns") for c in cols])
        policy_fn = target_policy
        if not callable(policy_fn):
            raise PolicyError(
                "with `feature_columns`, `target_policy` must be a function mapping features "
                "(m, d) to action probabilities (m, n_actions)."
            )

        def probs(x: np.ndarray) -> np.ndarray:
            try:
                p = np.asarray(policy_fn(x), dtype=np.float64)
            except (TypeError, ValueError) as exc:
                raise PolicyError(f"`target_policy` failed on the features: {exc}") from None
            if p.ndim != 2 or p.shape[0] != x.shape[0]:
                raise PolicyError(
                    f"`target_policy` must return shape ({x.shape[0]}, n_actions); got {p.shape}."
                )
            bad = ~np.isfinite(p).all(1) | (p < 0).any(1) | (np.abs(p.sum(1) - 1) > POLICY_SUM_TOL)
            if bad.any():
                raise PolicyError(
                    f"`target_policy` returned {int(bad.sum())} rows that are not probability "
                    f"distributions (first at row {int(np.flatnonzero(bad)[0])})."
                )
            return p

        pi_now = probs(phi)
        n_actions = pi_now.shape[1]
        _check_rows(traj, action >= n_actions, f"`action` ids must be < {n_actions}, the "
                    "number of actions of `target_policy`", "Give the policy over all actions.")
        d = phi.shape[1]
        # FQE with a linear model iterates an affine map of theta: theta_k = G^-1 (c + gamma
        # M theta_{k-1}) per action, with G_a = Phi_a'Phi_a + lambda I, c_a = Phi_a' r_a and
        # M_a = Phi_a' Z_a, Z = next-state features (x) next-state policy (0 at episode ends).
        # G, c, M are accumulated once, in chunks of rows; iterations then cost O(A^2 d^2).
        gram = np.zeros((n_actions, d, d))
        c = np.zeros((n_actions, d))
        m = np.zeros((n_actions, d, d * n_actions))
        fit_rows = np.flatnonzero(fit)
        for lo in range(0, fit_rows.size, _FQE_CHUNK_ROWS):  # chunks of rows
            rows = fit_rows[lo : lo + _FQE_CHUNK_ROWS]
            x = phi[rows]
            nr = np.minimum(rows + 1, n - 1)
            z = (phi[nr][:, :, None] * (pi_now[nr] * has_next[rows, None])[:, None, :])
            z = z.reshape(rows.size, d * n_actions)
            onehot = action[rows][:, None] == np.arange(n_actions)[None, :]
            for a in range(n_actions):  # actions, not rows
                xa = x[onehot[:, a]]
                gram[a] += xa.T @ xa
                c[a] += xa.T @ reward[rows][onehot[:, a]]
                m[a] += xa.T @ z[onehot[:, a]]
        gram += lam * np.eye(d)
        theta = np.zeros((d, n_actions))
        converged, it = False, 0
        for it in range(1, int(n_iterations) + 1):  # iterations, not rows
            rhs = c + g * (m @ theta.ravel())
            new = np.linalg.solve(gram, rhs[..., None])[..., 0].T
            change = float(np.abs(new - theta).max())
            theta = new
            if change <= FQE_TOL * max(1.0, float(np.abs(theta).max())):
                converged = True
                break
        q_all = phi @ theta
        q_hat = q_all[np.arange(n), action]
        v_hat = np.einsum("na,na->n", q_all, pi_now)
        tail = None
        coef = theta
    if not converged:
        warnings.warn(
            f"fitted_q_evaluation did not converge in {it} iterations (gamma={g}); raise "
            "n_iterations, or use gamma < 1 (with gamma = 1 FQE converges only when every "
            "episode terminates).",
            OPEWarning,
            stacklevel=2,
        )
    return FittedQ(
        q_hat=q_hat,
        v_hat=v_hat,
        tail_value=tail,
        value=float(v_hat[starts[:-1]].mean()),
        coef=coef,
        n_iterations=it,
        converged=converged,
    )
