"""Logs from several logging policies: checks per logger and pooled estimation.

Logs often mix policy versions (an A/B test, a rollout, a model refresh). The column
``logging_policy`` names the logger of each row; ``propensity`` stays the probability *that row's*
logger gave to its action. :func:`check_loggers` reports rows, propensity ranges and support per
logger. :func:`evaluate_loggers` pools the rows through :func:`ope.evaluate` with weights chosen
explicitly:

- ``weighting="per_logger"``: each row weighted by its own logger, :math:`w_i = \\pi_e / \\pi_{j(i)}`;
- ``weighting="balanced"``: each row weighted by the mixture of all loggers,
  :math:`w_i = \\pi_e / \\bar\\pi` with :math:`\\bar\\pi(a|x) = \\sum_j (n_j/n)\\, \\pi_j(a|x)`
  (Agarwal et al. 2017); with sampling weights :math:`s` (the ``weight`` column) the shares
  are each logger's sum of weights, :math:`\\hat N_j / \\hat N = \\sum_{i \\in j} s_i / \\sum_i s_i`,
  its share of the traffic rather than of the kept rows. The mixture needs every logger's probability of each logged action:
  columns ``propensity__<logger>`` (one per logger), or a long table of
  ``event_id, logging_policy, propensity`` rows (:func:`balanced_propensities`);
- ``weighting="precision"``: each logger's stratum estimated on its own rows with its own
  propensities, :math:`\\hat V_j`, and the strata combined with weights inversely proportional
  to their variances, :math:`\\hat V = \\sum_j c_j \\hat V_j`, :math:`c_j \\propto 1/\\widehat{se}_j^2`
  (precision-weighted IS of Kallus, Saito & Uehara 2021; weighted IPS of Agarwal et al.
  2017): it needs only each row's own propensity. Its standard error is the stratified one,
  :math:`(\\sum_j 1/\\widehat{se}_j^2)^{-1/2}`.

All three are unbiased when every logger covers the candidate's actions (precision weighting
asymptotically: its weights are estimated on the same rows). The balanced weights are bounded by
:math:`n / n_j` times each logger's own weight, so a logger with poor overlap does not blow up
the variance of the pooled estimate; precision weighting gives such a logger's stratum a small
weight instead, without the other loggers' propensities.

The example of :func:`evaluate_loggers` pools two loggers both ways.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import pandas as pd
import pyarrow as pa

from ope._thresholds import PROPENSITY_TOLERANCE, kish_ess
from ope._validation import check_choice, describe, first_rows
from ope.exceptions import EstimationError, ParameterError, SchemaError, ValidationError
from ope.logs import BanditLogs, as_log_table
from ope.weights import table_sampling_weights, varying_sampling_weight
from ope.results import Result, ResultParts, RowSource, make_estimate

__all__ = [
    "LOGGER_COLUMN",
    "LOGGER_PROPENSITY_PREFIX",
    "WEIGHTINGS",
    "LoggerCheck",
    "check_loggers",
    "logger_propensities",
    "balanced_propensities",
    "evaluate_loggers",
]

#: The column naming each row's logging policy.
LOGGER_COLUMN: Final = "logging_policy"
#: ``propensity__<logger>``: logger ``<logger>``'s probability of the row's logged action.
LOGGER_PROPENSITY_PREFIX: Final = "propensity__"
WEIGHTINGS: Final = ("per_logger", "balanced", "precision")
_LONG_COLUMNS: Final = ("event_id", LOGGER_COLUMN, "propensity")


def _loggers(table: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(names, per-row code, rows per logger) of the ``logging_policy`` column."""
    if LOGGER_COLUMN not in table.column_names:
        raise SchemaError(
            f"the logs have no `{LOGGER_COLUMN}` column; name each row's logging policy there "
            f"(e.g. the model version). They have: {', '.join(table.column_names)}."
        )
    col = table.column(LOGGER_COLUMN).combine_chunks()
    if col.null_count:
        count, first = first_rows(col.is_null().to_numpy(zero_copy_only=False))
        raise ValidationError(
            f"`{LOGGER_COLUMN}` is missing on {count} rows (first at row {first}); every row "
            "needs its logger."
        )
    values = np.asarray(col.to_numpy(zero_copy_only=False)).astype(str)
    names, codes, counts = np.unique(values, return_inverse=True, return_counts=True)
    return names, codes, counts


def _varying_weights(table: pa.Table) -> tuple[str | None, np.ndarray | None]:
    """The column of the rows' sampling weights and their values, ``(None, None)`` without one
    or when they are all equal (the unweighted numbers, exactly, and no note)."""
    column, s = table_sampling_weights(table)
    if s is None or varying_sampling_weight(s, s.size, name=str(column)) is None:
        return None, None
    return column, s


def _logger_totals(codes: np.ndarray, counts: np.ndarray, s: np.ndarray | None) -> np.ndarray:
    """Each logger's estimated share of the traffic: its rows over all rows, or with sampling
    weights ``s`` its sum of weights over the total (the Horvitz-Thompson population sizes)."""
    if s is None:
        return counts / counts.sum()
    totals = np.bincount(codes, weights=s, minlength=counts.size)
    return totals / totals.sum()


def _float_column(table: pa.Table, name: str) -> np.ndarray:
    col = table.column(name)
    if not (pa.types.is_floating(col.type) or pa.types.is_integer(col.type)):
        raise SchemaError(f"column {name!r} has type {col.type}, not a probability.")
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.float64)


# --------------------------------------------------------------------------- checks
@dataclass(frozen=True)
class LoggerCheck(Result):
    """Rows, propensity ranges and support of each logging policy (:func:`check_loggers`).

    Attributes
    ----------
    table : pandas.DataFrame
        One row per logger: ``logging_policy``, ``rows``, ``share``, ``propensity_min``,
        ``propensity_median``, ``propensity_max``, ``actions`` (distinct actions logged) and,
        per candidate policy, ``ess_share__<policy>`` (Kish ESS / rows of its weights on that
        logger's rows). With sampling weights ``s`` (the ``weight`` column) ``share`` is the
        logger's sum of weights over the total (its share of the traffic) and
        ``ess_share__<policy>`` Kish's ESS of ``s w`` over Kish's ESS of ``s``.
    n : int
    has_all_propensities : bool
        Every logger's probability of every logged action is present (``propensity__<logger>``
        columns), so ``weighting="balanced"`` is possible.
    notes : tuple of str
    """

    table: pd.DataFrame
    n: int
    has_all_propensities: bool
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with stable keys."""
        rows = [
            {k: (v.item() if isinstance(v, np.generic) else v) for k, v in r.items()}
            for r in self.table.to_dict(orient="records")
        ]
        return {
            "n": self.n,
            "loggers": rows,
            "has_all_propensities": self.has_all_propensities,
            "notes": list(self.notes),
        }

    def _parts(self) -> ResultParts:
        return ResultParts(
            title=f"Logging policies: {len(self.table)}",
            fields=(("rows", self.n), ("balanced weighting possible", self.has_all_propensities)),
            table=self.table,
            notes=self.notes,
        )


def check_loggers(logs: Any) -> LoggerCheck:
    """Per-logger rows, propensity ranges, support and candidate overlap.

    Parameters
    ----------
    logs : BanditLogs, pyarrow.Table or pandas.DataFrame
        Validated logs with a ``logging_policy`` column.

    Returns
    -------
    LoggerCheck

    Examples
    --------
    >>> import pyarrow as pa
    >>> t = pa.table({"action": [0, 1, 0], "reward": [1.0, 0.0, 1.0],
    ...               "propensity": [0.5, 0.5, 0.9], "logging_policy": ["A", "A", "B"]})
    >>> check_loggers(t).table[["logging_policy", "rows", "actions"]].values.tolist()
    [['A', 2, 2], ['B', 1, 1]]
    """
    table = as_log_table(logs)
    names, codes, counts = _loggers(table)
    p = _float_column(table, "propensity")
    action = np.asarray(table.column("action").to_numpy(zero_copy_only=False))
    frame = pd.DataFrame({LOGGER_COLUMN: names[codes], "p": p, "action": action})
    g = frame.groupby(LOGGER_COLUMN, sort=True)
    out = g.agg(
        rows=("p", "size"),
        propensity_min=("p", "min"),
        propensity_median=("p", "median"),
        propensity_max=("p", "max"),
        actions=("action", "nunique"),
    ).reset_index()
    column, s = _varying_weights(table)
    out.insert(2, "share", _logger_totals(codes, counts, s))
    notes = []
    if column is not None:
        assert s is not None
        notes.append(
            f"rows carry sampling weights (column `{column}`): each logger's share is its sum "
            "of weights over the total (its share of the traffic, not of the kept rows), and "
            "ess_share is Kish's effective sample of s·w over that of s alone"
        )
    sw = np.ones(table.num_rows) if s is None else s
    base = counts.astype(np.float64)
    if s is not None:
        base = np.array(
            [
                kish_ess(a, b)
                for a, b in zip(
                    np.bincount(codes, weights=s, minlength=names.size),
                    np.bincount(codes, weights=s * s, minlength=names.size),
                )
            ]
        )  # a loop over loggers
    targets = [c for c in table.column_names if c.startswith("target__")]
    for col in targets:  # loop over candidate policies
        w = sw * _float_column(table, col) / p
        s1 = np.bincount(codes, weights=w, minlength=names.size)
        s2 = np.bincount(codes, weights=w * w, minlength=names.size)
        ess = np.array([kish_ess(a, b) for a, b in zip(s1, s2)])  # loop over loggers
        out[f"ess_share__{col[len('target__') :]}"] = ess / base
    present = [f"{LOGGER_PROPENSITY_PREFIX}{n}" in table.column_names for n in names]
    if not all(present):
        missing = [str(n) for n, ok in zip(names, present) if not ok]
        notes.append(
            f"no {LOGGER_PROPENSITY_PREFIX}<logger> column for {missing}: only "
            'weighting="per_logger" is possible (balanced weighting needs every logger\'s '
            "probability of each logged action)."
        )
    few = out.loc[out["actions"] < out["actions"].max(), LOGGER_COLUMN].tolist()
    if few:
        notes.append(
            f"logger(s) {few} logged fewer distinct actions than the others: their support is "
            "narrower; per-logger weights on their rows cannot reach the missing actions."
        )
    return LoggerCheck(
        table=out, n=len(frame), has_all_propensities=all(present), notes=tuple(notes)
    )


# --------------------------------------------------------------------------- propensities
def _pivot_long(table: pa.Table, long: Any, names: np.ndarray) -> dict[str, np.ndarray]:
    """``propensity__<logger>`` arrays from a long table (event_id, logging_policy, propensity)."""
    if not isinstance(long, (pd.DataFrame, pa.Table, BanditLogs)):
        raise ParameterError(
            f"`long_table` must be a pandas.DataFrame or a pyarrow.Table with the columns "
            f"{', '.join(_LONG_COLUMNS)} (one row per event and logger); got {describe(long)}."
        )
    frame = long if isinstance(long, pd.DataFrame) else as_log_table(long).to_pandas()
    missing = [c for c in _LONG_COLUMNS if c not in frame.columns]
    if missing:
        raise SchemaError(
            f"`long_table` lacks the columns {missing}; it needs one row per event and logger "
            f"with columns {list(_LONG_COLUMNS)}."
        )
    if "event_id" not in table.column_names:
        raise SchemaError("the logs need `event_id` to join a long propensity table.")
    frame = frame.assign(**{LOGGER_COLUMN: frame[LOGGER_COLUMN].astype(str)})
    dup = frame.duplicated(["event_id", LOGGER_COLUMN])
    if dup.any():
        raise ValidationError(
            f"the long propensity table repeats {int(dup.sum())} (event_id, logging_policy) "
            f"pairs (first at row {int(np.flatnonzero(dup)[0])}); give each pair once."
        )
    wide = frame.pivot(index="event_id", columns=LOGGER_COLUMN, values="propensity")
    ids = pd.Index(table.column("event_id").to_pandas())
    wide = wide.reindex(index=ids, columns=[str(n) for n in names])
    if wide.isna().to_numpy().any():
        bad = wide.isna().to_numpy().any(axis=1)
        count, first = first_rows(bad)
        raise ValidationError(
            f"the long propensity table lacks some logger's probability for {count} events "
            f"(first at row {first}); balanced weighting needs every logger on every event."
        )
    return {str(n): wide[str(n)].to_numpy(dtype=np.float64) for n in names}


def logger_propensities(logs: Any, *, long_table: Any = None) -> dict[str, np.ndarray]:
    """Every logger's probability of each logged action, validated.

    Parameters
    ----------
    logs : BanditLogs, pyarrow.Table or pandas.DataFrame
        Logs with ``logging_policy`` and, unless ``long_table`` is given, one column
        ``propensity__<logger>`` per logger.
    long_table : pandas.DataFrame or pyarrow.Table, optional
        Rows ``event_id, logging_policy, propensity``: logger ``logging_policy``'s probability
        of event ``event_id``'s logged action, for every event and logger.

    Returns
    -------
    dict of str to ndarray
        Logger name to its per-row probabilities.

    Raises
    ------
    ope.SchemaError
        A logger without its column, or a ``target__<policy>__<logger>`` column (that would
        read as a factored candidate of ``ope.evaluate``).
    ope.ValidationError
        A probability outside [0, 1] or not finite, or a row whose own logger's probability
        differs from its ``propensity``.
    """
    table = as_log_table(logs)
    if table.num_rows == 0:
        raise ValidationError(
            "the logs have no rows: every logger's probability of each logged action needs "
            "logged rows."
        )
    names, codes, _ = _loggers(table)
    if long_table is not None:
        probs = _pivot_long(table, long_table, names)
    else:
        missing = [
            str(n) for n in names if f"{LOGGER_PROPENSITY_PREFIX}{n}" not in table.column_names
        ]
        if missing:
            raise SchemaError(
                f"balanced weighting needs every logger's probability of each logged action; "
                f"columns {[LOGGER_PROPENSITY_PREFIX + m for m in missing]} are missing. Add "
                'them, pass long_table=, or use weighting="per_logger".'
            )
        probs = {str(n): _float_column(table, f"{LOGGER_PROPENSITY_PREFIX}{n}") for n in names}
    clash = [
        c
        for c in table.column_names
        for n in names
        if c.startswith("target__") and c.endswith(f"__{n}")
    ]
    if clash:
        raise SchemaError(
            f"columns {clash} would be read as factored candidates next to "
            f"{LOGGER_PROPENSITY_PREFIX}<logger>; rename the candidate policies."
        )
    for name, q in probs.items():  # loop over loggers
        bad = ~(np.isfinite(q) & (q >= 0.0) & (q <= 1.0))
        if bad.any():
            count, first = first_rows(bad)
            raise ValidationError(
                f"{LOGGER_PROPENSITY_PREFIX}{name} must be a probability in [0, 1]; {count} rows "
                f"are not (first at row {first})."
            )
    p = _float_column(table, "propensity")
    own = np.column_stack([probs[str(n)] for n in names])[np.arange(p.size), codes]
    bad = np.abs(own - p) > PROPENSITY_TOLERANCE * np.maximum(1.0, p)
    if bad.any():
        count, first = first_rows(bad)
        raise ValidationError(
            f"{count} rows' own logger's probability ({LOGGER_PROPENSITY_PREFIX}<its "
            f"logging_policy>) differs from their `propensity` (first at row {first}): the two "
            "must be the same number."
        )
    return probs


def balanced_propensities(logs: Any, *, long_table: Any = None) -> BanditLogs:
    r"""Logs whose ``propensity`` is the mixture of all loggers (the balanced propensity).

    Parameters
    ----------
    logs, long_table
        As in :func:`logger_propensities`.

    Returns
    -------
    BanditLogs
        Validated logs with ``propensity`` = :math:`\bar\pi(a_i|x_i)`, without the
        ``propensity__<logger>`` columns; the schema metadata records
        ``ope.weighting = "balanced"``.

    Notes
    -----
    With :math:`n_j` rows from logger :math:`j`,
    :math:`\bar\pi(a|x) = \sum_j \frac{n_j}{n} \pi_j(a|x)`. Pooled, the rows are a sample from
    :math:`\bar\pi` (stratified by logger), so :math:`\frac1n\sum_i r_i\pi_e/\bar\pi` is unbiased
    wherever :math:`\bar\pi > 0`, and its weights never exceed :math:`n/n_j` times logger
    :math:`j`'s own. When the rows carry sampling weights :math:`s_i` (the ``weight`` column:
    row :math:`i` was kept with probability :math:`1/s_i`), :math:`n_j` and :math:`n` are the
    estimated traffic :math:`\hat N_j = \sum_{i \in j} s_i` and :math:`\hat N = \sum_i s_i`: the
    mixture is that of the traffic, as if every kept row were repeated :math:`s_i` times.

    References
    ----------
    .. [1] A. Agarwal, S. Basu, T. Schnabel and T. Joachims, "Effective evaluation using logged
       bandit feedback from multiple loggers", Proc. KDD, 2017.
    """
    from ope.io import read_logs

    table = as_log_table(logs)
    names, codes, counts = _loggers(table)
    probs = logger_propensities(table, long_table=long_table)
    shares = _logger_totals(codes, counts, _varying_weights(table)[1])
    mix = np.zeros(table.num_rows, dtype=np.float64)
    for name, share in zip(names, shares):  # loop over loggers
        mix += share * probs[str(name)]
    drop = [c for c in table.column_names if c.startswith(LOGGER_PROPENSITY_PREFIX)]
    if "logging_distribution" in table.column_names:
        drop.append("logging_distribution")  # it was the row's own logger's
    table = table.drop_columns(drop + ["propensity"])
    table = table.append_column("propensity", pa.array(mix, type=pa.float64()))
    validated = read_logs(table.replace_schema_metadata(None))
    meta = dict(table.schema.metadata or {})
    meta[b"ope.weighting"] = b"balanced"
    return BanditLogs(validated.table.replace_schema_metadata(meta), validated.report)


def evaluate_loggers(
    logs: Any,
    policies: Any = None,
    *,
    weighting: str,
    long_table: Any = None,
    estimators: Sequence[Any] | str = ("ips", "snips"),
    ci: str = "normal",
    confidence_level: float = 0.95,
    reward_range: tuple[float, float] | None = None,
    max_weight: float | None = None,
    context_columns: Sequence[str] | None = None,
    rng: int | np.random.Generator | None = None,
) -> Any:
    """Pooled evaluation of logs from several loggers, weighted as chosen (``ope.evaluate``).

    Parameters
    ----------
    logs : BanditLogs, pyarrow.Table or pandas.DataFrame
        Logs with ``logging_policy`` (and ``propensity__<logger>`` columns for balanced
        weighting).
    policies : optional
        As in :func:`ope.evaluate`.
    weighting : {"per_logger", "balanced", "precision"}
        Required: each row's own logger, the mixture of all loggers, or each logger's stratum
        weighted by its precision (see the module; normal and t intervals).
    long_table : optional
        Each logger's probabilities as a long table (see :func:`logger_propensities`).
    estimators, ci, confidence_level, reward_range, max_weight, context_columns, rng
        Passed to :func:`ope.evaluate`.

    Returns
    -------
    ope.Evaluation
        With a note naming the weighting and the loggers.

    Examples
    --------
    >>> import pyarrow as pa
    >>> t = pa.table({"action": [0, 1, 0, 1], "reward": [1.0, 0.0, 1.0, 1.0],
    ...               "propensity": [0.5, 0.5, 0.9, 0.1], "logging_policy": ["A", "A", "B", "B"],
    ...               "propensity__A": [0.5, 0.5, 0.5, 0.5], "propensity__B": [0.9, 0.1, 0.9, 0.1],
    ...               "target__new": [0.5, 0.5, 0.5, 0.5]})
    >>> balanced_propensities(t).column("propensity").tolist()  # 0.5 * 0.5 + 0.5 * 0.9, ...
    [0.7, 0.3, 0.7, 0.3]
    >>> import warnings; warnings.simplefilter("ignore")
    >>> ev = evaluate_loggers(t, weighting="balanced", estimators=["ips"])
    >>> round(ev["new", "ips"].value, 6)  # (1/0.7 + 0 + 1/0.7 + 1/0.3) / 8
    0.77381
    """
    from ope.evaluation import evaluate

    how = check_choice(weighting, "weighting", WEIGHTINGS)
    table = as_log_table(logs)
    names, codes, counts = _loggers(table)
    if how == "precision" and ci not in ("normal", "t"):
        raise ParameterError(
            f"`ci` {ci!r}: precision weighting gives normal and t intervals (its standard error "
            "is the stratified one); choose ci='normal' or ci='t'."
        )
    if how == "balanced":
        pooled: Any = balanced_propensities(table, long_table=long_table)
    else:
        drop = [c for c in table.column_names if c.startswith(LOGGER_PROPENSITY_PREFIX)]
        pooled = table.drop_columns(drop)
    result = evaluate(
        pooled,
        policies,
        estimators=estimators,
        ci=ci,
        confidence_level=confidence_level,
        reward_range=reward_range,
        max_weight=max_weight,
        context_columns=context_columns,
        rng=rng,
    )
    mix = ", ".join(f"{n}: {c:,}" for n, c in zip(names, counts))
    if how == "balanced":
        column, s = _varying_weights(table)
        if column is not None:
            assert s is not None
            totals = np.bincount(codes, weights=s, minlength=names.size)
            mix += (
                f" rows; sums of the sampling weights of column `{column}`, the mixture's "
                "shares: " + ", ".join(f"{n}: {t:,.6g}" for n, t in zip(names, totals))
            )
    if how == "precision":
        result = _precision_weighted(result, names, codes, counts)
    note = f"pooled rows of {names.size} loggers ({mix}) weighted " + (
        "by the mixture of all loggers (balanced, Agarwal et al. 2017)"
        if how == "balanced"
        else "by each row's own logger, each logger's stratum estimated alone and the strata "
        "combined by the inverses of their variances (precision-weighted, Kallus, Saito & "
        "Uehara 2021), each half of a stratum's rows weighted by the other half's variances "
        "(cross-fitted); the standard error is the stratified one"
        if how == "precision"
        else "by each row's own logger"
    )
    return result.with_note(note)


class _StratifiedRows(RowSource):
    """A precision-weighted estimate as one component per row, centred within its stratum so
    that the rows' variance is the stratified one (paired comparisons pair these rows; a
    comparison's variance then also holds the partner's spread between strata: conservative)."""

    def __init__(self, terms: np.ndarray, reward: np.ndarray) -> None:
        self._terms = terms[:, None]
        self.reward = reward
        self.n = int(terms.size)

    def components(self) -> np.ndarray:
        return self._terms

    def statistic(self, means: np.ndarray) -> np.ndarray:
        return means[..., 0]

    def gradient(self, means: np.ndarray) -> np.ndarray:
        return np.ones(1)


def _strata(
    src: RowSource,
    a: np.ndarray,
    codes: np.ndarray,
    k: int,
    key: tuple[str, str],
    required: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per stratum of ``codes``: the estimator on the stratum's rows alone ``(k,)``, each row's
    influence term ``psi`` ``(n,)`` (0 where the stratum's estimate is undefined), the variance
    of ``psi`` per stratum ``(k,)`` and whether the estimate is defined ``(k,)``."""
    counts = np.bincount(codes, minlength=k).astype(np.float64)
    sums = np.stack(
        [np.bincount(codes, weights=a[:, j], minlength=k) for j in range(a.shape[1])], axis=1
    )  # a loop over the estimator's components
    means = sums / np.maximum(counts, 1.0)[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        values = np.asarray([float(src.statistic(means[j])) for j in range(k)])  # strata
        grads = np.stack([src.gradient(means[j]) for j in range(k)])
        psi = np.einsum("ij,ij->i", a - means[codes], grads[codes])
    # a stratum where the estimator is undefined (SNIPS with no weight: 0/0) gets no weight
    defined = (
        np.isfinite(values)
        & (counts > 1)
        & (np.bincount(codes, weights=~np.isfinite(psi), minlength=k) == 0)
    )
    if required and not defined.any():
        raise EstimationError(
            f"{key[1]!r} of {key[0]!r} is undefined in every logger's stratum (e.g. SNIPS "
            "where the candidate gives no logged action a positive probability)."
        )
    psi = np.where(defined[codes], psi, 0.0)
    var = np.bincount(codes, weights=psi * psi, minlength=k) / np.maximum(counts - 1, 1)
    return np.where(defined, values, 0.0), psi, var, defined


def _shares(
    var: np.ndarray, counts: np.ndarray, defined: np.ndarray, key: tuple[str, str]
) -> np.ndarray:
    """Precision weights ``c_j`` from the strata's variances (a stratum whose terms do not vary
    gets the smallest positive variance of the others)."""
    positive = var[defined & (var > 0)]
    var = np.where(var > 0, var, positive.min() if positive.size else 1.0)
    precision = np.where(defined, counts / var, 0.0)
    if not precision.sum() > 0:
        raise EstimationError(
            f"precision weighting of {key[1]!r} for {key[0]!r}: no logger's stratum has the "
            "estimate defined in both halves of its rows (each half needs 2 rows, and SNIPS a "
            "positive weight); use weighting='per_logger' or weighting='balanced'."
        )
    return precision / precision.sum()


def _precision_weighted(
    pooled: Any, names: np.ndarray, codes: np.ndarray, counts: np.ndarray
) -> Any:
    """``pooled`` (each row weighted by its own logger) with every estimate replaced by the
    precision-weighted combination of the loggers' strata (see the module).

    Each estimate's rows give, per stratum ``j``, the estimator on the stratum's rows alone,
    ``V_j = f(mean_j(A))`` for components ``A`` and statistic ``f``, and its influence terms
    ``psi = (A - mean_j(A)) . grad f(mean_j(A))``; ``c_j = (n_j / var_j(psi)) / sum_k (n_k /
    var_k(psi))``. The weights are cross-fitted: each stratum's rows are split in two halves
    (alternate rows), each half's ``sum_j c_j V_j`` takes its weights from the other half, and
    the two are averaged. Weights from the same rows would favour the samples of a stratum
    that missed its large weights (a small variance and a low value together: biased down
    under poor overlap). The standard error is the stratified ``sqrt(sum_j c_j^2 var_j / n_j)``
    with the halves' mean weights; the rows' terms ``c_j (n / n_j) psi + V`` (rescaled so that
    their variance gives that error) back paired comparisons.
    """
    n = int(codes.size)
    k = int(counts.size)
    # alternate rows of each stratum: the rank of each row within its stratum, modulo 2
    order = np.argsort(codes, kind="stable")
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - np.repeat(np.cumsum(counts) - counts, counts)
    half = rank % 2
    estimates = {}
    for key, est in pooled.estimates.items():  # a loop over candidates x estimators
        src = est._source
        if not isinstance(src, RowSource):
            raise EstimationError(
                f"precision weighting needs the rows of {key[1]!r}; it has none here."
            )
        a = src.components()
        _, psi, var, defined = _strata(src, a, codes, k, key)
        halves = []
        for h in (0, 1):  # the two halves
            rows = half == h
            halves.append((_strata(src, a[rows], codes[rows], k, key, required=False), rows))
        value = 0.0
        c = np.zeros(k)
        for h in (0, 1):  # each half weighted by the other's precisions, by its share of rows
            (own_values, _, _, own_defined), own_rows = halves[h]
            (_, _, other_var, other_defined), other_rows = halves[1 - h]
            c_h = _shares(
                other_var,
                np.bincount(codes[other_rows], minlength=k),
                own_defined & other_defined,
                key,
            )
            share = float(own_rows.sum()) / n
            value += share * float(c_h @ own_values)
            c += share * c_h
        # the rows' terms: their mean is the value and their variance over n the stratified
        # variance sum_j c_j^2 var_j / n_j (each stratum's psi sums to 0)
        scale = np.sqrt((n - 1) / n * counts / np.maximum(counts - 1, 1)) * n / counts
        terms = (c * scale)[codes] * psi + value
        terms += value - float(terms.mean())  # exactly the value (the halves' own means)
        se = math.sqrt(float(np.sum(c * c * var / counts)))
        shares = ", ".join(f"{name} {w:.3f}" for name, w in zip(names, c, strict=True))
        small = [str(name) for name, count in zip(names, counts, strict=True) if count < 4]
        if small:
            shares += (
                f" (loggers with fewer than 4 rows, {', '.join(small)}, get none: each half of "
                "the cross-fitting needs 2)"
            )
        estimates[key] = make_estimate(
            estimator=est.estimator,
            value=value,
            std_error=se,
            n=est.n,
            ess=est.ess,
            notes=(*est.notes, f"precision weights of the loggers' strata: {shares}"),
            policy=est.policy,
            source=_StratifiedRows(terms, src.reward),
        )
    return dataclasses.replace(pooled, estimates=estimates, statistics=None, interval_values=None)
