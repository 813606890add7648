"""Reward models see what users have: action features joined on the action,
the columns a model used in the result and the CLI, and default context columns that leave
outcome-like columns out."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp
from sklearn.linear_model import Ridge

import ope
from ope.cli import EXIT_OK, main
from ope.context import MANY_DEFAULT_CONTEXT_COLUMNS, context_column_choice, default_context_columns
from ope.exceptions import SchemaError
from ope.logs import BanditLogs, ValidationReport
from ope.reward_models import RewardModel

# these tests are about the reward model's inputs; small-sample interval warnings are noise here
pytestmark = pytest.mark.filterwarnings("ignore::ope.exceptions.SmallSampleWarning")

K, TOP = 100, 5


def _items(seed: int = 7) -> pd.DataFrame:
    f = np.random.default_rng(seed).normal(size=(K, 2))
    return pd.DataFrame(
        {
            "action": np.arange(K),
            "f0": f[:, 0],
            "f1": f[:, 1],
            "name": [f"item{a}" for a in range(K)],
        }
    )  # a string column: left out


def _world(n: int, seed: int, items: pd.DataFrame):
    """Uniform logging over K items; r = 0.5 + 0.3 f0 - 0.2 f1 + 0.5 x f0 + N(0, 0.1^2).

    The candidate plays the TOP items of highest 0.3 f0 - 0.2 f1 uniformly, whatever x, so with
    E[x] = 0 its exact value is the mean of 0.5 + 0.3 f0 - 0.2 f1 over those items.
    """
    rng = np.random.default_rng(seed)
    f0, f1 = items["f0"].to_numpy(), items["f1"].to_numpy()
    x = rng.normal(size=n)
    a = rng.integers(0, K, size=n)
    r = 0.5 + 0.3 * f0[a] - 0.2 * f1[a] + 0.5 * x * f0[a] + 0.1 * rng.normal(size=n)
    score = 0.3 * f0 - 0.2 * f1
    top = np.argsort(-score)[:TOP]
    truth = float(np.mean(0.5 + score[top]))
    logs = pd.DataFrame(
        {
            "event_id": np.arange(n),
            "action": a,
            "propensity": np.full(n, 1 / K),
            "reward": r,
            "x": x,
        }
    )
    table = pd.DataFrame(
        {
            "event_id": np.repeat(np.arange(n), TOP),
            "policy": "top",
            "action": np.tile(top, n),
            "probability": 1.0 / TOP,
        }
    )
    return logs, table, truth


def test_action_features_lower_dr_rmse_and_stay_unbiased():
    # 8 rows per item: a model per item is noisy, one shared through the item features is not
    items = _items()
    errs_plain, errs_feat = [], []
    for rep in range(40):  # loop over replications, each a whole evaluation (~0.05 s)
        logs, table, truth = _world(800, rep, items)
        plain = ope.evaluate(logs, table, estimators=("dr",), rng=rep)
        feat = ope.evaluate(logs, table, estimators=("dr",), rng=rep, action_features=items)
        errs_plain.append(plain["top", "dr"].value - truth)
        errs_feat.append(feat["top", "dr"].value - truth)
    errs_plain, errs_feat = np.array(errs_plain), np.array(errs_feat)
    rmse_plain = float(np.sqrt(np.mean(errs_plain**2)))
    rmse_feat = float(np.sqrt(np.mean(errs_feat**2)))
    assert rmse_feat < 0.7 * rmse_plain, (rmse_feat, rmse_plain)  # measured 0.032 vs 0.067
    # unbiased: the mean error is within 3 standard errors of a mean of 40 replications
    assert abs(errs_feat.mean()) < 3 * errs_feat.std(ddof=1) / np.sqrt(errs_feat.size)
    assert feat.model_columns == {"context": ["x"], "action_features": ["f0", "f1"]}
    assert plain.model_columns == {"context": ["x"], "action_features": []}


def test_importer_action_features_are_used_by_default_and_argument_wins():
    items = _items()
    df, table, _ = _world(400, 0, items)
    logs = ope.read_logs(df)
    logs.action_features = pa.Table.from_pandas(items[["action", "f0"]], preserve_index=False)
    ev = ope.evaluate(logs, table, estimators=("dm",), rng=0)
    assert ev.model_columns == {"context": ["x"], "action_features": ["f0"]}
    ev2 = ope.evaluate(logs, table, estimators=("dm",), rng=0, action_features=items)
    assert ev2.model_columns["action_features"] == ["f0", "f1"]
    assert ev2["top", "dm"].value != ev["top", "dm"].value


def test_action_features_alone_without_context():
    items = _items()
    df, table, truth = _world(3000, 1, items)
    ev = ope.evaluate(df.drop(columns="x"), table, estimators=("dm",), rng=0, action_features=items)
    assert ev.model_columns == {"context": [], "action_features": ["f0", "f1"]}
    assert abs(ev["top", "dm"].value - truth) < 0.1
    with pytest.raises(SchemaError, match="context features"):
        ope.evaluate(df.drop(columns="x"), table, estimators=("dm",), rng=0)


def test_action_features_must_cover_every_action():
    items = _items()
    df, table, _ = _world(400, 0, items)
    with pytest.raises(SchemaError, match="no row for"):
        ope.evaluate(df, table, estimators=("dr",), action_features=items.iloc[1:])
    with pytest.raises(SchemaError, match="one row per action"):
        ope.evaluate(df, table, estimators=("dr",), action_features=pd.concat([items, items]))
    with pytest.raises(SchemaError, match="no `action` column"):
        ope.evaluate(df, table, estimators=("dr",), action_features=items.drop(columns="action"))


def test_action_intercepts_separate_actions_with_equal_features():
    # actions 0 and 1 share their feature; only the intercept per action can tell them apart
    a = np.tile([0, 1, 2], 200)
    r = np.array([1.0, 0.0, 0.5])[a]
    feats = np.array([[1.0], [1.0], [0.0]])
    x = np.zeros((a.size, 0))
    shared = RewardModel(rng=0).fit(x, a, r, action_features=feats)
    own = RewardModel(rng=0, action_intercepts=True).fit(x, a, r, action_features=feats)
    q_shared = shared.predict(np.zeros((3, 0)), np.arange(3))
    q_own = own.predict(np.zeros((3, 0)), np.arange(3))
    assert q_shared[0] == pytest.approx(q_shared[1])
    np.testing.assert_allclose(q_own, [1.0, 0.0, 0.5], atol=0.02)
    assert own.n_design_columns_ == 0 + 1 + 0 + 3
    sparse = RewardModel(rng=0, action_intercepts=True, sparse=True).fit(
        x, a, r, action_features=feats
    )
    np.testing.assert_allclose(sparse.predict_logged(), own.predict_logged(), atol=1e-10)


def _report(n: int) -> ValidationReport:
    return ValidationReport("<Table>", n, n)


def test_outcome_like_columns_are_not_default_context():
    cols = {
        "action": [0, 1],
        "propensity": [0.5, 0.5],
        "reward": [1.0, 0.0],
        "x0": [0.1, 0.2],
        "Age": [30, 40],
    }
    for name in (
        "cost",
        "latency_ms",
        "tokens",
        "click",
        "conversion",
        "revenue",
        "Revenue",
        "reward_raw",
        "outcome_7d",
        "user_id",
        "slate_id",
        "timestamp",
        "timestamp_ms",
        "event_time",
        "created_at",
        "user-item_affinity_3",
        "weight",
    ):
        cols[name] = [1.0, 2.0]
    cols["target__p"] = cols["propensity__ranker"] = [0.0, 1.0]
    cols["flag"] = [True, False]
    cols = {k: v * 5 for k, v in cols.items()}  # 10 rows: enough for 5 cross-fitting folds
    cols["event_id"] = list(range(10))
    logs = BanditLogs(pa.table(cols), _report(10))
    choice = context_column_choice(logs)
    assert choice.columns == ["x0", "Age"] == default_context_columns(logs)
    assert "revenue" in choice.excluded and "user-item_affinity_3" in choice.excluded
    assert "target__p" not in choice.excluded and choice.notes == ()
    # named explicitly, an excluded column is used
    ev = ope.evaluate(
        logs.table.to_pandas(),
        pd.DataFrame({"event_id": range(10), "policy": "p", "action": 1, "probability": 1.0}),
        estimators=("dm",),
        context_columns=["x0", "user_id"],
        rng=0,
    )
    assert ev.model_columns["context"] == ["x0", "user_id"]


def test_many_default_columns_get_a_note():
    n, d = 60, MANY_DEFAULT_CONTEXT_COLUMNS + 3
    rng = np.random.default_rng(0)
    df = pd.DataFrame(rng.normal(size=(n, d)), columns=[f"e{j}" for j in range(d)])
    df = df.assign(
        action=rng.integers(0, 2, n),
        propensity=0.5,
        reward=rng.random(n),
        target__one=lambda t: (t["action"] == 1).astype(float),
        target_dist__one=[[0.0, 1.0]] * n,
        candidates=[[0, 1]] * n,
    )
    ev = ope.evaluate(df, estimators=("dr",), rng=0)
    (note,) = [t for t in ev.notes if "context columns by default" in t]
    assert note.startswith(f"the reward model took {d} context columns by default")
    assert "e0, e1" in note and "(3 more)" in note and "context_columns=[...]" in note
    assert len(ev.model_columns["context"]) == d
    few = ope.evaluate(df, estimators=("dr",), rng=0, context_columns=["e0"])
    assert not [t for t in few.notes if "by default" in t]
    few_default = ope.evaluate(
        df.drop(columns=[f"e{j}" for j in range(4)]), estimators=("dr",), rng=0
    )
    assert not [t for t in few_default.notes if "by default" in t]


@pytest.mark.filterwarnings("ignore::ope.exceptions.SmallSampleWarning")
def test_model_columns_in_to_dict_summary_and_cli_json(tmp_path, capsys):
    items = _items()
    df, table, _ = _world(300, 0, items)
    df = df.assign(cost=1.0, session_id=7)
    ev = ope.evaluate(df, table, estimators=("ips", "dr"), rng=0, action_features=items)
    d = ev.to_dict()
    assert d["model_columns"] == {"context": ["x"], "action_features": ["f0", "f1"]}
    json.dumps(d)
    assert "reward model context columns" in ev._repr_html_()
    assert ope.evaluate(df, table, estimators=("ips",)).to_dict()["model_columns"] is None

    path = tmp_path / "logs.parquet"
    pol = tmp_path / "policy.parquet"
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), path)
    pq.write_table(pa.Table.from_pandas(table, preserve_index=False), pol)
    assert (
        main(["evaluate", str(path), "--policies", str(pol), "--estimator", "dr", "--json"])
        == EXIT_OK
    )
    doc = json.loads(capsys.readouterr().out)
    assert doc["model_columns"] == {"context": ["x"], "action_features": []}
    assert main(["evaluate", str(path), "--policies", str(pol), "--estimator", "dr"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "reward model columns: context x; action features none" in out


def _obd_folder(folder, n=20):
    """An Open-Bandit-format campaign folder: n rows over 3 items, 2 affinity columns."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    lines = [
        ",timestamp,item_id,position,click,propensity_score,user_feature_0,"
        "user-item_affinity_0,user-item_affinity_1"
    ]
    lines += [
        f"{i},2019-11-24 00:00:{i:02d}+00:00,{i % 3},{1 + i % 3},{int(rng.random() < 0.4)},"
        f"0.3,h{i % 2},{rng.random():.3f},{rng.random():.3f}"
        for i in range(n)
    ]
    (folder / "all.csv").write_text("\n".join(lines) + "\n")
    (folder / "item_context.csv").write_text(
        ",item_id,item_feature_0,item_feature_1\n0,0,-0.5,f1a\n1,1,0.1,f1b\n2,2,0.7,f1c\n"
    )
    return folder


def test_obd_import_feeds_item_features_and_not_affinity(tmp_path):
    folder = _obd_folder(tmp_path / "random" / "all")
    policy = pd.DataFrame(
        {"event_id": np.arange(20), "policy": "item2", "action": 2, "probability": 1.0}
    )
    logs = ope.read_obd(folder, context="user+affinity")
    ev = ope.evaluate(logs, policy, estimators=("dm",), rng=0)
    # the affinity columns were asked for at import; the user feature and position are
    # one-hot in `context`, the item categories one-hot in the item table
    items = ["item_feature_0", "item_feature_1=f1a", "item_feature_1=f1b", "item_feature_1=f1c"]
    assert ev.model_columns == {
        "context": ["context", "user-item_affinity_0", "user-item_affinity_1"],
        "action_features": items,
    }
    assert not any("not numeric" in t for t in ev.notes)
    plain = ope.read_obd(folder)  # default: user features and position, never the affinities
    ev = ope.evaluate(plain, policy, estimators=("dm",), rng=0)
    assert ev.model_columns == {"context": ["context"], "action_features": items}
    # a table with the affinity columns but no importer metadata: not taken by default
    assert (
        context_column_choice(ope.read_logs(logs.table.replace_schema_metadata(None))).columns == []
    )


class _DesignRidge(Ridge):
    """Ridge predicted on design rows (not by the coefficient gather): the reference."""

    def predict(self, X):  # noqa: N803 - scikit-learn's argument name
        return super().predict(X)


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"action_intercepts": True},
        {"interactions": False},
        {"action_intercepts": True, "sparse": False},
    ],
    ids=["features", "intercepts", "additive", "dense-intercepts"],
)
def test_action_feature_predictions_by_gather_equal_the_design_predictions(settings):
    rng = np.random.default_rng(50)
    n, k, d, da = 500, 9, 2, 3
    x = rng.normal(size=(n, d))
    e = rng.normal(size=(k, da))
    a = rng.integers(0, k, size=n)
    r = e[a] @ np.array([0.3, -0.2, 0.1]) + x[:, 0] * e[a, 0] + 0.1 * a + rng.normal(size=n)
    gathered = RewardModel(Ridge(alpha=0.5), n_folds=3, rng=4, **settings).fit(
        x, a, r, action_features=e
    )
    designed = RewardModel(_DesignRidge(alpha=0.5), n_folds=3, rng=4, **settings).fit(
        x, a, r, action_features=e
    )
    cols = np.argsort(rng.random((n, k)), axis=1)[:, :4]
    cols.sort(axis=1)
    probs = rng.random((n, 4))
    probs /= probs.sum(axis=1, keepdims=True)
    dist = sp.csr_array((probs.ravel(), cols.ravel(), np.arange(n + 1) * 4), shape=(n, k))
    np.testing.assert_allclose(
        gathered.predict_policy(dist), designed.predict_policy(dist), rtol=1e-10, atol=1e-10
    )
    np.testing.assert_allclose(
        gathered.predict(x[:20], a[:20]), designed.predict(x[:20], a[:20]), rtol=1e-10, atol=1e-10
    )


@pytest.mark.parametrize(
    ("entry", "column"),
    [
        (entry, column)
        for entry in ("learn", "estimate_propensities", "check_propensities", "dm")
        for column in ("action", "propensity", "reward", "target__b")
        # the logs given to estimate_propensities hold no propensity column
        if (entry, column) != ("estimate_propensities", "propensity")
    ],
)
def test_the_logged_decision_is_refused_as_a_context_column(entry, column):
    # a model fed the logged action (or its probability, its outcome, a candidate's probability
    # of it) reads the answer: a learned policy picking the logged action was approved by the
    # gate at a value above the reward range, a propensity model fitted the logger perfectly
    g = np.random.default_rng(0)
    n = 300
    a = g.integers(0, 3, n)
    df = pd.DataFrame(
        {
            "action": a,
            "propensity": np.full(n, 1 / 3),
            "x0": g.normal(size=n),
            "reward": g.binomial(1, 0.3 + 0.2 * (a == 1)).astype(float),
            "target__b": np.full(n, 0.5),
        }
    )
    logs = ope.read_logs(df)
    calls = {
        "learn": lambda: ope.learn_from_logs(logs, context_columns=["x0", column], rng=0),
        "estimate_propensities": lambda: ope.estimate_propensities(
            df.drop(columns="propensity"), context_columns=[column], rng=0
        ),
        "check_propensities": lambda: ope.check_propensities(logs, context_columns=[column], rng=0),
        "dm": lambda: ope.evaluate(
            logs,
            {"u": ope.policies.UniformPolicy(actions=[0, 1, 2])},
            estimators=("dm",),
            context_columns=[column],
        ),
    }
    with pytest.raises(SchemaError, match=rf"\['{column}'\].*logged decision"):
        calls[entry]()
