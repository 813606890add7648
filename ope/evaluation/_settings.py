"""The settings of an evaluation, checked once: the estimators resolved with their settings
inside them (:func:`resolve_estimators`), the interval settings (:class:`EvaluationSettings`)
and the a priori bounds an interval method needs (:func:`check_bounds`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final


from ope._validation import (
    check_choice,
    check_confidence_level,
    check_positive_int,
    check_reward_range,
    check_rng,
    check_weight_bound,
)
from ope.estimators import (
    ESTIMATORS,
    Estimator,
    estimator_settings,
    get_estimator,
)
from ope.exceptions import (
    ParameterError,
)
from ope.results import (
    CI_METHODS,
)

__all__ = [
    "MODEL_ESTIMATORS",
    "MARGINAL_ESTIMATORS",
    "LOGGING_CI_FALLBACK",
    "logging_bound_message",
    "WEIGHT_BOUND_ESTIMATORS",
    "WEIGHT_BOUND_METHODS",
    "CI_FALLBACKS",
    "STREAMING_ESTIMATORS",
    "MARGINAL_STREAMING_ESTIMATORS",
    "SETTING_EXAMPLES",
    "UNBOUNDED_CI_METHODS",
    "resolve_estimators",
    "EvaluationSettings",
    "check_bounds",
    "check_embedding",
]


#: Estimators that need a reward model q̂ (DM and the doubly robust family).
MODEL_ESTIMATORS: Final = frozenset({"dm", "dr", "sndr", "switch_dr", "dros", "mdr", "offcem"})

#: Estimators whose weights are marginal over an ``ope.ActionEmbedding`` (the registry's
#: ``marginal`` estimators: MIPS, SNMIPS, marginalized DR, OffCEM).
MARGINAL_ESTIMATORS: Final = frozenset(k for k, cls in ESTIMATORS.items() if cls.marginal)


#: Interval method for the logging policy's value (a plain mean) when the evaluation's method
#: is specific to importance weights: Bottou's clipped-mass interval becomes its finite-sample
#: counterpart for a mean, empirical likelihood (of weighted data) the normal interval.
LOGGING_CI_FALLBACK: Final = {"bottou": "bernstein", "empirical_likelihood": "normal"}


#: Unclipped weighting estimators whose bounded intervals need an a priori weight bound, and
#: those interval methods (clipped IPS is bounded by its own max_weight).
WEIGHT_BOUND_ESTIMATORS: Final = frozenset({"ips", "snips", "mips", "snmips"})


WEIGHT_BOUND_METHODS: Final = frozenset({"hoeffding", "bernstein", "empirical_likelihood"})


#: Interval methods ``ci_fallback`` may name: those that apply to every estimate with a
#: standard error.
CI_FALLBACKS: Final = ("normal", "t")


#: Estimators computable from mergeable sums over batches (the moment kernel).
STREAMING_ESTIMATORS: Final = frozenset({"ips", "clipped_ips", "snips"})
#: The marginalized estimators merged statistics also give, with an embedding: IPS and SNIPS on
#: each batch's embedding propensities (:func:`ope.marginal.marginal_propensities` is row-local).
MARGINAL_STREAMING_ESTIMATORS: Final = frozenset({"mips", "snmips"})


#: An example value of each estimator setting, for messages.
SETTING_EXAMPLES: Final = {"max_weight": "10.0", "tau": "20.0", "shrinkage": "10.0"}


#: Interval methods that need no a priori bound; every other method needs ``reward_range``.
UNBOUNDED_CI_METHODS: Final = ("normal", "t", "bootstrap")


def resolve_estimators(
    estimators: Sequence[Any] | str,
    *,
    max_weight: float | None = None,
    tau: float | None = None,
    shrinkage: float | None = None,
) -> list[tuple[str, Any]]:
    """The (registry name, estimator object) pairs of ``evaluate``'s ``estimators`` argument.

    A name gets its settings (``max_weight`` for ``clipped_ips``, ``tau`` for ``switch_dr``,
    ``shrinkage`` for ``dros``: the fields of the estimator class) from the keyword arguments;
    an estimator object is used as it is.

    Raises
    ------
    ope.ParameterError
        No estimator, an unknown name or object, a setting missing or given but unused, or an
        estimator listed twice.

    Examples
    --------
    >>> from ope.evaluation import resolve_estimators
    >>> resolve_estimators(("ips", "clipped_ips"), max_weight=10.0)
    [('ips', IPS()), ('clipped_ips', ClippedIPS(max_weight=10.0))]
    """
    if isinstance(estimators, str) or callable(getattr(estimators, "estimate", None)):
        estimators = (estimators,)  # one name, or one estimator object
    if not isinstance(estimators, Iterable):
        raise ParameterError(
            f"`estimators` must be a list of estimator names or objects, e.g. ('ips', 'snips'); "
            f"got {estimators!r} ({type(estimators).__name__})."
        )
    estimators = list(estimators)
    if not estimators:
        raise ParameterError(
            f"`estimators` is empty; pass e.g. ('ips', 'snips'). Known: {', '.join(ESTIMATORS)}."
        )
    settings = {"max_weight": max_weight, "tau": tau, "shrinkage": shrinkage}
    used: set[str] = set()
    resolved: list[tuple[str, Any]] = []
    for item in estimators:  # loop over estimators
        if isinstance(item, str):
            key = item.lower()
            if key not in ESTIMATORS:
                raise ParameterError(
                    f"unknown estimator {item!r} in `estimators`; choose from "
                    f"{', '.join(ESTIMATORS)}, or estimators='auto' alone (one chosen per "
                    "candidate by cross-validation)."
                )
            takes = estimator_settings(key)
            for name in takes:
                if settings.get(name) is None:
                    raise ParameterError(
                        f"estimator {key!r} needs its setting `{name}`: pass {name}=... (e.g. "
                        f"{name}={SETTING_EXAMPLES.get(name, '10.0')}), or an estimator object "
                        "that holds it instead of the name."
                    )
            used.update(takes)
            obj = get_estimator(key, **{name: settings[name] for name in takes})
        else:
            # an ope estimator object (a subclass too) is used as it is, under its registry name
            key = item.name if isinstance(item, Estimator) and item.name in ESTIMATORS else ""
            if not key:
                raise ParameterError(
                    f"estimators must be names ({', '.join(ESTIMATORS)}) or ope estimator "
                    f"objects; got {item!r}."
                )
            obj = item
        resolved.append((key, obj))
    unused = [k for k, v in settings.items() if v is not None and k not in used]
    if unused:
        name = unused[0]
        owner = next(k for k in ESTIMATORS if name in estimator_settings(k))
        listed = ", ".join(k for k, _ in resolved)
        raise ParameterError(
            f"`{name}` is a setting of {owner}, which `estimators` ({listed}) does not "
            f"include; add {owner} to `estimators` or drop `{name}`."
        )
    names = [k for k, _ in resolved]
    dup = sorted({k for k in names if names.count(k) > 1})
    if dup:
        raise ParameterError(f"estimator {', '.join(dup)} is listed twice in `estimators`.")
    return resolved


@dataclass(frozen=True)
class EvaluationSettings:
    """The validated interval settings of one evaluation (see :meth:`checked`)."""

    ci: str
    confidence_level: float
    reward_range: tuple[float, float] | None
    weight_bound: float | None
    ci_options: dict[str, Any]
    ci_fallback: str | None = None
    #: the column of the rows' sampling (Horvitz-Thompson) weights, None without one
    weight_column: str | None = None

    @classmethod
    def checked(
        cls,
        *,
        ci: Any,
        confidence_level: Any,
        reward_range: Any,
        weight_bound: Any = None,
        n_resamples: Any = None,
        rng: Any = None,
        ci_fallback: Any = None,
    ) -> EvaluationSettings:
        """Validate the arguments of ``evaluate`` that every entry point shares, once.

        Raises
        ------
        ope.ParameterError
            An unknown ``ci``, a ``confidence_level`` outside (0, 1), a malformed
            ``reward_range``, ``weight_bound``, ``n_resamples`` or ``rng``, ``n_resamples``
            without ``ci="bootstrap"``, or a ``ci_fallback`` other than normal or t.

        Examples
        --------
        >>> from ope.evaluation import EvaluationSettings
        >>> EvaluationSettings.checked(ci="t", confidence_level=0.9, reward_range=(0, 1)).reward_range
        (0.0, 1.0)
        """
        method = check_choice(ci, "ci", CI_METHODS)
        check_rng(rng)  # validates; the seed itself is passed on (and recorded)
        options: dict[str, Any] = {}
        if method == "bootstrap":
            if n_resamples is not None:
                check_positive_int(n_resamples, "n_resamples")
            options = {"n_resamples": n_resamples, "rng": rng}
        elif n_resamples is not None:
            raise ParameterError("`n_resamples` applies only to ci='bootstrap'.")
        return cls(
            ci=method,
            confidence_level=check_confidence_level(confidence_level),
            reward_range=check_reward_range(reward_range),
            weight_bound=check_weight_bound(weight_bound),
            ci_options=options,
            ci_fallback=None
            if ci_fallback is None
            else check_choice(ci_fallback, "ci_fallback", CI_FALLBACKS),
        )


def logging_bound_message(ci: str) -> str:
    """What a missing reward range means for the logging policy's value (a plain mean), whose
    interval is ``ci``'s counterpart for a mean (:data:`LOGGING_CI_FALLBACK`)."""
    logged = LOGGING_CI_FALLBACK.get(ci, ci)
    which = (
        f"gets {ci!r}"
        if logged == ci
        else f"gets {logged!r}, the counterpart of {ci!r} for a mean,"
    )
    return (
        f"ci={ci!r} needs the a priori range of the rewards: the logging policy's value (a "
        f"plain mean) {which} which needs it. Pass reward_range=(low, high) (e.g. (0, 1) for "
        "clicks). The observed minimum and maximum reward are not bounds."
    )


def check_bounds(resolved: Sequence[tuple[str, Any]], settings: EvaluationSettings) -> None:
    """The a priori bounds ``settings.ci`` needs for the estimators it applies to, before any
    row is read: ``reward_range`` for every bounded method, ``weight_bound`` for the methods of
    IPS and SNIPS that use one (an estimator the method does not apply to falls back, or is
    refused when the evaluation is built, and needs neither)."""
    from ope.exceptions import MissingBoundsError

    ci = settings.ci
    takes = [k for k, est in resolved if ci in type(est).interval_methods]
    if settings.reward_range is None:
        if ci not in UNBOUNDED_CI_METHODS and takes:
            raise MissingBoundsError(
                f"ci={ci!r} needs the a priori range of the rewards (of {', '.join(takes)}): "
                "pass reward_range=(low, high) (e.g. (0, 1) for clicks). The observed minimum "
                "and maximum reward are not bounds."
            )
        if LOGGING_CI_FALLBACK.get(ci, ci) not in UNBOUNDED_CI_METHODS:
            raise MissingBoundsError(logging_bound_message(ci))
    if ci in UNBOUNDED_CI_METHODS or not takes:
        return
    bounded = [k for k in takes if k in WEIGHT_BOUND_ESTIMATORS]
    if ci in WEIGHT_BOUND_METHODS and bounded and settings.weight_bound is None:
        raise MissingBoundsError(
            f"ci={ci!r} of {', '.join(bounded)} needs an a priori bound on the "
            "importance weights: pass weight_bound=M with M >= pi(a|x)/pi_0(a|x) for every "
            "context and action (e.g. 1 / the smallest logging probability), or use "
            "ClippedIPS(max_weight=M), whose weights are bounded by construction. The largest "
            "observed weight is not a bound."
        )


def check_embedding(
    resolved: Sequence[tuple[str, Any]], embedding: Any, *, running: bool = False
) -> None:
    """The marginalized estimators (``mips``, ``snmips``, ``mdr``, ``offcem``) need an
    :class:`ope.ActionEmbedding`, and an embedding needs one of them.

    When the plan is built (``running`` False) a marginalized estimator without an embedding is
    let through: a scan or a distributed driver refuses the estimator itself (it needs the
    rows); the eager run checks again with ``running=True``.

    Raises
    ------
    ope.ParameterError
        A marginalized estimator without an embedding (``running``), an embedding none uses,
        or an ``embedding`` that is not an ``ActionEmbedding``.
    """
    from ope.marginal import ActionEmbedding

    marginal = [k for k, e in resolved if getattr(e, "marginal", False)]
    if embedding is not None and not isinstance(embedding, ActionEmbedding):
        raise ParameterError(
            "`embedding` must be an ope.ActionEmbedding, e.g. "
            f"ope.ActionEmbedding(clusters='genre'); got {type(embedding).__name__}."
        )
    if running and marginal and embedding is None:
        raise ParameterError(
            f"estimator(s) {', '.join(marginal)} need embedding=ope.ActionEmbedding(...): how "
            "the actions map to embeddings (clusters=COLUMN, columns=[...] of the item table, a "
            "known distribution=, or estimated=[...] observed columns)."
        )
    if embedding is not None and embedding.select is not None:
        raise ParameterError(
            f"an embedding with select={embedding.select!r} has its dimensions chosen per "
            "candidate on the rows in memory: call ope.evaluate (or ope.tune_embedding) on "
            "logs read with ope.read_logs, not a plan, a scan or a distributed run."
        )
    if embedding is not None and not marginal:
        raise ParameterError(
            "`embedding` is used only by the marginalized estimators mips, snmips, mdr and offcem; add "
            "one of them to `estimators` or drop `embedding`."
        )
