"""The ``ope`` command line: a thin edge over the public API.

It parses arguments, calls public functions, prints, and sets exit codes (DESIGN.md §4). It does
no statistics of its own.

Commands: ``validate``, ``evaluate`` (bandit logs, or trajectory logs -- one row per step with
``episode_id, step, done`` -- through :func:`ope.sequential.sequential_estimate`), ``diagnose``,
``learn``, ``paired`` (effects on paired replays through :func:`ope.paired.paired_effect`),
``import`` (an Open Bandit Dataset campaign or a DSJSON file to parquet logs, through
:mod:`ope.importers`) and ``demo``. ``validate``, ``evaluate`` and ``diagnose`` also read the raw
formats directly with ``--format obd|dsjson``.

Exit codes: 0 ok, 1 runtime failure, 2 usage error, 65 invalid data (with the rejection report).
``--json`` prints exactly one JSON document on stdout; progress and logs go to stderr, each
warning on one line.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Sequence
from pathlib import Path
import warnings
from typing import Any, Final

from ope.exceptions import (
    DataFileError,
    MissingBoundsError,
    OPEError,
    ParameterError,
    PolicyError,
    SchemaError,
    ValidationError,
)

__all__ = ["main"]

EXIT_OK: Final = 0
EXIT_FAILURE: Final = 1
EXIT_USAGE: Final = 2
EXIT_DATAERR: Final = 65  # sysexits EX_DATAERR: the input data were incorrect


class _UsageError(Exception):
    """A command-line usage problem found after argparse (exit code 2)."""


#: The command-line flag of each argument of the public functions, to name it in usage errors.
FLAGS: Final = {
    "ci": "--ci",
    "confidence_level": "--confidence-level",
    "reward_range": "--reward-range",
    "max_weight": "--max-weight",
    "weight_bound": "--weight-bound",
    "estimators": "--estimator",
    "context_columns": "--context-columns",
    "on_invalid": "--on-invalid",
    "mapping": "--mapping",
    "target_width": "--target-width",
    "new_rows": "--new-rows",
    "certify_fraction": "--certify-fraction",
    "rng": "--seed",
    "estimator": "--estimator",
    "gamma": "--gamma",
    "horizon": "--horizon",
    "tail_value": "--tail-value",
    "q_hat": "--q-column",
    "v_hat": "--v-column",
    "treated": "--treated",
    "control": "--control",
    "outcomes": "--outcome",
    "by": "--by",
    "correction": "--correction",
    "context": "--obd-context",
    "chunk_lines": "--chunk-lines",
}

#: ``--format`` of validate / evaluate / diagnose: parquet logs, or a raw source an importer reads.
FORMATS: Final = ("parquet", "obd", "dsjson")

#: Sources ``ope import`` reads.
IMPORT_FORMATS: Final = ("obd", "dsjson")

#: Columns that mark trajectory logs (one row per step): ``ope evaluate`` then runs the
#: sequential estimators (DESIGN.md §2, the step schema).
TRAJECTORY_MARKERS: Final = ("episode_id", "step", "done")

#: Sequential estimators of ``ope evaluate`` on trajectories when ``--estimator`` is not given:
#: the per-decision pair, as ips/snips are for bandit logs.
DEFAULT_SEQUENTIAL_ESTIMATORS: Final = ("pdis", "wpdis")

#: The placeholder a --q-column/--v-column/--tail-column template replaces by the policy name.
POLICY_PLACEHOLDER: Final = "{policy}"


def _flag_of(exc: ParameterError) -> str | None:
    """The flag of the argument a ParameterError names (its first `name` in backquotes)."""
    match = re.search(r"`(\w+)`", str(exc)) or re.match(r"(\w+)", str(exc))
    return FLAGS.get(match.group(1)) if match else None


def _parse_mapping(items: Sequence[str] | None) -> dict[str, str] | None:
    if not items:
        return None
    mapping: dict[str, str] = {}
    for item in items:
        ours, sep, theirs = item.partition("=")
        if not sep or not ours or not theirs:
            raise _UsageError(
                f"--mapping expects OUR_NAME=THEIR_NAME (e.g. propensity=pscore), got {item!r}"
            )
        mapping[ours] = theirs
    return mapping


def _jsonable(value: Any) -> Any:
    """Make numpy scalars, NaN and infinities JSON-safe (NaN/inf become null)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 1) == 0:
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _emit_json(document: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(_jsonable(document), indent=2, allow_nan=False) + "\n")


def _output(args: argparse.Namespace, document: dict[str, Any], *texts: str) -> int:
    """The one JSON document under --json, else the texts separated by blank lines; exit 0."""
    if args.json:
        _emit_json(document)
    else:
        print("\n\n".join(texts))
    return EXIT_OK


def _err(message: str) -> None:
    print(message, file=sys.stderr)


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("logs", help="parquet file or directory of parquet files")
    p.add_argument(
        "--mapping",
        nargs="+",
        metavar="OURS=THEIRS",
        help="rename your columns to ope's names, e.g. --mapping propensity=pscore reward=click",
    )
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")


def _add_format(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--format", choices=FORMATS, default="parquet",
        help="what LOGS is: parquet logs (default), an OBD campaign folder/CSV, or a DSJSON file",
    )
    _add_import_options(p)


def _add_import_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--obd-context", choices=("user", "user+affinity", "none"), default="user",
        help="OBD: context columns to keep (default user_feature_0..3; never the 80 affinity "
        "columns unless asked)",
    )
    p.add_argument("--chunk-lines", type=int, metavar="N",
                   help="DSJSON: lines parsed per chunk (bounds memory; default "
                   "ope.importers.dsjson.DEFAULT_CHUNK_LINES)")


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ope",
        description="Off-policy evaluation of logged policies.",
        epilog="Exit codes: 0 ok, 1 runtime failure, 2 usage error, 65 invalid data.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("validate", help="validate logs against the schema and print the report")
    _add_common(p)
    _add_format(p)
    p.add_argument("--on-invalid", choices=("raise", "drop"), default="raise")

    p = sub.add_parser("evaluate", help="estimate candidate policies' values with intervals")
    _add_common(p)
    _add_format(p)
    _add_evaluate_options(p)

    p = sub.add_parser(
        "diagnose", help="overlap diagnostics: ESS, weight tails, support and segment gaps, plan"
    )
    _add_common(p)
    _add_format(p)
    _add_diagnose_options(p)

    p = sub.add_parser(
        "learn", help="learn a policy by maximizing a lower bound, and certify it on held-out rows"
    )
    _add_common(p)
    p.add_argument(
        "--context-columns", nargs="+", required=True, metavar="COLUMN", help="context features"
    )
    p.add_argument("--out", metavar="POLICY.parquet", help="write the learned policy (long format)")
    p.add_argument("--name", default="learned", help="policy name in the table and certificate")
    p.add_argument("--confidence-level", type=float, default=0.95)
    p.add_argument("--reward-range", nargs=2, type=float, metavar=("LO", "HI"), default=(0.0, 1.0))
    p.add_argument("--certify-fraction", type=float, default=0.5)
    p.add_argument("--gate", choices=("betting", "bernstein", "t"), default="betting")
    p.add_argument("--seed", type=int, default=0, help="seed of the train/certify split")
    p.add_argument("--on-invalid", choices=("raise", "drop"), default="raise")

    p = sub.add_parser(
        "paired", help="effects of treated arms against a control arm on paired replays"
    )
    _add_common(p)
    _add_paired_options(p)

    p = sub.add_parser(
        "import", help="import an Open Bandit Dataset campaign or a DSJSON file to parquet logs"
    )
    p.add_argument("format", choices=IMPORT_FORMATS, help="the source format")
    p.add_argument("src", help="OBD: a campaign folder (random/all) or its CSV; dsjson: the file")
    p.add_argument("--out", required=True, metavar="LOGS.parquet", help="the parquet file to write")
    p.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    p.add_argument("--on-invalid", choices=("raise", "drop"), default="raise")
    _add_import_options(p)
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")

    p = sub.add_parser("demo", help="evaluate the bundled sample and show the true values beside")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    return parser


def _add_evaluate_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--policies",
        metavar="FILE",
        help="long-format policy table (event_id, policy, action, probability); "
        "default: every target__<name> column in the logs",
    )
    p.add_argument(
        "--policy",
        nargs="+",
        metavar="NAME",
        help="evaluate only these target__<NAME> columns",
    )
    p.add_argument(
        "--estimator",
        nargs="+",
        default=None,
        metavar="NAME",
        help="bandit logs: dm ips clipped_ips snips dr sndr switch_dr dros (default: ips snips); "
        "trajectories: is pdis wis wpdis dr wdr (default: pdis wpdis)",
    )
    p.add_argument(
        "--ci", default="normal", metavar="METHOD",
        help="interval method (default normal; trajectories: normal t hoeffding bernstein betting)",
    )
    p.add_argument("--confidence-level", type=float, default=0.95)
    p.add_argument("--reward-range", nargs=2, type=float, metavar=("LO", "HI"))
    p.add_argument(
        "--max-weight", type=float,
        help="clip level for clipped_ips; trajectories: of every cumulative "
        "weight, for every estimator (the estimate is then of the clipped value)",
    )
    p.add_argument(
        "--weight-bound",
        type=float,
        help="a priori bound on pi_e/pi_b for hoeffding, bernstein and empirical_likelihood "
        "intervals of ips/snips (e.g. 1 / the smallest logging probability); trajectories: "
        "a bound on every per-step ratio, for the bounded intervals of is/pdis",
    )
    p.add_argument(
        "--context-columns",
        nargs="+",
        metavar="COLUMN",
        help="context features for the reward model of dm/dr (default: every numeric column "
        "outside the log schema except outcome-, id- and time-like names: cost, latency_ms, "
        "tokens, click, conversion, revenue, weight, reward*, outcome*, timestamp*, *_id, "
        "*_time, *_at, user-item_affinity_*; a note lists them past 20; action features "
        "attached by --format obd are joined on the action)",
    )
    p.add_argument("--on-invalid", choices=("raise", "drop"), default="raise")
    p.add_argument(
        "--by",
        nargs="+",
        metavar="COLUMN",
        help="segment columns for the coverage-gap report (numeric ones are binned)",
    )
    t = p.add_argument_group(
        "trajectory logs",
        "one row per step (episode_id, step, done, ...): recognised from those columns, or "
        "forced with --trajectories; candidates are the target__<name> columns (per-step "
        "target probabilities of the logged actions)",
    )
    t.add_argument(
        "--trajectories", action="store_true", help="read LOGS as trajectories (one row per step)"
    )
    t.add_argument("--gamma", type=float, help="discount factor in [0, 1] (default 1)")
    t.add_argument(
        "--horizon",
        metavar="H",
        help="a priori maximum episode length (or 'logged') for the bounded intervals of is/pdis",
    )
    tail = t.add_mutually_exclusive_group()
    tail.add_argument(
        "--tail-value", type=float, metavar="X",
        help="value of the state each truncated episode was left in (0 states that the "
        "return within the logged steps is the target)",
    )
    tail.add_argument(
        "--tail-column", metavar="COLUMN",
        help="per-step column of tail values (the last step of each episode is read); "
        "'{policy}' in the name is replaced by the policy",
    )
    t.add_argument(
        "--q-column", metavar="COLUMN",
        help="dr/wdr: the model's Q(s_t, a_t) per step, e.g. 'q_target__{policy}'",
    )
    t.add_argument(
        "--v-column", metavar="COLUMN",
        help="dr/wdr: the model's V(s_t) under the candidate per step, e.g. 'v_target__{policy}'",
    )


def _add_paired_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--treated", action="append", required=True, metavar="ARM",
        help="a treated arm (repeat the flag for several)",
    )
    p.add_argument("--control", required=True, metavar="ARM", help="the control arm")
    p.add_argument("--by", metavar="COLUMN", help="one effect per value (e.g. item_id)")
    outcomes = p.add_mutually_exclusive_group()
    outcomes.add_argument(
        "--outcome", action="append", metavar="COLUMN",
        help="an outcome column (repeat for several; default: outcome)",
    )
    outcomes.add_argument(
        "--outcomes", choices=("all",),
        help="'all': every one of outcome, cost, tokens, latency_ms present",
    )
    p.add_argument("--ratio", action="store_true", help="also the ratio treated/control means")
    p.add_argument("--ci", default="t", metavar="METHOD",
                   help="t normal hoeffding bernstein betting (default t)")
    p.add_argument("--reward-range", nargs=2, type=float, metavar=("LO", "HI"),
                   help="a priori range of every outcome (needed by the finite-sample methods)")
    p.add_argument("--correction", default="holm", metavar="METHOD",
                   help="multiplicity correction: holm bh none (default holm)")
    p.add_argument("--confidence-level", type=float, default=0.95)
    p.add_argument("--on-invalid", choices=("raise", "drop"), default="raise")


def _add_diagnose_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--policies", metavar="FILE", help="long-format policy table")
    p.add_argument("--policy", nargs="+", metavar="NAME", help="only these target__<NAME> columns")
    p.add_argument("--by", nargs="+", metavar="COLUMN", help="segment columns (numeric: binned)")
    p.add_argument("--max-weight", type=float, help="clip level for the outer/inner split")
    p.add_argument("--reward-range", nargs=2, type=float, metavar=("LO", "HI"))
    p.add_argument("--confidence-level", type=float, default=0.95)
    p.add_argument(
        "--target-width", type=float, help="interval width the exploration plan should reach"
    )
    p.add_argument("--new-rows", type=int, help="volume of new logs the plan may assume")
    p.add_argument("--on-invalid", choices=("raise", "drop"), default="raise")


def _policies_from_args(args: argparse.Namespace) -> Any:
    if getattr(args, "policies", None):
        from ope.policies import read_policy_table

        return read_policy_table(args.policies)
    if getattr(args, "policy", None):
        return list(args.policy)
    return None


def _read_or_report(args: argparse.Namespace, reader: Any = None) -> Any:
    """Read and validate the logs (with ``reader``, default ``ope.io.read_logs``); on invalid
    data print the report and return None."""
    from ope.io import read_logs

    mapping = _parse_mapping(args.mapping)
    if reader is None:
        reader = _format_reader(args) or read_logs
    try:
        return reader(args.logs, mapping=mapping, on_invalid=args.on_invalid)
    except ValidationError as exc:
        if args.json:
            _emit_json({"valid": False, "report": exc.report.to_dict() if exc.report else None})
        else:
            print(str(exc))
        return None


def _format_reader(args: argparse.Namespace) -> Any:
    """The importer of ``--format obd|dsjson`` as a reader (None for parquet)."""
    fmt = getattr(args, "format", "parquet")
    if fmt == "parquet":
        return None
    if args.mapping:
        raise _UsageError(f"--mapping does not apply to --format {fmt}: its field names are fixed")
    from ope.importers import read_dsjson, read_obd

    if fmt == "obd":
        return lambda src, *, mapping, on_invalid: read_obd(
            src, context=args.obd_context, on_invalid=on_invalid)
    return lambda src, *, mapping, on_invalid: read_dsjson(
        src, on_invalid=on_invalid, **_chunk_option(args))


def _chunk_option(args: argparse.Namespace) -> dict[str, int]:
    return {} if args.chunk_lines is None else {"chunk_lines": args.chunk_lines}


def _cmd_import(args: argparse.Namespace) -> int:
    """``ope import obd|dsjson SRC --out LOGS.parquet``: validate and write parquet logs.

    Writes to a temporary file next to ``--out`` and renames it only when the import succeeds;
    refuses to overwrite ``--out`` (and its ``.actions.parquet`` side table) without ``--force``.
    DSJSON is streamed chunk by chunk into the file. Action features of OBD's
    ``item_context.csv`` go to ``<out stem>.actions.parquet``.
    """
    import os

    import pyarrow.parquet as pq

    out = Path(args.out)
    side = out.with_name(out.name[: -len(".parquet")] if out.name.endswith(".parquet") else out.name)
    side = side.with_name(side.name + ".actions.parquet")
    for target in (out, side):
        if target.exists() and not args.force:
            raise _UsageError(f"{target} exists; pass --force to overwrite it")
    if not out.parent.is_dir():
        raise _UsageError(f"argument --out: the folder {out.parent} does not exist")
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    written = 0
    action_features = None
    try:
        if args.format == "dsjson":
            from ope.importers import iter_dsjson
            from ope.importers.dsjson import DSJSON_METADATA

            writer = None
            validator = None
            try:
                for table, validator in iter_dsjson(args.src, on_invalid=args.on_invalid,
                                                    **_chunk_option(args)):
                    if not table.num_rows:
                        continue
                    if writer is None:
                        meta = {**(table.schema.metadata or {}),
                                **{k.encode(): v.encode() for k, v in DSJSON_METADATA.items()}}
                        writer = pq.ParquetWriter(tmp, table.schema.with_metadata(meta))
                    writer.write_table(table.cast(writer.schema))
                    written += table.num_rows
            finally:
                if writer is not None:
                    writer.close()
            if validator is None:
                raise ValidationError(f"{args.src} holds no rows; there is nothing to import")
            error = validator.failure()
            if error is not None:
                raise error
            report = validator.report
            if report.rows_used == 0:
                raise report.no_rows_error()
        else:
            from ope.importers import read_obd

            logs = read_obd(args.src, context=args.obd_context, on_invalid=args.on_invalid)
            pq.write_table(logs.table, tmp)
            written, report, action_features = logs.n, logs.report, logs.action_features
        if action_features is not None:
            side_tmp = side.with_name(f".{side.name}.{os.getpid()}.tmp")
            pq.write_table(action_features, side_tmp)
            os.replace(side_tmp, side)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()
    document = {"ok": True, "command": "import", "format": args.format, "src": args.src,
                "out": str(out), "rows_written": written, "report": report.to_dict(),
                "action_features": str(side) if action_features is not None else None}
    text = f"wrote {written:,} rows to {out}"
    if action_features is not None:
        text += f"\nwrote the action features ({action_features.num_rows:,} items) to {side}"
    return _output(args, document, str(report), text)


def _diagnose_from_args(args: argparse.Namespace, logs: Any) -> Any:
    """The diagnostics of ``ope diagnose`` and of ``ope evaluate`` (which has no plan options)."""
    from ope.diagnostics import diagnose

    return diagnose(
        logs,
        _policies_from_args(args),
        by=args.by,
        max_weight=args.max_weight,
        reward_range=tuple(args.reward_range) if args.reward_range else None,
        confidence_level=args.confidence_level,
        target_width=getattr(args, "target_width", None),
        new_rows=getattr(args, "new_rows", None),
    )


def _cmd_diagnose(args: argparse.Namespace) -> int:
    logs = _read_or_report(args)
    if logs is None:
        return EXIT_DATAERR
    d = _diagnose_from_args(args, logs)
    return _output(
        args, {"validation": logs.report.to_dict(), "diagnostics": d.to_dict()},
        str(logs.report), d.summary(),
    )


def _cmd_validate(args: argparse.Namespace) -> int:
    logs = _read_or_report(args)
    if logs is None:
        return EXIT_DATAERR
    report = logs.report
    if args.json:
        _emit_json(
            {
                "valid": report.ok,
                "report": report.to_dict(),
                "columns": logs.columns,
                "target_policies": logs.target_policies,
            }
        )
    else:
        print(str(report))
        print(f"  columns: {', '.join(logs.columns)}")
        if logs.target_policies:
            print(f"  candidate policies (target__ columns): {', '.join(logs.target_policies)}")
    return EXIT_OK


def _evaluate_from_args(args: argparse.Namespace, logs: Any) -> Any:
    from ope.evaluation import evaluate

    estimators = tuple(args.estimator) if args.estimator else ("ips", "snips")
    return evaluate(
        logs,
        _policies_from_args(args),
        estimators=estimators,
        ci=args.ci,
        confidence_level=args.confidence_level,
        reward_range=tuple(args.reward_range) if args.reward_range else None,
        max_weight=args.max_weight,
        weight_bound=args.weight_bound,
        context_columns=args.context_columns,
    )


def _cmd_evaluate(args: argparse.Namespace) -> int:
    if _is_trajectory_source(args):
        return _evaluate_trajectories(args)
    given = [flag for flag, value in _trajectory_flags(args) if value]
    if given:
        raise _UsageError(
            f"{', '.join(given)} appl{'y' if len(given) > 1 else 'ies'} to trajectory logs "
            f"only (columns {', '.join(TRAJECTORY_MARKERS)}), and {args.logs} holds bandit "
            "logs; pass --trajectories if it holds steps."
        )
    logs = _read_or_report(args)
    if logs is None:
        return EXIT_DATAERR
    ev = _evaluate_from_args(args, logs)
    d = _diagnose_from_args(args, logs)
    text = ev.summary()
    if ev.model_columns is not None:
        used = ev.model_columns
        text += (
            f"\nreward model columns: context {', '.join(used['context']) or 'none'}; "
            f"action features {', '.join(used['action_features']) or 'none'}"
        )
    return _output(args, {**ev.to_dict(), "diagnostics": d.to_dict()}, text, d.summary())


def _envelope(args: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    """The head of a --json document: ope version, command and the options as parsed."""
    from ope import __version__

    options = {k: v for k, v in vars(args).items() if k not in ("command", "logs", "json")}
    return {"ok": True, "ope_version": __version__, "command": args.command,
            "logs": args.logs, "options": options, **extra}


def _trajectory_flags(args: argparse.Namespace) -> list[tuple[str, Any]]:
    return [
        ("--trajectories", args.trajectories),
        ("--gamma", args.gamma is not None),
        ("--horizon", args.horizon is not None),
        ("--tail-value", args.tail_value is not None),
        ("--tail-column", args.tail_column),
        ("--q-column", args.q_column),
        ("--v-column", args.v_column),
    ]


def _is_trajectory_source(args: argparse.Namespace) -> bool:
    """``--trajectories``, or the columns (after --mapping) hold episode_id, step and done."""
    if args.trajectories:
        return True
    if getattr(args, "format", "parquet") != "parquet":
        return False
    import pyarrow.dataset as ds

    try:
        names = set(ds.dataset(args.logs, format="parquet").schema.names)
    except Exception:  # noqa: BLE001 - unreadable: read_logs reports it with its own message
        return False
    mapping = _parse_mapping(args.mapping) or {}
    ours = names | {k for k, v in mapping.items() if v in names}
    return all(c in ours for c in TRAJECTORY_MARKERS)


def _per_policy(template: str | None, policy: str, flag: str, n_policies: int) -> str | None:
    """A column name for one policy: ``{policy}`` replaced, or the same column for one policy."""
    if template is None:
        return None
    if POLICY_PLACEHOLDER in template:
        return template.replace(POLICY_PLACEHOLDER, policy)
    if n_policies > 1:
        raise _UsageError(
            f"argument {flag}: {template!r} would serve {n_policies} candidate policies, but a "
            f"model's values depend on the policy: put {POLICY_PLACEHOLDER} in the name "
            f"(e.g. {flag} '{'q' if flag == '--q-column' else 'v'}_target__{POLICY_PLACEHOLDER}') "
            "or select one with --policy."
        )
    return template


def _horizon_arg(value: str | None) -> int | str | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return value  # "logged", or a bad value that sequential_estimate names


def _trajectory_usage(args: argparse.Namespace, estimators: Sequence[str]) -> None:
    """Refuse the bandit-only flags, a model given or missing, and bounds no estimator uses
    (exit 2, naming the flag)."""
    from ope.sequential.estimators import BOUNDED_ESTIMATORS, MODEL_BASED

    bandit_only = [flag for flag, value in (("--policies", args.policies),
                                            ("--by", args.by),
                                            ("--context-columns", args.context_columns))
                   if value]
    if bandit_only:
        raise _UsageError(
            f"{', '.join(bandit_only)} appl{'y' if len(bandit_only) > 1 else 'ies'} to bandit "
            "logs only; trajectory candidates are the target__<name> columns of the steps "
            "(select them with --policy)."
        )
    if args.tail_value is not None and not math.isfinite(args.tail_value):
        raise _UsageError(
            f"argument --tail-value: must be a finite number (the value of the state a truncated "
            f"episode was left in); got {args.tail_value!r}."
        )
    model = [e for e in estimators if e in MODEL_BASED]
    lacking = [f for f, v in (("--q-column", args.q_column), ("--v-column", args.v_column))
               if not v]
    if model and lacking:
        raise _UsageError(
            f"argument --estimator: {' and '.join(map(repr, model))} "
            f"need{'s' if len(model) == 1 else ''} a model's values per "
            f"step: pass {' and '.join(lacking)} (Q(s_t, a_t) of the logged action and V(s_t) "
            "under the candidate, e.g. from ope.sequential.fitted_q_evaluation; "
            f"'{POLICY_PLACEHOLDER}' in the name is replaced by each policy), or use pdis/wpdis."
        )
    given = [f for f, v in (("--q-column", args.q_column), ("--v-column", args.v_column)) if v]
    if given and not model:
        raise _UsageError(
            f"{' and '.join(given)} serve{'s' if len(given) == 1 else ''} the model-based "
            "estimators dr and wdr only; add them to --estimator."
        )
    bounds = [f for f, v in (("--weight-bound", args.weight_bound), ("--horizon", args.horizon))
              if v is not None]
    if bounds and not any(e in BOUNDED_ESTIMATORS for e in estimators):
        raise _UsageError(
            f"{' and '.join(bounds)} serve{'s' if len(bounds) == 1 else ''} the bounded "
            f"intervals of {' and '.join(BOUNDED_ESTIMATORS)} only, and --estimator "
            f"{' '.join(estimators)} has neither; add is or pdis."
        )


def _estimand(gamma: float, n_truncated: int, n_episodes: int, args: argparse.Namespace) -> str:
    """What the trajectory estimates estimate, in words (truncation stated, never implied)."""
    head = f"expected discounted return (gamma={gamma:g}) of each candidate"
    if n_truncated == 0:
        return f"{head}; every one of the {n_episodes} episodes terminated (done at its end)"
    if args.tail_value == 0.0:
        return (f"{head} within the logged steps, stated as the target by --tail-value 0: "
                f"{n_truncated} of {n_episodes} episodes were truncated and contribute nothing "
                "after their last logged step")
    if args.tail_value is not None or args.tail_column:
        tail = (f"--tail-value {args.tail_value:g}" if args.tail_value is not None
                else f"--tail-column {args.tail_column}")
        return (f"{head}; {n_truncated} of {n_episodes} episodes were truncated and their tail "
                f"(after the last logged step) is bootstrapped with {tail}")
    return (f"{head} accumulated within the logged steps: {n_truncated} of {n_episodes} "
            "episodes were truncated and contribute nothing after their last logged step (pass "
            "--tail-value or --tail-column to bootstrap their tails)")


def _trajectory_rows(
    args: argparse.Namespace, traj: Any, policies: list[str], estimators: Sequence[str],
    rows: list[dict[str, Any]],
) -> Any:
    """Append one row per policy x estimator to ``rows``; return the logging policy's value
    (None when the tail column depends on the candidate)."""
    import numpy as np

    from ope.sequential import sequential_estimate
    from ope.sequential.estimators import BOUNDED_ESTIMATORS, MODEL_BASED

    gamma = 1.0 if args.gamma is None else args.gamma
    common = {"gamma": gamma, "confidence_level": args.confidence_level,
              "reward_range": tuple(args.reward_range) if args.reward_range else None}
    horizon = _horizon_arg(args.horizon)
    for policy in policies:  # candidates x estimators: a handful of calls, no loop over rows
        tail: Any = args.tail_value
        if args.tail_column:
            tail = _per_policy(args.tail_column, policy, "--tail-column", len(policies))
        for estimator in estimators:
            options: dict[str, Any] = {"tail_value": tail, "max_weight": args.max_weight}
            if estimator in MODEL_BASED:
                options["q_hat"] = _per_policy(args.q_column, policy, "--q-column", len(policies))
                options["v_hat"] = _per_policy(args.v_column, policy, "--v-column", len(policies))
            if estimator in BOUNDED_ESTIMATORS:
                options.update(weight_bound=args.weight_bound, horizon=horizon)
            est = sequential_estimate(traj, policy, estimator=estimator, ci=args.ci,
                                      **common, **options)
            rows.append({
                "policy": policy, "estimator": estimator, "value": est.value,
                "std_error": est.std_error, "ci_low": est.ci_low, "ci_high": est.ci_high,
                "confidence_level": est.confidence_level, "ci_method": est.ci_method,
                "n": est.n, "ess": est.ess, "ess_ratio": est.ess / est.n,
                "notes": "; ".join(est.notes), "note_list": est.notes,
            })
    # the logging policy's value: its own mean discounted return (unit weights), same tail
    # (unknown when the tail column depends on the candidate policy)
    logging_tail: Any = args.tail_value
    if args.tail_column:
        logging_tail = None if POLICY_PLACEHOLDER in args.tail_column else args.tail_column
    logging = None
    if not (args.tail_column and logging_tail is None):
        own = traj.table.column("propensity").to_numpy(zero_copy_only=False).astype(np.float64)
        logging = sequential_estimate(traj, own, estimator="is", tail_value=logging_tail,
                                      **common)
    return logging


_WHERE = re.compile(r"^(\w+(?: \(policy '[^']*'\))?): (.*)$", re.DOTALL)


def _show_grouped(caught: Sequence[warnings.WarningMessage]) -> None:
    """Each distinct warning once on stderr, naming every estimate it concerns."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for w in caught:
        match = _WHERE.match(str(w.message))
        where, text = match.groups() if match else ("", str(w.message))
        grouped.setdefault((w.category.__name__, text), []).append(where)
    for (category, text), places in grouped.items():
        where = ", ".join(p for p in places if p)
        print(f"warning ({category}): {where + ': ' if where else ''}{text}", file=sys.stderr)


def _evaluate_trajectories(args: argparse.Namespace) -> int:
    """``ope evaluate`` on trajectory logs: the sequential estimators, one row per policy x
    estimator, in the output style of bandit logs."""
    import numpy as np
    import pandas as pd

    from ope.evaluation import TABLE_COLUMNS
    from ope.io import read_trajectories
    from ope.results import ResultParts, render_text

    estimators = tuple(args.estimator) if args.estimator else DEFAULT_SEQUENTIAL_ESTIMATORS
    _trajectory_usage(args, estimators)
    traj = _read_or_report(args, read_trajectories)
    if traj is None:
        return EXIT_DATAERR
    policies = list(args.policy) if args.policy else traj.target_policies
    if not policies:
        raise SchemaError(
            f"{args.logs} has no target__<name> column: trajectory candidates are the per-step "
            "target probabilities of the logged actions, one target__<name> column per policy."
        )
    gamma = 1.0 if args.gamma is None else args.gamma
    rows: list[dict[str, Any]] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            logging = _trajectory_rows(args, traj, policies, estimators, rows)
        finally:
            _show_grouped(caught)
    table = pd.DataFrame(rows, columns=list(TABLE_COLUMNS))
    n_truncated = int(np.count_nonzero(traj.truncated))
    estimand = _estimand(gamma, n_truncated, traj.n_episodes, args)
    grouped: dict[tuple[str, str], list[str]] = {}  # each note once, with the estimates
    for row in rows:
        for note in row["note_list"]:
            grouped.setdefault((row["policy"], note), []).append(row["estimator"])
    notes = [f"{p} ({', '.join(es)}): {note}" for (p, note), es in grouped.items()]
    if args.json:
        _emit_json(_envelope(
            args,
            kind="trajectories",
            confidence_level=args.confidence_level,
            ci_method=args.ci,
            gamma=gamma,
            estimand=estimand,
            episodes=traj.n_episodes,
            truncated_episodes=n_truncated,
            validation=traj.report.to_dict(),
            logging_policy=None if logging is None else {
                "value": logging.value, "std_error": logging.std_error,
                "ci_low": logging.ci_low, "ci_high": logging.ci_high,
                "ci_method": logging.ci_method, "n": logging.n,
            },
            estimates=table.to_dict(orient="records"),
            notes=notes,
        ))
        return EXIT_OK
    parts = ResultParts(
        title=(f"{len(policies)} candidate policies x {len(estimators)} sequential estimators on "
               f"{traj.n_episodes:,} episodes ({traj.n:,} steps); {args.ci} intervals at "
               f"{args.confidence_level:.0%}"),
        fields=(
            ("estimand", estimand),
            *(() if logging is None else (
                ("logging policy value (mean discounted return)", logging.value),
                (f"logging policy interval ({logging.ci_method})",
                 (logging.ci_low, logging.ci_high)),
            )),
            ("rows rejected", traj.report.rows_rejected),
        ),
        table=table.drop(columns=["notes", "confidence_level"]),
        notes=tuple(notes),
    )
    print(str(traj.report))
    print()
    print(render_text(parts))
    return EXIT_OK


def _arm_of(value: str, arms: Sequence[Any], flag: str) -> Any:
    """The replays' arm written ``value`` on the command line (arms may be integers)."""
    by_text = {str(a): a for a in arms}
    if value not in by_text:
        raise _UsageError(
            f"argument {flag}: arm {value!r} is not in the replays; their arms are: "
            f"{', '.join(map(repr, by_text))}."
        )
    return by_text[value]


def _cmd_paired(args: argparse.Namespace) -> int:
    from ope.io import read_paired
    from ope.paired import paired_effect

    replays = _read_or_report(args, read_paired)
    if replays is None:
        return EXIT_DATAERR
    arms = replays.arms
    treated = [_arm_of(a, arms, "--treated") for a in args.treated]
    control = _arm_of(args.control, arms, "--control")
    outcomes: Any = args.outcomes or (list(args.outcome) if args.outcome else ("outcome",))
    res = paired_effect(
        replays,
        treated=treated,
        control=control,
        outcomes=outcomes,
        by=args.by,
        ratio=args.ratio,
        confidence_level=args.confidence_level,
        ci=args.ci,
        reward_range=tuple(args.reward_range) if args.reward_range else None,
        correction=args.correction,
    )
    return _output(
        args,
        _envelope(args, validation=replays.report.to_dict(), **res.to_dict()),
        str(replays.report), res.summary(),
    )


def _cmd_learn(args: argparse.Namespace) -> int:
    from ope.learning import ConservativePolicyLearner, learn_from_logs, learner_policy_table
    from ope.policies import write_policy_table

    logs = _read_or_report(args)
    if logs is None:
        return EXIT_DATAERR
    learner, cert = learn_from_logs(
        logs,
        context_columns=args.context_columns,
        learner=ConservativePolicyLearner(reward_range=tuple(args.reward_range)),
        certify_fraction=args.certify_fraction,
        confidence_level=args.confidence_level,
        method=args.gate,
        name=args.name,
        rng=args.seed,
    )
    if args.out:
        table = learner_policy_table(learner, logs, context_columns=args.context_columns, name=args.name)
        write_policy_table(table, args.out)
    if args.json:
        _emit_json(
            {
                "validation": logs.report.to_dict(),
                "certificate": cert.to_dict(),
                "policy_table": args.out,
            }
        )
    else:
        print(str(cert))
        if args.out:
            print(f"learned policy written to {args.out}; score it with: ope evaluate LOGS --policies {args.out}")
    return EXIT_OK


#: clip level of the demo's clipped IPS: an a priori choice, not read off the data
DEMO_MAX_WEIGHT: Final = 50.0


def _cmd_demo(args: argparse.Namespace) -> int:
    from ope.evaluation import evaluate
    from ope.io import read_logs
    from ope.simulate import load_sample

    sample = load_sample()
    truth = {str(k): float(v) for k, v in sample.truth["policies"].items()}
    reward_range = tuple(float(v) for v in sample.truth["reward_range"])
    logs = read_logs(sample.table)
    ev = evaluate(
        logs,
        None,
        estimators=("ips", "clipped_ips", "snips"),
        ci="normal",
        reward_range=reward_range,
        max_weight=DEMO_MAX_WEIGHT,
    )
    if args.json:
        table = ev.table()
        table["true_value"] = table["policy"].map(truth)
        _emit_json(
            {
                "sample": str(sample.path),
                "truth": {"logging": sample.truth["logging"], "policies": truth},
                "evaluation": ev.to_dict(),
                "table": table.to_dict(orient="records"),
            }
        )
        return EXIT_OK
    print(f"ope demo: bundled sample {sample.path.name} (exact truth from datasets/README.md)")
    print(str(logs.report))
    print()
    print(ev.summary(truth=truth))
    print(f"\ntrue value of the logging policy: {sample.truth['logging']:.4f}")
    print()
    _demo_coverage_gaps(logs, reward_range)
    print()
    _demo_learning()
    return EXIT_OK


def _demo_coverage_gaps(logs: Any, reward_range: tuple[float, ...]) -> None:
    """Where the sample's logs cannot answer: segment gaps and a verdict per candidate."""
    from ope.diagnostics import diagnose

    d = diagnose(logs, by=["segment"], max_weight=DEMO_MAX_WEIGHT, reward_range=reward_range)
    print(f"coverage gaps (ope diagnose --by segment --max-weight {DEMO_MAX_WEIGHT:g}):")
    table = d.table()
    segments = d.segments()
    for row in table.itertuples(index=False):
        print(
            f"  {row.policy:<13} ESS/n {row.ess_ratio:6.3f}   "
            f"{row.verdict_coverage_share:4.0%} of its narrowest interval (clip "
            f"{row.verdict_max_weight:g}) is coverage, not sampling -> {row.verdict}"
        )
        for gap in segments[(segments.policy == row.policy) & segments.gap].itertuples(index=False):
            print(f"      gap: {gap.reason}")


#: rows of the simulated logs the demo learns a policy from
DEMO_LEARN_ROWS: Final = 20_000


def _demo_learning() -> None:
    """Learn a policy conservatively on simulated logs and certify it; show its exact value."""
    import numpy as np

    from ope.io import read_logs
    from ope.learning import learn_from_logs
    from ope.simulate import ContextualBandit

    env = ContextualBandit(n_actions=5, seed=3)
    logs = read_logs(env.sample(DEMO_LEARN_ROWS, rng=1))
    columns = [c for c in logs.columns if c.startswith("x")]
    learner, cert = learn_from_logs(logs, context_columns=columns, rng=0)
    true_value = env.true_value(learner.predict_proba(np.asarray(env.context_features)))
    print(
        f"policy learning: a conservative policy learned on {DEMO_LEARN_ROWS:,} simulated bandit "
        "logs (ope.simulate.ContextualBandit), certified on held-out rows"
    )
    print(str(cert))
    print(
        f"  exact value of the learned policy: {true_value:.4f}; "
        f"of the logging policy: {env.true_value('logging'):.4f}"
    )


_COMMANDS = {
    "validate": _cmd_validate,
    "evaluate": _cmd_evaluate,
    "diagnose": _cmd_diagnose,
    "learn": _cmd_learn,
    "paired": _cmd_paired,
    "import": _cmd_import,
    "demo": _cmd_demo,
}


def _show_warning(message: Any, category: type[Warning], *_: Any, **__: Any) -> None:
    print(f"warning ({category.__name__}): {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ope`` command line; returns the exit code.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments after ``ope`` (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        0 ok, 1 runtime failure, 2 usage error (the flag named), 65 invalid data.

    Examples
    --------
    >>> import json, os, tempfile, contextlib, io
    >>> import pandas as pd
    >>> from ope.cli import main
    >>> path = os.path.join(tempfile.mkdtemp(), "replays.parquet")
    >>> pd.DataFrame({"pair_id": [0, 0, 1, 1, 2, 2], "arm": ["mem", "none"] * 3,
    ...               "outcome": [1.0, 0.0, 1.0, 1.0, 1.0, 0.0]}).to_parquet(path)
    >>> out = io.StringIO()
    >>> with contextlib.redirect_stdout(out):
    ...     code = main(["paired", path, "--treated", "mem", "--control", "none", "--json"])
    >>> code, round(json.loads(out.getvalue())["rows"][0]["value"], 4)
    (0, 0.6667)
    >>> err = io.StringIO()
    >>> with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
    ...     code = main(["paired", path, "--treated", "memory", "--control", "none"])
    >>> code, "argument --treated: arm 'memory' is not in the replays" in err.getvalue()
    (2, True)
    """
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        warnings.showwarning = _show_warning
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    try:
        return _COMMANDS[args.command](args)
    except (_UsageError, ParameterError, MissingBoundsError) as exc:
        # a missing a priori bound is a missing flag (--reward-range, --weight-bound): usage
        flag = _flag_of(exc) if isinstance(exc, ParameterError) else None
        message = f"argument {flag}: {exc}" if flag else str(exc)
        parser.print_usage(sys.stderr)
        return _fail(args, EXIT_USAGE, f"ope {args.command}: error: {message}", "usage", message)
    except (SchemaError, DataFileError, ValidationError, PolicyError) as exc:
        return _fail(args, EXIT_DATAERR, f"ope {args.command}: {type(exc).__name__}: {exc}",
                     type(exc).__name__, str(exc))
    except OPEError as exc:
        return _fail(args, EXIT_FAILURE, f"ope {args.command}: {type(exc).__name__}: {exc}",
                     type(exc).__name__, str(exc))
    except Exception as exc:  # noqa: BLE001 - the CLI reports every failure as exit code 1
        return _fail(args, EXIT_FAILURE, f"ope {args.command}: unexpected {type(exc).__name__}: {exc}",
                     type(exc).__name__, str(exc))


def _fail(args: argparse.Namespace, code: int, line: str, kind: str, message: str) -> int:
    """Report a failure on stderr (and, under --json, as the one JSON document); return ``code``."""
    _err(line)
    if getattr(args, "json", False):
        _emit_json({"ok": False, "exit_code": code, "error": {"type": kind, "message": message}})
    return code


def _entry() -> None:  # pragma: no cover - exercised through the console script
    raise SystemExit(main())


if __name__ == "__main__":  # pragma: no cover
    _entry()
