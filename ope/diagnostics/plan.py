"""The exploration plan: the smallest share of traffic to explore so that new logs suffice.

For each policy, one scope for all traffic and one per flagged context segment: the new logger
plays the candidate's own distribution on a share ``eps`` of the traffic in scope and the
current logger elsewhere. The predicted variance of IPS on such logs is estimated from the
current logs and is convex in ``eps``; the plan is the smallest ``eps`` that reaches the wanted
width (a golden-section search for the minimum, then a bisection). The mathematics is in
:meth:`ope.Diagnostics.plan`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final

import numpy as np
import pandas as pd
from scipy import stats

from ope.diagnostics._inputs import Inputs
from ope.diagnostics.segments import SegmentRow

__all__ = ["PLAN_COLUMNS", "exploration_plan"]

#: Iterations of the golden-section and bisection searches (the bracket shrinks to 1e-12 of its
#: size, far below any meaningful traffic share).
_SEARCH_ITERATIONS: Final = 60

PLAN_COLUMNS: Final = (
    "policy", "column", "segment", "rows_in_scope", "exploration_share", "exploration_rows",
    "predicted_width", "target_width", "new_rows", "feasible", "rows_needed", "reason",
)


def _plan_for_scope(
    *,
    w: np.ndarray,
    pe: np.ndarray,
    p: np.ndarray,
    ell2: np.ndarray,
    in_scope: np.ndarray | None,
    d_scope: float,
    d_out: float,
    m: float,
    v_lower: float,
    n: int,
    target_var: float,
) -> tuple[float | None, float, float]:
    """Smallest exploration share eps meeting ``target_var``.

    Returns ``(eps or None, variance at eps (or at the best eps), best eps)``.
    """
    if d_out > 0:
        return None, math.inf, math.nan
    contrib = (w * ell2) != 0
    if in_scope is None:
        sel_in = contrib
        outside = 0.0
    else:
        sel_in = contrib & in_scope
        sel_out = contrib & ~in_scope
        outside = float((w[sel_out] ** 2 * ell2[sel_out]).sum(dtype=np.float64)) / n
    a = w[sel_in] * pe[sel_in] * ell2[sel_in]
    pi = p[sel_in]
    ti = pe[sel_in]

    def variance(eps: float) -> float:
        supported = float((a / ((1.0 - eps) * pi + eps * ti)).sum(dtype=np.float64)) / n
        unsupported = m * m * d_scope / eps if d_scope > 0 else 0.0
        return supported + outside + unsupported - v_lower * v_lower

    # variance(eps) is convex on (0, 1]: a sum of reciprocals of affine functions of eps
    if d_scope == 0 and variance(0.0) <= target_var:
        return 0.0, variance(0.0), 0.0
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
        return None, v_best, best
    lo, hi = 0.0, best
    for _ in range(_SEARCH_ITERATIONS):
        mid = (lo + hi) / 2.0
        if mid > 0 and variance(mid) <= target_var:
            hi = mid
        else:
            lo = mid
    return hi, variance(hi), best


def _unsupported(
    w: np.ndarray, d_row: np.ndarray | None, mask: np.ndarray | None, n: int
) -> tuple[float, float]:
    """Unsupported candidate mass (per logged row, i.e. divided by n) in and out of scope."""
    if d_row is not None:
        if mask is None:
            return float(d_row.sum()) / n, 0.0
        return float(d_row[mask].sum()) / n, float(d_row[~mask].sum()) / n

    def estimate(sel: np.ndarray | None) -> float:
        x = 1.0 - (w if sel is None else w[sel])
        if x.size < 2:
            return 0.0
        total = float(x.sum(dtype=np.float64)) / n
        se = float(np.std(x, ddof=1)) * math.sqrt(x.size) / n
        return total if total > 2.0 * se else 0.0

    if mask is None:
        return estimate(None), 0.0
    return estimate(mask), estimate(~mask)


def _scope_row(
    name: str, column: str, label: str, in_scope_rows: int, n: int, where: str, *,
    eps: float | None, var: float, best: float, tw: float, m_rows: int, z: float,
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "policy": name, "column": column, "segment": label, "rows_in_scope": in_scope_rows,
        "target_width": tw, "new_rows": m_rows,
    }
    if eps is not None:
        width = 2.0 * z * math.sqrt(max(var, 0.0) / m_rows)
        entry.update(
            exploration_share=eps,
            exploration_rows=int(math.ceil(eps * m_rows * in_scope_rows / n)),
            predicted_width=width,
            feasible=True,
            rows_needed=m_rows,
            reason=(
                f"the current logging already reaches width {tw:g} on {m_rows:,} "
                f"new rows for {name} ({where})"
                if eps == 0
                else f"on {where}, play {name}'s own choice on {eps:.1%} of the "
                f"traffic (every action it takes then has logging propensity >= "
                f"{eps:.3g} x its probability); {m_rows:,} new rows then give an "
                f"interval of width about {width:.3g} <= {tw:g}"
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
        need = int(math.ceil(var * (2.0 * z / tw) ** 2))
        entry.update(
            exploration_share=best,
            exploration_rows=int(math.ceil(best * m_rows * in_scope_rows / n)),
            predicted_width=2.0 * z * math.sqrt(var / m_rows),
            feasible=False,
            rows_needed=need,
            reason=(
                f"no exploration share reaches width {tw:g} with {m_rows:,} new rows "
                f"for {name} ({where}); at the best share {best:.1%} it needs about "
                f"{need:,} new rows"
            ),
        )
    return entry


def exploration_plan(
    data: Inputs,
    segments: Sequence[Sequence[SegmentRow]],
    value_lower_bounds: Sequence[float],
    *,
    reward_range: tuple[float, float],
    confidence_level: float,
    target_width: float,
    new_rows: int,
) -> pd.DataFrame:
    """The plan table; ``value_lower_bounds`` are each policy's Bottou lower bound of E[r - lo]."""
    lo, hi = reward_range
    mr = hi - lo
    n = data.n
    z = float(stats.norm.ppf(0.5 + confidence_level / 2.0))
    target_var = new_rows * (target_width / (2.0 * z)) ** 2
    ell2 = (data.reward - lo) ** 2
    rows: list[dict[str, Any]] = []
    for j, name in enumerate(data.names):
        w = data.weights(j)
        pe = data.target[:, j].astype(np.float64)
        d_row = None if data.deficiency_zero is None else data.deficiency_zero[name]
        scopes: list[tuple[str, str, np.ndarray | None]] = [("all", "all", None)]
        for s in segments[j]:
            seg = data.segmentation(s.column)
            if s.gap and s.context and seg is not None:
                scopes.append((s.column, s.segment, seg.codes == seg.labels.index(s.segment)))
        for column, label, mask in scopes:  # a loop over scopes (flagged segments)
            d_scope, d_out = _unsupported(w, d_row, mask, n)
            eps, var, best = _plan_for_scope(
                w=w, pe=pe, p=data.propensity, ell2=ell2, in_scope=mask, d_scope=d_scope,
                d_out=d_out, m=mr, v_lower=value_lower_bounds[j], n=n, target_var=target_var,
            )
            rows.append(_scope_row(
                name, column, label, n if mask is None else int(mask.sum()), n,
                "all traffic" if mask is None else f"segment {column}={label}",
                eps=eps, var=var, best=best, tw=target_width, m_rows=new_rows, z=z,
            ))
    return pd.DataFrame(rows, columns=list(PLAN_COLUMNS))
