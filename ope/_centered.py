"""The centred view of the moment kernel's statistics: the private type behind
:class:`ope.streaming.MomentStats`.

:class:`CenteredMoments` reads one group of the kernel's statistics (:class:`ope._kernel.Moments`)
as the shifted, centred per-policy moments of ``(w (r - shift), w)``: the values, standard
deviations, paired deviations and weight summaries every weighting estimate, interval and
diagnostic is computed from. Users reach these statistics through
:class:`ope.streaming.MomentStats` (its ``centered`` field), the one public face of the kernel;
:func:`ope.moments.centered_moments` and :func:`ope.moments.grouped_moments` build them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from ope._kernel import Checks, Moments
from ope._kernel import empty as empty_moments
from ope._kernel import merge as merge_moments
from ope._thresholds import kish_ess
from ope._validation import check_choice

__all__ = ["MOMENT_KEYS", "CenteredMoments", "WeightSummary"]

#: Names of the raw per-policy sums of :meth:`CenteredMoments.policy_sums` (each a float64 array
#: (P,)), public as ``ope.weights.MOMENT_KEYS`` and read through
#: :attr:`ope.streaming.MomentStats.moments`.
MOMENT_KEYS: Final = (
    "sum_w",  # sum of raw weights
    "sum_w2",  # sum of squared raw weights
    "sum_wr",  # sum of w * r
    "sum_w2r",  # sum of w^2 * r
    "sum_w2r2",  # sum of w^2 * r^2
    "max_w",  # largest raw weight
    "sum_cw",  # the same five sums for the clipped weight min(w, max_weight) ...
    "sum_cw2",
    "sum_cwr",
    "sum_cw2r",
    "sum_cw2r2",
    "n_clipped",  # ... and the number of rows whose weight exceeded max_weight
)

#: Relative rounding floor of a variance formed from centred co-moments,
#: ``caa + 2 x cab + x^2 cbb``: each co-moment carries a relative rounding error of a few ulps, so
#: a result below 16 eps times the magnitude of its terms is indistinguishable from 0 (e.g. the
#: spread of SNIPS's influence terms when every weighted row has the same reward) and is 0.
_ROUNDING_FLOOR: Final = 16.0 * float(np.finfo(np.float64).eps)


def _quadratic(caa: float, cab: float, cbb: float, x: float) -> float:
    """``caa + 2 x cab + x^2 cbb`` (the centred sum of squares of ``a + x b``), floored at 0."""
    q = caa + 2.0 * x * cab + x * x * cbb
    return float(q) if q > _ROUNDING_FLOOR * (caa + 2.0 * abs(x * cab) + x * x * cbb) else 0.0


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
            return np.stack(
                [c[:, 0] * (uw * ur) ** 2, c[:, 1] * uw * uw * ur, c[:, 2] * uw * uw], axis=1
            )

    def column(self, j: int) -> CenteredMoments:
        """The statistics of policy ``j`` alone (views, no copies)."""
        m, sl = self.raw, slice(j, j + 1)
        return CenteredMoments(
            Moments(
                m.n,
                m.shift,
                m.r_exp,
                m.r_mean,
                m.r_m2,
                m.w_exp[..., sl],
                m.mean[..., sl],
                m.com[..., sl],
                m.max_w[..., sl],
                m.n_clipped[..., sl],
            )
        )

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
            return CenteredMoments(
                Moments(
                    m.n,
                    np.array([float(shift)]),
                    m.r_exp,
                    m.r_mean + d if self.n else m.r_mean,
                    m.r_m2,
                    m.w_exp,
                    m.mean,
                    m.com,
                    m.max_w,
                    m.n_clipped,
                )
            )
        # a' = w (r - shift') = a + d b: means move by d * mean b, co-moments by T C T^T
        mean = m.mean.copy()
        mean[:, :, 0] += d * m.mean[:, :, 1]
        c = m.com
        com = c.copy()  # rows 2 and 4 stay; the others as below (one array, no stack)
        com[:, :, 0] = c[:, :, 0] + 2.0 * d * c[:, :, 1] + d * d * c[:, :, 2]
        com[:, :, 1] = c[:, :, 1] + d * c[:, :, 2]
        com[:, :, 3] = c[:, :, 3] + d * c[:, :, 4]
        return CenteredMoments(
            Moments(
                m.n,
                np.array([float(shift)]),
                m.r_exp,
                m.r_mean + d,
                m.r_m2,
                m.w_exp,
                mean,
                com,
                m.max_w,
                m.n_clipped,
            )
        )

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
        return (
            float(m.mean[0, s, 1, j]) * uw,
            _square(math.sqrt(float(m.com[0, s, 2, j]) / (self.n - 1.0)) * uw),
        )

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
            return (
                float(self.n * mean),
                float(float(self.raw.r_m2[0]) * ur * ur + self.n * mean * mean),
            )

    def weight_sums(self, j: int, *, clipped: bool) -> tuple[float, float]:
        """``sum w`` and ``sum w^2`` (for the Kish ESS and the mean-weight check)."""
        s = int(clipped)
        m = self.raw
        uw = math.ldexp(1.0, int(m.w_exp[0, s, j]))
        mb = float(m.mean[0, s, 1, j])
        return (
            float(self.n * mb * uw),
            float((float(m.com[0, s, 2, j]) + self.n * mb * mb) * uw * uw),
        )

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
        kind = check_choice(kind, "kind", ("product", "ratio"))
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

    def policy_sums(self) -> dict[str, np.ndarray]:
        """The raw sums of :data:`MOMENT_KEYS` of every policy, float64 arrays of shape (P,)."""
        per = [self.raw_sums(j) for j in range(self.max_w.shape[0])]  # loop over policies
        return {key: np.array([d[key] for d in per], dtype=np.float64) for key in MOMENT_KEYS}


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
