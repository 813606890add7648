"""Off-policy value estimators for multi-step trajectories.

Given trajectories logged by a behaviour policy (``ope.read_trajectories`` ->
:class:`ope.logs.Trajectories`, one row per step) and the candidate's probability of each logged
action, :func:`sequential_estimate` estimates the candidate's expected discounted return with one
of six estimators:

``is``
    trajectory-wise importance sampling (Precup et al. 2000);
``pdis``
    per-decision importance sampling (Precup et al. 2000);
``wis``
    weighted (self-normalized) trajectory-wise importance sampling;
``wpdis``
    weighted per-decision importance sampling (step-WIS of Jiang & Li 2016, CWPDIS of
    Thomas 2015);
``dr``
    sequential doubly robust (Jiang & Li 2016), with a model's ``q_hat`` and ``v_hat`` per step;
``wdr``
    weighted doubly robust (Thomas & Brunskill 2016);
``mis``
    state-marginalized importance sampling (Xie, Ma & Wang 2019): each step weighted by the
    ratio :math:`d^\\pi_t(s_t)/d^b_t(s_t)` of the state's probability at that step under the
    candidate and the logger, estimated from the logs, times the step's own ratio; its variance
    grows polynomially with the horizon where the cumulative weights' grows exponentially;
``mis_dr``
    doubly robust with the same marginal ratios in place of the cumulative weights;
``magic``
    MAGIC (Thomas & Brunskill 2016): the blend of off-policy j-step returns (WDR's terms up to
    step j, the model's value after) that minimizes their estimated mean squared error.

:func:`ope.sequential.fitted_q_evaluation` (linear FQE, tabular or on state features) produces
the per-step ``q_hat``/``v_hat`` and the truncated episodes' ``tail_value`` that ``dr`` and
``wdr`` use.

Everything is vectorized over steps: cumulative importance weights within episodes come from one
cumulative sum of log-ratios reset at the episode offsets, per-episode sums from
``numpy.add.reduceat`` and per-step sums from ``numpy.bincount``. No Python loop runs over
episodes or steps, and no array is shaped (episodes, horizon) except the bootstrap components of
the per-step self-normalized estimators, which are built only when a bootstrap interval is asked
for.

The standard error comes from per-episode terms (episodes are the independent units): their
sample standard deviation over :math:`\\sqrt{n}` for ``is``, ``pdis`` and ``dr``, and the delta
method (per-episode influence terms) for the self-normalized ``wis``, ``wpdis`` and ``wdr``.
``Estimate.n`` is the number of episodes.

``is`` and ``wis`` are IPS and SNIPS over episodes (one weight and one discounted return per
episode): their value and standard error come from the moment kernel :mod:`ope.moments`, like
every bandit weighting estimate. ``pdis``/``dr`` average per-episode sums of per-step terms, and
``wpdis``/``wdr`` normalize each step by its own weight sum; neither is a ratio of two
per-episode means, so they keep their own (per-step) arithmetic here.
"""

from __future__ import annotations

import math
import warnings
from typing import Final, Literal

import numpy as np
import numpy.typing as npt

from ope._centered import CenteredMoments
from ope._thresholds import MIN_ROWS, SMALL_SAMPLE_ROWS, kish_ess, low_ess, small_sample
from ope._validation import (
    check_choice,
    check_no_overflow,
    check_reward_range,
    user_stacklevel,
)
from ope.exceptions import EstimationError, OverlapWarning, ParameterError, SmallSampleWarning
from ope.logs import Trajectories
from ope.estimators import skewed_notes
from ope.moments import centered_moments, skewness
from ope.results import (
    DEFAULT_CONFIDENCE_LEVEL,
    Estimate,
    IntervalRequest,
    RowSource,
    make_estimate,
)
from ope.intervals._types import BottouInterval, ConfidenceInterval
from ope.intervals.asymptotic import normal_interval
from ope.sequential._bounds import (
    BOUNDED_ESTIMATORS,
    BOUNDED_METHODS,
    EpisodeTerms,
    bounded_interval,
    check_horizon,
    check_weights_within,
    checked_weight_bound,
)
from ope.sequential._steps import (
    MARGINALIZED,
    MODEL_BASED,
    SEQUENTIAL_ESTIMATORS,
    PerStep,
    Steps,
    validated_steps,
)

__all__ = [
    "episode_weights",
    "SEQUENTIAL_ESTIMATORS",
    "MARGINALIZED",
    "MAGIC_RETURNS",
    "MAGIC_BIAS_LEVEL",
    "MAX_SINGLETON_SHARE",
    "MAX_BOOTSTRAP_CELLS",
    "MIN_EPISODES",
    "sequential_estimate",
    "BOUNDED_ESTIMATORS",
    "BOUNDED_METHODS",
    "MODEL_BASED",
    "SEQUENTIAL_SKEW_ADVICE",
]

#: Largest (episodes x components) array built for a bootstrap of ``wpdis``/``wdr``: their
#: per-episode components have one column per step and statistic (3 x horizon). 2**25 float64
#: entries are 256 MB; past that the bootstrap would compete for memory with the data itself,
#: and the delta-method (normal / t) interval is the one to use.
MAX_BOOTSTRAP_CELLS: Final = 1 << 25

#: Interval methods that ``sequential_estimate(ci=...)`` can store on the result (the bootstrap
#: needs an ``rng``: ask for it with ``Estimate.ci(method="bootstrap", rng=...)``).
STORED_CI_METHODS: Final = ("normal", "t") + BOUNDED_METHODS

#: Episodes needed for a standard error at all: the package's MIN_ROWS, counted in episodes.
MIN_EPISODES: Final = MIN_ROWS

_EstimatorName = Literal["is", "pdis", "wis", "wpdis", "dr", "wdr", "mis", "mis_dr", "magic"]


# ============================================================================================
# weights
# ============================================================================================
def _cumulative_weights(data: Steps) -> np.ndarray:
    """Cumulative importance weights ``w_t = prod_{k<=t} rho_k`` within each episode.

    One cumulative sum of log-ratios over all rows, reset at each episode start (zero ratios are
    counted separately, so a zero anywhere earlier in the episode gives an exact zero).
    """
    rho = data.rho
    first = data.starts[:-1]
    zero = rho == 0.0
    logs = np.log(np.where(zero, 1.0, rho))
    # reset the running sum at every episode start, then remove the small rounding residual
    seg = np.add.reduceat(logs, first)
    inc = logs.copy()
    inc[first[1:]] -= seg[:-1]
    cs = np.cumsum(inc)
    cs -= np.repeat(cs[first] - logs[first], data.lengths)
    zc = np.cumsum(zero, dtype=np.int64)
    zc -= np.repeat(zc[first] - zero[first], data.lengths)
    with np.errstate(over="ignore"):
        w = np.where(zc > 0, 0.0, np.exp(cs))
    if data.max_weight is not None:
        np.minimum(w, data.max_weight, out=w)
    elif not np.isfinite(w).all():
        rows = np.flatnonzero(~np.isfinite(w))
        raise EstimationError(
            f"cumulative importance weights overflow float64 (exceed 1e308) at {rows.size} "
            f"step(s), first at row {int(rows[0])}: the candidate and the logger disagree over "
            "too many steps. Pass max_weight= to clip the weights, evaluate a shorter horizon, "
            "or use estimator='wdr'/'wpdis' with clipping."
        )
    return w


def _previous(w: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """``w_{t-1}`` per row, with ``w_{-1} = 1`` at every episode start."""
    prev = np.empty_like(w)
    prev[1:] = w[:-1]
    prev[starts[:-1]] = 1.0
    return prev


# ============================================================================================
# the estimators
# ============================================================================================
class _SequentialSource(RowSource):
    """Per-episode terms of a sequential estimate (episodes are the resampled units).

    ``components`` / ``statistic`` describe the estimate as a smooth function of per-episode
    column means, for the bootstrap and paired comparisons; ``influence`` is computed directly
    from per-step arrays, without the (episodes x horizon) components.
    """

    methods: tuple[str, ...] = ("bootstrap",)

    def __init__(
        self,
        kind: str,
        reward: np.ndarray,
        n: int,
        psi: np.ndarray,
        columns: tuple[np.ndarray, ...] | None = None,
        dense: _DenseTerms | None = None,
        bounded: EpisodeTerms | None = None,
    ) -> None:
        self.kind = kind
        self._bounded = bounded
        if bounded is not None:
            self.methods = ("bootstrap",) + BOUNDED_METHODS
        self.reward = reward
        self.n = n
        self._psi = psi
        self._columns = columns
        self._dense = dense

    def components(self) -> np.ndarray:
        if self._dense is not None:
            return self._dense.components()
        assert self._columns is not None
        return np.column_stack(self._columns)

    def statistic(self, means: np.ndarray) -> np.ndarray:
        if self._dense is not None:
            return self._dense.statistic(means)
        if self.kind == "wis":
            return means[..., 0] / means[..., 1]
        return means[..., 0]

    def gradient(self, means: np.ndarray) -> np.ndarray:
        if self._dense is not None:
            return self._dense.gradient(means)
        if self.kind == "wis":
            return np.array([1.0 / means[1], -means[0] / means[1] ** 2])
        return np.ones(1)

    def influence(self) -> np.ndarray:
        return self._psi.copy()

    def special_interval(self, request: IntervalRequest) -> ConfidenceInterval | BottouInterval:
        method, confidence_level, weight_bound, outer = request.fields()
        if self._bounded is None or method not in BOUNDED_METHODS:
            return super().special_interval(request)
        if outer is not None:
            raise ParameterError(f"`outer` applies only to method='bottou'; got {method!r}.")
        return bounded_interval(
            self._bounded, method, confidence_level=confidence_level, weight_bound=weight_bound
        )


class _DenseTerms:
    """Per-episode, per-step components of ``wpdis`` / ``wdr`` (built only on request).

    Columns: ``x_t = w_t (r_t - q_t)``, ``y_t = w_{t-1} v_t`` and ``d_t = w_{min(t, L-1)}`` for
    ``t = 0 .. H-1``; the estimate is
    ``sum_t g^t x_t / d_t + y_0 + sum_{t>=1} g^t y_t / d_{t-1}`` of their means.
    """

    def __init__(
        self,
        episode: np.ndarray,
        step: np.ndarray,
        x: np.ndarray,
        y: np.ndarray,
        w: np.ndarray,
        final_w: np.ndarray,
        horizon: int,
        gamma: float,
        model: bool,
    ) -> None:
        self.episode, self.step, self.x, self.y, self.w = episode, step, x, y, w
        self.final_w = final_w
        self.horizon = horizon
        self.disc = gamma ** np.arange(horizon, dtype=np.float64)
        self.model = model

    def components(self) -> np.ndarray:
        n_ep, h = self.final_w.size, self.horizon
        if n_ep * 3 * h > MAX_BOOTSTRAP_CELLS:
            raise EstimationError(
                f"a bootstrap of this per-step self-normalized estimate needs {n_ep:,} episodes "
                f"x {3 * h:,} per-step components, more than {MAX_BOOTSTRAP_CELLS:,} entries. "
                "Use the delta-method interval (ci(method='normal' or 't'))."
            )
        out = np.zeros((n_ep, 3 * h))
        out[self.episode, self.step] = self.x
        out[self.episode, h + self.step] = self.y
        d = out[:, 2 * h :]
        d[:] = self.final_w[:, None]  # frozen after the last logged step
        d[self.episode, self.step] = self.w
        return out

    def statistic(self, means: np.ndarray) -> np.ndarray:
        h = self.horizon
        x, y, d = means[..., :h], means[..., h : 2 * h], means[..., 2 * h :]
        pos = d > 0.0
        safe = np.where(pos, d, 1.0)
        value = np.sum(np.where(pos, self.disc * x / safe, 0.0), axis=-1)
        # y_t / d_{t-1} for t >= 1; y_0 is the model's value of the first state
        value += y[..., 0]
        value += np.sum(
            np.where(pos[..., :-1], self.disc[1:] * y[..., 1:] / safe[..., :-1], 0.0), axis=-1
        )
        if not self.model:
            value = np.where(pos[..., 0], value, np.nan)  # no weight at all: undefined
        return value

    def gradient(self, means: np.ndarray) -> np.ndarray:
        h = self.horizon
        x, y, d = means[:h], means[h : 2 * h], means[2 * h :]
        pos = d > 0.0
        safe = np.where(pos, d, 1.0)
        gx = np.where(pos, self.disc / safe, 0.0)
        gy = np.zeros(h)
        gy[0] = 1.0
        gy[1:] = np.where(pos[:-1], self.disc[1:] / safe[:-1], 0.0)
        gd = np.where(pos, -self.disc * x / safe**2, 0.0)
        gd[:-1] -= np.where(pos[:-1], self.disc[1:] * y[1:] / safe[:-1] ** 2, 0.0)
        return np.concatenate([gx, gy, gd])


def _episode_moments(data: Steps, final_w: np.ndarray) -> tuple[np.ndarray, CenteredMoments]:
    """Per-episode discounted returns ``G`` and the kernel's moments of ``(W G, W)``.

    ``is`` and ``wis`` are IPS and SNIPS with one row per episode, weight ``W`` (the episode's
    cumulative weight, already clipped when ``max_weight`` is given) and reward ``G``: the
    kernel divides target by logging propensity, so ``W`` enters as the target with a logging
    propensity of 1 (weights above 1 are fine there).
    """
    first = data.starts[:-1]
    disc = data.gamma ** data.step.astype(np.float64)
    ret = np.add.reduceat(disc * data.reward_tail, first)  # discounted return per episode
    moments = centered_moments(ret, np.ones_like(final_w), final_w[:, None], max_weight=None)
    return ret, moments


def _trajectory_wise(
    data: Steps, kind: str, final_w: np.ndarray
) -> tuple[float, float, np.ndarray, tuple[np.ndarray, ...]]:
    """Value, standard error, influence terms and components of ``is`` and ``wis``."""
    ret, moments = _episode_moments(data, final_w)
    n_ep = data.n_episodes
    wr = final_w * ret
    if kind == "is":
        value, var = moments.product_mean_var(0, clipped=False, about=0.0)
        return value, math.sqrt(var / n_ep), wr - value, (wr,)
    value, var = moments.ratio_mean_var(0, clipped=False)
    psi = final_w * (ret - value) / final_w.mean()
    return value, math.sqrt(var / n_ep), psi, (wr, final_w)


def _per_decision(
    data: Steps, kind: str, w: np.ndarray
) -> tuple[float, float, np.ndarray, tuple[np.ndarray, ...]]:
    """Value, standard error, influence terms and components of ``pdis`` and ``dr``.

    Their per-episode term is a sum of per-step weighted terms (with a model's correction for
    ``dr``), not one weight times one return, so it is averaged here rather than in the kernel.
    """
    first = data.starts[:-1]
    disc = data.gamma ** data.step.astype(np.float64)
    term = w * data.reward_tail
    if kind == "dr":
        assert data.q_hat is not None and data.v_hat is not None
        term = term - w * data.q_hat + _previous(w, data.starts) * data.v_hat
    g = np.add.reduceat(disc * term, first)
    psi = g - g.mean()
    return float(g.mean()), float(np.std(psi, ddof=1) / math.sqrt(g.size)), psi, (g,)


def _self_normalized(
    data: Steps, kind: str, w: np.ndarray, final_w: np.ndarray, episode: np.ndarray
) -> tuple[float, np.ndarray, _DenseTerms]:
    """Value, influence terms and the dense-term builder of ``wpdis`` and ``wdr``.

    Not the moment kernel's SNIPS: each step ``t`` has its own normalizer ``D_t``, so the value
    is a sum over steps of ratios of per-step means (3 x horizon of them), and its delta-method
    influence terms follow from that, not from one ratio of two per-episode means.

    ``D_t = sum_i w^i_{min(t, L_i - 1)}`` is the step-``t`` normalizer (an episode that ended
    keeps its last weight and contributes zero reward, as in an absorbing state).
    """
    n_ep, h, g = data.n_episodes, data.horizon, data.gamma
    step = data.step
    first = data.starts[:-1]
    disc_h = g ** np.arange(h + 1, dtype=np.float64)
    disc = disc_h[step]
    d = np.bincount(step, weights=w, minlength=h)
    d += np.cumsum(np.bincount(data.lengths, weights=final_w, minlength=h + 1))[:h]
    pos = d > 0.0
    d_safe = np.where(pos, d, 1.0)
    x = w * data.reward_tail
    if kind == "wdr":
        assert data.q_hat is not None and data.v_hat is not None
        x = x - w * data.q_hat
        y = _previous(w, data.starts) * data.v_hat
    else:
        y = np.zeros_like(w)
    # normalizer of y_t is D_{t-1}, with D_{-1} = number of episodes (w_{-1} = 1)
    d_prev = np.concatenate(([float(n_ep)], d_safe[:-1]))
    pos_prev = np.concatenate(([True], pos[:-1]))
    a = np.where(pos[step], disc / d_safe[step], 0.0)
    b = np.where(pos_prev[step], disc / d_prev[step], 0.0)
    row_terms = a * x + b * y
    value = float(row_terms.sum())
    # influence: psi_i = sum_t (g^t / Dbar_t) (x_it - U_t d_it) + (y-terms) - Z-terms, Dbar = D/E
    xs = np.bincount(step, weights=x, minlength=h)
    ys = np.bincount(step, weights=y, minlength=h + 1)
    u = np.where(pos, xs / d_safe, 0.0)
    z = np.where(pos, ys[1:] / d_safe, 0.0)
    c = np.where(pos, (disc_h[:h] * u + disc_h[1:] * z) * n_ep / d_safe, 0.0)
    c_tail = np.concatenate((np.cumsum(c[::-1])[::-1], [0.0]))  # C_k = sum_{t >= k} c_t
    psi_rows = n_ep * row_terms - c[step] * w
    psi = np.add.reduceat(psi_rows, first) - final_w * c_tail[data.lengths]
    psi -= psi.mean()
    dense = _DenseTerms(episode, step, x, y, w, final_w, h, g, model=kind == "wdr")
    return value, psi, dense


#: The most off-policy j-step returns MAGIC blends: -1 (the model alone), the last step (WDR)
#: and log-spaced steps between (every step when the horizon is shorter).
MAGIC_RETURNS: Final = 25

#: The (episodes x horizon) float64 arrays MAGIC holds at once (components, their cumulative
#: sums and influence terms): its memory is bounded by MAX_BOOTSTRAP_CELLS of them in all.
_MAGIC_ARRAYS: Final = 14

#: The level of WDR's interval against which MAGIC measures each j-step return's bias (Thomas
#: & Brunskill's 90%).
MAGIC_BIAS_LEVEL: Final = 0.9


def _magic_steps(horizon: int) -> np.ndarray:
    """The j of MAGIC's off-policy j-step returns: -1, 0, log-spaced steps, horizon - 1."""
    inner = np.unique(np.round(np.geomspace(1, horizon, MAGIC_RETURNS - 1)).astype(np.int64) - 1)
    return np.unique(np.concatenate(([-1], inner, [horizon - 1])))


def _simplex_minimum(m: np.ndarray) -> np.ndarray:
    """The point of the probability simplex minimizing ``x' m x`` (``m`` positive semidefinite,
    a few dozen rows): SLSQP from the uniform point, checked against every vertex (the best
    single return wins when the solver gives anything worse)."""
    from scipy.optimize import minimize

    k = m.shape[0]
    scale = float(np.max(np.abs(m))) or 1.0
    mm = m / scale
    res = minimize(
        lambda x: float(x @ mm @ x),
        np.full(k, 1.0 / k),
        jac=lambda x: 2.0 * mm @ x,
        method="SLSQP",
        bounds=[(0.0, 1.0)] * k,
        constraints=[{"type": "eq", "fun": lambda x: float(x.sum() - 1.0)}],
        options={"maxiter": 500, "ftol": 1e-14},
    )
    x = np.clip(np.nan_to_num(np.asarray(res.x, dtype=np.float64)), 0.0, None)
    vertex = int(np.argmin(np.diag(mm)))
    if x.sum() <= 0 or not np.isfinite(x @ mm @ x):
        x = np.zeros(k)
        x[vertex] = 1.0
        return x
    x /= x.sum()
    if float(x @ mm @ x) > float(mm[vertex, vertex]):
        x = np.zeros(k)
        x[vertex] = 1.0
    return x


def _magic(
    data: Steps, w: np.ndarray, final_w: np.ndarray, episode: np.ndarray
) -> tuple[float, np.ndarray, str, float]:
    r"""MAGIC's value, influence terms and a note on its blend.

    With WDR's per-step means (:func:`_self_normalized`): :math:`a_t = \gamma^t X_t / D_t` and
    :math:`b_t = \gamma^t Y_t / D_{t-1}`, the off-policy :math:`j`-step return is
    :math:`g^{(j)} = \sum_{t \le j} (a_t + b_t) + b_{j+1}`: WDR's terms up to step :math:`j`
    and the model's value of the next state after (:math:`g^{(-1)}` the model alone,
    :math:`g^{(H-1)}` WDR). Their covariance :math:`\hat\Omega` comes from their influence
    terms, each one's bias :math:`\hat b_j` is its distance to WDR's
    :data:`MAGIC_BIAS_LEVEL` interval, and the blend :math:`x` minimizes
    :math:`x^\top(\hat\Omega + \hat b \hat b^\top)x` on the simplex."""
    n_ep, h, g = data.n_episodes, data.horizon, data.gamma
    assert data.q_hat is not None and data.v_hat is not None
    if n_ep * h * _MAGIC_ARRAYS > MAX_BOOTSTRAP_CELLS:
        raise EstimationError(
            f"MAGIC needs {n_ep:,} episodes x {h:,} steps of per-episode terms, more than "
            f"{MAX_BOOTSTRAP_CELLS // _MAGIC_ARRAYS:,}: use 'wdr' or 'mis_dr', or a shorter "
            "horizon."
        )
    x = w * (data.reward_tail - data.q_hat)
    y = _previous(w, data.starts) * data.v_hat
    comps = _DenseTerms(episode, data.step, x, y, w, final_w, h, g, model=True).components()
    xs, ys, dm = comps[:, :h], comps[:, h : 2 * h], comps[:, 2 * h :]
    disc = g ** np.arange(h, dtype=np.float64)
    d = dm.sum(axis=0)
    d_prev = np.concatenate(([float(n_ep)], d[:-1]))
    dm_prev = np.hstack([np.ones((n_ep, 1)), dm[:, :-1]])
    pos, pos_prev = d > 0, d_prev > 0
    x_mean = np.divide(xs.sum(axis=0), d, out=np.zeros(h), where=pos)
    y_mean = np.divide(ys.sum(axis=0), d_prev, out=np.zeros(h), where=pos_prev)
    a, b = disc * x_mean, disc * y_mean
    alpha = np.where(pos, n_ep * disc * (xs - x_mean * dm) / np.where(pos, d, 1.0), 0.0)
    beta = np.where(
        pos_prev, n_ep * disc * (ys - y_mean * dm_prev) / np.where(pos_prev, d_prev, 1.0), 0.0
    )
    steps = _magic_steps(h)
    b_next = np.concatenate((b[1:], [0.0]))
    beta_next = np.hstack([beta[:, 1:], np.zeros((n_ep, 1))])
    cum = np.concatenate(([0.0], np.cumsum(a + b)))  # cum[j + 1] = sum_{t <= j}
    cum_psi = np.hstack([np.zeros((n_ep, 1)), np.cumsum(alpha + beta, axis=1)])
    returns = np.array([cum[j + 1] + (b_next[j] if j >= 0 else b[0]) for j in steps])
    psi = np.column_stack(
        [cum_psi[:, j + 1] + (beta_next[:, j] if j >= 0 else beta[:, 0]) for j in steps]
    )  # a loop over the (at most MAGIC_RETURNS) returns
    psi -= psi.mean(axis=0)
    omega = psi.T @ psi / (n_ep - 1) / n_ep
    if not (np.isfinite(returns).all() and np.isfinite(omega).all()):  # refused by the caller
        return math.nan, np.full(n_ep, math.nan), "", 0.0
    band = normal_interval(returns[-1], math.sqrt(omega[-1, -1]), confidence_level=MAGIC_BIAS_LEVEL)
    bias = np.maximum(0.0, np.maximum(band.low - returns, returns - band.high))
    blend = _simplex_minimum(omega + np.outer(bias, bias))
    value = float(blend @ returns)
    blend_bias = abs(value - float(returns[-1]))  # the distance to WDR bounds the blend's bias
    top = np.argsort(-blend)[:3]
    shown = ", ".join(
        f"{'model alone' if steps[i] < 0 else f'j={int(steps[i])}'} {blend[i]:.2f}"
        for i in top
        if blend[i] >= 0.005
    )
    note = (
        f"MAGIC blends {steps.size} off-policy j-step returns (WDR's terms to step j, the "
        f"model's value after; j=-1 the model alone, j={h - 1} WDR) by the weights that minimize "
        f"their estimated mean squared error, bias measured against WDR's "
        f"{MAGIC_BIAS_LEVEL:.0%} normal interval; largest weights: {shown}. Its standard "
        f"error adds the distance to WDR ({blend_bias:.3g}, a bound on the blend's bias when "
        "WDR is unbiased) to the blend's standard deviation, the blend taken as fixed; no "
        "bootstrap"
    )
    return value, psi @ blend, note, blend_bias


def _diagnose(
    estimator: str,
    policy: str | None,
    n_ep: int,
    w: np.ndarray,
    final_w: np.ndarray,
    ess: float,
    notes: list[tuple[str, type[Warning]]],
) -> tuple[str, ...]:
    """Raise when the value is undefined; return notes (each also emitted as a warning).

    The rules are ope's (:func:`ope._thresholds.low_ess`, :func:`ope._thresholds.small_sample`,
    with episodes as the units); the texts are specific to trajectories, whose remedies (a
    model, a shorter horizon) and interval methods (normal, t, bootstrap) differ from the
    bandit estimators'.
    """
    who = estimator + (f" (policy {policy!r})" if policy else "")
    if n_ep < MIN_EPISODES:
        raise EstimationError(
            f"{who}: a standard error needs at least {MIN_EPISODES} episodes; got {n_ep}."
        )
    per_step = ("pdis", "wpdis", "dr", "wdr", "mis", "mis_dr", "magic")
    weightless = not w.any() if estimator in per_step else not final_w.any()
    if weightless:
        text = (
            "every importance weight is zero: the candidate never takes the logged actions, so "
            "the trajectories carry no information about it by weighting."
        )
        if estimator not in MODEL_BASED:
            raise EstimationError(
                f"{who}: {text} Use 'dr', 'wdr' or 'mis_dr' with a model, or logs with more "
                "exploration."
            )
        notes.append(
            (
                text + " The estimate reduces to the model's value of the first states.",
                OverlapWarning,
            )
        )
    elif low_ess(ess, n_ep):
        notes.append(
            (
                f"effective sample size of the trajectory weights is {ess:.1f}, "
                f"{ess / n_ep:.2%} of {n_ep} episodes: the estimate rests on a few "
                "trajectories. Prefer 'wdr' or 'dr' with a good model, clip with "
                "max_weight=, or shorten the horizon.",
                OverlapWarning,
            )
        )
    if small_sample(n_ep):
        notes.append(
            (
                f"only {n_ep} episodes (< {SMALL_SAMPLE_ROWS}): normal and t intervals rely on "
                "the central limit theorem and may undercover."
                + (
                    " The hoeffding, bernstein and betting intervals hold at every n (pass "
                    "reward_range=..., horizon=... and weight_bound=...)."
                    if estimator in BOUNDED_ESTIMATORS
                    else ""
                ),
                SmallSampleWarning,
            )
        )
    for text, category in notes:
        warnings.warn(f"{who}: {text}", category, stacklevel=user_stacklevel())
    return tuple(text for text, _ in notes)


def episode_weights(
    trajectories: Trajectories,
    target: PerStep,
    *,
    gamma: float = 1.0,
    tail_value: float | PerStep | None = None,
    reward_range: tuple[float, float] | None = None,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    r"""Each episode's trajectory-wise importance weight and discounted return:
    :math:`W_e = \prod_t \pi(a_t|s_t) / \pi_0(a_t|s_t)` and
    :math:`G_e = \sum_t \gamma^t r_t` (plus :math:`\gamma^{T} v` for a truncated episode
    with ``tail_value``), the pairs behind trajectory-wise IS
    (:math:`\frac1E \sum_e W_e G_e`) and the return distributions of
    :func:`ope.return_distribution`.

    Parameters
    ----------
    trajectories : ope.Trajectories
    target : str or per-step array
        A candidate's ``target__<name>`` column (name) or its per-step probabilities of the
        logged actions.
    gamma : float, default 1.0
    tail_value : float or per-step array, optional
        As in :func:`ope.sequential_estimate` (a truncated episode's tail).
    reward_range : (float, float), optional
        Checked against the rewards.

    Returns
    -------
    (weights, returns) : two float64 arrays of shape (E,), in episode order

    Examples
    --------
    >>> import ope
    >>> from ope.simulate import TabularMDP
    >>> env = TabularMDP(n_states=3, n_actions=2, horizon=3, seed=0)
    >>> traj = ope.read_trajectories(env.sample(50, rng=0))
    >>> w, g = ope.sequential.episode_weights(traj, "greedy", tail_value=0.0)
    >>> w.shape == g.shape == (50,)
    True
    """
    data, policy, notes = validated_steps(
        trajectories,
        target,
        estimator="is",
        gamma=gamma,
        q_hat=None,
        v_hat=None,
        tail_value=tail_value,
        reward_range=reward_range,
        max_weight=None,
        confidence_level=DEFAULT_CONFIDENCE_LEVEL,
    )
    who = policy or "target"
    for text, category in notes:
        warnings.warn(f"{who}: {text}", category, stacklevel=user_stacklevel())
    w = _cumulative_weights(data)
    first, last = data.starts[:-1], data.starts[1:] - 1
    returns = np.add.reduceat(data.gamma**data.step * data.reward_tail, first)
    return w[last], np.asarray(returns, dtype=np.float64)


def sequential_estimate(
    trajectories: Trajectories,
    target: PerStep,
    *,
    estimator: _EstimatorName = "pdis",
    gamma: float = 1.0,
    q_hat: PerStep | None = None,
    v_hat: PerStep | None = None,
    tail_value: float | PerStep | None = None,
    reward_range: tuple[float, float] | None = None,
    max_weight: float | None = None,
    confidence_level: float = DEFAULT_CONFIDENCE_LEVEL,
    ci: str = "normal",
    weight_bound: float | npt.ArrayLike | None = None,
    horizon: int | str | None = None,
    state: PerStep | None = None,
) -> Estimate:
    r"""Estimate a candidate policy's expected discounted return from logged trajectories.

    Parameters
    ----------
    trajectories : ope.Trajectories
        Validated steps sorted by (episode_id, step), from :func:`ope.read_trajectories`. Every
        per-step array below is aligned with these rows (their sorted order).
    target : str or array_like of shape (n,)
        The candidate's probability :math:`\pi_e(a_t \mid s_t)` of each logged action, in
        [0, 1]: a column name (``"target__greedy"``, or just ``"greedy"``) or an array.
    estimator : {"is", "pdis", "wis", "wpdis", "dr", "wdr", "mis", "mis_dr", "magic"}, default "pdis"
        See Notes.
    gamma : float, default 1.0
        Discount factor in [0, 1]; step ``t`` (0-based) is discounted by ``gamma**t``.
    q_hat, v_hat : str or array_like of shape (n,), optional
        ``dr``, ``wdr``, ``mis_dr`` and ``magic`` only (required there): a model's :math:`\hat Q(s_t, a_t)` of the
        logged action and :math:`\hat V(s_t) = \sum_a \pi_e(a \mid s_t) \hat Q(s_t, a)`, per
        step (time-dependent values are fine), as column names or arrays.
    tail_value : float, str or array_like, optional
        A value estimate :math:`\hat V(s_L)` of the state each *truncated* episode was left in
        (after its last logged step): an array with one value per episode, or per step (the
        last step of each episode is read), a column name (per step), or a scalar. Entries of
        episodes that terminated are not used. None (default) with truncated episodes present
        emits an ``OPEWarning`` (see Notes); ``tail_value=0.0`` states that the truncated
        value is the target and silences it.
    reward_range : (float, float), optional
        A priori range :math:`[r_{lo}, r_{hi}]` of a single step's reward; rewards outside it
        are an error. Needed by the bounded intervals.
    max_weight : float, optional
        Clip every cumulative importance weight :math:`w_{0:t}` at this level (biased, lower
        variance): the estimate is then of the *clipped* value (see Notes). Must be positive.
    confidence_level : float, default 0.95
        Level of the interval stored in ``ci_low``/``ci_high``.
    ci : {"normal", "t", "hoeffding", "bernstein", "betting"}, default "normal"
        Method of the stored interval. The bounded ones apply to ``is`` and ``pdis`` (clipped
        or not) and need ``reward_range`` and ``horizon`` (and ``weight_bound`` or
        ``max_weight``, except betting for ``is``); see Notes. The bootstrap is available
        from ``res.ci(method="bootstrap", rng=...)``.
    weight_bound : float or array_like of shape (horizon,), optional
        ``is``/``pdis`` only: an a priori bound on the importance weights, for the bounded
        intervals. A number :math:`B` bounds every *per-step* ratio,
        :math:`B \ge \pi_e(a|s)/\pi_b(a|s)` for every state and action (e.g. 1 / the
        smallest logging probability), so that :math:`w_{0:t} \le W_t = B^{t+1}`; an array
        gives the bounds :math:`W_t` on the cumulative weights :math:`w_{0:t}` themselves,
        one per step ``t = 0 .. horizon - 1``. Weights above it are a ValidationError. It can
        also be given later, to ``res.ci(..., weight_bound=...)``.
    horizon : int or "logged", optional
        ``is``/``pdis`` only: the a priori maximum episode length :math:`H`, for the bounded
        intervals; a longer episode is a ValidationError. ``"logged"`` states that the
        longest logged episode is the horizon (only when that is known, e.g. logs cut at a
        fixed horizon that some episode reached).
    state : str or array_like of shape (n,), optional
        ``mis`` and ``mis_dr`` only: each step's discrete state (a column name, default
        ``"state"``, or an array of integers or strings); continuous states must be binned
        first. The estimate assumes the process is Markov in it.

    Returns
    -------
    Estimate
        ``value``, ``std_error`` (from per-episode terms; the delta method for ``wis``,
        ``wpdis``, ``wdr``), ``n`` (episodes), ``ess`` (Kish effective sample size of the
        trajectory weights :math:`\rho_{0:L-1}`), ``notes``; ``ci(confidence_level, method)``
        for ``normal``, ``t`` and ``bootstrap`` (resampling whole episodes, self-normalized
        estimators renormalized in each resample), and for ``is``/``pdis`` ``hoeffding``,
        ``bernstein`` and ``betting`` (finite-sample, from the a priori bounds). Two
        estimates on the same trajectories can be compared with
        :func:`ope.results.compare` (paired by episode).

    Raises
    ------
    ope.ParameterError
        ``trajectories`` is not an ``ope.Trajectories``; unknown estimator; ``gamma``,
        ``max_weight``, ``reward_range``, ``confidence_level``, ``ci``, ``weight_bound`` or
        ``horizon`` malformed; a model array missing for ``dr``/``wdr`` or given to an
        estimator that does not use it; ``weight_bound``/``horizon`` given to an estimator
        other than ``is``/``pdis``; ``ci="bootstrap"``.
    ope.MissingBoundsError
        A bounded ``ci`` without ``reward_range``, ``horizon`` or (where needed)
        ``weight_bound``/``max_weight``; the message names what to pass.
    ope.SchemaError
        A named column (target, model, tail) or a required trajectory column is missing.
    ope.ValidationError
        Rows not sorted by (episode_id, step); ``done`` before an episode's last step;
        propensities outside (0, 1]; non-finite rewards or model values; rewards outside
        ``reward_range``; an array of the wrong length; an episode longer than
        ``horizon``; a weight above ``weight_bound``. Messages name the first rows.
    ope.PolicyError
        Target probabilities outside [0, 1] or not finite.
    ope.EstimationError
        Fewer than 2 episodes; every importance weight zero (for the estimators without a
        model); cumulative weights overflowing float64 without ``max_weight``; a bounded
        ``ci`` for an estimator other than ``is``/``pdis``, or with tail values.

    Warns
    -----
    OPEWarning
        Truncated episodes and no ``tail_value``.
    OverlapWarning
        Effective sample size below 1% of the episodes, or no weight at all (``dr``/``wdr``).
    SmallSampleWarning
        Fewer than 30 episodes.

    Notes
    -----
    Episode :math:`i` has steps :math:`t = 0 .. L_i - 1`, per-step ratios
    :math:`\rho_t = \pi_e(a_t|s_t)/\pi_b(a_t|s_t)`, cumulative weights
    :math:`w_t = \prod_{k \le t} \rho_k` (:math:`w_{-1} = 1`) and :math:`n` episodes:

    .. math::

        \hat V_{IS} &= \frac1n \sum_i w^i_{L_i-1} \sum_t \gamma^t r^i_t, \qquad
        \hat V_{PDIS} = \frac1n \sum_i \sum_t \gamma^t w^i_t r^i_t, \\
        \hat V_{WIS} &= \frac{\sum_i w^i_{L_i-1} \sum_t \gamma^t r^i_t}{\sum_i w^i_{L_i-1}},
        \qquad
        \hat V_{WPDIS} = \sum_t \gamma^t \frac{\sum_i w^i_t r^i_t}{D_t}, \\
        \hat V_{DR} &= \frac1n \sum_i \sum_t \gamma^t \big(w^i_t (r^i_t - \hat Q^i_t)
        + w^i_{t-1} \hat V^i_t\big), \\
        \hat V_{WDR} &= \sum_i \sum_t \gamma^t \Big(\frac{w^i_t}{D_t}(r^i_t - \hat Q^i_t)
        + \frac{w^i_{t-1}}{D_{t-1}} \hat V^i_t\Big), \quad D_{-1} = n,

    where :math:`D_t = \sum_i w^i_{\min(t, L_i - 1)}`: an episode that ended keeps its last
    weight and earns nothing afterwards, as in an absorbing state, so episodes of different
    lengths share one normalizer per step. ``dr`` is the recursion of Jiang & Li (2016),
    :math:`V^{(t)} = \hat V(s_t) + \rho_t (r_t + \gamma V^{(t+1)} - \hat Q(s_t, a_t))`,
    unrolled. ``is``, ``pdis`` and ``dr`` are unbiased (``dr`` when the model does not depend
    on these trajectories); ``wis``, ``wpdis`` and ``wdr`` are consistent, with a bias that
    vanishes as :math:`n` grows, and much lower variance. ``wpdis`` is ``wdr`` with a zero
    model, and ``pdis`` is ``dr`` with a zero model.

    **Marginalized.** The candidate's state distribution per step is estimated forward: its
    mass :math:`D_0(s)` is the number of episodes starting in :math:`s`, each row of step
    :math:`t` in state :math:`s` carries :math:`\hat\mu = D_t(s)\,\rho_t / \Sigma_t(s)` with
    :math:`\Sigma_t(s)` the sum of the ratios of the rows in that cell, and :math:`D_{t+1}(s')`
    sums the :math:`\hat\mu` of the rows that move to :math:`s'`. Then

    .. math::

        \hat V_{MIS} = \frac1n \sum_i \sum_t \gamma^t \hat\mu^i_t r^i_t,

    the plug-in value of the tabular model the logs estimate, its transitions and rewards
    self-normalized per cell (Xie, Ma & Wang 2019): consistent when the process is Markov in
    ``state`` and every state the candidate reaches at a step was logged there, with a variance
    polynomial in the horizon. ``mis_dr`` is ``dr`` with :math:`\hat\mu_t` in place of
    :math:`w_t` and the state ratio :math:`\hat w_t(s_t) = D_t(s_t)/n_t(s_t)` (:math:`n_t(s)`
    the rows in the cell) in place of :math:`w_{t-1}`. Both standard errors are the delta
    method's over the per-(step, state) sums, in one backward pass (influence terms
    :math:`\varphi_i = \lambda_0(s_0) + \sum_t \hat\mu_t[\gamma^t (r_t - \hat Q_t) +
    \lambda_{t+1}(s_{t+1}) - \lambda_t(s_t) + \gamma^t \bar v_t(s_t)] + \gamma^t \hat
    w_t(s_t)(\hat V_t - \bar v_t(s_t))`, :math:`\lambda` the adjoint of the mass; no model
    terms for ``mis``). No bootstrap (a resample of fixed terms would not re-estimate the
    ratios), no clipping, no bounded intervals; the effective sample is the number of episodes
    times the smallest share of effective rows (Kish) over the steps. States must be discrete: a state column in which most rows are alone in their
    (step, state) cell is refused (bin it first).

    **MAGIC** (Thomas & Brunskill 2016). The off-policy :math:`j`-step return
    :math:`g^{(j)}` is WDR's terms up to step :math:`j` and the model's value of the state
    after, :math:`\gamma^{j+1} \sum_i w^i_j \hat V^i_{j+1} / D_j` (:math:`g^{(-1)}` the model
    alone, :math:`g^{(H-1)}` WDR), for :data:`MAGIC_RETURNS` values of :math:`j`. The estimate
    is :math:`x^\top g` with :math:`x` on the simplex minimizing
    :math:`x^\top(\hat\Omega + \hat b\hat b^\top)x`: :math:`\hat\Omega` the covariance of
    the returns (from their delta-method influence terms), :math:`\hat b_j` the distance of
    :math:`g^{(j)}` to WDR's :data:`MAGIC_BIAS_LEVEL` normal interval. The blend leans on the
    model where the data cannot refute it, so its own spread understates its error when the
    model is biased; the standard error adds the distance to WDR (a bound on the blend's bias
    when WDR is unbiased): :math:`\mathrm{se}^2 = x^\top\hat\Omega x + (x^\top g - g^{(H-1)})^2`.

    **Truncation.** Without ``tail_value`` every estimator estimates
    :math:`E[\sum_{t < L} \gamma^t r_t]` with :math:`L` the logged length: the value of the
    episodes *truncated where the logs end* (for logs cut at a fixed horizon :math:`H`, the
    :math:`H`-step value; the truncation point must not depend on the actions). With
    ``tail_value`` :math:`\hat V(s_L)` the reward of each truncated episode's last step is
    replaced by :math:`r_{L-1} + \gamma \hat V(s_L)`, the tail term
    :math:`\gamma^L w_{L-1} \hat V(s_L)` of Thomas & Brunskill (2016); with an unbiased
    :math:`\hat V` of the untruncated process, ``is``, ``pdis`` and ``dr`` then estimate the
    untruncated value. For ``dr``/``wdr`` give ``q_hat``/``v_hat`` of the same process
    (truncated, time-dependent values for the first estimand; untruncated ones with a tail).

    **Standard errors.** For ``is``, ``pdis``, ``dr`` the per-episode terms :math:`G_i` give
    :math:`\mathrm{se} = \mathrm{sd}(G)/\sqrt n`. For the self-normalized estimators, the value
    is a smooth function of per-step means, and :math:`\mathrm{se} = \mathrm{sd}(\psi)/\sqrt n`
    with the influence terms :math:`\psi_i = \sum_t \gamma^t (x^i_t - U_t d^i_t)/\bar D_t +
    \ldots` (the delta method), computed per step without an (episodes x horizon) array.

    **Clipping.** With ``max_weight`` :math:`c` every cumulative weight is replaced by
    :math:`\bar w_t = \min(w_t, c)`, and the estimators estimate the *clipped value*
    (for ``is``: :math:`E_b[\min(w_{L-1}, c) G]`, for ``pdis``:
    :math:`E_b[\sum_t \gamma^t \min(w_t, c) r_t]`), at most the candidate's value when
    rewards are non-negative; a note on the result says so.

    **Bounded intervals** (``is``, ``pdis``, clipped or not). Episodes are i.i.d.; the
    estimate is the mean of per-episode terms :math:`Y_i`, and an a priori range of
    :math:`Y_i` gives Hoeffding's and the empirical Bernstein (Maurer & Pontil) interval for
    their mean. With :math:`0 \le \bar w_t \le W_t` (:math:`W_t = B^{t+1}` from a scalar
    ``weight_bound``, the given array otherwise, capped at :math:`c` when clipping, and
    :math:`W_t = c` from ``max_weight`` alone), rewards in :math:`[r_{lo}, r_{hi}]`,
    lengths :math:`1 \le L \le H` and :math:`S_L = \sum_{t<L} \gamma^t`:

    .. math::

        Y^{PDIS} = \sum_{t<L} \gamma^t \bar w_t r_t &\in
        \Big[\sum_{t<H} \gamma^t \min(0, W_t r_{lo}),\;
        \sum_{t<H} \gamma^t \max(0, W_t r_{hi})\Big], \\
        Y^{IS} = \bar w_{L-1} \sum_{t<L} \gamma^t r_t &\in
        \Big[\min_{L \le H} \min(0, W_{L-1} r_{lo} S_L),\;
        \max_{L \le H} \max(0, W_{L-1} r_{hi} S_L)\Big],

    each summand lying between 0 (a zero weight) and its weight bound times the reward
    bound, and the steps after an episode's end adding nothing. The interval is then
    intersected with the range the estimand can take: :math:`[G_{lo}, G_{hi}] =
    [\min(r_{lo}, r_{lo} S_H), \max(r_{hi}, r_{hi} S_H)]` for the value, and
    :math:`[\min(0, G_{lo}), \max(0, G_{hi})]` for a clipped value (clipped weights
    average to at most 1). Hoeffding and Bernstein cover the estimand: the value, or the
    clipped value when clipping. ``betting`` for ``pdis`` is the betting interval of the
    mean of the bounded terms (unit weights). ``betting`` for ``is`` uses the structure
    instead: the off-policy betting confidence sequence (Karampatziakis, Mineiro & Ramdas
    2021) with weights :math:`\bar w_{L-1}` and "rewards" the returns, in
    :math:`[G_{lo}, G_{hi}]`; it needs no weight bound, only that the weights average to at
    most 1, which clipped weights do too, so with clipping it covers the *unclipped* value.
    All assume the bounds were known before seeing the data, and that the estimand is the
    value within the logged horizon (no ``tail_value``, or ``tail_value=0.0``).

    References
    ----------
    .. [1] D. Precup, R. S. Sutton and S. Singh, "Eligibility traces for off-policy policy
       evaluation", Proc. ICML, 2000.
    .. [2] N. Jiang and L. Li, "Doubly robust off-policy value evaluation for reinforcement
       learning", Proc. ICML, 2016.
    .. [3] P. S. Thomas and E. Brunskill, "Data-efficient off-policy policy evaluation for
       reinforcement learning", Proc. ICML, 2016.
    .. [4] P. S. Thomas, *Safe Reinforcement Learning*, PhD thesis, University of
       Massachusetts Amherst, 2015 (CWPDIS).
    .. [5] N. Karampatziakis, P. Mineiro and A. Ramdas, "Off-policy confidence sequences",
       ICML 2021.
    .. [6] A. Maurer and M. Pontil, "Empirical Bernstein bounds and sample variance
       penalization", COLT 2009.
    .. [8] P. S. Thomas and E. Brunskill, "Data-efficient off-policy policy evaluation for
       reinforcement learning", ICML 2016 (MAGIC).
    .. [7] T. Xie, Y. Ma and Y.-X. Wang, "Towards optimal off-policy evaluation for
       reinforcement learning with marginalized importance sampling", NeurIPS 2019.

    Examples
    --------
    >>> import pandas as pd
    >>> from ope.io import read_trajectories
    >>> from ope.sequential import sequential_estimate
    >>> steps = pd.DataFrame({
    ...     "episode_id": [0, 0, 1, 1], "step": [0, 1, 0, 1], "action": [0, 1, 1, 1],
    ...     "propensity": 0.5, "reward": [1.0, 0.0, 0.0, 1.0], "done": [False, True] * 2,
    ...     "target__greedy": [1.0, 0.0, 1.0, 1.0]})
    >>> traj = read_trajectories(steps)
    >>> res = sequential_estimate(traj, "greedy", estimator="pdis", gamma=0.5)
    >>> res.value            # ((2 * 1) + (0.5 * 4 * 1)) / 2 episodes
    2.0
    >>> sequential_estimate(traj, "greedy", estimator="wpdis", gamma=0.5).value
    1.0

    A finite-sample interval, from rewards in [0, 1], at most 2 steps and per-step ratios at
    most 2 (terms in [0, 2 + 0.5 * 4]; Hoeffding at n = 2 is wide, then cut to the values a
    return can take, [0, 1.5]):

    >>> res = sequential_estimate(traj, "greedy", estimator="pdis", gamma=0.5, ci="hoeffding",
    ...                           reward_range=(0.0, 1.0), horizon=2, weight_bound=2.0)
    >>> res.ci_method, res.ci_low, res.ci_high
    ('hoeffding', 0.0, 1.5)
    """
    data, policy, notes = validated_steps(
        trajectories,
        target,
        estimator=estimator,
        gamma=gamma,
        q_hat=q_hat,
        v_hat=v_hat,
        tail_value=tail_value,
        reward_range=reward_range,
        max_weight=max_weight,
        confidence_level=confidence_level,
        state=state,
    )
    check_choice(ci, "ci", STORED_CI_METHODS + ("bootstrap",))
    if ci == "bootstrap":
        raise ParameterError(
            "ci='bootstrap' is random: ask for it on the result, "
            "res.ci(confidence_level, method='bootstrap', rng=seed), so the seed is yours."
        )
    if estimator not in BOUNDED_ESTIMATORS:
        given = [
            k for k, v in (("weight_bound", weight_bound), ("horizon", horizon)) if v is not None
        ]
        if given:
            raise ParameterError(
                f"{' and '.join(given)} serve the bounded intervals of 'is' and 'pdis' only; "
                f"estimator {estimator!r} does not use them."
            )
    if estimator in MARGINALIZED:
        return _marginalized_estimate(data, estimator, policy, notes, confidence_level, ci)
    h = check_horizon(horizon, data.lengths)
    wb = checked_weight_bound(weight_bound, h)
    w = _cumulative_weights(data)
    final_w = w[data.starts[1:] - 1]
    n_ep = data.n_episodes
    # the self-normalized estimators, their influence terms and the Kish ESS do not change when
    # every weight is scaled by one constant (w_{-1} = 1 of wdr's y-terms stays): weights so
    # small that their squares or 1 / their sums leave float64 (a clip level like 5e-324) are
    # scaled to a largest weight of 1 for them
    top = float(w.max(initial=0.0))
    w_sn, final_sn = (w / top, final_w / top) if 0.0 < top < 2.0**-500 else (w, final_w)
    ess = kish_ess(float(final_sn.sum()), float(final_sn @ final_sn))
    rho_max = float(data.rho.max())
    if wb is not None:
        check_weights_within(wb, rho_max, w, data.step)
    note_texts = _diagnose(estimator, policy, n_ep, w, final_w, ess, notes)
    if data.max_weight is not None:
        note_texts += (
            _clip_note(estimator, data.max_weight, int(np.sum(w >= data.max_weight)), w.size),
        )
    source: _SequentialSource
    if estimator == "magic":
        episode = np.repeat(np.arange(n_ep, dtype=np.int64), data.lengths)
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused below
            value, psi, blend, blend_bias = _magic(data, w_sn, final_sn, episode)
            se = math.hypot(float(np.std(psi, ddof=1) / math.sqrt(n_ep)), blend_bias)
        _check_finite_estimate(estimator, data, value, se)
        note_texts += (blend,)
        source = _SequentialSource(estimator, data.reward, n_ep, psi, columns=(psi + value,))
        source.methods = ()  # a resample of the rows would miss the bias term
    elif estimator in ("wpdis", "wdr"):
        episode = np.repeat(np.arange(n_ep, dtype=np.int64), data.lengths)
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused below
            value, psi, dense = _self_normalized(data, estimator, w_sn, final_sn, episode)
            se = float(np.std(psi, ddof=1) / math.sqrt(n_ep))
        _check_finite_estimate(estimator, data, value, se)
        source = _SequentialSource(estimator, data.reward, n_ep, psi, dense=dense)
    else:
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused below
            if estimator in ("is", "wis"):
                value, se, psi, cols = _trajectory_wise(
                    data, estimator, final_sn if estimator == "wis" else final_w
                )
            else:
                value, se, psi, cols = _per_decision(data, estimator, w)
        _check_finite_estimate(estimator, data, value, se)
        bounded = None
        if estimator in BOUNDED_ESTIMATORS:
            first = data.starts[:-1]
            returns = np.add.reduceat(
                data.gamma ** data.step.astype(np.float64) * data.reward_tail, first
            )
            bounded = EpisodeTerms(
                kind=estimator,
                terms=cols[0],
                final_w=final_w,
                returns=returns,
                rho_max=rho_max,
                w=w,
                step=data.step,
                gamma=data.gamma,
                reward_range=check_reward_range(reward_range),
                horizon=h,
                max_weight=data.max_weight,
                weight_bound=wb,
                tail_used=bool(np.any(data.reward_tail != data.reward)),
            )
        source = _SequentialSource(estimator, data.reward, n_ep, psi, columns=cols, bounded=bounded)
    return _finish(
        estimator, value, se, n_ep, ess, note_texts, policy, source, psi, confidence_level, ci
    )


# ============================================================================================
# state-marginalized importance sampling
# ============================================================================================
class _StepRows:
    """The rows of each step and each row's successor: the structure the marginalized
    recursions walk, one step at a time (a loop over the horizon, each step vectorized)."""

    def __init__(self, data: Steps) -> None:
        n = data.step.size
        self.order = np.argsort(data.step, kind="stable")
        self.bounds = np.concatenate(([0], np.cumsum(np.bincount(data.step))))
        self.cont = np.ones(n, dtype=bool)
        self.cont[data.starts[1:] - 1] = False  # an episode's last row has no successor
        self.next = np.zeros(n, dtype=np.int64)
        assert data.state is not None
        self.next[self.cont] = data.state[np.flatnonzero(self.cont) + 1]
        self.n_states = int(data.state.max()) + 1

    def at(self, t: int) -> np.ndarray:
        return self.order[self.bounds[t] : self.bounds[t + 1]]


def _state_marginal_ratios(data: Steps, rows: _StepRows) -> tuple[np.ndarray, np.ndarray, float]:
    r"""Per row, the estimated state-action ratio :math:`\hat\mu` and state ratio
    :math:`\hat w_t(s_t) = \hat d^\pi_t(s_t) / \hat d^b_t(s_t)`, and the candidate's
    probability mass lost in (step, state) cells where it takes no logged action.

    Forward, with :math:`D_t(s) = n\,\hat d^\pi_t(s)` (:math:`D_0` the logged first states) and
    :math:`\Sigma_t(s)` the sum of the ratios :math:`\rho` of the rows in state :math:`s` at
    step :math:`t`: each row carries :math:`\hat\mu = D_t(s_t)\,\rho / \Sigma_t(s_t)`, and
    :math:`D_{t+1}(s')` sums the :math:`\hat\mu` of the rows that move to :math:`s'`. Each
    state's transitions and rewards under the candidate are thus self-normalized (their
    weights sum to 1 in every cell), so the mass never drifts with the horizon."""
    assert data.state is not None
    n_rows, k = data.step.size, rows.n_states
    mu = np.zeros(n_rows)
    w_state = np.zeros(n_rows)
    first = data.starts[:-1]
    mass = np.bincount(data.state[first], minlength=k).astype(np.float64)  # D_0
    lost = 0.0
    for t in range(data.horizon):  # a loop over steps (each step's rows at once)
        r = rows.at(t)
        st = data.state[r]
        sigma = np.bincount(st, weights=data.rho[r], minlength=k)
        count = np.bincount(st, minlength=k)
        lost += float(mass[(sigma == 0) & (mass > 0)].sum())
        scale = np.divide(mass, sigma, out=np.zeros(k), where=sigma > 0)
        mu[r] = scale[st] * data.rho[r]
        w_state[r] = np.divide(mass, count, out=np.zeros(k), where=count > 0)[st]
        c = r[rows.cont[r]]
        mass = np.bincount(rows.next[c], weights=mu[c], minlength=k).astype(np.float64)
    return mu, w_state, lost / data.n_episodes


def _marginal_influence(
    data: Steps, rows: _StepRows, mu: np.ndarray, w_state: np.ndarray, model: bool
) -> np.ndarray:
    r"""Per episode, the influence term :math:`\varphi_i` of ``mis`` (``model=False``) or
    ``mis_dr``, whose mean is the estimate: the delta method over the per-(step, state) sums
    the estimate is made of, by one backward pass (the adjoint :math:`\lambda_t(s)` of the
    candidate's mass in each cell).

    With :math:`e_t = \gamma^t (r_t - \hat Q_t) + \lambda_{t+1}(s_{t+1})` (no
    :math:`\hat Q` for ``mis``; 0 after an episode's end), :math:`\bar v_t(s)` the cell's mean
    :math:`\hat V` and :math:`\lambda_t(s) = \gamma^t \bar v_t(s) + \sum_{cell} \rho\, e_t /
    \sum_{cell} \rho`: :math:`\varphi_i = \lambda_0(s_0) + \sum_t \hat\mu_t [e_t -
    \lambda_t(s_t) + \gamma^t \bar v_t(s_t)] + \gamma^t \hat w_t(s_t) [\hat V_t - \bar
    v_t(s_t)]`. For ``mis``, :math:`\lambda` is the estimated model's value-to-go."""
    assert data.state is not None
    k = rows.n_states
    disc = data.gamma ** np.arange(data.horizon, dtype=np.float64)
    resid = data.reward_tail - data.q_hat if model and data.q_hat is not None else data.reward_tail
    phi_rows = np.empty(data.step.size)
    later = np.zeros(k)  # lambda_{t+1}
    for t in range(data.horizon - 1, -1, -1):  # a loop over steps, from the last
        r = rows.at(t)
        st = data.state[r]
        ahead = disc[t] * resid[r] + np.where(rows.cont[r], later[rows.next[r]], 0.0)
        sigma = np.bincount(st, weights=data.rho[r], minlength=k)
        now = np.divide(
            np.bincount(st, weights=data.rho[r] * ahead, minlength=k),
            sigma,
            out=np.zeros(k),
            where=sigma > 0,
        )
        if model and data.v_hat is not None:
            count = np.bincount(st, minlength=k)
            vbar = np.divide(
                np.bincount(st, weights=data.v_hat[r], minlength=k),
                count,
                out=np.zeros(k),
                where=count > 0,
            )
            phi_rows[r] = mu[r] * (ahead - now[st]) + disc[t] * w_state[r] * (
                data.v_hat[r] - vbar[st]
            )
            now = now + disc[t] * vbar
        else:
            phi_rows[r] = mu[r] * (ahead - now[st])
        later = now
    first = data.starts[:-1]
    return np.add.reduceat(phi_rows, first) + later[data.state[first]]


#: A share of the candidate's mass lost in unsupported (step, state) cells above which MIS
#: says so (a warning and a note): below it, the loss is within the noise of the estimate.
_LOST_MASS_NOTE: Final = 0.01


#: A state column in which more than this share of the rows are alone in their (step, state)
#: cell is continuous in all but name: every cell's weight would cancel (MIS would return the
#: logged mean), so it is refused.
MAX_SINGLETON_SHARE: Final = 0.5


def _check_discrete_states(data: Steps, rows: _StepRows) -> None:
    """Refuse states that are (nearly) unique per step (see :data:`MAX_SINGLETON_SHARE`)."""
    assert data.state is not None
    cell = data.step.astype(np.int64) * rows.n_states + data.state
    _, inverse, counts = np.unique(cell, return_inverse=True, return_counts=True)
    alone = float(np.mean(counts[inverse] == 1))
    if alone > MAX_SINGLETON_SHARE and data.n_episodes > 1:
        raise EstimationError(
            f"`state`: {alone:.0%} of the steps are alone in their (step, state) cell, so the "
            "state-marginal ratios cannot be estimated (each cell's weight cancels): the "
            "states look continuous or unique per episode. Bin them into a few values per "
            "step, or use a per-decision estimator."
        )


def _marginalized_estimate(
    data: Steps,
    estimator: str,
    policy: str | None,
    notes: list[tuple[str, type[Warning]]],
    confidence_level: float,
    ci: str,
) -> Estimate:
    """``mis`` and ``mis_dr``: weights by the estimated state-marginal ratio (see
    :func:`sequential_estimate`)."""
    rows = _StepRows(data)
    _check_discrete_states(data, rows)
    mu, w_state, lost = _state_marginal_ratios(data, rows)
    final = mu[data.starts[1:] - 1]
    n_ep = data.n_episodes
    rows_at = np.bincount(data.step)
    sums, squares = np.bincount(data.step, weights=mu), np.bincount(data.step, weights=mu * mu)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(squares > 0, sums * sums / np.where(squares > 0, squares, 1.0), 0.0)
    # the least effective step, as a share of its rows (late steps hold fewer episodes)
    ess = n_ep * float(np.min(share / rows_at))
    if lost > _LOST_MASS_NOTE:
        notes.append(
            (
                f"{lost:.1%} of the candidate's probability mass reaches (step, state) cells "
                "where it takes none of the logged actions: that mass is lost, and the estimate "
                "is biased toward 0 by its share of the value (the logs cannot weigh it).",
                OverlapWarning,
            )
        )
    note_texts = _diagnose(estimator, policy, n_ep, mu, final, ess, notes)
    disc = data.gamma ** data.step.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused below
        model = estimator == "mis_dr"
        phi = _marginal_influence(data, rows, mu, w_state, model)
        terms = mu * data.reward_tail
        if model:
            assert data.q_hat is not None and data.v_hat is not None
            terms = mu * (data.reward_tail - data.q_hat) + w_state * data.v_hat
        value = float(np.sum(disc * terms) / n_ep)
        psi = phi - phi.mean()
        se = float(np.std(psi, ddof=1) / math.sqrt(n_ep))
    _check_finite_estimate(estimator, data, value, se)
    source = _SequentialSource(estimator, data.reward, n_ep, psi, columns=(phi,))
    source.methods = ()  # a resample of fixed terms would not re-estimate the ratios
    note_texts += (
        f"{estimator!r} weights each step by the state-marginal ratio estimated from the logs "
        f"({rows.n_states} states, per step): it assumes the process is Markov in the given "
        "state; its standard error is the delta method's over the per-(step, state) means",
    )
    return _finish(
        estimator, value, se, n_ep, ess, note_texts, policy, source, psi, confidence_level, ci
    )


def _finish(
    estimator: str,
    value: float,
    se: float,
    n_ep: int,
    ess: float,
    note_texts: tuple[str, ...],
    policy: str | None,
    source: _SequentialSource,
    psi: np.ndarray,
    confidence_level: float,
    ci: str,
) -> Estimate:
    """The estimate of every sequential estimator: its notes (a skewness warning where the
    low-ESS note does not already say the interval may be short) and its stored interval."""
    if n_ep > 1 and not low_ess(ess, n_ep):  # the low-ESS note already says it may be short
        note_texts += tuple(
            skewed_notes(
                estimator,
                n_ep,
                float(skewness(psi)),
                source,
                policy,
                unit="episodes",
                fallback=SEQUENTIAL_SKEW_ADVICE,
                needs="reward_range=..., horizon=... and weight_bound=...",
            )
        )
    result = make_estimate(
        estimator=estimator,
        value=value,
        std_error=se,
        n=n_ep,
        ess=ess,
        notes=note_texts,
        policy=policy,
        source=source,
    )
    if confidence_level != DEFAULT_CONFIDENCE_LEVEL or ci != "normal":
        result = result.with_ci(confidence_level, ci)
    return result


#: What a skewed sequential estimate without an interval that holds at any n (WIS, WPDIS, DR,
#: WDR) is advised: the bootstrap does not repair it (percentile 0.907 and BCa 0.880 for WIS
#: results flagged in ``benchmarks/short_intervals.py``), the bounded trajectory intervals of IS
#: and PDIS do (betting covered 1.000 at 2.1 and 4.4 times the normal width).
SEQUENTIAL_SKEW_ADVICE: Final = (
    "No interval of this estimator holds at any n: read it as approximate, and check the "
    "decision with estimator='is' or 'pdis' and ci='betting' (with reward_range=..., "
    "horizon=... and weight_bound=...), which hold at any n."
)


def _check_finite_estimate(estimator: str, data: Steps, value: float, se: float) -> None:
    """Refuse a value (or, from 2 episodes on, a standard error) that overflowed float64: the
    inputs are finite, but sums of rewards near 1e308 are not (ValidationError naming the
    input with the largest magnitude, as returns and paired effects do)."""
    inputs = {"reward": data.reward}
    tail = data.reward_tail != data.reward
    if tail.any():
        inputs["tail_value"] = data.reward_tail[tail]
    if data.q_hat is not None and data.v_hat is not None:
        inputs.update(q_hat=data.q_hat, v_hat=data.v_hat)
    check_no_overflow(
        np.array([value, se] if data.n_episodes > 1 else [value]),
        f"the {estimator!r} estimate (its value or standard error)",
        inputs,
        row=None,
    )


def _clip_note(estimator: str, max_weight: float, n_clipped: int, n_steps: int) -> str:
    """The estimand of a clipped estimate, stated (a note, not a warning: nothing is wrong)."""
    intervals = {
        "is": " Hoeffding and Bernstein intervals cover the clipped value; the betting interval "
        "covers the candidate's value.",
        "pdis": " Hoeffding, Bernstein and betting intervals cover the clipped value.",
    }.get(estimator, "")
    return (
        f"cumulative importance weights are clipped at max_weight={max_weight:g} ({n_clipped} "
        f"of {n_steps} steps at the clip level): {estimator!r} estimates the clipped value, the "
        "expectation of the clipped-weight terms, not the candidate's value (for 'is'/'pdis' "
        "with non-negative rewards, at most the candidate's value)." + intervals
    )
