"""Coverage of the bounded trajectory intervals (Hoeffding, Bernstein, betting for IS/PDIS).

Runs the exact-truth study of ``tests/test_sequential_bounded.py`` at its full size: on
``TabularMDP(n_states=4, n_actions=2, horizon=4, gamma=0.9, seed=3)`` with the candidate half
logging, half softmax, the coverage (and mean width) of each method for ``is`` and ``pdis``,
clipped at 2 or not, at 30 episodes (1,000 replications) and 1,000 episodes (300 replications),
against the exact value (dynamic programming) or the exact clipped value (enumeration).

Usage::

    python benchmarks/coverage_sequential.py      # about 10 s
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from test_sequential_bounded import CLIP, _coverage, _env, _exact_values  # noqa: E402


def main() -> None:
    warnings.simplefilter("ignore")
    env = _env()
    print("truth", env.true_value("mix"), "clipped", _exact_values(env, "mix", CLIP))
    for n, reps, seed in [(30, 1000, 11), (1000, 300, 12)]:
        start = time.time()
        cov = _coverage(n, reps, seed)
        print(f"n={n} episodes, {reps} replications ({time.time() - start:.1f}s)")
        for est in ("is", "pdis"):
            for clipped in (False, True):
                label = est + (" clipped" if clipped else "")
                cells = "  ".join(
                    f"{m}={cov[(est, clipped, m)][0]:.3f} (w {cov[(est, clipped, m)][1]:.3f})"
                    for m in ("hoeffding", "bernstein", "betting")
                )
                print(f"  {label:<13} {cells}")


if __name__ == "__main__":
    main()
