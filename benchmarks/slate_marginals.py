"""Plackett-Luce rankings beyond enumeration: the race marginals against the exact ones, and the
coverage of independent IPS when they are used.

Design: 14 items in 5 slots (240,240 ordered slates, above ``MAX_ENUMERATED_SLATES``), 3
contexts; the logger's and the candidate's scores are standard normal times 1.5. The exact
marginals come from enumerating every slate (this script raises the module's limit for that
only). Two Monte-Carlo estimates of the candidate's marginals with the same number of draws
(``--draws``, default 20,000):

* counting: the share of draws (Gumbel top-k) that put the item at the slot (what ope did
  before);
* race: ope's Rao-Blackwellized exponential race (:class:`ope.slates.PlackettLuce`).

Reported: their relative error at marginals in [5e-4, 2e-3] (largest and median over the
cells, one set of draws), and the race's z-scores against the exact values.

Coverage: ``--replications`` (default 300) replications of ``--n`` (2,000) slates logged by
the logger with additive rewards ``r_k = mu(item, k) + N(0, 0.5^2)`` (independent IPS is
unbiased for them); the truth is ``sum_c p(c) sum_k sum_a pi(a at k | c) mu(a, k)`` from the
exact marginals. Independent IPS with the logger's exact marginals and the candidate's: exact;
race with the error bound added to the standard error (ope's default); race with the rows'
standard error only. The share of 95% normal intervals covering the truth, the mean half-width
and the mean share of the standard error that the bound adds.

Run: ``python benchmarks/slate_marginals.py`` (about 2 minutes on 2 workers; ``--quick``).
Writes ``benchmarks/results/slate_marginals.json``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import format_table, write_result  # noqa: E402

N_ITEMS, SLOTS, CONTEXTS = 14, 5, 3
Z = 1.959963984540054


def design() -> dict[str, Any]:
    g = np.random.default_rng(0)
    return {
        "logger": 1.5 * g.normal(size=(CONTEXTS, N_ITEMS)),
        "candidate": 1.5 * g.normal(size=(CONTEXTS, N_ITEMS)),
        "mu": g.uniform(0.0, 1.0, size=(N_ITEMS, SLOTS)) / (1.0 + np.arange(SLOTS)),
    }


def exact_marginals(scores: np.ndarray) -> np.ndarray:
    from ope import slates as S

    limit = S.MAX_ENUMERATED_SLATES
    S.MAX_ENUMERATED_SLATES = 10**7  # this script's exact reference only
    try:
        return S.PlackettLuce(scores, SLOTS).marginals()
    finally:
        S.MAX_ENUMERATED_SLATES = limit


def counting_marginals(scores: np.ndarray, draws: int, rng: np.random.Generator) -> np.ndarray:
    from ope.slates import PlackettLuce

    pol = PlackettLuce(scores, SLOTS)
    out = np.zeros((CONTEXTS, SLOTS, N_ITEMS))
    for c in range(CONTEXTS):  # loop over contexts
        top = pol.sample(np.full(draws, c), rng=rng)
        for k in range(SLOTS):  # loop over slots
            out[c, k] = np.bincount(top[:, k], minlength=N_ITEMS) / draws
    return out


def one_replication(args: tuple[int, int, int]) -> dict[str, Any]:
    import ope.slates as S

    rep, n, draws = args
    d = design()
    exact_t = exact_marginals(d["candidate"])
    exact_0 = exact_marginals(d["logger"])
    g = np.random.default_rng((7, rep))
    logger = S.PlackettLuce(d["logger"], SLOTS)
    ctx = g.integers(0, CONTEXTS, n)
    items = logger.sample(ctx, rng=g)
    slots = np.arange(SLOTS)
    reward = d["mu"][items, slots] + g.normal(0.0, 0.5, size=(n, SLOTS))
    logs = S.slate_logs(
        {
            "slate_id": np.arange(n),
            "context": ctx,
            "item": items.tolist(),
            "reward": reward.tolist(),
            "propensity": exact_0[ctx[:, None], slots, items].tolist(),
        }
    )
    truth = float(np.mean([np.sum(exact_t[c] * d["mu"].T) for c in range(CONTEXTS)]))
    race = S.PlackettLuce(d["candidate"], SLOTS, n_samples=draws, rng=g)
    out: dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exact = S.IndependentIPS().estimate(
            logs, S.SlateProbabilities(marginal=exact_t[ctx[:, None], slots, items])
        )
        with_bound = S.IndependentIPS().estimate(logs, race)
        probs = race.slate_probabilities(logs).with_marginals()
        rows_only = S.IndependentIPS().estimate(logs, S.SlateProbabilities(marginal=probs.marginal))
    for name, est in (
        ("exact", exact),
        ("race + bound", with_bound),
        ("race, rows only", rows_only),
    ):
        out[name] = {
            "value": est.value,
            "se": est.std_error,
            "covers": abs(est.value - truth) <= Z * est.std_error,
        }
    out["bound share"] = with_bound.std_error / rows_only.std_error - 1.0
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replications", type=int, default=300)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--draws", type=int, default=20_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.replications = 20
    start = time.time()
    from ope.slates import PlackettLuce

    d = design()
    exact = exact_marginals(d["candidate"])
    counted = counting_marginals(d["candidate"], args.draws, np.random.default_rng(1))
    race = PlackettLuce(d["candidate"], SLOTS, n_samples=args.draws, rng=2)
    cells = (exact >= 5e-4) & (exact <= 2e-3)
    rel_count = np.abs(counted - exact)[cells] / exact[cells]
    rel_race = np.abs(race.marginals() - exact)[cells] / exact[cells]
    z = (race.marginals() - exact) / (race.marginal_standard_errors() + 1.0 / args.draws)
    print(
        f"candidate marginals of 14 items in 5 slots ({race.n_slates:,} ordered slates), "
        f"{args.draws:,} draws per context; {int(cells.sum())} cells with a marginal in "
        "[5e-4, 2e-3]"
    )
    print(
        format_table(
            ["estimate", "largest relative error", "median relative error"],
            [
                ["counting draws", f"{rel_count.max():.3f}", f"{np.median(rel_count):.3f}"],
                ["race (ope)", f"{rel_race.max():.3f}", f"{np.median(rel_race):.3f}"],
            ],
        )
    )
    print(f"race z-scores against the exact marginals: largest |z| {np.abs(z).max():.2f}")
    with ProcessPoolExecutor(args.workers) as pool:
        reps = list(
            pool.map(one_replication, [(r, args.n, args.draws) for r in range(args.replications)])
        )
    rows = []
    summary: dict[str, Any] = {}
    for name in ("exact", "race + bound", "race, rows only"):
        cover = float(np.mean([r[name]["covers"] for r in reps]))
        half = float(np.mean([Z * r[name]["se"] for r in reps]))
        summary[name] = {"coverage": cover, "half_width": half}
        mc_se = math.sqrt(cover * (1 - cover) / len(reps))
        rows.append([name, f"{cover:.3f} ({mc_se:.3f})", f"{half:.4f}"])
    share = float(np.mean([r["bound share"] for r in reps]))
    print(
        f"\nindependent IPS, {args.replications} replications of {args.n:,} slates, 95% normal "
        "intervals"
    )
    print(format_table(["candidate marginals", "coverage (MC se)", "mean half-width"], rows))
    print(f"the bound adds {share:.1%} to the standard error on average")
    seconds = time.time() - start
    result = {
        "draws": args.draws,
        "n": args.n,
        "replications": args.replications,
        "relative_error": {
            "counting": {"max": float(rel_count.max()), "median": float(np.median(rel_count))},
            "race": {"max": float(rel_race.max()), "median": float(np.median(rel_race))},
        },
        "race_max_abs_z": float(np.abs(z).max()),
        "coverage": summary,
        "bound_share": share,
        "seconds": seconds,
    }
    path = write_result("slate_marginals" + ("_quick" if args.quick else ""), result)
    print(f"wrote {path} ({seconds:.0f} s)")
    return result


if __name__ == "__main__":
    main()
