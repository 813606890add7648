"""PairedReplaySimulator's cost and latency_ms outcomes: exact truth, Monte Carlo, paired_effect."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ope
from ope.exceptions import ParameterError, SmallSampleWarning
from ope.simulate import PairedReplaySimulator

T, C = "with_memory", "no_memory"
NEW = ("cost", "latency_ms")


def within(sample: np.ndarray, truth: float, z: float = 4.0) -> None:
    """The mean of ``sample`` is within ``z`` standard errors of ``truth``."""
    se = sample.std(ddof=1) / np.sqrt(sample.size)
    assert abs(sample.mean() - truth) < z * se, (sample.mean(), truth, se)


def test_exact_truth_is_the_sum_of_the_per_cell_means():
    env = PairedReplaySimulator(n_tasks=4, n_items=5, seed=2)
    k, j = np.meshgrid(np.arange(4), np.arange(5), indexing="ij")
    k, j = k.ravel(), j.ravel()
    weight = (env.task_probabilities[:, None] * env.item_probabilities[None, :]).ravel()
    for outcome in NEW:
        m1 = env.expected_outcome(k, j, np.ones(k.size, bool), outcome=outcome)
        m0 = env.expected_outcome(k, j, np.zeros(k.size, bool), outcome=outcome)
        assert np.ptp(m0.reshape(4, 5), axis=1).max() == 0.0  # control ignores the item
        assert env.true_value(T, outcome=outcome) == pytest.approx(weight @ m1, rel=1e-12)
        assert env.true_value(C, outcome=outcome) == pytest.approx(weight @ m0, rel=1e-12)
        effect = env.true_effect(outcome=outcome)
        assert effect == pytest.approx(
            env.true_value(T, outcome=outcome) - env.true_value(C, outcome=outcome), rel=1e-12
        )
        per_item = env.task_probabilities @ (m1 - m0).reshape(4, 5)
        np.testing.assert_allclose(env.true_item_effects(outcome=outcome), per_item, rtol=1e-12)
        assert env.true_effect(outcome=outcome, item=3) == pytest.approx(per_item[3], rel=1e-12)
    # cost = price x tokens + fee x tool calls: the token part of the cost is exact
    no_fee = PairedReplaySimulator(n_tasks=4, n_items=5, tool_fee=0.0, seed=2)
    assert no_fee.true_effect(outcome="cost") == pytest.approx(
        1e-5 * env.true_effect(outcome="tokens"), rel=1e-12
    )
    with pytest.raises(ParameterError, match="`outcome` must be one of .*'latency_ms'"):
        env.true_effect(outcome="latency")
    with pytest.raises(ParameterError, match=r"price_per_token must be in \[0.0"):
        PairedReplaySimulator(price_per_token=-1.0)


def test_rows_follow_the_documented_formulas():
    env = PairedReplaySimulator(n_replicates=2, tool_fee=0.0, latency_sd=0.0, seed=3)
    df = env.sample(200, rng=1, oracle=True).to_pandas()
    assert df.cost.dtype == df.latency_ms.dtype == np.float64
    np.testing.assert_array_equal(df.cost, 1e-5 * df.tokens)  # no fee: the token bill
    # no noise: latency = fixed time (task + item delay) + 5 ms per token, row by row
    np.testing.assert_allclose(
        df.latency_ms - 5.0 * df.tokens,
        df.expected_latency_ms - 5.0 * df.expected_tokens,
        rtol=1e-12,
    )
    treated = (df.arm == T).to_numpy()
    for outcome in NEW:
        np.testing.assert_allclose(
            df[f"expected_{outcome}"],
            env.expected_outcome(
                df.task_id.to_numpy(), df.item_id.to_numpy(), treated, outcome=outcome
            ),
        )


def test_exact_values_and_effects_match_monte_carlo():
    env = PairedReplaySimulator(n_tasks=6, n_items=8, n_replicates=3, seed=4)
    df = env.sample(30_000, rng=5, oracle=True).to_pandas()
    treated = (df.arm == T).to_numpy()
    sign = np.where(treated, 1.0, -1.0) / env.n_replicates
    top = int(np.argmax(env.item_probabilities))
    in_top = (df.item_id == top).to_numpy()[:: 2 * env.n_replicates]
    for outcome in NEW:
        y = df[outcome].to_numpy()
        within(y - df[f"expected_{outcome}"].to_numpy(), 0.0)  # noise of mean zero, per row
        diff = np.bincount(df.pair_id, weights=sign * y)  # one difference per pair
        within(diff, env.true_effect(outcome=outcome))
        within(diff[in_top], env.true_effect(outcome=outcome, item=top))
        for arm, rows in ((T, treated), (C, ~treated)):
            per_pair = np.bincount(df.pair_id[rows], weights=y[rows]) / env.n_replicates
            within(per_pair, env.true_value(arm, outcome=outcome))


def test_paired_effect_recovers_cost_and_latency_effects():
    env = PairedReplaySimulator(n_replicates=2, seed=6)
    truth = {o: env.true_effect(outcome=o) for o in NEW}
    z = {o: [] for o in NEW}
    covered = {o: 0 for o in NEW}
    reps = 8
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallSampleWarning)
        for s in range(reps):
            res = ope.paired_effect(
                env.sample(300, rng=100 + s), treated=T, control=C, outcomes="all"
            )
            table = res.table().set_index("outcome")
            assert set(NEW) <= set(table.index)
            for o in NEW:
                row = table.loc[o]
                z[o].append((row.value - truth[o]) / row.std_error)
                covered[o] += row.ci_low <= truth[o] <= row.ci_high
    for o in NEW:
        assert np.all(np.abs(z[o]) < 4.0), (o, z[o])
        assert abs(np.mean(z[o])) < 4.0 / np.sqrt(reps), (o, z[o])  # no bias beyond noise
        assert covered[o] >= reps - 2, (o, covered[o])


def test_determinism_and_the_old_draws_are_kept():
    env = PairedReplaySimulator(n_tasks=6, n_items=9, n_replicates=2, seed=7)
    a = env.sample(25, rng=11)
    assert a.equals(env.sample(25, rng=11))
    assert not a.column("latency_ms").equals(env.sample(25, rng=12).column("latency_ms"))
    df = a.to_pandas()
    # outcome and tokens are those drawn before cost and latency existed (pinned values)
    assert int(df.tokens.sum()) == 208634 and df.outcome.sum() == 63.0
    assert df.tokens.iloc[:4].tolist() == [898, 936, 714, 684]
    # ... and do not depend on the new settings
    other = PairedReplaySimulator(
        n_tasks=6,
        n_items=9,
        n_replicates=2,
        price_per_token=1.0,
        tool_fee=0.5,
        latency_sd=1.5,
        seed=7,
    ).sample(25, rng=11)
    for name in ("outcome", "tokens", "item_id", "task_id"):
        assert other.column(name).equals(a.column(name)), name
    assert not other.column("cost").equals(a.column("cost"))
    # a Generator is left where the draws without cost and latency left it
    g = np.random.default_rng(12)
    first = env.sample(25, rng=g)
    assert g.random() == 0.6391031098176977
    g = np.random.default_rng(12)
    assert env.sample(25, rng=g).equals(first)
    assert not env.sample(25, rng=g).column("cost").equals(first.column("cost"))


def test_a_generator_that_cannot_spawn_still_gives_reproducible_tables():
    def legacy(seed: int) -> np.random.Generator:  # numpy's RandomState seeding: no SeedSequence
        bits = np.random.MT19937()
        if not hasattr(bits, "_legacy_seeding"):
            pytest.skip("this numpy has no legacy-seeded bit generators")
        bits._legacy_seeding(seed)
        return np.random.Generator(bits)

    env = PairedReplaySimulator(n_replicates=2, seed=1)
    with pytest.raises(TypeError):
        legacy(3).spawn(1)
    a = env.sample(40, rng=legacy(3), oracle=True)
    assert a.equals(env.sample(40, rng=legacy(3), oracle=True))
    df = a.to_pandas()
    assert np.isfinite(df.cost).all() and (df.latency_ms > 0).all()
    assert (df.cost >= 1e-5 * df.tokens).all()  # the token bill plus non-negative fees
