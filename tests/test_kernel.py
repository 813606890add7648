"""The single-pass kernel (ope._kernel): the compiled loops and the numpy fallback give the same
statistics; grouped accumulation equals the groups taken alone; merging is exact; the input
checks ride on the pass; the backend switch and a read-only install work."""

from __future__ import annotations

import math
import os
import shutil
import stat
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
    com = np.stack([c[:, 0] * (uw * ur) ** 2, c[:, 1] * uw * uw * ur, c[:, 2] * uw * uw,
                    c[:, 3] * uw * ur * ur, c[:, 4] * uw * ur], axis=1)
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
        out_c.append(np.stack([(da * da).sum(0), (da * db).sum(0), (db * db).sum(0),
                               da.T @ dr, db.T @ dr]))
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
            for x, y in zip(a.product_mean_sd(j, clipped=clipped, about=0.0),
                            b.product_mean_sd(j, clipped=clipped, about=0.0)):
                assert x == pytest.approx(y, rel=RTOL)
            for x, y in zip(a.ratio_mean_sd(j, clipped=clipped), b.ratio_mean_sd(j, clipped=clipped)):
                assert x == pytest.approx(y, rel=RTOL)
            assert a.paired_sd(j, kind="ratio", clipped=clipped) == pytest.approx(
                b.paired_sd(j, kind="ratio", clipped=clipped), rel=RTOL)


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
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=True)
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
        alone = [centered_moments(r[codes == g], p[codes == g], t[codes == g], max_weight=1.2)
                 if (codes == g).any() else None for g in range(7)]
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
                for x, y in zip(g_mom.product_mean_sd(j, clipped=clipped, about=0.0),
                                a_mom.product_mean_sd(j, clipped=clipped, about=0.0)):
                    assert x == pytest.approx(y, rel=RTOL)
                assert g_mom.weight_sums(j, clipped=clipped) == pytest.approx(
                    a_mom.weight_sums(j, clipped=clipped), rel=RTOL)
            assert g_mom.max_w[j] == a_mom.max_w[j]
            assert g_mom.n_clipped[j] == a_mom.n_clipped[j]
        assert g_mom.reward_mean_sd() == pytest.approx(a_mom.reward_mean_sd(), rel=RTOL)
    for j in range(3):
        assert overall.ratio_mean_sd(j, clipped=True) == pytest.approx(
            whole.ratio_mean_sd(j, clipped=True), rel=RTOL)
    assert overall.checks is not None and overall.checks.r_max == r.max()


def test_merging_in_any_split_equals_the_whole():
    r, p, t = _data(n=6_000, n_pol=2, seed=3)
    r[:2000] += 1e6  # batches with very different shifts
    whole = MomentStats.from_arrays(r, p, t, max_weight=2.0)
    cuts = [0, 7, 2000, 2001, 4500, 6000]
    parts = [MomentStats.from_arrays(r[a:b], p[a:b], t[a:b], max_weight=2.0)
             for a, b in zip(cuts[:-1], cuts[1:])]
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
            rows = estimate_many(est, reward=r, logging_propensity=p, target_propensity=t,
                                 reward_range=(0.0, 1.0))
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
    [("reward", 4000, math.nan), ("reward", 10, -math.inf), ("propensity", 3, math.inf),
     ("propensity", 4999, -0.5), ("target", 2500, -1e-300), ("target", 0, math.nan),
     ("target", 7, 1.0 + 1e-15)],
)
def test_checks_see_nan_signs_and_ranges_through_the_fast_loops(column, row, value):
    r, p, t = _data(n=5000, n_pol=2, seed=6)
    {"reward": r, "propensity": p, "target": t[:, 1]}[column][row] = value
    _, checks = _kernel.accumulate(r, p, np.ascontiguousarray(t), max_weight=None)
    ok = (math.isfinite(checks.r_min) and math.isfinite(checks.r_max) and checks.finite
          and checks.p_min > 0 and checks.p_max <= 1 and bool((checks.t_min >= 0).all())
          and bool((checks.t_max <= 1).all()))
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
    env.update(HOME="/dev/null/home", XDG_CACHE_HOME="/dev/null/cache",
               PYTHONPATH=str(archive), PYTHONDONTWRITEBYTECODE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=str(tmp_path),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    where, value = out.stdout.split()[-2:]
    assert where.startswith(str(archive))
    assert float(value) == pytest.approx(2.0 / 3.0)
