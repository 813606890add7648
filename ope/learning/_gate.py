"""Ranking candidate policies by a lower bound, and the safe-deployment gate (HCPI-style)."""

from __future__ import annotations

import json
import math
import numbers
import warnings
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from typing import Any, Final, Literal, Mapping

import numpy as np
import numpy.typing as npt
from scipy import stats
from sklearn.exceptions import NotFittedError

from ope._format import wrap_text
from ope._thresholds import (
    MIN_EFFECTIVE_ROWS,
    MIN_ROWS,
    as_sentence,
    few_effective_rows,
    few_effective_rows_note,
    kish_ess,
    low_ess,
    small_sample,
    small_sample_note,
)
from ope._validation import (
    check_choice,
    check_confidence_level,
    check_label_kinds,
    check_max_weight,
    check_positive_int,
    check_real,
    check_target_propensity,
    describe,
    power_of_two_scale,
    user_stacklevel,
)
from ope.exceptions import (
    EstimationError,
    MissingBoundsError,
    ParameterError,
    PolicyError,
    SmallSampleWarning,
    ValidationError,
)
from ope.diagnostics.msm import describe_approval_tipping, msm_weight_range, tipping_point
from ope.estimators import policy_labels
from ope.intervals.betting import betting_lower_bound
from ope.intervals.bounded import bernstein_interval
from ope.learning._common import (
    ROWS_IN_MESSAGE,
    check_propensity,
    check_reward,
    encode_known,
    required_reward_range,
    row_list,
)
from ope.moments import WeightedMoments, centered_moments
from ope.results import Result, ResultParts
from ope.weights import check_sampling_weight, sampling_weight_note

__all__ = [
    "Certificate",
    "SafetyGate",
    "certify",
    "rank_policies",
    "resolve_gate_method",
    "check_max_sampling_weight",
    "weighted_betting_lower_bound",
    "AUTO_METHOD",
    "AUTO_WEIGHTED_METHOD",
]

#: probabilities a policy object returns may exceed 1 by float rounding; more than this is an error
_PROBABILITY_SLACK: Final = 1e-9

#: Certification rows needed for a variance at all: the package's MIN_ROWS.
MIN_CERTIFY_ROWS: Final = MIN_ROWS

#: the gate's bound methods. Betting is finite-sample like Bernstein and tighter in
#: benchmarks/bench_gate.py (it approved more often wherever approval was right, never above the
#: nominal rate); "t" is asymptotic. "auto" (the default everywhere a gate mode is chosen) is
#: betting on unweighted rows, and on rows with sampling weights betting when their a priori bound
#: max_sampling_weight is given, else "t" (see resolve_gate_method)
_METHODS: Final = ("auto", "betting", "bernstein", "t")

#: the methods whose bounds hold at every n for unweighted i.i.d. rows only: rows with sampling
#: weights are refused by them
_UNWEIGHTED_METHODS: Final = ("betting", "bernstein")

#: what ``ci="auto"`` chooses on unweighted rows and on rows with sampling weights
AUTO_METHOD: Final = "betting"
AUTO_WEIGHTED_METHOD: Final = "t"

#: the asymptotic mode: its bound rests on the central limit theorem, so the gate does not
#: approve on it when the estimate rests on fewer than MIN_EFFECTIVE_ROWS effective rows
_ASYMPTOTIC_METHOD: Final = "t"

#: bisection steps of the weighted betting bound on the [0, 1] scale (2**-50 < 1e-15), and the
#: truncation c of its bets, lambda <= c / (s_max m), which keeps every capital factor >= 1 - c:
#: the values of ope.intervals.betting, so that unit weights give betting_lower_bound's bound
_WEIGHTED_BISECTION_STEPS: Final = 50

#: relative slack of ``max_sampling_weight`` for weights a float rounding above it
#: (1 / (1 - 0.9) = 10.000000000000002); the bets are then capped with the largest weight
_SAMPLING_WEIGHT_SLACK: Final = 1e-12
_WEIGHTED_BET_TRUNCATION: Final = 0.5

#: type of a gate mode (the ``ci`` argument of SafetyGate, certify, rank_policies, ...)
GateMethod = Literal["auto", "betting", "bernstein", "t"]


#: width of a field's label in a certificate's text (the longest, "sampling weights:", and two
#: spaces): every value starts in one column, and a wrapped one goes on in it
_FIELD_WIDTH: Final = 19


#: fields of a certificate that are text, and those that are finite numbers (the improvement
#: pair may also be None), as Certificate.from_dict checks them
_CERTIFICATE_TEXTS: Final = ("policy", "reason", "baseline_source", "ci_method")
_CERTIFICATE_NUMBERS: Final = (
    "value",
    "lower_bound",
    "baseline_value",
    "confidence_level",
    "max_weight",
    "clipped_fraction",
    "improvement_estimate",
    "improvement_lower_bound",
)


def _malformed(arg: str, key: str, value: Any, need: str) -> ValidationError:
    """A certificate field (of the argument ``arg``) that :meth:`Certificate.to_dict` cannot
    have written."""
    return ValidationError(
        f"`{arg}`: the certificate's {key!r} must be {need}; got {describe(value)}. Pass the "
        "output of Certificate.to_dict() (or to_json()), unchanged."
    )


def _finite_field(arg: str, key: str, value: Any) -> float:
    number = None if isinstance(value, (bool, np.bool_)) else value
    if not isinstance(number, numbers.Real):
        raise _malformed(arg, key, value, "a finite number")
    try:
        x = float(number)
    except OverflowError:  # an int beyond float64
        x = math.inf
    if not math.isfinite(x):
        raise _malformed(arg, key, value, "a finite number")
    return x


@dataclass(frozen=True)
class Certificate(Result):
    """The verdict of :class:`SafetyGate` on one policy, with everything needed to audit it.

    A result object like every other of ope (:class:`ope.results.Result`): ``to_dict()``,
    ``summary()``, an escaped ``_repr_html_()``, and the field names every result of ope uses
    (:class:`ope.results.Estimate`): ``value`` (the estimate), ``n`` (certification rows),
    ``ci_method`` (the bound's method), ``confidence_level`` and ``notes``.

    Attributes
    ----------
    policy : str
        Name of the certified policy.
    verdict : {"approve", "reject"}
        ``"approve"`` only if the one-sided lower confidence bound beats the baseline.
    reason : str
        One sentence saying why.
    value : float
        Pessimistic clipped-IPS estimate of the policy's value on the certification rows,
        :math:`r_{lo} + \\frac1n\\sum_i (r_i - r_{lo})\\min(w_i, M)`.
    lower_bound : float
        One-sided lower confidence bound (at ``confidence_level``) of the policy's value.
    baseline : {"logging", "threshold"}
        What the policy was compared with.
    baseline_value : float
        The logging policy's on-policy mean reward on the certification rows, or the threshold.
    baseline_source : str
        How ``baseline_value`` was obtained.
    improvement_estimate : float or None
        For ``baseline="logging"``: mean of the paired differences ``Z_i - r_i``.
    improvement_lower_bound : float or None
        Its one-sided lower confidence bound; the policy is approved when it is > 0.
    confidence_level : float
        One-sided confidence level of the bounds.
    ci_method : {"betting", "bernstein", "t"}
        ``"betting"``: Waudby-Smith & Ramdas betting bound and ``"bernstein"``: Maurer-Pontil
        empirical Bernstein, both valid at every sample size (safe); ``"t"``: Student-t,
        asymptotic (semi-safe, as HCPI's TT; it can exceed the nominal false-approval rate).
    max_weight : float
        Clip level :math:`M` of the importance weights, fixed before certification.
    reward_range : tuple of float
        A priori reward range.
    n_train : int or None
        Rows the policy was trained on (disjoint from the certification rows).
    n : int
        Certification rows.
    clipped_fraction : float
        Share of certification rows whose weight was clipped at ``max_weight``.
    notes : tuple of str
        Caveats (e.g. a Student-t bound on few rows), numbered in ``summary()``.
    seed : int or None
        The seed of the train/certify split when the certificate comes from
        :func:`ope.learning.learn_from_logs` (drawn there when ``rng=None``): passing it as
        ``rng`` reproduces the split, the fit and this certificate. None otherwise.
    sampling_weight : str or None
        The column (or argument) of the certification rows' sampling (Horvitz-Thompson)
        weights when the certificate is weighted: ``value``, ``baseline_value`` and the
        improvement are then Hajek ratios on the logged population (see :class:`SafetyGate`).
        None for unweighted rows (also when every weight is 1). ``weighted`` says the same as
        a bool (in ``to_dict()`` too).
    tipping_gamma : float or None
        For an approval: the smallest factor :math:`\\Gamma` by which the logging
        propensities' odds would have to be off (marginal sensitivity model,
        :mod:`ope.diagnostics.msm`) for the same bound to reject: the bound recomputed with
        every weight at its smallest value under :math:`\\Gamma`, :math:`\\pi/p^*` with
        :math:`1/p^* = 1 + (1/p - 1)/\\Gamma` (``inf``, written ``"inf"`` by ``to_dict``,
        when it still approves at :math:`\\Gamma = 100`). None for a rejection.
    """

    policy: str
    verdict: Literal["approve", "reject"]
    reason: str
    value: float
    lower_bound: float
    baseline: Literal["logging", "threshold"]
    baseline_value: float
    baseline_source: str
    improvement_estimate: float | None
    improvement_lower_bound: float | None
    confidence_level: float
    ci_method: str
    max_weight: float
    reward_range: tuple[float, float]
    n_train: int | None
    n: int
    clipped_fraction: float
    notes: tuple[str, ...] = ()
    seed: int | None = None
    sampling_weight: str | None = None
    tipping_gamma: float | None = None

    @property
    def weighted(self) -> bool:
        """True when the certification rows carried sampling weights (not all 1)."""
        return self.sampling_weight is not None

    @property
    def approved(self) -> bool:
        """True when the verdict is ``"approve"``."""
        return self.verdict == "approve"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with stable keys: the fields, and ``weighted``."""
        d = asdict(self)
        d["reward_range"] = list(self.reward_range)
        d["notes"] = list(self.notes)
        d["weighted"] = self.weighted
        if self.tipping_gamma is not None and math.isinf(self.tipping_gamma):
            d["tipping_gamma"] = "inf"  # JSON has no infinity
        return d

    def to_json(self, **json_options: Any) -> str:
        """The certificate as one JSON document (``json.dumps`` options pass through)."""
        return json.dumps(self.to_dict(), **json_options)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Certificate:
        """Rebuild a certificate from :meth:`to_dict` output (also without ``notes``,
        ``seed``, ``sampling_weight`` and ``weighted``; the last is derived). Every field is checked: a value
        :meth:`to_dict` cannot have written (a NaN estimate, an unknown verdict) is a
        ``ValidationError`` naming ``data`` and the field."""
        return cls._from_mapping(data, "data")

    @classmethod
    def _from_mapping(cls, data: Any, arg: str) -> Certificate:
        """:meth:`from_dict` of ``data``, the argument ``arg`` (or the JSON it holds)."""
        if not isinstance(data, Mapping):
            raise ValidationError(
                f"`{arg}`: a certificate must be a JSON object (a dict) of Certificate.to_dict() "
                f"fields; got a {type(data).__name__}. Pass the output of Certificate.to_dict()."
            )
        names = {f.name for f in fields(cls)}
        missing = sorted(names - set(data) - {"notes", "seed", "sampling_weight", "tipping_gamma"})
        if missing:
            raise ValidationError(f"`{arg}`: certificate dict misses keys: {', '.join(missing)}.")
        values = {k: data[k] for k in names if k in data}
        for key in _CERTIFICATE_TEXTS:
            if not isinstance(values[key], str):
                raise _malformed(arg, key, values[key], "a str")
        for key, allowed in (
            ("verdict", ("approve", "reject")),
            ("baseline", ("logging", "threshold")),
        ):
            if values[key] not in allowed:
                raise _malformed(arg, key, values[key], f"one of {', '.join(map(repr, allowed))}")
        for key in _CERTIFICATE_NUMBERS:
            optional = key.startswith("improvement_")
            if not (optional and values[key] is None):
                values[key] = _finite_field(arg, key, values[key])
        for key, optional in (("n", False), ("n_train", True), ("seed", True)):
            value = values.get(key)
            if optional and value is None:
                continue
            if (
                isinstance(value, (bool, np.bool_))
                or not isinstance(value, numbers.Integral)
                or value < 0
            ):
                raise _malformed(arg, key, value, "a whole number >= 0" + (" or None" * optional))
            values[key] = int(value)
        pair = values["reward_range"]
        if isinstance(pair, (str, bytes, Mapping)) or not isinstance(pair, Iterable):
            raise _malformed(arg, "reward_range", pair, "a pair [low, high]")
        bounds = tuple(_finite_field(arg, "reward_range", v) for v in pair)
        if len(bounds) != 2 or not bounds[0] < bounds[1]:
            raise _malformed(arg, "reward_range", pair, "a pair [low, high] with low < high")
        values["reward_range"] = bounds
        notes = data.get("notes", ())
        if (
            isinstance(notes, (str, bytes))
            or not isinstance(notes, Iterable)
            or not all(isinstance(v, str) for v in notes)
        ):
            raise _malformed(arg, "notes", notes, "a list of str")
        values["notes"] = tuple(notes)
        weight = data.get("sampling_weight")
        if weight is not None and not isinstance(weight, str):
            raise _malformed(arg, "sampling_weight", weight, "a str (a column name) or None")
        values["sampling_weight"] = weight
        gamma = data.get("tipping_gamma")
        if gamma == "inf":
            gamma = math.inf
        elif gamma is not None:
            number = None if isinstance(gamma, (bool, np.bool_)) else gamma
            if not isinstance(number, numbers.Real) or not float(number) >= 1.0:
                raise _malformed(arg, "tipping_gamma", gamma, 'a number >= 1, "inf" or None')
            gamma = float(number)
        values["tipping_gamma"] = gamma
        return cls(**values)

    @classmethod
    def from_json(cls, text: str) -> Certificate:
        """Rebuild a certificate from :meth:`to_json` output."""
        if isinstance(text, (bytes, bytearray)):
            text = text.decode("utf-8", errors="replace")
        if not isinstance(text, str):
            raise ParameterError(
                f"Certificate.from_json needs the JSON text (a str); got a {type(text).__name__}. "
                "Use Certificate.from_dict for a dict."
            )
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValidationError(
                f"`text`: the certificate is not valid JSON: {exc.msg} at line {exc.lineno}, "
                f"column {exc.colno} (character {exc.pos}). Pass the text Certificate.to_json() "
                "wrote, unchanged."
            ) from None
        except RecursionError:
            raise ValidationError(
                "`text`: the certificate nests JSON arrays or objects deeper than Python's "
                "parser goes; Certificate.to_json() writes 3 levels. Pass the text it wrote, "
                "unchanged."
            ) from None
        return cls._from_mapping(data, "text")

    def __str__(self) -> str:
        pct = f"{100 * self.confidence_level:g}%"
        kind = (
            "clipped IPS"
            if self.sampling_weight is None
            else f"Hajek-weighted clipped IPS, sampling weights `{self.sampling_weight}`"
        )
        shown = [
            ("reason", self.reason),
            ("estimate", f"{self.value:.6g} ({kind}, max_weight={self.max_weight:g})"),
            ("lower bound", f"{self.lower_bound:.6g} (one-sided {pct}, {self.ci_method})"),
            ("baseline", f"{self.baseline_value:.6g} ({self.baseline_source})"),
        ]
        if self.improvement_lower_bound is not None:
            shown.append(
                (
                    "improvement",
                    f"{self.improvement_estimate:.6g}, lower bound "
                    f"{self.improvement_lower_bound:.6g} (one-sided {pct})",
                )
            )
        train = "unknown" if self.n_train is None else f"{self.n_train:,}"
        shown.append(
            (
                "rows",
                f"{train} train, {self.n:,} certify; "
                f"{100 * self.clipped_fraction:.3g}% of weights clipped",
            )
        )
        if self.sampling_weight is not None:
            bound = (
                "finite-sample weighted betting bound"
                if self.ci_method == "betting"
                else f"{self.ci_method} bound of the linearized Hajek ratio, asymptotic"
            )
            shown.append(
                (
                    "sampling weights",
                    f"column `{self.sampling_weight}` (Horvitz-Thompson: values for the logged "
                    f"population; {bound})",
                )
            )
        if self.tipping_gamma is not None:
            shown.append(("sensitivity", describe_approval_tipping(self.tipping_gamma)))
        if self.seed is not None:
            shown.append(("split seed", f"{self.seed} (rng={self.seed} reproduces it)"))
        # each field's value in one column, a long one wrapped under itself (ope's text width)
        lines = wrap_text(
            f"certificate for policy {self.policy!r}: {self.verdict.upper()}", subsequent="  "
        )
        for label, value in shown:
            lines += wrap_text(
                value,
                initial=f"  {label + ':':<{_FIELD_WIDTH}}",
                subsequent=" " * (2 + _FIELD_WIDTH),
            )
        return "\n".join(lines)

    def _parts(self) -> ResultParts:
        d = self.to_dict()
        shown = [(k, v) for k, v in d.items() if k != "notes"]
        return ResultParts(
            title=f"certificate for policy {self.policy!r}: {self.verdict.upper()}",
            fields=shown,
            notes=self.notes,
        )


def _propensities_of(policy: Any, X: Any, action: Any, candidates: Any) -> Any:
    """What ``policy`` gives for the logged actions: a learner's target propensities, a
    classifier's probabilities of them, or ``policy`` itself (a per-row vector)."""
    scores_contexts = hasattr(policy, "target_propensity") or hasattr(policy, "predict_proba")
    if X is None and scores_contexts:
        raise ParameterError(
            f"`X` is None, but `policy` ({type(policy).__name__}) computes its probabilities "
            "from the contexts: pass the certification rows' contexts as X (shape (n, "
            "n_features), the features it was fitted on), or pass its target propensities "
            "pi(action_i | x_i) as an array with X=None."
        )
    if hasattr(policy, "classes_"):
        idx = _known_actions(np.asarray(policy.classes_), np.asarray(action))
    if hasattr(policy, "target_propensity"):
        return policy.target_propensity(X, action, candidates=candidates)
    if hasattr(policy, "predict_proba") and hasattr(policy, "classes_"):
        if candidates is not None:
            raise PolicyError(
                "this policy's predict_proba cannot restrict itself to `candidates`; pass its "
                "target propensities pi(action_i | x_i) as an array instead."
            )
        proba = np.asarray(policy.predict_proba(X), dtype=np.float64)
        return proba[np.arange(proba.shape[0]), idx]
    return policy


def _policy_propensity(
    policy: Any, X: Any, action: Any, candidates: Any, n: int
) -> npt.NDArray[np.float64]:
    """``pi(action_i | x_i)`` from a policy object or a given per-row vector."""
    try:
        pe = _propensities_of(policy, X, action, candidates)
    except NotFittedError:
        raise PolicyError(
            f"`policy` ({type(policy).__name__}) is not fitted: fit it on the training rows "
            "first (e.g. learner.fit(X, action, reward, propensity)), then certify it on "
            "held-out rows."
        ) from None
    try:
        pe = np.asarray(pe, dtype=np.float64)
    except (TypeError, ValueError):
        raise PolicyError(
            "`policy` must be a fitted learner (with target_propensity), a classifier (with "
            "predict_proba and classes_), or the target propensities pi(action_i | x_i) of the "
            f"certification rows as numbers; got {describe(policy)}."
        ) from None
    if pe.shape != (n,):
        raise PolicyError(
            f"`policy` must give its target propensities one per certification row ({n}), the "
            f"rows of `action`; got shape {pe.shape}."
        )
    # probabilities a hair above 1 (float rounding of a policy object) count as 1
    pe = np.where((pe > 1.0) & (pe <= 1.0 + _PROBABILITY_SLACK), 1.0, pe)
    try:
        check_target_propensity(pe, "policy")
    except ValidationError as exc:  # the policy, not the logs, gives no probabilities
        raise PolicyError(str(exc)) from None
    return pe


def _known_actions(classes: npt.NDArray[Any], action: npt.NDArray[Any]) -> npt.NDArray[np.intp]:
    """Index of each logged action in the policy's ``classes_``; an action the policy never saw
    in ``fit`` is refused: its probability is not known (reading it as 0 would credit the policy
    with avoiding actions it was never offered, and a gate could approve on that)."""
    idx, known = encode_known(action, classes, what="action")
    if not known.all():
        unknown = ~known
        labels = list(dict.fromkeys(action[unknown].tolist()))
        shown = ", ".join(repr(v) for v in labels[:ROWS_IN_MESSAGE])
        more = ", ..." if len(labels) > ROWS_IN_MESSAGE else ""
        raise ValidationError(
            f"`action` has {len(labels)} label(s) the policy never saw in fit ({shown}{more}) "
            f"in {row_list(unknown)}; its probability of them is unknown, so it cannot be "
            "certified on these rows. Certify on rows whose actions were in the training logs, "
            "or refit the policy on logs that contain these actions."
        )
    return idx


def _one_sided_lower(
    mean: float,
    var: float,
    rows: npt.NDArray[np.float64],
    *,
    low: float,
    high: float,
    confidence_level: float,
    method: str,
    weights: tuple[npt.NDArray[np.float64], float] | None = None,
) -> float:
    """One-sided lower confidence bound of a mean in ``[low, high]`` from the ``rows`` (betting)
    or their sample mean and unbiased variance (bernstein, t); ``weights`` = ``(s, s_max)`` for
    rows with sampling weights (betting: :func:`weighted_betting_lower_bound`; t: ``mean`` and
    ``var`` are then those of the Hajek ratio and its linearized terms)."""
    n = rows.shape[0]
    if method == "betting" and weights is not None:
        return weighted_betting_lower_bound(
            rows,
            weights[0],
            low=low,
            high=high,
            max_sampling_weight=weights[1],
            confidence_level=confidence_level,
        )
    if method == "betting":
        return float(
            betting_lower_bound(rows, low=low, high=high, confidence_level=confidence_level)
        )
    if method == "bernstein":
        # the two-sided interval at level 2c - 1 spends (1 - c) on each side, so its lower end
        # alone is a one-sided bound at level c
        ci = bernstein_interval(
            mean, var, n, low=low, high=high, confidence_level=2.0 * confidence_level - 1.0
        )
        return float(ci.low)
    half = float(stats.t.ppf(confidence_level, n - 1)) * math.sqrt(var / n)
    return max(low, mean - half)


def weighted_betting_lower_bound(
    values: npt.NDArray[np.float64],
    sampling_weight: npt.NDArray[np.float64],
    *,
    low: float,
    high: float,
    max_sampling_weight: float,
    confidence_level: float,
) -> float:
    r"""One-sided betting lower bound of a population mean from rows with sampling weights.

    ``values`` (in ``[low, high]`` a priori) are the kept rows' terms, in their logged order;
    row :math:`i` was kept with probability :math:`1/s_i` and :math:`s_i \le S`
    (``max_sampling_weight``, a priori). The bound is for :math:`\mu = \mathbb E_P[X]`, the mean
    over the logged population (every event, kept or dropped).

    Notes
    -----
    Events :math:`j` of the population are i.i.d. from :math:`P`; each is kept independently
    with probability :math:`1/s_j`. Given the number :math:`n` of kept rows, the kept rows are
    i.i.d. from :math:`Q`, :math:`dQ/dP = s^{-1}/\mathbb E_P[s^{-1}]`, so with
    :math:`Y = (X - a)/(b - a)\in[0, 1]`

    .. math:: \mathbb E_Q[s(Y - m)] = rac{\mathbb E_P[Y] - m}{\mathbb E_P[s^{-1}]},

    which is :math:`\le 0` whenever :math:`m \ge \mu' = (\mu - a)/(b - a)`: the terms
    :math:`s_i(Y_i - m)\ge -Sm` play the part of :math:`Y_i - m` in
    :func:`ope.intervals.betting.betting_lower_bound`. The capital

    .. math:: K_t(m) = \prod_{i\le t}igl(1 + \lambda_i(m)\,s_i(Y_i - m)igr),\qquad
              \lambda_i(m) = \min\Bigl(\sqrt{rac{2\ln(1/lpha)}{n\hat\sigma^2_{i-1}}},
              rac{c}{Sm}\Bigr),

    with every factor :math:`\ge 1 - c` (:math:`c = 1/2`), is a non-negative supermartingale
    at :math:`m = \mu'` for bets predictable from the earlier kept rows (and :math:`n`), and
    Ville's inequality gives :math:`P(\max_t K_t(\mu') \ge 1/lpha)\lelpha`. The bound is the
    largest rejected :math:`m` found by bisection (each factor decreases in :math:`m`), mapped
    back to :math:`[a, b]`. The plug-in spread is :math:`\hat\sigma^2_{i-1} = (1/4 +
    \sum_{k<i} s_k^2(Y_k - \hat\mu_{k-1})^2)/i` about the predictable Hajek mean
    :math:`\hat\mu_{k-1} = (1/2 + \sum_{j<k}s_jY_j)/(1 + \sum_{j<k}s_j)`; with unit weights and
    :math:`S = 1` this is :func:`~ope.intervals.betting.betting_lower_bound` exactly. The bound
    needs :math:`S` a priori (not the largest weight seen): the cap :math:`c/(Sm)` is what keeps
    the capital non-negative for any row the population may hold. The number of dropped events
    is not needed: a dropped event's term is 0, a factor of 1.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.learning._gate import weighted_betting_lower_bound
    >>> rng = np.random.default_rng(0)
    >>> seg = rng.integers(0, 2, size=20_000)              # two segments, means 0.8 and 0.2
    >>> x = rng.binomial(1, np.where(seg == 1, 0.8, 0.2)).astype(float)
    >>> kept = rng.random(20_000) < np.where(seg == 1, 0.1, 1.0)   # segment 1: pdrop 0.9
    >>> s = np.where(seg[kept] == 1, 10.0, 1.0)
    >>> lower = weighted_betting_lower_bound(x[kept], s, low=0.0, high=1.0,
    ...                                      max_sampling_weight=10.0, confidence_level=0.95)
    >>> bool(float(x[kept].mean()) < lower < 0.5)        # the population mean is 0.5
    True
    """
    span = high - low
    y = np.clip((values - low) / span, 0.0, 1.0)
    s = sampling_weight
    n = y.shape[0]
    log_threshold = math.log(1.0 / (1.0 - confidence_level))
    sy, ss = np.cumsum(s * y), np.cumsum(s)
    mean_before = (0.5 + (sy - s * y)) / (1.0 + (ss - s))  # predictable Hajek mean
    squares = np.cumsum((s * (y - mean_before)) ** 2)
    before = np.concatenate([[0.0], squares[:-1]])
    variance = (0.25 + before) / np.arange(1, n + 1, dtype=np.float64)
    bet = np.sqrt(2.0 * log_threshold / (n * variance))
    lo, hi = 0.0, 1.0  # m = 1 is never rejected: every factor is <= 1 there
    for _ in range(_WEIGHTED_BISECTION_STEPS):  # bisection steps, each vectorized over rows
        mid = 0.5 * (lo + hi)
        lam = np.minimum(bet, _WEIGHTED_BET_TRUNCATION / (max_sampling_weight * mid))
        log_capital = np.cumsum(np.log1p(lam * s * (y - mid)))
        if float(log_capital.max()) >= log_threshold:
            lo = mid
        else:
            hi = mid
    return float(min(max(low + span * lo, low), high))  # a rejected value: the safe side


@dataclass(frozen=True)
class SafetyGate:
    r"""Approve a policy only if a held-out lower confidence bound beats the baseline.

    In the spirit of high-confidence policy improvement (HCPI, Thomas et al. 2015): the policy
    is trained on one split of the logs and certified on another it never saw.

    Parameters
    ----------
    reward_range : tuple of float
        A priori reward range (required: the bound needs it; empirical extremes are not used).
    confidence_level : float, default=0.95
        One-sided level of the lower bound; the chance of approving a policy that is truly no
        better than the baseline is at most ``1 - confidence_level`` for the finite-sample modes
        (``"betting"``, ``"bernstein"``) only.
    ci : {"auto", "betting", "bernstein", "t"}, default="auto"
        The method of the one-sided bound. ``"auto"``: ``"betting"`` on unweighted rows, and on
        rows with sampling weights when ``max_sampling_weight`` is given; ``"t"`` on rows with
        sampling weights otherwise (see Notes). The certificate's ``ci_method`` is the mode
        used. The default differs from the ``"normal"`` of ope's two-sided intervals on
        purpose: an approval is a decision whose error rate the gate promises to keep below
        ``1 - confidence_level``, which an asymptotic bound (normal or t) does not do at
        finite ``n``, so the default is a bound valid at every sample size. ``"betting"``: one-sided
        betting bound of Waudby-Smith & Ramdas
        (:func:`ope.intervals.betting.betting_lower_bound`), valid at every sample size and the
        tightest safe mode. ``"bernstein"``: Maurer-Pontil empirical Bernstein bound, also valid
        at every sample size (HCPI's safe mode), wider. ``"t"``: Student-t bound, asymptotic
        (HCPI's semi-safe TT): it can exceed the nominal false-approval rate. When logging plays
        a sure-win arm with probability 0.002 that the candidate never plays (worse by 0.001),
        the t mode approved 12.4% of 2,000 runs at n = 1,000 against a nominal 5%
        (``benchmarks/bench_gate.py``); betting and Bernstein approved none.
    baseline : "logging" or float, default="logging"
        Compare with the logging policy on the same rows, or with a fixed threshold value.
    max_weight : float or None, default=None
        Clip level :math:`M`; None takes the policy's ``max_weight_`` (chosen on the training
        split, hence fixed before the certification rows are seen). A policy without one and no
        ``max_weight`` here raises :class:`~ope.exceptions.MissingBoundsError`.
    max_sampling_weight : float or None, default=None
        An a priori bound :math:`S` of the rows' sampling weights (``1/(1 - p)`` for the largest
        drop probability :math:`p` the logger uses; not the largest weight seen). It enables
        the finite-sample weighted betting bound on rows with sampling weights
        (:func:`weighted_betting_lower_bound`); a row above it is an error. Unused without
        sampling weights.

    Notes
    -----
    With translated rewards :math:`\ell_i = r_i - r_{lo}\in[0, \Delta]`,
    :math:`\Delta = r_{hi} - r_{lo}`, and clipped weights :math:`\bar w_i = \min(w_i, M)`,
    :math:`w_i = \pi(a_i|x_i)/p_i`, each certification row gives

    .. math:: Z_i = r_{lo} + \ell_i\bar w_i \in [r_{lo}, r_{lo} + M\Delta],\qquad
              D_i = Z_i - r_i = \ell_i(\bar w_i - 1) \in [-\Delta, (M-1)\Delta].

    Because :math:`\ell\ge0` and :math:`\bar w\le w`, :math:`\mathbb E Z \le V(\pi)` (also when
    :math:`\pi` leaves the logger's support), and :math:`\mathbb E D \le V(\pi) - V(\pi_0)`.

    * ``baseline="logging"``: approve iff the one-sided lower confidence bound of
      :math:`\mathbb E D` is > 0. The comparison is paired on the same rows, so the logging
      policy's own sampling noise is accounted for (it is not treated as a known constant). If
      :math:`V(\pi)\le V(\pi_0)` then :math:`\mathbb E D\le 0`, and approval requires the bound
      to exceed its target, which has probability at most :math:`1 - c`: one-sided, because only
      "worse than logging" must be ruled out. ``baseline_value`` reports the logging policy's
      on-policy mean reward on the certification rows, for information.
    * ``baseline=<float>``: approve iff the lower bound of :math:`\mathbb E Z` is > the threshold;
      the error probability is again at most :math:`1 - c`.

    The bounds of :math:`\mathbb E Z` and :math:`\mathbb E D` use the a priori ranges above
    (:math:`D_i` is smallest when :math:`\bar w_i = 0` and :math:`\ell_i = \Delta`, largest when
    :math:`\bar w_i = M` and :math:`\ell_i = \Delta`). ``ci="betting"`` (default) bets on the
    rows in their given order (:func:`ope.intervals.betting.betting_lower_bound`; the order
    must not be chosen from the rewards or weights, e.g. sorted by reward);
    ``ci="bernstein"`` uses :func:`ope.intervals.bounded.bernstein_interval`; both hold for
    every :math:`n`. ``ci="t"`` uses :math:`\bar D - t_{c, n-1}s/\sqrt n`, which rests on
    the central limit theorem and is not safe for skewed terms at moderate :math:`n` (see
    ``ci``). The guarantee needs i.i.d. rows, correct logging propensities, and
    certification rows independent of the training (and selection) rows.

    **Sampling weights.** When the certification rows carry sampling (Horvitz-Thompson) weights
    :math:`s_i` (``certify(..., sampling_weight=s)``: row :math:`i` was kept with probability
    :math:`1/s_i`, e.g. DSJSON's ``1/(1 - pdrop)``, and stands for :math:`s_i` events of the
    logged population), the targets are the population means, estimated by Hajek ratios as in
    :mod:`ope.estimators`:

    .. math:: \hat Z_s = \frac{\sum_i s_iZ_i}{\sum_i s_i},\qquad
              \hat D_s = \frac{\sum_i s_iD_i}{\sum_i s_i},\qquad
              \text{baseline} = \frac{\sum_i s_ir_i}{\sum_i s_i},

    with the linearized standard error :math:`\hat\sigma/\sqrt n`, :math:`\hat\sigma^2` the
    sample variance of :math:`\psi_i = s_i(T_i - \hat T_s)/\bar s` (:math:`T = Z` or
    :math:`D`; :meth:`ope.moments.WeightedMoments.estimate`), and the one-sided bound
    :math:`\hat T_s - t_{c,n-1}\hat\sigma/\sqrt n` (``ci="t"``; asymptotic, as
    unweighted). With an a priori bound :math:`s_i\le S` (``max_sampling_weight``)
    ``"betting"`` is finite-sample on weighted rows too: given the number of kept rows they are
    i.i.d. from the kept distribution :math:`Q`, under which :math:`\mathbb E_Q[s(T - m)]` has
    the sign of :math:`\mathbb E_P[T] - m` (:math:`P` the population) and
    :math:`s(T - m)\ge -S(m - a)`, so the betting capital on :math:`s_i(T_i - m)` with bets
    capped at :math:`c/(S(m-a))` (on the normalized scale) is a non-negative supermartingale
    at the population mean (:func:`weighted_betting_lower_bound`); unit weights with
    :math:`S = 1` give the unweighted betting bound exactly. Without :math:`S` the terms
    :math:`s_iT_i` have no a priori range and ``"betting"`` refuses weighted rows;
    ``"bernstein"`` always does (its bound is for the unweighted mean of i.i.d. terms).
    The t bound rests on the central limit theorem: the gate does not approve on it when the
    estimate rests on fewer than :data:`ope._thresholds.MIN_EFFECTIVE_ROWS` effective rows
    (Kish's ESS of :math:`s_i\bar w_i`, and at most that of :math:`s_i`, which the baseline
    and the improvement rest on; of :math:`\bar w_i` on unweighted rows): the reason says so,
    with the ``few_effective_rows`` note and a :class:`~ope.exceptions.SmallSampleWarning`.
    ``ci="auto"`` (the default) is ``"betting"`` on weighted rows when :math:`S` is given,
    else ``"t"``, and the certificate says which (``ci_method``, ``sampling_weight`` and a
    note).
    Unit weights are the unweighted rows: the certificate is then exactly the unweighted one.

    References
    ----------
    .. [1] P. S. Thomas, G. Theocharous and M. Ghavamzadeh, "High confidence policy
       improvement", ICML 2015.
    .. [2] A. Maurer and M. Pontil, "Empirical Bernstein bounds and sample variance
       penalization", COLT 2009.
    .. [3] I. Waudby-Smith and A. Ramdas, "Estimating means of bounded random variables by
       betting", Journal of the Royal Statistical Society B 86(1):1-27, 2024.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.learning import SafetyGate
    >>> rng = np.random.default_rng(1)
    >>> n = 20_000
    >>> action = rng.integers(0, 2, size=n)                     # uniform logging, p = 0.5
    >>> reward = rng.binomial(1, np.where(action == 1, 0.7, 0.3)).astype(float)
    >>> always_1 = (action == 1).astype(float)                  # pi(a_i | x_i) of "always 1"
    >>> cert = SafetyGate(reward_range=(0.0, 1.0), max_weight=2.0).certify(
    ...     always_1, None, action, reward, np.full(n, 0.5), name="always_1")
    >>> cert.verdict
    'approve'
    """

    reward_range: tuple[float, float] | None = None
    confidence_level: float = 0.95
    ci: GateMethod = "auto"
    baseline: Literal["logging"] | float = "logging"
    max_weight: float | None = None
    max_sampling_weight: float | None = None

    def certify(
        self,
        policy: Any,
        X: Any,
        action: Any,
        reward: Any,
        propensity: Any,
        *,
        candidates: Any = None,
        name: str | None = None,
        n_train: int | None = None,
        sampling_weight: Any = None,
        weight_name: str | None = None,
    ) -> Certificate:
        """Certify ``policy`` on held-out logged rows.

        Parameters
        ----------
        policy : fitted learner, classifier, or array of shape (n,)
            An object with ``target_propensity(X, action, candidates=)`` (the ope learners) or
            ``predict_proba`` and ``classes_``; or directly the target propensities
            :math:`\\pi(a_i|x_i)` of the logged actions.
        X : array-like of shape (n, n_features) or None
            Contexts of the certification rows (None when ``policy`` is an array).
        action, reward, propensity : array-like of shape (n,)
            Logged actions, rewards and logging propensities of the certification rows.
        candidates : optional
            Candidate sets of the certification rows (as in ``fit``).
        name : str, optional
            Policy name for the certificate (default: the class name, or ``"policy"``).
        n_train : int, optional
            Rows the policy was trained on, recorded in the certificate.
        sampling_weight : array-like of shape (n,), optional
            The rows' sampling (Horvitz-Thompson) weights, finite and > 0: the certificate is
            then Hajek-weighted (see Notes). All 1 is the unweighted certificate.
        weight_name : str, optional
            What messages and the certificate call the weights (the logs' column); default
            ``"sampling_weight"``.

        Returns
        -------
        Certificate
        """
        if self.reward_range is None:
            raise MissingBoundsError(
                "SafetyGate needs reward_range=(low, high), the a priori range of the rewards "
                "(e.g. (0, 1) for clicks): the finite-sample bound is built on it. Empirical "
                "extremes are not used in its place."
            )
        low, high = required_reward_range(self.reward_range)
        level = check_confidence_level(self.confidence_level)
        if not level > 0.5:
            raise ParameterError(
                f"confidence_level must be in (0.5, 1) for a one-sided bound, got {level!r}."
            )
        max_weight = self.max_weight
        if max_weight is None:
            max_weight = getattr(policy, "max_weight_", None)
        if max_weight is None:
            raise MissingBoundsError(
                "the gate needs max_weight, the clip level M of the importance weights fixed "
                "before certification: pass SafetyGate(max_weight=...) or certify a learner that "
                "has a max_weight_. The largest weight in the data is not used in its place."
            )
        max_weight = check_max_weight(max_weight)
        if max_weight is None or max_weight < 1.0:
            raise ParameterError(f"max_weight must be a finite number >= 1, got {max_weight!r}.")
        a = np.asarray(action)
        if a.ndim != 1:
            raise ValidationError(
                f"`action` must hold the logged action of each certification row (shape (n,)); "
                f"got shape {a.shape}."
            )
        check_label_kinds(a, "action")
        n = a.shape[0]
        if n < MIN_CERTIFY_ROWS:
            raise EstimationError(
                f"`action` has {n} row(s): certification needs at least {MIN_CERTIFY_ROWS} "
                "held-out rows."
            )
        if n_train is not None:
            n_train = check_positive_int(n_train, "n_train", minimum=0, example="n_train=1000")
        r = check_reward(reward, n, (low, high), against="`action`")
        p = check_propensity(propensity, n, against="`action`")
        weight_name = "sampling_weight" if weight_name is None else str(weight_name)
        s = None
        if sampling_weight is not None:
            s = check_sampling_weight(np.asarray(sampling_weight), n, name=weight_name)
            if bool(np.all(s == 1.0)):
                s = None  # unit weights: the unweighted certificate, exactly
        s_max = None
        if s is not None:
            s_max = check_max_sampling_weight(self.max_sampling_weight, s, weight_name)
        method = resolve_gate_method(
            self.ci, None if s is None else weight_name, max_sampling_weight=s_max
        )
        bet_weights = None if s is None or s_max is None else (s, s_max)
        pe = _policy_propensity(policy, X, a, candidates, n)
        # everything below is computed in units of a power of two (exact, so the numbers are
        # those of the rewards as given): squares and sums of rewards near the float64 limit
        # (reward_range=(-1e300, 1e300)) stay finite; results are scaled back at the end
        unit = power_of_two_scale(low, high)
        low_u, high_u = low / unit, high / unit
        r_u = r / unit
        span = high_u - low_u
        ell = r_u - low_u
        clipped_weight = np.minimum(pe / p, max_weight)
        if s is None:
            # Z_i = r_lo + min(w_i, M) (r_i - r_lo): the clipped-IPS moments about r_lo (kernel)
            moments = centered_moments(r_u, p, pe[:, None], max_weight=max_weight)
            shifted_mean, z_var = moments.product_mean_var(0, clipped=True, about=low_u)
            estimate = low_u + shifted_mean
            n_clipped = float(moments.n_clipped[0])
        else:  # the Hajek ratio sum s Z / sum s and the variance of its linearized terms
            weighted = WeightedMoments.from_arrays(r_u, (pe / p)[:, None], s, max_weight=max_weight)
            estimate, z_sd = weighted.estimate("clipped_ips", 0, origin=low_u)
            z_var = z_sd * z_sd
            n_clipped = float(weighted.n_clipped[0])
        z = low_u + ell * clipped_weight
        # no value lies outside the reward range, so neither does a bound of it (a few rows
        # with equal clipped terms above high would otherwise give a "lower bound" above high)
        lower = min(
            high_u,
            _one_sided_lower(
                estimate,
                z_var,
                z,
                low=low_u,
                high=low_u + max_weight * span,
                confidence_level=level,
                method=method,
                weights=bet_weights,
            ),
        )
        baseline_value = float(r_u.mean()) if s is None else _hajek(r_u, s)[0]
        # the t bound rests on the central limit theorem, which needs enough effective rows
        # (betting and Bernstein hold at any n): Kish's ESS of the weights the estimate uses,
        # s * min(w, M) as ope.evaluate reads it, and of s alone, which the baseline and the
        # paired improvement rest on (one row with most of the sampling weight decides them)
        effective = (
            _effective_rows(clipped_weight, s, n) if method == _ASYMPTOTIC_METHOD else math.inf
        )
        few_rows = few_effective_rows(effective)
        std_error = math.sqrt(z_var / n)
        pct = f"{100 * level:g}%"
        improvement: float | None
        improvement_lower: float | None
        if isinstance(self.baseline, str):
            if self.baseline != "logging":
                raise ParameterError(
                    f"baseline must be 'logging' or a number, got {self.baseline!r}."
                )
            # the paired difference D_i = Z_i - r_i is not a moment of the weighting estimate
            # (its variance needs cov(Z, r)), so it is formed per row
            diff = ell * (clipped_weight - 1.0)
            if s is None:
                improvement, diff_var = float(diff.mean()), float(diff.var(ddof=1))
            else:
                improvement, diff_var = _hajek(diff, s)
            std_error = math.sqrt(diff_var / n)
            improvement_lower = min(
                span,
                _one_sided_lower(
                    improvement,
                    diff_var,
                    diff,
                    low=-span,
                    high=(max_weight - 1.0) * span,
                    confidence_level=level,
                    method=method,
                    weights=bet_weights,
                ),
            )
            bar = 0.0
            bound_u = improvement_lower
            improvement, improvement_lower = improvement * unit, improvement_lower * unit
            baseline_value *= unit
            source = f"on-policy mean reward of the logging policy on the {n:,} certification rows"
            if s is not None:
                source = (
                    f"Hajek-weighted {source[: -len(' rows')]} rows (sampling weights "
                    f"`{weight_name}`)"
                )
            shown, what = improvement_lower, "of the improvement over the logging policy"
            against = "0"
            baseline_kind: Literal["logging", "threshold"] = "logging"
        else:
            threshold = check_real(self.baseline, "baseline")
            if not math.isfinite(threshold):
                raise ParameterError(f"baseline threshold must be finite, got {threshold!r}.")
            improvement = improvement_lower = None
            bar, bound_u = threshold / unit, lower
            baseline_value = threshold
            source = "threshold given by the user"
            shown, what, against = lower * unit, "of the value", f"the threshold {threshold:.4g}"
            baseline_kind = "threshold"
        approve = bound_u > bar
        reason = f"the {pct} lower bound {what} is {shown:.4g} {'>' if approve else '<='} {against}"
        if name is None:
            name = type(policy).__name__ if not isinstance(policy, (np.ndarray, list)) else "policy"
        notes: tuple[str, ...] = ()
        few_note = None
        if method == _ASYMPTOTIC_METHOD and small_sample(n):
            notes += (small_sample_note(n),)
        elif few_rows:  # below SMALL_SAMPLE_ROWS rows the note above says it already
            few_note = few_effective_rows_note(
                effective,
                std_error * unit,
                weighted=s is not None,
                advice="the gate does not approve on it: " + _few_rows_advice(s is not None),
            )
            notes += (few_note,)
        declined = few_rows and approve
        if declined:
            approve = False
            reason = (
                f"{reason}, but that t bound rests on {effective:.3g} effective "
                f"{'row' if f'{effective:.3g}' == '1' else 'rows'} (< {MIN_EFFECTIVE_ROWS}), "
                "too few for the central limit theorem behind it: the gate does not approve on it"
            )
        if declined or few_note is not None:
            said = (
                f"{reason}. {as_sentence(_few_rows_advice(s is not None))}"
                if declined
                else str(few_note)
            )
            warnings.warn(
                f"SafetyGate, policy {str(name)!r}: {said}",
                SmallSampleWarning,
                stacklevel=user_stacklevel(),
            )
        if s is not None:
            notes += (_weighted_note(weight_name, s, self.ci, method, s_max),)
        estimate, lower = estimate * unit, lower * unit
        if estimate > high:
            notes += (_above_range_note(estimate, high, max_weight),)
        tipping = None
        if approve:

            def holds(gamma: float) -> bool:
                # the weights at their smallest under gamma: pi times the box's lower end
                w_low = np.minimum(pe * msm_weight_range(p, gamma)[0], max_weight)
                if baseline_kind == "logging":
                    terms, lo_t, hi_t = ell * (w_low - 1.0), -span, (max_weight - 1.0) * span
                else:
                    terms, lo_t, hi_t = low_u + ell * w_low, low_u, low_u + max_weight * span
                mean, var = (
                    (float(terms.mean()), float(terms.var(ddof=1)))
                    if s is None
                    else _hajek(terms, s)
                )
                bound = _one_sided_lower(
                    mean,
                    var,
                    terms,
                    low=lo_t,
                    high=hi_t,
                    confidence_level=level,
                    method=method,
                    weights=bet_weights,
                )
                return bound > bar

            tipping = tipping_point(holds)
        return Certificate(
            policy=str(name),
            verdict="approve" if approve else "reject",
            reason=reason,
            value=estimate,
            lower_bound=lower,
            baseline=baseline_kind,
            baseline_value=baseline_value,
            baseline_source=source,
            improvement_estimate=improvement,
            improvement_lower_bound=improvement_lower,
            confidence_level=level,
            ci_method=method,
            max_weight=max_weight,
            reward_range=(low, high),
            n_train=None if n_train is None else int(n_train),
            n=int(n),
            clipped_fraction=n_clipped / n,
            notes=notes,
            sampling_weight=None if s is None else weight_name,
            tipping_gamma=tipping,
        )


def resolve_gate_method(
    ci: Any, weight_name: str | None, *, max_sampling_weight: float | None = None
) -> str:
    """The gate mode used. Unweighted rows (``weight_name`` None): ``"auto"`` is
    :data:`AUTO_METHOD`. Rows with sampling weights: ``"auto"`` is ``"betting"`` (the weighted
    betting bound, finite-sample) when ``max_sampling_weight`` bounds the weights a priori, else
    :data:`AUTO_WEIGHTED_METHOD` (``"t"``); ``"betting"`` without that bound and
    ``"bernstein"`` refuse them."""
    chosen = check_choice(ci, "ci", _METHODS)
    if weight_name is None:
        return AUTO_METHOD if chosen == "auto" else chosen
    if chosen == "auto":
        return "betting" if max_sampling_weight is not None else AUTO_WEIGHTED_METHOD
    if chosen == "betting" and max_sampling_weight is not None:
        return chosen
    if chosen in _UNWEIGHTED_METHODS:
        how = (
            "its bound holds for the unweighted mean of i.i.d. rows in a known range, while "
            "the weighted value is a Hajek ratio"
            if chosen == "bernstein"
            else "its weighted version bets on s_i (x_i - m), whose range needs an a priori bound "
            "of the weights: give max_sampling_weight= (e.g. 1 / (1 - the largest pdrop the "
            "logger uses))"
        )
        raise EstimationError(
            f"the gate's ci={chosen!r} does not take sampling weights as given, and the "
            f"certification rows carry them (column `{weight_name}`, not all 1, e.g. from "
            f"DSJSON pdrop): {how}. Use ci='t' (the asymptotic bound of the linearized "
            "ratio; ci='auto' chooses it for weighted rows without max_sampling_weight), "
            f"or drop the `{weight_name}` column to certify on the kept rows as they are."
        )
    return chosen


def check_max_sampling_weight(
    value: Any, s: npt.NDArray[np.float64], weight_name: str
) -> float | None:
    """The a priori bound ``S`` of the sampling weights (None when not given): finite, > 0,
    and no weight above it."""
    if value is None:
        return None
    bound = check_real(value, "max_sampling_weight")
    if not (math.isfinite(bound) and bound > 0.0):
        raise ParameterError(
            f"max_sampling_weight must be a finite number > 0 (an a priori bound of the sampling "
            f"weights); got {value!r}."
        )
    above = s > bound * (1.0 + _SAMPLING_WEIGHT_SLACK)
    if above.any():
        raise ValidationError(
            f"`{weight_name}` exceeds max_sampling_weight={bound:g} in {row_list(above)} "
            f"(largest {float(s.max()):g}): the bound must hold for every row a priori (1 / the "
            "smallest keep probability the logger uses)."
        )
    return max(bound, float(s.max()))  # a weight a rounding above the bound: the cap holds


def _hajek(values: npt.NDArray[np.float64], s: npt.NDArray[np.float64]) -> tuple[float, float]:
    """``(sum s x / sum s, var(psi))``: the Hajek mean of per-row terms ``x`` and the sample
    variance of its linearized terms ``psi_i = s_i (x_i - mean) / mean(s)``, from the weighted
    moment kernel (:meth:`ope.moments.WeightedMoments.estimate`, kind ``"logging"``)."""
    moments = WeightedMoments.from_arrays(values, np.ones((values.shape[0], 1)), s, max_weight=None)
    mean, sd = moments.estimate("logging", 0)
    return mean, sd * sd


def _effective_rows(
    clipped_weight: npt.NDArray[np.float64], s: npt.NDArray[np.float64] | None, n: int
) -> float:
    """The effective number of certification rows behind the gate's t bounds: Kish's ESS of
    the weights the estimate uses, ``s * min(w, M)`` (``s`` = 1 on unweighted rows, as
    :func:`ope.evaluate` reads them), and at most that of ``s`` alone, on which the baseline and
    the paired improvement rest (``n`` on unweighted rows)."""
    used = clipped_weight if s is None else s * clipped_weight
    ess = kish_ess(float(used.sum()), float(used @ used))
    return ess if s is None else min(ess, kish_ess(float(s.sum()), float(s @ s)))


def _few_rows_advice(weighted: bool) -> str:
    """What to do when the t bound rests on too few effective rows (a phrase in lower case, as
    :func:`ope._thresholds.few_effective_rows_note` takes its advice)."""
    return (
        "give max_sampling_weight= (an a priori bound of the sampling weights) for the "
        "finite-sample weighted betting bound, or certify on more rows whose sampling weights "
        "are less concentrated."
        if weighted
        else "certify with ci='betting' (or 'auto'), whose bound holds at any n, or on more rows."
    )


def _above_range_note(estimate: float, high: float, max_weight: float) -> str:
    """The note of a value estimate above the top of the reward range: the policy's value
    cannot be there (the clipped terms reach ``max_weight`` times the range only row by row)."""
    return (
        f"the estimate {estimate:.4g} lies above the top of reward_range ({high:.4g}), which "
        "the policy's value cannot exceed: the clipped importance-weighted terms reach "
        f"max_weight={max_weight:g} times the range's width on single rows, so an average above "
        "it is noise (few rows, or a few rows with large weights). Read the value as at most "
        f"{high:.4g}; the lower bound stays within the range."
    )


def _weighted_note(
    weight_name: str,
    s: npt.NDArray[np.float64],
    requested: Any,
    method: str,
    s_max: float | None,
) -> str:
    """The note of a certificate on rows with sampling weights."""
    if method == "betting":
        bound = (
            f"the bounds are the weighted betting bounds of the population means "
            f"(finite-sample; sampling weights <= max_sampling_weight = {s_max:g})"
        )
    else:
        chose = (
            "ci='auto' chose the t bound (no max_sampling_weight was given for the "
            "weighted betting bound), "
            if requested == "auto"
            else ""
        )
        bound = (
            f"{chose}the bounds are t bounds of the linearized ratios (asymptotic): "
            "betting needs max_sampling_weight and bernstein is for unweighted rows"
        )
    n = int(s.shape[0])
    ess = kish_ess(float(s.sum()), float(s @ s))
    concentrated = (
        ": they concentrate on a few rows, which decide the estimate, the baseline and the "
        "improvement alike"
        if low_ess(ess, n) or few_effective_rows(ess)
        else ""
    )
    return (
        sampling_weight_note(weight_name, float(s.sum()), n)
        + f" The estimate, the baseline and the improvement are Hajek ratios; {bound}. The "
        f"sampling weights' Kish effective sample size is {ess:.3g} of the {n:,} rows"
        f"{concentrated}."
    )


def certify(
    policy: Any,
    X: Any,
    action: Any,
    reward: Any,
    propensity: Any,
    *,
    reward_range: tuple[float, float] | None,
    candidates: Any = None,
    name: str | None = None,
    n_train: int | None = None,
    confidence_level: float = 0.95,
    ci: GateMethod = "auto",
    baseline: Literal["logging"] | float = "logging",
    max_weight: float | None = None,
    sampling_weight: Any = None,
    weight_name: str | None = None,
    max_sampling_weight: float | None = None,
) -> Certificate:
    """Certify a policy on held-out rows: ``SafetyGate(...).certify(...)`` in one call.

    See :class:`SafetyGate` for the parameters, the bound and the guarantee.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.learning import certify
    >>> rng = np.random.default_rng(2)
    >>> action = rng.integers(0, 2, size=5000)
    >>> reward = rng.binomial(1, np.where(action == 1, 0.3, 0.7)).astype(float)
    >>> always_1 = (action == 1).astype(float)        # truly worse than logging
    >>> certify(always_1, None, action, reward, np.full(5000, 0.5),
    ...         reward_range=(0, 1), max_weight=2.0).verdict
    'reject'
    """
    gate = SafetyGate(
        reward_range=reward_range,
        confidence_level=confidence_level,
        ci=ci,
        baseline=baseline,
        max_weight=max_weight,
        max_sampling_weight=max_sampling_weight,
    )
    return gate.certify(
        policy,
        X,
        action,
        reward,
        propensity,
        candidates=candidates,
        name=name,
        n_train=n_train,
        sampling_weight=sampling_weight,
        weight_name=weight_name,
    )


def rank_policies(
    policies: Mapping[str, Any],
    X: Any,
    action: Any,
    reward: Any,
    propensity: Any,
    *,
    reward_range: tuple[float, float] | None,
    max_weight: float | None,
    candidates: Any = None,
    confidence_level: float = 0.95,
    ci: GateMethod = "auto",
    simultaneous: bool = True,
    sampling_weight: Any = None,
    weight_name: str | None = None,
    max_sampling_weight: float | None = None,
) -> Any:
    r"""Rank candidate policies by a lower confidence bound of their value.

    Parameters
    ----------
    policies : mapping of str to policy
        Name to a fitted learner / classifier, or to the target propensities
        :math:`\pi(a_i|x_i)` of the logged actions (see :meth:`SafetyGate.certify`).
    X, action, reward, propensity : array-like
        Logged rows used for the ranking (held out from any training).
    reward_range : tuple of float
        A priori reward range (required).
    max_weight : float
        Clip level :math:`M`, fixed in advance (required; the same for every policy so the bounds
        are comparable).
    candidates : optional
        Candidate sets of the rows.
    confidence_level : float, default=0.95
        One-sided level.
    ci : {"auto", "betting", "bernstein", "t"}, default="auto"
        As in :class:`SafetyGate` (``"t"`` is asymptotic and not safe; ``"auto"`` is betting,
        or ``"t"`` on rows with sampling weights).
    simultaneous : bool, default=True
        Bonferroni-adjust: each bound at level :math:`1-(1-c)/P` for :math:`P` policies, so that
        all hold together with probability at least :math:`c` and the top policy's bound stays
        valid although it was selected for being on top.
    sampling_weight, weight_name, max_sampling_weight : optional
        The rows' sampling (Horvitz-Thompson) weights, their name and an a priori bound of
        them, as in :class:`SafetyGate`: the estimates and bounds are then Hajek-weighted.

    Returns
    -------
    pandas.DataFrame
        One row per policy, best lower bound first: ``rank, policy, value, lower_bound,
        improvement_estimate, improvement_lower_bound, confidence_level, ci_method, n``.
        ``improvement_*`` are paired against the logging policy (as in :class:`SafetyGate`).

    Notes
    -----
    For each policy, :math:`Z_i = r_{lo} + (r_i - r_{lo})\min(w_i, M)` and the lower bound of
    :math:`\mathbb E Z\le V(\pi)` is computed as in :class:`SafetyGate`.

    References
    ----------
    .. [1] P. S. Thomas, G. Theocharous and M. Ghavamzadeh, "High confidence policy
       improvement", ICML 2015.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.learning import rank_policies
    >>> rng = np.random.default_rng(3)
    >>> action = rng.integers(0, 2, size=4000)
    >>> reward = rng.binomial(1, np.where(action == 1, 0.6, 0.4)).astype(float)
    >>> table = rank_policies(
    ...     {"always_0": (action == 0) * 1.0, "always_1": (action == 1) * 1.0},
    ...     None, action, reward, np.full(4000, 0.5), reward_range=(0, 1), max_weight=2.0)
    >>> table["policy"].tolist()
    ['always_1', 'always_0']
    """
    import pandas as pd

    if not isinstance(policies, Mapping):
        raise ParameterError(
            "`policies` must be a mapping of policy name to policy (a fitted learner, a "
            f"classifier or target propensities); got {describe(policies)}. Pass e.g. "
            "policies={'learned': learner}."
        )
    if not policies:
        raise PolicyError("`policies` is empty; pass a mapping of name to policy.")
    policy_labels(list(policies), len(policies), columns="policies", argument="policies")
    level = check_confidence_level(confidence_level)
    per_policy = 1.0 - (1.0 - level) / len(policies) if simultaneous else level
    gate = SafetyGate(
        reward_range=reward_range,
        confidence_level=per_policy,
        ci=ci,
        baseline="logging",
        max_weight=max_weight,
        max_sampling_weight=max_sampling_weight,
    )
    if max_weight is None:
        raise MissingBoundsError(
            "rank_policies needs max_weight, one clip level fixed in advance for every policy. "
            "The largest weight in the data is not used in its place."
        )
    rows = []
    for policy_name, policy in policies.items():  # loop over policies, not rows
        cert = gate.certify(
            policy,
            X,
            action,
            reward,
            propensity,
            candidates=candidates,
            name=str(policy_name),
            sampling_weight=sampling_weight,
            weight_name=weight_name,
        )
        rows.append(
            {
                "policy": cert.policy,
                "value": cert.value,
                "lower_bound": cert.lower_bound,
                "improvement_estimate": cert.improvement_estimate,
                "improvement_lower_bound": cert.improvement_lower_bound,
                "confidence_level": per_policy,
                "ci_method": cert.ci_method,
                "n": cert.n,
            }
        )
    table = pd.DataFrame(rows).sort_values("lower_bound", ascending=False, kind="stable")
    table.insert(0, "rank", np.arange(1, len(table) + 1))
    return table.reset_index(drop=True)
