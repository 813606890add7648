"""Parity of ope's state-marginalized estimators (``mis``, ``mis_dr``) with SCOPE-RL's
marginal estimators (``scope_rl.ope.discrete.StateActionMarginalIS``, ``StateMarginalIS`` and
``StateActionMarginalDR``, version 0.2.1) given the same ratios, on identical trajectories.

SCOPE-RL's marginal estimators take the state(-action) marginal ratios as inputs (learned by its
weight-learning modules); ope estimates them from the logs. So the comparison computes the ratios
here, independently of ope's code, by the recursion ``docs/guide/trajectories.md`` states (per
step t and state s: the candidate's mass D_t(s), n times its state distribution, starts at the
logged first states, each row carries mu = D_t(s) rho / sum of rho over the rows in (t, s), and
D_{t+1}(s') sums the mu of the rows that move to s'), hands them to SCOPE-RL's own code, and
compares its value with ``ope.sequential_estimate(..., estimator="mis" | "mis_dr")``:

* StateActionMarginalIS (``n_step_pdis=0``) with the state-action ratio mu;
* StateMarginalIS (``n_step_pdis=0``). Its docstring weighs step t by the state ratio at
  s_{t-k} times the action ratios w_{t-k:t}, but SCOPE-RL 0.2.1 forms the per-decision weight
  over steps t-k+1..t (as for the state-action estimators), so at k = 0 the action ratio of
  step t is missing: given the state ratio mu / rho its value is not state-marginal IS (the
  script prints the difference); given mu itself it is, and that is the parity row;
* StateActionMarginalDR with mu and a model Q_t(s, a) (the exact time-dependent Q-function of
  another policy, so the model is wrong) that is 0 at the last step: SCOPE-RL 0.2.1 shifts the
  next-state values with ``np.insert(v, -1, 0, axis=1)[:, 1:]``, which puts the 0 of the end of
  the episode before the last step's value instead of after it (its last two next-state values
  are swapped); with a model that is 0 at the last step the two orders agree. The script also
  prints the difference with a model that is not 0 there, which is that swap.

SCOPE-RL's own code is run, not re-implemented. It is not a dependency of ope: install the
wheel without its dependencies into a folder and pass it (as for
``benchmarks/scope_rl_distribution.py``)::

    pip download scope-rl==0.2.1 --no-deps -d /tmp/scope
    pip install --no-deps --target /tmp/scope/site /tmp/scope/scope_rl-0.2.1-py3-none-any.whl
    python benchmarks/scope_rl_marginal.py --scope-path /tmp/scope/site

Episodes are those of the full horizon (SCOPE-RL takes a fixed length), gamma = 0.9.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scope_rl_distribution import load_scope_rl  # noqa: E402

GAMMA = 0.9


def episodes(n: int, seed: int, horizon: int) -> tuple[pd.DataFrame, object]:
    """TabularMDP episodes of the full horizon, in (episode, step) order."""
    from ope.simulate import TabularMDP

    env = TabularMDP(n_states=5, n_actions=3, horizon=horizon, gamma=GAMMA, seed=seed)
    table = env.sample(n, rng=seed).to_pandas()
    length = table.groupby("episode_id")["step"].transform("size")
    table = table[length == horizon].sort_values(["episode_id", "step"]).reset_index(drop=True)
    return table, env


def marginal_ratios(state: np.ndarray, rho: np.ndarray, n_states: int) -> np.ndarray:
    """mu per (episode, step) by the forward recursion of the module docstring."""
    n, horizon = state.shape
    mu = np.zeros((n, horizon))
    mass = np.bincount(state[:, 0], minlength=n_states).astype(np.float64)
    for t in range(horizon):  # a loop over steps
        sigma = np.bincount(state[:, t], weights=rho[:, t], minlength=n_states)
        scale = np.divide(mass, sigma, out=np.zeros(n_states), where=sigma > 0)
        mu[:, t] = scale[state[:, t]] * rho[:, t]
        if t + 1 < horizon:
            mass = np.bincount(state[:, t + 1], weights=mu[:, t], minlength=n_states)
    return mu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scope-path", required=True, help="folder SCOPE-RL was installed to")
    parser.add_argument("--episodes", type=int, default=3000)
    parser.add_argument("--horizon", type=int, default=8)
    args = parser.parse_args()
    import ope

    scope = load_scope_rl(args.scope_path, module="marginal_estimators")
    rows = []
    for seed in (0, 1, 2):
        table, env = episodes(args.episodes, seed, args.horizon)
        n_ep = table["episode_id"].nunique()
        horizon = args.horizon
        state = table["state"].to_numpy().reshape(n_ep, horizon)
        action = table["action"].to_numpy()
        step = table["step"].to_numpy()
        traj = ope.read_trajectories(table)
        for name in ("softmax", "epsilon_greedy"):
            pi = env.policy_table(name)  # (S, A)
            dist = pi[table["state"].to_numpy()]
            rho = (table[f"target__{name}"] / table["propensity"]).to_numpy()
            mu = marginal_ratios(state, rho.reshape(n_ep, horizon), env.n_states).ravel()
            common = {
                "n_step_pdis": 0,
                "step_per_trajectory": horizon,
                "action": action,
                "reward": table["reward"].to_numpy(),
                "pscore": table["propensity"].to_numpy(),
                "evaluation_policy_action_dist": dist,
                "gamma": GAMMA,
            }
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ours = ope.sequential_estimate(traj, name, estimator="mis", gamma=GAMMA).value
            sam = scope.StateActionMarginalIS().estimate_policy_value(
                state_action_marginal_importance_weight=mu, **common
            )
            state_ratio = np.divide(mu, rho, out=np.zeros_like(mu), where=rho > 0)
            sm_state, sm_mu = (
                scope.StateMarginalIS().estimate_policy_value(
                    state_marginal_importance_weight=ratio, **common
                )
                for ratio in (state_ratio, mu)
            )
            for label, theirs in (
                ("StateActionMarginalIS", sam),
                ("StateMarginalIS given mu (its step-t ratio missing)", sm_mu),
                ("StateMarginalIS given the state ratio", sm_state),
            ):
                rows.append(
                    {
                        "seed": seed,
                        "policy": name,
                        "ope": "mis",
                        "SCOPE-RL": label,
                        "value": ours,
                        "|ope - SCOPE-RL|": abs(ours - float(theirs)),
                    }
                )
            # a wrong model: the exact Q of the uniform policy, 0 at the last step (see above)
            q = env.q_function("uniform").copy()  # (H, S, A)
            for zero_last in (True, False):
                if zero_last:
                    q[horizon - 1] = 0.0
                else:
                    q = env.q_function("uniform")
                q_all = q[step, table["state"].to_numpy()]  # (rows, A)
                q_hat = q_all[np.arange(len(table)), action]
                v_hat = (q_all * dist).sum(axis=1)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    ours = ope.sequential_estimate(
                        traj, name, estimator="mis_dr", gamma=GAMMA, q_hat=q_hat, v_hat=v_hat
                    ).value
                theirs = scope.StateActionMarginalDR().estimate_policy_value(
                    state_action_marginal_importance_weight=mu,
                    state_action_value_prediction=q_all,
                    initial_state_value_prediction=v_hat.reshape(n_ep, horizon)[:, 0],
                    **common,
                )
                rows.append(
                    {
                        "seed": seed,
                        "policy": name,
                        "ope": "mis_dr" + ("" if zero_last else " (model not 0 at the end)"),
                        "SCOPE-RL": "StateActionMarginalDR",
                        "value": ours,
                        "|ope - SCOPE-RL|": abs(ours - float(theirs)),
                    }
                )
    out = pd.DataFrame(rows)
    with pd.option_context("display.width", 140, "display.max_columns", 10):
        print(out.to_string(index=False))
    matched = out[~out["ope"].str.contains("not 0") & ~out["SCOPE-RL"].str.contains("state ratio")]
    print(
        f"\nlargest |ope - SCOPE-RL| given the same ratios: {matched['|ope - SCOPE-RL|'].max():.1e}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
