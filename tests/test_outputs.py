"""Every file the command line writes is safe under concurrency, signals and faults.

One writer (``ope._output``) serves ``ope import``, ``learn``, ``action-table``, ``report`` and
``evaluate --report``: without ``--force`` the final move never replaces a file that appeared
during the work (two processes racing: exactly one wins, the file is whole); SIGTERM ends a run
like SIGINT (temporary file removed, one JSON document, exit 128 + the signal); a write the
system refuses (no space, permission, read-only file system) is exit 73 naming the path and the
reason, before the work when a probe can tell; an empty output name is a usage error; one error
is one line on stderr.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import ope
import ope._output as output
from ope._output import atomic_path, check_outputs
from ope.cli import (
    EXIT_CANTCREAT,
    EXIT_DATAERR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_USAGE,
    _one_line,
    main,
)
from ope.exceptions import OutputError, ParameterError
from tests.test_cli_contract import bandit_frame
from tests.test_import_dsjson import LINES

ROOT = Path(__file__).resolve().parents[1]

#: bound on every wait for a subprocess (seconds): a hang fails the test instead of the suite
WAIT = 120.0

#: the flags of ``ope learn`` that every learn case shares
LEARN = ("--context-columns", "x0", "x1")

#: ``ope report``'s flags on the bandit fixture
REPORT = ("--reward-range", "0", "1")


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def _temps(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp" in p.name or ".ope-probe-" in p.name)


def _error_lines(err: str) -> list[str]:
    """stderr without argparse's usage block and without warnings: the error itself."""
    lines = err.splitlines()
    return [
        line for line in lines if line.strip() and not line.startswith(("usage:", " ", "warning ("))
    ]


@pytest.fixture
def dsjson(tmp_path: Path) -> Path:
    p = tmp_path / "events.json"
    p.write_text("\n".join(LINES) + "\n")
    return p


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("outputs_logs")
    path = root / "logs.parquet"
    bandit_frame(n=300, seed=1).to_parquet(path)
    return path


# ---------------------------------------------------------------------------------------------
# 1. exclusive create: never over a file that appeared during the work
# ---------------------------------------------------------------------------------------------
def _no_renameat2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(output, "_renameat2", lambda: None)


def _no_links(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_renameat2(monkeypatch)

    def refuse(src: object, dst: object) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(output.os, "link", refuse)


MOVES = {"renameat2": lambda mp: None, "hard link": _no_renameat2, "exclusive create": _no_links}


@pytest.mark.parametrize("move", sorted(MOVES))
def test_a_file_that_appears_during_the_work_is_kept(tmp_path, monkeypatch, move):
    MOVES[move](monkeypatch)
    dest = tmp_path / "out.csv"
    with pytest.raises(
        ParameterError,
        match=r"^argument --out: '.*out\.csv' exists: another "
        r"process created it while ope was writing it; pass --force to ",
    ):
        with atomic_path(dest, flag="--out") as tmp:
            tmp.write_text("ours\n")
            dest.write_text("theirs\n")  # another process finished first
    assert dest.read_text() == "theirs\n"
    assert _temps(tmp_path) == []
    with atomic_path(tmp_path / "new.csv") as tmp:  # and a free name is written
        tmp.write_text("ours\n")
    assert (tmp_path / "new.csv").read_text() == "ours\n" and _temps(tmp_path) == []


def test_force_replaces_a_file_that_appeared(tmp_path):
    dest = tmp_path / "out.csv"
    with atomic_path(dest, force=True) as tmp:
        tmp.write_text("ours\n")
        dest.write_text("theirs\n")
    assert dest.read_text() == "ours\n" and _temps(tmp_path) == []


#: a CLI run in a subprocess whose final move waits until every racer has done its work (a
#: ready file each in the barrier folder), so both pass the check before either moves
BARRIER = """
import os, sys, time, pathlib
import ope._output as o
from ope.cli import main
barrier, n = pathlib.Path(sys.argv[1]), int(sys.argv[2])
original = o._move_noreplace
def wait_for_all(tmp, dest):
    (barrier / f"ready.{os.getpid()}").touch()
    deadline = time.monotonic() + 60
    while len(list(barrier.glob("ready.*"))) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    return original(tmp, dest)
o._move_noreplace = wait_for_all
sys.exit(main(sys.argv[3:]))
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _race(commands: list[list[str]]) -> list[tuple[int, str, str]]:
    procs = [
        subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=ROOT
        )
        for cmd in commands
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=WAIT)
        results.append((proc.returncode, out, err))
    return results


def test_two_imports_racing_at_the_move_one_wins_the_file_is_whole(tmp_path, dsjson):
    out = tmp_path / "logs.parquet"
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    argv = ["import", "dsjson", str(dsjson), "--out", str(out), "--on-invalid", "drop", "--json"]
    results = _race([[sys.executable, "-c", BARRIER, str(barrier), "2", *argv]] * 2)
    codes = sorted(code for code, _, _ in results)
    assert codes == [EXIT_OK, EXIT_USAGE], results
    assert len(list(barrier.glob("ready.*"))) == 2  # both did the work: the move decided
    loser = next(r for r in results if r[0] == EXIT_USAGE)
    doc = json.loads(loser[1])
    assert doc["error"]["flag"] == "--out"
    assert "exists: another process created it while ope was writing it" in doc["error"]["message"]
    assert len(_error_lines(loser[2])) == 1
    assert ope.read_logs(out).column("event_id").tolist() == ["e0", "events.json:1", "e2", "e13"]
    assert _temps(tmp_path) == []


def test_two_plain_imports_racing_one_wins(tmp_path, dsjson):
    """``python -m ope import`` twice at once, no hook: whichever way the race goes (the check
    or the move), exactly one succeeds and the file is whole."""
    out = tmp_path / "logs.parquet"
    argv = ["import", "dsjson", str(dsjson), "--out", str(out), "--on-invalid", "drop"]
    results = _race([[sys.executable, "-m", "ope", *argv]] * 2)
    assert sorted(code for code, _, _ in results) == [EXIT_OK, EXIT_USAGE], results
    assert ope.read_logs(out).n == 4
    assert _temps(tmp_path) == []


# ---------------------------------------------------------------------------------------------
# 2. SIGTERM like SIGINT
# ---------------------------------------------------------------------------------------------
#: a CLI run in a subprocess that stops (sleeps) once its temporary file is written, before
#: the move: the test signals it there
STALL = """
import pathlib, sys, time
import ope._output as o
from ope.cli import main
original = o._fsync
def stall(path, *, directory=False):
    if not directory and ".tmp" in path.name:
        (path.parent / "stalled").touch()
        time.sleep(120)
    return original(path, directory=directory)
o._fsync = stall
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize(
    ("signum", "code", "kind"),
    [
        (signal.SIGTERM, EXIT_TERMINATED, "Terminated"),
        (signal.SIGINT, EXIT_INTERRUPTED, "KeyboardInterrupt"),
    ],
)
def test_a_signal_mid_import_removes_the_temporary_file_and_prints_one_document(
    tmp_path, dsjson, signum, code, kind
):
    out = tmp_path / "logs.parquet"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            STALL,
            "import",
            "dsjson",
            str(dsjson),
            "--out",
            str(out),
            "--on-invalid",
            "drop",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=ROOT,
    )
    deadline = time.monotonic() + WAIT
    while not (
        list(tmp_path.glob(".logs.parquet.*.tmp.parquet")) and (tmp_path / "stalled").exists()
    ):  # written, closed, not yet moved
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the temporary file never appeared"
        time.sleep(0.02)
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=WAIT)
    assert proc.returncode == code == 128 + signum
    doc = json.loads(stdout)  # exactly one document: json.loads refuses trailing data
    assert doc["ok"] is False and doc["exit_code"] == code and doc["error"]["type"] == kind
    assert _error_lines(stderr) == [f"ope import: {kind}: {doc['error']['message']}"]
    assert not out.exists() and _temps(tmp_path) == []


@pytest.mark.parametrize(
    ("signum", "code"), [(signal.SIGTERM, EXIT_TERMINATED), (signal.SIGINT, EXIT_INTERRUPTED)]
)
def test_a_signal_whose_exception_was_lost_still_stops_the_run(
    tmp_path, dsjson, monkeypatch, signum, code
):
    """Python drops an exception raised inside a ``__del__`` (a parquet writer's, say): the
    signal is recorded, so the file is not published and the run still ends as stopped."""
    out = tmp_path / "logs.parquet"
    original = output._fsync

    def swallowed(path: Path, *, directory: bool = False) -> None:
        if not directory:
            with contextlib.suppress(KeyboardInterrupt):  # as a __del__ would
                os.kill(os.getpid(), signum)
                time.sleep(5)  # the handler runs here, at the latest when the sleep ends
        original(path, directory=directory)

    monkeypatch.setattr(output, "_fsync", swallowed)
    code_, stdout, err = _run(
        "import", "dsjson", dsjson, "--out", out, "--on-invalid", "drop", "--json"
    )
    assert code_ == code and json.loads(stdout)["exit_code"] == code
    assert len(_error_lines(err)) == 1
    assert not out.exists() and _temps(tmp_path) == []
    assert output.stop_requested() is None  # cleared for the next command


# ---------------------------------------------------------------------------------------------
# 3. the system refuses the write: exit 73 naming the path and the reason
# ---------------------------------------------------------------------------------------------
def _commands(tmp_path: Path, logs: Path, dsjson: Path) -> dict[str, tuple[list[str], Path]]:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    return {
        "import": (
            [
                "import",
                "dsjson",
                str(dsjson),
                "--on-invalid",
                "drop",
                "--out",
                str(out / "logs.parquet"),
            ],
            out / "logs.parquet",
        ),
        "learn": (
            ["learn", str(logs), *LEARN, "--out", str(out / "policy.csv")],
            out / "policy.csv",
        ),
        "report": (["report", str(logs), *REPORT, "--out", str(out / "r.html")], out / "r.html"),
        "evaluate --report": (
            ["evaluate", str(logs), *REPORT, "--report", str(out / "e.html")],
            out / "e.html",
        ),
        "action-table": (
            ["action-table", str(logs), "--out", str(out / "t.parquet")],
            out / "t.parquet",
        ),
    }


COMMANDS = ("import", "learn", "report", "evaluate --report", "action-table")


@pytest.mark.parametrize("command", COMMANDS)
def test_no_space_while_writing_is_exit_73_and_leaves_nothing(
    tmp_path, monkeypatch, logs, dsjson, command
):
    argv, dest = _commands(tmp_path, logs, dsjson)[command]

    def full(path: Path, *, directory: bool = False) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # the flush of the written file

    monkeypatch.setattr(output, "_fsync", full)
    code, stdout, err = _run(*argv, "--json")
    assert code == EXIT_CANTCREAT == 73
    message = json.loads(stdout)["error"]["message"]
    assert json.loads(stdout)["error"]["type"] == "OutputError"
    assert f"cannot write {str(dest)!r}: No space left on device (ENOSPC)" in message
    assert _error_lines(err) == [f"ope {argv[0]}: OutputError: {message}"]
    assert not dest.exists() and _temps(dest.parent) == []


def test_a_writer_that_wraps_the_system_error_is_still_exit_73(tmp_path, monkeypatch, logs):
    """``ope learn`` writes its table through a writer that re-raises a DataFileError (exit 65
    before): the cause is found."""
    import ope.learning as learning

    def wrapped(*args: object, **kwargs: object) -> None:
        try:
            raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT))
        except OSError as exc:
            raise ope.DataFileError(f"could not write policy table: {exc}") from None

    monkeypatch.setattr(learning, "write_learner_policy_table", wrapped)
    dest = tmp_path / "policy.csv"
    code, _, err = _run("learn", str(logs), *LEARN, "--out", str(dest))
    assert code == EXIT_CANTCREAT
    assert _error_lines(err) == [
        f"ope learn: OutputError: argument --out: cannot write {str(dest)!r}: "
        f"{os.strerror(errno.EDQUOT)} (EDQUOT); free space (or the quota) or write elsewhere."
    ]
    assert _temps(tmp_path) == []


def test_an_unwritable_folder_is_refused_before_the_work(tmp_path, monkeypatch, logs):
    def called(args: object) -> None:
        raise AssertionError("the command ran")

    monkeypatch.setitem(__import__("ope.cli").cli._COMMANDS, "learn", called)
    real_open = os.open

    def denied(path: object, flags: int, mode: int = 0o777) -> int:
        if ".ope-probe-" in str(path):  # the folder refuses the probe file (as for another user's)
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
        return real_open(path, flags, mode)

    monkeypatch.setattr(output.os, "open", denied)
    code, stdout, err = _run("learn", str(logs), *LEARN, "--out", str(tmp_path / "p.csv"), "--json")
    assert code == EXIT_CANTCREAT
    assert json.loads(stdout)["error"] == {
        "type": "OutputError",
        "flag": "--out",
        "message": f"argument --out: cannot write {str(tmp_path)!r}: Permission denied "
        "(EACCES); fix the permissions or write elsewhere.",
    }
    assert len(_error_lines(err)) == 1


def test_force_over_a_file_the_user_cannot_write_is_refused_before_the_work(tmp_path, monkeypatch):
    dest = tmp_path / "theirs.csv"
    dest.write_text("another user's\n")
    real_access = os.access
    monkeypatch.setattr(
        output.os, "access", lambda p, mode: False if Path(p) == dest else real_access(p, mode)
    )
    with pytest.raises(
        OutputError,
        match=r"^argument --out: cannot write '.*theirs\.csv': "
        r"Permission denied \(EACCES\)",
    ):
        check_outputs([("--out", dest)], force=True)
    assert dest.read_text() == "another user's\n"
    check_outputs([("--out", tmp_path / "free.csv")], force=True)  # the folder is fine


def test_a_read_only_file_system_is_refused_by_the_probe(tmp_path, monkeypatch):
    real_open = os.open

    def read_only(path: object, flags: int, mode: int = 0o777) -> int:
        if ".ope-probe-" in str(path):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        return real_open(path, flags, mode)

    monkeypatch.setattr(output.os, "open", read_only)
    with pytest.raises(OutputError, match=r"Read-only file system \(EROFS\); write elsewhere"):
        check_outputs([("--report", tmp_path / "r.html")])
    assert _temps(tmp_path) == []


def test_a_folder_that_takes_no_new_files_is_not_blamed_on_permissions():
    """/proc refuses new files with ENOENT, not EACCES: the advice is to write elsewhere, not
    to fix permissions that are not the cause."""
    if not Path("/proc/self").is_dir():
        pytest.skip("no /proc on this system")
    with pytest.raises(OutputError, match=r"\(ENOENT\); the folder takes no new files") as info:
        check_outputs([("--out", Path("/proc/x.parquet"))])
    assert "permissions" not in str(info.value)


@pytest.fixture
def tiny_tmpfs(tmp_path: Path):
    """A 64 kB tmpfs (needs root and mount): a real full disk."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    point = tmp_path / "tiny"
    point.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield point
    finally:
        subprocess.run(["umount", str(point)], check=False)


def test_a_real_full_disk_and_a_real_read_only_one(tiny_tmpfs, tmp_path, logs):
    big = tmp_path / "big.json"
    base = json.loads(LINES[0])
    base["EventId"], base["_label_cost"] = "@ID@", "@COST@"
    head, rest = json.dumps(base).split('"@COST@"')  # the cost comes first in the line
    mid, tail = rest.split("@ID@")
    costs = -np.random.default_rng(0).random(20_000)  # 160 kB that do not compress: over 64 kB
    big.write_text("".join(f"{head}{c!r}{mid}e{i}{tail}\n" for i, c in enumerate(costs.tolist())))
    dest = tiny_tmpfs / "logs.parquet"
    code, stdout, err = _run("import", "dsjson", str(big), "--out", str(dest), "--json")
    assert code == EXIT_CANTCREAT
    assert "No space left on device (ENOSPC)" in json.loads(stdout)["error"]["message"]
    assert len(_error_lines(err)) == 1
    assert sorted(os.listdir(tiny_tmpfs)) == []
    subprocess.run(["mount", "-o", "remount,ro", str(tiny_tmpfs)], check=True)
    code, stdout, _ = _run("learn", str(logs), *LEARN, "--out", str(tiny_tmpfs / "p.csv"), "--json")
    assert code == EXIT_CANTCREAT
    assert "Read-only file system (EROFS)" in json.loads(stdout)["error"]["message"]
    assert "certificate" not in json.loads(stdout)  # refused before the work


# ---------------------------------------------------------------------------------------------
# 4. empty and blank output names
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("name", ["", " ", "\t "])
def test_an_empty_or_blank_output_name_is_a_usage_error(tmp_path, logs, dsjson, command, name):
    argv, _ = _commands(tmp_path, logs, dsjson)[command]
    argv = [*argv[:-1], name]  # the output flag is last
    flag = argv[-2]
    code, stdout, err = _run(*argv, "--json")
    assert code == EXIT_USAGE
    assert json.loads(stdout)["error"]["message"] == (
        f"argument {flag}: needs a file name; got {name!r}."
    )
    assert _error_lines(err) == [
        f"ope {argv[0]}: error: argument {flag}: needs a file name; got {name!r}."
    ]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == []


# ---------------------------------------------------------------------------------------------
# 5. one error, one line
# ---------------------------------------------------------------------------------------------
def test_a_multi_line_message_is_one_line_on_stderr(tmp_path):
    frame = pd.DataFrame(
        {
            "event_id": ["a", "b"],
            "action": ["x", "y"],
            "propensity": ["0.5", "p"],
            "reward": [1.0, 0.0],
        }
    )
    path = tmp_path / "bad.parquet"
    frame.to_parquet(path)
    code, stdout, err = _run("evaluate", str(path), "--reward-range", "0", "1", "--json")
    assert code == EXIT_DATAERR
    message = json.loads(stdout)["error"]["message"]
    assert "\n" in message  # the document keeps the message as raised
    lines = _error_lines(err)
    assert len(lines) == 1 and len(err.strip().splitlines()) == 1
    assert lines[0] == "ope evaluate: SchemaError: " + _one_line(message)
    assert " - " not in lines[0]


@pytest.mark.parametrize(
    "argv",
    [
        ["evaluate", "{missing}", "--reward-range", "0", "1"],
        ["import", "dsjson", "{dsjson}", "--out", "{out}"],
        ["learn", "{logs}", *LEARN, "--out", "{out_dir}/p.txt"],
        ["report", "{logs}", *REPORT, "--out", "{logs}"],
    ],
)
def test_one_error_is_one_line_across_commands(tmp_path, logs, dsjson, argv):
    names = {
        "missing": tmp_path / "nope.parquet",
        "dsjson": dsjson,
        "out": tmp_path / "o.parquet",
        "logs": logs,
        "out_dir": tmp_path,
    }
    code, _, err = _run(*[a.format(**names) for a in argv])
    assert code in (EXIT_USAGE, EXIT_DATAERR)
    lines = _error_lines(err)
    assert len(lines) == 1 and lines[0].startswith(f"ope {argv[0]}: "), err


def test_one_line_folding_keeps_sentences_and_drops_bullets():
    assert _one_line("2 problems:\n  - column a\n  - column b") == "2 problems: column a; column b"
    assert _one_line("First.\nSecond") == "First. Second"
    assert _one_line("one line") == "one line"


# ---------------------------------------------------------------------------------------------
# 6. remote URIs: an unreachable store fails within the bound
# ---------------------------------------------------------------------------------------------
#: a local address that never answers: a listener that never accepts, its backlog filled, so
#: further connection attempts are dropped (as by a firewall); nothing leaves the machine
BLACK_HOLE = """
import socket, sys, time
server = socket.socket(); server.bind(("127.0.0.1", 0)); server.listen(0)
port = server.getsockname()[1]
fillers = []
for _ in range(4):
    c = socket.socket(); c.setblocking(False)
    try:
        c.connect(("127.0.0.1", port))
    except BlockingIOError:
        pass
    fillers.append(c)
print(port, flush=True)
sys.stdin.read()  # until the test closes it
"""


@pytest.fixture
def black_hole():
    proc = subprocess.Popen(
        [sys.executable, "-c", BLACK_HOLE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        port = int(proc.stdout.readline())
        yield port
    finally:
        proc.stdin.close()
        proc.wait(timeout=WAIT)
        proc.stdout.close()


def _s3_env() -> dict[str, str]:
    """Credentials that need no lookup (no instance metadata service is asked)."""
    return {
        **_env(),
        "AWS_ACCESS_KEY_ID": "ope-test",
        "AWS_SECRET_ACCESS_KEY": "ope-test",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }


def test_an_s3_filesystem_gets_connect_and_request_timeouts(monkeypatch):
    pafs = pytest.importorskip("pyarrow.fs")
    if not hasattr(pafs, "S3FileSystem"):
        pytest.skip("pyarrow without S3")
    from ope._paths import (
        REMOTE_ATTEMPTS,
        REMOTE_CONNECT_SECONDS,
        REMOTE_REQUEST_SECONDS,
        REMOTE_TIMEOUT_SECONDS,
        filesystem_from_uri,
    )

    for key, value in _s3_env().items():
        if key.startswith("AWS_"):
            monkeypatch.setenv(key, value)
    fs, path = filesystem_from_uri(
        "s3://bucket/k.parquet?region=us-east-1&endpoint_override=127.0.0.1:9&scheme=http"
    )
    options = fs.__reduce__()[1][0]
    assert (options["connect_timeout"], options["request_timeout"]) == (5.0, 10.0)
    assert (REMOTE_CONNECT_SECONDS, REMOTE_REQUEST_SECONDS, REMOTE_ATTEMPTS) == (5.0, 10.0, 2)
    # two requests (HeadObject, then a listing), each attempted twice, stay under the bound
    assert 2 * REMOTE_ATTEMPTS * REMOTE_CONNECT_SECONDS < REMOTE_TIMEOUT_SECONDS == 30.0
    assert path == "bucket/k.parquet" and options["endpoint_override"] == "127.0.0.1:9"


@pytest.mark.slow
def test_an_s3_endpoint_that_never_answers_fails_within_the_bound(black_hole):
    """An S3 endpoint on 127.0.0.1 that drops connections: ``cannot reach`` (exit 65) before the
    subprocess's timeout of twice the bound (pyarrow's defaults took over 100 s here)."""
    pafs = pytest.importorskip("pyarrow.fs")
    if not hasattr(pafs, "S3FileSystem"):
        pytest.skip("pyarrow without S3")
    from ope.io import REMOTE_TIMEOUT_SECONDS

    uri = (
        f"s3://bucket/k.parquet?region=us-east-1&endpoint_override=127.0.0.1:{black_hole}"
        "&scheme=http"
    )
    done = subprocess.run(
        [sys.executable, "-m", "ope", "validate", uri, "--json"],
        capture_output=True,
        text=True,
        env=_s3_env(),
        cwd=ROOT,
        timeout=2 * REMOTE_TIMEOUT_SECONDS,
    )
    assert done.returncode == EXIT_DATAERR
    error = json.loads(done.stdout)["error"]
    assert error["type"] == "DataFileError"
    assert error["message"].startswith(f"cannot reach logs {uri}: ")
    assert len(_error_lines(done.stderr)) == 1


def test_a_store_that_does_not_answer_within_the_bound_is_unreachable(monkeypatch):
    """Whatever the client's own timeouts (GCS has only a retry limit), ope stops waiting after
    ``REMOTE_TIMEOUT_SECONDS`` (shortened here)."""
    import threading

    import ope._paths as io_module

    release = threading.Event()

    def hang(raw: str, what: str) -> None:
        release.wait(WAIT)

    monkeypatch.setattr(io_module, "_stat_remote", hang)
    monkeypatch.setattr(io_module, "REMOTE_TIMEOUT_SECONDS", 0.2)
    try:
        code, stdout, err = _run("validate", "gs://bucket/logs.parquet", "--json")
    finally:
        release.set()
    assert code == EXIT_DATAERR
    assert json.loads(stdout)["error"]["message"].startswith(
        "cannot reach logs gs://bucket/logs.parquet: no answer within 0.2 s (the network, the "
        "bucket/host name or the endpoint). The gs:// filesystem needs pyarrow's GCS "
    )
    assert len(_error_lines(err)) == 1


@pytest.mark.skipif(sys.platform != "linux", reason="names of arbitrary bytes are a POSIX thing")
def test_names_that_are_not_utf8_are_refused_by_name(tmp_path):
    """A file or folder name the system holds but no text decodes (kept by Python as surrogate
    escapes) cannot be opened by pyarrow: an input is a DataFileError (exit 65), a destination
    an OutputError (exit 73), each naming the path; before, a UnicodeEncodeError (exit 1)."""
    from ope.exceptions import DataFileError

    frame = bandit_frame()
    good = tmp_path / "good.parquet"
    frame.to_parquet(good)
    odd = tmp_path / os.fsdecode(b"logs\xff.parquet")
    os.link(good, odd)
    folder = tmp_path / "folder"
    folder.mkdir()
    os.link(good, folder / os.fsdecode(b"part\xff.parquet"))
    for source in (odd, folder):
        with pytest.raises(DataFileError, match="not valid UTF-8"):
            ope.read_logs(source)
        code, out, _ = _run("evaluate", source, "--json")
        assert code == EXIT_DATAERR and "not valid UTF-8" in json.loads(out)["error"]["message"]
    # a folder or a special file of such a name that is never read is no obstacle
    ok = tmp_path / "ok"
    ok.mkdir()
    os.link(good, ok / "part0.parquet")
    (ok / os.fsdecode(b"empty\xff")).mkdir()
    os.mkfifo(ok / os.fsdecode(b"pipe\xff"))
    assert ope.read_logs(ok).n == len(frame)
    table = pd.DataFrame({"event_id": [0], "policy": ["p"], "action": [0], "probability": [1.0]})
    with pytest.raises(OutputError, match="not valid UTF-8"):
        ope.write_policy_table(table, tmp_path / os.fsdecode(b"out\xff.parquet"))
    code, out, _ = _run(
        "learn", good, *LEARN, "--out", tmp_path / os.fsdecode(b"policy\xff.parquet"), "--json"
    )
    assert code == EXIT_CANTCREAT and "not valid UTF-8" in json.loads(out)["error"]["message"]
