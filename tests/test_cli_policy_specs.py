"""``--policy NAME=KIND[:ARGS]``: candidates named on the command line, end to end.

Each kind is run through the real CLI (``ope.cli.main`` with ``--json``) and its estimate is
compared with the same candidate computed independently in Python (a ``target__`` column
built by hand, or the policy object the kind is documented to build), to 1e-12. Malformed and
hostile specs exit 2 with a message naming ``--policy``; bad files and misaligned arrays exit
65 with the spec in the message.
"""

from __future__ import annotations

import contextlib
import io
import json
import pickle
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ope import evaluate, read_logs
from ope.cli import main
from ope.policies import (
    ActionTablePolicy,
    ArrayPolicy,
    ClassifierPolicy,
    DeterministicPolicy,
    EpsilonGreedyPolicy,
    SoftmaxPolicy,
    UniformPolicy,
    parse_policy_spec,
)

TOL = 1e-12
N, K = 240, 4


def _run(*argv: str) -> tuple[int, dict]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*argv, "--json", "--quiet"])
    text = out.getvalue()
    document = json.loads(text)  # exactly one JSON document (extra data would fail)
    assert document["exit_code"] == code
    return code, document


def _values(document: dict) -> dict[tuple[str, str], float]:
    return {(r["policy"], r["estimator"]): r["value"] for r in document["estimates"]}


def _python(logs, policies, estimators=("ips", "snips")) -> dict[tuple[str, str], float]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ev = evaluate(logs, policies, estimators=list(estimators), rng=0)  # the CLI's --seed 0
    return {k: e.value for k, e in ev.estimates.items()}


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """Logs with 4 actions, shuffled candidate lists, a score list column, a greedy-action
    column and two context features; the logger is uniform over the candidates."""
    rng = np.random.default_rng(3)
    cand = np.array([rng.permutation(K) for _ in range(N)])
    pick = rng.integers(0, K, N)
    action = cand[np.arange(N), pick]
    x = rng.normal(size=(N, 2))
    scores = rng.normal(size=(N, K))
    t = pa.table(
        {
            "event_id": np.arange(N),
            "action": action,
            "propensity": np.full(N, 1.0 / K),
            "reward": (rng.random(N) < 0.2 + 0.15 * action).astype(float),
            "x0": x[:, 0],
            "x1": x[:, 1],
            "candidates": pa.array(cand.tolist(), type=pa.list_(pa.int64())),
            "logging_distribution": pa.array(np.full((N, K), 1.0 / K).tolist()),
            "scores": pa.array(scores.tolist()),
            "greedy": rng.integers(0, K, N),
        }
    )
    path = tmp_path_factory.mktemp("small") / "logs.parquet"
    pq.write_table(t, path)
    return path, read_logs(str(path))


def _obd(folder, rows):
    header = (
        ",timestamp,item_id,position,click,propensity_score,"
        "user_feature_0,user_feature_1,user_feature_2,user_feature_3"
    )
    lines = [header] + [
        f"{i},2019-11-24 00:{i // 60:02d}:{i % 60:02d}+00:00,{it},{pos},{c},{p},a,b,c,d"
        for i, (it, pos, c, p) in enumerate(rows)
    ]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "all.csv").write_text("\n".join(lines) + "\n")
    return folder


#: A Bernoulli-TS-like candidate: item i at (0-based) position k with probability PI[i, k];
#: each position's column sums to 1 over the 3 items.
PI = np.array([[0.5, 0.3, 0.2], [0.2, 0.5, 0.3], [0.3, 0.2, 0.5]])


@pytest.fixture(scope="module")
def obd(tmp_path_factory):
    """An OBD campaign imported with `ope import obd`, and the BTS table beside it."""
    base = tmp_path_factory.mktemp("obd")
    rng = np.random.default_rng(5)
    rows = [
        (
            int(rng.integers(3)),
            int(rng.integers(1, 4)),
            int(rng.random() < 0.3),
            float(rng.choice([0.2, 0.25, 0.4, 0.5])),
        )
        for _ in range(60)
    ]
    folder = _obd(base / "bts" / "all", rows)
    out = base / "obd.parquet"
    code, _ = _run("import", "obd", str(folder), "--out", str(out))
    assert code == 0
    table = base / "bts.csv"
    table.write_text(
        "action,position,probability\n"
        + "".join(f"{i},{k},{float(PI[i, k])!r}\n" for i in range(3) for k in range(3))
    )
    return out, table, read_logs(str(out))


# ---------------------------------------------------------------------------------------------
# the kinds, end to end
# ---------------------------------------------------------------------------------------------
def test_obd_bernoulli_ts_table_equals_a_hand_built_target_column(obd):
    out, table, logs = obd
    code, doc = _run(
        "evaluate", str(out), "--policy", f"bts=table:{table}", "--estimator", "ips", "snips"
    )
    assert code == 0, doc.get("error")
    a, k = logs.column("action"), logs.column("position")
    hand = read_logs(logs.table.append_column("target__bts", pa.array(PI[a, k])))
    expected = _python(hand, ["bts"])
    got = _values(doc)
    assert set(got) == {("bts", "ips"), ("bts", "snips")}
    for key, value in expected.items():
        assert abs(got[key] - value) < TOL


def test_obd_npy_with_positions_equals_a_hand_built_target_column(obd, tmp_path):
    out, _, logs = obd
    rng = np.random.default_rng(11)
    dist = rng.dirichlet(np.ones(3), size=(logs.n, 3)).transpose(0, 2, 1)  # (n, K, P)
    path = tmp_path / "dist.npy"
    np.save(path, dist.astype(np.float64))
    code, doc = _run("evaluate", str(out), "--policy", f"d=npy:{path}", "--estimator", "ips")
    assert code == 0, doc.get("error")
    a, k = logs.column("action"), logs.column("position")
    target = dist[np.arange(logs.n), a, k]
    hand = read_logs(logs.table.append_column("target__d", pa.array(target)))
    assert abs(_values(doc)[("d", "ips")] - _python(hand, ["d"], ["ips"])[("d", "ips")]) < TOL
    # the distribution (for dr) is each row's at its logged position
    row = ArrayPolicy(path).distribution(logs).matrix.toarray()
    assert np.allclose(row, dist[np.arange(logs.n), :, k], rtol=0, atol=TOL)


def test_obd_uniform_and_logging(obd):
    out, _, logs = obd
    code, doc = _run(
        "evaluate", str(out), "--policy", "u=uniform", "lg=logging", "--estimator", "ips"
    )
    assert code == 0, doc.get("error")
    got = _values(doc)
    # no candidates: uniform over the 3 logged items; logging: weights 1, the mean reward
    assert (
        abs(got[("u", "ips")] - np.mean(logs.column("reward") / 3 / logs.column("propensity")))
        < TOL
    )
    assert abs(got[("lg", "ips")] - logs.column("reward").mean()) < TOL


def test_small_uniform_npy_epsilon_greedy_softmax_equal_the_python_objects(small, tmp_path):
    path, logs = small
    rng = np.random.default_rng(2)
    dist = rng.dirichlet(np.ones(K), size=N)
    npy = tmp_path / "d.npy"
    np.save(npy, dist)
    code, doc = _run(
        "evaluate",
        str(path),
        "--policy",
        "u=uniform",
        f"d=npy:{npy}",
        "eg=epsilon-greedy:scores:0.1",
        "ea=epsilon-greedy:greedy:0.3",
        "sm=softmax:scores:0.5",
        "--estimator",
        "ips",
        "snips",
        "dr",
    )
    assert code == 0, doc.get("error")
    got = _values(doc)
    from ope.policies import ChosenActionPolicy

    expected = _python(
        logs,
        {
            "u": UniformPolicy(),
            "eg": EpsilonGreedyPolicy(DeterministicPolicy("scores"), 0.1),
            "ea": EpsilonGreedyPolicy(ChosenActionPolicy("greedy"), 0.3),
            "sm": SoftmaxPolicy("scores", 0.5),
            "d": ArrayPolicy(npy),
        },
        ["ips", "snips", "dr"],
    )
    hand = read_logs(
        logs.table.append_column("target__d", pa.array(dist[np.arange(N), logs.column("action")]))
    )
    expected.update(_python(hand, ["d"], ["ips", "snips"]))
    for key, value in expected.items():
        assert abs(got[key] - value) < TOL, key
    # epsilon-greedy on an action column, by hand: (1 - eps) 1[a = g] + eps / |C|
    a, g = logs.column("action"), logs.column("greedy")
    target = 0.7 * (a == g) + 0.3 / K
    assert abs(got[("ea", "ips")] - np.mean(logs.column("reward") * target * K)) < TOL


def test_names_and_specs_coexist(small):
    path, logs = small
    hand = logs.table.append_column("target__old", pa.array(np.full(N, 1.0 / K)))
    p = path.parent / "with_old.parquet"
    pq.write_table(hand, p)
    code, doc = _run("evaluate", str(p), "--policy", "old", "u=uniform", "--estimator", "ips")
    assert code == 0, doc.get("error")
    got = _values(doc)
    assert list(dict.fromkeys(r["policy"] for r in doc["estimates"])) == ["old", "u"]
    assert abs(got[("old", "ips")] - got[("u", "ips")]) < TOL  # both uniform over 4
    # a NAME alone still selects a target__ column, as before
    code, doc = _run("evaluate", str(p), "--policy", "old", "--estimator", "ips")
    assert code == 0 and set(_values(doc)) == {("old", "ips")}


def test_diagnose_and_report_take_specs(small, tmp_path):
    path, _ = small
    code, doc = _run("diagnose", str(path), "--policy", "sm=softmax:scores")
    assert code == 0, doc.get("error")
    assert [r["policy"] for r in doc["diagnostics"]["policies"]] == ["sm"]
    code, doc = _run(
        "report", str(path), "--policy", "sm=softmax:scores", "--out", str(tmp_path / "r.html")
    )
    assert code == 0, doc.get("error")
    assert (tmp_path / "r.html").read_text().count("sm") > 0


# ---------------------------------------------------------------------------------------------
# malformed and hostile specs
# ---------------------------------------------------------------------------------------------
MALFORMED = [
    ("", "is empty"),
    ("   ", "is empty"),
    ("=uniform", "the name before = is empty"),
    ("a=", "unknown kind ''"),
    ("a=foo:1", "unknown kind 'foo'"),
    ("a=unifrom", "did you mean uniform"),
    ("a=uniform:3", "uniform takes no arguments"),
    ("a=epsilon-greedy:scores", "epsilon-greedy needs a column and EPS"),
    ("a=epsilon-greedy:scores:nan", "EPS must be a number, got NaN"),
    ("a=epsilon-greedy:scores:1.5", "EPS must be in [0, 1]"),
    ("a=epsilon-greedy:scores:x", "EPS must be a number, got 'x'"),
    ("a=softmax:", "softmax needs a score column"),
    ("a=softmax:scores:0", "TEMPERATURE must be a finite number > 0"),
    ("a=softmax:scores:inf", "TEMPERATURE must be a finite number > 0"),
    ("a=npy:", "npy needs a file"),
    ("a=npy:d.csv", "npy reads .npy files"),
    ("a=table:t.txt", "table reads .csv or .csv.gz or .parquet or .pq files"),
    ("a=classifier:m.onnx", "classifier reads .skops files"),
    ("a=classifier:m.skops:x,,y", "comma-separated list"),
    ("a\x01=uniform", "control characters"),
    ("a\x1b[31m", "not printable"),
    ("a b=uniform", "must be 1 to 100 letters"),
    ("x" * 101 + "=uniform", "must be 1 to 100 letters"),
    ("m=classifier:model.pkl", "ope never loads pickles"),
    ("m=npy:arr.joblib", "ope never loads pickles"),
]


@pytest.mark.parametrize("spec, message", MALFORMED)
def test_malformed_spec_is_a_usage_error_naming_the_flag(small, spec, message):
    path, _ = small
    code, doc = _run("evaluate", str(path), "--policy", spec)
    assert code == 2
    assert doc["error"]["flag"] == "--policy"
    assert doc["error"]["message"].startswith("argument --policy: ")
    assert message in doc["error"]["message"]


def test_the_same_name_twice_is_a_usage_error(small):
    path, _ = small
    code, doc = _run("evaluate", str(path), "--policy", "u=uniform", "u=logging")
    assert code == 2 and "the name 'u' is given twice" in doc["error"]["message"]


@pytest.mark.parametrize(
    "shape, message",
    [
        ((N,), "must be (n, K)"),
        ((N, K, 2, 2), "must be (n, K)"),
        ((N + 1, K), f"the array has {N + 1:,} rows but the logs have {N:,}"),
        ((N, 2), "the logged action is outside them"),
        ((N, K, 3), "needs the logs' `position` column"),
    ],
)
def test_wrong_shaped_or_misaligned_npy_is_a_data_error_naming_the_spec(
    small, tmp_path, shape, message
):
    path, _ = small
    arr = np.zeros(shape)
    if len(shape) in (2, 3):
        arr[:, 0] = 1.0  # all mass on action 0 (at every position)
    npy = tmp_path / "bad.npy"
    np.save(npy, arr)
    code, doc = _run("evaluate", str(path), "--policy", f"d=npy:{npy}", "--estimator", "ips")
    assert code == 65
    assert doc["error"]["message"].startswith(f"--policy d=npy:{npy}: ")
    assert message in doc["error"]["message"]


def test_npy_rows_that_do_not_sum_to_one_name_the_rows(small, tmp_path):
    path, _ = small
    arr = np.full((N, K), 0.25)
    arr[7] = [0.5, 0.5, 0.5, 0.0]
    arr[9, 0] = np.nan
    npy = tmp_path / "sums.npy"
    np.save(npy, arr)
    code, doc = _run("evaluate", str(path), "--policy", f"d=npy:{npy}")
    assert code == 65 and "1 rows hold other values (first at rows 9)" in doc["error"]["message"]
    arr[9, 0] = 0.25
    np.save(npy, arr)
    code, doc = _run("evaluate", str(path), "--policy", f"d=npy:{npy}")
    assert code == 65 and "1 rows do not (first at rows 7, sums 1.5)" in doc["error"]["message"]


def test_a_pickle_is_refused_whatever_its_name(small, tmp_path):
    path, _ = small
    fake = tmp_path / "model.skops"
    fake.write_bytes(pickle.dumps({"not": "a model"}, protocol=4))
    code, doc = _run("evaluate", str(path), "--policy", f"m=classifier:{fake}:x0,x1")
    assert code == 65
    assert "ope never loads pickles" in doc["error"]["message"]
    npy = tmp_path / "arr.npy"
    npy.write_bytes(pickle.dumps(np.eye(2), protocol=5))
    code, doc = _run("evaluate", str(path), "--policy", f"d=npy:{npy}")
    assert code == 65 and "ope never loads pickles" in doc["error"]["message"]


@pytest.mark.parametrize(
    "body, message",
    [
        ("action,probability\n0,0.5\n1,0.6\n", "must sum to 1"),
        (
            "action,position,probability\n0,0,1.0\n0,0,0.0\n",
            "appears more than once at the same position",
        ),
        ("action,prob\n0,1.0\n", "missing ['probability']"),
        ("event_id,policy,action,probability\n0,p,0,1.0\n", "long-format policy table"),
        ("action,probability\n0,-0.5\n1,1.5\n", "must be finite and in [0, 1]"),
        ("action,position,probability\n0,7,1.0\n", "no probabilities for the logged position"),
    ],
)
def test_bad_per_action_tables(obd, tmp_path, body, message):
    out, _, _ = obd
    table = tmp_path / "t.csv"
    table.write_text(body)
    code, doc = _run("evaluate", str(out), "--policy", f"t=table:{table}", "--estimator", "ips")
    assert code == 65, doc
    assert doc["error"]["message"].startswith(f"--policy t=table:{table}: ")
    assert message in doc["error"]["message"]


def test_missing_columns_and_files_name_the_spec(small, tmp_path):
    path, _ = small
    code, doc = _run("evaluate", str(path), "--policy", "s=softmax:nope")
    assert (
        code == 65
        and "--policy s=softmax:nope: the logs have no column 'nope'" in doc["error"]["message"]
    )
    code, doc = _run("evaluate", str(path), "--policy", "s=softmax:x0")
    assert code == 65 and "softmax needs a list column of scores" in doc["error"]["message"]
    code, doc = _run("evaluate", str(path), "--policy", f"t=table:{tmp_path / 'none.csv'}")
    assert code == 65 and doc["error"]["message"].startswith("--policy t=table:")


def test_a_table_choosing_actions_that_were_not_offered_is_refused(small, tmp_path):
    """Rows offer actions 0..3: a table putting mass on action 7 would choose what no row
    offered (IPS would read its reward as 0); refused with the row and the action."""
    path, _ = small
    table = tmp_path / "outside.csv"
    table.write_text("action,probability\n0,0.5\n7,0.5\n")
    code, doc = _run("evaluate", str(path), "--policy", f"x=table:{table}", "--estimator", "ips")
    assert code == 65
    message = doc["error"]["message"]
    assert message.startswith(
        f"--policy x=table:{table}: the table gives probability to actions that were not offered"
    )
    assert "carry only 0.5 of the table's mass (first row 0: actions 7 are not among" in message
    table.write_text("action,probability\n0,0.25\n1,0.25\n2,0.25\n3,0.25\n")
    code, _ = _run("evaluate", str(path), "--policy", f"x=table:{table}", "--estimator", "ips")
    assert code == 0


def test_parse_examples():
    assert parse_policy_spec("x=softmax:s").number == 1.0
    assert parse_policy_spec("x=softmax:a:b").column == "a:b"  # no number last: all column
    assert parse_policy_spec("x=epsilon-greedy:a:b:0.5").column == "a:b"
    spec = parse_policy_spec("x=classifier:m.skops:a,b")
    assert (spec.path, spec.columns) == ("m.skops", ("a", "b"))
    assert parse_policy_spec("x=table:C:/t.csv").path == "C:/t.csv"


# ---------------------------------------------------------------------------------------------
# scikit-learn classifiers saved with skops (never pickle)
# ---------------------------------------------------------------------------------------------
def test_skops_classifier_equals_the_classifier_policy(small, tmp_path):
    sio = pytest.importorskip("skops.io")
    import pandas as pd
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression

    path, logs = small
    X = pd.DataFrame({"x0": logs.column("x0"), "x1": logs.column("x1")})
    named = LogisticRegression().fit(X, logs.column("action"))  # feature_names_in_ = x0, x1
    forest = RandomForestClassifier(n_estimators=5, random_state=0).fit(
        X.to_numpy(), logs.column("action")
    )  # no names; holds sklearn.tree._tree.Tree
    sio.dump(named, tmp_path / "named.skops")
    sio.dump(forest, tmp_path / "forest.skops")
    code, doc = _run(
        "evaluate",
        str(path),
        "--policy",
        f"lr=classifier:{tmp_path / 'named.skops'}",
        f"rf=classifier:{tmp_path / 'forest.skops'}:x0,x1",
        "--estimator",
        "ips",
        "snips",
        "dr",
    )
    assert code == 0, doc.get("error")
    expected = _python(
        logs,
        {"lr": ClassifierPolicy(named, ["x0", "x1"]), "rf": ClassifierPolicy(forest, ["x0", "x1"])},
        ["ips", "snips", "dr"],
    )
    got = _values(doc)
    for key, value in expected.items():
        assert abs(got[key] - value) < TOL, key
    # without names in the model and none in the spec: the message says how to give them
    code, doc = _run(
        "evaluate", str(path), "--policy", f"rf=classifier:{tmp_path / 'forest.skops'}"
    )
    assert code == 65
    assert "fitted without column names" in doc["error"]["message"]
    assert f"rf=classifier:{tmp_path / 'forest.skops'}:COLUMN,COLUMN" in doc["error"]["message"]


def test_skops_file_with_an_untrusted_type_is_refused_by_name(small, tmp_path):
    sio = pytest.importorskip("skops.io")
    import os

    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import FunctionTransformer

    path, logs = small
    X = np.column_stack([logs.column("x0"), logs.column("x1")])
    model = Pipeline([("f", FunctionTransformer(os.system)), ("lr", LogisticRegression())])
    model.steps[1][1].fit(X, logs.column("action"))
    sio.dump(model, tmp_path / "hostile.skops")
    code, doc = _run(
        "evaluate", str(path), "--policy", f"h=classifier:{tmp_path / 'hostile.skops'}:x0,x1"
    )
    assert code == 65
    assert (
        "holds types ope does not load: posix.system" in doc["error"]["message"]
        or "holds types ope does not load: nt.system" in doc["error"]["message"]
    )


def test_not_a_skops_file_is_a_data_error(small, tmp_path):
    pytest.importorskip("skops.io")
    path, _ = small
    junk = tmp_path / "junk.skops"
    junk.write_bytes(b"PK\x03\x04 not really a zip")
    code, doc = _run("evaluate", str(path), "--policy", f"j=classifier:{junk}:x0")
    assert code == 65 and "not a file that skops.io.dump wrote" in doc["error"]["message"]


# ---------------------------------------------------------------------------------------------
# messages that reach the command line name flags, not Python arguments
# ---------------------------------------------------------------------------------------------
PYTHON_SPEAK = (
    "policies=",
    "context_columns=",
    "mapping=",
    "with_distributions",
    "action_features=",
    "policy objects",
    "ope.read_logs(",
)


@pytest.fixture(scope="module")
def variants(small, tmp_path_factory):
    path, logs = small
    base = tmp_path_factory.mktemp("variants")
    t = logs.table
    out = {}
    out["bare"] = base / "bare.parquet"  # no target__ columns, no numeric context
    pq.write_table(t.select(["event_id", "action", "propensity", "reward"]), out["bare"])
    out["targets"] = base / "targets.parquet"  # a target__ column without its target_dist__
    pq.write_table(t.append_column("target__old", pa.array(np.full(N, 1.0 / K))), out["targets"])
    out["noid"] = base / "noid.parquet"
    pq.write_table(t.drop_columns(["event_id"]), out["noid"])
    out["table"] = base / "table.parquet"
    pq.write_table(
        pa.table(
            {
                "event_id": t["event_id"],
                "policy": ["p"] * N,
                "action": t["action"],
                "probability": [1.0] * N,
            }
        ),
        out["table"],
    )
    out["badtable"] = base / "badtable.parquet"
    pq.write_table(
        pa.table({"event_id": [0], "policy": ["p"], "act": [1], "probability": [1.0]}),
        out["badtable"],
    )
    out["wrongp"] = base / "wrongp.parquet"  # propensities twice too large: mean weight 1/2
    pq.write_table(
        t.drop_columns(["logging_distribution"]).set_column(
            2, "propensity", pa.array(np.full(N, 2.0 / K))
        ),
        out["wrongp"],
    )
    return out


@pytest.mark.parametrize(
    "case, argv, says",
    [
        (
            "no candidates",
            ("bare",),
            "pass --policy NAME=KIND:ARGS (e.g. u=uniform) or --policies FILE",
        ),
        (
            "dr without numeric context",
            ("bare", "--policy", "u=uniform", "--estimator", "dr"),
            "pass --context-columns COLUMN ..., action features (--format obd",
        ),
        (
            "dr without target_dist__",
            ("targets", "--policy", "old", "--estimator", "dr"),
            "the estimators asked for need each policy's full",
        ),
        (
            "mips without target_dist__ names mips",
            ("targets", "--policy", "old", "--estimator", "mips", "--cluster-column", "x0"),
            "mips needs each candidate's whole distribution",
        ),
        (
            "dr without target_dist__, the fix",
            ("targets", "--policy", "old", "--estimator", "dr"),
            "or give the candidates with --policies FILE or --policy NAME=KIND:ARGS",
        ),
        (
            "a table without event_id in the logs",
            ("noid", "--policies", "table"),
            "map yours with --mapping event_id=THEIRS",
        ),
        (
            "a table missing a column",
            ("targets", "--policies", "badtable"),
            "Rename the table's columns.",
        ),
    ],
)
def test_library_messages_reach_the_cli_as_flags(variants, case, argv, says):
    argv = [str(variants[a]) if a in variants else a for a in argv]
    code, doc = _run("evaluate", *argv)
    assert code == 65, case
    message = doc["error"]["message"]
    assert says in message, message
    assert not any(p in message for p in PYTHON_SPEAK), message


def test_overlap_warning_on_stderr_names_the_command(variants):
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(
            ["evaluate", str(variants["wrongp"]), "--policy", "u=uniform", "--quiet", "--json"]
        )  # with --json every warning goes to stderr
    assert code == 0
    text = err.getvalue()
    assert "Check overlap with `ope diagnose`." in text and "ope.diagnostics" not in text


# ---------------------------------------------------------------------------------------------
# ope action-table: a context-free logger's table, read off its own logs
# ---------------------------------------------------------------------------------------------
def _bts_rows(rng, n=90):
    """Rows of a 'bts' campaign whose logged propensity is PI[item, position]; every
    (item, position) pair appears."""
    pairs = [(i, k) for i in range(3) for k in range(3)]
    picks = pairs + [pairs[j] for j in rng.integers(0, 9, n - 9)]
    return [(i, k + 1, int(rng.random() < 0.3), float(PI[i, k])) for i, k in picks]


def test_action_table_from_bts_logs_then_evaluate_on_random_logs(obd, tmp_path):
    random_logs, _, logs = obd
    folder = _obd(tmp_path / "bts" / "all", _bts_rows(np.random.default_rng(8)))
    out = tmp_path / "bts_table.csv"
    code, doc = _run("action-table", str(folder), "--format", "obd", "--out", str(out))
    assert code == 0, doc.get("error")
    assert (doc["rows"], doc["actions"], doc["positions"]) == (9, 3, [0, 1, 2])
    written = ActionTablePolicy(out)
    assert written.actions.to_pylist() == [0, 1, 2] * 3
    assert written.positions.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert np.array_equal(written.probabilities, PI.T.ravel())
    code, doc = _run(
        "evaluate", str(random_logs), "--policy", f"bts=table:{out}", "--estimator", "ips"
    )
    assert code == 0, doc.get("error")
    a, k = logs.column("action"), logs.column("position")
    hand = read_logs(logs.table.append_column("target__bts", pa.array(PI[a, k])))
    assert abs(_values(doc)[("bts", "ips")] - _python(hand, ["bts"], ["ips"])[("bts", "ips")]) < TOL
    # the existing table is not overwritten without --force
    code, doc = _run("action-table", str(folder), "--format", "obd", "--out", str(out))
    assert code == 2 and doc["error"]["flag"] == "--out"


@pytest.mark.parametrize(
    "change, message",
    [
        (
            lambda rows: rows[:1] + [(rows[0][0], rows[0][1], 0, rows[0][3] / 2)] + rows[1:],
            "the logged propensity is not one number per action and position: it varies in 1 of 9",
        ),
        (
            lambda rows: [r for r in rows if (r[0], r[1]) != (2, 3)],
            "sum to 0.5 at positions 2, not 1",
        ),
    ],
)
def test_action_table_refuses_what_is_not_one_table(tmp_path, change, message):
    rows = change(_bts_rows(np.random.default_rng(9)))
    folder = _obd(tmp_path / "bts" / "all", rows)
    code, doc = _run(
        "action-table", str(folder), "--format", "obd", "--out", str(tmp_path / "t.csv")
    )
    assert code == 65
    assert message in doc["error"]["message"]
    assert not (tmp_path / "t.csv").exists()


def test_policy_names_select_from_a_policies_table(variants):
    table = pq.read_table(variants["table"])
    two = pa.concat_tables([table, table.set_column(1, "policy", pa.array(["q"] * N))])
    path = variants["table"].parent / "two.parquet"
    pq.write_table(two, path)
    code, doc = _run(
        "evaluate",
        str(variants["targets"]),
        "--policies",
        str(path),
        "--policy",
        "q",
        "--estimator",
        "ips",
    )
    assert code == 0 and set(_values(doc)) == {("q", "ips")}
    code, doc = _run(
        "evaluate",
        str(variants["targets"]),
        "--policies",
        str(path),
        "--policy",
        "q",
        "u=uniform",
        "--estimator",
        "ips",
    )
    assert code == 0 and set(_values(doc)) == {("q", "ips"), ("u", "ips")}
    code, doc = _run(
        "evaluate",
        str(variants["targets"]),
        "--policies",
        str(path),
        "--policy",
        "nope",
        "--estimator",
        "ips",
    )
    assert code == 65 and "unknown policies ['nope']" in doc["error"]["message"]


def test_logging_spec_with_dr_uses_the_logged_distribution(small):
    from ope.policies import LoggingPolicy

    path, logs = small
    code, doc = _run("evaluate", str(path), "--policy", "lg=logging", "--estimator", "ips", "dr")
    assert code == 0, doc.get("error")
    expected = _python(logs, {"lg": LoggingPolicy()}, ["ips", "dr"])
    for key, value in expected.items():
        assert abs(_values(doc)[key] - value) < TOL
    assert abs(_values(doc)[("lg", "ips")] - logs.column("reward").mean()) < TOL


def test_specs_are_refused_where_they_cannot_apply(small, tmp_path):
    path, _ = small
    code, doc = _run("evaluate", str(path), "--policy", "u=uniform", "--streaming", "on")
    assert code == 2 and doc["error"]["flag"] == "--streaming"
    assert "--policy NAME=KIND:ARGS (a candidate computed on every row)" in doc["error"]["message"]
    steps = tmp_path / "steps.parquet"
    pq.write_table(
        pa.table(
            {
                "episode_id": [0, 0],
                "step": [0, 1],
                "done": [False, True],
                "action": [0, 1],
                "propensity": [0.5, 0.5],
                "reward": [1.0, 0.0],
                "target__a": [0.5, 0.5],
            }
        ),
        steps,
    )
    code, doc = _run("evaluate", str(steps), "--policy", "u=uniform")
    assert code == 2 and doc["error"]["flag"] == "--policy"
    assert "builds a candidate for bandit logs only" in doc["error"]["message"]
