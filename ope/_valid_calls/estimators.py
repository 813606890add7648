"""Valid calls of one area (the conventions are in :mod:`ope._valid_calls`): estimators (IPS
family, DM/DR family, slate estimators), the moment statistics, importance weights and the
intervals namespace."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import numpy as np

from ope._entrypoints import Call, resolve
from ope._valid_calls._base import (
    N,
    arrays,
    call,
    estimate,
    estimator_estimate,
    slate_frame,
    slate_policies,
)


def _moment_stats(max_weight: float | None = None) -> Any:
    from ope.streaming import MomentStats

    a = arrays()
    return MomentStats.from_arrays(
        a["reward"], a["logging_propensity"], a["target_propensity"], max_weight=max_weight
    )


def _slate_estimate(cls: str, **settings: Any) -> Callable[[Path], Call]:
    """The estimate of a slate estimator on :func:`slate_frame` against the candidate policy;
    the logger's probabilities come from the logs, except for the exact pseudoinverse."""

    def build(tmp: Path) -> Call:
        target, logging = slate_policies()
        opts = dict(settings)  # the estimator's settings; model is the call's
        per_call = {k: opts.pop(k) for k in list(opts) if k == "model"}
        est = resolve(cls)(**opts)
        exact = cls == "ope.PseudoInverse" and not opts.get("product_logging")
        return Call(
            est.estimate,
            {
                "logs": slate_frame(),
                "target": target,
                "logging": logging if exact else None,
                "policy": "cand",
                **per_call,
            },
        )

    return build


def _moment_method(method: str, **kwargs: Any) -> Callable[[Path], Call]:
    def build(tmp: Path) -> Call:
        return Call(getattr(_moment_stats(), method), dict(kwargs))

    return build


def _with_rows(tmp: Path) -> Call:
    stats, a = _moment_stats(), arrays()
    return Call(
        stats.with_rows,
        {
            "estimates": stats.estimates("ips"),
            "reward": a["reward"],
            "logging_propensity": a["logging_propensity"],
            "target_propensity": a["target_propensity"][:, None],
            "reward_range": (0.0, 1.0),
        },
    )


def _on_moments(cls: str, method: str, **settings: Any) -> Callable[[Path], Call]:
    """A call of ``cls(**settings).<method>(mom, j, origin)`` on the planted moment statistics."""

    def build(tmp: Path) -> Call:
        est = resolve(cls)(**settings)
        stats = _moment_stats(max_weight=settings.get("max_weight"))
        return Call(getattr(est, method), {"mom": stats.centered, "j": 0, "origin": 0.0})

    return build


def _constructor(name: str) -> Callable[[Path], Call]:
    """The call of the constructor ``name`` with its defaults."""
    return lambda tmp: call(name)


def _sampling_weighted(factory: Callable[[Path], Call]) -> Callable[[Path], Call]:
    """The same call on rows with sampling weights (the weighted path of the estimator)."""

    def build(tmp: Path) -> Call:
        base = factory(tmp)
        return Call(base.target, {**base.kwargs, "sampling_weight": np.linspace(1.0, 3.0, N)})

    return build


def _ratio(means: np.ndarray) -> np.ndarray:
    return means[..., 0] / means[..., 1]


def _components() -> np.ndarray:
    a = arrays()
    w = a["target_propensity"] / a["logging_propensity"]
    return np.column_stack([w * a["reward"], w])


def _weighted_rows_call(name: str, **extra: Any) -> Call:
    """A call of an interval of weighted rows: unit weights, the planted rewards in [0, 1]."""
    return call(
        name, weight=np.ones(N), reward=arrays()["reward"], reward_range=(0.0, 1.0), **extra
    )


#: Registered name -> a factory of its minimal valid call (see :class:`ope._entrypoints.Call`).
VALID: Final[dict[str, Callable[[Path], Call]]] = {
    "ope.get_estimator": lambda tmp: call("ope.get_estimator", name="clipped_ips", max_weight=10.0),
    "ope.importance_weights": lambda tmp: call(
        "ope.importance_weights",
        logging_propensity=arrays()["logging_propensity"],
        target_propensity=arrays()["target_propensity"],
        max_weight=10.0,
    ),
    "ope.logging_value": lambda tmp: call(
        "ope.logging_value", reward=arrays()["reward"], reward_range=(0.0, 1.0)
    ),
    "ope.ClippedIPS": lambda tmp: call("ope.ClippedIPS", max_weight=10.0),
    "ope.SwitchDR": lambda tmp: call("ope.SwitchDR", tau=10.0),
    "ope.DRos": lambda tmp: call("ope.DRos", shrinkage=1.0),
    "ope.IPS.estimate": estimator_estimate("ope.IPS"),
    "ope.MIPS.estimate": estimator_estimate("ope.MIPS"),
    "ope.SNMIPS.estimate": estimator_estimate("ope.SNMIPS"),
    "ope.MarginalizedDR.estimate": estimator_estimate("ope.MarginalizedDR"),
    "ope.OffCEM.estimate": estimator_estimate("ope.OffCEM"),
    "ope.SNIPS.estimate": estimator_estimate("ope.SNIPS"),
    "ope.ClippedIPS.estimate": _sampling_weighted(
        estimator_estimate("ope.ClippedIPS", max_weight=10.0)
    ),
    "ope.DM.estimate": estimator_estimate("ope.DM"),
    "ope.DR.estimate": estimator_estimate("ope.DR"),
    "ope.SNDR.estimate": estimator_estimate("ope.SNDR"),
    "ope.compare": lambda tmp: call(
        "ope.compare", a=estimate(), b=estimate(), confidence_level=0.95, ci="normal"
    ),
    "ope.intervals.normal_interval": lambda tmp: call(
        "ope.intervals.normal_interval", value=0.5, std_error=0.1, confidence_level=0.95
    ),
    "ope.intervals.t_interval": lambda tmp: call(
        "ope.intervals.t_interval", value=0.5, std_error=0.1, n=30, confidence_level=0.95
    ),
    "ope.intervals.hoeffding_interval": lambda tmp: call(
        "ope.intervals.hoeffding_interval", mean=0.5, n=30, low=0.0, high=1.0, confidence_level=0.95
    ),
    "ope.intervals.bernstein_interval": lambda tmp: call(
        "ope.intervals.bernstein_interval",
        mean=0.5,
        variance=0.1,
        n=30,
        low=0.0,
        high=1.0,
        confidence_level=0.95,
    ),
    "ope.intervals.default_n_resamples": lambda tmp: call(
        "ope.intervals.default_n_resamples", confidence_level=0.95
    ),
    "ope.intervals.resample_counts": lambda tmp: call(
        "ope.intervals.resample_counts", n=20, n_resamples=5, rng=0
    ),
    "ope.intervals.betting_interval": lambda tmp: _weighted_rows_call(
        "ope.intervals.betting_interval", confidence_level=0.95
    ),
    "ope.intervals.log_smoothing_interval": lambda tmp: _weighted_rows_call(
        "ope.intervals.log_smoothing_interval", confidence_level=0.95
    ),
    "ope.intervals.log_smoothing_lower_bound": lambda tmp: _weighted_rows_call(
        "ope.intervals.log_smoothing_lower_bound", confidence_level=0.95
    ),
    "ope.intervals.empirical_likelihood_interval": lambda tmp: _weighted_rows_call(
        "ope.intervals.empirical_likelihood_interval", weight_bound=10.0, confidence_level=0.95
    ),
    "ope.intervals.betting_lower_bound": lambda tmp: call(
        "ope.intervals.betting_lower_bound",
        values=arrays()["reward"],
        low=0.0,
        high=1.0,
        confidence_level=0.95,
    ),
    # estimators: constructors and the estimates they make
    **{
        f"ope.{cls}": _constructor(f"ope.{cls}")
        for cls in (
            "IPS",
            "SNIPS",
            "DM",
            "DR",
            "SNDR",
            "MIPS",
            "SNMIPS",
            "MarginalizedDR",
            "OffCEM",
        )
    },
    **{
        f"ope.{cls}.{method}": (
            lambda c: (
                lambda tmp: Call(
                    getattr(resolve(f"ope.{c}")(), method_name), {"reward_range": (0.0, 1.0)}
                )
            )
        )(cls)
        for cls in ("MIPS", "SNMIPS")
        for method, method_name in (
            ("reward_origin", "reward_origin"),
            ("row_source", "row_source"),
        )
    },
    "ope.MIPS.moment_statistic": _on_moments("ope.MIPS", "moment_statistic"),
    "ope.MIPS.paired_logging_sd": _on_moments("ope.MIPS", "paired_logging_sd"),
    "ope.SNMIPS.paired_logging_sd": _on_moments("ope.SNMIPS", "paired_logging_sd"),
    "ope.SwitchDR.estimate": estimator_estimate("ope.SwitchDR", tau=10.0),
    "ope.DRos.estimate": _sampling_weighted(estimator_estimate("ope.DRos", shrinkage=1.0)),
    "ope.IPS.reward_origin": lambda tmp: Call(
        resolve("ope.IPS")().reward_origin, {"reward_range": (0.0, 1.0)}
    ),
    "ope.SNIPS.reward_origin": lambda tmp: Call(
        resolve("ope.SNIPS")().reward_origin, {"reward_range": (0.0, 1.0)}
    ),
    "ope.ClippedIPS.reward_origin": lambda tmp: Call(
        resolve("ope.ClippedIPS")(max_weight=10.0).reward_origin, {"reward_range": (0.0, 1.0)}
    ),
    "ope.IPS.row_source": lambda tmp: Call(
        resolve("ope.IPS")().row_source, {"reward_range": (0.0, 1.0)}
    ),
    "ope.SNIPS.row_source": lambda tmp: Call(
        resolve("ope.SNIPS")().row_source, {"reward_range": (0.0, 1.0)}
    ),
    "ope.ClippedIPS.row_source": lambda tmp: Call(
        resolve("ope.ClippedIPS")(max_weight=10.0).row_source, {"reward_range": (0.0, 1.0)}
    ),
    "ope.IPS.moment_statistic": _on_moments("ope.IPS", "moment_statistic"),
    "ope.ClippedIPS.moment_statistic": _on_moments(
        "ope.ClippedIPS", "moment_statistic", max_weight=10.0
    ),
    "ope.IPS.paired_logging_sd": _on_moments("ope.IPS", "paired_logging_sd"),
    "ope.ClippedIPS.paired_logging_sd": _on_moments(
        "ope.ClippedIPS", "paired_logging_sd", max_weight=10.0
    ),
    "ope.SNIPS.paired_logging_sd": _on_moments("ope.SNIPS", "paired_logging_sd"),
    # several estimators sharing one call (IPS from the kernel's pass, DR from its own) on
    # several policies with sampling weights (IPS.estimate and the others vary the unweighted
    # one-estimator path)
    "ope.estimate_many": lambda tmp: call(
        "ope.estimate_many",
        estimator=["ips", "dr"],
        reward=arrays()["reward"],
        logging_propensity=arrays()["logging_propensity"],
        target_propensity=np.column_stack([arrays()["target_propensity"]] * 2),
        q_logged=np.full(N, 0.4),
        q_target=np.full((N, 2), 0.4),
        reward_range=(0.0, 1.0),
        names=["a", "b"],
        chunk_size=16,
        rewards_checked=False,
        sampling_weight=np.linspace(1.0, 3.0, N),
        weight_name="sampling_weight",
    ),
    "ope.factor_weights": lambda tmp: call(
        "ope.factor_weights",
        logging_factors={"retrieval": np.full(N, 0.5), "ranking": np.full(N, 0.25)},
        target_factors={"ranking": np.full(N, 0.5)},
        max_weight=10.0,
    ),
    # the slate estimators
    "ope.SlateIPS": lambda tmp: call("ope.SlateIPS", self_normalized=False),
    "ope.IndependentIPS": lambda tmp: call(
        "ope.IndependentIPS", self_normalized=False, positions=(0, 1)
    ),
    "ope.CascadeIPS": lambda tmp: call("ope.CascadeIPS", self_normalized=False),
    "ope.CascadeDR": lambda tmp: call("ope.CascadeDR", self_normalized=False, model="table"),
    "ope.PseudoInverse": lambda tmp: call(
        "ope.PseudoInverse", self_normalized=False, product_logging=False
    ),
    "ope.SlateIPS.estimate": _slate_estimate("ope.SlateIPS"),
    "ope.IndependentIPS.estimate": _slate_estimate("ope.IndependentIPS"),
    "ope.CascadeIPS.estimate": _slate_estimate("ope.CascadeIPS"),
    "ope.CascadeDR.estimate": _slate_estimate("ope.CascadeDR", model=None),
    "ope.PseudoInverse.estimate": _slate_estimate("ope.PseudoInverse"),
    # the moment statistics of the streamed path
    "ope.MomentStats.from_outcomes": lambda tmp: Call(
        resolve("ope.MomentStats").from_outcomes,
        {
            "rewards": [arrays()["reward"], 2.0 * arrays()["reward"]],
            "logging_propensity": arrays()["logging_propensity"],
            "target_propensity": arrays()["target_propensity"],
            "names": ["greedy"],
            "estimators": None,
            "max_weight": 10.0,
            "chunk_size": 16,
        },
    ),
    "ope.MomentStats.from_arrays": lambda tmp: Call(
        resolve("ope.MomentStats").from_arrays,
        {
            **arrays(),
            "max_weight": 10.0,
            "names": ["greedy"],
            "chunk_size": 16,
            "sampling_weight": np.linspace(1.0, 3.0, N),
            "weight_name": "sampling_weight",
        },
    ),
    "ope.MomentStats.from_columns": lambda tmp: Call(
        resolve("ope.MomentStats").from_columns,
        {
            "columns": _moment_stats(max_weight=10.0).to_columns(),
            "names": ["greedy"],
            "weight_name": "sampling_weight",
        },
    ),
    "ope.MomentStats.estimates": _moment_method(
        "estimates", estimator="ips", reward_range=(0.0, 1.0), confidence_level=0.95
    ),
    "ope.MomentStats.to_estimates": _moment_method(
        "to_estimates", estimator="snips", reward_range=(0.0, 1.0), confidence_level=0.95
    ),
    "ope.MomentStats.logging_estimate": _moment_method(
        "logging_estimate", reward_range=(0.0, 1.0), confidence_level=0.95
    ),
    "ope.MomentStats.paired_with_logging": _moment_method(
        "paired_with_logging", estimator="ips", reward_range=(0.0, 1.0)
    ),
    "ope.MomentStats.with_rows": _with_rows,
    # the intervals namespace
    "ope.intervals.betting_confidence_sequence": lambda tmp: _weighted_rows_call(
        "ope.intervals.betting_confidence_sequence", confidence_level=0.95
    ),
    "ope.intervals.empirical_likelihood_estimate": lambda tmp: _weighted_rows_call(
        "ope.intervals.empirical_likelihood_estimate",
        weight_bound=10.0,
        min_weight=0.0,
        max_weight=None,
    ),
    "ope.intervals.bottou_interval": lambda tmp: call(
        "ope.intervals.bottou_interval",
        weight_mean=1.0,
        weight_variance=0.5,
        product_mean=0.4,
        product_variance=0.3,
        n=60,
        max_weight=10.0,
        reward_range=(0.0, 1.0),
        confidence_level=0.95,
        outer="bernstein",
    ),
    "ope.intervals.bootstrap_replicates": lambda tmp: call(
        "ope.intervals.bootstrap_replicates",
        components=_components(),
        statistic=_ratio,
        n_resamples=50,
        rng=0,
    ),
    "ope.intervals.bootstrap_interval": lambda tmp: call(
        "ope.intervals.bootstrap_interval",
        components=_components(),
        statistic=_ratio,
        confidence_level=0.9,
        n_resamples=50,
        bootstrap_method="percentile",
        rng=0,
    ),
    "ope.intervals.shared_bootstrap": lambda tmp: call(
        "ope.intervals.shared_bootstrap",
        reward=arrays()["reward"],
        logging_propensity=arrays()["logging_propensity"],
        target_propensity=arrays()["target_propensity"],
        names=["greedy"],
        estimators=(resolve("ope.IPS")(), resolve("ope.SNIPS")()),
        sources=None,
        logging=True,
        reward_range=(0.0, 1.0),
        confidence_level=0.9,
        n_resamples=50,
        bootstrap_method="percentile",
        rng=0,
    ),
}

#: ``"<entry>::<argument>"`` -> how the contract breaks today.
KNOWN_BROKEN: Final[dict[str, str]] = {}
