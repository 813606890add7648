"""estimators="auto": the cross-validated choice of estimator (ope.evaluation.auto), from the API,
the command line and the report."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import warnings

import numpy as np
import pytest

import ope
from ope.evaluation import EstimatorChoice, auto_candidates, select_estimators
from ope.exceptions import ParameterError
from ope.simulate import ContextualBandit

pytestmark = pytest.mark.filterwarnings("ignore::ope.exceptions.OPEWarning")


@pytest.fixture(scope="module")
def env() -> ContextualBandit:
    return ContextualBandit(n_actions=5, n_contexts=50, seed=0)


@pytest.fixture(scope="module")
def with_dists(env):
    return env.sample(2000, rng=0, distributions=True)


def test_candidates_are_the_estimators_that_apply(env, with_dists) -> None:
    plain = ope.read_logs(env.sample(500, rng=0))
    assert auto_candidates(plain) == ("ips", "snips")  # no distributions: no DM/DR
    logs = ope.read_logs(with_dists)
    assert auto_candidates(logs) == ("ips", "snips", "dr", "sndr")
    assert auto_candidates(logs, max_weight=10.0, tau=5.0, shrinkage=1.0) == (
        "ips",
        "snips",
        "clipped_ips",
        "dr",
        "sndr",
        "switch_dr",
        "dros",
    )
    assert select_estimators(plain, n_splits=2, rng=0).validator == "ips"


def test_dm_and_dr_are_no_candidates_without_features(with_dists) -> None:
    """Distributions without a feature column (as DSJSON imported without features): the
    reward model has nothing to fit on, so DR and SNDR are not compared and the validator is
    IPS; given the context columns by name they are back."""
    from ope.context import context_column_choice

    logs = ope.read_logs(with_dists)
    features = context_column_choice(logs).columns
    assert features
    bare = ope.read_logs(logs.table.drop_columns(features))
    assert auto_candidates(bare) == ("ips", "snips")
    assert select_estimators(bare, n_splits=2, rng=0).validator == "ips"
    ev = ope.evaluate(bare, estimators="auto", rng=0)
    assert set(ev.table()["estimator"]) <= {"ips", "snips"}
    assert auto_candidates(logs, context_columns=features[:1]) == ("ips", "snips", "dr", "sndr")
    assert auto_candidates(logs, context_columns=[]) == ("ips", "snips")


def test_the_rule_by_hand(with_dists) -> None:
    """The scores are the mean and standard error of the squared differences from the
    validator over the splits, recomputed here from the same splits; the choice is the
    smallest mean + one standard error."""
    logs = ope.read_logs(with_dists)
    choice = select_estimators(
        logs, candidates=("ips", "snips"), validator="ips", n_splits=3, rng=7
    )
    assert isinstance(choice, EstimatorChoice) and choice.seed == 7
    g = np.random.default_rng(7)
    n = logs.n
    errors: dict[tuple[str, str], list[float]] = {}
    for k in range(3):
        order = g.permutation(n)
        train, valid = np.sort(order[: n // 2]), np.sort(order[n // 2 :])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a = ope.evaluate(logs.table.take(train), estimators=("ips", "snips"), rng=7 + k)
            b = ope.evaluate(logs.table.take(valid), estimators=("ips",), rng=7 + k)
        for p in a.policies:
            for e in ("ips", "snips"):
                d = a.estimates[(p, e)].value - b.estimates[(p, "ips")].value
                errors.setdefault((p, e), []).append(d * d)
    table = choice.table().set_index(["policy", "estimator"])
    for (p, e), v in errors.items():
        assert table.loc[(p, e), "score"] == pytest.approx(np.mean(v), rel=1e-12)
        se = np.std(v, ddof=1) / math.sqrt(3)
        assert table.loc[(p, e), "score_se"] == pytest.approx(se, rel=1e-12)
    for p, chosen in choice.chosen.items():
        rows = table.loc[p]
        assert chosen == rows["criterion"].idxmin()
        assert bool(rows.loc[chosen, "chosen"]) and bool(rows.loc[chosen, "close"])
    assert "smallest cross-validated error" in choice.reason(p)


def test_auto_picks_the_doubly_robust_family_where_ips_misses_mass(env) -> None:
    """With a support gap (the logger never plays the best action in one segment) IPS misses
    that mass; the DR validator sees it through the reward model and the choice avoids IPS."""
    gap = ContextualBandit(n_actions=5, n_contexts=50, seed=0, unsupported_actions=1)
    table = gap.sample(3000, rng=1, distributions=True)
    ev = ope.evaluate(table, estimators="auto", rng=1)
    assert ev.selection.validator == "dr"
    assert ev.selection.estimator_for("optimal") != "ips"


def test_evaluate_auto_keeps_every_estimator_and_says_why(with_dists) -> None:
    ev = ope.evaluate(with_dists, estimators="auto", rng=3)
    assert set(ev.table()["estimator"]) == {"ips", "snips", "dr", "sndr"}
    assert set(ev.selection.chosen) == set(ev.policies)
    assert sum("estimator chosen:" in n for n in ev.notes) == len(ev.policies)
    d = ev.to_dict()
    assert d["estimator_selection"]["chosen"] == ev.selection.chosen
    json.dumps(d)
    again = ope.evaluate(with_dists, estimators="auto", rng=3)
    assert again.selection.chosen == ev.selection.chosen
    assert again.selection.table().equals(ev.selection.table())
    assert "Estimator choice" in ev.selection.summary()


def test_refusals(with_dists, tmp_path) -> None:
    logs = ope.read_logs(with_dists)
    with pytest.raises(ParameterError, match="validator"):
        select_estimators(logs, validator="snips")
    for splits in (1, 101, 10**9):
        with pytest.raises(ParameterError, match="n_splits"):
            select_estimators(logs, n_splits=splits)
    for share in (0.0, 1.0, 1.5):
        with pytest.raises(ParameterError, match="train_share"):
            select_estimators(logs, train_share=share)
    for bad in ("ips", ["ips", "ips"], ["nope"], [], [object()]):
        with pytest.raises(ParameterError, match="candidates"):
            select_estimators(logs, candidates=bad)
    choice = select_estimators(logs, candidates=("ips",), validator="ips", n_splits=2, rng=0)
    with pytest.raises(ParameterError, match="`policy` must name a candidate"):
        choice.estimator_for("nobody")
    path = tmp_path / "logs.parquet"
    import pyarrow.parquet as pq

    pq.write_table(with_dists, path)
    with pytest.raises(ParameterError, match="not a scan"):
        ope.evaluate(ope.scan_logs(path), estimators="auto")


def test_command_line_and_report(with_dists, tmp_path) -> None:
    import pyarrow.parquet as pq

    path = tmp_path / "logs.parquet"
    pq.write_table(with_dists, path)
    report = tmp_path / "r.html"

    def run(*args: str) -> dict:
        out = subprocess.run(
            [sys.executable, "-m", "ope", "evaluate", str(path), *args, "--json"],
            capture_output=True,
            text=True,
            check=False,
        )
        return json.loads(out.stdout)

    doc = run("--estimator", "auto", "--seed", "0", "--report", str(report))
    assert doc["ok"] and doc["estimator_selection"]["candidates"] == ["ips", "snips", "dr", "sndr"]
    page = report.read_text()
    assert "answer from" in page and "off-policy cross-validation" in page
    bad = run("--estimator", "auto", "ips")
    assert bad["exit_code"] == 2 and bad["error"]["flag"] == "--estimator"
    streamed = run("--estimator", "auto", "--streaming", "on")
    assert streamed["exit_code"] == 2 and "--estimator auto" in streamed["error"]["message"]


def test_the_benchmark_script_quick_run(tmp_path) -> None:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "estimator_selection.py"
    spec = importlib.util.spec_from_file_location("ope_benchmark_estimator_selection", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = module.main(["--quick", "--designs", "support gap", "--out", str(tmp_path / "s.json")])
    row = result["rows"][0]
    assert row["design"] == "support gap" and set(row["rmse"]) == {
        "auto",
        "ips",
        "snips",
        "dr",
        "sndr",
    }
    assert sum(row["chosen"].values()) == 3 * 5
