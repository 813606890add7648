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

Run ``python benchmarks/bench_learning.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import time
import warnings
from typing import Callable

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits, load_wine
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from ope.learning import (
    ConservativePolicyLearner,
    DirectMethodPolicyLearner,
    IPSPolicyLearner,
    SafetyGate,
)
from ope.learning._common import policy_objective

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
        c = SafetyGate(reward_range=(0.0, 1.0), confidence_level=CONFIDENCE, method=method,
                       max_weight=worse_w).certify(pe_worse, None, ace, rce, pce)
        out[f"worse_approved_{method}"] = float(c.approved)
    out["worse_truly_worse"] = float(v_worse < out["logging"])
    out["n_train"] = float(atr.size)
    out["n_certify"] = float(ace.size)
    return out


def quality_table(seeds: int, passes: int, datasets: list[str], mixes: list[float]) -> None:
    print(f"\n## Exact value on held-out rows (mean ± s.e. over {seeds} seeds)\n")
    print("| data set (+noise: Bernoulli rewards) | mix (overlap) | n train / certify | "
          "logging | IPS max | DM greedy | "
          "conservative | cons. approved | worse-policy false approvals: Bernstein / t |")
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
    print(f"\n## Gate at the boundary V(pi) = V(pi_0): approval rate over {reps} replications "
          f"(nominal bound {1 - CONFIDENCE:.2f})\n")
    print("| n certify | Bernstein (safe) | t (semi-safe) |")
    print("|---|---|---|")
    for n in sizes:
        rates = {}
        for method in ("bernstein", "t"):
            gate = SafetyGate(reward_range=(0.0, 1.0), confidence_level=CONFIDENCE, method=method,
                              max_weight=1 / 0.3)
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
    t0 = time.perf_counter()
    for _ in range(3):
        policy_objective(theta, X, a, r, p, None, n_actions=k, center=X.mean(0),
                         scale=X.std(0), objective="clipped_ips", variance_penalty=1.645,
                         max_weight=float(k), l2_penalty=1e-3)
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
    print(f"| `ConservativePolicyLearner(max_iter={max_iter}).fit` ({est.n_iter_} L-BFGS "
          f"iterations) | {fit:.1f} | {fit / matmul:.0f} |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few seeds, small timing run")
    parser.add_argument("--seeds", type=int, default=None)
    parser.add_argument("--skip-timing", action="store_true")
    args = parser.parse_args(argv)
    seeds = args.seeds or (3 if args.quick else 20)
    datasets = ["synthetic", "synthetic+noise", "digits"] if args.quick else [
        "synthetic", "synthetic+noise", "digits", "digits+noise", "wine", "breast_cancer"]
    quality_table(seeds, passes=4, datasets=datasets, mixes=[0.5, 0.95])
    boundary_false_approvals(200 if args.quick else 2000, [100, 1000, 10_000])
    if not args.skip_timing:
        if args.quick:
            timing(100_000, 50, 20, max_iter=10)
        else:
            timing(1_000_000, 50, 20, max_iter=30)


if __name__ == "__main__":
    main()
