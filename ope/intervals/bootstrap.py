"""Vectorized nonparametric bootstrap for statistics that are smooth functions of column means.

Every estimator in :mod:`ope.estimators` is ``g(mean of per-row components)``: IPS is the mean of
``w*r``; SNIPS is ``mean(w*r) / mean(w)``; SNDR is ``mean(q_target) + mean(w*(r-q)) / mean(w)``.
A bootstrap replicate therefore needs only the resampled column means, which for a block of
``b`` resamples is one matrix product ``counts (b, n) @ components (n, k)``. Self-normalized
estimators are renormalized **inside each resample** because ``g`` is applied to the resampled
means of numerator and denominator together; keeping the full-sample denominator would miss the
denominator's variance.

No Python loop runs over single resamples: resamples are drawn in blocks sized so that one block
of counts holds about :data:`BLOCK_ELEMENTS` entries.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Final, Literal

import numpy as np
import numpy.typing as npt
from scipy import stats

from ope._validation import (
    as_float_array,
    check_choice,
    check_confidence_level,
    check_finite,
    check_positive_int,
    check_rng,
    user_stacklevel,
)
from ope.exceptions import EstimationError, ParameterError, SmallSampleWarning, ValidationError
from ope.intervals._types import ConfidenceInterval

__all__ = [
    "DEFAULT_N_RESAMPLES",
    "bootstrap_interval",
    "bootstrap_replicates",
    "min_resamples",
]

#: Default number of resamples. Efron & Tibshirani (1993, Ch. 19) recommend at least 1000 for
#: percentile and BCa intervals (tail quantiles need many replicates); 2000 is the value used in
#: the HCPI experiments of Thomas et al. (2015).
DEFAULT_N_RESAMPLES: Final = 2000

#: Entries of one block of resample counts (b x n): 2**22 float64 = 32 MB, bounded whatever n.
BLOCK_ELEMENTS: Final = 1 << 22

#: Largest fraction of replicates allowed to be undefined (e.g. a SNIPS resample whose weights
#: are all zero, 0/0) before the interval is refused: past this the bootstrap distribution is
#: mostly about which rows were drawn, not about the estimate.
MAX_UNDEFINED_FRACTION: Final = 0.01

Statistic = Callable[[np.ndarray], np.ndarray]


def _components_2d(components: npt.ArrayLike) -> np.ndarray:
    """Per-row components as a float64 (n, k) matrix with n >= 2 finite rows (data checks)."""
    a = np.asarray(as_float_array(components, "components", ndim=(1, 2)), dtype=np.float64)
    if a.ndim == 1:
        a = a[:, None]
    if a.shape[0] < 2:
        raise ValidationError(
            f"`components` must have shape (n,) or (n, k) with n >= 2 rows; got {a.shape}."
        )
    check_finite(a, "components")
    return a


def min_resamples(confidence_level: float) -> int:
    """Fewest resamples whose percentile interval at ``confidence_level`` is not extrapolated.

    Each tail of a two-sided interval holds ``(1 - confidence_level) / 2`` of the replicates;
    with fewer than ``2 / (1 - confidence_level)`` resamples that is less than one replicate per
    tail, so the interval ends would be the sample minimum and maximum whatever the level. The
    rule asks for at least one replicate in each tail: ``ceil(2 / (1 - confidence_level))``
    (40 at 0.95, 200 at 0.99), computed with a relative slack of 1e-9 so that levels such as
    0.95, not exact in binary, do not round up by one.

    Parameters
    ----------
    confidence_level : float
        Nominal two-sided coverage, in (0, 1).

    Returns
    -------
    int

    Examples
    --------
    >>> from ope.intervals.bootstrap import min_resamples
    >>> min_resamples(0.95), min_resamples(0.99), min_resamples(0.5)
    (40, 200, 4)
    """
    level = check_confidence_level(confidence_level)
    return math.ceil(2.0 / (1.0 - level) * (1.0 - 1e-9))


def bootstrap_replicates(
    components: npt.ArrayLike,
    statistic: Statistic,
    *,
    n_resamples: int = DEFAULT_N_RESAMPLES,
    rng: int | np.random.Generator | None = None,
) -> np.ndarray:
    """Bootstrap replicates of ``statistic(column means of components)``.

    Parameters
    ----------
    components : array_like, shape (n,) or (n, k)
        Per-row components; row ``i`` is resampled as a whole, so paired columns (numerator and
        denominator, two candidates on the same rows) share resample indices.
    statistic : callable
        Maps column means of shape ``(..., k)`` to values of shape ``(...)``; must be vectorized
        over the leading axes.
    n_resamples : int, default DEFAULT_N_RESAMPLES
        Number of resamples ``B``.
    rng : int, numpy.random.Generator or None
        Seed or generator.

    Returns
    -------
    numpy.ndarray, shape (B,)
        Replicates; entries where ``statistic`` is undefined (e.g. 0/0) are NaN.

    Notes
    -----
    For a block of ``b`` resamples, indices ``I (b, n)`` are drawn uniformly from ``0..n-1``, the
    multinomial counts ``C[j, i] = #{m : I[j, m] = i}`` are formed with one ``bincount``, and the
    resampled means are ``C @ A / n``.

    References
    ----------
    .. [1] B. Efron, "Bootstrap methods: another look at the jackknife", Ann. Statist. 7(1),
       1979.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.intervals.bootstrap import bootstrap_replicates
    >>> reps = bootstrap_replicates([1.0, 2.0, 3.0, 4.0], lambda m: m[..., 0], n_resamples=5,
    ...                             rng=0)
    >>> reps.shape
    (5,)
    """
    a = _components_2d(components)
    n_res = check_positive_int(n_resamples, "n_resamples")
    gen = check_rng(rng)
    n = a.shape[0]
    block = max(1, min(n_res, BLOCK_ELEMENTS // n))
    out = np.empty(n_res)
    done = 0
    while done < n_res:  # loop over blocks of resamples, never over single resamples
        b = min(block, n_res - done)
        idx = gen.integers(0, n, size=(b, n))
        idx += (np.arange(b) * n)[:, None]
        counts = np.bincount(idx.ravel(), minlength=b * n).reshape(b, n).astype(np.float64)
        means = counts @ a
        means /= n
        with np.errstate(divide="ignore", invalid="ignore"):
            out[done : done + b] = statistic(means)
        done += b
    return out


def bootstrap_interval(
    components: npt.ArrayLike,
    statistic: Statistic,
    *,
    confidence_level: float = 0.95,
    n_resamples: int = DEFAULT_N_RESAMPLES,
    bootstrap_method: Literal["percentile", "bca"] = "percentile",
    rng: int | np.random.Generator | None = None,
) -> ConfidenceInterval:
    """Percentile or BCa bootstrap interval for a smooth function of column means.

    Parameters
    ----------
    components : array_like, shape (n,) or (n, k)
        Per-row components (see :func:`bootstrap_replicates`).
    statistic : callable
        Maps column means ``(..., k)`` to values ``(...)``, vectorized.
    confidence_level : float, default 0.95
        Nominal two-sided coverage.
    n_resamples : int, default DEFAULT_N_RESAMPLES
        Number of resamples, at least :func:`min_resamples` of the confidence level.
    bootstrap_method : {"percentile", "bca"}, default "percentile"
        Percentile interval, or bias-corrected and accelerated (BCa) with the jackknife
        acceleration.
    rng : int, numpy.random.Generator or None
        Seed or generator.

    Returns
    -------
    ConfidenceInterval

    Raises
    ------
    ope.ParameterError
        A bad ``confidence_level``, ``bootstrap_method``, ``rng`` or ``n_resamples``: fewer
        than :func:`min_resamples` (``2 / (1 - confidence_level)``) resamples leave less than one
        replicate in each tail of the interval.
    ope.ValidationError
        ``components`` not of shape (n,) or (n, k) with n >= 2, or not finite.
    ope.EstimationError
        More than :data:`MAX_UNDEFINED_FRACTION` of the replicates are undefined, or BCa's bias
        correction is infinite (every replicate on one side of the estimate).

    Warns
    -----
    ope.SmallSampleWarning
        Some (few) replicates were undefined and were left out of the quantiles.

    Notes
    -----
    With replicates :math:`\\hat\\theta^*_b`, :math:`\\gamma` the confidence level and
    :math:`\\alpha=(1-\\gamma)/2`:

    * percentile: :math:`[\\hat F^{-1}(\\alpha),\\ \\hat F^{-1}(1-\\alpha)]` of the replicates;
    * BCa: :math:`\\hat z_0=\\Phi^{-1}(\\#\\{\\hat\\theta^*_b<\\hat\\theta\\}/B + \\tfrac12
      \\#\\{\\hat\\theta^*_b=\\hat\\theta\\}/B)`, acceleration from the jackknife values
      :math:`\\hat\\theta_{(i)}` (leave-one-out means, computed in one vectorized step),
      :math:`\\hat a=\\sum d_i^3/(6(\\sum d_i^2)^{3/2})` with
      :math:`d_i=\\bar\\theta_{(\\cdot)}-\\hat\\theta_{(i)}`, and the quantile levels
      :math:`\\Phi(\\hat z_0+(\\hat z_0+z_q)/(1-\\hat a(\\hat z_0+z_q)))` for
      :math:`q\\in\\{\\alpha,1-\\alpha\\}`.

    References
    ----------
    .. [1] B. Efron, "Better bootstrap confidence intervals", JASA 82(397), 1987.
    .. [2] B. Efron and R. J. Tibshirani, *An Introduction to the Bootstrap*, Chapman & Hall,
       1993, Ch. 13-14.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.intervals.bootstrap import bootstrap_interval
    >>> rng = np.random.default_rng(0)
    >>> wr = rng.exponential(size=(200, 2))          # columns: w*r and w
    >>> ci = bootstrap_interval(wr, lambda m: m[..., 0] / m[..., 1], rng=1)
    >>> bool(ci.low < np.mean(wr[:, 0]) / np.mean(wr[:, 1]) < ci.high)
    True
    """
    level = check_confidence_level(confidence_level)
    check_choice(bootstrap_method, "bootstrap_method", ("percentile", "bca"))
    fewest = min_resamples(level)
    if check_positive_int(n_resamples, "n_resamples") < fewest:
        raise ParameterError(
            f"`n_resamples` must be at least {fewest} for a {level:g} interval (one replicate "
            f"in each tail: 2 / (1 - confidence_level)); got {n_resamples!r}. Pass "
            f"n_resamples={DEFAULT_N_RESAMPLES} (the default) or more."
        )
    a = _components_2d(components)
    reps = bootstrap_replicates(a, statistic, n_resamples=n_resamples, rng=rng)
    ok = np.isfinite(reps)
    n_bad = int(reps.size - ok.sum())
    if n_bad:
        if n_bad > MAX_UNDEFINED_FRACTION * reps.size:
            raise EstimationError(
                f"{n_bad} of {reps.size} bootstrap resamples give an undefined estimate (e.g. "
                "all resampled weights are zero); too few rows carry weight for a bootstrap. "
                "Use a bounded method (ci(method='betting' or 'bernstein')) or more data."
            )
        warnings.warn(
            f"{n_bad} of {reps.size} bootstrap resamples gave an undefined estimate (all "
            "resampled weights zero) and were left out of the interval.",
            SmallSampleWarning,
            stacklevel=user_stacklevel(),
        )
        reps = reps[ok]
    alpha = (1.0 - level) / 2.0
    if bootstrap_method == "percentile":
        lo, hi = np.quantile(reps, [alpha, 1.0 - alpha])
        return ConfidenceInterval(float(lo), float(hi))

    n = a.shape[0]
    total = a.sum(axis=0)
    theta_hat = float(statistic(total / n))
    if np.ptp(reps) == 0.0:
        return ConfidenceInterval(float(reps[0]), float(reps[0]))
    below = np.mean(reps < theta_hat) + 0.5 * np.mean(reps == theta_hat)
    if below <= 0.0 or below >= 1.0:
        raise EstimationError(
            "BCa bias correction is infinite: every bootstrap replicate lies on one side of the "
            "estimate. Use bootstrap_method='percentile' or another interval method."
        )
    z0 = float(stats.norm.ppf(below))
    with np.errstate(divide="ignore", invalid="ignore"):
        jack = statistic((total[None, :] - a) / (n - 1))
    jack = jack[np.isfinite(jack)]
    d = jack.mean() - jack
    ss = float(np.sum(d * d))
    accel = float(np.sum(d**3) / (6.0 * ss**1.5)) if ss > 0 else 0.0
    z = stats.norm.ppf([alpha, 1.0 - alpha])
    levels = stats.norm.cdf(z0 + (z0 + z) / (1.0 - accel * (z0 + z)))
    lo, hi = np.quantile(reps, levels)
    return ConfidenceInterval(float(lo), float(hi))
