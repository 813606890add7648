"""The slate simulator: exact truth by enumeration, samples consistent with the model."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ope.slates as S
from ope.exceptions import ParameterError
from ope.simulate import SlateEnvironment
from ope.simulate.slate import GREEDY_SCALE


def test_table_reads_back_to_the_same_logs():
    env = SlateEnvironment(click_model="cascade", seed=4)
    a = env.sample_logs(300, rng=5)
    b = S.slate_logs(env.sample(300, rng=5))
    for f in ("item", "reward", "propensity", "slate_propensity", "prefix_propensity", "context"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))


@pytest.mark.parametrize("click_model", ["additive", "cascade"])
def test_logging_value_and_click_rates_match_samples(click_model):
    env = SlateEnvironment(click_model=click_model, seed=1)
    logs = env.sample_logs(200_000, rng=0)
    total = logs.reward.sum(axis=1)
    se = total.std(ddof=1) / math.sqrt(logs.n)
    assert abs(total.mean() - env.true_value("logging")) < 4 * se
    p = env.click_probability(logs.context, logs.item)
    # per-slot clicks match the exact conditional means
    resid = (logs.reward - p).mean(axis=0)
    assert np.all(np.abs(resid) < 4 * np.sqrt(p * (1 - p)).mean(axis=0) / math.sqrt(logs.n))
    if click_model == "cascade":
        assert logs.reward.sum(axis=1).max() == 1.0  # at most one click per slate


def test_recorded_propensities_are_the_logger_frequencies():
    env = SlateEnvironment(seed=2)
    logs = env.sample_logs(100_000, rng=1)
    marg = env.policy("logging").marginals()
    c = logs.context == 0
    freq = np.stack([np.bincount(logs.item[c, k], minlength=env.n_items) for k in range(3)])
    freq = freq / c.sum()
    np.testing.assert_allclose(freq, marg[0], atol=4 * 0.5 / math.sqrt(c.sum()))
    np.testing.assert_allclose(
        logs.propensity, marg[logs.context[:, None], np.arange(3), logs.item]
    )


def test_true_value_is_the_enumerated_sum():
    env = SlateEnvironment(n_items=3, slate_size=2, n_contexts=1, click_model="cascade", seed=0)
    th = env.attraction[0]
    e = np.exp(GREEDY_SCALE * np.log(th / (1 - th)))
    want = 0.0
    for i in range(3):
        for j in range(3):
            if i != j:
                p = e[i] / e.sum() * e[j] / (e.sum() - e[i])
                want += p * (th[i] + (1 - th[i]) * th[j])
    assert env.true_value("greedy") == pytest.approx(want, abs=1e-14)


def test_bad_settings():
    with pytest.raises(ParameterError, match="exceeds"):
        SlateEnvironment(n_items=2, slate_size=3)
    with pytest.raises(ParameterError, match="click_model"):
        SlateEnvironment(click_model="dbn")
