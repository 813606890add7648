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
from dataclasses import dataclass, field, replace
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pandas as pd

from ope._result import Result, ResultParts
from ope._validation import (
    as_float_array,
    check_choice,
    check_forwarded,
    check_positive_int,
    check_real,
    describe,
)
from ope.exceptions import OPEWarning, ParameterError, ValidationError
from ope.evaluation._settings import MARGINAL_ESTIMATORS
from ope.evaluation.plan import DEFAULT_ESTIMATORS
from ope.evaluation.plan import evaluate as evaluate_plain
from ope.marginal import EMBEDDING_RULES, EMBEDDING_SEARCHES, ActionEmbedding

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
    "embedding_per_policy",
    "varies_per_policy",
    "per_policy_settings",
    "rule_settings",
    "settings_for",
    "setting_estimators",
    "tune_rule_settings",
    "seed_of",
    "slope_index",
    "slope_accepts",
    "tune_setting",
    "EmbeddingChoice",
    "tune_embedding",
    "EXACT_MAX_DIMS",
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

#: The rules of :func:`tune_embedding`, as stated in the result.
EMBEDDING_RULE_TEXT: Final = {
    "slope": "SLOPE++ (Tucker & Lee 2021): Lepski's principle over subsets of the embedding's "
    "dimensions, the full embedding first",
    "mse": "smallest MSE bound: se^2 + (|bias| + t_(1-delta) se(bias))^2, the bias estimated by "
    "the paired difference with the full embedding on the same rows",
}

#: The rules of :func:`tune_setting`, as stated in the result.
RULES: Final = {
    "slope": "SLOPE++ (Tucker & Lee 2021): Lepski's principle over the grid",
    "mse": "smallest MSE bound: se^2 + (|bias| + t_(1-delta) se(bias))^2, the bias estimated by "
    "the paired difference with the unmodified estimator (IPS, or DR with the same reward model)",
}


def _chosen_value(chosen: Mapping[str, Any], policy: Any) -> Any:
    """One candidate's entry of a choice's ``chosen`` (a named candidate, else an error)."""
    if isinstance(policy, str) and policy in chosen:
        return chosen[policy]
    raise ParameterError(
        f"`policy` must name a candidate of this choice, one of {list(chosen)}; got {policy!r}."
    )


def _compared_on(evaluate_options: Mapping[str, Any], *also: str) -> dict[str, Any]:
    """The options of the evaluations a tuning compares: every value on normal standard
    errors, so no interval method, segments, estimators or per-candidate settings (and the
    keys ``also`` the tuning sets itself)."""
    dropped = {
        "ci",
        "by",
        "n_resamples",
        "ci_fallback",
        "weight_bound",
        "estimators",
        *SETTING_ESTIMATOR,
        *also,
    }
    return {k: v for k, v in evaluate_options.items() if k not in dropped}


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
        if accepted and not slope_accepts(theta[accepted], cnf[accepted], theta[i], cnf[i]):
            return int(accepted[-1])
        accepted.append(int(i))
    return int(accepted[-1])


def slope_accepts(
    values: npt.NDArray[np.float64], widths: npt.NDArray[np.float64], value: float, width: float
) -> bool:
    """SLOPE++'s test of one more setting (``value``, ``width``) against the accepted ones:
    ``|values - value| <= width + C * widths`` for every accepted one (a non-finite estimate or
    width is refused)."""
    if not (math.isfinite(value) and math.isfinite(width)):
        return False
    return bool(np.all(np.abs(values - value) <= width + SLOPE_C * widths))


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

    def how(self) -> str:
        """How the values were chosen, in words (for the report and the summary)."""
        return (
            f"chosen from these logs by {self.rule.split(':')[0]} over "
            f"{', '.join(f'{g:g}' for g in self.grid)}"
        )

    def value_for(self, policy: str) -> float:
        """The chosen setting of one candidate policy."""
        return float(_chosen_value(self.chosen, policy))

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

    from ope.evaluation.plan import evaluate
    from ope.io import read_logs
    from ope.logs import BanditLogs

    check_forwarded(evaluate_options, tune_setting, evaluate, target_name="ope.evaluate")
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
    options = _compared_on(evaluate_options)
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
                    t = stats.t.isf(d, est.n - 1)
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
        width = stats.t.isf(d, n - 1) * mine["std_error"].to_numpy()
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


#: The most dimensions ``search="exact"`` visits every subset of (2^d - 1 evaluations).
EXACT_MAX_DIMS: Final = 10

#: The most dimensions a search takes (greedy: at most d(d + 1) / 2 evaluations).
_SEARCH_MAX_DIMS: Final = 64


@dataclass(frozen=True, eq=False)
class EmbeddingChoice(Result):
    """The subset of an embedding's dimensions chosen per candidate policy
    (:func:`tune_embedding`), by SLOPE++ or the MSE bound.

    Attributes
    ----------
    estimator : str
        The marginalized estimator whose estimates were compared (``mips`` by default).
    dimensions : tuple of str
        The embedding's dimensions, all of them.
    search : {"greedy", "exact"}
    min_dims : int
    chosen : dict of str to tuple of str
        Policy -> the chosen dimensions.
    delta : float
    n : int
    rule : str
    setting : str
        ``"embedding"``: the keyword of :func:`ope.evaluate` it sets.
    """

    estimator: str
    dimensions: tuple[str, ...]
    search: str
    min_dims: int
    chosen: dict[str, tuple[str, ...]]
    delta: float
    n: int
    rule: str = EMBEDDING_RULE_TEXT["slope"]
    setting: str = "embedding"
    _table: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)
    _embeddings: dict[tuple[str, ...], Any] = field(default_factory=dict, repr=False)

    def table(self) -> pd.DataFrame:
        """One row per policy and visited subset, in the order of the search: ``dimensions``
        (the subset, names joined by ", "), ``n_dims``, ``value``, ``std_error``, ``chosen``;
        by SLOPE++ also ``width`` (the t bound's) and ``accepted`` (by its test against every
        subset accepted before; the walk stops at the first refusal); by the MSE bound also
        ``bias`` (the paired difference with the full embedding), ``bias_bound`` and
        ``mse_bound``."""
        return self._table.copy()

    def how(self) -> str:
        """How the subsets were chosen, in words (for the report and the summary)."""
        return (
            f"chosen from these logs by {self.rule.split(':')[0]} over subsets of "
            f"{', '.join(self.dimensions)} ({self.search} search, {self.min_dims} or more "
            f"dimensions, on {self.estimator})"
        )

    def value_for(self, policy: str) -> tuple[str, ...]:
        """The chosen dimensions of one candidate policy."""
        return tuple(_chosen_value(self.chosen, policy))

    def embedding_for(self, policy: str) -> Any:
        """The :class:`ope.ActionEmbedding` one candidate policy is evaluated with (its chosen
        dimensions; the same object for candidates with the same subset)."""
        return self._embeddings[self.value_for(policy)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "estimator": self.estimator,
            "setting": self.setting,
            "dimensions": list(self.dimensions),
            "search": self.search,
            "min_dims": self.min_dims,
            "chosen": {p: list(v) for p, v in self.chosen.items()},
            "delta": self.delta,
            "n": self.n,
            "rule": self.rule,
            "table": self._table.to_dict(orient="records"),
        }

    def _parts(self) -> ResultParts:
        return ResultParts(
            title=f"embedding dimensions for {self.estimator} by {self.rule.split(':')[0]}",
            fields=[
                ("rule", self.rule),
                ("dimensions", ", ".join(self.dimensions)),
                ("search", f"{self.search}, {self.min_dims} or more dimensions"),
                ("delta", self.delta),
                (
                    "chosen",
                    "; ".join(f"{p}: {', '.join(v)}" for p, v in self.chosen.items()),
                ),
            ],
            table=self._table,
            precision={},
        )


def tune_embedding(
    logs: Any,
    policies: Any = None,
    *,
    embedding: Any,
    estimator: str = "mips",
    rule: str | None = None,
    search: str | None = None,
    min_dims: int | None = None,
    delta: float = SLOPE_DELTA,
    rng: int | np.random.Generator | None = 0,
    **evaluate_options: Any,
) -> EmbeddingChoice:
    """Choose the dimensions of an action embedding per candidate policy.

    A marginalized estimator (MIPS and its family) over fewer embedding dimensions pools more
    items per embedding value: smaller weights, a narrower interval, and a bias when a dropped
    dimension affects the reward. Two rules, as for :func:`tune_setting`:

    * ``rule="slope"`` (the default): SLOPE++ as in Saito & Joachims (ICML 2022, data-driven
      embedding selection) and Open Bandit Pipeline's MIPW: the full embedding is accepted
      first, and a smaller subset while its estimate stays within the intervals of every
      subset accepted before it (:func:`slope_accepts`, widths as in :func:`tune_setting`).
      It accepts a bias up to the order of the noise.
    * ``rule="mse"``: the smallest bound on the mean squared error,
      ``se_S^2 + (|theta_S - theta_full| + t_{1-delta} se(theta_S - theta_full))^2``, the bias
      of subset ``S`` read from its paired difference with the full embedding on the same rows
      and bounded above at one-sided level ``delta``. The full embedding's bound is its
      variance; a subset wins only where its variance falls by more than its bias can be.
      When a dropped dimension has no effect, the subset's terms are close to a projection of
      the full one's, so ``se(theta_S - theta_full)^2`` is about ``se_full^2 - se_S^2`` and
      the bound about ``1.64 se_full^2 - 0.64 se_S^2`` at ``delta=0.1``: the rule then keeps
      the full embedding. It never trades a visible bias for variance.

    Measured (``benchmarks/embedding_selection.py``, catalogs with exact truth, 300
    replications): neither rule beats the full embedding everywhere. At n = 2,000 SLOPE++'s
    choices are biased (coverage of their 95% intervals 0.44 to 0.61) and their RMSE exceeds
    the full embedding's in every design; at n = 20,000 with one relevant dimension of three,
    SLOPE++ with the exact search finds it in 857 of 900 cases (RMSE 0.0071 against 0.0077),
    and where every dimension matters it loses (0.0144 against 0.0101). SLOPE++ assumes that
    a narrower interval means more bias; among subsets the narrowest may drop the relevant
    dimension. The MSE bound kept the full embedding in 97 to 100% of the cases, with its RMSE.

    ``search="exact"`` (the default up to :data:`EXACT_MAX_DIMS` dimensions): every subset,
    level by level from the largest (2^d - 1 evaluations); SLOPE++ visits each level from the
    widest interval and stops at the first refusal, the MSE rule takes the smallest bound of
    all. ``search="greedy"``: from the full set, each step evaluates the subsets with one
    dimension fewer; SLOPE++ visits them from the widest to the narrowest interval and
    continues from the narrowest, the MSE rule continues from the smallest bound while it
    falls (at most d(d + 1) / 2 evaluations). Never fewer than ``min_dims`` dimensions. The evaluations share the logs,
    the candidates and one seed; each evaluation returns every candidate's estimate, and the
    search is per candidate.

    Parameters
    ----------
    logs : BanditLogs or anything ``ope.read_logs`` accepts
    policies : optional
        As in :func:`ope.evaluate`.
    embedding : ope.ActionEmbedding
        With ``columns``, ``distribution`` or ``estimated`` (its dimensions; its ``select``,
        ``search`` and ``min_dims`` are the defaults of ``rule``, ``search`` and
        ``min_dims``).
    estimator : {"mips", "snmips", "mdr", "offcem"}, default "mips"
        The estimator whose estimates are compared.
    rule : {"slope", "mse"}, optional
        Default ``embedding.select``, else ``"slope"``.
    search : {"exact", "greedy"}, optional
        Default ``embedding.search``, else exact up to :data:`EXACT_MAX_DIMS` dimensions.
    min_dims : int, optional
        The fewest dimensions of a subset (default ``embedding.min_dims``).
    delta : float, default SLOPE_DELTA
        One-sided level of the widths and of the bias bound, in (0, 0.5).
    rng : int, Generator or None, default 0
        Seed of the evaluations (the reward model's cross-fitting: the same in every
        evaluation). An estimated ``p(e|a)`` is cross-fitted with the embedding's own ``rng``
        (a Generator is turned into one seed first, so every subset has the same folds).
    **evaluate_options
        Passed to :func:`ope.evaluate` (``reward_model``, ``context_columns``, ...).

    Returns
    -------
    EmbeddingChoice

    Raises
    ------
    ope.ParameterError
        No ``ActionEmbedding``, a cluster embedding, ``min_dims`` above the dimensions, an
        estimator that is not marginalized, ``search="exact"`` past :data:`EXACT_MAX_DIMS`.
    """
    import itertools
    import warnings

    from scipy import stats

    from ope.io import read_logs
    from ope.logs import BanditLogs
    from ope.results import compare

    if not isinstance(embedding, ActionEmbedding):
        raise ParameterError(
            "`embedding` must be an ope.ActionEmbedding with columns=, distribution= or "
            f"estimated=; got {type(embedding).__name__}."
        )
    if embedding.kind == "clusters":
        raise ParameterError(
            "a cluster embedding has one dimension: nothing to choose (give the embedding as "
            "columns=, distribution= or estimated=)."
        )
    check_forwarded(evaluate_options, tune_embedding, evaluate_plain, target_name="ope.evaluate")
    # None is the default; any other value (an empty string too) is checked
    how = check_choice(
        (embedding.select or "slope") if rule is None else rule, "rule", EMBEDDING_RULES
    )
    dims = embedding.names
    walk_by = embedding.search if search is None else search
    if walk_by is None:
        walk_by = "exact" if len(dims) <= EXACT_MAX_DIMS else "greedy"
    walk_by = check_choice(walk_by, "search", EMBEDDING_SEARCHES)
    est_name = check_choice(estimator, "estimator", tuple(sorted(MARGINAL_ESTIMATORS)))
    lowest = embedding.min_dims if min_dims is None else min_dims
    check_positive_int(lowest, "min_dims", minimum=1)
    if lowest > len(dims):
        raise ParameterError(
            f"`min_dims` ({lowest}) is more than the embedding's {len(dims)} dimension(s) "
            f"{list(dims)}."
        )
    limit = EXACT_MAX_DIMS if walk_by == "exact" else _SEARCH_MAX_DIMS
    if len(dims) > limit:
        raise ParameterError(
            f"search={walk_by!r} takes at most {limit} dimensions; the embedding has "
            f"{len(dims)}" + (": use search='greedy'." if walk_by == "exact" else ".")
        )
    d = check_real(delta, "delta", finite=True)
    if not 0.0 < d < 0.5:
        raise ParameterError(f"`delta` must be in (0, 0.5), e.g. 0.1; got {delta!r}.")
    if not isinstance(logs, BanditLogs):
        logs = read_logs(logs)
    seed = seed_of(rng)
    options = _compared_on(evaluate_options, "embedding")
    if embedding.kind == "estimated":  # one fold assignment for every subset compared
        embedding = replace(embedding, rng=seed_of(embedding.rng))
    embeddings: dict[tuple[str, ...], Any] = {}
    runs: dict[tuple[str, ...], dict[str, Any]] = {}

    def estimates(subset: tuple[str, ...]) -> dict[str, Any]:
        # one evaluation per subset, every candidate's estimate (shared by the searches)
        if subset not in runs:
            embeddings[subset] = embedding.restricted(subset)
            with warnings.catch_warnings():  # the search's warnings repeat the chosen run's
                warnings.simplefilter("ignore", OPEWarning)
                ev = evaluate_plain(
                    logs,
                    policies,
                    estimators=(est_name,),
                    rng=seed,
                    embedding=embeddings[subset],
                    **options,
                )
            runs[subset] = {p: ev.estimates[(p, est_name)] for p in ev.policies}
        return runs[subset]

    full = tuple(dims)
    candidates = list(estimates(full))
    records: list[dict[str, Any]] = []
    chosen: dict[str, tuple[str, ...]] = {}

    def level_below(current: tuple[str, ...]) -> list[tuple[str, ...]]:
        if walk_by == "exact":
            return list(itertools.combinations(full, len(current) - 1))
        return [tuple(x for x in current if x != drop) for drop in current]

    for p in candidates:  # a loop over candidate policies; each searches on its own
        reference = estimates(full)[p]

        def score(subset: tuple[str, ...]) -> dict[str, Any]:
            est = estimates(subset)[p]
            out: dict[str, Any] = {
                "_subset": subset,
                "policy": p,
                "dimensions": ", ".join(subset),
                "n_dims": len(subset),
                "value": est.value,
                "std_error": est.std_error,
            }
            ok = est.n >= 2 and math.isfinite(est.std_error)
            t = float(stats.t.isf(d, est.n - 1)) if ok else math.nan
            if how == "slope":
                out["width"] = t * est.std_error if ok else math.nan
            else:
                diff = compare(est, reference) if subset != full else None
                bias = 0.0 if diff is None else diff.value
                bound = 0.0 if diff is None else abs(diff.value) + t * diff.std_error
                out.update(bias=bias, bias_bound=bound, mse_bound=est.std_error**2 + bound**2)
                if not math.isfinite(out["mse_bound"]):
                    out["mse_bound"] = math.inf
            return out

        if how == "slope":
            walk = _slope_walk(full, lowest, level_below, score)
        else:
            walk = _mse_walk(full, lowest, level_below, score, greedy=walk_by == "greedy")
        pick = next(r for r in walk if r.get("chosen"))
        chosen[p] = pick["_subset"]
        records += [
            {**{k: v for k, v in r.items() if k != "_subset"}, "chosen": r is pick} for r in walk
        ]
    return EmbeddingChoice(
        estimator=est_name,
        dimensions=full,
        search=walk_by,
        min_dims=lowest,
        chosen=chosen,
        delta=d,
        n=logs.n,
        rule=EMBEDDING_RULE_TEXT[how],
        _table=pd.DataFrame.from_records(records),
        _embeddings={s: embeddings[s] for s in set(chosen.values())},
    )


def _slope_walk(
    full: tuple[str, ...], lowest: int, level_below: Any, score: Any
) -> list[dict[str, Any]]:
    """SLOPE++ over subsets (:func:`tune_embedding`): the visited rows, the chosen one marked
    ``chosen``; each row's ``accepted`` is its test against the accepted before it."""
    first = {**score(full), "accepted": True}
    walk = [first]
    values, widths = [first["value"]], [first["width"]]
    current = full
    while len(current) > lowest:  # a loop over levels (d at most)
        scored = [(s, score(s)) for s in level_below(current)]
        # widest first (ties: in the order of the dimensions; sorted() is stable)
        scored.sort(key=lambda item: -np.nan_to_num(item[1]["width"], nan=-np.inf))
        for _, row in scored:
            row["accepted"] = slope_accepts(
                np.array(values), np.array(widths), row["value"], row["width"]
            )
            walk.append(row)
            if not row["accepted"]:
                break
            values.append(row["value"])
            widths.append(row["width"])
        if not walk[-1]["accepted"]:
            break
        current = scored[-1][1]["_subset"]
    [r for r in walk if r["accepted"]][-1]["chosen"] = True
    return walk


def _mse_walk(
    full: tuple[str, ...],
    lowest: int,
    level_below: Any,
    score: Any,
    *,
    greedy: bool,
) -> list[dict[str, Any]]:
    """The smallest MSE bound over subsets (:func:`tune_embedding`): the visited rows, the
    chosen one marked ``chosen`` (ties: the larger subset, then the order of the dimensions)."""
    walk = [score(full)]
    best = walk[0]
    current = full
    while len(current) > lowest:  # a loop over levels (d at most)
        level = [score(s) for s in level_below(current)]
        walk += level
        top = min(level, key=lambda r: r["mse_bound"])
        if top["mse_bound"] < best["mse_bound"]:
            best = top
        elif greedy:
            break  # no subset one dimension smaller lowers the bound
        current = top["_subset"]
    best["chosen"] = True
    return walk


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


def setting_estimators(key: str) -> frozenset[str]:
    """The estimators a setting given per candidate (a key of :attr:`ope.Evaluation.settings`)
    belongs to: the marginalized ones for ``"embedding"``, else :data:`SETTING_ESTIMATOR`'s."""
    if key == "embedding":
        return MARGINAL_ESTIMATORS
    return frozenset({SETTING_ESTIMATOR[key]})


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
        rest = {
            k: v for k, v in options.items() if k not in rules and k not in ("rng", "embedding")
        }
        choice = tune_setting(logs, SETTING_ESTIMATOR[key], policies, rule=rule, rng=seed, **rest)
        out[key] = choice
        choices.append(choice)
    return out, choices


def embedding_per_policy(options: Mapping[str, Any]) -> str | None:
    """How ``options["embedding"]`` varies per candidate: ``"select"`` (an
    ``ActionEmbedding(select=...)``: chosen on the logs by :func:`tune_embedding`), ``"given"``
    (a mapping of policy name to ``ActionEmbedding``, or an :class:`EmbeddingChoice`), or None
    (no embedding, or one for every candidate).

    Raises
    ------
    ope.ParameterError
        A mapping whose keys are not policy names or whose values are not ``ActionEmbedding``
        objects without ``select``.
    """
    value = options.get("embedding")
    if isinstance(value, EmbeddingChoice):
        return "given"
    if isinstance(value, Mapping):
        bad = [
            k
            for k, v in value.items()
            if not isinstance(k, str) or not isinstance(v, ActionEmbedding) or v.select
        ]
        if bad or not value:
            raise ParameterError(
                "`embedding` per policy must map candidate names (str) to ope.ActionEmbedding "
                "objects without select=, e.g. {'greedy': ope.ActionEmbedding(columns=('genre',"
                f")), ...}}; got {describe(value)}."
            )
        return "given"
    if isinstance(value, ActionEmbedding) and value.select is not None:
        return "select"
    return None


def varies_per_policy(options: Mapping[str, Any]) -> bool:
    """Whether ``options`` give a setting or the embedding per candidate (or as a rule to tune
    per candidate): the evaluation is :func:`evaluate_with_settings`'s."""
    return bool(
        per_policy_settings(options) or rule_settings(options) or embedding_per_policy(options)
    )


def evaluate_with_settings(logs: Any, policies: Any = None, **options: Any) -> Any:
    """``ope.evaluate`` with ``max_weight``, ``tau`` or ``shrinkage`` given per candidate
    policy (a mapping of policy name to value, or a :class:`SettingChoice`, e.g. from
    :func:`tune_setting`), or as a tuning rule (``"slope"``, ``"mse"``: chosen per candidate
    on these logs by :func:`tune_setting`, default grid, this evaluation's seed); and with the
    ``embedding`` per candidate (a mapping of policy name to ``ope.ActionEmbedding``, an
    :class:`EmbeddingChoice`, or an ``ActionEmbedding(select=...)`` whose dimensions are
    chosen per candidate on these logs by :func:`tune_embedding`, on the first marginalized
    estimator asked for).

    The estimators without a per-policy setting are evaluated once; those whose setting varies
    (clipped IPS, Switch-DR, DRos; the marginalized ones for the embedding) once per distinct
    value, on every candidate, and each candidate keeps the estimates at its own value (all on
    the same rows, with one seed, so the reward model's folds are the same in every run). The
    values are in :attr:`ope.Evaluation.settings` and in the provenance. In-memory logs only.

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
    per: dict[str, dict[str, Any]] = dict(per_policy_settings(options))
    embedding_mode = embedding_per_policy(options)
    if not per and not rules and embedding_mode is None:
        return evaluate_plain(logs, policies, **options)
    varied = next(iter({**per, **rules})) if per or rules else "embedding"
    if not isinstance(logs, BanditLogs):
        if type(logs).__name__ == "LogScan":
            raise ParameterError(
                f"`{varied}` per policy needs the rows in memory (one evaluation per distinct "
                "value), not a scan: read them with ope.read_logs, or give one value."
            )
        logs = read_logs(logs)
    seed = seed_of(options.pop("rng", None))
    estimators = options.pop("estimators", None)
    if estimators is None:
        estimators = DEFAULT_ESTIMATORS
    if isinstance(estimators, str) or not isinstance(estimators, Sequence):
        estimators = (estimators,)
    if not estimators or not all(isinstance(e, str) for e in estimators):
        raise ParameterError(
            f"`{varied}` per policy needs the estimators as a sequence of names, e.g. "
            f"('ips', 'clipped_ips') (each run builds its own with the policy's value); got "
            f"{list(estimators)!r}."
        )
    names = [e.lower() for e in estimators]
    if len(set(names)) != len(names):
        raise ParameterError(f"`estimators` lists an estimator twice: {names}.")
    marginal = tuple(e for e in names if e in MARGINAL_ESTIMATORS)
    if embedding_mode is not None and not marginal:
        raise ParameterError(
            "`embedding` per policy is used only by the marginalized estimators mips, snmips, "
            "mdr and offcem; add one of them to `estimators` or drop `embedding`."
        )
    if rules:  # tuned on these rows first
        options, _ = tune_rule_settings(logs, policies, options, seed)
        per = dict(per_policy_settings(options))
    if embedding_mode == "select":  # the embedding's dimensions, tuned on these rows
        rest = {k: v for k, v in options.items() if k not in ("embedding", "rng")}
        options["embedding"] = tune_embedding(
            logs,
            policies,
            embedding=options["embedding"],
            estimator="mips" if "mips" in marginal else marginal[0],
            rng=seed,
            **rest,
        )
    tuning = tuple(v for v in options.values() if isinstance(v, (SettingChoice, EmbeddingChoice)))
    # what varies: the setting's keyword -> (its estimators, policy -> the value)
    varying: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {}
    for key in per:
        est = SETTING_ESTIMATOR[key]
        if est not in names:
            raise ParameterError(
                f"`{key}` is given per policy but {est} is not among the estimators "
                f"{names}: add it, or leave `{key}` out."
            )
        varying[key] = ((est,), per[key])
    if embedding_mode is not None:
        given = options["embedding"]
        if isinstance(given, EmbeddingChoice):
            chosen = {p: given.embedding_for(p) for p in given.chosen}
        else:
            chosen = dict(given)
        varying["embedding"] = (marginal, chosen)
    varying_estimators = {e for ests, _ in varying.values() for e in ests}
    common = {k: v for k, v in options.items() if k not in varying}
    plain = [e for e in names if e not in varying_estimators]
    # the estimators without a varying setting, once (or the first varying ones, when none)
    first_key = next(iter(varying))
    first: dict[str, Any] = dict(common)
    if not plain:
        first[first_key] = next(iter(varying[first_key][1].values()))
    elif "embedding" in first and not any(e in MARGINAL_ESTIMATORS for e in plain):
        del first["embedding"]  # one embedding for every candidate, used by no plain estimator
    base = evaluate_plain(
        logs, policies, estimators=plain or list(varying[first_key][0]), rng=seed, **first
    )
    candidates = list(base.policies)
    estimates = dict(base.estimates)
    segments = dict(base.segment_estimates)
    intervals = None if base.interval_values is None else dict(base.interval_values)
    checks = {c.policy: c for c in base.embedding_checks}
    # the runs' notes but the interval-method fallback ones: the spliced evaluation states
    # its own, for every estimator that fell back
    fallback = f"ci={base.ci_method!r} does not apply to "
    notes = [n for n in base.notes if not n.startswith(fallback)]
    if not plain and first_key == "embedding":
        # the base run is one group's embedding on every candidate: its embedding note and
        # tests are restated per group below
        said = first["embedding"].describe()
        tests = {c.note() for c in base.embedding_checks}
        notes = [n for n in notes if n not in tests and said not in n]
        checks = {}
    model_columns = base.model_columns
    for key, (ests, values) in varying.items():  # a loop over the varying settings (four at most)
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
        # candidates with the same value share a run (an embedding: the same object)
        groups: dict[Any, tuple[Any, list[str]]] = {}
        for p in candidates:
            group = id(values[p]) if key == "embedding" else values[p]
            groups.setdefault(group, (values[p], []))[1].append(p)
        for value, members in groups.values():  # a loop over the distinct values
            # the other estimators' settings stay with the base run
            at_value: dict[str, Any] = {**settings_for(common, ests), key: value}
            if key != "embedding" and not set(ests) & MARGINAL_ESTIMATORS:
                at_value.pop("embedding", None)
            run = evaluate_plain(logs, policies, estimators=ests, rng=seed, **at_value)
            mine = set(members)
            estimates.update({k: v for k, v in run.estimates.items() if k[0] in mine})
            segments.update({k: v for k, v in run.segment_estimates.items() if k[2] in mine})
            if key == "embedding":
                checks.update({c.policy: c for c in run.embedding_checks if c.policy in mine})
            if intervals is not None and run.interval_values is not None:
                intervals.update(
                    {
                        k: v
                        for k, v in run.interval_values.items()
                        if k != "logging" and k[0] in mine
                    }
                )
            run_notes = [n for n in run.notes if not n.startswith(fallback)]
            if key == "embedding":
                # each candidate's test of its own embedding; the embedding's note names them
                others = {c.note() for c in run.embedding_checks if c.policy not in mine}
                said = value.describe()
                run_notes = [
                    f"{', '.join(members)}: {n}" if said in n else n
                    for n in run_notes
                    if n not in others
                ]
            notes += [n for n in run_notes if n not in notes]
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
    settings: dict[str, dict[str, Any]] = {
        key: {p: values[p].names if key == "embedding" else float(values[p]) for p in candidates}
        for key, (_, values) in varying.items()
    }
    recorded = base.provenance
    provenance = Provenance(
        options={
            **({} if recorded is None else dict(recorded.options)),
            "estimators": names,
            **{
                k: {p: list(v) if isinstance(v, tuple) else v for p, v in vs.items()}
                for k, vs in settings.items()
            },
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
        embedding_checks=tuple(checks[p] for p in candidates if p in checks),
        # a base run of the varying estimator holds one candidate's setting in its statistics:
        # the comparisons then pair the rows
        statistics=base.statistics if plain else None,
    ).with_provenance(provenance)
