"""Input validation and the softmax-policy objective shared by the policy learners.

Everything here works on whole columns: no Python loop runs over rows.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from ope._validation import (
    as_float_array,
    check_finite,
    check_logging_propensity,
    check_reward_range,
    check_rewards_in_range,
)
from ope.exceptions import MissingBoundsError, ValidationError
from ope.moments import centered_moments

__all__: list[str] = []

#: how many offending row numbers an error message quotes
ROWS_IN_MESSAGE: Final = 5

#: a softmax probability below this is treated as numerically zero when a weight sum is formed;
#: far below any probability a policy can meaningfully put on a logged action
_TINY: Final = 1e-300


def row_list(bad: npt.NDArray[np.bool_]) -> str:
    """``'3 rows (first at rows 4, 9, 17)'``: the offending rows of a learning-specific rule
    (candidate sets, action labels), which can be several per row and are listed."""
    idx = np.flatnonzero(bad)
    shown = ", ".join(str(int(i)) for i in idx[:ROWS_IN_MESSAGE])
    more = ", ..." if idx.size > ROWS_IN_MESSAGE else ""
    noun = "row" if idx.size == 1 else "rows"
    return f"{idx.size} {noun} (first at {noun} {shown}{more})"


def required_reward_range(reward_range: Any) -> tuple[float, float]:
    """The a priori reward range (:func:`ope._validation.check_reward_range`), never None."""
    rr = check_reward_range(reward_range)
    if rr is None:
        raise MissingBoundsError(
            "policy learning and certification need reward_range=(low, high), the a priori range "
            "of the rewards (e.g. (0, 1) for clicks): the objective and the bounds are built on "
            "it. Empirical extremes are not used in its place."
        )
    return rr


def check_vector(values: Any, name: str, n: int) -> npt.NDArray[np.float64]:
    """A 1-D float64 column with one finite entry per row (an (n, 1) column is flattened)."""
    arr = as_float_array(values, name, ndim=(1, 2)).astype(np.float64, copy=False)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ValidationError(
            f"`{name}` must be one-dimensional (one value per logged row); got shape {arr.shape}."
        )
    if arr.shape[0] != n:
        raise ValidationError(
            f"`{name}` has {arr.shape[0]} rows but X has {n}; every argument needs exactly one "
            "entry per logged row, in the same order."
        )
    check_finite(arr, name)
    return arr


def check_reward(
    reward: Any, n: int, reward_range: tuple[float, float]
) -> npt.NDArray[np.float64]:
    """Rewards: finite, one per row, inside the a priori ``reward_range``."""
    r = check_vector(reward, "reward", n)
    check_rewards_in_range(r, reward_range)
    return r


def check_propensity(propensity: Any, n: int) -> npt.NDArray[np.float64]:
    """Logging propensities of the logged actions: finite, one per row, in (0, 1]."""
    p = check_vector(propensity, "propensity", n)
    check_logging_propensity(p, "propensity")
    return p


def encode_actions(
    y: npt.NDArray[Any], classes: npt.NDArray[Any], *, what: str = "y"
) -> npt.NDArray[np.intp]:
    """Index of each label in the sorted ``classes``; unknown labels raise."""
    try:
        idx = np.searchsorted(classes, y)
    except TypeError:
        raise ValidationError(
            f"`{what}` labels of type {np.asarray(y).dtype} cannot be compared with the actions "
            f"seen in fit (dtype {classes.dtype}); use the same label type throughout."
        ) from None
    idx = np.minimum(idx, classes.size - 1)
    bad = classes[idx] != y
    if np.any(bad):
        unseen = np.unique(np.asarray(y)[bad])[:ROWS_IN_MESSAGE].tolist()
        raise ValidationError(
            f"`{what}` contains actions not seen in fit: {unseen}; {row_list(bad)}. "
            f"Known actions are {classes[:10].tolist()}{' ...' if classes.size > 10 else ''}; "
            "refit on logs that include them, or list them in `candidates` at fit time."
        )
    return idx.astype(np.intp, copy=False)


def candidate_lists(
    candidates: Any, n: int
) -> tuple[npt.NDArray[np.intp], npt.NDArray[Any], npt.NDArray[np.bool_]]:
    """Flatten candidate lists to ``(row_index, label, row_is_null)`` without a row loop.

    ``candidates`` is an Arrow list array (or chunked array) or a sequence of sequences; a null
    entry means "every action".
    """
    if isinstance(candidates, pa.ChunkedArray):
        candidates = candidates.combine_chunks()
    if not isinstance(candidates, pa.Array):
        try:
            candidates = pa.array(list(candidates))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as exc:
            raise ValidationError(
                "`candidates` must be one list of action labels per row (an Arrow list column or "
                f"a sequence of sequences), or a boolean mask of shape (n, n_actions): {exc}"
            ) from None
    if not (pa.types.is_list(candidates.type) or pa.types.is_large_list(candidates.type)
            or pa.types.is_fixed_size_list(candidates.type)):
        raise ValidationError(
            f"`candidates` must be a list column (one list of actions per row); got Arrow type "
            f"{candidates.type}."
        )
    if len(candidates) != n:
        raise ValidationError(
            f"`candidates` has {len(candidates)} rows but X has {n}; give one candidate list "
            "per row."
        )
    lengths = candidates.value_lengths().fill_null(0).to_numpy(zero_copy_only=False)
    lengths = lengths.astype(np.intp, copy=False)
    values = candidates.flatten()
    if values.null_count:
        nulls = np.repeat(np.arange(n), lengths)[
            values.is_null().to_numpy(zero_copy_only=False)
        ]
        bad = np.zeros(n, dtype=bool)
        bad[nulls] = True
        raise ValidationError(
            f"`candidates` lists contain missing actions in {row_list(bad)}; every listed "
            "candidate must be an action label."
        )
    rows = np.repeat(np.arange(n, dtype=np.intp), lengths)
    labels = values.to_numpy(zero_copy_only=False)
    is_null = candidates.is_null().to_numpy(zero_copy_only=False)
    return rows, labels, is_null


def candidate_mask(
    candidates: Any, classes: npt.NDArray[Any], n: int
) -> npt.NDArray[np.bool_] | None:
    """Boolean ``(n, n_actions)`` mask of the actions each row may take (``None``: all)."""
    if candidates is None:
        return None
    k = classes.size
    if isinstance(candidates, np.ndarray) and candidates.dtype == np.bool_:
        if candidates.shape != (n, k):
            raise ValidationError(
                f"a boolean `candidates` mask must have shape (n, n_actions) = ({n}, {k}), columns "
                f"in the order of classes_; got {candidates.shape}."
            )
        mask = candidates
    else:
        rows, labels, is_null = candidate_lists(candidates, n)
        cols = encode_actions(labels, classes, what="candidates")
        mask = np.zeros((n, k), dtype=bool)
        mask[rows, cols] = True
        mask[is_null] = True
    empty = ~mask.any(axis=1)
    if empty.any():
        raise ValidationError(
            f"every row needs at least one candidate action; {row_list(empty)} have none."
        )
    return mask


def softmax_logits(
    X: npt.NDArray[np.float64],
    coef: npt.NDArray[np.float64],
    intercept: npt.NDArray[np.float64],
    mask: npt.NDArray[np.bool_] | None,
) -> npt.NDArray[np.float64]:
    """Row-wise softmax of ``X @ coef.T + intercept`` over each row's candidates, in place."""
    z = X @ coef.T
    z += intercept
    if mask is not None:
        z[~mask] = -np.inf
    z -= z.max(axis=1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=1, keepdims=True)
    return z


def policy_objective(
    theta: npt.NDArray[np.float64],
    X: npt.NDArray[np.float64],
    action: npt.NDArray[np.intp],
    reward01: npt.NDArray[np.float64],
    propensity: npt.NDArray[np.float64],
    mask: npt.NDArray[np.bool_] | None,
    *,
    n_actions: int,
    center: npt.NDArray[np.float64],
    scale: npt.NDArray[np.float64],
    objective: str,
    variance_penalty: float,
    max_weight: float | None,
    l2_penalty: float,
) -> tuple[float, npt.NDArray[np.float64]]:
    """Negative penalized lower bound of a linear softmax policy and its gradient.

    ``theta`` holds the weights ``W`` (``n_actions x d``) on standardized features
    ``(X - center) / scale`` followed by the intercepts ``b``. The standardized copy of ``X`` is
    never formed: the raw-scale coefficients are ``W / scale`` and the intercepts
    ``b - (W / scale) @ center``.

    Returns the value to minimize,
    ``-(estimate - variance_penalty * std_error) + l2_penalty / 2 * ||W||^2``, with the estimate
    on the translated reward scale ``reward01`` in [0, 1], and its gradient.
    """
    n, d = X.shape
    W = theta[: n_actions * d].reshape(n_actions, d)
    b = theta[n_actions * d:]
    coef = W / scale
    intercept = b - coef @ center
    P = softmax_logits(X, coef, intercept, mask)
    flat = np.arange(n) * n_actions + action  # flat take: faster than fancy 2-D indexing
    pi = P.ravel()[flat]
    w = pi / propensity
    if max_weight is None:
        active = np.ones(n, dtype=bool)
        wbar = w
    else:
        active = w < max_weight
        wbar = np.minimum(w, max_weight)
    value, _, dwbar = penalized_value(wbar, reward01, objective, variance_penalty)
    # d value / d theta = sum_i dwbar_i * active_i * w_i * d log pi_i / d theta,
    # with d log pi_i / d logit_b = 1[a_i = b] - pi_ib
    g = dwbar * active * w
    R = P
    R *= -g[:, None]
    R.ravel()[flat] += g
    grad_coef = (X.T @ R).T  # ten times faster than R.T @ X with OpenBLAS here
    grad_intercept = R.sum(axis=0)
    grad_W = (grad_coef - np.outer(grad_intercept, center)) / scale
    f = -value + 0.5 * l2_penalty * float(np.dot(W.ravel(), W.ravel()))
    grad = np.concatenate([(-grad_W + l2_penalty * W).ravel(), -grad_intercept])
    return f, grad


def penalized_value(
    wbar: npt.NDArray[np.float64],
    reward01: npt.NDArray[np.float64],
    objective: str,
    variance_penalty: float,
) -> tuple[float, tuple[float, float], npt.NDArray[np.float64]]:
    """``(estimate - penalty * std_error, (estimate, std_error), d/d wbar)`` on the [0, 1] scale.

    ``objective="clipped_ips"``: estimate ``mean(u)``, ``u_i = r_i * wbar_i``, standard error
    ``sqrt(var(u) / n)`` with the unbiased variance (POEM, eq. 7).
    ``objective="self_normalized"``: estimate ``sum(r w) / sum(w)``, standard error
    ``sqrt(sum((r - V)^2 w^2)) / sum(w)`` (Norm-POEM).
    """
    n = wbar.shape[0]
    if n < 2:  # one row: no spread, and nothing for the kernel's unbiased variances
        S = max(float(wbar.sum()), _TINY)
        value = float(np.dot(reward01, wbar)) / (n if objective == "clipped_ips" else S)
        grad = reward01 / n if objective == "clipped_ips" else (reward01 - value) / S
        return value, (value, 0.0), grad
    # the moments of (wbar r, wbar) come from the one kernel; wbar is already clipped, so it
    # enters as the target propensity over a logging propensity of 1
    moments = centered_moments(reward01, np.ones(n), wbar[:, None], max_weight=None)
    if objective == "clipped_ips":
        mean, var = moments.product_mean_var(0, clipped=False, about=0.0)
        se = float(np.sqrt(var / n))
        dmean = np.full(n, 1.0 / n)
        if variance_penalty > 0.0 and se > 0.0:
            dev = reward01 * wbar - mean
            dmean = dmean - variance_penalty * dev / ((n - 1) * np.sqrt(n * var))
        return mean - variance_penalty * se, (mean, se), dmean * reward01
    # self-normalized: sd = sqrt(sum (r - V)^2 w^2) / sum w = sqrt((n - 1) var(psi)) / n with
    # the kernel's influence terms psi = w (r - V) / mean w
    S = max(float(wbar.sum()), _TINY)
    if S > _TINY:
        value, var_psi = moments.ratio_mean_var(0, clipped=False)
        sd = float(np.sqrt(var_psi * (n - 1))) / n
    else:  # every weight zero: no information, and a zero value and spread
        value, sd = 0.0, 0.0
    dev = reward01 - value
    dw2 = dev * wbar * wbar
    alpha = dev / S
    grad = alpha
    if variance_penalty > 0.0 and sd > 0.0:
        Q = (sd * S) ** 2
        beta = 2.0 * dev * dev * wbar - 2.0 * alpha * float(dw2.sum())
        dvar = beta / S**2 - 2.0 * Q / S**3
        grad = alpha - variance_penalty * dvar / (2.0 * sd)
    return value - variance_penalty * sd, (value, sd), grad
