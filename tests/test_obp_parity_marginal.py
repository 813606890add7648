"""MIPS and SNMIPS against a direct numpy computation and against obp's MIPW / SNMIPW."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import ope
from ope.estimators import MIPS, SNMIPS

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import bench_evaluate  # noqa: E402
import bench_marginal  # noqa: E402


def _numpy_marginals(inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """sum_a pi(a|x_i) prod_d p(e_id|a), row by row (the definition, written out)."""
    n, k = inputs["pi_b"].shape
    p_e_a, embed = inputs["p_e_a"], inputs["action_embed"]
    p0, p1 = np.zeros(n), np.zeros(n)
    for i in range(n):
        like = np.array([np.prod([p_e_a[a, embed[i, d], d] for d in range(embed.shape[1])])
                         for a in range(k)])  # fmt: skip
        p0[i] = inputs["pi_b"][i] @ like
        p1[i] = inputs["pi_e"][i] @ like
    return p0, p1


# skewed planted rows: the short-interval note is tested in test_short_intervals.py
@pytest.mark.filterwarnings("ignore:.*likely too short:ope.exceptions.SmallSampleWarning")
@pytest.mark.parametrize("stochastic", [False, True], ids=["deterministic", "stochastic"])
@pytest.mark.parametrize("dims", [1, 2])
def test_mips_matches_numpy_on_dense_random_arrays(stochastic, dims):
    inputs = bench_marginal.parity_inputs(300, 7, 3, dims, stochastic=stochastic, seed=dims)
    assert np.all((inputs["p_e_a"] == 0) | (inputs["p_e_a"] == 1)) != stochastic
    p0, p1 = _numpy_marginals(inputs)
    w, r = p1 / p0, inputs["reward"]
    mips, snmips = np.mean(w * r), np.sum(w * r) / np.sum(w)
    logs, embeddings = bench_marginal.parity_logs(inputs)
    if not stochastic:  # the same deterministic embedding as item columns (the joint value)
        own = inputs["p_e_a"].argmax(axis=1)  # (K, dims)
        items = pa.table(
            {"action": np.arange(7, dtype=np.int64), **{f"c{d}": own[:, d] for d in range(dims)}}
        )
        cols = tuple(f"c{d}" for d in range(dims))
        embeddings["columns"] = ope.ActionEmbedding(columns=cols, items=items)
    assert len(embeddings) == (1 if stochastic else (3 if dims == 1 else 2))
    for kind, emb in embeddings.items():
        m = ope.marginal_propensities(logs, emb)
        np.testing.assert_allclose(m.logging, p0, rtol=1e-13, err_msg=kind)
        np.testing.assert_allclose(m.values[:, 0], p1, rtol=1e-13, err_msg=kind)
        res = ope.evaluate(logs, estimators=("mips", "snmips"), embedding=emb)
        assert res["new", "mips"].value == pytest.approx(mips, rel=1e-12), kind
        assert res["new", "snmips"].value == pytest.approx(snmips, rel=1e-12), kind
        assert MIPS().estimate(r, m.logging, m.values[:, 0]).value == pytest.approx(mips, rel=1e-12)
        assert SNMIPS().estimate(r, m.logging, m.values[:, 0]).value == pytest.approx(
            snmips, rel=1e-12
        )
    # the benchmark's vectorized reference is the same numbers
    q0, q1 = bench_marginal.reference_marginals(inputs)
    np.testing.assert_allclose(q0, p0, rtol=1e-13)
    np.testing.assert_allclose(q1, p1, rtol=1e-13)


@pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning")  # two rows
@pytest.mark.filterwarnings("ignore::ope.exceptions.SmallSampleWarning")
def test_mips_by_hand_on_rows_with_different_candidate_sets():
    # row 0 offers items 1, 2, 3 (genres a, a, b), logs 1; row 1 offers 2, 3, logs 3
    t = pa.table(
        {
            "action": [1, 3],
            "propensity": [0.2, 0.6],
            "reward": [1.0, 0.5],
            "candidates": [[1, 2, 3], [2, 3]],
            "logging_distribution": [[0.2, 0.3, 0.5], [0.4, 0.6]],
            "target__new": [0.1, 0.9],
            "target_dist__new": [[0.1, 0.7, 0.2], [0.1, 0.9]],
        }
    )
    items = pa.table({"action": [1, 2, 3], "genre": ["a", "a", "b"]})
    emb = ope.ActionEmbedding(clusters="genre", items=items)
    m = ope.marginal_propensities(ope.read_logs(t), emb)
    # row 0: genre a, pi0 = 0.2 + 0.3, pi = 0.1 + 0.7; row 1: genre b, pi0 = 0.6, pi = 0.9
    np.testing.assert_allclose(m.logging, [0.5, 0.6], rtol=1e-15)
    np.testing.assert_allclose(m.values[:, 0], [0.8, 0.9], rtol=1e-15)
    res = ope.evaluate(ope.read_logs(t), estimators=("mips", "snmips"), embedding=emb)
    w = np.array([0.8 / 0.5, 0.9 / 0.6])
    assert res["new", "mips"].value == pytest.approx((w[0] * 1.0 + w[1] * 0.5) / 2, rel=1e-14)
    assert res["new", "snmips"].value == pytest.approx(
        (w[0] * 1.0 + w[1] * 0.5) / w.sum(), rel=1e-14
    )
    # a stochastic p(genre | item) with the genre observed per row: row 0 saw "b", row 1 "a"
    dist = pa.table(
        {
            "action": [1, 1, 2, 3, 3],
            "value": ["a", "b", "a", "a", "b"],
            "probability": [0.75, 0.25, 1.0, 0.5, 0.5],
        }
    )
    seen = ope.read_logs(t.append_column("genre", pa.array(["b", "a"])))
    m = ope.marginal_propensities(seen, ope.ActionEmbedding(distribution={"genre": dist}))
    # row 0: pi0(b) = 0.2*0.25 + 0.3*0 + 0.5*0.5, pi(b) = 0.1*0.25 + 0.2*0.5
    # row 1: pi0(a) = 0.4*1 + 0.6*0.5, pi(a) = 0.1*1 + 0.9*0.5
    np.testing.assert_allclose(m.logging, [0.3, 0.7], rtol=1e-15)
    np.testing.assert_allclose(m.values[:, 0], [0.125, 0.55], rtol=1e-15)


def test_parity_cases_flag_a_disagreement():
    # bench_parity's comparison must be able to fail: a perturbed ope value is reported
    inputs = bench_marginal.parity_inputs(200, 5, 3, 1, stochastic=True, seed=0)
    ref = bench_marginal.reference_values(inputs)
    got = bench_marginal.ope_parity(inputs)["distribution"]["evaluate"]
    assert bench_marginal._rel(got["mips"], ref["mips"]) <= bench_marginal.PARITY_RTOL
    assert bench_marginal._rel(got["mips"] * (1 + 1e-9), ref["mips"]) > bench_marginal.PARITY_RTOL


OBP_PYTHON = bench_evaluate.DEFAULT_OBP_PYTHON


@pytest.mark.slow
@pytest.mark.skipif(
    not Path(OBP_PYTHON).exists(),
    reason=f"no obp interpreter at {OBP_PYTHON} (set OPE_BENCH_OBP_PYTHON)",
)
def test_mips_and_snmips_match_obp_marginalized_ipw():
    par = bench_marginal.bench_parity(OBP_PYTHON, n=10_000)
    assert "failed" not in par["obp"] and "skipped" not in par["obp"], par["obp"]
    assert par["agree"], json.dumps(par["cases"], indent=1)
    for name, case in par["cases"].items():
        assert set(case["obp"]) == {"mips", "snmips"}
        for key, d in case["differences"].items():
            if key.endswith("_vs_obp") and key not in case["not_comparable"]:
                assert d["rel"] <= 1e-12, (name, key, d)
    two = par["cases"]["stochastic_2d"]
    # obp's MIPW is the joint form in 2 dimensions too; its SNMIPW multiplies the dimensions'
    # mixtures, which the numpy computation of that form reproduces
    assert two["differences"]["distribution.evaluate.mips_vs_obp"]["rel"] <= 1e-12
    assert two["not_comparable"] == [
        "distribution.arrays.snmips_vs_obp",
        "distribution.evaluate.snmips_vs_obp",
    ]
    assert two["differences"]["distribution.evaluate.snmips_vs_obp"]["rel"] > 1e-9
    assert two["obp_snmips_vs_product_of_mixtures_rel"] <= 1e-12


@pytest.mark.slow
def test_bench_marginal_quick_runs_and_reports(tmp_path):
    out = tmp_path / "m.json"
    bench_marginal.main(["--quick", "--out", str(out)])
    doc = json.loads(out.read_text())
    assert doc["parity"]["agree"]
    perf = doc["perf"]
    assert perf["numpy_mips_max_rel_diff"] < 1e-12
    for key in ("mips_vs_ips", "ips+mips_vs_ips", "mips_vs_floor", "mips_vs_numpy_mips"):
        r = perf["ratios"][key]
        assert math.isfinite(r["ratio"]) and 0 < r["paired_min"] <= r["paired_max"]
    for summary in perf["timings"].values():
        assert summary["rounds"] >= 5 and summary["median_s"] > 0
    assert set(perf["memory"]) == {"ips", "mips", "ips+mips"}
    assert all(m["extra_peak_mb"] >= 0 for m in perf["memory"].values())
    assert perf["profile"]["by_self"] and perf["profile"]["total_ms"] > 0
    # the timed evaluations computed the same MIPS and IPS values
    for key, value in perf["values"]["mips"].items():
        assert perf["values"]["ips+mips"][key] == pytest.approx(value, rel=1e-12)
