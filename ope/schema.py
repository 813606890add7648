"""Log schemas: required columns, canonical types, safe casts and the row rules.

Three kinds of logs are described here (docs/guide/logs.md): bandit / recommendation events
(``BANDIT``), multi-step trajectories (``TRAJECTORY``) and paired replays (``PAIRED``). Each is a
:class:`LogSchema`: the columns ope knows, whether each is required, and the *kind* of values it
holds. Reading a source goes through two steps:

1. :func:`plan_columns` looks only at the source's Arrow schema. It applies the user's
   ``mapping={"our_name": "their_name"}``, checks that every required column is present and that
   every known column has a type that can be cast to its canonical type without loss, and raises
   one :class:`~ope.exceptions.SchemaError` listing *every* problem at once.
2. :func:`conform` renames and casts the data (a no-op for columns already in canonical types)
   and checks the casts that depend on values (a float ``action`` column must hold whole numbers).

Row rules then mark each row that breaks one (:func:`check_bandit_rows`,
:func:`check_trajectory_rows`, :func:`check_paired_rows`). Every rule has a name from the fixed
vocabulary :data:`REJECTION_REASONS`; all rules are vectorized (numpy / ``pyarrow.compute``, list
columns through their flattened values and parent indices, never a Python loop over rows).

Canonical types
---------------
``action``, ``event_id``, ``episode_id``, ``pair_id``, ``arm``
    int64 or string (any integer type is widened to int64; ``large_string``, ``string_view``
    and dictionary encodings become string; a float or decimal column is accepted only if every
    value is a whole number, and unsigned ids only up to 2**63 - 1).
``propensity``, ``reward``, ``outcome``, ``target__<name>``
    float64 (float16/float32, integers up to 2**53, bools and decimals are widened; strings are
    a ``SchemaError``).
``step``, ``replicate``
    int64. ``done``: bool (integers holding only 0 and 1 are accepted).
``candidates``
    list<int64> or list<string>, matching ``action``.
``logging_distribution``, ``target_dist__<name>``
    list<float64> aligned with ``candidates`` (``fixed_size_list`` and ``large_list`` are accepted).

All other columns (context features, segments, extra outcomes such as ``cost``) are kept
unchanged.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ope._dedup import BITMAP_FACTOR, BITMAP_MIN_BYTES
from ope._validation import (
    MAX_FINITE_WEIGHT,
    MIN_PROPENSITY,
    check_mapping,
    first_rows,
    repeated_names,
)
from ope.exceptions import ParameterError, SchemaError

__all__ = [
    "ColumnSpec",
    "LogSchema",
    "BANDIT",
    "TRAJECTORY",
    "PAIRED",
    "REJECTION_REASONS",
    "DISTRIBUTION_SUM_ATOL",
    "PROPENSITY_MATCH_RTOL",
    "ColumnPlan",
    "RowMasks",
    "plan_columns",
    "check_segment_columns",
    "conform",
    "check_bandit_rows",
    "distribution_faults",
    "propensity_disagrees",
    "check_trajectory_rows",
    "check_paired_rows",
    "first_occurrence_duplicates",
    "episode_bounds",
    "IMPORT_REASON_PREFIXES",
    "column_problem",
    "id_type_of",
    "storage_roundoff",
    "TARGET_PREFIX",
]

#: Allowed |Σ logging_distribution − 1| per row. A distribution stored as float32 carries a
#: relative rounding error of 2**-24 ≈ 6e-8 per entry; a logger that normalises in float32 over
#: up to ~1,000 candidates can accumulate ≈ 1000 · 6e-8 = 6e-5. Anything further off is a logger
#: bug, not rounding.
DISTRIBUTION_SUM_ATOL: Final[float] = 1e-4

#: Allowed relative disagreement between ``propensity`` and ``logging_distribution`` at the
#: logged action, |p − d| <= rtol · max(p, d). Float32 storage of either side explains at most
#: ~1e-7; loggers that round to 5 significant digits explain ~1e-5. A larger gap changes the
#: importance weight and means the two columns come from different policies.
PROPENSITY_MATCH_RTOL: Final[float] = 1e-4

#: A mapping key that is not one of ope's column names but this similar to one (difflib ratio)
#: is taken for a misspelling ("propensty") rather than a deliberate rename of a pass-through
#: column: a misspelt key would otherwise leave the intended column unmapped without a word.
#: 0.8 catches one dropped, added or swapped letter in names of 6+ letters and never matches
#: distinct ope names against each other.
MAPPING_TYPO_CUTOFF: Final[float] = 0.8

#: the prefixes of per-policy columns
TARGET_PREFIX: Final[str] = "target__"
TARGET_DIST_PREFIX: Final[str] = "target_dist__"

#: The fixed vocabulary of rejection reasons, name -> what the rule requires.
REJECTION_REASONS: Final[Mapping[str, str]] = {
    # bandit events
    "action_missing": "action must not be null",
    "propensity_missing": "propensity must not be null or NaN",
    "propensity_out_of_range": (
        f"propensity must be in (0, 1] and at least {MIN_PROPENSITY:g} (a smaller one gives "
        "importance weights whose squares overflow float64)"
    ),
    "reward_missing": "reward must not be null or NaN",
    "reward_not_finite": "reward must be finite (not +inf or -inf)",
    "event_id_missing": "event_id must not be null",
    "event_id_duplicate": "event_id must be unique (every occurrence after the first is rejected)",
    "target_probability_out_of_range": "every target__<name> value must be in [0, 1] and not NaN/null",
    "candidates_missing": "candidates must be a list without null entries",
    "candidates_duplicate": "candidates must not list the same action twice in one row",
    "action_not_in_candidates": "the logged action must be one of the row's candidates",
    "candidates_length_mismatch": "logging_distribution must have one entry per candidate",
    "logging_distribution_out_of_range": "logging_distribution entries must be in [0, 1], not null/NaN",
    "logging_distribution_not_normalized": (
        f"logging_distribution must sum to 1 (within {DISTRIBUTION_SUM_ATOL:g})"
    ),
    "logged_propensity_mismatch": (
        "propensity must equal logging_distribution at the logged action "
        f"(relative tolerance {PROPENSITY_MATCH_RTOL:g}, widened for float16 storage)"
    ),
    "target_distribution_length_mismatch": "target_dist__<name> must have one entry per candidate",
    "target_distribution_out_of_range": "target_dist__<name> entries must be in [0, 1], not null/NaN",
    "weight_missing": "weight (the sampling weight) must not be null or NaN",
    "weight_out_of_range": (
        f"weight (the sampling weight, 1 / P(row kept)) must be > 0 and at most "
        f"{MAX_FINITE_WEIGHT:g} (a larger one has a square beyond float64; a row of weight 0 "
        "was not kept)"
    ),
    # trajectories
    "episode_id_missing": "episode_id must not be null",
    "step_missing": "step must not be null",
    "step_not_contiguous": "steps of an episode must be 0, 1, 2, ... without gaps or repeats",
    "done_missing": "done must not be null",
    "done_not_last_step": "done may be true only at the last step of an episode",
    "episode_invalidated": "the row is valid but another row of its episode is not",
    # paired replays
    "pair_id_missing": "pair_id must not be null",
    "arm_missing": "arm must not be null",
    "replicate_missing": "replicate must not be null",
    "outcome_missing": "outcome must not be null or NaN",
    "outcome_not_finite": "outcome must be finite (not +inf or -inf)",
    "pair_duplicate": "(pair_id, arm, replicate) must be unique (repeats after the first are rejected)",
    "pair_missing_arm": "every pair must have a valid row for every arm present in the data",
    # importers (ope.importers): rules of the source format, numbered by source line or row
    "dsjson_bad_json": "every DSJSON line must be one JSON object (valid UTF-8, not truncated)",
    "dsjson_field_type": (
        "DSJSON fields need their JSON types (EventId/Timestamp strings, pdrop and _label_* "
        "numbers, _skipLearn true/false, a/_labelIndex whole numbers), and a _label_* key a "
        "label property VW knows (Cost, Probability, Action, in any case): VW refuses the line"
    ),
    "dsjson_line_too_long": "a DSJSON line must fit max_line_bytes (default 32 MiB)",
    "dsjson_not_object": "the line does not start with '{': VW skips it (excluded, counted)",
    "dsjson_kind_mismatch": (
        "every line must be of the file's kind, set by its first event: CB, or CCB (where a "
        "CB line reads as a one-slot CCB event)"
    ),
    "dsjson_no_actions": "no action ids `a`: VW's DSJSON reader skips the event (excluded)",
    "dsjson_unlabeled": (
        "no _label_cost/_label_probability (CB) or no _a/_p in the slot's outcome (CCB): a "
        "prediction-only event or slot, nothing to evaluate (excluded, counted)"
    ),
    "dsjson_label_index_missing": (
        "a labeled CB line needs _labelIndex: VW attaches the label to action _labelIndex "
        "(without it, to the shared example: on no action)"
    ),
    "dsjson_label_index_out_of_range": "_labelIndex must be below len(c._multi)",
    "dsjson_cost_not_numeric": (
        '_label_cost/_label_probability must be numbers or "NaN" (reward = -_label_cost)'
    ),
    "dsjson_a_p_mismatch": (
        "in a file with logging_distribution (its first row has one), `a` and `p` must have one "
        "length, ids in 1..len(c._multi), each once, and `p` must be a distribution: entries "
        "in [0, 1] summing to 1, its entry for the logged action equal to _label_probability"
    ),
    "dsjson_pdrop_out_of_range": "pdrop must be a number in [0, 1) (pdrop == 1 has no weight)",
    "dsjson_skip_learn": "_skipLearn is true: the event is not learnable and is excluded (counted)",
    "dsjson_outcome_malformed": (
        "CCB _outcomes need _a and _p of one length with action indices in 0..len(c._multi)-1, "
        "at most one outcome per c._slots entry (a CB line in a CCB file: _label_Action in "
        "1..len(c._multi))"
    ),
    "cats_pdf_value_invalid": (
        "_label_ca.pdf_value must be finite and > 0 (the logger's density at its action)"
    ),
    "cats_pdf_malformed": "every pdf segment needs finite left <= right and pdf_value >= 0",
    "cats_pdf_mismatch": (
        "_label_ca.pdf_value must be the density of the line's pdf segments at the action (to "
        "1e-5, a float32's precision)"
    ),
    "obd_position_missing": "position must be a whole number (it is missing, text or fractional)",
    "obd_position_out_of_range": "position must be 1, 2 or 3 (OBD's left, centre and right slots)",
    "obd_item_unknown": "item_id must have a row in the campaign's item_context.csv",
    "obd_timestamp_invalid": (
        "timestamp must be a date and time (ISO 8601, as OBD writes it, e.g. 2019-11-24 "
        "00:00:17.967000+00:00); it is missing or not one"
    ),
}

#: Prefixes of the importers' reasons in :data:`REJECTION_REASONS`.
IMPORT_REASON_PREFIXES: Final = ("dsjson_", "cats_", "obd_")

# value kinds of known columns
_ID: Final = "int64 or string"
_FLOAT: Final = "float64"
_INT: Final = "int64"
_BOOL: Final = "bool"
_LIST_ACTION: Final = "list<action type>"
_LIST_FLOAT: Final = "list<float64>"


@dataclass(frozen=True)
class ColumnSpec:
    """A column ope knows: its canonical name, kind of values, and whether it is required."""

    name: str
    kind: str
    required: bool
    description: str


@dataclass(frozen=True)
class LogSchema:
    """The columns of one kind of log (docs/guide/logs.md).

    Attributes
    ----------
    name : str
        ``"bandit"``, ``"trajectory"`` or ``"paired"``.
    columns : tuple of ColumnSpec
        Known columns. Columns matching ``prefixed`` (``target__<name>``) are known too; all
        other columns are passed through unchanged.
    prefixed : tuple of (prefix, kind)
        Families of per-policy columns.
    reasons : tuple of str
        The rejection reasons the row rules of this kind of log can report.

    Examples
    --------
    >>> from ope.schema import BANDIT
    >>> BANDIT.required
    ('action', 'propensity', 'reward')
    >>> BANDIT.arrow_schema().field("propensity").type
    DataType(double)
    """

    name: str
    columns: tuple[ColumnSpec, ...]
    prefixed: tuple[tuple[str, str], ...]
    reasons: tuple[str, ...]

    @property
    def required(self) -> tuple[str, ...]:
        """Names of the required columns."""
        return tuple(c.name for c in self.columns if c.required)

    def kind_of(self, name: str) -> str | None:
        """The kind of a known column, or None for a pass-through column."""
        for c in self.columns:
            if c.name == name:
                return c.kind
        for prefix, kind in self.prefixed:
            if name.startswith(prefix) and len(name) > len(prefix):
                return kind
        return None

    def arrow_schema(self, *, id_type: pa.DataType = pa.int64()) -> pa.Schema:
        """The canonical Arrow schema of the known (non-prefixed) columns.

        ``id_type`` (``pa.int64()`` or ``pa.string()``) is used for the id-like columns
        (``action``, ``event_id``, ...); ``candidates`` follows it.
        """
        if id_type not in (pa.int64(), pa.string()):
            raise ParameterError(f"id_type must be pa.int64() or pa.string(), got {id_type}")
        types = {
            _ID: id_type,
            _FLOAT: pa.float64(),
            _INT: pa.int64(),
            _BOOL: pa.bool_(),
            _LIST_ACTION: pa.list_(id_type),
            _LIST_FLOAT: pa.list_(pa.float64()),
        }
        return pa.schema(
            [pa.field(c.name, types[c.kind], nullable=not c.required) for c in self.columns]
        )


BANDIT: Final[LogSchema] = LogSchema(
    name="bandit",
    columns=(
        ColumnSpec("action", _ID, True, "the logged action (item id)"),
        ColumnSpec(
            "propensity", _FLOAT, True, "logging probability of the logged action, in (0, 1]"
        ),
        ColumnSpec("reward", _FLOAT, True, "observed outcome (reward, not cost)"),
        ColumnSpec("event_id", _ID, False, "unique per row; joins policy tables"),
        ColumnSpec("candidates", _LIST_ACTION, False, "the candidate set the logger chose from"),
        ColumnSpec("logging_distribution", _LIST_FLOAT, False, "logging policy over candidates"),
        ColumnSpec(
            "weight",
            _FLOAT,
            False,
            "sampling weight 1 / P(row kept), e.g. "
            "1 / (1 - pdrop): estimates are Horvitz-Thompson weighted by it",
        ),
    ),
    prefixed=((TARGET_PREFIX, _FLOAT), (TARGET_DIST_PREFIX, _LIST_FLOAT)),
    reasons=tuple(list(REJECTION_REASONS)[:19]),
)

TRAJECTORY: Final[LogSchema] = LogSchema(
    name="trajectory",
    columns=(
        ColumnSpec("episode_id", _ID, True, "the episode a step belongs to"),
        ColumnSpec("step", _INT, True, "0-based, contiguous step number within the episode"),
        ColumnSpec("action", _ID, True, "the logged action"),
        ColumnSpec("propensity", _FLOAT, True, "logging probability of the action, in (0, 1]"),
        ColumnSpec("reward", _FLOAT, True, "reward of the step"),
        ColumnSpec("done", _BOOL, True, "true only where the episode really terminated"),
    ),
    prefixed=((TARGET_PREFIX, _FLOAT),),
    reasons=(
        "episode_id_missing",
        "step_missing",
        "step_not_contiguous",
        "done_missing",
        "done_not_last_step",
        "action_missing",
        "propensity_missing",
        "propensity_out_of_range",
        "reward_missing",
        "reward_not_finite",
        "target_probability_out_of_range",
        "episode_invalidated",
    ),
)

PAIRED: Final[LogSchema] = LogSchema(
    name="paired",
    columns=(
        ColumnSpec("pair_id", _ID, True, "the shared prefix of the branches"),
        ColumnSpec("arm", _ID, True, "the branch, e.g. with_memory / no_memory"),
        ColumnSpec("outcome", _FLOAT, True, "the outcome of the branch"),
        ColumnSpec("replicate", _INT, False, "replicate (seed) number"),
    ),
    prefixed=(),
    reasons=(
        "pair_id_missing",
        "arm_missing",
        "replicate_missing",
        "outcome_missing",
        "outcome_not_finite",
        "pair_duplicate",
        "pair_missing_arm",
    ),
)


# --------------------------------------------------------------------------------------------
# schema-level planning
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ColumnPlan:
    """How to read a source: which of its columns, renamed how, cast to what.

    Attributes
    ----------
    source_columns : tuple of str
        Columns to read, by their names in the source (a parquet projection).
    renames : dict
        Source name -> canonical name, for every column in ``source_columns``.
    kinds : dict
        Canonical name -> kind, for the known columns (pass-through columns are absent).
    id_types : dict
        Canonical name -> ``pa.int64()`` or ``pa.string()`` for id-like columns.
    unit_roundoff : dict
        Canonical name -> relative rounding error of the source's storage type, for
        probability columns stored in less than float64 (float16: 2**-11, float32: 2**-24).
        Checks that compare two stored probabilities widen their tolerance by it.
    """

    source_columns: tuple[str, ...]
    renames: dict[str, str]
    kinds: dict[str, str]
    id_types: dict[str, pa.DataType]
    unit_roundoff: dict[str, float] = field(default_factory=dict)

    @property
    def output_columns(self) -> list[str]:
        return [self.renames[c] for c in self.source_columns]


def _base(t: pa.DataType) -> pa.DataType:
    """The value type behind a dictionary encoding."""
    return t.value_type if pa.types.is_dictionary(t) else t


def _is_string(t: pa.DataType) -> bool:
    return (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or (hasattr(pa.types, "is_string_view") and pa.types.is_string_view(t))
    )


def _is_list(t: pa.DataType) -> bool:
    return (
        pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or pa.types.is_fixed_size_list(t)
        or (hasattr(pa.types, "is_list_view") and pa.types.is_list_view(t))
        or (hasattr(pa.types, "is_large_list_view") and pa.types.is_large_list_view(t))
    )


def _is_list_view(t: pa.DataType) -> bool:
    return (hasattr(pa.types, "is_list_view") and pa.types.is_list_view(t)) or (
        hasattr(pa.types, "is_large_list_view") and pa.types.is_large_list_view(t)
    )


def id_type_of(t: pa.DataType) -> pa.DataType | None:
    """Canonical type for an id-like column of type ``t``, or None if not castable."""
    t = _base(t)
    if (
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_decimal(t)
        or pa.types.is_null(t)
    ):
        return pa.int64()
    if _is_string(t):
        return pa.string()
    return None


def _scalar_problem(t: pa.DataType, kind: str) -> str | None:
    """Why a column of type ``t`` cannot hold ``kind`` (None when it can)."""
    b = _base(t)
    if pa.types.is_null(b):
        return None
    if kind == _FLOAT:
        if (
            pa.types.is_floating(b)
            or pa.types.is_integer(b)
            or pa.types.is_boolean(b)
            or pa.types.is_decimal(b)
        ):
            return None
        hint = " (parse it to numbers first, e.g. pandas.to_numeric)" if _is_string(b) else ""
        return f"has type {t}; expected numbers (float64){hint}"
    if kind == _INT:
        if pa.types.is_integer(b) or pa.types.is_floating(b) or pa.types.is_decimal(b):
            return None
        return f"has type {t}; expected whole numbers (int64)"
    if kind == _BOOL:
        if pa.types.is_boolean(b) or pa.types.is_integer(b):
            return None
        return f"has type {t}; expected bool (or integers 0/1)"
    if kind == _ID:
        if id_type_of(t) is not None:
            return None
        return f"has type {t}; expected integers or strings"
    raise AssertionError(kind)


def column_problem(t: pa.DataType, kind: str, action_type: pa.DataType | None) -> str | None:
    if kind in (_LIST_ACTION, _LIST_FLOAT):
        if pa.types.is_null(t):
            return None
        if not _is_list(t):
            hint = (
                "; it holds text: parse each row into a list of numbers first (e.g. "
                "df[col].map(json.loads) for '[0.5, 0.5]')"
                if _is_string(_base(t))
                else ""
            )
            return f"has type {t}; expected a list column ({kind}){hint}"
        value_type = t.value_type
        if kind == _LIST_FLOAT:
            p = _scalar_problem(value_type, _FLOAT)
            return None if p is None else f"has type {t}; expected list<float64>"
        p = _scalar_problem(value_type, _ID)
        if p is not None:
            return f"has type {t}; expected a list of integers or strings"
        if action_type is not None and id_type_of(value_type) != action_type:
            return (
                f"has type {t} but action is {action_type}; candidates must hold the same "
                "kind of ids as action"
            )
        return None
    return _scalar_problem(t, kind)


#: Bandit-log columns read whenever the source has them, even when ``columns=`` does not name
#: them: they change every estimate (the sampling weights, used by default when present; a
#: ``columns=`` that left them out made the estimates unweighted without a word).
_READ_WHEN_PRESENT: Final = ("weight",)


def plan_columns(
    schema: pa.Schema,
    log_schema: LogSchema,
    *,
    mapping: Mapping[str, str] | None = None,
    columns: Sequence[str] | None = None,
    source: str = "<data>",
    missing_hints: Mapping[str, str] | None = None,
) -> ColumnPlan:
    """Resolve names and types of a source against a log schema, listing every problem at once.

    Parameters
    ----------
    schema : pyarrow.Schema
        The source's schema, with the user's column names.
    log_schema : LogSchema
        ``BANDIT``, ``TRAJECTORY`` or ``PAIRED``.
    mapping : dict, optional
        ``{"our_name": "their_name"}`` renames the user's columns to ope's names.
    columns : sequence of str, optional
        Optional columns to read (ope's names, after ``mapping``) in addition to the required
        ones and a bandit log's ``weight`` (sampling weights: read whenever present, as they
        change every estimate). ``None`` reads every column.
    source : str
        Name of the source for messages.
    missing_hints : dict, optional
        Column -> text appended to its "required column is missing" problem (e.g. that the
        file's metadata names it, which never supplies a required column).

    Returns
    -------
    ColumnPlan

    Raises
    ------
    SchemaError
        A mapped column does not exist, a required or requested column is missing, a known
        column has a type that cannot be cast to its canonical type, or a per-policy column has
        no policy name (``target__`` alone). All problems are listed.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from ope.schema import BANDIT, plan_columns
    >>> s = pa.schema([("item", pa.int32()), ("pscore", pa.float32()), ("click", pa.int8())])
    >>> plan = plan_columns(s, BANDIT, mapping={"action": "item", "propensity": "pscore",
    ...                                          "reward": "click"})
    >>> plan.output_columns
    ['action', 'propensity', 'reward']
    """
    names = list(schema.names)
    problems: list[str] = []
    dupes = repeated_names(names)
    if dupes:
        raise SchemaError(
            f"{source}: column name(s) {', '.join(map(repr, dupes))} appear more than once; "
            "rename or drop the repeats so that every column has one meaning"
        )
    mapping = check_mapping(mapping)
    renames = {n: n for n in names}
    available = ", ".join(names) if names else "(no columns)"
    theirs_seen: dict[str, str] = {}
    known = [c.name for c in log_schema.columns]
    for ours, theirs in mapping.items():
        if theirs not in renames:
            hint = ""
            if ours in renames and log_schema.kind_of(theirs) is not None:
                hint = (
                    f"; mapping is {{ope_name: your_name}}, so you probably meant "
                    f"{{{theirs!r}: {ours!r}}}"
                )
            problems.append(
                f"mapping {ours!r}: {theirs!r} names a column that is not in the source "
                f"(available: {available}){hint}"
            )
            continue
        if log_schema.kind_of(ours) is None:
            close = difflib.get_close_matches(ours, known, n=1, cutoff=MAPPING_TYPO_CUTOFF)
            if close and close[0] != ours:
                problems.append(
                    f"mapping key {ours!r} is not one of ope's column names; did you mean "
                    f"{close[0]!r}? (mapping is {{ope_name: your_name}}; other keys simply "
                    "rename pass-through columns)"
                )
                continue
        if theirs in theirs_seen:
            problems.append(
                f"mapping sends column {theirs!r} to both {theirs_seen[theirs]!r} and {ours!r}"
            )
            continue
        theirs_seen[theirs] = ours
        renames[theirs] = ours
    # a source column keeping a name that a mapped column now takes is ambiguous
    for ours, theirs in mapping.items():
        if (
            ours != theirs
            and ours in renames
            and ours not in mapping.values()
            and theirs in theirs_seen
        ):
            problems.append(
                f"mapping renames {theirs!r} to {ours!r}, but the source already has a column "
                f"{ours!r}; map that one to another name or drop it"
            )
    by_ours = {ours: theirs for theirs, ours in renames.items()}

    wanted: list[str]
    if columns is None:
        wanted = [renames[n] for n in names]
    else:
        if isinstance(columns, str):
            raise ParameterError("columns must be a list of column names, not a single string")
        if not hasattr(columns, "__iter__"):
            raise ParameterError(
                f"columns must be a list of column names, got {columns!r} "
                f"({type(columns).__name__})"
            )
        named = [c for c in columns if not isinstance(c, str)]
        if named:
            raise ParameterError(
                f"columns must be a list of column names (strings); got {named[0]!r} "
                f"({type(named[0]).__name__}) among them"
            )
        # the sampling weights change every estimate: read whenever the source has them (the
        # names the source lacks are left out below)
        always = _READ_WHEN_PRESENT if log_schema is BANDIT else ()
        wanted = list(dict.fromkeys([*log_schema.required, *always, *columns]))
        for c in columns:
            if c not in by_ours and c not in log_schema.required:
                if c in mapping.values():
                    ours_for_c = next(o for o, t in mapping.items() if t == c)
                    problems.append(
                        f"column {c!r} was requested in columns=, but mapping renames it to "
                        f"{ours_for_c!r}; columns= takes ope's names: use {ours_for_c!r}"
                    )
                    continue
                problems.append(
                    f"column {c!r} was requested in columns= but is not in the source "
                    f"(available: {available})"
                )
        wanted = [c for c in wanted if c in by_ours]

    for req in log_schema.required:
        if req not in by_ours:
            hint = ""
            if req not in mapping:
                hint = f"; if it has another name, pass mapping={{{req!r}: 'your_column'}}"
            hint += dict(missing_hints or {}).get(req, "")
            problems.append(f"required column {req!r} is missing{hint}")
    for ours in wanted:
        for prefix, _ in log_schema.prefixed:
            if ours == prefix:
                theirs = by_ours[ours]
                label = repr(ours) if ours == theirs else f"{ours!r} (your {theirs!r})"
                problems.append(
                    f"column {label} is a per-policy column without a policy name; name it "
                    f"{prefix}<name> (e.g. {prefix}new), or pass mapping="
                    f"{{'{prefix}new': {theirs!r}}}"
                )

    kinds: dict[str, str] = {}
    id_types: dict[str, pa.DataType] = {}
    action_type = None
    if "action" in by_ours and log_schema.kind_of("action") == _ID:
        action_type = id_type_of(schema.field(by_ours["action"]).type)
    for ours in wanted:
        kind = log_schema.kind_of(ours)
        if kind is None:
            continue
        theirs = by_ours[ours]
        t = schema.field(theirs).type
        problem = column_problem(t, kind, action_type)
        label = repr(ours) if ours == theirs else f"{ours!r} (your {theirs!r})"
        if problem is not None:
            problems.append(f"column {label} {problem}")
            continue
        kinds[ours] = kind
        if kind == _ID:
            id_types[ours] = id_type_of(t) or pa.int64()
        elif kind == _LIST_ACTION:
            id_types[ours] = action_type or (
                pa.int64() if pa.types.is_null(t) else id_type_of(t.value_type) or pa.int64()
            )
    if log_schema is BANDIT:
        for needs, what in (("logging_distribution", "logging_distribution"),):
            if needs in wanted and "candidates" not in wanted:
                problems.append(f"column {what!r} needs the 'candidates' column it is aligned with")
        for c in wanted:
            if c.startswith(TARGET_DIST_PREFIX) and "candidates" not in wanted:
                problems.append(f"column {c!r} needs the 'candidates' column it is aligned with")
    if problems:
        raise SchemaError(
            f"{source} does not match the {log_schema.name} log schema "
            f"({len(problems)} problem{'s' if len(problems) > 1 else ''}):\n  - "
            + "\n  - ".join(problems)
        )
    source_columns = tuple(by_ours[c] for c in wanted)
    roundoff = {}
    for ours, kind in kinds.items():
        if kind in (_FLOAT, _LIST_FLOAT):
            t = schema.field(by_ours[ours]).type
            if kind == _LIST_FLOAT and not hasattr(t, "value_type"):
                continue  # a null column (an empty frame's object column): no storage type
            u = storage_roundoff(t.value_type if kind == _LIST_FLOAT else t)
            if u:
                roundoff[ours] = u
    return ColumnPlan(
        source_columns=source_columns,
        renames={theirs: renames[theirs] for theirs in source_columns},
        kinds=kinds,
        id_types=id_types,
        unit_roundoff=roundoff,
    )


def check_segment_columns(
    schema: pa.Schema, by: str | Sequence[str] | None, *, source: str = "the logs"
) -> list[str]:
    """The segment columns of ``by=``, checked: present, and one scalar label per row.

    Parameters
    ----------
    schema : pyarrow.Schema
        The logs' schema (``logs.table.schema``).
    by : str, sequence of str or None
        Segment column names (a single name is one column).
    source : str
        The logs' name, for messages.

    Returns
    -------
    list of str
        The names, in order (empty for ``None``).

    Raises
    ------
    ParameterError
        ``by`` is not a name or a list of names, or names a column twice.
    SchemaError
        A column is missing, or holds lists, structs, maps or bytes (a segment is one label
        per row: a string, a number, a bool, a date). Every problem is listed at once.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from ope.schema import check_segment_columns
    >>> s = pa.schema([("country", pa.string()), ("tags", pa.list_(pa.string()))])
    >>> check_segment_columns(s, "country")
    ['country']
    >>> check_segment_columns(s, ["tags"])
    Traceback (most recent call last):
    ...
    ope.exceptions.SchemaError: cannot segment the logs by ['tags']: column 'tags' has type list<item: string>: a segment column holds one label per row (a string, number, bool or date), and a list holds several. Pick one element (pyarrow.compute.list_element(col, 0)), join them into one string, or explode the rows first
    """
    if by is None:
        return []
    names = [by] if isinstance(by, str) else by
    if not isinstance(names, Sequence) or not all(isinstance(c, str) for c in names):
        raise ParameterError(f"`by` must be a column name or a list of column names; got {by!r}")
    names = list(names)
    repeated = repeated_names(names)
    if repeated:
        raise ParameterError(f"`by` names column(s) {', '.join(map(repr, repeated))} twice")
    problems = []
    for name in names:  # a loop over column names
        if name not in schema.names:
            close = difflib.get_close_matches(name, schema.names, n=1, cutoff=MAPPING_TYPO_CUTOFF)
            hint = (
                f"; did you mean {close[0]!r}?"
                if close
                else f" (available: {', '.join(schema.names)})"
            )
            problems.append(f"column {name!r} is not in {source}{hint}")
            continue
        t = _base(schema.field(name).type)
        if _is_list(t) or pa.types.is_struct(t) or pa.types.is_map(t) or pa.types.is_union(t):
            what = "a list" if _is_list(t) else f"a {str(t).split('<')[0]}"
            problems.append(
                f"column {name!r} has type {schema.field(name).type}: a segment column holds one "
                f"label per row (a string, number, bool or date), and {what} holds several. "
                "Pick one element (pyarrow.compute.list_element(col, 0)), join them into one "
                "string, or explode the rows first"
            )
        elif (
            pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)
        ):
            problems.append(
                f"column {name!r} holds raw bytes ({t}); decode it to strings first "
                "(e.g. pyarrow.compute.cast(col, pyarrow.string()))"
            )
    if problems:
        raise SchemaError(f"cannot segment {source} by {names}: " + "; ".join(problems))
    return names


def storage_roundoff(t: pa.DataType) -> float:
    """Relative rounding error of storing a probability in type ``t`` (0 for float64 and exact
    types): half the spacing of floats at 1, 2**-11 for float16 and 2**-24 for float32."""
    t = _base(t)
    if pa.types.is_float16(t):
        return 2.0**-11
    if pa.types.is_float32(t):
        return 2.0**-24
    return 0.0


# --------------------------------------------------------------------------------------------
# value-level casting
# --------------------------------------------------------------------------------------------


def _decode(arr: pa.ChunkedArray) -> pa.ChunkedArray:
    if pa.types.is_dictionary(arr.type):
        return arr.cast(arr.type.value_type)
    return arr


def _to_whole(arr: pa.ChunkedArray, label: str, row_offset: int) -> pa.ChunkedArray:
    """float -> int64 when every (non-NaN) value is a whole number in range; NaN becomes null."""
    x = arr.to_numpy()
    nan = np.isnan(x)
    finite = ~nan & np.isfinite(x)
    bad = ~nan & (~finite | (np.floor(np.where(finite, x, 0.0)) != np.where(finite, x, 0.0)))
    bad |= finite & (np.abs(np.where(finite, x, 0.0)) > 2.0**63 - 1024)
    if bad.any():
        first = np.flatnonzero(bad)[0]
        raise SchemaError(
            f"column {label} is floating point and holds {int(bad.sum()):,} value(s) that are not "
            f"whole numbers (first at row {int(first) + row_offset}: {float(x[first])!r}); ope casts it "
            "to int64 only without loss. Fix the column (e.g. round it yourself) or store it as "
            "integers or strings"
        )
    out = pa.array(np.where(nan, 0.0, x).astype(np.int64), mask=nan if nan.any() else None)
    return pa.chunked_array([out])


def _cast_scalar(
    arr: pa.ChunkedArray, kind: str, target: pa.DataType, label: str, row_offset: int
) -> pa.ChunkedArray:
    arr = _decode(arr)
    t = arr.type
    if t == target:
        return arr
    if pa.types.is_null(t):
        return arr.cast(target)
    if kind == _BOOL and pa.types.is_integer(t):
        x = arr.to_numpy(zero_copy_only=False)
        valid = ~pc.is_null(arr).to_numpy(zero_copy_only=False)
        bad = valid & ~np.isin(np.where(valid, x, 0), (0, 1))
        if bad.any():
            raise SchemaError(
                f"column {label} is {t} and holds values other than 0 and 1 (first at row "
                f"{first_rows(bad)[1] + row_offset}); store it as bool"
            )
        return pc.not_equal(arr, pa.scalar(0, t))
    if target == pa.int64() and pa.types.is_floating(t):
        return _to_whole(arr.cast(pa.float64()), label, row_offset)
    try:
        return arr.cast(target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise SchemaError(_lossy_cast_message(arr, target, label, row_offset, str(exc))) from None


def _lossy_cast_message(
    arr: pa.ChunkedArray, target: pa.DataType, label: str, row_offset: int, detail: str
) -> str:
    """What could not be cast, where (count and first row), and how to fix it."""
    t = arr.type
    bad: np.ndarray | None = None
    try:
        if pa.types.is_unsigned_integer(t) and target == pa.int64():
            bad = pc.fill_null(pc.greater(arr, pa.scalar(2**63 - 1, t)), False).to_numpy(
                zero_copy_only=False
            )
        elif pa.types.is_integer(t) and pa.types.is_floating(target):
            x = pc.fill_null(arr, 0).to_numpy()
            bad = (x > 2**53) | (x < -(2**53))  # float64 holds every integer up to 2**53
        elif pa.types.is_decimal(t):
            x = arr.cast(pa.float64()).to_numpy()  # (enough precision to locate the culprits)
            whole = np.floor(x) == x
            bad = ~np.isnan(x) & (~whole | (np.abs(x) >= 2.0**63))
        else:
            # the values that do not survive a round trip through the target type
            back = arr.cast(target, safe=False).cast(t, safe=False)
            bad = pc.fill_null(pc.not_equal(back, arr), True).to_numpy(zero_copy_only=False)
            bad &= ~pc.is_null(arr).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        bad = None
    where = ""
    if bad is not None and bad.any():
        first = int(np.flatnonzero(bad)[0])
        value = arr[first].as_py()
        where = (
            f"; {int(bad.sum()):,} value(s) do not fit (first at row {first + row_offset}: "
            f"{value!r})"
        )
    if target == pa.int64():
        fix = (
            "ids must be whole numbers within int64 (|id| < 2**63); store larger or fractional "
            "ids as strings (e.g. df[col].astype(str))"
        )
    elif pa.types.is_floating(target):
        fix = "store the column as float64 yourself if the rounding is acceptable"
    else:
        fix = f"store the column as {target}"
    return (
        f"column {label} of type {t} cannot be cast to {target} without loss{where} "
        f"({detail}). Fix: {fix}"
    )


def _cast_list(
    arr: pa.ChunkedArray, value_kind: str, target_value: pa.DataType, label: str, row_offset: int
) -> pa.ChunkedArray:
    target = pa.list_(target_value)
    t = arr.type
    if t == target:
        return arr
    if pa.types.is_null(t):
        return arr.cast(target)
    chunks = []
    for chunk in arr.chunks:
        if _is_list_view(chunk.type):
            # (pyarrow's list_view -> list cast can build invalid offsets; rebuild them instead)
            lengths = pc.fill_null(pc.list_value_length(chunk), 0).to_numpy(zero_copy_only=False)
            offsets = np.zeros(len(chunk) + 1, dtype=np.int64)
            np.cumsum(lengths, out=offsets[1:])
            flat = pc.list_flatten(chunk)
            chunk = pa.LargeListArray.from_arrays(
                pa.array(offsets), flat, mask=chunk.is_null() if chunk.null_count else None
            ).cast(pa.list_(chunk.type.value_type))
        elif pa.types.is_fixed_size_list(chunk.type) or not pa.types.is_list(chunk.type):
            chunk = chunk.cast(pa.list_(chunk.type.value_type))
        values = pa.chunked_array([chunk.values], type=chunk.type.value_type)
        cast_values = _cast_scalar(values, value_kind, target_value, f"{label} (list entries)", 0)
        cast_values = (
            cast_values.combine_chunks() if cast_values.num_chunks != 1 else cast_values.chunk(0)
        )
        chunks.append(
            pa.ListArray.from_arrays(
                chunk.offsets, cast_values, mask=chunk.is_null() if chunk.null_count else None
            )
        )
    return pa.chunked_array(chunks, type=target)


def conform(table: pa.Table, plan: ColumnPlan, *, row_offset: int = 0) -> pa.Table:
    """Rename a table's columns to ope's names and cast known columns to canonical types.

    Columns already in canonical types are passed through without a copy. Pass-through columns
    are kept unchanged.

    Raises
    ------
    SchemaError
        A cast would lose information (fractions in an integer column, integers beyond 2**53 in
        a float column, values other than 0/1 in a bool column). The message names the column
        and the first row (counted from ``row_offset``).

    Examples
    --------
    >>> import pyarrow as pa
    >>> from ope.schema import BANDIT, conform, plan_columns
    >>> t = pa.table({"item": pa.array([1.0, 2.0]), "p": pa.array([0.5, 0.5], pa.float32()),
    ...               "r": pa.array([True, False])})
    >>> plan = plan_columns(t.schema, BANDIT, mapping={"action": "item", "propensity": "p",
    ...                                                "reward": "r"})
    >>> conform(t, plan).schema
    action: int64
    propensity: double
    reward: double
    """
    arrays = []
    names = []
    for theirs in plan.source_columns:
        ours = plan.renames[theirs]
        arr = table.column(theirs)
        kind = plan.kinds.get(ours)
        label = repr(ours) if ours == theirs else f"{ours!r} (your {theirs!r})"
        if kind == _FLOAT:
            arr = _cast_scalar(arr, kind, pa.float64(), label, row_offset)
        elif kind == _INT:
            arr = _cast_scalar(arr, kind, pa.int64(), label, row_offset)
        elif kind == _BOOL:
            arr = _cast_scalar(arr, kind, pa.bool_(), label, row_offset)
        elif kind == _ID:
            arr = _cast_scalar(arr, kind, plan.id_types[ours], label, row_offset)
        elif kind == _LIST_FLOAT:
            arr = _cast_list(arr, _FLOAT, pa.float64(), label, row_offset)
        elif kind == _LIST_ACTION:
            arr = _cast_list(arr, _ID, plan.id_types[ours], label, row_offset)
        arrays.append(arr)
        names.append(ours)
    return pa.Table.from_arrays(arrays, names=names)


# --------------------------------------------------------------------------------------------
# row rules
# --------------------------------------------------------------------------------------------


def _is_null(arr: pa.ChunkedArray | pa.Array) -> np.ndarray:
    if arr.null_count == 0:
        return np.zeros(len(arr), dtype=bool)
    return pc.is_null(arr).to_numpy(zero_copy_only=False)


def _floats(arr: pa.ChunkedArray) -> np.ndarray:
    """float64 values with nulls as NaN."""
    x = arr.to_numpy()
    return x.astype(np.float64, copy=False)


def _views(arr: pa.ChunkedArray | pa.Array) -> list[np.ndarray] | None:
    """Zero-copy numpy views of the non-empty chunks; None when there are nulls."""
    if arr.null_count:
        return None
    chunks = arr.chunks if isinstance(arr, pa.ChunkedArray) else [arr]
    return [c.to_numpy() for c in chunks if len(c)]


def _all_within(
    arr: pa.ChunkedArray, lo: float, hi: float, *, lo_open: bool = False, hi_open: bool = False
) -> bool:
    """True when no value is null or NaN and all lie in the interval (the fast, common path).

    Works chunk by chunk on zero-copy views with min/max (which propagate NaN), so a valid
    column costs two reads and no temporaries.
    """
    views = _views(arr)
    if views is None:
        return False
    for c in views:
        mn, mx = c.min(), c.max()
        if not ((mn > lo) if lo_open else (mn >= lo)) or not ((mx < hi) if hi_open else (mx <= hi)):
            return False
    return True


class RowMasks(dict[str, np.ndarray]):
    """Reason -> boolean mask over rows, as a dict, plus the culprit columns of per-column rules.

    ``by_column[reason][column]`` is the mask of the rows that ``column`` alone breaks
    ``reason`` in, for the rules checked column by column (every ``target__<name>`` and
    ``target_dist__<name>`` column), so that a report can say which columns are at fault.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.schema import RowMasks
    >>> m = RowMasks()
    >>> m.add("target_probability_out_of_range", np.array([True, False]), column="target__a")
    >>> list(m), list(m.by_column["target_probability_out_of_range"])
    (['target_probability_out_of_range'], ['target__a'])
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.by_column: dict[str, dict[str, np.ndarray]] = {}

    def add(self, reason: str, mask: np.ndarray, *, column: str | None = None) -> None:
        """Mark the rows of ``mask`` under ``reason`` (and ``column``, when given)."""
        if not mask.any():
            return
        self[reason] = self[reason] | mask if reason in self else mask
        if column is not None:
            cols = self.by_column.setdefault(reason, {})
            cols[column] = cols[column] | mask if column in cols else mask


def _add(
    masks: dict[str, np.ndarray], reason: str, mask: np.ndarray, column: str | None = None
) -> None:
    if isinstance(masks, RowMasks):
        masks.add(reason, mask, column=column)
    elif mask.any():
        masks[reason] = masks[reason] | mask if reason in masks else mask


def _check_propensity_reward(table: pa.Table, masks: dict[str, np.ndarray]) -> None:
    prop = table.column("propensity")
    if not _all_within(prop, MIN_PROPENSITY, 1.0):
        p = _floats(prop)
        ok = (p >= MIN_PROPENSITY) & (p <= 1.0)
        nan = np.isnan(p)
        _add(masks, "propensity_missing", nan)
        _add(masks, "propensity_out_of_range", ~ok & ~nan)
    rew = table.column("reward")
    if not _all_within(rew, -np.inf, np.inf, lo_open=True, hi_open=True):
        r = _floats(rew)
        fin = np.isfinite(r)
        nan = np.isnan(r)
        _add(masks, "reward_missing", nan)
        _add(masks, "reward_not_finite", ~fin & ~nan)


def _check_sampling_weights(table: pa.Table, masks: dict[str, np.ndarray]) -> None:
    """The bandit schema's optional ``weight`` column: a number in (0, MAX_FINITE_WEIGHT]."""
    if "weight" not in table.column_names:
        return
    col = table.column("weight")
    if not _all_within(col, 0.0, MAX_FINITE_WEIGHT, lo_open=True):
        s = _floats(col)
        nan = np.isnan(s)
        _add(masks, "weight_missing", nan)
        _add(masks, "weight_out_of_range", ~((s > 0.0) & (s <= MAX_FINITE_WEIGHT)) & ~nan)


def _check_targets(table: pa.Table, masks: dict[str, np.ndarray]) -> None:
    for name in table.column_names:
        if name.startswith(TARGET_PREFIX):
            col = table.column(name)
            if not _all_within(col, 0.0, 1.0):
                t = _floats(col)
                _add(masks, "target_probability_out_of_range", ~((t >= 0.0) & (t <= 1.0)), name)


def first_occurrence_duplicates(
    values: pa.ChunkedArray | pa.Array, valid: np.ndarray
) -> np.ndarray:
    """Mark every occurrence of a value after its first (among ``valid`` rows).

    Uses a monotone check (ids written in increasing order), then a bitmap when integer ids are
    dense, and a stable sort (integers) or hash encoding (strings) otherwise.
    """
    n = len(values)
    dup = np.zeros(n, dtype=bool)
    if n < 2:
        return dup
    if pa.types.is_integer(values.type):
        views = _views(values) if valid.all() else None
        if views is not None and _no_int_duplicates(views, n):
            return dup
        # (filling nulls keeps int64 exact; a float conversion would round ids above 2**53)
        x = values.to_numpy() if values.null_count == 0 else pc.fill_null(values, 0).to_numpy()
        if not valid.all():
            idx = np.flatnonzero(valid)
            x = np.asarray(x[idx], dtype=np.int64)
            if _no_int_duplicates([x], x.size):
                return dup
        else:
            idx = None
            x = np.asarray(x, dtype=np.int64)
        _, first = np.unique(x, return_index=True)
        local = np.ones(x.size, dtype=bool)
        local[first] = False
    else:
        v = values if valid.all() else values.filter(pa.array(valid))
        if isinstance(v, pa.ChunkedArray):
            v = v.combine_chunks()
        codes = pc.dictionary_encode(v).indices.to_numpy(zero_copy_only=False).astype(np.int64)
        # codes are assigned in order of first appearance: a row repeats an earlier value iff
        # its code does not exceed the largest code seen before it
        prev_max = np.maximum.accumulate(np.concatenate(([-1], codes[:-1])))
        local = codes <= prev_max
        idx = None if valid.all() else np.flatnonzero(valid)
    if idx is None:
        return local
    dup[idx[local]] = True
    return dup


def _no_int_duplicates(views: list[np.ndarray], n: int) -> bool:
    """Cheap proof that integer ids (given as chunks) are distinct; False means "maybe not"."""
    if n < 2:
        return True
    increasing = all(bool(np.all(c[1:] > c[:-1])) for c in views) and all(
        a[-1] < b[0] for a, b in zip(views[:-1], views[1:])
    )
    if increasing:
        return True
    lo = min(int(c.min()) for c in views)
    hi = max(int(c.max()) for c in views)
    if hi - lo < max(BITMAP_FACTOR * n, BITMAP_MIN_BYTES):
        seen = np.zeros(hi - lo + 1, dtype=np.bool_)
        for c in views:
            seen[c - lo if lo else c] = True
        return int(np.count_nonzero(seen)) == n
    return not bool((np.diff(np.sort(np.concatenate(views))) == 0).any())


def _list_parts(arr: pa.ChunkedArray) -> tuple[pa.Array, pa.Array, np.ndarray, np.ndarray]:
    """(list array, flattened values, parent row of each value, length per row with null=-1)."""
    a = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    flat = a.flatten()
    parent = pc.list_parent_indices(a).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    lengths = (
        pc.fill_null(pc.list_value_length(a), -1).to_numpy(zero_copy_only=False).astype(np.int64)
    )
    return a, flat, parent, lengths


def _any_by_row(parent: np.ndarray, flags: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n, dtype=bool)
    out[parent[flags]] = True
    return out


def distribution_faults(
    values: np.ndarray, parent: np.ndarray, n: int, *, sum_atol: float = DISTRIBUTION_SUM_ATOL
) -> tuple[np.ndarray, np.ndarray]:
    """The rules of a logger's distribution stored as a list per row (``values`` flat, the
    row of each in ``parent``): per row, whether an entry lies outside [0, 1] (NaN included),
    and whether the entries, all in range, miss a sum of 1 by more than ``sum_atol``.

    >>> import numpy as np
    >>> v, parent = np.array([0.5, 0.5, 0.7, 0.7, 1.5]), np.array([0, 0, 1, 1, 2])
    >>> [m.tolist() for m in distribution_faults(v, parent, 3)]
    [[False, False, True], [False, True, False]]
    """
    bad_entry = ~((values >= 0.0) & (values <= 1.0))
    out_of_range = _any_by_row(parent, bad_entry, n)
    sums = np.bincount(parent, weights=np.where(bad_entry, 0.0, values), minlength=n)
    return out_of_range, ~out_of_range & (np.abs(sums - 1.0) > sum_atol)


def propensity_disagrees(
    propensity: np.ndarray, entry: np.ndarray, *, rtol: float = PROPENSITY_MATCH_RTOL
) -> np.ndarray:
    """Where a valid logged propensity (in (0, 1]; the others are rejected for themselves)
    differs from the logger's distribution at the logged action, ``entry``, by more than
    ``rtol`` of the larger (NaN entries never disagree here: they are out of range)."""
    with np.errstate(invalid="ignore"):
        return (
            (propensity > 0.0)
            & (propensity <= 1.0)
            & (np.abs(propensity - entry) > rtol * np.maximum(propensity, entry))
        )


def check_bandit_rows(
    table: pa.Table, *, unit_roundoff: Mapping[str, float] | None = None
) -> dict[str, np.ndarray]:
    """Apply the bandit row rules to a conformed table.

    Parameters
    ----------
    table : pyarrow.Table
        A conformed table (:func:`conform`).
    unit_roundoff : dict, optional
        ``ColumnPlan.unit_roundoff``: the rounding error of columns that the source stored in
        float16 or float32. The comparisons of ``propensity`` with ``logging_distribution``
        and of its row sums with 1 allow twice that error on top of their tolerances, since a
        value rounded to float16 can be off by 5e-4 however carefully it was logged.

    Returns
    -------
    RowMasks
        Reason -> boolean mask over rows (only reasons with at least one row appear), with
        ``by_column`` naming the ``target__`` / ``target_dist__`` columns at fault. The
        ``event_id_duplicate`` rule covers duplicates *within* this table only; readers that
        stream several batches also check ids across batches.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from ope.schema import check_bandit_rows
    >>> t = pa.table({"action": [1, 2, 3], "propensity": [0.5, 0.0, 1.5], "reward": [1.0, 0.0, 1.0]})
    >>> {k: v.nonzero()[0].tolist() for k, v in check_bandit_rows(t).items()}
    {'propensity_out_of_range': [1, 2]}
    """
    n = table.num_rows
    masks = RowMasks()
    action = table.column("action")
    action_null = _is_null(action)
    _add(masks, "action_missing", action_null)
    _check_propensity_reward(table, masks)
    _check_sampling_weights(table, masks)
    names = table.column_names
    if "event_id" in names:
        eid = table.column("event_id")
        eid_null = _is_null(eid)
        _add(masks, "event_id_missing", eid_null)
        _add(masks, "event_id_duplicate", first_occurrence_duplicates(eid, ~eid_null))
    _check_targets(table, masks)
    if "candidates" not in names:
        return masks

    cand, flat, parent, lengths = _list_parts(table.column("candidates"))
    cand_null = lengths < 0
    entry_null = _is_null(flat)
    _add(masks, "candidates_missing", cand_null | _any_by_row(parent, entry_null, n))
    usable = ~entry_null
    # duplicates within a row: sort (row, value) pairs and compare neighbours
    if flat.type == pa.string():
        codes = pc.dictionary_encode(flat).indices.to_numpy(zero_copy_only=False).astype(np.int64)
    else:
        codes = flat.to_numpy(zero_copy_only=False)
    # rows listed in increasing order (as importers build them) have none: no sort needed
    increasing = len(codes) < 2 or (
        bool(usable.all()) and bool(((codes[1:] > codes[:-1]) | (parent[1:] != parent[:-1])).all())
    )
    if not increasing:
        keyed = np.flatnonzero(usable)
        order = keyed[np.lexsort((codes[keyed], parent[keyed]))]
        same = (parent[order][1:] == parent[order][:-1]) & (codes[order][1:] == codes[order][:-1])
        _add(masks, "candidates_duplicate", _any_by_row(parent[order][1:], same, n))
    # logged action among the candidates, and the position of its first match
    act_rep = (
        action.combine_chunks().take(pa.array(parent))
        if len(parent)
        else action.combine_chunks()[:0]
    )
    eq = pc.fill_null(pc.equal(flat, act_rep), False).to_numpy(zero_copy_only=False)
    match_idx = np.flatnonzero(eq)
    match_rows = parent[match_idx]
    keep = np.ones(match_rows.size, dtype=bool)
    keep[1:] = match_rows[1:] != match_rows[:-1]
    match_idx, match_rows = match_idx[keep], match_rows[keep]
    found = np.zeros(n, dtype=bool)
    found[match_rows] = True
    _add(masks, "action_not_in_candidates", ~found & ~cand_null & ~action_null)

    if "logging_distribution" in names:
        ld, ld_flat, _, ld_len = _list_parts(table.column("logging_distribution"))
        ld_null = ld_len < 0
        mismatch = ~cand_null & (ld_null | (ld_len != lengths))
        _add(masks, "candidates_length_mismatch", mismatch & ~ld_null)
        ld_vals = np.asarray(ld_flat.to_numpy(zero_copy_only=False), dtype=np.float64)
        ld_parent = (
            pc.list_parent_indices(ld).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
        )
        u = dict(unit_roundoff or {})
        # each stored entry is off by at most u_d of itself, so a row sum by at most u_d
        sum_atol = max(DISTRIBUTION_SUM_ATOL, 2.0 * u.get("logging_distribution", 0.0))
        match_rtol = max(
            PROPENSITY_MATCH_RTOL,
            2.0 * (u.get("propensity", 0.0) + u.get("logging_distribution", 0.0)),
        )
        entries_out, not_normalized = distribution_faults(ld_vals, ld_parent, n, sum_atol=sum_atol)
        out_of_range = ld_null | entries_out
        _add(masks, "logging_distribution_out_of_range", out_of_range)
        _add(masks, "logging_distribution_not_normalized", not_normalized & ~ld_null)
        # propensity vs the distribution at the logged action (only where both are comparable)
        comparable = ~mismatch[match_rows] & ~out_of_range[match_rows]
        rows = match_rows[comparable]
        # the list entry of the match, re-based on the distribution's own offsets
        cand_start = np.asarray(cand.offsets)[:-1] - cand.offsets[0].as_py()
        ld_start = np.asarray(ld.offsets)[:-1] - ld.offsets[0].as_py()
        pos = match_idx[comparable] - cand_start[rows]
        d = ld_vals[ld_start[rows] + pos]
        pr = _floats(table.column("propensity"))[rows]
        # rows whose propensity is itself invalid are already rejected for that
        bad = propensity_disagrees(pr, d, rtol=match_rtol)
        mask = np.zeros(n, dtype=bool)
        mask[rows[bad]] = True
        _add(masks, "logged_propensity_mismatch", mask)

    for name in names:
        if name.startswith(TARGET_DIST_PREFIX):
            td, td_flat, td_parent, td_len = _list_parts(table.column(name))
            vals = np.asarray(td_flat.to_numpy(zero_copy_only=False), dtype=np.float64)
            _add(
                masks,
                "target_distribution_length_mismatch",
                ~cand_null & (td_len >= 0) & (td_len != lengths),
                name,
            )
            _add(
                masks,
                "target_distribution_out_of_range",
                (td_len < 0) | _any_by_row(td_parent, ~((vals >= 0.0) & (vals <= 1.0)), n),
                name,
            )
    return masks


def episode_bounds(episode_id: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Start offsets of runs of equal ``episode_id`` (plus the end), for a sorted column."""
    n = len(episode_id)
    if n == 0:
        return np.zeros(1, dtype=np.int64)
    a = episode_id.combine_chunks() if isinstance(episode_id, pa.ChunkedArray) else episode_id
    change = pc.fill_null(pc.not_equal(a[1:], a[:-1]), True).to_numpy(zero_copy_only=False)
    # nulls sort last and each null row is its own run
    return np.concatenate(([0], np.flatnonzero(change) + 1, [n])).astype(np.int64)


def check_trajectory_rows(table: pa.Table) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Apply the trajectory row rules to a conformed table.

    Returns
    -------
    masks : dict
        Reason -> boolean mask over rows of ``table`` (in its original order).
        ``episode_invalidated`` marks valid rows whose episode holds an invalid row.
    order : numpy.ndarray
        The row order that sorts the table by (episode_id, step).

    Examples
    --------
    >>> import pyarrow as pa
    >>> from ope.schema import check_trajectory_rows
    >>> t = pa.table({"episode_id": [1, 1, 2], "step": [0, 2, 0], "action": [0, 1, 0],
    ...               "propensity": [0.5, 0.5, 0.5], "reward": [0.0, 1.0, 1.0],
    ...               "done": [False, True, True]})
    >>> masks, order = check_trajectory_rows(t)
    >>> {k: v.nonzero()[0].tolist() for k, v in masks.items()}
    {'step_not_contiguous': [1], 'episode_invalidated': [0]}
    """
    n = table.num_rows
    masks = RowMasks()
    eid = table.column("episode_id")
    eid_null = _is_null(eid)
    _add(masks, "episode_id_missing", eid_null)
    step = table.column("step")
    step_null = _is_null(step)
    _add(masks, "step_missing", step_null)
    done = table.column("done")
    done_null = _is_null(done)
    _add(masks, "done_missing", done_null)
    _add(masks, "action_missing", _is_null(table.column("action")))
    _check_propensity_reward(table, masks)
    _check_targets(table, masks)

    order = pc.sort_indices(
        pa.table({"e": eid, "s": step}),
        sort_keys=[("e", "ascending"), ("s", "ascending")],
    )  # nulls sort last by default.to_numpy(zero_copy_only=False)
    sorted_eid = eid.take(pa.array(order))
    starts = episode_bounds(sorted_eid)
    lengths = np.diff(starts)
    episode_of_row = np.repeat(np.arange(lengths.size), lengths)
    rank = np.arange(n) - starts[:-1][episode_of_row]
    s = np.asarray(step.take(pa.array(order)).to_numpy(zero_copy_only=False), dtype=np.float64)
    d_sorted = pc.fill_null(done.take(pa.array(order)), False).to_numpy(zero_copy_only=False)
    has_episode = ~eid_null[order]
    not_contig = has_episode & ~step_null[order] & (s != rank)
    is_last = np.zeros(n, dtype=bool)
    if n:
        is_last[starts[1:] - 1] = True
    not_last_done = has_episode & d_sorted & ~is_last

    def unsort(m: np.ndarray) -> np.ndarray:
        out = np.zeros(n, dtype=bool)
        out[order] = m
        return out

    _add(masks, "step_not_contiguous", unsort(not_contig))
    _add(masks, "done_not_last_step", unsort(not_last_done))
    bad = np.zeros(n, dtype=bool)
    for m in masks.values():
        bad |= m
    bad_sorted = bad[order]
    episode_bad = np.zeros(lengths.size, dtype=bool)
    episode_bad[episode_of_row[bad_sorted]] = True
    invalidated_sorted = episode_bad[episode_of_row] & ~bad_sorted & has_episode
    _add(masks, "episode_invalidated", unsort(invalidated_sorted))
    return masks, order


def check_paired_rows(table: pa.Table) -> dict[str, np.ndarray]:
    """Apply the paired-replay row rules to a conformed table.

    ``pair_missing_arm`` marks every otherwise valid row of a pair that lacks a valid row for
    one of the arms present among the valid rows.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from ope.schema import check_paired_rows
    >>> t = pa.table({"pair_id": [0, 0, 1], "arm": ["a", "b", "a"], "outcome": [1.0, 0.0, 1.0]})
    >>> {k: v.nonzero()[0].tolist() for k, v in check_paired_rows(t).items()}
    {'pair_missing_arm': [2]}
    """
    n = table.num_rows
    masks: dict[str, np.ndarray] = {}
    pid = table.column("pair_id")
    arm = table.column("arm")
    pid_null = _is_null(pid)
    arm_null = _is_null(arm)
    _add(masks, "pair_id_missing", pid_null)
    _add(masks, "arm_missing", arm_null)
    has_rep = "replicate" in table.column_names
    rep_null = _is_null(table.column("replicate")) if has_rep else np.zeros(n, dtype=bool)
    _add(masks, "replicate_missing", rep_null)
    o = _floats(table.column("outcome"))
    fin = np.isfinite(o)
    _add(masks, "outcome_missing", np.isnan(o))
    _add(masks, "outcome_not_finite", ~fin & ~np.isnan(o))

    def codes_of(a: pa.ChunkedArray) -> np.ndarray:
        enc = pc.dictionary_encode(a.combine_chunks())
        return pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)

    pc_codes = codes_of(pid)
    arm_codes = codes_of(arm)
    rep = (
        pc.fill_null(table.column("replicate"), 0).to_numpy().astype(np.int64)
        if has_rep
        else np.zeros(n, dtype=np.int64)
    )
    keyed = ~pid_null & ~arm_null & ~rep_null
    idx = np.flatnonzero(keyed)
    order = idx[np.lexsort((idx, rep[idx], arm_codes[idx], pc_codes[idx]))]
    same = (
        (pc_codes[order][1:] == pc_codes[order][:-1])
        & (arm_codes[order][1:] == arm_codes[order][:-1])
        & (rep[order][1:] == rep[order][:-1])
    )
    dup = np.zeros(n, dtype=bool)
    dup[order[1:][same]] = True
    _add(masks, "pair_duplicate", dup)

    bad = np.zeros(n, dtype=bool)
    for m in masks.values():
        bad |= m
    good = np.flatnonzero(~bad)
    arms_present = np.unique(arm_codes[good])
    if good.size and arms_present.size:
        n_pairs = int(pc_codes.max()) + 1
        combos = np.unique(pc_codes[good] * (int(arm_codes.max()) + 1) + arm_codes[good])
        arms_per_pair = np.bincount(combos // (int(arm_codes.max()) + 1), minlength=n_pairs)
        incomplete_pair = arms_per_pair < arms_present.size
        _add(masks, "pair_missing_arm", ~bad & ~pid_null & incomplete_pair[np.maximum(pc_codes, 0)])
    return masks
