r"""Off-policy evaluation with continuous actions (a price, a bid, a dose, a temperature).

A logged row holds the context :math:`x_i`, the real-valued action :math:`a_i` the logger took,
the logger's **density** :math:`q_i = \pi_0(a_i \mid x_i)` at that action (not a probability:
it can exceed 1) and the reward :math:`r_i`. A deterministic candidate :math:`\pi(x)` almost
never takes exactly the logged action, so the importance weight :math:`\mathbb 1[a_i = \pi(x_i)]
/ q_i` is useless; kernel smoothing (Kallus & Zhou, AISTATS 2018) replaces the indicator by a
kernel of bandwidth :math:`h`:

.. math:: w_i = \frac{K\big((\pi(x_i) - a_i)/h\big)}{h\, q_i},

and kernel IPS, self-normalized kernel IPS (SNIPS) and kernel DR are the estimators of
:func:`ope.evaluate` on these weights (:func:`evaluate_continuous`). They estimate the value of
the *smoothed* candidate (its action plus kernel noise of scale :math:`h`), not of the candidate
itself: the smoothing bias is of order :math:`h^2` (:math:`-\tfrac12 h^2 \mu_2(K)\,\mathbb E[
\partial_a^2 \mu(x, \pi(x))]`, with :math:`\mu_2(K) = \int u^2 K(u)\,du`) and the variance of
order :math:`1/(n h)` (:math:`R(K) = \int K^2`), so no bandwidth removes both. ope chooses it
per candidate in two steps: SLOPE++ over a grid (Su, Srinath & Krishnamurthy, ICML 2020: the
widest interval first, the largest bandwidth whose estimate stays within the intervals of every
smaller one, :func:`ope.evaluation.slope_index`) finds the bandwidth that balances the bias
against the interval's width, a choice for the mean squared error at which the interval still
misses the value about half the time; ope then **undersmooths**, using the bandwidth
:data:`UNDERSMOOTH_STEPS` grid steps below (0.35 times SLOPE's), where the bias is an eighth and
the interval 1.7 times wider. The whole trade-off is reported: every grid bandwidth's estimate,
standard error and effective rows, SLOPE's and the one used (``result.bandwidths``). The
intervals are those of the smoothed value; ``benchmarks/continuous.py`` measures how often they
cover the candidate's own.

Candidates come in three forms:

- **deterministic**: the candidate's action per row (``target__<name>`` numeric columns, or an
  array ``(n,)``, or a function of the context); kernel weights as above;
- **stochastic, by samples**: ``m`` actions drawn from the candidate per row
  (``target__<name>`` list columns, or an array ``(n, m)``); the weight is the kernel-smoothed
  candidate density :math:`\frac1m\sum_j K_h(a_{ij} - a_i) / q_i`;
- **stochastic, by density**: the candidate's density at the logged action
  (``density__<name>`` columns or ``densities=``): the exact weight :math:`\pi(a_i\mid x_i)/q_i`,
  no kernel and no smoothing bias (with samples as well, DR's model term averages over them).

Kernel DR (:math:`\hat q(x, \pi) + w_i (r_i - \hat q(x_i, a_i))`) uses a reward model of
:math:`(x, a)`: cross-fitted on the logs' numeric context columns (a quadratic ridge regression
by default, any scikit-learn regressor with ``reward_model=``) or your predictions
(``q_column``: the model at the logged action, ``v_column``: at the candidate's). The model at
the logged action makes DR's smoothing bias that of the model's residual, smaller than IPS's when
the model is good; Open Bandit Pipeline's kernel DR puts the model at the candidate's action in
both places (give the same column as ``q_column`` and ``v_column`` to reproduce it).

Vowpal Wabbit's continuous-action DSJSON (CATS, ``"_label_ca": {"action", "cost",
"pdf_value"}``, optional ``"pdf"`` segments) reads directly (:func:`read_continuous` on a
``.json``/``.json.gz`` file): ``reward = -cost``, ``density = pdf_value`` (checked against the
``pdf`` segments when the line has them), ``weight = 1 / (1 - pdrop)``, the context ``c``
flattened to numeric columns as VW hashes it (a string value ``"k": "v"`` is the feature
``k=v`` of value 1; an absent feature is 0); a line without ``c`` has no context. A file is
read in one form, as VW reads it with ``--dsjson`` or ``--json``: that of its first line with a
top-level key not starting with ``_``. That line is DSJSON when it has ``c``, ``EventId``,
``Timestamp``, ``Version``, ``VWState``, ``pdrop`` or a ``pdf`` array; otherwise the file is
VW's plain JSON form (``vw --json``), whose features are all the top-level keys not starting
with ``_``, read as ``c``'s would be (VW puts both in its default namespace), those named as
DSJSON fields included. The report notes the top-level keys a DSJSON line has that are not
read, and the lines whose keys show the other form. ``pdf_value: "NaN"`` and ``cost: "NaN"``
read as NaN, as VW's JSON parser reads them, and are rejected (``cats_pdf_value_invalid``,
``reward_missing``) with a note; so is a line with a ``_label`` key under ``c``, which VW would
read as its label.

References
----------
.. [1] N. Kallus and A. Zhou, "Policy evaluation and optimization with continuous treatments",
   AISTATS 2018.
.. [2] N. Kallus and M. Uehara, "Doubly robust off-policy value and gradient estimation for
   deterministic policies", NeurIPS 2020.
.. [3] Y. Su, T. Srinath and A. Krishnamurthy, "Adaptive estimator selection for off-policy
   evaluation", ICML 2020.
"""

from __future__ import annotations

import dataclasses
import gzip
import math
import warnings
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import msgspec
import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa

from ope._format import plural
from ope._paths import UTF8_BOM, check_regular_file, csv_column_names
from ope._result import INTERVAL_COLUMNS, Result, ResultParts, interval_rows
from ope._thresholds import MIN_ROWS, kish_ess
from ope._validation import (
    MAX_FINITE_WEIGHT,
    check_choice,
    check_chosen,
    check_confidence_level,
    check_model_columns,
    check_name,
    check_names,
    check_positive_real,
    check_rng,
    fold_assignment,
    show_value,
)
from ope.importers._common import (
    NOT_A_NUMBER,
    broken_rules,
    import_failure,
    lines_before_damage,
    no_gc,
    object_fields,
    vw_number,
    warn_dropped_invalid,
)
from ope.logs import EXAMPLE_ROWS, ValidationReport
from ope.exceptions import (
    DataFileError,
    EstimationError,
    OPEWarning,
    ParameterError,
    SchemaError,
    ValidationError,
)

__all__ = [
    "BANDWIDTH_RANGE",
    "check_bandwidth",
    "KERNELS",
    "KERNEL_MOMENTS",
    "CONTINUOUS_ESTIMATORS",
    "MIN_WINDOW_ESS",
    "MIN_LARGEST_WEIGHT",
    "UNDERSMOOTH_STEPS",
    "MAX_DSJSON_FEATURES",
    "bandwidth_grid",
    "ContinuousLogs",
    "ContinuousEvaluation",
    "kernel",
    "read_continuous",
    "evaluate_continuous",
]

#: The kernels, each a density on the real line: ``gaussian`` (unbounded support) and three of
#: support [-1, 1]: ``epanechnikov`` :math:`\frac34(1-u^2)`, ``triangular`` :math:`1-|u|`,
#: ``cosine`` :math:`\frac\pi4\cos(\pi u/2)` (Open Bandit Pipeline's four).
KERNELS: Final = ("gaussian", "epanechnikov", "triangular", "cosine")

#: Per kernel, :math:`(\mu_2(K), R(K)) = (\int u^2 K, \int K^2)`: the constants of the smoothing
#: bias (:math:`\propto h^2 \mu_2`) and of the variance (:math:`\propto R / (n h)`).
KERNEL_MOMENTS: Final[dict[str, tuple[float, float]]] = {
    "gaussian": (1.0, 1.0 / (2.0 * math.sqrt(math.pi))),
    "epanechnikov": (0.2, 0.6),
    "triangular": (1.0 / 6.0, 2.0 / 3.0),
    "cosine": (1.0 - 8.0 / math.pi**2, math.pi**2 / 16.0),
}

#: The half-width of the kernel window in bandwidths: the rows "in the window" of a
#: deterministic candidate are those with :math:`|\pi(x_i) - a_i| \le c\,h` (c = 1 for the
#: compact kernels; 1.96 for the gaussian, 95% of its mass).
_WINDOW: Final = {
    "gaussian": 1.959963984540054,
    "epanechnikov": 1.0,
    "triangular": 1.0,
    "cosine": 1.0,
}

#: A bandwidth whose weights have fewer effective rows (Kish) than this is not used: its
#: standard error is not trustworthy (a window of a handful of rows), and a candidate whose
#: every grid bandwidth is below it is not evaluable from these logs.
MIN_WINDOW_ESS: Final = 30

#: The bandwidth grid of SLOPE: the reference width ``s n^(-1/5)`` (``s`` the robust spread of
#: the distances between the candidate's and the logged actions; ``n^(-1/5)`` the MSE-optimal
#: rate of a second-order kernel) times ``2^(k/2)`` for these ``k``: from 1/8 to 4 times it.
_GRID_STEPS: Final = tuple(range(-6, 5))

#: The bandwidth used is this many grid steps (of a factor sqrt(2)) below SLOPE's choice, i.e.
#: 2^(-3/2) ~ 0.35 times it: SLOPE balances the smoothing bias against the interval's width (an
#: MSE choice), so at its bandwidth the interval of a curved reward misses the candidate's value
#: about half the time; at 0.35 times it the bias (of order h^2) is an eighth and the standard
#: error 1.7 times larger, and the intervals cover (``benchmarks/continuous.py``; two steps left
#: SNIPS at 0.86-0.91 there).
UNDERSMOOTH_STEPS: Final = 3

#: The estimators of continuous actions: the weighting ones run through :func:`ope.evaluate`;
#: ``dr`` with the reward model here.
CONTINUOUS_ESTIMATORS: Final = ("ips", "snips", "clipped_ips", "dr")

#: The column names that are not context (candidates are recognized by prefix).
_TARGET: Final = "target__"
_DENSITY: Final = "density__"
_COLUMNS_OF_CANDIDATES: Final = "target__<name> or density__<name> columns, or `candidates`"


def kernel(u: npt.ArrayLike, name: str = "gaussian") -> npt.NDArray[np.float64]:
    """The kernel ``name`` (:data:`KERNELS`) at ``u``; each integrates to 1.

    Examples
    --------
    >>> from ope.continuous import kernel
    >>> [round(float(kernel(0.0, k)), 4) for k in ("gaussian", "epanechnikov", "triangular")]
    [0.3989, 0.75, 1.0]
    """
    how = check_choice(name, "kernel", KERNELS)
    x = np.asarray(u, dtype=np.float64)
    if how == "gaussian":
        return np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    inside = np.abs(x) <= 1.0
    if how == "epanechnikov":
        values = 0.75 * (1.0 - x * x)
    elif how == "triangular":
        values = 1.0 - np.abs(x)
    else:
        values = (math.pi / 4.0) * np.cos(x * (math.pi / 2.0))
    return np.where(inside, values, 0.0)


# --------------------------------------------------------------------------------------------
# the logs
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class ContinuousLogs:
    """Validated continuous-action logs (:func:`read_continuous`).

    Attributes
    ----------
    action, density, reward : ndarray (n,)
        The logged action, the logger's density at it (> 0) and the reward.
    weight : ndarray (n,) or None
        Sampling (Horvitz-Thompson) weights of the rows, e.g. ``1 / (1 - pdrop)``.
    context : pandas.DataFrame
        The numeric context columns (the reward model's features; may have none).
    candidates : dict of str to ndarray
        Per candidate its action per row ``(n,)`` or ``m`` samples per row ``(n, m)``.
    densities : dict of str to ndarray
        Per candidate its density at the logged action ``(n,)``.
    support : tuple of two ndarrays or None
        The logger's action range per row (from the DSJSON ``pdf`` segments), when known.
    notes : tuple of str
        What reading did (lines dropped and why).
    source : str
    table : pyarrow.Table or None
        The table read, for columns named later (a reward model's predictions).
    report : ope.ValidationReport or None
        The rows (DSJSON: non-blank lines) read, used and rejected by reason.
    """

    action: np.ndarray
    density: np.ndarray
    reward: np.ndarray
    weight: np.ndarray | None = None
    context: pd.DataFrame = field(default_factory=pd.DataFrame)
    candidates: dict[str, np.ndarray] = field(default_factory=dict)
    densities: dict[str, np.ndarray] = field(default_factory=dict)
    support: tuple[np.ndarray, np.ndarray] | None = None
    notes: tuple[str, ...] = ()
    source: str = "<memory>"
    #: the table read (for columns named later, e.g. a reward model's predictions)
    table: pa.Table | None = field(default=None, repr=False)
    report: ValidationReport | None = field(default=None, repr=False)

    @property
    def n(self) -> int:
        """The number of rows."""
        return int(self.action.shape[0])

    @property
    def policies(self) -> list[str]:
        """The candidates the logs hold, in column order."""
        return list(dict.fromkeys([*self.candidates, *self.densities]))

    def with_candidates(
        self,
        candidates: Mapping[str, Any] | None = None,
        densities: Mapping[str, Any] | None = None,
    ) -> ContinuousLogs:
        """These logs with more candidates (arrays ``(n,)``/``(n, m)``, functions of the context,
        or densities at the logged action); a name given again replaces the logs' own."""
        cands = dict(self.candidates)
        dens = dict(self.densities)
        for argument, given in (("candidates", candidates), ("densities", densities)):
            if given is not None and not isinstance(given, Mapping):
                raise ParameterError(
                    f"`{argument}` must be a mapping of candidate names to arrays or functions; "
                    f"got {type(given).__name__}."
                )
        for name, value in (candidates or {}).items():  # a loop over candidates
            key = check_name(name, "candidates", what="a candidate name")
            if callable(value):
                value = value(self.context)
            cands[key] = _candidate_actions(value, f"`candidates`[{key!r}]", self.n)
            if key not in (densities or {}):
                dens.pop(key, None)  # replaced: the logs' density was of the former candidate
        for name, value in (densities or {}).items():  # a loop over candidates
            key = check_name(name, "densities", what="a candidate name")
            if callable(value):
                value = value(self.context, self.action)
            dens[key] = _finite(value, f"`densities`[{key!r}]", self.n, low=0.0)
            if key not in (candidates or {}) and cands.get(key, np.empty((0, 0))).ndim == 1:
                cands.pop(key)  # replaced: a density is a stochastic candidate
        _check_forms(cands, dens)
        return dataclasses.replace(self, candidates=cands, densities=dens)


def _check_forms(candidates: Mapping[str, np.ndarray], densities: Mapping[str, np.ndarray]) -> None:
    """A candidate with a density (stochastic) may have samples, not one action per row."""
    both = [p for p in densities if p in candidates and candidates[p].ndim == 1]
    if both:
        raise ValidationError(
            f"candidate {both[0]!r} has a density at the logged action (stochastic) and one "
            "action per row (deterministic): give its samples (a list of actions per row, "
            "target__<name> as a list column) with the density, or only one of the two."
        )


def _finite(
    values: Any, label: str, n: int | None, *, low: float | None = None, open_low: bool = False
) -> np.ndarray:
    """A float vector ``(n,)``, finite (and ``> low`` / ``>= low``), or the error naming the row
    (``label`` names the argument, e.g. ```density_column` (column 'p')``)."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValidationError(f"{label} must be numeric.") from None
    if arr.ndim != 1 or (n is not None and arr.shape[0] != n):
        raise ValidationError(
            f"{label} must be one value per row ({n if n is not None else 'n'}); got shape "
            f"{arr.shape}."
        )
    bad = ~np.isfinite(arr)
    if low is not None:
        bad |= (arr <= low) if open_low else (arr < low)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        need = "finite" if low is None else f"finite and {'>' if open_low else '>='} {low:g}"
        raise ValidationError(
            f"{label} must be {need}; row {row} holds {float(arr[row])!r} ({int(bad.sum())} "
            "such row(s))."
        )
    return arr


def _candidate_actions(values: Any, name: str, n: int) -> np.ndarray:
    """A candidate's actions: ``(n,)`` (deterministic) or ``(n, m)`` samples, finite."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValidationError(
            f"{name} must be numeric: one action per row, or m sampled actions per row "
            "(an (n, m) array of equal-length lists)."
        ) from None
    if arr.ndim not in (1, 2) or arr.shape[0] != n or (arr.ndim == 2 and arr.shape[1] == 0):
        raise ValidationError(
            f"{name} must have shape ({n},) (one action per row) or ({n}, m) with m >= 1 "
            f"(sampled actions); got {arr.shape}."
        )
    bad = ~np.isfinite(arr)
    if bad.any():
        row = int(np.flatnonzero(bad.reshape(n, -1).any(axis=1))[0])
        raise ValidationError(f"{name} must be finite; row {row} is not.")
    return arr


def _source_table(
    source: Any, argument: str, on_invalid: str = "raise"
) -> tuple[pa.Table, tuple[str, ...], str, Any, ValidationReport | None]:
    """The table of ``source``, the reading notes, its name, the DSJSON support (or None) and
    the DSJSON reader's report (None for a table)."""
    if isinstance(source, pa.Table):
        return source, (), "<table>", None, None
    if isinstance(source, pd.DataFrame):
        try:
            return pa.Table.from_pandas(source, preserve_index=False), (), "<DataFrame>", None, None
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as exc:
            raise SchemaError(
                f"`{argument}`: the DataFrame has a column of mixed types ({exc}); give each "
                "column one type."
            ) from None
    if isinstance(source, Mapping):
        try:
            return pa.table(dict(source)), (), "<mapping>", None, None
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as exc:
            raise SchemaError(
                f"`{argument}`: the mapping is not a table of columns ({exc})."
            ) from None
    if isinstance(source, (str, Path)):
        # a regular local file (never a FIFO, which would block) whose name pyarrow can open
        path = check_regular_file(Path(source), f"`{argument}`")
        name = path.name
        try:
            kind = _file_kind(path)
            if kind == "dsjson":
                table, notes, support, report = _read_cats(path, on_invalid)
                return table, notes, name, support, report
            if kind == "csv":
                import pyarrow.csv as pacsv

                table = pacsv.read_csv(path)
                csv_column_names(table, f"`{argument}`: {name!r}")
                return table, (), name, None, None
            import pyarrow.parquet as pq

            return pq.read_table(path), (), name, None, None
        except (pa.ArrowInvalid, OSError) as exc:
            if isinstance(exc, DataFileError):
                raise
            raise DataFileError(f"`{argument}`: {name!r} cannot be read: {exc}") from None
    raise ParameterError(
        f"`{argument}` must be ContinuousLogs, a parquet/CSV/DSJSON file path, a pandas DataFrame, a "
        f"pyarrow Table or a mapping of columns; got {type(source).__name__}."
    )


#: The JSON-lines suffixes read as continuous-action DSJSON (also gzipped).
_JSON_SUFFIXES: Final = (".json", ".jsonl", ".dsjson")


def _file_kind(path: Path) -> str:
    """``"dsjson"``, ``"csv"`` or ``"parquet"``: by the first bytes (gzip, or a JSON object
    after an optional byte-order mark; parquet's magic), else by the name."""
    suffixes = "".join(path.suffixes[-2:]).lower().removesuffix(".gz")
    with open(path, "rb") as fh:
        head = fh.read(4096)
    if head[:2] == b"\x1f\x8b":  # gzip: a CSV by its name (pyarrow reads .csv.gz), else JSON
        return "csv" if suffixes.endswith(".csv") else "dsjson"
    if head.removeprefix(UTF8_BOM).lstrip().startswith(b"{"):
        return "dsjson"
    if head[:4] == b"PAR1":
        return "parquet"
    if suffixes.endswith(_JSON_SUFFIXES):
        return "dsjson"
    return "csv" if suffixes.endswith(".csv") else "parquet"


def _column(table: pa.Table, column: str, argument: str) -> pa.ChunkedArray:
    if column not in table.column_names:
        names = ", ".join(map(show_value, table.column_names[:20]))
        raise SchemaError(
            f"`{argument}`: no column {show_value(column)} in the logs; columns: "
            f"{names or '(none)'}."
        )
    return table.column(column)


def _numeric(table: pa.Table, column: str, argument: str, **limits: Any) -> np.ndarray:
    col = _column(table, column, argument)
    kind = col.type
    if not (pa.types.is_floating(kind) or pa.types.is_integer(kind)):
        raise SchemaError(f"`{argument}`: column {column!r} must be numeric; it holds {kind}.")
    if col.null_count:
        row = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
        raise ValidationError(f"`{argument}`: column {column!r} is missing at row {row}.")
    return _finite(
        col.to_numpy(zero_copy_only=False), f"`{argument}` (column {column!r})", None, **limits
    )


def _samples_column(table: pa.Table, column: str, name: str) -> np.ndarray:
    """A list column of sampled actions as ``(n, m)`` (every row the same m >= 1)."""
    col = table.column(column).combine_chunks()
    if col.null_count:
        row = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
        raise ValidationError(f"column {column!r} is missing at row {row}.")
    lengths = np.asarray(col.value_lengths().to_numpy(zero_copy_only=False), dtype=np.int64)
    if lengths.size and (lengths.min() != lengths.max() or lengths[0] == 0):
        common = int(np.bincount(lengths).argmax())  # the most frequent count
        row = int(np.flatnonzero((lengths != common) | (lengths == 0))[0])
        raise ValidationError(
            f"`policies` (column {column!r}): every row must hold the same number (>= 1) of "
            f"sampled actions; row {row} holds {int(lengths[row])}, most rows {common}."
        )
    flat = col.flatten()
    if not (pa.types.is_floating(flat.type) or pa.types.is_integer(flat.type)):
        raise SchemaError(
            f"`policies` (column {column!r}) must hold lists of numbers; it holds {col.type}."
        )
    if flat.null_count:
        item = int(np.flatnonzero(flat.is_null().to_numpy(zero_copy_only=False))[0])
        row = int(np.searchsorted(np.cumsum(lengths), item, side="right"))
        raise ValidationError(
            f"`policies` (column {column!r}): a sampled action is missing at row {row}."
        )
    m = int(lengths[0]) if lengths.size else 1
    values = np.asarray(flat.to_numpy(zero_copy_only=False), dtype=np.float64)
    return _candidate_actions(values.reshape(-1, m), f"`policies` (column {column!r})", len(col))


def read_continuous(
    source: Any,
    *,
    action_column: str = "action",
    density_column: str = "density",
    reward_column: str = "reward",
    weight_column: str | None = None,
    context_columns: Sequence[str] | None = None,
    policies: Sequence[str] | None = None,
    on_invalid: str = "raise",
) -> ContinuousLogs:
    """Read and validate continuous-action logs.

    Parameters
    ----------
    source : path, pandas.DataFrame, pyarrow.Table or mapping of columns
        A parquet or CSV file, or Vowpal Wabbit's continuous-action DSJSON (see the module;
        recognized by its first bytes, a JSON object or gzip, whatever its name: ``.json``,
        ``.dsjson``, ``.json.gz``, ...).
    action_column, density_column, reward_column : str
        The logged action, the logger's density at it (> 0) and the reward.
    weight_column : str, optional
        Sampling weights of the rows (> 0); by default the ``weight`` column when there is one.
    context_columns : sequence of str, optional
        The reward model's features (default: every other numeric column).
    policies : sequence of str, optional
        The candidates to read (default: every ``target__<name>`` and ``density__<name>``).
    on_invalid : {"raise", "drop"}, default "raise"
        For DSJSON: what to do with lines that break a rule (counted by reason in
        ``logs.report``, line numbers from 0 as the DSJSON importer gives them): the DSJSON
        importer's reasons (``dsjson_bad_json``, ``dsjson_field_type``, ``dsjson_kind_mismatch``
        for a CB or CCB line, ``dsjson_pdrop_out_of_range``, ``event_id_duplicate``) and
        ``cats_pdf_value_invalid``, ``cats_pdf_malformed``, ``cats_pdf_mismatch`` and
        ``reward_missing`` (a cost of "NaN"). Lines Vowpal Wabbit skips (``dsjson_skip_learn``,
        ``dsjson_unlabeled``, ``dsjson_not_object``) are counted and never raise. A table is
        checked whole: a value that breaks a rule raises, naming its row.

    Raises
    ------
    ope.SchemaError
        A named column is missing or not numeric.
    ope.ValidationError
        A value is missing or not finite, a density is not > 0 (the logger could not have taken
        the action), a sampling weight is not > 0 (row named); DSJSON lines that break a rule
        (``on_invalid="raise"``; the report is on the error); no line left.
    ope.DataFileError
        The file cannot be read (damaged gzip, more features than ``MAX_DSJSON_FEATURES``:
        the message says how many it found).

    Examples
    --------
    >>> import ope
    >>> logs = ope.read_continuous({"action": [0.1, 0.5], "density": [0.8, 1.2],
    ...                             "reward": [1.0, 0.0], "target__up": [0.2, 0.6]})
    >>> logs.n, logs.policies
    (2, ['up'])
    """
    on_invalid = check_choice(on_invalid, "on_invalid", ("raise", "drop"))
    table, notes, name, support, report = _source_table(source, "source", on_invalid)
    if table.num_columns == 0:
        raise SchemaError(f"`source`: {name!r} has no columns (an empty directory or file?).")
    twice = [c for c in dict.fromkeys(table.column_names) if table.column_names.count(c) > 1]
    if twice:
        raise SchemaError(f"`source`: {name!r} has the column {twice[0]!r} twice.")
    if table.num_rows < MIN_ROWS:
        raise ValidationError(
            f"`source`: {name!r} has {table.num_rows} row(s); an estimate and its standard "
            f"error need at least {MIN_ROWS}."
        )
    columns = {"action_column": action_column, "density_column": density_column}
    columns["reward_column"] = reward_column
    for argument, value in columns.items():
        check_name(value, argument, what="a column name")
    action = _numeric(table, action_column, "action_column")
    n = action.shape[0]
    density = _numeric(table, density_column, "density_column", low=0.0, open_low=True)
    reward = _numeric(table, reward_column, "reward_column")
    if weight_column is None and "weight" in table.column_names:
        weight_column = "weight"
    weight = None
    if weight_column is not None:
        check_name(weight_column, "weight_column", what="a column name")
        weight = _numeric(table, weight_column, "weight_column", low=0.0, open_low=True)
    names = table.column_names
    found = [c[len(_TARGET) :] for c in names if c.startswith(_TARGET)]
    found += [c[len(_DENSITY) :] for c in names if c.startswith(_DENSITY)]
    found = list(dict.fromkeys(found))
    chosen = check_chosen(
        policies, found, columns=_COLUMNS_OF_CANDIDATES, example="['up']", allow_empty=True
    )
    candidates: dict[str, np.ndarray] = {}
    densities: dict[str, np.ndarray] = {}
    for p in chosen:  # a loop over candidates
        t_col, d_col = _TARGET + p, _DENSITY + p
        if t_col in names:
            kind = table.schema.field(t_col).type
            if pa.types.is_list(kind) or pa.types.is_large_list(kind):
                candidates[p] = _samples_column(table, t_col, p)
            else:
                candidates[p] = _numeric(table, t_col, "policies")
        if d_col in names:
            densities[p] = _numeric(table, d_col, "policies", low=0.0)
    used = {action_column, density_column, reward_column, weight_column}
    if context_columns is None:
        ctx_names = [
            c
            for c in names
            if c not in used
            and not c.startswith((_TARGET, _DENSITY))
            and (
                pa.types.is_floating(table.schema.field(c).type)
                or pa.types.is_integer(table.schema.field(c).type)
            )
            and c not in ("event_id",)
        ]
    else:
        ctx_names = [
            check_name(c, "context_columns", what="a column name")
            for c in check_names(context_columns, "context_columns")
        ]
    context = pd.DataFrame(
        {c: _numeric(table, c, "context_columns") for c in ctx_names}, index=pd.RangeIndex(n)
    )
    _check_forms(candidates, densities)
    return ContinuousLogs(
        action=action,
        density=density,
        reward=reward,
        weight=weight,
        context=context,
        candidates=candidates,
        densities=densities,
        support=support,
        notes=notes,
        source=name,
        table=table,
        report=report if report is not None else ValidationReport(name, n, n),
    )


# --------------------------------------------------------------------------------------------
# Vowpal Wabbit's continuous-action DSJSON
# --------------------------------------------------------------------------------------------
class _Label(msgspec.Struct, forbid_unknown_fields=True):
    """``_label_ca`` as VW's writers spell it; a property left out is None (VW reads it as 0).
    A cost or density may be the string "NaN" (any case), which VW's JSON parser reads as NaN;
    the action may not (VW refuses a string there)."""

    action: float | None = None
    cost: float | str | None = None
    pdf_value: float | str | None = None


_LABEL: Final = msgspec.json.Decoder(_Label).decode

#: The properties of a continuous label object (``_label_ca...: {...}``), as VW's
#: ``LabelObjectState`` compares them (``_stricmp``: in any ASCII case), each with the
#: :class:`_Label` field it sets, or None for the simple label's (``Label``, ``Initial``,
#: ``Weight``: a number or "NaN", accepted and not read). VW refuses the line for any other
#: property, and reads ``Probability`` as a CB label, not the continuous one.
_LABEL_CA_PROPERTIES: Final[dict[str, str | None]] = {
    "action": "action",
    "cost": "cost",
    "pdf_value": "pdf_value",
    "label": None,
    "initial": None,
    "weight": None,
}


def _label_object(value: Any) -> _Label:
    """A continuous label object decoded whole (``value``: a mapping, or what else the key
    held) as VW's reader takes it: properties in any case, a null property skipped, a later
    spelling of a property winning. Raises ``msgspec.ValidationError`` where VW refuses the
    line (not an object, an unknown property, a value of another type), or reads another kind
    of label (``Probability``)."""
    try:
        return msgspec.convert(value, _Label)
    except msgspec.ValidationError:
        if not isinstance(value, Mapping):
            raise
    got: dict[str, Any] = {}
    for key, item in value.items():  # a loop over one label's properties
        name = _LABEL_CA_PROPERTIES.get(key.lower(), "?") if key.isascii() else "?"
        if item is None:  # VW skips a null
            continue
        if name == "?":
            raise msgspec.ValidationError(
                f"`_label_ca` has the property {show_value(key)}: VW reads Action, Cost and "
                "Pdf_value there (and the simple label's Label, Initial, Weight), in any case"
            )
        if name is None:
            if isinstance(item, bool) or not (
                isinstance(item, (int, float)) or vw_number(item) is not NOT_A_NUMBER
            ):
                raise msgspec.ValidationError(f'`_label_ca.{key}` must be a number or "NaN"')
            continue
        got[name] = item
    return msgspec.convert(got, _Label)


def _label_raw(raw: msgspec.Raw) -> _Label | None:
    """A ``_label_ca...`` key's undecoded value as :func:`_label_object` reads it."""
    try:
        return _LABEL(raw)
    except msgspec.ValidationError:
        value = _JSON_VALUES(raw)
        return None if value is None else _label_object(value)


class _Segment(msgspec.Struct):
    left: float | None = None
    right: float | None = None
    pdf_value: float | None = None
    chosen_action: float | None = None


class _CatsLine(msgspec.Struct, forbid_unknown_fields=True):
    """The fields of a continuous-action DSJSON line ope reads, the labels of the other kinds
    (CB, CCB) only as present or not, and the bookkeeping VW's writers add, skipped unread.
    Decoding refuses any other key (and a field of another type): such a line is read key by
    key (:func:`_line_by_keys`); a line of VW's plain JSON form is built from its keys."""

    label_ca: _Label | None = msgspec.field(default=None, name="_label_ca")
    label_cost: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="_label_cost")
    label_index: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="_labelIndex")
    outcomes: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="_outcomes")
    pdf: list[_Segment] | None = None
    EventId: str | None = None
    Timestamp: str | None = None
    pdrop: float | None = None
    skip_learn: bool | None = msgspec.field(default=None, name="_skipLearn")
    c: dict[str, Any] | None = None
    version: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Version")
    vw_state: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="VWState")


_CATS_LINE: Final = msgspec.json.Decoder(_CatsLine).decode
#: A line's JSON decoded whole, into Python values.
_JSON_VALUES: Final = msgspec.json.Decoder().decode

#: VW reads every top-level key starting with this as the continuous label (its test is the
#: prefix ``_label_`` then "ca", case-sensitive): ``_label_ca``, and ``_label_cats`` too.
_LABEL_CA: Final = "_label_ca"

#: The keys of a line read key by key (:func:`_line_by_keys`) that set a :class:`_CatsLine`
#: field: the field, and the decoder of the key's value. VW's plain JSON form reads the keys
#: starting with ``_`` alone: the others are its features.
_KEY_FIELDS: Final = {
    key: (name, msgspec.json.Decoder(kind).decode)
    for key, name, kind in (
        ("_skipLearn", "skip_learn", bool | None),
        ("pdf", "pdf", list[_Segment] | None),
        ("EventId", "EventId", str | None),
        ("Timestamp", "Timestamp", str | None),
        ("pdrop", "pdrop", float | None),
        ("c", "c", dict[str, Any] | None),
    )
}
#: The other kinds' label keys, kept as present or not (their values undecoded).
_KIND_KEYS: Final = {
    "_label_cost": "label_cost",
    "_labelIndex": "label_index",
    "_outcomes": "outcomes",
}
#: What a plain JSON line decoded whole (:func:`_plain_line`) keeps of another kind's label
#: key: that it is there (a :class:`_CatsLine` keeps such a value undecoded).
_PRESENT: Final = msgspec.Raw(b"true")
#: The top-level keys of a DSJSON line that are not features: the fields VW's DSJSON reader
#: reads at a line's top level and the bookkeeping its writers add. In VW's plain JSON form
#: (``vw --json``) every key not starting with ``_`` is a feature, these included.
_DSJSON_TOP_FIELDS: Final = frozenset(
    {"a", "p", "c", "o", "pdf", "pdrop", "EventId", "Timestamp", "Version", "VWState"}
)

#: The keys that make a line DSJSON (when not null; ``pdf`` when an array, the segments), in
#: the order notes name them: a line that has one is read as ``vw --dsjson`` reads it. A line
#: with another key not starting with ``_`` and none of these is in VW's plain JSON form: ``a``,
#: ``p`` and ``o``, DSJSON's fields of other kinds (a CATS line has no use for them), and a
#: number as ``pdf`` are features there.
_DSJSON_MARKS: Final = ("c", "EventId", "Timestamp", "Version", "VWState", "pdrop", "pdf")
_MARK_KEYS: Final = frozenset(_DSJSON_MARKS)

#: The two forms of a CATS file (:class:`_CatsForm`).
_DSJSON: Final = "dsjson"
_PLAIN: Final = "plain"


@dataclass
class _CatsForm:
    """The form of a CATS file, DSJSON or VW's plain JSON (``vw --json``), as VW reads a file
    in one form (``--dsjson`` or ``--json``): that of its first line with a top-level key not
    starting with ``_`` (a line with none reads alike in both forms), and which line that is."""

    kind: str | None = None  # _DSJSON, _PLAIN, or None (no line has told yet)
    line: int = -1  # the line (number in the file) that set it
    keys: tuple[str, ...] = ()  # its keys that set it (DSJSON marks; the first plain keys)

    def see(self, kind: str | None, line: int, keys: Sequence[str]) -> None:
        """Take the form of a line when none is set yet (``kind`` None: the line does not
        tell)."""
        if self.kind is None and kind is not None:
            self.kind, self.line, self.keys = kind, line, tuple(keys)


def _null(raw: msgspec.Raw) -> bool:
    return bytes(raw) == b"null"


def _form_of(pairs: Mapping[str, msgspec.Raw]) -> tuple[str | None, list[str]]:
    """The form a line's top-level keys (``pairs``) show, and the keys that show it: DSJSON
    when a key of :data:`_DSJSON_MARKS` or a ``pdf`` array is there, the plain JSON form when
    another key not starting with ``_`` is, None when neither is (null values count as
    absent: both forms read them as nothing)."""
    found, plain = set(), []
    for key, raw in pairs.items():  # a loop over one line's keys
        if key[:1] == "_" or _null(raw):
            continue
        if key in _DSJSON_MARKS and (key != "pdf" or bytes(raw)[:1] == b"["):
            found.add(key)
        else:
            plain.append(key)
    if found:
        return _DSJSON, [k for k in _DSJSON_MARKS if k in found]
    return (_PLAIN, plain) if plain else (None, [])


def _marks(d: _CatsLine) -> list[str]:
    """The DSJSON marks of a line that decoded as :class:`_CatsLine` (whose keys are all
    DSJSON fields or start with ``_``)."""
    values = {
        "c": d.c,
        "EventId": d.EventId,
        "Timestamp": d.Timestamp,
        "Version": d.version if d.version and not _null(d.version) else None,
        "VWState": d.vw_state if d.vw_state and not _null(d.vw_state) else None,
        "pdrop": d.pdrop,
        "pdf": d.pdf,
    }
    return [k for k in _DSJSON_MARKS if values[k] is not None]


#: A DSJSON ``pdf_value`` is written as a float32: the density of the ``pdf`` segments at the
#: action agrees with it to this relative tolerance.
_PDF_RTOL: Final = 1e-5


def _flatten(
    obj: Mapping[str, Any],
    prefix: str,
    out: dict[str, float],
    labels: list[str] | None = None,
    *,
    top: bool = False,
) -> None:
    """VW's features of a ``c`` object: numbers as they are, ``"k": "v"`` as ``k=v`` = 1,
    booleans 0/1, nested objects ``ns.k``, arrays of numbers ``k[i]``. The keys starting with
    ``_label`` (below the top level of a plain JSON line, ``top``) go to ``labels`` as their
    path from ``prefix``: VW reads them as the line's label wherever they are."""
    for key, value in obj.items():  # a loop over one line's features
        if key.startswith("_"):  # VW's reserved fields (_multi, _slots, _id, ...)
            if labels is not None and not top and key.startswith("_label"):
                labels.append(f"{prefix}{key}")
            continue
        name = f"{prefix}{key}"
        if isinstance(value, bool):
            out[name] = float(value)
        elif isinstance(value, (int, float)):
            out[name] = _number(value)
        elif isinstance(value, str):
            out[f"{name}={value}"] = 1.0
        elif isinstance(value, Mapping):
            _flatten(value, f"{name}.", out, labels)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    out[f"{name}[{i}]"] = _number(v)
                elif isinstance(v, Mapping):
                    _flatten(v, f"{name}[{i}].", out, labels)


def _number(value: float) -> float:
    """A JSON number as a float; an integer beyond a double's range is inf (its line is
    rejected: ``dsjson_field_type``)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf


#: The most distinct context features a DSJSON file may flatten to (each is a column).
MAX_DSJSON_FEATURES: Final = 2000


#: Non-blank lines :func:`_read_cats` decodes and checks at a time: the decoded events and
#: flattened contexts (Python objects, several times the line's bytes) are those of one chunk;
#: what it keeps of the lines read are arrays.
_CATS_CHUNK_LINES: Final = 1 << 15


@dataclass
class _CatsChunk:
    """What :func:`_read_cats` keeps of one chunk of lines."""

    numbers: np.ndarray  # the lines' numbers in the file (from 0, blank lines skipped)
    reason: np.ndarray  # each line's reason to be rejected ("" when read), but repeated ids
    counted: np.ndarray  # the lines (chunk positions) whose EventId counts for repeats
    counted_ids: list[str]  # their EventIds
    read: np.ndarray  # the lines read so far (chunk positions), then these lines' fields:
    columns: dict[str, np.ndarray]  # action, cost, pdf_value, pdrop, low, high
    ids: np.ndarray  # the EventIds of the lines read (object; None where absent)
    context: pd.DataFrame  # flattened context features (NaN where a line has none)
    first: str | None  # the kind of the chunk's first labelled event (:func:`_first_kind`)
    top_level: np.ndarray  # the lines (numbers) whose features are top-level keys (plain form)
    unread: list[tuple[int, list[str]]]  # the first lines (numbers) of DSJSON form with keys
    n_unread: int  # not read (not DSJSON fields), and how many lines have them
    other: list[tuple[int, list[str]]]  # the first lines (numbers) whose keys show the other
    n_other: int  # form than the file's (and those keys), and how many lines do
    nan: dict[str, np.ndarray]  # per label property: the lines (numbers) where it is "NaN"
    absent: np.ndarray  # the lines (numbers) whose _label_ca lacks a property (read as 0)
    labels: list[tuple[int, list[str]]]  # the first lines (numbers) with `_label` keys under
    n_labels: int  # `c` or a namespace (and those keys), and how many lines have them
    skip_read: np.ndarray  # the lines (numbers) of a plain JSON file with _skipLearn: true


def _read_cats(
    path: Path, on_invalid: str
) -> tuple[pa.Table, tuple[str, ...], tuple[np.ndarray, np.ndarray] | None, ValidationReport]:
    """Vowpal Wabbit's continuous-action DSJSON as a table (see the module), the lines read
    and rejected by reason in its report (line numbers from 0, blank lines uncounted). The
    lines are read in chunks of :data:`_CATS_CHUNK_LINES`; an ``EventId`` repeats an earlier
    one across chunks too."""
    chunks: list[_CatsChunk] = []
    features: set[str] = set()
    kind: str | None = None
    form = _CatsForm()
    lines_read = 0
    pieces = _decoded_chunks(path, form)
    for numbers, decoded in pieces:
        lines_read += numbers.size
        with no_gc():  # the chunk's fields and features are built while collection is off
            chunk = _cats_chunk(numbers, decoded, form)
        if kind is None and chunk.first is not None:
            kind = chunk.first
            if kind == "other":  # the first labelled event sets the kind (:func:`_first_kind`)
                line = int(numbers[np.flatnonzero(chunk.reason == "dsjson_kind_mismatch")[0]])
                raise DataFileError(
                    f"{path.name} is CB or CCB DSJSON (line {line}, the first labelled event, has "
                    "`_label_cost`, `_labelIndex` or `_outcomes` and no `_label_ca`), not a "
                    "continuous-action log: read it with ope.importers.read_dsjson or `ope import "
                    "dsjson FILE --out LOGS.parquet`, or evaluate it with `ope evaluate FILE "
                    "--format dsjson`."
                )
        features.update(chunk.context.columns)
        if len(features) > MAX_DSJSON_FEATURES:
            more = next(pieces, None) is not None  # whether the count stops early
            raise _too_many_features(path.name, features, lines_read, int(numbers[-1]), more, form)
        chunks.append(chunk)
    numbers = np.concatenate([c.numbers for c in chunks] or [np.empty(0, dtype=np.int64)])
    reason = np.concatenate([c.reason for c in chunks] or [np.empty(0, dtype=object)])
    # as read_logs: an id repeats any earlier event's (a line with _label_ca), valid or not
    offsets = np.cumsum([0] + [c.numbers.size for c in chunks])
    counted = np.concatenate(
        [c.counted + o for c, o in zip(chunks, offsets[:-1].tolist(), strict=True)]
        or [np.empty(0, dtype=np.int64)]
    )
    ids = pd.Series([i for c in chunks for i in c.counted_ids], dtype=object)
    repeated = counted[ids.duplicated().to_numpy()]
    reason[repeated[reason[repeated] == ""]] = "event_id_duplicate"
    good = reason == ""
    rows = np.flatnonzero(good)
    reasons = {r: np.flatnonzero(reason == r) for r in np.unique(reason[~good]).tolist()}
    rejected = {r: int(ks.size) for r, ks in reasons.items()}
    report = ValidationReport(
        path.name,
        int(reason.size),
        int(rows.size),
        rejected,
        {r: tuple(int(x) for x in numbers[ks[:EXAMPLE_ROWS]]) for r, ks in reasons.items()},
        dropped=on_invalid == "drop" and bool(broken_rules(rejected)),
        notes=_feature_notes(
            chunks, {r: numbers[ks] for r, ks in reasons.items() if r in _NAN_REASONS}, form
        ),
    )
    error = import_failure(report, on_invalid)
    if error is not None:
        raise error
    warn_dropped_invalid(report, on_invalid, stacklevel=5)
    if not rows.size:
        raise report.no_rows_error()
    # the lines each chunk read, less those whose id repeats an earlier chunk's
    read = np.concatenate([c.read + o for c, o in zip(chunks, offsets[:-1].tolist(), strict=True)])
    ok = good[read]
    col = {k: np.concatenate([c.columns[k] for c in chunks])[ok] for k in chunks[0].columns}
    has_pdrop = bool((~np.isnan(col["pdrop"])).any())
    pdrop = np.nan_to_num(col["pdrop"], nan=0.0)
    low, high = col["low"], col["high"]
    with_pdf = bool(np.isfinite(low).any())
    context = pd.concat([c.context for c in chunks], ignore_index=True)
    # a feature seen only on lines rejected across chunks (a repeated EventId) is no column
    context = context[ok].dropna(axis=1, how="all").reset_index(drop=True).fillna(0.0)
    context = context.reindex(sorted(context.columns), axis=1)
    line_no = numbers[rows]
    kept_ids = np.concatenate([c.ids for c in chunks])[ok].tolist()
    event_ids = [e or f"{path.name}:{i}" for e, i in zip(kept_ids, line_no.tolist(), strict=True)]
    data: dict[str, Any] = {
        "event_id": pa.array(event_ids, type=pa.string()),
        "action": col["action"],
        "density": col["pdf_value"],
        "reward": -col["cost"],
    }
    if has_pdrop:  # sampling weights only when the file says rows were dropped
        data["weight"] = 1.0 / (1.0 - pdrop)
    for c in context.columns:  # a loop over feature columns
        data[f"c.{c}"] = context[c].to_numpy(dtype=np.float64)
    support = (low, high) if with_pdf else None
    return pa.table(data), _cats_notes(report) + report.notes, support, report


def _decoded_chunks(path: Path, form: _CatsForm) -> Iterator[tuple[np.ndarray, _Decoded]]:
    """The file's chunks of lines (:func:`_cats_lines`), each decoded (:func:`_decode_cats`)
    in the file's ``form``, in order. While no line has set the form, chunks with a
    ``_skipLearn: true`` line are held back until one does (such a line is excluded in the
    DSJSON form only): a file whose lines never tell is read as DSJSON."""
    held: list[tuple[np.ndarray, _Decoded]] = []
    skips = False
    for numbers, kept in _cats_lines(path):
        with no_gc():  # the decoded lines are built while collection is off
            decoded = _decode_cats(kept, numbers, form)
        held.append((numbers, decoded))
        if form.kind is None:  # only before a line with a key not starting with `_`
            skips = skips or any(d is not None and d.skip_learn for d in decoded.lines)
            if skips:
                continue
        yield from held
        held = []
    yield from held


def _too_many_features(
    name: str, features: set[str], lines_read: int, last_line: int, more: bool, form: _CatsForm
) -> DataFileError:
    """The error of a file whose contexts flatten to more than :data:`MAX_DSJSON_FEATURES`
    features: how many (at least, when ``more`` lines follow those read: reading stops at the
    chunk that crosses the limit), which, how to fix, and (a file in VW's plain JSON ``form``)
    that every top-level key is a feature there."""
    examples = ", ".join(show_value(f) for f in sorted(features)[:5])
    values = sum(1 for f in features if "=" in f)
    why = (
        f' ({values:,} of them string values: each distinct `"k": "v"` is a feature k=v)'
        if values
        else ""
    )
    if more:
        count = (
            f"its first {lines_read:,} lines (to line {last_line}, where reading stopped) "
            f"flatten to {len(features):,} distinct features, so the file has at least as many"
        )
    else:
        count = f"its {lines_read:,} lines flatten to {len(features):,} distinct features"
    plain = (
        f" The file is read in VW's plain JSON form (`vw --json`), that of its line {form.line} "
        f"(the first with a key not starting with `_`: {_shown_keys(form.keys)}, and no `c` or "
        "DSJSON field): every top-level key not starting with `_` is a feature there."
        if form.kind == _PLAIN
        else ""
    )
    return DataFileError(
        f"{name}: the contexts of {count}{why}, e.g. {examples}; at most {MAX_DSJSON_FEATURES:,} "
        "are read (ope.continuous.MAX_DSJSON_FEATURES: each feature is a column of the "
        f"context).{plain} Write the logs as a parquet or CSV table with the columns action, "
        "density, reward and the features your reward model needs, and read that with "
        "ope.read_continuous."
    )


def _shown_keys(keys: Sequence[str]) -> str:
    """The first keys of a line, quoted as the source's values are."""
    return ", ".join(show_value(k) for k in keys[:5]) + (", ..." if len(keys) > 5 else "")


def _feature_notes(
    chunks: Sequence[_CatsChunk], nan_rejected: Mapping[str, np.ndarray], form: _CatsForm
) -> tuple[str, ...]:
    """The report's notes on what the lines' keys gave in the file's ``form``: features read
    in VW's plain JSON form, keys of DSJSON lines not read, lines of the other form, ``_label``
    keys in namespaces, ``_skipLearn`` read in the plain form, label properties left out; and
    on the lines rejected for a cost or ``pdf_value`` of "NaN" (``nan_rejected``: the lines
    rejected for each reason of :data:`_NAN_NOTES`)."""
    notes = []

    def first(found: list[tuple[int, list[str]]]) -> str:
        return "; ".join(f"line {ln}: {_shown_keys(keys)}" for ln, keys in found[:EXAMPLE_ROWS])

    where = (
        f"that of its line {form.line}, the first with a key not starting with `_` "
        f"({_shown_keys(form.keys)})"
    )
    top = np.concatenate([c.top_level for c in chunks] or [np.empty(0, dtype=np.int64)])
    if top.size:
        notes.append(
            f"{top.size:,} line(s) keep their features at the top level (VW's plain JSON form, "
            f"read by `vw --json`; first: line {int(top[0])}): read as the context, as VW reads "
            "them: every key not starting with `_` is a feature. The file's form is "
            f"{where}, without `c` or a DSJSON field."
        )
    other = [u for c in chunks for u in c.other]
    n_other = sum(c.n_other for c in chunks)
    if other and form.kind == _PLAIN:
        notes.append(
            f"{n_other:,} of them have keys that make a DSJSON line ({first(other)}): features "
            "there, as `vw --json` reads them, not the fields (no drop probability, pdf "
            "segments or EventId is read from such a line). A file is read as DSJSON when its "
            "first line with a key not starting with `_` has `c` or a DSJSON field."
        )
    unread = [u for c in chunks for u in c.unread]
    if unread:
        notes.append(
            f"{sum(c.n_unread for c in chunks):,} line(s) have top-level keys that are not "
            f"DSJSON fields, not read as features ({first(unread)}): VW's --dsjson ignores them "
            "(only `c` holds features there), though `vw --json` would read them. Move them "
            "under `c` to have them read."
        )
    if other and form.kind != _PLAIN:
        notes.append(
            f"{n_other:,} line(s) are in VW's plain JSON form, with top-level keys and neither "
            f"`c` nor a DSJSON field ({first(other)}): read as `vw --dsjson` reads them, "
            f"without features, since the file is DSJSON: its form is {where}. A file is read "
            "in the plain JSON form (`vw --json`) when that line is."
        )
    labels = [u for c in chunks for u in c.labels]
    if labels:
        notes.append(
            f"dsjson_field_type: {sum(c.n_labels for c in chunks):,} line(s) have keys "
            f"starting with `_label` under `c` or in a namespace ({first(labels)}): VW reads "
            "such a key as the line's label wherever it is (or refuses the line), and ope reads "
            "the label only at the top level, so these lines are rejected. Move the label to "
            "the top level, or rename the feature."
        )
    if form.kind == _PLAIN:
        skipped = np.concatenate([c.skip_read for c in chunks] or [np.empty(0, dtype=np.int64)])
        if skipped.size:
            notes.append(
                f"{skipped.size:,} line(s) have `_skipLearn: true` (first: "
                f"{_lines_text(skipped)}) and are read, as `vw --json` reads them: only VW's "
                "DSJSON reader skips such lines, and the file is in the plain JSON form, "
                f"{where}."
            )
    absent = np.concatenate([c.absent for c in chunks] or [np.empty(0, dtype=np.int64)])
    if absent.size:
        notes.append(
            f"{absent.size:,} line(s) have a `_label_ca` without its action, cost or pdf_value "
            f"(first: {_lines_text(absent)}): read as 0, as VW reads them (a pdf_value of 0 is "
            "then cats_pdf_value_invalid). Write all three."
        )
    for name, (reason, why) in _NAN_NOTES.items():  # a loop over two label properties
        nan_lines = np.concatenate([c.nan[name] for c in chunks])
        nan_lines = nan_lines[np.isin(nan_lines, nan_rejected.get(reason, []))]
        if nan_lines.size:
            notes.append(
                f'{reason}: _label_ca.{name} is "NaN" on {nan_lines.size:,} line(s) (first: '
                f"{_lines_text(nan_lines)}): VW's JSON parser reads it as NaN, and {why}, so "
                "these lines are rejected."
            )
    return tuple(notes)


#: The label properties that may be the string "NaN" (read as NaN, as VW reads it): the reason
#: that rejects such a line, and why, for its note.
_NAN_NOTES: Final = {
    "cost": ("reward_missing", "a cost that is NaN gives no reward (reward = -cost)"),
    "pdf_value": ("cats_pdf_value_invalid", "a density that is NaN cannot weight a row"),
}
_NAN_REASONS: Final = frozenset(reason for reason, _ in _NAN_NOTES.values())


def _lines_text(lines: np.ndarray) -> str:
    """The first line numbers of ``lines``, for a note."""
    return ", ".join(map(str, lines[:EXAMPLE_ROWS].tolist()))


def _cats_chunk(numbers: np.ndarray, decoded: _Decoded, form: _CatsForm) -> _CatsChunk:
    """One chunk of non-blank lines, decoded (:func:`_decode_cats`), checked
    (:class:`_CatsChunk`) in the file's ``form``: ``_skipLearn`` excludes a line only in the
    DSJSON form (``vw --json`` ignores it; such lines are read and noted)."""
    at = np.array([k for k, d in enumerate(decoded.lines) if d is not None], dtype=np.int64)
    events = [d for d in decoded.lines if d is not None]
    tops: dict[int, dict[str, float]] = {}
    top_labels: dict[int, list[str]] = {}
    if decoded.features or decoded.labels:  # by position among the events
        position = {i: k for k, i in enumerate(at.tolist())}
        tops = {position[i]: f for i, f in decoded.features.items()}
        top_labels = {position[i]: x for i, x in decoded.labels.items()}
    fields = _cats_fields(events, tops, top_labels)
    skip_read = np.zeros(0, dtype=np.int64)
    if form.kind == _PLAIN and fields.skip.any():
        skip_read = numbers[at[fields.skip]]
        fields = dataclasses.replace(fields, skip=np.zeros_like(fields.skip))
    reason = _cats_reasons(fields, at, decoded.why, len(numbers))
    counts = ~fields.unlabeled & ~fields.skip & pd.notna(fields.ids)
    ok = reason[at] == ""
    read = at[ok]
    features = [x for x, keep in zip(fields.features, ok.tolist(), strict=True) if keep]
    return _CatsChunk(
        numbers=numbers,
        reason=reason,
        counted=at[counts],
        counted_ids=fields.ids[counts].tolist(),
        read=read,
        columns={
            "action": fields.action[ok],
            "cost": fields.cost[ok],
            "pdf_value": fields.pdf_value[ok],
            "pdrop": fields.pdrop[ok],
            "low": fields.low[ok],
            "high": fields.high[ok],
        },
        ids=fields.ids[ok],
        context=pd.DataFrame.from_records(features, index=pd.RangeIndex(len(features))),
        first=_first_kind(fields),
        top_level=numbers[sorted(decoded.features)],
        unread=[(int(numbers[k]), keys) for k, keys in decoded.unread[:EXAMPLE_ROWS]],
        n_unread=len(decoded.unread),
        other=[(int(numbers[k]), keys) for k, keys in decoded.other[:EXAMPLE_ROWS]],
        n_other=len(decoded.other),
        nan={name: numbers[at[mask]] for name, mask in fields.nan.items()},
        absent=numbers[at[fields.absent]],
        labels=[(int(numbers[at[k]]), keys) for k, keys in fields.labels[:EXAMPLE_ROWS]],
        n_labels=len(fields.labels),
        skip_read=skip_read,
    )


def _first_kind(fields: _CatsFields) -> str | None:
    """The kind of the first labelled event that is not ``_skipLearn``: ``"ca"``
    (``_label_ca``), ``"other"`` (CB or CCB) or None (no such event)."""
    labelled = np.flatnonzero(~fields.skip & (~fields.unlabeled | fields.other))
    if not labelled.size:
        return None
    return "other" if fields.unlabeled[labelled[0]] else "ca"


#: How the notes of :func:`_read_cats` word the lines excluded as Vowpal Wabbit excludes them.
_EXCLUDED_WORDING: Final = {
    "dsjson_skip_learn": "with _skipLearn excluded, as Vowpal Wabbit excludes them",
    "dsjson_unlabeled": "without _label_ca excluded: no logged outcome",
    "dsjson_not_object": "that are not a JSON object skipped, as Vowpal Wabbit skips them",
}


def _cats_notes(report: ValidationReport) -> tuple[str, ...]:
    """One note per reason of the lines not used, with the first line's number."""
    return tuple(
        f"{count:,} line(s) "
        f"{_EXCLUDED_WORDING.get(reason, f'rejected ({reason}) and dropped')} (first: line "
        f"{report.examples[reason][0]})"
        for reason, count in sorted(report.rejected.items())
    )


def _cats_lines(path: Path) -> Iterator[tuple[np.ndarray, list[bytes]]]:
    """The file's non-blank lines (without their line break) in chunks of at most
    :data:`_CATS_CHUNK_LINES`, each with the lines' numbers (from 0, blank lines counted in the
    numbering); gunzipped when the file is gzip (by its first bytes, not its name); a
    byte-order mark before the first line is not part of it."""
    number = 0
    numbers: list[int] = []
    kept: list[bytes] = []
    gz = False
    try:
        with open(path, "rb") as raw:
            gz = raw.read(2) == b"\x1f\x8b"
            raw.seek(0)
            fh = gzip.GzipFile(fileobj=raw) if gz else raw
            for line in fh:  # a loop over lines: each is its own JSON document
                if number == 0:
                    line = line.removeprefix(UTF8_BOM)
                if line.strip():
                    numbers.append(number)
                    kept.append(line[:-1] if line.endswith(b"\n") else line)
                    if len(kept) == _CATS_CHUNK_LINES:
                        yield np.array(numbers, dtype=np.int64), kept
                        numbers, kept = [], []
                number += 1
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as exc:
        if not gz:
            raise DataFileError(f"{path.name!r} cannot be read: {exc}") from None
        with gzip.open(path, "rb") as again:  # the file is closed here: read from its start
            whole = lines_before_damage(again)
        where = (
            f": lines 0 to {whole - 1:,} decode, and line {whole:,} is cut by the damage"
            if whole
            else ": no line decodes before the damage"
        )
        raise DataFileError(
            f"{path.name!r} is a damaged or truncated gzip stream{where} ({exc}). Re-export "
            "or re-download the file."
        ) from None
    if kept:
        yield np.array(numbers, dtype=np.int64), kept


@dataclass
class _Decoded:
    """A chunk's lines decoded (:func:`_decode_cats`), each by its position in the chunk."""

    lines: list[_CatsLine | None]  # None where the line did not decode
    why: dict[int, str]  # the reason of each line that did not
    features: dict[int, dict[str, float]]  # the plain JSON form's features, flattened
    unread: list[tuple[int, list[str]]]  # (line, keys) of DSJSON lines' keys not read
    other: list[tuple[int, list[str]]]  # (line, keys) of lines of the file's other form
    labels: dict[int, list[str]] = field(default_factory=dict)  # `_label` keys in namespaces


def _decode_cats(kept: Sequence[bytes], numbers: np.ndarray, form: _CatsForm) -> _Decoded:
    """Every line decoded on its own, once (a batch of lines joined into one array would read
    ``{...}, {...}`` on one line as two events, and nest every line one level deeper), in the
    file's ``form`` (set here by the first line that tells, :class:`_CatsForm`). A DSJSON line
    decodes as :class:`_CatsLine`; one that this refuses (another key, a field of another
    type) is read key by key (:func:`_line_by_keys`); a line of a plain JSON file decodes whole
    (:func:`_plain_line`), key by key when that fails (a number beyond a double's range)."""
    out = _Decoded([None] * len(kept), {}, {}, [], [])
    lines, why, decode = out.lines, out.why, _CATS_LINE
    plain = form.kind == _PLAIN
    for k, line in enumerate(kept):  # a loop over lines: each is its own JSON document
        if line[:1] != b"{":  # as VW (and the DSJSON importer): leading spaces included
            why[k] = "dsjson_not_object"
            continue
        try:
            if plain:
                lines[k] = _plain_line(_JSON_VALUES(line), k, out)
            else:
                d = lines[k] = decode(line)
                if form.kind is None:
                    marks = _marks(d)
                    form.see(_DSJSON if marks else None, int(numbers[k]), marks)
            continue
        except msgspec.ValidationError:  # another key, a field of another type, a number
            pass  # beyond a double's range: read key by key below
        except (msgspec.DecodeError, RecursionError):
            why[k] = "dsjson_bad_json"
            continue
        try:
            lines[k] = _line_by_keys(object_fields(line), k, int(numbers[k]), form, out)
        except msgspec.ValidationError:  # a field of another type, a number past a double's
            why[k] = "dsjson_field_type"
        except (msgspec.DecodeError, RecursionError):
            why[k] = "dsjson_bad_json"
        plain = form.kind == _PLAIN
    return out


def _plain_line(values: Mapping[str, Any], k: int, out: _Decoded) -> _CatsLine:
    """Line ``k`` of a file in VW's plain JSON form, from its ``values`` decoded whole: its
    keys starting with ``_`` give the label, every other key is a feature (``out.features``),
    one named as a DSJSON field included; a line whose keys would make it DSJSON is noted in
    ``out.other``. Raises ``msgspec.ValidationError`` for a label field of another type."""
    # VW reads the last `_label_ca...` key
    label = next((values[key] for key in reversed(list(values)) if key.startswith(_LABEL_CA)), None)
    line = _CatsLine(
        label_ca=None if label is None else _label_object(label),
        # `vw --json` ignores _skipLearn (only its DSJSON reader skips): kept to be noted
        skip_learn=values.get("_skipLearn") is True or None,
    )
    for key, name in _KIND_KEYS.items():  # a loop over three keys
        if key in values:
            setattr(line, name, _PRESENT)
    features: dict[str, float] = {}
    labels: list[str] = []
    _flatten(values, "", features, labels, top=True)  # every key not starting with `_`
    if features:
        out.features[k] = features
    if labels:
        out.labels[k] = labels
    if not _MARK_KEYS.isdisjoint(values):
        v = values.get
        if any(v(m) is not None for m in _DSJSON_MARKS[:-1]) or isinstance(v("pdf"), list):
            out.other.append((k, [key for key in values if key in _DSJSON_TOP_FIELDS]))
    return line


def _line_by_keys(
    pairs: Mapping[str, msgspec.Raw], k: int, number: int, form: _CatsForm, out: _Decoded
) -> _CatsLine:
    """Line ``k`` (``number`` in the file) from its top-level keys and undecoded values
    (``pairs``), read in the file's ``form``, which the line sets when none is yet. A DSJSON
    line reads its DSJSON fields; its other keys not starting with ``_`` are not read (noted in
    ``out.unread``). A plain JSON line reads its keys starting with ``_`` (the label) and has
    every other key as a feature (``out.features``), one named as a DSJSON field included. A
    line whose keys show the other form is noted in ``out.other``. Raises what the decoders
    raise (``msgspec.ValidationError`` for a field of another type)."""
    seen, keys = _form_of(pairs)
    form.see(seen, number, keys)
    plain = form.kind == _PLAIN
    fields: dict[str, Any] = {}
    features: dict[str, Any] = {}
    for key, raw in pairs.items():  # a loop over one line's keys
        if plain and key[:1] != "_":
            try:
                features[key] = msgspec.json.decode(raw)
            except msgspec.ValidationError:  # a number beyond a double's range: the line's
                features[key] = math.inf  # dsjson_field_type, as in `c`
        elif key.startswith(_LABEL_CA):  # the last of them wins, as in VW
            fields["label_ca"] = _label_raw(raw)
        elif plain and key == "_skipLearn":  # `vw --json` ignores it: kept to be noted
            fields["skip_learn"] = bytes(raw) == b"true" or None
        elif key in _KEY_FIELDS:
            name, decode = _KEY_FIELDS[key]
            fields[name] = decode(raw)
        elif key in _KIND_KEYS:
            fields[_KIND_KEYS[key]] = raw
    if plain:
        flat: dict[str, float] = {}
        labels: list[str] = []
        _flatten(features, "", flat, labels, top=True)
        if flat:
            out.features[k] = flat
        if labels:
            out.labels[k] = labels
        if seen == _DSJSON:
            out.other.append((k, [key for key in pairs if key in _DSJSON_TOP_FIELDS]))
    else:
        unread = [key for key in pairs if key[:1] != "_" and key not in _DSJSON_TOP_FIELDS]
        if unread:
            out.unread.append((k, unread))
        if seen == _PLAIN:
            out.other.append((k, keys))
    return _CatsLine(**fields)


@dataclass
class _CatsFields:
    """The fields of decoded lines as arrays (NaN where absent), and each line's pdf span."""

    action: np.ndarray
    cost: np.ndarray
    pdf_value: np.ndarray
    pdrop: np.ndarray
    low: np.ndarray  # the pdf segments' smallest left (-inf without segments)
    high: np.ndarray  # their largest right (inf without)
    malformed: np.ndarray  # a segment without finite left <= right and pdf_value >= 0
    at_action: np.ndarray  # the segments' density at the action (NaN without segments)
    features: list[dict[str, float]]  # each line's flattened context (:func:`_flatten`)
    huge: np.ndarray  # a feature beyond a double's range
    skip: np.ndarray  # _skipLearn
    unlabeled: np.ndarray  # no _label_ca
    other: np.ndarray  # another kind's label (CB, CCB)
    ids: np.ndarray  # EventId (object; None where absent)
    nan: dict[str, np.ndarray]  # per property (cost, pdf_value): the string "NaN" (read NaN)
    text: np.ndarray  # _label_ca.cost or pdf_value is another string (VW refuses the line)
    absent: np.ndarray  # _label_ca lacks action, cost or pdf_value (VW reads 0)
    labels: list[tuple[int, list[str]]]  # (position, paths) of `_label` keys in namespaces
    in_c: np.ndarray  # the lines that have such keys (VW reads them as the label)


def _cats_fields(
    events: Sequence[_CatsLine],
    tops: Mapping[int, dict[str, float]],
    top_labels: Mapping[int, list[str]],
) -> _CatsFields:
    """:class:`_CatsFields` of decoded lines ``events`` (``tops``: the flattened features of
    those in VW's plain JSON form, by position, and ``top_labels`` the ``_label`` keys found
    in their namespaces): one pass over the lines to list their fields, features and segments,
    the checks on whole arrays."""
    n = len(events)
    nan = math.nan
    row: list[tuple[Any, ...]] = []
    ids: list[str | None] = []
    features: list[dict[str, float]] = []
    texts: list[tuple[int, int, str]] = []  # (position, column, string) of a cost/pdf_value
    absent: list[int] = []
    labels = list(top_labels.items())
    line: list[int] = []
    seg: list[tuple[float, float, float]] = []
    for k, d in enumerate(events):  # a loop over lines: the events are schemaless JSON
        lab = d.label_ca
        action: Any
        cost: Any
        density: Any
        if lab is None:
            action = cost = density = nan
        else:
            action, cost, density = lab.action, lab.cost, lab.pdf_value
            if action is None or cost is None or density is None:  # VW reads 0 (rare)
                absent.append(k)
                action, cost, density = action or 0.0, cost or 0.0, density or 0.0
            if isinstance(cost, str):  # "NaN" or another string: read after the loop
                texts.append((k, 1, cost))
                cost = nan
            if isinstance(density, str):
                texts.append((k, 2, density))
                density = nan
        # VW's plain JSON form: the features are top-level keys, flattened as decoded
        out: dict[str, float] = tops.get(k, {}) if tops else {}
        if d.c:
            found: list[str] = []
            _flatten(d.c, "", out, found)
            if found:
                labels.append((k, [f"c.{x}" for x in found]))
        row.append(
            (
                action,
                cost,
                density,
                nan if d.pdrop is None else d.pdrop,
                bool(d.skip_learn),
                lab is None,
                len(d.label_cost) + len(d.outcomes) + len(d.label_index) > 0,  # empty: absent
            )
        )
        ids.append(d.EventId)
        features.append(out)
        for sg in d.pdf or ():
            if sg.left is not None and sg.right is not None:
                line.append(k)
                seg.append((sg.left, sg.right, nan if sg.pdf_value is None else sg.pdf_value))
    table = np.array(row, dtype=np.float64).reshape(n, 7)
    nan_of = {"cost": np.zeros(n, dtype=bool), "pdf_value": np.zeros(n, dtype=bool)}
    refused_text = np.zeros(n, dtype=bool)
    for k, column, string in texts:  # a loop over the lines whose cost/pdf_value is a string
        refused = vw_number(string) is NOT_A_NUMBER  # VW refuses the line; "NaN" reads as NaN
        (refused_text if refused else nan_of["cost" if column == 1 else "pdf_value"])[k] = True
    action, cost, value, pdrop = table[:, 0], table[:, 1], table[:, 2], table[:, 3]
    huge = np.array([math.inf in x.values() for x in features], dtype=bool)
    at = np.full(n, np.nan)
    low, high = np.full(n, -np.inf), np.full(n, np.inf)
    malformed = np.zeros(n, dtype=bool)
    if seg:
        owner = np.asarray(line, dtype=np.int64)
        left, right, dens = np.asarray(seg, dtype=np.float64).T
        with np.errstate(invalid="ignore"):
            bad = ~(np.isfinite(left) & np.isfinite(right) & np.isfinite(dens))
            bad |= (right < left) | (dens < 0)
        malformed[owner[bad]] = True
        has = np.zeros(n, dtype=bool)
        has[owner] = True
        low[has], high[has] = np.inf, -np.inf
        np.minimum.at(low, owner, left)
        np.maximum.at(high, owner, right)
        a = action[owner]
        with np.errstate(invalid="ignore"):  # the last segment is closed at the right
            hit = (left <= a) & ((a < right) | ((a == right) & (right == high[owner])))
        at[has] = 0.0
        first, where = np.unique(owner[hit], return_index=True)
        at[first] = dens[np.flatnonzero(hit)[where]]
    return _CatsFields(
        action,
        cost,
        value,
        pdrop,
        low,
        high,
        malformed,
        at,
        features,
        huge,
        skip=table[:, 4] > 0,
        unlabeled=table[:, 5] > 0,
        other=table[:, 6] > 0,
        ids=np.array(ids, dtype=object),
        nan=nan_of,
        text=refused_text,
        absent=np.asarray(absent, dtype=np.int64),
        labels=sorted(labels),
        in_c=np.isin(np.arange(n), [k for k, _ in labels]),
    )


def _cats_reasons(f: _CatsFields, at: np.ndarray, why: Mapping[int, str], n: int) -> np.ndarray:
    """Each of ``n`` lines' reason to be rejected ("" for a line read), the first that applies
    in this order: not decoded (``why``), ``_skipLearn``, no ``_label_ca`` (another kind's
    label, or none), a field VW refuses or reads otherwise (a feature beyond a double's range,
    a string cost or density other than "NaN", a ``_label`` key under ``c``), a cost that is
    NaN (no reward), a density that is not > 0, ``pdrop``
    outside [0, 1), malformed segments, a density that is not the segments' at the action
    (a repeated ``EventId`` is found by :func:`_read_cats` over the whole file). ``f`` holds
    the fields of the decoded lines (lines ``at``)."""
    reason = np.full(n, "", dtype=object)
    for k, r in why.items():  # a loop over the lines that did not decode
        reason[k] = r
    if not at.size:
        return reason
    skip, unlabeled = f.skip, f.unlabeled
    with np.errstate(invalid="ignore"):
        tol = _PDF_RTOL * np.maximum(np.abs(f.at_action), np.abs(f.pdf_value))
        rules = (
            ("dsjson_skip_learn", skip),
            ("dsjson_field_type", f.in_c),  # a label under `c`: labelled or not, VW reads it
            ("dsjson_kind_mismatch", unlabeled & f.other),
            ("dsjson_unlabeled", unlabeled),
            ("dsjson_field_type", f.huge | f.text),
            ("reward_missing", np.isnan(f.cost)),
            ("cats_pdf_value_invalid", ~(np.isfinite(f.pdf_value) & (f.pdf_value > 0))),
            ("dsjson_pdrop_out_of_range", ~np.isnan(f.pdrop) & ~((f.pdrop >= 0) & (f.pdrop < 1))),
            ("cats_pdf_malformed", f.malformed),
            (
                "cats_pdf_mismatch",
                ~np.isnan(f.at_action) & ~(np.abs(f.at_action - f.pdf_value) <= tol),
            ),
        )
    mine = np.full(at.size, "", dtype=object)
    for name, mask in reversed(rules):  # a loop over rules: the first that applies wins
        mine[mask] = name
    reason[at] = mine
    return reason


# --------------------------------------------------------------------------------------------
# weights and bandwidths
# --------------------------------------------------------------------------------------------
def _outside(logs: ContinuousLogs, acts: np.ndarray) -> np.ndarray:
    """Which candidate actions (``(n,)`` or ``(n, m)``) lie outside the logger's support of
    their row (none when the logs do not say what it is)."""
    if logs.support is None:
        return np.zeros(acts.shape, dtype=bool)
    low, high = logs.support
    if acts.ndim == 2:
        low, high = low[:, None], high[:, None]
    return (acts < low) | (acts > high)


def _kernel_weight(
    logs: ContinuousLogs, name: str, kernel_name: str, bandwidth: float
) -> np.ndarray:
    """A candidate's weights ``(n,)`` at ``bandwidth`` (exact for a density-form candidate); a
    candidate action outside the logger's support adds nothing (the logs cannot weigh it)."""
    if name in logs.densities:
        with np.errstate(over="ignore"):
            return logs.densities[name] / logs.density
    acts = logs.candidates[name]
    d = acts - (logs.action if acts.ndim == 1 else logs.action[:, None])
    k = np.where(_outside(logs, acts), 0.0, kernel(d / bandwidth, kernel_name))
    if acts.ndim == 2:
        k = k.mean(axis=1)
    with np.errstate(over="ignore"):
        return k / (bandwidth * logs.density)


def _in_window(
    logs: ContinuousLogs, name: str, kernel_name: str, bandwidth: float | None
) -> np.ndarray:
    """Rows in the kernel window: a candidate action (or one of its samples) within
    :data:`_WINDOW` bandwidths of the logged action, inside the logger's support; for a
    density-form candidate, the rows it gives a positive density."""
    if bandwidth is None:
        return logs.densities[name] > 0
    acts = logs.candidates[name]
    d = np.abs(acts - (logs.action if acts.ndim == 1 else logs.action[:, None]))
    inside = (d <= _WINDOW[kernel_name] * bandwidth) & ~_outside(logs, acts)
    return inside if acts.ndim == 1 else inside.any(axis=1)


def _weighted_ess(w: np.ndarray, sampling: np.ndarray | None) -> float:
    """Kish's effective sample of the weights, with the rows' sampling weights in them."""
    with np.errstate(over="ignore", invalid="ignore"):  # inf: the weights are refused later
        sw = w if sampling is None else w * sampling
        return kish_ess(float(sw.sum()), float(sw @ sw))


def _reference_width(logs: ContinuousLogs, name: str) -> float:
    """The spread ``s`` of the distances between the candidate's and the logged actions:
    ``min(sd, IQR / 1.349)`` (Silverman's robust scale), or the actions' own when 0."""
    acts = logs.candidates[name]
    d = (acts - logs.action[:, None]).ravel() if acts.ndim == 2 else acts - logs.action
    for values in (d, logs.action):
        with np.errstate(over="ignore", invalid="ignore"):  # not finite: the next values
            sd = float(np.std(values))
        q75, q25 = np.percentile(values, [75.0, 25.0])
        iqr = float(q75 - q25) / 1.349
        s = min(sd, iqr) if iqr > 0 else sd
        if s > 0 and math.isfinite(s):
            return s
    return 1.0


def bandwidth_grid(logs: ContinuousLogs, name: str) -> np.ndarray:
    """SLOPE's bandwidth grid for candidate ``name`` (see :data:`_GRID_STEPS`)."""
    base = _reference_width(logs, name) * logs.n ** (-0.2)
    return base * 2.0 ** (np.array(_GRID_STEPS, dtype=np.float64) / 2.0)


def _scored(
    logs: ContinuousLogs, name: str, kernel_name: str, h: float, level: float, estimator: Any
) -> dict[str, Any]:
    """One grid bandwidth: the estimate, its standard error and width, the window."""
    w = _kernel_weight(logs, name, kernel_name, h)
    ess = _weighted_ess(w, logs.weight)
    inside = _in_window(logs, name, kernel_name, h)
    row: dict[str, Any] = {
        "policy": name,
        "bandwidth": h,
        "window_rows": int(inside.sum()),
        "ess": ess,
        "value": math.nan,
        "std_error": math.nan,
        "width": math.nan,
    }
    if ess >= MIN_WINDOW_ESS and row["window_rows"] >= MIN_WINDOW_ESS:
        top = max(1.0, float(w.max()))
        with warnings.catch_warnings():  # grid points are judged here, not warned about
            warnings.simplefilter("ignore", OPEWarning)
            est = estimator.estimate(
                logs.reward, np.full(logs.n, 1.0 / top), w / top, sampling_weight=logs.weight
            )
        ci = est.ci(level, "normal")
        row.update(value=est.value, std_error=est.std_error, width=est.value - ci.low)
    return row


def _choose_bandwidths(
    logs: ContinuousLogs,
    names: list[str],
    kernel_name: str,
    bandwidth: Any,
    level: float,
    tune_on: str,
) -> tuple[dict[str, float | None], pd.DataFrame]:
    """Per candidate the bandwidth (None for a density-form one) and the grid table."""
    from ope.estimators import IPS, SNIPS
    from ope.evaluation import slope_index

    estimator = SNIPS() if tune_on == "snips" else IPS()
    chosen: dict[str, float | None] = {}
    rows: list[dict[str, Any]] = []
    for name in names:  # a loop over candidates
        if name in logs.densities:
            chosen[name] = None
            continue
        if bandwidth != "slope":
            h = bandwidth[name] if isinstance(bandwidth, Mapping) else bandwidth
            rows.append(
                {
                    **_scored(logs, name, kernel_name, h, level, estimator),
                    "slope": False,
                    "chosen": True,
                }
            )
            chosen[name] = h
            continue
        scored = [
            _scored(logs, name, kernel_name, float(h), level, estimator)
            for h in bandwidth_grid(logs, name)  # a loop over the grid (11 bandwidths)
        ]
        usable = [i for i, r in enumerate(scored) if math.isfinite(r["width"])]
        for r in scored:
            r["chosen"] = r["slope"] = False
        if usable:
            best = usable[
                slope_index(
                    [scored[i]["value"] for i in usable], [scored[i]["width"] for i in usable]
                )
            ]
            # undersmoothed: UNDERSMOOTH_STEPS grid steps below SLOPE's, if usable
            pick = max([i for i in usable if i <= best - UNDERSMOOTH_STEPS] or [usable[0]])
            scored[best]["slope"] = True
            scored[pick]["chosen"] = True
            chosen[name] = float(scored[pick]["bandwidth"])
        else:
            chosen[name] = float(scored[-1]["bandwidth"])  # the widest: judged not evaluable
            scored[-1]["chosen"] = True
        rows.extend(scored)
    columns = ["policy", "bandwidth", "value", "std_error", "width", "ess", "window_rows"]
    columns += ["slope", "chosen"]
    return chosen, pd.DataFrame(rows, columns=columns)


#: The range of ``h p`` (a bandwidth times the logger's density at a logged action: about the
#: logger's probability of the kernel window) within which the kernel weights ``K(u) / (h p)``
#: and their squares stay in float64's range: the weights' own bound, ``MAX_FINITE_WEIGHT``.
BANDWIDTH_RANGE: Final = (1.0 / MAX_FINITE_WEIGHT, MAX_FINITE_WEIGHT)


def check_bandwidth(value: Any, name: str = "bandwidth", density: Any = None) -> float:
    """A bandwidth: a positive finite number; with the logged densities ``density`` (n,), one
    whose products ``h p`` lie within :data:`BANDWIDTH_RANGE` (any scale of the actions is
    accepted: only the product with their density enters a weight).

    >>> check_bandwidth(0.25)
    0.25
    """
    h = check_positive_real(value, name)
    if density is None or not np.size(density):
        return h
    low, high = BANDWIDTH_RANGE
    with np.errstate(over="ignore", under="ignore"):
        small, large = h * float(np.min(density)), h * float(np.max(density))
    if not (low <= small and large <= high):
        raise ParameterError(
            f"`{name}` = {h!r} times the logged densities (from {small:.3g} to {large:.3g}) "
            f"leaves [{low:g}, {high:g}]: a kernel weight K(u) / (h p) and its square would "
            "leave float64's range. Give a bandwidth on the actions' scale (h p is about the "
            "logger's probability of the kernel window), or bandwidth='slope'."
        )
    return h


def _check_bandwidth(bandwidth: Any, names: list[str], density: Any = None) -> Any:
    if isinstance(bandwidth, str):
        if bandwidth != "slope":
            raise ParameterError(
                f"`bandwidth` must be 'slope', a positive number (in the actions' units) or a "
                f"mapping of candidate names to them; got {bandwidth!r}."
            )
        return bandwidth
    if isinstance(bandwidth, Mapping):
        missing = [p for p in names if p not in bandwidth]
        if missing:
            raise ParameterError(f"`bandwidth`: no bandwidth for the candidate {missing[0]!r}.")
        return {p: check_bandwidth(bandwidth[p], f"bandwidth[{p!r}]", density) for p in names}
    return check_bandwidth(bandwidth, density=density)


# --------------------------------------------------------------------------------------------
# the reward model (kernel DR)
# --------------------------------------------------------------------------------------------
#: The largest magnitude of a reward-model feature (context, action): its square and products
#: must stay finite in float64.
_MAX_FEATURE: Final = 1e150


def _default_model(n_features: int) -> Any:
    """A ridge regression, quadratic in (context, action) for up to 20 context columns
    (linear in the context, with the action's square and its products with the context,
    beyond), its penalty chosen by leave-one-out."""
    from sklearn.linear_model import RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import PolynomialFeatures, StandardScaler

    alphas = np.logspace(-4, 3, 15)
    if n_features <= 20:
        return make_pipeline(StandardScaler(), PolynomialFeatures(2), RidgeCV(alphas=alphas))
    return make_pipeline(StandardScaler(), RidgeCV(alphas=alphas))


def _design(context: np.ndarray, action: np.ndarray, quadratic: bool) -> np.ndarray:
    cols = [context, action[:, None]]
    if not quadratic:  # beyond 20 columns: the action's square and products added by hand
        cols += [action[:, None] ** 2, context * action[:, None]]
    return np.hstack(cols)


def _fitted_model_terms(
    logs: ContinuousLogs, names: list[str], reward_model: Any, rng: Any
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Cross-fitted (2 folds) ``q(x_i, a_i)`` and, per candidate with actions, its ``q(x_i, pi)``
    (averaged over the samples of a stochastic one)."""
    from sklearn.base import clone

    x = logs.context.to_numpy(dtype=np.float64)
    quadratic = x.shape[1] <= 20
    parts = [("the context", x), ("the logged actions", logs.action)]
    parts += [
        (f"candidate {p!r}'s actions", logs.candidates[p]) for p in names if p in logs.candidates
    ]
    for what, values in parts:  # the model squares its features: keep them in float64's range
        if values.size and float(np.max(np.abs(values))) > _MAX_FEATURE:
            raise ValidationError(
                f"`reward_model`: {what} reach {float(np.max(np.abs(values))):.3g}, beyond "
                f"{_MAX_FEATURE:g}; the model's squared features would overflow. Rescale them "
                "(e.g. to thousands), or give your predictions as q_column/v_column."
            )
    model = _default_model(x.shape[1]) if reward_model is None else reward_model
    if not (hasattr(model, "fit") and hasattr(model, "predict")):
        raise ParameterError(
            "`reward_model` must be a scikit-learn regressor (with fit and predict); got "
            f"{type(model).__name__}."
        )
    gen = check_rng(rng)
    folds = fold_assignment(logs.n, 2, gen)
    q_logged = np.empty(logs.n)
    v = {p: np.empty(logs.n) for p in names if p in logs.candidates}
    for k in range(2):  # a loop over the two folds
        train, test = folds != k, folds == k
        fitted = clone(model).fit(
            _design(x[train], logs.action[train], quadratic),
            logs.reward[train],
            **_weight_argument(model, None if logs.weight is None else logs.weight[train]),
        )
        q_logged[test] = fitted.predict(_design(x[test], logs.action[test], quadratic))
        for p in v:  # a loop over candidates
            acts = logs.candidates[p][test]
            if acts.ndim == 1:
                v[p][test] = fitted.predict(_design(x[test], acts, quadratic))
            else:
                m = acts.shape[1]
                pred = fitted.predict(
                    _design(np.repeat(x[test], m, axis=0), acts.ravel(), quadratic)
                )
                v[p][test] = pred.reshape(-1, m).mean(axis=1)
    return q_logged, v


def _weight_argument(model: Any, weight: np.ndarray | None) -> dict[str, Any]:
    """The keyword that passes the rows' sampling weights to ``model.fit`` (a pipeline's last
    step), or none without weights.

    Raises
    ------
    ope.ParameterError
        The rows have sampling weights and the model cannot take them.
    """
    if weight is None:
        return {}
    import inspect

    steps = getattr(model, "steps", None)
    final = steps[-1][1] if steps else model
    if "sample_weight" not in inspect.signature(final.fit).parameters:
        raise ParameterError(
            f"`reward_model`: the rows have sampling weights and {type(final).__name__}.fit "
            "takes no sample_weight; use a model that does."
        )
    return {f"{steps[-1][0]}__sample_weight" if steps else "sample_weight": weight}


def _given_model_terms(
    logs: ContinuousLogs, names: list[str], q_column: Any, v_column: Any
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    q_name, template = check_model_columns(
        q_column,
        v_column,
        logged="the model at the logged action",
        candidate="at the candidate's action",
        example="v__{policy}",
    )
    table = logs.table
    if table is None:
        raise ParameterError(
            "`q_column`/`v_column` name columns of the logs' table, and these ContinuousLogs "
            "were not read from one; add the predictions as columns and read them with "
            "ope.read_continuous."
        )
    q_logged = _numeric(table, q_name, "q_column")
    v = {p: _numeric(table, template.replace("{policy}", p), "v_column") for p in names}
    return q_logged, v


# --------------------------------------------------------------------------------------------
# the evaluation
# --------------------------------------------------------------------------------------------
def evaluate_continuous(
    logs: Any,
    policies: Sequence[str] | None = None,
    *,
    candidates: Mapping[str, Any] | None = None,
    densities: Mapping[str, Any] | None = None,
    kernel: str = "gaussian",
    bandwidth: Any = "slope",
    tune_on: str = "snips",
    reward_model: Any = None,
    q_column: str | None = None,
    v_column: str | None = None,
    rng: Any = 0,
    on_invalid: str = "raise",
    **options: Any,
) -> ContinuousEvaluation:
    """Estimate each candidate's mean reward from continuous-action logs (see the module).

    Parameters
    ----------
    logs : ContinuousLogs or what :func:`read_continuous` reads
    policies : sequence of str, optional
        Candidates among the logs' (default every one, and those of ``candidates``/``densities``).
    candidates : mapping of str to array or callable, optional
        More candidates: per row one action ``(n,)`` or ``m`` sampled actions ``(n, m)``, or a
        function of the context DataFrame returning them.
    densities : mapping of str to array or callable, optional
        Stochastic candidates by their density at the logged action ``(n,)`` (or a function of
        the context and the logged actions): exact weights, no kernel.
    kernel : {"gaussian", "epanechnikov", "triangular", "cosine"}, default "gaussian"
    bandwidth : "slope", float or mapping of str to float, default "slope"
        In the actions' units. ``"slope"``: per candidate by SLOPE++ over the grid of
        :func:`bandwidth_grid`, on the intervals of ``tune_on``; the grid's estimates are in
        ``result.bandwidths`` either way.
    tune_on : {"snips", "ips"}, default "snips"
        The estimator whose intervals SLOPE compares.
    reward_model : scikit-learn regressor, optional
        Kernel DR's model of the reward given (context, action), cross-fitted over two folds
        (default: a quadratic ridge regression). Needs numeric context columns.
    q_column, v_column : str, optional
        Your model's predictions instead: at the logged action, and at the candidate's action
        (``v_column`` with ``{policy}`` in it).
    rng : int or Generator, default 0
        The folds of the reward model (and the bootstrap's draws).
    on_invalid : {"raise", "drop"}, default "raise"
        When ``logs`` is read here: as in :func:`read_continuous` (DSJSON lines that break a
        rule).
    **options
        Passed to :func:`ope.evaluate`: ``estimators`` (of :data:`CONTINUOUS_ESTIMATORS`;
        default ``ips``, ``snips`` and, with a context or model columns, ``dr``), ``ci``,
        ``confidence_level``, ``max_weight``, ``reward_range``, ...

    Returns
    -------
    ContinuousEvaluation
        ``result[policy, estimator]``, the bandwidth trade-off, the window diagnostics and a
        verdict per candidate.

    Raises
    ------
    ope.EstimationError
        No candidate has :data:`MIN_WINDOW_ESS` effective rows at any bandwidth, or every
        weight of each is below :data:`MIN_LARGEST_WEIGHT` (the message says, per candidate,
        how far its actions lie from the logged ones in bandwidths, and which bandwidth would
        weigh it).

    Examples
    --------
    >>> import ope
    >>> from ope.simulate import ContinuousBandit
    >>> env = ContinuousBandit(seed=0)
    >>> ev = ope.evaluate_continuous(env.sample(5000, rng=0), ["optimal"], estimators=["snips"])
    >>> abs(ev["optimal", "snips"].value - env.true_value("optimal")) < 0.1
    True
    """
    import ope

    on_invalid = check_choice(on_invalid, "on_invalid", ("raise", "drop"))
    if isinstance(logs, ContinuousLogs):
        cl = logs
    else:
        try:
            cl = read_continuous(logs, on_invalid=on_invalid)
        except (ParameterError, SchemaError, DataFileError) as exc:
            text = str(exc).replace("`source`", "`logs`", 1)
            raise type(exc)(text) from None
    if candidates is not None or densities is not None:
        cl = cl.with_candidates(candidates, densities)
    how = check_choice(kernel, "kernel", KERNELS)
    tune = check_choice(tune_on, "tune_on", ("snips", "ips"))
    names = check_chosen(policies, cl.policies, columns=_COLUMNS_OF_CANDIDATES, example="['up']")
    if not names:
        raise SchemaError(
            "no candidate to evaluate: the logs have no target__<name> or density__<name> "
            "column, and none was given (`candidates`, `densities`)."
        )
    width = _check_bandwidth(bandwidth, [p for p in names if p not in cl.densities], cl.density)
    has_model = q_column is not None or v_column is not None
    unmodelled = [p for p in names if p not in cl.candidates]  # density only: no action for q
    with_dr = (cl.context.shape[1] or has_model) and (has_model or not unmodelled)
    options.setdefault("estimators", ("ips", "snips", "dr") if with_dr else ("ips", "snips"))
    estimators = _check_estimators(options["estimators"])
    if "dr" in estimators and unmodelled and not has_model:
        raise ParameterError(
            f"`estimators`: dr puts its model at the candidate's actions, and "
            f"{', '.join(map(repr, unmodelled))} has only a density; give its samples "
            "(target__<name> as a list column, or an (n, m) array in `candidates`), or your "
            "model's values as q_column/v_column, or leave dr out."
        )
    level = check_confidence_level(options.get("confidence_level", 0.95))
    chosen, grid = _choose_bandwidths(cl, names, how, width, level, tune)
    weights = {
        p: _kernel_weight(cl, p, how, h if h is not None else 1.0) for p, h in chosen.items()
    }
    window = _window_table(cl, names, how, chosen, weights)
    verdicts = {row.policy: _verdict(row) for row in window.itertuples()}
    # weights whose squares fall below float64's normal range are lost to the estimators (then
    # 0): such a candidate is refused here, in terms of kernels and densities, not as one that
    # "never chooses" an action
    weightless = [p for p in names if float(weights[p].max()) < MIN_LARGEST_WEIGHT]
    for p in weightless:  # a loop over candidates
        verdicts[p] = _weightless(cl, p, how, chosen[p], weights[p], width == "slope")
    estimated = [p for p in names if p not in weightless]
    if not estimated:
        raise EstimationError(
            "no candidate can be weighed on these logs: "
            + "; ".join(f"{p!r}: {verdicts[p].split(': ', 1)[-1]}" for p in names)
        )
    w = np.column_stack([weights[p] for p in estimated])
    top = np.maximum(w.max(axis=1), 1.0)
    if not (top <= MAX_FINITE_WEIGHT).all():  # NaN too
        over = np.flatnonzero(~(top <= MAX_FINITE_WEIGHT))
        row = int(over[0])
        raise ValidationError(
            f"kernel weights overflow float64 on {plural(over.size, 'row')} (first at row "
            f"{row}): the candidate's kernel density over the logged density "
            f"{float(cl.density[row])!r} is above {MAX_FINITE_WEIGHT:g}, whose square is not "
            "representable. A logged density this small is not one the logger can have "
            "acted on: fix the logger, or leave such rows out of the logs."
        )
    data: dict[str, Any] = {
        "event_id": np.arange(cl.n),
        "action": np.arange(cl.n),  # each row its own action: the weights carry the kernel
        "propensity": 1.0 / top,
        "reward": cl.reward,
    }
    if cl.weight is not None:
        data["weight"] = cl.weight
    for j, p in enumerate(estimated):  # a loop over candidates
        data[f"target__{p}"] = w[:, j] / top
    weighting = [e for e in estimators if e != "dr"]
    ev_options = {**options, "estimators": tuple(weighting) or ("ips",)}
    bandit = ope.read_logs(pd.DataFrame(data))
    ev = ope.evaluate(bandit, estimated, rng=rng, **ev_options)
    notes: list[str] = []
    estimates = {k: v for k, v in ev.estimates.items() if k[1] in weighting}
    if "dr" in estimators:
        model_estimates, dr_notes = _dr(
            cl, estimated, data, reward_model, q_column, v_column, rng, options
        )
        notes.extend(dr_notes)
        estimates.update({(p, "dr"): est for p, est in model_estimates.items()})
    order = {e: i for i, e in enumerate(estimators)}
    ev = dataclasses.replace(
        ev,
        estimates=dict(
            sorted(estimates.items(), key=lambda kv: (estimated.index(kv[0][0]), order[kv[0][1]]))
        ),
        estimators=list(estimators),
        # the lines of the file (not of the weighted table built here), when they were read
        report=cl.report
        if cl.report is not None
        else dataclasses.replace(ev.report, source=cl.source),
    )
    smoothed = {p: h for p, h in chosen.items() if h is not None}
    if smoothed:
        rule = "given" if width != "slope" else "chosen by SLOPE++ over a grid, then undersmoothed"
        notes.append(
            f"{how} kernel, bandwidths {', '.join(f'{p} {h:.4g}' for p, h in smoothed.items())} "
            f"({rule}): kernel IPS and SNIPS estimate the candidate smoothed at its bandwidth, "
            "and their intervals do not include the smoothing bias; kernel DR's bias is the "
            "smoothing of its model's residual (small when the model is good)"
        )
        kept = [
            p
            for p in smoothed
            if width == "slope"
            and bool(grid[(grid["policy"] == p) & grid["slope"] & grid["chosen"]].shape[0])
        ]
        if kept:
            notes.append(
                f"{', '.join(kept)}: SLOPE's own bandwidth, not undersmoothed (no smaller grid "
                f"bandwidth has {MIN_WINDOW_ESS} effective rows): the smoothing bias may be "
                "as large as the interval's width"
            )
    exact = [p for p, h in chosen.items() if h is None]
    if exact:
        notes.append(
            f"{', '.join(exact)}: exact weights from the candidate's density at the logged "
            "action (no kernel)"
        )
    low_mean = [
        f"{r.policy} ({r.mean_weight:.3g})"
        for r in window.itertuples()
        if verdicts[r.policy] == "evaluable" and r.mean_weight < _LOW_MEAN_WEIGHT
    ]
    if low_mean:
        notes.append(
            f"mean weight well below 1 for {', '.join(low_mean)}: part of the kernel window lies "
            "where the logger does not act, so kernel IPS is biased toward 0 there (SNIPS "
            "renormalizes)"
        )
    notes.extend(f"{p}: {v}" for p, v in verdicts.items() if v != "evaluable")
    notes.extend(cl.notes)
    return ContinuousEvaluation(
        evaluation=dataclasses.replace(ev, notes=(*ev.notes, *notes)),
        kernel=how,
        bandwidth=dict(chosen),
        bandwidths=grid,
        window=window,
        verdicts=verdicts,
        rule="slope" if width == "slope" else "given",
    )


#: A mean weight below this (it is 1 when the kernel window lies inside the logger's support
#: and the logged densities are right) is noted: part of the window is unsupported.
_LOW_MEAN_WEIGHT: Final = 0.5

#: A candidate whose largest weight is below this cannot be weighed: the squares of its
#: weights fall below float64's smallest normal number (this is its square root, ~1.49e-154),
#: so the sums behind the standard errors and effective sample sizes lose their digits, then
#: vanish (a gaussian kernel's weights at about 26 bandwidths from the logged actions). The
#: weights average 1 when the logs cover the candidate, so no usable candidate is near it; and
#: a bandwidth :func:`check_bandwidth` accepts (``h p`` at most :data:`BANDWIDTH_RANGE`'s
#: upper end, 1e150) leaves a logged action within 3.9 bandwidths of the candidate's (gaussian)
#: a weight above it: a candidate is refused here for the distance of its actions from the
#: logged ones, or for logging densities that bandwidth='slope' (not checked) meets.
MIN_LARGEST_WEIGHT: Final = math.sqrt(float(np.finfo(np.float64).tiny))


def _weightless(
    logs: ContinuousLogs,
    name: str,
    kernel_name: str,
    bandwidth: float | None,
    w: np.ndarray,
    slope: bool,
) -> str:
    """The verdict of a candidate whose every weight is below :data:`MIN_LARGEST_WEIGHT`:
    why, in the terms of continuous actions (kernel, bandwidth, the distance from the logged
    actions to the candidate's, the logging density), and what would weigh it: a wider
    bandwidth only when it puts :data:`MIN_WINDOW_ESS` logged actions in the window, weighs
    them and passes :func:`check_bandwidth`; otherwise the logging density is named."""
    largest = float(w.max())
    size = "0" if largest == 0 else f"below {MIN_LARGEST_WEIGHT:.3g} (the largest is {largest:.3g})"
    logged = f"the logging density at the logged actions is {_spread(logs.density)}"
    head = "not evaluable from these logs: "
    if bandwidth is None:
        own = logs.densities[name]
        where = (
            "is 0 at every logged action"
            if float(own.max()) == 0
            else f"at the logged actions ({_spread(own)}) is negligible next to the logger's"
        )
        return (
            f"{head}every weight (the candidate's density over the logger's) is {size}: the "
            f"candidate's density {where}, and {logged}; no kernel or bandwidth enters a "
            f"density-form candidate. Check that density__{name} is the candidate's density "
            "in the actions' units, or give its actions (target__<name>) to weigh it by a "
            "kernel"
        )
    acts = logs.candidates[name]
    d = np.abs(acts - (logs.action if acts.ndim == 1 else logs.action[:, None]))
    nearest = np.sort(np.where(_outside(logs, acts), np.inf, d).reshape(logs.n, -1).min(axis=1))
    if not math.isfinite(float(nearest[0])):
        return (
            f"{head}every kernel weight is 0: each of the candidate's actions lies outside the "
            "logger's support of its row, where the logs cannot weigh it, whatever the "
            "bandwidth"
        )
    reach = _WINDOW[kernel_name]
    window = int((nearest <= reach * bandwidth).sum())
    check_density = (
        "Check that `density` is the logger's density in the actions' units (h p, the "
        "bandwidth times it, is about the logger's probability of the kernel window, so of "
        "order 1 at most)"
    )
    in_window = (
        f"{window} logged action(s) in the {kernel_name} kernel's window at the bandwidth "
        f"{bandwidth:.4g}"
    )
    need = min(MIN_WINDOW_ESS, logs.n)
    if window >= need:  # the window is full: the density makes every weight negligible
        return (
            f"{head}{in_window} (at least {MIN_WINDOW_ESS}), but every kernel weight K(u) / "
            f"(h p) is {size}: {logged}, so h p is {_spread(bandwidth * logs.density)}. "
            f"{check_density}"
        )
    far = (
        f"{head}{in_window} (fewer than {MIN_WINDOW_ESS}), and every kernel weight K(u) / (h p) "
        f"is {size}: the candidate's actions lie {nearest[0] / bandwidth:.3g} bandwidths or "
        f"more from the logged actions ({nearest[0]:.3g} or more in the actions' units), and "
        f"{logged}."
    )
    enough = float(nearest[need - 1])
    if not math.isfinite(enough):
        return (
            f"{far} Fewer than {MIN_WINDOW_ESS} of the candidate's actions lie within the "
            "logger's support, so no bandwidth makes it evaluable: log actions nearer the "
            "candidate's"
        )
    wider = _round_up(enough / reach)  # > bandwidth: the window holds fewer than `need`
    low, high = BANDWIDTH_RANGE
    with np.errstate(over="ignore", under="ignore"):
        checked = low <= wider * float(np.min(logs.density)) and (
            wider * float(np.max(logs.density)) <= high
        )
    if checked and float(_kernel_weight(logs, name, kernel_name, wider).max()) >= (
        MIN_LARGEST_WEIGHT
    ):
        return (
            f"{far} Widen the bandwidth: a bandwidth of about {wider:.3g} puts {MIN_WINDOW_ESS} "
            "logged actions in the window"
            + (" (beyond SLOPE's grid: pass it as bandwidth=)" if slope else "")
            + ", if the candidate may be smoothed that much; otherwise log actions nearer the "
            "candidate's"
        )
    return (
        f"{far} A bandwidth that puts {MIN_WINDOW_ESS} logged actions in the window "
        f"({wider:.3g}) would not weigh it either: h p would be "
        f"{_spread(wider * logs.density)}. {check_density}"
    )


def _round_up(x: float, digits: int = 3) -> float:
    """``x`` rounded up to ``digits`` significant digits (a bandwidth advised as at least
    the one needed, shown as it is given)."""
    step = 10.0 ** (math.floor(math.log10(x)) - digits + 1)
    up = math.ceil(x / step) * step
    return float(f"{up:.{digits}g}") if float(f"{up:.{digits}g}") >= x else up


def _spread(values: np.ndarray) -> str:
    """``"from 0.1 to 3"`` (or ``"0.5"``) for the range of positive values."""
    low, high = float(np.min(values)), float(np.max(values))
    return f"{low:.3g}" if low == high else f"from {low:.3g} to {high:.3g}"


def _verdict(row: Any) -> str:
    """``evaluable``, or why not: too few logged actions (effective rows) in the window."""
    at = "" if not math.isfinite(row.bandwidth) else f" at the bandwidth {row.bandwidth:.4g}"
    if row.window_rows < MIN_WINDOW_ESS:
        return (
            f"not evaluable from these logs: {row.window_rows} logged action(s) in the kernel "
            f"window{at} (fewer than {MIN_WINDOW_ESS}); the logger rarely acted near the "
            "candidate's actions"
            + (f" ({row.outside_support} rows outside its support)" if row.outside_support else "")
        )
    if row.ess < MIN_WINDOW_ESS:
        return (
            f"not evaluable from these logs: {row.ess:.1f} effective rows{at} (fewer than "
            f"{MIN_WINDOW_ESS}); a few rows carry the weights"
        )
    return "evaluable"


def _check_estimators(estimators: Any) -> tuple[str, ...]:
    names = (
        (estimators,)
        if isinstance(estimators, str)
        else tuple(check_names(estimators, "estimators"))
    )
    if not names:
        raise ParameterError(
            "`estimators` is empty; give one or more of " + ", ".join(CONTINUOUS_ESTIMATORS)
        )
    for e in names:
        check_choice(e, "estimators", CONTINUOUS_ESTIMATORS)
    return names


def _window_table(
    logs: ContinuousLogs,
    names: list[str],
    kernel_name: str,
    chosen: Mapping[str, float | None],
    weights: Mapping[str, np.ndarray],
) -> pd.DataFrame:
    s = logs.weight
    rows = []
    for p in names:  # a loop over candidates
        w, h = weights[p], chosen[p]
        inside = _in_window(logs, p, kernel_name, h)
        acts = logs.candidates.get(p)
        if h is None:
            form = "density" + (f" and {acts.shape[1]} samples per row" if acts is not None else "")
        else:
            assert acts is not None
            form = "deterministic" if acts.ndim == 1 else f"samples ({acts.shape[1]} per row)"
        outside = (
            0 if acts is None else int(_outside(logs, acts).reshape(logs.n, -1).any(axis=1).sum())
        )
        ess = _weighted_ess(w, s)
        rows.append(
            {
                "policy": p,
                "form": form,
                "bandwidth": math.nan if h is None else h,
                "window_rows": int(inside.sum()),
                "window_share": float(inside.mean()),
                "ess": ess,
                "ess_share": ess / (logs.n if s is None else float(s.sum())),
                "mean_weight": float(w.mean() if s is None else (s @ w) / s.sum()),
                "outside_support": outside,
            }
        )
    return pd.DataFrame(rows)


def _dr(
    logs: ContinuousLogs,
    names: list[str],
    data: Mapping[str, Any],
    reward_model: Any,
    q_column: Any,
    v_column: Any,
    rng: Any,
    options: Mapping[str, Any],
) -> tuple[dict[str, Any], list[str]]:
    from ope.estimators import DR

    notes: list[str] = []
    if q_column is not None or v_column is not None:
        q_logged, v = _given_model_terms(logs, names, q_column, v_column)
        notes.append(
            f"dr: your model's predictions {q_column!r} (logged action) and {v_column!r} "
            "(the candidate's) corrected by the kernel-weighted residual"
        )
    else:
        if logs.context.shape[1] == 0 and reward_model is None:
            raise ParameterError(
                "`estimators`: dr needs a reward model of (context, action), and the logs have "
                "no numeric context column; give `context_columns` when reading, or "
                "`q_column`/`v_column`, or leave dr out."
            )
        q_logged, v = _fitted_model_terms(logs, names, reward_model, rng)
        model = (
            "a quadratic ridge regression" if reward_model is None else type(reward_model).__name__
        )
        notes.append(
            f"dr: {model} of the reward on (context, action), cross-fitted over 2 folds, "
            "corrected by the kernel-weighted residual"
        )
    out: dict[str, Any] = {}
    for p in names:  # a loop over candidates (each has actions or given values: checked)
        out[p] = DR().estimate(
            logs.reward,
            data["propensity"],
            data[f"target__{p}"],
            q_logged=q_logged,
            q_target=v[p],
            reward_range=options.get("reward_range"),
            sampling_weight=logs.weight,
        )
    return out, notes


@dataclass(frozen=True, eq=False)
class ContinuousEvaluation(Result):
    """Estimates from continuous-action logs (:func:`evaluate_continuous`).

    Attributes
    ----------
    evaluation : ope.Evaluation
        The kernel IPS/SNIPS/clipped IPS estimates and intervals (of the smoothed candidates).
    kernel : str
    bandwidth : dict of str to float or None
        The bandwidth used per candidate (None: exact density weights).
    bandwidths : pandas.DataFrame
        The trade-off: per candidate and grid bandwidth the estimate of ``tune_on``, its
        standard error and one-sided width, the effective rows and the window's rows; the one
        used is ``chosen``.
    window : pandas.DataFrame
        Per candidate at its bandwidth: the rows in the kernel window, the effective sample,
        the mean weight (near 1 when the logged densities are right) and the candidate's actions
        outside the logger's support.
    verdicts : dict of str to str
    model_estimates : dict of str to ope.Estimate
        Kernel DR per candidate (also in ``evaluation``, as estimator ``"dr"``).
    rule : {"slope", "given"}
        How the bandwidths were set.
    """

    evaluation: Any
    kernel: str
    bandwidth: dict[str, float | None]
    bandwidths: pd.DataFrame
    window: pd.DataFrame
    verdicts: dict[str, str]
    rule: str = "slope"

    @property
    def model_estimates(self) -> dict[str, Any]:
        """Kernel DR per candidate (the evaluation's ``"dr"`` estimates)."""
        return {p: est for (p, e), est in self.evaluation.estimates.items() if e == "dr"}

    def __getitem__(self, key: tuple[str, str]) -> Any:
        return self.evaluation[key]

    @property
    def evaluable(self) -> list[str]:
        """The candidates these logs can evaluate."""
        return [p for p, v in self.verdicts.items() if v == "evaluable"]

    def model_table(self) -> pd.DataFrame:
        """Kernel DR: one row per candidate (``policy``, ``estimator``, ``value``,
        ``std_error``, ``ci_low``, ``ci_high``; normal, at the evaluation's level)."""
        rows = interval_rows(self.model_estimates, "dr", self.evaluation.confidence_level)
        return pd.DataFrame(rows, columns=list(INTERVAL_COLUMNS))

    def table(self) -> pd.DataFrame:
        """Every estimate (kernel DR's among them): the evaluation's table."""
        return self.evaluation.table()

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "continuous_evaluation",
            "kernel": self.kernel,
            "bandwidth": dict(self.bandwidth),
            "verdicts": dict(self.verdicts),
            "rule": self.rule,
            "evaluation": self.evaluation.to_dict(),
            "bandwidths": self.bandwidths.to_dict(orient="records"),
            "window": self.window.to_dict(orient="records"),
        }

    def _parts(self) -> ResultParts:
        shown = self.table()[["policy", "estimator", "value", "ci_low", "ci_high"]]
        shown = shown.assign(
            verdict=shown["policy"].map(
                lambda p: "evaluable" if self.verdicts.get(p) == "evaluable" else "NOT evaluable"
            )
        )
        bw = {p: ("exact density" if h is None else f"{h:.4g}") for p, h in self.bandwidth.items()}
        return ResultParts(
            title=f"{len(self.verdicts)} candidate(s) on {self.evaluation.n:,} logged rows "
            f"with continuous actions",
            fields=[
                ("kernel", self.kernel),
                *((f"bandwidth {p}", v) for p, v in bw.items()),
                *((p, v) for p, v in self.verdicts.items()),
            ],
            table=shown,
            notes=self.evaluation.notes,
            precision={},
        )
