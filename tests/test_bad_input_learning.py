"""Hostile input to the learners and the gate (extreme numbers, wrong types and shapes): every case
ends in a checked finite result or a specific error, pinned to its type and message."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from ope.exceptions import (
    EstimationError,
    ParameterError,
    SchemaError,
    SmallSampleWarning,
    ValidationError,
)
from ope.learning import (
    ConservativePolicyLearner,
    DirectMethodPolicyLearner,
    IPSPolicyLearner,
    certify,
    learn_from_logs,
)


def two_arms(seed: int = 0, n: int = 400, d: int = 3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    action = rng.integers(0, 2, size=n)
    reward = (rng.uniform(size=n) < np.where(action == (X[:, 0] > 0), 0.8, 0.2)) * 1.0
    return X, action, reward, np.full(n, 0.5)


# ------------------------------------------------------------------------------------------
# large finite features: standardized in units of a power of two, so the fit is finite and
# the same as on ordinary features
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("power", [1000, -1000])
def test_features_scaled_by_a_power_of_two_near_the_float64_limits_give_the_same_policy(power):
    X, a, r, p = two_arms()
    Xb = X.copy()
    Xb[:, 0] *= 2.0**power  # |x| up to about 4e301 (or 4e-301): still finite
    base = ConservativePolicyLearner().fit(X, a, r, p)
    big = ConservativePolicyLearner().fit(Xb, a, r, p)
    np.testing.assert_allclose(big.predict_proba(Xb), base.predict_proba(X), rtol=0, atol=1e-12)
    assert big.value_lower_bound_ == pytest.approx(base.value_lower_bound_, abs=1e-12)


def test_features_of_1e308_give_finite_probabilities_that_follow_the_feature():
    X, a, r, p = two_arms(1)
    X[:, 0] = np.where(X[:, 0] > 0, 1e308, -1e308)  # the sign is the information
    learner = ConservativePolicyLearner().fit(X, a, r, p)
    proba = learner.predict_proba(X)
    assert np.isfinite(proba).all() and np.isfinite(learner.value_lower_bound_)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-12)
    # action 1 pays when x0 > 0: the learned policy prefers it exactly there
    assert (proba[X[:, 0] > 0, 1] > 0.5).all() and (proba[X[:, 0] < 0, 1] < 0.5).all()


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_features_name_their_column_and_row(bad):
    X, a, r, p = two_arms()
    X[7, 2] = bad
    with pytest.raises(
        ValidationError,
        match=r"`X` must be finite \(no NaN or inf\): feature "
        r"column 2 has 1 NaN or infinite values \(first at row 7: ",
    ):
        ConservativePolicyLearner().fit(X, a, r, p)
    learner = ConservativePolicyLearner().fit(two_arms()[0], a, r, p)
    with pytest.raises(
        ValidationError,
        match=r"feature column 2 has 1 NaN or infinite values "
        r"\(first at row 7",
    ):
        learner.predict_proba(X)


def test_action_features_of_1e308_are_standardized_too():
    X, a, r, p = two_arms(2)
    F = np.array([[1.0, -2.0], [3.0, 0.5]])
    base = IPSPolicyLearner().fit(X, a, r, p, action_features=F)
    huge = IPSPolicyLearner().fit(X, a, r, p, action_features=F * 2.0**1020)  # up to 3e307
    np.testing.assert_allclose(huge.predict_proba(X), base.predict_proba(X), atol=1e-12)


def test_non_finite_action_features_name_the_column_and_action():
    X, a, r, p = two_arms()
    F = np.array([[1.0, 2.0], [np.nan, 0.5]])
    with pytest.raises(
        ValidationError,
        match=r"`action_features` must be finite: feature column "
        r"0 of action 1 is nan \(1 entries are NaN or infinite\)",
    ):
        ConservativePolicyLearner().fit(X, a, r, p, action_features=F)
    table = pa.table({"action": [0, 1], "f": [1.0, float("inf")]})
    with pytest.raises(ValidationError, match=r"action feature features must be finite"):
        ConservativePolicyLearner().fit(X, a, r, p, action_features=table)


def test_an_action_feature_table_must_cover_every_action():
    X, a, r, p = two_arms()
    with pytest.raises(
        SchemaError,
        match=r"action_features has no row for 1 action\(s\) logged "
        r"or among the candidates \(e\.g\. 1\)",
    ):
        ConservativePolicyLearner().fit(
            X, a, r, p, action_features=pa.table({"action": [0], "f": [1.0]})
        )
    with pytest.raises(SchemaError, match=r"action_features has no `action` column"):
        ConservativePolicyLearner().fit(X, a, r, p, action_features=pa.table({"f": [1.0, 2.0]}))


# ------------------------------------------------------------------------------------------
# tiny fits: a lower bound never leaves the reward range
# ------------------------------------------------------------------------------------------
def test_a_one_row_fit_reports_the_bottom_of_the_range_as_its_lower_bound():
    """The issue's case: rewards in (0, 1), one row with p = 0.25 and reward 0.5. The clipped
    estimate is 0.5 * 4 = 2.0; with one row there is no standard error, so the only bound the
    data support is the bottom of the range (it was reported as 2.0)."""
    with pytest.warns(
        SmallSampleWarning,
        match=r"fitted on 1 row\(s\): fewer than 2 rows give no "
        r"standard error",
    ):
        learner = ConservativePolicyLearner().fit(np.array([[0.3, 1.0]]), [1], [0.5], [0.25])
    assert learner.value_estimate_ == pytest.approx(2.0)
    assert learner.value_std_error_ == np.inf
    assert learner.value_lower_bound_ == 0.0


def test_rows_with_equal_clipped_terms_above_the_range_give_a_bound_at_its_top():
    # two rows, both paid 1 at p = 0.25: u_i = 4 and 4, no spread, "bound" 4 for rewards in [0, 1]
    learner = ConservativePolicyLearner().fit(
        np.array([[1.0], [2.0]]), [0, 0], [1.0, 1.0], [0.25, 0.25], candidates=[[0, 1], [0, 1]]
    )
    assert learner.value_estimate_ == pytest.approx(4.0, rel=1e-6)
    assert learner.value_std_error_ == 0.0
    assert learner.value_lower_bound_ == 1.0


def test_the_gate_bound_never_exceeds_the_top_of_the_range():
    # three rows with the same clipped term 3 (> high = 1): the t bound of their mean was 3
    with pytest.warns(SmallSampleWarning, match=r"rests on 3 effective rows \(< 30\)"):
        cert = certify(
            np.ones(3),
            None,
            np.zeros(3, dtype=int),
            np.ones(3),
            np.full(3, 1 / 3),
            reward_range=(0.0, 1.0),
            max_weight=3.0,
            ci="t",
        )
    assert cert.value == pytest.approx(3.0)
    assert cert.lower_bound == 1.0
    assert cert.improvement_lower_bound == 1.0
    # a degenerate t bound on three rows is no approval, and the estimate above the range is
    # read as noise
    assert cert.verdict == "reject" and "the gate does not approve on it" in cert.reason
    assert any("lies above the top of reward_range (1)" in note for note in cert.notes)


def test_the_gate_on_a_reward_range_near_the_float64_limit_is_the_unit_gate_scaled():
    # its squares of rewards overflowed ("overflow encountered in square", an error here)
    X, a, r, p = two_arms(3)
    pe = (a == 1) * 1.0
    low, high = -1e300, 1e300
    for ci in ("betting", "bernstein", "t"):
        unit = certify(pe, None, a, r, p, reward_range=(0, 1), max_weight=2.0, ci=ci)
        huge = certify(
            pe, None, a, low + r * 2e300, p, reward_range=(low, high), max_weight=2.0, ci=ci
        )
        assert np.isfinite([huge.value, huge.lower_bound, huge.improvement_lower_bound]).all()
        assert huge.value == pytest.approx(low + 2e300 * unit.value, rel=1e-9)
        assert huge.lower_bound == pytest.approx(low + 2e300 * unit.lower_bound, rel=1e-9)
        assert huge.improvement_lower_bound == pytest.approx(
            2e300 * unit.improvement_lower_bound, rel=1e-9
        )
        assert huge.verdict == unit.verdict


def test_certifying_a_learner_without_contexts_is_a_parameter_error():
    X, a, r, p = two_arms(4)
    learner = ConservativePolicyLearner().fit(X[:200], a[:200], r[:200], p[:200])
    with pytest.raises(
        ParameterError,
        match=r"`X` is None, but `policy` \(ConservativePolicyLearner\) computes its "
        r"probabilities from the contexts: pass the certification rows' contexts as X",
    ):
        certify(learner, None, a[200:], r[200:], p[200:], reward_range=(0, 1))


def test_learn_from_logs_says_how_to_widen_the_learners_reward_range():
    import ope

    X, a, r, p = two_arms(5)
    logs = ope.read_logs(pa.table({"x": X[:, 0], "action": a, "reward": 5.0 * r, "propensity": p}))
    with pytest.raises(
        ValidationError,
        match=r"rows outside reward_range=\(0, 1\).*learn_from_logs takes reward_range from "
        r"its learner .* pass learner=ConservativePolicyLearner\(reward_range=\(low, high\)\)",
    ):
        learn_from_logs(logs, context_columns="x", rng=0)
    _, cert = learn_from_logs(
        logs, context_columns="x", learner=ConservativePolicyLearner(reward_range=(0, 5)), rng=0
    )
    assert cert.reward_range == (0.0, 5.0)


def test_a_reward_range_near_the_float64_limit_gives_finite_values_inside_it():
    X, a, r, p = two_arms(3)
    low, high = -1e300, 1e300
    learner = ConservativePolicyLearner(reward_range=(low, high)).fit(X, a, low + r * 2e300, p)
    unit = ConservativePolicyLearner().fit(X, a, r, p)
    assert np.isfinite([learner.value_estimate_, learner.value_std_error_]).all()
    assert low <= learner.value_lower_bound_ <= high
    # the translated problem is the unit one: values scale by the width
    assert learner.value_estimate_ == pytest.approx(low + 2e300 * unit.value_estimate_, rel=1e-9)


def test_weights_too_large_to_optimize_raise_a_specific_error():
    X, a, r, p = two_arms(4)
    p = p.copy()
    p[:3] = 1e-300  # unclipped weights up to 1e300
    with pytest.raises(
        EstimationError,
        match=r"the policy optimizer diverged .* smallest "
        r"propensity is 1e-300, at row 0\) or the penalties .* Clip the weights",
    ):
        IPSPolicyLearner().fit(X, a, r, p)
    # clipped (the conservative default), the same rows give a finite, bounded policy
    learner = ConservativePolicyLearner().fit(X, a, r, p)
    assert np.isfinite(learner.predict_proba(X)).all()
    assert 0.0 <= learner.value_lower_bound_ <= 1.0


# ------------------------------------------------------------------------------------------
# candidate sets and settings
# ------------------------------------------------------------------------------------------
def test_a_candidate_listed_twice_is_refused_with_its_rows():
    X, a, r, p = two_arms(n=6)
    cands = [[0, 1], [0, 0, 1], [1, 0], [0, 1], [1, 1], [0, 1]]
    with pytest.raises(
        ValidationError,
        match=r"`candidates` list the same action twice in 2 rows "
        r"\(first at rows 1, 4\)",
    ):
        ConservativePolicyLearner().fit(X, a, r, p, candidates=cands)


@pytest.mark.parametrize("cands", ["\udcff", [["\udcff"]] * 6])
def test_a_candidate_label_arrow_cannot_encode_is_a_validation_error(cands):
    # a lone surrogate (as os.fsdecode gives for undecodable bytes) is no UTF-8 string
    X, a, r, p = two_arms(n=6)
    with pytest.raises(ValidationError, match=r"`candidates` must be one list of action labels"):
        ConservativePolicyLearner().fit(X, a, r, p, candidates=cands)


def test_action_model_settings_are_checked():
    X, a, r, p = two_arms()
    with pytest.raises(
        ParameterError,
        match=r"action_model='features' scores actions through "
        r"their features: pass fit\(\.\.\., action_features=\.\.\.\)",
    ):
        ConservativePolicyLearner(action_model="features").fit(X, a, r, p)
    with pytest.raises(
        ParameterError,
        match=r"action_model='per_action' .* does not use "
        r"action_features",
    ):
        ConservativePolicyLearner(action_model="per_action").fit(
            X, a, r, p, action_features=np.eye(2)
        )
    with pytest.raises(
        ParameterError,
        match=r"action_model must be one of 'auto', "
        r"'per_action', 'features'; got 'items'",
    ):
        ConservativePolicyLearner(action_model="items").fit(X, a, r, p)
    with pytest.raises(ParameterError, match=r"rng must be an int seed"):
        ConservativePolicyLearner(select="validation", rng="7").fit(X, a, r, p)


def test_the_direct_method_on_candidates_never_logged_picks_a_candidate():
    X, a, r, p = two_arms(5)
    dm = DirectMethodPolicyLearner().fit(X, a, r, p, candidates=[[0, 1, 2]] * X.shape[0])
    proba = dm.predict_proba(X[:3], candidates=[[2], [1, 2], [0, 2]])
    assert proba[0].tolist() == [0.0, 0.0, 1.0]  # only the never-logged 2: it is taken
    assert proba[1, 2] == 0.0 and proba[2, 2] == 0.0 and np.allclose(proba.sum(axis=1), 1.0)
