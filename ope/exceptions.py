"""The exception and warning tree of ope, drawn in one place.

Raise when a value cannot be computed; warn (and add a note to the result) when it can be
computed but is suspect.

Exceptions::

    OPEError                      base of every error ope raises on purpose
    ├── ParameterError            an argument (not the data) is malformed: CLI exit 2
    ├── SchemaError               columns missing, mistyped or not castable without loss
    ├── ValidationError           rows break a rule (carries the ValidationReport)
    ├── DataFileError             a path is missing, empty, corrupt or not parquet
    ├── OutputError               a file ope writes cannot be created or written: CLI exit 73
    ├── PolicyError               a candidate policy is malformed (does not sum to 1, misses events)
    ├── MissingBoundsError        an interval method needs a priori bounds that were not given
    ├── EstimationError           the data do not allow the value to be computed
    └── MissingDependencyError    an optional dependency (an extra) is not installed

All of them also derive from ``ValueError`` (except ``DataFileError`` and ``OutputError``,
which derive from ``OSError``, and ``MissingDependencyError``, from ``ImportError``), so callers
that already catch the builtin keep working; ``ParameterError`` derives
from ``TypeError`` too, as it also reports arguments of the wrong type.

A bad argument (``confidence_level=1.5``, ``max_weight="10"``) is a ``ParameterError``; bad data
(a propensity of 0 in row 17) is a ``ValidationError``. The command line maps the first to exit
code 2 (usage), the data errors to 65 and ``OutputError`` (no space left, no permission, a
read-only file system) to 73, sysexits' ``EX_CANTCREAT``.

Warnings::

    OPEWarning
    ├── OverlapWarning            low effective sample size, weights far from mean 1, support gaps
    ├── SmallSampleWarning        too few rows for the asymptotics of the chosen method
    └── DroppedRowsWarning        rows were dropped under ``on_invalid="drop"``
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "OPEError",
    "ParameterError",
    "SchemaError",
    "ValidationError",
    "DataFileError",
    "OutputError",
    "PolicyError",
    "MissingBoundsError",
    "EstimationError",
    "MissingDependencyError",
    "OPEWarning",
    "OverlapWarning",
    "SmallSampleWarning",
    "DroppedRowsWarning",
]


class OPEError(Exception):
    """Base class of the errors that ope raises on purpose."""


class ParameterError(OPEError, ValueError, TypeError):
    """An argument is malformed: wrong type, out of its range, or an unknown name.

    The message names the argument, what it received and what it accepts. It is about the call,
    not the data: the command line answers it with exit code 2.
    """


class SchemaError(OPEError, ValueError):
    """Columns are missing, mistyped, or cannot be cast without loss.

    The message lists every problem at once, not only the first.
    """


class ValidationError(OPEError, ValueError):
    """Rows break a validation rule.

    Attributes
    ----------
    report : ope.ValidationReport
        Rows read, used and rejected by reason, with the first row numbers of each reason.
    """

    def __init__(self, message: str, report: Any = None) -> None:
        super().__init__(message)
        self.report = report


class DataFileError(OPEError, OSError):
    """A path is missing, empty, corrupt, or not a parquet file."""


class OutputError(OPEError, OSError):
    """A file ope writes cannot be created or written: no space left on the device, the file is
    too large for it, a quota is exceeded, no permission, or a read-only file system.

    The message names the path and the system's reason. The command line answers it with exit
    code 73 (sysexits ``EX_CANTCREAT``), before the work when the folder can be probed, after
    it otherwise (the temporary file removed, the destination untouched).
    """


class PolicyError(OPEError, ValueError):
    """A candidate policy is malformed: probabilities outside [0, 1], rows that do not sum to
    one, events it does not cover, or an unknown policy name."""


class MissingBoundsError(OPEError, ValueError):
    """An interval method needs a priori bounds (reward range, weight bound) that were not given.

    Empirical maxima are never used in their place: a bound read off the data is not a bound.
    """


class EstimationError(OPEError, ValueError):
    """The data do not allow the requested value to be computed (e.g. all weights are zero)."""


class MissingDependencyError(OPEError, ImportError):
    """An optional dependency is not installed; the message names the extra that installs it
    (``pip install 'ope-toolkit[spark]'``)."""


class OPEWarning(UserWarning):
    """Base class of ope's warnings: the value was computed but is suspect."""


class OverlapWarning(OPEWarning):
    """The candidate policy goes where the logging policy rarely or never went."""


class SmallSampleWarning(OPEWarning):
    """Too few rows for the asymptotics the chosen method relies on."""


class DroppedRowsWarning(OPEWarning):
    """Invalid rows were dropped (``on_invalid="drop"``); counts are kept on every result."""
