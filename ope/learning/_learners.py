"""Policy learners from logged bandit feedback, with the scikit-learn estimator API.

``ConservativePolicyLearner`` maximizes a lower bound of a linear softmax policy's value
(counterfactual risk minimization); ``IPSPolicyLearner`` maximizes the plain IPS estimate;
``DirectMethodPolicyLearner`` regresses the reward and acts greedily.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from typing import Any, Final, Literal, Self

import numpy as np
import numpy.typing as npt
from scipy.optimize import minimize
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data
from threadpoolctl import threadpool_limits

from ope._validation import check_max_weight, check_rng
from ope.exceptions import ParameterError, ValidationError
from ope.learning._columns import fit_logs
from ope.learning._common import (
    candidate_lists,
    candidate_mask,
    check_propensity,
    check_reward,
    encode_actions,
    penalized_value,
    policy_objective,
    required_reward_range,
    row_list,
    softmax_logits,
)

__all__ = ["ConservativePolicyLearner", "IPSPolicyLearner", "DirectMethodPolicyLearner"]

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

#: below this many multiply-adds per objective evaluation (rows x features x actions) the
#: optimizer runs with a single BLAS thread: thread start-up costs more than the work
SINGLE_THREAD_WORK: Final = 5_000_000

#: L-BFGS-B also stops when the objective (a mean, of order 1) improves by less than this
#: multiple of ``tol`` in relative terms: clipping puts kinks in the objective at which the
#: gradient never becomes small, and the value has long stopped changing there
FTOL_PER_TOL: Final = 0.01

#: ``select="validation"`` grid: multiples of ``variance_penalty`` and of the clip level
SELECTION_PENALTY_FACTORS: Final = (0.0, 0.25, 1.0, 4.0)
SELECTION_MAX_WEIGHT_FACTORS: Final = (0.5, 1.0, 2.0)



def _validate_X(est: BaseEstimator, X: Any, *, reset: bool) -> npt.NDArray[np.float64]:
    """``validate_data`` with sklearn's messages kept, raised as ope's ``ValidationError``."""
    try:
        return validate_data(est, X, reset=reset, dtype=np.float64, accept_sparse=False)
    except NotFittedError:
        raise
    except ValueError as exc:
        raise ValidationError(f"X: {exc}") from exc


def _validate_fit_inputs(
    est: BaseEstimator,
    X: Any,
    y: Any,
    reward: Any,
    propensity: Any,
    candidates: Any,
    reward_range: tuple[float, float],
) -> tuple[
    npt.NDArray[np.float64],
    npt.NDArray[np.intp],
    npt.NDArray[np.float64],
    npt.NDArray[np.float64],
    npt.NDArray[np.bool_] | None,
    npt.NDArray[Any],
    bool,
]:
    """Validate everything ``fit`` receives; return normalized arrays.

    Returns ``(X, action_index, reward01, propensity, mask, classes, full_information)`` with the
    reward translated to ``(r - low) / (high - low)`` in [0, 1].
    """
    try:
        X, y = validate_data(est, X, y, dtype=np.float64, accept_sparse=False)
        check_classification_targets(y)
    except ValueError as exc:
        raise ValidationError(f"{exc}") from exc
    n = X.shape[0]
    low, high = reward_range
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
    if candidates is not None and not (
        isinstance(candidates, np.ndarray) and candidates.dtype == np.bool_
    ):
        _, labels, _ = candidate_lists(candidates, n)
        if labels.size:
            try:
                classes = np.union1d(classes, labels)
            except TypeError:
                raise ValidationError(
                    f"`candidates` labels (dtype {labels.dtype}) cannot be compared with the "
                    f"logged actions (dtype {np.asarray(y).dtype}); use one label type."
                ) from None
    mask = candidate_mask(candidates, classes, n)
    action = encode_actions(y, classes, what="y")
    if mask is not None:
        outside = ~mask[np.arange(n), action]
        if outside.any():
            raise ValidationError(
                f"the logged action is not among the row's `candidates` in {row_list(outside)}; "
                "a logger can only take one of its candidates. Check the join of the two columns."
            )
    if full_information:
        # Supervised labels carry every action's reward (top of the range for y, bottom for the
        # rest): the same information as logs of a uniform logger that tried each candidate once.
        rows, cols = np.nonzero(np.ones((n, classes.size), dtype=bool) if mask is None else mask)
        n_candidates = np.bincount(rows, minlength=n)
        X = X[rows]
        p = 1.0 / n_candidates[rows]
        r01 = (cols == action[rows]).astype(np.float64)
        action = cols.astype(np.intp, copy=False)
        mask = None if mask is None else mask[rows]
        return X, action, r01, p, mask, classes, full_information
    r01 = (r - low) / (high - low)
    return X, action, r01, p, mask, classes, full_information


class _LearnedPolicy(ClassifierMixin, BaseEstimator):
    """What every learner offers once fitted: ``fit_logs``, ``predict``, ``target_propensity``.

    Subclasses implement ``fit`` and ``predict_proba``.
    """

    classes_: npt.NDArray[Any]
    predict_proba: Callable[..., npt.NDArray[np.float64]]

    def fit_logs(self, logs: Any, *, context_columns: Any) -> Any:
        """Fit on validated :class:`ope.logs.BanditLogs`.

        Uses the columns ``action``, ``reward``, ``propensity``, the ``context_columns`` (numeric
        columns and/or one list column of features) and ``candidates`` when present.
        """
        return fit_logs(self, logs, context_columns=context_columns)

    def predict(self, X: Any, *, candidates: Any = None) -> npt.NDArray[Any]:
        """The most probable action of each row (the policy's greedy, deterministic version)."""
        proba = self.predict_proba(X, candidates=candidates)
        return self.classes_[np.argmax(proba, axis=1)]

    def target_propensity(
        self, X: Any, action: Any, *, candidates: Any = None
    ) -> npt.NDArray[np.float64]:
        """``pi(action_i | x_i)`` for given actions: the per-row vector IPS-type estimators use
        (for the greedy direct-method policy, 1 where its action equals ``action_i``, else 0)."""
        proba = self.predict_proba(X, candidates=candidates)
        idx = encode_actions(np.asarray(action), self.classes_, what="action")
        if idx.shape[0] != proba.shape[0]:
            raise ValidationError(f"`action` has {idx.shape[0]} rows but X has {proba.shape[0]}.")
        return proba[np.arange(proba.shape[0]), idx]


class _SoftmaxPolicyLearner(_LearnedPolicy):
    """Shared fit/predict of linear softmax policies; subclasses choose the objective."""

    def _objective_settings(self) -> tuple[str, float, Any, str | None]:
        """``(objective, variance_penalty, max_weight spec, select)`` from the hyperparameters."""
        raise AttributeError  # pragma: no cover - every subclass defines it

    # -- fitting -----------------------------------------------------------------------------
    def fit(
        self,
        X: Any,
        y: Any,
        reward: Any = None,
        propensity: Any = None,
        *,
        candidates: Any = None,
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

        Returns
        -------
        self
        """
        reward_range = required_reward_range(self.reward_range)
        if not (isinstance(self.l2_penalty, (int, float)) and self.l2_penalty >= 0):
            raise ParameterError(f"l2_penalty must be a number >= 0, got {self.l2_penalty!r}.")
        if not (isinstance(self.max_iter, (int, np.integer)) and self.max_iter >= 1):
            raise ParameterError(f"max_iter must be an integer >= 1, got {self.max_iter!r}.")
        X, action, r01, p, mask, classes, full_info = _validate_fit_inputs(
            self, X, y, reward, propensity, candidates, reward_range
        )
        objective, penalty, max_weight_spec, select = self._objective_settings()
        max_weight = _resolve_max_weight(max_weight_spec, p)
        self.classes_ = classes
        self.full_information_ = full_info
        self.__dict__.pop("selection_results_", None)  # from an earlier fit with selection
        if select == "validation":
            penalty, max_weight, self.selection_results_ = self._select(
                X, action, r01, p, mask, objective, penalty, max_weight
            )
        coef, intercept, n_iter = _fit_softmax(
            X, action, r01, p, mask, classes.size,
            objective=objective, variance_penalty=penalty, max_weight=max_weight,
            l2_penalty=float(self.l2_penalty), fit_intercept=bool(self.fit_intercept),
            max_iter=int(self.max_iter), tol=float(self.tol),
        )
        self.coef_ = coef
        self.intercept_ = intercept
        self.n_iter_ = n_iter
        self.max_weight_ = max_weight
        self.variance_penalty_ = penalty
        low, high = reward_range
        P = softmax_logits(X, coef, intercept, mask)
        pi = P[np.arange(X.shape[0]), action]
        w = pi / p
        wbar = w if max_weight is None else np.minimum(w, max_weight)
        bound, (estimate, se), _ = penalized_value(wbar, r01, objective, penalty)
        self.value_estimate_ = low + (high - low) * estimate
        self.value_std_error_ = (high - low) * se
        self.value_lower_bound_ = low + (high - low) * bound
        return self

    def _select(
        self,
        X: npt.NDArray[np.float64],
        action: npt.NDArray[np.intp],
        r01: npt.NDArray[np.float64],
        p: npt.NDArray[np.float64],
        mask: npt.NDArray[np.bool_] | None,
        objective: str,
        penalty: float,
        max_weight: float | None,
    ) -> tuple[float, float | None, list[dict[str, Any]]]:
        """Choose ``(variance_penalty, max_weight)`` by unclipped IPS on a held-out split."""
        n = X.shape[0]
        fraction = float(self.validation_fraction)
        if not 0.0 < fraction < 1.0:
            raise ParameterError(f"validation_fraction must be in (0, 1), got {fraction!r}.")
        n_val = int(round(n * fraction))
        if n_val < 1 or n - n_val < 2:
            raise ValidationError(
                f"select='validation' needs at least 2 training and 1 validation row; got {n} rows "
                f"with validation_fraction={fraction}. Use more data or select=None."
            )
        perm = check_rng(self.rng).permutation(n)
        val, tr = perm[:n_val], perm[n_val:]
        weights = (None,) if max_weight is None else tuple(
            max(1.0, f * max_weight) for f in SELECTION_MAX_WEIGHT_FACTORS
        )
        low, high = required_reward_range(self.reward_range)
        results: list[dict[str, Any]] = []
        for factor in sorted(SELECTION_PENALTY_FACTORS, reverse=True):
            for m in weights:
                coef, intercept, _ = _fit_softmax(
                    X[tr], action[tr], r01[tr], p[tr], None if mask is None else mask[tr],
                    self.classes_.size, objective=objective, variance_penalty=factor * penalty,
                    max_weight=m, l2_penalty=float(self.l2_penalty),
                    fit_intercept=bool(self.fit_intercept), max_iter=int(self.max_iter),
                    tol=float(self.tol),
                )
                P = softmax_logits(X[val], coef, intercept, None if mask is None else mask[val])
                w = P[np.arange(n_val), action[val]] / p[val]
                score = low + (high - low) * float(np.mean(r01[val] * w))
                results.append(
                    {"variance_penalty": factor * penalty, "max_weight": m,
                     "validation_ips": score}
                )
        # most conservative setting first, so ties go to it
        best = max(range(len(results)), key=lambda i: (results[i]["validation_ips"], -i))
        return results[best]["variance_penalty"], results[best]["max_weight"], results

    # -- prediction --------------------------------------------------------------------------
    def predict_proba(self, X: Any, *, candidates: Any = None) -> npt.NDArray[np.float64]:
        """Action probabilities ``pi(a | x)``, shape ``(n, n_actions)``, columns as ``classes_``.

        ``candidates`` (one list of actions per row, or a boolean mask) restricts each row's
        policy to its candidates; the others get probability exactly 0.
        """
        check_is_fitted(self, "coef_")
        X = _validate_X(self, X, reset=False)
        mask = candidate_mask(candidates, self.classes_, X.shape[0])
        return softmax_logits(X, self.coef_, self.intercept_, mask)


def _resolve_max_weight(spec: Any, propensity: npt.NDArray[np.float64]) -> float | None:
    """The clip level: ``None`` (no clipping), a number >= 1, or ``"auto"``."""
    if spec is None:
        return None
    if isinstance(spec, str):
        if spec != "auto":
            raise ParameterError(f"max_weight must be a number >= 1, None or 'auto', got {spec!r}.")
        return float(1.0 / np.quantile(propensity, MAX_WEIGHT_QUANTILE))
    clip = check_max_weight(spec)
    if clip is None or clip < 1.0:
        raise ParameterError(
            f"max_weight must be a number >= 1 (a weight pi/p below 1 would be clipped even for "
            f"the logging policy), None or 'auto'; got {spec!r}."
        )
    return clip


def _fit_softmax(
    X: npt.NDArray[np.float64],
    action: npt.NDArray[np.intp],
    r01: npt.NDArray[np.float64],
    p: npt.NDArray[np.float64],
    mask: npt.NDArray[np.bool_] | None,
    n_actions: int,
    *,
    objective: str,
    variance_penalty: float,
    max_weight: float | None,
    l2_penalty: float,
    fit_intercept: bool,
    max_iter: int,
    tol: float,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], int]:
    """L-BFGS-B on the penalized objective from the uniform policy; raw-scale coef/intercept."""
    n, d = X.shape
    if fit_intercept:
        center = X.mean(axis=0)
        scale = X.std(axis=0)
    else:
        center = np.zeros(d)
        scale = np.sqrt(np.mean(X * X, axis=0))
    scale[~(scale > 0)] = 1.0
    theta0 = np.zeros(n_actions * (d + 1))
    bounds = None
    if not fit_intercept:
        bounds = [(None, None)] * (n_actions * d) + [(0.0, 0.0)] * n_actions
    # L-BFGS-B's own BLAS calls act on tiny vectors; on small problems a multi-threaded BLAS
    # spends far more time synchronizing threads than computing, so use one thread there
    small = n * d * n_actions < SINGLE_THREAD_WORK
    with threadpool_limits(limits=1, user_api="blas") if small else contextlib.nullcontext():
        res = _minimize(
            X, action, r01, p, mask, n_actions, center, scale, theta0, bounds,
            objective=objective, variance_penalty=variance_penalty, max_weight=max_weight,
            l2_penalty=l2_penalty, max_iter=max_iter, tol=tol,
        )
    if not res.success and res.nit >= max_iter:
        warnings.warn(
            f"L-BFGS-B stopped after max_iter={max_iter} iterations without meeting tol={tol}; "
            "the policy is usable but may improve with a larger max_iter.",
            ConvergenceWarning,
            stacklevel=3,
        )
    W = res.x[: n_actions * d].reshape(n_actions, d)
    b = res.x[n_actions * d:]
    coef = W / scale
    intercept = b - coef @ center
    return coef, intercept, int(res.nit)


def _minimize(
    X: npt.NDArray[np.float64],
    action: npt.NDArray[np.intp],
    r01: npt.NDArray[np.float64],
    p: npt.NDArray[np.float64],
    mask: npt.NDArray[np.bool_] | None,
    n_actions: int,
    center: npt.NDArray[np.float64],
    scale: npt.NDArray[np.float64],
    theta0: npt.NDArray[np.float64],
    bounds: list[tuple[float | None, float | None]] | None,
    *,
    objective: str,
    variance_penalty: float,
    max_weight: float | None,
    l2_penalty: float,
    max_iter: int,
    tol: float,
) -> Any:
    return minimize(
        lambda t: policy_objective(
            t, X, action, r01, p, mask, n_actions=n_actions, center=center, scale=scale,
            objective=objective, variance_penalty=variance_penalty, max_weight=max_weight,
            l2_penalty=l2_penalty,
        ),
        theta0,
        jac=True,
        method="L-BFGS-B",
        bounds=bounds,
        options={"maxiter": max_iter, "gtol": tol, "ftol": FTOL_PER_TOL * tol},
    )


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
    select : {None, "validation"}, default=None
        ``"validation"`` holds out ``validation_fraction`` of the rows, fits a small grid
        (``variance_penalty`` times 0, 0.25, 1, 4; ``max_weight`` times 0.5, 1, 2), keeps the
        setting with the best unclipped IPS value on the held-out rows (as POEM does) and refits
        on all rows.
    validation_fraction : float, default=0.25
        Held-out share for ``select="validation"``.
    fit_intercept : bool, default=True
        Learn a per-action intercept :math:`b_a`.
    max_iter : int, default=500
        L-BFGS-B iterations.
    tol : float, default=1e-6
        L-BFGS-B stops when the projected gradient is below ``tol`` or the relative decrease
        of the objective is below ``0.01 * tol``.
    rng : int, numpy.random.Generator or None, default=None
        Randomness of the validation split (``select="validation"`` only).

    Attributes
    ----------
    classes_ : ndarray of shape (n_actions,)
        Action labels (sorted): the logged actions plus any that appear only in ``candidates``.
    coef_ : ndarray of shape (n_actions, n_features)
        :math:`W` on the scale of the raw features.
    intercept_ : ndarray of shape (n_actions,)
        :math:`b`.
    value_estimate_ : float
        Estimate (clipped IPS or self-normalized) of the learned policy's value on the training
        rows, in reward units.
    value_std_error_ : float
        Its standard error.
    value_lower_bound_ : float
        The maximized objective, ``value_estimate_ - variance_penalty_ * value_std_error_``.
        In-sample, hence optimistic: certify on held-out rows with :class:`SafetyGate`.
    max_weight_ : float or None
        The clip level used.
    variance_penalty_ : float
        The variance penalty used (differs from ``variance_penalty`` after selection).
    selection_results_ : list of dict
        With ``select="validation"``: each grid point and its validation IPS value.
    full_information_ : bool
        True when fitted as ``fit(X, y)`` (supervised labels; see Notes).
    n_iter_ : int
        L-BFGS-B iterations run.
    n_features_in_ : int
        Number of context features.

    Notes
    -----
    The policy is :math:`\pi_W(a|x) = \exp(W_a\cdot x + b_a)/\sum_{a'\in C(x)}\exp(W_{a'}\cdot x
    + b_{a'})` over the row's candidate set :math:`C(x)` (all actions without ``candidates``).
    With translated rewards :math:`\tilde r_i\in[0,1]`, weights :math:`w_i = \pi_W(a_i|x_i)/p_i`
    and :math:`\bar w_i = \min(w_i, M)`, ``objective="clipped_ips"`` maximizes

    .. math:: \hat V^M(W) - \lambda\sqrt{\widehat{\mathrm{Var}}(u)/n} - \tfrac c2\lVert W\rVert^2,
              \qquad u_i = \tilde r_i\bar w_i,\quad \hat V^M = \bar u,

    which is POEM's objective (Swaminathan & Joachims 2015, eq. 7) with losses
    :math:`\delta_i = -\tilde r_i \in [-1, 0]`. The translation matters: with non-negative
    losses a policy would score best by avoiding the logged actions; with rewards translated to
    be non-negative, clipping can only lower the estimate, so :math:`r_{lo} + (r_{hi}-r_{lo})
    \hat V^M` is a pessimistic estimate of :math:`V(\pi)`. ``objective="self_normalized"``
    maximizes :math:`\hat V_{SN} - \lambda\hat\sigma_{SN}` with
    :math:`\hat V_{SN} = \sum_i\tilde r_i\bar w_i/\sum_i\bar w_i` and
    :math:`\hat\sigma_{SN}^2 = \sum_i(\tilde r_i-\hat V_{SN})^2\bar w_i^2/(\sum_i\bar w_i)^2`
    (Swaminathan & Joachims 2015b), which is invariant to translating the reward.

    Gradients are analytic: :math:`\partial\log\pi(a_i|x_i)/\partial W_b =
    (1[a_i=b] - \pi(b|x_i))\,x_i`, zero for clipped rows; one pass over the rows builds an
    ``(n, n_actions)`` coefficient block whose product with ``X`` is the gradient. L-BFGS-B
    starts from the uniform policy; the objective is not convex. Features are standardized
    internally and ``coef_`` is reported on the raw scale.

    scikit-learn API: ``fit(X, y, reward, propensity, *, candidates=None)`` with ``y`` the logged
    actions, so ``fit(X, action, reward, propensity)`` works positionally.
    ``predict_proba`` is the stochastic policy, ``predict`` its greedy version, and ``score``
    (accuracy) is the value of the greedy policy when ``y`` holds the one rewarded action.

    Called as ``fit(X, y)`` without ``reward`` and ``propensity`` (as scikit-learn's generic tools
    do), the rows are read as full-information supervised data: ``y`` is the one action that earns
    the top of ``reward_range`` while every other candidate earns the bottom. Internally each
    row becomes one logged row per candidate action with propensity ``1 / n_candidates`` (a
    uniform logger that tried everything), so the objective is the policy's expected reward
    ``mean_i pi(y_i | x_i)``: the learner is then a classifier.
    Every check of ``sklearn.utils.estimator_checks`` applies and passes (scikit-learn itself
    skips ``check_array_api_input`` unless ``SCIPY_ARRAY_API=1``; the learners compute with
    numpy only).

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
        penalty = self.variance_penalty
        if not (isinstance(penalty, (int, float)) and np.isfinite(penalty) and penalty >= 0):
            raise ParameterError(f"variance_penalty must be a number >= 0, got {penalty!r}.")
        if self.select not in (None, "validation"):
            raise ParameterError(f"select must be None or 'validation', got {self.select!r}.")
        return self.objective, float(penalty), self.max_weight, self.select


class IPSPolicyLearner(_SoftmaxPolicyLearner):
    r"""Linear softmax policy maximizing the plain IPS estimate (no clipping, no variance penalty).

    The baseline that :class:`ConservativePolicyLearner` improves on: it maximizes
    :math:`\frac1n\sum_i\tilde r_i\,\pi_W(a_i|x_i)/p_i - \tfrac c2\lVert W\rVert^2`. Without a
    penalty it chases rows with small logged propensities ("propensity overfitting").

    Parameters
    ----------
    l2_penalty : float, default=1e-3
        L2 penalty on the weights of standardized features.
    reward_range : tuple of float, default=(0.0, 1.0)
        A priori range of the rewards (used to translate them to [0, 1]).
    fit_intercept : bool, default=True
        Learn a per-action intercept.
    max_iter : int, default=500
        L-BFGS-B iterations.
    tol : float, default=1e-6
        L-BFGS-B stops when the projected gradient is below ``tol`` or the relative decrease
        of the objective is below ``0.01 * tol``.

    Attributes
    ----------
    classes_, coef_, intercept_, value_estimate_, value_std_error_, value_lower_bound_, n_iter_,
    n_features_in_, full_information_
        As in :class:`ConservativePolicyLearner`; ``max_weight_`` is None and
        ``variance_penalty_`` is 0, so ``value_lower_bound_ == value_estimate_`` (the in-sample
        IPS estimate of the learned policy).

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
        fit_intercept: bool = True,
        max_iter: int = 500,
        tol: float = 1e-6,
    ) -> None:
        self.l2_penalty = l2_penalty
        self.reward_range = reward_range
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.tol = tol

    def _objective_settings(self) -> tuple[str, float, Any, str | None]:
        return "clipped_ips", 0.0, None, None


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
        In-sample direct-method estimate :math:`\frac1n\sum_i\hat q(x_i,\pi(x_i))`.
    n_features_in_ : int
        Number of context features.

    Notes
    -----
    For each action :math:`a`, :math:`\hat q(x, a) = \hat\beta_a\cdot x + \hat c_a` minimizes
    :math:`\sum_{i: a_i=a}(r_i - \beta\cdot x_i - c)^2 + \alpha\lVert\beta\rVert^2` (features
    standardized); the policy is :math:`\pi(x) = \arg\max_{a\in C(x)}\hat q(x, a)`, ties to the
    first label. ``propensity`` is accepted so that every learner shares one ``fit`` signature;
    it is validated but the direct method does not use it. The greedy policy inherits every
    error of the reward model and has no variance control (Dudík, Langford & Li 2011 discuss
    its bias).

    Called as ``fit(X, y)`` without ``reward`` and ``propensity``, ``y`` is a full-information
    label: each action's reward is known (top of ``reward_range`` for ``y``, bottom for the
    others), and every action's ridge is fitted on all rows.

    Every check of ``sklearn.utils.estimator_checks`` applies and passes (scikit-learn itself
    skips ``check_array_api_input`` unless ``SCIPY_ARRAY_API=1``; the learners compute with
    numpy only).

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
    ) -> DirectMethodPolicyLearner:
        """Fit the per-action reward model (arguments as in ``ConservativePolicyLearner.fit``)."""
        reward_range = required_reward_range(self.reward_range)
        if not (isinstance(self.l2_penalty, (int, float)) and self.l2_penalty > 0):
            raise ParameterError(f"l2_penalty must be a number > 0, got {self.l2_penalty!r}.")
        X, action, r01, _, mask, classes, full_info = _validate_fit_inputs(
            self, X, y, reward, propensity, candidates, reward_range
        )
        low, high = reward_range
        n, d = X.shape
        k = classes.size
        center = X.mean(axis=0)
        scale = X.std(axis=0)
        scale[~(scale > 0)] = 1.0
        Xs = (X - center) / scale
        alpha = float(self.l2_penalty)
        beta = np.zeros((k, d))
        c = np.full(k, -np.inf)
        counts = np.bincount(action, minlength=k)
        reward = low + (high - low) * r01
        order = np.argsort(action, kind="stable")
        bounds = np.concatenate([[0], np.cumsum(counts)])
        for j in np.flatnonzero(counts):  # loop over actions, not rows
            rows = order[bounds[j]: bounds[j + 1]]
            Xa, ra = Xs[rows], reward[rows]
            xbar, rbar = Xa.mean(axis=0), ra.mean()
            Xc = Xa - xbar
            beta[j] = np.linalg.solve(Xc.T @ Xc + alpha * np.eye(d), Xc.T @ (ra - rbar))
            c[j] = rbar - beta[j] @ xbar
        self.classes_ = classes
        self.coef_ = beta / scale
        finite = np.isfinite(c)
        self.intercept_ = np.where(finite, c - np.where(finite, self.coef_ @ center, 0.0), -np.inf)
        self.n_logged_ = counts
        self.full_information_ = full_info
        q = self._scores(X, mask)
        self.value_estimate_ = float(np.mean(np.max(q, axis=1)))
        return self

    def _scores(
        self, X: npt.NDArray[np.float64], mask: npt.NDArray[np.bool_] | None
    ) -> npt.NDArray[np.float64]:
        q = X @ self.coef_.T
        q += self.intercept_
        if mask is not None:
            q[~mask] = -np.inf
        return q

    def predict_reward(self, X: Any) -> npt.NDArray[np.float64]:
        """Predicted reward :math:`\\hat q(x, a)`, shape ``(n, n_actions)`` (-inf: never logged)."""
        check_is_fitted(self, "coef_")
        X = _validate_X(self, X, reset=False)
        return self._scores(X, None)

    def predict_proba(self, X: Any, *, candidates: Any = None) -> npt.NDArray[np.float64]:
        """The deterministic greedy policy as probabilities (one 1 per row)."""
        check_is_fitted(self, "coef_")
        X = _validate_X(self, X, reset=False)
        mask = candidate_mask(candidates, self.classes_, X.shape[0])
        q = self._scores(X, mask)
        if mask is not None:
            # candidates that were never logged score -inf; pick the first candidate then
            q = np.where(mask & np.isneginf(q), np.finfo(np.float64).min, q)
        best = np.argmax(q, axis=1)
        proba = np.zeros_like(q)
        proba[np.arange(q.shape[0]), best] = 1.0
        return proba
