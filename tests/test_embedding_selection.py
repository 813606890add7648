"""The embedding's dimensions chosen per candidate policy (``ActionEmbedding(select=...)``,
``ope.tune_embedding``): the search and the rules against hand-rolled ones, the evaluation that
splices each candidate's subset, the command line, the report and the simulator's knob."""

from __future__ import annotations

import html
import itertools
import json
import math
import re
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest
from scipy import stats

import ope
from ope.evaluation import EmbeddingChoice, tune_embedding
from ope.evaluation.tuning import SLOPE_C
from ope.exceptions import ParameterError
from ope.marginal import ActionEmbedding
from ope.results import compare
from ope.simulate import CatalogBandit

pytestmark = pytest.mark.filterwarnings("ignore::ope.exceptions.OPEWarning")

DIMS = ("e0", "e1", "e2")


@pytest.fixture(scope="module")
def env():
    return CatalogBandit(
        n_items=2000,
        n_candidates=20,
        n_requests=100,
        n_embedding_dims=3,
        n_categories=4,
        n_candidate_clusters=10,
        embedding_effects=(1.0, 0.2, 0.0),
        seed=0,
    )


@pytest.fixture(scope="module")
def logs(env):
    return ope.read_logs(env.sample(3000, rng=0)).with_action_features(env.action_features())


def _subset_estimates(logs, estimator="mips"):
    """Every non-empty subset -> policy -> the estimator's estimate (one evaluation each)."""
    out = {}
    for k in range(len(DIMS), 0, -1):
        for subset in itertools.combinations(DIMS, k):
            ev = ope.evaluate(
                logs, estimators=(estimator,), embedding=ActionEmbedding(columns=subset), rng=0
            )
            out[subset] = {p: ev.estimates[(p, estimator)] for p in ev.policies}
    return out


def _width(est, delta=0.1):
    return stats.t.ppf(1 - delta, est.n - 1) * est.std_error


def _slope_exact(by_subset, policy):
    """SLOPE++ by hand: level by level from the full set, each level widest first."""
    accepted = [by_subset[DIMS][policy]]
    chosen = DIMS
    for k in range(len(DIMS) - 1, 0, -1):
        level = sorted(itertools.combinations(DIMS, k), key=lambda s: -_width(by_subset[s][policy]))
        for s in level:
            est = by_subset[s][policy]
            if not all(
                abs(a.value - est.value) <= _width(est) + SLOPE_C * _width(a) for a in accepted
            ):
                return chosen
            accepted.append(est)
            chosen = s
    return chosen


def test_restricted_keeps_the_named_dimensions_in_order():
    emb = ActionEmbedding(columns=("a", "b", "c"), select="slope", min_dims=2)
    sub = emb.restricted(["c", "a"])
    assert sub.columns == ("a", "c") and sub.select is None and sub.min_dims == 1
    assert ActionEmbedding(estimated=("x", "y")).restricted("y").estimated == ("y",)
    table = {"x": object(), "y": object()}
    dist = ActionEmbedding(distribution=table).restricted(["y"])
    assert list(dist.distribution) == ["y"] and dist.distribution["y"] is table["y"]
    with pytest.raises(ParameterError, match="subset of"):
        emb.restricted(["z"])
    with pytest.raises(ParameterError, match="subset of"):
        emb.restricted([])
    with pytest.raises(ParameterError, match="one dimension"):
        ActionEmbedding(clusters="g").restricted(["g"])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(columns=("a", "b"), select="lepski"), "select"),
        (dict(columns=("a", "b"), select="slope", search="all"), "search"),
        (dict(clusters="g", select="slope"), "cluster column is one"),
        (dict(columns=("a", "b"), select="slope", min_dims=3), "min_dims` \\(3\\) is more"),
        (dict(columns=("a", "b"), min_dims=0), "min_dims"),
        (dict(columns=("a", "b"), select="slope", search=""), "search"),
        # settings of the selection without one: they would be ignored
        (
            dict(columns=("a", "b", "c"), min_dims=2, search="greedy"),
            r"search='greedy' and min_dims=2 apply only with select=.*select='slope'",
        ),
        (dict(columns=("a", "b"), search="exact"), r"search='exact' apply only with select="),
        (dict(estimated=("a", "b"), min_dims=2), r"min_dims=2 apply only with select=.*it out"),
    ],
)
def test_selection_arguments_are_checked(kwargs, match):
    with pytest.raises(ParameterError, match=match):
        ActionEmbedding(**kwargs)


def test_a_restricted_embedding_drops_the_whole_selection():
    emb = ActionEmbedding(columns=("a", "b", "c"), select="mse", search="greedy", min_dims=2)
    sub = emb.restricted(["a", "b"])
    assert (sub.select, sub.search, sub.min_dims) == (None, None, 1)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (
            {"estimatorz": ("mips",)},
            r"tune_embedding\(\) got an unknown option 'estimatorz' \(did you mean 'estimator'",
        ),
        (
            {"reward_rnage": (0, 1)},
            r"tune_embedding\(\) got an unknown option 'reward_rnage' .*'reward_range'",
        ),
        ({"rule": ""}, r"`rule` must be one of 'slope', 'mse'; got ''"),
        ({"search": ""}, r"`search` must be one of 'greedy', 'exact'; got ''"),
    ],
)
def test_tune_embedding_refuses_misspelt_options_and_blank_choices(logs, kwargs, match):
    with pytest.raises(ParameterError, match=match):
        tune_embedding(logs, embedding=ActionEmbedding(columns=DIMS), **kwargs)


def test_slope_exact_search_is_the_hand_rolled_walk(logs):
    by_subset = _subset_estimates(logs)
    choice = tune_embedding(logs, embedding=ActionEmbedding(columns=DIMS), rule="slope")
    assert isinstance(choice, EmbeddingChoice) and choice.search == "exact"
    assert choice.rule.startswith("SLOPE++")
    for p in choice.chosen:
        assert choice.value_for(p) == _slope_exact(by_subset, p)
        assert choice.embedding_for(p).columns == choice.value_for(p)
    table = choice.table()
    first = table.groupby("policy").head(1)
    assert (first["dimensions"] == "e0, e1, e2").all() and first["accepted"].all()
    # every row's estimate is that subset's, and its width the t bound's
    for row in table.itertuples():
        est = by_subset[tuple(row.dimensions.split(", "))][row.policy]
        assert row.value == pytest.approx(est.value, rel=1e-12)
        assert row.width == pytest.approx(_width(est), rel=1e-12)
    assert table.groupby("policy")["chosen"].sum().eq(1).all()
    # the walk stops at its first refusal: at most one refused row per policy, the last
    for _, rows in table.groupby("policy", sort=False):
        refused = np.flatnonzero(~rows["accepted"].to_numpy())
        assert refused.size <= 1 and (refused.size == 0 or refused[0] == len(rows) - 1)


def test_mse_rule_takes_the_smallest_bound(logs):
    by_subset = _subset_estimates(logs)
    choice = tune_embedding(logs, embedding=ActionEmbedding(columns=DIMS), rule="mse")
    assert choice.rule.startswith("smallest MSE bound")
    t = stats.t.ppf(0.9, logs.n - 1)
    for p in choice.chosen:
        full = by_subset[DIMS][p]
        bounds = {}
        for s, ests in by_subset.items():
            if s == DIMS:
                bounds[s] = full.std_error**2
            else:
                diff = compare(ests[p], full)
                bounds[s] = ests[p].std_error ** 2 + (abs(diff.value) + t * diff.std_error) ** 2
        assert choice.value_for(p) == min(bounds, key=lambda s: (bounds[s], -len(s)))
        mine = choice.table().query("policy == @p").set_index("dimensions")
        for s, b in bounds.items():
            assert mine.loc[", ".join(s), "mse_bound"] == pytest.approx(b, rel=1e-9)


def test_greedy_search_drops_one_dimension_at_a_time(logs):
    choice = tune_embedding(
        logs, embedding=ActionEmbedding(columns=DIMS), rule="slope", search="greedy"
    )
    assert choice.search == "greedy"
    for _, rows in choice.table().groupby("policy", sort=False):
        sizes = rows["n_dims"].to_numpy()
        assert sizes[0] == 3 and (np.diff(sizes) <= 0).all()
        # a level holds the subsets of the one kept from the level above (3, then 2 of size 1)
        assert (sizes == 2).sum() <= 3 and (sizes == 1).sum() <= 2


def test_min_dims_bounds_the_search(logs):
    choice = tune_embedding(
        logs, embedding=ActionEmbedding(columns=DIMS, select="slope", min_dims=2)
    )
    assert all(len(v) >= 2 for v in choice.chosen.values())
    assert choice.table()["n_dims"].min() >= 2


def test_evaluate_splices_each_candidates_subset(logs):
    emb = ActionEmbedding(columns=DIMS, select="slope")
    ev = ope.evaluate(logs, estimators=("ips", "mips", "snmips"), embedding=emb, rng=0)
    choice = tune_embedding(logs, embedding=emb, rng=0)
    assert ev.settings == {"embedding": choice.chosen}
    assert [type(c).__name__ for c in ev.tuning] == ["EmbeddingChoice"]
    plain = ope.evaluate(logs, estimators=("ips",), rng=0)
    for p, dims in choice.chosen.items():
        alone = ope.evaluate(
            logs, estimators=("mips", "snmips"), embedding=ActionEmbedding(columns=dims), rng=0
        )
        for e in ("mips", "snmips"):
            got, want = ev.estimates[(p, e)], alone.estimates[(p, e)]
            assert (got.value, got.std_error, got.ci_low) == (
                want.value,
                want.std_error,
                want.ci_low,
            )
        assert ev.estimates[(p, "ips")].value == plain.estimates[(p, "ips")].value
        (check,) = [c for c in ev.embedding_checks if c.policy == p]
        (want_check,) = [c for c in alone.embedding_checks if c.policy == p]
        assert check.difference == pytest.approx(want_check.difference, rel=1e-12)
    # each candidate's notes: its own embedding and its own test, once
    for p, dims in choice.chosen.items():
        said = [n for n in ev.notes if "weigh each row" in n and p in n.split(":")[0]]
        assert len(said) == 1 and ", ".join(dims) in said[0]
    assert len([n for n in ev.notes if "per-item minus marginal" in n]) == len(ev.policies)
    doc = json.loads(json.dumps(ev.to_dict()))
    assert doc["settings_per_policy"] == {
        "embedding": {p: list(v) for p, v in choice.chosen.items()}
    }
    assert doc["tuning"][0]["setting"] == "embedding"
    assert "embedding per candidate" in ev.summary()


def test_embedding_given_per_candidate(logs):
    names = list(ope.evaluate(logs, estimators=("ips",)).policies)
    given = {p: ActionEmbedding(columns=DIMS[: 1 + i % 3]) for i, p in enumerate(names)}
    ev = ope.evaluate(logs, estimators=("mips",), embedding=given, rng=0)
    assert ev.settings["embedding"] == {p: e.columns for p, e in given.items()}
    for p, e in given.items():
        alone = ope.evaluate(logs, estimators=("mips",), embedding=e, rng=0)
        assert ev.estimates[(p, "mips")].value == alone.estimates[(p, "mips")].value
    choice = tune_embedding(logs, embedding=ActionEmbedding(columns=DIMS), rule="mse")
    again = ope.evaluate(logs, estimators=("ips", "mips"), embedding=choice, rng=0)
    assert again.settings["embedding"] == choice.chosen and again.tuning == (choice,)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(estimators=("ips",)), "marginalized"),
        (dict(embedding={"greedy": "e0"}), "ActionEmbedding"),
        (dict(embedding={"greedy": ActionEmbedding(columns=DIMS, select="mse")}), "select"),
        (dict(embedding={"nobody": ActionEmbedding(columns=DIMS)}), "not candidates"),
    ],
)
def test_embedding_per_candidate_is_checked(logs, kwargs, match):
    options = dict(estimators=("mips",), embedding=ActionEmbedding(columns=DIMS, select="slope"))
    with pytest.raises(ParameterError, match=match):
        ope.evaluate(logs, **{**options, **kwargs})


def test_a_plan_or_a_scan_refuses_a_selection(logs, tmp_path):
    emb = ActionEmbedding(columns=DIMS, select="slope")
    with pytest.raises(ParameterError, match="chosen per candidate"):
        ope.evaluation.EvaluationPlan.build(estimators=("mips",), embedding=emb)
    path = tmp_path / "logs.parquet"
    pq.write_table(logs.table, path)
    with pytest.raises(ParameterError, match="in memory"):
        ope.evaluate(ope.scan_logs(path), estimators=("mips",), embedding=emb)
    with pytest.raises(ParameterError, match="one dimension"):
        tune_embedding(logs, embedding=ActionEmbedding(clusters="cluster"))
    with pytest.raises(ParameterError, match="greedy"):
        tune_embedding(
            logs, embedding=ActionEmbedding(columns=[f"c{i}" for i in range(11)]), search="exact"
        )
    with pytest.raises(ParameterError, match="estimator"):
        tune_embedding(logs, embedding=ActionEmbedding(columns=DIMS), estimator="ips")


def _cli(*args, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "ope", "evaluate", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_command_line_and_report(logs, env, tmp_path):
    path, items = tmp_path / "logs.parquet", tmp_path / "items.parquet"
    pq.write_table(logs.table, path)
    pq.write_table(env.action_features(), items)
    common = [path, "--estimator", "ips", "mips", "--embedding-columns", *DIMS, "--items", items]
    report = tmp_path / "r.html"
    out = _cli(*common, "--select-embedding", "slope", "--seed", "0", "--json", "--report", report)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    want = tune_embedding(logs, embedding=ActionEmbedding(columns=DIMS), rng=0).chosen
    assert doc["settings_per_policy"] == {"embedding": {p: list(v) for p, v in want.items()}}
    page = html.unescape(re.sub(r"<[^>]+>", "", report.read_text()))
    assert (
        "Settings per candidate" in page
        and "by SLOPE++ (Tucker & Lee 2021) over subsets of e0, e1, e2" in page
    )
    for p, v in want.items():
        assert f"{p} {{{', '.join(v)}}}" in page
    # usage errors keep the one-document promise with exit code 2 and name the flag
    for extra, flag in (
        (["--embedding-search", "greedy"], "--embedding-search"),
        (["--min-embedding-dims", "2"], "--min-embedding-dims"),
        (["--select-embedding", "mse", "--min-embedding-dims", "4"], "--min-embedding-dims"),
    ):
        bad = _cli(*common, *extra, "--json")
        assert bad.returncode == 2, bad.stderr
        assert json.loads(bad.stdout)["error"]["flag"] == flag
    clusters = _cli(
        path, "--estimator", "mips", "--cluster-column", "cluster", "--items", items,
        "--select-embedding", "slope", "--json",
    )  # fmt: skip
    assert (
        clusters.returncode == 2
        and "one dimension" in json.loads(clusters.stdout)["error"]["message"]
    )
    # a search and a floor of dimensions with the rule (the plan is checked without them)
    greedy = _cli(
        *common, "--select-embedding", "slope", "--embedding-search", "greedy",
        "--min-embedding-dims", "2", "--seed", "0", "--json",
    )  # fmt: skip
    assert greedy.returncode == 0, greedy.stdout + greedy.stderr
    streamed = _cli(*common, "--select-embedding", "slope", "--streaming", "on", "--json")
    assert streamed.returncode == 2
    assert "--select-embedding" in json.loads(streamed.stdout)["error"]["message"]


def test_a_dimension_of_no_effect_leaves_the_reward_unchanged():
    base = dict(n_items=500, n_candidates=10, n_requests=20, n_embedding_dims=2, seed=3)
    env = CatalogBandit(**base, embedding_effects=(1.0, 0.0))
    full = CatalogBandit(**base)
    # same draws: the same catalog and candidates; e1's effect is gone
    np.testing.assert_array_equal(env.candidate_sets, full.candidate_sets)
    emb = env.item_embeddings
    m = np.zeros(2, dtype=np.int64)
    same_e0 = np.flatnonzero(emb[:, 0] == emb[0, 0])
    other = same_e0[emb[same_e0, 1] != emb[0, 1]][0]
    q = env._embedding_effect(m, emb[[0, other]])
    assert q[0] == q[1]
    assert not math.isclose(*full._embedding_effect(m, emb[[0, other]]))
    for bad, match in (
        ((1.0,), "one scale per"),
        ((1.0, 2.0), "embedding_effects"),
        ("ab", "sequence"),
    ):
        with pytest.raises(ParameterError, match=match):
            CatalogBandit(**base, embedding_effects=bad)


def test_only_marginalized_estimators_keep_each_candidates_notes(logs):
    emb = ActionEmbedding(columns=DIMS, select="slope")
    ev = ope.evaluate(logs, estimators=("mips",), embedding=emb, rng=0)
    chosen = ev.settings["embedding"]
    said = [n for n in ev.notes if "weigh each row" in n]
    # one note per group of candidates with the same subset, each naming its candidates
    assert len(said) == len(set(chosen.values()))
    assert all(n.split(":")[0].split(", ")[0] in chosen for n in said)
    tests = [n for n in ev.notes if "per-item minus marginal" in n]
    assert sorted(n.split(":")[0] for n in tests) == sorted(chosen)
    for c in ev.embedding_checks:  # each candidate's test is of its own subset
        alone = ope.evaluate(
            logs, estimators=("mips",), embedding=ActionEmbedding(columns=chosen[c.policy]), rng=0
        )
        (want,) = [w for w in alone.embedding_checks if w.policy == c.policy]
        assert c.note() == want.note()


def test_a_tuned_clip_level_and_a_tuned_embedding_together(logs):
    ev = ope.evaluate(
        logs,
        estimators=("ips", "clipped_ips", "mips"),
        max_weight="slope",
        embedding=ActionEmbedding(columns=DIMS, select="mse"),
        rng=0,
    )
    assert set(ev.settings) == {"max_weight", "embedding"}
    assert [type(c).__name__ for c in ev.tuning] == ["SettingChoice", "EmbeddingChoice"]


def test_dropped_observed_columns_stay_out_of_the_reward_model():
    env = CatalogBandit(
        n_items=500, n_candidates=10, n_requests=50, n_embedding_dims=3, n_categories=3,
        n_candidate_clusters=5, stochastic_embeddings=True, seed=1,
    )  # fmt: skip
    logs = ope.read_logs(env.sample(2000, rng=0))
    emb = ActionEmbedding(estimated=DIMS)
    sub = emb.restricted(["e0"])
    assert sub.dropped == ("e1", "e2")
    ev = ope.evaluate(logs, estimators=("mdr",), embedding=sub, rng=0)
    assert not set(DIMS) & set(ev.model_columns["context"])
    with pytest.raises(ParameterError, match="select"):
        ope.diagnose(logs, embedding=ActionEmbedding(estimated=DIMS, select="slope"))
    gen = ActionEmbedding(estimated=DIMS, select="slope", rng=np.random.default_rng(0))
    ev = ope.evaluate(logs, estimators=("mips",), embedding=gen, rng=0)
    table = ev.tuning[0].table()
    for p, dims in ev.settings["embedding"].items():
        row = table[(table.policy == p) & table.chosen].iloc[0]
        assert row.value == ev.estimates[(p, "mips")].value
