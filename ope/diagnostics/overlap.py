"""One candidate's overlap with the logger: the per-policy row, its verdict and its notes.

The row reads the moment kernel's statistics (:class:`ope.moments.CenteredMoments`) for the
ESS, the mean weight and its check, the clipped share and the inputs of the outer/inner split
(Bottou et al., 2013), and the diagnostics' own pass for the weight quantiles and the KL sum.
Its rules are the ones every entry point of ope applies (:mod:`ope._thresholds`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any, Final

from ope._thresholds import (
    COVERAGE_VERDICT_SHARE,
    ESS_RATIO_WARN,
    UNSUPPORTED_MASS_WARN,
    kish_ess,
    low_ess,
    mean_weight_check,
)
from ope.diagnostics.segments import SegmentRow, unsupported_text
from ope.intervals import BottouInterval
from ope.intervals.bounded import bottou_interval
from ope.moments import CenteredMoments

__all__ = [
    "WEIGHT_QUANTILES",
    "VERDICT_MORE_DATA",
    "VERDICT_EXPLORE",
    "VERDICT_NEEDS_RANGE",
    "POLICY_COLUMNS",
    "PolicyRow",
    "policy_row",
    "overlap_notes",
]

#: Weight quantiles reported per policy (the columns weight_q50, weight_q90, ...).
WEIGHT_QUANTILES: Final = (0.5, 0.9, 0.99, 0.999)

#: Verdict texts (stable strings: the CLI and tests compare them).
VERDICT_MORE_DATA: Final = "collect more data under the same logging"
VERDICT_EXPLORE: Final = "change the logging policy's exploration"
VERDICT_NEEDS_RANGE: Final = "unknown: pass reward_range for the outer/inner split"


@dataclass(frozen=True)
class PolicyRow:
    """One row of :meth:`ope.Diagnostics.table` (its columns, in order).

    ``max_weight`` is the clip level the diagnostics were computed with (NaN: none); the
    interval columns are NaN without ``reward_range``, ``unsupported_mass`` without the full
    distributions.
    """

    policy: str
    n: int
    ess: float
    ess_ratio: float
    mean_weight: float
    mean_weight_se: float
    mean_weight_expected: float
    mean_weight_z: float
    propensity_check: str
    weight_max: float
    weight_q50: float
    weight_q90: float
    weight_q99: float
    weight_q999: float
    max_weight: float
    clipped_share: float
    clipped_target_mass: float
    kl_divergence: float
    chi2_divergence: float
    renyi2_divergence: float
    unsupported_mass: float
    clipped_value: float
    ci_low: float
    ci_high: float
    outer_low: float
    outer_high: float
    inner_low: float
    inner_high: float
    sampling_width: float
    coverage_width: float
    coverage_share: float
    verdict: str
    gaps: int

    def as_record(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in POLICY_COLUMNS}


POLICY_COLUMNS: Final = tuple(f.name for f in fields(PolicyRow))


def _bottou_split(
    moments: CenteredMoments, j: int, *, lo: float, hi: float, max_weight: float | None,
    confidence_level: float,
) -> tuple[BottouInterval, float]:
    """Bottou outer/inner interval of clipped IPS (capped weights) and its coverage width.

    ``wc = min(w, max_weight)`` and ``y = wc * (r - lo)``; their means and variances come from
    the kernel. The interval is :func:`ope.intervals.bounded.bottou_interval`: with a clip level
    its empirical-Bernstein margins (the ``bottou`` CI method); without one no a priori weight
    bound exists, so its normal margins.
    """
    w_hat, var_w = moments.weight_mean_var(j, clipped=True)
    y_hat, var_y = moments.product_mean_var(j, clipped=True, about=lo)
    interval = bottou_interval(
        w_hat, var_w, y_hat, var_y, moments.n, max_weight=max_weight, reward_range=(lo, hi),
        confidence_level=confidence_level,
        outer="bernstein" if max_weight is not None else "normal",
    )
    width = interval.high - interval.low
    return interval, min((hi - lo) * max(0.0, 1.0 - w_hat), width)


def policy_row(
    j: int,
    name: str,
    moments: CenteredMoments,
    *,
    sum_wlogw: float,
    quantiles: Sequence[float],
    expected: float,
    unsupported_mass: float,
    segments: Sequence[SegmentRow],
    max_weight: float | None,
    reward_range: tuple[float, float] | None,
    confidence_level: float,
) -> tuple[PolicyRow, BottouInterval | None]:
    """The table row of policy ``j`` and its outer/inner interval (None without a range).

    ``expected`` is the mean weight under correct propensities: 1 minus the candidate's mass on
    actions the logger never plays (1 under full support).
    """
    n = moments.n
    sum_w, sum_w2 = moments.weight_sums(j, clipped=False)
    mean_w, var_w = moments.weight_mean_var(j, clipped=False)
    check, z = mean_weight_check(n, mean_w, var_w, expected=expected)
    ess = kish_ess(sum_w, sum_w2)
    second = sum_w2 / n
    if max_weight is not None:
        n_above = float(moments.n_clipped[j])
        sum_wc, _ = moments.weight_sums(j, clipped=True)
        clipped = {
            "max_weight": max_weight,
            "clipped_share": n_above / n,
            # sum of w over w > R = sum(w - min(w, R)) + R * count(w > R)
            "clipped_target_mass": (sum_w - sum_wc + max_weight * n_above) / n,
        }
    else:
        clipped = {"max_weight": math.nan, "clipped_share": 0.0, "clipped_target_mass": 0.0}
    interval = None
    split: dict[str, Any] = dict.fromkeys(
        ("clipped_value", "ci_low", "ci_high", "outer_low", "outer_high", "inner_low",
         "inner_high", "sampling_width", "coverage_width", "coverage_share"), math.nan,
    )
    split["verdict"] = VERDICT_NEEDS_RANGE
    if reward_range is not None:
        lo, hi = reward_range
        interval, coverage = _bottou_split(
            moments, j, lo=lo, hi=hi, max_weight=max_weight, confidence_level=confidence_level,
        )
        width = interval.high - interval.low
        share = coverage / width if width > 0 else 0.0
        split = {
            "clipped_value": lo + moments.product_mean_var(j, clipped=True, about=lo)[0],
            "ci_low": interval.low,
            "ci_high": interval.high,
            "outer_low": interval.outer_low,
            "outer_high": interval.outer_high,
            "inner_low": interval.inner_low,
            "inner_high": interval.inner_high,
            "sampling_width": width - coverage,
            "coverage_width": coverage,
            "coverage_share": share,
            "verdict": VERDICT_EXPLORE if share >= COVERAGE_VERDICT_SHARE else VERDICT_MORE_DATA,
        }
    q = dict(zip(("weight_q50", "weight_q90", "weight_q99", "weight_q999"), map(float, quantiles)))
    row = PolicyRow(
        policy=name,
        n=n,
        ess=ess,
        ess_ratio=ess / n,
        mean_weight=mean_w,
        mean_weight_se=math.sqrt(max(var_w, 0.0) / n),
        mean_weight_expected=expected,
        mean_weight_z=z,
        propensity_check=check,
        weight_max=float(moments.max_w[j]),
        **q,
        **clipped,
        kl_divergence=sum_wlogw / n,
        chi2_divergence=second - 1.0,
        renyi2_divergence=math.log(second) if second > 0 else -math.inf,
        unsupported_mass=unsupported_mass,
        **split,
        gaps=int(sum(s.gap for s in segments)),
    )
    return row, interval


def _mean_weight_message(r: PolicyRow) -> str:
    if r.propensity_check == "high":
        cause = (
            "the logged propensities look too small (or belong to another action), or the "
            "candidate probabilities are not aligned with the logged actions"
        )
    else:
        cause = (
            "the candidate takes actions the logger never plays (a support gap: see the "
            "segments), or the logged propensities are too large or belong to another action"
        )
    return (
        f"{r.policy}: mean importance weight {r.mean_weight:.3f} +/- "
        f"{r.mean_weight_se:.3f}, expected {r.mean_weight_expected:.3f} "
        f"(z = {r.mean_weight_z:.1f}): {cause}. Check how propensities are logged before "
        "trusting any estimate."
    )


def overlap_notes(rows: Sequence[PolicyRow], segments: Sequence[Sequence[SegmentRow]]) -> list[str]:
    """The notes (and warnings) of each policy: low ESS, unsupported mass, mean weight, gaps."""
    notes = []
    for r, segs in zip(rows, segments):
        if low_ess(r.ess, r.n):
            notes.append(
                f"{r.policy}: effective sample size {r.ess:,.0f} is {r.ess_ratio:.2%} of the "
                f"{r.n:,} rows (below {ESS_RATIO_WARN:.0%}): the logger rarely takes this "
                "candidate's actions; expect wide intervals, or log with more exploration."
            )
        if r.unsupported_mass > UNSUPPORTED_MASS_WARN:  # False when NaN (no distributions)
            notes.append(
                f"{r.policy}: {unsupported_text(r.unsupported_mass, '.1%')}; no weighting "
                "estimator sees that mass. Explore those actions or report a bound "
                "(reward_range) instead of a point estimate."
            )
        if r.propensity_check != "ok":
            notes.append(_mean_weight_message(r))
        gaps = [s for s in segs if s.gap]
        if gaps:
            notes.append(
                f"{r.policy}: {len(gaps)} segment gap{'s' if len(gaps) > 1 else ''}: "
                + " | ".join(s.reason for s in gaps[:3])
                + (" | ..." if len(gaps) > 3 else "")
            )
    return notes
