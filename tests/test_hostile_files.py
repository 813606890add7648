"""Directories and special files: links, FIFOs, sockets, devices, URIs, empty and long paths.

The one input policy (``ope.io.locate_input``) is checked from every entry point that takes a
path: ``read_logs``, ``scan_logs``, ``read_trajectories``, policy tables, the importers and the
CLI. Every read that could block (a FIFO) runs under a timeout, so a regression fails the test
instead of hanging the suite.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import types
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

import ope
import ope._paths
import ope.io
from ope.exceptions import DataFileError, ParameterError
from ope.importers import read_dsjson, read_obd
from ope.io import locate_input, read_logs, read_trajectories, scan_logs
from ope.policies import read_policy_table, target_propensities

N = 8
TIMEOUT = 20.0  # seconds; every read here takes well under one

needs_symlink = pytest.mark.skipif(not hasattr(os, "symlink"), reason="no os.symlink")
needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no os.mkfifo")


def bandit(start: int = 0, n: int = N) -> pa.Table:
    return pa.table(
        {
            "event_id": np.arange(start, start + n),
            "action": np.arange(n) % 2,
            "propensity": np.full(n, 0.5),
            "reward": (np.arange(n) % 3 == 0).astype(np.float64),
            "target__new": np.full(n, 0.5),
        }
    )


def within_timeout(fn: Callable[[], Any], *, fifos: tuple[Path, ...] = ()) -> Any:
    """Run ``fn`` in a thread; fail (never hang) when it has not returned after TIMEOUT.

    On a timeout, each FIFO in ``fifos`` is opened for writing once so that a reader blocked
    in ``open`` wakes up and the thread can end.
    """
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:  # re-raised in the test's thread below
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(TIMEOUT)
    if thread.is_alive():
        for fifo in fifos:
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
        pytest.fail(f"the read did not return within {TIMEOUT:g} s (it blocked)")
    if "error" in out:
        raise out["error"]
    return out.get("value")


def logs_dir(tmp_path: Path, parts: int = 2) -> Path:
    d = tmp_path / "logs"
    d.mkdir()
    for i in range(parts):
        pq.write_table(bandit(start=100 * i), d / f"part-{i}.parquet")
    return d


# --------------------------------------------------------------------------------------------
# symbolic and hard links: followed, never into something already read
# --------------------------------------------------------------------------------------------


@needs_symlink
def test_a_link_to_the_directory_itself_adds_nothing_and_is_named(tmp_path: Path) -> None:
    d = logs_dir(tmp_path)
    os.symlink(d, d / "self")
    logs = read_logs(d)
    assert logs.n == 2 * N and logs.report.rows_read == 2 * N  # was 328 rows before
    assert logs.report.files_read == 2
    (entry,) = logs.report.skipped
    assert entry.path == str(d / "self") and entry.reason == "already_read"
    assert "a folder already read" in entry.detail
    text = str(logs.report)
    assert f"not read:      {d / 'self'} (a link to {d}, a folder already read)" in text
    assert logs.report.to_dict()["files_skipped"] == [entry.to_dict()]
    assert any("not read" in note for note in logs.report.dropped_notes())


@needs_symlink
def test_a_link_to_a_partition_is_read_once_under_its_real_path(tmp_path: Path) -> None:
    d = tmp_path / "logs"
    for day in (1, 2):
        (d / f"day={day}").mkdir(parents=True)
        pq.write_table(bandit(start=100 * day), d / f"day={day}" / "part.parquet")
    os.symlink(d / "day=2", d / "day=9")  # "latest" pointing at a partition: sorts last
    os.symlink(d / "day=1", d / "a-latest")  # sorts first: the real path still wins
    logs = read_logs(d)
    assert logs.n == 2 * N
    assert sorted(set(logs.column("day").tolist())) == [1, 2]  # no rows labelled day=9
    assert sorted(s.path for s in logs.report.skipped) == [str(d / "a-latest"), str(d / "day=9")]
    assert {s.reason for s in logs.report.skipped} == {"already_read"}


@needs_symlink
def test_a_link_to_a_file_already_listed_is_skipped(tmp_path: Path) -> None:
    d = logs_dir(tmp_path, parts=1)
    os.symlink(d / "part-0.parquet", d / "copy.parquet")
    logs = read_logs(d)
    assert logs.n == N
    (entry,) = logs.report.skipped
    assert entry.reason == "already_read"
    assert (
        entry.detail == f"a link to {d / 'part-0.parquet'}, the same file as {d / 'part-0.parquet'}"
    )


def test_a_hard_link_is_the_same_file(tmp_path: Path) -> None:
    d = logs_dir(tmp_path, parts=1)
    try:
        os.link(d / "part-0.parquet", d / "part-1.parquet")
    except OSError:
        pytest.skip("no hard links on this filesystem")
    logs = read_logs(d)
    assert logs.n == N
    assert [s.reason for s in logs.report.skipped] == ["already_read"]


@needs_symlink
def test_a_link_to_a_folder_elsewhere_is_followed_once(tmp_path: Path) -> None:
    d = logs_dir(tmp_path, parts=1)
    elsewhere = tmp_path / "archive"
    elsewhere.mkdir()
    pq.write_table(bandit(start=500), elsewhere / "old.parquet")
    os.symlink(elsewhere, d / "archive")
    os.symlink(elsewhere, d / "archive-again")
    logs = read_logs(d)
    assert logs.n == 2 * N
    assert sorted(logs.column("event_id").tolist()) == list(range(N)) + list(range(500, 500 + N))
    assert [s.path for s in logs.report.skipped] == [str(d / "archive-again")]


@needs_symlink
def test_dangling_link_and_link_loop_are_errors_naming_the_link(tmp_path: Path) -> None:
    d = logs_dir(tmp_path, parts=1)
    os.symlink(tmp_path / "gone", d / "day=3")
    with pytest.raises(
        DataFileError,
        match=r"day=3 is a symbolic link to .*gone, which does "
        r"not exist \(a dangling link\)",
    ):
        read_logs(d)
    os.remove(d / "day=3")
    os.symlink(d / "loop-b", d / "loop-a")
    os.symlink(d / "loop-a", d / "loop-b")
    with pytest.raises(DataFileError, match=r"loop-a is a loop of symbolic links \(ELOOP\)"):
        read_logs(d)
    with pytest.raises(DataFileError, match=r"loop-a is a loop of symbolic links"):
        read_logs(d / "loop-a")


@needs_symlink
def test_scan_and_read_agree_on_a_linked_directory(tmp_path: Path) -> None:
    d = logs_dir(tmp_path)
    os.symlink(d, d / "self")
    eager = read_logs(d)
    scan = scan_logs(d, batch_size=3)
    assert sum(b.n for b in scan) == eager.n
    assert scan.report == eager.report
    assert scan.report.skipped == eager.report.skipped and scan.report.files_read == 2


# --------------------------------------------------------------------------------------------
# FIFOs, sockets and devices
# --------------------------------------------------------------------------------------------


@needs_fifo
def test_a_fifo_given_as_the_file_is_refused_without_opening_it(tmp_path: Path) -> None:
    fifo = tmp_path / "logs.parquet"
    os.mkfifo(fifo)
    for reader in (read_logs, scan_logs, read_trajectories):
        with pytest.raises(
            DataFileError,
            match=r"logs\.parquet is a FIFO \(named pipe\), not a "
            r"regular file",
        ):
            within_timeout(lambda: reader(fifo), fifos=(fifo,))


@needs_fifo
def test_a_fifo_inside_a_directory_is_skipped_and_named(tmp_path: Path) -> None:
    d = logs_dir(tmp_path, parts=1)
    os.mkfifo(d / "stream.parquet")
    logs = within_timeout(lambda: read_logs(d), fifos=(d / "stream.parquet",))
    assert logs.n == N
    assert [(s.path, s.reason, s.detail) for s in logs.report.skipped] == [
        (str(d / "stream.parquet"), "not_regular_file", "a FIFO (named pipe)")
    ]


@needs_fifo
def test_a_directory_holding_only_a_fifo_says_so(tmp_path: Path) -> None:
    d = tmp_path / "logs"
    d.mkdir()
    os.mkfifo(d / "part-0.parquet")
    with pytest.raises(
        DataFileError,
        match=r"directory without parquet files .*skipped: "
        r".*part-0\.parquet \(a FIFO \(named pipe\)\)",
    ):
        within_timeout(lambda: read_logs(d), fifos=(d / "part-0.parquet",))


@pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="no unix sockets")
def test_a_socket_inside_a_directory_is_skipped(tmp_path: Path) -> None:
    # unix socket paths are limited to ~100 bytes: under /tmp, however deep pytest's folder is
    short = Path(tempfile.mkdtemp(prefix="ope-", dir="/tmp" if os.path.isdir("/tmp") else None))
    try:
        d = logs_dir(short, parts=1)
        path = d / "s"
        if len(str(path)) > 100:
            pytest.skip("no temporary directory short enough for a unix socket")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.bind(str(path))
            logs = within_timeout(lambda: read_logs(d))
    finally:
        shutil.rmtree(short, ignore_errors=True)
    assert [(s.reason, s.detail) for s in logs.report.skipped] == [("not_regular_file", "a socket")]


@pytest.mark.skipif(not os.path.exists("/dev/null"), reason="no /dev/null")
def test_a_device_is_not_an_empty_parquet_file() -> None:
    with pytest.raises(DataFileError, match=r"/dev/null is a character device, not a regular file"):
        within_timeout(lambda: read_logs("/dev/null"))


@needs_fifo
def test_the_cli_refuses_a_fifo_with_exit_65_instead_of_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "logs.parquet"
    os.mkfifo(fifo)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "ope", "validate", str(fifo)],
            capture_output=True,
            text=True,
            timeout=TIMEOUT * 3,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("ope validate blocked on a FIFO")
    assert done.returncode == 65
    assert "is a FIFO (named pipe), not a regular file" in done.stdout + done.stderr


# --------------------------------------------------------------------------------------------
# empty, malformed and over-long paths
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["", "   "])
def test_an_empty_path_is_a_parameter_error_not_the_current_directory(path: str) -> None:
    logs = read_logs(bandit())
    calls = [
        read_logs,
        scan_logs,
        read_trajectories,
        read_policy_table,
        read_dsjson,
        read_obd,
        lambda p: target_propensities(logs, p),
    ]
    for call in calls:
        with pytest.raises(
            ParameterError, match=r"path is empty; give a file, a directory or a URI"
        ):
            call(path)


def test_a_nul_character_is_a_parameter_error() -> None:
    with pytest.raises(ParameterError, match=r"contains a NUL character"):
        read_logs("logs\x00.parquet")


@pytest.mark.parametrize(
    "make",
    [
        lambda tmp: "a" * 5000,
        lambda tmp: str(tmp / ("b" * 300)),
        lambda tmp: str(tmp / "/".join(["c" * 200] * 30)),
    ],
    ids=["5000_characters", "component_300", "30_components_of_200"],
)
def test_a_path_too_long_gives_its_length_not_a_raw_oserror(tmp_path: Path, make: Any) -> None:
    path = make(tmp_path)
    for call, what in [
        (read_logs, "logs"),
        (read_policy_table, "policy table"),
        (read_dsjson, "DSJSON file"),
    ]:
        with pytest.raises(
            DataFileError,
            match=rf"{what} path .* \({len(path):,} characters\) "
            r"is too long: .*\(ENAMETOOLONG\)",
        ) as info:
            call(path)
        assert type(info.value) is DataFileError


# --------------------------------------------------------------------------------------------
# URIs
# --------------------------------------------------------------------------------------------


def test_file_uris_are_local_paths(tmp_path: Path) -> None:
    d = tmp_path / "my logs"
    d.mkdir()
    pq.write_table(bandit(), d / "part 0.parquet")
    uri = (d / "part 0.parquet").as_uri()  # percent-encoded spaces
    assert "%20" in uri
    assert read_logs(uri).n == N
    assert read_logs(d.as_uri()).n == N
    assert sum(b.n for b in scan_logs(uri)) == N
    with pytest.raises(DataFileError, match=r"does not exist"):
        read_logs((d / "nope.parquet").as_uri())
    with pytest.raises(
        DataFileError,
        match=r"cannot read logs file://otherhost/x\.parquet: "
        r".*hostname",
    ):
        read_logs("file://otherhost/x.parquet")


@pytest.mark.parametrize("uri", ["http://example.com/logs.parquet", "ftp://host/logs.parquet"])
def test_an_unserved_scheme_is_named(uri: str) -> None:
    scheme = uri.split(":")[0]
    with pytest.raises(
        DataFileError,
        match=rf"{scheme}:// is not one of them\. Download the file "
        r"first",
    ):
        read_logs(uri)


def _stub_pafs(error: Exception) -> Any:
    """ope.io's pyarrow.fs with a FileSystem.from_uri that raises ``error``."""

    class FileSystem:
        @staticmethod
        def from_uri(uri: str) -> Any:
            raise error

    stub = types.SimpleNamespace(
        **{k: getattr(pafs, k) for k in dir(pafs) if not k.startswith("__")}
    )
    stub.FileSystem = FileSystem
    return stub


@pytest.mark.parametrize(
    "uri,error,match",
    [
        (
            "s3://bucket/logs.parquet",
            pa.ArrowNotImplementedError("Got S3 URI but Arrow compiled without S3 support"),
            r"the s3:// filesystem is not available on this machine .*It needs pyarrow's S3 filesystem",
        ),
        (
            "hdfs://namenode/logs",
            OSError("Unable to load libjvm"),
            r"the hdfs:// filesystem is not available .*Java runtime and Hadoop's libhdfs",
        ),
        (
            "gs://bucket/logs.parquet",
            OSError("Could not resolve host: storage.googleapis.com"),
            r"cannot reach logs gs://bucket/logs\.parquet: Could not resolve host.*GCS filesystem",
        ),
    ],
    ids=["s3_not_built", "hdfs_no_java", "gs_unreachable"],
)
def test_an_unavailable_filesystem_names_the_scheme_and_what_to_install(
    monkeypatch: pytest.MonkeyPatch, uri: str, error: Exception, match: str
) -> None:
    monkeypatch.setattr(ope._paths, "pafs", _stub_pafs(error))
    with pytest.raises(DataFileError, match=match) as info:
        read_logs(uri)
    assert "missing" not in str(info.value) and "does not exist" not in str(info.value)


def test_gcs_uris_get_a_bounded_retry_time(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = []

    class FileSystem:
        @staticmethod
        def from_uri(uri: str) -> Any:
            seen.append(uri)
            raise OSError("stop here")

    stub = _stub_pafs(OSError())
    stub.FileSystem = FileSystem
    monkeypatch.setattr(ope._paths, "pafs", stub)
    for uri in (
        "gs://b/x.parquet",
        "gs://b/x.parquet?project_id=p",
        "gs://b/x?retry_limit_seconds=5",
    ):
        with pytest.raises(DataFileError):
            read_logs(uri)
    assert seen == [
        "gs://b/x.parquet?retry_limit_seconds=20",
        "gs://b/x.parquet?project_id=p&retry_limit_seconds=20",
        "gs://b/x?retry_limit_seconds=5",
    ]


@pytest.fixture
def fake_bucket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``s3://bucket/...`` served from ``tmp_path/bucket`` through a pyarrow SubTreeFileSystem."""
    root = tmp_path / "store"
    (root / "bucket").mkdir(parents=True)
    fs = pafs.SubTreeFileSystem(str(root), pafs.LocalFileSystem())

    def from_uri(uri: str, *, what: str = "logs") -> tuple[Any, str]:
        assert uri.startswith("s3://")
        return fs, uri[len("s3://") :]

    monkeypatch.setattr(ope._paths, "filesystem_from_uri", from_uri)
    return root / "bucket"


def test_remote_files_and_directories_read_through_pyarrow_fs(fake_bucket: Path) -> None:
    pq.write_table(bandit(), fake_bucket / "one.parquet")
    (fake_bucket / "logs" / "day=1").mkdir(parents=True)
    (fake_bucket / "logs" / "day=2").mkdir()
    pq.write_table(bandit(0), fake_bucket / "logs" / "day=1" / "part.parquet")
    pq.write_table(bandit(100), fake_bucket / "logs" / "day=2" / "part.parquet")
    (fake_bucket / "logs" / "_SUCCESS").write_text("")
    assert read_logs("s3://bucket/one.parquet").n == N
    logs = read_logs("s3://bucket/logs")
    assert logs.n == 2 * N and sorted(set(logs.column("day").tolist())) == [1, 2]
    assert logs.report.source == "s3://bucket/logs" and logs.report.files_read == 2
    assert sum(b.n for b in scan_logs("s3://bucket/one.parquet", batch_size=3)) == N
    with pytest.raises(DataFileError, match=r"logs s3://bucket/nope\.parquet does not exist"):
        read_logs("s3://bucket/nope.parquet")
    (fake_bucket / "bad.parquet").write_bytes(b"not parquet")
    with pytest.raises(DataFileError, match=r"bad\.parquet is not a parquet file"):
        read_logs("s3://bucket/bad.parquet")


def test_remote_policy_tables_and_dsjson(fake_bucket: Path) -> None:
    logs = read_logs(bandit())
    table = pa.table(
        {
            "event_id": np.arange(N),
            "policy": ["p"] * N,
            "action": np.arange(N) % 2,
            "probability": np.ones(N),
        }
    )
    pq.write_table(table, fake_bucket / "policy.parquet")
    (fake_bucket / "policy.csv").write_text(
        "event_id,policy,action,probability\n" + "".join(f"{i},p,{i % 2},1.0\n" for i in range(N))
    )
    for uri in ("s3://bucket/policy.parquet", "s3://bucket/policy.csv"):
        tp = target_propensities(logs, uri)
        assert tp.names == ["p"] and np.allclose(tp.values[:, 0], 1.0, atol=0)
    (fake_bucket / "x.json").write_text(
        '{"EventId": "0", "_label_cost": -1.0, "_label_probability": 0.5, "_labelIndex": 0, '
        '"a": [1, 2], "p": [0.5, 0.5], "c": {"_multi": [{"x": 1}, {"x": 2}]}}\n'
    )
    assert read_dsjson("s3://bucket/x.json").n == 1


# --------------------------------------------------------------------------------------------
# the same policy for policy tables and importer inputs
# --------------------------------------------------------------------------------------------


@needs_fifo
def test_policy_tables_and_importers_refuse_fifos(tmp_path: Path) -> None:
    logs = read_logs(bandit())
    for name, call in [
        ("policy.csv", read_policy_table),
        ("policy.parquet", lambda p: target_propensities(logs, p)),
        ("x.json", read_dsjson),
        ("all.csv", read_obd),
    ]:
        fifo = tmp_path / name
        os.mkfifo(fifo)
        with pytest.raises(DataFileError, match=r"is a FIFO \(named pipe\), not a regular file"):
            within_timeout(lambda: call(fifo), fifos=(fifo,))


@needs_fifo
def test_an_obd_campaign_whose_item_context_is_a_fifo_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "random" / "all"
    d.mkdir(parents=True)
    (d / "all.csv").write_text(
        ",timestamp,item_id,position,click,propensity_score\n0,2019-11-24,3,1,0,0.5\n"
    )
    os.mkfifo(d / "item_context.csv")
    with pytest.raises(DataFileError, match=r"item_context\.csv .*is a FIFO"):
        within_timeout(lambda: read_obd(d), fifos=(d / "item_context.csv",))


def test_dsjson_refuses_a_directory(tmp_path: Path) -> None:
    with pytest.raises(DataFileError, match=r"DSJSON file path .* is a directory; give one file"):
        read_dsjson(tmp_path)


@needs_symlink
def test_a_policy_table_directory_with_a_self_link_is_read_once(tmp_path: Path) -> None:
    logs = read_logs(bandit())
    d = tmp_path / "policy"
    d.mkdir()
    table = pa.table(
        {
            "event_id": np.arange(N),
            "policy": ["p"] * N,
            "action": np.arange(N) % 2,
            "probability": np.ones(N),
        }
    )
    pq.write_table(table, d / "part-0.parquet")
    os.symlink(d, d / "again")
    tp = target_propensities(logs, d)  # read twice, every row would be a duplicate
    assert np.allclose(tp.values[:, 0], 1.0, atol=0)


def test_locate_input_lists_regular_files_in_sorted_order(tmp_path: Path) -> None:
    d = tmp_path / "logs"
    (d / "b").mkdir(parents=True)
    (d / "_temporary").mkdir()
    for p in ("b/2.parquet", "b/1.parquet", "a.parquet", ".crc", "_SUCCESS", "_temporary/x"):
        (d / p).write_bytes(b"")
    found = locate_input(d)
    assert found.is_dir and found.filesystem is None
    assert [Path(f).relative_to(d).as_posix() for f in found.files] == [
        "a.parquet",
        "b/1.parquet",
        "b/2.parquet",
    ]
    assert found.skipped == ()


def test_evaluate_notes_name_the_skipped_entries(tmp_path: Path) -> None:
    if not hasattr(os, "symlink"):
        pytest.skip("no os.symlink")
    d = logs_dir(tmp_path)
    os.symlink(d, d / "self")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ev = ope.evaluate(read_logs(d), None, estimators=("ips",))
    text = " ".join(ev.notes) if hasattr(ev, "notes") else str(ev)
    assert f"{d / 'self'} (a link to {d}, a folder already read)" in text
