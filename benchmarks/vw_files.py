"""Import Vowpal Wabbit's own JSON test files and compare with what VW reads from them.

For every ``*.json`` / ``*.dsjson`` file of a VW ``test/train-sets`` directory this prints one
row: the file, the kind ope finds (``cb``, ``ccb``, or the kind it refuses), its non-blank lines,
the rows ope imports (``on_invalid="drop"``), the rejections by reason, and whether ope reads the
file as VW does. VW's side comes from its own test suite: the ``core.vwtest.json`` beside the
directory names the commands that read each file with ``--dsjson``, and their reference
``stderr`` (``train-sets/ref``, ``test-sets/ref``) gives ``number of examples`` and ``weighted
example sum``. ope "reads it as VW" when the events it keeps or rejects only for its own rules
(the events VW counts: lines VW neither refuses nor skips) equal VW's ``number of examples``,
and the sum of their weights (``1/(1-pdrop)``) equals VW's weighted sum. Files VW's tests read
only with ``--json`` (not DSJSON) have no such reference (``n/a``).

Usage::

    python benchmarks/vw_files.py DIR                 # DIR = .../vowpal_wabbit/test/train-sets
    python benchmarks/vw_files.py --git REPO          # a bare clone: files read with `git show`
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

from ope.exceptions import OPEError
from ope.importers import read_dsjson

#: Reasons of lines VW's --dsjson reader refuses or skips (it does not count them as examples).
#: ``dsjson_pdrop_out_of_range`` is VW's pdrop == 1; ``dsjson_unlabeled``, the schema rules and
#: ``event_id_duplicate`` are ope's own rules on events VW does count.
VW_SKIPS = frozenset(
    {
        "dsjson_bad_json",
        "dsjson_field_type",
        "dsjson_line_too_long",
        "dsjson_not_object",
        "dsjson_pdrop_out_of_range",
        "dsjson_skip_learn",
        "dsjson_no_actions",
        "dsjson_label_index_out_of_range",
        "dsjson_outcome_malformed",
        "dsjson_kind_mismatch",
    }
)

_EXAMPLES = re.compile(r"number of examples = (\d+)")
_WEIGHT = re.compile(r"weighted example sum = ([0-9.]+)")


def _extract(repo: str, into: Path) -> Path:
    """The test files of a bare VW clone, written under ``into`` (``test/...``)."""
    names = subprocess.run(
        ["git", "-C", repo, "ls-tree", "-r", "--name-only", "HEAD", "test/"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    wanted = [
        n
        for n in names
        if re.fullmatch(r"test/train-sets/[^/]+\.(json|dsjson)", n)
        or n.endswith(".stderr")
        and "/ref/" in n
        or n == "test/core.vwtest.json"
    ]
    for n in wanted:
        data = subprocess.run(
            ["git", "-C", repo, "show", f"HEAD:{n}"], check=True, capture_output=True
        ).stdout
        (into / n).parent.mkdir(parents=True, exist_ok=True)
        (into / n).write_bytes(data)
    return into / "test" / "train-sets"


def vw_reference(train_sets: Path) -> dict[tuple[str, ...], list[tuple[int, float, str]]]:
    """(file name,) -> [(number of examples, weighted sum, test id)] of VW's --dsjson runs."""
    spec = train_sets.parent / "core.vwtest.json"
    if not spec.exists():
        return {}
    out: dict[tuple[str, ...], list[tuple[int, float, str]]] = {}
    for test in json.loads(spec.read_text()):
        cmd = test.get("vw_command") or test.get("bash_command") or ""
        files = re.findall(r"train-sets/([\w.]+\.(?:json|dsjson))", cmd)
        if "--dsjson" not in cmd or len(set(files)) != 1:  # several files: VW's CLI, not its reader
            continue
        for ref in (test.get("diff_files") or {}).values():
            if not str(ref).endswith(".stderr"):
                continue
            path = train_sets.parent / ref
            if not path.exists():
                continue
            text = path.read_text(errors="replace")
            n, w = _EXAMPLES.search(text), _WEIGHT.search(text)
            if n and w:
                out.setdefault(tuple(sorted(set(files))), []).append(
                    (int(n.group(1)), float(w.group(1)), str(test.get("id")))
                )
    return out


def one_file(path: Path) -> dict[str, object]:
    nonblank = sum(1 for line in path.read_bytes().split(b"\n") if line.strip())
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            logs = read_dsjson(path, on_invalid="drop")
    except OPEError as exc:
        report = getattr(exc, "report", None)
        if report is not None:  # every row rejected: the report still counts them
            refused = sum(v for k, v in report.rejected.items() if k in VW_SKIPS)
            return {
                "kind": "- (no row left)",
                "lines": nonblank,
                "rows": 0,
                "rejected": dict(report.rejected),
                "events": nonblank - refused,
                "weight": 0.0,
                "own": 0,
            }
        kind = str(exc).split(" (line")[0].split(":")[0]
        refused = {
            "continuous": "continuous (refused)",
            "slates": "slates (refused)",
            "plain JSON": "VW --json (refused)",
        }
        label = next((v for k, v in refused.items() if k in kind), type(exc).__name__)
        return {
            "kind": label,
            "lines": nonblank,
            "rows": 0,
            "rejected": {},
            "events": 0,
            "weight": 0.0,
            "own": 0,
        }
    r = logs.report
    kind = logs.table.schema.metadata.get(b"ope.dsjson_kind", b"").decode()
    refused = sum(v for k, v in r.rejected.items() if k in VW_SKIPS)
    t = logs.table
    # one weight per event: CB rows are events, CCB rows share their line's weight
    ids = (
        t.column("slate_id").to_pylist()
        if "slate_id" in t.column_names
        else t.column("event_id").to_pylist()
    )
    weights = dict(zip(ids, t.column("weight").to_pylist()))
    return {
        "kind": kind,
        "lines": nonblank,
        "rows": logs.n,
        "rejected": dict(r.rejected),
        "events": nonblank - refused,
        "weight": float(np.sum(list(weights.values()))),
        "own": sum(v for k, v in r.rejected.items() if k not in VW_SKIPS),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", nargs="?", help="a VW test/train-sets directory")
    ap.add_argument("--git", help="a (bare) VW clone to read the test files from instead")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        if args.git:
            train_sets = _extract(args.git, Path(tmp))
        elif args.dir:
            train_sets = Path(args.dir)
        else:
            ap.error("give DIR or --git REPO")
        refs = vw_reference(train_sets)
        files = sorted(p for p in train_sets.iterdir() if p.suffix in (".json", ".dsjson"))
        print(
            "| file | ope kind | lines | rows | rejected (ope) | VW examples (weight) | "
            "ope events (weight) | as VW reads it |"
        )
        print("|---|---|---|---|---|---|---|---|")
        agree = judged = 0
        for path in files:
            row = one_file(path)
            vw = refs.get((path.name,))
            if vw:
                n_vw, w_vw, _ = vw[0]
                same_w = abs(row["weight"] - w_vw) <= 1e-3 * max(1.0, w_vw)
                same = row["events"] == n_vw and (same_w or row["own"] > 0)
                verdict = "yes" if same else "NO"
                if same and not same_w:
                    verdict += " (weights differ only by the rows ope's own rules reject)"
                if same and "refused" in str(row["kind"]):
                    verdict += " (VW reads no example; ope refuses the kind)"
                judged += 1
                agree += same
                vw_text = f"{n_vw} ({w_vw:g})"
            else:
                verdict, vw_text = "n/a (no single-file --dsjson run)", "-"
            rejected = ", ".join(f"{k} {v}" for k, v in sorted(row["rejected"].items())) or "-"
            print(
                f"| {path.name} | {row['kind']} | {row['lines']} | {row['rows']} | {rejected} "
                f"| {vw_text} | {row['events']} ({row['weight']:g}) | {verdict} |"
            )
        print(f"\n{agree} of {judged} files with a VW --dsjson reference read as VW reads them.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
