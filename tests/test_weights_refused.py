"""Sampling weights (the ``weight`` column) outside ``ope.evaluate``: the pooled loggers and the
divergences of responses take them (integer weights give the numbers of the rows repeated
``weight`` times, all-equal weights the unweighted numbers); trajectories and paired replays
refuse them (an ``EstimationError`` naming the column) rather than ignore them."""

from __future__ import annotations

import contextlib
import io
import json
import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import ope
from ope.exceptions import EstimationError, SchemaError
from ope.loggers import balanced_propensities, check_loggers, evaluate_loggers
from ope.sequences import audit_logprobs, read_sequences, sequence_divergences


def _cli(*argv: str) -> tuple[int, str]:
    from ope.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(list(argv))
    return code, out.getvalue()


def _repeated(frame: pd.DataFrame, id_column: str | None = None) -> pd.DataFrame:
    """``frame``'s rows each repeated ``weight`` times, without the column."""
    out = frame.loc[frame.index.repeat(frame["weight"].astype(int))].reset_index(drop=True)
    if id_column is not None:
        out[id_column] = np.arange(len(out))
    return out.drop(columns="weight")


# --------------------------------------------------------------------------- several loggers
def _loggers(n: int = 3000) -> pd.DataFrame:
    """Two loggers (L1 uniform, L2 on action 0), L2's rows kept at rate 1/5 (weight 5)."""
    rng = np.random.default_rng(1)
    logger = np.where(rng.random(n) < 0.5, "L1", "L2")
    p = {"L1": np.array([1 / 3, 1 / 3, 1 / 3]), "L2": np.array([0.8, 0.1, 0.1])}
    u = rng.random(n)
    a = np.where(
        logger == "L1",
        np.searchsorted(np.cumsum(p["L1"]), u),
        np.searchsorted(np.cumsum(p["L2"]), u),
    ).clip(0, 2)
    r = (rng.random(n) < np.array([0.2, 0.5, 0.8])[a]).astype(float)
    df = pd.DataFrame(
        {
            "event_id": np.arange(n),
            "action": a,
            "reward": r,
            "logging_policy": logger,
            "propensity": np.where(logger == "L1", p["L1"][a], p["L2"][a]),
            "target__pi": np.array([0.1, 0.1, 0.8])[a],
            "propensity__L1": p["L1"][a],
            "propensity__L2": p["L2"][a],
            "weight": np.where(logger == "L2", 5.0, 1.0),
        }
    )
    return df[rng.random(n) < 1 / df["weight"]].reset_index(drop=True)


@pytest.mark.parametrize("weighting", ["balanced", "per_logger"])
def test_pooled_loggers_with_integer_weights_give_the_repeated_rows(weighting):
    kept = _loggers()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        weighted = evaluate_loggers(kept, weighting=weighting, estimators=["ips", "snips"])
        repeated = evaluate_loggers(
            _repeated(kept, "event_id"), weighting=weighting, estimators=["ips", "snips"]
        )
    for est in ("ips", "snips"):
        assert weighted["pi", est].value == pytest.approx(repeated["pi", est].value, rel=1e-12)


def test_the_balanced_mixture_takes_each_loggers_sum_of_weights():
    kept = _loggers()
    s = kept["weight"].to_numpy()
    totals = {g: s[kept["logging_policy"] == g].sum() for g in ("L1", "L2")}
    mix = sum(totals[g] / s.sum() * kept[f"propensity__{g}"].to_numpy() for g in totals)
    got = np.asarray(balanced_propensities(kept).column("propensity"))
    np.testing.assert_allclose(got, mix, rtol=1e-14)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ev = evaluate_loggers(kept, weighting="balanced", estimators=["ips"])
    by_hand = np.sum(s * kept["target__pi"] / mix * kept["reward"]) / s.sum()
    assert ev["pi", "ips"].value == pytest.approx(by_hand, rel=1e-12)
    assert any("sums of the sampling weights of column `weight`" in n for n in ev.notes)


@pytest.mark.parametrize("weighting", ["balanced", "per_logger", "precision"])
def test_pooled_loggers_with_all_equal_weights_give_the_unweighted_numbers(weighting):
    kept = _loggers()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = evaluate_loggers(kept.drop(columns="weight"), weighting=weighting)
        equal = evaluate_loggers(kept.assign(weight=3.0), weighting=weighting)
    for est in ("ips", "snips"):
        assert equal["pi", est].value == pytest.approx(plain["pi", est].value, rel=1e-12)
        assert equal["pi", est].std_error == pytest.approx(plain["pi", est].std_error, rel=1e-9)


def test_check_loggers_shares_are_shares_of_the_traffic():
    kept = _loggers()
    weighted = check_loggers(kept).table.set_index("logging_policy")
    repeated = check_loggers(_repeated(kept, "event_id")).table.set_index("logging_policy")
    np.testing.assert_allclose(weighted["share"], repeated["share"], rtol=1e-12)
    assert any("sum of weights" in n for n in check_loggers(kept).notes)
    plain = check_loggers(kept.drop(columns="weight")).table
    equal = check_loggers(kept.assign(weight=2.0)).table
    np.testing.assert_allclose(equal["share"], plain["share"], rtol=1e-14)
    np.testing.assert_allclose(equal["ess_share__pi"], plain["ess_share__pi"], rtol=1e-12)


# --------------------------------------------------------------------------- trajectories
def _steps(weight: float | None = 5.0) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for e in range(60):
        for t in range(3):
            a = int(rng.random() < 0.5)
            rows.append(
                {
                    "episode_id": e,
                    "step": t,
                    "state": t,
                    "action": a,
                    "propensity": 0.5,
                    "reward": float((e % 2) * a),
                    "done": t == 2,
                    "target__pi": 0.9 if a else 0.1,
                }
            )
    d = pd.DataFrame(rows)
    if weight is not None:
        d["weight"] = np.where(d["episode_id"] % 2 == 1, weight, 1.0)
    return d


_REFUSAL = r"column `weight`.*take no sampling weights.*drop or rename it"


def _trajectory_calls():
    from ope.sequential import episode_weights, fitted_q_evaluation, sequential_estimate

    return {
        "evaluate_trajectories": lambda t: ope.evaluate_trajectories(t, estimators=["pdis"]),
        "sequential_estimate": lambda t: sequential_estimate(t, "pi", estimator="pdis"),
        "sequential_estimate_mis": lambda t: sequential_estimate(t, "pi", estimator="mis"),
        "episode_weights": lambda t: episode_weights(t, "pi"),
        "return_distribution": lambda t: ope.return_distribution(t, ["pi"]),
        "fitted_q_evaluation": lambda t: fitted_q_evaluation(
            t, np.array([[0.1, 0.9]] * 3), gamma=0.9, state_column="state"
        ),
    }


@pytest.mark.parametrize("entry", sorted(_trajectory_calls()))
def test_trajectory_entry_points_refuse_sampling_weights(entry):
    call = _trajectory_calls()[entry]
    with pytest.raises(EstimationError, match=_REFUSAL):
        call(ope.read_trajectories(_steps()))
    with warnings.catch_warnings():  # all-1 weights are no weights: the unweighted result
        warnings.simplefilter("ignore")
        call(ope.read_trajectories(_steps(weight=1.0)))


def test_all_one_weights_on_trajectories_give_the_unweighted_numbers():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ones = ope.evaluate_trajectories(ope.read_trajectories(_steps(1.0)), estimators=["pdis"])
        plain = ope.evaluate_trajectories(ope.read_trajectories(_steps(None)), estimators=["pdis"])
    assert ones["pi", "pdis"].value == plain["pi", "pdis"].value


def test_cli_trajectories_refuse_sampling_weights_with_one_json_document(tmp_path):
    path = tmp_path / "traj.parquet"
    _steps().to_parquet(path)
    code, out = _cli("evaluate", str(path), "--trajectories", "--json")
    doc = json.loads(out)
    assert code == 1 and doc["exit_code"] == 1 and not doc["ok"]
    assert doc["error"]["type"] == "EstimationError"
    assert "column `weight`" in doc["error"]["message"]


def test_sequence_trajectories_keep_the_weights_so_the_estimators_refuse_them():
    from ope.sequences import sequence_trajectories
    from ope.sequential import sequential_estimate

    frame = _responses().assign(step_rewards=lambda d: [[0.0, 0.0, r] for r in d["reward"]])
    traj = sequence_trajectories(frame)
    assert "weight" in traj.table.column_names
    with pytest.raises(EstimationError, match=_REFUSAL):
        sequential_estimate(traj, "tuned", estimator="pdis")


# --------------------------------------------------------------------------- paired replays
def _replays(weight: float | None = 5.0) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for p in range(40):
        seg = p % 2
        for arm in ("ctl", "trt"):
            for rep in range(2):
                effect = (1.0 if seg else -0.2) if arm == "trt" else 0.0
                rows.append(
                    {
                        "pair_id": p,
                        "arm": arm,
                        "replicate": rep,
                        "outcome": effect + rng.normal(scale=0.1),
                        "weight": weight if seg else 1.0,
                    }
                )
    d = pd.DataFrame(rows)
    return d if weight is not None else d.drop(columns="weight")


def test_paired_effect_refuses_sampling_weights():
    with pytest.raises(EstimationError, match=r"column `weight`.*take no sampling weights"):
        ope.paired_effect(_replays(), treated="trt", control="ctl")
    ones = ope.paired_effect(_replays(1.0), treated="trt", control="ctl").table()
    plain = ope.paired_effect(_replays(None), treated="trt", control="ctl").table()
    assert ones["value"].iloc[0] == plain["value"].iloc[0]


def test_cli_paired_refuses_sampling_weights_with_one_json_document(tmp_path):
    path = tmp_path / "replays.parquet"
    _replays().to_parquet(path)
    code, out = _cli("paired", str(path), "--treated", "trt", "--control", "ctl", "--json")
    doc = json.loads(out)
    assert code == 1 and doc["exit_code"] == 1 and doc["error"]["type"] == "EstimationError"
    assert "column `weight`" in doc["error"]["message"]


# --------------------------------------------------------------------------- responses
def _responses(n: int = 300) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    behavior = [list(-rng.exponential(0.5, 3)) for _ in range(n)]
    return pd.DataFrame(
        {
            "behavior_logprobs": behavior,
            "target_logprobs__tuned": [
                [min(0.0, x + rng.normal(scale=0.3)) for x in b] for b in behavior
            ],
            "reward": np.arange(n) % 2 * 1.0,
            "weight": np.where(np.arange(n) % 3 == 1, 4.0, 1.0),
        }
    )


_MEANS = ["k1", "k2", "k3", "kl_candidate_logger", "mean_weight", "zero_weight_share"]


def test_divergences_with_integer_weights_give_the_repeated_responses():
    frame = _responses()
    weighted = sequence_divergences(frame).table().iloc[0]
    repeated = sequence_divergences(_repeated(frame)).table().iloc[0]
    plain = sequence_divergences(frame.drop(columns="weight")).table().iloc[0]
    for key in _MEANS:
        assert weighted[key] == pytest.approx(repeated[key], rel=1e-12, abs=1e-15), key
    assert abs(weighted["mean_weight"] - plain["mean_weight"]) > 1e-3
    # Kish's ESS of s w, compared with Kish's ESS of s alone
    s = frame["weight"].to_numpy()
    w = np.exp(read_sequences(frame).log_weights()[:, 0])
    ess = (s @ w) ** 2 / np.sum((s * w) ** 2)
    assert weighted["ess"] == pytest.approx(ess, rel=1e-12)
    assert weighted["ess_share"] == pytest.approx(ess / (s.sum() ** 2 / (s @ s)), rel=1e-12)
    # the linearized standard error of the Hajek mean weight
    m = weighted["mean_weight"]
    se = np.sqrt(len(s) / (len(s) - 1) * np.sum((s * (w - m)) ** 2)) / s.sum()
    assert weighted["mean_weight_se"] == pytest.approx(se, rel=1e-12)
    notes = sequence_divergences(frame).notes
    assert any("sampling weights (column `weight`)" in n for n in notes)


def test_divergences_with_all_equal_weights_give_the_unweighted_numbers():
    frame = _responses()
    plain = sequence_divergences(frame.drop(columns="weight")).table()
    equal = sequence_divergences(frame.assign(weight=2.5)).table()
    numbers = [c for c in plain.columns if c not in ("policy", "evaluable", "reason")]
    np.testing.assert_allclose(
        equal[numbers].to_numpy(float), plain[numbers].to_numpy(float), rtol=1e-12
    )
    assert list(equal["evaluable"]) == list(plain["evaluable"])


def test_divergences_take_a_named_weight_column():
    frame = _responses()
    named = sequence_divergences(frame.rename(columns={"weight": "s"}), weight_column="s")
    default = sequence_divergences(frame)
    pd.testing.assert_frame_equal(named.table(), default.table())


def test_the_audit_tests_the_weighted_mean_weight_and_says_so():
    frame = _responses()
    audit = audit_logprobs(frame).weights().iloc[0]
    repeated = audit_logprobs(_repeated(frame)).weights().iloc[0]
    assert audit["mean_weight"] == pytest.approx(repeated["mean_weight"], rel=1e-12)
    assert any("column `weight`" in n for n in audit_logprobs(frame).notes)
    plain = audit_logprobs(frame.drop(columns="weight")).weights()
    equal = audit_logprobs(frame.assign(weight=7.0)).weights()
    np.testing.assert_allclose(equal["mean_weight"], plain["mean_weight"], rtol=1e-12)
    np.testing.assert_allclose(equal["z"], plain["z"], rtol=1e-9)


def test_sequence_trajectories_keep_weights_of_any_column_name() -> None:
    """Weights in a column named by weight_column= reach the trajectories' `weight` column,
    so the trajectory estimators refuse them (before, only a column named `weight` was kept,
    and weights in `w` were dropped without a word); equal weights are the unweighted rows."""
    frame = _responses().rename(columns={"weight": "w"})
    frame["step_rewards"] = [
        [0.0] * (len(b) - 1) + [r] for b, r in zip(frame["behavior_logprobs"], frame["reward"])
    ]
    traj = ope.sequence_trajectories(ope.read_sequences(frame), weight_column="w")
    with pytest.raises(EstimationError, match="column `weight`"):
        ope.evaluate_trajectories(traj)
    with pytest.raises(SchemaError, match="weight_column='v' is not a column"):
        ope.sequence_trajectories(ope.read_sequences(frame), weight_column="v")


def test_equal_response_weights_give_the_unweighted_divergences_exactly() -> None:
    frame = _responses()
    plain = ope.sequence_divergences(ope.read_sequences(frame.drop(columns="weight")))
    equal = ope.sequence_divergences(ope.read_sequences(frame.assign(weight=3.0)))
    pd.testing.assert_frame_equal(equal.table(), plain.table())
    assert not any("sampling weights" in n for n in equal.notes)


def test_a_text_weight_column_is_no_unit_weight() -> None:
    """A `weight` column of the text "1" is refused like any column that is not numbers (it
    passed as all-1 weights, a review found); integer and float ones stay accepted."""
    from ope.weights import refuse_sampling_weights

    for column in (pa.array(["1", "1"]), np.array(["1", "1"]), [True, True]):
        with pytest.raises(EstimationError, match="take no sampling weights"):
            refuse_sampling_weights(
                column, what="replays", estimators="paired effects", units="pairs"
            )
    for column in (pa.array([1, 1]), np.ones(2), [1.0, 1.0], None):
        refuse_sampling_weights(column, what="replays", estimators="paired effects", units="pairs")
