"""Run a benchmark script against the ``ope`` package of another checkout (e.g. an old commit).

The development install is editable, and its import hook would load the working tree's ``ope``
whatever ``sys.path`` says; this removes the hook, puts TREE first on ``sys.path`` and runs the
script, so before/after figures come from the same script in the same session::

    git worktree add /tmp/before 589f417
    python benchmarks/with_tree.py /tmp/before benchmarks/bench_evaluate.py --rows 10000000 \\
        --skip-obp --skip-memory --bootstrap-rounds 1
    python benchmarks/with_tree.py . benchmarks/bench_evaluate.py --rows 10000000 \\
        --skip-obp --skip-memory --bootstrap-rounds 1
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path


def main() -> None:
    if len(sys.argv) < 3:
        raise SystemExit("usage: python benchmarks/with_tree.py TREE SCRIPT [ARGS ...]")
    tree, script = sys.argv[1], sys.argv[2]
    sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
    for name in [m for m in sys.modules if m == "ope" or m.startswith("ope.")]:
        del sys.modules[name]
    sys.path.insert(0, str(Path(tree).resolve()))
    sys.path.insert(0, str(Path(script).resolve().parent))
    sys.argv = sys.argv[2:]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
