r"""Which estimator to trust: a cross-validated choice among the estimators that apply.

``ope.evaluate(logs, estimators="auto")`` (``ope evaluate --estimator auto``) evaluates every
candidate estimator that applies to the logs and, per candidate policy, picks the one with the
smallest estimated mean squared error by off-policy cross-validation (OCV; Cief, Kveton &
Kompan, AAAI 2025):

1. Split the rows at random into a training share (:data:`AUTO_TRAIN_SHARE`) and the rest.
2. On the training rows, every candidate estimator :math:`h` gives :math:`\hat V_h`; on the
   other rows an unbiased *validator* (IPS, or DR with ``validator="dr"``) gives
   :math:`\hat V_{val}`. The validator is independent of the training rows and unbiased under
   correct propensities, so :math:`\mathbb E(\hat V_h - \hat V_{val})^2 =
   \mathrm{MSE}(\hat V_h) + \mathrm{Var}(\hat V_{val})`: the second term is the same for every
   :math:`h`, and the ranking is that of the estimators' mean squared errors on the training
   size.
3. Repeat ``n_splits`` times (:data:`AUTO_SPLITS`) and score each estimator by the mean of its
   squared errors :math:`m_h` and their standard error :math:`s_h`.
4. Choose the estimator with the smallest :math:`m_h + s_h` (the one-standard-error rule of the
   OCV reference code): an estimator that wins only on a few splits is not preferred to a
   steadier one.

The chosen estimator's value and interval are then those of the full evaluation, on every row
(the table still shows every estimator). The uncertainty of the choice is in
:meth:`EstimatorChoice.table`: each estimator's score, its standard error, and whether it is
within one standard error of the chosen one (``close``: the logs cannot tell those apart).

Differences from the OCV paper, on purpose: every split is shared by all candidate estimators
(one reward-model fit serves the whole DR family on each split, and the comparisons are
paired), with a fixed training share instead of the paper's per-estimator
:math:`\mathrm{Var}_h/(\mathrm{Var}_h + \mathrm{Var}_{val})`. The regret of the choice against
the oracle's (exact truth) on four designs is in ``benchmarks/estimator_selection.py`` and
the guide (docs/guide/estimator-selection.md).

Candidates (:func:`auto_candidates`): IPS and SNIPS always; DR and SNDR when the candidates'
whole distributions are available and the reward model has features (context columns or action
features; DSJSON imported without features has none); clipped IPS, Switch-DR and DRos when their
setting (``max_weight``, ``tau``, ``shrinkage``) is given: one number, one per candidate, or a
tuning rule's name (``"slope"``, ``"mse"``: tuned per candidate on every row first, by
:func:`ope.tune_setting`). Not by default: in ``benchmarks/estimator_selection.py`` adding
clipped IPS at its SLOPE-tuned level made the choice worse on heavy-tailed weights (RMSE
0.0931 against 0.0765 without it), where SLOPE's levels (2 to 10) are visibly biased. DM is not a candidate: its interval
holds the reward model fixed, and a validator cannot see a bias the model shares with it.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

import numpy as np
import pandas as pd

from ope._result import Result, ResultParts
from ope.evaluation._driver import model_estimators_apply
from ope.evaluation.plan import evaluate as evaluate_plain
from ope.evaluation.tuning import (
    SETTING_ESTIMATOR,
    SettingChoice,
    evaluate_with_settings,
    varies_per_policy,
    rule_settings,
    seed_of,
    settings_for,
    tune_rule_settings,
)
from ope._validation import check_choice, check_forwarded, check_positive_int, check_real
from ope.exceptions import OPEWarning, ParameterError

__all__ = [
    "evaluate",
    "evaluate_auto",
    "AUTO_SPLITS",
    "AUTO_TRAIN_SHARE",
    "AUTO_VALIDATORS",
    "EstimatorChoice",
    "auto_candidates",
    "select_estimators",
]

#: Random splits of the rows (K of OCV; its paper uses 10).
AUTO_SPLITS: Final = 10

#: The most splits one choice runs (each is two evaluations): more adds time, not information.
MAX_SPLITS: Final = 100

#: Share of the rows the candidate estimators see on each split; the validator sees the rest.
AUTO_TRAIN_SHARE: Final = 0.5

#: The unbiased validators (under correct propensities).
AUTO_VALIDATORS: Final = ("ips", "dr")

#: The rule, in words (results and the report say it).
RULE: Final = (
    "off-policy cross-validation: the smallest mean + one standard error of the squared "
    "difference between the estimate on a random half of the rows and an unbiased validator on "
    "the other half, over the splits"
)


@dataclass(frozen=True, eq=False)
class EstimatorChoice(Result):
    """The cross-validated choice of estimator per candidate policy (see
    :mod:`ope.evaluation.auto`).

    Attributes
    ----------
    chosen : dict of str to str
        Policy -> the chosen estimator.
    candidates : tuple of str
        The estimators compared.
    validator : str
    n_splits : int
    train_share : float
    n : int
        Rows of the logs.
    seed : int
        The seed of the splits (``rng=seed`` reproduces them).
    rule : str
    tuning : tuple of SettingChoice
        The settings chosen from the logs before the comparison (with ``max_weight="slope"``
        or ``"mse"``, and likewise ``tau``, ``shrinkage``: per candidate, by that rule); empty
        when none was.
    """

    chosen: dict[str, str]
    candidates: tuple[str, ...]
    validator: str
    n_splits: int
    train_share: float
    n: int
    seed: int
    rule: str = RULE
    #: the settings tuned before the choice (``estimators="auto", max_weight="slope"``: clipped
    #: IPS's clip level per candidate, by the rule named), each a SettingChoice
    tuning: tuple[SettingChoice, ...] = ()
    _scores: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)

    def table(self) -> pd.DataFrame:
        """One row per policy and candidate estimator: ``score`` (mean squared difference from
        the validator), ``score_se`` (its standard error over the splits), ``criterion``
        (score + score_se, the rule's number), ``chosen`` and ``close`` (within one standard
        error of the chosen estimator's score)."""
        return self._scores.copy()

    def estimator_for(self, policy: str) -> str:
        """The chosen estimator of one candidate policy."""
        if isinstance(policy, str) and policy in self.chosen:
            return self.chosen[policy]
        raise ParameterError(
            f"`policy` must name a candidate of this choice, one of {list(self.chosen)}; got "
            f"{policy!r}."
        )

    def reason(self, policy: str) -> str:
        """Why this estimator, in one sentence."""
        chosen = self.estimator_for(policy)
        rows = self._scores[self._scores["policy"] == policy]
        close = [e for e, c in zip(rows["estimator"], rows["close"]) if c and e != chosen]
        tie = (
            f"; {', '.join(close)} {'is' if len(close) == 1 else 'are'} within one standard "
            "error (the logs barely tell them apart)"
            if close
            else ""
        )
        tuned = [c for c in self.tuning if c.estimator == chosen and policy in c.chosen]
        setting = (
            f" ({tuned[0].setting} {tuned[0].chosen[policy]:g}, chosen by "
            f"{tuned[0].rule.split(':')[0]} over {_grid_text(tuned[0].grid)})"
            if tuned
            else ""
        )
        return (
            f"{chosen}{setting} had the smallest cross-validated error among "
            f"{', '.join(self.candidates)} ({self.n_splits} splits, validator "
            f"{self.validator}){tie}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "chosen": dict(self.chosen),
            "candidates": list(self.candidates),
            "validator": self.validator,
            "n_splits": self.n_splits,
            "train_share": self.train_share,
            "n": self.n,
            "seed": self.seed,
            "rule": self.rule,
            "scores": self._scores.to_dict(orient="records"),
            "tuning": [c.to_dict() for c in self.tuning],
        }

    def _parts(self) -> ResultParts:
        return ResultParts(
            title="Estimator choice (off-policy cross-validation)",
            fields=[
                ("rule", self.rule),
                ("validator", self.validator),
                ("splits", f"{self.n_splits} (train share {self.train_share:g})"),
                ("seed", self.seed),
                *(
                    (
                        f"{c.setting} of {c.estimator}",
                        ", ".join(f"{p}: {v:g}" for p, v in c.chosen.items())
                        + f" ({c.rule.split(':')[0]} over {_grid_text(c.grid)})",
                    )
                    for c in self.tuning
                ),
            ],
            table=self._scores,
            notes=[f"{p}: {self.reason(p)}" for p in self.chosen],
            precision={},
        )


def _grid_text(grid: Sequence[float]) -> str:
    return f"{len(grid)} values {grid[0]:g} to {grid[-1]:g}" if len(grid) > 1 else f"{grid[0]:g}"


def auto_candidates(
    logs: Any,
    policies: Any = None,
    *,
    max_weight: float | None = None,
    tau: float | None = None,
    shrinkage: float | None = None,
    context_columns: Sequence[str] | None = None,
    action_features: Any = None,
    weight_column: str | None = None,
) -> tuple[str, ...]:
    """The estimators ``estimators="auto"`` compares on these logs (see the module)."""
    names = ["ips", "snips"]
    if max_weight is not None:
        names.append("clipped_ips")
    if model_estimators_apply(
        logs,
        policies,
        context_columns=context_columns,
        action_features=action_features,
        weight_column=weight_column,
    ):
        names += ["dr", "sndr"]
        if tau is not None:
            names.append("switch_dr")
        if shrinkage is not None:
            names.append("dros")
    return tuple(names)


def _subset(logs: Any, rows: np.ndarray) -> Any:
    from ope.logs import BanditLogs

    return BanditLogs(
        logs.table.take(rows),
        logs.report,
        unit_roundoff=logs.unit_roundoff,
        action_features=logs.action_features,
        n_actions=logs.n_actions,
    )


def select_estimators(
    logs: Any,
    policies: Any = None,
    *,
    candidates: Sequence[str] | None = None,
    validator: str = "auto",
    n_splits: int = AUTO_SPLITS,
    train_share: float = AUTO_TRAIN_SHARE,
    rng: int | np.random.Generator | None = None,
    **evaluate_options: Any,
) -> EstimatorChoice:
    """Choose an estimator per candidate policy by off-policy cross-validation.

    Parameters
    ----------
    logs : BanditLogs or anything ``ope.read_logs`` accepts
    policies : optional
        As in :func:`ope.evaluate`.
    candidates : sequence of str, optional
        The estimators to compare (default :func:`auto_candidates`).
    validator : {"auto", "ips", "dr"}, default "auto"
        The unbiased estimator on the held-out rows; "auto": DR when the candidates' whole
        distributions are available (as in the OCV paper: its variance is lower, and the
        choice is then far less noisy on heavy-tailed weights), else IPS.
    n_splits : int, default AUTO_SPLITS
    train_share : float, default AUTO_TRAIN_SHARE
        Share of the rows (in (0, 1)) the candidates see on each split.
    rng : int, Generator or None
        Seed of the splits (None draws one, recorded in the result).
    **evaluate_options
        Passed to :func:`ope.evaluate` on every split (``reward_range``, ``max_weight``,
        ``tau``, ``shrinkage``, ``reward_model``, ``context_columns``, ``weight_column``, ...).

    Returns
    -------
    EstimatorChoice
    """
    from ope.io import read_logs
    from ope.logs import BanditLogs

    evaluate = evaluate_with_settings  # settings may be given per candidate
    check_forwarded(evaluate_options, select_estimators, evaluate_plain, target_name="ope.evaluate")
    validator = check_choice(validator, "validator", ("auto", *AUTO_VALIDATORS))
    n_splits = check_positive_int(n_splits, "n_splits", minimum=2, example="n_splits=10")
    if n_splits > MAX_SPLITS:
        raise ParameterError(
            f"`n_splits`={n_splits:,} is more than {MAX_SPLITS} splits (each is two "
            "evaluations); 10 is the usual choice."
        )
    share = check_real(train_share, "train_share", finite=True)
    if not 0.0 < share < 1.0:
        raise ParameterError(f"`train_share` must be in (0, 1), e.g. 0.5; got {train_share!r}.")
    if not isinstance(logs, BanditLogs):
        logs = read_logs(logs)
    if candidates is None:
        candidates = auto_candidates(
            logs,
            policies,
            max_weight=evaluate_options.get("max_weight"),
            tau=evaluate_options.get("tau"),
            shrinkage=evaluate_options.get("shrinkage"),
            context_columns=evaluate_options.get("context_columns"),
            action_features=evaluate_options.get("action_features"),
            weight_column=evaluate_options.get("weight_column"),
        )
    candidates = _check_candidates(candidates)
    # a setting (one number or per candidate) of an estimator that is not compared is left out
    evaluate_options = settings_for(evaluate_options, candidates)
    if validator == "auto":
        model = model_estimators_apply(
            logs,
            policies,
            context_columns=evaluate_options.get("context_columns"),
            action_features=evaluate_options.get("action_features"),
            weight_column=evaluate_options.get("weight_column"),
        )
        validator = "dr" if model else "ips"
    seed = seed_of(rng)
    g = np.random.default_rng(seed)
    n = logs.n
    n_train = int(round(share * n))
    if n_train < 2 or n - n_train < 2:
        raise ParameterError(
            f"`train_share`={share:g} leaves fewer than 2 rows on one side of {n:,} rows; "
            "cross-validation needs more rows (or a share nearer 0.5)."
        )
    options = {k: v for k, v in evaluate_options.items() if k not in ("ci", "by", "n_resamples")}
    # the validator (IPS or DR) takes none of the candidates' settings (clip level, tau,
    # shrinkage: given as one number or per candidate)
    validator_options = settings_for(options, ())
    errors: dict[tuple[str, str], list[float]] = {}
    names: list[str] = []
    for k in range(n_splits):  # a loop over the splits (each one evaluate per side)
        order = g.permutation(n)
        train, valid = np.sort(order[:n_train]), np.sort(order[n_train:])
        with warnings.catch_warnings():  # the splits' warnings repeat the full run's
            warnings.simplefilter("ignore", OPEWarning)
            ev_train = evaluate(
                _subset(logs, train), policies, estimators=candidates, rng=seed + k, **options
            )
            ev_valid = evaluate(
                _subset(logs, valid),
                policies,
                estimators=(validator,),
                rng=seed + k,
                **validator_options,
            )
        names = list(ev_train.policies)
        for p in names:  # a loop over candidate policies and estimators (no rows)
            reference = ev_valid.estimates[(p, validator)].value
            for e in candidates:
                diff = ev_train.estimates[(p, e)].value - reference
                errors.setdefault((p, e), []).append(diff * diff)
    records: list[dict[str, Any]] = []
    chosen: dict[str, str] = {}
    for p in names:  # a loop over candidate policies
        stats = {}
        for e in candidates:
            v = np.asarray(errors[(p, e)])
            ok = bool(np.isfinite(v).all())
            stats[e] = (
                float(v.mean()) if ok else math.inf,
                float(v.std(ddof=1) / math.sqrt(v.size)) if ok else math.inf,
            )
        best = min(candidates, key=lambda e: stats[e][0] + stats[e][1])
        chosen[p] = best
        top = stats[best][0] + stats[best][1]
        records += [
            {
                "policy": p,
                "estimator": e,
                "score": m,
                "score_se": se,
                "criterion": m + se,
                "chosen": e == best,
                "close": bool(m - se <= top),
            }
            for e, (m, se) in stats.items()
        ]
    return EstimatorChoice(
        chosen=chosen,
        candidates=candidates,
        validator=validator,
        n_splits=n_splits,
        train_share=share,
        n=n,
        seed=seed,
        _scores=pd.DataFrame.from_records(records),
    )


def _check_candidates(candidates: Any) -> tuple[str, ...]:
    """Estimator names (no objects: each split builds its own), known, once each."""
    from ope.evaluation._settings import ESTIMATORS

    if isinstance(candidates, (str, bytes)) or not isinstance(candidates, Sequence):
        raise ParameterError(
            "`candidates` must be a sequence of estimator names, e.g. ('ips', 'snips', 'dr'); "
            f"got {type(candidates).__name__}."
        )
    names = tuple(candidates)
    bad = [c for c in names if not (isinstance(c, str) and c.lower() in ESTIMATORS)]
    if bad or not names or len(set(names)) != len(names):
        raise ParameterError(
            "`candidates` must name distinct known estimators, at least one, among "
            f"{', '.join(ESTIMATORS)}; got {list(names)!r}."
        )
    return tuple(c.lower() for c in names)


def evaluate_auto(logs: Any, policies: Any, options: Mapping[str, Any]) -> Any:
    """``evaluate(..., estimators="auto")``: the choice, then every candidate on every row, with
    the choice in :attr:`ope.Evaluation.selection` and a note per policy."""
    from ope.io import read_logs
    from ope.logs import BanditLogs

    if not isinstance(logs, BanditLogs):
        if type(logs).__name__ == "LogScan":
            raise ParameterError(
                "estimators='auto' cross-validates on random splits of the rows: it needs the "
                "rows in memory, not a scan. Read them with ope.read_logs, or name the "
                "estimators."
            )
        logs = read_logs(logs)
    options = dict(options)
    seed = seed_of(options.pop("rng", None))
    rule_settings(options)  # a setting given as text names a rule, checked before any pass
    # the settings of estimators that do not apply to these logs are left out (noted)
    applies = auto_candidates(
        logs,
        policies,
        max_weight=options.get("max_weight"),
        tau=options.get("tau"),
        shrinkage=options.get("shrinkage"),
        context_columns=options.get("context_columns"),
        action_features=options.get("action_features"),
        weight_column=options.get("weight_column"),
    )
    unused = [
        k
        for k in SETTING_ESTIMATOR
        if options.get(k) is not None and SETTING_ESTIMATOR[k] not in applies
    ]
    for k in unused:  # e.g. tau without the candidates' distributions (no DR family)
        del options[k]
    # settings given as a rule's name (max_weight="slope"): tuned per candidate on every row
    options, tuned = tune_rule_settings(logs, policies, options, seed)
    choice = select_estimators(logs, policies, rng=seed, **options)
    choice = replace(choice, tuning=tuple(tuned))
    ev = evaluate_with_settings(logs, policies, estimators=choice.candidates, rng=seed, **options)
    notes = tuple(f"{p}: estimator chosen: {choice.reason(p)}" for p in choice.chosen)
    skipped = tuple(
        f"`{k}` was given but {SETTING_ESTIMATOR[k]} does not apply to these logs (it needs each "
        "candidate's whole distribution): it was not compared"
        for k in unused
    )
    return replace(ev, selection=choice, notes=(*ev.notes, *skipped, *notes))


@functools.wraps(evaluate_plain)
def evaluate(logs: Any, policies: Any = None, **options: Any) -> Any:
    # ope.evaluate: the plan's evaluation, or with estimators="auto" the cross-validated choice
    if isinstance(options.get("estimators"), str) and options["estimators"] == "auto":
        del options["estimators"]
        return evaluate_auto(logs, policies, options)
    if varies_per_policy(options):  # settings or the embedding per candidate
        return evaluate_with_settings(logs, policies, **options)
    return evaluate_plain(logs, policies, **options)
