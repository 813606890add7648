"""The exploration plan: the smallest share of traffic to explore so that new logs suffice.

For each policy, one scope for all traffic and one per flagged context segment: the new logger
plays the candidate's own distribution on a share ``eps`` of the traffic in scope and the
current logger elsewhere. The predicted variance of IPS -- the terms ``w r`` of
:class:`ope.estimators.IPS`, on the rewards' own scale, so the prediction is the width of the
normal interval ope reports on such logs whatever the reward range -- is estimated from the
current logs and is convex in ``eps``; the plan is the smallest ``eps`` that reaches the wanted
width (a golden-section search for the minimum, then a bisection). Each plan row is also broken
down by action (:func:`action_plan`): which actions the new logger plays more, on how much of
the traffic. The mathematics is in :meth:`ope.Diagnostics.plan`.
"""

from __future__ import annotations

from ope._format import format_share

import math
from collections.abc import Sequence
from typing import Any, Final

import numpy as np
import pandas as pd

from ope.diagnostics._inputs import Inputs
from ope.diagnostics.segments import SegmentRow
from ope.exceptions import ParameterError, ValidationError
from ope.intervals._shared import normal_quantile

__all__ = [
    "PLAN_COLUMNS",
    "ACTION_PLAN_COLUMNS",
    "UNLOGGED_ACTIONS",
    "exploration_plan",
    "action_plan",
]

#: Iterations of the golden-section and bisection searches (the bracket shrinks to 1e-12 of its
#: size, far below any meaningful traffic share).
_SEARCH_ITERATIONS: Final = 60

PLAN_COLUMNS: Final = (
    "policy",
    "column",
    "segment",
    "rows_in_scope",
    "exploration_share",
    "exploration_rows",
    "predicted_width",
    "target_width",
    "new_rows",
    "feasible",
    "rows_needed",
    "reason",
)

ACTION_PLAN_COLUMNS: Final = (
    "policy",
    "column",
    "segment",
    "action",
    "target_mass",
    "logging_share",
    "planned_share",
    "extra_share",
    "variance_share",
)

#: Label of the action-plan row for the candidate's mass on actions the logs never show.
UNLOGGED_ACTIONS: Final = "(actions never logged)"

#: The most new rows a plan states (the int64 maximum of its ``rows_needed`` column): a
#: ``target_width`` that needs more is refused as unreachable rather than overflowing.
_MAX_PLAN_ROWS: Final = 2**63 - 1


def _rows_for(variance: float, width: float, z: float) -> int:
    """``ceil(variance (2 z / width)^2)``: the new rows whose normal interval of IPS terms of
    this variance has this width."""
    if variance <= 0.0:
        return 0
    scale = 2.0 * z / width  # inf for a subnormal width: then the rows overflow below
    rows = variance * scale * scale
    if not rows <= _MAX_PLAN_ROWS:
        raise ParameterError(
            f"`target_width`={width:g} cannot be planned: an interval that narrow needs more "
            f"than {_MAX_PLAN_ROWS:.3g} new rows. Pass a width on the scale of the rewards "
            "(e.g. 0.05 for rewards in [0, 1])."
        )
    return int(math.ceil(rows))


def _plan_for_scope(
    *,
    w: np.ndarray,
    pe: np.ndarray,
    p: np.ndarray,
    r2: np.ndarray,
    in_scope: np.ndarray | None,
    d_scope: float,
    d_out: float,
    r2_max: float,
    v_sq: float,
    n: float,
    target_var: float,
    sampling: np.ndarray | None = None,
) -> tuple[float | None, float, float, float]:
    """Smallest exploration share eps meeting ``target_var``.

    ``n`` is the number of rows (``sum s`` with sampling weights ``sampling``, which then
    weight every row's term: each mean is a Hajek mean).

    Returns ``(eps or None, variance at eps (or at the best eps), best eps, variance under the
    current logging (inf with unsupported mass in scope))``.
    """
    if d_out > 0:
        return None, math.inf, math.nan, math.inf
    contrib = (w * r2) != 0
    if in_scope is None:
        sel_in = contrib
        outside = 0.0
    else:
        sel_in = contrib & in_scope
        sel_out = contrib & ~in_scope
        out_terms = w[sel_out] ** 2 * r2[sel_out]
        if sampling is not None:
            out_terms = out_terms * sampling[sel_out]
        outside = float(out_terms.sum(dtype=np.float64)) / n
    a = w[sel_in] * pe[sel_in] * r2[sel_in]
    if sampling is not None:
        a = a * sampling[sel_in]
    pi = p[sel_in]
    ti = pe[sel_in]

    def variance(eps: float) -> float:
        supported = float((a / ((1.0 - eps) * pi + eps * ti)).sum(dtype=np.float64)) / n
        unsupported = r2_max * d_scope / eps if d_scope > 0 else 0.0
        return max(supported + outside + unsupported - v_sq, 0.0)

    # variance(eps) is convex on (0, 1]: a sum of reciprocals of affine functions of eps
    v0 = variance(0.0) if d_scope == 0 else math.inf
    if v0 <= target_var:
        return 0.0, v0, 0.0, v0
    lo, hi = 1e-12, 1.0
    golden = (math.sqrt(5.0) - 1.0) / 2.0
    for _ in range(_SEARCH_ITERATIONS):
        x1 = hi - golden * (hi - lo)
        x2 = lo + golden * (hi - lo)
        if variance(x1) <= variance(x2):
            hi = x2
        else:
            lo = x1
    best = (lo + hi) / 2.0
    v_best = variance(best)
    if v_best > target_var:
        return None, v_best, best, v0
    lo, hi = 0.0, best
    for _ in range(_SEARCH_ITERATIONS):
        mid = (lo + hi) / 2.0
        if mid > 0 and variance(mid) <= target_var:
            hi = mid
        else:
            lo = mid
    return hi, variance(hi), best, v0


def _unsupported(
    w: np.ndarray,
    d_row: np.ndarray | None,
    mask: np.ndarray | None,
    n: float,
    sampling: np.ndarray | None = None,
) -> tuple[float, float]:
    """Unsupported candidate mass (per logged row, i.e. divided by n) in and out of scope.

    With sampling weights ``s`` (``n`` is then ``sum s``) the sums are ``sum s d`` and, for
    the estimate from the weights, ``sum s (1 - w)`` with the linearized standard error
    ``sqrt(m / (m - 1) sum s^2 (x - xbar_s)^2) / n`` over the ``m`` rows in scope.
    """
    if d_row is not None:
        if sampling is not None:
            d_row = sampling * d_row
        if mask is None:
            return float(d_row.sum()) / n, 0.0
        return float(d_row[mask].sum()) / n, float(d_row[~mask].sum()) / n

    def estimate(sel: np.ndarray | None) -> float:
        x = 1.0 - (w if sel is None else w[sel])
        if x.size < 2:
            return 0.0
        if sampling is not None:
            v = sampling if sel is None else sampling[sel]
            total = float(np.dot(v, x)) / n
            dev = v * (x - float(np.dot(v, x)) / float(v.sum()))
            se = math.sqrt(float(np.dot(dev, dev)) * x.size / (x.size - 1.0)) / n
            return total if total > 2.0 * se else 0.0
        total = float(x.sum(dtype=np.float64)) / n
        se = float(np.std(x, ddof=1)) * math.sqrt(x.size) / n
        return total if total > 2.0 * se else 0.0

    if mask is None:
        return estimate(None), 0.0
    return estimate(mask), estimate(~mask)


def _scope_row(
    name: str,
    column: str,
    label: str,
    in_scope_rows: int,
    n: int,
    where: str,
    *,
    eps: float | None,
    var: float,
    best: float,
    var0: float,
    tw: float,
    m_rows: int,
    z: float,
    scope_size: float | None = None,
    size: float | None = None,
) -> dict[str, Any]:
    """One plan row. ``scope_size / size`` (default ``in_scope_rows / n``) is the scope's
    share of the traffic (of ``sum s`` with sampling weights)."""
    scope_size = in_scope_rows if scope_size is None else scope_size
    size = n if size is None else size
    # the same logging alone: its width on m_rows rows and the rows it needs for tw
    if math.isfinite(var0):
        same = (
            f" (under the current logging alone: width about "
            f"{2.0 * z * math.sqrt(max(var0, 0.0) / m_rows):.3g}, or about "
            f"{_rows_for(var0, tw, z):,} new rows for width {tw:g})"
        )
    else:
        same = " (the current logging alone never reaches it: it leaves mass unsupported)"
    entry: dict[str, Any] = {
        "policy": name,
        "column": column,
        "segment": label,
        "rows_in_scope": in_scope_rows,
        "target_width": tw,
        "new_rows": m_rows,
    }
    if eps is not None:
        width = 2.0 * z * math.sqrt(max(var, 0.0) / m_rows)
        entry.update(
            exploration_share=eps,
            exploration_rows=int(math.ceil(eps * m_rows * scope_size / size)),
            predicted_width=width,
            feasible=True,
            rows_needed=m_rows,
            reason=(
                f"no exploration needed for the width: {m_rows:,} new rows under the current "
                f"logging give {name} an IPS interval of width about {width:.3g} <= {tw:g} "
                f"({where})"
                if eps == 0
                else f"on {where}, play {name}'s own choice on {format_share(eps)} of the "
                f"traffic (every action it takes then has logging propensity >= "
                f"{eps:.3g} x its probability); {m_rows:,} new rows then give an IPS "
                f"interval of width about {width:.3g} <= {tw:g}{same}"
            ),
        )
    elif math.isinf(var):
        entry.update(
            exploration_share=math.nan,
            exploration_rows=0,
            predicted_width=math.inf,
            feasible=False,
            rows_needed=-1,
            reason=(
                f"{name} also puts mass on unsupported actions outside {where}; "
                "exploring here alone cannot remove that bias (see the 'all' row)"
            ),
        )
    else:
        need = _rows_for(var, tw, z)
        entry.update(
            exploration_share=best,
            exploration_rows=int(math.ceil(best * m_rows * scope_size / size)),
            predicted_width=2.0 * z * math.sqrt(var / m_rows),
            feasible=False,
            rows_needed=need,
            reason=(
                f"no exploration share reaches width {tw:g} with {m_rows:,} new rows "
                f"for {name} ({where}); at the best share {format_share(best)} it needs about "
                f"{need:,} new rows"
            ),
        )
    return entry


def _plan_value_sq(ips: float, low: float, high: float, unsupported: bool) -> float:
    """The squared value the planned variance subtracts (``Var = S - V^2``).

    Under full support the IPS value of the current logs, kept inside the Bottou interval
    ``[low, high]``; with unsupported mass the value is only known to lie in that interval, so
    the V of smallest square in it (the conservative choice: it predicts the widest interval).
    """
    if not unsupported:
        v = min(max(ips, low), high)
        return v * v
    if low <= 0.0 <= high:
        return 0.0
    return min(low * low, high * high)


def exploration_plan(
    data: Inputs,
    segments: Sequence[Sequence[SegmentRow]],
    value_bounds: Sequence[tuple[float, float]],
    *,
    reward_range: tuple[float, float],
    confidence_level: float,
    target_width: float,
    new_rows: int,
) -> pd.DataFrame:
    """The plan table; ``value_bounds`` are each policy's Bottou interval ``(low, high)``.

    With sampling weights every mean over the current rows is a Hajek mean (``n`` becomes
    ``sum s`` and each row's term is multiplied by ``s``): the plan is for ``new_rows`` rows
    of an unsampled log. ``rows_in_scope`` counts the kept rows; ``exploration_rows`` uses the
    scope's share of ``sum s``.
    """
    lo, hi = reward_range
    r2_max = max(lo * lo, hi * hi)
    n = data.total()
    sampling = data.sampling
    z = normal_quantile(0.5 + confidence_level / 2.0)
    half = target_width / (2.0 * z)
    target_var = new_rows * half * half  # inf for a width near the float64 maximum: no limit
    r2 = data.reward * data.reward
    rows: list[dict[str, Any]] = []
    for j, name in enumerate(data.names):
        w = data.weights(j)
        ips = float(np.dot(data.sampled(w), data.reward)) / n
        pe = data.column(j).astype(np.float64)
        d_row = None if data.deficiency_zero is None else data.deficiency_zero[name]
        scopes: list[tuple[str, str, np.ndarray | None]] = [("all", "all", None)]
        for s in segments[j]:
            seg = data.segmentation(s.column)
            if s.gap and s.context and seg is not None:
                scopes.append((s.column, s.segment, seg.codes == seg.labels.index(s.segment)))
        for column, label, mask in scopes:  # a loop over scopes (flagged segments)
            d_scope, d_out = _unsupported(w, d_row, mask, n, sampling)
            v_sq = _plan_value_sq(ips, *value_bounds[j], unsupported=d_scope + d_out > 0)
            eps, var, best, var0 = _plan_for_scope(
                w=w,
                pe=pe,
                p=data.propensity,
                r2=r2,
                in_scope=mask,
                d_scope=d_scope,
                d_out=d_out,
                r2_max=r2_max,
                v_sq=v_sq,
                n=n,
                target_var=target_var,
                sampling=sampling,
            )
            rows_in = data.n if mask is None else int(mask.sum())
            scope_size = (
                None if sampling is None else n if mask is None else float(sampling[mask].sum())
            )
            rows.append(
                _scope_row(
                    name,
                    column,
                    label,
                    rows_in,
                    data.n,
                    "all traffic" if mask is None else f"segment {column}={label}",
                    eps=eps,
                    var=var,
                    best=best,
                    var0=var0,
                    tw=target_width,
                    m_rows=new_rows,
                    z=z,
                    scope_size=scope_size,
                    size=None if sampling is None else n,
                )
            )
    return pd.DataFrame(rows, columns=list(PLAN_COLUMNS))


def action_plan(data: Inputs, plan: pd.DataFrame) -> pd.DataFrame:
    """Per-action breakdown of each plan row: which actions to play more, on how much traffic.

    For a plan row with share ``eps`` on scope ``A`` the new logger plays action ``a`` on
    ``(1 - eps) logging_share + eps target_mass`` of the traffic in scope, where
    ``logging_share`` is the share of the logged rows in scope with action ``a`` and
    ``target_mass = sum_{i in A, a_i = a} w_i / |A|`` the candidate's mass on ``a`` there (an
    unbiased estimate where the logger plays ``a``). ``extra_share`` is the difference: the
    share of the scope's traffic to move onto ``a``. ``variance_share`` is the action's part of
    the second moment ``sum w_i^2 r_i^2`` of the current IPS terms in scope (where the interval's
    width comes from). The candidate's mass the weights do not recover (actions never logged)
    is one more row, ``(actions never logged)``, when it is positive (exact from the
    distributions, else estimated as in the plan: only when above two standard errors). Only
    actions with ``extra_share > 0`` are listed, largest ``extra_share`` first. With sampling
    weights ``s`` the shares and masses are Hajek means over the scope (``sum s`` in place of
    ``|A|``, each row's term times ``s``).
    """
    if data.action is None:
        raise ValidationError(
            "a per-action plan needs the logged actions; pass `action=` to diagnose_arrays "
            "(diagnose reads it from the logs)."
        )
    labels: list[Any] = list(data.action_labels or [])
    k = max(len(labels), int(data.action.max()) + 1 if data.action.size else 0)
    labels = labels + list(range(len(labels), k))
    out: list[pd.DataFrame] = []
    by_policy: dict[str, np.ndarray] = {}
    for row in plan.itertuples(index=False):  # a loop over plan rows (policies x scopes)
        eps = row.exploration_share
        if not np.isfinite(eps) or eps <= 0:
            continue
        j = data.names.index(row.policy)
        if row.policy not in by_policy:
            by_policy[row.policy] = data.weights(j)
        w = by_policy[row.policy]
        mask = None
        if row.column != "all":
            seg = data.segmentation(row.column)
            assert seg is not None
            mask = seg.codes == seg.labels.index(row.segment)
        act = data.action if mask is None else data.action[mask]
        ws = w if mask is None else w[mask]
        rs = data.reward if mask is None else data.reward[mask]
        ss = (
            None
            if data.sampling is None
            else (data.sampling if mask is None else data.sampling[mask])
        )
        size = act.size if ss is None else float(ss.sum())
        logging_share = np.bincount(act, weights=ss, minlength=k) / size
        sws = ws if ss is None else ss * ws
        target_mass = np.bincount(act, weights=sws, minlength=k) / size
        second = np.bincount(act, weights=sws * ws * rs * rs, minlength=k)
        total = float(second.sum())
        d_row = None if data.deficiency_zero is None else data.deficiency_zero[row.policy]
        d_scope, _ = _unsupported(w, d_row, mask, data.total(), data.sampling)
        unlogged = d_scope * data.total() / size  # per row of the scope; 0 unless significant
        planned = (1.0 - eps) * logging_share + eps * target_mass
        extra = planned - logging_share
        keep = np.flatnonzero(extra > 0)
        table = pd.DataFrame(
            {
                "policy": row.policy,
                "column": row.column,
                "segment": row.segment,
                "action": [labels[a] for a in keep],
                "target_mass": target_mass[keep],
                "logging_share": logging_share[keep],
                "planned_share": planned[keep],
                "extra_share": extra[keep],
                "variance_share": second[keep] / total if total > 0 else 0.0,
            }
        )
        if unlogged > 0:
            table = pd.concat(
                [
                    table,
                    pd.DataFrame(
                        [
                            {
                                "policy": row.policy,
                                "column": row.column,
                                "segment": row.segment,
                                "action": UNLOGGED_ACTIONS,
                                "target_mass": unlogged,
                                "logging_share": 0.0,
                                "planned_share": eps * unlogged,
                                "extra_share": eps * unlogged,
                                "variance_share": math.nan,
                            }
                        ]
                    ),
                ],
                ignore_index=True,
            )
        out.append(table.sort_values("extra_share", ascending=False, kind="stable"))
    if not out:
        return pd.DataFrame(columns=list(ACTION_PLAN_COLUMNS))
    return pd.concat(out, ignore_index=True)[list(ACTION_PLAN_COLUMNS)]
