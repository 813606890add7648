"""Glue between the learners and validated logs: fit from logs, certify, export a policy table."""

from __future__ import annotations

import dataclasses
import inspect
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final, Literal, Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from sklearn.base import clone

from ope._progress import progress
from ope._provenance import propensity_notes
from ope._validation import (
    check_name,
    check_real,
    check_rewards_in_range,
    describe,
    resolve_seed,
)
from ope.context import context_matrix
from ope.exceptions import DataFileError, ParameterError, SchemaError, ValidationError
from ope.logs import require_logs
from ope.learning._columns import (
    check_context_columns,
    feature_arguments,
    log_columns,
    log_sampling_weight,
    record_context_columns,
    weight_arguments,
)
from ope.learning._gate import (
    Certificate,
    GateMethod,
    SafetyGate,
    check_max_sampling_weight,
    resolve_gate_method,
)
from ope.learning._common import required_reward_range
from ope.learning._learners import ConservativePolicyLearner
from ope.policies.table import canonical_policy_table
from ope._output import check_utf8_destination

__all__ = [
    "learn_from_logs",
    "learner_policy_table",
    "learner_policy_batches",
    "write_learner_policy_table",
    "context_matrix",
]

#: share of rows held out for certification by default: an even split; HCPI (Thomas et al. 2015)
#: certifies on 4/5, which favours the bound over the quality of the learned policy
DEFAULT_CERTIFY_FRACTION = 0.5

#: file suffixes a policy table is written as (the format of ope.policies.write_policy_table)
_TABLE_SUFFIXES: Final = (".parquet", ".pq", ".csv")


def learn_from_logs(
    logs: Any,
    *,
    context_columns: str | Sequence[str],
    learner: Any = None,
    action_features: Any = None,
    certify_fraction: float = DEFAULT_CERTIFY_FRACTION,
    confidence_level: float = 0.95,
    ci: GateMethod = "auto",
    baseline: Literal["logging"] | float = "logging",
    max_weight: float | None = None,
    name: str = "learned",
    rng: int | np.random.Generator | None = None,
    weight_column: str | None = None,
    max_sampling_weight: float | None = None,
) -> tuple[Any, Certificate]:
    """Fit a policy on one split of the logs and certify it on the other.

    Parameters
    ----------
    logs : ope.logs.BanditLogs
        Validated logs with ``action``, ``reward``, ``propensity``, the context columns and
        optionally ``candidates`` (each row's candidate set: the policy spreads over it only).
    context_columns : str or sequence of str
        Numeric columns and/or one list column holding the context features.
    learner : estimator, optional
        An unfitted ope learner (default ``ConservativePolicyLearner()``); it is cloned.
    action_features : table, optional
        Features of the actions (an ``action`` column and numeric columns) for a learner that
        scores actions through them; default ``logs.action_features`` when the logs carry one
        (the importers attach it) and the learner is not set to ``action_model="per_action"``.
    certify_fraction : float, default=0.5
        Share of rows held out for certification (drawn at random with ``rng``).
    confidence_level, ci, baseline, max_weight
        As in :class:`SafetyGate`; ``reward_range`` is the learner's, and ``max_weight`` defaults
        to the learner's ``max_weight_`` (chosen on the training split).
    name : str, default="learned"
        Policy name in the certificate.
    rng : int, numpy.random.Generator or None
        Randomness of the split (and of the learner's own validation split when its ``rng`` is
        None). With None a seed is drawn and recorded as ``certificate.seed``: passing it back
        as ``rng`` reproduces the split, the fit and the certificate exactly.
    weight_column : str, optional
        The column of the rows' sampling (Horvitz-Thompson) weights; default ``weight`` when
        the logs have it (the DSJSON importer writes ``1 / (1 - pdrop)`` there). Weights not
        all 1 make the fit and the certificate estimate the value on the logged population
        (see Notes); the learner must take ``sample_weight`` (the ope learners do).
    max_sampling_weight : float, optional
        An a priori bound of the sampling weights, as in :class:`SafetyGate`: with it the gate
        certifies weighted rows by the finite-sample weighted betting bound.

    Returns
    -------
    learner : fitted estimator
        Fitted on the training split only: the certified policy is exactly this one.
        Refitting it on all rows would give a different, uncertified policy.
    certificate : Certificate

    Notes
    -----
    **Sampling weights.** Row :math:`i`, kept with probability :math:`1/s_i`, stands for
    :math:`s_i` events of the logged population. The split draws the certification rows
    uniformly from the kept rows, independently of the data, so each part is again a sample of
    the population with the same weights :math:`s_i` (a part's inclusion probabilities are
    those of the whole times a constant, which cancels in every Hajek ratio). The learner is
    fitted with ``sample_weight`` = the training rows' :math:`s_i` (its objective is then the
    Hajek-weighted estimate of the value, see :class:`ConservativePolicyLearner`), and the gate
    certifies with the certification rows' :math:`s_i` (:class:`SafetyGate`, "Sampling
    weights"): with ``ci="auto"`` (default) by the weighted betting bound when
    ``max_sampling_weight`` is given, else by the t bound of the linearized Hajek ratio.
    The certificate names the weight column (``sampling_weight``, ``weighted``), the method
    used, and says so in a note.

    Examples
    --------
    >>> import numpy as np, pyarrow as pa
    >>> from ope.logs import BanditLogs, ValidationReport
    >>> from ope.learning import learn_from_logs
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=4000)
    >>> action = rng.integers(0, 2, size=4000)
    >>> reward = (action == (x > 0)).astype(float)
    >>> table = pa.table({"x": x, "action": action, "reward": reward,
    ...                   "propensity": np.full(4000, 0.5)})
    >>> logs = BanditLogs(table, ValidationReport("<Table>", 4000, 4000))
    >>> learner, cert = learn_from_logs(logs, context_columns=["x"], rng=0)
    >>> cert.verdict, cert.seed
    ('approve', 0)
    """
    logs = require_logs(logs, "learn_from_logs")
    name = check_name(
        name, "name", what="the policy's name in the certificate", example="name='learned'"
    )
    fraction = check_real(certify_fraction, "certify_fraction", example="certify_fraction=0.5")
    if not 0.0 < fraction < 1.0:
        raise ParameterError(f"`certify_fraction` must be in (0, 1), got {certify_fraction!r}.")
    seed, gen = resolve_seed(rng)
    est = _unfitted_learner(learner)
    features = feature_arguments(est, logs, action_features)
    weight_name, s = log_sampling_weight(logs, weight_column)
    # refused up front, before any fitting: a learner without sample_weight, and a gate method
    # that does not take sampling weights
    weight_arguments(est, weight_name, s)
    s_max = (
        None if s is None else check_max_sampling_weight(max_sampling_weight, s, str(weight_name))
    )
    resolve_gate_method(ci, weight_name, max_sampling_weight=s_max)
    gate = SafetyGate(
        reward_range=getattr(est, "reward_range", None),
        confidence_level=confidence_level,
        ci=ci,
        baseline=baseline,
        max_weight=max_weight,
        max_sampling_weight=max_sampling_weight,
    )
    _release_arrow_memory()
    X = context_matrix(logs, context_columns)
    action, reward, propensity, cand = log_columns(logs)
    _check_learner_reward_range(est, reward)
    n = X.shape[0]
    n_cert = int(round(n * fraction))
    if n_cert < 2 or n - n_cert < 2:
        raise ValidationError(
            f"cannot split {n} rows into training and certification parts with "
            f"certify_fraction={fraction}; at least 2 rows are needed in each."
        )
    perm = gen.permutation(n)
    cert_rows, train_rows = np.sort(perm[:n_cert]), np.sort(perm[n_cert:])
    if "rng" in est.get_params() and est.get_params()["rng"] is None:
        # the learner's own randomness follows from this call's seed, so one seed reproduces all
        est.set_params(rng=int(gen.integers(np.iinfo(np.int64).max)))

    def take(rows: npt.NDArray[np.intp]) -> Any:
        return None if cand is None else cand.take(pa.array(rows))

    X_train, X_cert = X[train_rows], X[cert_rows]
    del X  # the two parts are all that is needed from here on
    est.fit(
        X_train,
        action[train_rows],
        reward[train_rows],
        propensity[train_rows],
        candidates=take(train_rows),
        **features,
        **weight_arguments(est, weight_name, None if s is None else s[train_rows]),
    )
    record_context_columns(est, context_columns)
    del X_train
    certificate = gate.certify(
        est,
        X_cert,
        action[cert_rows],
        reward[cert_rows],
        propensity[cert_rows],
        candidates=take(cert_rows),
        name=name,
        n_train=train_rows.size,
        sampling_weight=None if s is None else s[cert_rows],
        weight_name=weight_name,
    )
    # the certificate rests on these propensities
    notes = certificate.notes + tuple(propensity_notes(logs, weight_name))
    return est, dataclasses.replace(certificate, seed=seed, notes=notes)


def _check_learner_reward_range(learner: Any, reward: npt.NDArray[Any]) -> None:
    """Every reward inside the learner's ``reward_range`` (the learner and the gate both read
    it there), else the ValidationError of the rule, saying where learn_from_logs takes the
    range from and how to widen it."""
    given = getattr(learner, "reward_range", None)
    if given is None:
        return  # the learner's fit or the gate says what it needs
    try:
        check_rewards_in_range(reward, required_reward_range(given))
    except ValidationError as exc:
        raise ValidationError(
            f"{exc} learn_from_logs takes reward_range from its learner (the gate certifies "
            f"with the same range): to widen it pass learner={type(learner).__name__}("
            "reward_range=(low, high)) with a priori bounds of every reward."
        ) from None


def _unfitted_learner(learner: Any) -> Any:
    """A fresh clone of ``learner`` (default ``ConservativePolicyLearner()``), which must be a
    scikit-learn estimator whose ``fit`` takes ``(X, y, reward, propensity, *, candidates=)``
    as the ope learners' does; else a ParameterError naming ``learner``."""
    if learner is None:
        return ConservativePolicyLearner()
    fit = getattr(learner, "fit", None)
    usable = callable(fit) and callable(getattr(learner, "get_params", None))
    if usable and callable(fit):
        try:
            inspect.signature(fit).bind(None, None, None, None, candidates=None)
        except (TypeError, ValueError):
            usable = False
    if usable:
        try:
            return clone(learner)
        except (TypeError, RuntimeError, ValueError) as exc:
            raise ParameterError(f"`learner` cannot be cloned: {exc}") from None
    raise ParameterError(
        "`learner` must be an unfitted policy learner whose fit takes (X, y, reward, "
        "propensity, *, candidates=...), such as ope.ConservativePolicyLearner(), "
        f"ope.IPSPolicyLearner() or ope.DirectMethodPolicyLearner(); got {describe(learner)}."
    )


def _fitted_policy(learner: Any) -> Any:
    """``learner`` when it is a fitted policy learner (it has ``iter_candidates`` and
    ``classes_``), else a ParameterError naming ``learner``."""
    if not callable(getattr(learner, "iter_candidates", None)):
        raise ParameterError(
            "`learner` must be a fitted policy learner (an ope learner after fit or fit_logs, "
            f"with iter_candidates); got {describe(learner)}."
        )
    if not hasattr(learner, "classes_"):
        raise ParameterError(
            f"`learner` ({type(learner).__name__}) is not fitted: call its fit or fit_logs "
            "first, or pass the learner learn_from_logs returns."
        )
    return learner


def _release_arrow_memory() -> None:
    """Return the Arrow memory pool's freed blocks to the OS before the large allocations.

    Decoding a parquet file leaves its buffers freed but kept by the pool's allocator: after
    reading 1M rows x 54 columns (a 439 MB table) the process held 1,052 MB, and 624 MB after
    this call, which is the difference between ``ope learn`` on those logs staying under 2 GB
    or not.
    """
    pa.default_memory_pool().release_unused()


def learner_policy_batches(
    learner: Any,
    logs: Any,
    *,
    context_columns: str | Sequence[str],
    name: str = "learned",
) -> Iterator[pa.RecordBatch]:
    """A fitted learner's policy on every logged event, as record batches of a policy table.

    Lazy: one batch per block of events (about a million (event, candidate) pairs), so a
    policy for millions of events is written without ever being held whole
    (:func:`write_learner_policy_table`). Each event gets one row per candidate with
    probability > 0: its ``candidates`` when the logs have that column, else every action of
    ``learner.classes_``. Columns as in :func:`learner_policy_table`. The arguments are checked
    (and the context matrix built) when it is called, before the first batch.
    """
    learner = _fitted_policy(learner)
    logs = require_logs(logs, "learner_policy_batches")
    name = check_name(name, "name", what="the policy's name in the table", example="name='learned'")
    names = pa.array([name], type=pa.string())
    if "event_id" not in logs.table.column_names:
        raise SchemaError(
            "the logs have no event_id column; a policy table is joined to the logs on event_id. "
            "Add a unique event_id per row when reading the logs."
        )
    check_context_columns(learner, context_columns)
    _release_arrow_memory()
    X = context_matrix(logs, context_columns)
    return _policy_batches(learner, logs, X, names)


def _policy_batches(
    learner: Any, logs: Any, X: npt.NDArray[np.float64], names: pa.Array
) -> Iterator[pa.RecordBatch]:
    cand = logs.table.column("candidates") if "candidates" in logs.table.column_names else None
    event_id = logs.table.column("event_id").combine_chunks()
    action_type = logs.table.schema.field("action").type
    with progress(desc="policy table", total=X.shape[0], unit="row") as bar:
        done = 0
        for block in learner.iter_candidates(X, candidates=cand):  # blocks of rows
            keep = block.probability > 0.0
            rows = block.row[keep]
            try:
                actions = pa.array(block.action[keep], type=action_type)
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                actions = pa.array(block.action[keep])
            yield pa.record_batch(
                {
                    "event_id": event_id.take(pa.array(rows)),
                    "policy": pa.DictionaryArray.from_arrays(
                        pa.array(np.zeros(rows.size, dtype=np.int32)), names
                    ),
                    "action": actions,
                    "probability": pa.array(block.probability[keep], type=pa.float64()),
                }
            )
            top = int(block.row[-1]) + 1 if block.row.size else done
            bar.update(top - done)
            done = top


def learner_policy_table(
    learner: Any,
    logs: Any,
    *,
    context_columns: str | Sequence[str],
    name: str = "learned",
) -> pa.Table:
    """A fitted learner's policy on every logged event, as a long-format policy table.

    Columns ``event_id, policy, action, probability``, one row per (event, candidate) with
    probability > 0 (each event's probabilities sum to 1), action labels typed as in the logs,
    ``policy`` dictionary-encoded: the format ``ope evaluate --policies FILE`` reads
    (docs/guide/logs.md). An event's candidates are its ``candidates`` list when the logs have
    one (so the table has about ``n * mean candidate-set size`` rows, never ``n * n_actions``),
    else every action of ``learner.classes_``. For millions of events write it with
    :func:`write_learner_policy_table`, which streams.

    Examples
    --------
    >>> import numpy as np, pyarrow as pa
    >>> from ope.logs import BanditLogs, ValidationReport
    >>> from ope.learning import DirectMethodPolicyLearner, learner_policy_table
    >>> table = pa.table({"event_id": [10, 11, 12, 13], "x": [-1.0, -0.5, 0.5, 1.0],
    ...                   "action": [0, 1, 0, 1], "reward": [1.0, 0.0, 0.0, 1.0],
    ...                   "propensity": [0.5, 0.5, 0.5, 0.5]})
    >>> logs = BanditLogs(table, ValidationReport("<Table>", 4, 4))
    >>> dm = DirectMethodPolicyLearner().fit_logs(logs, context_columns="x")
    >>> learner_policy_table(dm, logs, context_columns="x").to_pydict()["action"]
    [0, 0, 1, 1]
    """
    batches = list(
        learner_policy_batches(learner, logs, context_columns=context_columns, name=name)
    )
    schema = (
        batches[0].schema
        if batches
        else pa.schema(
            [
                ("event_id", logs.table.schema.field("event_id").type),
                ("policy", pa.dictionary(pa.int32(), pa.string())),
                ("action", logs.table.schema.field("action").type),
                ("probability", pa.float64()),
            ]
        )
    )
    return pa.Table.from_batches(batches, schema=schema)


def write_learner_policy_table(
    learner: Any,
    logs: Any,
    path: str | Path,
    *,
    context_columns: str | Sequence[str],
    name: str = "learned",
) -> int:
    """Write :func:`learner_policy_table` to ``path`` (``.parquet``/``.pq`` or ``.csv``),
    streaming one block of events at a time; returns the number of rows written.

    The file is the one :func:`ope.policies.write_policy_table` would write for the same table
    (its columns checked by :func:`ope.policies.table.canonical_policy_table`), but memory stays
    at one block whatever the number of events. It writes ``path`` itself: for an atomic
    replacement write through :func:`ope._output.atomic_path`, as ``ope learn --out`` does.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise ParameterError(
            f"`path` must be the file to write (a str or os.PathLike ending in .parquet or "
            f".csv); got {describe(path)}."
        )
    dest = Path(path)
    check_utf8_destination(os.fspath(path), "`path`")
    suffix = dest.suffix.lower()
    if suffix not in _TABLE_SUFFIXES:
        raise DataFileError(f"policy table path {str(dest)!r} must end in .parquet or .csv.")
    writer: Any = None
    rows = 0
    try:
        for batch in learner_policy_batches(
            learner, logs, context_columns=context_columns, name=name
        ):
            table = canonical_policy_table(pa.Table.from_batches([batch]), source="<learned>")
            if writer is None:
                writer = _open_writer(dest, suffix, table.schema)
            writer.write_table(table)
            rows += table.num_rows
        if writer is None:  # no events: an empty table with the columns
            empty = learner_policy_table(learner, logs, context_columns=context_columns, name=name)
            writer = _open_writer(
                dest, suffix, canonical_policy_table(empty, source="<learned>").schema
            )
    except OSError as exc:
        raise DataFileError(f"could not write policy table {str(dest)!r}: {exc}") from None
    finally:
        if writer is not None:
            writer.close()
    return rows


def _open_writer(dest: Path, suffix: str, schema: pa.Schema) -> Any:
    if suffix == ".csv":
        import pyarrow.csv as pacsv

        return pacsv.CSVWriter(dest, schema)
    import pyarrow.parquet as pq

    return pq.ParquetWriter(dest, schema)
