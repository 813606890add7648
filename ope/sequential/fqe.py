"""Fitted Q evaluation (FQE): a linear model's per-step ``q_hat``/``v_hat`` and tail values.

:func:`fitted_q_evaluation` fits Q of a target policy on trajectories, tabular (integer state
ids) or linear on state features, for the doubly robust estimators of
:func:`ope.sequential.sequential_estimate`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from ope._thresholds import PROBABILITY_TOLERANCE
from ope._validation import check_finite, check_no_overflow, check_positive_int, check_real
from ope.exceptions import OPEWarning, ParameterError, PolicyError
from ope.logs import Trajectories
from ope.sequential._steps import (
    check_gamma,
    check_rows,
    check_structure,
    check_trajectories,
    refuse_trajectory_weights,
    float_column,
    int_column,
)

__all__ = ["FittedQ", "fitted_q_evaluation", "POLICY_SUM_TOL", "FQE_TOL", "FQE_MAX_ITERATIONS"]

#: Allowed |sum_a pi(a|s) - 1| of a target policy's row (the package's one probability tolerance).
POLICY_SUM_TOL: Final = PROBABILITY_TOLERANCE

#: FQE stops when the largest change of Q between iterations falls below this fraction of
#: max(1, max |Q|): with gamma < 1 the remaining error is then at most tol / (1 - gamma) of it.
FQE_TOL: Final = 1e-10

#: Rows per chunk when FQE accumulates its regression statistics: bounds the (rows x d x A)
#: temporary of next-state features times policy to a few tens of MB for moderate d * A.
_FQE_CHUNK_ROWS: Final = 1 << 14

#: Default cap on FQE iterations: with gamma = 0.95, 500 contractions shrink the initial error
#: by 0.95**500 ~ 7e-12, past FQE_TOL.
FQE_MAX_ITERATIONS: Final = 500


@dataclass(frozen=True)
class FittedQ:
    """What :func:`fitted_q_evaluation` learned, ready for ``sequential_estimate(estimator="dr")``.

    Attributes
    ----------
    q_hat : numpy.ndarray, shape (n,)
        :math:`\\hat Q(s_t, a_t)` of each logged step (trajectory row order).
    v_hat : numpy.ndarray, shape (n,)
        :math:`\\hat V(s_t) = \\sum_a \\pi(a|s_t) \\hat Q(s_t, a)` of each step.
    tail_value : numpy.ndarray of shape (n_episodes,) or None
        :math:`\\hat V` of the state each truncated episode was left in (NaN for episodes that
        terminated); None when the next state of truncated episodes is unknown (no
        ``next_state_column``, or feature-based FQE).
    value : float
        The model's own (direct-method) estimate, the mean of :math:`\\hat V(s_0)` over
        episodes. Its sampling error ignores the fit; use it through DR/WDR for inference.
    coef : numpy.ndarray
        The fitted Q table (n_states, n_actions), or weights (n_features, n_actions).
    n_iterations : int
        Iterations run.
    converged : bool
        True when the last change of Q fell below ``FQE_TOL``.
    """

    q_hat: np.ndarray
    v_hat: np.ndarray
    tail_value: np.ndarray | None
    value: float
    coef: np.ndarray
    n_iterations: int
    converged: bool


def _check_policy_table(table: object, n_states: int | None) -> np.ndarray:
    try:
        pi = np.array(table, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise PolicyError(
            f"`target_policy` must be an array of shape (n_states, n_actions); it could not be "
            f"converted to float64 ({exc})."
        ) from None
    if pi.ndim != 2 or pi.shape[1] < 1:
        raise PolicyError(
            f"`target_policy` must be a table of shape (n_states, n_actions); got shape {pi.shape}."
        )
    if n_states is not None and pi.shape[0] < n_states:
        raise PolicyError(
            f"`target_policy` has {pi.shape[0]} rows but the trajectories hold state id "
            f"{n_states - 1}; it needs one row per state."
        )
    bad = ~np.isfinite(pi).all(axis=1) | (pi < 0).any(axis=1) | (pi > 1).any(axis=1)
    bad |= np.abs(pi.sum(axis=1) - 1.0) > POLICY_SUM_TOL
    if bad.any():
        s = int(np.flatnonzero(bad)[0])
        raise PolicyError(
            f"each row of `target_policy` must be a probability distribution over actions; "
            f"{int(bad.sum())} rows are not (first: state {s}, {pi[s].tolist()})."
        )
    return pi


def fitted_q_evaluation(
    trajectories: Trajectories,
    target_policy: npt.ArrayLike | Callable[[np.ndarray], npt.ArrayLike],
    *,
    gamma: float,
    state_column: str | None = None,
    feature_columns: Sequence[str] | None = None,
    next_state_column: str | None = None,
    n_iterations: int = FQE_MAX_ITERATIONS,
    ridge: float = 1e-3,
) -> FittedQ:
    r"""Fitted Q evaluation (FQE) with a linear model: q̂, v̂ and tail values for DR / WDR.

    Parameters
    ----------
    trajectories : ope.Trajectories
        Validated steps (:func:`ope.read_trajectories`); ``action`` must hold integer ids
        ``0 .. n_actions-1``.
    target_policy : array of shape (n_states, n_actions), or callable
        With ``state_column``: the table :math:`\pi(a|s)`. With ``feature_columns``: a function
        mapping features of shape (m, d) to probabilities of shape (m, n_actions).
    gamma : float
        Discount factor in [0, 1].
    state_column : str, optional
        Integer state ids ``0 .. n_states-1``: tabular FQE (one-hot states, a Q table).
    feature_columns : sequence of str, optional
        Numeric state features: :math:`\hat Q(s, a) = \phi(s)^\top \theta_a`. Give exactly one of
        ``state_column`` and ``feature_columns``.
    next_state_column : str, optional
        Tabular only: the state each step led to (e.g. ``"next_state"`` of
        :class:`ope.simulate.TabularMDP`). It is read at the last step of truncated episodes,
        which then get a regression target and a ``tail_value``; without it those steps have
        no target and are left out of the regression (they still count in every estimate).
    n_iterations : int, default 500
        Largest number of iterations; FQE stops earlier once Q changes by less than
        ``FQE_TOL`` (relative).
    ridge : float, default 1e-3
        L2 penalty :math:`\lambda` of each regression (> 0 keeps unvisited actions at zero
        and the feature regressions well-posed).

    Returns
    -------
    FittedQ
        ``q_hat``, ``v_hat``, ``tail_value`` aligned with the trajectories, the model's value,
        the coefficients and convergence.

    Raises
    ------
    ope.ParameterError
        ``trajectories`` is not an ``ope.Trajectories``; neither or both of ``state_column``
        / ``feature_columns``; bad ``gamma``, ``ridge`` or
        ``n_iterations``; ``next_state_column`` with features.
    ope.SchemaError
        A named column is missing or not of the needed type.
    ope.ValidationError
        Negative state or action ids, actions beyond the policy's, non-finite features.
    ope.PolicyError
        The policy table or function does not give probability distributions.

    Warns
    -----
    OPEWarning
        The iterations did not converge.

    Notes
    -----
    Starting from :math:`Q_0 = 0`, iteration :math:`k` regresses the targets

    .. math:: y_t = r_t + \gamma \sum_{a'} \pi(a' \mid s_{t+1})\, Q_{k-1}(s_{t+1}, a')

    (:math:`y_t = r_t` at a terminal step) on :math:`(s_t, a_t)` by ridge regression, one
    regression per action: :math:`\theta_a = (\Phi_a^\top\Phi_a + \lambda I)^{-1}\Phi_a^\top
    y_a`; in the tabular case :math:`Q(s,a) = \sum_{t: (s_t,a_t)=(s,a)} y_t / (N(s,a)+\lambda)`.
    The Gram matrices are factored once; each iteration costs one pass over the steps.
    FQE fits a *stationary* Q: the value of the untruncated discounted process, so pair its
    ``tail_value`` with DR/WDR to estimate the untruncated value.

    References
    ----------
    .. [1] H. Le, C. Voloshin and Y. Yue, "Batch policy learning under constraints",
       Proc. ICML, 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.io import read_trajectories
    >>> from ope.sequential import fitted_q_evaluation
    >>> from ope.simulate import TabularMDP
    >>> env = TabularMDP(n_states=3, n_actions=2, horizon=30, gamma=0.8, seed=0)
    >>> traj = read_trajectories(env.sample(3000, rng=0))
    >>> fq = fitted_q_evaluation(traj, env.policy_table("uniform"), gamma=0.8,
    ...                          state_column="state", next_state_column="next_state")
    >>> q_true = env.discounted_q_function("uniform")
    >>> bool(np.abs(fq.coef - q_true).max() < 0.1), fq.converged
    (True, True)
    """
    traj = check_trajectories(trajectories)
    if (state_column is None) == (feature_columns is None):
        raise ParameterError(
            "give exactly one of `state_column` (tabular FQE on integer state ids) and "
            "`feature_columns` (linear FQE on numeric state features)."
        )
    if next_state_column is not None and state_column is None:
        raise ParameterError("`next_state_column` applies to tabular FQE (with `state_column`).")
    g = check_gamma(gamma)
    lam = check_real(ridge, "ridge")
    if not (lam > 0.0 and math.isfinite(lam)):
        raise ParameterError(f"`ridge` must be a positive finite number; got {ridge!r}.")
    max_iterations = check_positive_int(n_iterations, "n_iterations")
    refuse_trajectory_weights(traj)
    starts, lengths, _ = check_structure(traj)
    reward = float_column(traj, "reward", "reward")
    check_finite(reward, "reward")
    action = int_column(traj, "action", "action")
    check_rows(
        traj, action < 0, "`action` ids must be >= 0 for FQE", "Encode actions as 0 .. n_actions-1."
    )
    n = traj.n
    last = np.zeros(n, dtype=bool)
    last[starts[1:] - 1] = True
    truncated = np.asarray(traj.truncated, dtype=bool)
    trunc_last = starts[1:][truncated] - 1
    # the row whose state follows each row: the next row, except at episode ends
    nxt = np.arange(1, n + 1, dtype=np.int64)
    has_next = ~last
    fit = np.ones(n, dtype=bool)  # rows with a regression target
    fit[trunc_last] = False  # unless their next state is known (below)

    if state_column is not None:
        state = int_column(traj, state_column, "state_column")
        check_rows(
            traj,
            state < 0,
            f"state ids in {state_column!r} must be >= 0",
            "Encode states as 0 .. n_states-1.",
        )
        n_states = int(state.max()) + 1
        next_state = state[np.minimum(nxt, n - 1)]
        if next_state_column is not None:
            ns = int_column(traj, next_state_column, "next_state_column")
            bad = np.zeros(n, dtype=bool)
            bad[trunc_last] = ns[trunc_last] < 0
            check_rows(
                traj,
                bad,
                f"{next_state_column!r} must hold the state a truncated "
                "episode was left in (>= 0) at its last step",
                "Fix the logger.",
            )
            next_state[trunc_last] = ns[trunc_last]
            has_next[trunc_last] = True
            fit[trunc_last] = True
            n_states = max(n_states, int(ns[trunc_last].max(initial=-1)) + 1)
        pi = _check_policy_table(target_policy, n_states)
        n_actions = pi.shape[1]
        n_states = pi.shape[0]
        check_rows(
            traj,
            action >= n_actions,
            f"`action` ids must be < {n_actions}, the number of columns of `target_policy`",
            "Give the policy over all actions.",
        )
        idx = state * n_actions + action
        denom = np.bincount(idx[fit], minlength=n_states * n_actions) + lam
        q = np.zeros((n_states, n_actions))
        converged, it = False, 0
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused below
            for it in range(1, max_iterations + 1):  # iterations, not rows
                v = np.einsum("sa,sa->s", pi, q)
                y = reward + g * np.where(has_next, v[next_state], 0.0)
                sums = np.bincount(idx[fit], weights=y[fit], minlength=denom.size)
                new = (sums / denom).reshape(q.shape)
                change = float(np.abs(new - q).max())
                q = new
                if change <= FQE_TOL * max(1.0, float(np.abs(q).max())):
                    converged = True
                    break
            v = np.einsum("sa,sa->s", pi, q)
        q_hat, v_hat = q[state, action], v[state]
        tail = None
        if next_state_column is not None:
            tail = np.full(lengths.size, np.nan)
            tail[truncated] = v[next_state[trunc_last]]
        coef = q
    else:
        assert feature_columns is not None
        cols = list(feature_columns)
        if not cols:
            raise ParameterError("`feature_columns` must name at least one column.")
        phi = np.column_stack([float_column(traj, c, "feature_columns") for c in cols])
        policy_fn = target_policy
        if not callable(policy_fn):
            raise PolicyError(
                "with `feature_columns`, `target_policy` must be a function mapping features "
                "(m, d) to action probabilities (m, n_actions)."
            )

        def probs(x: np.ndarray) -> np.ndarray:
            try:
                p = np.asarray(policy_fn(x), dtype=np.float64)
            except (TypeError, ValueError) as exc:
                raise PolicyError(f"`target_policy` failed on the features: {exc}") from None
            if p.ndim != 2 or p.shape[0] != x.shape[0]:
                raise PolicyError(
                    f"`target_policy` must return shape ({x.shape[0]}, n_actions); got {p.shape}."
                )
            bad = ~np.isfinite(p).all(1) | (p < 0).any(1) | (np.abs(p.sum(1) - 1) > POLICY_SUM_TOL)
            if bad.any():
                raise PolicyError(
                    f"`target_policy` returned {int(bad.sum())} rows that are not probability "
                    f"distributions (first at row {int(np.flatnonzero(bad)[0])})."
                )
            return p

        pi_now = probs(phi)
        n_actions = pi_now.shape[1]
        check_rows(
            traj,
            action >= n_actions,
            f"`action` ids must be < {n_actions}, the number of actions of `target_policy`",
            "Give the policy over all actions.",
        )
        d = phi.shape[1]
        # FQE with a linear model iterates an affine map of theta: theta_k = G^-1 (c + gamma
        # M theta_{k-1}) per action, with G_a = Phi_a'Phi_a + lambda I, c_a = Phi_a' r_a and
        # M_a = Phi_a' Z_a, Z = next-state features (x) next-state policy (0 at episode ends).
        # G, c, M are accumulated once, in chunks of rows; iterations then cost O(A^2 d^2).
        gram = np.zeros((n_actions, d, d))
        c = np.zeros((n_actions, d))
        m = np.zeros((n_actions, d, d * n_actions))
        fit_rows = np.flatnonzero(fit)
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused below
            for lo in range(0, fit_rows.size, _FQE_CHUNK_ROWS):  # chunks of rows
                rows = fit_rows[lo : lo + _FQE_CHUNK_ROWS]
                x = phi[rows]
                nr = np.minimum(rows + 1, n - 1)
                z = phi[nr][:, :, None] * (pi_now[nr] * has_next[rows, None])[:, None, :]
                z = z.reshape(rows.size, d * n_actions)
                onehot = action[rows][:, None] == np.arange(n_actions)[None, :]
                for a in range(n_actions):  # actions, not rows
                    xa = x[onehot[:, a]]
                    gram[a] += xa.T @ xa
                    c[a] += xa.T @ reward[rows][onehot[:, a]]
                    m[a] += xa.T @ z[onehot[:, a]]
            gram += lam * np.eye(d)
        check_no_overflow(
            np.concatenate([gram.ravel(), c.ravel(), m.ravel()]),
            "the sums of the FQE regression",
            {"reward": reward, **{col: phi[:, j] for j, col in enumerate(cols)}},
            row=None,
        )
        theta: np.ndarray = np.zeros((d, n_actions))
        converged, it = False, 0
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused below
            for it in range(1, max_iterations + 1):  # iterations, not rows
                rhs = c + g * (m @ theta.ravel())
                new = np.linalg.solve(gram, rhs[..., None])[..., 0].T
                change = float(np.abs(new - theta).max())
                theta = new
                if change <= FQE_TOL * max(1.0, float(np.abs(theta).max())):
                    converged = True
                    break
            q_all = phi @ theta
            q_hat = q_all[np.arange(n), action]
            v_hat = np.einsum("na,na->n", q_all, pi_now)
        tail = None
        coef = theta
    with np.errstate(over="ignore", invalid="ignore"):
        value = float(v_hat[starts[:-1]].mean())
    inputs = {"reward": reward}
    if state_column is None:
        inputs.update({col: phi[:, j] for j, col in enumerate(cols)})
    check_no_overflow(
        np.concatenate([q_hat, v_hat, [value], [] if tail is None else tail[truncated]]),
        "fitted Q values",
        inputs,
        row=None,
    )
    if not converged:
        warnings.warn(
            f"fitted_q_evaluation did not converge in {it} iterations (gamma={g}); raise "
            "n_iterations, or use gamma < 1 (with gamma = 1 FQE converges only when every "
            "episode terminates).",
            OPEWarning,
            stacklevel=2,
        )
    return FittedQ(
        q_hat=q_hat,
        v_hat=v_hat,
        tail_value=tail,
        value=value,
        coef=coef,
        n_iterations=it,
        converged=converged,
    )
