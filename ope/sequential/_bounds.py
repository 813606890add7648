r"""Finite-sample intervals for ``is`` and ``pdis`` (and their clipped versions) from a priori bounds.

Private module of :mod:`ope.sequential`. Episodes are the i.i.d. units: each contributes one
per-episode term :math:`Y_i` (``W G`` for ``is``, :math:`\sum_t \gamma^t w_t r_t` for ``pdis``)
whose mean is the estimate. Hoeffding and empirical Bernstein (:mod:`ope.intervals.bounded`)
need an a priori range of :math:`Y_i`, derived here from

- ``reward_range`` :math:`[r_{lo}, r_{hi}]`, the a priori range of one step's reward;
- ``horizon`` :math:`H`, the a priori maximum episode length (never read off the data, unless
  the caller states with ``horizon="logged"`` that the longest logged episode is the horizon);
- ``gamma``;
- ``weight_bound``: an a priori bound :math:`B \ge \pi_e(a|s)/\pi_b(a|s)` on every *per-step*
  ratio (a number; then :math:`W_t = B^{t+1}` bounds the cumulative weight :math:`w_{0:t}`), or
  an array of :math:`H` bounds :math:`W_t \ge w_{0:t}` on the cumulative weights themselves;
- ``max_weight`` :math:`c`, the clip level of the clipped versions: :math:`W_t \to \min(W_t, c)`,
  and :math:`W_t = c` when no ``weight_bound`` is given.

With :math:`S_L = \sum_{t<L}\gamma^t` and episodes of length :math:`1 \le L \le H`:

.. math::

    Y^{IS} = w_{L-1} G,\ G \in [r_{lo} S_L, r_{hi} S_L]
    &\Rightarrow Y^{IS} \in \big[\min_L \min(0, W_{L-1} r_{lo} S_L),\
    \max_L \max(0, W_{L-1} r_{hi} S_L)\big], \\
    Y^{PDIS} = \sum_{t<L} \gamma^t w_t r_t
    &\Rightarrow Y^{PDIS} \in \Big[\sum_{t<H} \gamma^t \min(0, W_t r_{lo}),\
    \sum_{t<H} \gamma^t \max(0, W_t r_{hi})\Big],

since :math:`0 \le w_t \le W_t` (a weight can be zero) and the steps after an episode's end add
zero. The betting interval of ``is`` uses the weight structure instead (Karampatziakis, Mineiro
& Ramdas 2021: weights of mean at most one, returns in :math:`[G_{lo}, G_{hi}] =
[\min(r_{lo}, r_{lo} S_H), \max(r_{hi}, r_{hi} S_H)]`) and needs no weight bound; the betting
interval of ``pdis`` is the betting interval of the mean of the bounded terms (unit weights).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from ope._validation import (
    as_float_array,
    check_positive_int,
    check_weight_bound,
    require_reward_range,
    user_stacklevel,
)
from ope.exceptions import (
    EstimationError,
    MissingBoundsError,
    OverlapWarning,
    ParameterError,
    ValidationError,
)
from ope.intervals.betting import betting_interval
from ope.intervals.bounded import RANGE_RTOL, bernstein_interval, hoeffding_interval
from ope.intervals._types import ConfidenceInterval

__all__ = [
    "BOUNDED_METHODS",
    "BOUNDED_ESTIMATORS",
    "LOGGED_HORIZON",
    "EpisodeTerms",
    "check_horizon",
    "checked_weight_bound",
    "check_weights_within",
    "cumulative_bounds",
    "term_range",
    "bounded_interval",
]

#: The finite-sample interval methods available for trajectories.
BOUNDED_METHODS: Final = ("hoeffding", "bernstein", "betting")

#: The estimators whose per-episode terms are i.i.d. with a mean equal to the estimate.
BOUNDED_ESTIMATORS: Final = ("is", "pdis")

#: ``horizon=`` value by which the caller states that the longest logged episode is the horizon.
LOGGED_HORIZON: Final = "logged"


@dataclass(frozen=True)
class EpisodeTerms:
    """What the bounded intervals of one ``is``/``pdis`` estimate need (one entry per episode)."""

    kind: str  # "is" or "pdis"
    terms: np.ndarray  # (E,) per-episode terms Y_i; their mean is the estimate
    final_w: np.ndarray  # (E,) cumulative (clipped) weight of each episode's last step
    returns: np.ndarray  # (E,) discounted returns G_i
    rho_max: float  # largest per-step ratio (for checking a scalar weight_bound)
    w: np.ndarray  # (n,) cumulative (clipped) weights per step
    step: np.ndarray  # (n,) step of each row
    gamma: float
    reward_range: tuple[float, float] | None
    horizon: int | None
    max_weight: float | None
    weight_bound: float | np.ndarray | None
    tail_used: bool  # a non-zero tail value entered the terms (no a priori bound on it)


def check_horizon(horizon: object, lengths: np.ndarray) -> int | None:
    """The a priori horizon: None, a positive int at least every episode's length, or "logged".

    A longer episode than ``horizon`` is a ValidationError (the data break the stated bound).
    """
    if horizon is None:
        return None
    longest = int(lengths.max())
    if isinstance(horizon, str):
        if horizon != LOGGED_HORIZON:
            raise ParameterError(
                f"`horizon` must be a positive integer (the a priori maximum episode length) or "
                f"{LOGGED_HORIZON!r} (stating that the longest logged episode is the horizon); "
                f"got {horizon!r}."
            )
        return longest
    h = check_positive_int(horizon, "horizon")
    if longest > h:
        count = int((lengths > h).sum())
        raise ValidationError(
            f"horizon={h} is not a bound on these episodes: {count} episode(s) are longer "
            f"(the longest has {longest} steps). Pass the true a priori maximum episode length."
        )
    return h


def cumulative_bounds(
    weight_bound: float | np.ndarray | None, horizon: int, max_weight: float | None
) -> np.ndarray | None:
    """Bounds ``W_t`` on the (clipped) cumulative weights ``w_{0:t}``, ``t = 0 .. horizon-1``.

    A scalar ``weight_bound`` bounds each per-step ratio: ``W_t = weight_bound ** (t + 1)``; an
    array gives ``W_t`` directly. The clip level caps them; with no weight bound ``W_t = c``.
    None when neither is given.

    Examples
    --------
    >>> from ope.sequential._bounds import cumulative_bounds
    >>> cumulative_bounds(2.0, 3, None).tolist(), cumulative_bounds(2.0, 3, 5.0).tolist()
    ([2.0, 4.0, 8.0], [2.0, 4.0, 5.0])
    >>> cumulative_bounds(None, 2, 5.0).tolist()
    [5.0, 5.0]
    """
    if weight_bound is None:
        return None if max_weight is None else np.full(horizon, float(max_weight))
    if np.ndim(weight_bound) == 0:
        with np.errstate(over="ignore"):
            bounds = float(weight_bound) ** np.arange(1, horizon + 1, dtype=np.float64)
    else:
        bounds = np.asarray(weight_bound, dtype=np.float64)
    if max_weight is not None:
        bounds = np.minimum(bounds, max_weight)
    return bounds


def term_range(
    kind: str, bounds: np.ndarray, reward_range: tuple[float, float], gamma: float
) -> tuple[float, float]:
    """A priori range of one episode's term (see the module docstring for the derivation).

    Examples
    --------
    >>> import numpy as np
    >>> from ope.sequential._bounds import term_range
    >>> # W = [2, 4], rewards in [0, 1], gamma = 0.5: PDIS in [0, 2 + 0.5 * 4]
    >>> term_range("pdis", np.array([2.0, 4.0]), (0.0, 1.0), 0.5)
    (0.0, 4.0)
    >>> # IS: max over L of W_{L-1} S_L = max(2 * 1, 4 * 1.5)
    >>> term_range("is", np.array([2.0, 4.0]), (0.0, 1.0), 0.5)
    (0.0, 6.0)
    """
    r_lo, r_hi = reward_range
    disc = gamma ** np.arange(bounds.size, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        if kind == "pdis":
            lo = float(np.sum(disc * np.minimum(0.0, bounds * r_lo)))
            hi = float(np.sum(disc * np.maximum(0.0, bounds * r_hi)))
        else:
            s = np.cumsum(disc)  # S_L for L = 1 .. H
            lo = float(min(0.0, np.min(bounds * r_lo * s)))
            hi = float(max(0.0, np.max(bounds * r_hi * s)))
    return lo, hi


def _return_range(
    reward_range: tuple[float, float], gamma: float, horizon: int
) -> tuple[float, float]:
    """Range ``[G_lo, G_hi]`` of a discounted return over ``1 .. horizon`` steps."""
    r_lo, r_hi = reward_range
    s_h = float(np.sum(gamma ** np.arange(horizon, dtype=np.float64)))
    return min(r_lo, r_lo * s_h), max(r_hi, r_hi * s_h)


def check_weights_within(
    weight_bound: float | np.ndarray, rho_max: float, w: np.ndarray, step: np.ndarray
) -> None:
    """The data within the weight bound (ValidationError naming the first offending step).

    A scalar bounds every per-step ratio (``rho_max`` is the largest); an array bounds the
    cumulative weights ``w`` of each step.
    """
    if np.ndim(weight_bound) == 0:
        check_weight_bound(weight_bound, observed_max=rho_max)
        return
    bounds = np.asarray(weight_bound, dtype=np.float64)
    # cumulative weights come from exp(cumsum(log rho)): a few ulps above an exact bound
    over = w > bounds[step] * (1.0 + RANGE_RTOL)
    if over.any():
        j = int(np.flatnonzero(over)[0])
        raise ValidationError(
            f"weight_bound is not a bound on these cumulative weights: {int(over.sum())} step(s) "
            f"exceed it, first at row {j} (step {int(step[j])}: weight "
            f"{float(w[j]):g} > bound {float(bounds[step[j]]):g})."
        )


def checked_weight_bound(weight_bound: Any, horizon: int | None) -> float | np.ndarray | None:
    """A scalar per-step bound (positive, finite) or ``horizon`` cumulative bounds."""
    if weight_bound is None:
        return None
    if np.ndim(weight_bound) == 0 and not isinstance(weight_bound, np.ndarray):
        return check_weight_bound(weight_bound)
    arr = as_float_array(weight_bound, "weight_bound", ndim=(1,)).astype(np.float64)
    if not (np.isfinite(arr).all() and (arr > 0).all()):
        raise ParameterError(
            "`weight_bound` as an array holds a priori bounds W_t on the cumulative weights "
            "w_{0:t}, one per step: positive finite numbers."
        )
    if horizon is None:
        raise MissingBoundsError(
            "`weight_bound` as an array of per-step cumulative bounds needs `horizon=`, the a "
            "priori maximum episode length (one bound per step)."
        )
    if arr.shape != (horizon,):
        raise ParameterError(
            f"`weight_bound` as an array needs one bound per step, shape ({horizon},) for "
            f"horizon={horizon}; got shape {arr.shape}."
        )
    return arr


def _fit(iv: ConfidenceInterval, lo_e: float, hi_e: float, method: str) -> ConfidenceInterval:
    """Intersect with the range ``[lo_e, hi_e]`` the estimand can take (a point if empty)."""
    low, high = max(iv.low, lo_e), min(iv.high, hi_e)
    if low > high:
        side, point = ("above", hi_e) if iv.low > hi_e else ("below", lo_e)
        warnings.warn(
            f"the {method} interval of the per-episode terms, [{iv.low:.4g}, {iv.high:.4g}], "
            f"lies entirely {side} the range [{lo_e:g}, {hi_e:g}] the value can take; it is "
            f"reduced to {point:g}. The trajectories are inconsistent with importance weights "
            "of mean 1: check the logged propensities and the candidate's probabilities.",
            OverlapWarning,
            stacklevel=user_stacklevel(),
        )
        low = high = point
    return ConfidenceInterval(low, high)


def bounded_interval(
    terms: EpisodeTerms,
    method: str,
    *,
    confidence_level: float,
    weight_bound: float | np.ndarray | None,
) -> ConfidenceInterval:
    """The ``method`` interval of an ``is``/``pdis`` estimate (see the module docstring).

    ``weight_bound`` given here replaces the one given to the estimate. Raises
    MissingBoundsError naming what to pass, ValidationError when the data break the bounds.
    """
    rr = terms.reward_range
    if rr is None:
        require_reward_range(None, method)  # raises, naming reward_range
        raise AssertionError  # pragma: no cover
    if terms.horizon is None:
        raise MissingBoundsError(
            f"interval method {method!r} for trajectories needs the a priori horizon: pass "
            "horizon=H (the maximum episode length, known before seeing the data) to "
            f"sequential_estimate, or horizon={LOGGED_HORIZON!r} to state that the longest "
            "logged episode is the horizon."
        )
    if terms.tail_used:
        raise EstimationError(
            f"interval method {method!r} bounds the value within the horizon; the tail values "
            "of truncated episodes are model outputs without a priori bounds. Estimate without "
            "tail_value (or with tail_value=0.0) for a bounded interval of the truncated value."
        )
    h = terms.horizon
    explicit = weight_bound is not None
    wb = checked_weight_bound(weight_bound, h) if explicit else terms.weight_bound
    g_lo, g_hi = _return_range(rr, terms.gamma, h)
    if method == "betting" and terms.kind == "is":
        if explicit:
            raise ParameterError(
                "the betting interval of 'is' needs no weight bound (it uses that the weights "
                "average to at most 1); do not pass `weight_bound`."
            )
        # covers the (unclipped) value: clipped weights have mean <= 1 as well
        return betting_interval(
            terms.final_w,
            terms.returns,
            reward_range=(g_lo, g_hi),
            confidence_level=confidence_level,
        )
    bounds = cumulative_bounds(wb, h, terms.max_weight)
    if bounds is None:
        raise MissingBoundsError(
            f"interval method {method!r} of {terms.kind!r} needs an a priori bound on the "
            "importance weights: pass weight_bound=B with B >= pi_e(a|s) / pi_b(a|s) for every "
            "state and action (e.g. 1 / the smallest logging probability; the cumulative "
            "weight of step t is then at most B**(t+1)), or an array of bounds on the "
            "cumulative weights, one per step, to sequential_estimate or to ci(); or clip with "
            "max_weight= (the clip level bounds the weights). The largest observed weight is "
            "not a bound."
        )
    if explicit:
        check_weights_within(wb, terms.rho_max, terms.w, terms.step)  # type: ignore[arg-type]
    lo, hi = term_range(terms.kind, bounds, rr, terms.gamma)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise EstimationError(
            f"the a priori range of the per-episode terms overflows float64 (the weight bound "
            f"raised to the horizon {h}): clip with max_weight= or evaluate a shorter horizon."
        )
    mean = float(terms.terms.mean())
    n = int(terms.terms.size)
    if method == "betting":  # pdis: the mean of bounded i.i.d. terms, unit weights
        iv = betting_interval(
            np.ones(n), terms.terms, reward_range=(lo, hi), confidence_level=confidence_level
        )
    elif method == "hoeffding":
        iv = hoeffding_interval(mean, n, low=lo, high=hi, confidence_level=confidence_level)
    else:
        iv = bernstein_interval(
            mean,
            float(np.var(terms.terms, ddof=1)),
            n,
            low=lo,
            high=hi,
            confidence_level=confidence_level,
        )
    # the estimand's own range: the value lies in [G_lo, G_hi]; a clipped value, the mean of
    # clipped weights (mean <= 1) times bounded rewards, in [min(0, G_lo), max(0, G_hi)]
    if terms.max_weight is None:
        return _fit(iv, g_lo, g_hi, method)
    return _fit(iv, min(0.0, g_lo), max(0.0, g_hi), method)
