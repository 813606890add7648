"""Trajectories as validated per-step arrays: structure, columns and the checks of one call.

Private module of :mod:`ope.sequential`; its names are public to the package's submodules.
Argument and array checks of the glossary terms (propensities, target propensities, rewards and
``reward_range``, ``max_weight``, ``confidence_level``) go through :mod:`ope._validation`; what
is specific to trajectories (rows sorted by episode and step, ``done`` only at the end, model
arrays and tail values per step or per episode) is checked here, with messages naming the
episode and step of the first offending row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ope._validation import (
    as_float_array,
    check_choice,
    check_confidence_level,
    check_finite,
    check_logging_propensity,
    check_max_weight,
    check_real,
    check_reward_range,
    check_rewards_in_range,
    check_target_propensity,
)
from ope.exceptions import (
    EstimationError,
    OPEWarning,
    ParameterError,
    PolicyError,
    SchemaError,
    ValidationError,
)
from ope.logs import Trajectories
from ope.weights import SAMPLING_WEIGHT_COLUMN, refuse_sampling_weights

__all__ = [
    "SEQUENTIAL_ESTIMATORS",
    "MODEL_BASED",
    "MARGINALIZED",
    "EXAMPLES",
    "PerStep",
    "Steps",
    "where",
    "check_rows",
    "check_trajectories",
    "refuse_trajectory_weights",
    "check_gamma",
    "column",
    "float_column",
    "int_column",
    "per_step",
    "per_step_array",
    "check_structure",
    "tail_per_episode",
    "validated_steps",
    "state_codes",
]

#: The estimator names accepted by :func:`ope.sequential.sequential_estimate`.
SEQUENTIAL_ESTIMATORS: Final = (
    "is",
    "pdis",
    "wis",
    "wpdis",
    "dr",
    "wdr",
    "mis",
    "mis_dr",
    "magic",
)

#: Estimators that need a model's ``q_hat`` and ``v_hat`` per step.
MODEL_BASED: Final = frozenset({"dr", "wdr", "mis_dr", "magic"})

#: Estimators that weight by the state-marginal ratio ``d_t^pi(s) / d_t^b(s)`` estimated from
#: the logs: they need each step's (discrete) ``state``.
MARGINALIZED: Final = frozenset({"mis", "mis_dr"})

#: How many example rows an error message names.
EXAMPLES: Final = 3

PerStep = str | npt.ArrayLike


@dataclass(frozen=True)
class Steps:
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
    state: np.ndarray | None = None  # (n,) int64 codes of the states (marginalized estimators)

    @property
    def n_episodes(self) -> int:
        """Number of episodes."""
        return int(self.lengths.size)

    @property
    def horizon(self) -> int:
        """Length of the longest episode."""
        return int(self.lengths.max())


def where(traj: Trajectories, rows: np.ndarray) -> str:
    """'row 7 (episode_id 3, step 2), ...' for the first few rows of a mask's hits."""
    eid = traj.table.column("episode_id")
    step = traj.table.column("step")
    parts = [
        f"row {int(j)} (episode_id {eid[int(j)].as_py()!r}, step {step[int(j)].as_py()})"
        for j in rows[:EXAMPLES]
    ]
    return ", ".join(parts) + (", ..." if rows.size > EXAMPLES else "")


def check_rows(
    traj: Trajectories,
    bad: np.ndarray,
    what: str,
    fix: str,
    error: type[Exception] = ValidationError,
) -> None:
    """Raise ``error`` naming the episode and step of the first rows where ``bad`` holds."""
    if bad.any():
        rows = np.flatnonzero(bad)
        raise error(f"{what}; {rows.size} row(s) break this, first at {where(traj, rows)}. {fix}")


def check_trajectories(traj: object) -> Trajectories:
    """The ``trajectories`` argument: an :class:`ope.logs.Trajectories`, else ParameterError."""
    if not isinstance(traj, Trajectories):
        raise ParameterError(
            "`trajectories` must be ope.Trajectories (from ope.read_trajectories, which validates "
            f"and sorts the steps); got {type(traj).__name__}."
        )
    return traj


def refuse_trajectory_weights(traj: Trajectories) -> None:
    """Refuse trajectories whose ``weight`` column is not all 1
    (:func:`ope.weights.refuse_sampling_weights`): no trajectory estimator takes sampling
    weights."""
    table = traj.table
    refuse_sampling_weights(
        table.column(SAMPLING_WEIGHT_COLUMN)
        if SAMPLING_WEIGHT_COLUMN in table.column_names
        else None,
        what="trajectories",
        estimators="the trajectory estimators",
        units="episodes",
        advice=(
            "If the column is not a sampling weight, drop or rename it before reading the "
            "trajectories; if it is, no trajectory estimate of the traffic's value is "
            "available: dropping it estimates the value on the kept episodes, which differs "
            "when episodes were kept with unequal probabilities."
        ),
    )


def check_gamma(gamma: object) -> float:
    """The discount factor: a number in [0, 1]."""
    g = check_real(gamma, "gamma")
    if not 0.0 <= g <= 1.0:
        raise ParameterError(f"`gamma` (discount factor) must be in [0, 1]; got {gamma!r}.")
    return g


def column(traj: Trajectories, name: str, role: str) -> pa.ChunkedArray:
    """The column ``name`` of the trajectories (SchemaError naming the columns they have)."""
    if name not in traj.table.column_names:
        raise SchemaError(
            f"`{role}` names column {name!r}, which is not in the trajectories; they have: "
            f"{', '.join(traj.table.column_names)}."
        )
    return traj.table.column(name)


def float_column(traj: Trajectories, name: str, role: str) -> np.ndarray:
    """A numeric column of the trajectories as float64, without missing values."""
    col = column(traj, name, role)
    if not (pa.types.is_floating(col.type) or pa.types.is_integer(col.type)):
        raise SchemaError(
            f"`{role}` column {name!r} must be numeric (float64); it has type {col.type}."
        )
    if col.null_count:
        rows = np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))
        raise ValidationError(
            f"`{role}` column {name!r} has {col.null_count} missing value(s), first at "
            f"{where(traj, rows)}. Fill them or drop those episodes when reading."
        )
    return col.to_numpy().astype(np.float64, copy=False)


def int_column(traj: Trajectories, name: str, role: str) -> np.ndarray:
    """An integer id column of the trajectories as int64, without missing values."""
    col = column(traj, name, role)
    if not pa.types.is_integer(col.type) or col.null_count:
        raise SchemaError(
            f"column {name!r} ({role}) must hold integer ids 0, 1, ... without missing values; "
            f"it has type {col.type} and {col.null_count} missing value(s)."
        )
    return col.to_numpy().astype(np.int64, copy=False)


def per_step(traj: Trajectories, values: PerStep, role: str) -> np.ndarray:
    """A per-step float64 array from a column name or an array of length n; finite (an error
    names the episode and step of the first offending rows)."""
    out = per_step_array(traj, values, role)
    check_finite_steps(traj, out, role)
    return out


def check_finite_steps(traj: Trajectories, values: np.ndarray, role: str) -> None:
    """Every per-step value finite, else a ValidationError naming episodes and steps."""
    try:
        check_finite(values, role)  # the one finiteness rule (fast path: a min and a max)
    except ValidationError:
        check_rows(
            traj, ~np.isfinite(values), f"`{role}` must be finite", "Remove or impute them first."
        )
        raise


def check_steps_in_range(
    traj: Trajectories, values: np.ndarray, rr: tuple[float, float] | None, role: str
) -> None:
    """Every per-step value inside the a priori range ``rr``, naming episodes and steps."""
    try:
        check_rewards_in_range(values, rr, role)  # the one range rule
    except ValidationError:
        assert rr is not None
        check_rows(
            traj,
            (values < rr[0]) | (values > rr[1]),
            f"`{role}` has values outside reward_range=({rr[0]:g}, {rr[1]:g})",
            "reward_range must be an a priori bound that every reward satisfies; widen "
            "it or fix the rewards.",
        )
        raise


def per_step_array(traj: Trajectories, values: PerStep, role: str) -> np.ndarray:
    """A per-step float64 array from a column name or an array of length n (values unchecked)."""
    if isinstance(values, str):
        out = float_column(traj, values, role)
    else:
        out = as_float_array(values, role, ndim=(0, 1, 2)).astype(np.float64, copy=False)
        if out.shape != (traj.n,):
            raise ValidationError(
                f"`{role}` must hold one value per step: shape ({traj.n},) like the trajectories' "
                f"rows (in their sorted row order); got shape {out.shape}."
            )
    return out


def check_structure(traj: Trajectories) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
                f"{', '.join(str(int(j)) for j in rows[:EXAMPLES])}. Read the trajectories "
                "with ope.read_trajectories, which rejects (or with on_invalid='drop' drops) "
                "such episodes."
            )
    if traj.n == 0:
        raise EstimationError("the trajectories hold no steps; there is nothing to estimate.")
    starts = np.asarray(traj.episode_starts, dtype=np.int64)
    lengths = np.diff(starts)
    expected = np.arange(traj.n, dtype=np.int64) - np.repeat(starts[:-1], lengths)
    step = traj.table.column("step").to_numpy().astype(np.int64, copy=False)
    check_rows(
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
    check_rows(
        traj,
        done & ~last,
        "`done` may be true only at the last step of an episode",
        "Cut each episode at its first done=True step.",
    )
    return starts, lengths, step


def tail_per_episode(
    traj: Trajectories, tail_value: float | PerStep, starts: np.ndarray
) -> np.ndarray:
    """The tail value of each episode (float64, shape (E,)); only truncated ones are used."""
    n_ep = starts.size - 1
    last = starts[1:] - 1
    if isinstance(tail_value, str):
        return float_column(traj, tail_value, "tail_value")[last]
    if isinstance(tail_value, (bool, np.bool_)):
        raise ParameterError(f"`tail_value` must be a number or an array; got {tail_value!r}.")
    arr = as_float_array(tail_value, "tail_value", ndim=(0, 1)).astype(np.float64)
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


def _target(traj: Trajectories, target: PerStep) -> tuple[np.ndarray, str | None]:
    """The candidate's probabilities of the logged actions (PolicyError when out of [0, 1])."""
    policy: str | None = None
    name: PerStep = target
    if isinstance(target, str):
        name = target if target in traj.table.column_names else "target__" + target
        if name not in traj.table.column_names:
            have = traj.target_policies
            raise SchemaError(
                f"no column {target!r} or {'target__' + target!r} holds the target "
                f"probabilities; candidate policies in these trajectories: "
                f"{', '.join(map(repr, have)) if have else 'none (no target__<name> column)'}. "
                "Pass a target__<name> column name or an array with one probability per step."
            )
        policy = name[len("target__") :] if name.startswith("target__") else name
    pi_e = per_step_array(traj, name, "target")
    try:
        check_target_propensity(pi_e, "target")
    except ValidationError as exc:  # values that are no probabilities: the policy is at fault
        check_rows(
            traj,
            np.isfinite(pi_e) & ((pi_e < 0) | (pi_e > 1)),
            "`target` must be in [0, 1] (the candidate's probability of the logged action)",
            "Check that the candidate policy outputs probabilities, not scores.",
            PolicyError,
        )
        raise PolicyError(str(exc)) from None
    return pi_e, policy


def _check_model(estimator: str, q_hat: object, v_hat: object) -> None:
    """``q_hat``/``v_hat`` given exactly for the model-based estimators."""
    if estimator in MODEL_BASED:
        absent = [name for name, val in (("q_hat", q_hat), ("v_hat", v_hat)) if val is None]
        if absent:
            raise ParameterError(
                f"estimator {estimator!r} needs a model's values per step: pass "
                f"{' and '.join(absent)} (q_hat: Q(s_t, a_t) of the logged action; v_hat: "
                "V(s_t) = sum_a pi(a|s_t) Q(s_t, a)). Without a model use 'pdis' or 'wpdis'."
            )
    else:
        given = [name for name, val in (("q_hat", q_hat), ("v_hat", v_hat)) if val is not None]
        if given:
            raise ParameterError(
                f"estimator {estimator!r} does not use a model, but {' and '.join(given)} "
                "was given; use estimator='dr', 'wdr', 'mis_dr' or 'magic' to include it."
            )


def validated_steps(
    traj: object,
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
    state: PerStep | None = None,
) -> tuple[Steps, str | None, list[tuple[str, type[Warning]]]]:
    """Validate every input of a sequential estimate; return the normalized arrays, the policy
    name (when ``target`` names a column) and the notes found so far (with their warning)."""
    traj = check_trajectories(traj)
    check_choice(estimator, "estimator", SEQUENTIAL_ESTIMATORS)
    g = check_gamma(gamma)
    max_weight = check_max_weight(max_weight)
    check_confidence_level(confidence_level)
    rr = check_reward_range(reward_range)
    _check_model(estimator, q_hat, v_hat)
    refuse_trajectory_weights(traj)
    if estimator in MARGINALIZED and max_weight is not None:
        raise ParameterError(
            f"`max_weight` clips cumulative weights; estimator {estimator!r} weights by the "
            "state-marginal ratio, which does not grow with the horizon. Leave it out."
        )
    if estimator not in MARGINALIZED and state is not None:
        raise ParameterError(
            f"`state` serves the marginalized estimators ({', '.join(sorted(MARGINALIZED))}) "
            f"only; estimator {estimator!r} does not use it."
        )

    starts, lengths, step = check_structure(traj)
    codes = state_codes(traj, state) if estimator in MARGINALIZED else None
    pi_e, policy = _target(traj, target)
    prop = float_column(traj, "propensity", "propensity")
    check_logging_propensity(prop, "propensity")
    reward = float_column(traj, "reward", "reward")
    check_finite_steps(traj, reward, "reward")
    check_steps_in_range(traj, reward, rr, "reward")
    qh = None if q_hat is None else per_step(traj, q_hat, "q_hat")
    vh = None if v_hat is None else per_step(traj, v_hat, "v_hat")

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
                    "Pass tail_value=... (a value estimate of the state each truncated episode "
                    "was left in) to bootstrap the tail, or tail_value=0.0 to state that the "
                    "truncated value is the target.",
                    OPEWarning,
                )
            )
    else:
        tail = tail_per_episode(traj, tail_value, starts)
        bad = truncated & ~np.isfinite(tail)
        if bad.any():
            eps = np.flatnonzero(bad)
            raise ValidationError(
                f"`tail_value` must be finite for truncated episodes; {eps.size} are not, first "
                f"at {where(traj, starts[1:][eps] - 1)}."
            )
        if n_trunc:
            last = starts[1:] - 1
            reward_tail = reward.copy()
            reward_tail[last[truncated]] += g * tail[truncated]

    data = Steps(
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
        state=codes,
    )
    return data, policy, notes


def state_codes(traj: Trajectories, state: PerStep | None) -> np.ndarray:
    """Each step's state as an integer code (``state``: a column name, default ``"state"``, or
    an array of hashable values, one per step in the trajectories' order, sorted by
    ``(episode_id, step)``); states are compared by equality, so continuous states must be
    discretized first."""
    if state is None and "state" not in traj.table.column_names:
        raise ParameterError(
            "the marginalized estimators need each step's state: pass `state` (a column name or "
            "an array with one state per step; discretize continuous states into bins first), "
            "or give the trajectories a 'state' column."
        )
    if state is None or isinstance(state, str):
        col = column(traj, "state" if state is None else state, "state").combine_chunks()
        if col.null_count:
            rows = np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))
            raise ValidationError(
                f"`state` has {col.null_count} missing value(s), first at {where(traj, rows)}."
            )
        if pa.types.is_floating(col.type):
            values = col.to_numpy(zero_copy_only=False)
            check_finite_steps(traj, values, "state")
            return np.unique(values, return_inverse=True)[1].astype(np.int64)
        if pa.types.is_dictionary(col.type):
            col = col.cast(col.type.value_type)
        try:
            encoded = pc.dictionary_encode(col)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
            raise SchemaError(
                f"`state`: column of type {col.type} cannot be compared state by state; give "
                "integer or string states."
            ) from None
        return np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    if isinstance(state, np.ma.MaskedArray) and np.ma.is_masked(state):
        raise ValidationError(
            "`state` is a masked array with masked (missing) states; give every step a state."
        )
    try:
        values = np.asarray(state)
    except (TypeError, ValueError):
        raise ParameterError("`state` must be a column name or one state per step.") from None
    if values.ndim != 1 or values.shape[0] != traj.table.num_rows:
        raise ValidationError(
            f"`state` must hold one state per step ({traj.table.num_rows}); got shape "
            f"{values.shape}."
        )
    if values.dtype.kind == "f":
        check_finite_steps(traj, values.astype(np.float64), "state")
    if values.dtype.kind in "biufUS":
        return np.unique(values, return_inverse=True)[1].astype(np.int64).ravel()
    try:  # objects (a pandas column of strings): one Arrow type, or refused
        arrow = pa.array(values, from_pandas=True)  # NaN in an object array is missing
        encoded = pc.dictionary_encode(arrow)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError):
        raise ParameterError(
            "`state` must hold integers (of 64 bits), floats or strings of one type; it mixes "
            "types or holds other objects."
        ) from None
    if pa.types.is_floating(arrow.type):
        check_finite_steps(
            traj, np.asarray(arrow.to_numpy(zero_copy_only=False), np.float64), "state"
        )
    if encoded.null_count:
        rows = np.flatnonzero(encoded.is_null().to_numpy(zero_copy_only=False))
        raise ValidationError(f"`state` is missing at {where(traj, rows)}.")
    return np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
