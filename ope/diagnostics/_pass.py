"""The diagnostics' own pass: the weight histogram, the KL sums and the exact weight quantiles.

Every moment statistic (ESS, mean weight, clipped sums, the interval inputs) comes from the
moment kernel (:mod:`ope.moments`); this pass adds only what no estimator needs. Each chunk's
weights are computed once into a (P, chunk) block of reused float64 buffers; every policy's
``sum w log w`` is a row reduction of that block and the histogram one count of 2**15 codes per
policy read off the float64 bit pattern (monotone in w >= 0). Exact weight quantiles take a
second pass over only the histogram bins that hold them (none when those bins hold a single
value). There is no Python loop over rows and no dense (n, n_actions) array.

With the numba backend (:func:`ope._kernel.compiled_loops`) both passes are compiled loops over
blocks of rows that form each weight once, bin it, add its ``w log w`` and its clip-profile sums,
with no (P, chunk) temporaries, on one thread per range of rows (as many as the moment kernel
uses, merged in row order); the numpy code is the fallback with the same counts and quantiles,
and the same sums to rounding.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from ope._kernel import PARALLEL_MIN_ROWS, compiled_loops, threads

__all__ = [
    "CHUNK_ROWS",
    "MANTISSA_BITS",
    "HIST_SHIFT",
    "N_BINS",
    "PROFILE_BINS",
    "PassSums",
    "fused_pass",
    "profile_bin_sums",
    "weight_quantiles",
    "octave_mass",
    "weighted_pass",
    "weighted_quantiles",
]

#: Mantissa bits kept by the weight histogram: 2**3 = 8 bins per factor of two (at most 9 %
#: relative width). The bins are read off the float64 bit pattern, which is monotone in w >= 0.
MANTISSA_BITS: Final = 3
HIST_SHIFT: Final = 52 - MANTISSA_BITS

#: Rows per chunk of the pass: the (P, chunk) float64 blocks of one chunk (2**15 rows and 8
#: policies: 2 MB each) stay in the L2/L3 caches between the operations done on them.
CHUNK_ROWS: Final = 1 << 15

#: Histogram bins per policy: every code that ``hist_codes`` can give for a finite w >= 0.
N_BINS: Final = 1 << (11 + MANTISSA_BITS)

#: The smallest positive float64 (a subnormal). ``log(max(w, _TINY))`` is ``log w`` for every
#: w > 0 and finite (-744.4) for w = 0, so ``w * log(max(w, _TINY))`` is exactly 0 there
#: (0 log 0 = 0): a dense logarithm, which numpy vectorizes, instead of a masked one (``where=``),
#: which runs its scalar loop and measured 3x slower.
_TINY: Final = float(np.nextafter(0.0, 1.0))


#: Bins of the clip-profile sums: bin ``b = ceil(log2 w)`` (1 for w in (1, 2], 2 for (2, 4],
#: ...) holds the weights above exactly ``b`` of the profile's levels 1, 2, 4, ...; 1100 covers
#: every finite float64 (exponents up to 1024); bin 0 stays empty (w <= 1 is never clipped).
PROFILE_BINS: Final = 1100

#: Sums per profile bin: count, w, w^2, w l, (w l)^2, l, l^2 with l = r - r_min.
_PROFILE_SUMS: Final = 7


def profile_bin_sums(
    w: np.ndarray, ell: np.ndarray, row_weight: np.ndarray | None = None
) -> np.ndarray:
    """Per-bin sums (shape (7, PROFILE_BINS)) of the rows with ``w > 1`` among ``w``, ``ell``.

    ``b = ceil(log2 w)`` is read off the bit pattern: ``((bits - 1) >> 52) - 1022`` (a power
    of two 2**e gives e, anything in (2**(e-1), 2**e) gives e too). With ``row_weight`` ``v``
    (n,) each row's seven quantities are multiplied by ``v_i`` (the count becomes ``sum v``).
    """
    sub = np.flatnonzero(w > 1.0)
    out = np.zeros((_PROFILE_SUMS, PROFILE_BINS))
    if sub.size == 0:
        return out
    ws, ls = w[sub], ell[sub]
    b = ((ws.view(np.int64) - 1) >> 52) - 1022
    first, last = int(b.min()), int(b.max())
    # the seven quantities as rows of one matrix, summed per bin by one product with the
    # bins' indicator matrix (a few bins per block): 4x faster than seven weighted bincounts
    x = np.empty((_PROFILE_SUMS, sub.size))
    x[0] = 1.0
    x[1] = ws
    np.multiply(ws, ws, out=x[2])
    np.multiply(ws, ls, out=x[3])
    np.multiply(x[3], x[3], out=x[4])
    x[5] = ls
    np.multiply(ls, ls, out=x[6])
    if row_weight is not None:
        x *= row_weight[sub]
    indicator = (b[None, :] == np.arange(first, last + 1)[:, None]).astype(np.float64)
    out[:, first : last + 1] = x @ indicator.T
    return out


def _hist_codes(w: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Monotone bin code of each weight (>= 0): biased exponent and top mantissa bits."""
    return np.right_shift(w.view(np.int64), HIST_SHIFT, out=out)


def _hist_edge_codes(w: np.ndarray, out: np.ndarray, work: np.ndarray) -> np.ndarray:
    """``2 * bin + (w above its bin's lower edge)`` for each weight (>= 0), in ``out``.

    With ``c = bits >> s``, ``(bits + 2**s - 1) >> s`` is ``c`` when the low ``s`` bits are zero
    (w is its bin's lower edge) and ``c + 1`` otherwise; their sum is the code. One unweighted
    count of these codes gives every bin's count and whether the bin holds a single value,
    which is all the exact quantiles need (a weighted count of the mass costs twice as much).
    """
    bits = w.view(np.int64)
    np.add(bits, (1 << HIST_SHIFT) - 1, out=work)
    np.right_shift(work, HIST_SHIFT, out=work)
    np.right_shift(bits, HIST_SHIFT, out=out)
    out += work
    return out


def _bin_low(b: int) -> float:
    """Lower edge of histogram bin ``b`` (the float64 whose top bits are ``b``)."""
    return float(np.array([b << HIST_SHIFT], dtype=np.int64).view(np.float64)[0])


@dataclass
class PassSums:
    """Per-policy results of the pass (arrays of shape (P,) unless noted)."""

    sum_wlogw: np.ndarray
    hist_counts: np.ndarray  # (P, N_BINS)
    hist_above_edge: np.ndarray  # (P, N_BINS): values strictly above their bin's lower edge
    profile_bins: np.ndarray | None = None  # (P, 7, PROFILE_BINS), see profile_bin_sums
    #: The compiled pass's row ranges (one per thread) and each range's (P, N_BINS) bin counts,
    #: from which the quantile gather gives each thread its own slots.
    ranges: list[tuple[int, int]] = field(default_factory=list)
    range_counts: list[np.ndarray] = field(default_factory=list)


def _weight_block(
    propensity: np.ndarray, target: np.ndarray, sl: slice, buf: np.ndarray
) -> np.ndarray:
    """Weights of rows ``sl`` for every policy as a C-ordered (P, rows) float64 block.

    ``buf`` is a flat buffer of at least P * rows floats, reused: fresh large temporaries cost
    page faults that can exceed the arithmetic done on them.
    """
    n_pol, rows = target.shape[1], sl.stop - sl.start
    block = buf[: n_pol * rows].reshape(n_pol, rows)
    np.divide(target[sl].T, propensity[sl], out=block)
    return block


def fused_pass(
    propensity: np.ndarray, target: np.ndarray, ell: np.ndarray | None = None
) -> PassSums:
    """One chunked pass over validated (n,) propensities and (n, P) targets.

    With ``ell = r - r_min`` (n,) it also gathers the clip profile's per-bin sums
    (:func:`profile_bin_sums`) from the same (P, chunk) weight blocks, which are contiguous per
    policy (a column of the row-major (n, P) targets is not, and reading it costs a pass over
    the whole array).
    """
    n, n_pol = target.shape
    loops = _compiled()
    if loops is not None:
        ranges = _row_ranges(n)

        def one_range(lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            counts = np.zeros((n_pol, 2 * N_BINS), dtype=np.int64)
            sum_wlogw = np.zeros(n_pol)
            bins = np.zeros((n_pol if ell is not None else 0, _PROFILE_SUMS, PROFILE_BINS))
            ell_part = np.empty(0) if ell is None else ell[lo:hi]
            loops["_nb_fused_pass"](
                propensity[lo:hi], target[lo:hi], ell_part, counts, sum_wlogw, bins
            )
            return counts, sum_wlogw, bins

        parts = _on_threads(one_range, ranges)
        counts, sum_wlogw, bins = parts[0]
        for c, s, b in parts[1:]:  # merged in row order
            counts = counts + c
            sum_wlogw = sum_wlogw + s
            bins = bins + b
        out = _sums(counts, sum_wlogw, None if ell is None else bins)
        out.ranges = ranges
        out.range_counts = [c.reshape(n_pol, N_BINS, 2).sum(axis=2) for c, _, _ in parts]
        return out
    rows = min(CHUNK_ROWS, n)
    size = n_pol * rows
    w_buf, log_buf = np.empty(size), np.empty(size)
    codes_buf = np.empty(size, dtype=np.int64)
    work_buf = np.empty(size, dtype=np.int64)
    sum_wlogw = np.zeros(n_pol)
    counts = np.zeros(2 * n_pol * N_BINS, dtype=np.int64)
    bin_offset = (np.arange(n_pol, dtype=np.int64) * (2 * N_BINS))[:, None]
    profile = None if ell is None else np.zeros((n_pol, _PROFILE_SUMS, PROFILE_BINS))
    for start in range(0, n, CHUNK_ROWS):  # a loop over chunks, not rows
        sl = slice(start, min(start + CHUNK_ROWS, n))
        w = _weight_block(propensity, target, sl, w_buf)
        m = w.shape[1]
        logw = np.maximum(w, _TINY, out=log_buf[: n_pol * m].reshape(n_pol, m))
        np.log(logw, out=logw)
        sum_wlogw += np.einsum("ij,ij->i", w, logw)
        codes = _hist_edge_codes(
            w, codes_buf[: n_pol * m].reshape(n_pol, m), work_buf[: n_pol * m].reshape(n_pol, m)
        )
        codes += bin_offset
        counts += np.bincount(codes.reshape(-1), minlength=2 * n_pol * N_BINS)
        if profile is not None and ell is not None:
            ell_block = ell[sl]
            for j in range(n_pol):  # a loop over policies
                profile[j] += profile_bin_sums(w[j], ell_block)
    return _sums(counts, sum_wlogw, profile)


def _row_ranges(n: int) -> list[tuple[int, int]]:
    """Contiguous row ranges of whole blocks, one per thread of the compiled pass: as many as
    :func:`ope._kernel.threads` and at least ``PARALLEL_MIN_ROWS`` rows each, and one range
    from any thread but the main one (whose caller already shares the cores)."""
    parts = 1
    if threading.current_thread() is threading.main_thread():
        parts = max(1, min(threads(), n // PARALLEL_MIN_ROWS))
    n_blocks = -(-n // _NB_BLOCK_ROWS)
    parts = max(1, min(parts, n_blocks))
    edges = [min(n, (n_blocks * i // parts) * _NB_BLOCK_ROWS) for i in range(parts + 1)]
    return [(lo, hi) for lo, hi in zip(edges[:-1], edges[1:], strict=True) if hi > lo]


def _on_threads(
    work: Callable[[int, int], tuple[np.ndarray, np.ndarray, np.ndarray]],
    ranges: list[tuple[int, int]],
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``work(lo, hi)`` of every range, the first on this thread and the others on their own
    (the compiled loops release the GIL), in the order of the ranges."""
    if len(ranges) == 1:
        return [work(*ranges[0])]
    with ThreadPoolExecutor(max_workers=len(ranges) - 1) as pool:
        others = [pool.submit(work, lo, hi) for lo, hi in ranges[1:]]
        first = work(*ranges[0])
        return [first, *(f.result() for f in others)]


def _sums(counts: np.ndarray, sum_wlogw: np.ndarray, profile: np.ndarray | None) -> PassSums:
    """The :class:`PassSums` of the edge-code counts (P, 2 N_BINS) of the pass."""
    by_edge = counts.reshape(sum_wlogw.size, N_BINS, 2).astype(np.float64)
    return PassSums(
        sum_wlogw=sum_wlogw,
        hist_counts=by_edge.sum(axis=2),
        hist_above_edge=np.ascontiguousarray(by_edge[:, :, 1]),
        profile_bins=profile,
    )


def weight_quantiles(
    propensity: np.ndarray,
    target: np.ndarray,
    sums: PassSums,
    max_w: np.ndarray,
    qs: Sequence[float],
) -> np.ndarray:
    """Exact (numpy 'linear') weight quantiles of every policy, shape (P, len(qs)).

    The histogram locates the bin of each needed order statistic. The largest is the maximum
    ``max_w`` (from the moment kernel); a bin none of whose values lies above its lower edge
    holds that single value (e.g. the zero weights, or 1 / p under a uniform logger); the values
    of the other needed bins are gathered in a second chunked pass and partitioned.
    """
    n, n_pol = target.shape
    pos = np.asarray(qs, dtype=np.float64) * (n - 1)
    k_lo = np.floor(pos).astype(np.int64)
    k_hi = np.minimum(k_lo + 1, n - 1)
    ks = np.unique(np.concatenate([k_lo, k_hi]))
    values: list[dict[int, float]] = [{} for _ in range(n_pol)]
    needed = np.zeros((n_pol, N_BINS), dtype=bool)
    cums = np.cumsum(sums.hist_counts, axis=1)
    for j in range(n_pol):
        above = sums.hist_above_edge[j]
        if ks[-1] == n - 1:
            values[j][n - 1] = float(max_w[j])
        rest = ks[ks < n - 1]
        bins = np.searchsorted(cums[j], rest, side="right")
        for b in np.unique(bins).tolist():
            if above[b] == 0:
                low = _bin_low(b)
                values[j].update((k, low) for k in rest[bins == b].tolist())
            else:
                needed[j, b] = True
    pending = np.flatnonzero(needed.any(axis=1)).tolist()
    loops = _compiled() if pending else None
    if loops is not None:
        # the values of every needed bin, gathered contiguously by one compiled pass
        sizes = np.where(needed, sums.hist_counts, 0).astype(np.int64)
        first = np.cumsum(sizes.reshape(-1)).reshape(sizes.shape) - sizes
        cursor = np.where(needed, first, -1)
        gathered = np.empty(int(sizes.sum()))
        ranges = sums.ranges or [(0, n)]
        range_counts = sums.range_counts or [sums.hist_counts]
        cursors = []
        for part in range_counts:  # each range writes after the earlier ranges' values
            cursors.append(cursor)
            cursor = np.where(needed, cursor + part.astype(np.int64), -1)

        def one_range(k: int) -> None:
            lo, hi = ranges[k]
            loops["_nb_gather"](
                propensity[lo:hi], target[lo:hi], needed.view(np.uint8), cursors[k], gathered
            )

        if len(ranges) == 1:
            one_range(0)
        else:
            with ThreadPoolExecutor(max_workers=len(ranges) - 1) as pool:
                others = [pool.submit(one_range, k) for k in range(1, len(ranges))]
                one_range(0)
                for f in others:
                    f.result()
        for j in pending:
            bins = np.searchsorted(cums[j], ks, side="right")
            for b in np.flatnonzero(needed[j]).tolist():
                in_bin = ks[(bins == b) & (ks < n - 1)]
                local = in_bin - int(cums[j][b] - sums.hist_counts[j, b])
                start = int(first[j, b])
                part = np.partition(gathered[start : start + int(sizes[j, b])], local)
                values[j].update(zip(in_bin.tolist(), part[local].tolist()))
    elif pending:
        picked: dict[int, list[np.ndarray]] = {j: [] for j in pending}
        buf = np.empty(n_pol * min(CHUNK_ROWS, n))
        codes_buf = np.empty(n_pol * min(CHUNK_ROWS, n), dtype=np.int64)
        for start in range(0, n, CHUNK_ROWS):
            sl = slice(start, min(start + CHUNK_ROWS, n))
            w = _weight_block(propensity, target, sl, buf)
            codes = _hist_codes(w, out=codes_buf[: w.size].reshape(w.shape))
            for j in pending:
                picked[j].append(w[j][np.take(needed[j], codes[j])])
        for j in pending:
            counts = sums.hist_counts[j]
            cum = cums[j]
            bins = np.searchsorted(cum, ks, side="right")
            sel = np.concatenate(picked[j])
            sel_codes = _hist_codes(sel)
            for b in np.flatnonzero(needed[j]).tolist():
                in_bin = ks[(bins == b) & (ks < n - 1)]
                local = in_bin - int(cum[b] - counts[b])
                part = np.partition(sel[sel_codes == b], local)
                values[j].update(zip(in_bin.tolist(), part[local].tolist()))
    out = np.empty((n_pol, len(k_lo)))
    for j in range(n_pol):
        lo = np.array([values[j][k] for k in k_lo.tolist()])
        hi = np.array([values[j][k] for k in k_hi.tolist()])
        out[j] = lo + (pos - k_lo) * (hi - lo)
    return out


def octave_mass(w: np.ndarray, sampling: np.ndarray | None = None) -> np.ndarray:
    """Sum of the weights (``s w`` with sampling weights ``s``) in each factor-of-two bin
    (indexed by the biased exponent)."""
    return np.bincount(
        np.right_shift(w.view(np.int64), HIST_SHIFT + MANTISSA_BITS),
        weights=w if sampling is None else sampling * w,
        minlength=N_BINS >> MANTISSA_BITS,
    )


def weighted_pass(
    propensity: np.ndarray,
    target: np.ndarray,
    sampling: np.ndarray,
    ell: np.ndarray | None = None,
) -> PassSums:
    """The pass of :func:`fused_pass` for rows with sampling weights ``s`` (n,).

    Every sum is sampling-weighted: ``sum_wlogw`` is ``sum s w log w``, ``hist_counts`` the
    sum of ``s`` per histogram bin (the estimated number of population rows in the bin, a float)
    and, with ``ell``, ``profile_bins`` has shape (P, 14, PROFILE_BINS): the seven sums of
    :func:`profile_bin_sums` weighted by ``s`` and then by ``s**2`` (the latter for the
    linearized variances of the Hajek means). Integer weights give the sums of the rows
    repeated ``s_i`` times. ``hist_above_edge`` is empty: the quantiles of weighted rows are
    :func:`weighted_quantiles`.
    """
    n, n_pol = target.shape
    s2 = sampling * sampling
    sum_wlogw = np.zeros(n_pol)
    counts = np.zeros((n_pol, N_BINS))
    profile = None if ell is None else np.zeros((n_pol, 2 * _PROFILE_SUMS, PROFILE_BINS))
    for start in range(0, n, CHUNK_ROWS):  # a loop over chunks, not rows
        sl = slice(start, min(start + CHUNK_ROWS, n))
        s_block = sampling[sl]
        w = np.ascontiguousarray(target[sl].T, dtype=np.float64) / propensity[sl]
        logw = np.log(np.maximum(w, _TINY))
        sum_wlogw += np.einsum("ij,ij,j->i", w, logw, s_block)
        codes = _hist_codes(w)
        for j in range(n_pol):  # a loop over policies
            counts[j] += np.bincount(codes[j], weights=s_block, minlength=N_BINS)
            if profile is not None and ell is not None:
                profile[j, :_PROFILE_SUMS] += profile_bin_sums(w[j], ell[sl], s_block)
                profile[j, _PROFILE_SUMS:] += profile_bin_sums(w[j], ell[sl], s2[sl])
    return PassSums(
        sum_wlogw=sum_wlogw,
        hist_counts=counts,
        hist_above_edge=np.zeros((n_pol, 0)),
        profile_bins=profile,
    )


def weighted_quantiles(w: np.ndarray, sampling: np.ndarray, qs: Sequence[float]) -> np.ndarray:
    """Quantiles of the weights ``w`` (n,) of rows with sampling weights ``s`` (n,).

    The population quantile: with ``S = sum s`` and the weights sorted, ``value(k)`` is the
    first sorted weight whose cumulative ``s`` exceeds ``k``, and the ``q`` quantile is numpy's
    'linear' rule on that sequence: ``value(k) + f (value(k + 1) - value(k))`` with
    ``q (S - 1) = k + f``. Integer weights give numpy's quantile of the rows repeated ``s_i``
    times; unit weights numpy's quantile of ``w`` (to rounding). One sort (O(n log n)).

    >>> import numpy as np
    >>> weighted_quantiles(np.array([1.0, 4.0]), np.array([3.0, 1.0]), [0.5, 1.0]).tolist()
    [1.0, 4.0]
    """
    order = np.argsort(w, kind="stable")
    ws = w[order]
    cum = np.cumsum(sampling[order])
    pos = np.maximum(np.asarray(qs, dtype=np.float64) * (cum[-1] - 1.0), 0.0)
    k = np.floor(pos)
    last = ws.size - 1
    lo = ws[np.minimum(np.searchsorted(cum, k, side="right"), last)]
    hi = ws[np.minimum(np.searchsorted(cum, k + 1.0, side="right"), last)]
    frac = pos - k
    return np.where(frac > 0, lo + frac * (hi - lo), lo)


# ============================================================================================
# the compiled pass (plain Python until ope._kernel.compiled_loops compiles it; never run
# uncompiled) and its numpy twin above: the same counts, the same sums to rounding
# ============================================================================================
#: Rows per block of the compiled pass: the block's weights of one candidate (16 KB) stay in
#: the L1 cache between the loop that forms them and the loop that bins them.
_NB_BLOCK_ROWS: Final = 2048

#: The bits of logarithm of :func:`_nb_fused_pass`: the float64 mantissa field, the field of
#: sqrt(2), the exponent fields of 1 and 1/2, and log 2.
_MANTISSA_MASK: Final = (1 << 52) - 1
_SQRT2_FRACTION: Final = int(np.array([np.sqrt(2.0)]).view(np.int64)[0]) & _MANTISSA_MASK
_ONE_EXPONENT: Final = 1023 << 52
_HALF_EXPONENT: Final = 1022 << 52
_LN2: Final = float(np.log(2.0))


def _nb_fused_pass(p, t, ell, counts, sum_wlogw, profile):
    """Accumulate the histogram codes, ``sum w log w`` and the clip-profile sums of (n,) ``p``
    and (n, P) ``t`` into ``counts`` (P, 2 N_BINS), ``sum_wlogw`` (P,) and ``profile``
    (P, 7, PROFILE_BINS) (left untouched when ``ell`` is empty).

    Candidate by candidate within each block of rows: ``t[i, j] / p[i]`` then divides by a
    different ``p`` in every iteration, so no reciprocal of ``p`` is shared (the weights are
    exactly numpy's ``t / p``). ``log w`` is computed here, vectorized and within 2 ulp
    of ``np.log``: ``log y = 2 atanh(u) = 2 (u + u**3/3 + u**5/5 + ...)`` with
    ``u = (y - 1) / (y + 1)``, ``|u| < 0.172``, to ``u**23`` (a relative error below 2**-56);
    a block with a subnormal weight uses ``np.log`` instead.
    """
    n, n_pol = t.shape
    with_profile = ell.shape[0] == n
    w = np.empty(_NB_BLOCK_ROWS)
    bits = w.view(np.int64)
    mant = np.empty(_NB_BLOCK_ROWS, dtype=np.int64)
    y = mant.view(np.float64)
    expo = np.empty(_NB_BLOCK_ROWS)
    low_mask = (1 << HIST_SHIFT) - 1
    rows = np.empty(_NB_BLOCK_ROWS, dtype=np.int64)
    local = np.zeros((n_pol if with_profile else 0, profile.shape[2], 8))
    for start in range(0, n, _NB_BLOCK_ROWS):
        stop = min(start + _NB_BLOCK_ROWS, n)
        m = stop - start
        for j in range(n_pol):
            for i in range(m):
                w[i] = t[start + i, j] / p[start + i]
            # sum w log w: w = 2**e y, y in [sqrt(2)/2, sqrt(2)) read off the bits
            subnormal = 0
            for i in range(m):
                b = bits[i]
                frac = b & _MANTISSA_MASK
                up = frac > _SQRT2_FRACTION
                mant[i] = frac | (_HALF_EXPONENT if up else _ONE_EXPONENT)
                expo[i] = (b >> 52) - 1023 + (1 if up else 0)
                subnormal += 1 if (b > 0) & (b <= _MANTISSA_MASK) else 0
            acc = 0.0
            if subnormal:
                for i in range(m):
                    acc += w[i] * np.log(max(w[i], _TINY))
            else:
                for i in range(m):
                    f = y[i] - 1.0
                    u = f / (2.0 + f)
                    z = u * u
                    q = 1.0 / 23.0
                    q = q * z + 1.0 / 21.0
                    q = q * z + 1.0 / 19.0
                    q = q * z + 1.0 / 17.0
                    q = q * z + 1.0 / 15.0
                    q = q * z + 1.0 / 13.0
                    q = q * z + 1.0 / 11.0
                    q = q * z + 1.0 / 9.0
                    q = q * z + 1.0 / 7.0
                    q = q * z + 1.0 / 5.0
                    q = q * z + 1.0 / 3.0
                    acc += w[i] * (expo[i] * _LN2 + (2.0 * u + 2.0 * u * z * q))
            sum_wlogw[j] += acc
            # the histogram: zero weights (code 0) counted at once, the other rows listed
            # without a branch and counted by code
            kept = 0
            for i in range(m):
                rows[kept] = i
                kept += 1 if bits[i] != 0 else 0
            counts[j, 0] += m - kept
            for r in range(kept):
                b = bits[rows[r]]
                counts[j, 2 * (b >> HIST_SHIFT) + (1 if b & low_mask else 0)] += 1
            if with_profile:
                # the rows with w > 1, listed without a branch, then their seven sums added
                # to their bin's row of ``local`` (one cache line)
                kept = 0
                for i in range(m):
                    rows[kept] = i
                    kept += 1 if w[i] > 1.0 else 0
                for r in range(kept):
                    i = rows[r]
                    x = w[i]
                    k = ((bits[i] - 1) >> 52) - 1022
                    el = ell[start + i]
                    xl = x * el
                    local[j, k, 0] += 1.0
                    local[j, k, 1] += x
                    local[j, k, 2] += x * x
                    local[j, k, 3] += xl
                    local[j, k, 4] += xl * xl
                    local[j, k, 5] += el
                    local[j, k, 6] += el * el
    if with_profile:
        for j in range(n_pol):
            for k in range(profile.shape[2]):
                for q in range(profile.shape[1]):
                    profile[j, q, k] = local[j, k, q]


def _nb_gather(p, t, needed, cursor, out):
    """Write each weight ``t[i, j] / p[i]`` whose bin ``b`` is ``needed[j, b]`` (uint8) to
    ``out[cursor[j, b]]`` and advance that cursor (the values of a bin end up contiguous).

    A candidate with no needed bin is skipped. The bins are looked up without a branch; the
    rare rows kept are written by a second loop over the block.
    """
    n, n_pol = t.shape
    w = np.empty(_NB_BLOCK_ROWS)
    bits = w.view(np.int64)
    keep = np.empty(_NB_BLOCK_ROWS, dtype=np.uint8)
    wanted = np.zeros(n_pol, dtype=np.bool_)
    for j in range(n_pol):
        wanted[j] = needed[j].any()
    for start in range(0, n, _NB_BLOCK_ROWS):
        stop = min(start + _NB_BLOCK_ROWS, n)
        m = stop - start
        for j in range(n_pol):
            if not wanted[j]:
                continue
            for i in range(m):
                w[i] = t[start + i, j] / p[start + i]
            kept = 0
            for i in range(m):
                k = needed[j, bits[i] >> HIST_SHIFT]
                keep[i] = k
                kept += k
            if kept:
                for i in range(m):
                    if keep[i]:
                        b = bits[i] >> HIST_SHIFT
                        c = cursor[j, b]
                        out[c] = w[i]
                        cursor[j, b] = c + 1


def _compiled() -> dict[str, Any] | None:
    """The compiled pass when the numba backend is in use (compiled on first use), else None."""
    return compiled_loops(__name__, (_nb_fused_pass, _nb_gather))
