r"""A contextual bandit with a continuous action and exact values: the truth of
:mod:`ope.continuous`.

Contexts :math:`x \sim N(0, I_d)`; the logger draws :math:`a \sim N(\lambda^\top x,
\sigma_0^2)` and logs its density at :math:`a`; the reward is

.. math:: r = 1 + e^\top x - \kappa\,(a - \theta^\top x)^2 + \varepsilon,
          \qquad \varepsilon \sim N(0, s_r^2),

best at :math:`a = \theta^\top x`. A candidate is linear-Gaussian, :math:`a \sim N(\gamma^\top x
+ b, s^2)` (deterministic when :math:`s = 0`), and its value is exact:
:math:`V = 1 - \kappa\,(\lVert\gamma - \theta\rVert^2 + b^2 + s^2)`. The value of the candidate
*smoothed* by a kernel of bandwidth :math:`h` (what kernel estimators estimate) is
:math:`V - \kappa\, h^2 \mu_2(K)`, exactly: the smoothing bias is quadratic in :math:`h`
(:meth:`ContinuousBandit.smoothed_value`).
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
import pyarrow as pa

from ope._validation import check_choice, check_name, check_rng
from ope.exceptions import ParameterError
from ope.simulate._common import check_float, check_int, check_sample_size

__all__ = ["ContinuousBandit"]

#: The default candidates, as ``(coef_from, intercept, scale)``: ``coef_from`` names the
#: coefficients (the logger's ``lambda`` or the best ``theta``, or their midpoint ``mid``).
DEFAULT_CANDIDATES: Final = {
    "logger_mean": ("logger", 0.0, 0.0),
    "optimal": ("best", 0.0, 0.0),
    "halfway": ("mid", 0.0, 0.0),
    "shifted": ("logger", 1.5, 0.0),
    "noisy_optimal": ("best", 0.0, 0.5),
}


#: The largest bandwidth of :meth:`ContinuousBandit.smoothed_value` (its square stays finite).
_MAX_BANDWIDTH: Final = 1e150


class ContinuousBandit:
    """A bandit with one real-valued action per context and exact candidate values.

    Parameters
    ----------
    n_features : int, default 2
        The context's dimension ``d``.
    logger_scale : float, default 1.0
        The logger's standard deviation :math:`\\sigma_0` around its mean :math:`\\lambda^\\top x`.
    curvature : float, default 1.0
        :math:`\\kappa`: how fast the reward falls away from the best action.
    reward_noise : float, default 0.5
    candidates : dict, optional
        ``name -> {"coef": (d,), "intercept": float, "scale": float}`` (default: the five of
        :data:`DEFAULT_CANDIDATES`).
    seed : int, default 0
        The model's coefficients.

    Examples
    --------
    >>> from ope.simulate import ContinuousBandit
    >>> env = ContinuousBandit(seed=0)
    >>> round(env.true_value("optimal"), 6)
    1.0
    >>> table = env.sample(100, rng=0)
    >>> sorted(c for c in table.column_names if c.startswith("target__"))[:2]
    ['target__halfway', 'target__logger_mean']
    """

    def __init__(
        self,
        n_features: int = 2,
        *,
        logger_scale: float = 1.0,
        curvature: float = 1.0,
        reward_noise: float = 0.5,
        candidates: dict[str, dict[str, Any]] | None = None,
        seed: int = 0,
    ) -> None:
        self.n_features = check_int("n_features", n_features, minimum=1, maximum=100)
        self.logger_scale = check_float(
            "logger_scale", logger_scale, low=0.0, high=1e6, low_open=True
        )
        self.curvature = check_float("curvature", curvature, low=0.0, high=1e6)
        self.reward_noise = check_float("reward_noise", reward_noise, low=0.0, high=1e6)
        self.seed = check_int("seed", seed, minimum=0)
        gen = np.random.default_rng(self.seed)
        d = self.n_features
        self.logger_coef = gen.normal(0.0, 0.5, d)
        self.best_coef = self.logger_coef + gen.normal(0.0, 0.5, d)
        self.effect = gen.normal(0.0, 0.5, d)
        self._candidates: dict[str, tuple[np.ndarray, float, float]] = {}
        if candidates is None:
            coefs = {
                "logger": self.logger_coef,
                "best": self.best_coef,
                "mid": (self.logger_coef + self.best_coef) / 2.0,
            }
            for name, (which, b, s) in DEFAULT_CANDIDATES.items():
                self._candidates[name] = (coefs[which].copy(), b, s)
        else:
            if not isinstance(candidates, dict) or not candidates:
                raise ParameterError(
                    "`candidates` must be a non-empty dict of name -> {'coef', 'intercept', "
                    "'scale'}."
                )
            for name, spec in candidates.items():
                key = check_name(name, "candidates", what="a candidate name")
                if not isinstance(spec, dict):
                    raise ParameterError(
                        f"`candidates`[{key!r}] must be a dict with 'coef', 'intercept' and "
                        f"'scale'; got {type(spec).__name__}."
                    )
                try:
                    coef = np.asarray(spec.get("coef", np.zeros(d)), dtype=np.float64)
                except (TypeError, ValueError):
                    raise ParameterError(
                        f"`candidates`[{key!r}]['coef'] must be {d} finite numbers."
                    ) from None
                if coef.shape != (d,) or not np.isfinite(coef).all():
                    raise ParameterError(
                        f"`candidates`[{key!r}]['coef'] must be `n_features` = {d} finite "
                        f"numbers; got {coef.tolist()!r}."
                    )
                b = check_float(
                    f"`candidates`[{key!r}]['intercept']",
                    spec.get("intercept", 0.0),
                    low=-1e6,
                    high=1e6,
                )
                s = check_float(
                    f"`candidates`[{key!r}]['scale']", spec.get("scale", 0.0), low=0.0, high=1e6
                )
                self._candidates[key] = (coef, b, s)

    def __repr__(self) -> str:
        return (
            f"ContinuousBandit(n_features={self.n_features}, logger_scale={self.logger_scale:g}, "
            f"curvature={self.curvature:g}, reward_noise={self.reward_noise:g}, seed={self.seed})"
        )

    @property
    def candidate_policies(self) -> tuple[str, ...]:
        """The candidates' names."""
        return tuple(self._candidates)

    def _candidate(self, policy: str) -> tuple[np.ndarray, float, float]:
        return self._candidates[check_choice(policy, "policy", tuple(self._candidates))]

    def true_value(self, policy: str) -> float:
        """The candidate's exact value :math:`1 - \\kappa(\\lVert\\gamma-\\theta\\rVert^2 + b^2 +
        s^2)`."""
        coef, b, s = self._candidate(policy)
        gap = coef - self.best_coef
        return float(1.0 - self.curvature * (gap @ gap + b * b + s * s))

    def smoothed_value(self, policy: str, kernel: str, bandwidth: float) -> float:
        """The exact value of the candidate smoothed by ``kernel`` at ``bandwidth`` (what the
        kernel estimators estimate): :meth:`true_value` minus :math:`\\kappa h^2 \\mu_2(K)`."""
        from ope.continuous import KERNEL_MOMENTS, KERNELS, check_bandwidth

        mu2 = KERNEL_MOMENTS[check_choice(kernel, "kernel", KERNELS)][0]
        h = check_bandwidth(bandwidth)
        if h > _MAX_BANDWIDTH:  # its square, in the smoothing bias, would overflow
            raise ParameterError(
                f"`bandwidth` must be at most {_MAX_BANDWIDTH:g} here (its square enters the "
                f"smoothing bias); got {h!r}."
            )
        return self.true_value(policy) - self.curvature * h * h * mu2

    def expected_reward(self, context: Any, action: Any) -> np.ndarray:
        """The mean reward :math:`1 + e^\\top x - \\kappa (a - \\theta^\\top x)^2` at each row's
        context ``(n, d)`` and action ``(n,)``."""
        from ope._validation import as_float_array

        x = as_float_array(context, "context", ndim=(2,))
        a = as_float_array(action, "action", ndim=(1,))
        if x.shape[1] != self.n_features or a.shape[0] != x.shape[0]:
            raise ParameterError(
                f"`context` must be (n, {self.n_features}) and `action` (n,); got {x.shape} "
                f"and {a.shape}."
            )
        if not (np.isfinite(x).all() and np.isfinite(a).all()):
            raise ParameterError("`context` and `action` must be finite.")
        with np.errstate(over="ignore", invalid="ignore"):
            mu = 1.0 + x @ self.effect - self.curvature * (a - x @ self.best_coef) ** 2
        if not np.isfinite(mu).all():
            row = int(np.flatnonzero(~np.isfinite(mu))[0])
            raise ParameterError(
                f"`action` (or `context`) is too large at row {row}: the expected reward "
                "overflows float64."
            )
        return mu

    def sample(self, n: int, *, rng: Any = None, samples: int = 0) -> pa.Table:
        """Draw ``n`` logged rows.

        Columns: ``x0 .. x{d-1}``, ``action``, ``density`` (the logger's at the action),
        ``reward``; per deterministic candidate ``target__<name>`` (its action); per stochastic
        one ``density__<name>`` (its density at the logged action) and, with ``samples`` > 0,
        ``target__<name>`` holding that many of its actions per row.
        """
        size = check_sample_size(n)
        m = check_int("samples", samples, minimum=0, maximum=1000)
        gen = check_rng(rng)
        d = self.n_features
        x = gen.standard_normal((size, d))
        mean = x @ self.logger_coef
        action = mean + self.logger_scale * gen.standard_normal(size)
        z = (action - mean) / self.logger_scale
        density = np.exp(-0.5 * z * z) / (self.logger_scale * np.sqrt(2.0 * np.pi))
        reward = self.expected_reward(x, action) + self.reward_noise * gen.standard_normal(size)
        data: dict[str, Any] = {f"x{j}": x[:, j] for j in range(d)}
        data.update(action=action, density=density, reward=reward)
        for name, (coef, b, s) in self._candidates.items():  # a loop over candidates
            centre = x @ coef + b
            if s == 0.0:
                data[f"target__{name}"] = centre
                continue
            u = (action - centre) / s
            data[f"density__{name}"] = np.exp(-0.5 * u * u) / (s * np.sqrt(2.0 * np.pi))
            if m:
                draws = centre[:, None] + s * gen.standard_normal((size, m))
                offsets = np.arange(0, size * m + 1, m, dtype=np.int32)
                data[f"target__{name}"] = pa.ListArray.from_arrays(
                    pa.array(offsets), pa.array(draws.ravel())
                )
        return pa.table(data)
