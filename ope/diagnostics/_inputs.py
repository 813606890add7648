"""The validated inputs of one diagnosis, checked once through :mod:`ope._validation`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import sparse

from ope._kernel import compiled_loops
from ope._thresholds import MIN_ROWS, SUPPORT_FLOOR
from ope._validation import (
    as_float_array,
    check_finite,
    check_logging_propensity,
    check_rewards_in_range,
    check_target_propensity,
    check_weights_representable,
    describe,
    first_rows,
)
from ope.diagnostics.segments import (
    MAX_MATRIX_ACTIONS,
    POPULARITY_COLUMN,
    POPULARITY_LABELS,
    Segmentation,
    popularity_buckets,
    segment_codes,
)
from ope.diagnostics.support import as_csr, deficiency, propensity_consistency
from ope.exceptions import ParameterError, PolicyError, ValidationError
from ope.weights import check_sampling_weight

__all__ = ["Inputs", "validated_inputs"]


@dataclass
class Inputs:
    """Validated arrays kept by a Diagnostics object (references, not copies)."""

    reward: np.ndarray
    propensity: np.ndarray  # float64 (n,)
    #: the candidates' propensities: an (n, P) float32/float64 matrix, or P float64 (n,)
    #: columns read where they are (the logs' ``target__`` columns); see :attr:`target`
    targets: np.ndarray | list[np.ndarray]
    names: list[str]
    segmentations: list[Segmentation]
    action: np.ndarray | None
    action_labels: list[Any] | None
    deficiency: dict[str, np.ndarray] | None  # per row mass on pi_0 <= SUPPORT_FLOOR
    deficiency_zero: dict[str, np.ndarray] | None  # per row mass on pi_0 == 0
    target_distributions: Mapping[str, Any] | None
    logging_distribution: Any | None
    notes: list[str]  # notes found while validating (propensity consistency)
    #: the rows' sampling (Horvitz-Thompson) weights, float64 (n,); None when every one is 1
    sampling: np.ndarray | None = None
    #: what notes call the sampling weights (the log's column)
    sampling_name: str | None = None

    @property
    def n(self) -> int:
        return int(self.propensity.shape[0])

    @cached_property
    def target(self) -> np.ndarray:
        """The candidates' propensities as one (n, P) matrix (formed from the columns on first
        use: only segment cells and sampling weights need it)."""
        if isinstance(self.targets, np.ndarray):
            return self.targets
        return np.column_stack(self.targets)

    def column(self, j: int) -> np.ndarray:
        """Policy j's propensities (n,), without forming the matrix."""
        if isinstance(self.targets, np.ndarray):
            return self.targets[:, j]
        return self.targets[j]

    def weights(self, j: int) -> np.ndarray:
        """w = target / propensity for policy j, float64, in one pass (no float32 temporaries)."""
        out = np.empty(self.n, dtype=np.float64)
        np.divide(self.column(j), self.propensity, out=out)
        return out

    def total(self) -> float:
        """The estimated population size: ``sum s`` (``n`` without sampling weights)."""
        return float(self.n) if self.sampling is None else float(self.sampling.sum())

    def sampled(self, values: np.ndarray) -> np.ndarray:
        """``s * values`` per row (``values`` itself without sampling weights)."""
        return values if self.sampling is None else self.sampling * values

    def segmentation(self, column: str) -> Segmentation | None:
        return next((s for s in self.segmentations if s.column == column), None)


def _action_codes(action: Any, n: int, *, n_columns: int | None) -> tuple[np.ndarray, list[Any]]:
    """Integer codes and labels of the logged actions.

    With distributions (``n_columns`` given) the actions must already be their column codes;
    otherwise the distinct actions are coded in sorted order.
    """
    if isinstance(action, pd.Categorical) and n_columns is None:
        if len(action) == n and not (action.codes < 0).any():
            return np.asarray(action.codes, dtype=np.intp), list(action.categories)
    arr = action.to_numpy() if isinstance(action, pd.Series) else np.asarray(action)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValidationError(
            f"`action` must be one value per logged row: expected shape ({n},), got {arr.shape}."
        )
    if n_columns is not None:
        bad = (
            np.ones(n, dtype=bool) if arr.dtype.kind not in "iu" else (arr < 0) | (arr >= n_columns)
        )
        if bad.any():
            count, first = first_rows(bad)
            raise ValidationError(
                f"with distributions, `action` must hold integer column codes in [0, "
                f"{n_columns}); {count} row{' does' if count == 1 else 's do'} not (first at row "
                f"{first}: {arr[first]!r})."
            )
        return arr.astype(np.intp, copy=False), list(range(n_columns))
    small = _small_integer_codes(arr)
    if small is not None:
        return small
    codes, uniques = pd.factorize(arr, sort=True)
    if (codes < 0).any():
        count, first = first_rows(codes < 0)
        raise ValidationError(
            f"`action` has {count} missing values (first at row {first}); every logged row "
            "needs the action it took."
        )
    return codes.astype(np.intp, copy=False), list(uniques)


#: Largest span ``max - min`` of integer actions coded by a count over the span (an array of
#: that many entries) instead of a hash table: the usual action ids, 0 .. K - 1.
_SPAN_MAX: Final = 1 << 20


def _small_integer_codes(arr: np.ndarray) -> tuple[np.ndarray, list[Any]] | None:
    """The codes and labels of ``pd.factorize(arr, sort=True)`` for integer actions whose span
    is at most ``_SPAN_MAX`` (None otherwise): the distinct values are the nonzero entries of
    one count over the span, numbered in order.

    >>> codes, labels = _small_integer_codes(np.array([7, 3, 7, 5]))
    >>> codes.tolist(), [int(v) for v in labels]
    ([2, 0, 2, 1], [3, 5, 7])
    """
    if arr.dtype.kind not in "iu" or arr.size == 0:
        return None
    loops = _integer_loops() if arr.dtype == np.int64 and arr.flags.c_contiguous else None
    if loops is not None:  # one read for the span, one for the values present, one to code
        low, high = (int(v) for v in loops["_nb_integer_span"](arr))
        if high - low > _SPAN_MAX:
            return None
        marks = np.zeros(high - low + 1, dtype=np.uint8)
        loops["_nb_mark_present"](arr, low, marks)
        present = marks.view(np.bool_)
        found = _present_codes(arr, low, present)
        if found is not None:
            return found
        codes = np.empty(arr.shape[0], dtype=np.intp)
        loops["_nb_renumber"](arr, low, np.cumsum(present, dtype=np.intp) - 1, codes)
        return codes, _labels(arr, low, present)
    low, high = int(arr.min()), int(arr.max())
    if high - low > _SPAN_MAX:
        return None
    if low == 0 and arr.dtype == np.intp:  # the usual action ids: no offset to subtract
        offset = arr
    else:
        offset = arr.astype(np.int64) - low if arr.dtype != np.int64 else arr - low
    present = np.bincount(offset, minlength=high - low + 1) > 0
    found = _present_codes(arr, low, present)
    if found is not None:
        return found
    return (np.cumsum(present, dtype=np.intp) - 1)[offset], _labels(arr, low, present)


def _labels(arr: np.ndarray, low: int, present: np.ndarray) -> list[Any]:
    """The distinct values of ``arr`` in order, from the marks of the values present over the
    span from ``low``."""
    return list((np.flatnonzero(present) + low).astype(arr.dtype))


def _present_codes(
    arr: np.ndarray, low: int, present: np.ndarray
) -> tuple[np.ndarray, list[Any]] | None:
    """``arr`` itself as its codes when its values are every id 0 .. K - 1 (intp: no copy),
    else None."""
    if low == 0 and arr.dtype == np.intp and bool(present.all()):
        return arr, _labels(arr, low, present)
    return None


def _nb_integer_span(x):
    """Smallest and largest of the int64 values ``x`` (not empty), in one read."""
    lo = x[0]
    hi = x[0]
    for i in range(x.shape[0]):
        v = x[i]
        lo = min(lo, v)
        hi = max(hi, v)
    return lo, hi


def _nb_mark_present(x, low, marks):
    """``marks[v - low] = 1`` for every value ``v`` of ``x`` (each in ``[low, low + marks.size)``)."""
    for i in range(x.shape[0]):
        marks[x[i] - low] = 1


def _nb_renumber(x, low, number, out):
    """``out[i] = number[x[i] - low]``: each value's code."""
    for i in range(x.shape[0]):
        out[i] = number[x[i] - low]


def _integer_loops() -> dict[str, Any] | None:
    """The compiled loops of :func:`_small_integer_codes` (numba backend), else None."""
    return compiled_loops(__name__, (_nb_integer_span, _nb_mark_present, _nb_renumber))


def _arrays(
    reward: npt.ArrayLike,
    logging_propensity: npt.ArrayLike,
    target_propensity: npt.ArrayLike,
    rr: tuple[float, float] | None,
    target_columns: list[np.ndarray] | None = None,
    rows_validated: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | list[np.ndarray]]:
    r = as_float_array(reward, "reward", ndim=(1,)).astype(np.float64, copy=False)
    p = as_float_array(logging_propensity, "logging_propensity", ndim=(1,)).astype(
        np.float64, copy=False
    )
    t: np.ndarray | list[np.ndarray]
    if target_columns is not None:
        t = target_columns
        rows = [c.shape[0] for c in t]
    else:
        t = as_float_array(target_propensity, "target_propensity", ndim=(1, 2))
        if t.ndim == 1:
            t = t[:, None]
        rows = [t.shape[0]]
    n = p.shape[0]
    for name, size in [("reward", r.shape[0])] + [("target_propensity", k) for k in rows]:
        if size != n:
            raise ValidationError(
                f"`{name}` has {size} rows but `logging_propensity` has {n}; all "
                "arrays must describe the same logged rows."
            )
    if n < MIN_ROWS:
        raise ValidationError(
            f"diagnostics need at least {MIN_ROWS} logged rows; `reward`, "
            f"`logging_propensity` and `target_propensity` have {n}. Pass the whole log, not a "
            "row."
        )
    if not rows_validated:
        check_finite(r, "reward")
        check_logging_propensity(p)
    if target_columns is None:  # columns come from a reader that checked them
        assert isinstance(t, np.ndarray)
        check_target_propensity(t)
    check_weights_representable(p, t)
    check_rewards_in_range(r, rr)
    return r, p, t


def validated_inputs(
    reward: npt.ArrayLike,
    logging_propensity: npt.ArrayLike,
    target_propensity: npt.ArrayLike,
    *,
    reward_range: tuple[float, float] | None,
    policy_names: Sequence[str] | None,
    segments: Mapping[str, Any] | None,
    action: Any,
    action_labels: list[Any] | None,
    target_distributions: Mapping[str, Any] | None,
    logging_distribution: Any | None,
    sampling_weight: npt.ArrayLike | None = None,
    weight_name: str = "sampling_weight",
    target_columns: list[np.ndarray] | None = None,
    rows_validated: bool = False,
) -> Inputs:
    """Check the arrays, code the segments and actions, and compute the support deficiency.

    Sampling weights that are all 1 are dropped (``sampling`` None): such rows are unweighted.
    ``target_columns`` (then ``target_propensity`` is not read): the candidates' propensities as
    P float64 (n,) columns that a reader has validated (in [0, 1], no NaN), kept as they are
    (no (n, P) matrix) and not checked again. ``rows_validated``: the rows passed a reader's
    rules (finite rewards, logging propensities in (0, 1]), which are not checked again (the
    rewards are still checked against ``reward_range``).
    """
    r, p, t = _arrays(
        reward, logging_propensity, target_propensity, reward_range, target_columns, rows_validated
    )
    n_pol = len(t) if isinstance(t, list) else t.shape[1]
    n = p.shape[0]
    sampling = None
    if sampling_weight is not None:
        sampling = check_sampling_weight(sampling_weight, n, name=weight_name)
        if bool(np.all(sampling == 1.0)):
            sampling = None
    if policy_names is not None and (
        isinstance(policy_names, (str, bytes)) or not isinstance(policy_names, Iterable)
    ):
        raise ParameterError(
            f"`policy_names` must be a list of names, one per column of target_propensity "
            f"(e.g. policy_names=['greedy']); got {describe(policy_names)}."
        )
    if segments is not None and not isinstance(segments, Mapping):
        raise ParameterError(
            "`segments` must map each segment column's name to its values (one per row), e.g. "
            f"segments={{'country': country}}; got {describe(segments)}."
        )
    names = (
        [f"policy_{j}" for j in range(n_pol)]
        if policy_names is None
        else [str(x) for x in policy_names]
    )
    if len(names) != n_pol or len(set(names)) != len(names):
        raise PolicyError(
            f"`policy_names` must give {n_pol} distinct names (one per column of "
            f"target_propensity); got {list(names)}."
        )
    segs = [segment_codes(str(col), vals, n) for col, vals in (segments or {}).items()]
    codes = labels = None
    n_columns = None
    if logging_distribution is not None and sparse.issparse(logging_distribution):
        n_columns = max(
            [logging_distribution.shape[1]]
            + [m.shape[1] for m in (target_distributions or {}).values() if sparse.issparse(m)]
        )
    if action is not None:
        codes, labels = _action_codes(action, n, n_columns=n_columns)
        if action_labels is not None:
            labels = list(action_labels)
        if len(labels) > MAX_MATRIX_ACTIONS:
            _, row_bucket = popularity_buckets(codes, len(labels))
            segs.append(Segmentation(POPULARITY_COLUMN, row_bucket, list(POPULARITY_LABELS), False))
    if (target_distributions is None) != (logging_distribution is None):
        raise ValidationError(
            "support checks need both `target_distributions` and `logging_distribution` "
            "(the candidate's and the logger's full distributions per row); got only one."
        )
    notes: list[str] = []
    deficient = deficient_zero = tdist = ldist = None
    if target_distributions is not None and logging_distribution is not None:
        ldist = as_csr(logging_distribution, "logging_distribution", n)
        missing = [nm for nm in names if nm not in target_distributions]
        if missing:
            raise PolicyError(
                f"`target_distributions` has no distribution for {missing}; give one per "
                "policy name."
            )
        tdist = {
            nm: as_csr(target_distributions[nm], f"target_distributions[{nm!r}]", n) for nm in names
        }
        if codes is not None:
            notes = propensity_consistency(ldist, codes, p)
        deficient = {nm: deficiency(tdist[nm], ldist, SUPPORT_FLOOR) for nm in names}
        deficient_zero = {nm: deficiency(tdist[nm], ldist, 0.0) for nm in names}
    return Inputs(
        reward=r,
        propensity=p,
        targets=t,
        names=names,
        segmentations=segs,
        action=codes,
        action_labels=labels,
        deficiency=deficient,
        deficiency_zero=deficient_zero,
        target_distributions=tdist,
        logging_distribution=ldist,
        notes=notes,
        sampling=sampling,
        sampling_name=None if sampling is None else weight_name,
    )
