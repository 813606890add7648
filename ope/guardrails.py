r"""Several outcomes at once: approve a candidate only when its primary outcome improves on the
logging policy and every guardrail outcome (cost, latency, harm) is not worse by more than its
stated margin.

Each claim is a one-sided test on the paired difference :math:`\Delta_k = V_k(\pi) -
V_k(\pi_0)` of outcome :math:`k` between the candidate and the logging policy, on the same
rows (:meth:`ope.Evaluation.comparisons`: the estimate of the candidate's mean outcome minus
the mean logged outcome, with its paired standard error):

* the primary outcome improves: :math:`H_0: \Delta \le 0` (``direction="higher"``) or
  :math:`H_0: \Delta \ge 0` (``"lower"``, e.g. a cost as the primary);
* a guardrail is not worse by more than its margin :math:`m \ge 0`: :math:`H_0: \Delta \ge m`
  for an outcome where lower is better (latency), :math:`H_0: \Delta \le -m` where higher is
  better.

Estimators: SNIPS or IPS (a clipped estimate's shrinkage depends on the outcome's location and
voids the bound). A candidate is approved when **every** claim is rejected at level :math:`\alpha = 1 -`
``confidence_level`` (one-sided normal tests). This is an intersection-union test (Berger,
Technometrics 1982): the probability of approving a candidate for which any claim is false is
at most :math:`\alpha`, without a correction over the claims, and its p-value is the largest of
the claims'. Over several candidates, ``correction="holm"`` (default) adjusts those p-values
by Holm's step-down, so that the chance of approving any candidate that fails a claim is at most
:math:`\alpha` (``"none"``: each candidate at :math:`\alpha` on its own). Each claim's own
p-value is also given with Holm's adjustment over the claims of its candidate, for reading the
claims one by one.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import pandas as pd

from ope._result import Result, ResultParts
from ope.paired import adjust_p_values
from ope._validation import check_choice, check_confidence_level, check_name, check_real
from ope.exceptions import OPEWarning, ParameterError

__all__ = [
    "GUARDRAIL_DIRECTIONS",
    "GUARDRAIL_CORRECTIONS",
    "GUARDRAIL_ESTIMATORS",
    "Guardrail",
    "GuardrailDecision",
    "guardrail_decision",
    "parse_guardrail",
]

#: Which way an outcome is better.
GUARDRAIL_DIRECTIONS: Final = ("higher", "lower")

#: The adjustment over candidates of their joint p-values.
GUARDRAIL_CORRECTIONS: Final = ("holm", "none")

#: The estimators of each outcome's mean: consistent ones only (a clipped estimate shrinks each
#: outcome's mean by an amount that depends on its location, which voids the error bound).
GUARDRAIL_ESTIMATORS: Final = ("snips", "ips")


@dataclass(frozen=True)
class Guardrail:
    """One outcome's claim: which way it is better and the worsening tolerated.

    Attributes
    ----------
    outcome : str
        A numeric column of the logs (``reward`` for the reward).
    direction : {"higher", "lower"}
        Which way the outcome is better.
    margin : float, default 0.0
        The worsening tolerated, in the outcome's units (>= 0): the candidate passes if its
        outcome is not worse than the logging policy's by more than this.

    Examples
    --------
    >>> Guardrail("latency_ms", "lower", 50.0)
    Guardrail(outcome='latency_ms', direction='lower', margin=50.0)
    """

    outcome: str
    direction: str = "higher"
    margin: float = 0.0

    def __post_init__(self) -> None:
        check_name(self.outcome, "outcome", what="a column name")
        check_choice(self.direction, "direction", GUARDRAIL_DIRECTIONS)
        margin = check_real(self.margin, "margin", finite=True)
        if margin < 0:
            raise ParameterError(
                f"`margin` is the worsening tolerated, >= 0; got {self.margin!r} (a guardrail "
                "that must improve is a primary outcome)."
            )
        object.__setattr__(self, "margin", margin)

    def _claim(self, primary: bool) -> str:
        """The claim in words."""
        if primary:
            return f"{self.outcome} {self.direction} than logging"
        return (
            f"{self.outcome} ({self.direction} is better) not worse than logging by more than "
            f"{self.margin:g}"
        )

    def _p_values(self, difference: np.ndarray, std_error: np.ndarray, primary: bool) -> np.ndarray:
        """One-sided normal p-values of the claim for paired differences (candidate minus
        logging) and their standard errors; 1 where the standard error is not finite."""
        from scipy.special import ndtr

        shift = 0.0 if primary else self.margin
        # the claim as "z large": Delta + m > 0 (higher), m - Delta > 0 (lower)
        signed = difference + shift if self.direction == "higher" else shift - difference
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(std_error > 0, signed / std_error, np.where(signed > 0, np.inf, -np.inf))
        p = ndtr(-z)  # the upper tail without cancellation
        return np.where(np.isfinite(std_error), p, 1.0)


def parse_guardrail(text: str, *, primary: bool = False, name: str | None = None) -> Guardrail:
    """``"latency_ms:lower:50"`` -> ``Guardrail("latency_ms", "lower", 50.0)``;
    ``"reward"`` -> higher is better, margin 0 (a primary takes no margin).

    Examples
    --------
    >>> parse_guardrail("cost:lower:0.1")
    Guardrail(outcome='cost', direction='lower', margin=0.1)
    """
    arg = name or ("primary" if primary else "guardrails")
    if not isinstance(text, str):
        raise ParameterError(f"`{arg}` must be text such as 'latency_ms:lower:50'; got {text!r}.")
    # a margin needs its direction: COL:50 alone would read as "higher is better"
    match = re.fullmatch(r"([^:]+)(?::(higher|lower)(?::([^:]+))?)?", text.strip())
    if not match:
        raise ParameterError(
            f"`{arg}`: {text!r} is not COLUMN[:higher|lower[:MARGIN]], e.g. 'latency_ms:lower:50'."
        )
    outcome, direction, margin = match.group(1), match.group(2) or "higher", match.group(3)
    if primary and margin is not None:
        raise ParameterError(
            f"`{arg}`: {text!r}: the primary outcome must improve (no margin); write "
            f"'{outcome}:{direction}'."
        )
    try:
        value = 0.0 if margin is None else float(margin)
    except ValueError:
        raise ParameterError(f"`{arg}`: {text!r}: margin {margin!r} is not a number.") from None
    try:
        return Guardrail(outcome, direction, value)
    except ParameterError as exc:
        raise ParameterError(f"`{arg}`: {text!r}: {exc}") from None


@dataclass(frozen=True, eq=False)
class GuardrailDecision(Result):
    """The multi-outcome decision per candidate (:func:`guardrail_decision`).

    Attributes
    ----------
    primary : Guardrail
    guardrails : tuple of Guardrail
    estimator : str
    confidence_level : float
    correction : str
    n : int
    approved : list of str
        The candidates approved, by the adjusted joint p-value (smallest first).
    """

    primary: Guardrail
    guardrails: tuple[Guardrail, ...]
    estimator: str
    confidence_level: float
    correction: str
    n: int
    approved: list[str]
    _claims: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)
    _decisions: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)
    notes: tuple[str, ...] = ()

    def table(self) -> pd.DataFrame:
        """One row per candidate: ``approve``, ``p_value`` (the largest of its claims'; the
        intersection-union test), ``adjusted_p_value`` (over candidates), ``failed`` (the
        outcomes whose claim was not shown)."""
        return self._decisions.copy()

    def claims(self) -> pd.DataFrame:
        """One row per candidate and outcome: ``claim``, ``value`` (the candidate's estimate),
        ``logging_value``, ``difference``, ``std_error``, ``ci_low``/``ci_high`` (two-sided, of
        the difference), ``p_value`` (one-sided), ``bound`` (the one-sided
        ``confidence_level`` bound of the difference in the claim's direction: the claim is
        shown when it is past the margin), ``holm_p_value`` (over its candidate's
        claims), ``shown`` (``p_value`` at most alpha)."""
        return self._claims.copy()

    def reason(self, policy: str) -> str:
        """Why a candidate is approved or not, in one line."""
        names = self._decisions["policy"].tolist()
        if not isinstance(policy, str) or policy not in names:
            raise ParameterError(f"`policy` must name a candidate, one of {names}; got {policy!r}.")
        row = self._decisions.iloc[names.index(policy)]
        if row["approve"]:
            return (
                f"approved: every claim shown at {1 - self.confidence_level:g} (joint p "
                f"{row['p_value']:.3g}, adjusted {row['adjusted_p_value']:.3g})"
            )
        failed = row["failed"] or "the adjustment over candidates"
        return f"not approved: not shown for {failed} (joint p {row['p_value']:.3g})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "primary": self.primary.__dict__,
            "guardrails": [g.__dict__ for g in self.guardrails],
            "estimator": self.estimator,
            "confidence_level": self.confidence_level,
            "correction": self.correction,
            "n": self.n,
            "approved": list(self.approved),
            "decisions": self._decisions.to_dict(orient="records"),
            "claims": self._claims.to_dict(orient="records"),
            "notes": list(self.notes),
        }

    def _parts(self) -> ResultParts:
        alpha = 1 - self.confidence_level
        return ResultParts(
            title=(
                f"guardrail decision on {self.n:,} rows: {self.primary._claim(True)}, "
                f"{len(self.guardrails)} guardrail(s)"
            ),
            fields=[
                ("rule", f"every claim one-sided at {alpha:g} (intersection-union test)"),
                ("over candidates", self.correction),
                ("estimator", self.estimator),
                ("approved", ", ".join(self.approved) or "none"),
            ],
            table=self._claims[["policy", "claim", "difference", "std_error", "p_value", "shown"]],
            notes=self.notes,
            precision={},
        )


def guardrail_decision(
    logs: Any,
    policies: Any = None,
    *,
    primary: str | Guardrail = "reward",
    guardrails: Sequence[str | Guardrail] | Mapping[str, Any] = (),
    estimator: str = "snips",
    confidence_level: float = 0.95,
    correction: str = "holm",
    weight_column: str | None = None,
) -> GuardrailDecision:
    """Approve the candidates whose primary outcome improves on the logging policy while no
    guardrail outcome is worse by more than its margin (see the module for the tests).

    Parameters
    ----------
    logs : BanditLogs or anything ``ope.read_logs`` accepts
    policies : optional
        As in :func:`ope.evaluate`.
    primary : str or Guardrail, default "reward"
        ``"COLUMN[:higher|lower]"``: the outcome that must improve.
    guardrails : sequence of str or Guardrail, or mapping
        ``"COLUMN[:higher|lower[:MARGIN]]"`` (e.g. ``"latency_ms:lower:50"``), Guardrail
        objects, or a mapping of column to ``(direction, margin)``.
    estimator : {"snips", "ips"}, default "snips"
        The estimator of every outcome's mean (the same weights for each outcome). Clipped
        estimators are refused: their shrinkage of each mean depends on the outcome's location
        and voids the error bound.
    confidence_level : float, default 0.95
        ``1 - alpha``: each claim is one-sided at ``alpha``.
    correction : {"holm", "none"}, default "holm"
        Over candidates (see the module).
    weight_column : str, optional
        Sampling weights, as in :func:`ope.evaluate`.

    Returns
    -------
    GuardrailDecision

    Examples
    --------
    >>> import numpy as np, pandas as pd, ope
    >>> g = np.random.default_rng(0)
    >>> a = g.integers(0, 2, 4000)
    >>> df = pd.DataFrame({"action": a, "propensity": 0.5,
    ...                    "reward": g.binomial(1, 0.3 + 0.2 * a).astype(float),
    ...                    "latency_ms": g.normal(100 + 5 * a, 10),
    ...                    "target__one": (a == 1).astype(float)})
    >>> d = ope.guardrail_decision(df, guardrails=["latency_ms:lower:20"])
    >>> d.approved
    ['one']
    """
    from scipy.special import ndtri

    from ope.evaluation.outcomes import outcome_evaluations
    from ope.evaluation.plan import EvaluationPlan
    from ope.io import read_logs
    from ope.logs import BanditLogs

    level = check_confidence_level(confidence_level)
    est = check_choice(estimator, "estimator", GUARDRAIL_ESTIMATORS)
    how = check_choice(correction, "correction", GUARDRAIL_CORRECTIONS)
    first = primary if isinstance(primary, Guardrail) else parse_guardrail(primary, primary=True)
    rails = _guardrails(guardrails)
    names = [first.outcome, *(g.outcome for g in rails)]
    if len(set(names)) != len(names):
        raise ParameterError(
            f"an outcome is named twice among the primary and guardrails: {names}."
        )
    if not isinstance(logs, BanditLogs):
        if type(logs).__name__ == "LogScan":
            raise ParameterError(
                "a guardrail decision evaluates each outcome on the same rows: read them with "
                "ope.read_logs (a scan is not supported)."
            )
        logs = read_logs(logs)
    alpha = 1.0 - level
    z = float(ndtri(level))
    options: dict[str, Any] = {"estimators": (est,), "confidence_level": level}
    if weight_column is not None:
        options["weight_column"] = weight_column
    records = []
    notes: list[str] = []
    said: dict[str, type[Warning]] = {}  # the evaluations' warnings, once each
    # every outcome on the same weights: one pass of the moment kernel (without sampling weights)
    found = outcome_evaluations(
        logs,
        EvaluationPlan.build(policies, **options),
        names,
        ["primary", *["guardrails"] * len(rails)],
    )
    for k, (rail, (ev, caught)) in enumerate(zip([first, *rails], found)):  # over outcomes
        for w in caught:
            if issubclass(w.category, OPEWarning):
                text = f"{rail.outcome}: {w.message}"
                if text not in said:
                    said[text] = w.category
            else:  # not ope's: passed on as it came
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        comps = ev.comparisons()
        comps = comps[comps["estimator"] == est]
        diff = comps["difference"].to_numpy(dtype=np.float64)
        se = comps["std_error"].to_numpy(dtype=np.float64)
        p = rail._p_values(diff, se, primary=k == 0)
        for row, p_k in zip(comps.itertuples(), p):
            records.append(
                {
                    "policy": row.policy,
                    "outcome": rail.outcome,
                    "role": "primary" if k == 0 else "guardrail",
                    "claim": rail._claim(k == 0),
                    "value": ev.estimates[(row.policy, est)].value,
                    "logging_value": ev.logging.value,
                    "difference": row.difference,
                    "std_error": row.std_error,
                    "ci_low": row.ci_low,
                    "ci_high": row.ci_high,
                    "p_value": float(p_k),
                    # the one-sided (1 - alpha) confidence bound the claim is read from
                    "bound": row.difference
                    + (z if rail.direction == "lower" else -z) * row.std_error,
                }
            )
        notes += [f"{rail.outcome}: {n}" for n in ev.notes]
    for text, category in said.items():  # each evaluation's warning, once
        warnings.warn(text, category, stacklevel=2)
    claims = pd.DataFrame.from_records(records)
    order = {p: i for i, p in enumerate(dict.fromkeys(claims["policy"]))}
    claims = claims.sort_values("policy", key=lambda c: c.map(order), kind="stable")
    claims = claims.reset_index(drop=True)
    claims["shown"] = claims["p_value"] <= alpha
    claims["holm_p_value"] = claims.groupby("policy", sort=False)["p_value"].transform(
        lambda s: adjust_p_values(s.to_numpy(), correction="holm")
    )
    joint = claims.groupby("policy", sort=False)["p_value"].max()
    adjusted = (
        adjust_p_values(joint.to_numpy(), correction="holm") if how == "holm" else joint.to_numpy()
    )
    failed = claims[~claims["shown"]].groupby("policy", sort=False)["outcome"].agg(", ".join)
    decisions = pd.DataFrame(
        {
            "policy": joint.index,
            "approve": adjusted <= alpha,
            "p_value": joint.to_numpy(),
            "adjusted_p_value": adjusted,
            "failed": [failed.get(p, "") for p in joint.index],
        }
    )
    order = decisions.sort_values("adjusted_p_value", kind="stable")
    approved = order.loc[order["approve"], "policy"].tolist()
    return GuardrailDecision(
        primary=first,
        guardrails=tuple(rails),
        estimator=est,
        confidence_level=level,
        correction=how,
        n=logs.n,
        approved=approved,
        _claims=claims,
        _decisions=decisions.reset_index(drop=True),
        notes=tuple(dict.fromkeys([*notes, *said])),
    )


def _guardrails(value: Any) -> list[Guardrail]:
    if isinstance(value, Mapping):
        out = []
        for name, spec in value.items():
            if isinstance(spec, str):
                spec = (spec, 0.0)
            if not isinstance(spec, Sequence) or len(spec) != 2:
                raise ParameterError(
                    f"`guardrails`[{name!r}] must be (direction, margin), e.g. ('lower', 50.0); "
                    f"got {spec!r}."
                )
            try:
                out.append(Guardrail(name, spec[0], spec[1]))
            except ParameterError as exc:
                raise ParameterError(f"`guardrails`[{name!r}]: {exc}") from None
        return out
    if isinstance(value, (str, Guardrail)):
        value = [value]
    if not isinstance(value, Sequence):
        raise ParameterError(
            "`guardrails` must be a list such as ['latency_ms:lower:50'] or a mapping; got "
            f"{type(value).__name__}."
        )
    return [g if isinstance(g, Guardrail) else parse_guardrail(g) for g in value]
