"""Importance weights: the hot path of every weighting estimator.

The importance weight of logged row ``i`` for a candidate policy ``pi`` is

.. math:: w_i = \\pi(a_i \\mid x_i) / \\pi_0(a_i \\mid x_i),

the ratio of the candidate's probability of the logged action to the logging propensity. This
module computes weights for ``P`` candidate policies at once (target propensities of shape
``(n,)`` or ``(n, P)``), accumulates in float64 whatever the input dtype, optionally clips them at
an a priori level ``max_weight``, and reduces them in bounded-memory chunks to the per-policy sums
that the moment-based estimators and intervals need (:func:`weight_moments`).

:func:`factor_weights` implements Bottou et al.'s *Markov factor replacement*: when a decision is
made by several randomized stages (e.g. retrieval then ranking) and a candidate changes only some
of them, the weight is the product of the probability ratios of the changed stages only.

The validation helpers here are shared by :mod:`ope.estimators` so every entry point reports bad
propensities the same way: what is wrong, how many rows, the first row, and how to fix it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from ope.exceptions import ValidationError

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "importance_weights",
    "factor_weights",
    "weight_moments",
    "MOMENT_KEYS",
    "MAX_FINITE_WEIGHT",
]

#: Rows per chunk of the streaming kernel. 2**18 rows x P policies x 8 bytes keeps each (chunk, P)
#: float64 block at 2 MB per policy: small enough for the L2/L3 cache of common CPUs and for
#: bounded memory, large enough that the per-chunk Python overhead is negligible.
DEFAULT_CHUNK_SIZE: Final = 1 << 18

#: Names of the per-policy sums returned by :func:`weight_moments` (each a float64 array (P,)).
MOMENT_KEYS: Final = (
    "sum_w",  # sum of raw weights
    "sum_w2",  # sum of squared raw weights
    "sum_wr",  # sum of w * r
    "sum_w2r",  # sum of w^2 * r
    "sum_w2r2",  # sum of w^2 * r^2
    "max_w",  # largest raw weight
    "sum_cw",  # the same five sums for the clipped weight min(w, max_weight) ...
    "sum_cw2",
    "sum_cwr",
    "sum_cw2r",
    "sum_cw2r2",
    "n_clipped",  # ... and the number of rows whose weight exceeded max_weight
)

#: Largest importance weight accepted. Weights up to 1e150 have squares up to 1e300, so sums of
#: up to 1e8 squared weights stay finite in float64; larger ones would turn standard errors and
#: effective sample sizes into inf/NaN. Only logging propensities below 1 / 1e150 can produce
#: them (target propensities are at most 1), so the check costs one min over the propensities.
MAX_FINITE_WEIGHT: Final = 1e150

#: Entries per block of the blockwise min/max validation: 2**19 float64 entries are 4 MB, so a
#: block read for its minimum is still in the L2/L3 cache when its maximum is taken.
_VALIDATION_BLOCK_ELEMENTS: Final = 1 << 19

#: Entries per block of the centred-moment kernel (rows = this / P, at most ``chunk_size``). The
#: kernel makes several passes over each (P, rows) float64 block and its two scratch copies, so
#: they should stay in cache: 2**18 entries (2 MB each). Measured on 10M x 8 float64 without
#: clipping (medians of 3): 0.35 s at 2**16 entries, 0.33 s at 2**17, 0.31 s at 2**18, 0.35 s
#: at 2**19, 0.40 s at 2**20; 2.0 s for the former (2**18 rows, P) row-major kernel.
_KERNEL_BLOCK_ELEMENTS: Final = 1 << 18

_FIX_PROPENSITY: Final = (
    "Fix the logger, or read the logs with ope.read_logs(..., on_invalid='drop') to drop and "
    "count such rows."
)


# --------------------------------------------------------------------------------------------
# validation helpers (shared with ope.estimators)
# --------------------------------------------------------------------------------------------
def _first_rows(bad: np.ndarray) -> tuple[int, int]:
    """Number of True entries in a (n,) or (n, P) mask and the first offending row."""
    rows = bad if bad.ndim == 1 else bad.any(axis=1)
    idx = np.flatnonzero(rows)
    return int(idx.size), int(idx[0]) if idx.size else -1


def _as_float_array(value: npt.ArrayLike, name: str, *, ndim: tuple[int, ...]) -> np.ndarray:
    """Convert to a floating array without copying float32/float64 input."""
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as exc:  # ragged lists and the like
        raise ValidationError(f"`{name}` must be a numeric array; could not convert it: {exc}")
    if arr.dtype.kind not in "fiub":
        raise ValidationError(
            f"`{name}` must be numeric; got dtype {arr.dtype}. Convert it, e.g. "
            f"numpy.asarray({name}, dtype=float)."
        )
    if arr.dtype.kind != "f":
        arr = arr.astype(np.float64)
    if arr.ndim not in ndim:
        shapes = " or ".join({1: "(n,)", 2: "(n, P)"}[d] for d in ndim)
        raise ValidationError(f"`{name}` must have shape {shapes}; got shape {arr.shape}.")
    return arr


def _value_range(arr: np.ndarray) -> tuple[float, float]:
    """Smallest and largest entry of a non-empty array, NaN if any entry is NaN.

    Reduced block by block (min and max of a block while it is in cache) so that validating an
    (n, P) matrix costs about one read of it and allocates no (n, P) boolean masks.
    """
    flat = arr.reshape(arr.shape[0], -1)
    step = max(1, _VALIDATION_BLOCK_ELEMENTS // max(1, flat.shape[1]))
    lows, highs = [], []
    for sl in _chunks(flat.shape[0], step):  # loop over blocks, not rows
        block = flat[sl]
        lows.append(block.min())
        highs.append(block.max())
    return float(np.min(lows)), float(np.max(highs))


def _check_finite(arr: np.ndarray, name: str) -> None:
    if arr.size == 0:
        return
    low, high = _value_range(arr)
    if math.isfinite(low) and math.isfinite(high):  # NaN and +-inf fail this
        return
    bad = ~np.isfinite(arr)  # the full mask only to report the offending rows
    if bad.any():
        count, first = _first_rows(bad)
        raise ValidationError(
            f"`{name}` must be finite; {count} rows are NaN or infinite (first at row {first}). "
            "Remove or impute them before estimating."
        )


def _check_logging_propensity(p: np.ndarray, name: str = "logging_propensity") -> None:
    if p.size:
        low, high = _value_range(p)
        if low > 0 and high <= 1:  # False for NaN: then the detailed checks below report
            return
    _check_finite(p, name)
    bad = (p <= 0) | (p > 1)
    if bad.any():
        count, first = _first_rows(bad)
        raise ValidationError(
            f"`{name}` must be in (0, 1]; {count} rows are not (first at row {first}: "
            f"{float(p.reshape(p.shape[0], -1)[first].flat[0])!r}). {_FIX_PROPENSITY}"
        )


def _check_target_propensity(t: np.ndarray, name: str = "target_propensity") -> None:
    if t.size:
        low, high = _value_range(t)
        if low >= 0 and high <= 1:  # False for NaN: then the detailed checks below report
            return
    _check_finite(t, name)
    bad = (t < 0) | (t > 1)
    if bad.any():
        count, first = _first_rows(bad)
        raise ValidationError(
            f"`{name}` must be in [0, 1] (it is the candidate's probability of the logged "
            f"action); {count} rows are not (first at row {first}). Check that the candidate "
            "policy outputs probabilities, not scores."
        )


def _check_max_weight(max_weight: float | None) -> float | None:
    if max_weight is None:
        return None
    mw = float(max_weight)
    if not (np.isfinite(mw) and mw > 0):
        raise ValueError(
            f"`max_weight` must be a positive finite number (the a priori clipping level); "
            f"got {max_weight!r}."
        )
    return mw


def _validated_pair(
    logging_propensity: npt.ArrayLike, target_propensity: npt.ArrayLike
) -> tuple[np.ndarray, np.ndarray]:
    p = _as_float_array(logging_propensity, "logging_propensity", ndim=(1,))
    t = _as_float_array(target_propensity, "target_propensity", ndim=(1, 2))
    if t.shape[0] != p.shape[0]:
        raise ValidationError(
            f"`target_propensity` has {t.shape[0]} rows but `logging_propensity` has "
            f"{p.shape[0]}; both must describe the same logged rows."
        )
    _check_logging_propensity(p)
    _check_target_propensity(t)
    if p.size and float(p.min()) * MAX_FINITE_WEIGHT < 1.0:  # only then can a weight overflow
        small = np.flatnonzero(p * MAX_FINITE_WEIGHT < 1.0)
        tt = t[small] if t.ndim == 1 else t[small].max(axis=1)
        with np.errstate(over="ignore"):
            rows = small[tt.astype(np.float64) / p[small].astype(np.float64) > MAX_FINITE_WEIGHT]
        if rows.size:
            raise ValidationError(
                f"importance weights overflow float64: {rows.size} rows (first at row "
                f"{int(rows[0])}: logging propensity {float(p[rows[0]])!r}) give "
                f"target/logging above {MAX_FINITE_WEIGHT:g}, whose squares are not "
                "representable. A propensity this small is not one the logger can have acted "
                f"on. {_FIX_PROPENSITY}"
            )
    return p, t


def _chunks(n: int, chunk_size: int) -> Iterator[slice]:
    if int(chunk_size) < 1:
        raise ValueError(f"`chunk_size` must be a positive integer; got {chunk_size!r}.")
    step = int(chunk_size)
    for start in range(0, n, step):
        yield slice(start, min(start + step, n))


def _ratio(p: np.ndarray, t: np.ndarray) -> np.ndarray:
    """w = t / p in float64; p is (c,), t is (c,) or (c, P)."""
    p64 = p.astype(np.float64, copy=False)
    t64 = t.astype(np.float64, copy=False)
    return t64 / (p64 if t64.ndim == 1 else p64[:, None])


# --------------------------------------------------------------------------------------------
# public functions
# --------------------------------------------------------------------------------------------
def importance_weights(
    logging_propensity: npt.ArrayLike,
    target_propensity: npt.ArrayLike,
    *,
    max_weight: float | None = None,
) -> np.ndarray:
    """Importance weights ``target_propensity / logging_propensity`` in float64.

    Parameters
    ----------
    logging_propensity : array_like, shape (n,)
        The logging policy's probability of each logged action, in (0, 1].
    target_propensity : array_like, shape (n,) or (n, P)
        Each candidate's probability of the logged action, in [0, 1]; one column per policy.
    max_weight : float, optional
        A priori clipping level ``M``: weights above it are replaced by ``M``.

    Returns
    -------
    numpy.ndarray
        float64 array with the shape of ``target_propensity``.

    Raises
    ------
    ope.ValidationError
        Shapes differ, or a propensity is missing or out of range (the message gives the count
        and the first row).

    Notes
    -----
    :math:`w_i = \\pi(a_i\\mid x_i)/\\pi_0(a_i\\mid x_i)`, clipped as :math:`\\min(w_i, M)`
    when ``max_weight`` is given. The division is done in float64 even for float32 inputs.

    References
    ----------
    .. [1] D. G. Horvitz and D. J. Thompson, "A generalization of sampling without replacement
       from a finite universe", JASA 47(260), 1952.

    Examples
    --------
    >>> from ope.weights import importance_weights
    >>> importance_weights([0.5, 0.25], [[1.0, 0.5], [0.0, 0.25]])
    array([[2., 1.],
           [0., 1.]])
    >>> importance_weights([0.5, 0.25], [1.0, 1.0], max_weight=3.0)
    array([2., 3.])
    """
    p, t = _validated_pair(logging_propensity, target_propensity)
    mw = _check_max_weight(max_weight)
    w = _ratio(p, t)
    if mw is not None:
        np.minimum(w, mw, out=w)
    return w


def factor_weights(
    logging_factors: Mapping[str, npt.ArrayLike],
    target_factors: Mapping[str, npt.ArrayLike],
    *,
    max_weight: float | None = None,
) -> np.ndarray:
    """Importance weights by Markov factor replacement over the changed factors only.

    A decision made by several randomized stages (factors) has logging probability
    ``prod_k q_k``. A candidate that replaces some factors ``k in C`` by ``q*_k`` and keeps the
    others has the weight ``prod_{k in C} q*_k / q_k``: the unchanged factors cancel.

    Parameters
    ----------
    logging_factors : mapping of str to array_like, shape (n,)
        Logged probability of each factor's realized choice, e.g. the columns
        ``propensity__retrieval`` and ``propensity__ranking`` as
        ``{"retrieval": ..., "ranking": ...}``; each in (0, 1].
    target_factors : mapping of str to array_like, shape (n,) or (n, P)
        The candidate's probability of the same realized choices for the factors it changes
        (columns ``target__<policy>__<factor>``); every key must be a key of
        ``logging_factors``. Factors absent here are unchanged and cancel.
    max_weight : float, optional
        A priori clipping level applied to the product.

    Returns
    -------
    numpy.ndarray
        float64 weights, shape ``(n,)`` or ``(n, P)``.

    Raises
    ------
    ope.ValidationError
        No factor is changed, a changed factor was not logged, lengths differ, or a probability
        is out of range.

    Notes
    -----
    Write the joint distribution of a logged record :math:`\\omega` as a product of Markov
    factors, :math:`P(\\omega)=\\prod_k q_k(\\omega_k\\mid\\mathrm{pa}_k)`. An intervention that
    replaces the factors :math:`k\\in C` gives :math:`P^*(\\omega)=P(\\omega)\\prod_{k\\in C}
    q^*_k/q_k`, so

    .. math:: w(\\omega) = \\frac{P^*(\\omega)}{P(\\omega)}
              = \\prod_{k\\in C}\\frac{q^*_k(\\omega_k\\mid\\mathrm{pa}_k)}
                                       {q_k(\\omega_k\\mid\\mathrm{pa}_k)},

    and :math:`\\mathbb E_P[\\ell\\,w]=\\mathbb E_{P^*}[\\ell]` for any outcome :math:`\\ell`.
    Only the changed factors need to have been randomized and logged; unchanged factors may be
    deterministic or unknown.

    References
    ----------
    .. [1] L. Bottou, J. Peters, J. Quinonero-Candela, D. X. Charles, D. M. Chickering,
       E. Portugaly, D. Ray, P. Simard and E. Snelson, "Counterfactual reasoning and learning
       systems: the example of computational advertising", JMLR 14:3207-3260, 2013
       (Section 4, counterfactual analysis by replacing Markov factors; importance sampling).

    Examples
    --------
    >>> from ope.weights import factor_weights
    >>> logged = {"retrieval": [0.5, 0.2], "ranking": [0.25, 1.0]}
    >>> factor_weights(logged, {"ranking": [0.5, 0.5]})          # only ranking changes
    array([2. , 0.5])
    >>> factor_weights(logged, {"retrieval": [1.0, 0.4], "ranking": [0.5, 0.5]})
    array([4., 1.])
    """
    if not target_factors:
        raise ValidationError(
            "`target_factors` is empty: give the candidate's probabilities for at least one "
            "changed factor (columns target__<policy>__<factor>)."
        )
    unknown = sorted(set(target_factors) - set(logging_factors))
    if unknown:
        raise ValidationError(
            f"changed factors {unknown} have no logged propensity; logged factors are "
            f"{sorted(logging_factors)}. Log the column propensity__<factor> for every factor "
            "a candidate changes."
        )
    weight: np.ndarray | None = None
    for factor in target_factors:  # loop over a handful of factors, not rows
        p = _as_float_array(
            logging_factors[factor], f"propensity__{factor}", ndim=(1,)
        )
        t = _as_float_array(target_factors[factor], f"target__{factor}", ndim=(1, 2))
        if t.shape[0] != p.shape[0] or (weight is not None and weight.shape[0] != p.shape[0]):
            raise ValidationError(
                f"factor {factor!r}: all factor arrays must have the same number of rows; "
                f"got {p.shape[0]} logged and {t.shape[0]} target rows"
                + (f" (earlier factors have {weight.shape[0]})." if weight is not None else ".")
            )
        _check_logging_propensity(p, f"propensity__{factor}")
        _check_target_propensity(t, f"target__{factor}")
        ratio = _ratio(p, t)
        if weight is None:
            weight = ratio
        elif weight.ndim == ratio.ndim:
            weight = weight * ratio
        else:  # one (n,) and one (n, P) factor: broadcast over policies
            a = weight if weight.ndim == 2 else weight[:, None]
            b = ratio if ratio.ndim == 2 else ratio[:, None]
            weight = a * b
    assert weight is not None
    mw = _check_max_weight(max_weight)
    if mw is not None:
        np.minimum(weight, mw, out=weight)
    return weight


def weight_moments(
    reward: npt.ArrayLike,
    logging_propensity: npt.ArrayLike,
    target_propensity: npt.ArrayLike,
    *,
    max_weight: float | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> dict[str, np.ndarray]:
    """One chunked pass computing the per-policy weight sums of :data:`MOMENT_KEYS`.

    Parameters
    ----------
    reward : array_like, shape (n,)
        Observed rewards (finite).
    logging_propensity : array_like, shape (n,)
        Logging propensities, in (0, 1].
    target_propensity : array_like, shape (n,) or (n, P)
        Candidate propensities of the logged actions, in [0, 1].
    max_weight : float, optional
        A priori clipping level; when None the ``sum_c*`` entries equal the raw sums and
        ``n_clipped`` is zero.
    chunk_size : int, default DEFAULT_CHUNK_SIZE
        Largest number of rows per block; blocks are also kept within 2**18 entries (rows x
        P) so that they stay in cache. Memory is O(min(chunk_size * P, 2**18)).

    Returns
    -------
    dict of str to numpy.ndarray
        ``"n"`` (int) plus the float64 arrays of shape (P,) named in :data:`MOMENT_KEYS`
        (shape (1,) for a 1-D ``target_propensity``). ``"sum_r"`` and ``"sum_r2"`` (scalars)
        hold the reward sums used by the on-policy (logging) value.

    Notes
    -----
    For each block of rows the weights are formed in float64 and transposed, one policy per
    row, into a reused buffer, and the sums are reductions along those rows (``einsum``
    ``"pi,i->p"`` for the reward-weighted ones), so the cost is a few vectorized reductions per
    block and nothing is (n, P) beyond one block. Sums merge by addition (``max_w`` by
    maximum). Variances formed from these raw sums lose about
    :math:`\\log_{10}(\\mathbb E[x^2]/\\mathrm{Var}\\,x)` digits to cancellation (12 digits for
    rewards of mean :math:`10^6` and standard deviation 1); :class:`ope.streaming.MomentStats`
    therefore keeps shifted, centred statistics instead.

    References
    ----------
    .. [1] L. Bottou et al., "Counterfactual reasoning and learning systems", JMLR 14, 2013.

    Examples
    --------
    >>> from ope.weights import weight_moments
    >>> m = weight_moments([1.0, 0.0], [0.5, 0.5], [[1.0, 0.5], [0.0, 0.5]])
    >>> m["sum_w"], m["sum_wr"]
    (array([2., 2.]), array([2., 1.]))
    """
    r = _as_float_array(reward, "reward", ndim=(1,))
    p, t = _validated_pair(logging_propensity, target_propensity)
    if r.shape[0] != p.shape[0]:
        raise ValidationError(
            f"`reward` has {r.shape[0]} rows but `logging_propensity` has {p.shape[0]}."
        )
    _check_finite(r, "reward")
    mw = _check_max_weight(max_weight)
    t2 = t if t.ndim == 2 else t[:, None]
    n, n_pol = t2.shape
    out = {key: np.zeros(n_pol) for key in MOMENT_KEYS}
    out["max_w"] = np.full(n_pol, -np.inf)  # identity of the max-merge (also for empty input)
    sum_r = 0.0
    sum_r2 = 0.0
    rows = min(_block_rows(n_pol, chunk_size), max(n, 1))
    w_buf = np.empty((n_pol, rows))  # one policy per row: reductions along contiguous memory
    w2_buf = np.empty((n_pol, rows))
    for sl in _chunks(n, rows):  # loop over blocks, not rows
        c = sl.stop - sl.start
        rc = r[sl].astype(np.float64, copy=False)
        r2 = rc * rc
        w = w_buf[:, :c]
        np.divide(t2[sl].T, p[sl], out=w, dtype=np.float64)
        _accumulate(out, "", w, rc, r2, w2_buf[:, :c])
        np.maximum(out["max_w"], np.maximum.reduce(w, axis=1), out=out["max_w"])
        if mw is not None:
            out["n_clipped"] += np.count_nonzero(w > mw, axis=1)
            np.minimum(w, mw, out=w)
            _accumulate(out, "c", w, rc, r2, w2_buf[:, :c])
        sum_r += float(np.add.reduce(rc))
        sum_r2 += float(np.add.reduce(r2))
    if mw is None:
        for key in ("w", "w2", "wr", "w2r", "w2r2"):
            out[f"sum_c{key}"] = out[f"sum_{key}"].copy()
    result: dict[str, np.ndarray] = dict(out)
    result["n"] = np.asarray(n)
    result["sum_r"] = np.asarray(sum_r)
    result["sum_r2"] = np.asarray(sum_r2)
    return result


def _accumulate(
    out: dict[str, np.ndarray],
    prefix: str,
    w: np.ndarray,
    r: np.ndarray,
    r2: np.ndarray,
    w2: np.ndarray,
) -> None:
    """Add the five sums of one transposed (P, c) weight block; ``w2`` is (P, c) scratch."""
    np.multiply(w, w, out=w2)
    out[f"sum_{prefix}w"] += np.add.reduce(w, axis=1)
    out[f"sum_{prefix}w2"] += np.add.reduce(w2, axis=1)
    out[f"sum_{prefix}wr"] += np.einsum("pi,i->p", w, r)
    out[f"sum_{prefix}w2r"] += np.einsum("pi,i->p", w2, r)
    out[f"sum_{prefix}w2r2"] += np.einsum("pi,i->p", w2, r2)


# --------------------------------------------------------------------------------------------
# centred, mergeable moments (the numerically stable form used by intervals and streaming)
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class _CenteredMoments:
    """Shifted and centred per-policy moments of ``(w (r - shift), w)`` over a set of rows.

    ``mean[s, :, j]`` holds the means of ``a = w (r - shift)`` and ``b = w`` for policy ``j``,
    with ``s = 0`` for the raw and ``s = 1`` for the clipped weights ``min(w, max_weight)``;
    ``comoment[s, :, j]`` the centred sums ``sum (a - mean a)^2``, ``sum (a - mean a)(b - mean
    b)`` and ``sum (b - mean b)^2``. ``r_mean`` and ``r_m2`` are the mean and centred sum of
    squares of ``r - shift``. Sets merge by the pairwise update of Chan, Golub & LeVeque (1982)
    after re-expressing both at a common shift, so no variance is ever formed as a difference
    of raw sums of squares (which loses ``log10(E[x^2] / Var x)`` digits).
    """

    n: int
    shift: float
    r_mean: float
    r_m2: float
    mean: np.ndarray  # (2, 2, P)
    comoment: np.ndarray  # (2, 3, P)
    max_w: np.ndarray  # (P,)
    n_clipped: np.ndarray  # (P,)

    @classmethod
    def empty(cls, n_pol: int, shift: float = 0.0) -> _CenteredMoments:
        return cls(
            0, float(shift), 0.0, 0.0, np.zeros((2, 2, n_pol)), np.zeros((2, 3, n_pol)),
            np.full(n_pol, -np.inf), np.zeros(n_pol),
        )

    def column(self, j: int) -> _CenteredMoments:
        """The statistics of policy ``j`` alone (views, no copies)."""
        sl = slice(j, j + 1)
        return _CenteredMoments(
            self.n, self.shift, self.r_mean, self.r_m2, self.mean[:, :, sl],
            self.comoment[:, :, sl], self.max_w[sl], self.n_clipped[sl],
        )

    def shifted(self, shift: float) -> _CenteredMoments:
        """The same statistics expressed about another reward shift (exact algebra)."""
        d = self.shift - float(shift)
        if d == 0.0 or self.n == 0:
            return _CenteredMoments(
                self.n, float(shift), self.r_mean + d if self.n else 0.0, self.r_m2,
                self.mean, self.comoment, self.max_w, self.n_clipped,
            )
        # a' = w (r - shift') = a + d b: means move by d * mean b, co-moments by T C T^T
        mean = self.mean.copy()
        mean[:, 0] += d * self.mean[:, 1]
        caa, cab, cbb = self.comoment[:, 0], self.comoment[:, 1], self.comoment[:, 2]
        com = np.stack([caa + 2.0 * d * cab + d * d * cbb, cab + d * cbb, cbb], axis=1)
        return _CenteredMoments(
            self.n, float(shift), self.r_mean + d, self.r_m2, mean, com, self.max_w,
            self.n_clipped,
        )

    def merge(self, other: _CenteredMoments) -> _CenteredMoments:
        """Moments of the union of two disjoint sets of rows (Chan et al.'s pairwise update)."""
        if other.n == 0:
            return self
        if self.n == 0:
            return other
        # keep the shift of the larger part; the other is re-expressed about it
        a, b = (self, other.shifted(self.shift)) if self.n >= other.n else (
            self.shifted(other.shift), other)
        n = a.n + b.n
        frac = b.n / n
        cross = a.n * b.n / n
        delta = b.mean - a.mean  # (2, 2, P)
        mean = a.mean + delta * frac
        da, db = delta[:, 0], delta[:, 1]
        extra = np.stack([da * da, da * db, db * db], axis=1) * cross
        dr = b.r_mean - a.r_mean
        return _CenteredMoments(
            n,
            a.shift,
            a.r_mean + dr * frac,
            a.r_m2 + b.r_m2 + dr * dr * cross,
            mean,
            a.comoment + b.comoment + extra,
            np.maximum(a.max_w, b.max_w),
            a.n_clipped + b.n_clipped,
        )

    # ---- per-policy summaries (j: policy column; clipped: raw or clipped weights) ----------
    def product_mean_var(self, j: int, *, clipped: bool, about: float) -> tuple[float, float]:
        """Mean and unbiased variance of ``w (r - about)``."""
        s = int(clipped)
        d = self.shift - float(about)
        ma, mb = self.mean[s, 0, j], self.mean[s, 1, j]
        caa, cab, cbb = self.comoment[s, :, j]
        var = (caa + 2.0 * d * cab + d * d * cbb) / (self.n - 1.0)
        return float(ma + d * mb), float(max(var, 0.0))

    def weight_mean_var(self, j: int, *, clipped: bool) -> tuple[float, float]:
        """Mean and unbiased variance of the (raw or clipped) weights."""
        s = int(clipped)
        return float(self.mean[s, 1, j]), float(self.comoment[s, 2, j] / (self.n - 1.0))

    def ratio_mean_var(self, j: int, *, clipped: bool) -> tuple[float, float]:
        """Self-normalized mean ``sum w r / sum w`` and the unbiased variance of its influence
        terms ``w (r - V) / mean w`` (the delta method)."""
        s = int(clipped)
        ma, mb = self.mean[s, 0, j], self.mean[s, 1, j]
        caa, cab, cbb = self.comoment[s, :, j]
        v = ma / mb
        var = (caa - 2.0 * v * cab + v * v * cbb) / (self.n - 1.0) / (mb * mb)
        return float(self.shift + v), float(max(var, 0.0))

    def reward_mean_var(self) -> tuple[float, float]:
        """Mean and unbiased variance of the rewards."""
        return self.shift + self.r_mean, self.r_m2 / (self.n - 1.0)

    def weight_sums(self, j: int, *, clipped: bool) -> tuple[float, float]:
        """``sum w`` and ``sum w^2`` (for the Kish ESS and the mean-weight check)."""
        s = int(clipped)
        mb = self.mean[s, 1, j]
        return float(self.n * mb), float(self.comoment[s, 2, j] + self.n * mb * mb)

    def raw_sums(self, j: int) -> dict[str, float]:
        """The raw sums of :data:`MOMENT_KEYS` for policy ``j``, derived from the moments."""
        out: dict[str, float] = {}
        n, c = float(self.n), self.shift
        for s, pre in ((0, ""), (1, "c")):
            ma, mb = self.mean[s, 0, j], self.mean[s, 1, j]
            caa, cab, cbb = self.comoment[s, :, j]
            s_w2 = cbb + n * mb * mb
            s_w2rs = cab + n * ma * mb  # sum w^2 (r - c)
            s_w2rs2 = caa + n * ma * ma  # sum w^2 (r - c)^2
            out[f"sum_{pre}w"] = float(n * mb)
            out[f"sum_{pre}w2"] = float(s_w2)
            out[f"sum_{pre}wr"] = float(n * (ma + c * mb))
            out[f"sum_{pre}w2r"] = float(s_w2rs + c * s_w2)
            out[f"sum_{pre}w2r2"] = float(s_w2rs2 + 2.0 * c * s_w2rs + c * c * s_w2)
        out["max_w"] = float(self.max_w[j])
        out["n_clipped"] = float(self.n_clipped[j])
        return out


def _centered_block(
    w: np.ndarray, rs: np.ndarray, a: np.ndarray, b: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Means (2, k) and centred co-moments (3, k) of ``(w * rs, w)`` over one block.

    ``w`` is the (k, c) block of weights with one policy per row, so every per-policy sum runs
    along contiguous memory; ``rs`` holds the (c,) shifted rewards; ``a`` and ``b`` are (k, c)
    scratch buffers, overwritten. Two passes: the means, then the exact centred sums.
    """
    c = float(w.shape[1])
    np.multiply(w, rs, out=a)
    ma = np.add.reduce(a, axis=1) / c
    mb = np.add.reduce(w, axis=1) / c
    np.subtract(a, ma[:, None], out=a)
    np.subtract(w, mb[:, None], out=b)
    com = [np.einsum("pi,pi->p", x, y) for x, y in ((a, a), (a, b), (b, b))]
    return np.stack([ma, mb]), np.stack(com)


def _block_rows(n_pol: int, chunk_size: int) -> int:
    """Rows per kernel block: at most ``chunk_size``, and (P, rows) within the cache budget."""
    if int(chunk_size) < 1:
        raise ValueError(f"`chunk_size` must be a positive integer; got {chunk_size!r}.")
    return max(1, min(int(chunk_size), _KERNEL_BLOCK_ELEMENTS // max(1, n_pol)))


def _centered_moments(
    reward: np.ndarray,
    logging_propensity: np.ndarray,
    target_propensity: np.ndarray,
    *,
    max_weight: float | None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> _CenteredMoments:
    """Centred moments of validated arrays (reward (n,), propensities (n,), targets (n, P)).

    The reward shift is the mean reward (so ``w (r - shift)`` is of the order of the reward's
    spread, not its level); each block is centred exactly (two passes over the block) and the
    blocks are merged pairwise.

    The weights of a block are written transposed, one policy per row, into a buffer reused by
    every block (no per-block allocation), so every per-policy sum, maximum and count is a
    reduction along contiguous memory: several times faster than column reductions of the
    row-major (rows, P) block (``w.max(axis=0)`` on 2**18 x 8 took 8 ms against 0.3 ms for the
    transposed block). The sums are numpy reductions and ``einsum``, not BLAS: multithreaded
    BLAS on hundreds of small products per call doubled the CPU time and, on a busy 2-core
    machine, made single calls up to 20x slower. Blocks have at most ``chunk_size`` rows and
    fit the cache (:data:`_KERNEL_BLOCK_ELEMENTS`). Clipped moments are computed only for the
    policies whose largest weight in the block exceeds ``max_weight``: for the others
    ``min(w, max_weight) = w`` and the clipped moments are the raw ones, exactly.
    """
    n, n_pol = target_propensity.shape
    r64 = reward.astype(np.float64, copy=False)
    shift = float(r64.mean()) if n else 0.0
    acc = _CenteredMoments.empty(n_pol, shift)
    rows = _block_rows(n_pol, chunk_size)
    if n == 0:
        return acc
    rows = min(rows, n)
    w_buf = np.empty((n_pol, rows))
    a_buf = np.empty((n_pol, rows))
    b_buf = np.empty((n_pol, rows))
    r_buf = np.empty(rows)
    if max_weight is not None:
        clip_buf = np.empty((n_pol, rows))  # the rows of the policies clipped in a block
        over_buf = np.empty((n_pol, rows), dtype=bool)
    for sl in _chunks(n, rows):  # loop over blocks, not rows
        c = sl.stop - sl.start
        w, a, b = w_buf[:, :c], a_buf[:, :c], b_buf[:, :c]
        # w[j, i] = t[i, j] / p[i], divided in float64 whatever the input dtype
        np.divide(target_propensity[sl].T, logging_propensity[sl], out=w, dtype=np.float64)
        rs = np.subtract(r64[sl], shift, out=r_buf[:c])
        m_raw, c_raw = _centered_block(w, rs, a, b)
        max_w = np.maximum.reduce(w, axis=1)
        n_clipped = np.zeros(n_pol)
        m_clip, c_clip = m_raw, c_raw
        if max_weight is not None:
            over = np.flatnonzero(max_w > max_weight)
            if over.size:
                m_clip, c_clip = m_raw.copy(), c_raw.copy()
                k = over.size
                sub = w if k == n_pol else np.take(w, over, axis=0, out=clip_buf[:k, :c])
                gt = np.greater(sub, max_weight, out=over_buf[:k, :c])
                n_clipped[over] = np.count_nonzero(gt, axis=1)
                np.minimum(sub, max_weight, out=sub)
                m_sub, c_sub = _centered_block(sub, rs, a[:k], b[:k])
                m_clip[:, over] = m_sub
                c_clip[:, over] = c_sub
        r_mean = float(np.add.reduce(rs) / c)
        dr = np.subtract(rs, r_mean, out=r_buf[:c])
        part = _CenteredMoments(
            c,
            shift,
            r_mean,
            float(np.einsum("i,i->", dr, dr)),
            np.stack([m_raw, m_clip]),
            np.stack([c_raw, c_clip]),
            max_w,
            n_clipped,
        )
        acc = acc.merge(part)
    return acc
