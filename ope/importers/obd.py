"""The Open Bandit Dataset (ZOZOTOWN; Saito et al. 2021) to ``BanditLogs``.

A campaign folder (``random/all``, ``bts/men``, ...) holds the log CSV (``all.csv``, ``men.csv``,
...) and ``item_context.csv``. The log CSV starts with an unnamed row index, then
``timestamp, item_id, position, click, propensity_score, user_feature_0..3,
user-item_affinity_0..{n_items-1}``.

==============================  ==============================================================
OBD                             ope
==============================  ==============================================================
unnamed row index               ``event_id`` (int64; the CSV's own index, kept after sorting)
``timestamp``                   ``timestamp``; rows are sorted by it (stable: ties keep the
                                CSV order, which obp's unstable sort may not)
``item_id``                     ``action``
``position`` (1, 2, 3)          ``position`` = position - 1 (0 = left, 1 = centre, 2 = right)
``click``                       ``reward``
``propensity_score``            ``propensity``: the probability that the logger put *this item
                                at this position* (position-wise), recorded in the schema
                                metadata key ``ope.propensity``
``user_feature_0..3``           kept as context columns (hashed categoricals, strings)
``user-item_affinity_*``        left out unless ``context="user+affinity"``
``item_context.csv``            ``logs.action_features``: a side table keyed by ``action``
                                (``item_feature_0..3``), joined on the action by reward models
==============================  ==============================================================

The context columns kept are listed in ``logs.table.schema.metadata[b"ope.context_columns"]``
(JSON). The default leaves the 80 affinity columns out: they are 80 numeric columns that a
"every numeric column" default would otherwise feed to a reward model without a word.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from ope._validation import check_choice
from ope.exceptions import DataFileError, ParameterError, SchemaError
from ope.importers._common import ChunkValidator
from ope.io import check_regular_file, locate_input
from ope.logs import BanditLogs

__all__ = ["read_obd", "OBD_CONTEXT_CHOICES", "OBD_PROPENSITY_MEANING"]

#: ``context=`` choices: the user features only (default), plus the affinity columns, or none.
OBD_CONTEXT_CHOICES: Final = ("user", "user+affinity", "none")

#: What OBD's ``propensity_score`` is (obp's README and loader): position-wise.
OBD_PROPENSITY_MEANING: Final = (
    "position-wise: P(logged item at the logged position | context) of the logging policy "
    "(OBD propensity_score); a candidate's target__ value must be the same per-position quantity"
)

_REQUIRED: Final = ("timestamp", "item_id", "position", "click", "propensity_score")
_AFFINITY_PREFIX: Final = "user-item_affinity_"
_USER_PREFIX: Final = "user_feature_"


def _locate(src: str | os.PathLike[str]) -> tuple[Path, Path | None]:
    """(log CSV, item_context.csv or None) of a campaign folder or a log CSV.

    The path goes through ope's one input policy (:func:`ope.io.locate_input`): regular files
    only (a FIFO or device is refused before anything opens it), links followed; the CSVs of
    a folder must be regular files too.
    """
    found = locate_input(src, what="OBD campaign")
    if found.filesystem is not None:
        raise DataFileError(
            f"{found.name}: read_obd reads a local OBD campaign folder or log CSV; copy it "
            "locally first (the campaign's two CSVs are read whole)"
        )
    path = Path(found.path)
    if found.is_dir:
        csvs = sorted(p for p in path.glob("*.csv") if p.name != "item_context.csv")
        if len(csvs) != 1:
            raise DataFileError(
                f"{path}: an OBD campaign folder holds one log CSV besides item_context.csv "
                f"(e.g. random/all/all.csv); found {[p.name for p in csvs] or 'none'}"
            )
        log_csv = check_regular_file(csvs[0], "OBD log CSV")
    else:
        log_csv = path
    item = log_csv.parent / "item_context.csv"
    if not (item.exists() or item.is_symlink()):
        return log_csv, None
    return log_csv, check_regular_file(item, "OBD item_context.csv")


def _read_csv(path: Path, keep: Any = None) -> pa.Table:
    try:
        include = None
        if keep is not None:  # the header only: the streaming reader parses one block
            with pacsv.open_csv(path) as reader:
                include = [c for c in reader.schema.names if keep(c)]
        return pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(include_columns=include))
    except (pa.ArrowInvalid, OSError) as exc:
        raise DataFileError(f"{path}: not a readable CSV ({exc})") from exc


def read_obd(
    src: str | os.PathLike[str], *, context: str = "user", on_invalid: str = "raise",
    mapping: Any = None,
) -> BanditLogs:
    """Read an Open Bandit Dataset campaign (folder or log CSV) into validated ``BanditLogs``.

    Parameters
    ----------
    src : str or os.PathLike
        A campaign folder (``.../random/all``) or its log CSV (``.../random/all/all.csv``).
        ``item_context.csv`` next to the CSV becomes ``logs.action_features``.
    context : {"user", "user+affinity", "none"}, default "user"
        Which context columns to keep: ``user_feature_0..3`` (default), also the
        ``user-item_affinity_*`` columns, or none.
    on_invalid : {"raise", "drop"}, default "raise"
        As in :func:`ope.read_logs`. Report row numbers are the CSV's row index.
    mapping : None
        Accepted for the CLI's reader interface; OBD's columns are fixed (must be None).

    Returns
    -------
    BanditLogs
        Columns ``event_id, timestamp, action, position, reward, propensity`` and the kept
        context columns, sorted by timestamp. ``logs.action_features`` is the item table
        (``action, item_feature_*``) or None. Schema metadata: ``ope.source_format``,
        ``ope.propensity`` (:data:`OBD_PROPENSITY_MEANING`), ``ope.context_columns``.

    Raises
    ------
    DataFileError
        Missing or unreadable files.
    SchemaError
        A required OBD column is missing.
    ValidationError
        Rows break rules (``on_invalid="raise"``), or no row is left.

    Examples
    --------
    >>> import os, tempfile
    >>> from ope.importers import read_obd
    >>> d = tempfile.mkdtemp()
    >>> with open(os.path.join(d, "all.csv"), "w") as f:
    ...     _ = f.write(",timestamp,item_id,position,click,propensity_score,user_feature_0,"
    ...                 "user-item_affinity_0\\n"
    ...                 "0,2019-11-24 00:00:02+00:00,1,3,1,0.25,a1,0.0\\n"
    ...                 "1,2019-11-24 00:00:01+00:00,0,1,0,0.5,b2,1.0\\n")
    >>> logs = read_obd(d)
    >>> logs.column("event_id").tolist(), logs.column("position").tolist()
    ([1, 0], [0, 2])
    >>> logs.columns
    ['event_id', 'timestamp', 'action', 'position', 'reward', 'propensity', 'user_feature_0']
    """
    check_choice(context, "context", OBD_CONTEXT_CHOICES)
    if mapping:
        raise ParameterError("`mapping` does not apply to OBD: its column names are fixed")
    log_csv, item_csv = _locate(src)

    def keep(c: str) -> bool:
        if c.startswith(_AFFINITY_PREFIX):
            return context == "user+affinity"
        if c.startswith(_USER_PREFIX):
            return context != "none"
        return True

    raw = _read_csv(log_csv, keep)
    index_col = raw.column_names[0] if raw.column_names and raw.column_names[0] in ("", "Unnamed: 0") else None
    missing = [c for c in _REQUIRED if c not in raw.column_names]
    if missing:
        raise SchemaError(f"{log_csv}: not an OBD log CSV; missing column(s) {', '.join(missing)}")
    n = raw.num_rows
    event_id = raw.column(index_col) if index_col is not None else pa.array(np.arange(n))
    ctx_cols = [c for c in raw.column_names if c.startswith((_USER_PREFIX, _AFFINITY_PREFIX))]
    order = pc.sort_indices(
        pa.table({"t": raw.column("timestamp"), "i": pa.array(np.arange(n))}),
        sort_keys=[("t", "ascending"), ("i", "ascending")],
    )
    pos = raw.column("position")
    pos_f = np.asarray(pc.fill_null(pos.cast(pa.float64()), np.nan).to_numpy(zero_copy_only=False))
    bad_pos = ~(np.isfinite(pos_f) & (pos_f >= 1) & (pos_f == np.round(pos_f)))
    table = pa.table({
        "event_id": event_id.cast(pa.int64()),
        "timestamp": raw.column("timestamp"),
        "action": raw.column("item_id"),
        "position": pa.array(np.where(bad_pos, 0, pos_f - 1).astype(np.int64)),
        "reward": raw.column("click"),
        "propensity": raw.column("propensity_score"),
        **{c: raw.column(c) for c in ctx_cols},
    }).take(order)
    order_np = np.asarray(order.to_numpy(zero_copy_only=False))
    line_of = np.asarray(table.column("event_id").to_numpy(zero_copy_only=False))
    bad_sorted = bad_pos[order_np]
    validator = ChunkValidator(str(log_csv), on_invalid)
    good = table.filter(pa.array(~bad_sorted))
    used = validator.add(good, line_of[~bad_sorted], {"obd_position_missing": line_of[bad_sorted]},
                         n_source=n)
    logs = validator.finish([used], {
        "ope.source_format": "obd",
        "ope.propensity": OBD_PROPENSITY_MEANING,
        "ope.context_columns": json.dumps(ctx_cols),
        "ope.position": "0-based: 0 = left, 1 = centre, 2 = right (OBD position - 1)",
    })
    logs.action_features = _item_table(item_csv) if item_csv is not None else None
    return logs


def _item_table(path: Path) -> pa.Table:
    items = _read_csv(path)
    if "item_id" not in items.column_names:
        raise SchemaError(f"{path}: item_context.csv has no item_id column")
    cols = [c for c in items.column_names if c.startswith("item_feature_")]
    return pa.table({"action": items.column("item_id").cast(pa.int64()),
                     **{c: items.column(c) for c in cols}})
