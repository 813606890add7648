"""Benchmark: ope against the Open Bandit Pipeline (obp) on identical inputs.

Two measurements, each in one run with ope and obp interleaved (a persistent obp child
interpreter answers one timing request per line; medians of at least five rounds):

1. n = 1M, K = 10 actions: IPS, SNIPS and DR values and times (obp gets the dense (n, K, 1)
   ``action_dist`` and ``estimated_rewards_by_reg_model`` its estimators require; ope the per-row
   vectors they reduce to: the candidate's probability of the logged action, q(x_i, a_i) and
   q(x_i, pi) = sum_a pi(a|x_i) q(x_i, a)). obp times ``estimate_policy_value`` (value only);
   ope times ``Estimator.estimate`` (value, standard error, normal interval and diagnostics).
   The figure of record times each side's call right after the other's (alternating which
   goes first); a second series times each side's second of two calls in a row (the steady
   state: on these virtual machines a call made after waiting idle pays about a millisecond
   more at its start, which is 2 % of obp's call and 40 % of ope's).
2. K = 1,000: the input each needs. obp's dense tensors are n x K float64 each (8 GB per tensor
   at n = 1M, so obp runs at ``--k1000-obp-rows``, 100,000 by default, and its peak memory is
   measured there); ope runs at n = 1M and its peak RSS is measured in a fresh interpreter.

obp is never a dependency of ope: it runs from its own interpreter (``--obp-python``, default
``/tmp/obp-venv/bin/python``; obp 0.5.7 needs Python 3.10 and ``matplotlib<3.6``). Without it
the obp parts are skipped and said to be.

Usage::

    python benchmarks/bench_obp.py             # n = 1M
    python benchmarks/bench_obp.py --quick     # small sizes
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Final

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_evaluate as be  # noqa: E402
from _common import MIN_ROUNDS, data_path, peak_rss, write_result  # noqa: E402

NAME: Final = "bench_obp"
#: The target: ope at least 20x faster than obp for IPS, SNIPS and DR at n = 1M, K = 10.
TARGET_SPEEDUP: Final = 20.0

_OBP_MEMORY_CHILD: Final = r"""
import json, sys, time, warnings
warnings.filterwarnings("ignore")
import numpy as np
from obp.ope import (DoublyRobust, InverseProbabilityWeighting,
                     SelfNormalizedInverseProbabilityWeighting)
d = np.load(sys.argv[1])
kw = {"reward": d["reward"], "action": d["action"], "pscore": d["pscore"],
      "action_dist": d["action_dist"]}
def status(key):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024.0
out = {"rss_after_load_mb": status("VmRSS")}
for name, est in (("ips", InverseProbabilityWeighting()),
                  ("snips", SelfNormalizedInverseProbabilityWeighting()),
                  ("dr", DoublyRobust())):
    extra = {"estimated_rewards_by_reg_model": d["q_hat"]} if name == "dr" else {}
    t0 = time.perf_counter()
    out[name + "_value"] = float(est.estimate_policy_value(**kw, **extra))
    out[name + "_s"] = time.perf_counter() - t0
out["peak_mb"] = status("VmHWM")
print(json.dumps(out))
"""


def _tables(k: int, seed: int) -> dict[str, np.ndarray]:
    """Logging, candidate and reward tables over (16 context groups, k actions)."""
    rng = np.random.default_rng(seed)
    g = be.N_GROUPS
    logging = (1 - be.LOGGING_FLOOR) * be._softmax(rng.normal(size=(g, k))) + be.LOGGING_FLOOR / k
    target = be._softmax(2.0 * rng.normal(size=(g, k)))
    mu = rng.uniform(0.05, 0.6, size=(g, k))
    q_hat = np.clip(mu + rng.normal(0.0, 0.05, size=(g, k)), 0.0, 1.0)
    return {"logging": logging, "target": target, "mu": mu, "q_hat": q_hat}


def _rows(tabs: dict[str, np.ndarray], n: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed + 1)
    g, k = tabs["logging"].shape
    group = rng.integers(0, g, n)
    cum = np.cumsum(tabs["logging"], axis=1)[group]
    action = np.minimum((rng.random(n)[:, None] > cum).sum(axis=1), k - 1)
    reward = (rng.random(n) < tabs["mu"][group, action]).astype(np.float64)
    return {
        "group": group,
        "action": action.astype(np.int64),
        "reward": reward,
        "pscore": tabs["logging"][group, action],
    }


def bench_k1000(n_ope: int, n_obp: int, python: str, k: int = 1000) -> dict[str, Any]:
    """Memory (and time) of the K = 1000 case: ope per-row vectors vs obp's dense tensors."""
    out: dict[str, Any] = {
        "actions": k,
        "ope_rows": n_ope,
        "obp_rows": n_obp,
        "obp_dense_input_gb_at_ope_rows": 2 * n_ope * k * 8 / 1e9,
    }
    setup = (
        "import numpy as np, warnings\n"
        "warnings.filterwarnings('ignore')\n"
        "import bench_obp as b\n"
        "from ope.estimators import IPS, SNIPS, DR\n"
        f"tabs = b._tables({k}, 3)\n"
        f"rows = b._rows(tabs, {n_ope}, 3)\n"
        "g, a = rows['group'], rows['action']\n"
        "tp = tabs['target'][g, a]\n"
        "ql = tabs['q_hat'][g, a]\n"
        "qt = (tabs['target'] * tabs['q_hat']).sum(axis=1)[g]\n"
        "IPS().estimate(rows['reward'][:100], rows['pscore'][:100], tp[:100])\n"
    )
    workload = (
        "v = [IPS().estimate(rows['reward'], rows['pscore'], tp).value,\n"
        "     SNIPS().estimate(rows['reward'], rows['pscore'], tp).value,\n"
        "     DR().estimate(rows['reward'], rows['pscore'], tp, q_logged=ql, q_target=qt).value]\n"
    )
    out["ope"] = peak_rss(setup, workload, timeout=900)
    out["ope_input_mb"] = 4 * n_ope * 8 / 2**20  # reward, pscore, target, q_logged (+ q_target)
    if not Path(python).exists():
        out["obp"] = {"skipped": f"no obp interpreter at {python}"}
        return out
    tabs = _tables(k, 3)
    rows = _rows(tabs, n_obp, 3)
    path = data_path(f"obp_k{k}_{n_obp}.npz")
    np.savez(
        path,
        reward=rows["reward"],
        action=rows["action"],
        pscore=rows["pscore"],
        action_dist=tabs["target"][rows["group"]][:, :, None],
        q_hat=tabs["q_hat"][rows["group"]][:, :, None],
    )
    proc = subprocess.run(
        [python, "-c", _OBP_MEMORY_CHILD, str(path)], capture_output=True, text=True, timeout=1800
    )
    path.unlink(missing_ok=True)
    if proc.returncode != 0:
        out["obp"] = {"failed": proc.stderr[-2000:]}
    else:
        out["obp"] = json.loads(proc.stdout.strip().splitlines()[-1])
        out["obp"]["dense_input_mb"] = 2 * n_obp * k * 8 / 2**20
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=MIN_ROUNDS)
    parser.add_argument("--obp-python", default=be.DEFAULT_OBP_PYTHON)
    parser.add_argument("--bootstrap-resamples", type=int, default=100)
    parser.add_argument("--k1000-obp-rows", type=int, default=100_000)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    n = 50_000 if args.quick else args.rows
    started = time.perf_counter()
    result: dict[str, Any] = {"quick": args.quick, "rows": n, "target_speedup": TARGET_SPEEDUP}
    try:
        result["k10"] = be.bench_obp(
            args.obp_python,
            n,
            rounds=args.rounds,
            n_resamples=100 if args.quick else args.bootstrap_resamples,
        )
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        result["k10"] = {"skipped": f"obp run failed: {exc}"}
    k10 = result["k10"]
    if "estimators" in k10:
        result["speedup"] = {k: e["obp_vs_ope_ratio"] for k, e in k10["estimators"].items()}
        result["target_met"] = {k: v >= TARGET_SPEEDUP for k, v in result["speedup"].items()}
    result["k1000"] = bench_k1000(n, 10_000 if args.quick else args.k1000_obp_rows, args.obp_python)
    result["total_seconds"] = time.perf_counter() - started
    path = write_result(NAME, result, out=args.out)
    print(report(result))
    print(f"wrote {path}")
    return result


def report(res: dict[str, Any]) -> str:
    lines = [f"ope vs obp (n = {res['rows']:,})"]
    k10 = res["k10"]
    if "skipped" in k10:
        lines.append(f"K = 10: skipped ({k10['skipped']})")
    else:
        lines.append(f"K = 10, obp {k10['obp']['obp']} (python {k10['obp']['python']}):")
        for key, e in k10["estimators"].items():
            lines.append(
                f"  {key:<6} obp {e['obp']['median_s']:.4f} s, ope {e['ope']['median_s']:.4f} s:"
                f" obp/ope {e['obp_vs_ope_ratio']:.1f}x (paired {e['obp_vs_ope_paired_min']:.1f}"
                f"-{e['obp_vs_ope_paired_max']:.1f}; target >= {res['target_speedup']:g}: "
                f"{'yes' if e['obp_vs_ope_ratio'] >= res['target_speedup'] else 'NO'}); values "
                f"{e['obp_value']:.9f} vs {e['ope_value']:.9f} (|diff| {e['abs_difference']:.1e})"
            )
            b2b = e.get("back_to_back")
            if b2b:
                lines.append(
                    f"         second of two calls in a row: obp {b2b['obp']['median_s']:.4f} s, ope "
                    f"{b2b['ope']['median_s']:.4f} s: obp/ope {b2b['obp_vs_ope_ratio']:.1f}x (paired "
                    f"{b2b['obp_vs_ope_paired_min']:.1f}-{b2b['obp_vs_ope_paired_max']:.1f})"
                )
        for key in ("ips", "snips"):
            b = k10["bootstrap"][key]
            lines.append(
                f"  bootstrap {key} B={k10['bootstrap']['n_resamples']}: obp "
                f"{b['obp_seconds']:.2f} s, ope {b['ope_seconds']:.2f} s"
            )
    k = res["k1000"]
    lines.append(
        f"K = {k['actions']}: ope at n = {k['ope_rows']:,}: extra peak RSS "
        f"{k['ope']['extra_peak_mb']:.0f} MB ({k['ope']['seconds']:.2f} s for IPS + SNIPS + DR); "
        f"obp's dense inputs at that n: {k['obp_dense_input_gb_at_ope_rows']:.1f} GB"
    )
    o = k.get("obp", {})
    if "peak_mb" in o:
        lines.append(
            f"  obp at n = {k['obp_rows']:,}: dense inputs {o['dense_input_mb']:.0f} MB, peak RSS "
            f"{o['peak_mb']:.0f} MB; IPS {o['ips_s']:.3f} s, SNIPS {o['snips_s']:.3f} s, DR "
            f"{o['dr_s']:.3f} s"
        )
    elif o:
        lines.append(f"  obp: {o}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
