"""Estimated propensities (ope.propensity): accuracy against exact truth, the floor, the bug detector."""

from __future__ import annotations

import inspect
import json
import warnings

import numpy as np
import pyarrow as pa
import pytest
from sklearn.dummy import DummyClassifier

from ope.estimators import IPS
from ope.exceptions import EstimationError, ParameterError, SchemaError
from ope.propensity import (
    PropensityCheck,
    check_propensities,
    estimate_propensities,
    propensity_info,
    propensity_source,
)
from ope.simulate import ContextualBandit

FEATURES = ["x0", "x1", "x2"]
DEFAULT_MODEL = (
    "multinomial LogisticRegression on standardized features (fitted on all rows, no calibration)"
)


@pytest.fixture(scope="module")
def design():
    """A logger that is a multinomial logit of the features (the default model is right)."""
    env = ContextualBandit(n_actions=4, n_features=3, n_contexts=100, seed=0)
    s = env.context_features @ (np.random.default_rng(5).standard_normal((3, 4)) * 0.6)
    table = np.exp(s - s.max(axis=1, keepdims=True))
    table /= table.sum(axis=1, keepdims=True)
    logs = env.sample(20_000, rng=1, logging_policy=table)
    return env, logs


@pytest.fixture(scope="module")
def estimated(design):
    _, logs = design
    return estimate_propensities(logs.drop_columns(["propensity"]), context_columns=FEATURES, rng=0)


@pytest.mark.parametrize("policy", ["uniform", "softmax", "mixture", "optimal"])
def test_ips_with_estimated_propensities_is_within_3_se_of_the_truth(design, estimated, policy):
    env, _ = design
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = IPS().estimate(
            estimated.column("reward"),
            estimated.column("propensity"),
            estimated.column(f"target__{policy}"),
        )
    assert abs(est.value - env.true_value(policy)) < 3 * est.std_error


def test_estimated_propensities_are_flagged_in_the_logs(design, estimated):
    assert propensity_source(estimated) == "estimated"
    assert propensity_source(design[1]) == "logged"
    info = propensity_info(estimated)
    assert info["propensity_floor"] == 1e-3
    assert info["propensity_model"] == DEFAULT_MODEL
    assert info["propensity_floored_rows"] == int((estimated.column("propensity") == 1e-3).sum())


def _hand_fitted(x, a, folds, classifier):
    """The propensity of each logged action by a fit outside its fold (in-sample for 1 fold)."""
    from sklearn.base import clone

    n = a.shape[0]
    fold = np.random.default_rng(0).permutation(np.arange(n) % folds)
    out = np.empty(n)
    for k in range(folds):
        test = fold == k
        train = ~test if folds > 1 else test
        m = clone(classifier).fit(x[train], a[train])
        proba = m.predict_proba(x[test])
        out[test] = proba[np.arange(proba.shape[0]), np.searchsorted(m.classes_, a[test])]
    return out


def test_the_defaults_an_in_sample_multinomial_logit_without_calibration():
    # fixed data; the defaults recomputed by hand: a standardized multinomial logistic
    # regression fitted on every row (no cross-fitting), no calibration, floor 1e-3; a given
    # classifier is cross-fitted on 5 folds drawn from rng
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    env = ContextualBandit(n_actions=3, n_features=2, n_contexts=20, seed=0)
    raw = env.sample(600, rng=1).drop_columns(["propensity"])
    x = np.column_stack([raw.column("x0").to_numpy(), raw.column("x1").to_numpy()])
    a = raw.column("action").to_numpy()
    default = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))

    logs = estimate_propensities(raw, context_columns=["x0", "x1"], rng=0)
    want = np.maximum(_hand_fitted(x, a, 1, default), 1e-3)
    np.testing.assert_allclose(logs.column("propensity"), want, rtol=1e-9, atol=0)
    np.testing.assert_allclose(  # the same numbers, pinned (measured with scikit-learn 1.9)
        logs.column("propensity")[:3],
        [0.6303724790697283, 0.1168759198096614, 0.5478963248093647],
        rtol=1e-6,
    )
    assert propensity_info(logs) == {
        "propensity_source": "estimated",
        "propensity_floor": 1e-3,
        "propensity_floored_rows": 0,
        "propensity_model": DEFAULT_MODEL,
        "propensity_context_columns": ["x0", "x1"],
    }
    sig = inspect.signature(estimate_propensities).parameters
    assert (sig["calibration"].default, sig["n_folds"].default, sig["min_propensity"].default) == (
        "none",
        None,
        1e-3,
    )
    assert inspect.signature(check_propensities).parameters["calibration"].default == "none"

    given = LogisticRegression(max_iter=1000)
    crossed = estimate_propensities(raw, context_columns=["x0", "x1"], classifier=given, rng=0)
    np.testing.assert_allclose(
        crossed.column("propensity"), np.maximum(_hand_fitted(x, a, 5, given), 1e-3), rtol=1e-9
    )
    assert propensity_info(crossed)["propensity_model"] == (
        "LogisticRegression (5-fold cross-fitted, no calibration)"
    )


def test_floor_and_an_action_absent_from_the_training_folds():
    # 39 rows of action 0 and one of action 1: the action-1 row's fold never saw action 1,
    # so its prior-classifier probability is 0 and is raised to the floor
    n = 40
    t = pa.table(
        {"action": [0] * (n - 1) + [1], "reward": [1.0] * n, "x0": np.arange(n, dtype=float)}
    )
    logs = estimate_propensities(
        t,
        context_columns=["x0"],
        classifier=DummyClassifier(strategy="prior"),
        calibration="none",
        n_folds=4,
        rng=0,
        min_propensity=0.01,
    )
    p = logs.column("propensity")
    assert p[-1] == 0.01
    assert propensity_info(logs)["propensity_floored_rows"] == 1
    # the other rows: 1 in the action-1 row's fold (training saw only action 0), else 1 - 1/30
    assert set(np.round(p[:-1], 12)) == {1.0, round(1 - 1 / 30, 12)}
    assert int((p[:-1] == 1.0).sum()) == 9


def test_estimated_distribution_over_candidates():
    env = ContextualBandit(n_actions=3, n_features=2, n_contexts=20, seed=0)
    t = env.sample(3000, rng=2, distributions=True)
    logs = estimate_propensities(
        t.drop_columns(["propensity"]), context_columns=["x0", "x1"], calibration="sigmoid", rng=0
    )
    dist = np.asarray(logs.table.column("logging_distribution").combine_chunks().flatten()).reshape(
        -1, 3
    )
    np.testing.assert_allclose(dist.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    a = logs.column("action")
    np.testing.assert_array_equal(logs.column("propensity"), dist[np.arange(a.size), a])


def test_estimated_logs_go_through_ope_evaluate(design, estimated):
    import ope

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ev = ope.evaluate(estimated, ["uniform"], estimators=["ips"])
    direct = np.mean(estimated.column("reward") * 0.25 / estimated.column("propensity"))
    assert ev["uniform", "ips"].value == pytest.approx(direct, rel=1e-12)
    assert ev["uniform", "ips"].value == pytest.approx(design[0].true_value("uniform"), abs=0.02)
    # every result says the propensities are estimated: field, JSON, notes, text
    assert ev.propensity_source == "estimated"
    assert ev.to_dict()["propensity_source"] == "estimated"
    assert any("propensities are estimated" in n for n in ev.notes)
    assert "propensities are estimated" in ev.summary()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = ope.diagnose(estimated, ["uniform"])
    assert any("propensities are estimated" in n for n in d.notes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logged = ope.evaluate(design[1], ["uniform"], estimators=["ips"])
    assert logged.propensity_source == "logged"
    assert not any("propensities are estimated" in n for n in logged.notes)


def _with_bug(logs: pa.Table, action: int) -> pa.Table:
    p = logs.column("propensity").to_numpy().copy()
    p[logs.column("action").to_numpy() == action] *= 0.5
    return logs.set_column(logs.column_names.index("propensity"), "propensity", pa.array(p))


def test_correct_logs_are_consistent(design):
    res = check_propensities(design[1], context_columns=FEATURES, rng=0)
    assert isinstance(res, PropensityCheck)
    assert res.verdict == "consistent" and res.flagged_actions == []
    assert (res.by_action["ratio"].between(1 / 1.2, 1.2)).all()


def test_planted_bug_is_detected_with_its_action_and_rows(design):
    res = check_propensities(_with_bug(design[1], 2), context_columns=FEATURES, by="segment", rng=0)
    assert res.verdict == "disagree"
    assert res.flagged_actions == [2]
    assert res.by_action.set_index("action").loc[2, "ratio"] == pytest.approx(0.5, rel=0.15)
    share = res.by_action.set_index("action")["share_disagree"]
    assert share[2] > 0.9 and (share.drop(2) < 0.05).all()  # measured 0.9985 vs <= 0.0095
    assert int((res.worst_rows["action"] == 2).sum()) >= 8  # measured 8 of 10
    assert res.by_segment is not None and len(res.by_segment) == 4
    d = json.loads(json.dumps(res.to_dict()))
    assert d["verdict"] == "disagree" and d["flagged_actions"] == [2]
    assert "disagree" in res.summary() and "<ol" in res._repr_html_()


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"calibration": "platt"}, ParameterError, "calibration"),
        ({"min_propensity": 0.0}, ParameterError, "min_propensity"),
        # below the read rule's MIN_PROPENSITY its floored rows could not be read back
        ({"min_propensity": 1e-200}, ParameterError, r"must be in \[1e-150, 1\)"),
        ({"n_folds": 0}, ParameterError, "n_folds"),
        ({"classifier": object()}, ParameterError, "predict_proba"),
        ({"context_columns": ["nope"]}, SchemaError, "nope"),
    ],
)
def test_bad_arguments(kwargs, error, match):
    t = pa.table({"action": [0, 1] * 10, "reward": [1.0] * 20, "x0": np.arange(20.0)})
    args = {"context_columns": ["x0"], **kwargs}
    with pytest.raises(error, match=match):
        estimate_propensities(t, **args)


def test_one_action_cannot_be_classified():
    t = pa.table({"action": [3] * 20, "reward": [1.0] * 20, "x0": np.arange(20.0)})
    with pytest.raises(EstimationError, match="at least 2 actions"):
        estimate_propensities(t, context_columns=["x0"])


def test_check_needs_logged_propensities():
    t = pa.table({"action": [0, 1] * 10, "reward": [1.0] * 20, "x0": np.arange(20.0)})
    with pytest.raises(SchemaError, match="estimate_propensities"):
        check_propensities(t, context_columns=["x0"])


# --------------------------------------------------------------------------------------------
# provenance: the record survives parquet, scans, Dask, the CLI, and reaches every output
# --------------------------------------------------------------------------------------------
ESTIMATED_NOTE = "propensities are estimated"


@pytest.fixture(scope="module")
def small_estimated():
    env = ContextualBandit(n_actions=3, n_features=2, n_contexts=20, seed=0)
    raw = env.sample(2000, rng=1).drop_columns(["propensity"])
    return estimate_propensities(raw, context_columns=["x0", "x1"], rng=0)


@pytest.fixture
def estimated_files(tmp_path, small_estimated):
    """One parquet file, and a directory of two, written from estimated logs."""
    import pyarrow.parquet as pq

    t = small_estimated.table
    pq.write_table(t, tmp_path / "one.parquet")
    (tmp_path / "dir").mkdir()
    pq.write_table(t.slice(0, 1000), tmp_path / "dir" / "a.parquet")
    pq.write_table(t.slice(1000), tmp_path / "dir" / "b.parquet")
    return tmp_path


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


@pytest.mark.parametrize("name", ["one.parquet", "dir"])
def test_provenance_survives_a_parquet_round_trip(estimated_files, small_estimated, name):
    import ope

    want = propensity_info(small_estimated)
    assert want["propensity_source"] == "estimated"
    back = ope.read_logs(estimated_files / name)
    assert propensity_info(back) == want
    scan = ope.scan_logs(estimated_files / name, batch_size=700)
    assert propensity_info(scan) == want
    assert all(propensity_info(batch) == want for batch in scan)  # every batch carries it
    for logs in (back, scan):
        ev = _quiet(ope.evaluate, logs, ["uniform"], estimators=["ips", "snips"])
        assert ev.propensity_source == "estimated"
        assert ev.to_dict()["propensity_source"] == "estimated"
        assert sum(ESTIMATED_NOTE in n for n in ev.notes) == 1
    # the record never leaks onto logs whose propensities are logged
    logged = ope.read_logs(ContextualBandit(n_actions=3, n_features=2, seed=0).sample(50, rng=0))
    assert propensity_info(logged) == {"propensity_source": "logged"}


def test_provenance_of_a_directory_whose_files_disagree(tmp_path, small_estimated):
    import pyarrow.parquet as pq

    import ope

    t = small_estimated.table
    pq.write_table(t.slice(0, 1000), tmp_path / "a.parquet")
    pq.write_table(t.slice(1000).replace_schema_metadata(None), tmp_path / "b.parquet")
    info = propensity_info(ope.read_logs(tmp_path))
    assert info == {
        "propensity_source": "estimated",
        "propensity_model": "mixed: 1 of 2 files estimated",
    }


def test_provenance_reaches_the_distributed_evaluation(estimated_files):
    dask = pytest.importorskip("dask")
    from ope.distributed import evaluate_distributed

    with dask.config.set(scheduler="threads"):
        ev = _quiet(
            evaluate_distributed,
            estimated_files / "dir",
            policies=["uniform"],
            estimators=("ips",),
            batch_size=500,
        )
    assert ev.propensity_source == "estimated"
    assert sum(ESTIMATED_NOTE in n for n in ev.notes) == 1


@pytest.mark.parametrize("streaming", ["off", "on"])
def test_provenance_in_the_cli_json_text_and_report(estimated_files, capsys, streaming):
    from ope.cli import EXIT_OK, main

    path = str(estimated_files / "one.parquet")
    common = ["--policy", "uniform", "--estimator", "ips", "--streaming", streaming, "--quiet"]
    assert _quiet(main, ["evaluate", path, "--json", *common]) == EXIT_OK
    doc = json.loads(capsys.readouterr().out)
    assert doc["propensity_source"] == "estimated"
    assert sum(ESTIMATED_NOTE in n for n in doc["notes"]) == 1
    assert _quiet(main, ["evaluate", path, *common]) == EXIT_OK
    text = capsys.readouterr().out
    assert "propensities:" in text and "estimated" in text and ESTIMATED_NOTE in text
    if streaming == "off":
        assert main(["validate", path, "--json", "--quiet"]) == EXIT_OK
        assert json.loads(capsys.readouterr().out)["propensity"]["propensity_source"] == "estimated"
        assert main(["validate", path, "--quiet"]) == EXIT_OK
        assert "note: " + ESTIMATED_NOTE in capsys.readouterr().out
        out = estimated_files / "r.html"
        assert (
            _quiet(main, ["report", path, "--policy", "uniform", "--quiet", "--out", str(out)])
            == EXIT_OK
        )
        page = out.read_text()
        assert ESTIMATED_NOTE in page and "LogisticRegression" in page


def test_check_end_to_end_from_parquet(tmp_path, design):
    import pyarrow.parquet as pq

    import ope

    pq.write_table(_with_bug(design[1].slice(0, 8000), 1), tmp_path / "bug.parquet")
    res = check_propensities(
        ope.read_logs(tmp_path / "bug.parquet"), context_columns=FEATURES, by="segment", rng=0
    )
    assert res.verdict == "disagree" and res.flagged_actions == [1]
    assert res.model == DEFAULT_MODEL
    doc = json.loads(json.dumps(res.to_dict()))
    assert doc["flagged_actions"] == [1] and doc["worst_rows"][0]["action"] == 1
    assert "event_id" in res.worst_rows.columns and "check how the logger" in res.summary()


def test_check_of_estimated_propensities_says_it_cannot_find_a_bug(small_estimated):
    res = check_propensities(small_estimated, context_columns=["x0", "x1"], rng=0)
    assert res.verdict == "consistent"
    assert any("compares a model with a model" in n for n in res.notes)


def test_provenance_reaches_the_learning_certificate(small_estimated):
    from ope.learning import learn_from_logs

    _, cert = _quiet(learn_from_logs, small_estimated, context_columns=["x0", "x1"], rng=0)
    assert sum(ESTIMATED_NOTE in n for n in cert.notes) == 1
    assert any(ESTIMATED_NOTE in n for n in json.loads(cert.to_json())["notes"])


@pytest.mark.parametrize("with_candidates", [False, True])
def test_a_floor_no_distribution_can_respect_is_refused(with_candidates):
    # a floor of 0.5 over 3 actions raised every estimate and the estimated logger summed to 1.5
    g = np.random.default_rng(0)
    n = 300
    cols = {"action": g.integers(0, 3, n), "x0": g.normal(size=n), "reward": g.random(n)}
    if with_candidates:
        cols["candidates"] = [[0, 1, 2]] * n
    table = pa.table(cols)
    with pytest.raises(ParameterError, match=r"min_propensity`=0.5 is at least 1/3"):
        estimate_propensities(table, context_columns=["x0"], min_propensity=0.5, rng=0)
    logs = estimate_propensities(table, context_columns=["x0"], min_propensity=0.3, rng=0)
    if with_candidates:  # floored, then renormalized: a distribution over each row's set
        dist = np.array(logs.table.column("logging_distribution").to_pylist())
        np.testing.assert_allclose(dist.sum(axis=1), 1.0, rtol=1e-12)
    else:
        assert logs.table.column("propensity").to_numpy().min() >= 0.3


def _context_logs(n: int = 400) -> pa.Table:
    g = np.random.default_rng(0)
    x = g.normal(size=n)
    score = np.c_[np.zeros(n), x, -x]
    probs = np.exp(score) / np.exp(score).sum(axis=1, keepdims=True)
    a = (g.random(n)[:, None] > probs.cumsum(axis=1)).sum(axis=1)
    return pa.table({"x": x, "action": a, "reward": g.binomial(1, 0.5, n) * 1.0})


def test_features_near_the_float64_limits_are_standardized_without_overflow():
    """The default classifier's features are first put in power-of-two units per column (as
    the learners do): at 1e300 or 1e-300 times the features it fits as on the features
    themselves, with no overflow warning and no NaN fed to the classifier."""
    t = _context_logs()
    x = t.column("x").to_numpy()
    plain = estimate_propensities(t, context_columns=["x"]).column("propensity")
    for scale in (1e300, 1e-300, 2.0**900):
        scaled = t.set_column(0, "x", pa.array(x * scale))
        got = estimate_propensities(scaled, context_columns=["x"]).column("propensity")
        np.testing.assert_allclose(got, plain, rtol=1e-9)


def test_the_logged_propensity_replaced_is_said_in_every_result(tmp_path):
    """A logged ``propensity`` column (NaN on one row here) is replaced, as documented, and the
    returned logs' record says so, so every evaluation of them does too, also after a parquet
    round trip (the note was in the returned logs' report only, and a written file lost it)."""
    import ope

    t = _context_logs()
    logged = np.full(t.num_rows, 0.3)
    logged[0] = np.nan
    with_logged = t.append_column("propensity", pa.array(logged))
    logs = estimate_propensities(with_logged, context_columns=["x"])
    note = propensity_info(logs)["propensity_replaced"]
    assert "`propensity` was replaced" in note and "1 of the logged propensities" in note
    assert "check_propensities" in note
    ev = ope.evaluate(
        estimate_propensities(
            with_logged.append_column("target__one", pa.array(np.full(t.num_rows, 1 / 3))),
            context_columns=["x"],
        )
    )
    assert ev.notes.count(note) == 1
    path = tmp_path / "estimated.parquet"
    import pyarrow.parquet as pq

    pq.write_table(
        estimate_propensities(
            with_logged.append_column("target__one", pa.array(np.full(t.num_rows, 1 / 3))),
            context_columns=["x"],
        ).table,
        path,
    )
    for source in (ope.read_logs(path), ope.scan_logs(path)):
        assert ope.evaluate(source, estimators=("ips",)).notes.count(note) == 1
    fresh = estimate_propensities(t, context_columns=["x"])
    assert "propensity_replaced" not in propensity_info(fresh)


def test_sampling_weights_that_no_estimate_could_use_are_refused_here():
    from ope.exceptions import ValidationError

    t = _context_logs()
    for bad, match in ((np.nan, "`weight` must be finite"), (-3.0, r"`weight` .* must be > 0")):
        weight = np.ones(t.num_rows)
        weight[0] = bad
        with pytest.raises(ValidationError, match=match):
            estimate_propensities(
                t.append_column("weight", pa.array(weight)), context_columns=["x"]
            )
    with pytest.raises(SchemaError, match="must be numeric"):
        estimate_propensities(
            t.append_column("weight", pa.array(["1"] * t.num_rows)), context_columns=["x"]
        )
    good = estimate_propensities(
        t.append_column("weight", pa.array(np.full(t.num_rows, 2.0))), context_columns=["x"]
    )
    assert "weight" in good.columns


def _thinned_logs(n: int = 12_000, seed: int = 1) -> tuple[pa.Table, np.ndarray]:
    """A softmax logger over 3 actions of 2 features whose rows of action 0 were kept with
    probability 0.2 (pdrop 0.8; ``weight`` = 5), the others always: among the kept rows
    action 0 is 5x rarer than the logger chose it. Returns the kept rows (with the logged
    propensities) and the logger's true probability of each kept row's action."""
    g = np.random.default_rng(seed)
    x = g.standard_normal((n, 2))
    score = np.stack([np.zeros(n), x[:, 0], x[:, 1] - 0.5], axis=1)
    pi = np.exp(score)
    pi /= pi.sum(axis=1, keepdims=True)
    a = (g.random(n)[:, None] > np.cumsum(pi, axis=1)).sum(axis=1)
    keep = np.where(a == 0, 0.2, 1.0)
    kept = g.random(n) < keep
    true_p = pi[np.arange(n), a][kept]
    table = pa.table(
        {
            "action": a[kept],
            "propensity": true_p,
            "reward": np.ones(int(kept.sum())),
            "x0": x[kept, 0],
            "x1": x[kept, 1],
            "weight": 1.0 / keep[kept],
            "target__zero": (a[kept] == 0).astype(float),
        }
    )
    return table, true_p


def test_sampling_weights_weight_the_fit():
    """Rows kept with a probability that depends on the action: the weighted fit estimates the
    logger's probabilities (on the traffic), the unweighted one those of the kept rows (action 0
    about 5x too rare). Before, the weights were checked and then ignored by the fit."""
    table, true_p = _thinned_logs()

    def error(logs) -> float:
        return float(np.mean(np.abs(np.log(logs.column("propensity") / true_p))))

    weighted = estimate_propensities(table, context_columns=["x0", "x1"])
    unweighted = estimate_propensities(table.drop_columns(["weight"]), context_columns=["x0", "x1"])
    assert error(weighted) < 0.04
    assert error(unweighted) > 0.25
    assert "weighted by the sampling weights" in propensity_info(weighted)["propensity_model"]
    assert "weighted" not in propensity_info(unweighted)["propensity_model"]
    # cross-fitted and calibrated fits take them too (the calibration wraps the regression)
    for kw in ({"n_folds": 3}, {"calibration": "isotonic"}):
        assert error(estimate_propensities(table, context_columns=["x0", "x1"], **kw)) < 0.1
    # a given classifier takes them when its fit (or its pipeline's last step's) does
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    for clf in (LogisticRegression(), make_pipeline(StandardScaler(), LogisticRegression())):
        assert (
            error(estimate_propensities(table, context_columns=["x0", "x1"], classifier=clf)) < 0.04
        )


def test_equal_sampling_weights_give_the_unweighted_fit_exactly():
    table, _ = _thinned_logs(n=3_000)
    plain = estimate_propensities(table.drop_columns(["weight"]), context_columns=["x0", "x1"])
    equal = estimate_propensities(
        table.set_column(5, "weight", pa.array(np.full(table.num_rows, 3.0))),
        context_columns=["x0", "x1"],
    )
    np.testing.assert_array_equal(equal.column("propensity"), plain.column("propensity"))
    assert "weighted" not in propensity_info(equal)["propensity_model"]


def test_a_classifier_that_cannot_take_sampling_weights_is_refused():
    from sklearn.linear_model import LogisticRegression
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    table, _ = _thinned_logs(n=3_000)
    cases = (
        (KNeighborsClassifier(), "none", r"KNeighborsClassifier\.fit takes no sample_weight"),
        (
            make_pipeline(StandardScaler(), KNeighborsClassifier()),
            "none",
            "nor does its last step",
        ),
        (
            make_pipeline(StandardScaler(), LogisticRegression()),
            "sigmoid",
            "calibration='sigmoid' passes them only",
        ),
    )
    for clf, cal, match in cases:
        with pytest.raises(ParameterError, match=match):
            estimate_propensities(
                table, context_columns=["x0", "x1"], classifier=clf, calibration=cal
            )
    # without the weight column the same classifier is fitted (unweighted)
    estimate_propensities(
        table.drop_columns(["weight"]),
        context_columns=["x0", "x1"],
        classifier=KNeighborsClassifier(),
    )


def test_the_bug_detector_weights_its_fit():
    """Logged propensities that are right on the traffic are consistent with the weighted fit;
    an unweighted fit of the thinned rows would flag action 0 (about 5x off)."""
    table, _ = _thinned_logs()
    check = check_propensities(table, context_columns=["x0", "x1"])
    assert check.verdict == "consistent", check.by_action
    assert "weighted by the sampling weights" in check.model
    unweighted = check_propensities(table.drop_columns(["weight"]), context_columns=["x0", "x1"])
    assert unweighted.verdict == "disagree"


def test_sampling_weights_in_another_column_are_named_and_recorded():
    """``weight_column=`` names the sampling weights (before, only a column named ``weight``
    weighted the fit, so weights in ``w`` were ignored without a word); the record keeps the
    column, and a result weighted by other weights than the fit's says so."""
    import ope

    table, true_p = _thinned_logs()
    renamed = table.rename_columns(["w" if c == "weight" else c for c in table.column_names])
    logs = estimate_propensities(renamed, context_columns=["x0", "x1"], weight_column="w")
    assert np.mean(np.abs(np.log(logs.column("propensity") / true_p))) < 0.04
    info = propensity_info(logs)
    assert info["propensity_weight_column"] == "w"
    assert "weighted by the sampling weights `w`" in info["propensity_model"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same = ope.diagnose(logs, weight_column="w", sensitivity=False)
    assert not any("estimated without the sampling weights" in n for n in same.notes)
    # fitted unweighted, then diagnosed with the weights: the note says the fit lacked them
    plain = estimate_propensities(renamed, context_columns=["x0", "x1"])
    assert "propensity_weight_column" not in propensity_info(plain)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        other = ope.diagnose(plain, weight_column="w", sensitivity=False)
    assert any(
        "the propensities were estimated without the sampling weights `w`" in n
        and "weight_column='w'" in n
        for n in other.notes
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        evaluated = ope.evaluate(plain, weight_column="w", estimators=("ips",))
        agreed = ope.evaluate(logs, weight_column="w", estimators=("ips",))
        unweighted = ope.evaluate(logs.table.drop_columns(["w"]), estimators=("ips",))
    assert any("estimated without the sampling weights `w`" in n for n in evaluated.notes)
    assert not any("sampling weights `w`" in n and "estimated with" in n for n in agreed.notes)
    assert any(
        "estimated with the sampling weights `w`, but these estimates are unweighted" in n
        for n in unweighted.notes
    )
    check = check_propensities(renamed, context_columns=["x0", "x1"], weight_column="w")
    assert check.verdict == "consistent"
    with pytest.raises(SchemaError, match="weight_column='v' is not a column"):
        estimate_propensities(renamed, context_columns=["x0", "x1"], weight_column="v")


def test_equal_sampling_weights_give_no_note_on_a_scan(tmp_path):
    """All-equal weights fit as none; the record keeps their column, so a scan of the written
    logs (which reads no values) finds the fit's weights its own and adds no note (a review
    found it advising a weighted fit that is the same fit)."""
    import pyarrow.parquet as pq

    import ope

    table, _ = _thinned_logs(n=3_000)
    equal = table.set_column(5, "weight", pa.array(np.full(table.num_rows, 2.0)))
    logs = estimate_propensities(equal.drop_columns(["propensity"]), context_columns=["x0", "x1"])
    assert propensity_info(logs)["propensity_weight_column"] == "weight"
    path = tmp_path / "equal.parquet"
    pq.write_table(logs.table, path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for source in (logs, ope.scan_logs(path)):
            notes = ope.evaluate(source, estimators=("ips",)).notes
            assert not any("sampling weights `weight`" in n and "estimated" in n for n in notes)
