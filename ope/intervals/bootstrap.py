"""Nonparametric bootstrap for statistics that are smooth functions of column means, with one set
of resample weights shared by every statistic of a call.

Every estimator in :mod:`ope.estimators` is ``g(mean of per-row components)``: IPS is the mean of
``w*r``; SNIPS is ``mean(w*r) / mean(w)``; SNDR is ``mean(q_target) + mean(w*(r-q)) / mean(w)``.
A bootstrap replicate therefore needs only the resampled column means
``sum_i c_i a_i / sum_i c_i``, where ``c_i`` is how often row ``i`` is drawn in the resample:
for ``B`` resamples and ``m`` columns that is one product ``counts (B, n) @ columns (n, m)``,
computed in row blocks ``(B, block) @ (block, m)`` with float64 accumulation, never with a Python
loop over resamples or rows. Self-normalized estimators are renormalized **inside each resample**
because ``g`` is applied to the resampled means of numerator and denominator together; keeping
the full-sample denominator would miss the denominator's variance.

The resample weights (counts) ``c[b, i]`` of resample ``b`` and row ``i``:

* **multinomial over the rows** when ``n <= EXACT_MAX_ROWS``: resample ``b`` draws ``n`` row
  numbers uniformly with replacement (the classical bootstrap), draw ``j`` being
  ``h(key, b n + j) mod n`` for a 64-bit counter-based hash ``h`` (SplitMix64's finalizer);
* **multinomial over distinct rows** when larger samples hold at most
  ``MAX_DISTINCT_ROWS`` distinct rows of columns (binary rewards, a few propensity values): the
  counts of the ``d`` distinct rows are one exact ``multinomial(n, multiplicity / n)`` draw per
  resample (the same distribution as resampling the rows, at the cost of ``B d`` draws);
* **Poisson(1)** otherwise: ``c[b, i]`` is the entry ``u`` of :data:`POISSON_TABLE`, a lookup
  table of the Poisson(1) quantiles at ``(u + 1/2) / 2**16``, with ``u`` the 16-bit lane
  ``i mod 4`` of ``h(key, b ceil(n/4) + i // 4)``. Each probability ``P(c = k)`` is within
  ``2**-16`` of ``e**-1 / k!`` (mean 1, variance 0.99997). Independent counts need no pass over
  all ``n`` rows per resample, so a block of rows is resampled for every resample at once while
  it is in cache; the replicate ``sum c a / sum c`` is the Poisson bootstrap, which differs from
  the multinomial one by ``O(1/n)`` (here ``n > EXACT_MAX_ROWS``).

The counts are a function of the seed, the resample and the row alone, so the same seed gives the
same counts whatever the block size, the number of statistics resampled together and the backend:
a compiled loop (numba, the optional extra ``fast``; the backend switch of :mod:`ope._kernel`,
environment variable ``OPE_KERNEL``) or the numpy fallback, whose sums agree to about 1e-13
relative (summation order differs). :func:`shared_bootstrap` resamples every candidate and
estimator of an evaluation with one set of counts; :func:`bootstrap_interval` is the one-interval
case of the same machinery.
"""

from __future__ import annotations

import math
import statistics as _stats
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any, Final, Literal, Union

import numpy as np
import numpy.typing as npt

from ope._kernel import compiled_loops
from ope._progress import progress
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
from ope.intervals._types import ConfidenceInterval
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

#: Up to this many rows the counts are exact multinomial draws over the rows (the classical
#: bootstrap); the count vector of a resample costs ``n`` draws and fits in cache. Above it,
#: Poisson(1) counts (or multinomial counts over few distinct rows).
EXACT_MAX_ROWS: Final = 1 << 14

#: Largest number of distinct rows resampled as exact multinomial counts over distinct rows: one
#: multinomial draw costs about 55 ns per category and resample, the Poisson path about 0.5 ns
#: per row and resample, so grouping pays when the rows take at most a few thousand distinct
#: values (and at n = 1M, far below n / 100).
MAX_DISTINCT_ROWS: Final = 4096

#: Rows read to decide cheaply that the rows are not few distinct ones (evenly spaced rows).
DISTINCT_SAMPLE_ROWS: Final = 8 * MAX_DISTINCT_ROWS

#: Rows per block of columns resampled at once: an (m, 65536) float64 block is 9 MB at m = 18
#: columns (8 candidates x IPS + SNIPS and the logging value), read in sub-blocks of
#: :data:`SUB_BLOCK_ROWS` that stay in the L2 cache while every resample uses them.
BLOCK_ROWS: Final = 1 << 16

#: Rows of one sub-block of the compiled loop. Measured at n = 1M, B = 1000 (CPU seconds):
#: 256 rows 0.50 / 1.05 s (3 / 18 columns), 512: 0.53 / 1.21, 1024: 0.52 / 1.14,
#: 2048: 0.59 / 1.71, 4096: 0.58 / 1.83.
SUB_BLOCK_ROWS: Final = 512

#: Entries of one block of counts of the numpy fallback (float64: 8 MB), and its rows. The
#: fallback multiplies counts and columns with ``numpy.einsum`` (one thread, float64), not BLAS:
#: on a loaded 2-core machine OpenBLAS's threads waited for each other on these skinny products
#: (n = 1M, B = 100, 18 columns: 3.9 s CPU / 13.9 s wall for ``columns @ counts.T``, 2.0 / 6.2 s
#: for ``counts @ columns.T``, 0.74 / 2.2 s for einsum).
NUMPY_COUNT_ELEMENTS: Final = 1 << 20
NUMPY_SUB_BLOCK_ROWS: Final = 1 << 12

#: Resample x row counts from which a progress bar is shown (about a second with numba, a few
#: without).
PROGRESS_MIN_COUNTS: Final = 1 << 29

#: Largest fraction of replicates allowed to be undefined (e.g. a SNIPS resample whose weights
#: are all zero, 0/0) before the interval is refused: past this the bootstrap distribution is
#: mostly about which rows were drawn, not about the estimate.
MAX_UNDEFINED_FRACTION: Final = 0.01

Statistic = Callable[[np.ndarray], np.ndarray]

#: How the counts were drawn (``SharedBootstrap.resampling``).
RESAMPLING_KINDS: Final = ("multinomial", "multinomial over distinct rows", "poisson")

# SplitMix64 (Steele, Lea & Flood 2014): golden-ratio increment and finalizer constants
_GOLDEN: Final = 0x9E3779B97F4A7C15
_MIX1: Final = 0xBF58476D1CE4E5B9
_MIX2: Final = 0x94D049BB133111EB
_LANE_BITS: Final = 16


def _poisson_table() -> np.ndarray:
    """Entry u: the Poisson(1) quantile at (u + 1/2) / 2**16, as uint8 (at most 8)."""
    size = 1 << _LANE_BITS
    pmf = [math.exp(-1.0) / math.factorial(k) for k in range(20)]
    cdf = np.cumsum(pmf)
    thresholds = np.round(cdf * size)
    thresholds = thresholds[thresholds < size]
    return np.searchsorted(thresholds, np.arange(size), side="right").astype(np.uint8)


#: Poisson(1) count of each 16-bit uniform lane: ``P(count = k)`` is the number of entries equal
#: to ``k`` over 65536, within ``2**-16`` of ``e**-1 / k!``; its mean is 1 and its variance
#: 0.99997.
POISSON_TABLE: Final = _poisson_table()
_POISSON_TABLE_F64: Final = POISSON_TABLE.astype(np.float64)


# ============================================================================================
# resample counts: the compiled loops and their numpy twins (the same counts)
# ============================================================================================
def _nb_poisson_sums(key, hashes_per_resample, h0, at, sums, table, sub):
    """sums[b, k] += sum_i c[b, i] at[k, i] for the rows 4 h0 .. 4 h0 + L of one block.

    ``at`` is (m, L) with L a multiple of 4 (zero-padded), ``sums`` (B4, m) with B4 a multiple
    of 4; c[b, i] = table[lane (i mod 4) of mix(key + (b H + h0 + i // 4 + 1) GOLDEN)].
    """
    m, L = at.shape
    n_tiles = sums.shape[0] // 4
    c = np.empty((4, sub))
    g = np.uint64(0x9E3779B97F4A7C15)
    m1 = np.uint64(0xBF58476D1CE4E5B9)
    m2 = np.uint64(0x94D049BB133111EB)
    mask = np.uint64(0xFFFF)
    s16, s27, s30, s31 = np.uint64(16), np.uint64(27), np.uint64(30), np.uint64(31)
    s32, s48 = np.uint64(32), np.uint64(48)
    k64 = np.uint64(key)
    for j0 in range(0, L, sub):  # sub-blocks of rows, in cache for every resample
        ln = min(sub, L - j0)
        nh = ln // 4
        for t in range(n_tiles):  # tiles of 4 resamples share each read of a column
            for r in range(4):
                base = (np.uint64(4 * t + r) * np.uint64(hashes_per_resample)
                        + np.uint64(h0 + j0 // 4) + np.uint64(1))
                for h in range(nh):
                    z = k64 + (base + np.uint64(h)) * g
                    z = (z ^ (z >> s30)) * m1
                    z = (z ^ (z >> s27)) * m2
                    z = z ^ (z >> s31)
                    c[r, 4 * h] = table[z & mask]
                    c[r, 4 * h + 1] = table[(z >> s16) & mask]
                    c[r, 4 * h + 2] = table[(z >> s32) & mask]
                    c[r, 4 * h + 3] = table[z >> s48]
            for k in range(m):
                a0 = 0.0
                a1 = 0.0
                a2 = 0.0
                a3 = 0.0
                for i in range(ln):
                    v = at[k, j0 + i]
                    a0 += c[0, i] * v
                    a1 += c[1, i] * v
                    a2 += c[2, i] * v
                    a3 += c[3, i] * v
                sums[4 * t, k] += a0
                sums[4 * t + 1, k] += a1
                sums[4 * t + 2, k] += a2
                sums[4 * t + 3, k] += a3
    return sums


def _nb_multinomial_sums(key, at, sums, cnt):
    """sums[b, k] = sum_i c[b, i] at[k, i], c[b] the counts of n uniform draws of a row:
    draw j of resample b is mix(key + (b n + j + 1) GOLDEN) mod n."""
    m, n = at.shape
    g = np.uint64(0x9E3779B97F4A7C15)
    m1 = np.uint64(0xBF58476D1CE4E5B9)
    m2 = np.uint64(0x94D049BB133111EB)
    s27, s30, s31 = np.uint64(27), np.uint64(30), np.uint64(31)
    k64 = np.uint64(key)
    nn = np.uint64(n)
    for b in range(sums.shape[0]):  # resamples: each needs all n of its draws
        for i in range(n):
            cnt[i] = 0.0
        base = np.uint64(b) * nn + np.uint64(1)
        for j in range(n):
            z = k64 + (base + np.uint64(j)) * g
            z = (z ^ (z >> s30)) * m1
            z = (z ^ (z >> s27)) * m2
            z = z ^ (z >> s31)
            cnt[z % nn] += 1.0
        for k in range(m):
            s = 0.0
            for i in range(n):
                s += cnt[i] * at[k, i]
            sums[b, k] = s
    return sums


def _compiled() -> dict[str, Any] | None:
    """The compiled loops when the numba backend is in use (compiled on first use), else None."""
    return compiled_loops(__name__, (_nb_poisson_sums, _nb_multinomial_sums))


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer of a uint64 array, in place (numpy wraps uint64 arithmetic)."""
    x ^= x >> np.uint64(30)
    x *= np.uint64(_MIX1)
    x ^= x >> np.uint64(27)
    x *= np.uint64(_MIX2)
    x ^= x >> np.uint64(31)
    return x


def _counter_hash(key: int, index: np.ndarray) -> np.ndarray:
    """mix(key + index * GOLDEN) for a uint64 array of counters (overwritten)."""
    index *= np.uint64(_GOLDEN)
    index += np.uint64(key)
    return _mix(index)


def _lanes(z: np.ndarray) -> np.ndarray:
    """The four 16-bit lanes of each uint64 of a (b, h) array, low lane first: (b, 4 h)."""
    if sys.byteorder == "little":
        return z.view(np.uint16).reshape(z.shape[0], 4 * z.shape[1])
    shifts = np.arange(4, dtype=np.uint64) * np.uint64(_LANE_BITS)
    lanes = (z[:, :, None] >> shifts) & np.uint64(0xFFFF)
    return lanes.reshape(z.shape[0], 4 * z.shape[1]).astype(np.uint16)


def _np_poisson_counts(key: int, hashes_per_resample: int, h0: int, b0: int, b1: int,
                       n_hashes: int) -> np.ndarray:
    """Poisson counts (b1 - b0, 4 n_hashes) of resamples b0..b1 at rows 4 h0 .. (the loop's)."""
    b = np.arange(b0, b1, dtype=np.uint64)[:, None] * np.uint64(hashes_per_resample)
    idx = b + (np.arange(n_hashes, dtype=np.uint64) + np.uint64(h0 + 1))[None, :]
    return _POISSON_TABLE_F64[_lanes(_counter_hash(key, idx))]


def _np_poisson_sums(key: int, hashes_per_resample: int, h0: int, at: np.ndarray,
                     sums: np.ndarray) -> None:
    """The numpy twin of :func:`_nb_poisson_sums` (the same counts; einsum sums)."""
    length = at.shape[1]
    sub = min(length, NUMPY_SUB_BLOCK_ROWS)
    step = max(1, NUMPY_COUNT_ELEMENTS // sub)
    for j0 in range(0, length, sub):  # sub-blocks of rows (a multiple of 4 each)
        part = at[:, j0 : j0 + sub]
        for b0 in range(0, sums.shape[0], step):  # blocks of resamples
            b1 = min(b0 + step, sums.shape[0])
            counts = _np_poisson_counts(key, hashes_per_resample, h0 + j0 // 4, b0, b1,
                                        part.shape[1] // 4)
            sums[b0:b1] += np.einsum("ki,bi->bk", part, counts)


def _np_multinomial_counts(key: int, n: int, b0: int, b1: int) -> np.ndarray:
    """Multinomial counts (b1 - b0, n) of resamples b0..b1 (the loop's draws)."""
    nb = b1 - b0
    idx = (np.arange(b0, b1, dtype=np.uint64)[:, None] * np.uint64(n)
           + (np.arange(n, dtype=np.uint64) + np.uint64(1))[None, :])
    drawn = _counter_hash(key, idx) % np.uint64(n)
    rows = drawn.astype(np.int64) + (np.arange(nb, dtype=np.int64) * n)[:, None]
    return np.bincount(rows.ravel(), minlength=nb * n).reshape(nb, n).astype(np.float64)


def _np_multinomial_sums(key: int, at: np.ndarray, sums: np.ndarray) -> None:
    n = at.shape[1]
    step = max(1, NUMPY_COUNT_ELEMENTS // n)
    for b0 in range(0, sums.shape[0], step):  # blocks of resamples
        b1 = min(b0 + step, sums.shape[0])
        sums[b0:b1] = np.einsum("ki,bi->bk", at, _np_multinomial_counts(key, n, b0, b1))


def _keys(gen: np.random.Generator) -> tuple[int, int]:
    """The hash keys of the Poisson and the multinomial counts, drawn from the generator."""
    k = gen.integers(0, np.iinfo(np.int64).max, size=2, dtype=np.int64)
    return int(k[0]), int(k[1])


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
    key_p, key_m = _keys(gen)
    if n <= EXACT_MAX_ROWS:
        return _np_multinomial_counts(key_m, n, 0, n_res)
    n_h = -(-n // 4)
    return _np_poisson_counts(key_p, n_h, 0, 0, n_res, n_h)[:, :n]


# ============================================================================================
# the engine: columns built block by block, resampled sums, statistics
# ============================================================================================
Rows = Union[slice, np.ndarray]


@dataclass(frozen=True)
class _Columns:
    """``m`` per-row columns, built for any rows on request (never as one (n, m) matrix)."""

    n: int
    m: int
    build: Callable[[Rows], np.ndarray]  # rows -> (m, len(rows)) float64

    def block(self, rows: Rows) -> np.ndarray:
        """The columns of ``rows`` plus a last row of ones (the resample size), (m + 1, L)."""
        data = self.build(rows)
        out = np.empty((self.m + 1, data.shape[1]), dtype=np.float64)
        out[: self.m] = data
        out[self.m] = 1.0
        return out


@dataclass(frozen=True)
class _Sums:
    """Resampled column sums ``(B, m + 1)`` (the last column: sum of counts), full-sample
    column sums ``(m,)`` and how the counts were drawn."""

    sums: np.ndarray
    totals: np.ndarray
    resampling: str


def _blocks(n: int, step: int) -> Iterable[slice]:
    for start in range(0, n, step):  # a loop over blocks of rows, not rows
        yield slice(start, min(start + step, n))


def _row_hash(block: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each column of an (m, L) block (equal rows hash equally)."""
    bits = np.ascontiguousarray(block + 0.0).view(np.uint64)  # + 0.0: -0.0 becomes 0.0
    h = np.zeros(block.shape[1], dtype=np.uint64)
    for k in range(block.shape[0]):  # a loop over columns
        x = bits[k] ^ np.uint64((k + 1) * _GOLDEN % (1 << 64))
        h ^= _mix(x)
        h = _mix(h)
    return h


def _distinct_rows(cols: _Columns) -> tuple[np.ndarray, np.ndarray] | None:
    """``(rows (m + 1, d), multiplicities (d,))`` when the rows take at most MAX_DISTINCT_ROWS
    distinct values, else None; exact (a hash collision is detected, then None)."""
    n = cols.n
    sample = np.unique(np.linspace(0, n - 1, min(n, DISTINCT_SAMPLE_ROWS)).astype(np.int64))
    if np.unique(_row_hash(cols.block(sample))).size > MAX_DISTINCT_ROWS:
        return None
    hashes = np.empty(n, dtype=np.uint64)
    for sl in _blocks(n, BLOCK_ROWS):
        hashes[sl] = _row_hash(cols.block(sl))
    uniq, first, inverse, mult = np.unique(
        hashes, return_index=True, return_inverse=True, return_counts=True
    )
    if uniq.size > MAX_DISTINCT_ROWS:
        return None
    rep = cols.block(first)
    for sl in _blocks(n, BLOCK_ROWS):  # every row equals its group's representative
        if not np.array_equal(cols.block(sl), rep[:, inverse[sl]]):
            return None
    return rep, mult


def _resample_sums(cols: _Columns, n_resamples: int, gen: np.random.Generator) -> _Sums:
    """Resampled sums of every column with one set of counts (see the module notes)."""
    n, m1 = cols.n, cols.m + 1
    key_p, key_m = _keys(gen)
    fns = _compiled()
    if n <= EXACT_MAX_ROWS:
        at = np.ascontiguousarray(cols.block(slice(0, n)))
        sums = np.zeros((n_resamples, m1))
        if fns is not None:
            fns["_nb_multinomial_sums"](key_m, at, sums, np.empty(n))
        else:
            _np_multinomial_sums(key_m, at, sums)
        return _Sums(sums, at[: cols.m].sum(axis=1), RESAMPLING_KINDS[0])
    grouped = _distinct_rows(cols)
    if grouped is not None:
        rep, mult = grouped
        counts = gen.multinomial(n, mult / n, size=n_resamples).astype(np.float64)
        sums = np.einsum("ki,bi->bk", rep, counts)
        return _Sums(sums, rep[: cols.m] @ mult.astype(np.float64), RESAMPLING_KINDS[1])
    b4 = -(-n_resamples // 4) * 4  # tiles of 4 resamples; the extra ones are dropped
    sums = np.zeros((b4, m1))
    totals = np.zeros(cols.m)
    n_h = -(-n // 4)
    starts = range(0, n, BLOCK_ROWS)
    if n_resamples * n >= PROGRESS_MIN_COUNTS:
        starts = progress(starts, desc="bootstrap", total=len(starts), unit="block")
    for start in starts:  # blocks of rows; every resample and column at once
        stop = min(start + BLOCK_ROWS, n)
        data = cols.block(slice(start, stop))
        totals += data[: cols.m].sum(axis=1)
        if data.shape[1] % 4:  # the last block: zero rows up to a multiple of 4
            pad = np.zeros((m1, -(-data.shape[1] // 4) * 4))
            pad[:, : data.shape[1]] = data
            data = pad
        if fns is not None:
            fns["_nb_poisson_sums"](key_p, n_h, start // 4, data, sums, POISSON_TABLE,
                                    SUB_BLOCK_ROWS)
        else:
            _np_poisson_sums(key_p, n_h, start // 4, data, sums)
    return _Sums(sums[:n_resamples], totals, RESAMPLING_KINDS[2])


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
    cause: str = "e.g. all resampled weights are zero"


def _replicates(stat: _Stat, res: _Sums) -> np.ndarray:
    means = res.sums[:, list(stat.columns)] / res.sums[:, -1:]
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(stat.function(means), dtype=np.float64).reshape(-1)


def _theta_hat(stat: _Stat, res: _Sums, n: int) -> float:
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(stat.function(res.totals[list(stat.columns)] / n))


def _accelerations(cols: _Columns, stats: Sequence[_Stat], res: _Sums,
                   thetas: Sequence[float]) -> list[float]:
    """BCa's jackknife acceleration of each statistic from leave-one-out column means, one pass
    over blocks of rows for all statistics.

    With jackknife values ``j_i`` and ``e_i = j_i - theta_hat`` (finite ones only), the centred
    sums ``sum d**2``, ``sum d**3`` of ``d_i = mean(j) - j_i`` come from the power sums of
    ``e`` (the shift is within ``O(1/n**2)`` of the mean, so nothing cancels).
    """
    n = cols.n
    acc = np.zeros((len(stats), 4))  # count, sum e, sum e^2, sum e^3
    for sl in _blocks(n, BLOCK_ROWS):
        data = cols.block(sl)
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


def _in_value_range(iv: ConfidenceInterval, vr: tuple[float, float] | None) -> ConfidenceInterval:
    """``iv`` intersected with the range the estimand lies in, as ``Estimate.ci`` does: an
    interval entirely outside becomes the nearer end point, never an inverted interval."""
    if vr is None or not (math.isfinite(iv.low) and math.isfinite(iv.high)):
        return iv
    low, high = max(iv.low, vr[0]), min(iv.high, vr[1])
    if low > high:
        low = high = vr[1] if iv.low > vr[1] else vr[0]
    return ConfidenceInterval(float(low), float(high))


def _interval(reps: np.ndarray, theta_hat: float, accel: float | None, level: float,
              where: str, cause: str = "e.g. all resampled weights are zero") -> ConfidenceInterval:
    """Percentile (``accel`` None) or BCa interval of the replicates."""
    ok = np.isfinite(reps)
    n_bad = int(reps.size - ok.sum())
    if n_bad:
        if n_bad > MAX_UNDEFINED_FRACTION * reps.size:
            raise EstimationError(
                f"{where}{n_bad} of {reps.size} bootstrap resamples give an undefined estimate "
                f"({cause}); too few rows carry weight for a "
                "bootstrap. Use a bounded method (ci(method='betting' or 'bernstein')) or more "
                "data."
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


def _run(cols: _Columns, stats: Sequence[_Stat], *, level: float, n_resamples: int,
         method: str, gen: np.random.Generator) -> tuple[list[ConfidenceInterval], str]:
    res = _resample_sums(cols, n_resamples, gen)
    thetas = [_theta_hat(s, res, cols.n) for s in stats]
    accels: list[float | None] = (
        list(_accelerations(cols, stats, res, thetas)) if method == "bca" else [None] * len(stats)
    )
    out = [
        _in_value_range(_interval(_replicates(s, res), t, a, level, s.where, s.cause),
                        s.value_range)
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


def _matrix_columns(a: np.ndarray) -> _Columns:
    return _Columns(a.shape[0], a.shape[1], lambda rows: a[rows].T)


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
    res = _resample_sums(cols, n_res, gen)
    return _replicates(_Stat(None, tuple(range(a.shape[1])), stat), res)


def bootstrap_interval(
    components: npt.ArrayLike,
    statistic: Statistic,
    *,
    confidence_level: float = 0.95,
    n_resamples: int | None = None,
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
    n_resamples : int, optional
        Number of resamples, at least :func:`min_resamples` of the confidence level
        (81 at 0.95). Default :func:`default_n_resamples` (2000 up to level 0.998).
    bootstrap_method : {"percentile", "bca"}, default "percentile"
        Percentile interval, or bias-corrected and accelerated (BCa) with the jackknife
        acceleration.
    rng : int, numpy.random.Generator or None
        Seed or generator. The same seed gives the same counts as :func:`shared_bootstrap` and
        :func:`resample_counts` on the same number of rows.

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
    stat = _Stat(None, tuple(range(a.shape[1])), _check_statistic(statistic, a))
    (iv,), _ = _run(_matrix_columns(a), [stat], level=level, n_resamples=n_res, method=method,
                    gen=gen)
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


_WEIGHTING: Final = ("ips", "clipped_ips", "snips")


def _weighting_specs(
    estimators: Sequence[Any], reward_range: tuple[float, float] | None
) -> list[tuple[str, str, float | None, float]]:
    """``(key, name, clip level, reward origin)`` of each weighting estimator asked for."""
    if isinstance(estimators, (str, bytes)):
        estimators = (estimators,)
    if isinstance(estimators, (Mapping, Set)) or not isinstance(estimators, Iterable):
        raise ParameterError(
            f"`estimators` must be a sequence of estimators (names, estimator objects or (key, "
            f"estimator) pairs); got {describe(estimators)}. Pass e.g. estimators=('ips', "
            "'snips')."
        )
    out: list[tuple[str, str, float | None, float]] = []
    for item in estimators:
        key, est = item if isinstance(item, tuple) and len(item) == 2 else (None, item)
        name = est if isinstance(est, str) else getattr(est, "name", None)
        if name == "clipped_ips" and isinstance(est, str):
            raise ParameterError(
                "`estimators`: 'clipped_ips' needs its clip level; pass "
                "ope.ClippedIPS(max_weight=...) (or a (key, ClippedIPS(...)) pair) instead of "
                "the name."
            )
        if name not in _WEIGHTING:
            raise ParameterError(
                f"`estimators` of shared_bootstrap are IPS, clipped IPS and SNIPS (names 'ips', "
                f"'snips', or estimator objects); got {item!r}. Pass other row-backed estimates "
                "(DR, SNDR, paired differences) through `sources` (their Estimate.source)."
            )
        clip = None if isinstance(est, str) else getattr(est, "clip_level", None)
        origin = est.reward_origin(reward_range) if hasattr(est, "reward_origin") else 0.0
        label = str(key if key is not None else name)
        if label in (k for k, *_ in out):
            raise ParameterError(
                f"`estimators` names {label!r} twice; give each a distinct key with "
                "(key, estimator) pairs."
            )
        out.append((label, str(name), None if clip is None else float(clip), float(origin)))
    return out


def shared_bootstrap(
    reward: npt.ArrayLike,
    logging_propensity: npt.ArrayLike | None = None,
    target_propensity: npt.ArrayLike | Sequence[npt.ArrayLike] | None = None,
    *,
    names: Sequence[str] | None = None,
    estimators: Sequence[Any] = ("ips", "snips"),
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
    estimators : sequence, default ("ips", "snips")
        Weighting estimators, each a name (``"ips"``, ``"snips"``), an estimator object
        (``ope.IPS()``, ``ope.SNIPS()``, ``ope.ClippedIPS(max_weight=R)``) or a
        ``(key, estimator)`` pair such as ``ope.evaluation.resolve_estimators`` returns; its
        intervals are ``intervals[(name, key)]``.
    sources : mapping, optional
        Other row-backed estimates resampled with the same counts: ``key -> source`` where the
        source has ``components()`` (per-row components, (n, k)), ``statistic(means)`` and
        optionally ``value_range`` (an ``Estimate.source``: DR, SNDR, Switch-DR, DRos, paired
        differences, factored candidates). Their intervals are ``intervals[key]``. DM estimates
        have no bootstrap interval (their ``ci`` is NaN): do not pass them.
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
        A bad setting, an estimator other than IPS, clipped IPS or SNIPS, names that do not
        match the candidates, ``n_resamples`` below :func:`min_resamples`.
    ope.ValidationError
        Arrays of the wrong shape, non-finite, propensities out of range, rewards outside
        ``reward_range``, fewer than 2 rows.
    ope.EstimationError
        A statistic undefined in too many resamples (the message names it), or BCa's bias
        correction infinite.

    Notes
    -----
    The columns resampled are ``r`` (the logging value), ``w_j r`` (IPS and SNIPS numerators),
    ``w_j`` (SNIPS denominators) and ``min(w_j, R)(r - r_lo)`` (clipped IPS) for
    ``w_j = t_j / p``, each built once per block of rows, plus the components of ``sources``;
    the replicates are IPS ``S(w r)/S(1)``, SNIPS ``S(w r)/S(w)``, clipped IPS
    ``r_lo + S(min(w, R)(r - r_lo))/S(1)`` and the logging value ``S(r)/S(1)``, with
    ``S(x) = sum_i c[b, i] x_i``. With the same seed and rows every interval equals
    ``Estimate.ci(method="bootstrap", rng=seed)`` of the same estimate, to rounding (the counts
    are the same unless few distinct rows are grouped, whose grouping depends on the columns).

    Examples
    --------
    >>> import numpy as np
    >>> from ope.intervals.bootstrap import shared_bootstrap
    >>> rng = np.random.default_rng(0)
    >>> n = 1000
    >>> r = rng.uniform(size=n)
    >>> p = np.full(n, 0.5)
    >>> t = rng.uniform(size=(n, 3))
    >>> res = shared_bootstrap(r, p, t, names=["a", "b", "c"], rng=1, reward_range=(0, 1))
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
    specs = _weighting_specs(estimators, rr)
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
    labels = ([str(j) for j in range(n_pol)] if names is None
              else check_names(names, "names", example="names=['greedy']"))
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

    # the columns: r, then w_j r, w_j and clipped terms as the estimators need them
    columns: dict[tuple[Any, ...], int] = {}

    def column(spec: tuple[Any, ...]) -> int:
        return columns.setdefault(spec, len(columns))

    stats: list[_Stat] = []
    if logging:
        stats.append(_Stat(None, (column(("r",)),), _first, rr, "logging value: "))
    for j, name in enumerate(labels):  # loop over candidates
        for key, kind, clip, origin in specs:  # and estimators
            where = f"policy {name!r}, {key}: "
            if kind == "snips":
                cols_ = (column(("wr", j)), column(("w", j)))
                stats.append(_Stat((name, key), cols_, _ratio_of_first_two, rr, where,
                                   f"all resampled weights are zero: column {j} of "
                                   "`target_propensity` is 0 on nearly every row"))
            elif clip is None:
                stats.append(_Stat((name, key), (column(("wr", j)),), _first, rr, where))
            else:
                idx = column(("clip", j, clip, origin))
                stats.append(_Stat((name, key), (idx,), _Shifted(origin), rr, where))
    extra: dict[Any, np.ndarray] = {}
    taken = {s.label for s in stats}
    for key, src in (sources or {}).items():  # loop over sources
        if key in taken:
            raise ParameterError(
                f"`sources` key {key!r} is also a (policy, estimator) of `estimators`; give "
                "the source another key."
            )
        if not (callable(getattr(src, "components", None))
                and callable(getattr(src, "statistic", None))):
            raise ParameterError(
                f"`sources`[{key!r}] must be a row-backed estimate source with components() "
                f"and statistic(means) (an Estimate.source); got {describe(src)}."
            )
        comps = _components_2d(src.components())
        if comps.shape[0] != n:
            raise ValidationError(
                f"source {key!r} has {comps.shape[0]} rows but `reward` has {n}; sources must "
                "be estimates on the same rows."
            )
        extra[key] = comps
        idx_ = tuple(column(("src", key, k)) for k in range(comps.shape[1]))
        stats.append(_Stat(key, idx_, src.statistic, getattr(src, "value_range", None),
                           f"{key}: "))
    if not stats:
        raise ParameterError(
            "nothing to bootstrap: pass candidates with `estimators`, `sources`, or "
            "logging=True."
        )
    order = list(columns)

    def build(rows: Rows) -> np.ndarray:
        rb = r[rows].astype(np.float64, copy=False)
        out = np.empty((len(order), rb.shape[0]), dtype=np.float64)
        w_block: np.ndarray | None = None
        if t2 is not None and p is not None:
            w_block = ratio(p[rows], t2[rows])  # (L, P), float64
        for i, spec in enumerate(order):  # a loop over columns
            kind = spec[0]
            if kind == "r":
                out[i] = rb
            elif kind == "src":
                out[i] = extra[spec[1]][rows, spec[2]]
            else:
                j = spec[1]
                assert p is not None
                w = w_block[:, j] if w_block is not None else ratio(p[rows], targets[j][rows])
                if kind == "wr":
                    np.multiply(w, rb, out=out[i])
                elif kind == "w":
                    out[i] = w
                else:
                    np.multiply(np.minimum(w, spec[2]), rb - spec[3], out=out[i])
        return out

    cols = _Columns(n, len(order), build)
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


def _first(means: np.ndarray) -> np.ndarray:
    """The mean of the one column (IPS, the logging value)."""
    return means[..., 0]


def _ratio_of_first_two(means: np.ndarray) -> np.ndarray:
    """SNIPS: mean(w r) / mean(w)."""
    return means[..., 0] / means[..., 1]


@dataclass(frozen=True)
class _Shifted:
    """Clipped IPS: ``origin + mean(min(w, R)(r - origin))``."""

    origin: float

    def __call__(self, means: np.ndarray) -> np.ndarray:
        return self.origin + means[..., 0]
