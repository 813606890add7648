"""ope.monitor: anytime-valid confidence sequences over batches, the CLI `ope monitor`, the
report's monitoring section."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

import ope
from ope.exceptions import (
    EstimationError,
    MissingBoundsError,
    ParameterError,
    PolicyError,
    SchemaError,
    ValidationError,
)
from ope.intervals.betting import betting_confidence_sequence, log_wealth, running_stats
from ope.report.html import MONITOR_SECTIONS
from ope.monitor import (
    Monitor,
    best_rho2,
    mixture_margin,
    new_log_files,
    parse_interval,
    run_monitor,
)


def _batch(rng, n=300, effect=0.3, extra=False):
    a = (rng.random(n) < 0.25).astype(int)  # the logger: action 1 with probability 0.25
    df = pd.DataFrame(
        {
            "action": a,
            "propensity": np.where(a == 1, 0.25, 0.75),
            "reward": rng.binomial(1, 0.3 + effect * a).astype(float),
            "target__one": (a == 1).astype(float),
        }
    )
    if extra:
        df["x0"] = rng.normal(size=n)
        df["candidates"] = [[0, 1]] * n
        df["target_dist__one"] = [[0.0, 1.0]] * n
    return df


def _weights(df):
    return (df["target__one"] / df["propensity"]).to_numpy(), df["reward"].to_numpy()


def test_betting_value_sequence_is_the_running_max_of_the_row_sequence():
    rng = np.random.default_rng(0)
    batches = [_batch(rng, n) for n in (50, 200, 120, 400)]
    mon = Monitor(reward_range=(0.0, 1.0))
    for b in batches:
        res = mon.update(b)
    w, r = (np.concatenate(x) for x in zip(*(_weights(b) for b in batches)))
    lower, upper = betting_confidence_sequence(w, r, reward_range=(0.0, 1.0))
    ends = np.cumsum([len(b) for b in batches]) - 1
    hist = res.history
    np.testing.assert_allclose(hist["ci_low"], np.maximum.accumulate(lower[ends]), atol=1e-9)
    np.testing.assert_allclose(hist["ci_high"], np.minimum.accumulate(upper[ends]), atol=1e-9)
    assert hist["estimate"].iloc[-1] == pytest.approx(np.mean(w * r), rel=1e-12)


def test_betting_difference_by_hand_and_its_p_value():
    rng = np.random.default_rng(1)
    df = _batch(rng, 500)
    mon = Monitor(reward_range=(0.0, 1.0))
    row = mon.update(df).current.iloc[0]
    w, r = _weights(df)
    y = 0.5 * (w * r - r + 1.0)
    from ope.intervals.betting import lower_from_sums

    total, squares = running_stats(y)
    threshold = math.log(2.0 / 0.05)
    low = 2.0 * lower_from_sums(total[-1], squares[-1], y.size, threshold) - 1.0
    assert row["difference_low"] == pytest.approx(low, abs=1e-9)
    assert row["difference"] == pytest.approx(np.mean(w * r - r), rel=1e-12)
    s = total - 0.5 * np.arange(1, y.size + 1)
    best = np.max(np.where(s > 0, log_wealth(np.maximum(s, 0.0), squares), -np.inf))
    assert row["p_value"] == pytest.approx(min(1.0, math.exp(-max(best, 0.0))), rel=1e-9)
    # the decision agrees with the sequence
    assert (row["decision"] == "better") == (row["difference_low"] > 0)


def test_batches_split_differently_end_at_the_same_sums():
    rng = np.random.default_rng(2)
    df = _batch(rng, 900)
    one = Monitor(reward_range=(0.0, 1.0))
    one.update(df)
    three = Monitor(reward_range=(0.0, 1.0))
    for part in np.array_split(np.arange(900), 3):
        three.update(df.iloc[part].reset_index(drop=True))
    np.testing.assert_allclose(one._sums.total, three._sums.total, rtol=1e-12)
    np.testing.assert_allclose(one._sums.squares, three._sums.squares, rtol=1e-12)
    # the intersection over looks can only narrow the last interval
    a, b = one.result().current.iloc[0], three.result().current.iloc[0]
    assert b["ci_low"] >= a["ci_low"] - 1e-12 and b["ci_high"] <= a["ci_high"] + 1e-12


def test_asymptotic_sequence_by_hand():
    rng = np.random.default_rng(3)
    df = _batch(rng, 1000)
    mon = Monitor(reward_range=(0.0, 2.0), method="asymptotic", planned_rows=300)
    row = mon.update(df.assign(reward=2.0 * df["reward"])).current.iloc[0]
    w, r = _weights(df)  # on the [0, 1] scale: reward / 2
    phi = w * r
    rho2 = best_rho2(300, 0.05)
    half = mixture_margin(phi.size, phi.var(), rho2, 0.05)
    assert row["estimate"] == pytest.approx(2.0 * phi.mean(), rel=1e-12)
    assert row["ci_low"] == pytest.approx(max(0.0, 2.0 * (phi.mean() - half)), rel=1e-9)
    assert row["ci_high"] == pytest.approx(min(2.0, 2.0 * (phi.mean() + half)), rel=1e-9)


def test_best_rho2_minimizes_the_margin_at_the_planned_rows():
    from scipy.optimize import minimize_scalar

    for t, alpha in ((100, 0.05), (10_000, 0.1), (500, 0.01)):
        got = best_rho2(t, alpha)
        res = minimize_scalar(
            lambda lr: float(mixture_margin(t, 1.0, math.exp(lr), alpha)),
            bounds=(-30, 5),
            method="bounded",
            options={"xatol": 1e-10},
        )
        assert got == pytest.approx(math.exp(res.x), rel=1e-3)


def test_dr_uses_only_earlier_rows_for_its_reward_model():
    rng = np.random.default_rng(4)
    first = _batch(rng, 400, extra=True)
    second = _batch(rng, 400, extra=True)
    flipped = second.assign(reward=1.0 - second["reward"])
    results = []
    for b2 in (second, flipped):
        mon = Monitor(reward_range=(0.0, 1.0), estimator="dr")
        mon.update(first)
        before = mon._sums.mean.copy()
        mon.update(b2)
        results.append((before, mon._sums.mean.copy()))
    # the first batch's DR terms use the constant 0.5: 0.5 + w (r - 0.5)
    w, r = _weights(first)
    assert results[0][0][0, 0] == pytest.approx(np.mean(0.5 + w * (r - 0.5)), rel=1e-12)
    # the second batch's predictions do not see its own rewards: the means differ by w (r - r')
    w2, r2 = _weights(second)
    shift = (results[0][1][0, 0] - results[1][1][0, 0]) * 2  # two batches of equal size
    assert shift == pytest.approx(np.mean(w2 * (r2 - (1.0 - r2))), rel=1e-9)


def test_dr_with_betting_is_refused_and_other_bad_settings():
    with pytest.raises(ParameterError, match="lower bound"):
        Monitor(reward_range=(0, 1), estimator="dr", method="betting")
    with pytest.raises(MissingBoundsError):
        Monitor(reward_range=None)
    with pytest.raises(ParameterError, match="`estimator`"):
        Monitor(reward_range=(0, 1), estimator="snips")
    with pytest.raises(ParameterError, match="`simultaneous`"):
        Monitor(reward_range=(0, 1), simultaneous="yes")


def test_bad_batches_are_named():
    rng = np.random.default_rng(5)
    mon = Monitor(reward_range=(0.0, 1.0))
    mon.update(_batch(rng))
    with pytest.raises(ValidationError, match="outside the reward range.*this batch: 2.0"):
        mon.update(_batch(rng).assign(reward=2.0))
    with pytest.raises(SchemaError, match="candidates"):
        mon.update(_batch(rng).rename(columns={"target__one": "target__two"}))
    with pytest.raises(ParameterError, match="`batches`"):
        run_monitor(_batch(rng), reward_range=(0, 1))
    with pytest.raises(EstimationError, match="no batch"):
        run_monitor([], reward_range=(0, 1))


def test_state_round_trip_continues_identically():
    rng = np.random.default_rng(6)
    batches = [_batch(rng, 200) for _ in range(4)]
    whole = Monitor(reward_range=(0.0, 1.0))
    for b in batches:
        want = whole.update(b)
    half = Monitor(reward_range=(0.0, 1.0))
    for b in batches[:2]:
        half.update(b)
    state = json.loads(json.dumps(half.state()))
    resumed = Monitor.from_state(state)
    for b in batches[2:]:
        got = resumed.update(b)
    pd.testing.assert_frame_equal(got.history, want.history, rtol=1e-12)
    with pytest.raises(ParameterError, match="version"):
        Monitor.from_state({"version": 99})
    state["sums"]["total"] = [[1.0]]
    with pytest.raises(ParameterError, match="`total`"):
        Monitor.from_state(state)


def test_simultaneous_splits_the_level_and_decides_later():
    rng = np.random.default_rng(7)
    df = _batch(rng, 400)
    df["target__zero"] = (df["action"] == 0).astype(float)
    per = Monitor(reward_range=(0, 1)).update(df).current
    joint = Monitor(reward_range=(0, 1), simultaneous=True).update(df).current
    assert (joint["ci_high"] - joint["ci_low"] > per["ci_high"] - per["ci_low"]).all()
    assert "simultaneous=True" in " ".join(Monitor(reward_range=(0, 1)).update(df).notes)


def test_until_decided_stops_early():
    rng = np.random.default_rng(8)
    read = []

    def batches():
        for k in range(50):
            read.append(k)
            yield _batch(rng, 300, effect=0.4)

    res = run_monitor(batches(), reward_range=(0, 1), until_decided=True)
    assert res.decided and len(read) == res.looks < 50


@pytest.mark.slow
def test_time_uniform_coverage_under_a_learning_logger():
    """300 runs of 30 looks of 100 rows under an epsilon-greedy logger that learns: the truth
    leaves the betting sequence in at most alpha of the runs (plus sampling error)."""
    mu = np.array([0.3, 0.6])
    missed = 0
    runs = 300
    for seed in range(runs):
        rng = np.random.default_rng(seed)
        mon = Monitor(reward_range=(0.0, 1.0))
        sums, counts = np.zeros(2), np.zeros(2)
        ever = False
        for _ in range(30):
            greedy = int(np.argmax(np.where(counts > 0, sums / np.maximum(counts, 1), 1.0)))
            p = np.full(2, 0.1)
            p[greedy] = 0.9
            a = (rng.random(100) < p[1]).astype(int)
            r = rng.binomial(1, mu[a]).astype(float)
            np.add.at(sums, a, r)
            np.add.at(counts, a, 1.0)
            row = mon.update(
                pd.DataFrame({"action": a, "propensity": p[a], "reward": r, "target__one": a * 1.0})
            ).current.iloc[0]
            ever |= not (row["ci_low"] <= mu[1] <= row["ci_high"])
        missed += ever
    assert missed / runs <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / runs)


def test_new_log_files_order_skip_and_changes(tmp_path):
    now = time.time()
    for name, age in (("b.parquet", 30), ("a.parquet", 20), ("_SUCCESS", 40), (".c.parquet", 50)):
        path = tmp_path / name
        path.write_bytes(b"x")
        os.utime(path, (now - age, now - age))
    (tmp_path / "fresh.parquet").write_bytes(b"x")
    names, notes = new_log_files(tmp_path, {}, settle=5.0, now=now)
    assert names == ["b.parquet", "a.parquet"] and notes == []
    st = (tmp_path / "b.parquet").stat()
    seen = {"b.parquet": [st.st_size + 1, st.st_mtime_ns], "gone.parquet": [1, 1]}
    names, notes = new_log_files(tmp_path, seen, settle=0.0, now=now + 60)
    assert names == ["a.parquet", "fresh.parquet"]
    assert any("changed" in n for n in notes) and any("removed" in n for n in notes)


@pytest.mark.parametrize(
    ("text", "seconds"), [("30s", 30.0), ("10m", 600.0), ("1h", 3600.0), ("2", 2.0)]
)
def test_parse_interval(text, seconds):
    assert parse_interval(text, "every") == seconds


@pytest.mark.parametrize("text", ["", "-1s", "soon", "nanm", "infh"])
def test_parse_interval_refuses(text):
    with pytest.raises(ParameterError, match="`every`"):
        parse_interval(text, "every")


def test_report_sections_and_escaping():
    from ope.report import render_report

    rng = np.random.default_rng(9)
    mon = Monitor(reward_range=(0, 1))
    res = mon.update(_batch(rng).rename(columns={"target__one": "target__<b>x</b>"}))
    page = render_report(monitoring=res)
    ids = [s.split('"')[1] for s in page.split("<section id=")[1:]]
    assert tuple(ids) == MONITOR_SECTIONS
    assert "&lt;b&gt;x&lt;/b&gt;" in page and "<b>x</b>" not in page
    sample = ope.load_sample(columns=["action", "propensity", "reward", "target__greedy"])
    ev = ope.evaluate(sample.table, estimators=("ips",), reward_range=(0, 1))
    full = render_report(evaluation=ev, monitoring=res)
    assert 'id="monitoring"' in full and "confidence sequence" in full
    with pytest.raises(ParameterError, match="`monitoring`"):
        render_report(monitoring=ev)


def _cli(*argv, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "ope", *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


def test_cli_reads_new_files_resumes_and_reports(tmp_path):
    rng = np.random.default_rng(10)
    logs = tmp_path / "logs"
    logs.mkdir()
    for k in range(2):
        _batch(rng).to_parquet(logs / f"b{k}.parquet")
    state = tmp_path / "state.json"
    first = _cli("monitor", str(logs), "--reward-range", "0", "1", "--state", str(state), "--json")
    doc = json.loads(first.stdout)
    assert first.returncode == 0 and doc["monitor"]["looks"] == 2
    assert doc["files"] == ["b0.parquet", "b1.parquet"] and "look 2" in first.stderr
    _batch(rng).to_parquet(logs / "b2.parquet")
    report = tmp_path / "m.html"
    again = _cli(
        "monitor",
        str(logs),
        "--reward-range",
        "0",
        "1",
        "--state",
        str(state),
        "--json",
        "--report",
        str(report),
    )
    doc = json.loads(again.stdout)
    assert again.returncode == 0 and doc["monitor"]["looks"] == 3 and doc["looks_this_run"] == 1
    assert report.read_text().count('<section id="monitoring"') == 1
    # a changed setting on resume is a usage error naming the flag
    bad = _cli("monitor", str(logs), "--reward-range", "0", "2", "--state", str(state), "--json")
    assert bad.returncode == 2 and json.loads(bad.stdout)["error"]["flag"] == "--reward-range"


def test_cli_stops_when_decided_and_on_max_looks(tmp_path):
    rng = np.random.default_rng(11)
    for k in range(6):
        _batch(rng, 500, effect=0.5).to_parquet(tmp_path / f"b{k}.parquet")
    out = _cli("monitor", str(tmp_path), "--reward-range", "0", "1", "--until-decided", "--json")
    doc = json.loads(out.stdout)
    assert doc["stopped"] == "decided" and doc["monitor"]["looks"] < 6
    out = _cli("monitor", str(tmp_path), "--reward-range", "0", "1", "--max-looks", "2", "--json")
    assert json.loads(out.stdout)["stopped"] == "max looks"


def test_cli_watches_with_every(tmp_path):
    rng = np.random.default_rng(12)
    _batch(rng).to_parquet(tmp_path / "b0.parquet")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ope",
            "monitor",
            str(tmp_path),
            "--reward-range",
            "0",
            "1",
            "--every",
            "0.2",
            "--settle",
            "0",
            "--max-looks",
            "2",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(1.0)
        _batch(rng).to_parquet(tmp_path / "b1.parquet")
        out, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    doc = json.loads(out)
    assert doc["stopped"] == "max looks" and doc["files"] == ["b0.parquet", "b1.parquet"]


def test_cli_errors(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    out = _cli("monitor", str(empty), "--reward-range", "0", "1", "--json")
    assert out.returncode == 65 and "no log file" in json.loads(out.stdout)["error"]["message"]
    out = _cli("monitor", str(empty), "--json")
    assert out.returncode == 2 and json.loads(out.stdout)["error"]["flag"] == "--reward-range"
    out = _cli("monitor", str(empty), "--reward-range", "0", "1", "--every", "soon", "--json")
    assert out.returncode == 2 and json.loads(out.stdout)["error"]["flag"] == "--every"
    out = _cli("monitor", str(empty), "--reward-range", "0", "1", "--policies", "p.csv", "--json")
    assert out.returncode == 2 and json.loads(out.stdout)["error"]["flag"] == "--policies"
    # dr with betting (a usage error naming --method): tests/test_cli_contract.py


def test_asymptotic_start_and_degenerate_looks_do_not_stick():
    """A one-row look, or a start without spread, neither fixes the p-value at 0 nor
    collapses the sequence (review findings)."""
    one = pd.DataFrame({"action": [1], "propensity": [0.5], "reward": [1.0], "target__one": [1.0]})
    mon = Monitor(reward_range=(0, 1), method="asymptotic")
    row = mon.update(one).current.iloc[0]
    assert row["p_value"] == 1.0 and (row["ci_low"], row["ci_high"]) == (0.0, 1.0)
    assert any("effective sample size" in n for n in mon.result().notes)
    rng = np.random.default_rng(13)
    zeros = _batch(rng, 800).assign(reward=0.0)
    mon = Monitor(reward_range=(0, 1), method="asymptotic")
    first = mon.update(zeros).current.iloc[0]
    assert first["ci_high"] > 0.0  # the variance floor keeps an interval
    for _ in range(6):
        last = mon.update(_batch(rng, 800, effect=0.4)).current.iloc[0]
    assert last["ci_low"] < last["estimate"] < last["ci_high"]  # not stuck at the first look
    huge = _batch(rng, 200).assign(propensity=1e-160)  # refused when read: w^2 would overflow
    with pytest.raises(ValidationError, match="propensity_out_of_range.*overflow float64"):
        Monitor(reward_range=(0, 1), method="asymptotic").update(
            huge.assign(**{"target__one": 1.0})
        )


def test_dr_with_a_candidate_on_actions_never_logged():
    rng = np.random.default_rng(14)
    mon = Monitor(reward_range=(0, 1), estimator="dr")
    for _ in range(3):
        b = _batch(rng, 300, extra=True)
        # the candidate puts half its mass on action 2, which the logger never takes
        b["candidates"] = [[0, 1, 2]] * len(b)
        b["target_dist__one"] = [[0.0, 0.5, 0.5]] * len(b)
        b["target__one"] = np.where(b["action"] == 1, 0.5, 0.0)
        res = mon.update(b)
    row = res.current.iloc[0]
    assert np.isfinite(row["estimate"]) and row["ci_low"] <= row["ci_high"]


def test_simultaneous_splits_over_values_and_differences():
    mon = Monitor(reward_range=(0, 1), simultaneous=True)
    mon.update(_batch(np.random.default_rng(15)).assign(target__two=0.5))
    assert mon._alpha() == pytest.approx(0.05 / 4)


def test_cli_sets_a_bad_file_aside_and_keeps_watching(tmp_path):
    rng = np.random.default_rng(16)
    logs = tmp_path / "logs"
    logs.mkdir()
    _batch(rng).to_parquet(logs / "a.parquet")
    _batch(rng).assign(reward=5.0).to_parquet(logs / "b.parquet")
    _batch(rng).to_parquet(logs / "c.parquet")
    state = tmp_path / "s.json"
    argv = ("monitor", str(logs), "--reward-range", "0", "1", "--state", str(state), "--json")
    out = _cli(*argv)
    doc = json.loads(out.stdout)
    assert out.returncode == 65 and doc["monitor"]["looks"] == 2
    assert list(doc["rejected"]) == ["b.parquet"] and "reward range" in doc["rejected"]["b.parquet"]
    again = _cli(*argv)  # the next run reads a rejected file again (its flags may be the cause)
    assert again.returncode == 65 and json.loads(again.stdout)["monitor"]["looks"] == 2
    _batch(rng).to_parquet(logs / "b.parquet")  # fixed: read and monitored
    fixed = _cli(*argv)
    doc = json.loads(fixed.stdout)
    assert fixed.returncode == 0 and doc["monitor"]["looks"] == 3 and doc["rejected"] == {}


def test_cli_ends_a_watch_on_sigterm_with_every_look(tmp_path):
    import signal

    rng = np.random.default_rng(17)
    logs = tmp_path / "logs"
    logs.mkdir()
    _batch(rng).to_parquet(logs / "b0.parquet")
    report = tmp_path / "r.html"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ope",
            "monitor",
            str(logs),
            "--reward-range",
            "0",
            "1",
            "--every",
            "0.2",
            "--settle",
            "0",
            "--report",
            str(report),
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.time() + 60
        while not report.exists() and time.time() < deadline:
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    doc = json.loads(out)
    assert doc.get("stopped") == "interrupted", (doc.get("error"), err) and doc["monitor"][
        "looks"
    ] == 1
    assert report.read_text().count('id="monitoring"') == 1


def test_overflowing_weights_give_the_error_without_numpy_warnings():
    import warnings

    import ope
    from ope.exceptions import ValidationError

    g = np.random.default_rng(0)
    a = g.integers(0, 3, 200)
    batch = pd.DataFrame(
        {
            "action": a,
            "reward": g.binomial(1, 0.5, 200).astype(float),
            "propensity": 1e-300,
            "target__cand": (a == 0).astype(float),
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ope.OPEWarning)
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(ValidationError):
            ope.Monitor(reward_range=(0, 1)).update(batch)


def _same_state(mon, rows, looks):
    return mon.result().rows == rows and mon.result().looks == looks


@pytest.mark.parametrize("method", ["betting", "asymptotic"])
def test_sampling_weights_are_refused_naming_their_column(method):
    rng = np.random.default_rng(17)
    df = _batch(rng, 200)
    mon = Monitor(reward_range=(0, 1), method=method)
    mon.update(df)
    weighted = _batch(rng, 200).assign(weight=np.where(df["action"] == 1, 10.0, 1.0))
    with pytest.raises(
        EstimationError, match=rf"'{method}' does not take sampling weights.*`weight`"
    ):
        mon.update(weighted)
    assert _same_state(mon, 200, 1)  # refused: nothing counted
    renamed = weighted.rename(columns={"weight": "w"})
    with pytest.raises(EstimationError, match="column `w`"):
        Monitor(reward_range=(0, 1), method=method, weight_column="w").update(renamed)
    with pytest.raises(EstimationError, match="column `w`"):
        run_monitor([renamed], reward_range=(0, 1), method=method, weight_column="w")
    with pytest.raises(SchemaError, match="weight_column='w' is not a column"):
        Monitor(reward_range=(0, 1), method=method, weight_column="w").update(df)


def test_bad_or_unit_sampling_weights():
    rng = np.random.default_rng(18)
    df = _batch(rng, 200)
    # the batch is read by the read rules of the weight column (weight_missing, weight_out_of_range)
    with pytest.raises(ValidationError, match=r"weight_missing: 1 \(rows 3\)"):
        Monitor(reward_range=(0, 1)).update(df.assign(weight=np.r_[1, 1, 1, np.nan, [1] * 196]))
    with pytest.raises(ValidationError, match=r"weight_out_of_range: 1 \(rows 0\)"):
        Monitor(reward_range=(0, 1)).update(df.assign(weight=np.r_[0.0, [1] * 199]))
    with pytest.raises(ParameterError, match="`weight_column` must be a non-blank str"):
        Monitor(reward_range=(0, 1), weight_column=3)
    # weights that are all 1 are the unweighted rows
    plain = Monitor(reward_range=(0, 1)).update(df).history
    unit = Monitor(reward_range=(0, 1)).update(df.assign(weight=1.0)).history
    pd.testing.assert_frame_equal(unit, plain)


@pytest.mark.parametrize("method", ["betting", "asymptotic"])
def test_an_estimate_outside_its_sequence_is_noted(method):
    one = pd.DataFrame({"action": [1], "propensity": [0.5], "reward": [1.0], "target__one": [1.0]})
    res = Monitor(reward_range=(0, 1), method=method).update(one)
    row = res.current.iloc[0]
    assert row["estimate"] == 2.0 and (row["ci_low"], row["ci_high"]) == (0.0, 1.0)
    assert any("of one lies outside its confidence sequence" in n for n in res.notes)
    rng = np.random.default_rng(19)
    inside = Monitor(reward_range=(0, 1), method=method).update(_batch(rng, 2000))
    assert not any("outside its confidence sequence" in n for n in inside.notes)


def test_a_batch_without_rows_is_a_look_that_changes_nothing(tmp_path):
    rng = np.random.default_rng(20)
    df = _batch(rng, 300)
    mon = Monitor(reward_range=(0, 1))
    first = mon.update(df).current
    empty = df.iloc[:0]
    path = tmp_path / "hour.parquet"
    empty.to_parquet(path)
    for k, batch in enumerate((empty, str(path), pd.DataFrame()), start=2):
        res = mon.update(batch)
        assert res.looks == k and res.rows == 300
        pd.testing.assert_frame_equal(res.current.drop(columns="look"), first.drop(columns="look"))
        assert res.current["look"].tolist() == [k]
    assert any("without rows" in n for n in res.notes)
    # an empty first look: the looks after it are the same as without it
    late = Monitor(reward_range=(0, 1))
    assert late.update(empty).looks == 1 and late.result().current.empty
    pd.testing.assert_frame_equal(
        late.update(df).current.drop(columns="look"), first.drop(columns="look")
    )
    # a batch whose every row is rejected is not an empty one
    with pytest.raises(ValidationError, match="reward_missing"):
        mon.update(df.iloc[:1].assign(reward=np.nan))


def test_batches_whose_event_ids_restart_are_each_counted():
    """Hourly files numbered from 0 are common (the simulator's batches are): every batch is
    counted, not refused as a repeat of the first (a review caught a check that refused them)."""
    rng = np.random.default_rng(21)
    mon = Monitor(reward_range=(0, 1))
    for _ in range(3):  # three batches, ids 0..199 each
        mon.update(_batch(rng, 200).assign(event_id=np.arange(200)))
    assert _same_state(mon, 600, 3)


def test_dr_without_distributions_is_refused_in_the_monitors_terms():
    mon = Monitor(reward_range=(0, 1), estimator="dr")
    with pytest.raises(
        PolicyError,
        match=r"a DR monitor \(estimator='dr'\) needs.*target_dist__one.*estimator='ips'",
    ):
        mon.update(_batch(np.random.default_rng(22)))


def test_cli_takes_an_empty_file_as_a_look_and_sets_a_weighted_one_aside(tmp_path):
    """ope monitor on a folder: a file without rows (an hour with no traffic) is a look that
    changes nothing (it was rejected as 'holds no rows'); a file with sampling weights, which
    the monitor refuses, is set aside and said, and the other files are still monitored (the
    whole run ended with exit 1 before)."""
    rng = np.random.default_rng(11)
    logs = tmp_path / "logs"
    logs.mkdir()
    _batch(rng).to_parquet(logs / "b0.parquet")
    _batch(rng).iloc[:0].to_parquet(logs / "b1.parquet")
    weighted = _batch(rng)
    weighted.assign(weight=np.where(np.arange(len(weighted)) % 2, 2.0, 1.0)).to_parquet(
        logs / "b2.parquet"
    )
    _batch(rng).to_parquet(logs / "b3.parquet")
    run = _cli("monitor", str(logs), "--reward-range", "0", "1", "--json")
    doc = json.loads(run.stdout)
    assert run.returncode == 65, run.stderr
    assert doc["monitor"]["looks"] == 3 and doc["files"] == [
        "b0.parquet",
        "b1.parquet",
        "b3.parquet",
    ]
    assert "rejected b2.parquet: EstimationError" in run.stderr and "weight" in run.stderr
