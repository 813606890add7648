"""DSJSON importer: exact rows and rejections per line kind, on fixtures in VW's DSJSON shapes.

The fixtures under ``tests/data/dsjson`` are small files written for these tests, one per kind
of line VW's ``--dsjson`` reader reads (CB, CCB, IGL) or ope refuses (continuous actions,
slates, VW's plain JSON); each line's comment in the tests says what it exercises.
"""

from __future__ import annotations

import gzip
import zlib
import json
import math
import warnings
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
    # the lines that decode, counted independently (zlib on the cut bytes)
    decodes = zlib.decompressobj(31).decompress(whole[: len(whole) // 2]).count(b"\n")
    assert 0 < decodes < 2000
    for kw in ({}, {"chunk_lines": 100}):  # the damage is not at the start of a read
        with pytest.raises(DataFileError, match="damaged or truncated gzip stream") as info:
            read_dsjson(g, **kw)
        # where the damage is, not where the failing read began ("after line 0" before)
        assert (
            f"lines 0 to {decodes - 1:,} decode, and line {decodes:,} is cut by the damage; "
            f"`zcat cut.json.gz | head -n {decodes}` keeps the lines that decode"
        ) in str(info.value)


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


# ------------------------------------------------------------ what the report says, and where
def _write(path, lines):
    path.write_bytes(b"\n".join(x if isinstance(x, bytes) else x.encode() for x in lines) + b"\n")
    return path


def _note(report, start):
    (note,) = [n for n in report.notes if n.startswith(start)]
    return note


@pytest.mark.parametrize("kw", [{}, {"chunk_lines": 1}, {"workers": 2, "chunk_bytes": 600}])
def test_repeated_event_ids_are_named_with_the_line_they_first_appeared_on(
    tmp_path, monkeypatch, kw
):
    """event_id_duplicate names the id (escaped, cut) and its first line, whatever the chunks
    (a repeat of an earlier chunk's id, or of one in its own chunk)."""
    monkeypatch.setattr(dsjson_module, "_POOL_MIN_BYTES", 0)
    monkeypatch.setattr(dsjson_module, "_FIRST_BYTES", 512)
    odd = "\x1b[2J\u202e" + "z" * 100  # control and bidirectional characters, and long
    lines = [_cb_line(i) for i in range(6)]
    lines[3] = _cb_line(3, EventId="x0")  # repeats line 0
    lines[5] = _cb_line(5, EventId=odd)
    lines += [_cb_line(6, EventId=odd), _cb_line(7, EventId="x0")]
    logs = _drop(_write(tmp_path / "dup.json", lines), **kw)
    assert logs.report.examples == {"event_id_duplicate": (3, 6, 7)}
    assert _note(logs.report, "event_id_duplicate") == (
        "event_id_duplicate: line 3: repeats EventId 'x0' of line 0; "
        r"line 6: repeats EventId '\x1b[2J\u202e" + "z" * 72 + "'... (105 characters) of line 5; "
        "line 7: repeats EventId 'x0' of line 0"
    )
    assert "\x1b" not in str(logs.report)  # shown escaped


def _held_bytes(obj, seen=None):
    """The bytes of the numpy arrays an object holds (through its attributes and containers)."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if isinstance(obj, dict):
        return sum(_held_bytes(v, seen) for v in obj.values())
    if isinstance(obj, (list, tuple, set)):
        return sum(_held_bytes(v, seen) for v in obj)
    if hasattr(obj, "__dict__") and type(obj).__module__.startswith("ope"):
        return _held_bytes(vars(obj), seen)
    return 0


def test_first_lines_of_repeats_cost_no_memory_beside_the_repeat_check(tmp_path):
    """Naming the first line of a repeat keeps nothing per id beyond the repeat check's own
    set of ids (the line rides in its hash key): read in chunks, 20,000 unique ids hold the
    bytes of that set alone, not 16 more per id; a repeat is still named with its first line."""
    from ope._dedup import SeenIds

    lines = [_cb_line(i) for i in range(20_000)] + [_cb_line(20_000, EventId="x123")]
    path = _write(tmp_path / "many.json", lines)
    validator = None
    for _, validator in iter_dsjson(path, on_invalid="drop", chunk_lines=4_000, workers=1):
        pass
    plain = SeenIds()  # the same ids without lines
    for k in range(0, 20_000, 4_000):
        plain.add_new(SeenIds.as_numpy(pa.array([f"x{i}" for i in range(k, k + 4_000)])))
    assert validator._seen.nbytes == plain.nbytes
    assert _held_bytes(validator) <= plain.nbytes + 4_096
    assert _note(validator.report, "event_id_duplicate") == (
        "event_id_duplicate: line 20000: repeats EventId 'x123' of line 123"
    )


def test_first_lines_are_exact_when_hashes_collide_and_unknown_past_the_key_bits(
    tmp_path, monkeypatch
):
    """Ids that share every hash bit are told apart by their bytes, so each repeat is named
    with its own first line; a first line beyond what the key keeps (monkeypatched to 3 bits,
    lines 0-6) is "an earlier line", never another id's line."""
    import ope._dedup as dedup

    real = dedup._hash_bytes
    monkeypatch.setattr(dedup, "_hash_bytes", lambda x: real(x) & np.uint64(3 << 40))
    lines = [_cb_line(i) for i in range(12)]
    lines += [_cb_line(12, EventId="x1"), _cb_line(13, EventId="x5"), _cb_line(14, EventId="x9")]
    path = _write(tmp_path / "h.json", lines)
    logs = _drop(path, chunk_lines=1)
    assert _note(logs.report, "event_id_duplicate") == (
        "event_id_duplicate: line 12: repeats EventId 'x1' of line 1; "
        "line 13: repeats EventId 'x5' of line 5; line 14: repeats EventId 'x9' of line 9"
    )
    monkeypatch.setattr(dedup, "_LINE_BITS", 3)
    logs = _drop(path, chunk_lines=1)
    assert _note(logs.report, "event_id_duplicate") == (
        "event_id_duplicate: line 12: repeats EventId 'x1' of line 1; "
        "line 13: repeats EventId 'x5' of line 5; line 14: repeats EventId 'x9' of an "
        "earlier line"
    )


def test_a_ccb_repeat_is_named_by_its_lines_event_id_once_per_line(tmp_path):
    """A CCB line's slot rows share its EventId: a repeated line is one note entry naming the
    file's EventId ('a', not the slot rows' 'a/0', 'a/1'), so five repeated lines are named."""
    multi = {"_multi": [{}, {}, {}]}

    def ccb(eid):
        return json.dumps(
            {"EventId": eid, "c": {**multi, "_slots": [{}, {}]},
             "_outcomes": [{"_label_cost": 0, "_a": [0], "_p": [0.5]},
                           {"_label_cost": 1, "_a": [1], "_p": [0.5]}]}
        )  # fmt: skip

    lines = [ccb("a"), ccb("b"), ccb("a"), ccb("b"), ccb("a"), ccb("a"), ccb("b"), ccb("c")]
    path = _write(tmp_path / "ccb.json", lines)
    for kw in ({}, {"chunk_lines": 1}):
        r = _drop(path, **kw).report
        assert r.rejected == {"event_id_duplicate": 10}
        assert _note(r, "event_id_duplicate") == (
            "event_id_duplicate: line 2: repeats EventId 'a' of line 0; "
            "line 3: repeats EventId 'b' of line 1; line 4: repeats EventId 'a' of line 0; "
            "line 5: repeats EventId 'a' of line 0; line 6: repeats EventId 'b' of line 1"
        )


def test_a_nan_propensity_is_rejected_with_a_note_saying_it_was_present(tmp_path):
    """ "NaN" as the propensity (a CCB `_p[0]`, a CB line's `_label_probability`) is read as
    VW reads it, rejected as propensity_missing, and the note says it was there, as NaN (an
    absent probability gets no such note)."""
    multi = {"_multi": [{}, {}, {}]}
    ccb = [
        {"EventId": "a", "c": {**multi, "_slots": [{}, {}]},
         "_outcomes": [{"_label_cost": 0, "_a": [0, 1], "_p": ["NaN", 0.5]},
                       {"_label_COST": 1, "_a": 1, "_p": "nan"}]},
        {"EventId": "b", "c": {**multi, "_slots": [{}]},
         "_outcomes": [{"_label_cost": 0, "_a": [2], "_p": [0.4]}]},
        {"EventId": "c", "_label_cost": 1, "_label_probability": "NaN", "_label_Action": 2,
         "c": multi},
    ]  # fmt: skip
    r = _drop(_write(tmp_path / "ccb.json", [json.dumps(x) for x in ccb])).report
    assert r.rejected == {"propensity_missing": 3}
    assert _note(r, "propensity_missing") == (
        "propensity_missing: line 0: `_outcomes[0]._p[0]` and `_outcomes[1]._p[0]` are "
        '"NaN" (VW reads it as NaN): the propensity is present, as NaN, which cannot weight a '
        "row; "
        'line 2: `_label_probability` is "NaN" (VW reads it as NaN): the propensity is '
        "present, as NaN, which cannot weight a row"
    )
    cb = [_cb_line(0), _cb_line(1, _label_probability="NaN"), _cb_line(2)]
    absent = json.loads(_cb_line(3))
    del absent["_label_probability"]
    r = _drop(_write(tmp_path / "cb.json", [*cb, json.dumps(absent)])).report
    assert r.rejected == {"propensity_missing": 2} and r.examples["propensity_missing"] == (1, 3)
    assert _note(r, "propensity_missing") == (
        'propensity_missing: line 1: `_label_probability` is "NaN" (VW reads it as NaN): the '
        "propensity is present, as NaN, which cannot weight a row"
    )


def test_ccb_counts_say_lines_read_and_slot_rows_and_add_up(tmp_path):
    """A CCB report's rows are slots: the note says how the lines read and the rows add up,
    and no slot is left out (slots after the last outcome, an empty `_outcomes`)."""
    multi = {"_multi": [{}, {}, {}]}
    lines = [
        # 3 slots, 1 outcome: slots 1 and 2 are unlabeled
        {"EventId": "a", "c": {**multi, "_slots": [{}, {}, {}]},
         "_outcomes": [{"_label_cost": -1, "_a": [0], "_p": [0.5]}]},
        {"EventId": "b", "c": {**multi, "_slots": [{}, {}]}, "_outcomes": []},  # 2 unlabeled
        {"EventId": "c", "c": multi, "_outcomes": []},  # no slot, no outcome: the line
        {"EventId": "d", "c": {**multi, "_slots": [{}]}, "_outcomes": [{}, {}]},  # malformed
        {"EventId": "e", "c": {**multi, "_slots": [{}, {}]},
         "_outcomes": [{"_label_cost": 0, "_a": 1, "_p": 0.5}, {"_label_cost": 1, "_a": [2], "_p": [2.0]}]},
    ]  # fmt: skip
    path = _write(tmp_path / "ccb.json", [json.dumps(x) for x in lines])
    for chunk_lines in (50_000, 2):
        r = _drop(path, chunk_lines=chunk_lines).report
        assert r.rejected == {
            "dsjson_unlabeled": 5,
            "dsjson_outcome_malformed": 1,
            "propensity_out_of_range": 1,
        }
        assert r.examples["dsjson_unlabeled"] == (0, 0, 1, 1, 2)
        assert (r.rows_read, r.rows_used) == (9, 2)  # 7 slot rows + 2 lines rejected whole
        assert _note(r, "CCB rows are slots") == (
            "CCB rows are slots: 5 lines read; 3 of them gave 7 slot rows (2 used, the rows "
            "`ope import` writes; 5 rejected: unlabeled or breaking a rule) and 2 were "
            "rejected whole, one row each: rows read = 7 + 2 = 9."
        )
        assert "line 3: 2 outcomes for 1 slot(s) in c._slots" in _note(r, "dsjson_outcome")


def test_bad_json_keeps_the_parsers_position(tmp_path):
    """dsjson_bad_json says where the parser stopped: a 1-based column (characters) and the
    byte offset, as the parser gives it; a lone surrogate and bytes that are not UTF-8 in a
    field ope reads are located too."""
    lines = [
        _cb_line(0),
        '{"EventId": "é€", "a": [1,, 2]}',  # column 27, byte 29 (3 bytes more in é€)
        _cb_line(2)[:40],  # truncated
        b'{"EventId": "ab\xff", "a": [1]}',
        '{"a": [1], "EventId": "\\ud800"}',  # msgspec says "Input data was truncated"
        _cb_line(5, p=[0.5, 0.5]).replace("[0.5, 0.5]", "[NaN, 0.5]"),
    ]
    logs = _drop(_write(tmp_path / "bad.json", lines))
    assert logs.report.examples == {"dsjson_bad_json": (1, 2, 3, 4, 5)}
    note = _note(logs.report, "dsjson_bad_json")
    assert "line 1: column 27 (byte 29): JSON is malformed: invalid character" in note
    assert "line 2: column 41 (byte 40): the line ends before its JSON value does" in note
    assert "line 3: column 16 (byte 15): bytes that are not UTF-8" in note
    assert "line 4: column 24 (byte 23): a lone surrogate escape" in note
    assert 'a bare NaN or Infinity is not JSON (VW refuses the line too): write "NaN"' in note
    with pytest.raises(ValidationError, match=r"line 1: column 27 \(byte 29\)"):
        read_dsjson(tmp_path / "bad.json")  # the error shows it too


def test_label_keys_match_in_any_case_after_the_label_prefix_as_vw(tmp_path):
    """VW compares `_label` exactly and the rest of a label key without regard to case
    (_label_COST, _labelINDEX, ...; in CCB outcomes too): so does ope, on the plain-CB path as
    on the line-by-line one; when two spellings are present the later wins (VW overwrites)."""
    other = _cb_line(1, _label_cost=-3.0, _labelIndex=1)
    other = other.replace('"_label_cost"', '"_label_COST"').replace(
        '"_labelIndex"', '"_labelINDEX"'
    )
    other = other.replace('"_label_probability"', '"_Label_probability": 0.9, "_label_PROBABILITY"')
    both = _cb_line(2).replace('"_label_cost": -0.0', '"_label_cost": -5.0, "_label_Cost": -7.0')
    wrong = _cb_line(3).replace('"_label_cost"', '"_LABEL_cost"')  # not a label key for VW
    path = _write(tmp_path / "case.json", [_cb_line(0), other, both, wrong, _cb_line(4)])
    for workers in (1, 2):
        logs = _drop(path, workers=workers)
        t = logs.table.to_pydict()
        assert t["event_id"] == ["x0", "x1", "x2", "x4"]
        assert t["reward"] == [-0.0, 3.0, 7.0, -0.0]
        assert t["action"] == [0, 1, 0, 0] and t["propensity"] == [0.5] * 4
        assert logs.report.rejected == {"reward_missing": 1}  # x3: no _label_cost at all
    ccb = json.loads((DATA / "ccb.json").read_text().splitlines()[0])
    ccb["_outcomes"][0] = {"_label_cOsT": -2, "_a": [2, 1], "_p": [0.7, 0.3]}
    cb_in_ccb = _cb_line(9, _label_Action=3, c={"_multi": [{}, {}, {}]}, a=[3, 1, 2])
    cb_in_ccb = cb_in_ccb.replace('"_label_Action"', '"_label_ACTION"')
    logs = read_dsjson(_write(tmp_path / "ccb.json", [json.dumps(ccb), cb_in_ccb]))
    t = logs.table.to_pydict()
    assert t["event_id"] == ["s0/0", "s0/1", "x9/0"]
    assert t["reward"][0] == 2.0 and t["action"][2] == 2


def test_label_keys_vw_refuses_reject_the_line_and_repeated_keys_keep_the_last(
    tmp_path, monkeypatch
):
    """After `_label_`, VW's LabelObjectState knows Cost, Probability, Action (and the simple
    label's Label, Initial, Weight: a number or "NaN"); any other property makes it refuse
    the line ("Unsupported label property"), at the top level and in `_outcomes`, where a
    `_labelX` key is refused too ("Unsupported key"). Of repeated keys (spellings or copies) the
    last wins, as VW reads the keys in order: `_label_Cost`, `_label_cost`, `_label_Cost`
    gives the last, and so does `_p`, `p`, `_p`."""

    def cb(i, **extra):
        return json.dumps({**json.loads(_cb_line(i)), **extra})

    repeated = _cb_line(5).replace(
        '"_label_cost": -1.0', '"_label_Cost": 5, "_label_cost": 2, "_label_Cost": 3'
    )
    p_last = _cb_line(6).replace(
        '"p": [0.5, 0.5]', '"_p": [0.5, 0.5], "p": [0.3, 0.7], "_p": [0.5, 0.5]'
    )
    lines = [
        _cb_line(0),
        cb(1, _label_foo=1),  # an unknown property
        cb(2, _label_Index=0),  # `_label_Index` is no `_labelIndex`
        cb(3, _label_Weight=2, _label_initial="NaN", _label_foo=None, _labelExtra=1),  # read
        cb(4, _label_weight="heavy"),  # the simple label's properties take numbers or "NaN"
        repeated,
        p_last,
        cb(7, _label_Cost={"Cost": 1}),  # a label object
    ]
    logs = _drop(_write(tmp_path / "keys.json", lines))
    r = logs.report
    assert r.rejected == {"dsjson_field_type": 4}
    assert r.examples["dsjson_field_type"] == (1, 2, 4, 7)
    note = _note(r, "dsjson_field_type")
    assert (
        "line 1: the key '_label_foo': VW refuses the line (\"Unsupported label property\"), "
        "its label properties after `_label_` being Cost, Probability, Action (and the simple "
        "label's Label, Initial, Weight), in any case" in note
    )
    assert "line 2: the key '_label_Index': VW refuses the line" in note
    assert "line 4: the key '_label_weight' holds 'heavy': VW takes a number or \"NaN\"" in note
    assert "line 7: the key '_label_Cost' holds an object" in note
    t = logs.table.to_pydict()
    assert t["event_id"] == ["x0", "x3", "x5", "x6"]
    assert t["reward"] == [-0.0, 1.0, -3.0, -0.0]
    assert t["logging_distribution"][3] == [0.5, 0.5]
    ccb = json.loads((DATA / "ccb.json").read_text().splitlines()[0])
    rows = []
    for k, outcome in enumerate(
        [
            [("_label_Cost", -2), ("_label_cost", 1), ("_label_Cost", 4)],  # 4: the last
            [("_label_foo", 1)],  # refused
            [("_labelFoo", 1)],  # refused in an outcome (ignored at the top level)
            [("_label_cost", 0), ("_labelIndex", 0), ("_label_probability", 0.3)],  # not used
        ]
    ):
        line = dict(ccb, EventId=f"s{k}")
        line["_outcomes"] = [dict(ccb["_outcomes"][0], _label_cost=0), ccb["_outcomes"][1]]
        text = json.dumps(line)
        pairs = ", ".join(f"{json.dumps(key)}: {v}" for key, v in outcome)
        rows.append(text.replace('"_label_cost": 0', pairs, 1))
    logs = _drop(_write(tmp_path / "ccb.json", rows))
    assert logs.report.rejected == {"dsjson_field_type": 2}
    assert logs.report.examples["dsjson_field_type"] == (1, 2)
    note = _note(logs.report, "dsjson_field_type")
    assert "line 1: the key '_label_foo' of _outcomes[0]: VW refuses the line" in note
    assert "line 2: the key '_labelFoo' of _outcomes[0] starts with _label but is" in note
    t = logs.table.to_pydict()
    assert t["event_id"] == ["s0/0", "s0/1", "s3/0", "s3/1"]
    assert t["reward"][0] == -4.0 and t["reward"][2] == -0.0
    # plain CB lines never walk their keys: the fast path stays as it was
    monkeypatch.setattr(dsjson_module, "_ordered_fields", lambda raw: pytest.fail("walked"))
    assert read_dsjson(_write(tmp_path / "plain.json", [_cb_line(i) for i in range(5)])).n == 5


def test_a_line_whose_key_order_matters_is_parsed_in_order_once(tmp_path, monkeypatch):
    """A line with a label key spelled otherwise and both `p` and `_p` is walked in its keys'
    order for both from one parse of the line (it was parsed in order once for each): the
    later spelling and the later of `p`/`_p` still win; a line with `_p` and `p` alone is
    parsed in order once too."""
    calls = []
    real = dsjson_module._ordered_fields
    monkeypatch.setattr(
        dsjson_module, "_ordered_fields", lambda raw: calls.append(raw) or real(raw)
    )
    both = (
        _cb_line(1)
        .replace('"_label_cost": -1.0', '"_label_cost": -1.0, "_label_COST": -4.0')
        .replace('"p": [0.5, 0.5]', '"p": [0.3, 0.7], "_p": [0.5, 0.5]')
    )
    p_last = _cb_line(2).replace('"p": [0.5, 0.5]', '"_p": [0.4, 0.6], "p": [0.5, 0.5]')
    logs = read_dsjson(_write(tmp_path / "o.json", [_cb_line(0), both, p_last]), workers=1)
    t = logs.table.to_pydict()
    assert t["event_id"] == ["x0", "x1", "x2"] and t["reward"] == [0.0, 4.0, 0.0]
    assert t["logging_distribution"] == [[0.5, 0.5]] * 3
    assert len(calls) == 2 and {bytes(c) for c in calls} == {both.encode(), p_last.encode()}


def test_nan_probabilities_get_a_precise_reason_not_a_type_error(tmp_path):
    """ "NaN" in `p`/`_p` (VW reads it as NaN) is no field-type error: a later `p` of a file
    with logging_distribution is dsjson_a_p_mismatch saying so; a first one leaves the file
    without it (the propensity stays _label_probability); a CCB `_p[0]` (the propensity) is
    propensity_missing. A bare NaN is not JSON (nor for VW): dsjson_bad_json, with a hint."""
    nan_p = _cb_line(1, p=["NaN", 0.5])
    logs = _drop(_write(tmp_path / "later.json", [_cb_line(0), nan_p, _cb_line(2)]))
    assert logs.report.rejected == {"dsjson_a_p_mismatch": 1}
    assert _note(logs.report, "dsjson_a_p_mismatch") == (
        'dsjson_a_p_mismatch: line 1: `p` holds "NaN" (VW reads it as NaN): a probability '
        "that is NaN cannot weight a row, so `p` is no distribution"
    )
    logs = read_dsjson(_write(tmp_path / "first.json", [nan_p, _cb_line(2)]))
    assert logs.n == 2 and "logging_distribution" not in logs.table.column_names
    assert logs.column("propensity").tolist() == [0.5, 0.5]
    assert logs.report.notes[0].startswith("`p` not kept as logging_distribution")
    logs = _drop(_write(tmp_path / "text.json", [_cb_line(0), _cb_line(1, p=["x", 0.5])]))
    assert logs.report.rejected == {"dsjson_field_type": 1}
    assert "`p` holds the string 'x'" in _note(logs.report, "dsjson_field_type")
    ccb = json.loads((DATA / "ccb.json").read_text().splitlines()[0])
    ccb["_outcomes"][1]["_p"] = ["nan", 0.5]
    ccb["_outcomes"][1]["_a"] = [1, 0]
    logs = _drop(_write(tmp_path / "ccb.json", [json.dumps(ccb)]))
    assert logs.report.rejected == {"propensity_missing": 1}
    assert logs.column("event_id").tolist() == ["s0/0"]


def _ca_line(i, **extra):
    obj = {
        "_label_ca": {"action": 1.0 + i % 7, "cost": -0.5 * (i % 3), "pdf_value": 0.1},
        "EventId": f"c{i}",
        "c": {"f": i % 3},
    }
    obj.update(extra)
    return json.dumps(obj)


def test_nan_pdf_value_is_an_invalid_density_with_a_precise_note(tmp_path):
    import ope

    lines = [_ca_line(i) for i in range(6)]
    lines[2] = lines[2].replace('"pdf_value": 0.1', '"pdf_value": "NaN"')
    lines[4] = lines[4].replace('"pdf_value": 0.1', '"pdf_value": "dense"')
    lines[5] = lines[5].replace('"pdf_value": 0.1', '"pdf_value": NaN')
    path = _write(tmp_path / "ca.json", lines + [_ca_line(i) for i in range(6, 9)])
    with pytest.warns(DroppedRowsWarning):
        logs = ope.read_continuous(path, on_invalid="drop")
    assert logs.report.rejected == {
        "cats_pdf_value_invalid": 1,
        "dsjson_field_type": 1,
        "dsjson_bad_json": 1,
    }
    assert logs.report.examples["cats_pdf_value_invalid"] == (2,)
    note = _note(logs.report, "cats_pdf_value_invalid")
    assert note == (
        'cats_pdf_value_invalid: _label_ca.pdf_value is "NaN" on 1 line(s) (first: 2): VW\'s '
        "JSON parser reads it as NaN, and a density that is NaN cannot weight a row, so these "
        "lines are rejected."
    )
    assert note in logs.notes and not np.isnan(logs.density).any()
    with pytest.raises(ValidationError, match='pdf_value is "NaN" on 1 line'):
        ope.read_continuous(path)


def test_continuous_features_at_the_top_level_are_read_or_noted(tmp_path, monkeypatch):
    """A file in VW's plain JSON form (`vw --json`: its first line with a key not starting with
    `_` has no `c` and no DSJSON field) keeps its features at the top level: every key not
    starting with `_` is a feature there, in its later lines those named as DSJSON fields too:
    `pdrop` is no drop probability, a numeric `pdf` no segments (the line is read, not
    refused), `EventId` no id. In a DSJSON file the top-level keys that are not DSJSON fields
    are not read (VW's --dsjson ignores them), a line in the plain JSON form included, and the
    report says so; the form is the file's, whatever the chunks it is read in."""
    import ope
    from ope import continuous

    label = {"_label_ca": {"action": 1.0, "cost": -0.5, "pdf_value": 0.1}}
    plain = [json.dumps({**label, "f": 0, "room": "den", "_skip_me": 5})]
    for i in range(1, 4):
        dsjson_names = {"EventId": "same", "Version": "1", "pdrop": 0.5, "pdf": 3 + i}
        plain.append(
            json.dumps({**label, **dsjson_names, "f": i % 3, "room": "hall" if i % 2 else "den"})
        )
    plain_logs = logs = ope.read_continuous(_write(tmp_path / "plain.json", plain))
    assert logs.n == 4 and logs.weight is None and logs.support is None
    assert logs.context.to_dict("list") == {
        "c.EventId=same": [0.0, 1.0, 1.0, 1.0],
        "c.Version=1": [0.0, 1.0, 1.0, 1.0],
        "c.f": [0.0, 1.0, 2.0, 0.0],
        "c.pdf": [0.0, 4.0, 5.0, 6.0],
        "c.pdrop": [0.0, 0.5, 0.5, 0.5],
        "c.room=den": [1.0, 0.0, 1.0, 0.0],
        "c.room=hall": [0.0, 1.0, 0.0, 1.0],
    }
    assert _note(logs.report, "4 line(s) keep their features at the top level") == (
        "4 line(s) keep their features at the top level (VW's plain JSON form, read by `vw "
        "--json`; first: line 0): read as the context, as VW reads them: every key not starting "
        "with `_` is a feature. The file's form is that of its line 0, the first with a key not "
        "starting with `_` ('f', 'room'), without `c` or a DSJSON field."
    )
    note = _note(logs.report, "3 of them have keys that make a DSJSON line")
    assert "(line 1: 'EventId', 'Version', 'pdrop', 'pdf'; line 2: " in note
    assert "no drop probability, pdf segments or EventId is read from such a line" in note
    # numeric features named "18-25", "4", "C" at the top level, and `a`, `p`, `o` (DSJSON's
    # fields of other kinds): features in the plain JSON form too
    vw = {"_label_ca": {"cost": 0.657567, "pdf_value": 6.20426e-05, "action": 185.121},
          "18-25": 1, "4": 1, "C": 1, "a": [1, 2], "p": 0.25, "o": {"v": 2}}  # fmt: skip
    logs = ope.read_continuous(_write(tmp_path / "vw.json", [json.dumps(vw)] * 2))
    assert list(logs.context.columns) == [
        "c.18-25", "c.4", "c.C", "c.a[0]", "c.a[1]", "c.o.v", "c.p",
    ]  # fmt: skip
    # a number beyond a double's range there, a label of another type, are that line's
    # fault, not a crash
    huge = vw | {"x": 1}
    text = json.dumps(huge).replace('"x": 1', '"x": 1e999')
    bad_label = json.dumps({"x": 2, "_label_ca": vw["_label_ca"] | {"action": "3"}})
    with pytest.warns(DroppedRowsWarning):
        logs = ope.read_continuous(
            _write(tmp_path / "huge.json", [json.dumps(vw)] * 2 + [text, bad_label]),
            on_invalid="drop",
        )
    assert logs.report.rejected == {"dsjson_field_type": 2}
    assert logs.report.examples["dsjson_field_type"] == (2, 3)
    assert _note(logs.report, "3 line(s) keep their features at the top level")
    mixed = [
        _ca_line(0, g=1.5),
        _ca_line(1),
        _ca_line(2, g=2, h={"x": 1}),
        _ca_line(3, c=None),
        json.dumps({**label, "g": 3}),  # the plain JSON form, in a DSJSON file
        json.dumps({**label, "EventId": "c5", "pdrop": 0.5, "g": 4}),  # DSJSON, without `c`
    ]
    logs = ope.read_continuous(_write(tmp_path / "mixed.json", mixed))
    assert list(logs.context.columns) == ["c.f"]
    np.testing.assert_array_equal(logs.weight, [1.0, 1.0, 1.0, 1.0, 1.0, 2.0])
    assert _note(logs.report, "4 line(s) have top-level keys that are not DSJSON fields") == (
        "4 line(s) have top-level keys that are not DSJSON fields, not read as features (line "
        "0: 'g'; line 2: 'g', 'h'; line 4: 'g'; line 5: 'g'): VW's --dsjson ignores them (only "
        "`c` holds features there), though `vw --json` would read them. Move them under `c` to "
        "have them read."
    )
    assert _note(logs.report, "1 line(s) are in VW's plain JSON form") == (
        "1 line(s) are in VW's plain JSON form, with top-level keys and neither `c` nor a "
        "DSJSON field (line 4: 'g'): read as `vw --dsjson` reads them, without features, since "
        "the file is DSJSON: its form is that of its line 0, the first with a key not starting "
        "with `_` ('c', 'EventId'). A file is read in the plain JSON form (`vw --json`) when "
        "that line is."
    )
    assert logs.report.notes[0] in logs.notes
    ids = logs.table.column("event_id").to_pylist()
    assert ids[3] == "c3" and ids[4] == "mixed.json:4" and ids[5] == "c5"
    for size in (1, 2):
        monkeypatch.setattr(continuous, "_CATS_CHUNK_LINES", size)
        for name, whole in (("plain.json", plain_logs), ("mixed.json", logs)):
            part = ope.read_continuous(tmp_path / name)
            assert part.table.equals(whole.table) and part.notes == whole.notes, (name, size)


def test_bytes_that_are_not_utf8_in_c_are_noted_and_kept(tmp_path):
    """VW does not check the encoding of the features it hashes: the row is kept (its label
    fields are intact) and the report says which lines and where; features_json shows the
    bytes as U+FFFD instead of failing."""
    bad = _cb_line(1).encode().replace(b'"k": 2', b'"k\xff\xfe": 2')
    elsewhere = _cb_line(2, VWState={"m": "x"}).encode().replace(b'"x"', b'"\xc3("')
    path = _write(tmp_path / "u.json", [_cb_line(0), bad, elsewhere, b'{"EventId": "\xff"}'])
    for kw in ({}, {"chunk_lines": 1}, {"features": True}):
        logs = _drop(path, **kw)
        assert logs.column("event_id").tolist() == ["x0", "x1", "x2"]
        assert logs.report.rejected == {"dsjson_bad_json": 1}  # \xff in EventId, read by ope
        note = _note(logs.report, "2 line(s) read into rows")
        assert "line 1, column 180 (byte 179), in the features under `c`" in note
        assert "line 2, column 207 (byte 206), in a field ope does not read" in note
    c = json.loads(logs.table.column("features_json")[1].as_py())
    assert c["_multi"][1] == {"k\ufffd\ufffd": 2}


def test_too_many_context_features_says_how_many_it_found(tmp_path, monkeypatch):
    import ope
    from ope import continuous

    lines = [
        json.dumps({"_label_ca": {"action": 1.0, "cost": 0.0, "pdf_value": 0.5},
                    "c": {"u": f"user{i}", "x": i}})
        for i in range(2500)
    ]  # fmt: skip
    path = _write(tmp_path / "wide.json", lines)
    with pytest.raises(DataFileError) as info:
        ope.read_continuous(path)
    msg = str(info.value)
    assert "its 2,500 lines flatten to 2,501 distinct features (2,500 of them string" in msg
    assert "at most 2,000 are read (ope.continuous.MAX_DSJSON_FEATURES" in msg
    assert "parquet or CSV table" in msg
    monkeypatch.setattr(continuous, "_CATS_CHUNK_LINES", 2100)  # the count stops early
    with pytest.raises(DataFileError) as info:
        ope.read_continuous(path)
    assert (
        "its first 2,100 lines (to line 2099, where reading stopped) flatten to 2,101 "
        "distinct features, so the file has at least as many"
    ) in str(info.value)


def test_values_of_the_source_are_shown_and_nan_read_one_way_in_both_readers(tmp_path, monkeypatch):
    """One helper quotes the source's ids, keys and values in the DSJSON and CATS notes and
    messages (escaped, cut with their length said), and one rule says which strings VW reads
    as NaN, for a label's numbers, `p` and a density alike."""
    import ope
    from ope import continuous
    from ope._validation import show_value
    from ope.importers._common import NOT_A_NUMBER, vw_number

    long_key = "\x1b" + "k" * 200
    lines = [_ca_line(i, **{long_key: 1}) for i in range(2)]
    logs = ope.read_continuous(_write(tmp_path / "k.json", lines))
    note = _note(logs.report, "2 line(s) have top-level keys that are not DSJSON fields")
    assert f"line 0: {show_value(long_key)};" in note and "(201 characters)" in note
    assert "\x1b" not in note and "k" * 100 not in note
    monkeypatch.setattr(continuous, "MAX_DSJSON_FEATURES", 1)
    wide = [_ca_line(i, c={long_key: 1, "f": 2}) for i in range(2)]
    with pytest.raises(DataFileError) as info:
        ope.read_continuous(_write(tmp_path / "w.json", wide))
    assert f"e.g. {show_value(long_key)}, 'f';" in str(info.value)
    assert all(math.isnan(vw_number(x)) for x in ("NaN", "nan", "NAN", "nAn"))
    assert all(vw_number(x) is NOT_A_NUMBER for x in (" NaN", "NaN ", "inf", "", "na", "NaＮ"))
    assert [vw_number(x) for x in (0.5, None, [1])] == [0.5, None, [1]]  # not strings: as is
    cb = [_cb_line(0), _cb_line(1, _label_cost="nAn"), _cb_line(2, _label_cost="NaN ")]
    r = _drop(_write(tmp_path / "cb.json", cb)).report
    assert r.rejected == {"reward_missing": 1, "dsjson_cost_not_numeric": 1}
    ca = [_ca_line(i) for i in range(4)]
    ca[1] = ca[1].replace('"pdf_value": 0.1', '"pdf_value": "nAn"')
    ca[2] = ca[2].replace('"pdf_value": 0.1', '"pdf_value": "NaN "')
    with pytest.warns(DroppedRowsWarning):
        r = ope.read_continuous(_write(tmp_path / "ca.json", ca), on_invalid="drop").report
    assert r.rejected == {"cats_pdf_value_invalid": 1, "dsjson_field_type": 1}


def test_a_nan_cost_is_rejected_with_a_note_saying_it_was_present(tmp_path):
    """ "NaN" as the cost (a CB line's `_label_cost`, a CCB outcome's) is read as VW reads it,
    rejected as reward_missing, and the note says it was there, as NaN (an absent cost with a
    probability gets no such note), as for a "NaN" propensity."""
    cb = [_cb_line(0), _cb_line(1, _label_cost="NaN"), _cb_line(2), _cb_line(3, _label_cost="nan")]
    absent = json.loads(_cb_line(4))
    del absent["_label_cost"]
    r = _drop(_write(tmp_path / "cb.json", [*cb, json.dumps(absent)])).report
    assert r.rejected == {"reward_missing": 3} and r.examples["reward_missing"] == (1, 3, 4)
    assert _note(r, "reward_missing") == (
        'reward_missing: line 1: `_label_cost` is "NaN" (VW reads it as NaN): the cost is '
        "present, as NaN, which gives no reward (reward = -cost); "
        'line 3: `_label_cost` is "NaN" (VW reads it as NaN): the cost is present, as NaN, '
        "which gives no reward (reward = -cost)"
    )
    multi = {"_multi": [{}, {}, {}]}
    ccb = [
        {"EventId": "a", "c": {**multi, "_slots": [{}, {}]},
         "_outcomes": [{"_label_cost": "NaN", "_a": [0], "_p": [0.5]},
                       {"_label_cost": 1, "_a": 1, "_p": 0.5}]},
    ]  # fmt: skip
    r = _drop(_write(tmp_path / "ccb.json", [json.dumps(x) for x in ccb])).report
    assert r.rejected == {"reward_missing": 1}
    assert _note(r, "reward_missing").startswith(
        'reward_missing: line 0: `_outcomes[0]._label_cost` is "NaN" (VW reads it as NaN)'
    )


@pytest.mark.parametrize("kw", [{}, {"chunk_lines": 1}])
def test_a_label_key_under_c_rejects_the_line_with_a_note(tmp_path, kw):
    """VW reads a key starting with `_label` under `c` (in a namespace, an action of `_multi`)
    as the line's label, or refuses the line: ope, which reads the label at the top level,
    rejects such a line and says where the key is: VW's label keys at `c`'s top level on a
    plain CB line, any such key anywhere on a line read key by key. The same text as a string
    value keeps the row, and so does (documented) a key in an action or a namespace of a plain
    CB line, which is not looked for there."""
    at_c = json.loads(_cb_line(1))
    at_c["c"]["_label_probability"] = 0.2
    spelled = json.loads(_cb_line(2))  # read key by key: searched whole
    spelled["_label_COST"] = spelled.pop("_label_cost")
    spelled["c"]["u"]["_label_cost"] = 5
    in_multi = json.loads(_cb_line(3))  # read key by key (a string label): searched whole
    in_multi["_label_cost"] = "0"
    in_multi["c"]["_multi"][1]["_labelIndex"] = 1
    quoted = json.loads(_cb_line(4))
    quoted["c"]["u"]["name"] = '"_label_cost'
    deep = json.loads(_cb_line(5))  # a plain CB line: its namespaces are not looked into
    deep["c"]["u"]["_label_cost"] = 5
    lines = [_cb_line(0), json.dumps(at_c), json.dumps(spelled), json.dumps(in_multi)]
    lines += [json.dumps(quoted), json.dumps(deep), _cb_line(6)]
    logs = _drop(_write(tmp_path / "cb.json", lines), **kw)
    r = logs.report
    assert r.rejected == {"dsjson_field_type": 3} and r.examples["dsjson_field_type"] == (1, 2, 3)
    assert logs.table.num_rows == 4
    note = _note(r, "dsjson_field_type")
    assert note.startswith(
        "dsjson_field_type: line 1: the key `c._label_probability` under `c`: VW reads a key "
        "starting with `_label` as the line's label wherever it is (or refuses the line), and "
        "ope reads the label only at the top level, so the line is rejected. Move the label to "
        "the top level, or rename the feature; line 2: the key `c.u._label_cost` "
    )
    assert "line 3: the key `c._multi[1]._labelIndex` under `c`" in note


def _read_ca(path):
    """``read_continuous(path, on_invalid="drop")``; the rows dropped (if any) are what the
    tests check, so its DroppedRowsWarning is not."""
    import ope

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DroppedRowsWarning)
        return ope.read_continuous(path, on_invalid="drop")


def test_a_nan_cost_of_a_continuous_label_is_a_missing_reward_with_a_note(tmp_path):
    """`_label_ca.cost: "NaN"` reads as NaN, as VW's label object reads it (it took the line
    for a field of another type), and is rejected as reward_missing with a note; another
    string is still refused, as VW refuses it."""
    lines = [_ca_line(i) for i in range(8)]
    lines[1] = lines[1].replace('"cost": -0.5', '"cost": "NaN"')
    lines[3] = lines[3].replace('"cost": -0.0', '"cost": "cheap"')
    logs = _read_ca(_write(tmp_path / "ca.json", lines))
    assert logs.report.rejected == {"reward_missing": 1, "dsjson_field_type": 1}
    assert logs.report.examples["reward_missing"] == (1,)
    assert _note(logs.report, "reward_missing") == (
        'reward_missing: _label_ca.cost is "NaN" on 1 line(s) (first: 1): VW\'s JSON parser '
        "reads it as NaN, and a cost that is NaN gives no reward (reward = -cost), so these "
        "lines are rejected."
    )
    assert not np.isnan(logs.reward).any()


def test_continuous_label_objects_are_read_as_vw_reads_them(tmp_path):
    """VW reads every key `_label_ca...` as the continuous label object, its properties in any
    case, a property left out as 0 (noted), the simple label's accepted and unread; it refuses
    another property, and reads `Probability` as another kind's label (rejected here)."""
    label = {"action": 2.0, "cost": -1.0, "pdf_value": 0.1}
    lines = [_ca_line(i) for i in range(6)]
    lines[0] = json.dumps({"_label_ca": {"Action": 2.0, "COST": -1.0, "Pdf_Value": 0.1}})
    lines[1] = json.dumps({"_label_cats": label, "c": {"f": 1}})
    lines[2] = json.dumps({"_label_ca": {**label, "Weight": 2, "label": "NaN"}, "c": {"f": 1}})
    lines[3] = json.dumps({"_label_ca": {"action": 2.0, "pdf_value": 0.1}, "c": {"f": 1}})
    lines[4] = json.dumps({"_label_ca": {**label, "size": 1}, "c": {"f": 1}})
    lines[5] = json.dumps({"_label_ca": {**label, "Probability": 0.5}, "c": {"f": 1}})
    logs = _read_ca(_write(tmp_path / "ca.json", lines + [_ca_line(i) for i in range(6, 9)]))
    assert logs.report.rejected == {"dsjson_field_type": 2}
    assert logs.report.examples["dsjson_field_type"] == (4, 5)
    assert logs.n == 7
    np.testing.assert_array_equal(logs.reward[:4], [1.0, 1.0, 1.0, 0.0])
    np.testing.assert_array_equal(logs.action[:4], [2.0, 2.0, 2.0, 2.0])
    assert _note(logs.report, "1 line(s) have a `_label_ca` without") == (
        "1 line(s) have a `_label_ca` without its action, cost or pdf_value (first: 3): read "
        "as 0, as VW reads them (a pdf_value of 0 is then cats_pdf_value_invalid). Write all "
        "three."
    )


@pytest.mark.parametrize("plain", [False, True])
def test_a_label_key_in_a_continuous_lines_context_rejects_it_with_a_note(tmp_path, plain):
    """VW reads `_label...` keys under `c` (or in a namespace of VW's plain JSON form) as the
    line's label, or refuses the line: ope rejects the line and names the keys, also when it
    has no label at the top level."""

    def line(i, **c):
        label = {"action": 1.0 + i, "cost": -0.5, "pdf_value": 0.1}
        return json.dumps({"_label_ca": label, "ns": {"f": i, **c}} if plain else
                          {"_label_ca": label, "c": {"f": i, **c}})  # fmt: skip

    lines = [line(i) for i in range(6)]
    lines[2] = line(2, _label_ca={"action": 9.0, "cost": -9.0, "pdf_value": 0.1})
    unlabeled = json.loads(line(4, _label_cost=1))
    del unlabeled["_label_ca"]
    lines[4] = json.dumps(unlabeled)
    logs = _read_ca(_write(tmp_path / "ca.json", lines))
    assert logs.report.rejected == {"dsjson_field_type": 2}
    assert logs.report.examples["dsjson_field_type"] == (2, 4)
    where = "ns" if plain else "c"
    assert _note(logs.report, "dsjson_field_type: 2 line") == (
        "dsjson_field_type: 2 line(s) have keys starting with `_label` under `c` or in a "
        f"namespace (line 2: '{where}._label_ca'; line 4: '{where}._label_cost'): VW reads "
        "such a key as the line's label wherever it is (or refuses the line), and ope reads the "
        "label only at the top level, so these lines are rejected. Move the label to the top "
        "level, or rename the feature."
    )


def test_skip_learn_is_read_in_the_plain_json_form_as_vw_json_reads_it(tmp_path, monkeypatch):
    """`vw --json` ignores `_skipLearn` (only VW's DSJSON reader skips such lines): in a file
    of VW's plain JSON form the line is read, and noted, also when it comes before the line
    that sets the form, in an earlier chunk; in a DSJSON file it stays excluded."""
    import ope.continuous as continuous

    monkeypatch.setattr(continuous, "_CATS_CHUNK_LINES", 2)
    label = {"action": 1.0, "cost": -0.5, "pdf_value": 0.1}
    first = json.dumps({"_label_ca": label, "_skipLearn": True})  # no key that tells the form
    plain = [json.dumps({"_label_ca": {**label, "action": 1.0 + i}, "f": i}) for i in range(5)]
    plain[3] = json.dumps({"_label_ca": label, "f": 3, "_skipLearn": "yes"})
    logs = _read_ca(_write(tmp_path / "plain.json", [first, first, *plain]))
    assert logs.n == 7 and logs.report.rejected == {}
    assert _note(logs.report, "2 line(s) have `_skipLearn: true`") == (
        "2 line(s) have `_skipLearn: true` (first: 0, 1) and are read, as `vw --json` reads "
        "them: only VW's DSJSON reader skips such lines, and the file is in the plain JSON "
        "form, that of its line 2, the first with a key not starting with `_` ('f')."
    )
    dsjson = [_ca_line(i) for i in range(5)]
    logs = _read_ca(_write(tmp_path / "ds.json", [first, *dsjson]))
    assert logs.report.rejected == {"dsjson_skip_learn": 1} and logs.n == 5
