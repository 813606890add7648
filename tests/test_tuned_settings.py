"""Settings per candidate policy: ``max_weight``/``tau``/``shrinkage`` as a mapping or a
SettingChoice (ope.evaluation.tuning.evaluate_with_settings), and ``estimators="auto"`` tuning
clipped IPS's clip level per candidate by SLOPE++ before the cross-validated choice, from the
API, the command line and the report."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest

import ope
from ope.evaluation import SettingChoice, tune_setting
from ope.exceptions import ParameterError
from ope.report import render_report
from ope.results import compare
from ope.simulate import ContextualBandit

pytestmark = pytest.mark.filterwarnings("ignore::ope.exceptions.OPEWarning")


@pytest.fixture(scope="module")
def logs():
    env = ContextualBandit(n_actions=5, n_contexts=50, seed=0)
    return ope.read_logs(env.sample(3000, rng=0, distributions=True))


def _levels(logs) -> dict[str, float]:
    names = list(ope.evaluate(logs, estimators=("ips",)).policies)
    return {p: [2.0, 5.0, 50.0][i % 3] for i, p in enumerate(names)}


def test_each_candidate_keeps_the_estimate_at_its_own_level(logs) -> None:
    levels = _levels(logs)
    ev = ope.evaluate(logs, estimators=("ips", "clipped_ips"), max_weight=levels, rng=1)
    assert ev.settings == {"max_weight": levels}
    assert ev.estimators == ["ips", "clipped_ips"]
    assert list(ev.estimates) == [(p, e) for p in ev.policies for e in ev.estimators]
    plain = ope.evaluate(logs, estimators=("ips",), rng=1)
    for p, level in levels.items():
        alone = ope.evaluate(logs, estimators=("clipped_ips",), max_weight=level, rng=1)
        got, want = ev.estimates[(p, "clipped_ips")], alone.estimates[(p, "clipped_ips")]
        assert (got.value, got.std_error, got.ci_low, got.ci_high) == (
            want.value,
            want.std_error,
            want.ci_low,
            want.ci_high,
        )
        assert ev.estimates[(p, "ips")].value == plain.estimates[(p, "ips")].value
    # the paired comparisons of a clip level per candidate pair the rows (the statistics of
    # the one pass hold no clip level): the same numbers as compare() of the two estimates
    comps = ev.comparisons().set_index(["policy", "estimator"])
    for p in levels:
        want = compare(ev.estimates[(p, "clipped_ips")], ev.logging)
        row = comps.loc[(p, "clipped_ips")]
        assert row["difference"] == pytest.approx(want.value, rel=1e-12, abs=1e-15)
        assert row["std_error"] == pytest.approx(want.std_error, rel=1e-9)
    d = ev.to_dict()
    assert d["settings_per_policy"] == {"max_weight": levels}
    assert d["provenance"]["options"]["max_weight"] == levels
    json.dumps(d)
    assert "max_weight per candidate" in ev.summary()


def test_a_setting_choice_is_a_setting_per_candidate(logs) -> None:
    choice = tune_setting(logs, "clipped_ips", grid=(2.0, 5.0, 20.0))
    ev = ope.evaluate(logs, estimators=("snips", "clipped_ips"), max_weight=choice)
    assert ev.settings["max_weight"] == choice.chosen
    tau = {p: 5.0 if i else 50.0 for i, p in enumerate(ev.policies)}
    dr = ope.evaluate(logs, estimators=("dr", "switch_dr"), tau=tau, rng=2)
    for p, t in tau.items():
        alone = ope.evaluate(logs, estimators=("switch_dr",), tau=t, rng=2)
        assert dr.estimates[(p, "switch_dr")].value == pytest.approx(
            alone.estimates[(p, "switch_dr")].value, rel=1e-12
        )
    # one estimator alone, its setting per candidate
    only = ope.evaluate(logs, estimators=("clipped_ips",), max_weight=choice)
    assert only.estimators == ["clipped_ips"] and only.settings["max_weight"] == choice.chosen


def test_refusals(logs, tmp_path) -> None:
    levels = _levels(logs)
    some = dict(list(levels.items())[:-1])
    with pytest.raises(ParameterError, match="missing"):
        ope.evaluate(logs, estimators=("clipped_ips",), max_weight=some)
    with pytest.raises(ParameterError, match="not candidates"):
        ope.evaluate(logs, estimators=("clipped_ips",), max_weight={**levels, "nobody": 2.0})
    with pytest.raises(ParameterError, match="not among the estimators"):
        ope.evaluate(logs, estimators=("ips",), max_weight=levels)
    for bad in ({}, {1: 2.0}):
        with pytest.raises(ParameterError, match="per policy must map"):
            ope.evaluate(logs, estimators=("clipped_ips",), max_weight=bad)
    with pytest.raises(ParameterError):  # a value that is not a clip level
        ope.evaluate(logs, estimators=("clipped_ips",), max_weight={p: -1.0 for p in levels})
    choice = tune_setting(logs, "dros", grid=(1.0, 10.0), rng=0)
    with pytest.raises(ParameterError, match="the choice of shrinkage"):
        ope.evaluate(logs, estimators=("clipped_ips",), max_weight=choice)
    with pytest.raises(ParameterError, match="by name"):
        ope.evaluate(logs, estimators=(ope.estimators.ClippedIPS(2.0),), max_weight=levels)
    path = tmp_path / "logs.parquet"
    pq.write_table(logs.table, path)
    with pytest.raises(ParameterError, match="not a scan"):
        ope.evaluate(ope.scan_logs(path), estimators=("clipped_ips",), max_weight=levels)


def test_auto_tunes_the_clip_level_per_candidate(logs) -> None:
    ev = ope.evaluate(logs, estimators="auto", rng=3)
    (clip,) = ev.selection.tuning
    assert isinstance(clip, SettingChoice) and clip.estimator == "clipped_ips"
    assert "clipped_ips" in ev.selection.candidates
    assert ev.settings == {"max_weight": clip.chosen}
    # the tuning is tune_setting's on every row, with the evaluation's seed
    assert tune_setting(logs, "clipped_ips", rng=3).chosen == clip.chosen
    for p, level in clip.chosen.items():
        alone = ope.evaluate(logs, estimators=("clipped_ips",), max_weight=level, rng=3)
        assert ev.estimates[(p, "clipped_ips")].value == alone.estimates[(p, "clipped_ips")].value
    d = ev.to_dict()
    assert d["estimator_selection"]["tuning"][0]["chosen"] == clip.chosen
    assert "max_weight of clipped_ips" in ev.selection.summary()
    # a clip level given: nothing is tuned
    fixed = ope.evaluate(logs, estimators="auto", max_weight=10.0, rng=3)
    assert fixed.selection.tuning == () and fixed.settings == {}
    # the reason names the tuned level when clipped IPS is the one chosen
    forced = ope.evaluation.select_estimators(
        logs, candidates=("clipped_ips",), validator="ips", n_splits=2, rng=0, max_weight=clip
    )
    from dataclasses import replace

    p = next(iter(clip.chosen))
    assert f"max_weight {clip.chosen[p]:g}, chosen by SLOPE++" in replace(
        forced, tuning=(clip,)
    ).reason(p)


def test_report_and_command_line_show_the_tuned_levels(logs, tmp_path) -> None:
    ev = ope.evaluate(logs, estimators="auto", rng=4, reward_range=(0, 1))
    page = html.unescape(re.sub("<[^>]+>", "", render_report(evaluation=ev)))
    level = ev.settings["max_weight"]
    assert "Settings per candidate: max_weight chosen from these logs by SLOPE++" in page
    for p, v in level.items():
        assert f"{p} {v:g}" in page
    # names are escaped where shown
    weird = {p: v for p, v in level.items()}
    from dataclasses import replace

    shown = render_report(evaluation=replace(ev, settings={"max_weight": {"<b>x": 2.0, **weird}}))
    assert "&lt;b&gt;x" in shown and "<b>x" not in shown
    path = tmp_path / "logs.parquet"
    pq.write_table(logs.table, path)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "ope",
            "evaluate",
            str(path),
            "--estimator",
            "auto",
            "--json",
            "--seed",
            "4",
            "--reward-range",
            "0",
            "1",
            "--report",
            str(tmp_path / "r.html"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["settings_per_policy"] == {"max_weight": level}
    assert doc["estimator_selection"]["tuning"][0]["chosen"] == level
    assert "Settings per candidate" in html.unescape((tmp_path / "r.html").read_text())
    # without --json the text names the levels
    text = subprocess.run(
        [
            sys.executable,
            "-m",
            "ope",
            "evaluate",
            str(path),
            "--estimator",
            "auto",
            "--seed",
            "4",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert text.returncode == 0, text.stderr
    assert "max_weight per candidate" in text.stdout
    assert np.isfinite(list(level.values())).all()
