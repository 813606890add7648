"""The single-pass kernel (ope._kernel): the compiled loops and the numpy fallback give the same
statistics; grouped accumulation equals the groups taken alone; merging is exact; the input
checks ride on the pass; the backend switch and a read-only install work."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from ope import _kernel
from ope.estimators import IPS, SNIPS, ClippedIPS, estimate_many, logging_value
from ope.exceptions import ParameterError
from ope.moments import centered_moments, grouped_moments
from ope.results import compare
from ope.streaming import MomentStats

needs_numba = pytest.mark.skipif(not _kernel.numba_available(), reason="numba is not installed")
ROOT = Path(__file__).resolve().parents[1]

#: The two backends sum in different orders and blocks: relative agreement of a few roundings.
RTOL = 1e-12


def _data(n=20_000, n_pol=4, seed=0):
    rng = np.random.default_rng(seed)
    r = rng.normal(3.0, 1.0, n)
    p = rng.uniform(0.05, 1.0, n)
    t = rng.uniform(0.0, 1.0, (n, n_pol))
    return r, p, t


def _real(m: _kernel.Moments, g: int = 0):
    """(means, co-moments) of group g in real units, about its shift."""
    ur = 2.0 ** m.r_exp[g]
    uw = 2.0 ** m.w_exp[g]
    mean = np.stack([m.mean[g, :, 0] * uw * ur, m.mean[g, :, 1] * uw], axis=1)
    c = m.com[g]
    com = np.stack(
        [
            c[:, 0] * (uw * ur) ** 2,
            c[:, 1] * uw * uw * ur,
            c[:, 2] * uw * uw,
            c[:, 3] * uw * ur * ur,
            c[:, 4] * uw * ur,
        ],
        axis=1,
    )
    return mean, com


def _about(m: _kernel.Moments, shift: float, g: int = 0):
    """:func:`_real` re-expressed about another shift of the rewards: with ``d`` the old shift
    minus the new, ``a = w (r - shift)`` becomes ``a + d b`` (``b = w``)."""
    mean, com = _real(m, g)
    d = m.shift[g] - shift
    mean = mean.copy()
    mean[:, 0] += d * mean[:, 1]
    caa, cab, cbb, car, cbr = (com[:, q] for q in range(5))
    com = np.stack([caa + 2 * d * cab + d * d * cbb, cab + d * cbb, cbb, car + d * cbr, cbr], 1)
    return mean, com


def _direct(r, p, t, max_weight, shift):
    """Means and centred sums aa, ab, bb, ar, br by plain numpy, about ``shift``."""
    w = t / p[:, None]
    out_m, out_c = [], []
    for s in (0, 1):
        ws = np.minimum(w, max_weight) if s else w
        a, b = ws * (r - shift)[:, None], ws
        da, db, dr = a - a.mean(0), b - b.mean(0), r - r.mean()
        out_m.append(np.stack([a.mean(0), b.mean(0)]))
        out_c.append(
            np.stack([(da * da).sum(0), (da * db).sum(0), (db * db).sum(0), da.T @ dr, db.T @ dr])
        )
    return np.stack(out_m), np.stack(out_c)


@pytest.fixture
def numpy_backend():
    _kernel.set_backend("numpy")
    yield
    _kernel.set_backend(None)


@pytest.mark.parametrize("backend", ["numba", "numpy"])
@pytest.mark.parametrize("max_weight", [None, 2.0])
def test_each_backend_equals_a_direct_two_pass_computation(backend, max_weight):
    if backend == "numba" and not _kernel.numba_available():
        pytest.skip("numba is not installed")
    r, p, t = _data()
    _kernel.set_backend(backend)
    try:
        m, checks = _kernel.accumulate(r, p, t, max_weight=max_weight)
    finally:
        _kernel.set_backend(None)
    mean, com = _real(m)
    ref_m, ref_c = _direct(r, p, t, max_weight if max_weight else np.inf, m.shift[0])
    np.testing.assert_allclose(mean, ref_m, rtol=RTOL, atol=1e-13)
    scale = np.abs(ref_c).max(axis=1, keepdims=True)
    assert np.max(np.abs(com - ref_c) / scale) < RTOL
    assert m.n[0] == r.size
    np.testing.assert_array_equal(m.max_w[0], (t / p[:, None]).max(0))
    expected_clip = 0 if max_weight is None else (t / p[:, None] > max_weight).sum(0)
    np.testing.assert_array_equal(m.n_clipped[0], expected_clip)
    assert checks.finite and checks.r_min == r.min() and checks.r_max == r.max()
    assert checks.p_min == p.min() and checks.p_max == p.max()
    np.testing.assert_array_equal(checks.t_min, t.min(0))
    np.testing.assert_array_equal(checks.t_max, t.max(0))


@needs_numba
@pytest.mark.parametrize("n", [100, 255, 2 * _kernel.BLOCK_ROWS + 300])
def test_row_major_matrix_gives_the_statistics_of_its_columns(n):
    # the compiled pass transposes a C-ordered (n, P) block tile by tile (partial tiles and
    # blocks included): the weights, hence every statistic, are those of the columns
    r, p, t = _data(n=n, n_pol=3, seed=4)
    _kernel.set_backend("numba")
    try:
        a = centered_moments(r, p, np.ascontiguousarray(t), max_weight=1.5)
        b = centered_moments(
            r, p, [np.ascontiguousarray(t[:, j]) for j in range(3)], max_weight=1.5
        )
    finally:
        _kernel.set_backend(None)
    for name in ("n", "shift", "w_exp", "mean", "com", "max_w", "n_clipped"):
        np.testing.assert_array_equal(getattr(a.raw, name), getattr(b.raw, name))


@needs_numba
@pytest.mark.parametrize("layout", ["matrix", "columns", "fortran", "float32"])
def test_numba_and_numpy_backends_agree_to_1e_12(layout):
    r, p, t = _data(n=50_000, n_pol=5, seed=1)
    target = {
        "matrix": t,
        "columns": [np.ascontiguousarray(t[:, j]) for j in range(t.shape[1])],
        "fortran": np.asfortranarray(t),
        "float32": t.astype(np.float32),
    }[layout]
    out = {}
    for backend in ("numba", "numpy"):
        _kernel.set_backend(backend)
        try:
            out[backend] = centered_moments(r, p, target, max_weight=1.5)
        finally:
            _kernel.set_backend(None)
    a, b = out["numba"], out["numpy"]
    assert a.shift == pytest.approx(b.shift, rel=1e-14)
    np.testing.assert_allclose(a.mean, b.mean, rtol=RTOL, atol=1e-14)
    scale = np.abs(b.comoment).max(axis=1, keepdims=True)
    assert np.max(np.abs(a.comoment - b.comoment) / scale) < RTOL
    np.testing.assert_array_equal(a.max_w, b.max_w)
    np.testing.assert_array_equal(a.n_clipped, b.n_clipped)
    for j in range(5):
        for clipped in (False, True):
            for x, y in zip(
                a.product_mean_sd(j, clipped=clipped, about=0.0),
                b.product_mean_sd(j, clipped=clipped, about=0.0),
            ):
                assert x == pytest.approx(y, rel=RTOL)
            for x, y in zip(
                a.ratio_mean_sd(j, clipped=clipped), b.ratio_mean_sd(j, clipped=clipped)
            ):
                assert x == pytest.approx(y, rel=RTOL)
            assert a.paired_sd(j, kind="ratio", clipped=clipped) == pytest.approx(
                b.paired_sd(j, kind="ratio", clipped=clipped), rel=RTOL
            )


@needs_numba
@pytest.mark.parametrize(
    "case", ["plain", "tiny_propensities", "huge_rewards", "clipped", "clip_unused", "threads"]
)
def test_one_candidate_column_pass_equals_the_general_pass_and_numpy(case):
    # one candidate given as a column takes the fused single-candidate loops; as the first
    # column of a row-major (n, 2) matrix the general ones: the same statistics, checks and
    # units either way
    n = 3 * _kernel.PARALLEL_MIN_ROWS + 77 if case == "threads" else 2 * _kernel.BLOCK_ROWS + 300
    r, p, t = _data(n=n, n_pol=1, seed=11)
    t[::3, 0] = 0.0
    if case == "tiny_propensities":
        p[: n // 2] *= 1e-305  # the propensities' scaling (2**kp) in the first blocks only
        t[: n // 2, 0] *= 1e-305
    if case == "huge_rewards":
        r[n // 3 :] *= 1e300  # the rewards' scaling (2**-e_r) in the later blocks only
    max_weight = {"clipped": 2.0, "clip_unused": 1e6}.get(case)
    col = [np.ascontiguousarray(t[:, 0])]
    _kernel.set_threads(2 if case == "threads" else None)  # two ranges, merged, on any machine
    # (a process's first call loads the compiled pass on one thread: make it first)
    _kernel.accumulate(r[:100], p[:100], [col[0][:100]], max_weight=None)
    try:
        fused, fused_checks = _kernel.accumulate(r, p, col, max_weight=max_weight)
        general, general_checks = _kernel.accumulate(
            r, p, np.column_stack([t[:, 0], t[:, 0]]), max_weight=max_weight
        )
    finally:
        _kernel.set_threads(None)
    for field in ("finite", "r_min", "r_max", "p_min", "p_max"):
        assert getattr(fused_checks, field) == getattr(general_checks, field)
    for field in ("t_min", "t_max"):
        assert getattr(fused_checks, field)[0] == getattr(general_checks, field)[0]
    for field in ("n", "r_exp", "w_exp", "max_w", "n_clipped"):
        x, y = getattr(fused, field), getattr(general, field)
        if x.ndim > 1:
            y = y[..., :1]
        np.testing.assert_array_equal(x, y)
    # the one-read loop shifts the rewards by a block's first reward, the general loops by its
    # mean: the same statistics about any one shift
    ur = 2.0 ** fused.r_exp[0]
    assert fused.shift[0] + fused.r_mean[0] * ur == pytest.approx(
        general.shift[0] + general.r_mean[0] * ur, rel=RTOL
    )
    np.testing.assert_allclose(fused.r_m2, general.r_m2, rtol=RTOL)
    if fused.shift[0] == general.shift[0]:  # the scaled blocks (both two-pass): stored units
        pairs = [(fused.mean, general.mean[..., :1]), (fused.com, general.com[..., :1])]
    else:  # in real units about the general pass's shift
        pairs = [(x, y[..., :1]) for x, y in zip(_about(fused, general.shift[0]), _real(general))]
    for x, y in pairs:
        np.testing.assert_allclose(x, y, rtol=RTOL, atol=1e-15 * np.abs(y).max())
    moments = {"fused": centered_moments(r, p, col, max_weight=max_weight)}
    _kernel.set_backend("numpy")
    try:
        moments["numpy"] = centered_moments(r, p, col, max_weight=max_weight)
    finally:
        _kernel.set_backend(None)
    a, b = moments["fused"], moments["numpy"]
    np.testing.assert_array_equal(a.max_w, b.max_w)
    np.testing.assert_array_equal(a.n_clipped, b.n_clipped)
    for clipped in (False, True):
        for x, y in zip(
            a.product_mean_sd(0, clipped=clipped, about=0.0),
            b.product_mean_sd(0, clipped=clipped, about=0.0),
        ):
            assert x == pytest.approx(y, rel=RTOL)
        for x, y in zip(a.ratio_mean_sd(0, clipped=clipped), b.ratio_mean_sd(0, clipped=clipped)):
            assert x == pytest.approx(y, rel=RTOL)
    assert (a.n_clipped.sum() > 0) == (case == "clipped")


@needs_numba
@pytest.mark.parametrize(
    "case",
    ["first_reward_far", "first_weight_far", "rewards_equal", "weights_equal", "rewards_offset"],
)
def test_one_read_pass_keeps_the_accuracy_of_the_two_pass_loops(case):
    # one candidate without a clip level takes one read of each block, with sums about shifts
    # (its first row); a shift far from its block's mean would cancel digits, so that block is
    # redone by the two-pass loops: the statistics agree with numpy's to 1e-12 whatever the rows
    b = _kernel.BLOCK_ROWS
    n = 2 * b + 300
    rng = np.random.default_rng(5)
    r = rng.normal(5.0, 1e-3, n)
    p = rng.uniform(0.2, 0.8, n)
    t = rng.uniform(0.0, 1.0, n)
    if case == "first_reward_far":  # each block's first reward 1,000 sd away
        r[[0, b, 2 * b]] = [6.0, 4.0, 6.0]
    elif case == "first_weight_far":  # weights 1 +- 1e-6 but each block's first is 1,000
        p[:] = 0.5
        t[:] = 0.5 + rng.normal(0.0, 5e-7, n)
        p[[0, b, 2 * b]] = 1e-3
        t[[0, b, 2 * b]] = 1.0
    elif case == "rewards_equal":
        r[:] = 0.3
    elif case == "weights_equal":
        t[:] = 0.3
        p[:] = 1.0
    else:
        r = 1e9 + rng.normal(0.0, 1.0, n)
    moments = {"numba": centered_moments(r, p, [t], max_weight=None)}
    _kernel.set_backend("numpy")
    try:
        moments["numpy"] = centered_moments(r, p, [t], max_weight=None)
    finally:
        _kernel.set_backend(None)
    a, c = moments["numba"], moments["numpy"]
    np.testing.assert_array_equal(a.max_w, c.max_w)
    for about in (0.0, 5.0):
        for x, y in zip(
            a.product_mean_sd(0, clipped=False, about=about),
            c.product_mean_sd(0, clipped=False, about=about),
        ):
            assert x == pytest.approx(y, rel=RTOL, abs=1e-15)
    for x, y in zip(a.ratio_mean_sd(0, clipped=False), c.ratio_mean_sd(0, clipped=False)):
        assert x == pytest.approx(y, rel=RTOL, abs=1e-15)
    for x, y in zip(a.reward_mean_sd(), c.reward_mean_sd()):
        assert x == pytest.approx(y, rel=RTOL, abs=1e-15)
    for kind in ("product", "ratio"):
        assert a.paired_sd(0, kind=kind, clipped=False) == pytest.approx(
            c.paired_sd(0, kind=kind, clipped=False), rel=RTOL, abs=1e-15
        )
    _, var_w = a.weight_mean_var(0, clipped=False)
    assert var_w == pytest.approx(c.weight_mean_var(0, clipped=False)[1], rel=RTOL, abs=1e-15)


@needs_numba
@pytest.mark.parametrize("case", ["clip_binds", "first_clipped_far"])
def test_one_read_clipped_statistics_equal_an_exact_sum(case):
    # with a clip level the clipped sums come from a second loop over the block; a clipped
    # shift far from its mean (each block's first weight 1,000, clipped to 2, among weights
    # 0.5 +- 2e-6) takes the two-pass fallback for the clipped statistics alone
    import math

    b = _kernel.BLOCK_ROWS
    n = 2 * b + 300
    rng = np.random.default_rng(7)
    r = rng.normal(5.0, 1.0, n)
    if case == "clip_binds":
        p = rng.uniform(0.05, 0.8, n)
        t = rng.uniform(0.0, 1.0, n)
    else:
        p = np.full(n, 0.5)
        t = 0.25 + rng.normal(0.0, 1e-6, n)
        p[[0, b, 2 * b]] = 1e-3
        t[[0, b, 2 * b]] = 1.0
    m = centered_moments(r, p, [t], max_weight=2.0)
    w = np.minimum(t / p, 2.0)
    x = w * r
    mean = math.fsum(x) / n
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in x) / (n - 1))
    w_mean = math.fsum(w) / n
    w_var = math.fsum((v - w_mean) ** 2 for v in w) / (n - 1)
    got_mean, got_sd = m.product_mean_sd(0, clipped=True, about=0.0)
    assert got_mean == pytest.approx(mean, rel=RTOL) and got_sd == pytest.approx(sd, rel=RTOL)
    got_w_mean, got_w_var = m.weight_mean_var(0, clipped=True)
    assert got_w_mean == pytest.approx(w_mean, rel=RTOL)
    assert got_w_var == pytest.approx(w_var, rel=RTOL)
    assert m.n_clipped[0] == int((t / p > 2.0).sum()) > 0


def test_the_environment_variable_forces_the_numpy_fallback():
    code = (
        "import numpy as np, sys\n"
        "from ope import _kernel\n"
        "from ope.estimators import IPS\n"
        "assert _kernel.backend() == 'numpy', _kernel.backend()\n"
        "e = IPS().estimate(np.array([1.0, 0.0, 1.0]), np.full(3, 0.5), np.array([1.0, 0.5, 0.0]))\n"
        "print(repr(e.value), 'numba' in sys.modules)\n"
    )
    env = dict(os.environ, OPE_KERNEL="numpy")
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    value, imported = out.stdout.split()
    assert float(value) == pytest.approx((2.0 * 1.0 + 1.0 * 0.0 + 0.0) / 3)
    assert imported == "False"  # the fallback never imports numba


def test_set_backend_refuses_unknown_names():
    with pytest.raises(ParameterError, match=r"kernel backend must be 'numba', 'numpy' or None"):
        _kernel.set_backend("cuda")


@pytest.mark.parametrize("backend", ["numba", "numpy"])
def test_grouped_accumulation_equals_each_group_alone(backend):
    if backend == "numba" and not _kernel.numba_available():
        pytest.skip("numba is not installed")
    r, p, t = _data(n=9_000, n_pol=3, seed=2)
    rng = np.random.default_rng(5)
    codes = rng.integers(0, 7, r.size)
    codes[codes == 4] = 5  # group 4 is empty
    _kernel.set_backend(backend)
    try:
        groups, overall = grouped_moments(r, p, t, codes, 7, max_weight=1.2, chunk_size=1000)
        alone = [
            centered_moments(r[codes == g], p[codes == g], t[codes == g], max_weight=1.2)
            if (codes == g).any()
            else None
            for g in range(7)
        ]
        whole = centered_moments(r, p, t, max_weight=1.2)
    finally:
        _kernel.set_backend(None)
    assert groups[4] is None and alone[4] is None
    for g_mom, a_mom in zip(groups, alone):
        if a_mom is None:
            continue
        assert g_mom.n == a_mom.n
        for j in range(3):
            for clipped in (False, True):
                for x, y in zip(
                    g_mom.product_mean_sd(j, clipped=clipped, about=0.0),
                    a_mom.product_mean_sd(j, clipped=clipped, about=0.0),
                ):
                    assert x == pytest.approx(y, rel=RTOL)
                assert g_mom.weight_sums(j, clipped=clipped) == pytest.approx(
                    a_mom.weight_sums(j, clipped=clipped), rel=RTOL
                )
            assert g_mom.max_w[j] == a_mom.max_w[j]
            assert g_mom.n_clipped[j] == a_mom.n_clipped[j]
        assert g_mom.reward_mean_sd() == pytest.approx(a_mom.reward_mean_sd(), rel=RTOL)
    for j in range(3):
        assert overall.ratio_mean_sd(j, clipped=True) == pytest.approx(
            whole.ratio_mean_sd(j, clipped=True), rel=RTOL
        )
    assert overall.checks is not None and overall.checks.r_max == r.max()


# the planted weights average far from 1 (an overlap warning); the test compares the numbers
@pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning")
def test_merging_in_any_split_equals_the_whole():
    r, p, t = _data(n=6_000, n_pol=2, seed=3)
    r[:2000] += 1e6  # batches with very different shifts
    whole = MomentStats.from_arrays(r, p, t, max_weight=2.0)
    cuts = [0, 7, 2000, 2001, 4500, 6000]
    parts = [
        MomentStats.from_arrays(r[a:b], p[a:b], t[a:b], max_weight=2.0)
        for a, b in zip(cuts[:-1], cuts[1:])
    ]
    merged = MomentStats.merge_all(parts[::-1])
    for est in (IPS(), SNIPS(), ClippedIPS(max_weight=2.0)):
        for x, y in zip(merged.estimates(est), whole.estimates(est)):
            assert x.value == pytest.approx(y.value, rel=RTOL)
            assert x.std_error == pytest.approx(y.std_error, rel=1e-10)


def test_paired_standard_errors_from_the_cross_moments_equal_the_row_pairing():
    r, p, t = _data(n=5_000, n_pol=3, seed=4)
    r = (r > 3.0).astype(float)
    stats = MomentStats.from_arrays(r, p, t, max_weight=2.0)
    base = logging_value(r, reward_range=(0.0, 1.0))
    for est in (IPS(), SNIPS(), ClippedIPS(max_weight=2.0)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rows = estimate_many(
                est, reward=r, logging_propensity=p, target_propensity=t, reward_range=(0.0, 1.0)
            )
            pairs = stats.paired_with_logging(est, reward_range=(0.0, 1.0))
        for row_est, (diff, se) in zip(rows, pairs):
            d = compare(row_est, base)
            assert diff == pytest.approx(d.value, rel=1e-12, abs=1e-15)
            assert se == pytest.approx(d.std_error, rel=1e-10)


def test_on_policy_paired_difference_has_standard_error_zero():
    r = np.tile([0.0, 1.0, 0.5], 100)
    p = np.full(r.size, 0.25)
    stats = MomentStats.from_arrays(r, p, p)  # w = 1 on every row: SNIPS equals the mean reward
    ((diff, se),) = stats.paired_with_logging("snips")
    assert abs(diff) < 1e-15 and se == 0.0


@pytest.mark.parametrize(
    ("column", "row", "value"),
    [
        ("reward", 4000, math.nan),
        ("reward", 10, -math.inf),
        ("propensity", 3, math.inf),
        ("propensity", 4999, -0.5),
        ("target", 2500, -1e-300),
        ("target", 0, math.nan),
        ("target", 7, 1.0 + 1e-15),
    ],
)
@pytest.mark.parametrize("layout", ["matrix", "one_column"])
def test_checks_see_nan_signs_and_ranges_through_the_fast_loops(column, row, value, layout):
    r, p, t = _data(n=5000, n_pol=2, seed=6)
    {"reward": r, "propensity": p, "target": t[:, 1]}[column][row] = value
    target = np.ascontiguousarray(t) if layout == "matrix" else [np.ascontiguousarray(t[:, 1])]
    _, checks = _kernel.accumulate(r, p, target, max_weight=None)
    ok = (
        math.isfinite(checks.r_min)
        and math.isfinite(checks.r_max)
        and checks.finite
        and checks.p_min > 0
        and checks.p_max <= 1
        and bool((checks.t_min >= 0).all())
        and bool((checks.t_max <= 1).all())
    )
    assert not ok


def test_minus_zero_targets_pass_the_checks():
    r, p, t = _data(n=3000, n_pol=1, seed=7)
    t[10, 0] = -0.0
    _, checks = _kernel.accumulate(r, p, t, max_weight=None)
    assert checks.t_min[0] == 0.0 and checks.finite


@needs_numba
@pytest.mark.slow
def test_a_read_only_install_runs_without_a_writable_cache(tmp_path):
    # the package imported from a zip archive (nothing can be written next to its modules,
    # even by root), with the user cache directory under /dev/null (not creatable): numba has
    # no cache location, so the kernel compiles in memory and still runs
    import zipfile

    archive = tmp_path / "ope.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in (ROOT / "ope").rglob("*.py"):
            zf.write(path, path.relative_to(ROOT).as_posix())
    code = (
        "import numpy as np\n"
        "from ope import _kernel\n"
        "from ope.estimators import SNIPS\n"
        "assert _kernel.backend() == 'numba'\n"
        "e = SNIPS().estimate(np.array([1.0, 0.0, 1.0]), np.full(3, 0.5), "
        "np.array([1.0, 0.5, 0.0]))\n"
        "print(_kernel.__file__, repr(e.value))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "OPE_"))}
    env.update(
        HOME="/dev/null/home",
        XDG_CACHE_HOME="/dev/null/cache",
        PYTHONPATH=str(archive),
        PYTHONDONTWRITEBYTECODE="1",
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=str(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    where, value = out.stdout.split()[-2:]
    assert where.startswith(str(archive))
    assert float(value) == pytest.approx(2.0 / 3.0)


# ---------------------------------------------------------------- sampling weights
def _weighted_data(n=20_000, n_pol=4, seed=3):
    r, p, t = _data(n, n_pol, seed)
    s = 1.0 / (1.0 - np.random.default_rng(seed + 1).uniform(0.0, 0.9, n))
    return r, p, t, s


def _direct_weighted(r, p, t, s, max_weight, shift):
    """The kernel's sampling-weighted statistics by plain numpy, about ``shift``: the head
    (means of s and s (r - shift), centred ss, su, uu) and, raw then clipped, the means of
    a = s w (r - shift) and b = s w and the centred aa, ab, bb, a s, b s."""
    u, ds = s * (r - shift), s - s.mean()
    du = u - u.mean()
    head = np.array([s.mean(), u.mean(), ds @ ds, ds @ du, du @ du])
    w = t / p[:, None]
    means, coms = [], []
    for ws in (w, np.minimum(w, max_weight)):
        a, b = (s * (r - shift))[:, None] * ws, s[:, None] * ws
        da, db = a - a.mean(0), b - b.mean(0)
        means.append(np.stack([a.mean(0), b.mean(0)]))
        coms.append(
            np.stack([(da * da).sum(0), (da * db).sum(0), (db * db).sum(0), da.T @ ds, db.T @ ds])
        )
    return head, np.stack(means), np.stack(coms)


def _assert_weighted_close(wt, g, head, means, coms):
    """Within RTOL of the reference: means relative, co-moments relative to the root of the
    product of the two variances (the size of a centred cross sum)."""
    np.testing.assert_allclose(wt.head[g, :2], head[:2], rtol=RTOL)
    ss, uu = head[2], head[4]
    assert abs(wt.head[g, 2] - ss) <= RTOL * ss and abs(wt.head[g, 4] - uu) <= RTOL * uu
    assert abs(wt.head[g, 3] - head[3]) <= RTOL * math.sqrt(ss * uu)
    np.testing.assert_allclose(wt.mean[g], means, rtol=RTOL)
    got = wt.com[g]
    aa, bb = coms[:, 0], coms[:, 2]
    sizes = np.stack([aa, np.sqrt(aa * bb), bb, np.sqrt(aa * ss), np.sqrt(bb * ss)], axis=1)
    assert np.max(np.abs(got - coms) / sizes) < RTOL


@pytest.mark.parametrize("backend", ["numba", "numpy"])
@pytest.mark.parametrize("max_weight", [None, 2.0])
@pytest.mark.parametrize("grouped", [False, True])
def test_weighted_statistics_equal_a_direct_numpy_computation(backend, max_weight, grouped):
    if backend == "numba" and not _kernel.numba_available():
        pytest.skip("numba is not installed")
    r, p, t, s = _weighted_data()
    codes = np.random.default_rng(9).integers(0, 3, r.size) * 2  # groups 0, 2, 4 (1, 3 empty)
    kw = {"codes": codes, "n_groups": 5} if grouped else {}
    _kernel.set_backend(backend)
    try:
        m, checks = _kernel.accumulate(r, p, t, max_weight=max_weight, sampling_weight=s, **kw)
    finally:
        _kernel.set_backend(None)
    assert checks.finite and m.weighted is not None
    for g in range(m.n_groups):
        rows = codes == g if grouped else np.ones(r.size, dtype=bool)
        if not rows.any():
            assert m.n[g] == 0 and np.all(m.weighted.head[g] == 0.0)
            continue
        head, means, coms = _direct_weighted(
            r[rows],
            p[rows],
            t[rows],
            s[rows],
            np.inf if max_weight is None else max_weight,
            m.shift[g],
        )
        _assert_weighted_close(m.weighted, g, head, means, coms)
        np.testing.assert_array_equal(m.weighted.s_range[g], [s[rows].min(), s[rows].max()])


@needs_numba
@pytest.mark.parametrize("grouped", [False, True])
def test_weighted_statistics_of_numba_and_numpy_agree_to_1e_12(grouped):
    from ope.moments import WeightedMoments

    r, p, t, s = _weighted_data(n=50_000, n_pol=5, seed=4)
    codes = np.random.default_rng(2).integers(0, 3, r.size)
    kw = {"codes": codes, "n_groups": 3} if grouped else {}
    out = {}
    for backend in ("numba", "numpy"):
        _kernel.set_backend(backend)
        try:
            out[backend] = _kernel.accumulate(r, p, t, max_weight=1.5, sampling_weight=s, **kw)[0]
        finally:
            _kernel.set_backend(None)
    for g in range(out["numpy"].n_groups):
        a = WeightedMoments.from_kernel(out["numba"], g)
        b = WeightedMoments.from_kernel(out["numpy"], g).shifted(a.shift)  # one shift for both
        np.testing.assert_allclose(a.mean, b.mean, rtol=RTOL)
        # a centred cross sum's rounding is bounded by the root of the two centred squares
        # (Cauchy-Schwarz), not by its own size, which cancellation can make small
        diag = np.abs(np.diagonal(b.com, axis1=0, axis2=1)).T  # (6, P)
        scale = np.sqrt(diag[:, None, :] * diag[None, :, :])
        np.testing.assert_array_equal(np.isnan(a.com), np.isnan(b.com))
        gap = np.abs(a.com - b.com)[~np.isnan(b.com)]
        assert np.all(gap <= RTOL * scale[~np.isnan(b.com)]), gap.max()
        for kind in ("ips", "snips", "clipped_ips", "logging"):
            for j in range(5):
                for x, y in zip(a.estimate(kind, j), b.estimate(kind, j)):
                    assert x == pytest.approx(y, rel=RTOL)


@pytest.mark.parametrize("backend", ["numba", "numpy"])
def test_unit_sampling_weights_give_the_unweighted_statistics(backend):
    if backend == "numba" and not _kernel.numba_available():
        pytest.skip("numba is not installed")
    r, p, t = _data(seed=5)
    _kernel.set_backend(backend)
    try:
        m, _ = _kernel.accumulate(r, p, t, max_weight=2.0, sampling_weight=np.ones(r.size))
    finally:
        _kernel.set_backend(None)
    mean, com = _real(m)
    wt = m.weighted
    # s = 1: no spread of s (0 up to the compiled loops' rounding of sum / k)
    np.testing.assert_allclose(wt.head[0, [0, 2, 3]], [1.0, 0.0, 0.0], rtol=RTOL, atol=1e-12)
    assert wt.head[0, 1] == pytest.approx(m.r_mean[0] * 2.0 ** m.r_exp[0], abs=1e-12)
    np.testing.assert_allclose(wt.mean[0], mean, rtol=RTOL)
    np.testing.assert_allclose(wt.com[0, :, :3], com[:, :3], rtol=RTOL)
    scale = np.sqrt(com[:, [0, 2]] * r.size)  # size of a cross sum with s: none, s is constant
    assert np.all(np.abs(wt.com[0, :, 3:]) <= 1e-12 * scale)


@pytest.mark.parametrize("backend", ["numba", "numpy"])
def test_weighted_statistics_merge_in_any_split_to_the_whole(backend):
    if backend == "numba" and not _kernel.numba_available():
        pytest.skip("numba is not installed")
    from ope.moments import WeightedMoments

    r, p, t, s = _weighted_data(n=9_001, seed=6)
    _kernel.set_backend(backend)
    try:
        whole = WeightedMoments.from_kernel(
            _kernel.accumulate(r, p, t, max_weight=1.5, sampling_weight=s)[0]
        )
        parts = [
            _kernel.accumulate(r[a:b], p[a:b], t[a:b], max_weight=1.5, sampling_weight=s[a:b])[0]
            for a, b in ((0, 17), (17, 5000), (5000, 9001))
        ]
    finally:
        _kernel.set_backend(None)
    merged = WeightedMoments.from_kernel(_kernel.merge(_kernel.merge(parts[0], parts[1]), parts[2]))
    pairwise = WeightedMoments.from_kernel(parts[2]).merge(
        WeightedMoments.from_kernel(parts[0]).merge(WeightedMoments.from_kernel(parts[1]))
    )
    for other in (merged, pairwise):
        for kind in ("ips", "snips", "clipped_ips", "logging"):
            for j in range(4):
                for x, y in zip(other.estimate(kind, j), whole.estimate(kind, j)):
                    assert x == pytest.approx(y, rel=RTOL)
        np.testing.assert_array_equal(other.n_clipped, whole.n_clipped)
        assert (other.s_min, other.s_max, other.n) == (s.min(), s.max(), r.size)


@pytest.mark.parametrize("backend", ["numba", "numpy"])
def test_a_weighted_only_pass_skips_the_unweighted_moments_and_keeps_the_rest(backend):
    if backend == "numba" and not _kernel.numba_available():
        pytest.skip("numba is not installed")
    r, p, t, s = _weighted_data(seed=7)
    _kernel.set_backend(backend)
    try:
        full, c_full = _kernel.accumulate(r, p, t, max_weight=2.0, sampling_weight=s)
        only, c_only = _kernel.accumulate(r, p, t, max_weight=2.0, sampling_weight=s, plain=False)
    finally:
        _kernel.set_backend(None)
    assert np.isnan(only.mean).all() and np.isnan(only.com).all()
    for name in ("head", "mean", "com", "s_range"):
        np.testing.assert_array_equal(getattr(only.weighted, name), getattr(full.weighted, name))
    np.testing.assert_array_equal(only.max_w, full.max_w)
    np.testing.assert_array_equal(only.n_clipped, (t / p[:, None] > 2.0).sum(0)[None])
    assert c_only.finite and (c_only.r_min, c_only.r_max, c_only.p_min, c_only.p_max) == (
        c_full.r_min,
        c_full.r_max,
        c_full.p_min,
        c_full.p_max,
    )
    np.testing.assert_array_equal(c_only.t_max, c_full.t_max)
    # a NaN reward still shows: the pass is then not finite
    bad = r.copy()
    bad[123] = np.nan
    _kernel.set_backend(backend)
    try:
        assert not _kernel.accumulate(bad, p, t, max_weight=2.0, sampling_weight=s, plain=False)[
            1
        ].finite
    finally:
        _kernel.set_backend(None)


@needs_numba
def test_key_range_is_numpys_min_and_max_in_one_read():
    """The compiled range of a float64 array (``key_range``, which ``value_range`` uses once the
    kernel is loaded) equals numpy's min and max: infinities, subnormals, signed zeros (as
    numbers), and a NaN of either sign shows as a NaN end; other arrays are left to numpy."""
    from ope._validation import value_range

    _kernel.set_backend("numba")
    try:
        _kernel.accumulate(np.ones(3), np.ones(3), [np.ones(3)], max_weight=None)  # loaded
        rng = np.random.default_rng(0)
        nan_neg = np.array([1.0, np.copysign(np.nan, -1.0), 2.0])
        cases = [
            rng.normal(size=10_001),
            rng.normal(size=(300, 7)),
            np.array([0.0, -0.0, 0.0]),
            np.array([np.inf, -np.inf, 1.0]),
            np.array([5e-324, -5e-324, 1e308, -1e308]),
            np.array([1.0, np.nan]),
            nan_neg,
            np.array([7.5]),
        ]
        for arr in cases:
            found = _kernel.key_range(arr)
            assert found is not None
            want = float(np.min(arr)), float(np.max(arr))
            if math.isnan(want[0]):
                assert math.isnan(found[0]) or math.isnan(found[1])
                assert all(math.isnan(x) for x in value_range(arr))
            else:
                assert found == want  # == on floats: -0.0 == 0.0
                assert value_range(arr) == want
        for other in (np.ones(4, dtype=np.float32), np.asfortranarray(np.ones((3, 2))), np.ones(0)):
            assert _kernel.key_range(other) is None
        _kernel.set_backend("numpy")
        assert _kernel.key_range(np.ones(4)) is None
    finally:
        _kernel.set_backend(None)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_value_range_never_starts_or_ends_at_negative_zero(backend):
    """Which of -0.0 and 0.0 a min or max finds depends on the reading order (the compiled read
    of the order keys finds -0.0 below 0.0); ``value_range`` gives 0.0 either way, so no message
    shows a range from -0."""
    from ope._validation import value_range

    if backend == "numba" and not _kernel.numba_available():
        pytest.skip("numba is not installed (the optional extra 'fast')")
    _kernel.set_backend(backend)
    try:
        if backend == "numba":
            _kernel.accumulate(np.ones(3), np.ones(3), [np.ones(3)], max_weight=None)  # loaded
        for arr in (
            np.array([0.0, -0.0, 1.0]),
            np.array([-0.0, 0.0, 1.0]),
            np.array([-1.0, -0.0]),
            np.array([-0.0, -0.0]),
            np.array([[-0.0, 2.0], [0.5, 0.0]]),
        ):
            low, high = value_range(arr)
            assert (low, high) == (float(arr.min()), float(arr.max()))
            for end in (low, high):
                if end == 0.0:
                    assert math.copysign(1.0, end) == 1.0, (arr, low, high)
            assert "-0" not in f"[{low:g}, {high:g}]"
    finally:
        _kernel.set_backend(None)
