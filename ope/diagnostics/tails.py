r"""The tail of the importance weights: Pareto :math:`\hat k` and Hill's tail index.

The effective sample size is computed from the first two moments of the weights of the rows at
hand, so it is finite on every finite sample, even when the weights' population variance is
infinite and the estimate's standard error means nothing. The shape of the weights' upper tail
says which case holds. Above a high threshold ``u`` a heavy tail is close to a generalized
Pareto distribution with shape ``k``: the weights' ``m``-th moment is finite only for
``k < 1/m``, so ``k >= 0.5`` means an infinite variance (a normal or t interval is not to be
trusted) and ``k >= 1`` an infinite mean.

* :func:`pareto_k` -- the shape of Pareto-smoothed importance sampling (Vehtari, Simpson, Gelman,
  Yao & Gabry, JMLR 25(72), 2024): the ``M = ceil(min(n / 5, 3 sqrt(n)))`` largest weights
  (fewer when fewer are positive, or ties at the threshold) are the tail, the ``(M + 1)``-th
  largest the threshold; the exceedances are fitted by the empirical-Bayes estimator of Zhang &
  Stephens (Technometrics 51, 2009) with ``30 + floor(sqrt(M))`` grid points and a weakly
  informative prior that pulls :math:`\hat k` towards 0.5 with the weight of 10 observations --
  the choices of ``arviz.psislw`` (0.23), whose values it equals to rounding.
* Hill's estimator of the tail index ``alpha = 1 / k`` on the same tail:
  ``alpha_hat = M / sum(log(w_i / u))`` (Hill, Ann. Statist. 3, 1975), a second, model-light
  reading of the same tail (``alpha <= 2``: infinite variance).

Thresholds (Vehtari et al. 2024, section 3): with ``n`` weights the estimate is reliable when
:math:`\hat k` is below ``min(1 - 1 / log10(n), 0.7)`` (:func:`k_threshold`); above it the
estimate's error can be far larger than its interval says, and more rows of the same logs help
only slowly. The functions take any weights; :func:`ope.diagnose` reads the tail of each
candidate's weights off its own pass (no sort of the rows) and calls :func:`fit_tails`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from ope._kernel import caller_threads, row_ranges, run_threads
from ope._thresholds import K_INFINITE_VARIANCE, K_RELIABLE
from ope._validation import as_float_array, check_finite
from ope.exceptions import ValidationError

__all__ = [
    "TailFit",
    "K_RELIABLE",
    "K_INFINITE_VARIANCE",
    "MIN_TAIL",
    "tail_length",
    "k_threshold",
    "fit_tail",
    "fit_tails",
    "pareto_k",
]

#: Fewer tail values than this give no fit (:math:`\hat k` is infinite, as in ``arviz``).
MIN_TAIL: Final = 5

#: Grid points of the Zhang-Stephens estimator beyond ``floor(sqrt(M))`` (arviz's choice; the R
#: package ``loo`` uses 80), the prior's scale divisor, and the prior's weight on k = 0.5.
_GRID_BASE: Final = 30
_PRIOR_SCALE: Final = 3.0
_PRIOR_WEIGHT: Final = 10.0

#: Tail values (over every candidate) from which :func:`fit_tails` fits the candidates on the
#: kernel's threads: below it a worker's wake-up costs more than the fits.
_THREADED_TAIL_VALUES: Final = 8192

#: Grid weights below this are dropped before the posterior mean (as arviz does).
_NEGLIGIBLE: Final = 10.0 * float(np.finfo(float).eps)


@dataclass(frozen=True)
class TailFit:
    """The fitted upper tail of one set of weights.

    ``pareto_k`` is :math:`\\hat k`: ``inf`` when fewer than :data:`MIN_TAIL` weights are
    positive (a handful of rows carry the whole estimate), NaN when there is no tail to fit
    (every weight zero, or the largest weights tied so that fewer than :data:`MIN_TAIL` exceed
    the threshold: bounded weights, as of a deterministic candidate under a fixed logger); ``pareto_sigma`` the fitted scale on the weights'
    own scale, ``tail_index`` Hill's :math:`\\hat\\alpha` (NaN when the threshold is 0),
    ``tail_length`` the values fitted, ``threshold`` the ``u`` they exceed and
    ``k_threshold`` the reliability threshold for ``n`` weights.
    """

    pareto_k: float
    pareto_sigma: float
    tail_index: float
    tail_length: int
    threshold: float
    k_threshold: float

    @property
    def reliable(self) -> bool:
        """Whether :math:`\\hat k` is not above :attr:`k_threshold` (True when it is NaN: no
        tail to fit)."""
        return not bool(self.pareto_k > self.k_threshold)


def tail_length(n: int) -> int:
    """``M = ceil(min(n / 5, 3 sqrt(n)))``: the tail size of PSIS for ``n`` independent draws."""
    return int(math.ceil(min(n / 5.0, 3.0 * math.sqrt(n))))


def k_threshold(n: int) -> float:
    """``min(1 - 1 / log10(n), 0.7)``: the largest reliable :math:`\\hat k` with ``n`` weights
    (``-inf`` for ``n <= 10``, where no tail fit can be trusted)."""
    if n <= 10:
        return -math.inf
    return min(1.0 - 1.0 / math.log10(n), K_RELIABLE)


def _zhang_stephens(x: np.ndarray) -> tuple[float, float]:
    """``(k, sigma)`` of a generalized Pareto fit to the sorted exceedances ``x`` (ascending,
    > 0): Zhang & Stephens' posterior mean of ``theta`` over its grid, then ``k`` with the weak
    prior. Every grid point at once: an (m, M) array (127 x 9,487 at n = 10M)."""
    m_tail = x.size
    grid = _GRID_BASE + int(math.sqrt(m_tail))
    first_quartile = x[int(m_tail / 4.0 + 0.5) - 1]
    theta = 1.0 - np.sqrt(grid / (np.arange(1, grid + 1, dtype=np.float64) - 0.5))
    theta /= _PRIOR_SCALE * first_quartile
    theta += 1.0 / x[-1]
    k = np.log1p(-theta[:, None] * x).mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):  # theta = 0 exactly: k = 0 there
        profile = m_tail * (np.log(-(theta / k)) - k - 1.0)
    profile = np.where(np.isnan(profile), -np.inf, profile)  # a grid point with no likelihood
    # w_j = 1 / sum_i exp(l_i - l_j): the softmax of the profile likelihood (no overflow)
    weights = np.exp(profile - profile.max())
    weights /= weights.sum()
    keep = weights >= _NEGLIGIBLE
    theta, weights = theta[keep], weights[keep]
    weights /= weights.sum()
    theta_post = float(np.sum(theta * weights))
    k_post = float(np.log1p(-theta_post * x).mean())
    sigma = -k_post / theta_post
    k_post = (m_tail * k_post + _PRIOR_WEIGHT * 0.5) / (m_tail + _PRIOR_WEIGHT)
    return k_post, sigma


def fit_tail(top: np.ndarray, n: int) -> TailFit:
    """The :class:`TailFit` of ``n`` weights from their ``M + 1`` largest values ``top``
    (``M = tail_length(n)``; fewer when fewer are positive), in any order.

    The threshold is the smallest of ``top`` when it holds ``M + 1`` values, else 0; it is
    raised to ``w_max`` times the smallest normal float (arviz's floor on ``log(u / w_max)``),
    and the tail is the values strictly above it. The fit is of the exceedances scaled by
    ``w_max`` (the scale does not change ``k``).
    """
    m_tail = tail_length(n)
    limit = k_threshold(n)
    top = np.sort(np.asarray(top, dtype=np.float64))
    if top.size == 0 or top[-1] <= 0.0:
        return TailFit(math.nan, math.nan, math.nan, 0, 0.0, limit)
    w_max = float(top[-1])
    u = float(top[0]) if top.size > m_tail else 0.0
    floor_u = w_max * float(np.finfo(float).tiny)
    u_eff = max(u, floor_u)
    tail = top[top > u_eff]
    if tail.size < MIN_TAIL:
        if u > 0.0:  # the largest weights are tied at u: bounded weights, no tail to fit
            return TailFit(math.nan, math.nan, math.nan, int(tail.size), u, limit)
        return TailFit(math.inf, math.nan, math.nan, int(tail.size), u, limit)
    exceed = tail / w_max - u_eff / w_max
    k, sigma = _zhang_stephens(exceed)
    hill = math.nan
    if u > 0.0:
        logs = np.log(tail / u)
        total = float(logs.sum())
        hill = tail.size / total if total > 0.0 else math.inf
    return TailFit(float(k), float(sigma * w_max), hill, int(tail.size), u, limit)


def fit_tails(tops: Sequence[np.ndarray], n: int) -> list[TailFit]:
    """:func:`fit_tail` of each candidate's largest weights ``tops[j]``, in the order given.

    Long tails (:data:`_THREADED_TAIL_VALUES` values in all) are fitted on the kernel's threads
    (:func:`ope._kernel.run_threads`; the grid's logarithms run in numpy, which releases the
    GIL), a contiguous run of candidates per thread; each fit is the one thread's fit.
    """
    long = sum(int(np.size(v)) for v in tops) >= _THREADED_TAIL_VALUES
    parts = caller_threads() if long else 1
    chunks = run_threads(
        lambda lo, hi: [fit_tail(v, n) for v in tops[lo:hi]], row_ranges(len(tops), 1, parts)
    )
    return [fit for chunk in chunks for fit in chunk]


def pareto_k(weights: npt.ArrayLike) -> TailFit:
    """The Pareto :math:`\\hat k` (and Hill's tail index) of one vector of importance weights.

    Parameters
    ----------
    weights : array_like, shape (n,)
        Importance weights (finite, >= 0), e.g. ``target / logging`` propensities of the
        logged actions; zeros are allowed (they are never in the tail).

    Returns
    -------
    TailFit

    Raises
    ------
    ope.ValidationError
        Weights that are not a finite non-negative vector.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.diagnostics.tails import pareto_k
    >>> rng = np.random.default_rng(0)
    >>> fit = pareto_k(rng.pareto(1.5, 100_000) + 1.0)  # alpha = 1.5: k = 1 / 1.5
    >>> round(fit.pareto_k, 1), fit.reliable, fit.tail_length
    (0.7, False, 949)
    """
    w = as_float_array(weights, "weights", ndim=(1,))
    check_finite(w, "weights")
    if w.size and float(w.min()) < 0.0:
        raise ValidationError(
            f"`weights` must be >= 0 (importance weights); row {int(np.argmin(w))} is "
            f"{float(w.min())!r}."
        )
    n = int(w.size)
    m_tail = tail_length(n) if n else 0
    if n > m_tail + 1:
        top = np.partition(w, n - m_tail - 1)[n - m_tail - 1 :]
    else:
        top = w
    return fit_tail(top, n)
