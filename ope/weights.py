"""Importance weights: the hot path of every weighting estimator.

The importance weight of logged row ``i`` for a candidate policy ``pi`` is

.. math:: w_i = \\pi(a_i \\mid x_i) / \\pi_0(a_i \\mid x_i),

the ratio of the candidate's probability of the logged action to the logging propensity. This
module computes weights for ``P`` candidate policies at once (target propensities of shape
``(n,)`` or ``(n, P)``), accumulates in float64 whatever the input dtype, optionally clips them at
an a priori level ``max_weight``. The per-policy raw sums of the moment kernel (named by
:data:`MOMENT_KEYS`) are :attr:`ope.streaming.MomentStats.moments`.

:func:`factor_weights` implements Bottou et al.'s *Markov factor replacement*: when a decision is
made by several randomized stages (e.g. retrieval then ranking) and a candidate changes only some
of them, the weight is the product of the probability ratios of the changed stages only.

Propensities are checked by :mod:`ope._validation`, as at every entry point: what is wrong, how
many rows, the first row, and how to fix it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from ope._centered import MOMENT_KEYS
from ope._validation import (
    MAX_FINITE_WEIGHT,
    as_float_array,
    check_finite,
    check_logging_propensity,
    check_max_weight,
    check_target_propensity,
    describe,
    validated_pair,
)
from ope.exceptions import EstimationError, ParameterError, SchemaError, ValidationError
from ope.moments import DEFAULT_CHUNK_SIZE, ratio

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "importance_weights",
    "factor_weights",
    "MOMENT_KEYS",
    "MAX_FINITE_WEIGHT",
    "MIN_SAMPLING_WEIGHT",
    "SAMPLING_WEIGHT_COLUMN",
    "check_sampling_weight",
    "varying_sampling_weight",
    "sample_weight_obstacle",
    "fit_with_sample_weight",
    "table_sampling_weights",
    "refuse_sampling_weights",
    "sampling_weight_note",
    "sampling_weight_column",
]

#: The column that carries each row's sampling (Horvitz-Thompson) weight: the DSJSON importer
#: writes ``1 / (1 - pdrop)`` there, and ``ope.evaluate`` uses it whenever it is present (another
#: column can be named with ``weight_column=``).
SAMPLING_WEIGHT_COLUMN: Final = "weight"

#: The least the largest sampling weight may be, the mirror of the largest accepted
#: (:data:`ope._validation.MAX_FINITE_WEIGHT`): when every weight is smaller, every square falls
#: below float64's normal range, and the sums behind standard errors and effective sample sizes
#: underflow (one tiny weight among others is only a row that counts for little).
MIN_SAMPLING_WEIGHT: Final = 1.0 / MAX_FINITE_WEIGHT


# --------------------------------------------------------------------------------------------
# public functions
# --------------------------------------------------------------------------------------------
def check_sampling_weight(
    weight: npt.ArrayLike, n: int, *, name: str = "sampling_weight", values: bool = True
) -> np.ndarray:
    """Sampling (survey) weights of ``n`` rows as float64: positive, at most
    :data:`ope._validation.MAX_FINITE_WEIGHT`, the largest at least :data:`MIN_SAMPLING_WEIGHT`.

    ``name`` is what the messages call them (the argument, or the log's column). A weight of 0
    would drop a row that was kept; drop such rows instead. A weight above 1e150 (a row kept with
    probability below 1e-150) has a square beyond 1e300, so the sums of squares behind the
    standard errors and effective sample sizes would overflow float64. ``values=False`` checks
    the shape only: the caller checks the values after the moment kernel's pass, which sees their
    range (:func:`ope.estimators.check_after_pass`).

    Examples
    --------
    >>> from ope.weights import check_sampling_weight
    >>> check_sampling_weight([1, 4.0], 2)
    array([1., 4.])
    """
    s = as_float_array(weight, name, ndim=(1,)).astype(np.float64, copy=False)
    if s.shape[0] != n:
        raise ValidationError(
            f"`{name}` has {s.shape[0]} rows but the logs have {n} (the rows of `reward`); give "
            "one sampling weight per logged row."
        )
    if not values:
        return s
    if (
        s.size
        and float(np.min(s)) > 0.0
        and MIN_SAMPLING_WEIGHT <= float(np.max(s)) <= MAX_FINITE_WEIGHT
    ):
        return s  # two reductions, no temporaries (NaN fails the test: the checks below)
    check_finite(s, name)
    bad = ~(s > 0)
    if bad.any():
        idx = np.flatnonzero(bad)
        raise ValidationError(
            f"`{name}` (the rows' sampling weights) must be > 0; {idx.size} rows are not (first "
            f"at row {int(idx[0])}: {float(s[idx[0]])!r}). A sampling weight is 1 / the "
            "probability that the row was kept (DSJSON: 1 / (1 - pdrop)); drop rows that carry "
            "no weight."
        )
    if s.size and float(np.max(s)) < MIN_SAMPLING_WEIGHT:
        raise ValidationError(
            f"`{name}` (the rows' sampling weights): the largest is {float(np.max(s))!r}, below "
            f"{MIN_SAMPLING_WEIGHT:.0e}: the squares of every weight fall below float64's range, "
            "and the sums behind the standard errors and effective sample sizes with them. "
            "Multiply them all by one power of ten: the weighted estimates do not depend on "
            "their scale."
        )
    big = s > MAX_FINITE_WEIGHT
    if big.any():
        idx = np.flatnonzero(big)
        raise ValidationError(
            f"`{name}` (the rows' sampling weights) must be at most {MAX_FINITE_WEIGHT:.0e}; "
            f"{idx.size} rows are not (first at row {int(idx[0])}: {float(s[idx[0]])!r}). A "
            "sampling weight is 1 / the probability that the row was kept; weights this large "
            "have squares beyond float64. Check the weights (or divide them all by one power of "
            "ten: the weighted estimates do not depend on their scale)."
        )
    return s


def varying_sampling_weight(
    weight: npt.ArrayLike | None, n: int, *, name: str = "sample_weight"
) -> np.ndarray | None:
    """:func:`check_sampling_weight` of ``weight`` (None: no weights), or None when every
    weight is equal: a fit or a ratio weighted by equal weights is the unweighted one, which
    is then computed exactly as without weights.

    Examples
    --------
    >>> from ope.weights import varying_sampling_weight
    >>> varying_sampling_weight([2.0, 2.0], 2) is None, varying_sampling_weight([1, 3], 2)
    (True, array([1., 3.]))
    """
    if weight is None:
        return None
    s = check_sampling_weight(weight, n, name=name)
    return None if s.size == 0 or float(s.min()) == float(s.max()) else s


def sample_weight_obstacle(estimator: object) -> str | None:
    """None when a scikit-learn ``estimator`` can be fitted with the rows' sampling weights
    (its ``fit`` takes ``sample_weight``, or it is a pipeline whose last step's ``fit`` does:
    :func:`fit_with_sample_weight` routes them), else why not, for an error message.

    Examples
    --------
    >>> from sklearn.linear_model import Ridge
    >>> from sklearn.neighbors import KNeighborsRegressor
    >>> sample_weight_obstacle(Ridge()), sample_weight_obstacle(KNeighborsRegressor())
    (None, 'KNeighborsRegressor.fit takes no sample_weight')
    """
    from sklearn.pipeline import Pipeline
    from sklearn.utils.validation import has_fit_parameter

    if has_fit_parameter(estimator, "sample_weight"):
        return None
    name = type(estimator).__name__
    if isinstance(estimator, Pipeline):
        last = estimator.steps[-1][1]
        if last not in (None, "passthrough") and has_fit_parameter(last, "sample_weight"):
            return None
        return f"{name}.fit takes no sample_weight (nor does its last step's)"
    return f"{name}.fit takes no sample_weight"


def fit_with_sample_weight(
    estimator: Any, x: Any, y: npt.ArrayLike, weight: np.ndarray | None
) -> None:
    """Fit ``estimator`` on ``x``, ``y``, weighted by the rows' sampling weights when given:
    as ``sample_weight`` when its ``fit`` takes it, else (a pipeline) routed by name to each
    step whose ``fit`` does (:func:`sample_weight_obstacle` says whether the last one does)."""
    from sklearn.pipeline import Pipeline
    from sklearn.utils.validation import has_fit_parameter

    if weight is None:
        estimator.fit(x, y)
    elif isinstance(estimator, Pipeline) and not has_fit_parameter(estimator, "sample_weight"):
        routed = {
            f"{name}__sample_weight": weight
            for name, step in estimator.steps
            if step not in (None, "passthrough") and has_fit_parameter(step, "sample_weight")
        }
        estimator.fit(x, y, **routed)
    else:
        estimator.fit(x, y, sample_weight=weight)


def sampling_weight_column(columns: Sequence[str], weight_column: str | None) -> str | None:
    """The column of the rows' sampling weights: ``weight_column`` when given (it must be one
    of ``columns``), else :data:`SAMPLING_WEIGHT_COLUMN` when present, else None.

    Examples
    --------
    >>> from ope.weights import sampling_weight_column
    >>> sampling_weight_column(["reward", "weight"], None), sampling_weight_column(["w"], "w")
    ('weight', 'w')
    """
    if weight_column is None:
        return SAMPLING_WEIGHT_COLUMN if SAMPLING_WEIGHT_COLUMN in columns else None
    if not isinstance(weight_column, str) or not weight_column:
        raise ParameterError(f"`weight_column` must be a column name (str); got {weight_column!r}.")
    if weight_column not in columns:
        raise SchemaError(
            f"weight_column={weight_column!r} is not a column of the logs; they have: "
            f"{', '.join(columns)}. Name the column that holds each row's sampling weight "
            "(1 / the probability that the row was kept); when the logs were read with "
            "columns=[...], add it there."
        )
    return weight_column


def table_sampling_weights(
    table: pa.Table, weight_column: str | None = None
) -> tuple[str | None, np.ndarray | None]:
    """The column of a table's sampling weights (:func:`sampling_weight_column`: default
    ``weight`` when present) and its values as float64, checked as every sampling weight is
    (:func:`check_sampling_weight`); ``(None, None)`` without one.

    Examples
    --------
    >>> import pyarrow as pa
    >>> table_sampling_weights(pa.table({"reward": [1.0], "weight": [2]}))
    ('weight', array([2.]))
    """
    name = sampling_weight_column(table.column_names, weight_column)
    if name is None:
        return None, None
    kind = table.schema.field(name).type
    if not (pa.types.is_floating(kind) or pa.types.is_integer(kind)):
        raise SchemaError(
            f"`{name}` (the rows' sampling weights) must be numeric; it holds {kind}. A "
            "sampling weight is 1 / the probability that the row was kept; rename the column if "
            "it is something else."
        )
    values = np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype=np.float64)
    return name, check_sampling_weight(values, table.num_rows, name=name)


def refuse_sampling_weights(
    weight: object, *, what: str, estimators: str, units: str, advice: str | None = None
) -> None:
    """Refuse the ``weight`` column ``weight`` (its values; None: there is none) of logs of
    ``what`` (e.g. "trajectories") when it is not all 1: in bandit logs ope reads that column
    as each row's sampling weight and weights every estimate by it, while ``estimators`` take
    none, and ignoring them would estimate the value of the kept ``units``, not of the traffic.
    All-1 weights (the unweighted numbers) pass; values that are not numbers are refused too
    (they are no weight, and a rename says so)."""
    if weight is None:
        return
    raw = np.asarray(
        weight.to_numpy(zero_copy_only=False) if hasattr(weight, "to_numpy") else weight
    )
    # numbers only: text such as "1" (or booleans) is no weight, even where it reads as 1
    if raw.dtype.kind in "iuf" and bool(np.all(raw == 1.0)):
        return
    raise EstimationError(
        f"the {what} carry sampling weights (column `{SAMPLING_WEIGHT_COLUMN}`, not all 1: "
        "1 / the probability that a row was kept, e.g. from pdrop), and "
        f"{estimators} take no sampling weights: ignoring them would estimate the value of "
        f"the kept {units}, not of the traffic they were kept from. "
        + (
            advice
            or (
                "If the column is not a sampling weight, drop or rename it; if it is, dropping "
                f"it estimates the value of the kept {units}, which differs when they were kept "
                "with unequal probabilities."
            )
        )
    )


def sampling_weight_note(name: str, total: float, n: int) -> str:
    """The note of every estimate computed from rows with sampling weights.

    Examples
    --------
    >>> from ope.weights import sampling_weight_note
    >>> sampling_weight_note("weight", 8.0, 2)[:44]
    'rows carry sampling weights (column `weight`'
    """
    origin = ", from pdrop" if name == SAMPLING_WEIGHT_COLUMN else ""
    return (
        f"rows carry sampling weights (column `{name}`{origin}): estimates are "
        "Horvitz-Thompson weighted; the population size is estimated as the sum of weights = "
        f"{total:,.6g} (from {n:,} logged rows)."
    )


def importance_weights(
    logging_propensity: npt.ArrayLike,
    target_propensity: npt.ArrayLike,
    *,
    max_weight: float | None = None,
) -> np.ndarray:
    """Importance weights ``target_propensity / logging_propensity`` in float64.

    Parameters
    ----------
    logging_propensity : array_like, shape (n,)
        The logging policy's probability of each logged action, in (0, 1].
    target_propensity : array_like, shape (n,) or (n, P)
        Each candidate's probability of the logged action, in [0, 1]; one column per policy.
    max_weight : float, optional
        A priori clipping level ``M``: weights above it are replaced by ``M``.

    Returns
    -------
    numpy.ndarray
        float64 array with the shape of ``target_propensity``.

    Raises
    ------
    ope.ValidationError
        Shapes differ, or a propensity is missing or out of range (the message gives the count
        and the first row).

    Notes
    -----
    :math:`w_i = \\pi(a_i\\mid x_i)/\\pi_0(a_i\\mid x_i)`, clipped as :math:`\\min(w_i, M)`
    when ``max_weight`` is given. The division is done in float64 even for float32 inputs.

    References
    ----------
    .. [1] D. G. Horvitz and D. J. Thompson, "A generalization of sampling without replacement
       from a finite universe", JASA 47(260), 1952.

    Examples
    --------
    >>> from ope.weights import importance_weights
    >>> importance_weights([0.5, 0.25], [[1.0, 0.5], [0.0, 0.25]])
    array([[2., 1.],
           [0., 1.]])
    >>> importance_weights([0.5, 0.25], [1.0, 1.0], max_weight=3.0)
    array([2., 3.])
    """
    p, t = validated_pair(logging_propensity, target_propensity)
    mw = check_max_weight(max_weight)
    w = ratio(p, t)
    if mw is not None:
        np.minimum(w, mw, out=w)
    return w


def factor_weights(
    logging_factors: Mapping[str, npt.ArrayLike],
    target_factors: Mapping[str, npt.ArrayLike],
    *,
    max_weight: float | None = None,
) -> np.ndarray:
    """Importance weights by Markov factor replacement over the changed factors only.

    A decision made by several randomized stages (factors) has logging probability
    ``prod_k q_k``. A candidate that replaces some factors ``k in C`` by ``q*_k`` and keeps the
    others has the weight ``prod_{k in C} q*_k / q_k``: the unchanged factors cancel.

    Parameters
    ----------
    logging_factors : mapping of str to array_like, shape (n,)
        Logged probability of each factor's realized choice, e.g. the columns
        ``propensity__retrieval`` and ``propensity__ranking`` as
        ``{"retrieval": ..., "ranking": ...}``; each in (0, 1].
    target_factors : mapping of str to array_like, shape (n,) or (n, P)
        The candidate's probability of the same realized choices for the factors it changes
        (columns ``target__<policy>__<factor>``); every key must be a key of
        ``logging_factors``. Factors absent here are unchanged and cancel.
    max_weight : float, optional
        A priori clipping level applied to the product.

    Returns
    -------
    numpy.ndarray
        float64 weights, shape ``(n,)`` or ``(n, P)``.

    Raises
    ------
    ope.ValidationError
        No factor is changed, a changed factor was not logged, lengths differ, or a probability
        is out of range.

    Notes
    -----
    Write the joint distribution of a logged record :math:`\\omega` as a product of Markov
    factors, :math:`P(\\omega)=\\prod_k q_k(\\omega_k\\mid\\mathrm{pa}_k)`. An intervention that
    replaces the factors :math:`k\\in C` gives :math:`P^*(\\omega)=P(\\omega)\\prod_{k\\in C}
    q^*_k/q_k`, so

    .. math:: w(\\omega) = \\frac{P^*(\\omega)}{P(\\omega)}
              = \\prod_{k\\in C}\\frac{q^*_k(\\omega_k\\mid\\mathrm{pa}_k)}
                                       {q_k(\\omega_k\\mid\\mathrm{pa}_k)},

    and :math:`\\mathbb E_P[\\ell\\,w]=\\mathbb E_{P^*}[\\ell]` for any outcome :math:`\\ell`.
    Only the changed factors need to have been randomized and logged; unchanged factors may be
    deterministic or unknown.

    References
    ----------
    .. [1] L. Bottou, J. Peters, J. Quinonero-Candela, D. X. Charles, D. M. Chickering,
       E. Portugaly, D. Ray, P. Simard and E. Snelson, "Counterfactual reasoning and learning
       systems: the example of computational advertising", JMLR 14:3207-3260, 2013
       (Section 4, counterfactual analysis by replacing Markov factors; importance sampling).

    Examples
    --------
    >>> from ope.weights import factor_weights
    >>> logged = {"retrieval": [0.5, 0.2], "ranking": [0.25, 1.0]}
    >>> factor_weights(logged, {"ranking": [0.5, 0.5]})          # only ranking changes
    array([2. , 0.5])
    >>> factor_weights(logged, {"retrieval": [1.0, 0.4], "ranking": [0.5, 0.5]})
    array([4., 1.])
    """
    for arg, given in (("logging_factors", logging_factors), ("target_factors", target_factors)):
        if not isinstance(given, Mapping):
            raise ParameterError(
                f"`{arg}` must be a mapping of factor name -> probabilities (one array per "
                f"factor); got {describe(given)}. Pass e.g. {arg}={{'ranking': [0.5, 0.25]}}."
            )
    if not target_factors:
        raise ValidationError(
            "`target_factors` is empty: give the candidate's probabilities for at least one "
            "changed factor (columns target__<policy>__<factor>)."
        )
    unknown = sorted(map(str, set(target_factors) - set(logging_factors)))
    if unknown:
        raise ValidationError(
            f"changed factors {unknown} have no logged propensity (they are keys of "
            f"`target_factors`, not of `logging_factors`); logged factors are "
            f"{sorted(map(str, logging_factors))}. Log the column propensity__<factor> for "
            "every factor a candidate changes."
        )
    weight: np.ndarray | None = None
    for factor in target_factors:  # loop over a handful of factors, not rows
        p = as_float_array(logging_factors[factor], f"propensity__{factor}", ndim=(1,))
        t = as_float_array(target_factors[factor], f"target__{factor}", ndim=(1, 2))
        if t.shape[0] != p.shape[0] or (weight is not None and weight.shape[0] != p.shape[0]):
            raise ValidationError(
                f"factor {factor!r}: all factor arrays must have the same number of rows; "
                f"got {p.shape[0]} logged and {t.shape[0]} target rows"
                + (f" (earlier factors have {weight.shape[0]})." if weight is not None else ".")
            )
        check_logging_propensity(p, f"propensity__{factor}")
        check_target_propensity(t, f"target__{factor}")
        factor_ratio = ratio(p, t)
        if weight is None:
            weight = factor_ratio
        elif weight.ndim == factor_ratio.ndim:
            weight = weight * factor_ratio
        else:  # one (n,) and one (n, P) factor: broadcast over policies
            a = weight if weight.ndim == 2 else weight[:, None]
            b = factor_ratio if factor_ratio.ndim == 2 else factor_ratio[:, None]
            weight = a * b
    assert weight is not None
    mw = check_max_weight(max_weight)
    if mw is not None:
        np.minimum(weight, mw, out=weight)
    return weight
