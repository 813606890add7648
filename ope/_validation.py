"""One checker per glossary term: every entry point validates arguments and arrays here.

Arguments (the call) and data (the rows) fail differently:

- a malformed **argument** (``confidence_level=1.5``, ``max_weight="10"``, ``reward_range="01"``,
  ``rng=3.5``) raises :class:`ope.ParameterError`, which the command line maps to exit code 2;
- a missing **a priori bound** that a method needs raises :class:`ope.MissingBoundsError`;
- **rows** that break a rule (a propensity of 0, a reward outside ``reward_range``, a NaN) raise
  :class:`ope.ValidationError`, with the count and the first offending row.

The glossary (DESIGN.md §3): ``max_weight`` is only ever the clip level of a clipped estimator;
``weight_bound`` is an a priori bound on the importance weights given to a bounded interval;
``reward_range`` is the a priori range of the rewards; ``confidence_level`` (never ``alpha``);
``rng`` for every random choice.

This module is private: its names are imported by ope's modules, and re-exported nowhere.
"""

from __future__ import annotations

import math
import numbers
import warnings
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from ope.exceptions import MissingBoundsError, ParameterError, ValidationError

__all__ = [
    "MAX_FINITE_WEIGHT",
    "FIX_PROPENSITY",
    "first_rows",
    "chunks",
    "value_range",
    "as_float_array",
    "check_finite",
    "check_logging_propensity",
    "check_target_propensity",
    "validated_pair",
    "check_real",
    "check_positive_int",
    "check_choice",
    "check_confidence_level",
    "check_max_weight",
    "check_weight_bound",
    "deprecated_weight_bound",
    "check_reward_range",
    "require_reward_range",
    "check_rewards_in_range",
    "check_rng",
    "resolve_seed",
    "user_stacklevel",
]

#: Largest importance weight accepted. Weights up to 1e150 have squares up to 1e300, so sums of
#: up to 1e8 squared weights stay finite in float64; larger ones would turn standard errors and
#: effective sample sizes into inf/NaN. Only logging propensities below 1 / 1e150 can produce
#: them (target propensities are at most 1), so the check costs one min over the propensities.
MAX_FINITE_WEIGHT: Final = 1e150

#: Entries per block of the blockwise min/max validation: 2**19 float64 entries are 4 MB, so a
#: block read for its minimum is still in the L2/L3 cache when its maximum is taken.
_VALIDATION_BLOCK_ELEMENTS: Final = 1 << 19

FIX_PROPENSITY: Final = (
    "Fix the logger, or read the logs with ope.read_logs(..., on_invalid='drop') to drop and "
    "count such rows."
)

_PACKAGE_DIR: Final = os.path.dirname(os.path.abspath(__file__))


# --------------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------------
def first_rows(bad: np.ndarray) -> tuple[int, int]:
    """Number of True rows in a (n,) or (n, P) mask and the first offending row (-1: none)."""
    rows = bad if bad.ndim == 1 else bad.reshape(bad.shape[0], -1).any(axis=1)
    idx = np.flatnonzero(rows)
    return int(idx.size), int(idx[0]) if idx.size else -1


def chunks(n: int, chunk_size: int) -> Iterator[slice]:
    """Slices of at most ``chunk_size`` rows covering ``range(n)`` (a loop over blocks)."""
    step = check_positive_int(chunk_size, "chunk_size")
    for start in range(0, n, step):
        yield slice(start, min(start + step, n))


def value_range(arr: np.ndarray) -> tuple[float, float]:
    """Smallest and largest entry of a non-empty array, NaN if any entry is NaN.

    Reduced block by block (min and max of a block while it is in cache) so that validating an
    (n, P) matrix costs about one read of it and allocates no (n, P) boolean masks.
    """
    flat = arr.reshape(arr.shape[0], -1)
    step = max(1, _VALIDATION_BLOCK_ELEMENTS // max(1, flat.shape[1]))
    lows, highs = [], []
    for sl in chunks(flat.shape[0], step):  # loop over blocks, not rows
        block = flat[sl]
        lows.append(block.min())
        highs.append(block.max())
    return float(np.min(lows)), float(np.max(highs))


def user_stacklevel() -> int:
    """``stacklevel`` that points a warning at the first caller outside the ope package."""
    frame = sys._getframe(2)  # the caller of the function that calls warnings.warn
    level = 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


# --------------------------------------------------------------------------------------------
# arrays (data: ValidationError)
# --------------------------------------------------------------------------------------------
def as_float_array(value: npt.ArrayLike, name: str, *, ndim: tuple[int, ...]) -> np.ndarray:
    """A floating array of one of the shapes ``ndim``, without copying float32/float64 input.

    A masked array is refused rather than read without its mask.
    """
    if isinstance(value, np.ma.MaskedArray):
        if np.ma.getmaskarray(value).any():
            count, first = first_rows(np.ma.getmaskarray(value))
            raise ValidationError(
                f"`{name}` is a masked array with {count} masked rows (first at row {first}); "
                "ope does not read a mask as missing values. Drop those rows, or pass "
                f"numpy.ma.filled({name}, fill_value) explicitly."
            )
        value = np.ma.getdata(value)
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as exc:  # ragged lists and the like
        raise ValidationError(
            f"`{name}` must be a numeric array; could not convert it: {exc}"
        ) from None
    if arr.dtype.kind not in "fiub":
        raise ValidationError(
            f"`{name}` must be numeric; got dtype {arr.dtype}. Convert it, e.g. "
            f"numpy.asarray({name}, dtype=float)."
        )
    if arr.dtype.kind != "f" or arr.dtype.itemsize < 4:  # ints, bools and float16 -> float64
        arr = arr.astype(np.float64)
    if arr.ndim not in ndim:
        shapes = " or ".join({0: "()", 1: "(n,)", 2: "(n, P)"}[d] for d in ndim)
        raise ValidationError(f"`{name}` must have shape {shapes}; got shape {arr.shape}.")
    return arr


def check_finite(arr: np.ndarray, name: str) -> None:
    """Every entry finite, else a ValidationError with the count and the first row."""
    if arr.size == 0:
        return
    low, high = value_range(arr)
    if math.isfinite(low) and math.isfinite(high):  # NaN and +-inf fail this
        return
    bad = ~np.isfinite(arr)  # the full mask only to report the offending rows
    if bad.any():
        count, first = first_rows(bad)
        raise ValidationError(
            f"`{name}` must be finite; {count} rows are NaN or infinite (first at row {first}). "
            "Remove or impute them before estimating."
        )


def check_logging_propensity(p: np.ndarray, name: str = "logging_propensity") -> None:
    """Logging propensities of the logged actions: finite, in (0, 1]."""
    if p.size:
        low, high = value_range(p)
        if low > 0 and high <= 1:  # False for NaN: then the detailed checks below report
            return
    check_finite(p, name)
    bad = (p <= 0) | (p > 1)
    if bad.any():
        count, first = first_rows(bad)
        raise ValidationError(
            f"`{name}` must be in (0, 1]; {count} rows are not (first at row {first}: "
            f"{float(p.reshape(p.shape[0], -1)[first].flat[0])!r}). {FIX_PROPENSITY}"
        )


def check_target_propensity(t: np.ndarray, name: str = "target_propensity") -> None:
    """Candidate propensities of the logged actions: finite, in [0, 1]."""
    if t.size:
        low, high = value_range(t)
        if low >= 0 and high <= 1:  # False for NaN: then the detailed checks below report
            return
    check_finite(t, name)
    bad = (t < 0) | (t > 1)
    if bad.any():
        count, first = first_rows(bad)
        raise ValidationError(
            f"`{name}` must be in [0, 1] (it is the candidate's probability of the logged "
            f"action); {count} rows are not (first at row {first}). Check that the candidate "
            "policy outputs probabilities, not scores."
        )


def validated_pair(
    logging_propensity: npt.ArrayLike, target_propensity: npt.ArrayLike
) -> tuple[np.ndarray, np.ndarray]:
    """Logging propensities (n,) and target propensities (n,) or (n, P), checked together.

    Besides the ranges, refuses rows whose weight ``target / logging`` would exceed
    :data:`MAX_FINITE_WEIGHT` (its square would not be representable).
    """
    p = as_float_array(logging_propensity, "logging_propensity", ndim=(1,))
    t = as_float_array(target_propensity, "target_propensity", ndim=(1, 2))
    if t.shape[0] != p.shape[0]:
        raise ValidationError(
            f"`target_propensity` has {t.shape[0]} rows but `logging_propensity` has "
            f"{p.shape[0]}; both must describe the same logged rows."
        )
    check_logging_propensity(p)
    check_target_propensity(t)
    if p.size and float(p.min()) * MAX_FINITE_WEIGHT < 1.0:  # only then can a weight overflow
        small = np.flatnonzero(p * MAX_FINITE_WEIGHT < 1.0)
        tt = t[small] if t.ndim == 1 else t[small].max(axis=1)
        with np.errstate(over="ignore"):
            rows = small[tt.astype(np.float64) / p[small].astype(np.float64) > MAX_FINITE_WEIGHT]
        if rows.size:
            raise ValidationError(
                f"importance weights overflow float64: {rows.size} rows (first at row "
                f"{int(rows[0])}: logging propensity {float(p[rows[0]])!r}) give "
                f"target/logging above {MAX_FINITE_WEIGHT:g}, whose squares are not "
                "representable. A propensity this small is not one the logger can have acted "
                f"on. {FIX_PROPENSITY}"
            )
    return p, t


# --------------------------------------------------------------------------------------------
# arguments (the call: ParameterError)
# --------------------------------------------------------------------------------------------
def check_real(value: Any, name: str) -> float:
    """A real number (int, float or a numpy scalar), never a bool or a string."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ParameterError(
            f"`{name}` must be a number; got {value!r} ({type(value).__name__})."
        )
    return float(value)


def check_positive_int(value: Any, name: str, *, minimum: int = 1) -> int:
    """A whole number ``>= minimum`` (ints or integral numpy scalars; never a bool or a float)."""
    what = "a positive integer" if minimum == 1 else f"a whole number >= {minimum}"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ParameterError(f"`{name}` must be {what}; got {value!r} ({type(value).__name__}).")
    if int(value) < minimum:
        raise ParameterError(f"`{name}` must be {what}; got {value!r}.")
    return int(value)


def check_choice(value: Any, name: str, choices: Sequence[str]) -> str:
    """One of ``choices`` (a string), else a ParameterError listing them."""
    if not isinstance(value, str) or value not in choices:
        raise ParameterError(
            f"`{name}` must be one of {', '.join(map(repr, choices))}; got {value!r}."
        )
    return value


def check_confidence_level(confidence_level: Any) -> float:
    """A confidence level strictly between 0 and 1 (0.95, not 95 and not alpha=0.05)."""
    if isinstance(confidence_level, (bool, np.bool_)) or not isinstance(
        confidence_level, numbers.Real
    ):
        raise ParameterError(
            f"`confidence_level` must be a number in (0, 1); got {confidence_level!r}. "
            "Pass e.g. confidence_level=0.95."
        )
    level = float(confidence_level)
    if not (0.0 < level < 1.0):
        raise ParameterError(
            f"`confidence_level` must be in (0, 1); got {confidence_level!r}. Pass e.g. "
            "confidence_level=0.95 for a 95% interval (not 95, and not alpha=0.05)."
        )
    return level


def check_max_weight(max_weight: Any) -> float | None:
    """The clip level of a clipped estimator: None (no clipping) or a positive finite number."""
    if max_weight is None:
        return None
    mw = check_real(max_weight, "max_weight")
    if not (math.isfinite(mw) and mw > 0):
        raise ParameterError(
            f"`max_weight` must be a positive finite number (the clip level); got "
            f"{max_weight!r}."
        )
    return mw


def check_weight_bound(
    weight_bound: Any, *, method: str | None = None, observed_max: float | None = None
) -> float | None:
    """An a priori bound on the importance weights, for the bounded interval methods.

    With ``method`` the bound is required (:class:`ope.MissingBoundsError` when None). With
    ``observed_max`` a bound below the largest observed weight is refused (it is not a bound).
    """
    if weight_bound is None:
        if method is None:
            return None
        raise MissingBoundsError(
            f"interval method {method!r} needs an a priori bound on the importance weights: "
            "pass weight_bound=M with M >= pi(a|x)/pi_0(a|x) for every context and action (e.g. "
            "1 / the smallest logging probability), or use ClippedIPS(max_weight=M), whose "
            "weights are bounded by construction. The largest observed weight is not a bound."
        )
    bound = check_real(weight_bound, "weight_bound")
    if not (math.isfinite(bound) and bound > 0):
        raise ParameterError(
            f"`weight_bound` must be a positive finite number (an a priori bound on the "
            f"importance weights); got {weight_bound!r}."
        )
    if observed_max is not None and observed_max > bound:
        raise ValidationError(
            f"weight_bound={bound:g} is not a bound on these weights: the largest observed "
            f"weight is {observed_max:g}. Pass a true a priori bound, or use "
            "ClippedIPS(max_weight=...)."
        )
    return bound


def deprecated_weight_bound(weight_bound: Any, max_weight: Any, *, where: str) -> Any:
    """``weight_bound``, or ``max_weight=``, its deprecated spelling in ``where`` (warns once per
    call; both at once is a ParameterError). The glossary: ``max_weight`` is only ever the clip
    level of a clipped estimator, the a priori bound on the weights is ``weight_bound``."""
    if max_weight is None:
        return weight_bound
    if weight_bound is not None:
        raise ParameterError(
            f"{where}: pass the a priori weight bound once, as `weight_bound=` (`max_weight=` is "
            "its deprecated spelling)."
        )
    warnings.warn(
        f"`max_weight=` of {where} is deprecated: use weight_bound= (the a priori bound on the "
        "importance weights; max_weight is only ever the clip level of a clipped estimator).",
        DeprecationWarning,
        stacklevel=user_stacklevel(),
    )
    return max_weight


def check_reward_range(reward_range: Any) -> tuple[float, float] | None:
    """The a priori reward range: None, or a pair ``(low, high)`` of finite numbers, low < high.

    A string (``"01"``) or a pair of booleans is refused, not read digit by digit.
    """
    if reward_range is None:
        return None
    if isinstance(reward_range, (str, bytes)) or not hasattr(reward_range, "__len__"):
        raise ParameterError(
            f"`reward_range` must be a pair (low, high) of numbers, e.g. (0.0, 1.0) for clicks; "
            f"got {reward_range!r}."
        )
    if len(reward_range) != 2:
        raise ParameterError(
            f"`reward_range` must be a pair (low, high) of numbers, e.g. (0.0, 1.0) for clicks; "
            f"got {len(reward_range)} values: {reward_range!r}."
        )
    low, high = (check_real(v, "reward_range") for v in reward_range)
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ParameterError(
            f"`reward_range` must be finite with low < high; got ({low!r}, {high!r})."
        )
    return low, high


def require_reward_range(reward_range: Any, method: str) -> tuple[float, float]:
    """:func:`check_reward_range` for a method that cannot run without the range."""
    rr = check_reward_range(reward_range)
    if rr is None:
        raise MissingBoundsError(
            f"interval method {method!r} needs the a priori reward range: pass "
            "reward_range=(low, high) when estimating (e.g. (0, 1) for clicks). The observed "
            "minimum and maximum reward are not bounds."
        )
    return rr


def check_rewards_in_range(
    reward: np.ndarray, reward_range: tuple[float, float] | None, name: str = "reward"
) -> None:
    """Every reward inside the a priori range (data: ValidationError with the first row)."""
    if reward_range is None or reward.size == 0:
        return
    low, high = reward_range
    r_lo, r_hi = value_range(reward)
    if r_lo >= low and r_hi <= high:
        return
    bad = (reward < low) | (reward > high)
    count, first = first_rows(bad)
    raise ValidationError(
        f"`{name}` has {count} rows outside reward_range=({low:g}, {high:g}) (first at row "
        f"{first}: {float(reward.reshape(reward.shape[0], -1)[first].flat[0])!r}). reward_range "
        "must be an a priori bound that every reward satisfies; widen it or fix the rewards."
    )


def check_rng(rng: Any) -> np.random.Generator:
    """A Generator from an int seed, a Generator (used as is) or None (fresh entropy)."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None:
        return np.random.default_rng()
    if isinstance(rng, (bool, np.bool_)) or not isinstance(rng, numbers.Integral) or rng < 0:
        raise ParameterError(
            f"rng must be an int seed, a numpy.random.Generator or None; got {rng!r} "
            f"({type(rng).__name__}). Pass e.g. rng=0 or rng=numpy.random.default_rng(0)."
        )
    return np.random.default_rng(int(rng))


def resolve_seed(rng: Any) -> tuple[int | None, np.random.Generator]:
    """The seed to record and the Generator to use, for a result that must be reproducible.

    An int seed is recorded as given; ``None`` draws a fresh 63-bit seed from the OS's
    entropy and records it (so the result says how to reproduce it exactly); a Generator
    is used as is and recorded as ``None`` (its state is the caller's to keep).

    Examples
    --------
    >>> from ope._validation import resolve_seed
    >>> resolve_seed(7)[0]
    7
    >>> seed, gen = resolve_seed(None)
    >>> isinstance(seed, int) and 0 <= seed < 2**63
    True
    """
    if rng is None:
        seed = int(np.random.SeedSequence().generate_state(1, np.uint64)[0] >> np.uint64(1))
        return seed, np.random.default_rng(seed)
    gen = check_rng(rng)
    if isinstance(rng, np.random.Generator):
        return None, gen
    return int(rng), gen
