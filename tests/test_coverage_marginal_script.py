"""``benchmarks/coverage_marginal.py``: its summaries by hand, and the ``--quick`` run's output.

The full study is run by hand (its tables are in ``benchmarks/marginal.md``); these tests check
the structure of the output, never its numbers.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "coverage_marginal.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ope_benchmark_coverage_marginal", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being created
    spec.loader.exec_module(module)
    return module


def test_summarize_by_hand() -> None:
    cm = _load()
    # (estimate, ci_low, ci_high, ess share) of three replications, truth 0.5
    values = [(0.4, 0.3, 0.6, 0.2), (0.6, 0.55, 0.7, 0.4), (0.5, 0.45, 0.52, 0.3)]
    s = cm.summarize(values, 0.5)
    assert s["replications"] == 3
    assert s["bias"] == pytest.approx(0.0, abs=1e-12)
    assert s["sd"] == pytest.approx(0.1)
    assert s["bias_mc_se"] == pytest.approx(0.1 / math.sqrt(3))
    assert s["rmse"] == pytest.approx(math.sqrt((0.01 + 0.01) / 3))
    assert s["coverage"] == pytest.approx(2 / 3)  # the second interval misses 0.5
    assert s["coverage_mc_se"] == pytest.approx(math.sqrt(2 / 9 / 3))
    assert s["mean_width"] == pytest.approx((0.3 + 0.15 + 0.07) / 3)
    assert s["ess_share"] == pytest.approx(0.3)


def test_tasks_have_distinct_seeds_and_cover_every_cell() -> None:
    cm = _load()
    tasks = cm.build_tasks(
        quick=False, reps=4, sizes=(100, 200), catalog=(100, 1000), catalog_n=300,
        catalog_reps=2, seed=7,
    )  # fmt: skip
    assert len(tasks) == len(cm.SETTINGS) * 2 * 4 + 2 * 2
    assert len({t.seed for t in tasks}) == len(tasks)
    assert [t.n for t in tasks] == sorted((t.n for t in tasks), reverse=True)
    broken = dict(next(t for t in tasks if t.setting == "assumption broken").env)
    holds = dict(next(t for t in tasks if t.setting == "assumption holds").env)
    stochastic = dict(next(t for t in tasks if t.setting == "stochastic embeddings").env)
    assert holds["direct_effect"] == 0.0 and broken["direct_effect"] > 0.0
    assert stochastic.get("stochastic_embeddings") is True
    assert {t.setting for t in tasks if t.table == "catalog"} == {"n_items=100", "n_items=1000"}
    with pytest.raises(ValueError, match="unknown setting"):
        cm.setting_env("nope", quick=True)


def test_quick_run_writes_every_cell(tmp_path, capsys) -> None:
    cm = _load()
    out = tmp_path / "coverage_marginal.json"
    argv = ["--quick", "--replications", "2", "--catalog-replications", "1"]
    assert cm.main([*argv, "--workers", "1", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["errors"] == []
    assert doc["replications"] == 2 and doc["sizes"] == list(cm.QUICK_SIZES)
    cells = [c for c in doc["cells"] if c["table"] == "settings"]
    # one cell per setting, n, policy and estimator (the six plus mdr with the cluster model)
    keys = {(c["setting"], c["n"], c["policy"], c["estimator"]) for c in cells}
    assert len(keys) == len(cells) == 3 * 2 * 3 * len(cm.ROW_ESTIMATORS)
    fields = {"bias", "bias_mc_se", "sd", "rmse", "coverage", "coverage_mc_se", "mean_width"}
    for c in cells:
        assert fields | {"ess_share", "truth", "replications"} <= set(c)
        assert c["replications"] == 2 and 0.0 <= c["coverage"] <= 1.0
        assert c["rmse"] >= abs(c["bias"]) - 1e-12 and c["mean_width"] >= 0.0
    assert {(c["setting"], c["n"], c["policy"]) for c in doc["checks"]} == {
        (s, n, p) for s in cm.SETTINGS for n in cm.QUICK_SIZES for p in cm.POLICIES
    }
    assert all(0.0 <= c["rejection_rate"] <= 1.0 for c in doc["checks"])
    catalog = {(c["setting"], c["estimator"]) for c in doc["cells"] if c["table"] == "catalog"}
    assert catalog == {(f"n_items={m}", e) for m in cm.QUICK_CATALOG for e in cm.CATALOG_ESTIMATORS}
    assert set(doc["truth"]) == set(cm.SETTINGS) | {f"n_items={m}" for m in cm.QUICK_CATALOG}
    printed = capsys.readouterr().out
    for title in (*cm.SETTINGS, "Embedding check", "RMSE against catalog size"):
        assert f"**{title}" in printed
    assert printed.count("| 2,000 | cluster_shift | mdr (cluster model) |") == 3


def test_estimated_embedding_script_quick_run(tmp_path) -> None:
    """``benchmarks/estimated_embedding.py --quick``: one row per (n, policy, estimator), with
    finite numbers and coverage in [0, 1] (the script's numbers are read by hand)."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "estimated_embedding.py"
    spec = importlib.util.spec_from_file_location("ope_benchmark_estimated_embedding", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    out = tmp_path / "estimated.json"
    result = module.main(["--quick", "--out", str(out)])
    keys = {(r["policy"], r["estimator"]) for r in result["rows"]}
    assert {e for _, e in keys} == {"ips", "mips (known)", "mips (estimated)"}
    assert len(keys) == 3 * 3
    for r in result["rows"]:
        assert math.isfinite(r["bias"]) and math.isfinite(r["rmse"])
        assert 0.0 <= r["coverage"] <= 1.0
    assert json.loads(out.read_text())["replications"] == 2
