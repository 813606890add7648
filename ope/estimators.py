"""Off-policy value estimators: DM, IPS, clipped IPS, SNIPS, DR, SNDR, Switch-DR and DRos.

Every estimator is a frozen dataclass holding its settings only (``ClippedIPS(max_weight=10)``;
variants via :func:`dataclasses.replace`) and runs one shared template:

1. ``_validate``: shapes, finiteness, propensities in (0, 1], target propensities in [0, 1],
   rewards within ``reward_range`` when given, reward-model arrays present for DM/DR;
2. weights ``w = target / logging`` (float64, in chunks), transformed by the one step that differs
   (clip, switch, shrink);
3. per-row components ``A_i`` (e.g. ``w*r`` for IPS, ``(w*r, w)`` for SNIPS);
4. value ``g(mean A)``; standard error ``sd(psi)/sqrt(n)`` with the influence terms
   ``psi_i = grad g . (A_i - mean A)`` (the delta method; for linear estimators simply the
   centred contributions);
5. diagnostics (Kish ESS, mean weight far from 1, small n) as ``notes`` and warnings.

Because each value is a smooth function of column means, the same description serves the
chunked many-policy kernel (:func:`estimate_many`), the vectorized bootstrap (renormalizing
self-normalized estimators inside every resample), paired comparisons and the mergeable
statistics of :mod:`ope.streaming`.

Estimator names for strings (``ope.evaluate(..., estimators=("ips", "snips"))``):
``dm, ips, clipped_ips, snips, dr, sndr, switch_dr, dros``; see :func:`get_estimator`.
"""

from __future__ import annotations

import math
import os
import sys
import warnings
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final

import numpy as np
import numpy.typing as npt

from ope.estimate import Estimate, _make_estimate, _RowSource
from ope.exceptions import (
    EstimationError,
    MissingBoundsError,
    OverlapWarning,
    SmallSampleWarning,
    ValidationError,
)
from ope.intervals._types import BottouInterval, ConfidenceInterval
from ope.weights import (
    DEFAULT_CHUNK_SIZE,
    _CenteredMoments,
    _as_float_array,
    _centered_moments,
    _check_finite,
    _chunks,
    _first_rows,
    _ratio,
    _validated_pair,
)

__all__ = [
    "DM",
    "IPS",
    "ClippedIPS",
    "SNIPS",
    "DR",
    "SNDR",
    "SwitchDR",
    "DRos",
    "ESTIMATORS",
    "get_estimator",
    "estimate_many",
    "logging_value",
    "ESS_RATIO_WARN",
    "MEAN_WEIGHT_Z",
    "SMALL_SAMPLE_ROWS",
]

#: Kish ESS below 1% of n: the estimate rests on a handful of heavily weighted rows and its
#: normal interval is unreliable (cf. the 0.39 coverage of Wald intervals at ESS/n ~ 1% in the
#: KLM benchmark, notes/theory.md 3.5).
ESS_RATIO_WARN: Final = 0.01

#: Under correct propensities and full support E[w] = 1 exactly. A sample mean more than 4
#: standard errors from 1 happens by chance with probability < 1e-4 (normal approximation), so
#: it signals a support gap (mean < 1) or wrong propensities, not noise.
MEAN_WEIGHT_Z: Final = 4.0

#: Below 30 rows the central-limit approximation behind the normal and t intervals is
#: unreliable even for bounded rewards; bounded methods (bernstein, betting) stay valid.
SMALL_SAMPLE_ROWS: Final = 30

#: Rows needed for a standard error at all (a sample standard deviation needs n - 1 >= 1).
MIN_ROWS: Final = 2

_BOUNDED_BY_MOMENTS: Final = ("hoeffding", "bernstein", "bottou")

#: When every weight is equal (zero spread) their mean is compared with 1 directly; 1e-12 only
#: absorbs the rounding of t / p (a few ulps), so a constant weight of 1 + 1e-9 is still flagged.
_MEAN_WEIGHT_ATOL: Final = 1e-12


# ============================================================================================
# validation (the one `_validate` of every entry point)
# ============================================================================================
@dataclass(frozen=True)
class _Inputs:
    reward: np.ndarray  # (n,)
    logging_propensity: np.ndarray | None  # (n,)
    target_propensity: np.ndarray | None  # (n, P)
    q_logged: np.ndarray | None  # (n,)
    q_target: np.ndarray | None  # (n, P)
    reward_range: tuple[float, float] | None
    names: tuple[str | None, ...]

    @property
    def n(self) -> int:
        return int(self.reward.shape[0])


def _check_reward_range(
    reward_range: Sequence[float] | None, reward: np.ndarray
) -> tuple[float, float] | None:
    if reward_range is None:
        return None
    try:
        low, high = (float(x) for x in reward_range)
    except (TypeError, ValueError):
        raise ValidationError(
            f"`reward_range` must be a pair (low, high) of numbers, e.g. (0.0, 1.0); got "
            f"{reward_range!r}."
        ) from None
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ValidationError(
            f"`reward_range` must be finite with low < high; got ({low!r}, {high!r})."
        )
    bad = (reward < low) | (reward > high)
    if bad.any():
        count, first = _first_rows(bad)
        raise ValidationError(
            f"`reward` has {count} rows outside reward_range=({low:g}, {high:g}) (first at row "
            f"{first}: {float(reward[first])!r}). reward_range must be an a priori bound that "
            "every reward satisfies; widen it or fix the rewards."
        )
    return (low, high)


def _validate(
    estimator: _Estimator,
    *,
    reward: npt.ArrayLike,
    logging_propensity: npt.ArrayLike | None,
    target_propensity: npt.ArrayLike | None,
    q_logged: npt.ArrayLike | None,
    q_target: npt.ArrayLike | None,
    reward_range: Sequence[float] | None,
    names: Sequence[str] | None,
) -> _Inputs:
    r = _as_float_array(reward, "reward", ndim=(1,))
    _check_finite(r, "reward")
    n = r.shape[0]
    if n < MIN_ROWS:
        raise ValidationError(
            f"{estimator.name}: need at least {MIN_ROWS} rows for a value with a standard "
            f"error; got {n}."
        )
    p = t = None
    n_pol: int | None = None
    if estimator._uses_weights:
        missing = [
            f"{k}="
            for k, v in (
                ("logging_propensity", logging_propensity),
                ("target_propensity", target_propensity),
            )
            if v is None
        ]
        if missing:
            raise ValidationError(
                f"{estimator.name} weights rows by target/logging propensity: pass "
                f"{' and '.join(missing)}."
            )
        p, t = _validated_pair(logging_propensity, target_propensity)  # type: ignore[arg-type]
        if p.shape[0] != n:
            raise ValidationError(
                f"`logging_propensity` has {p.shape[0]} rows but `reward` has {n}; all arrays "
                "must describe the same logged rows."
            )
        if t.ndim == 1:
            t = t[:, None]
        n_pol = t.shape[1]
    ql = qt = None
    if estimator._needs:
        given = {"q_logged": q_logged, "q_target": q_target}
        missing = [f"{k}=" for k in estimator._needs if given[k] is None]
        if missing:
            raise ValidationError(
                f"{estimator.name} needs a reward model's predictions: pass "
                f"{' and '.join(missing)} (q_logged: q(x_i, a_i) of the logged action, shape "
                "(n,); q_target: q(x_i, pi) = sum_a pi(a|x_i) q(x_i, a), shape (n,) or (n, P)), "
                "or use ope.evaluate(..., reward_model=...) to fit one with cross-fitting."
            )
        if "q_logged" in estimator._needs:
            ql = _as_float_array(q_logged, "q_logged", ndim=(1,))  # type: ignore[arg-type]
            if ql.shape[0] != n:
                raise ValidationError(f"`q_logged` has {ql.shape[0]} rows but `reward` has {n}.")
            _check_finite(ql, "q_logged")
        qt = _as_float_array(q_target, "q_target", ndim=(1, 2))  # type: ignore[arg-type]
        if qt.shape[0] != n:
            raise ValidationError(f"`q_target` has {qt.shape[0]} rows but `reward` has {n}.")
        _check_finite(qt, "q_target")
        if qt.ndim == 1:
            qt = qt[:, None]
        if n_pol is not None and qt.shape[1] != n_pol:
            raise ValidationError(
                f"`q_target` has {qt.shape[1]} policy columns but `target_propensity` has "
                f"{n_pol}; give one column per candidate policy in both."
            )
        n_pol = qt.shape[1]
    if n_pol is None:  # neither weights nor a model: the logging value, a single "policy"
        n_pol = 1
    rr = _check_reward_range(reward_range, r)
    if names is None:
        labels: tuple[str | None, ...] = (None,) * n_pol
    else:
        labels = tuple(str(x) for x in names)
        if len(labels) != n_pol:
            raise ValidationError(
                f"`names` has {len(labels)} entries but there are {n_pol} policy columns."
            )
    return _Inputs(r, p, t, ql, qt, rr, labels)


# ============================================================================================
# moment-based bounded intervals (shared by the eager and the streaming paths)
# ============================================================================================
def _require_range(rr: tuple[float, float] | None, method: str) -> tuple[float, float]:
    if rr is None:
        raise MissingBoundsError(
            f"interval method {method!r} needs the a priori reward range: pass "
            "reward_range=(low, high) when estimating (e.g. (0, 1) for clicks). The observed "
            "minimum and maximum reward are not bounds."
        )
    return rr


def _require_weight_bound(max_weight: float | None, observed_max: float, method: str) -> float:
    if max_weight is None:
        raise MissingBoundsError(
            f"interval method {method!r} needs an a priori bound on the importance weights: "
            "pass ci(..., max_weight=M) with M >= pi(a|x)/pi_0(a|x) for every context and action "
            "(e.g. 1 / the smallest logging probability), or use ClippedIPS(max_weight=M), whose "
            "weights are bounded by construction. The largest observed weight is not a bound."
        )
    mw = float(max_weight)
    if not (math.isfinite(mw) and mw > 0):
        raise ValueError(f"`max_weight` must be a positive finite number; got {max_weight!r}.")
    if observed_max > mw:
        raise ValidationError(
            f"max_weight={mw:g} is not a bound on these weights: the largest observed weight is "
            f"{observed_max:g}. Pass a true a priori bound, or use ClippedIPS(max_weight=...)."
        )
    return mw


def _sample_var(n: float, s1: float, s2: float) -> float:
    """Unbiased sample variance from the sum and the sum of squares (diagnostics only)."""
    return max((s2 - s1 * s1 / n) / (n - 1.0), 0.0)


def _moment_interval(
    kind: str,
    method: str,
    mom: _CenteredMoments,
    j: int,
    *,
    reward_range: tuple[float, float] | None,
    clip_level: float | None,
    max_weight: float | None,
    outer: str | None,
    confidence_level: float,
) -> ConfidenceInterval | BottouInterval:
    """Hoeffding / Bernstein / Bottou intervals of policy ``j`` from centred moments.

    ``kind`` is ``"ips"``, ``"clipped_ips"`` or ``"logging"``. Means and variances come from
    shifted, centred statistics (:class:`ope.weights._CenteredMoments`), so the intervals are
    equivariant to shifting the rewards and ``reward_range`` together, to rounding, even for
    rewards far from zero.
    """
    low_r, high_r = _require_range(reward_range, method)
    n = int(mom.n)
    if method == "bottou":
        if kind != "clipped_ips":
            raise EstimationError("bottou applies to clipped IPS only.")
        from ope.intervals.bounded import bottou_interval

        assert clip_level is not None
        w_mean, w_var = mom.weight_mean_var(j, clipped=True)
        # z = wbar * (r - r_min): shifted so that z >= 0 (Bottou et al. assume 0 <= loss <= M)
        z_mean, z_var = mom.product_mean_var(j, clipped=True, about=low_r)
        return bottou_interval(
            n=n,
            weight_mean=w_mean,
            weight_variance=w_var,
            product_mean=z_mean,
            product_variance=z_var,
            max_weight=clip_level,
            reward_range=(low_r, high_r),
            confidence_level=confidence_level,
            outer="bernstein" if outer is None else outer,
        )
    if outer is not None:
        raise ValueError(f"`outer` applies only to method='bottou'; got {method!r}.")
    if kind == "logging":
        if max_weight is not None:
            raise ValueError("the logging value has no weights; do not pass `max_weight`.")
        mean, var = mom.reward_mean_var()
        low, high = low_r, high_r
    elif kind == "ips":
        bound = _require_weight_bound(max_weight, float(mom.max_w[j]), method)
        mean, var = mom.product_mean_var(j, clipped=False, about=0.0)
        low, high = min(0.0, bound * low_r), max(0.0, bound * high_r)
    elif kind == "clipped_ips":
        if max_weight is not None:
            raise ValueError(
                "ClippedIPS uses its own max_weight as the weight bound; do not pass "
                "`max_weight` to ci()."
            )
        assert clip_level is not None
        mean, var = mom.product_mean_var(j, clipped=True, about=0.0)
        low, high = min(0.0, clip_level * low_r), max(0.0, clip_level * high_r)
    else:  # pragma: no cover - guarded by the estimators' method lists
        raise EstimationError(f"{method} does not apply to {kind}.")
    from ope.intervals import bounded

    if method == "hoeffding":
        iv = bounded.hoeffding_interval(
            mean, n, low=low, high=high, confidence_level=confidence_level
        )
    else:
        iv = bounded.bernstein_interval(
            mean, var, n, low=low, high=high, confidence_level=confidence_level
        )
    # The terms w*r range over [0, M*r_max], but the estimand itself cannot leave a narrower
    # range: V lies in [r_min, r_max] for IPS, and E[min(w, R) r] (with E[min(w, R)] <= 1) in
    # [min(0, r_min), max(0, r_max)] for clipped IPS. Intersecting with it keeps coverage.
    # An empty intersection (probability <= 1 - confidence_level under the assumptions, since
    # the interval then misses the value) is reported, and reduced to the nearer end point
    # rather than returned inverted; coverage is unaffected, as that event is a miss anyway.
    if kind == "ips":
        lo_e, hi_e = low_r, high_r
    elif kind == "clipped_ips":
        lo_e, hi_e = min(0.0, low_r), max(0.0, high_r)
    else:
        return iv
    low, high = max(iv.low, lo_e), min(iv.high, hi_e)
    if low > high:
        side, point = ("above", hi_e) if iv.low > hi_e else ("below", lo_e)
        mean_w = mom.weight_mean_var(j, clipped=False)[0]
        warnings.warn(
            f"the {method} interval for the mean of the weighted rewards, [{iv.low:.4g}, "
            f"{iv.high:.4g}], lies entirely {side} the range [{lo_e:g}, {hi_e:g}] that the value "
            f"can take; it is reduced to the end point {point:g}. The logs are inconsistent with "
            f"importance weights of mean 1 (the mean importance weight is {mean_w:.4g}): check "
            "the logged propensities and that each candidate's probabilities sum to 1 over the "
            "actions.",
            OverlapWarning,
            stacklevel=_user_stacklevel(),
        )
        low = high = point
    return ConfidenceInterval(low, high)


# ============================================================================================
# the template
# ============================================================================================
class _EstimatorRows(_RowSource):
    """Row references of one policy's estimate (no copies)."""

    def __init__(
        self,
        estimator: _Estimator,
        reward: np.ndarray,
        logging_propensity: np.ndarray | None,
        target_propensity: np.ndarray | None,
        q_logged: np.ndarray | None,
        q_target: np.ndarray | None,
        reward_range: tuple[float, float] | None,
    ) -> None:
        self.estimator = estimator
        self.reward = reward
        self.logging_propensity = logging_propensity
        self.target_propensity = target_propensity
        self.q_logged = q_logged
        self.q_target = q_target
        self.reward_range = reward_range
        self.n = int(reward.shape[0])
        self.methods = ("bootstrap",) + estimator._methods
        self._moments: _CenteredMoments | None = None

    def centered_moments(self) -> _CenteredMoments:
        """Centred moments of the rows for the moment-based intervals, computed once (a few
        scalars, so caching them pins no arrays)."""
        if self._moments is None:
            if self.estimator._uses_weights:
                assert self.logging_propensity is not None
                assert self.target_propensity is not None
                p, t = self.logging_propensity, self.target_propensity[:, None]
            else:  # the logging value: every weight is one
                p, t = np.ones(self.n), np.ones((self.n, 1))
            self._moments = _centered_moments(
                self.reward, p, t, max_weight=getattr(self.estimator, "max_weight", None)
            )
        return self._moments

    def raw_weights(self) -> np.ndarray:
        assert self.logging_propensity is not None and self.target_propensity is not None
        return _ratio(self.logging_propensity, self.target_propensity)

    def components(self) -> np.ndarray:
        # recomputed on request rather than cached: an Estimate must not pin (n, k) arrays
        est = self.estimator
        w = est._transform(self.raw_weights()[:, None]) if est._uses_weights else None
        ql = None if self.q_logged is None else self.q_logged.astype(np.float64, copy=False)
        qt = None if self.q_target is None else self.q_target.astype(np.float64)[:, None]
        r = self.reward.astype(np.float64, copy=False)
        return est._components(r, w, ql, qt)[:, :, 0]

    def n_components(self) -> int:
        return int(self.estimator._k)

    def statistic(self, means: np.ndarray) -> np.ndarray:
        return self.estimator._statistic(means)

    def gradient(self, means: np.ndarray) -> np.ndarray:
        return self.estimator._gradient(means)

    def special_interval(
        self,
        method: str,
        *,
        confidence_level: float,
        max_weight: float | None,
        outer: str | None,
    ) -> ConfidenceInterval | BottouInterval:
        est = self.estimator
        if method in _BOUNDED_BY_MOMENTS:
            return _moment_interval(
                est._kind,
                method,
                self.centered_moments(),
                0,
                reward_range=self.reward_range,
                clip_level=getattr(est, "max_weight", None),
                max_weight=max_weight,
                outer=outer,
                confidence_level=confidence_level,
            )
        rr = _require_range(self.reward_range, method)
        if outer is not None:
            raise ValueError(f"`outer` applies only to method='bottou'; got {method!r}.")
        w = self.raw_weights() if est._uses_weights else np.ones(self.n)
        r = self.reward.astype(np.float64, copy=False)
        if method == "empirical_likelihood":
            bound = _require_weight_bound(max_weight, float(w.max()), method)
            from ope.intervals.likelihood import empirical_likelihood_interval

            return empirical_likelihood_interval(
                w, r, reward_range=rr, max_weight=bound, confidence_level=confidence_level
            )
        if max_weight is not None:
            raise ValueError(f"method {method!r} needs no weight bound; do not pass `max_weight`.")
        from ope.intervals.betting import betting_interval

        return betting_interval(w, r, reward_range=rr, confidence_level=confidence_level)


class _Estimator(ABC):
    """The shared template; subclasses supply the step that differs.

    Class attributes a subclass sets: ``name`` (registry name), ``_uses_weights``, ``_needs``
    (reward-model arrays required), ``_k`` (number of per-row components), ``_methods`` (interval
    methods besides normal/t/bootstrap), ``_zero_weights_fatal`` (all-zero weights make the value
    undefined), ``_kind`` (family for the moment-based intervals) and ``_transforms_weights``.
    """

    name: ClassVar[str] = ""
    _uses_weights: ClassVar[bool] = True
    _needs: ClassVar[tuple[str, ...]] = ()
    _k: ClassVar[int] = 1
    _methods: ClassVar[tuple[str, ...]] = ()
    _zero_weights_fatal: ClassVar[bool] = True
    _kind: ClassVar[str] = ""
    #: True when ``_transform`` changes the weights (its ESS then differs from the raw one)
    _transforms_weights: ClassVar[bool] = False

    # ---- the steps a subclass may override -------------------------------------------------
    def _transform(self, w: np.ndarray) -> np.ndarray:
        """Raw weights (c, P) -> the weights the estimator uses."""
        return w

    @abstractmethod
    def _components(
        self,
        r: np.ndarray,
        w: np.ndarray | None,
        q_logged: np.ndarray | None,
        q_target: np.ndarray | None,
    ) -> np.ndarray:
        """Per-row components of shape (c, k, P); r is (c,), w and q_target (c, P)."""

    def _statistic(self, m: np.ndarray) -> np.ndarray:
        """Value from the column means (..., k) -> (...); default: the single mean."""
        return m[..., 0]

    def _gradient(self, m: np.ndarray) -> np.ndarray:
        """Gradient of :meth:`_statistic` at m (k,)."""
        return np.ones(1)

    # ---- the template ----------------------------------------------------------------------
    def _chunk_components(
        self, data: _Inputs, sl: slice, wsum: np.ndarray | None
    ) -> np.ndarray:
        """Components (c, k, P) of one chunk; accumulates the weight sums when asked."""
        r = data.reward[sl].astype(np.float64, copy=False)
        w = None
        if self._uses_weights:
            assert data.logging_propensity is not None and data.target_propensity is not None
            raw = _ratio(data.logging_propensity[sl], data.target_propensity[sl])
            w = self._transform(raw)
            if wsum is not None:
                wsum[0] += np.einsum("ip->p", raw)
                wsum[1] += np.einsum("ip,ip->p", raw, raw)
                wsum[2] += np.einsum("ip->p", w)
                wsum[3] += np.einsum("ip,ip->p", w, w)
        ql = None if data.q_logged is None else data.q_logged[sl].astype(np.float64, copy=False)
        qt = None if data.q_target is None else data.q_target[sl].astype(np.float64, copy=False)
        return self._components(r, w, ql, qt)

    def _run(self, data: _Inputs, *, chunk_size: int = DEFAULT_CHUNK_SIZE) -> list[Estimate]:
        n = data.n
        n_pol = len(data.names)
        # pass 1: column means of the components and the weight sums, per policy
        s1 = np.zeros((self._k, n_pol))
        wsum = np.zeros((4, n_pol))  # raw sum, raw sum of squares, used sum, used sum of squares
        for sl in _chunks(n, chunk_size):
            s1 += np.einsum("ckp->kp", self._chunk_components(data, sl, wsum))
        means = s1 / n
        notes = [self._diagnose(n, wsum[:, j], label) for j, label in enumerate(data.names)]
        grad = np.stack([self._gradient(means[:, j]) for j in range(n_pol)], axis=1)  # (k, P)
        # pass 2: sum of squared influence terms psi = grad . (A - mean), exact two-pass variance
        ss = np.zeros(n_pol)
        for sl in _chunks(n, chunk_size):
            a = self._chunk_components(data, sl, None)
            psi = np.einsum("ckp,kp->cp", a - means[None], grad)
            ss += np.einsum("cp,cp->p", psi, psi)
        out = []
        for j, label in enumerate(data.names):  # loop over policies, not rows
            value = float(self._statistic(means[:, j]))
            se = math.sqrt(ss[j] / (n - 1) / n)
            ess = float(n)
            if self._uses_weights:
                ess = float(wsum[2, j] ** 2 / wsum[3, j]) if wsum[3, j] > 0 else 0.0
            source = _EstimatorRows(
                self,
                data.reward,
                data.logging_propensity,
                None if data.target_propensity is None else data.target_propensity[:, j],
                data.q_logged,
                None if data.q_target is None else data.q_target[:, j],
                data.reward_range,
            )
            out.append(
                _make_estimate(
                    estimator=self.name,
                    value=value,
                    std_error=se,
                    n=n,
                    ess=ess,
                    notes=tuple(notes[j]),
                    policy=label,
                    source=source,
                )
            )
        return out

    def _diagnose(self, n: int, wsum: np.ndarray, label: str | None) -> list[str]:
        """Notes (and warnings) about one policy's weights; raises when the value is undefined."""
        return _diagnose(self, n, wsum, label)

    def _estimate_one(self, **arrays: Any) -> Estimate:
        data = _validate(self, names=None, **arrays)
        if data.target_propensity is not None and data.target_propensity.shape[1] != 1:
            raise ValidationError(
                f"{self.name}.estimate takes one candidate policy (target_propensity of shape "
                f"(n,)); got {data.target_propensity.shape[1]} columns. Use "
                "ope.estimators.estimate_many for several policies at once."
            )
        if data.q_target is not None and data.q_target.shape[1] != 1:
            raise ValidationError(
                f"{self.name}.estimate takes one candidate policy (q_target of shape (n,)); got "
                f"{data.q_target.shape[1]} columns. Use ope.estimators.estimate_many."
            )
        return self._run(data)[0]


_PACKAGE_DIR: Final = os.path.dirname(os.path.abspath(__file__))


def _user_stacklevel() -> int:
    """``stacklevel`` that points a warning at the first caller outside the ope package."""
    frame = sys._getframe(2)  # the caller of the function that calls warnings.warn
    level = 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


def _diagnose(est: _Estimator, n: int, wsum: np.ndarray, label: str | None) -> list[str]:
    # Warnings about a policy's raw weights (mean weight; ESS when the estimator uses the raw
    # weights) and about n do not depend on the estimator, so their text does not name it:
    # callers that run several estimators (ope.evaluate) emit each distinct message once.
    by_estimator = f"{est.name}" + (f" (policy {label!r})" if label else "") + ": "
    by_policy = f"policy {label!r}: " if label else ""
    notes: list[str] = []

    def note(text: str, category: type[Warning], prefix: str) -> None:
        notes.append(text)
        warnings.warn(f"{prefix}{text}", category, stacklevel=_user_stacklevel())

    if est._uses_weights:
        sum_raw, sum_raw2, sum_used, sum_used2 = (float(x) for x in wsum)
        # the weights used differ from the raw ones (some were clipped, switched or shrunk)
        changed = est._transforms_weights and (sum_used, sum_used2) != (sum_raw, sum_raw2)
        if sum_used2 == 0.0:
            if sum_raw2 == 0.0:
                text = (
                    f"all {n} importance weights are zero: the candidate never chooses a logged "
                    "action, so the logs carry no information about it by weighting."
                )
            else:  # e.g. SwitchDR with every weight above tau
                text = (
                    f"every importance weight is switched off or shrunk to 0 by {est!r} (every "
                    "weight exceeds the switching threshold; raise tau to use rows by "
                    "weighting)."
                )
            if est._zero_weights_fatal:
                raise EstimationError(
                    f"{by_estimator}{text} Use DM or DR with a reward model, or collect logs "
                    "with more exploration."
                )
            note(text + " The estimate reduces to the reward model (DM).", OverlapWarning,
                 by_estimator)
        else:
            ess = sum_used**2 / sum_used2
            if ess < ESS_RATIO_WARN * n:
                note(
                    f"effective sample size {ess:.1f} is {ess / n:.2%} of n={n}: the estimate "
                    "rests on a few heavily weighted rows and normal intervals may undercover. "
                    "Consider clipping, a doubly robust estimator, or a bounded interval method.",
                    OverlapWarning,
                    by_estimator if changed else by_policy,
                )
        mean_w = sum_raw / n
        sd_w = math.sqrt(_sample_var(float(n), sum_raw, sum_raw2))
        z = abs(mean_w - 1.0) / (sd_w / math.sqrt(n)) if sd_w > 0 else (
            math.inf if abs(mean_w - 1.0) > _MEAN_WEIGHT_ATOL else 0.0
        )
        if z > MEAN_WEIGHT_Z:
            how_far = (
                f"{z:.3g} standard errors from its expected value 1"
                if math.isfinite(z)
                else "while every weight is equal, so it cannot average to its expected value 1"
            )
            why = (
                "the candidate puts mass where the logger never acts (support gap) or the "
                "logged propensities are wrong"
                if mean_w < 1.0
                else "the logged propensities are too small, or the candidate's probabilities "
                "do not sum to 1 over the actions"
            )
            note(
                f"mean importance weight is {mean_w:.4g}, {how_far}: {why}, and weighting "
                "estimates are biased. Check overlap with ope.diagnostics.",
                OverlapWarning,
                by_policy,
            )
    if n < SMALL_SAMPLE_ROWS:
        note(
            f"only n={n} rows (< {SMALL_SAMPLE_ROWS}): normal and t intervals rely on the "
            "central limit theorem and may undercover; prefer bernstein or betting intervals "
            "with an a priori reward_range.",
            SmallSampleWarning,
            "",
        )
    return notes


# ============================================================================================
# shared docstring pieces
# ============================================================================================
_DOC_IPS_ARGS: Final = """reward : array_like, shape (n,)
            Observed rewards.
        logging_propensity : array_like, shape (n,)
            Logging policy's probability of each logged action, in (0, 1].
        target_propensity : array_like, shape (n,)
            Candidate's probability of the logged action, in [0, 1].
        reward_range : (float, float), optional
            A priori range of every reward (e.g. (0, 1) for clicks), needed by the bounded
            interval methods; rewards outside it are an error."""

_DOC_DR_ARGS: Final = (
    _DOC_IPS_ARGS
    + """
        q_logged : array_like, shape (n,)
            Reward model's prediction for the logged action, q(x_i, a_i).
        q_target : array_like, shape (n,)
            Reward model's value of the candidate, q(x_i, pi) = sum_a pi(a|x_i) q(x_i, a)."""
)

_DOC_RETURNS: Final = """
        Returns
        -------
        Estimate
            Value, standard error, n, Kish ESS, notes; ``ci(...)`` for intervals.

        Raises
        ------
        ope.ValidationError
            Shapes differ; a value is NaN/inf; a propensity or reward is out of range; a
            required reward-model array is missing.
        ope.EstimationError
            The value is undefined (e.g. all importance weights are zero).
"""


def _estimate_doc(args: str) -> str:
    return f"""Estimate the candidate's value from logged rows.

        Parameters
        ----------
        {args}
        {_DOC_RETURNS}"""


# ============================================================================================
# the estimators
# ============================================================================================
@dataclass(frozen=True)
class IPS(_Estimator):
    """Inverse propensity scoring (importance sampling), unbiased under overlap.

    Notes
    -----
    .. math:: \\hat V_{IPS}=\\frac1n\\sum_i w_i r_i,\\qquad w_i=\\pi(a_i|x_i)/\\pi_0(a_i|x_i),

    with :math:`\\widehat{\\mathrm{se}}=\\mathrm{sd}(w_ir_i)/\\sqrt n`. It is unbiased when
    :math:`\\pi_0>0` wherever :math:`\\pi>0`; its variance grows with :math:`\\mathbb E w^2`.
    It is equivariant to scaling the rewards, not to shifting them (a shift :math:`c` adds
    :math:`c\\,\\bar w`). Bounded intervals (hoeffding, bernstein, empirical_likelihood) need an
    a priori weight bound: ``res.ci(method="bernstein", max_weight=M)``.

    References
    ----------
    .. [1] D. G. Horvitz and D. J. Thompson, "A generalization of sampling without replacement
       from a finite universe", JASA 47(260), 1952.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.estimators import IPS
    >>> res = IPS().estimate(reward=np.array([1.0, 0.0, 1.0, 1.0]),
    ...                      logging_propensity=np.array([0.5, 0.5, 0.25, 0.5]),
    ...                      target_propensity=np.array([1.0, 1.0, 0.25, 0.0]))
    >>> res.value   # (2*1 + 2*0 + 1*1 + 0*1) / 4
    0.75
    """

    name: ClassVar[str] = "ips"
    _methods: ClassVar[tuple[str, ...]] = (
        "hoeffding",
        "bernstein",
        "empirical_likelihood",
        "betting",
    )
    _kind: ClassVar[str] = "ips"

    def _components(self, r, w, q_logged, q_target):  # type: ignore[no-untyped-def]
        return (w * r[:, None])[:, None, :]

    def estimate(
        self,
        reward: npt.ArrayLike,
        logging_propensity: npt.ArrayLike,
        target_propensity: npt.ArrayLike,
        *,
        reward_range: Sequence[float] | None = None,
    ) -> Estimate:
        return self._estimate_one(
            reward=reward,
            logging_propensity=logging_propensity,
            target_propensity=target_propensity,
            q_logged=None,
            q_target=None,
            reward_range=reward_range,
        )

    estimate.__doc__ = _estimate_doc(_DOC_IPS_ARGS)


@dataclass(frozen=True)
class ClippedIPS(_Estimator):
    """IPS with weights capped at an a priori level ``max_weight`` (Bottou et al.'s clipping).

    Parameters
    ----------
    max_weight : float
        Clip level :math:`R > 0`; weights above it are replaced by :math:`R` (capped, not
        zeroed).

    Notes
    -----
    .. math:: \\hat V_R=\\frac1n\\sum_i \\min(w_i,R)\\,r_i .

    Capping rather than zeroing (Bottou et al. may zero weights above :math:`R`) keeps the
    reward information of the clipped rows and so has the smaller bias of the two; for rewards
    :math:`\\ge 0` both under-estimate by :math:`\\mathbb E[(w-\\min(w,R))r]\\ge 0`, which is
    what Bottou's inner interval (``ci(method="bottou")``) bounds. Because the weight bound is
    :math:`R` by construction, ``hoeffding`` and ``bernstein`` need only ``reward_range``; note
    they cover the clipped estimand :math:`\\mathbb E[\\min(w,R)r]`, while ``bottou`` covers the
    policy value. The standard error is :math:`\\mathrm{sd}(\\min(w_i,R)r_i)/\\sqrt n`.

    References
    ----------
    .. [1] L. Bottou et al., "Counterfactual reasoning and learning systems: the example of
       computational advertising", JMLR 14:3207-3260, 2013.
    .. [2] E. L. Ionides, "Truncated importance sampling", J. Comput. Graph. Statist. 17(2),
       2008.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.estimators import ClippedIPS
    >>> res = ClippedIPS(max_weight=2.0).estimate(
    ...     reward=np.array([1.0, 1.0, 0.0]), logging_propensity=np.array([0.25, 0.5, 0.1]),
    ...     target_propensity=np.array([1.0, 0.5, 1.0]))
    >>> res.value   # (min(4, 2)*1 + 1*1 + min(10, 2)*0) / 3
    1.0
    """

    max_weight: float

    name: ClassVar[str] = "clipped_ips"
    _transforms_weights: ClassVar[bool] = True
    _methods: ClassVar[tuple[str, ...]] = ("hoeffding", "bernstein", "bottou")
    _kind: ClassVar[str] = "clipped_ips"

    def __post_init__(self) -> None:
        _positive(self.max_weight, "max_weight", "ClippedIPS")

    def _transform(self, w: np.ndarray) -> np.ndarray:
        return np.minimum(w, self.max_weight)

    def _components(self, r, w, q_logged, q_target):  # type: ignore[no-untyped-def]
        return (w * r[:, None])[:, None, :]

    def estimate(
        self,
        reward: npt.ArrayLike,
        logging_propensity: npt.ArrayLike,
        target_propensity: npt.ArrayLike,
        *,
        reward_range: Sequence[float] | None = None,
    ) -> Estimate:
        return self._estimate_one(
            reward=reward,
            logging_propensity=logging_propensity,
            target_propensity=target_propensity,
            q_logged=None,
            q_target=None,
            reward_range=reward_range,
        )

    estimate.__doc__ = _estimate_doc(_DOC_IPS_ARGS)


@dataclass(frozen=True)
class SNIPS(_Estimator):
    """Self-normalized IPS (the Hajek estimator).

    Notes
    -----
    .. math:: \\hat V_{SN}=\\frac{\\sum_i w_i r_i}{\\sum_i w_i}.

    It lies in :math:`[\\min r,\\max r]`, is invariant to shifting and equivariant to scaling
    the rewards, and is biased at :math:`O(1/n)`. The standard error is the delta-method one:
    the influence term of row :math:`i` is
    :math:`\\psi_i = w_i(r_i-\\hat V_{SN})/\\bar w` with :math:`\\bar w=\\frac1n\\sum w_i`, so

    .. math:: \\widehat{\\mathrm{se}} = \\frac{\\mathrm{sd}(\\psi)}{\\sqrt n}
              = \\sqrt{\\frac{n}{n-1}}\\;\\frac{\\sqrt{\\sum_i w_i^2 (r_i-\\hat V_{SN})^2}}
                                             {\\sum_i w_i}.

    The bootstrap renormalizes inside each resample (numerator and denominator resampled
    together).

    References
    ----------
    .. [1] J. Hajek, "Comment on 'An essay on the logical foundations of survey sampling' by
       D. Basu", in *Foundations of Statistical Inference*, 1971.
    .. [2] A. Swaminathan and T. Joachims, "The self-normalized estimator for counterfactual
       learning", NeurIPS 2015.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.estimators import SNIPS
    >>> res = SNIPS().estimate(reward=np.array([1.0, 0.0, 1.0, 1.0]),
    ...                        logging_propensity=np.array([0.5, 0.5, 0.25, 0.5]),
    ...                        target_propensity=np.array([1.0, 1.0, 0.25, 0.0]))
    >>> res.value   # (2 + 0 + 1 + 0) / (2 + 2 + 1 + 0)
    0.6
    """

    name: ClassVar[str] = "snips"
    _k: ClassVar[int] = 2
    _methods: ClassVar[tuple[str, ...]] = ("empirical_likelihood", "betting")
    _kind: ClassVar[str] = "snips"

    def _components(self, r, w, q_logged, q_target):  # type: ignore[no-untyped-def]
        return np.stack([w * r[:, None], w], axis=1)

    def _statistic(self, m: np.ndarray) -> np.ndarray:
        return m[..., 0] / m[..., 1]

    def _gradient(self, m: np.ndarray) -> np.ndarray:
        return np.array([1.0 / m[1], -m[0] / m[1] ** 2])

    def estimate(
        self,
        reward: npt.ArrayLike,
        logging_propensity: npt.ArrayLike,
        target_propensity: npt.ArrayLike,
        *,
        reward_range: Sequence[float] | None = None,
    ) -> Estimate:
        return self._estimate_one(
            reward=reward,
            logging_propensity=logging_propensity,
            target_propensity=target_propensity,
            q_logged=None,
            q_target=None,
            reward_range=reward_range,
        )

    estimate.__doc__ = _estimate_doc(_DOC_IPS_ARGS)


@dataclass(frozen=True)
class DM(_Estimator):
    """Direct method: the mean of a reward model's value of the candidate.

    Notes
    -----
    .. math:: \\hat V_{DM}=\\frac1n\\sum_i \\hat q(x_i,\\pi),\\qquad
              \\hat q(x,\\pi)=\\sum_a\\pi(a|x)\\,\\hat q(x,a).

    Its standard error :math:`\\mathrm{sd}(\\hat q(x_i,\\pi))/\\sqrt n` treats the model as fixed:
    it does not include the model's own error or bias, which DM cannot see. ``ess`` is ``n``
    (every row counts equally). ``reward`` is used to define (and validate) the rows, so a DM
    estimate can be compared with others on the same rows.

    References
    ----------
    .. [1] A. Beygelzimer and J. Langford, "The offset tree for learning with partial labels",
       KDD 2009 (the direct method as a baseline).

    Examples
    --------
    >>> import numpy as np
    >>> from ope.estimators import DM
    >>> DM().estimate(reward=np.array([1.0, 0.0, 1.0]), q_target=np.array([0.5, 0.2, 0.8])).value
    0.5
    """

    name: ClassVar[str] = "dm"
    _uses_weights: ClassVar[bool] = False
    _needs: ClassVar[tuple[str, ...]] = ("q_target",)
    _zero_weights_fatal: ClassVar[bool] = False

    def _components(self, r, w, q_logged, q_target):  # type: ignore[no-untyped-def]
        return q_target[:, None, :]

    def estimate(
        self,
        reward: npt.ArrayLike,
        *,
        q_target: npt.ArrayLike | None = None,
        reward_range: Sequence[float] | None = None,
    ) -> Estimate:
        """Estimate the candidate's value from a reward model.

        Parameters
        ----------
        reward : array_like, shape (n,)
            Observed rewards (they define the rows; DM does not average them).
        q_target : array_like, shape (n,)
            Reward model's value of the candidate, q(x_i, pi) = sum_a pi(a|x_i) q(x_i, a).
        reward_range : (float, float), optional
            A priori reward range (validated against ``reward``).

        Returns
        -------
        Estimate
        """
        return self._estimate_one(
            reward=reward,
            logging_propensity=None,
            target_propensity=None,
            q_logged=None,
            q_target=q_target,
            reward_range=reward_range,
        )


class _DRFamily(_Estimator):
    """DR-type estimators: q(x, pi) + w' (r - q(x, a)) with a transformed weight w'."""

    _needs: ClassVar[tuple[str, ...]] = ("q_logged", "q_target")
    _zero_weights_fatal: ClassVar[bool] = False

    def _components(self, r, w, q_logged, q_target):  # type: ignore[no-untyped-def]
        return (q_target + w * (r - q_logged)[:, None])[:, None, :]

    def estimate(
        self,
        reward: npt.ArrayLike,
        logging_propensity: npt.ArrayLike,
        target_propensity: npt.ArrayLike,
        *,
        q_logged: npt.ArrayLike | None = None,
        q_target: npt.ArrayLike | None = None,
        reward_range: Sequence[float] | None = None,
    ) -> Estimate:
        return self._estimate_one(
            reward=reward,
            logging_propensity=logging_propensity,
            target_propensity=target_propensity,
            q_logged=q_logged,
            q_target=q_target,
            reward_range=reward_range,
        )

    estimate.__doc__ = _estimate_doc(_DOC_DR_ARGS)


@dataclass(frozen=True)
class DR(_DRFamily):
    """Doubly robust estimator: reward model plus importance-weighted residual.

    Notes
    -----
    .. math:: \\hat V_{DR}=\\frac1n\\sum_i\\Big[\\hat q(x_i,\\pi)
              + w_i\\big(r_i-\\hat q(x_i,a_i)\\big)\\Big],

    unbiased when the propensities are correct (whatever the model), with
    :math:`\\widehat{\\mathrm{se}}=\\mathrm{sd}(\\text{bracket})/\\sqrt n`. Fit the model on other
    rows (cross-fitting) so the residuals are honest. Equivariant to affine maps of the reward
    when the model predictions are mapped the same way.

    References
    ----------
    .. [1] M. Dudik, J. Langford and L. Li, "Doubly robust policy evaluation and learning",
       ICML 2011.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.estimators import DR
    >>> res = DR().estimate(reward=np.array([1.0, 0.0]), logging_propensity=np.array([0.5, 0.5]),
    ...                     target_propensity=np.array([1.0, 0.0]),
    ...                     q_logged=np.array([0.5, 0.5]), q_target=np.array([0.6, 0.4]))
    >>> round(res.value, 12)   # ((0.6 + 2*(1-0.5)) + (0.4 + 0)) / 2
    1.0
    """

    name: ClassVar[str] = "dr"


@dataclass(frozen=True)
class SwitchDR(_DRFamily):
    """Switch doubly robust: DR where the weight is small, the reward model where it is large.

    Parameters
    ----------
    tau : float
        Switching threshold :math:`\\tau > 0` on the importance weight. There is no default: the
        paper picks :math:`\\tau` by minimizing an estimated MSE bound, which needs the
        candidate's full action distribution; choose it with that procedure or by validation.

    Notes
    -----
    .. math:: \\hat V_{SW}=\\frac1n\\sum_i\\Big[\\hat q(x_i,\\pi)
              + w_i\\,\\mathbb 1\\{w_i\\le\\tau\\}\\big(r_i-\\hat q(x_i,a_i)\\big)\\Big],

    which equals applying DR to the actions with :math:`\\pi/\\pi_0\\le\\tau` and DM to the others.
    ``ess`` is computed from the switched weights :math:`w_i\\mathbb 1\\{w_i\\le\\tau\\}`.

    References
    ----------
    .. [1] Y.-X. Wang, A. Agarwal and M. Dudik, "Optimal and adaptive off-policy evaluation in
       contextual bandits", ICML 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.estimators import SwitchDR
    >>> res = SwitchDR(tau=3.0).estimate(
    ...     reward=np.array([1.0, 1.0]), logging_propensity=np.array([0.5, 0.1]),
    ...     target_propensity=np.array([1.0, 1.0]), q_logged=np.array([0.5, 0.5]),
    ...     q_target=np.array([0.5, 0.5]))
    >>> round(res.value, 12)   # ((0.5 + 2*0.5) + (0.5 + 0)) / 2: w=10 > tau is switched off
    1.0
    """

    tau: float

    name: ClassVar[str] = "switch_dr"
    _transforms_weights: ClassVar[bool] = True

    def __post_init__(self) -> None:
        _positive(self.tau, "tau", "SwitchDR")

    def _transform(self, w: np.ndarray) -> np.ndarray:
        return np.where(w <= self.tau, w, 0.0)


@dataclass(frozen=True)
class DRos(_DRFamily):
    """Doubly robust with optimistic shrinkage of the weights.

    Parameters
    ----------
    shrinkage : float
        :math:`\\lambda > 0`; small values shrink towards DM, large ones recover DR. There is no
        default: the paper tunes :math:`\\lambda` by minimizing an MSE bound.

    Notes
    -----
    .. math:: \\hat w_i=\\frac{\\lambda w_i}{w_i^2+\\lambda},\\qquad
              \\hat V_{DRos}=\\frac1n\\sum_i\\Big[\\hat q(x_i,\\pi)+\\hat w_i\\big(r_i-
              \\hat q(x_i,a_i)\\big)\\Big].

    :math:`\\hat w\\le\\min(w,\\sqrt\\lambda/2)`; :math:`\\lambda\\to0` gives DM and
    :math:`\\lambda\\to\\infty` gives DR. ``ess`` uses the shrunk weights.

    References
    ----------
    .. [1] Y. Su, M. Dimakopoulou, A. Krishnamurthy and M. Dudik, "Doubly robust off-policy
       evaluation with shrinkage", ICML 2020.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.estimators import DRos
    >>> res = DRos(shrinkage=4.0).estimate(
    ...     reward=np.array([1.0, 0.0]), logging_propensity=np.array([0.5, 0.5]),
    ...     target_propensity=np.array([1.0, 0.0]), q_logged=np.array([0.0, 0.0]),
    ...     q_target=np.array([0.0, 0.0]))
    >>> round(res.value, 12)   # w=2 -> 4*2/(4+4) = 1; (1*1 + 0) / 2
    0.5
    """

    shrinkage: float

    name: ClassVar[str] = "dros"
    _transforms_weights: ClassVar[bool] = True

    def __post_init__(self) -> None:
        _positive(self.shrinkage, "shrinkage", "DRos")

    def _transform(self, w: np.ndarray) -> np.ndarray:
        return self.shrinkage * w / (w * w + self.shrinkage)


@dataclass(frozen=True)
class SNDR(_DRFamily):
    """Self-normalized doubly robust estimator.

    Notes
    -----
    .. math:: \\hat V_{SNDR}=\\frac1n\\sum_i\\hat q(x_i,\\pi)
              +\\frac{\\sum_i w_i\\big(r_i-\\hat q(x_i,a_i)\\big)}{\\sum_i w_i}.

    Delta-method influence term with :math:`\\bar w=\\frac1n\\sum w_i`,
    :math:`\\hat\\theta=\\sum w_i(r_i-\\hat q_i)/\\sum w_i`:
    :math:`\\psi_i=(\\hat q(x_i,\\pi)-\\overline{\\hat q(\\cdot,\\pi)})
    +w_i(r_i-\\hat q(x_i,a_i)-\\hat\\theta)/\\bar w`, and
    :math:`\\widehat{\\mathrm{se}}=\\mathrm{sd}(\\psi)/\\sqrt n`. The bootstrap renormalizes
    inside each resample.

    References
    ----------
    .. [1] N. Kallus and M. Uehara, "Intrinsically efficient, stable, and bounded off-policy
       evaluation for reinforcement learning", NeurIPS 2019.
    .. [2] M. Dudik, J. Langford and L. Li, "Doubly robust policy evaluation and learning",
       ICML 2011.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.estimators import SNDR
    >>> res = SNDR().estimate(reward=np.array([1.0, 0.0]), logging_propensity=np.array([0.5, 0.5]),
    ...                       target_propensity=np.array([1.0, 0.0]),
    ...                       q_logged=np.array([0.5, 0.5]), q_target=np.array([0.6, 0.4]))
    >>> round(res.value, 12)   # 0.5 + (2*0.5 + 0) / (2 + 0)
    1.0
    """

    name: ClassVar[str] = "sndr"
    _k: ClassVar[int] = 3
    _zero_weights_fatal: ClassVar[bool] = True

    def _components(self, r, w, q_logged, q_target):  # type: ignore[no-untyped-def]
        return np.stack([q_target, w * (r - q_logged)[:, None], w], axis=1)

    def _statistic(self, m: np.ndarray) -> np.ndarray:
        return m[..., 0] + m[..., 1] / m[..., 2]

    def _gradient(self, m: np.ndarray) -> np.ndarray:
        return np.array([1.0, 1.0 / m[2], -m[1] / m[2] ** 2])


@dataclass(frozen=True)
class _LoggingValue(_Estimator):
    """The logging policy's on-policy value: the mean observed reward."""

    name: ClassVar[str] = "logging"
    _uses_weights: ClassVar[bool] = False
    _methods: ClassVar[tuple[str, ...]] = ("hoeffding", "bernstein", "betting")
    _kind: ClassVar[str] = "logging"

    def _components(self, r, w, q_logged, q_target):  # type: ignore[no-untyped-def]
        return r[:, None, None]


def _positive(value: Any, name: str, owner: str) -> None:
    try:
        ok = math.isfinite(float(value)) and float(value) > 0
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"{owner}: `{name}` must be a positive finite number; got {value!r}.")


def logging_value(
    reward: npt.ArrayLike, *, reward_range: Sequence[float] | None = None
) -> Estimate:
    """The logging policy's value: the mean logged reward, as an Estimate.

    Parameters
    ----------
    reward : array_like, shape (n,)
        Logged rewards.
    reward_range : (float, float), optional
        A priori reward range (for hoeffding, bernstein and betting intervals).

    Returns
    -------
    Estimate
        ``estimator="logging"``; pass it to :func:`ope.estimate.compare` with a candidate's
        estimate on the same rows for a paired comparison.

    Notes
    -----
    :math:`\\hat V_0=\\bar r`, :math:`\\widehat{\\mathrm{se}}=\\mathrm{sd}(r)/\\sqrt n`.

    References
    ----------
    .. [1] L. Bottou et al., "Counterfactual reasoning and learning systems", JMLR 14, 2013.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.estimators import logging_value
    >>> logging_value(np.array([1.0, 0.0, 1.0, 0.0])).value
    0.5
    """
    est = _LoggingValue()
    data = _validate(
        est,
        reward=reward,
        logging_propensity=None,
        target_propensity=None,
        q_logged=None,
        q_target=None,
        reward_range=reward_range,
        names=None,
    )
    return est._run(data)[0]


# ============================================================================================
# registry and the many-policy entry point
# ============================================================================================
ESTIMATORS: Final[dict[str, type[_Estimator]]] = {
    "dm": DM,
    "ips": IPS,
    "clipped_ips": ClippedIPS,
    "snips": SNIPS,
    "dr": DR,
    "sndr": SNDR,
    "switch_dr": SwitchDR,
    "dros": DRos,
}

_SETTINGS: Final[dict[str, tuple[str, ...]]] = {
    "clipped_ips": ("max_weight",),
    "switch_dr": ("tau",),
    "dros": ("shrinkage",),
}


def get_estimator(
    name: str,
    *,
    max_weight: float | None = None,
    tau: float | None = None,
    shrinkage: float | None = None,
) -> _Estimator:
    """The estimator object for a registry name.

    Parameters
    ----------
    name : str
        One of ``dm, ips, clipped_ips, snips, dr, sndr, switch_dr, dros``.
    max_weight : float, optional
        Clip level, required by ``clipped_ips`` and accepted by no other.
    tau : float, optional
        Switching threshold, required by ``switch_dr`` and accepted by no other.
    shrinkage : float, optional
        Shrinkage :math:`\\lambda`, required by ``dros`` and accepted by no other.

    Returns
    -------
    estimator object

    Raises
    ------
    ValueError
        Unknown name, a missing required setting, or a setting the estimator does not take.

    Notes
    -----
    A setting an estimator would ignore is an error rather than silently dropped (so a
    misspelled or misplaced ``max_weight`` is never lost).

    References
    ----------
    .. [1] Y. Saito et al., "Open Bandit Dataset and Pipeline", NeurIPS Datasets and Benchmarks,
       2021 (estimator names follow common usage there).

    Examples
    --------
    >>> from ope.estimators import get_estimator
    >>> get_estimator("clipped_ips", max_weight=10.0)
    ClippedIPS(max_weight=10.0)
    >>> get_estimator("snips")
    SNIPS()
    """
    key = str(name).lower()
    if key not in ESTIMATORS:
        raise ValueError(
            f"unknown estimator {name!r}; choose one of {', '.join(ESTIMATORS)}."
        )
    given = {
        k: v
        for k, v in (("max_weight", max_weight), ("tau", tau), ("shrinkage", shrinkage))
        if v is not None
    }
    takes = _SETTINGS.get(key, ())
    extra = sorted(set(given) - set(takes))
    if extra:
        allowed = ", ".join(takes) if takes else "none"
        raise ValueError(
            f"estimator {key!r} does not take {', '.join(extra)}; its settings: {allowed}."
        )
    missing = [k for k in takes if k not in given]
    if missing:
        raise ValueError(
            f"estimator {key!r} needs {', '.join(missing)}=..., e.g. "
            f"get_estimator({key!r}, {missing[0]}=10.0)."
        )
    return ESTIMATORS[key](**given)


def estimate_many(
    estimator: _Estimator | str,
    *,
    reward: npt.ArrayLike,
    logging_propensity: npt.ArrayLike | None = None,
    target_propensity: npt.ArrayLike | None = None,
    q_logged: npt.ArrayLike | None = None,
    q_target: npt.ArrayLike | None = None,
    reward_range: Sequence[float] | None = None,
    names: Sequence[str] | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> list[Estimate]:
    """Estimate P candidate policies in one chunked pass over the rows.

    Parameters
    ----------
    estimator : estimator object or str
        E.g. ``IPS()`` or ``"snips"`` (names with settings need objects or
        :func:`get_estimator`).
    reward : array_like, shape (n,)
        Observed rewards.
    logging_propensity : array_like, shape (n,)
        Logging propensities (weighting estimators).
    target_propensity : array_like, shape (n, P)
        Each candidate's probability of the logged action (weighting estimators).
    q_logged : array_like, shape (n,), optional
        Reward model at the logged action (DR family).
    q_target : array_like, shape (n, P), optional
        Reward model's value of each candidate (DM and DR family).
    reward_range : (float, float), optional
        A priori reward range.
    names : sequence of str, optional
        Policy names, stored as ``Estimate.policy``.
    chunk_size : int, default DEFAULT_CHUNK_SIZE
        Rows per chunk (memory is O(chunk_size * P)).

    Returns
    -------
    list of Estimate
        One per policy, in column order. Arrays the estimator does not use are ignored.

    Notes
    -----
    Per chunk the weights form one (chunk, P) block and the per-policy sums are reduced
    column-wise, so no Python code runs per row or per policy-row. Two chunked passes: the first
    gives the column means of the components (hence the values), the second the sum of squared
    influence terms :math:`\\psi_i=\\nabla g\\cdot(A_i-\\bar A)`; this two-pass variance stays
    exact (e.g. exactly 0) where a one-pass sum-of-squares formula would cancel catastrophically.

    References
    ----------
    .. [1] T. F. Chan, G. H. Golub and R. J. LeVeque, "Algorithms for computing the sample
       variance: analysis and recommendations", The American Statistician 37(3), 1983.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.estimators import estimate_many
    >>> res = estimate_many("ips", reward=np.array([1.0, 0.0, 1.0]),
    ...                     logging_propensity=np.array([0.5, 0.5, 0.5]),
    ...                     target_propensity=np.array([[1.0, 0.5], [0.0, 0.5], [0.5, 0.5]]),
    ...                     names=["greedy", "logger"])
    >>> [(e.policy, e.value) for e in res]
    [('greedy', 1.0), ('logger', 0.6666666666666666)]
    """
    est = get_estimator(estimator) if isinstance(estimator, str) else estimator
    if not isinstance(est, _Estimator) or isinstance(est, _LoggingValue):
        raise TypeError(
            f"`estimator` must be an ope estimator or one of {', '.join(ESTIMATORS)}; got "
            f"{estimator!r}."
        )
    data = _validate(
        est,
        reward=reward,
        logging_propensity=logging_propensity if est._uses_weights else None,
        target_propensity=target_propensity if est._uses_weights else None,
        q_logged=q_logged if "q_logged" in est._needs else None,
        q_target=q_target if "q_target" in est._needs else None,
        reward_range=reward_range,
        names=names,
    )
    return est._run(data, chunk_size=chunk_size)
