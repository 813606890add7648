"""Input validation, feature standardization and the penalized value shared by the learners.

Everything here works on whole columns: no Python loop runs over rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from ope._thresholds import MIN_ROWS
from ope._validation import (
    as_float_array,
    check_finite,
    check_logging_propensity,
    check_reward_range,
    check_rewards_in_range,
    power_of_two_scale,
)
from ope.exceptions import MissingBoundsError, ValidationError
from ope.moments import WeightedMoments, centered_moments

__all__: list[str] = []

#: how many offending row numbers an error message quotes
ROWS_IN_MESSAGE: Final = 5

#: a weight sum below this is treated as zero when a self-normalized value is formed; far below
#: any sum of probabilities a policy can meaningfully put on the logged actions
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


def check_vector(values: Any, name: str, n: int, *, against: str = "X") -> npt.NDArray[np.float64]:
    """A 1-D float64 column with one finite entry per row (an (n, 1) column is flattened);
    ``against`` names the argument that fixed the row count ``n`` in messages."""
    arr = as_float_array(values, name, ndim=(1, 2)).astype(np.float64, copy=False)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ValidationError(
            f"`{name}` must be one-dimensional (one value per logged row); got shape {arr.shape}."
        )
    if arr.shape[0] != n:
        raise ValidationError(
            f"`{name}` has {arr.shape[0]} rows but {against} has {n}; every argument needs "
            "exactly one entry per logged row, in the same order."
        )
    check_finite(arr, name)
    return arr


def check_reward(
    reward: Any, n: int, reward_range: tuple[float, float], *, against: str = "X"
) -> npt.NDArray[np.float64]:
    """Rewards: finite, one per row, inside the a priori ``reward_range``."""
    r = check_vector(reward, "reward", n, against=against)
    check_rewards_in_range(r, reward_range)
    return r


def check_propensity(propensity: Any, n: int, *, against: str = "X") -> npt.NDArray[np.float64]:
    """Logging propensities of the logged actions: finite, one per row, in (0, 1]."""
    p = check_vector(propensity, "propensity", n, against=against)
    check_logging_propensity(p, "propensity")
    return p


def translate_reward(
    reward: npt.NDArray[np.float64], reward_range: tuple[float, float]
) -> npt.NDArray[np.float64]:
    """``(r - low) / (high - low)`` in [0, 1], formed in units of a power of two so that a range
    such as ``(-1e308, 1e308)`` (whose width overflows float64) still gives finite values."""
    low, high = reward_range
    s = power_of_two_scale(low, high)
    out = (reward / s - low / s) / (high / s - low / s)
    return np.clip(out, 0.0, 1.0, out=out)  # rounding of values exactly at the ends


def in_reward_units(value01: Any, reward_range: tuple[float, float]) -> Any:
    """``low + (high - low) * value01`` (a number or an array) without overflowing for ranges
    near the float64 limit."""
    low, high = reward_range
    s = power_of_two_scale(low, high)
    return s * (low / s + (high / s - low / s) * value01)


def check_features(X: npt.NDArray[np.float64], what: str = "X") -> None:
    """Every feature finite, else a ValidationError naming the first bad column and row."""
    if X.size == 0:
        return
    low, high = float(np.min(X)), float(np.max(X))
    if np.isfinite(low) and np.isfinite(high):
        return
    bad = ~np.isfinite(X)
    cols = np.flatnonzero(bad.any(axis=0))
    col = int(cols[0])
    rows = np.flatnonzero(bad[:, col])
    raise ValidationError(
        f"`{what}` must be finite (no NaN or inf): feature column {col} has {rows.size} NaN or "
        f"infinite values (first at row {int(rows[0])}: {float(X[rows[0], col])!r})"
        + (f"; columns {cols[:ROWS_IN_MESSAGE].tolist()} are affected" if cols.size > 1 else "")
        + ". Remove or impute them before fitting."
    )


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


def encode_known(
    labels: npt.NDArray[Any], classes: npt.NDArray[Any], *, what: str
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.bool_]]:
    """Index of each label in the sorted ``classes`` and whether it is there at all (labels of
    a type that cannot be compared with ``classes`` raise)."""
    if classes.size == 0 or labels.size == 0:
        return np.zeros(labels.size, dtype=np.intp), np.zeros(labels.size, dtype=bool)
    try:
        idx = np.minimum(np.searchsorted(classes, labels), classes.size - 1)
    except TypeError:
        raise ValidationError(
            f"`{what}` labels of type {np.asarray(labels).dtype} cannot be compared with the "
            f"actions seen in fit (dtype {classes.dtype}); use the same label type throughout."
        ) from None
    return idx.astype(np.intp, copy=False), classes[idx] == labels


def as_list_array(candidates: Any, n: int) -> pa.Array:
    """``candidates`` as one Arrow list array of ``n`` rows (an Arrow list column, chunked or
    not, or a sequence of sequences; a null entry means "every action")."""
    if isinstance(candidates, pa.ChunkedArray):
        candidates = candidates.combine_chunks()
    if not isinstance(candidates, pa.Array):
        try:
            candidates = pa.array(list(candidates))
        # UnicodeError: a label Arrow cannot encode (a lone surrogate such as "\udcff")
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, UnicodeError) as exc:
            raise ValidationError(
                "`candidates` must be one list of action labels per row (an Arrow list column or "
                f"a sequence of sequences), or a boolean mask of shape (n, n_actions): {exc}"
            ) from None
    if not (
        pa.types.is_list(candidates.type)
        or pa.types.is_large_list(candidates.type)
        or pa.types.is_fixed_size_list(candidates.type)
    ):
        raise ValidationError(
            f"`candidates` must be a list column (one list of actions per row); got Arrow type "
            f"{candidates.type}."
        )
    if len(candidates) != n:
        raise ValidationError(
            f"`candidates` has {len(candidates)} rows but X has {n}; give one candidate list "
            "per row."
        )
    return candidates


def candidate_lists(
    candidates: Any, n: int
) -> tuple[npt.NDArray[np.intp], npt.NDArray[Any], npt.NDArray[np.bool_]]:
    """Flatten candidate lists to ``(row_index, label, row_is_null)`` without a row loop.

    ``candidates`` is an Arrow list array (or chunked array) or a sequence of sequences; a null
    entry means "every action".
    """
    candidates = as_list_array(candidates, n)
    lengths = candidates.value_lengths().fill_null(0).to_numpy(zero_copy_only=False)
    lengths = lengths.astype(np.intp, copy=False)
    values = candidates.flatten()
    if values.null_count:
        nulls = np.repeat(np.arange(n), lengths)[values.is_null().to_numpy(zero_copy_only=False)]
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


# --------------------------------------------------------------------------------------------
# standardization
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Standardizer:
    """Per-column ``x -> (x / unit - center) / scale``, fitted so that no step overflows.

    ``unit`` is a power of two near each column's largest magnitude, so ``x / unit`` is exact
    and lies in (-2, 2): the mean and spread of features as large as 1e308 (or as small as
    1e-300) are then formed without overflow or underflow, and for ordinary data the result is
    bit for bit ``(x - mean) / std``. Constant columns get ``scale = 1`` (they become 0).
    """

    unit: npt.NDArray[np.float64]
    center: npt.NDArray[np.float64]
    scale: npt.NDArray[np.float64]

    @classmethod
    def fit(
        cls,
        X: npt.NDArray[np.float64],
        *,
        center: bool,
        sample_weight: npt.NDArray[np.float64] | None = None,
    ) -> Standardizer:
        """Center and scale by the standard deviation (``center=True``), or only scale by the
        root mean square (``center=False``: no intercept may absorb a shift).

        With ``sample_weight`` ``s`` the mean and spread are the weighted ones,
        ``sum s x / sum s`` and ``sqrt(sum s (x - mean)^2 / sum s)``: those of the rows repeated
        ``s_i`` times for integer weights (the population the rows stand for)."""
        d = X.shape[1]
        top = np.abs(X).max(axis=0) if X.shape[0] else np.zeros(d)
        unit = np.array([power_of_two_scale(float(t)) for t in top])  # loop over columns
        mu = np.zeros(d)
        sd = np.ones(d)
        for k in range(d):  # loop over columns, not rows: no (n, d) temporary
            x = X[:, k] / unit[k]
            if sample_weight is not None:
                total = float(sample_weight.sum())
                mu[k] = float(np.dot(sample_weight, x)) / total if center else 0.0
                dev = x - mu[k]
                sd[k] = np.sqrt(float(np.dot(sample_weight, dev * dev)) / total)
            elif center:
                mu[k] = x.mean()
                sd[k] = x.std()
            else:
                sd[k] = np.sqrt(np.mean(x * x))
        sd[~(sd > 0)] = 1.0
        return cls(unit, mu, sd)

    @classmethod
    def identity(cls, d: int) -> Standardizer:
        return cls(np.ones(d), np.zeros(d), np.ones(d))

    def transform_t(
        self, X: npt.NDArray[np.float64], *, ones: bool = True
    ) -> npt.NDArray[np.float64]:
        """The standardized features transposed, ``(d, n)`` C-contiguous (feature-major), with
        a last row of ones (``(d + 1, n)``) unless ``ones=False``."""
        out = np.empty((X.shape[1] + int(ones), X.shape[0]))
        if ones:
            out[-1] = 1.0
        for k in range(X.shape[1]):  # loop over columns
            np.divide(X[:, k], self.unit[k], out=out[k])
            out[k] -= self.center[k]
            out[k] /= self.scale[k]
        return out

    def raw_coefficients(
        self, W: npt.NDArray[np.float64], b: npt.NDArray[np.float64]
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """``(coef, intercept)`` on the raw scale with ``x @ coef.T + intercept == Ws @ xs + b``
        (exact algebra; features near 1e308 give coefficients near 1e-308)."""
        with np.errstate(under="ignore"):
            coef = W / self.scale / self.unit
            intercept = b - (W / self.scale) @ self.center
        return coef, intercept


# --------------------------------------------------------------------------------------------
# the penalized value (objective and reported bound)
# --------------------------------------------------------------------------------------------
def penalized_value(
    wbar: npt.NDArray[np.float64],
    reward01: npt.NDArray[np.float64],
    objective: str,
    variance_penalty: float,
    sampling_weight: npt.NDArray[np.float64] | None = None,
) -> tuple[float, tuple[float, float], npt.NDArray[np.float64]]:
    """``(estimate - penalty * std_error, (estimate, std_error), d/d wbar)`` on the [0, 1] scale.

    With ``sampling_weight`` (the rows' Horvitz-Thompson weights ``s``) see
    :func:`weighted_penalized_value`; None is the unweighted value below.

    ``objective="clipped_ips"``: estimate ``mean(u)``, ``u_i = r_i * wbar_i``, standard error
    ``sqrt(var(u) / n)`` with the unbiased variance (POEM, eq. 7).
    ``objective="self_normalized"``: estimate ``sum(r w) / sum(w)``, standard error
    ``sqrt(sum((r - V)^2 w^2)) / sum(w)`` (Norm-POEM).

    The weights are divided by a power of two near their largest value before the moments are
    formed (exact), so weights up to the float64 limit give finite moments. With fewer than
    ``MIN_ROWS`` rows there is no standard error: it is reported as ``inf`` (the penalized value
    is then the estimate itself, which the optimizer may still use; a reported lower bound is
    the bottom of the range, see :func:`reported_bound`).
    """
    if sampling_weight is not None:
        return weighted_penalized_value(
            wbar, reward01, objective, variance_penalty, sampling_weight
        )
    n = wbar.shape[0]
    s = power_of_two_scale(float(wbar.max())) if n else 1.0
    ws = wbar / s
    if n < MIN_ROWS:  # one row: no spread, and nothing for the kernel's unbiased variances
        S = float(ws.sum())
        if objective == "clipped_ips":
            value = s * float(np.dot(reward01, ws)) / max(n, 1)
            return value, (value, np.inf), reward01 / max(n, 1)
        value = float(np.dot(reward01, ws)) / S if S > _TINY else 0.0
        grad = (reward01 - value) / S / s if S > _TINY else np.zeros(n)
        return value, (value, np.inf), grad
    # the moments of (wbar r, wbar) come from the one kernel; wbar is already clipped, so it
    # enters as the target propensity over a logging propensity of 1
    moments = centered_moments(reward01, np.ones(n), ws[:, None], max_weight=None)
    if objective == "clipped_ips":
        mean_s, var_s = moments.product_mean_var(0, clipped=False, about=0.0)
        mean, se = s * mean_s, s * float(np.sqrt(var_s / n))
        dmean = np.full(n, 1.0 / n)
        if variance_penalty > 0.0 and var_s > 0.0:
            dev = reward01 * ws - mean_s  # in units of s: the ratio below is scale-free
            dmean = dmean - variance_penalty * dev / ((n - 1) * np.sqrt(n * var_s))
        return mean - variance_penalty * se, (mean, se), dmean * reward01
    # self-normalized: sd = sqrt(sum (r - V)^2 w^2) / sum w = sqrt((n - 1) var(psi)) / n with
    # the kernel's influence terms psi = w (r - V) / mean w; invariant to the scale s
    S = float(ws.sum())
    if S > _TINY:
        value, var_psi = moments.ratio_mean_var(0, clipped=False)
        sd = float(np.sqrt(var_psi * (n - 1))) / n
    else:  # every weight zero: no information, and a zero value and spread
        value, sd = 0.0, 0.0
        S = _TINY
    dev = reward01 - value
    dw2 = dev * ws * ws
    alpha = dev / S
    grad = alpha
    if variance_penalty > 0.0 and sd > 0.0:
        Q = (sd * S) ** 2
        beta = 2.0 * dev * dev * ws - 2.0 * alpha * float(dw2.sum())
        dvar = beta / S**2 - 2.0 * Q / S**3
        grad = alpha - variance_penalty * dvar / (2.0 * sd)
    return value - variance_penalty * sd, (value, sd), grad / s


def weighted_penalized_value(
    wbar: npt.NDArray[np.float64],
    reward01: npt.NDArray[np.float64],
    objective: str,
    variance_penalty: float,
    sampling_weight: npt.NDArray[np.float64],
) -> tuple[float, tuple[float, float], npt.NDArray[np.float64]]:
    r""":func:`penalized_value` of rows with sampling (Horvitz-Thompson) weights ``s``.

    Each kept row stands for ``s_i`` events of the logged population, and every population
    mean is a Hajek ratio (as in :mod:`ope.estimators`, "Sampling weights"):

    * ``objective="clipped_ips"``: :math:`\hat V = \sum_i s_i u_i / \sum_i s_i` with
      :math:`u_i = 	ilde r_iar w_i`; standard error :math:`\sqrt{\widehat{\mathrm{Var}}(\psi)
      / n}` of the linearized terms :math:`\psi_i = s_i(u_i - \hat V)/ar s`
      (:meth:`ope.moments.WeightedMoments.estimate`, kind ``"ips"``). Its gradient is
      :math:`\partial\hat V/\partialar w_i = s_i	ilde r_i/\sum s` and, with
      :math:`\sigma^2 = \widehat{\mathrm{Var}}(\psi)`,
      :math:`\partial\sigma^2/\partial u_i = rac{2}{n-1}rac{s_i}{ar s}(\psi_i -
      rac1n\sum_j rac{s_j}{ar s}\psi_j)`.
    * ``objective="self_normalized"``: the unweighted self-normalized value of the products
      :math:`v_i = s_iar w_i`, :math:`\sum sar w	ilde r/\sum sar w`, whose Norm-POEM
      spread :math:`\sqrt{\sum(	ilde r_i-\hat V)^2 v_i^2}/\sum v_i` is the linearized standard
      error of that ratio; the gradient is :math:`s_i` times the one with respect to :math:`v_i`.

    Integer weights give the estimate (and its gradient) of the rows repeated ``s_i`` times;
    the standard error differs (the repeats would count as independent rows). Unit weights give
    the unweighted value up to rounding (callers pass None for them, for exact equality).
    """
    s = np.asarray(sampling_weight, dtype=np.float64)
    n = wbar.shape[0]
    if objective != "clipped_ips":
        value, (est, sd), grad = penalized_value(wbar * s, reward01, objective, variance_penalty)
        return value, (est, sd), grad * s
    total = float(s.sum())
    sn = s * (n / total)  # the weights over their mean: psi and the gradient are scale-free
    if n < MIN_ROWS:
        value = float(np.dot(sn * reward01, wbar)) / max(n, 1)
        return value, (value, np.inf), sn * reward01 / max(n, 1)
    c = power_of_two_scale(float(wbar.max()))
    ws = wbar / c
    moments = WeightedMoments.from_arrays(reward01, ws[:, None], s, max_weight=None)
    mean_c, sd_c = moments.estimate("ips", 0)
    mean, se = c * mean_c, c * sd_c / np.sqrt(n)
    dmean = sn / n
    if variance_penalty > 0.0 and sd_c > 0.0:
        psi = sn * (reward01 * ws - mean_c)  # in units of c: the ratio below is scale-free
        dvar = 2.0 * sn * (psi - float(np.dot(sn, psi)) / n) / (n - 1)
        dmean = dmean - variance_penalty * dvar / (2.0 * np.sqrt(n) * sd_c)
    return mean - variance_penalty * se, (mean, se), dmean * reward01


def weighted_quantile(
    values: npt.NDArray[np.float64], q: float, sampling_weight: npt.NDArray[np.float64] | None
) -> float:
    """The ``q`` quantile of ``values``: numpy's default (linear) without weights; with
    sampling weights the inverted-CDF quantile of the weighted distribution (for integer
    weights, that of the rows repeated ``s_i`` times)."""
    if sampling_weight is None:
        return float(np.quantile(values, q))
    return float(np.quantile(values, q, weights=sampling_weight, method="inverted_cdf"))


def reported_bound(bound01: float, se01: float) -> float:
    """The lower bound of a value on the [0, 1] reward scale, as reported.

    No bound can say more than the range: the true value of any policy lies in [0, 1], so a
    penalized estimate above 1 (clipped weights above 1 on a few rows with no spread between
    them) is reported as 1, one below 0 as 0, and without a standard error (fewer than
    ``MIN_ROWS`` rows, ``se01 = inf``) the only bound the data support is the bottom, 0.
    """
    if not np.isfinite(se01):
        return 0.0
    return float(min(max(bound01, 0.0), 1.0))
