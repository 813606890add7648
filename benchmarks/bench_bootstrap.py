"""Benchmark: bootstrap intervals with shared resample counts, against the per-interval bootstrap
they replace and against the same evaluation with normal intervals, measured in the same run.

Cases (interleaved rounds, medians; ``n`` rows, ``B`` resamples, 8 candidates):

* ``normal evaluate``: ``ope.evaluate(logs, estimators=("ips", "snips"), ci="normal")`` on the
  same logs, the reference a user compares with;
* ``shared``: ``shared_bootstrap(reward, propensity, target (n, 8), estimators=(IPS(),
  SNIPS()))``: all 16 intervals and the logging value's from one set of counts (the call
  ``evaluate(..., ci="bootstrap")`` makes once it is wired to it), with the compiled loop and
  with the numpy fallback (``OPE_KERNEL=numpy``);
* ``one IPS`` / ``one SNIPS``: ``Estimate.ci(method="bootstrap")`` of one candidate;
* ``before: one IPS``: the same interval by the bootstrap module of ``--before-rev`` (the
  per-interval multinomial bootstrap: index draws and a bincount per block of resamples), loaded
  from ``git show REV:ope/intervals/bootstrap.py``.

Two data sets: ``continuous`` (continuous propensities, binary rewards: every row distinct, the
Poisson path) and ``discrete`` (``bench_evaluate.make_data``: 16 context groups x 10 actions, so
at most 320 distinct rows: the exact multinomial over distinct rows). After the rounds: the
first call in a fresh interpreter (numba imported, its compiled loop loaded from the on-disk
cache, and with an empty cache: compiled) with its peak memory; the intervals of the new and the
old code on the same data, their differences in Monte Carlo standard deviations of an interval
end; with ``--before-full`` one run of ``ope.evaluate(..., ci="bootstrap")`` of this tree and of
the 17 intervals of the old code; with ``--coverage`` a coverage study (old vs new,
exact truth) at a multinomial-path and a Poisson-path sample size.

Usage::

    python benchmarks/bench_bootstrap.py                      # n = 1M, B = 1000, 3 rounds
    python benchmarks/bench_bootstrap.py --quick              # n = 100k, B = 200
    python benchmarks/bench_bootstrap.py --before-full --coverage --coverage-reps 400
    python benchmarks/bench_bootstrap.py --before-rev 97f3128  # the code before shared resamples
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Final

import numpy as np


def _import_numba_first() -> None:
    """Import numba (when installed) with this directory off ``sys.path``: numba imports the
    ``coverage`` package when it can, and ``benchmarks/coverage.py`` would shadow it."""
    here = Path(__file__).resolve().parent
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    try:
        import numba  # noqa: F401
    except ImportError:  # the optional extra 'fast' is not installed: the numpy fallback
        pass
    finally:
        sys.path[:] = saved


_import_numba_first()
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    HERE,
    data_path,
    interleaved,
    peak_rss,
    ratio,
    summarize,
    write_result,
)

NAME: Final = "bench_bootstrap"
N_POLICIES: Final = 8
#: The last commit before shared resamples (the per-interval multinomial bootstrap).
DEFAULT_BEFORE_REV: Final = "97f3128"
FULL: Final = {"rows": 1_000_000, "resamples": 1000, "rounds": 3}
QUICK: Final = {"rows": 100_000, "resamples": 200, "rounds": 2}
LEVEL: Final = 0.95
#: Seeds of the replicate-spread check (each old run costs a full per-interval bootstrap).
SD_SEEDS_NEW: Final = 8
SD_SEEDS_OLD: Final = 4


# --------------------------------------------------------------------------------------------
# the code before, and the data
# --------------------------------------------------------------------------------------------
def load_before(rev: str, path: str, name: str) -> Any:
    """The module at ``path`` as of git revision ``rev`` (read with ``git show``), imported
    under ``name``; it imports the rest of ope from the working tree."""
    source = subprocess.run(
        ["git", "show", f"{rev}:{path}"],
        cwd=HERE.parent,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    file = data_path(f"{name}.py")
    file.write_text(source)
    spec = importlib.util.spec_from_file_location(name, file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def continuous_data(n: int, seed: int = 0) -> dict[str, Any]:
    """Continuous logging propensities in [0.05, 1], candidates within a factor 2 of it (capped
    at 1), click rewards: every row distinct (the Poisson path)."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.05, 1.0, size=n)
    t = np.minimum(1.0, p[:, None] * rng.uniform(0.0, 2.0, size=(n, N_POLICIES)))
    r = (rng.random(n) < 0.3).astype(np.float64)
    return {
        "reward": r,
        "propensity": p,
        "target": t,
        "names": [f"policy_{j}" for j in range(N_POLICIES)],
    }


def discrete_data(n: int) -> dict[str, Any]:
    import bench_evaluate

    d = bench_evaluate.make_data(n, n_policies=N_POLICIES, seed=1)
    return {
        "reward": d["reward"],
        "propensity": d["propensity"],
        "target": d["target"],
        "names": d["names"],
        "action": d["action"],
    }


def build_logs(data: dict[str, Any]) -> Any:
    import pyarrow as pa

    from ope.io import read_logs

    n = data["reward"].size
    cols: dict[str, Any] = {
        "action": data.get("action", np.zeros(n, dtype=np.int64)),
        "propensity": data["propensity"],
        "reward": data["reward"],
    }
    for j, name in enumerate(data["names"]):
        cols[f"target__{name}"] = np.ascontiguousarray(data["target"][:, j])
    return read_logs(pa.table(cols))


# --------------------------------------------------------------------------------------------
# timing
# --------------------------------------------------------------------------------------------
def _shared(data: dict[str, Any], b: int, numpy_backend: bool = False) -> Any:
    import ope._kernel as kernel
    from ope.estimators import IPS, SNIPS
    from ope.intervals.bootstrap import shared_bootstrap

    if numpy_backend:
        kernel.set_backend("numpy")
    try:
        return shared_bootstrap(
            data["reward"],
            data["propensity"],
            data["target"],
            names=data["names"],
            estimators=(IPS(), SNIPS()),
            n_resamples=b,
            rng=0,
        )
    finally:
        kernel.set_backend(None)


def timings(data: dict[str, Any], b: int, rounds: int, before: Any | None) -> dict[str, Any]:
    import ope
    from ope.estimators import IPS, SNIPS

    logs = build_logs(data)
    r, p, t0 = data["reward"], data["propensity"], data["target"][:, 0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ips, snips = IPS().estimate(r, p, t0), SNIPS().estimate(r, p, t0)
    wr = (t0 / p * r)[:, None]
    cases = {
        "normal evaluate": lambda: ope.evaluate(logs, estimators=("ips", "snips"), ci="normal"),
        "shared (16 + logging)": lambda: _shared(data, b),
        "shared, numpy fallback": lambda: _shared(data, b, numpy_backend=True),
        "one IPS": lambda: ips.ci(method="bootstrap", n_resamples=b, rng=0),
        "one SNIPS": lambda: snips.ci(method="bootstrap", n_resamples=b, rng=0),
    }
    if before is not None:
        cases["before: one IPS"] = lambda: before.bootstrap_interval(
            wr, lambda m: m[..., 0], n_resamples=b, rng=0
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        times = interleaved(cases, rounds=rounds, warmup=1)
    ref = "normal evaluate"
    out: dict[str, Any] = {
        "cases": {
            k: {**summarize(v), "cpu_median_s": statistics.median(times.cpu[k])}
            for k, v in times.wall.items()
        },
        "ratios_vs_normal_evaluate": {
            k: ratio(times.wall[k], times.wall[ref]) for k in cases if k != ref
        },
        "resampling": _shared(data, b).resampling,
    }
    if before is not None:
        out["before_one_ips_vs_one_ips_ratio"] = ratio(
            times.wall["before: one IPS"], times.wall["one IPS"]
        )
        out["before_one_ips_x16_vs_shared_ratio"] = {
            "ratio": 16
            * statistics.median(times.wall["before: one IPS"])
            / statistics.median(times.wall["shared (16 + logging)"])
        }
    return out


def before_full(data: dict[str, Any], b: int, before: Any) -> dict[str, Any]:
    """One run each: ``ope.evaluate(..., ci="bootstrap")`` of this tree (one shared call once
    evaluate is wired to :func:`shared_bootstrap`, else 17 separate bootstraps of the new code),
    and the 17 intervals of the old code (what evaluate cost before)."""
    import ope

    logs = build_logs(data)
    r, p, t = data["reward"], data["propensity"], data["target"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        ope.evaluate(logs, estimators=("ips", "snips"), ci="bootstrap", n_resamples=b, rng=0)
        wired = time.perf_counter() - t0
        t0 = time.perf_counter()
        for j in range(t.shape[1]):  # the old per-interval bootstraps, one per estimate
            w = t[:, j] / p
            before.bootstrap_interval((w * r)[:, None], lambda m: m[..., 0], n_resamples=b, rng=0)
            before.bootstrap_interval(
                np.c_[w * r, w], lambda m: m[..., 0] / m[..., 1], n_resamples=b, rng=0
            )
        before.bootstrap_interval(r, lambda m: m[..., 0], n_resamples=b, rng=0)
        old = time.perf_counter() - t0
    return {"evaluate_bootstrap_s": wired, "before_17_intervals_s": old}


def cold(n: int, b: int, fresh_cache: bool) -> dict[str, Any]:
    """The first shared_bootstrap call in a fresh interpreter (imports and the compiled loop's
    load or compilation included), and its extra peak memory."""
    setup = (
        "import numpy as np\n"
        "from bench_bootstrap import continuous_data  # imports numba first (see there)\n"
        f"data = continuous_data({n})\n"
    )
    work = (
        "from ope.estimators import IPS, SNIPS\n"
        "from ope.intervals.bootstrap import shared_bootstrap\n"
        "shared_bootstrap(data['reward'], data['propensity'], data['target'], "
        f"estimators=(IPS(), SNIPS()), n_resamples={b}, rng=0)\n"
    )
    saved = os.environ.get("NUMBA_CACHE_DIR")
    with tempfile.TemporaryDirectory() as tmp:
        if fresh_cache:
            os.environ["NUMBA_CACHE_DIR"] = tmp
        try:
            return peak_rss(setup, work, timeout=1800)
        finally:
            if saved is None:
                os.environ.pop("NUMBA_CACHE_DIR", None)
            else:
                os.environ["NUMBA_CACHE_DIR"] = saved


# --------------------------------------------------------------------------------------------
# agreement with the code before
# --------------------------------------------------------------------------------------------
def _end_sd(reps: np.ndarray, b: int, level: float = LEVEL) -> float:
    """Monte Carlo sd of an end of a B-replicate percentile interval (normal approximation)."""
    alpha = (1 - level) / 2
    z = statistics.NormalDist().inv_cdf(1 - alpha)
    phi = math.exp(-z * z / 2) / math.sqrt(2 * math.pi)
    return float(np.std(reps) * math.sqrt(alpha * (1 - alpha) / b) / phi)


def agreement(data: dict[str, Any], b: int, before: Any) -> dict[str, Any]:
    from ope.intervals.bootstrap import bootstrap_interval, bootstrap_replicates

    r, p, t = data["reward"], data["propensity"], data["target"][:, 0]
    w = t / p
    out = {}
    for name, comps, stat in (
        ("ips", (w * r)[:, None], lambda m: m[..., 0]),
        ("snips", np.c_[w * r, w], lambda m: m[..., 0] / m[..., 1]),
    ):
        new = bootstrap_interval(comps, stat, n_resamples=b, rng=0)
        old = before.bootstrap_interval(comps, stat, n_resamples=b, rng=0)
        sd = math.sqrt(2) * _end_sd(bootstrap_replicates(comps, stat, n_resamples=b, rng=0), b)
        out[name] = {
            "new": list(new),
            "old": list(old),
            "low_diff_in_mc_sd": (new.low - old.low) / sd,
            "high_diff_in_mc_sd": (new.high - old.high) / sd,
        }
    # the spread of the IPS replicates against the analytical sd(w r) / sqrt(n) of the mean,
    # over several seeds (the sd of one B-replicate sd is about 1 / sqrt(2 B) relative)
    x = w * r
    analytic = float(np.std(x, ddof=1) / math.sqrt(x.size))
    spread = {}
    for code, module, seeds in (("new", None, SD_SEEDS_NEW), ("old", before, SD_SEEDS_OLD)):
        fn = bootstrap_replicates if module is None else module.bootstrap_replicates
        sds = [
            float(np.std(fn(x, lambda m: m[..., 0], n_resamples=1000, rng=s))) for s in range(seeds)
        ]  # a loop over seeds
        spread[code] = {
            "mean_sd_over_analytic": float(np.mean(sds)) / analytic,
            "se": float(np.std(sds, ddof=1) / math.sqrt(seeds)) / analytic,
            "seeds": seeds,
        }
    out["ips_replicate_sd"] = spread
    return out


# --------------------------------------------------------------------------------------------
# coverage
# --------------------------------------------------------------------------------------------
PI0: Final = np.array([0.5, 0.3, 0.2])
PI: Final = np.array([0.2, 0.3, 0.5])
MU: Final = np.array([0.2, 0.5, 0.7])


def coverage(sizes: list[int], reps: int, b: int, before: Any | None) -> list[dict[str, Any]]:
    """Coverage of the percentile IPS and SNIPS intervals of the exact value ``pi @ mu``, with
    rewards ``mu_a + U(-0.1, 0.1)`` (continuous: every row distinct), old vs new code."""
    from ope.estimators import IPS, SNIPS
    from ope.intervals.bootstrap import EXACT_MAX_ROWS, shared_bootstrap

    truth = float(PI @ MU)
    stats_ = {"ips": lambda m: m[..., 0], "snips": lambda m: m[..., 0] / m[..., 1]}
    rows = []
    for n in sizes:
        hits: dict[tuple[str, str], list[float]] = {}
        rng = np.random.default_rng(100 + n)
        for i in range(reps):  # replications, not resamples
            a = rng.choice(3, size=n, p=PI0)
            r = MU[a] + rng.uniform(-0.1, 0.1, size=n)
            w = PI[a] / PI0[a]
            res = shared_bootstrap(
                r, PI0[a], PI[a][:, None], estimators=(IPS(), SNIPS()), n_resamples=b, rng=i
            )
            for key in ("ips", "snips"):
                lo, hi = res.intervals[("0", key)]
                hits.setdefault(("new", key), []).append(float(lo <= truth <= hi))
                hits.setdefault(("new width", key), []).append(hi - lo)
                if before is not None:
                    comps = (w * r)[:, None] if key == "ips" else np.c_[w * r, w]
                    lo, hi = before.bootstrap_interval(comps, stats_[key], n_resamples=b, rng=i)
                    hits.setdefault(("before", key), []).append(float(lo <= truth <= hi))
                    hits.setdefault(("before width", key), []).append(hi - lo)
        path = "multinomial" if n <= EXACT_MAX_ROWS else "poisson"
        for code in ("before", "new"):
            for key in ("ips", "snips"):
                if (code, key) not in hits:
                    continue
                cov = float(np.mean(hits[(code, key)]))
                rows.append(
                    {
                        "n": n,
                        "code": code,
                        "estimator": key,
                        "resampling": path if code == "new" else "multinomial",
                        "coverage": cov,
                        "mc_se": math.sqrt(cov * (1 - cov) / reps),
                        "mean_width": float(np.mean(hits[(f"{code} width", key)])),
                        "replications": reps,
                    }
                )
    return rows


# --------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------
def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"n = {result['rows']:,}, B = {result['resamples']}, {N_POLICIES} candidates, "
        f"{result['rounds']} interleaved rounds (medians; wall s, CPU s)",
        "",
    ]
    for name, block in result["timings"].items():
        lines += [
            f"**{name} data** (counts: {block['resampling']})",
            "",
            "| case | wall s | CPU s | x normal evaluate |",
            "|---|---:|---:|---:|",
        ]
        for case, s in block["cases"].items():
            rr = block["ratios_vs_normal_evaluate"].get(case)
            lines.append(
                f"| {case} | {s['median_s']:.3f} | {s['cpu_median_s']:.3f} | "
                f"{'1' if rr is None else format(rr['ratio'], '.1f')} |"
            )
        if "before_one_ips_vs_one_ips_ratio" in block:
            lines.append("")
            lines.append(
                f"before / new, one IPS interval: "
                f"{block['before_one_ips_vs_one_ips_ratio']['ratio']:.1f}x; 16 old "
                f"intervals / the shared call: "
                f"{block['before_one_ips_x16_vs_shared_ratio']['ratio']:.0f}x"
            )
        lines.append("")
    for key, c in result.get("cold", {}).items():
        lines.append(
            f"first call in a fresh interpreter ({key}): {c['seconds']:.2f} s, "
            f"extra peak {c['extra_peak_mb']:.0f} MB"
        )
    if "before_full" in result:
        bf = result["before_full"]
        lines.append(
            f"ope.evaluate(..., ci='bootstrap') in this tree: "
            f"{bf['evaluate_bootstrap_s']:.1f} s; the 17 intervals of the old code: "
            f"{bf['before_17_intervals_s']:.1f} s"
        )
    if "agreement" in result:
        lines += [
            "",
            "| interval (candidate 0) | new | before | low diff / MC sd | high diff / MC sd |",
            "|---|---|---|---:|---:|",
        ]
        for k, v in result["agreement"].items():
            if k == "ips_replicate_sd":
                continue
            lines.append(
                f"| {k} | [{v['new'][0]:.5f}, {v['new'][1]:.5f}] | "
                f"[{v['old'][0]:.5f}, {v['old'][1]:.5f}] | "
                f"{v['low_diff_in_mc_sd']:+.2f} | {v['high_diff_in_mc_sd']:+.2f} |"
            )
        sd = result["agreement"]["ips_replicate_sd"]
        lines.append("")
        lines.append(
            "IPS replicate sd / analytical sd(w r)/sqrt(n) (B = 1000): "
            + "; ".join(
                f"{code} {v['mean_sd_over_analytic']:.3f} +- {v['se']:.3f} ({v['seeds']} seeds)"
                for code, v in sd.items()
            )
        )
    if result.get("coverage"):
        lines += [
            "",
            "| n | code | counts | estimator | coverage (MC se) | mean width |",
            "|---:|---|---|---|---|---:|",
        ]
        for row in result["coverage"]:
            lines.append(
                f"| {row['n']:,} | {row['code']} | {row['resampling']} | "
                f"{row['estimator']} | {row['coverage']:.3f} ({row['mc_se']:.3f}) | "
                f"{row['mean_width']:.4f} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--rows", type=int, default=None)
    parser.add_argument("--resamples", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument(
        "--before-rev",
        default=DEFAULT_BEFORE_REV,
        help="git revision of the code before (default %(default)s)",
    )
    parser.add_argument("--no-before", action="store_true", help="skip the old code")
    parser.add_argument(
        "--before-full",
        action="store_true",
        help="also time the 17 old intervals and today's evaluate once",
    )
    parser.add_argument("--coverage", action="store_true", help="run the coverage study")
    parser.add_argument("--coverage-reps", type=int, default=None)
    parser.add_argument("--skip-cold", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    n = args.rows or sizes["rows"]
    b = args.resamples or sizes["resamples"]
    rounds = args.rounds or sizes["rounds"]
    before = (
        None
        if args.no_before
        else load_before(args.before_rev, "ope/intervals/bootstrap.py", "ope_bootstrap_before")
    )
    started = time.perf_counter()
    cont = continuous_data(n)
    result: dict[str, Any] = {
        "quick": args.quick,
        "rows": n,
        "resamples": b,
        "rounds": rounds,
        "before_rev": None if before is None else args.before_rev,
        "timings": {},
    }
    result["timings"]["continuous"] = timings(cont, b, rounds, before)
    result["timings"]["discrete"] = timings(discrete_data(n), b, rounds, None)
    if not args.skip_cold:
        result["cold"] = {
            "numba cache on disk": cold(n, b, fresh_cache=False),
            "empty numba cache (compiles)": cold(n, b, fresh_cache=True),
        }
    if before is not None:
        result["agreement"] = agreement(cont, max(b, 2000), before)
        if args.before_full:
            result["before_full"] = before_full(cont, b, before)
    if args.coverage:
        reps = args.coverage_reps or (60 if args.quick else 400)
        result["coverage"] = coverage([2_000, 20_000], reps, 1000, before)
    result["seconds"] = time.perf_counter() - started
    text = markdown(result)
    result["markdown"] = text
    print(text)
    write_result(NAME, result, out=args.out)
    return result


if __name__ == "__main__":
    main()
