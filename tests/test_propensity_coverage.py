"""IPS and SNIPS on estimated propensities: bias and coverage of the defaults, by simulation.

A reduced rerun of ``benchmarks/bench_propensity.py`` (the committed table is
``benchmarks/propensity_coverage.md``): the well-specified design (the logger is a softmax of
the context columns), the default settings of ``ope.propensity.estimate_propensities``, the
normal interval. Seeds are fixed, so the figures are reproducible; the bands are what Monte
Carlo error allows, not the measured values.
"""

from __future__ import annotations

import math
import sys
import warnings
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_propensity  # noqa: E402

REPS = 200
#: three binomial standard errors of a 95% coverage over REPS replications
COVERAGE_BAND = 3 * math.sqrt(0.95 * 0.05 / REPS)


@pytest.fixture(scope="module")
def rows():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # single replications warn about their weights
        out = bench_propensity.run(REPS, [2000], False, ("default",), only=("well-specified",))
    return {(r["propensities"], r["estimator"]): r for r in out}


@pytest.mark.slow
@pytest.mark.parametrize("estimator", ["IPS", "SNIPS"])
def test_default_is_unbiased_and_covers_on_a_well_specified_logger(rows, estimator):
    row = rows[("default", estimator)]
    assert row["reps"] == REPS
    assert abs(row["bias"]) < 3 * row["bias_se"], row
    assert abs(row["cover_normal"] - 0.95) <= COVERAGE_BAND, row
    assert row["floored"] == 0  # the floor never binds here: it manufactures no weight
    # the estimated weights stay within a factor 2 of the true largest weight (69.1)
    assert row["max_weight"] < 2 * row["true_max_weight"], row


@pytest.mark.slow
def test_the_reference_row_uses_the_true_propensities(rows):
    ref = rows[("true propensities", "IPS")]
    assert ref["true_max_weight"] == pytest.approx(69.1, abs=0.05)
    assert abs(ref["bias"]) < 3 * ref["bias_se"]
