"""The compiled pass on several threads: the same statistics as one thread, in every layout."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from ope import _kernel
from ope.exceptions import ParameterError

pytestmark = pytest.mark.skipif(
    _kernel.backend() != "numba",
    reason="the compiled pass is not in use (numba is not installed, or OPE_KERNEL=numpy)",
)

#: Threads change only the order in which block statistics merge.
RTOL = 1e-12

N = 40_000
BLOCK = 512


@pytest.fixture
def small_threshold(monkeypatch):
    """Split passes of a few thousand rows (the default needs 2**18), and restore the setting."""
    monkeypatch.setattr(_kernel, "PARALLEL_MIN_ROWS", 2048)
    yield
    _kernel.set_threads(None)


def _inputs(layout: str, seed: int = 0):
    rng = np.random.default_rng(seed)
    r = rng.normal(2.0, 1.0, N)
    p = rng.uniform(0.02, 1.0, N)
    t = rng.uniform(0.0, 1.0, (N, 3))
    target = np.ascontiguousarray(t) if layout == "matrix" else [t[:, j].copy() for j in range(3)]
    codes = rng.integers(0, 5, N)
    s = rng.uniform(1.0, 10.0, N)
    return r, p, target, codes, s


def _pass(n_threads: int, layout: str, *, grouped: bool, weighted: bool, plain: bool = True):
    r, p, target, codes, s = _inputs(layout)
    _kernel.set_threads(n_threads)
    return _kernel.accumulate(
        r,
        p,
        target,
        max_weight=3.0,
        codes=codes if grouped else None,
        n_groups=5,
        block_rows=BLOCK,
        sampling_weight=s if weighted else None,
        plain=plain,
    )


def _real(m: _kernel.Moments):
    """Means and co-moments in real units (threads may pick other power-of-two units)."""
    ur = np.ldexp(1.0, m.r_exp.astype(np.int64))[:, None, None]
    uw = np.ldexp(1.0, m.w_exp.astype(np.int64))  # (G, 2, P)
    mean_a = m.mean[:, :, 0] * uw * ur
    mean_b = m.mean[:, :, 1] * uw
    c = m.com
    com = np.stack(
        [
            c[:, :, 0] * (uw * ur) ** 2,
            c[:, :, 1] * uw * uw * ur,
            c[:, :, 2] * uw * uw,
            c[:, :, 3] * uw * ur * ur,
            c[:, :, 4] * uw * ur,
        ],
        axis=2,
    )
    return np.stack([mean_a, mean_b], axis=2), com


def _close(a: np.ndarray, b: np.ndarray) -> None:
    scale = np.maximum(np.abs(b), 1e-300)
    assert np.nanmax(np.abs(a - b) / np.maximum(scale, np.nanmax(np.abs(b)) * 1e-12)) < RTOL


@pytest.mark.parametrize("layout", ["columns", "matrix"])
@pytest.mark.parametrize("grouped", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_two_and_three_threads_equal_one(small_threshold, layout, grouped, weighted):
    one, c1 = _pass(1, layout, grouped=grouped, weighted=weighted)
    for n_threads in (2, 3):
        many, cn = _pass(n_threads, layout, grouped=grouped, weighted=weighted)
        np.testing.assert_array_equal(many.n, one.n)
        np.testing.assert_array_equal(many.shift, one.shift)  # the first range's shift
        np.testing.assert_array_equal(many.max_w, one.max_w)
        np.testing.assert_array_equal(many.n_clipped, one.n_clipped)
        for x, y in zip(_real(many), _real(one), strict=True):
            _close(x, y)
        np.testing.assert_allclose(many.r_mean * 2.0**many.r_exp, one.r_mean * 2.0**one.r_exp)
        _close(many.r_m2 * 4.0**many.r_exp, one.r_m2 * 4.0**one.r_exp)
        if weighted:
            assert many.weighted is not None and one.weighted is not None
            _close(many.weighted.head, one.weighted.head)
            _close(many.weighted.mean, one.weighted.mean)
            _close(many.weighted.com, one.weighted.com)
            np.testing.assert_array_equal(many.weighted.s_range, one.weighted.s_range)
        # the input ranges are exact minima and maxima
        assert (cn.finite, cn.r_min, cn.r_max, cn.p_min, cn.p_max) == (
            c1.finite,
            c1.r_min,
            c1.r_max,
            c1.p_min,
            c1.p_max,
        )
        np.testing.assert_array_equal(cn.t_min, c1.t_min)
        np.testing.assert_array_equal(cn.t_max, c1.t_max)


def test_a_weighted_only_pass_splits_too(small_threshold):
    one, _ = _pass(1, "columns", grouped=False, weighted=True, plain=False)
    two, _ = _pass(2, "columns", grouped=False, weighted=True, plain=False)
    assert np.isnan(two.mean).all() and np.isnan(two.com).all()
    assert two.weighted is not None and one.weighted is not None
    _close(two.weighted.com, one.weighted.com)
    np.testing.assert_array_equal(two.max_w, one.max_w)


def test_the_ranges_are_whole_blocks_in_row_order():
    ranges = _kernel.row_ranges(10_000, 512, 3)
    assert ranges[0][0] == 0 and ranges[-1][1] == 10_000
    assert all(a[1] == b[0] for a, b in zip(ranges[:-1], ranges[1:], strict=True))
    assert all(lo % 512 == 0 for lo, _ in ranges)
    assert _kernel.row_ranges(1_000, 512, 8) == [
        (0, 512),
        (512, 1_000),
    ]  # no more ranges than blocks


def test_the_checks_see_a_bad_row_in_any_range(small_threshold):
    r, p, target, _, _ = _inputs("columns")
    r[-1] = np.nan  # in the last thread's range
    p[N // 2] = 0.0
    _kernel.set_threads(2)
    _, checks = _kernel.accumulate(r, p, target, max_weight=None, block_rows=BLOCK)
    assert not checks.finite
    assert checks.p_min == 0.0


def test_calls_from_another_thread_run_on_one(small_threshold, monkeypatch):
    _kernel.set_threads(2)
    r, p, target, _, _ = _inputs("columns")
    # the first call of a process loads the compiled pass on one thread: make it before counting
    _kernel.accumulate(r, p, target, max_weight=None, block_rows=BLOCK)
    seen = []
    real = _kernel.run_threads
    monkeypatch.setattr(
        _kernel, "run_threads", lambda run, ranges: seen.append(len(ranges)) or real(run, ranges)
    )
    _kernel.accumulate(r, p, target, max_weight=None, block_rows=BLOCK)
    assert seen == [2]
    worker = threading.Thread(
        target=_kernel.accumulate,
        args=(r, p, target),
        kwargs={"max_weight": None, "block_rows": BLOCK},
    )
    worker.start()
    worker.join()
    assert seen == [2]  # the worker's pass did not split


def test_an_error_on_a_worker_thread_reaches_the_caller():
    def run(lo, hi):
        if lo:
            raise RuntimeError("boom on the second range")
        return lo

    with pytest.raises(RuntimeError, match="second range"):
        _kernel.run_threads(run, [(0, 1), (1, 2)])


def test_a_late_worker_leaves_its_ranges_to_the_caller():
    # every worker of the pool is held busy: the calling thread takes every range itself, in
    # order, and the call returns without waiting for them
    release = threading.Event()
    pool = _kernel._pool(1)
    blockers = [pool.submit(release.wait, 5) for _ in range(_kernel._POOL["size"])]
    try:
        ran_on = {}

        def run(lo, hi):
            ran_on[lo] = threading.get_ident()
            return (lo, hi)

        ranges = [(0, 3), (3, 5)]
        assert _kernel.run_threads(run, ranges) == ranges
        assert set(ran_on.values()) == {threading.get_ident()}
    finally:
        release.set()
        for blocker in blockers:
            blocker.result(timeout=30)


def test_ranges_run_once_each_whichever_thread_takes_them():
    calls = []
    lock = threading.Lock()

    def run(lo, hi):
        with lock:
            calls.append(lo)
        return lo * 10

    ranges = [(k, k + 1) for k in range(8)]
    for _ in range(50):  # many calls: workers and the caller race for the ranges
        calls.clear()
        assert _kernel.run_threads(run, ranges) == [k * 10 for k in range(8)]
        assert sorted(calls) == list(range(8))


def test_the_first_failing_range_is_raised_once_every_range_has_ended():
    ended = []

    def run(lo, hi):
        if lo in (1, 2):
            raise RuntimeError(f"range {lo}")
        ended.append(lo)
        return lo

    with pytest.raises(RuntimeError, match="range 1"):
        _kernel.run_threads(run, [(k, k + 1) for k in range(4)])
    assert sorted(ended) == [0, 3]


def test_an_interrupt_stops_the_caller_at_once_and_wins_over_errors():
    taken = []

    def run(lo, hi):
        taken.append(lo)
        if lo == 0:
            raise KeyboardInterrupt
        return lo

    release = threading.Event()
    # the pool run_threads asks for with six ranges (five workers), so that it starts no new,
    # idle, workers: every worker is kept busy, whatever the pool's size before
    pool = _kernel._pool(5)
    blockers = [pool.submit(release.wait, 5) for _ in range(_kernel._POOL["size"])]
    try:  # the caller takes range 0 first (the workers are busy) and stops there
        with pytest.raises(KeyboardInterrupt):
            _kernel.run_threads(run, [(k, k + 1) for k in range(6)])
        assert taken == [0]
    finally:
        release.set()
        for blocker in blockers:
            blocker.result(timeout=30)

    def run_both(lo, hi):  # a worker's interrupt is raised before an earlier range's error
        if lo == 0:
            raise RuntimeError("range 0")
        if lo == 1:
            raise KeyboardInterrupt
        return lo

    for _ in range(20):  # whichever thread runs range 1
        with pytest.raises(KeyboardInterrupt):
            _kernel.run_threads(run_both, [(0, 1), (1, 2)])


def test_the_thread_count_setting(monkeypatch):
    monkeypatch.setenv(_kernel.THREADS_ENV, "3")
    _kernel.set_threads(None)
    assert _kernel.threads() == 3
    _kernel.set_threads(1)
    try:
        assert _kernel.threads() == 1
    finally:
        _kernel.set_threads(None)
    monkeypatch.setenv(_kernel.THREADS_ENV, "zero")
    assert _kernel.threads() >= 1  # an unreadable value: the CPUs this process may use
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ParameterError, match="kernel threads must be a positive integer"):
            _kernel.set_threads(bad)  # type: ignore[arg-type]


def _split_pass_in_child(queue) -> None:  # runs in a forked child
    r, p, target, _, _ = _inputs("columns")
    _kernel.PARALLEL_MIN_ROWS = 2048  # the child's own module state
    _kernel.set_threads(2)
    m, _ = _kernel.accumulate(r, p, target, max_weight=None, block_rows=BLOCK)
    queue.put(float(m.n[0]))


# Python 3.12+ warns that forking a process with threads may deadlock: that is what is tested
@pytest.mark.filterwarnings("ignore:.*multi-threaded.*fork:DeprecationWarning")
def test_a_forked_child_starts_its_own_worker_threads(small_threshold):
    import multiprocessing

    _kernel.set_threads(2)
    r, p, target, _, _ = _inputs("columns")
    _kernel.accumulate(r, p, target, max_weight=None, block_rows=BLOCK)  # the parent's pool
    assert _kernel._POOL["pool"] is not None
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_split_pass_in_child, args=(queue,))
    child.start()
    child.join(timeout=120)
    assert child.exitcode == 0  # it did not hang on the parent's threads
    assert queue.get(timeout=5) == N
