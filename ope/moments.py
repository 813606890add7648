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
from typing import Any, Final

import numpy as np

from ope._kernel import N_COMOMENTS, Checks, Moments, accumulate
from ope._kernel import empty as empty_moments
from ope._kernel import merge as merge_moments
from ope._thresholds import kish_ess
from ope._validation import check_positive_int, chunks

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "CenteredMoments",
    "Checks",
    "ComponentMoments",
    "WeightedMoments",
    "grouped_moments",
    "grouped_weighted_moments",
    "weighted_moments",
    "WeightSummary",
    "centered_moments",
    "component_moments",
    "ratio",
]

#: Rows per chunk of the streaming kernel. 2**18 rows x P policies x 8 bytes keeps each (chunk, P)
#: float64 block at 2 MB per policy: small enough for the L2/L3 cache of common CPUs and for
#: bounded memory, large enough that the per-chunk Python overhead is negligible.
DEFAULT_CHUNK_SIZE: Final = 1 << 18

#: Relative rounding floor of a variance formed from centred co-moments,
#: ``caa + 2 x cab + x^2 cbb``: each co-moment carries a relative rounding error of a few ulps, so
#: a result below 16 eps times the magnitude of its terms is indistinguishable from 0 (e.g. the
#: spread of SNIPS's influence terms when every weighted row has the same reward) and is 0.
_ROUNDING_FLOOR: Final = 16.0 * float(np.finfo(np.float64).eps)


def _quadratic(caa: float, cab: float, cbb: float, x: float) -> float:
    """``caa + 2 x cab + x^2 cbb`` (the centred sum of squares of ``a + x b``), floored at 0."""
    q = caa + 2.0 * x * cab + x * x * cbb
    return float(q) if q > _ROUNDING_FLOOR * (caa + 2.0 * abs(x * cab) + x * x * cbb) else 0.0


def ratio(p: np.ndarray, t: np.ndarray) -> np.ndarray:
    """w = t / p in float64; p is (c,), t is (c,) or (c, P)."""
    p64 = p.astype(np.float64, copy=False)
    t64 = t.astype(np.float64, copy=False)
    return t64 / (p64 if t64.ndim == 1 else p64[:, None])


# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class WeightSummary:
    """What the warning rules (:mod:`ope._thresholds`) read about one policy's weights.

    Attributes
    ----------
    n : int
        Rows.
    mean, variance : float
        Mean and unbiased variance of the raw weights (the mean-weight check).
    ess : float
        Kish effective sample size of the weights the estimator uses (raw, clipped, switched or
        shrunk).
    raw_zero, used_zero : bool
        Every raw weight, or every weight used, is zero.
    changed : bool
        The weights used differ from the raw ones (some were clipped, switched or shrunk).
    reference : float or None
        What ``ess`` is compared with: None for ``n``; for rows with sampling weights ``s``, the
        Kish ESS of ``s`` alone, ``(sum s)^2 / sum s^2`` (``ess`` is then the Kish ESS of the
        products ``s w``, ``mean`` the weighted mean ``sum s w / sum s`` and ``variance`` ``n``
        times the linearized variance of that ratio).
    """

    n: int
    mean: float
    variance: float
    ess: float
    raw_zero: bool
    used_zero: bool
    changed: bool
    reference: float | None = None


def _units(exponent: Any) -> Any:
    """2**exponent (elementwise), for the kernel's integer-valued float exponents."""
    return np.ldexp(1.0, np.asarray(exponent).astype(np.int64))


def _floored(q: float, scale: float) -> float:
    """``q`` floored at 0 below the rounding floor of its terms (``scale``: their magnitude)."""
    return float(q) if q > _ROUNDING_FLOOR * scale else 0.0


@dataclass(frozen=True, eq=False)
class CenteredMoments:
    """Shifted and centred per-policy moments of ``(w (r - shift), w)`` over a set of rows.

    A view of one group of the kernel's statistics (:class:`ope._kernel.Moments`): for each
    policy ``j`` and ``s = 0`` (raw weights) or ``1`` (clipped weights ``min(w, max_weight)``),
    the means of ``a = w (r - shift)`` and ``b = w``, their centred co-moments and their
    cross-moments with the reward, held in units of powers of two so that rewards near 1.8e308
    and weights up to 1e150 stay finite (:mod:`ope._kernel`). ``mean`` and ``comoment`` give
    the means and centred sums ``sum (a - abar)^2, sum (a - abar)(b - bbar), sum (b - bbar)^2``
    in real units (equal to the stored ones for ordinary data); the estimators read the
    ``*_sd`` methods, which never form a variance that float64 cannot hold. Sets merge by the
    pairwise update of Chan, Golub & LeVeque (1982) after re-expressing both at a common shift
    and unit, so no variance is ever formed as a difference of raw sums of squares.
    """

    raw: Moments  # one group
    #: what the pass saw of its inputs (None for merged or derived statistics)
    checks: Checks | None = None

    @classmethod
    def empty(cls, n_pol: int, shift: float = 0.0) -> CenteredMoments:
        m = empty_moments(n_pol)
        m.shift[0] = float(shift)
        return cls(m)

    # ---- the stored statistics -------------------------------------------------------------
    @property
    def n(self) -> int:
        return int(self.raw.n[0])

    @property
    def shift(self) -> float:
        return float(self.raw.shift[0])

    @property
    def max_w(self) -> np.ndarray:
        return self.raw.max_w[0]

    @property
    def n_clipped(self) -> np.ndarray:
        return self.raw.n_clipped[0]

    @property
    def r_unit(self) -> float:
        """The reward unit ``u_r`` (a power of two; 1 for rewards within 2**+-200)."""
        return math.ldexp(1.0, int(self.raw.r_exp[0]))

    @property
    def w_unit(self) -> np.ndarray:
        """The weight units ``u_w`` (2, P) of the raw and clipped weights."""
        return _units(self.raw.w_exp[0])

    @property
    def mean(self) -> np.ndarray:
        """Means (2, 2, P) of ``a`` and ``b`` in real units (may be inf for extreme data)."""
        m = self.raw.mean[0]
        if not self.raw.w_exp.any() and not self.raw.r_exp.any():
            return m
        uw = self.w_unit
        with np.errstate(over="ignore"):
            return np.stack([m[:, 0] * uw * self.r_unit, m[:, 1] * uw], axis=1)

    @property
    def comoment(self) -> np.ndarray:
        """Centred sums (2, 3, P) ``aa, ab, bb`` in real units (may be inf for extreme data)."""
        c = self.raw.com[0]
        if not self.raw.w_exp.any() and not self.raw.r_exp.any():
            return c[:, :3]
        uw, ur = self.w_unit, self.r_unit
        with np.errstate(over="ignore"):
            return np.stack([c[:, 0] * (uw * ur) ** 2, c[:, 1] * uw * uw * ur,
                             c[:, 2] * uw * uw], axis=1)

    def column(self, j: int) -> CenteredMoments:
        """The statistics of policy ``j`` alone (views, no copies)."""
        m, sl = self.raw, slice(j, j + 1)
        return CenteredMoments(Moments(
            m.n, m.shift, m.r_exp, m.r_mean, m.r_m2, m.w_exp[..., sl], m.mean[..., sl],
            m.com[..., sl], m.max_w[..., sl], m.n_clipped[..., sl],
        ))

    @property
    def r_mean(self) -> float:
        """Mean of ``r - shift`` (real units)."""
        return float(self.raw.r_mean[0]) * self.r_unit

    @property
    def r_m2(self) -> float:
        """Centred sum of squares of the rewards (real units; may be inf for extreme data)."""
        return _times(float(self.raw.r_m2[0]), self.r_unit, self.r_unit)

    def about_mean(self) -> CenteredMoments:
        """The same statistics about the mean reward (the shift that conditions them best)."""
        if self.n == 0:
            return self
        new = self.shifted(self.shift + float(self.raw.r_mean[0]) * self.r_unit)
        return CenteredMoments(new.raw, self.checks)

    def shifted(self, shift: float) -> CenteredMoments:
        """The same statistics expressed about another reward shift (exact algebra)."""
        m = self.raw
        ur = self.r_unit
        d = self.shift / ur - float(shift) / ur
        if d == 0.0 or self.n == 0:
            return CenteredMoments(Moments(
                m.n, np.array([float(shift)]), m.r_exp, m.r_mean + d if self.n else m.r_mean,
                m.r_m2, m.w_exp, m.mean, m.com, m.max_w, m.n_clipped,
            ))
        # a' = w (r - shift') = a + d b: means move by d * mean b, co-moments by T C T^T
        mean = m.mean.copy()
        mean[:, :, 0] += d * m.mean[:, :, 1]
        c = m.com
        com = np.stack([c[:, :, 0] + 2.0 * d * c[:, :, 1] + d * d * c[:, :, 2],
                        c[:, :, 1] + d * c[:, :, 2], c[:, :, 2],
                        c[:, :, 3] + d * c[:, :, 4], c[:, :, 4]], axis=2)
        return CenteredMoments(Moments(
            m.n, np.array([float(shift)]), m.r_exp, m.r_mean + d, m.r_m2, m.w_exp, mean, com,
            m.max_w, m.n_clipped,
        ))

    def merge(self, other: CenteredMoments) -> CenteredMoments:
        """Moments of the union of two disjoint sets of rows (Chan et al.'s pairwise update)."""
        if other.n == 0:
            return self
        if self.n == 0:
            return other
        # keep the shift of the larger part; the other is re-expressed about it
        a, b = (self, other) if self.n >= other.n else (other, self)
        return CenteredMoments(merge_moments(a.raw, b.raw))

    # ---- per-policy summaries in units (never overflowing) ---------------------------------
    def product_mean_sd(self, j: int, *, clipped: bool, about: float) -> tuple[float, float]:
        """Mean and standard deviation (unbiased variance's root) of ``w (r - about)``.

        Computed in the statistics' units, so the deviation is finite whenever it is
        representable (its variance may not be).
        """
        s = int(clipped)
        m = self.raw
        ur = self.r_unit
        uw = math.ldexp(1.0, int(m.w_exp[0, s, j]))
        d = self.shift / ur - float(about) / ur
        ma, mb = float(m.mean[0, s, 0, j]), float(m.mean[0, s, 1, j])
        caa, cab, cbb = (float(x) for x in m.com[0, s, :3, j])
        q = _quadratic(caa, cab, cbb, d)
        sd = math.sqrt(q / (self.n - 1.0)) if self.n > 1 else math.nan
        return _times(ma + d * mb, uw, ur), _times(sd, uw, ur)

    def product_mean_var(self, j: int, *, clipped: bool, about: float) -> tuple[float, float]:
        """Mean and unbiased variance of ``w (r - about)``."""
        mean, sd = self.product_mean_sd(j, clipped=clipped, about=about)
        return mean, _square(sd)

    def weight_mean_var(self, j: int, *, clipped: bool) -> tuple[float, float]:
        """Mean and unbiased variance of the (raw or clipped) weights."""
        s = int(clipped)
        m = self.raw
        uw = math.ldexp(1.0, int(m.w_exp[0, s, j]))
        return (float(m.mean[0, s, 1, j]) * uw,
                _square(math.sqrt(float(m.com[0, s, 2, j]) / (self.n - 1.0)) * uw))

    def ratio_mean_sd(self, j: int, *, clipped: bool) -> tuple[float, float]:
        """Self-normalized mean ``sum w r / sum w`` and the standard deviation of its
        influence terms ``w (r - V) / mean w`` (the delta method)."""
        s = int(clipped)
        m = self.raw
        ur = self.r_unit
        ma, mb = float(m.mean[0, s, 0, j]), float(m.mean[0, s, 1, j])
        caa, cab, cbb = (float(x) for x in m.com[0, s, :3, j])
        if mb == 0.0:  # every weight zero: undefined (the caller raises on the weights)
            return math.nan, math.nan
        v = ma / mb
        q = _quadratic(caa, cab, cbb, -v)
        sd = math.sqrt(q / (self.n - 1.0)) / abs(mb) if self.n > 1 else math.nan
        e_r = int(self.raw.r_exp[0])
        return _scaled(self.shift / ur + v, e_r), _scaled(sd, e_r)

    def ratio_mean_var(self, j: int, *, clipped: bool) -> tuple[float, float]:
        """Self-normalized mean ``sum w r / sum w`` and the unbiased variance of its influence
        terms ``w (r - V) / mean w`` (the delta method)."""
        value, sd = self.ratio_mean_sd(j, clipped=clipped)
        return value, _square(sd)

    def reward_mean_sd(self) -> tuple[float, float]:
        """Mean and standard deviation of the rewards."""
        ur = self.r_unit
        m = self.raw
        sd = math.sqrt(float(m.r_m2[0]) / (self.n - 1.0)) if self.n > 1 else math.nan
        e_r = int(m.r_exp[0])
        return _scaled(self.shift / ur + float(m.r_mean[0]), e_r), _scaled(sd, e_r)

    def reward_mean_var(self) -> tuple[float, float]:
        """Mean and unbiased variance of the rewards."""
        mean, sd = self.reward_mean_sd()
        return mean, _square(sd)

    def reward_sums(self) -> tuple[float, float]:
        """``sum r`` and ``sum r^2``, derived from the reward's mean and centred sum of squares."""
        mean = self.reward_mean_sd()[0] if self.n else 0.0
        ur = self.r_unit
        with np.errstate(over="ignore"):
            return (float(self.n * mean),
                    float(float(self.raw.r_m2[0]) * ur * ur + self.n * mean * mean))

    def weight_sums(self, j: int, *, clipped: bool) -> tuple[float, float]:
        """``sum w`` and ``sum w^2`` (for the Kish ESS and the mean-weight check)."""
        s = int(clipped)
        m = self.raw
        uw = math.ldexp(1.0, int(m.w_exp[0, s, j]))
        mb = float(m.mean[0, s, 1, j])
        return (float(self.n * mb * uw),
                float((float(m.com[0, s, 2, j]) + self.n * mb * mb) * uw * uw))

    def ess(self, j: int, *, clipped: bool) -> float:
        """Kish's effective sample size of the (raw or clipped) weights (unit-free)."""
        s = int(clipped)
        m = self.raw
        mb = float(m.mean[0, s, 1, j])
        return kish_ess(self.n * mb, float(m.com[0, s, 2, j]) + self.n * mb * mb)

    def weight_summary(self, j: int, *, clipped: bool) -> WeightSummary:
        """The raw weights' mean and variance and the ESS of the weights used (clipped or not)."""
        _, s_raw2 = self.weight_sums(j, clipped=False)
        _, s_used2 = self.weight_sums(j, clipped=clipped)
        mean, var = self.weight_mean_var(j, clipped=False)
        return WeightSummary(
            n=self.n,
            mean=mean,
            variance=var,
            ess=self.ess(j, clipped=clipped),
            raw_zero=s_raw2 == 0.0,
            used_zero=s_used2 == 0.0,
            changed=clipped and bool(self.n_clipped[j] > 0),
        )

    def paired_sd(self, j: int, *, kind: str, clipped: bool, about: float = 0.0) -> float:
        """Standard deviation of a weighting estimate's influence terms minus the reward's
        (the paired difference of policy ``j`` and the logging value), from the cross-moments.

        ``kind`` is ``"product"`` (IPS and clipped IPS: the terms ``w (r - about)``) or
        ``"ratio"`` (SNIPS: ``w (r - V) / mean w``). The same number as the sample standard
        deviation of the per-row differences, without a pass over the rows.
        """
        s = int(clipped)
        m = self.raw
        e_r = int(m.r_exp[0])
        ur = self.r_unit
        ma, mb = float(m.mean[0, s, 0, j]), float(m.mean[0, s, 1, j])
        caa, cab, cbb, car, cbr = (float(x) for x in m.com[0, s, :, j])
        if kind != "product" and mb == 0.0:
            return math.nan
        if kind == "product":  # the terms a + d b, in units 2**(e_w + e_r)
            alpha, beta = 1.0, self.shift / ur - float(about) / ur
            e_t = int(m.w_exp[0, s, j]) + e_r
        else:  # (a - v b) / mb, in units 2**e_r
            alpha, beta = 1.0 / mb, -(ma / mb) / mb
            e_t = e_r
        # both terms in the larger of their units
        e_top = max(e_t, e_r)
        ft, fr = math.ldexp(1.0, e_t - e_top), math.ldexp(1.0, e_r - e_top)
        q_t = alpha * alpha * caa + 2.0 * alpha * beta * cab + beta * beta * cbb
        c_tr = alpha * car + beta * cbr
        r_m2 = float(m.r_m2[0])
        q = ft * ft * q_t + fr * fr * r_m2 - 2.0 * ft * fr * c_tr
        q = _floored(q, ft * ft * abs(q_t) + fr * fr * r_m2 + 2.0 * ft * fr * abs(c_tr))
        return _scaled(math.sqrt(q / (self.n - 1.0)), e_top)

    def raw_sums(self, j: int) -> dict[str, float]:
        """The raw sums of :data:`MOMENT_KEYS` for policy ``j``, derived from the moments."""
        out: dict[str, float] = {}
        n, c = float(self.n), self.shift
        mean, com = self.mean, self.comoment
        with np.errstate(over="ignore", invalid="ignore"):
            for s, pre in ((0, ""), (1, "c")):
                ma, mb = mean[s, 0, j], mean[s, 1, j]
                caa, cab, cbb = com[s, :, j]
                s_w2 = cbb + n * mb * mb
                s_w2rs = cab + n * ma * mb  # sum w^2 (r - c)
                s_w2rs2 = caa + n * ma * ma  # sum w^2 (r - c)^2
                out[f"sum_{pre}w"] = float(n * mb)
                out[f"sum_{pre}w2"] = float(s_w2)
                out[f"sum_{pre}wr"] = float(n * (ma + c * mb))
                out[f"sum_{pre}w2r"] = float(s_w2rs + c * s_w2)
                out[f"sum_{pre}w2r2"] = float(s_w2rs2 + 2.0 * c * s_w2rs + c * c * s_w2)
        out["max_w"] = float(self.max_w[j])
        out["n_clipped"] = float(self.n_clipped[j])
        return out


def _scaled(x: float, exponent: float) -> float:
    """``x * 2**exponent`` (inf when not representable, never an exception)."""
    with np.errstate(over="ignore", under="ignore"):
        return float(np.ldexp(np.float64(x), int(exponent)))


def _times(x: float, u: float, v: float) -> float:
    """``x * u * v`` for a value in units ``u * v`` (powers of two)."""
    return _scaled(x, math.frexp(u)[1] - 1 + math.frexp(v)[1] - 1)


def _square(x: float) -> float:
    with np.errstate(over="ignore"):
        return float(np.float64(x) * np.float64(x))


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
        reward, logging_propensity, target_propensity, max_weight=max_weight, block_rows=size,
        codes=codes, n_groups=n_groups,
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
        reward, logging_propensity, target_propensity, max_weight=max_weight, block_rows=size,
        sampling_weight=sampling_weight, plain=plain,
    )
    weighted = WeightedMoments.from_kernel(moments)
    unweighted = Moments(*(getattr(moments, f) for f in (
        "n", "shift", "r_exp", "r_mean", "r_m2", "w_exp", "mean", "com", "max_w", "n_clipped")))
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
        reward, logging_propensity, target_propensity, max_weight=max_weight, block_rows=size,
        codes=codes, n_groups=n_groups, sampling_weight=sampling_weight,
    )
    groups = [WeightedMoments.from_kernel(moments, g) if moments.n[g] > 0 else None
              for g in range(n_groups)]  # a loop over groups, not rows
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
    unbiased variance of the influence terms ``psi_i = grad g(mean) . (A_i - mean)`` and
    ``weight_sums[:, j]`` (when the estimator weights rows) ``sum w, sum w^2`` of the raw and
    then of the used weights.
    """

    n: int
    means: np.ndarray  # (k, P)
    psi_var: np.ndarray  # (P,)
    weight_sums: np.ndarray | None  # (4, P)

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
    """Means and influence-term variance of the components produced by ``blocks``.

    Two chunked passes: the first gives the column means (and the weight sums), the second the
    exact centred sum of squared influence terms ``psi = gradient(mean) . (A - mean)``, which
    stays exact (e.g. 0) where a one-pass sum-of-squares formula would cancel. Only the value of
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
            sums = np.stack([
                np.einsum("ip->p", raw),
                np.einsum("ip,ip->p", raw, raw),
                np.einsum("ip->p", used),
                np.einsum("ip,ip->p", used, used),
            ])
            wsum = sums if wsum is None else wsum + sums
    assert s1 is not None
    means = s1 / n
    with np.errstate(divide="ignore", invalid="ignore"):
        grad = np.stack([gradient(means[:, j]) for j in range(means.shape[1])], axis=1)  # (k, P)
        ss = np.zeros(means.shape[1])
        for sl in chunks(n, chunk_size):
            psi = np.einsum("ckp,kp->cp", blocks(sl)[0] - means[None], grad)
            ss += np.einsum("cp,cp->p", psi, psi)
    return ComponentMoments(n, means, ss / (n - 1), wsum)


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
            reward, np.ones(n), weight, max_weight=max_weight, sampling_weight=sampling_weight,
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
            pairs += [((a, a), c[0]), ((a, b), c[1]), ((b, b), c[2]), ((0, a), c[3]),
                      ((0, b), c[4])]
            if p0:
                mean[a:b + 1] = wt.mean[g, k]
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
        return WeightedMoments(self.n, float(shift), mean, _masked(com), self.max_w,
                               self.n_clipped, self.s_min, self.s_max)

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
        return WeightedMoments(n, self.shift, mean, _masked(com), np.maximum(self.max_w, b.max_w),
                               self.n_clipped + b.n_clipped, min(self.s_min, b.s_min),
                               max(self.s_max, b.s_max))

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
