"""The result contract: every result object of ope speaks one vocabulary and renders one way.

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
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

import numpy as np

from ope._format import (
    SIG_DIGITS,
    TEXT_WIDTH,
    Note,
    format_column,
    format_interval,
    format_table,
    format_value,
    is_number,
    note_key,
    number_notes,
    safe_text,
    se_decimals,
    unique_notes,
    wrap_text,
)
from ope._validation import (
    check_choice,
    check_confidence_level,
    check_positive_int,
    deprecated_weight_bound,
    resolve_seed,
)
from ope.exceptions import EstimationError, ParameterError
from ope.intervals._types import BottouInterval, ConfidenceInterval
from ope.intervals.asymptotic import normal_interval, t_interval
from ope.intervals.bootstrap import bootstrap_interval, default_n_resamples

__all__ = [
    "Result",
    "IntervalRequest",
    "Note",
    "Provenance",
    "ResultParts",
    "VALUE_COLUMNS",
    "format_value",
    "note_key",
    "render_html",
    "render_text",
    "unique_notes",
    "Estimate",
    "compare",
    "make_estimate",
    "Source",
    "RowSource",
    "CI_METHODS",
    "TARGETS",
    "DEFAULT_CI_METHOD",
    "DEFAULT_CONFIDENCE_LEVEL",
]

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
            out.append(
                ("versions", ", ".join(f"{k} {v}" for k, v in self.dependencies.items()))
            )
        return tuple(out)

    def text_lines(self, *, width: int = TEXT_WIDTH) -> list[str]:
        """The block ``summary()`` ends with: ``Provenance:`` and aligned ``name: value`` lines."""
        return ["Provenance:", *_field_lines(self.fields(), SIG_DIGITS, width)]


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


def _field_lines(fields: Sequence[tuple[str, Any]], digits: int, width: int) -> list[str]:
    """Aligned ``  label: value`` lines, each value wrapped under itself."""
    if not fields:
        return []
    label_width = max(len(str(k)) for k, _ in fields) + 1
    lines = []
    for k, v in fields:
        label = f"  {str(k) + ':':<{label_width}} "
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
            abs(float(v)) for c in shared for v in values[by_name[c]]
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
    self: Result, method: Callable[..., Any], args: Any, kwargs: Any,
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


def _dict_with_provenance(method: _F) -> _F:
    call, add = _call_outermost, _add_provenance_to_dict

    @functools.wraps(method)
    def to_dict(self: Any, *args: Any, **kwargs: Any) -> Any:
        return call(self, method, args, kwargs, add)

    # functools.wraps keeps the method's __module__ and docstring: doctest finds its examples
    return to_dict  # type: ignore[return-value]


def _text_with_provenance(method: _F) -> _F:
    call, add = _call_outermost, _add_provenance_to_text

    @functools.wraps(method)
    def summary(self: Any, *args: Any, **kwargs: Any) -> Any:
        return call(self, method, args, kwargs, add)

    return summary  # type: ignore[return-value]


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
        for name, wrap in (("to_dict", _dict_with_provenance), ("summary", _text_with_provenance)):
            method = cls.__dict__.get(name)
            if isinstance(method, types.FunctionType):
                setattr(cls, name, wrap(method))

    def to_dict(self) -> dict[str, Any]:  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    def _parts(self) -> ResultParts:  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    @property
    def provenance(self) -> Provenance | None:
        """What produced this result (ope's version, options, seed, ...), or None."""
        return self._provenance

    def with_provenance(
        self: _R, provenance: Provenance | None = None, /, **fields: Any
    ) -> _R:
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
            hint = (" (`provenance` is positional: with_provenance(p))"
                    if "provenance" in unknown else "")
            raise ParameterError(
                f"with_provenance() got {', '.join(f'`{u}`' for u in unknown)}, not a field of "
                f"ope.results.Provenance{hint}; its fields are: {', '.join(sorted(known))}."
            )
        if fields:
            provenance = (
                Provenance(**fields) if provenance is None
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


Result.summary = _text_with_provenance(Result.summary)  # type: ignore[method-assign]


#: Every interval method name known to :meth:`Estimate.ci`.
CI_METHODS: Final = (
    "normal",
    "t",
    "bootstrap",
    "hoeffding",
    "bernstein",
    "bottou",
    "empirical_likelihood",
    "betting",
)

#: The interval an estimate carries in ``ci_low``/``ci_high`` unless another is asked for.
DEFAULT_CI_METHOD: Final = "normal"
DEFAULT_CONFIDENCE_LEVEL: Final = 0.95

#: What an estimate's interval covers (``Estimate.target``): the candidate policy's value, or the
#: clipped value ``r_lo + E[min(w, R) (r - r_lo)]`` of a clipped IPS estimate whose clip binds.
TARGETS: Final = ("policy value", "clipped value")

_METHODS_WITHOUT_BOUNDS: Final = ("normal", "t", "bootstrap")


@dataclass(frozen=True)
class IntervalRequest:
    """What a :class:`Source` is asked for by ``Estimate.ci``: the interval ``method``, its
    ``confidence_level``, an a priori ``weight_bound`` on the importance weights (bounded
    methods of IPS/SNIPS and sequential IS/PDIS), and Bottou's ``outer`` method."""

    method: str
    confidence_level: float
    weight_bound: float | None = None
    outer: str | None = None

    def fields(self) -> tuple[str, float, float | None, str | None]:
        """``(method, confidence_level, weight_bound, outer)``."""
        return self.method, self.confidence_level, self.weight_bound, self.outer


class Source:
    """What an Estimate remembers about how it was computed (base: nothing row-level)."""

    #: interval methods beyond "normal" and "t" that this source can compute
    methods: tuple[str, ...] = ()
    #: True when the per-row data are available (bootstrap, influence, paired comparisons)
    has_rows: bool = False
    #: why rows are unavailable, for error messages
    rows_hint: str = "it was built without row-level data"
    #: the range the estimand lies in when known (the a priori ``reward_range``): normal, t and
    #: bootstrap intervals are intersected with it, as the bounded ones are
    value_range: tuple[float, float] | None = None
    #: True when the standard error treats a fitted reward model as fixed (DM): normal, t and
    #: bootstrap intervals would then ignore the model's error, so none is given (NaN)
    model_conditional: bool = False

    def target_of(self, method: str) -> str | None:
        """What ``method``'s interval covers (one of :data:`TARGETS`); None: not known here,
        the estimate's own ``target`` stands."""
        return None

    def special_interval(self, request: IntervalRequest) -> ConfidenceInterval | BottouInterval:
        """The interval ``request.method`` (beyond normal, t and bootstrap)."""
        raise EstimationError(f"interval method {request.method!r} is not available here.")


class RowSource(Source, ABC):
    """A source backed by rows: the statistic is ``statistic(column means of components)``."""

    has_rows = True
    reward: np.ndarray
    n: int

    @abstractmethod
    def components(self) -> np.ndarray:
        """Per-row components, float64 of shape (n, k)."""

    @abstractmethod
    def statistic(self, means: np.ndarray) -> np.ndarray:
        """The estimate as a function of column means (..., k) -> (...), vectorized."""

    @abstractmethod
    def gradient(self, means: np.ndarray) -> np.ndarray:
        """Gradient of :meth:`statistic` at the column means (k,) -> (k,)."""

    def n_components(self) -> int:
        """Number of per-row components k (without forming them, where the source knows)."""
        return int(self.components().shape[1])

    def influence(self) -> np.ndarray:
        """Per-row linearized (influence) terms; their mean is zero."""
        a = self.components()
        m = a.mean(axis=0)
        return (a - m) @ self.gradient(m)


class _PairedSource(RowSource):
    """The difference of two row-backed estimates computed on the same rows."""

    methods = ("bootstrap",)

    def __init__(self, a: RowSource, b: RowSource) -> None:
        self.a, self.b = a, b
        self.reward = a.reward
        self.n = a.n
        self._k = a.n_components()
        self.model_conditional = a.model_conditional or b.model_conditional

    def target_of(self, method: str) -> str | None:
        ta = self.a.target_of(method) or TARGETS[0]
        tb = self.b.target_of(method) or TARGETS[0]
        return ta if ta == tb else f"{ta} - {tb}"

    def n_components(self) -> int:
        return self._k + self.b.n_components()

    def components(self) -> np.ndarray:
        return np.hstack([self.a.components(), self.b.components()])

    def statistic(self, means: np.ndarray) -> np.ndarray:
        k = self._k
        return self.a.statistic(means[..., :k]) - self.b.statistic(means[..., k:])

    def gradient(self, means: np.ndarray) -> np.ndarray:
        k = self._k
        return np.concatenate([self.a.gradient(means[:k]), -self.b.gradient(means[k:])])


@dataclass(frozen=True, eq=False, repr=False)
class Estimate(Result):
    """The estimated value of one policy by one estimator, with its uncertainty.

    Attributes
    ----------
    estimator : str
        Registry name of the estimator (``"ips"``, ``"snips"``, ...; ``"logging"`` for the
        on-policy mean; ``"<a> - <b>"`` for a paired difference).
    value : float
        The point estimate.
    std_error : float
        Standard error: sample standard deviation of the per-row influence terms over
        :math:`\\sqrt n`.
    ci_low, ci_high : float
        The interval given by ``ci_method`` at ``confidence_level`` (normal at 0.95 unless
        another was asked for with :meth:`with_ci`).
    confidence_level : float
        Nominal coverage of ``[ci_low, ci_high]``.
    ci_method : str
        Method of ``[ci_low, ci_high]``.
    n : int
        Rows used.
    ess : float
        Kish effective sample size of the weights used, :math:`(\\sum w)^2/\\sum w^2`
        (``n`` for estimators that weight every row equally, such as DM).
    notes : tuple of str
        Warnings as text (low ESS, mean weight far from 1, ...), also emitted as warnings.
    policy : str or None
        Name of the candidate policy, when known.
    target : {"policy value", "clipped value"}
        What ``[ci_low, ci_high]`` covers (and ``value`` estimates). ``"policy value"`` for
        every estimator except clipped IPS whose clip binds (some weight exceeds
        ``max_weight``): its value and its normal, t, bootstrap, hoeffding and bernstein
        intervals cover the clipped value ``r_lo + E[min(w, R) (r - r_lo)]`` (below the policy's
        value for rewards above ``r_lo``), and only ``ci(method="bottou")`` covers the policy's
        value (``with_ci(ci="bottou")`` sets ``target="policy value"``). Switch-DR and DRos
        are biased estimators of the policy value, not estimators of another named quantity, so
        their target is the policy value. DM carries no interval (NaN): see :class:`ope.DM`.
    provenance : Provenance or None
        What produced it, when recorded (:class:`Result`): :meth:`with_ci` with
        ``method="bootstrap"`` records the seed of its resamples (the one given, or the one drawn
        when ``rng=None``) and the interval's options, so ``est.with_ci(level, "bootstrap",
        rng=res.provenance.seed, n_resamples=...)`` gives the same interval again.

    Examples
    --------
    >>> import numpy as np
    >>> import ope.estimators as oe
    >>> res = oe.IPS().estimate(reward=np.array([1.0, 0.0, 1.0, 1.0]),
    ...                         logging_propensity=np.full(4, 0.5),
    ...                         target_propensity=np.array([1.0, 0.0, 0.5, 1.0]))
    >>> res.value, res.n
    (1.25, 4)
    >>> sorted(res.to_dict())[:4]
    ['ci_high', 'ci_low', 'ci_method', 'confidence_level']
    """

    estimator: str
    value: float
    std_error: float
    ci_low: float
    ci_high: float
    n: int
    ess: float
    confidence_level: float = DEFAULT_CONFIDENCE_LEVEL
    ci_method: str = DEFAULT_CI_METHOD
    notes: tuple[str, ...] = ()
    policy: str | None = None
    target: str = TARGETS[0]
    _source: Source | None = field(default=None, compare=False)
    _provenance: Provenance | None = field(default=None, compare=False)

    # ---------------------------------------------------------------- intervals
    def ci(
        self,
        confidence_level: float = DEFAULT_CONFIDENCE_LEVEL,
        method: str = DEFAULT_CI_METHOD,
        *,
        n_resamples: int | None = None,
        bootstrap_method: str | None = None,
        rng: int | np.random.Generator | None = None,
        weight_bound: float | None = None,
        outer: str | None = None,
        max_weight: float | None = None,
    ) -> ConfidenceInterval | BottouInterval:
        """Confidence interval for the value.

        Parameters
        ----------
        confidence_level : float, default 0.95
            Nominal two-sided coverage, in (0, 1).
        method : str, default "normal"
            One of :data:`CI_METHODS`. ``normal`` and ``t`` apply to every estimate;
            ``bootstrap`` to every estimate computed from rows; ``hoeffding`` and
            ``bernstein`` to IPS (with an a priori ``weight_bound``), clipped IPS (its own
            clip level ``max_weight``) and the logging value; ``bottou`` to clipped IPS;
            ``empirical_likelihood`` to IPS and SNIPS (with ``weight_bound``); ``betting`` to
            IPS, SNIPS and the logging value. All bounded methods need ``reward_range``.
        n_resamples : int, optional
            Bootstrap only: number of resamples (default 2000).
        bootstrap_method : {"percentile", "bca"}, optional
            Bootstrap only (default "percentile").
        rng : int, numpy.random.Generator or None
            Bootstrap only: seed or generator.
        weight_bound : float, optional
            A priori bound on the importance weights of an IPS or SNIPS estimate, for
            ``hoeffding``, ``bernstein`` and ``empirical_likelihood``. It must hold for every
            context and action; the largest observed weight is not a bound.
        outer : {"bernstein", "normal"}, optional
            ``bottou`` only: how the sampling (outer) margin is computed (default "bernstein").
        max_weight : float, optional
            Deprecated spelling of ``weight_bound`` (emits a DeprecationWarning).

        Returns
        -------
        ConfidenceInterval or BottouInterval
            ``BottouInterval`` (with outer and inner parts) for ``method="bottou"``. Normal, t
            and bootstrap intervals are intersected with ``reward_range`` when the estimate was
            given one (the value lies in it), as the bounded intervals are. For DM (a reward
            model's prediction whose error the standard error ignores) normal, t and bootstrap
            give ``(nan, nan)``. Which quantity the interval covers: :attr:`target` and
            :meth:`target_of`.

        Raises
        ------
        ope.ParameterError
            Unknown method, or an option that the method does not use.
        ope.EstimationError
            The method does not apply to this estimator (the message lists those that do).
        ope.MissingBoundsError
            The method needs ``reward_range`` or ``weight_bound`` and it was not given.

        Warns
        -----
        ope.OverlapWarning
            A bounded interval (hoeffding, bernstein, bottou, betting) came out empty or
            entirely outside the range the value can take: the data are inconsistent with
            importance weights of mean one. The interval is then reduced to a point (the nearer
            end of the range, or the midpoint of crossed betting bounds), never inverted.

        Notes
        -----
        What each method covers: every method covers the policy's value, except for clipped
        IPS whose clip binds, where normal, t, bootstrap, hoeffding and bernstein cover the
        clipped value and bottou the policy's value.

        normal: :math:`\\hat V\\pm z_{(1+\\gamma)/2}\\,\\mathrm{se}`; t: the same with
        :math:`t_{n-1}` quantiles; bootstrap: see :func:`ope.intervals.bootstrap.bootstrap_interval`
        (self-normalized estimators are renormalized inside each resample).

        References
        ----------
        .. [1] B. Efron and R. J. Tibshirani, *An Introduction to the Bootstrap*, 1993.

        Examples
        --------
        >>> import numpy as np
        >>> import ope.estimators as oe
        >>> rng = np.random.default_rng(0)
        >>> r = rng.binomial(1, 0.3, size=500).astype(float)
        >>> res = oe.SNIPS().estimate(reward=r, logging_propensity=np.full(500, 0.5),
        ...                           target_propensity=rng.uniform(size=500))
        >>> lo, hi = res.ci(0.9, method="bootstrap", rng=0)
        >>> bool(lo < res.value < hi)
        True
        """
        bound_name = "weight_bound" if max_weight is None else "max_weight"  # as given
        weight_bound = deprecated_weight_bound(weight_bound, max_weight, where="Estimate.ci/with_ci")
        level = check_confidence_level(confidence_level)
        if method not in CI_METHODS:
            raise ParameterError(
                f"unknown interval method {method!r}; choose one of {', '.join(CI_METHODS)}."
            )
        if method != "bootstrap":
            for opt, val in (
                ("n_resamples", n_resamples),
                ("bootstrap_method", bootstrap_method),
                ("rng", rng),
            ):
                if val is not None:
                    raise ParameterError(
                        f"`{opt}` applies only to method='bootstrap'; got {method!r}."
                    )
        if outer is not None and method != "bottou":
            raise ParameterError(f"`outer` applies only to method='bottou'; got {method!r}.")
        if weight_bound is not None and method in ("normal", "t", "bootstrap"):
            raise ParameterError(
                f"`{bound_name}` is an a priori weight bound for the bounded methods (hoeffding, "
                f"bernstein, empirical_likelihood); method {method!r} does not use it."
            )
        src = self._source
        if method in _METHODS_WITHOUT_BOUNDS and src is not None and src.model_conditional:
            return ConfidenceInterval(math.nan, math.nan)
        if method == "normal":
            return _in_range(
                normal_interval(self.value, self.std_error, confidence_level=level), src
            )
        if method == "t":
            return _in_range(
                t_interval(self.value, self.std_error, self.n, confidence_level=level), src
            )
        available = ("normal", "t") + (src.methods if src is not None else ())
        if src is None or method not in src.methods:
            why = ""
            if src is not None and method == "bootstrap" and not src.has_rows:
                why = f" (this estimate has no rows: {src.rows_hint})"
            raise EstimationError(
                f"interval method {method!r} does not apply to the {self.estimator!r} "
                f"estimate{why}; available methods: {', '.join(available)}."
            )
        if method == "bootstrap":
            assert isinstance(src, RowSource)
            return _in_range(
                bootstrap_interval(
                    src.components(),
                    src.statistic,
                    confidence_level=level,
                    n_resamples=n_resamples,  # None: default_n_resamples(level)
                    bootstrap_method=(
                        "percentile" if bootstrap_method is None
                        else bootstrap_method  # type: ignore[arg-type]  # checked by the callee
                    ),
                    rng=rng,
                ),
                src,
            )
        return src.special_interval(IntervalRequest(method, level, weight_bound, outer))

    def with_ci(
        self,
        confidence_level: float = DEFAULT_CONFIDENCE_LEVEL,
        ci: str = DEFAULT_CI_METHOD,
        *,
        n_resamples: int | None = None,
        bootstrap_method: str | None = None,
        rng: int | np.random.Generator | None = None,
        weight_bound: float | None = None,
        outer: str | None = None,
        max_weight: float | None = None,
    ) -> Estimate:
        """A copy whose ``ci_low``/``ci_high`` come from :meth:`ci` with these arguments.

        ``ci`` is the interval method (``method`` of :meth:`ci`, one of :data:`CI_METHODS`).
        ``max_weight`` is the deprecated spelling of ``weight_bound``, as in :meth:`ci`.

        A bootstrap interval is reproducible: the copy's :attr:`provenance` records the seed of
        the resamples (``rng`` when an int; drawn and recorded when ``rng=None``; None when a
        Generator is given) as ``seed``, and the interval's settings as options
        (``ci_method``, ``confidence_level``, ``n_resamples``, ``bootstrap_method``), keeping
        any other option recorded before.

        Examples
        --------
        >>> import numpy as np
        >>> import ope.estimators as oe
        >>> res = oe.IPS().estimate(reward=np.array([1.0, 0.0, 1.0, 1.0]),
        ...                         logging_propensity=np.full(4, 0.5),
        ...                         target_propensity=np.array([1.0, 0.0, 0.5, 1.0]))
        >>> res.with_ci(0.9, "t").ci_method
        't'
        >>> boot = res.with_ci(0.9, "bootstrap", n_resamples=500)   # rng=None: a seed is drawn
        >>> again = res.with_ci(0.9, "bootstrap", n_resamples=500, rng=boot.provenance.seed)
        >>> (again.ci_low, again.ci_high) == (boot.ci_low, boot.ci_high)
        True
        """
        method = check_choice(ci, "ci", CI_METHODS)
        provenance = self._provenance
        if method == "bootstrap":
            seed, rng = resolve_seed(rng)
            provenance = (provenance or Provenance()).with_options(
                ci_method=method,
                confidence_level=float(confidence_level),
                n_resamples=(default_n_resamples(float(confidence_level)) if n_resamples is None
                             else n_resamples),
                bootstrap_method="percentile" if bootstrap_method is None else bootstrap_method,
            )
            provenance = dataclasses.replace(provenance, seed=seed)
        interval = self.ci(
            confidence_level,
            method,
            n_resamples=n_resamples,
            bootstrap_method=bootstrap_method,
            rng=rng,
            weight_bound=weight_bound,
            max_weight=max_weight,  # ci warns of the deprecated spelling and names it
            outer=outer,
        )
        return dataclasses.replace(
            self,
            ci_low=float(interval.low),
            ci_high=float(interval.high),
            confidence_level=float(confidence_level),
            ci_method=method,
            target=self.target_of(method),
            _provenance=provenance,
        )

    def target_of(self, ci: str) -> str:
        """What ``ci(method=ci)`` covers: ``"policy value"`` or ``"clipped value"``.

        Examples
        --------
        >>> import numpy as np
        >>> import ope.estimators as oe
        >>> res = oe.ClippedIPS(max_weight=2.0).estimate(
        ...     reward=np.array([1.0, 1.0, 0.0]), logging_propensity=np.array([0.25, 0.5, 0.1]),
        ...     target_propensity=np.array([1.0, 0.5, 1.0]))
        >>> res.target, res.target_of("bernstein"), res.target_of("bottou")
        ('clipped value', 'clipped value', 'policy value')
        """
        method = check_choice(ci, "ci", CI_METHODS)
        src = self._source
        known = None if src is None else src.target_of(method)
        return self.target if known is None else known

    @property
    def source(self) -> Source | None:
        """What the estimate's intervals are computed from: its rows (a :class:`RowSource`) or
        merged statistics (a :class:`Source` without rows); None when built without data."""
        return self._source

    def with_source(self, source: Source) -> Estimate:
        """The same estimate backed by another description of the same data (e.g. streamed
        statistics given their rows back, ``ope.MomentStats.with_rows``)."""
        if not isinstance(source, Source):
            raise ParameterError(
                "`source` must describe the estimate's data (an ope.results.Source, such as "
                f"another estimate's .source); got {type(source).__name__}."
            )
        return dataclasses.replace(self, _source=source)

    def influence(self) -> np.ndarray:
        """Per-row influence (linearized) terms ``psi_i``; ``std_error = sd(psi) / sqrt(n)``.

        Raises
        ------
        ope.EstimationError
            The estimate was computed from summary statistics, not rows.
        """
        src = self._source
        if not isinstance(src, RowSource):
            hint = src.rows_hint if src is not None else "it was built without data"
            raise EstimationError(f"per-row influence terms need the rows; {hint}.")
        return src.influence()

    # ---------------------------------------------------------------- rendering
    def to_dict(self) -> dict[str, Any]:
        """Plain dict with the stable field names (JSON-serializable).

        Examples
        --------
        >>> from ope.results import Estimate
        >>> Estimate("ips", 0.5, 0.1, 0.3, 0.7, n=10, ess=8.0).to_dict()["value"]
        0.5
        """
        return {
            "estimator": self.estimator,
            "policy": self.policy,
            "value": float(self.value),
            "std_error": float(self.std_error),
            "ci_low": float(self.ci_low),
            "ci_high": float(self.ci_high),
            "confidence_level": float(self.confidence_level),
            "ci_method": self.ci_method,
            "n": int(self.n),
            "ess": float(self.ess),
            "target": self.target,
            "notes": list(self.notes),
        }

    def __repr__(self) -> str:
        who = f"{self.estimator!r}" + (f", policy={self.policy!r}" if self.policy else "")
        notes = f", notes={len(self.notes)}" if self.notes else ""
        return (
            f"Estimate({who}, value={format_value(self.value)}, "
            f"std_error={format_value(self.std_error)}, "
            f"ci=[{format_value(self.ci_low)}, {format_value(self.ci_high)}] "
            f"({self.ci_method}, {self.confidence_level:.0%}), n={self.n}, "
            f"ess={format_value(self.ess)}{notes})"
        )

    def _parts(self) -> ResultParts:
        # the value, its error and its interval at one precision: 2 digits of the error
        numbers_ = [self.value, self.std_error, self.ci_low, self.ci_high]
        finite = [abs(v) for v in numbers_ if math.isfinite(v)]
        decimals = se_decimals([self.std_error], scale=max(finite) if finite else None)
        value, std_error, _, _ = format_column(numbers_, decimals=decimals)
        ci = format_interval(self.ci_low, self.ci_high, decimals=decimals)
        return ResultParts(
            title=f"Estimate ({self.estimator})",
            fields=(
                ("estimator", self.estimator),
                ("policy", self.policy or ""),
                ("value", value),
                ("std_error", std_error),
                (f"{self.confidence_level:.0%} CI ({self.ci_method})", ci),
                ("covers", self.target),
                ("n", self.n),
                ("ess", self.ess),
            ),
            notes=self.notes,
        )


def make_estimate(
    *,
    estimator: str,
    value: float,
    std_error: float,
    n: int,
    ess: float,
    notes: tuple[str, ...] = (),
    policy: str | None = None,
    source: Source | None = None,
    target: str | None = None,
    provenance: Provenance | None = None,
) -> Estimate:
    """Build an Estimate carrying the default (normal, 0.95) interval (and ``provenance``, what
    produced it, when the caller records one).

    The interval is intersected with ``source.value_range`` and is NaN when the source is
    model-conditional (DM). ``target`` (one of :data:`TARGETS`) defaults to the source's target
    for the normal interval (the policy value without a source).

    Examples
    --------
    >>> from ope.results import make_estimate
    >>> make_estimate(estimator="is", value=0.4, std_error=0.1, n=100, ess=50.0,
    ...               target="clipped value").target
    'clipped value'
    """
    if target is not None and target not in TARGETS:
        raise ParameterError(f"`target` must be one of {', '.join(TARGETS)}; got {target!r}.")
    if (
        math.isfinite(value)
        and math.isfinite(std_error)
        and not (source is not None and source.model_conditional)
    ):
        low, high = _in_range(
            normal_interval(value, std_error, confidence_level=DEFAULT_CONFIDENCE_LEVEL), source
        )
    else:
        low = high = float("nan")
    return Estimate(
        estimator=estimator,
        value=float(value),
        std_error=float(std_error),
        ci_low=float(low),
        ci_high=float(high),
        n=int(n),
        ess=float(ess),
        notes=tuple(notes),
        policy=policy,
        target=(
            target
            if target is not None
            else (None if source is None else source.target_of(DEFAULT_CI_METHOD)) or TARGETS[0]
        ),
        _source=source,
        _provenance=provenance,
    )


def _in_range(iv: ConfidenceInterval, source: Source | None) -> ConfidenceInterval:
    """``iv`` intersected with the range the estimand lies in (``source.value_range``).

    An interval entirely outside the range (an event of probability at most 1 - level when the
    interval is valid, since it then misses the value) becomes the nearer end point, never an
    inverted interval.
    """
    vr = None if source is None else source.value_range
    if vr is None or not (math.isfinite(iv.low) and math.isfinite(iv.high)):
        return iv
    low, high = max(iv.low, vr[0]), min(iv.high, vr[1])
    if low > high:
        low = high = vr[1] if iv.low > vr[1] else vr[0]
    return ConfidenceInterval(float(low), float(high))


def compare(
    a: Estimate,
    b: Estimate,
    *,
    confidence_level: float = DEFAULT_CONFIDENCE_LEVEL,
    ci: str = DEFAULT_CI_METHOD,
    n_resamples: int | None = None,
    bootstrap_method: str | None = None,
    rng: int | np.random.Generator | None = None,
) -> Estimate:
    """Paired comparison: an Estimate of ``a.value - b.value`` on the same logged rows.

    Parameters
    ----------
    a, b : Estimate
        Two estimates computed on the same rows (same reward array, same ``n``): e.g. two
        candidates, or a candidate and :func:`ope.estimators.logging_value`.
    confidence_level : float, default 0.95
        Nominal coverage of the interval stored on the result.
    ci : {"normal", "t", "bootstrap"}, default "normal"
        Interval method for the difference.
    n_resamples, bootstrap_method, rng
        Bootstrap options (see :meth:`Estimate.ci`).

    Returns
    -------
    Estimate
        ``estimator = "<a.estimator> - <b.estimator>"``; its ``ci(...)`` accepts normal, t and
        bootstrap (resampling rows jointly for both estimates).

    Raises
    ------
    ope.EstimationError
        Either estimate has no rows (e.g. built from streamed statistics), or the two were not
        computed on the same rows.

    Notes
    -----
    With per-row influence terms :math:`\\psi^a_i,\\psi^b_i`,

    .. math:: \\widehat{\\mathrm{se}}(\\hat V_a-\\hat V_b)
              = \\mathrm{sd}(\\psi^a-\\psi^b)/\\sqrt n
              = \\sqrt{(s_a^2+s_b^2-2 s_{ab})/n},

    smaller than the unpaired :math:`\\sqrt{(s_a^2+s_b^2)/n}` whenever the two estimates are
    positively correlated (they share the rows). The bootstrap draws one set of resample
    indices for both estimates.

    References
    ----------
    .. [1] M. Dudik, D. Erhan, J. Langford and L. Li, "Doubly robust policy evaluation and
       optimization", Statistical Science 29(4), 2014 (evaluation by influence terms).

    Examples
    --------
    >>> import numpy as np
    >>> import ope.estimators as oe
    >>> from ope.results import compare
    >>> rng = np.random.default_rng(0)
    >>> n = 2000
    >>> p = np.full(n, 0.5); r = rng.binomial(1, 0.5, size=n).astype(float)
    >>> a = oe.SNIPS().estimate(reward=r, logging_propensity=p, target_propensity=p)
    >>> b = oe.logging_value(r)
    >>> d = compare(a, b)        # on-policy SNIPS equals the logging value row by row
    >>> abs(d.value) < 1e-12, d.std_error < 1e-12
    (True, True)
    """
    ci = check_choice(ci, "ci", CI_METHODS)
    for name, est in (("a", a), ("b", b)):
        if not isinstance(est, Estimate):
            raise ParameterError(
                f"`{name}` must be an ope Estimate; got {type(est).__name__}."
            )
        if not isinstance(est._source, RowSource):
            hint = est._source.rows_hint if est._source is not None else "it has no data"
            raise EstimationError(
                f"paired comparison needs per-row data, but estimate `{name}` "
                f"({est.estimator!r}) has none: {hint}. Compute both estimates from arrays."
            )
    sa, sb = a._source, b._source
    assert isinstance(sa, RowSource) and isinstance(sb, RowSource)
    if sa.n != sb.n:
        raise EstimationError(
            f"paired comparison needs both estimates on the same rows; `a` has n={sa.n} and "
            f"`b` has n={sb.n}."
        )
    if sa.reward is not sb.reward and not np.array_equal(sa.reward, sb.reward):
        raise EstimationError(
            "paired comparison needs both estimates on the same rows, but their reward arrays "
            "differ. Estimate both candidates from the same logs (same row order)."
        )
    source = _PairedSource(sa, sb)
    psi = source.influence()
    n = source.n
    se = float(np.std(psi, ddof=1) / math.sqrt(n))
    value = float(a.value - b.value)
    notes = _paired_notes(a, b)
    policy = f"{a.policy} - {b.policy}" if a.policy and b.policy else None
    diff = make_estimate(
        estimator=f"{a.estimator} - {b.estimator}",
        value=value,
        std_error=se,
        n=n,
        ess=float(min(a.ess, b.ess)),
        notes=notes,
        policy=policy,
        source=source,
    )
    if ci == DEFAULT_CI_METHOD and confidence_level == DEFAULT_CONFIDENCE_LEVEL:
        return diff
    return diff.with_ci(
        confidence_level,
        ci,
        n_resamples=n_resamples,
        bootstrap_method=bootstrap_method,
        rng=rng,
    )


def _label(est: Estimate) -> str:
    return f"{est.estimator} ({est.policy})" if est.policy else est.estimator


def _paired_notes(a: Estimate, b: Estimate) -> tuple[str, ...]:
    """The notes of a paired difference: each note of ``a`` and ``b`` once, saying which of
    the two it concerns (``"ips (greedy) and logging: ..."`` when both carry it)."""
    la, lb = _label(a), _label(b)
    if la == lb:
        la, lb = "a", "b"
    keys_b = {note_key(x) for x in b.notes}
    keys_a = {note_key(x) for x in a.notes}
    out: list[str] = []
    for who, notes, other in ((la, a.notes, keys_b), (lb, b.notes, keys_a)):
        for x in unique_notes(notes):
            if who == lb and note_key(x) in keys_a:
                continue  # stated with a's
            prefix = f"{la} and {lb}" if note_key(x) in other else who
            out.append(
                Note(f"{prefix}: {x}", rule=getattr(x, "rule", None),
                     subject=getattr(x, "subject", None))
                if getattr(x, "rule", None) is not None
                else f"{prefix}: {x}"
            )
    return tuple(out)
