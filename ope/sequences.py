r"""Off-policy evaluation of language-model and agent policies from token log-probabilities.

A logged response :math:`y = (y_1, \dots, y_T)` to a prompt :math:`x` carries the behavior
log-probabilities :math:`\log \pi_b(y_t \mid x, y_{<t})` the serving model reported, and a
candidate :math:`\pi_e` (another model, prompt or temperature) scores the same tokens. The
response's importance weight is

.. math:: w = \exp\Big(\sum_t \log \pi_e(y_t \mid \cdot) - \log \pi_b(y_t \mid \cdot)\Big),

kept as its log :math:`\ell = \log w` (a product of hundreds of token ratios overflows in
linear space long before its log does). Each response is then one bandit decision whose
"action" is the whole response, so every estimator and interval of :func:`ope.evaluate`
applies unchanged (:func:`evaluate_sequences`): ope passes ``propensity = 1 / M`` and
``target = w / M`` with :math:`M` the row's largest weight over the candidates (at least 1),
whose ratio is :math:`w` and whose values stay in (0, 1]. The estimand is :math:`V(\pi_e) = \mathbb E_{\pi_e}[R]`, the mean reward of the
candidate's responses to the logged prompts; IPS is unbiased for it when the candidate's
support is inside the logger's and the logged log-probabilities are those of the distribution
that sampled the tokens.

Variants, each with the bias it introduces:

- ``weighting="sequence"`` (default): the unbiased sequence weight;
- ``weighting="length_normalized"``: :math:`\exp(\ell / T)`, the per-token geometric mean
  ratio. Its variance does not grow with length, but it estimates no policy's value: biased
  toward the logger's value (the weight of a response of 50 tokens moves as one token's
  would). Shown for comparison only; a note says so.
- clipping (``max_weight`` of ``clipped_ips``) and self-normalization (``snips``): the bias
  of :func:`ope.evaluate`'s estimators, stated in their notes.
- per-step weighting for agent episodes with step rewards (:func:`sequence_trajectories` and
  :func:`ope.sequential_estimate` with ``"pdis"``): the reward of step :math:`t` weighted by
  the ratios of steps :math:`\le t` only; unbiased, with less variance when rewards come early.

Two checks decide whether an estimate is possible at all:

- :func:`sequence_divergences`: Schulman's three estimators of :math:`KL(\pi_b \| \pi_e)` from
  the logged responses (:math:`r = w`: ``k1`` :math:`= -\ell` unbiased; ``k2`` :math:`=
  \ell^2/2` biased, low variance; ``k3`` :math:`= (w - 1) - \ell` unbiased and :math:`\ge 0`),
  each with its standard error, :math:`KL(\pi_e \| \pi_b) = \mathbb E_b[w \ell]`, the
  effective sample size and the Pareto :math:`\hat k` of the weights; a candidate is
  *not evaluable* from these logs when :math:`\hat k >` :data:`MAX_PARETO_K`, when the
  effective sample is below :data:`MIN_EFFECTIVE_SHARE` of the responses, or when the
  effective sample that k1 predicts, :math:`n e^{-2 k_1}` (log-normal weights), is below
  :data:`MIN_PREDICTED_ESS` (below :data:`MIN_PREDICTED_SHARE` of :math:`n` in samples too
  small for that count). A response the candidate cannot produce (log-probability
  ``-inf``: weight 0) is harmless to the estimators but makes KL(logger || candidate)
  infinite; the prediction then uses the responses it can produce. The last check is the one to trust for long responses: the observed
  effective sample and :math:`\hat k` look healthy in exactly the samples that missed the
  weights' tail (``benchmarks/sequences.py``).
- :func:`audit_logprobs`: whether the logged log-probabilities can be the sampling
  distribution. For a candidate that *is* the logger (``on_policy=``), every token ratio must
  be 1; the audit measures the deviation per token and per response, and recognizes the
  signatures of the known pitfalls: one-signed ratios (the kept mass of top-p/top-k
  truncation: one side renormalized over the kept tokens, the other not), ratios linear in
  both sides' log-probabilities with one sign (a temperature applied on one side only: slope
  :math:`T_b / T_e - 1`; noise tilts the two slopes apart), and a symmetric noise floor
  (unusable when it would inflate IPS by more than 5%). For every candidate it tests :math:`\mathbb E_b[w] = 1`, which holds
  for any candidate whose support is inside the logger's.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa

from ope._format import Note
from ope._result import INTERVAL_COLUMNS, Result, ResultParts, interval_rows
from ope._thresholds import (
    ESS_RATIO_WARN,
    K_RELIABLE,
    MEAN_WEIGHT_Z,
    kish_ess,
    mean_weight_check,
)
from ope._validation import (
    MAX_FINITE_WEIGHT,
    check_choice,
    check_chosen,
    check_forwarded,
    check_model_columns,
    check_name,
)
from ope.exceptions import (
    DataFileError,
    EstimationError,
    ParameterError,
    SchemaError,
    ValidationError,
)
from ope.weights import SAMPLING_WEIGHT_COLUMN

__all__ = [
    "MAX_JSON_DEPTH",
    "SequenceLogs",
    "read_sequences",
    "evaluate_sequences",
    "sequence_trajectories",
    "sequence_divergences",
    "audit_logprobs",
    "SequenceDivergences",
    "SequenceEvaluation",
    "LogprobAudit",
    "SEQUENCE_WEIGHTINGS",
    "TARGET_LOGPROBS_PREFIX",
    "MAX_PARETO_K",
    "MIN_EFFECTIVE_SHARE",
    "MIN_PREDICTED_ESS",
    "MIN_PREDICTED_SHARE",
    "TOKEN_RATIO_BAND",
    "LOGPROB_TOLERANCE",
]

#: How a response's token ratios make its weight (see the module).
SEQUENCE_WEIGHTINGS: Final = ("sequence", "length_normalized")

#: Prefix of the columns holding a candidate's log-probabilities of the logged tokens.
TARGET_LOGPROBS_PREFIX: Final = "target_logprobs__"

#: Above this Pareto k-hat of the weights, the weighted mean has no usable variance (Vehtari
#: et al., Pareto smoothed importance sampling, JMLR 2024): the candidate is not evaluable.
MAX_PARETO_K: Final = K_RELIABLE

#: Below this share of the responses as effective sample, the candidate is not evaluable.
MIN_EFFECTIVE_SHARE: Final = ESS_RATIO_WARN

#: The band of token ratios the audit counts as agreeing (the issue threads' [0.9, 1.1]).
TOKEN_RATIO_BAND: Final = (0.9, 1.1)

#: Below this effective sample predicted from KL(logger || candidate), the candidate is not
#: evaluable: under log-normal weights with E_b[w] = 1, var(log w) = 2 KL and the effective
#: sample is n exp(-2 KL). KL is estimated stably by k1 where the observed effective sample and
#: k-hat are not: both look healthy in exactly the samples that missed the weights' tail. At 100
#: the runs passed at 12 to 20 tokens undercovered (0.73-0.90, benchmarks/sequences.py); at 500
#: every length's passed runs cover 0.93-0.96 there, and a skewness rule on the terms would
#: pass the worse runs (those that missed the tail look the least skewed).
MIN_PREDICTED_ESS: Final = 500.0

#: With fewer than ``MIN_PREDICTED_ESS / MIN_PREDICTED_SHARE`` responses the predicted effective
#: sample is compared with this share of them instead (an identical candidate predicts n: a
#: small sample is not refused for being small).
MIN_PREDICTED_SHARE: Final = 0.5

#: A log-probability above 0 by more than this is refused (it is no log-probability).
LOGPROB_TOLERANCE: Final = 1e-6

#: The largest |log weight| ope weighs: ope.read_logs refuses weights above MAX_FINITE_WEIGHT
#: (1e150, whose square float64 still holds), and a candidate whose weights are all below its
#: inverse has, for any estimate, no logged response.
_MAX_LOG_WEIGHT: Final = math.log(MAX_FINITE_WEIGHT)


#: A token log-ratio beyond this counts as a deviation in the audit's sign and slope checks.
_DEVIATION: Final = 1e-3

#: Noise whose inflation of IPS (were it all on the behavior's side) exceeds this makes the
#: logged log-probabilities unusable.
_NOISE_INFLATION: Final = 0.05

#: The temperature signature needs both slopes this many standard errors from 0 (tokens of a
#: response are not independent: the t statistics are overstated, so the bar is high) and an
#: R^2 above ``_TEMPERATURE_R2`` on both sides.
_TEMPERATURE_T: Final = 10.0
_TEMPERATURE_R2: Final = 0.1


@dataclass(frozen=True, eq=False)
class SequenceLogs:
    """Validated logged responses with their behavior and candidates' log-probabilities
    (:func:`read_sequences`).

    Attributes
    ----------
    table : pyarrow.Table
        The rows as read (every column kept).
    policies : tuple of str
        The candidates (``target_logprobs__<name>`` columns).
    reward : numpy.ndarray, shape (n,)
    offsets : numpy.ndarray or None
        Per-token columns: row ``i``'s tokens are ``offsets[i]:offsets[i + 1]`` of the flat
        arrays; ``None`` when each row holds one summed log-probability.
    behavior : numpy.ndarray
        Behavior log-probabilities: per token (flat) or per response.
    targets : numpy.ndarray
        Candidates' log-probabilities, shape ``(len(behavior), P)``.
    notes : tuple of str
        How the rows were read (e.g. a metadata field whose JSON type changes between records,
        kept as text); :func:`evaluate_sequences` adds them to its notes.
    source : str
        Where the rows come from (the path, or ``"<DataFrame>"``, ``"<Table>"``): the
        evaluation's validation report names it.
    """

    table: pa.Table = field(repr=False)
    policies: tuple[str, ...]
    reward: npt.NDArray[np.float64] = field(repr=False)
    offsets: npt.NDArray[np.int64] | None = field(repr=False)
    behavior: npt.NDArray[np.float64] = field(repr=False)
    targets: npt.NDArray[np.float64] = field(repr=False)
    notes: tuple[str, ...] = ()
    source: str = "<table>"

    @property
    def n(self) -> int:
        """Number of responses."""
        return int(self.reward.size)

    @property
    def token_counts(self) -> npt.NDArray[np.int64] | None:
        """Tokens per response (``None`` for summed log-probabilities)."""
        return None if self.offsets is None else np.diff(self.offsets)

    def log_weights(self, weighting: str = "sequence") -> npt.NDArray[np.float64]:
        """``(n, P)`` log importance weights of the responses (see the module)."""
        how = check_choice(weighting, "weighting", SEQUENCE_WEIGHTINGS)
        delta = self.targets - self.behavior[:, None]
        if self.offsets is None:
            if how == "length_normalized":
                raise ParameterError(
                    "weighting='length_normalized' needs per-token log-probabilities (list "
                    "columns); these logs hold one summed log-probability per response."
                )
            return delta
        counts = np.diff(self.offsets)
        sums = _row_sums(delta, self.offsets)
        if how == "length_normalized":
            return np.where(counts[:, None] > 0, sums / np.maximum(counts, 1)[:, None], 0.0)
        return sums


def _row_sums(values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Per-row sums of flat per-token values ``(N, P)`` (empty rows: 0), in one pass."""
    total = np.zeros((offsets.size - 1, values.shape[1]))
    counts = np.diff(offsets)
    if values.shape[0]:
        rows = np.repeat(np.arange(offsets.size - 1), counts)
        for j in range(values.shape[1]):  # a loop over candidates, not rows
            total[:, j] = np.bincount(rows, weights=values[:, j], minlength=offsets.size - 1)
    # -inf + finite sums to -inf in bincount as well; nan only from -inf + inf, refused earlier
    return total


#: The deepest nesting of JSON arrays and objects :func:`read_sequences` hands to Arrow's JSON
#: reader (a log-probability record needs 2; pyarrow 26 ends the process on a line nested some
#: 20,000 deep).
MAX_JSON_DEPTH: Final = 1000

#: Bytes per chunk of :func:`_json_depth` (its temporaries are a few int32 arrays of this length).
_DEPTH_CHUNK: Final = 1 << 22


def _byte_blocks(path: str | Path, size: int) -> Any:
    """The file's bytes in blocks of at most ``size``."""
    with open(path, "rb") as handle:
        while block := handle.read(size):
            yield block


#: Bytes per block of :func:`_lines_within`.
_LINES_BLOCK: Final = 1 << 15


def _lines_within(path: str | Path, limit: int) -> bool:
    """Whether no line of the file holds more than ``limit`` ``[`` and ``{`` bytes (strings
    included): then no line nests deeper. Blocks of 32 KiB are counted by ``bytes.count``; only
    a block with more than ``limit`` of them is counted line by line (numpy), so a file of
    records of log-probabilities (a handful per line) costs a fraction of its parse."""
    carry = 0  # the openers of the line that continues from the block before
    for block in _byte_blocks(path, _LINES_BLOCK):
        if carry + block.count(b"[") + block.count(b"{") > limit:
            a = np.frombuffer(block, dtype=np.uint8)
            count = np.cumsum((a | 0x20) == 0x7B, dtype=np.int32)  # "[" or "{"
            ends = np.flatnonzero(a == 0x0A)
            if ends.size == 0:
                carry += int(count[-1])
            else:
                at = count[ends]
                if carry + int(at[0]) > limit or int(np.diff(at).max(initial=0)) > limit:
                    return False
                carry = int(count[-1] - at[-1])
            if carry > limit:
                return False
            continue
        cut = block.rfind(b"\n")
        tail = block if cut < 0 else block[cut + 1 :]
        carry = (carry if cut < 0 else 0) + tail.count(b"[") + tail.count(b"{")
    return True


def _json_depth(path: str | Path) -> int:
    r"""The deepest nesting of ``[`` and ``{`` on any line of a JSON-lines file, brackets inside
    strings left out (a ``"`` preceded by an odd number of backslashes does not end a string);
    each line counts from 0 (a raw line break cannot be inside a JSON string, so a cut or
    unbalanced line does not add to the next).

    One vectorized read, chunk by chunk (a line's depth and whether it has a string open, and
    the run of backslashes at a chunk's end, carry over to the next chunk).

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "x.jsonl"
    >>> _ = p.write_text('{"a": [[1]], "b": "[[\\"[["}\n{"c": [[[\n{"d": {}}\n')
    >>> _json_depth(p)  # the cut second line: 4, not carried into the third
    4
    """
    deepest = depth = 0
    in_string = False
    run = 0  # backslashes just before the chunk
    for block in _byte_blocks(path, _DEPTH_CHUNK):
        a = np.frombuffer(block, dtype=np.uint8)
        idx = np.arange(a.size, dtype=np.int32)
        last = np.maximum.accumulate(np.where(a != 0x5C, idx, -1))
        before = np.empty(a.size, dtype=np.int32)  # the last byte before i that is not "\"
        before[0] = -1
        before[1:] = last[:-1]
        count = idx - 1 - before + np.where(before < 0, run, 0)
        quotes = np.cumsum((a == 0x22) & (count % 2 == 0), dtype=np.int32)
        # each line from its start: the last line break at or before i (-1: the line continues
        # from the chunk before, with the carried state)
        line = np.maximum.accumulate(np.where(a == 0x0A, idx, -1))
        start = np.maximum(line, 0)
        opened = np.where(line >= 0, quotes - quotes[start], quotes + (1 if in_string else 0))
        step = ((a == 0x5B) | (a == 0x7B)).astype(np.int32)
        step -= (a == 0x5D) | (a == 0x7D)
        levels = np.cumsum(np.where(opened % 2 == 0, step, 0), dtype=np.int32)
        levels = np.where(line >= 0, levels - levels[start], levels + depth)
        deepest = max(deepest, int(levels.max()))
        depth = int(levels[-1])
        in_string = bool(opened[-1] % 2)
        run = int(a.size - 1 - last[-1]) + (run if last[-1] < 0 else 0)
    return deepest


#: The largest JSON-lines file whose parse error :func:`_located_parse_error` locates: it parses
#: the file again as one block (pyarrow's block size is a 32-bit count; the block is held in
#: memory once more), only after the first parse failed.
MAX_LOCATED_BYTES: Final = 1 << 30

#: How pyarrow's JSON reader ends a parse error: the record's number within the block it was
#: parsing (1 MiB by default), not within the file.
_ARROW_ROW: Final = re.compile(r"\s*in row (\d+)\s*$")


def _line_of_record(path: str | Path, record: int) -> tuple[int | None, int]:
    """(the 0-based line of the file that holds its ``record``-th record, or None past the
    last; the number of lines): records are the lines that are not blank (only spaces, tabs
    or carriage returns), which pyarrow's reader skips. Counted block by block (numpy)."""
    found: int | None = None
    lines = seen = 0  # complete lines and records before the block
    inked = False  # the line continued from the block before has a record's byte
    for block in _byte_blocks(path, _DEPTH_CHUNK):
        a = np.frombuffer(block, dtype=np.uint8)
        ink = np.concatenate(([0], np.cumsum(~np.isin(a, (0x20, 0x09, 0x0D, 0x0A)))))
        ends = np.flatnonzero(a == 0x0A)
        starts = np.concatenate(([0], ends + 1))
        per = ink[np.concatenate((ends, [a.size]))] - ink[starts]  # record bytes per line
        is_record = per > 0
        is_record[0] |= inked
        complete = is_record[:-1]  # the last line may continue in the next block
        if found is None:
            at = np.flatnonzero(np.cumsum(complete) == record - seen + 1)
            if at.size:
                found = lines + int(at[0])
        seen += int(complete.sum())
        lines += ends.size
        inked = bool(is_record[-1])
    if inked:  # the last line has no line break
        if found is None and seen == record:
            found = lines
        lines += 1
    return found, lines


def _located_parse_error(path: str | Path, message: str) -> str:
    """pyarrow's JSON parse error ``message`` with the file's line of the broken record: its
    own row number counts within a block, so the file (up to :data:`MAX_LOCATED_BYTES`) is
    parsed again as one block, whose row number is the record's in the file; past that size,
    or when the second parse does not fail so, the line is said to be unknown."""
    first = _ARROW_ROW.search(message)
    if first is None:
        return message
    import pyarrow.json as pj

    head = message[: first.start()]
    size = Path(path).stat().st_size
    again = None
    if size < MAX_LOCATED_BYTES:
        try:
            pj.read_json(path, read_options=pj.ReadOptions(use_threads=False, block_size=size + 1))
        except pa.ArrowInvalid as exc:
            again = _ARROW_ROW.search(str(exc))
    if again is not None:
        line, lines = _line_of_record(path, int(again.group(1)))
        if line is not None:
            return f"{head} (line {line:,} of {lines:,}, counting from 0)"
    return (
        f"{head} (its line is not known: the file is larger than {MAX_LOCATED_BYTES:,} bytes)"
        if size >= MAX_LOCATED_BYTES
        else f"{head} (its line is not known)"
    )


def _as_table(source: Any) -> tuple[pa.Table, tuple[str, ...]]:
    """The rows of ``source`` and notes on how they were read."""
    if isinstance(source, pa.Table):
        return source, ()
    if isinstance(source, pd.DataFrame):
        try:
            return pa.Table.from_pandas(source, preserve_index=False), ()
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # a column mixes types between rows
            return _table_by_column(source, "types between rows")
    if isinstance(source, (str, Path)):
        path = Path(source)
        suffix = path.suffix.lower()
        if str(source) and suffix not in (".parquet", ".pq", ".jsonl", ".json", ".ndjson"):
            raise ParameterError(
                f"`source` {str(path)!r}: read_sequences reads .jsonl/.json (JSON lines) and "
                ".parquet files."
            )
        if not str(source):
            raise ParameterError("`source` is empty: give a JSON-lines or parquet file.")
        from ope._paths import UTF8_BOM, check_regular_file

        check_regular_file(path, "`source`")
        try:
            if suffix in (".parquet", ".pq"):
                import pyarrow.parquet as pq

                return pq.read_table(path), ()
            import pyarrow.json as pj

            with open(path, "rb") as handle:
                head = handle.read(4096).removeprefix(UTF8_BOM).lstrip()
            if head.startswith(b"["):
                raise DataFileError(
                    f"`source` {str(path)!r} holds one JSON array; read_sequences reads JSON "
                    "lines (one object per line, as serving stacks export them): write each "
                    "record on its own line."
                )
            # a line nested deeper than pyarrow's reader survives is refused (its few
            # brackets per line clear almost every file without the exact count)
            deepest = 0 if _lines_within(path, MAX_JSON_DEPTH) else _json_depth(path)
            if deepest > MAX_JSON_DEPTH:
                raise DataFileError(
                    f"`source` {str(path)!r} nests JSON arrays or objects {deepest:,} deep; a "
                    f"response record needs 2, and read_sequences reads at most "
                    f"{MAX_JSON_DEPTH:,}: export one flat object per response."
                )
            try:
                return pj.read_json(path), ()
            except pa.ArrowInvalid as exc:
                if "changed from" not in str(exc):
                    raise
            return _read_mixed_jsonl(path)
        except DataFileError:
            raise
        except (pa.ArrowInvalid, OSError, ValueError) as exc:
            kind = (
                "parquet" if suffix in (".parquet", ".pq") else "JSON lines (one object per line)"
            )
            why = str(exc)
            if kind != "parquet" and isinstance(exc, pa.ArrowInvalid):
                why = _located_parse_error(path, why)
            raise DataFileError(
                f"`source` {str(path)!r} is not readable as {kind}: {why}"
            ) from None
    raise ParameterError(
        "`source` must be a path (JSON lines or parquet), a pandas.DataFrame or a pyarrow.Table; "
        f"got {type(source).__name__}."
    )


def _read_mixed_jsonl(path: Path) -> tuple[pa.Table, tuple[str, ...]]:
    """A JSON-lines file in which some field changes its JSON type between records (extra
    metadata, typically): read by pandas' parser, each column converted on its own (see
    :func:`_table_by_column`)."""
    import io

    text = path.read_bytes().decode("utf-8-sig")  # a byte-order mark is no JSON
    frame = pd.read_json(io.StringIO(text), lines=True, dtype=False, precise_float=True)
    return _table_by_column(frame, "JSON types between records")


#: Schema metadata of a table :func:`_table_by_column` made: the columns whose types change
#: between records, and where (JSON: ``{"kinds": ..., "columns": {name: where}}``).
_MIXED_KEY: Final = "ope.sequences_mixed_columns"


def _table_by_column(frame: pd.DataFrame, what: str) -> tuple[pa.Table, tuple[str, ...]]:
    """The columns of ``frame`` converted to Arrow one by one; a column that mixes types
    (``what`` says which, for the note) is kept as the JSON text of each value, and a note
    names it with the kinds and the first row that differs (the log-probability, reward and
    model columns are then refused by :func:`_from_table` if they are among them)."""
    arrays: dict[str, pa.Array] = {}
    mixed: dict[str, str] = {}  # column -> where its types differ
    for name in frame.columns:  # a loop over columns
        try:
            arrays[str(name)] = pa.array(frame[name], from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            values = frame[name].tolist()  # a column of mixed types only
            kinds = [type(v).__name__ for v in values]
            row = next((i for i, k in enumerate(kinds) if k != kinds[0]), None)
            mixed[str(name)] = (
                f"{kinds[0]}s whose entries mix types"  # one type per record, mixed within
                if row is None
                else f"{kinds[0]} at row 0, {kinds[row]} at row {row}"
            )
            arrays[str(name)] = pa.array([json.dumps(v, default=str) for v in values])
    if not mixed:
        return pa.table(arrays), ()
    shown = ", ".join(f"{name!r} ({where})" for name, where in mixed.items())
    note = f"column(s) {shown} mix {what}: kept as the JSON text of each value"
    # what _from_table reads to refuse a mixed column it needs (not the note's text)
    record = {"kinds": what.split(" between", 1)[0], "columns": mixed}
    table = pa.table(arrays).replace_schema_metadata({_MIXED_KEY: json.dumps(record)})
    return table, (note,)


def _chosen(policies: Any, available: Sequence[str]) -> list[str]:
    """The candidates named by ``policies`` (default every one), each one of ``available``."""
    return check_chosen(
        policies,
        available,
        columns=f"the {TARGET_LOGPROBS_PREFIX}<name> columns",
        example="['tuned']",
    )


def _logprob_column(
    table: pa.Table, name: str, what: str = "log-probability"
) -> tuple[np.ndarray, np.ndarray | None]:
    """A log-probability (or per-token ``what``) column as (flat values, offsets) for a list
    column, else (values, None); nulls refused with the row."""
    col = table.column(name).combine_chunks() if table.num_rows else table.column(name)
    kind = col.type
    if table.num_rows and col.null_count:
        row = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
        raise ValidationError(
            f"column `{name}` is missing at row {row}: every response needs its {what} values."
        )
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        inner = kind.value_type
        if not (
            pa.types.is_floating(inner) or pa.types.is_integer(inner) or pa.types.is_null(inner)
        ):
            raise SchemaError(
                f"column `{name}` must hold numbers (lists of floats); it holds {kind}."
            )
        if not table.num_rows:
            return np.empty(0), np.zeros(1, dtype=np.int64)
        flat = col.flatten()
        offsets = np.asarray(col.offsets.to_numpy(), dtype=np.int64)
        offsets = offsets - offsets[0]
        if flat.null_count:
            i = int(np.flatnonzero(flat.is_null().to_numpy(zero_copy_only=False))[0])
            row = int(np.searchsorted(offsets, i, side="right") - 1)
            raise ValidationError(
                f"column `{name}` has a missing token {what} (null) at row {row}, "
                f"token {i - int(offsets[row])}: every token needs its {what}."
            )
        return np.asarray(flat.to_numpy(zero_copy_only=False), dtype=np.float64), offsets
    if pa.types.is_floating(kind) or pa.types.is_integer(kind):
        return np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.float64), None
    raise SchemaError(
        f"column `{name}` must hold log-probabilities: a list of floats per response (one per "
        f"token) or one float (their sum); it holds {kind}."
    )


def _row_of(offsets: np.ndarray | None, index: int) -> int:
    return index if offsets is None else int(np.searchsorted(offsets, index, side="right") - 1)


def read_sequences(
    source: Any,
    *,
    reward_column: str = "reward",
    behavior_column: str = "behavior_logprobs",
    policies: Sequence[str] | None = None,
) -> SequenceLogs:
    """Read and validate logged responses for :func:`evaluate_sequences`.

    One row per response: ``behavior_column`` (the serving model's log-probability of each generated
    token, a list; or their sum, a float), one ``target_logprobs__<name>`` column per candidate
    of the same kind (its log-probabilities of the same tokens), and ``reward_column`` (a judge score,
    a label, success). Any other column (``prompt_id``, ``tokens``, ``step_rewards``, ...) is
    kept. No row is dropped: a bad row raises with its position.

    Parameters
    ----------
    source : path, pandas.DataFrame or pyarrow.Table
        A JSON-lines file (``.jsonl``, as serving stacks export one record per response), a
        parquet file, or data in memory.
    reward_column : str, default "reward"
        The reward column.
    behavior_column : str, default "behavior_logprobs"
        The behavior log-probability column.
    policies : sequence of str, optional
        The candidates to read (default: every ``target_logprobs__<name>`` column).

    Returns
    -------
    SequenceLogs

    Raises
    ------
    ope.SchemaError
        A missing column, no candidate, or a column of the wrong type.
    ope.ValidationError
        A missing value; a reward that is not finite; a log-probability that is NaN, above 0
        (not a log-probability) or, for the behavior, ``-inf`` (a token sampled with
        probability 0); a candidate's list of another length than the behavior's.

    Examples
    --------
    >>> import pandas as pd, ope
    >>> df = pd.DataFrame({"behavior_logprobs": [[-0.1, -0.7], [-0.4]],
    ...                    "target_logprobs__tuned": [[-0.2, -0.5], [-0.4]],
    ...                    "reward": [1.0, 0.0]})
    >>> logs = ope.read_sequences(df)
    >>> logs.n, logs.policies, logs.log_weights().round(3).ravel().tolist()
    (2, ('tuned',), [0.1, 0.0])
    """
    table, read_notes = _as_table(source)
    return _from_table(table, read_notes, source, reward_column, behavior_column, policies)


def _from_table(
    table: pa.Table,
    read_notes: tuple[str, ...],
    source: Any,
    reward_column: str,
    behavior_column: str,
    policies: Any,
    on_policy: str | None = None,
) -> SequenceLogs:
    """:func:`read_sequences` of a table, reading ``on_policy`` beside ``policies``."""
    reward = check_name(reward_column, "reward_column", what="a column name")
    behavior = check_name(behavior_column, "behavior_column", what="a column name")
    try:
        names = table.column_names
    except UnicodeDecodeError:  # pyarrow decodes the names when asked for them
        raise SchemaError(
            "`source`: a field name of the records is not UTF-8 text; ope reads JSON lines and "
            "parquet column names as UTF-8. Write the file's field names in UTF-8."
        ) from None
    if not names and not table.num_rows:  # a JSON-lines file of blank lines, or an empty table
        raise DataFileError("`source` holds no records (no columns and no rows).")
    for column, argument, what in (
        (reward, "reward_column", "the reward"),
        (behavior, "behavior_column", "the behavior log-probabilities"),
    ):
        if column not in names:
            raise SchemaError(
                f"`{argument}`: no column {column!r} ({what}); columns: "
                f"{', '.join(map(repr, names[:20]))}."
            )
    mixed = json.loads((table.schema.metadata or {}).get(_MIXED_KEY.encode(), b"{}"))
    for column in [  # a column read as text because its type changes between records
        reward,
        behavior,
        *(c for c in names if c.startswith(TARGET_LOGPROBS_PREFIX)),
    ]:
        if column in mixed.get("columns", {}):
            raise SchemaError(
                f"column `{column}` mixes {mixed['kinds']} ({mixed['columns'][column]}): every "
                "record needs the same kind (a list of numbers per token, or one number)."
            )
    found = [
        c[len(TARGET_LOGPROBS_PREFIX) :] for c in names if c.startswith(TARGET_LOGPROBS_PREFIX)
    ]
    if "" in found:
        raise SchemaError(
            f"column {TARGET_LOGPROBS_PREFIX!r} names no candidate: name it "
            f"{TARGET_LOGPROBS_PREFIX}<name> (e.g. {TARGET_LOGPROBS_PREFIX}tuned)."
        )
    chosen = _chosen(policies, found)
    if on_policy is not None and on_policy not in chosen:
        if on_policy not in found:
            raise SchemaError(
                f"`on_policy`: no candidate {on_policy!r} in these logs; they have "
                f"{', '.join(found)}."
            )
        chosen.append(on_policy)
    if not chosen:
        raise SchemaError(
            f"no candidate: one {TARGET_LOGPROBS_PREFIX}<name> column per candidate (its "
            "log-probabilities of the logged tokens)."
        )
    if table.num_rows == 0:
        raise ValidationError(
            f"{_source_name(source)} holds no rows; there is nothing to evaluate (one row per "
            "logged response)."
        )
    kind = table.schema.field(reward).type
    if not (pa.types.is_floating(kind) or pa.types.is_integer(kind) or pa.types.is_boolean(kind)):
        raise SchemaError(f"column `{reward}` (the reward) must be numeric; it holds {kind}.")
    r = np.asarray(table.column(reward).to_numpy(zero_copy_only=False), dtype=np.float64).reshape(
        -1
    )
    if not np.isfinite(r).all():
        row = int(np.flatnonzero(~np.isfinite(r))[0])
        raise ValidationError(
            f"the reward of row {row} is missing or not finite ({r[row]!r}); fill or remove it."
        )
    b, offsets = _logprob_column(table, behavior)
    targets = []
    for name in chosen:  # a loop over candidates, not rows
        column = TARGET_LOGPROBS_PREFIX + name
        t, t_offsets = _logprob_column(table, column)
        if (t_offsets is None) != (offsets is None):
            raise SchemaError(
                f"`{column}` and `{behavior}` must be of one kind: both lists (per token) or both "
                "floats (per response)."
            )
        if offsets is not None and t_offsets is not None and not np.array_equal(offsets, t_offsets):
            row = int(np.flatnonzero(np.diff(offsets) != np.diff(t_offsets))[0])
            raise ValidationError(
                f"row {row}: `{column}` has {int(np.diff(t_offsets)[row])} token log-probabilities "
                f"and `{behavior}` {int(np.diff(offsets)[row])}; both score the same tokens."
            )
        targets.append(t)
    t_all = np.column_stack(targets) if targets else np.empty((b.size, 0))
    for values, column in [(b, behavior)] + [
        (t_all[:, j], TARGET_LOGPROBS_PREFIX + p) for j, p in enumerate(chosen)
    ]:  # a loop over the log-probability columns
        bad = np.isnan(values) | (values > LOGPROB_TOLERANCE)
        if column == behavior:
            bad |= np.isneginf(values)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            value = float(values[i])
            why = (
                "a token the logger sampled cannot have probability 0 (-inf)"
                if np.isneginf(value)
                else f"a log-probability must be <= 0 (up to {LOGPROB_TOLERANCE:g}); are these probabilities or logits?"
                if value > 0
                else "NaN is no log-probability"
            )
            raise ValidationError(
                f"column `{column}` holds {value!r} at row {_row_of(offsets, i)}: {why}."
            )
    return SequenceLogs(
        table=table,
        policies=tuple(chosen),
        reward=r,
        offsets=offsets,
        behavior=b,
        targets=np.minimum(t_all, 0.0),
        notes=read_notes,
        source=str(source) if isinstance(source, (str, Path)) else f"<{type(source).__name__}>",
    )


def _source_name(source: Any) -> str:
    if isinstance(source, (str, Path)):
        return f"`source` {str(source)!r}"
    return f"the {type(source).__name__}"


def _check_on_policy(seq: SequenceLogs, on_policy: Any) -> str | None:
    """``on_policy`` checked against the candidates of ``seq`` (None passes)."""
    if on_policy is None:
        return None
    name = check_name(on_policy, "on_policy", what="a candidate name")
    if name not in seq.policies:
        found = [
            c[len(TARGET_LOGPROBS_PREFIX) :]
            for c in seq.table.column_names
            if c.startswith(TARGET_LOGPROBS_PREFIX)
        ]
        if name in found:
            raise SchemaError(
                f"`on_policy`: candidate {name!r} was left out by read_sequences(policies=...): "
                "add it there (the audit reads its log-probabilities)."
            )
        raise SchemaError(
            f"`on_policy`: no candidate {name!r} in these logs; they have {', '.join(found)}."
        )
    return name


def _check_estimators(estimators: Any) -> None:
    """The weighting estimators only: ope fits no reward model of responses."""
    from ope.evaluation import STREAMING_ESTIMATORS

    given = [estimators] if isinstance(estimators, str) else list(estimators or ())
    other = [e for e in given if isinstance(e, str) and e not in STREAMING_ESTIMATORS]
    if other:
        raise ParameterError(
            f"`estimators`: {other[0]!r} is not a weighting estimator of responses; use "
            f"{', '.join(sorted(STREAMING_ESTIMATORS))}. ope fits no reward model of "
            "responses: DR takes your model's predictions through `q_column` and `v_column` "
            "(result[policy, 'dr'])."
        )


def _check_logs(logs: Any) -> SequenceLogs:
    if isinstance(logs, SequenceLogs):
        return logs
    return read_sequences(logs)


def evaluate_sequences(
    logs: Any,
    policies: Sequence[str] | None = None,
    *,
    weighting: str = "sequence",
    on_policy: str | None = None,
    q_column: str | None = None,
    v_column: str | None = None,
    **options: Any,
) -> SequenceEvaluation:
    r"""Estimate each candidate's mean reward from logged responses (see the module).

    Parameters
    ----------
    logs : SequenceLogs or what :func:`read_sequences` reads
    policies : sequence of str, optional
        Candidates (default every one).
    weighting : {"sequence", "length_normalized"}, default "sequence"
        See the module; ``"length_normalized"`` is biased and noted so.
    on_policy : str, optional
        A candidate that is the logger itself (e.g. the trainer's recomputation of the
        serving model's log-probabilities): :func:`audit_logprobs` checks it first, and the
        evaluation is refused when the logged log-probabilities cannot be the sampling
        distribution.
    q_column, v_column : str, optional
        A reward model's predictions, for DR: ``q_column`` holds :math:`\hat q(x_i, y_i)`, the
        model's (e.g. a calibrated judge's) expected reward of each logged response, and
        ``v_column`` (with ``{policy}`` in it, e.g. ``"v_target__{policy}"``) holds
        :math:`\hat v(x_i, \pi)`, the expected reward of the candidate's responses to the
        row's prompt (the model's mean score of fresh responses drawn from the candidate).
        DR is :math:`\hat v + w (r - \hat q)`: unbiased when either the weights or the model
        are right, with the variance of the weighted residual only (``result.model_estimates``).
    **options
        Passed to :func:`ope.evaluate` (``estimators``, ``ci``, ``confidence_level``,
        ``max_weight``, ``reward_range``, ``weight_column``, ...): the weighting estimators
        (ope fits no reward model of responses; DR takes yours through ``q_column`` and
        ``v_column``). Sampling weights (the ``weight`` column, or ``weight_column=``) weight
        the responses as :func:`ope.evaluate` weights rows (Horvitz-Thompson), DR's model
        estimates, the divergences, the audit's test of the mean weight and the verdicts too
        (:func:`sequence_divergences`); the audit's token checks of ``on_policy`` describe the
        logged tokens unweighted (a note says so).

    Returns
    -------
    SequenceEvaluation
        The :class:`ope.Evaluation` of the responses (``result[policy, estimator]`` reads it),
        the divergences, the audit, and a verdict per candidate: evaluable, or not and why.

    Raises
    ------
    ope.ValidationError
        The audit of ``on_policy`` failed: the logged log-probabilities cannot be the sampling
        distribution (the reason is the audit's).
    ope.EstimationError
        No candidate can be weighed: each has a response weight beyond float64 or gives
        probability 0 to every logged response (one such candidate among others gets its
        verdict and no estimate; the others are evaluated).

    Examples
    --------
    >>> import ope
    >>> from ope.simulate import TokenModel
    >>> env = TokenModel(seed=0)
    >>> ev = ope.evaluate_sequences(env.sample(4000, rng=0), ["cooler"], estimators=["snips"])
    >>> round(ev["cooler", "snips"].value, 1), round(env.true_value("cooler"), 1)
    (2.7, 2.7)
    >>> ev.verdicts
    {'cooler': 'evaluable'}
    """
    import ope

    if on_policy is not None:
        on_policy = check_name(on_policy, "on_policy", what="a candidate name")
    if isinstance(logs, SequenceLogs):
        seq = logs
    else:  # only the candidates asked for are read (and the on-policy one)
        table, read_notes = _as_table(logs)
        seq = _from_table(
            table, read_notes, logs, "reward", "behavior_logprobs", policies, on_policy
        )
    check_forwarded(options, evaluate_sequences, ope.evaluate, target_name="ope.evaluate")
    how = check_choice(weighting, "weighting", SEQUENCE_WEIGHTINGS)
    names = _chosen(policies, seq.policies)
    s_column, s = _sampling_weights(seq, options.pop("weight_column", None))
    options.setdefault("estimators", ("ips", "snips"))  # the one default of the estimators
    _check_estimators(options["estimators"])
    notes: list[str] = []
    on_policy = _check_on_policy(seq, on_policy)
    audited = names + ([on_policy] if on_policy is not None and on_policy not in names else [])
    # the audit's and, with sequence weights, the verdicts' divergences: one pass
    every = _divergences(seq, audited, "sequence", s_column, s)
    audit = _audit(seq, on_policy, every, s_column)
    if on_policy is not None:
        if not audit.usable and audit.signature != "support":  # a support gap is per candidate
            raise ValidationError(
                f"the logged log-probabilities cannot be the sampling distribution: {audit.reason}"
            )
        notes.append(f"log-probability audit against {on_policy!r}: {audit.reason}")
    if how == "sequence":
        chosen = every.table()
        div = dataclasses.replace(
            every, _table=chosen[chosen["policy"].isin(names)].reset_index(drop=True)
        )
    else:
        div = _divergences(seq, names, how, s_column, s)
    all_w = seq.log_weights(how)[:, [seq.policies.index(p) for p in names]]
    # a weight beyond float64, or none above 0, leaves nothing to estimate: that candidate's
    # verdict says why, the others are evaluated
    top = all_w.max(axis=0)
    weighed = np.abs(top) <= _MAX_LOG_WEIGHT  # -inf (every weight 0) is not
    if not weighed.any():
        reasons = div.table().set_index("policy")["reason"]
        raise EstimationError(
            "no candidate can be weighed on these logs: "
            + "; ".join(f"{p!r}: {reasons[p]}" for p in names)
        )
    estimated = [p for p, ok in zip(names, weighed, strict=True) if ok]
    log_w = all_w[:, weighed]
    # one propensity column for every candidate: p = 1 / max(1, largest weight of the row),
    # t = w p, both in (0, 1] with ratio w
    scale = np.max(np.maximum(log_w, 0.0), axis=1)
    data: dict[str, Any] = {
        "event_id": np.arange(seq.n),
        "action": np.arange(seq.n),  # each response is its own action
        "propensity": np.exp(-scale),
        "reward": seq.reward,
    }
    for j, name in enumerate(estimated):  # a loop over candidates
        data[f"target__{name}"] = np.exp(log_w[:, j] - scale)
    if "prompt_id" in seq.table.column_names:
        data["prompt_id"] = seq.table.column("prompt_id").to_numpy(zero_copy_only=False)
    if s_column is not None:
        data[s_column] = s
        options["weight_column"] = s_column
        notes.append(
            f"the sampling weights of column `{s_column}` enter the estimates, the divergences, "
            "the audit's test of the mean weight and the verdicts (Horvitz-Thompson); the "
            "audit's token checks of an on-policy candidate describe the logged tokens "
            "unweighted"
        )
    # DR also for a candidate none of whose responses are logged (every weight 0, or below
    # 1e-150): the weighted residual is 0 and DR is the model's estimate, the one its refusal
    # recommends
    unlogged = [p for p, t in zip(names, top, strict=True) if t < -_MAX_LOG_WEIGHT]
    modelled = [p for p in names if p in estimated or p in unlogged]
    model = _model_columns(seq, modelled, q_column, v_column)
    bandit = ope.read_logs(pd.DataFrame(data))
    ev = ope.evaluate(bandit, estimated, **options)
    ev = dataclasses.replace(ev, report=dataclasses.replace(ev.report, source=seq.source))
    model_estimates: dict[str, Any] = {}
    if model is not None:
        from ope.estimators import DR

        q_logged, v = model
        for j, name in enumerate(modelled):  # a loop over candidates
            model_estimates[name] = DR().estimate(
                seq.reward,
                data["propensity"],
                data.get(f"target__{name}", np.zeros(seq.n)),
                q_logged=q_logged,
                q_target=v[:, j],
                reward_range=options.get("reward_range"),
                sampling_weight=s,
            )
        if unlogged:
            notes.append(
                f"dr for {', '.join(map(repr, unlogged))}: no logged response is the "
                "candidate's (every weight 0), so DR is the model's estimate alone"
            )
        notes.append(
            f"dr: the model's predictions {q_column!r} (logged responses) and {v_column!r} "
            "(the candidates' responses) corrected by the weighted residual"
        )
    if how == "length_normalized":
        notes.append(
            "weights are per-token geometric means exp(log w / T): they estimate no policy's "
            "value (biased toward the logger's); for comparison only"
        )
    else:
        notes.append(
            "each response is one decision weighted by exp(sum of its token log-ratios), "
            "computed in log space"
        )
    notes.extend(seq.notes)
    flagged = audit.weights().set_index("policy")["reason"]
    verdicts: dict[str, str] = {}
    causes: dict[str, str] = {}
    for row in div.table().itertuples():  # a loop over candidates
        if not row.evaluable:
            verdicts[row.policy] = f"not evaluable from these logs: {row.reason}"
            causes[row.policy] = (
                "no weighted estimate can be made"
                if row.policy not in estimated
                else "the response weights are too uneven"
            )
        elif audit.signature == "inflated":
            verdicts[row.policy] = f"not evaluable from these logs: {audit.reason}"
            causes[row.policy] = "the logged log-probabilities are too small"
        elif flagged.get(row.policy, ""):
            verdicts[row.policy] = f"not evaluable from these logs: {flagged[row.policy]}"
            causes[row.policy] = "its mean response weight is not 1"
        elif how == "length_normalized":
            verdicts[row.policy] = (
                "not evaluable by length-normalized weights: they estimate no policy's value "
                "(for comparison only)"
            )
            causes[row.policy] = "length-normalized weights estimate no policy's value"
        else:
            verdicts[row.policy] = "evaluable"
        if verdicts[row.policy] != "evaluable":
            skipped = "" if row.policy in estimated else " (no estimate)"
            notes.append(f"{row.policy}: {verdicts[row.policy]}{skipped}")
    shown = div.table()
    shown["evaluable"] = [verdicts[p] == "evaluable" for p in shown["policy"]]
    shown["reason"] = [
        "" if verdicts[p] == "evaluable" else verdicts[p].split(": ", 1)[-1]
        for p in shown["policy"]
    ]
    div = dataclasses.replace(div, _table=shown)
    return SequenceEvaluation(
        evaluation=dataclasses.replace(ev, notes=(*ev.notes, *notes)),
        divergences=div,
        audit=audit,
        weighting=how,
        verdicts=verdicts,
        model_estimates=model_estimates,
        causes=causes,
    )


def _sampling_weights(seq: SequenceLogs, weight_column: Any) -> tuple[str | None, Any]:
    """The column of the responses' sampling weights (``weight_column``, else ``weight`` when
    present, as :func:`ope.evaluate`) and its checked values; ``(None, None)`` without one."""
    from ope.weights import (
        sampling_weight_column,
        table_sampling_weights,
        varying_sampling_weight,
    )

    column = sampling_weight_column(seq.table.column_names, weight_column)
    if column is None:
        return None, None
    own = ("event_id", "action", "propensity", "reward", "prompt_id")
    if column in own or column.startswith("target__"):
        raise ParameterError(
            f"weight_column={column!r} names a column the evaluation of responses uses for "
            f"itself ({', '.join(own)}, target__<name>); name the column of the sampling "
            "weights (1 / the probability that the response was kept), or rename it."
        )
    _, values = table_sampling_weights(seq.table, column)  # numeric, checked
    # equal weights (every response kept with one probability): the unweighted numbers, exactly
    weights = varying_sampling_weight(values, seq.n, name=column)
    return (None, None) if weights is None else (column, weights)


def _model_columns(
    seq: SequenceLogs, names: list[str], q_column: Any, v_column: Any
) -> tuple[np.ndarray, np.ndarray] | None:
    """DR's ``(q_logged (n,), v (n, P))`` from the logs' columns, or None without them."""
    if q_column is None and v_column is None:
        return None
    q_name, template = check_model_columns(
        q_column,
        v_column,
        logged="the model's expected reward of each logged response",
        candidate="of the candidate's responses",
        example="v_target__{policy}",
    )
    columns = [(q_name, "q_column")] + [
        (template.replace("{policy}", name), "v_column") for name in names
    ]
    out = []
    for column, argument in columns:  # a loop over the model's columns
        if column not in seq.table.column_names:
            raise SchemaError(
                f"`{argument}`: no column {column!r}; columns: "
                f"{', '.join(map(repr, seq.table.column_names[:20]))}."
            )
        kind = seq.table.schema.field(column).type
        if not (pa.types.is_floating(kind) or pa.types.is_integer(kind)):
            raise SchemaError(f"`{argument}`: column {column!r} must be numeric; it holds {kind}.")
        values = np.asarray(
            seq.table.column(column).to_numpy(zero_copy_only=False), dtype=np.float64
        )
        if not np.isfinite(values).all():
            row = int(np.flatnonzero(~np.isfinite(values))[0])
            raise ValidationError(
                f"`{argument}`: column {column!r} is missing or not finite at row {row}."
            )
        out.append(values)
    return out[0], np.column_stack(out[1:])


@dataclass(frozen=True, eq=False)
class SequenceEvaluation(Result):
    """Estimates from logged responses and whether each candidate can be evaluated from them
    (:func:`evaluate_sequences`).

    Attributes
    ----------
    evaluation : ope.Evaluation
        The estimates and intervals (each response one decision).
    divergences : SequenceDivergences
    audit : LogprobAudit
    weighting : str
    verdicts : dict of str to str
        Per candidate: ``"evaluable"``, or ``"not evaluable from these logs: <why>"``.
    model_estimates : dict of str to ope.Estimate
        DR with the reward model's predictions (``q_column``, ``v_column``), per candidate.
    causes : dict of str to str
        Per candidate not evaluable: the cause in a few words (the report's headline).
    """

    evaluation: Any
    divergences: SequenceDivergences
    audit: LogprobAudit
    weighting: str
    verdicts: dict[str, str]
    model_estimates: dict[str, Any] = field(default_factory=dict)
    causes: dict[str, str] = field(default_factory=dict)

    def __getitem__(self, key: tuple[str, str]) -> Any:
        if isinstance(key, tuple) and len(key) == 2:
            if key[1] == "dr" and key[0] in self.model_estimates:
                return self.model_estimates[key[0]]
            if key[0] in self.verdicts and key[0] not in self.evaluation.policies:
                raise KeyError(f"{key[0]!r} has no estimate: {self.verdicts[key[0]]}")
        return self.evaluation[key]

    def model_table(self) -> pd.DataFrame:
        """DR with the given reward model: one row per candidate with ``policy``,
        ``estimator``, ``value``, ``std_error``, ``ci_low``, ``ci_high`` (normal, at the
        evaluation's level); empty without ``q_column``/``v_column``."""
        return pd.DataFrame(self._model_rows(), columns=list(INTERVAL_COLUMNS))

    def _model_rows(self) -> list[dict[str, Any]]:
        return interval_rows(self.model_estimates, "dr", self.evaluation.confidence_level)

    @property
    def evaluable(self) -> list[str]:
        """The candidates these logs can evaluate."""
        return [p for p, v in self.verdicts.items() if v == "evaluable"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "sequence_evaluation",
            "weighting": self.weighting,
            "verdicts": dict(self.verdicts),
            "evaluation": self.evaluation.to_dict(),
            "model_estimates": self._model_rows(),
            "divergences": self.divergences.to_dict()["divergences"],
            "audit": self.audit.to_dict(),
        }

    def _parts(self) -> ResultParts:
        table = self.evaluation.table()
        keep = [c for c in ("policy", "estimator", "value", "ci_low", "ci_high") if c in table]
        table = table[keep]
        if self.model_estimates:
            table = pd.concat([table, self.model_table()[keep]], ignore_index=True)
        shown = table.reset_index(drop=True).assign(
            verdict=table["policy"].map(
                lambda p: "evaluable" if self.verdicts.get(p) == "evaluable" else "NOT evaluable"
            )
        )
        return ResultParts(
            title=f"{len(self.verdicts)} candidate(s) on {self.divergences.n:,} logged responses",
            fields=[
                ("weighting", self.weighting),
                ("audit", f"{self.audit.signature}: {self.audit.reason}"),
                *((p, v) for p, v in self.verdicts.items()),
            ],
            table=shown,
            notes=self.evaluation.notes,
            precision={},
        )


def sequence_trajectories(
    logs: Any, *, step_reward_column: str = "step_rewards", weight_column: str | None = None
) -> Any:
    """The responses as episodes of :class:`ope.Trajectories`, one step per token (or agent
    step): ``propensity`` and ``target__<name>`` the token probabilities, ``reward`` the step's
    reward from the list column ``step_reward_column``. :func:`ope.sequential_estimate` then gives
    per-decision (``"pdis"``), weighted and doubly robust estimates with intervals.

    Raises
    ------
    ope.SchemaError
        No per-token log-probabilities, or no ``step_rewards`` list column.
    ope.ValidationError
        A response whose step rewards are not one per token.

    Notes
    -----
    An empty response (no token) becomes an episode of one step with probability 1 under the
    logger and every candidate and reward 0, so that every response stays one episode.

    The responses' sampling weights (``weight_column``, default the ``weight`` column, as
    :func:`evaluate_sequences` reads them) are kept on every step of their response as the
    trajectories' ``weight`` column, so that the trajectory estimators, which take no sampling
    weights, refuse them rather than ignore them.
    """
    import ope

    seq = _check_logs(logs)
    step_rewards = check_name(step_reward_column, "step_reward_column", what="a column name")
    if seq.offsets is None:
        raise SchemaError(
            "per-step estimates need per-token log-probabilities (list columns); these logs "
            "hold one summed log-probability per response."
        )
    if step_rewards not in seq.table.column_names:
        raise SchemaError(
            f"`step_reward_column`: no column {step_rewards!r}; per-step estimates need one "
            "reward per token (a list)."
        )
    r, r_offsets = _logprob_column(seq.table, step_rewards, "reward")
    if not np.isfinite(r).all():
        i = int(np.flatnonzero(~np.isfinite(r))[0])
        row = _row_of(r_offsets, i)
        at = i - int(r_offsets[row]) if r_offsets is not None else 0
        raise ValidationError(
            f"column `{step_rewards}` holds {float(r[i])!r} at row {row}, token {at}: every "
            "step reward must be finite."
        )
    if r_offsets is None or not np.array_equal(r_offsets, seq.offsets):
        row = (
            0
            if r_offsets is None
            else int(np.flatnonzero(np.diff(r_offsets) != np.diff(seq.offsets))[0])
        )
        raise ValidationError(
            f"row {row}: `{step_rewards}` must hold one reward per token, as the log-probabilities."
        )
    counts = np.diff(seq.offsets)
    # an empty response is an episode of one step that changes nothing (probability 1 on both
    # sides, reward 0): dropping it would change the mean over responses
    steps = np.maximum(counts, 1)
    starts = np.concatenate(([0], np.cumsum(steps)))
    episode = np.repeat(np.arange(seq.n), steps)
    step = np.arange(starts[-1]) - np.repeat(starts[:-1], steps)
    token = starts[np.repeat(np.arange(seq.n), counts)] + (
        np.arange(seq.behavior.size) - np.repeat(seq.offsets[:-1], counts)
    )

    def per_step(values: np.ndarray, empty: float) -> np.ndarray:
        out = np.full(starts[-1], empty)
        out[token] = values
        return out

    data: dict[str, Any] = {
        "episode_id": episode,
        "step": step,
        "state": step,
        "action": step,
        "propensity": per_step(np.exp(seq.behavior), 1.0),
        "reward": per_step(r, 0.0),
        "done": step == np.repeat(steps - 1, steps),
    }
    for j, name in enumerate(seq.policies):  # a loop over candidates
        data[f"target__{name}"] = per_step(np.exp(seq.targets[:, j]), 1.0)
    from ope.weights import sampling_weight_column

    own = sampling_weight_column(seq.table.column_names, weight_column)
    if own is not None:  # each step keeps its response's (under the name trajectories refuse)
        weights = seq.table.column(own).to_numpy(zero_copy_only=False)
        data[SAMPLING_WEIGHT_COLUMN] = np.repeat(weights, steps)
    return ope.read_trajectories(pd.DataFrame(data))


@dataclass(frozen=True, eq=False)
class SequenceDivergences(Result):
    """Divergences between the logger and each candidate from logged responses, and whether
    the candidate is evaluable from them (:func:`sequence_divergences`)."""

    n: int
    weighting: str
    _table: pd.DataFrame = field(repr=False)
    notes: tuple[str, ...] = ()

    def table(self) -> pd.DataFrame:
        """One row per candidate: ``k1``, ``k2``, ``k3`` (of KL(logger || candidate)) and their
        ``*_se``, ``kl_candidate_logger`` (E_b[w log w]) and its SE, ``ess``, ``ess_share``,
        ``predicted_ess`` (``n exp(-2 k1)``; on the responses with a positive weight when some have
        none), ``zero_weight_share`` (responses the candidate gives probability 0), ``pareto_k``, ``mean_weight``, ``evaluable``,
        ``reason``."""
        return self._table.copy()

    def _notes_shown(self) -> tuple[str, ...]:
        """The notes of the whole result and of the candidates of the table (a note about one
        candidate, :data:`_NEGATIVE_KL_RULE`, has the candidate first in its subject)."""
        shown = set(self._table["policy"]) if len(self._table) else set()
        return tuple(n for n in self.notes if _note_policy(n) is None or _note_policy(n) in shown)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "sequence_divergences",
            "n": self.n,
            "weighting": self.weighting,
            "divergences": self._table.to_dict(orient="records"),
            "notes": list(self._notes_shown()),
        }

    def _parts(self) -> ResultParts:
        shown = self._table[
            ["policy", "k1", "k3", "k2", "kl_candidate_logger", "ess", "pareto_k", "evaluable"]
        ]
        notes = self._notes_shown()
        return ResultParts(
            title=f"divergences of {len(self._table)} candidate(s) from {self.n:,} responses",
            fields=[("weighting", self.weighting)],
            table=shown,
            notes=[n for n in notes if _note_policy(n) is None],
            # a negative KL estimate: the note on its candidate's row
            row_notes=[[n for n in notes if _note_policy(n) == p] for p in shown["policy"]],
            precision={},
        )


#: The rule of the note on a negative estimate of a KL divergence (:func:`_negative_kl_notes`).
_NEGATIVE_KL_RULE: Final = "negative_kl"

#: A negative KL estimate within this many standard errors of 0 is read as chance (a KL near
#: 0); beyond it, as weights that are not the candidate's against the sampler's (at 3 a
#: normal mean falls that far below its expectation 0.13% of the time).
_NEGATIVE_KL_CHANCE_SE: Final = 3.0


def _standard_errors_below(value: float, se: float) -> float:
    """How many standard errors ``value`` (< 0) lies below 0 (inf for a zero error)."""
    return -value / se if se > 0 else math.inf


def _far_below(below: float) -> str:
    """How far below 0 a negative estimate is, in words (:func:`_standard_errors_below`)."""
    where = (
        f"{below:.3g} standard errors below 0"
        if math.isfinite(below)
        else ("below 0 with a standard error of 0 (every weight equal)")
    )
    return f"{where}, more than chance"


def _note_policy(note: str) -> str | None:
    """The candidate a note of :data:`_NEGATIVE_KL_RULE` is about (None for another note)."""
    subject = getattr(note, "subject", None)
    if getattr(note, "rule", None) == _NEGATIVE_KL_RULE and isinstance(subject, tuple):
        return str(subject[0])
    return None


def _negative_kl_notes(row: dict[str, Any], n: int) -> list[Note]:
    """Why a candidate's ``k1`` or ``kl_candidate_logger`` is below 0, when it is: a KL
    divergence never is, but these are sample means. ``k1`` (of ``-log w``) is unbiased for
    KL(logger || candidate) and falls below 0 by chance when that KL is near 0.
    ``kl_candidate_logger`` (of ``w log w``) equals KL(candidate || logger) in expectation only
    when the candidate's responses lie where the logger's do (E_b[w] = 1); when the mean weight
    is below 1 (the test of :func:`ope._thresholds.mean_weight_check`), part of the
    candidate's mass is on responses the logs never show and the mean does not estimate that
    KL at all."""
    policy = row["policy"]
    notes = []
    k1, k1_se = float(row["k1"]), float(row["k1_se"])
    if k1 < 0:
        below = _standard_errors_below(k1, k1_se)
        why = (
            f"within {_NEGATIVE_KL_CHANCE_SE:g} standard errors ({k1_se:.2g}) of 0, it fell "
            "below 0 by chance, as it does when KL(logger || candidate) is near 0; k3, which "
            "estimates the same KL, is never negative"
            if below <= _NEGATIVE_KL_CHANCE_SE
            else f"{_far_below(below)}: the weights are not the candidate's against the "
            "sampler's (their logs average above 0; see the log-probability audit)"
        )
        notes.append(
            Note(
                f"{policy}: k1 = {k1:.4g} is below 0, which a KL divergence never is: k1, the "
                "mean of -log w over the logged responses, is an unbiased estimate of "
                f"KL(logger || candidate); {why}",
                rule=_NEGATIVE_KL_RULE,
                subject=(policy, "k1"),
            )
        )
    kl, kl_se = float(row["kl_candidate_logger"]), float(row["kl_candidate_logger_se"])
    if kl < 0:
        mean_w, se = float(row["mean_weight"]), float(row["mean_weight_se"])
        var_w = se * se * n if math.isfinite(se) else math.inf
        verdict, _ = mean_weight_check(n, mean_w, var_w)
        head = (
            f"{policy}: kl_candidate_logger = {kl:.4g} is below 0, which a KL divergence never "
            "is: it is the mean of w log w over the logged responses, which estimates "
            "KL(candidate || logger) only when every response the candidate gives is one the "
            f"logger gives too (then E_b[w] = 1; here the mean weight is {mean_w:.4g} +/- "
            f"{se:.2g})"
        )
        if verdict == "low":
            why = (
                f". It is not: about {1 - mean_w:.0%} of the candidate's mass is on responses "
                "the logger does not give, which the logs never show, so this mean does not "
                "estimate KL(candidate || logger) (infinite when the logger cannot give them; "
                "see the log-probability audit)"
            )
        elif _standard_errors_below(kl, kl_se) <= _NEGATIVE_KL_CHANCE_SE:
            why = (
                f"; within {_NEGATIVE_KL_CHANCE_SE:g} standard errors ({kl_se:.2g}) of 0, the "
                "sign is chance, as when KL(candidate || logger) is near 0"
            )
        else:
            why = (
                f"; {_far_below(_standard_errors_below(kl, kl_se))}: the weights are not the "
                "candidate's against the sampler's (see the log-probability audit)"
            )
        notes.append(Note(head + why, rule=_NEGATIVE_KL_RULE, subject=(policy, "kl")))
    return notes


def _mean_se(x: np.ndarray, s: np.ndarray | None = None) -> tuple[float, float]:
    """The mean of ``x`` and its standard error; with sampling weights ``s`` the Hajek mean
    ``sum s x / S`` (``S = sum s``) and its linearized error ``sqrt(n / (n - 1) sum s^2 (x -
    mean)^2) / S``, as ``ope.diagnose`` gives the mean weight."""
    n = x.size
    if s is None:
        if not np.isfinite(x).all():
            return float(np.mean(x)), math.inf
        return float(np.mean(x)), float(np.std(x, ddof=1) / math.sqrt(n)) if n > 1 else math.inf
    total = float(s.sum())
    mean = float(np.sum(s * x) / total)
    if not np.isfinite(x).all() or n < 2:
        return mean, math.inf
    dev = s * (x - mean)
    return mean, math.sqrt(n / (n - 1.0) * float(dev @ dev)) / total


def _kish(s: np.ndarray | None, n: int) -> float:
    """Kish's effective sample of the sampling weights alone (``n`` without them)."""
    if s is None:
        return float(n)
    return kish_ess(float(s.sum()), float(np.sum(s * s)))


def _predicted_ess(lw: np.ndarray, s: np.ndarray | None = None) -> tuple[float, float]:
    """The effective sample that KL predicts under log-normal weights, and the share of
    responses the candidate cannot produce (weight 0: harmless to IPS, but KL(logger ||
    candidate) is infinite).

    On the ``m`` responses with a positive weight, ``w (m / n)`` has mean 1 when the candidate's
    support is inside the logger's; log-normal with mean 1, its log has variance ``s2 = -2
    E[log w + log(m / n)]``, and the effective sample is ``m exp(-s2)`` (``n exp(-2 k1)``
    without zero weights), at most ``m``. With sampling weights ``s`` the share and the mean
    are Hajek's (``m / n`` is the weighted share of positive weights) and ``m`` is Kish's
    effective sample of ``s`` on those responses.
    """
    zero = np.isneginf(lw)
    m = int(lw.size - np.count_nonzero(zero))
    if m == 0:
        return 0.0, 1.0
    if s is None:
        share = m / lw.size
        s2 = max(-2.0 * (float(np.mean(lw[~zero])) + math.log(share)), 0.0)
        return m * math.exp(-s2), 1.0 - share
    kept = s[~zero]
    share = float(kept.sum() / s.sum())
    mean = float(np.sum(kept * lw[~zero]) / kept.sum())
    s2 = max(-2.0 * (mean + math.log(share)), 0.0)
    return _kish(kept, m) * math.exp(-s2), 1.0 - share


def sequence_divergences(
    logs: Any,
    policies: Sequence[str] | None = None,
    *,
    weighting: str = "sequence",
    weight_column: str | None = None,
) -> SequenceDivergences:
    r"""Schulman's k1, k2, k3 estimators of :math:`KL(\pi_b \| \pi_e)` with their standard
    errors, :math:`KL(\pi_e \| \pi_b) = \mathbb E_b[w \log w]`, the effective sample size and
    the Pareto :math:`\hat k` of each candidate's response weights, and whether the candidate
    is evaluable from these logs (:math:`\hat k \le` :data:`MAX_PARETO_K`, an effective sample
    of at least :data:`MIN_EFFECTIVE_SHARE` of the responses, and a predicted effective sample
    :math:`n e^{-2 k_1}` of at least :data:`MIN_PREDICTED_ESS` or, in small samples,
    :data:`MIN_PREDICTED_SHARE` of the responses; every weight within float64; see the module).

    With sampling weights :math:`s` (the ``weight`` column, or ``weight_column=``: response
    :math:`i` was kept with probability :math:`1/s_i`) the divergences describe the responses
    the logger gave, not only those kept: every mean (``k1``, ``k2``, ``k3``,
    ``kl_candidate_logger``, ``mean_weight``) is the Hajek mean :math:`\sum s x / \sum s` with
    its linearized standard error, ``ess`` is Kish's effective sample of :math:`s w`,
    ``ess_share`` and the thresholds compare it with Kish's effective sample of :math:`s` alone,
    and ``pareto_k`` is of :math:`s w` (as :func:`ope.diagnose` weighs rows). Integer weights
    give the means of the responses repeated :math:`s` times; all-equal weights give the
    unweighted numbers.

    Examples
    --------
    >>> import ope
    >>> from ope.simulate import TokenModel
    >>> env = TokenModel(seed=0)
    >>> d = ope.sequence_divergences(env.sample(20000, rng=0), ["tuned"])
    >>> t = d.table().iloc[0]
    >>> bool(abs(t.k3 - env.kl("sampler", "tuned")) < 4 * t.k3_se)
    True
    """
    seq = _check_logs(logs)
    how = check_choice(weighting, "weighting", SEQUENCE_WEIGHTINGS)
    names = _chosen(policies, seq.policies)
    column, s = _sampling_weights(seq, weight_column)
    return _divergences(seq, names, how, column, s)


def _divergences(
    seq: SequenceLogs, names: list[str], how: str, column: str | None, s: np.ndarray | None
) -> SequenceDivergences:
    """:func:`sequence_divergences` of checked arguments, with the sampling weights ``s`` of
    column ``column`` (both None without them)."""
    from ope.diagnostics.tails import pareto_k

    all_w = seq.log_weights(how)
    n_eff = _kish(s, seq.n)
    rows = []
    for name in names:  # a loop over candidates
        lw = all_w[:, seq.policies.index(name)]
        top = float(np.max(lw)) if lw.size else 0.0
        finite_top = top if np.isfinite(top) else 0.0
        scaled = np.exp(lw - finite_top)  # weights / their largest: ESS and k-hat are scale-free
        with np.errstate(over="ignore", invalid="ignore"):
            w = np.exp(lw)
            k1 = -lw
            k2 = 0.5 * lw * lw
            k3 = np.where(np.isneginf(lw), np.inf, np.expm1(lw) - lw)
            wl = np.where(w > 0, w * lw, 0.0)
        if s is not None:
            scaled = s * scaled  # what each response carries (Kish's ESS and k-hat of s w)
        ess = float(scaled.sum() ** 2 / np.sum(scaled * scaled)) if scaled.any() else 0.0
        tail = pareto_k(scaled)
        with np.errstate(over="ignore", invalid="ignore"):  # weights past 1e154: SE inf
            mean_w, mean_w_se = _mean_se(w, s)
            m1, s1 = _mean_se(k1, s)
            m2, s2 = _mean_se(k2, s)
            m3, s3 = _mean_se(k3, s)
            mk, sk = _mean_se(wl, s)
        reasons = []
        predicted, zero_share = _predicted_ess(lw, s)
        limit = min(MIN_PREDICTED_ESS, MIN_PREDICTED_SHARE * n_eff)
        if zero_share == 1.0:
            reasons.append("the candidate gives probability 0 to every logged response")
        elif top < -_MAX_LOG_WEIGHT:
            reasons.append(
                f"every response weight is below 1e-150 (largest log weight {top:.4g}): the "
                "candidate practically never gives the logged responses"
            )
        elif top > _MAX_LOG_WEIGHT:
            reasons.append(
                f"a response weight above 1e150 (log weight {top:.4g} > {_MAX_LOG_WEIGHT:.4g}), "
                "beyond what its square in float64 holds"
            )
        if not reasons and not tail.pareto_k <= MAX_PARETO_K and math.isfinite(tail.pareto_k):
            reasons.append(f"Pareto k-hat {tail.pareto_k:.2f} > {MAX_PARETO_K}")
        if abs(top) <= _MAX_LOG_WEIGHT and ess < MIN_EFFECTIVE_SHARE * n_eff:
            of = (
                f"{seq.n:,} responses"
                if s is None
                else f"{n_eff:.1f} (Kish's effective sample of the sampling weights alone)"
            )
            reasons.append(f"effective sample {ess:.1f} of {of} (< {MIN_EFFECTIVE_SHARE:.0%})")
        if abs(top) <= _MAX_LOG_WEIGHT and predicted < limit:
            given = (
                f" on the {1 - zero_share:.1%} of responses it can produce" if zero_share else ""
            )
            reasons.append(
                f"KL(logger || candidate){given} predicts an effective sample of "
                f"{predicted:.3g} responses (< {limit:g}; n exp(-2 KL) under log-normal weights)"
            )
        why = (
            "these logs hold none of its responses"
            if zero_share == 1.0 or top < -_MAX_LOG_WEIGHT
            else "its sequence probabilities differ from the logger's by more than any weighted "
            "estimate can bridge"
            if top > _MAX_LOG_WEIGHT
            else "the weights are too uneven for any weighted estimate"
        )
        reason = (
            f"{'; '.join(reasons)}: {why}. What would work: draw fresh responses from the "
            "candidate and score them with a calibrated judge (a model-based estimate)"
            if reasons
            else ""
        )
        rows.append(
            {
                "policy": name,
                "k1": m1,
                "k1_se": s1,
                "k2": m2,
                "k2_se": s2,
                "k3": m3,
                "k3_se": s3,
                "kl_candidate_logger": mk,
                "kl_candidate_logger_se": sk,
                "mean_weight": mean_w,
                "mean_weight_se": mean_w_se,
                "ess": ess,
                "ess_share": ess / n_eff if n_eff > 0 else 0.0,
                "predicted_ess": predicted,
                "zero_weight_share": zero_share,
                "pareto_k": float(tail.pareto_k),
                "evaluable": not reasons,
                "reason": reason,
            }
        )
    notes = (
        "k1 = -log w and k3 = (w - 1) - log w are unbiased for KL(logger || candidate), k3 >= 0 "
        "with less variance where w is near 1; k2 = (log w)^2 / 2 is biased with low variance "
        "(Schulman 2020); w = candidate / logger probability of a logged response",
        *((_weighted_note(column, s, seq.n),) if column is not None and s is not None else ()),
        *(note for row in rows for note in _negative_kl_notes(row, seq.n)),
    )
    return SequenceDivergences(n=seq.n, weighting=how, _table=pd.DataFrame(rows), notes=notes)


def _weighted_note(column: str, s: np.ndarray, n: int) -> str:
    """The note of divergences of responses with sampling weights ``s`` (column ``column``)."""
    return (
        f"responses carry sampling weights (column `{column}`): k1, k2, k3, "
        "kl_candidate_logger and mean_weight are Horvitz-Thompson (Hajek) means sum s x / sum s "
        "of the responses the logger gave, ess is Kish's effective sample of s w (ess_share "
        "and the evaluability thresholds compare it with Kish's of s alone) and pareto_k is of "
        f"s w; the population is estimated at sum s = {float(s.sum()):,.6g} responses (from "
        f"{n:,} logged)"
    )


@dataclass(frozen=True, eq=False)
class LogprobAudit(Result):
    """Whether the logged log-probabilities can be the distribution that sampled the tokens
    (:func:`audit_logprobs`).

    Attributes
    ----------
    usable : bool
    reason : str
        The verdict in words.
    signature : str
        ``"identical"``, ``"noise"``, ``"kept_mass"``, ``"temperature"``, ``"support"`` (a
        candidate's mean weight below 1: its own support gap), ``"inflated"`` (a mean weight
        above 1: the logged log-probabilities are too small, for every candidate), ``"ok"``
        (no on-policy candidate and no failed mean-weight test).
    """

    usable: bool
    reason: str
    signature: str
    on_policy: str | None
    _tokens: pd.DataFrame = field(repr=False)
    _weights: pd.DataFrame = field(repr=False)
    notes: tuple[str, ...] = ()

    @property
    def state(self) -> str:
        """The verdict in a few words: ``"usable"``, ``"NOT usable"``, or, for the
        ``"support"`` signature, that a candidate leaves the logger's support (that candidate's
        verdict: the logged log-probabilities are not in question)."""
        if self.usable:
            return "usable"
        if self.signature == "support":
            return "a candidate leaves the logger's support (its own verdict, not the logs')"
        return "NOT usable"

    def tokens(self) -> pd.DataFrame:
        """The on-policy candidate's token ratios: ``tokens``, ``share_outside_band`` (ratio
        outside :data:`TOKEN_RATIO_BAND`), ``mean_log_ratio``, ``sd_log_ratio``,
        ``share_below``/``share_above`` (log ratio beyond -/+ 1e-3), ``slope`` (of the log ratio
        on the behavior log-probability), ``r2``, ``sequence_mean_abs_log_ratio``."""
        return self._tokens.copy()

    def weights(self) -> pd.DataFrame:
        """Per candidate: ``mean_weight``, ``mean_weight_se``, ``z`` of the test of
        E_b[w] = 1, ``pareto_k``, whether the test ``flags`` it and why (``reason``)."""
        return self._weights.copy()

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "logprob_audit",
            "usable": self.usable,
            "signature": self.signature,
            "reason": self.reason,
            "on_policy": self.on_policy,
            "tokens": self._tokens.to_dict(orient="records"),
            "weights": self._weights.to_dict(orient="records"),
            "notes": list(self.notes),
        }

    def _parts(self) -> ResultParts:
        weights = self._weights
        reasons = [[r] if r else [] for r in weights["reason"]] if "reason" in weights else None
        return ResultParts(
            title="log-probability audit: " + self.state,
            fields=[("signature", self.signature), ("verdict", self.reason)],
            # why a candidate is flagged is a numbered note on its row, wrapped like every
            # note (the whole text is also the JSON's weights[].reason)
            table=weights.drop(columns=["reason"]) if reasons is not None else weights,
            notes=self.notes,
            row_notes=reasons,
            precision={},
        )


def _fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """Least-squares slope of ``y`` on ``x``, its t statistic and R^2 (0, 0, 0 if undefined)."""
    if x.size <= 2 or not np.ptp(x) > 0 or not np.ptp(y) > 0:
        return 0.0, 0.0, 0.0
    xc, yc = x - x.mean(), y - y.mean()
    sxx, sxy, syy = float(xc @ xc), float(xc @ yc), float(yc @ yc)
    slope, r2 = sxy / sxx, min(sxy * sxy / (sxx * syy), 1.0)
    rss = max(syy - slope * sxy, 0.0)
    se = math.sqrt(rss / (x.size - 2) / sxx)
    return slope, (slope / se if se > 0 else math.copysign(math.inf, slope)), r2


def _token_stats(
    delta: np.ndarray, lp: np.ndarray, target: np.ndarray, offsets: np.ndarray | None
) -> dict[str, Any]:
    low, high = np.log(TOKEN_RATIO_BAND[0]), np.log(TOKEN_RATIO_BAND[1])
    finite = np.isfinite(delta)
    d = np.where(finite, delta, -np.inf)
    y = delta[finite]
    slope, t_slope, r2 = _fit(lp[finite], y)
    slope_target, t_target, r2_target = _fit(target[finite], y)
    signed = delta[finite] if offsets is None else _row_sums(d[:, None], offsets)[:, 0]
    per_seq = np.abs(signed)
    ok = signed[np.isfinite(signed)]
    spread = float(np.std(ok, ddof=1)) if ok.size > 1 else 0.0
    shift_t = (
        float(np.mean(ok)) / (spread / math.sqrt(ok.size))
        if spread > 0
        else (0.0 if not ok.size or float(np.mean(ok)) == 0.0 else math.inf)
    )
    return {
        "shift_t": shift_t,
        "tokens": int(delta.size),
        "share_outside_band": float(np.mean((d < low) | (d > high))) if d.size else 0.0,
        "mean_log_ratio": float(np.mean(y)) if y.size else 0.0,
        "sd_log_ratio": float(np.std(y, ddof=1)) if y.size > 1 else 0.0,
        "share_below": float(np.mean(d < -_DEVIATION)) if d.size else 0.0,
        "share_above": float(np.mean(d > _DEVIATION)) if d.size else 0.0,
        "slope": slope,
        "slope_t": t_slope,
        "r2": r2,
        "slope_target": slope_target,
        "slope_target_t": t_target,
        "r2_target": r2_target,
        "max_abs_log_ratio": float(np.max(np.abs(d))) if d.size else 0.0,
        "sequence_mean_abs_log_ratio": float(np.mean(per_seq)) if per_seq.size else 0.0,
    }


def _tempered(stats: dict[str, Any]) -> bool:
    """The temperature signature: the log-ratio ``d = (1 / T - 1) lp_b + c`` grows with both
    sides' log-probabilities with one sign (slopes ``T_b / T_e - 1`` and ``1 - T_e / T_b``).
    Noise on either side tilts the two slopes apart instead (``d = e_t - e_b`` falls with
    ``lp_b = l + e_b`` and rises with ``lp_t = l + e_t``), and a kept mass is one-signed and
    checked before."""
    slopes = (stats["slope"], stats["slope_target"])
    return bool(
        slopes[0] * slopes[1] > 0
        and min(abs(stats["slope_t"]), abs(stats["slope_target_t"])) > _TEMPERATURE_T
        and min(stats["r2"], stats["r2_target"]) > _TEMPERATURE_R2
        and min(abs(slopes[0]), abs(slopes[1])) > _DEVIATION
    )


def _tilted_apart(stats: dict[str, Any]) -> bool:
    """Noise's signature: the log-ratio falls with the noisy side's log-probabilities and rises
    with the other's (slopes of opposite signs, each more than 3 standard errors from 0)."""
    return bool(
        stats["slope"] * stats["slope_target"] < 0
        and min(abs(stats["slope_t"]), abs(stats["slope_target_t"])) > 3.0
    )


def _support_reason(name: str, mean_w: float, se: float) -> str:
    """Why E_b[w] far from 1 makes candidate ``name`` unusable."""
    side = "below" if mean_w < 1 else "above"
    why = (
        "it gives mass to responses the logger never samples (e.g. the logger truncated with "
        "top-p/top-k and the candidate does not); IPS misses that share"
        if side == "below"
        else "the logged log-probabilities are smaller than the sampling distribution's (e.g. "
        "untruncated probabilities logged for a truncated sampler), or noisy (noise of SD s per "
        "token inflates E_b[w] by about exp(s^2 T / 2) over T tokens)"
    )
    return (
        f"candidate {name!r} has mean weight {mean_w:.4f} +/- {se:.4f}, {side} the 1 that holds "
        f"when its responses are inside the logger's: {why}"
    )


def audit_logprobs(
    logs: Any, *, on_policy: str | None = None, weight_column: str | None = None
) -> LogprobAudit:
    """Check that the logged log-probabilities can be the sampling distribution (see the
    module): the identity of an on-policy candidate, token by token, with the signatures of
    truncation (kept mass), temperature and noise; and E_b[w] = 1 for every candidate.

    Parameters
    ----------
    logs : SequenceLogs or what :func:`read_sequences` reads
    on_policy : str, optional
        A candidate that is the logger itself.
    weight_column : str, optional
        The column of the responses' sampling weights (default ``weight`` when present): the
        test of E_b[w] = 1 reads the Horvitz-Thompson weighted divergences
        (:func:`sequence_divergences`); the token checks of ``on_policy`` describe the logged
        tokens unweighted (they test the logged log-probabilities, which keeping some
        responses and not others does not change), and a note says so.

    Returns
    -------
    LogprobAudit

    Examples
    --------
    >>> import ope
    >>> from ope.simulate import TokenModel
    >>> truncated = TokenModel(top_p=0.8, seed=0).sample(3000, rng=0)
    >>> audit = ope.audit_logprobs(truncated, on_policy="model")
    >>> audit.usable, audit.signature
    (False, 'kept_mass')
    """
    seq = _check_logs(logs)
    chosen = _check_on_policy(seq, on_policy)
    column, s = _sampling_weights(seq, weight_column)
    return _audit(seq, chosen, _divergences(seq, list(seq.policies), "sequence", column, s), column)


def _audit(
    seq: SequenceLogs,
    on_policy: str | None,
    div: SequenceDivergences,
    column: str | None = None,
) -> LogprobAudit:
    """:func:`audit_logprobs` reading each candidate's mean weight and k-hat from ``div`` (the
    sequence-weighted divergences of every candidate: one pass over the weights for both)."""
    weight_rows = []
    for row in div.table().itertuples():  # a loop over candidates
        se = float(row.mean_weight_se)
        var_w = se * se * seq.n if math.isfinite(se) else math.inf
        verdict, z = mean_weight_check(seq.n, float(row.mean_weight), var_w)
        # a NaN k-hat (tied largest weights: bounded) does not skip the test
        flags = bool(not row.pareto_k > MAX_PARETO_K and verdict != "ok")
        weight_rows.append(
            {
                "policy": row.policy,
                "mean_weight": float(row.mean_weight),
                "mean_weight_se": se,
                "z": z,
                "pareto_k": float(row.pareto_k),
                "flags": flags,
                "reason": _support_reason(row.policy, row.mean_weight, se) if flags else "",
            }
        )
    weights = pd.DataFrame(weight_rows)
    tokens = pd.DataFrame()
    signature, usable, reason = "ok", True, "no test failed"
    if on_policy is not None:
        j = seq.policies.index(on_policy)
        delta = seq.targets[:, j] - seq.behavior
        stats = _token_stats(delta, seq.behavior, seq.targets[:, j], seq.offsets)
        tokens = pd.DataFrame([{"policy": on_policy, **stats}])
        moved = stats["share_below"] + stats["share_above"]
        one_sided = moved > 0 and min(stats["share_below"], stats["share_above"]) <= 0.02 * moved
        unit = "token" if seq.offsets is not None else "response"
        if stats["max_abs_log_ratio"] <= 1e-9:
            signature, reason = "identical", f"every {unit} ratio is 1 (to 1e-9)"
        elif one_sided and moved > 0.05:
            signature, usable = "kept_mass", False
            side = "below" if stats["share_below"] > stats["share_above"] else "above"
            reason = (
                f"{moved:.0%} of the {unit} ratios lie {side} 1 and almost none on the other side "
                f"(mean log-ratio {stats['mean_log_ratio']:.4f}): one side is renormalized over "
                "the tokens a top-p/top-k truncation kept and the other is not (the ratio is the "
                "kept mass); log the truncated sampler's own log-probabilities, or score the "
                "candidate with the same truncation"
            )
        elif _tempered(stats):
            signature, usable = "temperature", False
            reason = (
                f"the {unit} log-ratios are linear in both sides' log-probabilities with one sign "
                f"(slopes {stats['slope']:.3f} on the behavior's, {stats['slope_target']:.3f} on "
                f"the candidate's; R^2 {stats['r2']:.2f}): a temperature applied on one side "
                f"only (ratio of temperatures about {1 + stats['slope']:.3f}); log the "
                "log-probabilities of the distribution that sampled, after temperature"
            )
        elif (
            abs(stats["shift_t"]) > _TEMPERATURE_T
            and abs(stats["mean_log_ratio"]) > _DEVIATION
            and not _tilted_apart(stats)
        ):
            # a systematic shift under a noise floor: noise alone has mean 0 (large noise cut
            # at log-probability 0 shifts too, but tilts the two slopes apart)
            signature, usable = "kept_mass", False
            reason = (
                f"the {unit} log-ratios scatter (SD {stats['sd_log_ratio']:.3g}) around a "
                f"systematic shift (mean {stats['mean_log_ratio']:.4f}, {stats['shift_t']:.1f} "
                "standard errors of the per-response sums from 0), which noise alone does not "
                "make: one side is renormalized (e.g. over the tokens a top-p/top-k truncation "
                "kept) and the other is not; log the sampler's own log-probabilities, or score "
                "the candidate with the same truncation"
            )
        else:
            signature = "noise"
            counts = seq.token_counts if seq.offsets is not None else np.ones(seq.n)
            inflation = float(np.mean(np.exp(0.5 * stats["sd_log_ratio"] ** 2 * counts)) - 1.0)
            reason = (
                f"the {unit} ratios scatter around 1 without a pattern (SD of the log-ratio "
                f"{stats['sd_log_ratio']:.3g}; {stats['share_outside_band']:.1%} outside "
                f"[{TOKEN_RATIO_BAND[0]}, {TOKEN_RATIO_BAND[1]}]): a noise floor, which "
                "multiplies every response weight by exp(its summed noise); were it all in the "
                f"behavior's log-probabilities, IPS would be inflated by about {inflation:.1%} "
                "(SNIPS divides most of it out)"
            )
            if not inflation <= _NOISE_INFLATION:
                usable = False
                reason += (
                    f"; above {_NOISE_INFLATION:.0%}, no weight can be trusted: log both sides' "
                    "log-probabilities from one engine at one precision"
                )
    if signature == "kept_mass" and seq.offsets is None:
        reason += (
            "; with one summed log-probability per response the audit cannot tell a truncation "
            "from a temperature (both shift the sums): log per-token log-probabilities to know"
        )
    flagged = weights[weights["flags"]] if len(weights) else weights
    above = flagged[flagged["mean_weight"] > 1.0] if len(flagged) else flagged
    if usable and len(above):  # no support gap raises E_b[w]: the logged side is wrong
        signature, usable = "inflated", False
        reason = (
            f"{above.iloc[0]['reason']}. A mean weight above 1 cannot come from one candidate's "
            "support: the logged log-probabilities are too small for the distribution that "
            "sampled, and every candidate's weights are inflated by them"
        )
    elif usable and len(flagged):
        signature, usable, reason = "support", False, str(flagged.iloc[0]["reason"])
    notes: tuple[str, ...] = (
        f"E_b[w] = 1 is tested where the weights' Pareto k-hat is at most {MAX_PARETO_K} (flagged "
        f"at |z| > {MEAN_WEIGHT_Z:g} and a deviation above 1%, as ope.diagnose does)",
    )
    if column is not None:
        notes += (
            f"responses carry sampling weights (column `{column}`): the test of E_b[w] = 1 "
            "uses the Horvitz-Thompson weighted mean weight"
            + (
                "; the token checks of the on-policy candidate describe the logged tokens "
                "unweighted (they test the logged log-probabilities, which keeping some "
                "responses and not others does not change)"
                if on_policy is not None
                else ""
            ),
        )
    return LogprobAudit(
        usable=usable,
        reason=reason,
        signature=signature,
        on_policy=on_policy,
        _tokens=tokens,
        _weights=weights,
        notes=notes,
    )
