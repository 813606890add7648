"""Family-wise error and power of ``ope.guardrail_decision`` (a primary outcome that must
improve and guardrails that must not worsen beyond a margin) against exact truth.

Usage::

    python benchmarks/guardrails.py                     # 1,000 replications per design
    python benchmarks/guardrails.py --replications 200
    python benchmarks/guardrails.py --quick

Logs: ``ope.simulate.ContextualBandit(n_actions=5, n_contexts=50, seed=0)`` gives contexts,
the logger's actions and two candidates (``softmax``, ``epsilon_greedy``). Three outcomes are
drawn per row from the logged action: ``y_k = mu_k[action] + N(0, 1)``. With
``d_c(a) = sum_m p_m (pi_c(a|m) - pi_0(a|m))`` the exact difference of outcome ``k`` between
candidate ``c`` and the logger is ``d_c . mu_k``. The designs choose ``mu_k``:

* ``null on every claim``: each ``mu_k`` orthogonal to both ``d_c`` (every difference is 0),
  margins 0: every claim sits on its null's boundary, so any approval is a false one;
* ``guardrails at their margins``: the primary improves by 0.1 (both candidates), the two
  guardrails' differences are exactly their margins (0.05, 0.1): approvals are false;
* ``one guardrail at its margin``: the same, but the second guardrail is 0.05 inside its margin
  (one false claim among true ones: the least favourable case of the intersection-union test,
  where its error can reach alpha);
* ``every claim true``: the primary improves by 0.1, the guardrails are 0.05 below their
  margins (power).

Reported: the share of replications in which any candidate is approved (family-wise error in
the first three designs, power in the last), with Holm over candidates and without, beside a
naive rule (the primary's one-sided test, and each guardrail's point estimate within its
margin). n = 5,000 rows, SNIPS, one-sided alpha = 0.05. Writes
``benchmarks/results/guardrails.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import format_table, write_result  # noqa: E402

CANDIDATES = ("softmax", "epsilon_greedy")
MARGINS = (0.05, 0.1)


def _means(env: Any, design: str) -> list[np.ndarray]:
    """The per-action means of the primary and the two guardrails for ``design``."""
    p0 = env.policy_table("logging")
    d = np.stack([env._probs @ (env.policy_table(c) - p0) for c in CANDIDATES])  # (2, K)
    basis = np.linalg.svd(d)[2]  # rows 2.. span the complement of both differences
    free = basis[2:]
    g = np.random.default_rng(7)

    def with_differences(targets: np.ndarray) -> np.ndarray:
        # mu with d_c . mu = targets[c], plus a random part orthogonal to both
        particular = np.linalg.lstsq(d, targets, rcond=None)[0]
        return particular + free.T @ g.normal(0, 0.5, free.shape[0]) + 1.0

    if design == "null on every claim":
        return [with_differences(np.zeros(2)) for _ in range(3)]
    primary = with_differences(np.full(2, 0.1))
    shifts = {
        "guardrails at their margins": (0.0, 0.0),
        "one guardrail at its margin": (0.0, -0.05),
        "every claim true": (-0.05, -0.05),
    }[design]
    rails = [with_differences(np.full(2, m + shift)) for m, shift in zip(MARGINS, shifts)]
    return [primary, *rails]


def run_design(design: str, n: int, reps: int) -> dict[str, Any]:
    import ope
    from ope.simulate import ContextualBandit

    env = ContextualBandit(n_actions=5, n_contexts=50, seed=0)
    means = _means(env, design)
    margins = (0.0, 0.0) if design == "null on every claim" else MARGINS
    rails = [f"g{j}:lower:{m}" for j, m in enumerate(margins, 1)]
    counts = {"holm": 0, "none": 0, "naive": 0}
    for rep in range(reps):  # a loop over replications
        table = env.sample(n, rng=rep).to_pandas()
        table = table[["event_id", "action", "propensity", *(f"target__{c}" for c in CANDIDATES)]]
        g = np.random.default_rng(10_000 + rep)
        a = table["action"].to_numpy()
        table["reward"] = means[0][a] + g.standard_normal(n)
        for j in (1, 2):  # guardrails where lower is better (latency-like)
            table[f"g{j}"] = means[j][a] + g.standard_normal(n)
        logs = ope.read_logs(table)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for how in ("holm", "none"):
                d = ope.guardrail_decision(logs, guardrails=rails, correction=how)
                counts[how] += bool(d.approved)
            claims = d.claims()
        naive = False
        for c in CANDIDATES:  # the naive rule: primary tested, guardrails by point estimate
            mine = claims[claims["policy"] == c]
            primary_ok = bool(mine.loc[mine["role"] == "primary", "shown"].iloc[0])
            rails_ok = all(
                diff <= m
                for diff, m in zip(mine.loc[mine["role"] == "guardrail", "difference"], margins)
            )
            naive |= primary_ok and rails_ok
        counts["naive"] += naive
    return {
        "design": design,
        "n": n,
        "replications": reps,
        "share_approving_any": {k: v / reps for k, v in counts.items()},
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 replications")
    parser.add_argument("--replications", type=int, default=1000)
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    reps = 5 if args.quick else args.replications
    designs = (
        "null on every claim",
        "guardrails at their margins",
        "one guardrail at its margin",
        "every claim true",
    )
    rows = [run_design(d, args.n, reps) for d in designs]
    result = {"rows": rows, "seconds": time.perf_counter() - started}
    table = [
        [
            r["design"],
            f"{r['share_approving_any']['holm']:.3f}",
            f"{r['share_approving_any']['none']:.3f}",
            f"{r['share_approving_any']['naive']:.3f}",
        ]
        for r in rows
    ]
    print(f"share of {reps} replications approving any candidate (n = {args.n:,}, alpha 0.05)")
    print(format_table(["design", "holm", "no correction", "naive rule"], table))
    path = write_result("guardrails" + ("_quick" if args.quick else ""), result, out=args.out)
    print(f"wrote {path} ({result['seconds']:.0f} s)")
    return result


if __name__ == "__main__":
    main()
