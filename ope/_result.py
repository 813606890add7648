"""The result contract: every result object of ope speaks one vocabulary and renders one way.

:mod:`ope.results` re-exports the public names; :class:`Estimate` and the interval dispatch
live there.

A result (:class:`ope.Estimate`, :class:`ope.Evaluation`, :class:`ope.Diagnostics`,
:class:`ope.Certificate`, and those to come) has typed fields and

- ``to_dict()``: a JSON-ready dict with stable keys that never depend on arguments;
- ``summary()``: plain text (a title, ``name: value`` lines, an optional table, numbered notes);
- ``_repr_html_()``: the same parts as escaped HTML, for notebooks;
- ``provenance``: what produced it (a :class:`Provenance`: ope's version, the options, the seed,
  and for the CLI the command, the input and its row count), or None when nothing recorded it.
  A result carrying one shows it at the end of ``summary()`` and ``_repr_html_()`` and under the
  key ``"provenance"`` of ``to_dict()``, whatever its class: :class:`Result` adds it.

The shared vocabulary: ``value``, ``n``, ``ci_low``, ``ci_high``, ``ci_method``,
``confidence_level``, ``notes`` (a tuple of str); ``max_weight`` is only ever a clip level and
``weight_bound`` an a priori bound on the weights. A subclass supplies :meth:`Result._parts`;
the text and HTML renderers here are the only ones, so every user-provided string (policy names,
column values) is escaped in one place, and every number is formatted by the rules of
:mod:`ope._format`: a value with a standard error to 2 significant digits of that error (a
table's value, std_error, ci_low and ci_high columns share one precision), other numbers to 4
significant digits, table columns as wide as their widest cell, text wrapped to 88 characters,
each note stated once, numbered and referenced from the rows it concerns.
"""

from __future__ import annotations

import contextvars
import copy
import dataclasses
import functools
import html
import math
import os
import sys
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

import numpy as np

from ope._format import (
    SIG_DIGITS,
    TEXT_WIDTH,
    format_column,
    format_table,
    format_value,
    is_number,
    number_notes,
    safe_text,
    se_decimals,
    wrap_text,
)
from ope._validation import (
    check_positive_int,
)
from ope.exceptions import ParameterError

__all__ = [
    "ESTIMATE_TABLE_COLUMNS",
    "INTERVAL_COLUMNS",
    "interval_rows",
    "Result",
    "Provenance",
    "ResultParts",
    "VALUE_COLUMNS",
    "render_html",
    "render_text",
]

#: Columns of a table of estimates (``Evaluation.table``, ``TrajectoryEvaluation.table``): one
#: row per policy x estimator, in this order.
ESTIMATE_TABLE_COLUMNS: Final = (
    "policy",
    "estimator",
    "value",
    "std_error",
    "ci_low",
    "ci_high",
    "confidence_level",
    "ci_method",
    "target",
    "n",
    "ess",
    "ess_ratio",
    "notes",
)

#: Table columns on the scale of the value whose precision a ``std_error`` column sets (when
#: a rendered table has one): they share the decimals that show its smallest error to two
#: significant digits (``ope._format.se_decimals``).
VALUE_COLUMNS: Final = (
    "value",
    "std_error",
    "ci_low",
    "ci_high",
    "difference",
    "truth",
    "true_value",
    "unpaired_std_error",
)


# --------------------------------------------------------------------------------------------
# provenance
# --------------------------------------------------------------------------------------------
def _ope_version() -> str:
    from ope import __version__

    return str(__version__)


#: The distributions whose versions :meth:`Provenance.capture` records.
_DEPENDENCIES: Final = ("numpy", "scipy", "pandas", "pyarrow", "scikit-learn")


def _json_ready(value: Any) -> Any:
    """An option value as JSON can hold it: mappings and sequences recursively, numpy scalars
    and arrays as Python values, paths as text, anything else by its ``str``."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, Mapping):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_json_ready(v) for v in value), key=str)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, np.random.Generator):
        return f"<{type(value.bit_generator).__name__} Generator>"
    return str(value)


@dataclass(frozen=True)
class Provenance:
    """What produced a result, so that it can be produced again.

    Any result can carry one (:meth:`Result.with_provenance`); it then appears under the key
    ``"provenance"`` of the result's ``to_dict()`` (this class's :meth:`to_dict`) and at the end
    of its ``summary()`` and notebook view. Producers record it: ``ope.evaluate`` and the
    learner the options they were called with and the seed their random steps were drawn
    from, the CLI also the command and the input; :meth:`Estimate.with_ci` records the seed of
    a bootstrap's resamples.

    Attributes
    ----------
    options : mapping of str to any
        The settings the result was computed with, under the names the caller used (an API's
        keyword arguments, or the CLI's options as parsed). ``to_dict()`` writes them JSON-ready
        (tuples as lists, numpy scalars as numbers, paths as text).
    seed : int or None
        The seed every random step was drawn from (cross-fitting folds, bootstrap resamples,
        learner splits), as ``ope._validation.resolve_seed`` records it: the seed given, or the
        one drawn when ``rng=None``; None when nothing was random or a
        ``numpy.random.Generator`` was given (its state is the caller's to keep).
    ope_version : str
        Version of ope that produced the result (default: the running one).
    command : str or None
        The command line, for results of the CLI.
    input : str or None
        Where the rows came from: a path, or ``"<DataFrame>"`` / ``"<Table>"``.
    rows : int or None
        Rows read from the input.
    dependencies : mapping of str to str
        Versions of Python and of the main dependencies (filled by :meth:`capture`; empty
        otherwise, so that a result's text does not depend on the machine).

    Examples
    --------
    >>> from ope.results import Estimate, Provenance
    >>> est = Estimate("ips", 0.5, 0.1, 0.3, 0.7, n=10, ess=8.0)
    >>> p = Provenance(options={"ci": "bootstrap", "n_resamples": 2000}, seed=7,
    ...                ope_version="0.1.0")
    >>> est.with_provenance(p).to_dict()["provenance"]["seed"]
    7
    >>> print("\\n".join(p.text_lines()))
    Provenance:
      ope:     0.1.0
      seed:    7
      options: ci=bootstrap, n_resamples=2000
    """

    options: Mapping[str, Any] = field(default_factory=dict)
    seed: int | None = None
    ope_version: str = field(default_factory=_ope_version)
    command: str | None = None
    input: str | None = None
    rows: int | None = None
    dependencies: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("options", "dependencies"):
            value = getattr(self, name)
            if not isinstance(value, Mapping):
                raise ParameterError(
                    f"Provenance `{name}` must be a mapping of names to values; got "
                    f"{type(value).__name__}."
                )
            object.__setattr__(self, name, {str(k): v for k, v in value.items()})
        if self.seed is not None:
            object.__setattr__(self, "seed", check_positive_int(self.seed, "seed", minimum=0))
        if self.rows is not None:
            object.__setattr__(self, "rows", check_positive_int(self.rows, "rows", minimum=0))
        if isinstance(self.input, os.PathLike):
            object.__setattr__(self, "input", os.fspath(self.input))
        for name in ("ope_version", "command", "input"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ParameterError(
                    f"Provenance `{name}` must be text; got {value!r} ({type(value).__name__})."
                )

    @classmethod
    def capture(cls, **fields: Any) -> Provenance:
        """A provenance with ``fields`` (as in the constructor) and the versions of Python and
        the main dependencies (numpy, scipy, pandas, pyarrow, scikit-learn) installed.

        >>> sorted(Provenance.capture(seed=1).dependencies)[:2]
        ['numpy', 'pandas']
        """
        from importlib import metadata

        versions = {"python": ".".join(map(str, sys.version_info[:3]))}
        for name in _DEPENDENCIES:
            try:
                versions[name] = metadata.version(name)
            except metadata.PackageNotFoundError:
                continue
        return cls(**{"dependencies": versions, **fields})

    def with_options(self, **options: Any) -> Provenance:
        """A copy whose options also hold ``options`` (replacing those of the same name)."""
        return dataclasses.replace(self, options={**self.options, **options})

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with every key present (None when unknown).

        >>> sorted(Provenance(ope_version="0.1.0").to_dict())
        ['command', 'dependencies', 'input', 'ope_version', 'options', 'rows', 'seed']
        """
        return {
            "ope_version": self.ope_version,
            "seed": self.seed,
            "options": _json_ready(self.options),
            "command": self.command,
            "input": self.input,
            "rows": self.rows,
            "dependencies": dict(self.dependencies),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Provenance:
        """Rebuild from :meth:`to_dict` output (unknown keys are ignored).

        >>> p = Provenance(options={"ci": "t"}, seed=3, input="logs.parquet", rows=10)
        >>> Provenance.from_dict(p.to_dict()) == p
        True
        """
        names = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in names and v is not None}
        for name in ("options", "dependencies"):
            values.setdefault(name, {})
        return cls(**values)

    def fields(self) -> tuple[tuple[str, str], ...]:
        """``(label, text)`` of what is known, in the order shown by ``summary()``."""
        out: list[tuple[str, str]] = [
            ("ope", self.ope_version),
            ("seed", "none" if self.seed is None else str(self.seed)),
        ]
        if self.options:
            out.append(
                ("options", ", ".join(f"{k}={format_value(v)}" for k, v in self.options.items()))
            )
        if self.command is not None:
            out.append(("command", self.command))
        if self.input is not None or self.rows is not None:
            rows = "" if self.rows is None else f"{format_value(self.rows)} rows"
            where = self.input or ""
            out.append(("input", f"{where} ({rows})" if where and rows else where or rows))
        if self.dependencies:
            out.append(("versions", ", ".join(f"{k} {v}" for k, v in self.dependencies.items())))
        return tuple(out)

    def text_lines(self, *, width: int = TEXT_WIDTH) -> list[str]:
        """The block ``summary()`` ends with: ``Provenance:`` and aligned ``name: value`` lines."""
        return [
            "Provenance:",
            *_field_lines(self.fields(), SIG_DIGITS, width, verbatim=("command", "input")),
        ]


#: The columns of :func:`interval_rows`: the first six of :data:`ESTIMATE_TABLE_COLUMNS`.
INTERVAL_COLUMNS: Final = ESTIMATE_TABLE_COLUMNS[:6]


def interval_rows(
    estimates: Mapping[str, Any], estimator: str, level: float
) -> list[dict[str, Any]]:
    """One row per policy of ``estimates`` (policy -> :class:`ope.Estimate`) with the columns
    :data:`INTERVAL_COLUMNS`: the value, its standard error and its normal interval at
    ``level`` (the table of estimates made beside an evaluation, e.g. DR with a given model)."""
    rows = []
    for name, est in estimates.items():  # a loop over policies
        ci = est.ci(level, "normal")
        rows.append(
            {
                "policy": name,
                "estimator": estimator,
                "value": est.value,
                "std_error": est.std_error,
                "ci_low": ci.low,
                "ci_high": ci.high,
            }
        )
    return rows


# --------------------------------------------------------------------------------------------
# the parts of a result and the two renderers
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ResultParts:
    """What a result shows: a title, labelled fields, an optional table, notes, provenance.

    Attributes
    ----------
    title : str
    fields : sequence of (label, value)
        ``label: value`` lines. A value is shown by :func:`format_value`; pass text to show it
        as it is (e.g. ``ope._format.format_interval(low, high, std_error)``).
    table : pandas.DataFrame or None
        Its columns as wide as their widest cell; numbers right-aligned.
    notes : sequence of str
        Notes on the whole result.
    row_notes : sequence of sequences of str, optional
        Per table row, the notes that apply to it. They are numbered together with ``notes``,
        each stated once (:func:`note_key`), and the row's last column ``notes`` references
        them (``[2]``, ``[1,3]``).
    precision : mapping of str to str, optional
        Table column -> the column of its standard errors; the columns of one error column
        share the decimals that show its smallest error to 2 significant digits. Default: when
        the table has a ``std_error`` column, it sets the precision of the columns of
        :data:`VALUE_COLUMNS` present. Pass ``{}`` to format every number on its own.
    provenance : Provenance or None
        Rendered last. A result need not set it: ``Result.summary()``, ``to_dict()`` and
        ``_repr_html_()`` add the result's own :attr:`Result.provenance`.
    """

    title: str
    fields: Sequence[tuple[str, Any]] = ()
    table: Any = None  # a pandas.DataFrame or None
    notes: Sequence[str] = field(default_factory=tuple)
    row_notes: Sequence[Sequence[str]] | None = None
    precision: Mapping[str, str] | None = None
    provenance: Provenance | None = None


def _field_lines(
    fields: Sequence[tuple[str, Any]], digits: int, width: int, *, verbatim: Sequence[str] = ()
) -> list[str]:
    """Aligned ``  label: value`` lines, each value wrapped under itself except those labelled
    in ``verbatim``, kept on one line (a command or a path the reader copies)."""
    if not fields:
        return []
    label_width = max(len(str(k)) for k, _ in fields) + 1
    lines = []
    for k, v in fields:
        label = f"  {str(k) + ':':<{label_width}} "
        if k in verbatim:
            lines.append(label + format_value(v, digits))
            continue
        lines += wrap_text(
            format_value(v, digits), width=width, initial=label, subsequent=" " * len(label)
        )
    return lines


def _precision(parts: ResultParts, columns: Sequence[str]) -> dict[str, str]:
    if parts.precision is None:
        if "std_error" not in columns:
            return {}
        return {c: "std_error" for c in VALUE_COLUMNS if c in columns}
    unknown = sorted({*parts.precision, *parts.precision.values()} - set(columns))
    if unknown:
        raise ParameterError(
            f"ResultParts.precision names columns the table does not have: "
            f"{', '.join(unknown)}; its columns are {', '.join(columns)}."
        )
    return dict(parts.precision)


def _table_cells(parts: ResultParts, digits: int) -> tuple[list[str], list[list[str]], list[bool]]:
    """The header, the rows of text cells and which columns are numbers (right-aligned)."""
    table = parts.table
    columns = [str(c) for c in table.columns]
    values = {c: table[c].tolist() for c in table.columns}
    by_name = dict(zip(columns, table.columns))
    precision = _precision(parts, columns)
    decimals: dict[str, int | None] = {}
    for se_column in set(precision.values()):
        shared = [c for c, s in precision.items() if s == se_column]
        magnitudes = [
            abs(float(v))
            for c in shared
            for v in values[by_name[c]]
            if is_number(v) and math.isfinite(float(v))
        ]
        decimals[se_column] = se_decimals(
            values[by_name[se_column]], scale=max(magnitudes) if magnitudes else None
        )
    cells, right = [], []
    for name, column in zip(columns, table.columns):
        col = values[column]
        d = decimals.get(precision.get(name, ""))
        if d is not None:
            cells.append(format_column(col, decimals=d))
        elif all(v is None or is_number(v) for v in col):
            cells.append(format_column(col, sig=digits))
        else:
            cells.append([format_value(v, digits) for v in col])
        right.append(any(is_number(v) for v in col) and all(v is None or is_number(v) for v in col))
    rows = [list(r) for r in zip(*cells)]
    return columns, rows, right


def _notes_and_refs(parts: ResultParts) -> tuple[tuple[str, ...], list[str]]:
    row_notes = parts.row_notes or ()
    n_rows = 0 if parts.table is None else len(parts.table)
    if parts.row_notes is not None and len(row_notes) != n_rows:
        raise ParameterError(
            f"ResultParts.row_notes has {len(row_notes)} entries for a table of {n_rows} rows; "
            "give one sequence of notes per row."
        )
    return number_notes(parts.notes, row_notes)


def _refs_header(columns: Sequence[str]) -> str:
    return "notes" if "notes" not in columns else "note refs"


def render_text(parts: ResultParts, *, digits: int = SIG_DIGITS, width: int = TEXT_WIDTH) -> str:
    """Plain text: the title, aligned ``name: value`` lines, the table, ``[i] note`` lines, and
    the provenance when given.

    Numbers follow :mod:`ope._format`: the table's value, std_error, ci_low and ci_high columns
    to 2 significant digits of its smallest standard error, other numbers to ``digits``
    significant digits; columns sized to their widest cell; text wrapped to ``width``; each
    note once, referenced from the rows of ``parts.row_notes``.

    Examples
    --------
    >>> import pandas as pd
    >>> parts = ResultParts(
    ...     title="Click rates",
    ...     fields=(("rows", 120000),),
    ...     table=pd.DataFrame({"policy": ["a_policy_with_a_long_name", "b"],
    ...                         "value": [0.0046031, 0.0048214],
    ...                         "std_error": [0.000121, 0.000118]}),
    ...     row_notes=[["weights are heavy"], ["weights are heavy", "few rows"]])
    >>> print(render_text(parts))
    Click rates
      rows: 120,000
    <BLANKLINE>
    policy                       value  std_error  notes
    -------------------------  -------  ---------  -----
    a_policy_with_a_long_name  0.00460    0.00012  [1]
    b                          0.00482    0.00012  [1,2]
    <BLANKLINE>
    Notes:
      [1] weights are heavy
      [2] few rows
    """
    notes, refs = _notes_and_refs(parts)
    lines = wrap_text(parts.title, width=width, subsequent="  ")
    lines += _field_lines(parts.fields, digits, width)
    if parts.table is not None and len(parts.table):
        header, rows, right = _table_cells(parts, digits)
        if any(refs):
            header = [*header, _refs_header(header)]
            rows = [[*row, ref] for row, ref in zip(rows, refs)]
            right = [*right, False]
        lines.append("")
        lines += format_table(header, rows, right=right)
    if notes:
        lines += ["", "Notes:"]
        for i, note in enumerate(notes, 1):
            label = f"  [{i}] "
            lines += wrap_text(note, width=width, initial=label, subsequent=" " * len(label))
    if parts.provenance is not None:
        lines += ["", *parts.provenance.text_lines(width=width)]
    return "\n".join(lines)


def render_html(
    parts: ResultParts, *, digits: int = SIG_DIGITS, css_class: str = "ope-result"
) -> str:
    """Escaped HTML of the same parts (no script, no external resource), with the same numbers
    as :func:`render_text`."""

    def esc(text: str) -> str:  # names from the data: control and bidi characters escaped
        return html.escape(safe_text(text))

    notes, refs = _notes_and_refs(parts)
    out = [f"<div class='{esc(css_class)}'><p><strong>{esc(parts.title)}</strong></p>"]
    if parts.fields:
        rows = "".join(
            f"<tr><th style='text-align:left'>{esc(str(k))}</th>"
            f"<td>{esc(format_value(v, digits))}</td></tr>"
            for k, v in parts.fields
        )
        out.append(f"<table>{rows}</table>")
    table = parts.table
    if table is not None and len(table):
        header, cells, right = _table_cells(parts, digits)
        if any(refs):
            header = [*header, _refs_header(header)]
            cells = [[*row, ref] for row, ref in zip(cells, refs)]
            right = [*right, False]
        head = "".join(f"<th>{esc(c)}</th>" for c in header)
        body = "".join(
            "<tr>"
            + "".join(
                f"<td style='text-align:right'>{esc(c)}</td>" if r else f"<td>{esc(c)}</td>"
                for c, r in zip(row, right)
            )
            + "</tr>"
            for row in cells
        )
        out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
    if notes:
        items = "".join(f"<li>{esc(note)}</li>" for note in notes)
        out.append(f"<ol class='ope-notes'>{items}</ol>")
    if parts.provenance is not None:
        rows = "".join(
            f"<tr><th style='text-align:left'>{esc(k)}</th><td>{esc(v)}</td></tr>"
            for k, v in parts.provenance.fields()
        )
        out.append(f"<table class='ope-provenance'><caption>Provenance</caption>{rows}</table>")
    out.append("</div>")
    return "".join(out)


# --------------------------------------------------------------------------------------------
# the base of every result
# --------------------------------------------------------------------------------------------
_F = TypeVar("_F", bound=Callable[..., Any])
_R = TypeVar("_R", bound="Result")


#: How deep the current thread is in a result's to_dict/summary/_repr_html_: only the outermost
#: call adds the provenance (a summary() that calls the base summary(), or a _parts() that calls
#: to_dict(), states it once, at the end).
_DEPTH: contextvars.ContextVar[int] = contextvars.ContextVar("ope_result_depth", default=0)


def _call_outermost(
    self: Result,
    method: Callable[..., Any],
    args: Any,
    kwargs: Any,
    add: Callable[[Result, Any], Any],
) -> Any:
    token = _DEPTH.set(_DEPTH.get() + 1)
    try:
        out = method(self, *args, **kwargs)
    finally:
        _DEPTH.reset(token)
    return add(self, out) if _DEPTH.get() == 0 else out


def _add_provenance_to_dict(self: Result, out: Any) -> Any:
    p = self.provenance
    if p is not None and isinstance(out, dict) and "provenance" not in out:
        out = {**out, "provenance": p.to_dict()}
    return out


def _add_provenance_to_text(self: Result, text: Any) -> Any:
    p = self.provenance
    if p is None or not isinstance(text, str):
        return text
    return text + "\n\n" + "\n".join(p.text_lines())


def _with_provenance(method: _F, add: Callable[[Result, Any], Any]) -> _F:
    """``method`` (a result's ``to_dict`` or ``summary``) adding the provenance with ``add``
    when it is the outermost such call; functools.wraps keeps the method's name, docstring and
    ``__module__``, so doctest finds its examples in the subclass's module."""
    call = _call_outermost

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        return call(self, method, args, kwargs, add)

    return wrapper  # type: ignore[return-value]


class Result:
    """Base of ope's result objects: ``summary()`` and ``_repr_html_()`` from :meth:`_parts`.

    Subclasses implement ``to_dict()`` and ``_parts()``; they may override ``summary()`` with a
    richer text layout, but never ``_repr_html_``.

    Provenance: every result may carry a :class:`Provenance` (:attr:`provenance`, None unless
    recorded). :meth:`with_provenance` returns a copy carrying one. Whatever the subclass, its
    ``to_dict()`` then holds it under the key ``"provenance"`` (added only to results that carry
    one; :meth:`Provenance.to_dict` has stable keys) and its ``summary()`` ends with its block
    (``Provenance:`` and ``name: value`` lines): this base class adds both to every subclass's
    ``to_dict`` and ``summary``, so a subclass's ``_parts`` does not set it.

    Examples
    --------
    >>> from ope.results import Estimate, Provenance
    >>> est = Estimate("ips", 0.5, 0.1, 0.3, 0.7, n=10, ess=8.0)
    >>> est.provenance is None, "provenance" in est.to_dict()
    (True, False)
    >>> rec = est.with_provenance(seed=7, options={"ci": "normal"}, ope_version="0.1.0")
    >>> rec.provenance.seed, rec.to_dict()["provenance"]["options"]
    (7, {'ci': 'normal'})
    >>> print(rec.summary())
    Estimate (ips)
      estimator:       ips
      policy:
      value:           0.50
      std_error:       0.10
      95% CI (normal): [0.30, 0.70]
      covers:          policy value
      n:               10
      ess:             8
    <BLANKLINE>
    Provenance:
      ope:     0.1.0
      seed:    7
      options: ci=normal
    """

    #: set by :meth:`with_provenance` (a dataclass subclass may declare it as a field)
    _provenance: Provenance | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, add in (
            ("to_dict", _add_provenance_to_dict),
            ("summary", _add_provenance_to_text),
        ):
            method = cls.__dict__.get(name)
            if isinstance(method, types.FunctionType):
                setattr(cls, name, _with_provenance(method, add))

    def to_dict(self) -> dict[str, Any]:  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    def _parts(self) -> ResultParts:  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    @property
    def provenance(self) -> Provenance | None:
        """What produced this result (ope's version, options, seed, ...), or None."""
        return self._provenance

    def with_provenance(self: _R, provenance: Provenance | None = None, /, **fields: Any) -> _R:
        """A copy of this result carrying ``provenance``, or one built from ``fields`` (the
        arguments of :class:`Provenance`), or ``provenance`` with ``fields`` replaced.

        The copy is shallow (no interval is recomputed); the original is unchanged.
        """
        if provenance is not None and not isinstance(provenance, Provenance):
            raise ParameterError(
                f"`provenance` must be an ope.results.Provenance; got {type(provenance).__name__}."
            )
        known = {f.name for f in dataclasses.fields(Provenance)}
        unknown = sorted(set(fields) - known)
        if unknown:
            hint = (
                " (`provenance` is positional: with_provenance(p))"
                if "provenance" in unknown
                else ""
            )
            raise ParameterError(
                f"with_provenance() got {', '.join(f'`{u}`' for u in unknown)}, not a field of "
                f"ope.results.Provenance{hint}; its fields are: {', '.join(sorted(known))}."
            )
        if fields:
            provenance = (
                Provenance(**fields)
                if provenance is None
                else dataclasses.replace(provenance, **fields)
            )
        new = copy.copy(self)
        object.__setattr__(new, "_provenance", provenance)
        return new

    def summary(self) -> str:
        """The result as plain text (title, fields, table, numbered notes, provenance)."""
        return render_text(self._parts())

    def _repr_html_(self) -> str:
        token = _DEPTH.set(_DEPTH.get() + 1)  # a _parts() calling to_dict() adds nothing
        try:
            parts = self._parts()
        finally:
            _DEPTH.reset(token)
        if parts.provenance is None and self.provenance is not None:
            parts = dataclasses.replace(parts, provenance=self.provenance)
        return render_html(parts)


Result.summary = _with_provenance(  # type: ignore[method-assign]
    Result.summary, _add_provenance_to_text
)
