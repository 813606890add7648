"""Evidence for ope.learning: learned-policy quality against exact ground truth, the gate's
false-approval rate, and fit time at scale.

Supervised-to-bandit conversion (Agarwal et al. 2014; Swaminathan & Joachims 2015): a classifier
data set becomes logged bandit feedback by letting a logging policy pick an action (a class) for
each context and revealing only the reward of that action, ``1[action = label]``. The logging
policy mixes a weak classifier with the uniform policy,
``pi_0 = mix * onehot(weak(x)) + (1 - mix) * uniform``; ``mix`` sets the overlap (0.95: weak,
rarely tried actions; 0.5: good overlap). Because every label is known, the value of any policy
on held-out rows is exact: ``V(pi) = mean_i sum_a pi(a | x_i) 1[a = y_i]``.

Per setting and seed: fit IPS maximization, the direct method (greedy on per-action ridge) and
the conservative learner on the bandit rows of a training split; score each exactly on a test
split. The gate certifies, on a separate certification split, (a) the conservative policy and
(b) a policy built to be slightly worse than logging, ``0.9 pi_0 + 0.1 uniform``; approving a
policy whose exact value is below logging's is a false approval.

Catalog targets, ``--catalog``, in one run: the Python path of ``ope learn`` (read the
logs, ``learn_from_logs`` with the CLI's defaults, ``write_learner_policy_table``) on

* the bundled sample (``ope.load_sample()``: 100,000 events, 20 candidates each, 4,283 actions
  among the candidates), and
* 1M rows x 50 items x 50 context features (no candidate sets: every row may take every item;
  epsilon-greedy logging around a weak classifier, Bernoulli rewards), written as a
  50M-row policy table,

each in a fresh interpreter (wall time and peak resident memory, ``VmHWM``), interleaved with
a bare ``pyarrow.parquet.read_table`` of the same file (the floor of any command that reads it).
``--layouts`` times one objective evaluation on the two candidate-set layouts (the figures
behind ``ope.learning._support.SCATTER_FACTOR``).

Run ``python benchmarks/bench_learning.py`` (``--quick`` for a smoke run; ``--catalog`` or
``--layouts`` for those sections only).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Callable

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits, load_wine
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import data_path, format_table, peak_rss, write_result  # noqa: E402

from ope.learning import (  # noqa: E402
    ConservativePolicyLearner,
    DirectMethodPolicyLearner,
    IPSPolicyLearner,
    SafetyGate,
)
from ope.learning._common import Standardizer  # noqa: E402
from ope.learning._learners import _PerAction, _Problem, _problem, policy_objective  # noqa: E402
from ope.learning._support import GatherLayout, ScatterLayout, Support  # noqa: E402

CONFIDENCE = 0.95


def synthetic_data(rng: np.random.Generator, n: int = 3000, d: int = 10, k: int = 5):
    """Linear multiclass problem with label noise (fixed class directions)."""
    B = np.random.default_rng(123).normal(size=(k, d))
    X = rng.normal(size=(n, d))
    y = np.argmax(X @ B.T + 0.5 * rng.gumbel(size=(n, k)), axis=1)
    return X, y


DATASETS: dict[str, Callable[[np.random.Generator], tuple[np.ndarray, np.ndarray]]] = {
    "digits": lambda rng: load_digits(return_X_y=True),
    "wine": lambda rng: load_wine(return_X_y=True),
    "breast_cancer": lambda rng: load_breast_cancer(return_X_y=True),
    "synthetic": synthetic_data,
}


def exact_value(P: np.ndarray, y: np.ndarray, noisy: bool = False) -> float:
    accuracy = float(np.mean(P[np.arange(y.size), y]))
    return NOISE_BASE + NOISE_LIFT * accuracy if noisy else accuracy


#: settings with noisy rewards: reward ~ Bernoulli(NOISE_BASE + NOISE_LIFT * 1[a = y]), so
#: V(pi) = NOISE_BASE + NOISE_LIFT * mean_i pi(y_i | x_i), still exact
NOISE_BASE, NOISE_LIFT = 0.2, 0.6


def one_run(name: str, mix: float, seed: int, passes: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    noisy = name.endswith("+noise")
    X, y = DATASETS[name.removesuffix("+noise")](rng)
    X = StandardScaler().fit_transform(X)
    k = int(y.max()) + 1
    perm = rng.permutation(y.size)
    # 10% to train the weak logging classifier, 45% logged for training, 15% logged for
    # certification, 30% held out for exact values
    n = y.size
    cut = np.cumsum([int(0.10 * n), int(0.45 * n), int(0.15 * n)])
    weak_rows, train_rows, cert_rows, test_rows = np.split(perm, cut)
    weak = LogisticRegression(C=0.01, max_iter=200).fit(X[weak_rows], y[weak_rows])

    def logging_proba(Xs: np.ndarray) -> np.ndarray:
        P = np.full((Xs.shape[0], k), (1 - mix) / k)
        # the weak classifier may not have seen every class; map its labels to columns
        P[np.arange(Xs.shape[0]), weak.classes_[np.argmax(weak.predict_proba(Xs), axis=1)]] += mix
        return P

    def log(rows: np.ndarray):
        Xr = np.repeat(X[rows], passes, axis=0)
        yr = np.repeat(y[rows], passes)
        P0 = logging_proba(Xr)
        a = (P0.cumsum(axis=1) > rng.uniform(size=(Xr.shape[0], 1))).argmax(axis=1)
        hit = (a == yr).astype(float)
        r = rng.binomial(1, NOISE_BASE + NOISE_LIFT * hit).astype(float) if noisy else hit
        return Xr, yr, a, r, P0[np.arange(a.size), a], P0

    Xtr, _, atr, rtr, ptr, _ = log(train_rows)
    Xce, yce, ace, rce, pce, P0ce = log(cert_rows)
    Xte, yte = X[test_rows], y[test_rows]
    P0te = logging_proba(Xte)
    out = {"logging": exact_value(P0te, yte, noisy)}
    labels = np.arange(k)
    # candidates: every class, so each learner's classes_ cover all k actions
    cands = np.ones((atr.size, k), dtype=bool)
    learners = {
        "ips": IPSPolicyLearner(),
        "dm": DirectMethodPolicyLearner(),
        "conservative": ConservativePolicyLearner(),
    }
    fitted = {}
    for key, est in learners.items():
        est.fit(Xtr, atr, rtr, ptr, candidates=cands if len(np.unique(atr)) < k else None)
        fitted[key] = est
        proba = np.zeros((yte.size, k))
        proba[:, np.searchsorted(labels, est.classes_)] = est.predict_proba(Xte)
        out[key] = exact_value(proba, yte, noisy)
    # the gate: (a) the conservative policy, (b) a policy slightly worse than logging
    cons = fitted["conservative"]
    full = np.zeros((yce.size, k))
    full[:, np.searchsorted(labels, cons.classes_)] = cons.predict_proba(Xce)
    pe_cons = full[np.arange(yce.size), ace]
    # the clip level was chosen on the training split, so it is fixed before certification
    c_cons = SafetyGate(
        reward_range=(0.0, 1.0), confidence_level=CONFIDENCE, max_weight=cons.max_weight_
    ).certify(pe_cons, None, ace, rce, pce, name="conservative", n_train=atr.size)
    out["cons_approved"] = float(c_cons.approved)
    out["cons_truly_worse"] = float(out["conservative"] < out["logging"])
    # worse policy: 0.9 pi_0 + 0.1 uniform; its weight is at most 0.9 + 0.1 / (1 - mix), known
    # a priori from the logging design
    worse_w = 0.9 + 0.1 / (1.0 - mix)
    pe_worse = 0.9 * pce + 0.1 / k
    v_worse = 0.9 * out["logging"] + 0.1 * exact_value(np.full((yte.size, k), 1.0 / k), yte, noisy)
    for method in ("bernstein", "t"):
        c = SafetyGate(
            reward_range=(0.0, 1.0), confidence_level=CONFIDENCE, ci=method, max_weight=worse_w
        ).certify(pe_worse, None, ace, rce, pce)
        out[f"worse_approved_{method}"] = float(c.approved)
    out["worse_truly_worse"] = float(v_worse < out["logging"])
    out["n_train"] = float(atr.size)
    out["n_certify"] = float(ace.size)
    return out


def quality_table(seeds: int, passes: int, datasets: list[str], mixes: list[float]) -> None:
    print(f"\n## Exact value on held-out rows (mean ± s.e. over {seeds} seeds)\n")
    print(
        "| data set (+noise: Bernoulli rewards) | mix (overlap) | n train / certify | "
        "logging | IPS max | DM greedy | "
        "conservative | cons. approved | worse-policy false approvals: Bernstein / t |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name in datasets:
        for mix in mixes:
            t0 = time.perf_counter()
            runs = [one_run(name, mix, seed, passes) for seed in range(seeds)]
            cols = {key: np.array([r[key] for r in runs]) for key in runs[0]}

            def ms(key: str) -> str:
                v = cols[key]
                return f"{v.mean():.3f} ± {v.std(ddof=1) / np.sqrt(v.size):.3f}"

            worse = cols["worse_truly_worse"] > 0
            fa_b = int(cols["worse_approved_bernstein"][worse].sum())
            fa_t = int(cols["worse_approved_t"][worse].sum())
            cons_false = int((cols["cons_approved"] * cols["cons_truly_worse"]).sum())
            print(
                f"| {name} | {mix} ({'weak' if mix > 0.9 else 'good'}) | "
                f"{int(cols['n_train'][0])} / {int(cols['n_certify'][0])} | {ms('logging')} | "
                f"{ms('ips')} | {ms('dm')} | {ms('conservative')} | "
                f"{int(cols['cons_approved'].sum())}/{seeds} (false: {cons_false}) | "
                f"{fa_b}/{int(worse.sum())} / {fa_t}/{int(worse.sum())} |"
                f"  <!-- {time.perf_counter() - t0:.0f}s -->"
            )


def boundary_false_approvals(reps: int, sizes: list[int]) -> None:
    """Approval rate of a policy exactly as good as logging: the worst case for the gate.

    Two arms that both pay Bernoulli(0.5); logging plays arm 1 with probability 0.3; the
    candidate always plays arm 1, so V(pi) = V(pi_0) and every approval is a false approval.
    The clip level 1 / 0.3 is known a priori from the logging design.
    """
    print(
        f"\n## Gate at the boundary V(pi) = V(pi_0): approval rate over {reps} replications "
        f"(nominal bound {1 - CONFIDENCE:.2f})\n"
    )
    print("| n certify | Bernstein (safe) | t (semi-safe) |")
    print("|---|---|---|")
    for n in sizes:
        rates = {}
        for method in ("bernstein", "t"):
            gate = SafetyGate(
                reward_range=(0.0, 1.0), confidence_level=CONFIDENCE, ci=method, max_weight=1 / 0.3
            )
            rng = np.random.default_rng(n)
            approved = 0
            for _ in range(reps):  # loop over replications, not rows
                action = (rng.uniform(size=n) < 0.3).astype(int)
                reward = rng.binomial(1, 0.5, size=n).astype(float)
                p = np.where(action == 1, 0.3, 0.7)
                approved += gate.certify((action == 1) * 1.0, None, action, reward, p).approved
            rate = approved / reps
            rates[method] = f"{rate:.4f} ± {np.sqrt(max(rate * (1 - rate), 1e-12) / reps):.4f}"
        print(f"| {n:,} | {rates['bernstein']} | {rates['t']} |")


def timing(n: int, d: int, k: int, max_iter: int) -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d))
    B = rng.normal(size=(k, d))
    a = rng.integers(0, k, size=n)
    y = np.argmax(X @ B.T + rng.gumbel(size=(n, k)), axis=1)
    r = (a == y).astype(float)
    p = np.full(n, 1.0 / k)
    # baseline in the same run: one logits product X @ W.T, the unavoidable core of an evaluation
    W = rng.normal(size=(k, d))
    t0 = time.perf_counter()
    for _ in range(3):
        X @ W.T
    matmul = (time.perf_counter() - t0) / 3
    theta = 0.01 * rng.normal(size=k * (d + 1))
    X1 = Standardizer.fit(X, center=True).transform_t(X)
    problem = _problem(X1, Support(n, k), a, r, p)
    model = _PerAction(k, d, True)
    t0 = time.perf_counter()
    for _ in range(3):
        policy_objective(
            theta,
            problem,
            model,
            objective="clipped_ips",
            variance_penalty=1.645,
            max_weight=float(k),
            l2_penalty=1e-3,
        )
    evaluation = (time.perf_counter() - t0) / 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        t0 = time.perf_counter()
        est = ConservativePolicyLearner(max_iter=max_iter).fit(X, a, r, p)
        fit = time.perf_counter() - t0
    print(f"\n## Fit time, n = {n:,}, {d} features, {k} actions\n")
    print("| quantity | seconds | ratio |")
    print("|---|---|---|")
    print(f"| one `X @ W.T` (baseline, same run) | {matmul:.3f} | 1.0 |")
    print(f"| one objective + gradient evaluation | {evaluation:.3f} | {evaluation / matmul:.1f} |")
    print(
        f"| `ConservativePolicyLearner(max_iter={max_iter}).fit` ({est.n_iter_} L-BFGS "
        f"iterations) | {fit:.1f} | {fit / matmul:.0f} |"
    )


# --------------------------------------------------------------------------------------------
# catalog targets: the Python path of `ope learn`, in fresh interpreters
# --------------------------------------------------------------------------------------------
#: what `ope learn LOGS --context-columns ... --out FILE` runs (ope/cli.py, _cmd_learn), with the
#: CLI's defaults: --reward-range 0 1, --certify-fraction 0.5, --gate betting, --seed 0
LEARN_WORKLOAD = """
usage0 = resource.getrusage(resource.RUSAGE_SELF)
logs = read_logs(path)
columns = [c for c in logs.columns if c.startswith("x")]
learner, cert = learn_from_logs(
    logs, context_columns=columns,
    learner=ConservativePolicyLearner(reward_range=(0.0, 1.0), rng=0),
    certify_fraction=0.5, confidence_level=0.95, ci="betting", name="learned", rng=0)
rows = write_learner_policy_table(learner, logs, out, context_columns=columns, name="learned")
usage1 = resource.getrusage(resource.RUSAGE_SELF)
cpu = (usage1.ru_utime + usage1.ru_stime) - (usage0.ru_utime + usage0.ru_stime)
json.dump({"cpu_seconds": cpu, "rows_written": rows, "n_iter": learner.n_iter_,
           "n_actions": int(learner.classes_.size),
           "verdict": cert.verdict, "lower_bound": cert.lower_bound,
           "improvement_lower_bound": cert.improvement_lower_bound}, open(info, "w"))
"""

LEARN_SETUP = """
import json, resource, warnings
warnings.simplefilter("ignore")
from ope.io import read_logs
from ope.learning import ConservativePolicyLearner, learn_from_logs, write_learner_policy_table
from ope.moments import centered_moments
import numpy as np
centered_moments(np.ones(4), np.ones(4), np.ones((4, 1)), max_weight=None)  # load compiled kernels
path, out, info = {path!r}, {out!r}, {info!r}
"""

READ_SETUP = """
import pyarrow.parquet as pq
path = {path!r}
"""

READ_WORKLOAD = "table = pq.read_table(path)"


def make_catalog_logs(n: int = 1_000_000, k: int = 50, d: int = 50, seed: int = 0):
    """n rows, k items, d context features; epsilon-greedy logging (eps = 0.3) around a weak
    linear classifier; reward ~ Bernoulli(0.1 + 0.5 * 1[action = label])."""
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    B = np.random.default_rng(123).normal(size=(k, d)) / np.sqrt(d) * 2.0
    y = np.argmax(X @ B.T + rng.gumbel(size=(n, k)), axis=1)
    G = np.random.default_rng(456).normal(size=(k, d)) / np.sqrt(d) * 2.0
    weak = np.argmax(X @ (B + G).T, axis=1)
    eps = 0.3
    a = np.where(rng.uniform(size=n) < eps, rng.integers(0, k, size=n), weak)
    p = np.where(a == weak, 1 - eps + eps / k, eps / k)
    r = (rng.uniform(size=n) < 0.1 + 0.5 * (a == y)).astype(np.float64)
    cols = {"event_id": np.arange(n), "action": a.astype(np.int64), "propensity": p, "reward": r}
    cols.update({f"x{j}": X[:, j] for j in range(d)})
    return pa.table(cols)


def catalog_targets(rounds: int, quick: bool) -> dict:
    import pyarrow.parquet as pq

    import ope

    n = 100_000 if quick else 1_000_000
    big = data_path(f"learn_{n}x50x50.parquet")
    if not big.exists():
        pq.write_table(make_catalog_logs(n=n), big)
    inputs = {"sample": str(ope.load_sample().path), f"{n:,} x 50 items x 50 features": str(big)}
    tmp = Path(tempfile.mkdtemp())
    results: dict = {}
    for name, path in inputs.items():
        out, info = str(tmp / "learned.parquet"), str(tmp / "info.json")
        runs = {"learn": [], "read": []}
        for k in range(rounds):  # interleaved: learn and the bare read alternate first
            order = ("learn", "read") if k % 2 == 0 else ("read", "learn")
            for case in order:
                if case == "learn":
                    res = peak_rss(
                        LEARN_SETUP.format(path=path, out=out, info=info), LEARN_WORKLOAD
                    )
                    res.update(json.loads(Path(info).read_text()))
                else:
                    res = peak_rss(READ_SETUP.format(path=path), READ_WORKLOAD)
                runs[case].append(res)
        learn_s = sorted(r["seconds"] for r in runs["learn"])
        read_s = sorted(r["seconds"] for r in runs["read"])
        med = lambda v: float(np.median(v))  # noqa: E731
        results[name] = {
            "learn_seconds": learn_s,
            "read_seconds": read_s,
            "learn_cpu_seconds": sorted(r["cpu_seconds"] for r in runs["learn"]),
            "learn_peak_mb": max(r["peak_mb"] for r in runs["learn"]),
            "read_peak_mb": max(r["peak_mb"] for r in runs["read"]),
            "ratio_to_read": med(learn_s) / med(read_s),
            **{
                key: runs["learn"][-1][key]
                for key in (
                    "rows_written",
                    "n_iter",
                    "n_actions",
                    "verdict",
                    "lower_bound",
                    "improvement_lower_bound",
                )
            },
        }
    print(f"\n## `ope learn` (Python path), {rounds} interleaved round(s), medians\n")
    rows = [
        [
            name,
            f"{med(r['learn_seconds']):.1f}",
            f"{med(r['learn_cpu_seconds']):.1f}",
            f"{r['learn_peak_mb']:,.0f}",
            f"{med(r['read_seconds']):.2f}",
            f"{r['ratio_to_read']:.0f}x",
            r["n_actions"],
            r["n_iter"],
            f"{r['rows_written']:,}",
            r["verdict"],
        ]
        for name, r in results.items()
    ]
    print(
        format_table(
            [
                "logs",
                "learn s",
                "learn CPU s",
                "peak MB",
                "bare read s",
                "learn / read",
                "actions",
                "L-BFGS its",
                "policy rows",
                "verdict",
            ],
            rows,
        )
    )
    return results


def layouts(rounds: int) -> dict:
    """One objective evaluation on each candidate-set layout (one BLAS thread)."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    kw = dict(objective="clipped_ips", variance_penalty=1.645, max_weight=10.0, l2_penalty=1e-3)
    out = []
    with threadpool_limits(limits=1, user_api="blas"):
        for n, d, K, L in [
            (100_000, 50, 50, 50),
            (100_000, 50, 800, 50),
            (100_000, 4, 400, 20),
            (100_000, 4, 80, 20),
            (100_000, 10, 400, 20),
        ]:
            X = rng.normal(size=(n, d))
            X1 = Standardizer.fit(X, center=True).transform_t(X)
            cand = np.sort(rng.integers(0, K - L + 1, size=(n, L)), axis=1) + np.arange(L)
            support = Support(n, K, np.arange(0, n * L + 1, L), cand.ravel())
            a = cand[np.arange(n), rng.integers(0, L, n)]
            r, p = rng.uniform(size=n), np.full(n, 1.0 / L)
            model = _PerAction(K, d, True)
            theta = 0.01 * rng.normal(size=model.size)
            times = {}
            for cls in (ScatterLayout, GatherLayout):
                lay = cls(X1, support)
                problem = _Problem(lay, lay.native(support.position(a)), r, p)
                policy_objective(theta, problem, model, **kw)
                ts = []
                for _ in range(rounds):
                    t0 = time.perf_counter()
                    policy_objective(theta, problem, model, **kw)
                    ts.append(time.perf_counter() - t0)
                times[cls.__name__] = float(np.median(ts))
            out.append({"n": n, "d": d, "K": K, "L": L, **times})
    print("\n## One objective evaluation per layout (seconds, one BLAS thread, medians)\n")
    print(
        format_table(
            ["n", "d", "K", "K / L", "scatter (BLAS)", "gather", "gather / scatter"],
            [
                [
                    o["n"],
                    o["d"],
                    o["K"],
                    o["K"] / o["L"],
                    o["ScatterLayout"],
                    o["GatherLayout"],
                    o["GatherLayout"] / o["ScatterLayout"],
                ]
                for o in out
            ],
        )
    )
    return {"layouts": out}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few seeds, small timing run")
    parser.add_argument("--seeds", type=int, default=None)
    parser.add_argument("--skip-timing", action="store_true")
    parser.add_argument(
        "--catalog",
        action="store_true",
        help="only the catalog targets (`ope learn` on the sample and on 1M rows)",
    )
    parser.add_argument("--layouts", action="store_true", help="only the layout comparison")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds")
    args = parser.parse_args(argv)
    if args.catalog or args.layouts:
        result: dict = {}
        if args.layouts:
            result.update(layouts(args.rounds or 3))
        if args.catalog:
            result["catalog"] = catalog_targets(args.rounds or (1 if args.quick else 3), args.quick)
        print(f"\nwrote {write_result('bench_learning_catalog', result)}")
        return
    seeds = args.seeds or (3 if args.quick else 20)
    datasets = (
        ["synthetic", "synthetic+noise", "digits"]
        if args.quick
        else ["synthetic", "synthetic+noise", "digits", "digits+noise", "wine", "breast_cancer"]
    )
    quality_table(seeds, passes=4, datasets=datasets, mixes=[0.5, 0.95])
    boundary_false_approvals(200 if args.quick else 2000, [100, 1000, 10_000])
    if not args.skip_timing:
        if args.quick:
            timing(100_000, 50, 20, max_iter=10)
        else:
            timing(1_000_000, 50, 20, max_iter=30)


if __name__ == "__main__":
    main()
