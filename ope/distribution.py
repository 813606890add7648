r"""Off-policy outcome distributions: the CDF of a candidate's outcome (reward, cost, latency),
its quantiles, CVaR and exceedance probabilities, each with a band that holds simultaneously
over every threshold.

Under the candidate :math:`\pi` the outcome's CDF is :math:`F(t) = P_\pi(Y \le t) =
\mathbb E_0[w\,1\{Y \le t\}]` with :math:`w = \pi(a \mid x) / \pi_0(a \mid x)` (Huang et al.,
NeurIPS 2021, off-policy risk assessment; Chandak et al., NeurIPS 2021). Two estimators:

* ``"ips"``: :math:`\hat F(t) = \frac1n \sum_i w_i 1\{y_i \le t\}`, unbiased at every
  :math:`t`, nondecreasing, and clipped to :math:`[0, 1]` (its total is the mean weight, not
  1);
* ``"snips"``: :math:`\hat F(t) = \sum_i w_i 1\{y_i \le t\} / \sum_i w_i`, a CDF by
  construction, consistent;
* ``"dr"``: :math:`\hat F(t) = \frac1n \sum_i \big[\hat G(t \mid x_i, \pi) + w_i (1\{y_i
  \le t\} - \hat G(t \mid x_i, a_i))\big]` with a model :math:`\hat G` of the conditional CDF
  (Huang et al. 2021, section 4), :math:`\hat G(t \mid x, \pi) = \sum_a \pi(a \mid x) \hat
  G(t \mid x, a)`. The model is one cross-fitted regression of the indicator :math:`1\{y \le
  u_l\}` per knot :math:`u_l` (``model_thresholds`` of them: the outcome's distinct values
  when it has few, else its logged quantiles), linear in :math:`t` between knots and 1 at the
  largest logged outcome. DR's raw value is unbiased at every :math:`t` whatever the model,
  since each row's :math:`\hat G` is fitted on other rows; a good model removes the part of the
  outcome the context explains and narrows the band. The estimate is made nondecreasing by
  rearrangement (sorting its values; Chernozhukov, Fernandez-Val & Galichon 2010), which never
  moves it farther from a CDF in the sup norm, so the band stays valid, and clipped to [0, 1]:
  both can lift a tail where the rows are few or the weights heavy.

Two bands, each a function :math:`L \le F \le U` for **every** :math:`t` at once, so that any
threshold, quantile level or CVaR level read from one band holds jointly with the others:

* ``"hoeffding"`` (IPS, with an a priori ``weight_bound`` :math:`W`; finite-sample): by
  bracketing :math:`F` at its :math:`j/K` quantiles and Hoeffding's inequality at the
  :math:`2K - 1` fixed bracket ends (terms in :math:`[0, W]`),
  :math:`\sup_t |\hat F(t) - F(t)| \le W \sqrt{\log(2(2K-1)/\delta) / (2n)} + 1/K` with
  probability at least :math:`1 - \delta`, for the :math:`K` that makes it smallest. It is
  conservative and needs no resampling.
* ``"multiplier"`` (every estimator; asymptotic): the :math:`1 - \delta` quantile of
  :math:`\sup_t |G^*(t)|`, where :math:`G^*` is the Gaussian multiplier process of the
  estimator's influence terms (a multiplier bootstrap of the empirical process). Restricted to
  the thresholds it is a Gaussian vector with independent increments, drawn exactly from
  per-threshold sums (one pass over the rows; ``n_resamples`` draws of length at most
  ``resolution``). DR's model terms enter through their totals, drawn jointly with the
  increments from per-threshold cross-products (one more vector of the knots' size per draw).

The thresholds are the outcome's distinct values; past ``resolution`` of them, the rows are
grouped into ``resolution`` buckets at the logged outcome's quantiles and the band between two
bucket ends is widened to stay valid by monotonicity (:math:`F(t) \in [L(g_j), U(g_{j+1})]`).
The logging policy's own distribution (every :math:`w = 1`) is given beside, with the
Dvoretzky-Kiefer-Wolfowitz band (Massart's constant; finite-sample).

Quantiles :math:`q(u) = \inf\{t : F(t) \ge u\}` are bounded by the quantiles of :math:`U` and
:math:`L`; CVaR at level :math:`\alpha` (lower tail: :math:`\frac1\alpha \int_0^\alpha q(u)\,du`,
the mean of the worst :math:`\alpha` share of rewards; upper tail:
:math:`\frac1\alpha \int_{1-\alpha}^1 q(u)\,du`, the mean of the worst share of costs or
latencies) by the integrals of those quantile functions, which need the outcome's a priori
range (``outcome_range``) where a band leaves a tail open. All the intervals read from one band
hold simultaneously.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pandas as pd

from ope._result import Result, ResultParts
from ope._validation import (
    as_float_array,
    check_choice,
    check_finite,
    check_confidence_level,
    check_name,
    check_names,
    check_positive_int,
    check_real,
    finite_pair,
    check_weight_bound,
    resolve_seed,
    user_stacklevel,
)
from ope._format import Note
from ope._thresholds import few_effective_rows, few_effective_rows_note, kish_ess
from ope.exceptions import (
    EstimationError,
    ParameterError,
    PolicyError,
    SchemaError,
    SmallSampleWarning,
    ValidationError,
)

__all__ = [
    "DISTRIBUTION_ESTIMATORS",
    "BAND_METHODS",
    "DEFAULT_RESOLUTION",
    "DEFAULT_BAND_RESAMPLES",
    "DEFAULT_MODEL_THRESHOLDS",
    "MAX_BAND_RESAMPLES",
    "METRIC_KINDS",
    "OutcomeDistribution",
    "OutcomeDistributions",
    "outcome_distribution",
    "return_distribution",
    "hoeffding_band_width",
    "dkw_band_width",
    "parse_metric",
]

#: The estimators of a candidate's outcome CDF.
DISTRIBUTION_ESTIMATORS: Final = ("ips", "snips", "dr")

#: The most knots of DR's model of the conditional CDF (one indicator regression each).
DEFAULT_MODEL_THRESHOLDS: Final = 16

#: The simultaneous bands: finite-sample with a weight bound, or the multiplier bootstrap.
BAND_METHODS: Final = ("hoeffding", "multiplier")

#: The most thresholds a distribution keeps (the outcome's distinct values, else buckets).
DEFAULT_RESOLUTION: Final = 2000

#: Draws of the multiplier process.
DEFAULT_BAND_RESAMPLES: Final = 1000

#: The most draws of the multiplier process a call takes.
MAX_BAND_RESAMPLES: Final = 100_000

#: The metrics a distribution answers: ``kind:argument`` (``cdf`` alone: at the logged
#: outcome's deciles).
METRIC_KINDS: Final = {
    "cdf": "P(Y <= t) at threshold t (alone: at the logged outcome's deciles)",
    "exceed": "P(Y > t) at threshold t",
    "quantile": "the quantile at a level in (0, 1)",
    "cvar": "the mean of the lowest share alpha of outcomes (rewards: the worst)",
    "upper_cvar": "the mean of the highest share alpha of outcomes (costs, latencies: the worst)",
}

_LEVEL_KINDS: Final = frozenset({"quantile", "cvar", "upper_cvar"})


def hoeffding_band_width(n: int, weight_bound: float, confidence_level: float) -> float:
    """Half-width of the finite-sample band of the IPS CDF (see the module): the smallest
    :math:`W \\sqrt{\\log(2(2K-1)/\\delta)/(2n)} + 1/K` over integers :math:`K \\ge 1`.

    Examples
    --------
    >>> round(hoeffding_band_width(10_000, 1.0, 0.95), 4)
    0.0253
    """
    delta = 1.0 - confidence_level
    k = np.arange(1, max(2, int(4 * math.sqrt(n)) + 2), dtype=np.float64)
    widths = weight_bound * np.sqrt(np.log(2 * (2 * k - 1) / delta) / (2 * n)) + 1 / k
    return float(widths.min())


def dkw_band_width(n: float, confidence_level: float) -> float:
    """Half-width of the Dvoretzky-Kiefer-Wolfowitz band of an empirical CDF of ``n`` rows
    (Massart's constant): :math:`\\sqrt{\\log(2/\\delta)/(2n)}`.

    Examples
    --------
    >>> round(dkw_band_width(10_000, 0.95), 4)
    0.0136
    """
    return math.sqrt(math.log(2.0 / (1.0 - confidence_level)) / (2.0 * n))


def _metric_list(metrics: Any) -> list[str]:
    if isinstance(metrics, str):
        return [metrics]
    if not isinstance(metrics, Sequence) or not metrics:
        raise ParameterError(
            "`metrics` must be a metric or a non-empty list of them, e.g. ['quantile:0.95', "
            f"'cvar:0.05']; got {metrics!r}."
        )
    return list(metrics)


def parse_metric(text: str) -> tuple[str, float | None]:
    """``"quantile:0.95"`` -> ``("quantile", 0.95)``; ``"cdf"`` -> ``("cdf", None)``.

    Raises
    ------
    ope.ParameterError
        An unknown kind, a missing or non-finite argument, or a level outside (0, 1).

    Examples
    --------
    >>> parse_metric("cvar:0.05"), parse_metric("exceed:2000")
    (('cvar', 0.05), ('exceed', 2000.0))
    """
    if not isinstance(text, str):
        raise ParameterError(f"`metrics` must be text such as 'quantile:0.95'; got {text!r}.")
    match = re.fullmatch(r"\s*([a-z_]+)\s*(?::\s*(\S+)\s*)?", text)
    kinds = ", ".join(f"{k}:X" if k != "cdf" else "cdf[:T]" for k in METRIC_KINDS)
    if not match or match.group(1) not in METRIC_KINDS:
        raise ParameterError(f"`metrics`: {text!r} is not one of {kinds}.")
    kind, argument = match.group(1), match.group(2)
    if argument is None:
        if kind != "cdf":
            raise ParameterError(
                f"`metrics`: {text!r}: {kind} needs an argument, e.g. {kind}:0.95."
            )
        return kind, None
    try:
        value = float(argument)
    except ValueError:
        raise ParameterError(f"`metrics`: {text!r}: {argument!r} is not a number.") from None
    if not math.isfinite(value):
        raise ParameterError(f"`metrics`: {text!r}: the argument must be finite.")
    if kind in _LEVEL_KINDS and not 0.0 < value < 1.0:
        raise ParameterError(f"`metrics`: {text!r}: the level must be in (0, 1), e.g. {kind}:0.05.")
    return kind, value


def _thresholds(value: Any, name: str) -> npt.NDArray[np.float64]:
    """Finite numbers (a scalar or a 1-d array) as float64."""
    arr = np.asarray(as_float_array(value, name, ndim=(0, 1)), dtype=np.float64)
    check_finite(np.atleast_1d(arr), name)
    return arr


def _step_quantile(
    edges: npt.NDArray[np.float64],
    levels: npt.NDArray[np.float64],
    below: float,
    u: npt.NDArray[np.float64],
    lo: float,
    hi: float,
) -> npt.NDArray[np.float64]:
    """``inf{t : S(t) >= u}`` for the step function ``S`` that is ``below`` left of
    ``edges[0]`` and ``levels[k]`` on ``[edges[k], edges[k+1])`` (nondecreasing)."""
    k = np.searchsorted(levels, u, side="left")
    out = np.where(k < edges.size, edges[np.minimum(k, edges.size - 1)], hi)
    return np.where(below >= u, lo, out)


def _step_integral(
    edges: npt.NDArray[np.float64],
    levels: npt.NDArray[np.float64],
    below: float,
    u0: float,
    u1: float,
    lo: float,
    hi: float,
) -> float:
    """``int_{u0}^{u1} q_S(u) du`` for the quantile function of the step CDF ``S`` (see
    :func:`_step_quantile`); an open tail (lo = -inf or hi = inf) with positive measure gives
    an infinite integral."""
    bounds = np.concatenate(([0.0, below], levels, [1.0]))
    bounds = np.clip(np.maximum.accumulate(bounds), 0.0, 1.0)
    values = np.concatenate(([lo], edges, [hi]))
    measure = np.clip(np.minimum(bounds[1:], u1) - np.maximum(bounds[:-1], u0), 0.0, None)
    used = measure > 0
    return float(np.sum(values[used] * measure[used])) if used.any() else 0.0


@dataclass(frozen=True, eq=False)
class OutcomeDistribution:
    """One policy's outcome CDF on its thresholds, with its simultaneous band.

    Attributes
    ----------
    policy : str
    estimator : str
        ``ips``, ``snips``, ``dr``, or ``empirical`` (the logging policy's own rows).
    band : str
        ``hoeffding``, ``multiplier`` or ``dkw``.
    half_width : float
        The band's half-width: ``lower = cdf - half_width``, ``upper = cdf + half_width``
        inside [0, 1].
    edges : numpy.ndarray
        The thresholds (sorted): the outcome's distinct values, or the buckets' upper ends.
    cdf, lower, upper : numpy.ndarray
        The estimate and the band at ``edges``.
    exact : bool
        Whether ``edges`` are every distinct value (else the band between two edges is widened
        by monotonicity).
    outcome_range : (float, float) or None
        The a priori range of the outcome (closes the tails of quantile and CVaR bounds).
    """

    policy: str
    estimator: str
    band: str
    half_width: float
    edges: npt.NDArray[np.float64] = field(repr=False)
    cdf: npt.NDArray[np.float64] = field(repr=False)
    lower: npt.NDArray[np.float64] = field(repr=False)
    upper: npt.NDArray[np.float64] = field(repr=False)
    exact: bool = True
    outcome_range: tuple[float, float] | None = None

    @property
    def _range(self) -> tuple[float, float]:
        if self.outcome_range is None:
            return (-math.inf, math.inf)
        return self.outcome_range

    def _upper_step(self) -> tuple[npt.NDArray[np.float64], float]:
        """The band's upper function as a step function (levels at edges, value below)."""
        if self.exact:
            return self.upper, min(1.0, self.half_width)
        # between two bucket ends F(t) <= F(next end) <= upper(next end)
        shifted = np.concatenate((self.upper[1:], [1.0]))
        return shifted, float(self.upper[0])

    def cdf_at(self, t: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(value, low, high)`` of ``P(Y <= t)`` at thresholds ``t`` (arrays of t's shape):
        the estimate and the band, which holds for every ``t`` at once."""
        x = _thresholds(t, "t")
        k = np.searchsorted(self.edges, x, side="right") - 1
        inside = k >= 0
        kk = np.maximum(k, 0)
        value = np.where(inside, self.cdf[kk], 0.0)
        low = np.where(inside, self.lower[kk], 0.0)
        up_levels, up_below = self._upper_step()
        high = np.where(inside, up_levels[kk], up_below)
        return value, low, high

    def exceedance(self, t: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(value, low, high)`` of ``P(Y > t)`` (one minus :meth:`cdf_at`)."""
        value, low, high = self.cdf_at(t)
        return 1.0 - value, 1.0 - high, 1.0 - low

    def quantile(self, level: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(value, low, high)`` of the quantile ``inf{t : F(t) >= level}``: the estimate's
        quantile and those of the band's upper and lower functions (``outcome_range``'s ends,
        or infinities, where the band leaves the level open)."""
        u = _thresholds(level, "level")
        if not np.all((u > 0.0) & (u <= 1.0)):
            raise ParameterError(f"`level` must be in (0, 1]; got {level!r}.")
        lo, hi = self._range
        up_levels, up_below = self._upper_step()
        # the estimate's quantile within the observed outcomes (an IPS CDF whose mass stays
        # below the level ends at the largest one); the bounds keep the range's ends
        value = _step_quantile(self.edges, self.cdf, 0.0, u, self.edges[0], self.edges[-1])
        low = _step_quantile(self.edges, up_levels, up_below, u, lo, hi)
        high = _step_quantile(self.edges, self.lower, 0.0, u, lo, hi)
        return value, low, high

    def cvar(self, level: float, tail: str = "lower") -> tuple[float, float, float]:
        """``(value, low, high)`` of the conditional value at risk at ``level``: the mean of
        the lowest (``tail="lower"``) or highest (``"upper"``) share ``level`` of outcomes.
        A bound is infinite where the band leaves that tail open and no ``outcome_range`` is
        given."""
        alpha = check_real(level, "level", finite=True)
        if not 0.0 < alpha <= 1.0:
            raise ParameterError(f"`level` must be in (0, 1]; got {level!r}.")
        tail = check_choice(tail, "tail", ("lower", "upper"))
        u0, u1 = (0.0, alpha) if tail == "lower" else (1.0 - alpha, 1.0)
        lo, hi = self._range
        up_levels, up_below = self._upper_step()
        value = _step_integral(self.edges, self.cdf, 0.0, u0, u1, self.edges[0], self.edges[-1])
        low = _step_integral(self.edges, up_levels, up_below, u0, u1, lo, hi)
        high = _step_integral(self.edges, self.lower, 0.0, u0, u1, lo, hi)
        # the smallest quantile function (the upper band's) bounds it below, the largest above
        return value / alpha, low / alpha, high / alpha


@dataclass(frozen=True, eq=False)
class OutcomeDistributions(Result):
    """Each candidate's outcome distribution (and the logging policy's), with simultaneous
    bands: :func:`outcome_distribution`.

    Attributes
    ----------
    outcome : str
    estimator : str
    band : str
    confidence_level : float
    n : int
    distributions : dict of str to OutcomeDistribution
        Candidate name (and ``"logging"``) -> its distribution.
    policies : list of str
        The candidates, in order.
    weight_bound : float or None
    notes : tuple of str
    """

    outcome: str
    estimator: str
    band: str
    confidence_level: float
    n: int
    distributions: dict[str, OutcomeDistribution]
    policies: list[str]
    weight_bound: float | None = None
    notes: tuple[str, ...] = ()
    #: the metrics :meth:`metrics`, :meth:`to_dict` and the summary show by default
    shown: tuple[str, ...] = ("cdf",)

    def __getitem__(self, policy: str) -> OutcomeDistribution:
        if isinstance(policy, str) and policy in self.distributions:
            return self.distributions[policy]
        raise ParameterError(
            f"no distribution named {policy!r}; one of {list(self.distributions)}."
        )

    def metrics(self, metrics: Sequence[str] | str | None = None) -> pd.DataFrame:
        """One row per policy (``logging`` first) and metric: ``policy``, ``metric``,
        ``threshold`` or ``level``, ``value``, ``ci_low``, ``ci_high``. Every interval is read
        from one simultaneous band per policy, so a policy's intervals hold jointly.

        ``metrics``: ``"cdf:T"``, ``"exceed:T"``, ``"quantile:L"``, ``"cvar:L"`` (lowest
        share), ``"upper_cvar:L"`` (highest share), or ``"cdf"`` alone (at the logged outcome's
        deciles) (:data:`METRIC_KINDS`). Default: :attr:`shown`."""
        specs = self.shown if metrics is None else metrics
        parsed = [(spec, *parse_metric(spec)) for spec in _metric_list(specs)]
        logging_dist = self.distributions["logging"]
        deciles = logging_dist.quantile(np.arange(1, 10) / 10)[0]
        rows: list[tuple[Any, ...]] = []
        for name in ["logging", *self.policies]:  # a loop over the policies
            dist = self.distributions[name]
            for spec, kind, arg in parsed:  # a loop over the metrics asked for
                if kind in ("cdf", "exceed"):
                    ts = np.unique(deciles) if arg is None else np.array([arg])
                    reader = dist.cdf_at if kind == "cdf" else dist.exceedance
                    for t, v, lo, hi in zip(ts, *reader(ts)):
                        rows.append((name, kind, float(t), math.nan, v, lo, hi))
                elif kind == "quantile":
                    qs = dist.quantile(np.array([arg]))
                    rows.append((name, kind, math.nan, arg, *(float(x[0]) for x in qs)))
                else:
                    tail = "upper" if kind == "upper_cvar" else "lower"
                    cv = dist.cvar(float(arg if arg is not None else math.nan), tail=tail)
                    rows.append((name, kind, math.nan, arg, *cv))
        table = pd.DataFrame(
            rows, columns=["policy", "metric", "threshold", "level", "value", "ci_low", "ci_high"]
        )
        for column in ("threshold", "level", "value", "ci_low", "ci_high"):
            table[column] = table[column].astype(np.float64)
        return table

    def table(self) -> pd.DataFrame:
        """The bands' sizes: one row per policy with ``estimator``, ``band``, ``half_width``,
        ``thresholds`` and ``exact``."""
        return pd.DataFrame(
            [
                (name, d.estimator, d.band, d.half_width, d.edges.size, d.exact)
                for name, d in self.distributions.items()
            ],
            columns=["policy", "estimator", "band", "half_width", "thresholds", "exact"],
        )

    def to_dict(self, metrics: Sequence[str] | str | None = None) -> dict[str, Any]:
        """JSON-ready: the settings, the bands and the ``metrics`` table's records. A bound
        the band leaves open (a quantile or CVaR bound of -inf/inf without ``outcome_range``)
        is written as null by ``ope``'s JSON output (JSON has no infinity)."""
        return {
            "outcome": self.outcome,
            "estimator": self.estimator,
            "band": self.band,
            "confidence_level": self.confidence_level,
            "n": self.n,
            "weight_bound": self.weight_bound,
            "bands": self.table().to_dict(orient="records"),
            "metrics": self.metrics(metrics).to_dict(orient="records"),
            "metrics_asked": list(self.shown if metrics is None else _metric_list(metrics)),
            "notes": list(self.notes),
        }

    def _parts(self) -> ResultParts:
        return ResultParts(
            title=f"distribution of {self.outcome} by {self.estimator} ({self.n:,} rows)",
            fields=[
                ("band", f"{self.band}, simultaneous over thresholds at {self.confidence_level:g}"),
                ("weight bound", "none" if self.weight_bound is None else self.weight_bound),
            ],
            table=_shown_table(self.metrics()),
            notes=self.notes,
            precision={},
        )


def _shown_table(table: pd.DataFrame) -> pd.DataFrame:
    """The metrics as shown: the threshold or the level in one column ``at``."""
    at = table["threshold"].where(table["metric"].isin(["cdf", "exceed"]), table["level"])
    return table.drop(columns=["threshold", "level"]).assign(at=at)[
        ["policy", "metric", "at", "value", "ci_low", "ci_high"]
    ]


def _weights_and_outcome(
    logs: Any, policies: Any, outcome: str, weight_column: str | None, dr: bool = False
) -> tuple[np.ndarray, np.ndarray, list[str], np.ndarray | None, str | None, Any, Any]:
    from ope.logs import BanditLogs
    from ope.io import read_logs
    from ope.policies import target_propensities
    from ope.weights import check_sampling_weight, sampling_weight_column

    if not isinstance(logs, BanditLogs):
        if type(logs).__name__ == "LogScan":
            raise ParameterError(
                "an outcome distribution sorts the rows by outcome: it needs them in memory, "
                "not a scan. Read them with ope.read_logs."
            )
        logs = read_logs(logs)
    if outcome not in logs.columns:
        raise SchemaError(
            f"the logs have no outcome column {outcome!r}; columns: {list(logs.columns)[:20]}."
        )
    import pyarrow as pa

    kind = logs.table.schema.field(outcome).type
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind)):
        raise SchemaError(
            f"outcome column {outcome!r} must be numeric (integer, float or boolean); it holds "
            f"{kind}. Convert it (a duration to seconds, a label to a number) first."
        )
    y = np.asarray(logs.column(outcome), dtype=np.float64)
    if not np.isfinite(y).all():
        bad = int(np.flatnonzero(~np.isfinite(y))[0])
        raise ValidationError(
            f"outcome column {outcome!r} holds a missing or non-finite value (first at row "
            f"{bad}); drop or fill those rows first."
        )
    try:
        tp = target_propensities(logs, policies, with_distributions=dr)
    except PolicyError as exc:
        text = str(exc)
        if dr and ", but " in text:
            raise PolicyError(
                "DR's outcome distribution needs each candidate's whole distribution over the "
                f"actions, but {text.split(', but ', 1)[1]} Or estimate the distribution by IPS "
                "or SNIPS, which need only the logged actions' probabilities."
            ) from None
        raise
    p = np.asarray(logs.column("propensity"), dtype=np.float64)
    column = sampling_weight_column(logs.columns, weight_column)
    s = None
    if column is not None:
        s = check_sampling_weight(logs.column(column), logs.n, name=column)
        if np.all(s == 1.0):
            s, column = None, None
    return y, tp.values / p[:, None], list(tp.names), s, column, logs, tp


def _resamples(value: Any) -> int:
    count = check_positive_int(value, "n_resamples", minimum=100)
    if count > MAX_BAND_RESAMPLES:
        raise ParameterError(
            f"`n_resamples` must be at most {MAX_BAND_RESAMPLES:,} (the band's quantile is "
            f"stable long before); got {count:,}."
        )
    return count


def _buckets(y: np.ndarray, resolution: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """Sort order, each sorted row's bucket, the buckets' upper ends, and whether the buckets
    are the distinct values."""
    order = np.argsort(y, kind="stable")
    ys = y[order]
    new = np.empty(ys.size, dtype=bool)
    new[0] = True
    np.not_equal(ys[1:], ys[:-1], out=new[1:])
    distinct = np.cumsum(new) - 1
    n_distinct = int(distinct[-1]) + 1
    if n_distinct <= resolution:
        ends = ys[np.r_[np.flatnonzero(new)[1:] - 1, ys.size - 1]]
        return order, distinct, ends, True
    # buckets at the logged quantiles, never splitting a value
    cut = np.floor(np.arange(1, resolution) * ys.size / resolution).astype(np.int64)
    boundaries = np.unique(distinct[cut])  # the distinct value starting each bucket
    raw = np.searchsorted(boundaries, distinct, side="right")
    # bucket ids 0, 1, ... without gaps (a cut inside the tied minimum leaves bucket 0 empty)
    new_bucket = np.empty(ys.size, dtype=bool)
    new_bucket[0] = True
    np.not_equal(raw[1:], raw[:-1], out=new_bucket[1:])
    bucket = np.cumsum(new_bucket) - 1
    last = np.r_[np.flatnonzero(new_bucket)[1:] - 1, ys.size - 1]
    return order, bucket, ys[last], False


def _multiplier_width(
    a: np.ndarray,
    b: np.ndarray,
    cdf: np.ndarray,
    bucket: np.ndarray,
    n_buckets: int,
    n: float,
    n_resamples: int,
    level: float,
    gen: np.random.Generator,
) -> tuple[float, float]:
    """The ``level`` quantile of ``sup_k |G*(t_k)|`` for ``G*(t) = (1/n) sum_i xi_i (a_i 1{y_i
    <= t} - cdf(t) b_i)``, ``xi`` standard normal: per bucket the pair (sum xi a, sum xi b) is
    bivariate normal, independent across buckets, drawn from its covariance. Also the largest
    standard deviation of ``G*(t_k)`` over the thresholds (the CDF's largest standard error)."""
    saa = np.bincount(bucket, weights=a * a, minlength=n_buckets)
    sab = np.bincount(bucket, weights=a * b, minlength=n_buckets)
    sbb = np.bincount(bucket, weights=b * b, minlength=n_buckets)
    variance = np.cumsum(saa) - 2.0 * cdf * np.cumsum(sab) + cdf * cdf * float(sbb.sum())
    se = math.sqrt(max(float(variance.max()), 0.0)) / n
    # (dA, dB) = (sqrt(saa) z1, sab / sqrt(saa) z1 + sqrt(sbb - sab^2 / saa) z2)
    root = np.sqrt(saa)
    safe = np.where(root > 0, root, 1.0)
    c1 = np.where(root > 0, sab / safe, 0.0)
    c2 = np.sqrt(np.clip(sbb - c1 * c1, 0.0, None))
    sups = np.empty(n_resamples)
    block = max(1, min(n_resamples, (1 << 22) // max(n_buckets, 1)))
    for start in range(0, n_resamples, block):  # a loop over blocks of draws (memory bound)
        m = min(block, n_resamples - start)
        z1 = gen.standard_normal((m, n_buckets))
        z2 = gen.standard_normal((m, n_buckets))
        d_a = root * z1
        d_b = c1 * z1 + c2 * z2
        path = np.cumsum(d_a, axis=1) - cdf[None, :] * d_b.sum(axis=1, keepdims=True)
        sups[start : start + m] = np.abs(path).max(axis=1) / n
    return float(np.quantile(sups, level)), se


def _multiplier_width_model(
    a: np.ndarray,
    b: np.ndarray,
    extra: np.ndarray,
    mix: np.ndarray,
    cdf: np.ndarray,
    bucket: np.ndarray,
    n: float,
    n_resamples: int,
    level: float,
    gen: np.random.Generator,
) -> tuple[float, float]:
    """:func:`_multiplier_width` of DR: ``G*(t_k) = (1/n) sum_i xi_i (a_i 1{y_i <= t_k} +
    sum_l mix[k, l] extra[i, l] - cdf_k b_i)``. The per-bucket increments of the first sum are
    independent; the totals ``(sum xi extra, sum xi b)`` are their regression on the increments
    plus an independent Gaussian remainder, whose covariance is the total cross-products minus
    the part the increments explain: each draw is exact, at O(K J) per draw. Also the largest
    standard deviation of ``G*(t_k)`` over the thresholds, as :func:`_multiplier_width`."""
    n_buckets = mix.shape[0]
    g = np.column_stack((extra, b))  # (n, J + 1): the terms that enter through their totals
    saa = np.bincount(bucket, weights=a * a, minlength=n_buckets)
    cross = np.column_stack(
        [  # a loop over the model's columns (at most 18), not rows
            np.bincount(bucket, weights=a * g[:, c], minlength=n_buckets) for c in range(g.shape[1])
        ]
    )
    root = np.sqrt(saa)
    safe = np.where(root > 0, root, 1.0)
    scaled = np.where(root[:, None] > 0, cross / safe[:, None], 0.0)  # cov / sd per bucket
    slope = np.where(root[:, None] > 0, scaled / safe[:, None], 0.0)  # cov / var
    gram = g.T @ g
    remainder = gram - scaled.T @ scaled
    # Var G*(t_k) n^2 = sum_{b <= k} saa + 2 c_k . sum_{b <= k} cross + c_k' gram c_k, with
    # c_k = (mix_k, -cdf_k) the loadings of the totals
    loads = np.column_stack((mix, -cdf))
    variance = (
        np.cumsum(saa)
        + 2.0 * np.sum(np.cumsum(cross, axis=0) * loads, axis=1)
        + np.einsum("kj,jl,kl->k", loads, gram, loads)
    )
    se = math.sqrt(max(float(variance.max()), 0.0)) / n
    values, vectors = np.linalg.eigh(0.5 * (remainder + remainder.T))
    factor = vectors * np.sqrt(np.clip(values, 0.0, None))
    sups = np.empty(n_resamples)
    block = max(1, min(n_resamples, (1 << 22) // max(n_buckets, 1)))
    for start in range(0, n_resamples, block):  # a loop over blocks of draws (memory bound)
        m = min(block, n_resamples - start)
        steps = root * gen.standard_normal((m, n_buckets))
        totals = steps @ slope + gen.standard_normal((m, g.shape[1])) @ factor.T
        path = np.cumsum(steps, axis=1) + totals[:, :-1] @ mix.T - cdf[None, :] * totals[:, -1:]
        sups[start : start + m] = np.abs(path).max(axis=1) / n
    return float(np.quantile(sups, level)), se


def outcome_distribution(
    logs: Any,
    policies: Any = None,
    *,
    outcome: str = "reward",
    estimator: str = "ips",
    band: str | None = None,
    weight_bound: float | None = None,
    confidence_level: float = 0.95,
    outcome_range: tuple[float, float] | None = None,
    resolution: int = DEFAULT_RESOLUTION,
    n_resamples: int = DEFAULT_BAND_RESAMPLES,
    rng: int | np.random.Generator | None = 0,
    weight_column: str | None = None,
    reward_model: Any = None,
    context_columns: Sequence[str] | None = None,
    model_thresholds: int = DEFAULT_MODEL_THRESHOLDS,
) -> OutcomeDistributions:
    """The distribution of an outcome under each candidate policy, with bands that hold
    simultaneously over every threshold (see the module for the estimators and the bands).

    Parameters
    ----------
    logs : BanditLogs or anything ``ope.read_logs`` accepts
        In memory (the rows are sorted by outcome).
    policies : optional
        As in :func:`ope.evaluate`.
    outcome : str, default "reward"
        A numeric column of the logs: the reward, or a cost, a latency, a harm score.
    estimator : {"ips", "snips", "dr"}, default "ips"
        ``"dr"`` models the outcome's conditional CDF from the context (``reward_model``,
        ``context_columns``, ``model_thresholds``) and needs each candidate's whole
        distribution over the actions, as DR of the mean does.
    band : {"hoeffding", "multiplier"}, optional
        Default ``"hoeffding"`` when ``weight_bound`` is given (and ``estimator="ips"``, no
        sampling weights), else ``"multiplier"``.
    weight_bound : float, optional
        An a priori bound on every importance weight (e.g. 1 / the logger's smallest
        probability), for the finite-sample band. The largest observed weight is not a bound.
    confidence_level : float, default 0.95
        Of each policy's band (simultaneous over its thresholds; not across policies).
    outcome_range : (float, float), optional
        The outcome's a priori range: closes the tails of quantile and CVaR bounds.
    resolution : int, default DEFAULT_RESOLUTION
        The most thresholds kept (see the module).
    n_resamples : int, default DEFAULT_BAND_RESAMPLES
        Draws of the multiplier process.
    rng : int, Generator or None, default 0
        The multiplier draws' randomness.
    weight_column : str, optional
        Sampling (Horvitz-Thompson) weights, as in :func:`ope.evaluate` (default: the ``weight``
        column when present). The finite-sample bands refuse them.
    reward_model : ope.RewardModel or scikit-learn regressor or classifier, optional
        With ``estimator="dr"``: the model of each indicator ``1{y <= u}`` (default
        ``ope.RewardModel()``, cross-fitted ridge; a classifier gives probabilities).
    context_columns : sequence of str, optional
        With ``estimator="dr"``: the model's features (default: chosen as for DR of the mean,
        :func:`ope.context.context_column_choice`).
    model_thresholds : int, default DEFAULT_MODEL_THRESHOLDS
        With ``estimator="dr"``: the most knots of the model (one regression each).

    Returns
    -------
    OutcomeDistributions

    Raises
    ------
    ope.ParameterError
        A bad argument; ``band="hoeffding"`` without ``weight_bound``, with SNIPS or DR or with
        sampling weights; a model setting without ``estimator="dr"``.
    ope.PolicyError
        ``estimator="dr"`` with a candidate known only at the logged actions.
    ope.SchemaError
        No such outcome column.
    ope.ValidationError
        A missing or non-finite outcome, or one outside ``outcome_range``.

    Examples
    --------
    >>> import numpy as np, pandas as pd, ope
    >>> g = np.random.default_rng(0)
    >>> a = g.integers(0, 2, 4000)
    >>> df = pd.DataFrame({"action": a, "propensity": 0.5, "reward": g.normal(a, 1.0),
    ...                    "target__one": (a == 1).astype(float)})
    >>> d = ope.outcome_distribution(df, weight_bound=2.0)
    >>> q = d["one"].quantile([0.5])
    >>> bool(q[1][0] <= 1.0 <= q[2][0])
    True
    """
    options = _Options.checked(
        estimator=estimator,
        band=band,
        weight_bound=weight_bound,
        confidence_level=confidence_level,
        outcome_range=outcome_range,
        resolution=resolution,
        n_resamples=n_resamples,
        rng=rng,
    )
    outcome = check_name(outcome, "outcome", what="a column name")
    dr = options.est == "dr"
    if not dr:
        given = [
            name
            for name, value in (
                ("reward_model", reward_model),
                ("context_columns", context_columns),
                ("model_thresholds", None if model_thresholds == DEFAULT_MODEL_THRESHOLDS else 1),
            )
            if value is not None
        ]
        if given:
            raise ParameterError(
                f"{', '.join(f'`{g}`' for g in given)} set the model of estimator='dr'; with "
                f"estimator={options.est!r} there is none: drop them or use estimator='dr'."
            )
    knots_count = check_positive_int(model_thresholds, "model_thresholds", minimum=1)
    y, w, names, s, s_column, logs, tp = _weights_and_outcome(
        logs, policies, outcome, weight_column, dr=dr
    )
    model = None
    if dr:
        if context_columns is not None:
            context_columns = check_names(
                context_columns, "context_columns", example="context_columns=['age']"
            )
        model = _dr_model(
            logs,
            tp,
            y,
            knots_count,
            reward_model,
            context_columns,
            rng=options.rng,
            outcome=outcome,
            weight_column=weight_column,  # all-1 weights: s_column is None, the column is not
        )
    return _estimate(y, w, names, s, s_column, outcome, options, model)


@dataclass(frozen=True)
class _DRModel:
    """DR's cross-fitted model of the conditional CDF at its knots: ``q_logged`` (n, J - 1)
    at the logged actions (or (n, P, J - 1) when it depends on the candidate: the return
    model of trajectories), ``q_target`` (n, P, J - 1) under each candidate; the last knot is
    the largest logged outcome, where the model is 1."""

    knots: npt.NDArray[np.float64]
    q_logged: npt.NDArray[np.float64]
    q_target: npt.NDArray[np.float64]
    columns: tuple[str, ...]
    notes: tuple[str, ...]


def _dr_knots(y: np.ndarray, count: int) -> np.ndarray:
    """The knots of DR's model: every distinct value when there are at most ``count + 1``,
    else the smallest, ``count - 1`` logged quantiles between, and the largest."""
    values = np.unique(y)
    if values.size <= count + 1:
        return values
    levels = np.arange(1, count) / count
    inner = np.quantile(y, levels, method="inverted_cdf")
    return np.unique(np.concatenate(([values[0]], inner, [values[-1]])))


def _dr_model(
    logs: Any,
    tp: Any,
    y: np.ndarray,
    count: int,
    reward_model: Any,
    context_columns: Sequence[str] | None,
    *,
    rng: Any,
    outcome: str,
    weight_column: str | None = None,
) -> _DRModel:
    """DR's model of the conditional CDF, fitted with the sampling weights ``weight_column``
    (never one of its context columns)."""
    from ope.evaluation._driver import model_predictions

    knots = _dr_knots(y, count)
    indicators = (y[:, None] <= knots[None, :-1]).astype(np.float64)  # (n, J - 1), J <= 17
    if indicators.shape[1]:
        q_logged, q_target, used, notes = model_predictions(
            logs,
            tp.distributions,
            list(tp.names),
            reward_model=reward_model,
            context_columns=context_columns,
            rng=rng,
            outcomes=indicators,
            weight_column=weight_column,
        )
        columns = tuple(used["context"]) + tuple(used["action_features"])
    else:  # one distinct outcome: the model is 1 everywhere
        q_logged = np.empty((y.size, 0))
        q_target = np.empty((y.size, len(tp.names), 0))
        columns, notes = (), []
    features = ", ".join(columns) or "none (one value per action)"
    notes.append(
        f"DR's model of the conditional CDF: {max(knots.size - 1, 0)} cross-fitted "
        f"regressions of 1{{{outcome} <= u}} at knots u from {knots[0]:.6g} to "
        f"{knots[-1]:.6g}, linear between, on the context columns {features}"
    )
    return _DRModel(knots, q_logged, q_target, columns, tuple(notes))


def _knot_weights(edges: np.ndarray, knots: np.ndarray) -> np.ndarray:
    """(K, J): the model at each threshold as a mix of its values at the knots (linear
    between two knots; the last knot's column is the constant 1)."""
    k, j = edges.size, knots.size
    mix = np.zeros((k, j))
    left = np.clip(np.searchsorted(knots, edges, side="right") - 1, 0, j - 1)
    inner = left < j - 1
    right = np.minimum(left + 1, j - 1)
    span = np.where(inner, knots[right] - knots[left], 1.0)
    share = np.where(inner, np.clip((edges - knots[left]) / span, 0.0, 1.0), 0.0)
    rows = np.arange(k)
    np.add.at(mix, (rows, left), 1.0 - share)
    np.add.at(mix, (rows, right), share)
    return mix


def return_distribution(
    trajectories: Any,
    policies: Sequence[str] | None = None,
    *,
    gamma: float = 1.0,
    tail_value: float | None = None,
    estimator: str = "ips",
    band: str | None = None,
    weight_bound: float | None = None,
    confidence_level: float = 0.95,
    outcome_range: tuple[float, float] | None = None,
    resolution: int = DEFAULT_RESOLUTION,
    n_resamples: int = DEFAULT_BAND_RESAMPLES,
    rng: int | np.random.Generator | None = 0,
    state: Any = None,
) -> OutcomeDistributions:
    r"""The distribution of the discounted return of an episode under each candidate policy,
    from logged trajectories, with bands simultaneous over thresholds: the estimators and bands
    of :func:`outcome_distribution` over episodes, each weighted by its trajectory-wise
    importance weight :math:`\prod_t \pi(a_t|s_t)/\pi_0(a_t|s_t)`
    (:func:`ope.sequential.episode_weights`). ``estimator="ips"`` and ``"snips"`` are SCOPE-RL's
    cumulative-distribution TIS and SNTIS; a finite-sample band needs an a priori bound on the
    product of the ratios (``weight_bound``, e.g. the per-step bound to the power of the
    horizon).

    Parameters
    ----------
    trajectories : ope.Trajectories
        Validated steps (:func:`ope.read_trajectories`).
    policies : sequence of str, optional
        Candidates by name (their ``target__<name>`` columns); default every one.
    gamma : float, default 1.0
    tail_value : float, optional
        The value of the state a truncated episode was left in (as in
        :func:`ope.sequential_estimate`); without it a truncated episode's return is what it
        accumulated within its logged steps (a warning says so).
    estimator, band, weight_bound, confidence_level, outcome_range, resolution, n_resamples, rng
        As in :func:`outcome_distribution` (``outcome_range``: the returns' a priori range).
        ``estimator="dr"`` is SCOPE-RL's trajectory-wise DR with a model of the return's CDF
        given the episode's first state: :math:`\hat F(t) = \frac1n \sum_i [\hat G(t \mid
        s_0^i) + w_i (1\{G_i \le t\} - \hat G(t \mid s_0^i))]`, :math:`\hat G` the
        candidate's weighted return CDF of that first state on the other half of the episodes
        (``rng`` splits them). Its raw value is unbiased whatever the model, since the
        trajectory weight has mean 1 given the first state; the CDF returned is that value
        rearranged to be nondecreasing and clipped to [0, 1], which can lift the lower tail
        with few episodes or heavy weights. The closer the model, the narrower the band.
    state : str or array_like, optional
        With ``estimator="dr"``: each step's discrete state (a column name, or one value per
        step in the trajectories' order, sorted by ``(episode_id, step)``; default the
        ``state`` column when there is one, else no grouping), of which the first step's
        conditions the model.

    Returns
    -------
    OutcomeDistributions
        ``outcome`` is ``"return"``; ``n`` counts episodes; the ``"logging"`` entry is the
        returns as logged.

    Examples
    --------
    >>> import ope
    >>> from ope.simulate import TabularMDP
    >>> env = TabularMDP(n_states=3, n_actions=2, horizon=3, seed=0)
    >>> traj = ope.read_trajectories(env.sample(400, rng=0))
    >>> d = ope.return_distribution(traj, ["greedy"], tail_value=0.0)
    >>> d.n, d.outcome
    (400, 'return')
    """
    from ope.logs import Trajectories
    from ope.sequential import episode_weights

    options = _Options.checked(
        estimator=estimator,
        band=band,
        weight_bound=weight_bound,
        confidence_level=confidence_level,
        outcome_range=outcome_range,
        resolution=resolution,
        n_resamples=n_resamples,
        rng=rng,
    )
    if not isinstance(trajectories, Trajectories):
        raise ParameterError(
            "`trajectories` must be ope.Trajectories (ope.read_trajectories); got "
            f"{type(trajectories).__name__}."
        )
    names = (
        list(trajectories.target_policies)
        if policies is None
        else check_names(policies, "policies", example="policies=['greedy']")
    )
    if not names:
        raise SchemaError(
            "the trajectories have no candidate: one target__<name> column per policy (the "
            "per-step probabilities of the logged actions), or name them with policies=."
        )
    pairs = [  # a loop over candidates: one pass over the steps each
        episode_weights(trajectories, name, gamma=gamma, tail_value=tail_value) for name in names
    ]
    weights = np.column_stack([w for w, _ in pairs])
    returns = pairs[0][1]
    model = None
    if options.est == "dr":
        model = _return_model(trajectories, returns, weights, state, options.rng)
    elif state is not None:
        raise ParameterError(
            "`state` groups the episodes of estimator='dr' by their first state; with "
            f"estimator={options.est!r} there is no model: drop it or use estimator='dr'."
        )
    return _estimate(returns, weights, names, None, None, "return", options, model)


#: Pseudo-episodes by which DR's return model of one first state is shrunk toward that of
#: every episode (a state seen in few episodes of the other fold borrows from the rest).
RETURN_MODEL_PRIOR: Final = 1.0


def _return_model(
    trajectories: Any, returns: np.ndarray, weights: np.ndarray, state: Any, rng: Any
) -> _DRModel:
    """DR's model of a return distribution: per candidate, the CDF of the return given the
    episode's first state, estimated on the other fold of episodes (two folds) by the
    self-normalized weighted CDF of that state's returns, shrunk toward all of the fold's by
    :data:`RETURN_MODEL_PRIOR` pseudo-episodes. The raw estimate is unbiased whatever the
    model: an episode's model depends only on its first state and on other episodes, and
    E[w | first state] = 1."""
    from ope.sequential._steps import state_codes

    if state is not None or "state" in trajectories.table.column_names:
        first = state_codes(trajectories, state)[trajectories.episode_starts[:-1]]
        grouped = True
    else:
        first = np.zeros(returns.size, dtype=np.int64)
        grouped = False
    knots = _dr_knots(returns, DEFAULT_MODEL_THRESHOLDS)
    below = (returns[:, None] <= knots[None, :-1]).astype(np.float64)  # (E, J - 1)
    n_ep, n_pol = weights.shape
    _, gen = resolve_seed(rng)
    fold = gen.permutation(n_ep) % 2
    k = int(first.max()) + 1 if first.size else 1
    model = np.zeros((n_ep, n_pol, below.shape[1]))
    for f in (0, 1):  # the two folds: each episode's model from the other one
        train, test = fold != f, fold == f
        for j in range(n_pol):  # a loop over candidates
            w = weights[train, j]
            mass = np.zeros((k, below.shape[1]))
            np.add.at(mass, first[train], w[:, None] * below[train])
            total = np.bincount(first[train], weights=w, minlength=k)
            overall = mass.sum(axis=0) / total.sum() if total.sum() > 0 else np.zeros(mass.shape[1])
            by_state = (mass + RETURN_MODEL_PRIOR * overall) / (total + RETURN_MODEL_PRIOR)[:, None]
            model[test, j, :] = by_state[first[test]]
    how = (
        "the candidate's weighted return distribution of the episode's first state on the "
        "other half of the episodes"
        if grouped
        else "the candidate's weighted return distribution of the other half of the episodes "
        "(no state column: give the first states to condition on them)"
    )
    notes = [f"DR's model of the return's CDF: {how} (cross-fitted over two folds)"]
    if grouped and np.unique(first).size > n_ep / 2:
        notes.append(
            f"{np.unique(first).size:,} distinct first states in {n_ep:,} episodes: most "
            "states hold one episode, so DR's model is nearly the pooled return distribution "
            "(continuous states would need binning to condition on them)"
        )
    return _DRModel(
        knots=knots,
        q_logged=model,
        q_target=model,
        columns=("state",) if grouped else (),
        notes=tuple(notes),
    )


@dataclass(frozen=True)
class _Options:
    """The checked settings of one distribution estimate."""

    est: str
    how: str | None  # None: finite-sample with a weight bound (IPS, unweighted), else multiplier
    bound: float | None
    level: float
    span: tuple[float, float] | None
    resolution: int
    n_resamples: int
    rng: Any

    @classmethod
    def checked(
        cls,
        *,
        estimator: Any,
        band: Any,
        weight_bound: Any,
        confidence_level: Any,
        outcome_range: Any,
        resolution: Any,
        n_resamples: Any,
        rng: Any,
    ) -> _Options:
        est = check_choice(estimator, "estimator", DISTRIBUTION_ESTIMATORS)
        level = check_confidence_level(confidence_level)
        bound = check_weight_bound(weight_bound) if weight_bound is not None else None
        span = (
            finite_pair(outcome_range, "outcome_range", "outcome_range=(0.0, 5000.0)")
            if outcome_range is not None
            else None
        )
        how = None if band is None else check_choice(band, "band", BAND_METHODS)
        if how == "hoeffding":
            if bound is None:
                raise ParameterError(
                    "band='hoeffding' needs weight_bound=: an a priori bound on every "
                    "importance weight (e.g. 1 / the logger's smallest probability); or use "
                    "band='multiplier'."
                )
            if est != "ips":
                raise ParameterError("band='hoeffding' bounds the IPS CDF; use estimator='ips'.")
        return cls(
            est=est,
            how=how,
            bound=bound,
            level=level,
            span=span,
            resolution=check_positive_int(resolution, "resolution", minimum=2),
            n_resamples=_resamples(n_resamples),
            rng=rng,
        )


def _few_rows_note(
    name: str, mass: np.ndarray, se: float, *, weighted: bool, est: str, notes: list[str]
) -> None:
    """Note and warn when a multiplier band rests on few effective rows: Kish's ESS of the
    rows' weights ``mass`` (sampling weight times importance weight, as ``ope.evaluate``'s
    ``ess``) below :data:`~ope._thresholds.MIN_EFFECTIVE_ROWS`. Such a band can collapse to
    zero width (one dominant row makes every threshold's estimate that row's), so the note says
    it is not to be trusted and which band holds at any n."""
    top = float(np.max(mass))
    if not top > 0:
        return
    scaled = mass / top  # Kish's ESS does not depend on the scale; its squares cannot overflow
    ess = kish_ess(float(scaled.sum()), float(np.dot(scaled, scaled)))
    if not few_effective_rows(ess):
        return
    if weighted:
        instead = "no finite-sample band takes sampling weights: log more rows"
    elif est == "ips":
        instead = "band='hoeffding' with an a priori weight_bound holds at any n; or log more rows"
    else:
        instead = (
            "estimator='ips' with band='hoeffding' and an a priori weight_bound holds at any "
            "n; or log more rows"
        )
    note = few_effective_rows_note(
        ess,
        se,
        subject=(name, "distribution"),
        weighted=weighted,
        advice=(
            "its simultaneous band (the multiplier bootstrap's) and every quantile, CVaR and "
            "exceedance interval read from it rest on those rows and are not to be trusted: "
            f"they can shrink to zero width; {instead}."
        ),
    )
    text = Note(f"{name}: {note}", rule=note.rule, subject=note.subject)
    notes.append(text)
    warnings.warn(text, SmallSampleWarning, stacklevel=user_stacklevel())


def _estimate(
    y: np.ndarray,
    w: np.ndarray,
    names: list[str],
    s: np.ndarray | None,
    s_column: str | None,
    outcome: str,
    options: _Options,
    model: _DRModel | None = None,
) -> OutcomeDistributions:
    """The distributions of outcomes ``y`` (n,) under candidates of weights ``w`` (n, P), the
    rows weighted by ``s`` (None: unweighted); ``model``: DR's, with ``options.est == "dr"``."""
    est, how, bound, level, span = (
        options.est,
        options.how,
        options.bound,
        options.level,
        options.span,
    )
    resolution, n_resamples = options.resolution, options.n_resamples
    n = y.size
    if n < 2:
        raise ValidationError(
            f"an outcome distribution needs at least 2 rows; got {n}: its band would claim "
            "certainty."
        )
    if how is None:
        how = "hoeffding" if bound is not None and est == "ips" and s is None else "multiplier"
    if how == "hoeffding" and s is not None:
        raise ParameterError(
            f"band='hoeffding' takes unweighted rows; the logs carry sampling weights "
            f"(column `{s_column}`): use band='multiplier'."
        )
    if span is not None:
        outside = (y < span[0]) | (y > span[1])
        if outside.any():
            raise ValidationError(
                f"outcome {outcome!r} has {int(outside.sum()):,} value(s) outside outcome_range "
                f"{span} (first at row {int(np.flatnonzero(outside)[0])})."
            )
    if bound is not None and how == "hoeffding":
        over = w > bound * (1 + 1e-12)
        if over.any():
            col = int(np.flatnonzero(over.any(axis=0))[0])
            raise ValidationError(
                f"weight_bound={bound:g} is exceeded by candidate {names[col]!r} (largest "
                f"weight {float(w[:, col].max()):.4g}): it must bound every weight a priori."
            )
    _, gen = resolve_seed(options.rng)
    order, bucket, ends, exact = _buckets(y, resolution)
    n_buckets = ends.size
    sw = np.ones(n) if s is None else s[order]
    total_s = float(sw.sum())
    notes: list[str] = []
    dists: dict[str, OutcomeDistribution] = {}
    mix = None if model is None else _knot_weights(ends, model.knots)

    def build(name: str, weights: np.ndarray, kind: str, j: int = -1) -> OutcomeDistribution:
        # weights: per sorted row (1 for the logging policy)
        se = math.nan  # the multiplier band's largest pointwise standard error
        mass = np.bincount(bucket, weights=sw * weights, minlength=n_buckets)
        raw = np.cumsum(mass)
        terms = None
        if kind == "dr" and model is not None and mix is not None:
            # per row: G(u_l | x, pi) - w G(u_l | x, a) at each knot, and 1 - w at the last
            terms = np.column_stack(
                (
                    model.q_target[order, j, :]
                    - weights[:, None]
                    * (
                        model.q_logged[order, j, :]
                        if model.q_logged.ndim == 3
                        else model.q_logged[order, :]
                    ),
                    1.0 - weights,
                )
            )
            raw = raw + mix @ (sw @ terms)
            raw[-1] = total_s  # sum s w + sum s (1 - w), without its rounding
        if not np.any(weights) or not raw[-1] > 0:
            raise EstimationError(
                f"candidate {name!r} gives probability 0 to every logged action (all its "
                "importance weights are 0): the logs say nothing of its outcome distribution."
            )
        if kind == "empirical" or est == "snips":
            norm = float(raw[-1])
        else:
            norm = total_s
        cdf_raw = raw / norm
        if terms is not None:  # monotone by rearrangement (the band's sup distance holds)
            cdf_raw = np.sort(cdf_raw)
        if kind == "empirical" and s is None:
            band_name, width = "dkw", dkw_band_width(n, level)
        elif how == "hoeffding" and kind != "empirical":
            band_name, width = "hoeffding", hoeffding_band_width(n, float(bound or 1.0), level)
        else:
            band_name = "multiplier"
            a = sw * weights / (norm / n)
            b = (sw * weights if (kind == "empirical" or est == "snips") else sw) / (norm / n)
            if terms is not None and mix is not None:
                extra = terms * (sw / (norm / n))[:, None]
                width, se = _multiplier_width_model(
                    a, b, extra, mix, cdf_raw, bucket, n, n_resamples, level, gen
                )
            else:
                width, se = _multiplier_width(
                    a, b, cdf_raw, bucket, n_buckets, n, n_resamples, level, gen
                )
            _few_rows_note(name, sw * weights, se, weighted=s is not None, est=est, notes=notes)
        cdf = np.clip(cdf_raw, 0.0, 1.0)
        return OutcomeDistribution(
            policy=name,
            estimator="empirical" if kind == "empirical" else est,
            band=band_name,
            half_width=width,
            edges=ends,
            cdf=cdf,
            lower=np.clip(cdf_raw - width, 0.0, 1.0),
            upper=np.clip(cdf_raw + width, 0.0, 1.0),
            exact=exact,
            outcome_range=span,
        )

    dists["logging"] = build("logging", np.ones(n), "empirical")
    for j, name in enumerate(names):  # a loop over candidate policies
        dists[name] = build(name, w[order, j], est, j)
        if est == "ips":
            mean_w = float(np.sum(sw * w[order, j]) / total_s)
            if abs(mean_w - 1.0) > 0.1:
                notes.append(
                    f"{name}: mean importance weight {mean_w:.3g} (1 expected): its IPS CDF "
                    "ends at that mass before clipping; SNIPS divides it out"
                )
    if not exact:
        notes.append(
            f"{outcome} has more than {resolution:,} distinct values: the thresholds are "
            f"{ends.size:,} bucket ends at its logged quantiles, and the band between two "
            "ends is widened to the next end (valid by monotonicity)"
        )
    if model is not None:
        notes.extend(model.notes)
        notes.append(
            "DR's raw estimate is unbiased whatever the model; the CDF shown is its "
            "nondecreasing rearrangement clipped to [0, 1], which brings a dip below 0 or a rise "
            "above 1 back inside and so can lift the lower tail where the rows are few or the "
            "weights heavy"
        )
    if s is not None:
        notes.append(f"rows weighted by the sampling weights of column `{s_column}`")
    if how == "multiplier":
        notes.append(
            f"the candidates' bands are multiplier-bootstrap bands ({n_resamples:,} draws): "
            "asymptotic, simultaneous over thresholds"
        )
    return OutcomeDistributions(
        outcome=outcome,
        estimator=est,
        band=how,
        confidence_level=level,
        n=n,
        distributions=dists,
        policies=names,
        weight_bound=bound,
        notes=tuple(notes),
    )
