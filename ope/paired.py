r"""Effects of paired counterfactual replays: the same prefix replayed under several arms.

A *pair* is one shared prefix (a task, a conversation) replayed in every arm, e.g. once with a
memory item injected (``with_memory``) and once with it suppressed (``no_memory``), each arm
``R`` times with different seeds (*replicates*). :func:`paired_effect` estimates the average
effect of each treated arm against one control arm with **pairs as the units**:

1. replicates are averaged within each (pair, arm) cell, giving arm x pair means;
2. the pair differences :math:`d_i = \bar y_{t,i} - \bar y_{c,i}` are i.i.d. over pairs, so the
   effect is their mean and its standard error their standard deviation over :math:`\sqrt n`;
3. intervals come from :mod:`ope.intervals` (normal, t; Hoeffding, empirical Bernstein or
   betting on the bounded pair differences when ``reward_range`` is given);
4. with ``by=`` (e.g. ``item_id``) one effect per group, with Holm or Benjamini-Hochberg
   adjusted p-values over every row of the table.

The result, :class:`PairedEffect`, also reports how repeatable the branches are (the
within-pair replicate standard deviation of each arm and the share of the variance that lies
between replicates), the unpaired two-sample standard error beside the paired one (the
variance the pairing removes), optional ratio effects (delta method on pair means), and notes
counting every pair that could not be used (it missed an arm, or a value of an outcome).

Everything is computed by grouped sums over integer codes (``numpy.bincount``); normal and t
intervals and p-values are arrays over all groups at once. The only Python loops run over
treated arms and outcomes, and, for the finite-sample methods, over the rows of the result
table (one interval call per row, never per pair).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy import stats

from ope._format import plural
from ope._thresholds import SKEW_MIN_ROWS, SKEW_ROWS, skewed_terms
from ope._validation import (
    check_choice,
    check_confidence_level,
    check_no_overflow,
    check_reward_range,
    check_rewards_in_range,
    user_stacklevel,
)
from ope.exceptions import (
    DroppedRowsWarning,
    MissingBoundsError,
    ParameterError,
    SchemaError,
    SmallSampleWarning,
    ValidationError,
)
from ope.intervals import bernstein_interval, betting_interval, hoeffding_interval
from ope.intervals._shared import normal_quantile
from ope.logs import PairedReplays
from ope.results import Result, ResultParts
from ope.weights import SAMPLING_WEIGHT_COLUMN, refuse_sampling_weights

__all__ = [
    "PairedEffect",
    "paired_effect",
    "adjust_p_values",
    "PAIRED_OUTCOMES",
    "PAIRED_CI_METHODS",
    "CORRECTIONS",
    "skewed_rows_note",
]

#: Outcome columns of the paired-replay schema (docs/guide/logs.md); ``outcomes="all"`` takes those
#: present in the replays, in this order.
PAIRED_OUTCOMES: Final = ("outcome", "cost", "tokens", "latency_ms")

#: Interval methods of :func:`paired_effect`: asymptotic (``normal``, ``t``) and finite-sample
#: on the bounded pair differences (``hoeffding``, ``bernstein``, ``betting``; these need
#: ``reward_range``).
PAIRED_CI_METHODS: Final = ("normal", "t", "hoeffding", "bernstein", "betting")

#: Methods that need a priori bounds on the outcomes.
_BOUNDED_METHODS: Final = ("hoeffding", "bernstein", "betting")

#: Multiplicity corrections: Holm (family-wise error rate), Benjamini-Hochberg (false discovery
#: rate), or none.
CORRECTIONS: Final = ("holm", "bh", "none")

#: Bisection steps when inverting the betting interval for a p-value: 40 halvings of
#: ``log(alpha)`` over [log 1e-16, 0] locate it to a factor of ``exp(37 / 2**40)``, far below
#: any significance level anyone reads.
_BETTING_PVALUE_STEPS: Final = 40
_BETTING_PVALUE_FLOOR: Final = 1e-16

_TABLE_COLUMNS: Final = (
    "treated",
    "control",
    "outcome",
    "group",
    "n",
    "n_dropped",
    "value",
    "std_error",
    "ci_low",
    "ci_high",
    "ci_method",
    "confidence_level",
    "p_value",
    "p_adjusted",
    "significant",
    "unpaired_std_error",
    "treated_mean",
    "control_mean",
    "ratio",
    "ratio_std_error",
    "ratio_ci_low",
    "ratio_ci_high",
    "treated_replicates",
    "control_replicates",
    "treated_replicate_sd",
    "control_replicate_sd",
    "treated_replicate_share",
    "control_replicate_share",
    "skewness",
    "short_interval",
)


# ---------------------------------------------------------------------------------------------
# the result
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False, repr=False)
class PairedEffect(Result):
    """Effects of treated arms against a control arm on paired replays (pairs as units).

    Attributes
    ----------
    treated : tuple
        The treated arms, in the order given.
    control : str or int
        The control arm.
    outcomes : tuple of str
        The outcome columns analysed.
    by : str or None
        The grouping column (one effect per value), or None for one overall effect.
    confidence_level : float
        Nominal coverage of every interval.
    ci_method : str
        Interval method of the difference (one of :data:`PAIRED_CI_METHODS`).
    correction : str
        Multiplicity correction of ``p_adjusted`` (one of :data:`CORRECTIONS`).
    ratio : bool
        Whether the ratio columns are filled (else NaN).
    reward_range : dict
        A priori range of each bounded outcome (empty when none was given).
    n_pairs : int
        Distinct pairs in the replays.
    notes : tuple of str
        Pairs dropped (counted), groups too small, replicate spread unavailable, rows rejected
        when the replays were read, and rows whose pair differences are too skewed for their
        normal or t interval (``table()["skewness"]`` is each row's sample skewness of the
        pair differences; ``short_interval`` flags the rows with ``n < SKEW_MIN_ROWS +
        SKEW_ROWS * skewness**2``, the rule of every estimate, :data:`ope.estimators.SKEW_ROWS`).

    Examples
    --------
    >>> import pandas as pd
    >>> from ope.paired import paired_effect
    >>> df = pd.DataFrame({"pair_id": [0, 0, 1, 1, 2, 2], "arm": ["a", "b"] * 3,
    ...                    "outcome": [1.0, 0.0, 1.0, 1.0, 1.0, 0.0]})
    >>> res = paired_effect(df, treated="a", control="b")
    >>> res.table()[["treated", "control", "n", "value"]].round(4).to_dict("records")
    [{'treated': 'a', 'control': 'b', 'n': 3, 'value': 0.6667}]
    """

    treated: tuple[Any, ...]
    control: Any
    outcomes: tuple[str, ...]
    by: str | None
    confidence_level: float
    ci_method: str
    correction: str
    ratio: bool
    reward_range: dict[str, tuple[float, float]]
    n_pairs: int
    notes: tuple[str, ...] = ()
    _columns: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def n_rows(self) -> int:
        """Rows of :meth:`table` (treated arms x outcomes x groups)."""
        return len(self._columns["value"])

    def table(self) -> Any:
        """One row per treated arm x outcome x group, as a pandas DataFrame.

        Columns: ``treated, control, outcome, group`` (None without ``by``), ``n`` (pairs used),
        ``n_dropped`` (pairs of the group that missed an arm or a value), ``value`` (mean pair
        difference treated - control), ``std_error`` (paired), ``ci_low, ci_high, ci_method,
        confidence_level``, ``p_value`` (of no effect), ``p_adjusted`` (after ``correction``),
        ``significant`` (``p_adjusted <= 1 - confidence_level``), ``unpaired_std_error``
        (two-sample, ignoring the pairing), ``treated_mean, control_mean`` (means of the pair
        means), ``ratio, ratio_std_error, ratio_ci_low, ratio_ci_high`` (NaN unless
        ``ratio=True``), ``treated_replicates, control_replicates`` (mean replicates per pair),
        ``treated_replicate_sd, control_replicate_sd`` (pooled within-pair replicate standard
        deviation), ``treated_replicate_share, control_replicate_share`` (share of the variance
        of a single replay that lies between replicates of the same pair), ``skewness``
        (sample skewness of the pair differences), ``short_interval`` (True where the normal or
        t interval is likely too short: ``n < SKEW_MIN_ROWS + SKEW_ROWS * skewness**2`` pairs
        for normal, ``n < SKEW_ROWS * skewness**2`` for t, whose quantile corrects for few
        symmetric pairs; :func:`ope._thresholds.skewed_terms`; always False for the
        finite-sample methods).
        """
        import pandas as pd

        return pd.DataFrame({c: self._columns[c] for c in _TABLE_COLUMNS})

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: the settings, ``rows`` (the table as records) and ``notes``."""
        rows = []
        cols = self._columns
        for i in range(self.n_rows):  # loop over table rows (arms x outcomes x groups)
            rows.append({c: _plain(cols[c][i]) for c in _TABLE_COLUMNS})
        return {
            "treated": [_plain(t) for t in self.treated],
            "control": _plain(self.control),
            "outcomes": list(self.outcomes),
            "by": self.by,
            "confidence_level": float(self.confidence_level),
            "ci_method": self.ci_method,
            "correction": self.correction,
            "ratio": bool(self.ratio),
            "reward_range": {k: [float(v[0]), float(v[1])] for k, v in self.reward_range.items()},
            "n_pairs": int(self.n_pairs),
            "rows": rows,
            "notes": list(self.notes),
        }

    def _parts(self) -> ResultParts:
        shown = [
            "treated",
            "outcome",
            "group",
            "n",
            "value",
            "std_error",
            "unpaired_std_error",
            "ci_low",
            "ci_high",
            "p_adjusted",
            "significant",
        ]
        if self.ratio:
            shown += ["ratio", "ratio_ci_low", "ratio_ci_high"]
        if self.by is None:
            shown.remove("group")
        treated = ", ".join(map(str, self.treated))
        return ResultParts(
            title=f"Paired effects ({treated} vs {self.control})",
            fields=(
                ("control", str(self.control)),
                ("outcomes", ", ".join(self.outcomes)),
                ("by", self.by or ""),
                ("pairs", self.n_pairs),
                (f"{self.confidence_level:.0%} CI", self.ci_method),
                ("correction", self.correction),
            ),
            table=self.table()[shown],
            notes=self.notes,
        )

    def __repr__(self) -> str:
        return (
            f"PairedEffect(treated={list(self.treated)!r}, control={self.control!r}, "
            f"outcomes={list(self.outcomes)!r}, by={self.by!r}, rows={self.n_rows}, "
            f"ci_method={self.ci_method!r}, notes={len(self.notes)})"
        )


def _plain(x: Any) -> Any:
    """A numpy scalar as a JSON-ready Python value (NaN stays a float NaN)."""
    if isinstance(x, np.generic):
        return x.item()
    return x


# ---------------------------------------------------------------------------------------------
# the entry point
# ---------------------------------------------------------------------------------------------


def paired_effect(
    replays: PairedReplays | pa.Table | Any,
    *,
    treated: Any | Sequence[Any],
    control: Any,
    outcomes: str | Sequence[str] = ("outcome",),
    by: str | None = None,
    ratio: bool = False,
    confidence_level: float = 0.95,
    ci: str = "normal",
    reward_range: tuple[float, float] | Mapping[str, tuple[float, float]] | None = None,
    correction: str = "holm",
) -> PairedEffect:
    r"""Average effect of treated arms against a control arm, with pairs as the units.

    Parameters
    ----------
    replays : PairedReplays, pyarrow.Table or pandas.DataFrame
        Paired replays (docs/guide/logs.md: ``pair_id, arm, replicate, outcome``, optional
        ``item_id, cost, tokens, latency_ms``). A table or data frame is first validated with
        :func:`ope.read_paired`.
    treated : arm or sequence of arms
        The treated arm(s); each is compared with ``control`` on the pairs that have both.
    control : arm
        The control arm.
    outcomes : str or sequence of str, default ("outcome",)
        Outcome columns to analyse, or ``"all"`` for every column of :data:`PAIRED_OUTCOMES`
        present in the replays.
    by : str, optional
        A column constant within each pair (e.g. ``item_id`` or ``task_id``): one effect per
        value, with the multiplicity correction over all rows of the table.
    ratio : bool, default False
        Also estimate the ratio ``treated mean / control mean`` (delta method on pair means).
    confidence_level : float, default 0.95
        Nominal coverage of the intervals; rows with ``p_adjusted <= 1 - confidence_level`` are
        flagged ``significant``.
    ci : {"normal", "t", "hoeffding", "bernstein", "betting"}, default "normal"
        Interval of the difference (the default of every interval of ope). ``t`` uses
        :math:`t_{n-1}` quantiles and its p-values, a little wider on few pairs; the finite-sample
        methods apply to the pair differences, which lie in ``[low - high, high - low]`` for
        outcomes in ``reward_range``.
    reward_range : (low, high) or dict, optional
        A priori range of the outcomes (needed by the finite-sample methods): one pair for every
        outcome, or ``{outcome: (low, high)}``. Values outside raise ``ValidationError``.
    correction : {"holm", "bh", "none"}, default "holm"
        Adjustment of the p-values over every row of the table: Holm's step-down (controls the
        family-wise error rate) or Benjamini-Hochberg (controls the false discovery rate under
        independence or positive dependence).

    Returns
    -------
    PairedEffect
        ``table()`` has one row per treated arm x outcome x group.

    Raises
    ------
    ope.ParameterError
        An arm not in the replays, a bad ``ci``/``correction``/``confidence_level``/
        ``reward_range``, or a control listed among the treated arms.
    ope.SchemaError
        An outcome or ``by`` column is not in the replays (all missing ones are listed).
    ope.MissingBoundsError
        A finite-sample ``ci`` without a range for every outcome.
    ope.ValidationError
        Values outside ``reward_range``, a ``by`` value that changes within a pair, or invalid
        rows in a table passed in (see :func:`ope.read_paired`).
    ope.EstimationError
        The replays carry a ``weight`` column that is not all 1 (sampling weights, which
        paired effects do not take; drop or rename the column if it is not one).

    Warns
    -----
    ope.DroppedRowsWarning
        Pairs missed the treated or the control arm (or a value of an outcome); they are
        dropped from that comparison and counted in ``n_dropped`` and the notes.
    ope.SmallSampleWarning
        A group has fewer than two usable pairs: its standard error and interval are NaN.

    Notes
    -----
    For pair :math:`i` with :math:`R_{a,i}` replicates :math:`y_{a,i,r}` in arm :math:`a`, the
    arm x pair mean is :math:`\bar y_{a,i} = R_{a,i}^{-1}\sum_r y_{a,i,r}` and the pair
    difference :math:`d_i = \bar y_{t,i} - \bar y_{c,i}`. Over the :math:`n` pairs with both arms,

    .. math:: \hat\tau = \bar d, \qquad \widehat{\mathrm{se}} = s_d/\sqrt n, \qquad
              \widehat{\mathrm{se}}_{\text{unpaired}} = \sqrt{(s_t^2 + s_c^2)/n},

    with :math:`s_d, s_t, s_c` the sample standard deviations of :math:`d_i, \bar y_{t,i},
    \bar y_{c,i}`. Since :math:`s_d^2 = s_t^2 + s_c^2 - 2 s_{tc}`, pairing helps exactly when the
    arms' pair means are positively correlated (a shared prefix). The p-value is the two-sided
    t (``ci="t"``) or normal test of :math:`\tau = 0`; for the finite-sample methods it is the
    smallest :math:`1 - \text{level}` at which their interval excludes 0 (closed form for
    Hoeffding and Bernstein, bisection for betting), so ``significant`` agrees with the
    interval when ``correction="none"``.

    Ratio (``ratio=True``): :math:`\hat\rho = \bar y_t / \bar y_c` with the delta-method
    standard error :math:`\mathrm{sd}(\psi)/\sqrt n`, :math:`\psi_i = (\bar y_{t,i} -
    \hat\rho\,\bar y_{c,i})/\bar y_c`, and a normal interval (t with ``ci="t"``).

    Replicate spread of arm :math:`a`: the pooled within-pair standard deviation
    :math:`\hat\sigma_w = \sqrt{\sum_i\sum_r (y_{a,i,r} - \bar y_{a,i})^2 / \sum_i (R_{a,i} -
    1)}` and, with the between-pair component :math:`\hat\sigma_b^2 = \max(0,
    s^2_{\bar y_a} - \hat\sigma_w^2\,\overline{R^{-1}})` (one-way random-effects ANOVA), the
    share :math:`\hat\sigma_w^2/(\hat\sigma_w^2 + \hat\sigma_b^2)` of a single replay's variance
    that lies between replicates: near 0 the branches are repeatable, near 1 the seed decides.

    Holm: with the :math:`m` p-values sorted, :math:`\tilde p_{(k)} = \max_{j \le k}
    \min\{1, (m - j + 1)p_{(j)}\}`. Benjamini-Hochberg: :math:`\tilde p_{(k)} = \min_{j \ge k}
    \min\{1, m\,p_{(j)}/j\}`. Rows without a p-value (fewer than two pairs) are not counted in
    :math:`m`.

    References
    ----------
    .. [1] G. W. Imbens and D. B. Rubin, *Causal Inference for Statistics, Social, and
       Biomedical Sciences*, Cambridge University Press, 2015 (ch. 10, paired experiments).
    .. [2] S. Holm, "A simple sequentially rejective multiple test procedure", Scandinavian
       Journal of Statistics 6(2):65-70, 1979.
    .. [3] Y. Benjamini and Y. Hochberg, "Controlling the false discovery rate: a practical and
       powerful approach to multiple testing", JRSS B 57(1):289-300, 1995.
    .. [4] A. Maurer and M. Pontil, "Empirical Bernstein bounds and sample variance
       penalization", COLT 2009.

    Examples
    --------
    >>> import pandas as pd
    >>> from ope.paired import paired_effect
    >>> df = pd.DataFrame({
    ...     "pair_id":   [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2],
    ...     "arm":       ["mem", "mem", "none", "none"] * 3,
    ...     "replicate": [0, 1, 0, 1] * 3,
    ...     "outcome":   [1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0]})
    >>> res = paired_effect(df, treated="mem", control="none")
    >>> row = res.table().iloc[0]
    >>> round(float(row["value"]), 4), round(float(row["std_error"]), 4), int(row["n"])
    (0.3333, 0.1667, 3)
    """
    level = check_confidence_level(confidence_level)
    method = check_choice(ci, "ci", PAIRED_CI_METHODS)
    corr = check_choice(correction, "correction", CORRECTIONS)
    if not isinstance(ratio, (bool, np.bool_)):
        raise ParameterError(f"`ratio` must be True or False; got {ratio!r}.")
    if by is not None and not isinstance(by, str):
        raise ParameterError(f"`by` must be a column name (str) or None; got {by!r}.")
    if not isinstance(replays, PairedReplays):
        from ope.io import read_paired

        replays = read_paired(replays)
    table = replays.table
    names = table.column_names
    refuse_sampling_weights(
        table.column(SAMPLING_WEIGHT_COLUMN) if SAMPLING_WEIGHT_COLUMN in names else None,
        what="replays",
        estimators="paired effects",
        units="pairs",
        advice=(
            "If the column is not a sampling weight, drop or rename it before reading the "
            "replays; if it is, no paired effect of the whole population is available: "
            "dropping it estimates the effect on the kept pairs, which differs when pairs were "
            "kept with unequal probabilities."
        ),
    )

    outcome_list = _check_outcomes(outcomes, names)
    missing = [o for o in outcome_list if o not in names]
    if by is not None and by not in names:
        missing.append(by)
    if missing:
        if missing == [by]:  # the outcomes are there: only the segment column is not
            hint = "Pass by=... among those."
        else:
            hint = (
                f"Pass outcomes=[...]{' and by=...' if by in missing else ''} among those "
                f"(outcomes='all' takes every one of {', '.join(PAIRED_OUTCOMES)} present)."
            )
        raise SchemaError(
            f"column{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))} "
            f"{'are' if len(missing) > 1 else 'is'} not in the replays; they have: "
            f"{', '.join(names)}. {hint}"
        )
    _check_column_types(table, outcome_list, by)
    ranges = _check_ranges(reward_range, outcome_list, method)

    # ---- integer codes: arms, pairs, groups (no Python loop over rows)
    arm_values = pc.unique(table.column("arm")).to_pylist()
    treated_list = _check_arms(treated, control, arm_values)
    arms = [control, *treated_list]  # local arm index 0 is the control
    arm_code = _codes(table.column("arm"), arms)
    pair_code, n_pairs = _dense_codes(table.column("pair_id"))
    n_arms = len(arms)
    # groups from every row (a pair's group is known even if it only has other arms)
    group_of_pair, group_labels = _groups(table, by, pair_code, n_pairs)
    keep = arm_code >= 0
    pair_code, arm_code = pair_code[keep], arm_code[keep]
    cell = pair_code * n_arms + arm_code
    n_cells = n_pairs * n_arms

    notes: list[str] = []
    if replays.report.rows_rejected:
        notes.append(
            f"{plural(replays.report.rows_rejected, 'row')} "
            f"{'was' if replays.report.rows_rejected == 1 else 'were'} rejected when the "
            "replays were read "
            f"({_reasons(replays.report)}); "
            f"{'it is' if replays.report.rows_rejected == 1 else 'they are'} not used."
        )
    n_groups = len(group_labels)
    pairs_in_group = np.bincount(group_of_pair, minlength=n_groups)

    columns: dict[str, Any] = {c: [] for c in _TABLE_COLUMNS}
    small: list[str] = []
    skewed: list[str] = []
    no_spread: list[str] = []
    dropped_total: list[str] = []
    for outcome in outcome_list:  # a handful of outcome columns
        y = _floats(table.column(outcome))[keep]
        valid = np.isfinite(y)
        if outcome in ranges:
            check_rewards_in_range(y[valid], ranges[outcome], name=outcome)
        n_invalid = int((~valid).sum())
        if n_invalid:
            notes.append(
                f"{plural(n_invalid, 'row')} {'has' if n_invalid == 1 else 'have'} no finite "
                f"{outcome!r} value; {'it is' if n_invalid == 1 else 'they are'} left out of "
                f"the {outcome!r} cell means."
            )
        cnt, mean, within_ss = _cell_stats(cell[valid], y[valid], n_cells)
        cnt, mean, within_ss = (a.reshape(n_pairs, n_arms) for a in (cnt, mean, within_ss))
        for t_index, arm in enumerate(treated_list, start=1):  # a handful of treated arms
            both = (cnt[:, t_index] > 0) & (cnt[:, 0] > 0)
            g = group_of_pair[both]
            yt, yc = mean[both, t_index], mean[both, 0]
            with np.errstate(over="ignore", invalid="ignore"):  # refused just below
                d = yt - yc
                stats_ = _group_effects(g, yt, yc, n_groups, ratio=bool(ratio))
            what = f"the {arm!r} vs {control!r} effect on {outcome!r}"
            check_no_overflow(d, f"{what}: the pair differences", {outcome: y[valid]}, row="pair")
            usable = stats_["n"] >= 2
            check_no_overflow(
                np.column_stack([stats_["value"], np.where(usable, stats_["std_error"], 0.0)]),
                f"{what}: the value or its standard error",
                {outcome: y[valid]},
                row="group",
            )
            n_used = stats_["n"]
            n_dropped = pairs_in_group - n_used
            if n_dropped.sum():
                dropped_total.append(
                    f"{int(n_dropped.sum())} of {n_pairs} pairs miss arm {arm!r} or "
                    f"{control!r} (or a finite {outcome!r} value in one of them) and are "
                    f"dropped from the {arm!r} vs {control!r} effect on {outcome!r}."
                )
            spread = {}
            for side, a in (("treated", t_index), ("control", 0)):
                spread[side] = _replicate_spread(
                    g, cnt[both, a], mean[both, a], within_ss[both, a], n_groups
                )
            if np.isnan(spread["treated"][1]).all() and np.isnan(spread["control"][1]).all():
                no_spread.append(f"{arm!r} vs {control!r} on {outcome!r}")
            low_high = ranges.get(outcome)
            dlow_dhigh = (
                None if low_high is None else (low_high[0] - low_high[1], low_high[1] - low_high[0])
            )
            n_k = n_used
            ok = n_k >= 2
            for k in np.flatnonzero(~ok):  # only the groups too small to estimate
                small.append(f"{_row_label(arm, outcome, by, group_labels[k])} (n={int(n_k[k])})")
            skew = _grouped_skewness(g, d, stats_["value"], n_groups)
            short = np.zeros(n_groups, dtype=bool)
            floor = _skew_floor(method)
            if method in ("normal", "t"):
                for k in np.flatnonzero(ok):  # loop over groups, not pairs
                    short[k] = skewed_terms(int(n_k[k]), float(skew[k]), min_rows=floor)
                    if short[k]:
                        need = floor + SKEW_ROWS * skew[k] ** 2
                        skewed.append(
                            f"{_row_label(arm, outcome, by, group_labels[k])} (n={int(n_k[k])}, "
                            f"skewness {skew[k]:.3g}, needs {need:.0f})"
                        )
            if method in ("normal", "t"):
                ci_low, ci_high, p = _wald_rows(
                    method, level, stats_["value"], stats_["std_error"], n_k
                )
            else:
                ci_low, ci_high, p = _bounded_rows(
                    method, level, stats_, g, d, n_groups, dlow_dhigh
                )
            if ratio:
                zero = np.flatnonzero((n_k > 0) & (stats_["control_mean"] == 0))
                if zero.size:  # only the groups whose control mean is 0
                    where = (
                        ""
                        if by is None
                        else " in groups "
                        + ", ".join(repr(group_labels[k]) for k in zero[:5])
                        + (" ..." if zero.size > 5 else "")
                    )
                    notes.append(
                        f"the control arm {control!r} has mean 0 on {outcome!r}{where}, so "
                        f"the ratio {arm!r} / {control!r} is undefined: its ratio, standard "
                        "error and interval are NaN (the difference `value` is unaffected)."
                    )
                r_low, r_high, _ = _wald_rows(
                    "t" if method == "t" else "normal",
                    level,
                    stats_["ratio"],
                    stats_["ratio_std_error"],
                    n_k,
                )
            else:
                r_low = r_high = np.full(n_groups, np.nan)
            nan = np.full(n_groups, np.nan)
            block = {
                "treated": [arm] * n_groups,
                "control": [control] * n_groups,
                "outcome": [outcome] * n_groups,
                "group": list(group_labels),
                "n": n_k,
                "n_dropped": n_dropped.astype(np.int64),
                "value": stats_["value"],
                "std_error": stats_["std_error"],
                "ci_low": ci_low,
                "ci_high": ci_high,
                "ci_method": [method] * n_groups,
                "confidence_level": np.full(n_groups, level),
                "p_value": p,
                "p_adjusted": nan,
                "significant": np.zeros(n_groups, dtype=bool),
                "unpaired_std_error": stats_["unpaired_std_error"],
                "treated_mean": stats_["treated_mean"],
                "control_mean": stats_["control_mean"],
                "ratio": stats_["ratio"],
                "ratio_std_error": stats_["ratio_std_error"],
                "ratio_ci_low": r_low,
                "ratio_ci_high": r_high,
                "treated_replicates": spread["treated"][0],
                "control_replicates": spread["control"][0],
                "treated_replicate_sd": spread["treated"][1],
                "control_replicate_sd": spread["control"][1],
                "treated_replicate_share": spread["treated"][2],
                "control_replicate_share": spread["control"][2],
                "skewness": skew,
                "short_interval": short,
            }
            for c in _TABLE_COLUMNS:
                columns[c].append(block[c])

    columns = {c: _concat(v) for c, v in columns.items()}
    p_values = np.asarray(columns["p_value"], dtype=np.float64)
    adjusted = adjust_p_values(p_values, correction=corr)
    columns["p_adjusted"] = adjusted
    columns["significant"] = np.nan_to_num(adjusted, nan=1.0) <= 1.0 - level
    n_tests = int(np.isfinite(p_values).sum())
    if corr != "none" and n_tests > 1:
        notes.append(
            f"p_adjusted: {'Holm' if corr == 'holm' else 'Benjamini-Hochberg'} over all "
            f"{n_tests} rows with a p-value (treated arms x outcomes x groups)."
        )
    if method in _BOUNDED_METHODS:
        notes.append(
            f"{method} intervals and p-values are finite-sample, on pair differences bounded "
            "by reward_range."
            + (" Ratio intervals are asymptotic (delta method, normal)." if ratio else "")
        )
    if dropped_total:
        notes.extend(dropped_total)
        warnings.warn(" ".join(dropped_total), DroppedRowsWarning, stacklevel=user_stacklevel())
    if small:
        msg = (
            f"{plural(len(small), 'row')} {'has' if len(small) == 1 else 'have'} fewer than "
            "two usable pairs, so no standard error, "
            f"interval or p-value: {', '.join(small[:5])}{' ...' if len(small) > 5 else ''}."
        )
        notes.append(msg)
        warnings.warn(msg, SmallSampleWarning, stacklevel=user_stacklevel())
    if skewed:
        msg = skewed_rows_note(skewed, method)
        notes.append(msg)
        warnings.warn(msg, SmallSampleWarning, stacklevel=user_stacklevel())
    if no_spread:
        notes.append(
            "no pair has two replicates of an arm, so the replicate spread is NaN for "
            + "; ".join(no_spread)
            + ". Replay each arm with several seeds to see how repeatable the branches are."
        )
    return PairedEffect(
        treated=tuple(treated_list),
        control=control,
        outcomes=tuple(outcome_list),
        by=by,
        confidence_level=level,
        ci_method=method,
        correction=corr,
        ratio=bool(ratio),
        reward_range=ranges,
        n_pairs=n_pairs,
        notes=tuple(notes),
        _columns=columns,
    )


# ---------------------------------------------------------------------------------------------
# multiplicity
# ---------------------------------------------------------------------------------------------


def adjust_p_values(p_values: Any, *, correction: str = "holm") -> np.ndarray:
    r"""Holm or Benjamini-Hochberg adjusted p-values (NaN entries stay NaN, not counted).

    Parameters
    ----------
    p_values : array_like
        Unadjusted p-values, shape (m,).
    correction : {"holm", "bh", "none"}, default "holm"

    Returns
    -------
    numpy.ndarray
        Adjusted p-values in the input order; reject where ``adjusted <= alpha``.

    Notes
    -----
    Holm: :math:`\tilde p_{(k)} = \max_{j \le k}\min\{1, (m - j + 1)p_{(j)}\}`;
    Benjamini-Hochberg: :math:`\tilde p_{(k)} = \min_{j \ge k}\min\{1, m\,p_{(j)}/j\}`.

    References
    ----------
    .. [1] S. Holm, Scandinavian Journal of Statistics 6(2):65-70, 1979.
    .. [2] Y. Benjamini and Y. Hochberg, JRSS B 57(1):289-300, 1995.

    Examples
    --------
    >>> from ope.paired import adjust_p_values
    >>> adjust_p_values([0.01, 0.04, 0.03], correction="holm").round(4).tolist()
    [0.03, 0.06, 0.06]
    >>> adjust_p_values([0.01, 0.04, 0.03], correction="bh").round(4).tolist()
    [0.03, 0.04, 0.04]
    """
    corr = check_choice(correction, "correction", CORRECTIONS)
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    if corr == "none" or ok.size == 0:
        out[ok] = p[ok]
        return out
    m = ok.size
    order = ok[np.argsort(p[ok], kind="stable")]
    sorted_p = p[order]
    rank = np.arange(1, m + 1, dtype=np.float64)
    if corr == "holm":
        adj = np.maximum.accumulate(np.minimum(1.0, (m - rank + 1.0) * sorted_p))
    else:
        adj = np.minimum.accumulate(np.minimum(1.0, m * sorted_p / rank)[::-1])[::-1]
    out[order] = adj
    return out


# ---------------------------------------------------------------------------------------------
# helpers: arguments
# ---------------------------------------------------------------------------------------------


def _check_outcomes(outcomes: Any, names: Sequence[str]) -> list[str]:
    if isinstance(outcomes, str):
        if outcomes == "all":
            return [o for o in PAIRED_OUTCOMES if o in names]
        return [outcomes]
    if not isinstance(outcomes, Sequence) or not outcomes:
        raise ParameterError(
            f"`outcomes` must be a column name, a non-empty sequence of column names or 'all'; "
            f"got {outcomes!r}."
        )
    bad = [o for o in outcomes if not isinstance(o, str)]
    if bad:
        raise ParameterError(f"`outcomes` must hold column names (str); got {bad!r}.")
    if len(set(outcomes)) != len(outcomes):
        raise ParameterError(f"`outcomes` lists a column twice: {list(outcomes)!r}.")
    return list(outcomes)


def _check_ranges(
    reward_range: Any, outcomes: Sequence[str], method: str
) -> dict[str, tuple[float, float]]:
    if isinstance(reward_range, Mapping):
        unknown = [k for k in reward_range if k not in outcomes]
        if unknown:
            raise ParameterError(
                f"`reward_range` gives ranges for {unknown!r}, which are not among the outcomes "
                f"analysed ({', '.join(outcomes)})."
            )
        ranges = {}
        for k, v in reward_range.items():
            rr = check_reward_range(v)
            if rr is not None:
                ranges[k] = rr
    else:
        rr = check_reward_range(reward_range)
        ranges = {} if rr is None else {o: rr for o in outcomes}
    if method in _BOUNDED_METHODS:
        lacking = [o for o in outcomes if o not in ranges]
        if lacking:
            raise MissingBoundsError(
                f"ci={method!r} needs the a priori range of every outcome, and "
                f"{', '.join(map(repr, lacking))} has none: pass reward_range=(low, high), or "
                "reward_range={outcome: (low, high), ...} per outcome (e.g. (0, 1) for task "
                "success). Observed minima and maxima are not bounds; use ci='normal' for unbounded "
                "outcomes."
            )
    return ranges


def _check_arms(treated: Any, control: Any, present: list[Any]) -> list[Any]:
    if isinstance(treated, (str, bytes)) or not isinstance(treated, Sequence):
        treated_list = [treated]
    else:
        treated_list = list(treated)
    if not treated_list:
        raise ParameterError("`treated` must name at least one arm.")
    arms = ", ".join(map(repr, sorted(present, key=str)))
    for name, given in (("treated", treated_list), ("control", [control])):
        unknown = [a for a in given if a not in present]
        if unknown:
            raise ParameterError(
                f"`{name}`: arm{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(repr(a)[:80] for a in unknown)} "
                f"{'are' if len(unknown) > 1 else 'is'} not in the replays; their arms are: "
                f"{arms}."
            )
    if control in treated_list:
        raise ParameterError(
            f"the control arm {control!r} is also listed in `treated`; compare distinct arms."
        )
    if len(set(treated_list)) != len(treated_list):
        raise ParameterError(f"`treated` lists an arm twice: {treated_list!r}.")
    return treated_list


# ---------------------------------------------------------------------------------------------
# helpers: codes and grouped sums
# ---------------------------------------------------------------------------------------------


def _check_column_types(table: pa.Table, outcomes: Sequence[str], by: str | None) -> None:
    """A SchemaError naming the column when an outcome is not numeric (numbers or booleans) or
    the segment column ``by`` holds nested values (lists, structs, maps), not one label per
    row."""
    for name in outcomes:
        kind = table.schema.field(name).type
        numeric = (pa.types.is_integer, pa.types.is_floating, pa.types.is_decimal)
        if not any(test(kind) for test in (*numeric, pa.types.is_boolean, pa.types.is_null)):
            raise SchemaError(
                f"outcome column {name!r} holds {kind}; an outcome is one number per row "
                "(a reward, a cost, a latency). Pass outcomes=[...] naming numeric columns."
            )
    if by is not None:
        kind = table.schema.field(by).type
        if pa.types.is_nested(kind):
            raise SchemaError(
                f"segment column {by!r} holds {kind}, not one label per row; pass by=... "
                "naming a column of strings, numbers or booleans (one segment per pair)."
            )


def _floats(col: pa.ChunkedArray) -> np.ndarray:
    """A numeric column as float64 with nulls as NaN."""
    arr = pc.cast(col, pa.float64()) if not pa.types.is_floating(col.type) else col
    return np.asarray(pc.fill_null(arr, math.nan).to_numpy(), dtype=np.float64)


def _dense_codes(col: pa.ChunkedArray) -> tuple[np.ndarray, int]:
    """Integer codes 0..k-1 of a column's distinct values (nulls get their own code)."""
    enc = pc.dictionary_encode(col.combine_chunks())
    k = len(enc.dictionary)
    codes = pc.fill_null(enc.indices, k).to_numpy(zero_copy_only=False).astype(np.int64)
    return codes, k + int(enc.null_count > 0)


def _codes(col: pa.ChunkedArray, values: list[Any]) -> np.ndarray:
    """Index of each row's value in ``values`` (-1 when absent)."""
    idx = pc.index_in(col, value_set=pa.array(values, type=col.type))
    return pc.fill_null(idx, -1).to_numpy(zero_copy_only=False).astype(np.int64)


def _groups(
    table: pa.Table, by: str | None, pair_code: np.ndarray, n_pairs: int
) -> tuple[np.ndarray, list[Any]]:
    """Group code of each pair and the group labels (one group ``None`` without ``by``)."""
    if by is None:
        return np.zeros(n_pairs, dtype=np.int64), [None]
    col = table.column(by).combine_chunks()
    enc = pc.dictionary_encode(col)
    labels = enc.dictionary.to_pylist()
    k = len(labels)
    codes = pc.fill_null(enc.indices, k).to_numpy(zero_copy_only=False).astype(np.int64)
    if enc.null_count:
        labels.append(None)
    lo = np.full(n_pairs, np.iinfo(np.int64).max)
    hi = np.full(n_pairs, -1)
    np.minimum.at(lo, pair_code, codes)
    np.maximum.at(hi, pair_code, codes)
    seen = hi >= 0
    if (lo[seen] != hi[seen]).any():
        bad = int((lo[seen] != hi[seen]).sum())
        raise ValidationError(
            f"`by` column {by!r} must be constant within each pair (it names what the pair "
            f"tests, e.g. the item injected); {bad} pairs have several values. Group by a "
            "column of the shared prefix."
        )
    group_of_pair = np.where(seen, lo, 0)
    # order groups by label where the labels are comparable (ids, names)
    try:
        order = sorted(range(len(labels)), key=lambda i: (labels[i] is None, labels[i]))
    except TypeError:
        order = list(range(len(labels)))
    rank = np.empty(len(labels), dtype=np.int64)
    rank[order] = np.arange(len(labels))
    return rank[group_of_pair], [labels[i] for i in order]


def _cell_stats(cell: np.ndarray, y: np.ndarray, n_cells: int) -> tuple[np.ndarray, ...]:
    """Count, mean and within-cell sum of squared deviations of ``y`` per cell."""
    cnt = np.bincount(cell, minlength=n_cells).astype(np.float64)
    total = np.bincount(cell, weights=y, minlength=n_cells)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / cnt
    dev = y - mean[cell]
    with np.errstate(over="ignore"):  # outcomes near 1e300: inf, named by the overflow check
        ss = np.bincount(cell, weights=dev * dev, minlength=n_cells)
    return cnt, mean, ss


def _row_label(arm: Any, outcome: str, by: str | None, group: Any) -> str:
    """A row of the table in a note: ``'treated'/'outcome'``, and ``/'group'`` with ``by``
    (without it every row's group is None, a column the summary does not show)."""
    label = f"{arm!r}/{outcome!r}"
    return label if by is None else f"{label}/{group!r}"


def _grouped_skewness(g: np.ndarray, x: np.ndarray, mean: np.ndarray, n_groups: int) -> np.ndarray:
    """Sample skewness ``m3 / m2**1.5`` of ``x`` per group about the group ``mean`` (NaN below
    two values, 0 where the values do not vary)."""
    n = np.bincount(g, minlength=n_groups).astype(np.float64)
    dev = x - mean[g]
    top = float(np.max(np.abs(dev))) if dev.size else 0.0
    if top > 0 and math.isfinite(top):  # in units of the largest deviation: no cube overflows
        dev = dev / top
    sq = dev * dev
    with np.errstate(invalid="ignore", divide="ignore"):
        m2 = np.bincount(g, weights=sq, minlength=n_groups) / n
        m3 = np.bincount(g, weights=sq * dev, minlength=n_groups) / n
        skew = np.where(m2 > 0, m3 / np.where(m2 > 0, m2, 1.0) ** 1.5, 0.0)
    skew[n < 2] = np.nan
    return skew


def _skew_floor(method: str) -> float:
    """The additive term of the skewed-terms rule for a paired ``method``: SKEW_MIN_ROWS for
    normal, none for t (its quantile already corrects for few symmetric pairs)."""
    return SKEW_MIN_ROWS if method == "normal" else 0.0


def skewed_rows_note(rows: Sequence[str], method: str) -> str:
    """The note of the rows (``treated/outcome[/group] (n=..., skewness ...)``) whose pair
    differences are too skewed for their ``method`` ("normal" or "t") interval
    (:func:`ope._thresholds.skewed_terms`)."""
    shown = ", ".join(rows[:5]) + (" ..." if len(rows) > 5 else "")
    count = f"{len(rows)} row has" if len(rows) == 1 else f"{len(rows)} rows have"
    floor = f"{_skew_floor(method):g} + " if _skew_floor(method) else ""
    advice = (
        "ci='t' corrects the normal quantile for few pairs (enough when the differences are "
        "roughly symmetric); "
        if method == "normal"
        else ""
    )
    return (
        f"{count} too few pairs for their skew to trust their {method} "
        f"intervals and p-values (the central limit theorem needs about {floor}"
        f"{SKEW_ROWS:g} x skewness^2 pairs; column short_interval): their intervals are likely "
        f"too short and their p-values too small, the adjusted ones too: {shown}. {advice}"
        "ci='betting' or ci='bernstein' with the outcomes' reward_range hold at any n."
    )


def _grouped_mean_var(g: np.ndarray, x: np.ndarray, n_groups: int) -> tuple[np.ndarray, ...]:
    """Count, mean, unbiased variance and standard deviation of ``x`` per group (two-pass,
    centred), each group computed in units of a power of two that brings its largest finite
    |x| into [1, 2) (exact). The standard deviation is taken in those units and scaled back,
    so it stays exact where the variance is past float64's range (differences near 1e-170: a
    variance near 1e-340 underflows to 0)."""
    n = np.bincount(g, minlength=n_groups).astype(np.float64)
    # per group: groups of outcomes near 1e150 and 1e-150 side by side keep their own units
    top = np.zeros(n_groups)
    finite = np.isfinite(x)
    np.maximum.at(top, g[finite], np.abs(x[finite]))
    exponent = np.frexp(top)[1]  # top = m 2**e with m in [0.5, 1): 2**(e - 1) <= top
    scale = np.where(top > 0.0, np.ldexp(1.0, exponent - 1), 1.0)
    u = x / scale[g]
    with np.errstate(invalid="ignore", divide="ignore", over="ignore", under="ignore"):
        mean = np.bincount(g, weights=u, minlength=n_groups) / n
        dev = u - mean[g]
        var = np.bincount(g, weights=dev * dev, minlength=n_groups) / (n - 1.0)
        var[n < 2] = np.nan
        return n, mean * scale, var * (scale * scale), np.sqrt(var) * scale


def _group_effects(
    g: np.ndarray, yt: np.ndarray, yc: np.ndarray, n_groups: int, *, ratio: bool
) -> dict[str, np.ndarray]:
    """Paired effect, paired and unpaired standard errors (and the ratio) per group."""
    n, value, var_d, sd_d = _grouped_mean_var(g, yt - yc, n_groups)
    _, mt, _, sd_t = _grouped_mean_var(g, yt, n_groups)
    _, mc, _, sd_c = _grouped_mean_var(g, yc, n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = {
            "n": n.astype(np.int64),
            "value": value,
            "variance": var_d,
            "std_error": sd_d / np.sqrt(n),
            "unpaired_std_error": np.hypot(sd_t, sd_c) / np.sqrt(n),
            "treated_mean": mt,
            "control_mean": mc,
            "ratio": np.full(n_groups, np.nan),
            "ratio_std_error": np.full(n_groups, np.nan),
        }
        if ratio:
            # a control mean of 0 leaves the ratio undefined (not inf): NaN, and a note
            rho = np.where(mc == 0, np.nan, mt / mc)
            psi = (yt - rho[g] * yc) / mc[g]
            sd_psi = _grouped_mean_var(g, psi, n_groups)[3]
            out["ratio"] = rho
            out["ratio_std_error"] = sd_psi / np.sqrt(n)  # NaN with rho: psi is NaN there
    return out


def _replicate_spread(
    g: np.ndarray, cnt: np.ndarray, mean: np.ndarray, ss: np.ndarray, n_groups: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean replicates per pair, pooled within-pair SD and between-replicate share, per group."""
    n = np.bincount(g, minlength=n_groups).astype(np.float64)
    df = np.bincount(g, weights=cnt - 1.0, minlength=n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        reps = np.bincount(g, weights=cnt, minlength=n_groups) / n
        within = np.bincount(g, weights=ss, minlength=n_groups) / df
        within[df <= 0] = np.nan
        inv_r = np.bincount(g, weights=1.0 / cnt, minlength=n_groups) / n
        var_means = _grouped_mean_var(g, mean, n_groups)[2]
        between = np.maximum(0.0, var_means - within * inv_r)
        total = within + between
        share = np.where(total > 0, within / total, np.nan)
    share[~np.isfinite(within)] = np.nan
    return reps, np.sqrt(within), share


# ---------------------------------------------------------------------------------------------
# helpers: intervals and p-values
# ---------------------------------------------------------------------------------------------


def _concat(blocks: list[Any]) -> np.ndarray:
    """One table column from its per-(arm, outcome) blocks (labels stay Python objects)."""
    if blocks and isinstance(blocks[0], list):
        out = np.empty(sum(len(b) for b in blocks), dtype=object)
        out[:] = [x for b in blocks for x in b]
        return out
    return np.concatenate(blocks) if blocks else np.empty(0)


def _wald_rows(
    method: str, level: float, value: np.ndarray, se: np.ndarray, n: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Normal or t intervals and two-sided p-values of no effect, for all groups at once.

    The same numbers as :func:`ope.intervals.normal_interval` / :func:`t_interval` row by row
    (``value +/- q se``), computed as arrays because a table may have thousands of groups.
    """
    ok = (n >= 2) & np.isfinite(se) & np.isfinite(value)
    df = np.maximum(n - 1, 1).astype(np.float64)
    if method == "t":
        q = stats.t.ppf(0.5 + level / 2.0, df)
    else:
        q = np.full(value.shape, normal_quantile(0.5 + level / 2.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        stat = np.abs(value) / se
        p = 2.0 * (stats.t.sf(stat, df) if method == "t" else stats.norm.sf(stat))
    zero_se = ok & (se == 0)
    p[zero_se] = np.where(value[zero_se] == 0, 1.0, 0.0)
    low, high = value - q * se, value + q * se
    for arr in (low, high, p):
        arr[~ok] = np.nan
    return low, high, np.minimum(1.0, p)


def _bounded_rows(
    method: str,
    level: float,
    stats_: dict[str, np.ndarray],
    g: np.ndarray,
    d: np.ndarray,
    n_groups: int,
    bounds: tuple[float, float] | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Finite-sample intervals and p-values, one interval call per group (not per pair)."""
    assert bounds is not None
    low_b, high_b = bounds
    width = high_b - low_b
    out = np.full((3, n_groups), np.nan)
    order = np.argsort(g, kind="stable")
    edges = np.searchsorted(g[order], np.arange(n_groups + 1))
    for k in range(n_groups):  # one interval per table row
        n = int(stats_["n"][k])
        if n < 2:
            continue
        value = float(stats_["value"][k])
        variance = float(stats_["variance"][k])
        if method == "hoeffding":
            iv = hoeffding_interval(value, n, low=low_b, high=high_b, confidence_level=level)
            # the interval excludes 0 iff |mean| > width sqrt(ln(2 / alpha) / (2 n))
            p = 2.0 * math.exp(-2.0 * n * value * value / (width * width))
        elif method == "bernstein":
            iv = bernstein_interval(
                value, variance, n, low=low_b, high=high_b, confidence_level=level
            )
            # |mean| = sqrt(2 s^2 L / n) + 7 width L / (3 (n - 1)), L = ln(4 / alpha): a
            # quadratic in u = sqrt(L)
            a = 7.0 * width / (3.0 * (n - 1))
            b = math.sqrt(2.0 * variance / n)
            u = (-b + math.sqrt(b * b + 4.0 * a * abs(value))) / (2.0 * a)
            p = 4.0 * math.exp(-u * u)
        else:
            diffs = d[order[edges[k] : edges[k + 1]]]
            ones = np.ones(diffs.size)
            iv = betting_interval(ones, diffs, reward_range=bounds, confidence_level=level)
            p = _betting_p_value(ones, diffs, bounds)
        out[:, k] = (float(iv.low), float(iv.high), min(1.0, p))
    return out[0], out[1], out[2]


def _betting_p_value(ones: np.ndarray, diffs: np.ndarray, bounds: tuple[float, float]) -> float:
    """Smallest ``1 - level`` at which the betting interval excludes 0 (bisection on log)."""

    def excludes(alpha: float) -> bool:
        iv = betting_interval(ones, diffs, reward_range=bounds, confidence_level=1.0 - alpha)
        return bool(iv.low > 0.0 or iv.high < 0.0)

    lo, hi = math.log(_BETTING_PVALUE_FLOOR), 0.0  # excludes(exp(lo)) False unless p tiny
    if excludes(_BETTING_PVALUE_FLOOR):
        return _BETTING_PVALUE_FLOOR
    if not excludes(1.0 - 1e-12):
        return 1.0
    for _ in range(_BETTING_PVALUE_STEPS):  # bisection steps, not rows
        mid = 0.5 * (lo + hi)
        if excludes(math.exp(mid)):
            hi = mid
        else:
            lo = mid
    return math.exp(hi)


def _reasons(report: Any) -> str:
    """``reason: count`` pairs of a ValidationReport."""
    return ", ".join(f"{k}: {v}" for k, v in report.rejected.items()) or "see replays.report"
