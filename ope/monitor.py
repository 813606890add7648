r"""Anytime-valid monitoring of a rollout: confidence sequences that stay valid however often the
logs are looked at, under a logger whose propensities change as it learns.

A :class:`Monitor` takes batches of logs in arrival order (``update``), keeps a few running sums
per candidate (never the rows) and after each batch (a *look*) gives, per candidate, the
estimate of its value and of its difference to the logging policy, a confidence interval for
each that holds **simultaneously at every look** (a confidence sequence), the anytime-valid
p-value of "the candidate is not better than logging", and a decision: ``better``, ``worse``
or ``undecided``. Because the guarantee is time-uniform, a team may look every hour and stop
as soon as the decision is clear; a fixed-n interval recomputed at every look is not valid
under such peeking (``benchmarks/monitoring.py`` measures how often it stops falsely).

Rewards are mapped to :math:`\tilde r = (r - r_{\min})/(r_{\max} - r_{\min}) \in [0, 1]` with
the a priori ``reward_range``, and :math:`w_t = \pi(a_t|x_t)/p_t` uses the propensity
:math:`p_t` the logger had **when it decided** (an adaptive logger's propensities are fine).
The targets are :math:`\theta = \mathbb E_\pi[r]` (contexts from a fixed distribution) and the
difference :math:`\Delta_t = \theta - \bar\mu_t`, where :math:`\bar\mu_t` is the average over
the rows so far of the logger's value at each time (the logged mean reward estimates it
on-policy; for a fixed logger :math:`\bar\mu_t = \mu`).

Two methods (:data:`MONITOR_METHODS`):

* ``"betting"`` (``estimator="ips"``; finite-sample, no weight bound): the betting confidence
  sequence of Karampatziakis, Mineiro & Ramdas (ICML 2021; :mod:`ope.intervals.betting`) on
  :math:`w\tilde r` (lower end) and :math:`w(1-\tilde r)` (upper end). The difference uses the
  same construction on :math:`Y_t = (w_t\tilde r_t - \tilde r_t + 1)/2 \ge 0`, whose conditional
  mean is :math:`(1 + \Delta)/2` (lower end), and on
  :math:`Y'_t = (w_t(1-\tilde r_t) - (1-\tilde r_t) + 1)/2` (upper end): both are bounded below
  without any bound on :math:`w`, which is all the supermartingale argument needs. The p-value
  is :math:`1/\max_{s \le t} M_s(1/2)`, the inverse of the largest wealth of the lower-end
  mixture martingale at :math:`\Delta = 0` (Ville's inequality). Valid at every time, for any
  adaptive logger with known propensities, in finite samples.
* ``"asymptotic"`` (``estimator="ips"`` or ``"dr"``): the Gaussian-mixture asymptotic confidence
  sequence of Waudby-Smith, Arbour, Sinha, Kennedy & Ramdas (Annals of Statistics 2024) around
  the running mean of the pseudo-outcomes, with their running variance
  :math:`\hat\sigma^2_t`: :math:`\hat\theta_t \pm \hat\sigma_t\sqrt{2(t\rho^2+1)/(t^2\rho^2)\,
  \ln(\sqrt{t\rho^2+1}/\alpha)}`, :math:`\rho^2` chosen to make it tightest at
  ``planned_rows``. DR's pseudo-outcome :math:`\hat q_{t}(x_t,\pi) + w_t(\tilde r_t - \hat
  q_{t}(x_t, a_t))` uses a reward model fitted only on earlier batches (predictable), so its
  conditional mean is :math:`\theta` whatever the model (Waudby-Smith, Wu, Ramdas,
  Karampatziakis & Mineiro, "Anytime-valid off-policy inference for contextual bandits",
  arXiv 2210.10768). The guarantee is asymptotic (the miscoverage tends to at most
  :math:`\alpha` as the first look grows, given a conditional variance that settles): DR's
  pseudo-outcomes have no lower bound without a weight bound, so the finite-sample betting
  construction does not apply to them. The p-value is the mixture's, one-sided by taking 1 when
  the estimate is not above 0 (conservative).

With ``"betting"`` the value's interval is intersected with the earlier looks' (still valid for
its one fixed target, and nested); every interval is cut to the a priori range. The
difference's target moves when the logger learns, so its interval is each look's own (an
intersection with earlier looks could exclude the current target); each one is still valid at
every look, for the average of the conditional means so far (the martingale argument holds
term by term). The p-value tests "the candidate was at no time better than the logger as it
then was"; it is one-sided, the decision reads the two-sided sequence. The asymptotic sequence
is the whole range until the candidate's effective sample size reaches
:data:`MIN_EFFECTIVE_ROWS`, its variance has a floor 1/t, and its looks are not intersected.

``confidence_level`` holds for each sequence (a candidate's value, and its difference);
``simultaneous=True`` splits it over all of them (Bonferroni, valid for sequences too).

The ``estimate`` (and ``difference``) column is the plain IPS or DR mean of the rows so far:
unbiased, but not held to the reward range (one row of weight 2 and reward 1 gives 2), and the
betting sequence is not centred on it, so it may lie outside its sequence; the result then says
so in a note. The sequence is what the guarantee is about.

Rows with sampling weights (``weight``, or ``weight_column``; not all 1) are refused with an
``EstimationError``: the weighted value is a ratio whose denominator, the population so far, is
estimated too, and neither construction covers it (the betting martingale bets on each kept row
in turn; the Gaussian mixture is for the running mean of unweighted terms). A batch without rows
is a look that changes nothing. Event ids are not compared across looks (batches whose ids
restart at 0 are common, and keeping every id would grow without bound): a batch delivered twice
is counted twice.

Memory: per candidate a handful of sums (:class:`Monitor` holds no rows), plus for DR a window
of the last ``model_rows`` rows to refit the reward model; the history holds one row per look
and candidate. :meth:`Monitor.state` is JSON-ready and :meth:`Monitor.from_state` resumes from
it (``ope monitor --state``).

Examples
--------
>>> import numpy as np, pandas as pd
>>> from ope.monitor import Monitor
>>> rng = np.random.default_rng(0)
>>> mon = Monitor(reward_range=(0.0, 1.0))
>>> for look in range(5):
...     n = 2000
...     a = rng.integers(0, 2, n)
...     batch = pd.DataFrame({"action": a, "propensity": 0.5,
...                           "reward": rng.binomial(1, np.where(a == 1, 0.7, 0.4)),
...                           "target__always_one": (a == 1).astype(float)})
...     result = mon.update(batch)
>>> row = result.table().iloc[0]
>>> row["policy"], row["decision"], bool(row["difference_low"] > 0)
('always_one', 'better', True)
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import pandas as pd

from ope._result import Result, ResultParts
from ope._validation import (
    check_confidence_level,
    check_forwarded,
    check_name,
    check_positive_int,
    require_reward_range,
)
from ope.exceptions import ParameterError, PolicyError, SchemaError, ValidationError

__all__ = [
    "MONITOR_ESTIMATORS",
    "MONITOR_METHODS",
    "Monitor",
    "MonitorResult",
    "best_rho2",
    "mixture_margin",
    "new_log_files",
    "parse_interval",
    "run_monitor",
]

#: the confidence-sequence constructions (see the module)
MONITOR_METHODS: Final = ("betting", "asymptotic")

#: the estimators a monitor runs: IPS (both methods) and DR (asymptotic)
MONITOR_ESTIMATORS: Final = ("ips", "dr")

#: the time at which the asymptotic sequence is tightest when ``planned_rows`` is not given
DEFAULT_PLANNED_ROWS: Final = 10_000

#: rows of the most recent batches kept to refit DR's reward model after each look
DEFAULT_MODEL_ROWS: Final = 100_000

#: DR's reward model is refitted once at least this many rows are in its window; before that
#: the prediction is the window's mean reward (the midpoint of the range before any row)
MIN_MODEL_ROWS: Final = 50

#: the asymptotic sequence of a candidate is the whole range until its effective sample size
#: (sum w)^2 / sum w^2 reaches this: the Gaussian-mixture sequence is asymptotic, and a few
#: rows of heavy-tailed weights (50 rows, a target action logged with probability 0.05) made
#: it miss in 46% of runs without this start
MIN_EFFECTIVE_ROWS: Final = 100

#: the decisions of a candidate after a look
DECISIONS: Final = ("better", "worse", "undecided")

#: the columns of :meth:`MonitorResult.table` and of the history
COLUMNS: Final = (
    "look",
    "rows",
    "policy",
    "estimate",
    "ci_low",
    "ci_high",
    "difference",
    "difference_low",
    "difference_high",
    "p_value",
    "decision",
)

#: the files a watched directory's batches are read from
LOG_SUFFIXES: Final = (".parquet",)

#: units of :func:`parse_interval`, in seconds
INTERVAL_UNITS: Final = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}

#: the version of :meth:`Monitor.state`'s layout (checked by :meth:`Monitor.from_state`)
STATE_VERSION: Final = 1


def best_rho2(planned_rows: float, alpha: float) -> float:
    r""":math:`\rho^2` that makes the Gaussian-mixture margin :func:`mixture_margin` smallest at
    ``planned_rows`` :math:`t^*`: with :math:`x = t^*\rho^2` the margin is proportional to
    :math:`\sqrt{(1 + 1/x)\ln(\sqrt{x+1}/\alpha)}`, whose minimum solves
    :math:`y - \ln y = 1 - \ln\alpha^2` for :math:`y = x + 1`, so
    :math:`\rho^2 = (-W_{-1}(-\alpha^2/e) - 1)/t^*` (Lambert's W on its lower branch).

    >>> from ope.monitor import best_rho2, mixture_margin
    >>> r2 = best_rho2(1000, 0.05)
    >>> bool(mixture_margin(1000, 1.0, r2, 0.05) < mixture_margin(1000, 1.0, 2 * r2, 0.05))
    True
    """
    from scipy.special import lambertw

    value = float(np.real(lambertw(-(alpha**2) / math.e, k=-1)))
    return (-value - 1.0) / float(planned_rows)


def mixture_margin(t: Any, variance: Any, rho2: float, alpha: float) -> Any:
    r"""Half-width of the two-sided Gaussian-mixture confidence sequence after ``t`` rows of
    variance ``variance``: :math:`\sqrt{v \cdot 2(t\rho^2+1)/(t^2\rho^2)\,
    \ln(\sqrt{t\rho^2+1}/\alpha)}`."""
    t = np.asarray(t, dtype=np.float64)
    grow = t * rho2 + 1.0
    return np.sqrt(
        np.asarray(variance) * 2.0 * grow / (t * t * rho2) * np.log(np.sqrt(grow) / alpha)
    )


def _mixture_p_value(t: float, mean: float, variance: float, rho2: float) -> float:
    """The smallest alpha at which the mixture sequence of ``mean`` excludes 0 from above
    (1 when ``mean <= 0``): the anytime p-value of "the mean is at most 0"."""
    if mean <= 0.0:
        return 1.0
    grow = t * rho2 + 1.0
    log_p = 0.5 * math.log(grow) - mean * mean * t * t * rho2 / (2.0 * variance * grow)
    return float(min(1.0, math.exp(log_p)))


@dataclass(frozen=True, eq=False)
class MonitorResult(Result):
    """The state of a :class:`Monitor` after a look: one row per candidate, and the history.

    Attributes
    ----------
    estimator, method : str
    confidence_level : float
    reward_range : (float, float)
    rows : int
        Rows seen so far.
    looks : int
        Batches seen so far.
    policies : list of str
    current : pandas.DataFrame
        One row per candidate, columns :data:`COLUMNS`.
    history : pandas.DataFrame
        One row per look and candidate, the same columns.
    simultaneous : bool
    notes : tuple of str
    """

    estimator: str
    method: str
    confidence_level: float
    reward_range: tuple[float, float]
    rows: int
    looks: int
    policies: list[str]
    current: pd.DataFrame
    history: pd.DataFrame
    simultaneous: bool = False
    notes: tuple[str, ...] = ()

    @property
    def decided(self) -> bool:
        """Whether every candidate is decided (better or worse than logging)."""
        return bool(len(self.current)) and bool((self.current["decision"] != "undecided").all())

    def table(self) -> pd.DataFrame:
        """The current row per candidate (a copy)."""
        return self.current.copy()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the settings, the current rows, the history and the notes."""
        return {
            "estimator": self.estimator,
            "method": self.method,
            "confidence_level": self.confidence_level,
            "reward_range": list(self.reward_range),
            "simultaneous": self.simultaneous,
            "rows": self.rows,
            "looks": self.looks,
            "decided": self.decided,
            "policies": list(self.policies),
            "current": self.current.to_dict(orient="records"),
            "history": self.history.to_dict(orient="records"),
            "notes": list(self.notes),
        }

    def _parts(self) -> ResultParts:
        level = f"{self.confidence_level:g}" + (
            " for every sequence at once" if self.simultaneous else " per sequence"
        )
        return ResultParts(
            title=f"monitor by {self.estimator} ({self.method}): {self.rows:,} rows in "
            f"{self.looks} looks",
            fields=[
                ("sequence", f"valid at every look, {level}"),
                ("decided", "yes" if self.decided else "no"),
            ],
            table=self.current.drop(columns=["look"]),
            notes=self.notes,
            precision={},
        )


class _Sums:
    """The running sums of one method, for P candidates (arrays of shape (P,))."""

    def __init__(self, n_policies: int) -> None:
        zeros = np.zeros(n_policies)
        self.rows = 0
        # betting: totals and squared deviations of the four series (value low/high,
        # difference low/high), and the largest log wealth at Delta = 0
        self.total = np.zeros((4, n_policies))
        self.squares = np.zeros((4, n_policies))
        self.best_log_wealth = zeros.copy()
        # asymptotic: mean and centred sum of squares of the value and difference terms
        self.mean = np.zeros((2, n_policies))
        self.m2 = np.zeros((2, n_policies))
        # the intersection with earlier looks (normalized scale)
        self.low = np.zeros((2, n_policies))
        self.low[1] = -1.0
        self.high = np.ones((2, n_policies))
        self.min_p = np.ones(n_policies)
        self.reward_sum = 0.0
        # the weights' sum and sum of squares: the effective sample size of each candidate
        self.weight_sum = zeros.copy()
        self.weight_squares = zeros.copy()

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "total": self.total.tolist(),
            "squares": self.squares.tolist(),
            "best_log_wealth": self.best_log_wealth.tolist(),
            "mean": self.mean.tolist(),
            "m2": self.m2.tolist(),
            "low": self.low.tolist(),
            "high": self.high.tolist(),
            "min_p": self.min_p.tolist(),
            "reward_sum": self.reward_sum,
            "weight_sum": self.weight_sum.tolist(),
            "weight_squares": self.weight_squares.tolist(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], n_policies: int) -> _Sums:
        sums = cls(n_policies)
        sums.rows = int(data["rows"])
        sums.reward_sum = float(data["reward_sum"])
        for name in (
            "total",
            "squares",
            "best_log_wealth",
            "mean",
            "m2",
            "low",
            "high",
            "min_p",
            "weight_sum",
            "weight_squares",
        ):
            value = np.asarray(data[name], dtype=np.float64)
            if value.shape != getattr(sums, name).shape or not np.isfinite(value).all():
                raise ParameterError(
                    f"the monitor state's `{name}` has shape {value.shape} or non-finite entries; "
                    f"expected shape {getattr(sums, name).shape}: the state file is damaged or "
                    "from other candidates."
                )
            setattr(sums, name, value)
        return sums


class Monitor:
    """Anytime-valid confidence sequences for candidate policies, updated batch by batch.

    Parameters
    ----------
    policies : optional
        As in :func:`ope.evaluate`: ``None`` (every ``target__<name>`` column), names, or a dict
        of policy objects (DR needs each candidate's whole distribution: objects, or
        ``target_dist__`` columns). Resolved on each batch; the names must stay the same.
    reward_range : (float, float)
        A priori range of the rewards (required: both methods map rewards to [0, 1]).
    estimator : {"ips", "dr"}, default "ips"
    method : {"betting", "asymptotic"}, optional
        Default ``"betting"`` for IPS (finite-sample) and ``"asymptotic"`` for DR (the only one
        that applies).
    confidence_level : float, default 0.95
    simultaneous : bool, default False
        Split the level over the candidates (Bonferroni) so that it holds for all at once.
    planned_rows : int, optional
        ``"asymptotic"``: the row count at which the sequence is tightest (default
        :data:`DEFAULT_PLANNED_ROWS`); the sequence is valid at every time whatever it is.
    context_columns : sequence of str, optional
        DR: the reward model's context features (default: chosen on the first batch as
        :func:`ope.evaluate` chooses them).
    reward_model : ope.RewardModel or scikit-learn regressor, optional
        DR: refitted after each look on the last ``model_rows`` rows (default
        ``RewardModel(n_folds=2)``).
    model_rows : int, default :data:`DEFAULT_MODEL_ROWS`
    rng : int, optional
        Seed of the reward model's folds.
    weight_column : str, optional
        The column of the rows' sampling weights (default ``weight`` when present), as in
        :func:`ope.evaluate`. The monitor's sequences are for unweighted rows: a batch whose
        sampling weights are not all 1 is refused (``EstimationError``).

    Raises
    ------
    MissingBoundsError
        ``reward_range`` is None.
    ParameterError
        Unknown estimator or method; ``method="betting"`` with ``estimator="dr"``; a
        ``weight_column`` that is not a column name.
    """

    def __init__(
        self,
        policies: Any = None,
        *,
        reward_range: tuple[float, float] | None,
        estimator: str = "ips",
        method: str | None = None,
        confidence_level: float = 0.95,
        simultaneous: bool = False,
        planned_rows: int | None = None,
        context_columns: Sequence[str] | None = None,
        reward_model: Any = None,
        model_rows: int = DEFAULT_MODEL_ROWS,
        rng: int | None = 0,
        weight_column: str | None = None,
    ) -> None:
        if estimator not in MONITOR_ESTIMATORS:
            raise ParameterError(
                f"`estimator` must be one of {', '.join(MONITOR_ESTIMATORS)}; got {estimator!r}."
            )
        if method is None:
            method = "betting" if estimator == "ips" else "asymptotic"
        if method not in MONITOR_METHODS:
            raise ParameterError(
                f"`method` must be one of {', '.join(MONITOR_METHODS)}; got {method!r}."
            )
        if method == "betting" and estimator == "dr":
            raise ParameterError(
                "`method`: 'betting' needs pseudo-outcomes bounded below, and DR's "
                "w (r - q(x, a)) + q(x, pi) has no lower bound without a weight bound: use "
                "'asymptotic' with DR, or IPS for the finite-sample sequence."
            )
        if not isinstance(simultaneous, (bool, np.bool_)):
            raise ParameterError(f"`simultaneous` must be True or False; got {simultaneous!r}.")
        if reward_range is None:
            from ope.exceptions import MissingBoundsError

            raise MissingBoundsError(
                "a monitor needs the a priori reward_range (e.g. (0, 1) for clicks): both "
                "sequences map the rewards to [0, 1]. The observed minimum and maximum are not "
                "bounds."
            )
        self.reward_range = require_reward_range(reward_range, "monitoring")
        self.estimator = estimator
        self.method = method
        self.confidence_level = check_confidence_level(confidence_level)
        self.simultaneous = bool(simultaneous)
        self.planned_rows = check_positive_int(
            DEFAULT_PLANNED_ROWS if planned_rows is None else planned_rows, "planned_rows"
        )
        self.model_rows = check_positive_int(model_rows, "model_rows", minimum=MIN_MODEL_ROWS)
        if context_columns is not None and (
            not isinstance(context_columns, (list, tuple))
            or not all(isinstance(c, str) for c in context_columns)
        ):
            raise ParameterError(
                f"`context_columns` must be a list of column names; got {context_columns!r}."
            )
        self.context_columns = None if context_columns is None else list(context_columns)
        self.weight_column = (
            None
            if weight_column is None
            else check_name(
                weight_column, "weight_column", what="a column name", example="weight_column='w'"
            )
        )
        self.reward_model = reward_model
        self.rng = rng
        self.policies = policies
        self.names: list[str] | None = None
        self._sums: _Sums | None = None
        self._history: list[tuple[Any, ...]] = []
        self._notes: list[str] = []
        self._looks = 0
        self._window: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._model: Any = None
        self._fallback = 0.5

    # ---- the per-batch arrays ----------------------------------------------------------
    def _read(self, batch: Any) -> Any:
        """The batch as ``BanditLogs``; None for a batch without rows (an hour without
        traffic), which is a look that changes nothing: a path or table that
        :func:`ope.read_logs` reads without a row, or any pandas or pyarrow table of 0 rows
        (its columns hold nothing to check, ``pandas.DataFrame()`` included)."""
        import pyarrow as pa

        from ope.io import read_logs
        from ope.logs import BanditLogs

        if isinstance(batch, BanditLogs):
            return batch
        if isinstance(batch, (pd.DataFrame, pa.Table)) and len(batch) == 0:
            return None
        if type(batch).__name__ == "LogScan":
            raise ParameterError(
                "a monitor takes batches in memory (a BanditLogs, a pandas or pyarrow table, or "
                "a path), not a scan: read each new file with ope.read_logs."
            )
        try:
            return read_logs(batch)
        except ValidationError as exc:
            if exc.report is not None and exc.report.rows_read == 0:
                return None  # no row read (not: every row rejected, which stays an error)
            raise

    def _check_sampling_weights(self, logs: Any) -> None:
        """Refuse a batch whose rows carry sampling weights (not all 1): the sequences are for
        unweighted rows (see the module)."""
        from ope.estimators import weighted_refusal
        from ope.exceptions import EstimationError
        from ope.weights import check_sampling_weight, sampling_weight_column

        column = sampling_weight_column(logs.columns, self.weight_column)
        if column is None:
            return
        s = check_sampling_weight(logs.column(column), logs.n, name=column)
        if bool(np.all(s == 1.0)):
            return  # unit weights are the unweighted rows
        raise EstimationError(
            weighted_refusal(
                self.method,
                column,
                advice=(
                    "A monitor's sequences are for unweighted rows: one for that ratio would "
                    "also have to cover its denominator, the population so far (estimated by "
                    "the sum of the weights). Evaluate the weighted logs at one look with "
                    "ope.evaluate (ci='normal', 't' or 'bootstrap' take the weights), or drop "
                    f"the `{column}` column to monitor the kept rows as they are (the value of "
                    "the kept traffic, not of the logged population)."
                ),
            )
        )

    def _weights(self, logs: Any) -> tuple[np.ndarray, np.ndarray, Any]:
        from ope.policies import target_propensities

        try:
            tp = target_propensities(logs, self.policies, with_distributions=self.estimator == "dr")
        except PolicyError as exc:
            text = str(exc)
            if self.estimator != "dr" or "with_distributions=True" not in text:
                raise
            raise PolicyError(
                "a DR monitor (estimator='dr') needs each candidate's whole distribution over "
                "the actions (DR's q(x, pi) sums the reward model over them), but "
                f"{text.split(', but ', 1)[1]} Or monitor with estimator='ips', which needs "
                "only the logged action's probability (target__<name>)."
            ) from None
        names = list(tp.names)
        if not names:
            raise ParameterError(
                "no candidate policies: the batch has no target__<name> columns and `policies` "
                "is None."
            )
        if self.names is None:
            self.names = names
            self._sums = _Sums(len(names))
        elif names != self.names:
            raise SchemaError(
                f"this batch's candidates {names} differ from the monitor's {self.names}: every "
                "batch must carry the same candidates, in the same order."
            )
        p = np.asarray(logs.column("propensity"), dtype=np.float64)
        r = np.asarray(logs.column("reward"), dtype=np.float64)
        low, high = self.reward_range
        outside = ~((r >= low) & (r <= high))
        if outside.any():
            first = int(np.flatnonzero(outside)[0])
            raise ValidationError(
                f"{int(outside.sum())} rewards lie outside the reward range [{low:g}, {high:g}] "
                f"(first at row {first} of this batch: {float(r[first])!r}); the range must "
                "be an a priori bound every reward satisfies."
            )
        w = tp.values / p[:, None]
        return w, (r - low) / (high - low), tp

    def _dr_terms(self, logs: Any, scaled: np.ndarray, tp: Any) -> tuple[np.ndarray, np.ndarray]:
        """Predictable q(x_t, a_t) and q(x_t, pi) on the [0, 1] scale, then the window refit."""
        import scipy.sparse as sp

        from ope.context import context_column_choice, context_matrix

        if self.context_columns is None:
            choice = context_column_choice(logs)
            self.context_columns = list(choice.columns)
            self._notes.extend(choice.notes)
            self._note(
                "DR's reward model uses the context columns "
                + (", ".join(self.context_columns) or "none (a constant per action)")
                + " (chosen on the first batch; context_columns= / --context-columns to choose)."
            )
        x = (
            context_matrix(logs, self.context_columns)
            if self.context_columns
            else np.empty((logs.n, 0))
        )
        actions = np.asarray(logs.table.column("action").to_numpy(zero_copy_only=False))
        n, n_pol = logs.n, len(self.names or ())
        q_logged = np.full(n, self._fallback)
        q_target = np.full((n, n_pol), self._fallback)
        if self._model is not None:
            fitted, catalog = self._model
            code = np.searchsorted(catalog, actions).clip(0, len(catalog) - 1)
            known = catalog[code] == actions
            if known.any():
                q_logged[known] = fitted.predict(x[known], code[known])
            for j, name in enumerate(self.names or ()):  # a loop over candidates, not rows
                dist = tp.distributions[name]
                m = sp.csr_array(dist.matrix)
                labels = np.asarray(dist.actions)
                cols = np.searchsorted(catalog, labels).clip(0, len(catalog) - 1)
                entry_known = (catalog[cols] == labels)[m.indices]
                rows = np.repeat(np.arange(n), np.diff(m.indptr))
                keep = entry_known & (m.data != 0.0)
                q_pairs = np.full(m.data.size, self._fallback)
                if keep.any():  # the model at the support pairs of actions it has seen
                    q_pairs[keep] = fitted.predict(x[rows[keep]], cols[m.indices[keep]])
                q_target[:, j] = np.bincount(rows, weights=m.data * q_pairs, minlength=n)
        # the window for the next refit: this batch's rows appended, the oldest dropped
        self._window.append((x, actions, scaled))
        while sum(part[0].shape[0] for part in self._window[1:]) >= self.model_rows:
            self._window.pop(0)
        self._refit()
        return np.clip(q_logged, 0.0, 1.0), np.clip(q_target, 0.0, 1.0)

    def _refit(self) -> None:
        from ope.reward_models import RewardModel

        x = np.concatenate([part[0] for part in self._window])[-self.model_rows :]
        a = np.concatenate([part[1] for part in self._window])[-self.model_rows :]
        r = np.concatenate([part[2] for part in self._window])[-self.model_rows :]
        self._fallback = float(np.mean(r)) if r.size else 0.5
        if r.size < MIN_MODEL_ROWS:
            return
        catalog = np.unique(a)
        if isinstance(self.reward_model, RewardModel):
            model = self.reward_model
        elif self.reward_model is None:
            model = RewardModel(n_folds=2, rng=self.rng)
        else:
            model = RewardModel(estimator=self.reward_model, n_folds=2, rng=self.rng)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a refit's small-sample notes, at every look
            fitted = model.fit(x, np.searchsorted(catalog, a), r, n_actions=len(catalog))
        self._model = (fitted, catalog)

    # ---- the update ----------------------------------------------------------------------
    def update(self, logs: Any) -> MonitorResult:
        """Take the next batch of logs (rows in time order) and return the state after it.

        Parameters
        ----------
        logs : BanditLogs, pandas.DataFrame, pyarrow.Table or path
            The batch.
            Validated by :func:`ope.read_logs` when not already a ``BanditLogs``.

        Returns
        -------
        MonitorResult

        A batch without rows (an hour without traffic) is a look that changes nothing: its
        history rows repeat the previous look's, and a note says so. A refused batch changes
        nothing either.

        Raises
        ------
        SchemaError
            The batch's candidates differ from the first batch's.
        ValidationError
            A reward outside ``reward_range``, and what :func:`ope.read_logs` raises.
        EstimationError
            The rows carry sampling weights (``weight_column``) that are not all 1.
        PolicyError
            DR without each candidate's whole distribution.
        """
        logs = self._read(logs)
        if logs is None:
            self._looks += 1
            self._note(
                "a batch without rows (e.g. an hour without traffic) is a look that changes "
                "nothing: its history rows repeat the previous look's."
            )
            if self._sums is not None:
                self._look(self._sums)
            return self.result()
        self._check_sampling_weights(logs)
        w, scaled, tp = self._weights(logs)
        sums = self._sums
        assert sums is not None and self.names is not None
        if self.estimator == "dr":
            q_logged, q_target = self._dr_terms(logs, scaled, tp)
            value = q_target + w * (scaled - q_logged)[:, None]
        else:
            value = w * scaled[:, None]
        if self.method == "betting":
            self._bet(w, scaled, sums)
        else:
            self._average(value, scaled, sums)
        sums.rows += logs.n
        sums.reward_sum += float(scaled.sum())
        sums.weight_sum = sums.weight_sum + w.sum(axis=0)
        with np.errstate(over="ignore"):  # inf: an effective sample size of 0
            sums.weight_squares = sums.weight_squares + (w * w).sum(axis=0)
        self._looks += 1
        self._look(sums)
        return self.result()

    def _alpha(self) -> float:
        """The level of each sequence: split over every candidate's value and difference when
        ``simultaneous``."""
        alpha = 1.0 - self.confidence_level
        return alpha / (2 * len(self.names or ())) if self.simultaneous else alpha

    def _bet(self, w: np.ndarray, scaled: np.ndarray, sums: _Sums) -> None:
        from ope.intervals.betting import log_wealth, running_stats

        rest = 1.0 - scaled
        series = np.stack(
            [
                (w * scaled[:, None]).T,
                (w * rest[:, None]).T,
                (0.5 * (w * scaled[:, None] - scaled[:, None] + 1.0)).T,
                (0.5 * (w * rest[:, None] - rest[:, None] + 1.0)).T,
            ]
        )  # (4, P, n): one pass of cumulative sums for all four and every candidate
        with np.errstate(over="ignore", invalid="ignore"):  # checked just below
            total, squares = running_stats(series, start=(sums.total, sums.squares, sums.rows))
        if not np.isfinite(squares[..., -1]).all():
            raise ValidationError(
                "the sum of squared importance weights overflows float64: the weights are too "
                "large. Check the propensities."
            )
        steps = sums.rows + np.arange(1, w.shape[0] + 1, dtype=np.float64)
        s_zero = total[2] - 0.5 * steps
        with np.errstate(invalid="ignore"):
            wealth = np.where(
                s_zero > 0.0, log_wealth(np.maximum(s_zero, 0.0), squares[2]), -np.inf
            )
        sums.best_log_wealth = np.maximum(sums.best_log_wealth, wealth.max(axis=-1))
        sums.total, sums.squares = total[..., -1], squares[..., -1]

    def _average(self, value: np.ndarray, scaled: np.ndarray, sums: _Sums) -> None:
        terms = np.stack([value.T, (value - scaled[:, None]).T])  # (2, P, n)
        n_b = terms.shape[-1]
        with np.errstate(over="ignore", invalid="ignore"):  # refused just below
            mean_b = terms.mean(axis=-1)
            m2_b = ((terms - mean_b[..., None]) ** 2).sum(axis=-1)
            n_a = sums.rows
            delta = mean_b - sums.mean
            total = n_a + n_b
            m2 = sums.m2 + m2_b + delta * delta * (n_a * n_b / total)
        if not np.isfinite(m2).all():
            raise ValidationError(
                "the sum of squared pseudo-outcomes overflows float64: the importance weights "
                "are too large. Check the propensities."
            )
        sums.m2 = m2
        sums.mean = sums.mean + delta * (n_b / total)

    def _look(self, sums: _Sums) -> None:
        t = sums.rows
        alpha = self._alpha()
        n_pol = len(self.names or ())
        if t == 0:
            est = np.full((2, n_pol), np.nan)
            low, high = sums.low.copy(), sums.high.copy()
            p = sums.min_p.copy()
        elif self.method == "betting":
            from ope.intervals.betting import lower_from_sums

            threshold = math.log(2.0 / alpha)
            ends = np.array(
                [
                    [
                        lower_from_sums(sums.total[k, j], sums.squares[k, j], t, threshold)
                        for j in range(n_pol)
                    ]  # a loop over candidates, four root-finds each
                    for k in range(4)
                ]
            )
            low = np.stack([ends[0], 2.0 * ends[2] - 1.0])
            high = np.stack([1.0 - ends[1], 1.0 - 2.0 * ends[3]])
            est = np.stack([sums.total[0] / t, 2.0 * sums.total[2] / t - 1.0])
            p = np.minimum(1.0, np.exp(-sums.best_log_wealth))
        else:
            rho2 = best_rho2(self.planned_rows, alpha)
            # a floor 1/t on the variance (it vanishes as t grows) keeps a start without
            # spread (every reward equal, every weight 0) from collapsing the sequence
            variance = np.maximum(sums.m2 / t, 1.0 / t)
            ess = np.divide(
                sums.weight_sum**2,
                sums.weight_squares,
                out=np.zeros_like(sums.weight_sum),
                where=sums.weight_squares > 0,
            )
            started = ess >= MIN_EFFECTIVE_ROWS
            margin = np.where(started, mixture_margin(t, variance, rho2, alpha), np.inf)
            est = sums.mean.copy()
            low, high = est - margin, est + margin
            p = np.array(
                [
                    _mixture_p_value(t, est[1, j], variance[1, j], rho2) if started[j] else 1.0
                    for j in range(n_pol)
                ]
            )  # a loop over candidates
            if not started.all():
                self._note(
                    "an asymptotic sequence is the whole range until the candidate's effective "
                    f"sample size reaches {MIN_EFFECTIVE_ROWS} rows."
                )
        # betting: the value is one fixed target, so each look's interval is intersected with
        # the earlier ones (still valid, and nested). The difference's target moves with a
        # logger that learns (an intersection could exclude it), and an asymptotic sequence
        # is weakest at its first looks: both keep each look's own interval.
        nested = self.method == "betting"
        low = np.stack(
            [np.maximum(sums.low[0] if nested else 0.0, low[0]), np.maximum(-1.0, low[1])]
        )
        high = np.stack(
            [np.minimum(sums.high[0] if nested else 1.0, high[0]), np.minimum(1.0, high[1])]
        )
        crossed = low > high
        if crossed.any():
            self._note(
                "a confidence sequence became empty (its lower end passed its upper end) and was "
                "reduced to the midpoint; under the assumptions this happens only when it misses, "
                "more likely the propensities are wrong or a candidate's probabilities do not sum "
                "to 1."
            )
            mid = 0.5 * (low + high)
            low, high = np.where(crossed, mid, low), np.where(crossed, mid, high)
        sums.low, sums.high = low, high
        sums.min_p = np.minimum(sums.min_p, p)
        lo, hi = self.reward_range
        span = hi - lo
        for j, name in enumerate(self.names or ()):  # a loop over candidates
            decision = "better" if low[1, j] > 0.0 else "worse" if high[1, j] < 0.0 else "undecided"
            self._history.append(
                (
                    self._looks,
                    t,
                    name,
                    lo + span * est[0, j],
                    lo + span * low[0, j],
                    lo + span * high[0, j],
                    span * est[1, j],
                    span * low[1, j],
                    span * high[1, j],
                    float(sums.min_p[j]),
                    decision,
                )
            )

    def _note(self, text: str) -> None:
        if text not in self._notes:
            self._notes.append(text)

    def result(self) -> MonitorResult:
        """The state after the last look (:class:`MonitorResult`)."""
        history = pd.DataFrame(self._history, columns=list(COLUMNS))
        for column in COLUMNS[3:10]:
            history[column] = history[column].astype(np.float64)
        n_pol = len(self.names or ())
        current = history.iloc[len(history) - n_pol :].reset_index(drop=True)
        notes = list(self._notes)
        outside = (
            (current["estimate"] < current["ci_low"])
            | (current["estimate"] > current["ci_high"])
            | (current["difference"] < current["difference_low"])
            | (current["difference"] > current["difference_high"])
        )
        if outside.any():
            names = ", ".join(map(str, current.loc[outside, "policy"]))
            shape = (
                "the set of values its betting test has not rejected, not centred on the mean"
                if self.method == "betting"
                else "centred on the mean"
            )
            notes.append(
                f"the estimate (or difference) of {names} lies outside its confidence sequence: "
                f"the estimate is the plain {self.estimator.upper()} mean of the rows so far, "
                "unbiased but not held to the reward range (a few rows with large weights move "
                "it past the range's ends), while the sequence is for the value itself: "
                f"{shape}, and cut to the a priori range. Read the sequence."
            )
        if self.method == "asymptotic":
            notes.append(
                "asymptotic confidence sequence (Gaussian mixture, tightest at "
                f"{self.planned_rows:,} rows): time-uniform coverage holds in the limit, given a "
                "conditional variance that settles; benchmarks/monitoring.py measures it."
            )
        if not self.simultaneous:
            notes.append(
                "the confidence level holds for each sequence (each candidate's value, and its "
                "difference); simultaneous=True (--simultaneous) makes it hold for all at once."
            )
        return MonitorResult(
            estimator=self.estimator,
            method=self.method,
            confidence_level=self.confidence_level,
            reward_range=self.reward_range,
            rows=0 if self._sums is None else self._sums.rows,
            looks=self._looks,
            policies=list(self.names or ()),
            current=current,
            history=history,
            simultaneous=self.simultaneous,
            notes=tuple(notes),
        )

    # ---- persistence -----------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """JSON-ready state: the settings, the sums and the history (no rows; DR's reward-model
        window is not kept, so a resumed DR monitor refits from the next batch on)."""
        return {
            "version": STATE_VERSION,
            "estimator": self.estimator,
            "method": self.method,
            "confidence_level": self.confidence_level,
            "simultaneous": self.simultaneous,
            "planned_rows": self.planned_rows,
            "reward_range": list(self.reward_range),
            "policies": self.names,
            "context_columns": self.context_columns,
            "looks": self._looks,
            "sums": None if self._sums is None else self._sums.to_dict(),
            "history": [list(row) for row in self._history],
            "notes": list(self._notes),
        }

    @classmethod
    def from_state(cls, state: Any, policies: Any = None, **options: Any) -> Monitor:
        """A monitor that continues from :meth:`state` (its settings, sums and history).

        ``options`` are the constructor's DR settings (``reward_model``, ``model_rows``,
        ``rng``); the statistical settings come from the state.

        Raises
        ------
        ParameterError
            A state of another version, or damaged.
        """
        if not isinstance(state, Mapping) or state.get("version") != STATE_VERSION:
            raise ParameterError(
                f"`state` is not a monitor state of version {STATE_VERSION} (Monitor.state()); "
                "start a new monitor, or pass the file it wrote."
            )
        try:
            mon = cls(
                policies,
                reward_range=tuple(state["reward_range"]),
                estimator=state["estimator"],
                method=state["method"],
                confidence_level=state["confidence_level"],
                simultaneous=state["simultaneous"],
                planned_rows=state["planned_rows"],
                context_columns=state["context_columns"],
                **options,
            )
            names = state["policies"]
            if names is not None:
                mon.names = [str(n) for n in names]
                mon._sums = _Sums.from_dict(state["sums"], len(mon.names))
            mon._looks = int(state["looks"])
            mon._history = [tuple(row) for row in state["history"]]
            mon._notes = [str(n) for n in state["notes"]]
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, ParameterError):
                raise
            raise ParameterError(
                f"`state` is damaged ({type(exc).__name__}: {exc}); start a new monitor."
            ) from None
        return mon


def run_monitor(
    batches: Iterable[Any],
    policies: Any = None,
    *,
    until_decided: bool = False,
    **options: Any,
) -> MonitorResult:
    """Run a :class:`Monitor` over an iterable of batches (a Python iterator of log batches, in
    arrival order) and return its last state.

    Parameters
    ----------
    batches : iterable of BanditLogs, DataFrames, tables or paths
    policies : optional
        As in :class:`Monitor`.
    until_decided : bool, default False
        Stop at the first look after which every candidate is decided (the rest of the
        iterator is not read).
    **options
        The :class:`Monitor` settings (``reward_range`` is required).

    Returns
    -------
    MonitorResult

    Raises
    ------
    EstimationError
        ``batches`` yields nothing.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from ope.monitor import run_monitor
    >>> rng = np.random.default_rng(1)
    >>> def batches():
    ...     while True:
    ...         a = rng.integers(0, 2, 1000)
    ...         yield pd.DataFrame({"action": a, "propensity": 0.5,
    ...                             "reward": rng.binomial(1, np.where(a == 1, 0.8, 0.3)),
    ...                             "target__ones": (a == 1).astype(float)})
    >>> result = run_monitor(batches(), reward_range=(0, 1), until_decided=True)
    >>> result.decided, result.looks < 10
    (True, True)
    """
    from ope.exceptions import EstimationError

    if not isinstance(until_decided, (bool, np.bool_)):
        raise ParameterError(f"`until_decided` must be True or False; got {until_decided!r}.")
    check_forwarded(options, run_monitor, Monitor.__init__, target_name="ope.Monitor")
    if isinstance(batches, (str, bytes, pd.DataFrame)) or not isinstance(batches, Iterable):
        raise ParameterError(
            "`batches` must be an iterable of log batches (a list or a generator of "
            f"DataFrames, tables or paths); got {type(batches).__name__}. For one batch, pass "
            "[batch]."
        )
    mon = Monitor(policies, **options)
    result = None
    for k, batch in enumerate(batches):
        try:
            result = mon.update(batch)
        except ParameterError as exc:
            raise ParameterError(f"`batches` item {k}: {exc}") from None
        if until_decided and result.decided:
            break
    if result is None:
        raise EstimationError("`batches` yielded no batch: nothing to monitor.")
    return result


def parse_interval(text: Any, name: str) -> float:
    """Seconds of a duration written ``30s``, ``10m``, ``1h``, ``1d`` or a number of seconds
    (``>= 0``).

    >>> from ope.monitor import parse_interval
    >>> parse_interval("10m", "every"), parse_interval("2.5", "every")
    (600.0, 2.5)
    """
    value = str(text).strip().lower()
    unit = INTERVAL_UNITS.get(value[-1:], None) if value else None
    number = value[:-1] if unit is not None else value
    try:
        seconds = float(number) * (unit or 1.0)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds < 0:
        raise ParameterError(
            f"`{name}` must be a duration such as 30s, 10m, 1h or a number of seconds >= 0; "
            f"got {text!r}."
        )
    return seconds


def new_log_files(
    directory: Any, seen: Mapping[str, Any], *, settle: float = 0.0, now: float | None = None
) -> tuple[list[str], list[str]]:
    """The log files of ``directory`` to read next, oldest first, and what changed.

    A file is read once: ``seen`` maps the names already read to their ``[size,
    modification time in ns]``. Names starting with ``.`` or ``_`` (partial uploads, Spark's
    ``_SUCCESS``) and suffixes other than :data:`LOG_SUFFIXES` are skipped; so is a file
    modified less than ``settle`` seconds before ``now`` (still being written: it is read at a
    later poll). Returns ``(names, notes)``: the new names in order of modification time then
    name, and one note per file that changed or vanished after it was read (its new rows are
    not monitored: write new files rather than appending).

    Raises
    ------
    DataFileError
        ``directory`` is not a readable directory.
    """
    import os
    import time

    from ope.exceptions import DataFileError

    try:
        entries = list(os.scandir(directory))
    except OSError as exc:
        raise DataFileError(
            f"cannot list the log directory {str(directory)!r}: {exc.strerror or exc}."
        ) from None
    clock = time.time() if now is None else now
    fresh: list[tuple[int, str]] = []
    notes: list[str] = []
    present = set()
    for entry in entries:  # a loop over the directory's files, not rows
        name = entry.name
        if name.startswith((".", "_")) or not name.lower().endswith(LOG_SUFFIXES):
            continue
        try:
            st = entry.stat()
        except OSError:
            continue
        if not entry.is_file():
            continue
        present.add(name)
        if name in seen:
            if list(seen[name]) != [st.st_size, st.st_mtime_ns]:
                notes.append(
                    f"{name} changed after it was read; its new rows are not monitored (write "
                    "each batch to a new file)."
                )
            continue
        if clock - st.st_mtime_ns / 1e9 < settle:
            continue
        fresh.append((st.st_mtime_ns, name))
    notes += [
        f"{name} was removed after it was read (its rows stay in the sequence)."
        for name in sorted(set(seen) - present)
    ]
    return [name for _, name in sorted(fresh)], notes
