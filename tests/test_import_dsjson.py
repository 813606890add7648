"""DSJSON importer: exact rows and rejections per line kind, on fixtures in VW's DSJSON shapes.

The fixtures under ``tests/data/dsjson`` are small files written for these tests, one per kind
of line VW's ``--dsjson`` reader reads (CB, CCB, IGL) or ope refuses (continuous actions,
slates, VW's plain JSON); each line's comment in the tests says what it exercises.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ope.exceptions import DataFileError, DroppedRowsWarning, ParameterError, ValidationError
from ope.importers import EXCLUDED_REASONS, import_dsjson, iter_dsjson, read_dsjson
from ope.importers import dsjson as dsjson_module

DATA = Path(__file__).parent / "data" / "dsjson"

#: The CB fixture's lines (other test modules build DSJSON inputs from them).
LINES = (DATA / "cb.json").read_text().splitlines()

CB_REJECTED = {
    "dsjson_pdrop_out_of_range": 1,  # line 3: pdrop == 1
    "dsjson_skip_learn": 1,  # line 4
    "dsjson_no_actions": 1,  # line 5: no `a` (VW skips the event)
    "dsjson_unlabeled": 1,  # line 6: no _label_*
    "dsjson_label_index_missing": 1,  # line 7: _label_Action without _labelIndex
    "dsjson_label_index_out_of_range": 1,  # line 8: _labelIndex 3 of 3 actions
    "dsjson_bad_json": 1,  # line 9: truncated
    "dsjson_field_type": 1,  # line 10: numeric EventId
    "dsjson_not_object": 2,  # line 12 (leading spaces), line 18 (an array)
    "reward_missing": 1,  # line 14: _label_cost "NaN"
    "dsjson_a_p_mismatch": 1,  # line 15: an id twice in `a`
    "event_id_duplicate": 1,  # line 16: EventId e0 again
    "dsjson_kind_mismatch": 1,  # line 17: a CCB line in a CB file
}
CB_EXAMPLES = {
    "dsjson_pdrop_out_of_range": (3,),
    "dsjson_skip_learn": (4,),
    "dsjson_no_actions": (5,),
    "dsjson_unlabeled": (6,),
    "dsjson_label_index_missing": (7,),
    "dsjson_label_index_out_of_range": (8,),
    "dsjson_bad_json": (9,),
    "dsjson_field_type": (10,),
    "dsjson_not_object": (12, 18),
    "reward_missing": (14,),
    "dsjson_a_p_mismatch": (15,),
    "event_id_duplicate": (16,),
    "dsjson_kind_mismatch": (17,),
}


def _drop(path, **kw):
    with pytest.warns(DroppedRowsWarning):
        return read_dsjson(path, on_invalid="drop", **kw)


@pytest.mark.parametrize("chunk_lines", [50_000, 3, 1])
def test_cb_rows_and_rejections_are_exact_at_any_chunk_size(chunk_lines):
    logs = _drop(DATA / "cb.json", chunk_lines=chunk_lines)
    r = logs.report
    assert (r.rows_read, r.rows_used) == (18, 4)  # 19 lines, one blank
    assert r.rejected == CB_REJECTED
    assert r.examples == CB_EXAMPLES
    t = logs.table.to_pydict()
    assert logs.columns == [
        "event_id",
        "timestamp",
        "action",
        "propensity",
        "reward",
        "weight",
        "candidates",
        "logging_distribution",
    ]
    # line 1 has no EventId: "<file name>:<0-based line>"
    assert t["event_id"] == ["e0", "cb.json:1", "e2", "e13"]
    assert t["timestamp"] == ["2024-01-01T00:00:00Z", None, None, None]
    # _labelIndex wins over _label_Action (line 2: index 2, _label_Action 1)
    assert t["action"] == [1, 0, 2, 2]
    assert t["propensity"] == [0.6, 0.5, 0.2, 0.25]
    assert t["reward"] == [1.0, -0.0, 0.5, 2.0]  # _label_Cost spelling on line 13
    assert t["weight"] == [1.0, 1.0, 2.0, 1.0]  # pdrop 0.5 on line 2
    assert t["candidates"] == [[0, 1, 2]] * 4
    # p[i] lands at a[i] - 1; line 13 has p then _p: the later one (_p) wins
    assert t["logging_distribution"] == [
        [0.3, 0.6, 0.1],
        [0.5, 0.25, 0.25],
        [0.4, 0.4, 0.2],
        [0.5, 0.25, 0.25],
    ]
    meta = logs.table.schema.metadata
    assert meta[b"ope.source_format"] == b"dsjson" and meta[b"ope.dsjson_kind"] == b"cb"


def test_ccb_one_row_per_labeled_slot():
    with pytest.warns(DroppedRowsWarning):
        logs = read_dsjson(DATA / "ccb.json", on_invalid="drop", chunk_lines=2)
    r = logs.report
    assert (r.rows_read, r.rows_used) == (13, 6)
    assert r.rejected == {
        "dsjson_unlabeled": 2,
        "dsjson_outcome_malformed": 3,
        "dsjson_skip_learn": 1,
        "dsjson_pdrop_out_of_range": 1,
    }
    assert r.examples == {
        "dsjson_unlabeled": (2, 8),
        "dsjson_outcome_malformed": (4, 5, 6),
        "dsjson_skip_learn": (7,),
        "dsjson_pdrop_out_of_range": (9,),
    }
    t = logs.table.to_pydict()
    assert logs.columns == [
        "event_id",
        "timestamp",
        "action",
        "propensity",
        "reward",
        "weight",
        "slate_id",
        "position",
    ]
    assert t["event_id"] == ["s0/0", "s0/1", "ccb.json:1/0", "ccb.json:1/1", "s2/0", "s3/0"]
    assert t["slate_id"] == ["s0", "s0", "ccb.json:1", "ccb.json:1", "s2", "s3"]
    assert t["position"] == [0, 1, 0, 1, 0, 0]
    # _a[0] (scalar or list) is 0-based; the CB line (line 3) reads as one slot with
    # action _label_Action - 1, as VW's CCB reader does (not _labelIndex)
    assert t["action"] == [2, 1, 1, 2, 0, 2]
    assert t["propensity"] == [0.7, 0.6, 0.25, 0.75, 1.0, 0.8]
    assert t["reward"] == [1.0, -0.0, -2.0, -4.0, 1.0, 1.0]
    assert t["weight"] == [1.0, 1.0, 1.25, 1.25, 1.0, 1.0]
    assert logs.table.schema.metadata[b"ope.dsjson_kind"] == b"ccb"


def test_igl_file_reads_as_its_cb_events_without_a_distribution():
    # `o` is only read by VW's --experimental_igl; `a` here is 0-based, so the first row has no
    # distribution over c._multi and the file carries none (every row kept, as VW learns them)
    logs = read_dsjson(DATA / "igl.json")
    t = logs.table.to_pydict()
    assert logs.columns == [
        "event_id",
        "timestamp",
        "action",
        "propensity",
        "reward",
        "weight",
        "candidates",
    ]
    assert t["event_id"] == ["igl.json:0", "igl.json:1"]
    assert t["action"] == [3, 1] and t["reward"] == [-0.0, 1.0]
    assert t["candidates"] == [[0, 1, 2, 3]] * 2
    (note,) = logs.report.notes  # the `p` left out is said
    assert note.startswith("`p` not kept as logging_distribution") and "(line 0)" in note


@pytest.mark.parametrize(
    "name, kind",
    [
        ("continuous.json", "continuous-action DSJSON (`_label_ca`/`pdf`) is not a discrete"),
        ("slates.json", "slates DSJSON (`_slot_id` in `c._multi`) is not supported"),
        ("plain_json.json", "Vowpal Wabbit's plain JSON example format (`--json`"),
    ],
)
def test_other_kinds_are_one_error_naming_the_kind(name, kind, tmp_path):
    with pytest.raises(DataFileError) as info:
        read_dsjson(DATA / name)
    assert kind in str(info.value) and f"line 0 of {name}" in str(info.value)
    with pytest.raises(DataFileError, match="is not supported|plain JSON|not a discrete"):
        import_dsjson(DATA / name, tmp_path / "x.parquet")
    assert not (tmp_path / "x.parquet").exists()


def test_a_later_line_of_another_kind_is_rejected_not_raised(tmp_path):
    p = tmp_path / "mixed.json"
    cont = (DATA / "continuous.json").read_text().strip()
    p.write_text("\n".join([LINES[0], cont, LINES[1]]) + "\n")
    logs = _drop(p)
    assert logs.n == 2 and logs.report.rejected == {"dsjson_kind_mismatch": 1}


def test_raise_names_every_invalid_reason_and_not_the_excluded_ones():
    with pytest.raises(ValidationError) as info:
        read_dsjson(DATA / "cb.json")
    msg = str(info.value)
    rules = msg.split("rules broken:")[1]
    for reason in CB_REJECTED:
        assert (reason in EXCLUDED_REASONS) == (f"  {reason}:" not in rules)
    assert info.value.report.rejected == CB_REJECTED


def test_excluded_lines_alone_do_not_raise(tmp_path):
    p = tmp_path / "ok.json"
    p.write_text("\n".join([LINES[0], LINES[4], LINES[5], LINES[6], LINES[18]]) + "\n")
    logs = read_dsjson(p)
    assert logs.n == 1
    assert logs.report.rejected == {
        "dsjson_skip_learn": 1,
        "dsjson_no_actions": 1,
        "dsjson_unlabeled": 1,
        "dsjson_not_object": 1,
    }


def test_cli_and_api_give_the_same_table(tmp_path):
    from tests.test_cli_import import _run

    for name, kw in (
        ("cb.json", ["--on-invalid", "drop"]),
        ("ccb.json", ["--on-invalid", "drop"]),
        ("igl.json", []),
    ):
        out = tmp_path / f"{name}.parquet"
        code, stdout, err = _run(
            "import",
            "dsjson",
            str(DATA / name),
            "--out",
            str(out),
            "--json",
            "--chunk-lines",
            "2",
            *kw,
        )
        assert code == 0, err
        with pytest.warns(DroppedRowsWarning) if kw else _no_warning():
            api = read_dsjson(DATA / name, on_invalid="drop" if kw else "raise")
        cli = pq.read_table(out)
        # parquet names a list's child "element" where Arrow says "item": the only difference
        assert cli.column_names == api.table.column_names
        assert cli.schema.metadata == api.table.schema.metadata
        assert cli.cast(api.table.schema).equals(api.table)
        assert json.loads(stdout)["report"] == api.report.to_dict()


class _no_warning:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_gzip_and_crlf_give_the_same_logs(tmp_path):
    raw = (DATA / "cb.json").read_bytes()
    gz = tmp_path / "cb.json"
    gz.write_bytes(gzip.compress(raw))
    crlf = tmp_path / "crlf" / "cb.json"
    crlf.parent.mkdir()
    crlf.write_bytes(raw.replace(b"\n", b"\r\n"))
    a, b, c = _drop(DATA / "cb.json"), _drop(gz), _drop(crlf)
    assert a.table.equals(b.table) and a.table.equals(c.table)
    assert a.report.rejected == b.report.rejected == c.report.rejected


def _cb_line(i, **extra):
    obj = {
        "_label_cost": -float(i % 2),
        "_label_probability": 0.5,
        "_label_Action": 1,
        "_labelIndex": 0,
        "EventId": f"x{i}",
        "a": [1, 2],
        "p": [0.5, 0.5],
        "c": {"u": {"f": i}, "_multi": [{"k": 1}, {"k": 2}]},
    }
    obj.update(extra)
    return json.dumps(obj)


_real_slow_line = dsjson_module._slow_line


def test_columnar_and_line_by_line_paths_agree(tmp_path, monkeypatch):
    lines = [_cb_line(i) for i in range(40)]
    lines[17] = _cb_line(17, _labelIndex=5)
    lines[19] = _cb_line(19, a=[2, 2])
    lines[21] = _cb_line(21, _skipLearn=True)
    lines[22] = _cb_line(22, pdrop=0.75)
    lines[23] = _cb_line(23, a=[])
    lines[24] = json.dumps({k: v for k, v in json.loads(_cb_line(24)).items() if k != "EventId"})
    lines[35] = _cb_line(35, _labelIndex=2**70)  # too big for int64: line by line
    p = tmp_path / "x.json"
    p.write_text("\n".join(lines) + "\n")
    calls = []  # the lines not decoded as plain CB: only the one with the huge integer
    monkeypatch.setattr(
        dsjson_module,
        "_slow_line",
        lambda raw, ln, *a: calls.append(ln) or _real_slow_line(raw, ln, *a),
    )
    fast = _drop(p, chunk_lines=16)
    assert calls == [35]

    def no_fast(raw):
        raise dsjson_module.msgspec.DecodeError("forced")

    monkeypatch.setattr(dsjson_module, "_FAST", no_fast)
    slow = _drop(p, chunk_lines=16)
    assert len(calls) == 41
    assert fast.table.equals(slow.table)
    assert (
        fast.report.rejected
        == slow.report.rejected
        == {
            "dsjson_label_index_out_of_range": 1,
            "dsjson_a_p_mismatch": 1,
            "dsjson_skip_learn": 1,
            "dsjson_no_actions": 1,
            "dsjson_field_type": 1,
        }
    )
    rows = dict(
        zip(fast.table.column("event_id").to_pylist(), fast.table.column("weight").to_pylist())
    )
    assert rows["x22"] == 4.0 and rows["x.json:24"] == 1.0 and len(rows) == 35


HOSTILE = [
    ("nesting", b'{"VWState": ' + b"[" * 50_000 + b"]" * 50_000 + b"}", "dsjson_bad_json"),
    ("nesting in c", b'{"c": {"u": ' + b"[" * 50_000 + b"]" * 50_000 + b"}}", "dsjson_bad_json"),
    ("huge integer", b'{"pdrop": 1' + b"0" * 400 + b"}", "dsjson_field_type"),
    ("huge integer id", _cb_line(0, _labelIndex=10**400).encode(), "dsjson_field_type"),
    ("numeric EventId", _cb_line(0, EventId=7).encode(), "dsjson_field_type"),
    ("lone surrogate", b'{"EventId": "\\ud800", "a": [1]}', "dsjson_bad_json"),
    ("invalid utf-8", b'{"EventId": "\xff\xfe", "a": [1]}', "dsjson_bad_json"),
    ("string pdrop", _cb_line(0, pdrop="0.1").encode(), "dsjson_field_type"),
    ("string cost", _cb_line(0, _label_cost="-1").encode(), "dsjson_cost_not_numeric"),
]


@pytest.mark.parametrize("what, line, reason", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_lines_are_rejected_with_a_reason(tmp_path, what, line, reason):
    p = tmp_path / "h.json"
    p.write_bytes(_cb_line(1).encode() + b"\n" + line + b"\n")
    logs = _drop(p)
    assert logs.n == 1 and logs.report.rejected == {reason: 1}
    assert logs.report.examples == {reason: (1,)}


def test_a_utf8_byte_order_mark_is_skipped_not_the_first_event(tmp_path):
    """Windows and .NET exporters start the file with EF BB BF: the first event is read as the
    others (not rejected as a line that is not an object), at any block size, with workers and
    gzipped."""
    body = ("\n".join(_cb_line(i) for i in range(300)) + "\n").encode()
    plain, marked, zipped = tmp_path / "a.json", tmp_path / "bom.json", tmp_path / "bom.json.gz"
    plain.write_bytes(body)
    marked.write_bytes(b"\xef\xbb\xbf" + body)
    zipped.write_bytes(gzip.compress(b"\xef\xbb\xbf" + body))
    expected = read_dsjson(plain).table
    for path in (marked, zipped):
        for kw in (
            {},
            {"chunk_bytes": 1},
            {"chunk_bytes": 2},
            {"chunk_bytes": 3},
            {"chunk_lines": 7, "chunk_bytes": 1000},
            {"workers": 2, "chunk_bytes": 4096},
        ):
            logs = read_dsjson(path, **kw)
            assert logs.n == 300 and logs.report.rows_read == 300 and not logs.report.rejected
            assert (
                logs.table.column("event_id").to_pylist() == expected.column("event_id").to_pylist()
            )


def test_utf16_file_and_truncated_gzip_are_data_file_errors(tmp_path):
    p = tmp_path / "u16.json"
    p.write_bytes(("\n".join(LINES[:3]) + "\n").encode("utf-16"))
    with pytest.raises(DataFileError, match="UTF-16 or UTF-32 encoded"):
        read_dsjson(p)
    g = tmp_path / "cut.json.gz"
    whole = gzip.compress(("\n".join([_cb_line(i) for i in range(2000)]) + "\n").encode())
    g.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(DataFileError, match="damaged or truncated gzip stream"):
        read_dsjson(g)


def test_a_line_over_the_limit_is_rejected_without_holding_it(tmp_path):
    big = b'{"EventId": "big", "pad": "' + b"x" * 5000 + b'"}'
    p = tmp_path / "long.json"
    p.write_bytes(
        _cb_line(0).encode() + b"\n" + big + b"\n" + _cb_line(2).encode() + b"\n" + big
    )  # the last line has no newline
    for chunk_bytes in (64, 1000, 1 << 20):
        logs = _drop(p, max_line_bytes=1000, chunk_bytes=chunk_bytes)
        assert logs.column("event_id").tolist() == ["x0", "x2"]
        assert logs.report.examples == {"dsjson_line_too_long": (1, 3)}


def test_options_are_checked():
    with pytest.raises(ParameterError, match="chunk_bytes"):
        read_dsjson(DATA / "igl.json", chunk_bytes=0)
    with pytest.raises(ParameterError, match="mapping"):
        read_dsjson(DATA / "igl.json", mapping={"reward": "x"})


def test_features_json_keeps_each_lines_c():
    logs = read_dsjson(DATA / "igl.json", features=True)
    c = json.loads(logs.table.column("features_json")[1].as_py())
    assert c["User"] == {"user=Tom": 1} and len(c["_multi"]) == 4


def test_empty_file_is_an_error(tmp_path):
    p = tmp_path / "empty.json"
    p.write_text("\n\n")
    with pytest.raises(ValidationError, match="holds no rows|no row"):
        read_dsjson(p)


def test_iter_dsjson_yields_bounded_chunks():
    sizes = [t.num_rows for t, _ in iter_dsjson(DATA / "igl.json", chunk_lines=1)]
    assert sizes == [1, 1]


def test_importer_reasons_live_in_the_one_registry():
    from ope.schema import REJECTION_REASONS

    logs = _drop(DATA / "cb.json")
    assert set(logs.report.rejected) <= set(REJECTION_REASONS)
    message = logs.report.failure_message()
    for reason in logs.report.rejected:
        assert f"{reason}: {REJECTION_REASONS[reason]}" in message
    assert (
        f"{dsjson_module.MAX_LINE_BYTES // 2**20} MiB" in REJECTION_REASONS["dsjson_line_too_long"]
    )


def test_nan_probability_string_is_read_as_nan(tmp_path):
    p = tmp_path / "n.json"
    p.write_text(_cb_line(0) + "\n" + _cb_line(1, _label_probability="nan") + "\n")
    logs = _drop(p)
    assert logs.n == 1 and logs.report.rejected == {"propensity_missing": 1}
    assert not math.isnan(logs.column("propensity")[0])
    assert np.array_equal(logs.column("action"), [0])
    assert isinstance(logs.table, pa.Table)


def test_ccb_outcome_costs_are_numbers_or_nan(tmp_path):
    first = (DATA / "ccb.json").read_text().splitlines()[0]
    bad = json.loads(first)
    bad["EventId"], bad["_outcomes"][0]["_label_cost"] = "t1", "x"
    nan = json.loads(first)
    nan["EventId"], nan["_outcomes"][1]["_label_cost"] = "t2", "NaN"
    p = tmp_path / "c.json"
    p.write_text("\n".join([first, json.dumps(bad), json.dumps(nan)]) + "\n")
    logs = _drop(p)
    assert logs.column("event_id").tolist() == ["s0/0", "s0/1", "t2/0"]
    assert logs.report.rejected == {"dsjson_cost_not_numeric": 1, "reward_missing": 1}
    assert logs.report.examples == {"dsjson_cost_not_numeric": (1,), "reward_missing": (2,)}


@pytest.mark.filterwarnings("ignore::ope.exceptions.DroppedRowsWarning")
@pytest.mark.parametrize("name", ["cb.json", "ccb.json", "igl.json"])
def test_worker_processes_give_the_same_logs_and_file(tmp_path, monkeypatch, name):
    # each fixture 40 times over (so with repeated event ids, caught across blocks), in blocks
    # of 2 kB of which every one after the first goes to a worker
    lines = (DATA / name).read_text().splitlines() * 40
    src = tmp_path / name
    src.write_text("\n".join(lines) + "\n")
    serial = read_dsjson(src, on_invalid="drop", workers=1)
    used = []
    real_pool = dsjson_module._pool
    monkeypatch.setattr(dsjson_module, "_pool", lambda n: used.append(n) or real_pool(n))
    monkeypatch.setattr(dsjson_module, "_POOL_MIN_BYTES", 0)
    monkeypatch.setattr(dsjson_module, "_FIRST_BYTES", 512)
    parallel = read_dsjson(src, on_invalid="drop", workers=2, chunk_bytes=2048)
    assert used == [2]
    assert parallel.table.equals(serial.table)
    assert parallel.table.schema.metadata == serial.table.schema.metadata
    assert parallel.report == serial.report
    # without EventId (IGL) an id is the line's own: no repeats
    assert serial.report.rejected.get("event_id_duplicate", 0) == (
        0 if name == "igl.json" else {"cb.json": 196, "ccb.json": 156}[name]
    )
    n, report = import_dsjson(
        src, tmp_path / "x.parquet", on_invalid="drop", workers=2, chunk_bytes=2048
    )
    assert len(used) == 2 and report == serial.report and n == serial.n
    written = pq.read_table(tmp_path / "x.parquet")
    assert written.cast(serial.table.schema).equals(serial.table)
    # a gzip file's blocks go to the workers as bytes (not by their place in the file)
    gz = tmp_path / "gz" / name
    gz.parent.mkdir()
    gz.write_bytes(gzip.compress(src.read_bytes()))
    zipped = read_dsjson(gz, on_invalid="drop", workers=2, chunk_bytes=2048)
    assert len(used) == 3
    assert zipped.table.equals(serial.table) and zipped.report.rejected == serial.report.rejected


def test_worker_count_is_checked():
    with pytest.raises(ParameterError, match="workers"):
        read_dsjson(DATA / "igl.json", workers=0)


def test_repeated_ids_keep_the_same_rows_at_any_chunk_size(tmp_path):
    # line 14 (cost "NaN": reward_missing) repeats its id 40 times: read in one table, every
    # occurrence after the first is a repeat too, and chunks must count and keep the same
    src = tmp_path / "cb.json"
    src.write_text("\n".join(LINES * 40) + "\n")
    whole = _drop(src, workers=1)
    assert whole.report.rejected["event_id_duplicate"] == 196
    for chunk_lines in (7, 1):
        part = _drop(src, workers=1, chunk_lines=chunk_lines)
        assert part.table.equals(whole.table)
        assert part.report.rejected == whole.report.rejected
        assert part.report.examples == whole.report.examples


def test_p_that_is_not_a_distribution_costs_no_row_its_label(tmp_path):
    """VW never learns from ``p``: a first row whose ``p`` does not sum to 1 or disagrees with
    ``_label_probability`` leaves the file without logging_distribution and every row read
    (VW's parser test writes p = [0.8167, 0.1833, 0.1833]); a first row whose ``p`` is a
    distribution gives the column, and a later row whose ``p`` is not one is that row's
    dsjson_a_p_mismatch (naming a and p, not the column it would have become)."""
    vw = _cb_line(0, a=[1, 2, 3], p=[0.8167, 0.1833, 0.1833], _label_probability=0.8167,
                  c={"_multi": [{"k": 1}, {"k": 2}, {"k": 3}]})  # fmt: skip
    off = _cb_line(1, p=[0.6, 0.4])  # sums to 1, but 0.6 != _label_probability 0.5
    # a, p leave out the logged action (_labelIndex 0: id 1), whose probability is then 0
    without = _cb_line(1, a=[2, 3], p=[0.5, 0.5], c={"_multi": [{"k": 1}, {"k": 2}, {"k": 3}]})
    for first in (vw, off, without):
        path = tmp_path / "p.json"
        path.write_text("\n".join([first, _cb_line(2), _cb_line(3)]) + "\n")
        logs = read_dsjson(path)
        assert logs.n == 3 and "logging_distribution" not in logs.table.column_names
        # the `p` left out is said, once, in the report and the results built on the logs
        (note,) = logs.report.notes
        assert note.startswith("`p` not kept as logging_distribution: the first labeled line ")
        assert "(line 0) decides" in note and "the first at line 0" in note
        assert logs.report.to_dict()["notes"] == [note] and "note: `p` not kept" in str(logs.report)
        assert note in logs.report.dropped_notes()
    path.write_text("\n".join([_cb_line(2), vw, off, _cb_line(3)]) + "\n")
    with pytest.warns(DroppedRowsWarning):
        logs = read_dsjson(path, on_invalid="drop")
    assert logs.report.rejected == {"dsjson_a_p_mismatch": 2}
    assert logs.report.examples["dsjson_a_p_mismatch"] == (1, 2)
    assert logs.table.column("logging_distribution").to_pylist() == [[0.5, 0.5]] * 2


def test_a_file_without_p_or_with_its_distribution_has_no_note(tmp_path):
    no_p = [json.loads(_cb_line(i)) for i in range(3)]
    for obj in no_p:
        del obj["p"]
    path = tmp_path / "no_p.json"
    path.write_text("\n".join(json.dumps(o) for o in no_p) + "\n")
    assert read_dsjson(path).report.notes == ()
    path.write_text("\n".join(_cb_line(i) for i in range(3)) + "\n")
    logs = read_dsjson(path)
    assert logs.report.notes == () and "logging_distribution" in logs.table.column_names


def test_the_p_left_out_is_noted_by_the_import_and_the_evaluation(tmp_path):
    # the first line has no p (it decides), later lines carry one: said at the first of them
    first = json.loads(_cb_line(0))
    del first["p"]
    path = tmp_path / "late_p.json"
    path.write_text("\n".join([json.dumps(first)] + [_cb_line(i) for i in range(1, 40)]) + "\n")
    n, report = import_dsjson(path, tmp_path / "out.parquet", chunk_lines=7)
    assert n == 40
    (note,) = report.notes
    assert "(line 0) decides" in note and "the first at line 1" in note
    import ope

    logs = read_dsjson(path, chunk_lines=7)
    assert logs.report.notes == (note,)
    ev = ope.evaluate(logs, {"uniform": ope.policies.UniformPolicy()}, estimators=("ips",))
    assert any(note in x for x in ev.notes)
