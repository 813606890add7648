"""Confidence intervals for policy values.

Each method states its assumptions in its docstring:

- ``normal_interval``, ``t_interval`` (asymptotic), ``bootstrap_interval`` (percentile, BCa);
- ``hoeffding_interval``, ``bernstein_interval`` (finite-sample, need a priori bounds);
- ``bottou_interval`` (clipped IPS: outer sampling part + inner clipped-mass part);
- ``empirical_likelihood_interval`` (Karampatziakis, Langford & Mineiro);
- ``betting_interval`` and ``betting_confidence_sequence`` (anytime-valid), and the one-sided
  ``betting_lower_bound`` (the safety gate's default);
- ``log_smoothing_lower_bound`` and ``log_smoothing_interval`` (one-sided, finite-sample, no
  weight bound: Sakhi et al. 2024).

Most users reach them through ``Estimate.ci(confidence_level, method=...)``.
"""

from __future__ import annotations

from ope.intervals._types import BottouInterval, ConfidenceInterval
from ope.intervals.asymptotic import normal_interval, t_interval
from ope.intervals.betting import (
    betting_confidence_sequence,
    betting_interval,
    betting_lower_bound,
)
from ope.intervals.bootstrap import (
    SharedBootstrap,
    bootstrap_interval,
    bootstrap_replicates,
    default_n_resamples,
    resample_counts,
    shared_bootstrap,
)
from ope.intervals.bounded import bernstein_interval, bottou_interval, hoeffding_interval
from ope.intervals.smoothing import log_smoothing_interval, log_smoothing_lower_bound
from ope.intervals.likelihood import (
    empirical_likelihood_estimate,
    empirical_likelihood_interval,
)

__all__ = [
    "BottouInterval",
    "ConfidenceInterval",
    "bernstein_interval",
    "betting_confidence_sequence",
    "betting_interval",
    "betting_lower_bound",
    "bootstrap_interval",
    "SharedBootstrap",
    "default_n_resamples",
    "resample_counts",
    "shared_bootstrap",
    "bootstrap_replicates",
    "bottou_interval",
    "empirical_likelihood_estimate",
    "empirical_likelihood_interval",
    "hoeffding_interval",
    "log_smoothing_interval",
    "log_smoothing_lower_bound",
    "normal_interval",
    "t_interval",
]
