"""Property tests (hypothesis): on-policy, permutation invariance, equivariance, ESS, merging."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from ope.estimators import DM, DR, IPS, SNDR, SNIPS, ClippedIPS, DRos, SwitchDR, logging_value
from ope.streaming import MomentStats
from ope.weights import MOMENT_KEYS

SETTINGS = settings(deadline=None, derandomize=True, database=None, max_examples=60)

pytestmark = pytest.mark.filterwarnings("ignore::ope.exceptions.OPEWarning")


@st.composite
def logs(draw, min_n=2, max_n=40):
    n = draw(st.integers(min_n, max_n))
    prob = st.floats(1e-3, 1.0, allow_nan=False)
    r = draw(arrays(np.float64, n, elements=st.floats(-5.0, 5.0, allow_nan=False)))
    p = draw(arrays(np.float64, n, elements=prob))
    t = draw(arrays(np.float64, n, elements=st.floats(0.0, 1.0, allow_nan=False)))
    t[0] = max(t[0], 0.5)  # at least one positive weight
    ql = draw(arrays(np.float64, n, elements=st.floats(-5.0, 5.0, allow_nan=False)))
    qt = draw(arrays(np.float64, n, elements=st.floats(-5.0, 5.0, allow_nan=False)))
    return r, p, t, ql, qt


def _run(est, r, p, t, ql, qt):
    if isinstance(est, DM):
        return est.estimate(r, q_target=qt)
    if isinstance(est, (IPS, SNIPS, ClippedIPS)):
        return est.estimate(r, p, t)
    return est.estimate(r, p, t, q_logged=ql, q_target=qt)


ALL = [
    IPS(),
    ClippedIPS(max_weight=3.0),
    SNIPS(),
    DM(),
    DR(),
    SNDR(),
    SwitchDR(tau=5.0),
    DRos(shrinkage=2.0),
]


@SETTINGS
@given(logs())
def test_on_policy_ips_and_snips_equal_the_mean_reward(data):
    r, p, _, _, _ = data
    mean = logging_value(r).value
    assert IPS().estimate(r, p, p).value == pytest.approx(mean, abs=1e-12)
    assert SNIPS().estimate(r, p, p).value == pytest.approx(mean, abs=1e-12)
    assert IPS().estimate(r, p, p).std_error == pytest.approx(logging_value(r).std_error, abs=1e-12)


@SETTINGS
@given(logs(), st.randoms(use_true_random=False))
def test_permutation_invariance(data, random):
    order = np.arange(len(data[0]))
    random.shuffle(order)
    shuffled = [a[order] for a in data]
    for est in ALL:
        a, b = _run(est, *data), _run(est, *shuffled)
        assert b.value == pytest.approx(a.value, rel=1e-9, abs=1e-9)
        assert b.std_error == pytest.approx(a.std_error, rel=1e-7, abs=1e-9)


@SETTINGS
@given(logs(), st.floats(0.1, 10.0), st.floats(-3.0, 3.0))
def test_affine_equivariance_where_it_holds(data, scale, shift):
    r, p, t, ql, qt = data
    moved = (scale * r + shift, p, t, scale * ql + shift, scale * qt + shift)
    for est in (SNIPS(), DM(), DR(), SNDR(), SwitchDR(tau=5.0), DRos(shrinkage=2.0)):
        a, b = _run(est, *data), _run(est, *moved)
        assert b.value == pytest.approx(scale * a.value + shift, rel=1e-9, abs=1e-8)
        assert b.std_error == pytest.approx(scale * a.std_error, rel=1e-7, abs=1e-8)
    # IPS (and clipped IPS): scaling only
    for est in (IPS(), ClippedIPS(max_weight=3.0)):
        a, b = _run(est, *data), _run(est, r * scale, p, t, ql, qt)
        assert b.value == pytest.approx(scale * a.value, rel=1e-9, abs=1e-9)


@SETTINGS
@given(logs())
def test_snips_is_bounded_and_ess_is_between_1_and_n(data):
    r, p, t, ql, qt = data
    sn = SNIPS().estimate(r, p, t)
    assert r.min() - 1e-9 <= sn.value <= r.max() + 1e-9
    for est in (IPS(), SNIPS(), ClippedIPS(max_weight=3.0)):
        ess = _run(est, *data).ess
        assert 1.0 - 1e-9 <= ess <= len(r) + 1e-9


@SETTINGS
@given(logs(min_n=3), st.data())
def test_merge_of_partial_statistics_equals_the_whole(data, draw):
    r, p, t, _, _ = data
    cut = draw.draw(st.integers(1, len(r) - 1))
    whole = MomentStats.from_arrays(r, p, t, max_weight=2.0)
    merged = MomentStats.from_arrays(r[:cut], p[:cut], t[:cut], max_weight=2.0).merge(
        MomentStats.from_arrays(r[cut:], p[cut:], t[cut:], max_weight=2.0)
    )
    # The raw sums are derived from centred moments about a shift c (|c| <= max |r|), so a sum
    # that is exactly 0 comes out within rounding of its terms, w^2 (|r| + |c|)^2, not within 1e-10.
    w = t / p
    atol = 1e-10 + 1e-13 * float(np.sum(w * w * (1.0 + 2.0 * np.abs(r).max()) ** 2))
    for key in MOMENT_KEYS:
        np.testing.assert_allclose(merged.moments[key], whole.moments[key], rtol=1e-10, atol=atol)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = merged.estimates("snips")[0]
        b = SNIPS().estimate(r, p, t)
    assert a.value == pytest.approx(b.value, rel=1e-9, abs=1e-9)
