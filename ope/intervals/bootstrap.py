"""Nonparametric bootstrap for statistics that are smooth functions of column means, with one set
of resample weights shared by every statistic of a call.

Every estimator in :mod:`ope.estimators` is ``g(mean of per-row components)``: IPS is the mean of
``w*r``; SNIPS is ``mean(w*r) / mean(w)``; SNDR is ``mean(q_target) + mean(w*(r-q)) / mean(w)``.
A bootstrap replicate therefore needs only the resampled column means
``sum_i c_i a_i / sum_i c_i``, where ``c_i`` is how often row ``i`` is drawn in the resample;
the resampling engine :mod:`ope.intervals._resampling` computes them for every column at once
from counter-based counts (multinomial over the rows up to ``EXACT_MAX_ROWS`` rows, multinomial
over few distinct rows, Poisson(1) otherwise; see its notes). Self-normalized estimators are
renormalized **inside each resample** because ``g`` is applied to the resampled means of
numerator and denominator together; keeping the full-sample denominator would miss the
denominator's variance.

This module turns the replicates into intervals (percentile or BCa):
:func:`bootstrap_interval` for one statistic of a components matrix, :func:`shared_bootstrap`
for every candidate and estimator of an evaluation with one set of counts. The weighting
estimators enter :func:`shared_bootstrap` through their row sources
(:class:`ope.intervals._rows.WeightingRows`: their per-row columns and the statistic of the
columns' means), the others through their estimates' sources; the bootstrap knows no estimator
by name.
"""

from __future__ import annotations

import math
import statistics as _stats
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any, Final, Literal

import numpy as np
import numpy.typing as npt

from ope._validation import (
    as_float_array,
    check_choice,
    check_confidence_level,
    check_finite,
    check_positive_int,
    check_reward_range,
    check_names,
    check_rewards_in_range,
    describe,
    resolve_seed,
    user_stacklevel,
    validated_pair,
)
from ope.exceptions import EstimationError, ParameterError, SmallSampleWarning, ValidationError
from ope.intervals._resampling import (
    EXACT_MAX_ROWS,
    MAX_DISTINCT_ROWS,
    POISSON_TABLE,
    Columns,
    Rows,
    Sums,
    dense_counts,
    resample_sums,
)
from ope.intervals._rows import RowColumn, WeightingRows, first_mean
from ope.intervals._types import ConfidenceInterval, within_range
from ope.moments import ratio

__all__ = [
    "DEFAULT_N_RESAMPLES",
    "EXACT_MAX_ROWS",
    "MAX_DENSE_COUNTS",
    "MAX_DISTINCT_ROWS",
    "MAX_N_RESAMPLES",
    "MIN_TAIL_REPLICATES",
    "POISSON_TABLE",
    "SharedBootstrap",
    "bootstrap_interval",
    "bootstrap_replicates",
    "default_n_resamples",
    "min_resamples",
    "resample_counts",
    "shared_bootstrap",
    "undefined_remedy",
]

#: Default number of resamples. Efron & Tibshirani (1993, Ch. 19) recommend at least 1000 for
#: percentile and BCa intervals (tail quantiles need many replicates); 2000 is the value used in
#: the HCPI experiments of Thomas et al. (2015). Levels that need more use
#: :func:`min_resamples` (:func:`default_n_resamples`).
DEFAULT_N_RESAMPLES: Final = 2000

#: Each end of a percentile interval must be set by the third most extreme replicate of its tail
#: or a less extreme one, never by the one or two most extreme (whose values are mostly noise):
#: ``numpy.quantile`` places the ``alpha`` quantile of ``B`` replicates at the 0-based order
#: position ``alpha (B - 1)``, which must be at least ``MIN_TAIL_REPLICATES - 1``.
MIN_TAIL_REPLICATES: Final = 3

#: Most resamples of one call. The Monte-Carlo error of a tail quantile of ``B`` replicates
#: shrinks as ``1 / sqrt(B)``; at a million it is far below any sampling error, and the resampled
#: sums (``B`` x columns float64, 8 MB per column) and the time (about 1 s per million resamples
#: of 60 rows) stay bounded. Levels needing more (:func:`min_resamples` above a million: levels
#: above 0.999996) are refused.
MAX_N_RESAMPLES: Final = 1_000_000

#: Most entries of the dense (n_resamples, n) counts :func:`resample_counts` returns (80 MB of
#: float64): it is meant for inspection and tests on small ``n``.
MAX_DENSE_COUNTS: Final = 10_000_000

#: Largest fraction of replicates allowed to be undefined (e.g. a SNIPS resample whose weights
#: are all zero, 0/0) before the interval is refused: past this the bootstrap distribution is
#: mostly about which rows were drawn, not about the estimate.
MAX_UNDEFINED_FRACTION: Final = 0.01

Statistic = Callable[[np.ndarray], np.ndarray]


def resample_counts(
    n: int, n_resamples: int, *, rng: int | np.random.Generator | None = None
) -> np.ndarray:
    """The resample weights (counts) the bootstrap uses for ``n`` rows, as a dense (B, n) array.

    Multinomial for ``n <= EXACT_MAX_ROWS`` (each row sums to ``n``), Poisson(1) above; with
    the same ``rng`` these are exactly the counts of :func:`bootstrap_replicates`,
    :func:`bootstrap_interval` and :func:`shared_bootstrap` (unless those group few distinct
    rows, see the module notes). Meant for inspection and tests on small ``n``.

    Parameters
    ----------
    n : int
        Rows.
    n_resamples : int
        Resamples ``B``.
    rng : int, numpy.random.Generator or None
        Seed or generator.

    Returns
    -------
    numpy.ndarray of float64, shape (n_resamples, n)

    Examples
    --------
    >>> from ope.intervals.bootstrap import resample_counts
    >>> c = resample_counts(5, 3, rng=0)
    >>> c.sum(axis=1).tolist()      # multinomial: every resample has n rows
    [5.0, 5.0, 5.0]
    """
    n = check_positive_int(n, "n")
    n_res = _resample_count(n_resamples)
    if n * n_res > MAX_DENSE_COUNTS:
        raise ParameterError(
            f"`n`={n} rows times `n_resamples`={n_res} make {n * n_res:.3g} counts, more than "
            f"the {MAX_DENSE_COUNTS:.0e} (80 MB) resample_counts returns as one dense array; it "
            "is meant for inspection on small n. Pass a smaller n or n_resamples, or use "
            "bootstrap_replicates, which never forms the counts."
        )
    _, gen = resolve_seed(rng)
    return dense_counts(n, n_res, gen)


# ============================================================================================
# statistics of the resampled sums and their intervals
# ============================================================================================
#: The interval methods that do not resample, in the order the advice of an undefined bootstrap
#: names them (bounded ones hold at any n; the advice names the first two an estimate offers).
_REMEDY_ORDER: Final = ("betting", "bernstein", "empirical_likelihood", "hoeffding")

#: What the weighting estimators offer beyond normal and t besides the bootstrap: the default
#: advice of :func:`bootstrap_interval` and of the estimators' statistics in
#: :func:`shared_bootstrap`.
_WEIGHTING_ALTERNATIVES: Final = ("betting", "bernstein")


def undefined_remedy(alternatives: Sequence[str] = _WEIGHTING_ALTERNATIVES) -> str:
    """The advice of the error raised when too many bootstrap resamples are undefined: the
    bounded interval methods among ``alternatives`` (the methods an estimate offers, e.g. its
    source's ``methods``), else the normal and t intervals, which every estimate has.

    >>> undefined_remedy()
    "Use a bounded method (ci(method='betting' or 'bernstein')) or more data."
    >>> undefined_remedy(("bootstrap",))
    "Use more data, or ci(method='normal' or 't') (no bounded interval applies to this estimate)."
    """
    bounded = [m for m in _REMEDY_ORDER if m in alternatives][:2]
    if bounded:
        named = " or ".join(repr(m) for m in bounded)
        return f"Use a bounded method (ci(method={named})) or more data."
    return (
        "Use more data, or ci(method='normal' or 't') (no bounded interval applies to this "
        "estimate)."
    )


_BOUNDED_REMEDY: Final = undefined_remedy()

#: Why a replicate can be undefined, when the statistic says nothing more specific.
_UNDEFINED_CAUSE: Final = "e.g. all resampled weights are zero"


def _alternatives(source: Any) -> tuple[str, ...]:
    """The interval methods a row-backed estimate source allows besides the bootstrap (its
    ``interval_alternatives()``, else its ``methods``; the weighting estimators' by default)."""
    allowed = getattr(source, "interval_alternatives", None)
    if callable(allowed):
        return tuple(allowed())
    return tuple(getattr(source, "methods", _WEIGHTING_ALTERNATIVES))


@dataclass(frozen=True)
class _Stat:
    """One statistic of the call: its label, its columns, ``g`` of their means, and the range
    its interval is intersected with (None: not)."""

    label: Any
    columns: tuple[int, ...]
    function: Statistic
    value_range: tuple[float, float] | None = None
    where: str = ""
    #: why a replicate can be undefined, for the message
    cause: str = _UNDEFINED_CAUSE
    #: what to do instead when too many are (:func:`undefined_remedy`)
    remedy: str = _BOUNDED_REMEDY


def _replicates(stat: _Stat, res: Sums) -> np.ndarray:
    means = res.sums[:, list(stat.columns)] / res.sums[:, -1:]
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(stat.function(means), dtype=np.float64).reshape(-1)


def _theta_hat(stat: _Stat, res: Sums, n: int) -> float:
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(stat.function(res.totals[list(stat.columns)] / n))


def _accelerations(
    cols: Columns, stats: Sequence[_Stat], res: Sums, thetas: Sequence[float]
) -> list[float]:
    """BCa's jackknife acceleration of each statistic from leave-one-out column means, one pass
    over blocks of rows for all statistics.

    With jackknife values ``j_i`` and ``e_i = j_i - theta_hat`` (finite ones only), the centred
    sums ``sum d**2``, ``sum d**3`` of ``d_i = mean(j) - j_i`` come from the power sums of
    ``e`` (the shift is within ``O(1/n**2)`` of the mean, so nothing cancels).
    """
    n = cols.n
    acc = np.zeros((len(stats), 4))  # count, sum e, sum e^2, sum e^3
    for _, data in cols.blocks():
        for s, (stat, theta) in enumerate(zip(stats, thetas)):  # a loop over statistics
            idx = list(stat.columns)
            loo = (res.totals[idx][:, None] - data[idx]) / (n - 1)
            with np.errstate(divide="ignore", invalid="ignore"):
                jack = np.asarray(stat.function(loo.T), dtype=np.float64).reshape(-1)
            e = jack[np.isfinite(jack)] - theta
            acc[s] += (e.size, e.sum(), (e * e).sum(), (e * e * e).sum())
    out = []
    for count, s1, s2, s3 in acc:
        if count == 0:
            out.append(0.0)
            continue
        mu = s1 / count
        ss = s2 - count * mu * mu
        cube = -(s3 - 3.0 * mu * s2 + 2.0 * count * mu**3)
        out.append(float(cube / (6.0 * ss**1.5)) if ss > 0 else 0.0)
    return out


def _interval(
    reps: np.ndarray,
    theta_hat: float,
    accel: float | None,
    level: float,
    where: str,
    cause: str = _UNDEFINED_CAUSE,
    remedy: str = _BOUNDED_REMEDY,
) -> ConfidenceInterval:
    """Percentile (``accel`` None) or BCa interval of the replicates."""
    ok = np.isfinite(reps)
    n_bad = int(reps.size - ok.sum())
    if n_bad:
        if n_bad > MAX_UNDEFINED_FRACTION * reps.size:
            raise EstimationError(
                f"{where}{n_bad} of {reps.size} bootstrap resamples give an undefined estimate "
                f"({cause}); too few rows carry weight for a bootstrap. {remedy}"
            )
        warnings.warn(
            f"{where}{n_bad} of {reps.size} bootstrap resamples gave an undefined estimate (all "
            "resampled weights zero) and were left out of the interval.",
            SmallSampleWarning,
            stacklevel=user_stacklevel(),
        )
        reps = reps[ok]
    alpha = (1.0 - level) / 2.0
    if accel is None:
        lo, hi = np.quantile(reps, [alpha, 1.0 - alpha])
        return ConfidenceInterval(float(lo), float(hi))
    if np.ptp(reps) == 0.0:
        return ConfidenceInterval(float(reps[0]), float(reps[0]))
    below = np.mean(reps < theta_hat) + 0.5 * np.mean(reps == theta_hat)
    if below <= 0.0 or below >= 1.0:
        raise EstimationError(
            f"{where}BCa bias correction is infinite: every bootstrap replicate lies on one side "
            "of the estimate. Use bootstrap_method='percentile' or another interval method."
        )
    normal = _stats.NormalDist()
    z0 = normal.inv_cdf(float(below))
    levels = []
    for q in (alpha, 1.0 - alpha):
        zq = z0 + normal.inv_cdf(q)
        levels.append(normal.cdf(z0 + zq / (1.0 - accel * zq)))
    lo, hi = np.quantile(reps, levels)
    return ConfidenceInterval(float(lo), float(hi))


def _run(
    cols: Columns,
    stats: Sequence[_Stat],
    *,
    level: float,
    n_resamples: int,
    method: str,
    gen: np.random.Generator,
) -> tuple[list[ConfidenceInterval], str]:
    res = resample_sums(cols, n_resamples, gen)
    thetas = [_theta_hat(s, res, cols.n) for s in stats]
    accels: list[float | None] = (
        list(_accelerations(cols, stats, res, thetas)) if method == "bca" else [None] * len(stats)
    )
    out = [
        within_range(
            _interval(_replicates(s, res), t, a, level, s.where, s.cause, s.remedy), s.value_range
        )
        for s, t, a in zip(stats, thetas, accels)  # a loop over statistics
    ]
    return out, res.resampling


# ============================================================================================
# arguments
# ============================================================================================
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


def _check_statistic(statistic: Any, components: np.ndarray) -> Statistic:
    """The statistic of a bootstrap: a callable of the column means of ``components``,
    vectorized over leading axes; tried once on two copies of the full-sample means."""
    if not callable(statistic):
        raise ParameterError(
            f"`statistic` must be a function of the column means (shape (..., k) -> (...)); "
            f"got {describe(statistic)}. Pass e.g. statistic=lambda m: m[..., 0] / m[..., 1]."
        )
    means = np.repeat(components.mean(axis=0)[None, :], 2, axis=0)  # (2, k)
    try:
        with np.errstate(all="ignore"):
            got = np.asarray(statistic(means), dtype=np.float64)
    except Exception as exc:  # noqa: BLE001 - the user's function, reported with its argument
        raise ParameterError(
            f"`statistic` failed on the column means of `components` (shape (2, "
            f"{components.shape[1]}) for {components.shape[1]} columns): "
            f"{type(exc).__name__}: {str(exc)[:200]}. It must map means of shape (..., k) to "
            "values of shape (...), k the number of columns of components."
        ) from exc
    if got.shape != (2,):
        raise ParameterError(
            f"`statistic` must return one value per row of means (shape (...,) for means of "
            f"shape (..., k)); on means of shape (2, {components.shape[1]}) it returned shape "
            f"{got.shape}. Write it with m[..., i], vectorized over the leading axes."
        )
    return statistic


def _matrix_columns(a: np.ndarray) -> Columns:
    return Columns(a.shape[0], a.shape[1], lambda rows: a[rows].T)


def min_resamples(confidence_level: float) -> int:
    """Fewest resamples whose percentile interval at ``confidence_level`` is not set by the one or
    two most extreme replicates of a tail.

    ``numpy.quantile`` puts the ``alpha = (1 - confidence_level) / 2`` quantile of ``B``
    replicates at the 0-based order position ``alpha (B - 1)``; the rule asks for a position of
    at least ``MIN_TAIL_REPLICATES - 1 = 2`` (the third most extreme replicate, or a less
    extreme one), i.e. ``B >= 4 / (1 - confidence_level) + 1``: 81 at 0.95, 401 at 0.99,
    4001 at 0.999. It is computed with a relative slack of 1e-9 so that levels such as 0.95, not
    exact in binary, do not round up by one.

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
    (81, 401, 9)
    """
    level = check_confidence_level(confidence_level)
    return math.ceil(2.0 * (MIN_TAIL_REPLICATES - 1) / (1.0 - level) * (1.0 - 1e-9)) + 1


def default_n_resamples(confidence_level: float) -> int:
    """The resamples used when none are given: ``DEFAULT_N_RESAMPLES``, or :func:`min_resamples`
    when the level needs more (levels above 0.998).

    Examples
    --------
    >>> from ope.intervals.bootstrap import default_n_resamples
    >>> default_n_resamples(0.95), default_n_resamples(0.999)
    (2000, 4001)
    """
    return max(DEFAULT_N_RESAMPLES, min_resamples(confidence_level))


def _resample_count(n_resamples: Any) -> int:
    """A number of resamples: a whole number in [1, MAX_N_RESAMPLES]."""
    count = check_positive_int(n_resamples, "n_resamples", example="n_resamples=2000")
    if count > MAX_N_RESAMPLES:
        raise ParameterError(
            f"`n_resamples` must be at most MAX_N_RESAMPLES={MAX_N_RESAMPLES:,}; got "
            f"{n_resamples!r}. Beyond a million resamples the Monte-Carlo error of the interval "
            "is negligible next to its sampling error. Pass e.g. n_resamples=2000."
        )
    return count


def _checked_n_resamples(n_resamples: Any, level: float) -> int:
    fewest = min_resamples(level)
    if fewest > MAX_N_RESAMPLES:
        raise ParameterError(
            f"`confidence_level`={level!r} is too close to 1 for a bootstrap: each end of the "
            f"interval would need {fewest:,} resamples or more (4 / (1 - confidence_level) + 1), "
            f"above MAX_N_RESAMPLES={MAX_N_RESAMPLES:,}. Use a level of at most 0.99999, or a "
            "bounded method (hoeffding, bernstein, betting)."
        )
    if n_resamples is None:
        return default_n_resamples(level)
    if _resample_count(n_resamples) < fewest:
        raise ParameterError(
            f"`n_resamples` must be at least {fewest} for a {level:g} interval (each end of the "
            f"interval must come from the third most extreme replicate of its tail or a less "
            f"extreme one: 4 / (1 - confidence_level) + 1); got {n_resamples!r}. Pass "
            f"n_resamples={default_n_resamples(level)} (the default) or more."
        )
    return int(n_resamples)


# ============================================================================================
# public entry points
# ============================================================================================
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
        denominator, two candidates on the same rows) share resample counts.
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
    Replicate ``b`` is ``statistic(sum_i c[b, i] a_i / sum_i c[b, i])`` with the counts of the
    module notes (multinomial for ``n <= EXACT_MAX_ROWS``, so ``sum_i c[b, i] = n``; over
    distinct rows when they are few; Poisson(1) otherwise), accumulated in blocks of rows.

    References
    ----------
    .. [1] B. Efron, "Bootstrap methods: another look at the jackknife", Ann. Statist. 7(1),
       1979.
    .. [2] A. B. Owen and D. Eckles, "Bootstrapping data arrays of arbitrary order", Ann. Appl.
       Stat. 6(3), 2012 (Poisson(1) resample weights).

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
    n_res = _resample_count(n_resamples)
    stat = _check_statistic(statistic, a)
    _, gen = resolve_seed(rng)
    cols = _matrix_columns(a)
    res = resample_sums(cols, n_res, gen)
    return _replicates(_Stat(None, tuple(range(a.shape[1])), stat), res)


def bootstrap_interval(
    components: npt.ArrayLike,
    statistic: Statistic,
    *,
    confidence_level: float = 0.95,
    n_resamples: int | None = None,
    bootstrap_method: Literal["percentile", "bca"] = "percentile",
    rng: int | np.random.Generator | None = None,
    alternatives: Sequence[str] = _WEIGHTING_ALTERNATIVES,
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
    n_resamples : int, optional
        Number of resamples, at least :func:`min_resamples` of the confidence level
        (81 at 0.95). Default :func:`default_n_resamples` (2000 up to level 0.998).
    bootstrap_method : {"percentile", "bca"}, default "percentile"
        Percentile interval, or bias-corrected and accelerated (BCa) with the jackknife
        acceleration.
    rng : int, numpy.random.Generator or None
        Seed or generator. The same seed gives the same counts as :func:`shared_bootstrap` and
        :func:`resample_counts` on the same number of rows.
    alternatives : sequence of str, default ("betting", "bernstein")
        The interval methods the caller offers instead (an estimate's ``source.methods``): the
        error raised when too many replicates are undefined advises the bounded ones among
        them, else the normal and t intervals (:func:`undefined_remedy`).

    Returns
    -------
    ConfidenceInterval

    Raises
    ------
    ope.ParameterError
        A bad ``confidence_level``, ``bootstrap_method``, ``rng`` or ``n_resamples``: fewer
        than :func:`min_resamples` (``4 / (1 - confidence_level) + 1``) resamples let the one
        or two most extreme replicates set an end of the interval.
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
      :math:`\\hat\\theta_{(i)}` (leave-one-out means, computed in one vectorized step per block
      of rows), :math:`\\hat a=\\sum d_i^3/(6(\\sum d_i^2)^{3/2})` with
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
    method = check_choice(bootstrap_method, "bootstrap_method", ("percentile", "bca"))
    n_res = _checked_n_resamples(n_resamples, level)
    a = _components_2d(components)
    _, gen = resolve_seed(rng)
    stat = _Stat(
        None,
        tuple(range(a.shape[1])),
        _check_statistic(statistic, a),
        remedy=undefined_remedy(
            check_names(alternatives, "alternatives", example="alternatives=('betting',)")
        ),
    )
    (iv,), _ = _run(
        _matrix_columns(a), [stat], level=level, n_resamples=n_res, method=method, gen=gen
    )
    return iv


@dataclass(frozen=True)
class SharedBootstrap:
    """The intervals of one :func:`shared_bootstrap` call, all from one set of resample counts.

    Attributes
    ----------
    intervals : dict
        ``(policy, estimator) -> ConfidenceInterval`` for the weighting estimators, and
        ``key -> ConfidenceInterval`` for every entry of ``sources``.
    logging : ConfidenceInterval or None
        The logging policy's value (mean reward), on the same resamples; None when not asked.
    seed : int or None
        The seed of the counts (``rng`` when an int; drawn and recorded when ``rng=None``; None
        when a Generator was given): ``shared_bootstrap(..., rng=seed)`` gives the same
        intervals again.
    n_resamples, confidence_level, bootstrap_method
        The settings used.
    resampling : str
        How the counts were drawn: ``"multinomial"``, ``"multinomial over distinct rows"`` or
        ``"poisson"`` (see the module notes).
    n : int
        Rows.
    """

    intervals: dict[Any, ConfidenceInterval]
    logging: ConfidenceInterval | None
    seed: int | None
    n_resamples: int
    confidence_level: float
    bootstrap_method: str
    resampling: str
    n: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the settings, the seed and the intervals (keys joined by ``/``)."""

        def label(key: Any) -> str:
            return "/".join(map(str, key)) if isinstance(key, tuple) else str(key)

        return {
            "seed": self.seed,
            "n_resamples": self.n_resamples,
            "confidence_level": self.confidence_level,
            "bootstrap_method": self.bootstrap_method,
            "resampling": self.resampling,
            "n": self.n,
            "logging": None if self.logging is None else self.logging.to_dict(),
            "intervals": {label(k): v.to_dict() for k, v in self.intervals.items()},
        }


def _row_sources(
    estimators: Sequence[Any], reward_range: tuple[float, float] | None
) -> list[tuple[str, WeightingRows]]:
    """``(key, row source)`` of each weighting estimator asked for: the estimator's own
    ``row_source(reward_range)`` (or a row source given as is)."""
    if isinstance(estimators, (str, bytes)):
        estimators = (estimators,)
    if isinstance(estimators, (Mapping, Set)) or not isinstance(estimators, Iterable):
        raise ParameterError(
            f"`estimators` must be a sequence of estimators (estimator objects or (key, "
            f"estimator) pairs); got {describe(estimators)}. Pass e.g. estimators=(ope.IPS(), "
            "ope.SNIPS())."
        )
    out: list[tuple[str, WeightingRows]] = []
    for item in estimators:
        pair: tuple[Any, Any] = item if isinstance(item, tuple) and len(item) == 2 else (None, item)
        key, est = pair
        rows: Any
        if isinstance(est, WeightingRows):
            rows = est
        elif callable(getattr(est, "row_source", None)):
            rows = est.row_source(reward_range)
        else:
            raise ParameterError(
                f"`estimators` of shared_bootstrap are weighting estimators, objects with a row "
                f"source (row_source(reward_range)) such as ope.IPS(), ope.SNIPS() or "
                f"ope.ClippedIPS(max_weight=...); got {item!r}. Pass other row-backed estimates "
                "(DR, SNDR, paired differences) through `sources` (their Estimate.source)."
            )
        if not isinstance(rows, WeightingRows):
            raise ParameterError(
                f"`estimators`: {item!r} gave a row source of type {type(rows).__name__}, not "
                "WeightingRows; its row_source(reward_range) must return the per-row columns "
                "and their statistic (ope.intervals._rows.WeightingRows)."
            )
        label = str(key if key is not None else rows.name)
        if label in (k for k, _ in out):
            raise ParameterError(
                f"`estimators` names {label!r} twice; give each a distinct key with "
                "(key, estimator) pairs."
            )
        out.append((label, rows))
    return out


#: The logging value: the mean logged reward.
_MEAN_REWARD: Final = WeightingRows("logging", (RowColumn("reward"),), first_mean)


def shared_bootstrap(
    reward: npt.ArrayLike,
    logging_propensity: npt.ArrayLike | None = None,
    target_propensity: npt.ArrayLike | Sequence[npt.ArrayLike] | None = None,
    *,
    names: Sequence[str] | None = None,
    estimators: Sequence[Any] = (),
    sources: Mapping[Any, Any] | None = None,
    logging: bool = True,
    reward_range: Sequence[float] | None = None,
    confidence_level: float = 0.95,
    n_resamples: int | None = None,
    bootstrap_method: Literal["percentile", "bca"] = "percentile",
    rng: int | np.random.Generator | None = None,
) -> SharedBootstrap:
    """Bootstrap intervals of every candidate x estimator (and the logging value) from one set
    of resample counts, in one pass over blocks of rows.

    Parameters
    ----------
    reward : array_like, shape (n,)
        Logged rewards.
    logging_propensity : array_like, shape (n,), optional
        Logging propensities of the logged actions (needed by ``estimators``).
    target_propensity : array_like (n, P) or sequence of P arrays (n,), optional
        Each candidate's probability of the logged action. An (n, P) array (e.g. the
        ``TargetPropensities.values`` view of ``ope.evaluate``) is read in row blocks, never
        copied whole; float32 is accumulated in float64.
    names : sequence of str, optional
        The P candidates' names (default ``"0"``, ``"1"``, ...).
    estimators : sequence, default ()
        Weighting estimators, each an estimator object with a row source (``ope.IPS()``,
        ``ope.SNIPS()``, ``ope.ClippedIPS(max_weight=R)``: their
        ``row_source(reward_range)``, the per-row columns and the statistic of their means), a
        ``(key, estimator)`` pair such as ``ope.evaluation.resolve_estimators`` returns, or a
        row source itself; its intervals are ``intervals[(name, key)]``, the key defaulting to
        the row source's name. Needed when ``target_propensity`` is given.
    sources : mapping, optional
        Other row-backed estimates resampled with the same counts: ``key -> source`` where the
        source has ``components()`` (per-row components, (n, k)), ``statistic(means)`` and
        optionally ``value_range`` (an ``Estimate.source``: DR, SNDR, Switch-DR, DRos, paired
        differences, factored candidates). Their intervals are ``intervals[key]``. DM estimates
        and differences with one have no bootstrap interval (their ``ci`` is NaN) and are
        refused.
    logging : bool, default True
        Also give the logging value's interval (:attr:`SharedBootstrap.logging`).
    reward_range : (float, float), optional
        A priori reward range: every weighting and logging interval is intersected with it (as
        ``Estimate.ci`` does), and clipped IPS clips about its lower end.
    confidence_level : float, default 0.95
    n_resamples : int, optional
        Resamples, at least :func:`min_resamples`; default :func:`default_n_resamples`.
    bootstrap_method : {"percentile", "bca"}, default "percentile"
    rng : int, numpy.random.Generator or None
        Seed or generator; ``None`` draws a seed and records it (:attr:`SharedBootstrap.seed`).

    Returns
    -------
    SharedBootstrap

    Raises
    ------
    ope.ParameterError
        A bad setting, an estimator without a row source (DR and the other estimates go
        through ``sources``), a DM source (model-conditional: no valid bootstrap), candidates
        without estimators, names that do not match the
        candidates, ``n_resamples`` below :func:`min_resamples`.
    ope.ValidationError
        Arrays of the wrong shape, non-finite, propensities out of range, rewards outside
        ``reward_range``, fewer than 2 rows.
    ope.EstimationError
        A statistic undefined in too many resamples (the message names it), or BCa's bias
        correction infinite.

    Notes
    -----
    The columns resampled are ``r`` (the logging value) and, for each candidate ``j`` with
    weights ``w_j = t_j / p``, the columns the estimators' row sources name (IPS and SNIPS
    numerators ``w_j r``, SNIPS denominators ``w_j``, clipped IPS ``min(w_j, R)(r - r_lo)``),
    each distinct column built once per block of rows, plus the components of ``sources``;
    replicate ``b`` of an estimator is its row source's statistic at the resampled means
    ``S(x)/S(1)`` of its columns (IPS ``S(w r)/S(1)``, SNIPS ``S(w r)/S(w)``, clipped IPS
    ``r_lo + S(min(w, R)(r - r_lo))/S(1)``; the logging value ``S(r)/S(1)``), with
    ``S(x) = sum_i c[b, i] x_i``. With the same seed and rows every interval equals
    ``Estimate.ci(method="bootstrap", rng=seed)`` of the same estimate, to rounding (the counts
    are the same unless few distinct rows are grouped, whose grouping depends on the columns).

    Examples
    --------
    >>> import numpy as np
    >>> import ope
    >>> from ope.intervals.bootstrap import shared_bootstrap
    >>> rng = np.random.default_rng(0)
    >>> n = 1000
    >>> r = rng.uniform(size=n)
    >>> p = np.full(n, 0.5)
    >>> t = rng.uniform(size=(n, 3))
    >>> res = shared_bootstrap(r, p, t, names=["a", "b", "c"], rng=1, reward_range=(0, 1),
    ...                        estimators=(ope.IPS(), ope.SNIPS()))
    >>> sorted(res.intervals)[:2], res.seed
    ([('a', 'ips'), ('a', 'snips')], 1)
    >>> lo, hi = res.intervals[("b", "snips")]
    >>> bool(0 <= lo < hi <= 1)
    True
    """
    level = check_confidence_level(confidence_level)
    method = check_choice(bootstrap_method, "bootstrap_method", ("percentile", "bca"))
    n_res = _checked_n_resamples(n_resamples, level)
    rr = check_reward_range(reward_range)
    seed, gen = resolve_seed(rng)
    specs = _row_sources(estimators, rr)
    r = as_float_array(reward, "reward", ndim=(1,))
    check_finite(r, "reward")
    check_rewards_in_range(r, rr)
    n = int(r.shape[0])
    if n < 2:
        raise ValidationError(f"`reward` must have n >= 2 rows for a bootstrap; got {n}.")

    # the candidates: an (n, P) matrix or a list of (n,) vectors, read in row blocks
    p: np.ndarray | None = None
    targets: list[np.ndarray] = []
    t2: np.ndarray | None = None
    n_pol = 0
    if target_propensity is not None or logging_propensity is not None:
        if target_propensity is None or logging_propensity is None:
            raise ParameterError(
                "`logging_propensity` and `target_propensity` go together: pass both (for the "
                "weighting estimators) or neither (sources and the logging value only)."
            )
        if isinstance(target_propensity, (list, tuple)):
            for j, tj in enumerate(target_propensity):
                p, tj = validated_pair(logging_propensity, tj)
                if tj.ndim != 1:
                    raise ValidationError(
                        f"`target_propensity[{j}]` must have shape (n,); got {tj.shape}."
                    )
                targets.append(tj)
            n_pol = len(targets)
        else:
            # any other sequence is array-like: validated_pair reads it as an array
            p, t2 = validated_pair(logging_propensity, target_propensity)  # type: ignore[arg-type]
            if t2.ndim == 1:
                t2 = t2[:, None]
            n_pol = int(t2.shape[1])
        assert p is not None
        if p.shape[0] != n:
            raise ValidationError(
                f"`logging_propensity` has {p.shape[0]} rows but `reward` has {n}; both must "
                "describe the same logged rows."
            )
    if specs and n_pol == 0:
        raise ParameterError(
            "the weighting `estimators` need `logging_propensity` and `target_propensity`; "
            "pass them, or estimators=() for sources and the logging value only."
        )
    labels = (
        [str(j) for j in range(n_pol)]
        if names is None
        else check_names(names, "names", example="names=['greedy']")
    )
    if len(labels) != n_pol or len(set(labels)) != len(labels):
        raise ParameterError(
            f"`names` must give each of the {n_pol} candidates (the columns of "
            f"`target_propensity`) a distinct name; got {list(labels)!r}."
        )
    if sources is not None and not isinstance(sources, Mapping):
        raise ParameterError(
            f"`sources` must be a mapping key -> row-backed estimate source (an "
            f"Estimate.source); got {describe(sources)}. Pass e.g. sources={{'dr': "
            "estimate.source}, or leave it out."
        )

    # the columns: each row source's columns of each candidate, each distinct one built once
    columns: dict[tuple[Any, ...], int] = {}

    def column(spec: tuple[Any, ...]) -> int:
        return columns.setdefault(spec, len(columns))

    def indices(rows: WeightingRows, j: int | None) -> tuple[int, ...]:
        """The columns of a row source for candidate ``j`` (a column of no weights: shared)."""
        return tuple(column(("rows", c, j if c.uses_weights else None)) for c in rows.columns)

    stats: list[_Stat] = []
    if logging:
        stats.append(
            _Stat(None, indices(_MEAN_REWARD, None), _MEAN_REWARD.statistic, rr, "logging value: ")
        )
    for j, name in enumerate(labels):  # loop over candidates
        for key, rows in specs:  # and estimators
            where = f"policy {name!r}, {key}: "
            cause = (
                f"all resampled weights are zero: column {j} of `target_propensity` is 0 on "
                "nearly every row"
                if rows.undefined_without_weight
                else _UNDEFINED_CAUSE
            )
            stats.append(
                _Stat(
                    (name, key),
                    indices(rows, j),
                    rows.statistic,
                    rr,
                    where,
                    cause,
                    undefined_remedy(rows.methods),
                )
            )
    extra: dict[Any, np.ndarray] = {}
    taken = {s.label for s in stats}
    for key, src in (sources or {}).items():  # loop over sources
        if key in taken:
            raise ParameterError(
                f"`sources` key {key!r} is also a (policy, estimator) of `estimators`; give "
                "the source another key."
            )
        if not (
            callable(getattr(src, "components", None)) and callable(getattr(src, "statistic", None))
        ):
            raise ParameterError(
                f"`sources`[{key!r}] must be a row-backed estimate source with components() "
                f"and statistic(means) (an Estimate.source); got {describe(src)}."
            )
        if getattr(src, "model_conditional", False):
            raise ParameterError(
                f"`sources`[{key!r}] is a direct-method (DM) estimate, or a difference with one: "
                "its resamples hold the reward model fixed, so a bootstrap interval would leave "
                "out the model's own error and bias (such intervals cover the truth far less "
                "often than they claim). DM has no interval; leave it out of `sources`, or "
                "bootstrap DR or SNDR with the same reward model instead."
            )
        comps = _components_2d(src.components())
        if comps.shape[0] != n:
            raise ValidationError(
                f"source {key!r} has {comps.shape[0]} rows but `reward` has {n}; sources must "
                "be estimates on the same rows."
            )
        extra[key] = comps
        idx_ = tuple(column(("src", key, k)) for k in range(comps.shape[1]))
        stats.append(
            _Stat(
                key,
                idx_,
                src.statistic,
                getattr(src, "value_range", None),
                f"{key}: ",
                remedy=undefined_remedy(_alternatives(src)),
            )
        )
    if n_pol and not specs:
        raise ParameterError(
            "`target_propensity` gives candidates but `estimators` is empty: pass the weighting "
            "estimators to resample them with, e.g. estimators=(ope.IPS(), ope.SNIPS()), or "
            "leave out the propensities."
        )
    if not stats:
        raise ParameterError(
            "nothing to bootstrap: pass candidates with `estimators`, `sources`, or logging=True."
        )
    order = list(columns)

    def build(rows: Rows) -> np.ndarray:
        rb = r[rows].astype(np.float64, copy=False)
        out = np.empty((len(order), rb.shape[0]), dtype=np.float64)
        w_block: np.ndarray | None = None
        if t2 is not None and p is not None:
            w_block = ratio(p[rows], t2[rows])  # (L, P), float64

        def weights(j: int) -> np.ndarray:
            if w_block is not None:
                return w_block[:, j]
            assert p is not None
            return ratio(p[rows], targets[j][rows])

        for i, (kind, what, j) in enumerate(order):  # a loop over columns
            if kind == "src":  # column j of the source's components
                out[i] = extra[what][rows, j]
            else:  # a row source's column of candidate j
                what.fill(rb, None if j is None else weights(j), out[i])
        return out

    cols = Columns(n, len(order), build)
    ivs, resampling = _run(cols, stats, level=level, n_resamples=n_res, method=method, gen=gen)
    first = 1 if logging else 0  # the logging value is the first statistic when asked for
    intervals = {s.label: iv for s, iv in zip(stats[first:], ivs[first:])}
    return SharedBootstrap(
        intervals=intervals,
        logging=ivs[0] if logging else None,
        seed=seed,
        n_resamples=n_res,
        confidence_level=level,
        bootstrap_method=method,
        resampling=resampling,
        n=n,
    )
