"""Sampling weights (DSJSON ``pdrop``): bias and coverage, weighted against unweighted.

Usage::

    python benchmarks/bench_pdrop.py --reps 300                # the committed table
    python benchmarks/bench_pdrop.py --reps 50 --n 5000        # a quick look
    python benchmarks/bench_pdrop.py --reps 300 --out benchmarks/pdrop.md

The design. :class:`ope.simulate.ContextualBandit` (5 actions, 4 segments, seed 0) gives the
exact value of the candidate ``softmax`` on the whole population of logged events. Each
replication draws ``n`` events, then a sampling logger keeps an event of segment ``k`` with
probability ``1 - pdrop_k`` (``pdrop = 0.75, 0.5, 0.25, 0`` for ``segment_0 .. segment_3``,
so the segment with the highest value is the most thinned) and records ``weight = 1 / (1 -
pdrop)``, as a DSJSON export does. On the kept rows it computes, with ``sampling_weight=``
(weighted) and without (unweighted, what ope did before weights were read):

* IPS, SNIPS and DR with normal 95 % intervals (DR's reward model is deliberately wrong:
  ``q_hat = 0.5 q + 0.25`` of the exact means, so its unbiasedness rests on the propensities);
* the percentile bootstrap of IPS (``n_resamples`` Poisson resamples; weighted: the resample
  counts times the sampling weights);
* Vowpal Wabbit's own Gaussian interval (``vw-estimators``' ``estimators.bandits.gaussian``,
  fed ``p_drop``), when that package is installed; otherwise its documented formula
  (``N = sum 1/(1 - p_drop)``, terms ``r w / (1 - p_drop)``, variance of those terms over ``N``
  rows).

It prints one markdown row per method: the mean error against the exact value with its Monte
Carlo standard error, the empirical coverage of the 95 % interval with its binomial standard
error, and the mean width.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import Final

import numpy as np

import ope.estimators as oe
from ope.simulate import ContextualBandit

#: Drop probability of each segment (segment_0 has the highest value and is thinned most).
PDROP: Final = (0.75, 0.5, 0.25, 0.0)
POLICY: Final = "softmax"
CONFIDENCE_LEVEL: Final = 0.95
N_RESAMPLES: Final = 400


def environment() -> ContextualBandit:
    return ContextualBandit(n_actions=5, n_features=3, n_segments=len(PDROP), seed=0)


@dataclass
class Tally:
    """Estimates and intervals of one method over the replications."""

    values: list[float] = field(default_factory=list)
    covered: list[bool] = field(default_factory=list)
    widths: list[float] = field(default_factory=list)

    def add(self, value: float, low: float, high: float, truth: float) -> None:
        self.values.append(value)
        self.covered.append(bool(low <= truth <= high))
        self.widths.append(high - low)

    def row(self, truth: float) -> dict[str, float]:
        v = np.asarray(self.values)
        reps = v.size
        cov = float(np.mean(self.covered))
        return {
            "bias": float(v.mean() - truth),
            "bias_se": float(v.std(ddof=1) / math.sqrt(reps)),
            "coverage": cov,
            "coverage_se": math.sqrt(cov * (1 - cov) / reps) if 0 < cov < 1 else 0.0,
            "width": float(np.mean(self.widths)),
        }


def _vw_interval(
    p: np.ndarray, r: np.ndarray, t: np.ndarray, pdrop: np.ndarray
) -> tuple[float, float, float, str]:
    """VW's Gaussian interval of IPS with p_drop: (estimate, low, high, source)."""
    try:
        from estimators.bandits import gaussian  # the vw-estimators package
    except ImportError:
        s = 1.0 / (1.0 - pdrop)
        big_n = float(s.sum())
        terms = r * t / p * s
        est = float(terms.sum() / big_n)
        var = (float(np.sum(terms**2)) - float(terms.sum()) ** 2 / big_n) / (big_n - 1.0)
        half = 1.959963984540054 * math.sqrt(max(var, 0.0) / big_n)
        return est, est - half, est + half, "formula"
    iv = gaussian.Interval()
    for a, b, c, d in zip(p.tolist(), r.tolist(), t.tolist(), pdrop.tolist()):  # its API
        iv.add_example(p_log=a, r=b, p_pred=c, p_drop=d)
    low, high = iv.get(alpha=1 - CONFIDENCE_LEVEL)
    return (low + high) / 2, low, high, "vw-estimators"


def replicate(
    env: ContextualBandit,
    n: int,
    rng: np.random.Generator,
    tallies: dict[str, Tally],
    truth: float,
    *,
    vw: bool = True,
) -> int:
    """One replication: draw, thin, estimate; returns the number of kept rows."""
    table = env.sample(n, rng=rng, oracle=True)
    seg = np.asarray(table.column("segment").to_pylist())
    seg_index = np.searchsorted(np.array(env.segments), seg)
    pdrop = np.asarray(PDROP)[seg_index]
    kept = rng.uniform(size=n) >= pdrop
    col = lambda name: table.column(name).to_numpy()[kept]  # noqa: E731
    r, p, t = col("reward"), col("propensity"), col(f"target__{POLICY}")
    q_logged = 0.5 * col("q_logged") + 0.25
    q_target = 0.5 * col(f"q_target__{POLICY}") + 0.25
    s = 1.0 / (1.0 - pdrop[kept])
    for label, weight in (("weighted", s), ("unweighted", None)):
        ips = oe.IPS().estimate(r, p, t, sampling_weight=weight)
        snips = oe.SNIPS().estimate(r, p, t, sampling_weight=weight)
        dr = oe.DR().estimate(r, p, t, q_logged=q_logged, q_target=q_target, sampling_weight=weight)
        for name, est in (("IPS", ips), ("SNIPS", snips), ("DR", dr)):
            tallies[f"{name} normal, {label}"].add(est.value, est.ci_low, est.ci_high, truth)
        boot = ips.ci(CONFIDENCE_LEVEL, "bootstrap", rng=rng, n_resamples=N_RESAMPLES)
        tallies[f"IPS bootstrap, {label}"].add(ips.value, boot.low, boot.high, truth)
    if vw:
        value, low, high, source = _vw_interval(p, r, t, pdrop[kept])
        tallies[f"VW gaussian (p_drop), {source}"].add(value, low, high, truth)
    return int(kept.sum())


def run(reps: int, n: int, *, seed: int = 0, vw: bool = True) -> tuple[dict[str, dict], dict]:
    """The study: ``{method: row}`` and a description of the run."""
    env = environment()
    truth = env.true_value(POLICY)
    rng = np.random.default_rng(seed)
    tallies: dict[str, Tally] = {}
    for label in ("weighted", "unweighted"):
        for name in ("IPS normal", "SNIPS normal", "DR normal", "IPS bootstrap"):
            tallies[f"{name}, {label}"] = Tally()
    if vw:
        try:
            import estimators.bandits.gaussian  # noqa: F401

            tallies["VW gaussian (p_drop), vw-estimators"] = Tally()
        except ImportError:
            tallies["VW gaussian (p_drop), formula"] = Tally()
    kept = []
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # per-replication notes are not the subject here
        for _ in range(reps):  # loop over replications
            kept.append(replicate(env, n, rng, tallies, truth, vw=vw))
    info = {
        "truth": truth,
        "reps": reps,
        "n": n,
        "mean_kept": float(np.mean(kept)),
        "seconds": time.perf_counter() - start,
        "seed": seed,
    }
    return {k: v.row(truth) for k, v in tallies.items() if v.values}, info


def markdown(rows: dict[str, dict], info: dict) -> str:
    z_band = 3 * math.sqrt(CONFIDENCE_LEVEL * (1 - CONFIDENCE_LEVEL) / info["reps"])
    lines = [
        f"Exact value of `{POLICY}` on the logged population: {info['truth']:.4f}. "
        f"{info['reps']} replications of {info['n']:,} events, segments dropped at pdrop = "
        f"{', '.join(map(str, PDROP))} (mean {info['mean_kept']:,.0f} rows kept); nominal "
        f"coverage {CONFIDENCE_LEVEL:.0%} (3 binomial s.e.: +-{z_band:.3f}).",
        "",
        "| method | bias (MC s.e.) | bias / MC s.e. | coverage (s.e.) | mean width |",
        "|---|---|---|---|---|",
    ]
    for name, row in rows.items():
        z = row["bias"] / row["bias_se"] if row["bias_se"] > 0 else math.inf
        lines.append(
            f"| {name} | {row['bias']:+.4f} ({row['bias_se']:.4f}) | {z:+.1f} | "
            f"{row['coverage']:.3f} ({row['coverage_se']:.3f}) | {row['width']:.4f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--n", type=int, default=20_000, help="events per replication, before drops")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-vw", action="store_true", help="skip the VW interval")
    ap.add_argument("--out", help="also write the markdown table to this file")
    args = ap.parse_args(argv)
    rows, info = run(args.reps, args.n, seed=args.seed, vw=not args.no_vw)
    text = markdown(rows, info)
    command = " ".join(["python benchmarks/bench_pdrop.py", *(argv or sys.argv[1:])])
    footer = f"\nCommand: `{command}` ({info['seconds']:.0f} s).\n"
    sys.stdout.write(text + footer)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write("# Sampling weights (pdrop): weighted against unweighted\n\n" + text + footer)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
