"""The bundled sample dataset: recommendation logs with the exact values of their policies."""

from __future__ import annotations

import json
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Final, NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq

from ope._validation import describe
from ope.exceptions import DataFileError, ParameterError, SchemaError

__all__ = ["BundledSample", "load_sample", "SAMPLE_NAME"]

#: file stem of the bundled sample in the package data directory ``ope/data/``
SAMPLE_NAME: Final = "sample_recommendation"
_REGENERATE: Final = (
    "Reinstall ope-toolkit (the sample is package data), or in a checkout regenerate it with "
    "`python datasets/make_sample.py` from the repository root."
)


class BundledSample(NamedTuple):
    """The bundled sample: its logs, the exact truth, and where they were read from."""

    table: pa.Table
    truth: dict[str, Any]
    path: Path


def _datasets_dir() -> Path:
    """``ope/data/``: package data, so it is present in every install, editable or not (the
    datasheet and the generating script stay in the repository's ``datasets/``)."""
    return Path(str(resources.files("ope").joinpath("data")))


def load_sample(*, columns: Sequence[str] | None = None) -> BundledSample:
    r"""Load the bundled recommendation sample and the exact values of its policies.

    The logs come from :class:`ope.simulate.Recommendation` (the datasheet, ``datasets/README.md``
    in the repository, gives the settings and fields); ``truth`` holds the exact value of the
    logging policy and of each ``target__<name>`` candidate, overall and per segment, so
    estimates can be shown beside the truth. Both files are package data (``ope/data/``), read
    from the installed package, so they are there after a plain ``pip install ope-toolkit``.

    Parameters
    ----------
    columns : sequence of str, optional
        Read only these columns (default: all).

    Returns
    -------
    BundledSample
        ``table`` (pyarrow.Table), ``truth`` (dict: ``logging``, ``policies`` name -> value,
        ``by_segment``, ``unsupported_mass``, ``reward_range``, generator settings) and
        ``path`` (the parquet file, inside the installed package).

    Raises
    ------
    ope.exceptions.DataFileError
        If the parquet file or its truth file is missing or unreadable.
    ope.exceptions.SchemaError
        If a requested column does not exist.

    Notes
    -----
    Values are exact expectations under the simulator's known model,
    :math:`V(\pi) = \sum_m P(m) \sum_{j \in C_m} \pi(j|m) q(m, j)`, not Monte Carlo
    averages.

    References
    ----------
    .. [1] T. Gebru et al., "Datasheets for datasets", Communications of the ACM 64(12), 2021.

    Examples
    --------
    >>> from ope.simulate import load_sample
    >>> sample = load_sample(columns=["action", "propensity", "reward", "target__greedy"])
    >>> sample.table.num_rows == sample.truth["n_events"]
    True
    >>> sorted(sample.truth["policies"])
    ['greedy', 'long_tail', 'personalized', 'popular', 'uniform']
    """
    if columns is not None and (
        isinstance(columns, str)
        or not isinstance(columns, Sequence)
        or not all(isinstance(c, str) for c in columns)
    ):
        # an argument error, before any file is read
        raise ParameterError(
            f"columns must be a list of column names (str); got {describe(columns)}."
        )
    directory = _datasets_dir()
    path = directory / f"{SAMPLE_NAME}.parquet"
    truth_path = directory / f"{SAMPLE_NAME}.truth.json"
    for p in (path, truth_path):
        if not p.is_file():
            raise DataFileError(f"the bundled sample file {p} is missing. {_REGENERATE}")
    try:
        names = pq.read_schema(path).names
        missing = [c for c in columns or () if c not in names]
        if missing:
            raise SchemaError(
                f"`columns`: the bundled sample has no column(s) {missing}; it has: "
                f"{', '.join(names)}."
            )
        table = pq.read_table(path, columns=None if columns is None else list(columns))
    except (pa.ArrowInvalid, OSError) as exc:
        raise DataFileError(
            f"could not read the bundled sample {path}: {exc}. {_REGENERATE}"
        ) from None
    try:
        truth = json.loads(truth_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DataFileError(f"could not read {truth_path}: {exc}. {_REGENERATE}") from None
    return BundledSample(table=table, truth=truth, path=path)
