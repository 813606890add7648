"""The diagnostics' own pass: the weight histogram, the KL sums and the exact weight quantiles.

Every moment statistic (ESS, mean weight, clipped sums, the interval inputs) comes from the
moment kernel (:mod:`ope.moments`); this pass adds only what no estimator needs. Each chunk's
weights are computed once into a (P, chunk) block of reused float64 buffers; every policy's
``sum w log w`` is a row reduction of that block and the histogram one count of 2**15 codes per
policy read off the float64 bit pattern (monotone in w >= 0). Exact weight quantiles take a
second pass over only the histogram bins that hold them (none when those bins hold a single
value). There is no Python loop over rows and no dense (n, n_actions) array. The candidates'
propensities are an (n, P) matrix or P columns of shape (n,) (the logs' validated ``target__``
columns, read where they are: no (n, P) copy).

With the numba backend (:func:`ope._kernel.compiled_loops`) both passes are compiled loops over
blocks of rows that form each weight once, bin it, add its ``w log w`` and its clip-profile sums,
with no (P, chunk) temporaries, on one thread per range of rows (as many as the moment kernel
uses, on worker threads kept between calls, merged in row order); the second one lists only the
rows within the span of each candidate's needed bins. Told the quantiles, the first pass also
keeps the weights of the bins a sample of the rows predicts to hold them (a speculative gather):
when the full histogram confirms that every needed bin was kept, there is no second pass; the
candidates it missed are gathered again (the quantiles never depend on the guess). The numpy
code is the fallback with the same counts and quantiles, and the same sums to rounding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from ope._kernel import (
    backend,
    column_access,
    column_addresses,
    compiled_loops,
    row_ranges,
    run_threads,
)

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
    "weight_tails",
    "tail_level",
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


#: Spans of bit patterns per candidate in the speculative gather (one per quantile asked for,
#: fewer when they overlap; more quantiles are merged into this many spans).
_SPANS: Final = 4

#: The sample from which the spans are predicted: this many blocks of rows spread over the
#: rows (all the rows when there are fewer), each of _SAMPLE_BLOCK_ROWS rows.
_SAMPLE_BLOCKS: Final = 32
_SAMPLE_BLOCK_ROWS: Final = 1024

#: Margin of the predicted ranks and of the buffers' capacities, in standard errors (a miss
#: costs a second pass over the columns of the candidates missed, not over all of them).
_MARGIN: Final = 4.0


@dataclass
class Speculation:
    """Where the compiled pass keeps the weights of the bins predicted to hold the quantiles:
    candidate ``j``'s span ``s`` is the bit patterns ``[spans[j, s, 0], spans[j, s, 1])``
    (bin-aligned; empty when equal) and its weights go to ``first[j, s]`` onwards of one flat
    buffer per row range, at most ``capacity[j, s]`` of them."""

    spans: np.ndarray  # (P, _SPANS, 2) int64
    first: np.ndarray  # (P, _SPANS) int64
    capacity: np.ndarray  # (P, _SPANS) int64

    @property
    def size(self) -> int:
        """Length of each range's buffer."""
        return int(self.capacity.sum())


def _sample_rows(n: int) -> np.ndarray:
    """Indices of the sample rows: every row, or _SAMPLE_BLOCKS blocks spread over ``n``."""
    if n <= _SAMPLE_BLOCKS * _SAMPLE_BLOCK_ROWS:
        return np.arange(n)
    starts = np.linspace(0, n - _SAMPLE_BLOCK_ROWS, _SAMPLE_BLOCKS).astype(np.int64)
    return (starts[:, None] + np.arange(_SAMPLE_BLOCK_ROWS)).reshape(-1)


def _predict_spans(
    propensity: np.ndarray, target: Targets, qs: Sequence[float], tail: float | None = None
) -> Speculation:
    """Spans of histogram bins likely to hold every candidate's quantiles ``qs`` and capacities
    likely to hold their rows (:class:`Speculation`).

    A guess from the histogram of a sample of the rows (:func:`_sample_rows`): for each
    quantile the bins from the sample's quantile a few standard errors below it to the one a
    few above (to the lowest or highest bin when that rank lies past the sample's). Zero weights are left out (their bin holds the one value 0, read off the
    histogram). Nothing depends on the guess: :func:`weight_quantiles` checks that every bin it
    needs lies in a span and that no buffer overflowed, and gathers the values of the other
    candidates in a second pass. With ``tail`` (a quantile level) one more span runs from that
    quantile's bin to the highest bin: it holds the weights above it (:func:`weight_tails`).
    """
    n, n_pol = _shape(target)
    rows = _sample_rows(n)
    m = rows.size
    p = propensity[rows]
    q = np.asarray([*qs, *([] if tail is None else [tail])], dtype=np.float64)
    margin = _MARGIN * np.sqrt(q * (1.0 - q) / m) + 2.0 / m
    low = np.floor((q - margin) * (m - 1))
    high = np.ceil((q + margin) * (m - 1))
    # a rank past the sample's extremes: the span reaches the lowest (above 0) or highest bin
    open_low, open_high = low < 0, high > m - 1
    if tail is not None:
        open_high[-1] = True
    low, high = np.clip(low, 0, m - 1), np.clip(high, 0, m - 1)
    spans = np.zeros((n_pol, _SPANS, 2), dtype=np.int64)
    capacity = np.zeros((n_pol, _SPANS), dtype=np.int64)
    w = np.empty(m)
    codes = np.empty(m, dtype=np.int64)
    for j in range(n_pol):  # a loop over policies (small arrays, reused: no page faults)
        column = target[:, j] if isinstance(target, np.ndarray) else target[j]
        np.divide(column[rows], p, out=w)
        cum = np.cumsum(np.bincount(_hist_codes(w, out=codes), minlength=N_BINS))
        first_bin = np.where(open_low, 1, np.maximum(np.searchsorted(cum, low, side="right"), 1))
        # the highest bin of a finite weight is below N_BINS - 8 (the exponent field 2047 is inf)
        last_bin = np.where(open_high, N_BINS - 2, np.searchsorted(cum, high, side="right"))
        merged: list[list[int]] = []
        for a, b in sorted(zip(first_bin.tolist(), (last_bin + 1).tolist())):
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        while len(merged) > _SPANS:  # join the two spans with the smallest gap
            gaps = [merged[i + 1][0] - merged[i][1] for i in range(len(merged) - 1)]
            i = int(np.argmin(gaps))
            merged[i : i + 2] = [[merged[i][0], merged[i + 1][1]]]
        for k, (a, b) in enumerate(merged):
            if b > a:
                spans[j, k] = (a << HIST_SHIFT, b << HIST_SHIFT)
                f = (cum[b - 1] - cum[a - 1]) / m
                spread = _MARGIN * np.sqrt(f * (1.0 - f) / m) + 4.0 / m
                capacity[j, k] = min(n, int(np.ceil(n * (f + spread))) + 256)
    first = (np.cumsum(capacity) - capacity.reshape(-1)).reshape(capacity.shape)
    return Speculation(spans, first, capacity)


@dataclass
class PassSums:
    """Per-policy results of the pass (arrays of shape (P,) unless noted)."""

    sum_wlogw: np.ndarray
    hist_counts: np.ndarray  # (P, N_BINS)
    hist_above_edge: np.ndarray  # (P, N_BINS): values strictly above their bin's lower edge
    profile_bins: np.ndarray | None = None  # (P, 7, PROFILE_BINS), see profile_bin_sums
    #: The compiled pass's row ranges (one per thread) and each range's (P, 2 N_BINS) edge-code
    #: counts (bin b's count is the sum of codes 2b and 2b + 1), from which the quantile gather
    #: gives each thread its own slots (summed only when a second pass is needed).
    ranges: list[tuple[int, int]] = field(default_factory=list)
    range_counts: list[np.ndarray] = field(default_factory=list)
    #: The speculative gather of the compiled pass (:func:`_predict_spans`): where it kept the
    #: weights of each candidate's spans and, per row range, its buffer and the number of
    #: weights found in each span (P, _SPANS) (above the capacity: that buffer overflowed).
    speculation: Speculation | None = None
    collected: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    #: The candidates whose quantiles :func:`weight_quantiles` gathered in a second pass (the
    #: speculation missed a needed bin, or was not made).
    gathered_again: list[int] = field(default_factory=list)
    #: ``sum log1p(w (r - r_min) / lambda)`` per policy (the logarithmic-smoothing bound's
    #: sums, :mod:`ope.intervals.smoothing`) when the pass was given the scale, else None.
    sum_log1p: np.ndarray | None = None


#: The candidates' propensities as the pass reads them: an (n, P) matrix, or a sequence of P
#: (n,) columns (e.g. zero-copy views of the logs' ``target__`` columns: no (n, P) block).
Targets = np.ndarray | Sequence[np.ndarray]


def _shape(target: Targets) -> tuple[int, int]:
    """``(n, P)`` of a matrix or of a sequence of columns."""
    if isinstance(target, np.ndarray):
        return int(target.shape[0]), int(target.shape[1])
    return int(target[0].shape[0]), len(target)


def _layout(target: Targets) -> tuple[np.ndarray, np.ndarray]:
    """``(addresses, matrix)`` for the compiled loops: the columns' addresses (int64, P) when
    every column is a contiguous float64 array (``matrix`` then an empty (0, P) array), else no
    address and the candidates as one (n, P) matrix."""
    if not isinstance(target, np.ndarray):
        if all(c.dtype == np.float64 and c.flags.c_contiguous for c in target):
            addresses = column_addresses(target)
            return addresses, np.empty((0, len(target)))
        target = np.column_stack(list(target))
    return np.empty(0, dtype=np.int64), target


def _weight_block(
    propensity: np.ndarray, target: Targets, sl: slice, buf: np.ndarray
) -> np.ndarray:
    """Weights of rows ``sl`` for every policy as a C-ordered (P, rows) float64 block.

    ``buf`` is a flat buffer of at least P * rows floats, reused: fresh large temporaries cost
    page faults that can exceed the arithmetic done on them.
    """
    n_pol, rows = _shape(target)[1], sl.stop - sl.start
    block = buf[: n_pol * rows].reshape(n_pol, rows)
    if isinstance(target, np.ndarray):
        np.divide(target[sl].T, propensity[sl], out=block)
    else:
        for j, column in enumerate(target):  # a loop over policies
            np.divide(column[sl], propensity[sl], out=block[j])
    return block


def fused_pass(
    propensity: np.ndarray,
    target: Targets,
    ell: np.ndarray | None = None,
    quantiles: Sequence[float] = (),
    tail: int = 0,
    smoothing_scale: float = 0.0,
) -> PassSums:
    """One chunked pass over validated (n,) propensities and (n, P) targets (a matrix, or P
    columns of shape (n,) read where they are).

    With ``quantiles`` (those :func:`weight_quantiles` will be asked for) the compiled pass also
    keeps the weights of the histogram bins predicted to hold them (:func:`_predict_spans`), so
    that the exact quantiles need no second pass over the rows when the prediction holds; with
    ``tail`` (a count) it keeps the weights predicted to be among the ``tail`` largest too
    (:func:`weight_tails`).

    With ``ell = r - r_min`` (n,) it also gathers the clip profile's per-bin sums
    (:func:`profile_bin_sums`) from the same (P, chunk) weight blocks, which are contiguous per
    policy (a column of the row-major (n, P) targets is not, and reading it costs a pass over
    the whole array).

    With ``ell`` and ``smoothing_scale`` (lambda > 0) it also sums ``log1p(w ell / lambda)`` per
    policy (``PassSums.sum_log1p``): the logarithmic-smoothing lower bound of each value
    (:func:`ope.intervals.smoothing.bound_from_mean_log`) rides on this pass.
    """
    n, n_pol = _shape(target)
    inv_scale = 1.0 / smoothing_scale if ell is not None and smoothing_scale > 0.0 else 0.0
    loops = _compiled()
    if loops is not None:
        ranges = row_ranges(n, _NB_BLOCK_ROWS)
        addresses, matrix = _layout(target)
        level = tail_level(n, tail) if tail else None
        guess = (
            _predict_spans(propensity, target, quantiles, level)
            if quantiles or level is not None
            else None
        )
        if guess is None:
            zeros = np.zeros((n_pol, _SPANS), dtype=np.int64)
            spans, first, capacity = np.zeros((n_pol, _SPANS, 2), dtype=np.int64), zeros, zeros
        else:
            spans, first, capacity = guess.spans, guess.first, guess.capacity

        def one_range(lo: int, hi: int) -> tuple[np.ndarray, ...]:
            counts = np.zeros((n_pol, 2 * N_BINS + _ZERO_SLOTS), dtype=np.int64)
            sum_wlogw = np.zeros(n_pol)
            sum_log1p = np.zeros(n_pol)
            bins = np.zeros((n_pol if ell is not None else 0, _PROFILE_SUMS, PROFILE_BINS))
            ell_part = np.empty(0) if ell is None else ell[lo:hi]
            # pages of the buffer are mapped only where weights are written
            kept = np.empty(0 if guess is None else guess.size)
            n_kept = np.zeros((n_pol, _SPANS), dtype=np.int64)
            loops["_nb_fused_pass"](
                propensity[lo:hi],
                addresses + 8 * lo,
                matrix[lo:hi],
                ell_part,
                counts,
                sum_wlogw,
                bins,
                spans,
                first,
                capacity,
                kept,
                n_kept,
                inv_scale,
                sum_log1p,
            )
            # the zero weights counted in the spare slots belong to code 0
            counts[:, 0] += counts[:, 2 * N_BINS :].sum(axis=1)
            return counts[:, : 2 * N_BINS], sum_wlogw, bins, kept, n_kept, sum_log1p

        parts = run_threads(one_range, ranges)
        counts, sum_wlogw, bins = parts[0][:3]
        sum_log1p = parts[0][5]
        for c, s, b, _, _, g in parts[1:]:  # merged in row order
            counts = counts + c
            sum_wlogw = sum_wlogw + s
            bins = bins + b
            sum_log1p = sum_log1p + g
        out = _sums(counts, sum_wlogw, None if ell is None else bins)
        out.sum_log1p = sum_log1p if inv_scale > 0.0 else None
        out.ranges = ranges
        out.range_counts = [part[0] for part in parts]
        if guess is not None:
            out.speculation = guess
            out.collected = [(part[3], part[4]) for part in parts]
        return out
    rows = min(CHUNK_ROWS, n)
    size = n_pol * rows
    w_buf, log_buf = np.empty(size), np.empty(size)
    codes_buf = np.empty(size, dtype=np.int64)
    work_buf = np.empty(size, dtype=np.int64)
    sum_wlogw = np.zeros(n_pol)
    sum_log1p = np.zeros(n_pol)
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
            if inv_scale > 0.0:
                x = np.multiply(
                    w, ell_block * inv_scale, out=log_buf[: n_pol * m].reshape(n_pol, m)
                )
                sum_log1p += np.log1p(x, out=x).sum(axis=1)
    out = _sums(counts, sum_wlogw, profile)
    out.sum_log1p = sum_log1p if inv_scale > 0.0 else None
    return out


def _sums(counts: np.ndarray, sum_wlogw: np.ndarray, profile: np.ndarray | None) -> PassSums:
    """The :class:`PassSums` of the edge-code counts (P, 2 N_BINS) of the pass."""
    counts = counts.reshape(sum_wlogw.size, 2 * N_BINS)
    above = counts[:, 1::2]
    return PassSums(
        sum_wlogw=sum_wlogw,
        hist_counts=(counts[:, 0::2] + above).astype(np.float64),
        hist_above_edge=above.astype(np.float64),
        profile_bins=profile,
    )


def weight_quantiles(
    propensity: np.ndarray,
    target: Targets,
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
    n, n_pol = _shape(target)
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
    if sums.speculation is not None and sums.collected:
        for j in pending:
            if _from_collected(sums, j, needed[j], cums[j], ks[ks < n - 1], values[j]):
                needed[j] = False
        pending = [j for j in pending if needed[j].any()]
    sums.gathered_again = pending
    loops = _compiled() if pending else None
    if loops is not None:
        gathered, first, sizes = _gather_bins(loops, propensity, target, sums, needed)
        for j in pending:
            bins = np.searchsorted(cums[j], ks, side="right")
            for b in np.flatnonzero(needed[j]).tolist():
                in_bin = ks[(bins == b) & (ks < n - 1)]
                local = in_bin - int(cums[j][b] - sums.hist_counts[j, b])
                start = int(first[j, b])
                part = gathered[start : start + int(sizes[j, b])]
                part.partition(local)  # in place: the gathered values are this call's own
                values[j].update(zip(in_bin.tolist(), part[local].tolist()))
    elif pending:
        picked = _gather_bins_numpy(propensity, target, needed, pending)
        for j in pending:
            counts = sums.hist_counts[j]
            cum = cums[j]
            bins = np.searchsorted(cum, ks, side="right")
            sel = picked[j]
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


def tail_level(n: int, count: int) -> float:
    """The quantile level of the ``count``-th largest of ``n`` values (numpy's 'linear'
    positions: rank ``n - count`` of ``0 .. n - 1``)."""
    return max(n - count, 0) / max(n - 1, 1)


def weight_tails(
    propensity: np.ndarray, target: Targets, sums: PassSums, count: int
) -> list[np.ndarray]:
    """The ``count`` largest weights of every candidate (fewer when fewer are positive: zero
    weights are never returned), sorted ascending.

    The histogram gives the bin ``b0`` of the ``count``-th largest weight; every weight in the
    bins from ``b0`` up is read from the speculative gather of the pass when one of the
    candidate's spans covers them all (``fused_pass(..., tail=count)``), else gathered by one
    more pass over the columns of the candidates missed; a partition keeps the ``count``
    largest.
    """
    n, n_pol = _shape(target)
    cums = np.cumsum(sums.hist_counts, axis=1)
    needed = np.zeros((n_pol, N_BINS), dtype=bool)
    out: list[np.ndarray] = [np.empty(0) for _ in range(n_pol)]
    bounds: dict[int, tuple[int, int]] = {}
    for j in range(n_pol):  # a loop over policies
        b0 = max(int(np.searchsorted(cums[j], max(n - count, 0), side="right")), 1)
        filled = np.flatnonzero(sums.hist_counts[j, b0:])
        if filled.size:
            bounds[j] = (b0, b0 + int(filled[-1]) + 1)
            needed[j, bounds[j][0] : bounds[j][1]] = True
    pending = []
    guess = sums.speculation
    for j, (b0, end) in bounds.items():
        values = None
        if guess is not None and sums.collected:
            spans = guess.spans[j] >> HIST_SHIFT
            hit = np.flatnonzero((spans[:, 0] <= b0) & (spans[:, 1] >= end))
            if hit.size and all(
                int(n_kept[j, hit[0]]) <= guess.capacity[j, hit[0]] for _, n_kept in sums.collected
            ):
                s0, start = int(hit[0]), int(guess.first[j, hit[0]])
                pieces = [kept[start : start + n_kept[j, s0]] for kept, n_kept in sums.collected]
                values = np.concatenate(pieces)
                values = values[(values.view(np.int64) >> HIST_SHIFT) >= b0]
        if values is None:
            pending.append(j)
        else:
            out[j] = values
    loops = _compiled() if pending else None
    if pending and loops is not None:
        only = needed & np.isin(np.arange(n_pol), pending)[:, None]
        gathered, first, sizes = _gather_bins(loops, propensity, target, sums, only)
        for j in pending:
            b0, end = bounds[j]
            out[j] = gathered[first[j, b0] : first[j, end - 1] + sizes[j, end - 1]]
    elif pending:
        picked = _gather_bins_numpy(propensity, target, needed, pending)
        for j in pending:
            out[j] = picked[j]
    for j in bounds:
        values = out[j]
        if values.size > count:
            values = np.partition(values, values.size - count)[values.size - count :]
        out[j] = np.sort(values)
    return out


def _gather_bins(
    loops: dict[str, Any],
    propensity: np.ndarray,
    target: Targets,
    sums: PassSums,
    needed: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(gathered, first, sizes)``: the weights of every ``needed`` (P, N_BINS) bin, gathered
    by one compiled pass (threads over the pass's row ranges), bin ``b`` of candidate ``j``
    at ``gathered[first[j, b] : first[j, b] + sizes[j, b]]`` (a candidate's needed bins follow
    each other in bin order)."""
    n = _shape(target)[0]
    sizes = np.where(needed, sums.hist_counts, 0).astype(np.int64)
    first = np.cumsum(sizes.reshape(-1)).reshape(sizes.shape) - sizes
    # the rows of bins not needed are written to one slot past the values, never read
    spare = int(sizes.sum())
    cursor = np.where(needed, first, spare)
    gathered = np.empty(spare + 1)
    ranges = sums.ranges or [(0, n)]
    range_counts = [c[:, 0::2] + c[:, 1::2] for c in sums.range_counts] or [sums.hist_counts]
    cursors = []
    for part in range_counts:  # each range writes after the earlier ranges' values
        cursors.append(cursor)
        cursor = np.where(needed, cursor + part.astype(np.int64), spare)

    addresses, matrix = _layout(target)
    # each candidate's needed bins lie within [first, last]: a row outside that range of
    # bit patterns is passed over without looking its bin up
    code = np.arange(N_BINS, dtype=np.int64)
    step = needed.astype(np.int64)
    low_bits = np.where(needed, code, N_BINS - 1).min(axis=1) << HIST_SHIFT
    high_bits = (np.where(needed, code, -1).max(axis=1) + 1) << HIST_SHIFT

    def one_range(k: int) -> None:
        lo, hi = ranges[k]
        loops["_nb_gather"](
            propensity[lo:hi],
            addresses + 8 * lo,
            matrix[lo:hi],
            step,
            low_bits,
            high_bits,
            cursors[k],
            gathered,
        )

    run_threads(lambda k, _: one_range(k), [(k, k + 1) for k in range(len(ranges))])
    return gathered, first, sizes


def _gather_bins_numpy(
    propensity: np.ndarray, target: Targets, needed: np.ndarray, pending: Sequence[int]
) -> dict[int, np.ndarray]:
    """The numpy twin of :func:`_gather_bins`: candidate ``j``'s weights in its ``needed``
    bins (in row order, bins mixed), for each ``j`` of ``pending``; one chunked pass."""
    n, n_pol = _shape(target)
    picked: dict[int, list[np.ndarray]] = {j: [] for j in pending}
    buf = np.empty(n_pol * min(CHUNK_ROWS, n))
    codes_buf = np.empty(n_pol * min(CHUNK_ROWS, n), dtype=np.int64)
    for start in range(0, n, CHUNK_ROWS):  # a loop over chunks, not rows
        sl = slice(start, min(start + CHUNK_ROWS, n))
        w = _weight_block(propensity, target, sl, buf)
        codes = _hist_codes(w, out=codes_buf[: w.size].reshape(w.shape))
        for j in pending:  # a loop over policies
            picked[j].append(w[j][np.take(needed[j], codes[j])])
    return {j: np.concatenate(picked[j]) for j in pending}


def _from_collected(
    sums: PassSums,
    j: int,
    needed: np.ndarray,
    cum: np.ndarray,
    ks: np.ndarray,
    values: dict[int, float],
) -> bool:
    """The order statistics ``ks`` of candidate ``j`` in its ``needed`` bins, read off the
    weights its spans kept in the pass (into ``values``), or False (nothing written) when a
    needed bin lies outside every span or a buffer of a span holding one overflowed.

    A span ``[a, b)`` of bins kept all its rows (the histogram says how many), so the k-th
    smallest weight, when in its needed bins ``[low, high)``, is the ``k - cum[low - 1]``-th
    smallest of the kept weights in those bins: one compiled selection per span
    (:func:`_nb_select`; the weights are kept only by the compiled pass).
    """
    loops = _compiled()
    if loops is None:  # the backend changed since the pass: the second pass gathers them
        return False
    guess = sums.speculation
    assert guess is not None
    spans = guess.spans[j] >> HIST_SHIFT  # bins [a, b), empty when a == b
    bins = np.searchsorted(cum, ks, side="right")
    by_span: dict[int, list[int]] = {}
    for b in np.flatnonzero(needed).tolist():
        hit = np.flatnonzero((spans[:, 0] <= b) & (b < spans[:, 1]))
        if hit.size == 0:
            return False
        by_span.setdefault(int(hit[0]), []).append(b)
    found: dict[int, float] = {}
    start, cap = guess.first[j], guess.capacity[j]
    for s, span_bins in by_span.items():
        if any(int(n_kept[j, s]) > cap[s] for _, n_kept in sums.collected):
            return False
        pieces = [kept[start[s] : start[s] + n_kept[j, s]] for kept, n_kept in sums.collected]
        part = pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
        a, b = int(spans[s, 0]), int(spans[s, 1])
        if part.size != int(cum[b - 1]) - int(cum[a - 1]):  # never: every row was kept
            return False
        low, high = min(span_bins), max(span_bins) + 1
        below = int(cum[low - 1])  # low >= 1: zero weights are never kept
        in_span = ks[np.isin(bins, span_bins)]
        chosen = np.empty(in_span.size)
        if loops["_nb_select"](part, low, high, in_span - below, chosen) < in_span.size:
            return False  # never: the histogram counted these values
        found.update(zip(in_span.tolist(), chosen.tolist()))
    values.update(found)
    return True


#: More mantissa bits by which :func:`_nb_select` counts the values of a bin (sub-bins still
#: monotone in the value).
_FINE_BITS: Final = 8


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

    The population quantile, with the sampling weights counted in units of the smallest
    (``u_i = s_i / min s``: the quantiles do not depend on the weights' scale, as no other
    diagnostic does): with ``U = sum u`` and the weights sorted, ``value(k)`` is the first
    sorted weight whose cumulative ``u`` exceeds ``k``, and the ``q`` quantile is numpy's
    'linear' rule on that sequence: ``value(k) + f (value(k + 1) - value(k))`` with
    ``q (U - 1) = k + f``. Equal weights (any scale) give numpy's quantile of ``w`` (to
    rounding); integer weights whose smallest is 1 (Horvitz-Thompson weights of a log that
    kept some rows surely) numpy's quantile of the rows repeated ``s_i`` times. One sort
    (O(n log n)).

    >>> import numpy as np
    >>> weighted_quantiles(np.array([1.0, 4.0]), np.array([3.0, 1.0]), [0.5, 1.0]).tolist()
    [1.0, 4.0]
    >>> w = np.array([0.5, 2.0, 3.0])
    >>> weighted_quantiles(w, np.full(3, 1 / 3), [0.5, 0.75]).tolist()  # = np.quantile(w, q)
    [2.0, 2.5]
    """
    order = np.argsort(w, kind="stable")
    ws = w[order]
    units = sampling[order]
    cum = np.cumsum(units / units.min())
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
_SQRT2: Final = float(np.sqrt(2.0))


#: Spare counters after the histogram codes of :func:`_nb_fused_pass`, taken in turn by zero
#: weights (code 0) and added to code 0 afterwards (a power of two).
_ZERO_SLOTS: Final = 16

#: A block's clip-profile sums are taken by one vectorized sweep of its rows per profile bin
#: (instead of one scattered addition of seven sums per listed row) when its rows with w > 1
#: outnumber ``1 / _PROFILE_SWEEP_RATIO`` of its rows times the bins they span: a soft
#: candidate, most of whose weights lie in one or two factors of two, above 1.
_PROFILE_SWEEP_RATIO: Final = 8


def _nb_fused_pass(
    p,
    cols,
    t,
    ell,
    counts,
    sum_wlogw,
    profile,
    spans,
    first,
    capacity,
    kept_w,
    n_kept,
    inv_scale,
    sum_log1p,
):
    """Accumulate the histogram codes, ``sum w log w`` and the clip-profile sums of (n,) ``p``
    and the targets into ``counts`` (P, 2 N_BINS + _ZERO_SLOTS; the zero weights in the last
    _ZERO_SLOTS), ``sum_wlogw`` (P,) and ``profile``
    (P, 7, PROFILE_BINS) (left untouched when ``ell`` is empty). The targets are the float64
    columns at the addresses ``cols`` (P,) when it is not empty, else the (n, P) matrix ``t``.
    With ``ell`` and ``inv_scale`` > 0 it also adds ``sum log1p(w ell inv_scale)`` to
    ``sum_log1p`` (P,): the logarithmic-smoothing bound's sums (``inv_scale = 1 / lambda``).

    The weights whose bit pattern lies in a span ``spans[j, s]`` of the candidate (``[low,
    high)``, disjoint, empty when equal) are written to ``kept_w[first[j, s] + c]`` with ``c``
    the number ``n_kept[j, s]`` found before, while ``c < capacity[j, s]``; ``n_kept`` counts
    them all (above the capacity: the span's buffer overflowed).

    Candidate by candidate within each block of rows: ``t[i, j] / p[i]`` then divides by a
    different ``p`` in every iteration, so no reciprocal of ``p`` is shared (the weights are
    exactly numpy's ``t / p``). ``log w`` is computed here, vectorized and within 2 ulp
    of ``np.log``: ``log y = 2 atanh(u) = 2 (u + u**3/3 + u**5/5 + ...)`` with
    ``u = (y - 1) / (y + 1)``, ``|u| < 0.172``, to ``u**23`` (a relative error below 2**-56);
    a block with a subnormal weight uses ``np.log`` instead. ``log1p x`` is the same series on
    ``z = 1 + x``, with ``f = x`` itself (not ``z - 1``, which lost x's low bits) when
    ``z < sqrt(2)``.
    """
    n = p.shape[0]
    n_pol = counts.shape[0]
    by_column = cols.shape[0] > 0
    with_profile = ell.shape[0] == n
    w = np.empty(_NB_BLOCK_ROWS)
    bits = w.view(np.int64)
    mant = np.empty(_NB_BLOCK_ROWS, dtype=np.int64)
    y = mant.view(np.float64)
    expo = np.empty(_NB_BLOCK_ROWS)
    # log1p(x): z = 1 + x, x itself, and the multipliers of the logarithms (w, else ones)
    zb = np.empty(_NB_BLOCK_ROWS)
    xs = np.empty(_NB_BLOCK_ROWS)
    cw = np.empty(_NB_BLOCK_ROWS)
    ones = np.ones(_NB_BLOCK_ROWS)
    fb = np.empty(_NB_BLOCK_ROWS)
    halves = 2 if with_profile and inv_scale > 0.0 else 1
    low_mask = (1 << HIST_SHIFT) - 1
    rows = np.empty(_NB_BLOCK_ROWS, dtype=np.int64)
    local = np.zeros((n_pol if with_profile else 0, profile.shape[2], 8))
    spare = counts.shape[1] - _ZERO_SLOTS
    slot = np.empty(_NB_BLOCK_ROWS, dtype=np.int64)
    inside = np.empty(_NB_BLOCK_ROWS, dtype=np.int64)
    which = np.empty(_NB_BLOCK_ROWS, dtype=np.int64)
    picked = np.empty(_NB_BLOCK_ROWS, dtype=np.int64)
    for start in range(0, n, _NB_BLOCK_ROWS):
        stop = min(start + _NB_BLOCK_ROWS, n)
        m = stop - start
        # the block's rows as slices from 0: an index ``start + i`` would keep the loops
        # below from vectorizing
        pb = p[start:stop]
        tb = t[start:stop]
        for j in range(n_pol):
            if by_column:
                col = _nb_carray(_nb_pointer(cols[j] + 8 * start), m, np.float64)
                for i in range(m):
                    w[i] = col[i] / pb[i]
            else:
                for i in range(m):
                    w[i] = tb[i, j] / pb[i]
            # sum w log w (half 0) and sum log1p(w ell / lambda) (half 1): the logarithm of
            # v = w, else z = 1 + x, as v = 2**e y, y in [sqrt(2)/2, sqrt(2)) read off the bits
            for half in range(halves):
                # the rows whose term is not 0 (w > 0; x > 0), listed without a branch: all of
                # x's when the bound is asked for, w's when a quarter or more of them are 0
                if half == 0:
                    nonzero = 0
                    for i in range(m):
                        nonzero += 1 if bits[i] != 0 else 0
                    if 4 * nonzero < 3 * m:
                        mm = 0
                        for i in range(m):
                            cw[mm] = w[i]
                            mm += 1 if bits[i] != 0 else 0
                        src = cw
                        mult = cw
                    else:
                        mm = m
                        src = w
                        mult = w
                else:
                    eb = ell[start:stop]
                    mm = 0
                    for i in range(m):
                        x = w[i] * eb[i] * inv_scale
                        xs[mm] = x
                        mm += 1 if x > 0.0 else 0
                    for i in range(mm):
                        zb[i] = 1.0 + xs[i]
                    src = zb
                    mult = ones
                src_bits = src.view(np.int64)
                subnormal = 0
                for i in range(mm):
                    b = src_bits[i]
                    frac = b & _MANTISSA_MASK
                    up = frac > _SQRT2_FRACTION
                    mant[i] = frac | (_HALF_EXPONENT if up else _ONE_EXPONENT)
                    expo[i] = (b >> 52) - 1023 + (1 if up else 0)
                    subnormal += 1 if (b > 0) & (b <= _MANTISSA_MASK) else 0
                for i in range(mm):
                    fb[i] = y[i] - 1.0
                if half == 1:  # z < sqrt(2): y = z and e = 0, and f = x exactly
                    for i in range(mm):
                        fb[i] = xs[i] if zb[i] < _SQRT2 else fb[i]
                acc = 0.0
                if subnormal:  # w only: z >= 1
                    for i in range(mm):
                        acc += mult[i] * np.log(max(src[i], _TINY))
                else:
                    for i in range(mm):
                        f = fb[i]
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
                        acc += mult[i] * (expo[i] * _LN2 + (2.0 * u + 2.0 * u * z * q))
                if half == 0:
                    sum_wlogw[j] += acc
                else:
                    sum_log1p[j] += acc
            # the histogram: each row's code (vectorized), then one count per row; zero
            # weights (code 0) are counted in the _ZERO_SLOTS spare slots in turn, so that a
            # run of them does not wait on one counter
            l0, h0 = spans[j, 0, 0], spans[j, 0, 1]
            l1, h1 = spans[j, 1, 0], spans[j, 1, 1]
            l2, h2 = spans[j, 2, 0], spans[j, 2, 1]
            l3, h3 = spans[j, 3, 0], spans[j, 3, 1]
            for i in range(m):
                b = bits[i]
                code = 2 * (b >> HIST_SHIFT) + (1 if b & low_mask else 0)
                slot[i] = code if b != 0 else spare + (i & (_ZERO_SLOTS - 1))
                in1 = (b >= l1) & (b < h1)
                in2 = (b >= l2) & (b < h2)
                in3 = (b >= l3) & (b < h3)
                inside[i] = 1 if ((b >= l0) & (b < h0)) | in1 | in2 | in3 else 0
                which[i] = (1 if in1 else 0) + (2 if in2 else 0) + (3 if in3 else 0)
            # one count per row and, in the same loop, the rows in the spans listed without
            # a branch
            hist_j = counts[j]
            n_in = 0
            for i in range(m):
                hist_j[slot[i]] += 1
                picked[n_in] = i
                n_in += inside[i]
            # the speculative gather: the block's weights in the spans, while they fit
            for r in range(n_in):
                i = picked[r]
                k = which[i]
                c = n_kept[j, k]
                if c < capacity[j, k]:
                    kept_w[first[j, k] + c] = w[i]
                n_kept[j, k] = c + 1
            if with_profile:
                local_j = local[j]
                eb = ell[start:stop]
                # the rows with w > 1 and the range of their profile bins
                big = 0
                k_lo = PROFILE_BINS
                k_hi = -1
                for i in range(m):
                    k = ((bits[i] - 1) >> 52) - 1022
                    on = w[i] > 1.0
                    big += 1 if on else 0
                    k_lo = min(k_lo, k if on else PROFILE_BINS)
                    k_hi = max(k_hi, k if on else -1)
                kept = 0
                if big > 0 and big * _PROFILE_SWEEP_RATIO > (k_hi - k_lo + 1) * m:
                    # most rows in a few bins: one vectorized sweep of the block per bin
                    for k in range(k_lo, k_hi + 1):
                        s0 = 0.0
                        s1 = 0.0
                        s2 = 0.0
                        s3 = 0.0
                        s4 = 0.0
                        s5 = 0.0
                        s6 = 0.0
                        for i in range(m):
                            sel = (w[i] > 1.0) & (((bits[i] - 1) >> 52) - 1022 == k)
                            x = w[i] if sel else 0.0
                            el = eb[i] if sel else 0.0
                            xl = x * el
                            s0 += 1.0 if sel else 0.0
                            s1 += x
                            s2 += x * x
                            s3 += xl
                            s4 += xl * xl
                            s5 += el
                            s6 += el * el
                        acc_k = local_j[k]
                        acc_k[0] += s0
                        acc_k[1] += s1
                        acc_k[2] += s2
                        acc_k[3] += s3
                        acc_k[4] += s4
                        acc_k[5] += s5
                        acc_k[6] += s6
                elif big > 0:  # else the rows with w > 1 listed without a branch
                    for i in range(m):
                        rows[kept] = i
                        kept += 1 if w[i] > 1.0 else 0
                # the seven sums of each listed row added to its bin's row of ``local`` (one
                # cache line)
                for r in range(kept):
                    i = rows[r]
                    x = w[i]
                    k = ((bits[i] - 1) >> 52) - 1022
                    el = eb[i]
                    xl = x * el
                    acc_k = local_j[k]
                    acc_k[0] += 1.0
                    acc_k[1] += x
                    acc_k[2] += x * x
                    acc_k[3] += xl
                    acc_k[4] += xl * xl
                    acc_k[5] += el
                    acc_k[6] += el * el
    if with_profile:
        for j in range(n_pol):
            for k in range(profile.shape[2]):
                for q in range(profile.shape[1]):
                    profile[j, q, k] = local[j, k, q]


def _nb_gather(p, cols, t, step, low_bits, high_bits, cursor, out):
    """Write each weight ``w = t[i, j] / p[i]`` whose bin ``b`` is needed (``step[j, b]`` 1,
    else 0) to ``out[cursor[j, b]]`` and advance that cursor (the values of a bin end up
    contiguous). The targets are read as in :func:`_nb_fused_pass` (columns at ``cols``, else
    ``t``).

    A candidate with no needed bin is skipped. The rows whose bit pattern lies in
    ``[low_bits[j], high_bits[j])`` (the span of the candidate's needed bins) are listed
    without a branch, and written without one: the cursor of a bin not needed points at a
    spare slot (the last of ``out``) and does not advance.
    """
    n = p.shape[0]
    n_pol = step.shape[0]
    by_column = cols.shape[0] > 0
    w = np.empty(_NB_BLOCK_ROWS)
    bits = w.view(np.int64)
    rows = np.empty(_NB_BLOCK_ROWS, dtype=np.int64)
    wanted = np.zeros(n_pol, dtype=np.bool_)
    for j in range(n_pol):
        wanted[j] = step[j].any()
    for start in range(0, n, _NB_BLOCK_ROWS):
        stop = min(start + _NB_BLOCK_ROWS, n)
        m = stop - start
        # the block's rows as slices from 0: an index ``start + i`` would keep the loops
        # below from vectorizing
        pb = p[start:stop]
        tb = t[start:stop]
        for j in range(n_pol):
            if not wanted[j]:
                continue
            if by_column:
                col = _nb_carray(_nb_pointer(cols[j] + 8 * start), m, np.float64)
                for i in range(m):
                    w[i] = col[i] / pb[i]
            else:
                for i in range(m):
                    w[i] = tb[i, j] / pb[i]
            lo = low_bits[j]
            hi = high_bits[j]
            kept = 0
            for i in range(m):
                rows[kept] = i
                kept += 1 if (bits[i] >= lo) & (bits[i] < hi) else 0
            for r in range(kept):
                i = rows[r]
                b = bits[i] >> HIST_SHIFT
                c = cursor[j, b]
                out[c] = w[i]
                cursor[j, b] = c + step[j, b]


def _nb_select(values, low, high, ranks, out):
    """``out[r]``: the ``ranks[r]``-th smallest (from 0; ``ranks`` ascending) of the ``values``
    whose histogram bin lies in ``[low, high)`` (the others are passed over; ``values`` is not
    changed). Returns the number of ranks found: all of them unless a rank is past the values
    in the bins.

    One read counts the values by sub-bin (:data:`_FINE_BITS` more mantissa bits, still
    monotone); each sub-bin holding a needed rank is then copied out and sorted (a few values
    each): exact order statistics without a partition of every value."""
    bits = values.view(np.int64)
    shift = HIST_SHIFT - _FINE_BITS
    base = low << _FINE_BITS
    n_fine = (high - low) << _FINE_BITS
    counts = np.zeros(n_fine + 1, dtype=np.int64)  # the last: values outside the bins
    for i in range(values.shape[0]):
        f = (bits[i] >> shift) - base
        counts[f if (f >= 0) & (f < n_fine) else n_fine] += 1
    n_ranks = ranks.shape[0]
    sub = np.empty(n_ranks, dtype=np.int64)
    before = np.empty(n_ranks, dtype=np.int64)
    seen = 0
    r = 0
    for f in range(n_fine):
        upto = seen + counts[f]
        while r < n_ranks and ranks[r] < upto:
            sub[r] = f
            before[r] = seen
            r += 1
        seen = upto
    found = r
    buf = np.empty(values.shape[0])
    r = 0
    while r < found:
        f = sub[r]
        m = 0
        for i in range(values.shape[0]):
            if (bits[i] >> shift) - base == f:
                buf[m] = values[i]
                m += 1
        picked = np.sort(buf[:m])
        while r < found and sub[r] == f:
            out[r] = picked[ranks[r] - before[r]]
            r += 1
    return found


#: Set by :func:`_compiled` before the loops compile: the kernel's column access
#: (:func:`ope._kernel.column_access`: an address as a ``void *``, and ``numba.carray``).
_nb_pointer: Any = None
_nb_carray: Any = None


def _compiled() -> dict[str, Any] | None:
    """The compiled pass when the numba backend is in use (compiled on first use), else None."""
    global _nb_pointer, _nb_carray
    if _nb_pointer is None and backend() == "numba":
        _nb_pointer, _nb_carray = column_access()
    return compiled_loops(__name__, (_nb_fused_pass, _nb_gather, _nb_select))
