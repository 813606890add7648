"""Overlap diagnostics: where can the logs answer for a candidate policy, and where can they not?

Off-policy estimates are only as good as the overlap between the logging policy ``pi_0`` and
the candidate ``pi``. This module measures that overlap from the importance weights
``w_i = pi(a_i | x_i) / pi_0(a_i | x_i)`` of the logged rows, per policy and per segment, and
turns it into decisions a person can act on:

* **per policy** -- Kish effective sample size (ESS), weight quantiles and maximum, the share of
  weights above a clip level and the target mass they carry, the mean weight (which must be close
  to 1 when propensities are right and the logger covers the candidate's actions: a clear
  deviation flags a logging or propensity bug), divergences between candidate and logger
  estimated from the weights (KL, chi-square, Renyi-2), and, when the logging distribution over
  the candidate set was logged, the candidate's mass on actions the logger (almost) never plays;
* **per segment** -- rows, the candidate's mass share, ESS, maximum weight and the segment's share
  of the estimate's variance, with *gaps* flagged and explained;
* **outer vs inner uncertainty** (Bottou et al., 2013) -- how much of the interval is sampling
  (shrinks with more logs of the same kind) and how much is coverage (clipped or unsupported
  mass: only more exploration shrinks it), over a profile of clip levels, with a verdict per
  policy that agrees with the gaps and the plan;
* **an exploration plan** -- the smallest share of traffic on which the logger should play the
  candidate's own choice so that ope's IPS interval from ``new_rows`` new logs is narrower
  than ``target_width``, per scope and per action.

The entry points are :func:`diagnose` (validated logs) and :func:`diagnose_arrays` (numpy
arrays); both return a :class:`Diagnostics` object. The package has one module per concept:

* ``_inputs`` -- the validated arrays (through :mod:`ope._validation`), actions and segments;
* ``segments`` -- segment codes, quantile bins, popularity buckets, per-segment moments and
  the gap rules;
* ``support`` -- the support deficiency from the full distributions;
* ``_pass`` -- the diagnostics' own pass: weight histogram, KL sums and exact quantiles;
* ``overlap`` -- the per-policy row, the outer/inner split, the verdict and the notes;
* ``tails`` -- the weights' upper tail: Pareto k-hat and Hill's tail index;
* ``plan`` -- the exploration plan;
* ``result`` -- the :class:`Diagnostics` result and its rendering.

Rows with sampling (Horvitz-Thompson) weights ``s`` (DSJSON ``pdrop``; ``sampling_weight=``,
``weight_column=``) are diagnosed as the logged population they stand for: every mean over rows
is a Hajek mean, the ESS is Kish's of ``s w`` against Kish's of ``s``, and the intervals use
linearized variances (Notes of :func:`diagnose_arrays`). Unweighted, every moment statistic
(ESS, mean weight and its check, clipped sums, the interval inputs,
overall and per segment) comes from the one moment kernel, :func:`ope.moments.centered_moments`,
and every rule and threshold from :mod:`ope._thresholds`, so the same data give the same notes
here as from the estimators and :func:`ope.evaluate`. There is no Python loop over rows and no
dense (n, n_actions) array.
"""

from __future__ import annotations

from ope._thresholds import (
    GAMMA_FRAGILE,
    COVERAGE_VERDICT_SHARE,
    ESS_RATIO_WARN,
    GAP_MASS_DEFICIT,
    GAP_MIN_ESS,
    GAP_MIN_MASS,
    GAP_UNSUPPORTED_SHARE,
    MEAN_WEIGHT_TOLERANCE,
    MEAN_WEIGHT_Z,
    PROPENSITY_TOLERANCE,
    SUPPORT_FLOOR,
    UNSUPPORTED_MASS_WARN,
)
from ope.diagnostics._diagnose import diagnose, diagnose_arrays
from ope.diagnostics.overlap import VERDICT_EXPLORE, VERDICT_MORE_DATA, WEIGHT_QUANTILES, PolicyRow
from ope.diagnostics.result import Diagnostics
from ope.diagnostics.msm import (
    GAMMA_GRID,
    Sensitivity,
    msm_weight_range,
    sensitivity,
    sensitivity_arrays,
)
from ope.diagnostics.tails import (
    K_INFINITE_VARIANCE,
    K_RELIABLE,
    TailFit,
    pareto_k,
)
from ope.diagnostics.segments import (
    MAX_CATEGORIES,
    MAX_MATRIX_ACTIONS,
    MAX_SEGMENTS,
    N_QUANTILE_BINS,
    POPULARITY_TRAFFIC_EDGES,
    SegmentRow,
)

__all__ = [
    "Diagnostics",
    "PolicyRow",
    "SegmentRow",
    "diagnose",
    "diagnose_arrays",
    "pareto_k",
    "TailFit",
    "sensitivity",
    "sensitivity_arrays",
    "msm_weight_range",
    "Sensitivity",
    "GAMMA_GRID",
    "GAMMA_FRAGILE",
    "K_RELIABLE",
    "K_INFINITE_VARIANCE",
    "ESS_RATIO_WARN",
    "SUPPORT_FLOOR",
    "UNSUPPORTED_MASS_WARN",
    "MEAN_WEIGHT_Z",
    "MEAN_WEIGHT_TOLERANCE",
    "GAP_MIN_MASS",
    "GAP_MIN_ESS",
    "GAP_MASS_DEFICIT",
    "GAP_UNSUPPORTED_SHARE",
    "COVERAGE_VERDICT_SHARE",
    "WEIGHT_QUANTILES",
    "PROPENSITY_TOLERANCE",
    "MAX_SEGMENTS",
    "MAX_CATEGORIES",
    "N_QUANTILE_BINS",
    "MAX_MATRIX_ACTIONS",
    "POPULARITY_TRAFFIC_EDGES",
    "VERDICT_MORE_DATA",
    "VERDICT_EXPLORE",
]
