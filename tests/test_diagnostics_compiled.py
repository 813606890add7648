"""The diagnostics' own pass compiled (numba) and in numpy give the same numbers: the same
histogram counts, exact quantiles, and sums to 1e-12, on planted weights and edge cases; integer
actions are coded as pandas codes them."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from ope import _kernel
from ope.diagnostics import diagnose_arrays
from ope.diagnostics._inputs import _small_integer_codes
from ope.diagnostics._pass import fused_pass, weight_quantiles
from ope.exceptions import OverlapWarning, ValidationError

QS = (0.0, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0)


@pytest.fixture(autouse=True)
def _restore_backend():
    yield
    _kernel.set_backend(None)
    _kernel.set_threads(None)


def _need_numba():
    if not _kernel.numba_available():
        pytest.skip("numba is not installed (the optional extra 'fast')")


def _planted(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Propensities, (n, 6) targets and rewards with weights of every awkward kind."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.01, 1.0, n)
    t = np.empty((n, 6))
    t[:, 0] = rng.uniform(0, 1, n) * rng.integers(0, 2, n)  # zero target propensities
    t[:, 1] = np.minimum(p * 4.0, 1.0)  # weights 4: a bin's lower edge and a clip level
    t[:, 2] = p  # every weight 1
    t[:, 3] = rng.uniform(0, 1, n)  # random divisions: t / p rounded as numpy rounds it
    t[:, 4] = np.where(rng.random(n) < 0.5, 0.0, 1.0)
    t[:, 5] = 1e-310 * rng.random(n)  # subnormal weights
    return p, t, rng.integers(0, 2, n).astype(np.float64)


def _pass_both(p, t, ell):
    out = {}
    for backend in ("numpy", "numba"):
        _kernel.set_backend(backend)
        sums = fused_pass(p, t, ell)
        max_w = (t / p[:, None]).max(axis=0)
        out[backend] = (sums, weight_quantiles(p, t, sums, max_w, QS))
    return out["numpy"], out["numba"]


@pytest.mark.parametrize("n", [1, 2, 7, 2049, 40_001])
@pytest.mark.parametrize("with_ell", [False, True])
@pytest.mark.parametrize("n_threads", [1, 3])
def test_compiled_pass_equals_the_numpy_pass(n, with_ell, n_threads, monkeypatch):
    _need_numba()
    # several threads, each over its own range of rows, from a few thousand rows on
    monkeypatch.setattr("ope.diagnostics._pass.PARALLEL_MIN_ROWS", 1000)
    _kernel.set_threads(n_threads)
    p, t, r = _planted(n, n)
    (slow, q_slow), (fast, q_fast) = _pass_both(p, t, r if with_ell else None)
    np.testing.assert_array_equal(fast.hist_counts, slow.hist_counts)
    np.testing.assert_array_equal(fast.hist_above_edge, slow.hist_above_edge)
    np.testing.assert_allclose(fast.sum_wlogw, slow.sum_wlogw, rtol=1e-12, atol=1e-300)
    if with_ell:
        assert fast.profile_bins is not None and slow.profile_bins is not None
        np.testing.assert_allclose(fast.profile_bins, slow.profile_bins, rtol=1e-12, atol=0)
    else:
        assert fast.profile_bins is None and slow.profile_bins is None
    np.testing.assert_array_equal(q_fast, q_slow)  # exact: order statistics of t / p
    w = t / p[:, None]
    np.testing.assert_allclose(q_fast, np.quantile(w, QS, axis=0).T, rtol=1e-14, atol=0)
    if n_threads > 1 and n >= 40_000:
        assert len(fast.ranges) == n_threads  # the split did happen


def test_compiled_log_sums_match_a_correctly_rounded_sum():
    _need_numba()
    rng = np.random.default_rng(3)
    w = np.concatenate(
        [
            np.exp(rng.uniform(-700, 700, 5000)),
            1.0 + rng.normal(0, 1e-9, 5000),  # log w near 0: no cancellation against e log 2
            rng.uniform(0.5, 2.0, 5000),
        ]
    )
    p = np.ones(w.size)
    _kernel.set_backend("numba")
    got = fused_pass(p, w[:, None]).sum_wlogw[0]
    terms = w * np.log(w)
    assert got == pytest.approx(np.sum(terms), rel=1e-13)


def _frames(backend, *args, **kwargs) -> list[pd.DataFrame]:
    _kernel.set_backend(backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OverlapWarning)
        d = diagnose_arrays(*args, **kwargs)
    table = d.table()
    return [table, *(d.clip_profile(name) for name in table["policy"])]


@pytest.mark.parametrize("n", [2, 3001])
def test_diagnoses_agree_across_backends(n):
    _need_numba()
    p, t, r = _planted(n, 11)
    kwargs = {"max_weight": 4.0, "reward_range": (0.0, 1.0)}
    slow = _frames("numpy", r, p, t, **kwargs)
    fast = _frames("numba", r, p, t, **kwargs)
    assert len(slow) == len(fast) == 7
    for a, b in zip(slow, fast):
        pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_nan_target_is_rejected_on_both_backends(backend):
    if backend == "numba":
        _need_numba()
    p, t, r = _planted(50, 2)
    t[7, 3] = np.nan
    _kernel.set_backend(backend)
    with pytest.raises(ValidationError):
        diagnose_arrays(r, p, t)


@pytest.mark.parametrize(
    "action",
    [
        np.array([7, 3, 7, 5]),
        np.array([-5, 4, -5, 0], dtype=np.int8),
        np.array([2, 0, 2], dtype=np.uint64),
        np.array([2**40 + 3, 2**40], dtype=np.int64),
        np.array([255, 0], dtype=np.uint8),
        np.array([9]),
    ],
)
def test_integer_action_codes_equal_pandas_factorize(action):
    codes, labels = _small_integer_codes(action)
    want_codes, want_labels = pd.factorize(action, sort=True)
    np.testing.assert_array_equal(codes, want_codes)
    assert codes.dtype == np.intp
    assert labels == list(want_labels)
    assert [type(v) for v in labels] == [type(v) for v in want_labels]


def test_wide_or_non_integer_actions_use_pandas():
    assert _small_integer_codes(np.array([0, 2**40])) is None
    assert _small_integer_codes(np.array(["a", "b"])) is None
