"""Where a log's propensities come from: the provenance record every result repeats.

:func:`ope.propensity.estimate_propensities` writes the record into the logs' schema metadata
(``ope.propensity_source = "estimated"`` and companions); the readers copy it from their
source (:func:`propensity_metadata`), and the evaluation, diagnostics, report and CLI read it
(:func:`propensity_info`, :func:`estimated_propensity_note`). The public names are re-exported
by :mod:`ope.propensity`; this module stays free of the numerical stack so that reading and
validating logs imports no scipy.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy as np
import pyarrow as pa

from ope.exceptions import ParameterError, SchemaError
from ope.logs import as_log_table

__all__ = [
    "PROVENANCE_PREFIX",
    "PROPENSITY_SOURCE_KEY",
    "propensity_metadata",
    "propensity_info",
    "propensity_source",
    "estimated_propensity_note",
    "propensity_weight_note",
    "propensity_notes",
]

#: The schema-metadata key (and its companions) under which the propensity's origin is recorded.
PROPENSITY_SOURCE_KEY: Final = "ope.propensity_source"
_INFO_KEYS: Final = (
    "propensity_floor",
    "propensity_floored_rows",
    "propensity_model",
    "propensity_context_columns",
    "propensity_weight_column",  # only when the fit was weighted by sampling weights
    "propensity_replaced",  # only when the logs' own propensities were replaced (text)
)
#: The entries kept as text (the others are JSON).
_TEXT_KEYS: Final = ("propensity_model", "propensity_replaced")
#: Every provenance entry's key starts so (``ope.propensity`` alone, without the underscore, is
#: an importer's description of what the logged propensity means, and is not provenance).
PROVENANCE_PREFIX: Final = b"ope.propensity_"


def propensity_metadata(schemas: pa.Schema | Sequence[pa.Schema]) -> dict[bytes, bytes]:
    """The provenance entries (``ope.propensity_source`` and its companions) of schema metadata.

    The readers (:func:`ope.read_logs`, :func:`ope.scan_logs`, hence the Dask and CLI paths)
    copy these entries from the source onto the validated table, so that logs written by
    :func:`ope.propensity.estimate_propensities` stay estimated after a parquet round trip. Several schemas
    (the files of a directory) that disagree give ``estimated`` when any file is, with the
    model recorded as mixed: a result then says its propensities are (partly) estimated.

    Parameters
    ----------
    schemas : pyarrow.Schema or sequence of pyarrow.Schema

    Returns
    -------
    dict of bytes to bytes
        Empty when no schema records a provenance (the propensities are logged).

    Examples
    --------
    >>> import pyarrow as pa
    >>> s = pa.schema([("action", pa.int64())],
    ...               metadata={"ope.propensity_source": "estimated", "pandas": "{}"})
    >>> propensity_metadata(s)
    {b'ope.propensity_source': b'estimated'}
    >>> propensity_metadata([s, pa.schema([("action", pa.int64())])])[b"ope.propensity_model"]
    b'mixed: 1 of 2 files estimated'
    """
    many = [schemas] if isinstance(schemas, pa.Schema) else list(schemas)
    entries = [
        {k: v for k, v in (s.metadata or {}).items() if k.startswith(PROVENANCE_PREFIX)}
        for s in many
    ]
    if not entries:
        return {}
    if all(e == entries[0] for e in entries[1:]):
        return entries[0]
    key = PROPENSITY_SOURCE_KEY.encode()
    estimated = sum(e.get(key) == b"estimated" for e in entries)
    if not estimated:
        return {}
    return {
        key: b"estimated",
        b"ope.propensity_model": f"mixed: {estimated} of {len(entries)} files estimated".encode(),
    }


def _schema_metadata(logs: Any) -> Mapping[bytes, bytes] | None:
    """The schema metadata of logs or a table; of a lazy scan, the record its batches carry."""
    try:
        return as_log_table(logs).schema.metadata
    except ParameterError:
        scanned = getattr(logs, "metadata", None)  # ope.io.LogScan.metadata
        if isinstance(scanned, Mapping):
            return scanned
        raise


def propensity_info(logs: Any) -> dict[str, Any]:
    """Where ``logs``' propensities come from: ``{"propensity_source": "logged"}`` or the record.

    Parameters
    ----------
    logs : BanditLogs, LogScan, pyarrow.Table or pandas.DataFrame
        Validated logs, a lazy scan, or a table whose schema metadata holds the record.

    Examples
    --------
    >>> import pyarrow as pa
    >>> propensity_info(pa.table({"action": [0]}))
    {'propensity_source': 'logged'}
    """
    meta = _schema_metadata(logs) or {}
    source = meta.get(PROPENSITY_SOURCE_KEY.encode())
    if source is None:
        return {"propensity_source": "logged"}
    key = PROPENSITY_SOURCE_KEY
    try:  # ope's own record: one that does not read is refused, never guessed at
        out: dict[str, Any] = {"propensity_source": source.decode()}
        for name in _INFO_KEYS:
            key = f"ope.{name}"
            raw = meta.get(key.encode())
            if raw is not None:
                text = raw.decode()
                out[name] = text if name in _TEXT_KEYS else json.loads(text)
    except (ValueError, RecursionError) as exc:  # bad UTF-8 or JSON, or nested too deeply
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise SchemaError(
            f"the logs' schema metadata {key!r} (ope's record of where the propensities come "
            f"from) does not read: {reason}. It is written by ope.estimate_propensities; write "
            "the logs again from its result, or drop the ope.* metadata keys."
        ) from None
    return out


def propensity_source(logs: Any) -> str:
    """``"estimated"`` for logs from :func:`estimate_propensities`, else ``"logged"``.

    Examples
    --------
    >>> import pyarrow as pa
    >>> propensity_source(pa.table({"action": [0]}))
    'logged'
    """
    return str(propensity_info(logs)["propensity_source"])


def estimated_propensity_note(logs: Any) -> str | None:
    """The note every result of estimated-propensity logs carries (None for logged ones).

    Examples
    --------
    >>> import pyarrow as pa
    >>> estimated_propensity_note(pa.table({"action": [0]})) is None
    True
    """
    info = propensity_info(logs)
    if info["propensity_source"] != "estimated":
        return None
    columns = info.get("propensity_context_columns")
    inputs = (
        "the context columns given to the model"
        if columns is None
        else (f"only {', '.join(map(str, columns))}")
    )
    return (
        f"propensities are estimated ({info.get('propensity_model', 'a classifier')}, floored at "
        f"{info.get('propensity_floor', 'n/a')} on {info.get('propensity_floored_rows', 'n/a')} "
        f"rows), not logged: every weighting estimate assumes that the logger used {inputs} "
        "(no unlogged confounder) and that the model family contains the logger; otherwise "
        "the weights are biased, and no interval shows it. The intervals treat the estimated "
        "propensities as known (with a well-specified model this makes the IPS interval "
        "conservative). How wrong they may be before a decision flips is the sensitivity "
        "analysis's tipping point (ope.diagnostics.sensitivity; ope.diagnose and the report "
        "run it for estimated propensities)."
    )


def propensity_weight_note(logs: Any, weight_column: str | None) -> str | None:
    """The note of estimates weighted by ``weight_column`` (None: unweighted) on logs whose
    propensities were estimated with other sampling weights (or none); None when they agree or
    the propensities are logged.

    Examples
    --------
    >>> import pyarrow as pa
    >>> t = pa.table({"action": [0]}).replace_schema_metadata(
    ...     {"ope.propensity_source": "estimated"})
    >>> propensity_weight_note(t, None) is None
    True
    >>> propensity_weight_note(t, "w")[:60]
    'the propensities were estimated without the sampling weights'
    """
    info = propensity_info(logs)
    if info["propensity_source"] != "estimated":
        return None
    fitted = info.get("propensity_weight_column")
    if fitted == weight_column:
        return None
    if fitted is None:
        return (
            f"the propensities were estimated without the sampling weights `{weight_column}` "
            "that weight these estimates: where rows were kept with a probability that depends "
            "on the action or the outcome, they are the kept rows' logging probabilities, not "
            "the traffic's; estimate them with ope.estimate_propensities(..., "
            f"weight_column={weight_column!r})"
        )
    now = "unweighted" if weight_column is None else f"weighted by `{weight_column}`"
    return (
        f"the propensities were estimated with the sampling weights `{fitted}`, but these "
        f"estimates are {now}: weight both by the same column (weight_column={fitted!r})"
    )


def propensity_notes(logs: Any, weight_column: str | None, weights: Any = None) -> list[str]:
    """The notes on the propensities of every result computed from ``logs`` with the sampling
    weights ``weight_column`` (None: unweighted): :func:`estimated_propensity_note` and
    :func:`propensity_weight_note`, and the note of the logs' own propensities the estimates replaced
    (recorded with them, so a parquet round trip keeps it), those that apply (none for logged
    propensities).
    ``weights``, the column's values when at hand: all equal, they weigh nothing (as in
    :func:`ope.estimate_propensities`, which then fits unweighted)."""
    equal = False  # equal weights weigh nothing: no fit can disagree with them
    if weights is not None and weight_column is not None:
        values = np.asarray(weights, dtype=np.float64)
        equal = bool(values.size) and float(values.min()) == float(values.max())
    replaced = propensity_info(logs).get("propensity_replaced")
    notes = [
        estimated_propensity_note(logs),
        replaced,  # the logs' own propensities that the estimates replaced
        None if equal else propensity_weight_note(logs, weight_column),
    ]
    return [note for note in notes if note is not None]
