"""Policy objects: candidate policies computed from the logs.

:class:`UniformPolicy`, :class:`EpsilonGreedyPolicy`, :class:`DeterministicPolicy`,
:class:`SoftmaxPolicy` and :class:`ClassifierPolicy` implement the :class:`Policy` protocol:
``distribution(logs)`` (a sparse :class:`~ope.policies.PolicyDistribution` over each row's
support) and ``propensity(logs)`` (the probability of each logged action). Each class supplies
only the step that differs, its distribution given the encoded actions.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ope._validation import check_label_kinds, check_names, check_real, describe
from ope.context import context_matrix
from ope.exceptions import ParameterError, PolicyError, SchemaError, ValidationError
from ope.logs import BanditLogs
from ope.policies._core import (
    float_values,
    ActionIndex,
    PolicyDistribution,
    action_column,
    action_index,
    aligned_list,
    as_label_array,
    candidate_sets,
    canonical_csr,
    examples,
    is_policy,
    label_codes,
    labels_to_numpy,
    lookup,
    matrix_over,
    require_logs,
    rows_of,
    rows_text,
)

__all__ = [
    "Policy",
    "UniformPolicy",
    "EpsilonGreedyPolicy",
    "DeterministicPolicy",
    "SoftmaxPolicy",
    "ClassifierPolicy",
]


@runtime_checkable
class Policy(Protocol):
    """What a policy object provides: its distribution on logs, and its logged-action probability.

    Both methods are vectorized over rows. ``propensity(logs)`` equals
    ``distribution(logs).probability(logs.column("action"))`` but may be cheaper.
    """

    def distribution(self, logs: BanditLogs) -> PolicyDistribution: ...

    def propensity(self, logs: BanditLogs) -> npt.NDArray[np.float64]: ...


class _PolicyBase(ABC):
    """Shared ``distribution``/``propensity`` of the policy classes; each supplies one step."""

    def propensity(self, logs: BanditLogs) -> npt.NDArray[np.float64]:
        """``pi(a_i | x_i)`` for the logged actions, shape (n,)."""
        logs = require_logs(logs, f"{type(self).__name__}.propensity")
        index = action_index(logs, self._extra_labels(logs))
        dist = self._distribution(logs, index)
        return lookup(dist.matrix, index.logged)

    def distribution(self, logs: BanditLogs) -> PolicyDistribution:
        """The distribution over each row's support."""
        logs = require_logs(logs, f"{type(self).__name__}.distribution")
        return self._distribution(logs, action_index(logs, self._extra_labels(logs)))

    def _extra_labels(self, logs: BanditLogs) -> list[pa.Array]:
        """Action labels the policy may choose beyond the logged actions and candidates."""
        return []

    @abstractmethod
    def _distribution(self, logs: BanditLogs, index: ActionIndex) -> PolicyDistribution:
        """The distribution, with the logs' actions already encoded in ``index``."""


def _validate_actions(actions: Any, *, owner: str) -> tuple[Any, ...] | None:
    """The action labels a policy was given: a flat list of distinct whole numbers or texts.

    A label of another kind (a float, NaN, a list, an object) can never equal a logged action
    (int64 or string), so it is refused here rather than when the policy is first used.
    """
    if actions is None:
        return None
    if isinstance(actions, (str, bytes)):
        raise PolicyError(
            f"{owner}: actions must be a list of action labels, got the string {actions!r}."
        )
    arr = np.asarray(actions, dtype=object) if _iterable(actions) else None
    if arr is None or arr.ndim != 1:
        got = describe(actions) if arr is None else f"an array of shape {arr.shape}"
        raise PolicyError(
            f"{owner}: actions must be a flat list of action labels (whole numbers or texts, as "
            f"in the logs' `action` column); got {got}."
        )
    values = tuple(v.item() if isinstance(v, np.generic) else v for v in arr)
    if not values:
        raise PolicyError(f"{owner}: actions must not be empty.")
    for i, v in enumerate(values):  # loop over the K labels (a handful)
        if isinstance(v, bool) or not isinstance(v, (int, str)):
            raise PolicyError(
                f"{owner}: actions must hold action labels (whole numbers or texts, as in the "
                f"logs' `action` column); its item {i} is {describe(v)}."
            )
    check_label_kinds(np.asarray(values, dtype=object), "actions")
    if len(set(values)) != len(values):
        raise PolicyError(f"{owner}: actions must be distinct; got {examples(list(values))}.")
    return values


def _iterable(value: Any) -> bool:
    try:
        iter(value)
    except TypeError:
        return False
    return True


def _validate_feature_columns(feature_columns: Any, *, owner: str) -> tuple[str, ...]:
    if isinstance(feature_columns, str):
        feature_columns = [feature_columns]
    try:
        cols = tuple(
            check_names(feature_columns, "feature_columns", example="feature_columns=['x0', 'x1']")
        )
    except ParameterError as exc:
        raise ParameterError(f"{owner}: {exc}") from None
    if not cols:
        raise PolicyError(f"{owner}: feature_columns must be a non-empty list of column names.")
    return cols


def _context_matrix(
    logs: BanditLogs, feature_columns: Sequence[str], *, owner: str
) -> npt.NDArray[np.float64]:
    """The policy's feature matrix (n, d) from the one context-matrix builder (ope.context);
    a non-finite feature is the policy's input problem, so it is a PolicyError here."""
    try:
        return context_matrix(logs, feature_columns, role="policy")
    except SchemaError as exc:
        raise SchemaError(f"{owner}: {exc}") from None
    except ValidationError as exc:
        raise PolicyError(f"{owner}: {exc}") from None


@dataclass(frozen=True)
class UniformPolicy(_PolicyBase):
    """The uniform policy over each row's candidate set.

    Parameters
    ----------
    actions : sequence of labels, optional
        The action set used when the logs have no ``candidates`` column. When the logs have
        ``candidates``, each row's candidate set is used and ``actions`` is ignored.

    Notes
    -----
    With candidate set :math:`C_i` in row ``i``,

    .. math:: \\pi(a \\mid x_i) = \\frac{\\mathbb 1[a \\in C_i]}{|C_i|}.

    Without candidates, :math:`C_i` is ``actions`` for every row; the distribution then stores
    ``n * len(actions)`` entries, so keep that list small (``propensity`` needs only one number
    per row whatever its size).

    References
    ----------
    .. [1] Li, L., Chu, W., Langford, J. and Schapire, R. E. (2010). A contextual-bandit approach
       to personalized news article recommendation. Proceedings of the 19th International
       Conference on World Wide Web (WWW), 661-670.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from ope.logs import BanditLogs, ValidationReport
    >>> t = pa.table({"action": [1, 2], "propensity": [0.5, 0.5], "reward": [1.0, 0.0],
    ...               "candidates": [[1, 2], [2, 3, 4, 5]]})
    >>> logs = BanditLogs(t, ValidationReport(source="<doc>", rows_read=2, rows_used=2))
    >>> UniformPolicy().propensity(logs).tolist()
    [0.5, 0.25]
    """

    _: KW_ONLY
    actions: Sequence[Any] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "actions", _validate_actions(self.actions, owner="UniformPolicy"))

    def _extra_labels(self, logs: BanditLogs) -> list[pa.Array]:
        if self.actions is None or "candidates" in logs.table.column_names:
            return []
        return [as_label_array(self.actions, action_column(logs).type, "UniformPolicy actions")]

    def _no_support(self) -> PolicyError:
        return PolicyError(
            "UniformPolicy needs a support: the logs have no `candidates` column, so pass "
            "UniformPolicy(actions=[...]) with the action set."
        )

    def propensity(self, logs: BanditLogs) -> npt.NDArray[np.float64]:
        """``pi(a_i | x_i)`` for the logged actions, without building the distribution."""
        logs = require_logs(logs, "UniformPolicy.propensity")
        if "candidates" in logs.table.column_names:
            return super().propensity(logs)
        if self.actions is None:
            raise self._no_support()
        action = action_column(logs)
        labels = as_label_array(self.actions, action.type, "UniformPolicy actions")
        inside = label_codes(action, labels) >= 0
        return np.where(inside, 1.0 / len(labels), 0.0)

    def _distribution(self, logs: BanditLogs, index: ActionIndex) -> PolicyDistribution:
        import scipy.sparse as sp

        n = logs.n
        if index.candidates is not None:
            cand = candidate_sets(index, what="UniformPolicy")
            lengths = cand.lengths
            empty = lengths == 0
            if empty.any():
                raise PolicyError(
                    f"UniformPolicy: the candidate set is empty in {rows_text(empty)}."
                )
            probs = np.repeat(1.0 / lengths, lengths)
            m = canonical_csr(n, index.n_actions, cand.indptr, cand.codes, probs)
            return PolicyDistribution(m, index.actions)
        if self.actions is None:
            raise self._no_support()
        codes = np.sort(index.codes(as_label_array(self.actions, index.catalog.type, "actions")))
        k = codes.size
        indptr = np.arange(0, (n + 1) * k, k, dtype=np.int64)
        m = sp.csr_array(
            (np.full(n * k, 1.0 / k), np.tile(codes.astype(np.int64), n), indptr),
            shape=(n, index.n_actions),
        )
        return PolicyDistribution(m, index.actions)


@dataclass(frozen=True)
class EpsilonGreedyPolicy:
    """A base policy mixed with the uniform policy over the same support.

    Parameters
    ----------
    base : Policy
        The greedy part, e.g. a :class:`DeterministicPolicy`.
    epsilon : float
        Exploration rate in ``[0, 1]``.
    actions : sequence of labels, optional
        The support of the uniform part when the logs have no ``candidates``; defaults to the
        base policy's ``actions`` when it has one.

    Notes
    -----
    .. math:: \\pi(a \\mid x) = (1 - \\varepsilon)\\, \\pi_{\\mathrm{base}}(a \\mid x)
              + \\varepsilon\\, \\pi_{\\mathrm{unif}}(a \\mid x),

    where :math:`\\pi_{\\mathrm{unif}}` is :class:`UniformPolicy` over the row's candidate set
    (or over ``actions``).

    References
    ----------
    .. [1] Sutton, R. S. and Barto, A. G. (2018). Reinforcement Learning: An Introduction,
       2nd edition, Section 2.2. MIT Press.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from ope.logs import BanditLogs, ValidationReport
    >>> t = pa.table({"action": [1, 2], "propensity": [0.5, 0.5], "reward": [1.0, 0.0],
    ...               "candidates": [[1, 2], [1, 2]], "scores": [[0.9, 0.1], [0.9, 0.1]]})
    >>> logs = BanditLogs(t, ValidationReport(source="<doc>", rows_read=2, rows_used=2))
    >>> pol = EpsilonGreedyPolicy(DeterministicPolicy("scores"), 0.2)
    >>> pol.propensity(logs).tolist()
    [0.9, 0.1]
    """

    base: Policy
    epsilon: float
    _: KW_ONLY
    actions: Sequence[Any] | None = None

    def __post_init__(self) -> None:
        if not is_policy(self.base):
            raise PolicyError(
                f"EpsilonGreedyPolicy: base must be a policy object with distribution(logs) and "
                f"propensity(logs) methods, got {type(self.base).__name__}."
            )
        eps = check_real(self.epsilon, "epsilon")
        if not 0.0 <= eps <= 1.0:
            raise ParameterError(
                f"EpsilonGreedyPolicy: epsilon must be a number in [0, 1], got {self.epsilon!r}."
            )
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(
            self, "actions", _validate_actions(self.actions, owner="EpsilonGreedyPolicy")
        )

    def _uniform(self) -> UniformPolicy:
        actions = self.actions if self.actions is not None else getattr(self.base, "actions", None)
        return UniformPolicy(actions=actions)

    def propensity(self, logs: BanditLogs) -> npt.NDArray[np.float64]:
        """``(1 - epsilon) * base.propensity(logs) + epsilon * uniform.propensity(logs)``."""
        logs = require_logs(logs, "EpsilonGreedyPolicy.propensity")
        base = float_values(
            self.base.propensity(logs), f"{type(self.base).__name__}.propensity(logs)"
        )
        if self.epsilon == 0.0:
            return base
        return (1.0 - self.epsilon) * base + self.epsilon * self._uniform().propensity(logs)

    def distribution(self, logs: BanditLogs) -> PolicyDistribution:
        """The mixture, over the union of the two parts' action catalogs."""
        import scipy.sparse as sp

        logs = require_logs(logs, "EpsilonGreedyPolicy.distribution")
        base = self.base.distribution(logs)
        if self.epsilon == 0.0:
            return base
        unif = self._uniform().distribution(logs)
        labels = [pa.array(d.actions.tolist()) for d in (base, unif)]
        catalog = pc.unique(pa.chunked_array(labels))
        catalog = catalog.take(pc.sort_indices(catalog))
        m = (1.0 - self.epsilon) * matrix_over(base, catalog) + self.epsilon * matrix_over(
            unif, catalog
        )
        m = sp.csr_array(m)
        m.sum_duplicates()
        m.eliminate_zeros()
        return PolicyDistribution(m, labels_to_numpy(catalog))


class _ScorePolicy(_PolicyBase):
    """Shared machinery of policies defined by per-candidate scores."""

    scores: str | Callable[[npt.NDArray[np.float64]], npt.ArrayLike]
    actions: Sequence[Any] | None
    feature_columns: Sequence[str] | None

    def _validate_scores(self, owner: str) -> None:
        if isinstance(self.scores, str):
            if self.actions is not None or self.feature_columns is not None:
                raise PolicyError(
                    f"{owner}: scores={self.scores!r} names a list column aligned with `candidates`; "
                    "actions= and feature_columns= are only used with a callable scores."
                )
            return
        if not callable(self.scores):
            raise PolicyError(
                f"{owner}: scores must be the name of a list<float64> column aligned with "
                f"`candidates` or a callable, got {type(self.scores).__name__}."
            )
        if self.actions is None or self.feature_columns is None:
            raise PolicyError(
                f"{owner}: a callable scores needs actions=[...] (the labels of its K output "
                "columns) and feature_columns=[...] (the columns of its input matrix)."
            )
        object.__setattr__(self, "actions", _validate_actions(self.actions, owner=owner))
        object.__setattr__(
            self, "feature_columns", _validate_feature_columns(self.feature_columns, owner=owner)
        )

    def _extra_labels(self, logs: BanditLogs) -> list[pa.Array]:
        if isinstance(self.scores, str):
            return []
        return [
            as_label_array(self.actions, action_column(logs).type, f"{type(self).__name__} actions")
        ]

    def _segments(
        self, logs: BanditLogs, index: ActionIndex
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32], npt.NDArray[np.float64]]:
        """Per-row (indptr, codes, scores) over each row's support; -inf marks excluded actions."""
        import scipy.sparse as sp

        owner = type(self).__name__
        n = logs.n
        if isinstance(self.scores, str):
            cand = candidate_sets(index, what=f"{owner}(scores={self.scores!r})")
            scores = aligned_list(logs, self.scores, cand, what=owner)
            indptr, codes = cand.indptr, cand.codes
        else:
            labels = as_label_array(self.actions, index.catalog.type, f"{owner} actions")
            action_codes = index.codes(labels)
            k = action_codes.size
            assert self.feature_columns is not None  # __post_init__ requires it with a callable
            X = _context_matrix(logs, self.feature_columns, owner=owner)
            S = float_values(self.scores(X), f"{owner}: scores(X)")
            if S.shape != (n, k):
                raise PolicyError(
                    f"{owner}: scores(X) must return an array of shape (n, len(actions)) = "
                    f"({n}, {k}); got {S.shape}."
                )
            if index.candidates is not None:
                # restrict to each row's candidates: a dense (n, K) mask, K = len(actions) is small
                cand = candidate_sets(index, what=owner)
                member = sp.csr_array(
                    (
                        np.ones(cand.codes.size, dtype=bool),
                        cand.codes.astype(np.int64),
                        cand.indptr,
                    ),
                    shape=(n, index.n_actions),
                )
                mask = member[:, action_codes.astype(np.int64)].toarray()
                S = np.where(mask, S, -np.inf)
            indptr = np.arange(0, (n + 1) * k, k, dtype=np.int64)
            codes = np.tile(action_codes, n)
            scores = S.ravel()
        bad = np.isnan(scores) | (scores == np.inf)
        if bad.any():
            rows = np.zeros(n, dtype=bool)
            rows[rows_of(indptr)[bad]] = True
            raise PolicyError(f"{owner}: scores are NaN or +inf in {rows_text(rows)}.")
        lengths = np.diff(indptr)
        empty = lengths == 0
        if empty.any():
            raise PolicyError(
                f"{owner}: no action to choose from (empty candidate set) in {rows_text(empty)}."
            )
        row_max = np.maximum.reduceat(scores, indptr[:-1]) if n else np.zeros(0)
        none = row_max == -np.inf
        if none.any():
            raise PolicyError(
                f"{owner}: every score is -inf (or no listed action is a candidate) in {rows_text(none)}."
            )
        return indptr, codes, scores


@dataclass(frozen=True)
class DeterministicPolicy(_ScorePolicy):
    """Choose the highest-scoring action of each row.

    Parameters
    ----------
    scores : str or callable
        Either the name of a ``list<float64>`` column aligned with ``candidates`` (one score per
        candidate), or a callable mapping the context matrix ``X`` of shape (n, d) to scores of
        shape (n, K) for the fixed ``actions`` list. The callable form builds a dense (n, K)
        array, so it is for small K; for large catalogs log per-candidate scores instead.
    actions : sequence of labels, optional
        The K action labels of the callable's output columns (callable form only).
    feature_columns : sequence of str, optional
        The columns stacked into ``X`` (numeric columns, or fixed-length numeric list columns),
        in order (callable form only).

    Notes
    -----
    .. math:: \\pi(a \\mid x_i) = \\mathbb 1\\big[a = \\operatorname{argmax}_{b \\in C_i} s(x_i, b)\\big].

    Ties go to the first maximal action in the row's order: the first candidate in the logged
    ``candidates`` list, or the first of ``actions`` for a callable (as ``numpy.argmax``). With a
    callable and logs that have ``candidates``, actions outside a row's candidate set are
    excluded. A score of ``-inf`` excludes an action; NaN or ``+inf`` scores are errors.

    References
    ----------
    .. [1] Dudík, M., Langford, J. and Li, L. (2011). Doubly robust policy evaluation and learning.
       Proceedings of the 28th International Conference on Machine Learning (ICML), 1097-1104.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from ope.logs import BanditLogs, ValidationReport
    >>> t = pa.table({"action": ["x", "y"], "propensity": [0.5, 0.5], "reward": [1.0, 0.0],
    ...               "candidates": [["x", "y"], ["x", "y"]], "s": [[2.0, 1.0], [3.0, 3.0]]})
    >>> logs = BanditLogs(t, ValidationReport(source="<doc>", rows_read=2, rows_used=2))
    >>> DeterministicPolicy("s").propensity(logs).tolist()   # row 2 is a tie: "x" wins
    [1.0, 0.0]
    """

    scores: str | Callable[[npt.NDArray[np.float64]], npt.ArrayLike]
    _: KW_ONLY
    actions: Sequence[Any] | None = None
    feature_columns: Sequence[str] | None = None

    def __post_init__(self) -> None:
        self._validate_scores("DeterministicPolicy")

    def _distribution(self, logs: BanditLogs, index: ActionIndex) -> PolicyDistribution:
        import scipy.sparse as sp

        n = logs.n
        indptr, codes, scores = self._segments(logs, index)
        row_max = np.maximum.reduceat(scores, indptr[:-1]) if n else np.zeros(0)
        rows = rows_of(indptr)
        pos = np.flatnonzero(scores == row_max[rows])
        first = pos[np.r_[True, rows[pos[1:]] != rows[pos[:-1]]]] if pos.size else pos
        m = sp.csr_array(
            (np.ones(n), codes[first].astype(np.int64), np.arange(n + 1, dtype=np.int64)),
            shape=(n, index.n_actions),
        )
        return PolicyDistribution(m, index.actions)


@dataclass(frozen=True)
class SoftmaxPolicy(_ScorePolicy):
    """Softmax (Boltzmann) policy over each row's scores.

    Parameters
    ----------
    scores : str or callable
        As for :class:`DeterministicPolicy`.
    temperature : float, default 1.0
        Positive and finite. Small values approach the argmax policy, large ones the uniform.
    actions, feature_columns
        As for :class:`DeterministicPolicy` (callable form only).

    Notes
    -----
    .. math:: \\pi(a \\mid x_i) = \\frac{\\exp\\big((s(x_i, a) - m_i)/\\tau\\big)}
              {\\sum_{b \\in C_i} \\exp\\big((s(x_i, b) - m_i)/\\tau\\big)},
              \\qquad m_i = \\max_{b \\in C_i} s(x_i, b).

    Subtracting the row maximum :math:`m_i` leaves the value unchanged and keeps every exponent
    :math:`\\le 0`, so nothing overflows and the denominator is at least 1 [2]_. A score of
    ``-inf`` gives probability 0; entries that underflow to 0 are not stored.

    References
    ----------
    .. [1] Sutton, R. S. and Barto, A. G. (2018). Reinforcement Learning: An Introduction,
       2nd edition, Section 2.8. MIT Press.
    .. [2] Blanchard, P., Higham, D. J. and Higham, N. J. (2021). Accurately computing the
       log-sum-exp and softmax functions. IMA Journal of Numerical Analysis, 41(4), 2311-2330.

    Examples
    --------
    >>> import numpy as np, pyarrow as pa
    >>> from ope.logs import BanditLogs, ValidationReport
    >>> t = pa.table({"action": [1], "propensity": [0.5], "reward": [1.0],
    ...               "candidates": [[1, 2]], "s": [[np.log(3.0), 0.0]]})
    >>> logs = BanditLogs(t, ValidationReport(source="<doc>", rows_read=1, rows_used=1))
    >>> SoftmaxPolicy("s", temperature=1.0).propensity(logs).round(6).tolist()
    [0.75]
    """

    scores: str | Callable[[npt.NDArray[np.float64]], npt.ArrayLike]
    temperature: float = 1.0
    _: KW_ONLY
    actions: Sequence[Any] | None = None
    feature_columns: Sequence[str] | None = None

    def __post_init__(self) -> None:
        t = check_real(self.temperature, "temperature")
        if not (math.isfinite(t) and t > 0.0):
            raise ParameterError(
                f"SoftmaxPolicy: temperature must be a finite number > 0, got {self.temperature!r}."
            )
        object.__setattr__(self, "temperature", t)
        self._validate_scores("SoftmaxPolicy")

    def _distribution(self, logs: BanditLogs, index: ActionIndex) -> PolicyDistribution:
        n = logs.n
        indptr, codes, scores = self._segments(logs, index)
        starts = indptr[:-1]
        rows = rows_of(indptr)
        row_max = np.maximum.reduceat(scores, starts) if n else np.zeros(0)
        e = np.exp((scores - row_max[rows]) / self.temperature)
        total = np.add.reduceat(e, starts) if n else np.zeros(0)
        probs = e / total[rows]
        m = canonical_csr(n, index.n_actions, indptr, codes, probs)
        return PolicyDistribution(m, index.actions)


@dataclass(frozen=True, eq=False)
class ClassifierPolicy(_PolicyBase):
    """A fitted scikit-learn classifier's ``predict_proba`` as a policy.

    Parameters
    ----------
    estimator : fitted classifier
        Any object with ``predict_proba(X)`` and ``classes_`` (the action labels of its output
        columns), e.g. ``sklearn.linear_model.LogisticRegression`` fitted on (context, action).
    feature_columns : sequence of str
        The columns stacked, in order, into the matrix ``X`` passed to ``predict_proba``
        (numeric columns, or fixed-length numeric list columns).

    Notes
    -----
    .. math:: \\pi(a \\mid x_i) = \\hat P(A = a \\mid X = x_i) \\text{ for } a \\in
              \\texttt{classes\\_}, \\qquad 0 \\text{ otherwise.}

    The row's ``candidates`` are not used: the classifier's probabilities are taken as they are.
    ``predict_proba`` returns a dense (n, len(classes_)) array, so this is for a modest number
    of classes. A classifier of the logged actions is the direct-method policy of Dudík et al.
    (2011), cited under :class:`DeterministicPolicy`.

    Examples
    --------
    >>> import numpy as np, pyarrow as pa
    >>> from sklearn.linear_model import LogisticRegression
    >>> from ope.logs import BanditLogs, ValidationReport
    >>> x = np.array([0.0, 0.1, 0.9, 1.0])
    >>> clf = LogisticRegression().fit(x.reshape(-1, 1), [1, 1, 2, 2])
    >>> t = pa.table({"action": [1, 1, 2, 2], "propensity": [0.5] * 4, "reward": [1.0] * 4, "x": x})
    >>> logs = BanditLogs(t, ValidationReport(source="<doc>", rows_read=4, rows_used=4))
    >>> p = ClassifierPolicy(clf, ["x"]).propensity(logs)
    >>> bool(np.allclose(p, clf.predict_proba(x.reshape(-1, 1))[[0, 1, 2, 3], [0, 0, 1, 1]]))
    True
    """

    estimator: Any
    feature_columns: Sequence[str]

    def __post_init__(self) -> None:
        if not callable(getattr(self.estimator, "predict_proba", None)):
            raise PolicyError(
                f"ClassifierPolicy: estimator must have a predict_proba method, got "
                f"{type(self.estimator).__name__}."
            )
        object.__setattr__(
            self,
            "feature_columns",
            _validate_feature_columns(self.feature_columns, owner="ClassifierPolicy"),
        )

    def _classes(self) -> npt.NDArray[Any]:
        classes = getattr(self.estimator, "classes_", None)
        if classes is None:
            raise PolicyError(
                f"ClassifierPolicy: {type(self.estimator).__name__} is not fitted (it has no "
                "classes_); call fit(X, action) first."
            )
        classes = np.asarray(classes)
        if classes.ndim != 1:
            raise PolicyError(
                f"ClassifierPolicy: classes_ of {type(self.estimator).__name__} must be one label "
                f"per predict_proba column (1-d); got shape {classes.shape}."
            )
        check_label_kinds(classes, "classes_")
        labels, counts = np.unique(classes, return_counts=True)
        if (counts > 1).any():
            dup = np.flatnonzero(counts > 1)
            where = np.flatnonzero(classes == labels[dup[0]])
            shown = ", ".join(repr(v) for v in labels[dup[:5]].tolist())
            raise PolicyError(
                f"ClassifierPolicy: classes_ of {type(self.estimator).__name__} repeats the "
                f"label(s) {shown} (first at columns {', '.join(map(str, where[:5].tolist()))}): "
                "two predict_proba columns would give one action two probabilities. Each action "
                "must have one column; refit the classifier on the action labels."
            )
        return classes

    def _extra_labels(self, logs: BanditLogs) -> list[pa.Array]:
        return [
            as_label_array(self._classes(), action_column(logs).type, "ClassifierPolicy classes_")
        ]

    def _distribution(self, logs: BanditLogs, index: ActionIndex) -> PolicyDistribution:
        import scipy.sparse as sp

        n = logs.n
        classes = self._classes()
        codes = index.codes(
            as_label_array(classes, index.catalog.type, "ClassifierPolicy classes_")
        )
        X = _context_matrix(logs, self.feature_columns, owner="ClassifierPolicy")
        proba = float_values(
            self.estimator.predict_proba(X), f"{type(self).__name__}: predict_proba(X)"
        )
        k = codes.size
        if proba.shape != (n, k):
            raise PolicyError(
                f"ClassifierPolicy: predict_proba returned shape {proba.shape}; expected "
                f"(n, len(classes_)) = ({n}, {k})."
            )
        order = np.argsort(codes, kind="stable")
        indptr = np.arange(0, (n + 1) * k, k, dtype=np.int64)
        m = sp.csr_array(
            (proba[:, order].ravel(), np.tile(codes[order].astype(np.int64), n), indptr),
            shape=(n, index.n_actions),
        )
        m.eliminate_zeros()
        return PolicyDistribution(m, index.actions)
