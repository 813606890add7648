"""The quick version of ``benchmarks/coverage_bandit.py``: finite-sample intervals must cover.

The full study (1000 replications, n up to 100,000) is run by hand and its table kept in
``benchmarks/README.md``; this runs the ``--quick`` setting (200 replications, n in {100, 1000},
both designs) and checks the guarantees that must hold at every n.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "coverage_bandit.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ope_benchmark_coverage", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being created
    spec.loader.exec_module(module)
    return module


def test_designs_have_exact_truth_and_heavy_tail() -> None:
    cov = _load()
    designs = cov.make_designs()
    mild, heavy = designs[:2]
    assert [d.name for d in cov.make_designs(extended=False)] == ["mild", "heavy"]
    for design in designs:
        # the cell probabilities are a distribution and IPS is unbiased for the exact truth
        probs = design.cells["prob"]
        assert probs.sum() == pytest.approx(1.0)
        ips_mean = float(probs @ (design.cells["w"] * design.cells["r"]))
        assert ips_mean == pytest.approx(design.truth, rel=1e-12)
        assert float(probs @ design.cells["w"]) == pytest.approx(1.0, rel=1e-12)
        lo, hi = design.reward_range
        assert set(np.unique(design.cells["r"])) == {lo, hi}
        # the clip binds in every design, so the clipped value is below the policy's value
        assert lo <= design.clipped_truth < design.truth <= hi
    assert heavy.logging[:, 0].max() <= 0.01 and heavy.max_weight > 50
    assert mild.max_weight < 10


@pytest.mark.slow
def test_quick_study_finite_sample_methods_cover() -> None:
    cov = _load()
    results = cov.run(quick=True, log=lambda msg: None)
    reps = cov.QUICK_REPS
    level = cov.CONFIDENCE_LEVEL
    slack = 3.0 * math.sqrt(level * (1.0 - level) / reps)
    n_designs = len(cov.make_designs())
    # finite-sample methods cover their stated target: the policy's value, or the clipped
    # value for clipped IPS bernstein
    finite = [
        c
        for c in results
        if c.method in cov.FINITE_SAMPLE
        and c.method not in cov.CLIPPED_TARGET
        or c.method == "clipped IPS bernstein -> clipped value"
    ]
    assert len(finite) == len(cov.FINITE_SAMPLE) * n_designs * len(cov.QUICK_SIZES)
    for cell in finite:
        assert cell.coverage >= level - slack, cell
    # every method produced an interval for every replication, with a positive mean width
    assert len(results) == len(cov.row_labels()) * n_designs * len(cov.QUICK_SIZES)
    assert all(c.mean_width > 0 for c in results)
    # the study is informative: the Wald interval visibly fails on heavy weights at n = 100
    (wald,) = [
        c for c in results if c.design == "heavy" and c.n == 100 and c.method == "IPS normal"
    ]
    assert wald.coverage < level - slack
