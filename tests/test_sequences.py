"""Language-model policies from token log-probabilities (ope.sequences) and their simulator
(ope.simulate.TokenModel): reading and refusals, log-space weights on hand-computed vectors and
at thousands of tokens, the on-policy identity, the exact truth of the simulator, the per-step
path, the KL estimators, and the audit's signatures."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ope
from ope.exceptions import (
    DataFileError,
    EstimationError,
    ParameterError,
    SchemaError,
    ValidationError,
)
from ope.report import render_report
from ope.sequences import read_sequences
from ope.simulate import TokenModel


def _frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "prompt_id": [0, 1, 0],
            "behavior_logprobs": [[-0.1, -0.7], [-0.4], [-1.0, -0.2, -0.3]],
            "target_logprobs__tuned": [[-0.2, -0.5], [-0.4], [-0.5, -0.2, -0.9]],
            "reward": [1.0, 0.0, 2.0],
            "step_rewards": [[0.0, 1.0], [0.0], [0.5, 0.5, 1.0]],
        }
    )


@pytest.mark.filterwarnings("ignore::ope.exceptions.SmallSampleWarning")
def test_log_weights_and_ips_on_a_hand_computed_vector(tmp_path):
    logs = read_sequences(_frame())
    want = np.array([0.1, 0.0, -0.1])  # sums of target - behavior per response
    np.testing.assert_allclose(logs.log_weights()[:, 0], want, atol=1e-15)
    np.testing.assert_allclose(
        logs.log_weights("length_normalized")[:, 0], want / [2, 1, 3], atol=1e-15
    )
    np.testing.assert_array_equal(logs.token_counts, [2, 1, 3])
    ev = ope.evaluate_sequences(logs, estimators=["ips", "snips"])
    w = np.exp(want)
    r = np.array([1.0, 0.0, 2.0])
    assert ev["tuned", "ips"].value == pytest.approx(np.mean(w * r), rel=1e-13)
    assert ev["tuned", "snips"].value == pytest.approx(np.sum(w * r) / np.sum(w), rel=1e-13)
    assert any("log space" in n for n in ev.evaluation.notes)
    # the same rows from JSON lines and from parquet
    jsonl = tmp_path / "responses.jsonl"
    jsonl.write_text("\n".join(json.dumps(rec) for rec in _frame().to_dict(orient="records")))
    parquet = tmp_path / "responses.parquet"
    pq.write_table(pa.Table.from_pandas(_frame()), parquet)
    for path in (jsonl, parquet):
        again = read_sequences(path)
        np.testing.assert_allclose(again.log_weights(), logs.log_weights(), atol=1e-15)


def test_summed_logprobs_per_response():
    frame = pd.DataFrame(
        {"behavior_logprobs": [-3.0, -1.0], "target_logprobs__b": [-2.0, -1.5], "reward": [1, 0]}
    )
    logs = read_sequences(frame)
    assert logs.token_counts is None
    np.testing.assert_allclose(logs.log_weights()[:, 0], [1.0, -0.5])
    with pytest.raises(ParameterError, match="per-token"):
        logs.log_weights("length_normalized")
    with pytest.raises(SchemaError, match="per-token"):
        ope.sequence_trajectories(logs)


def test_thousands_of_tokens_stay_in_log_space():
    # 3,000 tokens per response: the probabilities underflow (about e^-3000), the weights do not
    g = np.random.default_rng(0)
    n, length = 200, 3000
    behavior = [g.uniform(-1.5, -0.5, length) for _ in range(n)]
    target = [b + g.normal(0.0, 0.01, length) for b in behavior]
    frame = pd.DataFrame(
        {
            "behavior_logprobs": behavior,
            "target_logprobs__near": [np.minimum(t, 0.0) for t in target],
            "reward": g.random(n),
        }
    )
    logs = read_sequences(frame)
    want = np.array([np.sum(np.minimum(t, 0.0) - b) for t, b in zip(target, behavior)])
    assert np.exp(np.sum(behavior[0])) == 0.0  # the linear-space probability underflows
    np.testing.assert_allclose(logs.log_weights()[:, 0], want, rtol=1e-11, atol=1e-11)
    ev = ope.evaluate_sequences(logs, estimators=["snips"])
    w = np.exp(want)
    r = frame["reward"].to_numpy()
    assert ev["near", "snips"].value == pytest.approx(np.sum(w * r) / np.sum(w), rel=1e-11)


def test_on_policy_identity():
    env = TokenModel(seed=0)
    table = env.sample(3000, rng=0)
    logs = read_sequences(table)
    j = logs.policies.index("sampler")
    assert np.max(np.abs(logs.log_weights()[:, j])) <= 1e-12
    ev = ope.evaluate_sequences(logs, ["sampler"], estimators=["ips"], on_policy="sampler")
    assert ev["sampler", "ips"].value == pytest.approx(logs.reward.mean(), abs=1e-12)
    assert any("every token ratio is 1" in n for n in ev.evaluation.notes)
    assert ev.verdicts == {"sampler": "evaluable"} and ev.evaluable == ["sampler"]
    json.dumps(ev.to_dict())
    assert "evaluable" in ev.summary()


def test_the_simulator_against_its_own_draws_and_its_exact_kl():
    env = TokenModel(seed=0)
    table = env.sample(100_000, rng=1)
    r = table.column("reward").to_numpy()
    assert r.mean() == pytest.approx(env.true_value("logging"), abs=4 * r.std() / math.sqrt(r.size))
    logs = read_sequences(table)
    lw = logs.log_weights()
    for j, name in enumerate(logs.policies):
        w = np.exp(lw[:, j])
        ips = w * r
        tol = 4 * ips.std() / math.sqrt(r.size)
        assert ips.mean() == pytest.approx(env.true_value(name), abs=tol), name
    d = ope.sequence_divergences(logs).table().set_index("policy")
    for name in ("cooler", "tuned"):
        exact = env.kl("sampler", name)
        for k in ("k1", "k3"):
            assert abs(d.loc[name, k] - exact) < 4 * d.loc[name, f"{k}_se"], (name, k)
        assert d.loc[name, "k3"] >= 0 and d.loc[name, "k2"] >= 0
    assert d.loc["sampler", "k1"] == 0.0 and d.loc["sampler", "ess_share"] == pytest.approx(1.0)
    # a truncated sampler: an untruncated candidate's mass outside the nucleus is missed
    truncated = TokenModel(top_p=0.8, seed=0)
    assert truncated.kl("model", "sampler") == math.inf
    assert truncated.kl("sampler", "model") > 0


@pytest.mark.filterwarnings("ignore::ope.exceptions.SmallSampleWarning")
@pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning")
def test_estimates_cover_the_truth_and_long_responses_are_refused_honestly():
    env = TokenModel(seed=0)
    ev = ope.evaluate_sequences(env.sample(20_000, rng=2), ["cooler", "tuned"])
    for name in ("cooler", "tuned"):
        e = ev[name, "snips"]
        assert e.ci_low <= env.true_value(name) <= e.ci_high, name
    long = TokenModel(max_length=50, end_shift=-6.0, seed=0)
    seq = read_sequences(long.sample(500, rng=0))
    d = ope.sequence_divergences(seq, ["tuned"]).table().iloc[0]
    assert not d.evaluable and "calibrated judge" in d.reason
    ev = ope.evaluate_sequences(seq, ["tuned"], estimators=["snips"])
    assert any(n.startswith("tuned: not evaluable") for n in ev.evaluation.notes)
    assert ev.verdicts["tuned"].startswith("not evaluable") and ev.evaluable == []
    biased = ope.evaluate_sequences(seq, ["tuned"], weighting="length_normalized")
    assert any("estimate no policy's value" in n for n in biased.evaluation.notes)


@pytest.mark.filterwarnings("ignore::ope.exceptions.SmallSampleWarning")
def test_per_step_weighting_through_trajectories():
    traj = ope.sequence_trajectories(_frame())
    est = ope.sequential_estimate(traj, "tuned", estimator="pdis")
    frame = _frame()
    total = 0.0
    for b, t, r in zip(
        frame["behavior_logprobs"], frame["target_logprobs__tuned"], frame["step_rewards"]
    ):
        cumulative = np.exp(np.cumsum(np.array(t) - np.array(b)))
        total += float(np.sum(cumulative * np.array(r)))
    assert est.value == pytest.approx(total / 3, rel=1e-12)
    env = TokenModel(seed=0)
    traj = ope.sequence_trajectories(env.sample(20_000, rng=3))
    pdis = ope.sequential_estimate(traj, "cooler", estimator="pdis")
    assert pdis.ci_low <= env.true_value("cooler") <= pdis.ci_high


@pytest.mark.parametrize(
    "settings, on_policy, signature",
    [
        ({}, "sampler", "identical"),
        ({"logprob_noise": 0.05}, "sampler", "noise"),
        ({"top_p": 0.8}, "model", "kept_mass"),
        ({"top_p": 0.8, "reported": "untruncated"}, "sampler", "kept_mass"),
        ({"temperature": 0.7}, "model", "temperature"),
        ({"temperature": 1.5, "reported": "untruncated"}, "sampler", "temperature"),
        # a mild temperature is still a temperature (slopes of one sign on both sides) ...
        ({"temperature": 0.95}, "model", "temperature"),
        ({"temperature": 1.05}, "model", "temperature"),
        # ... and large noise on the behavior side is not (its slopes have opposite signs)
        ({"logprob_noise": 1.0}, "sampler", "noise"),
    ],
)
def test_audit_signatures(settings, on_policy, signature):
    env = TokenModel(**settings, seed=0)
    audit = ope.audit_logprobs(env.sample(2000, rng=0), on_policy=on_policy)
    assert audit.signature == signature, audit.reason
    large = settings.get("logprob_noise", 0) >= 1  # noise too large to trust any weight
    assert audit.usable == (signature in ("identical", "noise") and not large)
    if large:
        assert "no weight can be trusted" in audit.reason
        assert audit.tokens().iloc[0].slope * audit.tokens().iloc[0].slope_target <= 0
    if signature == "temperature":  # the slope reads the ratio of temperatures
        tokens = audit.tokens().iloc[0]
        ratio = settings["temperature"] if on_policy == "model" else 1 / settings["temperature"]
        assert 1 + tokens.slope == pytest.approx(ratio, abs=0.05)
    if not audit.usable:
        with pytest.raises(ValidationError, match="cannot be the sampling distribution"):
            ope.evaluate_sequences(env.sample(500, rng=1), on_policy=on_policy)
    json.dumps(audit.to_dict())
    assert "log-probability audit" in audit.summary()
    assert "divergences" in ope.sequence_divergences(env.sample(300, rng=2)).summary()


def test_audit_without_an_on_policy_candidate_sees_the_support():
    # the untruncated candidate's responses leave the truncated logger's support: E_b[w] < 1
    audit = ope.audit_logprobs(TokenModel(top_p=0.8, seed=0).sample(2000, rng=0))
    assert audit.signature == "support" and not audit.usable
    assert "never samples" in audit.reason
    # a candidate's support gap is its own verdict: the audit does not call the logs unusable
    assert "NOT usable" not in audit.summary()
    assert "leaves the logger's support" in audit.summary()
    clean = ope.audit_logprobs(TokenModel(seed=0).sample(2000, rng=0))
    assert clean.usable and clean.signature == "ok"


@pytest.mark.parametrize(
    "change, error, match",
    [
        (lambda f: f.drop(columns="reward"), SchemaError, "`reward_column`"),
        (lambda f: f.drop(columns="target_logprobs__tuned"), SchemaError, "no candidate"),
        (lambda f: f.assign(reward=[1.0, np.nan, 0.0]), ValidationError, "row 1"),
        (
            lambda f: f.assign(target_logprobs__tuned=[[-0.2], [-0.4], [-0.5, -0.2, -0.9]]),
            ValidationError,
            "row 0",
        ),
        (
            lambda f: f.assign(behavior_logprobs=[[-0.1, 0.7], [-0.4], [-1.0, -0.2, -0.3]]),
            ValidationError,
            "must be <= 0",
        ),
        (
            lambda f: f.assign(behavior_logprobs=[[-0.1, -np.inf], [-0.4], [-1.0, -0.2, -0.3]]),
            ValidationError,
            "probability 0",
        ),
        (
            lambda f: f.assign(target_logprobs__tuned=[[-0.2, np.nan], [-0.4], [-0.5, -0.2, -0.9]]),
            ValidationError,
            "missing",
        ),
        (lambda f: f.assign(behavior_logprobs=[[-0.1], None, [-1.0]]), ValidationError, "row 1"),
        (lambda f: f.assign(behavior_logprobs=["a", "b", "c"]), SchemaError, "log-probabilities"),
        (
            lambda f: f.assign(target_logprobs__tuned=[-0.7, -0.4, -1.6]),
            SchemaError,
            "of one kind",
        ),
    ],
)
def test_refusals(change, error, match):
    with pytest.raises(error, match=match):
        read_sequences(change(_frame()))


@pytest.mark.filterwarnings("ignore::ope.exceptions.SmallSampleWarning")
def test_refusals_of_calls(tmp_path):
    with pytest.raises(DataFileError, match="`source`"):
        read_sequences(tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    with pytest.raises(DataFileError, match="JSON lines"):
        read_sequences(bad)
    with pytest.raises(ParameterError, match="`source`"):
        read_sequences(tmp_path / "x.csv")
    with pytest.raises(ParameterError, match="`policies` is empty"):
        ope.evaluate_sequences(_frame(), [])
    with pytest.raises(SchemaError, match="`policies`"):
        ope.evaluate_sequences(_frame(), ["nobody"])
    with pytest.raises(SchemaError, match="`on_policy`"):
        ope.audit_logprobs(_frame(), on_policy="nobody")
    # a weight beyond float64: refused with what would work
    frame = pd.DataFrame(
        {
            "behavior_logprobs": [-800.0, -1.0],
            "target_logprobs__far": [-1.0, -1.0],
            "reward": [1, 0],
        }
    )
    with pytest.raises(EstimationError, match="calibrated judge"):
        ope.evaluate_sequences(frame)
    with pytest.raises(ValidationError, match="no rows"):
        read_sequences(_frame().iloc[:0])
    with pytest.raises(SchemaError, match="names no candidate"):
        read_sequences(_frame().assign(target_logprobs__=_frame()["target_logprobs__tuned"]))
    with pytest.raises(ValidationError, match="row 2, token 1"):
        read_sequences(
            _frame().assign(behavior_logprobs=[[-0.1, -0.7], [-0.4], [-1.0, None, -0.3]])
        )
    with pytest.raises(SchemaError, match="left out by read_sequences"):
        env = TokenModel(seed=0)
        ope.evaluate_sequences(
            read_sequences(env.sample(100, rng=0), policies=["cooler"]), on_policy="sampler"
        )
    with pytest.raises(ValidationError, match="`step_reward_column`|one reward per token"):
        ope.sequence_trajectories(_frame().assign(step_rewards=[[0.0], [0.0], [0.0]]))
    with pytest.raises(ParameterError, match="reference"):
        TokenModel().kl("tuned", "nobody")


def _cli(*args):
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "ope", "sequences", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning")
@pytest.mark.filterwarnings("ignore::ope.exceptions.SmallSampleWarning")
def test_command_line_and_report(tmp_path):
    env = TokenModel(max_length=15, end_shift=-6.0, seed=0)
    table = env.sample(2000, rng=0)
    # a candidate whose name needs escaping wherever it is shown
    table = table.rename_columns([c.replace("__cooler", "__<b>cool") for c in table.column_names])
    path = tmp_path / "responses.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in table.to_pylist()) + "\n")
    report = tmp_path / "report.html"
    out = _cli(path, "--on-policy", "sampler", "--report", report, "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["kind"] == "sequence_evaluation" and doc["audit"]["signature"] == "identical"
    assert doc["evaluation"]["validation"]["source"] == str(path)
    assert doc["verdicts"]["<b>cool"] == "evaluable"
    assert doc["verdicts"]["tuned"].startswith("not evaluable")
    want = ope.evaluate_sequences(read_sequences(table), on_policy="sampler")
    got = {(e["policy"], e["estimator"]): e["value"] for e in doc["evaluation"]["estimates"]}
    assert got[("tuned", "snips")] == pytest.approx(want["tuned", "snips"].value, rel=1e-12)
    page = report.read_text(encoding="utf-8")
    section = page[page.index('id="sequences"') :]
    section = section[: section.index("</section>")]
    assert "&lt;b&gt;cool" in section and "<b>cool" not in page
    assert "calibrated judge" in section
    # the headline does not answer for a candidate the logs cannot evaluate
    headline = page[page.index('id="headline"') : page.index('id="estimates"')]
    assert "tuned" in headline and "cannot tell" in headline
    # the refusal of logs whose log-probabilities are not the sampler's
    truncated = tmp_path / "top_p.parquet"
    pq.write_table(TokenModel(top_p=0.8, seed=0).sample(500, rng=0), truncated)
    bad = _cli(truncated, "--on-policy", "model", "--json")
    error = json.loads(bad.stdout)["error"]
    assert bad.returncode == 65 and error["type"] == "ValidationError"
    assert "kept mass" in error["message"]
    text = _cli(path, "--policy", "tuned")
    assert text.returncode == 0 and "NOT evaluable" in text.stdout


@pytest.mark.filterwarnings("ignore::ope.exceptions.SmallSampleWarning")
def test_doubly_robust_with_a_given_reward_model():
    # a zero model: DR is IPS; the exact model: DR covers the truth with a smaller error
    frame = _frame().assign(q0=0.0, v0__tuned=0.0)
    ev = ope.evaluate_sequences(frame, estimators=["ips"], q_column="q0", v_column="v0__{policy}")
    assert ev["tuned", "dr"].value == pytest.approx(ev["tuned", "ips"].value, rel=1e-13)
    env = TokenModel(seed=0)
    ev = ope.evaluate_sequences(
        env.sample(4000, rng=0, oracle=True),
        ["tuned"],
        q_column="q_logged",
        v_column="v_target__{policy}",
    )
    dr, ips = ev["tuned", "dr"], ev["tuned", "ips"]
    assert dr.ci_low <= env.true_value("tuned") <= dr.ci_high
    assert dr.std_error < 0.5 * ips.std_error
    assert [r["estimator"] for r in ev.to_dict()["model_estimates"]] == ["dr"]
    assert "dr" in ev.summary()
    np.testing.assert_allclose(
        env.prompt_values("tuned").mean(), env.true_value("tuned"), rtol=1e-14
    )
    with pytest.raises(ParameterError, match="`v_column`"):
        ope.evaluate_sequences(frame, q_column="q0")
    with pytest.raises(ParameterError, match="policy"):
        ope.evaluate_sequences(frame, q_column="q0", v_column="v0__tuned")
    with pytest.raises(SchemaError, match="`q_column`"):
        ope.evaluate_sequences(frame, q_column="nope", v_column="v0__{policy}")
    with pytest.raises(ValidationError, match="row 1"):
        ope.evaluate_sequences(
            frame.assign(q0=[0.0, np.nan, 0.0]), q_column="q0", v_column="v0__{policy}"
        )


@pytest.mark.filterwarnings("ignore::ope.exceptions.SmallSampleWarning")
@pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning")
def test_one_bad_candidate_gets_its_verdict_and_the_others_their_estimates():
    rng = np.random.default_rng(0)
    n = 400
    b = np.log(rng.uniform(0.2, 1.0, n))
    frame = pd.DataFrame(
        {
            "behavior_logprobs": b,
            "target_logprobs__same": b,
            "target_logprobs__never": np.full(n, -np.inf),  # no logged response is its
            "target_logprobs__far": b,  # but 0.0 at row 0 (below)
            "reward": rng.uniform(size=n),
        }
    )
    frame.loc[0, "behavior_logprobs"] = -800.0  # one response the logger almost never samples
    frame.loc[0, "target_logprobs__same"] = -800.0
    frame.loc[0, "target_logprobs__far"] = 0.0  # log weight 800 there
    ev = ope.evaluate_sequences(frame, estimators=["ips", "snips"])
    assert ev.evaluable == ["same"]
    assert "probability 0 to every logged response" in ev.verdicts["never"]
    assert "above 1e150" in ev.verdicts["far"]
    assert ev.evaluation.policies == ["same"]
    assert ev["same", "ips"].value == pytest.approx(frame["reward"].mean(), rel=1e-12)
    with pytest.raises(KeyError, match="no estimate"):
        ev["never", "ips"]
    assert any("no estimate" in note for note in ev.evaluation.notes)
    json.dumps(ev.to_dict())
    page = render_report(evaluation=ev.evaluation, sequences=ev)
    headline = page[page.index("The logs cannot tell") :][:600]
    assert "<strong>never</strong> (no weighted estimate can be made)" in headline
    assert "<strong>far</strong> (no weighted estimate can be made)" in headline


@pytest.mark.filterwarnings("ignore::ope.exceptions.SmallSampleWarning")
def test_zero_weights_are_harmless_and_small_samples_are_not_refused_for_size():
    # a candidate that cannot produce some logged responses (weight 0): KL(logger || it) is
    # infinite, the estimate is not; the predicted effective sample uses the other responses
    env = TokenModel(seed=0)
    seq = read_sequences(env.sample(3000, rng=0), policies=["sampler"])
    lw = seq.targets[:, 0].copy()
    first = seq.offsets[:-1][np.diff(seq.offsets) > 0]
    zero = first[::10]
    lw[zero] = -np.inf
    # renormalize nothing: the zeroed responses' mass is what the candidate lacks; the rest
    # keep their weight 1, so E_b[w] = 0.9 and the estimate is the mean reward of the rest
    frame = pd.DataFrame(
        {
            "behavior_logprobs": pd.Series(np.split(seq.behavior, seq.offsets[1:-1])),
            "target_logprobs__partial": pd.Series(np.split(lw, seq.offsets[1:-1])),
            "reward": seq.reward,
        }
    )
    d = ope.sequence_divergences(frame).table().iloc[0]
    share = zero.size / seq.n
    assert d.k1 == math.inf and d.zero_weight_share == pytest.approx(share)
    # on the responses it can produce the weights are 1 exactly: s2 = -2 log(1 - share)
    assert d.predicted_ess == pytest.approx(seq.n * (1 - share) ** 3, rel=1e-9)
    assert d.evaluable
    # 50 responses of an identical candidate: evaluable (the absolute floor of 100 would refuse)
    small = ope.evaluate_sequences(env.sample(50, rng=1), ["sampler"], estimators=["ips"])
    assert small.verdicts == {"sampler": "evaluable"}
    assert ope.sequences.MIN_PREDICTED_SHARE * 50 < ope.sequences.MIN_PREDICTED_ESS


@pytest.mark.filterwarnings("ignore::ope.exceptions.SmallSampleWarning")
def test_mixed_json_types_in_an_extra_field_are_kept_as_text(tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        '{"behavior_logprobs": [-0.1], "target_logprobs__a": [-0.2], "reward": 1, "meta": {"k": 1}}\n'
        '{"behavior_logprobs": [-0.1, -0.3], "target_logprobs__a": [-0.2, -0.1], "reward": 0, '
        '"meta": "x"}\n'
    )
    seq = read_sequences(path)
    assert seq.n == 2
    assert seq.behavior.tolist() == [-0.1, -0.1, -0.3]  # parsed exactly
    assert seq.table.column("meta").to_pylist() == ['{"k": 1}', '"x"']
    assert "'meta' (dict at row 0, str at row 1) mix JSON types" in seq.notes[0]
    ev = ope.evaluate_sequences(seq, estimators=["ips"])
    assert any("mix JSON types" in note for note in ev.evaluation.notes)


@pytest.mark.filterwarnings("ignore::ope.exceptions.SmallSampleWarning")
def test_empty_responses_stay_episodes():
    frame = pd.DataFrame(
        {
            "behavior_logprobs": [[], [-0.5], [-0.2, -0.1]],
            "target_logprobs__a": [[], [-0.2], [-0.2, -0.3]],
            "step_rewards": [[], [1.0], [0.5, 0.5]],
            "reward": [0.0, 1.0, 1.0],
        }
    )
    traj = ope.sequence_trajectories(frame)
    assert traj.n_episodes == 3 and traj.n == 4  # the empty response: one step of no change
    pdis = ope.sequential_estimate(traj, "a", estimator="pdis")
    w1 = math.exp(-0.2 + 0.5)
    w2a, w2b = 1.0, math.exp(-0.3 + 0.1)
    assert pdis.value == pytest.approx(
        (0.0 + w1 * 1.0 + w2a * 0.5 + w2a * w2b * 0.5) / 3, rel=1e-12
    )


@pytest.mark.parametrize(
    "settings, on_policy, signature",
    [
        # the engine logs untruncated / untempered probabilities for the sampler: the
        # candidate that is the logged model looks identical, but the sampler's mean weight
        # is above 1, which no support gap gives
        ({"top_p": 0.8, "reported": "untruncated"}, "model", "inflated"),
        ({"temperature": 1.5, "reported": "untruncated"}, "model", "inflated"),
        # a kept mass beneath a noise floor: a systematic shift, not noise
        ({"top_p": 0.9, "logprob_noise": 0.02}, "model", "kept_mass"),
    ],
)
@pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning")
@pytest.mark.filterwarnings("ignore::ope.exceptions.SmallSampleWarning")
def test_audit_sees_logs_that_are_wrong_for_every_candidate(settings, on_policy, signature):
    env = TokenModel(**settings, seed=0)
    logs = env.sample(4000, rng=0)
    audit = ope.audit_logprobs(logs, on_policy=on_policy)
    assert audit.signature == signature and not audit.usable, audit.reason
    with pytest.raises(ValidationError, match="cannot be the sampling distribution"):
        ope.evaluate_sequences(logs, on_policy=on_policy)
    if signature == "inflated":  # without on_policy: no candidate is evaluable
        ev = ope.evaluate_sequences(logs)
        assert ev.evaluable == []
        assert all(v.startswith("not evaluable") for v in ev.verdicts.values())
        assert "too small" in ev.verdicts[on_policy]
        assert not ev.divergences.table()["evaluable"].any()


@pytest.mark.filterwarnings("ignore::ope.exceptions.SmallSampleWarning")
@pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning")
def test_weights_past_what_read_logs_takes_are_per_candidate_verdicts():
    n = 400
    g = np.random.default_rng(1)
    b = np.full(n, -1.0)
    b[0] = -400.0
    frame = pd.DataFrame(
        {
            "behavior_logprobs": b,
            "target_logprobs__ok": b,
            "target_logprobs__big": np.r_[-1.0 + 0.0, b[1:]],  # log weight 399 at row 0
            "target_logprobs__tiny": np.r_[-900.0, np.full(n - 1, -450.0)] + g.normal(size=n),
            "reward": g.random(n),
            "q": 0.5,
            "v_target__ok": 0.5,
            "v_target__big": 0.5,
            "v_target__tiny": 0.25,
        }
    )
    ev = ope.evaluate_sequences(frame, q_column="q", v_column="v_target__{policy}")
    assert ev.evaluation.policies == ["ok"]
    assert "above 1e150" in ev.verdicts["big"] and "below 1e-150" in ev.verdicts["tiny"]
    # DR of a candidate none of whose responses is logged is the model's estimate alone
    assert ev["tiny", "dr"].value == pytest.approx(0.25, abs=1e-12)
    with pytest.raises(KeyError):
        ev["big", "dr"]
    verdict = ev.divergences.table().set_index("policy")["evaluable"]
    assert verdict.to_dict() == {"ok": True, "big": False, "tiny": False}


@pytest.mark.filterwarnings("ignore::ope.exceptions.SmallSampleWarning")
def test_doors_of_evaluate_sequences(tmp_path):
    with pytest.raises(ParameterError, match="q_column"):
        ope.evaluate_sequences(_frame(), estimators=["dr"])
    array = tmp_path / "array.json"
    array.write_text(json.dumps(_frame().to_dict(orient="records")))
    with pytest.raises(DataFileError, match="one JSON array"):
        read_sequences(array)
    # a byte-order mark and a metadata field of two types; a reward of two types is refused
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_bytes(
        b"\xef\xbb\xbf"
        + b'{"behavior_logprobs": [-0.1], "target_logprobs__a": [-0.2], "reward": 1, "m": 1}\n'
        + b'{"behavior_logprobs": [-0.5], "target_logprobs__a": [-0.2], "reward": 0, "m": "x"}\n'
    )
    assert read_sequences(mixed).n == 2
    mixed.write_text(
        '{"behavior_logprobs": [-0.1], "target_logprobs__a": [-0.2], "reward": 1, "m": 1}\n'
        '{"behavior_logprobs": [-0.5], "target_logprobs__a": [-0.2], "reward": "1", "m": "x"}\n'
    )
    with pytest.raises(SchemaError, match=r"`reward` mixes JSON types.*row 1"):
        read_sequences(mixed)
    with pytest.raises(ValidationError, match="row 2, token 1"):
        ope.sequence_trajectories(
            _frame().assign(step_rewards=[[0.0, 1.0], [0.0], [0.5, np.nan, 1.0]])
        )
    # only the candidates asked for are read: a broken column of another one is not
    broken = _frame().assign(target_logprobs__junk=[[0.5, 0.5], [0.5], [0.5, 0.5, 0.5]])
    with pytest.raises(ValidationError, match="junk"):
        read_sequences(broken)
    assert ope.evaluate_sequences(broken, ["tuned"], estimators=["ips"]).verdicts
    # the report takes the responses' own evaluation, and refuses another one
    ev = ope.evaluate_sequences(_frame(), estimators=["ips"])
    assert "Language-model logs" in render_report(sequences=ev)
    other = ope.evaluate_sequences(_frame(), estimators=["snips"])
    with pytest.raises(ParameterError, match="disagree"):
        render_report(evaluation=other.evaluation, sequences=ev)


def test_audit_of_summed_logprobs_says_what_it_cannot_tell():
    table = TokenModel(temperature=0.7, seed=0).sample(2000, rng=0)
    frame = pd.DataFrame(
        {
            c: [float(np.sum(x)) for x in table.column(c).to_pylist()]
            for c in ("behavior_logprobs", "target_logprobs__model")
        }
    ).assign(reward=table.column("reward").to_numpy())
    audit = ope.audit_logprobs(frame, on_policy="model")
    assert not audit.usable and audit.signature in ("kept_mass", "temperature")
    if audit.signature == "kept_mass":
        assert "cannot tell a truncation from a temperature" in audit.reason


def _depth_by_hand(text: bytes) -> int:
    depth = deepest = run = 0
    inside = False
    for c in text.decode("latin-1"):
        if c == "\n":  # every line from 0
            depth, inside = 0, False
        elif c == '"' and run % 2 == 0:
            inside = not inside
        elif c in "[{" and not inside:
            depth += 1
        elif c in "]}" and not inside:
            depth -= 1
        deepest = max(deepest, depth)
        run = run + 1 if c == "\\" else 0
    return deepest


@pytest.mark.parametrize("chunk", [1, 3, 7, 1 << 22])
def test_json_depth_is_the_nesting_outside_strings_across_chunks(tmp_path, monkeypatch, chunk):
    """The depth read chunk by chunk equals a character-by-character count: brackets inside
    strings left out, a quote after an odd run of backslashes not ending its string, whatever
    the chunk boundaries cut."""
    from ope import sequences

    monkeypatch.setattr(sequences, "_DEPTH_CHUNK", chunk)
    monkeypatch.setattr(sequences, "_LINES_BLOCK", chunk)
    rng = np.random.default_rng(chunk)
    alphabet = np.frombuffer(b'[]{}"\\\\ax\n\n', dtype=np.uint8)
    path = tmp_path / "x.jsonl"
    for size in (0, 1, 2, 5, 40, 333):
        for _ in range(20):
            text = alphabet[rng.integers(0, alphabet.size, size)].tobytes()
            path.write_bytes(text)
            assert sequences._json_depth(path) == _depth_by_hand(text), text
            lines = text.split(b"\n")
            most = max(line.count(b"[") + line.count(b"{") for line in lines)
            for limit in {0, 1, 3, max(most - 1, 0), most}:
                assert sequences._lines_within(path, limit) == (most <= limit), (text, limit)


def test_a_deeply_nested_file_is_refused_before_arrow_reads_it(tmp_path):
    """pyarrow's JSON reader ends the process on a line nested 100,000 deep: the file is
    refused first (exit 65 on the command line, never a crash)."""
    path = tmp_path / "deep.jsonl"
    path.write_text('{"reward": 1, "x": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    with pytest.raises(DataFileError, match="100,001 deep"):
        ope.read_sequences(path)
    fine = tmp_path / "fine.jsonl"
    fine.write_text('{"reward": 1, "x": "' + "[" * 5000 + '"}\n')  # brackets in a string
    assert ope.sequences._json_depth(fine) == 1
    # records cut short (each line unbalanced) are not one deep line: pyarrow says what is wrong
    cut = tmp_path / "cut.jsonl"
    cut.write_text('{"reward": 1, "behavior_logprobs": [-0.5, -1.2\n' * 2000)
    assert ope.sequences._json_depth(cut) == 2
    with pytest.raises(DataFileError, match="not readable as JSON lines"):
        ope.read_sequences(cut)


def test_a_frame_column_mixing_summed_floats_and_lists_is_named():
    """A DataFrame column holding a summed float in some rows and per-token lists in others
    is refused naming the column and the first row of the other kind (pyarrow's ArrowInvalid
    escaped before); a metadata column of two types is kept, with a note, as in JSON lines."""
    frame = pd.DataFrame(
        {
            "behavior_logprobs": [-1.0, [-2.0], -3.0],
            "target_logprobs__tuned": [-1.0, [-2.0], -3.0],
            "reward": [1.0, 0.0, 1.0],
        }
    )
    with pytest.raises(
        SchemaError,
        match=r"column `behavior_logprobs` mixes types \(float at row 0, list at row 1\)",
    ):
        read_sequences(frame)
    meta = _frame().assign(meta=[{"a": 1}, "x", 2])
    seq = read_sequences(meta)
    assert seq.n == 3
    assert any(
        "'meta' (dict at row 0, str at row 1) mix types between rows" in n for n in seq.notes
    )


def test_json_lines_with_mixed_entries_or_names_that_are_not_utf8(tmp_path):
    """A log-probability list whose entries mix JSON types in every record (not between
    records), and a field name that is not UTF-8, are errors of ope's tree naming the column
    or the names (StopIteration and UnicodeDecodeError escaped before)."""
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        '{"behavior_logprobs": ["x", -0.1], "target_logprobs__a": [-0.2, -0.1], "reward": 1}\n'
        '{"behavior_logprobs": [-0.5, "y"], "target_logprobs__a": [-0.2, -0.1], "reward": 0}\n'
    )
    with pytest.raises(SchemaError, match=r"`behavior_logprobs` mixes JSON types \(lists whose"):
        read_sequences(path)
    path.write_bytes(
        b'{"behavior_logprobs": [-0.1], "target_logprobs__a": [-0.2], "reward": 1, "m\xff": 1}\n'
    )
    with pytest.raises(SchemaError, match="a field name of the records is not UTF-8"):
        read_sequences(path)


def test_a_file_of_blank_lines_holds_no_records(tmp_path):
    path = tmp_path / "blank.jsonl"
    path.write_text("\n\n  \n")
    with pytest.raises(DataFileError, match="holds no records"):
        read_sequences(path)


def _notes_of(text):
    """{number: whole text} of the numbered notes of a rendered result (wrapped lines joined)."""
    import re

    notes, current = {}, None
    for line in text.splitlines():
        head = re.match(r"^  \[(\d+)\] (.*)$", line)
        if head:
            current = int(head.group(1))
            notes[current] = head.group(2)
        elif current is not None and line.startswith("      ") and line.strip():
            notes[current] += " " + line.strip()
        else:
            current = None
    return notes


def _row_refs(text, policy):
    """The note numbers a table row of ``policy`` references (its last column)."""
    import re

    row = next(ln for ln in text.splitlines() if ln.startswith(policy + " "))
    found = re.search(r"\[([\d,]+)\]$", row)
    return [int(k) for k in found.group(1).split(",")] if found else []


def test_audit_text_gives_why_a_candidate_is_flagged_as_a_note_within_the_width():
    """The audit's table references why each flagged candidate is flagged (a numbered note,
    wrapped like every note), instead of a column of sentences; the whole reason stays in
    ``weights()`` and the JSON."""
    from ope._format import TEXT_WIDTH

    audit = ope.audit_logprobs(TokenModel(top_p=0.8, seed=0).sample(2000, rng=0))
    text = audit.summary()
    assert max(len(line) for line in text.splitlines()) <= TEXT_WIDTH
    notes = _notes_of(text)
    weights = audit.weights().set_index("policy")
    for policy in ("model", "cooler"):
        reason = weights.loc[policy, "reason"]
        assert weights.loc[policy, "flags"] and len(reason) > 200
        assert [notes[k] for k in _row_refs(text, policy)] == [reason]
        entry = next(w for w in audit.to_dict()["weights"] if w["policy"] == policy)
        assert entry["reason"] == reason
    assert _row_refs(text, "sampler") == _row_refs(text, "tuned") == []  # not flagged


def test_a_negative_kl_estimate_is_explained_in_a_note_on_its_row():
    """A KL divergence is never negative, but its estimates from samples can be: each negative
    k1 or kl_candidate_logger has a note on its row that says why (chance, or a candidate's
    mass outside the logger's support, where the mean of w log w estimates no KL)."""
    frame = pd.DataFrame(
        {
            "behavior_logprobs": [[-1.0], [-1.0], [-1.0]],
            "target_logprobs__near": [[-0.8], [-0.9], [-1.1]],  # log w 0.2, 0.1, -0.1
            "target_logprobs__tilt": [[-1.3], [-0.9], [-0.9]],  # log w -0.3, 0.1, 0.1
            "reward": [1.0, 0.0, 1.0],
        }
    )
    d = ope.sequence_divergences(frame)
    table = d.table().set_index("policy")
    assert table.loc["near", "k1"] == pytest.approx(-0.2 / 3)
    assert table.loc["tilt", "kl_candidate_logger"] < 0 < table.loc["tilt", "k1"]
    text = d.summary()
    notes = _notes_of(text)
    (near,) = [notes[k] for k in _row_refs(text, "near")]
    assert near.startswith("near: k1 = -0.06667 is below 0, which a KL divergence never is")
    assert "unbiased estimate of KL(logger || candidate)" in near and "by chance" in near
    (tilt,) = [notes[k] for k in _row_refs(text, "tilt")]
    assert tilt.startswith("tilt: kl_candidate_logger = -0.0004038 is below 0")
    assert "mean of w log w" in tilt and "the sign is chance" in tilt
    assert any(near == n for n in d.to_dict()["notes"])  # the JSON says it too
    # a candidate with mass outside a truncated logger's support: not chance, and not a KL
    top_p = ope.sequence_divergences(TokenModel(top_p=0.8, seed=0).sample(500, rng=0))
    text = top_p.summary()
    notes = _notes_of(text)
    for policy in ("model", "cooler", "tuned"):
        assert top_p.table().set_index("policy").loc[policy, "kl_candidate_logger"] < 0
        (note,) = [notes[k] for k in _row_refs(text, policy)]
        assert "of the candidate's mass is on responses the logger does not give" in note
        assert "does not estimate KL(candidate || logger)" in note
    assert _row_refs(text, "sampler") == []
    # a clean log: no negative estimate, no such note
    clean = ope.sequence_divergences(TokenModel(seed=0).sample(2000, rng=0))
    assert (clean.table()[["k1", "kl_candidate_logger"]] >= 0).all().all()
    assert len(clean.notes) == 1


def test_command_line_numbers_the_notes_of_its_three_results_as_one_sequence(tmp_path):
    """``ope sequences`` prints the evaluation, the audit and the divergences: their notes are
    one numbered sequence, and the audit's and divergences' references name their notes."""
    path = tmp_path / "top_p.parquet"
    pq.write_table(TokenModel(top_p=0.8, seed=0).sample(500, rng=0), path)
    out = _cli(path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("\nNotes:\n") == 3
    notes = _notes_of(out.stdout)
    assert sorted(notes) == list(range(1, len(notes) + 1))
    audit = out.stdout[out.stdout.index("log-probability audit:") :]
    audit = audit[: audit.index("\ndivergences of")]
    assert "mean weight 0.5775" in notes[_row_refs(audit, "model")[0]]
    divergences = out.stdout[out.stdout.index("\ndivergences of") :]
    (k,) = _row_refs(divergences, "model")
    assert notes[k].startswith("model: kl_candidate_logger = ")


def _main(*argv):
    """``ope.cli.main`` in this process: (exit code, stdout, stderr)."""
    import contextlib
    import io

    from ope.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def skewed_responses(tmp_path_factory):
    """The README's responses: candidate 'tuned' has skewed weights (a short-interval warning)."""
    table = TokenModel(top_p=0.8, seed=0).sample(2000, rng=0)
    path = tmp_path_factory.mktemp("responses") / "responses.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in table.to_pylist()))
    return path, table


@pytest.mark.filterwarnings("ignore::ope.exceptions.OverlapWarning")
@pytest.mark.filterwarnings("ignore::ope.exceptions.SmallSampleWarning")
def test_command_line_takes_the_interval_its_advice_names(skewed_responses):
    # the skewed candidate's warning advises a betting interval with an a priori reward range:
    # `ope sequences` takes both (--ci, --reward-range), and the advice says them as flags
    path, table = skewed_responses
    code, _, err = _main("sequences", path, "--policy", "tuned")
    assert code == 0 and "Use --ci betting with an a priori --reward-range" in err
    assert "ci(method=" not in err and "reward_range" not in err
    reward = np.asarray(table.column("reward"))
    bounds = (math.floor(reward.min()) - 1.0, math.ceil(reward.max()) + 1.0)
    code, out, err = _main(
        "sequences",
        path,
        "--policy",
        "tuned",
        "--ci",
        "betting",
        "--reward-range",
        *bounds,
        "--json",
    )
    assert code == 0, err
    rows = json.loads(out)["evaluation"]["estimates"]
    want = ope.evaluate_sequences(
        read_sequences(table), ["tuned"], ci="betting", reward_range=bounds, rng=0
    )
    library = want.evaluation.table().set_index(["policy", "estimator"])
    assert {r["estimator"] for r in rows} == {"ips", "snips"}
    for row in rows:
        expected = library.loc[("tuned", row["estimator"])]
        assert row["ci_method"] == expected.ci_method == "betting"
        assert row["ci_low"] == pytest.approx(expected.ci_low, rel=1e-12)
        assert row["ci_high"] == pytest.approx(expected.ci_high, rel=1e-12)
    # a method that does not apply to an estimator falls back to normal, with a note
    code, out, err = _main(
        "sequences",
        path,
        "--policy",
        "tuned",
        "--estimator",
        "clipped_ips",
        "snips",
        "--max-weight",
        "20",
        "--ci",
        "bottou",
        "--reward-range",
        *bounds,
        "--json",
    )
    assert code == 0, err
    methods = {r["estimator"]: r["ci_method"] for r in json.loads(out)["evaluation"]["estimates"]}
    assert methods == {"clipped_ips": "bottou", "snips": "normal"}
    # a bounded interval without the range is a usage error naming the flag
    code, out, _ = _main("sequences", path, "--ci", "betting", "--json")
    error = json.loads(out)["error"]
    assert code == 2 and error["flag"] == "--reward-range"


def test_a_broken_line_of_json_lines_is_named_in_the_file(tmp_path, skewed_responses):
    # pyarrow numbers a broken record within the block it parsed (1 MiB), not in the file:
    # a truncated last line (line 1,999 of 2,000) read as "row 963"
    path, _ = skewed_responses
    data = path.read_bytes()
    truncated = tmp_path / "truncated.jsonl"
    truncated.write_bytes(data[:-30])
    with pytest.raises(DataFileError, match=r"\(line 1,999 of 2,000, counting from 0\)$") as info:
        read_sequences(truncated)
    assert "in row" not in str(info.value)
    # blank lines are no records but are lines; a broken line in the middle of a later block
    lines = data.decode().splitlines()
    lines[1500] = lines[1500][:-5]
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n\n" + "\n  \n".join(lines) + "\n")
    with pytest.raises(DataFileError, match=r"\(line 3,002 of 4,001, counting from 0\)$"):
        read_sequences(broken)
    code, out, _ = _main("sequences", broken, "--json")
    error = json.loads(out)["error"]
    assert code == 65 and "line 3,002 of 4,001" in error["message"] and "flag" not in error


def _weighted_responses(n: int = 300) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    behavior = [list(-rng.exponential(0.5, 3)) for _ in range(n)]
    return pd.DataFrame(
        {
            "behavior_logprobs": behavior,
            "target_logprobs__tuned": [
                [min(0.0, x + rng.normal(scale=0.05)) for x in b] for b in behavior
            ],
            "reward": np.arange(n) % 2 * 1.0,
            "weight": np.where(np.arange(n) % 2 == 1, 10.0, 1.0),
            "q0": 0.0,
            "v0__tuned": 0.0,
        }
    )


def test_sampling_weights_of_responses_weight_every_estimate():
    """The ``weight`` column (or ``weight_column=``) weights the responses as ope.evaluate
    weights rows: the numbers are ope.evaluate's on the converted logs with the weight, DR's
    model estimate is weighted too, and a note says what stays unweighted."""
    frame = _weighted_responses()
    ev = ope.evaluate_sequences(frame, ["tuned"], q_column="q0", v_column="v0__{policy}")
    logs = read_sequences(frame)
    w = np.exp(logs.log_weights()[:, 0])
    s, r = frame["weight"].to_numpy(), frame["reward"].to_numpy()
    assert ev["tuned", "ips"].value == pytest.approx(np.sum(s * w * r) / s.sum(), rel=1e-12)
    assert ev["tuned", "snips"].value == pytest.approx(np.sum(s * w * r) / np.sum(s * w), rel=1e-12)
    unweighted = ope.evaluate_sequences(frame.drop(columns="weight"), ["tuned"])
    assert abs(unweighted["tuned", "ips"].value - ev["tuned", "ips"].value) > 0.3
    # ope.evaluate on the converted rows (propensity 1/M, target w/M) with the weight
    scale = np.maximum(np.log(w), 0.0)
    bandit = pd.DataFrame(
        {
            "action": np.arange(len(frame)),
            "propensity": np.exp(-scale),
            "reward": r,
            "target__tuned": w * np.exp(-scale),
            "w": s,
        }
    )
    direct = ope.evaluate(bandit, weight_column="w", estimators=("ips", "snips"))
    for est in ("ips", "snips"):
        mine, theirs = ev["tuned", est], direct["tuned", est]
        assert mine.value == pytest.approx(theirs.value, rel=1e-12)
        assert mine.std_error == pytest.approx(theirs.std_error, rel=1e-12)
    # a zero model: DR is the weighted IPS
    assert ev["tuned", "dr"].value == pytest.approx(ev["tuned", "ips"].value, rel=1e-12)
    assert any("unweighted" in note and "`weight`" in note for note in ev.evaluation.notes)
    # another column by name, and the errors name the user's columns and function
    renamed = frame.rename(columns={"weight": "s"})
    again = ope.evaluate_sequences(renamed, ["tuned"], weight_column="s")
    assert again["tuned", "ips"].value == pytest.approx(ev["tuned", "ips"].value, rel=1e-14)
    with pytest.raises(SchemaError, match=r"weight_column='w'.*behavior_logprobs") as info:
        ope.evaluate_sequences(frame, ["tuned"], weight_column="w")
    assert "event_id" not in str(info.value)
    with pytest.raises(ValidationError, match="`weight` must be finite"):
        ope.evaluate_sequences(frame.assign(weight=np.r_[np.nan, s[1:]]), ["tuned"])
    with pytest.raises(ParameterError, match="uses for itself"):
        ope.evaluate_sequences(frame, ["tuned"], weight_column="reward")
    with pytest.raises(
        ParameterError, match=r"^evaluate_sequences\(\) got an unknown option 'foo'"
    ):
        ope.evaluate_sequences(frame, ["tuned"], foo=1)
