"""One candidate's overlap with the logger: the per-policy row, its verdict and its notes.

The row reads the moment kernel's statistics (``ope.streaming.MomentStats.centered``) for the
ESS, the mean weight and its check, the clipped share and the inputs of the outer/inner split
(Bottou et al., 2013), and the diagnostics' own pass for the weight quantiles and the KL sum.
Its rules are the ones every entry point of ope applies (:mod:`ope._thresholds`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any, Final, Literal

import numpy as np

from ope._centered import CenteredMoments
from ope._validation import check_confidence_level
from ope._thresholds import (
    COVERAGE_VERDICT_SHARE,
    ESS_RATIO_WARN,
    UNSUPPORTED_MASS_WARN,
    ess_note,
    heavy_tail,
    heavy_tail_note,
    kish_ess,
    low_ess,
    mean_weight_check,
    mean_weight_note,
)
from ope.diagnostics.segments import SegmentRow, unsupported_text
from ope.diagnostics.tails import TailFit
from ope.intervals import BottouInterval
from ope.intervals._shared import bottou_pieces, check_interval_rows
from ope.intervals.bounded import bottou_interval
from ope.exceptions import ValidationError

__all__ = [
    "WEIGHT_QUANTILES",
    "VERDICT_MORE_DATA",
    "VERDICT_EXPLORE",
    "VERDICT_NEEDS_RANGE",
    "POLICY_COLUMNS",
    "PROFILE_COLUMNS",
    "CLIP_RULE_GIVEN",
    "CLIP_RULE_NARROWEST",
    "PolicyRow",
    "clip_levels",
    "clip_profile",
    "policy_row",
    "weighted_policy_row",
    "verdict",
    "overlap_notes",
]

#: Weight quantiles reported per policy (the columns weight_q50, weight_q90, ...).
WEIGHT_QUANTILES: Final = (0.5, 0.9, 0.99, 0.999)

#: Verdict texts (stable strings: the CLI and tests compare them).
VERDICT_MORE_DATA: Final = "collect more data under the same logging"
VERDICT_EXPLORE: Final = "change the logging policy's exploration"
VERDICT_NEEDS_RANGE: Final = "unknown: pass reward_range for the outer/inner split"


def _unclipped() -> dict[str, Any]:
    """The clipping fields of a policy row without a clip level (weighted or not)."""
    return {
        "max_weight": math.nan,
        "clip_rule": "none",
        "clipped_share": 0.0,
        "clipped_weight_share": 0.0,
    }


def _split_without_range() -> dict[str, Any]:
    """The outer/inner split fields before (or without) a priori reward bounds."""
    split: dict[str, Any] = dict.fromkeys(
        (
            "clipped_value",
            "ci_low",
            "ci_high",
            "outer_low",
            "outer_high",
            "inner_low",
            "inner_high",
            "sampling_width",
            "coverage_width",
            "coverage_share",
            "verdict_max_weight",
            "verdict_coverage_share",
        ),
        math.nan,
    )
    split["verdict"] = VERDICT_NEEDS_RANGE
    split["verdict_reason"] = "the outer/inner split needs a priori reward bounds"
    return split


#: How the clip level of a row was set (column ``clip_rule``).
CLIP_RULE_GIVEN: Final = "given"
CLIP_RULE_NARROWEST: Final = "narrowest interval"

#: Sums per clip-profile bin (:func:`ope.diagnostics._pass.profile_bin_sums`).
_PROFILE_ROWS: Final = 7

#: Columns of :meth:`ope.Diagnostics.clip_profile`.
PROFILE_COLUMNS: Final = (
    "max_weight",
    "clipped_share",
    "clipped_weight_share",
    "clipped_value",
    "ci_low",
    "ci_high",
    "width",
    "sampling_width",
    "coverage_width",
    "coverage_share",
    "narrowest",
)


@dataclass(frozen=True)
class PolicyRow:
    """One row of :meth:`ope.Diagnostics.table` (its columns, in order).

    ``max_weight`` is the clip level of the row's interval and split: the one given, else (with
    ``reward_range``) the level of the narrowest Bottou interval over :func:`clip_levels`
    (``clip_rule`` says which; NaN without either). ``clipped_share`` is the share of rows
    whose weight exceeds it and ``clipped_weight_share`` the share of the total importance
    weight those rows carry (in [0, 1]). The interval columns are NaN without
    ``reward_range``, ``unsupported_mass`` without the full distributions. The verdict is
    taken at the narrowest level ``verdict_max_weight`` whatever clip level was given, so it
    does not depend on that choice (:func:`verdict`). ``ess_reference`` is what ``ess`` is
    compared with (``ess_ratio = ess / ess_reference``): the rows ``n``, or for rows with
    sampling weights Kish's ESS of the sampling weights alone. ``pareto_k`` is the Pareto
    k-hat of the upper tail of the weights (of ``s w`` with sampling weights ``s``:
    what each row carries in the estimate), ``pareto_k_threshold`` the largest reliable value
    for ``n`` rows, ``tail_index`` Hill's estimate of the tail index ``alpha`` on the same
    ``tail_length`` largest weights (:mod:`ope.diagnostics.tails`). ``sensitivity_decision``
    and ``gamma_star`` are the candidate's decision against logging and its tipping point
    :math:`\\Gamma^*` when the sensitivity analysis ran (:mod:`ope.diagnostics.msm`; "" and NaN
    otherwise). ``log_smoothing_low`` is the logarithmic-smoothing lower bound of the value
    (Sakhi et al. 2024; :mod:`ope.intervals.smoothing`), beside the Bottou interval
    ``ci_low, ci_high``: it needs no clip level or weight bound.
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
    clip_rule: str
    clipped_share: float
    clipped_weight_share: float
    kl_divergence: float
    chi2_divergence: float
    renyi2_divergence: float
    pareto_k: float
    pareto_k_threshold: float
    tail_index: float
    tail_length: int
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
    verdict_max_weight: float
    verdict_coverage_share: float
    verdict: str
    verdict_reason: str
    gaps: int
    ess_reference: float = math.nan
    #: the marginal-sensitivity analysis when one was run (``diagnose(..., sensitivity=)``):
    #: the decision against logging at gamma = 1 and its tipping point (ope.diagnostics.msm)
    sensitivity_decision: str = ""
    gamma_star: float = math.nan
    #: the logarithmic-smoothing lower bound of the candidate's value (one-sided, at the
    #: diagnostics' confidence level, no weight bound; ope.intervals.smoothing): NaN without
    #: reward_range and for rows with sampling weights
    log_smoothing_low: float = math.nan

    def as_record(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in POLICY_COLUMNS}


POLICY_COLUMNS: Final = tuple(f.name for f in fields(PolicyRow))


def clip_levels(max_w: float) -> np.ndarray:
    """The clip levels of the profile: powers of two from 1 up to, and then, the largest weight.

    Below 1 clipping would cut the weight of every row the candidate shares with a logger
    that plays it surely; powers of two span any weight range in a few dozen levels (2**30 is
    10**9) and the profile changes smoothly between them; the largest weight itself is "no
    clipping".

    >>> clip_levels(5.0).tolist()
    [1.0, 2.0, 4.0, 5.0]
    """
    if not (max_w > 0 and math.isfinite(max_w)):
        return np.empty(0)
    top = math.ceil(math.log2(max_w)) if max_w > 1 else 0
    levels = np.ldexp(1.0, np.arange(0, top + 1))
    return np.append(levels[levels < max_w], max_w)


def clip_profile(
    bins: np.ndarray,
    totals: tuple[float, ...],
    n: int,
    levels: np.ndarray,
    *,
    reward_range: tuple[float, float],
    confidence_level: float,
    squares: tuple[float, ...] | None = None,
) -> tuple[list[dict[str, Any]], list[BottouInterval]]:
    """The Bottou interval and its split at every clip level, from per-bin sums.

    ``bins`` are :func:`ope.diagnostics._pass.profile_bin_sums` (count, w, w^2, w l, (w l)^2,
    l, l^2 of the rows with w > 1 by ``b = ceil(log2 w)``: the number of the levels
    1, 2, 4, ... below w; the last level, the largest weight, is above every w) and ``totals``
    the sums ``w, w^2, w l, (w l)^2, l, l^2`` over all ``n`` rows, with ``l = r - lo``. Row ``i``
    is clipped at level ``k`` iff ``k < b_i``, so the sums of ``min(w, R) l`` and their squares
    at every level follow from the totals and cumulative sums of the bins. The interval at each
    level is :func:`ope.intervals.bounded.bottou_interval` with empirical-Bernstein margins (the
    ``bottou`` CI method). The narrowest interval (the largest level among equally narrow ones:
    the least clipping) is marked ``narrowest``.

    For rows with sampling weights ``s`` (``squares`` given) ``bins`` has 14 rows, the seven
    sums weighted by ``s`` and then by ``s**2`` (:func:`ope.diagnostics._pass.weighted_pass`);
    ``totals`` are the seven sums ``s, s w, s w^2, s w l, s (w l)^2, s l, s l^2`` over all rows
    and ``squares`` the same with ``s**2``. The means are then Hajek means
    (:math:`\\hat W = \\sum s\\bar w/\\sum s`, :math:`\\hat Y = \\sum s\\bar w\\ell/
    \\sum s`), the clipped share is :math:`\\sum_{w>R}s/\\sum s`, the variances the
    linearized ones, :math:`\\frac{n^2}{n-1}\\sum s^2(x-\\hat x)^2/(\\sum s)^2` for
    :math:`x=\\bar w` or :math:`\\bar w\\ell`, and the margins normal (the empirical-Bernstein
    bound is for unweighted means of bounded terms).
    """
    lo, hi = reward_range
    g = levels.size
    weighted = squares is not None
    if weighted:
        size, total_w, total_w2, total_wl, total_wl2, total_l, total_l2 = totals
    else:
        size = float(n)
        total_w, total_w2, total_wl, total_wl2, total_l, total_l2 = totals

    def below(k: int, total: float) -> np.ndarray:  # sum over rows with w <= levels[.]
        part = bins[k, : g + 1] if g else bins[k, :1]
        return (total - float(bins[k].sum())) + np.cumsum(part)[:g]

    cnt = below(0, size)
    s_w, s_w2 = below(1, total_w), below(2, total_w2)
    s_wl, s_wl2 = below(3, total_wl), below(4, total_wl2)
    s_l, s_l2 = below(5, total_l), below(6, total_l2)
    above = size - cnt
    sum_wc = s_w + levels * above
    sum_wc2 = s_w2 + levels**2 * above
    sum_y = s_wl + levels * (total_l - s_l)
    sum_y2 = s_wl2 + levels**2 * (total_l2 - s_l2)
    if not weighted:
        w_hat, y_hat = sum_wc / n, sum_y / n
        var_w = np.maximum(sum_wc2 - n * w_hat**2, 0.0) / (n - 1)
        var_y = np.maximum(sum_y2 - n * y_hat**2, 0.0) / (n - 1)
    else:
        assert squares is not None
        q0, q_w, q_w2, q_wl, q_wl2, q_l, q_l2 = squares
        k0 = _PROFILE_ROWS  # the s**2-weighted rows of ``bins``
        q_above = q0 - below(k0, q0)
        q_wc = below(k0 + 1, q_w) + levels * q_above
        q_wc2 = below(k0 + 2, q_w2) + levels**2 * q_above
        q_y = below(k0 + 3, q_wl) + levels * (q_l - below(k0 + 5, q_l))
        q_y2 = below(k0 + 4, q_wl2) + levels**2 * (q_l2 - below(k0 + 6, q_l2))
        w_hat, y_hat = sum_wc / size, sum_y / size
        scale = n * n / ((n - 1.0) * size * size)
        var_w = np.maximum(q_wc2 - 2.0 * w_hat * q_wc + w_hat**2 * q0, 0.0) * scale
        var_y = np.maximum(q_y2 - 2.0 * y_hat * q_y + y_hat**2 * q0, 0.0) * scale
    rows, intervals = [], []
    if g:
        # every level's interval at once: bottou_interval's arithmetic on its checked inputs
        # (the clipped means lie in [0, level] by construction; the variances are >= 0)
        span = hi - lo
        alpha = 1.0 - check_confidence_level(confidence_level)
        count = check_interval_rows(n, minimum=2)
        outer: Literal["bernstein", "normal"] = "normal" if weighted else "bernstein"
        finite = np.isfinite(w_hat) & np.isfinite(var_w) & np.isfinite(y_hat) & np.isfinite(var_y)
        if finite.all():
            w_clip = np.clip(np.minimum(w_hat, levels), 0.0, levels)
            y01 = np.clip(np.minimum(y_hat, levels * span) / span, 0.0, levels)
            _, *ends = bottou_pieces(
                w_clip, np.asarray(var_w, dtype=np.float64), y01, np.sqrt(var_y) / span,
                count, clip=levels, alpha=alpha, outer=outer, r_min=lo, r_max=hi,
            )  # fmt: skip
        elif not np.isfinite(total_l2):
            # the squares of l = r - lo overflowed (not those of w l: a weight may be the cause)
            raise ValidationError(
                "the clip profile's variance of min(w, R) (r - r_lo) overflows float64: the "
                f"squares of r - r_lo with reward_range=({lo:g}, {hi:g}) (a span of {span:.3g}) "
                "exceed 1.8e308. Give a reward_range around the rewards, or rescale the rewards "
                "and the range (divide both by one power of ten) and scale the results back."
            )
        else:  # the squares of w (r - lo) overflowed: a large weight times the rewards' span
            raise ValidationError(
                "the clip profile's variance of min(w, R) (r - r_lo) overflows float64: weights "
                f"up to {float(levels[-1]):.3g} times r - r_lo up to {span:.3g} (reward_range="
                f"({lo:g}, {hi:g})). Rescale the rewards and the range (divide both by one power "
                "of ten) and scale the results back, or leave the largest weights out by clipping "
                "(max_weight)."
            )
        low, high, outer_low, outer_high, inner_low, inner_high = (
            np.atleast_1d(np.asarray(x, dtype=np.float64)) for x in ends
        )
    for k in range(g):  # a loop over clip levels (their rows)
        iv = BottouInterval(
            float(low[k]),
            float(high[k]),
            float(outer_low[k]),
            float(outer_high[k]),
            float(inner_low[k]),
            float(inner_high[k]),
        )
        width = iv.high - iv.low
        coverage = min((hi - lo) * max(0.0, 1.0 - float(w_hat[k])), width)
        rows.append(
            {
                "max_weight": float(levels[k]),
                "clipped_share": float(above[k]) / size,
                "clipped_weight_share": (
                    min(max((total_w - float(s_w[k])) / total_w, 0.0), 1.0)
                    if total_w > 0 and above[k] > 0
                    else 0.0
                ),
                "clipped_value": lo + float(y_hat[k]),
                "ci_low": iv.low,
                "ci_high": iv.high,
                "width": width,
                "sampling_width": width - coverage,
                "coverage_width": coverage,
                "coverage_share": coverage / width if width > 0 else 0.0,
                "narrowest": False,
            }
        )
        intervals.append(iv)
    if rows:
        widths = np.array([r["width"] for r in rows])
        best = int(np.flatnonzero(widths <= widths.min() * (1 + 1e-12))[-1])
        rows[best]["narrowest"] = True
    return rows, intervals


def _bottou_split(
    moments: CenteredMoments,
    j: int,
    *,
    lo: float,
    hi: float,
    max_weight: float | None,
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
        w_hat,
        var_w,
        y_hat,
        var_y,
        moments.n,
        max_weight=max_weight,
        reward_range=(lo, hi),
        confidence_level=confidence_level,
        outer="bernstein" if max_weight is not None else "normal",
    )
    width = interval.high - interval.low
    return interval, min((hi - lo) * max(0.0, 1.0 - w_hat), width)


def verdict(
    *,
    coverage_share: float,
    ess: float,
    n: int,
    unsupported_mass: float,
    segments: Sequence[SegmentRow],
    reference: float | None = None,
) -> tuple[str, str]:
    """The verdict and its reason: one story with the gaps, the notes and the plan.

    "change the logging policy's exploration" when any of these holds, else "collect more
    data under the same logging":

    * the coverage part of the narrowest Bottou interval over the clip profile is at least
      ``COVERAGE_VERDICT_SHARE`` of its width (more logs of the same kind cannot shrink it);
    * the ESS is below ``ESS_RATIO_WARN`` of the rows (the logger rarely takes the
      candidate's actions: the same logging needs over a hundred times the rows per unit of
      information of an on-policy test); for rows with sampling weights, below that share of
      ``reference``, the Kish ESS of the sampling weights alone;
    * more than ``UNSUPPORTED_MASS_WARN`` of the candidate's mass is unsupported;
    * a context segment is flagged (support gap or low effective sample): its fix is to
      explore the candidate's actions there.
    """
    reasons = []
    if coverage_share >= COVERAGE_VERDICT_SHARE:
        reasons.append(
            f"coverage is {coverage_share:.0%} of the narrowest interval (more logs of the same "
            "kind do not shrink it)"
        )
    if reference is not None:
        if low_ess(ess, reference):  # type: ignore[arg-type]
            reasons.append(
                f"ESS {ess:,.0f} is below {ESS_RATIO_WARN:.0%} of the sampling weights' own "
                f"ESS {reference:,.0f}"
            )
    elif low_ess(ess, n):
        reasons.append(f"ESS {ess:,.0f} is below {ESS_RATIO_WARN:.0%} of the {n:,} rows")
    if unsupported_mass > UNSUPPORTED_MASS_WARN:
        reasons.append(f"{unsupported_mass:.1%} of its mass is unsupported")
    flagged = [s for s in segments if s.gap and s.context]
    if flagged:
        reasons.append(
            f"{len(flagged)} segment{'s are' if len(flagged) > 1 else ' is'} flagged (see gaps)"
        )
    if reasons:
        return VERDICT_EXPLORE, "; ".join(reasons)
    return VERDICT_MORE_DATA, (
        f"coverage is {coverage_share:.0%} of the narrowest interval, the ESS is adequate and "
        "no segment is flagged: the width is sampling, which more logs shrink"
    )


def tail_columns(tail: TailFit) -> dict[str, Any]:
    """The table's tail columns of a :class:`ope.diagnostics.tails.TailFit`."""
    return {
        "pareto_k": tail.pareto_k,
        "pareto_k_threshold": tail.k_threshold,
        "tail_index": tail.tail_index,
        "tail_length": tail.tail_length,
    }


def policy_row(
    j: int,
    name: str,
    moments: CenteredMoments,
    *,
    profile_bins: np.ndarray | None,
    sum_wlogw: float,
    tail: TailFit,
    quantiles: Sequence[float] | np.ndarray,
    expected: float,
    unsupported_mass: float,
    segments: Sequence[SegmentRow],
    max_weight: float | None,
    reward_range: tuple[float, float] | None,
    confidence_level: float,
) -> tuple[PolicyRow, BottouInterval | None, list[dict[str, Any]]]:
    """The table row of policy ``j``, its outer/inner interval (None without a range) and its
    clip profile (empty without a range).

    ``expected`` is the mean weight under correct propensities: 1 minus the candidate's mass on
    actions the logger never plays (1 under full support). ``profile_bins`` are the policy's
    clip-profile sums from the diagnostics' pass (needed with ``reward_range``).
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
        clipped: dict[str, Any] = {
            "max_weight": max_weight,
            "clip_rule": CLIP_RULE_GIVEN,
            "clipped_share": n_above / n,
            # sum of w over w > R = sum(w - min(w, R)) + R * count(w > R), over sum of w
            "clipped_weight_share": (
                (sum_w - sum_wc + max_weight * n_above) / sum_w if sum_w > 0 else 0.0
            ),
        }
    else:
        clipped = _unclipped()
    interval = None
    profile: list[dict[str, Any]] = []
    split = _split_without_range()
    if reward_range is not None:
        lo, hi = reward_range
        assert profile_bins is not None
        y_mean, y_var = moments.product_mean_var(j, clipped=False, about=lo)
        r_sum, r_sum2 = moments.reward_sums()
        totals = (
            sum_w,
            sum_w2,
            n * y_mean,
            (n - 1) * y_var + n * y_mean * y_mean,
            r_sum - n * lo,
            r_sum2 - 2.0 * lo * r_sum + n * lo * lo,
        )
        profile, profile_intervals = clip_profile(
            profile_bins,
            totals,
            n,
            clip_levels(float(moments.max_w[j])),
            reward_range=reward_range,
            confidence_level=confidence_level,
        )
        best = next((k for k, p in enumerate(profile) if p["narrowest"]), None)
        if max_weight is not None or best is None:
            interval, coverage = _bottou_split(
                moments,
                j,
                lo=lo,
                hi=hi,
                max_weight=max_weight,
                confidence_level=confidence_level,
            )
            clipped_value = lo + moments.product_mean_var(j, clipped=True, about=lo)[0]
        else:
            chosen = profile[best]
            interval, coverage = profile_intervals[best], chosen["coverage_width"]
            clipped_value = chosen["clipped_value"]
            clipped = {
                k: chosen[k] for k in ("max_weight", "clipped_share", "clipped_weight_share")
            }
            clipped["clip_rule"] = CLIP_RULE_NARROWEST
        split = _split_columns(
            interval,
            coverage,
            clipped_value,
            profile,
            best,
            ess=ess,
            n=n,
            unsupported_mass=unsupported_mass,
            segments=segments,
            reference=None,
        )
    q: dict[str, Any] = dict(
        zip(("weight_q50", "weight_q90", "weight_q99", "weight_q999"), map(float, quantiles))
    )
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
        **tail_columns(tail),
        unsupported_mass=unsupported_mass,
        **split,
        gaps=int(sum(s.gap for s in segments)),
        ess_reference=float(n),
    )
    return row, interval, profile


def overlap_notes(
    rows: Sequence[PolicyRow],
    segments: Sequence[Sequence[SegmentRow]],
    *,
    weighted: bool = False,
) -> list[str]:
    """The notes (and warnings) of each policy: low ESS, unsupported mass, mean weight, a heavy
    weight tail (Pareto k-hat), gaps.

    ``weighted``: the rows carry sampling weights, and the ESS is compared with
    ``ess_reference`` (Kish's ESS of the sampling weights) instead of the rows.
    """
    notes = []
    for r, segs in zip(rows, segments):
        if weighted:
            if low_ess(r.ess, r.ess_reference):  # type: ignore[arg-type]
                notes.append(
                    f"{r.policy}: effective sample size {r.ess:,.0f} (Kish, of the sampling "
                    f"times the importance weights) is {r.ess_ratio:.2%} of the sampling "
                    f"weights' own ESS {r.ess_reference:,.0f} (below {ESS_RATIO_WARN:.0%}): the "
                    "logger rarely takes this candidate's actions; expect wide intervals, or "
                    "log with more exploration."
                )
        elif low_ess(r.ess, r.n):  # the estimators' wording: the report states it once
            notes.append(f"{r.policy}: {ess_note(r.ess, r.n)}")
        if r.unsupported_mass > UNSUPPORTED_MASS_WARN:  # False when NaN (no distributions)
            notes.append(
                f"{r.policy}: {unsupported_text(r.unsupported_mass, '.1%')}; no weighting "
                "estimator sees that mass. Explore those actions or report a bound "
                "(reward_range) instead of a point estimate."
            )
        if r.propensity_check != "ok":
            notes.append(
                f"{r.policy}: "
                + mean_weight_note(r.mean_weight, r.mean_weight_z, expected=r.mean_weight_expected)
            )
        if heavy_tail(r.pareto_k, r.pareto_k_threshold):
            notes.append(f"{r.policy}: {heavy_tail_note(r.pareto_k, r.pareto_k_threshold)}")
        gaps = [s for s in segs if s.gap]
        if gaps:
            notes.append(
                f"{r.policy}: {len(gaps)} segment gap{'s' if len(gaps) > 1 else ''}: "
                + " | ".join(s.reason for s in gaps[:3])
                + (" | ..." if len(gaps) > 3 else "")
            )
    return notes


def _hajek_mean_var(x: np.ndarray, s: np.ndarray, total: float) -> tuple[float, float]:
    """The Hajek mean ``sum s x / sum s`` of ``x`` and ``n`` times its linearized variance,
    ``n^2 / (n - 1) sum s^2 (x - mean)^2 / (sum s)^2`` (so ``sqrt(var / n)`` is its standard
    error; the unbiased variance of ``x`` when every ``s`` is 1)."""
    n = x.shape[0]
    mean = float(np.dot(s, x)) / total
    dev = s * (x - mean)
    return mean, float(np.dot(dev, dev)) * n * n / ((n - 1.0) * total * total)


def weighted_policy_row(
    name: str,
    w: np.ndarray,
    sampling: np.ndarray,
    reward: np.ndarray,
    *,
    profile_bins: np.ndarray | None,
    sum_wlogw: float,
    tail: TailFit,
    quantiles: Sequence[float] | np.ndarray,
    expected: float,
    unsupported_mass: float,
    segments: Sequence[SegmentRow],
    max_weight: float | None,
    reward_range: tuple[float, float] | None,
    confidence_level: float,
) -> tuple[PolicyRow, BottouInterval | None, list[dict[str, Any]]]:
    """:func:`policy_row` for rows with sampling (Horvitz-Thompson) weights ``s``.

    ``w`` are the policy's importance weights (n,), ``sum_wlogw`` is ``sum s w log w`` and
    ``quantiles`` the weighted quantiles (:func:`ope.diagnostics._pass.weighted_quantiles`);
    ``expected`` and ``unsupported_mass`` are already Hajek means. With ``S = sum s``:

    * ``ess`` is Kish's ESS of the products, ``(sum s w)^2 / sum (s w)^2``, and ``ess_ratio``
      divides it by Kish's ESS of ``s`` alone, ``S^2 / sum s^2`` (the sample's own effective
      size), which the low-ESS rule compares it with;
    * ``mean_weight`` is ``sum s w / S`` with the linearized standard error
      ``sqrt(sum s^2 (w - mean)^2) / S`` (times ``sqrt(n / (n - 1))``);
    * ``clipped_share`` is ``sum_{w > R} s / S``, ``clipped_weight_share``
      ``sum_{w > R} s w / sum s w``; KL ``sum s w log w / S``, chi-square
      ``sum s w^2 / S - 1``, Renyi-2 ``log(sum s w^2 / S)``;
    * the outer/inner split and the clip profile use the Hajek means of ``min(w, R)`` and
      ``min(w, R) (r - r_min)`` with linearized variances and normal margins
      (:func:`clip_profile`).

    Integer ``s`` give the numbers of the rows repeated ``s_i`` times for every population
    quantity (mean weight, quantiles, shares, divergences, clipped value); the ESS, the standard
    errors and the margins count the ``n`` kept rows instead.
    """
    n = int(w.shape[0])
    s = sampling
    total = float(s.sum())
    sw = s * w
    sum_w = float(sw.sum())
    ess = kish_ess(sum_w, float(np.dot(sw, sw)))
    reference = kish_ess(total, float(np.dot(s, s)))
    mean_w, var_w = _hajek_mean_var(w, s, total)
    check, z = mean_weight_check(n, mean_w, var_w, expected=expected)
    second = float(np.dot(sw, w)) / total
    if max_weight is not None:
        above = w > max_weight
        clipped: dict[str, Any] = {
            "max_weight": max_weight,
            "clip_rule": CLIP_RULE_GIVEN,
            "clipped_share": float(s[above].sum()) / total,
            "clipped_weight_share": float(sw[above].sum()) / sum_w if sum_w > 0 else 0.0,
        }
    else:
        clipped = _unclipped()
    interval = None
    profile: list[dict[str, Any]] = []
    split = _split_without_range()
    if reward_range is not None:
        lo, hi = reward_range
        assert profile_bins is not None
        ell = reward - lo
        y = w * ell
        s2 = s * s

        def sums(v: np.ndarray) -> tuple[float, ...]:
            return (
                float(v.sum()),
                float(np.dot(v, w)),
                float(np.dot(v, w * w)),
                float(np.dot(v, y)),
                float(np.dot(v, y * y)),
                float(np.dot(v, ell)),
                float(np.dot(v, ell * ell)),
            )

        profile, profile_intervals = clip_profile(
            profile_bins,
            sums(s),
            n,
            clip_levels(float(w.max())),
            reward_range=reward_range,
            confidence_level=confidence_level,
            squares=sums(s2),
        )
        best = next((k for k, p in enumerate(profile) if p["narrowest"]), None)
        if max_weight is not None or best is None:
            wc = w if max_weight is None else np.minimum(w, max_weight)
            w_hat, var_wc = _hajek_mean_var(wc, s, total)
            y_hat, var_y = _hajek_mean_var(wc * ell, s, total)
            if max_weight is not None:
                w_hat, y_hat = min(w_hat, max_weight), min(y_hat, max_weight * (hi - lo))
            interval = bottou_interval(
                w_hat,
                var_wc,
                y_hat,
                var_y,
                n,
                max_weight=max_weight,
                reward_range=(lo, hi),
                confidence_level=confidence_level,
                outer="normal",
            )
            coverage = min((hi - lo) * max(0.0, 1.0 - w_hat), interval.high - interval.low)
            clipped_value = lo + y_hat
        else:
            chosen = profile[best]
            interval, coverage = profile_intervals[best], chosen["coverage_width"]
            clipped_value = chosen["clipped_value"]
            clipped = {
                k: chosen[k] for k in ("max_weight", "clipped_share", "clipped_weight_share")
            }
            clipped["clip_rule"] = CLIP_RULE_NARROWEST
        split = _split_columns(
            interval,
            coverage,
            clipped_value,
            profile,
            best,
            ess=ess,
            n=n,
            unsupported_mass=unsupported_mass,
            segments=segments,
            reference=reference,
        )
    q: dict[str, Any] = dict(
        zip(("weight_q50", "weight_q90", "weight_q99", "weight_q999"), map(float, quantiles))
    )
    row = PolicyRow(
        policy=name,
        n=n,
        ess=ess,
        ess_ratio=ess / reference if reference > 0 else 0.0,
        mean_weight=mean_w,
        mean_weight_se=math.sqrt(max(var_w, 0.0) / n),
        mean_weight_expected=expected,
        mean_weight_z=z,
        propensity_check=check,
        weight_max=float(w.max()),
        **q,
        **clipped,
        kl_divergence=sum_wlogw / total,
        chi2_divergence=second - 1.0,
        renyi2_divergence=math.log(second) if second > 0 else -math.inf,
        **tail_columns(tail),
        unsupported_mass=unsupported_mass,
        **split,
        gaps=int(sum(g.gap for g in segments)),
        ess_reference=reference,
    )
    return row, interval, profile


def _split_columns(
    interval: BottouInterval,
    coverage: float,
    clipped_value: float,
    profile: Sequence[dict[str, Any]],
    best: int | None,
    *,
    ess: float,
    n: int,
    unsupported_mass: float,
    segments: Sequence[SegmentRow],
    reference: float | None,
) -> dict[str, Any]:
    """The interval, split and verdict columns of a policy row."""
    width = interval.high - interval.low
    share = coverage / width if width > 0 else 0.0
    v_level = profile[best]["max_weight"] if best is not None else math.nan
    v_share = profile[best]["coverage_share"] if best is not None else share
    text, why = verdict(
        coverage_share=v_share,
        ess=ess,
        n=n,
        unsupported_mass=unsupported_mass,
        segments=segments,
        reference=reference,
    )
    return {
        "clipped_value": clipped_value,
        "ci_low": interval.low,
        "ci_high": interval.high,
        "outer_low": interval.outer_low,
        "outer_high": interval.outer_high,
        "inner_low": interval.inner_low,
        "inner_high": interval.inner_high,
        "sampling_width": width - coverage,
        "coverage_width": coverage,
        "coverage_share": share,
        "verdict_max_weight": v_level,
        "verdict_coverage_share": v_share,
        "verdict": text,
        "verdict_reason": why,
    }
