"""The ``ope`` command line: a thin edge over the public API.

It parses arguments, calls public functions, prints, and sets exit codes (DESIGN.md §4). It does
no statistics of its own.

Exit codes: 0 ok, 1 runtime failure, 2 usage error, 65 invalid data (with the rejection report).
``--json`` prints exactly one JSON document on stdout; progress and logs go to stderr.
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

from ope.exceptions import DataFileError, OPEError, ParameterError, SchemaError, ValidationError

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
}


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
    p.add_argument("--on-invalid", choices=("raise", "drop"), default="raise")

    p = sub.add_parser("evaluate", help="estimate candidate policies' values with intervals")
    _add_common(p)
    _add_evaluate_options(p)

    p = sub.add_parser(
        "diagnose", help="overlap diagnostics: ESS, weight tails, support and segment gaps, plan"
    )
    _add_common(p)
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
        help="estimators: dm ips clipped_ips snips dr sndr switch_dr dros (default: ips snips)",
    )
    p.add_argument("--ci", default="normal", metavar="METHOD", help="interval method (default normal)")
    p.add_argument("--confidence-level", type=float, default=0.95)
    p.add_argument("--reward-range", nargs=2, type=float, metavar=("LO", "HI"))
    p.add_argument("--max-weight", type=float, help="clip level for clipped_ips (a priori bound)")
    p.add_argument(
        "--weight-bound",
        type=float,
        help="a priori bound on pi_e/pi_b for hoeffding, bernstein and empirical_likelihood "
        "intervals of ips/snips (e.g. 1 / the smallest logging probability)",
    )
    p.add_argument(
        "--context-columns",
        nargs="+",
        metavar="COLUMN",
        help="context features for the reward model of dm/dr (default: numeric x* columns)",
    )
    p.add_argument("--on-invalid", choices=("raise", "drop"), default="raise")
    p.add_argument(
        "--by",
        nargs="+",
        metavar="COLUMN",
        help="segment columns for the coverage-gap report (numeric ones are binned)",
    )


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


def _read_or_report(args: argparse.Namespace) -> Any:
    """Read and validate the logs; on invalid data print the report and return None."""
    from ope.io import read_logs

    mapping = _parse_mapping(args.mapping)
    try:
        return read_logs(args.logs, mapping=mapping, on_invalid=args.on_invalid)
    except ValidationError as exc:
        if args.json:
            _emit_json({"valid": False, "report": exc.report.to_dict() if exc.report else None})
        else:
            print(str(exc))
        return None


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
    logs = _read_or_report(args)
    if logs is None:
        return EXIT_DATAERR
    ev = _evaluate_from_args(args, logs)
    d = _diagnose_from_args(args, logs)
    return _output(args, {**ev.to_dict(), "diagnostics": d.to_dict()}, ev.summary(), d.summary())


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
            f"{row.coverage_share:4.0%} of its interval is coverage, not sampling -> {row.verdict}"
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
    "demo": _cmd_demo,
}


def _show_warning(message: Any, category: type[Warning], *_: Any, **__: Any) -> None:
    print(f"warning ({category.__name__}): {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ope`` command line; returns the exit code."""
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
    except (_UsageError, ParameterError) as exc:
        flag = _flag_of(exc) if isinstance(exc, ParameterError) else None
        message = f"argument {flag}: {exc}" if flag else str(exc)
        parser.print_usage(sys.stderr)
        return _fail(args, EXIT_USAGE, f"ope {args.command}: error: {message}", "usage", message)
    except (SchemaError, DataFileError, ValidationError) as exc:
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
