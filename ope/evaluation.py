"""``ope.evaluate``: many candidate policies × many estimators on one set of logs.

The entry point ties the parts together: validated logs → target propensities of P candidates
(``ope.policies``) → optional cross-fitted reward model (``ope.reward_models``) → one chunked
pass per estimator over an (n, P) block (``ope.estimators.estimate_many``) → an
:class:`Evaluation` holding one :class:`~ope.estimate.Estimate` per policy × estimator, the
logging policy's own value, paired comparisons, and the validation report of the logs.

Over a lazy :func:`ope.scan_logs` source, the moment-based estimators (IPS, clipped IPS, SNIPS)
are computed batch by batch from mergeable sums (``ope.streaming.MomentStats``): the same numbers
as the eager path in bounded memory.
"""

from __future__ import annotations

import html
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import pandas as pd
import pyarrow as pa

from ope.estimate import Estimate, compare
from ope.estimators import ESTIMATORS, estimate_many, get_estimator, logging_value
from ope.exceptions import EstimationError, PolicyError, SchemaError
from ope.logs import BanditLogs, ValidationReport

__all__ = ["evaluate", "Evaluation", "TABLE_COLUMNS"]

#: Columns of :meth:`Evaluation.table`, in order (DESIGN.md §3).
TABLE_COLUMNS: Final = (
    "policy",
    "estimator",
    "value",
    "std_error",
    "ci_low",
    "ci_high",
    "confidence_level",
    "ci_method",
    "n",
    "ess",
    "ess_ratio",
    "notes",
)

#: Estimators that need a reward model q̂ (DM and the doubly robust family).
MODEL_ESTIMATORS: Final = frozenset({"dm", "dr", "sndr", "switch_dr", "dros"})
#: Interval method for the logging policy's value (a plain mean) when the evaluation's method
#: is specific to importance weights: Bottou's clipped-mass interval becomes its finite-sample
#: counterpart for a mean, empirical likelihood (of weighted data) the normal interval.
LOGGING_CI_FALLBACK: Final = {"bottou": "bernstein", "empirical_likelihood": "normal"}
#: Unclipped weighting estimators whose bounded intervals need an a priori weight bound, and
#: those interval methods (clipped IPS is bounded by its own max_weight).
WEIGHT_BOUND_ESTIMATORS: Final = frozenset({"ips", "snips"})
WEIGHT_BOUND_METHODS: Final = frozenset({"hoeffding", "bernstein", "empirical_likelihood"})
#: Estimators computable from mergeable sums over batches.
STREAMING_ESTIMATORS: Final = frozenset({"ips", "clipped_ips", "snips"})

#: Columns with a fixed meaning in the log schema; never used as context features by default.
RESERVED_COLUMNS: Final = frozenset(
    {
        "event_id",
        "action",
        "propensity",
        "reward",
        "candidates",
        "logging_distribution",
        "position",
        "logging_policy",
        "timestamp",
        "cost",
        "latency_ms",
    }
)


def _estimator_name(est: Any) -> str:
    for name, cls in ESTIMATORS.items():
        if type(est) is cls:
            return name
    raise TypeError(
        f"estimators must be names ({', '.join(ESTIMATORS)}) or ope estimator objects; "
        f"got {est!r}."
    )


def _resolve_estimators(
    estimators: Sequence[Any] | str,
    *,
    max_weight: float | None,
    tau: float | None,
    shrinkage: float | None,
) -> list[tuple[str, Any]]:
    if isinstance(estimators, str):
        estimators = (estimators,)
    if not estimators:
        raise ValueError(f"`estimators` is empty; pass e.g. ('ips', 'snips'). Known: {', '.join(ESTIMATORS)}.")
    settings = {"max_weight": max_weight, "tau": tau, "shrinkage": shrinkage}
    used: set[str] = set()
    resolved: list[tuple[str, Any]] = []
    for item in estimators:
        if isinstance(item, str):
            key = item.lower()
            if key not in ESTIMATORS:
                raise ValueError(
                    f"unknown estimator {item!r}; choose from {', '.join(ESTIMATORS)}."
                )
            takes = {"clipped_ips": "max_weight", "switch_dr": "tau", "dros": "shrinkage"}.get(key)
            kwargs = {}
            if takes is not None:
                if settings[takes] is None:
                    raise ValueError(
                        f"estimator {key!r} needs {takes}=...; pass it to evaluate (e.g. "
                        f"evaluate(..., {takes}=10.0)) or pass an estimator object instead of "
                        "the name."
                    )
                kwargs[takes] = settings[takes]
                used.add(takes)
            obj = get_estimator(key, **kwargs)
        else:
            key = _estimator_name(item)
            obj = item
        resolved.append((key, obj))
    unused = [k for k, v in settings.items() if v is not None and k not in used]
    if unused:
        raise ValueError(
            f"{', '.join(unused)} was given but no estimator named in `estimators` uses it "
            f"(max_weight → 'clipped_ips', tau → 'switch_dr', shrinkage → 'dros')."
        )
    names = [k for k, _ in resolved]
    dup = sorted({k for k in names if names.count(k) > 1})
    if dup:
        raise ValueError(f"estimator {', '.join(dup)} is listed twice in `estimators`.")
    return resolved


def _default_context_columns(logs: BanditLogs) -> list[str]:
    cols = []
    for fld in logs.table.schema:
        name = fld.name
        if name in RESERVED_COLUMNS or name.startswith(("target__", "target_dist__", "propensity__")):
            continue
        if pa.types.is_integer(fld.type) or pa.types.is_floating(fld.type):
            cols.append(name)
    return cols


def _factored_candidates(logs: BanditLogs) -> dict[str, dict[str, str]]:
    """Candidates given by factor: ``target__<policy>__<factor>`` beside ``propensity__<factor>``.

    Returns policy -> {factor: target column}. Columns whose suffix names no logged factor are
    ordinary candidates (a policy name may itself contain ``__``).
    """
    factors = {c[len("propensity__"):] for c in logs.columns if c.startswith("propensity__")}
    out: dict[str, dict[str, str]] = {}
    if not factors:
        return out
    for name in logs.target_policies:
        base, sep, factor = name.rpartition("__")
        if sep and base and factor in factors:
            out.setdefault(base, {})[factor] = f"target__{name}"
    return out


def _factored_arrays(logs: BanditLogs, changed: Mapping[str, str]) -> tuple[np.ndarray, np.ndarray]:
    """Logging and target probabilities of the changed factors only (the others cancel).

    The weight is prod_{k in C} q*_k / q_k (Markov factor replacement, Bottou et al. 2013);
    returning both products keeps every estimator and interval unchanged.
    """
    from ope.weights import factor_weights

    logged = {f: logs.column(f"propensity__{f}") for f in changed}
    target = {f: logs.column(col) for f, col in changed.items()}
    factor_weights(logged, target)  # validates ranges and lengths with helpful errors
    p = np.ones(logs.n, dtype=np.float64)
    t = np.ones(logs.n, dtype=np.float64)
    for f in changed:
        p *= logged[f]
        t *= target[f]
    return p, t


def _context_matrix(logs: BanditLogs, columns: Sequence[str]) -> np.ndarray:
    missing = [c for c in columns if c not in logs.table.column_names]
    if missing:
        raise SchemaError(
            f"context column(s) {', '.join(missing)} not in the logs; they have: "
            f"{', '.join(logs.table.column_names)}."
        )
    bad = [
        c
        for c in columns
        if not (pa.types.is_integer(logs.table.schema.field(c).type) or pa.types.is_floating(logs.table.schema.field(c).type))
    ]
    if bad:
        raise SchemaError(
            f"context column(s) {', '.join(bad)} are not numeric; encode them (e.g. one-hot) "
            "or leave them out of context_columns."
        )
    return np.column_stack([logs.column(c).astype(np.float64, copy=False) for c in columns])


def _model_predictions(
    logs: BanditLogs,
    distributions: Mapping[str, Any],
    names: Sequence[str],
    *,
    reward_model: Any,
    context_columns: Sequence[str] | None,
    rng: int | np.random.Generator | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Cross-fitted q̂(x_i, a_i) and q̂(x_i, π_p) for every policy p, over one action catalog."""
    from ope.reward_models import RewardModel

    columns = list(context_columns) if context_columns is not None else _default_context_columns(logs)
    if not columns:
        raise SchemaError(
            "DM/DR estimators need context features for the reward model, and these logs have "
            "no numeric feature columns; pass context_columns=[...] or use ips/snips."
        )
    x = _context_matrix(logs, columns)
    # one catalog: the logged actions and every policy's support
    logged = logs.table.column("action").combine_chunks()
    pieces = [np.asarray(logged.to_numpy(zero_copy_only=False))]
    pieces += [np.asarray(distributions[p].actions) for p in names]
    catalog = np.unique(np.concatenate(pieces))
    codes = np.searchsorted(catalog, pieces[0])
    mats = []
    for p in names:
        dist = distributions[p]
        m = dist.matrix
        new_code = np.searchsorted(catalog, np.asarray(dist.actions)).astype(np.int64)
        import scipy.sparse as sp

        mats.append(sp.csr_array((m.data, new_code[m.indices], m.indptr), shape=(m.shape[0], len(catalog))))
    if reward_model is None:
        model = RewardModel(rng=rng)
    elif isinstance(reward_model, RewardModel):
        model = reward_model
    else:
        model = RewardModel(estimator=reward_model, rng=rng)
    fitted = model.fit(x, codes, logs.column("reward"), n_actions=len(catalog))
    q_logged = fitted.predict_logged()
    q_target = fitted.predict_policy(mats)
    q_target = np.asarray(q_target, dtype=np.float64).reshape(len(q_logged), len(names))
    return q_logged, q_target


@dataclass(frozen=True, eq=False)
class Evaluation:
    """The result of :func:`evaluate`: one Estimate per candidate policy × estimator.

    Attributes
    ----------
    estimates : dict of (policy, estimator) to Estimate
    logging : Estimate
        The logging policy's value (its mean logged reward) on the same rows.
    policies, estimators : list of str
        Row and column labels, in the order asked for.
    report : ValidationReport
        How the logs were read: rows read, used and rejected by reason.
    confidence_level : float
    ci_method : str
    notes : list of str
        Warnings about the evaluation as a whole (weak overlap, dropped rows, ...).
    streaming : bool
        True when computed batch by batch from mergeable statistics.
    """

    estimates: dict[tuple[str, str], Estimate]
    logging: Estimate
    policies: list[str]
    estimators: list[str]
    report: ValidationReport
    confidence_level: float
    ci_method: str
    notes: list[str] = field(default_factory=list)
    streaming: bool = False
    ci_options: dict[str, Any] = field(default_factory=dict)
    weight_bound: float | None = None
    # filled by __post_init__: (policy, estimator) -> (ci_low, ci_high), and the logging value's
    _intervals: dict[tuple[str, str], tuple[float, float]] = field(
        init=False, repr=False, compare=False
    )
    _logging_ci: tuple[float, float] = field(init=False, repr=False, compare=False)

    def __getitem__(self, key: tuple[str, str]) -> Estimate:
        try:
            return self.estimates[key]
        except KeyError:
            raise KeyError(
                f"no estimate for {key!r}; policies: {self.policies}, estimators: {self.estimators}"
            ) from None

    def __post_init__(self) -> None:
        # every interval once, at construction: a method that does not apply fails here, and
        # table(), summary(), to_dict() reuse them (a bootstrap is not redrawn on each call)
        intervals = {key: self._compute_interval(est) for key, est in self.estimates.items()}
        object.__setattr__(self, "_intervals", intervals)
        object.__setattr__(self, "_logging_ci", self._compute_logging_interval())

    def _logging_interval(self) -> tuple[float, float]:
        return self._logging_ci

    def _compute_interval(self, est: Estimate) -> tuple[float, float]:
        options = dict(self.ci_options)
        if (
            self.weight_bound is not None
            and est.estimator in WEIGHT_BOUND_ESTIMATORS
            and self.ci_method in WEIGHT_BOUND_METHODS
        ):
            options["max_weight"] = self.weight_bound
        ci = est.ci(self.confidence_level, self.ci_method, **options)
        return float(ci.low), float(ci.high)

    @property
    def logging_ci_method(self) -> str:
        """The interval method used for the logging policy's value.

        The logging value is a plain mean: it takes the evaluation's method when that applies
        and otherwise its closest counterpart (:data:`LOGGING_CI_FALLBACK`).
        """
        return LOGGING_CI_FALLBACK.get(self.ci_method, self.ci_method)

    def _compute_logging_interval(self) -> tuple[float, float]:
        method = self.logging_ci_method
        options = self.ci_options if method == self.ci_method else {}
        ci = self.logging.ci(self.confidence_level, method, **options)
        return float(ci.low), float(ci.high)

    def table(self) -> pd.DataFrame:
        """One row per policy × estimator with the columns :data:`TABLE_COLUMNS`."""
        rows = []
        for p in self.policies:
            for e in self.estimators:
                est = self.estimates[(p, e)]
                low, high = self._intervals[(p, e)]
                rows.append(
                    {
                        "policy": p,
                        "estimator": e,
                        "value": est.value,
                        "std_error": est.std_error,
                        "ci_low": low,
                        "ci_high": high,
                        "confidence_level": self.confidence_level,
                        "ci_method": self.ci_method,
                        "n": est.n,
                        "ess": est.ess,
                        "ess_ratio": est.ess / est.n if est.n else float("nan"),
                        "notes": "; ".join(est.notes),
                    }
                )
        return pd.DataFrame(rows, columns=list(TABLE_COLUMNS))

    def compare(
        self,
        policy: str,
        baseline: str = "logging",
        *,
        estimator: str | None = None,
        method: str = "normal",
    ) -> Estimate:
        """Paired difference ``policy − baseline`` on the same rows, with its interval.

        ``baseline="logging"`` compares with the logging policy's on-policy mean reward.
        """
        if self.streaming:
            raise EstimationError(
                "paired comparisons need the rows; evaluate eagerly (read_logs) to compare."
            )
        estimator = estimator or self.estimators[0]
        a = self[(policy, estimator)]
        b = self.logging if baseline == "logging" else self[(baseline, estimator)]
        return compare(a, b, confidence_level=self.confidence_level, method=method)

    def comparisons(self, *, method: str = "normal") -> pd.DataFrame:
        """Every candidate against the logging policy, per estimator (paired on the same rows)."""
        rows = []
        for p in self.policies:
            for e in self.estimators:
                d = self.compare(p, "logging", estimator=e, method=method)
                ci = d.ci(self.confidence_level, method)
                rows.append(
                    {
                        "policy": p,
                        "estimator": e,
                        "difference": d.value,
                        "std_error": d.std_error,
                        "ci_low": float(ci.low),
                        "ci_high": float(ci.high),
                        "better_than_logging": bool(ci.low > 0),
                        "worse_than_logging": bool(ci.high < 0),
                    }
                )
        return pd.DataFrame(rows)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict with stable keys."""
        low, high = self._logging_interval()
        out: dict[str, Any] = {
            "confidence_level": self.confidence_level,
            "ci_method": self.ci_method,
            "streaming": self.streaming,
            "validation": self.report.to_dict(),
            "logging_policy": {
                "value": self.logging.value,
                "std_error": self.logging.std_error,
                "ci_low": low,
                "ci_high": high,
                "ci_method": self.logging_ci_method,
                "n": self.logging.n,
            },
            "estimates": self.table().to_dict(orient="records"),
            "notes": list(self.notes),
        }
        if not self.streaming:
            out["comparisons_with_logging"] = self.comparisons().to_dict(orient="records")
        return out

    def summary(self, *, truth: Mapping[str, float] | None = None) -> str:
        """Plain-text table of the estimates (and the true values when given), then notes."""
        t = self.table()
        lines = [
            f"{len(self.policies)} candidate policies x {len(self.estimators)} estimators on "
            f"{self.logging.n:,} rows; {self.ci_method} intervals at {self.confidence_level:.0%}"
        ]
        if self.report.rows_rejected:
            lines.append(
                f"  ({self.report.rows_rejected:,} of {self.report.rows_read:,} rows were rejected "
                f"and dropped: {dict(self.report.rejected)})"
            )
        low, high = self._logging_interval()
        lines.append(
            f"logging policy (mean logged reward): {self.logging.value:.4f}  "
            f"[{low:.4f}, {high:.4f}]"
            + ("" if self.logging_ci_method == self.ci_method else f" ({self.logging_ci_method})")
        )
        header = f"{'policy':<18}{'estimator':<13}{'value':>9}{'std_err':>9}{'ci_low':>9}{'ci_high':>9}{'ESS/n':>8}"
        if truth is not None:
            header += f"{'truth':>9}{'in CI':>7}"
        lines += ["", header, "-" * len(header)]
        for row in t.itertuples(index=False):
            line = (
                f"{row.policy:<18}{row.estimator:<13}{row.value:>9.4f}{row.std_error:>9.4f}"
                f"{row.ci_low:>9.4f}{row.ci_high:>9.4f}{row.ess_ratio:>8.3f}"
            )
            if truth is not None and row.policy in truth:
                tv = truth[row.policy]
                line += f"{tv:>9.4f}{('yes' if row.ci_low <= tv <= row.ci_high else 'NO'):>7}"
            lines.append(line)
        # the same weight diagnostics recur under every weighting estimator: list each once
        grouped: dict[tuple[str, str], list[str]] = {}
        for (p, e), est in self.estimates.items():
            for note in est.notes:
                grouped.setdefault((p, note), []).append(e)
        notes = list(self.notes) + [
            f"{p} ({', '.join(es)}): {note}" for (p, note), es in grouped.items()
        ]
        if notes:
            lines.append("")
            lines += [f"[{i}] {n}" for i, n in enumerate(notes, 1)]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"Evaluation(policies={self.policies}, estimators={self.estimators}, "
            f"n={self.logging.n:,}, ci_method={self.ci_method!r})"
        )

    def _repr_html_(self) -> str:
        table = self.table().drop(columns=["notes"]).to_html(index=False, float_format=lambda v: f"{v:.4g}")
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in self.notes)
        return f"<div><p>{html.escape(repr(self))}</p>{table}<ol>{notes}</ol></div>"


def _report_notes(report: ValidationReport) -> list[str]:
    """The evaluation-level note on rows the reader rejected and dropped (if any)."""
    if not report.rows_rejected:
        return []
    return [
        f"{report.rows_rejected:,} of {report.rows_read:,} rows were rejected and dropped "
        f"before estimation: {dict(report.rejected)}"
    ]


def _one_pass_statistics(
    resolved: Sequence[tuple[str, Any]],
    reward: np.ndarray,
    propensity: np.ndarray,
    target: np.ndarray,
    names: Sequence[str],
) -> Any:
    """Merged moments of every weight column in one pass, when two or more of IPS, clipped IPS
    and SNIPS are asked for (each would otherwise make its own passes over the (n, P) block).

    Returns None when fewer than two of them are asked for or there are no policies.
    """
    from ope.streaming import MomentStats

    moment = [est for key, est in resolved if key in STREAMING_ESTIMATORS]
    if len(moment) < 2 or not len(names):
        return None
    clip = next((est.max_weight for key, est in resolved if key == "clipped_ips"), None)
    return MomentStats.from_arrays(reward, propensity, target, max_weight=clip, names=names)


def evaluate(
    logs: Any,
    policies: Any = None,
    *,
    estimators: Sequence[Any] | str = ("ips", "snips", "dr"),
    ci: str = "normal",
    confidence_level: float = 0.95,
    reward_range: tuple[float, float] | None = None,
    max_weight: float | None = None,
    weight_bound: float | None = None,
    tau: float | None = None,
    shrinkage: float | None = None,
    reward_model: Any = None,
    context_columns: Sequence[str] | None = None,
    n_resamples: int | None = None,
    rng: int | np.random.Generator | None = None,
) -> Evaluation:
    """Estimate the value of P candidate policies with several estimators and intervals.

    Parameters
    ----------
    logs : BanditLogs, LogScan, path, pandas.DataFrame or pyarrow.Table
        Validated logs (``ope.read_logs``), a lazy scan (``ope.scan_logs``: IPS, clipped IPS
        and SNIPS only, computed from merged sums in bounded memory), or anything
        ``ope.read_logs`` accepts.
    policies : None, list of str, long-format policy table, or dict of name to policy object
        ``None`` evaluates every ``target__<name>`` column (see ``ope.policies``).
    estimators : sequence of str or estimator objects
        Names among ``dm, ips, clipped_ips, snips, dr, sndr, switch_dr, dros``.
    ci : str, default "normal"
        Interval method for ``ci_low``/``ci_high`` (``normal, t, bootstrap, hoeffding,
        bernstein, bottou, empirical_likelihood, betting``). Bounded methods need
        ``reward_range``; a method that does not apply to one of the estimators is an error.
    confidence_level : float, default 0.95
    reward_range : (float, float), optional
        A priori range of the rewards (clicks: (0, 1)). Never taken from the data.
    max_weight, tau, shrinkage : float, optional
        Settings of ``clipped_ips``, ``switch_dr`` and ``dros`` when those are named.
    weight_bound : float, optional
        A priori bound on the importance weights π_e/π_b of every context and action (e.g.
        1 / the smallest probability the logger can give), used by the ``hoeffding``,
        ``bernstein`` and ``empirical_likelihood`` intervals of IPS and SNIPS. The largest
        observed weight is not a bound.
    reward_model : scikit-learn estimator or ope.reward_models.RewardModel, optional
        Reward model for DM and the DR family, cross-fitted (default: ``RewardModel()``).
    context_columns : sequence of str, optional
        Features of the reward model (default: every numeric column that is not part of the
        log schema).
    n_resamples : int, optional
        Bootstrap resamples when ``ci="bootstrap"``.
    rng : int, numpy.random.Generator or None
        Randomness of cross-fitting folds and the bootstrap.

    Returns
    -------
    Evaluation

    Notes
    -----
    Each estimator runs one chunked pass over an (n, P) block of target propensities, so P
    candidates cost about one pass, not P. DM/DR need each candidate's full distribution over
    every row's support (``target_dist__<name>`` columns, a long-format policy table, or policy
    objects); the reward model is evaluated only on those (row, action) pairs.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> import ope
    >>> df = pd.DataFrame({"action": [0, 1, 1, 0], "propensity": [0.5] * 4,
    ...                    "reward": [1.0, 0.0, 1.0, 0.0], "target__always_1": [0.0, 1.0, 1.0, 0.0]})
    >>> ev = ope.evaluate(df, estimators=("ips", "snips"))
    >>> ev.table()[["policy", "estimator", "value"]].to_dict(orient="records")
    [{'policy': 'always_1', 'estimator': 'ips', 'value': 0.5}, {'policy': 'always_1', 'estimator': 'snips', 'value': 0.5}]
    """
    from ope.io import LogScan, read_logs

    resolved = _resolve_estimators(estimators, max_weight=max_weight, tau=tau, shrinkage=shrinkage)
    names = [k for k, _ in resolved]
    ci_options: dict[str, Any] = {}
    if ci == "bootstrap":
        ci_options = {"n_resamples": n_resamples, "rng": rng}
    elif n_resamples is not None:
        raise ValueError("n_resamples applies only to ci='bootstrap'.")

    if isinstance(logs, LogScan):
        return _evaluate_streaming(
            logs,
            policies,
            resolved,
            ci=ci,
            confidence_level=confidence_level,
            reward_range=reward_range,
            max_weight=max_weight,
            weight_bound=weight_bound,
        )
    if not isinstance(logs, BanditLogs):
        logs = read_logs(logs)

    from ope.policies import target_propensities

    needs_model = any(k in MODEL_ESTIMATORS for k in names)
    factored = _factored_candidates(logs) if policies is None or isinstance(policies, (list, tuple)) else {}
    if factored:
        factor_cols = {col[len("target__"):] for cols in factored.values() for col in cols.values()}
        if policies is None:
            plain = [p for p in logs.target_policies if p not in factor_cols]
            factored_names = list(factored)
        else:
            plain = [p for p in policies if p not in factored]
            factored_names = [p for p in policies if p in factored]
        factored = {p: factored[p] for p in factored_names}
        if factored and needs_model:
            raise EstimationError(
                f"candidates {', '.join(factored)} are given by factor (target__<policy>__<factor>); "
                "DM/DR need each candidate's whole distribution. Use ips, clipped_ips or snips."
            )
        policies = plain
    if factored and not policies:
        from ope.policies import TargetPropensities

        tp = TargetPropensities([], np.empty((logs.n, 0)))
    else:
        tp = None
    try:
        if tp is None:
            tp = target_propensities(logs, policies, with_distributions=needs_model)
    except PolicyError as exc:
        if needs_model and "distribution" in str(exc).lower():
            raise PolicyError(
                f"{exc}\nDM/DR need each candidate's whole distribution; evaluate with "
                "estimators=('ips', 'snips', 'clipped_ips') or provide the distributions."
            ) from None
        raise
    if not tp.names and not factored:
        raise PolicyError(
            "no candidate policies to evaluate: the logs have no target__<name> columns and "
            "`policies` is None. Pass policies=... (names, a long-format table, or objects)."
        )

    reward = logs.column("reward")
    propensity = logs.column("propensity")
    q_logged = q_target = None
    if needs_model:
        assert tp.distributions is not None
        q_logged, q_target = _model_predictions(
            logs,
            tp.distributions,
            tp.names,
            reward_model=reward_model,
            context_columns=context_columns,
            rng=rng,
        )

    estimates: dict[tuple[str, str], Estimate] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stats = _one_pass_statistics(resolved, reward, propensity, tp.values, tp.names)
        for key, est in resolved:
            if stats is not None and key in STREAMING_ESTIMATORS:
                results = stats.with_rows(
                    stats.estimates(est, reward_range=reward_range, confidence_level=confidence_level),
                    reward=reward,
                    logging_propensity=propensity,
                    target_propensity=tp.values,
                    reward_range=reward_range,
                )
            else:
                results = [] if not tp.names else estimate_many(
                    est,
                    reward=reward,
                    logging_propensity=propensity,
                    target_propensity=tp.values,
                    q_logged=q_logged,
                    q_target=q_target,
                    reward_range=reward_range,
                    names=tp.names,
                )
            for name, res in zip(tp.names, results):
                estimates[(name, key)] = res
            for name, changed in factored.items():
                p_c, t_c = _factored_arrays(logs, changed)
                (res,) = estimate_many(
                    est,
                    reward=reward,
                    logging_propensity=p_c,
                    target_propensity=t_c[:, None],
                    reward_range=reward_range,
                    names=[name],
                )
                estimates[(name, key)] = res
        base = logging_value(reward, reward_range=reward_range)
    # the estimates carry these as notes; re-emit each distinct warning once
    for msg in dict.fromkeys((w.category, str(w.message)) for w in caught):
        warnings.warn(msg[1], msg[0], stacklevel=2)

    notes = _report_notes(logs.report)
    if tp.table_rows_ignored:
        notes.append(
            f"{tp.table_rows_ignored:,} policy-table rows for events dropped from the logs were "
            "ignored"
        )
    ev = Evaluation(
        estimates=estimates,
        logging=base,
        policies=list(tp.names) + list(factored),
        estimators=names,
        report=logs.report,
        confidence_level=confidence_level,
        ci_method=ci,
        notes=notes,
        ci_options=ci_options,
        weight_bound=weight_bound,
    )
    return ev


def _evaluate_streaming(
    scan: Any,
    policies: Any,
    resolved: list[tuple[str, Any]],
    *,
    ci: str,
    confidence_level: float,
    reward_range: tuple[float, float] | None,
    max_weight: float | None,
    weight_bound: float | None,
) -> Evaluation:
    from ope.policies import target_propensities
    from ope.streaming import MomentStats

    names = [k for k, _ in resolved]
    unsupported = [k for k in names if k not in STREAMING_ESTIMATORS]
    if unsupported:
        raise EstimationError(
            f"estimator(s) {', '.join(unsupported)} cannot run over a lazy scan; streaming "
            f"supports {', '.join(sorted(STREAMING_ESTIMATORS))}. Read the logs eagerly "
            "(ope.read_logs) for the others."
        )
    if policies is not None and not (
        isinstance(policies, (list, tuple)) or isinstance(policies, Mapping)
    ):
        raise PolicyError(
            "over a lazy scan, policies must be target__<name> column names or policy objects; "
            "a long-format table needs the whole log (use ope.read_logs)."
        )
    stats = None
    policy_names: list[str] | None = None
    for batch in scan:
        tp = target_propensities(batch, policies)
        policy_names = tp.names
        part = MomentStats.from_arrays(
            batch.column("reward"),
            batch.column("propensity"),
            tp.values,
            max_weight=max_weight,
            names=tp.names,
        )
        stats = part if stats is None else stats.merge(part)
    if stats is None or policy_names is None:
        raise EstimationError(f"the scan of {scan.source} yielded no rows.")
    estimates: dict[tuple[str, str], Estimate] = {}
    for key, est in resolved:
        for name, res in zip(policy_names, stats.estimates(est, reward_range=reward_range, confidence_level=confidence_level)):
            estimates[(name, key)] = res
    base = stats.logging_estimate(reward_range=reward_range, confidence_level=confidence_level)
    report = scan.report
    notes = _report_notes(report)
    ev = Evaluation(
        estimates=estimates,
        logging=base,
        policies=list(policy_names),
        estimators=names,
        report=report,
        confidence_level=confidence_level,
        ci_method=ci,
        notes=notes,
        streaming=True,
        weight_bound=weight_bound,
    )
    return ev
