r"""An estimator's own setting chosen from the logs: SLOPE over a stated grid.

Clipped IPS's clip level, Switch-DR's :math:`\tau` and DRos's shrinkage :math:`\lambda` trade
bias for variance: a small clip level has a small variance and a bias that grows as the level
falls. SLOPE (Su, Srinath & Krishnamurthy, ICML 2020), in the SLOPE++ form of Tucker & Lee
(2021) that Open Bandit Pipeline implements, picks the setting by Lepski's principle without an
estimate of the bias:

1. For each setting :math:`g` of the grid: the estimate :math:`\theta_g` and the width
   :math:`c_g = t_{1-\delta,\,n-1}\,\hat\sigma_g/\sqrt n` of its one-sided Student-t bound
   (:math:`\hat\sigma_g` the standard deviation of its per-row terms).
2. Visit the settings from the widest to the narrowest :math:`c_g` (ties: the later grid value
   first). Accept a setting while :math:`|\theta_j - \theta_g| \le c_g + C\,c_j` for every
   accepted :math:`j`, with :math:`C = \sqrt6 - 1`.
3. The choice is the last setting accepted before the first refusal (the narrowest one when
   none is refused).

The widest interval belongs to the least biased setting; a narrower one is accepted only while
its estimate stays within the intervals of every wider one, i.e. while its extra bias is not
yet visible above the noise. The choice is made per candidate policy (each has its own
bias-variance curve). ``rule="mse"`` chooses instead the smallest bound on the mean squared
error, ``se^2 + (|b| + t_{1-delta} se(b))^2`` with ``b`` the paired difference between the
estimate and the unmodified, unbiased one (:data:`MSE_REFERENCE`) on the same rows. :func:`slope_index` is the rule on arrays; :func:`tune_setting` runs it
on logs, one evaluation per grid value. Open Bandit Pipeline's ``*Tuning(tuning_method=
"slope")`` choose the same value on the same arrays and grid (``tests/test_tuning.py``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pandas as pd

from ope._result import Result, ResultParts
from ope._validation import as_float_array, check_choice, check_real
from ope.exceptions import OPEWarning, ParameterError, ValidationError
from ope.evaluation.plan import evaluate as evaluate_plain

__all__ = [
    "SLOPE_C",
    "SLOPE_DELTA",
    "TUNABLE",
    "DEFAULT_GRIDS",
    "MSE_REFERENCE",
    "RULES",
    "SETTING_ESTIMATOR",
    "SettingChoice",
    "evaluate_with_settings",
    "per_policy_settings",
    "rule_settings",
    "settings_for",
    "tune_rule_settings",
    "seed_of",
    "slope_index",
    "tune_setting",
]

#: The constant of SLOPE++'s acceptance test (Tucker & Lee 2021).
SLOPE_C: Final = math.sqrt(6.0) - 1.0

#: One-sided level of the widths: t_{1 - delta} (Open Bandit Pipeline's default).
SLOPE_DELTA: Final = 0.1

#: Estimator -> the name of its setting (the keyword of ``ope.evaluate``).
TUNABLE: Final = {"clipped_ips": "max_weight", "switch_dr": "tau", "dros": "shrinkage"}

#: The keyword of ``ope.evaluate`` -> the estimator whose setting it is (:data:`TUNABLE`
#: inverted): the settings that may be given per candidate policy.
SETTING_ESTIMATOR: Final = {setting: estimator for estimator, setting in TUNABLE.items()}

#: The grids used unless others are given: powers of about 2 over four decades.
DEFAULT_GRIDS: Final = {
    "clipped_ips": (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0),
    "switch_dr": (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0),
    "dros": (0.1, 1.0, 10.0, 100.0, 1000.0, 10000.0),
}

_GRID_MAX: Final = 200

#: The unmodified (unbiased) estimator whose paired difference estimates a setting's bias, for
#: ``tune_setting(..., rule="mse")``.
MSE_REFERENCE: Final = {"clipped_ips": "ips", "switch_dr": "dr", "dros": "dr"}

#: The rules of :func:`tune_setting`, as stated in the result.
RULES: Final = {
    "slope": "SLOPE++ (Tucker & Lee 2021): Lepski's principle over the grid",
    "mse": "smallest MSE bound: se^2 + (|bias| + t_(1-delta) se(bias))^2, the bias estimated by "
    "the paired difference with the unmodified estimator (IPS, or DR with the same reward model)",
}


def slope_index(values: npt.ArrayLike, widths: npt.ArrayLike) -> int:
    """The index SLOPE++ chooses among settings with estimates ``values`` and one-sided widths
    ``widths`` (same length, in grid order; see the module).

    Examples
    --------
    >>> slope_index([0.50, 0.52, 0.70], [0.10, 0.05, 0.01])  # the last is visibly biased
    1
    >>> slope_index([0.50, 0.51, 0.52], [0.10, 0.05, 0.02])
    2
    """
    theta = as_float_array(values, "values", ndim=(1,))
    cnf = as_float_array(widths, "widths", ndim=(1,))
    if theta.shape != cnf.shape or theta.size == 0:
        raise ValidationError(
            f"`values` and `widths` must have the same non-zero length; got {theta.size} and "
            f"{cnf.size}."
        )
    if not (np.isfinite(theta).all() and np.isfinite(cnf).all() and (cnf >= 0).all()):
        raise ValidationError("`values` must be finite and `widths` finite and >= 0.")
    # widest first; ties: the later grid value first (numpy's sort of the reversed order)
    order = np.lexsort((-np.arange(cnf.size), -cnf))
    accepted: list[int] = []
    for i in order:  # a loop over the grid (a few dozen values at most)
        if accepted and not bool(
            np.all(np.abs(theta[accepted] - theta[i]) <= cnf[i] + SLOPE_C * cnf[accepted])
        ):
            return int(accepted[-1])
        accepted.append(int(i))
    return int(accepted[-1])


@dataclass(frozen=True, eq=False)
class SettingChoice(Result):
    """The setting chosen per candidate policy (:func:`tune_setting`), by SLOPE or the MSE
    bound.

    Attributes
    ----------
    estimator : str
    setting : str
        The keyword of :func:`ope.evaluate` it sets (``max_weight``, ``tau``, ``shrinkage``).
    grid : tuple of float
    chosen : dict of str to float
        Policy -> the chosen value.
    delta : float
    n : int
    rule : str
    """

    estimator: str
    setting: str
    grid: tuple[float, ...]
    chosen: dict[str, float]
    delta: float
    n: int
    rule: str = "SLOPE++ (Tucker & Lee 2021): Lepski's principle over the grid"
    _table: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)

    def table(self) -> pd.DataFrame:
        """One row per policy and grid value: ``value``, ``std_error``, ``width`` (the t
        bound's), ``chosen``; with ``rule="mse"`` also ``bias`` (the paired difference with the
        reference estimator), ``bias_bound`` and ``mse_bound``."""
        return self._table.copy()

    def value_for(self, policy: str) -> float:
        """The chosen setting of one candidate policy."""
        if isinstance(policy, str) and policy in self.chosen:
            return self.chosen[policy]
        raise ParameterError(
            f"`policy` must name a candidate of this choice, one of {list(self.chosen)}; got "
            f"{policy!r}."
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "estimator": self.estimator,
            "setting": self.setting,
            "grid": list(self.grid),
            "chosen": dict(self.chosen),
            "delta": self.delta,
            "n": self.n,
            "rule": self.rule,
            "table": self._table.to_dict(orient="records"),
        }

    def _parts(self) -> ResultParts:
        return ResultParts(
            title=f"{self.setting} of {self.estimator} by {self.rule.split(':')[0]}",
            fields=[
                ("rule", self.rule),
                ("grid", ", ".join(f"{g:g}" for g in self.grid)),
                ("delta", self.delta),
                ("chosen", ", ".join(f"{p}: {v:g}" for p, v in self.chosen.items())),
            ],
            table=self._table,
            precision={},
        )


def _grid(grid: Any, estimator: str) -> tuple[float, ...]:
    if grid is None:
        return tuple(DEFAULT_GRIDS[estimator])
    if isinstance(grid, (str, bytes)) or not isinstance(grid, Sequence | np.ndarray):
        raise ParameterError(
            f"`grid` must be a sequence of positive numbers, e.g. {list(DEFAULT_GRIDS[estimator])}"
            f"; got {type(grid).__name__}."
        )
    values = []
    for g in grid:
        v = check_real(g, "grid", finite=True)
        if not v > 0:
            raise ParameterError(f"`grid` must hold positive numbers; got {g!r}.")
        values.append(v)
    if not values or len(values) > _GRID_MAX or len(set(values)) != len(values):
        raise ParameterError(
            f"`grid` must hold 1 to {_GRID_MAX} distinct values; got {len(values)} "
            f"({len(set(values))} distinct)."
        )
    return tuple(sorted(values))


def tune_setting(
    logs: Any,
    estimator: str,
    policies: Any = None,
    *,
    grid: Sequence[float] | None = None,
    delta: float = SLOPE_DELTA,
    rng: int | np.random.Generator | None = 0,
    rule: str = "slope",
    **evaluate_options: Any,
) -> SettingChoice:
    """Choose an estimator's setting per candidate policy by SLOPE or a bound on the MSE (see
    the module).

    Parameters
    ----------
    logs : BanditLogs or anything ``ope.read_logs`` accepts
    estimator : {"clipped_ips", "switch_dr", "dros"}
    policies : optional
        As in :func:`ope.evaluate`.
    grid : sequence of float, optional
        The values to choose from (default :data:`DEFAULT_GRIDS`).
    delta : float, default SLOPE_DELTA
        One-sided level of the widths, in (0, 0.5).
    rng : int, Generator or None, default 0
        Seed of the reward model's cross-fitting (the same on every grid value, so the DR
        family's settings are compared on one model).
    rule : {"slope", "mse"}, default "slope"
        ``"slope"``: SLOPE++ (no bias estimate). ``"mse"``: the smallest bound on the mean
        squared error, ``se_g^2 + (|theta_g - theta_ref| + t_{1-delta} se(theta_g -
        theta_ref))^2``, the bias read from the paired difference with the unmodified, unbiased
        estimator on the same rows (:data:`MSE_REFERENCE`: IPS for clipped IPS, DR with the
        same reward model for Switch-DR and DRos) and bounded above at one-sided level
        ``delta``. Open Bandit Pipeline's ``tuning_method="mse"`` has the same form with an
        empirical-Bernstein deviation instead of the t one.
    **evaluate_options
        Passed to :func:`ope.evaluate` (``reward_model``, ``context_columns``, ...).

    Returns
    -------
    SettingChoice
    """
    import warnings

    from ope.io import read_logs
    from ope.logs import BanditLogs

    estimator = check_choice(estimator, "estimator", tuple(TUNABLE))
    how = check_choice(rule, "rule", tuple(RULES))
    values = _grid(grid, estimator)
    d = check_real(delta, "delta", finite=True)
    if not 0.0 < d < 0.5:
        raise ParameterError(f"`delta` must be in (0, 0.5), e.g. 0.1; got {delta!r}.")
    if not isinstance(logs, BanditLogs):
        logs = read_logs(logs)
    setting = TUNABLE[estimator]
    seed = seed_of(rng)
    # the grid is compared on normal standard errors: no interval method, segments, or other
    # estimators' settings (one number or per candidate)
    dropped = (
        "ci",
        "by",
        "n_resamples",
        "ci_fallback",
        "weight_bound",
        "estimators",
        *SETTING_ESTIMATOR,
    )
    options = {k: v for k, v in evaluate_options.items() if k not in dropped}
    from scipy import stats

    from ope.results import compare

    reference: dict[str, Any] = {}
    if how == "mse":  # the unmodified estimator, once: its rows pair with every grid value
        ref = MSE_REFERENCE[estimator]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", OPEWarning)
            ev_ref = evaluate_plain(logs, policies, estimators=(ref,), rng=seed, **options)
        reference = {p: ev_ref.estimates[(p, ref)] for p in ev_ref.policies}
    records = []
    for g in values:  # a loop over the grid: one evaluation per value
        with warnings.catch_warnings():  # the grid's warnings repeat the chosen run's
            warnings.simplefilter("ignore", OPEWarning)
            kwargs: dict[str, Any] = {**options, setting: g}
            ev = evaluate_plain(logs, policies, estimators=(estimator,), rng=seed, **kwargs)
            for p in ev.policies:
                est = ev.estimates[(p, estimator)]
                record = {
                    "policy": p,
                    setting: g,
                    "value": est.value,
                    "std_error": est.std_error,
                    "n": est.n,
                }
                if how == "mse":
                    diff = compare(est, reference[p])
                    t = stats.t.ppf(1.0 - d, est.n - 1)
                    bound = abs(diff.value) + t * diff.std_error
                    record.update(
                        bias=diff.value,
                        bias_bound=bound,
                        mse_bound=est.std_error**2 + bound**2,
                    )
                records.append(record)
    table = pd.DataFrame.from_records(records)
    chosen: dict[str, float] = {}
    table["width"] = np.nan
    for p in dict.fromkeys(table["policy"]):  # a loop over candidate policies
        mine = table[table["policy"] == p]
        n = int(mine["n"].iloc[0])
        width = stats.t.ppf(1.0 - d, n - 1) * mine["std_error"].to_numpy()
        table.loc[mine.index, "width"] = width
        if how == "slope":
            pick = slope_index(mine["value"].to_numpy(), width)
        else:  # the smallest MSE bound (the first, i.e. the smallest setting, on a tie)
            pick = int(np.argmin(mine["mse_bound"].to_numpy()))
        chosen[p] = float(mine[setting].iloc[pick])
    table["chosen"] = [chosen[p] == v for p, v in zip(table["policy"], table[setting])]
    return SettingChoice(
        estimator=estimator,
        setting=setting,
        grid=values,
        chosen=chosen,
        delta=d,
        n=logs.n,
        rule=RULES[how],
        _table=table.drop(columns=["n"]),
    )


def seed_of(rng: Any) -> int:
    """A seed from ``rng`` (an int is kept; a Generator or None draws one)."""
    from ope._validation import check_rng

    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool) and rng >= 0:
        return int(rng)
    return int(check_rng(rng).integers(0, 2**31 - 1))


def per_policy_settings(options: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """The settings among ``options`` (``max_weight``, ``tau``, ``shrinkage``) given per
    candidate policy: a mapping of policy name to value, or the :class:`SettingChoice` of that
    setting (its ``chosen``). Settings given as one number are left out.

    Raises
    ------
    ope.ParameterError
        A :class:`SettingChoice` of another setting, or a mapping whose keys are not policy
        names (str).
    """
    out: dict[str, dict[str, float]] = {}
    for key in SETTING_ESTIMATOR:
        value = options.get(key)
        if isinstance(value, SettingChoice):
            if value.setting != key:
                raise ParameterError(
                    f"`{key}` got the choice of {value.setting} (of {value.estimator}); pass "
                    f"it as {value.setting}=choice."
                )
            value = value.chosen
        if isinstance(value, Mapping):
            bad = [k for k in value if not isinstance(k, str)]
            if bad or not value:
                raise ParameterError(
                    f"`{key}` per policy must map candidate names (str) to values, e.g. "
                    f"{{'greedy': 20.0, 'soft': 50.0}}; got {dict(value)!r}."
                )
            checked = {}
            for name, v in value.items():
                number = check_real(v, f"{key}[{name!r}]", finite=True)
                if not number > 0:
                    raise ParameterError(f"`{key}[{name!r}]` must be a positive number; got {v!r}.")
                checked[name] = number
            out[key] = checked
    return out


def settings_for(options: Mapping[str, Any], estimators: Sequence[str]) -> dict[str, Any]:
    """``options`` without the settings (:data:`SETTING_ESTIMATOR`) of estimators not among
    ``estimators``: what a run of those estimators takes."""
    return {
        k: v
        for k, v in options.items()
        if k not in SETTING_ESTIMATOR or SETTING_ESTIMATOR[k] in estimators
    }


def rule_settings(options: Mapping[str, Any]) -> dict[str, str]:
    """The settings among ``options`` given as the name of a tuning rule (``max_weight="slope"``,
    ``tau="mse"``, ...: chosen per candidate from the logs by :func:`tune_setting`).

    Raises
    ------
    ope.ParameterError
        A setting given as text that is not a rule of :data:`RULES`.
    """
    out = {}
    for key in SETTING_ESTIMATOR:
        value = options.get(key)
        if isinstance(value, str):
            if value.lower() not in RULES:
                raise ParameterError(
                    f"`{key}` must be a positive number, one per candidate (a mapping or a "
                    f"SettingChoice), or a tuning rule among {', '.join(RULES)}; got {value!r}."
                )
            out[key] = value.lower()
    return out


def tune_rule_settings(
    logs: Any, policies: Any, options: Mapping[str, Any], seed: int
) -> tuple[dict[str, Any], list[SettingChoice]]:
    """``options`` with each setting given as a rule's name (:func:`rule_settings`) replaced by
    the :class:`SettingChoice` of :func:`tune_setting` on these logs (default grid, the
    evaluation's seed), and those choices."""
    rules = rule_settings(options)
    out = dict(options)
    choices = []
    for key, rule in rules.items():  # a loop over the settings (three at most)
        rest = {k: v for k, v in options.items() if k not in rules and k != "rng"}
        choice = tune_setting(logs, SETTING_ESTIMATOR[key], policies, rule=rule, rng=seed, **rest)
        out[key] = choice
        choices.append(choice)
    return out, choices


def evaluate_with_settings(logs: Any, policies: Any = None, **options: Any) -> Any:
    """``ope.evaluate`` with ``max_weight``, ``tau`` or ``shrinkage`` given per candidate
    policy (a mapping of policy name to value, or a :class:`SettingChoice`, e.g. from
    :func:`tune_setting`), or as a tuning rule (``"slope"``, ``"mse"``: chosen per candidate
    on these logs by :func:`tune_setting`, default grid, this evaluation's seed).

    The estimators without a per-policy setting are evaluated once; the one whose setting
    varies (clipped IPS, Switch-DR, DRos) once per distinct value, on every candidate, and each
    candidate keeps the estimate at its own value (all on the same rows, with one seed, so the
    reward model's folds are the same in every run). The values are in
    :attr:`ope.Evaluation.settings` and in the provenance. In-memory logs only.

    Raises
    ------
    ope.ParameterError
        The setting's estimator is not among ``estimators``, a candidate lacks a value or an
        unknown one has one, ``estimators`` holds an estimator object, or ``logs`` is a scan.
    """
    from dataclasses import replace as _replace

    from ope.results import Provenance
    from ope.io import read_logs
    from ope.logs import BanditLogs

    rules = rule_settings(options)
    per = per_policy_settings(options)
    if not per and not rules:
        return evaluate_plain(logs, policies, **options)
    if not isinstance(logs, BanditLogs):
        if type(logs).__name__ == "LogScan":
            raise ParameterError(
                f"`{next(iter({**per, **rules}))}` per policy needs the rows in memory (one "
                "evaluation per distinct value), not a scan: read them with ope.read_logs, or "
                "give one value."
            )
        logs = read_logs(logs)
    seed = seed_of(options.pop("rng", None))
    if rules:  # tuned on these rows first
        options, _ = tune_rule_settings(logs, policies, options, seed)
        per = per_policy_settings(options)
    tuning = tuple(v for v in options.values() if isinstance(v, SettingChoice))
    estimators = options.pop("estimators", ("ips", "snips", "dr"))
    if isinstance(estimators, str) or not isinstance(estimators, Sequence):
        estimators = (estimators,)
    if not estimators or not all(isinstance(e, str) for e in estimators):
        raise ParameterError(
            f"`{next(iter(per))}` per policy needs the estimators as a sequence of names, e.g. "
            f"('ips', 'clipped_ips') (each run builds its own with the policy's value); got "
            f"{list(estimators)!r}."
        )
    names = [e.lower() for e in estimators]
    if len(set(names)) != len(names):
        raise ParameterError(f"`estimators` lists an estimator twice: {names}.")
    varying = {SETTING_ESTIMATOR[key]: key for key in per}
    for est, key in varying.items():
        if est not in names:
            raise ParameterError(
                f"`{key}` is given per policy but {est} is not among the estimators "
                f"{names}: add it, or leave `{key}` out."
            )
    common = {k: v for k, v in options.items() if k not in per}
    plain = [e for e in names if e not in varying]
    # the estimators without a varying setting, once (or the first varying one, when none)
    first_est = next(iter(varying))
    first: dict[str, Any] = dict(common)
    if not plain:
        key0 = varying[first_est]
        first[key0] = next(iter(per[key0].values()))
    base = evaluate_plain(logs, policies, estimators=plain or [first_est], rng=seed, **first)
    candidates = list(base.policies)
    estimates = dict(base.estimates)
    segments = dict(base.segment_estimates)
    intervals = None if base.interval_values is None else dict(base.interval_values)
    # the runs' notes but the interval-method fallback ones: the spliced evaluation states
    # its own, for every estimator that fell back
    fallback = f"ci={base.ci_method!r} does not apply to "
    notes = [n for n in base.notes if not n.startswith(fallback)]
    model_columns = base.model_columns
    for est, key in varying.items():  # a loop over the varying settings (three at most)
        values = per[key]
        missing = [p for p in candidates if p not in values]
        unknown = [p for p in values if p not in candidates]
        if missing or unknown:
            raise ParameterError(
                f"`{key}` per policy must give one value for each candidate {candidates}; "
                + (f"missing {missing}" if missing else "")
                + ("; " if missing and unknown else "")
                + (f"not candidates: {unknown}" if unknown else "")
                + "."
            )
        groups: dict[float, list[str]] = {}
        for p in candidates:
            groups.setdefault(values[p], []).append(p)
        for value, members in groups.items():  # a loop over the distinct values
            # the other estimators' settings stay with the base run
            at_value: dict[str, Any] = {
                **settings_for(common, ()),
                key: value,
            }
            run = evaluate_plain(logs, policies, estimators=(est,), rng=seed, **at_value)
            mine = set(members)
            estimates.update({k: v for k, v in run.estimates.items() if k[0] in mine})
            segments.update({k: v for k, v in run.segment_estimates.items() if k[2] in mine})
            if intervals is not None and run.interval_values is not None:
                intervals.update(
                    {
                        k: v
                        for k, v in run.interval_values.items()
                        if k != "logging" and k[0] in mine
                    }
                )
            notes += [n for n in run.notes if n not in notes and not n.startswith(fallback)]
            if model_columns is None:  # the reward model of the DR family's varying one
                model_columns = run.model_columns
    ordered = {(p, e): estimates[(p, e)] for p in candidates for e in names}
    # the segments' estimates in the order of an evaluation: segment, candidate, estimator
    cells = dict.fromkeys((k[0], k[1]) for k in segments)
    segments = {
        (c, g, p, e): segments[(c, g, p, e)]
        for c, g in cells
        for p in candidates
        for e in names
        if (c, g, p, e) in segments
    }
    settings = {key: {p: float(per[key][p]) for p in candidates} for key in per}
    recorded = base.provenance
    provenance = Provenance(
        options={
            **({} if recorded is None else dict(recorded.options)),
            "estimators": names,
            **settings,
        },
        seed=seed,
    )
    return _replace(
        base,
        estimates=ordered,
        estimators=names,
        segment_estimates=segments,
        interval_values=intervals,
        notes=tuple(notes),
        settings=settings,
        tuning=tuning,
        model_columns=model_columns,
        # a base run of the varying estimator holds one candidate's setting in its statistics:
        # the comparisons then pair the rows
        statistics=base.statistics if plain else None,
    ).with_provenance(provenance)
