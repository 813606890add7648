"""Segments: one integer code per row for each segment column, their moments, and the gap rules.

A segment column becomes a :class:`Segmentation` (codes in ``[0, size)`` and a label per code):
categories as they are, numeric columns with many values in quantile bins, missing values in a
segment of their own, and, for logs with many actions, item-popularity buckets of the logged
action. The per-segment statistics come from the moment kernel (:mod:`ope.moments`): the rows
are ordered by their joint cell over a few columns, the kernel runs over each cell's contiguous
run of rows, and each column's segments are exact merges of its cells. A segment row is then
judged by the gap rules of :mod:`ope._thresholds`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Final

import numpy as np
import pandas as pd

from ope._centered import CenteredMoments
from ope._thresholds import (
    GAP_MASS_DEFICIT,
    GAP_MIN_ESS,
    GAP_MIN_MASS,
    GAP_UNSUPPORTED_SHARE,
    MEAN_WEIGHT_Z,
    SEGMENT_VARIANCE_EXCESS,
    SEGMENT_VARIANCE_MIN_SHARE,
    SUPPORT_FLOOR,
    kish_ess,
)
from ope.exceptions import ValidationError
from ope.moments import DEFAULT_CHUNK_SIZE, centered_moments

__all__ = [
    "MAX_CATEGORIES",
    "N_QUANTILE_BINS",
    "QUANTILE_SAMPLE_ROWS",
    "MAX_SEGMENTS",
    "MAX_MATRIX_ACTIONS",
    "POPULARITY_TRAFFIC_EDGES",
    "POPULARITY_LABELS",
    "POPULARITY_COLUMN",
    "MISSING_LABEL",
    "JOINT_SEGMENT_CELLS",
    "SEGMENT_ROWS",
    "SEGMENT_COLUMNS",
    "Segmentation",
    "SegmentRow",
    "segment_codes",
    "popularity_buckets",
    "segment_moments",
    "segment_sums",
    "segment_rows",
    "weighted_segment_rows",
    "segment_gap",
    "unsupported_text",
    "GAP_KIND_SUPPORT",
    "GAP_KIND_EFFECTIVE_SAMPLE",
    "PLAN_POINTER",
]

#: Where a gap's advice sends the reader for the exploration plan, in the library's words (a
#: Python user's: :meth:`ope.Diagnostics.plan`). A text for other readers says it their way:
#: the command line's through its phrase table, the HTML report both ways.
PLAN_POINTER: Final = "(see Diagnostics.plan())"

#: The two kinds of gap (column ``gap_kind``; both may hold, joined by ``+``).
GAP_KIND_SUPPORT: Final = "support"
GAP_KIND_EFFECTIVE_SAMPLE: Final = "effective sample"

#: Numeric segment columns with more distinct values than this are cut into quantile bins.
MAX_CATEGORIES: Final = 20

#: Number of quantile bins for a numeric segment column (quintiles: coarse enough that each bin
#: holds a fifth of the rows, fine enough to localize a gap).
N_QUANTILE_BINS: Final = 5

#: Quantile bin edges are computed on an evenly strided sample of at most 2**20 rows: the edges
#: only name the bins, and a million-row sample places them within about 0.1 % of the exact
#: quantile at a fraction of the cost of a full partition.
QUANTILE_SAMPLE_ROWS: Final = 1 << 20

#: A categorical segment column may have at most 1000 distinct values: past that it is an id,
#: not a segment (each value's ESS is tiny and the report unreadable); bin it first.
MAX_SEGMENTS: Final = 1000

#: Logs with more distinct actions than this get item-popularity buckets (recommendation logs)
#: as an extra segment, and coverage matrices by popularity bucket instead of by action.
MAX_MATRIX_ACTIONS: Final = 20

#: Popularity buckets: actions sorted by logged traffic, cut where the cumulative share of the
#: traffic reaches 50 %, 80 % and 95 % (head, torso, tail, long tail).
POPULARITY_TRAFFIC_EDGES: Final = (0.5, 0.8, 0.95)
POPULARITY_LABELS: Final = ("head", "torso", "tail", "long_tail")
POPULARITY_COLUMN: Final = "action_popularity"
MISSING_LABEL: Final = "<missing>"

#: Segment columns share one ordering of the rows when their joint code has at most 1024 cells:
#: the moment kernel then runs once per non-empty cell (one call costs tens of microseconds, so a
#: thousand cells cost milliseconds) and each column's segments are merges of its cells. Columns
#: whose joint code would be larger are ordered separately.
JOINT_SEGMENT_CELLS: Final = 1 << 10

#: Rows per call of the moment kernel on a cell: the cell's rows are gathered in pieces of this
#: size (bounded memory: a cell may hold nearly every row) and the pieces merged exactly.
SEGMENT_ROWS: Final = DEFAULT_CHUNK_SIZE


@dataclass
class Segmentation:
    """One segment column: an integer code per row and a label per code."""

    column: str
    codes: np.ndarray  # (n,) intp in [0, len(labels))
    labels: list[str]
    context: bool = True  # False for action-dependent segments (popularity buckets)

    @property
    def size(self) -> int:
        return len(self.labels)


@dataclass(frozen=True)
class SegmentRow:
    """One policy x segment row of :meth:`ope.Diagnostics.segments` (its columns, in order)."""

    policy: str
    column: str
    segment: str
    rows: int
    row_share: float
    target_mass_share: float
    ess: float
    mean_weight: float
    weight_max: float
    variance_share: float
    unsupported_share: float
    gap: bool
    gap_kind: str
    reason: str
    #: Pareto k-hat of the weights on the segment's rows (of ``s w`` with sampling weights;
    #: :func:`ope.diagnostics.pareto_k`): its own tail can be heavy where the whole is not
    pareto_k: float = math.nan
    # not table columns: what the gap rule and the plan read
    mean_weight_se: float = field(default=math.inf, metadata={"column": False})
    context: bool = field(default=True, metadata={"column": False})

    def as_record(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in SEGMENT_COLUMNS}


SEGMENT_COLUMNS: Final = tuple(f.name for f in fields(SegmentRow) if f.metadata.get("column", True))


# --------------------------------------------------------------------------------------------
# codes
# --------------------------------------------------------------------------------------------
def _fmt_edge(v: float) -> str:
    return f"{v:.4g}"


def segment_codes(name: str, values: Any, n: int) -> Segmentation:
    """Codes for a segment column: categories as they are, numeric columns in quantile bins."""
    if isinstance(values, pd.Series) and isinstance(values.dtype, pd.CategoricalDtype):
        values = values.array
    if isinstance(values, pd.Categorical):  # already coded: no hashing needed
        if len(values) != n:
            raise ValidationError(
                f"segment column {name!r} must be one value per logged row: expected shape "
                f"({n},), got ({len(values)},)."
            )
        codes = np.asarray(values.codes, dtype=np.intp)
        labels = [str(c) for c in values.categories]
        if (codes < 0).any():
            codes = codes.copy()
            codes[codes < 0] = len(labels)
            labels.append(MISSING_LABEL)
        return _check_segment_count(Segmentation(name, codes, labels))
    if isinstance(values, pd.Series):
        values = values.to_numpy()
    arr = np.asarray(values)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValidationError(
            f"segment column {name!r} must be one value per logged row: expected shape ({n},), "
            f"got {arr.shape}."
        )
    if arr.dtype.kind == "b":
        return Segmentation(name, arr.astype(np.intp), ["False", "True"])
    if arr.dtype.kind in "iu":
        lo, hi = (int(arr.min()), int(arr.max())) if n else (0, 0)
        if hi - lo < MAX_CATEGORIES:
            codes = (
                arr if (lo == 0 and arr.dtype == np.intp) else np.subtract(arr, lo, dtype=np.intp)
            )
            present = np.bincount(codes, minlength=hi - lo + 1) > 0
            labels = [str(lo + k) for k in np.flatnonzero(present)]
            if not present.all():  # renumber the values that occur
                remap = (np.cumsum(present) - 1).astype(np.intp)
                codes = np.take(remap, codes)
            return Segmentation(name, codes, labels)
        codes, uniques = pd.factorize(arr, sort=True)
        if uniques.size <= MAX_CATEGORIES:
            return Segmentation(name, codes.astype(np.intp), [str(u) for u in uniques])
        return _quantile_bins(name, arr.astype(np.float64))
    if arr.dtype.kind == "f":
        return _quantile_bins(name, arr.astype(np.float64, copy=False))
    # strings, categoricals, objects: categories; missing values get their own segment
    codes, uniques = pd.factorize(arr, sort=True, use_na_sentinel=True)
    labels = [str(u) for u in uniques]
    codes = codes.astype(np.intp)
    if (codes < 0).any():
        codes[codes < 0] = len(labels)
        labels.append(MISSING_LABEL)
    return _check_segment_count(Segmentation(name, codes, labels))


def _check_segment_count(seg: Segmentation) -> Segmentation:
    if seg.size > MAX_SEGMENTS:
        raise ValidationError(
            f"segment column {seg.column!r} has {seg.size:,} distinct values; a segment column "
            f"may have at most {MAX_SEGMENTS:,} (more is an id, not a segment). Group its "
            "values first, or pass a numeric column (it is cut into quantile bins)."
        )
    return seg


def _quantile_bins(name: str, x: np.ndarray) -> Segmentation:
    missing = np.isnan(x)
    finite = x if not missing.any() else x[~missing]
    if finite.size == 0:
        return Segmentation(name, np.zeros(x.size, dtype=np.intp), [MISSING_LABEL])
    step = max(1, finite.size // QUANTILE_SAMPLE_ROWS)
    sample = finite[::step]
    levels = np.linspace(0.0, 1.0, N_QUANTILE_BINS + 1)[1:-1]
    inner = np.unique(np.quantile(sample, levels))
    lo, hi = float(finite.min()), float(finite.max())
    inner = inner[(inner > lo) & (inner <= hi)]
    small = np.zeros(x.size, dtype=np.uint8)  # at most N_QUANTILE_BINS: one byte per row
    for edge in inner:  # a handful of edges: one comparison pass each
        np.add(small, x >= edge, out=small)
    codes = small.astype(np.intp)
    edges = [lo, *inner.tolist(), hi]
    labels = []
    for k in range(len(edges) - 1):
        close = "]" if k == len(edges) - 2 else ")"
        labels.append(f"[{_fmt_edge(edges[k])}, {_fmt_edge(edges[k + 1])}{close}")
    if missing.any():
        codes[missing] = len(labels)
        labels.append(MISSING_LABEL)
    return Segmentation(name, codes, labels)


def popularity_buckets(codes: np.ndarray, n_actions: int) -> tuple[np.ndarray, np.ndarray]:
    """Bucket of each action (by its logged traffic share) and of each row."""
    counts = np.bincount(codes, minlength=n_actions).astype(np.float64)
    order = np.argsort(-counts, kind="stable")
    share_before = np.concatenate([[0.0], np.cumsum(counts[order])[:-1]]) / max(counts.sum(), 1)
    bucket_sorted = np.searchsorted(np.asarray(POPULARITY_TRAFFIC_EDGES), share_before, "right")
    action_bucket = np.empty(n_actions, dtype=np.intp)
    action_bucket[order] = bucket_sorted
    return action_bucket, action_bucket[codes]


# --------------------------------------------------------------------------------------------
# per-segment moments: the kernel over each joint cell, merged into each column's segments
# --------------------------------------------------------------------------------------------
def _groups(segs: Sequence[Segmentation]) -> list[list[int]]:
    """Consecutive columns whose joint code has at most JOINT_SEGMENT_CELLS cells."""
    groups: list[list[int]] = []
    current: list[int] = []
    for k, seg in enumerate(segs):
        if current and math.prod(segs[i].size for i in current) * seg.size > JOINT_SEGMENT_CELLS:
            groups.append(current)
            current = []
        current.append(k)
    if current:
        groups.append(current)
    return groups


def _cell_moments(
    joint: np.ndarray,
    cells: int,
    reward: np.ndarray,
    propensity: np.ndarray,
    target: np.ndarray,
    max_weight: float | None,
) -> dict[int, CenteredMoments]:
    """Kernel moments of every non-empty cell of ``joint`` (rows ordered by cell, gathered)."""
    order = np.argsort(joint, kind="stable")  # a radix sort of the uint16 codes
    counts = np.bincount(joint, minlength=cells)
    ends = np.cumsum(counts)
    out: dict[int, CenteredMoments] = {}
    for c in np.flatnonzero(counts).tolist():  # a loop over cells, never over rows
        start, stop = int(ends[c] - counts[c]), int(ends[c])
        acc: CenteredMoments | None = None
        for lo in range(start, stop, SEGMENT_ROWS):
            idx = order[lo : min(lo + SEGMENT_ROWS, stop)]
            part = centered_moments(
                np.take(reward, idx),
                np.take(propensity, idx),
                np.take(target, idx, axis=0),
                max_weight=max_weight,
            )
            acc = part if acc is None else acc.merge(part)
        assert acc is not None
        out[c] = acc
    return out


def segment_moments(
    segs: Sequence[Segmentation],
    reward: np.ndarray,
    propensity: np.ndarray,
    target: np.ndarray,
    *,
    max_weight: float | None,
) -> tuple[list[list[CenteredMoments | None]], CenteredMoments]:
    """Per column, the kernel moments of each of its segments (None for an empty segment),
    and the moments of all rows (the merge of the first group's cells: no extra pass)."""
    out: list[list[CenteredMoments | None]] = [[] for _ in segs]
    overall: CenteredMoments | None = None
    for members in _groups(segs):
        sizes = [segs[k].size for k in members]
        cells = math.prod(sizes)
        joint = segs[members[0]].codes.astype(np.uint16)
        for k, size in zip(members[1:], sizes[1:]):
            np.multiply(joint, size, out=joint)
            np.add(joint, segs[k].codes, out=joint, casting="unsafe")
        by_cell = _cell_moments(joint, cells, reward, propensity, target, max_weight)
        present = np.array(sorted(by_cell), dtype=np.intp)
        if overall is None:
            for cell in present.tolist():
                m = by_cell[cell]
                overall = m if overall is None else overall.merge(m)
        coords = np.unravel_index(present, sizes)
        for axis, k in enumerate(members):
            merged: list[CenteredMoments | None] = [None] * segs[k].size
            for cell, g in zip(present.tolist(), coords[axis].tolist()):
                m = merged[g]
                merged[g] = by_cell[cell] if m is None else m.merge(by_cell[cell])
            out[k] = merged
    assert overall is not None, "segment_moments needs at least one segment column"
    return out, overall


def segment_sums(segs: Sequence[Segmentation], values: np.ndarray) -> list[np.ndarray]:
    """Per column, the sum of the per-row ``values`` over each of its segments."""
    return [np.bincount(seg.codes, weights=values, minlength=seg.size) for seg in segs]


# --------------------------------------------------------------------------------------------
# segment rows and the gap rule
# --------------------------------------------------------------------------------------------
def _empty_row(name: str, seg: Any, label: str) -> SegmentRow:
    """The row of a segment without rows: no rows, mass or weight, no gap, an unknown mean
    weight with an infinite standard error."""
    return SegmentRow(
        policy=name,
        column=seg.column,
        segment=label,
        rows=0,
        row_share=0.0,
        target_mass_share=0.0,
        ess=0.0,
        mean_weight=math.nan,
        weight_max=0.0,
        variance_share=0.0,
        unsupported_share=math.nan,
        gap=False,
        gap_kind="",
        reason="",
        mean_weight_se=math.inf,
        context=seg.context,
    )


def segment_rows(
    j: int,
    name: str,
    segs: Sequence[Segmentation],
    moments: list[list[CenteredMoments | None]],
    overall: CenteredMoments,
    deficiency: list[np.ndarray] | None,
    *,
    lo: float,
) -> list[SegmentRow]:
    """Segment rows of policy ``j`` from the moments of its segments and of all rows.

    ``deficiency`` holds, per column, the per-segment sums of the candidate's unsupported mass
    (None without distributions). The variance share of a segment is its part of the centred
    sum of squares of the (clipped) IPS terms ``t = min(w, max_weight) (r - lo)`` about their
    overall mean: ``(n_s - 1) var_s + n_s (mean_s - mean)^2``.
    """
    n = overall.n
    sum_w, _ = overall.weight_sums(j, clipped=False)
    mean_t, var_t = overall.product_mean_var(j, clipped=True, about=lo)
    total_dev2 = (n - 1) * var_t
    rows: list[SegmentRow] = []
    for k, seg in enumerate(segs):
        for g, label in enumerate(seg.labels):
            m = moments[k][g]
            if m is None:
                rows.append(_empty_row(name, seg, label))
                continue
            rows_g = m.n
            sw, sw2 = m.weight_sums(j, clipped=False)
            mean_w = sw / rows_g
            # the clipped terms' mean and centred sum of squares about lo (no division: a
            # segment may hold a single row)
            about_lo = m.shifted(lo)
            mean_s, css = float(about_lo.mean[1, 0, j]), float(about_lo.comoment[1, 0, j])
            dev2 = css + rows_g * (mean_s - mean_t) ** 2
            # the kernel's unbiased weight variance, as for the overall row
            se = (
                math.sqrt(max(0.0, m.weight_mean_var(j, clipped=False)[1]) / rows_g)
                if rows_g > 1
                else math.inf
            )
            d_sum = None if deficiency is None else float(deficiency[k][g])
            row = SegmentRow(
                policy=name,
                column=seg.column,
                segment=label,
                rows=rows_g,
                row_share=rows_g / n,
                target_mass_share=sw / sum_w if sum_w > 0 else 0.0,
                ess=kish_ess(sw, sw2),
                mean_weight=mean_w,
                weight_max=float(m.max_w[j]),
                variance_share=dev2 / total_dev2 if total_dev2 > 0 else 0.0,
                unsupported_share=(
                    d_sum / rows_g if (d_sum is not None and seg.context) else math.nan
                ),
                gap=False,
                gap_kind="",
                reason="",
                mean_weight_se=se,
                context=seg.context,
            )
            gap, kind, reason = segment_gap(row)
            rows.append(replace(row, gap=gap, gap_kind=kind, reason=reason))
    return rows


def weighted_segment_rows(
    name: str,
    segs: Sequence[Segmentation],
    w: np.ndarray,
    sampling: np.ndarray,
    terms: np.ndarray,
    deficiency: np.ndarray | None,
) -> list[SegmentRow]:
    """Segment rows of one policy for rows with sampling (Horvitz-Thompson) weights ``s``.

    ``w`` are its importance weights (n,), ``terms`` the (clipped) IPS terms
    ``t = min(w, max_weight) (r - lo)`` (n,) and ``deficiency`` its per-row unsupported mass
    (None without distributions). Per segment ``g``, with ``S_g = sum_g s``:
    ``rows`` counts the kept rows; ``row_share = S_g / S`` (the segment's share of the
    population); ``target_mass_share = sum_g s w / sum s w``; ``ess`` Kish's ESS of the
    products ``s w`` on its rows; ``mean_weight = sum_g s w / S_g`` (a Hajek mean) with the
    linearized standard error ``sqrt(n_g / (n_g - 1) sum_g s^2 (w - mean_g)^2) / S_g``;
    ``unsupported_share = sum_g s d / S_g``; and ``variance_share`` the segment's part of
    ``sum s^2 (t - tbar)^2`` (``tbar = sum s t / S``), the sum whose ``1 / S^2`` is the
    linearized variance of the Hajek clipped IPS estimate. Integer ``s`` give the row shares,
    masses and mean weights of the rows repeated ``s_i`` times; ``ess`` and ``variance_share``
    count the kept rows. The gap rule is :func:`segment_gap`, unchanged.
    """
    s = sampling
    total = float(s.sum())
    sw = s * w
    e = s * (terms - float(np.dot(s, terms)) / total)
    total_dev2 = float(np.dot(e, e))
    sum_w = float(sw.sum())
    rows: list[SegmentRow] = []
    for seg in segs:  # a loop over segment columns
        k = seg.size
        cnt = np.bincount(seg.codes, minlength=k)
        s_g = np.bincount(seg.codes, weights=s, minlength=k)
        sw_g = np.bincount(seg.codes, weights=sw, minlength=k)
        sw2_g = np.bincount(seg.codes, weights=sw * sw, minlength=k)
        mean_g = np.divide(sw_g, s_g, out=np.zeros(k), where=s_g > 0)
        dev = s * (w - mean_g[seg.codes])
        dev2_g = np.bincount(seg.codes, weights=dev * dev, minlength=k)
        var_g = np.bincount(seg.codes, weights=e * e, minlength=k)
        max_g = np.full(k, -np.inf)
        np.maximum.at(max_g, seg.codes, w)
        d_g = (
            None
            if deficiency is None
            else np.bincount(seg.codes, weights=s * deficiency, minlength=k)
        )
        for g, label in enumerate(seg.labels):  # a loop over segments
            rows_g = int(cnt[g])
            if rows_g == 0:
                rows.append(_empty_row(name, seg, label))
                continue
            se = (
                math.sqrt(float(dev2_g[g]) * rows_g / (rows_g - 1.0)) / float(s_g[g])
                if rows_g > 1
                else math.inf
            )
            row = SegmentRow(
                policy=name,
                column=seg.column,
                segment=label,
                rows=rows_g,
                row_share=float(s_g[g]) / total,
                target_mass_share=float(sw_g[g]) / sum_w if sum_w > 0 else 0.0,
                ess=kish_ess(float(sw_g[g]), float(sw2_g[g])),
                mean_weight=float(mean_g[g]),
                weight_max=float(max_g[g]),
                variance_share=float(var_g[g]) / total_dev2 if total_dev2 > 0 else 0.0,
                unsupported_share=(
                    float(d_g[g]) / float(s_g[g]) if (d_g is not None and seg.context) else math.nan
                ),
                gap=False,
                gap_kind="",
                reason="",
                mean_weight_se=se,
                context=seg.context,
            )
            gap, kind, reason = segment_gap(row)
            rows.append(replace(row, gap=gap, gap_kind=kind, reason=reason))
    return rows


def unsupported_text(share: float, spec: str) -> str:
    """``"<share> of its mass is on actions the logger plays with probability <= floor"``."""
    return (
        f"{share:{spec}} of its mass is on actions the logger plays with probability "
        f"<= {SUPPORT_FLOOR:g}"
    )


def segment_gap(e: SegmentRow) -> tuple[bool, str, str]:
    """Flag a segment, say which kind of gap it is and why, in words a person can act on.

    Two kinds (``gap_kind``), each with its reason:

    * **support** -- mass the weights do not recover: the segment's mean weight is more than
      ``GAP_MASS_DEFICIT`` below 1 (and ``MEAN_WEIGHT_Z`` standard errors), or more than
      ``GAP_UNSUPPORTED_SHARE`` of the candidate's mass there is on actions the logger plays
      with probability at most ``SUPPORT_FLOOR`` (needs the distributions);
    * **effective sample** -- the mass is recovered but by too few effective rows: ESS below
      ``GAP_MIN_ESS``, or a share of the estimate's variance at least
      ``SEGMENT_VARIANCE_EXCESS`` times the segment's share of the candidate's mass and at
      least ``SEGMENT_VARIANCE_MIN_SHARE`` (relative to the other segments, so a policy whose
      ESS is low everywhere gets the policy-level ESS note, not a gap in every segment).

    Segments with less than ``GAP_MIN_MASS`` of the candidate's mass (or of the rows, for a
    context segment) are never flagged.
    """
    # a context segment holds the candidate's mass in proportion to its rows, whatever the
    # policy (the weighted share is a noisy estimate of the same number); an action segment
    # (popularity bucket) holds the weighted share
    mass = e.row_share if e.context else e.target_mass_share
    if e.rows == 0 or mass < GAP_MIN_MASS:
        return False, "", ""
    support, sample = [], []
    where = f"segment {e.column}={e.segment}"
    head = f"candidate {e.policy} puts {mass:.0%} of its mass on {where}"
    if e.ess < GAP_MIN_ESS:
        sample.append(
            f"where the logs give an effective sample of {e.ess:,.0f} of its {e.rows:,} "
            f"row{'' if e.rows == 1 else 's'} "
            f"(max weight {e.weight_max:.3g})"
        )
    if e.variance_share >= SEGMENT_VARIANCE_MIN_SHARE and (
        e.variance_share >= SEGMENT_VARIANCE_EXCESS * mass
    ):
        sample.append(
            f"which carries {e.variance_share:.0%} of the estimate's variance for "
            f"{mass:.0%} of its mass"
        )
    if e.context:
        se = e.mean_weight_se
        deficit = 1.0 - e.mean_weight
        if deficit > GAP_MASS_DEFICIT and (se == 0 or deficit / se > MEAN_WEIGHT_Z):
            support.append(
                f"where the weights recover only {max(e.mean_weight, 0.0):.0%} of its mass "
                "(expected 100%): the logger rarely or never takes the actions it takes there"
            )
    if e.unsupported_share > GAP_UNSUPPORTED_SHARE:  # False when NaN (no distributions)
        support.append("where " + unsupported_text(e.unsupported_share, ".0%"))
    if not (support or sample):
        return False, "", ""
    kinds = [k for k, v in ((GAP_KIND_SUPPORT, support), (GAP_KIND_EFFECTIVE_SAMPLE, sample)) if v]
    parts = []
    if support:
        parts.append("support gap: " + "; and ".join(support))
    if sample:
        parts.append("low effective sample: " + "; and ".join(sample))
    fix = (
        f"; explore the candidate's actions there {PLAN_POINTER}"
        if e.context
        else "; log more exploration of these items"
    )
    return True, "+".join(kinds), head + " (" + "; ".join(parts) + ")" + fix
