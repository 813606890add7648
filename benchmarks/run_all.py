"""Run every benchmark script, collect their JSON results, and print one summary table.

Each script (``benchmarks/bench_*.py`` and ``benchmarks/coverage_bandit.py``) runs in its own fresh
interpreter, which imports it and calls its ``main(argv)``: one script's memory, warnings or
crash cannot affect the next one, and peak-memory figures stay each script's own. A script that
fails is reported with the end of its error output and the others still run.

``--quick`` passes each script's small-size flags (:data:`QUICK_ARGS`; ``--quick`` for scripts
that accept it). Quick results go to ``benchmarks/results/quick/`` and the full-size results
already in ``benchmarks/results/`` are left as they were.

Usage::

    python benchmarks/run_all.py --quick            # smoke run of everything, a few minutes
    python benchmarks/run_all.py                    # full sizes (long)
    python benchmarks/run_all.py --only bench_io bench_evaluate
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import HERE, RESULTS_DIR, format_table, machine_info  # noqa: E402

#: Small-size arguments of the scripts that have no ``--quick`` flag of their own (and of those
#: that do, for clarity). Scripts not listed get ``--quick`` when their source defines it.
QUICK_ARGS: Final[dict[str, list[str]]] = {
    "bench_evaluate": ["--quick"],
    "bench_io": ["--rows", "200000", "--repeat", "1"],
    "bench_policy_join": ["--events", "20000", "--repeats", "1"],
    "bench_diagnostics": ["--rows", "200000", "--repeat", "1"],
    "bench_learning": ["--quick"],
    "bench_selection": ["--quick"],
    "coverage": ["--quick"],
}

#: Seconds a quick run of one script may take before it is stopped and reported as failed.
QUICK_TIMEOUT_S: Final = 600.0
#: Lines of a failed script's stderr kept in the report.
ERROR_TAIL_LINES: Final = 25
#: Headline numbers shown per script in the summary table.
HEADLINE_ITEMS: Final = 4

_RUNNER: Final = r"""
import importlib.util, json, sys
path, argv = sys.argv[1], json.loads(sys.argv[2])
sys.path.insert(0, sys.argv[3])
spec = importlib.util.spec_from_file_location(path.rsplit("/", 1)[-1][:-3], path)
module = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = module
spec.loader.exec_module(module)
returned = module.main(argv)
try:
    text = json.dumps(returned, default=str)
except (TypeError, ValueError):
    text = json.dumps(repr(returned))
print("\n__RUN_ALL_RETURN__" + text)
"""


def discover() -> list[Path]:
    """The benchmark scripts, in a fixed order."""
    scripts = sorted(HERE.glob("bench_*.py"))
    coverage = HERE / "coverage_bandit.py"
    if coverage.exists():
        scripts.append(coverage)
    return scripts


def script_args(path: Path, quick: bool) -> list[str] | None:
    """Arguments for one script; None when quick settings for it are unknown."""
    if not quick:
        return []
    name = path.stem
    if name in QUICK_ARGS:
        return list(QUICK_ARGS[name])
    if '"--quick"' in path.read_text():
        return ["--quick"]
    return None


def _own_results(stem: str) -> list[Path]:
    """The script's own result files: ``results/<stem>.json`` and ``results/<stem>_*.json``.

    Only these are attributed to (and, in quick mode, restored after) a script: other people
    may write other results into the same directory while the benchmarks run.
    """
    if not RESULTS_DIR.exists():
        return []
    return sorted(
        p for p in RESULTS_DIR.glob("*.json") if p.stem == stem or p.stem.startswith(stem + "_")
    )


def _snapshot(stem: str) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in _own_results(stem)}


def _changed_results(stem: str, before: dict[Path, bytes], quick: bool) -> dict[str, Any]:
    """Result files the script wrote; in quick mode moved to results/quick/, originals restored."""
    out: dict[str, Any] = {}
    for path in _own_results(stem):
        data = path.read_bytes()
        if before.get(path) == data:
            continue
        try:
            out[path.name] = json.loads(data)
        except json.JSONDecodeError:
            out[path.name] = {"unreadable": True}
        if quick:
            target = RESULTS_DIR / "quick" / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            if path in before:
                path.write_bytes(before[path])
            else:
                path.unlink()
    return out


def run_script(
    path: Path, argv: list[str], *, timeout: float | None, quick: bool
) -> dict[str, Any]:
    """Run ``main(argv)`` of one script in a fresh interpreter."""
    before = _snapshot(path.stem)
    t0 = time.perf_counter()
    record: dict[str, Any] = {"script": path.name, "argv": argv}
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _RUNNER, str(path), json.dumps(argv), str(HERE)],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=HERE.parent,
        )
    except subprocess.TimeoutExpired as exc:
        record.update(
            status="failed",
            seconds=time.perf_counter() - t0,
            error=f"timed out after {exc.timeout:.0f} s",
            stdout=_text(exc.stdout),
        )
        record["results"] = _changed_results(path.stem, before, quick)
        return record
    record["seconds"] = time.perf_counter() - t0
    head, sep, tail = proc.stdout.rpartition("\n__RUN_ALL_RETURN__")
    stdout, returned = (head, tail) if sep else (proc.stdout, "")
    record["stdout"] = stdout
    record["results"] = _changed_results(path.stem, before, quick)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-ERROR_TAIL_LINES:])
        record.update(status="failed", error=f"exit code {proc.returncode}\n{tail}")
        return record
    record["status"] = "ok"
    try:
        record["returned"] = json.loads(returned) if returned else None
    except json.JSONDecodeError:
        record["returned"] = returned.strip()
    return record


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def headline(record: dict[str, Any]) -> str:
    """A few ratio-like numbers from a script's results (or its return value)."""
    sources = list(record.get("results", {}).values())
    if not sources and isinstance(record.get("returned"), dict):
        sources = [record["returned"]]
    found: list[str] = []

    def visit(obj: Any, prefix: str, depth: int) -> None:
        if len(found) >= HEADLINE_ITEMS or depth > 2 or not isinstance(obj, dict):
            return
        for key, value in obj.items():
            if len(found) >= HEADLINE_ITEMS:
                return
            name = f"{prefix}{key}"
            if isinstance(value, (int, float)) and not isinstance(value, bool) and "ratio" in name:
                if math.isfinite(value):
                    found.append(f"{name}={value:.3g}")
            elif isinstance(value, dict):
                visit(value, f"{name}.", depth + 1)

    for src in sources:
        visit(src, "", 0)
    return "; ".join(found)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes for every script")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these scripts")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per script")
    parser.add_argument("--list", action="store_true", help="list the scripts and exit")
    args = parser.parse_args(argv)

    scripts = discover()
    if args.only:
        wanted = {name.removesuffix(".py") for name in args.only}
        unknown = sorted(wanted - {p.stem for p in scripts})
        if unknown:
            parser.error(
                f"unknown script(s) {', '.join(unknown)}; known: "
                f"{', '.join(p.stem for p in scripts)}"
            )
        scripts = [p for p in scripts if p.stem in wanted]
    if args.list:
        for p in scripts:
            print(p.stem, " ".join(script_args(p, True) or ["(no quick settings)"]))
        return {"scripts": [p.stem for p in scripts], "failed": []}
    timeout = args.timeout
    if timeout is None and args.quick:
        timeout = QUICK_TIMEOUT_S

    records = []
    for path in scripts:
        argv_s = script_args(path, args.quick)
        if argv_s is None:
            records.append(
                {
                    "script": path.name,
                    "status": "skipped",
                    "seconds": 0.0,
                    "error": "no quick settings known: give it a --quick flag or add it to "
                    "run_all.QUICK_ARGS",
                }
            )
            print(f"== {path.stem}: skipped (no quick settings)", flush=True)
            continue
        print(f"== {path.stem} {' '.join(argv_s)}", flush=True)
        rec = run_script(path, argv_s, timeout=timeout, quick=args.quick)
        if rec.get("stdout"):
            print(rec["stdout"].rstrip(), flush=True)
        if rec["status"] != "ok":
            print(f"!! {path.stem} failed: {rec['error']}", flush=True)
        records.append(rec)

    rows = [
        [
            r["script"],
            r["status"],
            r["seconds"],
            headline(r) if r["status"] == "ok" else r.get("error", "").splitlines()[0],
        ]
        for r in records
    ]
    print()
    print(format_table(["script", "status", "seconds", "headline (ratios) / error"], rows))
    failed = [r for r in records if r["status"] == "failed"]
    for r in failed:
        print(f"\n{r['script']} failed:\n{r['error']}")
    summary = {
        "quick": args.quick,
        "machine": machine_info(),
        "scripts": [{k: v for k, v in r.items() if k != "stdout"} for r in records],
        "failed": [r["script"] for r in failed],
    }
    out = RESULTS_DIR / ("quick" if args.quick else "") / "run_all.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2, default=str) + "\n")
    print(f"\nwrote {out}")
    return summary


if __name__ == "__main__":
    sys.exit(1 if main()["failed"] else 0)
