"""When is a normal interval too short? The calibration of the skewed-terms rule, with exact truth.

Every estimate of ope carries a note when its normal (and t) interval is likely too short: the
skewed-terms rule ``n < SKEW_MIN_ROWS + SKEW_ROWS * g**2`` (``g`` the sample skewness of the
influence terms; ``ope._thresholds.skewed_terms``) beside the effective-sample rules (fewer than
30 rows, Kish ESS below 1% of n or below 30). This study draws many replications of designs
whose value is known exactly and asks, for each result, whether its normal 95% interval covered
the truth and whether ope flagged it (read from the result itself: the rules of its notes, or
the ``short_interval`` column of a paired table). It prints:

* per family and estimator: results, share flagged, coverage of the unflagged and the flagged;
* per design cell (design, estimator, n): coverage and share flagged; the separation (share
  flagged among results of cells covering < 0.93, and of cells covering >= 0.94);
* the cases that motivated the rule (sequential IS and WIS at 200 episodes, DR at n = 1,000,
  paired effects with Holm), and the family-wise error of Holm families with normal and t;
* for flagged results, the coverage of the interval the note recommends.

Designs: the six bandit designs of ``benchmarks/coverage_bandit.py`` plus ``ContextualBandit``
with softmax and optimal candidates (IPS, SNIPS, clipped IPS against its own target, DR with a
noisy reward model) at n = 200, 1,000 and 5,000; ``TabularMDP`` in four settings with the
candidate half logging, half softmax (IS, WIS, PDIS, DR with a multiplicatively perturbed exact
Q) at 50, 200 and 1,000 episodes; paired replays of ten null items with Holm at 200 to 2,000
pairs, and rare binary outcomes at 200 and 1,000 pairs.

Usage::

    python benchmarks/short_intervals.py                 # 200 replications per cell, ~6 min
    python benchmarks/short_intervals.py --reps 600      # the figures of the docs, ~18 min
    python benchmarks/short_intervals.py --quick         # a smoke run (tests)
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing import Pool
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import format_table  # noqa: E402

from ope.estimators import UNDERCOVER_RULES  # noqa: E402

#: The rules whose notes say that an estimate's normal interval may be too short: the
#: skewed-terms rule and those it defers to (ope.estimators.UNDERCOVER_RULES).
FLAG_RULES = ("skewed_terms", *UNDERCOVER_RULES)


def flagged(est: Any) -> bool:
    """Did ope say that this estimate's normal interval may be too short?"""
    return any(getattr(x, "rule", None) in FLAG_RULES for x in est.notes)


@dataclass(frozen=True)
class Task:
    family: str
    design: str
    n: int
    reps: int
    seed: int


# ============================================================================================
# bandit
# ============================================================================================
def bandit_designs() -> dict[str, Any]:
    from coverage_bandit import Design, make_designs

    from ope.simulate import ContextualBandit

    out = {d.name: d for d in make_designs()}

    def cb(name: str, policy: str, clip: float, **kw: Any) -> Any:
        env = ContextualBandit(**kw)
        q = env.reward_means
        noise = np.random.default_rng(99).normal(0.0, 0.15, size=q.shape)
        return Design(
            name,
            env.context_probabilities,
            env.policy_table("logging"),
            env.policy_table(policy),
            q,
            np.clip(q + noise, 0.01, 0.99),
            clip=clip,
        )

    out["cb softmax"] = cb("cb softmax", "softmax", 10.0, seed=0)
    out["cb optimal"] = cb("cb optimal", "optimal", 10.0, seed=0)
    out["cb optimal T0.5"] = cb("cb optimal T0.5", "optimal", 20.0, seed=0, logging_temperature=0.5)
    return out


def run_bandit(task: Task) -> list[dict[str, Any]]:
    import ope.estimators as oe

    d = bandit_designs()[task.design]
    c = d.cells
    rng = np.random.default_rng(task.seed)
    out = []
    for rep in range(task.reps):  # loop over replications
        rows = rng.choice(c["prob"].size, size=task.n, p=c["prob"])
        args = {
            "reward": c["r"][rows],
            "logging_propensity": c["propensity"][rows],
            "target_propensity": c["target_propensity"][rows],
            "reward_range": d.reward_range,
        }
        ests = {
            "IPS": oe.IPS().estimate(**args),
            "SNIPS": oe.SNIPS().estimate(**args),
            "clipped IPS": oe.ClippedIPS(max_weight=d.clip).estimate(**args),
            "DR": oe.DR().estimate(
                q_logged=c["q_logged"][rows], q_target=c["q_target"][rows], **args
            ),
        }
        for name, est in ests.items():
            truth = d.clipped_truth if est.target == "clipped value" else d.truth
            rec = _record(task, name, rep, est, truth)
            # the interval the note recommends (bottou covers the policy's value)
            method = {"IPS": "betting", "SNIPS": "betting", "clipped IPS": "bottou"}.get(name)
            if rec["flagged"] and method is not None:
                iv = est.ci(method=method)
                lo, hi = iv.low, iv.high
                rec["advised"] = method
                rec["advised_covered"] = float(lo <= d.truth <= hi)
            out.append(rec)
    return out


# ============================================================================================
# sequential
# ============================================================================================
SEQ_DESIGNS: dict[str, dict[str, Any]] = {
    "mdp (4,2,H4,s3)": {"n_states": 4, "n_actions": 2, "horizon": 4, "seed": 3},
    "mdp (4,2,H8,s1)": {"n_states": 4, "n_actions": 2, "horizon": 8, "seed": 1},
    "mdp (8,3,H5,s0)": {"n_states": 8, "n_actions": 3, "horizon": 5, "seed": 0},
    "mdp (4,2,H6,s1)": {"n_states": 4, "n_actions": 2, "horizon": 6, "seed": 1},
}


def _mdp(name: str) -> tuple[Any, float, float, np.ndarray, np.ndarray]:
    from ope.simulate import TabularMDP

    kw = dict(SEQ_DESIGNS[name], gamma=0.9)
    base = TabularMDP(**kw)
    mix = 0.5 * base.policy_table("logging") + 0.5 * base.policy_table("softmax")
    env = TabularMDP(**kw, policies={"mix": mix})
    bound = float((env.policy_table("mix") / env.policy_table("logging")).max())
    q = env.q_function("mix")
    q_hat = q * (1.0 + 0.3 * np.random.default_rng(123).standard_normal(q.shape))
    v_hat = np.einsum("tsa,sa->ts", q_hat, env.policy_table("mix"))
    return env, env.true_value("mix"), bound, q_hat, v_hat


def run_sequential(task: Task) -> list[dict[str, Any]]:
    from ope.io import read_trajectories
    from ope.logs import Trajectories
    from ope.sequential import sequential_estimate

    env, truth, bound, q_hat, v_hat = _mdp(task.design)
    rng = np.random.default_rng(task.seed)
    out = []
    traj = read_trajectories(env.sample(task.n * task.reps, rng=rng))
    starts, tab = traj.episode_starts, traj.table
    state = np.asarray(tab.column("state"))
    step = np.asarray(tab.column("step"))
    action = np.asarray(tab.column("action"))
    for rep in range(task.reps):  # loop over replications
        lo, hi = int(starts[rep * task.n]), int(starts[(rep + 1) * task.n])
        block = Trajectories(tab.slice(lo, hi - lo), traj.report)
        st, sp, ac = state[lo:hi], step[lo:hi], action[lo:hi]
        for name in ("is", "wis", "pdis", "dr"):
            extra: dict[str, Any] = {}
            if name == "dr":
                extra = {"q_hat": q_hat[sp, st, ac], "v_hat": v_hat[sp, st]}
            if name in ("is", "pdis"):
                extra = {
                    "reward_range": env.reward_range,
                    "horizon": env.horizon,
                    "weight_bound": bound,
                }
            est = sequential_estimate(
                block, "mix", estimator=name, gamma=env.gamma, tail_value=0.0, **extra
            )
            rec = _record(task, name.upper(), rep, est, truth)
            if rec["flagged"] and name in ("is", "pdis"):
                lo_, hi_ = est.ci(method="betting")
                rec["advised"] = "betting"
                rec["advised_covered"] = float(lo_ <= truth <= hi_)
            out.append(rec)
    return out


# ============================================================================================
# paired
# ============================================================================================
def run_paired(task: Task) -> list[dict[str, Any]]:
    from ope.paired import paired_effect
    from ope.simulate import PairedReplaySimulator

    rng = np.random.default_rng(task.seed)
    out = []
    env = PairedReplaySimulator(n_items=10, n_replicates=2, effect_mean=0.0, effect_sd=0.0, seed=4)
    for rep in range(task.reps):  # loop over replications
        if task.design == "items null (Holm)":
            df: Any = env.sample(task.n, rng=rng)
            kw: dict[str, Any] = {"treated": env.arms[0], "control": env.arms[1], "by": "item_id"}
            truth = 0.0
        else:  # rare binary: treated Bernoulli(0.03), control Bernoulli(0.01)
            yt = (rng.random(task.n) < 0.03).astype(float)
            yc = (rng.random(task.n) < 0.01).astype(float)
            df = pd.DataFrame(
                {
                    "pair_id": np.tile(np.arange(task.n), 2),
                    "arm": np.repeat(["t", "c"], task.n),
                    "outcome": np.concatenate([yt, yc]),
                }
            )
            kw = {"treated": "t", "control": "c"}
            truth = 0.02
        tabs = {m: paired_effect(df, ci=m, **kw).table() for m in ("normal", "t")}
        normal = tabs["normal"]
        for i in range(len(normal)):  # loop over the table's rows (groups)
            row = normal.iloc[i]
            if not np.isfinite(row["ci_low"]):
                continue
            t_row = tabs["t"].iloc[i]
            out.append(
                {
                    "family": "paired",
                    "design": task.design,
                    "estimator": "paired difference",
                    "n_nominal": task.n,
                    "rep": rep,
                    "group": str(row["group"]),
                    "covered": float(row["ci_low"] <= truth <= row["ci_high"]),
                    "flagged": bool(row["short_interval"]),
                    "significant_normal": bool(row["significant"]),
                    "significant_t": bool(t_row["significant"]),
                    "advised": "t",
                    "advised_covered": float(t_row["ci_low"] <= truth <= t_row["ci_high"]),
                }
            )
    return out


# ============================================================================================
# driver and tables
# ============================================================================================
def _record(task: Task, estimator: str, rep: int, est: Any, truth: float) -> dict[str, Any]:
    return {
        "family": task.family,
        "design": task.design,
        "estimator": estimator,
        "n_nominal": task.n,
        "rep": rep,
        "group": "",
        "covered": float(est.ci_low <= truth <= est.ci_high),
        "flagged": flagged(est),
    }


RUNNERS: dict[str, Callable[[Task], list[dict[str, Any]]]] = {
    "bandit": run_bandit,
    "sequential": run_sequential,
    "paired": run_paired,
}


def _run(task: Task) -> list[dict[str, Any]]:
    warnings.simplefilter("ignore")
    return RUNNERS[task.family](task)


def tasks(reps: int, *, quick: bool = False) -> list[Task]:
    out = []
    seed = 0
    bandit = ["heavy", "rare large", "cb optimal"] if quick else list(bandit_designs())
    for name in bandit:
        for n in (200, 1000) if quick else (200, 1000, 5000):
            out.append(Task("bandit", name, n, reps, seed := seed + 1))
    for name in ["mdp (4,2,H8,s1)"] if quick else list(SEQ_DESIGNS):
        for n in (200,) if quick else (50, 200, 1000):
            out.append(Task("sequential", name, n, reps, seed := seed + 1))
    paired = (
        [("items null (Holm)", (500,))]
        if quick
        else [
            ("items null (Holm)", (200, 500, 1000, 2000)),
            ("rare binary", (200, 1000)),
        ]
    )
    for name, sizes in paired:
        for n in sizes:
            out.append(Task("paired", name, n, reps, seed := seed + 1))
    return out


def run(reps: int, *, quick: bool = False, workers: int = 2) -> pd.DataFrame:
    todo = tasks(reps, quick=quick)
    if workers > 1:
        with Pool(workers) as pool:
            parts = pool.map(_run, todo, chunksize=1)
    else:
        parts = [_run(t) for t in todo]
    return pd.DataFrame([r for part in parts for r in part])


def summary(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The tables of the study (see the module docstring)."""
    keys = ["family", "design", "estimator", "n_nominal"]
    cells = (
        df.groupby(keys)
        .agg(results=("covered", "size"), coverage=("covered", "mean"), flagged=("flagged", "mean"))
        .reset_index()
    )
    df = df.merge(cells[[*keys, "coverage"]].rename(columns={"coverage": "cell_coverage"}), on=keys)
    by_est = (
        df.groupby(["family", "estimator"])
        .apply(
            lambda g: pd.Series(
                {
                    "results": len(g),
                    "share_flagged": g["flagged"].mean(),
                    "coverage_unflagged": g.loc[~g["flagged"], "covered"].mean(),
                    "coverage_flagged": g.loc[g["flagged"], "covered"].mean(),
                    "advised_coverage_flagged": g.loc[g["flagged"], "advised_covered"].mean()
                    if "advised_covered" in g
                    else math.nan,
                }
            ),
            include_groups=False,
        )
        .reset_index()
    )
    bad, good = df["cell_coverage"] < 0.93, df["cell_coverage"] >= 0.94
    separation = pd.DataFrame(
        {
            "flagged_in_undercovering_cells": [df.loc[bad, "flagged"].mean()],
            "flagged_in_covering_cells": [df.loc[good, "flagged"].mean()],
            "undercovering_cells": [int((cells["coverage"] < 0.93).sum())],
            "covering_cells": [int((cells["coverage"] >= 0.94).sum())],
            "coverage_unflagged": [df.loc[~df["flagged"], "covered"].mean()],
            "coverage_flagged": [df.loc[df["flagged"], "covered"].mean()],
        }
    )
    holm = df[(df["family"] == "paired") & (df["design"] == "items null (Holm)")]
    fwe = (
        holm.groupby(["n_nominal", "rep"])
        .agg(
            any_normal=("significant_normal", "max"),
            any_t=("significant_t", "max"),
            flagged=("flagged", "max"),
        )
        .groupby("n_nominal")
        .agg(
            fwe_normal=("any_normal", "mean"),
            fwe_t=("any_t", "mean"),
            families_flagged=("flagged", "mean"),
        )
        .reset_index()
        if len(holm)
        else pd.DataFrame()
    )
    known = cells[
        (
            (cells["family"] == "sequential")
            & (cells["design"] == "mdp (4,2,H8,s1)")
            & (cells["n_nominal"] == 200)
            & cells["estimator"].isin(["IS", "WIS"])
        )
        | (
            (cells["estimator"] == "DR")
            & (cells["family"] == "bandit")
            & (cells["n_nominal"] == 1000)
            & (cells["coverage"] < 0.93)
        )
    ]
    return {
        "by_estimator": by_est,
        "cells": cells,
        "separation": separation,
        "known": known,
        "holm": fwe,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=200, help="replications per cell")
    parser.add_argument("--quick", action="store_true", help="a few cells, for a smoke run")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    df = run(args.reps, quick=args.quick, workers=args.workers)
    tables = summary(df)
    pd.set_option("display.width", 200)
    pd.set_option("display.max_rows", 200)
    for name, tab in tables.items():
        print(f"\n## {name}\n")
        rows = [[round(v, 3) if isinstance(v, float) else v for v in r] for r in tab.values]
        print(format_table(list(tab.columns), rows) if len(tab) else "(none)")
    print(f"\n{len(df)} results in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
