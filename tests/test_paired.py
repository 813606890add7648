"""ope.paired: paired-replay effects with pairs as the units.

Hand-computed values, the simulator's exact effects, interval coverage, the variance the pairing
removes, multiplicity control on null items, and the errors of bad input.
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from scipy import stats

from ope.exceptions import (
    DroppedRowsWarning,
    MissingBoundsError,
    ParameterError,
    SchemaError,
    SmallSampleWarning,
    ValidationError,
)
from ope.intervals import (
    bernstein_interval,
    betting_interval,
    hoeffding_interval,
    normal_interval,
)
from ope.io import read_paired
from ope.logs import PairedReplays, ValidationReport
from ope.paired import adjust_p_values, paired_effect
from ope.simulate import PairedReplaySimulator

T, C = "with_memory", "no_memory"


def hand_replays() -> pd.DataFrame:
    """3 pairs x 2 arms x 2 replicates; pair differences 0.5, 0.5, 0."""
    return pd.DataFrame(
        {
            "pair_id": np.repeat([0, 1, 2], 4),
            "arm": ["mem", "mem", "none", "none"] * 3,
            "replicate": [0, 1, 0, 1] * 3,
            "outcome": [
                1.0,
                1.0,
                0.0,
                1.0,  # pair 0: mem 1.0, none 0.5
                1.0,
                0.0,
                0.0,
                0.0,  # pair 1: mem 0.5, none 0.0
                1.0,
                1.0,
                1.0,
                1.0,
            ],  # pair 2: mem 1.0, none 1.0
            "cost": [2.0, 4.0, 1.0, 1.0, 3.0, 3.0, 2.0, 2.0, 1.0, 1.0, 1.0, 3.0],
        }
    )


# ------------------------------------------------------------------------------------------
# hand-computed
# ------------------------------------------------------------------------------------------


# a handful of pairs: the short-interval note is tested in test_short_intervals.py
@pytest.mark.filterwarnings(
    "ignore:.*too few pairs for their skew:ope.exceptions.SmallSampleWarning"
)
def test_hand_computed_effect_standard_errors_interval_and_spread():
    res = paired_effect(hand_replays(), treated="mem", control="none", ratio=True, ci="t")
    row = res.table().iloc[0]
    # d = (0.5, 0.5, 0): mean 1/3, sd sqrt(1/12), se 1/6
    assert row["n"] == 3 and row["n_dropped"] == 0
    assert row["value"] == pytest.approx(1 / 3, abs=1e-15)
    assert row["std_error"] == pytest.approx(1 / 6, abs=1e-15)
    q = stats.t.ppf(0.975, df=2)  # 4.302652729911275
    assert row["ci_low"] == pytest.approx(1 / 3 - q / 6, abs=1e-12)
    assert row["ci_high"] == pytest.approx(1 / 3 + q / 6, abs=1e-12)
    assert row["p_value"] == pytest.approx(2 * stats.t.sf(2.0, df=2), abs=1e-12)
    # unpaired: pair means (1, .5, 1) var 1/12 and (.5, 0, 1) var 1/4 -> sqrt((1/3)/3) = 1/3
    assert row["unpaired_std_error"] == pytest.approx(1 / 3, abs=1e-15)
    assert row["treated_mean"] == pytest.approx(5 / 6) and row["control_mean"] == pytest.approx(0.5)
    # ratio 5/3; psi = (1/3, 1, -4/3), var 13/9, se sqrt(13/27)
    assert row["ratio"] == pytest.approx(5 / 3, abs=1e-15)
    assert row["ratio_std_error"] == pytest.approx(math.sqrt(13 / 27), abs=1e-15)
    assert row["ratio_ci_low"] == pytest.approx(5 / 3 - q * math.sqrt(13 / 27), abs=1e-12)
    # replicates: within SS 0.5 over 3 df in each arm -> var 1/6
    assert row["treated_replicates"] == 2.0 and row["control_replicates"] == 2.0
    assert row["treated_replicate_sd"] == pytest.approx(math.sqrt(1 / 6), abs=1e-15)
    assert row["control_replicate_sd"] == pytest.approx(math.sqrt(1 / 6), abs=1e-15)
    # between-pair: treated 1/12 - (1/6)(1/2) = 0 -> share 1; control 1/4 - 1/12 = 1/6 -> 1/2
    assert row["treated_replicate_share"] == pytest.approx(1.0, abs=1e-12)
    assert row["control_replicate_share"] == pytest.approx(0.5, abs=1e-12)
    assert row["significant"] == (row["p_adjusted"] <= 0.05)


@pytest.mark.filterwarnings("ignore::ope.exceptions.SmallSampleWarning")
def test_ratio_is_undefined_when_the_control_mean_is_zero():
    # group "zero": control outcome 0 in every pair; group "some": control mean 0.5
    df = pd.DataFrame(
        {
            "pair_id": np.repeat(np.arange(8), 2),
            "arm": ["mem", "none"] * 8,
            "segment": np.repeat(["zero"] * 4 + ["some"] * 4, 2),
            "outcome": [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0]
            + [1.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0],
        }
    )
    res = paired_effect(df, treated="mem", control="none", ratio=True, by="segment")
    table = res.table().set_index("group")
    zero, some = table.loc["zero"], table.loc["some"]
    assert zero["control_mean"] == 0.0 and zero["value"] == pytest.approx(0.75)
    for column in ("ratio", "ratio_std_error", "ratio_ci_low", "ratio_ci_high"):
        assert math.isnan(zero[column])
        assert math.isfinite(some[column])
    assert some["ratio"] == pytest.approx(0.75 / 0.5)
    (note,) = [n for n in res.notes if "ratio" in n]
    assert "'none' has mean 0 on 'outcome' in groups 'zero', so the ratio" in note
    assert "undefined" in note and "'some'" not in note
    # without `by`: the note names no group
    plain = df[df["segment"] == "zero"]
    res = paired_effect(plain, treated="mem", control="none", ratio=True)
    assert math.isnan(res.table()["ratio"].iloc[0])
    assert any("has mean 0 on 'outcome', so the ratio 'mem' / 'none'" in n for n in res.notes)


# a handful of pairs: the short-interval note is tested in test_short_intervals.py
@pytest.mark.filterwarnings(
    "ignore:.*too few pairs for their skew:ope.exceptions.SmallSampleWarning"
)
def test_hand_computed_normal_and_finite_sample_intervals():
    df = hand_replays()
    normal = paired_effect(df, treated="mem", control="none", ci="normal").table().iloc[0]
    z = stats.norm.ppf(0.975)
    assert (normal["ci_low"], normal["ci_high"]) == pytest.approx((1 / 3 - z / 6, 1 / 3 + z / 6))
    assert normal["p_value"] == pytest.approx(2 * stats.norm.sf(2.0))
    iv = normal_interval(1 / 3, 1 / 6)
    assert (normal["ci_low"], normal["ci_high"]) == pytest.approx((iv.low, iv.high), abs=1e-15)
    hoeff = (
        paired_effect(df, treated="mem", control="none", ci="hoeffding", reward_range=(0.0, 1.0))
        .table()
        .iloc[0]
    )
    # differences lie in [-1, 1] (width 2): half-width 2 sqrt(ln(40) / 6), clipped to [-1, 1]
    half = 2 * math.sqrt(math.log(40) / 6)
    assert (hoeff["ci_low"], hoeff["ci_high"]) == pytest.approx(
        (max(-1, 1 / 3 - half), min(1, 1 / 3 + half))
    )
    assert hoeff["p_value"] == 1.0  # 2 exp(-2 * 3 * (1/9) / 4) > 1


# a handful of pairs: the short-interval note is tested in test_short_intervals.py
@pytest.mark.filterwarnings(
    "ignore:.*too few pairs for their skew:ope.exceptions.SmallSampleWarning"
)
def test_several_outcomes_and_all():
    df = hand_replays()
    res = paired_effect(df, treated="mem", control="none", outcomes=["outcome", "cost"])
    tab = res.table()
    assert tab["outcome"].tolist() == ["outcome", "cost"]
    # cost pair means: mem (3, 3, 1), none (1, 2, 2): d = (2, 1, -1), mean 2/3
    assert tab.loc[1, "value"] == pytest.approx(2 / 3)
    assert tab.loc[1, "std_error"] == pytest.approx(np.std([2, 1, -1], ddof=1) / math.sqrt(3))
    assert paired_effect(df, treated="mem", control="none", outcomes="all").outcomes == (
        "outcome",
        "cost",
    )
    # a single-outcome call gives the same row
    one = paired_effect(df, treated="mem", control="none", outcomes="cost").table().iloc[0]
    assert one["value"] == tab.loc[1, "value"] and one["p_value"] == tab.loc[1, "p_value"]


def test_several_treated_arms_against_one_control():
    rng = np.random.default_rng(3)
    n = 40
    base = rng.normal(size=n)
    frames = []
    for arm, shift in (("ctl", 0.0), ("a", 0.5), ("b", -0.2)):
        frames.append(
            pd.DataFrame(
                {
                    "pair_id": np.arange(n),
                    "arm": arm,
                    "outcome": base + shift + 0.1 * rng.normal(size=n),
                }
            )
        )
    df = pd.concat(frames, ignore_index=True)
    res = paired_effect(df, treated=["a", "b"], control="ctl")
    tab = res.table()
    assert tab["treated"].tolist() == ["a", "b"] and set(tab["control"]) == {"ctl"}
    for arm in ("a", "b"):
        alone = paired_effect(df[df.arm.isin([arm, "ctl"])], treated=arm, control="ctl")
        row = tab[tab.treated == arm].iloc[0]
        assert row["value"] == pytest.approx(alone.table().iloc[0]["value"], abs=1e-14)
        assert row["p_value"] == pytest.approx(alone.table().iloc[0]["p_value"], abs=1e-14)
    # Holm over the two rows
    assert tab["p_adjusted"].to_numpy() == pytest.approx(
        adjust_p_values(tab["p_value"].to_numpy(), correction="holm")
    )
    # single replicate: no replicate spread, and a note says why
    assert tab["treated_replicate_sd"].isna().all()
    assert any("replicate spread is NaN" in note for note in res.notes)


# a handful of pairs: the short-interval note is tested in test_short_intervals.py
@pytest.mark.filterwarnings(
    "ignore:.*too few pairs for their skew:ope.exceptions.SmallSampleWarning"
)
def test_pairs_missing_an_arm_or_a_value_are_dropped_and_counted():
    df = hand_replays()
    df.loc[(df.pair_id == 1) & (df.arm == "none"), "cost"] = np.nan  # pair 1 has no control cost
    with pytest.warns(DroppedRowsWarning, match="1 of 3 pairs"):
        res = paired_effect(df, treated="mem", control="none", outcomes=["outcome", "cost"])
    tab = res.table()
    assert tab["n"].tolist() == [3, 2] and tab["n_dropped"].tolist() == [0, 1]
    assert tab.loc[1, "value"] == pytest.approx(np.mean([2, -1]))
    assert any("dropped" in note and "'cost'" in note for note in res.notes)
    assert any("2 rows have no finite 'cost' value; they are left out" in n for n in res.notes)
    # one row is counted in the singular ("1 rows have" before)
    one = hand_replays()
    one.loc[one.index[(one.pair_id == 0) & (one.arm == "none")][0], "cost"] = np.nan
    res = paired_effect(one, treated="mem", control="none", outcomes=["cost"])
    assert any("1 row has no finite 'cost' value; it is left out" in n for n in res.notes)

    # a PairedReplays whose pair 2 has no control row at all
    table = pa.Table.from_pandas(hand_replays().iloc[:10], preserve_index=False)
    replays = PairedReplays(table, ValidationReport("<Table>", rows_read=10, rows_used=10))
    with pytest.warns(DroppedRowsWarning):
        row = paired_effect(replays, treated="mem", control="none").table().iloc[0]
    assert (row["n"], row["n_dropped"]) == (2, 1) and row["value"] == pytest.approx(0.5)

    # read with on_invalid="drop": the rejected rows are counted in the notes
    with pytest.warns(DroppedRowsWarning):
        read = read_paired(hand_replays().iloc[:10], on_invalid="drop")
    res = paired_effect(read, treated="mem", control="none")
    assert any("pair_missing_arm: 2" in note for note in res.notes)


def test_by_groups_with_holm_and_bh():
    rng = np.random.default_rng(7)
    n = 300
    item = rng.integers(0, 6, n)
    effect = np.where(item < 3, 0.0, 0.4)
    base = rng.normal(size=n)
    df = pd.DataFrame(
        {
            "pair_id": np.tile(np.arange(n), 2),
            "arm": np.repeat(["t", "c"], n),
            "item_id": np.tile(item, 2),
            "outcome": np.concatenate(
                [base + effect + rng.normal(size=n), base + rng.normal(size=n)]
            ),
        }
    )
    res = paired_effect(df, treated="t", control="c", by="item_id")
    tab = res.table()
    assert tab["group"].tolist() == list(range(6))
    assert tab["n"].tolist() == np.bincount(item).tolist()
    for k in range(6):
        sel = item == k
        d = df.outcome.to_numpy()[:n][sel] - df.outcome.to_numpy()[n:][sel]
        assert tab.loc[k, "value"] == pytest.approx(d.mean(), abs=1e-13)
        assert tab.loc[k, "std_error"] == pytest.approx(d.std(ddof=1) / math.sqrt(sel.sum()))
    p = tab["p_value"].to_numpy()
    order = np.argsort(p)
    holm = np.maximum.accumulate(np.minimum(1, (6 - np.arange(6)) * p[order]))
    expected = np.empty(6)
    expected[order] = holm
    assert tab["p_adjusted"].to_numpy() == pytest.approx(expected)
    assert tab["significant"].tolist() == (expected <= 0.05).tolist()
    for k in range(6):  # the vectorized intervals equal ope.intervals' row by row
        iv = normal_interval(tab.loc[k, "value"], tab.loc[k, "std_error"])
        assert (tab.loc[k, "ci_low"], tab.loc[k, "ci_high"]) == pytest.approx(
            (iv.low, iv.high), abs=1e-14
        )
    bh = paired_effect(df, treated="t", control="c", by="item_id", correction="bh").table()
    assert bh["p_adjusted"].to_numpy() == pytest.approx(adjust_p_values(p, correction="bh"))
    assert (bh["p_adjusted"] <= tab["p_adjusted"] + 1e-15).all()  # BH never stricter than Holm
    none = paired_effect(df, treated="t", control="c", by="item_id", correction="none").table()
    assert none["p_adjusted"].to_numpy() == pytest.approx(p)


def test_adjust_p_values_hand_values_and_nan():
    p = np.array([0.01, 0.04, np.nan, 0.03, 0.5])
    # Holm over the 4 finite values: sorted .01 .03 .04 .5 -> .04 .09 .09 .5
    assert adjust_p_values(p, correction="holm")[[0, 1, 3, 4]] == pytest.approx(
        [0.04, 0.09, 0.09, 0.5]
    )
    # BH: m p / rank = .04 .06 .0533 .5 -> running min from the top: .04 .0533 .0533 .5
    assert adjust_p_values(p, correction="bh")[[0, 1, 3, 4]] == pytest.approx(
        [0.04, 0.16 / 3, 0.16 / 3, 0.5]
    )
    assert np.isnan(adjust_p_values(p)[2])


@pytest.mark.parametrize("method", ["hoeffding", "bernstein", "betting"])
def test_finite_sample_p_value_is_where_the_interval_reaches_zero(method):
    rng = np.random.default_rng(11)
    n = 60
    base = rng.uniform(0.2, 0.8, n)
    df = pd.DataFrame(
        {
            "pair_id": np.tile(np.arange(n), 2),
            "arm": np.repeat(["t", "c"], n),
            "outcome": np.concatenate(
                [
                    np.clip(base + 0.25 + 0.1 * rng.normal(size=n), 0, 1),
                    np.clip(base + 0.1 * rng.normal(size=n), 0, 1),
                ]
            ),
        }
    )
    row = (
        paired_effect(df, treated="t", control="c", ci=method, reward_range=(0.0, 1.0))
        .table()
        .iloc[0]
    )
    d = df.outcome.to_numpy()[:n] - df.outcome.to_numpy()[n:]
    p = row["p_value"]
    assert 1e-12 < p < 0.5  # strictly inside (0, 1): the interval really reaches 0 there

    def interval(level):
        if method == "hoeffding":
            return hoeffding_interval(d.mean(), n, low=-1, high=1, confidence_level=level)
        if method == "bernstein":
            return bernstein_interval(
                d.mean(), d.var(ddof=1), n, low=-1, high=1, confidence_level=level
            )
        return betting_interval(np.ones(n), d, reward_range=(-1, 1), confidence_level=level)

    iv = interval(0.95)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((iv.low, iv.high), abs=1e-12)
    # alpha just below p: 0 still inside; just above p: 0 excluded
    assert interval(1 - p * 0.999).low < 0 < interval(1 - p * 1.001).low


# ------------------------------------------------------------------------------------------
# the simulator's exact effects
# ------------------------------------------------------------------------------------------


def test_simulator_effects_recovered_within_a_few_standard_errors():
    env = PairedReplaySimulator(n_replicates=2, seed=1)
    reps = 100
    values = {"outcome": [], "tokens": []}
    for s in range(reps):
        tab = paired_effect(
            env.sample(400, rng=s), treated=T, control=C, outcomes=["outcome", "tokens"]
        ).table()
        for o in values:
            values[o].append(float(tab.loc[tab.outcome == o, "value"].iloc[0]))
    for o, v in values.items():
        v = np.asarray(v)
        truth = env.true_effect(outcome=o)
        assert abs(v.mean() - truth) < 4 * v.std(ddof=1) / math.sqrt(reps), o


def test_simulator_item_effects_recovered():
    env = PairedReplaySimulator(n_items=8, n_replicates=2, seed=2)
    tab = paired_effect(env.sample(20_000, rng=5), treated=T, control=C, by="item_id").table()
    truth = env.true_item_effects()[tab["group"].astype(int).to_numpy()]
    z = (tab["value"].to_numpy() - truth) / tab["std_error"].to_numpy()
    assert (tab["n"] > 300).all()
    assert np.abs(z).max() < 4.0
    assert 0.2 < np.mean(z**2) < 2.5  # z-scores of the right size, not just small


def _coverage(env, methods, reps, n, outcome="outcome", reward_range=(0.0, 1.0)):
    truth = env.true_effect(outcome=outcome)
    hits = {m: 0 for m in methods}
    for s in range(reps):
        replays = read_paired(env.sample(n, rng=1000 + s))
        for m in methods:
            row = (
                paired_effect(
                    replays,
                    treated=T,
                    control=C,
                    outcomes=outcome,
                    ci=m,
                    reward_range=reward_range if m not in ("t", "normal") else None,
                )
                .table()
                .iloc[0]
            )
            hits[m] += row["ci_low"] <= truth <= row["ci_high"]
    return {m: h / reps for m, h in hits.items()}


@pytest.mark.slow  # statistical validation: 300 replications
def test_interval_coverage_over_300_replications():
    env = PairedReplaySimulator(n_replicates=2, seed=3)
    reps = 300
    cov = _coverage(env, ("t", "normal", "bernstein", "betting"), reps, n=200)
    se = math.sqrt(0.95 * 0.05 / reps)
    for m in ("t", "normal"):
        assert cov[m] >= 0.95 - 3 * se, (m, cov)
        assert cov[m] <= 0.95 + 3 * se, (m, cov)  # not vacuously wide either
    for m in ("bernstein", "betting"):
        assert cov[m] >= 0.95, (m, cov)
    # token counts (unbounded): t only
    tok = _coverage(env, ("t",), reps, n=200, outcome="tokens")
    assert tok["t"] >= 0.95 - 3 * se, tok


def test_pairing_reduces_the_standard_error_on_the_simulator():
    env = PairedReplaySimulator(n_replicates=3, seed=0)
    reps = 150
    rows = [
        paired_effect(
            env.sample(300, rng=s), treated=T, control=C, outcomes=["outcome", "tokens"]
        ).table()
        for s in range(reps)
    ]
    for o in ("outcome", "tokens"):
        sel = [t[t.outcome == o].iloc[0] for t in rows]
        values = np.array([r["value"] for r in sel])
        paired = np.array([r["std_error"] for r in sel])
        unpaired = np.array([r["unpaired_std_error"] for r in sel])
        assert (paired < unpaired).mean() > 0.95, o
        # the paired SE is the right one: it matches the spread of the estimates over replications
        spread = values.std(ddof=1)
        assert 0.85 < paired.mean() / spread < 1.15, o
        assert unpaired.mean() / spread > 1.15, o


# ------------------------------------------------------------------------------------------
# multiplicity on null items
# ------------------------------------------------------------------------------------------


def test_holm_controls_the_family_wise_error_on_null_items():
    env = PairedReplaySimulator(n_items=10, n_replicates=2, effect_mean=0.0, effect_sd=0.0, seed=4)
    assert np.abs(env.true_item_effects()).max() < 1e-15
    reps = 300
    any_holm = any_raw = 0
    for s in range(reps):
        tab = paired_effect(env.sample(2000, rng=s), treated=T, control=C, by="item_id").table()
        any_holm += bool(tab["significant"].any())
        any_raw += bool((tab["p_value"] <= 0.05).any())
    se = math.sqrt(0.05 * 0.95 / reps)
    assert any_holm / reps <= 0.05 + 3 * se
    assert any_raw / reps > 0.2  # without a correction the family-wise error is far above 5%


def test_benjamini_hochberg_controls_the_false_discovery_rate():
    rng = np.random.default_rng(8)
    reps, n, n_items = 300, 1200, 20
    null = np.arange(n_items) < 10  # items 0..9 have no effect, 10..19 an effect of 0.3
    fdp_bh, fdp_raw = [], []
    for _ in range(reps):
        item = rng.integers(0, n_items, n)
        base = rng.normal(size=n)
        treated = base + np.where(null[item], 0.0, 0.3) + rng.normal(size=n)
        df = pa.table(
            {
                "pair_id": np.tile(np.arange(n), 2),
                "arm": np.repeat(["t", "c"], n),
                "item_id": np.tile(item, 2),
                "outcome": np.concatenate([treated, base + rng.normal(size=n)]),
            }
        )
        with warnings.catch_warnings():  # normal data: a rare group has a skewed sample
            warnings.simplefilter("ignore", SmallSampleWarning)
            tab = paired_effect(df, treated="t", control="c", by="item_id", correction="bh").table()
        is_null = null[tab["group"].astype(int).to_numpy()]
        for flags, out in (
            (tab["significant"].to_numpy(), fdp_bh),
            (tab["p_value"].to_numpy() <= 0.05, fdp_raw),
        ):
            out.append((flags & is_null).sum() / max(1, flags.sum()))
    fdr = np.mean(fdp_bh)
    assert fdr <= 0.05 + 3 * np.std(fdp_bh, ddof=1) / math.sqrt(reps), fdr
    assert np.mean(fdp_raw) > fdr  # the uncorrected false discovery proportion is higher


# ------------------------------------------------------------------------------------------
# results and bad input
# ------------------------------------------------------------------------------------------


def test_result_renders_and_serializes():
    env = PairedReplaySimulator(n_replicates=2, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallSampleWarning)
        res = paired_effect(
            env.sample(200, rng=0), treated=T, control=C, by="item_id", outcomes="all", ratio=True
        )
    d = res.to_dict()
    assert len(d["rows"]) == res.n_rows == len(res.table())
    assert set(d) >= {"treated", "control", "outcomes", "by", "rows", "notes", "ci_method"}
    json.dumps(d)  # JSON-ready (NaN written as NaN)
    assert "Paired effects" in res.summary() and "<table>" in res._repr_html_()
    assert "PairedEffect(" in repr(res)
    # the columns never depend on the arguments
    plain = paired_effect(env.sample(200, rng=0), treated=T, control=C)
    assert list(plain.table().columns) == list(res.table().columns)
    assert plain.table()["ratio"].isna().all()


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"treated": "with_memroy", "control": C}, ParameterError, "'with_memroy' is not in"),
        ({"treated": T, "control": "nothing"}, ParameterError, "arms are: 'no_memory'"),
        ({"treated": [T, C], "control": C}, ParameterError, "also listed in `treated`"),
        (
            {"treated": T, "control": C, "outcomes": ["latency_ms"]},
            SchemaError,
            "'latency_ms' is not in the replays",
        ),
        (
            {"treated": T, "control": C, "outcomes": ["cost"], "by": "task"},
            SchemaError,
            "columns 'cost', 'task' are not",
        ),
        (
            {"treated": T, "control": C, "confidence_level": 1.5},
            ParameterError,
            r"confidence_level. must be in \(0, 1\)",
        ),
        ({"treated": T, "control": C, "ci": "bootstrap"}, ParameterError, "`ci` must be one of"),
        (
            {"treated": T, "control": C, "correction": "bonferroni"},
            ParameterError,
            "`correction` must be one of",
        ),
        (
            {"treated": T, "control": C, "ci": "hoeffding"},
            MissingBoundsError,
            "a priori range of every outcome",
        ),
        (
            {
                "treated": T,
                "control": C,
                "ci": "betting",
                "outcomes": ["outcome", "tokens"],
                "reward_range": {"outcome": (0, 1)},
            },
            MissingBoundsError,
            "'tokens' has none",
        ),
        ({"treated": T, "control": C, "reward_range": "01"}, ParameterError, "reward_range"),
        (
            {"treated": T, "control": C, "outcomes": "tokens", "reward_range": (0, 1)},
            ValidationError,
            "outside reward_range",
        ),
        ({"treated": T, "control": C, "ratio": "yes"}, ParameterError, "`ratio`"),
    ],
)
def test_bad_input_raises_specific_errors(kwargs, error, match):
    # without the cost and latency_ms columns, to test the refusal of missing outcome columns
    sample = PairedReplaySimulator(n_replicates=2, seed=0).sample(50, rng=0)
    replays = read_paired(sample.drop_columns(["cost", "latency_ms"]))
    with pytest.raises(error, match=match):
        paired_effect(replays, **kwargs)


def test_by_column_must_be_constant_within_a_pair():
    df = hand_replays()
    df["item_id"] = [0, 0, 0, 1] + [1] * 8
    with pytest.raises(ValidationError, match="constant within each pair"):
        paired_effect(df, treated="mem", control="none", by="item_id")


# a handful of pairs: the short-interval note is tested in test_short_intervals.py
@pytest.mark.filterwarnings(
    "ignore:.*too few pairs for their skew:ope.exceptions.SmallSampleWarning"
)
def test_a_group_with_one_pair_gets_nan_and_a_warning():
    df = hand_replays()
    df["item_id"] = np.repeat([0, 0, 1], 4)
    with pytest.warns(SmallSampleWarning, match="^1 row has fewer than two usable pairs"):
        tab = paired_effect(df, treated="mem", control="none", by="item_id").table()
    assert tab.loc[1, "n"] == 1 and np.isnan(tab.loc[1, "std_error"])
    assert np.isnan(tab.loc[1, "p_adjusted"]) and not tab.loc[1, "significant"]
    assert tab.loc[0, "p_adjusted"] == tab.loc[0, "p_value"]  # the NaN row is not in the family


def test_outcome_and_segment_columns_of_the_wrong_kind_are_named():
    """An outcome column of text and a segment column of lists are SchemaErrors naming the
    column (pyarrow's cast and dictionary errors escaped before)."""
    sample = PairedReplaySimulator(n_replicates=2, seed=0).sample(50, rng=0)
    frame = sample.to_pandas()
    frame["label"] = "x"
    frame["tags"] = [[1, 2]] * len(frame)
    replays = read_paired(frame)
    arms = sorted(set(frame["arm"]))
    with pytest.raises(SchemaError, match="outcome column 'label' holds (large_)?string"):
        paired_effect(replays, treated=arms[1], control=arms[0], outcomes=["label"])
    with pytest.raises(SchemaError, match="segment column 'tags' holds list"):
        paired_effect(replays, treated=arms[1], control=arms[0], by="tags")


@pytest.mark.filterwarnings("ignore::ope.exceptions.OPEWarning")
@pytest.mark.parametrize("ci", ["normal", "t"])
def test_effects_scale_with_tiny_and_huge_outcomes(ci):
    """Outcomes times 1e-170 (or 1e-200, 1e150) give the effect, its standard errors and its
    interval times that, and the same p-value: the differences' variance near 1e-340 is past
    float64, so the standard errors are taken in units of a power of two (they were 0, with a
    p-value of 0, at 1e-170, and 27% off at 1e-160)."""
    rng = np.random.default_rng(0)
    rows = [
        {"pair_id": pid, "arm": arm, "replicate": rep, "outcome": base + shift + noise}
        for pid, base in enumerate(rng.normal(size=30))
        for arm, shift in (("with", 0.3), ("without", 0.0))
        for rep, noise in enumerate(rng.normal(scale=0.1, size=2))
    ]
    df = pd.DataFrame(rows)
    ref = paired_effect(df, treated="with", control="without", ci=ci).table().iloc[0]
    for scale in (1e-160, 1e-170, 1e-200, 1e150):
        got = (
            paired_effect(
                df.assign(outcome=df.outcome * scale), treated="with", control="without", ci=ci
            )
            .table()
            .iloc[0]
        )
        for column in ("value", "std_error", "unpaired_std_error", "ci_low", "ci_high"):
            assert got[column] / scale == pytest.approx(ref[column], rel=1e-12), column
        assert got["p_value"] == pytest.approx(ref["p_value"], rel=1e-9)
    # groups at 1e150 and 1e-150 side by side: each in its own units (one scale for both
    # gave the small group a standard error of 0)
    mixed = df.assign(
        item=np.where(df.pair_id < 15, "big", "small"),
        outcome=df.outcome * np.where(df.pair_id < 15, 1e150, 1e-150),
    )
    both = paired_effect(mixed, treated="with", control="without", ci=ci, by="item").table()
    for label, scale in (("big", 1e150), ("small", 1e-150)):
        part = df[np.where(df.pair_id < 15, "big", "small") == label]
        alone = paired_effect(part, treated="with", control="without", ci=ci).table().iloc[0]
        row = both[both["group"] == label].iloc[0]
        assert row["std_error"] / scale == pytest.approx(alone["std_error"], rel=1e-12)
