"""The plan predicts ope's own interval, and the diagnostics tell one story.

Each test builds the case the issue measured (a shifted reward range, a uniform logger over 80
items, ESS 2 with a weight of 21,739, a segment where the logger gives the candidate's action
propensity 0.002) and checks the contradiction is gone.
"""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest

from ope.diagnostics import VERDICT_EXPLORE, VERDICT_MORE_DATA, Diagnostics, diagnose_arrays
from ope._format import format_share
from ope.estimators import IPS
from ope.exceptions import OverlapWarning


def quiet(*args, **kwargs) -> Diagnostics:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OverlapWarning)
        return diagnose_arrays(*args, **kwargs)


def uniform_logs(
    n: int,
    rng: np.random.Generator,
    *,
    k: int = 5,
    eps: float = 0.0,
    reward_range: tuple[float, float] = (0.0, 1.0),
) -> dict[str, np.ndarray]:
    """Uniform logger over k actions mixed with the greedy candidate (plays action 0) at eps;
    reward lo + (hi - lo) * Bernoulli(mu[a])."""
    lo, hi = reward_range
    p_log = np.full(k, (1.0 - eps) / k)
    p_log[0] += eps
    a = np.minimum((p_log.cumsum()[None, :] < rng.random(n)[:, None]).sum(axis=1), k - 1)
    mu = np.r_[0.6, np.full(k - 1, 0.3)]
    r = lo + (hi - lo) * (rng.random(n) < mu[a])
    return {"reward": r, "p": p_log[a], "pe": (a == 0).astype(float), "action": a}


# --------------------------------------------------------------------------------------------
# item 6: the plan predicts the width of ope's IPS interval whatever the reward range
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("reward_range", [(0.0, 1.0), (10.0, 11.0), (-1.0, 3.0)])
def test_plan_predicts_the_reported_ips_width_for_shifted_rewards(reward_range):
    rng = np.random.default_rng(60)
    logs = uniform_logs(20_000, rng, reward_range=reward_range)
    new_rows = 5_000
    d = quiet(
        logs["reward"],
        logs["p"],
        logs["pe"],
        policy_names=["g"],
        action=logs["action"],
        reward_range=reward_range,
    )
    at_zero = d.plan(target_width=1e6, new_rows=new_rows).predicted_width.iloc[0]
    target_width = 0.6 * at_zero  # needs exploration: 0 < eps < 1
    plan = d.plan(target_width=target_width, new_rows=new_rows)
    eps = plan.exploration_share.iloc[0]
    assert 0 < eps < 1 and plan.feasible.iloc[0]
    predicted = plan.predicted_width.iloc[0]
    widths = []
    for _ in range(30):  # replications of the new logs drawn under the plan
        new = uniform_logs(new_rows, rng, eps=eps, reward_range=reward_range)
        est = IPS().estimate(new["reward"], new["p"], new["pe"])
        widths.append(est.ci_high - est.ci_low)
    assert np.mean(widths) == pytest.approx(predicted, rel=0.15)


# --------------------------------------------------------------------------------------------
# item 7: the verdict does not hinge on the clip level and agrees with gaps and plan
# --------------------------------------------------------------------------------------------
def test_verdict_does_not_depend_on_the_clip_level_uniform_logger_80_items():
    rng = np.random.default_rng(70)
    n, k = 20_000, 80
    a = rng.integers(0, k, n)
    pe_table = np.full(k, 0.1 / (k - 1))
    pe_table[3] = 0.9  # the candidate plays item 3 mostly, every item a little
    r = (rng.random(n) < np.where(a == 3, 0.2, 0.05)).astype(float)
    verdicts, shares = [], []
    for clip in (10.0, 20.0, None):
        d = quiet(
            r,
            np.full(n, 1.0 / k),
            pe_table[a],
            policy_names=["c"],
            action=a,
            max_weight=clip,
            reward_range=(0, 1),
        )
        row = d.table().iloc[0]
        verdicts.append(row["verdict"])
        shares.append(row["verdict_coverage_share"])
        assert row["verdict_max_weight"] == d.clip_profile("c").query("narrowest").max_weight.item()
    # uniform logging supports every item: the width is sampling, whatever clip level is given
    assert verdicts == [VERDICT_MORE_DATA] * 3
    assert shares[0] == shares[1] == shares[2] < 0.5
    # the profile shows how the split moves: clipping at 10 makes most of the width coverage
    prof = d.clip_profile("c")
    assert prof.loc[prof.max_weight == 8.0, "coverage_share"].item() > 0.5
    assert prof.loc[prof.narrowest, "coverage_share"].item() < 0.5


def ess_two_logs() -> dict[str, np.ndarray]:
    """ESS about 2 with a largest weight of 21,739, four segments."""
    n = 8_600
    rng = np.random.default_rng(71)
    p = np.full(n, 0.5)
    t = np.where(rng.random(n) < 0.5, 0.05, 0.0)
    p[[10, 20]] = 1.0 / 21_739.0
    t[[10, 20]] = 1.0
    r = (rng.random(n) < 0.4).astype(float)
    seg = np.array(["a", "b", "c", "d"])[np.arange(n) % 4]
    return {"reward": r, "p": p, "pe": t, "seg": seg}


@pytest.mark.parametrize("clip", [10.0, None])
def test_gaps_verdict_and_shares_tell_one_story_with_ess_two(clip):
    logs = ess_two_logs()
    d = quiet(
        logs["reward"],
        logs["p"],
        logs["pe"],
        policy_names=["c"],
        segments={"seg": logs["seg"]},
        max_weight=clip,
        reward_range=(0, 1),
        target_width=0.05,
        new_rows=10_000,
    )
    row = d.table().iloc[0]
    assert row["ess"] < 3 and row["weight_max"] == pytest.approx(21_739.0)
    # gap lines say "explore the candidate's actions there": so does the verdict
    text = d.summary()
    assert "explore the candidate's actions there" in text
    assert row["verdict"] == VERDICT_EXPLORE and "ESS" in row["verdict_reason"]
    assert VERDICT_MORE_DATA not in text
    # shares are shares: in [0, 1] (the old clipped_target_mass was 5.06 here at clip 10)
    assert 0.0 <= row["clipped_weight_share"] <= 1.0
    if clip is not None:
        assert row["clipped_weight_share"] > 0.9
    prof = d.clip_profile("c")
    assert prof.clipped_share.between(0, 1).all() and prof.clipped_weight_share.between(0, 1).all()
    assert d.segments().target_mass_share.between(0, 1).all()


def test_plan_lines_agree_with_the_interval_and_never_print_zero_percent():
    rng = np.random.default_rng(72)
    logs = uniform_logs(1_000, rng)
    d = quiet(
        logs["reward"],
        logs["p"],
        logs["pe"],
        policy_names=["g"],
        action=logs["action"],
        reward_range=(0, 1),
    )
    iv = d.interval("g")
    assert iv.high - iv.low > 0.05
    # the current 1,000 rows give a wide interval; a million new rows of the same logging do
    # reach 0.05, and the plan says so in terms of the new rows, not "already reaches"
    line = d.plan(target_width=0.05, new_rows=1_000_000).reason.iloc[0]
    assert "already" not in line
    assert "1,000,000 new rows under the current logging" in line and "1e+03x" not in line
    # a share just above 0 is printed with its digits
    wide = d.plan(target_width=1e6, new_rows=10_000).predicted_width.iloc[0]
    tiny = d.plan(target_width=wide * (1 - 1e-5), new_rows=10_000)
    eps = tiny.exploration_share.iloc[0]
    assert 0 < eps < 5e-4
    assert "0.0%" not in tiny.reason.iloc[0] and format_share(eps) in tiny.reason.iloc[0]
    assert re.search(r"on (<0\.01|0\.0\d*[1-9]\d*)% of the", tiny.reason.iloc[0])


def test_without_segments_the_summary_says_none_were_requested():
    rng = np.random.default_rng(73)
    logs = uniform_logs(2_000, rng)
    d = quiet(logs["reward"], logs["p"], logs["pe"], policy_names=["g"], reward_range=(0, 1))
    assert "no segments requested" in d.summary()
    assert "no segment gaps" not in d.summary()


# --------------------------------------------------------------------------------------------
# item 8: low effective sample for the mass is flagged (as well as support gaps), per action
# --------------------------------------------------------------------------------------------
def tiny_propensity_logs() -> dict[str, np.ndarray]:
    """Segment "rare" (3,967 rows): the logger gives the candidate's action 0 propensity 0.002
    (weights 250); elsewhere uniform over 5 actions. The candidate plays 0 and 1 half-half."""
    rng = np.random.default_rng(80)
    n, k = 40_000, 5
    rare = np.arange(n) < 3_967
    pb = np.where(rare[:, None], np.r_[0.002, np.full(k - 1, 0.998 / (k - 1))], 1.0 / k)
    a = np.minimum((pb.cumsum(axis=1) < rng.random(n)[:, None]).sum(axis=1), k - 1)
    pe = np.where(a <= 1, 0.5, 0.0)
    r = (rng.random(n) < np.where(a == 0, 0.7, 0.3)).astype(float)
    return {
        "reward": r,
        "p": pb[np.arange(n), a],
        "pe": pe,
        "action": a,
        "seg": np.where(rare, "rare", "common"),
    }


def test_segment_with_tiny_propensities_is_flagged_as_low_effective_sample():
    logs = tiny_propensity_logs()
    with pytest.warns(OverlapWarning, match="low effective sample"):
        d = diagnose_arrays(
            logs["reward"],
            logs["p"],
            logs["pe"],
            policy_names=["c"],
            segments={"seg": logs["seg"]},
            action=logs["action"],
            reward_range=(0, 1),
            target_width=0.02,
            new_rows=40_000,
        )
    seg = d.segments().set_index("segment")
    rare = seg.loc["rare"]
    assert rare["rows"] == 3_967 and rare["weight_max"] == pytest.approx(250.0)
    assert 30 < rare["ess"] < 0.01 * rare["rows"]  # about 32 effective rows of 3,967
    assert rare["variance_share"] > 0.5 and abs(rare["mean_weight"] - 1) < 0.2
    assert rare["gap"] and rare["gap_kind"] == "effective sample"
    assert "low effective sample" in rare["reason"] and "support gap" not in rare["reason"]
    assert "of the estimate's variance" in rare["reason"]
    assert not seg.loc["common", "gap"]
    assert d.table().verdict.iloc[0] == VERDICT_EXPLORE
    # the plan has a row for the segment and says which action to play more there
    plan = d.plan()
    assert list(plan.segment) == ["all", "rare"]
    actions = d.plan_actions()
    in_rare = actions[actions.segment == "rare"]
    assert in_rare.action.iloc[0] == 0  # the rare action carries the variance: first
    eps = plan.set_index("segment").loc["rare", "exploration_share"]
    first = in_rare.iloc[0]
    assert first.extra_share == pytest.approx(eps * (first.target_mass - first.logging_share))
    assert first.planned_share == pytest.approx(first.logging_share + first.extra_share)
    assert "on seg=rare: play action 0 on" in d.summary()


def test_support_gap_and_effective_sample_are_told_apart():
    rng = np.random.default_rng(81)
    n, k = 20_000, 5
    new = np.arange(n) < 4_000
    pb = np.where(new[:, None], np.r_[0.0, np.full(k - 1, 0.25)], 1.0 / k)
    a = np.minimum((pb.cumsum(axis=1) < rng.random(n)[:, None]).sum(axis=1), k - 1)
    pe = (a == 0).astype(float)
    r = (rng.random(n) < 0.5).astype(float)
    d = quiet(
        r,
        pb[np.arange(n), a],
        pe,
        policy_names=["g"],
        segments={"user": np.where(new, "new", "old")},
        reward_range=(0, 1),
    )
    seg = d.segments().set_index("segment")
    assert seg.loc["new", "gap_kind"].startswith("support")
    assert "support gap: where the weights recover only 0%" in seg.loc["new", "reason"]
    assert not seg.loc["old", "gap"]
    assert math.isfinite(seg.loc["old", "ess"])
