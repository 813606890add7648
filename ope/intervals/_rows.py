"""Row sources of weighting estimators: the per-row columns a bootstrap resamples and the
statistic of their means, supplied by the estimator itself.

A weighting estimator's value is ``g(column means)`` of a few per-row columns built from the
rewards ``r`` and one candidate's importance weights ``w``: IPS is ``mean(w r)``, SNIPS
``mean(w r) / mean(w)``, clipped IPS ``r_lo + mean(min(w, R) (r - r_lo))``. The estimator says
which columns (:class:`RowColumn`) and which ``g`` (:class:`WeightingRows`) through its
``row_source(reward_range)``; :func:`ope.intervals.bootstrap.shared_bootstrap` builds the columns
of every candidate block by block from the shared weights and resamples them together, without
knowing which estimator asked. Equal columns (the ``w r`` of IPS and of SNIPS) are built and
resampled once.

This module sits below both :mod:`ope.intervals` and :mod:`ope.estimators`: the estimators build
these objects, the bootstrap reads them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = ["RowColumn", "WeightingRows", "first_mean"]


@dataclass(frozen=True)
class RowColumn:
    """One per-row column, a function of a block of rows' rewards ``r`` and one candidate's
    importance weights ``w``:

    * ``"reward"``: ``r`` (the weights are not read);
    * ``"weight"``: ``w``;
    * ``"weighted_reward"``: ``w r``, or ``min(w, clip) (r - origin)`` with a clip level or a
      reward origin.

    Equal columns compare equal (and hash equally), so a bootstrap builds each once per
    candidate.
    """

    kind: Literal["reward", "weight", "weighted_reward"]
    clip: float | None = None
    origin: float = 0.0

    @property
    def uses_weights(self) -> bool:
        """Whether the column reads the candidate's weights."""
        return self.kind != "reward"

    def fill(self, r: np.ndarray, w: np.ndarray | None, out: np.ndarray) -> None:
        """Write the column of the rows (``r`` and ``w`` float64 vectors) into ``out``."""
        if self.kind == "reward":
            out[:] = r
            return
        assert w is not None
        if self.kind == "weight":
            out[:] = w
        elif self.clip is None and self.origin == 0.0:
            np.multiply(w, r, out=out)
        else:
            used = w if self.clip is None else np.minimum(w, self.clip)
            np.multiply(used, r - self.origin, out=out)


def first_mean(means: np.ndarray) -> np.ndarray:
    """The mean of the first column: ``means[..., 0]``."""
    return means[..., 0]


@dataclass(frozen=True)
class WeightingRows:
    """A weighting estimator's row source: its per-row columns and the statistic of their means.

    Attributes
    ----------
    name : str
        The default key of the estimator's intervals (its registry name).
    columns : tuple of RowColumn
        The per-row columns, in the order ``statistic`` reads their means.
    statistic : callable
        Column means ``(..., k)`` -> values ``(...)``, vectorized over the leading axes.
    undefined_without_weight : bool
        Whether the statistic is undefined (0/0) on a resample whose weights are all zero
        (SNIPS's denominator); the bootstrap names the candidate's column when that happens.
    methods : tuple of str
        The interval methods the estimator offers besides normal and t (``Estimate.source
        .methods``): what a bootstrap with too many undefined resamples advises instead.

    Examples
    --------
    >>> import numpy as np
    >>> from ope.intervals._rows import RowColumn, WeightingRows
    >>> snips = WeightingRows("snips", (RowColumn("weighted_reward"), RowColumn("weight")),
    ...                       lambda m: m[..., 0] / m[..., 1], undefined_without_weight=True)
    >>> r, w = np.array([1.0, 0.0, 1.0]), np.array([2.0, 1.0, 0.5])
    >>> cols = np.empty((2, 3))
    >>> for col, out in zip(snips.columns, cols):
    ...     col.fill(r, w, out)
    >>> float(snips.statistic(cols.mean(axis=1)))   # (2 + 0 + 0.5) / (2 + 1 + 0.5)
    0.7142857142857143
    """

    name: str
    columns: tuple[RowColumn, ...]
    statistic: Callable[[np.ndarray], np.ndarray]
    undefined_without_weight: bool = False
    methods: tuple[str, ...] = ()

    @property
    def uses_weights(self) -> bool:
        """Whether some column reads the candidates' weights."""
        return any(c.uses_weights for c in self.columns)
