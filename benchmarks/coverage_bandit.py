"""Coverage study of ope's confidence intervals on bandit designs with exact ground truth.

Usage::

    python benchmarks/coverage_bandit.py            # full study: 1000 replications, n up to 100,000
    python benchmarks/coverage_bandit.py --quick    # a short smoke version (200 replications)
    python benchmarks/coverage_bandit.py --reps 500 --sizes 100,1000,10000

For each design, sample size ``n`` and method it prints the empirical coverage of the nominal
95% interval (with its Monte Carlo standard error) and the mean width, as a markdown table.
Coverage is of the **policy's value** for every method; for the clipped IPS methods whose
stated target (``Estimate.target``) is the clipped value ``r_lo + E[min(w, R) (r - r_lo)]``
(normal and bernstein, whose clip binds in every design) a second row gives their coverage of
that clipped value.

Designs (finite contexts, actions and two-point rewards ``r_lo + (r_hi - r_lo) * Bernoulli``,
so the target value is an exact finite sum, not a Monte Carlo estimate):

``mild``
    Logging propensities at least 0.06, a target that differs from it; weights at most 5
    (clipped IPS clips at 3).
``heavy``
    The logger gives action 0 propensity 0.005-0.01 in every context, and the target plays it
    half of the time: weights up to 86, a heavy right tail (clipped IPS clips at 20), where
    asymptotic intervals fail at small ``n``.
``shifted [10, 11]``
    ``mild`` with rewards in [10, 11] (the reward range does not start at 0).
``shifted [-1, 3]``
    ``heavy`` with rewards in [-1, 3] (a range across 0).
``rare large``
    ``mild`` logging, rewards 0 or 100 with probability 0.002-0.02 (a rare large reward; the
    value, about 0.9, sits near the lower edge of the range [0, 100]).
``edge``
    ``heavy`` logging, rewards in [0, 1] with means 0.95-0.995 (the value near the upper edge).

How it is computed, and why it is the library's code path. A sample of ``n`` i.i.d. rows is a
multinomial count vector over the (context, action, reward) cells; drawing the counts directly
for a block of replications at once makes every moment-based statistic (means, unbiased
variances of IPS, clipped IPS, SNIPS and DR terms) one matrix product over replications. The
intervals themselves are computed by the library functions (``ope.intervals.asymptotic``,
``ope.intervals.bounded``, ``ope.intervals.likelihood``, ``ope.intervals.betting``); empirical
likelihood receives the expanded rows and betting the rows in a uniformly random order (counts
plus a random order are exactly an i.i.d. sequence). The bootstrap resamples the cells
multinomially, which is the same distribution as resampling rows. Before the study, an
agreement check computes the same intervals through the public estimator API
(``ope.estimators.IPS().estimate(...).ci(method=...)`` and friends) on expanded rows and
requires them to match the fast path to 1e-8.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import math
import sys
import time
import warnings
from dataclasses import dataclass, field
from types import ModuleType
from typing import Final

import numpy as np

from ope.intervals.asymptotic import normal_interval, t_interval
from ope.intervals.betting import betting_interval
from ope.intervals.bounded import bernstein_interval, bottou_interval, hoeffding_interval
from ope.intervals.likelihood import empirical_likelihood_interval

CONFIDENCE_LEVEL: Final = 0.95
#: bootstrap resamples per replication (percentile method)
N_RESAMPLES: Final = 1000
#: replications drawn together in one multinomial block (bounds memory at n = 100,000)
BLOCK: Final = 50
#: methods whose guarantee holds for every n (given the a priori bounds), for their target
FINITE_SAMPLE: Final = (
    "IPS hoeffding",
    "IPS bernstein",
    "IPS betting",
    "clipped IPS bottou",
    "clipped IPS bernstein",
)
#: methods whose stated target is the clipped value (Estimate.target when the clip binds)
CLIPPED_TARGET: Final = ("clipped IPS normal", "clipped IPS bernstein")
METHODS: Final = (
    "IPS normal",
    "IPS t",
    "IPS bootstrap",
    "IPS hoeffding",
    "IPS bernstein",
    "IPS empirical_likelihood",
    "IPS betting",
    "clipped IPS bottou",
    "clipped IPS normal",
    "clipped IPS bernstein",
    "SNIPS normal",
    "SNIPS bootstrap",
    "DR normal",
)
FULL_SIZES: Final = (100, 1_000, 10_000, 100_000)
FULL_REPS: Final = 1000
QUICK_SIZES: Final = (100, 1_000)
QUICK_REPS: Final = 200


@dataclass(frozen=True)
class Design:
    """A finite contextual bandit with a logging and a target policy.

    Rewards are ``lo + (hi - lo) * Bernoulli(q)`` with ``(lo, hi) = reward_range``; ``q`` and
    ``q_hat`` are on the Bernoulli scale.
    """

    name: str
    p_context: np.ndarray  # (X,)
    logging: np.ndarray  # (X, A)
    target: np.ndarray  # (X, A)
    q: np.ndarray  # (X, A) success probabilities
    q_hat: np.ndarray  # (X, A) a noisy reward model for DR (Bernoulli scale)
    clip: float  # clip level of clipped IPS (Bottou)
    reward_range: tuple[float, float] = (0.0, 1.0)
    cells: dict[str, np.ndarray] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        x_n, a_n = self.q.shape
        lo, hi = self.reward_range
        xs, acts, bs = np.meshgrid(np.arange(x_n), np.arange(a_n), [0.0, 1.0], indexing="ij")
        xs, acts, bs = xs.ravel(), acts.ravel(), bs.ravel()
        rs = lo + (hi - lo) * bs
        p_reward = np.where(bs == 1.0, self.q[xs, acts], 1.0 - self.q[xs, acts])
        prob = self.p_context[xs] * self.logging[xs, acts] * p_reward
        w = self.target[xs, acts] / self.logging[xs, acts]
        q_hat = lo + (hi - lo) * self.q_hat
        qhat_target = np.sum(self.target * q_hat, axis=1)
        cells = {
            "prob": prob / prob.sum(),
            "w": w,
            "r": rs,
            "propensity": self.logging[xs, acts],
            "target_propensity": self.target[xs, acts],
            "q_logged": q_hat[xs, acts],
            "q_target": qhat_target[xs],
        }
        cells["dr"] = cells["q_target"] + w * (rs - cells["q_logged"])
        object.__setattr__(self, "cells", cells)

    @property
    def truth(self) -> float:
        """Exact value of the target policy."""
        lo, hi = self.reward_range
        return lo + (hi - lo) * float(np.sum(self.p_context[:, None] * self.target * self.q))

    @property
    def clipped_truth(self) -> float:
        """Exact clipped value ``r_lo + E[min(w, clip) (r - r_lo)]`` (clipped IPS's target)."""
        c = self.cells
        lo = self.reward_range[0]
        return lo + float(c["prob"] @ (np.minimum(c["w"], self.clip) * (c["r"] - lo)))

    @property
    def max_weight(self) -> float:
        """A priori weight bound: the largest ratio over all contexts and actions."""
        return float(np.max(self.target / self.logging))


def make_designs(seed: int = 2024, *, extended: bool = True) -> list[Design]:
    """The designs; ``extended=False``: the original two (``mild``, ``heavy``) only."""
    rng = np.random.default_rng(seed)
    n_x, n_a = 10, 5
    p_x = rng.dirichlet(np.full(n_x, 5.0))
    q = rng.uniform(0.1, 0.9, size=(n_x, n_a))

    def softmax(z: np.ndarray) -> np.ndarray:
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def noisy(qm: np.ndarray) -> np.ndarray:
        return np.clip(qm + rng.normal(0.0, 0.15, size=qm.shape), 0.01, 0.99)

    mild_logging = 0.7 * softmax(rng.normal(size=(n_x, n_a))) + 0.3 / n_a
    mild_target = softmax(2.0 * rng.normal(size=(n_x, n_a)))
    mild = Design("mild", p_x, mild_logging, mild_target, q, noisy(q), clip=3.0)

    q_heavy = q.copy()
    q_heavy[:, 0] = 0.85  # the rare action is the good one
    rare = rng.uniform(0.005, 0.01, size=n_x)
    rest = 0.5 * rng.dirichlet(np.full(n_a - 1, 5.0), size=n_x) + 0.5 / (n_a - 1)
    heavy_logging = np.column_stack([rare, (1.0 - rare)[:, None] * rest])
    heavy_target = np.column_stack([np.full(n_x, 0.5), np.full((n_x, n_a - 1), 0.5 / (n_a - 1))])
    heavy = Design("heavy", p_x, heavy_logging, heavy_target, q_heavy, noisy(q_heavy), clip=20.0)
    designs = [mild, heavy]
    if not extended:
        return designs
    shifted = Design(
        "shifted [10, 11]",
        p_x,
        mild_logging,
        mild_target,
        q,
        noisy(q),
        clip=3.0,
        reward_range=(10.0, 11.0),
    )
    across = Design(
        "shifted [-1, 3]",
        p_x,
        heavy_logging,
        heavy_target,
        q_heavy,
        noisy(q_heavy),
        clip=20.0,
        reward_range=(-1.0, 3.0),
    )
    q_rare = rng.uniform(0.002, 0.02, size=(n_x, n_a))
    rare = Design(
        "rare large",
        p_x,
        mild_logging,
        mild_target,
        q_rare,
        np.clip(q_rare + rng.normal(0.0, 0.005, size=q_rare.shape), 0.0, 1.0),
        clip=3.0,
        reward_range=(0.0, 100.0),
    )
    q_edge = rng.uniform(0.95, 0.995, size=(n_x, n_a))
    edge = Design(
        "edge",
        p_x,
        heavy_logging,
        heavy_target,
        q_edge,
        np.clip(q_edge + rng.normal(0.0, 0.03, size=q_edge.shape), 0.0, 1.0),
        clip=20.0,
    )
    return designs + [shifted, across, rare, edge]


def _mean_var(counts: np.ndarray, values: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-replication mean and unbiased variance of per-row values given cell counts."""
    s1 = counts @ values
    s2 = counts @ (values * values)
    mean = s1 / n
    var = np.maximum((s2 - s1 * mean) / (n - 1), 0.0)
    return mean, var


def _block_intervals(
    design: Design, counts: np.ndarray, n: int, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """(low, high) of every method for each replication of a block, shape (reps, 2).

    As ``Estimate.ci`` does, every interval is intersected with the reward range, where the
    value (and clipped IPS's clipped value) lies.
    """
    c = design.cells
    w, r = c["w"], c["r"]
    lo, hi = design.reward_range
    level, bound = CONFIDENCE_LEVEL, design.max_weight
    cw = np.minimum(w, design.clip)
    ips_m, ips_v = _mean_var(counts, w * r, n)
    cw_m, cw_v = _mean_var(counts, cw, n)
    # clipped IPS on the shifted scale: r_lo + mean(min(w, R) (r - r_lo))
    cwr_m, cwr_v = _mean_var(counts, cw * (r - lo), n)
    dr_m, dr_v = _mean_var(counts, c["dr"], n)
    sum_w, sum_wr = counts @ w, counts @ (w * r)
    reps = counts.shape[0]
    out = {m: np.empty((reps, 2)) for m in METHODS}
    alpha = 1.0 - level
    ips_low, ips_high = min(0.0, bound * lo), max(0.0, bound * hi)

    def rng_clip(iv: tuple[float, float]) -> np.ndarray:
        return np.clip(np.asarray(iv, dtype=float), lo, hi)

    for i in range(reps):
        k = counts[i]
        se = math.sqrt(ips_v[i] / n)
        out["IPS normal"][i] = rng_clip(normal_interval(ips_m[i], se, confidence_level=level))
        out["IPS t"][i] = rng_clip(t_interval(ips_m[i], se, n, confidence_level=level))
        # the terms w*r lie in [min(0, bound lo), max(0, bound hi)], the value in [lo, hi]
        out["IPS hoeffding"][i] = rng_clip(
            hoeffding_interval(ips_m[i], n, low=ips_low, high=ips_high, confidence_level=level)
        )
        out["IPS bernstein"][i] = rng_clip(
            bernstein_interval(
                ips_m[i], ips_v[i], n, low=ips_low, high=ips_high, confidence_level=level
            )
        )
        out["clipped IPS bottou"][i] = bottou_interval(
            cw_m[i],
            cw_v[i],
            cwr_m[i],
            cwr_v[i],
            n,
            max_weight=design.clip,
            reward_range=(lo, hi),
            confidence_level=level,
        )[:2]
        out["clipped IPS normal"][i] = rng_clip(
            normal_interval(lo + cwr_m[i], math.sqrt(cwr_v[i] / n), confidence_level=level)
        )
        b_lo, b_hi = bernstein_interval(
            cwr_m[i], cwr_v[i], n, low=0.0, high=design.clip * (hi - lo), confidence_level=level
        )
        out["clipped IPS bernstein"][i] = rng_clip((lo + b_lo, lo + b_hi))
        out["DR normal"][i] = rng_clip(
            normal_interval(dr_m[i], math.sqrt(dr_v[i] / n), confidence_level=level)
        )
        if sum_w[i] > 0:
            sn = sum_wr[i] / sum_w[i]
            sn_se = math.sqrt(n / (n - 1) * float(k @ (w * w * (r - sn) ** 2))) / sum_w[i]
            out["SNIPS normal"][i] = rng_clip(normal_interval(sn, sn_se, confidence_level=level))
        else:  # no weight mass at all: SNIPS is undefined, the interval is the whole range
            out["SNIPS normal"][i] = (lo, hi)
        rows = np.repeat(np.arange(k.size), k)
        out["IPS empirical_likelihood"][i] = empirical_likelihood_interval(
            w[rows], r[rows], reward_range=(lo, hi), weight_bound=bound, confidence_level=level
        )
        order = rng.permutation(rows)
        out["IPS betting"][i] = betting_interval(
            w[order], r[order], reward_range=(lo, hi), confidence_level=level
        )
        # percentile bootstrap: resample cells multinomially (= resampling rows)
        nz = np.flatnonzero(k)
        boot = rng.multinomial(n, k[nz] / n, size=N_RESAMPLES)
        b_wr, b_w = boot @ (w * r)[nz], boot @ w[nz]
        q = [alpha / 2, 1 - alpha / 2]
        out["IPS bootstrap"][i] = rng_clip(np.quantile(b_wr / n, q))
        ok = b_w > 0
        out["SNIPS bootstrap"][i] = (
            rng_clip(np.quantile(b_wr[ok] / b_w[ok], q)) if ok.any() else (lo, hi)
        )
    return out


@dataclass
class Cell:
    design: str
    n: int
    method: str  # "<method>" (coverage of the policy's value) or "<method> -> clipped value"
    coverage: float
    mc_se: float
    mean_width: float


def run_cell(design: Design, n: int, reps: int, rng: np.random.Generator) -> list[Cell]:
    parts: dict[str, list[np.ndarray]] = {m: [] for m in METHODS}
    done = 0
    while done < reps:
        size = min(BLOCK, reps - done)
        counts = rng.multinomial(n, design.cells["prob"], size=size)
        for method, iv in _block_intervals(design, counts, n, rng).items():
            parts[method].append(iv)
        done += size
    cells = []
    for method, label, value in rows_of(design):
        iv = np.concatenate(parts[method])
        hit = (iv[:, 0] <= value) & (value <= iv[:, 1])
        cov = float(hit.mean())
        cells.append(
            Cell(
                design.name,
                n,
                label,
                cov,
                math.sqrt(cov * (1 - cov) / reps),
                float(np.mean(iv[:, 1] - iv[:, 0])),
            )
        )
    return cells


def row_labels() -> list[str]:
    """Every row of the table: each method (policy value), then the clipped-value rows."""
    return list(METHODS) + [f"{m} -> clipped value" for m in CLIPPED_TARGET]


def rows_of(design: Design) -> list[tuple[str, str, float]]:
    """(method, row label, the value its coverage is of) for every row of the table."""
    return [(m, m, design.truth) for m in METHODS] + [
        (m, f"{m} -> clipped value", design.clipped_truth) for m in CLIPPED_TARGET
    ]


def check_api_agreement(designs: list[Design], rng: np.random.Generator) -> int:
    """Compare the fast path with the public estimator API on a few samples; return #checks."""
    from ope import estimators as oe
    from ope.exceptions import OPEWarning

    with warnings.catch_warnings():
        # small heavy-tailed samples trigger overlap warnings: expected here
        warnings.simplefilter("ignore", OPEWarning)
        return _api_checks(designs, rng, oe)


def _api_checks(designs: list[Design], rng: np.random.Generator, oe: ModuleType) -> int:
    checks = 0
    level = CONFIDENCE_LEVEL
    for design in designs:
        c = design.cells
        for n in (100, 1000):
            counts = rng.multinomial(n, c["prob"], size=2)
            fast = _block_intervals(design, counts, n, np.random.default_rng(0))
            for i, k in enumerate(counts):
                rows = np.repeat(np.arange(k.size), k)
                order = np.random.default_rng(0).permutation(rows)
                rr = design.reward_range
                args = dict(
                    reward=c["r"][rows],
                    logging_propensity=c["propensity"][rows],
                    target_propensity=c["target_propensity"][rows],
                    reward_range=rr,
                )
                ips = oe.IPS().estimate(**args)
                clipped = oe.ClippedIPS(max_weight=design.clip).estimate(**args)
                api = {
                    "IPS normal": ips.ci(level, "normal"),
                    "IPS t": ips.ci(level, "t"),
                    "IPS hoeffding": ips.ci(level, "hoeffding", weight_bound=design.max_weight),
                    "IPS bernstein": ips.ci(level, "bernstein", weight_bound=design.max_weight),
                    "IPS empirical_likelihood": ips.ci(
                        level, "empirical_likelihood", weight_bound=design.max_weight
                    ),
                    "clipped IPS bottou": clipped.ci(level, "bottou")[:2],
                    "clipped IPS normal": clipped.ci(level, "normal"),
                    "clipped IPS bernstein": clipped.ci(level, "bernstein"),
                    "SNIPS normal": oe.SNIPS().estimate(**args).ci(level, "normal"),
                    "DR normal": oe.DR()
                    .estimate(q_logged=c["q_logged"][rows], q_target=c["q_target"][rows], **args)
                    .ci(level, "normal"),
                }
                for method, (lo, hi) in api.items():
                    f_lo, f_hi = fast[method][i]
                    if not (
                        np.isclose(lo, f_lo, rtol=1e-8, atol=1e-10)
                        and np.isclose(hi, f_hi, rtol=1e-8, atol=1e-10)
                    ):
                        raise AssertionError(
                            f"{design.name} n={n} {method}: API ({lo}, {hi}) != fast path "
                            f"({f_lo}, {f_hi})"
                        )
                    checks += 1
                # betting: same rows in the same order through the API
                lo, hi = (
                    oe.IPS()
                    .estimate(
                        reward=c["r"][order],
                        logging_propensity=c["propensity"][order],
                        target_propensity=c["target_propensity"][order],
                        reward_range=rr,
                    )
                    .ci(level, "betting")
                )
                ref = betting_interval(c["w"][order], c["r"][order], reward_range=rr)
                if not (
                    np.isclose(lo, ref.low, atol=1e-10) and np.isclose(hi, ref.high, atol=1e-10)
                ):
                    raise AssertionError(f"{design.name} n={n} betting: API != direct")
                checks += 1
    return checks


def run(
    quick: bool = False,
    seed: int = 12345,
    reps: int | None = None,
    sizes: tuple[int, ...] | None = None,
    check_api: bool = True,
    log=print,
) -> list[Cell]:
    """Run the study; returns one :class:`Cell` per design, size and method."""
    designs = make_designs()
    rng = np.random.default_rng(seed)
    reps = reps if reps is not None else (QUICK_REPS if quick else FULL_REPS)
    sizes = sizes if sizes is not None else (QUICK_SIZES if quick else FULL_SIZES)
    if check_api:
        try:
            checks = check_api_agreement(designs, np.random.default_rng(seed + 1))
            log(f"API agreement: fast path == public estimator API on {checks} intervals")
        except ImportError as exc:  # the estimator module is not importable
            log(f"API agreement skipped: {exc}")
    results: list[Cell] = []
    for design in designs:
        log(
            f"design {design.name}: truth {design.truth:.6f}, clipped value "
            f"{design.clipped_truth:.6f}, reward_range {design.reward_range}, a priori weight "
            f"bound {design.max_weight:.1f}, clip {design.clip:g}"
        )
        for n in sizes:
            t0 = time.perf_counter()
            results.extend(run_cell(design, n, reps, rng))
            log(f"  n={n:>7,}: {reps} replications in {time.perf_counter() - t0:.1f} s")
    return results


def markdown(results: list[Cell], reps: int) -> str:
    sizes = sorted({c.n for c in results})
    lines = []
    for design in dict.fromkeys(c.design for c in results):
        lines.append(
            f"**{design}** — coverage (± Monte Carlo s.e.) / mean width, nominal 95%, "
            f"{reps} replications\n"
        )
        lines.append("| method | " + " | ".join(f"n = {n:,}" for n in sizes) + " |")
        lines.append("|---|" + "---|" * len(sizes))
        for method in row_labels():
            row = []
            for n in sizes:
                (cell,) = [
                    c for c in results if c.design == design and c.n == n and c.method == method
                ]
                row.append(f"{cell.coverage:.3f} ± {cell.mc_se:.3f} / {cell.mean_width:.3g}")
            base = method.split(" -> ")[0]
            covers_target = (base in CLIPPED_TARGET) == method.endswith("clipped value")
            tag = " *" if base in FINITE_SAMPLE and covers_target else ""
            lines.append(f"| {method}{tag} | " + " | ".join(row) + " |")
        lines.append("")
    lines.append(
        "`*` finite-sample guarantee for the row's value (given the a priori bounds). "
        "Rows without `-> clipped value` are coverage of the policy's value."
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 replications, n <= 1000")
    parser.add_argument("--reps", type=int, default=None, help="replications per design and n")
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument(
        "--sizes",
        type=str,
        default=None,
        help="comma-separated sample sizes (default 100,1000,10000,100000)",
    )
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    sizes = tuple(int(x) for x in args.sizes.split(",")) if args.sizes else None
    results = run(quick=args.quick, seed=args.seed, reps=args.reps, sizes=sizes, log=log)
    reps = args.reps or (QUICK_REPS if args.quick else FULL_REPS)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(
        f"<!-- python benchmarks/coverage_bandit.py{' --quick' if args.quick else ''}"
        f"{f' --reps {args.reps}' if args.reps else ''}"
        f"{f' --sizes {args.sizes}' if args.sizes else ''} ({stamp}, "
        f"{time.perf_counter() - t0:.0f} s) -->"
    )
    print(markdown(results, reps))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
