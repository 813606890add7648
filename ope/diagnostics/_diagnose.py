"""The diagnostics driver: :func:`diagnose` on validated logs and :func:`diagnose_arrays` on
arrays, one pass of the moment kernel (or an evaluation's statistics), the overlap rows,
segments, support and the exploration plan, into a :class:`ope.diagnostics.Diagnostics`.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from ope._centered import CenteredMoments
from ope._docstrings import fill_doc
from ope._validation import (
    check_flag,
    check_confidence_level,
    check_max_weight,
    check_no_overflow,
    check_positive_int,
    check_real,
    check_reward_range,
    user_stacklevel,
)
from ope.diagnostics._inputs import Inputs, validated_inputs
from ope.diagnostics._logs import (
    logs_inputs,
)
from ope.diagnostics._pass import (
    fused_pass,
    weight_quantiles,
    weight_tails,
    weighted_pass,
    weighted_quantiles,
)
from ope.diagnostics.overlap import (
    WEIGHT_QUANTILES,
    PolicyRow,
    overlap_notes,
    policy_row,
    weighted_policy_row,
)
from ope.diagnostics.msm import GAMMA_GRID, sensitivity_of_inputs
from ope.diagnostics.result import Diagnostics
from ope.diagnostics.tails import fit_tails, pareto_k, tail_length
from ope.intervals.smoothing import bound_from_mean_log, smoothing_scale
from ope.marginal import ActionEmbedding, embedding_sufficiency, marginal_propensities
from ope.diagnostics.segments import (
    SegmentRow,
    segment_moments,
    segment_rows,
    segment_sums,
    weighted_segment_rows,
)
from ope.exceptions import (
    MissingBoundsError,
    OverlapWarning,
    ParameterError,
)
from ope.propensity import propensity_source
from ope.moments import centered_moments

__all__ = [
    "diagnose",
    "diagnose_arrays",
    "weighted_note",
]


_SHARED_PARAMS = """
    max_weight : float, optional
        Clip level for the share of clipped weights and the outer/inner split (clipped IPS
        with weights ``min(w, max_weight)``). Without it (and with ``reward_range``) the clip
        level is the one of the narrowest Bottou interval over the clip profile (powers of two
        from 1 to the largest weight; see :meth:`Diagnostics.clip_profile`). The verdict is
        taken at that narrowest level in either case, so it does not depend on this choice.
    reward_range : (float, float), optional
        A priori bounds of the reward (e.g. ``(0, 1)`` for clicks); needed for the outer/inner
        split, the verdict and the plan. Never read off the data.
    confidence_level : float, default 0.95
        Level of the outer/inner interval and of the planned interval.
    target_width : float, optional
        Interval width wanted from new logs; with ``new_rows`` it triggers the exploration plan.
    new_rows : int, optional
        Number of new logged rows the plan may assume.

"""


@fill_doc({"shared parameters": _SHARED_PARAMS.strip() + "\n"})
def diagnose_arrays(
    reward: npt.ArrayLike,
    logging_propensity: npt.ArrayLike,
    target_propensity: npt.ArrayLike,
    *,
    policy_names: Sequence[str] | None = None,
    segments: Mapping[str, Any] | None = None,
    action: npt.ArrayLike | None = None,
    target_distributions: Mapping[str, Any] | None = None,
    logging_distribution: Any | None = None,
    max_weight: float | None = None,
    reward_range: Sequence[float] | None = None,
    confidence_level: float = 0.95,
    target_width: float | None = None,
    new_rows: int | None = None,
    sampling_weight: npt.ArrayLike | None = None,
    sensitivity: bool = False,
) -> Diagnostics:
    """Overlap diagnostics from arrays.

    Parameters
    ----------
    reward : array_like, shape (n,)
        Observed rewards.
    logging_propensity : array_like, shape (n,)
        The logger's probability of each logged action, in (0, 1].
    target_propensity : array_like, shape (n,) or (n, P)
        Each candidate's probability of the logged action, in [0, 1] (float32 is fine: all
        sums are accumulated in float64).
    policy_names : sequence of str, optional
        One name per column of ``target_propensity``; default ``policy_0, policy_1, ...``.
    segments : mapping of str to array_like, optional
        Segment columns (one value per row). Categories are used as they are; numeric columns
        with more than ``MAX_CATEGORIES`` distinct values are cut into ``N_QUANTILE_BINS``
        quantile bins; missing values form their own segment.
    action : array_like, shape (n,), optional
        Logged actions. Needed for coverage matrices; with more than ``MAX_MATRIX_ACTIONS``
        distinct actions an ``action_popularity`` segment (head, torso, tail, long tail by
        logged traffic) is added. With distributions, integer actions must be the column
        codes of the distributions.
    target_distributions : mapping of str to sparse (n, n_actions), optional
        Each candidate's full distribution per row (CSR over action codes).
    logging_distribution : sparse (n, n_actions), optional
        The logger's full distribution per row. With ``target_distributions`` it gives the
        candidate's mass on actions the logger plays with probability at most
        ``SUPPORT_FLOOR`` (support deficiency), per row and in total.
    <shared parameters>
    sampling_weight : array_like, shape (n,), optional
        Each row's sampling (Horvitz-Thompson) weight ``s_i = 1 / P(row i was kept)``
        (DSJSON: ``1 / (1 - pdrop)``), finite and positive. Every diagnostic then describes
        the logged population (see Notes); all-ones weights change nothing.
    sensitivity : bool, default False
        Also run the sensitivity analysis to wrong propensities
        (:func:`ope.diagnostics.sensitivity_arrays` with its defaults and this
        ``confidence_level``): :attr:`Diagnostics.sensitivity`, the columns
        ``sensitivity_decision`` and ``gamma_star`` and a note per candidate.

    Returns
    -------
    Diagnostics

    Raises
    ------
    ope.ParameterError
        A malformed setting (``confidence_level``, ``max_weight``, ``reward_range``,
        ``target_width``, ``new_rows``).
    ope.ValidationError
        Arrays of different lengths, propensities out of range, non-finite values, or rewards
        outside ``reward_range``.
    ope.MissingBoundsError
        ``target_width``/``new_rows`` were given without ``reward_range``.

    Warns
    -----
    ope.OverlapWarning
        ESS/n below ``ESS_RATIO_WARN``, unsupported mass above ``UNSUPPORTED_MASS_WARN``, a
        mean weight far from its expected value, or flagged segment gaps.

    Notes
    -----
    With :math:`w_i = \\pi(a_i|x_i)/\\pi_0(a_i|x_i)`:

    * Kish ESS :math:`(\\sum_i w_i)^2 / \\sum_i w_i^2`, reported with ESS/n.
    * Mean weight :math:`\\bar w` with standard error :math:`s_w/\\sqrt n`. Under correct
      propensities :math:`\\mathbb E_0[w] = 1 - D_0` where :math:`D_0` is the candidate's mass on
      actions with :math:`\\pi_0 = 0` (0 under full support); the check flags
      :math:`|\\bar w - \\mathbb E_0 w| > 4\\,\\mathrm{se}` and :math:`> 0.01`
      (``MEAN_WEIGHT_Z`` and ``MEAN_WEIGHT_TOLERANCE``: the rule of every weighting estimator).
    * :math:`\\mathrm{KL}(\\pi\\|\\pi_0) \\approx \\frac1n\\sum_i w_i\\log w_i`,
      :math:`\\chi^2 \\approx \\frac1n\\sum_i w_i^2 - 1`, Renyi-2
      :math:`\\approx \\log\\frac1n\\sum_i w_i^2` (consistent under full support).
    * Segment :math:`s`: mass share :math:`\\sum_{i\\in s}w_i/\\sum_i w_i`, ESS on its rows, and
      variance share :math:`\\sum_{i\\in s}(t_i-\\bar t)^2/\\sum_i(t_i-\\bar t)^2` of the
      (clipped) IPS terms :math:`t_i = \\bar w_i (r_i - r_{\\min})` (:math:`r_{\\min}=0` without
      ``reward_range``), whose sample variance over n is the estimate's variance. A segment is
      flagged (``gap``) for a *support gap* (its weights recover less than
      ``1 - GAP_MASS_DEFICIT`` of the candidate's mass there, or unsupported mass above
      ``GAP_UNSUPPORTED_SHARE``) or a *low effective sample* (ESS below ``GAP_MIN_ESS``, or a
      variance share at least
      ``SEGMENT_VARIANCE_EXCESS`` times its mass share and at least
      ``SEGMENT_VARIANCE_MIN_SHARE``); ``gap_kind`` and ``reason`` say which.
    * Outer/inner split (Bottou et al. 2013, sec. 4) with capped weights
      :math:`\\bar w=\\min(w,R)` and :math:`\\ell=r-r_{\\min}\\in[0,M]`:
      :math:`\\hat Y=\\frac1n\\sum\\ell_i\\bar w_i`, :math:`\\hat W=\\frac1n\\sum\\bar w_i`.
      Outer (sampling) :math:`r_{\\min}+\\hat Y\\pm\\epsilon`; inner (coverage)
      :math:`[r_{\\min}+\\hat Y,\\ r_{\\min}+\\hat Y+M(1-(\\hat W-\\xi)^+)]`; interval
      :math:`[\\text{outer low},\\ \\text{inner high}+\\epsilon]`, all clipped to the reward
      range. The inner bound holds because :math:`Y-\\bar Y = \\mathbb E_0[\\ell(w-\\bar w)] +
      \\mathbb E_\\pi[\\ell\\,1\\{\\pi_0=0\\}]` lies in :math:`[0, M(1-\\bar W)]`. With
      ``max_weight`` this is :func:`ope.intervals.bounded.bottou_interval` with
      empirical-Bernstein margins (the ``bottou`` CI method); without it, no a priori
      weight bound exists and the margins are normal: :math:`\\epsilon = z_{1-\\delta/4}
      s_{\\ell\\bar w}/\\sqrt n`, :math:`\\xi = z_{1-\\delta/2} s_{\\bar w}/\\sqrt n`.
      The coverage width is :math:`M\\max(0,1-\\hat W)` (clipped and unsupported mass) and the
      sampling width is the rest. Without ``max_weight`` the clip level :math:`R` is the one
      of the narrowest interval over :math:`R \\in \\{1, 2, 4, \\dots, \\max_i w_i\\}`
      (empirical-Bernstein margins): small levels trade sampling width for coverage width,
      and the narrowest interval is the honest balance (a stated rule instead of an
      arbitrary level). Verdict, taken at that narrowest level whatever ``max_weight`` is:
      "change the logging policy's exploration" when its coverage width is at least
      ``COVERAGE_VERDICT_SHARE`` of its width (more logs of the same kind cannot shrink it),
      or ESS/n is below ``ESS_RATIO_WARN``, or the unsupported mass is above
      ``UNSUPPORTED_MASS_WARN``, or a context segment is flagged; else "collect more data
      under the same logging". ``verdict_reason`` says which.

    **Sampling weights.** With ``sampling_weight`` :math:`s_i` every diagnostic estimates
    its value on the logged population (every event, kept or dropped), whose size is
    estimated by :math:`S=\\sum_i s_i`; each mean over rows :math:`\\frac1n\\sum_i x_i` becomes
    the Hajek mean :math:`\\sum_i s_i x_i / S`:

    * ESS: Kish's ESS of the products, :math:`(\\sum s_iw_i)^2/\\sum (s_iw_i)^2`, and
      ``ess_ratio`` divides it by Kish's ESS of the sampling weights alone,
      :math:`S^2/\\sum s_i^2` (the sample's own effective size; ``n`` when every
      :math:`s_i=1`), which the low-ESS rule compares it with.
    * Mean weight :math:`\\sum s_iw_i/S` with the linearized standard error
      :math:`\\sqrt{\\tfrac{n}{n-1}\\sum s_i^2(w_i-\\bar w_s)^2}/S`; its expectation
      :math:`1 - \\sum s_i D_{0,i}/S`; unsupported mass :math:`\\sum s_i D_i/S`.
    * Weight quantiles and histogram: of the population distribution of :math:`w`, i.e. of
      :math:`w` with weights :math:`s` (numpy's 'linear' rule on the cumulative weights in
      units of the smallest, :math:`s_i/\\min_j s_j`, so that they do not depend on the
      weights' scale; bin counts :math:`\\sum_{i\\in b}s_i`, masses
      :math:`\\sum_{i\\in b}s_iw_i/S`).
    * Clipped share :math:`\\sum_{w_i>R}s_i/S`, clipped mass share
      :math:`\\sum_{w_i>R}s_iw_i/\\sum s_iw_i`; KL :math:`\\sum s_iw_i\\log w_i/S`,
      :math:`\\chi^2 = \\sum s_iw_i^2/S-1`, Renyi-2 :math:`\\log(\\sum s_iw_i^2/S)`.
    * Segment :math:`g`: ``row_share`` :math:`S_g/S`, mass share
      :math:`\\sum_g s_iw_i/\\sum s_iw_i`, ESS of :math:`s_iw_i` on its rows, mean weight
      :math:`\\sum_g s_iw_i/S_g`, unsupported share :math:`\\sum_g s_iD_i/S_g`, and variance
      share :math:`\\sum_g s_i^2(t_i-\\bar t_s)^2/\\sum s_i^2(t_i-\\bar t_s)^2` (the
      linearized variance of the Hajek estimate); the gap rules are unchanged.
    * Outer/inner split and clip profile: :math:`\\hat W`, :math:`\\hat Y` are Hajek means of
      :math:`\\bar w` and :math:`\\bar w\\ell`, with linearized variances and *normal* margins
      (the empirical-Bernstein bound holds for unweighted means of bounded terms only).
    * Plan: every mean over the current rows in the predicted variance is a Hajek mean, so the
      plan is for ``new_rows`` rows of an unsampled log (every event kept).

    Integer weights give the numbers of the rows repeated :math:`s_i` times for every
    population quantity (all of the above but the ESS, the standard errors, the variance
    shares and the intervals, which count the ``n`` kept rows; the quantiles when the smallest
    weight is 1).

    References
    ----------
    .. [1] L. Bottou, J. Peters, J. Quinonero-Candela, D. X. Charles, D. M. Chickering,
       E. Portugaly, D. Ray, P. Simard and E. Snelson, "Counterfactual reasoning and learning
       systems: the example of computational advertising", JMLR 14, 3207-3260, 2013.
    .. [2] L. Kish, *Survey Sampling*, Wiley, 1965 (effective sample size).

    Examples
    --------
    >>> import numpy as np
    >>> from ope.diagnostics import diagnose_arrays
    >>> reward = np.array([1.0, 0.0, 1.0, 0.0])
    >>> propensity = np.array([0.5, 0.5, 0.5, 0.5])
    >>> target = np.array([1.0, 0.0, 1.0, 0.0])
    >>> d = diagnose_arrays(reward, propensity, target, policy_names=["greedy"],
    ...                     reward_range=(0.0, 1.0))
    >>> row = d.table().iloc[0]
    >>> float(row["ess"]), float(row["mean_weight"]), float(row["chi2_divergence"])
    (2.0, 1.0, 1.0)
    >>> round(float(row["kl_divergence"]), 4)  # log 2
    0.6931
    """
    settings = _settings(max_weight, reward_range, confidence_level, target_width, new_rows)
    data = validated_inputs(
        reward,
        logging_propensity,
        target_propensity,
        reward_range=settings.reward_range,
        policy_names=policy_names,
        segments=segments,
        action=action,
        action_labels=None,
        target_distributions=target_distributions,
        logging_distribution=logging_distribution,
        sampling_weight=sampling_weight,
    )
    out = _diagnose(data, settings, [])
    if bool(check_flag(sensitivity, "sensitivity")):
        with_sensitivity(out, data, "logged")
    return out


def with_sensitivity(out: Diagnostics, data: Inputs, source: str) -> None:
    """Run the sensitivity analysis on the diagnosed rows and attach it to ``out``: the result,
    each candidate's decision and tipping point in its row, and a note per decision."""
    analysis = sensitivity_of_inputs(data, GAMMA_GRID, "snips", out.confidence_level, source)
    points = analysis.tipping_points().set_index("policy")
    out.rows = tuple(
        replace(
            row,
            sensitivity_decision=str(points.loc[row.policy, "decision"]),
            gamma_star=float(points.loc[row.policy, "gamma_star"]),
        )
        for row in out.rows
    )
    out.sensitivity = analysis
    out.notes = (
        *out.notes,
        *(
            f"{name}: {analysis.note(name)} (marginal sensitivity model, SNIPS; "
            "Diagnostics.sensitivity holds the curve)"
            for name in analysis.policies
            if points.loc[name, "decision"] != "unclear"
        ),
    )


@dataclass(frozen=True)
class _Settings:
    """The checked settings of one diagnosis."""

    max_weight: float | None
    reward_range: tuple[float, float] | None
    confidence_level: float
    target_width: float | None
    new_rows: int | None


def _settings(
    max_weight: Any,
    reward_range: Any,
    confidence_level: Any,
    target_width: Any,
    new_rows: Any,
) -> _Settings:
    """The settings of :func:`diagnose` and :func:`diagnose_arrays`, checked (ParameterError)."""
    rr = check_reward_range(reward_range)
    if target_width is not None or new_rows is not None:
        if target_width is None or new_rows is None:
            raise ParameterError(
                "pass both `target_width` and `new_rows` for an exploration plan (or neither)."
            )
        target_width = check_real(target_width, "target_width")
        new_rows = check_positive_int(new_rows, "new_rows", minimum=2)
        if rr is None:
            raise MissingBoundsError(
                "the exploration plan needs a priori reward bounds: pass "
                "reward_range=(low, high), e.g. (0, 1) for clicks."
            )
    return _Settings(
        check_max_weight(max_weight),
        rr,
        check_confidence_level(confidence_level),
        target_width,
        new_rows,
    )


def _reusable(statistics: Any, data: Inputs, max_weight: float | None) -> CenteredMoments | None:
    """The moments of an evaluation's pass when they describe these rows and candidates."""
    if statistics is None:
        return None
    centered = getattr(statistics, "centered", None)
    names = getattr(statistics, "names", None)
    if not isinstance(centered, CenteredMoments) or names is None:
        raise ParameterError(
            "`statistics` must be the moment statistics of an evaluation of the same logs "
            f"(Evaluation.statistics, an ope.MomentStats); got {type(statistics).__name__}."
        )
    if (
        list(names) != list(data.names)
        or centered.n != data.n
        or getattr(statistics, "max_weight", None) != max_weight
    ):
        raise ParameterError(
            "`statistics` describe other rows or settings: they cover policies "
            f"{list(names)} on {centered.n:,} rows with max_weight="
            f"{getattr(statistics, 'max_weight', None)}, this diagnosis {data.names} on "
            f"{data.n:,} rows with max_weight={max_weight}. Evaluate with the same policies "
            "and max_weight, or leave `statistics` out."
        )
    return centered


def _diagnose(
    data: Inputs, settings: _Settings, extra_notes: list[str], statistics: Any = None
) -> Diagnostics:
    """The shared body of :func:`diagnose` and :func:`diagnose_arrays` on validated inputs."""
    if data.sampling is not None:
        return _diagnose_weighted(data, settings, extra_notes, statistics)
    mw, rr, level = settings.max_weight, settings.reward_range, settings.confidence_level
    lo = rr[0] if rr is not None else 0.0
    r, p, t = data.reward, data.propensity, data.targets
    segs = data.segmentations
    by_segment: list[list[CenteredMoments | None]] = []
    reused = _reusable(statistics, data, mw)
    if segs:
        by_segment, moments = segment_moments(segs, r, p, data.target, max_weight=mw)
    elif reused is not None:  # the evaluation's pass already holds every moment used here
        moments = reused
    else:
        moments = centered_moments(r, p, t, max_weight=mw)
    top = tail_length(data.n) + 1  # the tail and its threshold
    scale = 0.0 if rr is None else smoothing_scale(data.n, *rr)
    sums = fused_pass(
        p, t, None if rr is None else r - lo, WEIGHT_QUANTILES, tail=top, smoothing_scale=scale
    )
    quantiles = weight_quantiles(p, t, sums, moments.max_w, WEIGHT_QUANTILES)
    tails = fit_tails(weight_tails(p, t, sums, top), data.n)
    rows, seg_rows, intervals, profiles = [], [], [], []
    for j, name in enumerate(data.names):  # a loop over policies
        # the variance shares square the weighted rewards: refuse magnitudes whose squares
        # overflow rather than report inf/NaN shares (the numeric-range guard of returns/paired)
        check_no_overflow(
            np.array([moments.product_mean_var(j, clipped=True, about=lo)[1]]),
            f"the diagnostics of policy {name!r} (variance of w (r - {lo:g}))",
            {"reward": r},
            row=None,
        )
        deficient = None
        if data.deficiency is not None and segs:
            deficient = segment_sums(segs, data.deficiency[name])
        s_rows = segment_rows(j, name, segs, by_segment, moments, deficient, lo=lo)
        expected = 1.0
        unsupported = float("nan")
        if data.deficiency_zero is not None and data.deficiency is not None:
            # E_0[w] = 1 - (candidate mass on actions with pi_0 = 0)
            expected = 1.0 - float(data.deficiency_zero[name].mean())
            unsupported = float(data.deficiency[name].mean())
        row, interval, profile = policy_row(
            j,
            name,
            moments,
            profile_bins=None if sums.profile_bins is None else sums.profile_bins[j],
            sum_wlogw=float(sums.sum_wlogw[j]),
            tail=tails[j],
            quantiles=quantiles[j],
            expected=expected,
            unsupported_mass=unsupported,
            segments=s_rows,
            max_weight=mw,
            reward_range=rr,
            confidence_level=level,
        )
        rows.append(row)
        seg_rows.append(s_rows)
        intervals.append(interval)
        profiles.append(profile)
    rows = _smoothing_bounds(data, rows, settings, sums.sum_log1p)
    return _finish(
        data, settings, extra_notes, rows, seg_rows, intervals, profiles, sums.hist_counts
    )


def _finish(
    data: Inputs,
    settings: _Settings,
    extra_notes: list[str],
    rows: list[PolicyRow],
    seg_rows: list[list[SegmentRow]],
    intervals: list[Any],
    profiles: list[Any],
    hist_counts: np.ndarray,
    info: Sequence[str] = (),
) -> Diagnostics:
    """Warn the notes and build the :class:`Diagnostics` (``info``: notes that are stated
    first and not warned, as the sampling-weight note of every estimate)."""
    seg_rows = _segment_tails(data, seg_rows)
    notes = (
        extra_notes + data.notes + overlap_notes(rows, seg_rows, weighted=data.sampling is not None)
    )
    for note in notes:
        warnings.warn(note, OverlapWarning, stacklevel=user_stacklevel())
    notes = [*info, *notes]
    return Diagnostics(
        data,
        rows,
        seg_rows,
        intervals,
        profiles,
        hist_counts,
        max_weight=settings.max_weight,
        reward_range=settings.reward_range,
        confidence_level=settings.confidence_level,
        target_width=settings.target_width,
        new_rows=settings.new_rows,
        notes=notes,
    )


def _smoothing_bounds(
    data: Inputs, rows: list[PolicyRow], settings: _Settings, sum_log1p: np.ndarray | None
) -> list[PolicyRow]:
    """Each policy row with the logarithmic-smoothing lower bound of its value (IPS terms, no
    weight bound; :mod:`ope.intervals.smoothing`) at the diagnostics' level, one-sided, from
    the sums of ``log1p(w (r - r_min) / lambda)`` of the diagnostics' pass: needs
    ``reward_range`` (rows with sampling weights are not passed here: their bound stays NaN,
    as it is for i.i.d. rows of the logged distribution)."""
    rr = settings.reward_range
    if rr is None or sum_log1p is None:
        return rows
    level = settings.confidence_level
    return [
        replace(
            row,
            log_smoothing_low=bound_from_mean_log(
                float(sum_log1p[j]) / data.n, data.n, rr[0], rr[1], level
            ),
        )
        for j, row in enumerate(rows)  # a loop over policies
    ]


def _segment_tails(data: Inputs, seg_rows: list[list[SegmentRow]]) -> list[list[SegmentRow]]:
    """Each segment row with the Pareto k-hat of its rows' weights (``s w`` with sampling
    weights): one stable sort of each segment column's codes, shared by every policy."""
    if not data.segmentations or not any(seg_rows):
        return seg_rows
    groups: dict[tuple[str, str], np.ndarray] = {}
    for seg in data.segmentations:  # a loop over segment columns
        order = np.argsort(seg.codes, kind="stable")
        bounds = np.searchsorted(seg.codes[order], np.arange(seg.size + 1))
        for code, label in enumerate(seg.labels):  # a loop over segments (capped)
            groups[(seg.column, str(label))] = order[bounds[code] : bounds[code + 1]]
    out = []
    for j, rows in enumerate(seg_rows):  # a loop over policies
        if not rows:
            out.append(rows)
            continue
        w = data.sampled(data.weights(j))
        out.append(
            [
                replace(row, pareto_k=pareto_k(w[groups[key]]).pareto_k)
                if (key := (row.column, str(row.segment))) in groups and groups[key].size
                else row
                for row in rows
            ]
        )
    return out


def weighted_note(name: str, total: float, n: int) -> str:
    """The note of a diagnosis of rows with sampling weights (column or argument ``name``)."""
    return (
        f"rows carry sampling weights (`{name}`): the diagnostics are Horvitz-Thompson "
        f"weighted, describing the logged population of about {total:,.6g} rows (from {n:,} "
        "kept rows): weight quantiles, histograms, shares, divergences, unsupported mass and "
        "segment masses are Hajek means; the ESS is Kish's of the sampling times the "
        "importance weights, compared with Kish's ESS of the sampling weights; intervals use "
        "linearized variances with normal margins."
    )


def _diagnose_weighted(
    data: Inputs, settings: _Settings, extra_notes: list[str], statistics: Any
) -> Diagnostics:
    """:func:`_diagnose` for rows with sampling (Horvitz-Thompson) weights ``data.sampling``.

    Every statistic is the sampling-weighted one (Notes of :func:`diagnose_arrays`); the
    moment statistics of an evaluation are not reused (the diagnostics' own weighted sums are
    computed here).
    """
    del statistics  # the evaluation's statistics are validated by ope.evaluate, not needed
    mw, rr, level = settings.max_weight, settings.reward_range, settings.confidence_level
    lo = rr[0] if rr is not None else 0.0
    s = data.sampling
    assert s is not None
    r, p, t = data.reward, data.propensity, data.target
    total = data.total()
    sums = weighted_pass(p, t, s, None if rr is None else r - lo)
    rows, seg_rows, intervals, profiles = [], [], [], []
    for j, name in enumerate(data.names):  # a loop over policies
        w = data.weights(j)
        wc = w if mw is None else np.minimum(w, mw)
        d = None if data.deficiency is None else data.deficiency[name]
        s_rows = weighted_segment_rows(name, data.segmentations, w, s, wc * (r - lo), d)
        expected = 1.0
        unsupported = float("nan")
        if data.deficiency_zero is not None and data.deficiency is not None:
            # E_0[w] = 1 - (candidate mass on actions with pi_0 = 0), as Hajek means
            expected = 1.0 - float(np.dot(s, data.deficiency_zero[name])) / total
            unsupported = float(np.dot(s, data.deficiency[name])) / total
        row, interval, profile = weighted_policy_row(
            name,
            w,
            s,
            r,
            profile_bins=None if sums.profile_bins is None else sums.profile_bins[j],
            sum_wlogw=float(sums.sum_wlogw[j]),
            tail=pareto_k(s * w),
            quantiles=weighted_quantiles(w, s, WEIGHT_QUANTILES),
            expected=expected,
            unsupported_mass=unsupported,
            segments=s_rows,
            max_weight=mw,
            reward_range=rr,
            confidence_level=level,
        )
        rows.append(row)
        seg_rows.append(s_rows)
        intervals.append(interval)
        profiles.append(profile)
    note = weighted_note(data.sampling_name or "sampling_weight", total, data.n)
    return _finish(
        data,
        settings,
        extra_notes,
        rows,
        seg_rows,
        intervals,
        profiles,
        sums.hist_counts,
        info=[note],
    )


@fill_doc({"shared parameters": _SHARED_PARAMS.strip() + "\n"})
def diagnose(
    logs: Any,
    policies: Any = None,
    *,
    by: str | Sequence[str] | None = None,
    max_weight: float | None = None,
    reward_range: Sequence[float] | None = None,
    confidence_level: float = 0.95,
    target_width: float | None = None,
    new_rows: int | None = None,
    statistics: Any = None,
    weight_column: str | None = None,
    embedding: Any = None,
    sensitivity: bool | str = "auto",
) -> Diagnostics:
    """Overlap diagnostics of candidate policies on validated logs.

    Parameters
    ----------
    logs : ope.BanditLogs
        Validated logs (:func:`ope.read_logs`).
    policies : optional
        As in :func:`ope.evaluate`: names of ``target__<name>`` columns, a long-format policy
        table, or a dict of name to policy object; None means every ``target__<name>`` column.
    by : str or sequence of str, optional
        Segment columns of the logs. Numeric columns with many values are cut into quantile
        bins; logs with many distinct actions also get item-popularity buckets.
    <shared parameters>
    statistics : ope.MomentStats, optional
        The moment statistics of an evaluation of the same logs and candidates with the same
        ``max_weight`` (``ope.evaluate(...).statistics``): every moment of the diagnosis (ESS,
        mean weight, clipped sums, interval inputs) is read from them instead of another pass
        over the rows (without ``by``; segments need their own). Only the diagnostics' own
        pass (weight histogram and KL sums) reads the rows. Not used for rows with sampling
        weights, whose weighted sums the diagnostics compute themselves.
    weight_column : str, optional
        The column of the rows' sampling (Horvitz-Thompson) weights, ``1 / P(row kept)``
        (default: ``weight`` when present, which the DSJSON importer fills from ``pdrop``).
        Every diagnostic is then sampling-weighted (the ``sampling_weight`` Notes of
        :func:`diagnose_arrays`) and a note says so; weights that are all 1 change nothing.
    embedding : ope.ActionEmbedding, optional
        An item embedding for marginalized estimators (MIPS and kin): each candidate also gets
        the test of the embedding and the effective sample sizes of its per-item and marginal
        weights (:func:`ope.marginal.embedding_sufficiency`), in
        :attr:`Diagnostics.embedding_checks`, a note each and ``to_dict()``. The test is of the
        unweighted rows.
    sensitivity : bool or "auto", default "auto"
        Also run the sensitivity analysis to wrong propensities (:mod:`ope.diagnostics.msm`:
        marginal-sensitivity bounds of SNIPS over ``GAMMA_GRID`` and each decision's tipping
        point :math:`\\Gamma^*`): :attr:`Diagnostics.sensitivity`, the columns
        ``sensitivity_decision`` and ``gamma_star``, a note per decision and ``to_dict()``.
        ``"auto"`` runs it when the logs' propensities were estimated
        (:func:`ope.propensity.estimate_propensities`), whose validity rests on the logger
        having used only the logged context.

    Returns
    -------
    Diagnostics

    Raises
    ------
    ope.ParameterError
        A malformed setting, as in :func:`diagnose_arrays`, or ``statistics`` of other rows,
        policies or clip level.
    ope.SchemaError
        A ``by`` column is not in the logs.
    ope.MissingBoundsError
        ``target_width``/``new_rows`` were given without ``reward_range``.
    ope.ValidationError
        A sampling weight is missing, not finite or not positive (the message names the row).

    Warns
    -----
    ope.OverlapWarning
        Low ESS/n, unsupported mass, a suspicious mean weight, or segment gaps.

    Notes
    -----
    The statistics and rules are those of :func:`diagnose_arrays`. When the logs carry
    ``candidates`` and ``logging_distribution`` and the candidates' full distributions are
    available, the support deficiency is computed exactly per row.

    References
    ----------
    .. [1] L. Bottou et al., "Counterfactual reasoning and learning systems: the example of
       computational advertising", JMLR 14, 3207-3260, 2013.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from ope.logs import BanditLogs, ValidationReport
    >>> from ope.diagnostics import diagnose
    >>> n = 400  # a uniform logger over two actions; the candidate always plays action 0
    >>> table = pa.table({"action": [0, 1] * (n // 2), "propensity": [0.5] * n,
    ...                   "reward": [1.0, 0.0] * (n // 2), "target__greedy": [1.0, 0.0] * (n // 2),
    ...                   "country": ["fr", "fr", "de", "de"] * (n // 4)})
    >>> logs = BanditLogs(table, ValidationReport("<Table>", n, n))
    >>> d = diagnose(logs, by="country", reward_range=(0, 1))
    >>> d.segments()[["segment", "rows", "target_mass_share", "ess", "gap"]]
      segment  rows  target_mass_share    ess    gap
    0      de   200                0.5  100.0  False
    1      fr   200                0.5  100.0  False
    >>> d.table().loc[0, "verdict"]
    'collect more data under the same logging'
    """
    settings = _settings(max_weight, reward_range, confidence_level, target_width, new_rows)
    extra_notes: list[str] = []
    logs, data = logs_inputs(
        logs,
        policies,
        weight_column=weight_column,
        reward_range=settings.reward_range,
        by=by,
        notes=extra_notes,
    )
    estimated = propensity_source(logs) == "estimated"
    if embedding is not None and not isinstance(embedding, ActionEmbedding):
        raise ParameterError(
            "`embedding` must be an ope.ActionEmbedding, e.g. "
            f"ope.ActionEmbedding(clusters='genre'); got {type(embedding).__name__}."
        )
    if embedding is not None and embedding.select is not None:
        raise ParameterError(
            f"`select`: the diagnosis tests one embedding; select={embedding.select!r} chooses "
            "a subset per candidate in ope.evaluate (its Evaluation.embedding_checks test each "
            "candidate's own): pass the embedding without select, or one of "
            "EmbeddingChoice.embedding_for(policy)."
        )
    if isinstance(sensitivity, str):
        if sensitivity != "auto":
            raise ParameterError(
                "`sensitivity` must be True, False or 'auto' (run it when the propensities "
                f"were estimated); got {sensitivity!r}."
            )
        run_sensitivity = estimated
    else:
        run_sensitivity = bool(check_flag(sensitivity, "sensitivity"))
    out = _diagnose(data, settings, extra_notes, statistics)
    if run_sensitivity:
        with_sensitivity(out, data, "estimated" if estimated else "logged")
    if embedding is not None:
        mp = marginal_propensities(logs, embedding, policies)
        matrix = data.target
        checks = embedding_sufficiency(
            logs.column("reward"),
            logs.column("propensity"),
            matrix,
            mp,
            sampling_weight=data.sampling,
        )
        out.embedding_checks = tuple(checks)
        out.notes = (*out.notes, *(c.note() for c in checks))
    return out
