"""``ope evaluate`` with the marginalized estimators: --cluster-column, --embedding-columns and
--items."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from ope.cli import EXIT_OK, EXIT_USAGE, main
from ope.simulate import CatalogBandit


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    env = CatalogBandit(n_items=300, n_candidates=20, n_requests=100, seed=0)
    folder = tmp_path_factory.mktemp("catalog")
    logs, items = folder / "logs.parquet", folder / "items.parquet"
    pq.write_table(env.sample(3000, rng=1), logs)
    pq.write_table(env.action_features(), items)
    return env, str(logs), str(items)


def test_evaluate_mips_from_the_command_line(catalog, capsys):
    env, logs, items = catalog
    argv = ["evaluate", logs, "--estimator", "ips", "mips", "snmips", "mdr"]
    argv += ["--cluster-column", "cluster", "--items", items, "--seed", "0", "--json"]
    assert main(argv) == EXIT_OK
    doc = json.loads(capsys.readouterr().out)
    rows = {(r["policy"], r["estimator"]): r for r in doc["estimates"]}
    assert {e for _, e in rows} == {"ips", "mips", "snmips", "mdr"}
    checks = {c["policy"]: c for c in doc["embedding_checks"]}
    assert set(checks) == set(env.candidate_policies)
    # cluster_shift moves mass within clusters: its marginal weights are far lighter
    assert checks["cluster_shift"]["ess_embedding"] > 3 * checks["cluster_shift"]["ess_items"]
    assert (
        rows[("cluster_shift", "mips")]["std_error"] < rows[("cluster_shift", "ips")]["std_error"]
    )
    assert any("no direct effect" in n for n in doc["notes"])
    # the same embedding as the tuple of the item's columns e0, e1 (which is the cluster)
    argv2 = ["evaluate", logs, "--estimator", "mips", "--embedding-columns", "e0", "e1"]
    argv2 += ["--items", items, "--seed", "0", "--json"]
    assert main(argv2) == EXIT_OK
    doc2 = json.loads(capsys.readouterr().out)
    by_policy = {r["policy"]: r["value"] for r in doc2["estimates"]}
    for p, value in by_policy.items():
        assert value == pytest.approx(rows[(p, "mips")]["value"], rel=1e-12)


def test_streamed_mips_equals_the_in_memory_run(catalog, capsys):
    """--streaming on reads the candidates and distributions batch by batch: the same MIPS and
    SNMIPS as the in-memory run; offcem is refused there (its model needs every row)."""
    env, logs, items = catalog
    base = ["evaluate", logs, "--estimator", "ips", "mips", "snmips"]
    base += ["--cluster-column", "cluster", "--items", items, "--json"]
    docs = {}
    for mode in ("on", "off"):
        assert main([*base, "--streaming", mode]) == EXIT_OK
        docs[mode] = json.loads(capsys.readouterr().out)
    assert docs["on"]["streaming"] and not docs["off"]["streaming"]
    on = {(r["policy"], r["estimator"]): r for r in docs["on"]["estimates"]}
    off = {(r["policy"], r["estimator"]): r for r in docs["off"]["estimates"]}
    assert on.keys() == off.keys() and len(on) == 3 * len(env.candidate_policies)
    for key, row in on.items():
        assert row["value"] == pytest.approx(off[key]["value"], rel=1e-12)
        assert row["std_error"] == pytest.approx(off[key]["std_error"], rel=1e-10)
    argv = ["evaluate", logs, "--estimator", "offcem", "--cluster-column", "cluster"]
    assert main([*argv, "--items", items, "--streaming", "on", "--json"]) == EXIT_USAGE
    doc = json.loads(capsys.readouterr().out)
    assert "offcem" in doc["error"]["message"]


@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        # one flag: the estimator that needs an embedding (the message says which flags give one)
        (["--estimator", "mips"], '"flag": "--estimator"'),
        (["--items", "ITEMS"], "--items"),
        (["--cluster-column", "cluster", "--embedding-columns", "e0"], "--cluster-column"),
        (["--estimator", "ips", "--cluster-column", "cluster", "--items", "ITEMS"], "mips"),
    ],
)
def test_embedding_flags_misused_name_the_flag(catalog, capsys, extra, flag):
    _, logs, items = catalog
    argv = ["evaluate", logs, *[items if a == "ITEMS" else a for a in extra], "--json"]
    assert main(argv) == EXIT_USAGE
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False and flag in json.dumps(doc)
    # the command line's words: flags, not the API's ActionEmbedding(...) and its keywords
    message = doc["error"]["message"]
    assert "ActionEmbedding" not in message and "distribution=" not in message


def test_a_missing_item_table_is_a_data_error(catalog, capsys, tmp_path):
    _, logs, _ = catalog
    argv = ["evaluate", logs, "--estimator", "mips", "--cluster-column", "cluster"]
    code = main([*argv, "--items", str(tmp_path / "nope.parquet"), "--json"])
    assert code not in (EXIT_OK, EXIT_USAGE)
    assert "item table" in capsys.readouterr().out
    # no --items and no table in the logs: the error says how to give one
    code = main([*argv, "--json"])
    out = capsys.readouterr().out
    assert code != EXIT_OK and "--items" in out


def test_report_shows_per_item_against_marginal_weights(catalog, tmp_path, capsys):
    env, logs, items = catalog
    out = tmp_path / "report.html"
    argv = ["report", logs, "--estimator", "ips", "mips", "--cluster-column", "cluster"]
    argv += ["--items", items, "--seed", "0", "--reward-range", "0", "1", "--out", str(out)]
    assert main(argv) == EXIT_OK
    html = out.read_text(encoding="utf-8")
    assert 'id="embedding-weights"' in html
    section = html.split('id="embedding-weights"', 1)[1].split("</table>", 1)[0]
    for policy in env.candidate_policies:
        assert f"<td>{policy}</td>" in section
    assert "ESS per embedding" in section
    # without marginalized estimators the table is absent
    out2 = tmp_path / "plain.html"
    argv2 = ["report", logs, "--estimator", "ips", "--seed", "0", "--out", str(out2)]
    assert main(argv2) == EXIT_OK
    assert 'id="embedding-weights"' not in out2.read_text(encoding="utf-8")


def test_diagnose_from_the_command_line_tests_the_embedding(catalog, capsys):
    env, logs, items = catalog
    argv = ["diagnose", logs, "--cluster-column", "cluster", "--items", items, "--json"]
    assert main(argv) == EXIT_OK
    doc = json.loads(capsys.readouterr().out)
    checks = doc["diagnostics"]["embedding_checks"]
    assert {c["policy"] for c in checks} == set(env.candidate_policies)
