"""The tail of the importance weights: Pareto k-hat (PSIS) and Hill's tail index.

Checked against ``arviz.psislw`` (values recorded from arviz 0.23.4 on the weights below, and
live when arviz is installed), against Pareto weights of known tail index, and the diagnostics'
pass (the tail read off the histogram and the speculative gather, on both backends) against
the same fit of the weights sorted directly.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import ope._kernel as kernel
from ope.diagnostics import diagnose_arrays
from ope.diagnostics._pass import fused_pass, tail_level, weight_tails
from ope.diagnostics.tails import (
    K_RELIABLE,
    MIN_TAIL,
    TailFit,
    fit_tail,
    fit_tails,
    k_threshold,
    pareto_k,
    tail_length,
)
from ope._thresholds import heavy_tail, heavy_tail_note
from ope.exceptions import OPEWarning, ValidationError

#: arviz 0.23.4: ``psislw(np.log(w), normalize=False)[1]`` of the weights of :func:`_cases`.
ARVIZ_K = {
    "pareto_alpha_1_5": 0.6779294475712448,
    "lognormal_sd_1_5": 0.5251284506721621,
    "uniform": -0.7641495272843526,
    "mostly_zero": 1.0904733239086837,
    "ratio_of_uniforms": 0.17846563585303,
}


def _cases():
    rng = np.random.default_rng(20261203)
    yield "pareto_alpha_1_5", rng.pareto(1.5, 20_000) + 1.0
    yield "lognormal_sd_1_5", np.exp(rng.normal(0.0, 1.5, 5_000))
    yield "uniform", rng.uniform(0.0, 2.0, 3_000)
    yield "mostly_zero", np.where(rng.random(4_000) < 0.9, 0.0, rng.pareto(0.8, 4_000) + 1.0)
    yield "ratio_of_uniforms", rng.uniform(0, 1, 10_000) / rng.uniform(0.01, 1, 10_000)


@pytest.mark.parametrize("name, w", list(_cases()))
def test_k_hat_equals_arviz_psis(name, w):
    assert pareto_k(w).pareto_k == pytest.approx(ARVIZ_K[name], abs=1e-12)


@pytest.mark.parametrize("name, w", list(_cases()))
def test_k_hat_equals_arviz_live(name, w):
    az = pytest.importorskip("arviz")
    with warnings.catch_warnings(), np.errstate(divide="ignore"):
        warnings.simplefilter("ignore")
        _, k = az.psislw(np.log(w), normalize=False)
    assert pareto_k(w).pareto_k == pytest.approx(float(k), abs=1e-12)


def test_the_tail_size_and_the_thresholds_are_those_of_psis():
    assert tail_length(10) == 2 and tail_length(100) == 20 and tail_length(1_000_000) == 3000
    assert tail_length(225) == 45  # 3 sqrt(225) = 45 = 225 / 5
    assert k_threshold(10) == -math.inf
    assert k_threshold(100) == pytest.approx(0.5)
    assert k_threshold(1000) == pytest.approx(2 / 3)
    assert k_threshold(10**6) == K_RELIABLE


@pytest.mark.parametrize("alpha", [0.8, 1.5, 3.0])
def test_known_tail_index_is_recovered(alpha):
    # w = 1 + Pareto(alpha): k = 1 / alpha exactly; 30 samples of 100,000
    rng = np.random.default_rng(int(alpha * 10))
    fits = [pareto_k(rng.pareto(alpha, 100_000) + 1.0) for _ in range(30)]
    k = np.array([f.pareto_k for f in fits])
    hill = np.array([f.tail_index for f in fits])
    assert abs(k.mean() - 1 / alpha) < 0.05 + 3 * k.std() / math.sqrt(k.size)
    assert abs(np.median(hill) - alpha) / alpha < 0.15
    assert all(f.tail_length == tail_length(100_000) for f in fits)
    assert all(f.reliable == (f.pareto_k <= K_RELIABLE) for f in fits)


def test_light_tails_and_bounded_weights_read_reliable():
    rng = np.random.default_rng(3)
    assert pareto_k(rng.uniform(0, 5, 50_000)).pareto_k < 0  # bounded: k < 0
    assert pareto_k(rng.exponential(1.0, 50_000)).pareto_k == pytest.approx(0.0, abs=0.1)
    assert pareto_k(rng.exponential(1.0, 50_000)).reliable


def test_edge_cases():
    # every weight zero: no tail (NaN, nothing heavy); fewer than MIN_TAIL positive: inf
    fit = pareto_k(np.zeros(1000))
    assert math.isnan(fit.pareto_k) and fit.tail_length == 0 and fit.reliable
    w = np.zeros(1000)
    w[: MIN_TAIL - 1] = [1.0, 2.0, 3.0, 4.0][: MIN_TAIL - 1]
    fit = pareto_k(w)
    assert fit.pareto_k == math.inf and fit.tail_length == MIN_TAIL - 1 and not fit.reliable
    # ties at the threshold leave the tail shorter than M (values strictly above u)
    w = np.concatenate([np.full(950, 2.0), np.linspace(3.0, 30.0, 50)])
    fit = pareto_k(w)
    assert fit.threshold == 2.0 and fit.tail_length == 50 < tail_length(1000)
    # a deterministic candidate under a fixed logger: weights 0 or 8, the top tied -> no tail
    w = np.where(np.random.default_rng(1).random(100_000) < 1 / 8, 8.0, 0.0)
    fit = pareto_k(w)
    assert math.isnan(fit.pareto_k) and fit.tail_length == 0 and fit.threshold == 8.0
    assert fit.reliable
    w[:3] = 400.0  # three rows of tiny propensity above the tie: still too few to fit
    assert math.isnan(pareto_k(w).pareto_k) and pareto_k(w).tail_length == 3
    # the threshold 0 (fewer positive weights than M + 1): Hill's index is undefined
    w = np.zeros(10_000)
    w[:50] = np.random.default_rng(0).pareto(1.0, 50) + 1
    fit = pareto_k(w)
    assert fit.threshold == 0.0 and fit.tail_length == 50 and math.isnan(fit.tail_index)
    assert isinstance(fit, TailFit)
    with pytest.raises(ValidationError, match=r"`weights` must be >= 0.*row 1"):
        pareto_k([1.0, -1.0, 2.0])
    with pytest.raises(ValidationError):
        pareto_k([1.0, np.nan])


def test_fit_tail_needs_only_the_largest_values_in_any_order():
    rng = np.random.default_rng(5)
    w = rng.pareto(1.2, 40_000)
    m = tail_length(w.size) + 1
    top = np.sort(w)[-m:]
    rng.shuffle(top)
    assert fit_tail(top, w.size) == pareto_k(w)


@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_fit_tails_on_threads_equals_one_fit_at_a_time(n_threads):
    rng = np.random.default_rng(8)
    n = 400_000
    m = tail_length(n) + 1
    tops = [np.sort(rng.pareto(a, n))[-m:] for a in (0.8, 1.5, 3.0, 6.0, 12.0)]
    tops.append(np.zeros(0))  # a candidate with no positive weight
    assert sum(v.size for v in tops) >= 8192  # long enough to be fitted on the threads
    kernel.set_threads(n_threads)
    try:
        fits = fit_tails(tops, n)
    finally:
        kernel.set_threads(None)
    assert fits == [fit_tail(v, n) for v in tops]  # in order, each the one thread's fit
    assert math.isnan(fits[-1].pareto_k)
    assert fit_tails([], n) == []  # no candidate: no fit, no thread


def _logs(n, seed):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.001, 1.0, n) ** 3  # 1 / p has tail index 1/3
    t = np.column_stack(
        [
            rng.uniform(0, 0.2, n),
            (rng.random(n) < 0.1).astype(float),
            rng.uniform(0, 1, n),
            np.where(rng.random(n) < 0.999, 0.0, 0.5),  # very few positive weights
            np.zeros(n),  # never agrees with the logger
        ]
    )
    r = (rng.random(n) < 0.3).astype(float)
    return r, p, t


@pytest.fixture(params=["numba", "numpy"])
def backend(request):
    if request.param == "numba" and kernel.backend() != "numba":
        kernel.set_backend(None)
        if kernel.backend() != "numba":
            pytest.skip("numba is not installed")
    kernel.set_backend(request.param)
    yield request.param
    kernel.set_backend(None)


@pytest.mark.parametrize("n", [3_000, 150_000])
def test_the_pass_reads_the_same_tail_as_a_sort(backend, n):
    r, p, t = _logs(n, seed=n)
    top = tail_length(n) + 1
    for tail in (top, 0):  # with the speculative gather, and gathered by a second pass
        sums = fused_pass(p, t, r, (0.5, 0.9, 0.99, 0.999), tail=tail)
        got = weight_tails(p, t, sums, top)
        for j in range(t.shape[1]):
            w = t[:, j] / p
            want = np.sort(w[w > 0])[-top:]
            np.testing.assert_array_equal(got[j], want)


def test_diagnose_reports_the_fit_of_each_policy(backend):
    n = 60_000
    r, p, t = _logs(n, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OPEWarning)
        d = diagnose_arrays(
            reward=r, logging_propensity=p, target_propensity=t, reward_range=(0, 1)
        )
    table = d.table()
    for j in range(t.shape[1]):
        fit = pareto_k(t[:, j] / p)
        row = table.iloc[j]
        np.testing.assert_allclose(row["pareto_k"], fit.pareto_k, rtol=1e-12)
        np.testing.assert_allclose(row["tail_index"], fit.tail_index, rtol=1e-12)
        assert row["tail_length"] == fit.tail_length
        assert row["pareto_k_threshold"] == k_threshold(n)
    assert table["pareto_k"].iloc[0] > K_RELIABLE  # 1 / p^3: k = 3 in the limit
    assert math.isnan(table["pareto_k"].iloc[4])
    # the note says so, once per policy whose tail breaks a rule, and for no other
    flagged = {str(note).split(":")[0] for note in d.notes if "Pareto k-hat" in str(note)}
    want = {
        row.policy for row in table.itertuples() if heavy_tail(row.pareto_k, row.pareto_k_threshold)
    }
    assert table["policy"].iloc[0] in flagged and flagged == want
    assert "unreliable" in next(str(x) for x in d.notes if "Pareto k-hat" in str(x))


def test_the_tail_rule_and_its_note():
    assert heavy_tail(0.8, 0.7) == "unreliable"
    assert heavy_tail(math.inf, 0.7) == ""  # < 5 positive weights: the ESS notes speak
    assert heavy_tail(0.55, 0.7) == "infinite_variance"
    assert heavy_tail(0.3, 0.7) == "" and heavy_tail(math.nan, 0.7) == ""
    assert heavy_tail(0.45, k_threshold(50)) == "unreliable"  # 50 rows: limit 0.41
    assert "variance is likely infinite" in heavy_tail_note(0.6, 0.7)
    assert heavy_tail_note(0.6, 0.7).rule == "pareto_k"


def test_tail_level_is_the_rank_of_the_threshold():
    assert tail_level(101, 11) == pytest.approx(0.9)
    assert tail_level(5, 10) == 0.0


@pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning")
@pytest.mark.parametrize("weighted", [False, True])
def test_each_segment_has_the_k_hat_of_its_own_rows(weighted) -> None:
    g = np.random.default_rng(5)
    n = 6000
    p = g.uniform(0.02, 1.0, size=n)
    t = g.uniform(0.0, 1.0, size=(n, 2))
    r = g.binomial(1, 0.4, size=n).astype(float)
    seg = np.where(g.random(n) < 0.3, "a", "b")
    s = g.uniform(1.0, 3.0, size=n) if weighted else None
    d = diagnose_arrays(r, p, t, policy_names=["x", "y"], segments={"seg": seg}, sampling_weight=s)
    table = d.segments().set_index(["policy", "segment"])
    for j, name in enumerate(["x", "y"]):
        w = t[:, j] / p * (1.0 if s is None else s)
        for label in ("a", "b"):
            want = pareto_k(w[seg == label]).pareto_k
            assert table.loc[(name, label), "pareto_k"] == pytest.approx(want, rel=1e-12)
