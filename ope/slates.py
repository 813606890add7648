r"""Positions and slates: slate logs, ranking policies, slate estimators and per-position checks.

A *slate* is an ordered list of ``L`` items shown at once (positions ``0 .. L-1``), with one
reward per slot (a click at that position). ope reads slate logs in two layouts:

- **long**: one row per slot with ``slate_id``, ``position``, ``item``, ``reward`` and the
  logger's per-slot marginal ``propensity`` :math:`\pi_0(a_k \text{ at } k \mid x)` and/or the
  whole-slate ``slate_propensity`` :math:`\pi_0(s \mid x)` (and optionally the top-k
  ``prefix_propensity`` :math:`\pi_0(a_{1:k} \mid x)`);
- **lists**: one row per slate whose ``item``, ``reward``, ``propensity`` (and
  ``prefix_propensity``) cells are lists of length ``L``.

:func:`slate_logs` validates either into :class:`SlateLogs`. A candidate ranking policy gives
the probabilities of the logged slates (:class:`SlateProbabilities`): from a long table
(:func:`slate_probabilities_from_table`), from scores by Plackett-Luce (:class:`PlackettLuce`),
from a full distribution over slates (:class:`EnumeratedSlatePolicy`), or from any Python
object with a ``slate_probabilities(logs)`` method.

Estimators (each unbiased under the click model its docstring and its result's first note
state): :class:`SlateIPS`, :class:`IndependentIPS` (item-position; one position with
``positions=[k]``, see :func:`position_estimates`), :class:`CascadeIPS` (reward interaction),
:class:`PseudoInverse`; ``self_normalized=True`` gives each one's self-normalized version. They
return :class:`ope.Estimate` backed by rows, so ``ci(method="t" | "bootstrap")`` and
:func:`ope.compare` work on them. :func:`position_diagnostics` gives ESS, support and gaps by
slot through :func:`ope.diagnostics.diagnose_arrays`.
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import math
import numbers
import warnings
from collections.abc import Callable, Mapping, Sequence, Sized
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

import numpy as np
import numpy.typing as npt
import pandas as pd

from ope._thresholds import (
    PROBABILITY_TOLERANCE,
    as_sentence,
    ess_note,
    few_effective_rows,
    few_effective_rows_note,
    kish_ess,
    low_ess,
    mean_weight_check,
    mean_weight_note,
    small_sample,
    small_sample_note,
)
from ope._validation import (
    MAX_FINITE_WEIGHT,
    as_float_array,
    check_choice,
    check_finite,
    check_flag,
    check_no_overflow,
    check_label_kinds,
    check_mapping,
    check_name,
    check_names,
    check_positive_int,
    check_positive_real,
    check_rng,
    check_target_propensity,
    describe,
    first_rows,
    power_of_two_scale,
    user_stacklevel,
)
from ope.exceptions import (
    EstimationError,
    OverlapWarning,
    ParameterError,
    PolicyError,
    SchemaError,
    SmallSampleWarning,
    ValidationError,
)
from ope.estimators import skewed_notes
from ope.moments import skewness
from ope.results import Estimate, RowSource, make_estimate
from ope.weights import SAMPLING_WEIGHT_COLUMN, refuse_sampling_weights

__all__ = [
    "SlateLogs",
    "SLATE_COLUMNS",
    "CANDIDATE_COLUMNS",
    "candidate_columns",
    "slate_logs",
    "SlateProbabilities",
    "SlatePolicy",
    "EnumeratedSlatePolicy",
    "PlackettLuce",
    "slate_probabilities",
    "slate_probabilities_from_table",
    "plackett_luce_from_table",
    "SlateEstimator",
    "SLATE_ESTIMATORS",
    "SlateIPS",
    "IndependentIPS",
    "CascadeIPS",
    "CascadeDR",
    "CASCADE_MODELS",
    "PseudoInverse",
    "position_estimates",
    "logging_estimate",
    "position_diagnostics",
    "pseudoinverse_table",
    "MAX_ENUMERATED_SLATES",
]

#: The largest ``position_base``: positions are stored as 64-bit integers, and a base this
#: large already means a mistake (positions count from 0 or 1).
MAX_POSITION_BASE: Final = 2**31 - 1

#: Largest number of ordered slates a policy is enumerated over (exact marginals, the
#: pseudoinverse's Gamma matrix): 10 items choose 5 ordered is 30,240 slates; 200,000 keeps one
#: float64 (contexts x slates) table of a few contexts within a few MB and enumeration under a
#: second. Beyond it Plackett-Luce marginals are Monte-Carlo (``n_samples``).
MAX_ENUMERATED_SLATES: Final = 200_000


#: What a slate estimate's notes on few rows, few effective rows, a low effective sample or
#: skewed terms advise (``advice``/``fallback`` of the shared note functions): the slate
#: estimates offer only normal, t and bootstrap intervals, none of which holds at any n, so the
#: bounded intervals the bandit estimators' notes name (betting, Bernstein, empirical
#: likelihood; clipping) do not apply to them.
SLATE_INTERVAL_ADVICE: Final = (
    "the slate estimates have no interval that holds at any n (their normal, t and bootstrap "
    "intervals are all asymptotic): read the interval as approximate, or log more slates."
)

#: The estimators whose weights are probability ratios (whole slates, prefixes, items), each
#: slot's with mean 1 under full support (the pseudoinverse's are not ratios).
_RATIO_WEIGHTS: Final = frozenset({"sips", "iips", "rips", "cdr"})

_ASSUMPTIONS: Final = {
    "sips": "slate IPS: unbiased under any click model when the logger gives every slate the "
    "candidate plays a positive probability; its weights are whole-slate ratios and its "
    "variance grows with the number of slates.",
    "iips": "independent (item-position) IPS, Li et al. 2018: unbiased only when the expected "
    "reward at slot k depends on the item at k alone (item-position / additive click model); "
    "biased when clicks interact across slots (cascade).",
    "rips": "reward-interaction (cascade) IPS, McInerney et al. 2020: unbiased when the expected "
    "reward at slot k depends only on the items at slots 0..k (cascade, and the additive model "
    "as a special case).",
    "cdr": "Cascade-DR, Kiyohara et al. 2022: unbiased when the expected reward at slot k "
    "depends only on the items at slots 0..k (cascade), as cascade IPS, whatever the reward "
    "model; the model only reduces the variance.",
    "logging": "none: the logger's own slates, unweighted (the mean slate reward the logger "
    "obtained).",
    "pi": "pseudoinverse, Swaminathan et al. 2017: unbiased when the expected slate reward (sum "
    "over slots) is additive in (item, slot) terms and the logger's Gamma matrix covers the "
    "candidate; biased under cascade clicks.",
}


# ============================================================================================
# logs
# ============================================================================================
@dataclass(frozen=True, eq=False)
class SlateLogs:
    """Validated slate logs: ``n`` slates of ``L`` slots (built by :func:`slate_logs`).

    Attributes
    ----------
    slate_id : numpy.ndarray, shape (n,)
        Slate identifiers, sorted.
    item : numpy.ndarray of int64, shape (n, L)
        Item shown at each position.
    reward : numpy.ndarray, shape (n, L)
        Reward (click) at each position.
    propensity : numpy.ndarray, shape (n, L), or None
        Logger's marginal probability of the shown item at its position.
    slate_propensity : numpy.ndarray, shape (n,), or None
        Logger's probability of the whole slate.
    prefix_propensity : numpy.ndarray, shape (n, L), or None
        Logger's probability of the top-(k+1) prefix ``item[:, :k+1]``.
    context : numpy.ndarray of int64, shape (n,), or None
        Context index of each slate (needed by :class:`SlatePolicy` candidates).
    rows : numpy.ndarray of int64, shape (n, L)
        Row of the input table of each slot (for error messages; list layout: slate row).
    candidates : dict of str to SlateProbabilities
        Candidates whose probabilities of the logged slates the logs carry, by name: the
        columns ``target__<name>`` (marginal of the shown item at its slot),
        ``target_prefix__<name>`` and ``target_slate__<name>`` (:data:`CANDIDATE_COLUMNS`),
        laid out as the logger's ``propensity``, ``prefix_propensity`` and
        ``slate_propensity``.
    unread_candidates : tuple of str
        The candidates of the logs' columns left unread (not among the ``policies`` asked
        for), so that a name asked for and absent is told from the names there are.
    """

    slate_id: np.ndarray
    item: np.ndarray
    reward: np.ndarray
    propensity: np.ndarray | None = None
    slate_propensity: np.ndarray | None = None
    prefix_propensity: np.ndarray | None = None
    context: np.ndarray | None = None
    rows: np.ndarray | None = None
    candidates: dict[str, SlateProbabilities] = field(default_factory=dict)
    unread_candidates: tuple[str, ...] = ()

    @property
    def n(self) -> int:
        """Number of slates."""
        return int(self.item.shape[0])

    @property
    def slate_size(self) -> int:
        """Number of positions ``L``."""
        return int(self.item.shape[1])

    def logging_probabilities(self) -> SlateProbabilities:
        """The logger's probabilities of the logged slates, as recorded in the logs."""
        return SlateProbabilities(
            slate=self.slate_propensity, marginal=self.propensity, prefix=self.prefix_propensity
        )


def _columns(data: Any) -> dict[str, Any]:
    """Columns of a pyarrow Table, pandas DataFrame or mapping of arrays."""
    if isinstance(data, pd.DataFrame):
        return {str(c): data[c].to_numpy() for c in data.columns}
    if hasattr(data, "column_names") and hasattr(data, "column"):  # pyarrow Table
        return {
            c: data.column(c).to_pylist()
            if _is_list_type(data.column(c).type)
            else data.column(c).to_numpy()
            for c in data.column_names
        }
    if isinstance(data, Mapping):
        return dict(data)
    raise ParameterError(
        "slate logs must be a pyarrow.Table, a pandas.DataFrame or a mapping of columns; got "
        f"{type(data).__name__}."
    )


def _is_list_type(t: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_list(t) or pa.types.is_large_list(t))


def _as_int(values: Any, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype.kind in "iu":
        return arr.astype(np.int64)
    if arr.dtype.kind in "USO" and arr.size:
        check_label_kinds(arr, name)
        flat = arr.reshape(-1)
        if arr.dtype.kind != "O" or isinstance(flat[0], (str, bytes)):
            raise ValidationError(
                f"`{name}` must hold integer ids; it holds text (row 0: {_plain(flat[0])!r}). Map "
                "the names to integer codes first (e.g. codes, names = pandas.factorize(...)) "
                "and use the same codes in the logs and in every policy."
            )
        arr = _numbers(arr, name)
    f = as_float_array(arr, name, ndim=(1, 2))
    check_finite(f, name)
    bad = f != np.round(f)
    if bad.any():
        count, first = first_rows(bad)
        raise ValidationError(
            f"`{name}` must hold whole numbers; {count} rows do not (first at row {first})."
        )
    return f.astype(np.int64)


def _numbers(values: np.ndarray, name: str) -> np.ndarray:
    """An object array (list cells) as float64, or a ValidationError naming the column."""
    try:
        return values.astype(np.float64)
    except (TypeError, ValueError) as exc:
        raise ValidationError(
            f"`{name}` must hold numbers in every list; {exc}. Fix or drop those slates."
        ) from None


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python value (for messages)."""
    return value.item() if isinstance(value, np.generic) else value


def _same_id_kind(values: np.ndarray, logged: np.ndarray, name: str) -> None:
    """Ids of a table of the same kind (numbers or text) as the logs': a text id never equals
    an integer one, so a mismatch would silently match nothing."""

    def kind(a: np.ndarray) -> str:
        if a.dtype.kind in "iufb":
            return "numbers"
        if a.dtype.kind == "O" and a.size:
            check_label_kinds(a, name)
            return "numbers" if isinstance(a.flat[0], numbers.Number) else "text"
        return "text"

    if values.size and logged.size and kind(values) != kind(logged):
        raise ValidationError(
            f"`{name}` holds {kind(values)} (row 0: {_plain(values.flat[0])!r}) but the logs' "
            f"`{name}` holds {kind(logged)} (e.g. {_plain(logged.flat[0])!r}): an id written as "
            "text never equals one written as a number. Write the ids the same way in both."
        )


def _lists(values: Any, name: str, size: int | None, hint: str = "") -> np.ndarray:
    """A list column (one list per slate) as an (n, L) array; every list of one length.

    ``hint`` ends the message of a column whose cells are not lists."""
    scalar = next(
        (
            i
            for i, v in enumerate(values)
            if isinstance(v, (str, bytes)) or not hasattr(v, "__len__")
        ),
        None,
    )
    if scalar is not None:
        raise ValidationError(
            f"list column `{name}` must hold one list per slate; row {scalar} holds "
            f"{_plain(values[scalar])!r:.80}.{hint}"
        )
    lens = np.fromiter((len(v) for v in values), dtype=np.int64, count=len(values))
    want = size if size is not None else int(lens[0]) if lens.size else 0
    bad = lens != want
    if bad.any():
        count, first = first_rows(bad)
        raise ValidationError(
            f"list column `{name}` must hold lists of one length (the slate size {want}); "
            f"{count} slates do not (first at row {first}: length {int(lens[first])})."
        )
    return np.asarray([list(v) for v in values], dtype=object).reshape(len(values), want)


#: The columns of slate logs, by their ope name (what ``mapping`` of :func:`slate_logs` maps
#: to the data's columns): the first four are required (``position`` in the long layout only),
#: the others are read when present.
SLATE_COLUMNS: Final = (
    "slate_id",
    "position",
    "item",
    "reward",
    "propensity",
    "slate_propensity",
    "prefix_propensity",
    "context",
)


#: Column prefixes of a candidate's probabilities of the logged slates in slate logs, by the
#: :class:`SlateProbabilities` field they fill: ``target__<name>`` is laid out as the logger's
#: ``propensity`` (per slot), ``target_prefix__<name>`` as ``prefix_propensity`` (per slot) and
#: ``target_slate__<name>`` as ``slate_propensity`` (one per slate).
CANDIDATE_COLUMNS: Final = {
    "marginal": "target__",
    "prefix": "target_prefix__",
    "slate": "target_slate__",
}


def candidate_columns(cols: Any) -> dict[str, dict[str, str]]:
    """The candidates of slate logs with column names ``cols``, each with its columns:
    ``{name: {field: column}}`` (:data:`CANDIDATE_COLUMNS`).

    Examples
    --------
    >>> candidate_columns(["item", "target_prefix__a", "target__a", "target_slate__b"])
    {'a': {'prefix': 'target_prefix__a', 'marginal': 'target__a'}, 'b': {'slate': 'target_slate__b'}}
    """
    found: dict[str, dict[str, str]] = {}
    # the longest prefix first: target_prefix__x is not a marginal of candidate "prefix__x"
    by_length = sorted(CANDIDATE_COLUMNS.items(), key=lambda kv: -len(kv[1]))
    for column in cols:  # a loop over columns, not rows
        for kind, prefix in by_length:
            if column.startswith(prefix):
                name = column[len(prefix) :]
                if not name:
                    raise SchemaError(
                        f"column {column!r} names no candidate: write {prefix}<name>."
                    )
                found.setdefault(name, {})[kind] = column
                break
    return found


def _slate_columns(mapping: Any, cols: Mapping[str, Any]) -> dict[str, str]:
    """The data's column of each of :data:`SLATE_COLUMNS` under ``mapping`` (checked as the
    ``mapping`` of :func:`ope.read_logs`: ``{ope_name: your_column}`` of strings)."""
    mapping = check_mapping(mapping)
    problems: list[str] = []
    seen: dict[str, str] = {}
    for ours, theirs in mapping.items():
        if ours not in SLATE_COLUMNS:
            near = difflib.get_close_matches(ours, SLATE_COLUMNS, n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            if not near and theirs in SLATE_COLUMNS:
                hint = (
                    f"; mapping is {{ope_name: your_column}}, so you probably meant "
                    f"{{{theirs!r}: {ours!r}}}"
                )
            raise ParameterError(
                f"mapping key {ours!r} is not one of the slate log columns "
                f"({', '.join(SLATE_COLUMNS)}){hint}"
            )
        if theirs not in cols:
            problems.append(
                f"mapping {ours!r}: {theirs!r} names a column that is not in the slate logs "
                f"(available: {', '.join(sorted(cols)) or '(no columns)'})"
            )
        elif theirs in seen:
            problems.append(
                f"mapping sends column {theirs!r} to both {seen[theirs]!r} and {ours!r}"
            )
        seen.setdefault(theirs, ours)
    for ours, theirs in mapping.items():  # a column keeping a name a mapped one now takes
        if ours != theirs and ours in cols and ours not in mapping.values():
            problems.append(
                f"mapping reads {ours!r} from {theirs!r}, but the slate logs also have a column "
                f"{ours!r}; map that one to another name or drop it"
            )
    if problems:
        raise SchemaError("; ".join(problems) + ".")
    return {name: mapping.get(name, name) for name in SLATE_COLUMNS}


def slate_logs(
    data: Any,
    *,
    mapping: Mapping[str, str] | None = None,
    position_base: int = 0,
    allow_repeats: bool = False,
    policies: Sequence[str] | None = None,
) -> SlateLogs:
    """Read and validate slate logs (one row per slot, or list columns per slate).

    Parameters
    ----------
    data : pyarrow.Table, pandas.DataFrame, mapping of arrays, or SlateLogs
        Long layout (one row per slot, with a ``position`` column) or list layout (no
        ``position`` column; ``item``, ``reward`` and per-slot probabilities as lists).
    mapping : dict, optional
        ``{"ope_name": "your_column"}``, as in :func:`ope.read_logs`: which of your columns
        hold ope's ``slate_id``, ``position``, ``item``, ``reward`` (required; ``position``
        counts from ``position_base``) and the optional ``propensity``, ``slate_propensity``,
        ``prefix_propensity``, ``context`` (used when present: the logger's per-slot
        marginal, whole-slate and top-k prefix probabilities, and an integer context index;
        at least one probability column must be present). A column not mapped is looked up
        under its ope name (:data:`SLATE_COLUMNS`).
    position_base : int, default 0
        First position in the data (1 for 1-based logs such as the Open Bandit Dataset).
    allow_repeats : bool, default False
        Accept an item shown twice in one slate (slot-specific catalogs).
    policies : sequence of str, optional
        Read only these candidates' columns (``target__<name>``, ``target_prefix__<name>``,
        ``target_slate__<name>``; default every candidate's): the others are neither read nor
        checked. A name without columns is left to the caller.

    Returns
    -------
    SlateLogs
        Slates sorted by ``slate_id``.

    Raises
    ------
    ope.ParameterError
        ``mapping`` is not a dict of strings, or a key is not one of :data:`SLATE_COLUMNS`.
    ope.SchemaError
        Missing columns (all listed at once), or a mapped column that is not in ``data``.
    ope.ValidationError
        Positions not contiguous from ``position_base``, a slot given twice, slates of
        different lengths, an item repeated in a slate, probabilities outside (0, 1], a slate
        probability above a slot's marginal, prefix probabilities that increase, a context or
        slate probability that changes within a slate.

    Examples
    --------
    >>> import pandas as pd
    >>> t = pd.DataFrame({"slate_id": [7, 7, 3, 3], "position": [1, 0, 0, 1],
    ...                   "item": [2, 0, 1, 2], "reward": [0.0, 1.0, 0.0, 0.0],
    ...                   "propensity": [0.5, 0.5, 0.25, 0.5]})
    >>> logs = slate_logs(t)
    >>> logs.slate_id.tolist(), logs.item.tolist(), logs.slate_size
    ([3, 7], [[1, 2], [0, 2]], 2)
    >>> theirs = t.rename(columns={"slate_id": "sid", "reward": "click"})
    >>> slate_logs(theirs, mapping={"slate_id": "sid", "reward": "click"}).item.tolist()
    [[1, 2], [0, 2]]
    >>> slate_logs(t.assign(position=[2, 0, 0, 1]))
    Traceback (most recent call last):
    ...
    ope.exceptions.ValidationError: `position` must run 0..L-1 without gaps in every slate; ...
    """
    if isinstance(data, SlateLogs):
        return data
    base = check_positive_int(position_base, "position_base", minimum=0, maximum=MAX_POSITION_BASE)
    cols = _columns(data)
    names = _slate_columns(mapping, cols)
    slate_id, position, item, reward = (names[k] for k in SLATE_COLUMNS[:4])
    propensity, slate_propensity, prefix_propensity, context = (names[k] for k in SLATE_COLUMNS[4:])
    long = position in cols
    required = [slate_id, item, reward] + ([position] if long else [])
    missing = [c for c in required if c not in cols]
    probs = [c for c in (propensity, slate_propensity, prefix_propensity) if c in cols]
    if missing or not probs:
        need = (
            ""
            if probs
            else (
                f"; and no probability column (one of {propensity!r}, {slate_propensity!r}, "
                f"{prefix_propensity!r})"
            )
        )
        raise SchemaError(
            f"slate logs are missing columns: {', '.join(map(repr, missing)) or 'none'}{need}. "
            f"Present: {', '.join(sorted(cols))}. Name yours with mapping={{ope_name: "
            "your_column}, e.g. mapping={'slate_id': 'session'}."
        )
    if len(cols[slate_id]) == 0:
        raise ValidationError(
            f"slate logs have no rows (column {slate_id!r} is empty): there is no slate to "
            "evaluate on. Check the filter or the file that produced them."
        )
    refuse_sampling_weights(  # the sampling weights, e.g. from pdrop
        cols.get(SAMPLING_WEIGHT_COLUMN),
        what="slates",
        estimators="the slate estimators",
        units="slates",
        advice=(
            "Evaluate one row per slot with ope.evaluate (weighted), or drop the `weight` "
            "column to use the kept slates as they are."
        ),
    )
    cand = candidate_columns(cols)
    unread: tuple[str, ...] = ()
    if policies is not None:
        wanted = set(check_names(policies, "policies", example="policies=['greedy']"))
        unread = tuple(name for name in cand if name not in wanted)
        cand = {name: kinds for name, kinds in cand.items() if name in wanted}
    if long:
        logs = _long_logs(
            cand,
            cols,
            slate_id,
            position,
            item,
            reward,
            propensity,
            slate_propensity,
            prefix_propensity,
            context,
            base,
            allow_repeats,
        )
    else:
        logs = _list_logs(
            cand,
            cols,
            slate_id,
            item,
            reward,
            propensity,
            slate_propensity,
            prefix_propensity,
            context,
            allow_repeats,
            position,
        )
    return dataclasses.replace(logs, unread_candidates=unread) if unread else logs


def _last_position(base: int) -> str:
    """The last position of a slate of ``L`` slots counted from ``base``, in words."""
    return "L-1" if base == 0 else "L" if base == 1 else f"L+{base - 1}"


def _long_logs(
    cand, cols, sid_c, pos_c, item_c, rew_c, p_c, sp_c, pp_c, ctx_c, base, allow_repeats
):
    sid = np.asarray(cols[sid_c])
    pos = _as_int(cols[pos_c], pos_c) - base
    nrow = sid.shape[0]
    order = np.lexsort((pos, sid))
    sid_s, pos_s = sid[order], pos[order]
    uniq, start, counts = np.unique(sid_s, return_index=True, return_counts=True)
    dup = np.zeros(nrow, dtype=bool)
    dup[order[1:]] = (sid_s[1:] == sid_s[:-1]) & (pos_s[1:] == pos_s[:-1])
    if dup.any():
        count, first = first_rows(dup)
        raise ValidationError(
            f"slot given twice: {count} rows repeat a (`{sid_c}`, `{pos_c}`) pair (first at "
            f"row {first}); a slate has one item per position."
        )
    size = int(counts.max()) if counts.size else 0
    expected = np.arange(nrow) - np.repeat(start, counts)
    gap = np.zeros(nrow, dtype=bool)
    gap[order] = pos_s != expected
    if gap.any():
        count, first = first_rows(gap)
        raise ValidationError(
            f"`{pos_c}` must run {base}..{_last_position(base)} without gaps in every slate; "
            f"{count} rows "
            f"break this (first at row {first}: position {int(pos[first]) + base} in slate "
            f"{_plain(sid[first])!r}). Pass position_base={1 - base if base in (0, 1) else 0} "
            f"if the positions are {'1' if base == 0 else '0'}-based."
        )
    short = counts != size
    if short.any():
        count, first = first_rows(short)
        raise ValidationError(
            f"slates must all have {size} slots; {count} slates do not (first: slate "
            f"{_plain(uniq[first])!r} with {int(counts[first])})."
        )
    n = uniq.size
    rows = order.reshape(n, size)

    def grid(name: str | None, kind: str) -> np.ndarray | None:
        if not name or name not in cols:
            return None
        v = np.asarray(cols[name])[rows]
        return _as_int(v, name) if kind == "int" else as_float_array(v, name, ndim=(2,))

    logs = _finish(
        uniq,
        grid(item_c, "int"),
        grid(rew_c, "float"),
        grid(p_c, "float"),
        grid(sp_c, "float"),
        grid(pp_c, "float"),
        grid(ctx_c, "int"),
        rows,
        names=(item_c, rew_c, p_c, sp_c, pp_c, ctx_c),
        allow_repeats=allow_repeats,
        candidates={
            name: {kind: grid(column, "float") for kind, column in kinds.items()}
            for name, kinds in cand.items()
        },
    )
    return logs


def _list_logs(cand, cols, sid_c, item_c, rew_c, p_c, sp_c, pp_c, ctx_c, allow_repeats, pos_c):
    sid = np.asarray(cols[sid_c])
    items = _lists(
        cols[item_c],
        item_c,
        None,
        hint=(
            f" Without a column {pos_c!r} (`position`) the logs are read in the list layout; for "
            "one row per slot, name their position column with mapping={'position': ...}"
        ),
    )
    size = items.shape[1]
    order = np.argsort(sid, kind="stable")
    if (sid[order][1:] == sid[order][:-1]).any():
        count, first = first_rows(np.r_[False, sid[order][1:] == sid[order][:-1]])
        raise ValidationError(
            f"`{sid_c}` must be unique in the list layout (one row per slate); {count} rows "
            "repeat one."
        )

    def lst(name: str | None, kind: str) -> np.ndarray | None:
        if not name or name not in cols:
            return None
        v = _lists(cols[name], name, size)[order]
        return (
            _as_int(v, name)
            if kind == "int"
            else as_float_array(_numbers(v, name), name, ndim=(2,))
        )

    def scalar(name: str | None, kind: str) -> np.ndarray | None:
        if not name or name not in cols:
            return None
        v = np.asarray(cols[name])[order]
        col = np.repeat(v[:, None], size, axis=1)
        return _as_int(col, name) if kind == "int" else as_float_array(col, name, ndim=(2,))

    rows = np.repeat(order[:, None], size, axis=1)
    return _finish(
        sid[order],
        lst(item_c, "int"),
        lst(rew_c, "float"),
        lst(p_c, "float"),
        scalar(sp_c, "float"),
        lst(pp_c, "float"),
        scalar(ctx_c, "int"),
        rows,
        names=(item_c, rew_c, p_c, sp_c, pp_c, ctx_c),
        allow_repeats=allow_repeats,
        candidates={
            name: {
                kind: (scalar if kind == "slate" else lst)(column, "float")
                for kind, column in kinds.items()
            }
            for name, kinds in cand.items()
        },
    )


def _constant(arr: np.ndarray, name: str, rows: np.ndarray) -> np.ndarray:
    """A per-slot column that must not change within a slate -> (n,)."""
    bad = (arr != arr[:, :1]).any(axis=1)
    if bad.any():
        count, first = first_rows(bad)
        raise ValidationError(
            f"`{name}` must be the same on every slot of a slate; {count} slates differ (first "
            f"at row {int(rows[first, 0])})."
        )
    return arr[:, 0]


def _in_range(arr: np.ndarray, name: str, rows: np.ndarray, *, logger: bool) -> None:
    """A probability column of the logs, per slot ``(n, L)`` or per slate ``(n,)``: finite and
    in (0, 1] for the logger (it chose every logged slate), in [0, 1] for a candidate; an
    error names the row of the input table."""
    values = arr.reshape(arr.shape[0], -1)
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(values) & (values <= 1.0 + PROBABILITY_TOLERANCE)
        ok &= values > 0.0 if logger else values >= 0.0
    if ok.all():
        return
    slate, slot = (int(i) for i in np.argwhere(~ok)[0])
    raise ValidationError(
        f"`{name}` must be in {'(0, 1]' if logger else '[0, 1]'}; {int((~ok).sum())} values are "
        f"not (first at row {int(rows[slate, slot])}: {float(values[slate, slot])!r})."
        + (
            " The logger chose every logged slate, so it gave each a positive probability."
            if logger
            else ""
        )
    )


def _consistent(
    p: np.ndarray | None,
    sp: np.ndarray | None,
    pp: np.ndarray | None,
    names: tuple[str, str, str],
    rows: np.ndarray,
) -> None:
    """One policy's marginal ``p``, slate ``sp`` and prefix ``pp`` probabilities of the logged
    slates agree: a slate no likelier than any of its slots, prefixes that do not grow, and the
    full prefix equal to the slate."""
    p_c, sp_c, pp_c = names
    if sp is not None and p is not None:
        bad = np.asarray(sp > p.min(axis=1) + PROBABILITY_TOLERANCE)
        if bad.any():
            count, first = first_rows(bad)
            raise ValidationError(
                f"`{sp_c}` exceeds a slot's marginal `{p_c}` in {count} slates (first at "
                f"row {int(rows[first, 0])}); a slate cannot be likelier than one of its "
                "slots. Check which column holds which probability."
            )
    if pp is not None and pp.shape[1] > 1:
        bad = np.asarray((np.diff(pp, axis=1) > PROBABILITY_TOLERANCE).any(axis=1))
        if bad.any():
            count, first = first_rows(bad)
            raise ValidationError(
                f"`{pp_c}` must not increase with the position (a longer prefix is no likelier);"
                f" {count} slates break this (first at row {int(rows[first, 0])})."
            )
    if pp is not None and sp is not None:
        # the prefix of full length is the whole slate: the two columns must agree there
        bad = np.asarray(np.abs(pp[:, -1] - sp) > PROBABILITY_TOLERANCE)
        if bad.any():
            count, first = first_rows(bad)
            raise ValidationError(
                f"`{pp_c}` at the last position (the whole slate) contradicts `{sp_c}` in "
                f"{count} slates (first at row {int(rows[first, 0])}: {float(pp[first, -1])!r} "
                f"vs {float(sp[first])!r}); the probability of the full prefix is the slate's. "
                "Check which column holds which probability, or drop one of them."
            )


def _finish(
    sid, item, reward, p, sp, pp, ctx, rows, *, names, allow_repeats, candidates
) -> SlateLogs:
    item_c, rew_c, p_c, sp_c, pp_c, ctx_c = names
    check_finite(reward, rew_c)
    if not allow_repeats and item.shape[1] > 1:
        s = np.sort(item, axis=1)
        bad = (s[:, 1:] == s[:, :-1]).any(axis=1)
        if bad.any():
            count, first = first_rows(bad)
            raise ValidationError(
                f"an item appears twice in {count} slates (first at row {int(rows[first, 0])}); "
                "a ranking shows each item once. Pass allow_repeats=True for slot-specific "
                "catalogs."
            )
    for arr, name in ((p, p_c), (pp, pp_c)):
        if arr is not None:
            _in_range(arr, name, rows, logger=True)
    if sp is not None:
        sp = _constant(sp, sp_c, rows)
        _in_range(sp, sp_c, rows, logger=True)
    _consistent(p, sp, pp, (p_c, sp_c, pp_c), rows)
    if ctx is not None:
        ctx = _constant(ctx, ctx_c, rows)
    probs: dict[str, SlateProbabilities] = {}
    for name, kinds in candidates.items():  # a loop over candidates
        fields_of: dict[str, np.ndarray] = {}
        for kind, arr in kinds.items():
            column = CANDIDATE_COLUMNS[kind] + name
            if kind == "slate":
                arr = _constant(arr, column, rows)
            _in_range(arr, column, rows, logger=False)
            fields_of[kind] = arr
        _consistent(
            fields_of.get("marginal"),
            fields_of.get("slate"),
            fields_of.get("prefix"),
            tuple(CANDIDATE_COLUMNS[k] + name for k in ("marginal", "slate", "prefix")),
            rows,
        )
        probs[name] = SlateProbabilities(
            slate=fields_of.get("slate"),
            marginal=fields_of.get("marginal"),
            prefix=fields_of.get("prefix"),
        )
    return SlateLogs(
        slate_id=sid,
        item=item,
        reward=reward,
        propensity=p,
        slate_propensity=sp,
        prefix_propensity=pp,
        context=ctx,
        rows=rows,
        candidates=probs,
    )


# ============================================================================================
# policies
# ============================================================================================
@dataclass(frozen=True, eq=False)
class SlateProbabilities:
    """A policy's probabilities of the logged slates (any of them may be None if unknown).

    Attributes
    ----------
    slate : numpy.ndarray, shape (n,), or None
        Probability of the whole logged slate.
    marginal : numpy.ndarray, shape (n, L), or None
        Probability of the logged item at its position.
    prefix : numpy.ndarray, shape (n, L), or None
        Probability of the logged top-(k+1) prefix.
    marginal_error : numpy.ndarray, shape (n, L), or None
        Standard errors of ``marginal`` when it is approximate (Monte-Carlo marginals of a
        :class:`PlackettLuce` beyond enumeration); the estimators that use the marginals add
        the error it can cause to their standard error (see :class:`IndependentIPS`).
        ``None``: exact.

    A :class:`PlackettLuce` beyond :data:`MAX_ENUMERATED_SLATES` defers its marginals until an
    estimator needs them (``marginal`` is then None and :meth:`with_marginals` computes them):
    slate and cascade IPS never pay for them.
    """

    slate: np.ndarray | None = None
    marginal: np.ndarray | None = None
    prefix: np.ndarray | None = None
    marginal_error: np.ndarray | None = None
    _deferred: Callable[[], tuple[np.ndarray, np.ndarray | None]] | None = field(
        default=None, repr=False
    )

    @property
    def marginal_deferred(self) -> bool:
        """Whether the marginals are computed only when asked (:meth:`with_marginals`)."""
        return self.marginal is None and self._deferred is not None

    def with_marginals(self) -> SlateProbabilities:
        """These probabilities with deferred marginals computed (itself when there are none)."""
        if not self.marginal_deferred:
            return self
        assert self._deferred is not None
        marginal, error = self._deferred()
        return dataclasses.replace(self, marginal=marginal, marginal_error=error, _deferred=None)


def _codes(slates: np.ndarray, n_items: int) -> np.ndarray:
    """One int64 per (partial) slate, base ``n_items`` (order-preserving)."""
    powers = n_items ** np.arange(slates.shape[1] - 1, -1, -1, dtype=np.int64)
    return slates.astype(np.int64) @ powers


class SlatePolicy:
    """A ranking policy over a finite set of contexts: a distribution over ordered slates.

    Subclasses supply :meth:`distribution`; the probabilities of logged slates, the per-slot
    marginals and prefix probabilities follow from it exactly.
    """

    n_items: int
    slate_size: int

    def distribution(self) -> tuple[np.ndarray, np.ndarray]:
        """Every slate with positive support ``(S, L)`` and its probability per context
        ``(n_contexts, S)``."""
        raise NotImplementedError  # pragma: no cover - subclasses supply it

    @property
    def n_contexts(self) -> int:
        """Number of contexts the policy is defined over."""
        return int(self.distribution()[1].shape[0])

    def marginal_standard_errors(self) -> np.ndarray | None:
        """Standard errors of :meth:`marginals` (same shape), or None when they are exact."""
        return None

    def marginals(self) -> np.ndarray:
        """``(n_contexts, L, n_items)``: probability of each item at each position."""
        slates, prob = self.distribution()
        onehot = np.zeros((slates.shape[0], self.slate_size, self.n_items))
        np.put_along_axis(onehot, slates[:, :, None], 1.0, axis=2)
        # a sum of probabilities can round past 1 by a few ulps
        return np.clip(np.einsum("cs,skm->ckm", prob, onehot), 0.0, 1.0)

    def slate_probabilities(self, logs: Any) -> SlateProbabilities:
        """Probabilities of the logged slates (needs ``logs.context``); ``logs`` is
        :class:`SlateLogs` or anything :func:`slate_logs` reads, as for the estimators."""
        logs = slate_logs(logs)
        ctx = _logged_context(logs, self)
        slates, prob = self.distribution()
        out = []
        for k in range(1, self.slate_size + 1):  # loop over positions, not rows
            codes = _codes(slates[:, :k], self.n_items)
            uniq, inv = np.unique(codes, return_inverse=True)
            table = np.zeros((prob.shape[0], uniq.size))
            np.add.at(table, (slice(None), inv), prob)  # type: ignore[arg-type]  # stubs: no slices
            logged = _codes(logs.item[:, :k], self.n_items)
            j = np.clip(np.searchsorted(uniq, logged), 0, uniq.size - 1)
            out.append(np.where(uniq[j] == logged, table[ctx, j], 0.0))
        prefix = np.stack(out, axis=1)
        marg = self.marginals()[ctx[:, None], np.arange(self.slate_size), logs.item]
        return SlateProbabilities(slate=prefix[:, -1].copy(), marginal=marg, prefix=prefix)


#: Share of a context's score mass below which the mass not yet shown is not taken as the total
#: minus the shown mass (the subtraction would keep fewer than 26 of its 53 bits) but summed
#: from the smallest weights up (:func:`_stable_prefix_factors`).
_PREFIX_CANCELLATION: Final = 2.0**-26


def _stable_prefix_factors(logits: np.ndarray, context: np.ndarray, item: np.ndarray) -> np.ndarray:
    """``log`` of each Plackett-Luce factor ``w(item_k) / sum of w over the items not in
    item[:k]`` (``w = exp(logit)``), without cancellation or underflow: ``(n, L)``, each <= 0.

    Per context the items are ranked by weight and ``tail[j]`` is the log of the weight of the
    ranks ``>= j``, accumulated from the smallest (``logaddexp``). Before position ``k`` the
    shown items take every rank below ``j*``, the first rank not shown (``j* <= k``), so the
    mass not shown is ``tail[j*]`` less the shown items ranked beyond ``j*``; that difference
    keeps at least the weight of rank ``j*``, a share >= 1/n_items of ``tail[j*]``, so it is
    computed to a relative error of about ``n_items`` units in the last place.
    """
    n_ctx, m = logits.shape
    order = np.argsort(-logits, axis=1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.broadcast_to(np.arange(m), (n_ctx, m)), axis=1)
    ranked = np.take_along_axis(logits, order, axis=1)
    tail = np.full((n_ctx, m + 1), -np.inf)
    tail[:, :m] = np.logaddexp.accumulate(ranked[:, ::-1], axis=1)[:, ::-1]
    z = logits[context[:, None], item]
    rk = rank[context[:, None], item]
    out = np.empty(item.shape)
    for k in range(item.shape[1]):  # loop over positions, not rows
        before = np.sort(rk[:, :k], axis=1)
        gap = before != np.arange(k)
        first = (
            np.where(gap.any(axis=1), gap.argmax(axis=1), k)
            if k
            else np.zeros(len(rk), dtype=np.int64)
        )
        beyond = np.where(rk[:, :k] > first[:, None], z[:, :k], -np.inf)
        removed = np.logaddexp.reduce(beyond, axis=1) if k else np.full(len(rk), -np.inf)
        top = tail[context, first]
        with np.errstate(divide="ignore", invalid="ignore"):
            rest = top + np.log1p(-np.exp(removed - top))
        out[:, k] = np.minimum(z[:, k] - rest, 0.0)
    return out


def _index_array(values: Any, name: str, size: int, what: str, *, ndim: int) -> np.ndarray:
    """Whole numbers indexing ``size`` things (``0 .. size - 1``) as an int64 array of ``ndim``
    dimensions, or a ValidationError naming ``name``, the count and the first row."""
    arr = _as_int(values, name)
    if arr.ndim != ndim:
        shape = "(n,)" if ndim == 1 else "(n, L)"
        raise ValidationError(f"`{name}` must have shape {shape}; got shape {arr.shape}.")
    bad = (arr < 0) | (arr >= size)
    if bad.any():
        count, first = first_rows(bad)
        raise ValidationError(
            f"`{name}` must index the policy's {size} {what} (0..{size - 1}); {count} rows do "
            f"not (first at row {first})."
        )
    return arr


def _slate_array(slates: Any) -> np.ndarray:
    """``slates`` as an array, or a ParameterError naming the first slate whose length differs
    from the first one's (numpy refuses such ragged rows with a bare ValueError)."""
    try:
        return np.asarray(slates)
    except ValueError as exc:
        rows = list(slates)  # ragged: a list of rows, not an array (a loop over slates)
        lengths = [len(r) if isinstance(r, Sized) and not isinstance(r, str) else 1 for r in rows]
        first = next((i for i, n in enumerate(lengths) if n != lengths[0]), None)
        if first is None:
            raise ParameterError(
                f"`slates` must be a non-empty (S, L) array of item indices; could not convert "
                f"it: {exc}"
            ) from None
        raise ParameterError(
            f"`slates`: every slate needs the same length L (one item per slot); slate 0 has "
            f"{lengths[0]} items but slate {first} has {lengths[first]}. List each slate with "
            "all its L items."
        ) from None


def _slate_rows_problem(slates: np.ndarray) -> str | None:
    """What is wrong with an (S, L) array of slates (items 0 or more, no slate twice; an item
    may fill two slots, for a logger that fills slots independently), for a message after the
    argument's name; None when nothing is."""
    negative = slates < 0
    if negative.any():
        count, first = first_rows(negative)
        return (
            f"holds item indices, 0 or more; {count} slates hold a negative one (first at "
            f"row {first}: {slates[first].tolist()})"
        )
    _, first_of, counts = np.unique(slates, axis=0, return_index=True, return_counts=True)
    if (counts > 1).any():
        row = int(first_of[np.argmax(counts > 1)])
        return (
            f"must list each slate once (its probability is one column); slate "
            f"{slates[row].tolist()} (row {row}) appears {int(counts.max())} times"
        )
    return None


def _logged_context(logs: SlateLogs, policy: SlatePolicy) -> np.ndarray:
    if logs.context is None:
        raise PolicyError(
            "this candidate is defined per context index; the slate logs have no 'context' "
            "column. Add one, or give the candidate's probabilities of the logged slates."
        )
    n_ctx = policy.n_contexts
    bad = (logs.context < 0) | (logs.context >= n_ctx)
    if bad.any():
        count, first = first_rows(bad)
        raise PolicyError(
            f"the logs' 'context' must index the policy's {n_ctx} contexts; {count} slates do not (first "
            f"at slate {first}: {int(logs.context[first])})."
        )
    if logs.slate_size != policy.slate_size or int(logs.item.max()) >= policy.n_items:
        raise PolicyError(
            f"the policy ranks {policy.n_items} items into {policy.slate_size} slots; the logs "
            f"have {logs.slate_size} slots and items up to {int(logs.item.max())}."
        )
    return logs.context


class EnumeratedSlatePolicy(SlatePolicy):
    """A ranking policy given by its full distribution over slates, per context.

    Parameters
    ----------
    slates : array_like of int, shape (S, L)
        The slates (distinct rows), each of the same length ``L``. An item may fill several
        slots of a slate: such a distribution describes a logger that fills slots
        independently, not a ranking.
    probabilities : array_like, shape (n_contexts, S)
        Probability of each slate in each context; rows sum to 1.
    n_items : int, optional
        Catalog size (default: largest item + 1).

    Examples
    --------
    >>> pol = EnumeratedSlatePolicy([[0, 1], [1, 0]], [[0.75, 0.25]])
    >>> pol.marginals()[0].tolist()
    [[0.75, 0.25], [0.25, 0.75]]
    """

    def __init__(
        self, slates: npt.ArrayLike, probabilities: npt.ArrayLike, *, n_items: int | None = None
    ) -> None:
        s = _as_int(_slate_array(slates), "slates")
        if s.ndim != 2 or 0 in s.shape:
            raise ParameterError(
                f"`slates` must be a non-empty (S, L) array: one row of L items per slate; got "
                f"shape {s.shape}."
            )
        problem = _slate_rows_problem(s)
        if problem:
            raise ParameterError(f"`slates` {problem}.")
        p = as_float_array(probabilities, "probabilities", ndim=(2,))
        if p.shape[1] != s.shape[0] or p.shape[0] == 0:
            raise ParameterError(
                f"`probabilities` must have one row per context and one column per slate "
                f"({s.shape[0]}); got shape {p.shape}."
            )
        check_target_propensity(p, "probabilities")
        if np.abs(p.sum(axis=1) - 1.0).max() > PROBABILITY_TOLERANCE:
            raise PolicyError("each row of `probabilities` must sum to 1 over the slates.")
        top = int(s.max()) + 1
        self.n_items = top if n_items is None else check_positive_int(n_items, "n_items")
        if self.n_items < top:
            raise ParameterError(
                f"`n_items`={self.n_items} must exceed every item of `slates` (items are "
                f"0..n_items-1; the largest is {top - 1})."
            )
        if self.n_items ** int(s.shape[1]) >= 2**63:  # slates are coded in base n_items
            raise ParameterError(
                f"`n_items`={self.n_items} with slates of {s.shape[1]} items has more ordered "
                "slates than int64 can code; number the items 0..n-1 with n the catalog size."
            )
        self.slate_size = int(s.shape[1])
        self._slates, self._prob = s, p

    def distribution(self) -> tuple[np.ndarray, np.ndarray]:
        return self._slates, self._prob


class PlackettLuce(SlatePolicy):
    r"""Plackett-Luce ranking from scores: items drawn without replacement by softmax.

    The probability of a slate is exact at any size,
    :math:`\pi(s\mid x)=\prod_{k}\frac{e^{f(x,s_k)/\tau}}{\sum_{a\notin s_{<k}}e^{f(x,a)/\tau}}`,
    and so are its prefixes (the product up to ``k``): slate and cascade IPS work at any
    catalog size. The per-slot marginals are exact by enumeration up to
    :data:`MAX_ENUMERATED_SLATES` ordered slates. Beyond, they are Monte-Carlo with a
    Rao-Blackwellized exponential race: item :math:`a` arrives at
    :math:`T_a \sim \mathrm{Exp}(\lambda_a)` (:math:`\lambda` the softmax of the scores) and the
    slate is the order of arrival; given the other items' arrivals, :math:`a` is at slot
    :math:`k` with probability :math:`e^{-\lambda_a u_{k-1}} - e^{-\lambda_a u_k}` (:math:`u` the
    others' ordered arrival times, :math:`u_{-1} = 0`), which each of ``n_samples`` draws
    averages. Unbiased; for an item of low score the relative error does not grow as its
    marginal shrinks (a count of draws errs by :math:`1/\sqrt{n\,\pi}` relative). A marginal
    far below ``1 / n_samples`` of a *likely* item (placed late: it nearly always comes earlier)
    is an event the draws need not reach; its absolute error is then below that floor. The
    standard errors (:meth:`marginal_standard_errors`) enter the intervals of the estimators
    that use the marginals.

    Parameters
    ----------
    scores : array_like, shape (n_contexts, n_items)
        Item scores per context.
    slate_size : int
        Number of positions ``L``.
    temperature : float, default 1.0
    n_samples : int, default 200_000
        Monte-Carlo draws per context for marginals beyond enumeration (fewer for large
        catalogs would cost less; each draw costs ``n_items * slate_size`` exponentials).
    rng : int, numpy.random.Generator or None
        Randomness of the Monte-Carlo marginals.

    References
    ----------
    .. [1] R. L. Plackett, "The analysis of permutations", *Applied Statistics*, 1975.

    Examples
    --------
    >>> pol = PlackettLuce([[0.0, 0.0, 0.0]], slate_size=2)
    >>> round(float(pol.marginals()[0, 1, 2]), 6)   # uniform: 1/3 at every slot
    0.333333
    """

    def __init__(
        self,
        scores: npt.ArrayLike,
        slate_size: int,
        *,
        temperature: float = 1.0,
        n_samples: int = 200_000,
        rng: int | np.random.Generator | None = None,
    ) -> None:
        try:
            shape = np.shape(scores)
        except ValueError:  # ragged rows: as_float_array names the problem
            shape = (0, 0)
        if len(shape) != 2:
            hint = " (one context: pass [scores])" if len(shape) == 1 else ""
            raise ValidationError(
                f"`scores` must have shape (n_contexts, n_items), one row of item scores per "
                f"context; got shape {shape}{hint}."
            )
        f = as_float_array(scores, "scores", ndim=(2,))
        check_finite(f, "scores")
        tau = check_positive_real(temperature, "temperature", example="temperature=1.0")
        self.n_items = int(f.shape[1])
        self.slate_size = check_positive_int(slate_size, "slate_size")
        if self.slate_size > self.n_items:
            raise ParameterError(
                f"`slate_size` {slate_size} exceeds the {self.n_items} items to rank."
            )
        with np.errstate(over="ignore", invalid="ignore"):
            z = f / tau
            logits = z - z.max(axis=1, keepdims=True)
        if not np.isfinite(logits).all():
            raise ParameterError(
                "`scores` divided by `temperature` overflow float64 (or their spread does): "
                f"scores up to {float(np.abs(f).max()):.3g} at temperature {tau:g}; rescale "
                "the scores."
            )
        self._logits = logits
        # one draw has no spread: its standard error would read 0
        self._n_samples = check_positive_int(n_samples, "n_samples", minimum=2)
        check_rng(rng)  # validated here, drawn from by the first Monte-Carlo marginals
        self._rng = rng
        self._cache: dict[str, Any] = {}

    @property
    def n_slates(self) -> int:
        """Number of ordered slates ``m! / (m - L)!``."""
        return math.perm(self.n_items, self.slate_size)

    @property
    def n_contexts(self) -> int:
        """Number of contexts (rows of ``scores``)."""
        return int(self._logits.shape[0])

    def prefix_probabilities(self, context: np.ndarray, item: np.ndarray) -> np.ndarray:
        """Exact ``(n, L)`` probabilities of the prefixes ``item[:, :k+1]`` in ``context``.

        ``context`` holds one context index per slate (``0 .. n_contexts - 1``), ``item`` one
        row of item indices (``0 .. n_items - 1``) per slate, at most ``slate_size`` of them.
        Items are drawn without replacement, so a prefix that repeats an item has probability
        0. Each factor's denominator is the score mass not yet shown: where taking the shown
        mass off the total would lose it (the shown items hold all but a 2**-26 share of the
        mass, or their weights underflow), it is summed from the smallest weights up, in log
        space (:func:`_stable_prefix_factors`), so the result stays finite and exact.
        """
        context = _index_array(context, "context", self._logits.shape[0], "contexts", ndim=1)
        item = _index_array(item, "item", self.n_items, "items", ndim=2)
        if item.shape[0] != context.shape[0] or item.shape[1] > self.slate_size:
            raise ValidationError(
                f"`item` must have one row per context ({context.shape[0]}) of at most "
                f"slate_size={self.slate_size} items; got shape {item.shape}."
            )
        blocked = np.zeros(item.shape, dtype=bool)
        for k in range(1, item.shape[1]):  # loop over positions: an item shown before
            blocked[:, k] = (item[:, :k] == item[:, k : k + 1]).any(axis=1)
        blocked = np.logical_or.accumulate(blocked, axis=1)
        e = np.exp(self._logits)  # (n_contexts, m): never (n, m)
        total = e.sum(axis=1)[context][:, None]
        shown = e[context[:, None], item]  # (n, L)
        rest = total - (np.cumsum(shown, axis=1) - shown)
        with np.errstate(divide="ignore", invalid="ignore"):
            factor = np.where(blocked, 0.0, shown / rest)
        lost = (~blocked & ~(rest > total * _PREFIX_CANCELLATION)).any(axis=1)
        if lost.any():
            stable = np.exp(_stable_prefix_factors(self._logits, context[lost], item[lost]))
            factor[lost] = np.where(blocked[lost], 0.0, stable)
        return np.cumprod(factor, axis=1)

    def distribution(self) -> tuple[np.ndarray, np.ndarray]:
        if "dist" not in self._cache:
            if self.n_slates > MAX_ENUMERATED_SLATES:
                raise PolicyError(
                    f"{self.n_slates} ordered slates exceed MAX_ENUMERATED_SLATES="
                    f"{MAX_ENUMERATED_SLATES}: the full distribution (the pseudoinverse's exact "
                    "Gamma) is not enumerated. Slate and cascade IPS (exact prefix "
                    "probabilities), independent IPS (marginals) and "
                    "PseudoInverse(product_logging=True) work at any size."
                )
            slates = np.array(
                list(itertools.permutations(range(self.n_items), self.slate_size)), dtype=np.int64
            )
            n_ctx = self._logits.shape[0]
            ctx = np.repeat(np.arange(n_ctx), slates.shape[0])
            pre = self.prefix_probabilities(ctx, np.tile(slates, (n_ctx, 1)))
            self._cache["dist"] = (slates, pre[:, -1].reshape(n_ctx, -1))
        return self._cache["dist"]

    @property
    def exact_marginals(self) -> bool:
        """Whether :meth:`marginals` are exact (enumeration), not Monte-Carlo."""
        return self.n_slates <= MAX_ENUMERATED_SLATES

    def marginals(self) -> np.ndarray:
        if "marg" not in self._cache:
            if self.exact_marginals:
                self._cache["marg"], self._cache["marg_se"] = super().marginals(), None
            else:
                self._cache["marg"], self._cache["marg_se"] = self._race_marginals()
        return self._cache["marg"]

    def marginal_standard_errors(self) -> np.ndarray | None:
        self.marginals()
        return self._cache["marg_se"]

    def _race_marginals(self) -> tuple[np.ndarray, np.ndarray]:
        """Rao-Blackwellized exponential-race marginals and their standard errors (see the
        class), ``(n_contexts, L, n_items)`` each."""
        rng = check_rng(self._rng)
        n_ctx, m = self._logits.shape
        size = self.slate_size
        mean = np.zeros((n_ctx, m, size))
        m2 = np.zeros((n_ctx, m, size))
        step = max(1, _RACE_BLOCK // (m * size))
        log_rates = self._logits - np.logaddexp.reduce(self._logits, axis=1)[:, None]
        for c in range(n_ctx):  # loop over contexts and blocks of draws, not rows
            # each item's terms divided by its rate (a rare item's are about rate x gap: no
            # underflow of their squares; the rate taken at least 1e-100, so that the terms,
            # at most 1, stay below 1e100), block means and centred squares merged (Chan)
            unit = np.exp(np.maximum(log_rates[c], math.log(1e-100)))[:, None]
            done = 0
            while done < self._n_samples:
                b = min(step, self._n_samples - done)
                y = _race_block(log_rates[c], size, rng.exponential(size=(b, m))) / unit
                block_mean = y.mean(axis=0)
                y -= block_mean
                block_m2 = np.einsum("bmk,bmk->mk", y, y)
                delta = block_mean - mean[c]
                mean[c] += delta * (b / (done + b))
                m2[c] += block_m2 + delta * delta * (done * b / (done + b))
                done += b
            mean[c] *= unit
            m2[c] *= unit * unit
        n = float(self._n_samples)
        se = np.sqrt(m2 / max(n - 1.0, 1.0) / n)
        return mean.transpose(0, 2, 1).copy(), se.transpose(0, 2, 1).copy()

    def sample(
        self, context: np.ndarray, *, rng: int | np.random.Generator | None = None
    ) -> np.ndarray:
        """Draw one slate per context index (Gumbel top-k), shape (n, L)."""
        context = _index_array(context, "context", self._logits.shape[0], "contexts", ndim=1)
        g = check_rng(rng)
        z = self._logits[context] + g.gumbel(size=(len(context), self.n_items))
        return np.argsort(-z, axis=1)[:, : self.slate_size]

    def slate_probabilities(self, logs: Any) -> SlateProbabilities:
        logs = slate_logs(logs)
        ctx = _logged_context(logs, self)
        prefix = self.prefix_probabilities(ctx, logs.item)
        slots = np.arange(self.slate_size)

        def logged_marginals() -> tuple[np.ndarray, np.ndarray | None]:
            marg = self.marginals()[ctx[:, None], slots, logs.item]
            se = self.marginal_standard_errors()
            return marg, None if se is None else se[ctx[:, None], slots, logs.item]

        if self.exact_marginals or "marg" in self._cache:
            marg, se = logged_marginals()
            return SlateProbabilities(
                slate=prefix[:, -1].copy(), marginal=marg, prefix=prefix, marginal_error=se
            )
        return SlateProbabilities(
            slate=prefix[:, -1].copy(), prefix=prefix, _deferred=logged_marginals
        )


#: Exponentials per block of the race marginals (draws x items x slots): 32 MB of float64.
_RACE_BLOCK: Final = 1 << 22


def plackett_luce_from_table(
    table: Any,
    slate_size: int,
    *,
    context: str = "context",
    item: str = "item",
    score: str = "score",
    temperature: float = 1.0,
    n_contexts: int | None = None,
) -> PlackettLuce:
    """A :class:`PlackettLuce` ranking from a long table of scores: one row per (context, item)
    with the item's ``score`` in that context. Items are the logs' integer ids ``0 .. m-1`` and
    contexts their ``context`` indices ``0 .. C-1``; every pair needs its score. A table
    without a ``context`` column is one ranking for every context: of ``n_contexts`` contexts
    (default 1). What ``ope slates --scores`` reads.

    Raises
    ------
    ope.SchemaError
        A missing column.
    ope.ValidationError
        Ids that are not whole numbers from 0, a pair given twice or missing, scores that are
        not finite.

    Examples
    --------
    >>> pol = plackett_luce_from_table({"item": [0, 1, 2], "score": [0.0, 0.0, 0.0]}, 2)
    >>> pol.n_items, pol.n_contexts, round(float(pol.marginals()[0, 0, 1]), 6)
    (3, 1, 0.333333)
    """
    context, item, score = (
        check_name(v, arg, what="a column name")
        for v, arg in ((context, "context"), (item, "item"), (score, "score"))
    )
    try:
        cols = _columns(table)
    except ParameterError:
        raise ParameterError(
            "`table` (the scores) must be a pyarrow.Table, a pandas.DataFrame or a mapping of "
            f"columns; got {type(table).__name__}."
        ) from None
    missing = [c for c in (item, score) if c not in cols]
    if missing:
        raise SchemaError(
            f"the scores table is missing columns: {', '.join(map(repr, missing))} (one row "
            f"per (context, item) with its score). Present: {', '.join(sorted(cols))}."
        )
    if len(cols[item]) == 0:
        raise ValidationError("the scores table has no rows: give every item a score.")
    lengths = {c: len(cols[c]) for c in (item, score, context) if c in cols}
    if len(set(lengths.values())) > 1:
        raise ValidationError(
            f"the scores table's columns have different lengths: {lengths}; one row per "
            "(context, item)."
        )
    ids: dict[str, np.ndarray] = {}
    for name in (item, context):  # the two id columns
        if name not in cols:
            continue
        raw = np.asarray(cols[name])
        if raw.dtype.kind == "b":
            raise ValidationError(
                f"`{name}` of the scores table holds booleans; it must hold integer ids from 0."
            )
        arr = _as_int(raw, name)
        if arr.ndim != 1:
            raise ValidationError(f"`{name}` of the scores table must be one id per row.")
        if arr.size and int(arr.min()) < 0:
            count, first = first_rows(arr < 0)
            raise ValidationError(
                f"`{name}` of the scores table must count from 0; {count} rows are negative "
                f"(first at row {first})."
            )
        ids[name] = arr
    it = ids[item]
    ctx = ids[context] if context in ids else np.zeros(it.size, np.int64)
    f = as_float_array(cols[score], score, ndim=(1,))
    check_finite(f, score)
    n_ctx = int(ctx.max()) + 1
    n_items = int(it.max()) + 1
    if it.size > n_ctx * n_items:  # Python ints: no overflow before the keys are formed
        raise ValidationError(
            f"the scores table has {it.size} scores for {n_ctx} contexts x {n_items} items "
            f"({n_ctx * n_items} pairs): a (`{context}`, `{item}`) pair is given twice; keep "
            "one score each."
        )
    key = ctx * n_items + it
    if np.unique(key).size != key.size:
        raise ValidationError(
            f"the scores table gives a (`{context}`, `{item}`) pair twice; keep one score each."
        )
    if it.size != n_ctx * n_items:
        raise ValidationError(
            f"the scores table has {it.size} scores for {n_ctx} contexts x {n_items} items "
            f"({n_ctx * n_items} pairs): give every item a score in every context (a very low "
            "score for an item the candidate should almost never show)."
        )
    scores = np.empty(n_ctx * n_items)
    scores[key] = f
    table_scores = scores.reshape(n_ctx, n_items)
    if context not in cols and n_contexts is not None:  # one ranking in every context
        count = check_positive_int(n_contexts, "n_contexts")
        table_scores = np.broadcast_to(table_scores, (count, n_items))
    return PlackettLuce(table_scores, slate_size, temperature=temperature)


def _race_block(log_lam: np.ndarray, size: int, e: np.ndarray) -> np.ndarray:
    """Each draw's conditional probability of each item at each slot, ``(b, m, size)``, from
    unit exponentials ``e`` ``(b, m)``: arrival times ``T = e / lam`` (kept as their logs, so
    that a rate that underflows, a score hundreds of logits below the best, still has its
    order); for item ``a`` the others' ordered arrivals ``u`` give ``exp(-lam_a u_{k-1}) (1 -
    exp(-lam_a (u_k - u_{k-1})))`` (``u_{-1} = 0``), with ``lam_a u = exp(log lam_a + log u)``.
    The others' order is the overall one, except for the items among the first ``size``
    arrivals, whose own arrival is taken out."""
    b, m = e.shape
    with np.errstate(divide="ignore"):
        t = np.log(e) - log_lam  # log arrival times; a zero exponential arrives at -inf
    if m > size:
        first = np.argpartition(t, size, axis=1)[:, : size + 1]
    else:  # every item is shown: the (size + 1)-th arrival never comes
        first = np.broadcast_to(np.arange(m), (b, m))
    order = np.argsort(np.take_along_axis(t, first, axis=1), axis=1)
    items = np.take_along_axis(first, order, axis=1)
    times = np.take_along_axis(t, items, axis=1)
    if m <= size:
        items = np.concatenate([items, np.full((b, size + 1 - m), -1)], axis=1)
        times = np.concatenate([times, np.full((b, size + 1 - m), np.inf)], axis=1)

    def slots(arrivals: np.ndarray, log_rate: np.ndarray) -> np.ndarray:
        # log arrivals (..., size) ordered; log rate broadcastable to (..., 1)
        prev = np.concatenate(
            [np.full(arrivals.shape[:-1] + (1,), -np.inf), arrivals[..., :-1]], -1
        )
        with np.errstate(over="ignore", invalid="ignore"):
            before = np.exp(log_rate + prev)  # lam_a u_{k-1}
            # lam_a (u_k - u_{k-1}) = lam_a u_k (1 - u_{k-1} / u_k)
            gap = -np.expm1(-np.exp(log_rate + arrivals) * -np.expm1(prev - arrivals))
            out = np.exp(-before) * gap
        return np.where(np.isnan(out), 0.0, out)  # an infinite time against an infinite one

    x = slots(times[:, None, :size], log_lam[None, :, None])
    rows = np.arange(b)
    for r in range(min(size, m)):  # loop over the first arrivals: their own time taken out
        a = items[:, r]
        others = np.delete(times, r, axis=1)[:, :size]
        x[rows, a] = slots(others, log_lam[a][:, None])
    return x


def slate_probabilities(
    policy: Any, logs: SlateLogs, *, argument: str = "target"
) -> SlateProbabilities:
    """A candidate's probabilities of the logged slates, from any supported form.

    ``policy`` is a :class:`SlateProbabilities` (used as is), or any object with a
    ``slate_probabilities(logs)`` method returning one (:class:`SlatePolicy` and user
    classes). Arrays are checked against the logs' shape and ranges. ``argument`` is what
    messages call the policy (``target``, the candidate, or ``logging``, the logger).

    Examples
    --------
    >>> logs = slate_logs({"slate_id": [0], "item": [[1, 0]], "reward": [[1.0, 0.0]],
    ...                    "propensity": [[0.5, 0.5]]})
    >>> slate_probabilities(SlateProbabilities(marginal=[[1.0, 1.0]]), logs).marginal.tolist()
    [[1.0, 1.0]]
    """
    who = "logger" if argument == "logging" else "candidate"
    if isinstance(policy, SlateProbabilities):
        probs = policy
    elif callable(getattr(policy, "slate_probabilities", None)):
        probs = policy.slate_probabilities(logs)
        if not isinstance(probs, SlateProbabilities):
            raise PolicyError(
                f"`{argument}`: {type(policy).__name__}.slate_probabilities(logs) must return "
                f"SlateProbabilities; got {type(probs).__name__}."
            )
    else:
        raise PolicyError(
            f"`{argument}` (the slate {who}) must be SlateProbabilities or have a "
            f"slate_probabilities(logs) method, e.g. a SlatePolicy; got {describe(policy)}."
        )
    shapes = {
        "slate": (logs.n,),
        "marginal": (logs.n, logs.slate_size),
        "prefix": (logs.n, logs.slate_size),
    }

    def checked(name: str, v: Any, shape: tuple[int, ...]) -> np.ndarray:
        label = f"`{argument}` {name} probability"
        arr = as_float_array(v, label, ndim=(len(shape),))
        if arr.shape != shape:
            raise PolicyError(
                f"the {who}'s {name} probabilities (`{argument}`) have shape {arr.shape}; the "
                f"logs need {shape}."
            )
        check_target_propensity(arr, label)
        return arr

    def checked_error(v: Any) -> np.ndarray | None:
        if v is None:
            return None
        arr = as_float_array(v, f"`{argument}` marginal_error", ndim=(2,))
        if arr.shape != shapes["marginal"] or not bool(np.all(np.isfinite(arr) & (arr >= 0))):
            raise PolicyError(
                f"the {who}'s marginal_error (`{argument}`) must be finite standard errors >= 0 "
                f"of shape {shapes['marginal']}; got shape {arr.shape}."
            )
        return arr

    out: dict[str, Any] = {
        name: None if getattr(probs, name) is None else checked(name, getattr(probs, name), shape)
        for name, shape in shapes.items()
    }
    out["marginal_error"] = checked_error(probs.marginal_error)
    if out["marginal_error"] is not None and out["marginal"] is None:
        raise PolicyError(
            f"the {who}'s marginal_error (`{argument}`) is given without its marginal "
            "probabilities."
        )
    if probs.marginal_deferred:
        deferred = probs._deferred
        assert deferred is not None

        def resolved() -> tuple[np.ndarray, np.ndarray | None]:
            marginal, error = deferred()
            return checked("marginal", marginal, shapes["marginal"]), checked_error(error)

        out["_deferred"] = resolved
    return SlateProbabilities(**out)


def slate_probabilities_from_table(
    table: Any,
    logs: SlateLogs,
    *,
    slate_id: str = "slate_id",
    position: str = "position",
    item: str = "item",
    probability: str = "probability",
    slate_probability: str | None = "slate_probability",
    prefix_probability: str | None = "prefix_probability",
    position_base: int = 0,
) -> SlateProbabilities:
    """A candidate's probabilities of the logged slates from a long table.

    The table has one row per (slate, position, item) the candidate can play, with its marginal
    ``probability`` of that item at that position (and optionally, on the logged item's rows,
    the slate and prefix probabilities). A logged (slate, position, item) absent from the table
    has marginal probability 0 (the candidate never places that item there).

    Examples
    --------
    >>> logs = slate_logs({"slate_id": [5], "item": [[1, 0]], "reward": [[1.0, 0.0]],
    ...                    "propensity": [[0.5, 0.5]]})
    >>> t = {"slate_id": [5, 5, 5], "position": [0, 0, 1], "item": [1, 0, 0],
    ...      "probability": [0.9, 0.1, 0.9]}
    >>> slate_probabilities_from_table(t, logs).marginal.tolist()
    [[0.9, 0.9]]
    """
    cols = _columns(table)
    missing = [c for c in (slate_id, position, item, probability) if c not in cols]
    if missing:
        raise SchemaError(
            f"the candidate table is missing columns: {', '.join(map(repr, missing))}. "
            f"Present: {', '.join(sorted(cols))}."
        )
    base = check_positive_int(position_base, "position_base", minimum=0, maximum=MAX_POSITION_BASE)
    sid = np.asarray(cols[slate_id])
    _same_id_kind(sid, logs.slate_id, slate_id)
    slot = np.searchsorted(logs.slate_id, sid)
    slot = np.clip(slot, 0, logs.n - 1)
    known = logs.slate_id[slot] == sid
    pos = _as_int(cols[position], position) - base
    it = _as_int(cols[item], item)
    prob = as_float_array(cols[probability], probability, ndim=(1,))
    check_target_propensity(prob, probability)
    if sid.size and not known.any():
        raise ValidationError(
            f"none of the candidate table's {sid.size} rows has a `{slate_id}` of the logs (row "
            f"0: {_plain(sid[0])!r}; the logs have e.g. {_plain(logs.slate_id[0])!r}): every "
            "marginal would be 0. Use the logs' slate ids."
        )
    inrange = known & (pos >= 0) & (pos < logs.slate_size)
    hit = np.zeros(sid.shape[0], dtype=bool)
    hit[inrange] = logs.item[slot[inrange], pos[inrange]] == it[inrange]
    key = slot[hit] * logs.slate_size + pos[hit]
    if np.unique(key).size != key.size:
        raise ValidationError(
            "the candidate table gives a logged (slate, position, item) twice; keep one row each."
        )
    marg = np.zeros(logs.n * logs.slate_size)
    marg[key] = prob[hit]
    out: dict[str, Any] = {"marginal": marg.reshape(logs.n, logs.slate_size)}
    for name, col in (("prefix", prefix_probability), ("slate", slate_probability)):
        if col and col in cols:
            flat = np.zeros(logs.n * logs.slate_size)
            flat[key] = as_float_array(cols[col], col, ndim=(1,))[hit]
            v = flat.reshape(logs.n, logs.slate_size)
            out[name] = v if name == "prefix" else v[:, 0]
    return slate_probabilities(SlateProbabilities(**out), logs)


# ============================================================================================
# estimators
# ============================================================================================
class _SlateRows(RowSource):
    """Per-slate rows of a slate estimate: ``sum_k w_ik r_ik`` (or its self-normalized form).

    The rewards are held in units of ``scale`` (a power of two, see :func:`_reward_scale`);
    :meth:`statistic` and :meth:`gradient` give the estimate in reward units.
    """

    methods: tuple[str, ...] = ("bootstrap",)

    def __init__(
        self,
        weight: np.ndarray,
        reward: np.ndarray,
        self_normalized: bool,
        shared: bool,
        scale: float = 1.0,
    ) -> None:
        self.w, self.r = weight, reward if scale == 1.0 else reward / scale
        self.scale = scale
        self.reward = self.r.sum(axis=1)  # identifies the rows (paired comparisons)
        self.n = int(weight.shape[0])
        self.sn = self_normalized
        self.shared = shared  # one weight for all slots (slate IPS, PI)

    def n_components(self) -> int:
        if not self.sn:
            return 1
        return 2 if self.shared else 2 * self.w.shape[1]

    def components(self) -> np.ndarray:
        wr = self.w * self.r
        if not self.sn:
            return wr.sum(axis=1, keepdims=True)
        if self.shared:
            return np.column_stack([wr.sum(axis=1), self.w[:, 0]])
        return np.hstack([wr, self.w])

    def statistic(self, means: np.ndarray) -> np.ndarray:
        if not self.sn:
            return means[..., 0] * self.scale
        h = means.shape[-1] // 2
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return (means[..., :h] / means[..., h:]).sum(axis=-1) * self.scale

    def gradient(self, means: np.ndarray) -> np.ndarray:
        if not self.sn:
            return np.full(1, self.scale)
        h = means.shape[-1] // 2
        num, den = means[:h], means[h:]
        return np.concatenate([1.0 / den, -num / den**2]) * self.scale


#: Slate rewards from this magnitude on, or below its reciprocal, are held in units of a power
#: of two (:class:`_SlateRows`): the weighted sums over slots and rows, and the squares behind
#: the standard error, of rewards near 1e308 would overflow float64, and those of rewards near
#: 1e-170 underflow to 0 (a standard error of 0). Between, in the rewards' own units (exact
#: either way).
_SCALED_FROM: Final = 2.0**64


def _reward_scale(reward: np.ndarray) -> float:
    """A power of two that brings the largest |reward| into [1, 2) when it reaches
    :data:`_SCALED_FROM` or is below ``1 / _SCALED_FROM`` (and not 0); 1.0 otherwise."""
    top = float(np.max(np.abs(reward))) if reward.size else 0.0
    return power_of_two_scale(top) if top >= _SCALED_FROM or 0.0 < top < 1.0 / _SCALED_FROM else 1.0


@dataclass(frozen=True)
class SlateEstimator:
    """Shared steps of the slate estimators: weights -> rows -> value, error, interval, notes.

    A subclass supplies ``name``, ``_weights`` (per-slot weights ``(n, L)`` from the
    candidate's and the logger's probabilities) and its assumption (first note of the result).

    Parameters
    ----------
    self_normalized : bool, default False
        Divide each slot's weighted reward sum by that slot's weight sum (one normalizer for
        slate IPS and PI): consistent, not unbiased, usually of smaller variance.
    """

    self_normalized: bool = False

    name = "slate"
    _kind = "sips"
    _shared = True
    #: The settings the slate estimator contract runs (ope.testing): plain and self-normalized.
    contract_variants: ClassVar[tuple[dict[str, Any], ...]] = (
        {"self_normalized": False},
        {"self_normalized": True},
    )

    def __post_init__(self) -> None:
        for setting in ("self_normalized", "product_logging"):  # "no" would be truthy
            if hasattr(self, setting):
                check_flag(getattr(self, setting), setting)

    def _weights(
        self, logs: SlateLogs, target: SlateProbabilities, logging: SlateProbabilities
    ) -> np.ndarray:
        raise NotImplementedError  # pragma: no cover - subclasses supply it

    def estimate(
        self, logs: Any, target: Any, *, logging: Any = None, policy: str | None = None
    ) -> Estimate:
        """Estimate the candidate's expected slate reward (sum over slots).

        Parameters
        ----------
        logs : SlateLogs or table
            Slate logs (read with :func:`slate_logs` when not already).
        target : SlateProbabilities, SlatePolicy or object with ``slate_probabilities(logs)``
            The candidate.
        logging : same forms as ``target``, optional
            The logger, when its probabilities are not (all) in the logs.
        policy : str, optional
            Name recorded on the estimate.

        Returns
        -------
        ope.Estimate
            Row-backed: ``ci(method="normal" | "t" | "bootstrap")`` and :func:`ope.compare`.
        """
        logs, tgt, log_p = _read_slates(logs, target, logging)
        w = self._weights(logs, tgt, log_p)
        return _estimate(self, logs, w, policy, self._weight_error(logs, tgt, log_p))

    def _weight_error(
        self, logs: SlateLogs, target: SlateProbabilities, logging: SlateProbabilities
    ) -> np.ndarray | None:
        """Standard errors of the weights from approximate probabilities, or None (exact)."""
        return None

    @property
    def estimator_name(self) -> str:
        return ("sn" if self.self_normalized else "") + self.name


def _read_slates(
    logs: Any, target: Any, logging: Any
) -> tuple[SlateLogs, SlateProbabilities, SlateProbabilities]:
    """The slate logs, the candidate's and the logger's probabilities of the logged slates (the
    logger's from the logs unless ``logging`` is given)."""
    logs = slate_logs(logs)
    tgt = slate_probabilities(target, logs)
    log_p = (
        logs.logging_probabilities()
        if logging is None
        else slate_probabilities(logging, logs, argument="logging")
    )
    return logs, tgt, log_p


def _need(probs: SlateProbabilities, field_name: str, who: str, what: str) -> np.ndarray:
    if field_name == "marginal":
        probs = probs.with_marginals()
    v = getattr(probs, field_name)
    if v is None and field_name == "slate" and probs.prefix is not None:
        v = probs.prefix[:, -1]  # the prefix of full length is the whole slate
    if v is None:
        column = {
            "slate": "slate_propensity",
            "marginal": "propensity",
            "prefix": "prefix_propensity",
        }[field_name]
        where = (
            (
                "`target`: give a candidate that provides them (a SlatePolicy, or "
                f"SlateProbabilities with `{field_name}`)"
            )
            if who == "candidate"
            else (f"give the logs' `{column}` column, or `logging` as a policy that provides them")
        )
        raise PolicyError(
            f"{what} needs the {who}'s {field_name} probabilities of the logged slates; they "
            f"are not available ({where})."
        )
    out = np.asarray(v, dtype=np.float64)
    if who == "logger" and not bool(np.all(out > 0)):  # the logger chose every logged slate
        count, first = first_rows(np.asarray((out <= 0).reshape(out.shape[0], -1).any(axis=1)))
        raise PolicyError(
            f"the logger gives {count} logged slates probability 0 ({field_name} probabilities; "
            f"first at slate {first}): it cannot have chosen them. Check the logged items (an "
            "item repeated in a slate a ranking policy never repeats) or the logger given."
        )
    return out


def _marginal_ratio(
    target: SlateProbabilities, logging: SlateProbabilities, what: str
) -> tuple[np.ndarray, np.ndarray | None]:
    """``(n, L)`` marginal weights ``pi / pi_0`` and, when either side's marginals are
    approximate, the standard errors of the weights (first order: ``se / pi_0 + pi se_0 /
    pi_0**2``); else None."""
    t, lg = target.with_marginals(), logging.with_marginals()
    pt = _need(t, "marginal", "candidate", what)
    p0 = _need(lg, "marginal", "logger", what)
    ratio = pt / p0
    if t.marginal_error is None and lg.marginal_error is None:
        return ratio, None
    se_t = np.zeros_like(pt) if t.marginal_error is None else t.marginal_error
    se_0 = np.zeros_like(p0) if lg.marginal_error is None else lg.marginal_error
    return ratio, se_t / p0 + pt * se_0 / (p0 * p0)


def _error_bound(
    src: _SlateRows, means: np.ndarray, dw: np.ndarray, context: np.ndarray | None
) -> float:
    """An upper bound on the standard deviation of the estimate from weights known to the
    standard errors ``dw`` (n, L).

    To first order the estimate moves by ``sum_ik s_ik e_ik / n`` for weight errors ``e``, with
    ``s`` its sensitivity to each weight (``r``; self-normalized: ``(r - V_k) / mean(w_k)``).
    The errors of one context's marginals come from the same draws, so within a context the
    bound adds ``|s| dw`` (any correlation); contexts are drawn independently, so their bounds
    add in quadrature.
    """
    grad = src.gradient(means)
    if not src.sn:
        sens = src.r * grad[0]
    elif src.shared:
        total = src.r.sum(axis=1, keepdims=True)
        sens = np.broadcast_to(total * grad[0] + grad[1], src.r.shape) / src.r.shape[1]
    else:
        h = src.r.shape[1]
        sens = src.r * grad[:h] + grad[h:]
    per_row = (np.abs(sens) * dw).sum(axis=1) / src.n
    if context is None:
        return float(per_row.sum())
    per_context = np.bincount(context, weights=per_row)
    return float(math.sqrt(float(per_context @ per_context)))


def _estimate(
    est: SlateEstimator,
    logs: SlateLogs,
    w: np.ndarray,
    policy: str | None,
    weight_error: np.ndarray | None = None,
    row_reward: np.ndarray | None = None,
) -> Estimate:
    if w.size and not float(w.max()) <= MAX_FINITE_WEIGHT:  # NaN too
        row, k = (
            int(i) for i in np.unravel_index(int(np.argmax(~(w <= MAX_FINITE_WEIGHT))), w.shape)
        )
        raise ValidationError(
            f"{est.estimator_name}: importance weights overflow float64: slate {row} (0-based), slot "
            f"{k} has weight {float(w[row, k]):.3g}, above {MAX_FINITE_WEIGHT:g}, whose square "
            "is not representable. The logged probabilities of that slate (`propensity`, "
            "`prefix_propensity`, `slate_propensity`) are this small; no logger acts on such a "
            "probability. Fix the logger, or leave such slates out."
        )
    scale = _reward_scale(logs.reward)
    src = _SlateRows(w, logs.reward, est.self_normalized, est._shared, scale)
    if row_reward is not None:  # the rows' own rewards (the logs hold a model's terms)
        src.reward = row_reward / scale
    comps = src.components()
    means = comps.mean(axis=0)
    if est.self_normalized and not bool(np.all(means[means.shape[0] // 2 :] != 0.0)):
        raise EstimationError(
            f"{est.estimator_name}: the importance weights of a slot sum to zero (`target` "
            "gives the logged slates probability 0 there), so the self-normalized estimate is "
            "0/0. Use the unnormalized estimator (self_normalized=False), or a candidate that "
            "gives the logged slates some probability."
        )
    value = float(src.statistic(means))
    infl = (comps - means) @ (src.gradient(means) / scale)  # in units of the scale
    n = logs.n
    se = float(infl.std(ddof=1) / math.sqrt(n)) * scale if n > 1 else math.nan
    if not math.isfinite(value) or (n > 1 and not math.isfinite(se)):
        check_no_overflow(
            np.array([value, se]),
            f"{est.estimator_name}'s value and standard error",
            {"reward": logs.reward},
            row=None,
        )
    ess = min(
        kish_ess(float(w[:, k].sum()), float((w[:, k] ** 2).sum())) for k in range(w.shape[1])
    )  # loop over positions
    notes = [f"assumption: {_ASSUMPTIONS[est._kind]}"]
    flagged: list[tuple[str, type[Warning]]] = []
    advice = SLATE_INTERVAL_ADVICE  # not the bandit estimators' bounded intervals
    if low_ess(ess, n):
        flagged.append((ess_note(ess, n, advice=advice), OverlapWarning))
    if few_effective_rows(ess):
        flagged.append((few_effective_rows_note(ess, se, advice=advice), OverlapWarning))
    if small_sample(n):
        flagged.append((small_sample_note(n, advice=advice), SmallSampleWarning))
    if est._kind in _RATIO_WEIGHTS and n > 1:
        # each slot's weights are probability ratios (of slates, prefixes or items), whose
        # mean is 1 under full support: the bandit estimators' check, at the worst slot
        means, variances = w.mean(axis=0), w.var(axis=0, ddof=1)  # one pass per statistic
        checks = [
            mean_weight_check(n, float(m), float(v)) for m, v in zip(means, variances)
        ]  # loop over positions (a handful)
        k = max(range(len(checks)), key=lambda j: abs(checks[j][1]))
        if checks[k][0] != "ok":
            note = mean_weight_note(float(means[k]), checks[k][1], subject=policy)
            flagged.append((f"slot {k}: {note}", OverlapWarning))
    for text, cls in flagged:
        warnings.warn(text, cls, stacklevel=user_stacklevel())
        notes.append(text)
    if n > 1:
        skew = float(skewness(infl))
        # not after a note that already says the interval may undercover (the same advice)
        notes += skewed_notes(
            est.estimator_name, n, skew, src, policy, prior=notes, fallback=as_sentence(advice)
        )
    if weight_error is not None:
        bound = _error_bound(src, means, weight_error, logs.context)
        notes.append(
            f"the marginal probabilities are Monte-Carlo: their error moves the estimate by at "
            f"most {bound:.3g} (one standard deviation), added to the standard error "
            f"({se:.4g} from the rows alone) and so to the normal and t intervals; the bootstrap "
            "does not apply (it would miss it)"
        )
        se = math.hypot(se, bound)
        src.methods = ()
    return make_estimate(
        estimator=est.estimator_name,
        value=value,
        std_error=se,
        n=n,
        ess=ess,
        notes=tuple(notes),
        policy=policy,
        source=src,
    )


def logging_estimate(logs: Any) -> Estimate:
    """The logger's own expected slate reward: the mean over the logged slates of the reward
    summed over slots, row-backed (so :func:`ope.compare` pairs a candidate's slate estimate
    with it, slate by slate).

    Examples
    --------
    >>> logs = slate_logs({"slate_id": [0, 1], "item": [[0, 1], [1, 0]],
    ...                    "reward": [[1.0, 0.0], [1.0, 1.0]],
    ...                    "propensity": [[0.5, 0.5], [0.5, 0.5]]})
    >>> logging_estimate(logs).value
    1.5
    """
    logs = slate_logs(logs)
    return _estimate(_LoggedSlates(), logs, np.ones(logs.item.shape), "logging")


@dataclass(frozen=True)
class SlateIPS(SlateEstimator):
    r"""Standard slate IPS: whole-slate importance weights.

    :math:`\hat V=\frac1n\sum_i\frac{\pi(s_i\mid x_i)}{\pi_0(s_i\mid x_i)}\sum_k r_i(k)`.
    Unbiased under any click model (needs only support of the candidate's slates); its
    weights grow with the number of slates. Needs the slate probabilities.

    References
    ----------
    .. [1] A. Swaminathan et al., "Off-policy evaluation for slate recommendation", NeurIPS 2017.

    Examples
    --------
    >>> logs = slate_logs({"slate_id": [0, 1], "item": [[0, 1], [1, 0]],
    ...                    "reward": [[1.0, 0.0], [0.0, 1.0]], "slate_propensity": [0.5, 0.5]})
    >>> SlateIPS().estimate(logs, SlateProbabilities(slate=[1.0, 0.0])).value
    1.0
    """

    name = "sips"
    _kind = "sips"
    _shared = True

    def _weights(self, logs, target, logging):
        w = _need(target, "slate", "candidate", "slate IPS") / _need(
            logging, "slate", "logger", "slate IPS"
        )
        return np.repeat(w[:, None], logs.slate_size, axis=1)


@dataclass(frozen=True)
class IndependentIPS(SlateEstimator):
    r"""Independent (item-position) IPS: per-slot marginal weights.

    :math:`\hat V=\frac1n\sum_i\sum_{k\in K}\frac{\pi(a_{i,k}\text{ at }k\mid x_i)}
    {\pi_0(a_{i,k}\text{ at }k\mid x_i)}r_i(k)`. Unbiased when the expected reward at slot
    ``k`` depends only on the item there (item-position model); biased when clicks interact
    across slots (under a cascade it ignores that an attractive item above suppresses clicks
    below). Needs the marginal probabilities.

    Parameters
    ----------
    self_normalized : bool, default False
    positions : sequence of int, optional
        Slots ``K`` summed over (default all): ``positions=[k]`` is the per-position IPS of the
        reward at slot ``k``.

    References
    ----------
    .. [1] S. Li et al., "Offline evaluation of ranking policies with click models", KDD 2018.

    Examples
    --------
    >>> logs = slate_logs({"slate_id": [0, 1], "item": [[0, 1], [1, 0]],
    ...                    "reward": [[1.0, 0.0], [0.0, 1.0]],
    ...                    "propensity": [[0.5, 0.5], [0.5, 0.5]]})
    >>> IndependentIPS().estimate(logs, SlateProbabilities(marginal=[[1, 1], [0, 0]])).value
    1.0
    """

    positions: tuple[int, ...] | None = None

    name = "iips"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.positions is None:
            return
        given = self.positions
        if isinstance(given, numbers.Integral):
            given = (given,)
        if isinstance(given, (str, bytes)) or not hasattr(given, "__iter__"):
            raise ParameterError(
                f"`positions` must be a sequence of slot indices (ints >= 0) or None; got "
                f"{describe(self.positions)}. Pass e.g. positions=[0], or leave it out for all "
                "slots."
            )
        keep = tuple(check_positive_int(k, "positions", minimum=0) for k in given)
        if not keep:
            raise ParameterError(
                "`positions` is empty: independent IPS would sum the reward of no slot. Pass "
                "the slots to sum over, e.g. positions=[0], or leave it out (None) for all slots."
            )
        object.__setattr__(self, "positions", keep)

    _kind = "iips"
    _shared = False

    def _kept(self, logs: SlateLogs) -> np.ndarray:
        keep = np.ones(logs.slate_size, dtype=bool)
        if self.positions is not None:
            keep[:] = False
            for k in self.positions:
                kk = check_positive_int(k, "positions", minimum=0)
                if kk >= logs.slate_size:
                    raise ParameterError(
                        f"`positions` must be < the slate size {logs.slate_size}; got {k!r}."
                    )
                keep[kk] = True
        return keep

    def _weights(self, logs, target, logging):
        w, _ = _marginal_ratio(target, logging, "independent IPS")
        return w[:, self._kept(logs)]

    def _weight_error(self, logs, target, logging):
        _, err = _marginal_ratio(target, logging, "independent IPS")
        return None if err is None else err[:, self._kept(logs)]

    def estimate(
        self, logs: Any, target: Any, *, logging: Any = None, policy: str | None = None
    ) -> Estimate:
        logs = slate_logs(logs)
        if self.positions is None:
            return super().estimate(logs, target, logging=logging, policy=policy)
        keep = sorted({int(k) for k in self.positions})
        logs, tgt, log_p = _read_slates(logs, target, logging)
        w = self._weights(logs, tgt, log_p)
        sub = dataclasses.replace(logs, reward=logs.reward[:, keep])
        return _estimate(self, sub, w, policy, self._weight_error(logs, tgt, log_p))


@dataclass(frozen=True)
class CascadeIPS(SlateEstimator):
    r"""Reward-interaction (cascade) IPS: prefix weights.

    :math:`\hat V=\frac1n\sum_i\sum_k\frac{\pi(a_{i,0:k}\mid x_i)}{\pi_0(a_{i,0:k}\mid x_i)}
    r_i(k)`. Unbiased when the expected reward at slot ``k`` depends only on the items at
    slots ``0..k`` (cascade model; the additive model is a special case); its weights lie
    between independent IPS's and slate IPS's. Needs the prefix probabilities.

    References
    ----------
    .. [1] J. McInerney et al., "Counterfactual evaluation of slate recommendations with
       sequential reward interactions", KDD 2020.

    Examples
    --------
    >>> logs = slate_logs({"slate_id": [0], "item": [[0, 1]], "reward": [[0.0, 1.0]],
    ...                    "prefix_propensity": [[0.5, 0.25]]})
    >>> CascadeIPS().estimate(logs, SlateProbabilities(prefix=[[1.0, 0.5]])).value
    2.0
    """

    name = "rips"
    _kind = "rips"
    _shared = False

    def _weights(self, logs, target, logging):
        return _need(target, "prefix", "candidate", "cascade IPS") / _need(
            logging, "prefix", "logger", "cascade IPS"
        )


@dataclass(frozen=True)
class PseudoInverse(SlateEstimator):
    r"""The pseudoinverse estimator (PI) for additive slate rewards.

    :math:`\hat V=\frac1n\sum_i\Big(\sum_k r_i(k)\Big)\,q_{\pi,x_i}^\top
    \Gamma_{\pi_0,x_i}^{\dagger}\mathbb 1_{s_i}` with
    :math:`\Gamma_{\pi_0,x}=\mathbb E_{\pi_0}[\mathbb 1_s\mathbb 1_s^\top]` and
    :math:`q_{\pi,x}=\mathbb E_\pi[\mathbb 1_s]` over (slot, item) indicators. Unbiased when
    the expected slate reward is a sum of (item, slot) terms and :math:`q` lies in the range of
    :math:`\Gamma`; biased under cascade clicks.

    With ``logging`` and ``target`` given as :class:`SlatePolicy` (finite contexts), the weight
    is computed exactly from the enumerated :math:`\Gamma`. Otherwise ``product_logging=True``
    uses the closed form for a logger that fills slots independently (their Example 4):
    :math:`\sum_k \pi(a_k\text{ at }k)/\pi_0(a_k\text{ at }k) - L + 1`; it is biased for
    loggers that rank without replacement.

    Parameters
    ----------
    self_normalized : bool, default False
        The weighted PI of the paper (PI weights sum to n in expectation).
    product_logging : bool, default False
        Use the product-logging closed form from the marginals.

    References
    ----------
    .. [1] A. Swaminathan et al., "Off-policy evaluation for slate recommendation", NeurIPS 2017.

    Examples
    --------
    >>> logs = slate_logs({"slate_id": [0], "item": [[0, 1]], "reward": [[1.0, 0.0]],
    ...                    "propensity": [[0.5, 0.5]]})
    >>> PseudoInverse(product_logging=True).estimate(
    ...     logs, SlateProbabilities(marginal=[[1.0, 1.0]])).value
    3.0
    """

    product_logging: bool = False

    name = "pi"
    _kind = "pi"
    _shared = True

    def estimate(
        self, logs: Any, target: Any, *, logging: Any = None, policy: str | None = None
    ) -> Estimate:
        logs = slate_logs(logs)
        dw = None
        if not self.product_logging and (
            isinstance(target, SlatePolicy) and isinstance(logging, SlatePolicy)
        ):
            ctx = _logged_context(logs, logging)
            w = pseudoinverse_table(target, logging)[ctx, _slate_index(logging, logs)]
        elif self.product_logging:
            logs, tgt, log_p = _read_slates(logs, target, logging)
            ratio, err = _marginal_ratio(tgt, log_p, "PI")
            w = ratio.sum(axis=1) - logs.slate_size + 1
            if err is not None:
                dw = np.repeat(err.sum(axis=1)[:, None], logs.slate_size, axis=1)
        else:
            raise ParameterError(
                "PseudoInverse needs `target` and `logging` as SlatePolicy objects (exact "
                "Gamma), or product_logging=True when the logger fills slots independently."
            )
        w = np.repeat(np.asarray(w, dtype=np.float64)[:, None], logs.slate_size, axis=1)
        return _estimate(self, logs, w, policy, dw)


#: Cascade-DR's reward models by name: ``"table"`` (each slot's mean reward per context, slot and
#: item, shrunk toward the context-slot mean by one pseudo-row) and ``"zero"`` (cascade IPS).
CASCADE_MODELS: Final = ("table", "zero")


@dataclass(frozen=True)
class CascadeDR(SlateEstimator):
    r"""Cascade doubly robust (Kiyohara et al., WSDM 2022): cascade IPS with a slate reward model
    as control variate.

    :math:`\hat V=\frac1n\sum_i\sum_k\big[w_{0:k}\,(r_k-\hat q_k)+w_{0:k-1}\,\hat v_k\big]`,
    with :math:`w_{0:k}` the prefix weights of :class:`CascadeIPS` (:math:`w_{0:-1}=1`),
    :math:`\hat q_k=\hat Q_k(x,a_{0:k})` the model at the logged prefix and
    :math:`\hat v_k=\mathbb E_{a\sim\pi(\cdot\mid x,a_{0:k-1})}\hat Q_k(x,a_{0:k-1},a)` its
    expectation over the candidate's next item. Unbiased under the cascade model (the reward at
    slot ``k`` depends on the items at slots ``0..k``) whatever the model, as cascade IPS is; the
    better the model, the smaller the variance. With a zero model it is cascade IPS.

    Models (``model``): ``"table"`` (default) predicts each slot's reward by its mean per
    (context, slot, item) on the logs, shrunk toward the (context, slot) mean by one pseudo-row
    (fitted on the same rows: a bias of order 1/n); ``"zero"``; or, per call,
    ``estimate(..., model=(q_logged, q_expected))`` with your model's two ``(n, L)`` arrays
    (e.g. a Q-function of the items shown so far: the variance-optimal choice is
    :math:`Q_k = \mathbb E[\sum_{l\ge k} r_l \mid x, a_{0:k}]` under the candidate). The
    built-in model needs the candidate's next-item distribution: a :class:`SlatePolicy`
    (:class:`PlackettLuce` at any size by its closed form, others by enumeration).

    References
    ----------
    .. [1] H. Kiyohara et al., "Doubly robust off-policy evaluation for ranking policies under
       the cascade behavior model", WSDM 2022.

    Examples
    --------
    >>> logs = slate_logs({"slate_id": [0], "item": [[0, 1]], "reward": [[0.0, 1.0]],
    ...                    "prefix_propensity": [[0.5, 0.25]]})
    >>> target = SlateProbabilities(prefix=[[1.0, 0.5]])
    >>> CascadeDR(model="zero").estimate(logs, target).value  # cascade IPS
    2.0
    >>> round(CascadeDR().estimate(logs, target, model=([[0.2, 0.6]], [[0.3, 0.5]])).value, 12)
    1.7
    """

    model: str = "table"

    name = "cdr"
    _kind = "cdr"
    _shared = False
    contract_variants = ({"model": "table"}, {"model": "zero"})

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice(self.model, "model", CASCADE_MODELS)
        if self.self_normalized:
            raise ParameterError(
                "`self_normalized`: Cascade-DR has no self-normalized form here; its model "
                "already controls the variance (use CascadeIPS(self_normalized=True) for the "
                "weighted cascade estimator)."
            )

    def _weights(self, logs, target, logging):
        return _need(target, "prefix", "candidate", "Cascade-DR") / _need(
            logging, "prefix", "logger", "Cascade-DR"
        )

    def estimate(
        self,
        logs: Any,
        target: Any,
        *,
        logging: Any = None,
        policy: str | None = None,
        model: Any = None,
    ) -> Estimate:
        """Estimate the candidate's expected slate reward (see the class); ``model`` is
        ``(q_logged, q_expected)``, two ``(n, L)`` arrays of your reward model, or None for
        this estimator's ``model``."""
        logs, tgt, log_p = _read_slates(logs, target, logging)
        w = self._weights(logs, tgt, log_p)
        q, v = self._model_terms(logs, target, model)
        # sum_k [w_k (r_k - q_k) + w_{k-1} v_k] = v_0 + sum_k w_k (r_k - q_k + v_{k+1})
        following = np.column_stack([v[:, 1:], np.zeros(logs.n)])
        shifted = np.column_stack([logs.reward - q + following, v[:, 0]])
        extended = dataclasses.replace(logs, reward=shifted)
        weights = np.column_stack([w, np.ones(logs.n)])
        return _estimate(self, extended, weights, policy, row_reward=logs.reward.sum(axis=1))

    def _model_terms(self, logs: SlateLogs, target: Any, model: Any) -> tuple[np.ndarray, ...]:
        shape = (logs.n, logs.slate_size)
        if model is not None:
            if not isinstance(model, (tuple, list)) or len(model) != 2:
                raise ParameterError(
                    "`model` must be (q_logged, q_expected): two (n, L) arrays of the model's "
                    f"reward at the logged prefix and its expectation over the candidate's next "
                    f"item; got {describe(model)}."
                )
            out = []
            for value, label in zip(model, ("q_logged", "q_expected"), strict=True):
                arr = as_float_array(value, f"`model` {label}", ndim=(2,))
                if arr.shape != shape:
                    raise ParameterError(
                        f"`model` {label} has shape {arr.shape}; the logs need {shape}."
                    )
                check_finite(arr, f"`model` {label}")
                out.append(arr)
            return out[0], out[1]
        if self.model == "zero":
            return np.zeros(shape), np.zeros(shape)
        if not isinstance(target, SlatePolicy):
            raise PolicyError(
                "Cascade-DR's table model needs the candidate's next-item distribution: give "
                "the candidate as a SlatePolicy (PlackettLuce, EnumeratedSlatePolicy), or your "
                "model's arrays: estimate(..., model=(q_logged, q_expected))."
            )
        context = logs.context if logs.context is not None else np.zeros(logs.n, dtype=np.int64)
        table = _slot_table(logs, context, target.n_contexts, target.n_items)
        slots = np.arange(logs.slate_size)
        q = table[context[:, None], slots, logs.item]
        return q, _next_item_means(target, context, logs.item, table)


def _slot_table(logs: SlateLogs, context: np.ndarray, n_contexts: int, n_items: int) -> np.ndarray:
    """``(C, L, m)``: each slot's mean reward per (context, slot, item), shrunk toward the
    (context, slot) mean by one pseudo-row (0 rows: that mean)."""
    L = logs.slate_size
    cell = (context[:, None] * L + np.arange(L)) * n_items + logs.item
    size = n_contexts * L * n_items
    total = np.bincount(cell.ravel(), weights=logs.reward.ravel(), minlength=size)
    count = np.bincount(cell.ravel(), minlength=size).astype(np.float64)
    by_slot = (context[:, None] * L + np.arange(L)).ravel()
    slot_total = np.bincount(by_slot, weights=logs.reward.ravel(), minlength=n_contexts * L)
    slot_count = np.bincount(by_slot, minlength=n_contexts * L).astype(np.float64)
    prior = np.divide(slot_total, slot_count, out=np.zeros_like(slot_total), where=slot_count > 0)
    prior = np.repeat(prior, n_items)
    return ((total + prior) / (count + 1.0)).reshape(n_contexts, L, n_items)


def _next_item_means(
    policy: SlatePolicy, context: np.ndarray, item: np.ndarray, table: np.ndarray
) -> np.ndarray:
    """``(n, L)``: ``sum_a pi(a | context, item[:, :k]) table[context, k, a]`` for each slot
    ``k`` (0 where the logged prefix has probability 0 under ``policy``)."""
    n, L = item.shape
    out = np.zeros((n, L))
    if isinstance(policy, PlackettLuce):
        e = np.exp(policy._logits)  # (C, m), largest 1
        total = e.sum(axis=1)
        weighted = np.einsum("cm,ckm->ck", e, table)  # (C, L)
        shown = e[context[:, None], item]  # (n, L)
        for k in range(L):  # a loop over slots
            before = shown[:, :k].sum(axis=1)
            own = (shown[:, :k] * table[context[:, None], k, item[:, :k]]).sum(axis=1)
            rest = total[context] - before
            out[:, k] = (weighted[context, k] - own) / np.where(rest > 0, rest, 1.0)
            lost = ~(rest > total[context] * _PREFIX_CANCELLATION)
            if lost.any():  # the shown items hold nearly all the mass: sum the rest directly
                rows = np.flatnonzero(lost)
                free = np.ones((rows.size, e.shape[1]), dtype=bool)
                np.put_along_axis(free, item[rows, :k], False, axis=1)
                # in log space, relative to the best item not yet shown (its weight may have
                # underflowed beside a dominant shown one)
                logit = np.where(free, policy._logits[context[rows]], -np.inf)
                top = logit.max(axis=1, keepdims=True)
                with np.errstate(invalid="ignore"):
                    mass = np.where(free, np.exp(logit - np.where(np.isfinite(top), top, 0.0)), 0.0)
                denom = mass.sum(axis=1)
                value = (mass * table[context[rows], k]).sum(axis=1)
                out[rows, k] = np.divide(value, denom, out=np.zeros(rows.size), where=denom > 0)
        return out
    slates, prob = policy.distribution()
    for k in range(L):  # a loop over slots: the slates grouped by their first k items
        codes = _codes(slates[:, :k], policy.n_items) if k else np.zeros(slates.shape[0], int)
        uniq, inv = np.unique(codes, return_inverse=True)
        num = np.zeros((prob.shape[0], uniq.size))
        den = np.zeros((prob.shape[0], uniq.size))
        np.add.at(num, (slice(None), inv), prob * table[:, k, slates[:, k]])  # type: ignore[arg-type]
        np.add.at(den, (slice(None), inv), prob)  # type: ignore[arg-type]
        logged = _codes(item[:, :k], policy.n_items) if k else np.zeros(n, int)
        j = np.clip(np.searchsorted(uniq, logged), 0, uniq.size - 1)
        found = uniq[j] == logged
        d = den[context, j]
        out[:, k] = np.where(found & (d > 0), num[context, j] / np.where(d > 0, d, 1.0), 0.0)
    return out


@dataclass(frozen=True)
class _LoggedSlates(SlateIPS):
    """The logger's own slates with unit weights (:func:`logging_estimate`)."""

    name = "logging"
    _kind = "logging"


#: The slate estimators by name (``SlateEstimator.name``; ``self_normalized=True`` gives each
#: one's self-normalized version). :func:`ope.testing.check_slate_estimator` and the test suite
#: run the slate estimator contract over every class listed here.
SLATE_ESTIMATORS: Final[dict[str, type[SlateEstimator]]] = {
    cls.name: cls for cls in (SlateIPS, IndependentIPS, CascadeIPS, PseudoInverse, CascadeDR)
}


def _slate_index(policy: SlatePolicy, logs: SlateLogs) -> np.ndarray:
    slates, _ = policy.distribution()
    codes = _codes(slates, policy.n_items)
    order = np.argsort(codes)
    logged = _codes(logs.item, policy.n_items)
    j = np.clip(np.searchsorted(codes[order], logged), 0, codes.size - 1)
    bad = codes[order][j] != logged
    if bad.any():
        count, first = first_rows(bad)
        raise PolicyError(
            f"{count} logged slates are outside the logger's support (first at slate {first})."
        )
    return order[j]


def pseudoinverse_table(target: SlatePolicy, logging: SlatePolicy) -> np.ndarray:
    """PI weights ``q^T Gamma^+ 1_s`` for every (context, logging slate), shape (C, S)."""
    slates, p0 = logging.distribution()
    m, L = logging.n_items, logging.slate_size
    ind = np.zeros((slates.shape[0], L * m))
    ind[np.arange(slates.shape[0])[:, None], np.arange(L) * m + slates] = 1.0
    gamma = np.einsum("cs,si,sj->cij", p0, ind, ind)
    q = target.marginals().reshape(target.marginals().shape[0], L * m)
    if q.shape[0] != p0.shape[0]:
        raise PolicyError("target and logging policies must have the same contexts.")
    coef = np.einsum("ci,cij->cj", q, np.linalg.pinv(gamma, hermitian=True))
    return coef @ ind.T


def position_estimates(
    logs: Any, target: Any, *, logging: Any = None, self_normalized: bool = False
) -> dict[int, Estimate]:
    """Per-position (item-position) IPS of the expected reward at each slot.

    Examples
    --------
    >>> logs = slate_logs({"slate_id": [0, 1], "item": [[0, 1], [1, 0]],
    ...                    "reward": [[1.0, 0.0], [0.0, 1.0]],
    ...                    "propensity": [[0.5, 0.5], [0.5, 0.5]]})
    >>> est = position_estimates(logs, SlateProbabilities(marginal=[[1, 1], [0, 0]]))
    >>> [e.value for e in est.values()]
    [1.0, 0.0]
    """
    logs = slate_logs(logs)
    return {
        k: IndependentIPS(self_normalized=self_normalized, positions=(k,)).estimate(
            logs, target, logging=logging
        )
        for k in range(logs.slate_size)
    }


# ============================================================================================
# diagnostics
# ============================================================================================
def position_diagnostics(logs: Any, target: Any, *, logging: Any = None) -> pd.DataFrame:
    """ESS, weights, support and gaps by slot, from :func:`ope.diagnostics.diagnose_arrays`.

    One row per position with the overlap diagnostics of the per-slot marginal weights
    (``ess``, ``ess_ratio``, ``mean_weight``, ``propensity_check``, ``weight_max``, ``gaps``),
    plus ``unsupported_mass``: the candidate's marginal mass at that slot on items the logger
    never places there (needs both as :class:`SlatePolicy`, else NaN), and
    ``prefix_ess``: Kish ESS of the cascade (prefix) weights when available.

    Examples
    --------
    >>> logs = slate_logs({"slate_id": [0, 1], "item": [[0, 1], [1, 0]],
    ...                    "reward": [[1.0, 0.0], [0.0, 1.0]],
    ...                    "propensity": [[0.5, 0.5], [0.5, 0.5]]})
    >>> d = position_diagnostics(logs, SlateProbabilities(marginal=[[1, 1], [0, 0]]))
    >>> d[["position", "ess", "mean_weight"]].to_dict("list")
    {'position': [0, 1], 'ess': [1.0, 1.0], 'mean_weight': [1.0, 1.0]}
    """
    from ope.diagnostics import diagnose_arrays

    logs = slate_logs(logs)
    logs, tgt, log_p = _read_slates(logs, target, logging)
    t = _need(tgt, "marginal", "candidate", "position_diagnostics")
    p = _need(log_p, "marginal", "logger", "position_diagnostics")
    unsupported = np.full(logs.slate_size, np.nan)
    if isinstance(target, SlatePolicy) and isinstance(logging, SlatePolicy):
        ctx_w = np.bincount(logs.context, minlength=target.marginals().shape[0]) / logs.n
        gap = (logging.marginals() <= 0) * target.marginals()  # (C, L, m)
        unsupported = np.einsum("c,ckm->k", ctx_w, gap)
    records = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the per-position notes go into the table
        for k in range(logs.slate_size):  # loop over positions, not rows
            d = diagnose_arrays(logs.reward[:, k], p[:, k], t[:, k], policy_names=[f"slot_{k}"])
            row = d.table().iloc[0]
            records.append(
                {
                    "position": k,
                    "ess": float(row["ess"]),
                    "ess_ratio": float(row["ess_ratio"]),
                    "mean_weight": float(row["mean_weight"]),
                    "propensity_check": row["propensity_check"],
                    "weight_max": float(row["weight_max"]),
                    "gaps": int(row["gaps"]),
                    "unsupported_mass": float(unsupported[k]),
                }
            )
    out = pd.DataFrame.from_records(records)
    if tgt.prefix is not None and log_p.prefix is not None:
        wp = tgt.prefix / log_p.prefix
        out["prefix_ess"] = (wp.sum(axis=0) ** 2) / np.maximum((wp**2).sum(axis=0), 1e-300)
    return out
