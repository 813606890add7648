"""Policy learners from logged bandit feedback, with the scikit-learn estimator API.

``ConservativePolicyLearner`` maximizes a lower bound of a linear softmax policy's value
(counterfactual risk minimization); ``IPSPolicyLearner`` maximizes the plain IPS estimate;
``DirectMethodPolicyLearner`` regresses the reward and acts greedily.

Every learner works on each row's candidate set (:mod:`ope.learning._support`): a policy
spreads over a row's candidates only, and no ``(n, n_actions)`` block is formed unless the
caller asks for one (``predict_proba``). The softmax learners can score actions through their
features (``action_features``: a bilinear score on context x item features), so that the
number of parameters does not grow with the catalog.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final, Literal, NamedTuple, Self

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from scipy.optimize import minimize
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data
from threadpoolctl import threadpool_limits

from ope._progress import progress
from ope._thresholds import MIN_ROWS
from ope._validation import (
    check_finite,
    check_label_kinds,
    check_max_weight,
    check_positive_int,
    check_positive_real,
    check_real,
    resolve_seed,
)
from ope.context import action_feature_matrix
from ope.exceptions import (
    EstimationError,
    ParameterError,
    SchemaError,
    SmallSampleWarning,
    ValidationError,
)
from ope.learning._columns import fit_logs
from ope.learning._common import (
    Standardizer,
    as_list_array,
    candidate_lists,
    check_features,
    check_propensity,
    check_reward,
    encode_actions,
    encode_known,
    in_reward_units,
    penalized_value,
    reported_bound,
    required_reward_range,
    row_list,
    translate_reward,
    weighted_quantile,
)
from ope.learning._support import (
    Layout,
    Support,
    build_support,
    candidate_row_blocks,
    make_layout,
    slice_candidates,
    warn_unseen,
)
from ope.weights import check_sampling_weight

__all__ = [
    "ConservativePolicyLearner",
    "IPSPolicyLearner",
    "DirectMethodPolicyLearner",
    "CandidateProbabilities",
    "policy_objective",
]

#: one-sided 95% standard-normal quantile: with this variance penalty the maximized objective,
#: estimate - penalty * std_error, is an (approximate, in-sample) 95% lower confidence bound
DEFAULT_VARIANCE_PENALTY: Final = 1.6448536269514722

#: quantile of the logged propensities whose inverse is the default clip level: a deterministic
#: policy keeps its full weight 1/p on the 90% of rows whose logged action was not rarer than this
MAX_WEIGHT_QUANTILE: Final = 0.10

#: L2 penalty on standardized softmax weights; the objective is a mean (order 1), so this keeps
#: weights of a few units nearly free while stopping the unbounded growth of separable problems
DEFAULT_L2_PENALTY: Final = 1e-3

#: share of the training rows held out when ``select="validation"`` (POEM keeps aside 25%)
DEFAULT_VALIDATION_FRACTION: Final = 0.25

#: BLAS threads of the learners' products (the optimizer's and the predictions' blocks). They
#: are skinny (K actions x d + 1 features against n rows: bandwidth-bound) and run hundreds of
#: times, so extra threads mostly synchronize: for 500,000 rows x 50 actions x 50 features one
#: objective + gradient took 0.23 s of CPU with one OpenBLAS thread and 0.84 s with two (0.79 s
#: against 3.1 s of wall time on the shared 2-core machine at load 9), and on small problems
#: thread start-up alone exceeds the work
BLAS_THREADS: Final = 1

#: L-BFGS-B also stops when the objective (a mean, of order 1) improves by less than this
#: multiple of ``tol`` in relative terms: clipping puts kinks in the objective at which the
#: gradient never becomes small, and the value has long stopped changing there
FTOL_PER_TOL: Final = 0.01

#: L-BFGS-B also stops once the last STALL_WINDOW iterations together improved the objective by
#: less than STALL_FRACTION of the value's standard error: the objective is an estimate whose
#: sampling noise is that standard error, and chasing a hundredth of it changes no decision. On
#: 500,000 rows x 50 actions x 50 features of benchmarks/bench_learning.py's design L-BFGS-B
#: took 181 iterations to its relative ftol; with this rule the --catalog fit (the 500,000
#: training rows of its 1M-row logs) stops after 117, its values within 0.0013 standard errors
#: of the full run's on the small data sets of tests/test_learning_catalog.py
STALL_WINDOW: Final = 10
STALL_FRACTION: Final = 0.01

#: ``select="validation"`` grid: multiples of ``variance_penalty`` and of the clip level
SELECTION_PENALTY_FACTORS: Final = (0.0, 0.25, 1.0, 4.0)
SELECTION_MAX_WEIGHT_FACTORS: Final = (0.5, 1.0, 2.0)

#: how a softmax learner scores an action: its own weights, or a bilinear form of its features
ActionModel = Literal["auto", "per_action", "features"]
_ACTION_MODELS: Final = ("auto", "per_action", "features")


class CandidateProbabilities(NamedTuple):
    """A policy on each row's candidates, in long format (one entry per (row, candidate)).

    ``row`` is the row index (into the ``X`` given), ``action`` the action label, and
    ``probability`` the policy's probability (0 for a candidate the policy never takes).
    Entries are grouped by row, in row order, and by label within a row.
    """

    row: npt.NDArray[np.intp]
    action: npt.NDArray[Any]
    probability: npt.NDArray[np.float64]


# --------------------------------------------------------------------------------------------
# inputs
# --------------------------------------------------------------------------------------------
def _validate_X(est: BaseEstimator, X: Any, *, reset: bool) -> npt.NDArray[np.float64]:
    """``validate_data`` with sklearn's messages kept, raised as ope's ``ValidationError``
    naming ``X`` (also for values numpy cannot convert at all, such as an arbitrary object);
    non-finite features are reported with their column and row."""
    try:
        X = validate_data(
            est, X, reset=reset, dtype=np.float64, accept_sparse=False, ensure_all_finite=False
        )
    except NotFittedError:
        raise
    except (ValueError, TypeError) as exc:
        # a value numpy cannot read as a number at all (a dict, an object) is a ParameterError,
        # a TypeError as scikit-learn's estimators raise; a wrong shape or text a ValidationError
        error = ParameterError if isinstance(exc, TypeError) else ValidationError
        raise error(
            f"`X` must be a 2-D array of numeric context features, one row per logged row: {exc}"
        ) from None
    check_features(X)
    return X


def _validate_y(y: Any, n: int) -> npt.NDArray[Any]:
    """The action labels ``y``: one per row of ``X``, of one kind (numbers or text), finite,
    and classification targets, else a ``ValidationError`` naming ``y``. An ``(n, 1)`` column
    is flattened with scikit-learn's ``DataConversionWarning``, as its estimators do."""
    labels = np.asarray(y)
    check_label_kinds(labels, "y")
    try:
        labels = column_or_1d(labels, warn=True)
    except ValueError as exc:
        raise ValidationError(
            f"`y` must hold one action label per row of X (shape (n,)): {exc}"
        ) from None
    if labels.shape[0] != n:
        raise ValidationError(
            f"`y` has {labels.shape[0]} labels but X has {n} rows; give one logged action per "
            "row, in the same order."
        )
    if labels.dtype.kind == "c":
        raise ValidationError("`y` holds complex numbers; action labels are integers or text.")
    if labels.dtype.kind == "f":
        check_finite(labels, "y")
    try:
        with warnings.catch_warnings():  # a catalog has more actions than a classifier classes
            warnings.filterwarnings(
                "ignore", message="The number of unique classes", category=UserWarning
            )
            check_classification_targets(labels)
    except (ValueError, TypeError) as exc:
        raise ValidationError(f"`y` must hold action labels (integers or text): {exc}") from None
    return labels


def _non_negative(value: Any, name: str, default: float) -> float:
    """A finite number >= 0 (a penalty, a tolerance), else a ParameterError naming ``name``."""
    x = check_real(value, name, finite=True, example=f"{name}={default!r}")
    if x < 0.0:
        raise ParameterError(
            f"`{name}` must be a finite number >= 0; got {value!r}. Pass e.g. {name}={default!r}."
        )
    return x


def _normal_candidates(candidates: Any, n: int) -> Any:
    """None, a boolean mask, or one Arrow list array (sequences are converted once)."""
    if candidates is None or (isinstance(candidates, np.ndarray) and candidates.dtype == np.bool_):
        return candidates
    return as_list_array(candidates, n)


@dataclass(frozen=True, eq=False)
class _FitData:
    """Validated, normalized fit inputs (rewards translated to [0, 1])."""

    X: npt.NDArray[np.float64]
    action: npt.NDArray[np.intp]
    r01: npt.NDArray[np.float64]
    p: npt.NDArray[np.float64]
    support: Support
    classes: npt.NDArray[Any]
    full_information: bool
    #: the rows' sampling (Horvitz-Thompson) weights; None when unweighted (or all 1)
    s: npt.NDArray[np.float64] | None = None


def _sample_weight(sample_weight: Any, n: int) -> npt.NDArray[np.float64] | None:
    """Validated sampling weights (finite, > 0, one per row), or None when absent or all 1:
    unit weights are the unweighted fit, exactly."""
    if sample_weight is None:
        return None
    s = np.asarray(sample_weight)
    if s.dtype.kind in "biuf" and s.ndim == 1 and s.shape[0] == n:
        zero = s == 0
        if zero.any():
            raise ValidationError(
                f"`sample_weight` is zero in {row_list(zero)}: a kept row stands for 1 / P(kept) "
                "> 0 events of the logged population, and a weight of zero would silently take "
                "the row (possibly every row of an action class) out of the fit. Drop such rows "
                "instead."
            )
    s = check_sampling_weight(s, n, name="sample_weight")
    return None if bool(np.all(s == 1.0)) else s


def _validate_fit_inputs(
    est: BaseEstimator,
    X: Any,
    y: Any,
    reward: Any,
    propensity: Any,
    candidates: Any,
    reward_range: tuple[float, float],
    catalog: npt.NDArray[Any] | None = None,
    sample_weight: Any = None,
) -> _FitData:
    """Validate everything ``fit`` receives; return normalized arrays and the support.

    ``classes`` are the logged actions, the candidates' actions and the ``catalog`` (the
    actions of an action-feature table).
    """
    X = _validate_X(est, X, reset=True)
    # the log columns of an earlier fit_logs: this fit's features need not come from them
    est.__dict__.pop("context_columns_", None)
    n = X.shape[0]
    y = _validate_y(y, n)
    sw = _sample_weight(sample_weight, n)
    full_information = reward is None and propensity is None
    if full_information:
        r = p = np.empty(0)  # built below, once the candidate sets are known
    elif reward is None or propensity is None:
        missing = "reward" if reward is None else "propensity"
        raise ValidationError(
            f"`{missing}` is missing: logged bandit feedback needs both `reward` and `propensity` "
            "(the logging probability of the logged action). Omit both only for full-information "
            "supervised labels."
        )
    else:
        r = check_reward(reward, n, reward_range)
        p = check_propensity(propensity, n)
    classes = np.unique(y)
    candidates = _normal_candidates(candidates, n)
    if candidates is not None and not isinstance(candidates, np.ndarray):
        _, labels, _ = candidate_lists(candidates, n)
        if labels.size:
            try:
                classes = np.union1d(classes, labels)
            except TypeError:
                raise ValidationError(
                    f"`candidates` labels (dtype {labels.dtype}) cannot be compared with the "
                    f"logged actions (dtype {np.asarray(y).dtype}); use one label type."
                ) from None
    if catalog is not None and catalog.size:
        if isinstance(candidates, np.ndarray):
            raise ParameterError(
                "a boolean `candidates` mask has one column per action seen in fit, which "
                "action_features would extend; pass the candidates as lists instead."
            )
        try:
            classes = np.union1d(classes, catalog)
        except TypeError:
            raise SchemaError(
                f"action_features' `action` labels ({catalog.dtype}) cannot be matched with the "
                f"logged actions ({np.asarray(y).dtype}); use one label type."
            ) from None
    support = build_support(candidates, classes, n)
    action = encode_actions(y, classes, what="y")
    outside = support.position(action) < 0
    if outside.any():
        raise ValidationError(
            f"the logged action is not among the row's `candidates` in {row_list(outside)}; "
            "a logger can only take one of its candidates. Check the join of the two columns."
        )
    if full_information:
        # Supervised labels carry every action's reward (top of the range for y, bottom for the
        # rest): the same information as logs of a uniform logger that tried each candidate once.
        rows = support.rows
        cols = support.flat_cols()
        X = X[rows]
        p = 1.0 / support.lengths[rows]
        r01 = (cols == action[rows]).astype(np.float64)
        return _FitData(
            X,
            cols.astype(np.intp, copy=False),
            r01,
            p,
            support.take(rows),
            classes,
            True,
            None if sw is None else sw[rows],
        )
    return _FitData(X, action, translate_reward(r, reward_range), p, support, classes, False, sw)


def _catalog(action_features: Any) -> npt.NDArray[Any]:
    """The action labels an action-feature table (or array) describes."""
    if type(action_features).__module__.partition(".")[0] == "pandas":
        action_features = pa.Table.from_pandas(action_features, preserve_index=False)
    if isinstance(action_features, pa.Table):
        if "action" not in action_features.column_names:
            raise SchemaError(
                "action_features has no `action` column to join on; it has: "
                f"{', '.join(action_features.column_names)}."
            )
        col = action_features.column("action").combine_chunks()
        if col.null_count:
            raise SchemaError(f"action_features' `action` column has {col.null_count} nulls.")
        return np.unique(np.asarray(col.to_numpy(zero_copy_only=False)))
    if isinstance(action_features, np.ndarray) and action_features.ndim == 2:
        return np.arange(action_features.shape[0])
    raise ParameterError(
        "action_features must be a pyarrow.Table or pandas.DataFrame with an `action` column "
        "and numeric feature columns, or a 2-D array with one row per integer action; got "
        f"{type(action_features).__name__}."
    )


def _action_feature_matrix(action_features: Any, classes: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """The ``(n_actions, m)`` features of ``classes``, rows in ``classes`` order.

    ``action_features`` is a table (pyarrow or pandas) with an ``action`` column and numeric
    feature columns (the form of ``ope.evaluate(..., action_features=)`` and of the importers'
    ``logs.action_features``; other columns are left out), or a 2-D array whose row ``a`` holds
    the features of the integer action ``a``.
    """
    if type(action_features).__module__.partition(".")[0] == "pandas":
        action_features = pa.Table.from_pandas(action_features, preserve_index=False)
    if isinstance(action_features, pa.Table):
        feats, _ = action_feature_matrix(
            action_features, classes, where="logged or among the candidates"
        )
        return feats
    if not isinstance(action_features, np.ndarray) or action_features.ndim != 2:
        raise ParameterError(
            "action_features must be a pyarrow.Table or pandas.DataFrame with an `action` column "
            "and numeric feature columns, or a 2-D array with one row per integer action; got "
            f"{type(action_features).__name__}."
        )
    F = np.asarray(action_features, dtype=np.float64)
    if classes.dtype.kind not in "iu" or classes.min() < 0 or classes.max() >= F.shape[0]:
        raise SchemaError(
            f"an action_features array gives row a to the integer action a, so it needs a row "
            f"for every action 0..{classes.max() if classes.dtype.kind in 'iu' else '?'}; it has "
            f"{F.shape[0]} rows for actions {classes[:5].tolist()}... Pass a table with an "
            "`action` column for other labels."
        )
    F = F[classes]
    bad = ~np.isfinite(F)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise ValidationError(
            f"`action_features` must be finite: feature column {int(c)} of action "
            f"{classes[r].item()!r} is {float(F[r, c])!r} ({int(bad.sum())} entries are NaN or "
            "infinite)."
        )
    return F


# --------------------------------------------------------------------------------------------
# score models: parameters -> per-action weights (W, b) on standardized context features
# --------------------------------------------------------------------------------------------
class _PerAction:
    """Each action its own weights: ``theta = [W (K x d), b (K)]`` (b only with an intercept).

    ``logged`` (indices into the ``n_actions`` of ``classes_``) are the actions the fit has
    weights for; every other action scores ``-inf`` (:meth:`full`): no logged row tells
    anything about it, and the objective only gains when its probability shrinks, so the
    optimum puts none there. The fit's support leaves such actions out altogether.
    """

    def __init__(
        self,
        k: int,
        d: int,
        intercept: bool,
        logged: npt.NDArray[np.intp] | None = None,
        n_actions: int | None = None,
    ) -> None:
        self.k, self.d, self.intercept = k, d, intercept
        self.size = k * d + (k if intercept else 0)
        self.n_penalized = k * d
        self.logged = np.arange(k) if logged is None else logged
        self.n_actions = k if n_actions is None else n_actions

    def unpack(self, theta: npt.NDArray[np.float64]) -> tuple[Any, Any]:
        W = theta[: self.k * self.d].reshape(self.k, self.d)
        b = theta[self.k * self.d :] if self.intercept else np.zeros(self.k)
        return W, b

    def full(self, theta: npt.NDArray[np.float64]) -> tuple[Any, Any]:
        """``(W, b)`` over every action of ``classes_`` (``b = -inf`` for unlogged actions)."""
        W, b = self.unpack(theta)
        if self.k == self.n_actions:
            return np.array(W), np.array(b)
        W_full = np.zeros((self.n_actions, self.d))
        b_full = np.full(self.n_actions, -np.inf)
        W_full[self.logged] = W
        b_full[self.logged] = b
        return W_full, b_full

    def pullback(self, dW: Any, db: Any) -> npt.NDArray[np.float64]:
        return np.concatenate([dW.ravel(), db]) if self.intercept else dW.ravel()


class _Bilinear:
    """Weights shared through action features: ``score(x, a) = [xs, 1]^T A fs_a`` with ``A``
    of shape ``(d + 1, m)`` (the last row only with an intercept), so ``W = Fs A[:d]^T`` and
    ``b = Fs A[d]``: ``(d + 1) m`` parameters whatever the number of actions."""

    def __init__(self, Fs: npt.NDArray[np.float64], d: int, intercept: bool) -> None:
        self.Fs = Fs  # (K, m) standardized action features
        self.k, self.m = Fs.shape
        self.d, self.intercept = d, intercept
        self.size = (d + int(intercept)) * self.m
        self.n_penalized = d * self.m

    def unpack(self, theta: npt.NDArray[np.float64]) -> tuple[Any, Any]:
        A = theta.reshape(self.d + int(self.intercept), self.m)
        W = self.Fs @ A[: self.d].T
        b = self.Fs @ A[self.d] if self.intercept else np.zeros(self.k)
        return W, b

    def full(self, theta: npt.NDArray[np.float64]) -> tuple[Any, Any]:
        """``(W, b)`` over every action: the features score each one, logged or not."""
        return self.unpack(theta)

    def pullback(self, dW: Any, db: Any) -> npt.NDArray[np.float64]:
        parts = [(dW.T @ self.Fs).ravel()]
        if self.intercept:
            parts.append(db @ self.Fs)
        return np.concatenate(parts)


_Model = _PerAction | _Bilinear


@dataclass(frozen=True, eq=False)
class _Problem:
    """One fit's data on its layout: the logged pair of each row, rewards and propensities."""

    layout: Layout
    logged: npt.NDArray[np.int64]  # flat position of each row's logged pair in the layout
    r01: npt.NDArray[np.float64]
    p: npt.NDArray[np.float64]
    s: npt.NDArray[np.float64] | None = None  # sampling weights (None: unweighted)


def _problem(
    X1: npt.NDArray[np.float64],
    support: Support,
    action: npt.NDArray[np.intp],
    r01: npt.NDArray[np.float64],
    p: npt.NDArray[np.float64],
    s: npt.NDArray[np.float64] | None = None,
) -> _Problem:
    layout = make_layout(X1, support, fit=True)
    return _Problem(layout, layout.native(support.position(action)), r01, p, s)


def policy_objective(
    theta: npt.NDArray[np.float64],
    problem: _Problem,
    model: _Model,
    *,
    objective: str,
    variance_penalty: float,
    max_weight: float | None,
    l2_penalty: float,
    stats: dict[str, float] | None = None,
) -> tuple[float, npt.NDArray[np.float64]]:
    """Negative penalized lower bound of a linear softmax policy and its gradient.

    ``theta`` holds the model's parameters (per-action weights and intercepts on standardized
    features, or the bilinear matrix on standardized context x action features). Returns the
    value to minimize, ``-(estimate - variance_penalty * std_error) + l2_penalty / 2 *
    ||W||^2``, with the estimate on the translated reward scale ``r01`` in [0, 1], and its
    gradient: ``d value / d theta = sum_i dwbar_i * active_i * w_i * d log pi_i / d theta`` with
    ``d log pi_i / d score_ib = 1[a_i = b] - pi_ib`` over row ``i``'s candidates ``b``. The
    softmax is never normalized as a whole: its row sums divide the logged entries and the
    residual's row factors. ``stats`` (a dict), if given, receives the estimate's standard error
    (for the optimizer's stopping rule).
    """
    layout = problem.layout
    W, b = model.unpack(theta)
    E, total = layout.exp_scores(layout.scores(W, b))  # softmax = E / total, row by row
    flat = E.reshape(-1)
    pi = flat[problem.logged] / total
    w = pi / problem.p
    if max_weight is None:
        active: Any = 1.0
        wbar = w
    else:
        active = w < max_weight
        wbar = np.minimum(w, max_weight)
    value, (_, se), dwbar = penalized_value(
        wbar, problem.r01, objective, variance_penalty, problem.s
    )
    if stats is not None:
        stats["std_error"] = se
    g = dwbar * active * w
    layout.scale_rows(E, -g / total)  # R = g (1[logged] - E / total), in place of E
    flat[problem.logged] += g
    dW, db = layout.grad(E)
    penalized = theta[: model.n_penalized]
    f = -value + 0.5 * l2_penalty * float(np.dot(penalized, penalized))
    grad = -model.pullback(dW, db)
    grad[: model.n_penalized] += l2_penalty * penalized
    return f, grad


def _resolve_max_weight(
    spec: Any,
    propensity: npt.NDArray[np.float64],
    sampling_weight: npt.NDArray[np.float64] | None = None,
) -> float | None:
    """The clip level: ``None`` (no clipping), a number >= 1, or ``"auto"`` (the inverse of the
    propensities' :data:`MAX_WEIGHT_QUANTILE` quantile, over the logged population when the
    rows carry sampling weights: :func:`ope.learning._common.weighted_quantile`)."""
    if spec is None:
        return None
    if isinstance(spec, str):
        if spec != "auto":
            raise ParameterError(f"max_weight must be a number >= 1, None or 'auto', got {spec!r}.")
        return 1.0 / weighted_quantile(propensity, MAX_WEIGHT_QUANTILE, sampling_weight)
    clip = check_max_weight(spec)
    if clip is None or clip < 1.0:
        raise ParameterError(
            f"max_weight must be a number >= 1 (a weight pi/p below 1 would be clipped even for "
            f"the logging policy), None or 'auto'; got {spec!r}."
        )
    return clip


def _stalled(history: list[float], std_error: float) -> bool:
    """True when the last :data:`STALL_WINDOW` iterations together improved the objective by
    less than :data:`STALL_FRACTION` of the estimate's standard error (its sampling noise)."""
    if len(history) <= STALL_WINDOW or not np.isfinite(std_error) or std_error <= 0.0:
        return False
    return history[-1 - STALL_WINDOW] - history[-1] < STALL_FRACTION * std_error


def _fit_softmax(
    problem: _Problem,
    model: _Model,
    *,
    objective: str,
    variance_penalty: float,
    max_weight: float | None,
    l2_penalty: float,
    max_iter: int,
    tol: float,
    desc: str,
) -> tuple[npt.NDArray[np.float64], int]:
    """L-BFGS-B on the penalized objective from the uniform policy (``theta = 0``)."""
    theta0 = np.zeros(model.size)
    stats: dict[str, float] = {}
    history: list[float] = []
    with (
        threadpool_limits(limits=BLAS_THREADS, user_api="blas"),
        progress(desc=desc, total=max_iter, unit="it") as bar,
    ):

        def step(intermediate_result: Any) -> None:
            bar.update(1)
            history.append(float(intermediate_result.fun))
            if _stalled(history, stats.get("std_error", np.inf)):
                raise StopIteration  # L-BFGS-B then returns its current point

        res = minimize(
            lambda t: policy_objective(
                t,
                problem,
                model,
                objective=objective,
                variance_penalty=variance_penalty,
                max_weight=max_weight,
                l2_penalty=l2_penalty,
                stats=stats,
            ),
            theta0,
            jac=True,
            method="L-BFGS-B",
            callback=step,
            options={"maxiter": max_iter, "gtol": tol, "ftol": FTOL_PER_TOL * tol},
        )
    if not (np.isfinite(res.fun) and np.isfinite(res.x).all()):
        worst = int(np.argmin(problem.p))
        settings = [f"l2_penalty={l2_penalty!r}"]
        if variance_penalty > 0.0:
            settings.append(f"variance_penalty={variance_penalty!r}")
        settings.append(f"max_weight={max_weight!r}")
        raise EstimationError(
            f"the policy optimizer diverged (a non-finite objective) with "
            f"{', '.join(settings)}: the importance weights (the smallest propensity is "
            f"{float(problem.p[worst])!r}, at row {worst}) or the penalties are too large to "
            "optimize. Clip the weights (max_weight='auto' or a number), drop rows with such "
            "propensities, or use smaller penalties."
        )
    if res.nit >= max_iter and not _stalled(history, stats.get("std_error", np.inf)):
        warnings.warn(
            f"L-BFGS-B stopped after max_iter={max_iter} iterations without meeting tol={tol}; "
            "the policy is usable but may improve with a larger max_iter.",
            ConvergenceWarning,
            stacklevel=3,
        )
    return res.x, int(res.nit)


# --------------------------------------------------------------------------------------------
# what every learner offers once fitted
# --------------------------------------------------------------------------------------------
class _LearnedPolicy(ClassifierMixin, BaseEstimator):
    """``fit_logs``, ``predict``, ``predict_proba``, ``target_propensity`` and the long-format
    ``predict_candidates`` / ``iter_candidates``, all computed on each row's candidates in
    blocks of rows.

    Subclasses implement ``fit`` and ``_block_values`` (the policy's probabilities of the
    (row, candidate) pairs of one block of standardized rows, in CSR order).
    """

    classes_: npt.NDArray[Any]

    def _block_values(self, X: npt.NDArray[np.float64], support: Support) -> Any:
        raise NotImplementedError  # pragma: no cover - every subclass defines it

    def fit_logs(
        self,
        logs: Any,
        *,
        context_columns: Any,
        action_features: Any = None,
        weight_column: str | None = None,
    ) -> Any:
        """Fit on validated :class:`ope.logs.BanditLogs`.

        Uses the columns ``action``, ``reward``, ``propensity``, the ``context_columns`` (numeric
        columns and/or one list column of features) and ``candidates`` when present;
        ``action_features`` (default ``logs.action_features`` when the logs carry one) for a
        learner that scores actions through their features; and the rows' sampling weights as
        ``sample_weight``: the column ``weight_column``, else ``weight`` when the logs have it
        (the DSJSON importer writes ``1 / (1 - pdrop)`` there).
        """
        return fit_logs(
            self,
            logs,
            context_columns=context_columns,
            action_features=action_features,
            weight_column=weight_column,
        )

    def iter_candidates(
        self, X: Any, *, candidates: Any = None
    ) -> Iterator[CandidateProbabilities]:
        """The policy on each row's candidates, block by block of rows (bounded memory).

        Yields :class:`CandidateProbabilities` whose ``row`` indexes ``X``; ``candidates`` as in
        ``fit`` (None: every action of ``classes_``).
        """
        for sl, support, values in self._dense_blocks(X, candidates):
            yield CandidateProbabilities(
                support.rows + sl.start, self.classes_[support.flat_cols()], values
            )

    def predict_candidates(self, X: Any, *, candidates: Any = None) -> CandidateProbabilities:
        """The policy on each row's candidates in long format: one entry per (row, candidate).

        Memory grows with the number of candidates, not with ``n * n_actions``: the form to use
        for catalogs of thousands of actions (``predict_proba`` is dense).
        """
        parts = list(self.iter_candidates(X, candidates=candidates))
        if not parts:
            return CandidateProbabilities(
                np.zeros(0, dtype=np.intp), self.classes_[:0], np.zeros(0)
            )
        return CandidateProbabilities(*(np.concatenate(c) for c in zip(*parts)))

    def _dense_blocks(
        self, X: Any, candidates: Any, *, checked: bool = False
    ) -> Iterator[tuple[slice, Support, Any]]:
        """The policy's values block by block of rows; ``checked``: X is already validated."""
        check_is_fitted(self, "classes_")
        if not checked:
            X = _validate_X(self, X, reset=False)
        n = X.shape[0]
        cand = _normal_candidates(candidates, n)
        unseen: list[Any] = []
        for sl in candidate_row_blocks(cand, n, self.classes_.size):  # blocks, not rows
            support = build_support(
                slice_candidates(cand, sl), self.classes_, sl.stop - sl.start, unseen=unseen
            )
            with threadpool_limits(limits=BLAS_THREADS, user_api="blas"):
                values = self._block_values(X[sl], support)
            yield sl, support, values
        warn_unseen(unseen)

    def predict_proba(self, X: Any, *, candidates: Any = None) -> npt.NDArray[np.float64]:
        """Action probabilities ``pi(a | x)``, shape ``(n, n_actions)``, columns as ``classes_``.

        ``candidates`` (one list of actions per row, or a boolean mask) restricts each row's
        policy to its candidates; the others get probability exactly 0. A candidate the learner
        never saw in fit (not in ``classes_``) gets probability 0 too, with one
        :class:`ope.exceptions.OPEWarning` per call; a row with no known candidate is a
        ``ValidationError``. Dense by nature: for a large catalog use
        :meth:`predict_candidates`.
        """
        check_is_fitted(self, "classes_")
        X = _validate_X(self, X, reset=False)
        k = self.classes_.size
        out = np.zeros((X.shape[0], k))
        for sl, support, values in self._dense_blocks(X, candidates, checked=True):
            block = out[sl]
            block.reshape(-1)[support.rows * k + support.flat_cols()] = values
        return out

    def predict(self, X: Any, *, candidates: Any = None) -> npt.NDArray[Any]:
        """The most probable action of each row (the policy's greedy, deterministic version);
        ties go to the first label."""
        check_is_fitted(self, "classes_")
        labels = []
        for _, support, values in self._dense_blocks(X, candidates):
            labels.append(self.classes_[support.flat_cols()[_row_argmax(support, values)]])
        return np.concatenate(labels) if labels else self.classes_[:0]

    def target_propensity(
        self, X: Any, action: Any, *, candidates: Any = None
    ) -> npt.NDArray[np.float64]:
        """``pi(action_i | x_i)`` for given actions: the per-row vector IPS-type estimators use
        (0 where ``action_i`` is not among row ``i``'s candidates; for the greedy direct-method
        policy, 1 where its action equals ``action_i``, else 0)."""
        check_is_fitted(self, "classes_")
        X = _validate_X(self, X, reset=False)
        n = X.shape[0]
        labels = np.asarray(action)
        if labels.shape != (n,):
            raise ValidationError(
                f"`action` must hold one action label per row of X ({n} rows, shape ({n},)); "
                f"got shape {labels.shape}."
            )
        check_label_kinds(labels, "action")
        idx, known = encode_known(labels, self.classes_, what="action")
        out = np.zeros(n)
        for sl, support, values in self._dense_blocks(X, candidates, checked=True):
            pos = np.where(known[sl], support.position(idx[sl]), -1)
            out[sl] = np.where(pos >= 0, values[np.maximum(pos, 0)], 0.0)
        return out

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Accuracy of the greedy policy: the share of rows where :meth:`predict` equals the
        label ``y`` (weighted by ``sample_weight``, sampling weights as in ``fit``), as
        scikit-learn's ``ClassifierMixin.score``; for full-information labels (``y`` the one
        rewarded action) the value of the greedy policy. Malformed ``X``, ``y`` or
        ``sample_weight`` is a ``ValidationError`` naming it."""
        check_is_fitted(self, "classes_")
        X = _validate_X(self, X, reset=False)
        n = X.shape[0]
        labels = _validate_y(y, n)
        if (labels.dtype.kind in "biuf") != (self.classes_.dtype.kind in "biuf"):
            raise ValidationError(
                f"`y` holds {'numbers' if labels.dtype.kind in 'biuf' else 'text'} but the "
                f"actions seen in fit (classes_) are {self.classes_.dtype} labels; give the "
                "labels in the type the learner was fitted with."
            )
        sw = _sample_weight(sample_weight, n)
        hit = (
            np.concatenate(
                [
                    self.classes_[support.flat_cols()[_row_argmax(support, values)]]
                    for _, support, values in self._dense_blocks(X, None, checked=True)
                ]
            )
            == labels
        )
        return float(np.average(hit, weights=sw))

    def set_params(self, **params: Any) -> Self:
        """Set hyperparameters, as scikit-learn's ``BaseEstimator.set_params``; a name that is
        not a hyperparameter of this learner is a ``ParameterError`` (a ``ValueError``, as in
        scikit-learn) naming it and listing the valid ones."""
        valid = self.get_params(deep=False)
        unknown = [key for key in params if key.partition("__")[0] not in valid]
        if unknown:
            raise ParameterError(
                f"`{unknown[0]}` is not a parameter of {type(self).__name__}; its parameters "
                f"are {', '.join(sorted(valid))}."
            )
        return super().set_params(**params)


def _row_argmax(support: Support, values: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """CSR position of the first largest value of each row."""
    if support.offsets is None:
        k = support.n_actions
        return np.arange(support.n, dtype=np.int64) * k + values.reshape(support.n, k).argmax(1)
    top = np.maximum.reduceat(values, support.offsets[:-1])
    hit = np.flatnonzero(values >= np.repeat(top, support.lengths))
    rows = support.rows[hit]
    first = np.ones(hit.size, dtype=bool)
    first[1:] = rows[1:] != rows[:-1]
    return hit[first]


# --------------------------------------------------------------------------------------------
# softmax learners
# --------------------------------------------------------------------------------------------
class _SoftmaxPolicyLearner(_LearnedPolicy):
    """Shared fit/predict of linear softmax policies; subclasses choose the objective."""

    def _objective_settings(self) -> tuple[str, float, Any, str | None]:
        """``(objective, variance_penalty, max_weight spec, select)`` from the hyperparameters."""
        raise AttributeError  # pragma: no cover - every subclass defines it

    def _split_rng(self) -> tuple[int | None, np.random.Generator]:
        """The seed recorded as ``seed_`` and the generator of the validation split."""
        return resolve_seed(getattr(self, "rng", None))

    # -- fitting -----------------------------------------------------------------------------
    def fit(
        self,
        X: Any,
        y: Any,
        reward: Any = None,
        propensity: Any = None,
        *,
        candidates: Any = None,
        action_features: Any = None,
        sample_weight: Any = None,
    ) -> Self:
        """Learn the policy from logged bandit feedback.

        Parameters
        ----------
        X : array-like of shape (n, n_features)
            Context features of the logged rows.
        y : array-like of shape (n,)
            The logged actions (labels: int or str).
        reward : array-like of shape (n,)
            Observed rewards, inside ``reward_range``.
        propensity : array-like of shape (n,)
            Logging probability of the logged action, in (0, 1].
        candidates : Arrow list column, sequence of sequences, or bool array, optional
            Each row's candidate actions (a null entry means all actions); the logged action must
            be among them. A boolean mask has one column per action in sorted-label order.
            Without candidates every row may take every action seen in fit.
        action_features : table or 2-D array, optional
            Features of the actions: a pyarrow/pandas table with an ``action`` column and
            numeric feature columns (one row per action; every logged or candidate action
            needs one), or an array whose row ``a`` describes the integer action ``a``. With
            ``action_model="auto"`` they switch the score to the bilinear form.
        sample_weight : array-like of shape (n,), optional
            Sampling (Horvitz-Thompson) weights: row ``i`` was kept with probability
            ``1 / s_i`` (DSJSON: ``s = 1 / (1 - pdrop)``) and stands for ``s_i`` events of the
            logged population. The objective becomes the Hajek-weighted estimate of the policy's
            value on that population (see Notes), the feature standardization and the
            ``"auto"`` clip level are weighted, and the ``select="validation"`` score is the
            Hajek-weighted IPS value. Finite and > 0; all 1 (or None) is the unweighted fit.

        Returns
        -------
        self
        """
        reward_range = required_reward_range(self.reward_range)
        l2_penalty = _non_negative(self.l2_penalty, "l2_penalty", DEFAULT_L2_PENALTY)
        max_iter = check_positive_int(self.max_iter, "max_iter", example="max_iter=500")
        tol = _non_negative(self.tol, "tol", 1e-6)
        kind = self._model_kind(action_features)
        objective, penalty, max_weight_spec, select = self._objective_settings()
        seed, gen = self._split_rng()
        catalog = _catalog(action_features) if kind == "features" else None
        data = _validate_fit_inputs(
            self, X, y, reward, propensity, candidates, reward_range, catalog, sample_weight
        )
        max_weight = _resolve_max_weight(max_weight_spec, data.p, data.s)
        features = None
        if kind == "features":
            features = _action_feature_matrix(action_features, data.classes)
        self.classes_ = data.classes
        self.full_information_ = data.full_information
        self.action_model_ = kind
        self.seed_ = seed
        self.__dict__.pop("selection_results_", None)  # from an earlier fit with selection
        if select == "validation":
            penalty, max_weight, self.selection_results_ = self._select(
                data, features, gen, objective, penalty, max_weight
            )
        std, fstd, model, problem = self._prepare(
            data.X, data.support, data.action, data.r01, data.p, features, data.s
        )
        theta, n_iter = _fit_softmax(
            problem,
            model,
            objective=objective,
            variance_penalty=penalty,
            max_weight=max_weight,
            l2_penalty=l2_penalty,
            max_iter=max_iter,
            tol=tol,
            desc=f"{type(self).__name__}: L-BFGS",
        )
        self._std = std
        self._W, self._b = model.full(theta)
        self.coef_, self.intercept_ = std.raw_coefficients(self._W, self._b)
        if isinstance(model, _Bilinear):
            self.action_coef_ = theta.reshape(-1, model.m).copy()
            self.action_feature_center_ = fstd.center * fstd.unit
            self.action_feature_scale_ = fstd.scale * fstd.unit
        else:
            self.__dict__.pop("action_coef_", None)
        self.n_iter_ = n_iter
        self.max_weight_ = max_weight
        self.variance_penalty_ = penalty
        # the learned policy's value on the training rows
        layout = problem.layout
        P = layout.softmax(layout.scores(*model.unpack(theta)))
        w = P.reshape(-1)[problem.logged] / data.p
        wbar = w if max_weight is None else np.minimum(w, max_weight)
        bound, (estimate, se), _ = penalized_value(wbar, data.r01, objective, penalty, data.s)
        if not np.isfinite(se):
            warnings.warn(
                f"fitted on {wbar.size} row(s): fewer than {MIN_ROWS} rows give no standard "
                "error, so value_std_error_ is inf and value_lower_bound_ is the bottom of "
                "reward_range.",
                SmallSampleWarning,
                stacklevel=2,
            )
        low, high = reward_range
        self.value_estimate_ = in_reward_units(estimate, reward_range)
        self.value_std_error_ = (high - low) * se if np.isfinite(se) else float("inf")
        self.value_lower_bound_ = in_reward_units(reported_bound(bound, se), reward_range)
        return self

    def _model_kind(self, action_features: Any) -> str:
        mode = getattr(self, "action_model", "auto")
        if mode not in _ACTION_MODELS:
            raise ParameterError(
                f"action_model must be one of {', '.join(map(repr, _ACTION_MODELS))}; got {mode!r}."
            )
        if mode == "features" and action_features is None:
            raise ParameterError(
                "action_model='features' scores actions through their features: pass "
                "fit(..., action_features=...) (a table with an `action` column)."
            )
        if mode == "per_action" and action_features is not None:
            raise ParameterError(
                "action_model='per_action' gives each action its own weights and does not use "
                "action_features; drop them, or use action_model='auto' or 'features'."
            )
        return "features" if action_features is not None else "per_action"

    def _prepare(
        self,
        X: npt.NDArray[np.float64],
        support: Support,
        action: npt.NDArray[np.intp],
        r01: npt.NDArray[np.float64],
        p: npt.NDArray[np.float64],
        features: npt.NDArray[np.float64] | None,
        s: npt.NDArray[np.float64] | None = None,
    ) -> tuple[Standardizer, Standardizer, _Model, _Problem]:
        """Standardize the rows (and action features), and set up the model and its problem
        (the rows' sampling weights ``s`` weight both)."""
        intercept = bool(self.fit_intercept)
        std = Standardizer.fit(X, center=intercept, sample_weight=s)
        XsT = std.transform_t(X)
        d = X.shape[1]
        if features is None:
            fstd = Standardizer.identity(0)
            k = support.n_actions
            seen = np.zeros(k, dtype=bool)
            seen[action] = True
            logged = np.flatnonzero(seen)
            model: _Model = _PerAction(logged.size, d, intercept, logged, k)
            if logged.size < k:  # actions never logged: out of the fit (they score -inf)
                support = support.restrict(seen)
                action = (np.cumsum(seen) - 1)[action]
        else:
            # centering the action features shifts every candidate's score of a row by the same
            # amount, which the softmax ignores: always free
            fstd = Standardizer.fit(features, center=True)
            model = _Bilinear(
                np.ascontiguousarray(fstd.transform_t(features, ones=False).T), d, intercept
            )
        return std, fstd, model, _problem(XsT, support, action, r01, p, s)

    def _select(
        self,
        data: _FitData,
        features: npt.NDArray[np.float64] | None,
        gen: np.random.Generator,
        objective: str,
        penalty: float,
        max_weight: float | None,
    ) -> tuple[float, float | None, list[dict[str, Any]]]:
        """Choose ``(variance_penalty, max_weight)`` by unclipped IPS on a held-out split."""
        n = data.X.shape[0]
        fraction = float(self.validation_fraction)  # checked by _objective_settings
        n_val = int(round(n * fraction))
        if n_val < 1 or n - n_val < 2:
            raise ValidationError(
                f"select='validation' needs at least 2 training and 1 validation row; got {n} rows "
                f"with validation_fraction={fraction}. Use more data or select=None."
            )
        perm = gen.permutation(n)
        val, tr = perm[:n_val], perm[n_val:]
        weights = (
            (None,)
            if max_weight is None
            else tuple(max(1.0, f * max_weight) for f in SELECTION_MAX_WEIGHT_FACTORS)
        )
        s_tr = None if data.s is None else data.s[tr]
        std, _, model, problem = self._prepare(
            data.X[tr],
            data.support.take(tr),
            data.action[tr],
            data.r01[tr],
            data.p[tr],
            features,
            s_tr,
        )
        val_support = data.support.take(val)
        val_layout = make_layout(std.transform_t(data.X[val]), val_support, fit=False)
        val_logged = val_layout.native(val_support.position(data.action[val]))
        reward_range = required_reward_range(self.reward_range)
        grid = [
            (factor, m)
            for factor in sorted(SELECTION_PENALTY_FACTORS, reverse=True)
            for m in weights
        ]
        results: list[dict[str, Any]] = []
        for i, (factor, m) in enumerate(grid):  # loop over grid points, not rows
            theta, _ = _fit_softmax(
                problem,
                model,
                objective=objective,
                variance_penalty=factor * penalty,
                max_weight=m,
                l2_penalty=float(self.l2_penalty),
                max_iter=int(self.max_iter),
                tol=float(self.tol),
                desc=f"select {i + 1}/{len(grid)}: L-BFGS",
            )
            P = val_layout.softmax(val_layout.scores(*model.full(theta)))
            w = P.reshape(-1)[val_logged] / data.p[val]
            # unclipped IPS on the held-out rows; Hajek-weighted when they carry sampling weights
            score = in_reward_units(
                float(
                    np.average(data.r01[val] * w, weights=None if data.s is None else data.s[val])
                ),
                reward_range,
            )
            results.append(
                {"variance_penalty": factor * penalty, "max_weight": m, "validation_ips": score}
            )
        # most conservative setting first, so ties go to it
        best = max(range(len(results)), key=lambda i: (results[i]["validation_ips"], -i))
        return results[best]["variance_penalty"], results[best]["max_weight"], results

    # -- prediction --------------------------------------------------------------------------
    def _block_values(self, X: npt.NDArray[np.float64], support: Support) -> Any:
        check_is_fitted(self, "coef_")
        layout = make_layout(self._std.transform_t(X), support, fit=False)
        return layout.csr(layout.softmax(layout.scores(self._W, self._b)))


class ConservativePolicyLearner(_SoftmaxPolicyLearner):
    r"""Learn a linear softmax policy by maximizing a lower bound of its value (CRM / POEM).

    Parameters
    ----------
    objective : {"clipped_ips", "self_normalized"}, default="clipped_ips"
        The value estimate whose lower bound is maximized: clipped IPS (POEM) or the
        self-normalized estimate (Norm-POEM).
    variance_penalty : float, default=1.6448536269514722
        :math:`\lambda`, how many standard errors are subtracted from the estimate. The default,
        the one-sided 95% normal quantile, makes the maximized objective an (in-sample,
        approximate) 95% lower confidence bound. 0 gives plain (clipped) IPS maximization.
    max_weight : float, "auto" or None, default="auto"
        Clip level :math:`M` of the weights :math:`\pi(a|x)/p`. ``"auto"`` is
        :math:`1/q_{0.10}(p)`, the inverse of the 10th percentile of the logged propensities:
        a deterministic policy keeps its full weight on the 90% of rows whose logged action was
        not rarer than that. ``None`` disables clipping.
    l2_penalty : float, default=1e-3
        L2 penalty :math:`\tfrac{c}{2}\lVert W\rVert^2` on the weights of standardized features
        (intercepts are not penalized).
    reward_range : tuple of float, default=(0.0, 1.0)
        A priori range of the rewards; rewards outside it are an error. The objective works with
        the translated reward :math:`(r - r_{lo})/(r_{hi} - r_{lo}) \in [0, 1]`.
    action_model : {"auto", "per_action", "features"}, default="auto"
        How an action is scored: ``"per_action"``, its own weights :math:`W_a\cdot x + b_a`
        (``n_actions * (n_features + 1)`` parameters); ``"features"``, a bilinear form of the
        context and the action's features, :math:`[x, 1]^\top A f_a` (``(n_features + 1) *
        n_action_features`` parameters, whatever the catalog's size, and shared by every
        action); ``"auto"``, ``"features"`` when ``fit`` receives ``action_features``.
    select : {None, "validation"}, default=None
        ``"validation"`` holds out ``validation_fraction`` of the rows, fits a small grid
        (``variance_penalty`` times 0, 0.25, 1, 4; ``max_weight`` times 0.5, 1, 2), keeps the
        setting with the best unclipped IPS value on the held-out rows (as POEM does) and refits
        on all rows.
    validation_fraction : float, default=0.25
        Held-out share for ``select="validation"``.
    fit_intercept : bool, default=True
        Learn a per-action intercept :math:`b_a` (with ``action_model="features"``: the
        context-free term :math:`c^\top f_a`).
    max_iter : int, default=500
        L-BFGS-B iterations (a progress bar on a terminal's stderr counts them).
    tol : float, default=1e-6
        L-BFGS-B stops when the projected gradient is below ``tol`` or the relative decrease
        of the objective is below ``0.01 * tol``.
    rng : int, numpy.random.Generator or None, default=None
        Randomness of the validation split (``select="validation"`` only). With None a seed is
        drawn (:func:`ope._validation.resolve_seed`) and recorded as ``seed_``: refitting with
        ``rng=learner.seed_`` reproduces the fit exactly.

    Attributes
    ----------
    classes_ : ndarray of shape (n_actions,)
        Action labels (sorted): the logged actions plus any that appear only in ``candidates``.
    coef_ : ndarray of shape (n_actions, n_features)
        Each action's weights on the scale of the raw features (with action features: the
        weights the bilinear form gives each action).
    intercept_ : ndarray of shape (n_actions,)
        The scores' intercepts on the raw scale; ``-inf`` (per-action scores) for an action
        that no training row logged: no row says anything about it, and the objective only
        gains as its probability shrinks, so the policy gives it none (unless a row's
        candidates are all such actions: then it is uniform over them).
    action_coef_ : ndarray of shape (n_features + fit_intercept, n_action_features)
        With action features only: :math:`A` on standardized context and action features
        (standardized with ``action_feature_center_`` and ``action_feature_scale_``).
    action_model_ : {"per_action", "features"}
        The score used.
    value_estimate_ : float
        Estimate (clipped IPS or self-normalized) of the learned policy's value on the training
        rows, in reward units (a Hajek ratio on the logged population with ``sample_weight``).
    value_std_error_ : float
        Its standard error (``inf`` when fitted on fewer than 2 rows).
    value_lower_bound_ : float
        The maximized objective, ``value_estimate_ - variance_penalty_ * value_std_error_``,
        restricted to ``reward_range`` (no value lies outside it; one row gives its bottom).
        In-sample, hence optimistic: certify on held-out rows with :class:`SafetyGate`.
    max_weight_ : float or None
        The clip level used.
    variance_penalty_ : float
        The variance penalty used (differs from ``variance_penalty`` after selection).
    selection_results_ : list of dict
        With ``select="validation"``: each grid point and its validation IPS value.
    seed_ : int or None
        The seed of the validation split (drawn when ``rng=None``; None for a Generator).
    full_information_ : bool
        True when fitted as ``fit(X, y)`` (supervised labels; see Notes).
    n_iter_ : int
        L-BFGS-B iterations run.
    n_features_in_ : int
        Number of context features.
    context_columns_ : tuple of str
        The log columns of the features, in order, when fitted from logs (``fit_logs``,
        :func:`ope.learning.learn_from_logs`); :func:`ope.learning.learner_policy_table`
        refuses other columns. Absent after ``fit`` on arrays.

    Notes
    -----
    The policy is :math:`\pi_\theta(a|x) = \exp(s_\theta(x, a))/\sum_{a'\in C(x)}
    \exp(s_\theta(x, a'))` over the row's candidate set :math:`C(x)` (every action seen in fit
    without ``candidates``), with the score :math:`s = W_a\cdot x + b_a` or, with action
    features, :math:`s = [x, 1]^\top A f_a`. With translated rewards
    :math:`\tilde r_i\in[0,1]`, weights :math:`w_i = \pi_\theta(a_i|x_i)/p_i` and
    :math:`\bar w_i = \min(w_i, M)`, ``objective="clipped_ips"`` maximizes

    .. math:: \hat V^M(\theta) - \lambda\sqrt{\widehat{\mathrm{Var}}(u)/n}
              - \tfrac c2\lVert W\rVert^2, \qquad u_i = \tilde r_i\bar w_i,\quad \hat V^M = \bar u,

    which is POEM's objective (Swaminathan & Joachims 2015, eq. 7) with losses
    :math:`\delta_i = -\tilde r_i \in [-1, 0]`. The translation matters: with non-negative
    losses a policy would score best by avoiding the logged actions; with rewards translated to
    be non-negative, clipping can only lower the estimate, so :math:`r_{lo} + (r_{hi}-r_{lo})
    \hat V^M` is a pessimistic estimate of :math:`V(\pi)`. ``objective="self_normalized"``
    maximizes :math:`\hat V_{SN} - \lambda\hat\sigma_{SN}` with
    :math:`\hat V_{SN} = \sum_i\tilde r_i\bar w_i/\sum_i\bar w_i` and
    :math:`\hat\sigma_{SN}^2 = \sum_i(\tilde r_i-\hat V_{SN})^2\bar w_i^2/(\sum_i\bar w_i)^2`
    (Swaminathan & Joachims 2015b), which is invariant to translating the reward. The mean and
    variance come from the package's moment kernel (:func:`ope.moments.centered_moments`).

    **Sampling weights.** With ``fit(..., sample_weight=s)`` (row :math:`i` kept with
    probability :math:`1/s_i`, e.g. DSJSON's ``1/(1 - pdrop)``) the objective estimates the
    value on the logged population by Hajek ratios, as every estimator of
    :mod:`ope.estimators` does: ``"clipped_ips"`` maximizes :math:`\hat V^M_s -
    \lambda\hat\sigma_s` with :math:`\hat V^M_s = \sum_i s_i u_i/\sum_i s_i` and
    :math:`\hat\sigma_s^2 = \widehat{\mathrm{Var}}(\psi)/n`, :math:`\psi_i = s_i(u_i -
    \hat V^M_s)/\bar s` (the linearized standard error); ``"self_normalized"`` uses the products
    :math:`s_i\bar w_i` in place of :math:`\bar w_i`. The gradient is that of these ratios
    (:func:`ope.learning._common.weighted_penalized_value`). For integer weights the
    estimate, hence the objective with ``variance_penalty=0``, is that of the rows repeated
    :math:`s_i` times (the standard error is not: repeats are not independent rows).

    Gradients are analytic: :math:`\partial\log\pi(a_i|x_i)/\partial s(x_i, b) =
    1[a_i=b] - \pi(b|x_i)` for the row's candidates :math:`b`, zero for clipped rows. The
    scores and probabilities exist only for (row, candidate) pairs: an action-major
    ``(n_actions, n)`` block without candidate sets (both products are BLAS calls), a flat
    array of the candidates with them (gathered scores and ``bincount`` gradients for a
    large catalog). With per-action scores the fit has weights only for the actions some
    training row logged (the others score :math:`-\infty`, see ``intercept_``). L-BFGS-B
    starts from the uniform policy (the objective is not convex) and also stops once ten
    iterations together gained less than 1% of the estimate's standard error. Features are
    standardized internally (in units of a power of two near each column's
    largest magnitude, so features near 1e308 stay finite) and ``coef_`` is reported on the
    raw scale.

    scikit-learn API: ``fit(X, y, reward, propensity, *, candidates=None,
    action_features=None)`` with ``y`` the logged actions, so ``fit(X, action, reward,
    propensity)`` works positionally. ``predict_proba`` is the stochastic policy (dense,
    ``(n, n_actions)``), ``predict_candidates`` the same on each row's candidates in long
    format, ``predict`` its greedy version, and ``score`` (accuracy) is the value of the greedy
    policy when ``y`` holds the one rewarded action.

    Called as ``fit(X, y)`` without ``reward`` and ``propensity`` (as scikit-learn's generic tools
    do), the rows are read as full-information supervised data: ``y`` is the one action that earns
    the top of ``reward_range`` while every other candidate earns the bottom. Internally each
    row becomes one logged row per candidate action with propensity ``1 / n_candidates`` (a
    uniform logger that tried everything), so the objective is the policy's expected reward
    ``mean_i pi(y_i | x_i)``: the learner is then a classifier.
    Every check of ``sklearn.utils.estimator_checks`` applies and passes (scikit-learn itself
    skips ``check_array_api_input`` unless ``SCIPY_ARRAY_API=1``; the learners compute with
    numpy only) except ``check_sample_weight_equivalence_on_dense_data``: ``sample_weight``
    holds sampling weights, which are > 0, and the check's zero weights are refused.

    References
    ----------
    .. [1] A. Swaminathan and T. Joachims, "Batch learning from logged bandit feedback through
       counterfactual risk minimization", JMLR 16:1731-1755, 2015 (ICML 2015: "Counterfactual
       risk minimization: learning from logged bandit feedback").
    .. [2] A. Swaminathan and T. Joachims, "The self-normalized estimator for counterfactual
       learning", NeurIPS 2015.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.learning import ConservativePolicyLearner
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(2000, 3))
    >>> best = (X[:, 0] > 0).astype(int)           # action 1 pays when x0 > 0
    >>> action = rng.integers(0, 2, size=2000)      # uniform logging
    >>> reward = (action == best).astype(float)
    >>> learner = ConservativePolicyLearner().fit(X, action, reward, np.full(2000, 0.5))
    >>> learner.predict_proba(X[:2]).shape
    (2, 2)
    >>> bool(learner.value_lower_bound_ > 0.8)
    True
    """

    def __init__(
        self,
        *,
        objective: Literal["clipped_ips", "self_normalized"] = "clipped_ips",
        variance_penalty: float = DEFAULT_VARIANCE_PENALTY,
        max_weight: float | Literal["auto"] | None = "auto",
        l2_penalty: float = DEFAULT_L2_PENALTY,
        reward_range: tuple[float, float] = (0.0, 1.0),
        action_model: ActionModel = "auto",
        select: Literal["validation"] | None = None,
        validation_fraction: float = DEFAULT_VALIDATION_FRACTION,
        fit_intercept: bool = True,
        max_iter: int = 500,
        tol: float = 1e-6,
        rng: int | np.random.Generator | None = None,
    ) -> None:
        self.objective = objective
        self.variance_penalty = variance_penalty
        self.max_weight = max_weight
        self.l2_penalty = l2_penalty
        self.reward_range = reward_range
        self.action_model = action_model
        self.select = select
        self.validation_fraction = validation_fraction
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.tol = tol
        self.rng = rng

    def _objective_settings(self) -> tuple[str, float, Any, str | None]:
        if self.objective not in ("clipped_ips", "self_normalized"):
            raise ParameterError(
                f"objective must be 'clipped_ips' or 'self_normalized', got {self.objective!r}."
            )
        penalty = _non_negative(self.variance_penalty, "variance_penalty", DEFAULT_VARIANCE_PENALTY)
        if self.select not in (None, "validation"):
            raise ParameterError(f"select must be None or 'validation', got {self.select!r}.")
        fraction = check_real(
            self.validation_fraction, "validation_fraction", example="validation_fraction=0.25"
        )
        if not 0.0 < fraction < 1.0:
            raise ParameterError(
                f"`validation_fraction` must be in (0, 1), got {self.validation_fraction!r}."
            )
        return self.objective, penalty, self.max_weight, self.select


class IPSPolicyLearner(_SoftmaxPolicyLearner):
    r"""Linear softmax policy maximizing the plain IPS estimate (no clipping, no variance penalty).

    The baseline that :class:`ConservativePolicyLearner` improves on: it maximizes
    :math:`\frac1n\sum_i\tilde r_i\,\pi_\theta(a_i|x_i)/p_i - \tfrac c2\lVert W\rVert^2`.
    Without a penalty it chases rows with small logged propensities ("propensity overfitting").

    Parameters
    ----------
    l2_penalty : float, default=1e-3
        L2 penalty on the weights of standardized features.
    reward_range : tuple of float, default=(0.0, 1.0)
        A priori range of the rewards (used to translate them to [0, 1]).
    action_model : {"auto", "per_action", "features"}, default="auto"
        As in :class:`ConservativePolicyLearner`.
    fit_intercept : bool, default=True
        Learn a per-action intercept.
    max_iter : int, default=500
        L-BFGS-B iterations.
    tol : float, default=1e-6
        L-BFGS-B stops when the projected gradient is below ``tol`` or the relative decrease
        of the objective is below ``0.01 * tol``.

    Attributes
    ----------
    classes_, coef_, intercept_, action_coef_, action_model_, value_estimate_, value_std_error_,
    value_lower_bound_, n_iter_, n_features_in_, context_columns_, full_information_, seed_
        As in :class:`ConservativePolicyLearner`; ``max_weight_`` is None and
        ``variance_penalty_`` is 0, so ``value_lower_bound_ == value_estimate_`` (the in-sample
        IPS estimate of the learned policy) unless that estimate lies outside
        ``reward_range``, where the bound stops at its edge. ``seed_`` is None: nothing is
        random.

    Notes
    -----
    Same model, API and gradient as :class:`ConservativePolicyLearner` with
    ``variance_penalty=0`` and ``max_weight=None``. With ``reward_range[0] = 0`` the objective
    is exactly the IPS estimate :math:`\frac1n\sum_i r_i w_i`. ``fit(X, y)`` without
    ``reward`` and ``propensity`` reads full-information labels, and the scikit-learn estimator
    checks pass, as described there.

    References
    ----------
    .. [1] A. Swaminathan and T. Joachims, "Batch learning from logged bandit feedback through
       counterfactual risk minimization", JMLR 16:1731-1755, 2015.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.learning import IPSPolicyLearner
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 2))
    >>> action = rng.integers(0, 2, size=500)
    >>> reward = (action == (X[:, 0] > 0)).astype(float)
    >>> learner = IPSPolicyLearner().fit(X, action, reward, np.full(500, 0.5))
    >>> pi = learner.target_propensity(X, action)
    >>> bool(np.isclose(learner.value_estimate_, np.mean(reward * pi / 0.5)))
    True
    """

    def __init__(
        self,
        *,
        l2_penalty: float = DEFAULT_L2_PENALTY,
        reward_range: tuple[float, float] = (0.0, 1.0),
        action_model: ActionModel = "auto",
        fit_intercept: bool = True,
        max_iter: int = 500,
        tol: float = 1e-6,
    ) -> None:
        self.l2_penalty = l2_penalty
        self.reward_range = reward_range
        self.action_model = action_model
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.tol = tol

    def _objective_settings(self) -> tuple[str, float, Any, str | None]:
        return "clipped_ips", 0.0, None, None

    def _split_rng(self) -> tuple[int | None, np.random.Generator]:
        return None, np.random.default_rng(0)  # no split: nothing random, nothing to record


class DirectMethodPolicyLearner(_LearnedPolicy):
    r"""Greedy policy on a per-action ridge regression of the reward (the direct method).

    Parameters
    ----------
    l2_penalty : float, default=1.0
        Ridge penalty :math:`\alpha` on standardized features, per action.
    reward_range : tuple of float, default=(0.0, 1.0)
        A priori range of the rewards; rewards outside it are an error.

    Attributes
    ----------
    classes_ : ndarray of shape (n_actions,)
        Action labels (sorted), including actions that appear only in ``candidates``.
    coef_ : ndarray of shape (n_actions, n_features)
        Per-action regression coefficients on the raw feature scale.
    intercept_ : ndarray of shape (n_actions,)
        Per-action intercepts; ``-inf`` for actions never logged, which the policy never picks
        while a logged action is among the candidates.
    n_logged_ : ndarray of shape (n_actions,)
        Rows logged per action.
    value_estimate_ : float
        In-sample direct-method estimate :math:`\frac1n\sum_i\hat q(x_i,\pi(x_i))`
        (:math:`\sum_i s_i\hat q(x_i,\pi(x_i))/\sum_i s_i` with ``sample_weight``).
    n_features_in_ : int
        Number of context features.
    context_columns_ : tuple of str
        The log columns of the features, in order, when fitted from logs (``fit_logs``,
        :func:`ope.learning.learn_from_logs`); :func:`ope.learning.learner_policy_table`
        refuses other columns. Absent after ``fit`` on arrays.

    Notes
    -----
    For each action :math:`a`, :math:`\hat q(x, a) = \hat\beta_a\cdot x + \hat c_a` minimizes
    :math:`\sum_{i: a_i=a}(r_i - \beta\cdot x_i - c)^2 + \alpha\lVert\beta\rVert^2` (features
    standardized); the policy is :math:`\pi(x) = \arg\max_{a\in C(x)}\hat q(x, a)`, ties to the
    first label. ``propensity`` is accepted so that every learner shares one ``fit`` signature;
    it is validated but the direct method does not use it. With sampling weights
    :math:`s_i` (``sample_weight``; row :math:`i` stands for :math:`s_i` logged events) each
    ridge minimizes :math:`\sum_{i: a_i=a}s_i(r_i - \beta\cdot x_i - c)^2 +
    \alpha\lVert\beta\rVert^2` on features standardized with the weighted mean and spread,
    and ``value_estimate_`` is the Hajek mean :math:`\sum_i s_i\hat q(x_i,\pi(x_i))/\sum_i
    s_i`: for integer weights, the fit on the rows repeated :math:`s_i` times. The greedy
    policy inherits every
    error of the reward model and has no variance control (Dudík, Langford & Li 2011 discuss
    its bias). Scores are formed for each row's candidates only, as for the softmax learners.

    Called as ``fit(X, y)`` without ``reward`` and ``propensity``, ``y`` is a full-information
    label: each action's reward is known (top of ``reward_range`` for ``y``, bottom for the
    others), and every action's ridge is fitted on all rows.

    Every check of ``sklearn.utils.estimator_checks`` applies and passes (scikit-learn itself
    skips ``check_array_api_input`` unless ``SCIPY_ARRAY_API=1``; the learners compute with
    numpy only) except ``check_sample_weight_equivalence_on_dense_data``: ``sample_weight``
    holds sampling weights, which are > 0, and the check's zero weights are refused.

    References
    ----------
    .. [1] M. Dudík, J. Langford and L. Li, "Doubly robust policy evaluation and learning",
       ICML 2011.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.learning import DirectMethodPolicyLearner
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 2))
    >>> action = rng.integers(0, 2, size=500)
    >>> reward = (action == (X[:, 0] > 0)).astype(float)
    >>> dm = DirectMethodPolicyLearner().fit(X, action, reward, np.full(500, 0.5))
    >>> dm.predict(np.array([[2.0, 0.0], [-2.0, 0.0]])).tolist()
    [1, 0]
    """

    def __init__(
        self, *, l2_penalty: float = 1.0, reward_range: tuple[float, float] = (0.0, 1.0)
    ) -> None:
        self.l2_penalty = l2_penalty
        self.reward_range = reward_range

    def fit(
        self,
        X: Any,
        y: Any,
        reward: Any = None,
        propensity: Any = None,
        *,
        candidates: Any = None,
        sample_weight: Any = None,
    ) -> DirectMethodPolicyLearner:
        """Fit the per-action reward model (arguments as in ``ConservativePolicyLearner.fit``;
        with ``sample_weight`` the ridge regressions and the standardization are weighted by
        the rows' sampling weights, see Notes)."""
        reward_range = required_reward_range(self.reward_range)
        check_positive_real(
            self.l2_penalty, "l2_penalty", example="l2_penalty=1.0", what="the ridge penalty"
        )
        data = _validate_fit_inputs(
            self, X, y, reward, propensity, candidates, reward_range, sample_weight=sample_weight
        )
        X, action, r01, sw = data.X, data.action, data.r01, data.s
        classes = data.classes
        n, d = X.shape
        k = classes.size
        std = Standardizer.fit(X, center=True, sample_weight=sw)
        XsT = std.transform_t(X)
        alpha = float(self.l2_penalty)
        beta = np.zeros((k, d))
        c = np.full(k, -np.inf)
        counts = np.bincount(action, minlength=k)
        reward = in_reward_units(r01, reward_range)
        order = np.argsort(action, kind="stable")
        bounds = np.concatenate([[0], np.cumsum(counts)])
        for j in np.flatnonzero(counts):  # loop over actions, not rows
            rows = order[bounds[j] : bounds[j + 1]]
            Xa, ra = XsT[:d, rows].T, reward[rows]
            if sw is None:
                xbar, rbar = Xa.mean(axis=0), ra.mean()
                Xc = Xa - xbar
                beta[j] = np.linalg.solve(Xc.T @ Xc + alpha * np.eye(d), Xc.T @ (ra - rbar))
            else:  # weighted ridge: sum s (r - beta x - c)^2 + alpha |beta|^2
                sa = sw[rows]
                xbar, rbar = sa @ Xa / sa.sum(), float(sa @ ra) / float(sa.sum())
                Xc = Xa - xbar
                sXc = Xc * sa[:, None]
                beta[j] = np.linalg.solve(sXc.T @ Xc + alpha * np.eye(d), sXc.T @ (ra - rbar))
            c[j] = rbar - beta[j] @ xbar
        self.classes_ = classes
        finite = np.isfinite(c)
        coef, intercept = std.raw_coefficients(beta, np.where(finite, c, 0.0))
        self.coef_ = coef
        self.intercept_ = np.where(finite, intercept, -np.inf)
        self._std, self._beta, self._c = std, beta, c
        self.n_logged_ = counts
        self.full_information_ = data.full_information
        layout = make_layout(XsT, data.support, fit=False)
        q = layout.scores(beta, c)
        self.value_estimate_ = float(np.average(layout.row_max(q), weights=sw))
        return self

    def predict_reward(self, X: Any) -> npt.NDArray[np.float64]:
        """Predicted reward :math:`\\hat q(x, a)`, shape ``(n, n_actions)`` (-inf: never logged)."""
        check_is_fitted(self, "coef_")
        X = _validate_X(self, X, reset=False)
        q = X @ self.coef_.T
        q += self.intercept_
        return q

    def _block_values(self, X: npt.NDArray[np.float64], support: Support) -> Any:
        """The greedy policy on the block's candidates: 1 on each row's best, else 0."""
        check_is_fitted(self, "coef_")
        layout = make_layout(self._std.transform_t(X), support, fit=False)
        q = layout.csr(layout.scores(self._beta, self._c))
        # candidates that were never logged score -inf; pick the first candidate then
        q = np.where(np.isneginf(q), np.finfo(np.float64).min, q)
        values = np.zeros_like(q)
        values[_row_argmax(support, q)] = 1.0
        return values
