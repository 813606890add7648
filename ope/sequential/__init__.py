"""Off-policy evaluation over multi-step trajectories, and fitted Q evaluation.

Given trajectories logged by a behaviour policy (``ope.read_trajectories`` ->
:class:`ope.logs.Trajectories`, one row per step) and the candidate's probability of each logged
action, :func:`sequential_estimate` estimates the candidate's expected discounted return with
one of six estimators (``is``, ``pdis``, ``wis``, ``wpdis``, ``dr``, ``wdr``);
:func:`fitted_q_evaluation` produces the per-step ``q_hat``/``v_hat`` and tail values the doubly
robust ones use.

Modules:

``estimators``
    the six estimators, their standard errors and bootstrap sources;
``evaluation``
    :func:`evaluate_trajectories`: many candidates × many estimators, with the interval
    fallback, the logging policy's value and the estimand in words;
``fqe``
    fitted Q evaluation (tabular or linear on state features);
``_steps``
    trajectories as validated per-step arrays (structure, columns, the checks of one call);
``_bounds``
    finite-sample intervals (Hoeffding, empirical Bernstein, betting) of ``is`` and ``pdis``
    from a priori reward range, horizon and weight bound.
"""

from __future__ import annotations

# the constants and PerStep stay importable from here, as from the former single module
from ope.sequential._steps import PerStep  # noqa: F401
from ope.sequential.estimators import (  # noqa: F401
    MAX_BOOTSTRAP_CELLS,
    MIN_EPISODES,
    MARGINALIZED,
    SEQUENTIAL_ESTIMATORS,
    episode_weights,
    sequential_estimate,
)
from ope.sequential.evaluation import TrajectoryEvaluation, evaluate_trajectories
from ope.sequential.fqe import (  # noqa: F401
    FQE_MAX_ITERATIONS,
    FQE_TOL,
    POLICY_SUM_TOL,
    FittedQ,
    fitted_q_evaluation,
)

__all__ = [
    "episode_weights",
    "SEQUENTIAL_ESTIMATORS",
    "MARGINALIZED",
    "sequential_estimate",
    "evaluate_trajectories",
    "TrajectoryEvaluation",
    "fitted_q_evaluation",
    "FittedQ",
]
