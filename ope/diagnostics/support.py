"""Support from the full distributions: the candidate's mass where the logger (almost) never acts.

With the candidate's and the logger's distributions over the actions of each row (sparse CSR
matrices over action codes), the support deficiency is exact per row; the logged propensity is
checked against the logger's distribution at the logged action.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import sparse

from ope._thresholds import PROPENSITY_TOLERANCE
from ope._validation import first_rows
from ope.exceptions import ValidationError

__all__ = ["as_csr", "deficiency", "propensity_consistency"]


def as_csr(x: Any, name: str, n: int) -> sparse.csr_array:
    """A sparse (n, n_actions) distribution as float64 CSR."""
    if not sparse.issparse(x):
        raise ValidationError(
            f"`{name}` must be a scipy.sparse matrix (n, n_actions) over action codes; got "
            f"{type(x).__name__}."
        )
    m = sparse.csr_array(x, dtype=np.float64)
    if m.shape[0] != n:
        raise ValidationError(f"`{name}` has {m.shape[0]} rows; the logs have {n}.")
    return m


def deficiency(target: sparse.csr_array, logging: sparse.csr_array, floor: float) -> np.ndarray:
    """Per-row candidate mass on actions whose logging probability is <= floor."""
    k = max(target.shape[1], logging.shape[1])
    t = sparse.csr_array(target, shape=(target.shape[0], k)) if target.shape[1] < k else target
    lg = sparse.csr_array(logging, shape=(logging.shape[0], k)) if logging.shape[1] < k else logging
    supported = lg.copy()
    supported.data = (supported.data > floor).astype(np.float64)
    supported.eliminate_zeros()
    total = np.asarray(t.sum(axis=1)).ravel()
    covered = np.asarray(t.multiply(supported).sum(axis=1)).ravel()
    return np.maximum(total - covered, 0.0)


def propensity_consistency(
    logging: sparse.csr_array, codes: np.ndarray, p: np.ndarray
) -> list[str]:
    """A note when the logged propensity disagrees with the logged distribution."""
    n = p.shape[0]
    if logging.shape[1] <= int(codes.max()):
        logging = sparse.csr_array(logging, shape=(n, int(codes.max()) + 1))
    at_logged = np.asarray(logging[np.arange(n), codes]).ravel()
    bad = np.abs(at_logged - p) > PROPENSITY_TOLERANCE
    if not bad.any():
        return []
    count, first = first_rows(bad)
    return [
        f"`propensity` disagrees with `logging_distribution` at the logged action in {count:,} "
        f"rows (first at row {first}: {float(p[first]):.6g} vs {float(at_logged[first]):.6g}); "
        "one of them is logged wrongly, and every weight built on it is suspect."
    ]
