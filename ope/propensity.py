"""Estimated logging propensities, their provenance, and the logging-bug detector.

Logs often arrive without the probability the logger gave to the logged action. When the
logger's choice depended only on logged context, that probability can be estimated by a
classifier of the logged action given the context. :func:`estimate_propensities` fits one with
cross-fitting (each row is predicted by a model that never saw it), floors the predictions and
returns validated logs whose ``propensity`` column holds the estimates.

The default is a multinomial logistic regression on standardized context columns, fitted on
every row (a given classifier is cross-fitted instead), **without** post-hoc calibration,
floored at ``1e-3``. When the logger is a softmax of those columns (the model family contains
it), IPS and SNIPS on the estimated propensities are unbiased within Monte Carlo error, and
their normal and bootstrap intervals cover at or above the nominal rate: treating fitted
maximum-likelihood propensities as known is conservative for a correctly specified parametric
model. Isotonic and sigmoid calibration are options whose measured effects are listed in
:func:`estimate_propensities` (``benchmarks/propensity_coverage.md`` has the table).

What the estimate assumes: the logger used only ``context_columns`` (no unlogged confounder),
through a function the model family can represent. When either fails, every weight is biased
and no interval shows it; the result's note says so.

Provenance: the table's schema metadata records ``ope.propensity_source = "estimated"``, the
model, the context columns, the floor and how many rows it raised. The readers
(:func:`ope.read_logs`, :func:`ope.scan_logs`, hence ``ope.distributed`` and the CLI) carry
these entries through a parquet round trip, and every evaluation, diagnostic, report and JSON
document then says its weights are estimated (:func:`propensity_source`,
:func:`propensity_info`, :func:`estimated_propensity_note`).

The same model checks logged propensities: :func:`check_propensities` compares each logged
propensity with its cross-fitted estimate and reports the rows, actions and segments where they
disagree (a logging-bug detector), as a :class:`PropensityCheck`.

Examples
--------
>>> import ope
>>> from ope.simulate import ContextualBandit
>>> env = ContextualBandit(n_actions=3, n_features=2, n_contexts=20, seed=0)
>>> raw = env.sample(3000, rng=1).drop_columns(["propensity"])
>>> logs = estimate_propensities(raw, context_columns=["x0", "x1"], rng=0)
>>> propensity_source(logs)
'estimated'
>>> sorted(propensity_info(logs))  # doctest: +NORMALIZE_WHITESPACE
['propensity_context_columns', 'propensity_floor', 'propensity_floored_rows',
 'propensity_model', 'propensity_source']
>>> bool((logs.column("propensity") >= 1e-3).all())
True
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa

from ope._provenance import (
    PROPENSITY_SOURCE_KEY,
    estimated_propensity_note,
    propensity_info,
    propensity_metadata,
    propensity_source,
)
from ope._thresholds import DISAGREEMENT_RATIO, DISAGREEMENT_Z, ESTIMATED_PROPENSITY_FLOOR
from ope._validation import (
    MIN_PROPENSITY,
    check_choice,
    check_positive_int,
    check_real,
    check_rng,
    describe,
    power_of_two_scale,
)
from ope.context import context_matrix
from ope.exceptions import EstimationError, ParameterError, SchemaError
from ope.logs import BanditLogs, as_log_table
from ope.results import Result, ResultParts
from ope.weights import (
    fit_with_sample_weight,
    sample_weight_obstacle,
    table_sampling_weights,
    varying_sampling_weight,
)

__all__ = [
    "PROPENSITY_SOURCE_KEY",
    "propensity_metadata",
    "estimate_propensities",
    "estimated_action_probabilities",
    "propensity_source",
    "propensity_info",
    "estimated_propensity_note",
    "check_propensities",
    "PropensityCheck",
]

# --- settings (the thresholds live in ope._thresholds) --------------------------------------

#: Rows listed in :attr:`PropensityCheck.worst_rows` by default.
WORST_ROWS: Final = 10

#: Post-hoc calibrations offered; ``"none"`` (the default) keeps the classifier's own
#: probabilities. A well-specified multinomial logit needs none, and each costs accuracy there
#: (benchmarks/propensity_coverage.md, n = 2,000): isotonic leaves IPS unbiased but noisier
#: (RMSE 0.033 against 0.025, weights up to 278 against a true maximum of 69) and biases SNIPS
#: by -0.005; sigmoid's one-vs-rest rescaling biases IPS by -0.023 (coverage 0.84).
CALIBRATIONS: Final = ("none", "isotonic", "sigmoid")
DEFAULT_CALIBRATION: Final = "none"
#: Folds of a given ``classifier`` when ``n_folds`` is None. A flexible classifier predicting
#: its own training rows overfits toward the logged actions (propensities near 1, weights
#: shrunk); cross-fitting avoids that. The default multinomial logit is fitted on all rows
#: instead: for a correctly specified parametric model the in-sample maximum-likelihood fit
#: leaves IPS unbiased and more precise than the true propensities do, while cross-fitting it
#: adds noise independent of each row, whose convexity (E[1/p_hat] > 1/p) biases IPS upward
#: (+0.0071 +- 0.0015 at n = 2,000 in benchmarks/propensity_coverage.md, against -0.0015 +-
#: 0.0014 in-sample).
CROSS_FIT_FOLDS: Final = 5
_VERDICTS: Final = ("consistent", "disagree")


# --------------------------------------------------------------------------- inputs
def _actions(table: pa.Table) -> np.ndarray:
    if "action" not in table.column_names:
        raise SchemaError(
            f"the logs have no `action` column; they have: {', '.join(table.column_names)}. "
            "Rename the column holding the logged action to `action`."
        )
    col = table.column("action").combine_chunks()
    if col.null_count:
        raise SchemaError(f"`action` has {col.null_count} missing values; drop those rows first.")
    return np.asarray(col.to_numpy(zero_copy_only=False))


def _in_power_of_two_units(x: np.ndarray) -> np.ndarray:
    """``x`` with each column divided by a power of two near its largest magnitude (as the
    learners' standardization does, :func:`ope._validation.power_of_two_scale`): exact, so the
    default classifier (``StandardScaler`` then ``LogisticRegression``) gets the same standardized
    features bit for bit, while its scaler squares numbers below 4 instead of columns near
    1e300 (whose squares overflow to inf and left NaN features)."""
    if x.size == 0:
        return x
    top = np.abs(x).max(axis=0)
    units = np.array([power_of_two_scale(float(t)) for t in top])  # a loop over columns
    return x / units


def _default_classifier() -> Any:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))


#: Inner folds of ``CalibratedClassifierCV``: each action needs this many rows in a training set.
_CALIBRATION_FOLDS: Final = 3


def _check_calibration_counts(
    codes: np.ndarray, classes: np.ndarray, train: np.ndarray, calibration: str, fold: str
) -> None:
    """Every action of a training set logged at least ``_CALIBRATION_FOLDS`` times there (the
    inner folds of the calibration split each action), else an error naming the action."""
    if calibration == "none":
        return
    counts = np.bincount(codes[train], minlength=classes.size)
    rare = np.flatnonzero((counts > 0) & (counts < _CALIBRATION_FOLDS))
    if rare.size:
        labels = classes[rare[:5]].tolist()
        shown = ", ".join(f"{v!r} ({int(counts[j])}x)" for v, j in zip(labels, rare[:5]))
        raise EstimationError(
            f"calibration={calibration!r} splits each training set into {_CALIBRATION_FOLDS} "
            f"inner folds, so every action needs at least {_CALIBRATION_FOLDS} rows in it; "
            f"{fold} logs action(s) {shown}{', ...' if rare.size > 5 else ''} fewer times. Use "
            "calibration='none', fewer n_folds, or drop the rarely logged actions."
        )


def _weights_reach(classifier: Any, calibration: str) -> str | None:
    """None when a given classifier (with this calibration) can be fitted with the rows'
    sampling weights, else why not (:func:`ope.weights.sample_weight_obstacle`; a pipeline
    under calibration too: the calibration passes them only to a ``fit`` that takes them
    itself)."""
    from sklearn.pipeline import Pipeline

    why = sample_weight_obstacle(classifier)
    if why is None and calibration != "none" and isinstance(classifier, Pipeline):
        from sklearn.utils.validation import has_fit_parameter

        if not has_fit_parameter(classifier, "sample_weight"):
            return (
                f"calibration={calibration!r} passes them only to a classifier whose own fit "
                f"takes sample_weight, and {type(classifier).__name__}.fit routes them to its "
                "steps by name"
            )
    return why


def _calibrated(classifier: Any, calibration: str) -> Any:
    from sklearn.base import clone
    from sklearn.calibration import CalibratedClassifierCV

    base = clone(classifier)
    if calibration == "none":
        return base
    return CalibratedClassifierCV(base, method=calibration, cv=_CALIBRATION_FOLDS)


def _weighted_default_classifier(calibration: str) -> Any:
    """The default classifier for weighted rows: the calibration (if any) wraps the logistic
    regression inside the pipeline, after the scaler, so that every step's ``fit`` takes the
    rows' sampling weights, routed to it by name."""
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.pipeline import Pipeline

    model = _default_classifier()
    if calibration == "none":
        return model
    (scaler_name, scaler), (name, regression) = model.steps
    calibrated = CalibratedClassifierCV(regression, method=calibration, cv=_CALIBRATION_FOLDS)
    return Pipeline([(scaler_name, scaler), (name, calibrated)])


def _check_settings(
    classifier: Any, n_folds: Any, calibration: Any, min_propensity: Any
) -> tuple[int, str, float]:
    if n_folds is None:  # in-sample for the parametric default, cross-fitted for the others
        folds = 1 if classifier is None else CROSS_FIT_FOLDS
    else:
        folds = check_positive_int(n_folds, "n_folds", minimum=1)
    cal = check_choice(calibration, "calibration", CALIBRATIONS)
    floor = check_real(min_propensity, "min_propensity")
    if not MIN_PROPENSITY <= floor < 1.0:
        raise ParameterError(
            f"`min_propensity` must be in [{MIN_PROPENSITY:g}, 1) (logs are read with no "
            f"propensity below {MIN_PROPENSITY:g}); got {min_propensity!r}. It floors the "
            f"estimated propensities (default {ESTIMATED_PROPENSITY_FLOOR})."
        )
    if classifier is not None and not (
        hasattr(classifier, "fit") and hasattr(classifier, "predict_proba")
    ):
        raise ParameterError(
            f"`classifier` must be a scikit-learn classifier with fit and predict_proba; got "
            f"{type(classifier).__name__}. Pass e.g. sklearn.linear_model.LogisticRegression()."
        )
    return folds, cal, floor


def estimated_action_probabilities(
    x: npt.ArrayLike,
    action: npt.ArrayLike,
    *,
    classifier: Any = None,
    n_folds: int | None = None,
    rng: int | np.random.Generator | None = None,
    calibration: str = DEFAULT_CALIBRATION,
    sample_weight: npt.ArrayLike | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Estimated probabilities of every action given the context (in-sample or cross-fitted).

    Parameters
    ----------
    x : array of shape (n, d)
        Context features of the logged rows.
    action : array of shape (n,)
        Logged actions (any labels).
    classifier : scikit-learn classifier, optional
        Default: multinomial logistic regression on standardized features.
    n_folds : int, optional
        ``1`` fits once on every row and predicts the same rows; ``k >= 2`` cross-fits: each
        row is predicted by the model fitted on the other ``k - 1`` folds. Default: 1 for the
        default classifier, :data:`CROSS_FIT_FOLDS` (5) for a given one.
    rng : int, numpy.random.Generator or None
        Randomness of the fold split (unused with one fold).
    calibration : {"none", "isotonic", "sigmoid"}, default "none"
        ``"none"`` uses the classifier's own probabilities; the others wrap it in
        ``CalibratedClassifierCV`` (3 inner folds) inside each training set.
    sample_weight : array of shape (n,), optional
        The rows' sampling weights (1 / the probability that the row was kept, e.g.
        ``1 / (1 - pdrop)``): the fit is weighted by them, so that it estimates the logger's
        probabilities on the whole traffic, not on the kept rows (they differ when the keeping
        depended on the action or the outcome). The default classifier takes them in every
        step (its calibration, if any, then wraps the regression after the scaler); a given
        classifier takes them when its ``fit`` (or its last step's, in a pipeline) has
        ``sample_weight``, and raises ``ParameterError`` otherwise.

    Returns
    -------
    probabilities : ndarray of shape (n, K)
        Columns follow ``classes``. With cross-fitting, an action absent from a training set
        gets probability 0 for that fold's rows.
    classes : ndarray of shape (K,)
        The sorted distinct actions.

    Notes
    -----
    With :math:`k(i)` the fold of row :math:`i`,
    :math:`\hat\pi_b(a \mid x_i) = \hat f^{(-k(i))}(x_i)_a`, the model fitted on the rows
    outside fold :math:`k(i)` (cross-fitting, Chernozhukov et al. 2018); with one fold,
    :math:`\hat f` is fitted on every row, :math:`i` included.

    Examples
    --------
    >>> import numpy as np
    >>> g = np.random.default_rng(0)
    >>> x = g.standard_normal((600, 1))
    >>> a = (g.random(600) < 1 / (1 + np.exp(-2 * x[:, 0]))).astype(int)
    >>> p, classes = estimated_action_probabilities(x, a, rng=0)
    >>> p.shape, classes.tolist(), bool(np.allclose(p.sum(axis=1), 1))
    ((600, 2), [0, 1], True)
    """
    x = np.asarray(x, dtype=np.float64)
    a = np.asarray(action)
    folds, cal, _ = _check_settings(classifier, n_folds, calibration, ESTIMATED_PROPENSITY_FLOOR)
    n = a.shape[0]
    if x.ndim != 2 or x.shape[0] != n:
        raise ParameterError(f"x must have shape (n, d) with n = {n}; got {x.shape}.")
    classes, codes = np.unique(a, return_inverse=True)
    if classes.size == 0:
        raise EstimationError(
            "`action` has no rows (the logs are empty): a classifier of the logged action needs "
            "rows with at least 2 distinct actions."
        )
    if classes.size < 2:
        raise EstimationError(
            f"every logged action is {classes[0]!r}; a classifier needs at least 2 actions. "
            "A logger that always takes one action has propensity 1: log it as such."
        )
    if n < 2 * folds:
        raise EstimationError(
            f"{n} rows cannot be split into n_folds={folds} folds of at least 2 rows; use fewer "
            "folds or more rows."
        )
    weight = varying_sampling_weight(sample_weight, n)  # equal weights: the unweighted fit
    if weight is not None and classifier is not None:
        if (why := _weights_reach(classifier, cal)) is not None:
            raise ParameterError(
                f"the rows carry sampling weights, but {why}: fitted unweighted, the classifier "
                "would estimate the logger's probabilities on the kept rows, not on the traffic "
                "they were kept from. Pass a classifier whose fit takes sample_weight (e.g. "
                "LogisticRegression or HistGradientBoostingClassifier), or drop the weight "
                "column if the rows were kept with probabilities that depend on the context "
                "alone (then the unweighted fit estimates the same probabilities)."
            )
    g = check_rng(rng)
    fold = g.permutation(np.arange(n) % folds)
    if classifier is None:  # a given classifier gets the features as they are (its own units)
        x = _in_power_of_two_units(x)
    base = classifier if classifier is not None else _default_classifier()
    out = np.zeros((n, classes.size), dtype=np.float64)
    for k in range(folds):  # loop over folds, not rows
        test = fold == k
        train = ~test if folds > 1 else test  # one fold: fitted on every row, in-sample
        _check_calibration_counts(
            codes,
            classes,
            train,
            cal,
            "the data" if folds == 1 else f"the training set of fold {k} (of {folds})",
        )
        if weight is not None and classifier is None:
            model = _weighted_default_classifier(cal)
        else:
            model = _calibrated(base, cal)
        fit_with_sample_weight(
            model, x[train], codes[train], None if weight is None else weight[train]
        )
        cols = np.asarray(model.classes_, dtype=np.int64)
        out[np.ix_(test, cols)] = model.predict_proba(x[test])
    return out, classes


# --------------------------------------------------------------------------- estimation
def _check_floor(floor: float, k: int, what: str) -> None:
    """Refuse a floor that no distribution over ``k`` actions can respect (k * floor >= 1):
    every estimate would be raised to it, and the estimated logger would sum to more than 1."""
    if k > 1 and floor * k >= 1.0:
        raise ParameterError(
            f"`min_propensity`={floor:g} is at least 1/{k}, one over the number of {what} "
            f"({k}): no distribution over {k} actions has every probability at or above it, so "
            "every estimate would be floored. Pass a floor well below that, e.g. the default "
            f"{ESTIMATED_PROPENSITY_FLOOR:g}."
        )


def _row_estimates(
    table: pa.Table,
    context_columns: str | Sequence[str],
    classifier: Any,
    n_folds: int,
    rng: Any,
    calibration: str,
    floor: float,
    weight: np.ndarray | None = None,
) -> tuple[np.ndarray, pa.Array | None, int]:
    """Estimated propensity of each logged action (and distribution over candidates), the fit
    weighted by the rows' sampling weights ``weight`` when given."""
    a = _actions(table)
    x = context_matrix(_Holder(table), context_columns)
    probs, classes = estimated_action_probabilities(
        x,
        a,
        classifier=classifier,
        n_folds=n_folds,
        rng=rng,
        calibration=calibration,
        sample_weight=weight,
    )
    codes = np.searchsorted(classes, a)
    n = a.shape[0]
    if "candidates" not in table.column_names:
        _check_floor(floor, len(classes), "actions in the logs")
        p = probs[np.arange(n), codes]
        floored = p < floor
        return np.maximum(p, floor), None, int(floored.sum())
    cand = table.column("candidates").combine_chunks()
    sizes = cand.value_lengths().fill_null(0).to_numpy(zero_copy_only=False)
    _check_floor(floor, int(sizes.max(initial=0)), "candidates in the largest candidate set")
    flat = np.asarray(cand.flatten().to_numpy(zero_copy_only=False))
    parent = np.asarray(cand.value_parent_indices().to_numpy(zero_copy_only=False), dtype=np.int64)
    pos = np.searchsorted(classes, flat)
    known = (pos < classes.size) & (classes[np.minimum(pos, classes.size - 1)] == flat)
    q = np.where(known, probs[parent, np.minimum(pos, classes.size - 1)], 0.0)
    total = np.bincount(parent, weights=q, minlength=n)
    q = np.where(total[parent] > 0, q / np.where(total[parent] > 0, total[parent], 1.0), 0.0)
    floored_flat = q < floor
    q = np.maximum(q, floor)  # floored, then renormalized so the distribution sums to 1
    q = q / np.bincount(parent, weights=q, minlength=n)[parent]
    logged = flat == a[parent]
    if np.bincount(parent, weights=logged, minlength=n).min() < 1:
        raise SchemaError(
            "some rows' logged action is not among their `candidates`; validate the logs with "
            "ope.read_logs first (it names the rows)."
        )
    first = np.zeros(logged.size, dtype=bool)
    idx = np.flatnonzero(logged)
    keep = np.ones(idx.size, dtype=bool)
    keep[1:] = parent[idx[1:]] != parent[idx[:-1]]
    first[idx[keep]] = True
    p = np.zeros(n, dtype=np.float64)
    p[parent[first]] = q[first]
    dist = pa.ListArray.from_arrays(cand.offsets, pa.array(q, type=pa.float64()))
    return p, dist, int(np.bincount(parent, weights=floored_flat & first, minlength=n).sum())


class _Holder:
    """The minimal ``.table`` holder :func:`ope.context.context_matrix` reads."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table


def _column_names(context_columns: str | Sequence[str]) -> list[str]:
    return [context_columns] if isinstance(context_columns, str) else list(context_columns)


def _model_name(
    classifier: Any, calibration: str, n_folds: int, weight_column: str | None = None
) -> str:
    name = (
        "multinomial LogisticRegression on standardized features"
        if classifier is None
        else type(classifier).__name__
    )
    cal = "no calibration" if calibration == "none" else f"calibration={calibration}"
    fit = "fitted on all rows" if n_folds == 1 else f"{n_folds}-fold cross-fitted"
    by = "" if weight_column is None else f", weighted by the sampling weights `{weight_column}`"
    return f"{name} ({fit}{by}, {cal})"


def estimate_propensities(
    logs: Any,
    *,
    context_columns: str | Sequence[str],
    classifier: Any = None,
    n_folds: int | None = None,
    rng: int | np.random.Generator | None = None,
    calibration: str = DEFAULT_CALIBRATION,
    min_propensity: float = ESTIMATED_PROPENSITY_FLOOR,
    weight_column: str | None = None,
) -> BanditLogs:
    r"""Logs whose ``propensity`` is estimated by a classifier of the action given the context.

    Parameters
    ----------
    logs : BanditLogs, pyarrow.Table or pandas.DataFrame
        Rows with ``action``, ``reward`` and the context columns; a ``propensity`` column, if
        any, is replaced (compare it with :func:`check_propensities` instead). A ``weight``
        column (the rows' sampling weights, e.g. ``1 / (1 - pdrop)``) weights the fit, so that
        it estimates the logger's probabilities on the traffic the rows were kept from: where
        the keeping depended on the action or the outcome, an unweighted fit would estimate
        those of the kept rows instead (see :func:`estimated_action_probabilities`).
    context_columns : str or sequence of str
        Everything the logger's choice depended on (numeric and/or list columns). Required: a
        missing confounder biases every weight, and no default can know the logger's inputs.
    classifier : scikit-learn classifier, optional
        Any classifier with ``predict_proba``. Default: multinomial logistic regression on
        standardized features (``StandardScaler`` then ``LogisticRegression(max_iter=1000)``),
        right when the logger is a softmax of a linear score in the context columns.
    n_folds : int, optional
        Default: ``1`` for the default classifier (fitted on every row: the maximum-likelihood
        propensities of a parametric model), :data:`CROSS_FIT_FOLDS` (5) for a given
        classifier (each row predicted by a model that never saw it: a flexible classifier
        would otherwise predict its own rows' actions with probabilities near 1). Any
        ``k >= 1`` may be passed.
    rng : int, numpy.random.Generator or None
        Randomness of the fold split (unused with one fold).
    calibration : {"none", "isotonic", "sigmoid"}, default "none"
        Post-hoc calibration (``CalibratedClassifierCV``, 3 inner folds) inside each training
        set. Neither helps a well-specified model, and both hurt IPS (see Notes).
    min_propensity : float, default 1e-3
        Floor of the estimates, counted in the record. It bounds a weight by
        :math:`1/p_{\min}` when a model puts almost no probability on a logged action.
    weight_column : str, optional
        The column of the rows' sampling weights, which weight the fit (as in
        :func:`ope.evaluate`): default ``weight`` when the logs have it.

    Returns
    -------
    BanditLogs
        Validated logs with the estimated ``propensity`` (and, when ``candidates`` exist, the
        estimated ``logging_distribution`` over them: renormalized over the candidates, floored,
        then renormalized again, so a floored entry ends slightly below the floor). The table's
        schema metadata holds ``ope.propensity_source = "estimated"``, the model, the context
        columns, the floor and the floored row count (:func:`propensity_info`); the readers
        keep them through a parquet round trip, and every result built on these logs carries
        :func:`estimated_propensity_note`.

    Raises
    ------
    ope.ParameterError
        A bad setting.
    ope.SchemaError
        No ``action`` column or an unusable context column.
    ope.EstimationError
        Fewer than 2 distinct actions or too few rows for the folds.

    Notes
    -----
    :math:`\hat p_i = \max(\hat\pi_b(a_i \mid x_i), p_{\min})` with the model of
    :func:`estimated_action_probabilities`.

    *Assumptions.* IPS with :math:`\hat p` estimates the candidate's value when (1) the
    logger's choice depended on nothing but ``context_columns`` (no unlogged confounder) and
    (2) the model family contains the logger (for the default: a softmax of a linear score in
    the columns). When (1) fails no model can help. When (2) fails the weights carry the
    model's error, and no interval shows it: with a logger that depends on interactions and
    even functions of the columns, IPS on the default estimates was biased by +0.019 at both
    n = 2,000 and 10,000, so its normal interval covered 0.92 and then 0.43 (SNIPS: +0.007,
    0.95 and 0.81).

    *The defaults, measured* (``benchmarks/propensity_coverage.md``: 300 replications per
    row, exact truth, a logger that is a softmax of three context features, largest true
    weight 69). With the default (the multinomial logit fitted on every row, no calibration),
    IPS and SNIPS are unbiased within Monte Carlo error (IPS -0.0015 +- 0.0014 at n = 2,000,
    -0.0011 +- 0.0006 at 10,000; SNIPS +0.0004 +- 0.0011 and -0.0005 +- 0.0005), no row was
    floored, and the intervals that treat :math:`\hat p` as known cover at or above 95%:
    IPS 0.983 (normal) and 0.990 (bootstrap) at n = 2,000, 0.970 at 10,000, against 0.950
    and 0.937 with the true propensities; SNIPS 0.947 / 0.953. IPS's plug-in interval is
    conservative because maximum-likelihood propensities of a correctly specified parametric
    model remove the part of the weights' noise that the model's score explains, so IPS is
    *more* precise than with the true propensities (RMSE 0.0245 against 0.0290; Hirano,
    Imbens and Ridder 2003; Henmi and Eguchi 2004); no correction for the estimation is
    applied. Cross-fitting the same model (``n_folds=5``) adds estimation noise independent
    of each row, and :math:`E[1/\hat p] > 1/p` biases IPS upward at small ``n`` (+0.0071 +-
    0.0015 at 2,000; +0.0005 +- 0.0006 at 10,000).

    *The calibrations, measured* on the same well-specified logger: ``"isotonic"`` makes
    stepwise probabilities, some near 0 for actions the logger took: IPS stays unbiased but
    is noisier (RMSE 0.0332; weights up to 278 at n = 2,000 and 460 at 10,000) and SNIPS is
    biased (-0.0050 +- 0.0014; -0.0051 +- 0.0006). ``"sigmoid"`` rescales each action's
    probability one-vs-rest, distorting the multinomial probabilities: IPS is biased by
    -0.023 and covers 0.84 at n = 2,000, 0.57 at 10,000. Under the misspecified logger,
    isotonic's flexibility removes most of IPS's bias (+0.0037 at n = 2,000, +0.0062 at
    10,000, coverage 0.98 and 0.93), not SNIPS's. Isotonic inside 5-fold cross-fitting (the
    default of earlier releases) biased IPS by +0.28 at n = 2,000, with weights up to 833 and
    3.7 rows per replication at the floor.

    References
    ----------
    .. [1] K. Hirano, G. W. Imbens and G. Ridder, "Efficient estimation of average treatment
       effects using the estimated propensity score", Econometrica 71(4), 2003.
    .. [2] M. Henmi and S. Eguchi, "A paradox concerning nuisance parameters and projected
       estimating functions", Biometrika 91(4), 2004.
    .. [3] V. Chernozhukov et al., "Double/debiased machine learning for treatment and structural
       parameters", The Econometrics Journal, 2018.

    Examples
    --------
    >>> from ope.simulate import ContextualBandit
    >>> env = ContextualBandit(n_actions=3, n_features=2, n_contexts=20, seed=0)
    >>> raw = env.sample(2000, rng=1).drop_columns(["propensity"])
    >>> logs = estimate_propensities(raw, context_columns=["x0", "x1"])
    >>> info = propensity_info(logs)
    >>> info["propensity_source"], info["propensity_context_columns"]
    ('estimated', ['x0', 'x1'])
    >>> info["propensity_model"]
    'multinomial LogisticRegression on standardized features (fitted on all rows, no calibration)'
    """
    from ope.io import read_logs

    folds, cal, floor = _check_settings(classifier, n_folds, calibration, min_propensity)
    table = as_log_table(logs)
    weight, weight_name = _sampling_weights(table, weight_column)
    p, dist, n_floored = _row_estimates(
        table, context_columns, classifier, folds, rng, cal, floor, weight
    )
    replaced = [
        column
        for column in ("propensity", "logging_distribution")
        if column in table.column_names and (column == "propensity" or dist is not None)
    ]
    note = _replaced_note(table, replaced)
    table = table.drop_columns(replaced)
    table = table.append_column("propensity", pa.array(p, type=pa.float64()))
    if dist is not None:
        table = table.append_column("logging_distribution", dist)
    meta = (  # the reader keeps these entries only, as it does from any source
        {
            PROPENSITY_SOURCE_KEY.encode(): b"estimated",
            b"ope.propensity_floor": repr(floor).encode(),
            b"ope.propensity_floored_rows": str(n_floored).encode(),
            b"ope.propensity_model": _model_name(
                classifier, cal, folds, weight_name if weight is not None else None
            ).encode(),
            b"ope.propensity_context_columns": json.dumps(_column_names(context_columns)).encode(),
        }
    )
    if weight_name is not None:  # absent: no weights (as every record before this key); all
        # equal weights are recorded too (the fit is the same), so that a scan of these logs,
        # which does not read the values, finds the fit's weights equal to its own
        meta[b"ope.propensity_weight_column"] = json.dumps(weight_name).encode()
    if note is not None:  # every result built on these logs carries it (propensity_notes)
        meta[b"ope.propensity_replaced"] = note.encode()
    out = read_logs(table.replace_schema_metadata(meta))
    return out


def _sampling_weights(
    table: pa.Table, weight_column: str | None
) -> tuple[np.ndarray | None, str | None]:
    """The rows' sampling weights (``weight_column``, default ``weight`` when present) as
    float64 and the column's name; the weights are None when absent or all equal (the
    unweighted fit, exactly). Weights no estimate could use are refused here: the returned logs
    would carry them to every estimate, which would refuse them only then."""
    name, values = table_sampling_weights(table, weight_column)
    if name is None:
        return None, None
    return varying_sampling_weight(values, table.num_rows, name=name), name  # the name kept


def _replaced_note(table: pa.Table, replaced: list[str]) -> str | None:
    """The note that the logs' own ``propensity`` (and ``logging_distribution``) were replaced
    by the estimates, with how many logged propensities were unusable; None when none was."""
    if not replaced:
        return None
    what = " and ".join(f"`{c}`" for c in replaced)
    unusable = ""
    if "propensity" in replaced:
        kind = table.schema.field("propensity").type
        if pa.types.is_floating(kind) or pa.types.is_integer(kind):
            logged = np.asarray(
                table.column("propensity").to_numpy(zero_copy_only=False), dtype=np.float64
            )
            bad = int(np.count_nonzero(~((logged >= MIN_PROPENSITY) & (logged <= 1))))
            if bad:
                unusable = f" ({bad:,} of the logged propensities were missing or outside [{MIN_PROPENSITY:g}, 1], the read rule)"
        else:
            unusable = f" (the logged column held {kind}, not probabilities)"
    return (
        f"the logs' own {what} {'was' if len(replaced) == 1 else 'were'} replaced by the "
        f"estimates{unusable}: estimate_propensities always replaces them; to compare logged "
        "propensities with estimated ones, call ope.propensity.check_propensities on the "
        "logged column instead"
    )


# --------------------------------------------------------------------------- the detector
@dataclass(frozen=True)
class PropensityCheck(Result):
    """Logged versus estimated propensities: where they disagree (:func:`check_propensities`).

    Attributes
    ----------
    verdict : {"consistent", "disagree"}
        ``"disagree"`` when an action (or segment) is flagged.
    n : int
        Rows compared.
    n_disagree : int
        Rows whose logged and estimated propensities differ by more than ``ratio_tolerance``.
    ratio_tolerance : float
        The factor beyond which a row disagrees.
    by_action : pandas.DataFrame
        Per action: ``n``, mean logged and estimated propensity, ``ratio`` (geometric mean of
        logged / estimated), ``z`` of the mean log ratio, ``share_disagree``, ``flagged``.
    by_segment : pandas.DataFrame or None
        The same per value of the ``by`` column.
    worst_rows : pandas.DataFrame
        The rows with the largest disagreement: ``row``, ``event_id``, ``action``, ``logged``,
        ``estimated``, ``ratio``.
    flagged_actions : list
        Actions whose logged propensities are off by more than the tolerance, significantly.
    model : str
        The classifier that gave the estimates.
    notes : tuple of str
    """

    verdict: str
    n: int
    n_disagree: int
    ratio_tolerance: float
    by_action: pd.DataFrame
    by_segment: pd.DataFrame | None
    worst_rows: pd.DataFrame
    flagged_actions: list[Any]
    model: str
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with stable keys."""
        return {
            "verdict": self.verdict,
            "n": self.n,
            "n_disagree": self.n_disagree,
            "ratio_tolerance": self.ratio_tolerance,
            "flagged_actions": [_plain(a) for a in self.flagged_actions],
            "by_action": _records(self.by_action),
            "by_segment": None if self.by_segment is None else _records(self.by_segment),
            "worst_rows": _records(self.worst_rows),
            "model": self.model,
            "notes": list(self.notes),
        }

    def _parts(self) -> ResultParts:
        return ResultParts(
            title=f"Logged vs estimated propensities: {self.verdict}",
            fields=(
                ("rows", self.n),
                (f"rows off by more than x{self.ratio_tolerance:g}", self.n_disagree),
                ("flagged actions", ", ".join(map(str, self.flagged_actions)) or "none"),
                ("model", self.model),
            ),
            table=self.by_action,
            notes=self.notes,
        )


def _plain(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return [{k: _plain(v) for k, v in row.items()} for row in df.to_dict(orient="records")]


def _grouped(keys: np.ndarray, logged: np.ndarray, est: np.ndarray, tol: float) -> pd.DataFrame:
    lr = np.log(logged / est)
    frame = pd.DataFrame(
        {"key": keys, "logged": logged, "estimated": est, "lr": lr, "off": np.abs(lr) > np.log(tol)}
    )
    g = frame.groupby("key", sort=True)
    out = g.agg(
        n=("lr", "size"),
        logged=("logged", "mean"),
        estimated=("estimated", "mean"),
        mean_lr=("lr", "mean"),
        sd_lr=("lr", "std"),
        share_disagree=("off", "mean"),
    ).reset_index()
    se = out["sd_lr"].fillna(np.inf) / np.sqrt(out["n"])
    out["ratio"] = np.exp(out["mean_lr"])
    with np.errstate(divide="ignore", invalid="ignore"):
        out["z"] = np.where(se > 0, out["mean_lr"] / se, np.sign(out["mean_lr"]) * np.inf)
    out["flagged"] = (np.abs(out["mean_lr"]) > np.log(tol)) & (np.abs(out["z"]) > DISAGREEMENT_Z)
    return out[["key", "n", "logged", "estimated", "ratio", "z", "share_disagree", "flagged"]]


def check_propensities(
    logs: Any,
    *,
    context_columns: str | Sequence[str],
    by: str | None = None,
    classifier: Any = None,
    n_folds: int | None = None,
    rng: int | np.random.Generator | None = None,
    calibration: str = DEFAULT_CALIBRATION,
    min_propensity: float = ESTIMATED_PROPENSITY_FLOOR,
    ratio_tolerance: float = DISAGREEMENT_RATIO,
    n_worst: int = WORST_ROWS,
    weight_column: str | None = None,
) -> PropensityCheck:
    r"""Compare logged propensities with cross-fitted estimates: a logging-bug detector.

    Parameters
    ----------
    logs : BanditLogs, pyarrow.Table or pandas.DataFrame
        Logs with ``action``, ``propensity`` and the context columns (validate them with
        ``ope.read_logs`` first).
    context_columns : str or sequence of str
        The logger's inputs.
    by : str, optional
        A segment column for a per-segment table.
    classifier, n_folds, rng, calibration, min_propensity
        As in :func:`estimate_propensities`.
    ratio_tolerance : float, default 1.5
        A row disagrees when logged / estimated is above this factor or below its inverse; an
        action (segment) is flagged when its geometric-mean ratio is, and its mean log ratio is
        more than 4 standard errors from 0.
    n_worst : int, default 10
        Rows listed in ``worst_rows``.
    weight_column : str, optional
        As in :func:`estimate_propensities`.

    Returns
    -------
    PropensityCheck

    Notes
    -----
    Per row, :math:`\ell_i = \log(p_i / \hat p_i)`. An action's :math:`\bar\ell` estimates the
    log of how far its logged propensities are off (a model that is wrong everywhere by the
    same smooth error moves every action a little; a bug in one action moves that one). The
    estimates use only contexts and actions, never the logged propensities, so a bug cannot
    hide in the model. A ``weight`` column (sampling weights) weights the fit, as in
    :func:`estimate_propensities`; the comparisons are of the kept rows.

    Examples
    --------
    >>> from ope.simulate import ContextualBandit
    >>> env = ContextualBandit(n_actions=3, n_features=2, n_contexts=20, seed=0)
    >>> t = env.sample(4000, rng=1)
    >>> check_propensities(t, context_columns=["x0", "x1"], rng=0).verdict
    'consistent'
    """
    folds, cal, floor = _check_settings(classifier, n_folds, calibration, min_propensity)
    tol = check_real(ratio_tolerance, "ratio_tolerance")
    if not tol > 1.0:
        raise ParameterError(f"`ratio_tolerance` must be a factor > 1; got {ratio_tolerance!r}.")
    n_worst = check_positive_int(n_worst, "n_worst")
    table = as_log_table(logs)
    if by is not None:  # checked before the classifier is fitted
        if not isinstance(by, str):
            raise ParameterError(
                f"`by` must be the name of one segment column (a str) or None; got {describe(by)}."
            )
        if by not in table.column_names:
            raise SchemaError(
                f"`by` names the segment column {by!r}, which is not in the logs; they have: "
                f"{', '.join(table.column_names)}."
            )
    if "propensity" not in table.column_names:
        raise SchemaError(
            "the logs have no `propensity` column to check; to estimate one, call "
            "ope.propensity.estimate_propensities."
        )
    logged = np.asarray(table.column("propensity").to_numpy(zero_copy_only=False), dtype=np.float64)
    if not (np.isfinite(logged).all() and (logged > 0).all()):
        raise SchemaError(
            "`propensity` must be finite and > 0 on every row; validate with ope.read_logs first."
        )
    weight, weight_name = _sampling_weights(table, weight_column)
    est, _, n_floored = _row_estimates(
        table, context_columns, classifier, folds, rng, cal, floor, weight
    )
    a = _actions(table)
    lr = np.log(logged / est)
    off = np.abs(lr) > np.log(tol)
    by_action = _grouped(a, logged, est, tol).rename(columns={"key": "action"})
    by_segment = None
    if by is not None:
        seg = np.asarray(table.column(by).to_numpy(zero_copy_only=False)).astype(str)
        by_segment = _grouped(seg, logged, est, tol).rename(columns={"key": by})
    worst = np.argsort(-np.abs(lr), kind="stable")[:n_worst]
    ids = (
        np.asarray(table.column("event_id").to_numpy(zero_copy_only=False))[worst]
        if "event_id" in table.column_names
        else worst
    )
    worst_rows = pd.DataFrame(
        {
            "row": worst,
            "event_id": ids,
            "action": a[worst],
            "logged": logged[worst],
            "estimated": est[worst],
            "ratio": np.exp(lr[worst]),
        }
    )
    flagged = by_action.loc[by_action["flagged"], "action"].tolist()
    seg_flagged = [] if by_segment is None else by_segment.loc[by_segment["flagged"], by].tolist()
    notes = []
    if flagged:
        notes.append(
            f"logged propensities of action(s) {flagged} differ from the estimates by more than "
            f"a factor {tol:g} (see by_action.ratio): check how the logger records them."
        )
    if seg_flagged:
        notes.append(f"segment(s) {seg_flagged} of {by!r} disagree by more than a factor {tol:g}.")
    if n_floored:
        notes.append(f"{n_floored} estimated propensities were raised to the floor {floor:g}.")
    if propensity_source(table) == "estimated":
        notes.append(
            "the logs' `propensity` column was itself estimated "
            f"({propensity_info(table).get('propensity_model', 'a classifier')}): this check "
            "compares a model with a model and cannot find a logging bug; run it on the logged "
            "propensities."
        )
    notes.append(
        f"estimates assume the logger used only the context columns "
        f"{_column_names(context_columns)}, through a function the model family can represent."
    )
    return PropensityCheck(
        verdict=_VERDICTS[1] if (flagged or seg_flagged) else _VERDICTS[0],
        n=int(a.shape[0]),
        n_disagree=int(off.sum()),
        ratio_tolerance=tol,
        by_action=by_action,
        by_segment=by_segment,
        worst_rows=worst_rows,
        flagged_actions=flagged,
        model=_model_name(classifier, cal, folds, weight_name if weight is not None else None),
        notes=tuple(notes),
    )
