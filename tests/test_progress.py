"""Progress bars: drawn on stderr when it is a terminal, absent when piped or with --quiet, and
never in the --json document on stdout.

The command runs in a real process whose stderr is a pseudo-terminal (``os.openpty``), with
``OPE_PROGRESS`` unset, so ``ope._progress`` decides from ``isatty()`` as it does for a user.
The step shown is the CLI's loop over candidates x sequential estimators.
"""

from __future__ import annotations

import fcntl
import json
import os
import struct
import subprocess
import sys
import termios
import threading
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ope.simulate import TabularMDP

ROOT = Path(__file__).resolve().parents[1]
BAR = b"sequential estimates"


@pytest.fixture(scope="module")
def steps(tmp_path_factory):
    table = TabularMDP(n_states=4, n_actions=2, horizon=6, seed=0).sample(200, rng=1)
    path = tmp_path_factory.mktemp("progress") / "steps.parquet"
    pq.write_table(table, path)
    return str(path)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "OPE_PROGRESS"}
    env["TERM"] = "xterm"
    return env


def _on_a_terminal(*argv: str) -> tuple[int, bytes, bytes]:
    """Run ``python -m ope argv`` with stderr on a pseudo-terminal: (code, stdout, terminal)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # EIO: every writer closed the terminal
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ope", *argv],
            stdout=subprocess.PIPE,
            stderr=slave,
            stdin=subprocess.DEVNULL,
            cwd=ROOT,
            env=_env(),
        )
        os.close(slave)
        slave = -1
        stdout, _ = proc.communicate(timeout=300)
        reader.join(timeout=30)
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    return proc.returncode, stdout, b"".join(chunks)


def _piped(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ope", *argv], capture_output=True, cwd=ROOT, env=_env(), timeout=300
    )


def test_bar_on_a_terminal(steps):
    code, stdout, terminal = _on_a_terminal("evaluate", steps)
    assert code == 0, terminal.decode(errors="replace")
    assert BAR in terminal
    assert BAR not in stdout and b"pdis" in stdout


def test_no_bar_when_piped(steps):
    proc = _piped("evaluate", steps)
    assert proc.returncode == 0, proc.stderr.decode()
    assert BAR not in proc.stderr and BAR not in proc.stdout


def test_no_bar_with_quiet(steps):
    for argv in (("--quiet", "evaluate", steps), ("evaluate", steps, "--quiet")):
        code, stdout, terminal = _on_a_terminal(*argv)
        assert code == 0, terminal.decode(errors="replace")
        assert BAR not in terminal and b"pdis" in stdout


def test_bar_never_in_the_json_document(steps):
    code, stdout, terminal = _on_a_terminal("evaluate", steps, "--json")
    assert code == 0
    assert BAR in terminal  # on the terminal (stderr) ...
    doc = json.loads(stdout)  # ... and stdout is exactly the one document
    assert doc["ok"] is True and doc["options"]["quiet"] is False
