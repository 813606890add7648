"""Language-model policies from token log-probabilities (ope.sequences) against the exact truth
of ope.simulate.TokenModel: bias, RMSE and coverage of the sequence-level estimators as the
response length grows, Schulman's KL estimators against the exact KL, and the log-probability
audit's detection rates.

Design: ``TokenModel(n_prompts=5, vocab_size=4, max_length=L, end_shift=-6, seed=0)`` (almost
every response runs to L tokens), L in 1, 5, 10, 12, 15, 20, 25, 50; 2,000 responses per replication; the
candidates ``cooler`` (the model at 0.7 times the temperature) and ``tuned`` (scores shifted
toward rewarding tokens), whose exact value and KL(logger || candidate) are DP sums. Per L and
candidate: IPS and SNIPS with normal 95% intervals (``weighting="sequence"``), SNIPS with
``weighting="length_normalized"`` (biased by design), DR with the exact reward model
(``oracle=True``: q and v exact) and with a constant model (the mean logged reward: a control
variate), the share of replications that
``sequence_divergences`` calls evaluable, the mean effective-sample share, and k1/k3 against the
exact KL (mean and coverage of +/- 1.96 SE).

The audit (2,000 responses, length at most 8): the share of replications with each verdict in
nine scenarios: clean logs, noise of SD 0.05 and of SD 1 on each reported log-probability,
top-p 0.8 with the trainer's untruncated recomputation as the on-policy candidate, top-p 0.8
with the engine reporting untruncated probabilities, temperature 0.7, 0.95 and 1.05 against a
trainer at 1, and temperature 1.5 reported at 1.

Run: ``python benchmarks/sequences.py`` (300 replications; ``--replications``, ``--quick``;
two worker processes, ``--workers``). Writes ``benchmarks/results/sequences.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import format_table, write_result  # noqa: E402

LENGTHS = (1, 5, 10, 12, 15, 20, 25, 50)
CANDIDATES = ("cooler", "tuned")
N = 2000
Z = 1.959963984540054
AUDIT_CASES: dict[str, tuple[dict[str, Any], str]] = {
    "clean": ({}, "sampler"),
    "noise SD 0.05 per token": ({"logprob_noise": 0.05}, "sampler"),
    "top-p 0.8, trainer untruncated": ({"top_p": 0.8}, "model"),
    "top-p 0.8, engine reports untruncated": ({"top_p": 0.8, "reported": "untruncated"}, "sampler"),
    "temperature 0.7, trainer at 1": ({"temperature": 0.7}, "model"),
    "temperature 1.5, reported at 1": ({"temperature": 1.5, "reported": "untruncated"}, "sampler"),
    "temperature 0.95, trainer at 1": ({"temperature": 0.95}, "model"),
    "temperature 1.05, trainer at 1": ({"temperature": 1.05}, "model"),
    "noise SD 1 per token": ({"logprob_noise": 1.0}, "sampler"),
}


def one_length(args: tuple[int, int]) -> list[dict[str, Any]]:
    import ope
    from ope.simulate import TokenModel

    length, reps = args
    env = TokenModel(max_length=length, end_shift=-6.0, seed=0)
    truth = {p: env.true_value(p) for p in CANDIDATES}
    kl = {p: env.kl("sampler", p) for p in CANDIDATES}
    keys = ("ips", "snips", "snips (length-normalized)", "dr (exact model)", "dr (constant model)")
    found: dict[tuple[str, str], list[tuple[float, float, float]]] = {
        (p, k): [] for p in CANDIDATES for k in keys
    }
    extra: dict[str, dict[str, list[float]]] = {
        p: {"evaluable": [], "ess_share": [], "k1": [], "k1_cover": [], "k3": [], "k3_cover": []}
        for p in CANDIDATES
    }
    for rep in range(reps):  # a loop over replications
        table = env.sample(N, rng=rep, oracle=True)
        mean = float(np.mean(table.column("reward").to_numpy()))
        constant = {"q_constant": np.full(N, mean)}
        constant.update({f"v_constant__{p}": np.full(N, mean) for p in CANDIDATES})
        for column, values in constant.items():  # a loop over the constant model's columns
            table = table.append_column(column, pa.array(values))
        seq = ope.read_sequences(table, policies=list(CANDIDATES))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ev = ope.evaluate_sequences(
                seq, estimators=["ips", "snips"], q_column="q_logged", v_column="v_target__{policy}"
            )
            cv = ope.evaluate_sequences(
                seq, estimators=["ips"], q_column="q_constant", v_column="v_constant__{policy}"
            )
            ln = ope.evaluate_sequences(seq, estimators=["snips"], weighting="length_normalized")
            div = ope.sequence_divergences(seq).table().set_index("policy")
        for p in CANDIDATES:  # a loop over the two candidates
            pairs = ((ev, "ips"), (ev, "snips"), (ln, "snips"), (ev, "dr"), (cv, "dr"))
            for key, (res, est) in zip(keys, pairs):
                e = res[p, est]
                found[(p, key)].append((e.value, e.ci_low, e.ci_high))
            row = div.loc[p]
            extra[p]["evaluable"].append(float(row.evaluable))
            extra[p]["ess_share"].append(float(row.ess_share))
            for k in ("k1", "k3"):
                extra[p][k].append(float(row[k]))
                se = float(row[f"{k}_se"])
                extra[p][f"{k}_cover"].append(float(abs(row[k] - kl[p]) <= Z * se))
    rows = []
    for p in CANDIDATES:
        for key in keys:
            arr = np.array(found[(p, key)])
            err = arr[:, 0] - truth[p]
            covered = (arr[:, 1] <= truth[p]) & (truth[p] <= arr[:, 2])
            kept = np.array(extra[p]["evaluable"]) > 0
            rows.append(
                {
                    "length": length,
                    "policy": p,
                    "estimator": key,
                    "truth": truth[p],
                    "bias": float(err.mean()),
                    "rmse": float(np.sqrt(np.mean(err**2))),
                    "coverage": float(np.mean(covered)),
                    "coverage_evaluable": float(np.mean(covered[kept])) if kept.any() else None,
                    "evaluable": float(np.mean(extra[p]["evaluable"])),
                    "ess_share": float(np.mean(extra[p]["ess_share"])),
                    "kl": kl[p],
                    "k1": float(np.mean(extra[p]["k1"])),
                    "k1_coverage": float(np.mean(extra[p]["k1_cover"])),
                    "k3": float(np.mean(extra[p]["k3"])),
                    "k3_coverage": float(np.mean(extra[p]["k3_cover"])),
                }
            )
    return rows


def one_audit(args: tuple[str, int]) -> dict[str, Any]:
    import ope
    from ope.simulate import TokenModel

    name, reps = args
    settings, on_policy = AUDIT_CASES[name]
    env = TokenModel(**settings, seed=0)
    verdicts: dict[str, int] = {}
    usable = 0
    for rep in range(reps):  # a loop over replications
        audit = ope.audit_logprobs(env.sample(N, rng=rep), on_policy=on_policy)
        verdicts[audit.signature] = verdicts.get(audit.signature, 0) + 1
        usable += audit.usable
    return {
        "case": name,
        "on_policy": on_policy,
        "usable": usable / reps,
        "verdicts": {k: v / reps for k, v in sorted(verdicts.items())},
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replications", type=int, default=300)
    parser.add_argument("--quick", action="store_true", help="5 replications")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    reps = 5 if args.quick else args.replications
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        rows = [r for part in pool.map(one_length, [(L, reps) for L in LENGTHS]) for r in part]
        audits = list(pool.map(one_audit, [(name, reps) for name in AUDIT_CASES]))
    seconds = time.perf_counter() - started
    print(f"sequence-level estimators, {reps} replications of {N:,} responses, 95% normal CIs")
    print(
        format_table(
            [
                "L",
                "policy",
                "estimator",
                "truth",
                "bias",
                "RMSE",
                "coverage",
                "when evaluable",
                "evaluable",
                "ESS",
            ],
            [
                [
                    r["length"],
                    r["policy"],
                    r["estimator"],
                    f"{r['truth']:.3f}",
                    f"{r['bias']:+.3f}",
                    f"{r['rmse']:.3f}",
                    f"{r['coverage']:.3f}",
                    "-" if r["coverage_evaluable"] is None else f"{r['coverage_evaluable']:.3f}",
                    f"{r['evaluable']:.2f}",
                    f"{r['ess_share']:.3f}",
                ]
                for r in rows
            ],
        )
    )
    print("\nKL(logger || candidate): exact, mean of k1 and k3, coverage of +/- 1.96 SE")
    print(
        format_table(
            ["L", "policy", "exact", "k1", "k1 cover", "k3", "k3 cover"],
            [
                [
                    r["length"],
                    r["policy"],
                    f"{r['kl']:.3f}",
                    f"{r['k1']:.3f}",
                    f"{r['k1_coverage']:.3f}",
                    f"{r['k3']:.3f}",
                    f"{r['k3_coverage']:.3f}",
                ]
                for r in rows
                if r["estimator"] == "ips"
            ],
        )
    )
    print("\naudit verdicts (share of replications)")
    print(
        format_table(
            ["case", "on-policy candidate", "usable", "verdicts"],
            [
                [
                    a["case"],
                    a["on_policy"],
                    f"{a['usable']:.3f}",
                    ", ".join(f"{k} {v:.3f}" for k, v in a["verdicts"].items()),
                ]
                for a in audits
            ],
        )
    )
    result = {"replications": reps, "n": N, "rows": rows, "audits": audits, "seconds": seconds}
    path = write_result("sequences" + ("_quick" if args.quick else ""), result, out=args.out)
    print(f"wrote {path} ({seconds:.0f} s)")
    return result


if __name__ == "__main__":
    main()
