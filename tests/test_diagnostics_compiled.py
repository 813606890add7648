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
from ope.diagnostics import _pass as _pass_module
from ope.diagnostics._pass import fused_pass, weight_quantiles, weight_tails
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


def _pass_both(p, t, ell, layout="matrix", speculate=False):
    """The pass and quantiles with numpy then numba, the targets as a matrix or as P
    contiguous columns (as the logs' ``target__`` columns reach the pass); with ``speculate``
    the pass is told the quantiles (the compiled one then keeps the predicted bins' weights)."""
    targets = (
        t if layout == "matrix" else [np.ascontiguousarray(t[:, j]) for j in range(t.shape[1])]
    )
    out = {}
    for backend in ("numpy", "numba"):
        _kernel.set_backend(backend)
        scale = 0.0 if ell is None else float(np.sqrt(p.size))
        sums = fused_pass(p, targets, ell, QS if speculate else (), smoothing_scale=scale)
        max_w = (t / p[:, None]).max(axis=0)
        out[backend] = (sums, weight_quantiles(p, targets, sums, max_w, QS))
    return out["numpy"], out["numba"]


@pytest.mark.parametrize("n", [1, 2, 7, 2049, 40_001])
@pytest.mark.parametrize("with_ell", [False, True])
@pytest.mark.parametrize("n_threads", [1, 3])
@pytest.mark.parametrize("layout", ["matrix", "columns"])
@pytest.mark.parametrize("speculate", [False, True])
def test_compiled_pass_equals_the_numpy_pass(
    n, with_ell, n_threads, layout, speculate, monkeypatch
):
    _need_numba()
    # several threads, each over its own range of rows, from a few thousand rows on
    monkeypatch.setattr("ope._kernel.PARALLEL_MIN_ROWS", 1000)
    _kernel.set_threads(n_threads)
    p, t, r = _planted(n, n)
    (slow, q_slow), (fast, q_fast) = _pass_both(p, t, r if with_ell else None, layout, speculate)
    np.testing.assert_array_equal(fast.hist_counts, slow.hist_counts)
    np.testing.assert_array_equal(fast.hist_above_edge, slow.hist_above_edge)
    np.testing.assert_allclose(fast.sum_wlogw, slow.sum_wlogw, rtol=1e-12, atol=1e-300)
    if with_ell:
        assert fast.profile_bins is not None and slow.profile_bins is not None
        np.testing.assert_allclose(fast.profile_bins, slow.profile_bins, rtol=1e-12, atol=0)
        # the log-smoothing sums: numpy's log1p of every row's w r / sqrt(n)
        want = np.log1p(t / p[:, None] * (r / np.sqrt(n))[:, None]).sum(axis=0)
        assert fast.sum_log1p is not None and slow.sum_log1p is not None
        np.testing.assert_allclose(fast.sum_log1p, want, rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(slow.sum_log1p, want, rtol=1e-12, atol=1e-300)
    else:
        assert fast.profile_bins is None and slow.profile_bins is None
        assert fast.sum_log1p is None and slow.sum_log1p is None
    np.testing.assert_array_equal(q_fast, q_slow)  # exact: order statistics of t / p
    w = t / p[:, None]
    np.testing.assert_allclose(q_fast, np.quantile(w, QS, axis=0).T, rtol=1e-14, atol=0)
    if n_threads > 1 and n >= 40_000:
        assert len(fast.ranges) == n_threads  # the split did happen


def _adversarial(case: str) -> tuple[np.ndarray, np.ndarray]:
    """Propensities and (n, 3) targets whose weights make the exact quantiles awkward."""
    rng = np.random.default_rng(5)
    if case == "one row":
        return np.array([0.25]), np.array([[0.5, 0.0, 0.25]])
    if case == "all equal":  # every weight 2: one value, no gather
        p = rng.uniform(0.1, 0.5, 999)
        return p, np.column_stack([2.0 * p, 2.0 * p, 2.0 * p])
    n = 5000
    p = np.full(n, 0.5)
    if case == "ties in one bin":  # three values of one histogram bin, each repeated
        vals = np.array([1.0, 1.01, 1.02])[rng.integers(0, 3, n)]
        return p, np.column_stack([vals * 0.5, np.sort(vals) * 0.5, vals[::-1] * 0.5])
    if case == "bin edges":  # weights at a bin's lower edge and one ulp either side of it
        edge = 1.125
        vals = np.array([np.nextafter(edge, 0.0), edge, np.nextafter(edge, 2.0)])
        w = vals[rng.integers(0, 3, n)]
        return p, np.column_stack(
            [w * 0.5, np.where(rng.random(n) < 0.999, 0.0, w) * 0.5, w * 0.25]
        )
    # "extremes": the needed bins are the lowest non-zero one and the highest one
    w = np.where(rng.random(n) < 0.5, 1e-300, 1e300) * rng.uniform(1.0, 1.1, n)
    return np.ones(n), np.column_stack([w, w[::-1], np.minimum(w, 1.0)])


@pytest.mark.parametrize(
    "case", ["one row", "all equal", "ties in one bin", "bin edges", "extremes"]
)
@pytest.mark.parametrize("layout", ["matrix", "columns"])
@pytest.mark.parametrize("speculate", [False, True])
def test_quantiles_stay_exact_on_adversarial_weights(case, layout, speculate):
    _need_numba()
    p, t = _adversarial(case)
    (_, q_slow), (_, q_fast) = _pass_both(p, t, None, layout, speculate)
    np.testing.assert_array_equal(q_fast, q_slow)
    want = np.quantile(t / p[:, None], QS, axis=0).T
    np.testing.assert_allclose(q_fast, want, rtol=1e-15, atol=0)
    # an order statistic itself (no interpolation) is one of the weights, exactly
    exact = [k for k, q in enumerate(QS) if (q * (p.size - 1)).is_integer()]
    np.testing.assert_array_equal(q_fast[:, exact], want[:, exact])


def test_the_pass_and_the_gather_read_the_rows_once_each(monkeypatch):
    _need_numba()
    _kernel.set_backend("numba")
    _kernel.set_threads(1)
    p, t, r = _planted(20_000, 4)
    calls = _counted_loops(monkeypatch)
    sums = fused_pass(p, t, r)
    weight_quantiles(p, t, sums, (t / p[:, None]).max(axis=0), QS)
    assert calls == {"_nb_fused_pass": 1, "_nb_gather": 1}


def _counted_loops(monkeypatch) -> dict[str, int]:
    """Count the calls of the compiled loops over the rows (the pass and the second, gathering,
    pass)."""
    loops = dict(_pass_module._compiled() or {})
    calls: dict[str, int] = {}

    def counted(name):
        def call(*args):
            calls[name] = calls.get(name, 0) + 1
            return loops[name](*args)

        return call

    passes = ("_nb_fused_pass", "_nb_gather")  # the loops over the rows; others run as they are
    monkeypatch.setattr(
        _pass_module,
        "_compiled",
        lambda: {k: counted(k) if k in passes else fn for k, fn in loops.items()},
    )
    return calls


def _spread(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Propensities and (n, 4) targets with continuous weights (every quantile in a bin of
    many values) and a greedy candidate (weights 0 or 1 / p)."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.05, 0.2, n)
    t = np.column_stack(
        [
            rng.uniform(0.0, 0.2, n),
            (rng.random(n) < 0.3).astype(np.float64),
            rng.gamma(0.5, 0.1, n),
            rng.uniform(0.0, 1.0, n) ** 4,
        ]
    )
    return p, t


@pytest.mark.parametrize("n_threads", [1, 3])
@pytest.mark.parametrize("layout", ["matrix", "columns"])
def test_speculative_gather_reads_the_rows_once(n_threads, layout, monkeypatch):
    _need_numba()
    monkeypatch.setattr("ope._kernel.PARALLEL_MIN_ROWS", 1000)
    _kernel.set_backend("numba")
    _kernel.set_threads(n_threads)
    p, t = _spread(100_000, 8)
    targets = t if layout == "matrix" else [np.ascontiguousarray(c) for c in t.T]
    calls = _counted_loops(monkeypatch)
    sums = fused_pass(p, targets, None, QS)
    got = weight_quantiles(p, targets, sums, (t / p[:, None]).max(axis=0), QS)
    assert calls == {"_nb_fused_pass": len(sums.ranges)}  # no second pass over the rows
    assert sums.speculation is not None and sums.gathered_again == []
    np.testing.assert_array_equal(got, np.quantile(t / p[:, None], QS, axis=0).T)


def _missing_spans(candidates):
    """A :func:`_predict_spans` whose spans of ``candidates`` hold no needed bin."""
    predict = _pass_module._predict_spans

    def wrong(propensity, target, qs, tail=None):
        guess = predict(propensity, target, qs, tail)
        guess.spans[candidates] = 0
        return guess

    return wrong


def _small_buffers(candidates):
    """A :func:`_predict_spans` whose buffers of ``candidates`` hold one weight per span."""
    predict = _pass_module._predict_spans

    def small(propensity, target, qs, tail=None):
        guess = predict(propensity, target, qs, tail)
        guess.capacity[candidates] = np.minimum(guess.capacity[candidates], 1)
        guess.first = (np.cumsum(guess.capacity) - guess.capacity.reshape(-1)).reshape(
            guess.capacity.shape
        )
        return guess

    return small


@pytest.mark.parametrize("miss", [_missing_spans, _small_buffers])
@pytest.mark.parametrize("candidates", [[0, 1, 2, 3], [2]])
@pytest.mark.parametrize("n_threads", [1, 3])
def test_a_wrong_guess_falls_back_to_the_second_pass(miss, candidates, n_threads, monkeypatch):
    _need_numba()
    monkeypatch.setattr("ope._kernel.PARALLEL_MIN_ROWS", 1000)
    _kernel.set_backend("numba")
    _kernel.set_threads(n_threads)
    p, t = _spread(60_000, 9)
    want = np.quantile(t / p[:, None], QS, axis=0).T
    monkeypatch.setattr(_pass_module, "_predict_spans", miss(candidates))
    calls = _counted_loops(monkeypatch)
    top = 500
    sums = fused_pass(p, t, None, QS, tail=top)
    got = weight_quantiles(p, t, sums, (t / p[:, None]).max(axis=0), QS)
    assert sums.gathered_again == candidates
    assert calls["_nb_gather"] == len(sums.ranges)
    np.testing.assert_array_equal(got, want)
    # the tail of the candidates missed is gathered again too (one more pass), exactly
    tails = weight_tails(p, t, sums, top)
    assert calls["_nb_gather"] == 2 * len(sums.ranges)
    w = t / p[:, None]
    for j in range(t.shape[1]):
        np.testing.assert_array_equal(tails[j], np.sort(w[:, j])[-top:])


def test_sorted_rows_still_give_exact_quantiles():
    """Rows sorted by weight: the blocks of the sample see a skewed share of each bin; a miss
    or an overflow falls back, the quantiles are exact either way."""
    _need_numba()
    _kernel.set_backend("numba")
    p, t = _spread(200_000, 10)
    order = np.argsort(t[:, 0] / p)
    p, t = p[order], t[order]
    sums = fused_pass(p, t, None, QS)
    got = weight_quantiles(p, t, sums, (t / p[:, None]).max(axis=0), QS)
    np.testing.assert_array_equal(got, np.quantile(t / p[:, None], QS, axis=0).T)


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


@pytest.mark.parametrize("zeros", [0.0, 0.5, 0.99])
def test_compiled_log1p_sums_keep_the_small_terms(zeros):
    """``log1p x`` from ``1 + x`` would lose x's low bits for x near 0 (every row of a large n,
    where lambda = sqrt(n) (r_max - r_min)); the pass reads x itself there, and skips the rows
    whose x is 0 (w = 0 or r = r_min) whatever their share."""
    _need_numba()
    rng = np.random.default_rng(4)
    n = 30_000
    x = np.concatenate(
        [
            np.exp(rng.uniform(-40, 0, n // 3)),  # tiny: z = 1 + x rounds away most of x
            rng.uniform(0.3, 0.5, n // 3),  # either side of sqrt(2) - 1
            np.exp(rng.uniform(0, 600, n - 2 * (n // 3))),  # a heavy weight's term
        ]
    )
    x[rng.random(n) < zeros] = 0.0
    _kernel.set_backend("numba")
    ell = np.ones(n)
    got = fused_pass(np.ones(n), x[:, None], ell, smoothing_scale=1.0).sum_log1p
    assert got is not None
    assert got[0] == pytest.approx(np.sum(np.log1p(x)), rel=1e-13)
    tiny = x < 1e-8
    got_tiny = fused_pass(np.ones(n), np.where(tiny, x, 0.0)[:, None], ell, smoothing_scale=1.0)
    assert got_tiny.sum_log1p is not None
    assert got_tiny.sum_log1p[0] == pytest.approx(np.sum(np.log1p(x[tiny])), rel=1e-13)


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
        np.random.default_rng(3).integers(-40, 40, 5000),  # offset and gaps: renumbered
        np.arange(5000, dtype=np.int64)[::-1] % 7,  # 0 .. 6 all present: the ids themselves
    ],
)
@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_integer_action_codes_equal_pandas_factorize(action, backend):
    if backend == "numba":
        _need_numba()
    _kernel.set_backend(backend)
    codes, labels = _small_integer_codes(action)
    want_codes, want_labels = pd.factorize(action, sort=True)
    np.testing.assert_array_equal(codes, want_codes)
    assert codes.dtype == np.intp
    assert labels == list(want_labels)
    assert [type(v) for v in labels] == [type(v) for v in want_labels]


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_dense_action_ids_are_their_own_codes(backend):
    if backend == "numba":
        _need_numba()
    _kernel.set_backend(backend)
    action = np.array([2, 0, 1, 2, 0], dtype=np.intp)
    codes, labels = _small_integer_codes(action)
    assert codes is action  # no copy: 0 .. K - 1 all occur
    assert [int(v) for v in labels] == [0, 1, 2]
    gap = np.array([3, 0, 3], dtype=np.intp)  # 1 and 2 never occur: renumbered
    codes, labels = _small_integer_codes(gap)
    np.testing.assert_array_equal(codes, [1, 0, 1])
    assert codes is not gap


def test_wide_or_non_integer_actions_use_pandas():
    assert _small_integer_codes(np.array([0, 2**40])) is None
    assert _small_integer_codes(np.array(["a", "b"])) is None


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_diagnose_reads_the_logs_target_columns_without_a_matrix(backend, monkeypatch):
    if backend == "numba":
        _need_numba()
    import pyarrow as pa

    import ope
    from ope.policies import join

    p, t, r = _planted(3001, 8)
    t = t[:, :5]  # probabilities in [0, 1] (the sixth column's weights are planted as such)
    columns = {"action": np.arange(p.size) % 3, "propensity": p, "reward": r}
    columns.update({f"target__c{j}": t[:, j].copy() for j in range(t.shape[1])})
    logs = ope.read_logs(pa.table(columns))
    kwargs = {"max_weight": 4.0, "reward_range": (0.0, 1.0)}
    _kernel.set_backend(backend)
    built = []
    monkeypatch.setattr(join, "_target_matrix", lambda *a: built.append(a) or np.empty(0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OverlapWarning)
        d = ope.diagnose(logs, **kwargs)
        stats = ope.evaluate(logs, estimators=("clipped_ips",), max_weight=4.0).statistics
        reused = ope.diagnose(logs, statistics=stats, **kwargs)
    assert not built  # no (n, P) matrix was formed
    targets = d._data.targets
    assert isinstance(targets, list)
    assert all(np.shares_memory(c, logs.column(f"target__c{j}")) for j, c in enumerate(targets))
    monkeypatch.undo()
    names = [f"c{j}" for j in range(t.shape[1])]
    want = _frames(backend, r, p, t, policy_names=names, action=columns["action"], **kwargs)
    for got in (d, reused):
        frames = [got.table(), *(got.clip_profile(name) for name in names)]
        for a, b in zip(frames, want):
            pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-12, atol=1e-12)
        quantile_columns = [
            c for c in frames[0].columns if c.startswith("weight_q") or c == "weight_max"
        ]
        assert quantile_columns  # the exact ones: equal, not close
        pd.testing.assert_frame_equal(frames[0][quantile_columns], want[0][quantile_columns])


def test_rows_a_reader_validated_are_not_checked_again(monkeypatch):
    import pyarrow as pa

    import ope
    from ope.diagnostics import _inputs
    from ope.logs import BanditLogs, ValidationReport

    n = 400
    table = pa.table(
        {
            "action": np.arange(n) % 2,
            "propensity": np.full(n, 0.5),
            "reward": np.tile([1.0, 0.0], n // 2),
            "target__a": np.tile([1.0, 0.0], n // 2),
        }
    )
    checked = []
    original = _inputs.check_logging_propensity
    monkeypatch.setattr(
        _inputs, "check_logging_propensity", lambda p: checked.append(p) or original(p)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OverlapWarning)
        ope.diagnose(ope.read_logs(table), reward_range=(0.0, 1.0))
        assert not checked  # the reader's rules hold: no second check
        unchecked = BanditLogs(table, ValidationReport("<Table>", n, n))  # not from a reader
        ope.diagnose(unchecked, reward_range=(0.0, 1.0))
        assert len(checked) == 1
        bad = table.set_column(1, "propensity", pa.array(np.zeros(n)))
        with pytest.raises(ValidationError, match="logging_propensity"):
            ope.diagnose(BanditLogs(bad, ValidationReport("<Table>", n, n)))
        with pytest.raises(ValidationError, match="outside"):  # still checked against the range
            ope.diagnose(ope.read_logs(table), reward_range=(0.0, 0.5))


@pytest.mark.parametrize("size", [10, 5000, 60_000])
def test_compiled_selection_of_order_statistics_is_exact(size):
    """The compiled selection (one count by sub-bin, then a sort of each needed sub-bin) gives
    the exact order statistics of the values in the needed bins, passes over the values of
    other bins, and says when a rank lies past them."""
    _need_numba()
    loops = _pass_module._compiled()
    rng = np.random.default_rng(size)
    inner = 1.0 + rng.uniform(0.0, 0.125, size)  # one histogram bin: [1, 1.125)
    inner[: size // 3] = 1.0625  # a tie spanning many ranks
    inner[size // 3 : size // 3 + 2] = np.nextafter(1.0625, 2.0)
    inner[-1] = np.nextafter(1.125, 0.0)  # the bin's last value
    outside = np.concatenate([rng.uniform(0.5, 0.99, size), rng.uniform(1.2, 3.0, size)])
    values = rng.permutation(np.concatenate([inner, outside]))
    kept = values.copy()
    ranks = np.array(sorted({0, 1, size // 3 - 1, size // 3, size // 3 + 1, size // 2, size - 1}))
    b = int(np.array([1.0]).view(np.int64)[0] >> _pass_module.HIST_SHIFT)
    out = np.empty(ranks.size)
    assert loops["_nb_select"](values, b, b + 1, ranks, out) == ranks.size
    np.testing.assert_array_equal(out, np.sort(inner)[ranks])
    np.testing.assert_array_equal(values, kept)  # the values are not moved
    past = np.append(ranks, size)  # one more rank than the bin holds values
    assert loops["_nb_select"](values, b, b + 1, past, np.empty(past.size)) == ranks.size
