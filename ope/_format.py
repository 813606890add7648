"""Numbers, lists, tables and notes as text: the one home of ope's formatting rules.

Every result renders through :mod:`ope.results` (``render_text``, ``render_html``), the HTML
report (:mod:`ope.report`) and the figures (:mod:`ope.plots`) format with the functions here,
so the same number reads the same in every summary, notebook view, report and figure; no other
module has a rule of its own.

The rules
---------
- **A number with its standard error** is shown to :data:`SE_DIGITS` (2) significant digits of
  that error: ``0.004603`` with standard error ``0.000121`` reads ``0.00460`` and ``0.00012``. A
  column of values, their standard errors and their interval end points share one precision,
  set by the column's smallest standard error, so the digits that differ between rows are the
  ones that matter (:func:`se_decimals`, :func:`format_column`, :func:`format_interval`).
- **A number on its own** is shown to :data:`SIG_DIGITS` (4) significant digits
  (:func:`format_number`): ``0.004603`` reads ``0.004603``, ``36321.5`` reads ``36,322`` (never
  rounded to tens: digits left of the point are all shown).
- **Scientific notation** only below :data:`SCI_SMALL` or from :data:`SCI_LARGE` on in
  magnitude, or when a standard error would need more than :data:`MAX_DECIMALS` decimals.
- **Thousands separators** from :data:`THOUSANDS` on (``100,000`` rows, ``9999`` rows).
- **A difference** carries its sign (``+0.0941``, ``-0.0705``, ``0``: :func:`format_signed`);
  **a share** reads as a percentage, two significant digits below 10% and none above, never a
  positive share as ``0%`` (``36%``, ``0.55%``, ``<0.01%``: :func:`format_share`).
- **Text** (titles, fields, notes, lists) is wrapped to :data:`TEXT_WIDTH` (88) characters;
  table columns are as wide as their widest cell, never truncated, so no cell runs into the next.
- **Names are shown, never obeyed**: a column, policy, segment, estimator or file name comes
  from the data, and a control character in it (an ESC sequence that retitles or clears the
  terminal, a NUL that makes an SVG malformed XML, a right-to-left override that reorders what
  the reader sees) is shown escaped, ``\\x1b`` or ``\\u202e`` (:func:`safe_text`). Every text
  renderer (the functions here, the HTML report, its figures, the command line's output and
  error lines) calls it; JSON keeps names exact (it escapes control characters itself).
- **Notes** are stated once: two notes are the same when their :func:`note_key` is (the rule and
  subject a :class:`Note` carries, else the text up to case and spacing), numbered ``[1]``,
  ``[2]``, ... in order of first appearance and referenced from the table rows they concern
  (:func:`number_notes`). Several results shown one after another (a command's output) number
  their notes as one sequence, each on from the previous one's (:func:`continue_notes`).

Nothing here depends on the terminal, the locale or the platform: the same values give the same
text everywhere.
"""

from __future__ import annotations

import math
import numbers
import re
import textwrap
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, Final

import numpy as np

__all__ = [
    "SIG_DIGITS",
    "SE_DIGITS",
    "SCI_SMALL",
    "SCI_LARGE",
    "MAX_DECIMALS",
    "THOUSANDS",
    "TEXT_WIDTH",
    "COLUMN_GAP",
    "DEGENERATE_SE",
    "Note",
    "is_number",
    "note_key",
    "unique_notes",
    "number_notes",
    "format_number",
    "format_fixed",
    "se_decimals",
    "format_column",
    "format_interval",
    "format_estimate",
    "format_setting",
    "format_signed",
    "format_share",
    "format_value",
    "format_value_plain",
    "format_list",
    "plural",
    "wrap_text",
    "edit_wrapped",
    "continue_notes",
    "format_table",
    "UNSAFE_CHARACTERS",
    "safe_text",
]

#: Significant digits of a number shown without a standard error: four tell 0.004603 from
#: 0.004821 (click rates) and 553.2 from 554.9 (effective sample sizes) without noise digits.
SIG_DIGITS: Final = 4

#: Significant digits of the standard error that set the precision of a value: the second digit
#: of the error is the last one that carries information (a relative error of 5-50%); more
#: digits of the value would be noise, fewer would hide differences of a fraction of an error.
SE_DIGITS: Final = 2

#: Below this magnitude a number is shown in scientific notation (0.0001234 still reads
#: 0.0001234; 0.00001234 reads 1.234e-05, not a run of zeros).
SCI_SMALL: Final = 1e-4

#: From this magnitude on a number is shown in scientific notation (999,999,999 still reads in
#: full, with separators).
SCI_LARGE: Final = 1e9

#: Fixed notation shows at most this many decimals: a standard error below ~1e-7 (2 significant
#: digits need 9+ decimals) switches its column to scientific notation.
MAX_DECIMALS: Final = 8

#: Numbers from this magnitude on get thousands separators (9999 rows, 10,000 rows).
THOUSANDS: Final = 10_000

#: Width text is wrapped to: deterministic (never the terminal's), wide enough for a table row
#: of eight 9-character numbers and a policy name.
TEXT_WIDTH: Final = 88

#: Spaces between two table columns.
COLUMN_GAP: Final = 2

#: A standard error below this share of its column's largest magnitude is rounding noise (an
#: on-policy difference whose error is 1e-17), not a precision: it does not set the decimals.
DEGENERATE_SE: Final = 1e-12

#: Characters never written as they are to a terminal, an HTML page or an SVG figure: the C0
#: controls (ESC starts terminal sequences, BEL ends them, NUL and most C0 are illegal in XML),
#: DEL and the C1 controls (U+009B is a one-byte CSI on some terminals), the bidirectional
#: embeddings, overrides, isolates and marks (U+202A-U+202E, U+2066-U+2069, U+200E, U+200F,
#: U+061C: they reorder the text around them), the line and paragraph separators, lone
#: surrogates (an undecodable file name) and U+FFFE/U+FFFF (not characters; illegal in XML).
UNSAFE_CHARACTERS: Final = (
    "\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
    "\ud800-\udfff\ufffe\uffff"
)

_UNSAFE: Final = re.compile(f"[{UNSAFE_CHARACTERS}]")
_UNSAFE_BUT_NEWLINE: Final = re.compile(f"(?!\n)[{UNSAFE_CHARACTERS}]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe_text(text: Any, *, keep_newlines: bool = False) -> str:
    """``text`` with every character of :data:`UNSAFE_CHARACTERS` shown as an escape
    (``\\x1b``, ``\\x9b``, ``\\u202e``): what a name from the data may be shown as on a
    terminal, in HTML and in SVG.

    The one escaping function of ope's renderers: the text formatters of this module, the HTML
    report's escaping, the figures' labels and the command line's output and error lines call
    it. The result is printable text without XML-illegal characters, and escaping it again
    changes nothing (a backslash is kept as it is, so a name that spells ``\\x1b`` reads like
    one that holds ESC; the JSON output tells them apart).

    Parameters
    ----------
    text : object
        A name, a cell or a whole output (``str(text)`` is escaped).
    keep_newlines : bool, default False
        Keep ``"\\n"`` as it is: for a whole multi-line output or message; a name's newline is
        escaped (``\\x0a``), so it cannot start a line that looks like ope's own.

    Examples
    --------
    >>> safe_text("target__\\x1b]0;PWNED\\x07\\x1b[2J")
    'target__\\\\x1b]0;PWNED\\\\x07\\\\x1b[2J'
    >>> print(safe_text("a\\u202eb\\x00c\\x9b"))
    a\\u202eb\\x00c\\x9b
    >>> safe_text("line 1\\nline 2", keep_newlines=True) == "line 1\\nline 2"
    True
    >>> safe_text(safe_text("\\x1b")) == safe_text("\\x1b")
    True
    """
    text = str(text)
    return (_UNSAFE_BUT_NEWLINE if keep_newlines else _UNSAFE).sub(_escaped, text)


# --------------------------------------------------------------------------------------------
# notes
# --------------------------------------------------------------------------------------------
class Note(str):
    """A note's text, optionally with the rule that raised it and the subject it concerns.

    A ``Note`` is a ``str`` (every tuple of notes stays a tuple of str, and JSON writes the
    text); ``rule`` and ``subject`` say which warning it is, so that two wordings of one warning
    (an estimator's and the diagnostics' low-ESS note on the same weights) are stated once when
    rendered together. Without a rule, notes are the same when their texts are (up to case and
    spacing).

    Parameters
    ----------
    text : str
        What the reader sees.
    rule : str, optional
        The rule's name, e.g. the function of :mod:`ope._thresholds` that flags it
        (``"low_ess"``, ``"mean_weight_check"``, ``"small_sample"``, ``"few_effective_rows"``).
    subject : hashable, optional
        What it is about, as precise as the rule needs to tell two instances apart (e.g.
        ``("long_tail", "raw weights")``: the raw and the clipped weights of one policy have
        different effective sample sizes, so two notes).

    Examples
    --------
    >>> a = Note("ESS 553 is 0.55% of n", rule="low_ess", subject="long_tail")
    >>> b = Note("effective sample size 553.2 is 0.55% of n=100000", rule="low_ess",
    ...          subject="long_tail")
    >>> a == "ESS 553 is 0.55% of n", note_key(a) == note_key(b)
    (True, True)
    """

    rule: str | None
    subject: Hashable | None

    def __new__(cls, text: str, *, rule: str | None = None, subject: Hashable = None) -> Note:
        self = super().__new__(cls, text)
        self.rule = rule
        self.subject = subject
        return self

    def __reduce__(self) -> Any:  # pickling keeps the rule and the subject
        return (_rebuild_note, (str(self), self.rule, self.subject))


def _rebuild_note(text: str, rule: str | None, subject: Hashable) -> Note:
    return Note(text, rule=rule, subject=subject)


def note_key(note: str) -> tuple[Any, ...]:
    """What makes two notes the same: ``(rule, subject)`` of a :class:`Note` with a rule, else
    its text with case, runs of spaces and a final period ignored.

    >>> note_key("Weights  are heavy.") == note_key("weights are heavy")
    True
    """
    rule = getattr(note, "rule", None)
    if rule is not None:
        return ("rule", rule, getattr(note, "subject", None))
    return ("text", " ".join(str(note).split()).rstrip(".").casefold())


def unique_notes(*groups: Iterable[str]) -> tuple[str, ...]:
    """The notes of every group, each once (the first wording of each :func:`note_key`), in
    order of first appearance: for results that include another result's notes.

    >>> unique_notes(["a", "b"], ["B.", "c"])
    ('a', 'b', 'c')
    """
    seen: dict[Hashable, str] = {}
    for group in groups:
        for note in group:
            seen.setdefault(note_key(note), note)
    return tuple(seen.values())


def number_notes(
    notes: Iterable[str], row_notes: Sequence[Iterable[str]] = ()
) -> tuple[tuple[str, ...], list[str]]:
    """Each note once, and per table row the references ``"[i]"`` of the notes that apply to it.

    ``notes`` apply to the whole result; ``row_notes[j]`` to row ``j``. Notes are numbered in
    order of first appearance (the whole result's first, then row by row), each wording of one
    :func:`note_key` stated once.

    Returns
    -------
    notes : tuple of str
        The distinct notes; note ``i`` (1-based) is ``notes[i - 1]``.
    refs : list of str
        Per row, e.g. ``"[1]"``, ``"[1,3]"``, or ``""``.

    Examples
    --------
    >>> number_notes(["dropped 3 rows"], [["low ESS"], [], ["low ess", "small n"]])
    (('dropped 3 rows', 'low ESS', 'small n'), ['[2]', '', '[2,3]'])
    """
    index: dict[Hashable, int] = {}
    texts: list[str] = []

    def number(note: str) -> int:
        key = note_key(note)
        if key not in index:
            texts.append(note)
            index[key] = len(texts)
        return index[key]

    for note in notes:
        number(note)
    refs = []
    for group in row_notes:
        numbers_ = sorted({number(note) for note in group})
        refs.append("[" + ",".join(map(str, numbers_)) + "]" if numbers_ else "")
    return tuple(texts), refs


# --------------------------------------------------------------------------------------------
# numbers
# --------------------------------------------------------------------------------------------
def is_number(x: Any) -> bool:
    """True for an int, a float or a numpy number; False for a bool (numpy's too) and text.

    >>> is_number(3), is_number(0.5), is_number(True), is_number("1")
    (True, True, False, False)
    """
    return isinstance(x, numbers.Real) and not isinstance(x, (bool, np.bool_))


def _exponent(x: float, sig: int) -> int:
    """The decimal exponent of ``x`` once rounded to ``sig`` significant digits (9.9996 at 4
    digits rounds to 10.00: exponent 1)."""
    return int(f"{abs(x):.{sig - 1}e}".split("e")[1])


def _grouped(x: float, grouping: bool | None) -> bool:
    return abs(x) >= THOUSANDS if grouping is None else grouping


def _special(x: float) -> str | None:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return None


def _scientific(x: float, sig: int, *, trim: bool = False) -> str:
    mantissa, exp = f"{x:.{max(sig, 1) - 1}e}".split("e")
    if trim and "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{exp}"


def _unsigned_zero(text: str) -> str:
    """``-0.000`` (a small negative rounded away) reads ``0.000``."""
    if text.startswith("-") and not any(c in "123456789" for c in text.split("e")[0]):
        return text[1:]
    return text


def format_number(
    x: Any, sig: int = SIG_DIGITS, *, trim: bool = False, grouping: bool | None = None
) -> str:
    """One number to ``sig`` significant digits (integers in full), scientific only for
    magnitudes below :data:`SCI_SMALL` or from :data:`SCI_LARGE` on.

    Parameters
    ----------
    x : number
        An int, float or numpy scalar; ``nan`` and ``inf`` read as such.
    sig : int, default SIG_DIGITS
        Significant digits. Digits left of the decimal point are always shown (no rounding to
        tens), so a number of 5 digits or more shows none after the point.
    trim : bool, default False
        Drop trailing zeros after the point (``0.5`` rather than ``0.5000``): for a number read
        on its own; columns keep them, so that their digits line up.
    grouping : bool, optional
        Thousands separators: True from 1,000 on, False never; default from
        :data:`THOUSANDS` on (a column passes True when any of its numbers reaches it).

    Examples
    --------
    >>> format_number(0.004603), format_number(0.0048214), format_number(0.00012)
    ('0.004603', '0.004821', '0.0001200')
    >>> format_number(36321.5), format_number(553.2), format_number(9.99996)
    ('36,322', '553.2', '10.00')
    >>> format_number(0.5, trim=True), format_number(12, sig=2), format_number(123456)
    ('0.5', '12', '123,456')
    >>> format_number(1.234e-05), format_number(2.5e12), format_number(float("nan"))
    ('1.234e-05', '2.500e+12', 'nan')
    """
    if isinstance(x, (bool, np.bool_)):
        return str(bool(x))
    if isinstance(x, numbers.Integral):  # counts are shown in full
        count = int(x)
        return f"{count:,}" if _grouped(count, grouping) else str(count)
    v = float(x)
    special = _special(v)
    if special is not None:
        return special
    if v == 0:
        return "0"
    a = abs(v)
    if a < SCI_SMALL or a >= SCI_LARGE:
        return _scientific(v, sig, trim=trim)
    decimals = max(sig - 1 - _exponent(v, sig), 0)
    text = f"{v:,.{decimals}f}" if _grouped(v, grouping) else f"{v:.{decimals}f}"
    if trim and "." in text:
        text = text.rstrip("0").rstrip(".")
    return _unsigned_zero(text)


def format_fixed(x: Any, decimals: int, *, grouping: bool | None = None) -> str:
    """``x`` with ``decimals`` decimals (separators from :data:`THOUSANDS` on), in scientific
    notation with the same absolute precision beyond :data:`MAX_DECIMALS` decimals or from
    :data:`SCI_LARGE` on.

    >>> format_fixed(0.0046031, 5), format_fixed(-0.000001, 3), format_fixed(12345.678, 1)
    ('0.00460', '0.000', '12,345.7')
    >>> format_fixed(1.5e-11, 12), format_fixed(2.5e9, 0)
    ('1.5e-11', '2.500000000e+09')
    """
    if not is_number(x):
        return format_value_plain(x)
    v = float(x)
    special = _special(v)
    if special is not None:
        return special
    if decimals > MAX_DECIMALS or abs(v) >= SCI_LARGE:
        if v == 0:
            return "0"
        # 15 significant digits read a float's decimal exponent exactly (1e-7, not 9.99e-08)
        sig = min(max(_exponent(v, 15) + decimals + 1, 1), 17)
        return _unsigned_zero(_scientific(v, sig))
    d = max(int(decimals), 0)
    text = f"{v:,.{d}f}" if _grouped(v, grouping) else f"{v:.{d}f}"
    return _unsigned_zero(text)


def se_decimals(
    std_errors: Iterable[Any], *, se_digits: int = SE_DIGITS, scale: float | None = None
) -> int | None:
    """Decimals that show the smallest usable standard error to ``se_digits`` significant
    digits (never fewer than 0); None when no error is usable.

    An error is usable when it is finite, positive and at least :data:`DEGENERATE_SE` times
    ``scale`` (the magnitude of the values it belongs to, when given).

    >>> se_decimals([0.0103, 0.00154]), se_decimals([0.00012]), se_decimals([35.0])
    (4, 5, 0)
    >>> se_decimals([float("nan"), 0.0]) is None, se_decimals([1e-17, 0.01], scale=0.2)
    (True, 3)
    """
    floor = 0.0 if scale is None or not math.isfinite(scale) else DEGENERATE_SE * abs(scale)
    usable = [
        float(s)
        for s in std_errors
        if is_number(s) and math.isfinite(float(s)) and float(s) > 0 and float(s) >= floor
    ]
    if not usable:
        return None
    smallest = min(usable)
    return max(se_digits - 1 - _exponent(smallest, se_digits), 0)


def format_column(
    values: Iterable[Any],
    std_errors: Iterable[Any] | None = None,
    *,
    decimals: int | None = None,
    sig: int = SIG_DIGITS,
    se_digits: int = SE_DIGITS,
) -> list[str]:
    """A column of numbers as text that lines up.

    With ``decimals`` (or ``std_errors``, from which :func:`se_decimals` takes them) every
    number gets the same decimals; otherwise each gets ``sig`` significant digits (and a column
    of whole numbers, none). Non-numbers
    (text, None) are shown as they are (None as an empty cell). When any number of the column
    reaches :data:`THOUSANDS`, all get thousands separators.

    Examples
    --------
    >>> format_column([0.0046031, 0.0048214], [0.000121, 0.000118])
    ['0.00460', '0.00482']
    >>> format_column([0.2528, 0.0265, 0.1220], [0.0103, 0.0054, 0.0015])
    ['0.2528', '0.0265', '0.1220']
    >>> format_column([553.2, 6829.4, 36321.5, float("nan"), None])
    ['553.2', '6,829', '36,322', 'nan', '']
    >>> format_column([200.0, 50.0, 1.0])
    ['200', '50', '1']
    """
    values = list(values)
    grouping = any(
        is_number(v) and math.isfinite(float(v)) and abs(float(v)) >= THOUSANDS for v in values
    )
    if decimals is None and std_errors is not None:
        magnitudes = [abs(float(v)) for v in values if is_number(v) and math.isfinite(float(v))]
        decimals = se_decimals(
            std_errors, se_digits=se_digits, scale=max(magnitudes) if magnitudes else None
        )
    if decimals is None:
        finite = [float(v) for v in values if is_number(v) and math.isfinite(float(v))]
        if finite and all(v.is_integer() and abs(v) < SCI_LARGE for v in finite):
            decimals = 0  # whole numbers stored as floats (weights of 200, 50, 1) read as such
        else:
            return [
                format_number(v, sig, grouping=grouping) if is_number(v) else format_value_plain(v)
                for v in values
            ]
    return [
        format_fixed(v, decimals, grouping=grouping) if is_number(v) else format_value_plain(v)
        for v in values
    ]


def format_interval(
    low: Any,
    high: Any,
    std_error: Any = None,
    *,
    decimals: int | None = None,
    sig: int = SIG_DIGITS,
) -> str:
    """``[low, high]``, both ends at the precision of ``std_error`` (or ``decimals``), else at
    ``sig`` significant digits.

    >>> format_interval(0.0043658, 0.0048403, 0.000121)
    '[0.00437, 0.00484]'
    >>> format_interval(0.1178, 0.1218)
    '[0.1178, 0.1218]'
    """
    errors = None if std_error is None else [std_error, std_error]
    lo, hi = format_column([low, high], errors, decimals=decimals, sig=sig)
    return f"[{lo}, {hi}]"


def format_estimate(value: Any, std_error: Any, low: Any = None, high: Any = None) -> str:
    """``value [low, high]`` (or ``value`` alone), all at the precision of ``std_error``.

    >>> format_estimate(0.119812, 0.001027, 0.117799, 0.121825)
    '0.1198 [0.1178, 0.1218]'
    >>> format_estimate(0.5, float("nan"))
    '0.5000'
    """
    cells = [value] + ([] if low is None and high is None else [low, high])
    finite = [abs(float(v)) for v in cells if is_number(v) and math.isfinite(float(v))]
    decimals = se_decimals([std_error], scale=max(finite) if finite else None)
    text = format_column(cells, decimals=decimals)
    return text[0] if len(text) == 1 else f"{text[0]} [{text[1]}, {text[2]}]"


def format_setting(value: Any) -> str:
    """A setting given per candidate, as shown: a number as ``%g`` (``max_weight`` 20), a
    tuple of names as the set ``{genre, brand}`` (an embedding's dimensions).

    Examples
    --------
    >>> format_setting(20.0), format_setting(("genre", "brand"))
    ('20', '{genre, brand}')
    """
    if isinstance(value, (tuple, list)):
        return "{" + ", ".join(str(v) for v in value) + "}"
    return f"{value:g}"


def format_signed(
    x: Any, *, decimals: int | None = None, sig: int = SIG_DIGITS, trim: bool = False
) -> str:
    """A difference with its sign: :func:`format_fixed` with ``decimals``, else
    :func:`format_number` with ``sig`` and ``trim``; ``+`` before a positive number, none
    before one that rounds to zero.

    >>> format_signed(0.0941, trim=True), format_signed(-0.07051, decimals=4), format_signed(0.0)
    ('+0.0941', '-0.0705', '0')
    >>> format_signed(0.00001, decimals=3), format_signed(float("nan"))
    ('0.000', 'nan')
    """
    text = format_fixed(x, decimals) if decimals is not None else format_number(x, sig, trim=trim)
    if text.startswith("-") or not any(c in "123456789" for c in text.split("e")[0]):
        return text
    return text if text in ("nan", "inf") else "+" + text


def format_share(share: Any) -> str:
    """A share (of rows, of mass, of a width) as a percentage: no decimals from 10% on, two
    significant digits below, ``<0.01%`` for a positive share below 0.01% (never ``0%``);
    ``nan`` for a missing one.

    >>> format_share(0.3632), format_share(0.0055), format_share(0.00031), format_share(3e-8)
    ('36%', '0.55%', '0.031%', '<0.01%')
    >>> format_share(0.0), format_share(1.0), format_share(None)
    ('0%', '100%', 'nan')
    """
    if not is_number(share) or math.isnan(float(share)):
        return "nan"
    pct = 100.0 * float(share)
    if pct == 0:
        return "0%"
    if abs(pct) < 0.01:
        return "<0.01%" if pct > 0 else "-<0.01%"
    if abs(pct) >= 10:
        return f"{pct:.0f}%"
    return f"{pct:.2g}%"


def format_value(x: Any, digits: int = SIG_DIGITS) -> str:
    """A value on its own as text: a number to ``digits`` significant digits without trailing
    zeros (integers in full, separators from 10,000 on), ``nan`` for missing, None as empty, a
    tuple or list as ``(a, b)``, text as it is.

    >>> format_value(0.0046031), format_value(0.95), format_value(100000), format_value((0, 1.5))
    ('0.004603', '0.95', '100,000', '(0, 1.5)')
    """
    if x is None:
        return ""
    if isinstance(x, (tuple, list)):
        return "(" + ", ".join(format_value(v, digits) for v in x) + ")"
    if isinstance(x, (bool, np.bool_)):
        return str(bool(x))
    if is_number(x):
        return format_number(x, digits, trim=True)
    return str(x)


def format_value_plain(x: Any) -> str:
    """A cell that is not a number: None as empty, text as it is but for the characters
    :func:`safe_text` escapes."""
    return "" if x is None else safe_text(x)


# --------------------------------------------------------------------------------------------
# text and tables
# --------------------------------------------------------------------------------------------
def wrap_text(
    text: str, *, width: int = TEXT_WIDTH, initial: str = "", subsequent: str = ""
) -> list[str]:
    """``text`` wrapped to ``width`` at spaces: the first line starts with ``initial``, the
    others with ``subsequent``. Words (names, paths) are never broken; one longer than the
    width gets a line of its own. Control characters are escaped (:func:`safe_text`); a newline
    reads as a space.

    >>> wrap_text("a bb ccc dddd", width=8, initial="- ", subsequent="  ")
    ['- a bb', '  ccc', '  dddd']
    """
    lines = textwrap.wrap(
        safe_text(text, keep_newlines=True),
        width=width,
        initial_indent=initial,
        subsequent_indent=subsequent,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return lines or [initial.rstrip()]


_LABEL: Final = re.compile(r"\[\d+\] ")
_CODE: Final = re.compile(r"`[^`\n]*`")
#: stands for a space that :func:`edit_wrapped` does not break at (a private-use character)
_KEEP: Final = "\ue000"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _paragraphs(lines: Sequence[str], width: int) -> list[tuple[int, int]]:
    """The ``[start, end)`` line ranges of the paragraphs :func:`wrap_text` wrote: an indented
    line and the lines it was wrapped onto, more indented (all by as much) and each beginning
    with a word that did not fit on the line before it (one that fits there starts a line of
    its own, e.g. an item under a heading). A line that is not indented is a paragraph alone
    (a title, a table row)."""
    out = []
    i = 0
    while i < len(lines):
        first, j, cont = _indent(lines[i]), i + 1, -1
        if lines[i].strip() and first > 0:
            while j < len(lines) and lines[j].strip():  # loop over the paragraph's lines
                indent = _indent(lines[j])
                if indent <= first or cont not in (-1, indent):
                    break
                if len(lines[j - 1]) + 1 + len(lines[j].split()[0]) <= width:
                    break  # the word would have fit on the line before: not wrapped there
                cont, j = indent, j + 1
        out.append((i, j))
        i = j
    return out


def edit_wrapped(text: str, edit: Callable[[str], str], *, width: int = TEXT_WIDTH) -> str:
    """``text`` (wrapped by :func:`wrap_text`) with ``edit`` applied to each of its paragraphs
    as one line; a paragraph that ``edit`` changes is wrapped again to ``width`` with its
    indents, so a longer wording (a command-line flag for an API name, a note number of two
    digits) never widens a line past ``width``. The other lines are kept as they are.

    A paragraph is an indented line and the lines it was wrapped onto (indented further); a
    line that is not indented (a title, a table row) is edited in place, never wrapped. A
    wrapped line under a ``[k]`` label is indented to the label's new width; a span in
    backquotes (a command line) is not broken.

    >>> text = "  gap: explore there (see\\n    Diagnostics.plan())\\n  no gaps"
    >>> print(edit_wrapped(text, lambda p: p.replace("Diagnostics.plan()", "the plan of "
    ...                                             "`ope diagnose`"), width=40))
      gap: explore there (see the plan of
        `ope diagnose`)
      no gaps
    """
    lines = text.split("\n")
    out: list[str] = []
    for i, j in _paragraphs(lines, width):  # loop over the paragraphs
        block = lines[i:j]
        joined = " ".join([block[0].rstrip()] + [line.strip() for line in block[1:]])
        edited = edit(joined)
        indent = _indent(block[0])
        if edited == joined or indent == 0 or not edited.startswith(" " * indent):
            out += block if edited == joined else edited.split("\n")
            continue
        body = edited[indent:]
        old, new = _LABEL.match(block[0][indent:]), _LABEL.match(body)
        if len(block) > 1:
            hang = _indent(block[1])
            if old and new and hang == indent + len(old.group(0)):
                hang = indent + len(new.group(0))  # under a label that changed width
        else:
            hang = indent + (len(new.group(0)) if new else 2)
        if _KEEP not in body:  # a `quoted` command line stays on one line: it is copied
            body = _CODE.sub(lambda m: m.group(0).replace(" ", _KEEP), body)
        wrapped = wrap_text(body, width=width, initial=" " * indent, subsequent=" " * hang)
        out += [line.replace(_KEEP, " ") for line in wrapped]
    return "\n".join(out)


_RULE: Final = re.compile(r"^-+(?: +-+)*$")
_REFS_HEADERS: Final = ("notes", "note refs")
_NOTE_NUMBER: Final = re.compile(r"\d+")
_SEE_NOTE: Final = re.compile(r"(\bsee note\s+)\[(\d+)\]")


def _shift_notes(text: str, offset: int, width: int) -> tuple[str, int]:
    """``text`` (one rendered result) with its notes numbered from ``offset + 1``: the labels
    of its ``Notes:`` block, the references of its table's notes column and its
    ``see note [k]``; and how many notes it has."""
    lines = text.split("\n")
    in_block, count = False, 0
    for line in lines:  # count the notes: the labels under "Notes:"
        if line == "Notes:":
            in_block = True
        elif not line.strip():
            in_block = False
        elif in_block and re.match(r"^  \[\d+\] ", line):
            count += 1
    if offset == 0 or count == 0:
        return text, count

    def shift(match: re.Match[str]) -> str:
        return str(int(match.group(0)) + offset)

    for k, line in enumerate(lines):  # a table's notes column: its last, left-aligned
        header = lines[k - 1] if k else ""
        if not (_RULE.match(line) and header.rstrip().endswith(_REFS_HEADERS)):
            continue
        start = line.rindex(" ") + 1 if " " in line else 0
        end = k + 1
        while end < len(lines) and lines[end].strip():
            row = lines[end]
            cell = row[start:]
            if re.fullmatch(r"\[[\d,]+\]", cell):
                lines[end] = row[:start] + _NOTE_NUMBER.sub(shift, cell)
            end += 1
        widest = max(len(r[start:]) for r in [header, *lines[k + 1 : end]])
        lines[k] = line[:start] + "-" * widest

    def reference(paragraph: str) -> str:  # "see note [k]"
        return _SEE_NOTE.sub(lambda m: f"{m.group(1)}[{int(m.group(2)) + offset}]", paragraph)

    def block_label(paragraph: str) -> str:  # and a note's own label, under "Notes:"
        return re.sub(
            r"^  \[(\d+)\]", lambda m: f"  [{int(m.group(1)) + offset}]", reference(paragraph)
        )

    segments: list[tuple[bool, list[str]]] = []  # (a Notes: block?, its lines)
    current: list[str] = []
    in_block = False
    for line in lines:  # split at each Notes: block (it ends at a blank line)
        if line == "Notes:" if not in_block else not line.strip():
            segments.append((in_block, current))
            current, in_block = [], not in_block
        current.append(line)
    segments.append((in_block, current))
    out: list[str] = []
    for is_block, part in segments:
        if part:
            edited = edit_wrapped(
                "\n".join(part), block_label if is_block else reference, width=width
            )
            out += edited.split("\n")
    return "\n".join(out), count


def continue_notes(texts: Sequence[str], *, width: int = TEXT_WIDTH) -> list[str]:
    """Rendered results shown one after another (a command's output) with one numbered
    sequence of notes: the notes of each text, and its references to them (its table's notes
    column, ``see note [k]``), numbered on from the previous texts' notes, so that a ``[k]``
    anywhere names one note. A text without notes is returned as it is.

    >>> first = "a\\n\\nNotes:\\n  [1] heavy weights"
    >>> second = "b: see note [1]\\n\\nNotes:\\n  [1] a gap"
    >>> print("\\n\\n".join(continue_notes([first, second])))
    a
    <BLANKLINE>
    Notes:
      [1] heavy weights
    <BLANKLINE>
    b: see note [2]
    <BLANKLINE>
    Notes:
      [2] a gap
    """
    out, offset = [], 0
    for text in texts:  # loop over the rendered results
        shifted, count = _shift_notes(text, offset, width)
        out.append(shifted)
        offset += count
    return out


def format_list(
    items: Iterable[Any], *, width: int = TEXT_WIDTH, initial: str = "", subsequent: str = ""
) -> list[str]:
    """Items joined by ``", "`` and wrapped to ``width`` (a long list of column names reads
    as a paragraph, never as one 3,000-character line).

    >>> format_list([f"x{i}" for i in range(12)], width=24, initial="columns: ",
    ...             subsequent="  ")
    ['columns: x0, x1, x2, x3,', '  x4, x5, x6, x7, x8,', '  x9, x10, x11']
    """
    return wrap_text(
        ", ".join(format_value_plain(i) for i in items),
        width=width,
        initial=initial,
        subsequent=subsequent,
    )


def format_table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    right: Sequence[bool] | None = None,
    indent: str = "",
) -> list[str]:
    """Lines of a table of text cells: each column as wide as its widest cell (header
    included), :data:`COLUMN_GAP` spaces between columns, a rule under the header.

    ``right[j]`` right-aligns column ``j`` (numbers); the others are left-aligned. Cells are
    never truncated (but escaped: :func:`safe_text`); trailing spaces are stripped.

    >>> print("\\n".join(format_table(["policy", "value"],
    ...                                [["a_rather_long_policy_name", "0.12"], ["b", "1.50"]],
    ...                                right=[False, True])))
    policy                     value
    -------------------------  -----
    a_rather_long_policy_name   0.12
    b                           1.50
    """
    ncol = len(header)
    header = [safe_text(h) for h in header]
    rows = [[safe_text(c) for c in row] for row in rows]
    right = list(right) if right is not None else [False] * ncol
    widths = [max([len(str(header[j]))] + [len(str(row[j])) for row in rows]) for j in range(ncol)]
    gap = " " * COLUMN_GAP

    def line(cells: Sequence[str]) -> str:
        parts = [str(c).rjust(w) if r else str(c).ljust(w) for c, w, r in zip(cells, widths, right)]
        return (indent + gap.join(parts)).rstrip()

    return [line(header), (indent + gap.join("-" * w for w in widths)).rstrip()] + [
        line(row) for row in rows
    ]


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``count`` with its noun in the right number: ``1 episode``, ``1,200 episodes``.

    Examples
    --------
    >>> from ope._format import plural
    >>> plural(1, "candidate policy", "candidate policies"), plural(1200, "episode")
    ('1 candidate policy', '1,200 episodes')
    """
    return f"{count:,} {noun if count == 1 else nouns or noun + 's'}"
