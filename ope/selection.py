r"""Off-policy selection metrics: how well a ranking picks among candidates when the truth is known.

Off-policy *evaluation* asks how good one policy is; off-policy *selection* asks which of many
candidates to ship. A selection rule ranks the candidates by a score computed from the logs (the
estimated value, a lower confidence bound, the safety gate's verdict) and ships the top one, or
keeps the logging policy when nothing is approved. In simulation (``ope.simulate``) the exact
value of every candidate is known, so the rule itself can be scored:

- :func:`selection_regret`: best true value minus the best true value among the ``k`` chosen;
- :func:`rank_correlation`: Spearman's rho and Kendall's tau-b of the scores and the truth;
- :func:`approval_error_rates`: how often a policy no better than logging is approved, and how
  often a better one is rejected;
- :func:`selection_report`: all of them for every estimator × rule of one evaluation, as a tidy
  table (columns :data:`SELECTION_COLUMNS`).

Every function works on arrays over candidates (no loop over candidates); ties in the scores
are broken uniformly at random and the metrics are their exact expectation over that choice.
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from collections.abc import Mapping
from typing import Any, Final, NamedTuple

import numpy as np
import numpy.typing as npt

from ope._validation import (
    as_float_array,
    check_finite,
    check_flag,
    check_positive_int,
    check_real,
    power_of_two_scale,
    FLOAT64_MAX,
)
from ope.exceptions import ParameterError, ValidationError

__all__ = [
    "selection_regret",
    "rank_correlation",
    "approval_error_rates",
    "selection_report",
    "RankCorrelation",
    "ApprovalErrorRates",
    "SELECTION_RULES",
    "SELECTION_COLUMNS",
]

#: The selection rules of :func:`selection_report`: rank by the estimated value, by the lower
#: confidence bound (``ci_low``), or by the safety gate (approved candidates first).
SELECTION_RULES: Final = ("value", "lower_bound", "gate")

#: Columns of :func:`selection_report`, one row per estimator × rule.
SELECTION_COLUMNS: Final = (
    "estimator",
    "rule",
    "n_candidates",
    "k",
    "regret_top1",
    "regret_topk",
    "spearman",
    "kendall",
    "n_approved",
    "approve_worse_rate",
    "reject_better_rate",
    "deployed_improvement",
)


class RankCorrelation(NamedTuple):
    """Rank agreement of scores with the true values (NaN when either is constant)."""

    spearman: float
    kendall: float


class ApprovalErrorRates(NamedTuple):
    """Error rates of an approval decision against the logging policy's true value.

    ``approve_worse``: share of the candidates no better than logging that were approved (NaN
    when there are none); ``reject_better``: share of the truly better ones that were rejected
    (NaN when there are none); ``n_worse``, ``n_better``: the two denominators.
    """

    approve_worse: float
    reject_better: float
    n_worse: int
    n_better: int


#: Candidate labels shown in a message before it says how many more differ.
_MAX_SHOWN_LABELS: Final = 5


def _labelled(values: Any) -> tuple[list[Any], list[Any]] | None:
    """``(labels, values)`` of a mapping or a pandas Series (labelled by candidate), else None
    (an array or a list, read by position)."""
    if isinstance(values, Mapping):
        return list(values.keys()), list(values.values())
    pandas = sys.modules.get("pandas")  # not imported: no Series can have been built
    if pandas is not None and isinstance(values, pandas.Series):
        return list(values.index), list(values.to_numpy())
    return None


def _shown_labels(labels: list[Any]) -> str:
    more = len(labels) - _MAX_SHOWN_LABELS
    return ", ".join(map(repr, labels[:_MAX_SHOWN_LABELS])) + (
        f" (+{more} more)" if more > 0 else ""
    )


def _aligned(true_values: Any, scores: Any, score_name: str) -> tuple[Any, Any]:
    """``true_values`` and ``scores`` paired by candidate label when both carry labels (a
    mapping or a pandas Series each), in the order of ``true_values``; else as given (paired by
    position)."""
    left, right = _labelled(true_values), _labelled(scores)
    if left is None or right is None:
        return true_values, scores
    for name, (labels, _) in (("true_values", left), (score_name, right)):
        repeated = [x for x, c in Counter(labels).items() if c > 1]
        if repeated:
            raise ValidationError(
                f"`{name}` repeats the candidate label(s) {_shown_labels(repeated)}; with "
                f"labels, `true_values` and `{score_name}` are paired by label, so each "
                "candidate must appear once. Drop the duplicates."
            )
    position = {label: i for i, label in enumerate(right[0])}
    only_left = [x for x in left[0] if x not in position]
    in_left = set(left[0])
    only_right = [x for x in right[0] if x not in in_left]
    if only_left or only_right:
        parts = [
            f"{_shown_labels(labels)} only in `{name}`"
            for name, labels in (("true_values", only_left), (score_name, only_right))
            if labels
        ]
        raise ValidationError(
            f"`true_values` and `{score_name}` are labelled by candidate but their labels "
            f"differ: {'; '.join(parts)}. Give both the same candidates (e.g. "
            f"{score_name}.reindex(true_values.index)), or pass plain arrays to pair them by "
            "position."
        )
    return left[1], [right[1][position[x]] for x in left[0]]


def _candidate_arrays(
    true_values: npt.ArrayLike, scores: npt.ArrayLike, score_name: str
) -> tuple[np.ndarray, np.ndarray]:
    """True values and scores over the same candidates, float64, finite, shape (P,), P >= 1.

    Two labelled inputs (mappings or pandas Series) are paired by label (their label sets
    must be equal); anything else is paired by position."""
    true_values, scores = _aligned(true_values, scores, score_name)
    v = np.asarray(as_float_array(true_values, "true_values", ndim=(1,)), dtype=np.float64)
    s = np.asarray(as_float_array(scores, score_name, ndim=(1,)), dtype=np.float64)
    if v.shape != s.shape:
        raise ValidationError(
            f"`true_values` has {v.shape[0]} candidates but `{score_name}` has {s.shape[0]}; "
            "both must list the same candidates in the same order."
        )
    if v.size == 0:
        raise ValidationError("there are no candidates: `true_values` is empty.")
    check_finite(v, "true_values")
    check_finite(s, score_name)
    return v, s


def _check_k(k: Any, n_candidates: int) -> int:
    k = check_positive_int(k, "k")
    if k > n_candidates:
        raise ParameterError(
            f"`k` must be at most the number of candidates ({n_candidates}); got k={k}. "
            "Top-k regret with k >= the number of candidates is always 0: lower k."
        )
    return k


def _log_comb(a: np.ndarray | float, b: float) -> np.ndarray:
    """log of the binomial coefficient C(a, b) for a >= b >= 0 (floats, via log-gamma)."""
    from scipy.special import gammaln

    return gammaln(a + 1.0) - gammaln(b + 1.0) - gammaln(a - b + 1.0)


def _expected_best_chosen(v: np.ndarray, s: np.ndarray, k: int) -> float:
    r"""Expected best true value among the top-``k`` scores, ties broken uniformly at random.

    With :math:`t` the k-th largest score, every candidate scored above :math:`t` is chosen
    and :math:`j` of the :math:`m` tied at :math:`t` are drawn without replacement; the
    :math:`i`-th best of the tied (by true value) is the best drawn with probability
    :math:`\binom{m-i}{j-1}/\binom{m}{j}`.
    """
    t = -np.partition(-s, k - 1)[k - 1]
    above = s > t
    n_above = int(np.count_nonzero(above))
    best_above = float(v[above].max()) if n_above else -math.inf
    tied = np.sort(v[s == t])[::-1]
    m, j = tied.size, k - n_above
    i = np.arange(1, m + 1, dtype=np.float64)
    possible = (m - i) >= (j - 1)
    log_p = _log_comb(np.where(possible, m - i, j - 1.0), j - 1.0) - _log_comb(
        np.float64(m), float(j)
    )
    prob = np.where(possible, np.exp(log_p), 0.0)
    return float(prob @ np.maximum(tied, best_above))


def selection_regret(
    true_values: npt.ArrayLike,
    scores: npt.ArrayLike,
    *,
    k: int = 1,
    normalize: bool = False,
) -> float:
    r"""Regret of choosing the ``k`` candidates with the highest scores.

    Parameters
    ----------
    true_values : array-like of shape (P,), or mapping / pandas.Series by candidate
        True value of each candidate (exact, from a simulator).
    scores : array-like of shape (P,), or mapping / pandas.Series by candidate
        What the selection rule ranks by (an estimate, a lower bound, ...), higher is better.
        When both arguments are labelled (mappings or Series) they are paired by label and
        must hold the same candidates; otherwise they are paired by position.
    k : int, default 1
        Size of the chosen set, ``1 <= k <= P`` (a larger ``k`` is a :class:`ParameterError`).
    normalize : bool, default False
        Divide by the spread ``max(true_values) - min(true_values)`` of the candidates, so that
        0 is the best possible choice and 1 the worst (0 when all candidates are equally good).

    Returns
    -------
    float
        :math:`\max_p V_p - \mathbb E\,\max_{p \in \text{top-}k} V_p`, at least 0.

    Raises
    ------
    ope.ValidationError
        Without ``normalize``, when the regret exceeds float64 (true values near +-1e308):
        rescale them.

    Notes
    -----
    Ties among the scores at the cut are broken uniformly at random and the regret is the exact
    expectation over that draw (no sampling). Regret@k is the measure of off-policy selection
    benchmarks: the value lost by shipping the best of the shortlisted candidates instead of
    the truly best one.

    References
    ----------
    .. [1] J. Fu, M. Norouzi, O. Nachum, G. Tucker, Z. Wang, A. Novikov, M. Yang, M. R. Zhang,
       Y. Chen, A. Kumar, C. Paduraru, S. Levine and T. L. Paine, "Benchmarks for deep
       off-policy evaluation", ICLR 2021.

    Examples
    --------
    >>> from ope.selection import selection_regret
    >>> selection_regret([1.0, 2.0, 3.0], [0.9, 0.1, 0.5])           # picks 1.0, best is 3.0
    2.0
    >>> selection_regret([1.0, 2.0, 3.0], [0.9, 0.1, 0.5], k=2)      # picks {1.0, 3.0}
    0.0
    >>> selection_regret([1.0, 2.0, 3.0], [0.5, 0.5, 0.1])           # a tie: (2 + 1) / 2 on average
    1.5
    >>> selection_regret([1.0, 2.0, 3.0], [0.9, 0.1, 0.5], normalize=True)
    1.0
    """
    v, s = _candidate_arrays(true_values, scores, "scores")
    k = _check_k(k, v.size)
    normalized = check_flag(normalize, "normalize")
    if normalized:
        # the ratio does not depend on the unit: in units of a power of two (exact) the spread
        # and the regret stay finite even when the values' range exceeds float64
        unit = power_of_two_scale(float(v.min()), float(v.max()))
        v = v / unit
    best = float(v.max())
    regret = max(best - _expected_best_chosen(v, s, k), 0.0)  # Python floats: inf, no warning
    if not normalized:
        if not math.isfinite(regret):
            peak = max(abs(float(v.min())), abs(best))
            raise ValidationError(
                f"the regret overflows float64: `true_values` reach |value| {peak:.4g} and "
                f"differ by more than {FLOAT64_MAX:.4g}. Rescale `true_values` (e.g. divide "
                "by 1e10) and scale the regret back, or pass normalize=True."
            )
        return regret
    spread = best - float(v.min())
    return regret / spread if spread > 0 else 0.0


def rank_correlation(true_values: npt.ArrayLike, scores: npt.ArrayLike) -> RankCorrelation:
    r"""Spearman's rho and Kendall's tau-b between the scores and the true values.

    Parameters
    ----------
    true_values : array-like of shape (P,), or mapping / pandas.Series by candidate
        True value of each candidate.
    scores : array-like of shape (P,), or mapping / pandas.Series by candidate
        The selection rule's scores; paired with ``true_values`` by label when both are
        labelled, else by position (as in :func:`selection_regret`).

    Returns
    -------
    RankCorrelation
        ``spearman`` (Pearson correlation of the average ranks) and ``kendall`` (tau-b, which
        corrects for ties in either argument). Both are NaN when the scores or the true values
        are all equal (fewer than two candidates included).

    Notes
    -----
    Ties get average ranks (Spearman) and the tau-b denominator
    :math:`\sqrt{(n_0 - n_1)(n_0 - n_2)}` (Kendall), as in ``scipy.stats``; both run in
    :math:`O(P \log P)`.

    Examples
    --------
    >>> from ope.selection import rank_correlation
    >>> rank_correlation([1.0, 2.0, 3.0, 4.0], [10.0, 20.0, 30.0, 40.0])
    RankCorrelation(spearman=1.0, kendall=1.0)
    >>> rc = rank_correlation([1.0, 2.0, 3.0], [1.0, 1.0, 2.0])   # a tie in the scores
    >>> round(rc.spearman, 6), round(rc.kendall, 6)
    (0.866025, 0.816497)
    """
    from scipy import stats

    v, s = _candidate_arrays(true_values, scores, "scores")
    # min == max, not ptp == 0: the range of finite values near 1e308 overflows
    if v.size < 2 or v.min() == v.max() or s.min() == s.max():
        return RankCorrelation(math.nan, math.nan)
    rv, rs = stats.rankdata(v), stats.rankdata(s)
    spearman = float(np.corrcoef(rv, rs)[0, 1])
    kendall = float(stats.kendalltau(v, s, variant="b").statistic)
    return RankCorrelation(spearman, kendall)


def approval_error_rates(
    true_values: npt.ArrayLike, approved: npt.ArrayLike, logging_value: float
) -> ApprovalErrorRates:
    r"""Rates of approving a candidate no better than logging and of rejecting a better one.

    Parameters
    ----------
    true_values : array-like of shape (P,)
        True value of each candidate.
    approved : array-like of bool, shape (P,)
        The decision for each candidate (True: approved for deployment).
    logging_value : float
        True value of the logging policy.

    Returns
    -------
    ApprovalErrorRates
        ``approve_worse`` = #(approved and :math:`V_p \le V_0`) / #(:math:`V_p \le V_0`) and
        ``reject_better`` = #(rejected and :math:`V_p > V_0`) / #(:math:`V_p > V_0`); each NaN
        when its denominator is 0.

    Notes
    -----
    "No better than logging" includes a tie, as in the guarantee of
    :class:`ope.learning.SafetyGate`: a policy with :math:`V_p \le V_0` is approved with
    probability at most :math:`1 - c`, so ``approve_worse`` is the rate that guarantee bounds
    (per candidate), and ``reject_better`` is the price paid for it.

    Examples
    --------
    >>> from ope.selection import approval_error_rates
    >>> approval_error_rates([0.1, 0.2, 0.5, 0.6, 0.7], [True, False, False, True, True], 0.3)
    ApprovalErrorRates(approve_worse=0.5, reject_better=0.3333333333333333, n_worse=2, n_better=3)
    """
    v = np.asarray(as_float_array(true_values, "true_values", ndim=(1,)), dtype=np.float64)
    check_finite(v, "true_values")
    a = np.asarray(approved)
    if a.dtype != np.bool_:
        raise ValidationError(
            f"`approved` must be an array of bool (True = approved); got dtype {a.dtype}. "
            "Convert verdicts with e.g. numpy.asarray(verdicts) == 'approve'."
        )
    if a.shape != v.shape:
        raise ValidationError(
            f"`approved` has shape {a.shape} but `true_values` has {v.shape}; both must list "
            "the same candidates."
        )
    v0 = check_real(logging_value, "logging_value")
    if not math.isfinite(v0):
        raise ParameterError(f"`logging_value` must be finite; got {v0!r}.")
    better = v > v0
    n_better = int(np.count_nonzero(better))
    n_worse = int(v.size - n_better)
    approve_worse = float(np.count_nonzero(a & ~better)) / n_worse if n_worse else math.nan
    reject_better = float(np.count_nonzero(~a & better)) / n_better if n_better else math.nan
    return ApprovalErrorRates(approve_worse, reject_better, n_worse, n_better)


def _gate_verdicts(gate: Any, policies: list[str]) -> np.ndarray:
    """Approval (bool) of each policy from a mapping or a ``rank_policies`` table."""
    if hasattr(gate, "columns"):  # a DataFrame: rank_policies' table or policy/verdict
        cols = set(gate.columns)
        if "policy" not in cols or not cols & {"improvement_lower_bound", "verdict", "approved"}:
            raise ParameterError(
                "`gate` as a table needs a `policy` column and one of `approved` (bool), "
                "`verdict` ('approve'/'reject') or `improvement_lower_bound` (the table of "
                f"ope.learning.rank_policies, approved when > 0); got columns {sorted(cols)}."
            )
        if "approved" in cols:
            flags = gate["approved"].to_numpy()
        elif "verdict" in cols:
            flags = gate["verdict"].to_numpy() == "approve"
        else:
            flags = gate["improvement_lower_bound"].to_numpy(dtype=np.float64) > 0.0
        mapping = dict(zip(gate["policy"].astype(str), flags))
    elif isinstance(gate, Mapping):
        mapping = {
            str(p): (getattr(x, "verdict", x) == "approve")
            if not isinstance(x, (bool, np.bool_))
            else bool(x)
            for p, x in gate.items()
        }
    else:
        raise ParameterError(
            "`gate` must be a mapping of policy name to verdict (bool, 'approve'/'reject' or a "
            "Certificate) or the table of ope.learning.rank_policies; got "
            f"{type(gate).__name__}."
        )
    missing = [p for p in policies if p not in mapping]
    if missing:
        raise ParameterError(f"`gate` has no verdict for the policies {missing}.")
    return np.array([bool(mapping[p]) for p in policies], dtype=bool)


def _deployed_value(
    v: np.ndarray, s: np.ndarray, approved: np.ndarray, logging_value: float
) -> float:
    """Expected true value shipped: the top-scored approved candidate, else the logging policy."""
    if not approved.any():
        return logging_value
    return _expected_best_chosen(v[approved], s[approved], 1)


def selection_report(
    evaluation: Any,
    true_values: Mapping[str, float] | Any,
    *,
    logging_value: float,
    baseline: float | None = None,
    gate: Any = None,
    k: int = 1,
    normalize: bool = False,
) -> Any:
    r"""Selection metrics of every estimator × rule of one evaluation, as a tidy table.

    Parameters
    ----------
    evaluation : ope.Evaluation or pandas.DataFrame
        The result of :func:`ope.evaluate`, or its ``table()`` (columns ``policy``,
        ``estimator``, ``value``, ``ci_low``), over the candidate policies.
    true_values : mapping of str to float (or pandas.Series indexed by policy)
        True value of each candidate (e.g. ``env.true_value(name)``); every policy of the
        evaluation must be present.
    logging_value : float
        True value of the logging policy (``env.true_value("logging")``), which decides which
        candidates are truly better.
    baseline : float, optional
        The *estimated* logging value that the ``value`` and ``lower_bound`` rules must beat to
        approve a candidate. Default: ``evaluation.logging.value`` (the logged mean reward);
        required when ``evaluation`` is a table.
    gate : mapping or pandas.DataFrame, optional
        Verdicts of the safety gate (:func:`ope.learning.rank_policies`' table, approved when
        ``improvement_lower_bound > 0``, or a mapping of policy to bool / ``"approve"`` /
        :class:`ope.learning.Certificate`). Adds the ``gate`` rule; omitted when None.
    k : int, default 1
        Size of the shortlist of ``regret_topk`` (``1 <= k <=`` number of candidates).
    normalize : bool, default False
        Report regrets divided by the spread of the candidates' true values.

    Returns
    -------
    pandas.DataFrame
        One row per estimator × rule with the columns :data:`SELECTION_COLUMNS`:
        ``regret_top1``/``regret_topk`` (:func:`selection_regret`), ``spearman``/``kendall``
        (:func:`rank_correlation`), ``n_approved``, ``approve_worse_rate``/
        ``reject_better_rate`` (:func:`approval_error_rates`) and ``deployed_improvement``, the
        true value shipped minus ``logging_value``.

    Notes
    -----
    The rules, each with a score (ranking) and an approval:

    =============== ======================================== ==================================
    rule            score                                    approved when
    =============== ======================================== ==================================
    ``value``       the estimate :math:`\hat V_p`            :math:`\hat V_p >` ``baseline``
    ``lower_bound`` ``ci_low`` of the evaluation's interval  ``ci_low >`` ``baseline``
    ``gate``        approved first, then :math:`\hat V_p`     the gate approves
    =============== ======================================== ==================================

    The rule ships its top-scored approved candidate, or keeps the logging policy when it
    approves none (``deployed_improvement`` 0). The gate's verdicts are the same for every
    estimator; the estimator only orders the approved candidates.

    Examples
    --------
    >>> import pandas as pd
    >>> from ope.selection import selection_report
    >>> table = pd.DataFrame({"policy": ["a", "b", "c"], "estimator": "ips",
    ...                       "value": [0.30, 0.60, 0.50], "ci_low": [0.20, 0.40, 0.45]})
    >>> truth = {"a": 0.2, "b": 0.4, "c": 0.6}
    >>> rep = selection_report(table, truth, logging_value=0.3, baseline=0.42,
    ...                        gate={"a": False, "b": False, "c": True})
    >>> rep[["rule", "regret_top1", "n_approved", "deployed_improvement"]].round(6)
              rule  regret_top1  n_approved  deployed_improvement
    0        value          0.2           2                   0.1
    1  lower_bound          0.0           1                   0.3
    2         gate          0.0           1                   0.3
    """
    import pandas as pd

    if hasattr(evaluation, "table") and callable(evaluation.table):
        table = evaluation.table()
        if baseline is None:
            baseline = evaluation.logging.value
    elif isinstance(evaluation, pd.DataFrame):
        table = evaluation
    else:
        raise ParameterError(
            "`evaluation` must be an ope.Evaluation (from ope.evaluate) or its table(); got "
            f"{type(evaluation).__name__}."
        )
    missing_cols = [c for c in ("policy", "estimator", "value", "ci_low") if c not in table]
    if missing_cols:
        raise ParameterError(f"the evaluation table lacks the columns {missing_cols}.")
    if baseline is None:
        raise ParameterError(
            "`baseline` (the estimated logging value the candidates must beat) is needed when "
            "`evaluation` is a table; pass e.g. baseline=ev.logging.value."
        )
    check_flag(normalize, "normalize")
    base = check_real(baseline, "baseline")
    v0 = check_real(logging_value, "logging_value")
    if not (math.isfinite(base) and math.isfinite(v0)):
        raise ParameterError(
            f"`baseline` and `logging_value` must be finite; got {base!r} and {v0!r}."
        )
    policies = list(dict.fromkeys(table["policy"].astype(str)))
    estimators = list(dict.fromkeys(table["estimator"].astype(str)))
    truth = dict(true_values.items()) if hasattr(true_values, "items") else None
    if truth is None:
        raise ParameterError(
            "`true_values` must be a mapping (or pandas.Series) of policy name to true value; "
            f"got {type(true_values).__name__}."
        )
    absent = [p for p in policies if p not in truth]
    if absent:
        raise ParameterError(f"`true_values` has no value for the policies {absent}.")
    v = np.array([check_real(truth[p], f"true_values[{p!r}]") for p in policies])
    check_finite(v, "true_values")
    k = _check_k(k, len(policies))
    key = pd.MultiIndex.from_product([policies, estimators], names=["policy", "estimator"])
    wide = table.assign(
        policy=table["policy"].astype(str), estimator=table["estimator"].astype(str)
    ).set_index(["policy", "estimator"])
    if wide.index.has_duplicates:
        raise ValidationError("the evaluation table has repeated (policy, estimator) rows.")
    wide = wide.reindex(key)
    values = wide["value"].to_numpy(np.float64).reshape(len(policies), len(estimators))
    lows = wide["ci_low"].to_numpy(np.float64).reshape(len(policies), len(estimators))
    gate_ok = None if gate is None else _gate_verdicts(gate, policies)

    rows = []
    for j, estimator in enumerate(estimators):  # loop over estimators × rules, not candidates
        rules: list[tuple[str, np.ndarray, np.ndarray]] = [
            ("value", values[:, j], values[:, j] > base),
            ("lower_bound", lows[:, j], lows[:, j] > base),
        ]
        if gate_ok is not None:
            est = values[:, j]
            spread = float(np.ptp(est)) if np.isfinite(est).all() else 0.0
            rules.append(("gate", est + gate_ok * (spread + 1.0), gate_ok))
        for rule, score, approved in rules:
            name = f"{rule} of {estimator}"
            s = np.asarray(as_float_array(score, name, ndim=(1,)), dtype=np.float64)
            check_finite(s, name)
            corr = rank_correlation(v, s)
            errors = approval_error_rates(v, approved, v0)
            rows.append(
                {
                    "estimator": estimator,
                    "rule": rule,
                    "n_candidates": len(policies),
                    "k": k,
                    "regret_top1": selection_regret(v, s, k=1, normalize=normalize),
                    "regret_topk": selection_regret(v, s, k=k, normalize=normalize),
                    "spearman": corr.spearman,
                    "kendall": corr.kendall,
                    "n_approved": int(np.count_nonzero(approved)),
                    "approve_worse_rate": errors.approve_worse,
                    "reject_better_rate": errors.reject_better,
                    "deployed_improvement": _deployed_value(v, s, approved, v0) - v0,
                }
            )
    return pd.DataFrame(rows, columns=list(SELECTION_COLUMNS))
