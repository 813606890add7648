"""Each row's candidate actions, stored sparsely, and the scores and softmax over them.

A :class:`Support` says which actions a row's policy may put probability on. Without candidate
sets every row may take every one of the ``K`` actions (``dense``: nothing is stored). With
candidate sets it is CSR-like: ``offsets`` (n + 1) and ``cols`` (the action indices, into the
learner's sorted ``classes_``, of each row's candidates, sorted within the row), so memory and
work grow with the number of (row, candidate) pairs, never with ``n * K``.

A *layout* computes the scores ``W_a . x_i + b_a`` of every (row, candidate) pair, their softmax
within each row, and the gradient of an objective with respect to ``(W, b)`` given its gradient
with respect to the scores. Three layouts share one interface:

* :class:`DenseLayout` (no candidate sets): scores ``W @ Xs^T`` as a ``(K, n)`` action-major
  block, so the per-row reductions of the softmax run over contiguous rows of length ``n``, and
  both products are single BLAS calls.
* :class:`ScatterLayout` (candidate sets over a small catalog, ``K`` up to about
  :data:`SCATTER_FACTOR` times the mean set size): the same BLAS products on a row-major
  ``(n, K)`` block, then a gather of each row's candidates (and a scatter back for the
  gradient).
* :class:`GatherLayout` (candidate sets over a large catalog): the scores of the candidates
  only, feature by feature (``sum_k x_ik W_{c,k}`` with gathered ``W_c``), and the gradient by
  weighted ``bincount`` over the candidates' action indices: work ``O(nnz * d)``, whatever ``K``.

No layout loops over rows in Python; the loops are over features or blocks of rows.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from ope.exceptions import OPEWarning, ValidationError
from ope.learning._common import candidate_lists, encode_actions, encode_known, row_list

__all__: list[str] = []

#: a candidate-set fit scores the whole (n, K) block with BLAS (ScatterLayout) when that costs
#: less than gathering the candidates' weights (GatherLayout). Measured per objective evaluation
#: with one BLAS thread on 100,000 rows (benchmarks/bench_learning.py --layouts): a gathered
#: multiply-add costs about 2e-8 s per (pair, feature), a dense one about 1e-9 s per (entry,
#: feature + SCATTER_OVERHEAD), so the dense block wins while n K (d + 5) < 20 nnz d, i.e. up
#: to K = 18x the mean candidate-set size with 50 features and 9x with 4 (50 features, K = 16 x
#: 50 candidates: 1.5 s dense against 4.3 s gathered; 4 features, K = 20 x 20: 0.44 s against
#: 0.21 s)
SCATTER_FACTOR: Final = 20
SCATTER_OVERHEAD: Final = 5

#: most (row, action) pairs a fit holds as one dense block (8 bytes each: 512 MB). Without
#: candidate sets every row may take every action, so ``n * K`` beyond this is refused with a
#: message asking for candidate sets (a catalog of thousands of items needs them)
DENSE_PAIRS_LIMIT: Final = 1 << 26

#: (row, candidate) pairs per block when predicting (8 MB per float64 array): predictions for
#: millions of rows never hold more than a few such blocks
PREDICT_BLOCK_PAIRS: Final = 1 << 20

#: a GatherLayout keeps the gathered features (d, nnz) of a fit when they take at most this many
#: entries (256 MB); above it they are gathered again at every evaluation
GATHER_CACHE_ENTRIES: Final = 1 << 25


@dataclass(frozen=True, eq=False)
class Support:
    """The candidate actions of ``n`` rows among ``n_actions`` (indices into ``classes_``).

    ``offsets is None``: every row may take every action (dense). Otherwise row ``i``'s
    candidates are ``cols[offsets[i]:offsets[i + 1]]``, sorted, without repeats, never empty.
    """

    n: int
    n_actions: int
    offsets: npt.NDArray[np.int64] | None = None
    cols: npt.NDArray[np.intp] | None = None

    @property
    def dense(self) -> bool:
        return self.offsets is None

    @property
    def nnz(self) -> int:
        """Number of (row, candidate) pairs."""
        return self.n * self.n_actions if self.cols is None else int(self.cols.size)

    @cached_property
    def lengths(self) -> npt.NDArray[np.int64]:
        if self.offsets is None:
            return np.full(self.n, self.n_actions, dtype=np.int64)
        return np.diff(self.offsets)

    @cached_property
    def fixed_length(self) -> int | None:
        """The common candidate-set size when every row has the same, else None."""
        if self.offsets is None:
            return self.n_actions
        lengths = self.lengths
        if lengths.size and lengths.min() == lengths.max():
            return int(lengths[0])
        return None

    @cached_property
    def rows(self) -> npt.NDArray[np.intp]:
        """The row of every pair, in CSR order."""
        return np.repeat(np.arange(self.n, dtype=np.intp), self.lengths)

    def flat_cols(self) -> npt.NDArray[np.intp]:
        """The action of every pair, in CSR (row-major) order."""
        if self.cols is None:
            return np.tile(np.arange(self.n_actions, dtype=np.intp), self.n)
        return self.cols

    def take(self, idx: npt.NDArray[np.intp]) -> Support:
        """The support of rows ``idx`` (in that order; repeats allowed)."""
        idx = np.asarray(idx, dtype=np.intp)
        if self.offsets is None or self.cols is None:
            return Support(idx.size, self.n_actions)
        lengths = self.lengths[idx]
        offsets = np.zeros(idx.size + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        start = np.repeat(self.offsets[:-1][idx] - offsets[:-1], lengths)
        return Support(
            idx.size,
            self.n_actions,
            offsets,
            self.cols[start + np.arange(offsets[-1], dtype=np.int64)],
        )

    def restrict(self, keep: npt.NDArray[np.bool_]) -> Support:
        """The support on the actions ``keep`` only (renumbered ``0 .. keep.sum() - 1``)."""
        new_index = np.cumsum(keep) - 1
        k = int(keep.sum())
        if self.offsets is None or self.cols is None:
            if k != self.n_actions:
                return build_support(
                    np.broadcast_to(keep, (self.n, self.n_actions)),
                    np.arange(self.n_actions),
                    self.n,
                ).restrict(keep)
            return self
        mask = keep[self.cols]
        lengths = np.bincount(self.rows[mask], minlength=self.n)
        offsets = np.zeros(self.n + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return Support(self.n, k, offsets, new_index[self.cols[mask]].astype(np.intp))

    def position(self, action: npt.NDArray[np.intp]) -> npt.NDArray[np.int64]:
        """CSR position of the pair ``(i, action_i)`` of every row; -1 where ``action_i`` is not
        among row ``i``'s candidates."""
        n = self.n
        if self.offsets is None or self.cols is None:
            return np.arange(n, dtype=np.int64) * self.n_actions + action
        k = self.n_actions
        keys = self.rows.astype(np.int64) * k + self.cols  # increasing: rows, then sorted cols
        want = np.arange(n, dtype=np.int64) * k + action
        pos = np.minimum(np.searchsorted(keys, want), max(keys.size - 1, 0))
        found = keys[pos] == want if keys.size else np.zeros(n, dtype=bool)
        return np.where(found, pos, -1)


def build_support(
    candidates: Any,
    classes: npt.NDArray[Any],
    n: int,
    *,
    unseen: list[npt.NDArray[Any]] | None = None,
) -> Support:
    """The :class:`Support` of ``candidates`` (None: dense; an Arrow list column or sequence of
    lists, a null list meaning every action; or a boolean ``(n, n_actions)`` mask).

    With a list ``unseen`` (prediction), candidates that are not in ``classes`` (actions the
    learner never saw, so has no parameters for) are left out of the support, i.e. get
    probability 0, and their labels are appended to ``unseen`` (see :func:`warn_unseen`); a row
    left without any candidate is an error. Without it an unknown candidate is an error.
    """
    known_only = unseen is not None
    k = classes.size
    if candidates is None:
        return Support(n, k)
    if isinstance(candidates, np.ndarray) and candidates.dtype == np.bool_:
        if candidates.shape != (n, k):
            raise ValidationError(
                f"a boolean `candidates` mask must have shape (n, n_actions) = ({n}, {k}), columns "
                f"in the order of classes_; got {candidates.shape}."
            )
        rows, cols = np.nonzero(candidates)  # row-major: CSR order, sorted within rows
        is_null = np.zeros(n, dtype=bool)
        keys = None
    else:
        rows, labels, is_null = candidate_lists(candidates, n)
        if known_only:
            cols, known = encode_known(labels, classes, what="candidates")
            if not known.all():
                assert unseen is not None
                unseen.append(labels[~known])
                rows, cols = rows[known], cols[known]
        else:
            cols = encode_actions(labels, classes, what="candidates")
        if is_null.any():  # a null list: every action
            nulls = np.flatnonzero(is_null)
            rows = np.concatenate([rows, np.repeat(nulls, k)])
            cols = np.concatenate([cols, np.tile(np.arange(k, dtype=np.intp), nulls.size)])
        keys = rows.astype(np.int64) * k + cols
        step = np.diff(keys)
        if step.size and not (step > 0).all():  # not already sorted within rows
            order = np.argsort(keys, kind="stable")
            keys, rows, cols = keys[order], rows[order], cols[order]
            step = np.diff(keys)
        repeated = np.flatnonzero(step == 0)
        if repeated.size:
            bad = np.zeros(n, dtype=bool)
            bad[rows[repeated]] = True
            raise ValidationError(
                f"`candidates` list the same action twice in {row_list(bad)}; each candidate "
                "set must name every action once."
            )
    lengths = np.bincount(rows, minlength=n)
    empty = lengths == 0
    if empty.any():
        if known_only and candidates is not None:
            raise ValidationError(
                f"every row needs at least one candidate action the learner knows; "
                f"{row_list(empty)} have none (empty lists, or only actions never seen in fit). "
                "Refit on logs that include those actions, or score actions through "
                "action_features."
            )
        raise ValidationError(
            f"every row needs at least one candidate action; {row_list(empty)} have none."
        )
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return Support(n, k, offsets, np.asarray(cols, dtype=np.intp))


def warn_unseen(unseen: list[npt.NDArray[Any]]) -> None:
    """One warning for the candidates :func:`build_support` left out over a whole call."""
    if not unseen:
        return
    labels = np.concatenate(unseen)
    distinct = np.unique(labels)
    warnings.warn(
        f"{labels.size:,} (row, candidate) pairs name {distinct.size:,} actions not seen in fit "
        f"(e.g. {distinct[:3].tolist()}); the policy has no parameters for them and gives them "
        "probability 0.",
        OPEWarning,
        stacklevel=3,
    )


def slice_candidates(candidates: Any, sl: slice) -> Any:
    """Rows ``sl`` of a candidates argument (Arrow column, mask, sequence, or None)."""
    if candidates is None:
        return None
    if isinstance(candidates, (pa.Array, pa.ChunkedArray)):
        return candidates.slice(sl.start, sl.stop - sl.start)
    return candidates[sl]


def candidate_row_blocks(candidates: Any, n: int, n_actions: int) -> list[slice]:
    """Row blocks of about :data:`PREDICT_BLOCK_PAIRS` (row, candidate) pairs each
    (``candidates``: None, a boolean mask or an Arrow list array of ``n`` rows)."""
    if isinstance(candidates, (pa.Array, pa.ChunkedArray)):
        lengths = candidates.value_lengths().fill_null(n_actions)
        per_row = np.asarray(lengths.to_numpy(zero_copy_only=False), dtype=np.int64)
    else:  # None or a boolean mask: every row has (up to) every action
        per_row = np.full(n, n_actions, dtype=np.int64)
    ends = np.cumsum(np.maximum(per_row, 1))
    cuts = np.searchsorted(
        ends,
        np.arange(PREDICT_BLOCK_PAIRS, int(ends[-1]) if n else 0, PREDICT_BLOCK_PAIRS),
        side="right",
    )
    bounds = np.unique(np.concatenate([[0], cuts, [n]]))
    return [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


# --------------------------------------------------------------------------------------------
# layouts: scores, softmax and gradients on a support
# --------------------------------------------------------------------------------------------
class DenseLayout:
    """Every row takes every action: scores as an action-major ``(K, n)`` block.

    ``X1`` is ``(d + 1, n)``: the standardized features, feature-major, and a last row of ones,
    so that ``[W, b] @ X1`` gives the scores and ``R @ X1.T`` both gradients in one BLAS call
    each.
    """

    def __init__(self, X1: npt.NDArray[np.float64], support: Support) -> None:
        self.X1 = X1
        self.d = X1.shape[0] - 1
        self.support = support
        self.n = support.n
        self.k = support.n_actions

    def native(self, pos: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Flat positions in this layout's array of CSR positions ``i * K + a``."""
        i, a = np.divmod(pos, self.k)
        return a * self.n + i

    def scores(self, W: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> Any:
        Wb = np.empty((self.k, self.d + 1))
        Wb[:, : self.d] = W
        Wb[:, self.d] = b
        # an action never logged has the intercept -inf, so its scores are -inf; the BLAS
        # product may still raise the invalid flag (0 x -inf in its padding), not a NaN result
        with np.errstate(invalid="ignore"):
            return Wb @ self.X1

    def row_max(self, z: Any) -> npt.NDArray[np.float64]:
        return np.maximum.reduce(z, axis=0)

    def exp_scores(self, z: Any) -> tuple[Any, npt.NDArray[np.float64]]:
        """``exp(z - row max)`` in place and its row sums (the softmax before normalizing)."""
        top = self.row_max(z)
        blank = np.isneginf(top)  # every candidate unscored: the uniform policy
        if blank.any():
            z[:, blank] = 0.0
            top[blank] = 0.0
        z -= top
        np.exp(z, out=z)
        return z, np.add.reduce(z, axis=0)

    def scale_rows(self, P: Any, g: npt.NDArray[np.float64]) -> None:
        P *= g

    def grad(self, R: Any) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        G = R @ self.X1.T
        return G[:, : self.d], G[:, self.d]

    def csr(self, P: Any) -> npt.NDArray[np.float64]:
        """The values in CSR (row-major) order."""
        return np.ascontiguousarray(P.T).ravel()

    def softmax(self, z: Any) -> Any:
        E, total = self.exp_scores(z)
        self.scale_rows(E, 1.0 / total)
        return E


class _RaggedLayout:
    """Shared softmax and row reductions of the candidate-set layouts (flat CSR arrays)."""

    def __init__(self, X1: npt.NDArray[np.float64], support: Support) -> None:
        self.X1 = X1
        self.d = X1.shape[0] - 1
        self.support = support
        self.n = support.n
        self.k = support.n_actions
        self.rows = support.rows
        self.cols = support.flat_cols()
        self.fixed = support.fixed_length
        assert support.offsets is not None
        self.starts = support.offsets[:-1]

    def native(self, pos: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return pos

    def _per_row(self, v: npt.NDArray[np.float64]) -> Any:
        """``v`` (one value per row) aligned with the pairs (a view when rows have one size)."""
        return v[:, None] if self.fixed else np.repeat(v, self.support.lengths)

    def _rowwise(self, z: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return z.reshape(self.n, self.fixed) if self.fixed else z

    def row_max(self, z: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        if self.fixed:
            return np.maximum.reduce(z.reshape(self.n, self.fixed), axis=1)
        return np.maximum.reduceat(z, self.starts)

    def exp_scores(self, z: npt.NDArray[np.float64]) -> tuple[Any, npt.NDArray[np.float64]]:
        """``exp(z - row max)`` in place and its row sums (the softmax before normalizing)."""
        zz = self._rowwise(z)
        top = self.row_max(z)
        blank = np.isneginf(top)  # every candidate unscored: the uniform policy
        if blank.any():
            z[blank[self.rows]] = 0.0
            top[blank] = 0.0
        zz -= self._per_row(top)
        np.exp(z, out=z)
        total = np.add.reduce(zz, axis=1) if self.fixed else np.add.reduceat(z, self.starts)
        return z, total

    def scale_rows(self, P: npt.NDArray[np.float64], g: npt.NDArray[np.float64]) -> None:
        zz = self._rowwise(P)
        zz *= self._per_row(g)

    def softmax(self, z: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        E, total = self.exp_scores(z)
        self.scale_rows(E, 1.0 / total)
        return E

    def csr(self, P: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return P


class ScatterLayout(_RaggedLayout):
    """Candidate sets over a small catalog: dense BLAS scores, then a gather of the candidates.

    The dense block is row-major ``(n, K)`` here, so that gathering each row's candidates (and
    scattering the gradient back) walks memory in order: in the action-major block the pairs
    of one row are ``n`` entries apart, and the scatter took 1.3 s instead of 0.05 s for 100,000
    rows x 50 candidates.
    """

    def __init__(self, X1: npt.NDArray[np.float64], support: Support) -> None:
        super().__init__(X1, support)
        self.flat = self.rows.astype(np.int64) * self.k + self.cols

    def scores(self, W: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> Any:
        Wb = np.empty((self.d + 1, self.k))
        Wb[: self.d] = W.T
        Wb[self.d] = b
        with np.errstate(invalid="ignore"):  # -inf intercepts: see DenseLayout.scores
            return (self.X1.T @ Wb).ravel().take(self.flat)

    def grad(self, R: npt.NDArray[np.float64]) -> tuple[Any, Any]:
        dense = np.zeros((self.n, self.k))
        dense.ravel()[self.flat] = R  # each (row, action) pair at most once
        G = self.X1 @ dense  # (d + 1, K)
        return G[: self.d].T, G[self.d]


class GatherLayout(_RaggedLayout):
    """Candidate sets over a large catalog: work proportional to the candidates only."""

    def __init__(
        self, X1: npt.NDArray[np.float64], support: Support, *, cache: bool = True
    ) -> None:
        super().__init__(X1, support)
        self.Xg = (
            X1[: self.d, self.rows]
            if cache and self.d * self.rows.size <= GATHER_CACHE_ENTRIES
            else None
        )

    def _features(self, k: int) -> npt.NDArray[np.float64]:
        return self.Xg[k] if self.Xg is not None else self.X1[k].take(self.rows)

    def scores(self, W: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> Any:
        z = b.take(self.cols)
        Wt = np.ascontiguousarray(W.T)
        for k in range(self.d):  # loop over features, not rows
            z += self._features(k) * Wt[k].take(self.cols)
        return z

    def grad(self, R: npt.NDArray[np.float64]) -> tuple[Any, Any]:
        dW = np.empty((self.k, self.d))
        for k in range(self.d):  # loop over features, not rows
            dW[:, k] = np.bincount(self.cols, weights=R * self._features(k), minlength=self.k)
        return dW, np.bincount(self.cols, weights=R, minlength=self.k)


Layout = DenseLayout | ScatterLayout | GatherLayout


def make_layout(X1: npt.NDArray[np.float64], support: Support, *, fit: bool) -> Layout:
    """The layout for ``support`` (see the module docstring for the choice); ``X1`` holds the
    standardized features, feature-major, and a last row of ones (``Standardizer.transform_t``)."""
    if support.dense:
        if fit and support.nnz > DENSE_PAIRS_LIMIT:
            raise ValidationError(
                f"without candidate sets every one of the {support.n:,} rows may take each of "
                f"the {support.n_actions:,} actions: {support.nnz:,} (row, action) pairs, more "
                f"than the {DENSE_PAIRS_LIMIT:,} a fit holds at once. Give each row its "
                "candidate set (a `candidates` list column; the logger chose from it), which "
                "is what a catalog of thousands of items needs."
            )
        return DenseLayout(X1, support)
    pairs = support.n * support.n_actions
    d = X1.shape[0] - 1
    if (
        pairs * (d + SCATTER_OVERHEAD) <= SCATTER_FACTOR * support.nnz * max(d, 1)
        and pairs <= DENSE_PAIRS_LIMIT
    ):
        return ScatterLayout(X1, support)
    return GatherLayout(X1, support, cache=fit)
