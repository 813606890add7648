"""The benchmark scripts run and report sane numbers (never asserting on wall-clock time)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import _common  # noqa: E402
import bench_evaluate  # noqa: E402
import run_all  # noqa: E402


# ---------------------------------------------------------------------------------- helpers
def test_interleaved_runs_every_case_once_per_round_in_rotating_order():
    calls: list[str] = []
    cases = {name: (lambda name=name: calls.append(name)) for name in ("a", "b", "c")}
    times = _common.interleaved(cases, rounds=5, warmup=1)
    for clock in (times.wall, times.cpu):
        assert set(clock) == {"a", "b", "c"}
        assert all(len(v) == 5 and all(t >= 0 for t in v) for v in clock.values())
    assert calls[:3] == ["a", "b", "c"]  # warm-up
    assert calls[3:6] == ["a", "b", "c"]
    assert calls[6:9] == ["b", "c", "a"]
    assert calls[9:12] == ["c", "a", "b"]
    with pytest.raises(ValueError, match="at least 1"):
        _common.interleaved(cases, rounds=0)


def test_ratio_and_summarize_by_hand():
    r = _common.ratio([2.0, 4.0, 6.0, 8.0, 100.0], [1.0, 1.0, 2.0, 2.0, 2.0])
    assert r["ratio"] == pytest.approx(6.0 / 2.0)
    assert r["paired_median"] == pytest.approx(4.0)  # paired: 2, 4, 3, 4, 50
    assert (r["paired_min"], r["paired_max"]) == (2.0, 50.0)
    s = _common.summarize([1.0, 2.0, 4.0])
    assert (s["median_s"], s["min_s"], s["max_s"], s["rounds"]) == (2.0, 1.0, 4.0, 3)
    assert s["spread"] == pytest.approx(1.5)
    with pytest.raises(ValueError, match="same number of rounds"):
        _common.ratio([1.0], [1.0, 2.0])


def test_peak_rss_sees_a_large_allocation_after_the_reset():
    res = _common.peak_rss("import numpy as np", "a = np.ones(25_000_000)")  # 200 MB
    assert res["hwm_reset"] in (True, False)
    assert 150.0 < res["extra_peak_mb"] < 400.0


def test_write_result_adds_machine_and_converts_numpy(tmp_path):
    doc_in = {"a": np.float64(1.5), "b": np.arange(3)}
    path = _common.write_result("x", doc_in, out=tmp_path / "x.json")
    doc = json.loads(path.read_text())
    assert doc["a"] == 1.5 and doc["b"] == [0, 1, 2]
    assert doc["benchmark"] == "x" and "python" in doc["machine"]


def test_format_table_aligns_columns():
    text = _common.format_table(["case", "s"], [["long name", 1.23456], ["x", float("nan")]])
    lines = text.splitlines()
    assert lines[0].startswith("case") and set(lines[1]) <= {"-", " "}
    assert lines[2].endswith("1.23") and lines[3].endswith("-")
    assert len({len(line) for line in lines}) == 1


# ---------------------------------------------------------------------------------- data
def test_make_data_truth_matches_a_large_sample_and_columns_are_consistent():
    data = bench_evaluate.make_data(400_000, n_policies=3, seed=5)
    n = data["n"]
    assert data["target"].shape == (n, 3) and data["q_target"].shape == (n, 3)
    assert np.all(
        (data["propensity"] >= bench_evaluate.LOGGING_FLOOR / bench_evaluate.N_ACTIONS)
        & (data["propensity"] <= 1)
    )
    # the exact value against the on-policy mean reward of a policy is not available, but IPS
    # is unbiased: it must sit within a few standard errors of the exact value
    w = data["target"] / data["propensity"][:, None]
    wr = w * data["reward"][:, None]
    z = (wr.mean(axis=0) - data["truth"]) / (wr.std(axis=0, ddof=1) / math.sqrt(n))
    assert np.all(np.abs(z) < 5), z


# ---------------------------------------------------------------------------------- runner
def test_run_all_quick_arguments_and_unknown_scripts(tmp_path):
    quick_io = run_all.script_args(BENCH / "bench_io.py", quick=True)
    assert quick_io == ["--rows", "200000", "--repeat", "1"]
    assert run_all.script_args(BENCH / "bench_io.py", quick=False) == []
    other = tmp_path / "bench_other.py"
    other.write_text("def main(argv=None):\n    return {}\n")
    assert run_all.script_args(other, quick=True) is None
    other.write_text('p.add_argument("--quick")\n')
    assert run_all.script_args(other, quick=True) == ["--quick"]


def test_run_all_quick_results_do_not_overwrite_full_results(tmp_path, monkeypatch):
    results = tmp_path / "results"
    results.mkdir()
    (results / "bench_a.json").write_text('{"full": true}')
    monkeypatch.setattr(run_all, "RESULTS_DIR", results)
    monkeypatch.setattr(run_all, "HERE", tmp_path)
    script = tmp_path / "bench_a.py"
    script.write_text(
        "import json, pathlib\n"
        "def main(argv=None):\n"
        f"    out = pathlib.Path({str(results)!r})\n"
        "    (out / 'bench_a.json').write_text(json.dumps({'speed_ratio': 1.5}))\n"
        "    (out / 'bench_b.json').write_text('{}')\n"
        "    return {'ok': 1}\n"
    )
    rec = run_all.run_script(script, ["--quick"], timeout=60, quick=True)
    assert rec["status"] == "ok", rec
    assert rec["returned"] == {"ok": 1}
    assert rec["results"] == {"bench_a.json": {"speed_ratio": 1.5}}
    assert json.loads((results / "bench_a.json").read_text()) == {"full": True}
    assert json.loads((results / "quick" / "bench_a.json").read_text()) == {"speed_ratio": 1.5}
    assert run_all.headline(rec) == "speed_ratio=1.5"
    # another script's file (e.g. written concurrently by someone else) is neither taken nor undone
    assert (results / "bench_b.json").read_text() == "{}"
    assert not (results / "quick" / "bench_b.json").exists()


def test_run_all_reports_a_failing_script_with_its_error(tmp_path, monkeypatch):
    monkeypatch.setattr(run_all, "RESULTS_DIR", tmp_path / "results")
    script = tmp_path / "bench_bad.py"
    script.write_text("def main(argv=None):\n    raise RuntimeError('no data here')\n")
    rec = run_all.run_script(script, [], timeout=60, quick=False)
    assert rec["status"] == "failed"
    assert "exit code 1" in rec["error"] and "RuntimeError: no data here" in rec["error"]


# ---------------------------------------------------------------------------------- the benchmark
@pytest.mark.slow
def test_bench_evaluate_quick_writes_finite_positive_ratios(tmp_path):
    out = tmp_path / "bench_evaluate.json"
    returned = bench_evaluate.main(["--quick", "--out", str(out)])
    doc = json.loads(out.read_text())
    expected = {
        "rows",
        "policies",
        "timings",
        "ratios",
        "ratio_details",
        "targets",
        "targets_met",
        "checks",
        "profile",
        "bootstrap",
        "obp",
        "memory",
        "machine",
    }
    assert expected <= set(doc)
    assert set(doc["ratios"]) == {
        "numpy_fused_vs_numpy",
        "evaluate_vs_numpy",
        "estimate_many_vs_numpy",
        "moment_stats_vs_numpy",
        "dr_estimate_many_vs_numpy",
    }
    for key, value in doc["ratios"].items():
        assert math.isfinite(value) and value > 0, key
        det = doc["ratio_details"][key]
        assert 0 < det["paired_min"] <= det["paired_median"] <= det["paired_max"]
    assert doc["ratios"] == returned["ratios"]
    assert set(doc["cpu_ratios"]) == set(doc["ratios"]) == set(doc["ratios_vs_chunked"])
    assert all(math.isfinite(v) and v > 0 for v in doc["ratios_vs_chunked"].values())
    assert all(math.isfinite(v) and v > 0 for v in doc["cpu_ratios"].values())
    for summary in doc["timings"].values():
        assert summary["rounds"] >= _common.MIN_ROUNDS
        assert 0 < summary["min_s"] <= summary["median_s"] <= summary["max_s"]
    # what was timed computes the right numbers
    assert doc["checks"]["agree"], doc["checks"]["max_relative_difference"]
    for key in ("ips", "snips", "clipped_ips"):
        assert doc["checks"]["max_relative_difference"][f"evaluate.{key}.value"] < 1e-9
    boot = doc["bootstrap"]
    for key in ("ips", "snips"):
        assert math.isfinite(boot[key]["seconds_per_resample_million_rows"])
        assert boot[key]["seconds_per_resample_million_rows"] > 0
        low, high = boot[key]["interval"]
        assert low < boot[key]["value"] < high
    obp = doc["obp"]
    if "skipped" not in obp:  # obp is optional: it runs only where its interpreter exists
        for key, e in obp["estimators"].items():
            assert e["abs_difference"] < 1e-9, key
            assert math.isfinite(e["obp_vs_ope_ratio"]) and e["obp_vs_ope_ratio"] > 0
    mem = doc["memory"]
    for case in ("numpy_baseline", "evaluate", "estimate_many"):
        assert mem[case]["extra_peak_mb"] >= 0
    assert doc["profile"]["stage_median_s"] and doc["profile"]["cprofile_top"]


def test_bench_cli_breakdown_times_each_part_of_the_critical_path(tmp_path):
    import bench_cli
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    n = 600_000  # three batches of the scan's default size
    action = rng.integers(0, 4, n)
    pq.write_table(
        pa.table(
            {
                "event_id": np.arange(n),
                "action": action,
                "propensity": np.full(n, 0.25),
                "reward": rng.binomial(1, 0.3, n).astype(float),
                "target__a": np.where(action == 0, 0.7, 0.1),
            }
        ),
        tmp_path / "logs.parquet",
    )
    out = bench_cli.breakdown(tmp_path / "logs.parquet", rounds=1)
    parts = {name: values[0] for name, values in out["breakdown_s"].items()}
    assert set(parts) == set(out["breakdown_median_s"])
    assert all(math.isfinite(v) and v >= 0 for v in parts.values())
    assert parts["imports"] > 0 and parts["first batch statistics (kernel start-up)"] > 0
    assert parts["later batches: statistics"] > 0  # the two later batches were timed
    within = sum(v for name, v in parts.items() if name != "total in process")
    assert within == pytest.approx(parts["total in process"], rel=0.05)


def test_bench_cats_quick_reads_every_line_and_measures_both_modes(tmp_path):
    import bench_cats

    result = bench_cats.main(["--quick", "--out", str(tmp_path / "bench_cats.json")])
    assert result["lines"] == 5_000 and set(result["modes"]) == {"json", "read"}
    for mode in result["modes"].values():
        assert mode["seconds"] > 0 and mode["extra_peak_mb"] >= 0
    assert json.loads((tmp_path / "bench_cats.json").read_text())["benchmark"] == "bench_cats"
