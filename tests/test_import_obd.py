"""Open Bandit Dataset importer: exact rows on a fixture in OBD's CSV layout, IPS/SNIPS of a
per-position candidate against a hand computation, the imported parquet file carrying what
DM/DR need (DR on it equals DR on the raw folder), and OBD's row rules with their rows."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pyarrow as pa
import pytest

from ope import evaluate, read_logs
from ope.cli import main
from ope.exceptions import (
    DataFileError,
    DroppedRowsWarning,
    ParameterError,
    SchemaError,
    ValidationError,
)
from ope.importers import read_obd
from ope.io import embedded_action_features

HEADER = (
    ",timestamp,item_id,position,click,propensity_score,"
    "user_feature_0,user_feature_1,user_feature_2,user_feature_3,"
    "user-item_affinity_0,user-item_affinity_1,user-item_affinity_2"
)
# index, timestamp, item, position (1-based), click, propensity (position-wise)
ROWS = [
    (0, "2019-11-24 00:00:03.5+00:00", 2, 1, 1, 0.3),
    (1, "2019-11-24 00:00:01+00:00", 0, 2, 0, 0.25),
    (2, "2019-11-24 00:00:01+00:00", 1, 3, 1, 0.5),
    (3, "2019-11-24 00:00:02+00:00", 1, 1, 0, 0.4),
    (4, "2019-11-24 00:00:00+00:00", 2, 2, 1, 0.2),
    (5, "2019-11-24 00:00:04+00:00", 0, 3, 1, 0.1),
]


def _write(folder, rows=ROWS, items=True):
    folder.mkdir(parents=True, exist_ok=True)
    lines = [HEADER] + [
        f"{i},{ts},{it},{pos},{c},{p},h{i}a,h{i}b,h{i}c,h{i}d,0.{i},1.{i},2.{i}"
        for i, ts, it, pos, c, p in rows
    ]
    (folder / "all.csv").write_text("\n".join(lines) + "\n")
    if items:
        (folder / "item_context.csv").write_text(
            ",item_id,item_feature_0,item_feature_1,item_feature_2,item_feature_3\n"
            "0,0,-0.5,f1a,f2a,f3a\n1,1,0.1,f1b,f2b,f3b\n2,2,0.7,f1c,f2c,f3c\n"
        )
    return folder


def test_a_timestamp_that_is_missing_or_no_date_is_rejected_and_the_rest_keep_their_order(
    tmp_path,
):
    """One cell that is no timestamp made the CSV parser read the column as text, which was
    then sorted as text; now that row (and one without a time) is obd_timestamp_invalid and the
    others keep the clean import's type and time order."""
    whole = [(i, ts.replace("03.5", "03"), *rest) for i, ts, *rest in ROWS]
    for name, base in (("fraction", ROWS), ("whole", whole)):  # ns, and s stored as us
        clean = read_obd(_write(tmp_path / name / "clean", rows=base))
        rows = [*base, (6, "yesterday", 1, 1, 0, 0.3), (7, "", 2, 2, 0, 0.3)]
        with pytest.raises(ValidationError, match=r"2 of 8 rows read"):
            read_obd(_write(tmp_path / name / "bad", rows=rows))
        with pytest.warns(DroppedRowsWarning):
            logs = read_obd(_write(tmp_path / name / "bad", rows=rows), on_invalid="drop")
        assert logs.report.rejected == {"obd_timestamp_invalid": 2}
        assert logs.report.examples["obd_timestamp_invalid"] == (6, 7)
        kind = clean.table.schema.field("timestamp").type
        assert logs.table.schema.field("timestamp").type == kind
        assert kind.unit == ("ns" if name == "fraction" else "us")
        assert logs.column("event_id").tolist() == clean.column("event_id").tolist()
        assert logs.table.column("timestamp").equals(clean.table.column("timestamp"))
    # the cells parsed one by one give the parser's values; a time without a zone among zoned
    # ones is no UTC time
    rows = [*ROWS, (6, "2019-11-24 00:00:00.5", 1, 1, 0, 0.3)]
    with pytest.warns(DroppedRowsWarning):
        logs = read_obd(_write(tmp_path / "naive", rows=rows), on_invalid="drop")
    assert logs.report.rejected == {"obd_timestamp_invalid": 1}


def test_columns_order_positions_and_side_table(tmp_path):
    folder = _write(tmp_path / "random" / "all")
    logs = read_obd(folder)
    # sorted by timestamp, ties (rows 1 and 2) in CSV order
    assert logs.column("event_id").tolist() == [4, 1, 2, 3, 0, 5]
    assert logs.column("action").tolist() == [2, 0, 1, 1, 2, 0]
    assert logs.column("position").tolist() == [1, 1, 2, 0, 0, 2]
    assert logs.column("reward").tolist() == [1.0, 0.0, 1.0, 0.0, 1.0, 1.0]
    assert logs.column("propensity").tolist() == [0.2, 0.25, 0.5, 0.4, 0.3, 0.1]
    users = [f"user_feature_{j}" for j in range(4)]
    assert logs.columns == [
        "event_id",
        "timestamp",
        "action",
        "position",
        "reward",
        "propensity",
        *users,
        "context",
    ]
    # user features are categorical; `context` is their one-hot, then the position's
    assert all(pa.types.is_dictionary(logs.table.schema.field(c).type) for c in users)
    assert logs.table.schema.field("context").type == pa.list_(pa.int8(), 4 * 6 + 3)
    meta = logs.table.schema.metadata
    labels = json.loads(meta[b"ope.context_labels"])["context"]
    assert labels[:6] == [f"user_feature_0=h{i}a" for i in range(6)]
    assert labels[-3:] == ["position=0", "position=1", "position=2"]
    first = np.array(logs.table.column("context")[0].as_py())  # event 4: h4a..h4d, position 1
    assert [labels[j] for j in np.flatnonzero(first)] == [
        "user_feature_0=h4a",
        "user_feature_1=h4b",
        "user_feature_2=h4c",
        "user_feature_3=h4d",
        "position=1",
    ]
    assert json.loads(meta[b"ope.context_columns"]) == ["context"]
    assert b"position-wise" in meta[b"ope.propensity"]
    af = logs.action_features
    assert af.column_names == [
        "action",
        "item_feature_0",
        *[f"item_feature_{j}=f{j}{c}" for j in (1, 2, 3) for c in "abc"],
    ]
    assert af.column("item_feature_0").to_pylist() == [-0.5, 0.1, 0.7]
    assert af.column("item_feature_2=f2b").to_pylist() == [0, 1, 0]
    # the item table travels in the schema metadata
    assert embedded_action_features(logs.table.schema).equals(af)
    # the CSV itself gives the same logs
    same = read_obd(folder / "all.csv")
    assert same.table.equals(logs.table)


def test_affinity_columns_only_on_request(tmp_path):
    folder = _write(tmp_path / "bts" / "men", items=False)
    logs = read_obd(folder, context="user+affinity")
    assert [c for c in logs.columns if c.startswith("user-item")] == [
        "user-item_affinity_0",
        "user-item_affinity_1",
        "user-item_affinity_2",
    ]
    assert logs.action_features is None
    assert "user_feature_0" not in read_obd(folder, context="none").columns
    with pytest.raises(ParameterError):
        read_obd(folder, context="all")


def test_bad_rows_are_rejected_with_csv_row_numbers(tmp_path):
    rows = ROWS + [
        (6, "2019-11-24 00:00:05+00:00", 1, 0, 1, 0.2),  # position 0: not 1-based
        (7, "2019-11-24 00:00:06+00:00", 1, 2, 1, 0.0),  # propensity 0
        (8, "2019-11-24 00:00:07+00:00", 1, 2, 1, 1.5),
    ]  # propensity > 1
    folder = _write(tmp_path / "random" / "women", rows)
    with pytest.raises(ValidationError) as info:
        read_obd(folder)
    assert "obd_position_out_of_range: 1 (rows 6)" in str(info.value)
    with pytest.warns(DroppedRowsWarning):
        logs = read_obd(folder, on_invalid="drop")
    assert logs.report.rejected == {"obd_position_out_of_range": 1, "propensity_out_of_range": 2}
    assert logs.report.examples["propensity_out_of_range"] == (7, 8)
    assert (logs.report.rows_read, logs.n) == (9, 6)


def test_ips_snips_of_a_per_position_candidate_equal_hand_computation(tmp_path):
    logs = read_obd(_write(tmp_path / "random" / "all"))
    # a candidate that puts item i at slot k with probability pi[i, k] (per-position marginals)
    pi = np.array([[0.5, 0.3, 0.2], [0.2, 0.5, 0.3], [0.3, 0.2, 0.5]])
    a, k = logs.column("action"), logs.column("position")
    target = pi[a, k]
    cand = read_logs(logs.table.append_column("target__cand", pa.array(target)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ev = evaluate(cand, estimators=("ips", "snips"), reward_range=(0.0, 1.0))
    # hand: rows sorted by time: (item, slot, click, p) =
    # (2,1,1,.2) (0,1,0,.25) (1,2,1,.5) (1,0,0,.4) (2,0,1,.3) (0,2,1,.1)
    w = np.array([0.2 / 0.2, 0.3 / 0.25, 0.3 / 0.5, 0.2 / 0.4, 0.3 / 0.3, 0.2 / 0.1])
    r = np.array([1, 0, 1, 0, 1, 1.0])
    ips = (1.0 + 0.6 + 1.0 + 2.0) / 6
    assert abs(ev.estimates[("cand", "ips")].value - ips) < 1e-12
    assert abs(ev.estimates[("cand", "snips")].value - (w * r).sum() / w.sum()) < 1e-12
    assert abs(ips - (w * r).mean()) < 1e-12


# --------------------------------------------------------------------------------------------
# the imported file carries what DM/DR need
# --------------------------------------------------------------------------------------------
N_ITEMS = 6


def _campaign(folder, n=300, seed=0):
    """An OBD campaign folder large enough for a cross-fitted reward model: hashed user
    features, a click rate that depends on the item and the position, item categories."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    users = np.stack([rng.integers(0, 3 + j, n) for j in range(4)], axis=1)
    item = rng.integers(0, N_ITEMS, n)
    pos = rng.integers(1, 4, n)
    click = (rng.random(n) < 0.1 + 0.05 * pos + 0.04 * item + 0.05 * (users[:, 0] == 1)).astype(int)
    lines = [HEADER.rsplit(",user-item", 3)[0]]
    lines += [
        f"{i},2019-11-24 0{i // 3600}:{i // 60 % 60:02d}:{i % 60:02d}+00:00,{item[i]},"
        f"{pos[i]},{click[i]},{1 / N_ITEMS:.12g},"
        + ",".join(f"u{j}v{users[i, j]}" for j in range(4))
        for i in range(n)
    ]
    (folder / "all.csv").write_text("\n".join(lines) + "\n")
    (folder / "item_context.csv").write_text(
        ",item_id,item_feature_0,item_feature_1,item_feature_2,item_feature_3\n"
        + "".join(
            f"{k},{k},{0.3 * k - 0.7:.3f},c{k % 2},d{k % 3},e{k % 4}\n" for k in range(N_ITEMS)
        )
    )
    return folder


def _uniform_policy(n):
    return pa.table(
        {
            "event_id": np.repeat(np.arange(n), N_ITEMS),
            "policy": pa.array(["uniform"] * (n * N_ITEMS)),
            "action": np.tile(np.arange(N_ITEMS), n),
            "probability": np.full(n * N_ITEMS, 1.0 / N_ITEMS),
        }
    )


def _cli(*argv):
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """(raw campaign folder, the parquet file `ope import obd` wrote from it)."""
    root = tmp_path_factory.mktemp("obd")
    folder = _campaign(root / "random" / "all")
    out = root / "obd.parquet"
    code, stdout, err = _cli("import", "obd", str(folder), "--out", str(out))
    assert code == 0, err
    assert "with the action features of 6 items (item_context.csv) embedded" in stdout
    assert [p.name for p in root.iterdir() if p.is_file()] == ["obd.parquet"]  # one file
    return folder, out


def test_the_imported_file_reads_back_with_types_and_item_features(imported):
    folder, out = imported
    raw, back = read_obd(folder), read_logs(out)
    for x, y in zip(back.table.schema, raw.table.schema):
        assert x.equals(y), (x, y)
    assert back.table.schema.metadata == raw.table.schema.metadata
    assert back.table.equals(raw.table)
    assert back.action_features.equals(raw.action_features)
    assert pa.types.is_dictionary(back.table.schema.field("user_feature_0").type)
    assert back.table.schema.field("context").type == pa.list_(pa.int8(), 3 + 4 + 5 + 6 + 3)


def test_dm_and_dr_on_the_imported_file_equal_the_raw_folder(imported):
    folder, out = imported
    policy = _uniform_policy(300)
    kwargs = dict(estimators=("dm", "dr"), reward_range=(0.0, 1.0), rng=7)
    raw = evaluate(read_obd(folder), policy, **kwargs)
    back = evaluate(read_logs(out), policy, **kwargs)
    items = [
        "item_feature_0",
        "item_feature_1=c0",
        "item_feature_1=c1",
        "item_feature_2=d0",
        "item_feature_2=d1",
        "item_feature_2=d2",
        *[f"item_feature_3=e{k}" for k in range(4)],
    ]
    assert back.model_columns == {"context": ["context"], "action_features": items}
    assert raw.model_columns == back.model_columns
    for key in (("uniform", "dm"), ("uniform", "dr")):
        a, b = raw.estimates[key], back.estimates[key]
        assert abs(a.value - b.value) <= 1e-12 and abs(a.std_error - b.std_error) <= 1e-12
    # the reward model uses the user features and the position: not the item table alone
    items_only = evaluate(read_logs(out), policy, context_columns=[], **kwargs)
    assert (
        abs(items_only.estimates[("uniform", "dm")].value - back.estimates[("uniform", "dm")].value)
        > 1e-4
    )
    # a table in memory with the schema metadata carries the item table too
    assert (
        evaluate(read_logs(out).table, policy, **kwargs).estimates[("uniform", "dr")].value
        == back.estimates[("uniform", "dr")].value
    )


def test_cli_dr_on_the_imported_file_equals_the_raw_folder(imported, tmp_path):
    import pyarrow.parquet as pq

    folder, out = imported
    pol = tmp_path / "uniform.parquet"
    pq.write_table(_uniform_policy(300), pol)
    common = [
        "--policies",
        str(pol),
        "--estimator",
        "dr",
        "--reward-range",
        "0",
        "1",
        "--seed",
        "3",
        "--json",
    ]
    values = []
    for source in ([str(out)], [str(folder), "--format", "obd"]):
        code, stdout, err = _cli("evaluate", *source, *common)
        assert code == 0, err
        doc = json.loads(stdout)
        assert doc["model_columns"]["context"] == ["context"]
        assert len(doc["model_columns"]["action_features"]) == 10
        values.append(doc["estimates"][0]["value"])
    assert abs(values[0] - values[1]) <= 1e-12
    # per segment of a categorical user feature, the report included
    code, stdout, err = _cli("evaluate", str(out), *common, "--by", "user_feature_0")
    assert code == 0, err
    assert {r["segment"] for r in json.loads(stdout)["segments"]} == {"u0v0", "u0v1", "u0v2"}


def test_force_reimport_removes_the_side_table_of_an_earlier_import(tmp_path):
    import pyarrow.parquet as pq

    out, side = tmp_path / "obd.parquet", tmp_path / "obd.actions.parquet"
    pq.write_table(pa.table({"action": [0, 1]}), out)
    pq.write_table(pa.table({"action": [0, 1], "item_feature_0": [0.1, 0.2]}), side)
    folder = _write(tmp_path / "random" / "all", items=False)
    code, stdout, _ = _cli("import", "obd", str(folder), "--out", str(out), "--force", "--json")
    assert code == 0
    doc = json.loads(stdout)
    assert doc["removed"] == str(side) and doc["action_features"] is None
    assert not side.exists() and read_logs(out).n == 6
    assert getattr(read_logs(out), "action_features", None) is None
    # a file of that name that is not an item table is not ope's to remove
    pq.write_table(pa.table({"action": [0], "note": ["mine"]}), side)
    code, stdout, _ = _cli("import", "obd", str(folder), "--out", str(out), "--force", "--json")
    assert code == 0 and json.loads(stdout)["removed"] is None and side.exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["validate", "{dsjson}", "--format", "dsjson"],
        ["validate", "{parquet}"],
        ["evaluate", "{parquet}", "--streaming", "on"],
        ["import", "dsjson", "{dsjson}", "--out", "{out}"],
    ],
    ids=["dsjson", "parquet", "parquet-streamed", "import-dsjson"],
)
def test_obd_context_with_another_format_is_a_usage_error(tmp_path, argv):
    import pyarrow.parquet as pq

    from tests.test_import_dsjson import LINES

    paths = {
        "dsjson": tmp_path / "e.json",
        "parquet": tmp_path / "logs.parquet",
        "out": tmp_path / "out.parquet",
    }
    paths["dsjson"].write_text("\n".join(LINES) + "\n")
    pq.write_table(
        pa.table({"action": [0], "propensity": [0.5], "reward": [1.0], "target__a": [1.0]}),
        paths["parquet"],
    )
    code, _, err = _cli(*[a.format(**paths) for a in argv], "--obd-context", "none")
    assert code == 2
    assert "argument --obd-context: applies only to" in err and "drop the flag" in err
    assert not paths["out"].exists()


# --------------------------------------------------------------------------------------------
# OBD's row rules: each names the field and the CSV data rows
# --------------------------------------------------------------------------------------------
def _with(rows, row, **changes):
    fields = ["index", "ts", "item", "pos", "click", "p"]
    out = list(rows)
    values = dict(zip(fields, out[row]))
    values.update(changes)
    out[row] = tuple(values[f] for f in fields)
    return out


@pytest.mark.parametrize(
    "rows, reason, shown",
    [
        (_with(_with(ROWS, 1, index=0), 2, index=0), "event_id_duplicate", "2 (rows 1, 2)"),
        (_with(ROWS, 3, pos="left"), "obd_position_missing", "1 (rows 3)"),
        (_with(ROWS, 4, pos=1.5), "obd_position_missing", "1 (rows 4)"),
        (_with(ROWS, 2, pos=99), "obd_position_out_of_range", "1 (rows 2)"),
        (_with(ROWS, 5, item=7), "obd_item_unknown", "1 (rows 5)"),
    ],
    ids=["duplicate-index", "text-position", "fractional-position", "position-99", "unknown-item"],
)
def test_hostile_rows_name_the_rule_and_the_csv_rows(tmp_path, rows, reason, shown):
    from ope.schema import REJECTION_REASONS

    folder = _write(tmp_path / "random" / "all", rows)
    with pytest.raises(ValidationError) as info:
        read_obd(folder)
    text = str(info.value)
    assert f"{reason}: {shown}" in text
    assert f"{reason}: {REJECTION_REASONS[reason]}" in text
    with pytest.warns(DroppedRowsWarning):
        logs = read_obd(folder, on_invalid="drop")
    assert logs.n == 6 - int(shown[0]) and logs.report.rejected == {reason: int(shown[0])}


def test_position_rules_say_what_obd_positions_are():
    from ope.schema import REJECTION_REASONS

    assert REJECTION_REASONS["obd_position_out_of_range"].startswith("position must be 1, 2 or 3")
    assert "text" in REJECTION_REASONS["obd_position_missing"]
    assert "item_context.csv" in REJECTION_REASONS["obd_item_unknown"]


@pytest.mark.parametrize(
    "items, match",
    [
        (
            "0,0,-0.5,a,b,c\n1,1,0.1,a,b,c\n2,1,0.7,a,b,c\n3,2,0.2,a,b,c\n",
            r"item_id must be unique .*1 item_id value repeat \(item_id 1\) at rows 1, 2 ",
        ),
        (
            "0,0,-0.5,a,b,c\n1,one,0.1,a,b,c\n2,2,0.7,a,b,c\n",
            r"item_id must be a whole number on every row .* at row 1 ",
        ),
    ],
    ids=["duplicate-item", "text-item-id"],
)
def test_a_broken_item_context_names_the_field_and_rows(tmp_path, items, match):
    folder = _write(tmp_path / "random" / "all", items=False)
    (folder / "item_context.csv").write_text(
        ",item_id,item_feature_0,item_feature_1,item_feature_2,item_feature_3\n" + items
    )
    with pytest.raises(SchemaError, match=match) as info:
        read_obd(folder)
    assert "item_context.csv" in str(info.value)


def test_a_row_the_csv_parser_refuses_is_named_by_its_line(tmp_path):
    """pyarrow quotes the row it cannot parse but not its line: the error says the line."""
    folder = _write(tmp_path / "short")
    path = folder / "all.csv"
    lines = path.read_text().splitlines()
    lines[4] = lines[4].split(",", 6)[0] + ",2019-11-24 00:00:09+00:00,1,1"  # 4 fields
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataFileError, match=r"not a readable CSV at line 5 \(1-based"):
        read_obd(folder)
    from ope.importers.obd import _parse_error_line

    # the quoted row is matched whole: not a longer row that starts with it
    odd = tmp_path / "odd.csv"
    odd.write_text("h1,h2,h3\na,b,c\n3,z,9\n2,y,4\n3,z\n")
    message = "x: CSV parse error: Expected 3 columns, got 2: 3,z"
    assert [_parse_error_line(odd, message, block=b) for b in (1, 3, 1 << 20)] == [5, 5, 5]
    odd.write_text("h1,h2,h3\r\n1,b,c\r\n2,b\r\n")
    assert _parse_error_line(odd, "x: CSV parse error: Expected 3 columns, got 2: 2,b") == 3
