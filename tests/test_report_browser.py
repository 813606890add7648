"""The HTML report in a real browser: headless Chromium renders it, and nothing leaves the page.

For the bundled sample and for a simulation the test starts Chromium (from the system's package
manager) headless, with every host name resolving nowhere, and

- takes a screenshot and checks it is not blank (many colours, much ink);
- records the browser's network log (``--log-net-log``) and checks that the page made no
  request other than to ``file:`` or ``data:`` URLs (the browser's own background requests, to
  update servers and the like, are not made on behalf of the page and are told apart by their
  initiator);
- dumps the DOM the browser built and checks every section and every figure is in it.

A control page with an external stylesheet and image shows that the network check sees page
requests (so the test can fail). Skipped, with the reason, only when no Chromium is installed.
"""

from __future__ import annotations

import html.parser
import json
import os
import shutil
import signal
import subprocess
import warnings
from pathlib import Path
from typing import Final

import numpy as np
import pytest

pytest.importorskip("matplotlib", reason="the report's figures need the plot extra")

import ope  # noqa: E402
from ope.report import REPORT_SECTIONS, write_report  # noqa: E402
from ope.simulate import ContextualBandit  # noqa: E402

#: executables tried, in order
BROWSERS: Final = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

#: seconds one browser run may take before it is stopped (a run takes 1-3 s)
BROWSER_TIMEOUT: Final = 120

#: flags of every run: headless, no sandbox (containers), nothing started in the background,
#: and no host name resolves, so even a request the page made could not leave the machine
FLAGS: Final = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
    "--host-resolver-rules=MAP * ~NOTFOUND",
)

#: URL schemes a self-contained page may load
LOCAL_SCHEMES: Final = ("file:", "data:", "about:", "blob:", "chrome:", "chrome-error:")


def _browser() -> str | None:
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    return None


BROWSER = _browser()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        BROWSER is None,
        reason="no Chromium found (tried " + ", ".join(BROWSERS) + "); install it with the "
        "system's package manager (e.g. apt-get install chromium) to run the browser test",
    ),
]


def _run(args: list[str], profile: Path) -> subprocess.CompletedProcess[str]:
    """Run the browser in its own process group; on timeout stop that group (the browser and
    the helpers it started) and fail."""
    command = [str(BROWSER), *FLAGS, f"--user-data-dir={profile}", *args]
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=BROWSER_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"the browser did not finish within {BROWSER_TIMEOUT} s: {command}")
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def _netlog_events(path: Path) -> list[dict]:
    """The events of a Chromium NetLog file (completed if the browser stopped mid-write)."""
    raw = path.read_text(encoding="utf-8").strip()
    for tail in ("", "]}", "}]}"):
        try:
            doc = json.loads(raw.rstrip(",") + tail)
            break
        except json.JSONDecodeError:
            continue
    else:
        raise AssertionError(f"unreadable network log {path}")
    types = {v: k for k, v in doc["constants"]["logEventTypes"].items()}
    return [dict(e, type_name=types.get(e["type"], "")) for e in doc.get("events", [])]


def page_requests(netlog: Path) -> list[str]:
    """URLs of the requests made on behalf of the page (not by the browser for itself)."""
    urls = []
    for event in _netlog_events(netlog):
        params = event.get("params") or {}
        if event["type_name"] != "URL_REQUEST_START_JOB" or "url" not in params:
            continue
        by_page = params.get("initiator", "not an origin") != "not an origin" or "file://" in str(
            params.get("network_isolation_key", "")
        )
        if by_page:
            urls.append(params["url"])
    return urls


def _load(page: Path, tmp: Path, name: str) -> tuple[np.ndarray, list[str], str]:
    """(screenshot pixels, URLs the page requested, the DOM) of ``page`` in the browser."""
    png, netlog = tmp / f"{name}.png", tmp / f"{name}.netlog.json"
    shot = _run(
        [
            f"--screenshot={png}",
            "--window-size=1280,2400",
            f"--log-net-log={netlog}",
            page.as_uri(),
        ],
        tmp / f"{name}-profile",
    )
    assert png.is_file(), f"no screenshot: exit {shot.returncode}\n{shot.stderr[-2000:]}"
    dom = _run(["--dump-dom", page.as_uri()], tmp / f"{name}-profile-dom")
    assert dom.returncode == 0 and "</html>" in dom.stdout, dom.stderr[-2000:]
    import matplotlib.image

    return matplotlib.image.imread(png), page_requests(netlog), dom.stdout


class _Dom(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.ids += [v for k, v in attrs if k == "id"]


def _check_rendered(pixels: np.ndarray, requests: list[str], dom: str, n_figures: int) -> None:
    rgb = (np.asarray(pixels)[..., :3] * 255).round().astype(np.uint8)
    assert rgb.shape[:2] == (2400, 1280)
    ink = (rgb < 235).any(axis=-1).mean()
    colours = np.unique(rgb.reshape(-1, 3), axis=0).shape[0]
    assert ink > 0.03, f"the screenshot is nearly blank ({ink:.1%} ink)"
    assert colours > 200, f"the screenshot has only {colours} colours"
    leaving = [u for u in requests if not u.startswith(LOCAL_SCHEMES)]
    assert not leaving, f"the page made network requests: {leaving}"
    parsed = _Dom()
    parsed.feed(dom)
    for sid, _ in REPORT_SECTIONS:
        assert sid in parsed.ids, f"section {sid!r} missing from the rendered page"
    assert parsed.tags.count("svg") == n_figures
    assert "script" not in parsed.tags


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ope.OPEWarning)
        return fn(*args, **kwargs)


def test_the_control_page_shows_that_page_requests_are_seen(tmp_path):
    page = tmp_path / "control.html"
    page.write_text(
        '<!DOCTYPE html><html><head><link rel="stylesheet" href="https://cdn.example.com/x.css">'
        '</head><body><p>control</p><img src="http://example.invalid/pixel.png"></body></html>',
        encoding="utf-8",
    )
    netlog = tmp_path / "control.netlog.json"
    _run(
        [
            f"--screenshot={tmp_path / 'control.png'}",
            "--window-size=400,300",
            f"--log-net-log={netlog}",
            page.as_uri(),
        ],
        tmp_path / "control-profile",
    )
    leaving = [u for u in page_requests(netlog) if not u.startswith(LOCAL_SCHEMES)]
    assert sorted(leaving) == ["http://example.invalid/pixel.png", "https://cdn.example.com/x.css"]


def test_the_bundled_sample_report_renders(tmp_path):
    sample = ope.load_sample()
    logs = ope.read_logs(sample.path)
    ev = _quiet(
        ope.evaluate,
        logs,
        estimators=("ips", "clipped_ips", "snips"),
        max_weight=50.0,
        reward_range=(0, 1),
    )
    d = _quiet(
        ope.diagnose,
        logs,
        by=["segment"],
        max_weight=50.0,
        reward_range=(0, 1),
        target_width=0.02,
        new_rows=100_000,
    )
    path = write_report(tmp_path / "sample.html", evaluation=ev, diagnostics=d, truth=sample.truth)
    n_figures = path.read_text(encoding="utf-8").count("<svg")
    _check_rendered(*_load(path, tmp_path, "sample"), n_figures)


def test_a_simulation_report_renders(tmp_path):
    env = ContextualBandit(n_actions=6, unsupported_actions=1, seed=0)
    logs = ope.read_logs(env.sample(20_000, rng=1, distributions=True))
    ev = _quiet(
        ope.evaluate, logs, estimators=("dm", "ips", "snips", "dr"), reward_range=(0, 1), rng=0
    )
    d = _quiet(ope.diagnose, logs, by=["segment"], reward_range=(0, 1))
    truth = {p: env.true_value(p) for p in env.candidate_policies}
    truth["logging"] = env.true_value("logging")
    path = write_report(tmp_path / "simulation.html", evaluation=ev, diagnostics=d, truth=truth)
    n_figures = path.read_text(encoding="utf-8").count("<svg")
    _check_rendered(*_load(path, tmp_path, "simulation"), n_figures)
