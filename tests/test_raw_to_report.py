"""From a producer's raw logs to a report for a named candidate, without writing Python.

Two walks a new user takes, through the real CLI (``ope.cli.main``):

* a DSJSON export with ``pdrop`` (rows dropped at a context-dependent rate): ``ope import
  dsjson`` then ``ope evaluate`` / ``ope report`` with ``--policy NAME=uniform``; the estimate
  equals the Horvitz-Thompson (Hajek) IPS computed by hand from the lines, and the unweighted
  IPS of the kept rows would differ;
* a raw Open Bandit Dataset folder: ``ope action-table`` reads the Bernoulli TS table off the
  ``bts`` campaign, then ``ope report`` on the ``random`` campaign with ``--policy
  bts=table:bts.csv``.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest

from ope.cli import main

K = 4


def _run(*argv: str) -> tuple[int, dict]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*argv, "--json", "--quiet"])
    document = json.loads(out.getvalue())  # exactly one JSON document
    assert document["exit_code"] == code, err.getvalue()
    return code, document


def _dsjson(path: Path, n: int = 3000, seed: int = 0) -> dict[str, np.ndarray]:
    """A CB DSJSON export: logger distribution p over K actions, reward = -cost in {0, 1},
    lines of the ``heavy`` users kept with probability 0.25 (``pdrop`` 0.75), others always."""
    rng = np.random.default_rng(seed)
    heavy = rng.random(n) < 0.5
    keep = np.where(heavy, rng.random(n) < 0.25, True)
    probs = rng.dirichlet(np.full(K, 2.0), size=n)
    action = (probs.cumsum(axis=1) > rng.random(n)[:, None]).argmax(axis=1)
    # heavy users click far more often: dropping them biases an unweighted estimate
    reward = (rng.random(n) < np.where(heavy, 0.8, 0.2) * (0.5 + action / (2 * K))).astype(float)
    lines = []
    for i in np.flatnonzero(keep):  # test fixture writer: one JSON line per kept event
        order = [int(action[i])] + [a for a in range(K) if a != action[i]]
        lines.append(
            json.dumps(
                {
                    "EventId": f"e{i}",
                    "_label_cost": -reward[i],
                    "_label_probability": float(probs[i, action[i]]),
                    "_label_Action": int(action[i]) + 1,
                    "_labelIndex": int(action[i]),
                    "a": [a + 1 for a in order],
                    "p": [float(probs[i, a]) for a in order],
                    "c": {
                        "user": {"heavy": bool(heavy[i])},
                        "_multi": [{"id": a} for a in range(K)],
                    },
                    **({"pdrop": 0.75} if heavy[i] else {}),
                }
            )
        )
    path.write_text("\n".join(lines) + "\n")
    s = np.where(heavy, 4.0, 1.0)[keep]
    w = (1.0 / K) / probs[keep, action[keep]]
    return {"s": s, "w": w, "r": reward[keep]}


def test_dsjson_export_to_report_for_a_named_candidate(tmp_path):
    rows = _dsjson(tmp_path / "export.json")
    logs = tmp_path / "logs.parquet"
    code, doc = _run("import", "dsjson", str(tmp_path / "export.json"), "--out", str(logs))
    assert code == 0 and doc["rows_written"] == rows["r"].size

    code, doc = _run(
        "evaluate",
        str(logs),
        "--policy",
        "u=uniform",
        "--estimator",
        "ips",
        "snips",
        "--reward-range",
        "0",
        "1",
    )
    assert code == 0
    values = {r["estimator"]: r["value"] for r in doc["estimates"] if r["policy"] == "u"}
    s, w, r = rows["s"], rows["w"], rows["r"]
    assert values["ips"] == pytest.approx(np.sum(s * w * r) / np.sum(s), rel=1e-12)
    assert values["snips"] == pytest.approx(np.sum(s * w * r) / np.sum(s * w), rel=1e-12)
    unweighted = np.mean(w * r)
    assert abs(values["ips"] - unweighted) > 0.05  # the weights matter on this export
    assert doc["weight_column"] == "weight"
    assert any(
        n.startswith("rows carry sampling weights (column `weight`, from pdrop)")
        for n in doc["notes"]
    )

    report = tmp_path / "report.html"
    code, doc = _run(
        "report",
        str(logs),
        "--policy",
        "u=uniform",
        "--reward-range",
        "0",
        "1",
        "--out",
        str(report),
    )
    assert code == 0
    html = report.read_text()
    assert "sampling weights" in html and ">u<" in html


def test_obd_folder_to_report_for_the_bernoulli_ts_candidate(tmp_path, monkeypatch):
    from tests.test_import_obd import _campaign

    _campaign(tmp_path / "bts" / "all", n=600)
    _campaign(tmp_path / "random" / "all", n=900)
    monkeypatch.chdir(tmp_path)
    code, doc = _run("action-table", "bts/all", "--format", "obd", "--out", "bts.csv")
    assert code == 0
    table = (tmp_path / "bts.csv").read_text().splitlines()
    assert table[0].replace('"', "") == "action,position,probability"

    code, doc = _run(
        "evaluate",
        "random/all",
        "--format",
        "obd",
        "--policy",
        "bts=table:bts.csv",
        "--estimator",
        "ips",
        "dr",
        "--reward-range",
        "0",
        "1",
    )
    assert code == 0
    estimators = {r["estimator"] for r in doc["estimates"] if r["policy"] == "bts"}
    assert estimators == {"ips", "dr"}

    code, doc = _run(
        "report",
        "random/all",
        "--format",
        "obd",
        "--policy",
        "bts=table:bts.csv",
        "--reward-range",
        "0",
        "1",
        "--out",
        "report.html",
    )
    assert code == 0
    assert ">bts<" in (tmp_path / "report.html").read_text()
