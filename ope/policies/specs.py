"""Policy specs: a candidate policy named in one short string, ``NAME=KIND[:ARGS]``.

The command line's ``--policy`` takes these strings, so that a candidate can be evaluated
without writing Python; each kind is built on the policy objects of this package:

=================================  =============================================================
spec                               policy
=================================  =============================================================
``NAME=uniform``                   :class:`~ope.policies.UniformPolicy` over each row's
                                   ``candidates`` (without them: over every logged action)
``NAME=logging``                   :class:`~ope.policies.LoggingPolicy`: the logging policy
``NAME=epsilon-greedy:COLUMN:EPS`` :class:`~ope.policies.EpsilonGreedyPolicy`: greedy on a score
                                   column (argmax) or an action column, EPS spread uniformly
``NAME=softmax:COLUMN[:TEMP]``     :class:`~ope.policies.SoftmaxPolicy` over a per-candidate
                                   score column, temperature TEMP (default 1)
``NAME=npy:FILE.npy``              :class:`~ope.policies.ArrayPolicy`: an (n, K) or (n, K, P)
                                   distribution array aligned with the logs' rows
``NAME=table:FILE``                :class:`~ope.policies.ActionTablePolicy`: a CSV/parquet table
                                   ``action[, position], probability``
``NAME=classifier:FILE.skops[:C]`` :class:`~ope.policies.ClassifierPolicy`: a scikit-learn
                                   classifier saved with skops, on columns ``C`` (``a,b,c``)
=================================  =============================================================

A string without ``=`` is not a spec: the command line reads it as the name of a candidate the
logs (``target__NAME``) or a policy table already hold, so both uses of ``--policy`` coexist.
"""

from __future__ import annotations

import difflib
import math
import numbers
import os
import re
from dataclasses import dataclass
from collections.abc import Sequence
from typing import Any, Final

import pyarrow as pa

from ope._validation import check_names, describe
from ope.exceptions import DataFileError, ParameterError, PolicyError, SchemaError
from ope.logs import BanditLogs
from ope.policies._core import (
    PolicyDistribution,
    action_column,
    action_index,
    is_numeric_list,
    require_logs,
)
from ope.policies.join import target_propensities
from ope.policies.given import (
    PICKLE_SUFFIXES,
    ActionTablePolicy,
    ArrayPolicy,
    ChosenActionPolicy,
    LoggingPolicy,
    local_file,
    refuse_pickle,
)
from ope.policies.objects import (
    ClassifierPolicy,
    DeterministicPolicy,
    EpsilonGreedyPolicy,
    Policy,
    SoftmaxPolicy,
    UniformPolicy,
)

__all__ = [
    "POLICY_KINDS",
    "SPEC_GRAMMAR",
    "SKOPS_TRUSTED_TYPES",
    "PolicySpec",
    "is_policy_spec",
    "parse_policy_spec",
    "policy_from_spec",
    "load_classifier",
    "candidates_with_specs",
]

#: Each kind and the arguments it takes after ``KIND:``.
POLICY_KINDS: Final = {
    "uniform": "",
    "logging": "",
    "epsilon-greedy": "COLUMN:EPS",
    "softmax": "COLUMN[:TEMPERATURE]",
    "npy": "FILE.npy",
    "table": "FILE.csv|FILE.parquet",
    "classifier": "FILE.skops[:COLUMN,COLUMN,...]",
}

#: The grammar, in one line, for messages and help texts.
SPEC_GRAMMAR: Final = "NAME=KIND[:ARGS] with KIND one of " + ", ".join(
    f"{k}:{a}" if a else k for k, a in POLICY_KINDS.items()
)

#: Types that skops does not trust by default and that ope accepts in a ``.skops`` classifier:
#: the fitted state of scikit-learn's trees, boosted trees, calibration, neighbours and
#: multilayer perceptrons (plain data holders of scikit-learn itself). Anything else in the
#: file is refused, never trusted on the file's word.
SKOPS_TRUSTED_TYPES: Final = (
    "sklearn.tree._tree.Tree",
    "sklearn.ensemble._hist_gradient_boosting.predictor.TreePredictor",
    "sklearn.calibration._CalibratedClassifier",
    "sklearn.calibration._SigmoidCalibration",
    "sklearn.neural_network._stochastic_optimizers.AdamOptimizer",
    "sklearn.neural_network._stochastic_optimizers.SGDOptimizer",
    "sklearn.neighbors._kd_tree.KDTree",
    "sklearn.neighbors._ball_tree.BallTree",
    "sklearn.metrics._dist_metrics.EuclideanDistance64",
)

#: A policy name: letters, digits, ``_``, ``.`` and ``-`` (it becomes a column and file label).
_NAME: Final = re.compile(r"[^\W][\w.\-]*")

#: Longest accepted policy name.
_MAX_NAME: Final = 100

_TABLE_SUFFIXES: Final = (".csv", ".csv.gz", ".parquet", ".pq")


@dataclass(frozen=True)
class PolicySpec:
    """A parsed policy spec.

    Attributes
    ----------
    name : str
        The candidate's name (the part before ``=``).
    kind : str
        One of :data:`POLICY_KINDS`.
    column : str or None
        The score or action column (``epsilon-greedy``, ``softmax``).
    number : float or None
        EPS of ``epsilon-greedy``, the temperature of ``softmax``.
    path : str or None
        The file of ``npy``, ``table`` and ``classifier``.
    columns : tuple of str or None
        The classifier's feature columns, when given.
    text : str
        The spec as written (default: the spec the fields spell).

    Notes
    -----
    :func:`parse_policy_spec` builds it from a spec's text. Built directly, its fields are
    checked by the same grammar: they are spelled as a spec (``NAME=KIND:ARGS``) and parsed
    back, and a field the spec does not read back unchanged (a column holding ``,`` in a
    classifier's feature columns) or that the kind does not take is a ``ParameterError``
    naming it.
    """

    name: str
    kind: str
    column: str | None = None
    number: float | None = None
    path: str | None = None
    columns: tuple[str, ...] | None = None
    text: str = ""

    def __post_init__(self) -> None:
        spelled = _spelled(self)
        try:
            parsed = parse_policy_spec(spelled)
        except ParameterError as exc:
            raise ParameterError(f"{_fields(self)} is not a policy spec: {exc}") from None
        for field in ("name", "kind", "column", "number", "path", "columns"):
            given = _plain_field(field, getattr(self, field))
            if field == "number" and given is None and self.kind == "softmax":
                given = parsed.number  # the default temperature, 1
            if getattr(parsed, field) != given:
                raise ParameterError(
                    f"{_fields(self)}: `{field}` does not survive as a spec: {spelled!r} reads "
                    f"back {field}={getattr(parsed, field)!r}. Give the spec as text to "
                    "parse_policy_spec, or a value without the separators ':' and ','."
                )
            object.__setattr__(self, field, getattr(parsed, field))
        if not isinstance(self.text, str):
            raise ParameterError(
                f"`text` must be the spec as written (a str); got {describe(self.text)}."
            )
        if not self.text:
            object.__setattr__(self, "text", spelled)


#: What each kind takes besides its name: the fields a spelled spec carries.
_KIND_FIELDS: Final = {
    "uniform": (),
    "logging": (),
    "epsilon-greedy": ("column", "number"),
    "softmax": ("column", "number"),
    "npy": ("path",),
    "table": ("path",),
    "classifier": ("path", "columns"),
}


def _fields(spec: PolicySpec) -> str:
    shown = ", ".join(
        f"{f}={describe(getattr(spec, f))}"
        for f in ("name", "kind", "column", "number", "path", "columns")
        if getattr(spec, f) is not None
    )
    return f"PolicySpec({shown})"


def _plain_field(field: str, value: Any) -> Any:
    """A field as the parser gives it back (a path as str, numbers as float, columns a tuple)."""
    if value is None:
        return None
    if field == "path" and isinstance(value, os.PathLike):
        return os.fspath(value)
    if field == "number" and isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    if field == "columns" and isinstance(value, list):
        return tuple(value)
    return value


def _spelled(spec: PolicySpec) -> str:
    """The spec text a PolicySpec's fields spell (``NAME=KIND:ARGS``), its fields' types
    checked first (a ParameterError naming the field)."""
    kinds: dict[str, type | tuple[type, ...]] = {
        "name": str,
        "kind": str,
        "column": str,
        "number": numbers.Real,
        "path": (str, os.PathLike),
        "columns": (tuple, list),
    }
    for field, kind in kinds.items():
        value = getattr(spec, field)
        if (value is None and field not in ("name", "kind")) or (
            isinstance(value, kind) and not isinstance(value, bool)
        ):
            continue
        raise ParameterError(
            f"{_fields(spec)}: `{field}` must be a {_TYPE_WORDS[field]}; got {describe(value)}."
        )
    if spec.columns is not None:
        check_names(spec.columns, "columns", example="columns=('x0', 'x1')")
    takes = _KIND_FIELDS.get(spec.kind, ())
    extra = [
        f
        for f in ("column", "number", "path", "columns")
        if getattr(spec, f) is not None and f not in takes
    ]
    if spec.kind in _KIND_FIELDS and extra:
        raise ParameterError(
            f"{_fields(spec)}: kind {spec.kind!r} takes no {' or '.join(extra)} (it takes "
            f"{', '.join(takes) or 'nothing'}: {spec.kind}{':' if POLICY_KINDS[spec.kind] else ''}"
            f"{POLICY_KINDS[spec.kind]})."
        )
    needed = [
        f
        for f in _KIND_FIELDS.get(spec.kind, ())
        if getattr(spec, f) is None
        and (spec.kind, f) not in (("softmax", "number"), ("classifier", "columns"))
    ]
    if needed:
        raise ParameterError(
            f"{_fields(spec)}: kind {spec.kind!r} needs {' and '.join(needed)} "
            f"({spec.kind}:{POLICY_KINDS[spec.kind]})."
        )
    args = []
    if spec.column is not None:
        args.append(spec.column)
    if spec.number is not None:
        args.append(repr(float(spec.number)))
    if spec.path is not None:
        args.append(os.fspath(spec.path))
    if spec.columns is not None:
        args.append(",".join(spec.columns))
    return f"{spec.name}={spec.kind}" + "".join(f":{a}" for a in args)


_TYPE_WORDS: Final = {
    "name": "str",
    "kind": "str (one of " + ", ".join(POLICY_KINDS) + ")",
    "column": "column name (str)",
    "number": "number",
    "path": "path (str or os.PathLike)",
    "columns": "tuple of column names",
}


def _parsed_spec(name: str, kind: str, **fields: Any) -> PolicySpec:
    """A PolicySpec the parser built from a spec's text (already checked: not parsed again)."""
    spec = object.__new__(PolicySpec)
    for field in ("column", "number", "path", "columns"):
        object.__setattr__(spec, field, fields.get(field))
    object.__setattr__(spec, "name", name)
    object.__setattr__(spec, "kind", kind)
    object.__setattr__(spec, "text", fields.get("text", ""))
    return spec


#: Characters of a spec quoted in a message; a longer one is cut (a 100,000-character value
#: is not echoed).
_MAX_SHOWN: Final = 120


def _shown(text: str) -> str:
    """``text`` quoted, with control characters escaped (safe to print), cut when long."""
    shown = repr(text)
    return shown if len(shown) <= _MAX_SHOWN else shown[: _MAX_SHOWN - 4] + "...'"


def is_policy_spec(text: str) -> bool:
    """Whether ``text`` is a spec (it has ``NAME=``) rather than the name of a candidate."""
    return "=" in _spec_text(text)


def _spec_text(text: Any) -> str:
    if not isinstance(text, str):
        raise ParameterError(
            f"`text` must be a string, a candidate's name or a policy spec {SPEC_GRAMMAR}; got "
            f"{describe(text)}."
        )
    return text


def _bad(text: str, problem: str) -> ParameterError:
    """A malformed spec: the spec text (the argument ``text`` of :func:`parse_policy_spec`,
    the value of ``--policy``) quoted, what is wrong, and the grammar."""
    return ParameterError(f"policy spec text {_shown(text)}: {problem}. A spec is {SPEC_GRAMMAR}.")


def _number(text: str, value: str, what: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise _bad(text, f"{what} must be a number, got {_shown(value)}") from None
    if math.isnan(number):
        raise _bad(text, f"{what} must be a number, got NaN")
    return number


def _file(text: str, kind: str, path: str, suffixes: tuple[str, ...]) -> str:
    if not path:
        raise _bad(text, f"{kind} needs a file: {kind}:{POLICY_KINDS[kind]}")
    lower = path.lower()
    if lower.endswith(PICKLE_SUFFIXES):
        raise ParameterError(
            f"policy spec {_shown(text)}: ope never loads pickles ({path} is a pickle/joblib "
            "file): unpickling runs whatever code the file names. Save a scikit-learn "
            "classifier with skops.io.dump(model, 'model.skops') and use "
            "classifier:model.skops; save an array with numpy.save and use npy:FILE.npy."
        )
    if not lower.endswith(suffixes):
        raise _bad(text, f"{kind} reads {' or '.join(suffixes)} files, got {_shown(path)}")
    return path


def parse_policy_spec(text: str) -> PolicySpec:
    """Parse ``NAME=KIND[:ARGS]`` (no file is opened and no data read).

    Parameters
    ----------
    text : str
        The spec, e.g. ``"bts=table:bts.csv"`` or ``"explore=epsilon-greedy:scores:0.1"``.

    Returns
    -------
    PolicySpec

    Raises
    ------
    ParameterError
        The spec is malformed: no name, a name with characters other than letters, digits,
        ``_ . -``, an unknown kind, missing or extra arguments, a number that is not one (NaN
        included) or out of range, a file of the wrong kind (pickles are refused).

    Notes
    -----
    Arguments are split at ``:``. A file name takes the rest of the spec, so it may contain
    ``:`` itself; the number of ``epsilon-greedy`` and ``softmax`` is the last field (so their
    column may contain ``:``), and so are a classifier's feature columns. ``epsilon-greedy``'s
    EPS is in [0, 1]; ``softmax``'s temperature is finite and > 0.

    Examples
    --------
    >>> parse_policy_spec("explore=epsilon-greedy:scores:0.1")
    PolicySpec(name='explore', kind='epsilon-greedy', column='scores', number=0.1, path=None, columns=None, text='explore=epsilon-greedy:scores:0.1')
    >>> parse_policy_spec("bts=table:bts.csv").path
    'bts.csv'
    """
    text = _spec_text(text)
    if not text.strip():
        raise _bad(text, "it is empty")
    if not text.isprintable():
        raise _bad(text, "it holds control characters")
    name, sep, rest = text.partition("=")
    if not sep:
        raise _bad(text, "it has no NAME= (the candidate's name)")
    if not name:
        raise _bad(text, "the name before = is empty")
    if len(name) > _MAX_NAME or not _NAME.fullmatch(name):
        raise _bad(
            text,
            f"the name {_shown(name)} must be 1 to {_MAX_NAME} letters, digits, "
            "'_', '.' or '-', starting with a letter or digit",
        )
    kind, _, args = rest.partition(":")
    if kind not in POLICY_KINDS:
        close = difflib.get_close_matches(kind, list(POLICY_KINDS), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise _bad(text, f"unknown kind {_shown(kind)}{hint}")
    if kind in ("uniform", "logging"):
        if ":" in rest:
            raise _bad(text, f"{kind} takes no arguments (write {name}={kind})")
        return _parsed_spec(name, kind, text=text)
    if kind == "epsilon-greedy":
        column, sep, eps_text = args.rpartition(":")
        if not sep or not column or not eps_text:
            raise _bad(text, "epsilon-greedy needs a column and EPS: epsilon-greedy:COLUMN:EPS")
        eps = _number(text, eps_text, "EPS")
        if not 0.0 <= eps <= 1.0:
            raise _bad(text, f"EPS must be in [0, 1] (the share spread uniformly), got {eps_text}")
        return _parsed_spec(name, kind, column=column, number=eps, text=text)
    if kind == "softmax":
        if not args:
            raise _bad(text, "softmax needs a score column: softmax:COLUMN[:TEMPERATURE]")
        column, sep, temp_text = args.rpartition(":")
        temperature = 1.0
        if sep:
            try:
                temperature = float(temp_text)
            except ValueError:  # no number last: the whole argument is the column
                column = args
            else:
                if not (math.isfinite(temperature) and temperature > 0.0):
                    raise _bad(text, f"TEMPERATURE must be a finite number > 0, got {temp_text}")
        else:
            column = args
        if not column:
            raise _bad(text, "softmax needs a score column: softmax:COLUMN[:TEMPERATURE]")
        return _parsed_spec(name, kind, column=column, number=temperature, text=text)
    if kind == "npy":
        return _parsed_spec(name, kind, path=_file(text, kind, args, (".npy",)), text=text)
    if kind == "table":
        return _parsed_spec(name, kind, path=_file(text, kind, args, _TABLE_SUFFIXES), text=text)
    # classifier
    path, columns = args, None
    if not args.lower().endswith(".skops") and ":" in args:
        path, _, cols = args.rpartition(":")
        columns = tuple(c.strip() for c in cols.split(","))
        if not all(columns):
            raise _bad(
                text,
                "the feature columns are a comma-separated list of names: "
                "classifier:FILE.skops:COLUMN,COLUMN",
            )
    return _parsed_spec(
        name, kind, path=_file(text, kind, path, (".skops",)), columns=columns, text=text
    )


def load_classifier(path: str | os.PathLike[str]) -> Any:
    """A scikit-learn classifier saved with ``skops.io.dump``, loaded without pickle.

    Parameters
    ----------
    path : str or path-like
        A ``.skops`` file.

    Returns
    -------
    object
        The fitted classifier (with ``predict_proba`` and ``classes_``).

    Raises
    ------
    DataFileError
        The file is a pickle (refused whatever its name), not a skops file, or holds types
        outside skops' default trusted set and :data:`SKOPS_TRUSTED_TYPES`.
    ImportError
        skops is not installed (``pip install 'ope-toolkit[skops]'``).

    Notes
    -----
    ``skops.io.load`` rebuilds the objects from a JSON schema and imports only the types it
    is told to trust: skops' own default set (numpy, scipy and scikit-learn estimators) and
    :data:`SKOPS_TRUSTED_TYPES`. The types a file names are listed first with
    ``skops.io.get_untrusted_types`` and any other one is refused by name.
    """
    path = local_file(path, "classifier")  # a str or path-like naming a regular local file
    refuse_pickle(path, what="a scikit-learn classifier saved with skops.io.dump (.skops)")
    try:
        import skops.io as sio
    except ImportError:
        raise ImportError(
            "reading a .skops classifier needs skops: pip install 'ope-toolkit[skops]' "
            "(or pip install skops)"
        ) from None
    try:
        untrusted = sio.get_untrusted_types(file=path)
    except Exception as exc:  # noqa: BLE001 - a corrupt or foreign file: skops' many errors
        raise DataFileError(
            f"{path}: not a file that skops.io.dump wrote ({type(exc).__name__}: {exc})."
        ) from None
    refused = [t for t in untrusted if t not in SKOPS_TRUSTED_TYPES]
    if refused:
        raise DataFileError(
            f"{path}: holds types ope does not load: {', '.join(refused)}. ope trusts "
            "scikit-learn's estimators and the fitted state listed in "
            "ope.policies.specs.SKOPS_TRUSTED_TYPES, never a type because a file names it."
        )
    try:
        return sio.load(path, trusted=[t for t in SKOPS_TRUSTED_TYPES if t in untrusted])
    except Exception as exc:  # noqa: BLE001 - skops' errors on a malformed file
        raise DataFileError(
            f"{path}: could not be loaded by skops ({type(exc).__name__}: {exc})."
        ) from None


def _catalog(logs: BanditLogs) -> list[Any]:
    """The logged actions and those of the logs' action-feature table, sorted."""
    extra = []
    features = logs.action_features
    if isinstance(features, pa.Table) and "action" in features.column_names:
        col = features.column("action")
        action_type = action_column(logs).type
        if col.type == action_type:
            extra.append(col)
    return action_index(logs, extra).actions.tolist()


def _labeled(exc: Exception, label: str, path: str | None) -> Exception:
    """``exc`` with ``label`` in front (the file's own name dropped: the label holds it)."""
    text = str(exc)
    if path and text.startswith(f"{path}: "):
        text = text[len(path) + 2 :]
    return type(exc)(f"{label}: {text}")


class _Labeled:
    """A policy whose errors name where it came from (``--policy bts=table:bts.csv: ...``)."""

    def __init__(self, policy: Policy, label: str, path: str | None = None) -> None:
        self.policy = policy
        self.label = label
        self.path = path

    def _call(self, method: str, logs: BanditLogs) -> Any:
        logs = require_logs(logs, f"{self.label}: {method}")
        try:
            return getattr(self.policy, method)(logs)
        except (PolicyError, SchemaError, DataFileError, ParameterError) as exc:
            raise _labeled(exc, self.label, self.path) from None

    def propensity(self, logs: BanditLogs) -> Any:
        return self._call("propensity", logs)

    def distribution(self, logs: BanditLogs) -> PolicyDistribution:
        return self._call("distribution", logs)

    def __repr__(self) -> str:
        return repr(self.policy)


def _build(spec: PolicySpec, logs: BanditLogs) -> Policy:
    has_candidates = "candidates" in logs.table.column_names
    if spec.kind == "uniform":
        return UniformPolicy() if has_candidates else UniformPolicy(actions=_catalog(logs))
    if spec.kind == "logging":
        return LoggingPolicy()
    if spec.kind in ("epsilon-greedy", "softmax"):
        column = spec.column
        assert column is not None and spec.number is not None
        if column not in logs.table.column_names:
            raise PolicyError(
                f"the logs have no column {column!r} (the "
                f"{'scores or greedy actions' if spec.kind == 'epsilon-greedy' else 'scores'}); "
                f"they have {', '.join(logs.table.column_names)}."
            )
        scores = is_numeric_list(logs.table.column(column).type)
        if spec.kind == "softmax":
            if not scores:
                raise SchemaError(
                    f"softmax needs a list column of scores aligned with `candidates` (one per "
                    f"candidate); {column!r} is {logs.table.column(column).type}."
                )
            return SoftmaxPolicy(column, spec.number)
        base: Policy = DeterministicPolicy(column) if scores else ChosenActionPolicy(column)
        actions = None if has_candidates else _catalog(logs)
        return EpsilonGreedyPolicy(base, spec.number, actions=actions)
    assert spec.path is not None
    if spec.kind == "npy":
        return ArrayPolicy(spec.path)
    if spec.kind == "table":
        return ActionTablePolicy(spec.path)
    estimator = load_classifier(spec.path)
    columns = spec.columns
    if columns is None:
        names = getattr(estimator, "feature_names_in_", None)
        if names is None:
            raise PolicyError(
                f"{spec.path}: the classifier was fitted without column names, so its feature "
                f"columns must be given: {spec.name}=classifier:{spec.path}:COLUMN,COLUMN,..."
            )
        columns = tuple(str(c) for c in names)
    missing = [c for c in columns if c not in logs.table.column_names]
    if missing:
        raise SchemaError(f"the classifier's feature columns {missing} are not in the logs.")
    return ClassifierPolicy(estimator, columns)


def policy_from_spec(
    spec: str | PolicySpec, logs: BanditLogs, *, label: str | None = None
) -> Policy:
    """The policy object a spec names, ready for :func:`ope.evaluate` and :func:`ope.diagnose`.

    Parameters
    ----------
    spec : str or PolicySpec
        ``NAME=KIND[:ARGS]`` (see :func:`parse_policy_spec`).
    logs : BanditLogs
        The logs it will be evaluated on (``uniform`` and ``epsilon-greedy`` read the action set
        from them when they have no ``candidates``; a classifier's columns are checked).
    label : str, optional
        How errors name the policy (default ``policy spec 'TEXT'``); the command line passes
        ``--policy TEXT``.

    Returns
    -------
    Policy
        An object with ``propensity(logs)`` and ``distribution(logs)``; errors it raises later
        start with ``label``.

    Raises
    ------
    ParameterError
        A malformed spec.
    PolicyError, SchemaError, DataFileError
        The files or columns it names are missing or invalid (the message starts with
        ``label``).

    Examples
    --------
    >>> import pyarrow as pa
    >>> from ope.logs import BanditLogs, ValidationReport
    >>> t = pa.table({"action": [1, 2], "propensity": [0.5, 0.5], "reward": [1.0, 0.0],
    ...               "candidates": [[1, 2], [1, 2]], "scores": [[0.9, 0.1], [0.9, 0.1]]})
    >>> logs = BanditLogs(t, ValidationReport(source="<doc>", rows_read=2, rows_used=2))
    >>> policy_from_spec("explore=epsilon-greedy:scores:0.2", logs).propensity(logs).tolist()
    [0.9, 0.1]
    """
    parsed = spec if isinstance(spec, PolicySpec) else parse_policy_spec(spec)
    logs = require_logs(logs, "policy_from_spec")
    label = label if label is not None else f"policy spec {_shown(parsed.text)}"
    try:
        policy = _build(parsed, logs)
    except (PolicyError, SchemaError, DataFileError, ParameterError) as exc:
        raise _labeled(exc, label, parsed.path) from None
    return _Labeled(policy, label, parsed.path)


class _TargetColumn:
    """A ``target__<name>`` candidate of the logs as a policy object (to sit beside specs)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def propensity(self, logs: BanditLogs) -> Any:
        return target_propensities(logs, [self.name]).values[:, 0]

    def distribution(self, logs: BanditLogs) -> PolicyDistribution:
        tp = target_propensities(logs, [self.name], with_distributions=True)
        assert tp.distributions is not None
        return tp.distributions[self.name]


def candidates_with_specs(
    logs: BanditLogs,
    specs: Sequence[str | PolicySpec],
    *,
    names: Sequence[str] = (),
    table: Any = None,
    labels: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The candidates of specs together with candidates the logs or a policy table hold.

    Parameters
    ----------
    logs : BanditLogs
        The logs.
    specs : sequence of str or PolicySpec
        Policy specs (``NAME=KIND[:ARGS]``).
    names : sequence of str, default ()
        Names of candidates held by ``table`` (when given) or by the logs' ``target__<name>``
        columns; with a table and no names, every policy of the table.
    table : path, pyarrow.Table or pandas.DataFrame, optional
        A long-format policy table (``event_id, policy, action, probability``).
    labels : sequence of str, optional
        How errors name each spec (default ``policy spec 'TEXT'``).

    Returns
    -------
    dict of str to policy object or PolicyDistribution
        In the order: the table's or the logs' candidates, then the specs; ready for the
        ``policies`` argument of :func:`ope.evaluate` and :func:`ope.diagnose`.

    Raises
    ------
    ParameterError
        A malformed spec, or two candidates with the same name.
    PolicyError
        A name that neither the table nor the logs hold.
    """
    logs = require_logs(logs, "candidates_with_specs")
    if isinstance(specs, (str, PolicySpec)):
        raise ParameterError(
            f"`specs` must be a list of policy specs; got the single spec {describe(specs)}: "
            "wrap it as [spec]."
        )
    try:
        given = list(specs)
    except TypeError:
        raise ParameterError(
            f"`specs` must be a list of policy specs ({SPEC_GRAMMAR}); got {describe(specs)}."
        ) from None
    parsed = []
    for i, spec in enumerate(given):  # loop over the specs (a handful)
        if isinstance(spec, PolicySpec):
            parsed.append(spec)
            continue
        if not isinstance(spec, str):
            raise ParameterError(
                f"`specs` must hold policy specs (strings {SPEC_GRAMMAR}, or PolicySpec); its "
                f"item {i} is {describe(spec)}."
            )
        try:
            parsed.append(parse_policy_spec(spec))
        except ParameterError as exc:
            raise ParameterError(f"`specs` item {i}: {exc}") from None
    names = check_names(names, "names", example="names=['greedy']")
    if labels is None:
        labels = [None] * len(parsed)  # type: ignore[list-item]
    else:
        labels = check_names(labels, "labels", example="labels=['--policy u=uniform']")
        if len(labels) != len(parsed):
            raise ParameterError(
                f"`labels` must give one label per spec of `specs` ({len(parsed)}); got "
                f"{len(labels)}."
            )
    out: dict[str, Any] = {}
    if table is not None:
        tp = target_propensities(logs, table, with_distributions=True)
        assert tp.distributions is not None
        unknown = [n for n in names if n not in tp.names]
        if unknown:
            raise PolicyError(
                f"unknown policy names {unknown} in `names`: the policy table holds "
                f"{', '.join(tp.names)}."
            )
        for n in names or tp.names:
            out[n] = tp.distributions[n]
    else:
        available = logs.target_policies
        unknown = [
            n
            for n in names
            if n not in available
            and not (n.startswith("target__") and n[len("target__") :] in available)
        ]
        if unknown:  # unknown names fail here, before any spec is built
            raise PolicyError(
                f"unknown policy names {unknown}: the logs have no column "
                f"{', '.join('target__' + u for u in unknown)}. Available: {available or 'none'}."
            )
        if names:  # their columns are checked here too, before any spec is built
            target_propensities(logs, list(names))
        for n in names:
            out[n] = _TargetColumn(n[len("target__") :] if n.startswith("target__") else n)
    for spec, label in zip(parsed, labels):
        if spec.name in out:
            raise ParameterError(
                f"policy spec {_shown(spec.text)}: the name {spec.name!r} is taken by another "
                "candidate; give each candidate its own name."
            )
        out[spec.name] = policy_from_spec(spec, logs, label=label)
    return out
