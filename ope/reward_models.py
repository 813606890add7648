"""Cross-fitted reward models q̂(x, a) for the direct method (DM) and doubly robust (DR) estimators.

DM and DR need, for every logged row ``i``, two numbers:

* ``q_logged[i]`` = q̂(x_i, a_i), the predicted reward of the logged action, and
* ``q_target[i]`` = q̂(x_i, π) = Σ_a π(a|x_i) q̂(x_i, a), the predicted reward of the candidate
  policy π at the same context.

:class:`RewardModel` holds the settings (which scikit-learn estimator, how actions enter it, how
many folds); :meth:`RewardModel.fit` returns a :class:`FittedRewardModel` whose predictions for the
training rows are **out-of-fold**: row ``i`` is predicted by a model that never saw it. This is
what keeps DR unbiased when q̂ overfits (a model that memorizes r_i turns r_i − q̂(x_i, a_i) into
0 and DR into an overfitted DM).

Typical use with the DR estimator::

    fitted = ope.RewardModel().fit(context, action, reward, n_actions=K)
    q_logged = fitted.predict_logged()              # (n,)
    q_target = fitted.predict_policy(distribution)  # (n,), distribution: CSR (n, K) of π(a|x_i)
    ope.DR().estimate(reward=reward, logging_propensity=propensity,
                      target_propensity=target_propensity,
                      q_logged=q_logged, q_target=q_target)

The policy's distribution is a ``scipy.sparse`` CSR matrix: the model is evaluated only at the
(row, action) pairs in each row's support, in bounded chunks, so catalogs of 10^5 actions never
produce a dense (n, K) array.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray
from sklearn.base import clone, is_classifier
from sklearn.dummy import DummyRegressor
from sklearn.linear_model import ElasticNet, Lasso, LinearRegression, Ridge, RidgeCV

from ope._progress import progress
from ope._validation import (
    check_positive_int,
    check_rng,
    fold_assignment,
    resolve_seed,
    user_stacklevel,
)
from ope.exceptions import (
    EstimationError,
    ParameterError,
    PolicyError,
    SchemaError,
    SmallSampleWarning,
    ValidationError,
)
from ope.policies import PROBABILITY_TOLERANCE  # one row-sum tolerance for the whole package
from ope.weights import fit_with_sample_weight, sample_weight_obstacle, varying_sampling_weight

__all__ = ["RewardModel", "FittedRewardModel", "TwoStepRewardModel"]

#: Default regularization of the default Ridge model. The design has one column per action (and
#: per action × context feature); a small ridge keeps actions seen a handful of times from getting
#: wild coefficients, while at the fold sizes DR is used with (thousands of rows) it shrinks well
#: supported actions negligibly.
DEFAULT_RIDGE_ALPHA: Final = 1.0

#: How many row numbers an error message lists: enough to locate a problem, short enough to read.
EXAMPLE_ROWS: Final = 5

#: A classifier predicts E[r | x, a] = Σ_c c · P(r = c | x, a). Above this many distinct reward
#: values the reward is not categorical (ratings have 5–10 levels, clicks 2) and a regressor is
#: the right tool; one predict_proba column per value would also waste memory.
MAX_CLASSIFIER_REWARD_VALUES: Final = 100

#: Largest dense design matrix fit() will build (bytes). A dense one-hot design is an (n, K)
#: array, the thing ope never materializes for large catalogs; past this size the user must pick
#: a sparse-capable estimator or action features instead of silently exhausting memory.
DENSE_DESIGN_MAX_BYTES: Final = 1 << 30

#: Most columns a design (and so a fold model's coefficient vector) may have: one per action
#: (one-hot) and per action x context feature. A fit touches every column at each solver step
#: whatever the number of rows (the default Ridge of 4.8 million columns took 5.5 s on 24 rows
#: of the 2-core test machine, and its solver holds several float64 vectors of that length), so
#: 2**22 columns (32 MiB per vector) bounds the time and memory of a fit: a catalog of 10^5
#: actions with up to 40 context features. Larger catalogs (or action codes that are ids, not
#: codes) are refused up front, with action_features as the way out.
MAX_DESIGN_COLUMNS: Final = 1 << 22

#: Memory budget of one dense prediction chunk (bytes); the row count of a chunk is reduced to fit
#: it when the design is wide, so prediction memory stays bounded whatever K and d are.
PREDICT_CHUNK_MAX_BYTES: Final = 64 << 20

#: Regressors whose ``predict`` is exactly ``X @ coef_ + intercept_`` (scikit-learn's linear
#: models, the default Ridge among them): their predictions at (row, action) pairs are computed by
#: gathering per-action coefficients (:class:`_LinearGather`) instead of building design rows.
#: Exact types only: a subclass may override ``predict``.
LINEAR_REGRESSORS: Final = (Ridge, RidgeCV, LinearRegression, Lasso, ElasticNet)

_FLOAT = np.float64


# --------------------------------------------------------------------------------------------
# input validation
# --------------------------------------------------------------------------------------------


def _example_rows_text(mask: NDArray[np.bool_]) -> str:
    """The first offending row numbers of a mask as text (``"3, 7, ..."``), for messages."""
    rows = np.flatnonzero(mask)[:EXAMPLE_ROWS]
    more = ", ..." if int(mask.sum()) > EXAMPLE_ROWS else ""
    return ", ".join(str(int(r)) for r in rows) + more


def _as_context(context: Any, *, name: str = "context") -> NDArray[np.float64]:
    """Return ``context`` as a float64 (n, d) array or raise a SchemaError/ValidationError."""
    if sp.issparse(context):
        raise SchemaError(
            f"`{name}` must be a dense numeric (n, d) array; got a scipy.sparse matrix. "
            "Convert it with .toarray(), or reduce it to dense features first."
        )
    columns: list[str] | None = None
    if type(context).__module__.partition(".")[0] == "pandas" and hasattr(context, "dtypes"):
        columns = [str(c) for c in context.columns]
        bad = [c for c, t in zip(columns, context.dtypes) if getattr(t, "kind", "O") not in "biuf"]
        if bad:
            raise SchemaError(
                f"`{name}` must have numeric columns only; non-numeric: {bad}. "
                "Encode them (e.g. one-hot or ordinal codes) before fitting."
            )
        arr = context.to_numpy(dtype=_FLOAT, na_value=np.nan)
    else:
        arr = np.asarray(context)
        if arr.dtype.kind not in "biuf":
            raise SchemaError(
                f"`{name}` must be numeric; got dtype {arr.dtype}. "
                "Encode categorical features as numbers before fitting."
            )
    if arr.ndim == 1:
        raise SchemaError(
            f"`{name}` must be 2-D (n, d); got a 1-D array of length {arr.shape[0]}. "
            f"For a single feature pass {name}.reshape(-1, 1)."
        )
    if arr.ndim != 2:
        raise SchemaError(f"`{name}` must be 2-D (n, d); got shape {arr.shape}.")
    arr = np.ascontiguousarray(arr, dtype=_FLOAT)
    bad_cells = ~np.isfinite(arr)
    if bad_cells.any():
        bad_cols = np.flatnonzero(bad_cells.any(axis=0))
        labels = [
            f"{j} ({columns[j]!r})" if columns is not None else str(int(j))
            for j in bad_cols[:EXAMPLE_ROWS]
        ]
        more = ", ..." if bad_cols.size > EXAMPLE_ROWS else ""
        bad_rows = bad_cells.any(axis=1)
        raise ValidationError(
            f"`{name}` has NaN or infinite values in {int(bad_rows.sum())} rows "
            f"(first rows: {_example_rows_text(bad_rows)}) in column(s) {', '.join(labels)}{more}. "
            "Impute them (e.g. sklearn.impute.SimpleImputer) or drop those rows before fitting."
        )
    return arr


def _as_actions(action: Any, n: int, n_actions: int | None) -> NDArray[np.int64]:
    """Return integer action codes in [0, n_actions) as int64 or raise."""
    arr = np.asarray(action)
    if arr.ndim != 1:
        raise SchemaError(f"`action` must be 1-D (n,); got shape {arr.shape}.")
    if arr.shape[0] != n:
        raise SchemaError(f"`action` has {arr.shape[0]} rows but `context` has {n}.")
    if arr.dtype.kind == "f":
        integral = np.isfinite(arr) & (arr == np.round(arr))
        if not integral.all():
            raise SchemaError(
                f"`action` must hold integer codes 0..K-1; {int((~integral).sum())} rows are "
                f"not whole numbers (first rows: {_example_rows_text(~integral)}). Map action labels to "
                "codes first (ope.policies does this for policy tables)."
            )
    elif arr.dtype.kind not in "iub":
        raise SchemaError(
            f"`action` must hold integer codes 0..K-1; got dtype {arr.dtype}. Map action labels "
            "to codes first, e.g. codes = pandas.Categorical(labels).codes."
        )
    codes = arr.astype(np.int64)
    if n_actions is not None:
        out = (codes < 0) | (codes >= n_actions)
        if out.any():
            raise ValidationError(
                f"`action` codes must be in [0, {n_actions}) for n_actions={n_actions}; "
                f"{int(out.sum())} rows are outside (first rows: {_example_rows_text(out)}; "
                f"min {int(codes.min())}, max {int(codes.max())}). Pass the catalog size as "
                "n_actions (or action_features with one row per action)."
            )
    elif codes.size and codes.min() < 0:
        neg = codes < 0
        raise ValidationError(
            f"`action` codes must be >= 0; {int(neg.sum())} rows are negative "
            f"(first rows: {_example_rows_text(neg)})."
        )
    return codes


def _as_reward(reward: Any, n: int) -> NDArray[np.float64]:
    arr = np.asarray(reward)
    if arr.ndim != 1:
        raise SchemaError(f"`reward` must be 1-D (n,); got shape {arr.shape}.")
    if arr.shape[0] != n:
        raise SchemaError(f"`reward` has {arr.shape[0]} rows but `context` has {n}.")
    if arr.dtype.kind not in "biuf":
        raise SchemaError(f"`reward` must be numeric; got dtype {arr.dtype}.")
    out = arr.astype(_FLOAT)
    bad = ~np.isfinite(out)
    if bad.any():
        raise ValidationError(
            f"`reward` has NaN or infinite values in {int(bad.sum())} rows "
            f"(first rows: {_example_rows_text(bad)}). A reward model cannot learn from missing "
            "outcomes; drop those rows (and their propensities) before fitting."
        )
    return out


def _as_action_features(action_features: Any, n_actions: int | None) -> NDArray[np.float64]:
    if sp.issparse(action_features):
        raise SchemaError(
            "`action_features` must be a dense numeric (K, d_a) array; got a scipy.sparse "
            "matrix. Use a dense embedding, or leave action_features=None for sparse one-hot."
        )
    arr = np.asarray(action_features)
    if arr.dtype.kind not in "biuf" or arr.ndim != 2:
        raise SchemaError(
            "`action_features` must be a numeric 2-D array (n_actions, d_a) with one row per "
            f"action code; got dtype {arr.dtype} and shape {arr.shape}."
        )
    if n_actions is not None and arr.shape[0] != n_actions:
        raise SchemaError(
            f"`action_features` has {arr.shape[0]} rows but n_actions={n_actions}; it needs "
            "one row per action code."
        )
    arr = np.ascontiguousarray(arr, dtype=_FLOAT)
    bad = ~np.isfinite(arr).all(axis=1)
    if bad.any():
        raise ValidationError(
            f"`action_features` has NaN or infinite values for {int(bad.sum())} actions "
            f"(first action codes: {_example_rows_text(bad)}). Fill them before fitting."
        )
    return arr


def _as_distribution(distribution: Any, n_rows: int, n_actions: int, index: int | None) -> Any:
    """Validate one policy distribution and return it as canonical CSR."""
    label = "distribution" if index is None else f"distribution[{index}]"
    if sp.issparse(getattr(distribution, "matrix", None)):  # ope.policies.PolicyDistribution
        distribution = distribution.matrix
    if sp.issparse(distribution):
        csr = sp.csr_matrix(distribution)  # copies only when the format differs
    else:
        arr = np.asarray(distribution)
        if arr.ndim != 2 or arr.dtype.kind not in "biuf":
            raise PolicyError(
                f"`{label}` must be a scipy.sparse CSR matrix (n, n_actions) of π(a|x_i) "
                f"(or a 2-D numeric array); got dtype {arr.dtype} and shape {arr.shape}."
            )
        csr = sp.csr_matrix(arr)
    if csr.shape != (n_rows, n_actions):
        raise PolicyError(
            f"`{label}` has shape {csr.shape}; expected ({n_rows}, {n_actions}): one row per "
            "context (in the order the model was fitted, or of `context=` when given) and one "
            "column per action code."
        )
    if not csr.has_canonical_format:
        csr = csr.copy()
        csr.sum_duplicates()
    data = np.asarray(csr.data, dtype=_FLOAT)
    rows_of = np.repeat(np.arange(n_rows), np.diff(csr.indptr))
    bad = ~np.isfinite(data) | (data < 0.0) | (data > 1.0 + PROBABILITY_TOLERANCE)
    if bad.any():
        mask = np.zeros(n_rows, dtype=bool)
        mask[rows_of[bad]] = True
        raise PolicyError(
            f"`{label}` must hold probabilities in [0, 1]; {int(mask.sum())} rows have NaN, "
            f"negative or > 1 entries (first rows: {_example_rows_text(mask)})."
        )
    sums = np.bincount(rows_of, weights=data, minlength=n_rows)
    off = np.abs(sums - 1.0) > PROBABILITY_TOLERANCE
    if off.any():
        first = int(np.flatnonzero(off)[0])
        raise PolicyError(
            f"each row of `{label}` must sum to 1 (a distribution over actions); "
            f"{int(off.sum())} rows do not (first rows: {_example_rows_text(off)}; row {first} sums to "
            f"{sums[first]:.6g}). Rows with no support sum to 0: give every context a policy."
        )
    return csr


# --------------------------------------------------------------------------------------------
# design matrix
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Design:
    """Builds the feature matrix of (context, action) pairs.

    Columns: ``[x, e(a), x ⊗ e(a)]`` (the last block only when ``interactions``), where ``e(a)`` is
    the one-hot vector of ``a`` (length K) or row ``a`` of the action features (length d_a); with
    action features and ``intercepts`` a last block ``one-hot(a)`` (length K) follows.
    """

    n_context: int
    n_actions: int
    action_features: NDArray[np.float64] | None
    interactions: bool
    sparse: bool
    intercepts: bool = False

    @property
    def action_dim(self) -> int:
        return self.n_actions if self.action_features is None else self.action_features.shape[1]

    @property
    def n_columns(self) -> int:
        d, e = self.n_context, self.action_dim
        extra = self.n_actions if self.intercepts and self.action_features is not None else 0
        return d + e + (d * e if self.interactions else 0) + extra

    def rows_per_chunk(self, chunk_size: int) -> int:
        if self.sparse:
            return chunk_size
        return max(1, min(chunk_size, PREDICT_CHUNK_MAX_BYTES // (8 * max(self.n_columns, 1))))

    def build(self, x: NDArray[np.float64], a: NDArray[np.int64]) -> Any:
        if self.action_features is None:
            out = self._onehot_sparse(x, a) if self.sparse else self._onehot_dense(x, a)
            return out
        e = self.action_features[a]
        blocks = [x, e]
        if self.interactions:
            blocks.append((x[:, :, None] * e[:, None, :]).reshape(x.shape[0], -1))
        m, k = x.shape[0], self.n_actions
        if self.intercepts and self.sparse:
            onehot = sp.csr_matrix((np.ones(m), (np.arange(m), a)), shape=(m, k))
            return sp.hstack([sp.csr_matrix(np.hstack(blocks)), onehot], format="csr")
        if self.intercepts:
            onehot_dense = np.zeros((m, k), dtype=_FLOAT)
            onehot_dense[np.arange(m), a] = 1.0
            blocks.append(onehot_dense)
        dense = np.hstack(blocks)
        return sp.csr_matrix(dense) if self.sparse else dense

    def _onehot_dense(self, x: NDArray[np.float64], a: NDArray[np.int64]) -> NDArray[np.float64]:
        m, d, k = x.shape[0], self.n_context, self.n_actions
        out = np.zeros((m, self.n_columns), dtype=_FLOAT)
        out[:, :d] = x
        rows = np.arange(m)
        out[rows, d + a] = 1.0
        if self.interactions and d:
            out[rows[:, None], d + k + a[:, None] * d + np.arange(d)] = x
        return out

    def _onehot_sparse(self, x: NDArray[np.float64], a: NDArray[np.int64]) -> Any:
        m, d, k = x.shape[0], self.n_context, self.n_actions
        per_row = d + 1 + (d if self.interactions else 0)
        big = max(self.n_columns, m * per_row) >= np.iinfo(np.int32).max
        itype = np.int64 if big else np.int32
        indices = np.empty((m, per_row), dtype=itype)
        data = np.empty((m, per_row), dtype=_FLOAT)
        indices[:, :d] = np.arange(d)
        data[:, :d] = x
        indices[:, d] = d + a
        data[:, d] = 1.0
        if self.interactions:
            indices[:, d + 1 :] = d + k + a[:, None] * d + np.arange(d)
            data[:, d + 1 :] = x
        indptr = np.arange(m + 1, dtype=itype) * per_row
        return sp.csr_matrix((data.ravel(), indices.ravel(), indptr), shape=(m, self.n_columns))


def _is_classifier(estimator: Any) -> bool:
    try:
        return bool(is_classifier(estimator))
    except Exception:  # an estimator outside scikit-learn's tag system: treat as a regressor
        return False


def _accepts_sparse(estimator: Any) -> bool:
    try:
        from sklearn.utils import get_tags

        return bool(get_tags(estimator).input_tags.sparse)
    except Exception:  # older scikit-learn or a non-sklearn estimator: be conservative
        return False


# --------------------------------------------------------------------------------------------
# settings
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RewardModel:
    r"""Settings of a cross-fitted reward model q̂(x, a) = E[r | x, a] for DM and DR.

    Wraps any scikit-learn regressor, or a classifier for categorical rewards (clicks 0/1,
    ratings), fitted on features of (context, action) pairs. :meth:`fit` returns a
    :class:`FittedRewardModel` whose predictions for the training rows are out-of-fold.

    Parameters
    ----------
    estimator : scikit-learn regressor or classifier, optional
        Cloned once per fold, never modified. A regressor predicts q̂ directly; a classifier
        (``sklearn.base.is_classifier``) is fitted on the distinct reward values and predicts
        q̂ = Σ_c c · P̂(r = c | x, a) from ``predict_proba``. ``None`` uses
        ``Ridge(alpha=DEFAULT_RIDGE_ALPHA)`` on ``[x, one-hot(a), x ⊗ one-hot(a)]``: one linear
        model per action with shared shrinkage, fitted in closed form, fast on a shared machine
        and able to take a sparse one-hot design for 10^5 actions. With known logging
        propensities the quality of q̂ changes the variance of DR, not its bias, so a fast,
        stable model is the right default; pass e.g. ``HistGradientBoostingRegressor()`` (with
        ``action_features`` or a small catalog) when rewards are strongly non-linear.
    n_folds : int, default 5
        Number of cross-fitting folds (at least 2). Unused when ``cross_fit=False``.
    cross_fit : bool, default True
        Predict each training row with the model fitted on the other folds. ``False`` fits one
        model on all rows and predicts the training rows **in-sample**: for a flexible model
        q̂(x_i, a_i) then tracks r_i (overfitting), r_i − q̂(x_i, a_i) shrinks towards 0, and DR
        inherits the bias of an overfitted DM. Use it only for models with very few parameters,
        or to reproduce other software.
    interactions : bool, default True
        Include the ``x ⊗ e(a)`` columns, letting the effect of each action depend on the
        context. Without them a linear model is additive, q̂ = f(x) + g(a), and cannot rank
        actions differently in different contexts.
    sparse : bool or None, default None
        Build the design as ``scipy.sparse`` CSR. ``None``: sparse for the one-hot encoding when
        the estimator accepts sparse input (scikit-learn's estimator tags), dense otherwise.
        A dense one-hot design larger than ``DENSE_DESIGN_MAX_BYTES`` is refused.
    chunk_size : int, default 65_536
        Maximum (row, action) pairs evaluated at once when predicting; dense designs use fewer
        rows so one chunk stays within ``PREDICT_CHUNK_MAX_BYTES``.
    rng : int, numpy.random.Generator or None
        Randomness of the fold assignment. An estimator whose ``random_state`` is ``None`` gets
        one integer drawn from ``rng`` too, so a fit is reproducible from ``rng`` alone. With
        ``None`` a seed is drawn and recorded as the fitted model's ``seed_``:
        ``RewardModel(rng=fitted.seed_)`` (same other settings) reproduces the fit exactly.
    action_intercepts : bool, default False
        With ``action_features``, also give every action its own intercept (a one-hot column per
        action): the design becomes ``[x, e(a), x ⊗ e(a), one-hot(a)]``, so the model shares
        what the features explain across actions and still fits what is particular to each
        action. Ignored without ``action_features`` (the one-hot design has them already).

    See Also
    --------
    FittedRewardModel : the predictions.

    Notes
    -----
    Rows are split at random into K folds of equal size (stratified by reward value for
    classifiers). For each fold k a copy q̂^{(−k)} of the estimator is fitted on the rows of the
    other folds. With k(i) the fold of row i,

    .. math::

        \hat q(x_i, a_i) = \hat q^{(-k(i))}(x_i, a_i), \qquad
        \hat q(x_i, \pi) = \sum_{a:\,\pi(a|x_i) > 0} \pi(a|x_i)\, \hat q^{(-k(i))}(x_i, a).

    These enter the doubly robust estimator (Dudík et al., 2011)

    .. math::

        \hat V_{DR} = \frac1n \sum_i \Big[\hat q(x_i, \pi) + w_i\,(r_i - \hat q(x_i, a_i))\Big],
        \qquad w_i = \pi(a_i|x_i) / \pi_0(a_i|x_i),

    and DM, :math:`\hat V_{DM} = \frac1n\sum_i \hat q(x_i, \pi)`. Cross-fitting (Chernozhukov et
    al., 2018) makes q̂^{(−k(i))} independent of (a_i, r_i) given the other folds, so
    :math:`E[w_i(r_i - \hat q(x_i,a_i)) \mid x_i, \hat q] = \hat q(x_i,\pi) - q(x_i,\pi)` holds
    exactly and DR stays unbiased (known propensities) however flexible the model.

    With sampling weights :math:`s_i` (``fit(..., sample_weight=s)``) each fold model minimizes
    its loss weighted by :math:`s_i`, as the rows repeated :math:`s_i` times would, and DM and
    DR average with the same weights (Horvitz-Thompson, as :func:`ope.evaluate` does).

    For a classifier with reward values :math:`c_1..c_C`,
    :math:`\hat q(x, a) = \sum_j c_j \hat P(r = c_j | x, a)`. A fold whose training rows hold
    a single reward value predicts that value (a ``DummyRegressor``) and warns.

    References
    ----------
    .. [1] M. Dudík, J. Langford, L. Li, "Doubly Robust Policy Evaluation and Learning",
       ICML 2011.
    .. [2] V. Chernozhukov, D. Chetverikov, M. Demirer, E. Duflo, C. Hansen, W. Newey,
       J. Robins, "Double/debiased machine learning for treatment and structural parameters",
       The Econometrics Journal 21(1), C1–C68, 2018.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import sparse
    >>> from ope.reward_models import RewardModel
    >>> rng = np.random.default_rng(0)
    >>> n, K = 400, 3
    >>> X = rng.normal(size=(n, 2))
    >>> a = rng.integers(0, K, size=n)
    >>> r = 1.0 + X[:, 0] * (a == 1) + 0.1 * rng.normal(size=n)
    >>> fitted = RewardModel(n_folds=4, rng=0).fit(X, a, r, n_actions=K)
    >>> np.bincount(fitted.fold_)
    array([100, 100, 100, 100])
    >>> q_logged = fitted.predict_logged()           # out-of-fold q̂(x_i, a_i)
    >>> bool(np.corrcoef(q_logged, r)[0, 1] > 0.9)
    True
    >>> always_1 = sparse.csr_array((np.ones(n), (np.arange(n), np.ones(n, dtype=int))),
    ...                             shape=(n, K))
    >>> q_target = fitted.predict_policy(always_1)   # q̂(x_i, π) for "always action 1"
    >>> bool(np.abs(q_target - (1.0 + X[:, 0])).mean() < 0.05)   # truth: 1 + x_0
    True
    """

    estimator: Any = None
    n_folds: int = 5
    cross_fit: bool = True
    interactions: bool = True
    sparse: bool | None = None
    chunk_size: int = 65_536
    rng: int | np.random.Generator | None = None
    action_intercepts: bool = False

    def __post_init__(self) -> None:
        try:
            check_positive_int(self.n_folds, "n_folds", minimum=2)
        except ParameterError as exc:
            raise ParameterError(
                f"{exc} Cross-fitting needs at least 2 folds; to fit in-sample (biased for DR), "
                "pass cross_fit=False instead."
            ) from None
        for name in ("cross_fit", "interactions", "action_intercepts"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ParameterError(f"{name} must be True or False; got {getattr(self, name)!r}.")
        if self.sparse is not None and not isinstance(self.sparse, (bool, np.bool_)):
            raise ParameterError(f"sparse must be True, False or None; got {self.sparse!r}.")
        check_positive_int(self.chunk_size, "chunk_size")
        check_rng(self.rng)  # a malformed seed is refused when the model is built, not at fit
        if self.estimator is not None:
            needed: tuple[str, ...] = ("fit", "predict")
            if hasattr(self.estimator, "fit") and _is_classifier(self.estimator):
                needed = ("fit", "predict_proba")
            missing = [m for m in needed if not hasattr(self.estimator, m)]
            if missing:
                raise ParameterError(
                    f"estimator {self.estimator!r} lacks {missing}; pass a scikit-learn "
                    "regressor (fit/predict) or classifier (fit/predict_proba)."
                )

    def fit(
        self,
        context: ArrayLike,
        action: ArrayLike,
        reward: ArrayLike,
        *,
        n_actions: int | None = None,
        action_features: ArrayLike | None = None,
        sample_weight: ArrayLike | None = None,
    ) -> FittedRewardModel:
        """Fit one model per fold and compute the out-of-fold predictions of the logged actions.

        Parameters
        ----------
        context : array-like or pandas.DataFrame, shape (n, d)
            Numeric context features, finite. ``d = 0`` (no context) is allowed.
        action : array-like of int, shape (n,)
            Logged action codes in ``0..n_actions-1``.
        reward : array-like, shape (n,)
            Observed rewards, finite.
        n_actions : int, optional
            Catalog size K. Default: ``action_features.shape[0]`` when given, else
            ``max(action) + 1`` (actions above the largest logged code are then unknown to the
            model: pass ``n_actions`` when policies may choose them).
        action_features : array-like, shape (n_actions, d_a), optional
            One feature row per action (e.g. item embeddings). When given, actions enter the
            model through these features instead of a one-hot code: unlogged actions get
            predictions that generalize from similar actions.
        sample_weight : array-like, shape (n,), optional
            The rows' sampling weights (1 / the probability that a row was kept, e.g. the
            ``weight`` column of DSJSON's ``pdrop``). Every fold model is fitted with them (the
            estimator's ``sample_weight``), so q̂ is fitted to the traffic the rows were kept
            from, not to the kept rows' mix; integer weights fit as the rows repeated that many
            times would. The folds are assigned as without weights. Equal weights give the
            unweighted fit exactly.

        Returns
        -------
        FittedRewardModel

        Raises
        ------
        SchemaError
            Wrong shapes or dtypes.
        ValidationError
            NaN/inf in context, reward or action features; action codes out of range; a
            sampling weight missing, <= 0 or too large.
        ParameterError
            Sampling weights with an estimator whose ``fit`` takes no ``sample_weight`` (for a
            pipeline, whose last step's takes none).
        EstimationError
            Fewer rows than folds; too many reward values for a classifier; a design too large
            to build densely.
        """
        x = _as_context(context)
        n, d = x.shape
        if n_actions is not None:
            check_positive_int(n_actions, "n_actions")
            if n_actions > MAX_DESIGN_COLUMNS:
                raise ParameterError(
                    f"`n_actions` must be at most {MAX_DESIGN_COLUMNS:,} (MAX_DESIGN_COLUMNS: "
                    f"the design has a column per action); got {n_actions!r}. Pass the catalog "
                    "size, with actions coded 0..n_actions-1, or action_features."
                )
        feats = None if action_features is None else _as_action_features(action_features, n_actions)
        if n_actions is None and feats is not None:
            n_actions = feats.shape[0]
        a = _as_actions(action, n, n_actions)
        y = _as_reward(reward, n)
        if n == 0:
            raise EstimationError("cannot fit a reward model on 0 rows.")
        weight = varying_sampling_weight(sample_weight, n)  # equal weights: unweighted
        k_actions = int(n_actions) if n_actions is not None else int(a.max()) + 1

        n_folds = self.n_folds if self.cross_fit else 1
        if self.cross_fit and n < self.n_folds:
            raise EstimationError(
                f"{n} rows cannot be split into n_folds={self.n_folds} folds; use fewer folds "
                "(n_folds >= 2) or more rows."
            )

        template = Ridge(alpha=DEFAULT_RIDGE_ALPHA) if self.estimator is None else self.estimator
        if weight is not None and (why := sample_weight_obstacle(template)) is not None:
            kind = "classifier" if _is_classifier(template) else "regressor"
            raise ParameterError(
                f"the rows carry sampling weights (sample_weight), but the reward model's "
                f"{why}: fitted unweighted, it would learn the rewards of the kept rows' mix, "
                "not of the traffic they were kept from, and DM and DR would be biased. Pass a "
                f"{kind} whose fit takes sample_weight (e.g. the default Ridge, or "
                "HistGradientBoostingRegressor), or a Pipeline whose last step's fit does."
            )
        classifier = _is_classifier(template)
        reward_values: NDArray[np.float64] | None = None
        target: NDArray[Any] = y
        if classifier:
            reward_values, codes = np.unique(y, return_inverse=True)
            if reward_values.size > MAX_CLASSIFIER_REWARD_VALUES:
                raise EstimationError(
                    f"`reward` takes {reward_values.size} distinct values; a classifier reward "
                    f"model needs at most {MAX_CLASSIFIER_REWARD_VALUES} reward levels (clicks, "
                    "ratings). Pass a regressor as estimator for continuous rewards."
                )
            target = codes.astype(np.int64)

        seed, gen = resolve_seed(self.rng)
        if n_folds == 1:
            fold = np.zeros(n, dtype=np.int64)
        else:
            if classifier:  # stratify: every fold sees each reward value in its share
                fold = np.empty(n, dtype=np.int64)
                fold[np.lexsort((gen.random(int(n)), target))] = np.arange(n) % n_folds
            else:
                fold = fold_assignment(n, n_folds, gen)
        params = template.get_params(deep=False) if hasattr(template, "get_params") else {}
        if "random_state" in params and params["random_state"] is None:
            template = clone(template).set_params(
                random_state=int(gen.integers(np.iinfo(np.int32).max))
            )

        use_sparse = self.sparse
        if use_sparse is None:
            use_sparse = (feats is None or self.action_intercepts) and _accepts_sparse(template)
        design = _Design(
            d,
            k_actions,
            feats,
            bool(self.interactions),
            bool(use_sparse),
            intercepts=bool(self.action_intercepts) and feats is not None,
        )
        if design.n_columns > MAX_DESIGN_COLUMNS:
            source = (
                "n_actions"
                if n_actions is not None
                else "the largest `action` code + 1: pass n_actions, codes 0..K-1"
            )
            raise EstimationError(
                f"the design would have {design.n_columns:,} columns (catalog of {k_actions:,} "
                f"actions from {source}, {d} context features), more than MAX_DESIGN_COLUMNS = "
                f"{MAX_DESIGN_COLUMNS:,}: every fold model would hold a coefficient per column. "
                "Use action_features for a large catalog, interactions=False, or fewer context "
                "features."
            )
        if not design.sparse and n * design.n_columns * 8 > DENSE_DESIGN_MAX_BYTES:
            raise EstimationError(
                f"the dense design matrix would be {n} x {design.n_columns} "
                f"({n * design.n_columns * 8 / 2**30:.1f} GiB) because "
                f"{type(template).__name__} does not take sparse input (or sparse=False). Use a "
                "sparse-capable estimator (Ridge, SGDRegressor, LogisticRegression), pass "
                "action_features=(n_actions, d_a), or set interactions=False."
            )
        full = design.build(x, a)

        estimators: list[Any] = []
        q_logged = np.empty(n, dtype=_FLOAT)
        constant_folds: list[int] = []
        folds = range(n_folds)
        if n_folds > 1:
            folds = progress(folds, desc="cross-fitting", total=n_folds, unit="fold")
        for k in folds:  # a loop over folds, each one fit
            test = np.flatnonzero(fold == k)
            train = test if n_folds == 1 else np.flatnonzero(fold != k)
            y_train = target[train]
            if classifier and np.unique(y_train).size < 2:
                value = float(reward_values[y_train[0]])  # type: ignore[index]
                est: Any = DummyRegressor(strategy="constant", constant=value)
                est.fit(np.zeros((train.size, 1)), np.full(train.size, value))
                constant_folds.append(k)
            else:
                est = clone(template)
                try:
                    fit_with_sample_weight(
                        est, full[train], y_train, None if weight is None else weight[train]
                    )
                except (TypeError, ValueError) as err:
                    if design.sparse and "sparse" in str(err).lower():
                        raise EstimationError(
                            f"{type(est).__name__} does not accept the sparse one-hot design: "
                            f"{err}. Pass sparse=False (small catalogs), action_features, or a "
                            "sparse-capable estimator."
                        ) from err
                    raise
            estimators.append(est)
            q_logged[test] = _predict_block(est, full[test], reward_values)
        if constant_folds:
            if len(constant_folds) == n_folds and np.unique(target).size < 2:
                why = "all rewards are equal"
            else:
                why = f"the training rows of fold(s) {constant_folds} hold one reward value"
            warnings.warn(
                f"{why}, so the classifier cannot be fitted there; those rows are predicted by "
                "that constant. Use fewer folds, more rows, or a regressor.",
                SmallSampleWarning,
                stacklevel=user_stacklevel(),
            )
        return FittedRewardModel(
            model=self,
            estimators=estimators,
            fold=fold,
            n_actions=k_actions,
            reward_values=reward_values,
            design=design,
            context=x,
            q_logged=q_logged,
            seed=seed,
        )


class _LinearGather:
    """Per-action coefficients of linear fold models: q̂(x, a) = bias[f, a] + x · coef[f, a].

    For a model whose prediction is ``design(x, a) @ coef_ + intercept_`` the design's blocks
    collapse, per action, into a context coefficient vector and a constant:

    * one-hot actions: ``coef[a] = c_x + C[a]`` (``C[a]`` the ``x ⊗ one-hot(a)`` block) and
      ``bias[a] = intercept + c_a``;
    * action features ``e(a)``: ``coef[a] = c_x + C e(a)`` (``C`` the ``x ⊗ e(a)`` block as a
      (d, d_a) matrix) and ``bias[a] = intercept + c_e · e(a)`` (+ the action's own intercept).

    Predicting a pair is then a gather of ``d + 1`` numbers and one dot product, with no design
    row built: the same numbers as ``predict`` on the design, to rounding.
    """

    def __init__(self, coef: NDArray[np.float64], bias: NDArray[np.float64]) -> None:
        folds, k, d = coef.shape
        self.n_actions = k
        # fold f, action a at row f * K + a: one integer index per pair (np.take is about 3x
        # faster than indexing a 3-d array with two index arrays)
        self.coef = np.ascontiguousarray(coef.reshape(folds * k, d))
        self.bias = np.ascontiguousarray(bias.reshape(folds * k))
        self.mean_coef = coef.mean(axis=0)  # the fold average, a linear model too
        self.mean_bias = bias.mean(axis=0)

    @classmethod
    def of(cls, estimators: Sequence[Any], design: _Design) -> _LinearGather | None:
        """The gather of these fold models, or None when one of them is not linear."""
        if not estimators or any(
            type(est) not in LINEAR_REGRESSORS and type(est) is not _LinearFold
            for est in estimators
        ):
            return None
        d, k = design.n_context, design.n_actions
        coefs, biases = [], []
        for est in estimators:  # a loop over folds
            c = np.asarray(getattr(est, "coef_", None), dtype=_FLOAT)
            b0 = np.asarray(getattr(est, "intercept_", 0.0), dtype=_FLOAT)
            if c.ndim != 1 or c.shape[0] != design.n_columns or b0.ndim != 0:
                return None
            w = np.broadcast_to(c[:d], (k, d)).copy()
            e = design.action_features
            if e is None:
                bias = float(b0) + c[d : d + k]
                if design.interactions and d:
                    w += c[d + k : d + k + k * d].reshape(k, d)
            else:
                da = e.shape[1]
                bias = float(b0) + e @ c[d : d + da]
                end = d + da
                if design.interactions:
                    w += e @ c[end : end + d * da].reshape(d, da).T
                    end += d * da
                if design.intercepts:
                    bias = bias + c[end : end + k]
            coefs.append(w)
            biases.append(np.asarray(bias, dtype=_FLOAT))
        return cls(np.stack(coefs), np.stack(biases))

    def predict(
        self,
        x: NDArray[np.float64],
        rows: NDArray[np.int64],
        actions: NDArray[np.int64],
        folds: NDArray[np.int64] | None,
        step: int,
    ) -> NDArray[np.float64]:
        """q̂ at the pairs ``(x[rows[j]], actions[j])``, by fold ``folds[j]`` (None: the fold
        average), ``step`` pairs at a time."""
        out = np.empty(rows.size, dtype=_FLOAT)
        for start in range(0, rows.size, step):  # chunks of pairs
            sl = slice(start, min(start + step, rows.size))
            if folds is None:
                idx, coef, bias = actions[sl], self.mean_coef, self.mean_bias
            else:
                idx, coef, bias = folds[sl] * self.n_actions + actions[sl], self.coef, self.bias
            xs = np.take(x, rows[sl], axis=0)
            out[sl] = np.einsum("ij,ij->i", xs, np.take(coef, idx, axis=0)) + np.take(bias, idx)
        return out


def _predict_block(est: Any, features: Any, reward_values: NDArray[np.float64] | None) -> Any:
    """q̂ for one block of design rows, float64."""
    if reward_values is not None and isinstance(est, DummyRegressor):  # single-class fallback
        return np.full(features.shape[0], float(np.ravel(est.constant_)[0]), dtype=_FLOAT)
    if reward_values is not None:
        proba = np.asarray(est.predict_proba(features), dtype=_FLOAT)
        return proba @ reward_values[np.asarray(est.classes_, dtype=np.int64)]
    return np.asarray(est.predict(features), dtype=_FLOAT).reshape(-1)


# --------------------------------------------------------------------------------------------
# fitted model
# --------------------------------------------------------------------------------------------


class FittedRewardModel:
    r"""A cross-fitted reward model: out-of-fold q̂ for the training rows, fold average elsewhere.

    Returned by :meth:`RewardModel.fit`; not constructed directly.

    Attributes
    ----------
    model : RewardModel
        The settings it was fitted with.
    estimators_ : list
        ``estimators_[k]`` was fitted on the rows with ``fold_ != k`` and predicts the rows with
        ``fold_ == k``. With ``cross_fit=False`` there is one, fitted on all rows. A classifier
        fold whose training rows held one reward value is a ``DummyRegressor`` of that value.
    fold_ : ndarray of int64, shape (n,)
        Fold of each training row (all 0 with ``cross_fit=False``).
    n_folds_ : int
        ``len(estimators_)``.
    n_actions_ : int
        Catalog size K; action codes are ``0..K-1``.
    n_features_in_ : int
        Number of context columns.
    reward_values_ : ndarray or None
        The distinct reward values a classifier was fitted on; ``None`` for a regressor.
    sparse_ : bool
        Whether the design matrix is ``scipy.sparse``.
    n_design_columns_ : int
        Columns of the design matrix ``[x, e(a), x ⊗ e(a)]`` (and ``one-hot(a)`` with
        ``action_intercepts`` and action features).
    seed_ : int or None
        The seed of the fold assignment (and of an estimator's ``random_state`` left ``None``):
        the ``rng`` given when an int, drawn and recorded when ``rng=None``, None when a
        Generator was given. ``RewardModel(rng=seed_, ...)`` with the other settings unchanged
        reproduces the folds and the predictions exactly.

    Notes
    -----
    For the scikit-learn linear models (:data:`LINEAR_REGRESSORS`, the default Ridge among
    them) predictions at (row, action) pairs are a gather of per-action coefficients and a dot
    product with the context (no design rows are built); other estimators predict on design rows
    built in chunks.

    Training rows are always predicted out-of-fold (:meth:`predict_logged`,
    :meth:`predict_policy` without ``context``). New contexts (:meth:`predict`,
    :meth:`predict_policy` with ``context=``) get the average of the fold models,
    :math:`\bar q(x, a) = \frac1K\sum_k \hat q^{(-k)}(x, a)`: every fold model saw a fraction
    (K−1)/K of the data, and averaging them costs no extra fit. Calling :meth:`predict` on the
    training rows is therefore **in-sample** for K−1 of the K models; use
    :meth:`predict_logged`/:meth:`predict_policy` for them.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.reward_models import RewardModel
    >>> rng = np.random.default_rng(1)
    >>> X = rng.normal(size=(1000, 1))
    >>> a = rng.integers(0, 2, size=1000)
    >>> clicks = (rng.random(1000) < np.where(a == 1, 0.7, 0.2)).astype(float)
    >>> from sklearn.linear_model import LogisticRegression
    >>> fitted = RewardModel(LogisticRegression(), n_folds=3, rng=0).fit(X, a, clicks)
    >>> fitted.reward_values_
    array([0., 1.])
    >>> q = fitted.predict(np.zeros((2, 1)), np.array([0, 1]))   # P(click | x=0, a)
    >>> [round(float(v), 1) for v in q]
    [0.2, 0.7]
    """

    def __init__(
        self,
        *,
        model: RewardModel,
        estimators: list[Any],
        fold: NDArray[np.int64],
        n_actions: int,
        reward_values: NDArray[np.float64] | None,
        design: _Design,
        context: NDArray[np.float64],
        q_logged: NDArray[np.float64],
        seed: int | None = None,
    ) -> None:
        self.model = model
        self.estimators_ = estimators
        self.fold_ = fold
        self.n_folds_ = len(estimators)
        self.n_actions_ = n_actions
        self.n_features_in_ = design.n_context
        self.reward_values_ = reward_values
        self.sparse_ = design.sparse
        self.n_design_columns_ = design.n_columns
        self._design = design
        self._context = context
        self._q_logged = q_logged
        self.seed_ = seed
        self._linear = _LinearGather.of(estimators, design)

    def __repr__(self) -> str:
        est = self.model.estimator
        name = "Ridge (default)" if est is None else type(est).__name__
        if isinstance(self.model, TwoStepRewardModel):
            name = "TwoStepRewardModel"
        return (
            f"FittedRewardModel({name}, n={self.fold_.size}, n_actions={self.n_actions_}, "
            f"n_folds={self.n_folds_}, cross_fit={self.model.cross_fit})"
        )

    @property
    def n(self) -> int:
        """Number of training rows."""
        return int(self.fold_.size)

    def predict_logged(self) -> NDArray[np.float64]:
        """Out-of-fold q̂(x_i, a_i) of the logged actions, shape (n,), float64.

        This is ``q_logged`` of DR and its relatives. Computed once during :meth:`RewardModel.fit`;
        each call returns a fresh copy.
        """
        return self._q_logged.copy()

    def predict(self, context: ArrayLike, action: ArrayLike) -> NDArray[np.float64]:
        """q̂(x, a) for arbitrary (context, action) pairs: the average of the fold models.

        Parameters
        ----------
        context : array-like, shape (m, d)
        action : array-like of int, shape (m,)

        Returns
        -------
        ndarray of float64, shape (m,)

        Notes
        -----
        For training rows this is (mostly) in-sample; use :meth:`predict_logged` and
        :meth:`predict_policy` there.
        """
        x = self._check_context(context)
        a = _as_actions(action, x.shape[0], self.n_actions_)
        return self._predict_pairs(x, np.arange(x.shape[0]), a, fold_of_row=None)

    def predict_policy(
        self,
        distribution: Any,
        *,
        context: ArrayLike | None = None,
    ) -> NDArray[np.float64]:
        r"""q̂(x_i, π) = Σ_a π(a|x_i) q̂(x_i, a) for one or several policies.

        Parameters
        ----------
        distribution : scipy.sparse CSR (n, n_actions), PolicyDistribution, or a list of them
            Row i is π(·|x_i) over its support (columns are action codes; each row sums to 1).
            Other sparse formats and dense 2-D arrays are converted to CSR. For an
            ``ope.policies.PolicyDistribution`` its ``matrix`` is used: column j is the action
            label ``actions[j]``, so fit on the codes ``numpy.searchsorted(dist.actions,
            logged_labels)`` and ``n_actions=len(dist.actions)``. The model is
            evaluated only at the nonzero (row, action) pairs, ``chunk_size`` pairs at a time;
            pairs shared by several policies are evaluated once.
        context : array-like, shape (m, d), optional
            ``None`` (default): the rows are the training rows, predicted out-of-fold (row i by
            ``estimators_[fold_[i]]``). Otherwise new contexts, predicted by the fold average.

        Returns
        -------
        ndarray of float64
            Shape (n,) for one distribution; (n, P) for a list of P distributions.

        Raises
        ------
        PolicyError
            Wrong shape; entries outside [0, 1]; rows that do not sum to 1.

        Notes
        -----
        .. math:: \hat q(x_i, \pi) = \sum_{a:\,\pi(a|x_i)>0} \pi(a|x_i)\,\hat q^{(-k(i))}(x_i, a)

        Work and memory are O(nnz) plus one design chunk, never O(n · n_actions).
        """
        if context is None:
            x = self._context
            fold_of_row: NDArray[np.int64] | None = self.fold_
        else:
            x = self._check_context(context)
            fold_of_row = None
        n_rows = x.shape[0]
        single = not isinstance(distribution, (list, tuple))
        dists = [distribution] if single else list(distribution)
        if not dists:
            raise PolicyError("`distribution` is an empty list; pass at least one policy.")
        csrs = [
            _as_distribution(dist, n_rows, self.n_actions_, None if single else p)
            for p, dist in enumerate(dists)
        ]
        parts = []
        for csr in csrs:
            rows = np.repeat(np.arange(n_rows, dtype=np.int64), np.diff(csr.indptr))
            cols = np.asarray(csr.indices, dtype=np.int64)
            probs = np.asarray(csr.data, dtype=_FLOAT)
            keep = probs != 0.0
            parts.append((rows[keep], cols[keep], probs[keep]))
        if len(parts) == 1:
            rows, cols, _ = parts[0]
            q_pairs = self._predict_pairs(x, rows, cols, fold_of_row)
            inverses = [np.arange(rows.size)]
        else:
            keys = np.concatenate([r * self.n_actions_ + c for r, c, _ in parts])
            uniq, inverse = np.unique(keys, return_inverse=True)
            q_pairs = self._predict_pairs(
                x, uniq // self.n_actions_, uniq % self.n_actions_, fold_of_row
            )
            bounds = np.cumsum([0] + [r.size for r, _, _ in parts])
            inverses = [inverse[bounds[p] : bounds[p + 1]] for p in range(len(parts))]
        out = np.empty((n_rows, len(parts)), dtype=_FLOAT)
        for p, ((rows, _, probs), inv) in enumerate(zip(parts, inverses)):
            out[:, p] = np.bincount(rows, weights=probs * q_pairs[inv], minlength=n_rows)
        return out[:, 0] if single else out

    # ---- internals ----------------------------------------------------------------------

    def _check_context(self, context: ArrayLike) -> NDArray[np.float64]:
        x = _as_context(context)
        if x.shape[1] != self.n_features_in_:
            raise SchemaError(
                f"`context` has {x.shape[1]} columns but the model was fitted on "
                f"{self.n_features_in_}; pass the same features in the same order."
            )
        return x

    def _predict_pairs(
        self,
        x: NDArray[np.float64],
        rows: NDArray[np.int64],
        actions: NDArray[np.int64],
        fold_of_row: NDArray[np.int64] | None,
    ) -> NDArray[np.float64]:
        """q̂(x[rows[j]], actions[j]) for every pair j, in chunks.

        ``fold_of_row`` given: pair j uses ``estimators_[fold_of_row[rows[j]]]`` (out-of-fold).
        ``None``: the average of all fold models.
        """
        m = rows.size
        step = self._design.rows_per_chunk(int(self.model.chunk_size))
        if self._linear is not None:
            folds = None if fold_of_row is None else fold_of_row[rows]
            return self._linear.predict(x, rows, actions, folds, int(self.model.chunk_size))
        out = np.empty(m, dtype=_FLOAT)
        values = self.reward_values_
        if fold_of_row is None:
            for start in range(0, m, step):
                sl = slice(start, min(start + step, m))
                feats = self._design.build(x[rows[sl]], actions[sl])
                acc = np.zeros(feats.shape[0], dtype=_FLOAT)
                for est in self.estimators_:
                    acc += _predict_block(est, feats, values)
                out[sl] = acc / len(self.estimators_)
            return out
        folds = fold_of_row[rows]
        order = np.argsort(folds, kind="stable")
        edges = np.searchsorted(folds[order], np.arange(self.n_folds_ + 1))
        for k, est in enumerate(self.estimators_):
            members = order[edges[k] : edges[k + 1]]
            for start in range(0, members.size, step):
                idx = members[start : start + step]
                feats = self._design.build(x[rows[idx]], actions[idx])
                out[idx] = _predict_block(est, feats, values)
        return out


# --------------------------------------------------------------------------------------------
# OffCEM's two-step model
# --------------------------------------------------------------------------------------------


class _LinearFold:
    """One fold of a linear model fitted here (the two-step model): ``X @ coef_ + intercept_``."""

    def __init__(self, coef: NDArray[np.float64], intercept: float) -> None:
        self.coef_ = coef
        self.intercept_ = float(intercept)

    def predict(self, features: Any) -> NDArray[np.float64]:
        return np.asarray(features @ self.coef_, dtype=_FLOAT).reshape(-1) + self.intercept_


def _within_ridge(
    features: Any,
    y: NDArray[np.float64],
    groups: NDArray[np.int64],
    alpha: float,
    weight: NDArray[np.float64] | None = None,
) -> NDArray[np.float64]:
    r"""The ridge coefficients of the within-group regression,

    .. math:: \hat\beta = \arg\min_\beta \sum_i s_i \big((y_i - \bar y_{g(i)})
              - (\phi_i - \bar\phi_{g(i)})\beta\big)^2 + \alpha\,\|\beta\|^2,

    (:math:`s_i` the rows' sampling weights, 1 without, and the group means weighted by them)
    from its normal equations :math:`(\Phi^\top M \Phi + \alpha I)\beta = \Phi^\top M y`
    (M centres within groups, weighted) without centring the sparse design:
    :math:`\Phi^\top M \Phi = \Phi^\top W \Phi - S^\top D^{-1} S` with :math:`S` the
    per-group weighted column sums and :math:`D` the groups' total weights; a dense solve for
    few coefficients, else preconditioned conjugate gradients on the sparse system. One group
    is an unpenalized intercept."""
    _, g = np.unique(groups, return_inverse=True)
    m, p = features.shape
    share = np.ones(m) if weight is None else weight
    size = np.bincount(g, weights=share).astype(_FLOAT)
    member = sp.csr_matrix((share, (g, np.arange(m))), shape=(size.size, m))
    sums = sp.csr_matrix(member @ features)  # S: (groups, p), the per-group column sums
    sums_t = sums.T.tocsr()
    # Φ'WΦ: sparse (items touch their own columns)
    weighted = features if weight is None else sp.csr_matrix(features.multiply(weight[:, None]))
    inner = (weighted.T @ features).tocsr()
    rhs = np.asarray(weighted.T @ y, dtype=_FLOAT) - np.asarray(
        sums_t @ (np.asarray(member @ y, dtype=_FLOAT) / size), dtype=_FLOAT
    )
    if p <= _DENSE_SOLVE_COLUMNS:
        dense = inner.toarray() - (sums_t @ sp.diags(1.0 / size) @ sums).toarray()
        dense[np.diag_indices(p)] += alpha
        return np.asarray(np.linalg.solve(dense, rhs), dtype=_FLOAT)
    # S'D^-1 S is never formed: within a cluster of many items it is a dense block
    diagonal = (
        np.asarray(inner.diagonal(), dtype=_FLOAT)
        - np.asarray(sums.multiply(sums).T @ (1.0 / size), dtype=_FLOAT)
        + alpha
    )

    def product(v: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.asarray(inner @ v - sums_t @ ((sums @ v) / size) + alpha * v, dtype=_FLOAT)

    return _conjugate_gradients(product, diagonal, rhs)


def _conjugate_gradients(
    product: Any, diagonal: NDArray[np.float64], rhs: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Solve the symmetric positive definite system ``product(b) = rhs`` by conjugate
    gradients with its ``diagonal`` as preconditioner, to a residual of ``_CG_TOLERANCE`` of
    ``|rhs|`` (a loop over iterations, each a few sparse products). The columns of a reward
    model's design differ in scale by the square root of their rows (an item seen 3 times, a
    context feature seen on every row); the diagonal preconditioner removes that spread, so
    the iterations are few."""
    inv = np.where(diagonal > 0, 1.0 / np.where(diagonal > 0, diagonal, 1.0), 1.0)
    b = np.zeros_like(rhs)
    r = rhs.copy()
    z = inv * r
    d = z.copy()
    rz = float(r @ z)
    stop = _CG_TOLERANCE * float(np.linalg.norm(rhs))
    for _ in range(10 * rhs.size + 100):  # a loop over iterations
        if float(np.linalg.norm(r)) <= stop:
            break
        q = product(d)
        step = rz / float(d @ q)
        b += step * d
        r -= step * q
        z = inv * r
        rz_next = float(r @ z)
        d = z + (rz_next / rz) * d
        rz = rz_next
    return b


#: Relative residual at which the two-step model's conjugate gradients stop.
_CG_TOLERANCE: Final = 1e-12


#: Up to this many coefficients the two-step model's normal equations are solved densely.
_DENSE_SOLVE_COLUMNS: Final = 2_000


@dataclass(frozen=True)
class TwoStepRewardModel:
    r"""OffCEM's two-step reward model :math:`\hat f(x, a) = \hat h(x, a) + \hat g(x, c(a))`,
    cross-fitted, for estimators that weigh rows by cluster (``offcem``).

    OffCEM's correction term is unbiased when the model is *locally correct*: right about the
    differences of reward between the items of one cluster, whatever its error on each
    cluster's level. The two steps fit exactly that:

    1. **Within clusters**: :math:`\hat h` is a ridge regression on ``[x, one-hot(a),
       x ⊗ one-hot(a), x ⊗ one-hot(c(a))]`` fitted to the rows' differences from their group's mean (the group of a row
       is its logged item's cluster, and with ``pair_column`` also that column's value, e.g. the
       user). This is the least-squares form of the reference's pairwise loss
       :math:`\sum_{i,j \in g}((r_i - r_j) - (\hat h_i - \hat h_j))^2`, which equals
       :math:`2 n_g \sum_{i \in g}((r_i - \bar r_g) - (\hat h_i - \bar h_g))^2` in each group
       (the reference weighs groups by their size ``n_g``, this fit weighs rows equally, or by
       their sampling weights). Each
       item's intercept and context slopes are learned from its differences with the other
       items of its cluster, shrunk towards its cluster's (never towards another cluster's).
    2. **Cluster level**: :math:`\hat g` is a ridge regression of the residual
       :math:`r - \hat h(x, a)` on ``[1, x, one-hot(c), x ⊗ one-hot(c)]``.

    Both are linear, and a cluster's terms are its items', so each fold's model is one linear
    model on the items' design ``[x, one-hot(a), x ⊗ one-hot(a)]``: the fitted model is a
    :class:`FittedRewardModel` whose predictions at (row, item) pairs are gathers.

    Parameters
    ----------
    alpha : float, default DEFAULT_RIDGE_ALPHA
        Ridge penalty of both steps (the intercept of step 2 is not penalized).
    n_folds : int, default 5
        Cross-fitting folds: each row is predicted by the model fitted on the other folds.
    rng : int, numpy.random.Generator or None
        Randomness of the fold assignment, recorded as the fitted model's ``seed_``.
    interactions : bool, default True
        Include the context slopes of items and clusters (``x ⊗ one-hot(a)``,
        ``x ⊗ one-hot(c)``); without them each item and cluster has an intercept only.
    pair_column : str, optional
        A log column (user or session id) whose rows share a context: step 1 then compares items
        only within (that value, cluster), as the reference's pairs of one user's observations.
    chunk_size : int, default 65_536
        (row, item) pairs predicted at once.

    References
    ----------
    .. [1] Y. Saito, Q. Ren and T. Joachims, "Off-policy evaluation for large action spaces via
       conjunct effect modeling", ICML 2023, arXiv:2305.08062 (§4, the two-step regression).

    Examples
    --------
    >>> import numpy as np
    >>> from ope.reward_models import TwoStepRewardModel
    >>> rng = np.random.default_rng(0)
    >>> n = 4000
    >>> x = rng.normal(size=(n, 1))
    >>> a = rng.integers(0, 6, size=n)
    >>> clusters = np.array([0, 0, 0, 1, 1, 1])        # items 0-2 in cluster 0, 3-5 in 1
    >>> item = np.array([0.0, 0.2, 0.4, 0.0, -0.3, 0.3])
    >>> r = 1.0 + x[:, 0] * (clusters[a] == 1) + item[a] + 0.1 * rng.normal(size=n)
    >>> fitted = TwoStepRewardModel(rng=0).fit(x, a, r, clusters=clusters)
    >>> q = fitted.predict(np.zeros((6, 1)), np.arange(6))
    >>> np.round(q[1:3] - q[0], 1), np.round(q[4:] - q[3], 1)   # within-cluster differences
    (array([0.2, 0.4]), array([-0.3,  0.3]))
    """

    alpha: float = DEFAULT_RIDGE_ALPHA
    n_folds: int = 5
    rng: int | np.random.Generator | None = None
    interactions: bool = True
    pair_column: str | None = None
    chunk_size: int = 65_536

    #: the settings FittedRewardModel reads of a RewardModel
    cross_fit: bool = True
    estimator: Any = None

    def __post_init__(self) -> None:
        check_positive_int(self.n_folds, "n_folds", minimum=2)
        check_positive_int(self.chunk_size, "chunk_size")
        check_rng(self.rng)
        v = self.alpha
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0 or v == np.inf:
            raise ParameterError(f"alpha must be a finite number >= 0; got {v!r}.")
        if not isinstance(self.interactions, (bool, np.bool_)):
            raise ParameterError(f"interactions must be True or False; got {self.interactions!r}.")
        if self.cross_fit is not True or self.estimator is not None:
            raise ParameterError(
                "TwoStepRewardModel is always cross-fitted ridge regressions; cross_fit and "
                "estimator cannot be changed (use RewardModel for another estimator)."
            )
        if self.pair_column is not None and not isinstance(self.pair_column, str):
            raise ParameterError(
                f"pair_column must be a column name (str) or None; got {self.pair_column!r}."
            )

    def fit(
        self,
        context: ArrayLike,
        action: ArrayLike,
        reward: ArrayLike,
        *,
        clusters: ArrayLike,
        n_actions: int | None = None,
        groups: ArrayLike | None = None,
        sample_weight: ArrayLike | None = None,
    ) -> FittedRewardModel:
        """Fit both steps once per fold; out-of-fold predictions of the logged items.

        Parameters
        ----------
        context : array-like, shape (n, d)
        action : array-like of int, shape (n,)
            Logged item codes in ``0..n_actions-1``.
        reward : array-like, shape (n,)
        clusters : array-like of int, shape (n_actions,)
            The cluster code (``0..G-1``) of each item code.
        n_actions : int, optional
            Catalog size; default ``len(clusters)``.
        groups : array-like, shape (n,), optional
            The rows' ``pair_column`` values: step 1 compares items within (group, cluster).
        sample_weight : array-like, shape (n,), optional
            The rows' sampling weights: both steps weigh each row's squared error (and the
            group means of step 1) by them, as :meth:`RewardModel.fit` does. Equal weights give
            the unweighted fit exactly.

        Returns
        -------
        FittedRewardModel
        """
        x = _as_context(context)
        n, d = x.shape
        c = np.asarray(clusters)
        if c.ndim != 1 or c.size == 0 or not np.issubdtype(c.dtype, np.integer) or c.min() < 0:
            raise SchemaError(
                "`clusters` must be a 1-d array of cluster codes >= 0, one per item code; got "
                f"shape {c.shape}, dtype {c.dtype}."
            )
        if n_actions is not None:
            check_positive_int(n_actions, "n_actions")
        k = int(c.size if n_actions is None else n_actions)
        if k != c.size:
            raise SchemaError(f"`clusters` has {c.size} entries for n_actions={k} items.")
        a = _as_actions(action, n, k)
        y = _as_reward(reward, n)
        weight = varying_sampling_weight(sample_weight, n)  # equal weights: unweighted
        if n < self.n_folds:
            raise EstimationError(
                f"{n} rows cannot be split into n_folds={self.n_folds} folds; use fewer folds "
                "(n_folds >= 2) or more rows."
            )
        _, c = np.unique(c, return_inverse=True)
        c = c.astype(np.int64)
        n_clusters = int(c.max()) + 1
        inter = bool(self.interactions)
        design = _Design(d, k, None, inter, True)  # [x, one-hot(a), x ⊗ one-hot(a)]
        if design.n_columns > MAX_DESIGN_COLUMNS:
            raise EstimationError(
                f"the two-step model would have {design.n_columns:,} coefficients ({k:,} items, "
                f"{d} context features), more than MAX_DESIGN_COLUMNS = {MAX_DESIGN_COLUMNS:,}; "
                "use interactions=False or fewer context features."
            )
        cluster_design = _Design(d, n_clusters, None, inter, True)  # the same over clusters
        within = c[a]
        if groups is not None:
            g = np.asarray(groups)
            if g.shape != (n,):
                raise SchemaError(f"`groups` must have one value per row ({n}); got {g.shape}.")
            _, g_codes = np.unique(g, return_inverse=True)
            within = g_codes.astype(np.int64) * n_clusters + within
        items_x = design.build(x, a)
        clusters_x = cluster_design.build(x, c[a])
        # step 1: the items' design and the clusters' x ⊗ one-hot(c) block (item slopes shrink
        # towards their cluster's); the clusters' own intercepts are constant within a group
        first = sp.hstack([items_x, clusters_x[:, d + n_clusters :]], format="csr")

        seed, gen = resolve_seed(self.rng)
        fold = fold_assignment(n, self.n_folds, gen)
        estimators: list[Any] = []
        q_logged = np.empty(n, dtype=_FLOAT)
        p1 = items_x.shape[1]
        for f in progress(
            range(self.n_folds), desc="two-step fit", total=self.n_folds, unit="fold"
        ):
            test = np.flatnonzero(fold == f)
            train = np.flatnonzero(fold != f)
            phi1 = first[train]
            s_train = None if weight is None else weight[train]
            beta1 = _within_ridge(phi1, y[train], within[train], self.alpha, s_train)
            resid = y[train] - phi1 @ beta1
            phi2 = clusters_x[train]
            one_group = np.zeros(train.size, dtype=np.int64)
            beta2 = _within_ridge(phi2, resid, one_group, self.alpha, s_train)
            # fold both steps into the items' design: a cluster's terms become its items'
            coef = beta1[:p1].copy()
            coef[:d] += beta2[:d]
            coef[d : d + k] += beta2[d : d + n_clusters][c]
            if inter and d:
                slopes = beta1[p1:].reshape(n_clusters, d) + beta2[d + n_clusters :].reshape(
                    n_clusters, d
                )
                coef[d + k :] += slopes[c].ravel()
            level = resid - phi2 @ beta2
            intercept = np.mean(level) if s_train is None else np.average(level, weights=s_train)
            est = _LinearFold(coef, float(intercept))
            estimators.append(est)
            q_logged[test] = est.predict(items_x[test])
        return FittedRewardModel(
            model=self,  # type: ignore[arg-type]  # the settings it reads are here too
            estimators=estimators,
            fold=fold,
            n_actions=k,
            reward_values=None,
            design=design,
            context=x,
            q_logged=q_logged,
            seed=seed,
        )
