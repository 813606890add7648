"""Cascade-DR (``ope.CascadeDR``) against cascade IPS on the cascade click model, and its parity
with Open Bandit Pipeline's ``SlateCascadeDoublyRobust`` on identical inputs.

Design: ``ope.simulate.SlateEnvironment(click_model="cascade", seed=1)`` (5 items, 3 slots, 4
contexts; exact values by enumeration), candidates ``greedy`` and ``similar``, n = 250, 1,000
and 4,000 slates, ``--replications`` (default 1,000) each. Per (n, candidate): the bias (with
its Monte Carlo standard error), the standard deviation and the coverage of the normal 95%
interval of cascade IPS and of Cascade-DR with its default table model, and the ratio of their
standard deviations.

Identities (every run): Cascade-DR with the zero model equals cascade IPS (to 1e-12).

Parity (``--obp-python PATH``, a Python with ``obp==0.5.7``; obp is not a dependency of ope):
on one sample of 1,000 slates, the same importance weights, the table model's Q-hat for every
item at every slot (dense, as obp takes it) and the candidate's Plackett-Luce next-item
distribution are given to obp's ``SlateCascadeDoublyRobust.estimate_policy_value``; the largest
absolute difference of the values is printed.

Run: ``python benchmarks/cascade_dr.py [--obp-python /tmp/obp-venv/bin/python]`` (about a
minute on 2 workers). Writes ``benchmarks/results/cascade_dr.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import format_table, write_result  # noqa: E402

Z = 1.959963984540054
CANDIDATES = ("greedy", "similar")
SIZES = (250, 1000, 4000)

_OBP_CHILD = r"""
import json, sys, warnings
import numpy as np
warnings.simplefilter("ignore")
from obp.ope import SlateCascadeDoublyRobust
d = np.load(sys.argv[1])
n, L, m = d["q_hat"].shape
est = SlateCascadeDoublyRobust(len_list=L, n_unique_action=m)
value = est.estimate_policy_value(
    slate_id=np.repeat(np.arange(n), L),
    action=d["item"].ravel(),
    reward=d["reward"].ravel(),
    pscore_cascade=d["logging_prefix"].ravel(),
    position=np.tile(np.arange(L), n),
    evaluation_policy_pscore_cascade=d["target_prefix"].ravel(),
    q_hat=d["q_hat"].ravel(),
    evaluation_policy_action_dist=d["action_dist"].ravel(),
)
print(json.dumps({"value": float(value)}))
"""


def one(args: tuple[int, int, str]) -> dict[str, Any]:
    import ope.slates as S
    from ope.simulate import SlateEnvironment

    n, rep, name = args
    env = SlateEnvironment(click_model="cascade", seed=1)
    logs = env.sample_logs(n, rng=np.random.default_rng((n, rep)))
    target, logger = env.policy(name), env.policy("logging")
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for label, est in (("cascade IPS", S.CascadeIPS()), ("Cascade-DR", S.CascadeDR())):
            res = est.estimate(logs, target, logging=logger)
            out[label] = (res.value, res.std_error)
        zero = S.CascadeDR(model="zero").estimate(logs, target, logging=logger).value
    out["zero gap"] = abs(zero - out["cascade IPS"][0])
    return out


def parity(obp_python: str) -> dict[str, Any]:
    import ope.slates as S
    from ope.simulate import SlateEnvironment

    env = SlateEnvironment(click_model="cascade", seed=1)
    logs = env.sample_logs(1000, rng=123)
    target, logger = env.policy("greedy"), env.policy("logging")
    assert logs.context is not None
    mine = S.CascadeDR().estimate(logs, target, logging=logger).value
    # the same model, dense as obp takes it: Q-hat of every item at every slot, and the
    # candidate's next-item distribution given the logged prefix (Plackett-Luce)
    table = S._slot_table(logs, logs.context, target.n_contexts, target.n_items)
    n, L = logs.item.shape
    m = target.n_items
    q_hat = table[logs.context][:, :, :]  # (n, L, m)
    e = np.exp(target._logits)[logs.context]  # (n, m)
    dist = np.empty((n, L, m))
    for k in range(L):  # a loop over slots
        free = np.ones((n, m), dtype=bool)
        np.put_along_axis(free, logs.item[:, :k], False, axis=1)
        mass = np.where(free, e, 0.0)
        dist[:, k] = mass / mass.sum(axis=1, keepdims=True)
    tp = target.slate_probabilities(logs).prefix
    lp = logger.slate_probabilities(logs).prefix
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "inputs.npz"
        np.savez(
            path,
            q_hat=q_hat,
            action_dist=dist,
            item=logs.item,
            reward=logs.reward,
            logging_prefix=lp,
            target_prefix=tp,
        )
        child = subprocess.run(
            [obp_python, "-c", _OBP_CHILD, str(path)],
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        )
    theirs = json.loads(child.stdout.strip().splitlines()[-1])["value"]
    return {"ope": mine, "obp": theirs, "abs_diff": abs(mine - theirs)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replications", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--obp-python", default=None)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.replications = 30
    start = time.time()
    from ope.simulate import SlateEnvironment

    env = SlateEnvironment(click_model="cascade", seed=1)
    truth = {p: env.true_value(p) for p in CANDIDATES}
    rows, table = [], []
    largest_gap = 0.0
    with ProcessPoolExecutor(args.workers) as pool:
        for n in SIZES:  # a loop over sample sizes
            for name in CANDIDATES:  # a loop over candidates
                reps = list(pool.map(one, [(n, r, name) for r in range(args.replications)]))
                largest_gap = max(largest_gap, max(r["zero gap"] for r in reps))
                sd = {}
                for label in ("cascade IPS", "Cascade-DR"):
                    v = np.array([r[label] for r in reps])
                    bias = float(v[:, 0].mean() - truth[name])
                    sd[label] = float(v[:, 0].std(ddof=1))
                    cover = float(np.mean(np.abs(v[:, 0] - truth[name]) <= Z * v[:, 1]))
                    rows.append(
                        {
                            "n": n,
                            "policy": name,
                            "estimator": label,
                            "bias": bias,
                            "bias_se": sd[label] / math.sqrt(len(v)),
                            "sd": sd[label],
                            "coverage": cover,
                        }
                    )
                    table.append(
                        [
                            n,
                            name,
                            label,
                            f"{bias:+.4f} ({sd[label] / math.sqrt(len(v)):.4f})",
                            f"{sd[label]:.4f}",
                            f"{cover:.3f}",
                            f"{sd[label] / sd['cascade IPS']:.2f}",
                        ]
                    )
    print(
        f"cascade click model, {args.replications} replications; truth "
        + ", ".join(f"{p} {v:.4f}" for p, v in truth.items())
    )
    print(
        format_table(
            ["n", "policy", "estimator", "bias (MC se)", "sd", "coverage", "sd / cascade IPS"],
            table,
        )
    )
    print(f"Cascade-DR with the zero model against cascade IPS: largest gap {largest_gap:.1e}")
    result: dict[str, Any] = {
        "replications": args.replications,
        "truth": truth,
        "rows": rows,
        "zero_model_gap": largest_gap,
    }
    if args.obp_python:
        result["obp"] = parity(args.obp_python)
        p = result["obp"]
        print(
            f"obp 0.5.7 SlateCascadeDoublyRobust on identical inputs: ope {p['ope']:.12f}, obp "
            f"{p['obp']:.12f}, difference {p['abs_diff']:.1e}"
        )
    result["seconds"] = time.time() - start
    path = write_result("cascade_dr" + ("_quick" if args.quick else ""), result)
    print(f"wrote {path} ({result['seconds']:.0f} s)")
    return result


if __name__ == "__main__":
    main()
