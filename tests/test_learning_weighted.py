"""Sampling (Horvitz-Thompson) weights in the policy learners and the safety gate.

Unit weights are the unweighted fit and certificate exactly; integer weights equal repeated
rows for the fitted policy and the gate's point estimates; the gate's finite-sample modes refuse
weighted rows and ``ci="auto"`` takes the t bound; on logs whose drop rate depends on the
segment the weighted learner finds the population's best policy where the unweighted one does
not, and the weighted t bound covers the exact value (``ope.simulate``) at its nominal rate.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy import stats

import ope
from ope._format import TEXT_WIDTH
from ope.exceptions import EstimationError, SmallSampleWarning, ValidationError
from ope.learning import (
    Certificate,
    ConservativePolicyLearner,
    DirectMethodPolicyLearner,
    IPSPolicyLearner,
    certify,
    learn_from_logs,
    rank_policies,
)
from ope.learning._common import penalized_value
from ope.simulate import ContextualBandit

#: the drop rate of segment_1 in the simulations (segment_0 is kept whole): its rows weigh 10
DROP_SEGMENT_1 = 0.9


def _logs(n: int = 1500, seed: int = 0):
    """Three actions, uniform logging, reward depends on x0 and the action; integer weights."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    action = rng.integers(0, 3, size=n)
    best = np.where(X[:, 0] > 0, 1, 2)
    reward = (rng.random(n) < np.where(action == best, 0.8, 0.3)).astype(float)
    s = rng.integers(1, 4, size=n).astype(float)
    return X, action, reward, np.full(n, 1.0 / 3.0), s


def _table(X, action, reward, p, s=None) -> pa.Table:
    cols = {
        "event_id": np.arange(len(action)),
        "x0": X[:, 0],
        "x1": X[:, 1],
        "action": action,
        "reward": reward,
        "propensity": p,
    }
    if s is not None:
        cols["weight"] = s
    return pa.table(cols)


# ------------------------------------------------------------------------ unit weights
def test_unit_weights_give_exactly_the_unweighted_policy_and_certificate() -> None:
    X, action, reward, p, _ = _logs()
    plain = ope.read_logs(_table(X, action, reward, p))
    ones = ope.read_logs(_table(X, action, reward, p, np.ones(len(action))))
    la, ca = learn_from_logs(plain, context_columns=["x0", "x1"], rng=3)
    lb, cb = learn_from_logs(ones, context_columns=["x0", "x1"], rng=3)
    assert np.array_equal(la.predict_proba(X), lb.predict_proba(X))
    assert ca.to_dict() == cb.to_dict()
    assert cb.ci_method == "betting" and not cb.weighted and cb.sampling_weight is None
    for learner in (ConservativePolicyLearner(), DirectMethodPolicyLearner()):
        a = learner.fit(X, action, reward, p).predict_proba(X)
        b = (
            type(learner)(**learner.get_params())
            .fit(X, action, reward, p, sample_weight=np.ones(len(action)))
            .predict_proba(X)
        )
        assert np.array_equal(a, b)
    pe = (action == 1) * 1.0
    c1 = certify(pe, None, action, reward, p, reward_range=(0, 1), max_weight=3.0)
    c2 = certify(
        pe,
        None,
        action,
        reward,
        p,
        reward_range=(0, 1),
        max_weight=3.0,
        sampling_weight=np.ones(len(action)),
        weight_name="weight",
    )
    assert c1.to_dict() == c2.to_dict()


# ------------------------------------------------------------------------ integer weights
def test_integer_weights_equal_repeated_rows_for_the_fitted_policy() -> None:
    X, action, reward, p, s = _logs()
    rep = np.repeat(np.arange(len(action)), s.astype(int))
    for learner, tol in [
        (IPSPolicyLearner(), 1e-9),
        (DirectMethodPolicyLearner(), 1e-12),
        (
            ConservativePolicyLearner(
                objective="self_normalized", variance_penalty=0.0, max_weight=2.5
            ),
            1e-6,
        ),
        # L-BFGS-B's stall rule compares the gain with the standard error, which counts the
        # kept rows (not the repeats): the two fits stop a few iterations apart
        (ConservativePolicyLearner(variance_penalty=0.0, max_weight=2.5), 2e-3),
    ]:
        weighted = type(learner)(**learner.get_params()).fit(X, action, reward, p, sample_weight=s)
        repeated = type(learner)(**learner.get_params()).fit(
            X[rep], action[rep], reward[rep], p[rep]
        )
        assert np.abs(weighted.predict_proba(X) - repeated.predict_proba(X)).max() < tol, learner
        assert weighted.value_estimate_ == pytest.approx(repeated.value_estimate_, abs=tol)


def test_weighted_objective_gradient_and_repeated_rows() -> None:
    rng = np.random.default_rng(5)
    n = 40
    wbar, r, s = rng.uniform(0, 3, n), rng.uniform(0, 1, n), rng.integers(1, 4, n) * 1.0
    rep = np.repeat(np.arange(n), s.astype(int))
    eye = np.eye(n)
    for objective in ("clipped_ips", "self_normalized"):
        value, (est, se), grad = penalized_value(wbar, r, objective, 1.5, s)
        # finite differences of the penalized value, to 1e-7 (central, step 1e-6)
        numeric = np.array(
            [
                (
                    penalized_value(wbar + 1e-6 * eye[i], r, objective, 1.5, s)[0]
                    - penalized_value(wbar - 1e-6 * eye[i], r, objective, 1.5, s)[0]
                )
                / 2e-6
                for i in range(n)
            ]
        )
        assert np.abs(numeric - grad).max() < 1e-7
        # the estimate (not its standard error) equals that of the repeated rows
        assert est == pytest.approx(
            penalized_value(wbar[rep], r[rep], objective, 1.5)[1][0], rel=1e-13
        )
    # the Hajek clipped-IPS estimate and its linearized standard error by hand
    _, (est, se), _ = penalized_value(wbar, r, "clipped_ips", 0.0, s)
    hajek = np.sum(s * wbar * r) / np.sum(s)
    psi = s * (wbar * r - hajek) / s.mean()
    assert est == pytest.approx(hajek, rel=1e-13)
    assert se == pytest.approx(psi.std(ddof=1) / math.sqrt(n), rel=1e-10)


def test_integer_weights_equal_repeated_rows_for_the_gates_point_estimate() -> None:
    X, action, reward, p, s = _logs(seed=1)
    rep = np.repeat(np.arange(len(action)), s.astype(int))
    pe = np.where(action == 1, 0.8, 0.1)
    weighted = certify(
        pe,
        None,
        action,
        reward,
        p,
        reward_range=(0, 1),
        max_weight=2.0,
        sampling_weight=s,
        weight_name="weight",
    )
    repeated = certify(
        pe[rep], None, action[rep], reward[rep], p[rep], reward_range=(0, 1), max_weight=2.0, ci="t"
    )
    for field in ("value", "improvement_estimate", "baseline_value"):
        assert getattr(weighted, field) == pytest.approx(getattr(repeated, field), rel=1e-12)
    # the bound is the t bound of the linearized Hajek ratio over the n kept rows, by hand
    n = len(action)
    z = np.minimum(pe / p, 2.0) * reward
    d = z - reward
    q = stats.t.ppf(0.95, n - 1)
    for value, lower, terms in [
        (weighted.value, weighted.lower_bound, z),
        (weighted.improvement_estimate, weighted.improvement_lower_bound, d),
    ]:
        hajek = np.sum(s * terms) / np.sum(s)
        psi = s * (terms - hajek) / s.mean()
        assert value == pytest.approx(hajek, rel=1e-12)
        assert lower == pytest.approx(hajek - q * psi.std(ddof=1) / math.sqrt(n), rel=1e-10)


# ------------------------------------------------------------------------ the gate's modes
def test_finite_sample_modes_refuse_weighted_rows_and_auto_takes_t() -> None:
    X, action, reward, p, s = _logs(seed=2)
    pe = (action == 1) * 1.0
    for method, extra in [
        ("betting", {}),
        ("bernstein", {}),
        ("bernstein", {"max_sampling_weight": 3.0}),
    ]:
        with pytest.raises(
            EstimationError,
            match=rf"ci='{method}' does not take sampling "
            r"weights.*column `w8`.*Use ci='t'",
        ):
            certify(
                pe,
                None,
                action,
                reward,
                p,
                reward_range=(0, 1),
                max_weight=3.0,
                ci=method,
                sampling_weight=s,
                weight_name="w8",
                **extra,
            )
    with pytest.raises(EstimationError, match=r"give max_sampling_weight="):
        certify(
            pe,
            None,
            action,
            reward,
            p,
            reward_range=(0, 1),
            max_weight=3.0,
            ci="betting",
            sampling_weight=s,
        )
    cert = certify(
        pe,
        None,
        action,
        reward,
        p,
        reward_range=(0, 1),
        max_weight=3.0,
        sampling_weight=s,
        weight_name="w8",
    )
    assert cert.ci_method == "t" and cert.weighted and cert.sampling_weight == "w8"
    assert any("ci='auto' chose the t bound" in note and "`w8`" in note for note in cert.notes)
    text = " ".join(str(cert).split())  # wrapped to the text width: compared word by word
    assert "Hajek-weighted clipped IPS, sampling weights `w8`" in text
    assert (
        "sampling weights: column `w8` (Horvitz-Thompson: values for the logged population; "
        "t bound of the linearized Hajek ratio, asymptotic)" in text
    )
    assert max(len(line) for line in str(cert).splitlines()) <= TEXT_WIDTH
    doc = cert.to_dict()
    assert doc["weighted"] is True and doc["sampling_weight"] == "w8"
    assert Certificate.from_json(cert.to_json()) == cert
    table = rank_policies(
        {"a1": pe}, None, action, reward, p, reward_range=(0, 1), max_weight=3.0, sampling_weight=s
    )
    assert table["ci_method"].tolist() == ["t"]
    assert table["value"].iloc[0] == pytest.approx(cert.value, rel=1e-12)
    with pytest.raises(ValidationError, match=r"`w8` \(the rows' sampling weights\) must be > 0"):
        certify(
            pe,
            None,
            action,
            reward,
            p,
            reward_range=(0, 1),
            max_weight=3.0,
            sampling_weight=np.where(action == 0, -1.0, 1.0),
            weight_name="w8",
        )


def test_the_gate_does_not_approve_on_one_effective_row_of_sampling_weights() -> None:
    # a fair coin under both arms, and one rewarded row of the candidate's arm with weight 1e9:
    # its Hajek estimate is 2 (= max_weight) for rewards in [0, 1], with a t bound of 1
    rng = np.random.default_rng(0)
    n = 400
    action = rng.integers(0, 2, n)
    reward = rng.binomial(1, 0.5, n).astype(float)
    p, pe = np.full(n, 0.5), (action == 1) * 1.0
    s = np.ones(n)
    s[np.flatnonzero((action == 1) & (reward == 1))[0]] = 1e9
    gate = ope.SafetyGate(reward_range=(0, 1), max_weight=2)
    with pytest.warns(SmallSampleWarning, match=r"rests on 1 effective row \(< 30\)"):
        cert = gate.certify(pe, None, action, reward, p, sampling_weight=s, weight_name="w")
    assert cert.ci_method == "t" and cert.verdict == "reject" and cert.tipping_gamma is None
    assert cert.improvement_lower_bound == pytest.approx(1.0)  # what approved before
    assert "but that t bound rests on 1 effective row (< 30)" in cert.reason
    assert "the gate does not approve on it" in cert.reason
    rules = [getattr(note, "rule", None) for note in cert.notes]
    assert "few_effective_rows" in rules
    assert any("give max_sampling_weight=" in note for note in cert.notes)
    # the weighted note says how concentrated the sampling weights are; the estimate above
    # the range is read as noise
    assert any(
        "Kish effective sample size is 1 of the 400 rows: they concentrate" in note
        for note in cert.notes
    )
    assert cert.value == pytest.approx(2.0)
    assert any("lies above the top of reward_range (1)" in note for note in cert.notes)
    # spread sampling weights: the same certificate approves nothing it did not before
    spread = gate.certify(pe, None, action, reward, p, sampling_weight=np.where(action, 2.0, 1.0))
    assert "few_effective_rows" not in [getattr(note, "rule", None) for note in spread.notes]
    # the same rule through rank_policies and learn_from_logs
    with pytest.warns(SmallSampleWarning, match=r"policy 'a1'.*rests on 1 effective row"):
        rank_policies(
            {"a1": pe},
            None,
            action,
            reward,
            p,
            reward_range=(0, 1),
            max_weight=2.0,
            sampling_weight=s,
        )
    X = rng.normal(size=(n, 2))
    heavy = np.ones(n)
    heavy[np.flatnonzero((action == 1) & (reward == 1))[:3]] = 1e9  # not all in one part
    logs = ope.read_logs(_table(X, action, reward, p, heavy))
    with pytest.warns(SmallSampleWarning, match=r"effective rows? \(< 30\)"):
        _, learned = learn_from_logs(
            logs,
            context_columns=["x0", "x1"],
            learner=ConservativePolicyLearner(reward_range=(0, 1), max_weight=2.0),
            rng=0,
        )
    assert learned.weighted and learned.ci_method == "t" and learned.verdict == "reject"
    assert "few_effective_rows" in [getattr(note, "rule", None) for note in learned.notes]


def test_weighted_betting_bound() -> None:
    from ope.intervals.betting import betting_lower_bound
    from ope.learning._gate import weighted_betting_lower_bound

    rng = np.random.default_rng(8)
    x = rng.uniform(-1.0, 2.0, 700)
    # unit weights with S = 1: the unweighted betting bound, exactly
    for level in (0.9, 0.95):
        assert weighted_betting_lower_bound(
            x, np.ones(700), low=-1.0, high=3.0, max_sampling_weight=1.0, confidence_level=level
        ) == betting_lower_bound(x, low=-1.0, high=3.0, confidence_level=level)
    X, action, reward, p, s = _logs(seed=6)
    pe = np.where(action == 1, 0.8, 0.1)
    cert = certify(
        pe,
        None,
        action,
        reward,
        p,
        reward_range=(0, 1),
        max_weight=3.0,
        sampling_weight=s,
        weight_name="w8",
        max_sampling_weight=3.0,
    )
    assert cert.ci_method == "betting" and cert.weighted  # "auto" with S: finite-sample betting
    assert any(
        "weighted betting bounds" in note and "max_sampling_weight = 3" in note
        for note in cert.notes
    )
    t_cert = certify(
        pe, None, action, reward, p, reward_range=(0, 1), max_weight=3.0, sampling_weight=s, ci="t"
    )
    assert cert.value == t_cert.value  # the same Hajek estimate, another bound
    # another bound of the same estimate (pinned: the betting bound exploits that the terms
    # are >= 0, and is the tighter one on these skewed rows)
    assert cert.lower_bound == pytest.approx(0.5140509307244319, abs=1e-12)
    assert t_cert.lower_bound == pytest.approx(0.4977744153088029, abs=1e-12)
    # a weight above the a priori bound is an error; one a rounding above it is not
    with pytest.raises(ValidationError, match=r"`w8` exceeds max_sampling_weight=2.5 in "):
        certify(
            pe,
            None,
            action,
            reward,
            p,
            reward_range=(0, 1),
            max_weight=3.0,
            sampling_weight=s,
            weight_name="w8",
            max_sampling_weight=2.5,
        )
    certify(
        pe,
        None,
        action,
        reward,
        p,
        reward_range=(0, 1),
        max_weight=3.0,
        sampling_weight=s / (1 - 0.9) / 10,
        max_sampling_weight=3.0,
    )


def test_learn_from_logs_reads_the_weight_column_and_refuses_betting_up_front() -> None:
    X, action, reward, p, s = _logs(seed=3)
    logs = ope.read_logs(
        _table(X, action, reward, p, s).rename_columns(
            ["event_id", "x0", "x1", "action", "reward", "propensity", "keep_w"]
        )
    )
    learner, cert = learn_from_logs(
        logs, context_columns=["x0", "x1"], weight_column="keep_w", rng=0
    )
    assert cert.weighted and cert.sampling_weight == "keep_w" and cert.ci_method == "t"
    with pytest.raises(EstimationError, match="ci='bernstein' does not take"):
        learn_from_logs(
            logs, context_columns=["x0", "x1"], weight_column="keep_w", ci="bernstein", rng=0
        )
    _, cert = learn_from_logs(
        logs, context_columns=["x0", "x1"], weight_column="keep_w", max_sampling_weight=3.0, rng=0
    )
    assert cert.ci_method == "betting" and cert.weighted
    # fit_logs takes the same column
    fitted = ConservativePolicyLearner(rng=0).fit_logs(
        logs, context_columns=["x0", "x1"], weight_column="keep_w"
    )
    direct = ConservativePolicyLearner(rng=0).fit(X, action, reward, p, sample_weight=s)
    assert np.array_equal(fitted.predict_proba(X), direct.predict_proba(X))
    with pytest.raises(ValidationError, match=r"`sample_weight` is zero in 1 row"):
        ConservativePolicyLearner().fit(X, action, reward, p, sample_weight=np.r_[0.0, s[1:]])


# ------------------------------------------------------------------------ simulations
def _dropped(env: ContextualBandit, n: int, rng: np.random.Generator) -> pa.Table:
    """``n`` events of ``env``; segment_1's are kept with probability 1 - DROP_SEGMENT_1 and the
    kept rows carry the weight 1 / P(kept), as the DSJSON importer writes from pdrop."""
    table = env.sample(n, rng=rng)
    seg1 = np.asarray(table.column("segment").to_pylist()) == "segment_1"
    pdrop = np.where(seg1, DROP_SEGMENT_1, 0.0)
    keep = rng.random(n) >= pdrop
    return table.filter(pa.array(keep)).append_column("weight", pa.array(1.0 / (1.0 - pdrop[keep])))


def _drop_env() -> ContextualBandit:
    # segment_0 pays most with action 2, segment_1 with action 0; in the population (segments
    # about even) always-0 is best, in the kept rows (mostly segment_0) always-2
    return ContextualBandit(n_actions=3, n_features=2, n_segments=2, n_noise_features=1, seed=6)


def test_weighted_learner_finds_the_populations_best_policy_on_segment_dropped_logs() -> None:
    env = _drop_env()
    constant = [np.eye(3)[np.full(env.n_contexts, a)] for a in range(3)]
    values = [env.true_value(t) for t in constant]
    assert int(np.argmax(values)) == 0 and values[0] - max(values[1:]) > 0.1
    table = _dropped(env, 20_000, np.random.default_rng(1))
    # the learner sees only x2, pure noise: it learns one policy for every context
    zero = np.zeros((env.n_contexts, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        weighted, cert = learn_from_logs(ope.read_logs(table), context_columns=["x2"], rng=0)
        plain, _ = learn_from_logs(
            ope.read_logs(table.drop(["weight"])), context_columns=["x2"], rng=0
        )
    assert weighted.predict(zero[:1]).tolist() == [0]  # the population's best action
    assert plain.predict(zero[:1]).tolist() == [2]  # the kept rows' best: biased
    v_weighted = env.true_value(weighted.predict_proba(zero))
    v_plain = env.true_value(plain.predict_proba(zero))
    assert v_weighted - v_plain > 0.05  # exact values: 0.513 against 0.437
    assert cert.weighted and cert.ci_method == "t"


@pytest.mark.slow
def test_weighted_t_and_betting_bounds_cover_the_exact_value_at_their_nominal_rate() -> None:
    env = _drop_env()
    truth = env.true_value("mixture")
    improvement = truth - env.true_value("logging")
    rng = np.random.default_rng(123)
    reps = 300
    missed = {kind: np.zeros(2) for kind in ("weighted", "unweighted", "betting")}
    for _ in range(reps):  # one sample of logs per replication
        t = _dropped(env, 4000, rng)
        args = [
            t.column(c).to_numpy() for c in ("target__mixture", "action", "reward", "propensity")
        ]
        s = t.column("weight").to_numpy()
        for kind, weight, method in (
            ("weighted", s, "t"),
            ("unweighted", None, "t"),
            ("betting", s, "betting"),
        ):
            # clipping at M = 40 (above every weight of "mixture", whose logger puts at least
            # 0.05 / 3 on each action): the bound's target is the value itself
            cert = certify(
                args[0],
                None,
                *args[1:],
                reward_range=(0, 1),
                max_weight=40.0,
                ci=method,
                sampling_weight=weight,
                max_sampling_weight=1.0 / (1.0 - DROP_SEGMENT_1),
            )
            missed[kind] += [cert.lower_bound > truth, cert.improvement_lower_bound > improvement]
    # nominal miss rate 5%: 15 of 300, binomial sd 3.8; allow 3 sd above (18 and 6 misses)
    assert np.all(missed["weighted"] <= 26), missed
    # the weighted betting bound is finite-sample: at most nominal (6 and 0 misses here)
    assert np.all(missed["betting"] <= 26), missed
    # ignoring the weights certifies the kept rows' improvement: its bound misses more often
    # than nominal (41 of 300 misses with this seed)
    assert missed["unweighted"][1] > 26, missed


# ------------------------------------------------------------------------ CLI
def _cli(*argv: str) -> tuple[int, str, str]:
    from ope.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_cli_learn_on_weighted_logs(tmp_path) -> None:
    X, action, reward, p, s = _logs(seed=4)
    path = tmp_path / "logs.parquet"
    pq.write_table(_table(X, action, reward, p, s), path)
    code, out, err = _cli(
        "learn", str(path), "--context-columns", "x0", "x1", "--json", "--seed", "0"
    )
    assert code == 0
    doc = json.loads(out)
    assert doc["weight_column"] == "weight"
    cert = doc["certificate"]
    assert cert["weighted"] is True and cert["sampling_weight"] == "weight"
    assert cert["ci_method"] == "t"
    code, out, err = _cli("learn", str(path), "--context-columns", "x0", "x1", "--gate", "betting")
    assert code != 0 and "--gate betting does not take sampling weights" in err
    code, out, err = _cli(
        "learn",
        str(path),
        "--context-columns",
        "x0",
        "x1",
        "--json",
        "--seed",
        "0",
        "--max-sampling-weight",
        "3",
    )
    assert code == 0 and json.loads(out)["certificate"]["ci_method"] == "betting"
    renamed = tmp_path / "renamed.parquet"
    pq.write_table(
        _table(X, action, reward, p, s).rename_columns(
            ["event_id", "x0", "x1", "action", "reward", "propensity", "keep_w"]
        ),
        renamed,
    )
    code, out, err = _cli(
        "learn",
        str(renamed),
        "--context-columns",
        "x0",
        "x1",
        "--json",
        "--weight-column",
        "keep_w",
        "--seed",
        "0",
    )
    assert code == 0 and json.loads(out)["certificate"]["sampling_weight"] == "keep_w"
    code, out, err = _cli(
        "learn", str(renamed), "--context-columns", "x0", "x1", "--json", "--seed", "0"
    )
    assert code == 0 and json.loads(out)["weight_column"] is None  # unweighted
