"""Minimal valid calls of the entry points of one area: estimators (IPS family, DM/DR family,
slate estimators), the moment statistics, importance weights and the intervals namespace.

``VALID`` maps each registered name to a factory ``valid(tmp) -> Call``; ``KNOWN_BROKEN`` maps
``"<entry>::<argument>"`` to what breaks the hostile-input contract today (each a bug to fix at
its root; the contract test marks it a strict xfail so that the fix asks for its removal).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Final

import numpy as np

from ope._entrypoints import Call
from ope._valid_calls._base import (
    N, arrays, call, estimate, estimator_estimate,
)

#: Registered name -> a factory of its minimal valid call (see :class:`ope._entrypoints.Call`).
VALID: Final[dict[str, Callable[[Path], Call]]] = {
    "ope.get_estimator": lambda tmp: call("ope.get_estimator", name="clipped_ips",
                                           max_weight=10.0),
    "ope.importance_weights": lambda tmp: call(
        "ope.importance_weights", logging_propensity=arrays()["logging_propensity"],
        target_propensity=arrays()["target_propensity"], max_weight=10.0),
    "ope.logging_value": lambda tmp: call("ope.logging_value", reward=arrays()["reward"],
                                           reward_range=(0.0, 1.0)),
    "ope.ClippedIPS": lambda tmp: call("ope.ClippedIPS", max_weight=10.0),
    "ope.SwitchDR": lambda tmp: call("ope.SwitchDR", tau=10.0),
    "ope.DRos": lambda tmp: call("ope.DRos", shrinkage=1.0),
    "ope.IPS.estimate": estimator_estimate("ope.IPS"),
    "ope.SNIPS.estimate": estimator_estimate("ope.SNIPS"),
    "ope.ClippedIPS.estimate": estimator_estimate("ope.ClippedIPS", max_weight=10.0),
    "ope.DM.estimate": estimator_estimate("ope.DM"),
    "ope.DR.estimate": estimator_estimate("ope.DR"),
    "ope.SNDR.estimate": estimator_estimate("ope.SNDR"),
    "ope.compare": lambda tmp: call("ope.compare", a=estimate(), b=estimate(),
                                     confidence_level=0.95),
    "ope.intervals.normal_interval": lambda tmp: call(
        "ope.intervals.normal_interval", value=0.5, std_error=0.1, confidence_level=0.95),
    "ope.intervals.t_interval": lambda tmp: call(
        "ope.intervals.t_interval", value=0.5, std_error=0.1, n=30, confidence_level=0.95),
    "ope.intervals.hoeffding_interval": lambda tmp: call(
        "ope.intervals.hoeffding_interval", mean=0.5, n=30, low=0.0, high=1.0,
        confidence_level=0.95),
    "ope.intervals.bernstein_interval": lambda tmp: call(
        "ope.intervals.bernstein_interval", mean=0.5, variance=0.1, n=30, low=0.0, high=1.0,
        confidence_level=0.95),
    "ope.intervals.default_n_resamples": lambda tmp: call(
        "ope.intervals.default_n_resamples", confidence_level=0.95),
    "ope.intervals.resample_counts": lambda tmp: call(
        "ope.intervals.resample_counts", n=20, n_resamples=5, rng=0),
    "ope.intervals.betting_interval": lambda tmp: call(
        "ope.intervals.betting_interval", weight=np.ones(N), reward=arrays()["reward"],
        reward_range=(0.0, 1.0), confidence_level=0.95),
    "ope.intervals.empirical_likelihood_interval": lambda tmp: call(
        "ope.intervals.empirical_likelihood_interval", weight=np.ones(N),
        reward=arrays()["reward"], reward_range=(0.0, 1.0), weight_bound=10.0,
        confidence_level=0.95),
    "ope.intervals.betting_lower_bound": lambda tmp: call(
        "ope.intervals.betting_lower_bound", values=arrays()["reward"], low=0.0, high=1.0,
        confidence_level=0.95),
}

#: ``"<entry>::<argument>"`` -> how the contract breaks today.
KNOWN_BROKEN: Final[dict[str, str]] = {
    'ope.ClippedIPS.estimate::reward': (
        'ope.ClippedIPS.estimate(reward=<empty>) raised ValidationError not naming `rewar'
        'd`: clipped_ips: need at least 2 rows for a value with a standard error; got 0.'
    ),
    'ope.ClippedIPS.estimate::target_propensity': (
        'ope.ClippedIPS.estimate(target_propensity=<all 0>) raised EstimationError not na'
        'ming `target_propensity`: clipped_ips: all 60 importance weights are zero: the c'
        'andidate never chooses a logged action, so the logs carry no informati'
    ),
    'ope.DM.estimate::reward': (
        'ope.DM.estimate(reward=<empty>) raised ValidationError not naming `reward`: dm: '
        'need at least 2 rows for a value with a standard error; got 0.'
    ),
    'ope.DM.estimate::q_target': (
        'ope.DM.estimate(q_target=<all 1e308>) returned value=inf'
    ),
    'ope.DR.estimate::reward': (
        'ope.DR.estimate(reward=<all 1e308>) returned value=inf'
    ),
    'ope.DR.estimate::q_logged': (
        'ope.DR.estimate(q_logged=<all 1e308>) returned value=-inf'
    ),
    'ope.DR.estimate::q_target': (
        'ope.DR.estimate(q_target=<all 1e308>) returned value=inf'
    ),
    'ope.IPS.estimate::reward': (
        'ope.IPS.estimate(reward=<empty>) raised ValidationError not naming `reward`: ips'
        ': need at least 2 rows for a value with a standard error; got 0.'
    ),
    'ope.IPS.estimate::target_propensity': (
        'ope.IPS.estimate(target_propensity=<all 0>) raised EstimationError not naming `t'
        'arget_propensity`: ips: all 60 importance weights are zero: the candidate never '
        'chooses a logged action, so the logs carry no information about it by '
    ),
    'ope.SNDR.estimate::reward': (
        'ope.SNDR.estimate(reward=<all 1e308>) returned value=inf'
    ),
    'ope.SNDR.estimate::target_propensity': (
        'ope.SNDR.estimate(target_propensity=<all 0>) raised EstimationError not naming `'
        'target_propensity`: sndr: all 60 importance weights are zero: the candidate neve'
        'r chooses a logged action, so the logs carry no information about it b'
    ),
    'ope.SNDR.estimate::q_logged': (
        'ope.SNDR.estimate(q_logged=<all 1e308>) returned value=-inf'
    ),
    'ope.SNDR.estimate::q_target': (
        'ope.SNDR.estimate(q_target=<all 1e308>) returned value=inf'
    ),
    'ope.SNIPS.estimate::reward': (
        'ope.SNIPS.estimate(reward=<empty>) raised ValidationError not naming `reward`: s'
        'nips: need at least 2 rows for a value with a standard error; got 0.'
    ),
    'ope.SNIPS.estimate::target_propensity': (
        'ope.SNIPS.estimate(target_propensity=<all 0>) raised EstimationError not naming '
        '`target_propensity`: snips: all 60 importance weights are zero: the candidate ne'
        'ver chooses a logged action, so the logs carry no information about it'
    ),
    'ope.get_estimator::name': (
        "ope.get_estimator(name='') raised ParameterError not naming `name`: unknown esti"
        "mator ''; choose one of dm, ips, clipped_ips, snips, dr, sndr, switch_dr, dros."
    ),
    'ope.logging_value::reward': (
        'ope.logging_value(reward=<empty>) raised ValidationError not naming `reward`: lo'
        'gging: need at least 2 rows for a value with a standard error; got 0.'
    ),
    'ope.intervals.bernstein_interval::high': (
        'ope.intervals.bernstein_interval(high=5e-324) raised ValidationError not naming '
        '`high`: `mean`=0.5 lies outside its a priori range [0.0, 5e-324]: the values wer'
        'e not within the bounds given. Check the bounds, or the values passed.'
    ),
    'ope.intervals.resample_counts::n': (
        'ope.intervals.resample_counts(n=1000000000000000000000000000000) raised Overflow'
        "Error (not from ope's exception tree): Python int too large to convert to C long"
    ),
    'ope.intervals.resample_counts::n_resamples': (
        'ope.intervals.resample_counts(n_resamples=1000000000000000000000000000000) raise'
        "d ValueError (not from ope's exception tree): Maximum allowed size exceeded"
    ),
    'ope.intervals.hoeffding_interval::high': (
        'ope.intervals.hoeffding_interval(high=5e-324) raised ValidationError not naming '
        '`high`: `mean`=0.5 lies outside its a priori range [0.0, 5e-324]: the values wer'
        'e not within the bounds given. Check the bounds, or the values passed.'
    ),
    'ope.intervals.t_interval::n': (
        'ope.intervals.t_interval(n=1000000000000000000000000000000) raised TypeError (no'
        "t from ope's exception tree): ufunc 'stdtrit' not supported for the input types,"
        ' and the inputs could not be safely coerced to any supported types acc'
    ),
}
