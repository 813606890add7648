r"""How wrong may the propensities be before the answer changes? Marginal sensitivity bounds.

Every weighting estimate assumes the logged propensities :math:`p_i = \pi_0(a_i|x_i)` are the
probabilities the logger really used. They are not when they were estimated
(:func:`ope.propensity.estimate_propensities`) or when the logger read inputs the logs do not
hold (an unobserved confounder :math:`u`). The marginal sensitivity model (Tan 2006; Kallus &
Zhou 2018) bounds that error by a factor :math:`\Gamma \ge 1` on the odds of the logged action:

.. math:: \Gamma^{-1} \le \frac{p^*_i/(1-p^*_i)}{p_i/(1-p_i)} \le \Gamma,

where :math:`p^*_i` is the true probability (given everything the logger saw). The true inverse
propensity then lies in :math:`[A_i, B_i]` with :math:`A_i = 1 + (1/p_i - 1)/\Gamma` and
:math:`B_i = 1 + \Gamma(1/p_i - 1)` (:func:`msm_weight_range`); :math:`\Gamma = 1` is "the
propensities are right", and a row logged with :math:`p_i = 1` stays exact at every
:math:`\Gamma`.

**Bounds.** With :math:`c_i = s_i\pi(a_i|x_i)` (:math:`s_i` the sampling weight, 1 without one)
and unknown inverse propensities :math:`W_i\in[A_i, B_i]`:

* SNIPS (``estimator="snips"``, default): the extremes of
  :math:`\sum_i c_iW_ir_i / \sum_i c_iW_i` over the box. The maximum puts :math:`W_i = B_i` on
  the rows of the :math:`k` largest rewards and :math:`A_i` on the rest, for the best
  :math:`k` (a linear-fractional program whose optimum is a threshold in the reward; Kallus &
  Zhou 2018, Zhao, Small & Bhattacharya 2019); the minimum mirrors it. One sort of the rewards
  serves every candidate and :math:`\Gamma`; each bound is then a pass of cumulative sums. A
  brute-force linear program (Charnes-Cooper) gives the same numbers
  (``tests/test_sensitivity.py``).
* IPS (``estimator="ips"``): :math:`\sum_i c_iW_ir_i/\sum_i s_i` is linear in :math:`W`, so the
  maximum takes :math:`B_i` where :math:`r_i > 0` and :math:`A_i` elsewhere.

The bounds are valid, not sharp: they use only the box, not that the true weights also average
to one (Dorn & Guo 2022 give the sharp bounds). At :math:`\Gamma = 1` both ends are the point
estimate.

**Sampling error.** Each end gets the normal margin of its own estimate with its extremal
weights held fixed: :math:`z_{1-\alpha/2}\,\mathrm{sd}(\psi)/\sqrt n` with the influence terms
:math:`\psi_i = c_iW_i(r_i - V)/\overline{cW}` (SNIPS) or :math:`(c_iW_ir_i - s_iV)/\bar s`
(IPS), the delta method of :mod:`ope.estimators`. The interval from the lower end's lower limit
to the upper end's upper limit covers the whole region, hence the true value, with
asymptotic probability at least the nominal level when the true :math:`\Gamma` is at most the
one used (the threshold's choice does not move the limit: the bound is an envelope, so its
derivative in the threshold is zero at the optimum). At :math:`\Gamma = 1` it is exactly the
estimator's normal interval.

**The decision and its tipping point.** The effect over the logging policy is the bound minus
the logging policy's on-policy mean reward (a Hajek mean with sampling weights), with the paired
influence terms :math:`\psi_i - s_i(r_i - \bar r)/\bar s`. At :math:`\Gamma = 1` a candidate is
``"better"`` (``"worse"``) than logging when the interval of its effect lies above (below) zero.
:math:`\Gamma^*` is the smallest :math:`\Gamma` at which that stops holding: the lower
(upper) limit of the effect's lower (upper) bound reaches zero. It is searched on
:data:`GAMMA_SEARCH` and refined by bisection in :math:`\log\Gamma` to a relative
:data:`GAMMA_TOLERANCE`; ``inf`` when the decision holds up to the grid's end (:math:`\Gamma =`
``GAMMA_SEARCH[-1]``), NaN when there is no decision to flip. Read it as: "the propensities' odds
would have to be off by a factor :math:`\Gamma^*` (for some rows, in the worst direction) for
the logs to stop supporting this decision". Below :data:`ope._thresholds.GAMMA_FRAGILE` the
report lists it under what to watch.

References
----------
.. [1] Z. Tan, "A distributional approach for causal inference using propensity scores",
   JASA 101(476), 2006 (the marginal sensitivity model).
.. [2] N. Kallus and A. Zhou, "Confounding-robust policy improvement", NeurIPS 2018.
.. [3] Q. Zhao, D. S. Small and B. B. Bhattacharya, "Sensitivity analysis for inverse
   probability weighting estimators via the percentile bootstrap", JRSS-B 81(4), 2019.
.. [4] J. Dorn and K. Guo, "Sharp sensitivity analysis for inverse propensity weighting via
   quantile balancing", JASA 118(544), 2023.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

from ope._result import Result, ResultParts
from ope._thresholds import GAMMA_FRAGILE
from ope._validation import as_float_array, check_choice, check_confidence_level
from ope.exceptions import ParameterError, ValidationError
from ope.intervals._shared import normal_quantile

__all__ = [
    "GAMMA_GRID",
    "GAMMA_SEARCH",
    "GAMMA_TOLERANCE",
    "GAMMA_FRAGILE",
    "Sensitivity",
    "msm_weight_range",
    "tipping_point",
    "describe_tipping",
    "describe_approval_tipping",
    "sensitivity_arrays",
    "sensitivity",
    "sensitivity_of_inputs",
]

#: The Γ values of the curve unless others are given: "right" (1), then odds off by 10% to 5×.
GAMMA_GRID: Final = (1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 5.0)

#: Where Γ* is searched: 25 points from 1 to 100 evenly in log Γ (ratio 1.21 between
#: neighbours), the first one where the decision fails then refined by bisection.
GAMMA_SEARCH: Final = tuple(float(g) for g in np.geomspace(1.0, 100.0, 25))

#: Relative precision of Γ* (the bisection stops when the bracket's ratio is below 1 + this).
GAMMA_TOLERANCE: Final = 1e-4

Decision = Literal["better", "worse", "unclear"]


def msm_weight_range(
    propensity: npt.ArrayLike, gamma: float
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The range ``[A, B]`` of the true inverse propensity under the marginal sensitivity
    model with factor ``gamma``: ``A = 1 + (1/p - 1)/gamma``, ``B = 1 + gamma (1/p - 1)``.

    Parameters
    ----------
    propensity : array_like, shape (n,)
        Logged (or estimated) propensities of the logged actions, in (0, 1].
    gamma : float
        The odds factor, >= 1.

    Returns
    -------
    (A, B) : two float64 arrays of shape (n,)

    Examples
    --------
    >>> lo, hi = msm_weight_range([0.5, 0.2, 1.0], 2.0)
    >>> lo.tolist(), hi.tolist()
    ([1.5, 3.0, 1.0], [3.0, 9.0, 1.0])
    """
    g = _check_gamma(gamma, "gamma")
    p = np.asarray(as_float_array(propensity, "propensity", ndim=(1,)), dtype=np.float64)
    bad = ~((p > 0.0) & (p <= 1.0))
    if bad.any():
        row = int(np.argmax(bad))
        raise ValidationError(
            f"`propensity` must hold probabilities in (0, 1]; row {row} is {p[row]!r}. A "
            "propensity of 0 means the logger could not have played the logged action."
        )
    odds = 1.0 / p - 1.0
    return 1.0 + odds / g, 1.0 + odds * g


def _check_gamma(value: Any, name: str) -> float:
    try:
        g = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ParameterError(f"`{name}` must be a number >= 1; got {value!r}.") from None
    if not (math.isfinite(g) and g >= 1.0) or isinstance(value, bool):
        raise ParameterError(
            f"`{name}` must be a finite number >= 1 (1: the propensities are right); got {value!r}."
        )
    return g


def _check_gammas(gammas: Any) -> tuple[float, ...]:
    if isinstance(gammas, (str, bytes)) or not isinstance(gammas, Sequence | np.ndarray):
        raise ParameterError(
            f"`gammas` must be a sequence of numbers >= 1, e.g. {list(GAMMA_GRID)}; got "
            f"{type(gammas).__name__}."
        )
    values = sorted({_check_gamma(g, "gammas") for g in gammas} | {1.0})
    return tuple(values)


@dataclass(frozen=True)
class _Rows:
    """The rows of one analysis, grouped by distinct reward in decreasing order (shared by every
    candidate and Γ): every bound is a function of per-group sums, so each Γ costs one pass over
    the groups, not over the rows."""

    rho: np.ndarray  # (G,) the distinct rewards, decreasing
    starts: np.ndarray  # (G,) where each group starts in the sorted rows
    order: np.ndarray  # (n,) the sort: sorted row i is input row order[i]
    odds: np.ndarray  # (n,) 1/p - 1, sorted
    sampling: np.ndarray  # (n,) s_i, sorted (ones without sampling weights)
    s_sum: float
    s2: np.ndarray  # (G,) sum of s^2 per group
    baseline: float  # the logging policy's (Hajek) mean reward
    beta2: float  # sum of the logging terms' squares, (s_i (r_i - baseline) / mean s)^2
    unweighted: bool  # no sampling weights (every s_i = 1)

    @property
    def n(self) -> int:
        return int(self.order.shape[0])

    @property
    def s_mean(self) -> float:
        return self.s_sum / self.n


def _rows(reward: np.ndarray, propensity: np.ndarray, sampling: np.ndarray | None) -> _Rows:
    order = np.argsort(-reward, kind="stable")
    r = reward[order]
    starts = np.flatnonzero(np.concatenate(([True], r[1:] != r[:-1])))
    s = np.ones_like(r) if sampling is None else sampling[order]
    s_sum = float(s.sum())
    base = float(np.dot(s, r) / s_sum)
    beta = s * (r - base) / (s_sum / r.shape[0])
    return _Rows(
        r[starts],
        starts,
        order,
        1.0 / propensity[order] - 1.0,
        s,
        s_sum,
        np.add.reduceat(s * s, starts),
        base,
        float(np.dot(beta, beta)),
        sampling is None,
    )


@dataclass(frozen=True)
class _Sums:
    """One candidate's per-group sums, free of Γ: with ``c = s pi``, ``o`` the odds and
    ``W = 1 + f o`` (``f`` = 1/Γ or Γ), the group's sum of ``c W`` is ``c1 + f co``, of
    ``(c W)^2`` is ``cc + 2 f cco + f^2 ccoo`` and of ``c W s`` is ``cs + f cos``."""

    c1: np.ndarray
    co: np.ndarray
    cc: np.ndarray
    cco: np.ndarray
    ccoo: np.ndarray
    cs: np.ndarray
    cos: np.ndarray

    @classmethod
    def of(cls, rows: _Rows, c: np.ndarray) -> _Sums:
        o, s, at = rows.odds, rows.sampling, rows.starts
        co = c * o
        c1, co_sum = np.add.reduceat(c, at), np.add.reduceat(co, at)
        cc, cco, ccoo = (np.add.reduceat(x, at) for x in (c * c, c * co, co * co))
        if rows.unweighted:  # s = 1: the sums with s are the sums without
            return cls(c1, co_sum, cc, cco, ccoo, c1, co_sum)
        cs, cos = np.add.reduceat(c * s, at), np.add.reduceat(co * s, at)
        return cls(c1, co_sum, cc, cco, ccoo, cs, cos)

    def at(self, f: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per group, the sums of ``c W``, ``(c W)^2`` and ``c W s`` for ``W = 1 + f o``."""
        return (
            self.c1 + f * self.co,
            self.cc + f * (2.0 * self.cco + f * self.ccoo),
            self.cs + f * self.cos,
        )


def _bound(
    rows: _Rows, sums: _Sums, gamma: float, side: int, estimator: str
) -> tuple[float, float, float]:
    """One end (``side`` +1: upper, -1: lower) of the estimate over the Γ box: the value and the
    variances (ddof 1) of its influence terms and of its paired difference with the logging
    policy, with the end's extremal weights held fixed."""
    rho, n, base = rows.rho, rows.n, rows.baseline
    big, small = gamma, 1.0 / gamma
    if estimator == "ips":  # linear in W: B where the reward pushes the end, A elsewhere
        push = (rho > 0.0) if side > 0 else (rho < 0.0)
        cw, cw2, cws = sums.at(np.where(push, big, small))
        sm = rows.s_mean
        value = float(np.dot(cw, rho)) / rows.s_sum
        # psi_i = (c_i W_i r_i - s_i V) / mean s, summed in squares per group
        psi2 = float(np.sum(rho * rho * cw2 - 2.0 * value * rho * cws + value * value * rows.s2))
        cross = float(np.sum((rho - base) * (rho * cws - value * rows.s2)))
        psi2, cross = max(psi2, 0.0) / (sm * sm), cross / (sm * sm)
    else:  # SNIPS: the first k groups (largest rewards) at one end of the box, the rest at the other
        first, rest = (big, small) if side > 0 else (small, big)
        a_first, a_rest = sums.c1 + first * sums.co, sums.c1 + rest * sums.co
        zero = np.zeros(1)
        num = np.concatenate((zero, np.cumsum(a_first * rho)))
        num += float(np.dot(a_rest, rho)) - np.concatenate((zero, np.cumsum(a_rest * rho)))
        den = np.concatenate((zero, np.cumsum(a_first)))
        den += float(a_rest.sum()) - np.concatenate((zero, np.cumsum(a_rest)))
        ratio = num / den  # den > 0: some c_i > 0 (checked) and every W_i >= 1
        k = int(np.argmax(ratio) if side > 0 else np.argmin(ratio))
        f = np.where(np.arange(rho.shape[0]) < k, first, rest)
        cw, cw2, cws = sums.at(f)
        total = float(cw.sum())
        value = float(np.dot(cw, rho)) / total  # the chosen threshold's value, summed afresh
        mw, sm = total / n, rows.s_mean
        d = rho - value
        # psi_i = c_i W_i (r_i - V) / mean(c W); beta_i = s_i (r_i - baseline) / mean s
        psi2 = float(np.dot(d * d, cw2)) / (mw * mw)
        cross = float(np.sum(d * (rho - base) * cws)) / (mw * sm)
    var = psi2 / (n - 1.0)
    var_effect = max(psi2 - 2.0 * cross + rows.beta2, 0.0) / (n - 1.0)
    return value, var, var_effect


def _limit(value: float, var: float, side: int, z: float, n: int) -> float:
    return value + side * z * math.sqrt(var / n)


@dataclass(frozen=True)
class _Policy:
    """One candidate's curve and tipping point."""

    name: str
    curve: list[dict[str, float]]
    estimate: float
    effect: float
    effect_ci: tuple[float, float]
    decision: Decision
    gamma_star: float


def _analyse(
    rows: _Rows, c: np.ndarray, name: str, gammas: Sequence[float], estimator: str, z: float
) -> _Policy:
    if not float(c.sum()) > 0.0:
        raise ValidationError(
            f"`target_propensity`: candidate {name!r} gives probability 0 to every logged "
            "action, so no weighting estimate (and no bound) exists for it. Check its target "
            "propensities (or leave the candidate out)."
        )
    sums, n, base = _Sums.of(rows, c), rows.n, rows.baseline
    curve = []
    for g in gammas:  # a loop over the curve's points; each is one pass over the groups
        low, v_low, e_low = _bound(rows, sums, g, -1, estimator)
        high, v_high, e_high = _bound(rows, sums, g, +1, estimator)
        curve.append(
            {
                "gamma": g,
                "lower": low,
                "upper": high,
                "ci_low": _limit(low, v_low, -1, z, n),
                "ci_high": _limit(high, v_high, +1, z, n),
                "effect_lower": low - base,
                "effect_upper": high - base,
                "effect_ci_low": _limit(low - base, e_low, -1, z, n),
                "effect_ci_high": _limit(high - base, e_high, +1, z, n),
            }
        )
    at_one = curve[0]
    decision: Decision = (
        "better"
        if at_one["effect_ci_low"] > 0.0
        else "worse"
        if at_one["effect_ci_high"] < 0.0
        else "unclear"
    )
    star = math.nan if decision == "unclear" else _tipping(rows, sums, estimator, z, decision)
    return _Policy(
        name,
        curve,
        at_one["lower"],
        at_one["effect_lower"],
        (at_one["effect_ci_low"], at_one["effect_ci_high"]),
        decision,
        star,
    )


def _tipping(rows: _Rows, sums: _Sums, estimator: str, z: float, decision: Decision) -> float:
    """The smallest Γ at which the decision's side of the effect interval reaches zero."""
    side = -1 if decision == "better" else +1

    def holds(g: float) -> bool:
        value, _, var_effect = _bound(rows, sums, g, side, estimator)
        limit = _limit(value - rows.baseline, var_effect, side, z, rows.n)
        return limit > 0.0 if side < 0 else limit < 0.0

    return tipping_point(holds)


def tipping_point(holds: Callable[[float], bool]) -> float:
    """The smallest Γ at which ``holds(Γ)`` (a decision, true at Γ = 1) fails: the first point of
    :data:`GAMMA_SEARCH` where it fails, refined by bisection in log Γ to a relative
    :data:`GAMMA_TOLERANCE`; ``inf`` when it holds on the whole grid. The one search of Γ* for
    :func:`sensitivity` and the safety gate's certificate."""
    previous = 1.0
    for g in GAMMA_SEARCH[1:]:  # a loop over the search grid (25 points at most)
        if not holds(g):
            low, high = math.log(previous), math.log(g)
            while high - low > math.log1p(GAMMA_TOLERANCE):  # bisection in log Γ
                mid = 0.5 * (low + high)
                low, high = (mid, high) if holds(math.exp(mid)) else (low, mid)
            return math.exp(high)
        previous = g
    return math.inf


@dataclass(frozen=True, eq=False)
class Sensitivity(Result):
    """Bounds on each candidate's value when the propensities may be off by a factor Γ.

    Made by :func:`sensitivity` (logs) and :func:`sensitivity_arrays` (arrays); the model,
    the bounds and the tipping point are in :mod:`ope.diagnostics.msm`.

    Attributes
    ----------
    policies : tuple of str
    estimator : {"snips", "ips"}
        The estimator whose range over the Γ box is bounded.
    gammas : tuple of float
        The Γ values of the curve (always with 1).
    confidence_level : float
        Level of the intervals around the bounds (two-sided normal margins at each end).
    n : int
        Rows.
    baseline_value : float
        The logging policy's on-policy mean reward (Hajek with sampling weights).
    propensity_source : {"logged", "estimated"}
        Where the propensities came from (the logs' provenance; "logged" for arrays).
    sampling_weight : str or None
        The sampling weights' column (or argument) when the rows carry them.
    """

    policies: tuple[str, ...]
    estimator: str
    gammas: tuple[float, ...]
    confidence_level: float
    n: int
    baseline_value: float
    propensity_source: str = "logged"
    sampling_weight: str | None = None
    _results: tuple[_Policy, ...] = field(default=(), repr=False)

    def table(self) -> pd.DataFrame:
        """The curve: one row per candidate and Γ, with ``lower``/``upper`` (the bounds of the
        estimate), ``ci_low``/``ci_high`` (the interval around them), and the same for the
        effect over the logging policy (``effect_*``)."""
        records = [{"policy": p.name, **point} for p in self._results for point in p.curve]
        return pd.DataFrame.from_records(records)

    def tipping_points(self) -> pd.DataFrame:
        """One row per candidate: the estimate and effect at Γ = 1, the interval of the effect,
        the ``decision`` it supports and the tipping point ``gamma_star``."""
        return pd.DataFrame.from_records(
            [
                {
                    "policy": p.name,
                    "estimate": p.estimate,
                    "effect": p.effect,
                    "effect_ci_low": p.effect_ci[0],
                    "effect_ci_high": p.effect_ci[1],
                    "decision": p.decision,
                    "gamma_star": p.gamma_star,
                }
                for p in self._results
            ]
        )

    def gamma_star(self, policy: str) -> float:
        """The tipping point of one candidate (NaN without a decision, inf beyond the search)."""
        return self._policy(policy).gamma_star

    def _policy(self, policy: Any) -> _Policy:
        for p in self._results:
            if isinstance(policy, str) and p.name == policy:
                return p
        raise ParameterError(
            f"`policy` must name a candidate of this analysis, one of {list(self.policies)}; "
            f"got {policy!r}."
        )

    def note(self, policy: str) -> str:
        """One sentence on a candidate's tipping point."""
        p = self._policy(policy)
        return describe_tipping(p.decision, p.gamma_star)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: settings, per candidate its tipping point and curve."""

        def number(x: float) -> float | str | None:
            return None if math.isnan(x) else ("inf" if math.isinf(x) else float(x))

        return {
            "estimator": self.estimator,
            "model": "marginal sensitivity model (odds of the logged action within a factor gamma)",
            "gammas": list(self.gammas),
            "confidence_level": self.confidence_level,
            "n": self.n,
            "baseline_value": self.baseline_value,
            "propensity_source": self.propensity_source,
            "sampling_weight": self.sampling_weight,
            "gamma_fragile": GAMMA_FRAGILE,
            "policies": [
                {
                    "policy": p.name,
                    "estimate": p.estimate,
                    "effect": p.effect,
                    "effect_ci": list(p.effect_ci),
                    "decision": p.decision,
                    "gamma_star": number(p.gamma_star),
                    "curve": p.curve,
                }
                for p in self._results
            ],
        }

    def _parts(self) -> ResultParts:
        table = self.tipping_points()
        pct = f"{100 * self.confidence_level:g}%"
        return ResultParts(
            title=f"Sensitivity to wrong propensities ({self.estimator}, marginal sensitivity model)",
            fields=[
                ("rows", self.n),
                ("logging value", self.baseline_value),
                ("propensities", self.propensity_source),
                ("gammas", ", ".join(f"{g:g}" for g in self.gammas)),
                ("decision", f"the {pct} interval of the effect over logging at gamma = 1"),
            ],
            table=table,
            notes=[self.note(p) for p in self.policies],
            precision={},
        )


def describe_tipping(decision: str, gamma_star: float) -> str:
    """A decision and its tipping point in words (the report's and the notes' sentence)."""
    if decision == "unclear":
        return "no clear difference from logging even with the propensities taken as right"
    what = "better" if decision == "better" else "worse"
    if math.isinf(gamma_star):
        return (
            f"{what} than logging, and still so with the propensities' odds off by a factor "
            f"{GAMMA_SEARCH[-1]:g} (the end of the search)"
        )
    return (
        f"{what} than logging until the propensities' odds are off by a factor "
        f"Γ* = {gamma_star:.3g}"
        + (" (fragile: below " + f"{GAMMA_FRAGILE:g})" if gamma_star < GAMMA_FRAGILE else "")
    )


def describe_approval_tipping(gamma_star: float) -> str:
    """The safety gate's tipping point in words (the certificate's and the report's sentence)."""
    factor = (
        f"a factor Γ* = {gamma_star:.3g}"
        if math.isfinite(gamma_star)
        else f"more than a factor {GAMMA_SEARCH[-1]:g}"
    )
    fragile = f"; fragile: below {GAMMA_FRAGILE:g}" if gamma_star < GAMMA_FRAGILE else ""
    return (
        f"the approval holds until the logging propensities' odds are off by {factor} "
        f"(marginal sensitivity model){fragile}"
    )


def sensitivity_arrays(
    reward: npt.ArrayLike,
    logging_propensity: npt.ArrayLike,
    target_propensity: npt.ArrayLike,
    *,
    policy_names: Sequence[str] | None = None,
    gammas: Sequence[float] = GAMMA_GRID,
    estimator: Literal["snips", "ips"] = "snips",
    confidence_level: float = 0.95,
    sampling_weight: npt.ArrayLike | None = None,
) -> Sensitivity:
    """Marginal-sensitivity bounds of each candidate's value, their curve over Γ and the
    tipping point Γ*, from arrays (the model and formulas: :mod:`ope.diagnostics.msm`).

    Parameters
    ----------
    reward : array_like, shape (n,)
    logging_propensity : array_like, shape (n,)
        The logged (or estimated) probability of each logged action, in (0, 1].
    target_propensity : array_like, shape (n,) or (n, P)
        Each candidate's probability of the logged action.
    policy_names : sequence of str, optional
        One per column; default ``policy_0, policy_1, ...``.
    gammas : sequence of float, default GAMMA_GRID
        The Γ values of the curve (each >= 1; 1 is always added).
    estimator : {"snips", "ips"}, default "snips"
    confidence_level : float, default 0.95
    sampling_weight : array_like, shape (n,), optional
        Sampling (Horvitz-Thompson) weights: the bounds are then of the Hajek estimates.

    Returns
    -------
    Sensitivity

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> n = 4000
    >>> a = rng.integers(0, 2, n)
    >>> r = rng.binomial(1, np.where(a == 1, 0.6, 0.4)).astype(float)
    >>> s = sensitivity_arrays(r, np.full(n, 0.5), (a == 1).astype(float), policy_names=["one"])
    >>> row = s.tipping_points().iloc[0]
    >>> row["decision"], bool(1.0 < row["gamma_star"] < 2.0)
    ('better', True)
    """
    from ope.diagnostics._inputs import validated_inputs

    method = check_choice(estimator, "estimator", ("snips", "ips"))
    level = check_confidence_level(confidence_level)
    grid = _check_gammas(gammas)
    data = validated_inputs(
        reward,
        logging_propensity,
        target_propensity,
        reward_range=None,
        policy_names=policy_names,
        segments=None,
        action=None,
        action_labels=None,
        target_distributions=None,
        logging_distribution=None,
        sampling_weight=sampling_weight,
    )
    return sensitivity_of_inputs(data, grid, method, level, "logged")


def sensitivity_of_inputs(
    data: Any, gammas: tuple[float, ...], estimator: str, level: float, source: str
) -> Sensitivity:
    """The analysis of validated diagnostics inputs (:class:`ope.diagnostics._inputs.Inputs`)."""
    reward = np.asarray(data.reward, dtype=np.float64)
    rows = _rows(reward, data.propensity, data.sampling)
    order, s = rows.order, rows.sampling
    z = normal_quantile(0.5 + level / 2.0)
    # one gather of the rows in reward order for every candidate (not one strided gather each)
    target = np.asarray(data.target, dtype=np.float64)[order]
    if target.ndim == 1:
        target = target[:, None]
    if not rows.unweighted:
        target *= s[:, None]
    results = tuple(
        _analyse(rows, np.ascontiguousarray(target[:, j]), name, gammas, estimator, z)
        for j, name in enumerate(data.names)  # a loop over candidates
    )
    return Sensitivity(
        policies=tuple(data.names),
        estimator=estimator,
        gammas=gammas,
        confidence_level=level,
        n=data.n,
        baseline_value=rows.baseline,
        propensity_source=source,
        sampling_weight=data.sampling_name if data.sampling is not None else None,
        _results=results,
    )


def sensitivity(
    logs: Any,
    policies: Any = None,
    *,
    gammas: Sequence[float] = GAMMA_GRID,
    estimator: Literal["snips", "ips"] = "snips",
    confidence_level: float = 0.95,
    weight_column: str | None = None,
) -> Sensitivity:
    """Marginal-sensitivity bounds of each candidate's value on validated logs, with the curve
    over Γ and the tipping point Γ* of its decision against the logging policy.

    The analysis for logs whose propensities may be wrong: estimated ones
    (:func:`ope.propensity.estimate_propensities`; :func:`ope.diagnose` and the report then run
    it by themselves) or a logger that used inputs the logs do not hold. The model, the bounds,
    their intervals and Γ* are described in :mod:`ope.diagnostics.msm`.

    Parameters
    ----------
    logs : ope.BanditLogs, DataFrame, Arrow table or path
        As :func:`ope.diagnose` accepts.
    policies : optional
        As in :func:`ope.evaluate`; None means every ``target__<name>`` column.
    gammas : sequence of float, default GAMMA_GRID
        The Γ values of the curve (1 is always added).
    estimator : {"snips", "ips"}, default "snips"
    confidence_level : float, default 0.95
    weight_column : str, optional
        The sampling weights' column (default: ``weight`` when present), as in
        :func:`ope.diagnose`.

    Returns
    -------
    Sensitivity
    """
    from ope.diagnostics._logs import logs_inputs
    from ope.propensity import propensity_source

    method = check_choice(estimator, "estimator", ("snips", "ips"))
    level = check_confidence_level(confidence_level)
    grid = _check_gammas(gammas)
    logs, data = logs_inputs(logs, policies, weight_column=weight_column)
    return sensitivity_of_inputs(data, grid, method, level, propensity_source(logs))
