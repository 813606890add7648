"""DSJSON importer: exact rows and rejection counts on a fixture in VW's DSJSON format."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from ope.exceptions import DroppedRowsWarning, ValidationError
from ope.importers import read_dsjson

MULTI = [{"TAction": {"id": "a"}}, {"TAction": {"id": "b"}}, {"TAction": {"id": "c"}}]


def _cb(eid, action, prob, cost, a, p, **extra):
    obj = {"EventId": eid, "Timestamp": "2020-01-01T00:00:00.000Z", "Version": "1",
           "_label_cost": cost, "_label_probability": prob, "_label_Action": action,
           "_labelIndex": action - 1, "a": a, "p": p,
           "c": {"User": {"age": 30}, "_multi": MULTI}}
    obj.update(extra)
    return json.dumps(obj)


LINES = [
    _cb("e0", 2, 0.6, -1.0, [2, 1, 3], [0.6, 0.3, 0.1]),                  # 0 ok
    '{"EventId": "e1", "_label_cost": ',                                    # 1 bad JSON
    json.dumps({"EventId": "e2", "_label_cost": 0.0, "_label_Action": 1,     # 2 no probability
                "a": [1, 2, 3], "p": [0.5, 0.25, 0.25], "c": {"_multi": MULTI}}),
    _cb("e3", 1, 0.5, "-1", [1, 2, 3], [0.5, 0.25, 0.25]),                  # 3 cost is a string
    _cb("e4", 3, 0.5, 0.0, [1, 2], [0.5, 0.5]),                             # 4 action outside a
    json.dumps({"EventId": "e5", "_skipLearn": True, "_label_cost": 0.0}),  # 5 skipLearn
    _cb("e6", 3, 0.2, 0.0, [3, 1, 2], [0.2, 0.4, 0.4], pdrop=0.5),          # 6 ok, weight 2
    _cb("e7", 1, 0.5, 0.0, [1, 2, 3], [0.5, 0.25, 0.25], pdrop=1.0),        # 7 pdrop == 1
    "",                                                                     # 8 blank: skipped
    _cb("e0", 1, 0.5, 0.0, [1, 2, 3], [0.5, 0.25, 0.25]),                   # 9 duplicate id
    _cb("e10", 1, 0.9, 0.0, [1, 2, 3], [0.5, 0.25, 0.25]),                  # 10 p[0] != prob
    json.dumps({"EventId": "s11", "c": {"_multi": MULTI, "_slots": [{}, {}]},   # 11 CCB, 2 slots
                "_outcomes": [{"_label_cost": -1.0, "_a": [2, 0, 1], "_p": [0.7, 0.2, 0.1]},
                              {"_label_cost": 0.0, "_a": [0, 1], "_p": [0.6, 0.4]}]}),
]

EXPECTED_REJECTED = {
    "dsjson_bad_json": 1, "propensity_missing": 1, "dsjson_cost_not_numeric": 1,
    "dsjson_action_not_in_a": 1, "dsjson_skip_learn": 1, "dsjson_pdrop_out_of_range": 1,
    "event_id_duplicate": 1, "logged_propensity_mismatch": 1,
}
EXPECTED_EXAMPLES = {
    "dsjson_bad_json": (1,), "propensity_missing": (2,), "dsjson_cost_not_numeric": (3,),
    "dsjson_action_not_in_a": (4,), "dsjson_skip_learn": (5,), "dsjson_pdrop_out_of_range": (7,),
    "event_id_duplicate": (9,), "logged_propensity_mismatch": (10,),
}


@pytest.fixture
def path(tmp_path):
    p = tmp_path / "events.json"
    p.write_text("\n".join(LINES) + "\n")
    return p


def _read(path, **kw):
    with pytest.warns(DroppedRowsWarning):
        return read_dsjson(path, on_invalid="drop", **kw)


@pytest.mark.parametrize("chunk_lines", [50_000, 2, 1])
def test_rows_and_rejections_are_exact_at_any_chunk_size(path, chunk_lines):
    logs = _read(path, chunk_lines=chunk_lines)
    r = logs.report
    assert (r.rows_read, r.rows_used) == (12, 4)   # 11 non-blank lines + 1 more slot row
    assert r.rejected == EXPECTED_REJECTED
    assert r.examples == EXPECTED_EXAMPLES
    t = logs.table.to_pydict()
    assert t["event_id"] == ["e0", "e6", "s11/0", "s11/1"]
    assert t["action"] == [1, 2, 2, 0]
    assert t["propensity"] == [0.6, 0.2, 0.7, 0.6]
    assert t["reward"] == [1.0, -0.0, 1.0, -0.0]
    assert t["weight"] == [1.0, 2.0, 1.0, 1.0]
    assert t["candidates"] == [[0, 1, 2], [0, 1, 2], [2, 0, 1], [0, 1]]
    # p is in the order of a (1-based) and lands at a - 1
    assert t["logging_distribution"] == [[0.3, 0.6, 0.1], [0.4, 0.4, 0.2], [0.7, 0.2, 0.1],
                                         [0.6, 0.4]]
    assert t["slate_id"] == [None, None, "s11", "s11"]
    assert t["position"] == [None, None, 0, 1]
    assert [json.loads(f) for f in t["action_features"]] == [MULTI] * 4
    assert json.loads(t["shared_context"][0]) == {"User": {"age": 30}}
    meta = logs.table.schema.metadata
    assert meta[b"ope.source_format"] == b"dsjson"


def test_gzip_gives_the_same_logs(path, tmp_path):
    gz = tmp_path / "events.json.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    a, b = _read(path), _read(gz)
    assert a.table.equals(b.table)
    assert a.report.rejected == b.report.rejected


def test_raise_names_every_reason_with_its_line(path):
    with pytest.raises(ValidationError) as info:
        read_dsjson(path)
    msg = str(info.value)
    for reason, lines in EXPECTED_EXAMPLES.items():
        if reason != "dsjson_skip_learn":
            assert f"{reason}: 1 (rows {lines[0]})" in msg
    assert "  dsjson_skip_learn:" not in msg.split("rules broken:")[1]
    assert info.value.report.rejected == EXPECTED_REJECTED


def test_skip_learn_alone_does_not_raise_and_is_counted(tmp_path):
    p = tmp_path / "ok.json"
    p.write_text(LINES[0] + "\n" + LINES[5] + "\n")
    logs = read_dsjson(p)
    assert logs.n == 1 and logs.report.rejected == {"dsjson_skip_learn": 1}
    assert "slate_id" not in logs.columns and "position" not in logs.columns


def test_bad_pdrop_and_malformed_ccb_are_rejected(tmp_path):
    p = tmp_path / "x.json"
    p.write_text("\n".join([
        LINES[0],
        _cb("b", 1, 0.5, 0.0, [1, 2, 3], [0.5, 0.25, 0.25], pdrop="0.1"),
        json.dumps({"EventId": "s", "_outcomes": [{"_label_cost": "x", "_a": [0], "_p": [1.0]}]}),
        json.dumps([1, 2]),
        _cb("c", 1, 0.5, 0.0, [1, 4, 2], [0.5, 0.25, 0.25]),     # id 4 of 3 actions
        _cb("d", 1, 0.5, 0.0, [1, 1, 2], [0.5, 0.25, 0.25]),     # id repeated
        _cb("e", 1, 0.5, 0.0, [1, 2, 3], [0.5, "x", 0.25]),      # p not numeric
        _cb("f", 1, 0.5, 0.0, [1, 2, 3], [0.5, 0.5]),            # lengths differ
    ]))
    logs = _read(p)
    assert logs.report.rejected == {"dsjson_pdrop_out_of_range": 1, "dsjson_a_p_mismatch": 4,
                                    "dsjson_outcome_malformed": 1, "dsjson_bad_json": 1}
    assert logs.report.examples == {"dsjson_pdrop_out_of_range": (1,),
                                    "dsjson_a_p_mismatch": (4, 5, 6, 7),
                                    "dsjson_outcome_malformed": (2,), "dsjson_bad_json": (3,)}
    assert logs.n == 1


def test_empty_file_is_an_error(tmp_path):
    p = tmp_path / "empty.json"
    p.write_text("")
    with pytest.raises(ValidationError, match="holds no rows"):
        read_dsjson(p)


def test_importer_reasons_live_in_the_one_registry(path):
    # the importers' reasons are entries of ope.schema.REJECTION_REASONS, so the shared failure
    # message of a ValidationReport can explain them (it raised KeyError on them before)
    from ope.schema import REJECTION_REASONS

    logs = _read(path)
    assert set(logs.report.rejected) <= set(REJECTION_REASONS)
    message = logs.report.failure_message()
    for reason in logs.report.rejected:
        assert f"{reason}: {REJECTION_REASONS[reason]}" in message
