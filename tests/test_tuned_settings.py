"""Settings per candidate policy: ``max_weight``/``tau``/``shrinkage`` as a mapping, a
SettingChoice or a tuning rule's name (ope.evaluation.tuning.evaluate_with_settings), and
``estimators="auto", max_weight="slope"`` tuning clipped IPS's clip level per candidate before
the cross-validated choice, from the API, the command line and the report."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys

import numpy as np
import pyarrow as pa
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
    with pytest.raises(ParameterError, match="sequence of names"):
        ope.evaluate(logs, estimators=(ope.estimators.ClippedIPS(2.0),), max_weight=levels)
    path = tmp_path / "logs.parquet"
    pq.write_table(logs.table, path)
    with pytest.raises(ParameterError, match="not a scan"):
        ope.evaluate(ope.scan_logs(path), estimators=("clipped_ips",), max_weight=levels)


def test_a_rule_name_tunes_the_setting_on_the_rows(logs) -> None:
    ev = ope.evaluate(logs, estimators=("ips", "clipped_ips"), max_weight="mse", rng=5)
    (clip,) = ev.tuning
    assert clip.rule.startswith("smallest MSE bound") and ev.settings["max_weight"] == clip.chosen
    assert clip.chosen == tune_setting(logs, "clipped_ips", rule="mse", rng=5).chosen
    assert ev.to_dict()["tuning"][0]["chosen"] == clip.chosen
    with pytest.raises(ParameterError, match="tuning rule among slope, mse"):
        ope.evaluate(logs, estimators=("clipped_ips",), max_weight="lepski")
    with pytest.raises(ParameterError, match="tuning rule"):
        ope.evaluate(logs, estimators="auto", max_weight="lepski")


def test_auto_tunes_the_clip_level_per_candidate_when_asked(logs) -> None:
    # not by default: the tuned clip level made the choice worse on heavy tails
    # (benchmarks/estimator_selection.py --tuned-clip)
    default = ope.evaluate(logs, estimators="auto", rng=3)
    assert "clipped_ips" not in default.estimators
    assert default.selection.tuning == () and default.settings == {}
    ev = ope.evaluate(logs, estimators="auto", max_weight="slope", rng=3)
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
    ev = ope.evaluate(logs, estimators="auto", max_weight="slope", rng=4, reward_range=(0, 1))
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
            "--max-weight",
            "slope",
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
            "--max-weight",
            "slope",
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


def test_only_estimators_with_a_setting_per_candidate(logs) -> None:
    """With no estimator of one setting the base run is the varying one at the first value:
    its statistics hold that one clip level, so they are not kept and every comparison pairs
    the rows at the candidate's own level (review finding)."""
    levels = _levels(logs)
    ev = ope.evaluate(
        logs, estimators=("clipped_ips",), max_weight=levels, rng=0, reward_range=(0, 1)
    )
    assert ev.statistics is None
    comps = ev.comparisons().set_index(["policy", "estimator"])
    for p in levels:
        want = compare(ev.estimates[(p, "clipped_ips")], ev.logging)
        assert comps.loc[(p, "clipped_ips"), "difference"] == pytest.approx(
            want.value, rel=1e-12, abs=1e-15
        )
        assert comps.loc[(p, "clipped_ips"), "difference"] == pytest.approx(
            ev.compare(p, estimator="clipped_ips").value, rel=1e-12, abs=1e-15
        )


def test_the_spliced_evaluation_keeps_its_model_notes_and_order(logs) -> None:
    names = list(ope.evaluate(logs, estimators=("ips",)).policies)
    tau = {p: [5.0, 50.0][i % 2] for i, p in enumerate(names)}
    ev = ope.evaluate(logs, estimators=("ips", "switch_dr"), tau=tau, rng=0)
    one = ope.evaluate(logs, estimators=("ips", "switch_dr"), tau=5.0, rng=0)
    assert ev.model_columns == one.model_columns and ev.model_columns is not None
    # one interval-method fallback note, for every estimator that fell back
    fell = ope.evaluate(
        logs,
        estimators=("ips", "dr", "switch_dr"),
        tau=tau,
        rng=0,
        ci="log_smoothing",
        ci_fallback="normal",
        reward_range=(0, 1),
    )
    fallback = [n for n in fell.notes if "does not apply to" in n]
    assert fallback == [
        "ci='log_smoothing' does not apply to dr, switch_dr: their intervals are normal"
    ]
    # the segments' table in an evaluation's order: segment, candidate, estimator
    column = next(c for c in logs.table.column_names if c.startswith("x"))
    table = logs.table.append_column(
        "seg", pa.array(np.where(logs.table.column(column).to_numpy() > 0, "hi", "lo"))
    )
    seg = ope.evaluate(
        ope.read_logs(table), estimators=("ips", "clipped_ips"), max_weight=_levels(logs), by="seg"
    )
    keys = list(seg.segment_estimates)
    cells = list(dict.fromkeys(k[:2] for k in keys))
    assert keys == [(c, g, p, e) for c, g in cells for p in seg.policies for e in seg.estimators]


def test_more_refusals(logs) -> None:
    levels = _levels(logs)
    with pytest.raises(ParameterError, match="twice"):
        ope.evaluate(logs, estimators=("ips", "clipped_ips", "clipped_ips"), max_weight=levels)
    first = next(iter(levels))
    for bad in ([5], "5", float("nan"), -2.0, True):
        with pytest.raises(ParameterError, match=first):
            ope.evaluate(logs, estimators=("clipped_ips",), max_weight={**levels, first: bad})
    for estimators in ((1,), ()):
        with pytest.raises(ParameterError, match="sequence of names"):
            ope.evaluate(logs, estimators=estimators, max_weight=levels)
    # None is the default estimators, which do not include clipped_ips
    with pytest.raises(ParameterError, match="clipped_ips is not among the estimators"):
        ope.evaluate(logs, estimators=None, max_weight=levels)


def test_auto_with_other_options(logs, tmp_path) -> None:
    """Options of the evaluation that the tuning does not take (review findings)."""
    boot = ope.evaluate(
        logs, estimators="auto", max_weight="slope", ci="bootstrap", n_resamples=100, rng=0
    )
    assert boot.ci_method == "bootstrap" and "clipped_ips" in boot.estimators
    with_tau = ope.evaluate(logs, estimators="auto", tau=5.0, rng=0)
    assert "switch_dr" in with_tau.estimators and not with_tau.settings
    plain = ope.read_logs(ContextualBandit(n_actions=5, n_contexts=50, seed=0).sample(800, rng=0))
    no_dists = ope.evaluate(plain, estimators="auto", tau=5.0, rng=0)
    assert "switch_dr" not in no_dists.estimators
    assert any("`tau` was given but switch_dr does not apply" in n for n in no_dists.notes)
    path = tmp_path / "logs.parquet"
    pq.write_table(logs.table, path)
    for flags in (
        ["--max-weight", "5"],
        ["--tau", "5"],
        ["--max-weight", "slope", "--ci", "bootstrap", "--n-resamples", "100"],
    ):
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
                "0",
                *flags,
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 0, (flags, out.stdout[-2000:])
        doc = json.loads(out.stdout)
        assert doc["ok"]
        if flags == ["--max-weight", "5"]:
            assert (
                "settings_per_policy" not in doc
                and "clipped_ips" in doc["estimator_selection"]["candidates"]
            )
