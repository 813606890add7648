"""The event_id repeat detector of readers that see the logs in parts.

Within one table, ``ope.schema.check_bandit_rows`` rejects every occurrence of an ``event_id``
after its first (``event_id_duplicate``). A reader that sees the rows in parts must also reject an
id that occurred in an *earlier* part, so that a complete pass keeps exactly the rows an eager read
keeps: :func:`mark_repeats` does it for the batches of ``ope.scan_logs`` with a compact set of the
ids seen so far (:class:`SeenIds`), :func:`mark_known` for a partition of
``ope.distributed.evaluate_distributed`` given the ids that earlier partitions hold. Both add to
the same ``event_id_duplicate`` mask.

Examples
--------
>>> import numpy as np, pyarrow as pa
>>> from ope._dedup import SeenIds, mark_repeats
>>> seen = SeenIds()
>>> masks = {}
>>> mark_repeats(pa.table({"event_id": [1, 2]}), masks, seen)
>>> mark_repeats(pa.table({"event_id": [3, 1]}), masks, seen)
>>> masks["event_id_duplicate"].tolist()
[False, True]
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "BITMAP_FACTOR",
    "BITMAP_MIN_BYTES",
    "SeenIds",
    "mark_repeats",
    "mark_known",
    "merge_sorted",
]

#: Dense integer ids (max - min < this × n) are checked for duplicates with a byte map of
#: (max - min + 1) bytes, which is O(n) and costs at most 8 bytes per row; sparser ids fall
#: back to an O(n log n) sort.
BITMAP_FACTOR: Final[int] = 8

#: ... and any id range up to 16 MB of byte map is cheap enough (a fixed, transient cost
#: smaller than one 2M-row float64 column) to use the map even for sparse ids in small batches.
BITMAP_MIN_BYTES: Final[int] = 1 << 24


def _add_repeats(masks: dict[str, np.ndarray], cross: np.ndarray) -> None:
    old = masks.get("event_id_duplicate")
    if cross.any() or old is not None:
        masks["event_id_duplicate"] = cross if old is None else old | cross


def mark_repeats(table: pa.Table, masks: dict[str, np.ndarray], seen: SeenIds) -> None:
    """Reject the rows of ``table`` whose ``event_id`` is in ``seen``; add the new ids to it.

    ``masks`` are the table's own rejection masks (``ope.schema.check_bandit_rows``): rows
    without an id or already rejected as repeats within the table are skipped, so the ids
    looked up are distinct.
    """
    eid = table.column("event_id")
    first = np.ones(table.num_rows, dtype=bool)
    for reason in ("event_id_missing", "event_id_duplicate"):
        if reason in masks:
            first &= ~masks[reason]
    rows = np.flatnonzero(first) if not first.all() else None
    ids = eid if rows is None else eid.take(pa.array(rows))
    hit = seen.add_new(SeenIds.as_numpy(ids))
    if hit.any():
        cross = np.zeros(table.num_rows, dtype=bool)
        cross[rows[hit] if rows is not None else np.flatnonzero(hit)] = True
        _add_repeats(masks, cross)


def mark_known(table: pa.Table, masks: dict[str, np.ndarray], known: Any) -> None:
    """Reject the rows of ``table`` whose ``event_id`` is among ``known`` (ids of earlier parts).

    ``known`` is a numpy int64 array or a pyarrow array of ids (None or empty: nothing to do).
    """
    if known is None or not len(known):
        return
    value_set = pa.array(known) if isinstance(known, np.ndarray) else known
    eid = table.column("event_id")
    cross = pc.fill_null(pc.is_in(eid, value_set=value_set), False).to_numpy(zero_copy_only=False)
    _add_repeats(masks, cross)


#: With source rows kept (``SeenIds(lines=True)``), a string id's key is the high 32 bits of
#: its hash with its first source row in the low 32 (:data:`_LINE_BITS`): the row costs no
#: memory, and a lookup compares the high bits (then the bytes, as always).
_LINE_BITS: Final = 32


class SeenIds:
    """The event ids of earlier batches of a scan, stored compactly (see :func:`mark_repeats`).

    Integer ids that arrive as whole ranges above every id seen before (a batch of distinct ids
    filling ``[min, max]``: the usual increasing event id) are kept as a few intervals, with no
    per-id work; the first batch that is not such a range turns them into ids. Integer ids live
    in a byte map over ``[min, max]`` while it stays dense (at most
    ``BITMAP_FACTOR`` bytes per id seen, or ``BITMAP_MIN_BYTES`` in all); beyond that they live
    in a few sorted numpy runs (a log-structured set: 8 bytes per int64 id; lookups are binary
    searches of sorted needles). String ids live in runs sorted by a 64-bit hash, each hash
    next to the id's bytes (fixed width: the longest id plus one terminator byte), so lookups
    are binary searches over integers and every hash match is confirmed on the bytes: the set
    is exact, a hash collision only costs a second comparison.

    With ``lines=True`` the set also remembers where each string id was first seen: the source
    row given to :meth:`add_new` replaces the low 32 bits of the id's hash key (a row from
    2**32 - 1 on is kept as unknown), and :meth:`first_lines` finds it again. Keys of 32 hash
    bits still tell almost every two ids apart (a lookup among ``n`` ids meets ``n / 2**32``
    others of its bits), and each match is confirmed on the bytes.
    """

    def __init__(self, *, lines: bool = False) -> None:
        self._lines = lines
        self._runs: list[np.ndarray] = []
        self._str_runs: list[tuple[np.ndarray, np.ndarray]] = []  # (sorted hashes, their ids)
        self._map: np.ndarray | None = None  # byte map of integer ids
        self._lo = 0
        self._count = 0
        self._max: int | None = None
        self._ranges: list[list[int]] = []  # disjoint [lo, hi] id intervals, in order

    @property
    def nbytes(self) -> int:
        return (
            sum(r.nbytes for r in self._runs)
            + sum(h.nbytes + b.nbytes for h, b in self._str_runs)
            + (self._map.nbytes if self._map is not None else 0)
        )

    @staticmethod
    def as_numpy(ids: pa.Array | pa.ChunkedArray) -> np.ndarray:
        if pa.types.is_integer(ids.type):
            return np.asarray(ids.to_numpy(), dtype=np.int64)
        return _fixed_width_bytes(ids)

    def contains(self, x: np.ndarray) -> np.ndarray:
        """Which of the (distinct) ids ``x`` were seen before."""
        if x.size == 0 or self._count == 0:
            return np.zeros(x.size, dtype=bool)
        if x.dtype.kind == "S":
            return self._contains_strings(x)
        if x.dtype.kind == "i":
            if self._max is not None and int(x.min()) > self._max:
                return np.zeros(x.size, dtype=bool)  # ids increasing across batches
            self._expand_ranges()
            if self._map is not None:
                rel = x - self._lo
                inside = (rel >= 0) & (rel < self._map.size)
                hit = np.zeros(x.size, dtype=bool)
                hit[inside] = self._map[rel[inside]]
                return hit
        xs = np.sort(x)
        hs = np.zeros(x.size, dtype=bool)
        for run in self._runs:
            pos = np.searchsorted(run, xs)
            np.minimum(pos, run.size - 1, out=pos)
            hs |= run[pos] == xs
        if not hs.any():
            return np.zeros(x.size, dtype=bool)
        return np.isin(x, xs[hs])

    def add_new(self, x: np.ndarray, lines: np.ndarray | None = None) -> np.ndarray:
        """``contains(x)``, then remember the ids not seen before (string ids with their source
        rows ``lines`` when the set keeps them); returns the hit mask."""
        if x.dtype.kind != "S" or x.size == 0:
            hit = self.contains(x)
            self.add(x[~hit] if hit.any() else x)
            return hit
        keys = self._keys(x, lines)
        order = np.argsort(keys)
        keys, xs = keys[order], x[order]  # one hash and one sort serve the lookup and the insert
        hit_sorted = (
            self._lookup(keys & self._mask, xs)[0] if self._count else np.zeros(x.size, dtype=bool)
        )
        new = ~hit_sorted
        if new.any():
            self._count += int(np.count_nonzero(new))
            self._push_strings(keys[new], xs[new])
        hit = np.empty(x.size, dtype=bool)
        hit[order] = hit_sorted
        return hit

    @property
    def _mask(self) -> np.uint64:
        """The bits of a string key that come from the id's hash."""
        if not self._lines:
            return np.uint64(0xFFFFFFFFFFFFFFFF)
        return np.uint64(((1 << 64) - 1) ^ ((1 << _LINE_BITS) - 1))

    def _keys(self, x: np.ndarray, lines: np.ndarray | None) -> np.ndarray:
        """The keys of string ids: their hashes, or (``lines=True``) the hashes' high bits and
        each id's source row (unknown: the largest value of the low bits)."""
        hx = _hash_bytes(x)
        if not self._lines:
            return hx
        low = (1 << _LINE_BITS) - 1
        rows = np.full(x.size, low, dtype=np.uint64)
        if lines is not None:
            at = np.asarray(lines, dtype=np.int64)
            ok = (at >= 0) & (at < low)
            rows[ok] = at[ok].astype(np.uint64)
        return (hx & self._mask) | rows

    def first_lines(self, x: np.ndarray) -> np.ndarray:
        """The source row kept with each of the string ids ``x`` (a few: the repeats a note
        names) when it was first added; -1 where it is not kept (not seen, not a string id, a
        set without rows, or a row beyond 2**32 - 2)."""
        out = np.full(x.size, -1, dtype=np.int64)
        if not self._lines or x.dtype.kind != "S" or not x.size:
            return out
        hit, keys = self._lookup(_hash_bytes(x) & self._mask, x)
        low = (1 << _LINE_BITS) - 1
        rows = (keys & np.uint64(low)).astype(np.int64)
        kept = hit & (rows != low)  # the largest value of the low bits: a row not kept
        out[kept] = rows[kept]
        return out

    def _push_strings(self, keys: np.ndarray, ids: np.ndarray) -> None:
        """Add a run of ids sorted by hash; merge runs of similar size (log-structured)."""
        self._str_runs.append((keys, ids))
        while len(self._str_runs) > 1 and (
            self._str_runs[-2][0].size <= 2 * self._str_runs[-1][0].size
        ):
            kb, vb = self._str_runs.pop()
            ka, va = self._str_runs.pop()
            at = np.searchsorted(ka, kb) + np.arange(kb.size)
            from_a = np.ones(ka.size + kb.size, dtype=bool)
            from_a[at] = False
            merged_keys = np.empty(from_a.size, dtype=np.uint64)
            merged_keys[at], merged_keys[from_a] = kb, ka
            merged_ids = np.empty(from_a.size, dtype=np.result_type(va, vb))
            merged_ids[at], merged_ids[from_a] = vb, va
            self._str_runs.append((merged_keys, merged_ids))

    def _contains_strings(self, x: np.ndarray) -> np.ndarray:
        # search with sorted needles: numpy's searchsorted then walks the run nearly in order
        hx = _hash_bytes(x) & self._mask
        order = np.argsort(hx)
        hx, x = hx[order], x[order]
        hit_sorted = self._lookup(hx, x)[0]
        hit = np.empty(x.size, dtype=bool)
        hit[order] = hit_sorted
        return hit

    def _lookup(self, hx: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Which of the ids ``x`` (their keys' hash bits ``hx``) are in the runs, and the key
        each matched (0 where none: with ``lines=True`` its low bits are the id's first source
        row). Any order of ``x`` gives the same answer; sorted by ``hx``, the binary searches
        walk each run nearly in order."""
        hit = np.zeros(x.size, dtype=bool)
        found = np.zeros(x.size, dtype=np.uint64)
        mask = self._mask
        for keys, ids in self._str_runs:
            pos = np.searchsorted(keys, hx)  # hx: at or below every key of its hash bits
            rows = np.flatnonzero(pos < keys.size)
            # walk the run of equal hashes (almost always one entry; more only on a collision)
            while rows.size:
                p = pos[rows]
                same = (keys[p] & mask) == hx[rows]
                rows, p = rows[same], p[same]
                equal = ids[p] == x[rows]
                got = rows[equal]
                hit[got] = True
                found[got] = keys[p[equal]]
                rows = rows[~equal]
                pos[rows] += 1
                rows = rows[pos[rows] < keys.size]
        return hit, found

    def add(self, x: np.ndarray, lines: np.ndarray | None = None) -> None:
        """Remember the (distinct, unseen) ids ``x`` (string ids with their source rows
        ``lines`` when the set keeps them)."""
        if x.size == 0:
            return
        self._count += x.size
        if x.dtype.kind == "S":
            hx = self._keys(x, lines)
            order = np.argsort(hx)
            self._push_strings(hx[order], x[order])
            return
        if x.dtype.kind == "i":
            lo, hi = int(x.min()), int(x.max())
            if (
                self._map is None
                and not self._runs
                and (self._max is None or lo > self._max)
                and hi - lo + 1 == x.size  # distinct ids filling [lo, hi]
            ):
                if self._ranges and self._ranges[-1][1] + 1 == lo:
                    self._ranges[-1][1] = hi
                else:
                    self._ranges.append([lo, hi])
                self._max = hi
                return
            self._expand_ranges()
            self._add_ints(x, lo, hi)
            return
        self._push(np.sort(x))

    def _expand_ranges(self) -> None:
        """Turn the id intervals into ids of the map or the runs (once: later batches that are
        whole ranges are stored as ids too)."""
        if not self._ranges:
            return
        ranges, self._ranges = self._ranges, []
        ids = np.concatenate([np.arange(a, b + 1, dtype=np.int64) for a, b in ranges])
        self._max = None
        self._add_ints(ids, int(ranges[0][0]), int(ranges[-1][1]))

    def _add_ints(self, x: np.ndarray, lo: int, hi: int) -> None:
        """Remember distinct integer ids ``x`` (smallest ``lo``, largest ``hi``), counted."""
        self._max = hi if self._max is None else max(self._max, hi)
        if not self._runs:
            new_lo = lo if self._map is None else min(lo, self._lo)
            span = self._max - new_lo + 1
            if span <= max(BITMAP_FACTOR * self._count, BITMAP_MIN_BYTES):
                if self._map is None or new_lo < self._lo or span > self._map.size:
                    # grow with head room so that increasing ids reallocate rarely
                    grown = np.zeros(span + span // 2, dtype=np.bool_)
                    if self._map is not None:
                        grown[self._lo - new_lo : self._lo - new_lo + self._map.size] = self._map
                    self._map, self._lo = grown, new_lo
                self._map[x - self._lo] = True
                return
            if self._map is not None:  # too sparse for a map: switch to sorted runs
                self._runs.append(np.flatnonzero(self._map).astype(np.int64) + self._lo)
                self._map = None
        self._push(np.sort(x))

    def _push(self, run: np.ndarray) -> None:
        self._runs.append(run)
        while len(self._runs) > 1 and self._runs[-2].size <= 2 * self._runs[-1].size:
            b = self._runs.pop()
            a = self._runs.pop()
            self._runs.append(merge_sorted(a, b))


def _fixed_width_bytes(ids: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """String ids as a numpy ``S<w>`` array, built from Arrow's buffers (no Python objects).

    Each id is followed by a terminator byte 0x01 before the zero padding, so that ids that
    differ only in trailing NUL bytes stay distinct (numpy compares ``S`` values without them).
    """
    a = ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids
    if a.type != pa.string():
        a = pc.cast(a, pa.string())
    n = len(a)
    offsets = np.frombuffer(a.buffers()[1], dtype=np.int32, count=n + 1, offset=a.offset * 4)
    offsets = offsets.astype(np.int64)
    lengths = np.diff(offsets)
    width = int(lengths.max(initial=0)) + 1
    out = np.zeros((n, width), dtype=np.uint8)
    if n and offsets[-1] > offsets[0]:
        data = np.frombuffer(a.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]]
        rows = np.repeat(np.arange(n, dtype=np.int64), lengths)
        out[rows, np.arange(data.size, dtype=np.int64) - (offsets[:-1] - offsets[0])[rows]] = data
    out[np.arange(n), lengths] = 1
    return out.view(f"S{width}").ravel()


#: multiplier of the 64-bit mixing step (from SplitMix64; any odd constant with well-spread
#: bits works, since every hash match is confirmed on the bytes)
_HASH_MULTIPLIER: Final = np.uint64(0xBF58476D1CE4E5B9)


def _hash_bytes(x: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each fixed-width id, independent of the array's width.

    Folds the id's 8-byte words with a multiply-xorshift step, skipping all-zero words (the
    padding), so the same id hashes alike in batches of different widths. Loops over the
    words of one id (width / 8), never over rows.
    """
    width = x.dtype.itemsize
    u8 = np.ascontiguousarray(x).view(np.uint8).reshape(x.size, width)
    pad = (-width) % 8
    if pad:
        u8 = np.concatenate([u8, np.zeros((x.size, pad), dtype=np.uint8)], axis=1)
    words = np.ascontiguousarray(u8).view(np.uint64)
    h = np.full(x.size, 0x9E3779B97F4A7C15, dtype=np.uint64)
    for k in range(words.shape[1]):
        w = words[:, k]
        mixed = (h ^ w) * _HASH_MULTIPLIER
        mixed ^= mixed >> np.uint64(31)
        h = np.where(w != 0, mixed, h)
    return h


def merge_sorted(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Merge two sorted arrays in O(len(a) + len(b)) memory traffic."""
    dtype = np.result_type(a, b)
    out = np.empty(a.size + b.size, dtype=dtype)
    at = np.searchsorted(a, b) + np.arange(b.size)
    from_a = np.ones(out.size, dtype=bool)
    from_a[at] = False
    out[at] = b
    out[from_a] = a
    return out
