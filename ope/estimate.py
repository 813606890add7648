"""Compatibility module: the result of every estimator now lives in :mod:`ope.results`.

``from ope.estimate import Estimate, compare, CI_METHODS`` keeps working; new code imports from
:mod:`ope.results` (``Estimate``, ``compare``, ``make_estimate``, ``Source``, ``RowSource``,
``DEFAULT_CONFIDENCE_LEVEL``, ``DEFAULT_CI_METHOD``). The underscored spellings below are the
names this module exported before the move.
"""

from __future__ import annotations

from ope.results import (
    CI_METHODS,
    DEFAULT_CI_METHOD,
    DEFAULT_CONFIDENCE_LEVEL,
    Estimate,
    RowSource,
    Source,
    compare,
    make_estimate,
)

__all__ = ["Estimate", "compare", "CI_METHODS"]

#: Old private spellings, kept so that imports written before the move keep working.
_make_estimate = make_estimate
_RowSource = RowSource
_Source = Source
