"""Open Bandit Dataset importer: exact rows on a fixture in OBD's CSV layout, and IPS/SNIPS of
a per-position candidate against a hand computation."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pyarrow as pa
import pytest

from ope import evaluate, read_logs
from ope.exceptions import DroppedRowsWarning, ParameterError, ValidationError
from ope.importers import read_obd

HEADER = (",timestamp,item_id,position,click,propensity_score,"
          "user_feature_0,user_feature_1,user_feature_2,user_feature_3,"
          "user-item_affinity_0,user-item_affinity_1,user-item_affinity_2")
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
            "0,0,-0.5,f1a,f2a,f3a\n1,1,0.1,f1b,f2b,f3b\n2,2,0.7,f1c,f2c,f3c\n")
    return folder


def test_columns_order_positions_and_side_table(tmp_path):
    folder = _write(tmp_path / "random" / "all")
    logs = read_obd(folder)
    # sorted by timestamp, ties (rows 1 and 2) in CSV order
    assert logs.column("event_id").tolist() == [4, 1, 2, 3, 0, 5]
    assert logs.column("action").tolist() == [2, 0, 1, 1, 2, 0]
    assert logs.column("position").tolist() == [1, 1, 2, 0, 0, 2]
    assert logs.column("reward").tolist() == [1.0, 0.0, 1.0, 0.0, 1.0, 1.0]
    assert logs.column("propensity").tolist() == [0.2, 0.25, 0.5, 0.4, 0.3, 0.1]
    ctx = [f"user_feature_{j}" for j in range(4)]
    assert logs.columns == ["event_id", "timestamp", "action", "position", "reward",
                            "propensity", *ctx]
    meta = logs.table.schema.metadata
    assert json.loads(meta[b"ope.context_columns"]) == ctx
    assert b"position-wise" in meta[b"ope.propensity"]
    af = logs.action_features
    assert af.column_names == ["action"] + [f"item_feature_{j}" for j in range(4)]
    assert af.column("item_feature_0").to_pylist() == [-0.5, 0.1, 0.7]
    # the CSV itself gives the same logs
    same = read_obd(folder / "all.csv")
    assert same.table.equals(logs.table)


def test_affinity_columns_only_on_request(tmp_path):
    folder = _write(tmp_path / "bts" / "men", items=False)
    logs = read_obd(folder, context="user+affinity")
    assert [c for c in logs.columns if c.startswith("user-item")] == [
        "user-item_affinity_0", "user-item_affinity_1", "user-item_affinity_2"]
    assert logs.action_features is None
    assert "user_feature_0" not in read_obd(folder, context="none").columns
    with pytest.raises(ParameterError):
        read_obd(folder, context="all")


def test_bad_rows_are_rejected_with_csv_row_numbers(tmp_path):
    rows = ROWS + [(6, "2019-11-24 00:00:05+00:00", 1, 0, 1, 0.2),    # position 0: not 1-based
                   (7, "2019-11-24 00:00:06+00:00", 1, 2, 1, 0.0),    # propensity 0
                   (8, "2019-11-24 00:00:07+00:00", 1, 2, 1, 1.5)]    # propensity > 1
    folder = _write(tmp_path / "random" / "women", rows)
    with pytest.raises(ValidationError) as info:
        read_obd(folder)
    assert "obd_position_missing: 1 (rows 6)" in str(info.value)
    with pytest.warns(DroppedRowsWarning):
        logs = read_obd(folder, on_invalid="drop")
    assert logs.report.rejected == {"obd_position_missing": 1, "propensity_out_of_range": 2}
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
