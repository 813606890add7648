r"""The logarithmic-smoothing lower bound of a policy value (Sakhi et al., NeurIPS 2024).

A finite-sample lower bound on :math:`V = \mathbb E[w r]` that needs an a priori lower end of the
rewards but **no bound on the importance weights**: with
:math:`x_i = w_i (r_i - r_{\min}) \ge 0` and a scale :math:`\lambda > 0` fixed before the data
are seen, the smoothed terms :math:`\psi_i = \lambda \log(1 + x_i/\lambda)` satisfy
:math:`\mathbb E[e^{\psi_i/\lambda}] = 1 + (V - r_{\min})/\lambda` exactly, so by Markov's
inequality on :math:`\exp(\sum_i \psi_i/\lambda)`, with probability at least :math:`1 - \delta`,

.. math:: V \ge r_{\min} + \lambda\Big(\exp\Big(\frac{\bar\psi}{\lambda}
          - \frac{\ln(1/\delta)}{n}\Big) - 1\Big).

The logarithm tames the largest weights (a weight of :math:`10^6` adds at most
:math:`\lambda\log(1 + 10^6 x/\lambda)`), which is what makes the bound hold without a weight
bound and stay informative under heavy tails, where Hoeffding and Bernstein need a bound and the
normal interval undercovers. ope takes :math:`\lambda = \sqrt n\,(r_{\max} - r_{\min})`, the
scale of the reference implementation (:math:`\sqrt n` for rewards in [0, 1]) in the rewards'
units, so the bound is equivariant to shifting and scaling the rewards. It assumes i.i.d. rows
and correct logging propensities; with a support gap (:math:`\mathbb E[w] < 1`) it stays a
valid, more conservative, lower bound.

:func:`log_smoothing_interval` returns the one-sided interval ``[bound, r_max]`` (the value lies
in the reward range), with coverage at least ``confidence_level``: ``Estimate.ci(method=
"log_smoothing")`` of IPS and of the logging value.

References
----------
.. [1] O. Sakhi, I. Aouali, P. Alquier and N. Chopin, "Logarithmic smoothing for pessimistic
   off-policy evaluation, selection and learning", NeurIPS 2024 (arXiv:2405.14335).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from ope._validation import check_confidence_level
from ope.intervals._shared import weight_reward_rows
from ope.intervals._types import ConfidenceInterval

__all__ = [
    "log_smoothing_lower_bound",
    "log_smoothing_interval",
    "smoothing_scale",
    "bound_from_mean_log",
]


def log_smoothing_lower_bound(
    weight: ArrayLike,
    reward: ArrayLike,
    *,
    reward_range: tuple[float, float] | None,
    confidence_level: float = 0.95,
) -> float:
    r"""One-sided logarithmic-smoothing lower bound of :math:`\mathbb E[w r]` (see the module).

    Parameters
    ----------
    weight : array_like, shape (n,)
        Importance weights :math:`\pi(a|x)/\pi_0(a|x) \ge 0` (no bound needed; ones for the
        logging value).
    reward : array_like, shape (n,)
        Rewards, within ``reward_range``.
    reward_range : (float, float)
        A priori reward range; its lower end makes the terms non-negative, its width sets the
        scale :math:`\lambda = \sqrt n\,(r_{\max} - r_{\min})`.
    confidence_level : float, default 0.95
        Probability that the bound is at most the value (one-sided).

    Returns
    -------
    float
        The bound, in ``[r_min, r_max]`` (the value lies in the range).

    Raises
    ------
    ope.MissingBoundsError
        ``reward_range`` is None.
    ope.ParameterError
        A malformed ``reward_range`` or ``confidence_level``.
    ope.ValidationError
        Arrays of the wrong shape, non-finite or negative weights, rewards outside the range.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.intervals import log_smoothing_lower_bound
    >>> rng = np.random.default_rng(0)
    >>> w = rng.pareto(1.5, 10_000)  # heavy-tailed weights, no bound
    >>> r = rng.binomial(1, 0.3, 10_000)
    >>> bound = log_smoothing_lower_bound(w / w.mean(), r, reward_range=(0, 1))
    >>> bool(0.0 < bound < 0.3)
    True
    """
    level = check_confidence_level(confidence_level)
    w, r, lo, hi = weight_reward_rows(weight, reward, reward_range, "log_smoothing")
    n = w.shape[0]
    span = hi - lo
    if span == 0.0:  # every reward equals lo
        return lo
    lam = smoothing_scale(n, lo, hi)
    # psi / lambda = log1p(x / lambda), x = w (r - lo) >= 0: computed on the unit scale
    mean_log = float(np.mean(np.log1p(w * ((r - lo) / lam))))
    return bound_from_mean_log(mean_log, n, lo, hi, level)


def smoothing_scale(n: int, r_min: float, r_max: float) -> float:
    r"""The bound's scale :math:`\lambda = \sqrt n\,(r_{\max} - r_{\min})` (0 for an empty range)."""
    return math.sqrt(n) * (r_max - r_min)


def bound_from_mean_log(
    mean_log: float, n: int, r_min: float, r_max: float, confidence_level: float
) -> float:
    r"""The lower bound from :math:`\overline{\log(1 + x/\lambda)}` over ``n`` rows (the
    module's formula), with :math:`\lambda` = :func:`smoothing_scale`, capped at ``r_max``: the
    one closing step of :func:`log_smoothing_lower_bound` and of the diagnostics, whose compiled
    pass sums the logarithms with the weight histogram."""
    lam = smoothing_scale(n, r_min, r_max)
    if lam == 0.0:  # every reward equals r_min
        return r_min
    exponent = mean_log - math.log(1.0 / (1.0 - confidence_level)) / n
    # the value lies in the reward range: a bound above it (one row of a huge weight) is
    # capped at r_max, as every interval of ope is intersected with the range
    return min(r_min + max(lam * math.expm1(exponent), 0.0), r_max)


def log_smoothing_interval(
    weight: ArrayLike,
    reward: ArrayLike,
    *,
    reward_range: tuple[float, float] | None,
    confidence_level: float = 0.95,
) -> ConfidenceInterval:
    """The one-sided interval ``[log_smoothing_lower_bound(...), r_max]`` (see the module):
    it covers the value with probability at least ``confidence_level`` and needs no weight
    bound; its upper end is the a priori one.

    Examples
    --------
    >>> from ope.intervals import log_smoothing_interval
    >>> iv = log_smoothing_interval([1.0, 2.0, 0.0, 1.0], [1, 1, 0, 0], reward_range=(0, 1))
    >>> iv.high, bool(0 <= iv.low < 0.75)
    (1.0, True)
    """
    bound = log_smoothing_lower_bound(
        weight, reward, reward_range=reward_range, confidence_level=confidence_level
    )
    _, high = reward_range  # type: ignore[misc]  # checked by the bound
    return ConfidenceInterval(bound, float(high))
