"""The moment kernel: mergeable, centred per-policy moments of importance-weighted rewards.

Every weighting estimate of ope (IPS, clipped IPS, SNIPS, their intervals, the streamed and
distributed paths, the diagnostics, the learner's objective and the safety gate) is a function of
the statistics kept here: for each candidate policy ``j`` the means and centred co-moments of
``(w (r - shift), w)`` over a set of rows, for the raw weights ``w = pi_j(a|x) / pi_0(a|x)`` and
the clipped weights ``min(w, max_weight)``, with the reward's own mean and spread, the largest
weight and the number of clipped rows. Sets of rows merge exactly (Chan, Golub & LeVeque's
pairwise update), so one kernel serves a whole array, each Arrow record batch or each Dask
partition, and no variance is ever formed as a difference of raw sums of squares.

References
----------
.. [1] T. F. Chan, G. H. Golub and R. J. LeVeque, "Updating formulae and a pairwise algorithm for
   computing sample variances", COMPSTAT 1982.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from ope._centered import CenteredMoments, WeightSummary
from ope._kernel import (
    MOMENT_FIELDS,
    N_COMOMENTS,
    Checks,
    Moments,
    accumulate,
    accumulate_outcomes,
)
from ope._thresholds import kish_ess
from ope._validation import check_positive_int, chunks

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "Checks",
    "ComponentMoments",
    "WeightedMoments",
    "grouped_moments",
    "grouped_weighted_moments",
    "weighted_moments",
    "WeightSummary",
    "centered_moments",
    "centered_outcome_moments",
    "component_moments",
    "ratio",
    "skewness",
    "weighted_terms_skewness",
]

#: Rows per chunk of the streaming kernel. 2**18 rows x P policies x 8 bytes keeps each (chunk, P)
#: float64 block at 2 MB per policy: small enough for the L2/L3 cache of common CPUs and for
#: bounded memory, large enough that the per-chunk Python overhead is negligible.
DEFAULT_CHUNK_SIZE: Final = 1 << 18


def ratio(p: np.ndarray, t: np.ndarray) -> np.ndarray:
    """w = t / p in float64; p is (c,), t is (c,) or (c, P)."""
    p64 = p.astype(np.float64, copy=False)
    t64 = t.astype(np.float64, copy=False)
    return t64 / (p64 if t64.ndim == 1 else p64[:, None])


def centered_moments(
    reward: np.ndarray,
    logging_propensity: np.ndarray,
    target_propensity: np.ndarray | Sequence[np.ndarray],
    *,
    max_weight: float | None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> CenteredMoments:
    """Centred moments of the rows (reward (n,), propensities (n,), targets (n, P)).

    ``target_propensity`` may also be a sequence of P columns (e.g. zero-copy views of Arrow
    columns), read as they are. One pass of the kernel (:func:`ope._kernel.accumulate`): each
    block of at most ``min(chunk_size, BLOCK_ROWS)`` rows is centred exactly while it is in
    cache (its means, then the centred sums, both over the block) and merged pairwise; clipped
    moments are formed only for the policies whose weights exceed ``max_weight`` in a block
    (elsewhere ``min(w, max_weight) = w`` and they equal the raw ones exactly). The values are
    not checked here: the result's ``checks`` say what the pass saw (ranges, finiteness), for
    the caller's validation.
    """
    size = check_positive_int(chunk_size, "chunk_size")
    moments, checks = accumulate(
        reward, logging_propensity, target_propensity, max_weight=max_weight, block_rows=size
    )
    mom = CenteredMoments(moments, checks)
    # about the mean reward (exact algebra): w (r - shift) is then of the order of the reward's
    # spread, not of its level, whichever block's shift the pass kept
    return mom.about_mean() if checks.finite else mom


def centered_outcome_moments(
    rewards: Sequence[np.ndarray],
    logging_propensity: np.ndarray,
    target_propensity: np.ndarray | Sequence[np.ndarray],
    *,
    max_weight: float | None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> list[CenteredMoments]:
    """:func:`centered_moments` of each of several outcomes (each (n,)) on the same rows and
    weights, from one pass (:func:`ope._kernel.accumulate_outcomes`: each block's weights are
    formed once); equal to :func:`centered_moments` of each outcome."""
    size = check_positive_int(chunk_size, "chunk_size")
    out = []
    for moments, checks in accumulate_outcomes(  # a loop over outcomes, not rows
        rewards, logging_propensity, target_propensity, max_weight=max_weight, block_rows=size
    ):
        mom = CenteredMoments(moments, checks)
        out.append(mom.about_mean() if checks.finite else mom)
    return out


def grouped_moments(
    reward: np.ndarray,
    logging_propensity: np.ndarray,
    target_propensity: np.ndarray | Sequence[np.ndarray],
    codes: np.ndarray,
    n_groups: int,
    *,
    max_weight: float | None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> tuple[list[CenteredMoments | None], CenteredMoments]:
    """Per group (an int code in ``[0, n_groups)`` per row) and overall, from one pass.

    Returns the moments of each group (None for a group without rows) and of all rows (the
    merge of the groups'), with the pass's ``checks`` on the latter.
    """
    size = check_positive_int(chunk_size, "chunk_size")
    moments, checks = accumulate(
        reward,
        logging_propensity,
        target_propensity,
        max_weight=max_weight,
        block_rows=size,
        codes=codes,
        n_groups=n_groups,
    )
    groups: list[CenteredMoments | None] = [
        CenteredMoments(moments.group(g)) if moments.n[g] > 0 else None for g in range(n_groups)
    ]
    overall: CenteredMoments | None = None
    for part in groups:  # a loop over groups, not rows
        if part is not None:
            overall = part if overall is None else overall.merge(part)
    if overall is None:
        overall = CenteredMoments.empty(moments.n_policies)
    return groups, CenteredMoments(overall.raw, checks)


def weighted_moments(
    reward: np.ndarray,
    logging_propensity: np.ndarray,
    target_propensity: np.ndarray | Sequence[np.ndarray],
    sampling_weight: np.ndarray,
    *,
    max_weight: float | None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    plain: bool = True,
) -> tuple[CenteredMoments, WeightedMoments]:
    """The unweighted and the sampling-weighted statistics of the rows, from one kernel pass.

    ``sampling_weight`` (n,) must be checked already (finite, > 0); the other arrays are those
    of :func:`centered_moments`, not yet checked: the first result's ``checks`` say what the
    pass saw. The unweighted statistics are about the mean reward, the weighted ones about the
    kernel's shift (the estimates do not depend on it). ``plain=False`` skips the unweighted
    means and co-moments (NaN then; the checks, largest weights and clipped counts remain).
    """
    size = check_positive_int(chunk_size, "chunk_size")
    moments, checks = accumulate(
        reward,
        logging_propensity,
        target_propensity,
        max_weight=max_weight,
        block_rows=size,
        sampling_weight=sampling_weight,
        plain=plain,
    )
    weighted = WeightedMoments.from_kernel(moments)
    unweighted = Moments(*(getattr(moments, f) for f in MOMENT_FIELDS))
    mom = CenteredMoments(unweighted, checks)
    return (mom.about_mean() if checks.finite else mom), weighted


def grouped_weighted_moments(
    reward: np.ndarray,
    logging_propensity: np.ndarray,
    target_propensity: np.ndarray | Sequence[np.ndarray],
    sampling_weight: np.ndarray,
    codes: np.ndarray,
    n_groups: int,
    *,
    max_weight: float | None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> tuple[list[WeightedMoments | None], Checks]:
    """The sampling-weighted statistics of each group (an int code in ``[0, n_groups)`` per
    row; None for a group without rows) from one grouped pass of the kernel, and the pass's
    checks. ``sampling_weight`` must be checked already."""
    size = check_positive_int(chunk_size, "chunk_size")
    moments, checks = accumulate(
        reward,
        logging_propensity,
        target_propensity,
        max_weight=max_weight,
        block_rows=size,
        codes=codes,
        n_groups=n_groups,
        sampling_weight=sampling_weight,
    )
    groups = [
        WeightedMoments.from_kernel(moments, g) if moments.n[g] > 0 else None
        for g in range(n_groups)
    ]  # a loop over groups, not rows
    return groups, checks


# --------------------------------------------------------------------------------------------
# the component kernel of the model-based estimators (DM and the doubly robust family)
# --------------------------------------------------------------------------------------------
#: A block of rows -> (components (c, k, P), raw weights (c, P) or None, used weights or None).
Blocks = Callable[[slice], "tuple[np.ndarray, np.ndarray | None, np.ndarray | None]"]


@dataclass(frozen=True, eq=False)
class ComponentMoments:
    """Column means of per-row components and the variance of their influence terms.

    ``means[:, j]`` are the means of the ``k`` components of policy ``j``, ``psi_var[j]`` the
    unbiased variance of the influence terms ``psi_i = grad g(mean) . (A_i - mean)``,
    ``psi_skew[j]`` their sample skewness (:func:`skewness`, from the same pass) and
    ``weight_sums[:, j]`` (when the estimator weights rows) ``sum w, sum w^2`` of the raw and
    then of the used weights.
    """

    n: int
    means: np.ndarray  # (k, P)
    psi_var: np.ndarray  # (P,)
    weight_sums: np.ndarray | None  # (4, P)
    psi_skew: np.ndarray | None = None  # (P,)

    def weight_summary(self, j: int) -> WeightSummary:
        """The warning rules' view of policy ``j``'s weights (needs ``weight_sums``)."""
        assert self.weight_sums is not None
        s_raw, s_raw2, s_used, s_used2 = (float(x) for x in self.weight_sums[:, j])
        n = float(self.n)
        return WeightSummary(
            n=self.n,
            mean=s_raw / n,
            variance=max((s_raw2 - s_raw * s_raw / n) / (n - 1.0), 0.0),
            ess=kish_ess(s_used, s_used2),
            raw_zero=s_raw2 == 0.0,
            used_zero=s_used2 == 0.0,
            changed=(s_used, s_used2) != (s_raw, s_raw2),
        )


def component_moments(
    blocks: Blocks,
    n: int,
    gradient: Callable[[np.ndarray], np.ndarray],
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> ComponentMoments:
    """Means and influence-term variance (and skewness) of the components produced by ``blocks``.

    Two chunked passes: the first gives the column means (and the weight sums), the second the
    exact centred sums of squared and cubed influence terms ``psi = gradient(mean) . (A -
    mean)`` (whose mean is zero), which stay exact (e.g. 0) where a one-pass sum-of-squares
    formula would cancel. Only the value of
    a ratio estimator with all weights zero is undefined; its gradient is then inf/NaN, computed
    silently (the caller raises on the weights).
    """
    s1: np.ndarray | None = None
    wsum: np.ndarray | None = None
    for sl in chunks(n, chunk_size):  # loop over blocks, not rows
        a, raw, used = blocks(sl)
        part = np.einsum("ckp->kp", a)
        s1 = part if s1 is None else s1 + part
        if raw is not None and used is not None:
            sums = np.empty((4, raw.shape[1]))
            np.einsum("ip->p", raw, out=sums[0])
            np.einsum("ip,ip->p", raw, raw, out=sums[1])
            if used is raw:  # the estimator uses the raw weights (DR): the same sums
                sums[2:] = sums[:2]
            else:
                np.einsum("ip->p", used, out=sums[2])
                np.einsum("ip,ip->p", used, used, out=sums[3])
            wsum = sums if wsum is None else wsum + sums
    assert s1 is not None
    means = s1 / n
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # a cube may overflow
        grad = np.stack([gradient(means[:, j]) for j in range(means.shape[1])], axis=1)  # (k, P)
        ss = np.zeros(means.shape[1])
        s3 = np.zeros(means.shape[1])
        one = means.shape[0] == 1 and bool(np.all(grad == 1.0))
        for sl in chunks(n, chunk_size):
            if one:  # one component, taken as it is (DR and its kin): psi = A - mean
                psi = np.subtract(blocks(sl)[0][:, 0, :], means[0])
            else:
                psi = np.einsum("ckp,kp->cp", blocks(sl)[0] - means[None], grad)
            sq = psi * psi
            ss += np.einsum("cp->p", sq)
            s3 += np.einsum("cp,cp->p", sq, psi)
        skew = _skewness_of_sums(n, ss, s3)
    return ComponentMoments(n, means, ss / (n - 1), wsum, skew)


def _skewness_of_sums(n: int, s2: np.ndarray, s3: np.ndarray) -> np.ndarray:
    """``g = m3 / m2**1.5`` from the centred sums ``s2 = sum d^2`` and ``s3 = sum d^3`` of ``n``
    terms (0 where the terms do not vary: a constant has no skew)."""
    m2 = np.asarray(s2, dtype=np.float64) / n
    m3 = np.asarray(s3, dtype=np.float64) / n
    with np.errstate(divide="ignore", invalid="ignore"):
        g = np.where(m2 > 0, m3 / np.where(m2 > 0, m2, 1.0) ** 1.5, 0.0)
    return g


def skewness(x: npt.ArrayLike, axis: int = 0) -> np.ndarray | float:
    """Sample skewness ``g = m3 / m2**1.5`` (``m_k`` the mean of ``(x - mean)**k``) along
    ``axis``, from the exactly centred terms (two passes); 0 where the terms do not vary.

    The moment estimator of the standardized third moment (``scipy.stats.skew`` with
    ``bias=True``). It is what the skewed-terms rule of the estimators reads
    (:func:`ope._thresholds.skewed_terms`): with ``n`` independent terms of skewness ``g``,
    the central limit theorem's normal interval of their mean needs about ``SKEW_MIN_ROWS +
    SKEW_ROWS * g**2`` of them.

    Examples
    --------
    >>> from ope.moments import skewness
    >>> round(float(skewness([0.0, 0.0, 0.0, 1.0])), 12)
    1.154700538379
    >>> float(skewness([2.0, 2.0]))
    0.0
    """
    a = np.asarray(x, dtype=np.float64)
    n = a.shape[axis]
    with np.errstate(over="ignore", invalid="ignore"):
        d = a - a.mean(axis=axis, keepdims=True)
        # scale-free: the deviations in units of the largest, so no cube overflows
        top = np.max(np.abs(d), axis=axis, keepdims=True) if n else np.zeros_like(d)
        d = d / np.where(top > 0, top, 1.0)
        sq = d * d
        g = _skewness_of_sums(n, sq.sum(axis=axis), (sq * d).sum(axis=axis))
    return float(g) if g.ndim == 0 else g


# --------------------------------------------------------------------------------------------
# mergeable statistics of rows with sampling weights (streamed and distributed paths)
# --------------------------------------------------------------------------------------------
#: Components per policy of :class:`WeightedMoments`: ``s, s (r - c), s w (r - c), s w,
#: s wc (r - c), s wc`` (``w`` the raw, ``wc`` the clipped weight, ``c`` the reward shift).
N_WEIGHTED: Final = 6

#: The co-moments of :class:`WeightedMoments` the kernel accumulates (all that the estimates and
#: the weight summaries read): within ``(s, s (r - c))``, within ``(s, s w (r - c), s w)`` and
#: within ``(s, s wc (r - c), s wc)``. The others (e.g. raw with clipped) are NaN.
_ACCUMULATED: Final = np.zeros((N_WEIGHTED, N_WEIGHTED, 1), dtype=bool)
for _block in ((0, 1), (0, 2, 3), (0, 4, 5)):
    _ACCUMULATED[np.ix_(_block, _block, (0,))] = True
del _block


def _masked(com: np.ndarray) -> np.ndarray:
    """``com`` with the entries the kernel does not accumulate set to NaN."""
    return np.where(_ACCUMULATED, com, np.nan)


@dataclass(frozen=True, eq=False)
class WeightedMoments:
    """Means and centred co-moments of the sampling-weighted components of every policy.

    For rows with sampling weights ``s`` the weighting estimates are ratios of means of the
    components ``u = (s, s (r - c), s w (r - c), s w, s wc (r - c), s wc)`` of each policy
    (``wc = min(w, max_weight)``; ``c`` a reward shift that keeps the components of the order of
    the rewards' spread): IPS is ``(u2 + c u3) / u0``, SNIPS ``c + u2 / u3``, the logging value
    ``c + u1 / u0`` (:meth:`estimate`). ``mean`` (6, P) and ``com`` (6, 6, P), the centred sums of products,
    merge exactly by Chan, Golub & LeVeque's update after re-expressing both sides about one
    shift (a linear map of the components), so batches, record batches and Dask partitions give
    the eager numbers to rounding.

    Attributes
    ----------
    n : int
        Rows.
    shift : float
        The reward shift ``c``.
    mean, com : numpy.ndarray
        (6, P) means and (6, 6, P) centred sums of products of the components; the products
        the estimates never read (raw with clipped components, ``s (r - c)`` with a policy's)
        are not accumulated and are NaN.
    max_w, n_clipped : numpy.ndarray
        (P,) largest raw weight and rows whose weight exceeds ``max_weight``.
    s_min, s_max : float
        Smallest and largest sampling weight (both 1: every row was kept for sure, and the
        estimates are the unweighted ones).

    Examples
    --------
    >>> import numpy as np
    >>> from ope.moments import WeightedMoments
    >>> r, s = np.array([1.0, 0.0, 1.0, 1.0]), np.array([1.0, 2.0, 1.0, 4.0])
    >>> w = np.array([[2.0], [2.0], [1.0], [0.0]])   # importance weights of one policy
    >>> whole = WeightedMoments.from_arrays(r, w, s, max_weight=None)
    >>> parts = WeightedMoments.from_arrays(r[:2], w[:2], s[:2], max_weight=None).merge(
    ...     WeightedMoments.from_arrays(r[2:], w[2:], s[2:], max_weight=None))
    >>> round(whole.estimate("ips", 0)[0], 12), round(parts.estimate("ips", 0)[0], 12)  # 3 / 8
    (0.375, 0.375)
    >>> whole.sum_weights()
    8.0
    """

    n: int
    shift: float
    mean: np.ndarray
    com: np.ndarray
    max_w: np.ndarray
    n_clipped: np.ndarray
    s_min: float = math.inf
    s_max: float = -math.inf

    @property
    def unit(self) -> bool:
        """Every sampling weight is 1."""
        return self.s_min == 1.0 and self.s_max == 1.0

    @classmethod
    def from_arrays(
        cls,
        reward: np.ndarray,
        weight: np.ndarray,
        sampling_weight: np.ndarray,
        *,
        max_weight: float | None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
    ) -> WeightedMoments:
        """Statistics of validated float64 rows: rewards (n,), importance weights (n, P)
        and sampling weights (n,); one pass of the moment kernel (the weights are read as
        targets over logging propensities of 1)."""
        n = int(reward.shape[0])
        moments, _ = accumulate(
            reward,
            np.ones(n),
            weight,
            max_weight=max_weight,
            sampling_weight=sampling_weight,
            block_rows=check_positive_int(chunk_size, "chunk_size"),
        )
        return cls.from_kernel(moments)

    @classmethod
    def from_kernel(cls, moments: Moments, group: int = 0) -> WeightedMoments:
        """The statistics of group ``group`` of a kernel pass given sampling weights
        (:class:`ope._kernel.Weighted`, laid out as the six components)."""
        wt = moments.weighted
        assert wt is not None, "the kernel pass had no sampling weights"
        g = group
        p0 = int(moments.mean.shape[-1])
        n_pol = max(p0, 1)  # a pass without policies (the logging value): one of zero weights
        h = wt.head[g]
        mean = np.zeros((N_WEIGHTED, n_pol))
        mean[0], mean[1] = h[0], h[1]
        com = np.full((N_WEIGHTED, N_WEIGHTED, n_pol), np.nan)
        pairs = [((0, 0), h[2]), ((0, 1), h[3]), ((1, 1), h[4])]
        for k, (a, b) in enumerate(((2, 3), (4, 5))):  # raw, then clipped components
            c = wt.com[g, k] if p0 else np.zeros((N_COMOMENTS, 1))
            pairs += [
                ((a, a), c[0]),
                ((a, b), c[1]),
                ((b, b), c[2]),
                ((0, a), c[3]),
                ((0, b), c[4]),
            ]
            if p0:
                mean[a : b + 1] = wt.mean[g, k]
        for (a, b), v in pairs:  # a loop over the 13 accumulated entries
            com[a, b] = com[b, a] = v
        n = int(moments.n[g])
        lo, hi = (float(x) for x in wt.s_range[g])
        max_w = moments.max_w[g].copy() if p0 else np.full(1, -np.inf)
        n_clipped = moments.n_clipped[g].copy() if p0 else np.zeros(1)
        return cls(n, float(moments.shift[g]), mean, com, max_w, n_clipped, lo, hi)

    def shifted(self, shift: float) -> WeightedMoments:
        """The same statistics about another reward shift (``u -> T u``, exact algebra)."""
        d = self.shift - float(shift)  # r - shift' = (r - shift) + d
        if d == 0.0:
            return self
        t = np.eye(N_WEIGHTED)
        t[1, 0] = t[2, 3] = t[4, 5] = d
        mean = np.einsum("kl,lp->kp", t, self.mean)
        # T keeps the accumulated entries among themselves (each needs only accumulated ones)
        com = np.einsum("ka,abp,lb->klp", t, np.where(_ACCUMULATED, self.com, 0.0), t)
        return WeightedMoments(
            self.n,
            float(shift),
            mean,
            _masked(com),
            self.max_w,
            self.n_clipped,
            self.s_min,
            self.s_max,
        )

    def merge(self, other: WeightedMoments) -> WeightedMoments:
        """Statistics of the union of two disjoint sets of rows."""
        if other.n == 0:
            return self
        if self.n == 0:
            return other
        b = other.shifted(self.shift)
        n = self.n + b.n
        delta = b.mean - self.mean
        mean = self.mean + delta * (b.n / n)
        com = self.com + b.com + np.einsum("kp,lp->klp", delta, delta) * (self.n * b.n / n)
        return WeightedMoments(
            n,
            self.shift,
            mean,
            _masked(com),
            np.maximum(self.max_w, b.max_w),
            self.n_clipped + b.n_clipped,
            min(self.s_min, b.s_min),
            max(self.s_max, b.s_max),
        )

    @property
    def n_policies(self) -> int:
        return int(self.mean.shape[1])

    def sum_weights(self) -> float:
        """``sum s``: the estimated size of the logged population."""
        return float(self.n * self.mean[0, 0])

    def estimate(self, kind: str, j: int, *, origin: float = 0.0) -> tuple[float, float]:
        """Value and standard deviation of the influence terms of policy ``j``.

        ``kind``: ``"ips"`` (``sum s w r / sum s``), ``"snips"`` (``sum s w r / sum s w``),
        ``"clipped_ips"`` (``origin + sum s wc (r - origin) / sum s``) or ``"logging"``
        (``sum s r / sum s``). The deviation is ``sqrt(grad' C grad / (n - 1))`` for the
        gradient of the ratio at the means: the delta method, as for the eager rows.
        """
        m = self.mean[:, j]
        c = np.where(_ACCUMULATED[:, :, 0], self.com[:, :, j], 0.0)  # g is 0 elsewhere
        k = self.shift - origin  # r - origin = (r - shift) + k
        g = np.zeros(N_WEIGHTED)
        if kind == "ips":  # origin 0: sum s w r / sum s = (u2 + shift u3) / u0
            num, den = m[2] + k * m[3], m[0]
            g[2], g[3] = 1.0 / den, k / den
            value = origin + num / den
            g[0] = -num / den**2
        elif kind == "clipped_ips":
            num, den = m[4] + k * m[5], m[0]
            g[4], g[5] = 1.0 / den, k / den
            value = origin + num / den
            g[0] = -num / den**2
        elif kind == "snips":
            num, den = m[2], m[3]
            value = self.shift + num / den if den != 0 else math.nan
            g[2], g[3] = 1.0 / den, -num / den**2
        else:  # logging
            num, den = m[1], m[0]
            value = self.shift + num / den
            g[1], g[0] = 1.0 / den, -num / den**2
        q = float(g @ c @ g)
        sd = math.sqrt(max(q, 0.0) / (self.n - 1.0)) if self.n > 1 else math.nan
        return float(value), sd

    def weight_summary(self, j: int, *, clipped: bool) -> WeightSummary:
        """The warning rules' view of policy ``j``: the Hajek mean of the raw weights and its
        linearized variance (times n), the Kish ESS of ``s w`` (or ``s wc``) and, as the
        reference, the Kish ESS of ``s``."""
        n = float(self.n)
        m, c = self.mean[:, j], self.com[:, :, j]
        s1, s2 = n * m[0], c[0, 0] + n * m[0] * m[0]
        raw2 = c[3, 3] + n * m[3] * m[3]
        u = 5 if clipped else 3
        used1, used2 = n * m[u], c[u, u] + n * m[u] * m[u]
        mean_w = m[3] / m[0]
        q = c[3, 3] - 2.0 * mean_w * c[0, 3] + mean_w * mean_w * c[0, 0]
        lin_var = max(q, 0.0) / (n * m[0]) ** 2 * (n / (n - 1.0))
        return WeightSummary(
            n=self.n,
            mean=float(mean_w),
            variance=float(n * lin_var),
            ess=kish_ess(float(used1), float(used2)),
            raw_zero=raw2 == 0.0,
            used_zero=used2 == 0.0,
            changed=clipped and bool(self.n_clipped[j] > 0),
            reference=kish_ess(float(s1), float(s2)),
        )


def weighted_terms_skewness(
    logging_propensity: np.ndarray,
    target_propensity: np.ndarray,
    reward: np.ndarray,
    *,
    max_weight: float | None = None,
    shift: float = 0.0,
) -> float:
    """:func:`skewness` of the terms ``w (r - shift)``, ``w = t / p`` (``min(w, max_weight)``
    when given), without forming them: two passes over the three columns (compiled with the
    numba backend; else numpy on the formed terms). The terms of IPS (``shift = 0``), clipped
    IPS (``shift = r_lo``) and SNIPS (``shift = V``) up to a positive factor and a shift.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.moments import skewness, weighted_terms_skewness
    >>> p, t, r = np.full(4, 0.5), np.array([1.0, 0.0, 0.5, 1.0]), np.array([1.0, 0, 1, 0])
    >>> bool(np.isclose(weighted_terms_skewness(p, t, r), skewness(t / p * r)))
    True
    """
    from ope._kernel import compiled_loops

    clip = -1.0 if max_weight is None else float(max_weight)
    loops = compiled_loops(__name__, (_nb_terms_skewness,))
    if loops is None:
        w = ratio(logging_propensity, target_propensity)
        if clip >= 0:
            w = np.minimum(w, clip)
        return float(skewness(w * (reward - shift)))
    return float(
        loops["_nb_terms_skewness"](
            logging_propensity, target_propensity, reward, clip, float(shift)
        )
    )


def _nb_terms_skewness(p, t, r, clip, shift):  # pragma: no cover - compiled by numba
    """Two passes: the mean and the largest and smallest term, then the sums of the squared
    and cubed deviations in units of the largest one (no cube overflows)."""
    n = r.shape[0]
    total = 0.0
    hi = -np.inf
    lo = np.inf
    for i in range(n):
        w = t[i] / p[i]
        if clip >= 0.0 and w > clip:
            w = clip
        x = w * (r[i] - shift)
        total += x
        hi = max(hi, x)
        lo = min(lo, x)
    mean = total / n
    top = max(hi - mean, mean - lo)
    if not top > 0.0:
        return 0.0
    s2 = 0.0
    s3 = 0.0
    for i in range(n):
        w = t[i] / p[i]
        if clip >= 0.0 and w > clip:
            w = clip
        d = (w * (r[i] - shift) - mean) / top
        d2 = d * d
        s2 += d2
        s3 += d2 * d
    m2 = s2 / n
    return (s3 / n) / m2**1.5
