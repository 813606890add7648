"""The bootstrap's resampling engine: counter-based resample counts and the resampled column sums
of per-row columns, with one set of counts shared by every column of a call.

A replicate of a statistic that is a smooth function of column means needs only the resampled
column means ``sum_i c_i a_i / sum_i c_i``, where ``c_i`` is how often row ``i`` is drawn in the
resample: for ``B`` resamples and ``m`` columns that is one product
``counts (B, n) @ columns (n, m)``, computed in row blocks ``(B, block) @ (block, m)`` with
float64 accumulation, never with a Python loop over resamples or rows. The columns are built
block by block on request (:class:`Columns`), never as one (n, m) matrix.

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

Within a scheme the counts are a function of the seed, the resample and the row alone, so the same
seed gives the same counts whatever the block size, the number of statistics resampled together
and the backend (the scheme itself depends on ``n`` and, above :data:`EXACT_MAX_ROWS`, on how
many distinct rows the columns resampled together hold: fewer columns can have few distinct
rows where more do not):
a compiled loop (numba, the optional extra ``fast``; the backend switch of :mod:`ope._kernel`,
environment variable ``OPE_KERNEL``) or the numpy fallback, whose sums agree to about 1e-13
relative (summation order differs). The intervals built on these sums (percentile, BCa) are in
:mod:`ope.intervals.bootstrap`.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final, Union

import numpy as np

from ope._kernel import compiled_loops
from ope._progress import progress

__all__ = [
    "BLOCK_ROWS",
    "DISTINCT_SAMPLE_ROWS",
    "EXACT_MAX_ROWS",
    "MAX_DISTINCT_ROWS",
    "NUMPY_COUNT_ELEMENTS",
    "NUMPY_SUB_BLOCK_ROWS",
    "POISSON_TABLE",
    "PROGRESS_MIN_COUNTS",
    "RESAMPLING_KINDS",
    "SUB_BLOCK_ROWS",
    "Columns",
    "Rows",
    "Sums",
    "compiled_sums",
    "dense_counts",
    "resample_sums",
    "row_blocks",
]

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
                base = (
                    np.uint64(4 * t + r) * np.uint64(hashes_per_resample)
                    + np.uint64(h0 + j0 // 4)
                    + np.uint64(1)
                )
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


def compiled_sums() -> dict[str, Any] | None:
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


def _np_poisson_counts(
    key: int, hashes_per_resample: int, h0: int, b0: int, b1: int, n_hashes: int
) -> np.ndarray:
    """Poisson counts (b1 - b0, 4 n_hashes) of resamples b0..b1 at rows 4 h0 .. (the loop's)."""
    b = np.arange(b0, b1, dtype=np.uint64)[:, None] * np.uint64(hashes_per_resample)
    idx = b + (np.arange(n_hashes, dtype=np.uint64) + np.uint64(h0 + 1))[None, :]
    return _POISSON_TABLE_F64[_lanes(_counter_hash(key, idx))]


def _np_poisson_sums(
    key: int, hashes_per_resample: int, h0: int, at: np.ndarray, sums: np.ndarray
) -> None:
    """The numpy twin of :func:`_nb_poisson_sums` (the same counts; einsum sums)."""
    length = at.shape[1]
    sub = min(length, NUMPY_SUB_BLOCK_ROWS)
    step = max(1, NUMPY_COUNT_ELEMENTS // sub)
    for j0 in range(0, length, sub):  # sub-blocks of rows (a multiple of 4 each)
        part = at[:, j0 : j0 + sub]
        for b0 in range(0, sums.shape[0], step):  # blocks of resamples
            b1 = min(b0 + step, sums.shape[0])
            counts = _np_poisson_counts(
                key, hashes_per_resample, h0 + j0 // 4, b0, b1, part.shape[1] // 4
            )
            sums[b0:b1] += np.einsum("ki,bi->bk", part, counts)


def _np_multinomial_counts(key: int, n: int, b0: int, b1: int) -> np.ndarray:
    """Multinomial counts (b1 - b0, n) of resamples b0..b1 (the loop's draws)."""
    nb = b1 - b0
    idx = (
        np.arange(b0, b1, dtype=np.uint64)[:, None] * np.uint64(n)
        + (np.arange(n, dtype=np.uint64) + np.uint64(1))[None, :]
    )
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


def dense_counts(n: int, n_resamples: int, gen: np.random.Generator) -> np.ndarray:
    """The counts of :func:`resample_sums` for ``n`` rows as a dense (n_resamples, n) array (the
    counts over the rows: multinomial up to ``EXACT_MAX_ROWS`` rows, Poisson(1) above)."""
    key_p, key_m = _keys(gen)
    if n <= EXACT_MAX_ROWS:
        return _np_multinomial_counts(key_m, n, 0, n_resamples)
    n_h = -(-n // 4)
    return _np_poisson_counts(key_p, n_h, 0, 0, n_resamples, n_h)[:, :n]


# ============================================================================================
# the engine: columns built block by block, resampled sums
# ============================================================================================
Rows = Union[slice, np.ndarray]


@dataclass(frozen=True)
class Columns:
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

    def blocks(self) -> Iterator[tuple[slice, np.ndarray]]:
        """Each block of :data:`BLOCK_ROWS` rows with its :meth:`block`, in row order."""
        for sl in row_blocks(self.n, BLOCK_ROWS):  # a loop over blocks of rows, not rows
            yield sl, self.block(sl)


@dataclass(frozen=True)
class Sums:
    """Resampled column sums ``(B, m + 1)`` (the last column: sum of counts), full-sample
    column sums ``(m,)`` and how the counts were drawn."""

    sums: np.ndarray
    totals: np.ndarray
    resampling: str


def row_blocks(n: int, step: int) -> Iterator[slice]:
    """Consecutive slices of at most ``step`` rows covering ``0 .. n``."""
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


def _distinct_rows(cols: Columns) -> tuple[np.ndarray, np.ndarray] | None:
    """``(rows (m + 1, d), multiplicities (d,))`` when the rows take at most MAX_DISTINCT_ROWS
    distinct values, else None; exact (a hash collision is detected, then None)."""
    n = cols.n
    sample = np.unique(np.linspace(0, n - 1, min(n, DISTINCT_SAMPLE_ROWS)).astype(np.int64))
    if np.unique(_row_hash(cols.block(sample))).size > MAX_DISTINCT_ROWS:
        return None
    hashes = np.empty(n, dtype=np.uint64)
    for sl in row_blocks(n, BLOCK_ROWS):
        hashes[sl] = _row_hash(cols.block(sl))
    uniq, first, inverse, mult = np.unique(
        hashes, return_index=True, return_inverse=True, return_counts=True
    )
    if uniq.size > MAX_DISTINCT_ROWS:
        return None
    rep = cols.block(first)
    for sl in row_blocks(n, BLOCK_ROWS):  # every row equals its group's representative
        if not np.array_equal(cols.block(sl), rep[:, inverse[sl]]):
            return None
    return rep, mult


def resample_sums(cols: Columns, n_resamples: int, gen: np.random.Generator) -> Sums:
    """Resampled sums of every column with one set of counts (see the module notes)."""
    n, m1 = cols.n, cols.m + 1
    key_p, key_m = _keys(gen)
    fns = compiled_sums()
    if n <= EXACT_MAX_ROWS:
        at = np.ascontiguousarray(cols.block(slice(0, n)))
        sums = np.zeros((n_resamples, m1))
        if fns is not None:
            fns["_nb_multinomial_sums"](key_m, at, sums, np.empty(n))
        else:
            _np_multinomial_sums(key_m, at, sums)
        return Sums(sums, at[: cols.m].sum(axis=1), RESAMPLING_KINDS[0])
    grouped = _distinct_rows(cols)
    if grouped is not None:
        rep, mult = grouped
        counts = gen.multinomial(n, mult / n, size=n_resamples).astype(np.float64)
        sums = np.einsum("ki,bi->bk", rep, counts)
        return Sums(sums, rep[: cols.m] @ mult.astype(np.float64), RESAMPLING_KINDS[1])
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
            fns["_nb_poisson_sums"](
                key_p, n_h, start // 4, data, sums, POISSON_TABLE, SUB_BLOCK_ROWS
            )
        else:
            _np_poisson_sums(key_p, n_h, start // 4, data, sums)
    return Sums(sums[:n_resamples], totals, RESAMPLING_KINDS[2])
