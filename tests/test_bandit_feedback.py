"""obp's bandit_feedback dict to and from BanditLogs."""

from __future__ import annotations

import numpy as np
import pytest

from ope.exceptions import ParameterError, ValidationError
from ope.importers import from_bandit_feedback, to_bandit_feedback


def _feedback(n=50, n_actions=4, len_list=3, seed=0):
    rng = np.random.default_rng(seed)
    dist = rng.dirichlet(np.ones(n_actions), size=(n, len_list)).transpose(0, 2, 1)
    return {
        "n_rounds": n,
        "n_actions": n_actions,
        "action": rng.integers(0, n_actions, n),
        "position": rng.integers(0, len_list, n),
        "reward": rng.integers(0, 2, n),
        "pscore": rng.uniform(0.05, 1.0, n),
        "context": rng.normal(size=(n, 3)),
        "action_context": rng.normal(size=(n_actions, 2)),
        "action_dist": dist,
    }


def test_round_trip_is_exact():
    bf = _feedback()
    logs = from_bandit_feedback(bf)
    back = to_bandit_feedback(logs)
    for key in ("n_rounds", "n_actions"):
        assert back[key] == bf[key]
    for key in ("action", "position", "reward", "pscore", "context", "action_context"):
        np.testing.assert_array_equal(back[key], bf[key])
    assert logs.column("event_id").tolist() == list(range(50))


def test_action_dist_gives_the_per_position_target():
    bf = _feedback()
    logs = from_bandit_feedback(bf, policy_name="bts")
    want = bf["action_dist"][np.arange(50), bf["action"], bf["position"]]
    np.testing.assert_array_equal(logs.column("target__bts"), want)
    # without positions: slot 0
    bf.pop("position")
    logs = from_bandit_feedback(bf)
    np.testing.assert_array_equal(
        logs.column("target__candidate"), bf["action_dist"][np.arange(50), bf["action"], 0]
    )
    assert to_bandit_feedback(logs)["position"] is None


def test_bad_feedback_is_reported():
    bf = _feedback()
    with pytest.raises(ParameterError, match="lacks the key"):
        from_bandit_feedback({"action": bf["action"]})
    with pytest.raises(ParameterError, match="n_rounds"):
        from_bandit_feedback({**bf, "n_rounds": 49})
    with pytest.raises(ParameterError, match="shape"):
        from_bandit_feedback({**bf, "reward": bf["reward"][:10]})
    bad = {**bf, "pscore": np.where(np.arange(50) == 7, 0.0, bf["pscore"])}
    with pytest.raises(ValidationError, match=r"propensity_out_of_range: 1 \(rows 7\)"):
        from_bandit_feedback(bad)
    for key in ("action", "reward", "pscore"):  # present but None: named, not an AttributeError
        with pytest.raises(ParameterError, match=rf"bandit_feedback\['{key}'\] is None"):
            from_bandit_feedback({**bf, key: None})


def test_action_features_are_an_attribute_of_the_logs():
    bf = _feedback()
    logs = from_bandit_feedback(bf)
    assert logs.action_features.num_rows == bf["action_context"].shape[0]
    assert logs.n_actions == bf["n_actions"]
    bare = logs.with_action_features(None)
    assert bare.action_features is None and logs.action_features is not None
    assert bare.table is logs.table and bare.n_actions == logs.n_actions
    assert (
        from_bandit_feedback({k: v for k, v in bf.items() if k != "action_context"}).action_features
        is None
    )
