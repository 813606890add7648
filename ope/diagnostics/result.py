"""The :class:`Diagnostics` result: typed per-policy and per-segment rows, tables and rendering."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final

import numpy as np
import pandas as pd
from scipy import sparse

from ope._format import (
    format_estimate,
    format_interval,
    format_number,
    format_share,
    note_key,
    number_notes,
    safe_text,
    wrap_text,
)
from ope._thresholds import (
    COVERAGE_VERDICT_SHARE,
    MAX_FIGURE_CANDIDATES,
    MAX_REPORT_SEGMENTS,
    ESS_RATIO_WARN,
    GAP_MASS_DEFICIT,
    GAP_MIN_ESS,
    GAP_MIN_MASS,
    SEGMENT_VARIANCE_EXCESS,
    SEGMENT_VARIANCE_MIN_SHARE,
    SUPPORT_FLOOR,
    UNSUPPORTED_MASS_WARN,
)
from ope._validation import check_choice, check_positive_int, check_real, describe
from ope.diagnostics._inputs import Inputs
from ope.diagnostics._pass import MANTISSA_BITS, octave_mass
from ope.diagnostics.overlap import PROFILE_COLUMNS, PolicyRow
from ope.diagnostics.plan import UNLOGGED_ACTIONS, action_plan, exploration_plan
from ope.diagnostics.segments import (
    MAX_MATRIX_ACTIONS,
    POPULARITY_LABELS,
    SEGMENT_COLUMNS,
    Segmentation,
    SegmentRow,
    popularity_buckets,
)
from ope.exceptions import MissingBoundsError, ParameterError, PolicyError, ValidationError
from ope.intervals import BottouInterval
from ope.results import Result, ResultParts

__all__ = ["Diagnostics"]

#: The table columns the notebook view (``_repr_html_``) shows; ``table()`` has them all.
_HTML_COLUMNS: Final = (
    "policy",
    "ess",
    "ess_ratio",
    "mean_weight",
    "propensity_check",
    "weight_max",
    "ci_low",
    "ci_high",
    "coverage_share",
    "verdict",
    "gaps",
)


#: Actions per policy the text summary lists under the plan (the table has them all).
_PLAN_ACTION_LINES: Final = 3


def _action_lines(actions: pd.DataFrame) -> list[str]:
    """The summary's per-action plan lines: the first few actions of each scope."""
    lines = []
    for (column, segment), group in actions.groupby(["column", "segment"], sort=False):
        where = "all traffic" if column == "all" else f"{column}={segment}"
        for a in group.head(_PLAN_ACTION_LINES).to_dict("records"):
            what = (
                "the actions never logged"
                if a["action"] == UNLOGGED_ACTIONS
                else (f"action {a['action']}")
            )
            lines.append(
                f"    on {where}: play {what} on {format_share(a['extra_share'])} more of the "
                f"traffic (from {format_share(a['logging_share'])} to "
                f"{format_share(a['planned_share'])})"
            )
        if len(group) > _PLAN_ACTION_LINES:
            lines.append(
                f"    ... {len(group) - _PLAN_ACTION_LINES} more actions "
                "(Diagnostics.plan_actions())"
            )
    return lines


#: What the notes of :func:`ope.diagnostics.overlap.overlap_notes` about one policy start with
#: after ``"<policy>: "``, per rule (the :class:`~ope._format.Note` rule of the same warning).
_NOTE_OPENINGS: Final = {
    "low_ess": "effective sample size ",
    "mean_weight_check": "mean importance weight ",
}


def _note_number(notes: Sequence[str], policy: str, rule: str) -> int | None:
    """The number (1-based) of the note of ``rule`` about ``policy`` among numbered ``notes``,
    or None: a :class:`~ope._format.Note` of that rule whose subject is the policy (or starts
    with it), else a text note that opens with the policy and the rule's wording."""
    opening = f"{policy}: {_NOTE_OPENINGS[rule]}"
    for i, note in enumerate(notes, 1):
        key = note_key(note)
        if key[:2] == ("rule", rule):
            subject = key[2]
            if subject == policy or (isinstance(subject, tuple) and subject[:1] == (policy,)):
                return i
        elif str(note).startswith(opening):
            return i
    return None


def _wrapped(line: str) -> list[str]:
    """A per-policy summary line wrapped to the text width, continued four spaces in."""
    indent = line[: len(line) - len(line.lstrip(" "))]
    return wrap_text(line.strip(), initial=indent, subsequent=indent + "  ")


def _json_value(v: Any) -> Any:
    if isinstance(v, (np.bool_, bool)):
        return bool(v)
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return f if math.isfinite(f) else None
    return v


class Diagnostics(Result):
    """Overlap diagnostics of one or more candidate policies on one set of logs.

    Built by :func:`diagnose` or :func:`diagnose_arrays`; not constructed directly.

    Attributes
    ----------
    policies : list of str
        Candidate policy names, in input order.
    n : int
        Logged rows.
    max_weight, reward_range, confidence_level, target_width, new_rows
        The settings the diagnostics were computed with (``max_weight`` is the clip level).
    rows : tuple of PolicyRow
        One typed row per policy (the rows of :meth:`table`).
    notes : tuple of str
        Warnings raised while computing, as text (the same text as the ``OverlapWarning``).

    Examples
    --------
    >>> import numpy as np
    >>> from ope.diagnostics import diagnose_arrays
    >>> n = 1000
    >>> action = np.arange(n) % 4                      # uniform logging over 4 actions
    >>> reward = (action == 0).astype(float)
    >>> d = diagnose_arrays(reward, np.full(n, 0.25), (action == 0).astype(float),
    ...                     policy_names=["greedy"], action=action, reward_range=(0, 1),
    ...                     target_width=0.2, new_rows=2000)
    >>> d.table()[["policy", "ess", "weight_max", "propensity_check"]]
       policy    ess  weight_max propensity_check
    0  greedy  250.0         4.0               ok
    >>> d.weight_histogram("greedy")[["weight_low", "weight_high", "rows"]]
       weight_low  weight_high  rows
    0         0.0          0.0   750
    1         4.0          8.0   250
    >>> float(d.plan().loc[0, "exploration_share"])  # the logs already suffice
    0.0
    """

    def __init__(
        self,
        data: Inputs,
        rows: Sequence[PolicyRow],
        segments: Sequence[Sequence[SegmentRow]],
        intervals: Sequence[BottouInterval | None],
        profiles: Sequence[Sequence[dict[str, Any]]],
        hist_counts: np.ndarray,
        *,
        max_weight: float | None,
        reward_range: tuple[float, float] | None,
        confidence_level: float,
        target_width: float | None,
        new_rows: int | None,
        notes: Sequence[str],
    ) -> None:
        self._data = data
        self.rows = tuple(rows)
        self._segments = {r.policy: tuple(s) for r, s in zip(rows, segments)}
        self._intervals = {r.policy: i for r, i in zip(rows, intervals)}
        self._profiles = {r.policy: list(p) for r, p in zip(rows, profiles)}
        self._hist_counts = hist_counts
        self._octave_mass: dict[str, np.ndarray] = {}
        self.policies = list(data.names)
        self.n = data.n
        self.max_weight = max_weight
        self.reward_range = reward_range
        self.confidence_level = confidence_level
        self.target_width = target_width
        self.new_rows = new_rows
        self.notes = tuple(notes)
        #: per candidate, the test of an item embedding (``diagnose(..., embedding=...)``)
        self.embedding_checks: tuple[Any, ...] = ()
        #: the sensitivity to wrong propensities (``diagnose(..., sensitivity=)``), an
        #: :class:`ope.diagnostics.Sensitivity`, or None when it was not run
        self.sensitivity: Any = None
        self._plan: pd.DataFrame | None = None
        if target_width is not None and new_rows is not None:
            self._plan = self.plan()

    # ---- tables -----------------------------------------------------------------------------
    def table(self) -> pd.DataFrame:
        """One row per policy: ESS, weights, divergences, support, outer/inner split, verdict.

        Columns ``unsupported_mass`` (needs ``logging_distribution``) and the interval columns
        (need ``reward_range``) are NaN when their input was not given; ``verdict`` then says so.
        ``max_weight`` is the clip level (NaN without one).
        """
        return pd.DataFrame([r.as_record() for r in self.rows])

    def segments(self) -> pd.DataFrame:
        """One row per policy x segment, with a boolean ``gap`` and its ``reason``."""
        records = [s.as_record() for name in self.policies for s in self._segments[name]]
        return pd.DataFrame(records, columns=list(SEGMENT_COLUMNS))

    def interval(self, policy: str) -> BottouInterval:
        """The Bottou outer/inner interval of ``policy`` (needs ``reward_range``)."""
        self._index(policy)
        interval = self._intervals[policy]
        if interval is None:
            raise MissingBoundsError(
                "the outer/inner interval needs a priori reward bounds; pass "
                "reward_range=(low, high) to diagnose (e.g. (0, 1) for clicks)."
            )
        return interval

    def unsupported_mass(self, policy: str) -> np.ndarray:
        """Per row, the candidate's mass on actions the logger plays with probability
        <= ``SUPPORT_FLOOR`` (shape (n,); its mean is the table's ``unsupported_mass``, its
        mean weighted by the sampling weights ``s``, ``sum s d / sum s``, for weighted rows).

        Needs the full distributions (``target_distributions`` and ``logging_distribution``,
        or ``candidates``, ``logging_distribution`` and ``target_dist__<name>`` in the logs).
        """
        self._index(policy)
        if self._data.deficiency is None:
            raise ValidationError(
                "per-row support needs the full distributions of the candidate and of the "
                "logger: pass target_distributions= and logging_distribution= (or log "
                "`candidates`, `logging_distribution` and `target_dist__<name>`)."
            )
        return self._data.deficiency[policy]

    def weight_histogram(self, policy: str) -> pd.DataFrame:
        """Histogram of the importance weights of ``policy`` on log-spaced bins.

        One row per factor-of-two bin ``[weight_low, weight_high)`` between the smallest and the
        largest positive weight, plus a first row for weights equal to 0 (rows where the
        candidate would never take the logged action). Columns: ``weight_low``,
        ``weight_high``, ``rows``, ``row_share`` and ``target_mass`` (sum of the weights in the
        bin divided by n: the candidate's probability mass the bin carries). The row counts come
        from the diagnostics' pass; the masses from one pass over this policy's weights on the
        first call (kept for later calls).

        For rows with sampling weights ``s`` it is the population's histogram: ``rows`` is
        the estimated number of population rows in the bin, ``sum s`` over its rows (a float),
        ``row_share`` that over ``S = sum s`` and ``target_mass`` ``sum s w / S`` over the bin
        (integer weights: the histogram of the rows repeated ``s_i`` times).
        """
        j = self._index(policy)
        counts = self._hist_counts[j]
        octave_counts = np.bincount(np.arange(counts.size) >> MANTISSA_BITS, weights=counts)
        if policy not in self._octave_mass:  # one pass over this policy's weights, on request
            self._octave_mass[policy] = octave_mass(self._data.weights(j), self._data.sampling)
        mass = self._octave_mass[policy]
        total = self._data.total()
        weighted = self._data.sampling is not None
        nz = np.flatnonzero(octave_counts[1:]) + 1
        octaves = [0] + (list(range(int(nz[0]), int(nz[-1]) + 1)) if nz.size else [])
        rows = [
            {
                "weight_low": 0.0 if e == 0 else math.ldexp(1.0, e - 1023),
                "weight_high": 0.0 if e == 0 else math.ldexp(1.0, e - 1022),
                "rows": float(octave_counts[e]) if weighted else int(octave_counts[e]),
                "row_share": float(octave_counts[e]) / total,
                "target_mass": float(mass[e]) / total,
            }
            for e in octaves
        ]
        return pd.DataFrame(rows)

    def coverage_matrix(
        self, policy: str, *, by: str | None = None, value: str = "target_mass"
    ) -> pd.DataFrame:
        """Segment x action (or x popularity bucket) table for ``policy``.

        Parameters
        ----------
        policy : str
            Candidate policy name.
        by : str, optional
            Segment column for the rows; default the first segment column (one row ``all``
            when there is none).
        value : {"target_mass", "logging_mass", "rows", "ess"}
            ``target_mass``: the candidate's probability mass in the cell, as a share of all
            rows (exact from ``target_distributions`` when given, else the importance-weighted
            estimate sum of w over the cell's rows / n, which is 0 for actions never logged).
            ``logging_mass``: the logger's mass (exact from ``logging_distribution`` when
            given, else the share of logged rows). ``rows``: logged rows. ``ess``: Kish ESS of
            the cell's weights. A cell with ``target_mass > 0`` but ``logging_mass`` about 0 is
            a coverage gap. For rows with sampling weights ``s`` every cell is weighted:
            masses are ``sum s x / S`` (``S = sum s``), ``rows`` is ``sum s`` (the estimated
            population rows) and ``ess`` Kish's ESS of ``s w``.

        Returns
        -------
        pandas.DataFrame
            Index: segment labels; columns: actions, or popularity buckets when the logs have
            more than ``MAX_MATRIX_ACTIONS`` actions.
        """
        check_choice(value, "value", ("target_mass", "logging_mass", "rows", "ess"))
        data = self._data
        j = self._index(policy)
        seg = self._segmentation(by)
        if data.action is None:
            raise ValidationError(
                "a coverage matrix needs the logged actions; pass `action=` to diagnose_arrays "
                "(diagnose reads it from the logs)."
            )
        n = data.total()
        s = data.sampling
        n_actions = len(data.action_labels or [])
        action_col = data.action
        labels: list[Any] = list(data.action_labels or [])
        popularity = n_actions > MAX_MATRIX_ACTIONS
        if popularity:
            action_bucket, action_col = popularity_buckets(data.action, n_actions)
            labels = list(POPULARITY_LABELS)
        k = len(labels)
        cell = seg.codes * k + action_col
        size = seg.size * k
        if (
            value in ("rows", "ess")
            or (value == "target_mass" and data.target_distributions is None)
            or (value == "logging_mass" and data.logging_distribution is None)
        ):
            w = data.sampled(data.weights(j))  # s w
            if value == "rows" or value == "logging_mass":
                table = np.bincount(cell, weights=s, minlength=size).astype(np.float64)
                if value == "logging_mass":
                    table /= n
            elif value == "target_mass":
                table = np.bincount(cell, weights=w, minlength=size) / n
            else:
                sw = np.bincount(cell, weights=w, minlength=size)
                sw2 = np.bincount(cell, weights=w * w, minlength=size)
                table = np.divide(sw * sw, sw2, out=np.zeros(size), where=sw2 > 0)
        else:
            assert data.target_distributions is not None
            dist = (
                data.target_distributions[policy]
                if value == "target_mass"
                else data.logging_distribution
            )
            csr = sparse.csr_array(dist)
            if popularity:
                pad = np.zeros(max(csr.shape[1], n_actions), dtype=np.intp)
                pad[:n_actions] = action_bucket
                pad[n_actions:] = len(POPULARITY_LABELS) - 1  # never logged: long tail
                col = pad[csr.indices]
            else:
                col = csr.indices
                if csr.shape[1] > k:
                    labels = labels + list(range(k, csr.shape[1]))
                    k = csr.shape[1]
                    size = seg.size * k
            rows_of = np.repeat(np.arange(data.n), np.diff(csr.indptr))
            table = (
                np.bincount(
                    seg.codes[rows_of] * k + col,
                    weights=csr.data if s is None else csr.data * s[rows_of],
                    minlength=size,
                )
                / n
            )
        return pd.DataFrame(
            table.reshape(seg.size, k),
            index=pd.Index(seg.labels, name=seg.column),
            columns=pd.Index(labels, name="action_popularity" if popularity else "action"),
        )

    def plan(
        self, *, target_width: float | None = None, new_rows: int | None = None
    ) -> pd.DataFrame:
        """Exploration plan: the smallest exploration share that reaches ``target_width``.

        For each policy, one row for exploring on all traffic (``column`` = ``"all"``) and one
        per flagged context segment. The new logger plays the candidate's own distribution on
        a share ``exploration_share`` of the traffic in scope and the current logger elsewhere;
        ``predicted_width`` is the width of the normal interval of IPS on ``new_rows`` such
        logs. When no share suffices, ``feasible`` is False and ``rows_needed`` gives the new
        rows needed at the best share.

        Parameters
        ----------
        target_width : float, optional
            Wanted interval width (reward units); default the one given to ``diagnose``.
        new_rows : int, optional
            Rows of new logs; default the one given to ``diagnose``.

        Returns
        -------
        pandas.DataFrame
            Columns ``policy, column, segment, rows_in_scope, exploration_share,
            exploration_rows, predicted_width, target_width, new_rows, feasible, rows_needed,
            reason``.

        Raises
        ------
        ope.ParameterError
            ``target_width`` or ``new_rows`` missing or malformed.
        MissingBoundsError
            ``reward_range`` was not given (the plan bounds the rewards of unexplored actions
            by it).

        Notes
        -----
        The plan predicts the width of the interval ope reports for :class:`ope.estimators.IPS`
        on the new logs (its normal interval, terms :math:`w_i r_i` on the rewards' own scale:
        IPS is not shift-equivariant, so the prediction must not use shifted rewards). Let the
        new logger in scope :math:`A` be the mixture
        :math:`\\pi_\\varepsilon = (1-\\varepsilon)\\pi_0 + \\varepsilon\\pi`. The IPS terms
        of the new logs have second moment

        .. math::

            S(\\varepsilon) = \\mathbb E_x \\sum_a \\frac{\\pi(a|x)^2}{\\pi_\\varepsilon(a|x)}
            \\mathbb E[r^2|x,a].

        Over actions the current logger supports this is estimated without bias from the
        current logs as :math:`\\frac1n\\sum_{i\\in A} w_i\\,\\pi(a_i|x_i)\\,r_i^2 /
        \\pi_\\varepsilon(a_i|x_i)` (plus :math:`\\frac1n\\sum_{i\\notin A} w_i^2 r_i^2`
        outside the scope); on unsupported actions :math:`\\pi_\\varepsilon = \\varepsilon\\pi`
        and the unknown :math:`\\mathbb E[r^2]` is bounded by
        :math:`\\max(r_{\\min}^2, r_{\\max}^2)`, which adds that bound times
        :math:`D_A/\\varepsilon` with :math:`D_A` the candidate's unsupported mass in the
        scope (exact from the distributions, else :math:`\\max(0,\\frac1n\\sum_{i\\in
        A}(1-w_i))` when it exceeds two standard errors). The variance is
        :math:`\\sigma^2(\\varepsilon) = S(\\varepsilon) - V^2`: under full support
        :math:`V` is the IPS value of the current logs kept inside the Bottou interval; with
        unsupported mass the value of smallest square in the Bottou interval (conservative).
        The predicted width is :math:`2 z_{(1+\\gamma)/2}\\sqrt{\\sigma^2(\\varepsilon)/m}` for
        :math:`m` new rows. :math:`\\sigma^2` is convex in :math:`\\varepsilon`; the plan is
        the smallest :math:`\\varepsilon` with width at most ``target_width`` (golden-section
        search for the minimum, then bisection). Unsupported mass outside the scope makes a
        segment plan infeasible: the scope ``all`` covers it. Under the plan every weight in
        scope is at most :math:`1/\\varepsilon`. :meth:`plan_actions` breaks each row down by
        action.
        """
        if target_width is None:
            target_width = self.target_width
        if new_rows is None:
            new_rows = self.new_rows
        if target_width is None or new_rows is None:
            raise ParameterError(
                "the exploration plan needs `target_width` (the interval width you want) and "
                "`new_rows` (how many new logs you will collect); pass both to plan() or to "
                "diagnose()."
            )
        tw = check_real(target_width, "target_width")
        if not (math.isfinite(tw) and tw > 0):
            raise ParameterError(f"`target_width` must be a positive number; got {target_width!r}.")
        m_rows = check_positive_int(new_rows, "new_rows", minimum=2)
        if self.reward_range is None:
            raise MissingBoundsError(
                "the exploration plan needs a priori reward bounds (it bounds the rewards of "
                "actions the logs never show); pass reward_range=(low, high) to diagnose."
            )
        if self._plan is not None and tw == self.target_width and m_rows == self.new_rows:
            return self._plan.copy()
        bounds = []
        for name in self.policies:
            interval = self._intervals[name]
            assert interval is not None  # reward_range given: every policy has its interval
            bounds.append((interval.low, interval.high))
        return exploration_plan(
            self._data,
            [self._segments[name] for name in self.policies],
            bounds,
            reward_range=self.reward_range,
            confidence_level=self.confidence_level,
            target_width=tw,
            new_rows=m_rows,
        )

    def plan_actions(
        self, *, target_width: float | None = None, new_rows: int | None = None
    ) -> pd.DataFrame:
        """The exploration plan per action: which actions to play more, on how much traffic.

        One row per plan row (policy x scope with a positive exploration share) and action
        the new logger plays more than the current one: ``target_mass`` (the candidate's mass
        on the action in scope, from the weights), ``logging_share`` (its share of the logged
        rows in scope), ``planned_share = (1 - eps) logging_share + eps target_mass``,
        ``extra_share`` (the difference: the share of the scope's traffic to move onto the
        action) and ``variance_share`` (its part of the current IPS terms' second moment in
        scope), largest ``extra_share`` first. Mass the weights do not recover is the row
        ``(actions never logged)``. Needs the logged actions.

        Parameters
        ----------
        target_width, new_rows
            As in :meth:`plan`.

        Returns
        -------
        pandas.DataFrame
            Columns ``policy, column, segment, action, target_mass, logging_share,
            planned_share, extra_share, variance_share``.

        Examples
        --------
        >>> import numpy as np
        >>> from ope.diagnostics import diagnose_arrays
        >>> n = 4000
        >>> action = np.arange(n) % 4                      # uniform logging over 4 actions
        >>> reward = (action == 0).astype(float)
        >>> d = diagnose_arrays(reward, np.full(n, 0.25), (action == 0).astype(float),
        ...                     policy_names=["greedy"], action=action, reward_range=(0, 1))
        >>> t = d.plan_actions(target_width=0.02, new_rows=20000)
        >>> t[["action", "logging_share", "target_mass"]].to_string(index=False)
        ' action  logging_share  target_mass\\n      0           0.25          1.0'
        """
        return action_plan(self._data, self.plan(target_width=target_width, new_rows=new_rows))

    def clip_profile(self, policy: str) -> pd.DataFrame:
        """How the outer/inner split changes with the clip level, for ``policy``.

        One row per clip level of :func:`ope.diagnostics.overlap.clip_levels` (powers of two
        from 1 up to the largest weight, then the largest weight: no clipping): the share of
        rows clipped, the share of the total importance weight they carry, the clipped value,
        the Bottou interval (empirical-Bernstein margins, the ``bottou`` CI method) and its
        sampling and coverage widths. ``narrowest`` marks the level of the narrowest interval
        (the least clipping among ties): the diagnostics' clip level when none is given, and
        the level the verdict is taken at in every case, so the verdict does not depend on an
        arbitrary clip level. Small levels trade sampling width for coverage width; the
        narrowest level balances them.

        Raises
        ------
        MissingBoundsError
            ``reward_range`` was not given.

        Examples
        --------
        >>> import numpy as np
        >>> from ope.diagnostics import diagnose_arrays
        >>> n = 800
        >>> action = np.arange(n) % 8                      # uniform logging over 8 actions
        >>> d = diagnose_arrays((action == 0).astype(float), np.full(n, 0.125),
        ...                     (action == 0).astype(float), policy_names=["g"],
        ...                     reward_range=(0, 1))
        >>> p = d.clip_profile("g")
        >>> p["max_weight"].tolist(), p["clipped_share"].tolist()
        ([1.0, 2.0, 4.0, 8.0], [0.125, 0.125, 0.125, 0.0])
        >>> p.loc[p.narrowest, "max_weight"].item()
        8.0
        """
        self._index(policy)
        if self.reward_range is None:
            raise MissingBoundsError(
                "the clip profile needs a priori reward bounds; pass reward_range=(low, high) "
                "to diagnose (e.g. (0, 1) for clicks)."
            )
        return pd.DataFrame(self._profiles[policy], columns=list(PROFILE_COLUMNS))

    # ---- plots and the report ---------------------------------------------------------------
    def plot_weights(self, policy: str, ax: Any = None) -> Any:
        """Draw the distribution of ``policy``'s importance weights (log scale, clip level).

        See :func:`ope.plots.plot_weights`; needs matplotlib (``pip install
        'ope-toolkit[plot]'``). Returns the matplotlib Axes.
        """
        from ope.plots import plot_weights

        return plot_weights(self, policy, ax=ax)

    def plot_coverage(self, policy: str, ax: Any = None, *, by: str | None = None) -> Any:
        """Draw the segment x action (or popularity bucket) coverage heatmap of ``policy``,
        gaps framed.

        See :func:`ope.plots.plot_coverage`; needs matplotlib (``pip install
        'ope-toolkit[plot]'``). Returns the matplotlib Axes.
        """
        from ope.plots import plot_coverage

        return plot_coverage(self, policy, ax=ax, by=by)

    def write_report(
        self,
        path: Any,
        *,
        evaluation: Any = None,
        certificate: Any = None,
        truth: Any = None,
        provenance: Any = None,
        title: str | None = None,
        validation: Any = None,
        overwrite: bool = False,
        max_candidates: int | None = MAX_FIGURE_CANDIDATES,
        max_segments: int | None = MAX_REPORT_SEGMENTS,
    ) -> Any:
        """Write the self-contained HTML report of these diagnostics (and of ``evaluation``
        when given) to ``path``; returns the path.

        See :func:`ope.report.write_report` for the arguments. Diagnostics carry no validation
        report: pass ``validation=logs.report`` to include it.
        """
        from ope.report import write_report

        return write_report(
            path,
            evaluation=evaluation,
            diagnostics=self,
            certificate=certificate,
            truth=truth,
            provenance=provenance,
            title=title,
            validation=validation,
            overwrite=overwrite,
            max_candidates=max_candidates,
            max_segments=max_segments,
        )

    # ---- export -----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: settings, one entry per policy with its segments and plan rows."""
        plan = self._plan
        out: dict[str, Any] = {
            "n": self.n,
            "sampling_weight": self.sampling_weight,
            "population_rows": self._data.total(),
            "max_weight": self.max_weight,
            "reward_range": list(self.reward_range) if self.reward_range else None,
            "confidence_level": self.confidence_level,
            "target_width": self.target_width,
            "new_rows": self.new_rows,
            "thresholds": {
                "ess_ratio_warn": ESS_RATIO_WARN,
                "support_floor": SUPPORT_FLOOR,
                "unsupported_mass_warn": UNSUPPORTED_MASS_WARN,
                "gap_min_mass": GAP_MIN_MASS,
                "gap_min_ess": GAP_MIN_ESS,
                "gap_mass_deficit": GAP_MASS_DEFICIT,
                "coverage_verdict_share": COVERAGE_VERDICT_SHARE,
                "segment_variance_excess": SEGMENT_VARIANCE_EXCESS,
                "segment_variance_min_share": SEGMENT_VARIANCE_MIN_SHARE,
            },
            "notes": list(self.notes),
            "policies": [],
        }
        if self.embedding_checks:
            out["embedding_checks"] = [c.to_dict() for c in self.embedding_checks]
        if self.sensitivity is not None:
            out["sensitivity"] = self.sensitivity.to_dict()
        for row in self.rows:
            entry = {k: _json_value(v) for k, v in row.as_record().items()}
            entry["segments"] = [
                {k: _json_value(v) for k, v in s.as_record().items() if k != "policy"}
                for s in self._segments[row.policy]
            ]
            entry["clip_profile"] = [
                {k: _json_value(v) for k, v in level.items()}
                for level in self._profiles[row.policy]
            ]
            if plan is not None:
                entry["plan"] = [
                    {k: _json_value(v) for k, v in s.items() if k != "policy"}
                    for s in plan[plan["policy"] == row.policy].to_dict("records")
                ]
            out["policies"].append(entry)
        return out

    @property
    def sampling_weight(self) -> str | None:
        """The name of the rows' sampling weights (the log's column) when the diagnostics are
        Horvitz-Thompson weighted, else None."""
        return self._data.sampling_name if self._data.sampling is not None else None

    def _title(self) -> str:
        rows = f"{self.n:,} logged rows"
        if self.sampling_weight is not None:
            rows = (
                f"{self.n:,} kept rows weighted by `{self.sampling_weight}` (a population "
                f"of about {self._data.total():,.6g} rows)"
            )
        return (
            f"Overlap diagnostics: {rows}, {len(self.policies)} candidate "
            f"polic{'y' if len(self.policies) == 1 else 'ies'}"
            + (f", clip level {self.max_weight:g}" if self.max_weight is not None else "")
        )

    def _parts(self) -> ResultParts:
        return ResultParts(
            title=self._title(),
            fields=(
                ("n", self.n),
                *(
                    (("sampling_weight", self.sampling_weight),)
                    if self.sampling_weight is not None
                    else ()
                ),
                ("max_weight", self.max_weight),
                ("reward_range", self.reward_range),
                ("confidence_level", self.confidence_level),
            ),
            table=self.table()[list(_HTML_COLUMNS)],
            notes=self.notes,
        )

    def summary(self) -> str:
        """Plain text for a person: per policy the overlap, the verdict and the gaps.

        Numbers follow :mod:`ope._format` (four significant digits; the mean weight to the
        precision of its standard error); lines wrap at 88 characters. A warning is stated once,
        in the numbered notes: the policy's lines refer to it (``see note [k]``).
        """
        notes, _ = number_notes(self.notes)
        lines = [self._title()]
        plan = self._plan
        for r in self.rows:
            segments = self._segments[r.policy]
            body: list[str] = []
            ess_ref = _note_number(notes, r.policy, "low_ess")
            body.append(
                f"  ESS {format_number(r.ess)} ({format_share(r.ess_ratio)} of "
                + (
                    "rows"
                    if self.sampling_weight is None
                    else f"the sampling weights' ESS {format_number(r.ess_reference)}"
                )
                + (f", see note [{ess_ref}]" if ess_ref is not None else "")
                + f"); max weight {format_number(r.weight_max, trim=True)}; mean weight "
                f"{format_estimate(r.mean_weight, r.mean_weight_se)} +/- "
                f"{format_estimate(r.mean_weight_se, r.mean_weight_se)}"
            )
            if r.propensity_check != "ok":
                ref = _note_number(notes, r.policy, "mean_weight_check")
                body.append(
                    f"  ! mean weight too {r.propensity_check} for the propensities: see note "
                    f"[{ref}]"
                    if ref is not None
                    else f"  ! mean weight {format_number(r.mean_weight)}, expected "
                    f"{format_number(r.mean_weight_expected, trim=True)} (z = "
                    f"{format_number(r.mean_weight_z, 3)}): check the propensities"
                )
            if not math.isnan(r.unsupported_mass):
                body.append(
                    "  candidate mass on actions the logger (almost) never plays: "
                    f"{format_share(r.unsupported_mass)}"
                )
            if self._intervals[r.policy] is not None:
                how = "given" if r.clip_rule == "given" else "narrowest interval"
                body.append(
                    f"  interval {format_interval(r.ci_low, r.ci_high)} at clip level "
                    f"{format_number(r.max_weight, trim=True)} ({how}; "
                    f"{format_share(r.clipped_share)} of rows, "
                    f"{format_share(r.clipped_weight_share)} of "
                    f"the weight clipped): sampling {format_number(r.sampling_width, 3)}, "
                    f"coverage {format_number(r.coverage_width, 3)} ({format_share(r.coverage_share)})"
                )
                if r.clip_rule == "given" and r.verdict_max_weight != r.max_weight:
                    body.append(
                        "  at the narrowest clip level "
                        f"{format_number(r.verdict_max_weight, trim=True)} (see clip_profile) "
                        f"coverage is {r.verdict_coverage_share:.0%} of the interval"
                    )
            body.append(f"  verdict: {r.verdict} ({r.verdict_reason})")
            gaps = [s for s in segments if s.gap]
            body.extend(f"  gap: {s.reason}" for s in gaps)
            if not segments:
                body.append("  no segments requested (pass by= / --by to look for gaps)")
            elif not gaps:
                body.append("  no segment gaps")
            if plan is not None:
                for p in plan[plan["policy"] == r.policy].to_dict("records"):
                    body.append(f"  plan: {p['reason']}")
                if self._data.action is not None:
                    mine = plan[plan["policy"] == r.policy]
                    body.extend(_action_lines(action_plan(self._data, mine)))
            lines.append("")
            lines.append(f"{r.policy}")
            for line in body:
                lines.extend(_wrapped(line))
        if notes:
            lines.append("")
            lines.append("Notes:")
            for i, note in enumerate(notes, 1):
                head = f"  [{i}] "
                lines.extend(wrap_text(note, initial=head, subsequent=" " * len(head)))
        return safe_text("\n".join(lines), keep_newlines=True)  # policy names from the data

    def __repr__(self) -> str:
        gaps = sum(r.gaps for r in self.rows)
        return (
            f"Diagnostics(n={self.n:,}, policies={self.policies}, gaps={gaps}, "
            f"notes={len(self.notes)})"
        )

    # ---- helpers ----------------------------------------------------------------------------
    def _index(self, policy: str) -> int:
        try:
            return self.policies.index(policy)
        except ValueError:
            raise PolicyError(
                f"unknown policy {policy!r}; these diagnostics have: {', '.join(self.policies)}"
            ) from None

    def _segmentation(self, column: str | None) -> Segmentation:
        segs = self._data.segmentations
        if column is None:
            context = [s for s in segs if s.context]
            if context:
                return context[0]
            return Segmentation("segment", np.zeros(self.n, dtype=np.intp), ["all"])
        seg = self._data.segmentation(column) if isinstance(column, str) else None
        if seg is None:
            raise ParameterError(
                f"`by`: unknown segment column {describe(column)}; these diagnostics have: "
                f"{', '.join(s.column for s in segs) or '(none)'}"
            )
        return seg
