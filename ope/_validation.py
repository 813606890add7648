"""One checker per glossary term: every entry point validates arguments and arrays here.

Arguments (the call) and data (the rows) fail differently:

- a malformed **argument** (``confidence_level=1.5``, ``max_weight="10"``, ``reward_range="01"``,
  ``rng=3.5``) raises :class:`ope.ParameterError`, which the command line maps to exit code 2;
- a missing **a priori bound** that a method needs raises :class:`ope.MissingBoundsError`;
- **rows** that break a rule (a propensity of 0, a reward outside ``reward_range``, a NaN) raise
  :class:`ope.ValidationError`, with the count and the first offending row.

The glossary (docs/design.md): ``max_weight`` is only ever the clip level of a clipped estimator;
``weight_bound`` is an a priori bound on the importance weights given to a bounded interval;
``reward_range`` is the a priori range of the rewards; ``confidence_level`` (never ``alpha``);
``rng`` for every random choice.

This module is private: its names are imported by ope's modules, and re-exported nowhere.
"""

from __future__ import annotations

import copy
import decimal
import difflib
import inspect
import math
import numbers
import os
import re
import sys
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from ope.exceptions import (
    MissingBoundsError,
    OPEError,
    ParameterError,
    SchemaError,
    ValidationError,
)

__all__ = [
    "MAX_FINITE_WEIGHT",
    "check_forwarded",
    "check_weights_representable",
    "FIX_PROPENSITY",
    "MIN_PROPENSITY",
    "first_rows",
    "RowOrigin",
    "chunks",
    "value_range",
    "as_float_array",
    "check_finite",
    "check_logging_propensity",
    "check_target_propensity",
    "validated_pair",
    "describe",
    "show_value",
    "parameter_error",
    "check_real",
    "check_positive_real",
    "check_positive_int",
    "check_name",
    "check_chosen",
    "check_model_columns",
    "MAX_ARRAY_ELEMENTS",
    "check_array_size",
    "check_choice",
    "check_names",
    "check_flag",
    "check_mapping",
    "check_confidence_level",
    "check_max_weight",
    "check_weight_bound",
    "deprecated_weight_bound",
    "check_reward_range",
    "finite_pair",
    "check_value_bounds",
    "power_of_two_scale",
    "FLOAT64_MAX",
    "require_reward_range",
    "check_rewards_in_range",
    "check_no_overflow",
    "check_label_kinds",
    "repeated_names",
    "check_positions",
    "check_distribution_rows",
    "check_rng",
    "resolve_seed",
    "user_stacklevel",
]

#: Largest importance weight accepted. Weights up to 1e150 have squares up to 1e300, so sums of
#: up to 1e8 squared weights stay finite in float64; larger ones would turn standard errors and
#: effective sample sizes into inf/NaN. Only logging propensities below 1 / 1e150 can produce
#: them (target propensities are at most 1), so the check costs one min over the propensities.
MAX_FINITE_WEIGHT: Final = 1e150

#: Smallest logging propensity a read accepts, ``1 / MAX_FINITE_WEIGHT``: below it a candidate
#: that takes the logged action gives a weight whose square overflows, and no logger acts on
#: such a probability. Logs are checked against it when they are read (rule
#: ``propensity_out_of_range``), so that ``on_invalid='drop'`` drops and counts such rows.
MIN_PROPENSITY: Final = 1.0 / MAX_FINITE_WEIGHT

#: Entries per block of the blockwise min/max validation: 2**19 float64 entries are 4 MB, so a
#: block read for its minimum is still in the L2/L3 cache when its maximum is taken.
_VALIDATION_BLOCK_ELEMENTS: Final = 1 << 19

FIX_PROPENSITY: Final = (
    "Fix the logger, or read the logs with ope.read_logs(..., on_invalid='drop') to drop and "
    "count such rows."
)

_PACKAGE_DIR: Final = os.path.dirname(os.path.abspath(__file__))

#: The largest finite float64 (~1.8e308): a range wider than this has no float64 width.
FLOAT64_MAX: Final = float(np.finfo(np.float64).max)

#: A received value longer than this is cut in messages (a 10,000-element list is not echoed).
_MAX_SHOWN_CHARS: Final = 80

#: The most elements of one array that ope builds from counts the user gives (sizes of a
#: simulator, rows to draw): 2**27, 1 GiB of float64. A larger request (``n_contexts=10**30``,
#: ``n=2**40``) is refused before anything is allocated, naming the counts, instead of failing
#: inside numpy ("Maximum allowed dimension exceeded", an OverflowError, a MemoryError) or
#: exhausting the machine's memory.
MAX_ARRAY_ELEMENTS: Final = 1 << 27


# --------------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------------
def first_rows(bad: np.ndarray) -> tuple[int, int]:
    """Number of True rows in a (n,) or (n, P) mask and the first offending row (-1: none)."""
    rows = bad if bad.ndim == 1 else bad.reshape(bad.shape[0], -1).any(axis=1)
    idx = np.flatnonzero(rows)
    return int(idx.size), int(idx[0]) if idx.size else -1


#: A row number in a message: digits, or digits grouped by thousands (``1,500``).
_ROW_NUMBER: Final = r"(?:\d{1,3}(?:,\d{3})+|\d+)"

#: "row 7", "rows 0, 4, 9" and "rows 0, 4, 9, 12, 15, ..." in a message: the row numbers that
#: :func:`first_rows` (and the messages built on it) give, counted from a batch's first row.
_ROWS_IN_MESSAGE: Final = re.compile(
    rf"\b(?P<word>rows?) (?P<numbers>{_ROW_NUMBER}(?:, {_ROW_NUMBER})*)(?P<more>, \.\.\.)?"
)

#: Tables besides the logs whose rows a batch's messages may number (an embedding's item table,
#: a policy table): their row numbers are not the batch's, and are left as they are.
_OTHER_TABLES: Final = ("item table", "policy table")

#: A quoted value in a message, as ``repr`` shows names and values (``'row 2'``, ``"it's"``): a
#: quote that no letter or digit precedes, to the same quote that none follows (an apostrophe
#: inside a word, as in "the candidate's", opens nothing). Its text is never relabelled.
_QUOTED: Final = re.compile(
    r"(?<![\w])'(?:[^'\\]|\\.)*'(?![\w])|(?<![\w])\"(?:[^\"\\]|\\.)*\"(?![\w])"
)


@dataclass(frozen=True, eq=False)
class RowOrigin:
    """Where the rows of one batch come from (a Dask partition, a batch of a lazy scan, a
    block of a Spark partition), so that an error about "row k" of the batch names the row of
    the source instead.

    The checks of a batch number its rows from 0, as :func:`first_rows` gives them;
    :meth:`located` turns each such number into the row's number in the whole source, or,
    when that is not known, says explicitly what the number counts ("row 7 of Spark
    partition 3").

    Attributes
    ----------
    where : str
        The batch as the message names it after the rows, e.g. ``"in partition 3 of logs/:
        logs/b.parquet, row groups [1, 2], source rows 3,000 to 4,499"``.
    offset : int or None
        Number of the batch's first row as read (before invalid rows were dropped): in the
        whole source, or in ``within``. None when it is not known; the numbers then stay as
        they are.
    kept : numpy.ndarray of bool, optional
        Over the batch's rows as read, the rows the checked batch holds (the others were
        dropped as invalid); None when it holds every row.
    within : str, optional
        What the numbers count when it is not the whole source (``"Spark partition 3"``).
    rows : numpy.ndarray of int, optional
        The number of each of the checked batch's rows (e.g.
        :meth:`ope.logs.BanditLogs.source_rows`); instead of ``offset`` and ``kept``.

    Examples
    --------
    >>> import numpy as np
    >>> from ope._validation import RowOrigin
    >>> from ope.exceptions import PolicyError
    >>> origin = RowOrigin("in partition 2 of logs/", offset=150, kept=np.array([True, False, True]))
    >>> print(origin.located(PolicyError("propensities not in [0, 1] (first at row 1)")))
    propensities not in [0, 1] (first at row 152) (in partition 2 of logs/)
    >>> spark = RowOrigin("in Spark partition 3 of <DataFrame>", None, within="Spark partition 3")
    >>> print(spark.located(PolicyError("2 rows (first at rows 4, 9)")))
    2 rows (first at rows 4, 9 of Spark partition 3) (in Spark partition 3 of <DataFrame>)
    """

    where: str
    offset: int | None = 0
    kept: np.ndarray | None = None
    within: str | None = None
    rows: np.ndarray | None = None

    def row(self, k: int) -> int | None:
        """The number of the batch's row ``k`` (as checked) in the source (or in ``within``);
        None when it is not known or the batch has no row ``k``."""
        if k < 0:
            return None
        if self.rows is not None:
            return int(self.rows[k]) if k < self.rows.size else None
        if self.offset is None:
            return None
        if self.kept is None:
            return self.offset + k
        held = np.flatnonzero(self.kept)
        return self.offset + int(held[k]) if k < held.size else None

    def relabel(self, message: str) -> str:
        """``message`` with each row number of the batch replaced by its number in the source
        (or followed by "of <within>"), and ``where`` appended. A message about the rows of
        another table (an item table, a policy table) keeps its numbers, and so do quoted
        values (names, paths)."""

        def number(token: str) -> str:
            k = int(token.replace(",", ""))
            found = self.row(k)
            if found is None:
                return token
            return f"{found:,}" if "," in token else str(found)

        def rows(match: re.Match[str]) -> str:
            numbers = ", ".join(number(t) for t in match["numbers"].split(", "))
            tail = "" if self.within is None else f" of {self.within}"
            return f"{match['word']} {numbers}{match['more'] or ''}{tail}"

        # the message's own words and the quoted values between them (names, paths, values):
        # only the words are read and relabelled
        pieces = _QUOTED.split(message)
        quoted = _QUOTED.findall(message)
        if any(table in " ".join(pieces) for table in _OTHER_TABLES):
            return f"{message} ({self.where})"
        out = [_ROWS_IN_MESSAGE.sub(rows, piece) for piece in pieces]
        relabelled = "".join(p + q for p, q in zip(out, [*quoted, ""], strict=True))
        return f"{relabelled} ({self.where})"

    def located(self, exc: OPEError) -> OPEError:
        """A copy of ``exc`` (same class, same attributes, e.g. a ValidationError's report)
        whose message is :meth:`relabel` of its own, with ``exc``'s traceback (the frames down
        to where it was raised, e.g. in a policy object): raise it ``from exc.__cause__``."""
        out = copy.copy(exc)
        out.args = (self.relabel(str(exc)), *exc.args[1:])
        return out.with_traceback(exc.__traceback__)


def repeated_names(names: Iterable[Any], *, among: Set[Any] | None = None) -> list[Any]:
    """The names that occur more than once (sorted), optionally only those in ``among``.

    One pass over the names (a count per name), so a schema of 10,000 columns costs 10,000
    steps, not the 10**8 of ``names.count(n)`` for every ``n``.

    Examples
    --------
    >>> from ope._validation import repeated_names
    >>> repeated_names(["a", "b", "a", "c", "b"]), repeated_names(["a", "a", "b", "b"], among={"b"})
    (['a', 'b'], ['b'])
    """
    counts = Counter(names)
    return sorted(n for n, c in counts.items() if c > 1 and (among is None or n in among))


def chunks(n: int, chunk_size: int) -> Iterator[slice]:
    """Slices of at most ``chunk_size`` rows covering ``range(n)`` (a loop over blocks)."""
    step = check_positive_int(chunk_size, "chunk_size")
    for start in range(0, n, step):
        yield slice(start, min(start + step, n))


def value_range(arr: np.ndarray) -> tuple[float, float]:
    """Smallest and largest entry of a non-empty array, NaN if any entry is NaN; a zero end is
    0.0, never -0.0.

    A contiguous float64 array is read once by the kernel's compiled loop
    (:func:`ope._kernel.key_range`); otherwise reduced block by block (min and max of a block
    while it is in cache) so that validating an (n, P) matrix costs about one read of it and
    allocates no (n, P) boolean masks.
    """
    from ope._kernel import key_range  # None until the kernel is loaded: never loads numba

    found = key_range(arr)
    if found is not None:
        low, high = found
        if math.isnan(low) or math.isnan(high):
            return math.nan, math.nan
    else:
        flat = arr.reshape(arr.shape[0], -1)
        step = max(1, _VALIDATION_BLOCK_ELEMENTS // max(1, flat.shape[1]))
        lows, highs = [], []
        for sl in chunks(flat.shape[0], step):  # loop over blocks, not rows
            block = flat[sl]
            lows.append(block.min())
            highs.append(block.max())
        low, high = float(np.min(lows)), float(np.max(highs))
    # + 0.0 turns a signed zero into 0.0 (which of -0.0 and 0.0 a min finds depends on the
    # reading order), so that no message shows a range starting at -0
    return low + 0.0, high + 0.0


def user_stacklevel() -> int:
    """``stacklevel`` that points a warning at the first caller outside the ope package."""
    frame = sys._getframe(2)  # the caller of the function that calls warnings.warn
    level = 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


# --------------------------------------------------------------------------------------------
# arrays (data: ValidationError)
# --------------------------------------------------------------------------------------------
def as_float_array(value: npt.ArrayLike, name: str, *, ndim: tuple[int, ...]) -> np.ndarray:
    """A floating array of one of the shapes ``ndim``, without copying float32/float64 input
    (other numbers, long doubles too, become float64: the kernel reads 4- and 8-byte floats).

    A masked array is refused rather than read without its mask.
    """
    if isinstance(value, np.ma.MaskedArray):
        if np.ma.getmaskarray(value).any():
            count, first = first_rows(np.ma.getmaskarray(value))
            raise ValidationError(
                f"`{name}` is a masked array with {count} masked rows (first at row {first}); "
                "ope does not read a mask as missing values. Drop those rows, or pass "
                f"numpy.ma.filled({name}, fill_value) explicitly."
            )
        value = np.ma.getdata(value)
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as exc:  # ragged lists and the like
        raise ValidationError(
            f"`{name}` must be a numeric array; could not convert it: {exc}"
        ) from None
    if arr.dtype.kind not in "fiub":
        raise ValidationError(
            f"`{name}` must be numeric; got dtype {arr.dtype}. Convert it, e.g. "
            f"numpy.asarray({name}, dtype=float)."
        )
    if arr.dtype.char not in "fd":  # ints, bools, float16 and long doubles (any width)
        arr = arr.astype(np.float64)
    if arr.ndim not in ndim:
        shapes = " or ".join({0: "()", 1: "(n,)", 2: "(n, P)"}[d] for d in ndim)
        raise ValidationError(f"`{name}` must have shape {shapes}; got shape {arr.shape}.")
    return arr


def check_finite(arr: np.ndarray, name: str) -> None:
    """Every entry finite, else a ValidationError with the count and the first row."""
    if arr.size == 0:
        return
    low, high = value_range(arr)
    if math.isfinite(low) and math.isfinite(high):  # NaN and +-inf fail this
        return
    bad = ~np.isfinite(arr)  # the full mask only to report the offending rows
    if bad.any():
        count, first = first_rows(bad)
        raise ValidationError(
            f"`{name}` must be finite; {count} rows are NaN or infinite (first at row {first}). "
            "Remove or impute them before estimating."
        )


def check_logging_propensity(p: np.ndarray, name: str = "logging_propensity") -> None:
    """Logging propensities of the logged actions: finite, in (0, 1]."""
    if p.size:
        low, high = value_range(p)
        if low > 0 and high <= 1:  # False for NaN: then the detailed checks below report
            return
    check_finite(p, name)
    bad = (p <= 0) | (p > 1)
    if bad.any():
        count, first = first_rows(bad)
        raise ValidationError(
            f"`{name}` must be in (0, 1]; {count} rows are not (first at row {first}: "
            f"{float(p.reshape(p.shape[0], -1)[first].flat[0])!r}). {FIX_PROPENSITY}"
        )


def check_target_propensity(t: np.ndarray, name: str = "target_propensity") -> None:
    """Candidate propensities of the logged actions: finite, in [0, 1]."""
    if t.size:
        low, high = value_range(t)
        if low >= 0 and high <= 1:  # False for NaN: then the detailed checks below report
            return
    check_finite(t, name)
    bad = (t < 0) | (t > 1)
    if bad.any():
        count, first = first_rows(bad)
        raise ValidationError(
            f"`{name}` must be in [0, 1] (it is the candidate's probability of the logged "
            f"action); {count} rows are not (first at row {first}). Check that the candidate "
            "policy outputs probabilities, not scores."
        )


def validated_pair(
    logging_propensity: npt.ArrayLike, target_propensity: npt.ArrayLike
) -> tuple[np.ndarray, np.ndarray]:
    """Logging propensities (n,) and target propensities (n,) or (n, P), checked together.

    Besides the ranges, refuses rows whose weight ``target / logging`` would exceed
    :data:`MAX_FINITE_WEIGHT` (its square would not be representable).
    """
    p = as_float_array(logging_propensity, "logging_propensity", ndim=(1,))
    t = as_float_array(target_propensity, "target_propensity", ndim=(1, 2))
    if t.shape[0] != p.shape[0]:
        raise ValidationError(
            f"`target_propensity` has {t.shape[0]} rows but `logging_propensity` has "
            f"{p.shape[0]}; both must describe the same logged rows."
        )
    check_logging_propensity(p)
    check_target_propensity(t)
    check_weights_representable(p, t)
    return p, t


def check_weights_representable(p: np.ndarray, t: np.ndarray | Sequence[np.ndarray]) -> None:
    """A ValidationError naming the first row whose weight ``target / logging`` exceeds
    :data:`MAX_FINITE_WEIGHT` (its square would not be representable); ``t`` is (n,), (n, P)
    or P columns of shape (n,). Only rows with a propensity below ``1 / MAX_FINITE_WEIGHT``
    are read twice."""
    if not p.size or float(p.min()) * MAX_FINITE_WEIGHT >= 1.0:  # no weight can overflow
        return
    if not isinstance(t, np.ndarray):
        columns = list(t)
    else:
        columns = [t] if t.ndim == 1 else [t[:, j] for j in range(t.shape[1])]  # views
    if not columns:
        return  # no candidate: no weight
    small = np.flatnonzero(p * MAX_FINITE_WEIGHT < 1.0)
    tt = np.max([np.asarray(c)[small] for c in columns], axis=0)
    with np.errstate(over="ignore"):
        rows = small[tt.astype(np.float64) / p[small].astype(np.float64) > MAX_FINITE_WEIGHT]
    if rows.size:
        raise ValidationError(
            f"importance weights overflow float64: {rows.size} rows (first at row "
            f"{int(rows[0])}: logging propensity {float(p[rows[0]])!r}) give "
            f"target/logging above {MAX_FINITE_WEIGHT:g}, whose squares are not "
            "representable. A propensity this small is not one the logger can have acted "
            f"on. {FIX_PROPENSITY}"
        )


# --------------------------------------------------------------------------------------------
# arguments (the call: ParameterError)
# --------------------------------------------------------------------------------------------
def describe(value: Any) -> str:
    """``'10' (str)``: a received value and its type, the way every ParameterError shows them.

    Examples
    --------
    >>> from ope._validation import describe
    >>> describe("10"), describe(True)
    ("'10' (str)", 'True (bool)')
    """
    text = repr(value)
    if len(text) > _MAX_SHOWN_CHARS:
        text = text[: _MAX_SHOWN_CHARS - 3] + "..."
    return f"{text} ({type(value).__name__})"


def show_value(value: Any) -> str:
    """``'x0'``: a value of a source (an id, a key, a string value) as a note or message
    quotes it, without :func:`describe`'s type: ``repr`` (control and bidirectional
    characters escaped), a string longer than :data:`_MAX_SHOWN_CHARS` cut, with its length.

    Examples
    --------
    >>> from ope._validation import show_value
    >>> print(show_value("a\\x1bb"), show_value("x" * 100)[-20:])
    'a\\x1bb' ... (100 characters)
    """
    if isinstance(value, str) and len(value) > _MAX_SHOWN_CHARS:
        return f"{value[: _MAX_SHOWN_CHARS - 3]!r}... ({len(value):,} characters)"
    return repr(value)


def parameter_error(
    name: str, requirement: str, value: Any, example: str, *, hint: str = ""
) -> ParameterError:
    """The error for a malformed argument: what ``name`` must be, what was received (its value
    and type) and an example of a right value, in one sentence pattern shared by every checker.

    A numeric string or a bool gets a word on why it was refused (``"10"`` is not read as 10,
    ``True`` not as 1).

    Examples
    --------
    >>> from ope._validation import parameter_error
    >>> print(parameter_error("max_weight", "a number", "10", "max_weight=10.0"))
    `max_weight` must be a number; got '10' (str). Pass e.g. max_weight=10.0 (a number, not the string '10').
    """
    if not hint:
        if isinstance(value, (bool, np.bool_)):
            hint = " (True and False are not numbers here)"
        elif isinstance(value, (str, bytes)):
            try:
                float(value)
                hint = f" (a number, not the string {value!r})"
            except ValueError:
                pass
        elif isinstance(value, decimal.Decimal):
            hint = f" (convert it: float({value!r}))"
        elif isinstance(value, np.ndarray) and value.size == 1:
            hint = " (a scalar, not an array: pass x.item())"
    return ParameterError(
        f"`{name}` must be {requirement}; got {describe(value)}. Pass e.g. {example}{hint}."
    )


def _as_real(value: Any) -> float | None:
    """``value`` as a float if it is a real number (int, float, a numpy integer or floating
    scalar, any ``numbers.Real``); None for anything else: bools, strings, complex numbers,
    arrays (a 0-d array too: settings are stored, and an array is not hashable) and ``Decimal``
    (convert it with ``float()``: ope computes in float64)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        return None
    try:
        return float(value)
    except OverflowError:  # an int beyond float64 (10**400): infinite for the range checks
        return -math.inf if value < 0 else math.inf


def check_real(value: Any, name: str, *, finite: bool = False, example: str | None = None) -> float:
    """A real number as a float: ints, floats and numpy scalars, never a bool, a string, an
    array or a ``Decimal``; with ``finite=True`` also not NaN or infinite.

    Examples
    --------
    >>> import numpy as np
    >>> from ope._validation import check_real
    >>> check_real(np.float32(0.5), "value"), check_real(3, "value")
    (0.5, 3.0)
    >>> check_real("0.5", "value")
    Traceback (most recent call last):
    ...
    ope.exceptions.ParameterError: `value` must be a number; got '0.5' (str). Pass e.g. value=1.0 (a number, not the string '0.5').
    """
    ex = example or f"{name}=1.0"
    x = _as_real(value)
    if x is None:
        raise parameter_error(name, "a number", value, ex)
    if finite and not math.isfinite(x):
        raise parameter_error(name, "a finite number", value, ex)
    return x


def check_positive_real(
    value: Any, name: str, *, example: str | None = None, what: str | None = None
) -> float:
    """A positive finite number (a clip level, a threshold, a bound, a temperature).

    ``what`` says what the setting is, in the message (``"the clip level"``).

    Examples
    --------
    >>> from ope._validation import check_positive_real
    >>> check_positive_real(2, "tau")
    2.0
    >>> check_positive_real(0.0, "tau")
    Traceback (most recent call last):
    ...
    ope.exceptions.ParameterError: `tau` must be a positive finite number; got 0.0 (float). Pass e.g. tau=1.0.
    """
    ex = example or f"{name}=1.0"
    x = check_real(value, name, example=ex)
    if not (math.isfinite(x) and x > 0):
        requirement = "a positive finite number" + (f" ({what})" if what else "")
        raise parameter_error(name, requirement, value, ex)
    return x


def check_positive_int(
    value: Any,
    name: str,
    *,
    minimum: int = 1,
    example: str | None = None,
    maximum: int | None = None,
) -> int:
    """A whole number ``>= minimum`` (ints and numpy integers; never a bool, an array or a float,
    even ``5.0``: a count is not rounded), and ``<= maximum`` when one is given (a size that
    would be allocated)."""
    what = "a positive integer" if minimum == 1 else f"a whole number >= {minimum}"
    if maximum is not None:
        what += f" and at most {maximum:,}"
    ex = example or f"{name}={max(minimum, 10)}"
    v = value
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral):
        hint = ""
        if isinstance(v, (float, np.floating)) and math.isfinite(v) and float(v).is_integer():
            hint = f" (an int, not the float {v!r})"
        raise parameter_error(name, what, value, ex, hint=hint)
    if int(v) < minimum or (maximum is not None and int(v) > maximum):
        raise parameter_error(name, what, value, ex)
    return int(v)


def check_name(value: Any, name: str, *, what: str = "a name", example: str | None = None) -> str:
    """A name that becomes part of a column name or a file (a policy's name, a label): a str
    that is not blank, without NUL and writable as UTF-8 (no unpaired surrogate). Control and
    bidi characters are kept: text output escapes them.

    Examples
    --------
    >>> from ope._validation import check_name
    >>> check_name("greedy", "policy_name")
    'greedy'
    >>> check_name("", "policy_name")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ope.exceptions.ParameterError: `policy_name` must be a non-blank str (a name); got '' (str)...
    """
    ex = example or f"{name}='new'"
    requirement = f"a non-blank str ({what})"
    if not isinstance(value, str) or not value.strip():
        raise parameter_error(name, requirement, value, ex)
    if "\x00" in value:
        raise parameter_error(name, requirement + " without a NUL character", value, ex)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise parameter_error(
            name,
            requirement + " that can be written as UTF-8 (it holds an unpaired surrogate)",
            value,
            ex,
        ) from None
    return value


def check_array_size(
    counts: Sequence[tuple[str, int]],
    *,
    what: str,
    factor: int = 1,
    limit: tuple[str, int, str] = (
        "MAX_ARRAY_ELEMENTS",
        MAX_ARRAY_ELEMENTS,
        "ope allocates for one array",
    ),
) -> None:
    """Refuse, before allocating, an array of ``factor * prod(counts)`` elements above
    :data:`MAX_ARRAY_ELEMENTS`; ``counts`` are ``(argument, value)`` pairs of validated counts
    and the message names each of them (``what`` says which array). ``limit`` is a tighter
    bound of the caller: its name, its value and what it bounds, for the message.

    Examples
    --------
    >>> from ope._validation import check_array_size
    >>> check_array_size([("n_contexts", 200), ("n_actions", 10)], what="the reward table")
    >>> check_array_size([("n_contexts", 10**30), ("n_actions", 10)], what="the reward table")
    Traceback (most recent call last):
    ...
    ope.exceptions.ParameterError: the reward table of `n_contexts`=~1e30 x `n_actions`=10 would hold ~1e31 elements, more than the 134,217,728 (MAX_ARRAY_ELEMENTS) ope allocates for one array. Pass a smaller `n_contexts`.
    """
    limit_name, most, bounded = limit
    size = factor * math.prod(value for _, value in counts)
    if size <= most:
        return

    def shown(count: int) -> str:  # exact below 10**12, the order of magnitude above
        return f"{count:,}" if count < 10**12 else f"~1e{len(str(count)) - 1}"

    sizes = " x ".join(f"`{name}`={shown(value)}" for name, value in counts)
    largest = max(counts, key=lambda pair: pair[1])[0]
    raise ParameterError(
        f"{what} of {sizes}{f' (x {factor:,})' if factor != 1 else ''} would hold "
        f"{shown(size)} elements, more than the {most:,} ({limit_name}) {bounded}. Pass a "
        f"smaller `{largest}`."
    )


def check_model_columns(
    q_column: Any, v_column: Any, *, logged: str, candidate: str, example: str
) -> tuple[str, str]:
    """DR's columns of a given reward model: ``q_column`` a column name (the model at the logged
    decision, described by ``logged``) and ``v_column`` a name with ``{policy}`` in it (at each
    candidate's, described by ``candidate``; ``example`` shows one); both or the error.

    Examples
    --------
    >>> from ope._validation import check_model_columns
    >>> check_model_columns("q", "v__{policy}", logged="...", candidate="...", example="v__{policy}")
    ('q', 'v__{policy}')
    """
    if q_column is None or v_column is None:
        missing = "q_column" if q_column is None else "v_column"
        raise ParameterError(
            f"DR with a given model needs both `q_column` and `v_column`; `{missing}` is "
            f"missing (q: {logged}; v: {candidate})."
        )
    q_name = check_name(q_column, "q_column", what="a column name")
    template = check_name(v_column, "v_column", what="a column name with {policy}")
    if "{policy}" not in template:
        raise ParameterError(
            f"`v_column` {template!r} must contain {{policy}} (e.g. {example!r}): one column per "
            "candidate."
        )
    return q_name, template


def check_forwarded(
    options: Mapping[str, Any], owner: Any, target: Any, *, target_name: str
) -> None:
    """Refuse keyword options that ``owner`` passes on to ``target`` (``**options``) when
    ``target`` does not take them, or when one it requires is missing: a ParameterError naming
    the function the user called and the nearest accepted name (of either signature), instead
    of the TypeError Python raises later naming an inner function.

    >>> def inner(*, reward_range, level=0.95): ...
    >>> def outer(batches, *, until=False, **options): ...
    >>> check_forwarded({"reward_rnge": (0, 1)}, outer, inner, target_name="Inner")
    Traceback (most recent call last):
    ...
    ope.exceptions.ParameterError: outer() got an unknown option 'reward_rnge' (did you mean 'reward_range'?); its own arguments are batches, until, and it passes on the options of Inner: reward_range, level.
    """
    params = inspect.signature(target).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    taken = [n for n, p in params.items() if p.kind in keyword and n != "self"]
    own = [
        n
        for n, p in inspect.signature(owner).parameters.items()
        if p.kind in (*keyword, inspect.Parameter.POSITIONAL_ONLY)
    ]
    name = getattr(owner, "__name__", "this function")
    unknown = [k for k in options if k not in taken]
    if unknown:
        near = difflib.get_close_matches(unknown[0], own + taken, n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise ParameterError(
            f"{name}() got an unknown option {unknown[0]!r}{hint}; its own arguments are "
            f"{', '.join(own)}, and it passes on the options of {target_name}: "
            f"{', '.join(taken)}."
        )
    required = [
        n
        for n, p in params.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is p.empty and n not in options
    ]
    if required:
        raise ParameterError(
            f"{name}() needs the option {required[0]}=... (passed on to {target_name})."
        )


def check_choice(value: Any, name: str, choices: Sequence[str]) -> str:
    """One of ``choices`` (a string), else a ParameterError listing them (and the nearest one)."""
    if isinstance(value, str) and value in choices:
        return value
    near = difflib.get_close_matches(value, list(choices), n=1) if isinstance(value, str) else []
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    raise parameter_error(
        name,
        f"one of {', '.join(map(repr, choices))}",
        value,
        f"{name}={(near or list(choices))[0]!r}",
        hint=hint,
    )


def check_names(value: Any, name: str, *, example: str | None = None) -> list[str]:
    """A list of names (strings): a list, a tuple or any other iterable of ``str``, never a
    single string (``"ab"`` is not ``["a", "b"]``), a mapping or a scalar.

    Examples
    --------
    >>> from ope._validation import check_names
    >>> check_names(("a", "b"), "names")
    ['a', 'b']
    >>> check_names("ab", "names")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ope.exceptions.ParameterError: `names` must be a list of names (strings); got 'ab' (str)...
    """
    ex = example or f"{name}=['a', 'b']"
    need = "a list of names (strings)"
    if isinstance(value, (str, bytes)):
        raise parameter_error(
            name,
            need,
            value,
            ex,
            hint=f" (a list, not the single string {value!r}: wrap it as [{value!r}])",
        )
    if isinstance(value, (Mapping, Set)) or not isinstance(value, Iterable):
        hint = " (a set has no order)" if isinstance(value, Set) else ""
        raise parameter_error(name, need, value, ex, hint=hint)
    items = list(value)
    for i, item in enumerate(items):  # loop over the names (a handful)
        if not isinstance(item, str):
            raise ParameterError(
                f"`{name}` must be {need}; its item {i} is {describe(item)}. Pass e.g. {ex}."
            )
    return items


def check_chosen(
    policies: Any,
    available: Sequence[str],
    *,
    columns: str,
    example: str,
    allow_empty: bool = False,
) -> list[str]:
    """The candidates named by ``policies`` (default: every one of ``available``), each a name
    and one of ``available``; ``columns`` says where candidates come from (an error shows it).
    An empty list is refused unless ``allow_empty`` (a reader asked to read no candidate).

    Examples
    --------
    >>> from ope._validation import check_chosen
    >>> check_chosen(["b"], ["a", "b"], columns="the target__<name> columns", example="['a']")
    ['b']
    """
    if policies is None:
        return list(available)
    names = [
        check_name(p, "policies", what="a candidate name")
        for p in check_names(policies, "policies", example=f"policies={example}")
    ]
    if not names and not allow_empty:
        raise ParameterError("`policies` is empty: name at least one candidate, or pass None.")
    unknown = [p for p in names if p not in available]
    if unknown:
        raise SchemaError(
            f"`policies`: no candidate {unknown[0]!r} in these logs; they have "
            f"{', '.join(map(repr, available)) or 'none'} ({columns})."
        )
    return names


def check_flag(value: Any, name: str, *, allow_none: bool = False) -> bool | None:
    """A switch: ``True`` or ``False`` (a numpy bool too), or None when ``allow_none``; never
    a string (``"no"`` is truthy), a number or NaN read as one.

    Examples
    --------
    >>> from ope._validation import check_flag
    >>> check_flag(False, "normalize"), check_flag(None, "by_position", allow_none=True)
    (False, None)
    >>> check_flag("no", "normalize")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ope.exceptions.ParameterError: `normalize` must be True or False; got 'no' (str)...
    """
    if value is None and allow_none:
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    need = "True or False" + (" (or None)" if allow_none else "")
    raise ParameterError(f"`{name}` must be {need}; got {describe(value)}. Pass e.g. {name}=True.")


def check_mapping(mapping: Any, name: str = "mapping") -> dict[str, str]:
    """A column mapping ``{ope_name: your_column}`` of strings (None: no mapping).

    Examples
    --------
    >>> from ope._validation import check_mapping
    >>> check_mapping({"reward": "click"}), check_mapping(None)
    ({'reward': 'click'}, {})
    """
    if mapping is None:
        return {}
    if not isinstance(mapping, Mapping):
        raise ParameterError(
            f"{name} must be a dict {{ope_name: your_column}}, got {describe(mapping)}; e.g. "
            f"{name}={{'reward': 'click'}}"
        )
    for ours, theirs in mapping.items():
        if not isinstance(ours, str) or not isinstance(theirs, str):
            raise ParameterError(
                f"{name} must map ope's column names to yours as strings, got {ours!r}: {theirs!r}"
            )
    return dict(mapping)


def check_confidence_level(confidence_level: Any) -> float:
    """A confidence level strictly between 0 and 1 (0.95, not 95 and not alpha=0.05)."""
    ex = "confidence_level=0.95"
    level = _as_real(confidence_level)
    if level is None:
        raise parameter_error("confidence_level", "a number in (0, 1)", confidence_level, ex)
    if not (0.0 < level < 1.0):
        raise parameter_error(
            "confidence_level",
            "in (0, 1)",
            confidence_level,
            ex,
            hint=" for a 95% interval (not 95, and not alpha=0.05)",
        )
    return level


def check_max_weight(max_weight: Any) -> float | None:
    """The clip level of a clipped estimator: None (no clipping) or a positive finite number."""
    if max_weight is None:
        return None
    return check_positive_real(
        max_weight, "max_weight", example="max_weight=10.0", what="the clip level"
    )


def check_weight_bound(
    weight_bound: Any, *, method: str | None = None, observed_max: float | None = None
) -> float | None:
    """An a priori bound on the importance weights, for the bounded interval methods.

    With ``method`` the bound is required (:class:`ope.MissingBoundsError` when None). With
    ``observed_max`` a bound below the largest observed weight is refused (it is not a bound).
    """
    if weight_bound is None:
        if method is None:
            return None
        raise MissingBoundsError(
            f"interval method {method!r} needs an a priori bound on the importance weights: "
            "pass weight_bound=M with M >= pi(a|x)/pi_0(a|x) for every context and action (e.g. "
            "1 / the smallest logging probability), or use ClippedIPS(max_weight=M), whose "
            "weights are bounded by construction. The largest observed weight is not a bound."
        )
    bound = check_positive_real(
        weight_bound,
        "weight_bound",
        example="weight_bound=100.0",
        what="an a priori bound on the importance weights",
    )
    if observed_max is not None and observed_max > bound:
        raise ValidationError(
            f"weight_bound={bound:g} is not a bound on these weights: the largest observed "
            f"weight is {observed_max:g}. Pass a true a priori bound, or use "
            "ClippedIPS(max_weight=...)."
        )
    return bound


def deprecated_weight_bound(weight_bound: Any, max_weight: Any, *, where: str) -> Any:
    """``weight_bound``, or ``max_weight=``, its deprecated spelling in ``where`` (warns once per
    call; both at once is a ParameterError). The glossary: ``max_weight`` is only ever the clip
    level of a clipped estimator, the a priori bound on the weights is ``weight_bound``."""
    if max_weight is None:
        return weight_bound
    if weight_bound is not None:
        raise ParameterError(
            f"{where}: pass the a priori weight bound once, as `weight_bound=` (`max_weight=` is "
            "its deprecated spelling)."
        )
    warnings.warn(
        f"`max_weight=` of {where} is deprecated: use weight_bound= (the a priori bound on the "
        "importance weights; max_weight is only ever the clip level of a clipped estimator).",
        DeprecationWarning,
        stacklevel=user_stacklevel(),
    )
    return check_positive_real(  # checked under the name it was given by
        max_weight,
        "max_weight",
        example="weight_bound=100.0",
        what="the deprecated spelling of weight_bound, an a priori bound on the weights",
    )


def finite_pair(pair: Any, name: str, example: str) -> tuple[float, float]:
    """A pair ``(low, high)`` of finite numbers, low < high, whose width is a float64 number."""
    if isinstance(pair, np.ndarray):
        ordered = pair.ndim == 1
    else:
        ordered = isinstance(pair, Sequence) and not isinstance(pair, (str, bytes, bytearray))
    if not ordered:
        hint = ""
        if isinstance(pair, (str, bytes, bytearray)):
            hint = f" (a tuple of two numbers, not the string {pair!r})"
        elif isinstance(pair, (Mapping, Set)):
            hint = f" (a tuple or a list: a {type(pair).__name__} has no order)"
        raise parameter_error(name, "a pair (low, high) of numbers", pair, example, hint=hint)
    if len(pair) != 2:
        raise ParameterError(
            f"`{name}` must be a pair (low, high) of numbers; got {len(pair)} values: "
            f"{describe(pair)}. Pass e.g. {example}."
        )
    ends = [_as_real(v) for v in pair]
    for i, (x, v) in enumerate(zip(ends, pair)):
        if x is None:
            raise parameter_error(
                name,
                "a pair (low, high) of numbers",
                pair,
                example,
                hint=f" (its {('low', 'high')[i]} end, {describe(v)}, is not a number)",
            )
    low, high = ends
    assert low is not None and high is not None
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ParameterError(
            f"`{name}` must be finite with low < high; got ({low!r}, {high!r}). Pass e.g. "
            f"{example}."
        )
    if not math.isfinite(high - low):
        raise ParameterError(
            f"`{name}`=({low!r}, {high!r}) is wider than float64 can represent (high - low "
            f"exceeds {FLOAT64_MAX:.4g}). Rescale the values and the range (e.g. divide both by "
            "1e10) and scale the results back: ope's estimates and intervals are equivariant "
            "under such a rescaling."
        )
    return low, high


def check_reward_range(reward_range: Any) -> tuple[float, float] | None:
    """The a priori reward range: None, or a pair ``(low, high)`` of finite numbers, low < high.

    A tuple, a list or a 1-d array of two numbers; a string (``"01"``), a dict, a set (no
    order), a pair of booleans and a range whose width overflows float64 are refused.

    Examples
    --------
    >>> import numpy as np
    >>> from ope._validation import check_reward_range
    >>> check_reward_range([0, np.float32(1)])
    (0.0, 1.0)
    >>> check_reward_range("01")
    Traceback (most recent call last):
    ...
    ope.exceptions.ParameterError: `reward_range` must be a pair (low, high) of numbers; got '01' (str). Pass e.g. reward_range=(0.0, 1.0) (a tuple of two numbers, not the string '01').
    """
    if reward_range is None:
        return None
    return finite_pair(reward_range, "reward_range", "reward_range=(0.0, 1.0)")


def check_value_bounds(low: Any, high: Any) -> tuple[float, float]:
    """The a priori range ``[low, high]`` of the values behind a bounded interval: both
    required (:class:`ope.MissingBoundsError`), finite numbers, ``low < high``.

    Examples
    --------
    >>> from ope._validation import check_value_bounds
    >>> check_value_bounds(0, 1.5)
    (0.0, 1.5)
    """
    missing = [name for name, value in (("low", low), ("high", high)) if value is None]
    if missing:
        raise MissingBoundsError(
            f"{' and '.join(f'`{m}`' for m in missing)} {'is' if len(missing) == 1 else 'are'} "
            "required: this method needs the a priori range of the values. Pass low= and high=, "
            "the range the values are known to lie in. Empirical maxima are not used in place "
            "of a priori bounds."
        )
    lo = check_real(low, "low", example="low=0.0")
    hi = check_real(high, "high", example="high=1.0")
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ParameterError(
            f"`low` must be smaller than `high`, both finite (low < high); got low={lo!r}, "
            f"high={hi!r}. Pass e.g. low=0.0, high=1.0."
        )
    return lo, hi


def power_of_two_scale(*values: float) -> float:
    """A power of two ``s`` with ``max|values| / s`` in ``[1, 2)`` (1.0 when all are 0).

    Dividing by ``s`` and multiplying back are exact (barring subnormal results), so a
    computation done in units of ``s`` gives ``s`` times the unit result: the way the interval
    methods stay finite and scale-equivariant for values near the float64 limits (1e308, 1e-300).

    Examples
    --------
    >>> from ope._validation import power_of_two_scale
    >>> power_of_two_scale(-3.0, 1.0), power_of_two_scale(0.0)
    (2.0, 1.0)
    >>> 1e308 / power_of_two_scale(1e308) < 2.0
    True
    """
    top = max((abs(v) for v in values), default=0.0)
    if top == 0.0 or not math.isfinite(top):
        return 1.0
    return math.ldexp(1.0, math.frexp(top)[1] - 1)


def require_reward_range(reward_range: Any, method: str) -> tuple[float, float]:
    """:func:`check_reward_range` for a method that cannot run without the range."""
    rr = check_reward_range(reward_range)
    if rr is None:
        raise MissingBoundsError(
            f"interval method {method!r} needs the a priori reward range: pass "
            "reward_range=(low, high) when estimating (e.g. (0, 1) for clicks). The observed "
            "minimum and maximum reward are not bounds."
        )
    return rr


def check_rewards_in_range(
    reward: np.ndarray, reward_range: tuple[float, float] | None, name: str = "reward"
) -> None:
    """Every reward inside the a priori range (data: ValidationError with the first row)."""
    if reward_range is None or reward.size == 0:
        return
    low, high = reward_range
    r_lo, r_hi = value_range(reward)
    if r_lo >= low and r_hi <= high:
        return
    bad = (reward < low) | (reward > high)
    count, first = first_rows(bad)
    raise ValidationError(
        f"`{name}` has {count} rows outside reward_range=({low:g}, {high:g}) (first at row "
        f"{first}: {float(reward.reshape(reward.shape[0], -1)[first].flat[0])!r}). reward_range "
        "must be an a priori bound that every reward satisfies; widen it or fix the rewards."
    )


def check_no_overflow(
    result: np.ndarray, what: str, inputs: Mapping[str, np.ndarray], *, row: str | None = "row"
) -> None:
    """The numeric-range guard of sums of the data (returns, GAE, paired effects).

    Each input is finite (checked before), but a sum of finite values can overflow float64
    (two rewards of 1e308 add up to inf, and inf - inf is NaN). A ``result`` with a non-finite
    entry is refused with a :class:`ope.ValidationError` that names the input with the largest
    magnitude, that magnitude and the first offending row, rather than returned as inf or NaN.
    ``row=None`` leaves out the location (a single statistic). Returns and effects are linear
    in their inputs, so rescaling them (dividing by a power of ten) and scaling the results back
    gives the same numbers.

    Examples
    --------
    >>> import numpy as np
    >>> from ope._validation import check_no_overflow
    >>> r = np.array([1e308, 1e308])
    >>> with np.errstate(over="ignore"):  # the sums overflow: what is checked
    ...     sums = r + r[::-1]
    >>> check_no_overflow(sums, "discounted returns", {"reward": r})
    Traceback (most recent call last):
    ...
    ope.exceptions.ValidationError: discounted returns overflow float64 (2 rows are infinite or NaN, first at row 0): `reward` reaches |value| 1e+308, too large for its sums. Rescale `reward` (e.g. divide by 1e+300) and scale the results back.
    """
    arr = np.asarray(result, dtype=np.float64)
    if arr.size == 0:
        return
    low, high = value_range(arr)
    if math.isfinite(low) and math.isfinite(high):
        return
    count, first = first_rows(~np.isfinite(arr))
    peaks = {}
    for name, values in inputs.items():
        v = np.asarray(values, dtype=np.float64)
        if v.size:
            lo, hi = value_range(v)
            peaks[name] = max(abs(lo), abs(hi))
    name, peak = max(peaks.items(), key=lambda kv: kv[1]) if peaks else ("input", math.nan)
    divisor = 10.0 ** max(1, math.floor(math.log10(peak)) - 8) if peak > 0 else 1e10
    where = (
        "" if row is None else (f" ({count} {row}s are infinite or NaN, first at {row} {first})")
    )
    raise ValidationError(
        f"{what} overflow float64{where}: `{name}` reaches |value| {peak:.4g}, too large for "
        f"its sums. Rescale `{name}` (e.g. divide by {divisor:.4g}) and scale the results back."
    )


def check_label_kinds(labels: np.ndarray, name: str) -> None:
    """Action (or class) labels of one kind: all whole numbers or all text.

    An object array that mixes them (``[1, "a"]``, a CSV column partly parsed as numbers) has no
    order, so it cannot be sorted into classes; it is refused with a :class:`ope.ValidationError`
    that counts each kind and names the first row of the rarer one.

    Examples
    --------
    >>> import numpy as np
    >>> from ope._validation import check_label_kinds
    >>> check_label_kinds(np.array([1, 2, "a"], dtype=object), "y")
    Traceback (most recent call last):
    ...
    ope.exceptions.ValidationError: `y` mixes label kinds: 2 rows hold numbers and 1 rows text (first text at row 2: 'a'). Labels are sorted into classes and must be of one kind: convert them all, e.g. y.astype(str).
    """
    if labels.dtype != object or labels.size == 0:
        return
    import pandas as pd

    flat = labels.reshape(-1)
    kind = pd.api.types.infer_dtype(flat, skipna=True)
    if not kind.startswith("mixed"):
        return
    numeric = pd.to_numeric(pd.Series(flat), errors="coerce").notna().to_numpy()
    present = pd.notna(flat)
    text = present & ~numeric
    n_num, n_text = int(numeric.sum()), int(text.sum())
    rare, noun = (text, "text") if n_text <= n_num else (numeric, "number")
    first = int(np.flatnonzero(rare)[0]) if rare.any() else 0
    raise ValidationError(
        f"`{name}` mixes label kinds: {n_num} rows hold numbers and {n_text} rows text (first "
        f"{noun} at row {first}: {flat[first]!r}). Labels are sorted into classes and must be "
        f"of one kind: convert them all, e.g. {name}.astype(str)."
    )


def check_positions(
    values: npt.ArrayLike,
    name: str = "position",
    *,
    base: int = 0,
    n_slots: int | None = None,
    what: str = "slots",
) -> np.ndarray:
    """Slot positions (or other indices, ``what``) as int64: whole numbers from ``base`` (0, or
    1 for 1-based logs) and, with ``n_slots``, below ``base + n_slots``; else a ValidationError
    with the count and the first row.

    A negative position would index slots from the end and a fractional one would be truncated,
    so both are refused rather than read as another slot.

    Examples
    --------
    >>> from ope._validation import check_positions
    >>> check_positions([0, 2.0, 1]).tolist()
    [0, 2, 1]
    >>> check_positions([0, -1])
    Traceback (most recent call last):
    ...
    ope.exceptions.ValidationError: `position` must be whole numbers >= 0; 1 rows are not (first at row 1: -1); they index slots from 0. Fix the logger or the column mapping.
    """
    arr = np.asarray(values)
    if arr.dtype.kind not in "iub":
        f = as_float_array(arr, name, ndim=(1,))
        check_finite(f, name)
        whole = f == np.round(f)
        arr = np.where(whole, f, 0.0).astype(np.int64)
        bad = ~whole | (f < base)
    else:
        arr = arr.astype(np.int64)
        bad = arr < base
    top = None if n_slots is None else base + n_slots
    if top is not None:
        bad |= arr >= top
    if bad.any():
        count, first = first_rows(bad)
        shown = np.asarray(values).reshape(-1)[first]
        rule = f"whole numbers >= {base}" + ("" if top is None else f" and < {top}")
        raise ValidationError(
            f"`{name}` must be {rule}; {count} rows are not (first at row {first}: "
            f"{shown.item() if hasattr(shown, 'item') else shown!r}); they index {what} from "
            f"{base}. Fix the logger or the column mapping."
        )
    return arr


def check_distribution_rows(
    dist: np.ndarray, name: str, *, axis: int = 1, atol: float | None = None
) -> None:
    """Probabilities in [0, 1] that sum to 1 along ``axis`` (the actions) in every row.

    ``dist`` has the rows first, e.g. (n, n_actions) or (n, n_actions, n_slots); each
    distribution (a row, or a row's slot) must sum to 1 within ``atol`` (default: the
    package's :data:`~ope._thresholds.PROBABILITY_TOLERANCE`). A ValidationError names the count,
    the first row and its sum.

    Examples
    --------
    >>> import numpy as np
    >>> from ope._validation import check_distribution_rows
    >>> check_distribution_rows(np.full((2, 3), 0.9), "action_dist")
    Traceback (most recent call last):
    ...
    ope.exceptions.ValidationError: `action_dist` must hold probability distributions: entries in [0, 1] summing to 1 over axis 1; 2 rows do not (first at row 0, which sums to 2.7). Normalize each row, e.g. dist / dist.sum(axis=1, keepdims=True).
    """
    from ope._thresholds import PROBABILITY_TOLERANCE

    tol = PROBABILITY_TOLERANCE if atol is None else atol
    arr = as_float_array(dist, name, ndim=(2, 3))
    check_finite(arr, name)
    total = arr.sum(axis=axis)
    bad = np.abs(total - 1.0) > tol
    bad_entries = (arr < 0) | (arr > 1)
    bad = bad.reshape(arr.shape[0], -1).any(axis=1) | bad_entries.reshape(arr.shape[0], -1).any(1)
    if bad.any():
        count, first = first_rows(bad)
        row_sum = total[first].reshape(-1)
        worst = float(row_sum[np.argmax(np.abs(row_sum - 1.0))])
        raise ValidationError(
            f"`{name}` must hold probability distributions: entries in [0, 1] summing to 1 over "
            f"axis {axis}; {count} rows do not (first at row {first}, which sums to {worst:.6g})."
            f" Normalize each row, e.g. dist / dist.sum(axis={axis}, keepdims=True)."
        )


def check_rng(rng: Any) -> np.random.Generator:
    """A Generator from an int seed, a Generator (used as is) or None (fresh entropy)."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None:
        return np.random.default_rng()
    if isinstance(rng, (bool, np.bool_)) or not isinstance(rng, numbers.Integral) or rng < 0:
        raise ParameterError(
            f"rng must be an int seed, a numpy.random.Generator or None; got {rng!r} "
            f"({type(rng).__name__}). Pass e.g. rng=0 or rng=numpy.random.default_rng(0)."
        )
    return np.random.default_rng(int(rng))


def fold_assignment(n: int, n_folds: int, gen: np.random.Generator) -> npt.NDArray[np.int64]:
    """The cross-fitting fold of each of ``n`` rows: ``0 .. n_folds-1`` in turn along a random
    permutation drawn from ``gen``, so fold sizes differ by at most one (reward models, the
    two-step model and estimated embedding weights share this rule)."""
    fold = np.empty(n, dtype=np.int64)
    fold[gen.permutation(n)] = np.arange(n) % n_folds
    return fold


def resolve_seed(rng: Any) -> tuple[int | None, np.random.Generator]:
    """The seed to record and the Generator to use, for a result that must be reproducible.

    An int seed is recorded as given; ``None`` draws a fresh 63-bit seed from the OS's
    entropy and records it (so the result says how to reproduce it exactly); a Generator
    is used as is and recorded as ``None`` (its state is the caller's to keep).

    Examples
    --------
    >>> from ope._validation import resolve_seed
    >>> resolve_seed(7)[0]
    7
    >>> seed, gen = resolve_seed(None)
    >>> isinstance(seed, int) and 0 <= seed < 2**63
    True
    """
    if rng is None:
        seed = int(np.random.SeedSequence().generate_state(1, np.uint64)[0] >> np.uint64(1))
        return seed, np.random.default_rng(seed)
    gen = check_rng(rng)
    if isinstance(rng, np.random.Generator):
        return None, gen
    return int(rng), gen
