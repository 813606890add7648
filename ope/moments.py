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

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import numpy as np

from ope._thresholds import kish_ess
from ope._validation import check_positive_int, chunks

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "CenteredMoments",
    "ComponentMoments",
    "WeightSummary",
    "centered_moments",
    "component_moments",
    "block_rows",
    "ratio",
]

#: Rows per chunk of the streaming kernel. 2**18 rows x P policies x 8 bytes keeps each (chunk, P)
#: float64 block at 2 MB per policy: small enough for the L2/L3 cache of common CPUs and for
#: bounded memory, large enough that the per-chunk Python overhead is negligible.
DEFAULT_CHUNK_SIZE: Final = 1 << 18

#: Entries per block of the centred-moment kernel (rows = this / P, at most ``chunk_size``). The
#: kernel makes several passes over each (P, rows) float64 block and its two scratch copies, so
#: they should stay in cache: 2**18 entries (2 MB each). Measured on 10M x 8 float64 without
#: clipping (medians of 3): 0.35 s at 2**16 entries, 0.33 s at 2**17, 0.31 s at 2**18, 0.35 s
#: at 2**19, 0.40 s at 2**20; 2.0 s for the former (2**18 rows, P) row-major kernel.
_KERNEL_BLOCK_ELEMENTS: Final = 1 << 18


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
    """

    n: int
    mean: float
    variance: float
    ess: float
    raw_zero: bool
    used_zero: bool
    changed: bool


@dataclass(frozen=True, eq=False)
class CenteredMoments:
    """Shifted and centred per-policy moments of ``(w (r - shift), w)`` over a set of rows.

    ``mean[s, :, j]`` holds the means of ``a = w (r - shift)`` and ``b = w`` for policy ``j``,
    with ``s = 0`` for the raw and ``s = 1`` for the clipped weights ``min(w, max_weight)``;
    ``comoment[s, :, j]`` the centred sums ``sum (a - mean a)^2``, ``sum (a - mean a)(b - mean
    b)`` and ``sum (b - mean b)^2``. ``r_mean`` and ``r_m2`` are the mean and centred sum of
    squares of ``r - shift``. Sets merge by the pairwise update of Chan, Golub & LeVeque (1982)
    after re-expressing both at a common shift, so no variance is ever formed as a difference
    of raw sums of squares (which loses ``log10(E[x^2] / Var x)`` digits).
    """

    n: int
    shift: float
    r_mean: float
    r_m2: float
    mean: np.ndarray  # (2, 2, P)
    comoment: np.ndarray  # (2, 3, P)
    max_w: np.ndarray  # (P,)
    n_clipped: np.ndarray  # (P,)

    @classmethod
    def empty(cls, n_pol: int, shift: float = 0.0) -> CenteredMoments:
        return cls(
            0, float(shift), 0.0, 0.0, np.zeros((2, 2, n_pol)), np.zeros((2, 3, n_pol)),
            np.full(n_pol, -np.inf), np.zeros(n_pol),
        )

    def column(self, j: int) -> CenteredMoments:
        """The statistics of policy ``j`` alone (views, no copies)."""
        sl = slice(j, j + 1)
        return CenteredMoments(
            self.n, self.shift, self.r_mean, self.r_m2, self.mean[:, :, sl],
            self.comoment[:, :, sl], self.max_w[sl], self.n_clipped[sl],
        )

    def shifted(self, shift: float) -> CenteredMoments:
        """The same statistics expressed about another reward shift (exact algebra)."""
        d = self.shift - float(shift)
        if d == 0.0 or self.n == 0:
            return CenteredMoments(
                self.n, float(shift), self.r_mean + d if self.n else 0.0, self.r_m2,
                self.mean, self.comoment, self.max_w, self.n_clipped,
            )
        # a' = w (r - shift') = a + d b: means move by d * mean b, co-moments by T C T^T
        mean = self.mean.copy()
        mean[:, 0] += d * self.mean[:, 1]
        caa, cab, cbb = self.comoment[:, 0], self.comoment[:, 1], self.comoment[:, 2]
        com = np.stack([caa + 2.0 * d * cab + d * d * cbb, cab + d * cbb, cbb], axis=1)
        return CenteredMoments(
            self.n, float(shift), self.r_mean + d, self.r_m2, mean, com, self.max_w,
            self.n_clipped,
        )

    def merge(self, other: CenteredMoments) -> CenteredMoments:
        """Moments of the union of two disjoint sets of rows (Chan et al.'s pairwise update)."""
        if other.n == 0:
            return self
        if self.n == 0:
            return other
        # keep the shift of the larger part; the other is re-expressed about it
        a, b = (self, other.shifted(self.shift)) if self.n >= other.n else (
            self.shifted(other.shift), other)
        n = a.n + b.n
        frac = b.n / n
        cross = a.n * b.n / n
        delta = b.mean - a.mean  # (2, 2, P)
        mean = a.mean + delta * frac
        da, db = delta[:, 0], delta[:, 1]
        extra = np.stack([da * da, da * db, db * db], axis=1) * cross
        dr = b.r_mean - a.r_mean
        return CenteredMoments(
            n,
            a.shift,
            a.r_mean + dr * frac,
            a.r_m2 + b.r_m2 + dr * dr * cross,
            mean,
            a.comoment + b.comoment + extra,
            np.maximum(a.max_w, b.max_w),
            a.n_clipped + b.n_clipped,
        )

    # ---- per-policy summaries (j: policy column; clipped: raw or clipped weights) ----------
    def product_mean_var(self, j: int, *, clipped: bool, about: float) -> tuple[float, float]:
        """Mean and unbiased variance of ``w (r - about)``."""
        s = int(clipped)
        d = self.shift - float(about)
        ma, mb = self.mean[s, 0, j], self.mean[s, 1, j]
        caa, cab, cbb = self.comoment[s, :, j]
        return float(ma + d * mb), _quadratic(caa, cab, cbb, d) / (self.n - 1.0)

    def weight_mean_var(self, j: int, *, clipped: bool) -> tuple[float, float]:
        """Mean and unbiased variance of the (raw or clipped) weights."""
        s = int(clipped)
        return float(self.mean[s, 1, j]), float(self.comoment[s, 2, j] / (self.n - 1.0))

    def ratio_mean_var(self, j: int, *, clipped: bool) -> tuple[float, float]:
        """Self-normalized mean ``sum w r / sum w`` and the unbiased variance of its influence
        terms ``w (r - V) / mean w`` (the delta method)."""
        s = int(clipped)
        ma, mb = self.mean[s, 0, j], self.mean[s, 1, j]
        caa, cab, cbb = self.comoment[s, :, j]
        v = ma / mb
        return float(self.shift + v), _quadratic(caa, cab, cbb, -v) / (self.n - 1.0) / (mb * mb)

    def reward_mean_var(self) -> tuple[float, float]:
        """Mean and unbiased variance of the rewards."""
        return self.shift + self.r_mean, self.r_m2 / (self.n - 1.0)

    def reward_sums(self) -> tuple[float, float]:
        """``sum r`` and ``sum r^2``, derived from the reward's mean and centred sum of squares."""
        mean = self.shift + self.r_mean if self.n else 0.0
        return float(self.n * mean), float(self.r_m2 + self.n * mean * mean)

    def weight_sums(self, j: int, *, clipped: bool) -> tuple[float, float]:
        """``sum w`` and ``sum w^2`` (for the Kish ESS and the mean-weight check)."""
        s = int(clipped)
        mb = self.mean[s, 1, j]
        return float(self.n * mb), float(self.comoment[s, 2, j] + self.n * mb * mb)

    def weight_summary(self, j: int, *, clipped: bool) -> WeightSummary:
        """The raw weights' mean and variance and the ESS of the weights used (clipped or not)."""
        s_raw, s_raw2 = self.weight_sums(j, clipped=False)
        s_used, s_used2 = self.weight_sums(j, clipped=clipped)
        mean, var = self.weight_mean_var(j, clipped=False)
        return WeightSummary(
            n=self.n,
            mean=mean,
            variance=var,
            ess=kish_ess(s_used, s_used2),
            raw_zero=s_raw2 == 0.0,
            used_zero=s_used2 == 0.0,
            changed=clipped and bool(self.n_clipped[j] > 0),
        )

    def raw_sums(self, j: int) -> dict[str, float]:
        """The raw sums of :data:`MOMENT_KEYS` for policy ``j``, derived from the moments."""
        out: dict[str, float] = {}
        n, c = float(self.n), self.shift
        for s, pre in ((0, ""), (1, "c")):
            ma, mb = self.mean[s, 0, j], self.mean[s, 1, j]
            caa, cab, cbb = self.comoment[s, :, j]
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


def centered_block(
    w: np.ndarray, rs: np.ndarray, a: np.ndarray, b: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Means (2, k) and centred co-moments (3, k) of ``(w * rs, w)`` over one block.

    ``w`` is the (k, c) block of weights with one policy per row, so every per-policy sum runs
    along contiguous memory; ``rs`` holds the (c,) shifted rewards; ``a`` and ``b`` are (k, c)
    scratch buffers, overwritten. Two passes: the means, then the exact centred sums.
    """
    c = float(w.shape[1])
    np.multiply(w, rs, out=a)
    ma = np.add.reduce(a, axis=1) / c
    mb = np.add.reduce(w, axis=1) / c
    np.subtract(a, ma[:, None], out=a)
    np.subtract(w, mb[:, None], out=b)
    com = [np.einsum("pi,pi->p", x, y) for x, y in ((a, a), (a, b), (b, b))]
    return np.stack([ma, mb]), np.stack(com)


def block_rows(n_pol: int, chunk_size: int) -> int:
    """Rows per kernel block: at most ``chunk_size``, and (P, rows) within the cache budget."""
    size = check_positive_int(chunk_size, "chunk_size")
    return max(1, min(size, _KERNEL_BLOCK_ELEMENTS // max(1, n_pol)))


def centered_moments(
    reward: np.ndarray,
    logging_propensity: np.ndarray,
    target_propensity: np.ndarray,
    *,
    max_weight: float | None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> CenteredMoments:
    """Centred moments of validated arrays (reward (n,), propensities (n,), targets (n, P)).

    The reward shift is the mean reward (so ``w (r - shift)`` is of the order of the reward's
    spread, not its level); each block is centred exactly (two passes over the block) and the
    blocks are merged pairwise.

    The weights of a block are written transposed, one policy per row, into a buffer reused by
    every block (no per-block allocation), so every per-policy sum, maximum and count is a
    reduction along contiguous memory: several times faster than column reductions of the
    row-major (rows, P) block (``w.max(axis=0)`` on 2**18 x 8 took 8 ms against 0.3 ms for the
    transposed block). The sums are numpy reductions and ``einsum``, not BLAS: multithreaded
    BLAS on hundreds of small products per call doubled the CPU time and, on a busy 2-core
    machine, made single calls up to 20x slower. Blocks have at most ``chunk_size`` rows and
    fit the cache (:data:`_KERNEL_BLOCK_ELEMENTS`). Clipped moments are computed only for the
    policies whose largest weight in the block exceeds ``max_weight``: for the others
    ``min(w, max_weight) = w`` and the clipped moments are the raw ones, exactly.
    """
    n, n_pol = target_propensity.shape
    r64 = reward.astype(np.float64, copy=False)
    shift = float(r64.mean()) if n else 0.0
    acc = CenteredMoments.empty(n_pol, shift)
    rows = block_rows(n_pol, chunk_size)
    if n == 0:
        return acc
    rows = min(rows, n)
    w_buf = np.empty((n_pol, rows))
    a_buf = np.empty((n_pol, rows))
    b_buf = np.empty((n_pol, rows))
    r_buf = np.empty(rows)
    if max_weight is not None:
        clip_buf = np.empty((n_pol, rows))  # the rows of the policies clipped in a block
        over_buf = np.empty((n_pol, rows), dtype=bool)
    for sl in chunks(n, rows):  # loop over blocks, not rows
        c = sl.stop - sl.start
        w, a, b = w_buf[:, :c], a_buf[:, :c], b_buf[:, :c]
        # w[j, i] = t[i, j] / p[i], divided in float64 whatever the input dtype
        np.divide(target_propensity[sl].T, logging_propensity[sl], out=w, dtype=np.float64)
        rs = np.subtract(r64[sl], shift, out=r_buf[:c])
        m_raw, c_raw = centered_block(w, rs, a, b)
        max_w = np.maximum.reduce(w, axis=1)
        n_clipped = np.zeros(n_pol)
        m_clip, c_clip = m_raw, c_raw
        if max_weight is not None:
            over = np.flatnonzero(max_w > max_weight)
            if over.size:
                m_clip, c_clip = m_raw.copy(), c_raw.copy()
                k = over.size
                sub = w if k == n_pol else np.take(w, over, axis=0, out=clip_buf[:k, :c])
                gt = np.greater(sub, max_weight, out=over_buf[:k, :c])
                n_clipped[over] = np.count_nonzero(gt, axis=1)
                np.minimum(sub, max_weight, out=sub)
                m_sub, c_sub = centered_block(sub, rs, a[:k], b[:k])
                m_clip[:, over] = m_sub
                c_clip[:, over] = c_sub
        r_mean = float(np.add.reduce(rs) / c)
        dr = np.subtract(rs, r_mean, out=r_buf[:c])
        part = CenteredMoments(
            c,
            shift,
            r_mean,
            float(np.einsum("i,i->", dr, dr)),
            np.stack([m_raw, m_clip]),
            np.stack([c_raw, c_clip]),
            max_w,
            n_clipped,
        )
        acc = acc.merge(part)
    return acc


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
